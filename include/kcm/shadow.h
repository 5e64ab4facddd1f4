/*
 * shadow — kcm beside the live controller, writing nothing (--shadow).
 *
 * In shadow mode every informer and every planner runs as usual, but the
 * controllers' writer only answers (kcm_writer_init_dry): no create,
 * delete, patch, status write or event leaves kcm. A controller's struct
 * kcm_shadow stands between its runtime and that writer, and around its
 * runtime's release of each sync (kcm_shadow_follow), so the runtime knows
 * nothing of it: the writes each sync would have sent (those whose origin
 * is its key) are its plan, judged when the sync is over against what the
 * live controller did, as the watches show it:
 *
 *   - a sync planning no write agrees: the live controller has left the
 *     object (and its pods or ReplicaSets) as kcm would leave it;
 *   - a sync planning writes is pending: the live controller may not have
 *     acted yet. The key is synced again once the window has passed; if
 *     nothing about it changed in between (no watch event queued it) and
 *     kcm still plans writes, that is a disagreement: the live controller
 *     left for a whole window a state kcm would change. It is logged with
 *     the object, kcm's plan and what the cache shows, counted by reason
 *     (the first write planned: "create pods", "patch
 *     replicasets/status"), and kept among the latest for /debug/shadow;
 *     once, until the key changes again.
 * The window runs only while the watches are up.
 * Any change to a key ends its pending plan: the next sync plans afresh. A
 * change is what the sync read: its object and every object it held
 * (their uids and resourceVersions), unlike the last sync's. Compared
 * syncs = agreements + disagreements; a plan overtaken by a change is
 * neither.
 *
 * What this does not see: the live controller acting where kcm would have
 * waited (kcm's plan was empty), when the state it leaves is one kcm would
 * leave as it is too.
 *
 * Everything runs on the loop's thread; times are the loop's (ms).
 */
#ifndef KCM_SHADOW_H
#define KCM_SHADOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm/api.h"
#include "kcm/buf.h"
#include "kcm/map.h"
#include "kcm/runtime.h"
#include "kcm/writer.h"

#define KCM_SHADOW_REASONS 16 /* distinct reasons counted; more are "other" */
#define KCM_SHADOW_LATEST 32  /* disagreements kept for the report */
#define KCM_SHADOW_RECHECK_MS 1000 /* a judgment deferred while a watch is down */
#define KCM_SHADOW_BLIND UINT64_MAX
#define KCM_SHADOW_PLAN_BYTES (64 * 1024) /* of one sync's writes; more are left out */

struct kcm_shadow_disagreement {
  int64_t at;          /* Unix seconds */
  char key[300];       /* "namespace/name" */
  char reason[64];     /* the first write of kcm's plan: "create pods" */
  char plan[512];      /* every write of it, "; "-separated */
  char observed[320];  /* the object as cached */
};

struct kcm_shadow {
  const char *controller; /* "replicaset", "deployment" (static) */
  uint64_t window_ms;
  struct kcm_map pending; /* key -> its pending plan (private) */
  struct kcm_map syncing; /* key -> the writes of its sync in progress (private) */
  /* with kcm_shadow_follow(): the runtime's writer and ops, each wrapped */
  struct kcm_writer writer;            /* records each write, then `inner` answers it */
  struct kcm_writer *inner;            /* borrowed: the runtime's own */
  struct kcm_runtime_ops ops;          /* the runtime's, release judging the sync first */
  const struct kcm_runtime_ops *wrapped; /* borrowed: the controller's */
  uint64_t syncs, agreements, disagreements;
  struct {
    char name[48];
    uint64_t n;
  } reasons[KCM_SHADOW_REASONS];
  struct kcm_shadow_disagreement latest[KCM_SHADOW_LATEST]; /* a ring */
  size_t nlatest, next;
};

void kcm_shadow_init(struct kcm_shadow *s, const char *controller, uint64_t window_ms);
/* Judge rt's syncs (rt's writer a dry one): rt's writer and ops become s's
 * wrappers of them. Before rt runs; s outlives rt. */
void kcm_shadow_follow(struct kcm_shadow *s, struct kcm_runtime *rt);
void kcm_shadow_release(struct kcm_shadow *s);

/* Add req, a write a sync would have sent, to that sync's plan (one line
 * per write: "patch replicasets/web-1 {...}"). A read or a dry run is no
 * write: not added. */
void kcm_shadow_plan_add(struct kcm_buf *plan, const struct kcm_write *req);

/* A sync of key would have sent req: added to that sync's plan. */
void kcm_shadow_sent(struct kcm_shadow *s, const char *key, const struct kcm_write *req);
/* The sync of key is over, having read what `inputs` sums up (any number
 * that differs when they do): its plan (the writes kcm_shadow_sent() was
 * given since the last call) judged as kcm_shadow_judge() judges one, the
 * key first taken as changed when its inputs are not the last sync's. */
uint64_t kcm_shadow_over(struct kcm_shadow *s, const char *key, const struct kcm_object *o,
                         uint64_t inputs, uint64_t watching_since, uint64_t now_ms);

/* The key changed: its pending plan is over. */
void kcm_shadow_changed(struct kcm_shadow *s, const char *key);

/* A sync of key ended at now_ms planning `plan` (lines of
 * kcm_shadow_plan_add; "" for none); o is the key's cached object or NULL.
 * watching_since: since when every watch of the controller's caches has
 * been up, KCM_SHADOW_BLIND while one is down. The window runs only while
 * they are up (a cache whose watch is down sees no change, which is not
 * the same as none; and the live controller, cut off as well, gets a whole
 * window after they are back).
 * Returns how long from now to sync the key again to judge it, or 0. */
uint64_t kcm_shadow_judge(struct kcm_shadow *s, const char *key, const char *plan,
                          const struct kcm_object *o, uint64_t watching_since,
                          uint64_t now_ms);

/* The reason of a plan: its first line's verb and resource ("create pods"). */
void kcm_shadow_reason(const char *plan, char *dst, size_t len);

/* kcm_shadow_{syncs,compared,agreements,disagreements}_total of the n
 * shadows, in the text format. Returns 0, KCM_ETOOBIG or KCM_ENOMEM. */
int kcm_shadow_metrics(struct kcm_shadow *const *s, size_t n, struct kcm_buf *out);
/* The report of /debug/shadow: a JSON object with each controller's counts
 * and its latest disagreements, newest first. */
int kcm_shadow_report(struct kcm_shadow *const *s, size_t n, struct kcm_buf *out);

#endif
