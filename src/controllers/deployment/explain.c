/*
 * controllers/deployment/explain.c — `kcm why` for a Deployment: the
 * objects from the caches, kcm_deployment_why()'s answer, and the pods
 * that hold the rollout back, written as text or JSON.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/controllers.h"
#include "kcm/deployment.h"
#include "kcm/jsonw.h"
#include "kcm/labels.h"
#include "kcm/log.h"
#include "kcm/replicaset.h"

#include "internal.h"

#define MESSAGE_CHARS 300 /* bytes of text from an object shown */
#define BAR 20            /* cells of the progress bar */
#define OVERLAPS 3        /* Deployments named whose selector overlaps its own */

struct explain {
  const struct kcm_controllers_why *in;
  const struct kcm_deployment *d;
  struct kcm_deployment_why w;
  const struct kcm_replicaset *new_rs; /* NULL: none yet */
};

static bool pods_running(void *ctx, const struct kcm_replicaset *rs) {
  const struct explain *e = ctx;
  return dp_pods_running(&e->in->informers[KCM_KIND_POD], e->d, rs, NULL, NULL);
}

/* Whether pod p of the new ReplicaSet counts as available, as that
 * ReplicaSet's controller counts it. */
static bool available(const struct explain *e, const struct kcm_pod *p) {
  return !p->o.deleted && kcm_replicaset_pod_available(p, e->new_rs->min_ready_seconds,
                                                       e->in->now_ms);
}

/* The minReadySeconds that counts for a pod shown. */
static int32_t min_ready(const struct explain *e) {
  return e->new_rs ? e->new_rs->min_ready_seconds : e->d->min_ready_seconds;
}

/* The pods that hold the rollout back: the new ReplicaSet's not available
 * (waiting for them), or the old ones' still there (Recreate). */
static bool holds(const void *ctx, const struct kcm_pod *p) {
  const struct explain *e = ctx;
  const struct kcm_object *o = &p->o;
  if (!o->has_controller || strcmp(o->ns, e->d->o.ns) ||
      !kcm_labels_matches(&e->d->selector, &o->labels))
    return false;
  if (e->w.state == KCM_DEPLOYMENT_WHY_OLD_PODS)
    return !e->new_rs || !kcm_api_uid_equal(&o->controller.uid, &e->new_rs->o.uid);
  return e->new_rs && kcm_api_uid_equal(&o->controller.uid, &e->new_rs->o.uid) &&
         !available(e, p);
}

static const char *op_name(enum kcm_deployment_op op) {
  switch (op) {
  case KCM_DEPLOYMENT_STEP_SCALE: return "scale";
  case KCM_DEPLOYMENT_STEP_CREATE: return "create";
  case KCM_DEPLOYMENT_STEP_DELETE: return "delete";
  case KCM_DEPLOYMENT_STEP_ADOPT: return "adopt";
  case KCM_DEPLOYMENT_STEP_RELEASE: return "release";
  case KCM_DEPLOYMENT_STEP_ROLLBACK: return "roll back";
  default: return "write";
  }
}

static const char *state_name(enum kcm_deployment_why_state s) {
  static const char *const names[] = {"acting", "complete", "paused", "waiting-for-available",
                                      "waiting-for-old-pods", "settling", "invalid"};
  return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

/* "scale web-6d7 3 -> 2", "create web-7c5 with 1", ... */
static void step_text(const struct kcm_deployment_why_step *s, struct kcm_buf *out) {
  const char *rs = s->rs ? s->rs : "the Deployment";
  if (s->op == KCM_DEPLOYMENT_STEP_SCALE)
    kcm_buf_appendf(out, "scale ReplicaSet %s %s %d -> %d", rs,
                    s->to > s->from ? "up" : s->to < s->from ? "down" : "(annotations)", s->from,
                    s->to);
  else if (s->op == KCM_DEPLOYMENT_STEP_CREATE)
    kcm_buf_appendf(out, "create ReplicaSet %s with %d replica%s", rs, s->to,
                    s->to == 1 ? "" : "s");
  else
    kcm_buf_appendf(out, "%s %s", op_name(s->op), rs);
}

static void bar(int32_t done, int32_t of, struct kcm_buf *out) {
  int i, full = of > 0 ? (int)((int64_t)(done < 0 ? 0 : done > of ? of : done) * BAR / of) : BAR;
  kcm_buf_append_str(out, "[");
  for (i = 0; i < BAR; i++)
    kcm_buf_append_str(out, i < full ? "#" : "-");
  kcm_buf_append_str(out, "]");
}

/* The step that follows the wait, if the planner names one. */
static void then_text(const struct kcm_deployment_why *w, bool line, struct kcm_buf *out) {
  if (!w->has_next)
    return;
  kcm_buf_append_str(out, line ? "; then: " : ",\n  then: ");
  step_text(&w->next, out);
}

/* Where it stands and what it waits for, in words: lines of the answer,
 * or (line) the end of its one line. */
static void state_text(const struct explain *e, bool line, struct kcm_buf *out) {
  const struct kcm_deployment_why *w = &e->w;
  const char *nrs = e->new_rs ? e->new_rs->o.name : "the new ReplicaSet";
  kcm_buf_append_str(out, line ? "" : "  ");
  switch (w->state) {
  case KCM_DEPLOYMENT_WHY_ACTING:
    kcm_buf_append_str(out, "next: ");
    step_text(&w->next, out);
    kcm_buf_append_str(out, line ? ", now" : ", now (the controller has not done it yet)");
    break;
  case KCM_DEPLOYMENT_WHY_COMPLETE:
    kcm_buf_append_str(out, "complete: every replica updated and available");
    break;
  case KCM_DEPLOYMENT_WHY_PAUSED:
    kcm_buf_append_str(out, "paused: the rollout waits for `kubectl rollout resume`");
    kcm_buf_append_str(out, line ? "" : "; only scaling is done");
    break;
  case KCM_DEPLOYMENT_WHY_AVAILABLE:
    kcm_buf_appendf(out, "waits for %d more pod%s of %s to be available", w->more,
                    w->more == 1 ? "" : "s", nrs);
    then_text(w, line, out);
    if (!e->d->recreate && !line)
      kcm_buf_appendf(out, "\n  (maxUnavailable %d: at least %d of %d stay available, %d are; "
                           "maxSurge %d: at most %d pods, %d now)",
                      w->max_unavailable, w->min_available, e->d->replicas, w->available,
                      w->max_surge, w->max_total, w->total);
    break;
  case KCM_DEPLOYMENT_WHY_OLD_PODS:
    kcm_buf_append_str(out, "waits for the old pods to end (Recreate)");
    then_text(w, line, out);
    break;
  case KCM_DEPLOYMENT_WHY_SETTLING:
    kcm_buf_append_str(out, "settling: nothing left to do but report the counts");
    break;
  default:
    kcm_buf_append_str(out, "its selector cannot be used: the controller does nothing");
  }
  kcm_buf_append_str(out, line ? "" : "\n");
}

/* The Deployments of its namespace (not being deleted) whose selector
 * overlaps its own: a pod or a ReplicaSet selected by both. With j, the
 * JSON member "overlaps". */
static void overlaps(const struct explain *e, struct kcm_buf *out, struct kcm_jsonw *j) {
  static const enum kcm_kind kinds[] = {KCM_KIND_REPLICASET, KCM_KIND_POD};
  const struct kcm_object *o, **mine = NULL;
  size_t n = 0, nmine = 0, k, i;
  if (j)
    kcm_jsonw_key_array(j, "overlaps");
  for (k = 0; k < 2; k++) /* what its own selector picks */
    for (o = kcm_informer_first_in(&e->in->informers[kinds[k]], e->d->o.ns); o; o = o->ns_next)
      if (kcm_labels_matches(&e->d->selector, &o->labels) && KCM_BUF_PUSH(mine, nmine, o))
        break;
  for (o = kcm_informer_first_in(&e->in->informers[KCM_KIND_DEPLOYMENT], e->d->o.ns);
       o && n < OVERLAPS; o = o->ns_next) {
    const struct kcm_deployment *d2 = (const struct kcm_deployment *)o;
    if (o->deleted || kcm_api_uid_equal(&o->uid, &e->d->o.uid))
      continue;
    for (i = 0; i < nmine && !kcm_labels_matches(&d2->selector, &mine[i]->labels); i++)
      ;
    if (i == nmine)
      continue;
    n++;
    if (j)
      kcm_jsonw_string(j, o->name);
    else
      kcm_buf_appendf(out, "  selector overlaps deployment/%s's: a pod or ReplicaSet that one "
                           "lets go of the other may adopt\n", o->name);
  }
  if (j)
    kcm_jsonw_end(j);
  free(mine);
}

/* The pods holding it back, the deadline, a ReplicaFailure. */
static void notes_text(const struct explain *e, struct kcm_buf *out) {
  kcm_replicaset_why_pods(e->in, holds, e, min_ready(e), out, NULL);
  kcm_replicaset_why_upstream(e->in, e->new_rs, e->w.state == KCM_DEPLOYMENT_WHY_AVAILABLE,
                              out, NULL);
  overlaps(e, out, NULL);
  if (e->w.timed_out)
    kcm_buf_appendf(out, "  progress deadline exceeded (%ds without progress)\n",
                    e->d->progress_deadline);
  else if (e->w.deadline_left_s != INT64_MIN)
    kcm_buf_appendf(out, "  progress deadline: %llds left of %ds\n",
                    (long long)(e->w.deadline_left_s > 0 ? e->w.deadline_left_s : 0),
                    e->d->progress_deadline);
  if (e->w.failure) {
    kcm_buf_append_str(out, "  ReplicaFailure (");
    kcm_log_plain(out, e->w.failure->reason, MESSAGE_CHARS);
    kcm_buf_append_str(out, "): ");
    kcm_log_plain(out, e->w.failure->message, MESSAGE_CHARS);
    kcm_buf_append_str(out, "\n");
  }
}

static void text(const struct explain *e, struct kcm_buf *out) {
  const struct kcm_deployment *d = e->d;
  const struct kcm_deployment_status *st = &e->w.plan.status;
  const char *rev = e->w.plan.revision ? e->w.plan.revision
                    : kcm_api_pairs_get(&d->annotations, KCM_DEPLOYMENT_REVISION);
  kcm_buf_appendf(out, "deployment/%s in %s: revision ", d->o.name, d->o.ns);
  kcm_log_plain(out, rev ? rev : "none", MESSAGE_CHARS);
  kcm_buf_append_str(out, ", ");
  if (d->recreate)
    kcm_buf_append_str(out, "Recreate");
  else
    kcm_buf_appendf(out, "RollingUpdate (maxSurge %d, maxUnavailable %d)", e->w.max_surge,
                    e->w.max_unavailable);
  if (d->min_ready_seconds)
    kcm_buf_appendf(out, ", minReadySeconds %d", d->min_ready_seconds);
  kcm_buf_append_str(out, "\n  ");
  /* the bar: the new ReplicaSet's pods available, of the replicas wanted */
  bar(e->new_rs ? e->new_rs->status.available : 0, d->replicas, out);
  kcm_buf_appendf(out, " %d replica%s: %d updated, %d ready, %d available\n", d->replicas,
                  d->replicas == 1 ? "" : "s", st->updated, st->ready, st->available);
  state_text(e, false, out);
  notes_text(e, out);
}

/* The answer in one line, for --watch when not on a terminal. */
static void line_text(const struct explain *e, struct kcm_buf *out) {
  const struct kcm_deployment_status *st = &e->w.plan.status;
  kcm_buf_appendf(out, "deployment/%s: %d replica%s: %d updated, %d ready, %d available; ",
                  e->d->o.name, e->d->replicas, e->d->replicas == 1 ? "" : "s", st->updated,
                  st->ready, st->available);
  state_text(e, true, out);
  if (e->w.timed_out)
    kcm_buf_appendf(out, "; progress deadline exceeded (%ds without progress)",
                    e->d->progress_deadline);
  if (e->w.failure) {
    kcm_buf_append_str(out, "; ReplicaFailure (");
    kcm_log_plain(out, e->w.failure->reason, MESSAGE_CHARS);
    kcm_buf_append_str(out, ")");
  }
  kcm_buf_append_str(out, "\n");
}

static void step_json(struct kcm_jsonw *j, const struct kcm_deployment_why_step *s) {
  kcm_jsonw_key_object(j, "next");
  kcm_jsonw_key_string(j, "action", op_name(s->op));
  if (s->rs)
    kcm_jsonw_key_string(j, "replicaSet", s->rs);
  if (s->op == KCM_DEPLOYMENT_STEP_SCALE)
    kcm_jsonw_key_int(j, "from", s->from);
  if (s->op == KCM_DEPLOYMENT_STEP_SCALE || s->op == KCM_DEPLOYMENT_STEP_CREATE)
    kcm_jsonw_key_int(j, "to", s->to);
  kcm_jsonw_end(j);
}

static void json(const struct explain *e, struct kcm_jsonw *j) {
  const struct kcm_deployment_why *w = &e->w;
  const struct kcm_deployment_status *st = &w->plan.status;
  kcm_jsonw_object(j);
  kcm_jsonw_key_string(j, "kind", "Deployment");
  kcm_jsonw_key_string(j, "namespace", e->d->o.ns);
  kcm_jsonw_key_string(j, "name", e->d->o.name);
  kcm_jsonw_key_string(j, "state", state_name(w->state));
  kcm_jsonw_key_string(j, "strategy", e->d->recreate ? "Recreate" : "RollingUpdate");
  kcm_jsonw_key_int(j, "replicas", e->d->replicas);
  kcm_jsonw_key_int(j, "updatedReplicas", st->updated);
  kcm_jsonw_key_int(j, "readyReplicas", st->ready);
  kcm_jsonw_key_int(j, "availableReplicas", st->available);
  kcm_jsonw_key_int(j, "maxSurge", w->max_surge);
  kcm_jsonw_key_int(j, "maxUnavailable", w->max_unavailable);
  if (e->new_rs)
    kcm_jsonw_key_string(j, "newReplicaSet", e->new_rs->o.name);
  if (w->state == KCM_DEPLOYMENT_WHY_AVAILABLE)
    kcm_jsonw_key_int(j, "waitsForAvailable", w->more);
  if (w->has_next)
    step_json(j, &w->next);
  kcm_replicaset_why_pods(e->in, holds, e, min_ready(e), NULL, j);
  kcm_replicaset_why_upstream(e->in, e->new_rs, w->state == KCM_DEPLOYMENT_WHY_AVAILABLE,
                              NULL, j);
  overlaps(e, NULL, j);
  kcm_jsonw_key_bool(j, "progressDeadlineExceeded", w->timed_out);
  if (w->deadline_left_s != INT64_MIN)
    kcm_jsonw_key_int(j, "progressDeadlineLeftSeconds",
                      w->deadline_left_s > 0 ? w->deadline_left_s : 0);
  if (w->failure)
    kcm_replicaset_why_json_text(j, "replicaFailure", w->failure->message);
  kcm_jsonw_end(j);
}

/* The planner's input from the caches; *cands to free. */
static int input(struct explain *e, struct kcm_deployment_input *in,
                 struct kcm_replicaset ***cands) {
  struct kcm_object **objs = NULL;
  size_t n = 0;
  int err = kcm_informer_claimable(&e->in->informers[KCM_KIND_REPLICASET], &e->d->o.uid,
                                   e->d->o.ns, &objs, &n);
  if (err)
    return err;
  *cands = (struct kcm_replicaset **)(void *)objs;
  memset(in, 0, sizeof(*in));
  in->d = e->d;
  in->candidates = *cands;
  in->ncandidates = n;
  in->pods_running = pods_running;
  in->ctx = e;
  in->now_ms = e->in->now_ms;
  in->terminating_kept = -1;
  return 0;
}

int kcm_deployment_explain(const struct kcm_controllers_why *in, struct kcm_buf *out,
                           int *ended) {
  struct explain e = {in, NULL, {0}, NULL};
  struct kcm_deployment_input pin;
  struct kcm_replicaset **cands = NULL;
  int err;

  *ended = 0;
  e.d = (const struct kcm_deployment *)kcm_informer_get(&in->informers[KCM_KIND_DEPLOYMENT],
                                                        in->ns, in->name);
  if (!e.d)
    return KCM_ENOTFOUND;
  if ((err = input(&e, &pin, &cands)) || (err = kcm_deployment_why(&pin, &e.w))) {
    free(cands);
    return err;
  }
  if (e.w.plan.new_rs >= 0)
    e.new_rs = e.w.plan.rs[e.w.plan.new_rs].rs;
  *ended = e.w.state == KCM_DEPLOYMENT_WHY_COMPLETE ? 1 : e.w.timed_out ? -1 : 0;
  if (in->json) {
    struct kcm_jsonw j;
    kcm_jsonw_start(&j, out);
    json(&e, &j);
    err = kcm_jsonw_finish(&j);
    if (!err)
      err = kcm_buf_append_str(out, "\n");
  } else if (in->line)
    line_text(&e, out);
  else
    text(&e, out);
  kcm_deployment_why_release(&e.w);
  free(cands);
  return err;
}
