/*
 * The Deployment controller's row: its flags, and what kcm's table of
 * controllers needs of it (see kcm/controllers.h).
 */
#include <stddef.h>

#include "kcm/controllers.h"
#include "kcm/deployment.h"

struct settings {
  int workers;
  uint64_t sync_interval_ms, status_interval_ms;
};

#define AT(field) offsetof(struct settings, field)

static const struct kcm_options_flag flags[] = {
    {"Deployment controller flags", "concurrent-deployment-syncs", "N", KCM_OPTIONS_POSITIVE,
     AT(workers), "Deployments synced at once (default 5)"},
    {NULL, "deployment-sync-interval", "D", KCM_OPTIONS_DURATION, AT(sync_interval_ms),
     "a Deployment whose ReplicaSets' status changes within D of its\n"
     "last writes, short of a ReplicaSet meeting its spec, syncs once D\n"
     "has passed, seeing them all at once; 0 syncs at once, as\n"
     "kube-controller-manager (default 1s; longer while many move)"},
    {NULL, "deployment-status-interval", "D", KCM_OPTIONS_DURATION, AT(status_interval_ms),
     "a Deployment status write that only reports a rollout's progress\n"
     "(counts, neither the last status nor the new one complete, or\n"
     "fewer old pods terminating once complete) waits until D after the\n"
     "last one; 0 writes it at once, as\n"
     "kube-controller-manager (default 1s; longer while many move)"},
};

static const struct settings defaults = {5, 1000, 1000};

static int init(void *c, const struct kcm_controllers_env *e) {
  const struct settings *s = e->settings;
  return kcm_deployment_controller_init(
      c, e->loop, e->writer, &e->informers[KCM_KIND_DEPLOYMENT],
      &e->informers[KCM_KIND_REPLICASET], &e->informers[KCM_KIND_POD], e->pool,
      (uint32_t)s->workers, s->sync_interval_ms, s->status_interval_ms);
}

static struct kcm_runtime *runtime(void *c) {
  return &((struct kcm_deployment_controller *)c)->rt;
}

static size_t pacers(const void *c, const struct kcm_pacer **p, const char **names) {
  const struct kcm_deployment_controller *dc = c;
  p[0] = &dc->sync_pacer;
  names[0] = "sync";
  p[1] = &dc->status_pacer;
  names[1] = "status";
  return 2;
}

static void release(void *c) { kcm_deployment_controller_release(c); }

/* The names are kube-controller-manager's: the older one, then that of
 * v1.29 on, which is also the User-Agent and service account upstream's
 * controller uses, so audit logs and field managers tell who wrote what. */
const struct kcm_controllers_row kcm_deployment_row = {
    .options = {"deployment", (const char *const[]){"deployment", "deployment-controller", NULL},
                flags, sizeof(flags) / sizeof(flags[0]), &defaults, sizeof(defaults)},
    .kind = KCM_KIND_DEPLOYMENT,
    .guarded = true,
    .dependents = KCM_KIND_REPLICASET,
    .account = "deployment-controller",
    .kinds = 1u << KCM_KIND_DEPLOYMENT | 1u << KCM_KIND_REPLICASET | 1u << KCM_KIND_POD,
    .size = sizeof(struct kcm_deployment_controller),
    .init = init,
    .runtime = runtime,
    .pacers = pacers,
    .release = release,
    .why = kcm_deployment_explain,
};
