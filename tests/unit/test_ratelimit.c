/* Unit tests for token buckets and exponential backoff. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kcm/ratelimit.h"

static void burst_then_rate(void **state) {
  struct kcm_ratelimit rl;
  int i;
  kcm_ratelimit_init(&rl, 20, 30, 1000);
  for (i = 0; i < 30; i++)
    assert_int_equal(kcm_ratelimit_reserve(&rl, 1000), 0);
  /* Tokens now come every 50 ms, and reservations queue behind each other. */
  assert_int_equal(kcm_ratelimit_reserve(&rl, 1000), 50);
  assert_int_equal(kcm_ratelimit_reserve(&rl, 1000), 100);
  assert_int_equal(kcm_ratelimit_reserve(&rl, 1100), 50);
  /* A long pause refills to the burst, not beyond. */
  for (i = 0; i < 30; i++)
    assert_int_equal(kcm_ratelimit_reserve(&rl, 100000), 0);
  assert_true(kcm_ratelimit_reserve(&rl, 100000) > 0);
}

static void unlimited(void **state) {
  struct kcm_ratelimit rl;
  int i;
  kcm_ratelimit_init(&rl, 0, 1, 0);
  for (i = 0; i < 1000; i++)
    assert_int_equal(kcm_ratelimit_reserve(&rl, 0), 0);
}

static void exponential_backoff(void **state) {
  assert_int_equal(kcm_ratelimit_backoff(5, 1000000, 0), 5);
  assert_int_equal(kcm_ratelimit_backoff(5, 1000000, 1), 10);
  assert_int_equal(kcm_ratelimit_backoff(5, 1000000, 10), 5120);
  assert_int_equal(kcm_ratelimit_backoff(5, 1000000, 30), 1000000);
  assert_int_equal(kcm_ratelimit_backoff(5, 1000000, 4000000000u), 1000000);
  assert_int_equal(kcm_ratelimit_backoff(800, 30000, 5), 25600);
  assert_int_equal(kcm_ratelimit_backoff(800, 30000, 6), 30000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(burst_then_rate),
      cmocka_unit_test(unlimited),
      cmocka_unit_test(exponential_backoff),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
