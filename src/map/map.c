/* map — open-addressing hash table of entry pointers; see include/kcm/map.h. */
#include "kcm/map.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "kcm/error.h"

/* The key of every table's hash, drawn once before main so that no thread
 * sees it change; the same for the life of the process. */
static uint64_t hash_key[2];

__attribute__((constructor)) static void draw_hash_key(void) {
  struct timespec ts;
  size_t got = 0;
  while (got < sizeof(hash_key)) {
    ssize_t n = getrandom((char *)hash_key + got, sizeof(hash_key) - got, 0);
    if (n < 0)
      break;
    got += (size_t)n;
  }
  if (got == sizeof(hash_key))
    return;
  /* No getrandom (an old kernel or a seccomp filter): less secret, still
   * different per process. */
  clock_gettime(CLOCK_REALTIME, &ts);
  hash_key[0] ^= (uint64_t)ts.tv_sec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ts.tv_nsec;
  hash_key[1] ^= (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)&got;
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

static inline void sip_round(uint64_t v[4]) {
  v[0] += v[1];
  v[1] = ROTL(v[1], 13) ^ v[0];
  v[0] = ROTL(v[0], 32);
  v[2] += v[3];
  v[3] = ROTL(v[3], 16) ^ v[2];
  v[0] += v[3];
  v[3] = ROTL(v[3], 21) ^ v[0];
  v[2] += v[1];
  v[1] = ROTL(v[1], 17) ^ v[2];
  v[2] = ROTL(v[2], 32);
}

/* SipHash-1-3 of p[0..n) under the key (k0, k1). */
static uint64_t siphash13(uint64_t k0, uint64_t k1, const unsigned char *p, size_t n) {
  uint64_t v[4] = {k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL,
                   k0 ^ 0x6c7967656e657261ULL, k1 ^ 0x7465646279746573ULL};
  uint64_t m, last = (uint64_t)n << 56;
  size_t i;
  for (; n >= 8; n -= 8, p += 8) {
    memcpy(&m, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    m = __builtin_bswap64(m);
#endif
    v[3] ^= m;
    sip_round(v);
    v[0] ^= m;
  }
  for (i = 0; i < n; i++)
    last |= (uint64_t)p[i] << (8 * i);
  v[3] ^= last;
  sip_round(v);
  v[0] ^= last;
  v[2] ^= 0xff;
  sip_round(v);
  sip_round(v);
  sip_round(v);
  return v[0] ^ v[1] ^ v[2] ^ v[3];
}

uint64_t kcm_map_hash_bytes(uint64_t h, const void *p, size_t n) {
  return siphash13(hash_key[0] ^ h, hash_key[1], p, n);
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
static uint64_t hash_of(const struct kcm_map_type *t, const void *key) {
  return t->hash_key ? t->hash_key(key) : kcm_map_hash_bytes(KCM_MAP_HASH_INIT, key, strlen(key));
}

static bool matches(const struct kcm_map_type *t, const void *key, const void *entry) {
  const char *at;
  if (t->match)
    return t->match(key, entry);
  at = (const char *)entry + t->key_at;
  return !strcmp(key, t->key_inline ? at : *(const char *const *)at);
}

static size_t find(const struct kcm_map *m, const void *key, uint64_t h) {
  size_t mask = m->cap - 1, i = (size_t)h & mask;
  while (m->slots[i]) {
    if (m->hashes[i] == h && matches(m->type, key, m->slots[i]))
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
  return m->slots[find(m, key, hash_of(m->type, key))];
}

int kcm_map_put(struct kcm_map *m, const void *key, void *entry, void **old) {
  uint64_t h = hash_of(m->type, key);
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
  i = find(m, key, hash_of(m->type, key));
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
