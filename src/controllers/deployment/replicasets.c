/*
 * controllers/deployment/replicasets.c — what a sync does to ReplicaSets:
 * find or create the new one (getNewReplicaSet), carry annotations and
 * revisions, scale (scaleReplicaSet, proportional scale) and delete the
 * history past revisionHistoryLimit (cleanupDeployment).
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/buf.h"
#include "kcm/json.h"
#include "internal.h"

/* --- annotations -------------------------------------------------------------------------- */

bool dp_skip_annotation(const char *key) {
  return !strcmp(key, KCM_API_LAST_APPLIED) || !strcmp(key, KCM_DEPLOYMENT_REVISION) ||
         !strcmp(key, KCM_DEPLOYMENT_REVISION_HISTORY) || !strcmp(key, KCM_DEPLOYMENT_DESIRED) ||
         !strcmp(key, KCM_DEPLOYMENT_MAX) || !strcmp(key, KCM_DEPLOYMENT_ROLLBACK_TO);
}

bool dp_set_annotation(struct dp_sync *s, struct kcm_pairs *a, const char *key, const char *v) {
  const char *have = kcm_api_pairs_get(a, key);
  if (have && !strcmp(have, v))
    return false;
  if (kcm_api_pairs_set(a, key, v))
    nomem(s);
  return true;
}

static bool set_replicas_annotations(struct dp_sync *s, struct kcm_pairs *a) {
  char desired[16], max[16];
  bool changed;
  snprintf(desired, sizeof(desired), "%d", s->d->replicas);
  snprintf(max, sizeof(max), "%d", kcm_deployment_max_total(s->d));
  changed = dp_set_annotation(s, a, KCM_DEPLOYMENT_DESIRED, desired);
  return dp_set_annotation(s, a, KCM_DEPLOYMENT_MAX, max) || changed;
}

static bool replicas_annotations_need_update(struct dp_sync *s, const struct kcm_pairs *a) {
  char desired[16], max[16];
  const char *hd = kcm_api_pairs_get(a, KCM_DEPLOYMENT_DESIRED);
  const char *hm = kcm_api_pairs_get(a, KCM_DEPLOYMENT_MAX);
  snprintf(desired, sizeof(desired), "%d", s->d->replicas);
  snprintf(max, sizeof(max), "%d", kcm_deployment_max_total(s->d));
  return !hd || strcmp(hd, desired) || !hm || strcmp(hm, max);
}

/* Append old to the revision history, dropping the oldest entries past
 * the length limit (upstream's SetNewReplicaSetAnnotations). */
static void append_history(struct dp_sync *s, struct kcm_pairs *a, const char *old) {
  const char *hist = kcm_api_pairs_get(a, KCM_DEPLOYMENT_REVISION_HISTORY);
  size_t total;
  const char *start;
  char *joined;

  if (!hist || !*hist || hist[0] == ',') {
    dp_set_annotation(s, a, KCM_DEPLOYMENT_REVISION_HISTORY, old);
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
  dp_set_annotation(s, a, KCM_DEPLOYMENT_REVISION_HISTORY, joined);
  free(joined);
}

/* Upstream's SetNewReplicaSetAnnotations on a view; true when it changed. */
static bool set_new_rs_annotations(struct dp_sync *s, struct kcm_deployment_rs *r, int64_t new_rev,
                                   bool exists) {
  const struct kcm_pairs *da = &s->d->annotations;
  const char *old;
  int64_t old_rev = 0;
  bool changed = false, had;
  char buf[24];

  if (kcm_api_pairs_update(&r->annotations, da, dp_skip_annotation, &changed))
    nomem(s);
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
    dp_set_annotation(s, &r->annotations, KCM_DEPLOYMENT_REVISION, buf);
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
static bool set_deployment_revision(struct dp_sync *s, const char *rev) {
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
static struct kcm_deployment_step *update_step(struct dp_sync *s, int i, int32_t from, int32_t to,
                                       const struct kcm_pairs *annotations) {
  struct kcm_deployment_step *st = dp_add_step(s, KCM_DEPLOYMENT_STEP_SCALE);
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
static bool scale_rs(struct dp_sync *s, int i, int32_t from, int32_t to, const char *op) {
  struct kcm_deployment_rs *r = view(s, i);
  struct kcm_pairs a;
  struct kcm_deployment_step *st;
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
    dp_set_message(s, st, "ScalingReplicaSet", false, "Scaled %s replica set %s from %d to %d", op,
                r->name, from, to);
  return resize;
}

/* Upstream's scaleReplicaSetAndRecordEvent: nothing when the size is right. */
bool dp_scale_to(struct dp_sync *s, int i, int32_t from, int32_t to) {
  if (from == to)
    return false;
  return scale_rs(s, i, from, to, from < to ? "up" : "down");
}

/* --- the new ReplicaSet ---------------------------------------------------------------------- */

bool dp_template_of_equal(struct dp_sync *s, const struct kcm_deployment_rs *r) {
  const struct kcm_deployment_alias *al = s->in->alias;
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
static int find_new(struct dp_sync *s) {
  size_t i;
  int found = s->p->new_rs >= 0 && !view(s, s->p->new_rs)->rs ? s->p->new_rs : -1;
  for (i = 0; i < s->p->nrs && found < 0; i++)
    if (view(s, (int)i)->rs && dp_template_of_equal(s, view(s, (int)i)))
      found = (int)i;
  s->nold = 0;
  for (i = 0; i < s->p->nrs; i++)
    if ((int)i != found && view(s, (int)i)->rs)
      s->old[s->nold++] = (int)i;
  return found;
}

static int64_t max_revision(struct dp_sync *s) {
  int64_t max = 0, v;
  size_t i;
  for (i = 0; i < s->nold; i++)
    if (kcm_deployment_revision_of(&view(s, s->old[i])->annotations, &v) && v > max)
      max = v;
  return max;
}

/* Upstream's NewRSNewReplicas: the new ReplicaSet's size within the surge. */
int32_t dp_new_rs_replicas(struct dp_sync *s, const int *all, size_t n, int new_rs) {
  const struct kcm_deployment *d = s->d;
  int32_t cur_new = view(s, new_rs)->replicas;
  int64_t current, max_total, up;
  if (d->recreate)
    return d->replicas;
  current = dp_sum_spec(s, all, n);
  max_total = kcm_deployment_max_total(d);
  if (current >= max_total)
    return cur_new;
  up = max_total - current;
  if (up > (int64_t)d->replicas - cur_new)
    up = (int64_t)d->replicas - cur_new;
  return (int32_t)(cur_new + up);
}

/* The new ReplicaSet: the template's labels and the selector get the hash;
 * the ReplicaSet's labels are the template's. */
static int build_create_body(struct dp_sync *s, const struct kcm_deployment_rs *r,
                             const char *hash) {
  static const char *const label_path[] = {"metadata", "labels", KCM_API_HASH_LABEL, NULL};
  static const char *const hash_path[] = {KCM_API_HASH_LABEL, NULL};
  static const char *const selector_path[] = {"matchLabels", KCM_API_HASH_LABEL, NULL};
  static const char *const labels_at[] = {"metadata", "labels", NULL};
  const struct kcm_deployment *d = s->d;
  struct kcm_buf body = KCM_BUF_INIT(KCM_API_OBJECT_MAX);
  struct kcm_json j;
  struct kcm_jsonw w;
  const char *labels = "{}";
  size_t labels_len = 2;
  uint32_t i;
  int err;

  if (!d->selector_json)
    return KCM_EINVAL;
  kcm_json_init(&j);
  kcm_json_start(&j, d->template, strlen(d->template));
  if (kcm_json_find(&j, labels_at) && kcm_json_peek(&j) == KCM_JSON_OBJECT)
    kcm_json_raw(&j, &labels, &labels_len);
  kcm_jsonw_start(&w, &body);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "apiVersion", "apps/v1");
  kcm_jsonw_key_string(&w, "kind", "ReplicaSet");
  kcm_jsonw_key_object(&w, "metadata");
  kcm_jsonw_key_string(&w, "name", r->name);
  kcm_jsonw_key_string(&w, "namespace", d->o.ns);
  kcm_jsonw_key(&w, "labels");
  kcm_jsonw_copy_set(&w, labels, labels_len, hash_path, hash);
  kcm_json_release(&j);
  kcm_jsonw_key_object(&w, "annotations");
  for (i = 0; i < r->annotations.n; i++)
    kcm_jsonw_key_string(&w, r->annotations.items[i].key, r->annotations.items[i].value);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_array(&w, "ownerReferences");
  kcm_api_write_controller_ref(&w, "apps/v1", "Deployment", d->o.name, &d->o.uid);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_object(&w, "spec");
  kcm_jsonw_key_int(&w, "replicas", r->replicas);
  if (r->min_ready_seconds)
    kcm_jsonw_key_int(&w, "minReadySeconds", r->min_ready_seconds);
  kcm_jsonw_key(&w, "selector");
  kcm_jsonw_copy_set(&w, d->selector_json, strlen(d->selector_json), selector_path, hash);
  kcm_jsonw_key(&w, "template");
  kcm_jsonw_copy_set(&w, d->template, strlen(d->template), label_path, hash);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  if ((err = kcm_jsonw_finish(&w))) {
    kcm_buf_release(&body);
    return err;
  }
  s->p->create_body = kcm_buf_take(&body);
  return s->p->create_body ? 0 : KCM_ENOMEM;
}

/* Upstream's getNewReplicaSet (with getAllReplicaSetsAndSyncRevision):
 * find the new ReplicaSet and bring its revision and annotations up to
 * date, or create it. Returns its index or -1; s->old holds the others. */
/* The new ReplicaSet exists (index found): bring its annotations and
 * minReadySeconds up to date, or take its revision and note it found. */
static int update_new_rs(struct dp_sync *s, int found, int64_t new_rev) {
  const struct kcm_deployment *d = s->d;
  struct kcm_deployment_rs *r = view(s, found);
  const char *rs_rev;

  s->p->new_rs = found;
  if (set_new_rs_annotations(s, r, new_rev, true) ||
      r->min_ready_seconds != d->min_ready_seconds) {
    r->min_ready_seconds = d->min_ready_seconds;
    update_step(s, found, r->replicas, r->replicas, &r->annotations);
    return found; /* the Deployment's revision follows on a later sync */
  }
  rs_rev = kcm_api_pairs_get(&r->annotations, KCM_DEPLOYMENT_REVISION);
  set_deployment_revision(s, rs_rev ? rs_rev : "");
  if (has_deadline(d) && !kcm_api_condition_get(&s->st->conditions, PROGRESSING))
    dp_new_condition(s, &s->st->conditions, PROGRESSING, "True", "FoundNewReplicaSet",
                     "Found new replica set \"%s\"", r->name);
  return found;
}

/* A view of the ReplicaSet to create, named after the hash of the template
 * and the collision count, sized as upstream sizes a new one; -1 when
 * memory is short. The Deployment's name is cut so that the ReplicaSet's
 * stays within 253 characters, as upstream cuts it since 1.34. */
static int add_new_rs(struct dp_sync *s, char hash[16]) {
  const struct kcm_deployment *d = s->d;
  struct kcm_deployment_rs *r, *grown;
  int found, *all, keep;
  size_t i;

  grown = kcm_buf_grow_items(s->p->rs, s->p->nrs, sizeof(*grown));
  if (!grown) {
    nomem(s);
    return -1;
  }
  s->p->rs = grown;
  found = (int)s->p->nrs++;
  r = view(s, found);
  memset(r, 0, sizeof(*r));
  kcm_deployment_hash(d->template, s->st->collision_count, hash, 16);
  keep = KCM_API_NAME_MAX - 1 - (int)strlen(hash);
  if (asprintf(&r->name, "%.*s-%s", (int)strlen(d->o.name) > keep ? keep : (int)strlen(d->o.name),
               d->o.name, hash) < 0) {
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
  r->replicas = dp_new_rs_replicas(s, all, s->nold + 1, found);
  free(all);
  return found;
}

int dp_get_new_rs(struct dp_sync *s, bool create) {
  const struct kcm_deployment *d = s->d;
  int found = find_new(s);
  int64_t new_rev;
  struct kcm_deployment_rs *r;
  struct kcm_deployment_step *st;
  char hash[16], rev[24];

  if (s->err)
    return -1;
  new_rev = max_revision(s);
  new_rev += new_rev < INT64_MAX; /* the next, saturating */
  if (found >= 0 && !view(s, found)->rs)
    return found; /* created earlier in this sync */
  if (found >= 0)
    return update_new_rs(s, found, new_rev);
  if (!create || (found = add_new_rs(s, hash)) < 0)
    return -1;
  r = view(s, found);
  set_new_rs_annotations(s, r, new_rev, false);
  if (s->err || build_create_body(s, r, hash)) {
    s->err = s->err ? s->err : KCM_EINVAL;
    return -1;
  }
  s->p->new_rs = found;
  st = dp_add_step(s, KCM_DEPLOYMENT_STEP_CREATE);
  if (st) {
    st->rs = found;
    if (kcm_api_conditions_copy(&st->conditions, &s->st->conditions))
      nomem(s);
    if (r->replicas > 0)
      dp_set_message(s, st, "ScalingReplicaSet", false, "Scaled up replica set %s from 0 to %d",
                     r->name, r->replicas);
  }
  snprintf(rev, sizeof(rev), "%lld", (long long)new_rev);
  set_deployment_revision(s, rev);
  if (has_deadline(d))
    dp_new_condition(s, &s->st->conditions, PROGRESSING, "True", "NewReplicaSetCreated",
                     "Created new replica set \"%s\"", r->name);
  return found;
}

/* --- cleanup -------------------------------------------------------------------------------- */

/* Upstream's cleanupDeployment: delete the oldest old ReplicaSets past
 * revisionHistoryLimit that have nothing left. */
void dp_cleanup(struct dp_sync *s) {
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
    dp_sort(s, l, n, dp_by_revision);
    s->group++;
    for (i = 0; i < (size_t)diff; i++) {
      const struct kcm_deployment_rs *r = view(s, l[i]);
      struct kcm_deployment_step *st;
      if (r->rs->status.replicas != 0 || r->replicas != 0 ||
          r->rs->o.generation > r->rs->status.observed_generation || r->rs->o.deleted)
        continue;
      if ((st = dp_add_step(s, KCM_DEPLOYMENT_STEP_DELETE)))
        st->rs = l[i];
    }
  }
  free(l);
}

/* --- scaling ------------------------------------------------------------------------------- */

/* Upstream's getReplicaSetFraction and GetProportion, in int64: sums of
 * int32 sizes do not fit an int32. */
static int64_t proportion(struct dp_sync *s, int i, int64_t to_add, int64_t added) {
  const struct kcm_deployment *d = s->d;
  const struct kcm_deployment_rs *r = view(s, i);
  int64_t fraction, allowed = to_add - added;
  int32_t annotated;
  double size;

  if (r->replicas == 0 || to_add == 0 || to_add == added)
    return 0;
  if (d->replicas == 0) {
    fraction = -r->replicas;
  } else {
    /* missing, not a count, or 0: the Deployment's size stands in */
    if (!dp_int_annotation(r, KCM_DEPLOYMENT_MAX, &annotated) || annotated == 0)
      annotated = d->status.replicas;
    if (annotated <= 0) {
      fraction = 0; /* nothing to scale from; the leftover goes to the largest */
    } else {
      /* at most 2^62: exact enough, and within int64 */
      size = (double)r->replicas * (double)kcm_deployment_max_total(d) / (double)annotated;
      fraction = (int64_t)round(size) - r->replicas;
    }
  }
  if (to_add > 0)
    return fraction < allowed ? fraction : allowed;
  return fraction > allowed ? fraction : allowed;
}

/* Upstream's FindActiveOrLatest; sorts s->old newest first, as upstream
 * sorts its list in place. */
static int active_or_latest(struct dp_sync *s, int new_rs) {
  int *l;
  size_t n, i;
  int found = -1;
  if (new_rs < 0 && s->nold == 0)
    return -1;
  dp_sort(s, s->old, s->nold, dp_by_creation_newest);
  l = malloc((s->nold + 1) * sizeof(*l));
  if (!l) {
    nomem(s);
    return -1;
  }
  for (i = 0; i < s->nold; i++)
    l[i] = s->old[i];
  l[s->nold] = new_rs;
  n = dp_filter_active(s, l, s->nold + 1, l);
  if (n == 0)
    found = new_rs >= 0 ? new_rs : s->old[0];
  else if (n == 1)
    found = l[0];
  free(l);
  return found;
}

static bool saturated(struct dp_sync *s, int new_rs) {
  const struct kcm_deployment_rs *r;
  int32_t desired;
  if (new_rs < 0)
    return false;
  r = view(s, new_rs);
  if (!dp_int_annotation(r, KCM_DEPLOYMENT_DESIRED, &desired))
    return false;
  return r->replicas == s->d->replicas && desired == s->d->replicas &&
         status_available(r) == s->d->replicas;
}

/* Upstream's scale: proportional scaling of the active ReplicaSets. */
void dp_scale(struct dp_sync *s, int new_rs) {
  const struct kcm_deployment *d = s->d;
  int it = active_or_latest(s, new_rs);
  int *l;
  int64_t *size, allowed, to_add, added = 0;
  size_t n, i;
  const char *op = "";

  if (s->err)
    return;
  if (it >= 0) {
    dp_scale_to(s, it, view(s, it)->replicas, d->replicas);
    return;
  }
  if (saturated(s, new_rs)) {
    for (i = 0; i < s->nold; i++)
      if (view(s, s->old[i])->replicas > 0)
        dp_scale_to(s, s->old[i], view(s, s->old[i])->replicas, 0);
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
  n = dp_filter_active(s, l, s->nold + 1, l);
  allowed = d->replicas > 0 ? kcm_deployment_max_total(d) : 0;
  to_add = allowed - dp_sum_spec(s, l, n);
  if (to_add > 0) {
    dp_sort(s, l, n, dp_by_size_newer);
    op = "up";
  } else if (to_add < 0) {
    dp_sort(s, l, n, dp_by_size_older);
    op = "down";
  }
  for (i = 0; i < n; i++) {
    int64_t p = to_add ? proportion(s, l[i], to_add, added) : 0;
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
    scale_rs(s, l[i], view(s, l[i])->replicas, kcm_deployment_clamp32(size[i]), op);
  }
  free(l);
  free(size);
}

