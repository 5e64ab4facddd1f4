/*
 * replicaset — the ReplicaSet controller.
 *
 * For each ReplicaSet key taken from the work queue, a pure planner reads
 * the cache and returns the sync's steps, in upstream's order
 * (syncReplicaSet), which the runtime sends wave by wave:
 *
 *   1. claim: adopt matching orphan pods and release owned pods that stop
 *      matching, by patching ownerReferences; before the first adoption the
 *      ReplicaSet is read from the API server to check that it is the same
 *      object (uid) and not being deleted; a failure ends the sync;
 *   2. manage, only when the expectations are satisfied and the ReplicaSet
 *      is not being deleted: create the missing pods in slow-start batches
 *      (1, 2, 4, ...; stop at the first failure) or delete the surplus, the
 *      pods best deleted first by the upstream ranking; at most 500 either
 *      way per sync;
 *   3. status: replicas, fullyLabeledReplicas, readyReplicas,
 *      availableReplicas, observedGeneration and the ReplicaFailure
 *      condition, computed once the pods are made or deleted and written
 *      only when they change.
 *
 * Inactive pods (being deleted, Succeeded, Failed) are never claimed or
 * counted, so a pod is replaced as soon as its deletion starts.
 *
 * The planning functions below are pure: they read objects and the clock
 * they are given and allocate only their results.
 */
#ifndef KCM_REPLICASET_H
#define KCM_REPLICASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/api.h"
#include "kcm/client.h"
#include "kcm/json.h"
#include "kcm/crashloop.h"
#include "kcm/events.h"
#include "kcm/expectations.h"
#include "kcm/informer.h"
#include "kcm/pacer.h"
#include "kcm/runtime.h"
#include "kcm/workqueue.h"

#define KCM_REPLICASET_BURST 500

/* --- planning (pure) --------------------------------------------------------------- */

bool kcm_replicaset_pod_active(const struct kcm_pod *p);
/* Ready, and for min_ready seconds by now: its Ready condition's
 * transition time plus min_ready is now or earlier. */
bool kcm_replicaset_pod_available(const struct kcm_pod *p, int32_t min_ready, uint64_t now_ms);
/* Milliseconds from now_ms until the first of the ready pods not yet
 * available becomes available; -1 when none will (min_ready <= 0, or no
 * such pod). The sync is due again then. */
int64_t kcm_replicaset_next_available_ms(struct kcm_pod *const *pods, size_t n,
                                         int32_t min_ready, uint64_t now_ms);
/* Whether the pod a delete answered with (JSON, body[0..len)) is still
 * there terminating, as upstream counts status.terminatingReplicas: its
 * deletionTimestamp set with a grace period running or finalizers left,
 * and not finished. False for a pod deleted at once, or a body that is no
 * pod (a Status). j is scratch. */
bool kcm_replicaset_pod_left_terminating(struct kcm_json *j, const char *body, size_t len);

/* Which pods a ReplicaSet owns after adoption and release. Arrays are
 * owned by the claim (free with kcm_replicaset_claim_release); the pods
 * are borrowed from the cache. */
struct kcm_replicaset_claim {
  struct kcm_pod **claimed; /* active pods it owns or adopts, matching its selector */
  size_t nclaimed;
  struct kcm_pod **adopt;   /* orphans to adopt (also in claimed) */
  size_t nadopt;
  struct kcm_pod **release; /* owned pods that no longer match */
  size_t nrelease;
  int32_t terminating;      /* pods it controls, matching its selector, being
                               deleted and not Succeeded or Failed */
};

/* Claim among `candidates` (pods it controls and orphans; others are
 * ignored). Returns 0 or KCM_ENOMEM. */
int kcm_replicaset_claim(const struct kcm_replicaset *rs, struct kcm_pod *const *candidates,
                         size_t n, struct kcm_replicaset_claim *out);
void kcm_replicaset_claim_release(struct kcm_replicaset_claim *c);

/* The steps of a sync (see the top of this file). */
enum kcm_replicaset_op {
  KCM_REPLICASET_RECHECK, /* read the ReplicaSet again before adopting */
  KCM_REPLICASET_ADOPT,   /* claim.adopt[index] */
  KCM_REPLICASET_RELEASE, /* claim.release[index] */
  KCM_REPLICASET_EXPECT,  /* expect the creates or deletes that follow; no request */
  KCM_REPLICASET_CREATE,  /* a pod from the template */
  KCM_REPLICASET_DELETE,  /* order[index] */
  KCM_REPLICASET_STATUS,  /* the status, from the pods left; written when it changed */
};

struct kcm_replicaset_step {
  struct kcm_runtime_step at; /* claims at once; each create batch a wave, the creates
                                 one group; the deletes at once */
  enum kcm_replicaset_op op;
  uint32_t index;
};

struct kcm_replicaset_plan {
  struct kcm_replicaset_claim claim;
  struct kcm_replicaset_step *steps; /* owned */
  size_t nsteps;
  int32_t change;           /* creates (> 0) or deletes (< 0) planned */
  struct kcm_pod **order;   /* deletes: the claimed pods, the -change first to delete
                               first (owned array) */
  uint64_t wait_ms;         /* creates held back while pods keep failing: sync again
                               after this; 0: none */
  /* Creates: the pod to create (kcm_replicaset_pod_body()), its name the
   * name_len bytes at name_at; pod_err when it could not be made. */
  struct kcm_buf pod_body;
  size_t name_at, name_len;
  int pod_err;
};

struct kcm_replicaset_input {
  const struct kcm_replicaset *rs;
  /* the pods it controls and the orphans of its namespace (others are ignored) */
  struct kcm_pod *const *candidates;
  size_t ncandidates;
  bool satisfied;           /* the expectations: the cache saw earlier creates and deletes */
  uint64_t create_wait_ms;  /* its pods keep failing: creates wait this long; 0: none */
  /* The pods ranked with its own when choosing whom to delete (a malloc'd
   * array, *n set; NULL on ENOMEM): see kcm_replicaset_rank. */
  struct kcm_pod **(*related)(void *ctx, const struct kcm_replicaset_claim *claim, size_t *n);
  void *ctx;
  uint64_t now_ms;
};

/* Plan a sync. Returns 0 or KCM_ENOMEM (out released). */
int kcm_replicaset_plan(const struct kcm_replicaset_input *in, struct kcm_replicaset_plan *out);
void kcm_replicaset_plan_release(struct kcm_replicaset_plan *p);

/* Sort pods so those best deleted come first (upstream's
 * ActivePodsWithRanks): unscheduled, then Pending < Unknown < Running, not
 * ready, lower deletion cost, more related pods on the same node, ready for
 * a shorter time (log2 buckets, uid to break ties), more restarts, newer. */
void kcm_replicaset_rank(struct kcm_pod **pods, size_t n, struct kcm_pod *const *related,
                         size_t nrelated, uint64_t now_ms);



/* The replica change to make: creates (> 0) or deletes (< 0), capped at
 * burst; 0 when nothing should change. */
int32_t kcm_replicaset_diff(const struct kcm_replicaset *rs, size_t active, int32_t burst);

/* The status the ReplicaSet should have, with `claimed` its pods and
 * `made` more that the API server has made and its cache does not hold
 * yet (from the template: fully labeled, not ready). manage_failed with
 * the error's message sets ReplicaFailure (FailedCreate when `change`,
 * the value of kcm_replicaset_diff(), was a creation, else FailedDelete)
 * unless one exists; success removes it. */
struct kcm_replicaset_status {
  int32_t replicas;
  int32_t fully_labeled;
  int32_t ready;
  int32_t available;
  int32_t terminating; /* status.terminatingReplicas; -1: not written */
  int64_t observed_generation;
  struct kcm_conditions conditions; /* owned */
};

int kcm_replicaset_status(const struct kcm_replicaset *rs, struct kcm_pod *const *claimed,
                          size_t n, int32_t made, int32_t change, bool manage_failed,
                          const char *message, uint64_t now_ms,
                          struct kcm_replicaset_status *out);
/* Whether s differs from the status written; terminatingReplicas counts
 * only when s writes it (s->terminating >= 0). */
bool kcm_replicaset_status_changed(const struct kcm_replicaset *rs,
                                   const struct kcm_replicaset_status *s);
/* Whether s differs from the written status only by more pods (replicas,
 * fully labeled, ready, available) or another count of terminating pods,
 * which no decision reads: a write that may wait (see
 * --status-write-interval). A change of the observed generation or of a
 * condition, and any other count going down, may not: what reads the
 * status would see more than there is. */
bool kcm_replicaset_status_only_gains(const struct kcm_replicaset *rs,
                                      const struct kcm_replicaset_status *s);
/* Whether s observes a newer generation than the written status and
 * otherwise differs from it only as kcm_replicaset_status_only_gains()
 * allows: a spec change seen, with more pods made for it, none gone. What
 * reads the status sees less than there is until it is written, so the
 * write may wait an interval from the sync that first saw the generation
 * (see kcm_pacer_hold()), and goes with the step's end when that comes
 * first. */
bool kcm_replicaset_status_observes_gains(const struct kcm_replicaset *rs,
                                          const struct kcm_replicaset_status *s);
/* Whether s reports the spec met: the generation observed and as many
 * pods, all available, as spec.replicas asks, where the written status did
 * not, or with none left terminating. Such a status ends a rollout's step,
 * so it is written at once, never paced; once the spec is met, while pods
 * a step removed are still terminating, each one gone is a count that may
 * wait. */
bool kcm_replicaset_status_meets_spec(const struct kcm_replicaset *rs,
                                      const struct kcm_replicaset_status *s);
void kcm_replicaset_status_release(struct kcm_replicaset_status *s);
/* The merge patch writing s, guarded by the ReplicaSet's resourceVersion
 * when `guarded` (the retry after a conflict is not, as upstream's is made
 * on the object read again). */
int kcm_replicaset_status_patch(const struct kcm_replicaset *rs,
                                const struct kcm_replicaset_status *s, bool guarded,
                                struct kcm_buf *out);


/* --- kcm why ---------------------------------------------------------------------------- */

struct kcm_controllers_why;
struct kcm_jsonw;

#define KCM_REPLICASET_WHY_PODS 5 /* pods shown in text and read whole; the rest counted */

/* kcm why: member key of JSON object j, text from an object as the
 * terminal may show it (kcm_log_plain(), at most 300 bytes); NULL as "". */
void kcm_replicaset_why_json_text(struct kcm_jsonw *j, const char *key, const char *text);

/* Whether pod p holds the object `kcm why` asks about back. */
typedef bool (*kcm_replicaset_why_holds)(const void *ctx, const struct kcm_pod *p);

/* kcm why: the pods of in's namespace that `holds` picks, each in a few
 * words (its phase; terminating, not scheduled, not ready, or ready for how
 * long of min_ready) and, for the first KCM_REPLICASET_WHY_PODS, the lines
 * of what its whole status says (kcm_api_pod_why(), read through
 * in->text()): as text into out ("  held back by:", "    pod NAME: ...",
 * its lines indented, the rest counted), or with j set as the JSON member
 * "heldBy", an array of {pod, why, restarts, reasons}. */
void kcm_replicaset_why_pods(const struct kcm_controllers_why *in, kcm_replicaset_why_holds holds,
                             const void *ctx, int32_t min_ready, struct kcm_buf *out,
                             struct kcm_jsonw *j);

/* kcm why: where kcm, as ReplicaSet rs's controller (NULL: none yet), acts
 * otherwise than kube-controller-manager would now (docs/differences.md):
 * pods of it failed (kcm's --failed-pod-backoff), and when something waits
 * for its status (waits), that status behind its pods
 * (--status-write-interval). As text lines into out, or with j set as the
 * JSON member "unlikeUpstream", an array of strings. */
void kcm_replicaset_why_upstream(const struct kcm_controllers_why *in,
                                 const struct kcm_replicaset *rs, bool waits,
                                 struct kcm_buf *out, struct kcm_jsonw *j);

/* kcm why for a ReplicaSet, its row's why() (kcm/controllers.h): from
 * kcm_replicaset_plan() on the caches, with the expectations taken as met,
 * the pods it would create, delete, adopt or release next, or that it is
 * complete (every replica available) or waits for pods to be available;
 * the pods that hold it; the owner that sets its replicas; ReplicaFailure.
 * *ended is 1 once complete. */
int kcm_replicaset_explain(const struct kcm_controllers_why *in, struct kcm_buf *out, int *ended);

/* --- the controller -------------------------------------------------------------------- */


struct kcm_replicaset_controller {
  struct kcm_runtime rt;         /* its workers, queue and syncs */
  struct kcm_informer *rs_informer;
  struct kcm_informer *pod_informer;
  struct kcm_expectations expectations;
  struct kcm_pacer status_pacer; /* --status-write-interval */
  struct kcm_crashloop failing;  /* --failed-pod-backoff */
  struct kcm_json json;          /* reads pods an AlreadyExists named */
  uint32_t (*draw)(uint32_t n);  /* a uniform draw in [0, n) for pod names:
                                    arc4random_uniform (tests script it) */
  struct kcm_runtime_field terminating; /* whether the server keeps
                                           status.terminatingReplicas */
  struct {
    uint64_t creates;
    uint64_t deletes;
    uint64_t status_writes;
    uint64_t status_paced; /* status writes folded into a later one */
    uint64_t backoffs;     /* waves of failed pods that held creates back */
  } stats;
};

struct kcm_replicaset_options {
  uint32_t workers;             /* --concurrent-replicaset-syncs; 0: 5 */
  uint64_t status_interval_ms;  /* --status-write-interval */
  uint64_t failed_backoff_ms;   /* --failed-pod-backoff: the longest wait; 0: none */
};

/* Register with the informers (before they start). Every request,
 * events included, goes through writer. Borrowed pointers must outlive the
 * controller. */
int kcm_replicaset_controller_init(struct kcm_replicaset_controller *c, uv_loop_t *loop,
                                   struct kcm_writer *writer, struct kcm_informer *rs_informer,
                                   struct kcm_informer *pod_informer, struct kcm_intern *pool,
                                   const struct kcm_replicaset_options *opts);
/* Run it with kcm_runtime_run(&c->rt) once the caches have synced; stop
 * it with kcm_runtime_stop(&c->rt, ...). */
void kcm_replicaset_controller_release(struct kcm_replicaset_controller *c);

#endif
