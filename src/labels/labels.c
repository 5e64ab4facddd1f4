/* labels — label sets and selectors; see include/kcm/labels.h. */
#include "kcm/labels.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"

static int cmp_label(const void *a, const void *b) {
  return strcmp(((const struct kcm_label *)a)->key, ((const struct kcm_label *)b)->key);
}

int kcm_labels_decode(struct kcm_labels *out, struct kcm_intern *pool, struct json_object *obj,
                      const char **why) {
  struct json_object_iterator it, end;
  size_t n, i = 0;

  out->items = NULL;
  out->n = 0;
  if (!obj || json_object_is_type(obj, json_type_null))
    return 0;
  if (!json_object_is_type(obj, json_type_object)) {
    *why = "must be an object of strings";
    return KCM_EINVAL;
  }
  n = (size_t)json_object_object_length(obj);
  if (!n)
    return 0;
  if (n > UINT32_MAX) {
    *why = "too many entries";
    return KCM_EINVAL;
  }
  out->items = calloc(n, sizeof(*out->items));
  if (!out->items)
    return KCM_ENOMEM;
  it = json_object_iter_begin(obj);
  end = json_object_iter_end(obj);
  for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it), i++) {
    struct json_object *v = json_object_iter_peek_value(&it);
    const char *k = json_object_iter_peek_name(&it);
    if (!json_object_is_type(v, json_type_string)) {
      out->n = (uint32_t)i;
      kcm_labels_release(out, pool);
      *why = "must be an object of strings";
      return KCM_EINVAL;
    }
    out->items[i].key = kcm_intern_str(pool, k);
    out->items[i].value =
        kcm_intern_get(pool, json_object_get_string(v), (size_t)json_object_get_string_len(v));
    if (!out->items[i].key || !out->items[i].value) {
      kcm_intern_put(pool, out->items[i].key);
      kcm_intern_put(pool, out->items[i].value);
      out->n = (uint32_t)i;
      kcm_labels_release(out, pool);
      return KCM_ENOMEM;
    }
  }
  out->n = (uint32_t)n;
  qsort(out->items, n, sizeof(*out->items), cmp_label);
  return 0;
}

/* Pointers to items by key, then by place: of a key given twice, the
 * later item sorts last. */
static int cmp_at(const void *a, const void *b, void *key_of) {
  const char *(*key)(const void *) = *(const char *(**)(const void *))key_of;
  const void *x = *(const void *const *)a, *y = *(const void *const *)b;
  int c = strcmp(key(x), key(y));
  return c ? c : (x > y) - (x < y);
}

int kcm_labels_sort_unique(void **items, uint32_t *n, size_t size,
                           const char *(*key)(const void *item),
                           void (*drop)(void *item, void *ctx), void *ctx) {
  char **order = *n ? malloc(*n * sizeof(*order)) : NULL;
  char *kept = *n ? malloc((size_t)*n * size) : NULL, *fit;
  uint32_t i, k = 0;

  if (*n && (!order || !kept)) {
    free(order);
    free(kept);
    return KCM_ENOMEM;
  }
  for (i = 0; i < *n; i++)
    order[i] = (char *)*items + (size_t)i * size;
  if (*n > 1)
    qsort_r(order, *n, sizeof(*order), cmp_at, &key);
  for (i = 0; i < *n; i++) {
    if (i + 1 < *n && !strcmp(key(order[i]), key(order[i + 1])))
      drop(order[i], ctx);
    else
      memcpy(kept + (size_t)k++ * size, order[i], size);
  }
  free(order);
  free(*items);
  *items = NULL;
  *n = k;
  if (!k) {
    free(kept);
    return 0;
  }
  /* Fit the array: cached objects keep it for their lifetime. */
  fit = realloc(kept, (size_t)k * size);
  *items = fit ? fit : kept;
  return 0;
}

static const char *label_key(const void *item) { return ((const struct kcm_label *)item)->key; }

static void drop_label(void *item, void *pool) {
  kcm_intern_put(pool, ((struct kcm_label *)item)->key);
  kcm_intern_put(pool, ((struct kcm_label *)item)->value);
}

int kcm_labels_adopt(struct kcm_labels *out, struct kcm_intern *pool, struct kcm_label *items,
                     uint32_t n) {
  void *set = items;
  out->items = NULL;
  out->n = 0;
  if (kcm_labels_sort_unique(&set, &n, sizeof(*items), label_key, drop_label, pool)) {
    struct kcm_labels all = {items, n};
    kcm_labels_release(&all, pool);
    return KCM_ENOMEM;
  }
  out->items = set;
  out->n = n;
  return 0;
}

void kcm_labels_release(struct kcm_labels *l, struct kcm_intern *pool) {
  uint32_t i;
  for (i = 0; i < l->n; i++) {
    kcm_intern_put(pool, l->items[i].key);
    kcm_intern_put(pool, l->items[i].value);
  }
  free(l->items);
  l->items = NULL;
  l->n = 0;
}

const char *kcm_labels_get(const struct kcm_labels *l, const char *key) {
  size_t lo = 0, hi = l->n;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    int c = strcmp(l->items[mid].key, key);
    if (!c)
      return l->items[mid].value;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

bool kcm_labels_equal(const struct kcm_labels *a, const struct kcm_labels *b) {
  uint32_t i;
  if (a->n != b->n)
    return false;
  for (i = 0; i < a->n; i++) {
    if (strcmp(a->items[i].key, b->items[i].key) || strcmp(a->items[i].value, b->items[i].value))
      return false;
  }
  return true;
}

/* --- selectors ---------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int cmp_req(const void *a, const void *b) {
  const struct kcm_requirement *x = a, *y = b;
  int c = strcmp(x->key, y->key);
  return c ? c : (int)x->op - (int)y->op;
}

static void release_req(struct kcm_requirement *r) {
  uint32_t i;
  free(r->key);
  for (i = 0; i < r->nvalues; i++)
    free(r->values[i]);
  free(r->values);
}

void kcm_labels_selector_release(struct kcm_selector *s) {
  uint32_t i;
  for (i = 0; i < s->n; i++)
    release_req(&s->reqs[i]);
  free(s->reqs);
  s->reqs = NULL;
  s->n = 0;
}

static int add_req(struct kcm_selector *s, size_t *cap, const char *key, enum kcm_labels_op op) {
  struct kcm_requirement *r;
  if (s->n == *cap) {
    size_t ncap = *cap ? *cap * 2 : 4;
    struct kcm_requirement *grown = realloc(s->reqs, ncap * sizeof(*grown));
    if (!grown)
      return KCM_ENOMEM;
    s->reqs = grown;
    *cap = ncap;
  }
  r = &s->reqs[s->n];
  memset(r, 0, sizeof(*r));
  r->key = strdup(key);
  r->op = op;
  if (!r->key)
    return KCM_ENOMEM;
  s->n++;
  return 0;
}

/* Room for n values, made once: no growing one at a time. */
static int reserve_values(struct kcm_requirement *r, size_t n) {
  r->values = calloc(n, sizeof(*r->values));
  return r->values ? 0 : KCM_ENOMEM;
}

static int add_value(struct kcm_requirement *r, const char *v) {
  if (!(r->values[r->nvalues] = strdup(v)))
    return KCM_ENOMEM;
  r->nvalues++;
  return 0;
}

static int decode_expression(struct kcm_selector *s, size_t *cap, struct json_object *e,
                             const char **why) {
  struct json_object *key, *op, *values;
  const char *ops;
  enum kcm_labels_op kind;
  size_t i, n = 0;
  int err;

  if (!json_object_is_type(e, json_type_object) ||
      !json_object_object_get_ex(e, "key", &key) || !json_object_is_type(key, json_type_string) ||
      !json_object_object_get_ex(e, "operator", &op) || !json_object_is_type(op, json_type_string)) {
    *why = "matchExpressions entries need a string key and operator";
    return KCM_EINVAL;
  }
  ops = json_object_get_string(op);
  if (!strcmp(ops, "In"))
    kind = KCM_LABELS_IN;
  else if (!strcmp(ops, "NotIn"))
    kind = KCM_LABELS_NOT_IN;
  else if (!strcmp(ops, "Exists"))
    kind = KCM_LABELS_EXISTS;
  else if (!strcmp(ops, "DoesNotExist"))
    kind = KCM_LABELS_DOES_NOT_EXIST;
  else {
    *why = "unknown matchExpressions operator";
    return KCM_EINVAL;
  }
  if (json_object_object_get_ex(e, "values", &values) && values &&
      !json_object_is_type(values, json_type_null)) {
    if (!json_object_is_type(values, json_type_array)) {
      *why = "matchExpressions values must be a list";
      return KCM_EINVAL;
    }
    n = json_object_array_length(values);
  }
  if ((kind == KCM_LABELS_IN || kind == KCM_LABELS_NOT_IN) && n == 0) {
    *why = "In and NotIn need values";
    return KCM_EINVAL;
  }
  if ((kind == KCM_LABELS_EXISTS || kind == KCM_LABELS_DOES_NOT_EXIST) && n > 0) {
    *why = "Exists and DoesNotExist take no values";
    return KCM_EINVAL;
  }
  if ((err = add_req(s, cap, json_object_get_string(key), kind)) ||
      (n && (err = reserve_values(&s->reqs[s->n - 1], n))))
    return err;
  for (i = 0; i < n; i++) {
    struct json_object *v = json_object_array_get_idx(values, i);
    if (!json_object_is_type(v, json_type_string)) {
      *why = "matchExpressions values must be strings";
      return KCM_EINVAL;
    }
    if ((err = add_value(&s->reqs[s->n - 1], json_object_get_string(v))))
      return err;
  }
  if (s->reqs[s->n - 1].nvalues)
    qsort(s->reqs[s->n - 1].values, s->reqs[s->n - 1].nvalues, sizeof(char *), cmp_str);
  return 0;
}

int kcm_labels_selector_decode(struct kcm_selector *out, struct json_object *obj,
                               const char **why) {
  struct json_object *ml, *me;
  size_t cap = 0;
  int err = 0;

  memset(out, 0, sizeof(*out));
  if (!obj || json_object_is_type(obj, json_type_null)) {
    out->nothing = true;
    return 0;
  }
  if (!json_object_is_type(obj, json_type_object)) {
    *why = "must be a label selector object";
    return KCM_EINVAL;
  }
  if (json_object_object_get_ex(obj, "matchLabels", &ml) && ml &&
      !json_object_is_type(ml, json_type_null)) {
    struct json_object_iterator it, end;
    if (!json_object_is_type(ml, json_type_object)) {
      *why = "matchLabels must be an object of strings";
      return KCM_EINVAL;
    }
    it = json_object_iter_begin(ml);
    end = json_object_iter_end(ml);
    for (; !err && !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
      struct json_object *v = json_object_iter_peek_value(&it);
      if (!json_object_is_type(v, json_type_string)) {
        *why = "matchLabels must be an object of strings";
        err = KCM_EINVAL;
        break;
      }
      err = add_req(out, &cap, json_object_iter_peek_name(&it), KCM_LABELS_IN);
      if (!err)
        err = reserve_values(&out->reqs[out->n - 1], 1);
      if (!err)
        err = add_value(&out->reqs[out->n - 1], json_object_get_string(v));
    }
  }
  if (!err && json_object_object_get_ex(obj, "matchExpressions", &me) && me &&
      !json_object_is_type(me, json_type_null)) {
    size_t i, n;
    if (!json_object_is_type(me, json_type_array)) {
      *why = "matchExpressions must be a list";
      err = KCM_EINVAL;
    } else {
      n = json_object_array_length(me);
      for (i = 0; !err && i < n; i++)
        err = decode_expression(out, &cap, json_object_array_get_idx(me, i), why);
    }
  }
  if (err) {
    kcm_labels_selector_release(out);
    return err;
  }
  if (out->n)
    qsort(out->reqs, out->n, sizeof(*out->reqs), cmp_req);
  return 0;
}

static bool has_value(const struct kcm_requirement *r, const char *v) {
  return r->nvalues && bsearch(&v, r->values, r->nvalues, sizeof(char *), cmp_str) != NULL;
}

bool kcm_labels_matches(const struct kcm_selector *s, const struct kcm_labels *l) {
  uint32_t i;
  if (s->nothing)
    return false;
  for (i = 0; i < s->n; i++) {
    const struct kcm_requirement *r = &s->reqs[i];
    const char *v = kcm_labels_get(l, r->key);
    switch (r->op) {
    case KCM_LABELS_IN:
      if (!v || !has_value(r, v))
        return false;
      break;
    case KCM_LABELS_NOT_IN:
      if (v && has_value(r, v))
        return false;
      break;
    case KCM_LABELS_EXISTS:
      if (!v)
        return false;
      break;
    case KCM_LABELS_DOES_NOT_EXIST:
      if (v)
        return false;
      break;
    }
  }
  return true;
}

bool kcm_labels_selector_empty(const struct kcm_selector *s) { return !s->nothing && !s->n; }

int kcm_labels_selector_format(const struct kcm_selector *s, struct kcm_buf *b) {
  uint32_t i, j;
  int err = 0;
  for (i = 0; !err && i < s->n; i++) {
    const struct kcm_requirement *r = &s->reqs[i];
    if (i)
      err = kcm_buf_append(b, ",", 1);
    if (err)
      break;
    switch (r->op) {
    case KCM_LABELS_IN:
      if (r->nvalues == 1) {
        err = kcm_buf_appendf(b, "%s=%s", r->key, r->values[0]);
        continue;
      }
      err = kcm_buf_appendf(b, "%s in (", r->key);
      break;
    case KCM_LABELS_NOT_IN:
      err = kcm_buf_appendf(b, "%s notin (", r->key);
      break;
    case KCM_LABELS_EXISTS:
      err = kcm_buf_append_str(b, r->key);
      continue;
    case KCM_LABELS_DOES_NOT_EXIST:
      err = kcm_buf_appendf(b, "!%s", r->key);
      continue;
    }
    for (j = 0; !err && j < r->nvalues; j++)
      err = kcm_buf_appendf(b, "%s%s", j ? "," : "", r->values[j]);
    if (!err)
      err = kcm_buf_append(b, ")", 1);
  }
  return err;
}
