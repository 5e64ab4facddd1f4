/*
 * Tests for a controller's service-account token: when it is renewed. Its
 * requests against an API server are exercised by the e2e scenario that
 * starts kcm with kubeadm's arguments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/satoken.h"

static void refresh_after_four_fifths(void **state) {
  assert_int_equal(kcm_satoken_refresh_ms(3600), 2880000);
  assert_int_equal(kcm_satoken_refresh_ms(10), 8000);
  assert_int_equal(kcm_satoken_refresh_ms(1), 1000); /* never sooner than a second */
  assert_int_equal(kcm_satoken_refresh_ms(-5), 1000);
}

int main(void) {
  const struct CMUnitTest pure[] = {cmocka_unit_test(refresh_after_four_fifths)};
  return cmocka_run_group_tests(pure, NULL, NULL);
}
