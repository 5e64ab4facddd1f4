/*
 * workqueue — the rate-limited work queue of client-go, on the libuv loop.
 *
 * Keys ("namespace/name") wait in FIFO order. The contract controllers
 * rely on:
 *   - a key waiting once is never waiting twice (the dirty set);
 *   - a key handed out by kcm_workqueue_get() is not handed out again until
 *     kcm_workqueue_done() (the processing set); adding it meanwhile marks
 *     it dirty, and done() queues it again, once, however often it was
 *     added;
 *   - kcm_workqueue_add_after() holds a key in a delay heap, keeping the
 *     earliest time when added again;
 *   - kcm_workqueue_add_rate_limited() waits the larger of the key's
 *     exponential backoff (5 ms doubling to 1000 s) and a token from an
 *     overall bucket (10 qps, burst 100); kcm_workqueue_forget() resets the
 *     backoff and kcm_workqueue_requeues() reports it;
 *   - after kcm_workqueue_shutdown() adds are ignored and delayed keys
 *     dropped; keys already queued can still be taken, and the drained
 *     callback runs once nothing is being processed.
 *
 * The consumer is told through the ready callback, always from the loop
 * (never inside an add), that keys may be available; it then takes keys
 * with get() while it has capacity. Keys returned by get() are owned by
 * the queue and valid until done().
 *
 * kcm_workqueue_metrics_many() renders client-go's workqueue_* families with
 * their meanings: depth counts the keys waiting to run (queued, or added
 * again while processing); adds_total the adds that queued or marked a
 * key; retries_total every add_after() (rate-limited adds included), as
 * client-go counts AddAfter; queue_duration_seconds observes, at get(),
 * the time since the add that made the key wait; work_duration_seconds,
 * at done(), the time since get(); unfinished_work_seconds and
 * longest_running_processor_seconds are computed from the keys being
 * processed when rendered. The add time and start time live in each key's
 * item, so metrics cost no allocation.
 */
#ifndef KCM_WORKQUEUE_H
#define KCM_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/buf.h"
#include "kcm/map.h"
#include "kcm/metrics.h"
#include "kcm/ratelimit.h"

struct kcm_workqueue;
struct kcm_workqueue_item;

typedef void (*kcm_workqueue_cb)(struct kcm_workqueue *q, void *data);

struct kcm_workqueue_stats {
  uint64_t adds;     /* adds that queued or marked a key */
  uint64_t retries;  /* add_after() calls, rate-limited adds included */
  uint64_t gets;
  double queue_seconds; /* total time keys waited before get() */
  double work_seconds;  /* total time between get() and done() */
};

struct kcm_workqueue {
  uv_loop_t *loop;
  char name[48];
  struct kcm_map items; /* key -> item */
  struct kcm_workqueue_item *head, *tail;
  struct kcm_workqueue_item **heap;
  size_t nheap, capheap;
  size_t depth;      /* keys waiting in the FIFO */
  size_t dirty;      /* keys waiting to run: in the FIFO or added while processing */
  size_t processing; /* keys handed out and not done */
  uint64_t base_ms, max_ms;
  struct kcm_ratelimit bucket;
  struct kcm_workqueue_stats stats;
  struct kcm_metrics_histogram queue_latency; /* seconds from add to get() */
  struct kcm_metrics_histogram work_duration; /* seconds from get() to done() */
  bool shutting_down;
  bool kicked;
  kcm_workqueue_cb ready;
  void *ready_data;
  kcm_workqueue_cb drained;
  void *drained_data;
  kcm_workqueue_cb closed;
  void *closed_data;
  uv_timer_t delay_timer;
  uv_timer_t kick;
  int closing;
  /* The clock, in ms (uv_now of the loop unless a test replaces it). */
  uint64_t (*now)(struct kcm_workqueue *q);
};

int kcm_workqueue_init(struct kcm_workqueue *q, uv_loop_t *loop, const char *name);
void kcm_workqueue_set_ready(struct kcm_workqueue *q, kcm_workqueue_cb cb, void *data);

void kcm_workqueue_add(struct kcm_workqueue *q, const char *key);
void kcm_workqueue_add_after(struct kcm_workqueue *q, const char *key, uint64_t delay_ms);
void kcm_workqueue_add_rate_limited(struct kcm_workqueue *q, const char *key);
void kcm_workqueue_forget(struct kcm_workqueue *q, const char *key);
uint32_t kcm_workqueue_requeues(struct kcm_workqueue *q, const char *key);

/* The next key, or NULL if none is waiting. */
const char *kcm_workqueue_get(struct kcm_workqueue *q);
void kcm_workqueue_done(struct kcm_workqueue *q, const char *key);

/* The same for n queues: each family's HELP and TYPE once, then the
 * samples of every queue; names may be NULL (each queue's own name). */
void kcm_workqueue_metrics_many(const struct kcm_workqueue *const *qs, const char *const *names,
                                size_t n, uint64_t now_ms, struct kcm_buf *out);

/* Stop accepting keys; `drained` (may be NULL) runs from the loop once no
 * key is being processed. */
void kcm_workqueue_shutdown(struct kcm_workqueue *q, kcm_workqueue_cb drained, void *data);
/* Close the timers, then free everything once `closed` has run. */
void kcm_workqueue_close(struct kcm_workqueue *q, kcm_workqueue_cb closed, void *data);

#endif
