/* Unit tests for controller expectations. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "kcm/expectations.h"

#define TTL (5 * 60 * 1000)

static void no_record_is_satisfied(void **state) {
  struct kcm_expectations e;
  kcm_expectations_init(&e, TTL);
  assert_true(kcm_expectations_satisfied(&e, "ns/rs", 0));
  kcm_expectations_creation_observed(&e, "ns/rs"); /* no record: nothing happens */
  assert_true(kcm_expectations_satisfied(&e, "ns/rs", 0));
  kcm_expectations_release(&e);
}

static void creations_until_observed(void **state) {
  struct kcm_expectations e;
  int64_t add, del;
  int i;
  kcm_expectations_init(&e, TTL);
  kcm_expectations_expect_creations(&e, "ns/rs", 3, 1000);
  for (i = 0; i < 3; i++) {
    assert_false(kcm_expectations_satisfied(&e, "ns/rs", 1000 + i));
    kcm_expectations_creation_observed(&e, "ns/rs");
  }
  assert_true(kcm_expectations_satisfied(&e, "ns/rs", 2000));
  kcm_expectations_creation_observed(&e, "ns/rs"); /* may go negative */
  assert_true(kcm_expectations_get(&e, "ns/rs", &add, &del));
  assert_int_equal(add, -1);
  /* A new expectation replaces the old record rather than adding to it. */
  kcm_expectations_expect_creations(&e, "ns/rs", 2, 3000);
  assert_true(kcm_expectations_get(&e, "ns/rs", &add, &del));
  assert_int_equal(add, 2);
  kcm_expectations_release(&e);
}

static void deletions_count_each_pod_once(void **state) {
  struct kcm_expectations e;
  const char *pods[] = {"ns/a", "ns/b"};
  int64_t add, del;
  kcm_expectations_init(&e, TTL);
  kcm_expectations_expect_deletions(&e, "ns/rs", pods, 2, 0);
  kcm_expectations_deletion_observed(&e, "ns/rs", "ns/a"); /* seen terminating */
  kcm_expectations_deletion_observed(&e, "ns/rs", "ns/a"); /* then gone: no double count */
  kcm_expectations_deletion_observed(&e, "ns/rs", "ns/other");
  assert_true(kcm_expectations_get(&e, "ns/rs", &add, &del));
  assert_int_equal(del, 1);
  assert_false(kcm_expectations_satisfied(&e, "ns/rs", 10));
  kcm_expectations_deletion_observed(&e, "ns/rs", "ns/b");
  assert_true(kcm_expectations_satisfied(&e, "ns/rs", 10));
  kcm_expectations_release(&e);
}

static void expired_records_are_satisfied(void **state) {
  struct kcm_expectations e;
  kcm_expectations_init(&e, TTL);
  kcm_expectations_expect_creations(&e, "ns/rs", 5, 1000);
  assert_false(kcm_expectations_satisfied(&e, "ns/rs", 1000 + TTL));
  assert_true(kcm_expectations_satisfied(&e, "ns/rs", 1001 + TTL));
  kcm_expectations_delete(&e, "ns/rs");
  assert_true(kcm_expectations_satisfied(&e, "ns/rs", 0));
  kcm_expectations_release(&e);
}

/* A writer that sends nothing (--shadow): nothing asked for is waited for. */
static void no_ttl_waits_for_nothing(void **state) {
  struct kcm_expectations e;
  kcm_expectations_init(&e, 0);
  kcm_expectations_expect_creations(&e, "ns/rs", 5, 1000);
  assert_true(kcm_expectations_satisfied(&e, "ns/rs", 1000));
  kcm_expectations_release(&e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(no_record_is_satisfied),
      cmocka_unit_test(creations_until_observed),
      cmocka_unit_test(deletions_count_each_pod_once),
      cmocka_unit_test(expired_records_are_satisfied),
      cmocka_unit_test(no_ttl_waits_for_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
