/* metrics — Prometheus text format; see include/kcm/metrics.h. */
#include "kcm/metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kcm/error.h"

int kcm_metrics_family(struct kcm_buf *out, const char *name, const char *type,
                       const char *help) {
  return kcm_buf_appendf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

int kcm_metrics_sample(struct kcm_buf *out, const char *name, const char *labels,
                       double value) {
  char num[64];
  if (value == (double)(long long)value && value < 1e15 && value > -1e15)
    snprintf(num, sizeof(num), "%lld", (long long)value);
  else
    snprintf(num, sizeof(num), "%.15g", value);
  return *labels ? kcm_buf_appendf(out, "%s{%s} %s\n", name, labels, num)
                 : kcm_buf_appendf(out, "%s %s\n", name, num);
}

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

int kcm_metrics_process(struct kcm_buf *out) {
  double cpu, start, vsize, rss;
  struct rlimit rl;
  int err = read_stat(&cpu, &start, &vsize, &rss);
  if (err)
    return err;
  getrlimit(RLIMIT_NOFILE, &rl);
  if ((err = kcm_metrics_family(out, "process_cpu_seconds_total", "counter",
                                "Total user and system CPU time spent in seconds.")) ||
      (err = kcm_metrics_sample(out, "process_cpu_seconds_total", "", cpu)) ||
      (err = kcm_metrics_family(out, "process_resident_memory_bytes", "gauge",
                                "Resident memory size in bytes.")) ||
      (err = kcm_metrics_sample(out, "process_resident_memory_bytes", "",
                                rss * (double)sysconf(_SC_PAGESIZE))) ||
      (err = kcm_metrics_family(out, "process_virtual_memory_bytes", "gauge",
                                "Virtual memory size in bytes.")) ||
      (err = kcm_metrics_sample(out, "process_virtual_memory_bytes", "", vsize)) ||
      (err = kcm_metrics_family(out, "process_open_fds", "gauge",
                                "Number of open file descriptors.")) ||
      (err = kcm_metrics_sample(out, "process_open_fds", "", open_fds())) ||
      (err = kcm_metrics_family(out, "process_max_fds", "gauge",
                                "Maximum number of open file descriptors.")) ||
      (err = kcm_metrics_sample(out, "process_max_fds", "", (double)rl.rlim_cur)) ||
      (err = kcm_metrics_family(out, "process_start_time_seconds", "gauge",
                                "Start time of the process since unix epoch in seconds.")) ||
      (err = kcm_metrics_sample(out, "process_start_time_seconds", "",
                                boot_time() + start / (double)sysconf(_SC_CLK_TCK))))
    return err;
  return 0;
}
