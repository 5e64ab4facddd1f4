/*
 * controllers/deployment/plan.c — one Deployment sync as a pure function:
 * the cached Deployment and ReplicaSets in, the steps to send out, in
 * upstream's order (syncDeployment, getNewReplicaSet, scale, rolloutRolling,
 * rolloutRecreate, cleanupDeployment, syncRolloutStatus, rollback). See
 * include/kcm/deployment.h.
 *
 * Where upstream keeps using an object it has just written, the plan does
 * the same with its view of that ReplicaSet (struct kcm_dp_rs); where
 * upstream goes on with the copy it read from the cache, so does the plan.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/deployment.h"
#include "kcm/error.h"

#define PROGRESSING "Progressing"
#define AVAILABLE "Available"
#define REPLICA_FAILURE "ReplicaFailure"
#define TIMED_OUT "ProgressDeadlineExceeded"
#define NEW_RS_AVAILABLE "NewReplicaSetAvailable"
#define PAUSED "DeploymentPaused"

/* The state of one sync: the plan being built and the Deployment's status
 * and revision annotation as the sync has changed them so far. */
struct sync {
  const struct kcm_dp_input *in;
  const struct kcm_deployment *d;
  struct kcm_dp_plan *p;
  struct kcm_dp_status *st;
  int *old;          /* indexes of the old ReplicaSets */
  size_t nold;
  int64_t now_s;
  uint32_t group;
  int err;
};

/* --- small helpers --------------------------------------------------------------------- */

static struct kcm_dp_rs *view(struct sync *s, int i) { return &s->p->rs[i]; }

static int32_t status_replicas(const struct kcm_dp_rs *r) {
  return r->rs ? r->rs->status.replicas : 0;
}
static int32_t status_ready(const struct kcm_dp_rs *r) { return r->rs ? r->rs->status.ready : 0; }
static int32_t status_available(const struct kcm_dp_rs *r) {
  return r->rs ? r->rs->status.available : 0;
}

static bool has_deadline(const struct kcm_deployment *d) {
  return d->progress_deadline >= 0 && d->progress_deadline != INT32_MAX;
}

static bool has_history_limit(const struct kcm_deployment *d) {
  return d->revision_history_limit >= 0 && d->revision_history_limit != INT32_MAX;
}

/* The deprecated.deployment.rollback.to revision, when it parses. */
static bool rollback_to(const struct kcm_deployment *d, int64_t *rev) {
  const char *v = kcm_api_pairs_get(&d->annotations, KCM_DEPLOYMENT_ROLLBACK_TO);
  return v && *v && kcm_deployment_parse_int(v, rev);
}

/* An annotation read as upstream's strconv.Atoi into an int32. */
static bool int_annotation(const struct kcm_dp_rs *r, const char *key, int32_t *out) {
  int64_t v;
  if (!kcm_deployment_parse_int(kcm_api_pairs_get(&r->annotations, key), &v))
    return false;
  *out = (int32_t)v;
  return true;
}

static void nomem(struct sync *s) { s->err = KCM_ENOMEM; }

/* A condition built from constant strings; set_condition() copies it. */
static char *mut(const char *s) { return (char *)(uintptr_t)s; }

static struct kcm_dp_step *add_step(struct sync *s, enum kcm_dp_op op) {
  struct kcm_dp_step *grown;
  if (s->err)
    return NULL;
  grown = realloc(s->p->steps, (s->p->nsteps + 1) * sizeof(*grown));
  if (!grown) {
    nomem(s);
    return NULL;
  }
  s->p->steps = grown;
  grown = &s->p->steps[s->p->nsteps++];
  memset(grown, 0, sizeof(*grown));
  grown->op = op;
  grown->rs = -1;
  grown->group = s->group;
  return grown;
}

static void set_message(struct sync *s, struct kcm_dp_step *st, const char *reason, bool warning,
                        const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void set_message(struct sync *s, struct kcm_dp_step *st, const char *reason, bool warning,
                        const char *fmt, ...) {
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

static int64_t sum_spec(struct sync *s, const int *l, size_t n) {
  int64_t t = 0;
  size_t i;
  for (i = 0; i < n; i++)
    t += view(s, l[i])->replicas;
  return t;
}

/* The active ReplicaSets (spec.replicas > 0) of l into out. */
static size_t filter_active(struct sync *s, const int *l, size_t n, int *out) {
  size_t i, k = 0;
  for (i = 0; i < n; i++)
    if (l[i] >= 0 && view(s, l[i])->replicas > 0)
      out[k++] = l[i];
  return k;
}

/* --- orders ------------------------------------------------------------------------------ */

typedef bool (*less_fn)(struct sync *s, int a, int b);

/* Insertion sort: lists are short, and some orders are not total. */
static void sort(struct sync *s, int *l, size_t n, less_fn less) {
  size_t i, j;
  for (i = 1; i < n; i++) {
    int x = l[i];
    for (j = i; j > 0 && less(s, x, l[j - 1]); j--)
      l[j] = l[j - 1];
    l[j] = x;
  }
}

static bool by_creation(struct sync *s, int a, int b) {
  const struct kcm_dp_rs *x = view(s, a), *y = view(s, b);
  if (x->created == y->created)
    return strcmp(x->name, y->name) < 0;
  return x->created < y->created;
}

static bool by_creation_newest(struct sync *s, int a, int b) { return by_creation(s, b, a); }

static bool by_size_older(struct sync *s, int a, int b) {
  if (view(s, a)->replicas == view(s, b)->replicas)
    return by_creation(s, a, b);
  return view(s, a)->replicas > view(s, b)->replicas;
}

static bool by_size_newer(struct sync *s, int a, int b) {
  if (view(s, a)->replicas == view(s, b)->replicas)
    return by_creation(s, b, a);
  return view(s, a)->replicas > view(s, b)->replicas;
}

static bool by_revision(struct sync *s, int a, int b) {
  int64_t ra, rb;
  if (!kcm_deployment_revision_of(&view(s, a)->annotations, &ra) ||
      !kcm_deployment_revision_of(&view(s, b)->annotations, &rb) || ra == rb)
    return by_creation(s, a, b);
  return ra < rb;
}

/* --- conditions --------------------------------------------------------------------------- */

/* Upstream's SetDeploymentCondition: nothing changes when status and reason
 * are the same; the transition time stays when only the reason changes;
 * the condition moves to the end. */
static void set_condition(struct sync *s, struct kcm_conditions *c, const struct kcm_condition *n) {
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

static void new_condition(struct sync *s, struct kcm_conditions *c, const char *type,
                          const char *status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void new_condition(struct sync *s, struct kcm_conditions *c, const char *type,
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
  set_condition(s, c, &n);
  free(n.message);
}

static const char *reason_of(const struct kcm_conditions *c, const char *type) {
  const struct kcm_condition *k = kcm_api_condition_get(c, type);
  return k && k->reason ? k->reason : NULL;
}

static bool reason_is(const struct kcm_conditions *c, const char *type, const char *reason) {
  const char *r = reason_of(c, type);
  return r && !strcmp(r, reason);
}

/* --- annotations -------------------------------------------------------------------------- */

static bool skip_annotation(const char *key) {
  return !strcmp(key, KCM_API_LAST_APPLIED) || !strcmp(key, KCM_DEPLOYMENT_REVISION) ||
         !strcmp(key, KCM_DEPLOYMENT_REVISION_HISTORY) || !strcmp(key, KCM_DEPLOYMENT_DESIRED) ||
         !strcmp(key, KCM_DEPLOYMENT_MAX) || !strcmp(key, KCM_DEPLOYMENT_ROLLBACK_TO);
}

static bool set_annotation(struct sync *s, struct kcm_pairs *a, const char *key, const char *v) {
  const char *have = kcm_api_pairs_get(a, key);
  if (have && !strcmp(have, v))
    return false;
  if (kcm_api_pairs_set(a, key, v))
    nomem(s);
  return true;
}

static bool set_replicas_annotations(struct sync *s, struct kcm_pairs *a) {
  char desired[16], max[16];
  bool changed;
  snprintf(desired, sizeof(desired), "%d", s->d->replicas);
  snprintf(max, sizeof(max), "%d", s->d->replicas + kcm_deployment_max_surge(s->d));
  changed = set_annotation(s, a, KCM_DEPLOYMENT_DESIRED, desired);
  return set_annotation(s, a, KCM_DEPLOYMENT_MAX, max) || changed;
}

static bool replicas_annotations_need_update(struct sync *s, const struct kcm_pairs *a) {
  char desired[16], max[16];
  const char *hd = kcm_api_pairs_get(a, KCM_DEPLOYMENT_DESIRED);
  const char *hm = kcm_api_pairs_get(a, KCM_DEPLOYMENT_MAX);
  snprintf(desired, sizeof(desired), "%d", s->d->replicas);
  snprintf(max, sizeof(max), "%d", s->d->replicas + kcm_deployment_max_surge(s->d));
  return !hd || strcmp(hd, desired) || !hm || strcmp(hm, max);
}

/* Append old to the revision history, dropping the oldest entries past
 * the length limit (upstream's SetNewReplicaSetAnnotations). */
static void append_history(struct sync *s, struct kcm_pairs *a, const char *old) {
  const char *hist = kcm_api_pairs_get(a, KCM_DEPLOYMENT_REVISION_HISTORY);
  size_t total;
  const char *start;
  char *joined;

  if (!hist || !*hist || hist[0] == ',') {
    set_annotation(s, a, KCM_DEPLOYMENT_REVISION_HISTORY, old);
    return;
  }
  total = strlen(hist) + strlen(old) + 1;
  start = hist;
  while (total > KCM_DEPLOYMENT_HISTORY_CHARS && start) {
    const char *comma = strchr(start, ',');
    size_t part = comma ? (size_t)(comma - start) : strlen(start);
    total -= part + 1;
    start = comma ? comma + 1 : NULL;
  }
  if (total > KCM_DEPLOYMENT_HISTORY_CHARS)
    return; /* does not fit even alone: upstream only logs */
  if (asprintf(&joined, "%s%s%s", start ? start : "", start ? "," : "", old) < 0) {
    nomem(s);
    return;
  }
  set_annotation(s, a, KCM_DEPLOYMENT_REVISION_HISTORY, joined);
  free(joined);
}

/* Upstream's SetNewReplicaSetAnnotations on a view; true when it changed. */
static bool set_new_rs_annotations(struct sync *s, struct kcm_dp_rs *r, int64_t new_rev,
                                   bool exists) {
  const struct kcm_pairs *da = &s->d->annotations;
  const char *old;
  int64_t old_rev = 0;
  bool changed = false, had;
  char buf[24];
  uint32_t i;

  for (i = 0; i < da->n; i++)
    if (!skip_annotation(da->items[i].key))
      changed |= set_annotation(s, &r->annotations, da->items[i].key, da->items[i].value);
  old = kcm_api_pairs_get(&r->annotations, KCM_DEPLOYMENT_REVISION);
  had = old != NULL;
  if (had && !kcm_deployment_parse_int(old, &old_rev)) {
    if (*old)
      return false; /* not a number: left alone, as upstream does */
    old_rev = 0;
  }
  if (old_rev < new_rev) {
    char *prev = had ? strdup(old) : NULL;
    if (had && !prev) {
      nomem(s);
      return changed;
    }
    snprintf(buf, sizeof(buf), "%lld", (long long)new_rev);
    set_annotation(s, &r->annotations, KCM_DEPLOYMENT_REVISION, buf);
    changed = true;
    if (had)
      append_history(s, &r->annotations, prev);
    free(prev);
  }
  if (!exists && set_replicas_annotations(s, &r->annotations))
    changed = true;
  return changed;
}

/* Upstream's SetDeploymentRevision. */
static bool set_deployment_revision(struct sync *s, const char *rev) {
  const char *have = s->p->revision ? s->p->revision
                                    : kcm_api_pairs_get(&s->d->annotations,
                                                        KCM_DEPLOYMENT_REVISION);
  char *copy;
  if (have && !strcmp(have, rev))
    return false;
  if (!(copy = strdup(rev))) {
    nomem(s);
    return false;
  }
  free(s->p->revision);
  s->p->revision = copy;
  return true;
}

/* --- writes to ReplicaSets ------------------------------------------------------------------- */

/* A ReplicaSet update carrying the view's annotations and minReadySeconds. */
static struct kcm_dp_step *update_step(struct sync *s, int i, int32_t from, int32_t to,
                                       const struct kcm_pairs *annotations) {
  struct kcm_dp_step *st = add_step(s, KCM_DP_SCALE);
  if (!st)
    return NULL;
  st->rs = i;
  st->old_replicas = from;
  st->replicas = to;
  st->min_ready_seconds = view(s, i)->min_ready_seconds;
  if (kcm_api_pairs_copy(&st->annotations, annotations))
    nomem(s);
  return st;
}

/* Upstream's scaleReplicaSet: write when the size or the desired/max
 * annotations change; an event when the size did. The view is not
 * changed (upstream goes on with the object it had). */
static bool scale_rs(struct sync *s, int i, int32_t from, int32_t to, const char *op) {
  struct kcm_dp_rs *r = view(s, i);
  struct kcm_pairs a;
  struct kcm_dp_step *st;
  bool resize = from != to;

  if (!resize && !replicas_annotations_need_update(s, &r->annotations))
    return false;
  if (kcm_api_pairs_copy(&a, &r->annotations)) {
    nomem(s);
    return false;
  }
  set_replicas_annotations(s, &a);
  st = update_step(s, i, from, to, &a);
  kcm_api_pairs_release(&a);
  if (resize)
    set_message(s, st, "ScalingReplicaSet", false, "Scaled %s replica set %s from %d to %d", op,
                r->name, from, to);
  return resize;
}

/* Upstream's scaleReplicaSetAndRecordEvent: nothing when the size is right. */
static bool scale_to(struct sync *s, int i, int32_t from, int32_t to) {
  if (from == to)
    return false;
  return scale_rs(s, i, from, to, from < to ? "up" : "down");
}

/* --- the new ReplicaSet ---------------------------------------------------------------------- */

static bool template_of_equal(struct sync *s, const struct kcm_dp_rs *r) {
  const struct kcm_dp_alias *al = s->in->alias;
  if (!r->rs)
    return true; /* made from the Deployment's template in this sync */
  if (r->rs->template_key == s->d->template_key &&
      kcm_api_template_equal(r->rs->template, s->d->template))
    return true;
  return al && al->template_key == s->d->template_key &&
         kcm_api_uid_equal(&al->rs_uid, &r->rs->o.uid) &&
         al->rs_template_key == r->rs->template_key;
}

/* The oldest ReplicaSet whose template is the Deployment's; the others are
 * old, oldest first. */
static int find_new(struct sync *s) {
  size_t i;
  int found = s->p->new_rs >= 0 && !view(s, s->p->new_rs)->rs ? s->p->new_rs : -1;
  for (i = 0; i < s->p->nrs && found < 0; i++)
    if (view(s, (int)i)->rs && template_of_equal(s, view(s, (int)i)))
      found = (int)i;
  s->nold = 0;
  for (i = 0; i < s->p->nrs; i++)
    if ((int)i != found && view(s, (int)i)->rs)
      s->old[s->nold++] = (int)i;
  return found;
}

static int64_t max_revision(struct sync *s) {
  int64_t max = 0, v;
  size_t i;
  for (i = 0; i < s->nold; i++)
    if (kcm_deployment_revision_of(&view(s, s->old[i])->annotations, &v) && v > max)
      max = v;
  return max;
}

/* Upstream's NewRSNewReplicas: the new ReplicaSet's size within the surge. */
static int32_t new_rs_replicas(struct sync *s, const int *all, size_t n, int new_rs) {
  const struct kcm_deployment *d = s->d;
  int32_t surge, cur_new = view(s, new_rs)->replicas;
  int64_t current, max_total, up;
  if (d->recreate)
    return d->replicas;
  surge = kcm_deployment_scaled(&d->max_surge, d->replicas, true);
  current = sum_spec(s, all, n);
  max_total = (int64_t)d->replicas + surge;
  if (current >= max_total)
    return cur_new;
  up = max_total - current;
  if (up > (int64_t)d->replicas - cur_new)
    up = (int64_t)d->replicas - cur_new;
  return (int32_t)(cur_new + up);
}

static int build_create_body(struct sync *s, const struct kcm_dp_rs *r, const char *hash) {
  const struct kcm_deployment *d = s->d;
  struct json_object *rs = json_object_new_object(), *meta = json_object_new_object();
  struct json_object *spec = json_object_new_object(), *ann = json_object_new_object();
  struct json_object *tmpl = json_tokener_parse(d->template);
  struct json_object *sel = d->selector_json ? json_tokener_parse(d->selector_json) : NULL;
  struct json_object *tmeta, *labels, *ref, *refs, *ml, *rslabels = NULL;
  char uid[37];
  uint32_t i;
  int err = 0;

  if (!tmpl || !json_object_is_type(tmpl, json_type_object) || !sel ||
      !json_object_is_type(sel, json_type_object)) {
    err = KCM_EINVAL;
    goto out;
  }
  /* Template labels and selector get the hash; the ReplicaSet's labels are
   * the template's. */
  if (!json_object_object_get_ex(tmpl, "metadata", &tmeta) || !tmeta) {
    tmeta = json_object_new_object();
    json_object_object_add(tmpl, "metadata", tmeta);
  }
  if (!json_object_object_get_ex(tmeta, "labels", &labels) || !labels) {
    labels = json_object_new_object();
    json_object_object_add(tmeta, "labels", labels);
  }
  json_object_object_add(labels, KCM_API_HASH_LABEL, json_object_new_string(hash));
  if (!json_object_object_get_ex(sel, "matchLabels", &ml) || !ml) {
    ml = json_object_new_object();
    json_object_object_add(sel, "matchLabels", ml);
  }
  json_object_object_add(ml, KCM_API_HASH_LABEL, json_object_new_string(hash));
  json_object_deep_copy(labels, &rslabels, NULL);

  json_object_object_add(rs, "apiVersion", json_object_new_string("apps/v1"));
  json_object_object_add(rs, "kind", json_object_new_string("ReplicaSet"));
  json_object_object_add(meta, "name", json_object_new_string(r->name));
  json_object_object_add(meta, "namespace", json_object_new_string(d->o.ns));
  json_object_object_add(meta, "labels", rslabels);
  for (i = 0; i < r->annotations.n; i++)
    json_object_object_add(ann, r->annotations.items[i].key,
                           json_object_new_string(r->annotations.items[i].value));
  json_object_object_add(meta, "annotations", ann);
  ann = NULL;
  kcm_api_format_uid(&d->o.uid, uid, sizeof(uid));
  ref = json_object_new_object();
  json_object_object_add(ref, "apiVersion", json_object_new_string("apps/v1"));
  json_object_object_add(ref, "kind", json_object_new_string("Deployment"));
  json_object_object_add(ref, "name", json_object_new_string(d->o.name));
  json_object_object_add(ref, "uid", json_object_new_string(uid));
  json_object_object_add(ref, "controller", json_object_new_boolean(1));
  json_object_object_add(ref, "blockOwnerDeletion", json_object_new_boolean(1));
  refs = json_object_new_array();
  json_object_array_add(refs, ref);
  json_object_object_add(meta, "ownerReferences", refs);
  json_object_object_add(rs, "metadata", meta);
  meta = NULL;
  json_object_object_add(spec, "replicas", json_object_new_int(r->replicas));
  json_object_object_add(spec, "minReadySeconds", json_object_new_int(r->min_ready_seconds));
  json_object_object_add(spec, "selector", sel);
  json_object_object_add(spec, "template", tmpl);
  sel = tmpl = NULL;
  json_object_object_add(rs, "spec", spec);
  spec = NULL;
  s->p->create_body = strdup(
      json_object_to_json_string_ext(rs, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
  if (!s->p->create_body)
    err = KCM_ENOMEM;
out:
  json_object_put(rs);
  json_object_put(meta);
  json_object_put(spec);
  json_object_put(ann);
  json_object_put(tmpl);
  json_object_put(sel);
  return err;
}

/* Upstream's getNewReplicaSet (with getAllReplicaSetsAndSyncRevision):
 * find the new ReplicaSet and bring its revision and annotations up to
 * date, or create it. Returns its index or -1; s->old holds the others. */
static int get_new_rs(struct sync *s, bool create) {
  const struct kcm_deployment *d = s->d;
  int found = find_new(s);
  int64_t new_rev;
  struct kcm_dp_rs *r, *grown;
  struct kcm_dp_step *st;
  char hash[16], rev[24];
  int *all;
  size_t i;

  if (s->err)
    return -1;
  new_rev = max_revision(s) + 1;
  if (found >= 0 && !view(s, found)->rs)
    return found; /* created earlier in this sync */
  if (found >= 0) {
    const char *rs_rev;
    s->p->new_rs = found;
    r = view(s, found);
    if (set_new_rs_annotations(s, r, new_rev, true) ||
        r->min_ready_seconds != d->min_ready_seconds) {
      r->min_ready_seconds = d->min_ready_seconds;
      update_step(s, found, r->replicas, r->replicas, &r->annotations);
      return found; /* the Deployment's revision follows on a later sync */
    }
    rs_rev = kcm_api_pairs_get(&r->annotations, KCM_DEPLOYMENT_REVISION);
    set_deployment_revision(s, rs_rev ? rs_rev : "");
    if (has_deadline(d) && !kcm_api_condition_get(&s->st->conditions, PROGRESSING))
      new_condition(s, &s->st->conditions, PROGRESSING, "True", "FoundNewReplicaSet",
                    "Found new replica set \"%s\"", r->name);
    return found;
  }
  if (!create)
    return -1;

  /* Create it: named after the hash of the template and collision count. */
  grown = realloc(s->p->rs, (s->p->nrs + 1) * sizeof(*grown));
  if (!grown) {
    nomem(s);
    return -1;
  }
  s->p->rs = grown;
  found = (int)s->p->nrs++;
  r = view(s, found);
  memset(r, 0, sizeof(*r));
  kcm_deployment_hash(d->template, s->st->collision_count, hash, sizeof(hash));
  if (asprintf(&r->name, "%s-%s", d->o.name, hash) < 0) {
    r->name = NULL;
    nomem(s);
    return -1;
  }
  r->created = INT64_MAX; /* newer than every existing one */
  r->min_ready_seconds = d->min_ready_seconds;
  all = malloc((s->nold + 1) * sizeof(*all));
  if (!all) {
    nomem(s);
    return -1;
  }
  for (i = 0; i < s->nold; i++)
    all[i] = s->old[i];
  all[s->nold] = found;
  r->replicas = new_rs_replicas(s, all, s->nold + 1, found);
  free(all);
  set_new_rs_annotations(s, r, new_rev, false);
  if (s->err || build_create_body(s, r, hash)) {
    s->err = s->err ? s->err : KCM_EINVAL;
    return -1;
  }
  s->p->new_rs = found;
  st = add_step(s, KCM_DP_CREATE);
  if (st) {
    st->rs = found;
    if (kcm_api_conditions_copy(&st->conditions, &s->st->conditions))
      nomem(s);
    if (r->replicas > 0)
      set_message(s, st, "ScalingReplicaSet", false, "Scaled up replica set %s from 0 to %d",
                  r->name, r->replicas);
  }
  snprintf(rev, sizeof(rev), "%lld", (long long)new_rev);
  set_deployment_revision(s, rev);
  if (has_deadline(d))
    new_condition(s, &s->st->conditions, PROGRESSING, "True", "NewReplicaSetCreated",
                  "Created new replica set \"%s\"", r->name);
  return found;
}

/* --- status --------------------------------------------------------------------------------- */

static bool deployment_complete(const struct kcm_deployment *d, const struct kcm_dp_status *st) {
  return st->updated == d->replicas && st->replicas == d->replicas &&
         st->available == d->replicas && st->observed_generation >= d->o.generation;
}

static bool deployment_progressing(const struct kcm_dp_status *old,
                                   const struct kcm_dp_status *cur) {
  return cur->updated > old->updated ||
         (cur->replicas - cur->updated) < (old->replicas - old->updated) ||
         cur->ready > old->ready || cur->available > old->available;
}

static bool deployment_timed_out(struct sync *s, const struct kcm_dp_status *st) {
  const struct kcm_condition *c = kcm_api_condition_get(&st->conditions, PROGRESSING);
  if (!has_deadline(s->d) || !c)
    return false;
  if (c->reason && !strcmp(c->reason, NEW_RS_AVAILABLE))
    return false;
  if (c->reason && !strcmp(c->reason, TIMED_OUT))
    return true;
  return (c->last_update + s->d->progress_deadline) * 1000 < (int64_t)s->in->now_ms;
}

static void status_release(struct kcm_dp_status *st) {
  kcm_api_conditions_release(&st->conditions);
}

static bool status_equal(const struct kcm_dp_status *a, const struct kcm_dp_status *b) {
  return a->observed_generation == b->observed_generation && a->replicas == b->replicas &&
         a->updated == b->updated && a->ready == b->ready && a->available == b->available &&
         a->unavailable == b->unavailable && a->collision_count == b->collision_count &&
         kcm_api_conditions_equal(&a->conditions, &b->conditions);
}

/* The cached status, borrowing its conditions. */
static void cached_status(const struct kcm_deployment *d, struct kcm_dp_status *out) {
  out->observed_generation = d->status.observed_generation;
  out->replicas = d->status.replicas;
  out->updated = d->status.updated;
  out->ready = d->status.ready;
  out->available = d->status.available;
  out->unavailable = d->status.unavailable;
  out->collision_count = d->status.collision_count;
  out->conditions = d->status.conditions;
}

/* Upstream's calculateStatus over the ReplicaSets in l. */
static void calculate_status(struct sync *s, const int *l, size_t n, int new_rs,
                             struct kcm_dp_status *out) {
  const struct kcm_deployment *d = s->d;
  int64_t spec = 0, available = 0;
  size_t i;

  memset(out, 0, sizeof(*out));
  for (i = 0; i < n; i++) {
    const struct kcm_dp_rs *r = view(s, l[i]);
    spec += r->replicas;
    available += status_available(r);
    out->replicas += status_replicas(r);
    out->ready += status_ready(r);
  }
  out->available = (int32_t)available;
  out->unavailable = spec - available > 0 ? (int32_t)(spec - available) : 0;
  out->updated = new_rs >= 0 ? status_replicas(view(s, new_rs)) : 0;
  out->observed_generation = d->o.generation;
  out->collision_count = s->st->collision_count;
  if (kcm_api_conditions_copy(&out->conditions, &s->st->conditions)) {
    nomem(s);
    return;
  }
  if (available >= (int64_t)d->replicas - kcm_deployment_max_unavailable(d))
    new_condition(s, &out->conditions, AVAILABLE, "True", "MinimumReplicasAvailable",
                  "Deployment has minimum availability.");
  else
    new_condition(s, &out->conditions, AVAILABLE, "False", "MinimumReplicasUnavailable",
                  "Deployment does not have minimum availability.");
}

/* Replace the sync's status with ns (taking its conditions). */
static void adopt_status(struct sync *s, struct kcm_dp_status *ns) {
  status_release(s->st);
  *s->st = *ns;
  memset(ns, 0, sizeof(*ns));
}

/* Upstream's syncDeploymentStatus: the numbers, without progress. */
static void sync_status(struct sync *s, const int *l, size_t n, int new_rs) {
  struct kcm_dp_status ns;
  calculate_status(s, l, n, new_rs, &ns);
  if (s->err) {
    status_release(&ns);
    return;
  }
  adopt_status(s, &ns);
}

/* Upstream's getReplicaFailures: those of the new ReplicaSet, else any. */
static const struct kcm_condition *replica_failure(struct sync *s, const int *l, size_t n,
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
static int64_t requeue_stuck(struct sync *s, const struct kcm_dp_status *ns) {
  const struct kcm_condition *c = kcm_api_condition_get(&s->st->conditions, PROGRESSING);
  int64_t after;
  if (!has_deadline(s->d) || !c)
    return -1;
  if (deployment_complete(s->d, ns) || (c->reason && !strcmp(c->reason, TIMED_OUT)))
    return -1;
  after = (c->last_update + s->d->progress_deadline) * 1000 - (int64_t)s->in->now_ms;
  return after < 1000 ? 0 : after + 1000;
}

/* Upstream's syncRolloutStatus: the numbers and the conditions. */
static void sync_rollout_status(struct sync *s, const int *l, size_t n, int new_rs) {
  const struct kcm_deployment *d = s->d;
  const struct kcm_condition *cur, *fail;
  const char *what = new_rs >= 0 ? "ReplicaSet" : "Deployment";
  const char *name = new_rs >= 0 ? view(s, new_rs)->name : d->o.name;
  struct kcm_dp_status ns;

  calculate_status(s, l, n, new_rs, &ns);
  if (s->err) {
    status_release(&ns);
    return;
  }
  if (!has_deadline(d))
    kcm_api_condition_remove(&ns.conditions, PROGRESSING);
  cur = kcm_api_condition_get(&s->st->conditions, PROGRESSING);
  if (has_deadline(d) && !(ns.replicas == ns.updated && cur && cur->reason &&
                           !strcmp(cur->reason, NEW_RS_AVAILABLE))) {
    if (deployment_complete(d, &ns)) {
      new_condition(s, &ns.conditions, PROGRESSING, "True", NEW_RS_AVAILABLE,
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
        set_condition(s, &ns.conditions, &c);
        free(c.message);
      }
    } else if (deployment_timed_out(s, &ns)) {
      new_condition(s, &ns.conditions, PROGRESSING, "False", TIMED_OUT,
                    "%s \"%s\" has timed out progressing.", what, name);
    }
  }
  if ((fail = replica_failure(s, l, n, new_rs))) {
    struct kcm_condition c = *fail;
    c.last_update = c.last_transition;
    set_condition(s, &ns.conditions, &c);
  } else {
    kcm_api_condition_remove(&ns.conditions, REPLICA_FAILURE);
  }
  if (s->err) {
    status_release(&ns);
    return;
  }
  if (status_equal(s->st, &ns)) {
    s->p->requeue_after_ms = requeue_stuck(s, &ns);
    status_release(&ns);
    return;
  }
  adopt_status(s, &ns);
}

/* The status write, when the sync changed anything the Deployment shows. */
static void write_status(struct sync *s, bool lenient) {
  struct kcm_dp_step *st;
  if (s->err || !kcm_deployment_status_changed(s->d, s->p))
    return;
  s->group++;
  st = add_step(s, KCM_DP_STATUS);
  if (st)
    st->lenient = lenient;
}

/* --- cleanup -------------------------------------------------------------------------------- */

/* Upstream's cleanupDeployment: delete the oldest old ReplicaSets past
 * revisionHistoryLimit that have nothing left. */
static void cleanup(struct sync *s) {
  const struct kcm_deployment *d = s->d;
  int *l;
  size_t i, n = 0;
  int64_t diff;

  if (!has_history_limit(d))
    return;
  l = malloc((s->nold + 1) * sizeof(*l));
  if (!l) {
    nomem(s);
    return;
  }
  for (i = 0; i < s->nold; i++)
    if (view(s, s->old[i])->rs && !view(s, s->old[i])->rs->o.deleted)
      l[n++] = s->old[i];
  diff = (int64_t)n - d->revision_history_limit;
  if (diff > 0) {
    sort(s, l, n, by_revision);
    s->group++;
    for (i = 0; i < (size_t)diff; i++) {
      const struct kcm_dp_rs *r = view(s, l[i]);
      struct kcm_dp_step *st;
      if (r->rs->status.replicas != 0 || r->replicas != 0 ||
          r->rs->o.generation > r->rs->status.observed_generation || r->rs->o.deleted)
        continue;
      if ((st = add_step(s, KCM_DP_DELETE)))
        st->rs = l[i];
    }
  }
  free(l);
}

/* --- scaling ------------------------------------------------------------------------------- */

/* Upstream's getReplicaSetFraction and GetProportion. */
static int32_t proportion(struct sync *s, int i, int32_t to_add, int32_t added) {
  const struct kcm_deployment *d = s->d;
  const struct kcm_dp_rs *r = view(s, i);
  int32_t fraction, annotated, allowed = to_add - added;
  double size;

  if (r->replicas == 0 || to_add == 0 || to_add == added)
    return 0;
  if (d->replicas == 0) {
    fraction = -r->replicas;
  } else {
    if (!int_annotation(r, KCM_DEPLOYMENT_MAX, &annotated))
      annotated = d->status.replicas;
    if (annotated <= 0) {
      fraction = 0; /* nothing to scale from; the leftover goes to the largest */
    } else {
      size = (double)r->replicas * (double)(d->replicas + kcm_deployment_max_surge(d)) /
             (double)annotated;
      fraction = (int32_t)round(size) - r->replicas;
    }
  }
  if (to_add > 0)
    return fraction < allowed ? fraction : allowed;
  return fraction > allowed ? fraction : allowed;
}

/* Upstream's FindActiveOrLatest; sorts s->old newest first, as upstream
 * sorts its list in place. */
static int active_or_latest(struct sync *s, int new_rs) {
  int *l;
  size_t n, i;
  int found = -1;
  if (new_rs < 0 && s->nold == 0)
    return -1;
  sort(s, s->old, s->nold, by_creation_newest);
  l = malloc((s->nold + 1) * sizeof(*l));
  if (!l) {
    nomem(s);
    return -1;
  }
  for (i = 0; i < s->nold; i++)
    l[i] = s->old[i];
  l[s->nold] = new_rs;
  n = filter_active(s, l, s->nold + 1, l);
  if (n == 0)
    found = new_rs >= 0 ? new_rs : s->old[0];
  else if (n == 1)
    found = l[0];
  free(l);
  return found;
}

static bool saturated(struct sync *s, int new_rs) {
  const struct kcm_dp_rs *r;
  int32_t desired;
  if (new_rs < 0)
    return false;
  r = view(s, new_rs);
  if (!int_annotation(r, KCM_DEPLOYMENT_DESIRED, &desired))
    return false;
  return r->replicas == s->d->replicas && desired == s->d->replicas &&
         status_available(r) == s->d->replicas;
}

/* Upstream's scale: proportional scaling of the active ReplicaSets. */
static void scale(struct sync *s, int new_rs) {
  const struct kcm_deployment *d = s->d;
  int it = active_or_latest(s, new_rs);
  int *l, *size;
  size_t n, i;
  int32_t allowed, to_add, added = 0;
  const char *op = "";

  if (s->err)
    return;
  if (it >= 0) {
    scale_to(s, it, view(s, it)->replicas, d->replicas);
    return;
  }
  if (saturated(s, new_rs)) {
    for (i = 0; i < s->nold; i++)
      if (view(s, s->old[i])->replicas > 0)
        scale_to(s, s->old[i], view(s, s->old[i])->replicas, 0);
    return;
  }
  if (d->recreate)
    return;
  l = malloc((s->nold + 1) * sizeof(*l));
  size = malloc((s->nold + 1) * sizeof(*size));
  if (!l || !size) {
    free(l);
    free(size);
    nomem(s);
    return;
  }
  for (i = 0; i < s->nold; i++)
    l[i] = s->old[i];
  l[s->nold] = new_rs;
  n = filter_active(s, l, s->nold + 1, l);
  allowed = d->replicas > 0 ? d->replicas + kcm_deployment_max_surge(d) : 0;
  to_add = (int32_t)(allowed - sum_spec(s, l, n));
  if (to_add > 0) {
    sort(s, l, n, by_size_newer);
    op = "up";
  } else if (to_add < 0) {
    sort(s, l, n, by_size_older);
    op = "down";
  }
  for (i = 0; i < n; i++) {
    int32_t p = to_add ? proportion(s, l[i], to_add, added) : 0;
    size[i] = view(s, l[i])->replicas + p;
    added += p;
  }
  s->group++;
  for (i = 0; i < n; i++) {
    if (i == 0 && to_add != 0) {
      size[0] += to_add - added;
      if (size[0] < 0)
        size[0] = 0;
    }
    scale_rs(s, l[i], view(s, l[i])->replicas, size[i], op);
  }
  free(l);
  free(size);
}

/* --- the sync paths ------------------------------------------------------------------------ */

static size_t all_of(struct sync *s, int new_rs, int *all) {
  size_t i;
  for (i = 0; i < s->nold; i++)
    all[i] = s->old[i];
  if (new_rs >= 0)
    all[i++] = new_rs;
  return i;
}

/* Upstream's sync: paused, or a scaling event. */
static void sync_scale(struct sync *s, int *all) {
  int64_t rb;
  int new_rs = get_new_rs(s, false);
  size_t n;
  scale(s, new_rs);
  if (s->d->paused && !rollback_to(s->d, &rb))
    cleanup(s);
  n = all_of(s, new_rs, all);
  sync_status(s, all, n, new_rs);
}

static bool scaling_event(struct sync *s, int *all) {
  int new_rs = get_new_rs(s, false);
  size_t n = all_of(s, new_rs, all), i;
  n = filter_active(s, all, n, all);
  for (i = 0; i < n; i++) {
    int32_t desired;
    if (int_annotation(view(s, all[i]), KCM_DEPLOYMENT_DESIRED, &desired) &&
        desired != s->d->replicas)
      return true;
  }
  return false;
}

/* Upstream's cleanupUnhealthyReplicas and scaleDownOldReplicaSetsForRollingUpdate;
 * spec holds the old ReplicaSets' sizes as this sync leaves them. */
static int32_t scale_down_old(struct sync *s, int new_rs, int *old, int32_t *spec, size_t nold,
                              int32_t max_scaled_down, bool *failed) {
  const struct kcm_deployment *d = s->d;
  int32_t cleaned = 0, scaled = 0, min_available, target;
  int64_t available;
  size_t i, j;

  /* Sort old (and spec with it) oldest first. */
  for (i = 1; i < nold; i++)
    for (j = i; j > 0 && by_creation(s, old[j], old[j - 1]); j--) {
      int t = old[j];
      int32_t u = spec[j];
      old[j] = old[j - 1];
      spec[j] = spec[j - 1];
      old[j - 1] = t;
      spec[j - 1] = u;
    }
  for (i = 0; i < nold && cleaned < max_scaled_down; i++) {
    int32_t avail = status_available(view(s, old[i])), n;
    if (spec[i] == 0 || spec[i] == avail)
      continue;
    n = max_scaled_down - cleaned < spec[i] - avail ? max_scaled_down - cleaned : spec[i] - avail;
    if (n < 0) {
      *failed = true; /* upstream: "invalid request to scale down"; the pass ends */
      return cleaned;
    }
    scale_to(s, old[i], spec[i], spec[i] - n);
    spec[i] -= n;
    cleaned += n;
  }
  /* Availability counts the active old ReplicaSets and the new one. */
  min_available = d->replicas - kcm_deployment_max_unavailable(d);
  available = status_available(view(s, new_rs));
  for (i = 0; i < nold; i++)
    available += status_available(view(s, old[i]));
  if (available <= min_available)
    return cleaned;
  target = (int32_t)(available - min_available);
  for (i = 0; i < nold && scaled < target; i++) {
    int32_t n;
    if (spec[i] == 0)
      continue;
    n = spec[i] < target - scaled ? spec[i] : target - scaled;
    scale_to(s, old[i], spec[i], spec[i] - n);
    scaled += n;
  }
  return cleaned + scaled;
}

/* Upstream's reconcileOldReplicaSets. Scale-downs that fail are not errors
 * (upstream ignores them): their steps are lenient. */
static bool reconcile_old(struct sync *s, const int *all, size_t nall, int new_rs) {
  const struct kcm_deployment *d = s->d;
  const struct kcm_dp_rs *nr = view(s, new_rs);
  int *old = malloc((s->nold + 1) * sizeof(*old));
  int32_t *spec = malloc((s->nold + 1) * sizeof(*spec));
  int64_t max_scaled_down;
  size_t nold, i, first = s->p->nsteps;
  bool failed = false;
  int32_t total;

  if (!old || !spec) {
    free(old);
    free(spec);
    nomem(s);
    return false;
  }
  nold = filter_active(s, s->old, s->nold, old);
  for (i = 0; i < nold; i++)
    spec[i] = view(s, old[i])->replicas;
  if (nold == 0 || sum_spec(s, old, nold) == 0) {
    free(old);
    free(spec);
    return false;
  }
  max_scaled_down = sum_spec(s, all, nall) - (d->replicas - kcm_deployment_max_unavailable(d)) -
                    (nr->replicas - status_available(nr));
  if (max_scaled_down <= 0) {
    free(old);
    free(spec);
    return false;
  }
  s->group++;
  total = scale_down_old(s, new_rs, old, spec, nold, (int32_t)max_scaled_down, &failed);
  for (i = first; i < s->p->nsteps; i++)
    s->p->steps[i].lenient = true;
  free(old);
  free(spec);
  return !failed && total > 0;
}

/* Upstream's rolloutRolling. */
static void rollout_rolling(struct sync *s, int *all) {
  const struct kcm_deployment *d = s->d;
  int new_rs = get_new_rs(s, true);
  size_t n;
  const struct kcm_dp_rs *nr;
  bool complete = deployment_complete(d, s->st);

  if (s->err || new_rs < 0)
    return;
  n = all_of(s, new_rs, all);
  nr = view(s, new_rs);
  s->group++;
  if (nr->replicas != d->replicas) {
    int32_t to = nr->replicas > d->replicas ? d->replicas : new_rs_replicas(s, all, n, new_rs);
    if (scale_to(s, new_rs, nr->replicas, to)) {
      sync_rollout_status(s, all, n, new_rs);
      return;
    }
  }
  if (reconcile_old(s, all, n, new_rs)) {
    sync_rollout_status(s, all, n, new_rs);
    return;
  }
  if (complete)
    cleanup(s);
  sync_rollout_status(s, all, n, new_rs);
}

/* Upstream's oldPodsRunning. */
static bool old_pods_running(struct sync *s, int new_rs) {
  size_t i;
  for (i = 0; i < s->nold; i++)
    if (status_replicas(view(s, s->old[i])) > 0)
      return true;
  if (!s->in->pods_running)
    return false;
  for (i = 0; i < s->p->nrs; i++) {
    const struct kcm_dp_rs *r = view(s, (int)i);
    if ((int)i != new_rs && r->rs && s->in->pods_running(s->in->ctx, r->rs))
      return true;
  }
  return false;
}

/* Upstream's rolloutRecreate. */
static void rollout_recreate(struct sync *s, int *all) {
  const struct kcm_deployment *d = s->d;
  int new_rs = get_new_rs(s, false);
  size_t n = all_of(s, new_rs, all), i;
  bool scaled = false, complete = deployment_complete(d, s->st);

  s->group++;
  for (i = 0; i < s->nold; i++) {
    const struct kcm_dp_rs *r = view(s, s->old[i]);
    if (r->replicas != 0)
      scaled |= scale_to(s, s->old[i], r->replicas, 0);
  }
  if (scaled || old_pods_running(s, new_rs)) {
    sync_rollout_status(s, all, n, new_rs);
    return;
  }
  if (new_rs < 0) {
    new_rs = get_new_rs(s, true);
    if (s->err || new_rs < 0)
      return;
    n = all_of(s, new_rs, all);
  }
  scale_to(s, new_rs, view(s, new_rs)->replicas, d->replicas);
  if (complete)
    cleanup(s);
  sync_rollout_status(s, all, n, new_rs);
}

/* Upstream's checkPausedConditions. */
static void check_paused(struct sync *s) {
  const struct kcm_deployment *d = s->d;
  bool paused_cond;
  if (!has_deadline(d) || reason_is(&s->st->conditions, PROGRESSING, TIMED_OUT))
    return;
  paused_cond = reason_is(&s->st->conditions, PROGRESSING, PAUSED);
  if (d->paused && !paused_cond)
    new_condition(s, &s->st->conditions, PROGRESSING, "Unknown", PAUSED, "Deployment is paused");
  else if (!d->paused && paused_cond)
    new_condition(s, &s->st->conditions, PROGRESSING, "Unknown", "DeploymentResumed",
                  "Deployment is resumed");
}

/* --- legacy rollback ------------------------------------------------------------------------ */

/* Append a JSON pointer segment (RFC 6901 escaping) to b. */
static int pointer_segment(struct kcm_buf *b, const char *key) {
  int err = 0;
  for (; !err && *key; key++) {
    if (*key == '~')
      err = kcm_buf_append_str(b, "~0");
    else if (*key == '/')
      err = kcm_buf_append_str(b, "~1");
    else
      err = kcm_buf_append(b, key, 1);
  }
  return err;
}

static void add_op(struct json_object *ops, const char *op, const char *path,
                   struct json_object *value) {
  struct json_object *o = json_object_new_object();
  json_object_object_add(o, "op", json_object_new_string(op));
  json_object_object_add(o, "path", json_object_new_string(path));
  if (value)
    json_object_object_add(o, "value", value);
  json_object_array_add(ops, o);
}

/* The JSON patch that clears rollbackTo and, when template_json is given,
 * puts that template (less its hash label) and the annotations of `from`
 * (upstream's SetDeploymentAnnotationsTo) into the Deployment. */
static void rollback_update(struct sync *s, const char *template_json,
                            const struct kcm_pairs *from) {
  const struct kcm_deployment *d = s->d;
  struct kcm_pairs want;
  struct json_object *ops = json_object_new_array();
  struct kcm_buf path = KCM_BUF_INIT(1u << 16);
  uint32_t i;

  /* The annotations it should end with. */
  if (kcm_api_pairs_copy(&want, &d->annotations)) {
    json_object_put(ops);
    nomem(s);
    return;
  }
  if (s->p->revision)
    set_annotation(s, &want, KCM_DEPLOYMENT_REVISION, s->p->revision);
  if (from) {
    for (i = 0; i < want.n;) {
      if (!skip_annotation(want.items[i].key))
        kcm_api_pairs_remove(&want, want.items[i].key);
      else
        i++;
    }
    for (i = 0; i < from->n; i++)
      if (!skip_annotation(from->items[i].key))
        set_annotation(s, &want, from->items[i].key, from->items[i].value);
  }
  kcm_api_pairs_remove(&want, KCM_DEPLOYMENT_ROLLBACK_TO);

  if (template_json) {
    struct json_object *t = json_tokener_parse(template_json), *restore;
    if (!t) {
      s->err = KCM_EINVAL;
    } else {
      kcm_api_template_strip_hash(t, &restore);
      json_object_put(restore);
      add_op(ops, "replace", "/spec/template", t);
    }
  }
  for (i = 0; !s->err && i < d->annotations.n; i++) {
    const char *k = d->annotations.items[i].key;
    if (kcm_api_pairs_get(&want, k))
      continue;
    kcm_buf_reset(&path);
    if (kcm_buf_append_str(&path, "/metadata/annotations/") || pointer_segment(&path, k))
      nomem(s);
    else
      add_op(ops, "remove", path.data, NULL);
  }
  for (i = 0; !s->err && i < want.n; i++) {
    const char *have = kcm_api_pairs_get(&d->annotations, want.items[i].key);
    if (have && !strcmp(have, want.items[i].value))
      continue;
    kcm_buf_reset(&path);
    if (kcm_buf_append_str(&path, "/metadata/annotations/") ||
        pointer_segment(&path, want.items[i].key))
      nomem(s);
    else
      add_op(ops, "add", path.data, json_object_new_string(want.items[i].value));
  }
  if (!s->err) {
    s->p->rollback_ops = strdup(json_object_to_json_string_ext(
        ops, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    if (!s->p->rollback_ops)
      nomem(s);
  }
  kcm_buf_release(&path);
  kcm_api_pairs_release(&want);
  json_object_put(ops);
  write_status(s, false); /* what getNewReplicaSet changed goes first */
  s->group++;
  add_step(s, KCM_DP_ROLLBACK);
}

static void event(struct sync *s, bool warning, const char *reason, const char *message) {
  set_message(s, add_step(s, KCM_DP_EVENT), reason, warning, "%s", message);
}

/* Upstream's rollback (the deprecated.deployment.rollback.to annotation). */
static void rollback(struct sync *s, int *all, int64_t target) {
  const struct kcm_deployment *d = s->d;
  int new_rs = get_new_rs(s, true);
  size_t n, i;

  if (s->err)
    return;
  n = all_of(s, new_rs, all);
  if (target == 0) {
    int64_t max = 0, second = 0, v;
    for (i = 0; i < n; i++) {
      if (!kcm_deployment_revision_of(&view(s, all[i])->annotations, &v))
        continue;
      if (v >= max) {
        second = max;
        max = v;
      } else if (v > second) {
        second = v;
      }
    }
    if ((target = second) == 0) {
      event(s, true, "DeploymentRollbackRevisionNotFound", "Unable to find last revision.");
      rollback_update(s, NULL, NULL);
      return;
    }
  }
  for (i = 0; i < n; i++) {
    const struct kcm_dp_rs *r = view(s, all[i]);
    int64_t v;
    if (!kcm_deployment_revision_of(&r->annotations, &v) || v != target)
      continue;
    if (r->rs && !template_of_equal(s, r)) {
      rollback_update(s, r->rs->template, &r->annotations);
      if (!s->err)
        set_message(s, &s->p->steps[s->p->nsteps - 1], "DeploymentRollback", false,
                  "Rolled back deployment \"%s\" to revision %lld", d->o.name, (long long)v);
    } else {
      char *msg;
      if (asprintf(&msg, "The rollback revision contains the same template as current "
                         "deployment \"%s\"", d->o.name) < 0) {
        nomem(s);
        return;
      }
      event(s, true, "DeploymentRollbackTemplateUnchanged", msg);
      free(msg);
      rollback_update(s, NULL, NULL);
    }
    return;
  }
  event(s, true, "DeploymentRollbackRevisionNotFound", "Unable to find the revision to rollback to.");
  rollback_update(s, NULL, NULL);
}

/* --- claiming ------------------------------------------------------------------------------- */

static int push_rs(struct kcm_replicaset ***arr, size_t *n, struct kcm_replicaset *rs) {
  struct kcm_replicaset **grown = realloc(*arr, (*n + 1) * sizeof(*grown));
  if (!grown)
    return KCM_ENOMEM;
  grown[(*n)++] = rs;
  *arr = grown;
  return 0;
}

static int add_view(struct kcm_dp_plan *p, const struct kcm_replicaset *rs) {
  struct kcm_dp_rs *grown = realloc(p->rs, (p->nrs + 1) * sizeof(*grown)), *r;
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
static int claim(const struct kcm_dp_input *in, struct kcm_dp_plan *p) {
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
        err = push_rs(&p->release, &p->nrelease, rs);
      continue;
    }
    if (deleting || !matches || rs->o.deleted)
      continue;
    if (!(err = push_rs(&p->adopt, &p->nadopt, rs)))
      err = add_view(p, rs);
  }
  return err;
}

/* --- the plan ------------------------------------------------------------------------------- */

int kcm_deployment_plan(const struct kcm_dp_input *in, struct kcm_dp_plan *out) {
  const struct kcm_deployment *d = in->d;
  struct sync s;
  int *all = NULL;
  int64_t target;
  int err;

  memset(out, 0, sizeof(*out));
  out->new_rs = -1;
  out->requeue_after_ms = -1;
  memset(&s, 0, sizeof(s));
  s.in = in;
  s.d = d;
  s.p = out;
  s.st = &out->status;
  s.now_s = (int64_t)(in->now_ms / 1000);
  cached_status(d, &out->status);
  if (kcm_api_conditions_copy(&out->status.conditions, &d->status.conditions))
    return KCM_ENOMEM;

  if (d->selector.nothing) {
    out->invalid = true;
    return 0;
  }
  if (kcm_labels_selector_empty(&d->selector)) {
    event(&s, true, "SelectingAll",
          "This deployment is selecting all pods. A non-empty selector is required.");
    if (out->status.observed_generation < d->o.generation) {
      out->status.observed_generation = d->o.generation;
      write_status(&s, true);
    }
    goto done;
  }
  if ((err = claim(in, out))) {
    kcm_deployment_plan_release(out);
    return err;
  }
  s.old = malloc((out->nrs + 1) * sizeof(*s.old));
  all = malloc((out->nrs + 2) * sizeof(*all));
  if (!s.old || !all) {
    nomem(&s);
    goto done;
  }
  /* Oldest first, as upstream sorts before looking for the new one. */
  {
    int *idx = malloc((out->nrs + 1) * sizeof(*idx));
    struct kcm_dp_rs *sorted = malloc((out->nrs + 1) * sizeof(*sorted));
    size_t i;
    if (!idx || !sorted) {
      free(idx);
      free(sorted);
      nomem(&s);
      goto done;
    }
    for (i = 0; i < out->nrs; i++)
      idx[i] = (int)i;
    sort(&s, idx, out->nrs, by_creation);
    for (i = 0; i < out->nrs; i++)
      sorted[i] = out->rs[idx[i]];
    if (out->nrs)
      memcpy(out->rs, sorted, out->nrs * sizeof(*sorted));
    free(idx);
    free(sorted);
  }

  if (d->o.deleted) {
    int new_rs = get_new_rs(&s, false);
    sync_status(&s, all, all_of(&s, new_rs, all), new_rs);
  } else {
    check_paused(&s);
    if (d->paused)
      sync_scale(&s, all);
    else if (rollback_to(d, &target)) {
      rollback(&s, all, target);
      goto done;
    } else if (scaling_event(&s, all))
      sync_scale(&s, all);
    else if (d->recreate)
      rollout_recreate(&s, all);
    else
      rollout_rolling(&s, all);
  }
  write_status(&s, false);
done:
  free(s.old);
  free(all);
  if (s.err) {
    kcm_deployment_plan_release(out);
    return s.err;
  }
  return 0;
}

void kcm_deployment_plan_release(struct kcm_dp_plan *p) {
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
  status_release(&p->status);
  memset(p, 0, sizeof(*p));
  p->new_rs = -1;
  p->requeue_after_ms = -1;
}

bool kcm_deployment_status_changed(const struct kcm_deployment *d, const struct kcm_dp_plan *p) {
  const char *rev = kcm_api_pairs_get(&d->annotations, KCM_DEPLOYMENT_REVISION);
  struct kcm_dp_status cached;
  if (p->revision && (!rev || strcmp(rev, p->revision)))
    return true;
  cached_status(d, &cached);
  return !status_equal(&p->status, &cached);
}
