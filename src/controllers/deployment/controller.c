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

#include "kcm/buf.h"
#include "kcm/deployment.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"
#include "kcm/labels.h"
#include "kcm/log.h"
#include "kcm/runtime.h"

#include "internal.h"

/* The Deployment-to-ReplicaSet aliases, keyed by the Deployment's key. */
struct alias_entry {
  char *key;
  struct kcm_deployment_alias alias;
};

static void enqueue(struct kcm_deployment_controller *c, const struct kcm_object *d) {
  kcm_runtime_enqueue(&c->rt, d);
}

static const struct kcm_selector *selector_of(const struct kcm_object *d) {
  return &((const struct kcm_deployment *)d)->selector;
}

/* --- aliases ------------------------------------------------------------------------------ */

static const struct kcm_map_type alias_type = KCM_MAP_STRING_KEYED(struct alias_entry, key);

static void alias_drop(struct kcm_deployment_controller *c, const char *key) {
  struct alias_entry *e = kcm_map_remove(&c->aliases, key);
  if (e) {
    free(e->key);
    free(e);
  }
}

static void alias_put(struct kcm_deployment_controller *c, const char *key,
                      const struct kcm_deployment_alias *a) {
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

/* Enqueue every Deployment of the namespace whose selector takes the orphan. */
static void enqueue_matching(struct kcm_deployment_controller *c, const struct kcm_object *rs) {
  if (kcm_runtime_enqueue_selecting(&c->rt, c->d_informer, rs, selector_of) > 1)
    kcm_v(4, "user error: more than one Deployment selects the ReplicaSet replicaset=\"%s/%s\"",
          rs->ns, rs->name);
}

static struct kcm_deployment *resolve(struct kcm_deployment_controller *c,
                                      const struct kcm_object *rs) {
  return (struct kcm_deployment *)kcm_informer_controller_of(c->d_informer, rs, "Deployment");
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

/* Whether only a ReplicaSet's status counts or conditions changed: no
 * change of spec, metadata or observed generation. */
static bool status_moved(const struct kcm_replicaset *old, const struct kcm_replicaset *cur) {
  return old->o.generation == cur->o.generation &&
         old->status.observed_generation == cur->status.observed_generation &&
         kcm_labels_equal(&old->o.labels, &cur->o.labels) &&
         kcm_api_pairs_equal(&old->annotations, &cur->annotations);
}

/* Whether a ReplicaSet's status reports its spec met: as many pods as it
 * wants, all of them available. A rollout's step ends there. */
static bool settled(const struct kcm_replicaset *rs) {
  return rs->status.observed_generation >= rs->o.generation &&
         rs->status.replicas == rs->replicas && rs->status.available == rs->replicas;
}

/* Queue d for a change of its ReplicaSets' status: when d's last writes
 * are younger than the interval, its sync waits for the rest of it and
 * then sees every change meanwhile at once. Every other change (its own
 * spec, a ReplicaSet's spec or metadata, a sync that did not write) is
 * synced at once. */
static void enqueue_paced(struct kcm_deployment_controller *c, const struct kcm_deployment *d) {
  char key[600];
  uint64_t wait;
  snprintf(key, sizeof(key), "%s/%s", d->o.ns, d->o.name);
  wait = kcm_pacer_wait(&c->sync_pacer, key, uv_now(c->rt.loop));
  if (!wait) {
    kcm_runtime_enqueue_key(&c->rt, key);
    return;
  }
  c->stats.paced++;
  kcm_runtime_enqueue_after(&c->rt, key, wait);
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
    if (!(d = resolve(ctx, cur)))
      return;
    if (!ref_changed &&
        status_moved((const struct kcm_replicaset *)old, (const struct kcm_replicaset *)cur) &&
        !settled((const struct kcm_replicaset *)cur))
      enqueue_paced(ctx, d);
    else
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
  struct kcm_object *rs = kcm_informer_controller_of(c->rs_informer, pod, "ReplicaSet");
  struct kcm_deployment *d;
  if (!rs || !(d = resolve(c, rs)))
    return;
  if (d->recreate && !has_pods(c, d))
    enqueue(c, &d->o);
}

/* --- syncs ------------------------------------------------------------------------------- */

struct dp_job {
  struct kcm_runtime_job base;
  struct kcm_deployment_controller *c;
  struct kcm_deployment *d;
  struct kcm_deployment_plan plan;
  uint64_t d_rv;            /* the Deployment's latest resourceVersion */
  uint64_t *rs_rv;          /* each planned ReplicaSet's */
  const struct kcm_deployment_step *current; /* the step in flight */
  bool alias_checked;
  bool probe;               /* the status write asks whether the server keeps
                               status.terminatingReplicas */
};

#define FAIL(j, err, ...) kcm_runtime_fail(&(j)->base, err, __VA_ARGS__)

static void record(struct dp_job *j, bool warning, const char *reason, const char *message) {
  struct kcm_event_object ref;
  kcm_events_object_of(&j->d->o, &ref);
  kcm_events_record(&j->c->rt.events, &ref, warning, reason, "%s", message);
}

/* Send req, after which the sync ends whatever it answers; false when it
 * could not be sent. */
static bool send_last(struct dp_job *j, struct kcm_write *req, kcm_client_done_cb done) {
  kcm_runtime_halt(&j->base);
  return !kcm_runtime_send(&j->base, req, done, j);
}

/* --- steps ------------------------------------------------------------------------------- */

static const struct kcm_deployment_rs *step_rs(struct dp_job *j,
                                               const struct kcm_deployment_step *s) {
  return &j->plan.rs[s->rs];
}

/* A step's write has answered. */
static void step_done(struct dp_job *j, const struct kcm_client_response *resp) {
  const struct kcm_deployment_step *s = j->current;
  if (!resp->err) {
    if (s->reason)
      record(j, s->warning, s->reason, s->message);
  } else if (s->op == KCM_DEPLOYMENT_STEP_DELETE && resp->err == KCM_ENOTFOUND) {
    /* gone already */
  } else if (s->lenient) {
    kcm_v(2, "ignoring a failed write deployment=\"%s\" err=\"%s\"", j->base.key,
          resp->message);
    kcm_runtime_skip_group(&j->base, s->at.group);
  } else {
    FAIL(j, resp->err, "%s", resp->message);
    kcm_runtime_halt(&j->base);
  }
  kcm_runtime_answered(&j->base);
}

/* The resourceVersion of a written object, when its answer has one. */
static void answer_rv(const struct kcm_client_response *resp, uint64_t *rv) {
  uint64_t v = kcm_api_resource_version_text(resp->body, resp->body_len);
  if (v)
    *rv = v;
}

static void on_rs_write(const struct kcm_client_response *resp, void *data) {
  struct dp_job *j = data;
  const struct kcm_deployment_step *s = j->current;
  if (!resp->err) {
    answer_rv(resp, &j->rs_rv[s->rs]);
    if (s->op == KCM_DEPLOYMENT_STEP_SCALE) {
      j->c->stats.rs_scaled++;
      kcm_informer_written(j->c->rs_informer, j->d->o.ns, step_rs(j, s)->name,
                           j->rs_rv[s->rs]);
      kcm_runtime_wrote(&j->base, j->rs_rv[s->rs]);
    } else {
      j->c->stats.rs_deleted++;
    }
  }
  step_done(j, resp);
}

static void on_d_write(const struct kcm_client_response *resp, void *data) {
  struct dp_job *j = data;
  if (!resp->err) {
    answer_rv(resp, &j->d_rv);
    j->c->stats.status_writes++;
    kcm_informer_written(j->c->d_informer, j->d->o.ns, j->d->o.name, j->d_rv);
  }
  if (j->probe) {
    kcm_runtime_field_answer(&j->c->terminating, resp->err ? NULL : resp->body, resp->body_len,
                             "Deployment");
    j->probe = false;
  }
  step_done(j, resp);
}

/* A write whose outcome changes nothing: the sync fails either way. */
static void on_side_write(const struct kcm_client_response *resp, void *data) {
  struct dp_job *j = data;
  if (resp->err)
    kcm_v(2, "status write failed deployment=\"%s\" err=\"%s\"", j->base.key, resp->message);
  kcm_runtime_answered(&j->base);
}

/* After a collision: bump collisionCount, then fail with the create's error. */
static void on_collision_written(const struct kcm_client_response *resp, void *data) {
  struct dp_job *j = data;
  if (!resp->err)
    kcm_v(2, "Found a hash collision for deployment - bumping collisionCount deployment=\"%s\" "
             "collisionCount=%d",
          j->base.key, kcm_deployment_next_collision_count(j->d));
  kcm_runtime_answered(&j->base);
}

static void collide(struct dp_job *j, const char *message) {
  struct kcm_buf body = KCM_BUF_INIT(1u << 16);
  struct kcm_write req;
  j->c->stats.collisions++;
  FAIL(j, KCM_ECONFLICT, "%s", message);
  kcm_runtime_halt(&j->base);
  if (kcm_deployment_collision_body(j->d, j->d_rv, &body) ||
      kcm_writer_patch(&req, KCM_KIND_DEPLOYMENT, j->d->o.ns, j->d->o.name, "status",
                       KCM_PATCH_MERGE, body.data) ||
      !send_last(j, &req, on_collision_written))
    kcm_warn("cannot bump collisionCount deployment=\"%s\"", j->base.key);
  kcm_buf_release(&body);
}

/* The ReplicaSet an answer holds, decoded as the cache decodes it; NULL
 * for a failed request or another body. The caller drops it with
 * kcm_api_unref() and the controller's pool. */
static struct kcm_replicaset *answer_rs(struct dp_job *j, const struct kcm_client_response *resp) {
  struct kcm_object *o = NULL;
  struct kcm_api_error e;
  if (resp->err || !resp->body ||
      kcm_api_decode_text(KCM_KIND_REPLICASET, resp->body, resp->body_len, NULL, NULL,
                          j->c->rt.pool, &o, &e))
    return NULL;
  return (struct kcm_replicaset *)o;
}

/* A dry run of the create tells whether the API server changes the
 * template on the way in; if the existing ReplicaSet holds exactly what
 * it makes of ours, that one is ours. Otherwise it is a hash collision. */
static void on_dry_run(const struct kcm_client_response *resp, void *data) {
  struct dp_job *j = data;
  const struct kcm_deployment_rs *r = step_rs(j, j->current);
  struct kcm_replicaset *existing =
      (struct kcm_replicaset *)kcm_informer_get(j->c->rs_informer, j->d->o.ns, r->name);
  struct kcm_replicaset *made = answer_rs(j, resp);

  if (existing && made && made->template_key == existing->template_key &&
      kcm_api_template_equal(made->template, existing->template)) {
    struct kcm_deployment_alias a = {j->d->template_key, existing->template_key, existing->o.uid};
    kcm_warn("the API server changes the pod template of new ReplicaSets; treating the existing "
             "one as this template's deployment=\"%s\" replicaset=\"%s\"",
             j->base.key, r->name);
    alias_put(j->c, j->base.key, &a);
    j->base.requeue = true;
    kcm_runtime_halt(&j->base);
  } else {
    collide(j, "a ReplicaSet with the new ReplicaSet's name exists with another template");
  }
  if (made)
    kcm_api_unref(&made->o, j->c->rt.pool);
  kcm_runtime_answered(&j->base);
}

/* The create's body with the name left to the API server (generateName). */
static int dry_run_body(const struct dp_job *j, struct kcm_buf *out) {
  static const char *const name[] = {"metadata", "name", NULL};
  static const char *const generate[] = {"metadata", "generateName", NULL};
  struct kcm_buf unnamed = KCM_BUF_INIT(KCM_API_OBJECT_MAX);
  struct kcm_jsonw w;
  char prefix[300];
  int err;

  snprintf(prefix, sizeof(prefix), "%s-", j->d->o.name);
  kcm_jsonw_start(&w, &unnamed);
  kcm_jsonw_copy_set(&w, j->plan.create_body, strlen(j->plan.create_body), name, NULL);
  if (!(err = kcm_jsonw_finish(&w))) {
    kcm_jsonw_start(&w, out);
    kcm_jsonw_copy_set(&w, unnamed.data, unnamed.len, generate, prefix);
    err = kcm_jsonw_finish(&w);
  }
  kcm_buf_release(&unnamed);
  return err;
}

static void dry_run(struct dp_job *j) {
  struct kcm_buf body = KCM_BUF_INIT(KCM_API_OBJECT_MAX);
  struct kcm_write req;

  j->alias_checked = true;
  if (dry_run_body(j, &body))
    collide(j, "a ReplicaSet with the new ReplicaSet's name exists with another template");
  else if (kcm_writer_create(&req, KCM_KIND_REPLICASET, j->d->o.ns, body.data, true))
    collide(j, req.path);
  else if (kcm_runtime_send(&j->base, &req, on_dry_run, j))
    collide(j, "cannot send a dry run");
  kcm_buf_release(&body);
}

/* The API server made the new ReplicaSet; if it changed the template on
 * the way in, the ReplicaSet still belongs to this template. */
static void created(struct dp_job *j, const struct kcm_client_response *resp) {
  const struct kcm_deployment_step *s = j->current;
  struct kcm_replicaset *made;

  answer_rv(resp, &j->rs_rv[s->rs]);
  j->c->stats.rs_created++;
  kcm_runtime_wrote(&j->base, j->rs_rv[s->rs]);
  made = answer_rs(j, resp);
  if (made && made->template_key != j->d->template_key) {
    struct kcm_deployment_alias a = {j->d->template_key, made->template_key, made->o.uid};
    kcm_warn("the API server changed the pod template of a new ReplicaSet; it stays this "
             "template's deployment=\"%s\" replicaset=\"%s\"",
             j->base.key, step_rs(j, s)->name);
    alias_put(j->c, j->base.key, &a);
  }
  if (made)
    kcm_api_unref(&made->o, j->c->rt.pool);
}

/* AlreadyExists: ours seen late, ours changed by the API server, or a hash
 * collision. */
static void name_taken(struct dp_job *j, const struct kcm_client_response *resp) {
  const struct kcm_deployment_rs *r = step_rs(j, j->current);
  struct kcm_replicaset *existing =
      (struct kcm_replicaset *)kcm_informer_get(j->c->rs_informer, j->d->o.ns, r->name);
  bool ours = existing && existing->o.has_controller &&
              kcm_api_uid_equal(&existing->o.controller.uid, &j->d->o.uid);

  if (!existing) {
    FAIL(j, KCM_ECONFLICT, "replicaset %s exists but is not in the cache yet", r->name);
    kcm_runtime_halt(&j->base);
  } else if (ours && kcm_api_template_equal(existing->template, j->d->template)) {
    j->base.requeue = true; /* seen late: the next sync takes it as the new one */
    kcm_runtime_halt(&j->base);
  } else if (ours && !j->alias_checked) {
    dry_run(j);
  } else {
    collide(j, resp->message);
  }
}

/* A create failed for another reason: reported as upstream reports it. */
static void create_failed(struct dp_job *j, const struct kcm_client_response *resp) {
  struct kcm_buf body = KCM_BUF_INIT(1u << 20);
  struct kcm_write req;
  char *msg = NULL;

  if (asprintf(&msg, "Failed to create new replica set \"%s\": %s",
               step_rs(j, j->current)->name, resp->message) < 0)
    msg = NULL;
  FAIL(j, resp->err, "%s", msg ? msg : resp->message);
  kcm_runtime_halt(&j->base);
  if (msg) {
    record(j, true, "ReplicaSetCreateError", msg);
    /* Its outcome does not matter: the failure is reported either way. */
    if (!kcm_deployment_create_failed_body(j->d, j->current, msg, kcm_runtime_wall_ms(j->base.rt), j->d_rv,
                                           &body) &&
        body.len &&
        !kcm_writer_patch(&req, KCM_KIND_DEPLOYMENT, j->d->o.ns, j->d->o.name, "status",
                          KCM_PATCH_MERGE, body.data))
      kcm_runtime_send(&j->base, &req, on_side_write, j);
  }
  free(msg);
  kcm_buf_release(&body);
}

static void on_created(const struct kcm_client_response *resp, void *data) {
  struct dp_job *j = data;
  if (!resp->err) {
    created(j, resp);
    step_done(j, resp);
    return;
  }
  if (resp->status == 409 && strstr(resp->body, "\"AlreadyExists\"")) {
    name_taken(j, resp);
  } else if (kcm_client_namespace_terminating(resp)) {
    FAIL(j, resp->err, "%s", resp->message);
    j->base.forget = true;
    kcm_runtime_halt(&j->base);
  } else {
    create_failed(j, resp);
  }
  kcm_runtime_answered(&j->base);
}

/* Build the write of step s into req (body: its storage). */
static int build_step(struct dp_job *j, const struct kcm_deployment_step *s, struct kcm_buf *body,
                      struct kcm_write *req) {
  const char *ns = j->d->o.ns;
  int err;
  switch (s->op) {
  case KCM_DEPLOYMENT_STEP_SCALE:
    if ((err = kcm_deployment_scale_body(&j->plan, s, j->rs_rv[s->rs], body)))
      return err;
    return kcm_writer_patch(req, KCM_KIND_REPLICASET, ns, step_rs(j, s)->name, NULL,
                            KCM_PATCH_MERGE, body->data);
  case KCM_DEPLOYMENT_STEP_CREATE:
    return kcm_writer_create(req, KCM_KIND_REPLICASET, ns, j->plan.create_body, false);
  case KCM_DEPLOYMENT_STEP_DELETE:
    if ((err = kcm_api_delete_options(body, &step_rs(j, s)->rs->o.uid, j->rs_rv[s->rs])))
      return err;
    return kcm_writer_delete(req, KCM_KIND_REPLICASET, ns, step_rs(j, s)->name, body->data);
  case KCM_DEPLOYMENT_STEP_STATUS:
    /* Not yet known whether the server keeps status.terminatingReplicas:
     * the write carries it to find out (a shadow learns it from the
     * statuses the controller in charge writes). */
    j->probe = j->c->terminating.kept < 0 && !j->base.rt->writer->dry &&
               j->plan.terminating >= 0 && kcm_runtime_field_ask(&j->c->terminating);
    if ((err = kcm_deployment_status_body(j->d, &j->plan, j->probe, j->d_rv, body)))
      return err;
    return kcm_writer_patch(req, KCM_KIND_DEPLOYMENT, ns, j->d->o.name, "status",
                            KCM_PATCH_MERGE, body->data);
  case KCM_DEPLOYMENT_STEP_ROLLBACK:
    if ((err = kcm_deployment_rollback_body(&j->plan, j->d_rv, body)))
      return err;
    return kcm_writer_patch(req, KCM_KIND_DEPLOYMENT, ns, j->d->o.name, NULL, KCM_PATCH_JSON,
                            body->data);
  case KCM_DEPLOYMENT_STEP_RECHECK:
  case KCM_DEPLOYMENT_STEP_ADOPT:
  case KCM_DEPLOYMENT_STEP_RELEASE:
  case KCM_DEPLOYMENT_STEP_EVENT:
    break;
  }
  return KCM_EINVAL;
}

/* Send step s, the i-th of the plan. */
static void send_step(struct kcm_runtime_job *base, const void *step, size_t i) {
  static const kcm_client_done_cb done[] = {
      [KCM_DEPLOYMENT_STEP_SCALE] = on_rs_write,   [KCM_DEPLOYMENT_STEP_CREATE] = on_created,
      [KCM_DEPLOYMENT_STEP_DELETE] = on_rs_write,  [KCM_DEPLOYMENT_STEP_STATUS] = on_d_write,
      [KCM_DEPLOYMENT_STEP_ROLLBACK] = on_d_write,
  };
  struct dp_job *j = (struct dp_job *)base;
  const struct kcm_deployment_step *s = step;
  struct kcm_buf body = KCM_BUF_INIT(KCM_API_OBJECT_MAX);
  struct kcm_write req;
  int err;

  switch (s->op) {
  case KCM_DEPLOYMENT_STEP_RECHECK:
    kcm_runtime_recheck(base);
    return;
  case KCM_DEPLOYMENT_STEP_ADOPT:
    kcm_runtime_claim(base, &j->plan.adopt[s->rs]->o, true);
    return;
  case KCM_DEPLOYMENT_STEP_RELEASE:
    kcm_runtime_claim(base, &j->plan.release[s->rs]->o, false);
    return;
  case KCM_DEPLOYMENT_STEP_EVENT:
    record(j, s->warning, s->reason, s->message);
    return;
  default:
    break; /* a write */
  }
  j->current = s;
  if ((err = build_step(j, s, &body, &req)))
    FAIL(j, err, "cannot build a write: %s", req.err ? req.path : kcm_strerror(err));
  else if (!kcm_runtime_send(base, &req, done[s->op], j)) {
    if (s->op == KCM_DEPLOYMENT_STEP_STATUS) {
      kcm_pacer_wrote(&j->c->status_pacer, base->key, uv_now(base->rt->loop));
      if (i + 1 == base->nsteps)
        /* The last step: only its answer is left to wait for, so another
         * key may have the worker while this one stays in processing. */
        kcm_runtime_give_back(base);
    }
  } else if (j->probe) { /* not sent: the next write asks */
    kcm_runtime_field_answer(&j->c->terminating, NULL, 0, "Deployment");
    j->probe = false;
  }
  kcm_buf_release(&body);
  if (base->err)
    kcm_runtime_halt(base);
}

bool dp_pods_running(struct kcm_informer *pods, const struct kcm_deployment *d,
                     const struct kcm_replicaset *rs,
                     void (*seen)(void *ctx, struct kcm_object *pod), void *ctx) {
  struct kcm_object *o;
  for (o = kcm_informer_first_owned(pods, &rs->o.uid); o; o = o->own_next) {
    const struct kcm_pod *p = (const struct kcm_pod *)o;
    if (strcmp(o->ns, rs->o.ns) || !kcm_labels_matches(&d->selector, &o->labels))
      continue;
    if (seen)
      seen(ctx, o);
    if (p->phase != KCM_POD_SUCCEEDED && p->phase != KCM_POD_FAILED)
      return true;
  }
  return false;
}

static void hold_pod(void *ctx, struct kcm_object *pod) {
  struct dp_job *j = ctx;
  kcm_runtime_hold(&j->base, pod);
}

/* Recreate: whether the ReplicaSet still has a pod that is not done
 * (each pod looked at is held: the plan depends on it). */
static bool pods_running(void *ctx, const struct kcm_replicaset *rs) {
  struct dp_job *j = ctx;
  return dp_pods_running(j->c->pod_informer, j->d, rs, hold_pod, j);
}

/* The ReplicaSets it controls and the orphans of its namespace, held by
 * the job; NULL with the job failed when memory is short. *behind: one of
 * them is older than a write to it. */
static struct kcm_replicaset **candidates(struct dp_job *j, size_t *n, bool *behind) {
  struct kcm_object **cands = NULL;
  struct kcm_replicaset **rss;
  size_t i;

  if (kcm_informer_claimable(j->c->rs_informer, &j->d->o.uid, j->base.ns, &cands, n)) {
    FAIL(j, KCM_ENOMEM, "%s", "out of memory");
    return NULL;
  }
  rss = (struct kcm_replicaset **)(void *)cands; /* the same storage, retyped element by element */
  for (i = 0; i < *n; i++) {
    struct kcm_object *o = cands[i];
    kcm_runtime_hold(&j->base, o);
    *behind = *behind || kcm_informer_behind(j->c->rs_informer, o);
    rss[i] = (struct kcm_replicaset *)o;
  }
  return rss;
}

/* Plan the sync of j->d; false (nothing to do, or the job failed) when
 * there is no plan to carry out. */
static bool plan(struct dp_job *j) {
  struct kcm_deployment_controller *c = j->c;
  struct kcm_replicaset **cands;
  struct kcm_deployment_input in;
  struct alias_entry *al;
  bool behind = false;
  size_t n, i;
  int err;

  /* A write to the Deployment or to its ReplicaSets is on its way to the
   * cache; its event queues the key again. Planning now would act on old
   * numbers (make a ReplicaSet again), and every guarded write would
   * conflict. */
  if (kcm_informer_behind(c->d_informer, &j->d->o)) {
    j->base.rt->stats.stale_own++;
    kcm_v(4, "waiting for the cache to catch up deployment=\"%s\"", j->base.key);
    return false;
  }
  if (kcm_runtime_stale(&j->base)) {
    kcm_v(4, "waiting for the cache to see the ReplicaSets written deployment=\"%s\"",
          j->base.key);
    return false;
  }
  if (!(cands = candidates(j, &n, &behind)) && j->base.err)
    return false;
  if (behind) {
    j->base.rt->stats.stale_dependents++;
    kcm_v(4, "waiting for the cache to catch up deployment=\"%s\"", j->base.key);
    free(cands);
    return false;
  }
  kcm_runtime_field_seen(&c->terminating, j->d->status.terminating);
  for (i = 0; i < n; i++)
    kcm_runtime_field_seen(&c->terminating, cands[i]->status.terminating);
  memset(&in, 0, sizeof(in));
  in.d = j->d;
  in.candidates = cands;
  in.ncandidates = n;
  in.terminating_kept = c->terminating.kept;
  in.pods_running = pods_running;
  in.ctx = j;
  al = kcm_map_get(&c->aliases, j->base.key);
  in.alias = al ? &al->alias : NULL;
  in.now_ms = kcm_runtime_wall_ms(j->base.rt);
  in.status_wait_ms = kcm_pacer_wait(&c->status_pacer, j->base.key, uv_now(j->base.rt->loop));
  err = kcm_deployment_plan(&in, &j->plan);
  free(cands);
  if (err) {
    FAIL(j, err, "cannot plan the sync: %s", kcm_strerror(err));
    return false;
  }
  if (j->plan.invalid) {
    kcm_warn("invalid selector; not syncing deployment=\"%s\"", j->base.key);
    return false;
  }
  if (!(j->rs_rv = calloc(j->plan.nrs + 1, sizeof(*j->rs_rv)))) {
    FAIL(j, KCM_ENOMEM, "%s", "out of memory");
    return false;
  }
  for (i = 0; i < j->plan.nrs; i++)
    j->rs_rv[i] = j->plan.rs[i].rs ? j->plan.rs[i].rs->o.rv : 0;
  j->base.requeue_after_ms = j->plan.requeue_after_ms;
  if (j->plan.paced_ms) {
    c->stats.status_paced++;
    kcm_runtime_again(&j->base, j->plan.paced_ms);
  }
  return true;
}

static void plan_sync(struct kcm_runtime_job *base) {
  struct dp_job *j = (struct dp_job *)base;
  struct kcm_deployment_controller *c = base->rt->ctx;
  struct kcm_object *o;

  j->c = c;
  j->plan.new_rs = -1;
  j->plan.requeue_after_ms = -1;
  o = kcm_informer_get(c->d_informer, base->ns, base->name);
  if (!o) {
    kcm_v(2, "Deployment has been deleted deployment=\"%s\"", base->key);
    alias_drop(c, base->key);
    return;
  }
  kcm_runtime_hold(base, o);
  base->object = o;
  j->d = (struct kcm_deployment *)o;
  j->d_rv = o->rv;
  if (plan(j))
    kcm_runtime_plan(base, j->plan.steps, j->plan.nsteps, sizeof(*j->plan.steps));
}

static void release_plan(struct kcm_runtime_job *base) {
  struct dp_job *j = (struct dp_job *)base;
  struct kcm_runtime *rt = base->rt;
  if (base->sent) /* ENOMEM: not paced */
    kcm_pacer_wrote(&((struct kcm_deployment_controller *)rt->ctx)->sync_pacer, base->key,
                    uv_now(rt->loop));
  kcm_deployment_plan_release(&j->plan);
  free(j->rs_rv);
}

static const struct kcm_runtime_ops ops = {
    .kind = "deployment",
    .job_size = sizeof(struct dp_job),
    .max_retries = KCM_DEPLOYMENT_MAX_RETRIES,
    .start = plan_sync,
    .send = send_step,
    .release = release_plan,
};

static const struct kcm_informer_handler deployment_events = {d_added, d_updated, d_deleted,
                                                              NULL};
static const struct kcm_informer_handler replicaset_events = {rs_added, rs_updated, rs_deleted,
                                                              NULL};
/* A Recreate rollout waits for its old pods to go. */
static const struct kcm_informer_handler pod_events = {.deleted = pod_deleted};

/* --- lifecycle ---------------------------------------------------------------------------- */

int kcm_deployment_controller_init(struct kcm_deployment_controller *c, uv_loop_t *loop,
                                   struct kcm_writer *writer, struct kcm_informer *d_informer,
                                   struct kcm_informer *rs_informer,
                                   struct kcm_informer *pod_informer, struct kcm_intern *pool,
                                   uint32_t workers, uint64_t sync_interval_ms,
                                   uint64_t status_interval_ms) {
  memset(c, 0, sizeof(*c));
  c->d_informer = d_informer;
  c->rs_informer = rs_informer;
  c->pod_informer = pod_informer;
  kcm_runtime_init(&c->rt, loop, &ops, c, workers, writer, pool);
  kcm_map_init(&c->aliases, &alias_type);
  kcm_pacer_init(&c->sync_pacer, sync_interval_ms, KCM_PACER_PER_SECOND);
  kcm_pacer_init(&c->status_pacer, status_interval_ms, KCM_PACER_PER_SECOND);
  kcm_runtime_field_init(&c->terminating, "terminatingReplicas");
  kcm_runtime_follow(&c->rt, rs_informer);
  if (kcm_runtime_watch(&c->rt, d_informer, &deployment_events) ||
      kcm_runtime_watch(&c->rt, rs_informer, &replicaset_events) ||
      kcm_runtime_watch(&c->rt, pod_informer, &pod_events))
    return KCM_ENOMEM;
  return 0;
}

void kcm_deployment_controller_release(struct kcm_deployment_controller *c) {
  struct kcm_map_iter it;
  struct alias_entry *e;
  kcm_runtime_release(&c->rt);
  kcm_pacer_release(&c->sync_pacer);
  kcm_pacer_release(&c->status_pacer);
  kcm_map_iter_init(&it, &c->aliases);
  while ((e = kcm_map_next(&it))) {
    free(e->key);
    free(e);
  }
  kcm_map_release(&c->aliases);
}
