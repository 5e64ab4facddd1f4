/*
 * informer — a list/watch reflector feeding a typed, indexed cache.
 *
 * One informer keeps every object of one kind (optionally one namespace)
 * as the API server has it. It lists, then watches from the list's
 * resourceVersion with bookmarks and a random timeout in [300, 600) s,
 * decoding each event once into a struct from kcm/api.h. The algorithm is
 * client-go's reflector:
 *
 *   - with watch_list (client-go's WatchListClient), the list is a watch
 *     that sends the current objects first (sendInitialEvents=true,
 *     resourceVersionMatch=NotOlderThan) and marks their end with a
 *     bookmark annotated k8s.io/initial-events-end; the objects replace the
 *     cache then and the same stream goes on as the watch. It asks for the
 *     last version seen ("" at first and after a 410: a consistent read).
 *     A stream refused or broken before its end (a server without the
 *     WatchList gate answers 422) is followed by a list at once; 429 and
 *     connection failures wait and stream again, as client-go does.
 *   - otherwise (and as that fallback) the list is paged as list.c says:
 *     the first at resourceVersion "0", which the watch cache answers
 *     whole; a 410 Gone on a list retries at "", paged.
 *   - a watch that ends cleanly is restarted at once; one that fails, or
 *     ends in under a second with no events, waits with jittered
 *     exponential backoff (800 ms doubling to 30 s, reset after 2 min
 *     without failures); a 410 on a watch relists at the last version;
 *   - a relist removes objects that vanished meanwhile (their deletion is
 *     reported with final_state_unknown);
 *   - an object the cache cannot read (kube-apiserver served it, so this
 *     is rare: a field kcm relies on with a type it does not expect) is
 *     counted (stats.unreadable), logged once while it stays unreadable,
 *     and its last readable copy is kept: it is never reported deleted for
 *     being unreadable, a relist keeps it, and an update after it is not
 *     successive (kcm_informer_successive). A DELETED event is applied
 *     whenever its object's namespace and name can be read. Events that
 *     are not events at all are logged, counted and skipped.
 *
 * Handlers run on the loop, in order of registration, for every change
 * after the change is in the cache. Objects passed to handlers are
 * borrowed for the call (take a reference to keep one).
 *
 * Indexes: by namespace and by controller UID (the uid of the owner
 * reference with controller: true; objects without one share a bucket of
 * orphans), iterated through the objects' links.
 */
#ifndef KCM_INFORMER_H
#define KCM_INFORMER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/api.h"
#include "kcm/client.h"
#include "kcm/intern.h"
#include "kcm/map.h"

struct kcm_informer_handler {
  void (*added)(void *ctx, struct kcm_object *obj);
  /* old and cur may be the same object on a periodic resync. */
  void (*updated)(void *ctx, struct kcm_object *old, struct kcm_object *cur);
  /* final_state_unknown: the deletion was found by a relist, and obj is the
   * last state the cache saw. */
  void (*deleted)(void *ctx, struct kcm_object *obj, bool final_state_unknown);
  void *ctx;
};

struct kcm_informer_options {
  enum kcm_kind kind;
  const char *namespace;       /* NULL: all namespaces */
  uint32_t page_size;          /* default 500 */
  size_t max_event_bytes;      /* cap on a watch event or a list item; default
                                  KCM_API_OBJECT_MAX */
  uint64_t resync_ms;          /* periodic resync; 0 disables */
  uint32_t backoff_initial_ms; /* default 800 */
  uint32_t backoff_max_ms;     /* default 30000 */
  uint32_t backoff_reset_ms;   /* default 120000 */
  uint32_t watch_timeout_min_s; /* default 300 (the watch asks for [min, 2*min)) */
  bool protobuf;               /* ask for protobuf, JSON the fallback (kinds whose row
                                  has a protobuf reader: pods) */
  bool watch_list;             /* list by streaming (see above), a list the fallback */
};

struct kcm_informer_stats {
  uint64_t lists;         /* list requests (pages) sent */
  uint64_t relists;       /* full lists (streamed or not) after the first */
  uint64_t streams;       /* lists asked for as a stream of watch events */
  uint64_t fallbacks;     /* streams refused or broken, followed by a list */
  uint64_t watches;       /* watch requests sent */
  uint64_t events;        /* watch events applied */
  uint64_t bookmarks;
  uint64_t decode_errors; /* objects or events skipped as malformed */
  uint64_t unreadable;    /* of them, objects whose last readable copy was kept */
  uint64_t filtered;      /* objects read and dropped: of a namespace not kept */
  uint64_t failures;      /* failed lists and watches */
};

enum kcm_informer_state {
  KCM_INFORMER_IDLE,
  KCM_INFORMER_LISTING,
  KCM_INFORMER_WATCHING,
  KCM_INFORMER_BACKOFF,
  KCM_INFORMER_STOPPED,
};

struct kcm_informer_bucket;

struct kcm_informer {
  uv_loop_t *loop;
  struct kcm_client *client;
  struct kcm_intern *pool;
  struct kcm_informer_options opts;
  struct kcm_informer_handler *handlers;
  uint32_t nhandlers;
  struct kcm_map objects;  /* (namespace, name) -> struct kcm_object */
  struct kcm_map behind;   /* (namespace, name) -> versions written, not yet cached */
  struct kcm_map unreadable; /* (namespace, name) of the objects whose latest version
                              * could not be read: their cached copy is older */
  bool blind;              /* a change of an object of no readable name was skipped
                            * since the last list: any cached copy may be older */
  bool successive;         /* the update being delivered follows its cached copy */
  struct kcm_map by_ns;    /* namespace -> bucket */
  struct kcm_map by_owner; /* controller uid -> bucket */
  struct kcm_informer_stats stats;
  char last_error[200];    /* what the last failed list answered, cut; "" when a
                              list has succeeded since, or none failed */
  /* Keep only the objects of the namespaces keep() names (NULL: all); see
   * kcm_informer_filter(). */
  bool (*keep)(void *ctx, const char *ns, size_t n);
  void *keep_ctx;
  uint64_t lists_started;  /* full lists begun */
  uint64_t lists_applied;  /* lists_started of the last list that replaced the cache */
  bool relist_after;       /* a list in flight is to be followed by another */
  bool consistent;         /* the next list is a consistent read (at "") */
  void (*on_listed)(struct kcm_informer *inf, void *ctx); /* a full list replaced the cache */
  void *listed_ctx;
  enum kcm_informer_state state;
  bool synced;            /* the first full list has been applied */
  bool need_list;         /* the next attempt lists (else it watches) */
  char rv[32];            /* last resourceVersion seen ("" before the first list) */
  bool rv_gone;           /* a list at rv got 410: the next list asks for "" */
  char *ns;               /* owned copy of opts.namespace */
  int stop_reason;        /* why the informer stopped its own watch */
  uint64_t retry_in_ms;   /* the last backoff wait */
  bool paged;             /* the server paged a list at "0": page every list */
  bool streaming;         /* the watch in flight streams a list: its objects
                           * gather in pending until the initial-events-end
                           * bookmark */
  /* the list being assembled */
  void *items;            /* struct kcm_items, internal: splits the response */
  bool at_zero;           /* the page being read was asked for at "0" */
  char list_rv[32];       /* its resourceVersion */
  char *cont;
  struct kcm_object **pending;
  size_t npending, cap_pending;
  struct kcm_map list_unreadable; /* its objects that could not be read, as `unreadable` */
  bool list_blind;        /* it had an unreadable item of no readable name */
  /* the watch in flight */
  struct kcm_client_request *req;
  void *framer;           /* struct kcm_framer, internal */
  bool body_started;      /* the response being read has sent bytes */
  bool list_proto;        /* the list being read is protobuf (else JSON) */
  bool watch_proto;       /* the watch being read is protobuf (else JSON) */
  void *pbitems;          /* struct kcm_pbitems, internal: splits a protobuf list */
  struct kcm_json page;   /* reads watch events and a list's metadata */
  struct kcm_json item;   /* reads the objects in them */
  struct kcm_api_memo memo; /* templates of the ReplicaSets or Deployments decoded last */
  uint64_t watch_started; /* loop time, ms */
  uint64_t watch_events;
  uint64_t backoff_ms;
  uint64_t last_failure;  /* loop time of the last failure, ms */
  uv_timer_t timer;       /* backoff waits */
  uv_timer_t resync;
  int closing;            /* handles still to close */
  void (*on_closed)(struct kcm_informer *inf);
  void *data;             /* free for the owner's use */
};

/* Set up an informer; nothing is sent until kcm_informer_start(). The
 * client and pool are borrowed and must outlive it. KCM_EINVAL for an
 * unknown kind or a namespace unfit for a URL path
 * (kcm_client_segment_problem). */
int kcm_informer_init(struct kcm_informer *inf, uv_loop_t *loop, struct kcm_client *client,
                      struct kcm_intern *pool, const struct kcm_informer_options *opts);
/* Add a handler (copied). Only before kcm_informer_start(). */
int kcm_informer_add_handler(struct kcm_informer *inf, const struct kcm_informer_handler *h);
void kcm_informer_start(struct kcm_informer *inf);
/* Stop requests and timers, then call on_closed (may be NULL) from the
 * loop; free with kcm_informer_release() afterwards. */
void kcm_informer_stop(struct kcm_informer *inf, void (*on_closed)(struct kcm_informer *inf));
/* Drop the cache. Only after on_closed ran (or if never started). */
void kcm_informer_release(struct kcm_informer *inf);

/* True once the first full list has been applied. */
bool kcm_informer_synced(const struct kcm_informer *inf);
/* Keep only the objects of the namespaces keep(ctx, ns, n) names: the
 * others are dropped as they are read, and counted in stats.filtered. A
 * namespace keep() comes to name is listed with kcm_informer_relist(); one
 * it stops naming is forgotten with kcm_informer_purge(). Before start. */
void kcm_informer_filter(struct kcm_informer *inf, bool (*keep)(void *ctx, const char *ns,
                                                                size_t n),
                         void *ctx);
/* List again now (or, with a list in flight, again after it), as a
 * consistent read: the list holds every write the API server answered
 * before it, whoever sent it. lists_applied passes the lists_started of
 * now once that list has replaced the cache, and on_listed runs. */
void kcm_informer_relist(struct kcm_informer *inf);
/* Drop the objects of the namespaces keep() no longer names, telling no
 * handler (no one acts on them here any more). Returns how many. */
size_t kcm_informer_purge(struct kcm_informer *inf);

struct kcm_object *kcm_informer_get(const struct kcm_informer *inf, const char *ns,
                                    const char *name);
size_t kcm_informer_len(const struct kcm_informer *inf);

/* Writes the cache has not caught up with. A controller that wrote ns/name
 * and got resourceVersion rv back reports it; until an event at rv or later
 * arrives, the cached copy is known to be behind the server: acting on it
 * repeats work, and a write guarded by its version only conflicts. The
 * event that catches up is delivered to the handlers as usual, so a
 * controller that defers a sync while its object is behind is woken by it.
 * A record is dropped when the object catches up or goes, or after
 * KCM_INFORMER_BEHIND_TTL_MS, should the event never come. */
#define KCM_INFORMER_BEHIND_TTL_MS 60000
void kcm_informer_written(struct kcm_informer *inf, const char *ns, const char *name,
                          uint64_t rv);
/* Called from a handler's `updated`: whether this update is a watch event
 * that follows the cached copy directly (nothing between them the cache
 * could not read), so that what differs between them is what one write
 * changed. False for a relist, a streamed list's objects, a resync, and a
 * copy kept while newer versions were unreadable. The object may still
 * have been deleted and created again under its name: compare uids. */
bool kcm_informer_successive(const struct kcm_informer *inf);
/* Objects held at most in `unreadable`; past it the informer is blind. */
#define KCM_INFORMER_UNREADABLE_MAX 4096

/* Whether o, an object of this cache, is older than a version written to it. */
bool kcm_informer_behind(struct kcm_informer *inf, const struct kcm_object *o);
/* Whether the cache has seen resourceVersion rv of its kind: its last list,
 * watch event or bookmark is at rv or later (true before it has one). */
bool kcm_informer_seen(const struct kcm_informer *inf, uint64_t rv);
/* The first object in a namespace (then follow obj->ns_next), or NULL. */
struct kcm_object *kcm_informer_first_in(const struct kcm_informer *inf, const char *ns);
/* The first object whose controller has this uid (then obj->own_next);
 * owner NULL gives the objects without a controller (orphans). */
struct kcm_object *kcm_informer_first_owned(const struct kcm_informer *inf,
                                            const struct kcm_uid *owner);

/* The object of this cache that o's controller reference names, when its
 * kind is `kind` and its uid matches; else NULL. */
struct kcm_object *kcm_informer_controller_of(const struct kcm_informer *inf,
                                              const struct kcm_object *o, const char *kind);
/* What an owner may claim: the objects of namespace ns it controls, then
 * the orphans there, into *out (owned by the caller, the objects borrowed;
 * NULL when none). Returns 0 or KCM_ENOMEM. */
int kcm_informer_claimable(const struct kcm_informer *inf, const struct kcm_uid *owner,
                           const char *ns, struct kcm_object ***out, size_t *n);

/* Append the URL path of the collection (e.g. "/apis/apps/v1/namespaces/x/replicasets"). */
int kcm_informer_collection_path(enum kcm_kind kind, const char *ns, struct kcm_buf *out);

#endif
