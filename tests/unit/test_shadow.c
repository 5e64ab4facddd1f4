/*
 * Tests for shadow mode's judging: which writes make a plan and how they
 * read, a plan the live controller carries out (agreement), one it leaves
 * undone for a window (one disagreement, until the key changes), and the
 * metrics and report that tell an operator.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "kcm/shadow.h"

#include "../../src/shadow/internal.h"

#define WINDOW 10000

static void add(struct kcm_buf *plan, const char *method, const char *path, const char *body) {
  struct kcm_write req = {0};
  req.method = method;
  snprintf(req.path, sizeof(req.path), "%s", path);
  req.body = body;
  kcm_shadow_plan_add(plan, &req);
}

static void plans_name_each_write(void **state) {
  struct kcm_buf plan = KCM_BUF_INIT(1 << 16);
  char reason[64], long_body[400], long_json[400];
  add(&plan, "GET", "/apis/apps/v1/namespaces/ns/replicasets/web", NULL);
  add(&plan, "POST", "/apis/apps/v1/namespaces/ns/replicasets?dryRun=All", "{}");
  assert_int_equal(plan.len, 0); /* a read and a dry run write nothing */
  add(&plan, "POST", "/api/v1/namespaces/ns/pods", "{\"kind\":\"Pod\"}");
  add(&plan, "PATCH", "/apis/apps/v1/namespaces/ns/replicasets/web/status",
      "{\"status\":\n{\"replicas\":2}}");
  add(&plan, "DELETE", "/api/v1/namespaces/ns/pods/web-x", "{}");
  memset(long_body, 'a', sizeof(long_body) - 1);
  long_body[sizeof(long_body) - 1] = '\0';
  add(&plan, "PUT", "/apis/apps/v1/namespaces/ns/deployments/d", long_body);
  snprintf(long_json, sizeof(long_json), "{\"spec\":{\"x\":\"%.300s\"}}", long_body);
  assert_non_null(plan.data);
  assert_memory_equal(plan.data,
                      "create pods\n"
                      "patch replicasets/web/status {\"status\":{\"replicas\":2}}\n"
                      "delete pods/web-x {}\n"
                      "update deployments/d (399 bytes, not shown)\n",
                      strlen("create pods\npatch replicasets/web/status {\"status\":"
                             "{\"replicas\":2}}\ndelete pods/web-x {}\nupdate deployments/d "
                             "(399 bytes, not shown)\n"));
  kcm_shadow_reason(plan.data, reason, sizeof(reason));
  assert_string_equal(reason, "create pods");
  kcm_shadow_reason("patch replicasets/web/status {}\n", reason, sizeof(reason));
  assert_string_equal(reason, "patch replicasets/status");
  kcm_shadow_reason("patch replicasets/web {}\n", reason, sizeof(reason));
  assert_string_equal(reason, "patch replicasets");
  kcm_shadow_reason("", reason, sizeof(reason));
  assert_string_equal(reason, "other");
  kcm_buf_reset(&plan);
  add(&plan, "PUT", "/apis/apps/v1/namespaces/ns/deployments/d", long_json);
  assert_non_null(strstr(plan.data, "...\n")); /* a long body cut */
  assert_true(plan.len < 200);
  kcm_buf_release(&plan);
}

/* A plan shows annotation keys but not their values (users keep secrets
 * there), but for the Deployment controller's own; counts stay. */
static void plans_redact_annotation_values(void **state) {
  struct kcm_buf plan = KCM_BUF_INIT(1 << 16);
  add(&plan, "PATCH", "/apis/apps/v1/namespaces/ns/replicasets/web",
      "{\"metadata\":{\"annotations\":{\"db-password\":\"hunter2\","
      "\"deployment.kubernetes.io/revision\":\"3\",\"n\":{\"x\":\"hunter2\"}}},"
      "\"spec\":{\"replicas\":2,\"template\":{\"metadata\":{\"annotations\":"
      "{\"token\":\"hunter2\"},\"labels\":{\"app\":\"web\"}}}}}");
  assert_non_null(plan.data);
  assert_null(strstr(plan.data, "hunter2"));
  assert_string_equal(plan.data,
                      "patch replicasets/web {\"metadata\":{\"annotations\":{\"db-password\":"
                      "\"(redacted)\",\"deployment.kubernetes.io/revision\":\"3\",\"n\":"
                      "\"(redacted)\"}},\"spec\":{\"replicas\":2,\"template\":{\"metadata\":{\""
                      "...\n");
  kcm_buf_reset(&plan);
  add(&plan, "PATCH", "/apis/apps/v1/namespaces/ns/replicasets/web",
      "{\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"token\":\"hunter2\"},"
      "\"labels\":{\"app\":\"web\"}}}}}");
  assert_string_equal(plan.data, "patch replicasets/web {\"spec\":{\"template\":{\"metadata\":"
                                 "{\"annotations\":{\"token\":\"(redacted)\"},\"labels\":"
                                 "{\"app\":\"web\"}}}}}\n");
  kcm_buf_release(&plan);
}

static void carried_out_plans_agree(void **state) {
  struct kcm_shadow s;
  kcm_shadow_init(&s, "replicaset", WINDOW);
  /* kcm would create a pod; the live controller does it; kcm then plans nothing. */
  assert_int_equal(kcm_shadow_judge(&s, "ns/web", "create pods\n", NULL, 0, 1000), WINDOW);
  kcm_shadow_changed(&s, "ns/web");
  assert_int_equal(kcm_shadow_judge(&s, "ns/web", "", NULL, 0, 1500), 0);
  /* A plan overtaken by a change is not judged, even a window later. */
  assert_int_equal(kcm_shadow_judge(&s, "ns/web", "create pods\n", NULL, 0, 2000), WINDOW);
  kcm_shadow_changed(&s, "ns/web");
  assert_int_equal(kcm_shadow_judge(&s, "ns/web", "create pods\n", NULL, 0, 2000 + WINDOW),
                   WINDOW);
  assert_int_equal(s.syncs, 4);
  assert_int_equal(s.agreements, 1);
  assert_int_equal(s.disagreements, 0);
  kcm_shadow_release(&s);
}

/* The writes each sync sent, keyed by the sync's key, are its plan; a sync
 * that sent none agrees; a sync that read other inputs than the last one
 * that planned is a change, its plan judged afresh; the same inputs keep
 * the pending plan's age. */
static void syncs_are_judged_by_key_and_inputs(void **state) {
  struct kcm_shadow s;
  struct kcm_write create = {.method = "POST", .path = "/api/v1/namespaces/ns/pods"};
  kcm_shadow_init(&s, "replicaset", WINDOW);
  kcm_shadow_sent(&s, "ns/web", &create);
  assert_int_equal(kcm_shadow_over(&s, "ns/db", NULL, 7, 0, 1000), 0); /* db sent nothing */
  assert_int_equal(kcm_shadow_over(&s, "ns/web", NULL, 1, 0, 1000), WINDOW);
  assert_int_equal(s.agreements, 1);
  assert_non_null(kcm_map_get(&s.pending, "ns/web"));
  assert_int_equal(s.syncing.len, 0); /* each sync's plan goes with it */
  /* the same inputs half a window on: still pending, its age kept */
  kcm_shadow_sent(&s, "ns/web", &create);
  assert_int_equal(kcm_shadow_over(&s, "ns/web", NULL, 1, 0, 1000 + WINDOW / 2), WINDOW / 2);
  /* other inputs (a pod came): a change; the plan is new, its window whole */
  kcm_shadow_sent(&s, "ns/web", &create);
  assert_int_equal(kcm_shadow_over(&s, "ns/web", NULL, 2, 0, 1000 + WINDOW), WINDOW);
  /* the same inputs a window later: a disagreement */
  kcm_shadow_sent(&s, "ns/web", &create);
  assert_int_equal(kcm_shadow_over(&s, "ns/web", NULL, 2, 0, 1000 + 2 * WINDOW), 0);
  assert_int_equal(s.disagreements, 1);
  /* the next sync of web sent nothing: it agrees */
  assert_int_equal(kcm_shadow_over(&s, "ns/web", NULL, 2, KCM_SHADOW_BLIND, 5000 + 2 * WINDOW),
                   0);
  assert_int_equal(s.agreements, 2);
  kcm_shadow_release(&s);
}

static void plans_left_undone_disagree_once(void **state) {
  struct kcm_shadow s;
  struct kcm_replicaset rs;
  memset(&rs, 0, sizeof(rs));
  rs.o.kind = KCM_KIND_REPLICASET;
  rs.o.rv = 42;
  rs.o.generation = 3;
  rs.replicas = 2;
  rs.status.replicas = 1;
  rs.status.observed_generation = 3;
  rs.writers.status[0].manager = "kube-controller-manager";
  rs.writers.n = 1;
  kcm_shadow_init(&s, "replicaset", WINDOW);
  assert_int_equal(kcm_shadow_judge(&s, "ns/web", "create pods\n", &rs.o, 0, 1000), WINDOW);
  /* Synced again early (a requeue, no change): the rest of the window. */
  assert_int_equal(kcm_shadow_judge(&s, "ns/web", "create pods\n", &rs.o, 0, 4000), WINDOW - 3000);
  assert_int_equal(s.disagreements, 0);
  /* The window over while a watch is down: not judged (the cache may only
   * have missed the change), asked again a moment later... */
  assert_int_equal(kcm_shadow_judge(&s, "ns/web", "create pods\n", &rs.o, KCM_SHADOW_BLIND,
                                    1000 + WINDOW),
                   KCM_SHADOW_RECHECK_MS);
  /* ...and once it is back, the window runs from then. */
  assert_int_equal(kcm_shadow_judge(&s, "ns/web", "create pods\n", &rs.o, 2000,
                                    1000 + WINDOW),
                   1000);
  assert_int_equal(s.disagreements, 0);
  assert_int_equal(kcm_shadow_judge(&s, "ns/web", "create pods\ncreate pods\n", &rs.o,
                                    true, 1000 + WINDOW),
                   0);
  assert_int_equal(s.disagreements, 1);
  assert_int_equal(s.nlatest, 1);
  assert_string_equal(s.latest[0].key, "ns/web");
  assert_string_equal(s.latest[0].reason, "create pods");
  assert_string_equal(s.latest[0].plan, "create pods (x2)");
  assert_string_equal(s.latest[0].observed,
                      "resourceVersion 42, generation 3, replicas 2, status replicas 1 "
                      "fullyLabeledReplicas 0 readyReplicas 0 availableReplicas 0 "
                      "terminatingReplicas 0 observedGeneration 3, status written by "
                      "kube-controller-manager at 1970-01-01T00:00:00Z; unchanged for 10s");
  /* Once: the same state later is not told again... */
  assert_int_equal(kcm_shadow_judge(&s, "ns/web", "create pods\n", &rs.o, 0, 5000 + WINDOW), 0);
  assert_int_equal(s.disagreements, 1);
  /* ...until the key changes and is left undone again. */
  kcm_shadow_changed(&s, "ns/web");
  kcm_shadow_judge(&s, "ns/web", "create pods\n", &rs.o, 0, 6000 + WINDOW);
  kcm_shadow_judge(&s, "ns/web", "create pods\n", NULL, 0, 6000 + 2 * WINDOW);
  assert_int_equal(s.disagreements, 2);
  assert_string_equal(s.latest[1].observed, "not in the cache; unchanged for 10s");
  kcm_shadow_release(&s);
}

/* Disagree on key at once (a window of 0 judges the second sync). */
static void disagree_now(struct kcm_shadow *s, const char *key, const char *plan) {
  kcm_shadow_judge(s, key, plan, NULL, 0, 0);
  kcm_shadow_judge(s, key, plan, NULL, 0, 0);
  kcm_shadow_changed(s, key);
}

static void metrics_and_report(void **state) {
  struct kcm_shadow rs, dp;
  struct kcm_shadow *both[] = {&dp, &rs};
  struct kcm_buf out = KCM_BUF_INIT(1 << 20);
  struct json_object *doc, *controllers, *latest, *v;
  char key[32], plan[64];
  int i;
  kcm_shadow_init(&rs, "replicaset", 0);
  kcm_shadow_init(&dp, "deployment", 0);
  kcm_shadow_judge(&rs, "ns/a", "", NULL, 0, 0);
  disagree_now(&rs, "ns/a", "create pods\n");
  disagree_now(&rs, "ns/b", "patch replicasets/b/status {\"status\":{}}\n");
  disagree_now(&rs, "ns/c", "create pods\n");
  /* More reasons than slots: the last one counts the rest. */
  for (i = 0; i < KCM_SHADOW_REASONS + 3; i++) {
    snprintf(key, sizeof(key), "ns/r%d", i);
    snprintf(plan, sizeof(plan), "delete kind%d/x\n", i);
    disagree_now(&dp, key, plan);
  }
  assert_int_equal(kcm_shadow_metrics(both, 2, &out), 0);
  assert_non_null(out.data);
  assert_non_null(strstr(out.data, "kcm_shadow_syncs_total{controller=\"replicaset\"} 7\n"));
  assert_non_null(strstr(out.data, "kcm_shadow_compared_total{controller=\"replicaset\"} 4\n"));
  assert_non_null(strstr(out.data, "kcm_shadow_agreements_total{controller=\"replicaset\"} 1\n"));
  assert_non_null(strstr(out.data, "kcm_shadow_disagreements_total{controller=\"replicaset\","
                                   "reason=\"create pods\"} 2\n"));
  assert_non_null(strstr(out.data, "kcm_shadow_disagreements_total{controller=\"replicaset\","
                                   "reason=\"patch replicasets/status\"} 1\n"));
  assert_non_null(strstr(out.data, "kcm_shadow_disagreements_total{controller=\"deployment\","
                                   "reason=\"delete kind0\"} 1\n"));
  assert_non_null(strstr(out.data, "kcm_shadow_disagreements_total{controller=\"deployment\","
                                   "reason=\"other\"} 4\n"));
  kcm_buf_reset(&out);
  assert_int_equal(kcm_shadow_report(both, 2, &out), 0);
  doc = json_tokener_parse(out.data);
  assert_non_null(doc);
  assert_true(json_object_object_get_ex(doc, "controllers", &controllers));
  assert_int_equal(json_object_array_length(controllers), 2);
  v = json_object_array_get_idx(controllers, 1);
  assert_string_equal(json_object_get_string(json_object_object_get(v, "controller")),
                      "replicaset");
  assert_int_equal(json_object_get_int(json_object_object_get(v, "disagreements")), 3);
  latest = json_object_object_get(v, "latest");
  assert_int_equal(json_object_array_length(latest), 3);
  v = json_object_array_get_idx(latest, 0); /* newest first */
  assert_string_equal(json_object_get_string(json_object_object_get(v, "object")), "ns/c");
  v = json_object_array_get_idx(latest, 1);
  assert_string_equal(json_object_get_string(json_object_object_get(v, "plan")),
                      "patch replicasets/b/status {\"status\":{}}");
  /* The deployment ring keeps the latest KCM_SHADOW_LATEST... fewer here. */
  v = json_object_array_get_idx(controllers, 0);
  latest = json_object_object_get(v, "latest");
  assert_int_equal(json_object_array_length(latest), KCM_SHADOW_REASONS + 3);
  json_object_put(doc);
  kcm_buf_release(&out);
  kcm_shadow_release(&rs);
  kcm_shadow_release(&dp);
}

static void the_ring_keeps_the_latest(void **state) {
  struct kcm_shadow s;
  char key[32];
  int i;
  kcm_shadow_init(&s, "replicaset", 0);
  for (i = 0; i < KCM_SHADOW_LATEST + 5; i++) {
    snprintf(key, sizeof(key), "ns/k%d", i);
    disagree_now(&s, key, "create pods\n");
  }
  assert_int_equal(s.nlatest, KCM_SHADOW_LATEST);
  assert_string_equal(s.latest[(s.next + KCM_SHADOW_LATEST - 1) % KCM_SHADOW_LATEST].key,
                      "ns/k36");
  assert_string_equal(s.latest[s.next].key, "ns/k5"); /* the oldest kept */
  kcm_shadow_release(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plans_name_each_write),
      cmocka_unit_test(plans_redact_annotation_values),
      cmocka_unit_test(carried_out_plans_agree),
      cmocka_unit_test(syncs_are_judged_by_key_and_inputs),
      cmocka_unit_test(plans_left_undone_disagree_once),
      cmocka_unit_test(metrics_and_report),
      cmocka_unit_test(the_ring_keeps_the_latest),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
