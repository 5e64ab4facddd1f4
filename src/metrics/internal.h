/*
 * metrics internals: what the module's own code and its tests share, and no
 * other module calls.
 */
#ifndef KCM_METRICS_INTERNAL_H
#define KCM_METRICS_INTERNAL_H

#include "kcm/metrics.h"

/* Write v as a sample value into dst (KCM_METRICS_VALUE_MAX bytes); returns dst. */
char *kcm_metrics_format(char *dst, double v);

#endif
