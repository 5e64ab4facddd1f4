/* workqueue — client-go's rate-limited work queue; see include/kcm/workqueue.h. */
#include "kcm/workqueue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/log.h"

#include "internal.h"

#define BASE_MS 5
#define MAX_MS (1000u * 1000u)
#define BUCKET_QPS 10
#define BUCKET_BURST 100

/* client-go's ExponentialBuckets(10e-7, 10, 10), computed as Go computes
 * them, so the le labels match upstream's. */
static const double duration_buckets[] = {
    1e-06, 9.999999999999999e-06, 9.999999999999999e-05, 0.001, 0.01, 0.1, 1, 10, 100, 1000,
};

struct kcm_workqueue_item {
  char *key;
  struct kcm_workqueue_item *next; /* FIFO link */
  uint64_t added_at;               /* when it started waiting */
  uint64_t started_at;             /* when get() handed it out */
  uint64_t ready_at;               /* delay heap: when it is due */
  long heap_idx;                   /* -1 when not delayed */
  uint32_t failures;
  bool dirty;      /* waiting to be processed */
  bool queued;     /* in the FIFO */
  bool processing; /* handed out, not done */
};

static const struct kcm_map_type item_type =
    KCM_MAP_STRING_KEYED(struct kcm_workqueue_item, key);

static uint64_t loop_now(struct kcm_workqueue *q) { return uv_now(q->loop); }

/* --- items ---------------------------------------------------------------------- */

static struct kcm_workqueue_item *item_for(struct kcm_workqueue *q, const char *key) {
  struct kcm_workqueue_item *it = kcm_map_get(&q->items, key);
  if (it)
    return it;
  it = calloc(1, sizeof(*it));
  if (!it || !(it->key = strdup(key))) {
    free(it);
    kcm_error("work queue out of memory queue=\"%s\" key=\"%s\"", q->name, key);
    return NULL;
  }
  it->heap_idx = -1;
  if (kcm_map_put(&q->items, it->key, it, NULL)) {
    free(it->key);
    free(it);
    kcm_error("work queue out of memory queue=\"%s\" key=\"%s\"", q->name, key);
    return NULL;
  }
  return it;
}

/* Forget an item that holds no state any more. */
static void maybe_drop(struct kcm_workqueue *q, struct kcm_workqueue_item *it) {
  if (it->dirty || it->processing || it->heap_idx >= 0 || it->failures)
    return;
  kcm_map_remove(&q->items, it->key);
  free(it->key);
  free(it);
}

static void on_kick(uv_timer_t *t) {
  struct kcm_workqueue *q = t->data;
  q->kicked = false;
  if (q->ready && q->depth)
    q->ready(q, q->ready_data);
  if (q->shutting_down && !q->processing && q->drained) {
    kcm_workqueue_cb cb = q->drained;
    q->drained = NULL;
    cb(q, q->drained_data);
  }
}

static void kick(struct kcm_workqueue *q) {
  if (q->kicked || q->closing)
    return;
  q->kicked = true;
  uv_timer_start(&q->kick, on_kick, 0, 0);
}

static void push(struct kcm_workqueue *q, struct kcm_workqueue_item *it) {
  it->queued = true;
  it->next = NULL;
  if (q->tail)
    q->tail->next = it;
  else
    q->head = it;
  q->tail = it;
  q->depth++;
  kick(q);
}

/* --- delay heap ---------------------------------------------------------------------- */

static void heap_swap(struct kcm_workqueue *q, size_t a, size_t b) {
  struct kcm_workqueue_item *t = q->heap[a];
  q->heap[a] = q->heap[b];
  q->heap[b] = t;
  q->heap[a]->heap_idx = (long)a;
  q->heap[b]->heap_idx = (long)b;
}

static void heap_up(struct kcm_workqueue *q, size_t i) {
  while (i > 0 && q->heap[(i - 1) / 2]->ready_at > q->heap[i]->ready_at) {
    heap_swap(q, i, (i - 1) / 2);
    i = (i - 1) / 2;
  }
}

static void heap_down(struct kcm_workqueue *q, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < q->nheap && q->heap[l]->ready_at < q->heap[m]->ready_at)
      m = l;
    if (r < q->nheap && q->heap[r]->ready_at < q->heap[m]->ready_at)
      m = r;
    if (m == i)
      return;
    heap_swap(q, i, m);
    i = m;
  }
}

static struct kcm_workqueue_item *heap_pop(struct kcm_workqueue *q) {
  struct kcm_workqueue_item *top = q->heap[0];
  q->nheap--;
  if (q->nheap) {
    q->heap[0] = q->heap[q->nheap];
    q->heap[0]->heap_idx = 0;
    heap_down(q, 0);
  }
  top->heap_idx = -1;
  return top;
}

static void arm_delay_timer(struct kcm_workqueue *q);

static void on_delay(uv_timer_t *t) { kcm_workqueue_promote(t->data); }

static void arm_delay_timer(struct kcm_workqueue *q) {
  uint64_t now, due;
  if (q->closing)
    return;
  if (!q->nheap) {
    uv_timer_stop(&q->delay_timer);
    return;
  }
  now = q->now(q);
  due = q->heap[0]->ready_at;
  uv_timer_start(&q->delay_timer, on_delay, due > now ? due - now : 0, 0);
}

/* --- public ------------------------------------------------------------------------------ */

int kcm_workqueue_init(struct kcm_workqueue *q, uv_loop_t *loop, const char *name) {
  memset(q, 0, sizeof(*q));
  q->loop = loop;
  snprintf(q->name, sizeof(q->name), "%s", name);
  kcm_map_init(&q->items, &item_type);
  q->base_ms = BASE_MS;
  q->max_ms = MAX_MS;
  q->now = loop_now;
  kcm_metrics_histogram_init(&q->queue_latency, duration_buckets,
                             sizeof(duration_buckets) / sizeof(duration_buckets[0]));
  kcm_metrics_histogram_init(&q->work_duration, duration_buckets,
                             sizeof(duration_buckets) / sizeof(duration_buckets[0]));
  kcm_ratelimit_init(&q->bucket, BUCKET_QPS, BUCKET_BURST, uv_now(loop));
  uv_timer_init(loop, &q->delay_timer);
  uv_timer_init(loop, &q->kick);
  q->delay_timer.data = q->kick.data = q;
  return 0;
}

void kcm_workqueue_set_ready(struct kcm_workqueue *q, kcm_workqueue_cb cb, void *data) {
  q->ready = cb;
  q->ready_data = data;
}

void kcm_workqueue_add(struct kcm_workqueue *q, const char *key) {
  struct kcm_workqueue_item *it;
  if (q->shutting_down)
    return;
  it = item_for(q, key);
  if (!it || it->dirty)
    return;
  q->stats.adds++;
  q->dirty++;
  it->dirty = true;
  it->added_at = q->now(q);
  if (!it->processing)
    push(q, it);
}

void kcm_workqueue_add_after(struct kcm_workqueue *q, const char *key, uint64_t delay_ms) {
  struct kcm_workqueue_item *it;
  uint64_t at;
  if (q->shutting_down)
    return;
  q->stats.retries++;
  if (!delay_ms) {
    kcm_workqueue_add(q, key);
    return;
  }
  it = item_for(q, key);
  if (!it)
    return;
  at = q->now(q) + delay_ms;
  if (it->heap_idx >= 0) {
    if (at < it->ready_at) {
      it->ready_at = at;
      heap_up(q, (size_t)it->heap_idx);
      arm_delay_timer(q);
    }
    return;
  }
  if (q->nheap == q->capheap) {
    size_t cap = q->capheap ? q->capheap * 2 : 64;
    struct kcm_workqueue_item **grown = realloc(q->heap, cap * sizeof(*grown));
    if (!grown) {
      kcm_error("work queue out of memory; adding at once queue=\"%s\" key=\"%s\"", q->name,
                key);
      kcm_workqueue_add(q, key);
      return;
    }
    q->heap = grown;
    q->capheap = cap;
  }
  it->ready_at = at;
  it->heap_idx = (long)q->nheap;
  q->heap[q->nheap++] = it;
  heap_up(q, (size_t)it->heap_idx);
  arm_delay_timer(q);
}

void kcm_workqueue_add_rate_limited(struct kcm_workqueue *q, const char *key) {
  struct kcm_workqueue_item *it;
  uint64_t per_item, overall;
  if (q->shutting_down)
    return;
  it = item_for(q, key);
  if (!it)
    return;
  per_item = kcm_ratelimit_backoff(q->base_ms, q->max_ms, it->failures);
  it->failures++;
  overall = kcm_ratelimit_reserve(&q->bucket, q->now(q));
  kcm_workqueue_add_after(q, key, per_item > overall ? per_item : overall);
}

void kcm_workqueue_forget(struct kcm_workqueue *q, const char *key) {
  struct kcm_workqueue_item *it = kcm_map_get(&q->items, key);
  if (!it)
    return;
  it->failures = 0;
  maybe_drop(q, it);
}

uint32_t kcm_workqueue_requeues(struct kcm_workqueue *q, const char *key) {
  struct kcm_workqueue_item *it = kcm_map_get(&q->items, key);
  return it ? it->failures : 0;
}

const char *kcm_workqueue_get(struct kcm_workqueue *q) {
  struct kcm_workqueue_item *it = q->head;
  uint64_t now;
  double waited;
  if (!it)
    return NULL;
  q->head = it->next;
  if (!q->head)
    q->tail = NULL;
  q->depth--;
  now = q->now(q);
  it->queued = false;
  it->dirty = false;
  it->processing = true;
  it->started_at = now;
  q->dirty--;
  q->processing++;
  q->stats.gets++;
  waited = (double)(now - it->added_at) / 1000.0;
  q->stats.queue_seconds += waited;
  kcm_metrics_histogram_observe(&q->queue_latency, waited);
  return it->key;
}

void kcm_workqueue_done(struct kcm_workqueue *q, const char *key) {
  struct kcm_workqueue_item *it = kcm_map_get(&q->items, key);
  double worked;
  if (!it || !it->processing)
    return;
  it->processing = false;
  q->processing--;
  worked = (double)(q->now(q) - it->started_at) / 1000.0;
  q->stats.work_seconds += worked;
  kcm_metrics_histogram_observe(&q->work_duration, worked);
  if (it->dirty && !q->shutting_down) {
    push(q, it);
  } else if (it->dirty) { /* shutting down: the pending run is dropped */
    it->dirty = false;
    q->dirty--;
  }
  if (q->shutting_down && !q->processing)
    kick(q);
  maybe_drop(q, it);
}

void kcm_workqueue_promote(struct kcm_workqueue *q) {
  uint64_t now = q->now(q);
  while (q->nheap && q->heap[0]->ready_at <= now) {
    struct kcm_workqueue_item *it = heap_pop(q);
    kcm_workqueue_add(q, it->key);
    maybe_drop(q, it);
  }
  arm_delay_timer(q);
}

size_t kcm_workqueue_len(const struct kcm_workqueue *q) { return q->depth; }

/* Seconds the keys being processed have run at now_ms: their sum and the
 * longest. */
static void processing_ages(const struct kcm_workqueue *q, uint64_t now_ms, double *sum,
                            double *longest) {
  struct kcm_map_iter iter;
  const struct kcm_workqueue_item *it;
  uint64_t total = 0, most = 0;
  kcm_map_iter_init(&iter, &q->items);
  while ((it = kcm_map_next(&iter))) {
    uint64_t age = it->processing && now_ms > it->started_at ? now_ms - it->started_at : 0;
    total += age;
    if (age > most)
      most = age;
  }
  *sum = (double)total / 1000.0;
  *longest = (double)most / 1000.0;
}

double kcm_workqueue_longest_running(struct kcm_workqueue *q) {
  double sum, longest;
  processing_ages(q, q->now(q), &sum, &longest);
  return longest;
}

double kcm_workqueue_unfinished(struct kcm_workqueue *q) {
  double sum, longest;
  processing_ages(q, q->now(q), &sum, &longest);
  return sum;
}

/* --- metrics ------------------------------------------------------------------------------ */

enum metric { DEPTH, ADDS, RETRIES, UNFINISHED, LONGEST, QUEUE_LATENCY, WORK_DURATION };

/* client-go's families (component-base's help texts, BETA as upstream
 * marks them), in the name order Prometheus clients write them. */
static const struct {
  const char *name, *type, *help;
  enum metric what;
} families[] = {
    {"workqueue_adds_total", "counter", "[BETA] Total number of adds handled by workqueue", ADDS},
    {"workqueue_depth", "gauge", "[BETA] Current depth of workqueue", DEPTH},
    {"workqueue_longest_running_processor_seconds", "gauge",
     "[BETA] How many seconds has the longest running processor for workqueue been running.",
     LONGEST},
    {"workqueue_queue_duration_seconds", "histogram",
     "[BETA] How long in seconds an item stays in workqueue before being requested.",
     QUEUE_LATENCY},
    {"workqueue_retries_total", "counter", "[BETA] Total number of retries handled by workqueue",
     RETRIES},
    {"workqueue_unfinished_work_seconds", "gauge",
     "[BETA] How many seconds of work has done that is in progress and hasn't been observed by "
     "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
     "threads by observing the rate at which this increases.",
     UNFINISHED},
    {"workqueue_work_duration_seconds", "histogram",
     "[BETA] How long in seconds processing an item from workqueue takes.", WORK_DURATION},
};

static int render_one(const struct kcm_workqueue *q, const char *name, enum metric what,
                      const char *labels, uint64_t now_ms, struct kcm_buf *out) {
  double unfinished, longest;
  switch (what) {
  case DEPTH:
    return kcm_metrics_sample(out, name, labels, (double)q->dirty);
  case ADDS:
    return kcm_metrics_sample(out, name, labels, (double)q->stats.adds);
  case RETRIES:
    return kcm_metrics_sample(out, name, labels, (double)q->stats.retries);
  case UNFINISHED:
  case LONGEST:
    processing_ages(q, now_ms, &unfinished, &longest);
    return kcm_metrics_sample(out, name, labels, what == LONGEST ? longest : unfinished);
  case QUEUE_LATENCY:
    return kcm_metrics_histogram_render(out, name, labels, &q->queue_latency);
  case WORK_DURATION:
    return kcm_metrics_histogram_render(out, name, labels, &q->work_duration);
  }
  return 0;
}

void kcm_workqueue_metrics_many(const struct kcm_workqueue *const *qs, const char *const *names,
                                size_t n, uint64_t now_ms, struct kcm_buf *out) {
  size_t f, i;
  for (f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
    /* Samples without their header would make the page invalid. */
    if (kcm_metrics_family(out, families[f].name, families[f].type, families[f].help))
      continue;
    for (i = 0; i < n; i++) {
      const char *pairs[] = {"name", names && names[i] ? names[i] : qs[i]->name, NULL};
      char labels[160];
      if (kcm_metrics_labels(labels, sizeof(labels), pairs) == 0)
        render_one(qs[i], families[f].name, families[f].what, labels, now_ms, out);
    }
  }
}

void kcm_workqueue_metrics(const struct kcm_workqueue *q, const char *name, uint64_t now_ms,
                           struct kcm_buf *out) {
  const char *names[] = {name};
  kcm_workqueue_metrics_many(&q, names, 1, now_ms, out);
}

void kcm_workqueue_shutdown(struct kcm_workqueue *q, kcm_workqueue_cb drained, void *data) {
  q->shutting_down = true;
  q->drained = drained;
  q->drained_data = data;
  while (q->nheap) {
    struct kcm_workqueue_item *it = heap_pop(q);
    maybe_drop(q, it);
  }
  uv_timer_stop(&q->delay_timer);
  kick(q);
}

static void on_closed(uv_handle_t *h) {
  struct kcm_workqueue *q = h->data;
  struct kcm_map_iter iter;
  struct kcm_workqueue_item *it;
  kcm_workqueue_cb cb;
  void *data;
  if (--q->closing)
    return;
  kcm_map_iter_init(&iter, &q->items);
  while ((it = kcm_map_next(&iter))) {
    free(it->key);
    free(it);
  }
  kcm_map_release(&q->items);
  free(q->heap);
  cb = q->closed;
  data = q->closed_data;
  q->heap = NULL;
  if (cb)
    cb(q, data);
}

void kcm_workqueue_close(struct kcm_workqueue *q, kcm_workqueue_cb closed, void *data) {
  q->shutting_down = true;
  q->closed = closed;
  q->closed_data = data;
  q->closing = 2;
  uv_close((uv_handle_t *)&q->delay_timer, on_closed);
  uv_close((uv_handle_t *)&q->kick, on_closed);
}
