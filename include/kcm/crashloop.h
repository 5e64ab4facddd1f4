/*
 * crashloop — back off creating pods for a ReplicaSet whose pods keep
 * failing.
 *
 * A pod the kubelet fails (phase Failed: rejected at admission, evicted)
 * is not counted as a replica, so the ReplicaSet controller creates a
 * replacement; when the replacement fails too, upstream goes on creating
 * pods as fast as they fail, thousands of them. Here failures come in
 * waves: the first failure of a key starts a wave, and failures within the
 * wave's window (the wave's delay, at least `window_ms`) belong to it, as
 * the pods of one batch fail together. The first wave waits for nothing,
 * as upstream; each later one doubles the wait before the key may create
 * again, from `base_ms` up to `max_ms`. A pod of the key that becomes
 * ready ends it all (kcm_crashloop_forget).
 *
 * Times are the caller's (milliseconds of a monotonic clock). Keys are
 * copied. max_ms 0 turns the backoff off: every wait is 0.
 */
#ifndef KCM_CRASHLOOP_H
#define KCM_CRASHLOOP_H

#include <stdbool.h>
#include <stdint.h>

#include "kcm/map.h"

struct kcm_crashloop {
  struct kcm_map keys; /* key -> its waves */
  uint64_t base_ms;
  uint64_t max_ms;
  uint64_t window_ms;
};

void kcm_crashloop_init(struct kcm_crashloop *b, uint64_t base_ms, uint64_t max_ms,
                        uint64_t window_ms);
void kcm_crashloop_release(struct kcm_crashloop *b);
/* A pod of key was found failed at now_ms. True when it starts a new wave:
 * *wave is then its number (1, 2, ...) and *delay_ms how long the key
 * waits before creating. False when it belongs to the current wave, when
 * the backoff is off, or on ENOMEM (nothing is kept, so nothing waits). */
bool kcm_crashloop_failed(struct kcm_crashloop *b, const char *key, uint64_t now_ms,
                          uint32_t *wave, uint64_t *delay_ms);
/* 0 if key may create pods at now_ms, else the milliseconds left. */
uint64_t kcm_crashloop_wait(const struct kcm_crashloop *b, const char *key, uint64_t now_ms);
/* A pod of key became ready, or key is gone: its waves are over. */
void kcm_crashloop_forget(struct kcm_crashloop *b, const char *key);

#endif
