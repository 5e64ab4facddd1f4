/* crashloop — backing off pods that keep failing; see include/kcm/crashloop.h. */
#include "kcm/crashloop.h"
#include "kcm/ratelimit.h"

#include <stdlib.h>
#include <string.h>

struct waves {
  uint32_t count;
  uint64_t until;      /* no creates before this */
  uint64_t window_end; /* failures before this belong to the current wave */
  char key[];          /* NUL-terminated */
};

static const struct kcm_map_type waves_type = KCM_MAP_STRING_KEYED(struct waves, key);

void kcm_crashloop_init(struct kcm_crashloop *b, uint64_t base_ms, uint64_t max_ms,
                        uint64_t window_ms) {
  kcm_map_init(&b->keys, &waves_type);
  b->base_ms = base_ms;
  b->max_ms = max_ms;
  b->window_ms = window_ms;
}

void kcm_crashloop_release(struct kcm_crashloop *b) {
  struct kcm_map_iter it;
  struct waves *w;
  kcm_map_iter_init(&it, &b->keys);
  while ((w = kcm_map_next(&it)))
    free(w);
  kcm_map_release(&b->keys);
}

/* The wait after wave n: none after the first, then base, 2 base, ... max
 * (the work queue's per-item backoff, one wave behind). */
static uint64_t delay_of(const struct kcm_crashloop *b, uint32_t n) {
  return n < 2 ? 0 : kcm_ratelimit_backoff(b->base_ms, b->max_ms, n - 2);
}

bool kcm_crashloop_failed(struct kcm_crashloop *b, const char *key, uint64_t now_ms,
                          uint32_t *wave, uint64_t *delay_ms) {
  struct waves *w;
  uint64_t d;
  if (!b->max_ms)
    return false;
  if (!(w = kcm_map_get(&b->keys, key))) {
    size_t len = strlen(key);
    if (!(w = calloc(1, sizeof(*w) + len + 1)))
      return false;
    memcpy(w->key, key, len + 1);
    if (kcm_map_put(&b->keys, w->key, w, NULL)) {
      free(w);
      return false;
    }
  } else if (now_ms < w->window_end) {
    return false;
  }
  w->count++;
  d = delay_of(b, w->count);
  w->until = now_ms + d;
  w->window_end = now_ms + (d > b->window_ms ? d : b->window_ms);
  *wave = w->count;
  *delay_ms = d;
  return true;
}

uint64_t kcm_crashloop_wait(const struct kcm_crashloop *b, const char *key, uint64_t now_ms) {
  const struct waves *w = kcm_map_get(&b->keys, key);
  if (!w || now_ms >= w->until)
    return 0;
  return w->until - now_ms;
}

void kcm_crashloop_forget(struct kcm_crashloop *b, const char *key) {
  free(kcm_map_remove(&b->keys, key));
}
