/*
 * Fuzz the shortening of a JSON text's escapes (kcm_json_shorten_escapes,
 * applied to an object before it is written back whole): where the pull
 * reader takes the input as JSON, it must take the output too, as the same
 * value member by member (strings as they decode: a surrogate pair as its
 * character, a lone surrogate as U+FFFD, as Go reads them), and the output
 * may only be shorter.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/buf.h"
#include "kcm/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_escapes.c:%d: check failed: %s\n", line, what);
  abort();
}

static bool valid(struct kcm_json *j, const char *text, size_t len) {
  kcm_json_start(j, text, len);
  return kcm_json_skip(j) && kcm_json_done(j);
}

/* Whether the next values of a and b are the same, walking both. */
static bool same(struct kcm_json *a, struct kcm_json *b) {
  enum kcm_json_type t = kcm_json_peek(a);
  const char *s, *u;
  size_t n, m;
  char *copy;
  bool eq = true, x, y;
  if (t != kcm_json_peek(b))
    return false;
  switch (t) {
  case KCM_JSON_OBJECT:
    kcm_json_object(a);
    kcm_json_object(b);
    for (;;) {
      x = kcm_json_member(a);
      y = kcm_json_member(b);
      if (x != y)
        return false;
      if (!x)
        return true;
      if (a->keylen != b->keylen || memcmp(a->key, b->key, a->keylen) || !same(a, b))
        return false;
    }
  case KCM_JSON_ARRAY:
    kcm_json_array(a);
    kcm_json_array(b);
    for (;;) {
      x = kcm_json_element(a);
      y = kcm_json_element(b);
      if (x != y)
        return false;
      if (!x)
        return true;
      if (!same(a, b))
        return false;
    }
  case KCM_JSON_STRING:
    kcm_json_string(a, &s, &n);
    copy = malloc(n + 1);
    CHECK(copy != NULL);
    memcpy(copy, s, n + 1);
    kcm_json_string(b, &u, &m);
    eq = n == m && !memcmp(copy, u, n);
    free(copy);
    return eq;
  default: /* numbers and literals are not rewritten */
    kcm_json_raw(a, &s, &n);
    kcm_json_raw(b, &u, &m);
    return n == m && !memcmp(s, u, n);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  struct kcm_buf out = KCM_BUF_INIT(SIZE_MAX);
  struct kcm_json a, b;
  kcm_json_init(&a);
  kcm_json_init(&b);
  CHECK(kcm_json_shorten_escapes(text, size, &out) == 0);
  CHECK(out.len <= size);
  if (valid(&a, text, size)) {
    const char *o = out.data ? out.data : "";
    CHECK(valid(&b, o, out.len));
    kcm_json_start(&a, text, size);
    kcm_json_start(&b, o, out.len);
    CHECK(kcm_json_deepest(text, size) > 64 || same(&a, &b)); /* recursion bounded */
  }
  kcm_json_release(&a);
  kcm_json_release(&b);
  kcm_buf_release(&out);
  return 0;
}
