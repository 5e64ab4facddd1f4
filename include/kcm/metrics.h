/*
 * metrics — Prometheus text exposition (format 0.0.4).
 *
 * Helpers append families to a kcm_buf: a HELP and a TYPE line once per
 * family, then its samples. kcm_metrics_process() renders the process
 * collector's families (the names Prometheus clients use) from /proc.
 */
#ifndef KCM_METRICS_H
#define KCM_METRICS_H

#include "kcm/buf.h"

/* "# HELP name help\n# TYPE name type\n". */
int kcm_metrics_family(struct kcm_buf *out, const char *name, const char *type,
                       const char *help);
/* "name{labels} value\n"; labels is "" or `key="value",...` (already escaped). */
int kcm_metrics_sample(struct kcm_buf *out, const char *name, const char *labels,
                       double value);

/* process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_open_fds, process_max_fds and
 * process_start_time_seconds of this process. */
int kcm_metrics_process(struct kcm_buf *out);

#endif
