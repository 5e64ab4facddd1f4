/* Unit tests for backing off pods that keep failing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "kcm/crashloop.h"

/* A failure of ns/a at now starts wave `wave`, which waits `delay`. */
static void expect_wave(struct kcm_crashloop *b, uint64_t now, uint32_t wave, uint64_t delay) {
  uint32_t got_wave = 0;
  uint64_t got_delay = 99;
  assert_true(kcm_crashloop_failed(b, "ns/a", now, &got_wave, &got_delay));
  assert_int_equal(got_wave, wave);
  assert_int_equal(got_delay, delay);
}

static void the_first_wave_waits_for_nothing(void **state) {
  struct kcm_crashloop b;
  uint32_t wave = 0;
  uint64_t delay = 99;
  (void)state;
  kcm_crashloop_init(&b, 1000, 300000, 1000);
  assert_int_equal(kcm_crashloop_wait(&b, "ns/a", 5000), 0);
  assert_true(kcm_crashloop_failed(&b, "ns/a", 5000, &wave, &delay));
  assert_int_equal(wave, 1);
  assert_int_equal(delay, 0);
  assert_int_equal(kcm_crashloop_wait(&b, "ns/a", 5000), 0);
  kcm_crashloop_release(&b);
}

static void later_waves_double_the_wait_up_to_the_cap(void **state) {
  struct kcm_crashloop b;
  uint32_t wave;
  uint64_t delay, now = 10000, want[] = {0, 1000, 2000, 4000, 8000, 16000, 20000, 20000};
  size_t i;
  (void)state;
  kcm_crashloop_init(&b, 1000, 20000, 1000);
  for (i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    assert_true(kcm_crashloop_failed(&b, "ns/a", now, &wave, &delay));
    assert_int_equal(wave, i + 1);
    assert_int_equal(delay, want[i]);
    assert_int_equal(kcm_crashloop_wait(&b, "ns/a", now), want[i]);
    if (want[i]) {
      assert_int_equal(kcm_crashloop_wait(&b, "ns/a", now + want[i] - 1), 1);
      assert_int_equal(kcm_crashloop_wait(&b, "ns/a", now + want[i]), 0);
    }
    /* The replacements are created when the wait ends and fail a second later. */
    now += want[i] + 1000;
  }
  /* Another key is not held back. */
  assert_int_equal(kcm_crashloop_wait(&b, "ns/b", now), 0);
  kcm_crashloop_release(&b);
}

static void failures_within_a_wave_count_once(void **state) {
  struct kcm_crashloop b;
  uint32_t wave;
  uint64_t delay;
  (void)state;
  kcm_crashloop_init(&b, 1000, 300000, 1000);
  /* Ten pods of one batch fail within half a second: one wave. */
  expect_wave(&b, 1000, 1, 0);
  for (int i = 1; i < 10; i++)
    assert_false(kcm_crashloop_failed(&b, "ns/a", 1000 + (uint64_t)i * 50, &wave, &delay));
  /* Their replacements fail later: the second wave, 1 s. A wave's window
   * is 1 s at least, else as long as its wait. */
  expect_wave(&b, 2100, 2, 1000);
  assert_false(kcm_crashloop_failed(&b, "ns/a", 3000, &wave, &delay));
  expect_wave(&b, 4200, 3, 2000);
  assert_false(kcm_crashloop_failed(&b, "ns/a", 6100, &wave, &delay));
  kcm_crashloop_release(&b);
}

static void a_ready_pod_ends_the_backoff(void **state) {
  struct kcm_crashloop b;
  (void)state;
  kcm_crashloop_init(&b, 1000, 300000, 1000);
  expect_wave(&b, 1000, 1, 0);
  expect_wave(&b, 3000, 2, 1000);
  assert_int_equal(kcm_crashloop_wait(&b, "ns/a", 3500), 500);
  kcm_crashloop_forget(&b, "ns/a");
  assert_int_equal(kcm_crashloop_wait(&b, "ns/a", 3500), 0);
  /* The next failure starts over: a first wave, no wait. */
  expect_wave(&b, 3600, 1, 0);
  kcm_crashloop_forget(&b, "ns/unknown"); /* nothing to forget: no harm */
  kcm_crashloop_release(&b);
}

static void max_zero_turns_it_off(void **state) {
  struct kcm_crashloop b;
  uint32_t wave;
  uint64_t delay;
  int i;
  (void)state;
  kcm_crashloop_init(&b, 1000, 0, 1000);
  for (i = 0; i < 5; i++) {
    assert_false(kcm_crashloop_failed(&b, "ns/a", 1000 + (uint64_t)i * 5000, &wave, &delay));
    assert_int_equal(kcm_crashloop_wait(&b, "ns/a", 1000 + (uint64_t)i * 5000), 0);
  }
  kcm_crashloop_release(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_first_wave_waits_for_nothing),
      cmocka_unit_test(later_waves_double_the_wait_up_to_the_cap),
      cmocka_unit_test(failures_within_a_wave_count_once),
      cmocka_unit_test(a_ready_pod_ends_the_backoff),
      cmocka_unit_test(max_zero_turns_it_off),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
