/*
 * api internals: what api.c, parts.c and text.c share, and the json-c tree
 * helpers the controllers inside kcm use. Not part of the module's public
 * interface, which keeps json-c types out of include/kcm.
 */
#ifndef KCM_API_INTERNAL_H
#define KCM_API_INTERNAL_H

#include <json-c/json.h>

#include "kcm/api.h"

/* What a decoder says of a name or namespace holding a NUL, which C
 * strings would cut short; kube-apiserver admits none. */
#define KCM_API_NUL_PROBLEM "must not contain a NUL character"

/* Decode a JSON object of string values (metadata.labels) into a sorted
 * set. `obj` may be NULL (an empty set). Returns 0, KCM_EINVAL with *why
 * set to a static description, or KCM_ENOMEM (selector.c). */
int kcm_api_labels_decode(struct kcm_labels *out, struct kcm_intern *pool,
                          struct json_object *obj, const char **why);
/* Decode a metav1.LabelSelector; `obj` NULL or JSON null gives a selector
 * that matches nothing. Returns 0, KCM_EINVAL (*why set) or KCM_ENOMEM. */
int kcm_api_selector_decode(struct kcm_selector *out, struct json_object *obj, const char **why);

/* The Pod row's readers (kind_pod.c): the JSON at j's cursor (whole:
 * nothing may follow it), and a bare Pod message (an item of a PodList). */
int kcm_api_decode_pod_json(struct kcm_json *j, bool whole, struct kcm_intern *pool,
                            struct kcm_object **out, struct kcm_api_error *err);
int kcm_api_decode_pod_proto(const void *msg, size_t len, struct kcm_intern *pool,
                             struct kcm_object **out, struct kcm_api_error *err);

/* Append the canonical JSON of v (keys sorted, no spaces) to b. */
int kcm_api_canonical_json(struct json_object *v, struct kcm_buf *b);

/* The key of a parsed pod template, as kcm_api_template_equal() compares
 * (see kcm/api.h). Returns 0, KCM_ETOOBIG or KCM_ENOMEM. */
int kcm_api_template_key(struct json_object *tmpl, uint64_t *key);

/* metadata.resourceVersion of a parsed object, 0 if missing. */
uint64_t kcm_api_resource_version(struct json_object *obj);

/* --- the tree decoder's field access (api.c), shared with tree.c --- */

struct kcm_api_dctx {
  struct kcm_intern *pool;
  struct kcm_api_error *err;
  const char *canonical; /* spec.template's canonical JSON, when already known */
  uint64_t key;          /* and its key */
};

/* Fill d->err with field and problem; returns KCM_EINVAL. */
int kcm_api_bad(struct kcm_api_dctx *d, const char *field, const char *problem);
/* The member key of o, or NULL when o is not an object or the member is
 * absent or null. */
struct json_object *kcm_api_get(struct json_object *o, const char *key);
/* The same in *out, which when present must be an object (else
 * KCM_EINVAL naming field). */
int kcm_api_get_object(struct kcm_api_dctx *d, struct json_object *o, const char *key,
                       const char *field, struct json_object **out);

/* Where a ReplicaSet's or Deployment's selector and template go. */
struct kcm_api_parts {
  struct kcm_selector *selector;
  char **template; /* its canonical JSON */
  uint64_t *template_key;
  struct kcm_labels *template_labels; /* NULL: not kept */
  char **selector_json;               /* the selector's canonical JSON; NULL: not kept */
};

/* spec.selector and spec.template into *dst from `spec`, a tree holding
 * those two members at most, as kcm_api_decode() reads them. With
 * `canonical` given, the template's canonical JSON and key are known and
 * its spec may have been left out. Returns 0 or KCM_E* with err filled in. */
int kcm_api_decode_spec_parts(const struct kcm_api_parts *dst, struct json_object *spec,
                              struct kcm_intern *pool, const char *canonical, uint64_t key,
                              struct kcm_api_error *err);

/* Return from the calling function when expr is a (negative) error. */
#define TRY(expr)                                                                              \
  do {                                                                                         \
    int rc_ = (expr);                                                                          \
    if (rc_ < 0)                                                                               \
      return rc_;                                                                              \
  } while (0)

/* The kinds' rows (kind_<kind>.c). */
extern const struct kcm_api_kind kcm_api_kind_pod, kcm_api_kind_replicaset,
    kcm_api_kind_deployment;
/* Bytes a map of annotations holds. */
size_t kcm_api_pairs_size(const struct kcm_pairs *p);

/* strcmp() of two `const char *` array elements, for qsort and bsearch. */
int kcm_api_cmp_str(const void *a, const void *b);

/* "N%" with 0 <= N <= INT32_MAX: true with *out = N. */
bool kcm_api_parse_percent(const char *s, int32_t *out);

#endif
