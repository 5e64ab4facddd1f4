/* Unit tests for the string pool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
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

/* --- flooding --------------------------------------------------------------------------------- */

#define FNV_PRIME 0x100000001b3ULL
#define FNV_INIT 0xcbf29ce484222325ULL
#define FLOOD_KEYS 20000
#define LOW_MASK 0xffffu /* more bits than a table of FLOOD_KEYS entries picks slots with */

static const char ALNUM[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/* FNV-1a, the unkeyed hash a tenant can compute. */
static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = FNV_INIT;
  while (n--) {
    h ^= (unsigned char)*s++;
    h *= FNV_PRIME;
  }
  return h;
}

/* The low bits of FNV-1a's state depend only on the low bits before, so
 * keys with equal low bits are built by a walk back from a target: tail[x]
 * names the two characters that take state x (low 16 bits) to the target. */
static void fill_tails(uint16_t *tail, uint64_t target) {
  uint64_t inv = FNV_PRIME, before_last;
  int i, a, b;
  for (i = 0; i < 5; i++)
    inv *= 2 - FNV_PRIME * inv; /* Newton's step: inverse modulo 2^64 */
  before_last = target * inv;
  memset(tail, 0, (LOW_MASK + 1) * sizeof(*tail));
  for (b = 0; ALNUM[b]; b++)
    for (a = 0; ALNUM[a]; a++) {
      uint64_t x = ((before_last ^ (unsigned char)ALNUM[b]) * inv) ^ (unsigned char)ALNUM[a];
      tail[x & LOW_MASK] = (uint16_t)((unsigned char)ALNUM[a] << 8 | (unsigned char)ALNUM[b]);
    }
}

/* FLOOD_KEYS distinct label values of 8 alphanumerics whose FNV-1a hashes
 * share their low 16 bits. */
static char (*colliding_keys(void))[9] {
  char(*keys)[9] = calloc(FLOOD_KEYS, sizeof(*keys));
  uint16_t *tail = malloc((LOW_MASK + 1) * sizeof(*tail));
  size_t i, j;
  assert_non_null(keys);
  assert_non_null(tail);
  fill_tails(tail, 0x4b1d);
  for (i = 0; i < FLOOD_KEYS; i++) {
    char *k = keys[i];
    k[0] = 'k';
    k[1] = ALNUM[i / 62 / 62 % 62];
    k[2] = ALNUM[i / 62 % 62];
    k[3] = ALNUM[i % 62];
    for (j = 0; j < 62 * 62; j++) {
      uint16_t t;
      k[4] = ALNUM[j / 62];
      k[5] = ALNUM[j % 62];
      if ((t = tail[fnv1a(k, 6) & LOW_MASK])) {
        k[6] = (char)(t >> 8);
        k[7] = (char)(t & 0xff);
        break;
      }
    }
    assert_true(j < 62 * 62);
    assert_int_equal(fnv1a(k, 8) & LOW_MASK, 0x4b1d);
  }
  free(tail);
  return keys;
}

/* Slots a lookup of every entry visits, each from its home slot. */
static uint64_t probes(const struct kcm_map *m) {
  uint64_t n = 0;
  size_t i, mask = m->cap - 1;
  for (i = 0; i < m->cap; i++)
    if (m->slots[i])
      n += ((i - (size_t)m->hashes[i]) & mask) + 1;
  return n;
}

/* Keys built to collide under an unkeyed hash spread like any others: a
 * lookup visits a few slots, not a run of every colliding key. */
static void colliding_keys_spread(void **state) {
  char(*keys)[9] = colliding_keys();
  struct kcm_intern p;
  uint64_t visited;
  size_t i;
  kcm_intern_init(&p);
  for (i = 0; i < FLOOD_KEYS; i++)
    assert_non_null(kcm_intern_str(&p, keys[i]));
  assert_int_equal(kcm_intern_count(&p), FLOOD_KEYS);
  visited = probes(&p.map);
  print_message("%d colliding keys: %llu slots visited to find each once\n", FLOOD_KEYS,
                (unsigned long long)visited);
  /* Linear probing at most 3/4 full visits 2.5 slots per entry on average. */
  assert_true(visited <= 4 * FLOOD_KEYS);
  for (i = 0; i < FLOOD_KEYS; i++)
    kcm_intern_put(&p, kcm_intern_str(&p, keys[i]));
  kcm_intern_release(&p);
  free(keys);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(equal_strings_share_one_copy),
      cmocka_unit_test(last_reference_frees),
      cmocka_unit_test(colliding_keys_spread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
