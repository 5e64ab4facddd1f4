/*
 * controllers/deployment/plan.c — one Deployment sync as a pure function:
 * the cached Deployment and ReplicaSets in, the steps to send out, in
 * upstream's order (syncDeployment, sync, rolloutRolling, rolloutRecreate).
 * See include/kcm/deployment.h.
 *
 * Where upstream keeps using an object it has just written, the plan does
 * the same with its view of that ReplicaSet (struct kcm_deployment_rs); where
 * upstream goes on with the copy it read from the cache, so does the plan.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/buf.h"
#include "internal.h"

/* --- small helpers --------------------------------------------------------------------- */

/* The deprecated.deployment.rollback.to revision, when it parses. */
static bool rollback_to(const struct kcm_deployment *d, int64_t *rev) {
  const char *v = kcm_api_pairs_get(&d->annotations, KCM_DEPLOYMENT_ROLLBACK_TO);
  return v && *v && kcm_deployment_parse_int(v, rev);
}

/* An annotation read as upstream's strconv.Atoi into an int32. */
bool dp_int_annotation(const struct kcm_deployment_rs *r, const char *key, int32_t *out) {
  const char *v = kcm_api_pairs_get(&r->annotations, key), *p;
  int64_t n = 0;
  if (!v || !*v)
    return false;
  for (p = v; *p; p++) {
    if (*p < '0' || *p > '9' || (n = n * 10 + (*p - '0')) > INT32_MAX)
      return false;
  }
  *out = (int32_t)n;
  return true;
}


struct kcm_deployment_step *dp_add_step(struct dp_sync *s, enum kcm_deployment_op op) {
  struct kcm_deployment_step *grown;
  if (s->err)
    return NULL;
  grown = kcm_buf_grow_items(s->p->steps, s->p->nsteps, sizeof(*grown));
  if (!grown) {
    nomem(s);
    return NULL;
  }
  s->p->steps = grown;
  grown = &s->p->steps[s->p->nsteps++];
  memset(grown, 0, sizeof(*grown));
  grown->op = op;
  grown->rs = -1;
  grown->at.group = s->group;
  grown->at.wave = ++s->wave;
  return grown;
}

void dp_set_message(struct dp_sync *s, struct kcm_deployment_step *st, const char *reason,
                    bool warning, const char *fmt, ...) {
  va_list ap;
  if (!st)
    return;
  st->reason = reason;
  st->warning = warning;
  va_start(ap, fmt);
  if (vasprintf(&st->message, fmt, ap) < 0) {
    st->message = NULL;
    nomem(s);
  }
  va_end(ap);
}

/* An event, recorded in its turn among the steps. */
void dp_event(struct dp_sync *s, bool warning, const char *reason, const char *message) {
  dp_set_message(s, dp_add_step(s, KCM_DEPLOYMENT_STEP_EVENT), reason, warning, "%s", message);
}

int64_t dp_sum_spec(struct dp_sync *s, const int *l, size_t n) {
  int64_t t = 0;
  size_t i;
  for (i = 0; i < n; i++)
    t += view(s, l[i])->replicas;
  return t;
}

/* The active ReplicaSets (spec.replicas > 0) of l into out. */
size_t dp_filter_active(struct dp_sync *s, const int *l, size_t n, int *out) {
  size_t i, k = 0;
  for (i = 0; i < n; i++)
    if (l[i] >= 0 && view(s, l[i])->replicas > 0)
      out[k++] = l[i];
  return k;
}

/* --- orders ------------------------------------------------------------------------------ */

/* A stable bottom-up merge sort, as some orders are not total: equal
 * elements keep their order. At most n log2 n comparisons, about n for a
 * list already in order (runs in order are not merged). */
void dp_sort(struct dp_sync *s, int *l, size_t n, dp_less less) {
  int *scratch, *from = l, *to, *t;
  size_t w, lo, mid, hi, i, j, k;

  if (n < 2)
    return;
  if (!(scratch = malloc(n * sizeof(*scratch)))) {
    nomem(s);
    return;
  }
  to = scratch;
  for (w = 1; w < n; w *= 2) {
    for (lo = 0; lo < n; lo += 2 * w) {
      mid = n - lo > w ? lo + w : n;
      hi = n - mid > w ? mid + w : n;
      i = lo;
      j = mid;
      k = lo;
      if (mid < hi && less(s, from[mid], from[mid - 1]))
        while (i < mid && j < hi)
          to[k++] = less(s, from[j], from[i]) ? from[j++] : from[i++];
      memcpy(to + k, from + i, (mid - i) * sizeof(*to));
      memcpy(to + k + (mid - i), from + j, (hi - j) * sizeof(*to));
    }
    t = from;
    from = to;
    to = t;
  }
  if (from != l)
    memcpy(l, from, n * sizeof(*l));
  free(scratch);
}

static bool by_creation(struct dp_sync *s, int a, int b) {
  const struct kcm_deployment_rs *x = view(s, a), *y = view(s, b);
  if (x->created == y->created)
    return strcmp(x->name, y->name) < 0;
  return x->created < y->created;
}

bool dp_by_creation_newest(struct dp_sync *s, int a, int b) { return by_creation(s, b, a); }

bool dp_by_size_older(struct dp_sync *s, int a, int b) {
  if (view(s, a)->replicas == view(s, b)->replicas)
    return by_creation(s, a, b);
  return view(s, a)->replicas > view(s, b)->replicas;
}

bool dp_by_size_newer(struct dp_sync *s, int a, int b) {
  if (view(s, a)->replicas == view(s, b)->replicas)
    return by_creation(s, b, a);
  return view(s, a)->replicas > view(s, b)->replicas;
}

bool dp_by_revision(struct dp_sync *s, int a, int b) {
  int64_t ra, rb;
  if (!kcm_deployment_revision_of(&view(s, a)->annotations, &ra) ||
      !kcm_deployment_revision_of(&view(s, b)->annotations, &rb) || ra == rb)
    return by_creation(s, a, b);
  return ra < rb;
}

/* --- the sync paths ------------------------------------------------------------------------ */

size_t dp_all_of(struct dp_sync *s, int new_rs, int *all) {
  size_t i;
  for (i = 0; i < s->nold; i++)
    all[i] = s->old[i];
  if (new_rs >= 0)
    all[i++] = new_rs;
  return i;
}

/* Upstream's sync: paused, or a scaling event. */
static void sync_scale(struct dp_sync *s, int *all) {
  int64_t rb;
  int new_rs = dp_get_new_rs(s, false);
  size_t n;
  dp_scale(s, new_rs);
  if (s->d->paused && !rollback_to(s->d, &rb))
    dp_cleanup(s);
  n = dp_all_of(s, new_rs, all);
  dp_sync_status(s, all, n, new_rs);
}

static bool scaling_event(struct dp_sync *s, int *all) {
  int new_rs = dp_get_new_rs(s, false);
  size_t n = dp_all_of(s, new_rs, all), i;
  n = dp_filter_active(s, all, n, all);
  for (i = 0; i < n; i++) {
    int32_t desired;
    if (dp_int_annotation(view(s, all[i]), KCM_DEPLOYMENT_DESIRED, &desired) &&
        desired != s->d->replicas)
      return true;
  }
  return false;
}

/* Upstream's cleanupUnhealthyReplicas and scaleDownOldReplicaSetsForRollingUpdate
 * over old, oldest first; spec holds their sizes as this sync leaves them. */
static int64_t scale_down_old(struct dp_sync *s, int new_rs, int *old, int32_t *spec, size_t nold,
                              int64_t max_scaled_down, bool *failed) {
  const struct kcm_deployment *d = s->d;
  int64_t cleaned = 0, scaled = 0, min_available, target, available; /* sums of int32s */
  size_t i;

  for (i = 0; i < nold && cleaned < max_scaled_down; i++) {
    int64_t avail = status_available(view(s, old[i])), n;
    if (spec[i] == 0 || spec[i] == avail)
      continue;
    n = max_scaled_down - cleaned < spec[i] - avail ? max_scaled_down - cleaned : spec[i] - avail;
    if (n < 0) {
      *failed = true; /* upstream: "invalid request to scale down"; the pass ends */
      return cleaned;
    }
    dp_scale_to(s, old[i], spec[i], kcm_deployment_clamp32(spec[i] - n));
    spec[i] = kcm_deployment_clamp32(spec[i] - n);
    cleaned += n;
  }
  /* Availability counts the active old ReplicaSets and the new one. */
  min_available = d->replicas - kcm_deployment_max_unavailable(d);
  available = status_available(view(s, new_rs));
  for (i = 0; i < nold; i++)
    available += status_available(view(s, old[i]));
  if (available <= min_available)
    return cleaned;
  target = available - min_available;
  for (i = 0; i < nold && scaled < target; i++) {
    int32_t n;
    if (spec[i] == 0)
      continue;
    n = spec[i] < target - scaled ? spec[i] : (int32_t)(target - scaled);
    dp_scale_to(s, old[i], spec[i], spec[i] - n);
    scaled += n;
  }
  return cleaned + scaled;
}

/* Upstream's reconcileOldReplicaSets. Scale-downs that fail are not errors
 * (upstream ignores them): their steps are lenient. */
static bool reconcile_old(struct dp_sync *s, const int *all, size_t nall, int new_rs) {
  const struct kcm_deployment *d = s->d;
  const struct kcm_deployment_rs *nr = view(s, new_rs);
  int *old = malloc((s->nold + 1) * sizeof(*old));
  int32_t *spec = malloc((s->nold + 1) * sizeof(*spec));
  int64_t max_scaled_down;
  size_t nold, i, first = s->p->nsteps;
  bool failed = false;
  int64_t total;

  if (!old || !spec) {
    free(old);
    free(spec);
    nomem(s);
    return false;
  }
  nold = dp_filter_active(s, s->old, s->nold, old);
  dp_sort(s, old, nold, by_creation);
  for (i = 0; i < nold; i++)
    spec[i] = view(s, old[i])->replicas;
  if (s->err || nold == 0 || dp_sum_spec(s, old, nold) == 0) {
    free(old);
    free(spec);
    return false;
  }
  max_scaled_down = dp_sum_spec(s, all, nall) - (d->replicas - kcm_deployment_max_unavailable(d)) -
                    ((int64_t)nr->replicas - status_available(nr));
  if (max_scaled_down <= 0) {
    free(old);
    free(spec);
    return false;
  }
  s->group++;
  total = scale_down_old(s, new_rs, old, spec, nold, max_scaled_down, &failed);
  for (i = first; i < s->p->nsteps; i++)
    s->p->steps[i].lenient = true;
  free(old);
  free(spec);
  return !failed && total > 0;
}

/* Upstream's rolloutRolling. */
static void rollout_rolling(struct dp_sync *s, int *all) {
  const struct kcm_deployment *d = s->d;
  int new_rs = dp_get_new_rs(s, true);
  size_t n;
  const struct kcm_deployment_rs *nr;
  bool complete = dp_deployment_complete(d, s->st);

  if (s->err || new_rs < 0)
    return;
  n = dp_all_of(s, new_rs, all);
  nr = view(s, new_rs);
  s->group++;
  if (nr->replicas != d->replicas) {
    int32_t to = nr->replicas > d->replicas ? d->replicas : dp_new_rs_replicas(s, all, n, new_rs);
    if (dp_scale_to(s, new_rs, nr->replicas, to)) {
      dp_sync_rollout_status(s, all, n, new_rs);
      return;
    }
  }
  if (reconcile_old(s, all, n, new_rs)) {
    dp_sync_rollout_status(s, all, n, new_rs);
    return;
  }
  if (complete)
    dp_cleanup(s);
  dp_sync_rollout_status(s, all, n, new_rs);
}

/* Upstream's oldPodsRunning. */
static bool old_pods_running(struct dp_sync *s, int new_rs) {
  size_t i;
  for (i = 0; i < s->nold; i++)
    if (status_replicas(view(s, s->old[i])) > 0)
      return true;
  if (!s->in->pods_running)
    return false;
  for (i = 0; i < s->p->nrs; i++) {
    const struct kcm_deployment_rs *r = view(s, (int)i);
    if ((int)i != new_rs && r->rs && s->in->pods_running(s->in->ctx, r->rs))
      return true;
  }
  return false;
}

/* Upstream's rolloutRecreate. */
static void rollout_recreate(struct dp_sync *s, int *all) {
  const struct kcm_deployment *d = s->d;
  int new_rs = dp_get_new_rs(s, false);
  size_t n = dp_all_of(s, new_rs, all), i;
  bool scaled = false, complete = dp_deployment_complete(d, s->st);

  s->group++;
  for (i = 0; i < s->nold; i++) {
    const struct kcm_deployment_rs *r = view(s, s->old[i]);
    if (r->replicas != 0)
      scaled |= dp_scale_to(s, s->old[i], r->replicas, 0);
  }
  if (scaled || old_pods_running(s, new_rs)) {
    dp_sync_rollout_status(s, all, n, new_rs);
    return;
  }
  if (new_rs < 0) {
    new_rs = dp_get_new_rs(s, true);
    if (s->err || new_rs < 0)
      return;
    n = dp_all_of(s, new_rs, all);
  }
  dp_scale_to(s, new_rs, view(s, new_rs)->replicas, d->replicas);
  if (complete)
    dp_cleanup(s);
  dp_sync_rollout_status(s, all, n, new_rs);
}

/* Upstream's checkPausedConditions. */
static void check_paused(struct dp_sync *s) {
  const struct kcm_deployment *d = s->d;
  bool paused_cond;
  if (!has_deadline(d) || dp_reason_is(&s->st->conditions, PROGRESSING, TIMED_OUT))
    return;
  paused_cond = dp_reason_is(&s->st->conditions, PROGRESSING, PAUSED);
  if (d->paused && !paused_cond)
    dp_new_condition(s, &s->st->conditions, PROGRESSING, "Unknown", PAUSED, "Deployment is paused");
  else if (!d->paused && paused_cond)
    dp_new_condition(s, &s->st->conditions, PROGRESSING, "Unknown", "DeploymentResumed",
                  "Deployment is resumed");
}

/* --- claiming ------------------------------------------------------------------------------- */

static int add_view(struct kcm_deployment_plan *p, const struct kcm_replicaset *rs) {
  struct kcm_deployment_rs *grown = kcm_buf_grow_items(p->rs, p->nrs, sizeof(*grown)), *r;
  if (!grown)
    return KCM_ENOMEM;
  p->rs = grown;
  r = &p->rs[p->nrs];
  memset(r, 0, sizeof(*r));
  r->rs = rs;
  r->created = rs->o.created;
  r->replicas = rs->replicas;
  r->min_ready_seconds = rs->min_ready_seconds;
  if (!(r->name = strdup(rs->o.name)) || kcm_api_pairs_copy(&r->annotations, &rs->annotations)) {
    free(r->name);
    return KCM_ENOMEM;
  }
  p->nrs++;
  return 0;
}

/* Upstream's ClaimReplicaSets: owned and matching, or orphans it adopts;
 * owned ones that stop matching are released. */
static int claim(const struct kcm_deployment_input *in, struct kcm_deployment_plan *p) {
  const struct kcm_deployment *d = in->d;
  bool deleting = d->o.deleted != 0;
  size_t i;
  int err = 0;

  for (i = 0; !err && i < in->ncandidates; i++) {
    struct kcm_replicaset *rs = in->candidates[i];
    bool matches;
    if (strcmp(rs->o.ns, d->o.ns) != 0)
      continue;
    matches = kcm_labels_matches(&d->selector, &rs->o.labels);
    if (rs->o.has_controller) {
      if (!kcm_api_uid_equal(&rs->o.controller.uid, &d->o.uid))
        continue;
      if (matches)
        err = add_view(p, rs);
      else if (!deleting)
        err = KCM_BUF_PUSH(p->release, p->nrelease, rs);
      continue;
    }
    if (deleting || !matches || rs->o.deleted)
      continue;
    if (!(err = KCM_BUF_PUSH(p->adopt, p->nadopt, rs)))
      err = add_view(p, rs);
  }
  return err;
}

/* The claims' steps: the recheck before adopting, then every claim at once. */
static void add_claims(struct dp_sync *s) {
  const struct kcm_deployment_plan *p = s->p;
  struct kcm_deployment_step *st;
  uint32_t wave;
  size_t i;
  if (p->nadopt)
    dp_add_step(s, KCM_DEPLOYMENT_STEP_RECHECK);
  wave = s->wave + 1;
  for (i = 0; i < p->nadopt + p->nrelease; i++) {
    bool adopt = i < p->nadopt;
    if (!(st = dp_add_step(s, adopt ? KCM_DEPLOYMENT_STEP_ADOPT : KCM_DEPLOYMENT_STEP_RELEASE)))
      return;
    st->rs = (int32_t)(adopt ? i : i - p->nadopt);
    st->at.wave = wave;
  }
  s->wave = wave;
  s->group++;
}

/* --- the plan ------------------------------------------------------------------------------- */

/* Oldest first, as upstream sorts before looking for the new one; true
 * (the plan failed) when memory is short. */
static bool sort_oldest_first(struct dp_sync *s) {
  struct kcm_deployment_plan *out = s->p;
  int *idx = malloc((out->nrs + 1) * sizeof(*idx));
  struct kcm_deployment_rs *sorted = malloc((out->nrs + 1) * sizeof(*sorted));
  size_t i;
  if (!idx || !sorted) {
    free(idx);
    free(sorted);
    nomem(s);
    return true;
  }
  for (i = 0; i < out->nrs; i++)
    idx[i] = (int)i;
  dp_sort(s, idx, out->nrs, by_creation);
  for (i = 0; i < out->nrs; i++)
    sorted[i] = out->rs[idx[i]];
  if (out->nrs)
    memcpy(out->rs, sorted, out->nrs * sizeof(*sorted));
  free(idx);
  free(sorted);
  return false;
}

/* A last status write that only reports progress, within the interval of
 * the Deployment's last one, is left out (see kcm_deployment_plan). */
static void pace_status(const struct kcm_deployment_input *in, struct kcm_deployment_plan *p) {
  struct kcm_deployment_step *last = p->nsteps ? &p->steps[p->nsteps - 1] : NULL;
  size_t i;
  if (!in->status_wait_ms || !last || last->op != KCM_DEPLOYMENT_STEP_STATUS ||
      !kcm_deployment_status_progress(in->d, p))
    return;
  for (i = 0; i + 1 < p->nsteps; i++)
    if (p->steps[i].op == KCM_DEPLOYMENT_STEP_ROLLBACK)
      return;
  kcm_api_pairs_release(&last->annotations);
  kcm_api_conditions_release(&last->conditions);
  free(last->message);
  p->nsteps--;
  p->paced_ms = in->status_wait_ms;
}

int kcm_deployment_plan(const struct kcm_deployment_input *in, struct kcm_deployment_plan *out) {
  const struct kcm_deployment *d = in->d;
  struct dp_sync s;
  int *all = NULL;
  int64_t target;
  int err;

  memset(out, 0, sizeof(*out));
  out->new_rs = -1;
  out->requeue_after_ms = -1;
  out->terminating = -1;
  memset(&s, 0, sizeof(s));
  s.in = in;
  s.d = d;
  s.p = out;
  s.st = &out->status;
  s.now_s = (int64_t)(in->now_ms / 1000);
  dp_cached_status(d, &out->status);
  if (in->terminating_kept <= 0)
    out->status.terminating = KCM_DEPLOYMENT_UNWRITTEN;
  if (kcm_api_conditions_copy(&out->status.conditions, &d->status.conditions))
    return KCM_ENOMEM;

  if (d->selector.nothing) {
    out->invalid = true;
    return 0;
  }
  if (kcm_labels_selector_empty(&d->selector)) {
    dp_event(&s, true, "SelectingAll",
          "This deployment is selecting all pods. A non-empty selector is required.");
    if (out->status.observed_generation < d->o.generation) {
      out->status.observed_generation = d->o.generation;
      dp_write_status(&s, true);
    }
    goto done;
  }
  if ((err = claim(in, out))) {
    kcm_deployment_plan_release(out);
    return err;
  }
  add_claims(&s);
  s.old = malloc((out->nrs + 1) * sizeof(*s.old));
  all = malloc((out->nrs + 2) * sizeof(*all));
  if (!s.old || !all) {
    nomem(&s);
    goto done;
  }
  if (sort_oldest_first(&s))
    goto done;
  if (d->o.deleted) {
    int new_rs = dp_get_new_rs(&s, false);
    dp_sync_status(&s, all, dp_all_of(&s, new_rs, all), new_rs);
  } else {
    check_paused(&s);
    if (d->paused)
      sync_scale(&s, all);
    else if (rollback_to(d, &target)) {
      dp_rollback(&s, all, target);
      goto done;
    } else if (scaling_event(&s, all))
      sync_scale(&s, all);
    else if (d->recreate)
      rollout_recreate(&s, all);
    else
      rollout_rolling(&s, all);
  }
  dp_write_status(&s, false);
done:
  free(s.old);
  free(all);
  if (s.err) {
    kcm_deployment_plan_release(out);
    return s.err;
  }
  pace_status(in, out);
  return 0;
}

void kcm_deployment_plan_release(struct kcm_deployment_plan *p) {
  size_t i;
  for (i = 0; i < p->nrs; i++) {
    free(p->rs[i].name);
    kcm_api_pairs_release(&p->rs[i].annotations);
  }
  for (i = 0; i < p->nsteps; i++) {
    kcm_api_pairs_release(&p->steps[i].annotations);
    kcm_api_conditions_release(&p->steps[i].conditions);
    free(p->steps[i].message);
  }
  free(p->rs);
  free(p->steps);
  free(p->adopt);
  free(p->release);
  free(p->create_body);
  free(p->revision);
  free(p->rollback_ops);
  dp_status_release(&p->status);
  memset(p, 0, sizeof(*p));
  p->new_rs = -1;
  p->requeue_after_ms = -1;
}

/* Whether the plan writes another revision annotation than d has. */
static bool revision_changes(const struct kcm_deployment *d, const struct kcm_deployment_plan *p) {
  const char *rev = kcm_api_pairs_get(&d->annotations, KCM_DEPLOYMENT_REVISION);
  return p->revision && (!rev || strcmp(rev, p->revision));
}

bool kcm_deployment_status_changed(const struct kcm_deployment *d,
                                   const struct kcm_deployment_plan *p) {
  struct kcm_deployment_status cached;
  if (revision_changes(d, p))
    return true;
  dp_cached_status(d, &cached);
  return !dp_status_equal(&p->status, &cached);
}

/* Whether a and b hold the same conditions, in any order, but for the
 * Progressing one's lastUpdateTime, which every sync that sees progress
 * moves (and moves the condition to the end). */
static bool conditions_same_but_progress_time(const struct kcm_conditions *a,
                                              const struct kcm_conditions *b) {
  uint32_t i;
  if (a->n != b->n)
    return false;
  for (i = 0; i < a->n; i++) {
    struct kcm_condition x = a->items[i], y;
    const struct kcm_condition *match = kcm_api_condition_get(b, x.type);
    struct kcm_conditions one = {&x, 1}, other = {&y, 1};
    if (!x.type || !match)
      return false;
    y = *match;
    if (!strcmp(x.type, PROGRESSING))
      x.last_update = y.last_update;
    if (!kcm_api_conditions_equal(&one, &other))
      return false;
  }
  return true;
}

bool kcm_deployment_status_progress(const struct kcm_deployment *d,
                                    const struct kcm_deployment_plan *p) {
  struct kcm_deployment_status cached;
  if (revision_changes(d, p))
    return false;
  dp_cached_status(d, &cached);
  if (p->status.observed_generation != cached.observed_generation ||
      p->status.collision_count != cached.collision_count ||
      !conditions_same_but_progress_time(&p->status.conditions, &cached.conditions))
    return false;
  if (!dp_deployment_complete(d, &cached) && !dp_deployment_complete(d, &p->status))
    return true;
  /* complete, and only fewer of the old pods left terminating, some still */
  return dp_deployment_complete(d, &cached) && dp_deployment_complete(d, &p->status) &&
         p->status.ready == cached.ready && p->status.unavailable == cached.unavailable &&
         p->status.terminating > 0 && p->status.terminating < cached.terminating;
}
