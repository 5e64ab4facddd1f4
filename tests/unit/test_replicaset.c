/*
 * Tests for the ReplicaSet controller's planning: the behaviours upstream's
 * replica_set_test.go and controller_utils_test.go check, as tables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/api/internal.h"
#include "../oracle/tree.h"
#include "kcm/error.h"
#include "kcm/replicaset.h"

#include "../../src/controllers/replicaset/internal.h"

static struct kcm_intern pool;

#define RS_UID "aaaaaaaa-0000-0000-0000-000000000001"
#define OTHER_UID "bbbbbbbb-0000-0000-0000-000000000002"
#define NOW_S 1800000000LL
#define NOW_MS ((uint64_t)NOW_S * 1000)

static int setup(void **state) {
  kcm_intern_init(&pool);
  return 0;
}

static int teardown(void **state) {
  assert_int_equal(kcm_intern_count(&pool), 0);
  kcm_intern_release(&pool);
  return 0;
}

static struct kcm_object *decode(enum kcm_kind kind, const char *json) {
  struct json_object *o = json_tokener_parse(json);
  struct kcm_object *obj = NULL;
  struct kcm_api_error err;
  if (!o)
    fail_msg("bad test JSON: %s", json);
  if (kcm_api_decode(kind, o, &pool, &obj, &err))
    fail_msg("decode: %s %s", err.field, err.problem);
  json_object_put(o);
  return obj;
}

static void iso(int64_t t, char *buf, size_t len) { kcm_api_format_time(t, buf, len); }

/* A ReplicaSet "rs" selecting app=web. extra_meta and extra_spec are
 * spliced in (each begins with a comma when set). */
static struct kcm_replicaset *make_rs(int replicas, const char *extra_meta, int min_ready,
                                      const char *status) {
  char json[4096];
  snprintf(json, sizeof(json),
           "{\"metadata\":{\"name\":\"rs\",\"namespace\":\"ns\",\"uid\":\"" RS_UID "\","
           "\"resourceVersion\":\"10\",\"generation\":3%s},\"spec\":{\"replicas\":%d,"
           "\"minReadySeconds\":%d,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
           "\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\",\"tier\":\"fe\"},"
           "\"annotations\":{\"note\":\"x\"},\"finalizers\":[\"example.com/f\"],\"name\":"
           "\"ignored\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}},"
           "\"status\":%s}",
           extra_meta ? extra_meta : "", replicas, min_ready, status ? status : "{}");
  return (struct kcm_replicaset *)decode(KCM_KIND_REPLICASET, json);
}

struct podspec {
  const char *name;
  const char *labels;   /* JSON object; default {"app":"web","tier":"fe"} */
  const char *owner;    /* controller uid; NULL: orphan */
  const char *node;
  const char *phase;    /* default Running */
  bool ready;
  int64_t ready_since;  /* seconds before NOW */
  int restarts;
  int sidecar_restarts; /* of a restartable init container, when not 0 */
  int cost;
  int64_t age;          /* seconds before NOW */
  bool deleting;
  const char *ns;
  const char *uid;
};

static struct kcm_pod *make_pod(const struct podspec *s) {
  char json[4096], owner[512] = "", del[128] = "", created[32], readyt[32], cost[128] = "";
  char uid[40], side[128] = "", side_status[128] = "";
  if (s->owner)
    snprintf(owner, sizeof(owner),
             ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
             "\"name\":\"rs\",\"uid\":\"%s\",\"controller\":true}]",
             s->owner);
  if (s->deleting)
    snprintf(del, sizeof(del), ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"");
  if (s->cost)
    snprintf(cost, sizeof(cost),
             ",\"annotations\":{\"controller.kubernetes.io/pod-deletion-cost\":\"%d\"}",
             s->cost);
  iso(NOW_S - (s->age ? s->age : 1000), created, sizeof(created));
  iso(NOW_S - s->ready_since, readyt, sizeof(readyt));
  if (s->sidecar_restarts) {
    snprintf(side, sizeof(side),
             ",\"initContainers\":[{\"name\":\"side\",\"restartPolicy\":\"Always\"}]");
    snprintf(side_status, sizeof(side_status),
             ",\"initContainerStatuses\":[{\"name\":\"side\",\"restartCount\":%d}]",
             s->sidecar_restarts);
  }
  if (s->uid)
    snprintf(uid, sizeof(uid), "%s", s->uid);
  else
    snprintf(uid, sizeof(uid), "cccccccc-0000-0000-0000-%012x",
             (unsigned)(strlen(s->name) * 131 + (unsigned char)s->name[0]));
  snprintf(json, sizeof(json),
           "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"%s\","
           "\"resourceVersion\":\"5\",\"creationTimestamp\":\"%s\",\"labels\":%s%s%s%s},"
           "\"spec\":{\"nodeName\":%s%s%s%s},\"status\":{\"phase\":\"%s\",\"conditions\":"
           "[{\"type\":\"Ready\",\"status\":\"%s\",\"lastTransitionTime\":\"%s\"}],"
           "\"containerStatuses\":[{\"name\":\"c\",\"restartCount\":%d}]%s}}",
           s->name, s->ns ? s->ns : "ns", uid, created,
           s->labels ? s->labels : "{\"app\":\"web\",\"tier\":\"fe\"}", owner, del, cost,
           s->node ? "\"" : "", s->node ? s->node : "null", s->node ? "\"" : "", side,
           s->phase ? s->phase : "Running", s->ready ? "True" : "False", readyt, s->restarts,
           side_status);
  return (struct kcm_pod *)decode(KCM_KIND_POD, json);
}

static void free_pods(struct kcm_pod **pods, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    kcm_api_unref(&pods[i]->o, &pool);
}

/* --- how many to create or delete ------------------------------------------------- */

static void diff_and_burst(void **state) {
  struct kcm_replicaset *rs = make_rs(2, NULL, 0, NULL);
  assert_int_equal(kcm_replicaset_diff(rs, 2, KCM_REPLICASET_BURST), 0); /* does nothing */
  assert_int_equal(kcm_replicaset_diff(rs, 0, KCM_REPLICASET_BURST), 2);
  assert_int_equal(kcm_replicaset_diff(rs, 5, KCM_REPLICASET_BURST), -3);
  kcm_api_unref(&rs->o, &pool);
  rs = make_rs(1200, NULL, 0, NULL);
  assert_int_equal(kcm_replicaset_diff(rs, 0, KCM_REPLICASET_BURST), 500); /* burst */
  assert_int_equal(kcm_replicaset_diff(rs, 1199, KCM_REPLICASET_BURST), 1);
  kcm_api_unref(&rs->o, &pool);
  rs = make_rs(0, NULL, 0, NULL);
  assert_int_equal(kcm_replicaset_diff(rs, 800, KCM_REPLICASET_BURST), -500);
  kcm_api_unref(&rs->o, &pool);
}

static void slow_start_batches(void **state) {
  int32_t batch = 1, remaining = 20, sent = 0, sizes[8], n = 0;
  while (remaining > 0) {
    int32_t b = batch < remaining ? batch : remaining;
    sizes[n++] = b;
    sent += b;
    remaining -= b;
    batch = kcm_replicaset_next_batch(batch, remaining);
  }
  assert_int_equal(sent, 20);
  assert_int_equal(n, 5);
  assert_int_equal(sizes[0], 1);
  assert_int_equal(sizes[1], 2);
  assert_int_equal(sizes[2], 4);
  assert_int_equal(sizes[3], 8);
  assert_int_equal(sizes[4], 5); /* never more than what is left */
}

/* The plan as text: each step "op:wave:group", space-separated. */
static void plan_text(const struct kcm_replicaset_plan *p, char *out, size_t len) {
  static const char *const ops[] = {"recheck", "adopt", "release", "expect",
                                    "create", "delete", "status"};
  size_t i, o = 0;
  out[0] = '\0';
  for (i = 0; i < p->nsteps && o < len; i++)
    o += (size_t)snprintf(out + o, len - o, "%s%s:%u:%u", i ? " " : "", ops[p->steps[i].op],
                          p->steps[i].at.wave, p->steps[i].at.group);
}

static void plan_of(struct kcm_replicaset *rs, struct kcm_pod **pods, size_t n, bool satisfied,
                    uint64_t wait, struct kcm_replicaset_plan *p, char *text, size_t len) {
  struct kcm_replicaset_input in = {.rs = rs, .candidates = pods, .ncandidates = n,
                                    .satisfied = satisfied, .create_wait_ms = wait,
                                    .now_ms = NOW_MS};
  assert_int_equal(kcm_replicaset_plan(&in, p), 0);
  plan_text(p, text, len);
}

static void plans_in_waves(void **state) {
  struct kcm_replicaset *rs = make_rs(5, NULL, 0, NULL);
  struct kcm_pod *pods[4];
  struct kcm_replicaset_plan p;
  char text[512];
  size_t i;

  /* slow start: a wave per batch (1, 2, 2), the creates one group; then status */
  plan_of(rs, NULL, 0, true, 0, &p, text, sizeof(text));
  assert_string_equal(text, "expect:1:2 create:1:2 create:2:2 create:2:2 create:3:2 "
                            "create:3:2 status:4:3");
  assert_int_equal(p.change, 5);
  kcm_replicaset_plan_release(&p);
  /* pods failing: no create, a sync after the wait */
  plan_of(rs, NULL, 0, true, 1500, &p, text, sizeof(text));
  assert_string_equal(text, "status:2:3");
  assert_int_equal(p.wait_ms, 1500);
  assert_int_equal(p.change, 0);
  kcm_replicaset_plan_release(&p);
  /* expectations not met: the status alone */
  plan_of(rs, NULL, 0, false, 0, &p, text, sizeof(text));
  assert_string_equal(text, "status:1:3");
  kcm_replicaset_plan_release(&p);
  kcm_api_unref(&rs->o, &pool);

  /* an orphan to adopt (checked first), an owned pod to release, and one
   * too many: the claims at once, then the deletes at once */
  rs = make_rs(1, NULL, 0, NULL);
  pods[0] = make_pod(&(struct podspec){.name = "orphan", .ready = true});
  pods[1] = make_pod(&(struct podspec){.name = "gone", .owner = RS_UID,
                                        .labels = "{\"app\":\"db\"}"});
  pods[2] = make_pod(&(struct podspec){.name = "ready", .owner = RS_UID, .ready = true});
  pods[3] = make_pod(&(struct podspec){.name = "ready2", .owner = RS_UID, .ready = true,
                                        .node = "n1"});
  plan_of(rs, pods, 4, true, 0, &p, text, sizeof(text));
  assert_string_equal(text, "recheck:0:0 adopt:1:1 release:1:1 expect:2:2 delete:2:2 "
                            "delete:2:2 status:3:3");
  assert_int_equal(p.change, -2);
  assert_ptr_equal(p.claim.adopt[p.steps[1].index], pods[0]);
  assert_ptr_equal(p.claim.release[p.steps[2].index], pods[1]);
  /* the ranking puts the unscheduled pods first */
  for (i = 0; i < 2; i++)
    assert_null(p.order[p.steps[4 + i].index]->node);
  kcm_replicaset_plan_release(&p);
  free_pods(pods, 4);
  kcm_api_unref(&rs->o, &pool);
}

static void expectations_hold_managing(void **state) {
  struct kcm_replicaset *rs = make_rs(3, NULL, 0, NULL);
  struct kcm_replicaset *gone =
      make_rs(3, ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"", 0, NULL);
  struct kcm_expectations e;
  kcm_expectations_init(&e, 300000);
  assert_true(kcm_replicaset_should_manage(rs, kcm_expectations_satisfied(&e, "ns/rs", 0)));
  kcm_expectations_expect_creations(&e, "ns/rs", 3, 0);
  /* Dormant until the cache has seen the three pods. */
  assert_false(kcm_replicaset_should_manage(rs, kcm_expectations_satisfied(&e, "ns/rs", 1)));
  kcm_expectations_creation_observed(&e, "ns/rs");
  kcm_expectations_creation_observed(&e, "ns/rs");
  assert_false(kcm_replicaset_should_manage(rs, kcm_expectations_satisfied(&e, "ns/rs", 2)));
  kcm_expectations_creation_observed(&e, "ns/rs");
  assert_true(kcm_replicaset_should_manage(rs, kcm_expectations_satisfied(&e, "ns/rs", 3)));
  /* Nothing is created or deleted while the ReplicaSet is being deleted. */
  assert_false(kcm_replicaset_should_manage(gone, true));
  kcm_expectations_release(&e);
  kcm_api_unref(&rs->o, &pool);
  kcm_api_unref(&gone->o, &pool);
}

/* --- claiming ---------------------------------------------------------------------------- */

struct claim_case {
  const char *what;
  struct podspec pod;
  bool rs_deleting;
  int claimed, adopted, released;
};

static void claiming(void **state) {
  static const struct claim_case cases[] = {
      {"owned and matching", {.name = "a", .owner = RS_UID}, false, 1, 0, 0},
      {"orphan matching: adopted", {.name = "a"}, false, 1, 1, 0},
      {"orphan not matching: ignored", {.name = "a", .labels = "{\"app\":\"db\"}"}, false, 0, 0,
       0},
      {"owned by another controller: never touched", {.name = "a", .owner = OTHER_UID}, false,
       0, 0, 0},
      {"another controller's, not matching", {.name = "a", .owner = OTHER_UID,
       .labels = "{\"x\":\"y\"}"}, false, 0, 0, 0},
      {"owned, stopped matching: released", {.name = "a", .owner = RS_UID,
       .labels = "{\"app\":\"db\"}"}, false, 0, 0, 1},
      {"orphan being deleted: inactive", {.name = "a", .deleting = true}, false, 0, 0, 0},
      {"owned, being deleted: not counted", {.name = "a", .owner = RS_UID, .deleting = true},
       false, 0, 0, 0},
      {"owned, Succeeded: not counted", {.name = "a", .owner = RS_UID, .phase = "Succeeded"},
       false, 0, 0, 0},
      {"owned, Failed: not counted", {.name = "a", .owner = RS_UID, .phase = "Failed"}, false, 0,
       0, 0},
      {"orphan in another namespace", {.name = "a", .ns = "other"}, false, 0, 0, 0},
      {"ReplicaSet being deleted: no adoption", {.name = "a"}, true, 0, 0, 0},
      {"ReplicaSet being deleted: no release", {.name = "a", .owner = RS_UID,
       .labels = "{\"app\":\"db\"}"}, true, 0, 0, 0},
      {"ReplicaSet being deleted: still counts its pods", {.name = "a", .owner = RS_UID}, true,
       1, 0, 0},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct claim_case *c = &cases[i];
    struct kcm_replicaset *rs =
        make_rs(1, c->rs_deleting ? ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"" : NULL, 0,
                NULL);
    struct kcm_pod *p = make_pod(&c->pod);
    struct kcm_replicaset_claim claim;
    assert_int_equal(kcm_replicaset_claim(rs, &p, 1, &claim), 0);
    if ((int)claim.nclaimed != c->claimed || (int)claim.nadopt != c->adopted ||
        (int)claim.nrelease != c->released)
      fail_msg("%s: claimed %zu adopted %zu released %zu", c->what, claim.nclaimed, claim.nadopt,
               claim.nrelease);
    kcm_replicaset_claim_release(&claim);
    kcm_api_unref(&p->o, &pool);
    kcm_api_unref(&rs->o, &pool);
  }
}

/* --- which pods go first --------------------------------------------------------------- */

struct rank_case {
  const char *what;
  struct podspec first; /* should be deleted first */
  struct podspec second;
};

static void ranking_rules(void **state) {
  static const struct rank_case cases[] = {
      {"unscheduled before scheduled", {.name = "a", .node = NULL, .ready = true},
       {.name = "b", .node = "n1", .ready = true}},
      {"Pending before Running", {.name = "a", .node = "n1", .phase = "Pending"},
       {.name = "b", .node = "n1", .phase = "Running"}},
      {"Pending before Unknown", {.name = "a", .node = "n1", .phase = "Pending"},
       {.name = "b", .node = "n1", .phase = "Unknown"}},
      {"Unknown before Running", {.name = "a", .node = "n1", .phase = "Unknown"},
       {.name = "b", .node = "n1", .phase = "Running"}},
      {"not ready before ready", {.name = "a", .node = "n1", .ready = false},
       {.name = "b", .node = "n1", .ready = true}},
      {"lower deletion cost first", {.name = "a", .node = "n1", .ready = true, .cost = -10},
       {.name = "b", .node = "n1", .ready = true, .cost = 5}},
      {"deletion cost outweighs readiness time",
       {.name = "a", .node = "n1", .ready = true, .ready_since = 100000, .cost = 1},
       {.name = "b", .node = "n1", .ready = true, .ready_since = 10, .cost = 2}},
      {"ready for less time first (other log2 bucket)",
       {.name = "a", .node = "n1", .ready = true, .ready_since = 10},
       {.name = "b", .node = "n1", .ready = true, .ready_since = 100000}},
      {"more restarts first", {.name = "a", .node = "n1", .ready = true, .ready_since = 50,
                               .restarts = 7},
       {.name = "b", .node = "n1", .ready = true, .ready_since = 50, .restarts = 1}},
      {"the same restarts: more sidecar restarts first",
       {.name = "a", .node = "n1", .ready = true, .restarts = 2, .sidecar_restarts = 5},
       {.name = "b", .node = "n1", .ready = true, .restarts = 2, .sidecar_restarts = 1}},
      {"regular restarts outweigh sidecar restarts",
       {.name = "a", .node = "n1", .ready = true, .restarts = 3, .sidecar_restarts = 1},
       {.name = "b", .node = "n1", .ready = true, .restarts = 1, .sidecar_restarts = 9}},
      {"newer first", {.name = "a", .node = "n1", .age = 10},
       {.name = "b", .node = "n1", .age = 100000}},
      {"same log2 bucket of age: uid decides",
       {.name = "a", .node = "n1", .age = 1000, .uid = "00000000-0000-0000-0000-000000000001"},
       {.name = "b", .node = "n1", .age = 1010, .uid = "ffffffff-0000-0000-0000-000000000001"}},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct kcm_pod *pods[2], *expect_first;
    int order;
    for (order = 0; order < 2; order++) {
      pods[order] = make_pod(order ? &cases[i].second : &cases[i].first);
    }
    expect_first = pods[0];
    /* Whatever the input order, the first case's pod comes first. */
    for (order = 0; order < 2; order++) {
      struct kcm_pod *in[2];
      in[0] = pods[order];
      in[1] = pods[1 - order];
      kcm_replicaset_rank(in, 2, NULL, 0, NOW_MS);
      if (in[0] != expect_first)
        fail_msg("%s: %s came first", cases[i].what, in[0]->o.name);
    }
    free_pods(pods, 2);
  }
}

static void ranking_prefers_crowded_nodes(void **state) {
  struct podspec specs[] = {
      {.name = "alone", .node = "n1", .ready = true, .ready_since = 60},
      {.name = "crowded", .node = "n2", .ready = true, .ready_since = 60},
      {.name = "sibling1", .node = "n2", .ready = true},
      {.name = "sibling2", .node = "n2", .ready = true},
  };
  struct kcm_pod *pods[4], *rank[2];
  int i;
  for (i = 0; i < 4; i++)
    pods[i] = make_pod(&specs[i]);
  rank[0] = pods[0];
  rank[1] = pods[1];
  /* Related pods include siblings from other ReplicaSets of the same owner. */
  kcm_replicaset_rank(rank, 2, pods, 4, NOW_MS);
  assert_string_equal(rank[0]->o.name, "crowded");
  free_pods(pods, 4);
}

/* Every check of whether a pod is active, counted while a limit is set. */
bool __real_kcm_replicaset_pod_active(const struct kcm_pod *p);
bool __wrap_kcm_replicaset_pod_active(const struct kcm_pod *p);
static uint64_t active_checks, active_limit = UINT64_MAX;

bool __wrap_kcm_replicaset_pod_active(const struct kcm_pod *p) {
  if (++active_checks > active_limit) {
    active_limit = UINT64_MAX;
    fail_msg("more than %llu checks of pods being active", (unsigned long long)active_checks - 1);
  }
  return __real_kcm_replicaset_pod_active(p);
}

#define MANY_PODS 50000
#define CROWD 10000 /* extra pods on node-0, on top of its share */

/* 50,000 pods on 100 nodes, node-0 crowded, each pod related to all: each
 * related pod is looked at once, not once per pod on its node, and the
 * crowded node's pods come first. */
static void ranking_many_pods_counts_each_node_once(void **state) {
  struct kcm_pod **pods = calloc(MANY_PODS, sizeof(*pods)), **related;
  size_t i, crowded = 0;
  assert_non_null(pods);
  for (i = 0; i < MANY_PODS; i++) {
    char node[16];
    snprintf(node, sizeof(node), "node-%zu", i < MANY_PODS - CROWD ? i % 100 : 0);
    assert_non_null(pods[i] = calloc(1, sizeof(*pods[i])));
    pods[i]->node = kcm_intern_str(&pool, node);
    pods[i]->phase = KCM_POD_RUNNING;
  }
  related = malloc(MANY_PODS * sizeof(*related));
  assert_non_null(related);
  memcpy(related, pods, MANY_PODS * sizeof(*related));
  active_checks = 0;
  active_limit = 2 * MANY_PODS;
  kcm_replicaset_rank(pods, MANY_PODS, related, MANY_PODS, NOW_MS);
  active_limit = UINT64_MAX;
  print_message("%d pods ranked with %llu checks of pods being active\n", MANY_PODS,
                (unsigned long long)active_checks);
  while (crowded < MANY_PODS && strcmp(pods[crowded]->node, "node-0") == 0)
    crowded++;
  assert_int_equal(crowded, (MANY_PODS - CROWD) / 100 + CROWD);
  for (i = 0; i < MANY_PODS; i++) {
    kcm_intern_put(&pool, pods[i]->node);
    free(pods[i]);
  }
  free(related);
  free(pods);
}

/* --- status -------------------------------------------------------------------------------- */

static void status_counts(void **state) {
  struct kcm_replicaset *rs = make_rs(4, NULL, 30, "{\"replicas\":0}");
  struct podspec specs[] = {
      {.name = "ready-long", .owner = RS_UID, .node = "n", .ready = true, .ready_since = 100},
      {.name = "ready-new", .owner = RS_UID, .node = "n", .ready = true, .ready_since = 10},
      {.name = "not-ready", .owner = RS_UID, .node = "n"},
      {.name = "extra-labels", .owner = RS_UID, .node = "n", .ready = true, .ready_since = 31,
       .labels = "{\"app\":\"web\"}"},
  };
  struct kcm_pod *pods[4];
  struct kcm_replicaset_status st;
  int i;
  for (i = 0; i < 4; i++)
    pods[i] = make_pod(&specs[i]);
  assert_int_equal(kcm_replicaset_status(rs, pods, 4, 0, 0, false, NULL, NOW_MS, &st), 0);
  assert_int_equal(st.replicas, 4);
  assert_int_equal(st.fully_labeled, 3); /* the pod lacking tier=fe is not fully labeled */
  assert_int_equal(st.ready, 3);
  assert_int_equal(st.available, 2);     /* ready for more than minReadySeconds (30) */
  assert_int_equal(st.observed_generation, 3);
  assert_int_equal(st.conditions.n, 0);
  assert_true(kcm_replicaset_status_changed(rs, &st));
  kcm_replicaset_status_release(&st);
  /* two more made by the sync, not in the cache yet: replicas, fully labeled */
  assert_int_equal(kcm_replicaset_status(rs, pods, 4, 2, 2, false, NULL, NOW_MS, &st), 0);
  assert_int_equal(st.replicas, 6);
  assert_int_equal(st.fully_labeled, 5);
  assert_int_equal(st.ready, 3);
  assert_int_equal(st.available, 2);
  kcm_replicaset_status_release(&st);
  free_pods(pods, 4);
  kcm_api_unref(&rs->o, &pool);
}

/* status.terminatingReplicas (KEP-3973): the pods it controls that match
 * its selector and are being deleted, not yet Succeeded or Failed. They
 * are never among the claimed, and the other counts stay active pods. */
static void terminating_replicas(void **state) {
  struct kcm_replicaset *rs = make_rs(2, NULL, 0,
                                      "{\"replicas\":1,\"fullyLabeledReplicas\":1,"
                                      "\"observedGeneration\":3,\"terminatingReplicas\":1}");
  struct podspec specs[] = {
      {.name = "live", .owner = RS_UID, .node = "n"},
      {.name = "going", .owner = RS_UID, .node = "n", .deleting = true},
      {.name = "going-pending", .owner = RS_UID, .phase = "Pending", .deleting = true},
      {.name = "done", .owner = RS_UID, .node = "n", .phase = "Succeeded", .deleting = true},
      {.name = "failed", .owner = RS_UID, .node = "n", .phase = "Failed", .deleting = true},
      {.name = "other-owner", .owner = OTHER_UID, .node = "n", .deleting = true},
      {.name = "orphan", .node = "n", .deleting = true},
      {.name = "unmatched", .owner = RS_UID, .node = "n", .deleting = true,
       .labels = "{\"app\":\"db\"}"},
      {.name = "elsewhere", .owner = RS_UID, .node = "n", .deleting = true, .ns = "other"},
  };
  struct kcm_pod *pods[9];
  struct kcm_replicaset_claim claim;
  struct kcm_replicaset_status st;
  struct kcm_buf body = KCM_BUF_INIT(1u << 16);
  int i;

  for (i = 0; i < 9; i++)
    pods[i] = make_pod(&specs[i]);
  assert_int_equal(kcm_replicaset_claim(rs, pods, 9, &claim), 0);
  assert_int_equal(claim.nclaimed, 1);
  assert_int_equal(claim.terminating, 2); /* going, going-pending */
  assert_int_equal(kcm_replicaset_status(rs, claim.claimed, claim.nclaimed, 0, 0, false, NULL,
                                         NOW_MS, &st), 0);
  assert_int_equal(st.replicas, 1);
  assert_int_equal(st.terminating, -1); /* not written unless the caller sets it */
  assert_false(kcm_replicaset_status_changed(rs, &st));
  assert_int_equal(kcm_replicaset_status_patch(rs, &st, true, &body), 0);
  assert_null(strstr(body.data, "terminatingReplicas"));
  /* The field alone changed: a status change, one that may wait. */
  st.terminating = claim.terminating;
  assert_true(kcm_replicaset_status_changed(rs, &st));
  assert_true(kcm_replicaset_status_only_gains(rs, &st));
  kcm_buf_reset(&body);
  assert_int_equal(kcm_replicaset_status_patch(rs, &st, true, &body), 0);
  assert_non_null(strstr(body.data, "\"terminatingReplicas\":2"));
  st.terminating = 1;
  assert_false(kcm_replicaset_status_changed(rs, &st));
  kcm_buf_release(&body);
  kcm_replicaset_status_release(&st);
  kcm_replicaset_claim_release(&claim);
  free_pods(pods, 9);
  kcm_api_unref(&rs->o, &pool);
}

/* As upstream since #132121: a pod is available from the very moment its
 * Ready condition is minReadySeconds old (not a second later), and a sync
 * whose ReplicaSet has ready pods not yet available is due again at the
 * moment the first of them becomes available. */
static void availability_is_due_at_its_moment(void **state) {
  struct podspec specs[] = {
      {.name = "a", .owner = RS_UID, .node = "n", .ready = true, .ready_since = 30},
      {.name = "b", .owner = RS_UID, .node = "n", .ready = true, .ready_since = 12},
      {.name = "c", .owner = RS_UID, .node = "n", .ready = true, .ready_since = 25},
      {.name = "d", .owner = RS_UID, .node = "n"},
  };
  struct kcm_pod *pods[4];
  int i;
  for (i = 0; i < 4; i++)
    pods[i] = make_pod(&specs[i]);
  assert_true(kcm_replicaset_pod_available(pods[0], 30, NOW_MS));      /* exactly 30 s */
  assert_false(kcm_replicaset_pod_available(pods[0], 30, NOW_MS - 1));
  assert_false(kcm_replicaset_pod_available(pods[3], 0, NOW_MS));      /* not ready */
  /* b is due in 18 s, c in 5 s; a is available already, d is not ready */
  assert_int_equal(kcm_replicaset_next_available_ms(pods, 4, 30, NOW_MS), 5000);
  assert_int_equal(kcm_replicaset_next_available_ms(pods, 4, 30, NOW_MS + 4999), 1);
  assert_int_equal(kcm_replicaset_next_available_ms(pods, 4, 30, NOW_MS + 5000), 18000 - 5000);
  assert_int_equal(kcm_replicaset_next_available_ms(pods, 4, 10, NOW_MS), -1); /* all due */
  assert_int_equal(kcm_replicaset_next_available_ms(pods, 4, 0, NOW_MS), -1);
  assert_int_equal(kcm_replicaset_next_available_ms(pods, 0, 30, NOW_MS), -1);
  free_pods(pods, 4);
}

static void status_replica_failure(void **state) {
  struct kcm_replicaset *rs = make_rs(
      3, NULL, 0,
      "{\"replicas\":1,\"observedGeneration\":3,\"conditions\":[{\"type\":\"Custom\","
      "\"status\":\"True\",\"reason\":\"Mine\",\"message\":\"kept\"}]}");
  struct kcm_replicaset *failing;
  struct kcm_pod *p = make_pod(&(struct podspec){.name = "a", .owner = RS_UID, .node = "n"});
  struct kcm_replicaset_status st;
  struct kcm_buf b = KCM_BUF_INIT(1 << 16);

  /* A failed create adds ReplicaFailure and keeps the foreign condition. */
  assert_int_equal(kcm_replicaset_status(rs, &p, 1, 0, 2, true, "exceeded quota", NOW_MS, &st), 0);
  assert_int_equal(st.conditions.n, 2);
  assert_string_equal(st.conditions.items[0].type, "Custom");
  assert_string_equal(st.conditions.items[1].type, "ReplicaFailure");
  assert_string_equal(st.conditions.items[1].reason, "FailedCreate");
  assert_string_equal(st.conditions.items[1].message, "exceeded quota");
  assert_int_equal(st.conditions.items[1].last_transition, NOW_S);
  assert_int_equal(kcm_replicaset_status_patch(rs, &st, true, &b), 0);
  assert_non_null(strstr(b.data, "\"resourceVersion\":\"10\""));
  assert_non_null(strstr(b.data, "\"reason\":\"FailedCreate\""));
  kcm_replicaset_status_release(&st);
  kcm_buf_release(&b);
  kcm_api_unref(&rs->o, &pool);

  failing = make_rs(1, NULL, 0,
                    "{\"replicas\":3,\"observedGeneration\":3,\"conditions\":[{\"type\":"
                    "\"ReplicaFailure\",\"status\":\"True\",\"reason\":\"FailedDelete\","
                    "\"message\":\"old\",\"lastTransitionTime\":\"2026-01-01T00:00:00Z\"}]}");
  /* Still failing: the existing condition is left as it is. */
  assert_int_equal(kcm_replicaset_status(failing, &p, 1, 0, -2, true, "new", NOW_MS, &st), 0);
  assert_int_equal(st.conditions.n, 1);
  assert_string_equal(st.conditions.items[0].message, "old");
  kcm_replicaset_status_release(&st);
  /* Recovered: the condition goes. */
  assert_int_equal(kcm_replicaset_status(failing, &p, 1, 0, -2, false, NULL, NOW_MS, &st), 0);
  assert_int_equal(st.conditions.n, 0);
  assert_int_equal(kcm_replicaset_status_patch(failing, &st, true, &b), 0);
  assert_non_null(strstr(b.data, "\"conditions\":null"));
  kcm_replicaset_status_release(&st);
  kcm_buf_release(&b);
  kcm_api_unref(&failing->o, &pool);
  kcm_api_unref(&p->o, &pool);
}

static void status_unchanged_is_not_written(void **state) {
  struct kcm_replicaset *rs = make_rs(
      1, NULL, 0,
      "{\"replicas\":1,\"fullyLabeledReplicas\":1,\"readyReplicas\":1,\"availableReplicas\":1,"
      "\"observedGeneration\":3}");
  struct kcm_pod *p = make_pod(&(struct podspec){.name = "a", .owner = RS_UID, .node = "n",
                                                  .ready = true, .ready_since = 100});
  struct kcm_replicaset_status st;
  assert_int_equal(kcm_replicaset_status(rs, &p, 1, 0, 0, false, NULL, NOW_MS, &st), 0);
  assert_false(kcm_replicaset_status_changed(rs, &st));
  kcm_replicaset_status_release(&st);
  kcm_api_unref(&p->o, &pool);
  kcm_api_unref(&rs->o, &pool);
}

/* Only a status reporting more ready or available pods, and nothing else
 * changed, may wait for the pacer; every other change is written at once. */
static void status_only_gains_may_wait(void **state) {
  const char *written = "{\"replicas\":2,\"fullyLabeledReplicas\":2,\"readyReplicas\":1,"
                        "\"availableReplicas\":1,\"observedGeneration\":3}";
  struct kcm_replicaset *rs = make_rs(2, NULL, 0, written);
  struct kcm_replicaset *old_gen = make_rs(
      2, NULL, 0,
      "{\"replicas\":2,\"fullyLabeledReplicas\":2,\"readyReplicas\":1,"
      "\"availableReplicas\":1,\"observedGeneration\":2}");
  struct podspec ready = {.name = "a", .owner = RS_UID, .node = "n", .ready = true,
                          .ready_since = 100};
  struct podspec ready2 = {.name = "b", .owner = RS_UID, .node = "n", .ready = true,
                           .ready_since = 100};
  struct podspec waiting = {.name = "c", .owner = RS_UID, .node = "n"};
  struct podspec waiting2 = {.name = "d", .owner = RS_UID, .node = "n"};
  struct kcm_pod *both[2] = {make_pod(&ready), make_pod(&ready2)};
  struct kcm_pod *none[2] = {make_pod(&waiting), make_pod(&waiting2)};
  struct kcm_replicaset_status st;

  /* 1 -> 2 ready and available, the rest unchanged: may wait. */
  assert_int_equal(kcm_replicaset_status(rs, both, 2, 0, 0, false, NULL, NOW_MS, &st), 0);
  assert_int_equal(st.ready, 2);
  assert_true(kcm_replicaset_status_changed(rs, &st));
  assert_true(kcm_replicaset_status_only_gains(rs, &st));
  assert_true(kcm_replicaset_status_meets_spec(rs, &st)); /* but ends a step: at once */
  kcm_replicaset_status_release(&st);
  /* The spec met with pods still terminating: each one gone may wait,
   * the last one is written at once. */
  {
    struct kcm_replicaset *draining = make_rs(
        2, NULL, 0,
        "{\"replicas\":2,\"fullyLabeledReplicas\":2,\"readyReplicas\":2,"
        "\"availableReplicas\":2,\"observedGeneration\":3,\"terminatingReplicas\":5}");
    assert_int_equal(kcm_replicaset_status(draining, both, 2, 0, 0, false, NULL, NOW_MS, &st), 0);
    st.terminating = 3;
    assert_true(kcm_replicaset_status_changed(draining, &st));
    assert_true(kcm_replicaset_status_only_gains(draining, &st));
    assert_false(kcm_replicaset_status_meets_spec(draining, &st));
    st.terminating = 0;
    assert_true(kcm_replicaset_status_meets_spec(draining, &st));
    kcm_replicaset_status_release(&st);
    kcm_api_unref(&draining->o, &pool);
  }
  /* The spec reached (one more available) while a pod is terminating: a
   * step's end, written at once. */
  {
    struct kcm_replicaset *replacing = make_rs(
        2, NULL, 0,
        "{\"replicas\":2,\"fullyLabeledReplicas\":2,\"readyReplicas\":1,"
        "\"availableReplicas\":1,\"observedGeneration\":3,\"terminatingReplicas\":1}");
    assert_int_equal(kcm_replicaset_status(replacing, both, 2, 0, 0, false, NULL, NOW_MS, &st),
                     0);
    st.terminating = 1;
    assert_true(kcm_replicaset_status_only_gains(replacing, &st));
    assert_true(kcm_replicaset_status_meets_spec(replacing, &st));
    kcm_replicaset_status_release(&st);
    kcm_api_unref(&replacing->o, &pool);
  }
  /* Fewer pods: written at once. */
  assert_int_equal(kcm_replicaset_status(rs, both, 1, 0, 0, false, NULL, NOW_MS, &st), 0);
  assert_false(kcm_replicaset_status_only_gains(rs, &st));
  kcm_replicaset_status_release(&st);
  /* More pods, the new one not ready yet: may wait. */
  {
    struct kcm_pod *three[3] = {both[0], both[1], none[0]};
    assert_int_equal(kcm_replicaset_status(rs, three, 3, 0, 0, false, NULL, NOW_MS, &st), 0);
    assert_int_equal(st.replicas, 3);
    assert_true(kcm_replicaset_status_only_gains(rs, &st));
    assert_false(kcm_replicaset_status_meets_spec(rs, &st));
    kcm_replicaset_status_release(&st);
  }
  /* More pods but fewer ready: written at once. */
  {
    struct podspec waiting3 = {.name = "e", .owner = RS_UID, .node = "n"};
    struct kcm_pod *three[3] = {none[0], none[1], make_pod(&waiting3)};
    assert_int_equal(kcm_replicaset_status(rs, three, 3, 0, 0, false, NULL, NOW_MS, &st), 0);
    assert_int_equal(st.replicas, 3);
    assert_int_equal(st.ready, 0);
    assert_false(kcm_replicaset_status_only_gains(rs, &st));
    kcm_replicaset_status_release(&st);
    free_pods(three + 2, 1);
  }
  /* Fewer ready: written at once. */
  assert_int_equal(kcm_replicaset_status(rs, none, 2, 0, 0, false, NULL, NOW_MS, &st), 0);
  assert_int_equal(st.ready, 0);
  assert_false(kcm_replicaset_status_meets_spec(rs, &st));
  assert_false(kcm_replicaset_status_only_gains(rs, &st));
  kcm_replicaset_status_release(&st);
  /* A new condition: written at once. */
  assert_int_equal(kcm_replicaset_status(rs, both, 2, 0, 1, true, "quota", NOW_MS, &st), 0);
  assert_false(kcm_replicaset_status_only_gains(rs, &st));
  kcm_replicaset_status_release(&st);
  /* A new observed generation is no mere gain; with every count at least
   * the written one, it may be held (here the spec met: at once). */
  assert_int_equal(kcm_replicaset_status(old_gen, both, 2, 0, 0, false, NULL, NOW_MS, &st), 0);
  assert_false(kcm_replicaset_status_only_gains(old_gen, &st));
  assert_true(kcm_replicaset_status_observes_gains(old_gen, &st));
  assert_true(kcm_replicaset_status_meets_spec(old_gen, &st));
  kcm_replicaset_status_release(&st);
  assert_int_equal(kcm_replicaset_status(rs, both, 2, 0, 0, false, NULL, NOW_MS, &st), 0);
  assert_false(kcm_replicaset_status_observes_gains(rs, &st)); /* the same generation */
  kcm_replicaset_status_release(&st);
  /* With fewer pods, fewer ready, or a new condition: at once. */
  assert_int_equal(kcm_replicaset_status(old_gen, both, 1, 0, 0, false, NULL, NOW_MS, &st), 0);
  assert_false(kcm_replicaset_status_observes_gains(old_gen, &st));
  kcm_replicaset_status_release(&st);
  assert_int_equal(kcm_replicaset_status(old_gen, none, 2, 0, 0, false, NULL, NOW_MS, &st), 0);
  assert_false(kcm_replicaset_status_observes_gains(old_gen, &st));
  kcm_replicaset_status_release(&st);
  assert_int_equal(kcm_replicaset_status(old_gen, both, 2, 0, 1, true, "quota", NOW_MS, &st), 0);
  assert_false(kcm_replicaset_status_observes_gains(old_gen, &st));
  kcm_replicaset_status_release(&st);

  free_pods(both, 2);
  free_pods(none, 2);
  kcm_api_unref(&rs->o, &pool);
  kcm_api_unref(&old_gen->o, &pool);
}

static uint32_t first(uint32_t n) { return 0; }
static uint32_t last(uint32_t n) { return n - 1; }

/* The name of the pod made from a ReplicaSet called rsname. */
static void pod_name_of(const char *rsname, char *name, size_t size, char *prefix, size_t psize) {
  char json[1024];
  struct kcm_replicaset *rs;
  struct kcm_buf b = KCM_BUF_INIT(1 << 16);
  struct json_object *pod, *meta, *v;
  size_t at, len;
  snprintf(json, sizeof(json),
           "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"" RS_UID "\","
           "\"resourceVersion\":\"1\"},\"spec\":{\"replicas\":1,\"selector\":{\"matchLabels\":{"
           "\"app\":\"web\"}},"
           "\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{}}}}",
           rsname);
  rs = (struct kcm_replicaset *)decode(KCM_KIND_REPLICASET, json);
  assert_int_equal(kcm_replicaset_pod_body(rs, &b, &at, &len), 0);
  kcm_replicaset_pod_name_fill(b.data + at, len, last);
  pod = json_tokener_parse(b.data);
  json_object_object_get_ex(pod, "metadata", &meta);
  json_object_object_get_ex(meta, "name", &v);
  snprintf(name, size, "%s", json_object_get_string(v));
  assert_int_equal(strlen(name), len);
  json_object_object_get_ex(meta, "generateName", &v);
  snprintf(prefix, psize, "%s", json_object_get_string(v));
  json_object_put(pod);
  kcm_buf_release(&b);
  kcm_api_unref(&rs->o, &pool);
}

/* Pod names as the API server makes them from generateName: the prefix cut
 * to 58 characters, then 5 drawn from its alphabet. */
static void pod_names_as_the_server_makes_them(void **state) {
  char name[300], prefix[300], rsname[300], want[300];
  pod_name_of("web-5f6bc87678", name, sizeof(name), prefix, sizeof(prefix));
  assert_string_equal(name, "web-5f6bc87678-99999");
  assert_string_equal(prefix, "web-5f6bc87678-");
  memset(rsname, 'a', 80);
  rsname[80] = '\0';
  pod_name_of(rsname, name, sizeof(name), prefix, sizeof(prefix));
  snprintf(want, sizeof(want), "%.58s99999", rsname);
  assert_string_equal(name, want);
  assert_int_equal(strlen(prefix), 81);
  /* A ReplicaSet name of 253 characters leaves no room for the dash. */
  memset(rsname, 'a', 253);
  rsname[253] = '\0';
  pod_name_of(rsname, name, sizeof(name), prefix, sizeof(prefix));
  assert_string_equal(prefix, rsname);
  assert_int_equal(strlen(name), KCM_REPLICASET_NAME_MAX);
}

static void pods_from_the_template(void **state) {
  struct kcm_replicaset *rs = make_rs(1, NULL, 0, NULL);
  struct kcm_buf b = KCM_BUF_INIT(1 << 16);
  struct json_object *pod, *meta, *v, *ref;
  size_t at, len;
  assert_int_equal(kcm_replicaset_pod_body(rs, &b, &at, &len), 0);
  assert_int_equal(len, 8);
  assert_memory_equal(b.data + at, "rs-", 3);
  kcm_replicaset_pod_name_fill(b.data + at, len, first);
  pod = json_tokener_parse(b.data);
  assert_non_null(pod);
  json_object_object_get_ex(pod, "metadata", &meta);
  json_object_object_get_ex(meta, "generateName", &v);
  assert_string_equal(json_object_get_string(v), "rs-");
  json_object_object_get_ex(meta, "name", &v); /* not the template's name */
  assert_string_equal(json_object_get_string(v), "rs-bbbbb");
  json_object_object_get_ex(meta, "labels", &v);
  assert_string_equal(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN),
                      "{\"app\":\"web\",\"tier\":\"fe\"}");
  assert_true(json_object_object_get_ex(meta, "annotations", &v));
  json_object_object_get_ex(meta, "finalizers", &v);
  assert_string_equal(json_object_get_string(json_object_array_get_idx(v, 0)), "example.com/f");
  json_object_object_get_ex(meta, "ownerReferences", &v);
  ref = json_object_array_get_idx(v, 0);
  json_object_object_get_ex(ref, "uid", &v);
  assert_string_equal(json_object_get_string(v), RS_UID);
  json_object_object_get_ex(ref, "controller", &v);
  assert_true(json_object_get_boolean(v));
  json_object_object_get_ex(ref, "blockOwnerDeletion", &v);
  assert_true(json_object_get_boolean(v));
  json_object_object_get_ex(ref, "kind", &v);
  assert_string_equal(json_object_get_string(v), "ReplicaSet");
  assert_true(json_object_object_get_ex(pod, "spec", &v));
  json_object_put(pod);
  kcm_buf_release(&b);
  kcm_api_unref(&rs->o, &pool);
}

/* kube-apiserver keeps a pod template's own managedFields 9,990 levels
 * deep: the ReplicaSet is read, its template kept whole, and its pods are
 * made from it without them, as upstream takes only labels, annotations
 * and finalizers from the template's metadata. */
static void pods_from_a_deep_template(void **state) {
  const int depth = 9990;
  struct kcm_buf text = KCM_BUF_INIT(1 << 20), b = KCM_BUF_INIT(1 << 20);
  struct kcm_object *o = NULL;
  struct kcm_replicaset *rs;
  struct kcm_api_error err;
  size_t at, len;
  int i;
  kcm_buf_append_str(&text, "{\"metadata\":{\"name\":\"rs\",\"namespace\":\"ns\",\"uid\":\"" RS_UID
                            "\",\"resourceVersion\":\"5\"},\"spec\":{\"replicas\":1,\"selector\":"
                            "{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":{"
                            "\"labels\":{\"app\":\"web\"},\"managedFields\":[{\"manager\":\"t\","
                            "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":");
  for (i = 0; i < depth; i++)
    kcm_buf_append_str(&text, "{\"f:a\":");
  kcm_buf_append_str(&text, "{}");
  for (i = 0; i < depth; i++)
    kcm_buf_append_str(&text, "}");
  kcm_buf_append_str(&text, "}]},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}}}");
  if (kcm_api_decode_text(KCM_KIND_REPLICASET, text.data, text.len, NULL, NULL, &pool, &o, &err))
    fail_msg("decode: %s %s", err.field, err.problem);
  rs = (struct kcm_replicaset *)o;
  assert_non_null(strstr(rs->template, "\"managedFields\""));
  assert_int_equal(kcm_replicaset_pod_body(rs, &b, &at, &len), 0);
  assert_null(strstr(b.data, "managedFields"));
  assert_non_null(strstr(b.data, "\"labels\":{\"app\":\"web\"}"));
  kcm_api_unref(o, &pool);
  kcm_buf_release(&text);
  kcm_buf_release(&b);
}

/* What a delete's answer says of the pod: still there terminating while a
 * grace period runs or finalizers are left, unless it finished; not when
 * deleted at once, nor for a Status or a body that is no JSON. */
static void deleted_pod_left_terminating(void **state) {
  static const struct {
    const char *body;
    bool terminating;
  } cases[] = {
      {"{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\",\"deletionTimestamp\":\"2026-01-01T00:00:30Z\","
       "\"deletionGracePeriodSeconds\":30},\"status\":{\"phase\":\"Running\"}}",
       true},
      {"{\"metadata\":{\"deletionGracePeriodSeconds\":0,\"finalizers\":[\"x/y\"],"
       "\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"},\"kind\":\"Pod\"}",
       true},
      {"{\"kind\":\"Pod\",\"metadata\":{\"deletionTimestamp\":\"2026-01-01T00:00:00Z\","
       "\"deletionGracePeriodSeconds\":0,\"finalizers\":[]}}",
       false},
      {"{\"kind\":\"Pod\",\"metadata\":{\"deletionTimestamp\":\"2026-01-01T00:00:30Z\","
       "\"deletionGracePeriodSeconds\":30},\"status\":{\"phase\":\"Succeeded\"}}",
       false},
      {"{\"kind\":\"Pod\",\"metadata\":{\"deletionGracePeriodSeconds\":30}}", false},
      {"{\"kind\":\"Status\",\"status\":\"Success\",\"metadata\":{\"deletionTimestamp\":"
       "\"x\",\"deletionGracePeriodSeconds\":30}}",
       false},
      {"{\"kind\":\"Pod\",\"metadata\":{\"deletionTimestamp\":\"2026-01-01T00:00:30Z\","
       "\"deletionGracePeriodSeconds\":30",
       false},
      {"", false},
  };
  struct kcm_json j;
  size_t i;
  (void)state;
  kcm_json_init(&j);
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    if (kcm_replicaset_pod_left_terminating(&j, cases[i].body, strlen(cases[i].body)) !=
        cases[i].terminating)
      fail_msg("case %zu: %s", i, cases[i].body);
  assert_false(kcm_replicaset_pod_left_terminating(&j, NULL, 0));
  kcm_json_release(&j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(deleted_pod_left_terminating),
      cmocka_unit_test(diff_and_burst),
      cmocka_unit_test(pod_names_as_the_server_makes_them),
      cmocka_unit_test(slow_start_batches),
      cmocka_unit_test(plans_in_waves),
      cmocka_unit_test(expectations_hold_managing),
      cmocka_unit_test(claiming),
      cmocka_unit_test(terminating_replicas),
      cmocka_unit_test(ranking_rules),
      cmocka_unit_test(ranking_prefers_crowded_nodes),
      cmocka_unit_test(ranking_many_pods_counts_each_node_once),
      cmocka_unit_test(status_counts),
      cmocka_unit_test(availability_is_due_at_its_moment),
      cmocka_unit_test(status_replica_failure),
      cmocka_unit_test(status_unchanged_is_not_written),
      cmocka_unit_test(status_only_gains_may_wait),
      cmocka_unit_test(pods_from_the_template),
      cmocka_unit_test(pods_from_a_deep_template),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
