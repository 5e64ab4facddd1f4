/* Unit tests for the string pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "kcm/intern.h"

static void equal_strings_share_one_copy(void **state) {
  struct kcm_intern p;
  char buf[] = "default";
  const char *a, *b, *c;
  kcm_intern_init(&p);
  a = kcm_intern_str(&p, "default");
  b = kcm_intern_get(&p, buf, strlen(buf));
  c = kcm_intern_get(&p, "default-x", 7); /* a prefix, by length */
  assert_ptr_equal(a, b);
  assert_ptr_equal(a, c);
  assert_string_equal(a, "default");
  assert_int_equal(kcm_intern_count(&p), 1);
  assert_ptr_not_equal(kcm_intern_str(&p, "kube-system"), a);
  assert_int_equal(kcm_intern_count(&p), 2);
  kcm_intern_release(&p);
}

static void last_reference_frees(void **state) {
  struct kcm_intern p;
  const char *a;
  size_t empty;
  kcm_intern_init(&p);
  empty = p.bytes;
  a = kcm_intern_str(&p, "node-1");
  kcm_intern_ref(a);
  kcm_intern_put(&p, a);
  assert_int_equal(kcm_intern_count(&p), 1);
  kcm_intern_put(&p, a);
  assert_int_equal(kcm_intern_count(&p), 0);
  assert_int_equal(p.bytes, empty);
  kcm_intern_put(&p, NULL);
  kcm_intern_release(&p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(equal_strings_share_one_copy),
      cmocka_unit_test(last_reference_frees),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
