/*
 * Fuzz the protobuf readers: the input's first byte picks the cap on one
 * item or event, the second how many of the next bytes give chunk sizes;
 * the rest is a body cut into those chunks, as a network may cut it. It is
 * read three ways: as a pod (bare, and in its envelope), as a list response
 * (every item handed out decoded as a pod), and as a watch stream
 * (length-prefixed frames). The list reader and the framer must hand out
 * the same parts and verdict as when the body comes whole; a pod decoded
 * must hold what the informer relies on.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "framing.h"
#include "kcm/api.h"
#include "chunks.h"
#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/intern.h"
#include "pbitems.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_proto.c:%d: check failed: %s\n", line, what);
  abort();
}

static struct kcm_intern pool;

static void decode_pod(const void *p, size_t n, bool bare) {
  struct kcm_object *o = NULL;
  struct kcm_api_error err;
  int rc = bare ? kcm_api_decode_proto_bare(KCM_KIND_POD, p, n, &pool, &o, &err)
                : kcm_api_decode_proto(KCM_KIND_POD, p, n, &pool, &o, &err);
  /* KCM_ENOMEM: past a cap on what a pod may hold (its sidecars' names) */
  CHECK(rc == 0 || rc == KCM_EINVAL || rc == KCM_ENOMEM);
  CHECK((rc == 0) == (o != NULL));
  if (rc) {
    CHECK(rc == KCM_ENOMEM || (err.field[0] && err.problem[0]));
    return;
  }
  CHECK(o->kind == KCM_KIND_POD && o->name && *o->name && o->ns && *o->ns);
  CHECK(!o->has_controller || (o->controller.name && o->controller.kind));
  kcm_api_unref(o, &pool);
}

/* Every part handed out, framed by its kind and length, then the verdict. */
static int on_part(enum kcm_items_part part, const char *text, size_t len, const char *why,
                   void *data) {
  struct kcm_buf *log = data;
  if (!text) {
    CHECK(why && *why);
    return kcm_buf_append_str(log, "X\n");
  }
  if (part == KCM_ITEMS_ITEM)
    decode_pod(text, len, true);
  if (kcm_buf_appendf(log, "%c%zu:", part == KCM_ITEMS_ITEM ? 'I' : 'M', len) ||
      kcm_buf_append(log, text, len))
    return KCM_ENOMEM;
  return 0;
}

static int on_frame(const char *text, size_t len, const char *why, void *data) {
  return on_part(KCM_ITEMS_ITEM, text, len, why, data);
}

/* Read body as a list (or with frames, a watch stream) in chunks of the
 * given sizes (the last repeats; none: whole); the record in log. */
static void read_body(const char *body, size_t len, size_t cap, const uint8_t *sizes,
                      size_t nsizes, bool frames, struct kcm_buf *log) {
  struct kcm_pbitems s;
  struct kcm_framer f;
  size_t at = 0, k = 0;
  int rc = 0;

  kcm_buf_init(log, (size_t)1 << 26);
  if (frames) {
    kcm_framer_init(&f, cap, on_frame, log);
    kcm_framer_reset(&f, true);
  } else {
    kcm_pbitems_init(&s, cap, on_part, log);
  }
  while (at < len && !rc) {
    size_t n = nsizes ? (size_t)sizes[k < nsizes ? k : nsizes - 1] + 1 : len;
    if (n > len - at)
      n = len - at;
    rc = frames ? kcm_framer_feed(&f, body + at, n) : kcm_pbitems_feed(&s, body + at, n);
    at += n;
    k++;
  }
  if (frames) {
    CHECK(rc == 0);
    kcm_framer_flush(&f);
    kcm_framer_release(&f);
    return;
  }
  if (!rc)
    rc = kcm_pbitems_finish(&s);
  CHECK(rc == 0 || rc == KCM_EINVAL);
  CHECK((rc == 0) == (s.err == NULL));
  kcm_buf_appendf(log, "=%d:%s", rc, s.err ? s.err : "");
  kcm_pbitems_release(&s);
}

static void same_either_way(const char *body, size_t len, size_t cap, const uint8_t *sizes,
                            size_t nsizes, bool frames) {
  struct kcm_buf whole, cut;
  read_body(body, len, cap, NULL, 0, frames, &whole);
  read_body(body, len, cap, sizes, nsizes, frames, &cut);
  CHECK(whole.len == cut.len && (!whole.len || !memcmp(whole.data, cut.data, whole.len)));
  kcm_buf_release(&whole);
  kcm_buf_release(&cut);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_chunks c;

  if (!fuzz_chunks(data, size, &c))
    return 0;

  kcm_intern_init(&pool);
  decode_pod(c.body, c.len, true);
  decode_pod(c.body, c.len, false);
  same_either_way(c.body, c.len, c.cap, c.sizes, c.nsizes, false);
  same_either_way(c.body, c.len, c.cap, c.sizes, c.nsizes, true);
  CHECK(kcm_intern_count(&pool) == 0); /* every pod released its strings */
  kcm_intern_release(&pool);
  return 0;
}
