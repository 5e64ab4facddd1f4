/* Test support: the Prometheus text format checker; see exposition.h. */
#include "exposition.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FAMILIES 256
#define MAX_SERIES 4096
#define MAX_LINE 1024
#define MAX_KEY (2 * MAX_LINE + 8) /* name{labels,le=...} */

struct family {
  char name[128];
  char type[16];
  bool help, typed, sampled;
};

/* A histogram's buckets for one label set, and whether _count matched. */
struct buckets {
  char key[MAX_KEY]; /* name{labels without le} */
  double last_le, last_count, inf_count;
  bool any, inf, counted;
};

struct page {
  struct family fam[MAX_FAMILIES];
  size_t nfam;
  struct family *current; /* the family of the previous line */
  char *series[MAX_SERIES];
  size_t nseries;
  struct buckets *hist;
  size_t nhist;
  char why[MAX_LINE + 128];
};

static const char *fail(struct page *p, const char *what, const char *line) {
  snprintf(p->why, sizeof(p->why), "%s: \"%.*s\"", what, MAX_LINE, line);
  return p->why;
}

static bool name_char(char c, bool first, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
         (!first && c >= '0' && c <= '9');
}

/* Length of a metric (colon) or label name at s, 0 if none. */
static size_t name_len(const char *s, bool colon) {
  size_t n = 0;
  while (name_char(s[n], n == 0, colon))
    n++;
  return n;
}

static struct family *family(struct page *p, const char *name, size_t len) {
  size_t i;
  for (i = 0; i < p->nfam; i++)
    if (strlen(p->fam[i].name) == len && !strncmp(p->fam[i].name, name, len))
      return &p->fam[i];
  return NULL;
}

static struct family *add_family(struct page *p, const char *name, size_t len) {
  struct family *f = family(p, name, len);
  if (f || p->nfam == MAX_FAMILIES || len >= sizeof(f->name))
    return f;
  f = &p->fam[p->nfam++];
  memset(f, 0, sizeof(*f));
  memcpy(f->name, name, len);
  return f;
}

/* A family's lines must stand together. */
static bool enter(struct page *p, struct family *f) {
  bool ok = f == p->current || !(f->help || f->typed || f->sampled);
  p->current = f;
  return ok;
}

static const char *comment(struct page *p, const char *line) {
  bool help = !strncmp(line, "# HELP ", 7), type = !strncmp(line, "# TYPE ", 7);
  const char *name = line + 7, *rest;
  size_t n;
  struct family *f;
  if (!help && !type)
    return NULL; /* other comments are allowed and ignored */
  n = name_len(name, true);
  if (!n || (name[n] != ' ' && name[n] != '\0'))
    return fail(p, "bad metric name in comment", line);
  if (!(f = add_family(p, name, n)))
    return fail(p, "too many families", line);
  if (!enter(p, f))
    return fail(p, "family lines do not stand together", line);
  rest = name[n] ? name + n + 1 : "";
  if (help) {
    const char *c;
    if (f->help)
      return fail(p, "second HELP line", line);
    for (c = rest; *c; c++) {
      if (*c != '\\')
        continue;
      if (c[1] != '\\' && c[1] != 'n')
        return fail(p, "bad escape in HELP", line);
      c++;
    }
    f->help = true;
    return NULL;
  }
  if (f->typed)
    return fail(p, "second TYPE line", line);
  if (f->sampled)
    return fail(p, "TYPE after samples", line);
  if (strcmp(rest, "counter") && strcmp(rest, "gauge") && strcmp(rest, "histogram") &&
      strcmp(rest, "summary") && strcmp(rest, "untyped"))
    return fail(p, "unknown type", line);
  snprintf(f->type, sizeof(f->type), "%s", rest);
  f->typed = true;
  return NULL;
}

/* The family a sample name belongs to: itself, or a histogram (summary)
 * through a suffix. */
static struct family *owner(struct page *p, const char *name, size_t n, const char **suffix) {
  static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
  struct family *f = family(p, name, n);
  size_t i;
  *suffix = "";
  if (f && f->typed && strcmp(f->type, "histogram") && strcmp(f->type, "summary"))
    return f;
  for (i = 0; i < 3; i++) {
    size_t k = strlen(suffixes[i]);
    if (n > k && !strncmp(name + n - k, suffixes[i], k) && (f = family(p, name, n - k)) &&
        f->typed && (!strcmp(f->type, "histogram") || (i && !strcmp(f->type, "summary")))) {
      *suffix = suffixes[i];
      return f;
    }
  }
  return NULL;
}

static struct buckets *buckets_of(struct page *p, const char *key) {
  size_t i;
  struct buckets *grown;
  for (i = 0; i < p->nhist; i++)
    if (!strcmp(p->hist[i].key, key))
      return &p->hist[i];
  grown = realloc(p->hist, (p->nhist + 1) * sizeof(*grown));
  if (!grown)
    return NULL;
  p->hist = grown;
  memset(&p->hist[p->nhist], 0, sizeof(*grown));
  snprintf(p->hist[p->nhist].key, sizeof(grown->key), "%s", key);
  return &p->hist[p->nhist++];
}

static bool parse_value(const char *s, double *v) {
  char *end;
  if (!strcmp(s, "NaN") || !strcmp(s, "+Inf") || !strcmp(s, "-Inf")) {
    *v = !strcmp(s, "NaN") ? NAN : s[0] == '+' ? INFINITY : -INFINITY;
    return true;
  }
  if (!*s || !strchr("+-0123456789.", *s) || strpbrk(s, "nNiI"))
    return false;
  *v = strtod(s, &end);
  return *end == '\0';
}

static const char *sample(struct page *p, const char *line) {
  size_t n = name_len(line, true), i;
  const char *s = line + n, *suffix;
  char names[32][64], labels[MAX_LINE] = "", le[64] = "", key[MAX_KEY], value[64];
  size_t nnames = 0, at = 0;
  struct family *f;
  double v;

  if (!n)
    return fail(p, "bad metric name", line);
  if (!(f = owner(p, line, n, &suffix)))
    return fail(p, "sample without a TYPE line", line);
  if (!enter(p, f))
    return fail(p, "family lines do not stand together", line);
  f->sampled = true;
  if (*s == '{') {
    s++;
    while (*s != '}') {
      size_t k = name_len(s, false);
      const char *start = s;
      if (!k || k >= sizeof(names[0]) || s[k] != '=' || s[k + 1] != '"' || nnames == 32)
        return fail(p, "bad label", line);
      for (i = 0; i < nnames; i++)
        if (strlen(names[i]) == k && !strncmp(names[i], s, k))
          return fail(p, "label twice", line);
      memcpy(names[nnames], s, k);
      names[nnames++][k] = '\0';
      for (s += k + 2; *s != '"'; s++) {
        if (!*s)
          return fail(p, "unterminated label value", line);
        if (*s == '\\' && !strchr("\\\"n", *++s))
          return fail(p, "bad escape in label value", line);
      }
      s++;
      if (!strcmp(names[nnames - 1], "le") && !strcmp(suffix, "_bucket"))
        snprintf(le, sizeof(le), "%.*s", (int)(s - start - k - 3), start + k + 2);
      else
        at += (size_t)snprintf(labels + at, sizeof(labels) - at, "%s%.*s", at ? "," : "",
                               (int)(s - start), start);
      if (*s == ',')
        s++;
      else if (*s != '}')
        return fail(p, "bad label list", line);
    }
    s++;
  }
  if (*s != ' ' || sscanf(s + 1, "%63s", value) != 1 || !parse_value(value, &v))
    return fail(p, "bad value", line);
  s += 1 + strlen(value);
  if (*s && (*s != ' ' || strspn(s + 1, "-0123456789") != strlen(s + 1) || !s[1]))
    return fail(p, "bad timestamp", line);
  snprintf(key, sizeof(key), "%.*s{%s%s%s}", (int)n, line, labels, *le ? ",le=" : "", le);
  for (i = 0; i < p->nseries; i++)
    if (!strcmp(p->series[i], key))
      return fail(p, "series twice", line);
  if (p->nseries == MAX_SERIES || !(p->series[p->nseries] = strdup(key)))
    return fail(p, "too many series", line);
  p->nseries++;
  if (strcmp(f->type, "histogram") || !strcmp(suffix, "_sum"))
    return NULL;
  snprintf(key, sizeof(key), "%s{%s}", f->name, labels);
  {
    struct buckets *b = buckets_of(p, key);
    double bound;
    if (!b)
      return fail(p, "out of memory", line);
    if (!strcmp(suffix, "_count")) {
      if (!b->inf || b->inf_count != v || b->counted)
        return fail(p, "_count differs from the +Inf bucket", line);
      b->counted = true;
      return NULL;
    }
    if (!*le || !parse_value(le, &bound) || isnan(bound))
      return fail(p, "bucket without a valid le", line);
    if (b->inf || (b->any && (bound <= b->last_le || v < b->last_count)))
      return fail(p, "buckets do not rise", line);
    b->any = true;
    b->last_le = bound;
    b->last_count = v;
    if (isinf(bound) && bound > 0) {
      b->inf = true;
      b->inf_count = v;
    }
  }
  return NULL;
}

const char *expo_check(const char *text) {
  static struct page p; /* its why outlives the call */
  const char *why = NULL, *line = text;
  size_t i;
  memset(&p, 0, sizeof(p));
  while (*line && !why) {
    const char *nl = strchr(line, '\n');
    char buf[MAX_LINE];
    if (!nl) {
      why = fail(&p, "last line without a newline", line);
    } else if ((size_t)(nl - line) >= sizeof(buf)) {
      why = fail(&p, "line too long", line);
    } else {
      memcpy(buf, line, (size_t)(nl - line));
      buf[nl - line] = '\0';
      if (buf[0] == '#')
        why = comment(&p, buf);
      else if (buf[0])
        why = sample(&p, buf);
      line = nl + 1;
    }
  }
  for (i = 0; i < p.nfam && !why; i++)
    if (!p.fam[i].typed)
      why = fail(&p, "family without a TYPE line", p.fam[i].name);
  for (i = 0; i < p.nhist && !why; i++)
    if (!p.hist[i].inf || !p.hist[i].counted)
      why = fail(&p, "histogram without +Inf bucket or _count", p.hist[i].key);
  for (i = 0; i < p.nseries; i++)
    free(p.series[i]);
  free(p.hist);
  return why;
}

double expo_value(const char *text, const char *series) {
  size_t n = strlen(series);
  const char *line;
  for (line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
    if (!strncmp(line, series, n) && line[n] == ' ')
      return strtod(line + n + 1, NULL);
  return NAN;
}

size_t expo_lines(const char *text, const char *prefix) {
  size_t n = 0, k = strlen(prefix);
  const char *line;
  for (line = text; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
    n += !strncmp(line, prefix, k);
  return n;
}
