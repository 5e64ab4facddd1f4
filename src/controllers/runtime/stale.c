/*
 * controllers/runtime/stale.c — a sync that wrote to the objects its
 * owner manages (a ReplicaSet's pods, a Deployment's ReplicaSets) is not
 * followed by another until the cache of those objects has seen what the
 * writes got back: planning from a cache without them would make the pods
 * again, or adopt them again. Upstream's ReplicaSet controller does the
 * same since 1.36 (StaleControllerConsistencyReplicaSet). See
 * include/kcm/runtime.h.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/log.h"
#include "kcm/map.h"
#include "kcm/metrics.h"
#include "kcm/runtime.h"

/* The newest version a key's syncs got back from writes to dependents. */
struct wrote {
  char *key;       /* owned; the map's key */
  struct kcm_uid uid; /* of the owner that wrote: a new one with the same name starts anew */
  uint64_t rv;
  uint64_t at;     /* uv_now() of the last write recorded */
};

static const struct kcm_map_type wrote_type = KCM_MAP_STRING_KEYED(struct wrote, key);

static void drop(struct kcm_runtime *rt, const char *key) {
  struct wrote *w = kcm_map_remove(&rt->wrote, key);
  if (w) {
    free(w->key);
    free(w);
  }
}

void kcm_runtime_follow(struct kcm_runtime *rt, struct kcm_informer *dependents) {
  rt->dependents = dependents;
  kcm_map_init(&rt->wrote, &wrote_type);
}

void kcm_runtime_wrote(struct kcm_runtime_job *j, uint64_t rv) {
  if (rv > j->wrote_rv)
    j->wrote_rv = rv;
}

void kcm_runtime_record_wrote(struct kcm_runtime *rt, struct kcm_runtime_job *j) {
  struct wrote *w;
  if (!rt->dependents || !j->wrote_rv || !j->object)
    return;
  w = kcm_map_get(&rt->wrote, j->key);
  if (w && !kcm_api_uid_equal(&w->uid, &j->object->uid)) {
    drop(rt, j->key);
    w = NULL;
  }
  if (!w) {
    if (!(w = calloc(1, sizeof(*w))) || !(w->key = strdup(j->key)) ||
        kcm_map_put(&rt->wrote, w->key, w, NULL)) {
      if (w)
        free(w->key);
      free(w); /* without the record the next sync may plan from an old cache, no more */
      return;
    }
    w->uid = j->object->uid;
  }
  if (j->wrote_rv > w->rv)
    w->rv = j->wrote_rv;
  w->at = uv_now(rt->loop);
}

bool kcm_runtime_stale(struct kcm_runtime_job *j) {
  struct kcm_runtime *rt = j->rt;
  struct wrote *w;
  if (!rt->dependents || !rt->wrote.len || !(w = kcm_map_get(&rt->wrote, j->key)))
    return false;
  if (!kcm_api_uid_equal(&w->uid, &j->object->uid) ||
      kcm_informer_seen(rt->dependents, w->rv)) {
    drop(rt, j->key);
    return false;
  }
  if (uv_now(rt->loop) - w->at > KCM_INFORMER_BEHIND_TTL_MS) {
    kcm_warn("the cache never caught up with the writes of a sync controller=\"%s\" key=\"%s\" "
             "written=%llu",
             rt->ops->kind, j->key, (unsigned long long)w->rv);
    drop(rt, j->key);
    return false;
  }
  rt->stats.stale_dependents++;
  return true;
}

void kcm_runtime_forget_wrote(struct kcm_runtime *rt) {
  struct kcm_map_iter it;
  struct wrote *w;
  if (!rt->dependents)
    return;
  kcm_map_iter_init(&it, &rt->wrote);
  while ((w = kcm_map_next(&it))) {
    free(w->key);
    free(w);
  }
  kcm_map_release(&rt->wrote);
}

int kcm_runtime_stale_metrics(const struct kcm_runtime *rt, const char *family,
                              const char *const own[2], const char *const dependents[2],
                              struct kcm_buf *out) {
  const char *const *gr[2] = {own, dependents};
  const uint64_t counts[2] = {rt->stats.stale_own, rt->stats.stale_dependents};
  char labels[256];
  int i, err = kcm_metrics_family(out, family, "counter",
                                  "Number of syncs put off because the informer's cache was "
                                  "older than the controller's own last write, by the group "
                                  "and resource written.");
  for (i = 0; !err && i < 2; i++) {
    const char *pairs[] = {"group", gr[i][0], "resource", gr[i][1], NULL};
    err = kcm_metrics_labels(labels, sizeof(labels), pairs) ||
          kcm_metrics_sample(out, family, labels, (double)counts[i]);
  }
  return err;
}
