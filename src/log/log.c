/* log — klog-style text logging; see include/kcm/log.h. */
#include "kcm/log.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int verbosity;
static FILE *output;

void kcm_log_set_verbosity(int v) { verbosity = v; }

int kcm_log_verbosity(void) { return verbosity; }

void kcm_log_set_output(FILE *out) { output = out; }

static const char severity_letter[] = {'I', 'W', 'E', 'F'};

void kcm_log_write(enum kcm_log_severity sev, const char *file, int line,
                   const char *fmt, ...) {
  char small[1024];
  char *buf = small;
  struct timeval tv;
  struct tm tm;
  va_list ap;
  int head, n;
  size_t cap = sizeof(small);
  FILE *out = output ? output : stderr;

  gettimeofday(&tv, NULL);
  localtime_r(&tv.tv_sec, &tm);
  head = snprintf(small, sizeof(small), "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ",
                  severity_letter[sev], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                  tm.tm_min, tm.tm_sec, (long)tv.tv_usec, (int)getpid(), file, line);
  if (head < 0 || (size_t)head >= sizeof(small))
    return;

  va_start(ap, fmt);
  n = vsnprintf(small + head, cap - (size_t)head, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)head + (size_t)n + 1 >= cap) {
    char *big = malloc((size_t)head + (size_t)n + 2);
    if (big) {
      memcpy(big, small, (size_t)head);
      va_start(ap, fmt);
      vsnprintf(big + head, (size_t)n + 1, fmt, ap);
      va_end(ap);
      buf = big;
      cap = (size_t)head + (size_t)n + 2;
    } else {
      n = (int)(cap - (size_t)head - 2); /* keep what fit rather than nothing */
    }
  }
  buf[head + n] = '\n';
  /* One write per line so concurrent writers never interleave. */
  fwrite(buf, 1, (size_t)head + (size_t)n + 1, out);
  fflush(out);
  if (buf != small)
    free(buf);
}
