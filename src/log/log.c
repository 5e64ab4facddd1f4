/* log — klog-style text logging; see include/kcm/log.h. */
#include "kcm/log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int verbosity;
static FILE *output;
static enum kcm_log_format format;

void kcm_log_set_format(enum kcm_log_format f) { format = f; }

void kcm_log_set_verbosity(int v) { verbosity = v; }

int kcm_log_verbosity(void) { return verbosity; }

void kcm_log_set_output(FILE *out) { output = out; }

static const char severity_letter[] = {'I', 'W', 'E', 'F'};

/* A growing line; on allocation failure it keeps what it has. */
struct line {
  char *p;
  size_t len, cap;
};

static void put(struct line *l, const char *s, size_t n) {
  if (l->len + n + 1 > l->cap) {
    size_t cap = (l->len + n + 1) * 2;
    char *p = realloc(l->p, cap);
    if (!p)
      return;
    l->p = p;
    l->cap = cap;
  }
  memcpy(l->p + l->len, s, n);
  l->len += n;
  l->p[l->len] = '\0';
}

static void put_str(struct line *l, const char *s) { put(l, s, strlen(s)); }

/* A JSON string of s[0..n), quoted. */
static void put_json(struct line *l, const char *s, size_t n) {
  size_t i;
  char esc[8];
  put(l, "\"", 1);
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      put(l, esc, 2);
    } else if (c == '\n') {
      put(l, "\\n", 2);
    } else if (c == '\t') {
      put(l, "\\t", 2);
    } else if (c < 0x20) {
      snprintf(esc, sizeof(esc), "\\u%04x", c);
      put(l, esc, 6);
    } else {
      put(l, (const char *)&s[i], 1);
    }
  }
  put(l, "\"", 1);
}

/* Where the key="value" pairs of a message start: the first " key=". */
static const char *pairs_start(const char *msg) {
  const char *p = msg;
  while ((p = strchr(p, ' '))) {
    const char *k = p + 1;
    while ((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ||
           *k == '_' || *k == '-' || *k == '.')
      k++;
    if (k > p + 1 && *k == '=')
      return p;
    p++;
  }
  return NULL;
}

static bool is_number(const char *s, size_t n) {
  size_t i = s[0] == '-';
  bool digits = false, dot = false;
  for (; i < n; i++) {
    if (s[i] >= '0' && s[i] <= '9')
      digits = true;
    else if (s[i] == '.' && !dot)
      dot = true;
    else
      return false;
  }
  return digits && s[n - 1] != '.';
}

static void write_json(FILE *out, enum kcm_log_severity sev, int level,
                       const struct timeval *tv, const char *file, int line, const char *msg) {
  struct line l = {NULL, 0, 0};
  const char *pairs = pairs_start(msg), *p;
  char num[64];
  snprintf(num, sizeof(num), "{\"ts\":%lld.%06ld,\"caller\":", (long long)tv->tv_sec,
           (long)tv->tv_usec);
  put_str(&l, num);
  snprintf(num, sizeof(num), "%s:%d", file, line);
  put_json(&l, num, strlen(num));
  put_str(&l, ",\"msg\":");
  put_json(&l, msg, pairs ? (size_t)(pairs - msg) : strlen(msg));
  if (sev == KCM_LOG_INFO) {
    snprintf(num, sizeof(num), ",\"v\":%d", level);
    put_str(&l, num);
  }
  for (p = pairs; p && *p;) {
    const char *key = p + 1, *eq = strchr(key, '='), *v = eq + 1, *end;
    char unq[4096];
    size_t n = 0;
    put(&l, ",", 1);
    put_json(&l, key, (size_t)(eq - key));
    put(&l, ":", 1);
    if (*v == '"') {
      for (end = v + 1; *end && *end != '"'; end++) {
        if (*end == '\\' && end[1])
          end++;
        if (n < sizeof(unq))
          unq[n++] = *end;
      }
      put_json(&l, unq, n);
      if (*end)
        end++;
    } else {
      end = v + strcspn(v, " ");
      if (end > v && is_number(v, (size_t)(end - v)))
        put(&l, v, (size_t)(end - v));
      else
        put_json(&l, v, (size_t)(end - v));
    }
    p = pairs_start(end);
  }
  put_str(&l, "}\n");
  if (l.p) {
    fwrite(l.p, 1, l.len, out);
    fflush(out);
  }
  free(l.p);
}

static void vwrite(enum kcm_log_severity sev, int level, const char *file, int line,
                   const char *fmt, va_list args) __attribute__((format(printf, 5, 0)));

static void vwrite(enum kcm_log_severity sev, int level, const char *file, int line,
                   const char *fmt, va_list args) {
  char small[1024];
  char *buf = small;
  struct timeval tv;
  struct tm tm;
  va_list ap;
  int head, n;
  size_t cap = sizeof(small);
  FILE *out = output ? output : stderr;

  gettimeofday(&tv, NULL);
  if (format == KCM_LOG_JSON) {
    va_copy(ap, args);
    n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
      return;
    if ((size_t)n >= sizeof(small) && (buf = malloc((size_t)n + 1))) {
      va_copy(ap, args);
      vsnprintf(buf, (size_t)n + 1, fmt, ap);
      va_end(ap);
    } else if ((size_t)n >= sizeof(small)) {
      buf = small;
    }
    write_json(out, sev, level, &tv, file, line, buf);
    if (buf != small)
      free(buf);
    return;
  }
  localtime_r(&tv.tv_sec, &tm);
  head = snprintf(small, sizeof(small), "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ",
                  severity_letter[sev], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                  tm.tm_min, tm.tm_sec, (long)tv.tv_usec, (int)getpid(), file, line);
  if (head < 0 || (size_t)head >= sizeof(small))
    return;

  va_copy(ap, args);
  n = vsnprintf(small + head, cap - (size_t)head, fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)head + (size_t)n + 1 >= cap) {
    char *big = malloc((size_t)head + (size_t)n + 2);
    if (big) {
      memcpy(big, small, (size_t)head);
      va_copy(ap, args);
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

void kcm_log_write(enum kcm_log_severity sev, const char *file, int line,
                   const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vwrite(sev, 0, file, line, fmt, ap);
  va_end(ap);
}

void kcm_log_write_v(int level, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vwrite(KCM_LOG_INFO, level, file, line, fmt, ap);
  va_end(ap);
}
