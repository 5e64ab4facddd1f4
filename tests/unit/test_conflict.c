/*
 * Tests for telling another controller's writes from kcm's: status writes
 * and creates of owned ReplicaSets by another field manager since kcm
 * began to lead, each starting a conflict in its controller's area, which
 * ends after a quiet spell; history, kcm's own writes and a user's edits
 * never do.
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

/* A ReplicaSet (owner: a Deployment or none) or a Deployment, created at
 * `created`, with managedFields `fields`. */
static struct kcm_object *decode(enum kcm_kind kind, const char *created, const char *owner,
                                 const char *fields) {
  char text[2048], refs[256] = "";
  struct kcm_object *o = NULL;
  struct kcm_api_error err;
  if (owner)
    snprintf(refs, sizeof(refs),
             ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"%s\",\"name\":\"web\","
             "\"uid\":\"6d1b4c3e-0000-4000-8000-000000000001\",\"controller\":true}]",
             owner);
  snprintf(text, sizeof(text),
           "{\"metadata\":{\"name\":\"web-1\",\"namespace\":\"ns\",\"uid\":"
           "\"30478c2c-7480-4d2d-a623-3c83746df9f3\",\"resourceVersion\":\"7\","
           "\"creationTimestamp\":\"%s\"%s,\"managedFields\":[%s]},"
           "\"spec\":{\"selector\":{},\"template\":{}}}",
           created, refs, fields);
  if (kcm_api_decode_text(kind, text, strlen(text), NULL, NULL, &pool, &o, &err))
    fail_msg("%s %s", err.field, err.problem);
  return o;
}

#define STATUS(m, t) "{\"manager\":\"" m "\",\"operation\":\"Update\",\"subresource\":\"status\",\"time\":\"" t "\"}"
#define MAIN(m, t) "{\"manager\":\"" m "\",\"operation\":\"Update\",\"time\":\"" t "\"}"

/* Another manager writing a ReplicaSet's status after kcm began to lead
 * starts a conflict in the ReplicaSet area, named and located; the same
 * write seen again is not counted twice. */
static void a_foreign_status_write_is_a_conflict(void **state) {
  struct kcm_conflict c;
  struct kcm_object *o = decode(KCM_KIND_REPLICASET, "2026-11-20T09:00:00Z", "Deployment",
                                MAIN("kube-controller-manager", "2026-11-20T09:00:00Z") ","
                                STATUS("kube-controller-manager", "2026-11-20T10:04:00Z"));
  bool began;
  kcm_conflict_init(&c, "kcm", 60);
  assert_int_equal(kcm_conflict_observe(&c, o, NULL, LEAD + 50, &began), -1); /* not leading */
  kcm_conflict_lead(&c, LEAD);
  assert_int_equal(kcm_conflict_observe(&c, o, NULL, LEAD + 50, &began),
                   KCM_CONFLICT_REPLICASET);
  assert_true(began);
  assert_true(c.area[KCM_CONFLICT_REPLICASET].active);
  assert_false(c.area[KCM_CONFLICT_DEPLOYMENT].active);
  assert_string_equal(c.area[KCM_CONFLICT_REPLICASET].manager, "kube-controller-manager");
  assert_string_equal(c.area[KCM_CONFLICT_REPLICASET].kind, "ReplicaSet");
  assert_string_equal(c.area[KCM_CONFLICT_REPLICASET].example, "ns/web-1");
  assert_int_equal(kcm_conflict_observe(&c, o, kcm_api_writers_of(o), LEAD + 51, &began), -1);
  assert_int_equal(c.area[KCM_CONFLICT_REPLICASET].writes, 1);
  kcm_api_unref(o, &pool);
}

/* History (stamped before kcm led), kcm's own writes, a user's spec edits
 * and scale, and a status write of an earlier second are no conflict. */
static void history_own_writes_and_users_are_not(void **state) {
  static const char *const fields[] = {
      STATUS("kube-controller-manager", "2026-11-20T10:03:19Z"),
      STATUS("kcm", "2026-11-20T10:05:00Z"),
      MAIN("kubectl-edit", "2026-11-20T10:06:00Z") ","
      "{\"manager\":\"kubectl\",\"subresource\":\"scale\",\"time\":\"2026-11-20T10:06:00Z\"}",
      /* the latest status writer is kcm: the other's entry is older */
      STATUS("kube-controller-manager", "2026-11-20T10:02:00Z") ","
      STATUS("kcm", "2026-11-20T10:06:00Z"),
  };
  size_t i;
  for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
    struct kcm_conflict c;
    int k;
    for (k = 0; k < 2; k++) {
      struct kcm_object *o =
          decode(k ? KCM_KIND_DEPLOYMENT : KCM_KIND_REPLICASET, "2026-11-20T10:05:00Z",
                 k ? NULL : "Deployment", fields[i]);
      bool began;
      kcm_conflict_init(&c, "kcm", 60);
      kcm_conflict_lead(&c, LEAD);
      if (kcm_conflict_observe(&c, o, NULL, LEAD + 100, &began) != -1)
        fail_msg("fields %zu, kind %d: a conflict", i, k);
      kcm_api_unref(o, &pool);
    }
  }
}

/* A Deployment's status by another, or a ReplicaSet of a Deployment's made
 * by another, is the Deployment controller's area; a ReplicaSet made by
 * another without a Deployment owning it (a user's) is nothing. */
static void the_deployment_area(void **state) {
  struct kcm_conflict c;
  struct kcm_object *dp = decode(KCM_KIND_DEPLOYMENT, "2026-11-20T09:00:00Z", NULL,
                                 STATUS("kube-controller-manager", "2026-11-20T10:04:00Z"));
  struct kcm_object *made = decode(KCM_KIND_REPLICASET, "2026-11-20T10:04:00Z", "Deployment",
                                   MAIN("kube-controller-manager", "2026-11-20T10:04:00Z"));
  struct kcm_object *mine = decode(KCM_KIND_REPLICASET, "2026-11-20T10:04:00Z", "Deployment",
                                   MAIN("kcm", "2026-11-20T10:04:00Z"));
  struct kcm_object *users = decode(KCM_KIND_REPLICASET, "2026-11-20T10:04:00Z", NULL,
                                    MAIN("kubectl-create", "2026-11-20T10:04:00Z"));
  bool began;
  kcm_conflict_init(&c, "kcm", 60);
  kcm_conflict_lead(&c, LEAD);
  assert_int_equal(kcm_conflict_observe(&c, mine, NULL, LEAD + 60, &began), -1);
  assert_int_equal(kcm_conflict_observe(&c, users, NULL, LEAD + 60, &began), -1);
  assert_int_equal(kcm_conflict_observe(&c, made, kcm_api_writers_of(made), LEAD + 60, &began), -1);
  assert_int_equal(kcm_conflict_observe(&c, made, NULL, LEAD + 60, &began),
                   KCM_CONFLICT_DEPLOYMENT);
  assert_true(began);
  assert_int_equal(kcm_conflict_observe(&c, dp, NULL, LEAD + 61, &began),
                   KCM_CONFLICT_DEPLOYMENT);
  assert_false(began); /* already in conflict */
  assert_string_equal(c.area[KCM_CONFLICT_DEPLOYMENT].kind, "Deployment");
  assert_int_equal(c.area[KCM_CONFLICT_DEPLOYMENT].writes, 2);
  assert_false(c.area[KCM_CONFLICT_REPLICASET].active);
  kcm_api_unref(dp, &pool);
  kcm_api_unref(made, &pool);
  kcm_api_unref(mine, &pool);
  kcm_api_unref(users, &pool);
}

/* A conflict ends after quiet_s without a foreign write; a new write then
 * begins another; losing the lead clears every area. */
static void a_conflict_ends_when_quiet(void **state) {
  struct kcm_conflict c;
  struct kcm_object *o = decode(KCM_KIND_REPLICASET, "2026-11-20T09:00:00Z", NULL,
                                STATUS("k3s", "2026-11-20T10:04:00Z"));
  bool began;
  kcm_conflict_init(&c, "kcm", 60);
  kcm_conflict_lead(&c, LEAD);
  kcm_conflict_observe(&c, o, NULL, LEAD + 10, &began);
  assert_int_equal(kcm_conflict_expire(&c, LEAD + 69), 0);
  assert_int_equal(kcm_conflict_expire(&c, LEAD + 70), 1u << KCM_CONFLICT_REPLICASET);
  assert_false(c.area[KCM_CONFLICT_REPLICASET].active);
  assert_int_equal(kcm_conflict_expire(&c, LEAD + 200), 0);
  kcm_conflict_observe(&c, o, NULL, LEAD + 300, &began);
  assert_true(began);
  assert_int_equal(c.area[KCM_CONFLICT_REPLICASET].since, LEAD + 300);
  kcm_conflict_lead(&c, 0);
  assert_false(c.area[KCM_CONFLICT_REPLICASET].active);
  assert_int_equal(kcm_conflict_observe(&c, o, NULL, LEAD + 301, &began), -1);
  assert_string_equal(kcm_conflict_area_name(KCM_CONFLICT_DEPLOYMENT), "deployment");
  /* an area whose controller kcm does not run is another's to write */
  kcm_conflict_lead(&c, LEAD);
  c.watched = 1u << KCM_CONFLICT_DEPLOYMENT;
  assert_int_equal(kcm_conflict_observe(&c, o, NULL, LEAD + 400, &began), -1);
  kcm_api_unref(o, &pool);
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
      cmocka_unit_test(a_foreign_status_write_is_a_conflict),
      cmocka_unit_test(history_own_writes_and_users_are_not),
      cmocka_unit_test(the_deployment_area),
      cmocka_unit_test(a_conflict_ends_when_quiet),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
