/*
 * kcm — a Kubernetes controller-manager for Deployments and ReplicaSets.
 *
 * main.c parses flags, resolves the connection settings, and runs the libuv
 * loop until SIGTERM or SIGINT; `kcm why ...` runs that subcommand instead.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "kcm/campaign.h"
#include "kcm/client.h"
#include "kcm/conflict.h"
#include "kcm/controllers.h"
#include "kcm/error.h"
#include "kcm/caches.h"
#include "kcm/log.h"
#include "kcm/metrics.h"
#include "kcm/options.h"
#include "kcm/serving.h"
#include "kcm/version.h"
#include "kcm/why.h"

/* Shutdown goes one way through these phases, each entered once:
 *   SHUTDOWN_NONE         running;
 *   SHUTDOWN_CONTROLLERS  SIGTERM or SIGINT: syncs in progress finish, no new
 *                         one starts, until they end or the grace period does;
 *   SHUTDOWN_RELEASE      the leases are released (leader election, shards)
 *                         while the events still queued are posted, within
 *                         the grace period: no sync runs, so the next
 *                         holder need not wait for the events;
 *   SHUTDOWN_INFORMERS    servers, watches and clients close; the loop then
 *                         runs out of handles and main returns. */
enum shutdown {
  SHUTDOWN_NONE,
  SHUTDOWN_CONTROLLERS,
  SHUTDOWN_RELEASE,
  SHUTDOWN_INFORMERS,
};

struct app {
  uv_loop_t *loop;
  const struct kcm_options *opt;
  struct kcm_client_config cfg;
  struct kcm_client *client;
  struct kcm_intern pool;
  struct kcm_caches caches;        /* what the enabled controllers read */
  struct kcm_controllers ctl;      /* those --controllers enables */
  struct kcm_conflict_guard guard; /* another controller doing their job */
  struct kcm_campaign campaign;   /* what lets it act */
  bool running;       /* the controllers were started */
  enum shutdown phase;
  bool released;      /* the leases, once SHUTDOWN_RELEASE began */
  uv_timer_t grace;        /* the grace period, then the check for events posted */
  uint64_t grace_ms;
  uint64_t grace_deadline; /* loop ms; 0 once the grace period is over */
  struct kcm_serving serving; /* the probes, /metrics and /debug/shadow */
  uv_signal_t sigterm, sigint;
  struct kcm_client_reach reach; /* the first contact */
};

/* --- health probes and metrics --------------------------------------------------------------- */

#define LEADER_HEALTH_TOLERANCE_MS 20000 /* kube-controller-manager's */

static size_t checks(void *data, bool ready, struct kcm_server_check *out) {
  struct app *a = data;
  out[0] = (struct kcm_server_check){"ping", true};
  if (!ready) {
    out[1] = (struct kcm_server_check){
        "leaderElection",
        kcm_campaign_healthy(&a->campaign, uv_now(a->loop), LEADER_HEALTH_TOLERANCE_MS)};
    return 2;
  }
  out[1] = (struct kcm_server_check){"informer-sync", a->caches.synced};
  out[2] = (struct kcm_server_check){"shutdown", a->phase == SHUTDOWN_NONE};
  out[3] = (struct kcm_server_check){"sole-controller", kcm_conflict_guard_clear(&a->guard)};
  if (a->campaign.mode != KCM_CAMPAIGN_SHARDS)
    return 4;
  out[4] = (struct kcm_server_check){"shards", kcm_campaign_ready(&a->campaign)};
  return 5;
}

static int shadow_report(void *data, struct kcm_buf *out) {
  return kcm_controllers_shadow_report(&((struct app *)data)->ctl, out);
}

static int metrics(void *data, struct kcm_buf *out) {
  struct app *a = data;
  int err;
  if ((err = kcm_campaign_metrics(&a->campaign, out)) ||
      (err = kcm_controllers_shard_metrics(&a->ctl, out)) ||
      (err = kcm_version_metrics(out)) ||
      (err = kcm_conflict_guard_metrics(&a->guard, out)) ||
      (err = kcm_caches_metrics(&a->caches, out)) ||
      (a->opt->shadow && (err = kcm_controllers_shadow_metrics(&a->ctl, out))) ||
      (err = kcm_metrics_process(out)))
    return err;
  if (a->client)
    kcm_client_metrics(a->client, out);
  kcm_controllers_metrics(&a->ctl, uv_now(a->loop), out);
  return 0;
}

/* The controllers run once every cache is synced and, with leader election,
 * while this process holds the lease: a standby sends no write (with
 * shards, each acts in its shards' namespaces). */
static void maybe_start(struct app *a);

static void on_token_ready(void *data) { maybe_start(data); }

static void maybe_start(struct app *a) {
  if (a->running || a->phase != SHUTDOWN_NONE || !a->caches.synced ||
      !kcm_campaign_active(&a->campaign) ||
      !kcm_controllers_tokens_ready(&a->ctl))
    return;
  a->running = true;
  kcm_conflict_guard_lead(&a->guard);
  kcm_controllers_run(&a->ctl);
}

static void on_active(struct kcm_campaign *c) { maybe_start(c->data); }

/* Another process may hold the lease by now: stop every write at once. */
static void on_lost_lease(struct kcm_campaign *c) { exit(1); }

static void on_synced(struct kcm_caches *c) { maybe_start(c->data); }

static void caches_closed(struct kcm_caches *c) {
  struct app *a = c->data;
  kcm_client_close(a->client);
  a->client = NULL;
}

static void stop_informers(struct app *a) {
  kcm_serving_close(&a->serving);
  kcm_controllers_stop_tokens(&a->ctl);
  kcm_caches_stop(&a->caches, caches_closed);
}

static bool events_pending(const struct app *a) {
  return kcm_controllers_events_pending(&a->ctl) > 0;
}

static bool grace_over(const struct app *a) {
  return uv_now(a->loop) >= a->grace_deadline;
}

/* On to the informers once the leases are released and the events posted
 * (or the grace period over). */
static void wrap_up(struct app *a) {
  if (a->phase != SHUTDOWN_RELEASE || !a->released || (events_pending(a) && !grace_over(a)))
    return;
  a->phase = SHUTDOWN_INFORMERS;
  uv_timer_stop(&a->grace);
  uv_close((uv_handle_t *)&a->grace, NULL);
  stop_informers(a);
}

static void on_leases_released(struct kcm_campaign *c) {
  struct app *a = c->data;
  a->released = true;
  wrap_up(a);
}

static void on_events_check(uv_timer_t *t) { wrap_up(t->data); }

static void release(struct app *a) {
  a->phase = SHUTDOWN_RELEASE;
  kcm_info("controllers stopped queuedEvents=%zu", kcm_controllers_events_pending(&a->ctl));
  uv_timer_stop(&a->grace);
  uv_timer_start(&a->grace, on_events_check, 20, 20);
  kcm_campaign_stop(&a->campaign); /* then on_leases_released */
}

static void controllers_stopped(void *data) {
  struct app *a = data;
  if (a->phase == SHUTDOWN_CONTROLLERS)
    release(a);
}

static void on_grace_over(uv_timer_t *t) {
  struct app *a = t->data;
  a->grace_deadline = 0;
  kcm_error("syncs in progress did not finish within the shutdown grace period "
            "gracePeriod=\"%llums\"", (unsigned long long)a->grace_ms);
  release(a);
}

static void on_signal(uv_signal_t *s, int signum) {
  struct app *a = s->data;
  kcm_info("shutting down signal=\"%s\"", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  uv_signal_stop(&a->sigterm);
  uv_signal_stop(&a->sigint);
  uv_close((uv_handle_t *)&a->sigterm, NULL);
  uv_close((uv_handle_t *)&a->sigint, NULL);
  kcm_client_reach_stop(&a->reach);
  kcm_conflict_guard_close(&a->guard);
  a->phase = SHUTDOWN_CONTROLLERS;
  a->grace_deadline = uv_now(a->loop) + a->grace_ms;
  uv_timer_start(&a->grace, on_grace_over, a->grace_ms, 0);
  if (!kcm_controllers_stop(&a->ctl))
    release(a);
}

/* Go programs, kube-controller-manager among them, raise their soft limit
 * on open files to the hard one at start; so does kcm, so that a flood of
 * connections meets the server's own limits first. */
static void raise_descriptor_limit(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

/* The process-wide settings (descriptor limit, logging) and the leader
 * election's or the shards', checked: 0, or the exit status of a flag
 * error when they are wrong. */
static int apply_flags(struct app *a, const struct kcm_options *f) {
  const char *why;

  a->opt = f;
  raise_descriptor_limit();
  kcm_controllers_choose(&a->ctl, f);
  kcm_log_set_verbosity(f->verbosity);
  if (kcm_log_set_vmodule(f->vmodule))
    return kcm_options_fail(f, "invalid value \"%s\" for flag --vmodule: out of memory",
                            f->vmodule);
  if (f->json_logs)
    kcm_log_set_format(KCM_LOG_JSON);
  kcm_options_warn(f);
  if ((why = kcm_conflict_system_problem(f->conflict_system_namespaces)))
    return kcm_options_fail(f, "invalid value \"%s\" for flag --conflict-system-namespaces: %s",
                            f->conflict_system_namespaces, why);
  if ((why = kcm_campaign_check(f)))
    return kcm_options_fail(f, "invalid %s settings: %s", f->shards ? "--shards" : "leader election",
                            why);
  return 0;
}

/* a->cfg from the flags, the environment or the cluster. */
static int load_config(struct app *a) {
  struct kcm_client_config_options copts;
  char *errmsg = NULL;
  int err;

  copts.kubeconfig = a->opt->kubeconfig;
  copts.context = a->opt->context;
  copts.master = a->opt->master;
  err = kcm_client_config_load(&a->cfg, &copts, &errmsg);
  if (err) {
    kcm_error("cannot load the settings err=\"%s\"", errmsg ? errmsg : kcm_strerror(err));
    free(errmsg);
    return err;
  }
  kcm_info("starting kcm version=\"%s\" config=\"%s\" context=\"%s\" server=\"%s\"",
           KCM_VERSION, a->cfg.source ? a->cfg.source : "", a->cfg.context ? a->cfg.context : "",
           a->cfg.server);
  return 0;
}

/* The loop, the API client, the signal handlers and timers. */
static int setup_client(struct app *a) {
  int err;

  a->loop = uv_default_loop();
  err = kcm_client_new(&a->client, a->loop, &a->cfg);
  if (err) {
    kcm_error("cannot set up the API client server=\"%s\" err=\"%s\"", a->cfg.server,
              kcm_strerror(err));
    kcm_client_config_release(&a->cfg);
    return err;
  }
  uv_signal_init(a->loop, &a->sigterm);
  uv_signal_init(a->loop, &a->sigint);
  a->sigterm.data = a->sigint.data = a;
  uv_signal_start(&a->sigterm, on_signal, SIGTERM);
  uv_signal_start(&a->sigint, on_signal, SIGINT);
  uv_timer_init(a->loop, &a->grace);
  a->grace.data = a;
  a->grace_ms = a->opt->grace_ms;
  kcm_client_set_rate_limit(a->client, a->opt->qps, a->opt->burst);
  kcm_intern_init(&a->pool);
  return 0;
}

/* The caches the enabled controllers read. */
static int setup_informers(struct app *a) {
  int err = kcm_caches_init(&a->caches, a->loop, a->client, &a->pool, a->ctl.kinds, a->opt);
  a->caches.data = a;
  return err;
}

/* The controllers --controllers enables, and the guard against another
 * controller doing their job (none in shadow mode: the live controller's
 * writes are what a shadow compares with, not a conflict). */
static int setup_controllers(struct app *a, const struct kcm_options *f) {
  int err = kcm_controllers_init(&a->ctl, a->loop, a->client, a->caches.informers,
                                 &a->pool);
  if (err)
    return err;
  a->ctl.on_token = on_token_ready;
  a->ctl.on_stopped = controllers_stopped;
  a->ctl.data = a;
  kcm_conflict_guard_init(&a->guard, a->loop, kcm_client_program(), f->conflict_quiet_ms,
                          (uint32_t)f->conflict_cluster_namespaces,
                          f->conflict_system_namespaces, f->stand_aside,
                          kcm_campaign_lease_namespace(f), f->lease_name);
  if (!f->shadow && kcm_controllers_guard(&a->ctl, &a->guard)) {
    kcm_error("cannot set up a controller name=\"conflict-guard\" err=\"out of memory\"");
    return KCM_ENOMEM;
  }
  return 0;
}

/* Leader election, or the shards' coordinator (each controller then acts
 * in the namespaces of the shards held). */
static int setup_campaign(struct app *a) {
  struct kcm_shards *sh;
  int err = kcm_campaign_init(&a->campaign, a->loop, a->client, a->opt);
  a->campaign.data = a;
  a->campaign.on_active = on_active;
  a->campaign.on_lost = on_lost_lease;
  a->campaign.on_stopped = on_leases_released;
  if (!err && (sh = kcm_campaign_shards(&a->campaign)))
    err = kcm_controllers_shard(&a->ctl, sh);
  return err;
}

/* Serve, reach the API server, campaign, start the informers, and run the
 * loop until shut down. */
static void run(struct app *a) {
  struct kcm_serving_handlers h = {checks, metrics, a->opt->shadow ? shadow_report : NULL, a};

  if (kcm_serving_start(&a->serving, a->loop, a->opt, &a->cfg, &h))
    exit(1);
  kcm_client_reach_start(&a->reach, a->loop, a->client, a->cfg.server);
  kcm_campaign_start(&a->campaign);
  kcm_caches_start(&a->caches, on_synced);

  uv_run(a->loop, UV_RUN_DEFAULT);
}

/* Free what is left once the loop has stopped (the controllers freed). */
static void teardown(struct app *a) {
  kcm_campaign_release(&a->campaign);
  kcm_caches_release(&a->caches);
  kcm_intern_release(&a->pool);
  kcm_serving_release(&a->serving);
  uv_loop_close(a->loop);
  kcm_client_config_release(&a->cfg);
  kcm_info("stopped");
}

/* Run as kubectl's plugin (as kubectl-kcm, for `kubectl kcm ...`), kcm
 * runs its subcommands only: the daemon is started as kcm. */
static bool plugin_only(int argc, char **argv, int *rc) {
  const char *base = argc > 0 ? strrchr(argv[0], '/') : NULL;
  bool help = argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
  if (argc < 1 || strcmp(base ? base + 1 : argv[0], "kubectl-kcm"))
    return false;
  fprintf(help ? stdout : stderr,
          "Usage: kubectl kcm why KIND/NAME [flags]   (kubectl kcm why --help)\n");
  *rc = help ? 0 : 2;
  return true;
}

int main(int argc, char **argv) {
  const struct kcm_options_group *groups[KCM_CONTROLLERS_MAX + 1];
  struct kcm_options f;
  struct app a = {0};
  int rc;

  kcm_client_set_program(argv[0]);
  if (argc > 1 && !strcmp(argv[1], "why"))
    return kcm_why_main(argc - 1, argv + 1);
  if (plugin_only(argc, argv, &rc))
    return rc;
  kcm_controllers_options(groups);
  if ((rc = kcm_options_main(&f, groups, argc, argv)) >= 0 || (rc = apply_flags(&a, &f)))
    return rc;
  if (load_config(&a) || setup_client(&a) || setup_informers(&a) || setup_controllers(&a, &f))
    return 1;
  if (setup_campaign(&a))
    return 1;
  run(&a);
  kcm_controllers_release(&a.ctl);
  teardown(&a);
  return 0;
}
