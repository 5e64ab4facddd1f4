/*
 * controllers/replicaset/controller.c — the ReplicaSet controller's event
 * handlers and its executor: a sync plans its steps, and the runtime sends
 * them on the loop wave by wave through send_step. See
 * include/kcm/replicaset.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/labels.h"
#include "kcm/log.h"
#include "kcm/replicaset.h"

#include "internal.h"
#include "kcm/runtime.h"

#define EXPECTATIONS_TTL_MS (5 * 60 * 1000)
/* Pods that keep failing: the second wave waits 1 s, then 2, 4, ... up to
 * --failed-pod-backoff; failures within 1 s of a wave's start (or within
 * its wait) are the same wave. */
#define FAILED_BACKOFF_BASE_MS 1000
#define FAILED_BACKOFF_WINDOW_MS 1000

static void key_of(const struct kcm_object *o, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", o->ns, o->name);
}

static void enqueue(struct kcm_replicaset_controller *c, const struct kcm_object *rs) {
  kcm_runtime_enqueue(&c->rt, rs);
}

static const struct kcm_selector *selector_of(const struct kcm_object *rs) {
  return &((const struct kcm_replicaset *)rs)->selector;
}

/* --- event handlers ------------------------------------------------------------------ */

/* The ReplicaSet a pod's controller reference names, if it is in the cache. */
static struct kcm_replicaset *resolve(struct kcm_replicaset_controller *c,
                                      const struct kcm_object *pod) {
  return (struct kcm_replicaset *)kcm_informer_controller_of(c->rs_informer, pod, "ReplicaSet");
}

/* Enqueue every ReplicaSet in the pod's namespace that would adopt it. */
static void enqueue_matching(struct kcm_replicaset_controller *c, const struct kcm_object *pod) {
  if (kcm_runtime_enqueue_selecting(&c->rt, c->rs_informer, pod, selector_of) > 1)
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
  kcm_runtime_enqueue_key(&c->rt, rskey);
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
      kcm_runtime_enqueue_key(&c->rt, key);
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
  if (!kcm_crashloop_failed(&c->failing, key, uv_now(c->rt.loop), &wave, &delay) || !delay)
    return;
  c->stats.backoffs++;
  kcm_v(2, "pods keep failing; backing off replicaset=\"%s\" pod=\"%s\" wave=%u "
        "delay=\"%llums\"", key, pod->name, wave, (unsigned long long)delay);
  kcm_events_object_of(&rs->o, &ref);
  kcm_events_record(&c->rt.events, &ref, true, "FailedPodsBackoff",
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
        kcm_runtime_enqueue_after(&c->rt, key, (uint64_t)rs->min_ready_seconds * 1000);
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
  kcm_runtime_enqueue_key(&c->rt, key);
}

/* --- syncs ------------------------------------------------------------------------------ */

struct rs_job {
  struct kcm_runtime_job base;
  struct kcm_replicaset_controller *c;
  struct kcm_replicaset *rs;
  struct kcm_replicaset_plan plan;
  bool *gone;          /* by index in plan.order: deleted by this sync */
  uint32_t manage_group; /* the creates' or deletes' */
  int32_t created;     /* successful creates */
  int32_t made;        /* creates the API server answered with the pod */
  int32_t left_terminating; /* deleted pods the server keeps, terminating */
  struct pod_name *drawn; /* the names this sync's creates drew */
  size_t ndrawn;
  bool manage_failed;
  char *manage_msg;
  bool probe;          /* the status write asks whether the server keeps
                          status.terminatingReplicas */
  char *status_again;  /* the status write unguarded, sent once after a 409 */
};

struct pod_name {
  char s[KCM_REPLICASET_NAME_MAX + 1];
};

/* A create or a delete in flight. */
struct call {
  struct rs_job *job;
  struct kcm_pod *pod; /* a delete's, held by the job */
  size_t at;           /* a delete's index in plan.order */
  char podkey[600];
  char name[KCM_REPLICASET_NAME_MAX + 1]; /* of the pod a create makes */
  unsigned names;      /* names a create has tried */
};

#define FAIL(j, err, ...) kcm_runtime_fail(&(j)->base, err, __VA_ARGS__)

/* An event about the sync's ReplicaSet. */
#define RECORD(j, warning, reason, ...)                                                   \
  do {                                                                                    \
    struct kcm_event_object ref_;                                                         \
    kcm_events_object_of(&(j)->rs->o, &ref_);                                             \
    kcm_events_record(&(j)->c->rt.events, &ref_, warning, reason, __VA_ARGS__);              \
  } while (0)

/* --- creates and deletes ----------------------------------------------------------------- */

/* A create or delete failed: the creates not yet sent are not. */
static void manage_failed(struct rs_job *j, const char *message) {
  kcm_runtime_skip_group(&j->base, j->manage_group);
  if (j->manage_failed)
    return;
  j->manage_failed = true;
  j->manage_msg = strdup(message);
}

#define NAME_TRIES 8 /* names a create tries, as the API server tries generated names */

static int send_create(struct rs_job *j, struct call *call);

static void created(struct rs_job *j, const char *name) {
  j->created++;
  j->c->stats.creates++;
  RECORD(j, false, "SuccessfulCreate", "Created pod: %s", name);
}

static void create_failed(struct rs_job *j, const struct kcm_client_response *resp) {
  /* Counted as not made, as upstream does: if it was, the cache shows the
   * pod later and a sync deletes the one too many. */
  if (resp->unanswered)
    kcm_warn("a pod create went unanswered; the pod may exist replicaset=\"%s\" err=\"%s\"",
             j->base.key, resp->message);
  RECORD(j, true, "FailedCreate", "Error creating: %s", resp->message);
  manage_failed(j, resp->message);
  FAIL(j, resp->err, "failed to create pods: %s", resp->message);
}

/* Send call's create again under a new name; false (the create failed) when it cannot. */
static bool retry_create(struct rs_job *j, struct call *call) {
  call->names++;
  if (!send_create(j, call))
    return true;
  manage_failed(j, j->base.err_msg ? j->base.err_msg : "out of memory");
  return false;
}

/* The first pod of a pod list's text, or NULL (none, or not readable). */
static struct kcm_object *first_pod(struct kcm_replicaset_controller *c, struct kcm_intern *pool,
                                    const struct kcm_client_response *resp) {
  static const char *const items[] = {"items", NULL};
  struct kcm_object *pod = NULL;
  struct kcm_api_error why;
  kcm_json_start(&c->json, resp->body, resp->body_len);
  if (kcm_json_find(&c->json, items) && kcm_json_array(&c->json) &&
      kcm_json_element(&c->json) && kcm_api_decode_pod_at(&c->json, pool, &pod, &why))
    pod = NULL;
  return pod;
}

/* The pod a create's AlreadyExists named: made by this create (an attempt
 * whose answer was lost, sent again by kcm or by curl), or another pod's
 * name, in which case the create tries a new one. It is looked for with a
 * list, which upstream's replicaset-controller role allows (get it does
 * not). */
static void on_name_taken(const struct kcm_client_response *resp, void *data) {
  struct call *call = data;
  struct rs_job *j = call->job;
  struct kcm_replicaset_controller *c = j->c;
  struct kcm_object *pod = resp->err ? NULL : first_pod(c, j->base.rt->pool, resp);

  if (pod && pod->has_controller && kcm_api_uid_equal(&pod->controller.uid, &j->rs->o.uid)) {
    kcm_v(2, "a pod create answered late was made replicaset=\"%s\" pod=\"%s\"", j->base.key,
          call->name);
    created(j, call->name);
  } else if ((!resp->err || resp->err == KCM_ENOTFOUND) && call->names < NAME_TRIES) {
    if (retry_create(j, call))
      call = NULL; /* it goes on as the new create */
  } else if (!resp->err || resp->err == KCM_ENOTFOUND) {
    struct kcm_client_response taken = {.err = KCM_ECONFLICT,
                                        .message = "every pod name tried is taken"};
    create_failed(j, &taken);
  } else {
    create_failed(j, resp);
  }
  if (pod)
    kcm_api_unref(pod, j->base.rt->pool);
  free(call);
  kcm_runtime_answered(&j->base);
}

static void on_create(const struct kcm_client_response *resp, void *data) {
  struct call *call = data;
  struct rs_job *j = call->job;

  if (!resp->err) {
    j->made++;
    kcm_runtime_wrote(&j->base, kcm_api_resource_version_text(resp->body, resp->body_len));
    created(j, call->name);
  } else if (kcm_client_namespace_terminating(resp)) {
    j->created++; /* the namespace is going away: nothing to do */
  } else if (resp->err == KCM_ECONFLICT && strstr(resp->body, "\"AlreadyExists\"")) {
    struct kcm_write req;
    kcm_writer_find(&req, KCM_KIND_POD, j->rs->o.ns, call->name);
    if (!kcm_runtime_send(&j->base, &req, on_name_taken, call))
      call = NULL; /* the create goes on as the GET */
    else
      manage_failed(j, j->base.err_msg ? j->base.err_msg : "out of memory");
  } else {
    create_failed(j, resp);
  }
  free(call);
  kcm_runtime_answered(&j->base);
}

#define NAME_DRAWS 16 /* draws to find a name no cached pod has and the sync has not drawn */

static bool name_in_use(const struct rs_job *j, const char *name) {
  size_t i;
  if (kcm_informer_get(j->c->pod_informer, j->rs->o.ns, name))
    return true;
  for (i = 0; i < j->ndrawn; i++)
    if (!strcmp(j->drawn[i].s, name))
      return true;
  return false;
}

void kcm_replicaset_pod_name_fill(char *name, size_t len, uint32_t (*uniform)(uint32_t n)) {
  static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  const uint32_t base = sizeof(alphabet) - 1;
  uint32_t v = uniform(base * base * base * base * base); /* one draw: its base-27 digits */
  size_t i;
  for (i = len - KCM_REPLICASET_NAME_RANDOM; i < len; i++, v /= base)
    name[i] = alphabet[v % base];
}

/* Send call's create under a name drawn anew, one that no cached pod has
 * and no other create of this sync drew: an AlreadyExists that names a pod
 * of this ReplicaSet is then an earlier attempt of this very create. */
static int send_create(struct rs_job *j, struct call *call) {
  struct kcm_replicaset_plan *p = &j->plan;
  char *name = p->pod_body.data + p->name_at;
  struct pod_name drawn;
  struct kcm_write req;
  int tries = 0;
  do {
    kcm_replicaset_pod_name_fill(name, p->name_len, j->c->draw);
    snprintf(drawn.s, sizeof(drawn.s), "%.*s", (int)p->name_len, name);
  } while (name_in_use(j, drawn.s) && ++tries < NAME_DRAWS);
  if (KCM_BUF_PUSH(j->drawn, j->ndrawn, drawn))
    return KCM_ENOMEM;
  snprintf(call->name, sizeof(call->name), "%s", drawn.s);
  kcm_writer_create(&req, KCM_KIND_POD, j->rs->o.ns, p->pod_body.data, false);
  return kcm_runtime_send(&j->base, &req, on_create, call);
}

static void send_create_step(struct rs_job *j) {
  struct call *call;

  if (j->plan.pod_err) {
    manage_failed(j, "cannot build a pod from the template");
    FAIL(j, KCM_EINVAL, "%s", "cannot build a pod from the template");
    return;
  }
  if ((call = calloc(1, sizeof(*call)))) {
    call->job = j;
    call->names = 1;
  }
  if (!call || send_create(j, call)) {
    free(call);
    if (!call)
      FAIL(j, KCM_ENOMEM, "%s", "out of memory");
    manage_failed(j, j->base.err_msg ? j->base.err_msg : "out of memory");
  }
}

/* The creates that failed or were never sent will never be observed. */
static void creates_over(struct rs_job *j) {
  int32_t skipped = j->plan.change - j->created, i;
  for (i = 0; i < skipped; i++)
    kcm_expectations_creation_observed(&j->c->expectations, j->base.key);
  if (skipped > 0 && j->manage_failed)
    kcm_v(2, "slow-start stopped replicaset=\"%s\" skipped=%d", j->base.key, skipped);
}

static void on_delete(const struct kcm_client_response *resp, void *data) {
  struct call *call = data;
  struct rs_job *j = call->job;
  struct kcm_replicaset_controller *c = j->c;

  if (!resp->err || resp->err == KCM_ENOTFOUND)
    j->gone[call->at] = true; /* terminating or gone: no longer a replica */
  if (!resp->err) {
    c->stats.deletes++;
    /* counted in this sync's status, so the pod's deletionTimestamp
     * arriving from the watch changes nothing more */
    j->left_terminating +=
        kcm_replicaset_pod_left_terminating(&c->json, resp->body, resp->body_len);
    RECORD(j, false, "SuccessfulDelete", "Deleted pod: %s", call->pod->o.name);
  } else {
    /* It will not be observed as deleted by us. */
    kcm_expectations_deletion_observed(&c->expectations, j->base.key, call->podkey);
    if (resp->err != KCM_ENOTFOUND) {
      char *why = NULL;
      RECORD(j, true, "FailedDelete", "Error deleting: %s", resp->message);
      /* the condition's message, as upstream's pod control words it */
      manage_failed(j, asprintf(&why, "unable to delete pods: %s", resp->message) < 0
                           ? resp->message
                           : why);
      free(why);
      FAIL(j, resp->err, "failed to delete pods: %s", resp->message);
    }
  }
  free(call);
  kcm_runtime_answered(&j->base);
}

/* The pods ranked with the ReplicaSet's own: those of every ReplicaSet
 * with the same controller, or its own when it has none. */
static struct kcm_pod **related_pods(void *ctx, const struct kcm_replicaset_claim *claim,
                                     size_t *n) {
  struct rs_job *j = ctx;
  struct kcm_replicaset_controller *c = j->c;
  struct kcm_pod **related = NULL;
  struct kcm_object *sib, *p;

  *n = 0;
  if (!j->rs->o.has_controller) {
    related = malloc(claim->nclaimed * sizeof(*related) + 1);
    if (related) {
      memcpy(related, claim->claimed, claim->nclaimed * sizeof(*related));
      *n = claim->nclaimed;
    }
    return related;
  }
  for (sib = kcm_informer_first_owned(c->rs_informer, &j->rs->o.controller.uid); sib;
       sib = sib->own_next) {
    struct kcm_replicaset *srs = (struct kcm_replicaset *)sib;
    for (p = kcm_informer_first_owned(c->pod_informer, &sib->uid); p; p = p->own_next) {
      struct kcm_pod **grown;
      if (!kcm_labels_matches(&srs->selector, &p->labels))
        continue;
      if (!(grown = kcm_buf_grow_items(related, *n, sizeof(*grown))))
        return related;
      related = grown;
      related[(*n)++] = (struct kcm_pod *)p;
    }
  }
  return related;
}

/* Expect what the creates or deletes that follow will do. */
static void expect(struct rs_job *j, const struct kcm_replicaset_step *s) {
  struct kcm_replicaset_controller *c = j->c;
  uint64_t now = kcm_runtime_wall_ms(&c->rt);
  size_t n = (size_t)-j->plan.change, i;
  char (*keys)[600];
  const char **refs;

  j->manage_group = s->at.group;
  if (j->plan.change > 0) {
    kcm_v(2, "too few replicas; creating replicaset=\"%s\" need=%d creating=%d", j->base.key,
          j->rs->replicas, j->plan.change);
    kcm_expectations_expect_creations(&c->expectations, j->base.key, j->plan.change, now);
    return;
  }
  keys = malloc(n * sizeof(*keys));
  refs = malloc(n * sizeof(*refs));
  j->gone = calloc(n, sizeof(*j->gone));
  if (!keys || !refs || !j->gone) {
    FAIL(j, KCM_ENOMEM, "%s", "out of memory");
    kcm_runtime_skip_group(&j->base, j->manage_group);
  } else {
    for (i = 0; i < n; i++) {
      snprintf(keys[i], sizeof(keys[i]), "%s/%s", j->plan.order[i]->o.ns,
               j->plan.order[i]->o.name);
      refs[i] = keys[i];
    }
    kcm_v(2, "too many replicas; deleting replicaset=\"%s\" need=%d deleting=%zu",
          j->base.key, j->rs->replicas, n);
    kcm_expectations_expect_deletions(&c->expectations, j->base.key, refs, n, now);
  }
  free(keys);
  free(refs);
}

static void send_delete(struct rs_job *j, size_t at) {
  struct kcm_pod *pod = j->plan.order[at];
  struct call *call = calloc(1, sizeof(*call));
  struct kcm_write req;
  char podkey[600];

  snprintf(podkey, sizeof(podkey), "%s/%s", pod->o.ns, pod->o.name);
  if (call) {
    call->job = j;
    call->pod = pod;
    call->at = at;
    snprintf(call->podkey, sizeof(call->podkey), "%s", podkey);
    kcm_writer_delete(&req, KCM_KIND_POD, pod->o.ns, pod->o.name, NULL);
  }
  if (!call || kcm_runtime_send(&j->base, &req, on_delete, call)) {
    if (!call)
      FAIL(j, KCM_ENOMEM, "%s", "out of memory");
    kcm_expectations_deletion_observed(&j->c->expectations, j->base.key, podkey);
    free(call);
  }
}

/* --- status ------------------------------------------------------------------------------ */

/* A 409 on the status write: as upstream (one retry on the ReplicaSet read
 * again), the status from the pods is written once more, unguarded, onto
 * the ReplicaSet as it is now. A spec scaled while the sync ran moves the
 * resourceVersion on; its status must not wait for the next sync. */
static void on_status(const struct kcm_client_response *resp, void *data);

static bool resend_status(struct rs_job *j) {
  struct kcm_write req;
  char *body = j->status_again;
  int err;

  j->status_again = NULL;
  kcm_writer_patch(&req, KCM_KIND_REPLICASET, j->rs->o.ns, j->rs->o.name, "status",
                   KCM_PATCH_MERGE, body);
  err = kcm_runtime_send(&j->base, &req, on_status, j);
  free(body);
  return err == 0;
}

static void on_status(const struct kcm_client_response *resp, void *data) {
  struct rs_job *j = data;
  if (resp->err == KCM_ECONFLICT && j->status_again && resend_status(j)) {
    kcm_runtime_answered(&j->base);
    return;
  }
  if (resp->err) {
    FAIL(j, resp->err, "failed to update status: %s", resp->message);
  } else {
    j->c->stats.status_writes++;
    kcm_informer_written(j->c->rs_informer, j->rs->o.ns, j->rs->o.name,
                         kcm_api_resource_version_text(resp->body, resp->body_len));
  }
  if (j->probe)
    kcm_runtime_field_answer(&j->c->terminating, resp->err ? NULL : resp->body, resp->body_len,
                             "ReplicaSet");
  kcm_runtime_answered(&j->base);
}

/* The status write into body, and its unguarded retry into j. */
static int status_bodies(struct rs_job *j, const struct kcm_replicaset_status *st,
                         struct kcm_buf *body) {
  free(j->status_again);
  j->status_again = NULL;
  if (kcm_replicaset_status_patch(j->rs, st, false, body) ||
      !(j->status_again = strdup(body->data)))
    return KCM_ENOMEM;
  kcm_buf_reset(body);
  return kcm_replicaset_status_patch(j->rs, st, true, body);
}

/* The status from the pods left, written when it changed. */
static void write_status(struct rs_job *j, struct kcm_pod *const *live, size_t nlive) {
  struct kcm_replicaset_controller *c = j->c;
  struct kcm_runtime *rt = j->base.rt;
  struct kcm_replicaset_status st;
  struct kcm_buf body = KCM_BUF_INIT(1u << 20);
  uint64_t wait, now = kcm_runtime_wall_ms(rt); /* one moment for the status and the next check */
  bool sent = false;

  if (kcm_replicaset_status(j->rs, live, nlive, j->made, j->plan.change, j->manage_failed,
                            j->manage_msg, now, &st)) {
    FAIL(j, KCM_ENOMEM, "%s", "out of memory");
    return;
  }
  /* status.terminatingReplicas where the server keeps it; while that is
   * not known, one write carries it to find out, needed or not (a shadow
   * learns it from the statuses the controller in charge writes). */
  kcm_runtime_field_seen(&c->terminating, j->rs->status.terminating);
  if (c->terminating.kept > 0 ||
      (!rt->writer->dry && (j->probe = kcm_runtime_field_ask(&c->terminating))))
    st.terminating = j->plan.claim.terminating + j->left_terminating;
  /* Ready pods not yet available: synced again the moment the next one is,
   * or after minReadySeconds if none can be told (as upstream since 1.35). */
  if (!j->manage_failed && j->rs->min_ready_seconds > 0 && st.ready != st.available) {
    int64_t next = kcm_replicaset_next_available_ms(live, nlive, j->rs->min_ready_seconds, now),
            late = (int64_t)(kcm_runtime_wall_ms(rt) - now);
    uint64_t due = next < 0 ? (uint64_t)j->rs->min_ready_seconds * 1000
                            : next > late ? (uint64_t)(next - late) : 0;
    kcm_runtime_again(&j->base, due);
  }
  if (!j->probe && !kcm_replicaset_status_changed(j->rs, &st)) {
    /* nothing to write */
  } else if (!j->probe && kcm_replicaset_status_only_gains(j->rs, &st) &&
             !kcm_replicaset_status_meets_spec(j->rs, &st) &&
             (wait = kcm_pacer_wait(&c->status_pacer, j->base.key, uv_now(rt->loop)))) {
    /* Written moments ago and only more pods ready, the spec not met yet:
     * the sync after the interval writes the status as it is by then. */
    c->stats.status_paced++;
    kcm_runtime_again(&j->base, wait);
  } else if (!j->probe && kcm_replicaset_status_observes_gains(j->rs, &st) &&
             !kcm_replicaset_status_meets_spec(j->rs, &st) &&
             (wait = kcm_pacer_hold(&c->status_pacer, j->base.key, st.observed_generation,
                                    uv_now(rt->loop)))) {
    /* A new generation seen and more pods made for it, not all available:
     * written when they are, or an interval after the generation was
     * first seen, whichever comes first. */
    c->stats.status_paced++;
    kcm_runtime_again(&j->base, wait);
  } else if (status_bodies(j, &st, &body)) {
    FAIL(j, KCM_ENOMEM, "%s", "out of memory");
  } else {
    struct kcm_write req;
    kcm_writer_patch(&req, KCM_KIND_REPLICASET, j->rs->o.ns, j->rs->o.name, "status",
                     KCM_PATCH_MERGE, body.data);
    if (!kcm_runtime_send(&j->base, &req, on_status, j)) {
      kcm_pacer_wrote(&c->status_pacer, j->base.key, uv_now(rt->loop)); /* ENOMEM: not paced */
      /* Only the answer is left to wait for: another key may have the
       * worker, while this one stays in processing until it is done. */
      kcm_runtime_give_back(&j->base);
      sent = true;
    }
  }
  if (j->probe && !sent) { /* the next write asks */
    kcm_runtime_field_answer(&c->terminating, NULL, 0, "ReplicaSet");
    j->probe = false;
  }
  kcm_buf_release(&body);
  kcm_replicaset_status_release(&st);
}

static void start_status(struct rs_job *j) {
  struct kcm_pod **live = j->plan.claim.claimed, **left = NULL;
  size_t nlive = j->plan.claim.nclaimed, i;

  if (j->plan.change > 0)
    creates_over(j);
  if (j->gone) { /* without the pods this sync deleted */
    if (!(left = malloc(nlive * sizeof(*left) + 1))) {
      FAIL(j, KCM_ENOMEM, "%s", "out of memory");
      return;
    }
    for (i = nlive = 0; i < j->plan.claim.nclaimed; i++)
      if (i >= (size_t)-j->plan.change || !j->gone[i])
        left[nlive++] = j->plan.order[i];
    live = left;
  }
  write_status(j, live, nlive);
  free(left);
}

/* --- the sync ------------------------------------------------------------------------------ */

static void send_step(struct kcm_runtime_job *base, const void *step, size_t i) {
  struct rs_job *j = (struct rs_job *)base;
  const struct kcm_replicaset_step *s = step;
  switch (s->op) {
  case KCM_REPLICASET_RECHECK:
    kcm_runtime_recheck(base);
    break;
  case KCM_REPLICASET_ADOPT:
    kcm_runtime_claim(base, &j->plan.claim.adopt[s->index]->o, true);
    break;
  case KCM_REPLICASET_RELEASE:
    kcm_runtime_claim(base, &j->plan.claim.release[s->index]->o, false);
    break;
  case KCM_REPLICASET_EXPECT:
    expect(j, s);
    break;
  case KCM_REPLICASET_CREATE:
    send_create_step(j);
    break;
  case KCM_REPLICASET_DELETE:
    send_delete(j, s->index);
    break;
  case KCM_REPLICASET_STATUS:
    start_status(j);
    break;
  }
}

/* Plan the sync of j->rs: its pods (those it controls and the orphans of
 * its namespace) are held by the job. */
static void plan(struct rs_job *j) {
  struct kcm_replicaset_controller *c = j->c;
  struct kcm_runtime_job *base = &j->base;
  struct kcm_replicaset_input in = {.rs = j->rs, .related = related_pods, .ctx = j};
  struct kcm_object **cands = NULL;
  size_t ncands = 0, i;
  int err;

  if (kcm_informer_claimable(c->pod_informer, &j->rs->o.uid, base->ns, &cands, &ncands)) {
    FAIL(j, KCM_ENOMEM, "%s", "out of memory");
    return;
  }
  /* The same storage, retyped element by element. */
  for (i = 0; i < ncands; i++) {
    struct kcm_object *o = cands[i];
    ((struct kcm_pod **)(void *)cands)[i] = (struct kcm_pod *)o;
  }
  in.candidates = (struct kcm_pod **)(void *)cands;
  in.ncandidates = ncands;
  in.now_ms = kcm_runtime_wall_ms(base->rt);
  in.satisfied = kcm_expectations_satisfied(&c->expectations, base->key, in.now_ms);
  in.create_wait_ms = kcm_crashloop_wait(&c->failing, base->key, uv_now(base->rt->loop));
  err = kcm_replicaset_plan(&in, &j->plan);
  free(cands);
  if (err) {
    FAIL(j, err, "%s", "out of memory");
    return;
  }
  for (i = 0; i < j->plan.claim.nclaimed; i++)
    kcm_runtime_hold(base, &j->plan.claim.claimed[i]->o);
  for (i = 0; i < j->plan.claim.nrelease; i++)
    kcm_runtime_hold(base, &j->plan.claim.release[i]->o);
  if (j->plan.wait_ms) {
    /* Its pods keep failing: the sync after the wait creates. */
    kcm_v(4, "backing off creates replicaset=\"%s\" need=%d wait=\"%llums\"", base->key,
          kcm_replicaset_diff(j->rs, j->plan.claim.nclaimed, KCM_REPLICASET_BURST),
          (unsigned long long)j->plan.wait_ms);
    kcm_runtime_again(base, j->plan.wait_ms);
  }
  kcm_runtime_plan(base, j->plan.steps, j->plan.nsteps, sizeof(*j->plan.steps));
}

static void start_sync(struct kcm_runtime_job *base) {
  struct rs_job *j = (struct rs_job *)base;
  struct kcm_replicaset_controller *c = base->rt->ctx;
  struct kcm_write req;
  struct kcm_object *o;

  j->c = c;
  o = kcm_informer_get(c->rs_informer, base->ns, base->name);
  if (!o) {
    kcm_expectations_delete(&c->expectations, base->key);
    return;
  }
  if (kcm_informer_behind(c->rs_informer, o)) {
    /* A write to it is on its way to the cache, and its event will queue
     * the key again: a sync now would act on an old spec and its status
     * write could only conflict. */
    kcm_v(4, "waiting for the cache to catch up replicaset=\"%s\"", base->key);
    base->rt->stats.stale_own++;
    return;
  }
  kcm_runtime_hold(base, o);
  base->object = o;
  if (kcm_runtime_stale(base)) {
    /* Pods it made or adopted are on their way to the cache: counted
     * without them, it would make them again. */
    kcm_v(4, "waiting for the cache to see the pods written replicaset=\"%s\"", base->key);
    return;
  }
  j->rs = (struct kcm_replicaset *)o;
  if (j->rs->selector.nothing) {
    kcm_warn("invalid selector; not syncing replicaset=\"%s\"", base->key);
    return;
  }
  /* Its pods' names and paths are made from its own. */
  if (kcm_writer_get(&req, KCM_KIND_REPLICASET, base->ns, base->name)) {
    FAIL(j, req.err, "%s", req.path);
    return;
  }
  plan(j);
}

static void release_job(struct kcm_runtime_job *base) {
  struct rs_job *j = (struct rs_job *)base;
  kcm_replicaset_plan_release(&j->plan);
  free(j->drawn);
  free(j->gone);
  free(j->manage_msg);
  free(j->status_again);
}

static const struct kcm_runtime_ops ops = {
    .kind = "replicaset",
    .job_size = sizeof(struct rs_job),
    .max_retries = 0, /* retried for as long as it fails, as upstream's */
    .start = start_sync,
    .send = send_step,
    .release = release_job,
};

static const struct kcm_informer_handler replicaset_events = {rs_added, rs_updated, rs_deleted,
                                                              NULL};
static const struct kcm_informer_handler pod_events = {pod_added, pod_updated, pod_deleted, NULL};

/* --- lifecycle ---------------------------------------------------------------------------- */

int kcm_replicaset_controller_init(struct kcm_replicaset_controller *c, uv_loop_t *loop,
                                   struct kcm_writer *writer, struct kcm_informer *rs_informer,
                                   struct kcm_informer *pod_informer, struct kcm_intern *pool,
                                   const struct kcm_replicaset_options *opts) {
  memset(c, 0, sizeof(*c));
  c->rs_informer = rs_informer;
  c->pod_informer = pod_informer;
  kcm_runtime_init(&c->rt, loop, &ops, c, opts->workers, writer, pool);
  /* a writer that writes nothing (--shadow): a sync waits for no creation
   * or deletion it asked for */
  kcm_expectations_init(&c->expectations, writer->dry ? 0 : EXPECTATIONS_TTL_MS);
  kcm_pacer_init(&c->status_pacer, opts->status_interval_ms, KCM_PACER_PER_SECOND);
  kcm_crashloop_init(&c->failing, FAILED_BACKOFF_BASE_MS, opts->failed_backoff_ms,
                     FAILED_BACKOFF_WINDOW_MS);
  kcm_json_init(&c->json);
  c->draw = arc4random_uniform;
  kcm_runtime_field_init(&c->terminating, "terminatingReplicas");
  kcm_runtime_follow(&c->rt, pod_informer);
  if (kcm_runtime_watch(&c->rt, rs_informer, &replicaset_events) ||
      kcm_runtime_watch(&c->rt, pod_informer, &pod_events))
    return KCM_ENOMEM;
  return 0;
}

void kcm_replicaset_controller_release(struct kcm_replicaset_controller *c) {
  kcm_runtime_release(&c->rt);
  kcm_expectations_release(&c->expectations);
  kcm_pacer_release(&c->status_pacer);
  kcm_crashloop_release(&c->failing);
  kcm_json_release(&c->json);
}
