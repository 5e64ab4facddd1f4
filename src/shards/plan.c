/*
 * shards/plan.c — which shard a namespace is in, and the moves of a round.
 * See include/kcm/shards.h.
 */
#include "kcm/shards.h"

#define FNV_OFFSET 14695981039346656037ULL
#define FNV_PRIME 1099511628211ULL

uint32_t kcm_shards_of(const char *ns, size_t n, uint32_t count) {
  uint64_t h = FNV_OFFSET;
  size_t i;
  for (i = 0; i < n; i++) {
    h ^= (unsigned char)ns[i];
    h *= FNV_PRIME;
  }
  /* FNV-1a's upper bits hardly change with the last bytes (team-1 and
   * team-2 would share a range): mixed first, as MurmurHash3's finalizer
   * mixes, then cut into equal ranges */
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return (uint32_t)(((unsigned __int128)h * count) >> 64);
}

uint32_t kcm_shards_share(uint32_t count, uint32_t live) {
  if (live < 1)
    live = 1;
  return (count + live - 1) / live;
}

/* Free, and neither held nor being taken or drained by this instance. */
static bool takable(const struct kcm_shards_seen *s) { return s->free && !s->held && !s->moving; }

uint32_t kcm_shards_plan(const struct kcm_shards_seen *seen, uint32_t count, uint32_t live,
                         uint32_t rank, enum kcm_shards_move *out) {
  uint32_t share = kcm_shards_share(count, live), have = 0, keep = 0, nfree = 0, skip, start, i;

  for (i = 0; i < count; i++) {
    out[i] = KCM_SHARDS_STAY;
    if (seen[i].held && !seen[i].moving)
      keep++;
    if (seen[i].held || seen[i].moving)
      have++;
    nfree += takable(&seen[i]);
  }
  /* over the share: drain the highest held ones */
  for (i = count; i-- > 0 && keep > share;) {
    if (seen[i].held && !seen[i].moving) {
      out[i] = KCM_SHARDS_DRAIN;
      keep--;
    }
  }
  /* under it: take free ones, from the (rank / live)th of them on, so
   * that instances that agree on what is free try for different ones */
  skip = live ? (uint32_t)((uint64_t)(rank % live) * nfree / live) : 0;
  for (start = 0; start < count; start++)
    if (takable(&seen[start]) && skip-- == 0)
      break;
  for (i = 0; i < count && have < share; i++) {
    uint32_t k = (start + i) % count;
    if (takable(&seen[k])) {
      out[k] = KCM_SHARDS_TAKE;
      have++;
    }
  }
  return share;
}
