/*
 * api internals shared by api.c and text.c. Not part of the module's
 * interface.
 */
#ifndef KCM_API_INTERNAL_H
#define KCM_API_INTERNAL_H

#include "kcm/api.h"

/* kcm_api_decode(), with spec.template's canonical JSON and key given when
 * `canonical` is not NULL: the template in obj is then read for its labels
 * only (its spec may have been left out). */
int kcm_api_decode_known(enum kcm_kind kind, struct json_object *obj, struct kcm_intern *pool,
                         const char *canonical, uint64_t key, struct kcm_object **out,
                         struct kcm_api_error *err);

#endif
