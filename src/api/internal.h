/*
 * api internals shared by api.c and text.c. Not part of the module's
 * interface.
 */
#ifndef KCM_API_INTERNAL_H
#define KCM_API_INTERNAL_H

#include "kcm/api.h"

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
