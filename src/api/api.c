/* api — decoding cached Kubernetes objects; see include/kcm/api.h. */
#include "kcm/api.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../labels/internal.h"
#include "internal.h"
#include "kcm/error.h"

#define MAX_NAME 253

static const char *const kind_names[KCM_KIND_COUNT] = {"Pod", "ReplicaSet", "Deployment"};

const char *kcm_api_kind_name(enum kcm_kind kind) {
  return kind < KCM_KIND_COUNT ? kind_names[kind] : "Unknown";
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

/* --- canonical JSON ----------------------------------------------------------- */

int kcm_api_json_string(struct kcm_buf *b, const char *s, size_t n) {
  size_t i, start = 0;
  int err = kcm_buf_append(b, "\"", 1);
  for (i = 0; !err && i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char u[8];
    if (c == '"')
      esc = "\\\"";
    else if (c == '\\')
      esc = "\\\\";
    else if (c == '\n')
      esc = "\\n";
    else if (c == '\r')
      esc = "\\r";
    else if (c == '\t')
      esc = "\\t";
    else if (c == '\b')
      esc = "\\b";
    else if (c == '\f')
      esc = "\\f";
    else if (c < 0x20) {
      snprintf(u, sizeof(u), "\\u%04x", c);
      esc = u;
    }
    if (esc) {
      err = kcm_buf_append(b, s + start, i - start);
      if (!err)
        err = kcm_buf_append_str(b, esc);
      start = i + 1;
    }
  }
  if (!err)
    err = kcm_buf_append(b, s + start, n - start);
  if (!err)
    err = kcm_buf_append(b, "\"", 1);
  return err;
}

/* Unless err is set, append s as a JSON string, then the text `then`. */
static int json_field(struct kcm_buf *b, int err, const char *s, const char *then) {
  if (!err)
    err = kcm_api_json_string(b, s, strlen(s));
  return err ? err : kcm_buf_append_str(b, then);
}

int kcm_api_owner_patch(struct kcm_buf *b, bool adopt, const char *api_version,
                        const char *kind, const char *name, const struct kcm_uid *owner,
                        const struct kcm_uid *object) {
  char ouid[37], uid[37];
  int err;
  kcm_api_format_uid(owner, ouid, sizeof(ouid));
  kcm_api_format_uid(object, uid, sizeof(uid));
  if (adopt) {
    err = kcm_buf_append_str(b, "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":");
    err = json_field(b, err, api_version, ",\"kind\":");
    err = json_field(b, err, kind, ",\"name\":");
    err = json_field(b, err, name, ",\"uid\":");
    err = json_field(b, err, ouid, ",\"controller\":true,\"blockOwnerDeletion\":true}],\"uid\":");
  } else {
    err = kcm_buf_append_str(b, "{\"metadata\":{\"ownerReferences\":[{\"$patch\":\"delete\","
                                "\"uid\":");
    err = json_field(b, err, ouid, "}],\"uid\":");
  }
  return json_field(b, err, uid, "}}");
}

int kcm_api_cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int kcm_api_canonical_json(struct json_object *v, struct kcm_buf *b) {
  int err = 0;
  switch (json_object_get_type(v)) {
  case json_type_null:
    return kcm_buf_append_str(b, "null");
  case json_type_boolean:
    return kcm_buf_append_str(b, json_object_get_boolean(v) ? "true" : "false");
  case json_type_int:
    return kcm_buf_appendf(b, "%lld", (long long)json_object_get_int64(v));
  case json_type_double:
    /* json-c keeps the source text of a parsed number. */
    return kcm_buf_append_str(b, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
  case json_type_string:
    return kcm_api_json_string(b, json_object_get_string(v),
                               (size_t)json_object_get_string_len(v));
  case json_type_array: {
    size_t i, n = json_object_array_length(v);
    err = kcm_buf_append(b, "[", 1);
    for (i = 0; !err && i < n; i++) {
      if (i)
        err = kcm_buf_append(b, ",", 1);
      if (!err)
        err = kcm_api_canonical_json(json_object_array_get_idx(v, i), b);
    }
    return err ? err : kcm_buf_append(b, "]", 1);
  }
  case json_type_object: {
    size_t n = (size_t)json_object_object_length(v), i = 0;
    const char **keys = n ? malloc(n * sizeof(*keys)) : NULL;
    struct json_object_iterator it = json_object_iter_begin(v), end = json_object_iter_end(v);
    if (n && !keys)
      return KCM_ENOMEM;
    for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it))
      keys[i++] = json_object_iter_peek_name(&it);
    if (n)
      qsort(keys, n, sizeof(*keys), kcm_api_cmp_str);
    err = kcm_buf_append(b, "{", 1);
    for (i = 0; !err && i < n; i++) {
      struct json_object *child = NULL;
      json_object_object_get_ex(v, keys[i], &child);
      if (i)
        err = kcm_buf_append(b, ",", 1);
      if (!err)
        err = kcm_api_json_string(b, keys[i], strlen(keys[i]));
      if (!err)
        err = kcm_buf_append(b, ":", 1);
      if (!err)
        err = kcm_api_canonical_json(child, b);
    }
    free(keys);
    return err ? err : kcm_buf_append(b, "}", 1);
  }
  }
  return KCM_EINVAL;
}

/* --- field access --------------------------------------------------------------- */

struct dctx {
  struct kcm_intern *pool;
  struct kcm_api_error *err;
  const char *canonical; /* spec.template's canonical JSON, when already known */
  uint64_t key;          /* and its key */
};

static int bad(struct dctx *d, const char *field, const char *problem) {
  snprintf(d->err->field, sizeof(d->err->field), "%s", field);
  snprintf(d->err->problem, sizeof(d->err->problem), "%s", problem);
  return KCM_EINVAL;
}

/* The value at key, or NULL when absent or null. */
static struct json_object *get(struct json_object *o, const char *key) {
  struct json_object *v;
  if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
    return NULL;
  return json_object_is_type(v, json_type_null) ? NULL : v;
}

static int get_object(struct dctx *d, struct json_object *o, const char *key, const char *field,
                      struct json_object **out) {
  *out = get(o, key);
  if (*out && !json_object_is_type(*out, json_type_object))
    return bad(d, field, "must be an object");
  return 0;
}

static int get_array(struct dctx *d, struct json_object *o, const char *key, const char *field,
                     struct json_object **out) {
  *out = get(o, key);
  if (*out && !json_object_is_type(*out, json_type_array))
    return bad(d, field, "must be a list");
  return 0;
}

static int get_string(struct dctx *d, struct json_object *o, const char *key, const char *field,
                      const char **out) {
  struct json_object *v = get(o, key);
  *out = NULL;
  if (!v)
    return 0;
  if (!json_object_is_type(v, json_type_string))
    return bad(d, field, "must be a string");
  *out = json_object_get_string(v);
  return 0;
}

static int get_int(struct dctx *d, struct json_object *o, const char *key, const char *field,
                   int64_t lo, int64_t hi, int64_t *out) {
  struct json_object *v = get(o, key);
  int64_t x;
  if (!v)
    return 0;
  if (!json_object_is_type(v, json_type_int))
    return bad(d, field, "must be an integer");
  errno = 0;
  x = json_object_get_int64(v);
  /* json-c holds numbers past INT64_MAX as unsigned and saturates them. */
  if (x == INT64_MAX && json_object_get_uint64(v) != (uint64_t)INT64_MAX)
    return bad(d, field, "out of range");
  if (errno || x < lo || x > hi)
    return bad(d, field, "out of range");
  *out = x;
  return 0;
}

static int get_i32(struct dctx *d, struct json_object *o, const char *key, const char *field,
                   int32_t *out) {
  int64_t v = *out;
  int err = get_int(d, o, key, field, INT32_MIN, INT32_MAX, &v);
  *out = (int32_t)v;
  return err;
}

static int get_bool(struct dctx *d, struct json_object *o, const char *key, const char *field,
                    bool *out) {
  struct json_object *v = get(o, key);
  if (!v)
    return 0;
  if (!json_object_is_type(v, json_type_boolean))
    return bad(d, field, "must be true or false");
  *out = json_object_get_boolean(v);
  return 0;
}

static int get_time(struct dctx *d, struct json_object *o, const char *key, const char *field,
                    int64_t *out) {
  const char *s;
  int err = get_string(d, o, key, field, &s);
  if (err || !s)
    return err;
  if (kcm_api_parse_time(s, out))
    return bad(d, field, "is not an RFC 3339 time");
  return 0;
}

static int owned_string(struct dctx *d, struct json_object *o, const char *key, const char *field,
                        char **out) {
  const char *s;
  int err = get_string(d, o, key, field, &s);
  *out = NULL;
  if (err || !s)
    return err;
  *out = strdup(s);
  return *out ? 0 : KCM_ENOMEM;
}

/* --- shared parts ---------------------------------------------------------------- */

static int decode_pairs(struct dctx *d, struct json_object *obj, const char *field,
                        struct kcm_pairs *out) {
  struct json_object_iterator it, end;
  size_t n;
  out->items = NULL;
  out->n = 0;
  if (!obj)
    return 0;
  if (!json_object_is_type(obj, json_type_object))
    return bad(d, field, "must be an object of strings");
  n = (size_t)json_object_object_length(obj);
  if (!n)
    return 0;
  out->items = calloc(n, sizeof(*out->items));
  if (!out->items)
    return KCM_ENOMEM;
  it = json_object_iter_begin(obj);
  end = json_object_iter_end(obj);
  for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
    struct json_object *v = json_object_iter_peek_value(&it);
    struct kcm_pair *p = &out->items[out->n];
    if (!json_object_is_type(v, json_type_string))
      return bad(d, field, "must be an object of strings");
    /* kubectl's copy of the whole object: large, and never read. */
    if (!strcmp(json_object_iter_peek_name(&it), KCM_API_LAST_APPLIED))
      continue;
    p->key = strdup(json_object_iter_peek_name(&it));
    p->value = strdup(json_object_get_string(v));
    out->n++;
    if (!p->key || !p->value)
      return KCM_ENOMEM;
  }
  kcm_api_pairs_sort(out);
  return 0;
}

static int decode_conditions(struct dctx *d, struct json_object *status, const char *field,
                             struct kcm_conditions *out) {
  struct json_object *list;
  size_t i, n;
  int err = get_array(d, status, "conditions", field, &list);
  if (err || !list)
    return err;
  n = json_object_array_length(list);
  if (!n)
    return 0;
  out->items = calloc(n, sizeof(*out->items));
  if (!out->items)
    return KCM_ENOMEM;
  for (i = 0; i < n; i++) {
    struct json_object *c = json_object_array_get_idx(list, i);
    struct kcm_condition *k = &out->items[out->n];
    if (!json_object_is_type(c, json_type_object))
      return bad(d, field, "entries must be objects");
    out->n++;
    if ((err = owned_string(d, c, "type", field, &k->type)) ||
        (err = owned_string(d, c, "status", field, &k->status)) ||
        (err = owned_string(d, c, "reason", field, &k->reason)) ||
        (err = owned_string(d, c, "message", field, &k->message)) ||
        (err = get_time(d, c, "lastUpdateTime", field, &k->last_update)) ||
        (err = get_time(d, c, "lastTransitionTime", field, &k->last_transition)))
      return err;
    if (!k->type)
      return bad(d, field, "entries need a type");
  }
  return 0;
}

static int decode_owners(struct dctx *d, struct kcm_object *o, struct json_object *meta) {
  struct json_object *refs;
  size_t i, n;
  int err = get_array(d, meta, "ownerReferences", "metadata.ownerReferences", &refs);
  if (err || !refs)
    return err;
  n = json_object_array_length(refs);
  o->nowners = n > UINT16_MAX ? UINT16_MAX : (uint16_t)n;
  for (i = 0; i < n; i++) {
    struct json_object *r = json_object_array_get_idx(refs, i);
    const char *av, *kind, *name, *uid;
    bool controller = false, block = false;
    if (!json_object_is_type(r, json_type_object))
      return bad(d, "metadata.ownerReferences", "entries must be objects");
    if ((err = get_bool(d, r, "controller", "metadata.ownerReferences.controller",
                        &controller)))
      return err;
    if (!controller || o->has_controller)
      continue;
    if ((err = get_string(d, r, "apiVersion", "metadata.ownerReferences.apiVersion", &av)) ||
        (err = get_string(d, r, "kind", "metadata.ownerReferences.kind", &kind)) ||
        (err = get_string(d, r, "name", "metadata.ownerReferences.name", &name)) ||
        (err = get_string(d, r, "uid", "metadata.ownerReferences.uid", &uid)) ||
        (err = get_bool(d, r, "blockOwnerDeletion",
                        "metadata.ownerReferences.blockOwnerDeletion", &block)))
      return err;
    if (!av || !kind || !name || !uid)
      return bad(d, "metadata.ownerReferences", "apiVersion, kind, name and uid are required");
    if (kcm_api_parse_uid(uid, &o->controller.uid))
      return bad(d, "metadata.ownerReferences.uid", "is not a UID");
    o->controller.api_version = kcm_intern_str(d->pool, av);
    o->controller.kind = kcm_intern_str(d->pool, kind);
    o->controller.name = kcm_intern_str(d->pool, name);
    o->controller.block_owner_deletion = block;
    o->has_controller = true;
    if (!o->controller.api_version || !o->controller.kind || !o->controller.name)
      return KCM_ENOMEM;
  }
  return 0;
}

static int decode_meta(struct dctx *d, struct kcm_object *o, struct json_object *obj,
                       struct json_object **meta_out) {
  struct json_object *meta;
  const char *name, *ns, *uid, *rv;
  const char *why = NULL;
  int err = get_object(d, obj, "metadata", "metadata", &meta);

  if (err)
    return err;
  if (!meta)
    return bad(d, "metadata", "is required");
  *meta_out = meta;
  if ((err = get_string(d, meta, "name", "metadata.name", &name)) ||
      (err = get_string(d, meta, "namespace", "metadata.namespace", &ns)) ||
      (err = get_string(d, meta, "uid", "metadata.uid", &uid)) ||
      (err = get_string(d, meta, "resourceVersion", "metadata.resourceVersion", &rv)) ||
      (err = get_int(d, meta, "generation", "metadata.generation", 0, INT64_MAX,
                     &o->generation)) ||
      (err = get_time(d, meta, "creationTimestamp", "metadata.creationTimestamp", &o->created)) ||
      (err = get_time(d, meta, "deletionTimestamp", "metadata.deletionTimestamp", &o->deleted)))
    return err;
  if (!name || !*name)
    return bad(d, "metadata.name", "is required");
  if (strlen(name) > MAX_NAME)
    return bad(d, "metadata.name", "is longer than 253 characters");
  if (!ns || !*ns)
    return bad(d, "metadata.namespace", "is required");
  if (!uid || kcm_api_parse_uid(uid, &o->uid))
    return bad(d, "metadata.uid", "is not a UID");
  if (!rv)
    return bad(d, "metadata.resourceVersion", "is required");
  if (!kcm_api_parse_rv(rv, &o->rv))
    return bad(d, "metadata.resourceVersion", "is not a number");
  if (!(o->name = strdup(name)) || !(o->ns = kcm_intern_str(d->pool, ns)))
    return KCM_ENOMEM;
  err = kcm_labels_decode(&o->labels, d->pool, get(meta, "labels"), &why);
  if (err == KCM_EINVAL)
    return bad(d, "metadata.labels", why);
  if (err)
    return err;
  return decode_owners(d, o, meta);
}

static int decode_selector(struct dctx *d, struct json_object *spec, struct kcm_selector *out) {
  const char *why = NULL;
  int err = kcm_labels_selector_decode(out, get(spec, "selector"), &why);
  return err == KCM_EINVAL ? bad(d, "spec.selector", why) : err;
}

/* The selector as canonical JSON, for ReplicaSets made from it. */
static int decode_selector_json(struct dctx *d, struct json_object *spec, char **out) {
  struct kcm_buf b = KCM_BUF_INIT(1u << 20);
  struct json_object *sel = get(spec, "selector");
  int err;
  if (!sel)
    return 0;
  if ((err = kcm_api_canonical_json(sel, &b))) {
    kcm_buf_release(&b);
    return err == KCM_ETOOBIG ? bad(d, "spec.selector", "is too large") : err;
  }
  *out = kcm_buf_take(&b);
  return *out ? 0 : KCM_ENOMEM;
}

static int decode_template(struct dctx *d, struct json_object *spec, char **out,
                           uint64_t *key, struct kcm_labels *labels) {
  struct json_object *tmpl, *tmeta;
  struct kcm_buf b = KCM_BUF_INIT(4u << 20);
  const char *why = NULL;
  int err = get_object(d, spec, "template", "spec.template", &tmpl);
  if (err)
    return err;
  if (!tmpl)
    return bad(d, "spec.template", "is required");
  if ((err = get_object(d, tmpl, "metadata", "spec.template.metadata", &tmeta)))
    return err;
  if (labels) {
    err = kcm_labels_decode(labels, d->pool, get(tmeta, "labels"), &why);
    if (err == KCM_EINVAL)
      return bad(d, "spec.template.metadata.labels", why);
    if (err)
      return err;
  }
  if (d->canonical) {
    *key = d->key;
    return (*out = strdup(d->canonical)) ? 0 : KCM_ENOMEM;
  }
  err = kcm_api_canonical_json(tmpl, &b);
  if (!err)
    err = kcm_api_template_key(tmpl, key);
  if (err) {
    kcm_buf_release(&b);
    return err == KCM_ETOOBIG ? bad(d, "spec.template", "is too large") : err;
  }
  *out = kcm_buf_take(&b);
  return *out ? 0 : KCM_ENOMEM;
}

/* spec.selector and spec.template of a ReplicaSet or Deployment. */
static int decode_spec_parts(struct dctx *d, struct kcm_object *o, struct json_object *spec) {
  struct kcm_replicaset *rs = (struct kcm_replicaset *)o;
  struct kcm_deployment *dp = (struct kcm_deployment *)o;
  int err;
  if (o->kind == KCM_KIND_REPLICASET) {
    if ((err = decode_selector(d, spec, &rs->selector)))
      return err;
    return decode_template(d, spec, &rs->template, &rs->template_key, &rs->template_labels);
  }
  if ((err = decode_selector(d, spec, &dp->selector)) ||
      (err = decode_template(d, spec, &dp->template, &dp->template_key, NULL)))
    return err;
  return decode_selector_json(d, spec, &dp->selector_json);
}

int kcm_api_decode_spec_parts(struct kcm_object *o, struct json_object *spec,
                              struct kcm_intern *pool, const char *canonical, uint64_t key,
                              struct kcm_api_error *err) {
  struct dctx d = {pool, err, canonical, key};
  if (spec && !json_object_is_type(spec, json_type_object))
    return bad(&d, "spec", "must be an object");
  return decode_spec_parts(&d, o, spec);
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

/* The most restarts of a restartable init container (a sidecar), from the
 * statuses in `list` (checked first): the sidecars' names sorted once, each
 * status looked up among them. */
static int sidecar_restarts(struct dctx *d, struct kcm_pod *p, struct json_object *spec,
                            struct json_object *list) {
  struct json_object *inits;
  const char **sidecars = NULL, *name;
  size_t i, m, k = 0, n = json_object_array_length(list);
  int32_t r = 0;
  int err;

  for (i = 0; i < n; i++) {
    struct json_object *cs = json_object_array_get_idx(list, i);
    if ((err = get_string(d, cs, "name", "status.initContainerStatuses.name", &name)) ||
        (err = get_i32(d, cs, "restartCount", "status.initContainerStatuses.restartCount", &r)))
      return err;
  }
  if ((err = get_array(d, spec, "initContainers", "spec.initContainers", &inits)))
    return err;
  m = inits ? json_object_array_length(inits) : 0;
  if (m && !(sidecars = malloc(m * sizeof(*sidecars))))
    return KCM_ENOMEM;
  for (i = 0; i < m; i++) {
    struct json_object *c = json_object_array_get_idx(inits, i);
    const char *cname = NULL, *policy = NULL;
    get_string(d, c, "name", "spec.initContainers.name", &cname);
    get_string(d, c, "restartPolicy", "spec.initContainers.restartPolicy", &policy);
    if (cname && policy && !strcmp(policy, "Always"))
      sidecars[k++] = cname;
  }
  if (k)
    qsort(sidecars, k, sizeof(*sidecars), kcm_api_cmp_str);
  for (i = 0; k && i < n; i++) {
    struct json_object *cs = json_object_array_get_idx(list, i);
    name = NULL;
    r = 0;
    get_string(d, cs, "name", "", &name);
    get_i32(d, cs, "restartCount", "", &r);
    if (name && bsearch(&name, sidecars, k, sizeof(*sidecars), kcm_api_cmp_str) &&
        r > p->sidecar_restarts)
      p->sidecar_restarts = r;
  }
  free(sidecars);
  return 0;
}

static int decode_pod(struct dctx *d, struct kcm_pod *p, struct json_object *obj,
                      struct json_object *meta) {
  struct json_object *spec, *status, *list;
  const char *node, *phase, *cost;
  size_t i, n;
  int err;

  if ((err = get_object(d, obj, "spec", "spec", &spec)) ||
      (err = get_object(d, obj, "status", "status", &status)) ||
      (err = get_string(d, spec, "nodeName", "spec.nodeName", &node)) ||
      (err = get_string(d, status, "phase", "status.phase", &phase)))
    return err;
  if (node && *node && !(p->node = kcm_intern_str(d->pool, node)))
    return KCM_ENOMEM;
  p->phase = (uint8_t)kcm_api_pod_phase(phase);
  if ((err = get_string(d, get(meta, "annotations"), "controller.kubernetes.io/pod-deletion-cost",
                        "metadata.annotations", &cost)))
    return err;
  if (cost) {
    char *end;
    long long v;
    errno = 0;
    v = strtoll(cost, &end, 10);
    if (!errno && end != cost && !*end && v >= INT32_MIN && v <= INT32_MAX)
      p->deletion_cost = (int32_t)v; /* an invalid cost counts as 0, as upstream */
  }
  if ((err = get_array(d, status, "conditions", "status.conditions", &list)))
    return err;
  n = list ? json_object_array_length(list) : 0;
  for (i = 0; i < n; i++) {
    struct json_object *c = json_object_array_get_idx(list, i);
    const char *type, *st;
    if ((err = get_string(d, c, "type", "status.conditions.type", &type)) ||
        (err = get_string(d, c, "status", "status.conditions.status", &st)))
      return err;
    if (type && !strcmp(type, "Ready")) {
      p->ready = st && !strcmp(st, "True");
      if (p->ready &&
          (err = get_time(d, c, "lastTransitionTime", "status.conditions.lastTransitionTime",
                          &p->ready_since)))
        return err;
    }
  }
  if ((err = get_array(d, status, "containerStatuses", "status.containerStatuses", &list)))
    return err;
  n = list ? json_object_array_length(list) : 0;
  for (i = 0; i < n; i++) {
    int32_t r = 0;
    if ((err = get_i32(d, json_object_array_get_idx(list, i), "restartCount",
                       "status.containerStatuses.restartCount", &r)))
      return err;
    if (r > p->restarts)
      p->restarts = r;
  }
  /* Restartable init containers (sidecars) count separately. */
  if ((err = get_array(d, status, "initContainerStatuses", "status.initContainerStatuses",
                       &list)))
    return err;
  n = list ? json_object_array_length(list) : 0;
  return n ? sidecar_restarts(d, p, spec, list) : 0;
}

static int decode_replicaset(struct dctx *d, struct kcm_replicaset *rs, struct json_object *obj,
                             struct json_object *meta) {
  struct json_object *spec, *status;
  int err;

  rs->replicas = 1;
  if ((err = decode_pairs(d, get(meta, "annotations"), "metadata.annotations",
                          &rs->annotations)) ||
      (err = get_object(d, obj, "spec", "spec", &spec)) ||
      (err = get_object(d, obj, "status", "status", &status)) ||
      (err = get_i32(d, spec, "replicas", "spec.replicas", &rs->replicas)) ||
      (err = get_i32(d, spec, "minReadySeconds", "spec.minReadySeconds",
                     &rs->min_ready_seconds)) ||
      (err = decode_spec_parts(d, &rs->o, spec)) ||
      (err = get_i32(d, status, "replicas", "status.replicas", &rs->status.replicas)) ||
      (err = get_i32(d, status, "fullyLabeledReplicas", "status.fullyLabeledReplicas",
                     &rs->status.fully_labeled)) ||
      (err = get_i32(d, status, "readyReplicas", "status.readyReplicas", &rs->status.ready)) ||
      (err = get_i32(d, status, "availableReplicas", "status.availableReplicas",
                     &rs->status.available)) ||
      (err = get_int(d, status, "observedGeneration", "status.observedGeneration", 0, INT64_MAX,
                     &rs->status.observed_generation)) ||
      (err = decode_conditions(d, status, "status.conditions", &rs->status.conditions)))
    return err;
  if (rs->replicas < 0)
    return bad(d, "spec.replicas", "must not be negative");
  return 0;
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

static int decode_intstr(struct dctx *d, struct json_object *o, const char *key,
                         const char *field, struct kcm_intstr *out) {
  struct json_object *v = get(o, key);
  if (!v)
    return 0;
  out->set = true;
  if (json_object_is_type(v, json_type_int)) {
    int64_t x = json_object_get_int64(v);
    if (x < 0 || x > INT32_MAX)
      return bad(d, field, "out of range");
    out->value = (int32_t)x;
    return 0;
  }
  if (json_object_is_type(v, json_type_string) &&
      kcm_api_parse_percent(json_object_get_string(v), &out->value)) {
    out->percent = true;
    return 0;
  }
  return bad(d, field, "must be an integer or a percentage");
}

static int decode_deployment(struct dctx *d, struct kcm_deployment *dp, struct json_object *obj,
                             struct json_object *meta) {
  struct json_object *spec, *status, *strategy, *ru;
  const char *type;
  int64_t rhl = -1, pd = -1, cc = -1;
  int err;

  dp->replicas = 1;
  if ((err = decode_pairs(d, get(meta, "annotations"), "metadata.annotations",
                          &dp->annotations)) ||
      (err = get_object(d, obj, "spec", "spec", &spec)) ||
      (err = get_object(d, obj, "status", "status", &status)) ||
      (err = get_i32(d, spec, "replicas", "spec.replicas", &dp->replicas)) ||
      (err = get_i32(d, spec, "minReadySeconds", "spec.minReadySeconds",
                     &dp->min_ready_seconds)) ||
      (err = get_int(d, spec, "revisionHistoryLimit", "spec.revisionHistoryLimit", 0, INT32_MAX,
                     &rhl)) ||
      (err = get_int(d, spec, "progressDeadlineSeconds", "spec.progressDeadlineSeconds", 0,
                     INT32_MAX, &pd)) ||
      (err = get_bool(d, spec, "paused", "spec.paused", &dp->paused)) ||
      (err = decode_spec_parts(d, &dp->o, spec)) ||
      (err = get_object(d, spec, "strategy", "spec.strategy", &strategy)) ||
      (err = get_string(d, strategy, "type", "spec.strategy.type", &type)) ||
      (err = get_object(d, strategy, "rollingUpdate", "spec.strategy.rollingUpdate", &ru)) ||
      (err = decode_intstr(d, ru, "maxSurge", "spec.strategy.rollingUpdate.maxSurge",
                           &dp->max_surge)) ||
      (err = decode_intstr(d, ru, "maxUnavailable", "spec.strategy.rollingUpdate.maxUnavailable",
                           &dp->max_unavailable)) ||
      (err = get_int(d, status, "observedGeneration", "status.observedGeneration", 0, INT64_MAX,
                     &dp->status.observed_generation)) ||
      (err = get_i32(d, status, "replicas", "status.replicas", &dp->status.replicas)) ||
      (err = get_i32(d, status, "updatedReplicas", "status.updatedReplicas",
                     &dp->status.updated)) ||
      (err = get_i32(d, status, "readyReplicas", "status.readyReplicas", &dp->status.ready)) ||
      (err = get_i32(d, status, "availableReplicas", "status.availableReplicas",
                     &dp->status.available)) ||
      (err = get_i32(d, status, "unavailableReplicas", "status.unavailableReplicas",
                     &dp->status.unavailable)) ||
      (err = get_int(d, status, "collisionCount", "status.collisionCount", 0, INT32_MAX, &cc)) ||
      (err = decode_conditions(d, status, "status.conditions", &dp->status.conditions)))
    return err;
  if (dp->replicas < 0)
    return bad(d, "spec.replicas", "must not be negative");
  if (type && strcmp(type, "Recreate") && strcmp(type, "RollingUpdate"))
    return bad(d, "spec.strategy.type", "must be Recreate or RollingUpdate");
  dp->recreate = type && !strcmp(type, "Recreate");
  dp->revision_history_limit = (int32_t)rhl;
  dp->progress_deadline = (int32_t)pd;
  dp->status.collision_count = (int32_t)cc;
  return 0;
}

static const size_t kind_size[KCM_KIND_COUNT] = {
    sizeof(struct kcm_pod), sizeof(struct kcm_replicaset), sizeof(struct kcm_deployment)};

int kcm_api_decode(enum kcm_kind kind, struct json_object *obj, struct kcm_intern *pool,
                   struct kcm_object **out, struct kcm_api_error *err) {
  struct dctx d = {pool, err, NULL, 0};
  struct json_object *meta = NULL;
  struct kcm_object *o;
  int rc;

  memset(err, 0, sizeof(*err));
  *out = NULL;
  if (kind >= KCM_KIND_COUNT)
    return KCM_EINVAL;
  if (!obj || !json_object_is_type(obj, json_type_object))
    return bad(&d, "(object)", "must be a JSON object");
  o = calloc(1, kind_size[kind]);
  if (!o)
    return KCM_ENOMEM;
  o->kind = (uint8_t)kind;
  o->refs = 1;
  rc = decode_meta(&d, o, obj, &meta);
  if (!rc) {
    switch (kind) {
    case KCM_KIND_POD:
      rc = decode_pod(&d, (struct kcm_pod *)o, obj, meta);
      break;
    case KCM_KIND_REPLICASET:
      rc = decode_replicaset(&d, (struct kcm_replicaset *)o, obj, meta);
      break;
    default:
      rc = decode_deployment(&d, (struct kcm_deployment *)o, obj, meta);
      break;
    }
  }
  if (rc) {
    if (rc == KCM_ENOMEM && !err->field[0])
      bad(&d, "(object)", "out of memory");
    kcm_api_unref(o, pool);
    return rc;
  }
  *out = o;
  return 0;
}

struct kcm_object *kcm_api_ref(struct kcm_object *o) {
  o->refs++;
  return o;
}

void kcm_api_unref(struct kcm_object *o, struct kcm_intern *pool) {
  if (!o || --o->refs)
    return;
  switch (o->kind) {
  case KCM_KIND_POD:
    kcm_intern_put(pool, ((struct kcm_pod *)o)->node);
    break;
  case KCM_KIND_REPLICASET: {
    struct kcm_replicaset *rs = (struct kcm_replicaset *)o;
    kcm_api_pairs_release(&rs->annotations);
    kcm_labels_selector_release(&rs->selector);
    kcm_labels_release(&rs->template_labels, pool);
    free(rs->template);
    kcm_api_conditions_release(&rs->status.conditions);
    break;
  }
  default: {
    struct kcm_deployment *dp = (struct kcm_deployment *)o;
    kcm_api_pairs_release(&dp->annotations);
    kcm_labels_selector_release(&dp->selector);
    free(dp->template);
    free(dp->selector_json);
    kcm_api_conditions_release(&dp->status.conditions);
    break;
  }
  }
  kcm_intern_put(pool, o->ns);
  free(o->name);
  kcm_labels_release(&o->labels, pool);
  kcm_intern_put(pool, o->controller.api_version);
  kcm_intern_put(pool, o->controller.kind);
  kcm_intern_put(pool, o->controller.name);
  free(o);
}

static size_t pairs_size(const struct kcm_pairs *p) {
  size_t n = p->n * sizeof(*p->items);
  uint32_t i;
  for (i = 0; i < p->n; i++)
    n += strlen(p->items[i].key) + strlen(p->items[i].value) + 2;
  return n;
}

size_t kcm_api_size(const struct kcm_object *o) {
  size_t n = kind_size[o->kind] + strlen(o->name) + 1 + o->labels.n * sizeof(struct kcm_label);
  if (o->kind == KCM_KIND_REPLICASET) {
    const struct kcm_replicaset *rs = (const struct kcm_replicaset *)o;
    n += pairs_size(&rs->annotations) + strlen(rs->template) + 1 +
         rs->template_labels.n * sizeof(struct kcm_label) +
         rs->status.conditions.n * sizeof(struct kcm_condition);
  } else if (o->kind == KCM_KIND_DEPLOYMENT) {
    const struct kcm_deployment *dp = (const struct kcm_deployment *)o;
    n += pairs_size(&dp->annotations) + strlen(dp->template) + 1 +
         (dp->selector_json ? strlen(dp->selector_json) + 1 : 0) +
         dp->status.conditions.n * sizeof(struct kcm_condition);
  }
  return n;
}
