/*
 * pacer — at most one write per key per interval.
 *
 * A controller asks before it writes: kcm_pacer_wait() answers 0 when the
 * key's last write is at least `interval_ms` old (or there was none), else
 * how many milliseconds remain; the controller then puts the key back in
 * its queue for that long, and the sync that follows writes what is true by
 * then. A first write after a quiet spell goes at once; only writes that
 * would follow one another closer than the interval are folded into one.
 * interval_ms 0 lets every write through.
 *
 * With per_second set, the interval stretches with the load: when n keys
 * were written within it, a key waits n / per_second seconds when that is
 * longer, up to ten intervals. Objects that all move at once (a rollout of
 * many Deployments against a busy API server) then each report their
 * progress less often, and together at about per_second writes a second,
 * while one object alone is paced by the interval.
 *
 * A hold is the other way to wait: a write that need not go at once even
 * after a quiet spell (a change seen, whose outcome may follow moments
 * later) waits one interval from the first time it was asked for, named
 * by a tag the caller chooses (a generation); the write that follows, or
 * a write of the key for any reason, ends it.
 *
 * Times are the caller's (milliseconds of a monotonic clock). The pacer
 * copies the keys it keeps and forgets a key once its interval has passed
 * and no hold of it is pending.
 */
#ifndef KCM_PACER_H
#define KCM_PACER_H

#include <stdint.h>

#include "kcm/buf.h"
#include "kcm/map.h"

struct kcm_pacer {
  struct kcm_map last; /* key -> its last write time */
  uint64_t interval_ms;
  unsigned per_second; /* 0: the interval is fixed */
  size_t prune_at;     /* forget stale keys when this many are kept */
  uint64_t pruned_ms;  /* or when the last pass is an interval old */
};

/* The per_second the controllers' pacers use. */
#define KCM_PACER_PER_SECOND 50

void kcm_pacer_init(struct kcm_pacer *p, uint64_t interval_ms, unsigned per_second);
void kcm_pacer_release(struct kcm_pacer *p);
/* Append kcm_pacer_interval_seconds{controller,pacer} for the n pacers
 * p, named by controller[i] and pacer[i]: the interval each holds writes
 * to now. Returns 0 or an error (KCM_ENOMEM; KCM_ETOOBIG for a name too
 * long for a label). */
int kcm_pacer_metrics(const struct kcm_pacer *const *p, const char *const *controller,
                      const char *const *pacer, size_t n, struct kcm_buf *out);
/* 0 if a write for key may go at now_ms, else the milliseconds left. */
uint64_t kcm_pacer_wait(const struct kcm_pacer *p, const char *key, uint64_t now_ms);
/* Note a write for key at now_ms; it ends the key's hold. Returns 0 or
 * KCM_ENOMEM (nothing is noted then, so the next write is not held back). */
int kcm_pacer_wrote(struct kcm_pacer *p, const char *key, uint64_t now_ms);
/* The milliseconds a write for key, held under tag, waits still: a hold
 * starts at the first call with a tag (the interval then), and answers 0
 * once an interval has passed since. 0 at once with interval 0, or without
 * memory for the hold. */
uint64_t kcm_pacer_hold(struct kcm_pacer *p, const char *key, int64_t tag, uint64_t now_ms);

#endif
