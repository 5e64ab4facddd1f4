/* log — klog-style text logging; see include/kcm/log.h. */
#include "kcm/log.h"

#include "kcm/buf.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

static int verbosity;
static FILE *output;
static enum kcm_log_format format;

void kcm_log_set_format(enum kcm_log_format f) { format = f; }

enum kcm_log_format kcm_log_get_format(void) { return format; }

/* --vmodule: a copy of the list, and a generation that changes with it or
 * with the verbosity, so that call sites look their level up again. */
static char *vmodule;
static unsigned generation = 1;

void kcm_log_set_verbosity(int v) {
  verbosity = v;
  generation++;
}

int kcm_log_set_vmodule(const char *list) {
  const char *p = list;
  char *copy = NULL;
  while (p && *p) {
    size_t n = strcspn(p, ","), k = strcspn(p, "="), i;
    if (k == 0 || k >= n || k + 1 == n)
      return -1;
    for (i = k + 1; i < n; i++)
      if (p[i] < '0' || p[i] > '9')
        return -1;
    p += n + (p[n] == ',');
  }
  if (list && *list && !(copy = strdup(list)))
    return -1;
  free(vmodule);
  vmodule = copy;
  generation++;
  return 0;
}

/* The level the first pattern matching file's base name gives, or the
 * verbosity. */
static int lookup_level(const char *file) {
  const char *base = strrchr(file, '/'), *p = vmodule;
  char name[128], pattern[128];
  size_t len;
  base = base ? base + 1 : file;
  len = strcspn(base, ".");
  if (len >= sizeof(name))
    return verbosity;
  memcpy(name, base, len);
  name[len] = '\0';
  while (*p) {
    size_t n = strcspn(p, ","), k = strcspn(p, "=");
    if (k < sizeof(pattern)) {
      memcpy(pattern, p, k);
      pattern[k] = '\0';
      if (fnmatch(pattern, name, 0) == 0)
        return atoi(p + k + 1);
    }
    p += n + (p[n] == ',');
  }
  return verbosity;
}

int kcm_log_file_verbosity(const char *file, int *cached, unsigned *gen) {
  if (!vmodule)
    return verbosity;
  if (*gen != generation) {
    *cached = lookup_level(file);
    *gen = generation;
  }
  return *cached;
}

int kcm_log_verbosity(void) { return verbosity; }

void kcm_log_set_output(FILE *out) { output = out; }

static const char severity_letter[] = {'I', 'W', 'E', 'F'};

/* A growing text; on allocation failure it keeps what it has. */
struct line {
  char *p;
  size_t len, cap;
};

static bool reserve(struct line *l, size_t n) {
  if (l->len + n + 1 > l->cap) {
    size_t cap = (l->len + n + 1) * 2;
    char *p = realloc(l->p, cap);
    if (!p)
      return false;
    l->p = p;
    l->cap = cap;
  }
  return true;
}

static void put(struct line *l, const char *s, size_t n) {
  if (!reserve(l, n))
    return;
  memcpy(l->p + l->len, s, n);
  l->len += n;
  l->p[l->len] = '\0';
}

static void put_str(struct line *l, const char *s) { put(l, s, strlen(s)); }

static void put_vprintf(struct line *l, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void put_vprintf(struct line *l, const char *fmt, va_list ap) {
  va_list aq;
  int n;
  va_copy(aq, ap);
  n = vsnprintf(NULL, 0, fmt, aq);
  va_end(aq);
  if (n < 0 || !reserve(l, (size_t)n))
    return;
  vsnprintf(l->p + l->len, (size_t)n + 1, fmt, ap);
  l->len += (size_t)n;
}

/* One conversion of a call's format, rebuilt by convert() with the type of
 * the argument it was given; the compiler checked the call's format. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void put_spec(struct line *l, const char *spec, ...) {
  va_list ap;
  va_start(ap, spec);
  put_vprintf(l, spec, ap);
  va_end(ap);
}
#pragma GCC diagnostic pop

/* The code point UTF-8 encodes at s[0..n) and its length, or 0 when the
 * bytes there are not UTF-8 (overlong, a surrogate, past U+10FFFF, cut). */
static size_t utf8_rune(const unsigned char *s, size_t n, uint32_t *r) {
  size_t len, i;
  uint32_t v, min;
  if (s[0] < 0x80) {
    *r = s[0];
    return 1;
  }
  if (s[0] >= 0xc2 && s[0] <= 0xdf)
    len = 2, v = s[0] & 0x1fu, min = 0x80;
  else if (s[0] >= 0xe0 && s[0] <= 0xef)
    len = 3, v = s[0] & 0x0fu, min = 0x800;
  else if (s[0] >= 0xf0 && s[0] <= 0xf4)
    len = 4, v = s[0] & 0x07u, min = 0x10000;
  else
    return 0;
  if (n < len)
    return 0;
  for (i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    v = v << 6 | (s[i] & 0x3fu);
  }
  if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
    return 0;
  *r = v;
  return len;
}

/* Code points past ASCII that Go's unicode.IsPrint refuses: controls, spaces
 * other than ' ', line and paragraph separators, format characters (among
 * them the bidirectional overrides), surrogates, private use and
 * noncharacters. Unassigned code points elsewhere pass. */
static const uint32_t unprintable[][2] = {
    {0x80, 0xa0},       {0xad, 0xad},       {0x600, 0x605},     {0x61c, 0x61c},
    {0x6dd, 0x6dd},     {0x70f, 0x70f},     {0x1680, 0x1680},   {0x180e, 0x180e},
    {0x2000, 0x200f},   {0x2028, 0x202f},   {0x205f, 0x2064},   {0x2066, 0x206f},
    {0x3000, 0x3000},   {0xd800, 0xf8ff},   {0xfeff, 0xfeff},   {0xfff9, 0xfffb},
    {0xfffe, 0xffff},   {0x1bca0, 0x1bca3}, {0x1d173, 0x1d17a}, {0xe0001, 0xe0001},
    {0xe0020, 0xe007f}, {0xf0000, 0x10ffff},
};

static bool printable(uint32_t r) {
  size_t i;
  if (r < 0x80)
    return r >= 0x20 && r != 0x7f;
  for (i = 0; i < sizeof(unprintable) / sizeof(unprintable[0]); i++)
    if (r >= unprintable[i][0] && r <= unprintable[i][1])
      return false;
  return true;
}

int kcm_log_plain(struct kcm_buf *out, const char *s, size_t max) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, n = s ? strlen(s) : 0, len;
  uint32_t r;
  int err = 0;
  while (i < n && !err) {
    len = utf8_rune(u + i, n - i, &r);
    if (i + (len ? len : 1) > max)
      return kcm_buf_append_str(out, "...");
    err = len && printable(r) ? kcm_buf_append(out, s + i, len) : kcm_buf_append_str(out, " ");
    i += len ? len : 1;
  }
  return err;
}

/* s[0..n) escaped as Go's strconv.Quote does: \n and the other C escapes,
 * other control bytes and bytes that are not UTF-8 as \xNN, code points that
 * are not printable as \uNNNN or \UNNNNNNNN. quoted: " and \ are escaped too. */
static void put_escaped(struct line *l, const char *s, size_t n, bool quoted) {
  static const char named[] = "\a\b\f\n\r\t\v", letters[] = "abfnrtv";
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, len;
  uint32_t r;
  char esc[12];
  while (i < n) {
    len = utf8_rune(u + i, n - i, &r);
    if (len && printable(r) && !(quoted && (r == '"' || r == '\\'))) {
      put(l, s + i, len);
    } else if (len == 1 && r && strchr(named, (int)r)) {
      esc[0] = '\\';
      esc[1] = letters[strchr(named, (int)r) - named];
      put(l, esc, 2);
    } else if (len == 1 && (r == '"' || r == '\\')) {
      esc[0] = '\\';
      esc[1] = (char)r;
      put(l, esc, 2);
    } else if (len <= 1) {
      snprintf(esc, sizeof(esc), "\\x%02x", u[i]);
      put(l, esc, 4);
      len = 1;
    } else {
      put(l, esc, (size_t)snprintf(esc, sizeof(esc), r < 0x10000 ? "\\u%04x" : "\\U%08x",
                                   (unsigned)r));
    }
    i += len;
  }
}

static void put_quoted(struct line *l, const char *s, size_t n) {
  put(l, "\"", 1);
  put_escaped(l, s, n, true);
  put(l, "\"", 1);
}

/* Whether data may stand unquoted in a message: nothing in it can end the
 * message, begin a key="value" pair or a line, or reach a terminal as a
 * control. */
static bool harmless(const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, len;
  uint32_t r;
  while (i < n) {
    len = utf8_rune(u + i, n - i, &r);
    if (!len || !printable(r) || r == '"' || r == '\\' || r == '=')
      return false;
    i += len;
  }
  return true;
}

/* A JSON string of s[0..n), escaped as zap (component-base's JSON logger)
 * does: " and \, \n \r \t, other control bytes as \u00NN, bytes that are
 * not UTF-8 as \ufffd. Code points that are not printable (see put_escaped)
 * are escaped as well, as \uNNNN or a surrogate pair: the same string to a
 * JSON reader, and U+2028, a C1 control or a bidirectional override reach
 * no terminal and no reader that takes them for line ends. */
static void put_json(struct line *l, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  size_t i = 0, len;
  uint32_t r;
  char esc[16];
  put(l, "\"", 1);
  while (i < n) {
    len = utf8_rune(u + i, n - i, &r);
    if (!len) {
      put(l, "\\ufffd", 6);
      len = 1;
    } else if (r == '"' || r == '\\') {
      esc[0] = '\\';
      esc[1] = (char)r;
      put(l, esc, 2);
    } else if (r == '\n' || r == '\r' || r == '\t') {
      put(l, r == '\n' ? "\\n" : r == '\r' ? "\\r" : "\\t", 2);
    } else if (printable(r)) {
      put(l, s + i, len);
    } else if (r < 0x10000) {
      snprintf(esc, sizeof(esc), "\\u%04x", (unsigned)r);
      put(l, esc, 6);
    } else {
      snprintf(esc, sizeof(esc), "\\u%04x\\u%04x", 0xd800 + ((unsigned)(r - 0x10000) >> 10),
               0xdc00 + ((unsigned)(r - 0x10000) & 0x3ff));
      put(l, esc, 12);
    }
    i += len;
  }
  put(l, "\"", 1);
}

/* The digits at s[i..n): how many. */
static size_t digits(const char *s, size_t i, size_t n) {
  size_t d = 0;
  while (i + d < n && s[i + d] >= '0' && s[i + d] <= '9')
    d++;
  return d;
}

/* Whether s[0..n) is a JSON number. */
static bool is_number(const char *s, size_t n) {
  size_t i = 0, d;
  if (i < n && s[i] == '-')
    i++;
  d = digits(s, i, n);
  if (!d || (d > 1 && s[i] == '0'))
    return false;
  i += d;
  if (i < n && s[i] == '.') {
    if (!(d = digits(s, i + 1, n)))
      return false;
    i += 1 + d;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-'))
      i++;
    if (!(d = digits(s, i, n)))
      return false;
    i += d;
  }
  return i == n;
}

/* An integer argument of a conversion with this length modifier, taken as
 * its signed or unsigned type and widened (signed values as their bits). */
static uintmax_t int_arg(va_list *ap, const char *length, bool sign) {
  uintmax_t v;
  if (!strcmp(length, "l"))
    return sign ? (uintmax_t)va_arg(*ap, long) : va_arg(*ap, unsigned long);
  if (!strcmp(length, "ll") || !strcmp(length, "q"))
    return sign ? (uintmax_t)va_arg(*ap, long long) : va_arg(*ap, unsigned long long);
  if (!strcmp(length, "j"))
    return sign ? (uintmax_t)va_arg(*ap, intmax_t) : va_arg(*ap, uintmax_t);
  if (!strcmp(length, "z"))
    return sign ? (uintmax_t)va_arg(*ap, ssize_t) : va_arg(*ap, size_t);
  if (!strcmp(length, "t"))
    return (uintmax_t)va_arg(*ap, ptrdiff_t);
  v = sign ? (uintmax_t)va_arg(*ap, int) : va_arg(*ap, unsigned);
  if (!strcmp(length, "hh"))
    return sign ? (uintmax_t)(signed char)v : (unsigned char)v;
  if (!strcmp(length, "h"))
    return sign ? (uintmax_t)(short)v : (unsigned short)v;
  return v;
}

/* Ends the conversion spec[0..n) with a length modifier and a letter. */
static void end_spec(char *spec, size_t n, const char *length, char c) {
  size_t k = strlen(length);
  memcpy(spec + n, length, k);
  spec[n + k] = c;
  spec[n + k + 1] = '\0';
}

/* Copies the run of characters of `set` at *p to spec at *n, past its
 * first 9 (flags repeated, widths no line needs) only skipping. */
static void copy_run(char *spec, size_t *n, const char **p, const char *set) {
  size_t k = strspn(*p, set), keep = k < 9 ? k : 9;
  memcpy(spec + *n, *p, keep);
  *n += keep;
  *p += k;
}

/*
 * The conversion at fmt (fmt[0] == '%') formatted into out with its
 * arguments from ap, as printf would; returns the format past it. *data is
 * set when it wrote a string or a character, text from outside the format.
 * %n writes nothing anywhere; errno_was is what %m names.
 */
/* The flags, width, precision and length of the conversion at p (just
 * past its '%'), copied after spec[*n] with each '*' taken from the
 * arguments, and the length into `length`; returns its letter's place. */
static const char *read_spec(const char *p, va_list *ap, char *spec, size_t *n,
                             char length[3]) {
  size_t k;
  int star;
  copy_run(spec, n, &p, "-+ #0'");
  if (*p == '*') {
    star = va_arg(*ap, int);
    if (star < 0) {
      spec[(*n)++] = '-';
      star = star == INT_MIN ? 0 : -star;
    }
    *n += (size_t)snprintf(spec + *n, 16, "%d", star);
    p++;
  } else {
    copy_run(spec, n, &p, "0123456789");
  }
  if (*p == '.') {
    p++;
    if (*p == '*') {
      star = va_arg(*ap, int);
      if (star >= 0)
        *n += (size_t)snprintf(spec + *n, 16, ".%d", star);
      p++;
    } else {
      spec[(*n)++] = '.';
      copy_run(spec, n, &p, "0123456789");
    }
  }
  k = strspn(p, "hlLjztq");
  if (k <= 2) {
    memcpy(length, p, k);
    length[k] = '\0';
    p += k;
  }
  return p;
}

/* A number conversion (c one of "diuoxXfFeEgGaA"). */
static void put_number(struct line *out, char *spec, size_t n, const char *length, char c,
                       va_list *ap) {
  if (strchr("diuoxX", c)) {
    bool sign = c == 'd' || c == 'i';
    uintmax_t v = int_arg(ap, length, sign);
    end_spec(spec, n, "j", c);
    if (sign)
      put_spec(out, spec, (intmax_t)v);
    else
      put_spec(out, spec, v);
    return;
  }
  end_spec(spec, n, length, c);
  if (!strcmp(length, "L"))
    put_spec(out, spec, va_arg(*ap, long double));
  else
    put_spec(out, spec, va_arg(*ap, double));
}

/* A text conversion (c one of "cs"). */
static void put_text(struct line *out, char *spec, size_t n, const char *length, char c,
                     va_list *ap) {
  end_spec(spec, n, length, c);
  if (c == 'c') {
    if (!strcmp(length, "l"))
      put_spec(out, spec, va_arg(*ap, wint_t));
    else
      put_spec(out, spec, va_arg(*ap, int));
  } else if (!strcmp(length, "l")) {
    const wchar_t *w = va_arg(*ap, const wchar_t *);
    put_spec(out, spec, w ? w : L"(null)");
  } else {
    const char *s = va_arg(*ap, const char *);
    if (n == 1) /* plain %s */
      put_str(out, s ? s : "(null)");
    else
      put_spec(out, spec, s ? s : "(null)");
  }
}

static const char *convert(struct line *out, const char *fmt, va_list *ap, int errno_was,
                           bool *data) {
  char spec[64], length[3] = "";
  size_t n = 1;
  const char *p;
  spec[0] = '%';
  p = read_spec(fmt + 1, ap, spec, &n, length);
  *data = false;
  if (*p == '%') {
    put(out, "%", 1);
  } else if (*p && strchr("diuoxXfFeEgGaA", *p)) {
    put_number(out, spec, n, length, *p, ap);
  } else if (*p == 'c' || *p == 's') {
    *data = true;
    put_text(out, spec, n, length, *p, ap);
  } else if (*p == 'p') {
    end_spec(spec, n, "", 'p');
    put_spec(out, spec, va_arg(*ap, void *));
  } else if (*p == 'n') {
    (void)va_arg(*ap, void *);
  } else if (*p == 'm') {
    *data = true;
    put_str(out, strerror(errno_was));
  } else { /* not a conversion: its text as it is */
    put(out, fmt, (size_t)(p - fmt));
    return p;
  }
  return p + 1;
}

/* A key="value" pair of a call: the key from the format, the value's text
 * (format text and arguments) in the record's values. */
struct field {
  const char *key;
  size_t key_len;
  size_t off, len;           /* of the value in record.values */
  bool quoted;               /* the format quotes the value */
  bool data;                 /* a string or character argument is part of it */
  size_t trail_off, trail_len; /* format text after the value that is no pair, in record.trail */
};

/* A call taken apart by its format: the message, then the pairs. */
struct record {
  struct line msg;      /* the message as printf would write it */
  struct line msg_text; /* the message for the text format: data quoted when need be */
  struct line values;
  struct line trail; /* for the text format */
  struct field *fields;
  size_t n, cap;
};

/* Message text for the text format: the format's own text escaped (so a line
 * never breaks), data as it is when harmless, else quoted. */
static void put_message_text(struct line *l, const char *s, size_t n, bool data) {
  if (data && !harmless(s, n))
    put_quoted(l, s, n);
  else
    put_escaped(l, s, n, false);
}

/* The length of the " key=" at p, or 0 when none starts there. */
static size_t pair_at(const char *p) {
  size_t k;
  if (*p != ' ')
    return 0;
  k = strspn(p + 1, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-");
  return k && p[1 + k] == '=' ? k + 2 : 0;
}

static struct field *add_field(struct record *r, const char *key, size_t key_len) {
  struct field *f;
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 8;
    f = realloc(r->fields, cap * sizeof(*f));
    if (!f)
      return NULL;
    r->fields = f;
    r->cap = cap;
  }
  f = &r->fields[r->n++];
  memset(f, 0, sizeof(*f));
  f->key = key;
  f->key_len = key_len;
  f->off = r->values.len;
  f->trail_off = r->trail.len;
  return f;
}

/*
 * Takes a call apart by its format alone: the message runs to the format's
 * first " key=", a value to its closing quote (when the format opens one) or
 * to the next space; the arguments are formatted one conversion at a time,
 * so nothing they hold can end a value or start a key.
 */
static void take_apart(struct record *r, const char *fmt, va_list *ap, int errno_was) {
  enum { MESSAGE, QUOTED, BARE, TRAIL } state = MESSAGE;
  struct field *f = NULL;
  struct line conv = {NULL, 0, 0};
  const char *p = fmt;
  size_t k;
  bool data;
  while (*p) {
    if (state == QUOTED && *p == '"') {
      state = TRAIL;
      p++;
      continue;
    }
    if (state == BARE && *p == ' ')
      state = TRAIL;
    if ((state == MESSAGE || state == TRAIL) && (k = pair_at(p))) {
      if (f)
        f->trail_len = r->trail.len - f->trail_off;
      f = add_field(r, p + 1, k - 2);
      if (!f)
        break;
      p += k;
      state = *p == '"' ? QUOTED : BARE;
      f->quoted = state == QUOTED;
      p += f->quoted;
      continue;
    }
    conv.len = 0;
    data = false;
    if (*p == '%') {
      p = convert(&conv, p, ap, errno_was, &data);
    } else {
      k = strcspn(p + 1, state == QUOTED ? "%\"" : "% ") + 1;
      put(&conv, p, k);
      p += k;
    }
    if (!conv.len)
      continue;
    if (state == MESSAGE) {
      put(&r->msg, conv.p, conv.len);
      put_message_text(&r->msg_text, conv.p, conv.len, data);
    } else if (state == TRAIL) {
      put_message_text(&r->trail, conv.p, conv.len, data);
    } else {
      put(&r->values, conv.p, conv.len);
      f->data = f->data || data;
    }
  }
  for (k = 0; k < r->n; k++) {
    struct field *g = &r->fields[k];
    g->len = (k + 1 < r->n ? r->fields[k + 1].off : r->values.len) - g->off;
  }
  if (f)
    f->trail_len = r->trail.len - f->trail_off;
  free(conv.p);
}

/* Whether a bare value may be written without quotes: format text and
 * numbers, nothing that would end it or need escaping. */
static bool bare_ok(const struct field *f, const char *v) {
  size_t i;
  if (f->data || !f->len)
    return false;
  for (i = 0; i < f->len; i++)
    if (v[i] <= ' ' || v[i] >= 0x7f || v[i] == '"' || v[i] == '\\')
      return false;
  return true;
}

/* A field's key between `before` and `after`; returns its value's text. */
static const char *put_key(struct line *l, const struct record *r, const struct field *f,
                           const char *before, const char *after) {
  put_str(l, before);
  put(l, f->key, f->key_len);
  put_str(l, after);
  return r->values.p ? r->values.p + f->off : "";
}

static void write_text(struct line *l, const struct record *r) {
  size_t i;
  put(l, r->msg_text.p ? r->msg_text.p : "", r->msg_text.len);
  for (i = 0; i < r->n; i++) {
    const struct field *f = &r->fields[i];
    const char *v = put_key(l, r, f, " ", "=");
    if (f->quoted || !bare_ok(f, v))
      put_quoted(l, v, f->len);
    else
      put(l, v, f->len);
    if (f->trail_len)
      put(l, r->trail.p + f->trail_off, f->trail_len);
  }
}

static void write_json(struct line *l, const struct record *r, enum kcm_log_severity sev,
                       int level, const struct timeval *tv, const char *file, int line) {
  char num[64];
  size_t i;
  snprintf(num, sizeof(num), "{\"ts\":%lld.%06ld,\"caller\":", (long long)tv->tv_sec,
           (long)tv->tv_usec);
  put_str(l, num);
  snprintf(num, sizeof(num), "%s:%d", file, line);
  put_json(l, num, strlen(num));
  put_str(l, ",\"msg\":");
  put_json(l, r->msg.p ? r->msg.p : "", r->msg.len);
  if (sev == KCM_LOG_INFO) {
    snprintf(num, sizeof(num), ",\"v\":%d", level);
    put_str(l, num);
  }
  for (i = 0; i < r->n; i++) {
    const struct field *f = &r->fields[i];
    const char *v = put_key(l, r, f, ",\"", "\":");
    if (!f->quoted && !f->data && is_number(v, f->len))
      put(l, v, f->len);
    else
      put_json(l, v, f->len);
  }
  put(l, "}", 1);
}

static void vwrite(enum kcm_log_severity sev, int level, const char *file, int line,
                   const char *fmt, va_list args) {
  struct record r = {{NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0}, {NULL, 0, 0}, NULL, 0, 0};
  struct line l = {NULL, 0, 0};
  struct timeval tv;
  struct tm tm;
  char head[256];
  va_list ap;
  int errno_was = errno;
  FILE *out = output ? output : stderr;

  gettimeofday(&tv, NULL);
  va_copy(ap, args);
  take_apart(&r, fmt, &ap, errno_was);
  va_end(ap);
  if (format == KCM_LOG_JSON) {
    write_json(&l, &r, sev, level, &tv, file, line);
  } else {
    localtime_r(&tv.tv_sec, &tm);
    snprintf(head, sizeof(head), "%c%02d%02d %02d:%02d:%02d.%06ld %7d %s:%d] ",
             severity_letter[sev], tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (long)tv.tv_usec, (int)getpid(), file, line);
    put_str(&l, head);
    write_text(&l, &r);
  }
  put(&l, "\n", 1);
  /* One write per line so concurrent writers never interleave. */
  if (l.p) {
    fwrite(l.p, 1, l.len, out);
    fflush(out);
  }
  free(l.p);
  free(r.msg.p);
  free(r.msg_text.p);
  free(r.values.p);
  free(r.trail.p);
  free(r.fields);
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
