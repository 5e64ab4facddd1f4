/*
 * intern — a pool of shared, reference-counted strings.
 *
 * Namespaces, node names, label keys and values repeat across thousands of
 * cached objects; the pool keeps one copy of each. kcm_intern_get() returns
 * a pointer that stays valid until the matching kcm_intern_put(); two equal
 * strings from one pool are the same pointer, so they compare with ==.
 * A pool is used from one thread (the loop).
 */
#ifndef KCM_INTERN_H
#define KCM_INTERN_H

#include <stddef.h>

#include "kcm/map.h"

struct kcm_intern {
  struct kcm_map map;
  size_t bytes; /* memory held by the strings, headers included */
};

void kcm_intern_init(struct kcm_intern *p);
/* Free the pool. Strings still referenced must not be used afterwards. */
void kcm_intern_release(struct kcm_intern *p);

/* Take a reference to the pooled copy of s[0..len). NULL when out of memory. */
const char *kcm_intern_get(struct kcm_intern *p, const char *s, size_t len);
const char *kcm_intern_str(struct kcm_intern *p, const char *s);
/* Take one more reference to a pooled string (s may be NULL). */
const char *kcm_intern_ref(const char *s);
/* Drop a reference (s may be NULL); the copy is freed with the last one. */
void kcm_intern_put(struct kcm_intern *p, const char *s);

/* Strings pooled (an observer for the tests and benchmarks). */
size_t kcm_intern_count(const struct kcm_intern *p);

#endif
