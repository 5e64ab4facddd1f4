/* api/kind_replicaset.c — the ReplicaSet's row of the kinds, and its fields
 * (apps/v1 ReplicaSet in upstream's generated.proto; see workload.h). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/labels.h"
#include "workload.h"

/* --- its fields ------------------------------------------------------------------------ */

struct rs_read {
  struct kcm_api_workload w; /* first: the shared handlers take the same obj */
  struct kcm_replicaset *rs;
};

static int fully_labeled(struct kcm_api_src *s, void *obj) {
  struct rs_read *r = obj;
  int64_t v = 0;
  int rc = kcm_api_src_int(s, "status.fullyLabeledReplicas", INT32_MIN, INT32_MAX, &v);
  if (rc > 0)
    r->rs->status.fully_labeled = (int32_t)v;
  return rc;
}

static const struct kcm_api_field condition_list[] = {
    KCM_API_FIELD("type", 1, kcm_api_workload_condition_type),
    KCM_API_FIELD("status", 2, kcm_api_workload_condition_status),
    KCM_API_FIELD("lastTransitionTime", 3, kcm_api_workload_condition_transitioned),
    KCM_API_FIELD("reason", 4, kcm_api_workload_condition_reason),
    KCM_API_FIELD("message", 5, kcm_api_workload_condition_message),
    KCM_API_FIELD("lastUpdateTime", 0, kcm_api_workload_condition_updated),
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
    KCM_API_FIELD("minReadySeconds", 4, kcm_api_workload_min_ready),
};

static const struct kcm_api_field status_list[] = {
    KCM_API_FIELD("replicas", 1, kcm_api_workload_count_replicas),
    KCM_API_FIELD("fullyLabeledReplicas", 2, fully_labeled),
    KCM_API_FIELD("observedGeneration", 3, kcm_api_workload_observed),
    KCM_API_FIELD("readyReplicas", 4, kcm_api_workload_ready),
    KCM_API_FIELD("availableReplicas", 5, kcm_api_workload_available),
    KCM_API_FIELD("conditions", 6, conditions),
    KCM_API_FIELD("terminatingReplicas", 7, kcm_api_workload_terminating),
};

static const struct kcm_api_field replicaset_list[] = {
    KCM_API_FIELD("metadata", 1, kcm_api_workload_metadata),
    KCM_API_MESSAGE("spec", 2, "spec", spec_list),
    KCM_API_MESSAGE("status", 3, "status", status_list),
};

static int decode_text(const char *text, size_t len, struct kcm_json *j,
                       struct kcm_api_memo *memo, struct kcm_intern *pool,
                       struct kcm_object **out, struct kcm_api_error *err) {
  struct kcm_api_src s = {.j = j, .pool = pool, .err = err};
  struct kcm_replicaset *rs = calloc(1, sizeof(*rs));
  struct rs_read r;
  int rc;
  if (!rs)
    return KCM_ENOMEM;
  rs->o.kind = KCM_KIND_REPLICASET;
  rs->o.refs = 1;
  rs->replicas = 1;
  rs->status.terminating = -1;
  memset(&r, 0, sizeof(r));
  r.rs = rs;
  KCM_API_WORKLOAD_POINT(&r.w, rs);
  r.w.parts = (struct kcm_api_parts){&rs->selector, &rs->template, &rs->template_key,
                                     &rs->template_labels, NULL};
  rc = kcm_api_workload_decode(&s, &r.w, &r, text, len, memo, KCM_API_FIELDS(replicaset_list));
  if (rc) {
    kcm_api_unref(&rs->o, pool);
    return rc;
  }
  *out = &rs->o;
  return 0;
}

/* --- its row --------------------------------------------------------------------------- */

static size_t counts(const struct kcm_object *o, struct kcm_api_count *out) {
  const struct kcm_replicaset *rs = (const struct kcm_replicaset *)o;
  out[0] = (struct kcm_api_count){"replicas", rs->status.replicas};
  out[1] = (struct kcm_api_count){"fullyLabeledReplicas", rs->status.fully_labeled};
  out[2] = (struct kcm_api_count){"readyReplicas", rs->status.ready};
  out[3] = (struct kcm_api_count){"availableReplicas", rs->status.available};
  out[4] = (struct kcm_api_count){"terminatingReplicas", rs->status.terminating};
  out[5] = (struct kcm_api_count){"observedGeneration", rs->status.observed_generation};
  return 6;
}

static void release(struct kcm_object *o, struct kcm_intern *pool) {
  struct kcm_replicaset *rs = (struct kcm_replicaset *)o;
  kcm_api_writers_release(&rs->writers, pool);
  kcm_api_pairs_release(&rs->annotations);
  kcm_labels_selector_release(&rs->selector);
  kcm_labels_release(&rs->template_labels, pool);
  free(rs->template);
  kcm_api_conditions_release(&rs->status.conditions);
}

static size_t held(const struct kcm_object *o) {
  const struct kcm_replicaset *rs = (const struct kcm_replicaset *)o;
  return kcm_api_pairs_size(&rs->annotations) + strlen(rs->template) + 1 +
         rs->template_labels.n * sizeof(struct kcm_label) +
         rs->status.conditions.n * sizeof(struct kcm_condition);
}

const struct kcm_api_kind kcm_api_kind_replicaset = {
    .kind = KCM_KIND_REPLICASET,
    .name = "ReplicaSet",
    .singular = "replicaset",
    .short_name = "rs",
    .group = "apps",
    .version = "v1",
    .plural = "replicasets",
    .prefix = "/apis/apps/v1",
    .api_version = "apps/v1",
    .size = sizeof(struct kcm_replicaset),
    .writers_at = offsetof(struct kcm_replicaset, writers),
    .replicas_at = offsetof(struct kcm_replicaset, replicas),
    .decode_text = decode_text,
    .counts = counts,
    .release = release,
    .held = held,
};
