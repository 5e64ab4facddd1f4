/*
 * Tests of the controllers' executors through a writer that records their
 * requests and answers them as each test decides: what a sync sends, in
 * which order, and what it makes of each kind of answer (a lost answer,
 * AlreadyExists, 403, 409, a namespace being deleted), as upstream tests
 * syncReplicaSet and syncDeployment against a fake clientset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/informer/internal.h"
#include "fake_writer.h"
#include "kcm/deployment.h"
#include "kcm/error.h"
#include "kcm/log.h"
#include "kcm/replicaset.h"
#include "kcm/shadow.h"

#include "../../src/controllers/replicaset/internal.h"
#include "../../src/shadow/internal.h"
#include "../../src/workqueue/internal.h"

#define RS_UID "aaaaaaaa-0000-0000-0000-000000000001"
#define D_UID "dddddddd-0000-0000-0000-000000000001"
#define KEY "ns/web"

struct fixture {
  uv_loop_t loop;
  struct kcm_intern pool;
  struct kcm_json json;
  struct kcm_informer inf[KCM_KIND_COUNT];
  struct fake_writer fw;
  struct kcm_replicaset_controller rc;
  struct kcm_deployment_controller dc;
  bool deployments;
  int stopped;
};

static struct fixture *fx;
static char status[512];

static void put(struct fixture *f, enum kcm_kind kind, const char *text) {
  struct kcm_object *o = NULL;
  struct kcm_api_error why;
  if (kcm_api_decode_text(kind, text, strlen(text), &f->json, NULL, &f->pool, &o, &why))
    fail_msg("bad test object: %s %s", why.field, why.problem);
  kcm_informer_upsert(&f->inf[kind], o);
}

static int setup(void **state, bool deployments) {
  struct fixture *f = calloc(1, sizeof(*f));
  int k;
  uv_loop_init(&f->loop);
  kcm_intern_init(&f->pool);
  kcm_json_init(&f->json);
  fake_writer_init(&f->fw);
  for (k = 0; k < KCM_KIND_COUNT; k++) {
    struct kcm_informer_options o = {.kind = (enum kcm_kind)k};
    assert_int_equal(kcm_informer_init(&f->inf[k], &f->loop, NULL, &f->pool, &o), 0);
  }
  f->deployments = deployments;
  if (deployments)
    assert_int_equal(kcm_deployment_controller_init(&f->dc, &f->loop, &f->fw.w,
                                                    &f->inf[KCM_KIND_DEPLOYMENT],
                                                    &f->inf[KCM_KIND_REPLICASET],
                                                    &f->inf[KCM_KIND_POD], &f->pool, 1, 0, 0),
                     0);
  else
    assert_int_equal(kcm_replicaset_controller_init(
                         &f->rc, &f->loop, &f->fw.w, &f->inf[KCM_KIND_REPLICASET],
                         &f->inf[KCM_KIND_POD], &f->pool,
                         &(struct kcm_replicaset_options){.workers = 1}),
                     0);
  fx = f;
  *state = f;
  return 0;
}

static int setup_rs(void **state) { return setup(state, false); }
static int setup_dp(void **state) { return setup(state, true); }

static void on_stopped(struct kcm_runtime *rt) { fx->stopped++; }
static void on_informer_closed(struct kcm_informer *inf) { fx->stopped++; }

static int teardown(void **state) {
  struct fixture *f = *state;
  int k;
  size_t i;
  if (f->deployments)
    kcm_runtime_stop(&f->dc.rt, on_stopped);
  else
    kcm_runtime_stop(&f->rc.rt, on_stopped);
  /* A sync the test left (the key queued again by an event) ends in errors. */
  for (i = 0; i < f->fw.n; i++)
    if (!f->fw.calls[i].answered)
      fake_writer_answer(&f->fw, (int)i, 503, "");
  for (k = 0; k < KCM_KIND_COUNT; k++)
    kcm_informer_stop(&f->inf[k], on_informer_closed);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(f->stopped, 1 + KCM_KIND_COUNT);
  if (f->deployments)
    kcm_deployment_controller_release(&f->dc);
  else
    kcm_replicaset_controller_release(&f->rc);
  for (k = 0; k < KCM_KIND_COUNT; k++)
    kcm_informer_release(&f->inf[k]);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  fake_writer_release(&f->fw);
  kcm_json_release(&f->json);
  kcm_intern_release(&f->pool);
  free(f);
  return 0;
}

/* --- ReplicaSets ------------------------------------------------------------------------ */

static void put_rs(struct fixture *f, int replicas) {
  char text[2048];
  snprintf(text, sizeof(text),
           "{\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\",\"uid\":\"" RS_UID "\","
           "\"resourceVersion\":\"10\",\"generation\":1},\"spec\":{\"replicas\":%d,"
           "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":"
           "{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
           "\"image\":\"nginx\"}]}}},\"status\":{}}",
           replicas);
  put(f, KCM_KIND_REPLICASET, text);
}

/* A running, ready pod; owner NULL: an orphan. */
static void put_pod(struct fixture *f, const char *name, const char *owner) {
  char text[2048], ref[512] = "";
  if (owner)
    snprintf(ref, sizeof(ref),
             ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
             "\"name\":\"web\",\"uid\":\"%s\",\"controller\":true}]",
             owner);
  snprintf(text, sizeof(text),
           "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\","
           "\"uid\":\"cccccccc-0000-0000-0000-%012x\","
           "\"resourceVersion\":\"5\",\"creationTimestamp\":\"2026-01-01T00:00:00Z\","
           "\"labels\":{\"app\":\"web\"}%s},\"spec\":{\"nodeName\":\"n1\"},"
           "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\","
           "\"status\":\"True\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}",
           name, (unsigned)name[0], ref);
  put(f, KCM_KIND_POD, text);
}

static int64_t expected_adds(struct fixture *f) {
  int64_t add = 0, del = 0;
  kcm_expectations_get(&f->rc.expectations, KEY, &add, &del);
  return add;
}

static int64_t expected_dels(struct fixture *f) {
  int64_t add = 0, del = 0;
  kcm_expectations_get(&f->rc.expectations, KEY, &add, &del);
  return del;
}

/* The name of the pod a create sends. */
static void created_name(struct fixture *f, int i, char *out, size_t len) {
  const char *p = strstr(f->fw.calls[i].body, "\"name\":\"");
  assert_non_null(p);
  p += 8;
  snprintf(out, len, "%.*s", (int)strcspn(p, "\""), p);
}

static const char *status_patch(struct fixture *f) {
  int i = fake_writer_find(&f->fw, "PATCH", "/replicasets/web/status");
  return i < 0 ? NULL : f->fw.calls[i].body;
}

/* Creates go out 1, 2, 4, ... and stop at the first failure; the creates
 * never sent are taken off the expectations, the failure is reported as
 * an event and a ReplicaFailure condition, and the key is retried. */
static void rs_slow_start_stops_on_first_failure(void **state) {
  struct fixture *f = *state;
  int i;
  put_rs(f, 7);
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 1);
  assert_int_equal(expected_adds(f), 7);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "POST", "/pods"), 201, "{}");
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 2);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "POST", "/pods"), 201, "{}");
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 1); /* the batch's other */
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "POST", "/pods"), 403,
                     fake_status(status, sizeof(status), 403, "Forbidden", "quota exceeded"));
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 0); /* no batch of 4 */
  assert_int_equal(expected_adds(f), 2); /* the two made, not yet seen */
  assert_non_null(status_patch(f));
  assert_non_null(strstr(status_patch(f), "\"replicas\":2,")); /* counted as made */
  assert_non_null(strstr(status_patch(f), "\"ReplicaFailure\""));
  assert_non_null(strstr(status_patch(f), "quota exceeded"));
  assert_int_equal(f->rc.rt.running, 0); /* the worker was given back */
  i = fake_writer_find(&f->fw, "PATCH", "/replicasets/web/status");
  fake_writer_answer(&f->fw, i, 200, "{\"metadata\":{\"resourceVersion\":\"11\"}}");
  fake_writer_events(&f->fw);
  assert_true(fake_writer_has_event(&f->fw, "SuccessfulCreate: Created pod: web-"));
  assert_true(fake_writer_has_event(&f->fw, "FailedCreate: Error creating: quota exceeded"));
  assert_int_equal(f->rc.rt.stats.errors, 1);
  assert_int_equal(kcm_workqueue_requeues(&f->rc.rt.queue, KEY), 1);
}

/* A create whose answer was lost is counted as not made, as upstream
 * counts it: the expectation is lowered and the sync is retried. */
static void rs_lost_create_answer(void **state) {
  struct fixture *f = *state;
  put_rs(f, 1);
  kcm_runtime_run(&f->rc.rt);
  assert_true(f->fw.calls[0].repeatable); /* named: it may be sent again */
  fake_writer_lose(&f->fw, fake_writer_find(&f->fw, "POST", "/pods"));
  assert_int_equal(expected_adds(f), 0);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  fake_writer_events(&f->fw);
  assert_true(fake_writer_has_event(&f->fw, "FailedCreate: Error creating: context deadline"));
  assert_int_equal(kcm_workqueue_requeues(&f->rc.rt.queue, KEY), 1);
}

/* The list answering a search for the pod `name`, owned by owner_uid. */
static char *pod_of(const char *name, const char *owner_uid) {
  static char text[1024];
  snprintf(text, sizeof(text),
           "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":"
           "\"7\"},\"items\":[{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"eeeeeeee-0000-0000-"
           "0000-000000000009\",\"resourceVersion\":\"7\",\"ownerReferences\":[{"
           "\"apiVersion\":\"apps/v1\",\"kind\":"
           "\"ReplicaSet\",\"name\":\"x\",\"uid\":\"%s\",\"controller\":true}]},"
           "\"spec\":{},\"status\":{}}]}",
           name, owner_uid);
  return text;
}

/* AlreadyExists, then a list of the pods of that name (the role upstream
 * gives the ReplicaSet controller lets it list pods, not get them): our
 * own pod (an earlier attempt made it) counts as created; another's name,
 * or none left, makes the create try a new name. */
static void rs_already_exists_then_get(void **state) {
  struct fixture *f = *state;
  char first[64], second[64], query[128];
  int i, n, get;
  put_rs(f, 4);
  kcm_runtime_run(&f->rc.rt);
  i = fake_writer_find(&f->fw, "POST", "/pods");
  created_name(f, i, first, sizeof(first));
  fake_writer_answer(&f->fw, i, 409,
                     fake_status(status, sizeof(status), 409, "AlreadyExists", "exists"));
  snprintf(query, sizeof(query), "/namespaces/ns/pods?fieldSelector=metadata.name%%3D%s", first);
  get = fake_writer_find(&f->fw, "GET", query);
  assert_true(get >= 0);
  fake_writer_answer(&f->fw, get, 200, pod_of(first, RS_UID)); /* ours */
  /* the next batch: 2; the first's name is gone by the time it is listed */
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 2);
  i = fake_writer_find(&f->fw, "POST", "/pods");
  created_name(f, i, first, sizeof(first));
  fake_writer_answer(&f->fw, i, 409,
                     fake_status(status, sizeof(status), 409, "AlreadyExists", "exists"));
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "GET", first), 200,
                     "{\"kind\":\"PodList\",\"items\":[]}");
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 2); /* the other, the retry */
  for (n = 0; n < 2; n++) {
    i = fake_writer_find(&f->fw, "POST", "/pods");
    created_name(f, i, second, sizeof(second));
    assert_string_not_equal(first, second);
    fake_writer_answer(&f->fw, i, 201, "{}");
  }
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 1); /* the next batch: 1 */
  i = fake_writer_find(&f->fw, "POST", "/pods");
  created_name(f, i, first, sizeof(first));
  fake_writer_answer(&f->fw, i, 409,
                     fake_status(status, sizeof(status), 409, "AlreadyExists", "exists"));
  get = fake_writer_find(&f->fw, "GET", first);
  fake_writer_answer(&f->fw, get, 200, pod_of(first, "ffffffff-0000-0000-0000-000000000002"));
  i = fake_writer_find(&f->fw, "POST", "/pods"); /* another's: a new name */
  assert_true(i >= 0);
  created_name(f, i, second, sizeof(second));
  assert_string_not_equal(first, second);
  fake_writer_answer(&f->fw, i, 201, "{}");
  assert_int_equal(expected_adds(f), 4);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  fake_writer_events(&f->fw);
  assert_false(fake_writer_has_event(&f->fw, "FailedCreate"));
  assert_int_equal(f->rc.rt.stats.errors, 0);
  assert_int_equal(kcm_workqueue_requeues(&f->rc.rt.queue, KEY), 0);
}

/* The pod names' random draws: seq[0..n) in turn, then 1000, 1001, ... */
static const uint32_t *draw_seq;
static size_t draw_n, draw_i;

static uint32_t scripted_draw(uint32_t n) {
  uint32_t v = draw_i < draw_n ? draw_seq[draw_i] : (uint32_t)(1000 + draw_i);
  draw_i++;
  return v % n;
}

static uint32_t draw_five(uint32_t n) { return 5 % n; }

/* No two creates of a sync carry one name, nor does a create carry a
 * cached pod's: the second create's AlreadyExists would name a pod of this
 * ReplicaSet and be counted as its own, leaving the ReplicaSet a pod short
 * with its expectations never met. */
static void rs_pod_names_are_drawn_apart(void **state) {
  static const uint32_t seq[] = {5, 5, 6, 5, 6, 6, 7};
  struct fixture *f = *state;
  char cached[64] = "web-", names[3][64];
  int i, n;
  kcm_replicaset_pod_name_fill(cached, 4 + KCM_REPLICASET_NAME_RANDOM, draw_five);
  cached[4 + KCM_REPLICASET_NAME_RANDOM] = '\0';
  put_pod(f, cached, RS_UID);
  draw_seq = seq;
  draw_n = sizeof(seq) / sizeof(seq[0]);
  draw_i = 0;
  f->rc.draw = scripted_draw;
  put_rs(f, 4);
  kcm_runtime_run(&f->rc.rt);
  /* a batch of one, then of two, both drawn before either is answered */
  for (n = 0; n < 3; n++) {
    i = fake_writer_find(&f->fw, "POST", "/pods");
    assert_true(i >= 0);
    created_name(f, i, names[n], sizeof(names[n]));
    fake_writer_answer(&f->fw, i, 201, "{}");
  }
  for (n = 0; n < 3; n++) {
    assert_string_not_equal(names[n], cached);
    assert_string_not_equal(names[n], names[(n + 1) % 3]);
  }
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 0);
  assert_int_equal(expected_adds(f), 3);
}

/* Every name tried taken: the create fails after eight. */
static void rs_every_name_taken(void **state) {
  struct fixture *f = *state;
  char name[64];
  int n;
  put_rs(f, 1);
  kcm_runtime_run(&f->rc.rt);
  for (n = 0; n < 8; n++) {
    int i = fake_writer_find(&f->fw, "POST", "/pods");
    assert_true(i >= 0);
    created_name(f, i, name, sizeof(name));
    fake_writer_answer(&f->fw, i, 409,
                       fake_status(status, sizeof(status), 409, "AlreadyExists", "exists"));
    fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "GET", name), 200,
                       pod_of(name, "ffffffff-0000-0000-0000-000000000002"));
  }
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 0);
  assert_int_equal(expected_adds(f), 0);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  fake_writer_events(&f->fw);
  assert_true(fake_writer_has_event(&f->fw, "FailedCreate: Error creating: every pod name"));
  assert_int_equal(kcm_workqueue_requeues(&f->rc.rt.queue, KEY), 1);
}

/* A controller standing aside starts no sync: the key waits, and is synced
 * once it takes keys again. */
static void rs_paused_waits(void **state) {
  struct fixture *f = *state;
  kcm_runtime_pause(&f->rc.rt, true);
  put_rs(f, 1);
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(f->fw.n, 0);
  assert_int_equal(kcm_workqueue_len(&f->rc.rt.queue), 1);
  kcm_runtime_pause(&f->rc.rt, false);
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 1);
}

static bool hold_ns(void *ctx, const char *ns, size_t n) {
  return n == 2 && !memcmp(ns, "ns", 2) && *(bool *)ctx;
}

/* A controller standing aside in a namespace starts no sync there: the
 * key leaves the queue and waits, once however often it comes, until the
 * held keys are released; then it is synced. */
static void rs_gate_holds_a_namespace(void **state) {
  struct fixture *f = *state;
  bool holding = true;
  kcm_runtime_gate(&f->rc.rt, hold_ns, &holding);
  put_rs(f, 1);
  kcm_runtime_run(&f->rc.rt);
  kcm_runtime_enqueue_key(&f->rc.rt, KEY);
  kcm_runtime_enqueue_key(&f->rc.rt, "nsx/web"); /* another namespace: synced */
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(f->fw.n, 0);
  assert_int_equal(kcm_workqueue_len(&f->rc.rt.queue), 0);
  assert_int_equal(f->rc.rt.held.len, 1);
  kcm_runtime_release_held(&f->rc.rt); /* still held: back to waiting */
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(f->fw.n, 0);
  assert_int_equal(f->rc.rt.held.len, 1);
  holding = false;
  kcm_runtime_release_held(&f->rc.rt);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(f->rc.rt.held.len, 0);
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 1);
  kcm_runtime_gate(&f->rc.rt, NULL, NULL);
}

/* A namespace being deleted refuses creates: nothing to do, no error. */
static void rs_namespace_terminating(void **state) {
  struct fixture *f = *state;
  put_rs(f, 1);
  kcm_runtime_run(&f->rc.rt);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "POST", "/pods"), 403,
                     "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"ns is being "
                     "terminated\",\"reason\":\"Forbidden\",\"details\":{\"causes\":[{"
                     "\"reason\":\"NamespaceTerminating\"}]},\"code\":403}");
  assert_int_equal(expected_adds(f), 1); /* as upstream: counted as made */
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  fake_writer_events(&f->fw);
  assert_false(fake_writer_has_event(&f->fw, "FailedCreate"));
  assert_int_equal(f->rc.rt.stats.errors, 0);
}

/* A 409 on the status write is retried once at once, unguarded, onto the
 * ReplicaSet as it is now (upstream's one retry after a GET); a second 409
 * fails the sync, which is retried. */
static void rs_status_conflict(void **state) {
  struct fixture *f = *state;
  int i;
  put_rs(f, 1);
  put_pod(f, "a", RS_UID);
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 0);
  i = fake_writer_find(&f->fw, "PATCH", "/replicasets/web/status");
  assert_non_null(strstr(f->fw.calls[i].body, "\"resourceVersion\""));
  fake_writer_answer(&f->fw, i, 409,
                     fake_status(status, sizeof(status), 409, "Conflict", "modified"));
  assert_int_equal(f->rc.rt.stats.errors, 0);
  i = fake_writer_find(&f->fw, "PATCH", "/replicasets/web/status");
  assert_true(i >= 0);
  assert_null(strstr(f->fw.calls[i].body, "\"resourceVersion\""));
  assert_non_null(strstr(f->fw.calls[i].body, "\"readyReplicas\":1"));
  fake_writer_answer(&f->fw, i, 409,
                     fake_status(status, sizeof(status), 409, "Conflict", "modified"));
  assert_int_equal(fake_writer_pending(&f->fw, "PATCH", "/status"), 0);
  assert_int_equal(f->rc.rt.stats.errors, 1);
  assert_int_equal(kcm_workqueue_requeues(&f->rc.rt.queue, KEY), 1);
}

/* The retry after a 409 written, the sync is done. */
static void rs_status_conflict_retried(void **state) {
  struct fixture *f = *state;
  put_rs(f, 1);
  put_pod(f, "a", RS_UID);
  kcm_runtime_run(&f->rc.rt);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/replicasets/web/status"), 409,
                     fake_status(status, sizeof(status), 409, "Conflict", "modified"));
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/replicasets/web/status"), 200,
                     "{\"metadata\":{\"name\":\"web\",\"resourceVersion\":\"12\"}}");
  assert_int_equal(f->rc.rt.stats.errors, 0);
  assert_int_equal(kcm_workqueue_requeues(&f->rc.rt.queue, KEY), 0);
  assert_int_equal(f->rc.stats.status_writes, 1);
}

/* A failed sync is logged with its message and keys apart, in JSON too:
 * the controller and the key are values, never part of a key's name. */
static void rs_failure_logged(void **state) {
  struct fixture *f = *state;
  char *text = NULL, *line, *save = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);
  bool found = false;
  kcm_log_set_output(out);
  kcm_log_set_format(KCM_LOG_JSON);
  put_rs(f, 1);
  put_pod(f, "a", RS_UID);
  kcm_runtime_run(&f->rc.rt);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/replicasets/web/status"), 500,
                     fake_status(status, sizeof(status), 500, "InternalError", "etcd down"));
  kcm_log_set_format(KCM_LOG_TEXT);
  kcm_log_set_output(NULL);
  fclose(out);
  for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    struct json_object *o = json_tokener_parse(line), *v;
    if (o && json_object_object_get_ex(o, "msg", &v) &&
        !strcmp(json_object_get_string(v), "sync failed; retrying")) {
      assert_true(json_object_object_get_ex(o, "controller", &v));
      assert_string_equal(json_object_get_string(v), "replicaset");
      assert_true(json_object_object_get_ex(o, "key", &v));
      assert_string_equal(json_object_get_string(v), KEY);
      found = true;
    }
    json_object_put(o);
  }
  free(text);
  assert_true(found);
}

/* A ReplicaSet of 1 with three pods: a sync sends two deletes. */
static void two_deletes_sent(struct fixture *f) {
  put_rs(f, 1);
  put_pod(f, "a", RS_UID);
  put_pod(f, "b", RS_UID);
  put_pod(f, "c", RS_UID);
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(fake_writer_pending(&f->fw, "DELETE", "/pods/"), 2);
}

/* Deletes: a 404 is the deletion done; another error is reported; each
 * lowers the expectation, since the cache will not see it. */
static void rs_delete_errors(void **state) {
  struct fixture *f = *state;
  two_deletes_sent(f);
  assert_int_equal(expected_dels(f), 2);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "DELETE", "/pods/"), 404,
                     fake_status(status, sizeof(status), 404, "NotFound", "gone"));
  assert_int_equal(expected_dels(f), 1);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "DELETE", "/pods/"), 500,
                     fake_status(status, sizeof(status), 500, "InternalError", "etcd down"));
  assert_int_equal(expected_dels(f), 0);
  assert_non_null(strstr(status_patch(f), "FailedDelete"));
  /* the condition says what upstream's pod control returns */
  assert_non_null(strstr(status_patch(f), "\"message\":\"unable to delete pods: etcd down\""));
  /* the pod already gone is no replica; the one whose delete failed is */
  assert_non_null(strstr(status_patch(f), "\"replicas\":2,"));
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  fake_writer_events(&f->fw);
  assert_true(fake_writer_has_event(&f->fw, "FailedDelete: Error deleting: etcd down"));
  assert_int_equal(kcm_workqueue_requeues(&f->rc.rt.queue, KEY), 1);
}

/* The status written after deletes counts the pods they removed out, so
 * the deletions arriving from the watch change nothing more. */
static void rs_status_after_deletes(void **state) {
  struct fixture *f = *state;
  two_deletes_sent(f);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "DELETE", "/pods/"), 200, "{}");
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "DELETE", "/pods/"), 200, "{}");
  assert_non_null(status_patch(f));
  assert_non_null(strstr(status_patch(f), "\"replicas\":1,\"fullyLabeledReplicas\":1,"
                                          "\"readyReplicas\":1,\"availableReplicas\":1"));
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  fake_writer_events(&f->fw);
  assert_int_equal(f->rc.rt.stats.errors, 0);
}

/* A pod the delete left terminating (its grace period running) is counted
 * in status.terminatingReplicas by the status written after the deletes,
 * so its deletionTimestamp arriving from the watch changes nothing more;
 * one deleted at once (grace period 0: not scheduled, or finished) is not. */
static void rs_status_counts_pods_left_terminating(void **state) {
  struct fixture *f = *state;
  const char *graceful = "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":"
                         "\"2026-01-01T00:00:30Z\",\"deletionGracePeriodSeconds\":30},"
                         "\"spec\":{\"nodeName\":\"n1\"},\"status\":{\"phase\":\"Running\"}}",
             *at_once = "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"b\",\"deletionTimestamp\":"
                        "\"2026-01-01T00:00:00Z\",\"deletionGracePeriodSeconds\":0},"
                        "\"spec\":{},\"status\":{\"phase\":\"Pending\"}}";
  two_deletes_sent(f);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "DELETE", "/pods/"), 200, graceful);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "DELETE", "/pods/"), 200, at_once);
  assert_non_null(status_patch(f));
  assert_non_null(strstr(status_patch(f), "\"replicas\":1,"));
  assert_non_null(strstr(status_patch(f), "\"terminatingReplicas\":1"));
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  fake_writer_events(&f->fw);
  assert_int_equal(f->rc.rt.stats.errors, 0);
}

/* The ReplicaSet at resourceVersion rv and generation gen wanting
 * `replicas` pods, its status as last written the JSON object `written`. */
static void put_rs_status(struct fixture *f, int rv, int gen, int replicas, const char *written) {
  char text[2048];
  snprintf(text, sizeof(text),
           "{\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\",\"uid\":\"" RS_UID "\","
           "\"resourceVersion\":\"%d\",\"generation\":%d},\"spec\":{\"replicas\":%d,"
           "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":"
           "{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
           "\"image\":\"nginx\"}]}}},\"status\":%s}",
           rv, gen, replicas, written);
  put(f, KCM_KIND_REPLICASET, text);
}

/* The ReplicaSet at resourceVersion rv wanting 3 pods, with `ready` of
 * them reported ready. */
static void put_rs_reporting(struct fixture *f, int rv, int ready) {
  char written[256];
  snprintf(written, sizeof(written),
           "{\"replicas\":3,\"fullyLabeledReplicas\":3,\"readyReplicas\":%d,"
           "\"availableReplicas\":%d,\"observedGeneration\":1}",
           ready, ready);
  put_rs_status(f, rv, 1, 3, written);
}

/* Pod name of the ReplicaSet's, ready or not (resourceVersion rv). */
static void put_pod_ready(struct fixture *f, const char *name, bool ready, int rv) {
  char text[2048];
  snprintf(text, sizeof(text),
           "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\","
           "\"uid\":\"cccccccc-0000-0000-0000-%012x\",\"resourceVersion\":\"%d\","
           "\"creationTimestamp\":\"2026-01-01T00:00:00Z\",\"labels\":{\"app\":\"web\"},"
           "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
           "\"name\":\"web\",\"uid\":\"" RS_UID "\",\"controller\":true}]},"
           "\"spec\":{\"nodeName\":\"n1\"},\"status\":{\"phase\":\"Running\","
           "\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\","
           "\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}}",
           name, (unsigned)name[0], rv, ready ? "True" : "False");
  put(f, KCM_KIND_POD, text);
}

static size_t rs_status_writes(struct fixture *f) {
  size_t i, n = 0;
  for (i = 0; i < f->fw.n; i++)
    n += !strcmp(f->fw.calls[i].method, "PATCH") &&
         strstr(f->fw.calls[i].path, "/replicasets/web/status") != NULL;
  return n;
}

/* More pods ready soon after the last status write wait for the interval;
 * the status reporting the spec met (a rollout step's end) goes at once. */
static void rs_gains_paced_until_spec_met(void **state) {
  struct fixture *f = *state;
  int i;
  f->rc.status_pacer.interval_ms = 60000;
  put_rs_reporting(f, 10, 0);
  put_pod_ready(f, "a", true, 5);
  put_pod_ready(f, "b", false, 5);
  put_pod_ready(f, "c", false, 5);
  kcm_runtime_run(&f->rc.rt); /* the first write: at once */
  assert_int_equal(rs_status_writes(f), 1);
  assert_non_null(strstr(status_patch(f), "\"readyReplicas\":1,"));
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  put_rs_reporting(f, 11, 1);
  put_pod_ready(f, "b", true, 6); /* 2 of 3: waits */
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(rs_status_writes(f), 1);
  assert_int_equal(f->rc.stats.status_paced, 1);
  put_pod_ready(f, "c", true, 7); /* 3 of 3: at once */
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(rs_status_writes(f), 2);
  i = fake_writer_find(&f->fw, "PATCH", "/status");
  assert_true(i >= 0);
  assert_non_null(strstr(f->fw.calls[i].body, "\"readyReplicas\":3,"));
  fake_writer_answer(&f->fw, i, 200, "{}");
  assert_int_equal(f->rc.stats.status_paced, 1);
}

/* The ReplicaSet at resourceVersion rv and generation gen wanting 2 pods,
 * its status as last written: 1 pod, ready, generation 1 observed. */
static void put_rs_scaled(struct fixture *f, int rv, int gen) {
  put_rs_status(f, rv, gen, 2,
                "{\"replicas\":1,\"fullyLabeledReplicas\":1,\"readyReplicas\":1,"
                "\"availableReplicas\":1,\"terminatingReplicas\":0,\"observedGeneration\":1}");
}

/* A generation seen for the first time, with the pods for it not all
 * available, is held from that sync: written with the step's end when they
 * are, or an interval later when they are not. */
static void rs_new_generation_held_until_available(void **state) {
  struct fixture *f = *state;
  int i, turns;
  f->rc.status_pacer.interval_ms = 60000;
  put_rs_scaled(f, 10, 2); /* scaled from 1 to 2 */
  put_pod_ready(f, "a", true, 5);
  put_pod_ready(f, "b", false, 5);
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(rs_status_writes(f), 0);
  assert_int_equal(f->rc.stats.status_paced, 1);
  put_pod_ready(f, "b", true, 6); /* 2 of 2 available: at once */
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(rs_status_writes(f), 1);
  i = fake_writer_find(&f->fw, "PATCH", "/status");
  assert_non_null(strstr(f->fw.calls[i].body, "\"readyReplicas\":2,"));
  assert_non_null(strstr(f->fw.calls[i].body, "\"observedGeneration\":2"));
  fake_writer_answer(&f->fw, i, 200, "{}");

  /* Scaled again, a pod that never becomes ready: the hold ends an
   * interval later. */
  f->rc.status_pacer.interval_ms = 20;
  put_rs_scaled(f, 11, 3);
  put_pod_ready(f, "b", false, 7);
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(rs_status_writes(f), 1);
  for (turns = 0; rs_status_writes(f) < 2 && turns < 1000; turns++)
    uv_run(&f->loop, UV_RUN_ONCE);
  assert_int_equal(rs_status_writes(f), 2);
  i = fake_writer_find(&f->fw, "PATCH", "/status");
  assert_non_null(strstr(f->fw.calls[i].body, "\"readyReplicas\":1,"));
  assert_non_null(strstr(f->fw.calls[i].body, "\"observedGeneration\":3"));
  fake_writer_answer(&f->fw, i, 200, "{}");
}

/* An orphan is adopted only after the ReplicaSet is read again; when that
 * read fails nothing is claimed, created or written. */
static void rs_adoption_checks_first(void **state) {
  struct fixture *f = *state;
  int i;
  put_rs(f, 1);
  put_pod(f, "orphan", NULL);
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(f->fw.n, 1);
  i = fake_writer_find(&f->fw, "GET", "/replicasets/web");
  assert_true(i >= 0);
  fake_writer_answer(&f->fw, i, 403,
                     fake_status(status, sizeof(status), 403, "Forbidden", "no"));
  assert_int_equal(f->fw.n, 1);
  assert_int_equal(kcm_workqueue_requeues(&f->rc.rt.queue, KEY), 1);
}

static void rs_adoption_patches_owner(void **state) {
  struct fixture *f = *state;
  char rs[1024];
  int i;
  put_rs(f, 1);
  put_pod(f, "orphan", NULL);
  kcm_runtime_run(&f->rc.rt);
  snprintf(rs, sizeof(rs), "{\"metadata\":{\"name\":\"web\",\"uid\":\"%s\"}}", RS_UID);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "GET", "/replicasets/web"), 200, rs);
  i = fake_writer_find(&f->fw, "PATCH", "/pods/orphan");
  assert_true(i >= 0);
  assert_string_equal(f->fw.calls[i].content_type, "application/strategic-merge-patch+json");
  assert_non_null(strstr(f->fw.calls[i].body, RS_UID));
  fake_writer_answer(&f->fw, i, 200, "{}");
  assert_int_equal(fake_writer_pending(&f->fw, "POST", "/pods"), 0); /* it counts */
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  assert_int_equal(f->rc.rt.stats.errors, 0);
}

/* After a sync adopted a pod, the next one waits until the pods' cache has
 * seen the version the patch got back: from a cache where the pod is still
 * an orphan it would adopt it again (or count it short). */
static void rs_waits_for_the_pods_it_wrote(void **state) {
  struct fixture *f = *state;
  char rs[1024];
  put_rs(f, 1);
  put_pod(f, "orphan", NULL);
  kcm_informer_set_rv(&f->inf[KCM_KIND_POD], "150");
  kcm_runtime_run(&f->rc.rt);
  snprintf(rs, sizeof(rs), "{\"metadata\":{\"name\":\"web\",\"uid\":\"%s\"}}", RS_UID);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "GET", "/replicasets/web"), 200, rs);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/pods/orphan"), 200,
                     "{\"metadata\":{\"name\":\"orphan\",\"resourceVersion\":\"200\"}}");
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  assert_int_equal(f->fw.n, 3);
  /* An event of another pod moves the cache to 199: not yet. */
  kcm_informer_set_rv(&f->inf[KCM_KIND_POD], "199");
  kcm_runtime_enqueue_key(&f->rc.rt, KEY);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(f->fw.n, 3);
  assert_int_equal(f->rc.rt.stats.stale_dependents, 1);
  /* The adopted pod's event: the sync goes on, and adopts nothing. */
  kcm_informer_set_rv(&f->inf[KCM_KIND_POD], "200");
  put_pod(f, "orphan", RS_UID);
  kcm_runtime_enqueue_key(&f->rc.rt, KEY);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(fake_writer_pending(&f->fw, "GET", "/replicasets/web"), 0);
  assert_int_equal(fake_writer_pending(&f->fw, "PATCH", "/pods/orphan"), 0);
  assert_int_equal(f->rc.rt.stats.stale_dependents, 1);
  assert_true(f->rc.rt.stats.syncs >= 2);
}

/* Shadow mode: the shadow wraps the runtime's writer and its release of a
 * sync; the writes a sync sends (its key their origin) are its plan,
 * judged when the sync is over (pending: the live controller may not have
 * acted yet), and the key is synced again when the window has passed. */
static void rs_shadow_judges_the_plan(void **state) {
  struct fixture *f = *state;
  struct kcm_writer *writer = f->rc.rt.writer;
  const struct kcm_runtime_ops *ops = f->rc.rt.ops;
  struct kcm_shadow sh;
  kcm_shadow_init(&sh, "replicaset", 60000);
  kcm_shadow_follow(&sh, &f->rc.rt);
  assert_ptr_equal(f->rc.rt.writer, &sh.writer);
  put_rs(f, 1);
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(sh.syncing.len, 1); /* the create, under the sync's key */
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "POST", "/pods"), 201, "{}");
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PATCH", "/status"), 200, "{}");
  assert_int_equal(sh.syncs, 1);
  assert_int_equal(sh.agreements, 0);
  assert_non_null(kcm_map_get(&sh.pending, KEY));
  assert_int_equal(sh.syncing.len, 0);
  assert_true(kcm_workqueue_len(&f->rc.rt.queue) == 0 && f->rc.rt.queue.nheap == 1);
  f->rc.rt.writer = writer; /* the sync a later event starts ends at teardown */
  f->rc.rt.ops = ops;
  kcm_shadow_release(&sh);
}

/* --- writes as updates ------------------------------------------------------------------ */

/* A service account holding only upstream's replicaset-controller role may
 * update replicasets/status, not patch it: the status write becomes a GET
 * of the ReplicaSet, the patch applied to it, and a PUT of the whole object
 * at the version the patch was made from. */
static void rs_status_as_update(void **state) {
  struct fixture *f = *state;
  const char *body;
  int i;
  f->fw.w.as_update = true;
  put_rs(f, 1);
  put_pod(f, "a", RS_UID);
  kcm_runtime_run(&f->rc.rt);
  assert_int_equal(fake_writer_pending(&f->fw, "PATCH", "/status"), 0);
  i = fake_writer_find(&f->fw, "GET", "/replicasets/web");
  assert_true(i >= 0);
  assert_null(strstr(f->fw.calls[i].path, "/status"));
  fake_writer_answer(&f->fw, i,
                     200, "{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"metadata\":"
                          "{\"name\":\"web\",\"namespace\":\"ns\",\"resourceVersion\":\"10\","
                          "\"labels\":{\"x\":\"y\"}},\"spec\":{\"replicas\":1},\"status\":"
                          "{\"replicas\":0,\"conditions\":[{\"type\":\"Old\"}]}}");
  i = fake_writer_find(&f->fw, "PUT", "/replicasets/web/status");
  assert_true(i >= 0);
  body = f->fw.calls[i].body;
  assert_non_null(strstr(body, "\"resourceVersion\":\"10\"")); /* the cached one: a guard */
  assert_non_null(strstr(body, "\"labels\":{\"x\":\"y\"}"));   /* the rest kept */
  assert_non_null(strstr(body, "\"spec\":{\"replicas\":1}"));
  assert_non_null(strstr(body, "\"readyReplicas\":1"));
  assert_null(strstr(body, "\"Old\""));                          /* conditions replaced */
  fake_writer_answer(&f->fw, i, 409,
                     fake_status(status, sizeof(status), 409, "Conflict", "modified"));
  /* once more: read again, PUT at the version read */
  assert_int_equal(f->rc.rt.stats.errors, 0);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "GET", "/replicasets/web"), 200,
                     "{\"metadata\":{\"name\":\"web\",\"resourceVersion\":\"11\"},"
                     "\"spec\":{\"replicas\":2},\"status\":{}}");
  i = fake_writer_find(&f->fw, "PUT", "/replicasets/web/status");
  assert_true(i >= 0);
  assert_non_null(strstr(f->fw.calls[i].body, "\"resourceVersion\":\"11\""));
  assert_non_null(strstr(f->fw.calls[i].body, "\"spec\":{\"replicas\":2}"));
  fake_writer_answer(&f->fw, i, 409,
                     fake_status(status, sizeof(status), 409, "Conflict", "modified"));
  assert_int_equal(fake_writer_pending(&f->fw, "GET", "/replicasets/web"), 0);
  assert_int_equal(f->rc.rt.stats.errors, 1);
  assert_int_equal(kcm_workqueue_requeues(&f->rc.rt.queue, KEY), 1);
}

/* The object read is newer than the patch's version: a conflict, as the
 * API server would answer the PUT, and no PUT is sent; the retry reads it
 * again and writes the status at the version read. */
static void rs_status_as_update_stale(void **state) {
  struct fixture *f = *state;
  const char *newer = "{\"metadata\":{\"name\":\"web\",\"resourceVersion\":\"12\"},"
                      "\"status\":{}}";
  int i;
  f->fw.w.as_update = true;
  put_rs(f, 1);
  put_pod(f, "a", RS_UID);
  kcm_runtime_run(&f->rc.rt);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "GET", "/replicasets/web"), 200, newer);
  assert_int_equal(fake_writer_pending(&f->fw, "PUT", "/status"), 0);
  fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "GET", "/replicasets/web"), 200, newer);
  i = fake_writer_find(&f->fw, "PUT", "/replicasets/web/status");
  assert_true(i >= 0);
  assert_non_null(strstr(f->fw.calls[i].body, "\"resourceVersion\":\"12\""));
  fake_writer_answer(&f->fw, i, 200, newer);
  assert_int_equal(f->rc.rt.stats.errors, 0);
  assert_int_equal(kcm_workqueue_requeues(&f->rc.rt.queue, KEY), 0);
}

struct answer {
  int err;
  long status;
};

static void on_answer(const struct kcm_client_response *resp, void *data) {
  struct answer *r = data;
  r->err = resp->err;
  r->status = resp->status;
}

/* A JSON patch's test op is checked against the object read: a failure is
 * a conflict, and nothing is written. */
static void json_patch_as_update(void **state) {
  struct fixture *f = *state;
  struct kcm_write req;
  struct answer r = {1, -1};
  static const char doc[] =
      "{\"metadata\":{\"name\":\"web\",\"resourceVersion\":\"7\",\"annotations\":"
      "{\"a\":\"1\",\"b/c\":\"2\"}},\"spec\":{\"template\":{\"x\":1}}}";
  int i;
  f->fw.w.as_update = true;
  for (i = 0; i < 2; i++) {
    char patch[512];
    snprintf(patch, sizeof(patch),
             "[{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\",\"value\":\"%s\"},"
             "{\"op\":\"replace\",\"path\":\"/spec/template\",\"value\":{\"y\":2}},"
             "{\"op\":\"remove\",\"path\":\"/metadata/annotations/b~1c\"},"
             "{\"op\":\"add\",\"path\":\"/metadata/annotations/d\",\"value\":\"4\"}]",
             i ? "6" : "7");
    assert_int_equal(kcm_writer_patch(&req, KCM_KIND_DEPLOYMENT, "ns", "web", NULL,
                                      KCM_PATCH_JSON, patch),
                     0);
    assert_true(req.update_only);
    assert_int_equal(kcm_writer_send(&f->fw.w, &req, on_answer, &r), 0);
    fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "GET", "/deployments/web"), 200, doc);
    if (i == 0) {
      const char *body = f->fw.calls[fake_writer_find(&f->fw, "PUT", "/deployments/web")].body;
      assert_non_null(strstr(body, "\"template\":{\"y\":2}"));
      assert_non_null(strstr(body, "\"annotations\":{\"a\":\"1\",\"d\":\"4\"}"));
      fake_writer_answer(&f->fw, fake_writer_find(&f->fw, "PUT", "/deployments/web"), 200, "{}");
      assert_int_equal(r.err, 0);
    } else {
      assert_int_equal(fake_writer_find(&f->fw, "PUT", "/deployments/web"), -1);
      assert_int_equal(r.err, KCM_ECONFLICT);
      assert_int_equal(r.status, 409);
    }
  }
}

/* --- Deployments ------------------------------------------------------------------------ */

static void put_deployment(struct fixture *f) {
  put(f, KCM_KIND_DEPLOYMENT,
      "{\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\",\"uid\":\"" D_UID "\","
      "\"resourceVersion\":\"20\",\"generation\":1},\"spec\":{\"replicas\":2,"
      "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":"
      "{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
      "\"image\":\"nginx\"}]}},\"strategy\":{\"type\":\"RollingUpdate\"},"
      "\"progressDeadlineSeconds\":600},\"status\":{}}");
}

static int create_of_new_rs(struct fixture *f) {
  kcm_runtime_run(&f->dc.rt);
  return fake_writer_find(&f->fw, "POST", "/replicasets");
}

/* The name of a new ReplicaSet taken by one of another template: a hash
 * collision, counted in the status so the next name differs. */
static void dp_hash_collision(void **state) {
  struct fixture *f = *state;
  char rs[2048], name[128];
  int i;
  put_deployment(f);
  i = create_of_new_rs(f);
  assert_true(i >= 0);
  {
    const char *p = strstr(f->fw.calls[i].body, "\"name\":\"web-") + 8;
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(p, "\""), p);
  }
  snprintf(rs, sizeof(rs),
           "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"" RS_UID "\","
           "\"resourceVersion\":\"3\",\"labels\":{\"app\":\"web\"}},\"spec\":{\"replicas\":0,"
           "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":"
           "{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
           "\"image\":\"other\"}]}}},\"status\":{}}",
           name);
  put(f, KCM_KIND_REPLICASET, rs); /* an orphan of another template */
  fake_writer_answer(&f->fw, i, 409,
                     fake_status(status, sizeof(status), 409, "AlreadyExists", "exists"));
  i = fake_writer_find(&f->fw, "PATCH", "/deployments/web/status");
  assert_true(i >= 0);
  assert_non_null(strstr(f->fw.calls[i].body, "\"collisionCount\":1"));
  fake_writer_answer(&f->fw, i, 200, "{}");
  assert_int_equal(f->dc.stats.collisions, 1);
  assert_int_equal(f->dc.rt.stats.errors, 1);
}

/* A create refused: ReplicaSetCreateError as an event and in Progressing. */
static void dp_create_forbidden(void **state) {
  struct fixture *f = *state;
  int i;
  put_deployment(f);
  i = create_of_new_rs(f);
  fake_writer_answer(&f->fw, i, 403,
                     fake_status(status, sizeof(status), 403, "Forbidden", "quota"));
  i = fake_writer_find(&f->fw, "PATCH", "/deployments/web/status");
  assert_true(i >= 0);
  assert_non_null(strstr(f->fw.calls[i].body, "ReplicaSetCreateError"));
  fake_writer_answer(&f->fw, i, 200, "{}");
  fake_writer_events(&f->fw);
  assert_true(fake_writer_has_event(&f->fw, "ReplicaSetCreateError: Failed to create new "
                                            "replica set"));
  assert_int_equal(kcm_workqueue_requeues(&f->dc.rt.queue, KEY), 1);
}

/* A namespace being deleted: the key is forgotten, not retried. */
static void dp_namespace_terminating(void **state) {
  struct fixture *f = *state;
  put_deployment(f);
  fake_writer_answer(&f->fw, create_of_new_rs(f), 403,
                     "{\"kind\":\"Status\",\"status\":\"Failure\",\"message\":\"terminating\","
                     "\"reason\":\"Forbidden\",\"details\":{\"causes\":[{\"reason\":"
                     "\"NamespaceTerminating\"}]},\"code\":403}");
  assert_int_equal(f->fw.n, 1);
  assert_int_equal(f->dc.rt.stats.errors, 1);
  assert_int_equal(kcm_workqueue_requeues(&f->dc.rt.queue, KEY), 0);
  assert_int_equal(kcm_workqueue_len(&f->dc.rt.queue), 0);
}

/* The steps go one at a time: after the create, the status write; a 409
 * on it fails the sync and the key is retried. */
static void dp_status_conflict(void **state) {
  struct fixture *f = *state;
  int i;
  put_deployment(f);
  i = create_of_new_rs(f);
  assert_int_equal(f->fw.n, 1);
  fake_writer_answer(&f->fw, i, 201,
                     "{\"metadata\":{\"resourceVersion\":\"30\"},\"spec\":{}}");
  i = fake_writer_find(&f->fw, "PATCH", "/deployments/web/status");
  assert_true(i >= 0);
  assert_int_equal(f->dc.rt.running, 0); /* the last step gave the worker back */
  fake_writer_answer(&f->fw, i, 409,
                     fake_status(status, sizeof(status), 409, "Conflict", "modified"));
  assert_int_equal(f->dc.rt.stats.errors, 1);
  assert_int_equal(kcm_workqueue_requeues(&f->dc.rt.queue, KEY), 1);
}

/* A request the writer refuses fails the sync at once. */
static void dp_send_refused(void **state) {
  struct fixture *f = *state;
  put_deployment(f);
  f->fw.refuse = KCM_ENOMEM;
  kcm_runtime_run(&f->dc.rt);
  f->fw.refuse = 0;
  assert_int_equal(f->dc.rt.stats.errors, 1);
  assert_int_equal(kcm_workqueue_requeues(&f->dc.rt.queue, KEY), 1);
}

/* The Deployment's ReplicaSet `name`, owned, with 2 replicas of which
 * `ready` are ready and available. */
static void put_owned_rs(struct fixture *f, const char *name, int rv, int generation, int ready) {
  char text[2048];
  snprintf(text, sizeof(text),
           "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"" RS_UID "\","
           "\"resourceVersion\":\"%d\",\"generation\":%d,\"labels\":{\"app\":\"web\"},"
           "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\","
           "\"name\":\"web\",\"uid\":\"" D_UID "\",\"controller\":true}]},"
           "\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
           "\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":"
           "{\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}},\"status\":"
           "{\"replicas\":2,\"readyReplicas\":%d,\"availableReplicas\":%d,"
           "\"observedGeneration\":%d}}",
           name, rv, generation, ready, ready, generation);
  put(f, KCM_KIND_REPLICASET, text);
}

/* Answer every request (200) and run the syncs that follow until none is left. */
static void settle_all(struct fixture *f) {
  size_t i;
  bool more = true;
  while (more) {
    more = false;
    uv_run(&f->loop, UV_RUN_NOWAIT);
    fake_writer_events(&f->fw);
    for (i = 0; i < f->fw.n; i++)
      if (!f->fw.calls[i].answered) {
        fake_writer_answer(&f->fw, (int)i, 200, "{}");
        more = true;
      }
  }
}

/* The Deployment made, its new ReplicaSet created (its name in name) and
 * every write after answered. */
static void new_rs_made(struct fixture *f, char *name, size_t len) {
  const char *p;
  int i;
  put_deployment(f);
  i = create_of_new_rs(f);
  assert_true(i >= 0);
  p = strstr(f->fw.calls[i].body, "\"name\":\"web-") + 8;
  snprintf(name, len, "%.*s", (int)strcspn(p, "\""), p);
  fake_writer_answer(&f->fw, i, 201, "{\"metadata\":{\"resourceVersion\":\"30\"},\"spec\":{}}");
  settle_all(f);
}

/* A ReplicaSet's status moving soon after its Deployment wrote waits for
 * the interval; reaching its spec, or a change of its spec, does not. */
static void dp_rs_status_paced(void **state) {
  struct fixture *f = *state;
  char name[128];
  f->dc.sync_pacer.interval_ms = 60000;
  new_rs_made(f, name, sizeof(name));
  put_owned_rs(f, name, 40, 1, 0); /* the created one arrives: synced at once */
  assert_int_equal(kcm_workqueue_len(&f->dc.rt.queue), 1);
  settle_all(f);
  assert_int_equal(kcm_workqueue_len(&f->dc.rt.queue), 0);

  put_owned_rs(f, name, 41, 1, 1); /* a pod became ready */
  assert_int_equal(f->dc.stats.paced, 1);
  assert_int_equal(kcm_workqueue_len(&f->dc.rt.queue), 0);
  put_owned_rs(f, name, 42, 1, 2); /* both are: a step's end, synced at once */
  assert_int_equal(f->dc.stats.paced, 1);
  assert_int_equal(kcm_workqueue_len(&f->dc.rt.queue), 1);
  settle_all(f);
  put_owned_rs(f, name, 43, 2, 1); /* its spec changed */
  assert_int_equal(f->dc.stats.paced, 1);
  assert_int_equal(kcm_workqueue_len(&f->dc.rt.queue), 1);
}

/* Status writes answered so far and, of the last, the status it wrote. */
static size_t status_writes(struct fixture *f, struct json_object **last) {
  size_t i, n = 0;
  for (i = 0; i < f->fw.n; i++)
    if (!strcmp(f->fw.calls[i].method, "PATCH") &&
        strstr(f->fw.calls[i].path, "/deployments/web/status")) {
      n++;
      if (last) {
        json_object_put(*last);
        *last = json_tokener_parse(f->fw.calls[i].body);
      }
    }
  return n;
}

/* The Deployment as put_deployment() has it, but for maxUnavailable 0 (it
 * is available only with both replicas), at resourceVersion rv, with a
 * status write (a merge patch of its status and annotations) applied. */
static void put_deployment_written(struct fixture *f, struct json_object *patch, int rv) {
  char text[4096];
  struct json_object *st, *meta, *annotations;
  assert_true(json_object_object_get_ex(patch, "status", &st));
  assert_true(json_object_object_get_ex(patch, "metadata", &meta));
  assert_true(json_object_object_get_ex(meta, "annotations", &annotations));
  snprintf(text, sizeof(text),
           "{\"metadata\":{\"name\":\"web\",\"namespace\":\"ns\",\"uid\":\"" D_UID "\","
           "\"resourceVersion\":\"%d\",\"generation\":1,\"annotations\":%s},\"spec\":{"
           "\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":"
           "{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"containers\":[{\"name\":"
           "\"c\",\"image\":\"nginx\"}]}},\"strategy\":{\"type\":\"RollingUpdate\","
           "\"rollingUpdate\":{\"maxUnavailable\":0,\"maxSurge\":1}},"
           "\"progressDeadlineSeconds\":600},\"status\":%s}",
           rv, json_object_to_json_string_ext(annotations, JSON_C_TO_STRING_PLAIN),
           json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN));
  put(f, KCM_KIND_DEPLOYMENT, text);
}

/* A status write that only reports progress, soon after the last one,
 * waits for the interval; reaching complete is written at once. */
static void dp_progress_status_paced(void **state) {
  struct fixture *f = *state;
  struct json_object *last = NULL;
  char name[128];
  size_t n;
  f->dc.status_pacer.interval_ms = 60000;
  new_rs_made(f, name, sizeof(name));
  put_owned_rs(f, name, 40, 1, 0);
  settle_all(f);
  n = status_writes(f, &last);
  assert_true(n >= 1);
  put_deployment_written(f, last, 50); /* the cache has what was written */
  settle_all(f);
  assert_int_equal(status_writes(f, NULL), n);

  put_owned_rs(f, name, 41, 1, 1); /* one pod of two ready: progress */
  settle_all(f);
  assert_int_equal(status_writes(f, NULL), n);
  assert_int_equal(f->dc.stats.status_paced, 1);

  put_owned_rs(f, name, 42, 1, 2); /* both: complete, written at once */
  settle_all(f);
  assert_int_equal(status_writes(f, &last), n + 1);
  assert_non_null(
      strstr(json_object_to_json_string_ext(last, JSON_C_TO_STRING_PLAIN), "\"availableReplicas\":2"));
  assert_int_equal(f->dc.stats.status_paced, 1);
  json_object_put(last);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(rs_slow_start_stops_on_first_failure, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_lost_create_answer, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_already_exists_then_get, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_every_name_taken, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_pod_names_are_drawn_apart, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_namespace_terminating, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_paused_waits, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_gate_holds_a_namespace, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_status_conflict, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_status_conflict_retried, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_delete_errors, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_status_after_deletes, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_status_counts_pods_left_terminating, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_gains_paced_until_spec_met, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_new_generation_held_until_available, setup_rs,
                                      teardown),
      cmocka_unit_test_setup_teardown(rs_failure_logged, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_adoption_checks_first, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_adoption_patches_owner, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_waits_for_the_pods_it_wrote, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_shadow_judges_the_plan, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_status_as_update, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(rs_status_as_update_stale, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(json_patch_as_update, setup_rs, teardown),
      cmocka_unit_test_setup_teardown(dp_hash_collision, setup_dp, teardown),
      cmocka_unit_test_setup_teardown(dp_create_forbidden, setup_dp, teardown),
      cmocka_unit_test_setup_teardown(dp_namespace_terminating, setup_dp, teardown),
      cmocka_unit_test_setup_teardown(dp_status_conflict, setup_dp, teardown),
      cmocka_unit_test_setup_teardown(dp_send_refused, setup_dp, teardown),
      cmocka_unit_test_setup_teardown(dp_rs_status_paced, setup_dp, teardown),
      cmocka_unit_test_setup_teardown(dp_progress_status_paced, setup_dp, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
