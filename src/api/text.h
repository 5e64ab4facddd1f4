/*
 * api/text.h — what the in-place JSON decoders of a ReplicaSet's or
 * Deployment's spec and status use: the state of one decode and the
 * readers of a field's next value, each naming the field in its error.
 * Internal to text.c and text_workload.c.
 */
#ifndef KCM_API_TEXT_H
#define KCM_API_TEXT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/json.h"

/* The readers are plain static functions, a copy in each file, so the
 * compiler weighs inlining each by its use (`inline` would inline the cold
 * error paths too, and slow the decoders); each file uses some. */
#define READER static __attribute__((unused))

struct tctx {
  struct kcm_json *j;
  struct kcm_intern *pool;
  struct kcm_api_error *err;
};

READER int bad(struct tctx *t, const char *field, const char *problem) {
  snprintf(t->err->field, sizeof(t->err->field), "%s", field);
  snprintf(t->err->problem, sizeof(t->err->problem), "%s", problem);
  return KCM_EINVAL;
}

/* A reader returned false: the text is broken, or the value has another type. */
READER int mismatch(struct tctx *t, const char *field, const char *problem) {
  if (t->j->err)
    return bad(t, "(json)", t->j->err);
  return bad(t, field, problem);
}

/* Readers for the next value: 1 when read, 0 when null (absent), or a
 * negative error. */
READER int str(struct tctx *t, const char *field, const char **s, size_t *n) {
  if (kcm_json_null(t->j))
    return 0;
  return kcm_json_string(t->j, s, n) ? 1 : mismatch(t, field, "must be a string");
}

READER int open_object(struct tctx *t, const char *field) {
  if (kcm_json_null(t->j))
    return 0;
  return kcm_json_object(t->j) ? 1 : mismatch(t, field, "must be an object");
}

READER int open_array(struct tctx *t, const char *field) {
  if (kcm_json_null(t->j))
    return 0;
  return kcm_json_array(t->j) ? 1 : mismatch(t, field, "must be a list");
}

READER int boolean(struct tctx *t, const char *field, bool *out) {
  if (kcm_json_null(t->j))
    return 0;
  return kcm_json_bool(t->j, out) ? 1 : mismatch(t, field, "must be true or false");
}

READER int integer(struct tctx *t, const char *field, int64_t lo, int64_t hi, int64_t *out) {
  int64_t v;
  int rc;
  if (kcm_json_null(t->j))
    return 0;
  rc = kcm_json_int(t->j, &v);
  if (rc == KCM_ETOOBIG || (!rc && (v < lo || v > hi)))
    return bad(t, field, "out of range");
  if (rc)
    return mismatch(t, field, "must be an integer");
  *out = v;
  return 1;
}

READER int time_value(struct tctx *t, const char *field, int64_t *out) {
  const char *s;
  size_t n;
  int rc = str(t, field, &s, &n);
  if (rc <= 0)
    return rc;
  return kcm_api_parse_time(s, out) ? bad(t, field, "is not an RFC 3339 time") : 1;
}

/* s (n bytes) into dst when it fits with its NUL, else "". */
READER void copy_short(char *dst, size_t cap, const char *s, size_t n) {
  if (n >= cap)
    n = 0;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

READER int skip(struct tctx *t) { return kcm_json_skip(t->j) ? 0 : mismatch(t, "", ""); }

/* The end of a container loop: an error of the reader, if any. */
READER int ended(struct tctx *t) { return t->j->err ? bad(t, "(json)", t->j->err) : 0; }

/* A ReplicaSet or Deployment from text[0..len) (text_workload.c). */
int kcm_api_text_decode_workload(enum kcm_kind kind, const char *text, size_t len,
                                 struct kcm_json *j, struct kcm_api_memo *memo,
                                 struct kcm_intern *pool, struct kcm_object **out,
                                 struct kcm_api_error *err);

#endif
