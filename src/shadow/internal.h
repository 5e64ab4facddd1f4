/*
 * shadow/internal.h — the judging the wrappers of kcm_shadow_follow() feed,
 * pure and driven by the tests directly. Not installed; include/kcm/shadow.h
 * is the interface.
 */
#ifndef KCM_SHADOW_INTERNAL_H
#define KCM_SHADOW_INTERNAL_H

#include "kcm/shadow.h"

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

#endif
