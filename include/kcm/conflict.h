/*
 * conflict — noticing another controller doing kcm's job, on evidence a
 * tenant cannot forge beyond their own namespaces.
 *
 * When kube-controller-manager's deployment or replicaset controller comes
 * back on beside kcm (a `kubeadm upgrade` rewriting its static pod, a k3s
 * restart with other arguments), two controllers race over the same
 * objects. What tells it:
 *
 * A foreign status write is a watch update of a ReplicaSet or Deployment
 * that follows the cached copy directly (kcm_informer_successive: no
 * relist, no streamed list, nothing unreadable in between), of the same
 * object (uid), in which
 *   - a count its controller keeps changed (observedGeneration, replicas,
 *     fullyLabeled/updated/ready/available/unavailable/terminating
 *     replicas, collisionCount): kube-apiserver keeps the status as it was on a
 *     create or an update of the object itself, so only a write of the
 *     status subresource changes these;
 *   - and a status entry of metadata.managedFields (struct kcm_writers)
 *     that the object did not have before names a manager other than kcm,
 *     stamped at or after the moment kcm began to lead.
 * managedFields alone prove nothing: anyone who may update the object may
 * send them, with any manager, subresource and time. But an update that
 * carries them cannot change the counts, and on a status write the server
 * stamps only the writer's own entry, so through kcm's own writes every
 * other entry stays as it was or goes. Conditions alone (a tool's or a
 * test's marker), creates, and an object deleted and created again are no
 * evidence: each is a change a namespace user makes with no status right.
 *
 * Scope. Writing status needs rights in the object's namespace, so
 * evidence counts where it was seen, and holds at most that namespace. An
 * area is a kind whose status a controller of kcm's writes (enum kcm_kind:
 * the ReplicaSet controller's is KCM_KIND_REPLICASET); it stands aside in a
 * namespace from the KCM_CONFLICT_WRITES-th foreign status write there
 * within quiet_s (a one-off write holds nothing), until quiet_s passes
 * without one. It stands aside in every namespace while
 *   - a system namespace is held: one only the cluster's administrators
 *     write (kube-system by default), where no tenant can make evidence;
 *   - or, when the operator asks for it (cluster_at > 0), cluster_at
 *     namespaces are held at once: a tenant with status rights in that many
 *     namespaces can bring that about;
 * and no longer than that holds.
 *
 * Manager names are the writers' to choose: they are classed into a
 * bounded set (kcm_conflict_manager_class) before reaching an event or a
 * metric label. Pure: the caller feeds watch events and the time, and
 * acts on what the calls return.
 */
#ifndef KCM_CONFLICT_H
#define KCM_CONFLICT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/api.h"
#include "kcm/map.h"

#define KCM_CONFLICT_WRITES 2     /* foreign status writes that hold a namespace */
#define KCM_CONFLICT_SPACES 4096  /* namespaces tracked per area; evidence beyond is dropped */
#define KCM_CONFLICT_SYSTEM_MAX 8 /* system namespaces */

/* One namespace of an area with a foreign status write within quiet_s. */
struct kcm_conflict_space {
  char *ns;         /* owned */
  int64_t since;    /* its first foreign status write of this spell, Unix seconds */
  int64_t last;     /* its latest */
  uint32_t writes;  /* in this spell */
  bool held;        /* the area stands aside here */
  bool system;      /* a system namespace */
};

struct kcm_conflict_state {
  struct kcm_map spaces; /* namespace -> struct kcm_conflict_space (owned) */
  uint32_t held;         /* spaces held */
  uint32_t held_system;  /* of them, system namespaces */
  bool cluster;          /* standing aside in every namespace */
  int64_t cluster_since;
  const char *manager;   /* class of the latest foreign writer; "" before any */
  uint64_t writes;       /* foreign status writes seen while leading */
  uint64_t dropped;      /* of them, in a namespace past KCM_CONFLICT_SPACES */
};

struct kcm_conflict {
  char own[129];       /* kcm's field manager */
  int64_t leading;     /* writes stamped before are history; 0: not leading */
  int64_t quiet_s;     /* a spell ends after this long without a foreign write */
  uint32_t cluster_at; /* held namespaces that hold every namespace; 0: never */
  char system[KCM_CONFLICT_SYSTEM_MAX][64]; /* system namespaces: one held holds every one */
  unsigned nsystem;
  unsigned watched;    /* areas whose controller kcm runs (1 << kind); others are
                          another's to write (--controllers=replicaset leaves the
                          Deployment controller's writes to kube-controller-manager) */
  struct kcm_conflict_state area[KCM_KIND_COUNT];
};

/* What one watch event brought. */
struct kcm_conflict_change {
  int area;                 /* -1: no foreign status write */
  const char *manager;      /* the writer's field manager as the object names it */
  const struct kcm_conflict_space *space; /* its namespace; NULL when dropped */
  bool held;                /* the namespace is held from this write on */
  bool cluster;             /* every namespace is held from this write on */
};

/* own: kcm's field manager (kcm_client_program()); system: the system
 * namespaces, comma-separated (kcm_conflict_system_problem() checked). */
void kcm_conflict_init(struct kcm_conflict *c, const char *own, int64_t quiet_s,
                       uint32_t cluster_at, const char *system);
/* What is wrong with a list of system namespaces (NULL: nothing): at most
 * KCM_CONFLICT_SYSTEM_MAX namespace names, comma-separated; "" for none. */
const char *kcm_conflict_system_problem(const char *system);
/* Free every namespace's record. */
void kcm_conflict_release(struct kcm_conflict *c);
/* kcm leads from now on (0: it stopped leading, and every area is clear). */
void kcm_conflict_lead(struct kcm_conflict *c, int64_t now);

/* A ReplicaSet or Deployment updated by a watch event from `old` to
 * `cur`, successive as kcm_informer_successive() says; ch says what it
 * brought (ch->area -1 for nothing). */
void kcm_conflict_observe(struct kcm_conflict *c, const struct kcm_object *old,
                          const struct kcm_object *cur, bool successive, int64_t now,
                          struct kcm_conflict_change *ch);
/* End the spells quiet for quiet_s at `now`: each namespace ending a held
 * spell is told to ended(data, area, ns) (may be NULL), and an area held
 * everywhere is released once what held it no longer does. Returns a bit
 * (1 << area) for each area that holds less than before. */
unsigned kcm_conflict_expire(struct kcm_conflict *c, int64_t now,
                             void (*ended)(void *data, int area, const char *ns), void *data);
/* Whether area a stands aside in namespace ns (n bytes). */
bool kcm_conflict_holds(const struct kcm_conflict *c, enum kcm_kind a, const char *ns,
                        size_t n);

/* A field manager's class, for events and labels: "kube-controller-manager"
 * for exactly that name, else "other". */
const char *kcm_conflict_manager_class(const char *manager);
const char *kcm_conflict_area_name(enum kcm_kind a); /* its controller: "replicaset" */
const char *kcm_conflict_area_kind(enum kcm_kind a); /* "ReplicaSet" */

/* --- the guard: what kcm does about a conflict ------------------------------------------- */

struct kcm_runtime;
struct kcm_informer;
struct kcm_buf;

/* While kcm leads, the guard watches the caches of the areas' kinds.
 * When a namespace is held it logs a warning naming the writer and the
 * object, records a Warning event ConflictingController on that object,
 * and, when standing aside, holds back the area's syncs of that namespace
 * (kcm_runtime_gate); when every namespace is, it logs an error, records
 * the event on kcm's Lease, and stops the area's controller from starting
 * syncs. Every 5 s it ends the spells quiet for quiet_s, and the held keys
 * are synced. /metrics: kcm_conflicting_controller{kind,manager} is 1
 * while an area stands aside everywhere (manager a class; "" before any),
 * kcm_conflicting_namespaces{kind} counts the namespaces held. Runs on the
 * loop. */
struct kcm_conflict_guard {
  struct kcm_conflict c;
  uv_timer_t timer;
  struct kcm_runtime *rt[KCM_KIND_COUNT]; /* borrowed, by area; NULL: controller off */
  struct kcm_conflict_watch {             /* each watched cache's handler context */
    struct kcm_conflict_guard *g;
    const struct kcm_informer *inf;       /* borrowed */
  } watches[KCM_KIND_COUNT];
  struct kcm_conflict_gate {              /* what each area's gate is given */
    struct kcm_conflict_guard *g;
    enum kcm_kind area;
  } gates[KCM_KIND_COUNT];
  char lease_ns[64], lease_name[254];
  bool stand_aside;
  bool ever[KCM_KIND_COUNT]; /* held everywhere once (its metric stays, at 0) */
  int64_t (*now)(void);      /* Unix seconds; time() unless a test sets it */
};

void kcm_conflict_guard_init(struct kcm_conflict_guard *g, uv_loop_t *loop, const char *own,
                             uint64_t quiet_ms, uint32_t cluster_at, const char *system,
                             bool stand_aside, const char *lease_ns, const char *lease_name);
/* The controller of an area (NULL: off, and that area's writes are left to
 * another); before kcm_conflict_guard_lead(). */
void kcm_conflict_guard_area(struct kcm_conflict_guard *g, enum kcm_kind a,
                             struct kcm_runtime *rt);
/* Watch the cache of an area's kind; before it starts. 0 or KCM_ENOMEM. */
int kcm_conflict_guard_watch(struct kcm_conflict_guard *g, struct kcm_informer *inf);
/* kcm leads from now on. */
void kcm_conflict_guard_lead(struct kcm_conflict_guard *g);
/* Whether no area stands aside everywhere (the /readyz check). */
bool kcm_conflict_guard_clear(const struct kcm_conflict_guard *g);
/* Append kcm_conflicting_controller and kcm_conflicting_namespaces. 0 or
 * KCM_ENOMEM. */
int kcm_conflict_guard_metrics(const struct kcm_conflict_guard *g, struct kcm_buf *out);
/* Close the timer (the loop's next turn) and free the records. */
void kcm_conflict_guard_close(struct kcm_conflict_guard *g);

#endif
