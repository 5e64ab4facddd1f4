/*
 * labels internals: what the module's own code and its tests share, and no
 * other module calls.
 */
#ifndef KCM_LABELS_INTERNAL_H
#define KCM_LABELS_INTERNAL_H

#include "kcm/labels.h"

/* Append the selector's string form ("app=web,tier in (a,b)") to b: what
 * the tests and the selector fuzzer compare a parse with. */
int kcm_labels_selector_format(const struct kcm_selector *s, struct kcm_buf *b);

#endif
