/*
 * conflict — noticing another controller doing kcm's job.
 *
 * When kube-controller-manager's deployment or replicaset controller comes
 * back on beside kcm (a `kubeadm upgrade` rewriting its static pod, a k3s
 * restart with other arguments), two controllers race over the same
 * objects. Their writes show in what kcm already watches: kube-apiserver
 * records each writer's field manager (the first word of its User-Agent)
 * in metadata.managedFields, which the cache sums up as struct
 * kcm_writers. A foreign controller write is
 *   - a ReplicaSet's status written by another manager (the ReplicaSet
 *     controller's job),
 *   - a Deployment's status written by another manager, or a ReplicaSet
 *     owned by a Deployment created by another manager (the Deployment
 *     controller's),
 * stamped at or after the moment kcm began to lead: older entries are
 * history (kube-controller-manager's, from before the switch). A user
 * editing a spec, scaling or annotating writes no status and creates no
 * owned ReplicaSet, so is never one.
 *
 * Each area (one per controller) is in conflict from its first foreign
 * write until `quiet_s` seconds pass without one. Pure: the caller feeds
 * watch events and the time, and acts on what the calls return.
 */
#ifndef KCM_CONFLICT_H
#define KCM_CONFLICT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/api.h"

enum kcm_conflict_area {
  KCM_CONFLICT_REPLICASET, /* the ReplicaSet controller's writes */
  KCM_CONFLICT_DEPLOYMENT, /* the Deployment controller's */
  KCM_CONFLICT_AREAS,
};

struct kcm_conflict_state {
  bool active;
  char manager[129];  /* the other writer (field managers are at most 128 bytes) */
  char kind[16];      /* the kind of its latest write's object */
  char example[320];  /* that object, "namespace/name" */
  int64_t since;      /* its first write of this conflict, Unix seconds */
  int64_t last;       /* its latest */
  uint64_t writes;    /* seen in this conflict */
};

struct kcm_conflict {
  char own[129];     /* kcm's field manager */
  int64_t leading;   /* writes stamped before are history; 0: not leading */
  int64_t quiet_s;   /* a conflict ends after this long without a foreign write */
  unsigned watched;  /* areas whose controller kcm runs (1 << area); others are
                        another's to write (--controllers=replicaset leaves the
                        Deployment controller's writes to kube-controller-manager) */
  struct kcm_conflict_state area[KCM_CONFLICT_AREAS];
};

/* own: kcm's field manager (kcm_client_program()). */
void kcm_conflict_init(struct kcm_conflict *c, const char *own, int64_t quiet_s);
/* kcm leads from now on (0: it stopped leading, and every area is clear). */
void kcm_conflict_lead(struct kcm_conflict *c, int64_t now);

/* A ReplicaSet or Deployment after a watch event: `before` its writers
 * before the event (NULL for one just added). Returns the area a foreign
 * write was seen in, or -1; *began is set when that write starts a
 * conflict. */
int kcm_conflict_observe(struct kcm_conflict *c, const struct kcm_object *o,
                         const struct kcm_writers *before, int64_t now, bool *began);
/* End the conflicts quiet for quiet_s at `now`: a bit (1 << area) for
 * each that ended. */
unsigned kcm_conflict_expire(struct kcm_conflict *c, int64_t now);

const char *kcm_conflict_area_name(enum kcm_conflict_area a); /* "replicaset", "deployment" */
const char *kcm_conflict_area_kind(enum kcm_conflict_area a); /* "ReplicaSet", "Deployment" */

/* --- the guard: what kcm does about a conflict ------------------------------------------- */

struct kcm_runtime;
struct kcm_informer;
struct kcm_buf;

/* While kcm leads, the guard watches the ReplicaSet and Deployment caches.
 * When a conflict begins it logs an error naming the other writer and an
 * example object, records a Warning event ConflictingController on that
 * object and on kcm's Lease (through the area's controller), and, when
 * standing aside, stops the area's controller from starting syncs; every
 * 5 s it ends the conflicts quiet for quiet_s, and the controller takes
 * keys again. kcm_conflicting_controller{manager,kind} is 1 during a
 * conflict, 0 after (manager "" before any). Runs on the loop. */
struct kcm_conflict_guard {
  struct kcm_conflict c;
  uv_timer_t timer;
  struct kcm_runtime *rt[KCM_CONFLICT_AREAS]; /* borrowed; NULL: controller off */
  char lease_ns[64], lease_name[254];
  bool stand_aside;
  bool ever[KCM_CONFLICT_AREAS]; /* a conflict was seen (its metric stays, at 0) */
  int64_t (*now)(void);          /* Unix seconds; time() unless a test sets it */
};

void kcm_conflict_guard_init(struct kcm_conflict_guard *g, uv_loop_t *loop, const char *own,
                             uint64_t quiet_ms, bool stand_aside, const char *lease_ns,
                             const char *lease_name);
/* The controller of an area (NULL: off, and that area's writes are left to
 * another); before kcm_conflict_guard_lead(). */
void kcm_conflict_guard_area(struct kcm_conflict_guard *g, enum kcm_conflict_area a,
                             struct kcm_runtime *rt);
/* Watch the caches (either may be NULL); before they start. 0 or KCM_ENOMEM. */
int kcm_conflict_guard_watch(struct kcm_conflict_guard *g, struct kcm_informer *replicasets,
                             struct kcm_informer *deployments);
/* kcm leads from now on. */
void kcm_conflict_guard_lead(struct kcm_conflict_guard *g);
/* Whether no area is in conflict (the /readyz check). */
bool kcm_conflict_guard_clear(const struct kcm_conflict_guard *g);
/* Append kcm_conflicting_controller. 0 or KCM_ENOMEM. */
int kcm_conflict_guard_metrics(const struct kcm_conflict_guard *g, struct kcm_buf *out);
/* Close the timer (the loop's next turn). */
void kcm_conflict_guard_close(struct kcm_conflict_guard *g);

#endif
