/* Unit tests for the bounded buffer. */
#include <malloc.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kcm/buf.h"
#include "kcm/error.h"

static void append_and_read_back(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(1024);
  assert_int_equal(kcm_buf_append(&b, "abc", 3), 0);
  assert_int_equal(kcm_buf_append_str(&b, "def"), 0);
  assert_int_equal(kcm_buf_appendf(&b, "-%d-%s", 42, "x"), 0);
  assert_int_equal(b.len, 11);
  assert_string_equal(b.data, "abcdef-42-x");
  kcm_buf_release(&b);
  assert_null(b.data);
  assert_int_equal(b.len, 0);
}

static void limit_is_enforced_and_failure_leaves_buffer_unchanged(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(8);
  assert_int_equal(kcm_buf_append(&b, "12345678", 8), 0);
  assert_int_equal(kcm_buf_append(&b, "9", 1), KCM_ETOOBIG);
  assert_int_equal(kcm_buf_appendf(&b, "%s", "x"), KCM_ETOOBIG);
  assert_int_equal(b.len, 8);
  assert_string_equal(b.data, "12345678");
  kcm_buf_release(&b);
}

static void growth_keeps_content(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 20);
  char expect[5000];
  int i;
  for (i = 0; i < 5000; i++) {
    char c = (char)('a' + i % 26);
    expect[i] = c;
    assert_int_equal(kcm_buf_append(&b, &c, 1), 0);
  }
  assert_int_equal(b.len, 5000);
  assert_memory_equal(b.data, expect, 5000);
  assert_int_equal(b.data[5000], '\0');
  kcm_buf_release(&b);
}

static void take_transfers_ownership(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(64);
  char *s;
  s = kcm_buf_take(&b);
  assert_string_equal(s, "");
  free(s);
  kcm_buf_append_str(&b, "owned");
  s = kcm_buf_take(&b);
  assert_string_equal(s, "owned");
  assert_null(b.data);
  assert_int_equal(b.len, 0);
  free(s);
}

/* Items keep their values across growth, growth happens only at the implied
 * capacities, and an impossible size fails without touching the array. */
static void item_arrays_grow_by_doubling(void **state) {
  uint32_t *items = NULL, *grown;
  size_t n, cap;
  (void)state;
  for (n = 0; n < 1000; n++) {
    bool at_capacity = n == 0 || (n >= 4 && !(n & (n - 1)));
    grown = kcm_buf_grow_items(items, n, sizeof(*items));
    assert_non_null(grown);
    if (!at_capacity)
      assert_ptr_equal(grown, items); /* room left: the same array */
    for (cap = 4; cap < n + 1; cap *= 2)
      ;
    assert_true(malloc_usable_size(grown) >= cap * sizeof(*items));
    items = grown;
    items[n] = (uint32_t)n * 7;
  }
  for (n = 0; n < 1000; n++)
    assert_int_equal(items[n], n * 7);
  assert_null(kcm_buf_grow_items(items, 1024, SIZE_MAX / 16));
  assert_int_equal(items[999], 999 * 7);
  free(items);
}

/* Taken content keeps no room for appends: a string kept long holds its
 * size, not the buffer's capacity. */
static void take_cuts_to_size(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 20);
  char big[3000];
  char *s;
  memset(big, 'x', sizeof(big));
  assert_int_equal(kcm_buf_append(&b, big, sizeof(big)), 0);
  kcm_buf_reset(&b);
  assert_int_equal(kcm_buf_append_str(&b, "short"), 0);
  assert_true(b.cap >= sizeof(big));
  s = kcm_buf_take(&b);
  assert_string_equal(s, "short");
  assert_true(malloc_usable_size(s) < 64);
  assert_null(b.data);
  free(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(take_cuts_to_size),
      cmocka_unit_test(append_and_read_back),
      cmocka_unit_test(limit_is_enforced_and_failure_leaves_buffer_unchanged),
      cmocka_unit_test(growth_keeps_content),
      cmocka_unit_test(take_transfers_ownership),
      cmocka_unit_test(item_arrays_grow_by_doubling),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
