/*
 * The oracle of the decoders' tests: kcm_api_decode() reads an object from
 * a json-c tree with the rules kcm_api_decode_text() applies to text.
 * kcm decodes text only; the unit tests, fuzzers and benchmarks link this
 * (kcm_api_tree) to check its decoders against it.
 */
#ifndef KCM_TESTS_ORACLE_TREE_H
#define KCM_TESTS_ORACLE_TREE_H

#include <json-c/json.h>

#include "kcm/api.h"

/* Decode one object of `kind` from its json-c tree. On success *out holds
 * one reference. Returns 0, KCM_EINVAL (err filled in) or KCM_ENOMEM. */
int kcm_api_decode(enum kcm_kind kind, struct json_object *obj, struct kcm_intern *pool,
                   struct kcm_object **out, struct kcm_api_error *err);

#endif
