/*
 * log — klog-style text logging.
 *
 * Lines look like upstream Kubernetes components' logs:
 *
 *   I1122 05:08:20.312959    1234 main.c:123] message key="value" n=7
 *
 * Severity letter, month and day, local time with microseconds, pid, file
 * and line, then the message. Info lines with a level above the verbosity
 * set with kcm_log_set_verbosity() (the -v flag) are dropped. Each call
 * writes exactly one line, with one write call, so lines from one process
 * never interleave. The logger holds no resources; nothing needs freeing.
 *
 * A call's format is its structure, the arguments only data: the message
 * runs to the format's first " key=", a value to the closing quote the
 * format gives it or, unquoted, to the format's next space. Arguments are
 * formatted one conversion at a time, as printf does, and escaped where
 * they land, so no text from outside (a server's message, a name) can end
 * a line, a value or the message, or add a key:
 *   - values are written quoted as Go's strconv.Quote does, as klog writes
 *     strings (\n, \", \x1b, \xff for a byte that is not UTF-8, \u2028);
 *     an unquoted value stays bare only when it holds no string argument
 *     and needs no escaping (numbers, format text);
 *   - data in a message stays as it is when it has nothing to escape and no
 *     =, " or \, else it is quoted the same way; the format's own text has
 *     its control bytes escaped.
 * Text after a value that is no key="value" pair is kept in text lines and
 * left out of JSON ones.
 *
 * With KCM_LOG_JSON (--logging-format=json) each line is a JSON object as
 * Kubernetes components write them: {"ts":<Unix seconds>,"caller":"file:line",
 * "msg":"...","v":<level>} for info ("err" for errors), then the message's
 * key="value" pairs as fields, keys from the format only; an unquoted value
 * of numbers and format text that is a JSON number stays a number, anything
 * else is a JSON string escaped as zap's encoder does (bytes that are not
 * UTF-8 become U+FFFD; code points that are not printable are escaped).
 */
#ifndef KCM_LOG_H
#define KCM_LOG_H

#include <stddef.h>
#include <stdio.h>

#include "kcm/buf.h"

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
/* The format lines are written in; KCM_LOG_TEXT until set. */
enum kcm_log_format kcm_log_get_format(void);

/* Info lines at level <= v are written; default 0. */
void kcm_log_set_verbosity(int v);
int kcm_log_verbosity(void);
/* --vmodule: "pattern=N,..." gives the source files whose name (without
 * its directory and ".c") matches a glob pattern the verbosity N instead,
 * the first pattern that matches winning, as klog reads it; NULL or ""
 * clears it. The string is copied. Returns 0, or -1 (nothing changed) for
 * a list that is not pattern=N,... */
int kcm_log_set_vmodule(const char *list);
/* The verbosity of a source file (KCM_LOG_FILE); kcm_v() caches it per
 * call site in *cached, valid while *generation matches. */
int kcm_log_file_verbosity(const char *file, int *cached, unsigned *generation);

/* Text from outside (an object's message, a name) as one line a terminal
 * shows as it is, appended to out: a code point that is not printable (a
 * control, a line separator, a bidirectional override; as above) or a
 * byte that is not UTF-8 becomes one space; at most max bytes of s are
 * kept, cut between code points, and "..." follows a cut. NULL appends
 * nothing. Returns 0 or KCM_ENOMEM. */
int kcm_log_plain(struct kcm_buf *out, const char *s, size_t max);

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
    static int kcm_v_level_;                                                   \
    static unsigned kcm_v_generation_;                                         \
    if (kcm_log_file_verbosity(KCM_LOG_FILE, &kcm_v_level_, &kcm_v_generation_) \
        >= (n))                                                                \
      kcm_log_write_v((n), KCM_LOG_FILE, __LINE__, __VA_ARGS__);               \
  } while (0)

#endif
