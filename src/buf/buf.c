/* buf — a growable byte buffer with a size limit; see include/kcm/buf.h. */
#include "kcm/buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"

void kcm_buf_init(struct kcm_buf *b, size_t limit) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->limit = limit;
}

/* Make room for len + extra bytes plus the terminating NUL. */
static int reserve(struct kcm_buf *b, size_t extra) {
  size_t need, cap;
  char *p;

  if (extra > b->limit - b->len)
    return KCM_ETOOBIG;
  need = b->len + extra + 1;
  if (need <= b->cap)
    return 0;
  cap = b->cap ? b->cap : 64;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  p = realloc(b->data, cap);
  if (!p)
    return KCM_ENOMEM;
  b->data = p;
  b->cap = cap;
  return 0;
}

int kcm_buf_append(struct kcm_buf *b, const void *p, size_t n) {
  int err = reserve(b, n);
  if (err)
    return err;
  if (n)
    memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

int kcm_buf_append_str(struct kcm_buf *b, const char *s) {
  return kcm_buf_append(b, s, strlen(s));
}

int kcm_buf_appendf(struct kcm_buf *b, const char *fmt, ...) {
  va_list ap;
  int n, err;

  va_start(ap, fmt);
  n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0)
    return KCM_EINVAL;
  err = reserve(b, (size_t)n);
  if (err)
    return err;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return 0;
}

void kcm_buf_reset(struct kcm_buf *b) {
  b->len = 0;
  if (b->data)
    b->data[0] = '\0';
}

void kcm_buf_release(struct kcm_buf *b) {
  free(b->data);
  kcm_buf_init(b, b->limit);
}

char *kcm_buf_take(struct kcm_buf *b) {
  char *s = b->data, *fit;
  if (!s)
    return strdup("");
  /* what is taken is kept: without the room grown for appends */
  if (b->cap - b->len > 64 && (fit = realloc(s, b->len + 1)))
    s = fit;
  kcm_buf_init(b, b->limit);
  return s;
}

void *kcm_buf_grow_items(void *items, size_t n, size_t size) {
  size_t cap;
  if (items && n && (n < 4 || (n & (n - 1))))
    return items; /* below the implied capacity */
  cap = n < 4 ? 4 : n * 2;
  if (size && cap > SIZE_MAX / size)
    return NULL;
  return realloc(items, cap * size);
}
