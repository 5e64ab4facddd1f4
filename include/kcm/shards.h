/*
 * shards — several kcm instances active at once, sharing the work by
 * namespace. The namespaces are hashed onto `count` virtual shards; each
 * shard is a Lease "<prefix>-shard-<i>" in one namespace, and an instance
 * acts only in the namespaces of the shards whose Lease it holds. A
 * Deployment, its ReplicaSets and their pods share a namespace, so one
 * shard holds a whole chain of owners.
 *
 * Each instance also holds a member Lease "<prefix>-member-<id>"; the live
 * instances are those whose member Lease has a holder and was renewed
 * within its duration, as this instance's clock measures it. Every retry
 * period an instance lists the namespace's Leases and, once a listing
 * shows its own member Lease, aims at its share, ceil(count / live):
 *   - under it, it tries to take shards that are free: no Lease, released
 *     (no holder), or not renewed for its duration on this clock;
 *   - over it, it drains the surplus, highest first: no new sync in their
 *     namespaces, and once the syncs in flight there are over, the Lease
 *     is released.
 * Each shard's Lease is held as leader election holds its Lease
 * (struct kcm_leader): renewed every retry period, and given up, acting
 * stopping at once, when no renewal succeeded for the renew deadline,
 * before the Lease could expire for another instance.
 *
 * A namespace's shard: the FNV-1a 64-bit hash of its name, mixed by
 * MurmurHash3's 64-bit finalizer, cut into `count` equal ranges. The
 * mixing keeps names that differ in their last characters apart; it also
 * means the ranges are not those of server-side sharded list and watch
 * (KEP-5866), which cuts FNV-1a unmixed.
 */
#ifndef KCM_SHARDS_H
#define KCM_SHARDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/buf.h"
#include "kcm/client.h"
#include "kcm/leader.h"

#define KCM_SHARDS_MAX 256

/* --- planning (pure) ----------------------------------------------------------------------- */

/* The shard of namespace ns (n bytes) among count. */
uint32_t kcm_shards_of(const char *ns, size_t n, uint32_t count);
/* What each instance aims to hold: ceil(count / live), live at least 1. */
uint32_t kcm_shards_share(uint32_t count, uint32_t live);

/* A shard as one round sees it. */
struct kcm_shards_seen {
  bool held;     /* this instance holds it */
  bool moving;   /* this instance is taking or draining it */
  bool free;     /* nobody holds it (see above) */
};

enum kcm_shards_move {
  KCM_SHARDS_STAY,  /* nothing to do */
  KCM_SHARDS_TAKE,  /* try to take it */
  KCM_SHARDS_DRAIN, /* give it up */
};

/* The moves of one round (out: count of them) with `live` instances, this
 * one `rank`th of them by identity: free shards taken while held and being
 * taken stay under the share, from the (rank / live)th free one on, so
 * that instances seeing the same free shards try for different ones; held
 * ones over the share drained, highest first. Returns the share. */
uint32_t kcm_shards_plan(const struct kcm_shards_seen *seen, uint32_t count, uint32_t live,
                         uint32_t rank, enum kcm_shards_move *out);

/* --- the coordinator ------------------------------------------------------------------------ */

struct kcm_shards_options {
  uint32_t count;        /* --shards */
  const char *ns;        /* the Leases' namespace */
  const char *prefix;    /* the Leases' names begin with it */
  const char *identity;  /* NULL: "<hostname>_<random UUID>" */
  uint64_t lease_ms, renew_ms, retry_ms; /* as leader election's */
  unsigned limiter;
};

struct kcm_shards;

/* One shard's Lease, held through an elector. */
struct kcm_shard {
  struct kcm_shards *owner;
  uint32_t index;
  struct kcm_leader elector;
  bool inited;
  bool held;                     /* acquired and not lost */
  bool trying;                   /* its elector runs to take it */
  bool draining;                 /* given up: waiting for its syncs, then released */
  struct kcm_lease_record seen;  /* as last listed */
  uint64_t seen_at;              /* loop ms when that content was first listed */
  uint64_t unowned_ms;           /* time it was listed free */
};

/* Another instance's member Lease, as listed. */
struct kcm_shards_peer {
  char name[254];
  struct kcm_lease_record seen;
  uint64_t seen_at;
};

struct kcm_shards {
  uv_loop_t *loop;
  struct kcm_client *client;     /* borrowed */
  char ns[64], prefix[64];
  uint32_t count;
  uint64_t lease_ms, renew_ms, retry_ms;
  unsigned limiter;
  struct kcm_leader member;      /* its member Lease; member.identity is its identity */
  struct kcm_shard *shard;       /* owned: count of them */
  struct kcm_shards_peer *peers; /* owned: the others' member Leases */
  size_t npeers;
  uint32_t live;                 /* instances live at the last listing, itself included */
  uint32_t share;
  uint64_t listed_at;            /* loop ms of the last listing; 0: none yet */
  bool member_listed;            /* a listing showed its own member Lease, held */
  uv_timer_t timer;
  bool listing;                  /* a listing is in flight */
  bool stopping;
  bool closed;
  /* What acts in the shards' namespaces: told when a shard is taken (its
   * keys should be looked at) or given up (released or lost), and asked
   * how many syncs are in flight in a shard's namespaces. */
  void (*on_taken)(struct kcm_shards *s, uint32_t shard);
  void (*on_given_up)(struct kcm_shards *s, uint32_t shard);
  size_t (*syncing)(struct kcm_shards *s, uint32_t shard);
  void (*on_stopped)(struct kcm_shards *s);
  void *data;
  struct {
    uint64_t taken;    /* shards acquired */
    uint64_t released; /* shards drained and released */
    uint64_t lost;     /* shards whose renewal failed past the deadline */
  } stats;
};

/* Validate the options (count in 1..KCM_SHARDS_MAX, the Lease timings as
 * leader election's); 0, or KCM_EINVAL with a message in err (static). */
int kcm_shards_check(const struct kcm_shards_options *o, const char **err);
/* Set up; the client is borrowed and must outlive the coordinator. */
int kcm_shards_init(struct kcm_shards *s, uv_loop_t *loop, struct kcm_client *client,
                    const struct kcm_shards_options *o);
/* Take the member Lease and start the rounds. */
void kcm_shards_start(struct kcm_shards *s);
/* Whether this instance acts in namespace ns (n bytes): its shard is held
 * and not draining. */
bool kcm_shards_owns(const struct kcm_shards *s, const char *ns, size_t n);
/* Whether objects of namespace ns (n bytes) are worth keeping: its shard
 * is held or being taken. */
bool kcm_shards_keeps(const struct kcm_shards *s, const char *ns, size_t n);
/* Whether it holds its share, or no free shard is left to take. */
bool kcm_shards_ready(const struct kcm_shards *s);
/* How many shards it holds. */
uint32_t kcm_shards_held(const struct kcm_shards *s);
/* Drain and release every shard, then the member Lease; on_stopped runs
 * once, from the loop, when done. */
void kcm_shards_stop(struct kcm_shards *s, void (*on_stopped)(struct kcm_shards *s));
/* kcm_shards_held, kcm_shards_share, kcm_shards_live_instances,
 * kcm_shards_server_selected (gauges),
 * kcm_shard_moves_total{move="taken|released|lost"} and
 * kcm_shard_unowned_seconds_total{shard} in the text format. */
int kcm_shards_metrics(const struct kcm_shards *s, struct kcm_buf *out);
/* Close the timers (then run the loop), and free what it holds. */
void kcm_shards_close(struct kcm_shards *s);
void kcm_shards_release(struct kcm_shards *s);

#endif
