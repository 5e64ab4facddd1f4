/*
 * metrics — Prometheus text exposition (format 0.0.4).
 *
 * Helpers append families to a kcm_buf: a HELP and a TYPE line once per
 * family, then its samples. Nothing here is global: each module keeps its
 * own counters and histograms (the work queue, the client) and renders
 * them when /metrics is scraped, so a caller rendering one family for
 * several objects writes the header once and then the samples of each
 * (Prometheus refuses a page with two TYPE lines for one family).
 * kcm_metrics_process() renders the process collector's families (the
 * names Prometheus clients use) from /proc.
 *
 * Labels reach kcm_metrics_sample() as one string, `key="value",...`,
 * already escaped; kcm_metrics_labels() builds it from name, value pairs,
 * escaping backslash, double quote and newline in the values. Help texts
 * are escaped here (backslash and newline). Values are written as
 * Prometheus reads them: integers up to 2^53 without exponent, other
 * numbers in the shortest form that reads back exactly ("0.005", "1e-06"),
 * "NaN", "+Inf" and "-Inf".
 *
 * Writers return 0, KCM_ETOOBIG past the buffer's limit or KCM_ENOMEM;
 * each appends whole lines, and on failure leaves the buffer as it was.
 */
#ifndef KCM_METRICS_H
#define KCM_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "kcm/buf.h"

/* "# HELP name help\n# TYPE name type\n"; type is "counter", "gauge" or
 * "histogram". */
int kcm_metrics_family(struct kcm_buf *out, const char *name, const char *type,
                       const char *help);
/* "name{labels} value\n"; labels is "" or `key="value",...` (already escaped). */
int kcm_metrics_sample(struct kcm_buf *out, const char *name, const char *labels,
                       double value);

/* Write `k1="v1",k2="v2"` into dst (len bytes) from a NULL-terminated list
 * of name, value pairs, e.g. {"name", "deployment", NULL}, escaping the
 * values. Returns 0, or KCM_ETOOBIG when it does not fit (dst is then ""). */
int kcm_metrics_labels(char *dst, size_t len, const char *const *pairs);

/* Room for any sample value written, NUL included. */
#define KCM_METRICS_VALUE_MAX 32

/* --- histograms ------------------------------------------------------------------------ */

#define KCM_METRICS_MAX_BUCKETS 16

/* Observations counted in fixed buckets. The bounds are borrowed (usually
 * a static array) and must outlive the histogram; the +Inf bucket is
 * implied. It holds no heap memory: embed it, nothing to release. */
struct kcm_metrics_histogram {
  const double *bounds; /* upper bounds, finite and strictly ascending */
  size_t nbounds;
  uint64_t counts[KCM_METRICS_MAX_BUCKETS]; /* per bucket, not cumulative */
  uint64_t count;                           /* every observation, +Inf included */
  double sum;
};

/* An empty histogram over n bounds. KCM_EINVAL unless 1 <= n <=
 * KCM_METRICS_MAX_BUCKETS and the bounds are finite and strictly ascending. */
int kcm_metrics_histogram_init(struct kcm_metrics_histogram *h, const double *bounds, size_t n);

/* Count v in the first bucket whose bound is >= v (or only in +Inf). */
void kcm_metrics_histogram_observe(struct kcm_metrics_histogram *h, double v);

/* The samples of one histogram, without the family header:
 * name_bucket{labels,le="..."} with cumulative counts up to le="+Inf",
 * then name_sum{labels} and name_count{labels}. */
int kcm_metrics_histogram_render(struct kcm_buf *out, const char *name, const char *labels,
                                 const struct kcm_metrics_histogram *h);

/* --- the process ---------------------------------------------------------------------------- */

/* process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_virtual_memory_max_bytes,
 * process_open_fds, process_max_fds and process_start_time_seconds of this
 * process, with their headers. */
int kcm_metrics_process(struct kcm_buf *out);

#endif
