/*
 * api/parts.c — the pieces several objects share: annotation maps,
 * conditions and pod templates. See include/kcm/api.h.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"
#include "kcm/map.h"

/* --- annotations ---------------------------------------------------------------- */

static int cmp_pair(const void *a, const void *b) {
  return strcmp(((const struct kcm_pair *)a)->key, ((const struct kcm_pair *)b)->key);
}

static const char *pair_key(const void *item) { return ((const struct kcm_pair *)item)->key; }

static void drop_pair(void *item, void *ctx) {
  (void)ctx;
  free(((struct kcm_pair *)item)->key);
  free(((struct kcm_pair *)item)->value);
}

int kcm_api_pairs_adopt(struct kcm_pairs *out, struct kcm_pair *items, uint32_t n) {
  void *map = items;
  out->items = NULL;
  out->n = 0;
  if (kcm_labels_sort_unique(&map, &n, sizeof(*items), pair_key, drop_pair, NULL)) {
    struct kcm_pairs all = {items, n};
    kcm_api_pairs_release(&all);
    return KCM_ENOMEM;
  }
  out->items = map;
  out->n = n;
  return 0;
}

int kcm_api_pairs_update(struct kcm_pairs *dst, const struct kcm_pairs *src,
                         bool (*skip)(const char *key), bool *changed) {
  struct kcm_pair *merged;
  uint32_t i = 0, k = 0, n = 0;
  int err = 0;

  if (!src->n)
    return 0;
  if (!(merged = malloc(((size_t)dst->n + src->n) * sizeof(*merged))))
    return KCM_ENOMEM;
  /* One walk of both sorted arrays; dst's strings move, src's are copied. */
  while (!err && k < src->n) {
    const struct kcm_pair *s = &src->items[k];
    int c = i == dst->n ? 1 : strcmp(dst->items[i].key, s->key);
    char *v, *key;
    if (c < 0) {
      merged[n++] = dst->items[i++];
      continue;
    }
    k++;
    if (skip && skip(s->key))
      continue;
    if (c == 0 && !strcmp(dst->items[i].value, s->value)) {
      merged[n++] = dst->items[i++];
      continue;
    }
    v = strdup(s->value);
    key = c ? strdup(s->key) : dst->items[i].key;
    if (!v || !key) {
      free(v);
      err = KCM_ENOMEM; /* what is merged so far stays */
      break;
    }
    if (!c)
      free(dst->items[i++].value);
    merged[n].key = key;
    merged[n++].value = v;
    *changed = true;
  }
  while (i < dst->n)
    merged[n++] = dst->items[i++];
  free(dst->items);
  dst->items = merged;
  dst->n = n;
  return err;
}

void kcm_api_pairs_keep(struct kcm_pairs *p, bool (*keep)(const char *key)) {
  uint32_t i, n = 0;
  for (i = 0; i < p->n; i++) {
    if (keep(p->items[i].key)) {
      p->items[n++] = p->items[i];
    } else {
      free(p->items[i].key);
      free(p->items[i].value);
    }
  }
  p->n = n;
}

bool kcm_api_pairs_equal(const struct kcm_pairs *a, const struct kcm_pairs *b) {
  uint32_t i;
  if (a->n != b->n)
    return false;
  for (i = 0; i < a->n; i++)
    if (strcmp(a->items[i].key, b->items[i].key) || strcmp(a->items[i].value, b->items[i].value))
      return false;
  return true;
}

const char *kcm_api_pairs_get(const struct kcm_pairs *p, const char *key) {
  struct kcm_pair k = {(char *)(uintptr_t)key, NULL};
  struct kcm_pair *hit = p->n ? bsearch(&k, p->items, p->n, sizeof(k), cmp_pair) : NULL;
  return hit ? hit->value : NULL;
}

int kcm_api_pairs_set(struct kcm_pairs *p, const char *key, const char *value) {
  struct kcm_pair k = {(char *)(uintptr_t)key, NULL}, *hit, *grown;
  char *v = strdup(value), *kk;
  uint32_t i;

  if (!v)
    return KCM_ENOMEM;
  hit = p->n ? bsearch(&k, p->items, p->n, sizeof(k), cmp_pair) : NULL;
  if (hit) {
    free(hit->value);
    hit->value = v;
    return 0;
  }
  kk = strdup(key);
  grown = kk ? realloc(p->items, (p->n + 1) * sizeof(*grown)) : NULL;
  if (!grown) {
    free(kk);
    free(v);
    return KCM_ENOMEM;
  }
  p->items = grown;
  for (i = p->n; i > 0 && strcmp(p->items[i - 1].key, key) > 0; i--)
    p->items[i] = p->items[i - 1];
  p->items[i].key = kk;
  p->items[i].value = v;
  p->n++;
  return 0;
}

void kcm_api_pairs_remove(struct kcm_pairs *p, const char *key) {
  struct kcm_pair k = {(char *)(uintptr_t)key, NULL};
  struct kcm_pair *hit = p->n ? bsearch(&k, p->items, p->n, sizeof(k), cmp_pair) : NULL;
  size_t at;
  if (!hit)
    return;
  at = (size_t)(hit - p->items);
  free(hit->key);
  free(hit->value);
  memmove(hit, hit + 1, (p->n - at - 1) * sizeof(*hit));
  p->n--;
}

int kcm_api_pairs_copy(struct kcm_pairs *dst, const struct kcm_pairs *src) {
  uint32_t i;
  dst->items = NULL;
  dst->n = 0;
  if (!src->n)
    return 0;
  dst->items = calloc(src->n, sizeof(*dst->items));
  if (!dst->items)
    return KCM_ENOMEM;
  for (i = 0; i < src->n; i++) {
    dst->items[i].key = strdup(src->items[i].key);
    dst->items[i].value = strdup(src->items[i].value);
    dst->n++;
    if (!dst->items[i].key || !dst->items[i].value) {
      kcm_api_pairs_release(dst);
      return KCM_ENOMEM;
    }
  }
  return 0;
}

void kcm_api_pairs_release(struct kcm_pairs *p) {
  uint32_t i;
  for (i = 0; i < p->n; i++) {
    free(p->items[i].key);
    free(p->items[i].value);
  }
  free(p->items);
  p->items = NULL;
  p->n = 0;
}

/* --- conditions ------------------------------------------------------------------ */

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

static bool str_eq(const char *a, const char *b) {
  return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void condition_release(struct kcm_condition *c) {
  free(c->type);
  free(c->status);
  free(c->reason);
  free(c->message);
  memset(c, 0, sizeof(*c));
}

int kcm_api_condition_copy(struct kcm_condition *dst, const struct kcm_condition *src) {
  memset(dst, 0, sizeof(*dst));
  dst->type = dup_or_null(src->type);
  dst->status = dup_or_null(src->status);
  dst->reason = dup_or_null(src->reason);
  dst->message = dup_or_null(src->message);
  dst->last_update = src->last_update;
  dst->last_transition = src->last_transition;
  if ((src->type && !dst->type) || (src->status && !dst->status) ||
      (src->reason && !dst->reason) || (src->message && !dst->message)) {
    condition_release(dst);
    return KCM_ENOMEM;
  }
  return 0;
}

int kcm_api_conditions_copy(struct kcm_conditions *dst, const struct kcm_conditions *src) {
  uint32_t i;
  dst->items = NULL;
  dst->n = 0;
  if (!src->n)
    return 0;
  dst->items = calloc(src->n, sizeof(*dst->items));
  if (!dst->items)
    return KCM_ENOMEM;
  for (i = 0; i < src->n; i++) {
    if (kcm_api_condition_copy(&dst->items[i], &src->items[i])) {
      kcm_api_conditions_release(dst);
      return KCM_ENOMEM;
    }
    dst->n++;
  }
  return 0;
}

void kcm_api_conditions_release(struct kcm_conditions *c) {
  uint32_t i;
  for (i = 0; i < c->n; i++)
    condition_release(&c->items[i]);
  free(c->items);
  c->items = NULL;
  c->n = 0;
}

const struct kcm_condition *kcm_api_condition_get(const struct kcm_conditions *c,
                                                  const char *type) {
  uint32_t i;
  for (i = 0; i < c->n; i++)
    if (c->items[i].type && strcmp(c->items[i].type, type) == 0)
      return &c->items[i];
  return NULL;
}

void kcm_api_condition_remove(struct kcm_conditions *c, const char *type) {
  uint32_t i, k = 0;
  for (i = 0; i < c->n; i++) {
    if (c->items[i].type && strcmp(c->items[i].type, type) == 0)
      condition_release(&c->items[i]);
    else
      c->items[k++] = c->items[i];
  }
  c->n = k;
}

int kcm_api_condition_append(struct kcm_conditions *c, const struct kcm_condition *cond) {
  struct kcm_condition *grown = realloc(c->items, (c->n + 1) * sizeof(*grown));
  if (!grown)
    return KCM_ENOMEM;
  c->items = grown;
  if (kcm_api_condition_copy(&c->items[c->n], cond))
    return KCM_ENOMEM;
  c->n++;
  return 0;
}

bool kcm_api_conditions_equal(const struct kcm_conditions *a, const struct kcm_conditions *b) {
  uint32_t i;
  if (a->n != b->n)
    return false;
  for (i = 0; i < a->n; i++) {
    const struct kcm_condition *x = &a->items[i], *y = &b->items[i];
    if (!str_eq(x->type, y->type) || !str_eq(x->status, y->status) ||
        !str_eq(x->reason, y->reason) || !str_eq(x->message, y->message) ||
        x->last_update != y->last_update || x->last_transition != y->last_transition)
      return false;
  }
  return true;
}

static void write_time(struct kcm_jsonw *w, const char *key, int64_t t) {
  char buf[32];
  if (!t)
    return;
  kcm_api_format_time(t, buf, sizeof(buf));
  kcm_jsonw_key_string(w, key, buf);
}

static void write_str(struct kcm_jsonw *w, const char *key, const char *v) {
  if (v)
    kcm_jsonw_key_string(w, key, v);
}

void kcm_api_write_conditions(struct kcm_jsonw *w, const struct kcm_conditions *c) {
  uint32_t i;
  if (!c->n) {
    kcm_jsonw_null(w);
    return;
  }
  kcm_jsonw_array(w);
  for (i = 0; i < c->n; i++) {
    const struct kcm_condition *k = &c->items[i];
    kcm_jsonw_object(w);
    write_str(w, "type", k->type);
    write_str(w, "status", k->status);
    write_time(w, "lastUpdateTime", k->last_update);
    write_time(w, "lastTransitionTime", k->last_transition);
    write_str(w, "reason", k->reason);
    write_str(w, "message", k->message);
    kcm_jsonw_end(w);
  }
  kcm_jsonw_end(w);
}

/* --- pod templates ------------------------------------------------------------------ */

/* Take the hash label out of a parsed template (1 if it was there, *restore
 * then holds its value) and put it back. */
static int strip_hash(struct json_object *tmpl, struct json_object **restore) {
  struct json_object *meta, *labels, *hash;
  *restore = NULL;
  if (!json_object_object_get_ex(tmpl, "metadata", &meta) ||
      !json_object_object_get_ex(meta, "labels", &labels) ||
      !json_object_object_get_ex(labels, KCM_API_HASH_LABEL, &hash))
    return 0;
  *restore = json_object_get(hash);
  json_object_object_del(labels, KCM_API_HASH_LABEL);
  return 1;
}

static void restore_hash(struct json_object *tmpl, struct json_object *restore) {
  struct json_object *meta, *labels;
  if (!restore)
    return;
  if (json_object_object_get_ex(tmpl, "metadata", &meta) &&
      json_object_object_get_ex(meta, "labels", &labels))
    json_object_object_add(labels, KCM_API_HASH_LABEL, restore);
  else
    json_object_put(restore);
}

/* The canonical text of a template without its hash label; an empty label
 * map left behind counts as no labels (nil and empty are equal upstream). */
static int canonical_without_hash(struct json_object *tmpl, struct kcm_buf *out) {
  struct json_object *restore, *meta = NULL, *labels = NULL;
  bool dropped_labels = false;
  int err;

  strip_hash(tmpl, &restore);
  if (json_object_object_get_ex(tmpl, "metadata", &meta) &&
      json_object_object_get_ex(meta, "labels", &labels) &&
      (!labels || (json_object_is_type(labels, json_type_object) &&
                   json_object_object_length(labels) == 0))) {
    json_object_get(labels);
    json_object_object_del(meta, "labels");
    dropped_labels = true;
  }
  err = kcm_api_canonical_json(tmpl, out);
  if (dropped_labels)
    json_object_object_add(meta, "labels", labels);
  restore_hash(tmpl, restore);
  return err;
}

int kcm_api_template_key(struct json_object *tmpl, uint64_t *key) {
  struct kcm_buf b = KCM_BUF_INIT(KCM_API_OBJECT_MAX);
  int err = canonical_without_hash(tmpl, &b);
  if (!err)
    *key = kcm_map_hash_bytes(KCM_MAP_HASH_INIT, b.data, b.len);
  kcm_buf_release(&b);
  return err;
}

/* Where the pod-template-hash label sits in a canonical template. */
static bool hash_label_span(const char *t, size_t len, size_t *from, size_t *to) {
  static const char *const labels[] = {"metadata", "labels", NULL};
  struct kcm_json j;
  bool found;
  kcm_json_init(&j);
  kcm_json_start(&j, t, len);
  found = kcm_json_member_span(&j, labels, KCM_API_HASH_LABEL, from, to);
  kcm_json_release(&j);
  return found;
}

/* Byte equality of canonical templates once their hash labels are cut out
 * (most calls: a ReplicaSet against the Deployment it was made from). */
static bool equal_as_text(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b), fa = la, ta = la, fb = lb, tb = lb;
  size_t i = 0, k = 0;
  if (!hash_label_span(a, la, &fa, &ta))
    fa = ta = la;
  if (!hash_label_span(b, lb, &fb, &tb))
    fb = tb = lb;
  if (la - (ta - fa) != lb - (tb - fb))
    return false;
  for (;;) {
    if (i == fa)
      i = ta;
    if (k == fb)
      k = tb;
    if (i == la || k == lb)
      return i == la && k == lb;
    if (a[i++] != b[k++])
      return false;
  }
}

bool kcm_api_template_equal(const char *a, const char *b) {
  struct json_object *ta, *tb;
  struct kcm_buf ba = KCM_BUF_INIT(KCM_API_OBJECT_MAX), bb = KCM_BUF_INIT(KCM_API_OBJECT_MAX);
  bool equal = false;

  if (equal_as_text(a, b))
    return true;
  /* Else compare as upstream does (an empty label map counts as none). */
  ta = kcm_json_tree(a, strlen(a));
  tb = kcm_json_tree(b, strlen(b));
  if (ta && tb && !canonical_without_hash(ta, &ba) && !canonical_without_hash(tb, &bb))
    equal = ba.len == bb.len && memcmp(ba.data, bb.data, ba.len) == 0;
  kcm_buf_release(&ba);
  kcm_buf_release(&bb);
  json_object_put(ta);
  json_object_put(tb);
  return equal;
}

/* --- answers from the API server ----------------------------------------------------- */

const char *kcm_api_recheck(const char *body, const struct kcm_uid *uid) {
  struct json_object *doc = kcm_json_tree(body, strlen(body)), *meta, *v;
  struct kcm_uid got;
  const char *why = NULL;

  if (!doc || !json_object_object_get_ex(doc, "metadata", &meta) ||
      !json_object_object_get_ex(meta, "uid", &v) ||
      kcm_api_parse_uid(json_object_get_string(v), &got))
    why = "cannot be read back";
  else if (!kcm_api_uid_equal(&got, uid))
    why = "is gone: got another uid";
  else if (json_object_object_get_ex(meta, "deletionTimestamp", &v) &&
           json_object_is_type(v, json_type_string))
    why = "has just been deleted";
  json_object_put(doc);
  return why;
}

uint64_t kcm_api_resource_version(struct json_object *obj) {
  struct json_object *meta, *v;
  const char *s;
  uint64_t rv;
  if (!json_object_object_get_ex(obj, "metadata", &meta) ||
      !json_object_object_get_ex(meta, "resourceVersion", &v) ||
      !json_object_is_type(v, json_type_string) || !(s = json_object_get_string(v)))
    return 0;
  return kcm_api_parse_rv(s, &rv) ? rv : 0;
}
