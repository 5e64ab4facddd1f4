/* Unit tests for the per-key write pacer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kcm/pacer.h"
#include "../../src/pacer/internal.h"

static void a_first_write_goes_at_once(void **state) {
  struct kcm_pacer p;
  (void)state;
  kcm_pacer_init(&p, 100, 0);
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 5000), 0);
  kcm_pacer_release(&p);
}

static void a_close_second_write_waits_for_the_rest_of_the_interval(void **state) {
  struct kcm_pacer p;
  (void)state;
  kcm_pacer_init(&p, 100, 0);
  assert_int_equal(kcm_pacer_wrote(&p, "ns/a", 5000), 0);
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 5000), 100);
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 5030), 70);
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 5099), 1);
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 5100), 0);
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 9000), 0);
  /* A clock seen going back holds a write for one interval at most. */
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 4000), 100);
  /* Another key is not held back by this one's write. */
  assert_int_equal(kcm_pacer_wait(&p, "ns/b", 5030), 0);
  /* A later write restarts the interval. */
  assert_int_equal(kcm_pacer_wrote(&p, "ns/a", 5200), 0);
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 5250), 50);
  kcm_pacer_release(&p);
}

static void interval_zero_lets_every_write_through(void **state) {
  struct kcm_pacer p;
  (void)state;
  kcm_pacer_init(&p, 0, 0);
  assert_int_equal(kcm_pacer_wrote(&p, "ns/a", 5000), 0);
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 5000), 0);
  assert_int_equal(p.last.len, 0);
  kcm_pacer_release(&p);
}

/* A hold waits one interval from the first call with its tag, whatever
 * came before; a new tag starts again, and a write ends it. */
static void a_hold_waits_an_interval_from_its_first_call(void **state) {
  struct kcm_pacer p;
  (void)state;
  kcm_pacer_init(&p, 100, 0);
  assert_int_equal(kcm_pacer_hold(&p, "ns/a", 2, 5000), 100);
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 5000), 0); /* a hold is no write */
  assert_int_equal(kcm_pacer_hold(&p, "ns/a", 2, 5040), 60);
  assert_int_equal(kcm_pacer_hold(&p, "ns/a", 2, 5100), 0);
  assert_int_equal(kcm_pacer_hold(&p, "ns/a", 2, 9000), 0); /* held once only */
  assert_int_equal(kcm_pacer_hold(&p, "ns/a", 3, 9000), 100);
  assert_int_equal(kcm_pacer_hold(&p, "ns/b", 3, 9050), 100); /* keys apart */
  assert_int_equal(kcm_pacer_wrote(&p, "ns/a", 9050), 0);
  assert_int_equal(kcm_pacer_hold(&p, "ns/a", 3, 9060), 100); /* the write ended it */
  assert_int_equal(kcm_pacer_hold(&p, "ns/a", 3, 8000), 100); /* a clock gone back */
  kcm_pacer_release(&p);
  kcm_pacer_init(&p, 0, 0);
  assert_int_equal(kcm_pacer_hold(&p, "ns/a", 2, 5000), 0);
  assert_int_equal(p.last.len, 0);
  kcm_pacer_release(&p);
}

/* A pending hold is kept while stale keys are forgotten around it, so its
 * write is not held a second time; one never written is forgotten at last. */
static void a_pending_hold_outlives_pruning(void **state) {
  struct kcm_pacer p;
  char key[32];
  int i;
  (void)state;
  kcm_pacer_init(&p, 100, 0);
  assert_int_equal(kcm_pacer_hold(&p, "ns/held", 7, 1000), 100);
  for (i = 0; i < 1000; i++) {
    snprintf(key, sizeof(key), "ns/k-%d", i);
    assert_int_equal(kcm_pacer_wrote(&p, key, 2000), 0);
  }
  assert_int_equal(kcm_pacer_hold(&p, "ns/held", 7, 2000), 0);
  for (i = 0; i < 1000; i++) {
    snprintf(key, sizeof(key), "ns/j-%d", i);
    assert_int_equal(kcm_pacer_wrote(&p, key, 100000), 0);
  }
  assert_true(p.last.len < 1100);
  assert_int_equal(kcm_pacer_hold(&p, "ns/held", 7, 100000), 100);
  kcm_pacer_release(&p);
}

/* Keys ns/<prefix>-<from> to ns/<prefix>-<to - 1>, each written at now. */
static void wrote_keys(struct kcm_pacer *p, const char *prefix, int from, int to, uint64_t now) {
  char key[32];
  int i;
  for (i = from; i < to; i++) {
    snprintf(key, sizeof(key), "ns/%s-%d", prefix, i);
    assert_int_equal(kcm_pacer_wrote(p, key, now), 0);
  }
}

/* Keys whose interval has passed are forgotten, so the pacer does not grow
 * with every object ever written; keys still inside it are kept. */
static void stale_keys_are_forgotten(void **state) {
  struct kcm_pacer p;
  char key[32];
  int i;
  (void)state;
  kcm_pacer_init(&p, 100, 0);
  wrote_keys(&p, "old", 0, 1000, 1000);
  for (i = 0; i < 1000; i++) {
    snprintf(key, sizeof(key), "ns/new-%d", i);
    assert_int_equal(kcm_pacer_wrote(&p, key, 2000 + (uint64_t)i / 100), 0);
  }
  assert_true(p.last.len < 1100);
  for (i = 0; i < 1000; i++) {
    snprintf(key, sizeof(key), "ns/new-%d", i);
    assert_int_not_equal(kcm_pacer_wait(&p, key, 2010), 0);
  }
  kcm_pacer_release(&p);
}

/* With per_second, the interval stretches to n / per_second seconds for n
 * keys written within it, up to ten intervals, and shrinks back as the keys
 * go quiet. */
static void the_interval_stretches_with_the_keys_written(void **state) {
  struct kcm_pacer p;
  (void)state;
  kcm_pacer_init(&p, 100, 10);
  assert_int_equal(kcm_pacer_wrote(&p, "ns/a", 1000), 0);
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 1000), 100); /* one key: the interval */
  wrote_keys(&p, "k", 0, 4, 1000);
  assert_int_equal(kcm_pacer_interval(&p), 500); /* five keys at 10 a second */
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 1100), 400);
  wrote_keys(&p, "k", 4, 40, 1000);
  assert_int_equal(kcm_pacer_interval(&p), 1000); /* 41 keys: capped at ten intervals */
  assert_int_equal(kcm_pacer_wait(&p, "ns/a", 1900), 100);
  /* Quiet for longer than the stretched interval: forgotten, back to 100. */
  assert_int_equal(kcm_pacer_wrote(&p, "ns/b", 2100), 0);
  assert_int_equal(kcm_pacer_interval(&p), 100);
  assert_int_equal(kcm_pacer_wait(&p, "ns/b", 2150), 50);
  kcm_pacer_release(&p);
}

static void the_interval_is_exported(void **state) {
  struct kcm_pacer a, b;
  const struct kcm_pacer *all[] = {&a, &b};
  const char *owners[] = {"deployment", "replicaset"}, *kinds[] = {"sync", "status"};
  struct kcm_buf out = KCM_BUF_INIT(1 << 16);
  (void)state;
  kcm_pacer_init(&a, 1000, 50);
  kcm_pacer_init(&b, 250, 0);
  wrote_keys(&a, "d", 0, 100, 1000);
  assert_int_equal(kcm_pacer_metrics(all, owners, kinds, 2, &out), 0);
  assert_non_null(strstr(out.data, "# TYPE kcm_pacer_interval_seconds gauge\n"));
  assert_non_null(strstr(out.data, "kcm_pacer_interval_seconds{controller=\"deployment\","
                                   "pacer=\"sync\"} 2\n"));
  assert_non_null(strstr(out.data, "kcm_pacer_interval_seconds{controller=\"replicaset\","
                                   "pacer=\"status\"} 0.25\n"));
  kcm_buf_release(&out);
  kcm_pacer_release(&a);
  kcm_pacer_release(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_first_write_goes_at_once),
      cmocka_unit_test(a_close_second_write_waits_for_the_rest_of_the_interval),
      cmocka_unit_test(interval_zero_lets_every_write_through),
      cmocka_unit_test(a_hold_waits_an_interval_from_its_first_call),
      cmocka_unit_test(a_pending_hold_outlives_pruning),
      cmocka_unit_test(stale_keys_are_forgotten),
      cmocka_unit_test(the_interval_stretches_with_the_keys_written),
      cmocka_unit_test(the_interval_is_exported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
