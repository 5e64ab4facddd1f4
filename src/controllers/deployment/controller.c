/*
 * controllers/deployment/controller.c — the Deployment controller's event
 * handlers and its executor: a sync plans, checks the Deployment before
 * adopting, sends its claims, then its steps one after the other, and
 * hands the key back to the work queue when the last one has answered.
 * See include/kcm/deployment.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../api/internal.h"
#include "kcm/buf.h"
#include "kcm/deployment.h"
#include "kcm/error.h"
#include "kcm/log.h"

enum phase { PHASE_CHECK, PHASE_CLAIM, PHASE_STEPS, PHASE_DONE };

struct kcm_dp_job {
  struct kcm_deployment_controller *c;
  struct kcm_dp_job *next;
  char *key;
  struct kcm_deployment *d;
  struct kcm_object **held; /* references dropped at the end */
  size_t nheld;
  struct kcm_dp_plan plan;
  uint64_t d_rv;            /* the Deployment's latest resourceVersion */
  uint64_t *rs_rv;          /* each planned ReplicaSet's */
  size_t step;              /* the next step */
  const struct kcm_dp_step *current;
  uint32_t skip_group;      /* after a lenient failure */
  bool skipping;
  enum phase phase;
  int outstanding;
  int err;
  char *err_msg;
  bool forget;              /* an error not worth retrying */
  bool requeue;             /* sync again at once (not an error) */
  bool alias_checked;
  bool gave_back;           /* the worker was given back while the status write is out */
};

/* The Deployment-to-ReplicaSet aliases, keyed by the Deployment's key. */
struct alias_entry {
  char *key;
  struct kcm_dp_alias alias;
};

static void pump(struct kcm_deployment_controller *c);
static void run(struct kcm_dp_job *j);

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void enqueue(struct kcm_deployment_controller *c, const struct kcm_object *d) {
  char key[600];
  snprintf(key, sizeof(key), "%s/%s", d->ns, d->name);
  kcm_workqueue_add(&c->queue, key);
}

/* --- aliases ------------------------------------------------------------------------------ */

static uint64_t alias_hash(const void *key) {
  return kcm_map_hash_bytes(KCM_MAP_HASH_INIT, key, strlen(key));
}

static bool alias_match(const void *key, const void *entry) {
  return strcmp(key, ((const struct alias_entry *)entry)->key) == 0;
}

static const struct kcm_map_type alias_type = {alias_hash, alias_match};

static void alias_drop(struct kcm_deployment_controller *c, const char *key) {
  struct alias_entry *e = kcm_map_remove(&c->aliases, key);
  if (e) {
    free(e->key);
    free(e);
  }
}

static void alias_put(struct kcm_deployment_controller *c, const char *key,
                      const struct kcm_dp_alias *a) {
  struct alias_entry *e = calloc(1, sizeof(*e)), *old = NULL;
  if (!e || !(e->key = strdup(key))) {
    free(e);
    return; /* without it the next sync bumps collisionCount: a new name, not a loop */
  }
  e->alias = *a;
  if (kcm_map_put(&c->aliases, key, e, (void **)&old)) {
    free(e->key);
    free(e);
    return;
  }
  if (old) {
    free(old->key);
    free(old);
  }
}

/* --- event handlers ---------------------------------------------------------------------- */

static struct kcm_deployment *resolve(struct kcm_deployment_controller *c,
                                      const struct kcm_object *rs) {
  struct kcm_object *d;
  if (!rs->has_controller || strcmp(rs->controller.kind, "Deployment") != 0)
    return NULL;
  d = kcm_informer_get(c->d_informer, rs->ns, rs->controller.name);
  if (!d || !kcm_api_uid_equal(&d->uid, &rs->controller.uid))
    return NULL;
  return (struct kcm_deployment *)d;
}

/* Enqueue every Deployment of the namespace whose selector takes the orphan. */
static void enqueue_matching(struct kcm_deployment_controller *c, const struct kcm_object *rs) {
  struct kcm_object *o;
  int n = 0;
  if (!rs->labels.n)
    return;
  for (o = kcm_informer_first_in(c->d_informer, rs->ns); o; o = o->ns_next) {
    struct kcm_deployment *d = (struct kcm_deployment *)o;
    if (kcm_labels_selector_empty(&d->selector) || !kcm_labels_matches(&d->selector, &rs->labels))
      continue;
    enqueue(c, o);
    n++;
  }
  if (n > 1)
    kcm_v(4, "user error: more than one Deployment selects the ReplicaSet replicaset=\"%s/%s\"",
          rs->ns, rs->name);
}

static void d_added(void *ctx, struct kcm_object *d) { enqueue(ctx, d); }

static void d_updated(void *ctx, struct kcm_object *old, struct kcm_object *cur) {
  enqueue(ctx, cur);
}

static void d_deleted(void *ctx, struct kcm_object *d, bool unknown) {
  struct kcm_deployment_controller *c = ctx;
  char key[600];
  snprintf(key, sizeof(key), "%s/%s", d->ns, d->name);
  alias_drop(c, key);
  enqueue(c, d);
}

static void rs_deleted(void *ctx, struct kcm_object *rs, bool unknown) {
  struct kcm_deployment *d = resolve(ctx, rs);
  if (d)
    enqueue(ctx, &d->o);
}

static void rs_added(void *ctx, struct kcm_object *rs) {
  struct kcm_deployment *d;
  if (rs->deleted) {
    rs_deleted(ctx, rs, false);
    return;
  }
  if (rs->has_controller) {
    if ((d = resolve(ctx, rs)))
      enqueue(ctx, &d->o);
    return;
  }
  enqueue_matching(ctx, rs);
}

static bool same_controller(const struct kcm_object *a, const struct kcm_object *b) {
  if (a->has_controller != b->has_controller)
    return false;
  return !a->has_controller || (kcm_api_uid_equal(&a->controller.uid, &b->controller.uid) &&
                                !strcmp(a->controller.name, b->controller.name) &&
                                !strcmp(a->controller.kind, b->controller.kind));
}

static void rs_updated(void *ctx, struct kcm_object *old, struct kcm_object *cur) {
  struct kcm_deployment *d;
  bool ref_changed;
  if (old->rv == cur->rv)
    return;
  ref_changed = !same_controller(old, cur);
  if (ref_changed && old->has_controller && (d = resolve(ctx, old)))
    enqueue(ctx, &d->o);
  if (cur->has_controller) {
    if ((d = resolve(ctx, cur)))
      enqueue(ctx, &d->o);
    return;
  }
  if (ref_changed || !kcm_labels_equal(&old->labels, &cur->labels))
    enqueue_matching(ctx, cur);
}

/* Whether any ReplicaSet of the Deployment still has a pod its selector matches. */
static bool has_pods(struct kcm_deployment_controller *c, const struct kcm_deployment *d) {
  struct kcm_object *rs, *p;
  for (rs = kcm_informer_first_owned(c->rs_informer, &d->o.uid); rs; rs = rs->own_next) {
    if (strcmp(rs->ns, d->o.ns) || !kcm_labels_matches(&d->selector, &rs->labels))
      continue;
    for (p = kcm_informer_first_owned(c->pod_informer, &rs->uid); p; p = p->own_next)
      if (!strcmp(p->ns, d->o.ns) && kcm_labels_matches(&d->selector, &p->labels))
        return true;
  }
  return false;
}

/* A Recreate rollout waits for the old pods to be gone: the last one
 * leaving wakes it. */
static void pod_deleted(void *ctx, struct kcm_object *pod, bool unknown) {
  struct kcm_deployment_controller *c = ctx;
  struct kcm_object *rs;
  struct kcm_deployment *d;
  if (!pod->has_controller || strcmp(pod->controller.kind, "ReplicaSet") != 0)
    return;
  rs = kcm_informer_get(c->rs_informer, pod->ns, pod->controller.name);
  if (!rs || !kcm_api_uid_equal(&rs->uid, &pod->controller.uid) || !(d = resolve(c, rs)))
    return;
  if (d->recreate && !has_pods(c, d))
    enqueue(c, &d->o);
}

/* --- jobs --------------------------------------------------------------------------------- */

static void hold(struct kcm_dp_job *j, struct kcm_object *o) {
  struct kcm_object **grown = kcm_buf_grow_items(j->held, j->nheld, sizeof(*grown));
  if (!grown)
    return; /* the cache keeps it alive for this turn */
  j->held = grown;
  j->held[j->nheld++] = kcm_api_ref(o);
}

static void fail(struct kcm_dp_job *j, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct kcm_dp_job *j, int err, const char *fmt, ...) {
  va_list ap;
  if (j->err)
    return;
  j->err = err;
  va_start(ap, fmt);
  if (vasprintf(&j->err_msg, fmt, ap) < 0)
    j->err_msg = NULL;
  va_end(ap);
}

/* The URL path of one of the Deployment's ReplicaSets (name NULL: of their
 * collection) or, with KCM_KIND_DEPLOYMENT, of the Deployment, into
 * path[KCM_CLIENT_PATH_MAX]; an error, the job failed with why, for a name
 * no API server gives out. */
static int path_of(struct kcm_dp_job *j, enum kcm_kind kind, const char *name, const char *sub,
                   char *path) {
  int err = kcm_informer_path(kind, j->d->o.ns, name, sub, path, KCM_CLIENT_PATH_MAX);
  if (err)
    fail(j, err, "%s", path);
  return err;
}

static void record(struct kcm_dp_job *j, bool warning, const char *reason, const char *message) {
  struct kcm_event_object ref;
  kcm_events_object_of(&j->d->o, &ref);
  kcm_events_record(&j->c->events, &ref, warning, reason, "%s", message);
}

static void finish(struct kcm_dp_job *j) {
  struct kcm_deployment_controller *c = j->c;
  struct kcm_dp_job **pp;
  int64_t after = j->plan.requeue_after_ms;
  size_t i;

  c->stats.syncs++;
  kcm_workqueue_done(&c->queue, j->key);
  if (j->err) {
    uint32_t retries = kcm_workqueue_requeues(&c->queue, j->key);
    const char *msg = j->err_msg ? j->err_msg : kcm_strerror(j->err);
    c->stats.errors++;
    if (j->forget) {
      kcm_workqueue_forget(&c->queue, j->key);
    } else if (retries < KCM_DEPLOYMENT_MAX_RETRIES) {
      if (j->err == KCM_ECONFLICT)
        kcm_v(2, "Error syncing deployment deployment=\"%s\" err=\"%s\"", j->key, msg);
      else
        kcm_warn("Error syncing deployment deployment=\"%s\" err=\"%s\" retries=%u", j->key, msg,
                 retries);
      kcm_workqueue_add_rate_limited(&c->queue, j->key);
    } else {
      kcm_warn("Dropping deployment out of the queue deployment=\"%s\" err=\"%s\"", j->key, msg);
      kcm_workqueue_forget(&c->queue, j->key);
      c->stats.dropped++;
    }
  } else {
    kcm_workqueue_forget(&c->queue, j->key);
    if (j->requeue)
      kcm_workqueue_add(&c->queue, j->key);
    else if (after == 0)
      kcm_workqueue_add_rate_limited(&c->queue, j->key);
    else if (after > 0)
      kcm_workqueue_add_after(&c->queue, j->key, (uint64_t)after);
  }
  for (pp = &c->jobs; *pp; pp = &(*pp)->next) {
    if (*pp == j) {
      *pp = j->next;
      break;
    }
  }
  kcm_deployment_plan_release(&j->plan);
  for (i = 0; i < j->nheld; i++)
    kcm_api_unref(j->held[i], c->pool);
  free(j->held);
  free(j->rs_rv);
  free(j->err_msg);
  free(j->key);
  if (!j->gave_back)
    c->running--;
  free(j);
  pump(c);
}

static int request(struct kcm_dp_job *j, const char *method, const char *path, const char *body,
                const char *content_type, kcm_client_done_cb done) {
  struct kcm_client_request_options o = {0};
  int err;
  o.method = method;
  o.path = path;
  o.body = body;
  o.body_len = body ? strlen(body) : 0;
  o.content_type = content_type;
  o.done = done;
  o.data = j;
  o.limiter = KCM_DEPLOYMENT_LIMITER;
  if ((err = kcm_client_request(j->c->client, &o, NULL)))
    return err;
  j->outstanding++;
  return 0;
}

/* --- checking and claiming ------------------------------------------------------------------- */

static void on_check(const struct kcm_client_response *resp, void *data) {
  struct kcm_dp_job *j = data;
  const char *why;
  j->outstanding--;
  if (resp->err)
    fail(j, resp->err, "can't recheck DeletionTimestamp: %s", resp->message);
  else if ((why = kcm_api_recheck(resp->body, &j->d->o.uid)))
    fail(j, KCM_ECONFLICT, "original Deployment %s %s", j->key, why);
  run(j);
}

static void on_claim(const struct kcm_client_response *resp, void *data) {
  struct kcm_dp_job *j = data;
  j->outstanding--;
  /* NotFound: the ReplicaSet is gone; Invalid: its uid changed. */
  if (resp->err && resp->err != KCM_ENOTFOUND && resp->err != KCM_EINVALID)
    fail(j, resp->err, "cannot update the owner of a ReplicaSet: %s", resp->message);
  if (!j->outstanding)
    run(j);
}

static void send_claims(struct kcm_dp_job *j) {
  struct kcm_deployment_controller *c = j->c;
  struct kcm_buf body = KCM_BUF_INIT(1u << 20);
  char path[KCM_CLIENT_PATH_MAX];
  size_t i;
  int err;

  for (i = 0; i < j->plan.nadopt + j->plan.nrelease; i++) {
    bool adopt = i < j->plan.nadopt;
    const struct kcm_replicaset *rs =
        adopt ? j->plan.adopt[i] : j->plan.release[i - j->plan.nadopt];
    if (path_of(j, KCM_KIND_REPLICASET, rs->o.name, NULL, path))
      continue;
    kcm_buf_reset(&body);
    if ((err = kcm_api_owner_patch(&body, adopt, "apps/v1", "Deployment", j->d->o.name,
                                   &j->d->o.uid, &rs->o.uid)) ||
        (err = request(j, "PATCH", path, body.data, "application/strategic-merge-patch+json",
                       on_claim))) {
      fail(j, err, "cannot patch the owner of a ReplicaSet: %s", kcm_strerror(err));
      break;
    }
    if (adopt)
      c->stats.adoptions++;
    else
      c->stats.releases++;
  }
  kcm_buf_release(&body);
}

/* --- steps ------------------------------------------------------------------------------- */

static const struct kcm_dp_rs *step_rs(struct kcm_dp_job *j, const struct kcm_dp_step *s) {
  return &j->plan.rs[s->rs];
}

/* The resourceVersion (and the rest) of a written object. */
static struct json_object *answer(const struct kcm_client_response *resp, uint64_t *rv) {
  struct json_object *doc = json_tokener_parse(resp->body);
  uint64_t v = doc ? kcm_api_resource_version(doc) : 0;
  if (v)
    *rv = v;
  return doc;
}

static void step_done(struct kcm_dp_job *j, const struct kcm_client_response *resp) {
  const struct kcm_dp_step *s = j->current;
  if (!resp->err) {
    if (s->reason)
      record(j, s->warning, s->reason, s->message);
    run(j);
    return;
  }
  if (s->op == KCM_DP_DELETE && resp->err == KCM_ENOTFOUND) {
    run(j);
    return;
  }
  if (s->lenient) {
    kcm_v(2, "ignoring a failed write deployment=\"%s\" err=\"%s\"", j->key, resp->message);
    j->skipping = true;
    j->skip_group = s->group;
    run(j);
    return;
  }
  fail(j, resp->err, "%s", resp->message);
  j->phase = PHASE_DONE;
  run(j);
}

/* The resourceVersion of a written object, when its answer has one. */
static void answer_rv(const struct kcm_client_response *resp, uint64_t *rv) {
  uint64_t v = kcm_api_resource_version_text(resp->body, resp->body_len);
  if (v)
    *rv = v;
}

static void on_rs_write(const struct kcm_client_response *resp, void *data) {
  struct kcm_dp_job *j = data;
  const struct kcm_dp_step *s = j->current;
  j->outstanding--;
  if (!resp->err) {
    answer_rv(resp, &j->rs_rv[s->rs]);
    if (s->op == KCM_DP_SCALE) {
      j->c->stats.rs_scaled++;
      kcm_informer_written(j->c->rs_informer, j->d->o.ns, step_rs(j, s)->name,
                           j->rs_rv[s->rs]);
    } else {
      j->c->stats.rs_deleted++;
    }
  }
  step_done(j, resp);
}

static void on_d_write(const struct kcm_client_response *resp, void *data) {
  struct kcm_dp_job *j = data;
  j->outstanding--;
  if (!resp->err) {
    answer_rv(resp, &j->d_rv);
    j->c->stats.status_writes++;
    kcm_informer_written(j->c->d_informer, j->d->o.ns, j->d->o.name, j->d_rv);
  }
  step_done(j, resp);
}

/* A write whose outcome changes nothing: the sync fails either way. */
static void on_side_write(const struct kcm_client_response *resp, void *data) {
  struct kcm_dp_job *j = data;
  j->outstanding--;
  if (resp->err)
    kcm_v(2, "status write failed deployment=\"%s\" err=\"%s\"", j->key, resp->message);
  run(j);
}

/* After a collision: bump collisionCount, then fail with the create's error. */
static void on_collision_written(const struct kcm_client_response *resp, void *data) {
  struct kcm_dp_job *j = data;
  j->outstanding--;
  if (!resp->err)
    kcm_v(2, "Found a hash collision for deployment - bumping collisionCount deployment=\"%s\" "
             "collisionCount=%d",
          j->key, kcm_deployment_next_collision_count(j->d));
  run(j);
}

static void collide(struct kcm_dp_job *j, const char *message) {
  struct kcm_buf body = KCM_BUF_INIT(1u << 16);
  char path[KCM_CLIENT_PATH_MAX];
  j->c->stats.collisions++;
  fail(j, KCM_ECONFLICT, "%s", message);
  j->phase = PHASE_DONE;
  if (path_of(j, KCM_KIND_DEPLOYMENT, j->d->o.name, "status", path) ||
      kcm_deployment_collision_body(j->d, j->d_rv, &body) ||
      request(j, "PATCH", path, body.data, "application/merge-patch+json", on_collision_written))
    kcm_warn("cannot bump collisionCount deployment=\"%s\"", j->key);
  kcm_buf_release(&body);
  run(j);
}

/* The template of a ReplicaSet in an answer, digested for comparison. */
static bool answer_template(struct json_object *doc, uint64_t *key, char **canonical) {
  struct json_object *spec, *tmpl;
  struct kcm_buf b = KCM_BUF_INIT(4u << 20);
  if (!doc || !json_object_object_get_ex(doc, "spec", &spec) ||
      !json_object_object_get_ex(spec, "template", &tmpl) || !tmpl ||
      kcm_api_template_key(tmpl, key))
    return false;
  if (canonical) {
    if (kcm_api_canonical_json(tmpl, &b)) {
      kcm_buf_release(&b);
      return false;
    }
    *canonical = kcm_buf_take(&b);
  }
  return true;
}

/* A dry run of the create tells whether the API server changes the
 * template on the way in; if the existing ReplicaSet holds exactly what
 * it makes of ours, that one is ours. Otherwise it is a hash collision. */
static void on_dry_run(const struct kcm_client_response *resp, void *data) {
  struct kcm_dp_job *j = data;
  const struct kcm_dp_rs *r = step_rs(j, j->current);
  struct kcm_replicaset *existing =
      (struct kcm_replicaset *)kcm_informer_get(j->c->rs_informer, j->d->o.ns, r->name);
  struct json_object *doc;
  char *made = NULL;
  uint64_t key = 0, rv = 0;

  j->outstanding--;
  doc = resp->err ? NULL : answer(resp, &rv);
  if (existing && answer_template(doc, &key, &made) && key == existing->template_key &&
      kcm_api_template_equal(made, existing->template)) {
    struct kcm_dp_alias a = {j->d->template_key, existing->template_key, existing->o.uid};
    kcm_warn("the API server changes the pod template of new ReplicaSets; treating the existing "
             "one as this template's deployment=\"%s\" replicaset=\"%s\"",
             j->key, r->name);
    alias_put(j->c, j->key, &a);
    j->requeue = true;
    j->phase = PHASE_DONE;
    free(made);
    json_object_put(doc);
    run(j);
    return;
  }
  free(made);
  json_object_put(doc);
  collide(j, "a ReplicaSet with the new ReplicaSet's name exists with another template");
}

static void dry_run(struct kcm_dp_job *j) {
  struct json_object *doc = json_tokener_parse(j->plan.create_body), *meta;
  char path[KCM_CLIENT_PATH_MAX + 16], prefix[300];
  char *body;

  if (!doc || !json_object_object_get_ex(doc, "metadata", &meta)) {
    json_object_put(doc);
    collide(j, "a ReplicaSet with the new ReplicaSet's name exists with another template");
    return;
  }
  json_object_object_del(meta, "name");
  snprintf(prefix, sizeof(prefix), "%s-", j->d->o.name);
  json_object_object_add(meta, "generateName", json_object_new_string(prefix));
  body = kcm_api_json_dup(doc);
  json_object_put(doc);
  j->alias_checked = true;
  if (path_of(j, KCM_KIND_REPLICASET, NULL, NULL, path))
    collide(j, path);
  else if (!body || request(j, "POST", strcat(path, "?dryRun=All"), body, NULL, on_dry_run))
    collide(j, "out of memory");
  free(body);
}

static void on_created(const struct kcm_client_response *resp, void *data) {
  struct kcm_dp_job *j = data;
  const struct kcm_dp_step *s = j->current;
  const struct kcm_dp_rs *r = step_rs(j, s);
  struct kcm_buf body = KCM_BUF_INIT(1u << 20);
  char path[KCM_CLIENT_PATH_MAX], *msg = NULL;

  j->outstanding--;
  if (!resp->err) {
    struct json_object *doc = answer(resp, &j->rs_rv[s->rs]);
    uint64_t key;
    j->c->stats.rs_created++;
    if (answer_template(doc, &key, NULL) && key != j->d->template_key) {
      struct json_object *meta, *uid;
      struct kcm_dp_alias a = {j->d->template_key, key, {{0}}};
      if (json_object_object_get_ex(doc, "metadata", &meta) &&
          json_object_object_get_ex(meta, "uid", &uid) &&
          !kcm_api_parse_uid(json_object_get_string(uid), &a.rs_uid)) {
        kcm_warn("the API server changed the pod template of a new ReplicaSet; it stays this "
                 "template's deployment=\"%s\" replicaset=\"%s\"",
                 j->key, r->name);
        alias_put(j->c, j->key, &a);
      }
    }
    json_object_put(doc);
    step_done(j, resp);
    return;
  }
  if (resp->status == 409 && strstr(resp->body, "\"AlreadyExists\"")) {
    struct kcm_replicaset *existing =
        (struct kcm_replicaset *)kcm_informer_get(j->c->rs_informer, j->d->o.ns, r->name);
    if (!existing) {
      fail(j, KCM_ECONFLICT, "replicaset %s exists but is not in the cache yet", r->name);
      j->phase = PHASE_DONE;
      run(j);
    } else if (existing->o.has_controller &&
               kcm_api_uid_equal(&existing->o.controller.uid, &j->d->o.uid) &&
               kcm_api_template_equal(existing->template, j->d->template)) {
      j->requeue = true; /* ours, seen late: the next sync takes it as the new one */
      j->phase = PHASE_DONE;
      run(j);
    } else if (existing->o.has_controller &&
               kcm_api_uid_equal(&existing->o.controller.uid, &j->d->o.uid) &&
               !j->alias_checked) {
      dry_run(j);
    } else {
      collide(j, resp->message);
    }
    return;
  }
  if (kcm_client_namespace_terminating(resp)) {
    fail(j, resp->err, "%s", resp->message);
    j->forget = true;
    j->phase = PHASE_DONE;
    run(j);
    return;
  }
  if (asprintf(&msg, "Failed to create new replica set \"%s\": %s", r->name, resp->message) < 0)
    msg = NULL;
  fail(j, resp->err, "%s", msg ? msg : resp->message);
  j->phase = PHASE_DONE;
  if (msg) {
    record(j, true, "ReplicaSetCreateError", msg);
    /* Its outcome does not matter: the failure is reported either way. */
    if (!path_of(j, KCM_KIND_DEPLOYMENT, j->d->o.name, "status", path) &&
        !kcm_deployment_create_failed_body(j->d, s, msg, now_ms(), j->d_rv, &body) && body.len)
      request(j, "PATCH", path, body.data, "application/merge-patch+json", on_side_write);
  }
  free(msg);
  kcm_buf_release(&body);
  run(j);
}

/* Send the next step, or finish. */
static void send_step(struct kcm_dp_job *j, const struct kcm_dp_step *s) {
  struct kcm_buf body = KCM_BUF_INIT(8u << 20);
  char path[KCM_CLIENT_PATH_MAX];
  int err = 0;

  j->current = s;
  switch (s->op) {
  case KCM_DP_EVENT:
    break;
  case KCM_DP_SCALE:
    if (!(err = path_of(j, KCM_KIND_REPLICASET, step_rs(j, s)->name, NULL, path)) &&
        !(err = kcm_deployment_scale_body(&j->plan, s, j->rs_rv[s->rs], &body)))
      err = request(j, "PATCH", path, body.data, "application/merge-patch+json", on_rs_write);
    break;
  case KCM_DP_CREATE:
    if (!(err = path_of(j, KCM_KIND_REPLICASET, NULL, NULL, path)))
      err = request(j, "POST", path, j->plan.create_body, NULL, on_created);
    break;
  case KCM_DP_DELETE:
    if (!(err = path_of(j, KCM_KIND_REPLICASET, step_rs(j, s)->name, NULL, path)) &&
        !(err = kcm_api_delete_options(&body, &step_rs(j, s)->rs->o.uid, j->rs_rv[s->rs])))
      err = request(j, "DELETE", path, body.data, NULL, on_rs_write);
    break;
  case KCM_DP_STATUS:
    if (!(err = path_of(j, KCM_KIND_DEPLOYMENT, j->d->o.name, "status", path)) &&
        !(err = kcm_deployment_status_body(j->d, &j->plan, j->d_rv, &body)))
      err = request(j, "PATCH", path, body.data, "application/merge-patch+json", on_d_write);
    if (!err && j->step >= j->plan.nsteps) {
      /* The last step: only its answer is left to wait for, so another key
       * may have the worker while this one stays in processing. */
      j->gave_back = true;
      j->c->running--;
      pump(j->c);
    }
    break;
  case KCM_DP_ROLLBACK:
    if (!(err = path_of(j, KCM_KIND_DEPLOYMENT, j->d->o.name, NULL, path)) &&
        !(err = kcm_deployment_rollback_body(&j->plan, j->d_rv, &body)))
      err = request(j, "PATCH", path, body.data, "application/json-patch+json", on_d_write);
    break;
  }
  kcm_buf_release(&body);
  if (err) {
    fail(j, err, "cannot send a write: %s", kcm_strerror(err));
    j->phase = PHASE_DONE;
  }
}

/* Move the sync on: check, claim, the steps one by one, then finish. */
static void run(struct kcm_dp_job *j) {
  while (!j->outstanding) {
    switch (j->phase) {
    case PHASE_CHECK:
      j->phase = PHASE_CLAIM;
      if (!j->err)
        send_claims(j);
      break;
    case PHASE_CLAIM:
      j->phase = j->err ? PHASE_DONE : PHASE_STEPS;
      break;
    case PHASE_STEPS: {
      const struct kcm_dp_step *s;
      if (j->err || j->step >= j->plan.nsteps) {
        j->phase = PHASE_DONE;
        break;
      }
      s = &j->plan.steps[j->step++];
      if (j->skipping && s->group == j->skip_group)
        break;
      j->skipping = false;
      if (s->op == KCM_DP_EVENT) {
        record(j, s->warning, s->reason, s->message);
        break;
      }
      send_step(j, s);
      break;
    }
    case PHASE_DONE:
      finish(j);
      return;
    }
  }
}

/* Recreate: whether the ReplicaSet still has a pod that is not done. */
static bool pods_running(void *ctx, const struct kcm_replicaset *rs) {
  struct kcm_dp_job *j = ctx;
  struct kcm_object *o;
  for (o = kcm_informer_first_owned(j->c->pod_informer, &rs->o.uid); o; o = o->own_next) {
    const struct kcm_pod *p = (const struct kcm_pod *)o;
    if (strcmp(o->ns, rs->o.ns) || !kcm_labels_matches(&j->d->selector, &o->labels))
      continue;
    if (p->phase != KCM_POD_SUCCEEDED && p->phase != KCM_POD_FAILED)
      return true;
  }
  return false;
}

static void start_job(struct kcm_deployment_controller *c, const char *key) {
  struct kcm_dp_job *j = calloc(1, sizeof(*j));
  const char *slash = strchr(key, '/');
  struct kcm_replicaset **cands = NULL;
  struct kcm_dp_input in;
  struct alias_entry *al;
  struct kcm_object *o;
  char ns[300];
  size_t n = 0, i;
  bool behind;
  int err;

  c->running++;
  if (!j || !(j->key = strdup(key)) || !slash || (size_t)(slash - key) >= sizeof(ns)) {
    if (j)
      free(j->key);
    free(j);
    c->running--;
    kcm_workqueue_done(&c->queue, key);
    return;
  }
  j->c = c;
  j->next = c->jobs;
  c->jobs = j;
  j->plan.new_rs = -1;
  j->plan.requeue_after_ms = -1;
  j->phase = PHASE_DONE;
  snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
  o = kcm_informer_get(c->d_informer, ns, slash + 1);
  if (!o) {
    kcm_v(2, "Deployment has been deleted deployment=\"%s\"", key);
    alias_drop(c, key);
    run(j);
    return;
  }
  hold(j, o);
  j->d = (struct kcm_deployment *)o;
  j->d_rv = o->rv;
  behind = kcm_informer_behind(c->d_informer, o);
  /* Candidates: the ReplicaSets it controls and the orphans of its namespace. */
  for (i = 0; i < 2 && !j->err; i++) {
    for (o = kcm_informer_first_owned(c->rs_informer, i ? NULL : &j->d->o.uid); o;
         o = o->own_next) {
      struct kcm_replicaset **grown;
      if (strcmp(o->ns, ns) != 0)
        continue;
      if (!(grown = kcm_buf_grow_items(cands, n, sizeof(*grown)))) {
        fail(j, KCM_ENOMEM, "%s", "out of memory");
        break;
      }
      cands = grown;
      cands[n++] = (struct kcm_replicaset *)o;
      hold(j, o);
      behind = behind || kcm_informer_behind(c->rs_informer, o);
    }
  }
  if (behind && !j->err) {
    /* A write to the Deployment or one of its ReplicaSets is on its way to
     * the cache; its event queues the key again. Planning now would act on
     * old numbers and every guarded write would conflict. */
    kcm_v(4, "waiting for the cache to catch up deployment=\"%s\"", key);
    c->stats.deferred++;
    free(cands);
    run(j);
    return;
  }
  memset(&in, 0, sizeof(in));
  in.d = j->d;
  in.candidates = cands;
  in.ncandidates = n;
  in.pods_running = pods_running;
  in.ctx = j;
  al = kcm_map_get(&c->aliases, key);
  in.alias = al ? &al->alias : NULL;
  in.now_ms = now_ms();
  if (!j->err && (err = kcm_deployment_plan(&in, &j->plan)))
    fail(j, err, "cannot plan the sync: %s", kcm_strerror(err));
  free(cands);
  if (j->err) {
    run(j);
    return;
  }
  if (j->plan.invalid) {
    kcm_warn("invalid selector; not syncing deployment=\"%s\"", key);
    run(j);
    return;
  }
  j->rs_rv = calloc(j->plan.nrs + 1, sizeof(*j->rs_rv));
  if (!j->rs_rv) {
    fail(j, KCM_ENOMEM, "%s", "out of memory");
    run(j);
    return;
  }
  for (i = 0; i < j->plan.nrs; i++)
    j->rs_rv[i] = j->plan.rs[i].rs ? j->plan.rs[i].rs->o.rv : 0;
  j->phase = PHASE_CHECK;
  if (j->plan.nadopt) {
    char path[KCM_CLIENT_PATH_MAX];
    if (!path_of(j, KCM_KIND_DEPLOYMENT, j->d->o.name, NULL, path) &&
        request(j, "GET", path, NULL, NULL, on_check))
      fail(j, KCM_ENOMEM, "%s", "out of memory");
  }
  run(j);
}

static void pump(struct kcm_deployment_controller *c) {
  if (c->pumping)
    return; /* the loop below goes on when the nested job gives back */
  c->pumping = true;
  while (!c->stopping && c->running < c->workers) {
    const char *key = kcm_workqueue_get(&c->queue);
    if (!key)
      break;
    start_job(c, key);
  }
  c->pumping = false;
}

static void on_ready(struct kcm_workqueue *q, void *data) { pump(data); }

/* --- lifecycle ---------------------------------------------------------------------------- */

int kcm_deployment_init(struct kcm_deployment_controller *c, uv_loop_t *loop,
                        struct kcm_client *client, struct kcm_informer *d_informer,
                        struct kcm_informer *rs_informer, struct kcm_informer *pod_informer,
                        struct kcm_intern *pool, uint32_t workers) {
  struct kcm_informer_handler d_h = {d_added, d_updated, d_deleted, NULL};
  struct kcm_informer_handler rs_h = {rs_added, rs_updated, rs_deleted, NULL};
  struct kcm_informer_handler pod_h = {NULL, NULL, pod_deleted, NULL};
  int err;

  memset(c, 0, sizeof(*c));
  c->loop = loop;
  c->client = client;
  c->d_informer = d_informer;
  c->rs_informer = rs_informer;
  c->pod_informer = pod_informer;
  c->pool = pool;
  c->workers = workers ? workers : 5;
  kcm_workqueue_init(&c->queue, loop, "deployment");
  kcm_events_init(&c->events, client, "deployment-controller");
  c->events.limiter = KCM_DEPLOYMENT_LIMITER;
  kcm_map_init(&c->aliases, &alias_type);
  d_h.ctx = rs_h.ctx = pod_h.ctx = c;
  if ((err = kcm_informer_add_handler(d_informer, &d_h)) ||
      (err = kcm_informer_add_handler(rs_informer, &rs_h)) ||
      (err = kcm_informer_add_handler(pod_informer, &pod_h)))
    return err;
  return 0;
}

void kcm_deployment_run(struct kcm_deployment_controller *c) {
  kcm_workqueue_set_ready(&c->queue, on_ready, c);
  pump(c);
}

static void on_queue_closed(struct kcm_workqueue *q, void *data) {
  struct kcm_deployment_controller *c = data;
  if (c->on_stopped)
    c->on_stopped(c);
}

static void on_drained(struct kcm_workqueue *q, void *data) {
  kcm_workqueue_close(q, on_queue_closed, data);
}

void kcm_deployment_stop(struct kcm_deployment_controller *c,
                         void (*on_stopped)(struct kcm_deployment_controller *c)) {
  c->stopping = true;
  c->on_stopped = on_stopped;
  kcm_workqueue_shutdown(&c->queue, on_drained, c);
}

void kcm_deployment_release(struct kcm_deployment_controller *c) {
  struct kcm_map_iter it;
  struct alias_entry *e;
  kcm_events_release(&c->events);
  kcm_map_iter_init(&it, &c->aliases);
  while ((e = kcm_map_next(&it))) {
    free(e->key);
    free(e);
  }
  kcm_map_release(&c->aliases);
}
