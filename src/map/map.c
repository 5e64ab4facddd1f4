/* map — open-addressing hash table of entry pointers; see include/kcm/map.h. */
#include "kcm/map.h"

#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"

uint64_t kcm_map_hash_bytes(uint64_t h, const void *p, size_t n) {
  const unsigned char *s = p;
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= s[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

void kcm_map_init(struct kcm_map *m, const struct kcm_map_type *type) {
  memset(m, 0, sizeof(*m));
  m->type = type;
}

void kcm_map_release(struct kcm_map *m) {
  free(m->slots);
  free(m->hashes);
  m->slots = NULL;
  m->hashes = NULL;
  m->cap = m->len = 0;
}

/* Slot holding the entry for key (hash h), or the empty slot it would take. */
static size_t find(const struct kcm_map *m, const void *key, uint64_t h) {
  size_t mask = m->cap - 1, i = (size_t)h & mask;
  while (m->slots[i]) {
    if (m->hashes[i] == h && m->type->match(key, m->slots[i]))
      return i;
    i = (i + 1) & mask;
  }
  return i;
}

static int resize(struct kcm_map *m, size_t cap) {
  void **slots = calloc(cap, sizeof(*slots));
  uint64_t *hashes = calloc(cap, sizeof(*hashes));
  size_t i;

  if (!slots || !hashes) {
    free(slots);
    free(hashes);
    return KCM_ENOMEM;
  }
  for (i = 0; i < m->cap; i++) {
    size_t j;
    if (!m->slots[i])
      continue;
    j = (size_t)m->hashes[i] & (cap - 1);
    while (slots[j])
      j = (j + 1) & (cap - 1);
    slots[j] = m->slots[i];
    hashes[j] = m->hashes[i];
  }
  free(m->slots);
  free(m->hashes);
  m->slots = slots;
  m->hashes = hashes;
  m->cap = cap;
  return 0;
}

void *kcm_map_get(const struct kcm_map *m, const void *key) {
  if (!m->len)
    return NULL;
  return m->slots[find(m, key, m->type->hash_key(key))];
}

int kcm_map_put(struct kcm_map *m, const void *key, void *entry, void **old) {
  uint64_t h = m->type->hash_key(key);
  size_t i;

  if (old)
    *old = NULL;
  if ((m->len + 1) * 4 > m->cap * 3) {
    int err = resize(m, m->cap ? m->cap * 2 : 16);
    if (err)
      return err;
  }
  i = find(m, key, h);
  if (m->slots[i]) {
    if (old)
      *old = m->slots[i];
  } else {
    m->len++;
  }
  m->slots[i] = entry;
  m->hashes[i] = h;
  return 0;
}

void *kcm_map_remove(struct kcm_map *m, const void *key) {
  size_t mask, i, j;
  void *entry;

  if (!m->len)
    return NULL;
  i = find(m, key, m->type->hash_key(key));
  entry = m->slots[i];
  if (!entry)
    return NULL;
  mask = m->cap - 1;
  /* Backward-shift: pull later entries of the probe run into the hole. */
  j = i;
  for (;;) {
    size_t home;
    j = (j + 1) & mask;
    if (!m->slots[j])
      break;
    home = (size_t)m->hashes[j] & mask;
    if (((j - home) & mask) >= ((j - i) & mask)) {
      m->slots[i] = m->slots[j];
      m->hashes[i] = m->hashes[j];
      i = j;
    }
  }
  m->slots[i] = NULL;
  m->len--;
  if (m->cap > 16 && m->len * 8 < m->cap)
    resize(m, m->cap / 2); /* failure to shrink is harmless */
  return entry;
}

void kcm_map_iter_init(struct kcm_map_iter *it, const struct kcm_map *m) {
  it->m = m;
  it->i = 0;
}

void *kcm_map_next(struct kcm_map_iter *it) {
  while (it->i < it->m->cap) {
    void *e = it->m->slots[it->i++];
    if (e)
      return e;
  }
  return NULL;
}
