/* api/kind_deployment.c — the Deployment's row of the kinds, and its fields
 * (apps/v1 Deployment in upstream's generated.proto; see workload.h). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/labels.h"
#include "workload.h"

/* --- its fields ------------------------------------------------------------------------ */

struct dp_read {
  struct kcm_api_workload w; /* first: the shared handlers take the same obj */
  struct kcm_deployment *dp;
  enum { STRATEGY_NONE, STRATEGY_RECREATE, STRATEGY_ROLLING, STRATEGY_OTHER } strategy;
};

static int history(struct kcm_api_src *s, void *obj) {
  struct dp_read *r = obj;
  return kcm_api_workload_count(s, "spec.revisionHistoryLimit", &r->dp->revision_history_limit);
}

static int deadline(struct kcm_api_src *s, void *obj) {
  struct dp_read *r = obj;
  return kcm_api_workload_count(s, "spec.progressDeadlineSeconds", &r->dp->progress_deadline);
}

static int paused(struct kcm_api_src *s, void *obj) {
  struct dp_read *r = obj;
  return kcm_api_src_bool(s, "spec.paused", &r->dp->paused);
}

/* maxSurge or maxUnavailable: an integer or a percentage (JSON only). */
static int intstr(struct kcm_api_src *s, const char *field, struct kcm_intstr *out) {
  const char *p;
  size_t n;
  int64_t v = 0;
  int rc;
  if (!s->j)
    return kcm_api_src_fail(s, field, "is not read from protobuf");
  if (kcm_json_null(s->j))
    return 0;
  out->set = true;
  out->percent = false;
  if (kcm_json_peek(s->j) == KCM_JSON_NUMBER) {
    rc = kcm_json_int(s->j, &v);
    if (rc == KCM_ETOOBIG || (!rc && (v < 0 || v > INT32_MAX)))
      return kcm_api_src_fail(s, field, "out of range");
    if (!rc) {
      out->value = (int32_t)v;
      return 1;
    }
  } else if (kcm_json_string(s->j, &p, &n) && kcm_api_parse_percent(p, &out->value)) {
    out->percent = true;
    return 1;
  }
  return kcm_api_src_mismatch(s, field, "must be an integer or a percentage");
}

static int max_surge(struct kcm_api_src *s, void *obj) {
  struct dp_read *r = obj;
  return intstr(s, "spec.strategy.rollingUpdate.maxSurge", &r->dp->max_surge);
}

static int max_unavailable(struct kcm_api_src *s, void *obj) {
  struct dp_read *r = obj;
  return intstr(s, "spec.strategy.rollingUpdate.maxUnavailable", &r->dp->max_unavailable);
}

static const struct kcm_api_field rolling_update_list[] = {
    KCM_API_FIELD("maxUnavailable", 0, max_unavailable),
    KCM_API_FIELD("maxSurge", 0, max_surge),
};

static int strategy_type(struct kcm_api_src *s, void *obj) {
  struct dp_read *r = obj;
  const char *p;
  size_t n;
  int rc = kcm_api_src_string(s, "spec.strategy.type", &p, &n);
  r->strategy = rc <= 0                                           ? STRATEGY_NONE
                : kcm_api_src_cstr_is(p, n, "Recreate")         ? STRATEGY_RECREATE
                : kcm_api_src_cstr_is(p, n, "RollingUpdate")    ? STRATEGY_ROLLING
                                                                : STRATEGY_OTHER;
  return rc;
}

static const struct kcm_api_field strategy_list[] = {
    KCM_API_FIELD("type", 1, strategy_type),
    KCM_API_MESSAGE("rollingUpdate", 2, "spec.strategy.rollingUpdate", rolling_update_list),
};

static int status_int(struct kcm_api_src *s, const char *field, int32_t *out) {
  int64_t v = 0;
  int rc = kcm_api_src_int(s, field, INT32_MIN, INT32_MAX, &v);
  if (rc > 0)
    *out = (int32_t)v;
  return rc;
}

static int updated(struct kcm_api_src *s, void *obj) {
  struct dp_read *r = obj;
  return status_int(s, "status.updatedReplicas", &r->dp->status.updated);
}

static int unavailable(struct kcm_api_src *s, void *obj) {
  struct dp_read *r = obj;
  return status_int(s, "status.unavailableReplicas", &r->dp->status.unavailable);
}

static int collisions(struct kcm_api_src *s, void *obj) {
  struct dp_read *r = obj;
  return kcm_api_workload_count(s, "status.collisionCount", &r->dp->status.collision_count);
}

static const struct kcm_api_field condition_list[] = {
    KCM_API_FIELD("type", 1, kcm_api_workload_condition_type),
    KCM_API_FIELD("status", 2, kcm_api_workload_condition_status),
    KCM_API_FIELD("reason", 4, kcm_api_workload_condition_reason),
    KCM_API_FIELD("message", 5, kcm_api_workload_condition_message),
    KCM_API_FIELD("lastUpdateTime", 6, kcm_api_workload_condition_updated),
    KCM_API_FIELD("lastTransitionTime", 7, kcm_api_workload_condition_transitioned),
};

static int condition(struct kcm_api_src *s, void *obj) {
  return kcm_api_workload_condition(s, obj, KCM_API_FIELDS(condition_list));
}

static int conditions(struct kcm_api_src *s, void *obj) {
  return kcm_api_src_list(s, "status.conditions", condition, obj);
}

static const struct kcm_api_field spec_list[] = {
    KCM_API_FIELD("replicas", 1, kcm_api_workload_replicas),
    KCM_API_FIELD("selector", 0, kcm_api_workload_selector),
    KCM_API_FIELD("template", 0, kcm_api_workload_template),
    KCM_API_MESSAGE("strategy", 4, "spec.strategy", strategy_list),
    KCM_API_FIELD("minReadySeconds", 5, kcm_api_workload_min_ready),
    KCM_API_FIELD("revisionHistoryLimit", 6, history),
    KCM_API_FIELD("paused", 7, paused),
    KCM_API_FIELD("progressDeadlineSeconds", 9, deadline),
};

static const struct kcm_api_field status_list[] = {
    KCM_API_FIELD("observedGeneration", 1, kcm_api_workload_observed),
    KCM_API_FIELD("replicas", 2, kcm_api_workload_count_replicas),
    KCM_API_FIELD("updatedReplicas", 3, updated),
    KCM_API_FIELD("availableReplicas", 4, kcm_api_workload_available),
    KCM_API_FIELD("unavailableReplicas", 5, unavailable),
    KCM_API_FIELD("conditions", 6, conditions),
    KCM_API_FIELD("readyReplicas", 7, kcm_api_workload_ready),
    KCM_API_FIELD("collisionCount", 8, collisions),
    KCM_API_FIELD("terminatingReplicas", 9, kcm_api_workload_terminating),
};

static const struct kcm_api_field deployment_list[] = {
    KCM_API_FIELD("metadata", 1, kcm_api_workload_metadata),
    KCM_API_MESSAGE("spec", 2, "spec", spec_list),
    KCM_API_MESSAGE("status", 3, "status", status_list),
};

static int decode_text(const char *text, size_t len, struct kcm_json *j,
                       struct kcm_api_memo *memo, struct kcm_intern *pool,
                       struct kcm_object **out, struct kcm_api_error *err) {
  struct kcm_api_src s = {.j = j, .pool = pool, .err = err};
  struct kcm_deployment *dp = calloc(1, sizeof(*dp));
  struct dp_read r;
  int rc;
  if (!dp)
    return KCM_ENOMEM;
  dp->o.kind = KCM_KIND_DEPLOYMENT;
  dp->o.refs = 1;
  dp->replicas = 1;
  dp->revision_history_limit = -1;
  dp->progress_deadline = -1;
  dp->status.collision_count = -1;
  dp->status.terminating = -1;
  memset(&r, 0, sizeof(r));
  r.dp = dp;
  KCM_API_WORKLOAD_POINT(&r.w, dp);
  r.w.parts = (struct kcm_api_parts){&dp->selector, &dp->template, &dp->template_key, NULL,
                                     &dp->selector_json};
  rc = kcm_api_workload_decode(&s, &r.w, &r, text, len, memo, KCM_API_FIELDS(deployment_list));
  if (!rc && r.strategy == STRATEGY_OTHER)
    rc = kcm_api_src_fail(&s, "spec.strategy.type", "must be Recreate or RollingUpdate");
  if (rc) {
    kcm_api_unref(&dp->o, pool);
    return rc;
  }
  dp->recreate = r.strategy == STRATEGY_RECREATE;
  *out = &dp->o;
  return 0;
}

/* --- its row --------------------------------------------------------------------------- */

static size_t counts(const struct kcm_object *o, struct kcm_api_count *out) {
  const struct kcm_deployment *d = (const struct kcm_deployment *)o;
  out[0] = (struct kcm_api_count){"replicas", d->status.replicas};
  out[1] = (struct kcm_api_count){"updatedReplicas", d->status.updated};
  out[2] = (struct kcm_api_count){"readyReplicas", d->status.ready};
  out[3] = (struct kcm_api_count){"availableReplicas", d->status.available};
  out[4] = (struct kcm_api_count){"unavailableReplicas", d->status.unavailable};
  out[5] = (struct kcm_api_count){"terminatingReplicas", d->status.terminating};
  out[6] = (struct kcm_api_count){"collisionCount", d->status.collision_count};
  out[7] = (struct kcm_api_count){"observedGeneration", d->status.observed_generation};
  return 8;
}

static void release(struct kcm_object *o, struct kcm_intern *pool) {
  struct kcm_deployment *d = (struct kcm_deployment *)o;
  kcm_api_writers_release(&d->writers, pool);
  kcm_api_pairs_release(&d->annotations);
  kcm_labels_selector_release(&d->selector);
  free(d->template);
  free(d->selector_json);
  kcm_api_conditions_release(&d->status.conditions);
}

static size_t held(const struct kcm_object *o) {
  const struct kcm_deployment *d = (const struct kcm_deployment *)o;
  return kcm_api_pairs_size(&d->annotations) + strlen(d->template) + 1 +
         (d->selector_json ? strlen(d->selector_json) + 1 : 0) +
         d->status.conditions.n * sizeof(struct kcm_condition);
}

const struct kcm_api_kind kcm_api_kind_deployment = {
    .kind = KCM_KIND_DEPLOYMENT,
    .name = "Deployment",
    .singular = "deployment",
    .short_name = "deploy",
    .group = "apps",
    .version = "v1",
    .plural = "deployments",
    .prefix = "/apis/apps/v1",
    .api_version = "apps/v1",
    .size = sizeof(struct kcm_deployment),
    .patch_as_update = true,
    .writers_at = offsetof(struct kcm_deployment, writers),
    .replicas_at = offsetof(struct kcm_deployment, replicas),
    .decode_text = decode_text,
    .counts = counts,
    .release = release,
    .held = held,
};
