/* metrics — Prometheus text format; see include/kcm/metrics.h. */
#include "kcm/metrics.h"

#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kcm/error.h"

#include "internal.h"

/* The largest integer a double holds exactly, 2^53. */
#define EXACT_INT 9007199254740992.0

/* Drop what a failed writer appended, so the buffer holds whole lines. */
static int rewind_to(struct kcm_buf *b, size_t len, int err) {
  if (err && b->data) {
    b->len = len;
    b->data[len] = '\0';
  }
  return err;
}

/* Append s with each character in `special` written as a backslash escape
 * (newline as \n). */
static int append_escaped(struct kcm_buf *out, const char *s, const char *special) {
  int err = 0;
  while (*s && !err) {
    size_t n = strcspn(s, special);
    if (n)
      err = kcm_buf_append(out, s, n);
    s += n;
    if (*s && !err) {
      err = kcm_buf_append(out, *s == '\n' ? "\\n" : (char[]){'\\', *s}, 2);
      s++;
    }
  }
  return err;
}

int kcm_metrics_family(struct kcm_buf *out, const char *name, const char *type,
                       const char *help) {
  size_t start = out->len;
  int err = kcm_buf_appendf(out, "# HELP %s ", name);
  if (!err)
    err = append_escaped(out, help, "\\\n");
  if (!err)
    err = kcm_buf_appendf(out, "\n# TYPE %s %s\n", name, type);
  return rewind_to(out, start, err);
}

/* "<name><suffix>{<labels>,le="<le>"} <value>", braces only around labels; le may be NULL. */
static int series(struct kcm_buf *out, const char *name, const char *suffix, const char *labels,
                  const char *le, const char *value) {
  bool braces = *labels || le;
  return kcm_buf_appendf(out, "%s%s%s%s%s%s%s%s%s %s\n", name, suffix, braces ? "{" : "", labels,
                         *labels && le ? "," : "", le ? "le=\"" : "", le ? le : "", le ? "\"" : "",
                         braces ? "}" : "", value);
}

int kcm_metrics_sample(struct kcm_buf *out, const char *name, const char *labels,
                       double value) {
  char num[KCM_METRICS_VALUE_MAX];
  return series(out, name, "", labels, NULL, kcm_metrics_format(num, value));
}

/* Copy n bytes to dst at *at if they fit with room for the NUL. */
static bool put(char *dst, size_t len, size_t *at, const char *s, size_t n) {
  if (n >= len - *at)
    return false;
  memcpy(dst + *at, s, n);
  *at += n;
  return true;
}

int kcm_metrics_labels(char *dst, size_t len, const char *const *pairs) {
  size_t at = 0;
  bool ok = len > 0;
  for (; ok && pairs && pairs[0] && pairs[1]; pairs += 2) {
    const char *v = pairs[1];
    ok = (!at || put(dst, len, &at, ",", 1)) && put(dst, len, &at, pairs[0], strlen(pairs[0])) &&
         put(dst, len, &at, "=\"", 2);
    while (ok && *v) {
      size_t n = strcspn(v, "\\\"\n");
      ok = put(dst, len, &at, v, n);
      v += n;
      if (ok && *v) {
        ok = put(dst, len, &at, *v == '\n' ? "\\n" : (char[]){'\\', *v}, 2);
        v++;
      }
    }
    ok = ok && put(dst, len, &at, "\"", 1);
  }
  if (len)
    dst[ok ? at : 0] = '\0';
  return ok ? 0 : KCM_ETOOBIG;
}

char *kcm_metrics_format(char *dst, double v) {
  int prec;
  if (isnan(v))
    return strcpy(dst, "NaN");
  if (isinf(v))
    return strcpy(dst, v > 0 ? "+Inf" : "-Inf");
  if (v == 0) /* -0 too */
    return strcpy(dst, "0");
  if (v >= -EXACT_INT && v <= EXACT_INT && v == (double)(int64_t)v) {
    snprintf(dst, KCM_METRICS_VALUE_MAX, "%lld", (long long)v);
    return dst;
  }
  /* The fewest significant digits that read back as v (as Go's 'g', -1). */
  for (prec = 1; prec < 17; prec++) {
    snprintf(dst, KCM_METRICS_VALUE_MAX, "%.*g", prec, v);
    if (strtod(dst, NULL) == v)
      return dst;
  }
  snprintf(dst, KCM_METRICS_VALUE_MAX, "%.17g", v);
  return dst;
}

/* --- histograms ------------------------------------------------------------------------ */

int kcm_metrics_histogram_init(struct kcm_metrics_histogram *h, const double *bounds, size_t n) {
  size_t i;
  memset(h, 0, sizeof(*h));
  if (n < 1 || n > KCM_METRICS_MAX_BUCKETS)
    return KCM_EINVAL;
  for (i = 0; i < n; i++) {
    if (!isfinite(bounds[i]) || (i && bounds[i] <= bounds[i - 1]))
      return KCM_EINVAL;
  }
  h->bounds = bounds;
  h->nbounds = n;
  return 0;
}

void kcm_metrics_histogram_observe(struct kcm_metrics_histogram *h, double v) {
  size_t i;
  for (i = 0; i < h->nbounds; i++) {
    if (v <= h->bounds[i]) {
      h->counts[i]++;
      break;
    }
  }
  h->count++;
  h->sum += v;
}

int kcm_metrics_histogram_render(struct kcm_buf *out, const char *name, const char *labels,
                                 const struct kcm_metrics_histogram *h) {
  char le[KCM_METRICS_VALUE_MAX], num[KCM_METRICS_VALUE_MAX];
  size_t start = out->len, i;
  uint64_t cumulative = 0;
  int err = 0;
  for (i = 0; i < h->nbounds && !err; i++) {
    cumulative += h->counts[i];
    err = series(out, name, "_bucket", labels, kcm_metrics_format(le, h->bounds[i]),
                 kcm_metrics_format(num, (double)cumulative));
  }
  kcm_metrics_format(num, (double)h->count);
  if (!err)
    err = series(out, name, "_bucket", labels, "+Inf", num);
  if (!err)
    err = series(out, name, "_sum", labels, NULL, kcm_metrics_format(le, h->sum));
  if (!err)
    err = series(out, name, "_count", labels, NULL, num);
  return rewind_to(out, start, err);
}

/* --- the process ---------------------------------------------------------------------------- */

/* utime, stime and starttime (clock ticks) and vsize, rss (pages) from
 * /proc/self/stat: fields 14, 15, 22, 23 and 24. */
static int read_stat(double *cpu_s, double *start_ticks, double *vsize, double *rss_pages) {
  char buf[1024], *p;
  unsigned long long utime, stime, start, vs;
  long long rss;
  FILE *f = fopen("/proc/self/stat", "r");
  size_t n;
  if (!f)
    return KCM_EIO;
  n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = '\0';
  p = strrchr(buf, ')'); /* the command name may hold spaces */
  if (!p || sscanf(p + 2,
                   "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                   "%*d %*d %llu %llu %lld",
                   &utime, &stime, &start, &vs, &rss) != 5)
    return KCM_EIO;
  *cpu_s = (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
  *start_ticks = (double)start;
  *vsize = (double)vs;
  *rss_pages = (double)rss;
  return 0;
}

static double boot_time(void) {
  char line[256];
  double bt = 0;
  FILE *f = fopen("/proc/stat", "r");
  if (!f)
    return 0;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "btime %lf", &bt) == 1)
      break;
  fclose(f);
  return bt;
}

static double open_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  double n = 0;
  if (!d)
    return 0;
  while ((e = readdir(d)))
    n += e->d_name[0] != '.';
  closedir(d);
  return n - 1; /* the directory stream's own descriptor */
}

/* A limit as the Go client reports it: unlimited is 2^64 - 1. */
static double limit_of(int resource) {
  struct rlimit rl;
  if (getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return 18446744073709551615.0;
  return (double)rl.rlim_cur;
}

int kcm_metrics_process(struct kcm_buf *out) {
  double cpu = 0, start = 0, vsize = 0, rss = 0;
  bool stat_ok = read_stat(&cpu, &start, &vsize, &rss) == 0;
  const struct {
    const char *name, *type, *help;
    double value;
    bool ok;
  } m[] = {
      {"process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.",
       cpu, stat_ok},
      {"process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
       rss * (double)sysconf(_SC_PAGESIZE), stat_ok},
      {"process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", vsize, stat_ok},
      {"process_virtual_memory_max_bytes", "gauge",
       "Maximum amount of virtual memory available in bytes.", limit_of(RLIMIT_AS), true},
      {"process_open_fds", "gauge", "Number of open file descriptors.", open_fds(), true},
      {"process_max_fds", "gauge", "Maximum number of open file descriptors.",
       limit_of(RLIMIT_NOFILE), true},
      {"process_start_time_seconds", "gauge",
       "Start time of the process since unix epoch in seconds.",
       boot_time() + start / (double)sysconf(_SC_CLK_TCK), stat_ok},
  };
  size_t begin = out->len, i;
  int err = 0;
  for (i = 0; i < sizeof(m) / sizeof(m[0]) && !err; i++) {
    if (!m[i].ok) /* no /proc/self/stat: left out */
      continue;
    err = kcm_metrics_family(out, m[i].name, m[i].type, m[i].help);
    if (!err)
      err = kcm_metrics_sample(out, m[i].name, "", m[i].value);
  }
  return rewind_to(out, begin, err);
}
