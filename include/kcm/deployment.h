/*
 * deployment — the Deployment controller.
 *
 * A Deployment owns one ReplicaSet per version of its pod template. For
 * each Deployment key taken from the work queue, a pure planning step reads
 * the cache and returns a plan, in upstream's order (syncDeployment):
 *
 *   1. claim: adopt orphan ReplicaSets its selector matches (after reading
 *      the Deployment from the API server to check it is the same object
 *      and not being deleted) and release owned ones that stop matching;
 *   2. a Deployment being deleted only gets its status computed;
 *   3. Progressing is set to DeploymentPaused / DeploymentResumed;
 *   4. paused, or a scaling event (an active ReplicaSet whose
 *      desired-replicas annotation differs from spec.replicas): scale,
 *      proportionally across the active ReplicaSets, without rolling;
 *   5. a legacy rollback (annotation deprecated.deployment.rollback.to);
 *   6. otherwise roll out: RollingUpdate (surge the new ReplicaSet, clean up
 *      unhealthy old replicas, scale old ones down within maxUnavailable)
 *      or Recreate (scale old ones to 0, wait until no old pod runs, then
 *      create the new one), keep revisionHistoryLimit old ReplicaSets, and
 *      compute the status and the Progressing, Available and ReplicaFailure
 *      conditions.
 *
 * The new ReplicaSet is the oldest one whose template equals the
 * Deployment's, ignoring the pod-template-hash label. The plan's steps are
 * sent by the runtime: the claims at once, the others one after the other;
 * the first failure ends the sync (it is retried with backoff) except
 * where upstream ignores the error. The Deployment's status is written
 * once, at the end, when it changed.
 *
 * Everything below the controller is pure: it reads the objects and the
 * clock it is given and allocates only its results.
 */
#ifndef KCM_DEPLOYMENT_H
#define KCM_DEPLOYMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/api.h"
#include "kcm/client.h"
#include "kcm/events.h"
#include "kcm/informer.h"
#include "kcm/map.h"
#include "kcm/pacer.h"
#include "kcm/runtime.h"
#include "kcm/workqueue.h"

#define KCM_DEPLOYMENT_REVISION "deployment.kubernetes.io/revision"
#define KCM_DEPLOYMENT_REVISION_HISTORY "deployment.kubernetes.io/revision-history"
#define KCM_DEPLOYMENT_DESIRED "deployment.kubernetes.io/desired-replicas"
#define KCM_DEPLOYMENT_MAX "deployment.kubernetes.io/max-replicas"
#define KCM_DEPLOYMENT_ROLLBACK_TO "deprecated.deployment.rollback.to"
/* The longest revision-history annotation kept, in characters. */
#define KCM_DEPLOYMENT_HISTORY_CHARS 2000
/* A key that failed this many times in a row is dropped until it changes. */
#define KCM_DEPLOYMENT_MAX_RETRIES 15

/* --- rollout arithmetic (pure) --------------------------------------------------------- */

/* 0 for Recreate or 0 replicas; never above spec.replicas. */
int32_t kcm_deployment_max_unavailable(const struct kcm_deployment *d);
/* spec.replicas + maxSurge, at most MaxInt32: a surge of MaxInt32 means
 * all at once. */
int32_t kcm_deployment_max_total(const struct kcm_deployment *d);
/* The collisionCount after a hash collision: 1 when unset, at most
 * MaxInt32. */
int32_t kcm_deployment_next_collision_count(const struct kcm_deployment *d);
/* v within int32's range: sums of API numbers saturate, never wrap. */
int32_t kcm_deployment_clamp32(int64_t v);

/* The hash that names a new ReplicaSet: FNV-32a of the canonical template
 * and the collision count, written with the letters upstream uses
 * ("bcdfghjklmnpqrstvwxz2456789" for the decimal digits). buf: 16 bytes. */
void kcm_deployment_hash(const char *template_json, int32_t collision_count, char *buf,
                         size_t len);

/* Parse an annotation as upstream's strconv.ParseInt(s, 10, 64). */
bool kcm_deployment_parse_int(const char *s, int64_t *out);
/* The revision annotation of a set of annotations: 0 when absent; false
 * when it does not parse. */
bool kcm_deployment_revision_of(const struct kcm_pairs *annotations, int64_t *out);

/* --- planning (pure) -------------------------------------------------------------------- */

/* A ReplicaSet as a sync sees it: the cached object with the changes this
 * sync made to it. */
struct kcm_deployment_rs {
  const struct kcm_replicaset *rs; /* borrowed; NULL for the one this sync creates */
  char *name;                      /* owned */
  int64_t created;
  int32_t replicas;                /* spec.replicas */
  int32_t min_ready_seconds;
  struct kcm_pairs annotations;    /* owned */
};

enum kcm_deployment_op {
  KCM_DEPLOYMENT_STEP_RECHECK, /* read the Deployment again before adopting */
  KCM_DEPLOYMENT_STEP_ADOPT,   /* adopt plan->adopt[rs] */
  KCM_DEPLOYMENT_STEP_RELEASE, /* release plan->release[rs] */
  KCM_DEPLOYMENT_STEP_EVENT,  /* record an event; no request */
  KCM_DEPLOYMENT_STEP_SCALE,  /* update a ReplicaSet's replicas, minReadySeconds and annotations */
  KCM_DEPLOYMENT_STEP_CREATE, /* create the new ReplicaSet (plan->create_body) */
  KCM_DEPLOYMENT_STEP_DELETE, /* delete an old ReplicaSet */
  KCM_DEPLOYMENT_STEP_STATUS, /* write the Deployment's status and revision annotation */
  KCM_DEPLOYMENT_STEP_ROLLBACK, /* write the Deployment's template and annotations
                                   (plan->rollback_ops) */
};

struct kcm_deployment_step {
  struct kcm_runtime_step at;   /* its wave (claims together, others alone) and group */
  enum kcm_deployment_op op;
  int32_t rs;                   /* SCALE, CREATE, DELETE: index in plan->rs;
                                   ADOPT, RELEASE: in plan->adopt, plan->release */
  int32_t replicas;             /* SCALE: spec.replicas to write */
  int32_t old_replicas;         /* SCALE: spec.replicas before */
  int32_t min_ready_seconds;    /* SCALE */
  struct kcm_pairs annotations; /* SCALE: every annotation the ReplicaSet should carry */
  struct kcm_conditions conditions; /* CREATE: the Deployment's conditions before it */
  bool lenient;                 /* a failure is not an error: the rest of its group (the
                                   steps upstream sends in one loop) is skipped */
  /* The event: recorded by EVENT, or after the write succeeded. */
  const char *reason;           /* static; NULL for none */
  bool warning;
  char *message;                /* owned */
};

struct kcm_deployment_status {
  int64_t observed_generation;
  int32_t replicas;
  int32_t updated;
  int32_t ready;
  int32_t available;
  int32_t unavailable;
  int32_t collision_count; /* -1 when unset */
  /* status.terminatingReplicas, the sum of its ReplicaSets': -1 unset
   * (written as null), KCM_DEPLOYMENT_UNWRITTEN where the server does not
   * keep the field (neither written nor compared) */
  int32_t terminating;
  struct kcm_conditions conditions;
};
#define KCM_DEPLOYMENT_UNWRITTEN (-2)

/* A ReplicaSet the API server changed on creation (a mutating admission
 * webhook, fields a feature gate drops): for the Deployment template
 * template_key, the ReplicaSet uid with rs_template_key is the new one. */
struct kcm_deployment_alias {
  uint64_t template_key;
  uint64_t rs_template_key;
  struct kcm_uid rs_uid;
};

struct kcm_deployment_plan {
  /* claiming; the ReplicaSets are borrowed from the cache */
  struct kcm_replicaset **adopt;
  size_t nadopt;
  struct kcm_replicaset **release;
  size_t nrelease;
  /* the ReplicaSets the Deployment owns, and the one this sync creates */
  struct kcm_deployment_rs *rs;
  size_t nrs;
  int32_t new_rs;            /* index in rs, or -1 */
  char *create_body;         /* the ReplicaSet to create, JSON */
  struct kcm_deployment_step *steps;
  size_t nsteps;
  /* the Deployment as the sync leaves it */
  struct kcm_deployment_status status;
  int32_t terminating;       /* status.terminatingReplicas as upstream sums it, also
                                where the status does not carry it: -1 unset */
  char *revision;            /* the revision annotation to write; NULL: unchanged */
  char *rollback_ops;        /* JSON patch operations, without the resourceVersion test */
  int64_t requeue_after_ms;  /* check progress again: -1 never, 0 now (rate limited) */
  uint64_t paced_ms;         /* a status write that only reported progress was left
                                out (status_wait_ms): sync again after this; 0: none */
  bool invalid;              /* the selector cannot be used: nothing is done */
};

struct kcm_deployment_input {
  const struct kcm_deployment *d;
  /* the ReplicaSets it controls and the orphans of its namespace (others are ignored) */
  struct kcm_replicaset *const *candidates;
  size_t ncandidates;
  /* Recreate: whether the ReplicaSet (by uid) has a pod matching the
   * Deployment's selector that is neither Succeeded nor Failed. NULL: none. */
  bool (*pods_running)(void *ctx, const struct kcm_replicaset *rs);
  void *ctx;
  const struct kcm_deployment_alias *alias; /* may be NULL */
  uint64_t now_ms;
  int8_t terminating_kept; /* the API server keeps status.terminatingReplicas:
                              1 yes, 0 no, -1 not known (struct kcm_runtime_field) */
  uint64_t status_wait_ms; /* until the Deployment's next status write may go
                              (--deployment-status-interval); 0: now */
};

/* Plan one sync. A status write that only reports a rollout's progress
 * (kcm_deployment_status_progress(), in the module's internal.h) while
 * in->status_wait_ms is not 0 is left out of the plan, unless the plan
 * rolls back, and paced_ms says when to sync again: that sync writes the
 * status as it is by then.
 * Returns 0 or KCM_ENOMEM; free with kcm_deployment_plan_release(). */
int kcm_deployment_plan(const struct kcm_deployment_input *in, struct kcm_deployment_plan *out);
void kcm_deployment_plan_release(struct kcm_deployment_plan *p);

/* Whether status and annotation writes of the plan change the Deployment. */
bool kcm_deployment_status_changed(const struct kcm_deployment *d,
                                   const struct kcm_deployment_plan *p);

/* Request bodies. resource_version: the object's latest known version.
 * probe: the status carries terminatingReplicas (p->terminating) even
 * where the plan leaves it out, to find out whether the server keeps it. */
int kcm_deployment_status_body(const struct kcm_deployment *d, const struct kcm_deployment_plan *p,
                               bool probe, uint64_t resource_version, struct kcm_buf *out);
int kcm_deployment_scale_body(const struct kcm_deployment_plan *p,
                              const struct kcm_deployment_step *s, uint64_t resource_version,
                              struct kcm_buf *out);
int kcm_deployment_rollback_body(const struct kcm_deployment_plan *p, uint64_t resource_version,
                                 struct kcm_buf *out);
/* After a failed create: Progressing False ReplicaSetCreateError over the
 * conditions it had then; nothing (out left empty) without a progress
 * deadline. */
int kcm_deployment_create_failed_body(const struct kcm_deployment *d,
                                      const struct kcm_deployment_step *create, const char *message,
                                      uint64_t now_ms, uint64_t resource_version,
                                      struct kcm_buf *out);
/* After a hash collision: collisionCount one higher. */
int kcm_deployment_collision_body(const struct kcm_deployment *d, uint64_t resource_version,
                                  struct kcm_buf *out);

/* --- what a rollout waits for (pure) ----------------------------------------------------- */

/* Where a rollout stands, as the planner sees it. */
enum kcm_deployment_why_state {
  KCM_DEPLOYMENT_WHY_ACTING,    /* the planner would write now: next */
  KCM_DEPLOYMENT_WHY_COMPLETE,  /* every replica updated and available */
  KCM_DEPLOYMENT_WHY_PAUSED,    /* spec.paused: only scaling is done */
  KCM_DEPLOYMENT_WHY_AVAILABLE, /* waits for `more` pods of the new ReplicaSet to become
                                   available; next, if any, follows then */
  KCM_DEPLOYMENT_WHY_OLD_PODS,  /* Recreate: waits for the old pods to end; next follows */
  KCM_DEPLOYMENT_WHY_SETTLING,  /* nothing planned and nothing waited for: the counts
                                   are still to reach the status */
  KCM_DEPLOYMENT_WHY_INVALID,   /* the selector cannot be used */
};

/* A write the controller would send (not the status, not an event). */
struct kcm_deployment_why_step {
  enum kcm_deployment_op op; /* SCALE, CREATE, DELETE, ADOPT, RELEASE or ROLLBACK */
  char *rs;                  /* owned: the ReplicaSet's name; NULL for ROLLBACK */
  int32_t from, to;          /* SCALE: spec.replicas before and after; CREATE: to */
};

struct kcm_deployment_why {
  enum kcm_deployment_why_state state;
  struct kcm_deployment_plan plan; /* the sync planned from what was read */
  struct kcm_deployment_why_step next;
  bool has_next;
  int32_t more;            /* AVAILABLE */
  int32_t max_surge;       /* the fenceposts for spec.replicas (0 for Recreate) */
  int32_t max_unavailable;
  int32_t max_total;       /* spec.replicas + maxSurge */
  int32_t min_available;   /* spec.replicas - maxUnavailable */
  int32_t total;           /* the ReplicaSets' spec.replicas, summed */
  int32_t available;       /* their available pods, summed */
  bool timed_out;          /* Progressing is ProgressDeadlineExceeded */
  int64_t deadline_left_s; /* until the progress deadline; INT64_MIN: none running */
  const struct kcm_condition *failure; /* ReplicaFailure in plan.status; NULL: none */
};

/* Explain in->d's rollout with the controller's own planner: the plan from
 * what was read; when it sends nothing, the plan again with 1, 2, ... more
 * of the new ReplicaSet's pods available (Recreate: with the old pods
 * ended) until it would act, which gives `next`. in->status_wait_ms is
 * taken as 0. Returns 0 or KCM_ENOMEM; free with
 * kcm_deployment_why_release(). */
int kcm_deployment_why(const struct kcm_deployment_input *in, struct kcm_deployment_why *out);
void kcm_deployment_why_release(struct kcm_deployment_why *w);

struct kcm_controllers_why;
/* The Deployment row's why() (kcm/controllers.h): the answer of
 * kcm_deployment_why() with the pods that hold the rollout back, as text
 * or JSON; *ended 1 complete, -1 past its progress deadline. */
int kcm_deployment_explain(const struct kcm_controllers_why *in, struct kcm_buf *out,
                           int *ended);

/* --- the controller -------------------------------------------------------------------- */

struct kcm_deployment_controller {
  struct kcm_runtime rt;   /* its workers, queue and syncs */
  struct kcm_informer *d_informer;
  struct kcm_informer *rs_informer;
  struct kcm_informer *pod_informer;
  struct kcm_map aliases;  /* Deployment key -> struct kcm_deployment_alias */
  struct kcm_pacer sync_pacer; /* --deployment-sync-interval: since each one's last writes */
  struct kcm_pacer status_pacer; /* --deployment-status-interval: since its last status write */
  struct kcm_runtime_field terminating; /* whether the server keeps
                                           status.terminatingReplicas */
  struct {
    uint64_t rs_created;
    uint64_t rs_scaled;
    uint64_t rs_deleted;
    uint64_t status_writes;
    uint64_t collisions;
    uint64_t paced;    /* ReplicaSet status changes whose sync waited for the interval */
    uint64_t status_paced; /* progress-only status writes left to a later sync */
  } stats;
};

/* Register with the informers (before they start). Every request, events
 * included, goes through writer. Borrowed pointers must outlive the
 * controller. workers: --concurrent-deployment-syncs (0: 5).
 * sync_interval_ms: --deployment-sync-interval; a ReplicaSet's status
 * change that comes sooner than this after its Deployment's last writes
 * waits until then to sync the Deployment, so one sync sees them all (0:
 * at once, as upstream). status_interval_ms: --deployment-status-interval;
 * a status write that only reports a rollout's progress waits until this long after the Deployment's last one (0: at once). */
int kcm_deployment_controller_init(struct kcm_deployment_controller *c, uv_loop_t *loop,
                                   struct kcm_writer *writer, struct kcm_informer *d_informer,
                                   struct kcm_informer *rs_informer,
                                   struct kcm_informer *pod_informer, struct kcm_intern *pool,
                                   uint32_t workers, uint64_t sync_interval_ms,
                                   uint64_t status_interval_ms);
/* Run it with kcm_runtime_run(&c->rt) once the caches have synced; stop
 * it with kcm_runtime_stop(&c->rt, ...). */
void kcm_deployment_controller_release(struct kcm_deployment_controller *c);

#endif
