/* pacer — at most one write per key per interval; see include/kcm/pacer.h. */
#include "kcm/pacer.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/metrics.h"

#include "internal.h"

struct mark {
  uint64_t at;         /* the last write, when written */
  uint64_t held_since; /* the hold's start, when held */
  int64_t held_tag;
  bool written, held;
  char key[]; /* NUL-terminated */
};

static const struct kcm_map_type mark_type = KCM_MAP_STRING_KEYED(struct mark, key);

#define PRUNE_MIN 64
#define MAX_STRETCH 10
/* A hold whose write never came (its object gone) is forgotten after this. */
#define HOLD_FORGET_MS 60000

void kcm_pacer_init(struct kcm_pacer *p, uint64_t interval_ms, unsigned per_second) {
  memset(p, 0, sizeof(*p));
  kcm_map_init(&p->last, &mark_type);
  p->interval_ms = interval_ms;
  p->per_second = per_second;
  p->prune_at = PRUNE_MIN;
}

uint64_t kcm_pacer_interval(const struct kcm_pacer *p) {
  uint64_t spread = p->per_second ? (uint64_t)p->last.len * 1000 / p->per_second : 0;
  if (spread <= p->interval_ms)
    return p->interval_ms;
  return spread < p->interval_ms * MAX_STRETCH ? spread : p->interval_ms * MAX_STRETCH;
}

void kcm_pacer_release(struct kcm_pacer *p) {
  struct kcm_map_iter it;
  struct mark *m;
  kcm_map_iter_init(&it, &p->last);
  while ((m = kcm_map_next(&it)))
    free(m);
  kcm_map_release(&p->last);
}

/* The milliseconds of an interval begun at `since` left at now_ms; a
 * clock seen going back leaves one whole interval. */
static uint64_t left(uint64_t since, uint64_t interval, uint64_t now_ms) {
  if (now_ms >= since + interval)
    return 0;
  return now_ms < since ? interval : since + interval - now_ms;
}

uint64_t kcm_pacer_wait(const struct kcm_pacer *p, const char *key, uint64_t now_ms) {
  const struct mark *m = kcm_map_get(&p->last, key);
  return m && m->written ? left(m->at, kcm_pacer_interval(p), now_ms) : 0;
}

/* Whether m's interval has passed and no hold of it is pending. */
static bool stale(const struct mark *m, uint64_t interval, uint64_t now_ms) {
  uint64_t forget = interval * MAX_STRETCH > HOLD_FORGET_MS ? interval * MAX_STRETCH
                                                            : HOLD_FORGET_MS;
  return (!m->written || now_ms >= m->at + interval) &&
         (!m->held || now_ms >= m->held_since + forget);
}

/* Forget keys whose interval has passed; they would be let through anyway.
 * Run when the map has doubled since the last pass, so each kept key costs
 * O(1) amortized, and, for a stretching interval (which counts the keys
 * kept), once an interval too. Stale entries are gathered first: removal
 * invalidates the iterator. */
static void prune(struct kcm_pacer *p, uint64_t now_ms) {
  struct kcm_map_iter it;
  struct mark *m, **gone = malloc(p->last.len * sizeof(*gone));
  uint64_t interval = kcm_pacer_interval(p);
  size_t n = 0, i;
  p->pruned_ms = now_ms;
  if (gone) {
    kcm_map_iter_init(&it, &p->last);
    while ((m = kcm_map_next(&it)))
      if (stale(m, interval, now_ms))
        gone[n++] = m;
    for (i = 0; i < n; i++) {
      kcm_map_remove(&p->last, gone[i]->key);
      free(gone[i]);
    }
    free(gone);
  }
  p->prune_at = p->last.len * 2 > PRUNE_MIN ? p->last.len * 2 : PRUNE_MIN;
}

/* key's mark, made (with no write and no hold) when it has none; NULL
 * without memory. Prunes first, when due. */
static struct mark *mark_of(struct kcm_pacer *p, const char *key, uint64_t now_ms) {
  struct mark *m;
  size_t len;
  if (p->last.len >= p->prune_at ||
      (p->per_second && now_ms >= p->pruned_ms + p->interval_ms))
    prune(p, now_ms);
  if ((m = kcm_map_get(&p->last, key)))
    return m;
  len = strlen(key);
  if (!(m = calloc(1, sizeof(*m) + len + 1)))
    return NULL;
  memcpy(m->key, key, len + 1);
  if (kcm_map_put(&p->last, m->key, m, NULL)) {
    free(m);
    return NULL;
  }
  return m;
}

int kcm_pacer_wrote(struct kcm_pacer *p, const char *key, uint64_t now_ms) {
  struct mark *m;
  if (!p->interval_ms)
    return 0;
  if (!(m = mark_of(p, key, now_ms)))
    return KCM_ENOMEM;
  m->at = now_ms;
  m->written = true;
  m->held = false;
  return 0;
}

uint64_t kcm_pacer_hold(struct kcm_pacer *p, const char *key, int64_t tag, uint64_t now_ms) {
  uint64_t interval = kcm_pacer_interval(p);
  struct mark *m;
  if (!p->interval_ms || !(m = mark_of(p, key, now_ms)))
    return 0;
  if (!m->held || m->held_tag != tag) {
    m->held = true;
    m->held_tag = tag;
    m->held_since = now_ms;
  }
  return left(m->held_since, interval, now_ms);
}

int kcm_pacer_metrics(const struct kcm_pacer *const *p, const char *const *controller,
                      const char *const *pacer, size_t n, struct kcm_buf *out) {
  static const char name[] = "kcm_pacer_interval_seconds";
  size_t i;
  int err = kcm_metrics_family(out, name, "gauge",
                               "How long a pacer holds back a write that only reports "
                               "progress, after the object's last write: the interval set, or "
                               "longer while many objects are written.");
  for (i = 0; i < n && !err; i++) {
    const char *pairs[] = {"controller", controller[i], "pacer", pacer[i], NULL};
    char labels[200];
    err = kcm_metrics_labels(labels, sizeof(labels), pairs);
    err = err ? err : kcm_metrics_sample(out, name, labels, kcm_pacer_interval(p[i]) / 1000.0);
  }
  return err;
}
