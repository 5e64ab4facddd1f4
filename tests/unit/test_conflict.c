/*
 * Tests for telling another controller's status writes from kcm's own and
 * from what a tenant can forge: a write counts only when the status counts
 * changed and a status entry of another's came with it, in a watch event
 * that follows its cached copy, of the same object; a namespace is held
 * from the second such write within the quiet period, every namespace
 * while a system namespace is held (or enough namespaces, when asked for),
 * and all of it ends after a quiet spell.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "kcm/conflict.h"
#include "kcm/intern.h"

#define LEAD 1795169000 /* 2026-11-20T10:03:20Z */

static struct kcm_intern pool;

#define UID "30478c2c-7480-4d2d-a623-3c83746df9f3"
#define OTHER_UID "30478c2c-7480-4d2d-a623-3c83746df9f4"

/* A ReplicaSet (or Deployment) web-1 of that uid in ns with managedFields
 * `fields` and readyReplicas `ready`. */
static struct kcm_object *object_of(enum kcm_kind kind, const char *ns, const char *uid,
                                    const char *fields, int ready) {
  char text[4096];
  struct kcm_object *o = NULL;
  struct kcm_api_error err;
  snprintf(text, sizeof(text),
           "{\"metadata\":{\"name\":\"web-1\",\"namespace\":\"%s\",\"uid\":"
           "\"%s\",\"resourceVersion\":\"7\","
           "\"creationTimestamp\":\"2026-11-20T09:00:00Z\",\"managedFields\":[%s]},"
           "\"spec\":{\"selector\":{},\"template\":{}},"
           "\"status\":{\"replicas\":3,\"readyReplicas\":%d,\"observedGeneration\":1}}",
           ns, uid, fields, ready);
  if (kcm_api_decode_text(kind, text, strlen(text), NULL, NULL, &pool, &o, &err))
    fail_msg("%s %s", err.field, err.problem);
  return o;
}

#define STATUS(m, t) "{\"manager\":\"" m "\",\"operation\":\"Update\",\"subresource\":\"status\",\"time\":\"" t "\"}"
#define MAIN(m, t) "{\"manager\":\"" m "\",\"operation\":\"Update\",\"time\":\"" t "\"}"
#define KCM_1 STATUS("kcm", "2026-11-20T10:04:00Z")
#define KCM_2 STATUS("kcm", "2026-11-20T10:06:00Z")
#define KCM_3 STATUS("kcm", "2026-11-20T10:08:00Z")
#define UPSTREAM_1 STATUS("kube-controller-manager", "2026-11-20T10:05:00Z")
#define UPSTREAM_2 STATUS("kube-controller-manager", "2026-11-20T10:07:00Z")

/* The change from a (ready ra) to b (ready rb, of uid b_uid), both of kind
 * in ns, as a watch event that follows its cached copy or not. */
static struct kcm_conflict_change step_as(struct kcm_conflict *c, enum kcm_kind kind,
                                          const char *ns, const char *a, int ra, const char *b,
                                          int rb, int64_t now, bool successive,
                                          const char *b_uid) {
  struct kcm_object *old = object_of(kind, ns, UID, a, ra), *cur = object_of(kind, ns, b_uid, b, rb);
  struct kcm_conflict_change ch;
  static char manager[129];
  kcm_conflict_observe(c, old, cur, successive, now, &ch);
  if (ch.manager) /* pooled: gone with the object */
    ch.manager = strcpy(manager, ch.manager);
  kcm_api_unref(old, &pool);
  kcm_api_unref(cur, &pool);
  return ch;
}

static struct kcm_conflict_change step(struct kcm_conflict *c, enum kcm_kind kind,
                                       const char *ns, const char *a, int ra, const char *b,
                                       int rb, int64_t now) {
  return step_as(c, kind, ns, a, ra, b, rb, now, true, UID);
}

static void lead(struct kcm_conflict *c, uint32_t cluster_at) {
  kcm_conflict_init(c, "kcm", 60, cluster_at, "kube-system,platform");
  kcm_conflict_lead(c, LEAD);
}

/* One status write by another holds nothing, as upstream's e2e spec "should
 * run the lifecycle of a Deployment" makes one; a second within the quiet
 * period holds that namespace, and only that one, in its kind's area. */
static void the_second_foreign_write_holds_its_namespace(void **state) {
  struct kcm_conflict c;
  struct kcm_conflict_change ch;
  lead(&c, 3);
  ch = step(&c, KCM_KIND_REPLICASET, "shop", KCM_1, 2, UPSTREAM_1, 3, LEAD + 100);
  assert_int_equal(ch.area, KCM_KIND_REPLICASET);
  assert_string_equal(ch.manager, "kube-controller-manager");
  assert_false(ch.held);
  assert_false(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "shop", 4));
  ch = step(&c, KCM_KIND_REPLICASET, "shop", UPSTREAM_1 "," KCM_2, 3, UPSTREAM_2 "," KCM_2, 2,
            LEAD + 130);
  assert_true(ch.held);
  assert_false(ch.cluster);
  assert_int_equal(ch.space->writes, 2);
  assert_true(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "shop", 4));
  assert_false(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "shops", 5));
  assert_false(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "sho", 3));
  assert_false(kcm_conflict_holds(&c, KCM_KIND_DEPLOYMENT, "shop", 4));
  assert_int_equal(c.area[KCM_KIND_REPLICASET].held, 1);
  /* a write in the same second as kcm's counts too */
  ch = step(&c, KCM_KIND_REPLICASET, "shop", KCM_1, 2,
            STATUS("kube-controller-manager", "2026-11-20T10:04:00Z") "," KCM_1, 3, LEAD + 131);
  assert_int_equal(ch.area, KCM_KIND_REPLICASET);
  assert_int_equal(ch.space->writes, 3);
  assert_string_equal(c.area[KCM_KIND_REPLICASET].manager, "kube-controller-manager");
  /* a Deployment's status is the Deployment controller's area */
  ch = step(&c, KCM_KIND_DEPLOYMENT, "shop", KCM_1, 2, STATUS("x", "2026-11-20T10:05:00Z"), 3,
            LEAD + 131);
  assert_int_equal(ch.area, KCM_KIND_DEPLOYMENT);
  assert_false(ch.held);
  assert_string_equal(c.area[KCM_KIND_DEPLOYMENT].manager, "other");
  kcm_conflict_release(&c);
}

/* terminatingReplicas is a count the controller keeps (from 1.35): a
 * foreign status write that changes it alone is evidence too. */
static void terminating_replicas_is_a_count(void **state) {
  static const char *const kinds[] = {"ReplicaSet", "Deployment"};
  struct kcm_conflict c;
  struct kcm_conflict_change ch;
  int k;
  lead(&c, 3);
  for (k = 0; k < 2; k++) {
    char a[1024], b[1024];
    struct kcm_object *old, *cur;
    struct kcm_api_error err;
    snprintf(a, sizeof(a),
             "{\"metadata\":{\"name\":\"web-1\",\"namespace\":\"shop\",\"uid\":"
             "\"30478c2c-7480-4d2d-a623-3c83746df9f3\",\"resourceVersion\":\"7\","
             "\"managedFields\":[" KCM_1 "]},\"spec\":{\"selector\":{},\"template\":{}},"
             "\"status\":{\"replicas\":3,\"terminatingReplicas\":1}}");
    snprintf(b, sizeof(b),
             "{\"metadata\":{\"name\":\"web-1\",\"namespace\":\"shop\",\"uid\":"
             "\"30478c2c-7480-4d2d-a623-3c83746df9f3\",\"resourceVersion\":\"8\","
             "\"managedFields\":[" KCM_1 "," UPSTREAM_1 "]},\"spec\":{\"selector\":{},"
             "\"template\":{}},\"status\":{\"replicas\":3,\"terminatingReplicas\":0}}");
    enum kcm_kind kind = k ? KCM_KIND_DEPLOYMENT : KCM_KIND_REPLICASET;
    if (kcm_api_decode_text(kind, a, strlen(a), NULL, NULL, &pool, &old, &err) ||
        kcm_api_decode_text(kind, b, strlen(b), NULL, NULL, &pool, &cur, &err))
      fail_msg("%s: %s %s", kinds[k], err.field, err.problem);
    kcm_conflict_observe(&c, old, cur, true, LEAD + 100, &ch);
    assert_int_equal(ch.area, k ? KCM_KIND_DEPLOYMENT : KCM_KIND_REPLICASET);
    kcm_api_unref(old, &pool);
    kcm_api_unref(cur, &pool);
  }
  kcm_conflict_release(&c);
}

/* What a tenant who may update the object (but not its status) can send is
 * no evidence: managedFields naming another status writer with any time,
 * on an update that changes no count; nor are kcm's own status writes
 * beside such forged entries, even when kcm's write takes every field of
 * the newest forged entry and an older one becomes the newest. */
static void forged_managed_fields_are_no_evidence(void **state) {
  static const struct {
    const char *before, *after;
    int ready_before, ready_after;
  } cases[] = {
      /* a forged entry arrives with a spec or metadata update */
      {KCM_1, KCM_1 "," STATUS("kube-controller-manager", "2099-01-01T00:00:00Z"), 2, 2},
      {KCM_1, STATUS("evil", "2026-11-20T10:05:00Z") "," MAIN("evil", "2026-11-20T10:05:00Z"),
       2, 2},
      /* kcm writes status beside a forged future entry */
      {KCM_1 "," STATUS("evil", "2099-01-01T00:00:00Z"),
       KCM_2 "," STATUS("evil", "2099-01-01T00:00:00Z"), 2, 3},
      /* kcm's write removes the newest forged entry; an older one is left */
      {STATUS("a", "2098-01-01T00:00:00Z") "," STATUS("b", "2099-01-01T00:00:00Z") "," KCM_1,
       STATUS("a", "2098-01-01T00:00:00Z") "," KCM_2, 2, 3},
      /* kcm's own write */
      {UPSTREAM_1, UPSTREAM_1 "," KCM_2, 2, 3},
      /* history: stamped before kcm began to lead */
      {STATUS("kube-controller-manager", "2026-11-20T09:00:00Z"),
       STATUS("kube-controller-manager", "2026-11-20T10:03:19Z"), 2, 3},
      /* conditions or other fields only: no count changed */
      {KCM_1, UPSTREAM_1, 2, 2},
      /* more status entries than kept: a new one cannot be told */
      {STATUS("a", "2026-11-20T10:04:00Z") "," STATUS("b", "2026-11-20T10:04:00Z") ","
       STATUS("c", "2026-11-20T10:04:00Z") "," STATUS("d", "2026-11-20T10:04:00Z") "," KCM_1,
       STATUS("a", "2026-11-20T10:04:00Z") "," STATUS("b", "2026-11-20T10:04:00Z") ","
       STATUS("c", "2026-11-20T10:04:00Z") "," STATUS("d", "2026-11-20T10:04:00Z") "," KCM_1
       "," UPSTREAM_1, 2, 3},
      /* an entry that was there, in another place */
      {UPSTREAM_1 "," KCM_1, KCM_2 "," UPSTREAM_1, 2, 3},
  };
  size_t i;
  int k;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    for (k = 0; k < 2; k++) {
      struct kcm_conflict c;
      struct kcm_conflict_change ch;
      lead(&c, 1);
      ch = step(&c, k ? KCM_KIND_DEPLOYMENT : KCM_KIND_REPLICASET, "tenant", cases[i].before,
                cases[i].ready_before, cases[i].after, cases[i].ready_after, LEAD + 100);
      if (ch.area != -1)
        fail_msg("case %zu, kind %d: taken for another's status write", i, k);
      kcm_conflict_release(&c);
    }
}

/* Before kcm leads, or for an area whose controller kcm does not run,
 * nothing counts. */
static void only_while_leading_and_watched(void **state) {
  struct kcm_conflict c;
  kcm_conflict_init(&c, "kcm", 60, 1, "kube-system");
  assert_int_equal(step(&c, KCM_KIND_REPLICASET, "a", KCM_1, 2, UPSTREAM_1, 3, LEAD + 9).area,
                   -1);
  kcm_conflict_lead(&c, LEAD);
  c.watched = 1u << KCM_KIND_DEPLOYMENT;
  assert_int_equal(step(&c, KCM_KIND_REPLICASET, "a", KCM_1, 2, UPSTREAM_1, 3, LEAD + 9).area,
                   -1);
  assert_int_equal(step(&c, KCM_KIND_DEPLOYMENT, "a", KCM_1, 2, UPSTREAM_1, 3, LEAD + 9).area,
                   KCM_KIND_DEPLOYMENT);
  kcm_conflict_release(&c);
}

static int ended_calls;
static char ended_ns[64];

static void on_ended(void *data, int area, const char *ns) {
  assert_int_equal(area, KCM_KIND_REPLICASET);
  ended_calls++;
  snprintf(ended_ns, sizeof(ended_ns), "%s", ns);
}

/* Held namespaces in cluster_at namespaces hold every namespace, while
 * that many are held; each namespace ends quiet_s after its last write; a
 * single write's record ends too, without a word. */
static void enough_namespaces_hold_every_namespace(void **state) {
  static const char *const spaces[] = {"a", "b", "c"};
  struct kcm_conflict c;
  struct kcm_conflict_change ch = {0};
  size_t i;
  lead(&c, 3);
  for (i = 0; i < 3; i++) {
    step(&c, KCM_KIND_REPLICASET, spaces[i], KCM_1, 2, UPSTREAM_1, 3, LEAD + 100);
    ch = step(&c, KCM_KIND_REPLICASET, spaces[i], UPSTREAM_1 "," KCM_2, 2, UPSTREAM_2 "," KCM_2,
              3, LEAD + 100 + (int64_t)i * 20);
    assert_true(ch.held);
    assert_int_equal(ch.cluster, i == 2);
  }
  assert_true(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "elsewhere", 9));
  assert_false(kcm_conflict_holds(&c, KCM_KIND_DEPLOYMENT, "elsewhere", 9));
  step(&c, KCM_KIND_REPLICASET, "d", KCM_1, 2, UPSTREAM_1, 3, LEAD + 140); /* one write */
  ended_calls = 0;
  assert_int_equal(kcm_conflict_expire(&c, LEAD + 159, on_ended, NULL), 0);
  assert_int_equal(kcm_conflict_expire(&c, LEAD + 160, on_ended, NULL),
                   1u << KCM_KIND_REPLICASET);
  assert_int_equal(ended_calls, 1);
  assert_string_equal(ended_ns, "a");
  /* two held of three: no longer every namespace, though two still are */
  assert_false(c.area[KCM_KIND_REPLICASET].cluster);
  assert_false(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "elsewhere", 9));
  assert_true(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "b", 1));
  /* a third held again: every namespace again */
  step(&c, KCM_KIND_REPLICASET, "e", KCM_1, 2, UPSTREAM_1, 3, LEAD + 161);
  ch = step(&c, KCM_KIND_REPLICASET, "e", UPSTREAM_1 "," KCM_2, 2, UPSTREAM_2 "," KCM_2, 3,
            LEAD + 162);
  assert_true(ch.cluster);
  assert_int_equal(kcm_conflict_expire(&c, LEAD + 200, on_ended, NULL),
                   1u << KCM_KIND_REPLICASET);
  assert_int_equal(ended_calls, 3);
  assert_false(c.area[KCM_KIND_REPLICASET].cluster);
  assert_int_equal(c.area[KCM_KIND_REPLICASET].spaces.len, 1); /* "d" is gone; "e" is not */
  assert_false(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "a", 1));
  /* 0: never every namespace by count */
  kcm_conflict_release(&c);
  lead(&c, 0);
  for (i = 0; i < 3; i++) {
    step(&c, KCM_KIND_REPLICASET, spaces[i], KCM_1, 2, UPSTREAM_1, 3, LEAD + 100);
    ch = step(&c, KCM_KIND_REPLICASET, spaces[i], UPSTREAM_1 "," KCM_2, 2, UPSTREAM_2 "," KCM_2,
              3, LEAD + 100);
    assert_false(ch.cluster);
  }
  assert_false(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "elsewhere", 9));
  /* losing the lead clears everything */
  kcm_conflict_lead(&c, 0);
  assert_false(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "a", 1));
  kcm_conflict_release(&c);
}

/* A system namespace held holds every namespace, while it is held: no
 * tenant can write there. Without system namespaces it holds only itself. */
static void a_system_namespace_holds_every_namespace(void **state) {
  struct kcm_conflict c;
  struct kcm_conflict_change ch;
  lead(&c, 0);
  step(&c, KCM_KIND_DEPLOYMENT, "kube-system", KCM_1, 2, UPSTREAM_1, 3, LEAD + 100);
  ch = step(&c, KCM_KIND_DEPLOYMENT, "kube-system", UPSTREAM_1 "," KCM_2, 2,
            UPSTREAM_2 "," KCM_2, 3, LEAD + 110);
  assert_true(ch.held);
  assert_true(ch.cluster);
  assert_true(kcm_conflict_holds(&c, KCM_KIND_DEPLOYMENT, "tenant", 6));
  assert_false(kcm_conflict_holds(&c, KCM_KIND_REPLICASET, "tenant", 6));
  assert_int_equal(c.area[KCM_KIND_DEPLOYMENT].held_system, 1);
  /* a namespace whose name begins like one is not one */
  step(&c, KCM_KIND_REPLICASET, "kube-systems", KCM_1, 2, UPSTREAM_1, 3, LEAD + 100);
  ch = step(&c, KCM_KIND_REPLICASET, "kube-systems", UPSTREAM_1 "," KCM_2, 2,
            UPSTREAM_2 "," KCM_2, 3, LEAD + 110);
  assert_true(ch.held);
  assert_false(ch.cluster);
  /* the second system namespace of the list counts as well */
  step(&c, KCM_KIND_REPLICASET, "platform", KCM_1, 2, UPSTREAM_1, 3, LEAD + 100);
  ch = step(&c, KCM_KIND_REPLICASET, "platform", UPSTREAM_1 "," KCM_2, 2,
            UPSTREAM_2 "," KCM_2, 3, LEAD + 110);
  assert_true(ch.cluster);
  assert_int_equal(kcm_conflict_expire(&c, LEAD + 170, NULL, NULL),
                   (1u << KCM_KIND_DEPLOYMENT) | (1u << KCM_KIND_REPLICASET));
  assert_false(c.area[KCM_KIND_DEPLOYMENT].cluster);
  assert_false(c.area[KCM_KIND_REPLICASET].cluster);
  assert_int_equal(c.area[KCM_KIND_DEPLOYMENT].held_system, 0);
  kcm_conflict_release(&c);
  kcm_conflict_init(&c, "kcm", 60, 0, "");
  kcm_conflict_lead(&c, LEAD);
  step(&c, KCM_KIND_DEPLOYMENT, "kube-system", KCM_1, 2, UPSTREAM_1, 3, LEAD + 100);
  ch = step(&c, KCM_KIND_DEPLOYMENT, "kube-system", UPSTREAM_1 "," KCM_2, 2,
            UPSTREAM_2 "," KCM_2, 3, LEAD + 110);
  assert_true(ch.held);
  assert_false(ch.cluster);
  kcm_conflict_release(&c);
}

/* What a namespace user does with no status right is no evidence, however
 * it reaches kcm: an object deleted and made again under its name (a new
 * uid), or an update that does not follow its cached copy (a relist, a
 * streamed list, or a copy kept while newer ones were unreadable). */
static void a_new_uid_or_a_gap_is_no_evidence(void **state) {
  struct kcm_conflict c;
  int k;
  lead(&c, 1);
  for (k = 0; k < 2; k++) {
    enum kcm_kind kind = k ? KCM_KIND_DEPLOYMENT : KCM_KIND_REPLICASET;
    assert_int_equal(step_as(&c, kind, "tenant", KCM_1, 2, UPSTREAM_1, 3, LEAD + 100, true,
                             OTHER_UID).area, -1);
    assert_int_equal(step_as(&c, kind, "tenant", KCM_1, 2, UPSTREAM_1, 3, LEAD + 100, false,
                             UID).area, -1);
    /* the same change, successive and of the same object, is evidence */
    assert_int_equal(step(&c, kind, "tenant", KCM_1, 2, UPSTREAM_1, 3, LEAD + 100).area,
                     (int)kind);
  }
  kcm_conflict_release(&c);
}

/* The list of system namespaces: names, at most KCM_CONFLICT_SYSTEM_MAX. */
static void system_namespaces_are_checked(void **state) {
  static const char *const good[] = {"", "kube-system", "kube-system,platform", "a,b,c,d,e,f,g,h"};
  static const char *const bad[] = {"kube_system", "Kube", ",", "a,,b", "-a", "a-",
                                    "a,b,c,d,e,f,g,h,i",
                                    "a234567890123456789012345678901234567890123456789012345678901234"};
  size_t i;
  for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    assert_null(kcm_conflict_system_problem(good[i]));
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (!kcm_conflict_system_problem(bad[i]))
      fail_msg("accepted %s", bad[i]);
}

/* Namespaces are tracked up to KCM_CONFLICT_SPACES per area; writes in
 * more are counted as dropped, not kept. */
static void namespaces_tracked_are_bounded(void **state) {
  struct kcm_conflict c;
  struct kcm_conflict_change ch;
  char ns[16];
  int i;
  lead(&c, 0);
  for (i = 0; i <= KCM_CONFLICT_SPACES; i++) {
    snprintf(ns, sizeof(ns), "ns-%d", i);
    ch = step(&c, KCM_KIND_REPLICASET, ns, KCM_1, 2, UPSTREAM_1, 3, LEAD + 100);
    assert_int_equal(ch.area, KCM_KIND_REPLICASET);
    if (i < KCM_CONFLICT_SPACES)
      assert_non_null(ch.space);
    else
      assert_null(ch.space);
  }
  assert_int_equal(c.area[KCM_KIND_REPLICASET].spaces.len, KCM_CONFLICT_SPACES);
  assert_int_equal(c.area[KCM_KIND_REPLICASET].dropped, 1);
  /* a system namespace is tracked however many others are */
  ch = step(&c, KCM_KIND_REPLICASET, "kube-system", KCM_1, 2, UPSTREAM_1, 3, LEAD + 100);
  assert_non_null(ch.space);
  assert_true(ch.space->system);
  kcm_conflict_release(&c);
}

/* Manager names are classed before they reach an event or a label. */
static void managers_are_classed(void **state) {
  assert_string_equal(kcm_conflict_manager_class("kube-controller-manager"),
                      "kube-controller-manager");
  assert_string_equal(kcm_conflict_manager_class("kube-controller-manager-x"), "other");
  assert_string_equal(kcm_conflict_manager_class("\"}\n{evil"), "other");
  assert_string_equal(kcm_conflict_manager_class(NULL), "other");
  assert_string_equal(kcm_conflict_area_name(KCM_KIND_DEPLOYMENT), "deployment");
  assert_string_equal(kcm_conflict_area_kind(KCM_KIND_REPLICASET), "ReplicaSet");
}

static int setup(void **state) {
  kcm_intern_init(&pool);
  return 0;
}

static int teardown(void **state) {
  kcm_intern_release(&pool);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_second_foreign_write_holds_its_namespace),
      cmocka_unit_test(terminating_replicas_is_a_count),
      cmocka_unit_test(forged_managed_fields_are_no_evidence),
      cmocka_unit_test(only_while_leading_and_watched),
      cmocka_unit_test(enough_namespaces_hold_every_namespace),
      cmocka_unit_test(a_system_namespace_holds_every_namespace),
      cmocka_unit_test(a_new_uid_or_a_gap_is_no_evidence),
      cmocka_unit_test(system_namespaces_are_checked),
      cmocka_unit_test(namespaces_tracked_are_bounded),
      cmocka_unit_test(managers_are_classed),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
