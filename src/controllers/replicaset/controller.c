/*
 * controllers/replicaset/controller.c — the ReplicaSet controller's event
 * handlers and its executor: a sync is a job that sends its plan's calls on
 * the loop, phase by phase, and hands its key back to the work queue when
 * the last call has answered. See include/kcm/replicaset.h.
 */
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/log.h"
#include "kcm/replicaset.h"

#define EXPECTATIONS_TTL_MS (5 * 60 * 1000)
/* Pods that keep failing: the second wave waits 1 s, then 2, 4, ... up to
 * --failed-pod-backoff; failures within 1 s of a wave's start (or within
 * its wait) are the same wave. */
#define FAILED_BACKOFF_BASE_MS 1000
#define FAILED_BACKOFF_WINDOW_MS 1000

enum phase { PHASE_CHECK, PHASE_CLAIM, PHASE_MANAGE, PHASE_STATUS, PHASE_DONE };

struct kcm_rs_job {
  struct kcm_replicaset_controller *c;
  struct kcm_rs_job *next;
  char *key;
  struct kcm_replicaset *rs;
  struct kcm_rs_claim claim;
  struct kcm_pod **del;  /* pods to delete */
  size_t ndel;
  struct kcm_object **held; /* references to drop at the end */
  size_t nheld;
  enum phase phase;
  bool satisfied;      /* expectations allowed managing replicas */
  bool can_adopt;
  int32_t change;      /* creates (> 0) or deletes (< 0) asked for */
  int32_t to_create;   /* creates not yet sent */
  int32_t batch;       /* slow-start batch size */
  int32_t created;     /* successful creates */
  struct kcm_buf pod_body; /* the pod to create, its name the name_len bytes at name_at */
  size_t name_at, name_len;
  int outstanding;     /* calls in flight */
  int err;             /* first error of the sync */
  char *err_msg;
  bool manage_failed;
  char *manage_msg;
  bool gave_back;      /* the worker was given back while the status write is out */
};

static void pump(struct kcm_replicaset_controller *c);
static void next_phase(struct kcm_rs_job *j);

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void key_of(const struct kcm_object *o, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", o->ns, o->name);
}

static void enqueue(struct kcm_replicaset_controller *c, const struct kcm_object *rs) {
  char key[600];
  key_of(rs, key, sizeof(key));
  kcm_workqueue_add(&c->queue, key);
}

/* --- event handlers ------------------------------------------------------------------ */

/* The ReplicaSet a pod's controller reference names, if it is in the cache. */
static struct kcm_replicaset *resolve(struct kcm_replicaset_controller *c,
                                      const struct kcm_object *pod) {
  struct kcm_object *rs;
  if (!pod->has_controller || strcmp(pod->controller.kind, "ReplicaSet") != 0)
    return NULL;
  rs = kcm_informer_get(c->rs_informer, pod->ns, pod->controller.name);
  if (!rs || !kcm_api_uid_equal(&rs->uid, &pod->controller.uid))
    return NULL;
  return (struct kcm_replicaset *)rs;
}

/* Enqueue every ReplicaSet in the pod's namespace that would adopt it. */
static void enqueue_matching(struct kcm_replicaset_controller *c, const struct kcm_object *pod) {
  struct kcm_object *o;
  int n = 0;
  for (o = kcm_informer_first_in(c->rs_informer, pod->ns); o; o = o->ns_next) {
    struct kcm_replicaset *rs = (struct kcm_replicaset *)o;
    if (kcm_labels_matches(&rs->selector, &pod->labels)) {
      enqueue(c, o);
      n++;
    }
  }
  if (n > 1)
    kcm_v(2, "user error: more than one ReplicaSet selects the orphan pod pod=\"%s/%s\"",
          pod->ns, pod->name);
}

static void pod_deleted(void *ctx, struct kcm_object *pod, bool unknown) {
  struct kcm_replicaset_controller *c = ctx;
  struct kcm_replicaset *rs = resolve(c, pod);
  char rskey[600], podkey[600];
  if (!rs)
    return;
  key_of(&rs->o, rskey, sizeof(rskey));
  key_of(pod, podkey, sizeof(podkey));
  kcm_expectations_deletion_observed(&c->expectations, rskey, podkey);
  kcm_workqueue_add(&c->queue, rskey);
}

static void pod_added(void *ctx, struct kcm_object *pod) {
  struct kcm_replicaset_controller *c = ctx;
  struct kcm_replicaset *rs;
  char key[600];
  if (pod->deleted) {
    /* Already terminating (seen after a restart): a deletion for us. */
    pod_deleted(ctx, pod, false);
    return;
  }
  if (pod->has_controller) {
    rs = resolve(c, pod);
    if (rs) {
      key_of(&rs->o, key, sizeof(key));
      kcm_expectations_creation_observed(&c->expectations, key);
      kcm_workqueue_add(&c->queue, key);
    }
    return;
  }
  enqueue_matching(c, pod);
}

/* A pod of rs failed: a new wave of failures holds its creates back. */
static void pod_failed(struct kcm_replicaset_controller *c, struct kcm_replicaset *rs,
                       const struct kcm_object *pod) {
  char key[600];
  uint32_t wave;
  uint64_t delay;
  struct kcm_event_object ref;
  key_of(&rs->o, key, sizeof(key));
  if (!kcm_crashloop_failed(&c->failing, key, uv_now(c->loop), &wave, &delay) || !delay)
    return;
  c->stats.backoffs++;
  kcm_v(2, "pods keep failing; backing off replicaset=\"%s\" pod=\"%s\" wave=%u "
        "delay=\"%llums\"", key, pod->name, wave, (unsigned long long)delay);
  kcm_events_object_of(&rs->o, &ref);
  kcm_events_record(&c->events, &ref, true, "FailedPodsBackoff",
                    "Pods keep failing (pod %s, wave %u): creating replacements in %llus",
                    pod->name, wave, (unsigned long long)((delay + 999) / 1000));
}

/* A pod of rs became ready: whatever failed before, replace at once again. */
static void pods_recovered(struct kcm_replicaset_controller *c, struct kcm_replicaset *rs) {
  char key[600];
  key_of(&rs->o, key, sizeof(key));
  kcm_crashloop_forget(&c->failing, key);
}

static bool same_controller(const struct kcm_object *a, const struct kcm_object *b) {
  if (a->has_controller != b->has_controller)
    return false;
  return !a->has_controller || kcm_api_uid_equal(&a->controller.uid, &b->controller.uid);
}

static void pod_updated(void *ctx, struct kcm_object *old, struct kcm_object *cur) {
  struct kcm_replicaset_controller *c = ctx;
  struct kcm_pod *op = (struct kcm_pod *)old, *cp = (struct kcm_pod *)cur;
  bool labels_changed, ref_changed;
  struct kcm_replicaset *rs;

  if (old->rv == cur->rv)
    return; /* a periodic resync: nothing happened */
  labels_changed = !kcm_labels_equal(&old->labels, &cur->labels);
  if (cur->deleted) {
    /* Replace it now, without waiting for the grace period. */
    pod_deleted(ctx, cur, false);
    if (labels_changed)
      pod_deleted(ctx, old, false);
    return;
  }
  ref_changed = !same_controller(old, cur);
  if (ref_changed && (rs = resolve(c, old)))
    enqueue(c, &rs->o);
  if (cur->has_controller) {
    rs = resolve(c, cur);
    if (rs) {
      if (op->phase != KCM_POD_FAILED && cp->phase == KCM_POD_FAILED)
        pod_failed(c, rs, cur);
      else if (!op->ready && cp->ready)
        pods_recovered(c, rs);
      enqueue(c, &rs->o);
      if (!op->ready && cp->ready && rs->min_ready_seconds > 0) {
        char key[600];
        key_of(&rs->o, key, sizeof(key));
        kcm_workqueue_add_after(&c->queue, key, (uint64_t)rs->min_ready_seconds * 1000 + 1000);
      }
    }
    return;
  }
  if (labels_changed || ref_changed)
    enqueue_matching(c, cur);
}

static void rs_added(void *ctx, struct kcm_object *rs) { enqueue(ctx, rs); }

static void rs_updated(void *ctx, struct kcm_object *old, struct kcm_object *cur) {
  struct kcm_replicaset_controller *c = ctx;
  if (!kcm_api_uid_equal(&old->uid, &cur->uid)) {
    char key[600];
    key_of(old, key, sizeof(key));
    kcm_expectations_delete(&c->expectations, key); /* deleted and recreated */
  }
  enqueue(c, cur);
}

static void rs_deleted(void *ctx, struct kcm_object *rs, bool unknown) {
  struct kcm_replicaset_controller *c = ctx;
  char key[600];
  key_of(rs, key, sizeof(key));
  kcm_expectations_delete(&c->expectations, key);
  kcm_crashloop_forget(&c->failing, key);
  kcm_workqueue_add(&c->queue, key);
}

/* --- jobs ------------------------------------------------------------------------------ */

static void hold(struct kcm_rs_job *j, struct kcm_object *o) {
  struct kcm_object **grown = kcm_buf_grow_items(j->held, j->nheld, sizeof(*grown));
  if (!grown)
    return; /* objects stay valid for this turn; later phases skip them */
  j->held = grown;
  j->held[j->nheld++] = kcm_api_ref(o);
}

/* Record the first error of the sync (it is requeued with backoff). */
static void fail(struct kcm_rs_job *j, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct kcm_rs_job *j, int err, const char *fmt, ...) {
  va_list ap;
  if (j->err)
    return;
  j->err = err;
  va_start(ap, fmt);
  if (vasprintf(&j->err_msg, fmt, ap) < 0)
    j->err_msg = NULL;
  va_end(ap);
}

/* The URL path of an object (name NULL: of its namespace's collection) into
 * path[KCM_CLIENT_PATH_MAX]; false, the job failed, for a namespace or name
 * no API server gives out. */
static bool path_of(struct kcm_rs_job *j, enum kcm_kind kind, const char *ns, const char *name,
                    const char *sub, char *path) {
  int err = kcm_informer_path(kind, ns, name, sub, path, KCM_CLIENT_PATH_MAX);
  if (err)
    fail(j, err, "%s", path);
  return !err;
}

static void finish(struct kcm_rs_job *j) {
  struct kcm_replicaset_controller *c = j->c;
  struct kcm_rs_job **pp;
  size_t i;

  c->stats.syncs++;
  if (j->err) {
    c->stats.errors++;
    /* Conflicts are routine (the object moved on); they retry quietly. */
    if (j->err == KCM_ECONFLICT)
      kcm_v(2, "sync conflicted; retrying replicaset=\"%s\" err=\"%s\"", j->key,
            j->err_msg ? j->err_msg : kcm_strerror(j->err));
    else
      kcm_warn("sync failed; retrying replicaset=\"%s\" err=\"%s\" retries=%u", j->key,
               j->err_msg ? j->err_msg : kcm_strerror(j->err),
               kcm_workqueue_requeues(&c->queue, j->key));
  }
  kcm_workqueue_done(&c->queue, j->key);
  if (j->err)
    kcm_workqueue_add_rate_limited(&c->queue, j->key);
  else
    kcm_workqueue_forget(&c->queue, j->key);
  for (pp = &c->jobs; *pp; pp = &(*pp)->next) {
    if (*pp == j) {
      *pp = j->next;
      break;
    }
  }
  for (i = 0; i < j->nheld; i++)
    kcm_api_unref(j->held[i], c->pool);
  free(j->held);
  kcm_replicaset_claim_release(&j->claim);
  kcm_buf_release(&j->pod_body);
  free(j->del);
  free(j->err_msg);
  free(j->manage_msg);
  free(j->key);
  if (!j->gave_back)
    c->running--;
  free(j);
  pump(c);
}

struct call {
  struct kcm_rs_job *job;
  struct kcm_pod *pod; /* held by the job */
  char podkey[600];
  char name[KCM_REPLICASET_NAME_MAX + 1]; /* of the pod a create makes */
  unsigned names;      /* names a create has tried */
};

/* Send a request for the job; the call is freed here on failure, else by
 * its callback. */
static int issue(struct kcm_rs_job *j, struct call *call, const char *method, const char *path,
                 const char *body, const char *content_type, kcm_client_done_cb done) {
  struct kcm_client_request_options o = {0};
  int err;
  o.method = method;
  o.path = path;
  o.body = body;
  o.body_len = body ? strlen(body) : 0;
  o.content_type = content_type;
  o.done = done;
  o.data = call;
  o.limiter = KCM_REPLICASET_LIMITER;
  /* A create names its pod; a delete or a read may be done twice: sent
   * again after a lost answer, each does nothing more and tells what was
   * done. A status write is not: it fails and the sync is retried. */
  o.repeatable = strcmp(method, "PATCH") != 0;
  err = kcm_client_request(j->c->client, &o, NULL);
  if (err) {
    free(call);
    return err;
  }
  j->outstanding++;
  return 0;
}

static int send_call(struct kcm_rs_job *j, const char *method, const char *path, const char *body,
                const char *content_type, kcm_client_done_cb done, struct kcm_pod *pod) {
  struct call *call = calloc(1, sizeof(*call));
  if (!call)
    return KCM_ENOMEM;
  call->job = j;
  call->pod = pod;
  if (pod)
    key_of(&pod->o, call->podkey, sizeof(call->podkey));
  return issue(j, call, method, path, body, content_type, done);
}

/* Called when a call of the current phase has answered. */
static void call_done(struct kcm_rs_job *j) {
  if (--j->outstanding == 0)
    next_phase(j);
}

/* --- phase: check the ReplicaSet before adopting ------------------------------------- */

static void on_check(const struct kcm_client_response *resp, void *data) {
  struct call *call = data;
  struct kcm_rs_job *j = call->job;
  const char *why;

  free(call);
  if (resp->err)
    fail(j, resp->err, "can't recheck DeletionTimestamp: %s", resp->message);
  else if ((why = kcm_api_recheck(resp->body, &j->rs->o.uid)))
    fail(j, KCM_ECONFLICT, "original ReplicaSet %s %s", j->key, why);
  else
    j->can_adopt = true;
  call_done(j);
}

/* --- phase: adopt and release ----------------------------------------------------------- */

static void on_claim(const struct kcm_client_response *resp, void *data) {
  struct call *call = data;
  struct kcm_rs_job *j = call->job;
  /* NotFound: the pod is gone; Invalid: its uid changed. Both are fine. */
  if (resp->err && resp->err != KCM_ENOTFOUND && resp->err != KCM_EINVALID)
    fail(j, resp->err, "cannot update the owner of a pod: %s", resp->message);
  free(call);
  call_done(j);
}

/* One ownerReferences patch of a pod; false once the job has failed. */
static bool send_claim(struct kcm_rs_job *j, struct kcm_pod *p, bool adopt, struct kcm_buf *body) {
  char path[KCM_CLIENT_PATH_MAX];
  int err;
  if (!path_of(j, KCM_KIND_POD, p->o.ns, p->o.name, NULL, path))
    return true;
  kcm_buf_reset(body);
  if ((err = kcm_api_owner_patch(body, adopt, "apps/v1", "ReplicaSet", j->rs->o.name,
                                 &j->rs->o.uid, &p->o.uid)) ||
      (err = send_call(j, "PATCH", path, body->data, "application/strategic-merge-patch+json",
                       on_claim, p))) {
    fail(j, err, "cannot patch the owner of a pod: %s", kcm_strerror(err));
    return false;
  }
  if (adopt)
    j->c->stats.adoptions++;
  else
    j->c->stats.releases++;
  return true;
}

static void send_claims(struct kcm_rs_job *j) {
  struct kcm_buf body = KCM_BUF_INIT(1u << 20);
  size_t i;
  bool ok = true;

  for (i = 0; ok && j->can_adopt && i < j->claim.nadopt; i++)
    ok = send_claim(j, j->claim.adopt[i], true, &body);
  for (i = 0; ok && i < j->claim.nrelease; i++)
    ok = send_claim(j, j->claim.release[i], false, &body);
  kcm_buf_release(&body);
}

/* --- phase: create or delete pods --------------------------------------------------------- */

static void manage_failed(struct kcm_rs_job *j, const char *message) {
  if (j->manage_failed)
    return;
  j->manage_failed = true;
  j->manage_msg = strdup(message);
}

#define NAME_TRIES 8 /* names a create tries, as the API server tries generated names */

static void send_create_batch(struct kcm_rs_job *j);
static int send_create(struct kcm_rs_job *j, unsigned names);

static void created(struct kcm_rs_job *j, const char *name) {
  struct kcm_replicaset_controller *c = j->c;
  struct kcm_event_object ref;
  j->created++;
  c->stats.creates++;
  kcm_events_object_of(&j->rs->o, &ref);
  kcm_events_record(&c->events, &ref, false, "SuccessfulCreate", "Created pod: %s", name);
}

static void create_failed(struct kcm_rs_job *j, const struct kcm_client_response *resp) {
  struct kcm_event_object ref;
  /* Counted as not made, as upstream does: if it was, the cache shows the
   * pod later and a sync deletes the one too many. */
  if (resp->unanswered)
    kcm_warn("a pod create went unanswered; the pod may exist replicaset=\"%s\" err=\"%s\"",
             j->key, resp->message);
  kcm_events_object_of(&j->rs->o, &ref);
  kcm_events_record(&j->c->events, &ref, true, "FailedCreate", "Error creating: %s",
                    resp->message);
  manage_failed(j, resp->message);
  fail(j, resp->err, "failed to create pods: %s", resp->message);
}

/* A create has answered for good: send the next batch after the last of
 * this one, then account for the creates that will never be observed. */
static void create_done(struct kcm_rs_job *j) {
  struct kcm_replicaset_controller *c = j->c;
  int32_t skipped, i;

  if (--j->outstanding)
    return;
  if (!j->manage_failed && j->to_create > 0) {
    send_create_batch(j);
    if (j->outstanding)
      return;
  }
  /* The creates that failed or were never sent will never be observed. */
  skipped = j->change - j->created;
  for (i = 0; i < skipped; i++)
    kcm_expectations_creation_observed(&c->expectations, j->key);
  if (skipped > 0 && j->manage_failed)
    kcm_v(2, "slow-start stopped replicaset=\"%s\" skipped=%d", j->key, skipped);
  next_phase(j);
}

/* The pod a create's AlreadyExists named: made by this create (an attempt
 * whose answer was lost, sent again by kcm or by curl), or another pod's
 * name, in which case the create tries a new one. */
static void on_name_taken(const struct kcm_client_response *resp, void *data) {
  struct call *call = data;
  struct kcm_rs_job *j = call->job;
  struct kcm_replicaset_controller *c = j->c;
  struct kcm_object *pod = NULL;
  struct kcm_api_error why;

  if (!resp->err && !kcm_api_decode_text(KCM_KIND_POD, resp->body, resp->body_len, &c->json,
                                         NULL, c->pool, &pod, &why) &&
      pod->has_controller && kcm_api_uid_equal(&pod->controller.uid, &j->rs->o.uid)) {
    kcm_v(2, "a pod create answered late was made replicaset=\"%s\" pod=\"%s\"", j->key,
          call->name);
    created(j, call->name);
  } else if ((!resp->err || resp->err == KCM_ENOTFOUND) && call->names < NAME_TRIES) {
    if (send_create(j, call->names + 1)) {
      manage_failed(j, "out of memory");
      fail(j, KCM_ENOMEM, "%s", "out of memory");
    }
  } else if (!resp->err || resp->err == KCM_ENOTFOUND) {
    struct kcm_client_response taken = {.err = KCM_ECONFLICT,
                                        .message = "every pod name tried is taken"};
    create_failed(j, &taken);
  } else {
    create_failed(j, resp);
  }
  if (pod)
    kcm_api_unref(pod, c->pool);
  free(call);
  create_done(j);
}

static void on_create(const struct kcm_client_response *resp, void *data) {
  struct call *call = data;
  struct kcm_rs_job *j = call->job;

  if (!resp->err) {
    created(j, call->name);
  } else if (kcm_client_namespace_terminating(resp)) {
    j->created++; /* the namespace is going away: nothing to do */
  } else if (resp->err == KCM_ECONFLICT && strstr(resp->body, "\"AlreadyExists\"")) {
    char path[KCM_CLIENT_PATH_MAX];
    if (!path_of(j, KCM_KIND_POD, j->rs->o.ns, call->name, NULL, path)) {
      manage_failed(j, path);
    } else if (!issue(j, call, "GET", path, NULL, NULL, on_name_taken)) {
      j->outstanding--; /* the create goes on as the GET */
      return;
    } else {
      call = NULL; /* issue() freed it */
      manage_failed(j, "out of memory");
      fail(j, KCM_ENOMEM, "%s", "out of memory");
    }
  } else {
    create_failed(j, resp);
  }
  free(call);
  create_done(j);
}

/* Send one create, under a new name. */
static int send_create(struct kcm_rs_job *j, unsigned names) {
  struct call *call = calloc(1, sizeof(*call));
  char *name = j->pod_body.data + j->name_at, path[KCM_CLIENT_PATH_MAX];
  int err = kcm_informer_path(KCM_KIND_POD, j->rs->o.ns, NULL, NULL, path, sizeof(path));
  if (err || !call) {
    free(call);
    return err ? err : KCM_ENOMEM;
  }
  call->job = j;
  call->names = names;
  kcm_replicaset_pod_name_fill(name, j->name_len, arc4random_uniform);
  snprintf(call->name, sizeof(call->name), "%.*s", (int)j->name_len, name);
  return issue(j, call, "POST", path, j->pod_body.data, NULL, on_create);
}

static void send_create_batch(struct kcm_rs_job *j) {
  int32_t i, n = j->batch < j->to_create ? j->batch : j->to_create;

  if (!j->pod_body.len &&
      kcm_replicaset_pod_body(j->rs, &j->pod_body, &j->name_at, &j->name_len)) {
    manage_failed(j, "cannot build a pod from the template");
    fail(j, KCM_EINVAL, "%s", "cannot build a pod from the template");
    j->to_create = 0;
    return;
  }
  for (i = 0; i < n; i++) {
    if (send_create(j, 1)) {
      manage_failed(j, "out of memory");
      fail(j, KCM_ENOMEM, "%s", "out of memory");
      break;
    }
  }
  j->to_create -= n;
  j->batch = kcm_replicaset_next_batch(j->batch, j->to_create);
}

static void on_delete(const struct kcm_client_response *resp, void *data) {
  struct call *call = data;
  struct kcm_rs_job *j = call->job;
  struct kcm_replicaset_controller *c = j->c;
  struct kcm_event_object ref;

  kcm_events_object_of(&j->rs->o, &ref);
  if (!resp->err) {
    c->stats.deletes++;
    kcm_events_record(&c->events, &ref, false, "SuccessfulDelete", "Deleted pod: %s",
                      call->pod->o.name);
  } else {
    /* It will not be observed as deleted by us. */
    kcm_expectations_deletion_observed(&c->expectations, j->key, call->podkey);
    if (resp->err != KCM_ENOTFOUND) {
      kcm_events_record(&c->events, &ref, true, "FailedDelete", "Error deleting: %s",
                        resp->message);
      manage_failed(j, resp->message);
      fail(j, resp->err, "failed to delete pods: %s", resp->message);
    }
  }
  free(call);
  call_done(j);
}

static void start_manage(struct kcm_rs_job *j) {
  struct kcm_replicaset_controller *c = j->c;
  uint64_t now = now_ms(), wait;

  if (!kcm_replicaset_should_manage(j->rs, j->satisfied))
    return;
  j->change = kcm_replicaset_diff(j->rs, j->claim.nclaimed, KCM_REPLICASET_BURST);
  if (j->change > 0 && (wait = kcm_crashloop_wait(&c->failing, j->key, uv_now(c->loop)))) {
    /* Its pods keep failing: the sync after the wait creates. */
    kcm_v(4, "backing off creates replicaset=\"%s\" need=%d wait=\"%llums\"", j->key,
          j->change, (unsigned long long)wait);
    j->change = 0;
    kcm_workqueue_add_after(&c->queue, j->key, wait);
  } else if (j->change > 0) {
    kcm_v(2, "too few replicas; creating replicaset=\"%s\" need=%d creating=%d", j->key,
          j->rs->replicas, j->change);
    kcm_expectations_expect_creations(&c->expectations, j->key, j->change, now);
    j->to_create = j->change;
    j->batch = 1;
    send_create_batch(j);
  } else if (j->change < 0) {
    size_t n = (size_t)-j->change, i, nrel = 0;
    const char **keys;
    struct kcm_pod **related = NULL;
    char (*buf)[600];

    j->del = malloc(j->claim.nclaimed * sizeof(*j->del));
    keys = malloc(n * sizeof(*keys));
    buf = malloc(n * sizeof(*buf));
    if (!j->del || !keys || !buf) {
      free(keys);
      free(buf);
      fail(j, KCM_ENOMEM, "%s", "out of memory");
      return;
    }
    memcpy(j->del, j->claim.claimed, j->claim.nclaimed * sizeof(*j->del));
    if (n < j->claim.nclaimed) {
      /* Rank by the pods of every ReplicaSet with the same controller. */
      struct kcm_object *sib, *p;
      if (j->rs->o.has_controller) {
        for (sib = kcm_informer_first_owned(c->rs_informer, &j->rs->o.controller.uid); sib;
             sib = sib->own_next) {
          struct kcm_replicaset *srs = (struct kcm_replicaset *)sib;
          for (p = kcm_informer_first_owned(c->pod_informer, &sib->uid); p; p = p->own_next) {
            struct kcm_pod **grown;
            if (!kcm_labels_matches(&srs->selector, &p->labels))
              continue;
            grown = kcm_buf_grow_items(related, nrel, sizeof(*grown));
            if (!grown)
              break;
            related = grown;
            related[nrel++] = (struct kcm_pod *)p;
          }
        }
      } else {
        related = malloc(j->claim.nclaimed * sizeof(*related));
        if (related) {
          memcpy(related, j->claim.claimed, j->claim.nclaimed * sizeof(*related));
          nrel = j->claim.nclaimed;
        }
      }
      kcm_replicaset_rank(j->del, j->claim.nclaimed, related, nrel, now);
      free(related);
    }
    j->ndel = n;
    for (i = 0; i < n; i++) {
      key_of(&j->del[i]->o, buf[i], sizeof(buf[i]));
      keys[i] = buf[i];
    }
    kcm_v(2, "too many replicas; deleting replicaset=\"%s\" need=%d deleting=%zu", j->key,
          j->rs->replicas, n);
    kcm_expectations_expect_deletions(&c->expectations, j->key, keys, n, now);
    for (i = 0; i < n; i++) {
      char path[KCM_CLIENT_PATH_MAX];
      if (!path_of(j, KCM_KIND_POD, j->del[i]->o.ns, j->del[i]->o.name, NULL, path)) {
        kcm_expectations_deletion_observed(&c->expectations, j->key, keys[i]);
      } else if (send_call(j, "DELETE", path, NULL, NULL, on_delete, j->del[i])) {
        kcm_expectations_deletion_observed(&c->expectations, j->key, keys[i]);
        fail(j, KCM_ENOMEM, "%s", "out of memory");
      }
    }
    free(keys);
    free(buf);
  }
}

/* --- phase: status ---------------------------------------------------------------------- */

static void on_status(const struct kcm_client_response *resp, void *data) {
  struct call *call = data;
  struct kcm_rs_job *j = call->job;
  free(call);
  if (resp->err) {
    fail(j, resp->err, "failed to update status: %s", resp->message);
  } else {
    j->c->stats.status_writes++;
    kcm_informer_written(j->c->rs_informer, j->rs->o.ns, j->rs->o.name,
                         kcm_api_resource_version_text(resp->body, resp->body_len));
  }
  call_done(j);
}

static void start_status(struct kcm_rs_job *j) {
  struct kcm_replicaset_controller *c = j->c;
  struct kcm_rs_status st;
  struct kcm_buf body = KCM_BUF_INIT(1u << 20);
  char path[KCM_CLIENT_PATH_MAX];
  uint64_t now = now_ms(), wait;

  if (kcm_replicaset_status(j->rs, j->claim.claimed, j->claim.nclaimed, j->change,
                            j->manage_failed, j->manage_msg, now, &st)) {
    fail(j, KCM_ENOMEM, "%s", "out of memory");
    return;
  }
  if (!j->manage_failed && j->rs->min_ready_seconds > 0 && st.ready == j->rs->replicas &&
      st.available != j->rs->replicas)
    kcm_workqueue_add_after(&c->queue, j->key, (uint64_t)j->rs->min_ready_seconds * 1000);
  if (!kcm_replicaset_status_changed(j->rs, &st)) {
    /* nothing to write */
  } else if (kcm_replicaset_status_only_gains(j->rs, &st) &&
             (wait = kcm_pacer_wait(&c->status_pacer, j->key, uv_now(c->loop)))) {
    /* Written moments ago and only more pods ready: the sync after the
     * interval writes the status as it is by then. */
    c->stats.status_paced++;
    kcm_workqueue_add_after(&c->queue, j->key, wait);
  } else if (!kcm_replicaset_status_patch(j->rs, &st, &body) &&
             path_of(j, KCM_KIND_REPLICASET, j->rs->o.ns, j->rs->o.name, "status", path)) {
    if (send_call(j, "PATCH", path, body.data, "application/merge-patch+json", on_status, NULL)) {
      fail(j, KCM_ENOMEM, "%s", "out of memory");
    } else {
      kcm_pacer_wrote(&c->status_pacer, j->key, uv_now(c->loop)); /* ENOMEM: not paced */
      /* Only the answer is left to wait for: another key may have the
       * worker, while this one stays in processing until it is done. */
      j->gave_back = true;
      c->running--;
      pump(c);
    }
  }
  kcm_buf_release(&body);
  kcm_replicaset_status_release(&st);
}

/* Move to the next phase that has calls to make; finish after the last. */
static void next_phase(struct kcm_rs_job *j) {
  while (!j->outstanding) {
    switch (j->phase) {
    case PHASE_CHECK:
      j->phase = PHASE_CLAIM;
      send_claims(j);
      break;
    case PHASE_CLAIM:
      if (j->err || (j->claim.nadopt && !j->can_adopt)) {
        if (!j->err)
          fail(j, KCM_ECONFLICT, "%s", "cannot adopt pods");
        j->phase = PHASE_DONE; /* as upstream: no manage or status after a claim error */
        break;
      }
      j->phase = PHASE_MANAGE;
      start_manage(j);
      break;
    case PHASE_MANAGE:
      j->phase = PHASE_STATUS;
      start_status(j);
      break;
    case PHASE_STATUS:
      j->phase = PHASE_DONE;
      break;
    case PHASE_DONE:
      finish(j);
      return;
    }
  }
}

static void start_job(struct kcm_replicaset_controller *c, const char *key) {
  struct kcm_rs_job *j = calloc(1, sizeof(*j));
  const char *slash = strchr(key, '/');
  char ns[300], name[300], path[KCM_CLIENT_PATH_MAX];
  struct kcm_object *o;
  struct kcm_pod **cands = NULL;
  size_t ncands = 0, i;

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
  kcm_buf_init(&j->pod_body, 8u << 20);
  j->next = c->jobs;
  c->jobs = j;
  snprintf(ns, sizeof(ns), "%.*s", (int)(slash - key), key);
  snprintf(name, sizeof(name), "%s", slash + 1);
  o = kcm_informer_get(c->rs_informer, ns, name);
  if (!o) {
    kcm_expectations_delete(&c->expectations, key);
    j->phase = PHASE_DONE;
    next_phase(j);
    return;
  }
  if (kcm_informer_behind(c->rs_informer, o)) {
    /* A write to it is on its way to the cache, and its event will queue
     * the key again: a sync now would act on an old spec and its status
     * write could only conflict. */
    kcm_v(4, "waiting for the cache to catch up replicaset=\"%s\"", key);
    c->stats.deferred++;
    j->phase = PHASE_DONE;
    next_phase(j);
    return;
  }
  hold(j, o);
  j->rs = (struct kcm_replicaset *)o;
  j->satisfied = kcm_expectations_satisfied(&c->expectations, key, now_ms());
  if (j->rs->selector.nothing) {
    kcm_warn("invalid selector; not syncing replicaset=\"%s\"", key);
    j->phase = PHASE_DONE;
    next_phase(j);
    return;
  }
  /* Its pods' names and paths are made from its own. */
  if (!path_of(j, KCM_KIND_REPLICASET, ns, name, NULL, path)) {
    j->phase = PHASE_DONE;
    next_phase(j);
    return;
  }
  /* Candidates: the pods it controls, and the orphans. */
  for (i = 0; i < 2; i++) {
    for (o = kcm_informer_first_owned(c->pod_informer, i ? NULL : &j->rs->o.uid); o;
         o = o->own_next) {
      struct kcm_pod **grown;
      if (strcmp(o->ns, ns) != 0)
        continue;
      grown = kcm_buf_grow_items(cands, ncands, sizeof(*grown));
      if (!grown)
        break;
      cands = grown;
      cands[ncands++] = (struct kcm_pod *)o;
    }
  }
  if (kcm_replicaset_claim(j->rs, cands, ncands, &j->claim))
    fail(j, KCM_ENOMEM, "%s", "out of memory");
  free(cands);
  for (i = 0; i < j->claim.nclaimed; i++)
    hold(j, &j->claim.claimed[i]->o);
  for (i = 0; i < j->claim.nrelease; i++)
    hold(j, &j->claim.release[i]->o);
  j->phase = PHASE_CHECK;
  if (j->claim.nadopt && !j->err && send_call(j, "GET", path, NULL, NULL, on_check, NULL))
    fail(j, KCM_ENOMEM, "%s", "out of memory");
  next_phase(j);
}

static void pump(struct kcm_replicaset_controller *c) {
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

int kcm_replicaset_init(struct kcm_replicaset_controller *c, uv_loop_t *loop,
                        struct kcm_client *client, struct kcm_informer *rs_informer,
                        struct kcm_informer *pod_informer, struct kcm_intern *pool,
                        const struct kcm_replicaset_options *opts) {
  struct kcm_informer_handler rs_h = {rs_added, rs_updated, rs_deleted, NULL};
  struct kcm_informer_handler pod_h = {pod_added, pod_updated, pod_deleted, NULL};
  int err;

  memset(c, 0, sizeof(*c));
  c->loop = loop;
  c->client = client;
  c->rs_informer = rs_informer;
  c->pod_informer = pod_informer;
  c->pool = pool;
  c->workers = opts->workers ? opts->workers : 5;
  kcm_workqueue_init(&c->queue, loop, "replicaset");
  kcm_expectations_init(&c->expectations, EXPECTATIONS_TTL_MS);
  kcm_pacer_init(&c->status_pacer, opts->status_interval_ms);
  kcm_crashloop_init(&c->failing, FAILED_BACKOFF_BASE_MS, opts->failed_backoff_ms,
                     FAILED_BACKOFF_WINDOW_MS);
  kcm_events_init(&c->events, client, "replicaset-controller");
  kcm_json_init(&c->json);
  c->events.limiter = KCM_REPLICASET_LIMITER;
  rs_h.ctx = pod_h.ctx = c;
  if ((err = kcm_informer_add_handler(rs_informer, &rs_h)) ||
      (err = kcm_informer_add_handler(pod_informer, &pod_h)))
    return err;
  return 0;
}

void kcm_replicaset_run(struct kcm_replicaset_controller *c) {
  kcm_workqueue_set_ready(&c->queue, on_ready, c);
  pump(c);
}

static void on_queue_closed(struct kcm_workqueue *q, void *data) {
  struct kcm_replicaset_controller *c = data;
  if (c->on_stopped)
    c->on_stopped(c);
}

static void on_drained(struct kcm_workqueue *q, void *data) {
  kcm_workqueue_close(q, on_queue_closed, data);
}

void kcm_replicaset_stop(struct kcm_replicaset_controller *c,
                         void (*on_stopped)(struct kcm_replicaset_controller *c)) {
  c->stopping = true;
  c->on_stopped = on_stopped;
  kcm_workqueue_shutdown(&c->queue, on_drained, c);
}

void kcm_replicaset_release(struct kcm_replicaset_controller *c) {
  kcm_expectations_release(&c->expectations);
  kcm_pacer_release(&c->status_pacer);
  kcm_crashloop_release(&c->failing);
  kcm_events_release(&c->events);
  kcm_json_release(&c->json);
}
