/*
 * map — an open-addressing hash table of entry pointers.
 *
 * The table stores pointers to caller-owned entries and never copies or
 * frees them. How entries are found is set once by a struct kcm_map_type:
 * the hash of a lookup key and whether a key matches an entry, so an entry
 * can serve as its own key (an object found by namespace and name, say)
 * without a separate key string. Hashes are kept beside the entries.
 *
 * Linear probing with backward-shift deletion; the table doubles when 3/4
 * full and shrinks when 1/8 full. Iteration order is unspecified and an
 * insert or remove during iteration invalidates the iterator.
 */
#ifndef KCM_MAP_H
#define KCM_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kcm_map_type {
  uint64_t (*hash_key)(const void *key);
  bool (*match)(const void *key, const void *entry);
  /* Without hash_key and match, keys are C strings, and each entry holds
   * its own at key_at: a `char *` member, or (key_inline) a char array. */
  size_t key_at;
  bool key_inline;
};

/* The type of entries found by a C string they hold, the member `member`
 * of `type` (a `char *` or a char array), as a string is found in them
 * all: its bytes hashed, compared with strcmp(). */
#define KCM_MAP_STRING_KEYED(type, member)                                                    \
  {NULL, NULL, offsetof(type, member),                                                        \
   _Generic(&((type *)0)->member, char **: false, const char **: false, char *const *: false, \
            const char *const *: false, default: true)}
/* Entries that are themselves the C string they are found by. */
#define KCM_MAP_STRINGS {NULL, NULL, 0, true}

struct kcm_map {
  const struct kcm_map_type *type;
  void **slots;
  uint64_t *hashes;
  size_t cap; /* a power of two, or 0 before the first insert */
  size_t len;
};

void kcm_map_init(struct kcm_map *m, const struct kcm_map_type *type);
/* Free the table (not the entries). */
void kcm_map_release(struct kcm_map *m);

void *kcm_map_get(const struct kcm_map *m, const void *key);
/* Insert or replace the entry matching `key`. *old (may be NULL) receives a
 * replaced entry. Returns 0 or KCM_ENOMEM (the map is unchanged then). */
int kcm_map_put(struct kcm_map *m, const void *key, void *entry, void **old);
/* Remove and return the entry matching `key`, or NULL. */
void *kcm_map_remove(struct kcm_map *m, const void *key);

struct kcm_map_iter {
  const struct kcm_map *m;
  size_t i;
};
void kcm_map_iter_init(struct kcm_map_iter *it, const struct kcm_map *m);
/* The next entry, or NULL at the end. */
void *kcm_map_next(struct kcm_map_iter *it);

/* For building hash functions: the hash of p[0..n) continuing from h
 * (KCM_MAP_HASH_INIT to start). Keyed (SipHash-1-3 under a key drawn from
 * getrandom() when the process starts), so keys chosen by whoever writes
 * labels or names cannot be made to share slots; values differ from one
 * process to the next and are never to be kept or sent. */
uint64_t kcm_map_hash_bytes(uint64_t h, const void *p, size_t n);
#define KCM_MAP_HASH_INIT 0

#endif
