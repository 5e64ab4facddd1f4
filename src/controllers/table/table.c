/*
 * The table of kcm's controllers: one row each, and the few lines that
 * build each controller from the flags.
 */
#include "kcm/controllers.h"
#include "kcm/deployment.h"
#include "kcm/replicaset.h"

#define KIND(k) (1u << (k))

/* --- Deployment ------------------------------------------------------------------------------ */

static int deployment_init(void *c, const struct kcm_controllers_env *e) {
  const struct kcm_options *o = e->opt;
  return kcm_deployment_controller_init(
      c, e->loop, e->writer, &e->informers[KCM_KIND_DEPLOYMENT],
      &e->informers[KCM_KIND_REPLICASET], &e->informers[KCM_KIND_POD], e->pool,
      (uint32_t)o->deployment_workers, o->deployment_interval_ms, o->deployment_status_interval_ms);
}

static struct kcm_runtime *deployment_runtime(void *c) {
  return &((struct kcm_deployment_controller *)c)->rt;
}

static size_t deployment_pacers(const void *c, const struct kcm_pacer **p, const char **names) {
  const struct kcm_deployment_controller *dc = c;
  p[0] = &dc->sync_pacer;
  names[0] = "sync";
  p[1] = &dc->status_pacer;
  names[1] = "status";
  return 2;
}

static void deployment_release(void *c) { kcm_deployment_controller_release(c); }

/* --- ReplicaSet ------------------------------------------------------------------------------ */

static int replicaset_init(void *c, const struct kcm_controllers_env *e) {
  const struct kcm_options *o = e->opt;
  struct kcm_replicaset_options ro = {(uint32_t)o->replicaset_workers, o->status_interval_ms,
                                      o->failed_pod_backoff_ms, o->shadow};
  return kcm_replicaset_controller_init(c, e->loop, e->writer, &e->informers[KCM_KIND_REPLICASET],
                                        &e->informers[KCM_KIND_POD], e->pool, &ro);
}

static struct kcm_runtime *replicaset_runtime(void *c) {
  return &((struct kcm_replicaset_controller *)c)->rt;
}

static size_t replicaset_pacers(const void *c, const struct kcm_pacer **p, const char **names) {
  p[0] = &((const struct kcm_replicaset_controller *)c)->status_pacer;
  names[0] = "status";
  return 1;
}

static void replicaset_release(void *c) { kcm_replicaset_controller_release(c); }

/* --- the table ------------------------------------------------------------------------------- */

/* The names are kube-controller-manager's: the older one, then that of
 * v1.29 on, which is also the User-Agent and service account upstream's
 * controller uses, so audit logs and field managers tell who wrote what. */
const struct kcm_controllers_row kcm_controllers_table[KCM_CONTROLLERS] = {
    {
        .name = "deployment",
        .kind = KCM_KIND_DEPLOYMENT,
        .dependents = KCM_KIND_REPLICASET,
        .names = (const char *const[]){"deployment", "deployment-controller", NULL},
        .account = "deployment-controller",
        .kinds = KIND(KCM_KIND_DEPLOYMENT) | KIND(KCM_KIND_REPLICASET) | KIND(KCM_KIND_POD),
        .size = sizeof(struct kcm_deployment_controller),
        .init = deployment_init,
        .runtime = deployment_runtime,
        .pacers = deployment_pacers,
        .release = deployment_release,
    },
    {
        .name = "replicaset",
        .kind = KCM_KIND_REPLICASET,
        .dependents = KCM_KIND_POD,
        .names = (const char *const[]){"replicaset", "replicaset-controller", NULL},
        .account = "replicaset-controller",
        .kinds = KIND(KCM_KIND_REPLICASET) | KIND(KCM_KIND_POD),
        .size = sizeof(struct kcm_replicaset_controller),
        .init = replicaset_init,
        .runtime = replicaset_runtime,
        .pacers = replicaset_pacers,
        .release = replicaset_release,
    },
};
