/* api/kind_replicaset.c — the ReplicaSet's row of the kinds. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/labels.h"

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
    .group = "apps",
    .version = "v1",
    .plural = "replicasets",
    .prefix = "/apis/apps/v1",
    .api_version = "apps/v1",
    .size = sizeof(struct kcm_replicaset),
    .writers_at = offsetof(struct kcm_replicaset, writers),
    .replicas_at = offsetof(struct kcm_replicaset, replicas),
    .counts = counts,
    .release = release,
    .held = held,
};
