/* labels — label sets and selectors; see include/kcm/labels.h. */
#include "kcm/labels.h"

#include <stdlib.h>
#include <string.h>

#include "kcm/buf.h"
#include "kcm/error.h"

#include "internal.h"

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

int kcm_labels_selector_add(struct kcm_selector *s, const char *key, enum kcm_labels_op op,
                            size_t nvalues) {
  struct kcm_requirement r = {0};
  if (!(r.key = strdup(key)) || (nvalues && !(r.values = calloc(nvalues, sizeof(char *))))) {
    free(r.key);
    return KCM_ENOMEM;
  }
  r.op = op;
  if (KCM_BUF_PUSH(s->reqs, s->n, r)) {
    release_req(&r);
    return KCM_ENOMEM;
  }
  return 0;
}

int kcm_labels_selector_add_value(struct kcm_selector *s, const char *v) {
  struct kcm_requirement *r = &s->reqs[s->n - 1];
  if (!(r->values[r->nvalues] = strdup(v)))
    return KCM_ENOMEM;
  r->nvalues++;
  return 0;
}

void kcm_labels_selector_seal(struct kcm_selector *s) {
  uint32_t i;
  for (i = 0; i < s->n; i++)
    if (s->reqs[i].nvalues > 1)
      qsort(s->reqs[i].values, s->reqs[i].nvalues, sizeof(char *), cmp_str);
  if (s->n)
    qsort(s->reqs, s->n, sizeof(*s->reqs), cmp_req);
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
