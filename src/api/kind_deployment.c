/* api/kind_deployment.c — the Deployment's row of the kinds. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/labels.h"

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
    .group = "apps",
    .version = "v1",
    .plural = "deployments",
    .prefix = "/apis/apps/v1",
    .api_version = "apps/v1",
    .size = sizeof(struct kcm_deployment),
    .patch_as_update = true,
    .writers_at = offsetof(struct kcm_deployment, writers),
    .replicas_at = offsetof(struct kcm_deployment, replicas),
    .counts = counts,
    .release = release,
    .held = held,
};
