/* Unit tests for the open-addressing hash map. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/map.h"

struct item {
  char key[16];
  int value;
};

static uint64_t hash_str(const void *key) {
  return kcm_map_hash_bytes(KCM_MAP_HASH_INIT, key, strlen(key));
}
static uint64_t hash_const(const void *key) { return 42; } /* every key collides */
static bool match(const void *key, const void *entry) {
  return strcmp(key, ((const struct item *)entry)->key) == 0;
}

static const struct kcm_map_type good = {.hash_key = hash_str, .match = match};
static const struct kcm_map_type colliding = {.hash_key = hash_const, .match = match};

static void exercise(const struct kcm_map_type *type, int n) {
  struct kcm_map m;
  struct item *items = calloc((size_t)n, sizeof(*items));
  struct kcm_map_iter it;
  void *old, *e;
  int i, seen = 0;

  kcm_map_init(&m, type);
  assert_null(kcm_map_get(&m, "missing"));
  for (i = 0; i < n; i++) {
    snprintf(items[i].key, sizeof(items[i].key), "k%d", i);
    items[i].value = i;
    assert_int_equal(kcm_map_put(&m, items[i].key, &items[i], &old), 0);
    assert_null(old);
  }
  assert_int_equal(m.len, n);
  for (i = 0; i < n; i++) {
    struct item *got = kcm_map_get(&m, items[i].key);
    assert_non_null(got);
    assert_int_equal(got->value, i);
  }
  /* Remove every other entry; the rest must stay reachable. */
  for (i = 0; i < n; i += 2)
    assert_ptr_equal(kcm_map_remove(&m, items[i].key), &items[i]);
  assert_null(kcm_map_remove(&m, items[0].key));
  assert_int_equal(m.len, n / 2);
  for (i = 0; i < n; i++) {
    if (i % 2)
      assert_ptr_equal(kcm_map_get(&m, items[i].key), &items[i]);
    else
      assert_null(kcm_map_get(&m, items[i].key));
  }
  kcm_map_iter_init(&it, &m);
  while ((e = kcm_map_next(&it))) {
    assert_int_equal(((struct item *)e)->value % 2, 1);
    seen++;
  }
  assert_int_equal(seen, n / 2);
  /* Replacing returns the previous entry. */
  {
    struct item twin = items[1];
    assert_int_equal(kcm_map_put(&m, twin.key, &twin, &old), 0);
    assert_ptr_equal(old, &items[1]);
    assert_ptr_equal(kcm_map_get(&m, "k1"), &twin);
    kcm_map_remove(&m, "k1");
  }
  kcm_map_release(&m);
  free(items);
}

static void many_entries(void **state) { exercise(&good, 20000); }
static void all_colliding(void **state) { exercise(&colliding, 300); }

/* String keys kept inline (struct item's char array) need no functions. */
static const struct kcm_map_type inline_keys = KCM_MAP_STRING_KEYED(struct item, key);
static void string_keys_inline(void **state) { exercise(&inline_keys, 5000); }

/* Kept as a pointer, and entries that are the key itself. */
struct named {
  int value;
  char *name;
};
static void string_keys_pointed_to_and_bare(void **state) {
  static const struct kcm_map_type pointed = KCM_MAP_STRING_KEYED(struct named, name);
  static const struct kcm_map_type bare = KCM_MAP_STRINGS;
  struct named a = {1, (char[]){"ns/a"}}, b = {2, (char[]){"ns/b"}};
  char key[] = "ns/b", other[] = "ns/a";
  struct kcm_map m;
  kcm_map_init(&m, &pointed);
  assert_int_equal(kcm_map_put(&m, a.name, &a, NULL), 0);
  assert_int_equal(kcm_map_put(&m, b.name, &b, NULL), 0);
  assert_ptr_equal(kcm_map_get(&m, key), &b); /* another copy of the text finds it */
  assert_null(kcm_map_get(&m, "ns/c"));
  assert_ptr_equal(kcm_map_remove(&m, "ns/a"), &a);
  assert_null(kcm_map_get(&m, "ns/a"));
  kcm_map_release(&m);
  kcm_map_init(&m, &bare);
  assert_int_equal(kcm_map_put(&m, key, key, NULL), 0);
  assert_int_equal(kcm_map_put(&m, other, other, NULL), 0);
  assert_ptr_equal(kcm_map_get(&m, "ns/b"), key);
  assert_ptr_equal(kcm_map_get(&m, "ns/a"), other);
  assert_null(kcm_map_get(&m, "ns"));
  kcm_map_release(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(many_entries),
      cmocka_unit_test(all_colliding),
      cmocka_unit_test(string_keys_inline),
      cmocka_unit_test(string_keys_pointed_to_and_bare),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
