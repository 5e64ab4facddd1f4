/* api/kind_pod.c — the Pod's row of the kinds. */
#include <stddef.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/intern.h"

static size_t no_counts(const struct kcm_object *o, struct kcm_api_count *out) {
  (void)o;
  (void)out;
  return 0;
}

static void release(struct kcm_object *o, struct kcm_intern *pool) {
  kcm_intern_put(pool, ((struct kcm_pod *)o)->node);
}

static size_t held(const struct kcm_object *o) {
  (void)o;
  return 0;
}

const struct kcm_api_kind kcm_api_kind_pod = {
    .kind = KCM_KIND_POD,
    .name = "Pod",
    .singular = "pod",
    .group = "",
    .version = "v1",
    .plural = "pods",
    .prefix = "/api/v1",
    .api_version = "v1",
    .size = sizeof(struct kcm_pod),
    .decode_proto = kcm_api_decode_pod_proto,
    .decode_at = kcm_api_decode_pod_at,
    .counts = no_counts,
    .release = release,
    .held = held,
};
