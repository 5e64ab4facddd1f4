/*
 * controllers/deployment/why.c — what a rollout waits for, asked of the
 * planner the controller runs: the Deployment as read, then, when the
 * planner would send nothing, the same objects with more of the new
 * ReplicaSet's pods available (or, for Recreate, the old pods gone) until
 * it would act. See include/kcm/deployment.h.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "kcm/deployment.h"

#include "internal.h"

/* A write the controller would send for the rollout (the status and
 * events aside). */
static bool acts(enum kcm_deployment_op op) {
  return op != KCM_DEPLOYMENT_STEP_STATUS && op != KCM_DEPLOYMENT_STEP_EVENT &&
         op != KCM_DEPLOYMENT_STEP_RECHECK;
}

static const struct kcm_deployment_step *first_act(const struct kcm_deployment_plan *p) {
  size_t i;
  for (i = 0; i < p->nsteps; i++)
    if (acts(p->steps[i].op))
      return &p->steps[i];
  return NULL;
}

/* out->next from step s of plan p; 0 or KCM_ENOMEM. */
static int take_step(struct kcm_deployment_why *out, const struct kcm_deployment_plan *p,
                     const struct kcm_deployment_step *s) {
  const char *name = NULL;
  switch (s->op) {
  case KCM_DEPLOYMENT_STEP_ADOPT:
    name = p->adopt[s->rs]->o.name;
    break;
  case KCM_DEPLOYMENT_STEP_RELEASE:
    name = p->release[s->rs]->o.name;
    break;
  case KCM_DEPLOYMENT_STEP_SCALE:
  case KCM_DEPLOYMENT_STEP_CREATE:
  case KCM_DEPLOYMENT_STEP_DELETE:
    name = p->rs[s->rs].name;
    break;
  default:
    break;
  }
  out->next.op = s->op;
  out->next.from = s->op == KCM_DEPLOYMENT_STEP_SCALE ? s->old_replicas : 0;
  out->next.to = s->op == KCM_DEPLOYMENT_STEP_SCALE ? s->replicas
                 : s->op == KCM_DEPLOYMENT_STEP_CREATE ? p->rs[s->rs].replicas : 0;
  out->has_next = true;
  if (name && !(out->next.rs = strdup(name)))
    return KCM_ENOMEM;
  return 0;
}

static bool no_pods_running(void *ctx, const struct kcm_replicaset *rs) {
  (void)ctx;
  (void)rs;
  return false;
}

/* The first write the planner plans from in with the candidate at index
 * `at` read as `as` (unless as is NULL) and, with old_gone, every other
 * one's pods ended; taken into out->next, *found says whether there was
 * one. */
static int plan_with(const struct kcm_deployment_input *in, ssize_t at,
                     struct kcm_replicaset *as, bool old_gone, struct kcm_deployment_why *out,
                     bool *found) {
  struct kcm_deployment_input h = *in;
  struct kcm_replicaset **cands = malloc((in->ncandidates + 1) * sizeof(*cands));
  struct kcm_replicaset *gone = NULL;
  struct kcm_deployment_plan p;
  const struct kcm_deployment_step *s;
  size_t i;
  int err;

  *found = false;
  if (!cands || (old_gone && !(gone = calloc(in->ncandidates + 1, sizeof(*gone))))) {
    free(cands);
    return KCM_ENOMEM;
  }
  for (i = 0; i < in->ncandidates; i++) {
    cands[i] = (ssize_t)i == at && as ? as : in->candidates[i];
    if (gone && (ssize_t)i != at) { /* its pods ended: none left to count */
      gone[i] = *in->candidates[i];
      gone[i].status.replicas = gone[i].status.ready = gone[i].status.available = 0;
      cands[i] = &gone[i];
    }
  }
  h.candidates = cands;
  if (old_gone)
    h.pods_running = no_pods_running;
  h.status_wait_ms = 0;
  if (!(err = kcm_deployment_plan(&h, &p))) {
    if ((s = first_act(&p))) {
      *found = true;
      err = take_step(out, &p, s);
    }
    kcm_deployment_plan_release(&p);
  }
  free(cands);
  free(gone);
  return err;
}

/* The candidate the plan's new ReplicaSet was read from; -1 if none. */
static ssize_t new_candidate(const struct kcm_deployment_input *in,
                             const struct kcm_deployment_plan *p) {
  size_t i;
  if (p->new_rs < 0 || !p->rs[p->new_rs].rs)
    return -1;
  for (i = 0; i < in->ncandidates; i++)
    if (in->candidates[i] == p->rs[p->new_rs].rs)
      return (ssize_t)i;
  return -1;
}

/* Rolling: the fewest more available pods of the new ReplicaSet that let
 * the planner act. */
static int wait_available(const struct kcm_deployment_input *in, struct kcm_deployment_why *out) {
  ssize_t at = new_candidate(in, &out->plan);
  struct kcm_replicaset as;
  bool found = false;
  int32_t k, left;
  int err = 0;

  if (at < 0)
    return 0;
  as = *in->candidates[at];
  left = as.replicas - as.status.available;
  for (k = 1; !err && !found && k <= left; k++) {
    as.status.available = in->candidates[at]->status.available + k;
    if (as.status.ready < as.status.available)
      as.status.ready = as.status.available;
    if (as.status.replicas < as.status.available)
      as.status.replicas = as.status.available;
    err = plan_with(in, at, &as, false, out, &found);
    if (found)
      out->more = k;
  }
  if (!err && left > 0) {
    out->state = KCM_DEPLOYMENT_WHY_AVAILABLE;
    if (!found)
      out->more = left;
  }
  return err;
}

/* The figures the answer quotes: fenceposts, sums and the deadline. */
static void figures(const struct kcm_deployment_input *in, struct kcm_deployment_why *out) {
  const struct kcm_deployment *d = in->d;
  const struct kcm_deployment_plan *p = &out->plan;
  const struct kcm_condition *c = kcm_api_condition_get(&p->status.conditions, PROGRESSING);
  size_t i;

  if (!d->recreate)
    kcm_deployment_fenceposts(&d->max_surge, &d->max_unavailable, d->replicas,
                              &out->max_surge, &out->max_unavailable);
  out->max_unavailable = kcm_deployment_max_unavailable(d);
  out->max_total = kcm_deployment_max_total(d);
  out->min_available = d->replicas - out->max_unavailable;
  for (i = 0; i < p->nrs; i++) {
    out->total = kcm_deployment_clamp32((int64_t)out->total + p->rs[i].replicas);
    if (p->rs[i].rs)
      out->available = kcm_deployment_clamp32((int64_t)out->available +
                                              p->rs[i].rs->status.available);
  }
  out->deadline_left_s = INT64_MIN;
  out->timed_out = c && c->reason && !strcmp(c->reason, TIMED_OUT);
  if (has_deadline(d) && c && !out->timed_out && c->reason && strcmp(c->reason, NEW_RS_AVAILABLE))
    out->deadline_left_s = c->last_update + d->progress_deadline - (int64_t)(in->now_ms / 1000);
  out->failure = kcm_api_condition_get(&p->status.conditions, REPLICA_FAILURE);
}

int kcm_deployment_why(const struct kcm_deployment_input *in, struct kcm_deployment_why *out) {
  const struct kcm_deployment_step *s;
  bool found;
  int err;

  memset(out, 0, sizeof(*out));
  out->plan.new_rs = -1;
  if ((err = kcm_deployment_plan(in, &out->plan)))
    return err;
  figures(in, out);
  if (out->plan.invalid)
    out->state = KCM_DEPLOYMENT_WHY_INVALID;
  else if ((s = first_act(&out->plan))) {
    out->state = KCM_DEPLOYMENT_WHY_ACTING;
    err = take_step(out, &out->plan, s);
  } else if (in->d->paused)
    out->state = KCM_DEPLOYMENT_WHY_PAUSED;
  else if (dp_deployment_complete(in->d, &out->plan.status))
    out->state = KCM_DEPLOYMENT_WHY_COMPLETE;
  else if (in->d->recreate) {
    out->state = KCM_DEPLOYMENT_WHY_OLD_PODS;
    err = plan_with(in, new_candidate(in, &out->plan), NULL, true, out, &found);
    if (!err && !found)
      out->state = KCM_DEPLOYMENT_WHY_SETTLING;
  } else {
    out->state = KCM_DEPLOYMENT_WHY_SETTLING;
    err = wait_available(in, out);
  }
  if (err)
    kcm_deployment_why_release(out);
  return err;
}

void kcm_deployment_why_release(struct kcm_deployment_why *w) {
  kcm_deployment_plan_release(&w->plan);
  free(w->next.rs);
  memset(w, 0, sizeof(*w));
  w->plan.new_rs = -1;
}
