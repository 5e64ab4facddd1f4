/*
 * kcm — a Kubernetes controller-manager for Deployments and ReplicaSets.
 *
 * main.c parses flags, resolves the connection settings, and runs the libuv
 * loop until SIGTERM or SIGINT.
 */
#include <errno.h>
#include <stddef.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "kcm/auth.h"
#include "kcm/client.h"
#include "kcm/conflict.h"
#include "kcm/deployment.h"
#include "kcm/error.h"
#include "kcm/informer.h"
#include "kcm/leader.h"
#include "kcm/shadow.h"
#include "kcm/log.h"
#include "kcm/metrics.h"
#include "kcm/options.h"
#include "kcm/replicaset.h"
#include "kcm/satoken.h"
#include "kcm/server.h"
#include "kcm/tls.h"
#include "kcm/version.h"
#include "kcm/writer.h"

/* Shutdown goes one way through these phases, each entered once:
 *   SHUTDOWN_NONE         running;
 *   SHUTDOWN_CONTROLLERS  SIGTERM or SIGINT: syncs in progress finish, no new
 *                         one starts, until they end or the grace period does;
 *   SHUTDOWN_EVENTS       events still queued are posted, within the grace
 *                         period;
 *   SHUTDOWN_LEASE        the lease is released (with leader election);
 *   SHUTDOWN_INFORMERS    servers, watches and clients close; the loop then
 *                         runs out of handles and main returns. */
enum shutdown {
  SHUTDOWN_NONE,
  SHUTDOWN_CONTROLLERS,
  SHUTDOWN_EVENTS,
  SHUTDOWN_LEASE,
  SHUTDOWN_INFORMERS,
};

struct app {
  uv_loop_t *loop;
  const struct kcm_options *opt;
  struct kcm_client_config cfg;
  struct kcm_client *client;
  struct kcm_intern pool;
  struct kcm_informer informers[KCM_KIND_COUNT];
  bool used[KCM_KIND_COUNT]; /* informers the enabled controllers need */
  int informers_open;
  bool dc_on, rs_on;         /* enabled by --controllers */
  struct kcm_replicaset_controller rs;
  struct kcm_deployment_controller dc;
  struct kcm_writer rs_writer, dc_writer; /* each controller's requests, on its own limiter */
  struct kcm_conflict_guard guard;        /* another controller doing their job */
  struct kcm_shadow rs_shadow, dc_shadow; /* --shadow: each controller's judgments */
  /* --use-service-account-credentials: each controller's token */
  struct kcm_satoken rs_token, dc_token;
  int tokens_wanted, tokens_ready;
  bool tokens_started;
  struct kcm_leader leader;
  bool elect;
  bool leading;
  bool running;       /* the controllers were started */
  enum shutdown phase;
  int controllers_running; /* during SHUTDOWN_CONTROLLERS */
  uv_timer_t grace;        /* the grace period, then the check for events posted */
  uint64_t grace_ms;
  uint64_t grace_deadline; /* loop ms; 0 once the grace period is over */
  /* Serving: HTTPS with authentication and authorization on --secure-port,
   * and the plain listeners for local runs. */
  struct kcm_tls *tls;
  struct kcm_server secure, health, metrics;
  bool serving_secure, serving_health, serving_metrics;
  struct kcm_auth auth;
  struct kcm_client_config authn_cfg, authz_cfg;
  struct kcm_client *authn, *authz; /* owned; authz may be authn */
  uv_timer_t cert_reload;
  uv_signal_t sigterm, sigint;
  uv_timer_t retry;
  uv_timer_t sync_check;
  uint64_t started;
  uint64_t backoff_ms;
  bool connected;
  bool synced;
};

/* Exit 2 after a flag error, as kube-controller-manager does. */
static void flag_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void flag_error(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "kcm: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n\n");
  kcm_options_usage(stderr);
  exit(2);
}

static void check_server(struct app *a);

static void on_retry(uv_timer_t *t) { check_server(t->data); }

static void on_version(const struct kcm_client_response *resp, void *data) {
  struct app *a = data;
  struct json_object *obj, *ver;

  if (resp->err == KCM_ECANCELED)
    return;
  if (resp->err) {
    kcm_error("cannot reach the API server server=\"%s\" err=\"%s: %s\" retryIn=\"%llums\"",
              a->cfg.server, kcm_strerror(resp->err), resp->message,
              (unsigned long long)a->backoff_ms);
    uv_timer_start(&a->retry, on_retry, a->backoff_ms, 0);
    a->backoff_ms = a->backoff_ms * 2 > 30000 ? 30000 : a->backoff_ms * 2;
    return;
  }
  obj = json_tokener_parse(resp->body);
  kcm_info("connected to the API server server=\"%s\" version=\"%s\"", a->cfg.server,
           obj && json_object_object_get_ex(obj, "gitVersion", &ver)
               ? json_object_get_string(ver)
               : "unknown");
  json_object_put(obj);
  a->connected = true;
  a->backoff_ms = 800;
}

static void check_server(struct app *a) {
  struct kcm_client_request_options o = {
      .method = "GET", .path = "/version", .timeout_ms = 10000, .done = on_version, .data = a};
  int err = kcm_client_request(a->client, &o, NULL);
  if (err)
    kcm_error("cannot send a request err=\"%s\"", kcm_strerror(err));
}

/* --- health probes and metrics --------------------------------------------------------------- */

#define LEADER_HEALTH_TOLERANCE_MS 20000 /* kube-controller-manager's */
#define CERT_RELOAD_MS 60000

/* /healthz, /livez and /readyz. Returns false for another path. */
static bool answer_health(struct app *a, const struct kcm_server_request *req,
                          struct kcm_server_response *resp) {
  bool leader_ok = !a->elect || kcm_leader_healthy(&a->leader, uv_now(a->loop),
                                                    LEADER_HEALTH_TOLERANCE_MS);
  struct kcm_server_check live[] = {{"ping", true}, {"leaderElection", leader_ok}};
  struct kcm_server_check ready[] = {{"ping", true},
                                     {"informer-sync", a->synced},
                                     {"shutdown", a->phase == SHUTDOWN_NONE},
                                     {"sole-controller", kcm_conflict_guard_clear(&a->guard)}};
  if (kcm_server_path_under(req->path, "/healthz"))
    kcm_server_checks("healthz", live, 2, req, resp);
  else if (kcm_server_path_under(req->path, "/livez"))
    kcm_server_checks("livez", live, 2, req, resp);
  else if (kcm_server_path_under(req->path, "/readyz"))
    kcm_server_checks("readyz", ready, 4, req, resp);
  else
    return false;
  return true;
}

/* The shadows of the enabled controllers. */
static size_t shadows(struct app *a, struct kcm_shadow *out[2]) {
  size_t n = 0;
  if (a->dc_on)
    out[n++] = &a->dc_shadow;
  if (a->rs_on)
    out[n++] = &a->rs_shadow;
  return n;
}

static int shadow_metrics(struct app *a, struct kcm_buf *out) {
  struct kcm_shadow *s[2];
  return kcm_shadow_metrics(s, shadows(a, s), out);
}

/* /debug/shadow: with --shadow, what it found; else not found. */
static void answer_shadow(struct app *a, struct kcm_server_response *resp) {
  struct kcm_shadow *s[2];
  if (!a->opt->shadow) {
    kcm_server_not_found(resp);
    return;
  }
  resp->content_type = "application/json";
  if (kcm_shadow_report(s, shadows(a, s), &resp->body)) {
    resp->status = 500;
    resp->content_type = "text/plain; charset=utf-8";
    kcm_buf_reset(&resp->body);
    kcm_buf_append_str(&resp->body, "could not render the report\n");
  }
}

static void answer_metrics(struct app *a, struct kcm_server_response *resp) {
  const struct kcm_workqueue *queues[2];
  const struct kcm_events *events[2];
  const struct kcm_pacer *pacers[3];
  const char *names[2], *pacer_owners[3], *pacer_names[3];
  const char *lease[] = {"name", a->elect ? a->leader.name : "kcm", NULL};
  const char *build[] = {"build_date", KCM_BUILD_DATE, "compiler", KCM_COMPILER,
                         "git_commit", KCM_GIT_COMMIT, "git_tree_state", KCM_GIT_TREE_STATE,
                         "git_version", "v" KCM_VERSION, "platform", KCM_PLATFORM, NULL};
  char labels[600], build_labels[600];
  size_t n = 0, np = 0;
  if (a->dc_on) {
    queues[n] = &a->dc.rt.queue;
    events[n] = &a->dc.rt.events;
    names[n++] = "deployment";
    pacers[np] = &a->dc.sync_pacer;
    pacer_owners[np] = "deployment";
    pacer_names[np++] = "sync";
    pacers[np] = &a->dc.status_pacer;
    pacer_owners[np] = "deployment";
    pacer_names[np++] = "status";
  }
  if (a->rs_on) {
    queues[n] = &a->rs.rt.queue;
    events[n] = &a->rs.rt.events;
    names[n++] = "replicaset";
    pacers[np] = &a->rs.status_pacer;
    pacer_owners[np] = "replicaset";
    pacer_names[np++] = "status";
  }
  resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
  if (kcm_metrics_labels(labels, sizeof(labels), lease) ||
      kcm_metrics_family(&resp->body, "leader_election_master_status", "gauge",
                         "Gauge of if the reporting system is master of the relevant lease, 0 "
                         "indicates backup, 1 indicates master. 'name' is the string used to "
                         "identify the lease. Please make sure to group by name.") ||
      kcm_metrics_sample(&resp->body, "leader_election_master_status", labels,
                         a->elect ? a->leading : 1) ||
      kcm_metrics_labels(build_labels, sizeof(build_labels), build) ||
      kcm_metrics_family(&resp->body, "kcm_build_info", "gauge",
                         "A metric with a constant '1' value labeled by the version, commit and "
                         "build of kcm.") ||
      kcm_metrics_sample(&resp->body, "kcm_build_info", build_labels, 1) ||
      kcm_conflict_guard_metrics(&a->guard, &resp->body) ||
      (a->opt->shadow && shadow_metrics(a, &resp->body)) ||
      kcm_metrics_process(&resp->body)) {
    resp->status = 500;
    resp->content_type = "text/plain; charset=utf-8";
    kcm_buf_reset(&resp->body);
    kcm_buf_append_str(&resp->body, "could not render the metrics\n");
    return;
  }
  if (a->client)
    kcm_client_metrics(a->client, &resp->body);
  kcm_workqueue_metrics_many(queues, names, n, uv_now(a->loop), &resp->body);
  kcm_events_metrics(events, names, n, &resp->body);
  kcm_pacer_metrics(pacers, pacer_owners, pacer_names, np, &resp->body);
  /* Upstream's name for the ReplicaSet controller's (1.36); the same for Deployments. */
  if (a->rs_on)
    kcm_runtime_stale_metrics(&a->rs.rt, "replicaset_controller_stale_sync_skips_total",
                              (const char *const[]){"apps", "replicasets"},
                              (const char *const[]){"", "pods"}, &resp->body);
  if (a->dc_on)
    kcm_runtime_stale_metrics(&a->dc.rt, "deployment_controller_stale_sync_skips_total",
                              (const char *const[]){"apps", "deployments"},
                              (const char *const[]){"apps", "replicasets"}, &resp->body);
}

static void on_health(void *data, struct kcm_server_exchange *x,
                      const struct kcm_server_request *req, struct kcm_server_response *resp) {
  if (!answer_health(data, req, resp))
    kcm_server_not_found(resp);
  kcm_server_reply(x);
}

static void on_metrics(void *data, struct kcm_server_exchange *x,
                       const struct kcm_server_request *req, struct kcm_server_response *resp) {
  if (!strcmp(req->path, "/metrics")) {
    answer_metrics(data, resp);
  } else if (!strcmp(req->path, "/debug/shadow")) {
    /* plans name objects and fields: for authorized callers only */
    resp->status = 403;
    resp->content_type = "text/plain; charset=utf-8";
    kcm_buf_append_str(&resp->body, "/debug/shadow is served on the secure port only, to "
                                    "callers authorized for it\n");
  } else {
    kcm_server_not_found(resp);
  }
  kcm_server_reply(x);
}

/* A request on the secure port, waiting for authentication and
 * authorization. */
struct secure_request {
  struct app *a;
  struct kcm_server_exchange *x;
  const struct kcm_server_request *req;
  struct kcm_server_response *resp;
};

static void on_decision(void *data, const struct kcm_auth_decision *d) {
  struct secure_request *r = data;
  if (d->status != 200) {
    const char *type;
    kcm_v(4, "refused a request status=%d user=\"%s\" path=\"%s\" peer=\"%s\" reason=\"%s\"",
          d->status, d->user, r->req->path, r->req->peer, d->message);
    r->resp->status = d->status;
    if ((type = kcm_auth_refusal(d, &r->resp->body)))
      r->resp->content_type = type;
  } else if (strcmp(r->req->path, "/metrics") == 0) {
    answer_metrics(r->a, r->resp);
  } else if (strcmp(r->req->path, "/debug/shadow") == 0) {
    answer_shadow(r->a, r->resp);
  } else if (!answer_health(r->a, r->req, r->resp)) {
    kcm_server_not_found(r->resp);
  }
  kcm_server_reply(r->x);
  free(r);
}

static void on_secure(void *data, struct kcm_server_exchange *x,
                      const struct kcm_server_request *req, struct kcm_server_response *resp) {
  struct app *a = data;
  struct secure_request *r = malloc(sizeof(*r));
  struct kcm_auth_request ar = {req->method, req->path, req->authorization, req->cert};
  if (r) {
    *r = (struct secure_request){a, x, req, resp};
    if (kcm_auth_check(&a->auth, &ar, on_decision, r) == 0)
      return;
    free(r);
  }
  resp->status = 500;
  kcm_buf_append_str(&resp->body, "out of memory\n");
  kcm_server_reply(x);
}

static void listen_or_exit(struct app *a, struct kcm_server *s, const char *what,
                           const struct kcm_server_options *so) {
  const char *why = NULL;
  if (kcm_server_listen(s, a->loop, so, &why)) {
    kcm_error("cannot serve what=\"%s\" address=\"%s\" err=\"%s\"", what, so->address, why);
    exit(1);
  }
  kcm_info("serving %s address=\"%s\"", what, s->address);
}

/* The plain listener for local runs, if its flag turned it on. */
static void serve_plain(struct app *a, const char *flag, bool health) {
  char buf[96];
  struct kcm_server_options so = {0};
  if (!strcmp(flag, "0"))
    return;
  so.address = kcm_options_local_address(flag, buf, sizeof(buf));
  so.handler = health ? on_health : on_metrics;
  so.data = a;
  listen_or_exit(a, health ? &a->health : &a->metrics, health ? "health probes" : "metrics",
                 &so);
  if (health)
    a->serving_health = true;
  else
    a->serving_metrics = true;
}

static void on_cert_reload(uv_timer_t *t) {
  struct app *a = t->data;
  char *err = NULL;
  int rc = kcm_tls_reload(a->tls, &err);
  if (rc == 1)
    kcm_info("serving a new certificate");
  else if (rc < 0)
    kcm_error("cannot serve the changed certificate files, keeping the old ones err=\"%s\"",
              err ? err : kcm_strerror(rc));
  free(err);
}

/* A client for TokenReviews or SubjectAccessReviews: on its own
 * kubeconfig (loaded into *cfg), or on kcm's connection; 200 qps and 400
 * burst, as upstream's delegated clients. */
static struct kcm_client *auth_client(struct app *a, const char *kubeconfig,
                                      struct kcm_client_config *cfg) {
  struct kcm_client_config_options co = {kubeconfig, NULL, NULL};
  struct kcm_client *c;
  char *err = NULL;
  int rc = kubeconfig ? kcm_client_config_load(cfg, &co, &err) : 0;
  if (rc) {
    kcm_error("cannot load a kubeconfig err=\"%s\"", err ? err : kcm_strerror(rc));
    exit(1);
  }
  if ((rc = kcm_client_new(&c, a->loop, kubeconfig ? cfg : &a->cfg))) {
    kcm_error("cannot set up a client server=\"%s\" err=\"%s\"", cfg->server, kcm_strerror(rc));
    exit(1);
  }
  kcm_client_set_rate_limit(c, 200, 400);
  return c;
}

/* HTTPS on --secure-port, as kube-controller-manager serves it. */
static void serve_secure(struct app *a) {
  const struct kcm_options *o = a->opt;
  struct kcm_tls_options to = {o->tls_cert_file, o->tls_key_file, o->cert_dir, "kcm",
                               o->client_ca_file, o->bind_address, o->tls13_only};
  struct kcm_auth_options ao = {0};
  struct kcm_server_options so = {0};
  char address[96], *err = NULL;
  int rc;
  if (o->secure_port == 0)
    return;
  if ((rc = kcm_tls_new(&a->tls, &to, &err))) {
    kcm_error("cannot set up TLS err=\"%s\"", err ? err : kcm_strerror(rc));
    exit(1);
  }
  if (!o->tls_cert_file)
    kcm_info("serving a self-signed certificate dir=\"%s\"", o->cert_dir);
  a->authn = auth_client(a, o->authn_kubeconfig, &a->authn_cfg);
  a->authz = a->authn;
  if (!o->authz_kubeconfig != !o->authn_kubeconfig ||
      (o->authz_kubeconfig && strcmp(o->authz_kubeconfig, o->authn_kubeconfig)))
    a->authz = auth_client(a, o->authz_kubeconfig, &a->authz_cfg);
  ao.authn = a->authn;
  ao.authz = a->authz;
  ao.always_allow_paths = o->always_allow_paths;
  ao.token_ttl_ms = o->token_ttl_ms;
  ao.allow_ttl_ms = o->allow_ttl_ms;
  ao.deny_ttl_ms = o->deny_ttl_ms;
  if (kcm_auth_init(&a->auth, a->loop, &ao)) {
    kcm_error("cannot set up authentication err=\"out of memory\"");
    exit(1);
  }
  snprintf(address, sizeof(address), strchr(o->bind_address, ':') ? "[%s]:%d" : "%s:%d",
           o->bind_address, o->secure_port);
  so.address = address;
  so.tls = a->tls;
  so.handler = on_secure;
  so.data = a;
  listen_or_exit(a, &a->secure, "securely", &so);
  a->serving_secure = true;
  uv_timer_init(a->loop, &a->cert_reload);
  a->cert_reload.data = a;
  uv_timer_start(&a->cert_reload, on_cert_reload, CERT_RELOAD_MS, CERT_RELOAD_MS);
}

/* The controllers run once every cache is synced and, with leader election,
 * while this process holds the lease: a standby sends no write. */
static void maybe_start(struct app *a);

static void on_token_ready(struct kcm_satoken *t) {
  struct app *a = t->data;
  a->tokens_ready++;
  maybe_start(a);
}

/* With --use-service-account-credentials, the controllers' tokens are
 * asked for when the controllers are due to start: false until every one
 * has come. */
static bool tokens_ready(struct app *a) {
  if (a->tokens_ready == a->tokens_wanted)
    return true;
  if (!a->tokens_started) {
    a->tokens_started = true;
    if (a->rs_on)
      kcm_satoken_start(&a->rs_token, on_token_ready);
    if (a->dc_on)
      kcm_satoken_start(&a->dc_token, on_token_ready);
  }
  return false;
}

static void maybe_start(struct app *a) {
  if (a->running || a->phase != SHUTDOWN_NONE || !a->synced || (a->elect && !a->leading) ||
      !tokens_ready(a))
    return;
  a->running = true;
  kcm_conflict_guard_lead(&a->guard);
  if (a->dc_on) {
    kcm_info("starting controller name=\"deployment\" workers=%u", a->dc.rt.workers);
    kcm_runtime_run(&a->dc.rt);
  }
  if (a->rs_on) {
    kcm_info("starting controller name=\"replicaset\" workers=%u", a->rs.rt.workers);
    kcm_runtime_run(&a->rs.rt);
  }
  if (!a->dc_on && !a->rs_on)
    kcm_info("no controller is enabled");
}

static void on_started_leading(struct kcm_leader *l) {
  struct app *a = l->data;
  a->leading = true;
  maybe_start(a);
}

/* Another process may hold the lease by now: stop every write at once. */
static void on_lost_lease(struct kcm_leader *l) {
  kcm_error("leaderelection lost lease=\"%s/%s\"", l->ns, l->name);
  exit(1);
}

static size_t cached(const struct app *a, enum kcm_kind k) {
  return a->used[k] ? kcm_informer_len(&a->informers[k]) : 0;
}

static void on_sync_check(uv_timer_t *t) {
  struct app *a = t->data;
  int k;
  for (k = 0; k < KCM_KIND_COUNT; k++) {
    if (a->used[k] && !kcm_informer_synced(&a->informers[k]))
      return;
  }
  uv_timer_stop(t);
  a->synced = true;
  kcm_info("caches synced pods=%zu replicasets=%zu deployments=%zu elapsed=\"%llums\"",
           cached(a, KCM_KIND_POD), cached(a, KCM_KIND_REPLICASET),
           cached(a, KCM_KIND_DEPLOYMENT),
           (unsigned long long)(uv_now(a->loop) - a->started));
  maybe_start(a);
}

static void informer_closed(struct kcm_informer *inf) {
  struct app *a = inf->data;
  if (--a->informers_open == 0) {
    kcm_client_close(a->client);
    a->client = NULL;
  }
}

static void stop_informers(struct app *a) {
  int k;
  if (a->serving_secure) {
    kcm_server_close(&a->secure, NULL);
    uv_timer_stop(&a->cert_reload);
    uv_close((uv_handle_t *)&a->cert_reload, NULL);
    if (a->authz != a->authn)
      kcm_client_close(a->authz);
    kcm_client_close(a->authn);
  }
  if (a->serving_health)
    kcm_server_close(&a->health, NULL);
  if (a->serving_metrics)
    kcm_server_close(&a->metrics, NULL);
  if (a->opt->sa_credentials) {
    if (a->rs_on)
      kcm_satoken_stop(&a->rs_token, NULL);
    if (a->dc_on)
      kcm_satoken_stop(&a->dc_token, NULL);
  }
  a->informers_open = 0;
  for (k = 0; k < KCM_KIND_COUNT; k++)
    a->informers_open += a->used[k];
  for (k = 0; k < KCM_KIND_COUNT; k++)
    if (a->used[k])
      kcm_informer_stop(&a->informers[k], informer_closed);
  if (!a->informers_open) {
    kcm_client_close(a->client);
    a->client = NULL;
  }
}

static void on_lease_released(struct kcm_leader *l) {
  struct app *a = l->data;
  kcm_leader_close(l);
  a->phase = SHUTDOWN_INFORMERS;
  stop_informers(a);
}

static bool events_pending(const struct app *a) {
  return (a->dc_on && (a->dc.rt.events.sending || a->dc.rt.events.queued)) ||
         (a->rs_on && (a->rs.rt.events.sending || a->rs.rt.events.queued));
}

static bool grace_over(const struct app *a) {
  return uv_now(a->loop) >= a->grace_deadline;
}

static void release(struct app *a) {
  a->phase = SHUTDOWN_LEASE;
  uv_timer_stop(&a->grace);
  uv_close((uv_handle_t *)&a->grace, NULL);
  if (a->elect) {
    kcm_leader_release(&a->leader); /* then on_lease_released */
    return;
  }
  a->phase = SHUTDOWN_INFORMERS;
  stop_informers(a);
}

static void on_events_check(uv_timer_t *t) {
  struct app *a = t->data;
  if (!events_pending(a) || grace_over(a))
    release(a);
}

static void post_events(struct app *a) {
  a->phase = SHUTDOWN_EVENTS;
  kcm_info("controllers stopped queuedEvents=%zu",
           (a->dc_on ? a->dc.rt.events.queued + a->dc.rt.events.sending : 0) +
               (a->rs_on ? a->rs.rt.events.queued + a->rs.rt.events.sending : 0));
  if (!events_pending(a) || grace_over(a)) {
    release(a);
    return;
  }
  uv_timer_stop(&a->grace);
  uv_timer_start(&a->grace, on_events_check, 20, 20);
}

static void controller_stopped(struct app *a) {
  if (a->phase == SHUTDOWN_CONTROLLERS && --a->controllers_running == 0)
    post_events(a);
}

static void on_grace_over(uv_timer_t *t) {
  struct app *a = t->data;
  a->grace_deadline = 0;
  kcm_error("syncs in progress did not finish within the shutdown grace period "
            "gracePeriod=\"%llums\"", (unsigned long long)a->grace_ms);
  post_events(a);
}

static void rs_stopped(struct kcm_runtime *rt) {
  controller_stopped((struct app *)(void *)((char *)rt - offsetof(struct app, rs.rt)));
}

static void dc_stopped(struct kcm_runtime *rt) {
  controller_stopped((struct app *)(void *)((char *)rt - offsetof(struct app, dc.rt)));
}

static void on_signal(uv_signal_t *s, int signum) {
  struct app *a = s->data;
  kcm_info("shutting down signal=\"%s\"", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  uv_signal_stop(&a->sigterm);
  uv_signal_stop(&a->sigint);
  uv_close((uv_handle_t *)&a->sigterm, NULL);
  uv_close((uv_handle_t *)&a->sigint, NULL);
  uv_timer_stop(&a->retry);
  uv_close((uv_handle_t *)&a->retry, NULL);
  uv_timer_stop(&a->sync_check);
  uv_close((uv_handle_t *)&a->sync_check, NULL);
  kcm_conflict_guard_close(&a->guard);
  a->phase = SHUTDOWN_CONTROLLERS;
  a->controllers_running = a->dc_on + a->rs_on;
  a->grace_deadline = uv_now(a->loop) + a->grace_ms;
  uv_timer_start(&a->grace, on_grace_over, a->grace_ms, 0);
  if (a->dc_on)
    kcm_runtime_stop(&a->dc.rt, dc_stopped);
  if (a->rs_on)
    kcm_runtime_stop(&a->rs.rt, rs_stopped);
  if (!a->controllers_running)
    post_events(a);
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

/* Parse the flags: false when --help or --version was answered; exits 2
 * on a flag error. */
static bool parse_flags(struct kcm_options *f, int argc, char **argv) {
  char flag_err[512];

  switch (kcm_options_parse(f, argc, argv, flag_err, sizeof(flag_err))) {
  case KCM_OPTIONS_HELP:
    kcm_options_usage(stdout);
    return false;
  case KCM_OPTIONS_VERSION:
    if (f->version_raw)
      printf("version.Info{Major:\"%d\", Minor:\"%d\", GitVersion:\"v%s\", GitCommit:\"%s\", "
             "GitTreeState:\"%s\", BuildDate:\"%s\", Compiler:\"%s\", Platform:\"%s\"}\n",
             KCM_VERSION_MAJOR, KCM_VERSION_MINOR, KCM_VERSION, KCM_GIT_COMMIT, KCM_GIT_TREE_STATE,
             KCM_BUILD_DATE, KCM_COMPILER, KCM_PLATFORM);
    else
      printf("kcm v%s (commit %.12s, built %s)\n", KCM_VERSION, KCM_GIT_COMMIT, KCM_BUILD_DATE);
    return false;
  case KCM_OPTIONS_INVALID:
    flag_error("%s", flag_err);
  case KCM_OPTIONS_RUN:
    break;
  }
  return true;
}

/* One warning for every kind of thing given that kcm does not act on. */
static void warn_foreign(const struct kcm_options *f) {
  char list[4096], controllers[1024], gates[1024];
  size_t i, at = 0;
  for (i = 0; i < f->nignored && at < sizeof(list); i++)
    at += (size_t)snprintf(list + at, sizeof(list) - at, "%s--%s", i ? "," : "", f->ignored[i]);
  if (f->nignored)
    kcm_warn("ignoring kube-controller-manager flags of controllers and features kcm does not "
             "have flags=\"%s\"",
             list);
  if (*kcm_options_foreign_controllers(f, controllers, sizeof(controllers)))
    kcm_warn("kcm runs only the deployment and replicaset controllers; the others named in "
             "--controllers are kube-controller-manager's controllers=\"%s\"",
             controllers);
  if (*kcm_options_inert_gates(f, gates, sizeof(gates)))
    kcm_warn("feature gates have no effect on kcm's controllers featureGates=\"%s\"", gates);
}

/* The process-wide settings (descriptor limit, logging) and the leader
 * election's, checked (exits 2 when they are wrong). */
static void apply_flags(struct app *a, const struct kcm_options *f,
                        struct kcm_leader_options *lo) {
  const char *why;

  a->opt = f;
  raise_descriptor_limit();
  a->dc_on = f->deployment_on;
  a->rs_on = f->replicaset_on;
  kcm_log_set_verbosity(f->verbosity);
  if (kcm_log_set_vmodule(f->vmodule))
    flag_error("invalid value \"%s\" for flag --vmodule: out of memory", f->vmodule);
  if (f->json_logs)
    kcm_log_set_format(KCM_LOG_JSON);
  warn_foreign(f);
  lo->ns = f->lease_namespace;
  lo->name = f->lease_name;
  lo->lease_ms = f->lease_ms;
  lo->renew_ms = f->renew_ms;
  lo->retry_ms = f->retry_ms;
  lo->limiter = KCM_LEADER_LIMITER;
  if (f->leader_elect && kcm_leader_check(lo, &why))
    flag_error("invalid leader election settings: %s", why);
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
  uv_timer_init(a->loop, &a->retry);
  uv_timer_init(a->loop, &a->sync_check);
  uv_timer_init(a->loop, &a->grace);
  a->retry.data = a->sync_check.data = a->grace.data = a;
  a->grace_ms = a->opt->grace_ms;
  a->backoff_ms = 800;
  kcm_client_set_rate_limit(a->client, a->opt->qps, a->opt->burst);
  kcm_intern_init(&a->pool);
  return 0;
}

/* The informers of the kinds the enabled controllers watch. */
static int setup_informers(struct app *a) {
  int err, k;

  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  a->used[KCM_KIND_POD] = a->used[KCM_KIND_REPLICASET] = a->dc_on || a->rs_on;
  a->used[KCM_KIND_DEPLOYMENT] = a->dc_on;
  for (k = 0; k < KCM_KIND_COUNT; k++) {
    struct kcm_informer_options io = {0};
    uint32_t r;
    if (!a->used[k])
      continue;
    io.kind = (enum kcm_kind)k;
    io.protobuf = !a->opt->json_api;
    io.watch_list = !a->opt->no_watch_list;
    /* A period in [min, 2 min), as kube-controller-manager picks it. */
    r = (uint32_t)rand();
    io.resync_ms = a->opt->min_resync_ms +
                   (uint64_t)((double)a->opt->min_resync_ms *
                              ((double)r / ((double)RAND_MAX + 1.0)));
    err = kcm_informer_init(&a->informers[k], a->loop, a->client, &a->pool, &io);
    if (err) {
      kcm_error("cannot set up a cache kind=\"%s\" err=\"%s\"",
                kcm_api_kind_name((enum kcm_kind)k), kcm_strerror(err));
      return err;
    }
    a->informers[k].data = a;
  }
  return 0;
}

/* A controller's writer sends as its service account in kube-system, with
 * only upstream's bootstrap role: a token of its own, and the writes the
 * role grants as update sent as updates. */
static int setup_token(struct app *a, struct kcm_satoken *t, struct kcm_writer *w,
                       const char *account) {
  if (kcm_satoken_init(t, a->loop, a->client, KCM_LEADER_LIMITER, "kube-system", account))
    return KCM_EINVAL;
  t->data = a;
  a->tokens_wanted++;
  w->bearer = &t->bearer;
  w->as_update = true;
  return 0;
}

/* --shadow: each controller judged, none guarded (the live controller's
 * writes are what a shadow compares with, not a conflict). */
static int setup_shadow(struct app *a, const struct kcm_options *f) {
  kcm_shadow_init(&a->rs_shadow, "replicaset", f->shadow_window_ms);
  kcm_shadow_init(&a->dc_shadow, "deployment", f->shadow_window_ms);
  if (a->rs_on)
    a->rs.rt.shadow = &a->rs_shadow;
  if (a->dc_on)
    a->dc.rt.shadow = &a->dc_shadow;
  kcm_info("shadow mode: the controllers write nothing and take no lease; what they would "
           "change is reported window=\"%llus\"",
           (unsigned long long)(f->shadow_window_ms / 1000));
  return 0;
}

/* The controllers --controllers enables, each writing through its own
 * writer (on its own client rate limiter). */
static int setup_controllers(struct app *a, const struct kcm_options *f) {
  int err;

  if (f->shadow) {
    kcm_writer_init_dry(&a->rs_writer, a->client, KCM_REPLICASET_LIMITER, a->loop);
    kcm_writer_init_dry(&a->dc_writer, a->client, KCM_DEPLOYMENT_LIMITER, a->loop);
  } else {
    kcm_writer_init(&a->rs_writer, a->client, KCM_REPLICASET_LIMITER);
    kcm_writer_init(&a->dc_writer, a->client, KCM_DEPLOYMENT_LIMITER);
  }
  /* Named as upstream's controllers name their clients, so audit logs and
   * field managers tell who wrote what. */
  a->rs_writer.agent = "replicaset-controller";
  a->dc_writer.agent = "deployment-controller";
  if (f->sa_credentials && ((a->rs_on && setup_token(a, &a->rs_token, &a->rs_writer,
                                                    "replicaset-controller")) ||
                            (a->dc_on && setup_token(a, &a->dc_token, &a->dc_writer,
                                                    "deployment-controller"))))
    return KCM_EINVAL;
  err = !a->rs_on ? 0
                  : kcm_replicaset_controller_init(
                        &a->rs, a->loop, &a->rs_writer, &a->informers[KCM_KIND_REPLICASET],
                        &a->informers[KCM_KIND_POD], &a->pool,
                        &(struct kcm_replicaset_options){(uint32_t)f->replicaset_workers,
                                                         f->status_interval_ms,
                                                         f->failed_pod_backoff_ms, f->shadow});
  if (err) {
    kcm_error("cannot set up a controller name=\"replicaset\" err=\"%s\"", kcm_strerror(err));
    return err;
  }
  err = !a->dc_on ? 0
                  : kcm_deployment_controller_init(
                        &a->dc, a->loop, &a->dc_writer, &a->informers[KCM_KIND_DEPLOYMENT],
                        &a->informers[KCM_KIND_REPLICASET], &a->informers[KCM_KIND_POD],
                        &a->pool, (uint32_t)f->deployment_workers, f->deployment_interval_ms,
                        f->deployment_status_interval_ms);
  if (err) {
    kcm_error("cannot set up a controller name=\"deployment\" err=\"%s\"", kcm_strerror(err));
    return err;
  }
  kcm_conflict_guard_init(&a->guard, a->loop, kcm_client_program(), f->conflict_quiet_ms,
                          (uint32_t)f->conflict_cluster_namespaces, f->stand_aside,
                          f->lease_namespace, f->lease_name);
  if (f->shadow)
    return setup_shadow(a, f);
  kcm_conflict_guard_area(&a->guard, KCM_CONFLICT_REPLICASET, a->rs_on ? &a->rs.rt : NULL);
  kcm_conflict_guard_area(&a->guard, KCM_CONFLICT_DEPLOYMENT, a->dc_on ? &a->dc.rt : NULL);
  if (kcm_conflict_guard_watch(&a->guard,
                              a->used[KCM_KIND_REPLICASET] ? &a->informers[KCM_KIND_REPLICASET]
                                                           : NULL,
                              a->dc_on ? &a->informers[KCM_KIND_DEPLOYMENT] : NULL)) {
    kcm_error("cannot set up a controller name=\"conflict-guard\" err=\"out of memory\"");
    return KCM_ENOMEM;
  }
  return 0;
}

static int setup_leader(struct app *a, const struct kcm_leader_options *lo) {
  int err;

  a->elect = a->opt->leader_elect && !a->opt->shadow;
  if (a->elect) {
    if ((err = kcm_leader_init(&a->leader, a->loop, a->client, lo))) {
      kcm_error("cannot set up leader election err=\"%s\"", kcm_strerror(err));
      return err;
    }
    a->leader.data = a;
    a->leader.on_started = on_started_leading;
    a->leader.on_lost = on_lost_lease;
    a->leader.on_released = on_lease_released;
  }
  return 0;
}

/* Serve, reach the API server, campaign, start the informers, and run the
 * loop until shut down. */
static void run(struct app *a) {
  int k;

  serve_secure(a);
  serve_plain(a, a->opt->health_address, true);
  serve_plain(a, a->opt->metrics_address, false);
  check_server(a);
  if (a->elect)
    kcm_leader_start(&a->leader);
  uv_update_time(a->loop);
  a->started = uv_now(a->loop);
  for (k = 0; k < KCM_KIND_COUNT; k++)
    if (a->used[k])
      kcm_informer_start(&a->informers[k]);
  uv_timer_start(&a->sync_check, on_sync_check, 50, 50);

  uv_run(a->loop, UV_RUN_DEFAULT);
}

/* Free what is left once the loop has stopped (the controllers freed). */
static void teardown(struct app *a) {
  int k;

  for (k = 0; k < KCM_KIND_COUNT; k++)
    if (a->used[k])
      kcm_informer_release(&a->informers[k]);
  kcm_intern_release(&a->pool);
  if (a->serving_secure) {
    kcm_auth_release(&a->auth);
    kcm_tls_free(a->tls);
  }
  uv_loop_close(a->loop);
  kcm_client_config_release(&a->authz_cfg);
  kcm_client_config_release(&a->authn_cfg);
  kcm_client_config_release(&a->cfg);
  kcm_info("stopped");
}

int main(int argc, char **argv) {
  struct kcm_options f;
  struct kcm_leader_options lo = {0};
  struct app a = {0};

  kcm_client_set_program(argv[0]);
  if (!parse_flags(&f, argc, argv))
    return 0;
  apply_flags(&a, &f, &lo);
  if (load_config(&a) || setup_client(&a) || setup_informers(&a) || setup_controllers(&a, &f))
    return 1;
  if (setup_leader(&a, &lo))
    return 1;
  run(&a);
  if (a.opt->sa_credentials) {
    kcm_satoken_release(&a.rs_token);
    kcm_satoken_release(&a.dc_token);
  }
  if (f.shadow) {
    kcm_shadow_release(&a.rs_shadow);
    kcm_shadow_release(&a.dc_shadow);
  }
  if (a.rs_on)
    kcm_replicaset_controller_release(&a.rs);
  if (a.dc_on)
    kcm_deployment_controller_release(&a.dc);
  teardown(&a);
  return 0;
}
