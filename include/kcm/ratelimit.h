/*
 * ratelimit — token buckets and per-item exponential backoff, as pure
 * functions of a caller-supplied clock (milliseconds).
 *
 * A bucket holds up to `burst` tokens and gains `qps` tokens per second.
 * kcm_ratelimit_reserve() takes one token, possibly one not yet earned,
 * and says how long the caller must wait before using it; successive
 * reservations queue up behind each other, as golang.org/x/time/rate's
 * Reserve does. The client uses one bucket per API client
 * (--kube-api-qps/--kube-api-burst); the work queue uses one (10 qps,
 * burst 100) beside its per-item backoff.
 */
#ifndef KCM_RATELIMIT_H
#define KCM_RATELIMIT_H

#include <stdint.h>

struct kcm_ratelimit {
  double qps;      /* tokens per second; <= 0 means unlimited */
  double burst;    /* bucket size (at least 1) */
  double tokens;   /* may go negative: tokens already promised */
  uint64_t last;   /* clock of the last update, ms */
};

void kcm_ratelimit_init(struct kcm_ratelimit *rl, double qps, int burst, uint64_t now_ms);
/* Take a token; returns the wait in ms before it may be used (0: now). */
uint64_t kcm_ratelimit_reserve(struct kcm_ratelimit *rl, uint64_t now_ms);

/* base_ms * 2^failures, capped at max_ms (client-go's per-item backoff). */
uint64_t kcm_ratelimit_backoff(uint64_t base_ms, uint64_t max_ms, uint32_t failures);

#endif
