/*
 * controllers/table/sharded.c — the controllers of a sharded instance
 * (--shards): they act in the namespaces of the shards held, once the
 * caches hold those namespaces' objects. See include/kcm/controllers.h.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"
#include "kcm/log.h"
#include "kcm/metrics.h"

/* A shard's cache fence: taken, it is acted on once every cache has
 * replaced its objects with a list begun after the take. */
struct kcm_controllers_fence {
  uint64_t after[KCM_KIND_COUNT]; /* lists_started of each cache at the take */
  bool cached;
};

#define EACH_CACHE(s, k)                                                                       \
  for ((k) = 0; (k) < KCM_KIND_COUNT; (k)++)                                                   \
    if ((s)->kinds & (1u << (k)))

static bool owns(void *ctx, const char *ns, size_t n) {
  const struct kcm_controllers *s = ctx;
  return kcm_shards_owns(s->shards, ns, n) &&
         s->sharding[kcm_shards_of(ns, n, s->shards->count)].cached;
}

static bool keeps(void *ctx, const char *ns, size_t n) { return kcm_shards_keeps(ctx, ns, n); }

static void release_held(struct kcm_controllers *s) {
  struct kcm_controllers_one *o;
  EACH(s, o) {
    kcm_runtime_release_held(o->rt);
  }
}

/* A cache replaced its objects: the shards taken before now held whole. */
static void listed(struct kcm_informer *inf, void *ctx) {
  struct kcm_controllers *s = ctx;
  uint32_t i, k;
  bool more = false;
  for (i = 0; i < s->shards->count; i++) {
    struct kcm_controllers_fence *f = &s->sharding[i];
    bool whole = true;
    if (f->cached || !s->shards->shard[i].held)
      continue;
    EACH_CACHE(s, k) {
      whole = whole && s->informers[k].lists_applied > f->after[k];
    }
    if (whole) {
      f->cached = more = true;
      kcm_v(2, "acting in a shard shard=%u", i);
    }
  }
  if (more)
    release_held(s);
}

/* A shard taken: its objects, dropped until now, are listed. */
static void taken(struct kcm_shards *sh, uint32_t shard) {
  struct kcm_controllers *s = sh->data;
  struct kcm_controllers_fence *f = &s->sharding[shard];
  uint32_t k;
  f->cached = false;
  EACH_CACHE(s, k) {
    f->after[k] = s->informers[k].lists_started;
    kcm_informer_relist(&s->informers[k]);
  }
}

struct shard_of {
  const struct kcm_shards *sh;
  uint32_t shard;
};

static bool in_shard(void *ctx, const char *ns, size_t n) {
  const struct shard_of *w = ctx;
  return kcm_shards_of(ns, n, w->sh->count) == w->shard;
}

/* A shard given up: its objects and its keys held back are forgotten. */
static void given_up(struct kcm_shards *sh, uint32_t shard) {
  struct kcm_controllers *s = sh->data;
  struct kcm_controllers_one *o;
  struct shard_of w = {sh, shard};
  uint32_t k;
  s->sharding[shard].cached = false;
  EACH_CACHE(s, k) {
    kcm_informer_purge(&s->informers[k]);
  }
  EACH(s, o) {
    kcm_runtime_drop_held(o->rt, in_shard, &w);
  }
}

static size_t syncing(struct kcm_shards *sh, uint32_t shard) {
  struct kcm_controllers *s = sh->data;
  struct kcm_controllers_one *o;
  struct shard_of w = {sh, shard};
  size_t n = 0;
  EACH(s, o) {
    n += kcm_runtime_syncing(o->rt, in_shard, &w);
  }
  return n;
}

int kcm_controllers_shard(struct kcm_controllers *s, struct kcm_shards *sh) {
  struct kcm_controllers_one *o;
  uint32_t k;
  if (!(s->sharding = calloc(sh->count, sizeof(*s->sharding))))
    return KCM_ENOMEM;
  s->shards = sh;
  sh->data = s;
  sh->on_taken = taken;
  sh->on_given_up = given_up;
  sh->syncing = syncing;
  EACH(s, o) {
    kcm_runtime_own(o->rt, owns, s);
  }
  EACH_CACHE(s, k) {
    kcm_informer_filter(&s->informers[k], keeps, sh);
    s->informers[k].on_listed = listed;
    s->informers[k].listed_ctx = s;
  }
  kcm_info("caching only the shards held: the objects of other namespaces are dropped as they "
           "are read shards=%u", sh->count);
  return 0;
}

int kcm_controllers_shard_metrics(const struct kcm_controllers *s, struct kcm_buf *out) {
  static const char name[] = "kcm_shards_objects_dropped_total";
  uint64_t dropped = 0;
  uint32_t k;
  int err;
  if (!s->shards)
    return 0;
  EACH_CACHE(s, k) {
    dropped += s->informers[k].stats.filtered;
  }
  if ((err = kcm_metrics_family(out, name, "counter",
                                "Objects of other shards' namespaces read and dropped: kcm "
                                "filters them itself, asking the API server for all.")))
    return err;
  return kcm_metrics_sample(out, name, "", (double)dropped);
}
