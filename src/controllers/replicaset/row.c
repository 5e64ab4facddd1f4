/*
 * The ReplicaSet controller's row: its flags, and what kcm's table of
 * controllers needs of it (see kcm/controllers.h).
 */
#include <stddef.h>

#include "kcm/controllers.h"
#include "kcm/replicaset.h"

struct settings {
  int workers;
  uint64_t status_interval_ms, failed_backoff_ms;
};

#define AT(field) offsetof(struct settings, field)

static const struct kcm_options_flag flags[] = {
    {"ReplicaSet controller flags", "concurrent-replicaset-syncs", "N", KCM_OPTIONS_POSITIVE,
     AT(workers), "ReplicaSets synced at once (default 5)"},
    {NULL, "status-write-interval", "D", KCM_OPTIONS_DURATION, AT(status_interval_ms),
     "a ReplicaSet status write that only reports more pods (created,\n"
     "ready, available) or fewer terminating, short of its spec, waits\n"
     "until D after the last one; 0 writes it at once, as\n"
     "kube-controller-manager (default 1s;\n"
     "longer while many move)"},
    {NULL, "failed-pod-backoff", "D", KCM_OPTIONS_DURATION, AT(failed_backoff_ms),
     "when a ReplicaSet's pods keep failing, wait 1s, 2s, 4s, ... up to\n"
     "D before creating replacements; 0 replaces at once, as\n"
     "kube-controller-manager (default 5m)"},
};

static const struct settings defaults = {5, 1000, 300000};

static int init(void *c, const struct kcm_controllers_env *e) {
  const struct settings *s = e->settings;
  struct kcm_replicaset_options ro = {(uint32_t)s->workers, s->status_interval_ms,
                                      s->failed_backoff_ms};
  return kcm_replicaset_controller_init(c, e->loop, e->writer, &e->informers[KCM_KIND_REPLICASET],
                                        &e->informers[KCM_KIND_POD], e->pool, &ro);
}

static struct kcm_runtime *runtime(void *c) {
  return &((struct kcm_replicaset_controller *)c)->rt;
}

static size_t pacers(const void *c, const struct kcm_pacer **p, const char **names) {
  p[0] = &((const struct kcm_replicaset_controller *)c)->status_pacer;
  names[0] = "status";
  return 1;
}

static void release(void *c) { kcm_replicaset_controller_release(c); }

/* The names are kube-controller-manager's, as the Deployment controller's. */
const struct kcm_controllers_row kcm_replicaset_row = {
    .options = {"replicaset", (const char *const[]){"replicaset", "replicaset-controller", NULL},
                flags, sizeof(flags) / sizeof(flags[0]), &defaults, sizeof(defaults)},
    .kind = KCM_KIND_REPLICASET,
    .guarded = true,
    .dependents = KCM_KIND_POD,
    .account = "replicaset-controller",
    .kinds = 1u << KCM_KIND_REPLICASET | 1u << KCM_KIND_POD,
    .size = sizeof(struct kcm_replicaset_controller),
    .init = init,
    .runtime = runtime,
    .pacers = pacers,
    .release = release,
    .why = kcm_replicaset_explain,
};
