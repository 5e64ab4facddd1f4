/*
 * controllers/deployment/progress.c — the Deployment's status and its
 * conditions (calculateStatus, syncRolloutStatus, requeueStuckDeployment).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* --- conditions --------------------------------------------------------------------------- */

/* Upstream's SetDeploymentCondition: nothing changes when status and reason
 * are the same; the transition time stays when only the reason changes;
 * the condition moves to the end. */
void dp_set_condition(struct dp_sync *s, struct kcm_conditions *c, const struct kcm_condition *n) {
  const struct kcm_condition *cur = kcm_api_condition_get(c, n->type);
  struct kcm_condition copy = *n;
  if (cur && cur->status && n->status && !strcmp(cur->status, n->status)) {
    if (cur->reason && n->reason && !strcmp(cur->reason, n->reason))
      return;
    copy.last_transition = cur->last_transition;
  }
  kcm_api_condition_remove(c, n->type);
  if (kcm_api_condition_append(c, &copy))
    nomem(s);
}


void dp_new_condition(struct dp_sync *s, struct kcm_conditions *c, const char *type,
                          const char *status, const char *reason, const char *fmt, ...) {
  struct kcm_condition n = {mut(type), mut(status), mut(reason), NULL, s->now_s, s->now_s};
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&n.message, fmt, ap) < 0) {
    va_end(ap);
    nomem(s);
    return;
  }
  va_end(ap);
  dp_set_condition(s, c, &n);
  free(n.message);
}

static const char *reason_of(const struct kcm_conditions *c, const char *type) {
  const struct kcm_condition *k = kcm_api_condition_get(c, type);
  return k && k->reason ? k->reason : NULL;
}

bool dp_reason_is(const struct kcm_conditions *c, const char *type, const char *reason) {
  const char *r = reason_of(c, type);
  return r && !strcmp(r, reason);
}

/* --- status --------------------------------------------------------------------------------- */

bool dp_deployment_complete(const struct kcm_deployment *d,
                            const struct kcm_deployment_status *st) {
  return st->updated == d->replicas && st->replicas == d->replicas &&
         st->available == d->replicas && st->observed_generation >= d->o.generation;
}

static bool deployment_progressing(const struct kcm_deployment_status *old,
                                   const struct kcm_deployment_status *cur) {
  return cur->updated > old->updated ||
         (int64_t)cur->replicas - cur->updated < (int64_t)old->replicas - old->updated ||
         cur->ready > old->ready || cur->available > old->available;
}

static bool deployment_timed_out(struct dp_sync *s, const struct kcm_deployment_status *st) {
  const struct kcm_condition *c = kcm_api_condition_get(&st->conditions, PROGRESSING);
  if (!has_deadline(s->d) || !c)
    return false;
  if (c->reason && !strcmp(c->reason, NEW_RS_AVAILABLE))
    return false;
  if (c->reason && !strcmp(c->reason, TIMED_OUT))
    return true;
  return (c->last_update + s->d->progress_deadline) * 1000 < (int64_t)s->in->now_ms;
}

void dp_status_release(struct kcm_deployment_status *st) {
  kcm_api_conditions_release(&st->conditions);
}

bool dp_status_equal(const struct kcm_deployment_status *a, const struct kcm_deployment_status *b) {
  return a->observed_generation == b->observed_generation && a->replicas == b->replicas &&
         a->updated == b->updated && a->ready == b->ready && a->available == b->available &&
         a->unavailable == b->unavailable && a->collision_count == b->collision_count &&
         (a->terminating == b->terminating || a->terminating == KCM_DEPLOYMENT_UNWRITTEN ||
          b->terminating == KCM_DEPLOYMENT_UNWRITTEN) &&
         kcm_api_conditions_equal(&a->conditions, &b->conditions);
}

/* The cached status, borrowing its conditions. */
void dp_cached_status(const struct kcm_deployment *d, struct kcm_deployment_status *out) {
  out->observed_generation = d->status.observed_generation;
  out->replicas = d->status.replicas;
  out->updated = d->status.updated;
  out->ready = d->status.ready;
  out->available = d->status.available;
  out->unavailable = d->status.unavailable;
  out->collision_count = d->status.collision_count;
  out->terminating = d->status.terminating;
  out->conditions = d->status.conditions;
}

/* Upstream's sum of the ReplicaSets' terminatingReplicas: unset when one
 * the controller has synced (observedGeneration > 0) has none; those it
 * never synced, and those yet to be made, are left out. */
static int32_t terminating_sum(struct dp_sync *s, const int *l, size_t n) {
  int64_t sum = 0;
  size_t i;
  for (i = 0; i < n; i++) {
    const struct kcm_replicaset *rs = view(s, l[i])->rs;
    if (!rs || (rs->status.observed_generation == 0 && rs->status.terminating < 0))
      continue;
    if (rs->status.terminating < 0)
      return -1;
    sum += rs->status.terminating;
  }
  return kcm_deployment_clamp32(sum);
}

/* Upstream's calculateStatus over the ReplicaSets in l. */
static void calculate_status(struct dp_sync *s, const int *l, size_t n, int new_rs,
                             struct kcm_deployment_status *out) {
  const struct kcm_deployment *d = s->d;
  int64_t spec = 0, available = 0, replicas = 0, ready = 0;
  size_t i;

  memset(out, 0, sizeof(*out));
  for (i = 0; i < n; i++) {
    const struct kcm_deployment_rs *r = view(s, l[i]);
    spec += r->replicas;
    available += status_available(r);
    replicas += status_replicas(r);
    ready += status_ready(r);
  }
  /* sums of int32 counts saturate */
  out->replicas = kcm_deployment_clamp32(replicas);
  out->ready = kcm_deployment_clamp32(ready);
  out->available = kcm_deployment_clamp32(available);
  out->unavailable = spec - available > 0 ? kcm_deployment_clamp32(spec - available) : 0;
  out->updated = new_rs >= 0 ? status_replicas(view(s, new_rs)) : 0;
  out->observed_generation = d->o.generation;
  out->collision_count = s->st->collision_count;
  s->p->terminating = terminating_sum(s, l, n);
  out->terminating =
      s->in->terminating_kept > 0 ? s->p->terminating : KCM_DEPLOYMENT_UNWRITTEN;
  if (kcm_api_conditions_copy(&out->conditions, &s->st->conditions)) {
    nomem(s);
    return;
  }
  if (available >= (int64_t)d->replicas - kcm_deployment_max_unavailable(d))
    dp_new_condition(s, &out->conditions, AVAILABLE, "True", "MinimumReplicasAvailable",
                  "Deployment has minimum availability.");
  else
    dp_new_condition(s, &out->conditions, AVAILABLE, "False", "MinimumReplicasUnavailable",
                  "Deployment does not have minimum availability.");
}

/* Replace the sync's status with ns (taking its conditions). */
static void adopt_status(struct dp_sync *s, struct kcm_deployment_status *ns) {
  dp_status_release(s->st);
  *s->st = *ns;
  memset(ns, 0, sizeof(*ns));
}

/* Upstream's syncDeploymentStatus: the numbers, without progress. */
void dp_sync_status(struct dp_sync *s, const int *l, size_t n, int new_rs) {
  struct kcm_deployment_status ns;
  calculate_status(s, l, n, new_rs, &ns);
  if (s->err) {
    dp_status_release(&ns);
    return;
  }
  adopt_status(s, &ns);
}

/* Upstream's getReplicaFailures: those of the new ReplicaSet, else any. */
static const struct kcm_condition *replica_failure(struct dp_sync *s, const int *l, size_t n,
                                                   int new_rs) {
  const struct kcm_condition *c;
  size_t i;
  if (new_rs >= 0 && view(s, new_rs)->rs &&
      (c = kcm_api_condition_get(&view(s, new_rs)->rs->status.conditions, REPLICA_FAILURE)))
    return c;
  for (i = 0; i < n; i++)
    if (view(s, l[i])->rs &&
        (c = kcm_api_condition_get(&view(s, l[i])->rs->status.conditions, REPLICA_FAILURE)))
      return c;
  return NULL;
}

/* Upstream's requeueStuckDeployment, as a delay. */
static int64_t requeue_stuck(struct dp_sync *s, const struct kcm_deployment_status *ns) {
  const struct kcm_condition *c = kcm_api_condition_get(&s->st->conditions, PROGRESSING);
  int64_t after;
  if (!has_deadline(s->d) || !c)
    return -1;
  if (dp_deployment_complete(s->d, ns) || (c->reason && !strcmp(c->reason, TIMED_OUT)))
    return -1;
  after = (c->last_update + s->d->progress_deadline) * 1000 - (int64_t)s->in->now_ms;
  return after < 1000 ? 0 : after + 1000;
}

/* Upstream's syncRolloutStatus: the numbers and the conditions. */
void dp_sync_rollout_status(struct dp_sync *s, const int *l, size_t n, int new_rs) {
  const struct kcm_deployment *d = s->d;
  const struct kcm_condition *cur, *fail;
  const char *what = new_rs >= 0 ? "ReplicaSet" : "Deployment";
  const char *name = new_rs >= 0 ? view(s, new_rs)->name : d->o.name;
  struct kcm_deployment_status ns;

  calculate_status(s, l, n, new_rs, &ns);
  if (s->err) {
    dp_status_release(&ns);
    return;
  }
  if (!has_deadline(d))
    kcm_api_condition_remove(&ns.conditions, PROGRESSING);
  cur = kcm_api_condition_get(&s->st->conditions, PROGRESSING);
  if (has_deadline(d) && !(ns.replicas == ns.updated && cur && cur->reason &&
                           !strcmp(cur->reason, NEW_RS_AVAILABLE))) {
    if (dp_deployment_complete(d, &ns)) {
      dp_new_condition(s, &ns.conditions, PROGRESSING, "True", NEW_RS_AVAILABLE,
                    "%s \"%s\" has successfully progressed.", what, name);
    } else if (deployment_progressing(s->st, &ns)) {
      struct kcm_condition c = {mut(PROGRESSING), mut("True"), mut("ReplicaSetUpdated"), NULL,
                                s->now_s, s->now_s};
      if (asprintf(&c.message, "%s \"%s\" is progressing.", what, name) < 0) {
        nomem(s);
      } else {
        if (cur && cur->status && !strcmp(cur->status, "True"))
          c.last_transition = cur->last_transition;
        kcm_api_condition_remove(&ns.conditions, PROGRESSING);
        dp_set_condition(s, &ns.conditions, &c);
        free(c.message);
      }
    } else if (deployment_timed_out(s, &ns)) {
      dp_new_condition(s, &ns.conditions, PROGRESSING, "False", TIMED_OUT,
                    "%s \"%s\" has timed out progressing.", what, name);
    }
  }
  if ((fail = replica_failure(s, l, n, new_rs))) {
    struct kcm_condition c = *fail;
    c.last_update = c.last_transition;
    dp_set_condition(s, &ns.conditions, &c);
  } else {
    kcm_api_condition_remove(&ns.conditions, REPLICA_FAILURE);
  }
  if (s->err) {
    dp_status_release(&ns);
    return;
  }
  if (dp_status_equal(s->st, &ns)) {
    s->p->requeue_after_ms = requeue_stuck(s, &ns);
    dp_status_release(&ns);
    return;
  }
  adopt_status(s, &ns);
}

/* The status write, when the sync changed anything the Deployment shows. */
void dp_write_status(struct dp_sync *s, bool lenient) {
  struct kcm_deployment_step *st;
  if (s->err || !kcm_deployment_status_changed(s->d, s->p))
    return;
  s->group++;
  st = dp_add_step(s, KCM_DEPLOYMENT_STEP_STATUS);
  if (st)
    st->lenient = lenient;
}

