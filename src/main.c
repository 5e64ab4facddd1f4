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
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "kcm/client.h"
#include "kcm/deployment.h"
#include "kcm/error.h"
#include "kcm/informer.h"
#include "kcm/leader.h"
#include "kcm/log.h"
#include "kcm/metrics.h"
#include "kcm/replicaset.h"
#include "kcm/server.h"

struct flags {
  const char *kubeconfig;
  const char *context;
  const char *master;
  int verbosity;
  double qps;
  int burst;
  int rs_workers;
  int d_workers;
  bool leader_elect;
  uint64_t lease_ms, renew_ms, retry_ms, grace_ms;
  const char *lease_ns, *lease_name;
  const char *health_addr, *metrics_addr;
  const char *controllers;
  uint64_t min_resync_ms;
  uint64_t status_interval_ms;
  uint64_t failed_backoff_ms;
};

struct app {
  uv_loop_t *loop;
  struct kcm_client_config cfg;
  struct kcm_client *client;
  struct kcm_intern pool;
  struct kcm_informer informers[KCM_KIND_COUNT];
  bool used[KCM_KIND_COUNT]; /* informers the enabled controllers need */
  int informers_open;
  bool dc_on, rs_on;         /* enabled by --controllers */
  struct kcm_replicaset_controller rs;
  struct kcm_deployment_controller dc;
  struct kcm_leader leader;
  bool elect;
  bool leading;
  bool running;       /* the controllers were started */
  bool stopping;
  int controllers_running;
  uv_timer_t grace;
  uint64_t grace_ms;
  uint64_t grace_deadline; /* loop ms; 0 once the grace period is over */
  bool flushed;
  struct kcm_server health, metrics;
  bool serving_health, serving_metrics;
  uv_signal_t sigterm, sigint;
  uv_timer_t retry;
  uv_timer_t sync_check;
  uint64_t started;
  uint64_t backoff_ms;
  bool connected;
  bool synced;
};

static void usage(FILE *out) {
  fprintf(out,
          "Usage: kcm [flags]\n"
          "\n"
          "kcm runs the Deployment and ReplicaSet controllers against a Kubernetes API "
          "server.\n"
          "\n"
          "Flags:\n"
          "  --kubeconfig PATH   kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or\n"
          "                      the in-cluster service account)\n"
          "  --context NAME      kubeconfig context to use (default: current-context)\n"
          "  --master URL        API server URL; overrides the kubeconfig's server\n"
          "  --kube-api-qps N    requests per second to the API server, per controller\n"
          "                      (default 20)\n"
          "  --kube-api-burst N  requests allowed in a burst, per controller (default 30)\n"
          "  --controllers LIST  controllers to run: names, * for all, -name to leave one\n"
          "                      out; known: deployment, replicaset (default *)\n"
          "  --min-resync-period D\n"
          "                      caches resync at a random period in [D, 2D) (default 12h)\n"
          "  --concurrent-deployment-syncs N\n"
          "                      Deployments synced at once (default 5)\n"
          "  --concurrent-replicaset-syncs N\n"
          "                      ReplicaSets synced at once (default 5)\n"
          "  --status-write-interval D\n"
          "                      a ReplicaSet status write that only reports more pods\n"
          "                      (created, ready, available) waits until D after the\n"
          "                      last one; 0 writes it at once, as kube-controller-manager\n"
          "                      (default 100ms)\n"
          "  --failed-pod-backoff D\n"
          "                      when a ReplicaSet's pods keep failing, wait 1s, 2s, 4s, ...\n"
          "                      up to D before creating replacements; 0 replaces at once,\n"
          "                      as kube-controller-manager (default 5m)\n"
          "  --leader-elect[=BOOL]\n"
          "                      run the controllers only while holding the lease (default\n"
          "                      true)\n"
          "  --leader-elect-lease-duration D\n"
          "                      how long a lease not renewed stays held (default 15s)\n"
          "  --leader-elect-renew-deadline D\n"
          "                      how long the leader tries to renew before giving up\n"
          "                      (default 10s)\n"
          "  --leader-elect-retry-period D\n"
          "                      time between tries to acquire or renew (default 2s)\n"
          "  --leader-elect-resource-namespace NS\n"
          "                      namespace of the Lease (default kube-system)\n"
          "  --leader-elect-resource-name NAME\n"
          "                      name of the Lease (default kcm)\n"
          "  --health-probe-bind-address ADDR\n"
          "                      where /healthz, /livez and /readyz are served; 0 turns\n"
          "                      them off (default :8081)\n"
          "  --metrics-bind-address ADDR\n"
          "                      where /metrics is served; 0 turns it off (default :8080)\n"
          "  --shutdown-grace-period D\n"
          "                      how long syncs in progress may run on after SIGTERM\n"
          "                      (default 30s)\n"
          "  -v, --v N           log verbosity (default 0)\n"
          "  --logging-format F  text (klog lines, the default) or json\n"
          "  --version           print the version and exit\n"
          "  -h, --help          print this help and exit\n");
}

/* Exit 2 after a flag error, as kube-controller-manager does. */
static void flag_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void flag_error(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "kcm: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\n\n");
  usage(stderr);
  exit(2);
}

static int parse_int(const char *s, int *out) {
  char *end;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < INT_MIN || v > INT_MAX)
    return -1;
  *out = (int)v;
  return 0;
}

/* A Go duration ("15s", "1m30s", "1.5s", "500ms", "0") in milliseconds. */
static int parse_duration(const char *s, uint64_t *out) {
  static const struct {
    const char *unit;
    double ms;
  } units[] = {{"ns", 1e-6}, {"us", 1e-3}, {"\xc2\xb5s", 1e-3}, {"ms", 1}, {"s", 1000},
               {"m", 60000}, {"h", 3600000}};
  double total = 0;
  const char *p = s;
  if (!strcmp(s, "0")) {
    *out = 0;
    return 0;
  }
  if (!*p)
    return -1;
  while (*p) {
    char *end;
    double v;
    size_t i, best = 0, best_len = 0;
    if (*p == '-' || *p == '+')
      return -1;
    errno = 0;
    v = strtod(p, &end);
    if (end == p || errno)
      return -1;
    p = end;
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
      size_t n = strlen(units[i].unit);
      if (!strncmp(p, units[i].unit, n) && n > best_len) {
        best = i;
        best_len = n;
      }
    }
    if (!best_len)
      return -1;
    total += v * units[best].ms;
    p += best_len;
  }
  if (total > 1e15)
    return -1;
  *out = (uint64_t)(total + 0.5);
  return 0;
}

static bool is_bool_flag(const char *key) { return !strcmp(key, "leader-elect"); }

static bool known_flag(const char *key) {
  static const char *const names[] = {
      "kubeconfig", "context", "master", "v", "kube-api-qps", "kube-api-burst",
      "concurrent-replicaset-syncs", "concurrent-deployment-syncs", "leader-elect",
      "leader-elect-lease-duration", "leader-elect-renew-deadline", "leader-elect-retry-period",
      "leader-elect-resource-namespace", "leader-elect-resource-name", "shutdown-grace-period",
      "health-probe-bind-address", "metrics-bind-address", "controllers", "min-resync-period",
      "logging-format", "status-write-interval", "failed-pod-backoff"};
  size_t i;
  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (!strcmp(key, names[i]))
      return true;
  return false;
}

static void duration_flag(const char *key, const char *value, uint64_t *out) {
  if (parse_duration(value, out) != 0)
    flag_error("invalid value \"%s\" for flag --%s: must be a duration such as 15s, 500ms "
               "or 1m30s", value, key);
}

/* --controllers as kube-controller-manager reads it: a name turns a
 * controller on, "-name" off, and "*" every controller not turned off. */
static void parse_controllers(const char *list, bool *dc_on, bool *rs_on) {
  static const char *const known[] = {"deployment", "replicaset"};
  bool named[2] = {false, false}, off[2] = {false, false}, star = false;
  const char *p = list;
  size_t i;
  while (*p) {
    size_t n = strcspn(p, ",");
    bool minus = *p == '-';
    const char *name = p + minus;
    size_t len = n - minus;
    if (len == 1 && *name == '*' && !minus) {
      star = true;
    } else {
      for (i = 0; i < 2; i++)
        if (strlen(known[i]) == len && !strncmp(name, known[i], len))
          break;
      if (i == 2)
        flag_error("invalid value \"%s\" for flag --controllers: \"%.*s\" is not in the list "
                   "of known controllers (deployment, replicaset)", list, (int)len, name);
      if (minus)
        off[i] = true;
      else
        named[i] = true;
    }
    p += n;
    if (*p == ',')
      p++;
  }
  *dc_on = !off[0] && (named[0] || star);
  *rs_on = !off[1] && (named[1] || star);
}

static void parse_flags(int argc, char **argv, struct flags *f) {
  int i;
  for (i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const char *name, *value = NULL, *eq;
    char key[64];
    size_t klen;

    if (arg[0] != '-' || !arg[1])
      flag_error("unexpected argument \"%s\"", arg);
    name = arg + (arg[1] == '-' ? 2 : 1);
    eq = strchr(name, '=');
    klen = eq ? (size_t)(eq - name) : strlen(name);
    if (klen >= sizeof(key))
      flag_error("unknown flag: %s", arg);
    memcpy(key, name, klen);
    key[klen] = '\0';
    if (eq)
      value = eq + 1;

    if (!strcmp(key, "h") || !strcmp(key, "help")) {
      usage(stdout);
      exit(0);
    }
    if (!strcmp(key, "version")) {
      printf("kcm %s\n", KCM_VERSION);
      exit(0);
    }
    if (!known_flag(key))
      flag_error("unknown flag: %s", arg);
    if (is_bool_flag(key)) {
      if (!value || !strcmp(value, "true") || !strcmp(value, "1"))
        f->leader_elect = true;
      else if (!strcmp(value, "false") || !strcmp(value, "0"))
        f->leader_elect = false;
      else
        flag_error("invalid value \"%s\" for flag --%s: must be true or false", value, key);
      continue;
    }
    if (!value) {
      if (i + 1 >= argc)
        flag_error("flag needs an argument: %s", arg);
      value = argv[++i];
    }
    if (!strcmp(key, "kubeconfig"))
      f->kubeconfig = value;
    else if (!strcmp(key, "context"))
      f->context = value;
    else if (!strcmp(key, "master"))
      f->master = value;
    else if (!strcmp(key, "kube-api-qps")) {
      char *end;
      f->qps = strtod(value, &end);
      if (end == value || *end || f->qps < 0)
        flag_error("invalid value \"%s\" for flag --kube-api-qps: must be a non-negative "
                   "number", value);
    } else if (!strcmp(key, "concurrent-replicaset-syncs")) {
      if (parse_int(value, &f->rs_workers) != 0 || f->rs_workers < 1)
        flag_error("invalid value \"%s\" for flag --concurrent-replicaset-syncs: must be a "
                   "positive integer", value);
    } else if (!strcmp(key, "concurrent-deployment-syncs")) {
      if (parse_int(value, &f->d_workers) != 0 || f->d_workers < 1)
        flag_error("invalid value \"%s\" for flag --concurrent-deployment-syncs: must be a "
                   "positive integer", value);
    } else if (!strcmp(key, "leader-elect-lease-duration")) {
      duration_flag(key, value, &f->lease_ms);
    } else if (!strcmp(key, "leader-elect-renew-deadline")) {
      duration_flag(key, value, &f->renew_ms);
    } else if (!strcmp(key, "leader-elect-retry-period")) {
      duration_flag(key, value, &f->retry_ms);
    } else if (!strcmp(key, "min-resync-period")) {
      duration_flag(key, value, &f->min_resync_ms);
    } else if (!strcmp(key, "status-write-interval")) {
      duration_flag(key, value, &f->status_interval_ms);
    } else if (!strcmp(key, "failed-pod-backoff")) {
      duration_flag(key, value, &f->failed_backoff_ms);
    } else if (!strcmp(key, "logging-format")) {
      if (!strcmp(value, "json"))
        kcm_log_set_format(KCM_LOG_JSON);
      else if (strcmp(value, "text"))
        flag_error("invalid value \"%s\" for flag --logging-format: must be text or json",
                   value);
    } else if (!strcmp(key, "controllers")) {
      f->controllers = value;
    } else if (!strcmp(key, "shutdown-grace-period")) {
      duration_flag(key, value, &f->grace_ms);
    } else if (!strcmp(key, "health-probe-bind-address") ||
               !strcmp(key, "metrics-bind-address")) {
      char host[64];
      int port;
      if (strcmp(value, "0") &&
          kcm_server_parse_address(value, host, sizeof(host), &port) != 0)
        flag_error("invalid value \"%s\" for flag --%s: must be [host]:port or 0", value, key);
      if (key[0] == 'h')
        f->health_addr = value;
      else
        f->metrics_addr = value;
    } else if (!strcmp(key, "leader-elect-resource-namespace")) {
      f->lease_ns = value;
    } else if (!strcmp(key, "leader-elect-resource-name")) {
      f->lease_name = value;
    } else if (!strcmp(key, "kube-api-burst")) {
      if (parse_int(value, &f->burst) != 0 || f->burst < 1)
        flag_error("invalid value \"%s\" for flag --kube-api-burst: must be a positive "
                   "integer", value);
    } else if (parse_int(value, &f->verbosity) != 0 || f->verbosity < 0)
      flag_error("invalid value \"%s\" for flag -v: must be a non-negative integer", value);
  }
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

struct check {
  const char *name;
  bool ok;
};

static bool excluded(const char *query, const char *name) {
  const char *p = query;
  size_t n = strlen(name);
  while ((p = strstr(p, "exclude="))) {
    p += 8;
    if (!strncmp(p, name, n) && (p[n] == '\0' || p[n] == '&'))
      return true;
  }
  return false;
}

static bool has_param(const char *query, const char *param) {
  size_t n = strlen(param);
  const char *p = query;
  for (; p && *p; p = strchr(p, '&'), p = p ? p + 1 : NULL)
    if (!strncmp(p, param, n) && (p[n] == '\0' || p[n] == '&' || p[n] == '='))
      return true;
  return false;
}

/* Answer as kube-apiserver's healthz handlers do: "ok", or with ?verbose
 * (and always on failure) one "[+]name ok" / "[-]name failed" line per
 * check, then "<endpoint> check passed|failed". /<endpoint>/<check> runs one. */
static void serve_checks(const char *endpoint, const struct check *checks, size_t n,
                         const struct kcm_server_request *req,
                         struct kcm_server_response *resp) {
  const char *sub = req->path + 1 + strlen(endpoint);
  bool failed = false;
  size_t i;
  if (*sub == '/') {
    for (i = 0; i < n; i++)
      if (!strcmp(sub + 1, checks[i].name)) {
        resp->status = checks[i].ok ? 200 : 500;
        kcm_buf_appendf(&resp->body, checks[i].ok ? "ok" : "internal server error: %s check "
                                                           "failed\n", checks[i].name);
        return;
      }
    resp->status = 404;
    kcm_buf_append_str(&resp->body, "404 page not found\n");
    return;
  }
  for (i = 0; i < n; i++)
    if (!checks[i].ok && !excluded(req->query, checks[i].name))
      failed = true;
  resp->status = failed ? 500 : 200;
  if (!failed && !has_param(req->query, "verbose")) {
    kcm_buf_append_str(&resp->body, "ok");
    return;
  }
  for (i = 0; i < n; i++) {
    if (excluded(req->query, checks[i].name))
      kcm_buf_appendf(&resp->body, "[+]%s excluded: ok\n", checks[i].name);
    else if (checks[i].ok)
      kcm_buf_appendf(&resp->body, "[+]%s ok\n", checks[i].name);
    else
      kcm_buf_appendf(&resp->body, "[-]%s failed: reason withheld\n", checks[i].name);
  }
  kcm_buf_appendf(&resp->body, "%s check %s\n", endpoint, failed ? "failed" : "passed");
}

static bool under(const char *path, const char *prefix) {
  size_t n = strlen(prefix);
  return !strncmp(path, prefix, n) && (path[n] == '\0' || path[n] == '/');
}

static void on_health(void *data, const struct kcm_server_request *req,
                      struct kcm_server_response *resp) {
  struct app *a = data;
  bool leader_ok = !a->elect || kcm_leader_healthy(&a->leader, uv_now(a->loop),
                                                    LEADER_HEALTH_TOLERANCE_MS);
  struct check live[] = {{"ping", true}, {"leaderElection", leader_ok}};
  struct check ready[] = {{"ping", true}, {"informer-sync", a->synced},
                          {"shutdown", !a->stopping}};
  if (under(req->path, "/healthz"))
    serve_checks("healthz", live, 2, req, resp);
  else if (under(req->path, "/livez"))
    serve_checks("livez", live, 2, req, resp);
  else if (under(req->path, "/readyz"))
    serve_checks("readyz", ready, 3, req, resp);
  else {
    resp->status = 404;
    kcm_buf_append_str(&resp->body, "404 page not found\n");
  }
}

static void on_metrics(void *data, const struct kcm_server_request *req,
                       struct kcm_server_response *resp) {
  struct app *a = data;
  const struct kcm_workqueue *queues[2];
  const char *names[2];
  const char *lease[] = {"name", a->elect ? a->leader.name : "kcm", NULL};
  char labels[600];
  size_t n = 0;
  if (strcmp(req->path, "/metrics")) {
    resp->status = 404;
    kcm_buf_append_str(&resp->body, "404 page not found\n");
    return;
  }
  if (a->dc_on) {
    queues[n] = &a->dc.queue;
    names[n++] = "deployment";
  }
  if (a->rs_on) {
    queues[n] = &a->rs.queue;
    names[n++] = "replicaset";
  }
  resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
  if (kcm_metrics_labels(labels, sizeof(labels), lease) ||
      kcm_metrics_family(&resp->body, "leader_election_master_status", "gauge",
                         "Gauge of if the reporting system is master of the relevant lease, 0 "
                         "indicates backup, 1 indicates master. 'name' is the string used to "
                         "identify the lease. Please make sure to group by name.") ||
      kcm_metrics_sample(&resp->body, "leader_election_master_status", labels,
                         a->elect ? a->leading : 1) ||
      kcm_metrics_process(&resp->body)) {
    resp->status = 500;
    kcm_buf_reset(&resp->body);
    kcm_buf_append_str(&resp->body, "could not render the metrics\n");
    return;
  }
  if (a->client)
    kcm_client_metrics(a->client, &resp->body);
  kcm_workqueue_metrics_many(queues, names, n, uv_now(a->loop), &resp->body);
}

static void serve(struct app *a, const char *addr, bool health) {
  const char *why = NULL;
  struct kcm_server *s = health ? &a->health : &a->metrics;
  if (!strcmp(addr, "0"))
    return;
  if (kcm_server_listen(s, a->loop, addr, health ? on_health : on_metrics, a, &why)) {
    fprintf(stderr, "kcm: cannot serve %s on %s: %s\n", health ? "health probes" : "metrics",
            addr, why);
    exit(1);
  }
  if (health)
    a->serving_health = true;
  else
    a->serving_metrics = true;
  kcm_info("serving %s address=\"%s\"", health ? "health probes" : "metrics", s->address);
}

/* The controllers run once every cache is synced and, with leader election,
 * while this process holds the lease: a standby sends no write. */
static void maybe_start(struct app *a) {
  if (a->running || a->stopping || !a->synced || (a->elect && !a->leading))
    return;
  a->running = true;
  if (a->dc_on) {
    kcm_info("starting controller name=\"deployment\" workers=%u", a->dc.workers);
    kcm_deployment_run(&a->dc);
  }
  if (a->rs_on) {
    kcm_info("starting controller name=\"replicaset\" workers=%u", a->rs.workers);
    kcm_replicaset_run(&a->rs);
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
  if (a->serving_health)
    kcm_server_close(&a->health, NULL);
  if (a->serving_metrics)
    kcm_server_close(&a->metrics, NULL);
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
  stop_informers(a);
}

static bool events_pending(const struct app *a) {
  return (a->dc_on && (a->dc.events.sending || a->dc.events.queued)) ||
         (a->rs_on && (a->rs.events.sending || a->rs.events.queued));
}

/* Events are flushed, or the grace period is over: release the lease, then
 * stop the informers (and with them the client). */
static void after_flush(struct app *a) {
  if (a->flushed)
    return;
  a->flushed = true;
  uv_timer_stop(&a->grace);
  uv_close((uv_handle_t *)&a->grace, NULL);
  if (a->elect)
    kcm_leader_release(&a->leader);
  else
    stop_informers(a);
}

static void on_flush_check(uv_timer_t *t) {
  struct app *a = t->data;
  if (!events_pending(a) || uv_now(a->loop) >= a->grace_deadline)
    after_flush(a);
}

/* The controllers have stopped, or the grace period is over: post the
 * events still queued (within the grace period), then release. */
static void after_controllers(struct app *a) {
  if (a->controllers_running < 0)
    return;
  a->controllers_running = -1;
  kcm_info("controllers stopped queuedEvents=%zu",
           (a->dc_on ? a->dc.events.queued + a->dc.events.sending : 0) +
               (a->rs_on ? a->rs.events.queued + a->rs.events.sending : 0));
  if (!events_pending(a) || uv_now(a->loop) >= a->grace_deadline) {
    after_flush(a);
    return;
  }
  uv_timer_stop(&a->grace);
  uv_timer_start(&a->grace, on_flush_check, 20, 20);
}

static void controller_stopped(struct app *a) {
  if (a->controllers_running > 0 && --a->controllers_running == 0)
    after_controllers(a);
}

static void on_grace_over(uv_timer_t *t) {
  struct app *a = t->data;
  a->grace_deadline = 0;
  kcm_error("syncs in progress did not finish within the shutdown grace period "
            "gracePeriod=\"%llums\"", (unsigned long long)a->grace_ms);
  after_controllers(a);
}

static void rs_stopped(struct kcm_replicaset_controller *rs) {
  controller_stopped((struct app *)(void *)((char *)rs - offsetof(struct app, rs)));
}

static void dc_stopped(struct kcm_deployment_controller *dc) {
  controller_stopped((struct app *)(void *)((char *)dc - offsetof(struct app, dc)));
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
  a->stopping = true;
  a->controllers_running = a->dc_on + a->rs_on;
  a->grace_deadline = uv_now(a->loop) + a->grace_ms;
  uv_timer_start(&a->grace, on_grace_over, a->grace_ms, 0);
  if (a->dc_on)
    kcm_deployment_stop(&a->dc, dc_stopped);
  if (a->rs_on)
    kcm_replicaset_stop(&a->rs, rs_stopped);
  if (!a->controllers_running)
    after_controllers(a);
}

int main(int argc, char **argv) {
  struct flags f = {NULL, NULL, NULL, 0, 20, 30, 5, 5, true, 15000, 10000, 2000, 30000,
                    "kube-system", "kcm", ":8081", ":8080", "*", 12 * 3600 * 1000ULL, 100,
                    300000};
  struct kcm_leader_options lo = {0};
  const char *why;
  struct kcm_client_config_options copts;
  struct app a = {0};
  char *errmsg = NULL;
  int err, k;

  parse_flags(argc, argv, &f);
  parse_controllers(f.controllers, &a.dc_on, &a.rs_on);
  kcm_log_set_verbosity(f.verbosity);
  lo.ns = f.lease_ns;
  lo.name = f.lease_name;
  lo.lease_ms = f.lease_ms;
  lo.renew_ms = f.renew_ms;
  lo.retry_ms = f.retry_ms;
  lo.limiter = KCM_LEADER_LIMITER;
  if (f.leader_elect && kcm_leader_check(&lo, &why))
    flag_error("invalid leader election settings: %s", why);
  copts.kubeconfig = f.kubeconfig;
  copts.context = f.context;
  copts.master = f.master;
  err = kcm_client_config_load(&a.cfg, &copts, &errmsg);
  if (err) {
    fprintf(stderr, "kcm: %s\n", errmsg ? errmsg : kcm_strerror(err));
    free(errmsg);
    return 1;
  }
  kcm_info("starting kcm version=\"%s\" config=\"%s\" context=\"%s\" server=\"%s\"",
           KCM_VERSION, a.cfg.source ? a.cfg.source : "", a.cfg.context ? a.cfg.context : "",
           a.cfg.server);

  a.loop = uv_default_loop();
  err = kcm_client_new(&a.client, a.loop, &a.cfg);
  if (err) {
    fprintf(stderr, "kcm: cannot set up the API client for %s: %s\n", a.cfg.server,
            kcm_strerror(err));
    kcm_client_config_release(&a.cfg);
    return 1;
  }
  uv_signal_init(a.loop, &a.sigterm);
  uv_signal_init(a.loop, &a.sigint);
  a.sigterm.data = a.sigint.data = &a;
  uv_signal_start(&a.sigterm, on_signal, SIGTERM);
  uv_signal_start(&a.sigint, on_signal, SIGINT);
  uv_timer_init(a.loop, &a.retry);
  uv_timer_init(a.loop, &a.sync_check);
  uv_timer_init(a.loop, &a.grace);
  a.retry.data = a.sync_check.data = a.grace.data = &a;
  a.grace_ms = f.grace_ms;
  a.backoff_ms = 800;
  kcm_client_set_rate_limit(a.client, f.qps, f.burst);
  kcm_intern_init(&a.pool);
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  a.used[KCM_KIND_POD] = a.used[KCM_KIND_REPLICASET] = a.dc_on || a.rs_on;
  a.used[KCM_KIND_DEPLOYMENT] = a.dc_on;
  for (k = 0; k < KCM_KIND_COUNT; k++) {
    struct kcm_informer_options io = {0};
    uint32_t r;
    if (!a.used[k])
      continue;
    io.kind = (enum kcm_kind)k;
    /* A period in [min, 2 min), as kube-controller-manager picks it. */
    r = (uint32_t)rand();
    io.resync_ms = f.min_resync_ms + (uint64_t)((double)f.min_resync_ms *
                                                 ((double)r / ((double)RAND_MAX + 1.0)));
    err = kcm_informer_init(&a.informers[k], a.loop, a.client, &a.pool, &io);
    if (err) {
      fprintf(stderr, "kcm: cannot set up the %s cache: %s\n",
              kcm_api_kind_name((enum kcm_kind)k), kcm_strerror(err));
      return 1;
    }
    a.informers[k].data = &a;
  }
  err = !a.rs_on ? 0
                 : kcm_replicaset_init(&a.rs, a.loop, a.client,
                                       &a.informers[KCM_KIND_REPLICASET],
                                       &a.informers[KCM_KIND_POD], &a.pool,
                                       &(struct kcm_replicaset_options){
                                           (uint32_t)f.rs_workers, f.status_interval_ms,
                                           f.failed_backoff_ms});
  if (err) {
    fprintf(stderr, "kcm: cannot set up the ReplicaSet controller: %s\n", kcm_strerror(err));
    return 1;
  }
  err = !a.dc_on ? 0
                 : kcm_deployment_init(&a.dc, a.loop, a.client,
                                       &a.informers[KCM_KIND_DEPLOYMENT],
                                       &a.informers[KCM_KIND_REPLICASET],
                                       &a.informers[KCM_KIND_POD], &a.pool,
                                       (uint32_t)f.d_workers);
  if (err) {
    fprintf(stderr, "kcm: cannot set up the Deployment controller: %s\n", kcm_strerror(err));
    return 1;
  }
  a.elect = f.leader_elect;
  if (a.elect) {
    if ((err = kcm_leader_init(&a.leader, a.loop, a.client, &lo))) {
      fprintf(stderr, "kcm: cannot set up leader election: %s\n", kcm_strerror(err));
      return 1;
    }
    a.leader.data = &a;
    a.leader.on_started = on_started_leading;
    a.leader.on_lost = on_lost_lease;
    a.leader.on_released = on_lease_released;
  }
  serve(&a, f.health_addr, true);
  serve(&a, f.metrics_addr, false);
  check_server(&a);
  if (a.elect)
    kcm_leader_start(&a.leader);
  uv_update_time(a.loop);
  a.started = uv_now(a.loop);
  for (k = 0; k < KCM_KIND_COUNT; k++)
    if (a.used[k])
      kcm_informer_start(&a.informers[k]);
  uv_timer_start(&a.sync_check, on_sync_check, 50, 50);

  uv_run(a.loop, UV_RUN_DEFAULT);
  if (a.rs_on)
    kcm_replicaset_release(&a.rs);
  if (a.dc_on)
    kcm_deployment_release(&a.dc);
  for (k = 0; k < KCM_KIND_COUNT; k++)
    if (a.used[k])
      kcm_informer_release(&a.informers[k]);
  kcm_intern_release(&a.pool);
  uv_loop_close(a.loop);
  kcm_client_config_release(&a.cfg);
  kcm_info("stopped");
  return 0;
}
