/* api — decoding cached Kubernetes objects; see include/kcm/api.h. */
#include "kcm/api.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "kcm/error.h"
#include "kcm/jsonw.h"

static const struct kcm_api_kind *const kinds[KCM_KIND_COUNT] = {
    [KCM_KIND_POD] = &kcm_api_kind_pod,
    [KCM_KIND_REPLICASET] = &kcm_api_kind_replicaset,
    [KCM_KIND_DEPLOYMENT] = &kcm_api_kind_deployment,
};

const struct kcm_api_kind *kcm_api_kind(enum kcm_kind kind) {
  return kind < KCM_KIND_COUNT ? kinds[kind] : NULL;
}

const char *kcm_api_kind_name(enum kcm_kind kind) {
  return kind < KCM_KIND_COUNT ? kinds[kind]->name : "Unknown";
}

const struct kcm_writers *kcm_api_writers_of(const struct kcm_object *o) {
  size_t at = o->kind < KCM_KIND_COUNT ? kinds[o->kind]->writers_at : 0;
  return at ? (const struct kcm_writers *)((const char *)o + at) : NULL;
}

const char *kcm_api_writers_newest(const struct kcm_writers *w, int64_t *at) {
  const char *newest = NULL;
  uint8_t i;
  *at = 0;
  for (i = 0; i < w->n; i++)
    if (!newest || w->status[i].at >= *at) {
      newest = w->status[i].manager;
      *at = w->status[i].at;
    }
  return newest;
}

/* --- small parsers ------------------------------------------------------------ */

static int hexval(int c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  c = tolower(c);
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  return -1;
}

int kcm_api_parse_uid(const char *s, struct kcm_uid *out) {
  static const int dashes[] = {8, 13, 18, 23};
  size_t i, j = 0, d = 0;
  if (strlen(s) != 36)
    return KCM_EINVAL;
  for (i = 0; i < 36;) {
    int hi, lo;
    if (d < 4 && i == (size_t)dashes[d]) {
      if (s[i] != '-')
        return KCM_EINVAL;
      d++;
      i++;
      continue;
    }
    hi = hexval((unsigned char)s[i]);
    lo = hexval((unsigned char)s[i + 1]);
    if (hi < 0 || lo < 0)
      return KCM_EINVAL;
    out->b[j++] = (uint8_t)(hi << 4 | lo);
    i += 2;
  }
  return 0;
}

void kcm_api_format_uid(const struct kcm_uid *u, char *buf, size_t len) {
  static const char hex[] = "0123456789abcdef";
  char out[37], *p = out;
  size_t i;
  for (i = 0; i < sizeof(u->b); i++) {
    if (i == 4 || i == 6 || i == 8 || i == 10)
      *p++ = '-';
    *p++ = hex[u->b[i] >> 4];
    *p++ = hex[u->b[i] & 15];
  }
  *p = '\0';
  if (len >= sizeof(out)) {
    memcpy(buf, out, sizeof(out));
  } else if (len) { /* truncated, as snprintf() would */
    memcpy(buf, out, len - 1);
    buf[len - 1] = '\0';
  }
}

bool kcm_api_uid_equal(const struct kcm_uid *a, const struct kcm_uid *b) {
  return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

static int digits(const char *s, int n, int *out) {
  int i, v = 0;
  for (i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i]))
      return -1;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return 0;
}

bool kcm_api_parse_rv(const char *s, uint64_t *out) {
  uint64_t v = 0;
  if (!*s)
    return false;
  for (; *s; s++) {
    unsigned d = (unsigned)(*s - '0');
    if (d > 9 || v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

int kcm_api_parse_time(const char *s, int64_t *out) {
  struct tm tm = {0};
  int y, mo, d, h, mi, sec, off = 0;
  const char *p;
  if (strlen(s) < 20 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) ||
      s[7] != '-' || digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') ||
      digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' ||
      digits(s + 17, 2, &sec))
    return KCM_EINVAL;
  p = s + 19;
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p))
      return KCM_EINVAL;
    while (isdigit((unsigned char)*p))
      p++;
  }
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int oh, om;
    if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 || om > 59)
      return KCM_EINVAL;
    off = (oh * 60 + om) * 60 * (*p == '-' ? -1 : 1);
    p += 6;
  } else {
    return KCM_EINVAL;
  }
  if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
    return KCM_EINVAL;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  *out = (int64_t)timegm(&tm) - off;
  return 0;
}

void kcm_api_format_time(int64_t t, char *buf, size_t len) {
  time_t tt = (time_t)t;
  struct tm tm;
  gmtime_r(&tt, &tm);
  strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* --- writing JSON ------------------------------------------------------------- */

void kcm_api_write_uid(struct kcm_jsonw *w, const struct kcm_uid *u) {
  char buf[37];
  kcm_api_format_uid(u, buf, sizeof(buf));
  kcm_jsonw_string(w, buf);
}

void kcm_api_write_controller_ref(struct kcm_jsonw *w, const char *api_version,
                                  const char *kind, const char *name,
                                  const struct kcm_uid *uid) {
  kcm_jsonw_object(w);
  kcm_jsonw_key_string(w, "apiVersion", api_version);
  kcm_jsonw_key_string(w, "kind", kind);
  kcm_jsonw_key_string(w, "name", name);
  kcm_jsonw_key(w, "uid");
  kcm_api_write_uid(w, uid);
  kcm_jsonw_key_bool(w, "controller", true);
  kcm_jsonw_key_bool(w, "blockOwnerDeletion", true);
  kcm_jsonw_end(w);
}

int kcm_api_owner_patch(struct kcm_buf *b, bool adopt, const char *api_version,
                        const char *kind, const char *name, const struct kcm_uid *owner,
                        const struct kcm_uid *object) {
  struct kcm_jsonw w;
  kcm_jsonw_start(&w, b);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_object(&w, "metadata");
  kcm_jsonw_key_array(&w, "ownerReferences");
  if (adopt) {
    kcm_api_write_controller_ref(&w, api_version, kind, name, owner);
  } else {
    kcm_jsonw_object(&w);
    kcm_jsonw_key_string(&w, "$patch", "delete");
    kcm_jsonw_key(&w, "uid");
    kcm_api_write_uid(&w, owner);
    kcm_jsonw_end(&w);
  }
  kcm_jsonw_end(&w);
  kcm_jsonw_key(&w, "uid");
  kcm_api_write_uid(&w, object);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  return kcm_jsonw_finish(&w);
}

int kcm_api_delete_options(struct kcm_buf *b, const struct kcm_uid *uid, uint64_t rv) {
  struct kcm_jsonw w;
  kcm_jsonw_start(&w, b);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "apiVersion", "v1");
  kcm_jsonw_key_string(&w, "kind", "DeleteOptions");
  kcm_jsonw_key_object(&w, "preconditions");
  kcm_jsonw_key(&w, "uid");
  kcm_api_write_uid(&w, uid);
  kcm_jsonw_key(&w, "resourceVersion");
  kcm_jsonw_uint_string(&w, rv);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  return kcm_jsonw_finish(&w);
}

int kcm_api_cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int kcm_api_canonical_json(struct json_object *v, struct kcm_buf *b) {
  struct kcm_jsonw w;
  kcm_jsonw_start(&w, b);
  kcm_jsonw_tree(&w, v, true);
  return kcm_jsonw_finish(&w);
}

/* --- field access --------------------------------------------------------------- */

int kcm_api_bad(struct kcm_api_dctx *d, const char *field, const char *problem) {
  snprintf(d->err->field, sizeof(d->err->field), "%s", field);
  snprintf(d->err->problem, sizeof(d->err->problem), "%s", problem);
  return KCM_EINVAL;
}

struct json_object *kcm_api_get(struct json_object *o, const char *key) {
  struct json_object *v;
  if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
    return NULL;
  return json_object_is_type(v, json_type_null) ? NULL : v;
}

int kcm_api_get_object(struct kcm_api_dctx *d, struct json_object *o, const char *key,
                       const char *field, struct json_object **out) {
  *out = kcm_api_get(o, key);
  if (*out && !json_object_is_type(*out, json_type_object))
    return kcm_api_bad(d, field, "must be an object");
  return 0;
}

static int decode_selector(struct kcm_api_dctx *d, struct json_object *spec, struct kcm_selector *out) {
  const char *why = NULL;
  int err = kcm_api_selector_decode(out, kcm_api_get(spec, "selector"), &why);
  return err == KCM_EINVAL ? kcm_api_bad(d, "spec.selector", why) : err;
}

/* The selector as canonical JSON, for ReplicaSets made from it. */
static int decode_selector_json(struct kcm_api_dctx *d, struct json_object *spec, char **out) {
  struct kcm_buf b = KCM_BUF_INIT(1u << 20);
  struct json_object *sel = kcm_api_get(spec, "selector");
  int err;
  if (!sel)
    return 0;
  if ((err = kcm_api_canonical_json(sel, &b))) {
    kcm_buf_release(&b);
    return err == KCM_ETOOBIG ? kcm_api_bad(d, "spec.selector", "is too large") : err;
  }
  *out = kcm_buf_take(&b);
  return *out ? 0 : KCM_ENOMEM;
}

static int decode_template(struct kcm_api_dctx *d, struct json_object *spec, char **out,
                           uint64_t *key, struct kcm_labels *labels) {
  struct json_object *tmpl, *tmeta, *ts;
  struct kcm_buf b = KCM_BUF_INIT(KCM_API_OBJECT_MAX);
  const char *why = NULL;
  int err = kcm_api_get_object(d, spec, "template", "spec.template", &tmpl);
  if (err)
    return err;
  if (!tmpl)
    return kcm_api_bad(d, "spec.template", "is required");
  if ((err = kcm_api_get_object(d, tmpl, "metadata", "spec.template.metadata", &tmeta)))
    return err;
  if (labels) {
    err = kcm_api_labels_decode(labels, d->pool, kcm_api_get(tmeta, "labels"), &why);
    if (err == KCM_EINVAL)
      return kcm_api_bad(d, "spec.template.metadata.labels", why);
    if (err)
      return err;
  }
  if (d->canonical) {
    *key = d->key;
    return (*out = strdup(d->canonical)) ? 0 : KCM_ENOMEM;
  }
  /* A null creationTimestamp is the zero time, which kube-apiserver leaves
   * out since 1.34 and wrote as null before: the same template either way,
   * as upstream compares the decoded structs. */
  if (tmeta && json_object_object_get_ex(tmeta, "creationTimestamp", &ts) && !ts)
    json_object_object_del(tmeta, "creationTimestamp");
  err = kcm_api_canonical_json(tmpl, &b);
  if (!err)
    err = kcm_api_template_key(tmpl, key);
  if (err) {
    kcm_buf_release(&b);
    return err == KCM_ETOOBIG ? kcm_api_bad(d, "spec.template", "is too large") : err;
  }
  *out = kcm_buf_take(&b);
  return *out ? 0 : KCM_ENOMEM;
}

int kcm_api_decode_spec_parts(const struct kcm_api_parts *dst, struct json_object *spec,
                              struct kcm_intern *pool, const char *canonical, uint64_t key,
                              struct kcm_api_error *err) {
  struct kcm_api_dctx d = {pool, err, canonical, key};
  int rc;
  if (spec && !json_object_is_type(spec, json_type_object))
    return kcm_api_bad(&d, "spec", "must be an object");
  if ((rc = decode_selector(&d, spec, dst->selector)) ||
      (rc = decode_template(&d, spec, dst->template, dst->template_key, dst->template_labels)))
    return rc;
  return dst->selector_json ? decode_selector_json(&d, spec, dst->selector_json) : 0;
}

/* --- kinds ---------------------------------------------------------------------- */

enum kcm_pod_phase kcm_api_pod_phase(const char *phase) {
  if (phase && !strcmp(phase, "Running"))
    return KCM_POD_RUNNING;
  if (phase && !strcmp(phase, "Succeeded"))
    return KCM_POD_SUCCEEDED;
  if (phase && !strcmp(phase, "Failed"))
    return KCM_POD_FAILED;
  if (phase && !strcmp(phase, "Unknown"))
    return KCM_POD_UNKNOWN;
  return KCM_POD_PENDING;
}

bool kcm_api_parse_percent(const char *s, int32_t *out) {
  char *end;
  long x;
  errno = 0;
  x = strtol(s, &end, 10);
  if (errno || end == s || end[0] != '%' || end[1] || x < 0 || x > INT32_MAX)
    return false;
  *out = (int32_t)x;
  return true;
}

struct kcm_object *kcm_api_ref(struct kcm_object *o) {
  o->refs++;
  return o;
}

void kcm_api_writers_release(struct kcm_writers *w, struct kcm_intern *pool) {
  uint8_t i;
  for (i = 0; i < w->n; i++)
    kcm_intern_put(pool, w->status[i].manager);
  memset(w, 0, sizeof(*w));
}

void kcm_api_unref(struct kcm_object *o, struct kcm_intern *pool) {
  if (!o || --o->refs)
    return;
  kinds[o->kind]->release(o, pool);
  kcm_intern_put(pool, o->ns);
  free(o->name);
  kcm_labels_release(&o->labels, pool);
  kcm_intern_put(pool, o->controller.api_version);
  kcm_intern_put(pool, o->controller.kind);
  kcm_intern_put(pool, o->controller.name);
  free(o);
}

size_t kcm_api_pairs_size(const struct kcm_pairs *p) {
  size_t n = p->n * sizeof(*p->items);
  uint32_t i;
  for (i = 0; i < p->n; i++)
    n += strlen(p->items[i].key) + strlen(p->items[i].value) + 2;
  return n;
}

size_t kcm_api_size(const struct kcm_object *o) {
  const struct kcm_api_kind *k = kinds[o->kind];
  return k->size + strlen(o->name) + 1 + o->labels.n * sizeof(struct kcm_label) + k->held(o);
}
