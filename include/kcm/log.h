/*
 * log — klog-style text logging.
 *
 * Lines look like upstream Kubernetes components' logs:
 *
 *   I1122 05:08:20.312959    1234 main.c:123] message key="value"
 *
 * Severity letter, month and day, local time with microseconds, pid, file
 * and line, then the message. Info lines with a level above the verbosity
 * set with kcm_log_set_verbosity() (the -v flag) are dropped. Each line is
 * written with one write call, so lines from one process never interleave.
 * The logger holds no resources; nothing needs freeing.
 *
 * With KCM_LOG_JSON (--logging-format=json) each line is a JSON object as
 * Kubernetes components write them: {"ts":<Unix seconds>,"caller":"file:line",
 * "msg":"...","v":<level>} for info ("err" for errors), then the message's
 * key="value" pairs as fields (numbers stay numbers).
 */
#ifndef KCM_LOG_H
#define KCM_LOG_H

#include <stdio.h>

enum kcm_log_severity {
  KCM_LOG_INFO,
  KCM_LOG_WARNING,
  KCM_LOG_ERROR,
  KCM_LOG_FATAL,
};

enum kcm_log_format {
  KCM_LOG_TEXT,
  KCM_LOG_JSON,
};

void kcm_log_set_format(enum kcm_log_format f);

/* Info lines at level <= v are written; default 0. */
void kcm_log_set_verbosity(int v);
int kcm_log_verbosity(void);

/* Where lines go (default stderr). The stream is borrowed, not closed. */
void kcm_log_set_output(FILE *out);

void kcm_log_write(enum kcm_log_severity sev, const char *file, int line,
                   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* An info line of verbosity `level` (its "v" in JSON); kcm_v() uses it. */
void kcm_log_write_v(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#ifdef __FILE_NAME__
#define KCM_LOG_FILE __FILE_NAME__
#else
#define KCM_LOG_FILE __FILE__
#endif

#define kcm_info(...) kcm_log_write(KCM_LOG_INFO, KCM_LOG_FILE, __LINE__, __VA_ARGS__)
#define kcm_warn(...) kcm_log_write(KCM_LOG_WARNING, KCM_LOG_FILE, __LINE__, __VA_ARGS__)
#define kcm_error(...) kcm_log_write(KCM_LOG_ERROR, KCM_LOG_FILE, __LINE__, __VA_ARGS__)
/* Verbose info, written only when the verbosity is at least n. */
#define kcm_v(n, ...)                                                          \
  do {                                                                         \
    if (kcm_log_verbosity() >= (n))                                            \
      kcm_log_write_v((n), KCM_LOG_FILE, __LINE__, __VA_ARGS__);               \
  } while (0)

#endif
