/* options — kcm's command line; see include/kcm/options.h. */
#include "kcm/options.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/server.h"

enum kind {
  STRING,    /* any text */
  POSITIVE,  /* an int >= 1 */
  LEVEL,     /* an int >= 0 */
  PORT,      /* 0..65535 */
  RATE,      /* a number >= 0 */
  DURATION,  /* a Go duration */
  BOOLEAN,   /* true/false, or alone for true */
  ADDRESS,   /* [host]:port, or 0 for off */
  IP,        /* an IP address */
  LOG_FORMAT,
  TLS_VERSION,
};

struct flag {
  const char *section; /* starts a section in --help when set */
  const char *name;
  const char *value;   /* the value's name in --help; NULL for booleans */
  enum kind kind;
  size_t offset;       /* of the field in struct kcm_options */
  const char *help;    /* lines after the first are indented */
};

#define AT(field) offsetof(struct kcm_options, field)

static const struct flag flags[] = {
    {"Generic flags", "controllers", "LIST", STRING, AT(controllers),
     "controllers to run: names, * for all, -name to leave one out;\n"
     "known: deployment, replicaset (default *)"},
    {NULL, "min-resync-period", "D", DURATION, AT(min_resync_ms),
     "caches resync at a random period in [D, 2D) (default 12h)"},
    {NULL, "leader-elect", NULL, BOOLEAN, AT(leader_elect),
     "run the controllers only while holding the lease (default true)"},
    {NULL, "leader-elect-lease-duration", "D", DURATION, AT(lease_ms),
     "how long a lease not renewed stays held (default 15s)"},
    {NULL, "leader-elect-renew-deadline", "D", DURATION, AT(renew_ms),
     "how long the leader tries to renew before giving up (default 10s)"},
    {NULL, "leader-elect-retry-period", "D", DURATION, AT(retry_ms),
     "time between tries to acquire or renew (default 2s)"},
    {NULL, "leader-elect-resource-namespace", "NS", STRING, AT(lease_namespace),
     "namespace of the Lease (default kube-system)"},
    {NULL, "leader-elect-resource-name", "NAME", STRING, AT(lease_name),
     "name of the Lease (default kcm)"},
    {NULL, "shutdown-grace-period", "D", DURATION, AT(grace_ms),
     "how long syncs in progress may run on after SIGTERM (default 30s)"},

    {"Secure serving flags", "secure-port", "PORT", PORT, AT(secure_port),
     "HTTPS port for /healthz, /livez, /readyz and /metrics; 0 turns\n"
     "it off (default 10257)"},
    {NULL, "bind-address", "IP", IP, AT(bind_address),
     "address to listen on for --secure-port; 0.0.0.0 or :: for every\n"
     "interface (default 0.0.0.0)"},
    {NULL, "cert-dir", "DIR", STRING, AT(cert_dir),
     "where the self-signed certificate made when no --tls-cert-file\n"
     "is given is kept (kcm.crt, kcm.key) and found again; empty keeps\n"
     "it in memory (default \"\")"},
    {NULL, "tls-cert-file", "PATH", STRING, AT(tls_cert_file),
     "PEM certificate (chain) to serve; read again when it changes"},
    {NULL, "tls-private-key-file", "PATH", STRING, AT(tls_key_file),
     "PEM private key of --tls-cert-file"},
    {NULL, "tls-min-version", "V", TLS_VERSION, AT(tls13_only),
     "VersionTLS12 or VersionTLS13 (default VersionTLS12)"},

    {"Authentication flags", "authentication-kubeconfig", "PATH", STRING, AT(authn_kubeconfig),
     "kubeconfig for TokenReviews of bearer tokens (default: kcm's own\n"
     "connection)"},
    {NULL, "authentication-token-webhook-cache-ttl", "D", DURATION, AT(token_ttl_ms),
     "how long TokenReview answers are cached (default 10s)"},
    {NULL, "client-ca-file", "PATH", STRING, AT(client_ca_file),
     "PEM CAs that sign client certificates; a verified one's common\n"
     "name is the user, its organizations the groups"},

    {"Authorization flags", "authorization-kubeconfig", "PATH", STRING, AT(authz_kubeconfig),
     "kubeconfig for SubjectAccessReviews (default: kcm's own\n"
     "connection)"},
    {NULL, "authorization-always-allow-paths", "LIST", STRING, AT(always_allow_paths),
     "paths anyone may get, even unauthenticated; '*' at the end\n"
     "matches a prefix (default /healthz,/readyz,/livez)"},
    {NULL, "authorization-webhook-cache-authorized-ttl", "D", DURATION, AT(allow_ttl_ms),
     "how long allowing answers are cached (default 10s)"},
    {NULL, "authorization-webhook-cache-unauthorized-ttl", "D", DURATION, AT(deny_ttl_ms),
     "how long refusing answers are cached (default 10s)"},

    {"Deployment controller flags", "concurrent-deployment-syncs", "N", POSITIVE,
     AT(deployment_workers), "Deployments synced at once (default 5)"},

    {"ReplicaSet controller flags", "concurrent-replicaset-syncs", "N", POSITIVE,
     AT(replicaset_workers), "ReplicaSets synced at once (default 5)"},
    {NULL, "status-write-interval", "D", DURATION, AT(status_interval_ms),
     "a ReplicaSet status write that only reports more pods (created,\n"
     "ready, available) waits until D after the last one; 0 writes it\n"
     "at once, as kube-controller-manager (default 100ms)"},
    {NULL, "failed-pod-backoff", "D", DURATION, AT(failed_pod_backoff_ms),
     "when a ReplicaSet's pods keep failing, wait 1s, 2s, 4s, ... up to\n"
     "D before creating replacements; 0 replaces at once, as\n"
     "kube-controller-manager (default 5m)"},

    {"Plain HTTP flags (local runs)", "health-probe-bind-address", "ADDR", ADDRESS,
     AT(health_address),
     "serve /healthz, /livez and /readyz without TLS or authorization\n"
     "at [host]:port (a port alone: loopback); 0 turns it off\n"
     "(default 0)"},
    {NULL, "metrics-bind-address", "ADDR", ADDRESS, AT(metrics_address),
     "serve /metrics without TLS or authorization at [host]:port (a\n"
     "port alone: loopback); 0 turns it off (default 0)"},

    {"Logs flags", "v", "N", LEVEL, AT(verbosity), "log verbosity (default 0)"},
    {NULL, "logging-format", "F", LOG_FORMAT, AT(json_logs),
     "text (klog lines, the default) or json"},

    {"Misc flags", "kubeconfig", "PATH", STRING, AT(kubeconfig),
     "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the\n"
     "in-cluster service account)"},
    {NULL, "context", "NAME", STRING, AT(context),
     "kubeconfig context to use (default: current-context)"},
    {NULL, "master", "URL", STRING, AT(master),
     "API server URL; overrides the kubeconfig's server"},
    {NULL, "kube-api-qps", "N", RATE, AT(qps),
     "requests per second to the API server, per controller (default 20)"},
    {NULL, "kube-api-burst", "N", POSITIVE, AT(burst),
     "requests allowed in a burst, per controller (default 30)"},
};

static const struct kcm_options defaults = {
    .qps = 20,
    .burst = 30,
    .controllers = "*",
    .min_resync_ms = 12 * 3600 * 1000ULL,
    .deployment_workers = 5,
    .replicaset_workers = 5,
    .status_interval_ms = 100,
    .failed_pod_backoff_ms = 300000,
    .leader_elect = true,
    .lease_ms = 15000,
    .renew_ms = 10000,
    .retry_ms = 2000,
    .lease_namespace = "kube-system",
    .lease_name = "kcm",
    .grace_ms = 30000,
    .secure_port = 10257,
    .bind_address = "0.0.0.0",
    .cert_dir = "",
    .token_ttl_ms = 10000,
    .allow_ttl_ms = 10000,
    .deny_ttl_ms = 10000,
    .always_allow_paths = "/healthz,/readyz,/livez",
    .health_address = "0",
    .metrics_address = "0",
};

void kcm_options_usage(FILE *out) {
  size_t i;
  fprintf(out, "Usage: kcm [flags]\n\n"
               "kcm runs the Deployment and ReplicaSet controllers against a Kubernetes API "
               "server.\n");
  for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
    const struct flag *f = &flags[i];
    const char *h = f->help;
    int n;
    if (f->section)
      fprintf(out, "\n%s:\n", f->section);
    n = fprintf(out, "  %s%s%s%s", f->name[1] ? "--" : "-", f->name,
                f->kind == BOOLEAN ? "[=BOOL]" : " ", f->value ? f->value : "");
    if (!strcmp(f->name, "v"))
      n += fprintf(out, ", --v N");
    while (*h) {
      size_t len = strcspn(h, "\n");
      if (n > 24) {
        fputc('\n', out);
        n = 0;
      }
      fprintf(out, "%*s%.*s\n", 26 - n, "", (int)len, h);
      n = 0;
      h += len + (h[len] == '\n');
    }
  }
  fprintf(out, "\n  --version             print the version and exit\n"
               "  -h, --help            print this help and exit\n");
}

int kcm_options_duration(const char *s, uint64_t *ms) {
  static const struct {
    const char *unit;
    double ms;
  } units[] = {{"ns", 1e-6}, {"us", 1e-3}, {"\xc2\xb5s", 1e-3}, {"ms", 1}, {"s", 1000},
               {"m", 60000}, {"h", 3600000}};
  double total = 0;
  const char *p = s;
  if (!strcmp(s, "0")) {
    *ms = 0;
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
    if (end == p || errno || !(v >= 0 && v <= 1e15))
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
  if (!(total <= 1e15))
    return -1;
  *ms = (uint64_t)(total + 0.5);
  return 0;
}

static int int_value(const char *s, long min, long max, int *out) {
  char *end;
  long v;
  errno = 0;
  v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < min || v > max)
    return -1;
  *out = (int)v;
  return 0;
}

/* Store value in the flag's field, or say why not. */
static const char *set(const struct flag *f, const char *value, struct kcm_options *o) {
  void *field = (char *)o + f->offset;
  char host[64];
  int port;
  switch (f->kind) {
  case STRING:
    *(const char **)field = value;
    return NULL;
  case POSITIVE:
    return int_value(value, 1, INT_MAX, field) ? "must be a positive integer" : NULL;
  case LEVEL:
    return int_value(value, 0, INT_MAX, field) ? "must be a non-negative integer" : NULL;
  case PORT:
    return int_value(value, 0, 65535, field) ? "must be a port number, 0 to 65535" : NULL;
  case RATE: {
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end || !(v >= 0 && v <= 1e9))
      return "must be a non-negative number";
    *(double *)field = v;
    return NULL;
  }
  case DURATION:
    return kcm_options_duration(value, field) ? "must be a duration such as 15s, 500ms or 1m30s"
                                              : NULL;
  case BOOLEAN:
    if (!strcmp(value, "true") || !strcmp(value, "1"))
      *(bool *)field = true;
    else if (!strcmp(value, "false") || !strcmp(value, "0"))
      *(bool *)field = false;
    else
      return "must be true or false";
    return NULL;
  case ADDRESS:
    if (strcmp(value, "0") && kcm_server_parse_address(value, host, sizeof(host), &port))
      return "must be [host]:port or 0";
    *(const char **)field = value;
    return NULL;
  case IP: {
    char probe[16];
    if (strchr(value, ':') ? inet_pton(AF_INET6, value, probe) != 1
                           : inet_pton(AF_INET, value, probe) != 1)
      return "must be an IP address";
    *(const char **)field = value;
    return NULL;
  }
  case LOG_FORMAT:
    if (strcmp(value, "json") && strcmp(value, "text"))
      return "must be text or json";
    *(bool *)field = !strcmp(value, "json");
    return NULL;
  case TLS_VERSION:
    if (strcmp(value, "VersionTLS12") && strcmp(value, "VersionTLS13"))
      return "must be VersionTLS12 or VersionTLS13 (kcm does not serve TLS 1.0 or 1.1)";
    *(bool *)field = !strcmp(value, "VersionTLS13");
    return NULL;
  }
  return "unknown kind";
}

/* --controllers as kube-controller-manager reads it: a name turns a
 * controller on, "-name" off, and "*" every controller not turned off. */
static int controllers(struct kcm_options *o, char *err, size_t err_len) {
  static const char *const known[] = {"deployment", "replicaset"};
  bool named[2] = {false, false}, off[2] = {false, false}, star = false;
  const char *p = o->controllers;
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
      if (i == 2) {
        snprintf(err, err_len,
                 "invalid value \"%s\" for flag --controllers: \"%.*s\" is not in the list of "
                 "known controllers (deployment, replicaset)",
                 o->controllers, (int)len, name);
        return -1;
      }
      if (minus)
        off[i] = true;
      else
        named[i] = true;
    }
    p += n;
    if (*p == ',')
      p++;
  }
  o->deployment_on = !off[0] && (named[0] || star);
  o->replicaset_on = !off[1] && (named[1] || star);
  return 0;
}

enum kcm_options_result kcm_options_parse(struct kcm_options *o, int argc, char **argv,
                                          char *err, size_t err_len) {
  int i;
  *o = defaults;
  for (i = 1; i < argc; i++) {
    const char *arg = argv[i], *name, *value = NULL, *eq, *why;
    const struct flag *f = NULL;
    size_t klen, k;

    if (arg[0] != '-' || !arg[1]) {
      snprintf(err, err_len, "unexpected argument \"%s\"", arg);
      return KCM_OPTIONS_INVALID;
    }
    name = arg + (arg[1] == '-' ? 2 : 1);
    eq = strchr(name, '=');
    klen = eq ? (size_t)(eq - name) : strlen(name);
    if (eq)
      value = eq + 1;
    if ((klen == 1 && *name == 'h') || (klen == 4 && !strncmp(name, "help", 4)))
      return KCM_OPTIONS_HELP;
    if (klen == 7 && !strncmp(name, "version", 7))
      return KCM_OPTIONS_VERSION;
    for (k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
      if (strlen(flags[k].name) == klen && !strncmp(flags[k].name, name, klen))
        f = &flags[k];
    if (!f) {
      snprintf(err, err_len, "unknown flag: %s", arg);
      return KCM_OPTIONS_INVALID;
    }
    if (!value && f->kind == BOOLEAN) {
      value = "true";
    } else if (!value) {
      if (i + 1 >= argc) {
        snprintf(err, err_len, "flag needs an argument: %s", arg);
        return KCM_OPTIONS_INVALID;
      }
      value = argv[++i];
    }
    if ((why = set(f, value, o))) {
      snprintf(err, err_len, "invalid value \"%s\" for flag %s%s: %s", value,
               f->name[1] ? "--" : "-", f->name, why);
      return KCM_OPTIONS_INVALID;
    }
  }
  if (controllers(o, err, err_len))
    return KCM_OPTIONS_INVALID;
  /* An empty path is no path, as upstream reads these. */
  if (o->tls_cert_file && !*o->tls_cert_file)
    o->tls_cert_file = NULL;
  if (o->tls_key_file && !*o->tls_key_file)
    o->tls_key_file = NULL;
  if (o->client_ca_file && !*o->client_ca_file)
    o->client_ca_file = NULL;
  if (o->authn_kubeconfig && !*o->authn_kubeconfig)
    o->authn_kubeconfig = NULL;
  if (o->authz_kubeconfig && !*o->authz_kubeconfig)
    o->authz_kubeconfig = NULL;
  if (!o->tls_cert_file != !o->tls_key_file) {
    snprintf(err, err_len, "--tls-cert-file and --tls-private-key-file must be given together");
    return KCM_OPTIONS_INVALID;
  }
  return KCM_OPTIONS_RUN;
}

const char *kcm_options_local_address(const char *addr, char *buf, size_t len) {
  if (addr[0] != ':')
    return addr;
  snprintf(buf, len, "127.0.0.1%s", addr);
  return buf;
}
