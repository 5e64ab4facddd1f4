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
 *     nothing it reads changed in between (see below) and kcm still
 *     plans writes, that is a disagreement: the live controller
 *     left for a whole window a state kcm would change. It is logged with
 *     the object, kcm's plan and what the cache shows, counted by reason
 *     (the first write planned: "create pods", "patch
 *     replicasets/status"), and kept among the latest for /debug/shadow;
 *     once, until the key changes again.
 * The window runs only while the watches are up.
 * Any change to a key ends its pending plan: the next sync plans afresh. A
 * change is what the sync read: its object and every object it held
 * (their uids and resourceVersions), unlike the last sync's; so a
 * controller holds (kcm_runtime_hold) every object its plan depends on.
 * Compared
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






/* kcm_shadow_{syncs,compared,agreements,disagreements}_total of the n
 * shadows, in the text format. Returns 0, KCM_ETOOBIG or KCM_ENOMEM. */
int kcm_shadow_metrics(struct kcm_shadow *const *s, size_t n, struct kcm_buf *out);
/* The report of /debug/shadow: a JSON object with each controller's counts
 * and its latest disagreements, newest first. */
int kcm_shadow_report(struct kcm_shadow *const *s, size_t n, struct kcm_buf *out);

#endif
