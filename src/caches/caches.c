/* The informers the enabled controllers read, as one; see include/kcm/caches.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kcm/caches.h"
#include "kcm/error.h"
#include "kcm/log.h"
#include "kcm/metrics.h"

#define EACH(c, k)                                                                             \
  for ((k) = 0; (k) < KCM_KIND_COUNT; (k)++)                                                   \
    if ((c)->kinds & (1u << (k)))

int kcm_caches_init(struct kcm_caches *c, uv_loop_t *loop, struct kcm_client *client,
                    struct kcm_intern *pool, unsigned kinds, const struct kcm_options *opt) {
  int err, k;
  memset(c, 0, sizeof(*c));
  c->loop = loop;
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  for (k = 0; k < KCM_KIND_COUNT; k++) {
    struct kcm_informer_options io = {0};
    uint32_t r;
    if (!(kinds & (1u << k)))
      continue;
    r = (uint32_t)rand();
    io.kind = (enum kcm_kind)k;
    io.protobuf = !opt->json_api;
    io.watch_list = !opt->no_watch_list;
    io.resync_ms = opt->min_resync_ms + (uint64_t)((double)opt->min_resync_ms *
                                                   ((double)r / ((double)RAND_MAX + 1.0)));
    if ((err = kcm_informer_init(&c->informers[k], loop, client, pool, &io))) {
      kcm_error("cannot set up a cache kind=\"%s\" err=\"%s\"",
                kcm_api_kind_name((enum kcm_kind)k), kcm_strerror(err));
      return err;
    }
    c->informers[k].data = c;
    c->kinds |= 1u << k;
  }
  uv_timer_init(loop, &c->check);
  c->check.data = c;
  return 0;
}

/* Objects cached of kind k (0 for a kind not cached). */
static size_t cached(const struct kcm_caches *c, enum kcm_kind k) {
  return c->kinds & (1u << k) ? kcm_informer_len(&c->informers[k]) : 0;
}

static void on_check(uv_timer_t *t) {
  struct kcm_caches *c = t->data;
  int k;
  EACH(c, k) {
    if (!kcm_informer_synced(&c->informers[k]))
      return;
  }
  char kinds[128] = "";
  size_t objects = 0, at = 0;
  uv_timer_stop(t);
  c->synced = true;
  EACH(c, k) {
    objects += cached(c, (enum kcm_kind)k);
    if (at < sizeof(kinds))
      at += (size_t)snprintf(kinds + at, sizeof(kinds) - at, "%s%s", at ? "," : "",
                             kcm_api_kind((enum kcm_kind)k)->plural);
  }
  kcm_info("caches synced resources=\"%s\" objects=%zu elapsed=\"%llums\"", kinds, objects,
           (unsigned long long)(uv_now(c->loop) - c->started));
  c->on_synced(c);
}

void kcm_caches_start(struct kcm_caches *c, void (*on_synced)(struct kcm_caches *c)) {
  int k;
  c->on_synced = on_synced;
  uv_update_time(c->loop);
  c->started = uv_now(c->loop);
  EACH(c, k) {
    kcm_informer_start(&c->informers[k]);
  }
  uv_timer_start(&c->check, on_check, 50, 50);
}

static void informer_closed(struct kcm_informer *inf) {
  struct kcm_caches *c = inf->data;
  if (--c->open == 0 && c->on_closed)
    c->on_closed(c);
}

void kcm_caches_stop(struct kcm_caches *c, void (*on_closed)(struct kcm_caches *c)) {
  int k;
  uv_timer_stop(&c->check);
  uv_close((uv_handle_t *)&c->check, NULL);
  c->on_closed = on_closed;
  c->open = 0;
  EACH(c, k) {
    c->open++;
  }
  if (!c->open) {
    if (on_closed)
      on_closed(c);
    return;
  }
  EACH(c, k) {
    kcm_informer_stop(&c->informers[k], informer_closed);
  }
}

void kcm_caches_release(struct kcm_caches *c) {
  int k;
  EACH(c, k) {
    kcm_informer_release(&c->informers[k]);
  }
}

int kcm_caches_metrics(const struct kcm_caches *c, struct kcm_buf *out) {
  char labels[64];
  int k;
  if (kcm_metrics_family(out, "kcm_cache_unreadable_objects_total", "counter",
                         "Objects of kind `kind`, or changes of them, in a list or a watch "
                         "event that kcm could not decode; the cache kept the last copy it "
                         "could read (a deletion it could name was applied)."))
    return KCM_ENOMEM;
  EACH(c, k) {
    const char *pairs[] = {"kind", kcm_api_kind_name((enum kcm_kind)k), NULL};
    if (kcm_metrics_labels(labels, sizeof(labels), pairs) ||
        kcm_metrics_sample(out, "kcm_cache_unreadable_objects_total", labels,
                           (double)c->informers[k].stats.unreadable))
      return KCM_ENOMEM;
  }
  return 0;
}
