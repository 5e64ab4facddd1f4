/*
 * controllers/runtime/runtime.c — workers, sync jobs and the fate of a key
 * after its sync. See include/kcm/runtime.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/log.h"
#include "internal.h"
#include "kcm/runtime.h"

static void pump(struct kcm_runtime *rt);

uint64_t kcm_runtime_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t kcm_runtime_wall_ms(const struct kcm_runtime *rt) { return rt->wall_ms(); }

void kcm_runtime_enqueue_key(struct kcm_runtime *rt, const char *key) {
  kcm_workqueue_add(&rt->queue, key);
}

void kcm_runtime_enqueue_after(struct kcm_runtime *rt, const char *key, uint64_t delay_ms) {
  kcm_workqueue_add_after(&rt->queue, key, delay_ms);
}

void kcm_runtime_again(struct kcm_runtime_job *j, uint64_t delay_ms) {
  kcm_workqueue_add_after(&j->rt->queue, j->key, delay_ms);
}

void kcm_runtime_enqueue(struct kcm_runtime *rt, const struct kcm_object *o) {
  char key[600];
  snprintf(key, sizeof(key), "%s/%s", o->ns, o->name);
  kcm_runtime_enqueue_key(rt, key);
}

size_t kcm_runtime_enqueue_selecting(struct kcm_runtime *rt, const struct kcm_informer *inf,
                                     const struct kcm_object *o,
                                     const struct kcm_selector *(*selector_of)(
                                         const struct kcm_object *owner)) {
  struct kcm_object *owner;
  size_t n = 0;
  if (!o->labels.n)
    return 0;
  for (owner = kcm_informer_first_in(inf, o->ns); owner; owner = owner->ns_next) {
    const struct kcm_selector *s = selector_of(owner);
    if (kcm_labels_selector_empty(s) || !kcm_labels_matches(s, &o->labels))
      continue;
    kcm_runtime_enqueue(rt, owner);
    n++;
  }
  return n;
}

void kcm_runtime_hold(struct kcm_runtime_job *j, struct kcm_object *o) {
  struct kcm_object **grown = kcm_buf_grow_items(j->held, j->nheld, sizeof(*grown));
  if (!grown)
    return; /* the cache keeps it alive for this turn; later phases skip what is gone */
  j->held = grown;
  j->held[j->nheld++] = kcm_api_ref(o);
}

void kcm_runtime_fail(struct kcm_runtime_job *j, int err, const char *fmt, ...) {
  va_list ap;
  if (j->err)
    return;
  j->err = err;
  va_start(ap, fmt);
  if (vasprintf(&j->err_msg, fmt, ap) < 0)
    j->err_msg = NULL;
  va_end(ap);
}

int kcm_runtime_send(struct kcm_runtime_job *j, struct kcm_write *req, kcm_client_done_cb done,
                     void *data) {
  int err;
  req->origin = j->key;
  err = kcm_writer_send(j->rt->writer, req, done, data);
  if (req->err)
    kcm_runtime_fail(j, err, "%s", req->path);
  else if (err)
    kcm_runtime_fail(j, err, "cannot send a request: %s", kcm_strerror(err));
  else {
    j->outstanding++;
    j->sent++;
  }
  return err;
}

void kcm_runtime_give_back(struct kcm_runtime_job *j) {
  if (j->gave_back)
    return;
  j->gave_back = true;
  j->rt->running--;
  pump(j->rt);
}

/* What becomes of the key after its sync. */
static void settle(struct kcm_runtime *rt, struct kcm_runtime_job *j) {
  struct kcm_workqueue *q = &rt->queue;
  const char *kind = rt->ops->kind, *msg;
  uint32_t retries;

  kcm_runtime_record_wrote(rt, j);
  kcm_workqueue_done(q, j->key);
  if (!j->err) {
    kcm_workqueue_forget(q, j->key);
    if (j->requeue)
      kcm_workqueue_add(q, j->key);
    else if (j->requeue_after_ms == 0)
      kcm_workqueue_add_rate_limited(q, j->key);
    else if (j->requeue_after_ms > 0)
      kcm_workqueue_add_after(q, j->key, (uint64_t)j->requeue_after_ms);
    return;
  }
  retries = kcm_workqueue_requeues(q, j->key);
  msg = j->err_msg ? j->err_msg : kcm_strerror(j->err);
  rt->stats.errors++;
  if (j->forget) {
    kcm_v(2, "sync failed; not retrying controller=\"%s\" key=\"%s\" err=\"%s\"", kind,
          j->key, msg);
    kcm_workqueue_forget(q, j->key);
  } else if (rt->ops->max_retries && retries >= rt->ops->max_retries) {
    kcm_warn("sync failed; dropping the key out of the queue controller=\"%s\" key=\"%s\" "
             "err=\"%s\"",
             kind, j->key, msg);
    kcm_workqueue_forget(q, j->key);
    rt->stats.dropped++;
  } else {
    /* Conflicts are routine (the object moved on); they retry quietly. */
    if (j->err == KCM_ECONFLICT)
      kcm_v(2, "sync conflicted; retrying controller=\"%s\" key=\"%s\" err=\"%s\"", kind,
            j->key, msg);
    else
      kcm_warn("sync failed; retrying controller=\"%s\" key=\"%s\" err=\"%s\" retries=%u",
               kind, j->key, msg, retries);
    kcm_workqueue_add_rate_limited(q, j->key);
  }
}

uint64_t kcm_runtime_watching_since(const struct kcm_runtime *rt) {
  uint64_t since = 0;
  size_t k;
  for (k = 0; k < KCM_KIND_COUNT; k++) {
    const struct kcm_informer *inf = rt->watched[k];
    if (!inf)
      continue;
    if (inf->state != KCM_INFORMER_WATCHING)
      return KCM_RUNTIME_BLIND;
    if (inf->watch_started > since)
      since = inf->watch_started;
  }
  return since;
}

static void finish(struct kcm_runtime_job *j) {
  struct kcm_runtime *rt = j->rt;
  struct kcm_runtime_job **pp;
  size_t i;

  rt->stats.syncs++;
  settle(rt, j);
  for (pp = &rt->jobs; *pp; pp = &(*pp)->next) {
    if (*pp == j) {
      *pp = j->next;
      break;
    }
  }
  if (rt->ops->release)
    rt->ops->release(j);
  for (i = 0; i < j->nheld; i++)
    kcm_api_unref(j->held[i], rt->pool);
  free(j->held);
  free(j->err_msg);
  free(j->ns);
  free(j->key);
  if (!j->gave_back)
    rt->running--;
  free(j);
  pump(rt);
}

void kcm_runtime_plan(struct kcm_runtime_job *j, const void *steps, size_t n, size_t size) {
  j->steps = steps;
  j->nsteps = n;
  j->step_size = size;
  j->step = 0;
}

void kcm_runtime_skip_group(struct kcm_runtime_job *j, uint32_t group) {
  j->skipping = true;
  j->skip_group = group;
}

void kcm_runtime_halt(struct kcm_runtime_job *j) { j->halted = true; }

static const struct kcm_runtime_step *step_at(const struct kcm_runtime_job *j, size_t i) {
  return (const struct kcm_runtime_step *)(const void *)(j->steps + i * j->step_size);
}

/* Send the plan's waves until one has a request in flight; false when
 * nothing is left to send. */
static bool next_wave(struct kcm_runtime_job *j) {
  while (!j->halted && j->step < j->nsteps) {
    uint32_t wave = step_at(j, j->step)->wave;
    while (j->step < j->nsteps && step_at(j, j->step)->wave == wave) {
      size_t i = j->step++;
      const struct kcm_runtime_step *s = step_at(j, i);
      if (!j->skipping || s->group != j->skip_group)
        j->rt->ops->send(j, s, i);
    }
    if (j->outstanding)
      return true;
  }
  return false;
}

/* Move the sync on: its next wave, or its end. */
static void drive(struct kcm_runtime_job *j) {
  if (!j->outstanding && !next_wave(j))
    finish(j);
}

void kcm_runtime_answered(struct kcm_runtime_job *j) {
  if (--j->outstanding == 0)
    drive(j);
}

/* A job for key: NULL (the key done and dropped) when it is not
 * "namespace/name" or memory is short. */
static struct kcm_runtime_job *new_job(struct kcm_runtime *rt, const char *key) {
  struct kcm_runtime_job *j = calloc(1, rt->ops->job_size);
  const char *slash = strchr(key, '/');
  char *ns;
  if (!j || !slash || !(j->key = strdup(key)) || !(ns = strdup(key))) {
    if (j)
      free(j->key);
    free(j);
    kcm_workqueue_done(&rt->queue, key);
    return NULL;
  }
  ns[slash - key] = '\0';
  j->ns = ns;
  j->name = ns + (slash - key) + 1;
  j->rt = rt;
  j->requeue_after_ms = -1;
  j->next = rt->jobs;
  rt->jobs = j;
  return j;
}

static const struct kcm_map_type held_type = KCM_MAP_STRINGS;

/* Whether the gate holds key back: then it is kept in rt->held (or,
 * without memory for that, queued again in a second) and done in the
 * queue. */
static bool hold_back(struct kcm_runtime *rt, const char *key) {
  const char *slash = strchr(key, '/');
  char *copy = NULL;
  size_t n = slash ? (size_t)(slash - key) : 0;
  if (!slash || !((rt->gate && rt->gate(rt->gate_ctx, key, n)) ||
                  (rt->owns && !rt->owns(rt->owns_ctx, key, n))))
    return false;
  if (!kcm_map_get(&rt->held, key) &&
      (!(copy = strdup(key)) || kcm_map_put(&rt->held, copy, copy, NULL))) {
    free(copy);
    kcm_workqueue_add_after(&rt->queue, key, 1000);
  }
  kcm_workqueue_done(&rt->queue, key);
  return true;
}

void kcm_runtime_own(struct kcm_runtime *rt, bool (*owns)(void *ctx, const char *ns, size_t n),
                     void *ctx) {
  rt->owns = owns;
  rt->owns_ctx = ctx;
}

size_t kcm_runtime_drop_held(struct kcm_runtime *rt,
                             bool (*in)(void *ctx, const char *ns, size_t n), void *ctx) {
  struct kcm_map_iter it;
  char *key, **gone = NULL;
  size_t i, n = 0;
  kcm_map_iter_init(&it, &rt->held);
  while ((key = kcm_map_next(&it))) {
    char **grown;
    if (!in(ctx, key, strcspn(key, "/")))
      continue;
    if (!(grown = kcm_buf_grow_items(gone, n, sizeof(*grown))))
      break; /* the rest stay held: queued again, and held again, harmlessly */
    gone = grown;
    gone[n++] = key;
  }
  for (i = 0; i < n; i++) {
    kcm_map_remove(&rt->held, gone[i]);
    free(gone[i]);
  }
  free(gone);
  return n;
}

size_t kcm_runtime_syncing(const struct kcm_runtime *rt,
                           bool (*in)(void *ctx, const char *ns, size_t n), void *ctx) {
  const struct kcm_runtime_job *j;
  size_t count = 0;
  for (j = rt->jobs; j; j = j->next)
    count += in(ctx, j->ns, strlen(j->ns));
  return count;
}

void kcm_runtime_gate(struct kcm_runtime *rt, bool (*gate)(void *ctx, const char *ns, size_t n),
                      void *ctx) {
  rt->gate = gate;
  rt->gate_ctx = ctx;
}

void kcm_runtime_release_held(struct kcm_runtime *rt) {
  struct kcm_map_iter it;
  char *key;
  kcm_map_iter_init(&it, &rt->held);
  while ((key = kcm_map_next(&it))) {
    kcm_workqueue_add(&rt->queue, key);
    free(key);
  }
  kcm_map_release(&rt->held);
  kcm_map_init(&rt->held, &held_type);
}

static void pump(struct kcm_runtime *rt) {
  if (rt->pumping)
    return; /* the loop below goes on when the nested sync gives back */
  rt->pumping = true;
  while (!rt->stopping && !rt->paused && rt->running < rt->workers) {
    const char *key = kcm_workqueue_get(&rt->queue);
    struct kcm_runtime_job *j;
    if (!key)
      break;
    if (hold_back(rt, key))
      continue;
    if (!(j = new_job(rt, key)))
      continue;
    rt->running++;
    rt->ops->start(j);
    drive(j);
  }
  rt->pumping = false;
}

static void on_ready(struct kcm_workqueue *q, void *data) { pump(data); }

void kcm_runtime_init(struct kcm_runtime *rt, uv_loop_t *loop, const struct kcm_runtime_ops *ops,
                      void *ctx, uint32_t workers, struct kcm_writer *writer,
                      struct kcm_intern *pool) {
  char component[64];
  memset(rt, 0, sizeof(*rt));
  rt->loop = loop;
  rt->ops = ops;
  rt->ctx = ctx;
  rt->wall_ms = kcm_runtime_now_ms;
  rt->workers = workers ? workers : 5;
  rt->writer = writer;
  rt->pool = pool;
  kcm_workqueue_init(&rt->queue, loop, ops->kind);
  kcm_map_init(&rt->held, &held_type);
  snprintf(component, sizeof(component), "%s-controller", ops->kind);
  kcm_events_init(&rt->events, writer, component);
}

int kcm_runtime_watch(struct kcm_runtime *rt, struct kcm_informer *inf,
                      const struct kcm_informer_handler *h) {
  struct kcm_informer_handler mine = *h;
  mine.ctx = rt->ctx;
  if (inf->opts.kind < KCM_KIND_COUNT)
    rt->watched[inf->opts.kind] = inf;
  return kcm_informer_add_handler(inf, &mine);
}

void kcm_runtime_run(struct kcm_runtime *rt) {
  kcm_workqueue_set_ready(&rt->queue, on_ready, rt);
  pump(rt);
}

void kcm_runtime_pause(struct kcm_runtime *rt, bool paused) {
  rt->paused = paused;
  if (!paused)
    pump(rt);
}

static void on_queue_closed(struct kcm_workqueue *q, void *data) {
  struct kcm_runtime *rt = data;
  if (rt->on_stopped)
    rt->on_stopped(rt);
}

static void on_drained(struct kcm_workqueue *q, void *data) {
  kcm_workqueue_close(q, on_queue_closed, data);
}

void kcm_runtime_stop(struct kcm_runtime *rt, void (*on_stopped)(struct kcm_runtime *rt)) {
  rt->stopping = true;
  rt->on_stopped = on_stopped;
  kcm_workqueue_shutdown(&rt->queue, on_drained, rt);
}

void kcm_runtime_release(struct kcm_runtime *rt) {
  struct kcm_map_iter it;
  char *key;
  kcm_map_iter_init(&it, &rt->held);
  while ((key = kcm_map_next(&it)))
    free(key);
  kcm_map_release(&rt->held);
  kcm_runtime_forget_wrote(rt);
  kcm_events_release(&rt->events);
}
