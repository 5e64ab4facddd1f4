/* intern — pool of shared, reference-counted strings; see include/kcm/intern.h. */
#include "kcm/intern.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct istr {
  uint32_t refs;
  uint32_t len;
  char s[];
};

struct ikey {
  const char *s;
  size_t len;
};

#define HEADER(str) ((struct istr *)(uintptr_t)((str) - offsetof(struct istr, s)))

static uint64_t hash_key(const void *key) {
  const struct ikey *k = key;
  return kcm_map_hash_bytes(KCM_MAP_HASH_INIT, k->s, k->len);
}

static bool match(const void *key, const void *entry) {
  const struct ikey *k = key;
  const struct istr *e = entry;
  return e->len == k->len && memcmp(e->s, k->s, k->len) == 0;
}

static const struct kcm_map_type intern_type = {.hash_key = hash_key, .match = match};

void kcm_intern_init(struct kcm_intern *p) {
  kcm_map_init(&p->map, &intern_type);
  p->bytes = 0;
}

void kcm_intern_release(struct kcm_intern *p) {
  struct kcm_map_iter it;
  struct istr *e;
  kcm_map_iter_init(&it, &p->map);
  while ((e = kcm_map_next(&it)))
    free(e);
  kcm_map_release(&p->map);
  p->bytes = 0;
}

const char *kcm_intern_get(struct kcm_intern *p, const char *s, size_t len) {
  struct ikey k = {s, len};
  struct istr *e;

  if (len > UINT32_MAX)
    return NULL;
  e = kcm_map_get(&p->map, &k);
  if (e) {
    e->refs++;
    return e->s;
  }
  e = malloc(sizeof(*e) + len + 1);
  if (!e)
    return NULL;
  e->refs = 1;
  e->len = (uint32_t)len;
  memcpy(e->s, s, len);
  e->s[len] = '\0';
  k.s = e->s;
  if (kcm_map_put(&p->map, &k, e, NULL) != 0) {
    free(e);
    return NULL;
  }
  p->bytes += sizeof(*e) + len + 1;
  return e->s;
}

const char *kcm_intern_str(struct kcm_intern *p, const char *s) {
  return kcm_intern_get(p, s, strlen(s));
}

const char *kcm_intern_ref(const char *s) {
  if (s)
    HEADER(s)->refs++;
  return s;
}

void kcm_intern_put(struct kcm_intern *p, const char *s) {
  struct istr *e;
  struct ikey k;
  if (!s)
    return;
  e = HEADER(s);
  if (--e->refs)
    return;
  k.s = e->s;
  k.len = e->len;
  kcm_map_remove(&p->map, &k);
  p->bytes -= sizeof(*e) + e->len + 1;
  free(e);
}

size_t kcm_intern_count(const struct kcm_intern *p) { return p->map.len; }
