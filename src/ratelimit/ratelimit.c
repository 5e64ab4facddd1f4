/* ratelimit — token buckets and exponential backoff; see include/kcm/ratelimit.h. */
#include "kcm/ratelimit.h"

#include <math.h>

void kcm_ratelimit_init(struct kcm_ratelimit *rl, double qps, int burst, uint64_t now_ms) {
  rl->qps = qps;
  rl->burst = burst < 1 ? 1 : burst;
  rl->tokens = rl->burst;
  rl->last = now_ms;
}

uint64_t kcm_ratelimit_reserve(struct kcm_ratelimit *rl, uint64_t now_ms) {
  if (rl->qps <= 0)
    return 0;
  if (now_ms > rl->last) {
    rl->tokens += (double)(now_ms - rl->last) * rl->qps / 1000.0;
    if (rl->tokens > rl->burst)
      rl->tokens = rl->burst;
    rl->last = now_ms;
  }
  rl->tokens -= 1.0;
  if (rl->tokens >= 0)
    return 0;
  return (uint64_t)ceil(-rl->tokens * 1000.0 / rl->qps);
}

uint64_t kcm_ratelimit_backoff(uint64_t base_ms, uint64_t max_ms, uint32_t failures) {
  double d = (double)base_ms * pow(2.0, failures > 60 ? 60 : failures);
  return d > (double)max_ms ? max_ms : (uint64_t)d;
}
