/*
 * labels internals: decoding label sets and selectors from json-c trees, for
 * the api module and the tests. Not part of the module's public interface,
 * which keeps json-c types out of include/kcm.
 */
#ifndef KCM_LABELS_INTERNAL_H
#define KCM_LABELS_INTERNAL_H

#include <json-c/json.h>

#include "kcm/labels.h"

/* Decode a JSON object of string values (metadata.labels) into a sorted set.
 * `obj` may be NULL (an empty set). Returns 0, KCM_EINVAL with *why set to a
 * static description, or KCM_ENOMEM. */
int kcm_labels_decode(struct kcm_labels *out, struct kcm_intern *pool,
                      struct json_object *obj, const char **why);
/* Decode a metav1.LabelSelector; `obj` NULL or JSON null gives a selector
 * that matches nothing. Returns 0, KCM_EINVAL (*why set) or KCM_ENOMEM. */
int kcm_labels_selector_decode(struct kcm_selector *out, struct json_object *obj,
                               const char **why);

#endif
