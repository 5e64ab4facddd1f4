/*
 * Tests for sharing the work by namespace: which shard a namespace is in,
 * the moves of a round, and instances against the stand-in API server
 * (one alone takes every shard; a second one gets its share without a
 * shard held twice; a graceful stop hands its shards back at once; a
 * vanished one's shards are taken after their Lease expires).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/shards.h"
#include "support.h"
#include "../../src/leader/internal.h"

/* --- planning ---------------------------------------------------------------------------------- */

static void namespaces_spread_over_equal_hash_ranges(void **state) {
  uint32_t hits[32] = {0}, i, k;
  char ns[32];
  assert_int_equal(kcm_shards_of("a", 1, 1), 0);
  assert_int_equal(kcm_shards_of("a", 1, 2), kcm_shards_of("a", 1, 64) / 32); /* ranges */
  /* Names that differ only in a counting suffix, the hard case for
   * FNV-1a's upper bits, spread evenly once mixed. */
  for (i = 0; i < 3200; i++) {
    int n = snprintf(ns, sizeof(ns), "team-%u", i);
    k = kcm_shards_of(ns, (size_t)n, 32);
    assert_true(k < 32);
    assert_int_equal(k, kcm_shards_of(ns, (size_t)n, 32)); /* stable */
    hits[k]++;
  }
  for (i = 0; i < 32; i++)
    assert_in_range(hits[i], 60, 140); /* 100 each, give or take */
  /* and ten neighbours do not all share one */
  memset(hits, 0, sizeof(hits));
  for (i = 0; i < 10; i++) {
    int n = snprintf(ns, sizeof(ns), "team-%u", i);
    hits[kcm_shards_of(ns, (size_t)n, 32)]++;
  }
  for (i = k = 0; i < 32; i++)
    k += hits[i] > 0;
  assert_true(k >= 6);
}

static uint32_t count_moves(const enum kcm_shards_move *m, uint32_t n, enum kcm_shards_move what) {
  uint32_t i, c = 0;
  for (i = 0; i < n; i++)
    c += m[i] == what;
  return c;
}

static void rounds_aim_at_the_share(void **state) {
  struct kcm_shards_seen seen[8];
  enum kcm_shards_move m[8];
  uint32_t i;

  assert_int_equal(kcm_shards_share(32, 3), 11);
  assert_int_equal(kcm_shards_share(32, 0), 32);
  /* alone: every free shard */
  for (i = 0; i < 8; i++)
    seen[i] = (struct kcm_shards_seen){false, false, true};
  assert_int_equal(kcm_shards_plan(seen, 8, 1, 0, m), 8);
  assert_int_equal(count_moves(m, 8, KCM_SHARDS_TAKE), 8);
  /* two live, none held: four each, the second (rank 1) from the middle of
   * the free ones on */
  assert_int_equal(kcm_shards_plan(seen, 8, 2, 1, m), 4);
  assert_int_equal(count_moves(m, 8, KCM_SHARDS_TAKE), 4);
  assert_int_equal(m[4], KCM_SHARDS_TAKE);
  assert_int_equal(m[7], KCM_SHARDS_TAKE);
  assert_int_equal(m[3], KCM_SHARDS_STAY);
  /* two survivors each holding one, six shards of a dead instance free:
   * they try for different ones, so that neither loses a race and waits a
   * round */
  for (i = 0; i < 8; i++)
    seen[i] = (struct kcm_shards_seen){i == 6, false, i < 6};
  kcm_shards_plan(seen, 8, 2, 0, m);
  for (i = 0; i < 6; i++)
    assert_int_equal(m[i], i < 3 ? KCM_SHARDS_TAKE : KCM_SHARDS_STAY);
  seen[6].held = false;
  seen[7].held = true;
  kcm_shards_plan(seen, 8, 2, 1, m);
  for (i = 0; i < 6; i++)
    assert_int_equal(m[i], i < 3 ? KCM_SHARDS_STAY : KCM_SHARDS_TAKE);
  /* holding all 8 when a second instance lives: the highest 4 drained */
  for (i = 0; i < 8; i++)
    seen[i] = (struct kcm_shards_seen){true, false, false};
  kcm_shards_plan(seen, 8, 2, 0, m);
  assert_int_equal(count_moves(m, 8, KCM_SHARDS_DRAIN), 4);
  assert_int_equal(m[7], KCM_SHARDS_DRAIN);
  assert_int_equal(m[3], KCM_SHARDS_STAY);
  /* already draining counts as given up; being taken counts as had */
  seen[7].moving = seen[6].moving = true;
  kcm_shards_plan(seen, 8, 2, 0, m);
  assert_int_equal(count_moves(m, 8, KCM_SHARDS_DRAIN), 2);
  for (i = 0; i < 8; i++)
    seen[i] = (struct kcm_shards_seen){false, i < 3, i >= 3};
  kcm_shards_plan(seen, 8, 2, 0, m);
  assert_int_equal(count_moves(m, 8, KCM_SHARDS_TAKE), 1);
  assert_int_equal(m[3], KCM_SHARDS_TAKE);
  /* nothing free: nothing taken */
  for (i = 0; i < 8; i++)
    seen[i] = (struct kcm_shards_seen){false, false, false};
  kcm_shards_plan(seen, 8, 2, 0, m);
  assert_int_equal(count_moves(m, 8, KCM_SHARDS_TAKE), 0);
}

static void options_are_checked(void **state) {
  static const char *const shared[] = {"kube-system", "kube-node-lease", "kube-public",
                                       "default"};
  struct kcm_shards_options o = {8, "kcm-shards", "kcm", NULL, 15000, 10000, 2000, 0};
  const char *why = NULL;
  size_t i;
  assert_int_equal(kcm_shards_check(&o, &why), 0);
  /* namespaces where others write Leases are refused, saying why */
  for (i = 0; i < sizeof(shared) / sizeof(shared[0]); i++) {
    o.ns = shared[i];
    why = NULL;
    assert_int_equal(kcm_shards_check(&o, &why), KCM_EINVAL);
    assert_non_null(strstr(why, "shrink every instance's share"));
  }
  o.ns = "kcm-shards";
  o.count = 0;
  assert_int_equal(kcm_shards_check(&o, &why), KCM_EINVAL);
  assert_non_null(strstr(why, "--shards"));
  o.count = KCM_SHARDS_MAX + 1;
  assert_int_equal(kcm_shards_check(&o, &why), KCM_EINVAL);
  o.count = 8;
  o.renew_ms = 20000; /* not under the lease duration */
  assert_int_equal(kcm_shards_check(&o, &why), KCM_EINVAL);
}

/* --- instances against the stand-in ------------------------------------------------------------ */

#define SHARDS 4

struct fixture {
  uv_loop_t loop;
  struct kcm_client_config cfg;
  struct kcm_client *client, *client_a, *client_b;
  char ns[64];
  struct kcm_shards a, b;
  bool b_on;
  int taken_a, taken_b, stopped_a, stopped_b;
  int twice; /* rounds that saw a shard owned by both */
};

static void taken(struct kcm_shards *s, uint32_t shard) {
  struct fixture *f = s->data;
  if (s == &f->a)
    f->taken_a++;
  else
    f->taken_b++;
}

static void stopped(struct kcm_shards *s) {
  struct fixture *f = s->data;
  if (s == &f->a)
    f->stopped_a++;
  else
    f->stopped_b++;
}

static void coordinator(struct fixture *f, struct kcm_shards *s, struct kcm_client *c,
                        const char *identity) {
  struct kcm_shards_options o = {SHARDS, f->ns, "kcm", identity, 2000, 1000, 200, 0};
  assert_int_equal(kcm_shards_init(s, &f->loop, c, &o), 0);
  s->data = f;
  s->on_taken = taken;
}

static void fixture_init(struct fixture *f) {
  memset(f, 0, sizeof(*f));
  support_connect(&f->loop, &f->cfg, &f->client, "shards", f->ns, sizeof(f->ns));
  support_faults(&f->loop, f->client, "{\"clear\":true}"); /* none left by a failed test */
  assert_int_equal(kcm_client_new(&f->client_a, &f->loop, &f->cfg), 0);
  assert_int_equal(kcm_client_new(&f->client_b, &f->loop, &f->cfg), 0);
  coordinator(f, &f->a, f->client_a, "host_a");
  coordinator(f, &f->b, f->client_b, "host_b");
}

static void fixture_close(struct fixture *f) {
  kcm_shards_close(&f->a);
  kcm_shards_close(&f->b);
  if (f->client_a)
    kcm_client_close(f->client_a);
  if (f->client_b)
    kcm_client_close(f->client_b);
  kcm_client_close(f->client);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  kcm_shards_release(&f->a);
  kcm_shards_release(&f->b);
  uv_loop_close(&f->loop);
  kcm_client_config_release(&f->cfg);
}

/* Counts the turns in which a shard is owned by both, then asks cond. */
static void check_once_owned(struct fixture *f) {
  uint32_t i;
  if (!f->b_on)
    return;
  for (i = 0; i < SHARDS; i++)
    if (f->a.shard[i].held && f->b.shard[i].held)
      f->twice++;
}

static bool a_holds_all(void *arg) {
  struct fixture *f = arg;
  check_once_owned(f);
  return kcm_shards_held(&f->a) == SHARDS && kcm_shards_ready(&f->a);
}

static bool balanced(void *arg) {
  struct fixture *f = arg;
  check_once_owned(f);
  return kcm_shards_held(&f->a) == SHARDS / 2 && kcm_shards_held(&f->b) == SHARDS / 2 &&
         kcm_shards_ready(&f->a) && kcm_shards_ready(&f->b);
}

static bool b_stopped(void *arg) { return ((struct fixture *)arg)->stopped_b > 0; }

static void instances_share_and_hand_over(void **state) {
  struct fixture f;
  uint64_t t;
  uint32_t i;
  fixture_init(&f);
  kcm_shards_start(&f.a);
  assert_false(kcm_shards_ready(&f.a));
  assert_true(support_run_until(&f.loop, a_holds_all, &f, 5000));
  assert_int_equal(f.taken_a, SHARDS);
  for (i = 0; i < SHARDS; i++) {
    char ns[16];
    int n = snprintf(ns, sizeof(ns), "ns-%u", i);
    assert_true(kcm_shards_owns(&f.a, ns, (size_t)n));
  }

  /* A second instance: each ends with half, no shard ever held by both. */
  f.b_on = true;
  kcm_shards_start(&f.b);
  assert_true(support_run_until(&f.loop, balanced, &f, 8000));
  assert_int_equal(f.twice, 0);
  assert_int_equal(f.a.live, 2);
  assert_int_equal(f.a.stats.released, SHARDS / 2);
  for (i = 0; i < SHARDS; i++)
    assert_true(f.a.shard[i].held != f.b.shard[i].held);

  /* B stops gracefully: A has every shard again within a few retry periods. */
  t = uv_now(&f.loop);
  kcm_shards_stop(&f.b, stopped);
  assert_true(support_run_until(&f.loop, b_stopped, &f, 5000));
  f.b_on = false;
  assert_int_equal(kcm_shards_held(&f.b), 0);
  assert_true(support_run_until(&f.loop, a_holds_all, &f, 5000));
  assert_true(uv_now(&f.loop) - t < 2000); /* sooner than a Lease expires */
  assert_int_equal(f.twice, 0);
  fixture_close(&f);
}

static bool b_holds_all(void *arg) {
  struct fixture *f = arg;
  return kcm_shards_held(&f->b) == SHARDS;
}

static void a_vanished_instance_s_shards_are_taken_after_expiry(void **state) {
  struct fixture f;
  uint64_t t;
  fixture_init(&f);
  kcm_shards_start(&f.a);
  assert_true(support_run_until(&f.loop, a_holds_all, &f, 5000));
  /* A vanishes without releasing, as a killed process does. */
  kcm_shards_close(&f.a);
  kcm_client_close(f.client_a);
  f.client_a = NULL;
  t = uv_now(&f.loop);
  kcm_shards_start(&f.b);
  assert_true(support_run_until(&f.loop, b_holds_all, &f, 6000));
  /* not before the Lease expired; within its duration and a few rounds */
  assert_true(uv_now(&f.loop) - t >= 2000);
  assert_true(uv_now(&f.loop) - t < 2000 + 4 * 200 + 1000);
  fixture_close(&f);
}

/* Every Lease lost, the member's too: each is lost at its own renew
 * deadline, so the shards' may go a retry period before the member's. */
static bool a_holds_nothing(void *arg) {
  struct fixture *f = arg;
  return kcm_shards_held(&f->a) == 0 && !f->a.member.leading;
}

/* The API server out of reach past the renew deadline: every Lease lost,
 * the member's too; back, the instance takes its member Lease and then
 * every shard again. */
static void an_outage_loses_the_shards_and_they_come_back(void **state) {
  struct fixture f;
  fixture_init(&f);
  kcm_shards_start(&f.a);
  assert_true(support_run_until(&f.loop, a_holds_all, &f, 5000));
  support_faults(&f.loop, f.client,
                 "{\"rules\":[{\"resource\":\"leases\",\"code\":500}]}");
  assert_true(support_run_until(&f.loop, a_holds_nothing, &f, 5000));
  assert_int_equal(f.a.stats.lost, SHARDS);
  support_faults(&f.loop, f.client, "{\"clear\":true}");
  assert_true(support_run_until(&f.loop, a_holds_all, &f, 8000));
  assert_true(f.a.member.leading);
  fixture_close(&f);
}

static bool b_listed(void *arg) {
  struct fixture *f = arg;
  return f->b.member_listed && f->b.listed_at;
}

/* A Lease held by `holder` for duration_s, renewed at `renew`. */
static void lease(struct fixture *f, const char *name, const char *holder, int duration_s,
                  const char *renew) {
  struct support_result r = {0};
  char path[160], body[512];
  snprintf(path, sizeof(path), "/apis/coordination.k8s.io/v1/namespaces/%s/leases", f->ns);
  snprintf(body, sizeof(body),
           "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\","
           "\"metadata\":{\"name\":\"%s\"},\"spec\":{\"holderIdentity\":\"%s\","
           "\"leaseDurationSeconds\":%d,\"renewTime\":\"%s\"}}",
           name, holder, duration_s, renew);
  support_request(&f->loop, f->client, "POST", path, body, &r);
  assert_int_equal(r.status, 201);
  support_result_free(&r);
}

/* A member Lease renewed at `renew`, as another instance's. */
static void member_lease(struct fixture *f, const char *name, const char *renew) {
  lease(f, name, name, 2, renew);
}

/* A member Lease last renewed longer ago than its duration, by the wall
 * clock, is a dead instance's: a joining instance does not count it, so it
 * takes its full share at once rather than after watching that Lease for
 * a duration. One renewed just now counts. */
static void a_member_lease_long_unrenewed_is_not_counted(void **state) {
  struct fixture f;
  char now[40];
  fixture_init(&f);
  kcm_leader_now(now, sizeof(now));
  member_lease(&f, "kcm-member-0000dead", "2020-01-01T00:00:00.000000Z");
  member_lease(&f, "kcm-member-0000beef", now);
  kcm_shards_start(&f.b);
  assert_true(support_run_until(&f.loop, b_listed, &f, 3000));
  assert_int_equal(f.b.live, 2);
  assert_int_equal(f.b.share, SHARDS / 2);
  fixture_close(&f);
}

/* Leases whose names read as a shard's or a member's only loosely are
 * neither: shard 3 stays free beside "kcm-shard-003" and "kcm-shard-3",
 * and members named
 * otherwise than instances name theirs do not shrink the share. */
static void only_exact_lease_names_count(void **state) {
  static const char *const names[] = {"kcm-shard-003", "kcm-shard-3", "kcm-shard-0003",
                                      "kcm-shard-03x", "kcm-member-0000dea", "kcm-member-0000beex",
                                      "kcm-member-0000beef0", "kcm-membership"};
  struct fixture f;
  char now[40];
  size_t i;
  fixture_init(&f);
  kcm_leader_now(now, sizeof(now));
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) /* held for an hour */
    lease(&f, names[i], "squatter", 3600, now);
  kcm_shards_start(&f.a);
  assert_true(support_run_until(&f.loop, a_holds_all, &f, 3000));
  assert_int_equal(f.a.live, 1);
  fixture_close(&f);
}

static int start_sim(void **state) { return support_start_sim(NULL); }
static int stop_sim(void **state) {
  support_stop_sim();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(namespaces_spread_over_equal_hash_ranges),
      cmocka_unit_test(rounds_aim_at_the_share),
      cmocka_unit_test(options_are_checked),
      cmocka_unit_test(instances_share_and_hand_over),
      cmocka_unit_test(a_vanished_instance_s_shards_are_taken_after_expiry),
      cmocka_unit_test(an_outage_loses_the_shards_and_they_come_back),
      cmocka_unit_test(a_member_lease_long_unrenewed_is_not_counted),
      cmocka_unit_test(only_exact_lease_names_count),
  };
  return cmocka_run_group_tests(tests, start_sim, stop_sim);
}
