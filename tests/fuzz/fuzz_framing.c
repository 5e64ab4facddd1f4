/*
 * Fuzz the watch stream: the input's first byte picks the kind, a cap on
 * one event and how many of the next bytes give chunk sizes; the rest is a
 * watch stream (JSON events, one per line) cut into those chunks, as a
 * network may cut it. The framer must hand out exactly the lines a simple
 * split of the whole stream gives (trimmed, blank ones left out, those
 * over the cap reported once and skipped). The same chunks then go to an
 * informer, as its watch request feeds it: each event is read and applied
 * to the cache, whose handlers and indexes (by namespace, by controller)
 * must agree with it after every change; the informer must give back
 * every object and pooled string when released. With both kind bits set,
 * the stream is a protobuf watch of pods instead (length-prefixed
 * WatchEvent frames, as kube-apiserver sends them), fed to the informer
 * alone: its frames, events, ERROR Statuses and bookmarks are read as
 * they come. informer.c is compiled into this file to reach its watch
 * callback.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "framing.h"
#include "informer.c"
#include "kcm/api.h"
#include "kcm/intern.h"
#include "kcm/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_framing.c:%d: check failed: %s\n", line, what);
  abort();
}

/* --- the framer against a plain split ----------------------------------------------- */

static bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Walks the whole stream alongside the framer: the next line it must give. */
struct expect {
  const char *p, *end;
  size_t cap;
};

/* Step to the next line the framer reports: its trimmed text, or NULL for
 * one over the cap. False at the end of the stream. */
static bool next_line(struct expect *e, const char **text, size_t *len) {
  while (e->p < e->end) {
    const char *nl = memchr(e->p, '\n', (size_t)(e->end - e->p));
    const char *s = e->p, *t = nl ? nl : e->end;
    e->p = nl ? nl + 1 : e->end;
    if ((size_t)(t - s) > e->cap) {
      *text = NULL;
      return true;
    }
    while (s < t && is_blank(*s))
      s++;
    while (t > s && is_blank(t[-1]))
      t--;
    if (t > s) {
      *text = s;
      *len = (size_t)(t - s);
      return true;
    }
  }
  return false;
}

static int on_line(const char *text, size_t len, const char *why, void *arg) {
  struct expect *e = arg;
  const char *want;
  size_t want_len = 0;
  CHECK(next_line(e, &want, &want_len));
  if (!text) {
    CHECK(!want);       /* only a line over the cap is skipped */
    CHECK(why && *why); /* and the framer says why */
    return 0;
  }
  CHECK(want && len == want_len && !memcmp(text, want, len));
  return 0;
}

/* --- the informer's cache ----------------------------------------------------------- */

struct seen {
  struct kcm_informer *inf;
  size_t added, updated, deleted;
};

static bool in_list(struct kcm_object *head, const struct kcm_object *o, bool by_ns) {
  struct kcm_object *prev = NULL;
  for (; head; prev = head, head = by_ns ? head->ns_next : head->own_next) {
    CHECK((by_ns ? head->ns_prev : head->own_prev) == prev);
    if (head == o)
      return true;
  }
  return false;
}

/* Every cached object is found by its key and in its two index lists. */
static void check_cache(struct kcm_informer *inf) {
  struct kcm_map_iter it;
  struct kcm_object *o;
  size_t n = 0;
  kcm_map_iter_init(&it, &inf->objects);
  while ((o = kcm_map_next(&it))) {
    n++;
    CHECK(o->refs >= 1);
    CHECK(o->kind == inf->opts.kind);
    CHECK(kcm_informer_get(inf, o->ns, o->name) == o);
    CHECK(in_list(kcm_informer_first_in(inf, o->ns), o, true));
    CHECK(in_list(kcm_informer_first_owned(inf, o->has_controller ? &o->controller.uid : NULL), o,
                  false));
  }
  CHECK(n == kcm_informer_len(inf));
}

static void on_added(void *ctx, struct kcm_object *o) {
  struct seen *s = ctx;
  s->added++;
  CHECK(kcm_informer_get(s->inf, o->ns, o->name) == o);
  /* A write the cache has not seen yet: the object is behind until a later event. */
  kcm_informer_written(s->inf, o->ns, o->name, o->rv + 1);
  CHECK(kcm_informer_behind(s->inf, o) == (o->rv + 1 != 0));
  check_cache(s->inf);
}

static void on_updated(void *ctx, struct kcm_object *old, struct kcm_object *cur) {
  struct seen *s = ctx;
  s->updated++;
  CHECK(old != cur && old->ns == cur->ns && !strcmp(old->name, cur->name));
  CHECK(kcm_informer_get(s->inf, cur->ns, cur->name) == cur);
  (void)kcm_informer_behind(s->inf, cur);
  check_cache(s->inf);
}

static void on_deleted(void *ctx, struct kcm_object *o, bool unknown) {
  struct seen *s = ctx;
  s->deleted++;
  CHECK(!unknown); /* a watch reports its deletions itself */
  CHECK(kcm_informer_get(s->inf, o->ns, o->name) == NULL);
  check_cache(s->inf);
}

/* --- the input ---------------------------------------------------------------------- */

/* The size of chunk i of the stream, `left` bytes of it still to come: the
 * input's cut sizes first, then all the rest. */
static size_t chunk(const uint8_t *sizes, size_t nsizes, size_t i, size_t left) {
  size_t n = i < nsizes ? (size_t)sizes[i] + 1 : left;
  return n < left ? n : left;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const size_t caps[8] = {1u << 20, 1u << 20, 1u << 20, 1u << 20, 32, 128, 512, 2048};
  static struct kcm_intern pool;
  static uv_loop_t loop;
  static int ready;
  struct kcm_informer inf;
  struct kcm_informer_options opts = {0};
  struct seen seen = {&inf, 0, 0, 0};
  struct kcm_informer_handler h = {on_added, on_updated, on_deleted, &seen};
  struct kcm_framer f;
  struct expect e;
  const char *stream;
  size_t cuts, len, off, i, n, cap;
  bool proto;
  int rc = 0;

  if (!ready) {
    FILE *null = fopen("/dev/null", "w");
    if (!null || uv_loop_init(&loop))
      abort();
    kcm_log_set_output(null); /* malformed events are logged: keep the output short */
    kcm_intern_init(&pool);
    ready = 1;
  }
  if (size < 1)
    return 0;
  cuts = (data[0] >> 2) & 7;
  cap = caps[data[0] >> 5];
  proto = (data[0] & 3) == 3;
  if (size < 1 + cuts)
    return 0;
  stream = (const char *)data + 1 + cuts;
  len = size - 1 - cuts;
  if (proto)
    goto informer;

  /* The framer alone, against the plain split. */
  e = (struct expect){stream, stream + len, cap};
  CHECK(kcm_framer_init(&f, cap, on_line, &e) == 0);
  for (off = 0, i = 0; off < len; off += n, i++) {
    n = chunk(data + 1, cuts, i, len - off);
    CHECK(kcm_framer_feed(&f, stream + off, n) == 0);
  }
  CHECK(kcm_framer_flush(&f) == 0);
  CHECK(!kcm_framer_partial(&f));
  kcm_framer_release(&f);
  {
    const char *rest;
    size_t rest_len;
    CHECK(!next_line(&e, &rest, &rest_len)); /* every line was handed out */
  }

  /* The informer, fed as its watch request feeds it. */
informer:
  opts.kind = proto ? KCM_KIND_POD : (enum kcm_kind)((data[0] & 3) % KCM_KIND_COUNT);
  opts.max_event_bytes = cap;
  CHECK(kcm_informer_init(&inf, &loop, NULL, &pool, &opts) == 0);
  CHECK(kcm_informer_add_handler(&inf, &h) == 0);
  if (proto) { /* as on_chunk sets it up for an answer in protobuf */
    inf.body_started = true;
    inf.watch_proto = true;
    kcm_framer_reset(inf.framer, true);
  }
  for (off = 0, i = 0; off < len && !rc; off += n, i++) {
    n = chunk(data + 1, cuts, i, len - off);
    rc = on_chunk(stream + off, n, &inf);
  }
  if (rc)
    kcm_framer_reset(inf.framer, proto); /* the watch stopped on an ERROR event */
  else
    kcm_framer_flush(inf.framer);
  check_cache(&inf);
  CHECK(seen.added - seen.deleted == kcm_informer_len(&inf));
  kcm_informer_stop(&inf, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  kcm_informer_release(&inf);
  CHECK(kcm_intern_count(&pool) == 0);
  return 0;
}
