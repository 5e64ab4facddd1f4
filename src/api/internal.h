/*
 * api internals: what api.c, parts.c and text.c share, and the json-c tree
 * helpers the controllers inside kcm use. Not part of the module's public
 * interface, which keeps json-c types out of include/kcm.
 */
#ifndef KCM_API_INTERNAL_H
#define KCM_API_INTERNAL_H

#include <json-c/json.h>

#include "kcm/api.h"

/* Decode one object of `kind` from its JSON. On success *out holds one
 * reference. Returns 0, KCM_EINVAL (err filled in) or KCM_ENOMEM. */
int kcm_api_decode(enum kcm_kind kind, struct json_object *obj, struct kcm_intern *pool,
                   struct kcm_object **out, struct kcm_api_error *err);

/* The conditions as the API writes them (a new array the caller puts), or
 * NULL when there are none. */
struct json_object *kcm_api_conditions_json(const struct kcm_conditions *c);

/* Append the canonical JSON of v (keys sorted, no spaces) to b. */
int kcm_api_canonical_json(struct json_object *v, struct kcm_buf *b);

/* The key of a parsed pod template, as kcm_api_template_equal() compares
 * (see kcm/api.h). Returns 0, KCM_ETOOBIG or KCM_ENOMEM. */
int kcm_api_template_key(struct json_object *tmpl, uint64_t *key);
/* Take the hash label out of a parsed template (returns 1 if it was there,
 * *restore then holds its value) and put it back. */
int kcm_api_template_strip_hash(struct json_object *tmpl, struct json_object **restore);
void kcm_api_template_restore_hash(struct json_object *tmpl, struct json_object *restore);

/* metadata.resourceVersion of a parsed object, 0 if missing. */
uint64_t kcm_api_resource_version(struct json_object *obj);

/* spec.selector and spec.template of o (a ReplicaSet or Deployment) from
 * `spec`, a tree holding those two members at most, as kcm_api_decode()
 * reads them. With `canonical` given, the template's canonical JSON and key
 * are known and its spec may have been left out. Returns 0 or KCM_E* with
 * err filled in. */
int kcm_api_decode_spec_parts(struct kcm_object *o, struct json_object *spec,
                              struct kcm_intern *pool, const char *canonical, uint64_t key,
                              struct kcm_api_error *err);

/* strcmp() of two `const char *` array elements, for qsort and bsearch. */
int kcm_api_cmp_str(const void *a, const void *b);

/* "N%" with 0 <= N <= INT32_MAX: true with *out = N. */
bool kcm_api_parse_percent(const char *s, int32_t *out);

#endif
