/*
 * controllers/deployment/internal.h — what the planning files share: the
 * state of one sync and the steps of upstream's syncDeployment they call
 * across files. Not installed; include/kcm/deployment.h is the interface.
 *
 *   plan.c         the entry point, claiming, and the rollout paths
 *   replicasets.c  the new ReplicaSet, annotations, scaling, history cleanup
 *   progress.c     conditions and status
 *   rollback.c     the legacy rollbackTo annotation
 *   why.c          what a rollout waits for, asked of the planner
 *
 * and what the controller (controller.c) shares with `kcm why` (explain.c).
 */
#ifndef KCM_DEPLOYMENT_INTERNAL_H
#define KCM_DEPLOYMENT_INTERNAL_H

#include <stdint.h>

#include "kcm/api.h"
#include "kcm/deployment.h"
#include "kcm/error.h"

struct kcm_informer;

#define PROGRESSING "Progressing"
#define AVAILABLE "Available"
#define REPLICA_FAILURE "ReplicaFailure"
#define TIMED_OUT "ProgressDeadlineExceeded"
#define NEW_RS_AVAILABLE "NewReplicaSetAvailable"
#define PAUSED "DeploymentPaused"

/* The state of one sync: the plan being built and the Deployment's status
 * and revision annotation as the sync has changed them so far. */
struct dp_sync {
  const struct kcm_deployment_input *in;
  const struct kcm_deployment *d;
  struct kcm_deployment_plan *p;
  struct kcm_deployment_status *st;
  int *old;          /* indexes of the old ReplicaSets */
  size_t nold;
  int64_t now_s;
  uint32_t group;    /* of the steps being added */
  uint32_t wave;     /* of the last step added */
  int err;
};

/* A planned ReplicaSet and its status (zero for the one being created). */
static inline struct kcm_deployment_rs *view(struct dp_sync *s, int i) { return &s->p->rs[i]; }

static inline int32_t status_replicas(const struct kcm_deployment_rs *r) {
  return r->rs ? r->rs->status.replicas : 0;
}
static inline int32_t status_ready(const struct kcm_deployment_rs *r) {
  return r->rs ? r->rs->status.ready : 0;
}
static inline int32_t status_available(const struct kcm_deployment_rs *r) {
  return r->rs ? r->rs->status.available : 0;
}

static inline bool has_deadline(const struct kcm_deployment *d) {
  return d->progress_deadline >= 0 && d->progress_deadline != INT32_MAX;
}

static inline bool has_history_limit(const struct kcm_deployment *d) {
  return d->revision_history_limit >= 0 && d->revision_history_limit != INT32_MAX;
}

static inline void nomem(struct dp_sync *s) { s->err = KCM_ENOMEM; }

/* A condition built from constant strings; set_condition() copies it. */
static inline char *mut(const char *s) { return (char *)(uintptr_t)s; }

typedef bool (*dp_less)(struct dp_sync *s, int a, int b);

/* plan.c: steps, orders and lists */
/* An annotation read as upstream reads a replica count: decimal digits
 * only, at most 2^31 - 1; false for anything else. */
bool dp_int_annotation(const struct kcm_deployment_rs *r, const char *key, int32_t *out);
struct kcm_deployment_step *dp_add_step(struct dp_sync *s, enum kcm_deployment_op op);
void dp_set_message(struct dp_sync *s, struct kcm_deployment_step *st, const char *reason,
                    bool warning, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void dp_event(struct dp_sync *s, bool warning, const char *reason, const char *message);
int64_t dp_sum_spec(struct dp_sync *s, const int *l, size_t n);
size_t dp_filter_active(struct dp_sync *s, const int *l, size_t n, int *out);
void dp_sort(struct dp_sync *s, int *l, size_t n, dp_less less);
bool dp_by_creation_newest(struct dp_sync *s, int a, int b);
bool dp_by_size_older(struct dp_sync *s, int a, int b);
bool dp_by_size_newer(struct dp_sync *s, int a, int b);
bool dp_by_revision(struct dp_sync *s, int a, int b);
size_t dp_all_of(struct dp_sync *s, int new_rs, int *all);

/* replicasets.c */
bool dp_skip_annotation(const char *key);
bool dp_set_annotation(struct dp_sync *s, struct kcm_pairs *a, const char *key, const char *v);
bool dp_scale_to(struct dp_sync *s, int i, int32_t from, int32_t to);
bool dp_template_of_equal(struct dp_sync *s, const struct kcm_deployment_rs *r);
int32_t dp_new_rs_replicas(struct dp_sync *s, const int *all, size_t n, int new_rs);
int dp_get_new_rs(struct dp_sync *s, bool create);
void dp_cleanup(struct dp_sync *s);
void dp_scale(struct dp_sync *s, int new_rs);

/* progress.c */
void dp_set_condition(struct dp_sync *s, struct kcm_conditions *c, const struct kcm_condition *n);
void dp_new_condition(struct dp_sync *s, struct kcm_conditions *c, const char *type,
                      const char *status, const char *reason, const char *fmt,
                      ...) __attribute__((format(printf, 6, 7)));
bool dp_reason_is(const struct kcm_conditions *c, const char *type, const char *reason);
bool dp_deployment_complete(const struct kcm_deployment *d, const struct kcm_deployment_status *st);
void dp_status_release(struct kcm_deployment_status *st);
bool dp_status_equal(const struct kcm_deployment_status *a, const struct kcm_deployment_status *b);
void dp_cached_status(const struct kcm_deployment *d, struct kcm_deployment_status *out);
void dp_sync_status(struct dp_sync *s, const int *l, size_t n, int new_rs);
void dp_sync_rollout_status(struct dp_sync *s, const int *l, size_t n, int new_rs);
void dp_write_status(struct dp_sync *s, bool lenient);

/* rollback.c */
void dp_rollback(struct dp_sync *s, int *all, int64_t target);

/* controller.c: whether ReplicaSet rs of Deployment d still has a pod in
 * the cache `pods` that is not done (Recreate's wait); seen, if set, is
 * called with each of its pods looked at. */
bool dp_pods_running(struct kcm_informer *pods, const struct kcm_deployment *d,
                     const struct kcm_replicaset *rs,
                     void (*seen)(void *ctx, struct kcm_object *pod), void *ctx);

/* --- pure steps the tests drive too ---------------------------------------------------- */

/* An int-or-percent scaled against total: a percentage rounds up or down. */
int32_t kcm_deployment_scaled(const struct kcm_intstr *v, int32_t total, bool round_up);

/* maxSurge (rounded up) and maxUnavailable (rounded down) for `desired`;
 * when both are 0, maxUnavailable is 1. */
void kcm_deployment_fenceposts(const struct kcm_intstr *surge, const struct kcm_intstr *unavail,
                               int32_t desired, int32_t *max_surge, int32_t *max_unavailable);

/* Whether the plan's status only reports a rollout's progress: counts
 * moved, with the same observed generation, collision count, revision
 * and conditions (but the Progressing one's lastUpdateTime), and either
 * neither the cached status nor the planned one complete, or both, with
 * only fewer pods terminating, some still. Such a write may wait; a
 * departure from a complete status, an arrival at one, or the last
 * terminating pod gone, may not. */
bool kcm_deployment_status_progress(const struct kcm_deployment *d,
                                    const struct kcm_deployment_plan *p);

#endif
