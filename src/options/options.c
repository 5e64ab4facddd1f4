/* options — kcm's command line; see include/kcm/options.h. */
#include "kcm/options.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/log.h"
#include "kcm/server.h"
#include "kcm/version.h"

#include "internal.h"

#define AT(field) offsetof(struct kcm_options, field)

static const struct kcm_options_flag flags[] = {
    {"Generic flags", "controllers", "LIST", KCM_OPTIONS_STRING, AT(controllers),
     "controllers to run: names, * for all, -name to leave one out\n"
     "(default *); kcm runs those named at the top of this help, and\n"
     "reports kube-controller-manager's other names given as not run here"},
    {NULL, "use-service-account-credentials", NULL, KCM_OPTIONS_BOOLEAN, AT(sa_credentials),
     "each controller makes its requests with a token of its own service\n"
     "account in kube-system (its name and -controller, as\n"
     "replicaset-controller), as upstream's bootstrap roles expect\n"
     "(default false)"},
    {NULL, "stand-aside-on-conflict", NULL, KCM_OPTIONS_BOOLEAN, AT(stand_aside),
     "when another controller (kube-controller-manager turned back on)\n"
     "writes the status of what one of kcm's controllers manages, twice\n"
     "in a namespace, that controller stops writing there until\n"
     "--conflict-quiet-period passes without such a write; false keeps\n"
     "it writing (default true)"},
    {NULL, "conflict-quiet-period", "D", KCM_OPTIONS_DURATION, AT(conflict_quiet_ms),
     "how long without another controller's status writes ends a\n"
     "conflict in a namespace (default 2m)"},
    {NULL, "conflict-system-namespaces", "LIST", KCM_OPTIONS_STRING, AT(conflict_system_namespaces),
     "namespaces only the cluster's administrators write, comma-separated\n"
     "(at most 8): a conflict in one makes a controller stand aside in\n"
     "every namespace while it lasts; empty never does (default\n"
     "kube-system)"},
    {NULL, "conflict-cluster-namespaces", "N", KCM_OPTIONS_LEVEL, AT(conflict_cluster_namespaces),
     "namespaces in conflict at once that also make a controller stand\n"
     "aside in every namespace, while that many are; a tenant with\n"
     "status rights in N namespaces can bring that about, so 0, never,\n"
     "unless no one has (default 0)"},
    {NULL, "shadow", NULL, KCM_OPTIONS_BOOLEAN, AT(shadow),
     "run beside the live controllers and write nothing: every sync is\n"
     "planned, its writes only recorded, and where the live controller\n"
     "leaves an object kcm would change, that is reported (log,\n"
     "kcm_shadow_* metrics, /debug/shadow); no lease, no events\n"
     "(default false)"},
    {NULL, "shadow-window", "D", KCM_OPTIONS_DURATION, AT(shadow_window_ms),
     "how long an object must stay as the live controller left it\n"
     "before --shadow reports what kcm would change (default 1m)"},
    {NULL, "feature-gates", "LIST", KCM_OPTIONS_GATES, AT(feature_gates),
     "Name=true|false,...: WatchListClient=false lists instead of\n"
     "streaming lists as watch events; kcm's controllers have no gates, so\n"
     "each other one given is reported as having no effect"},
    {NULL, "min-resync-period", "D", KCM_OPTIONS_DURATION, AT(min_resync_ms),
     "caches resync at a random period in [D, 2D) (default 12h)"},
    {NULL, "shards", "N", KCM_OPTIONS_LEVEL, AT(shards),
     "share the work among every instance run with it: namespaces are\n"
     "hashed onto N shards (at most 256), each a Lease named after\n"
     "--leader-elect-resource-name, and each instance acts in the\n"
     "namespaces of the shards it holds, about N / instances of them;\n"
     "replaces leader election (default 0: off)"},
    {NULL, "leader-elect", NULL, KCM_OPTIONS_BOOLEAN, AT(leader_elect),
     "run the controllers only while holding the lease (default true)"},
    {NULL, "leader-elect-lease-duration", "D", KCM_OPTIONS_DURATION, AT(lease_ms),
     "how long a lease not renewed stays held (default 15s)"},
    {NULL, "leader-elect-renew-deadline", "D", KCM_OPTIONS_DURATION, AT(renew_ms),
     "how long the leader tries to renew before giving up (default 10s)"},
    {NULL, "leader-elect-retry-period", "D", KCM_OPTIONS_DURATION, AT(retry_ms),
     "time between tries to acquire or renew (default 2s)"},
    {NULL, "leader-elect-resource-lock", "KIND", KCM_OPTIONS_LOCK, 0,
     "leases, the only kind kcm holds (default leases)"},
    {NULL, "leader-elect-resource-namespace", "NS", KCM_OPTIONS_STRING, AT(lease_namespace),
     "namespace of the Lease (default kube-system; with --shards,\n"
     "kcm-shards, a namespace where only kcm may write Leases)"},
    {NULL, "leader-elect-resource-name", "NAME", KCM_OPTIONS_STRING, AT(lease_name),
     "name of the Lease (default kcm)"},
    {NULL, "shutdown-grace-period", "D", KCM_OPTIONS_DURATION, AT(grace_ms),
     "how long syncs in progress may run on after SIGTERM (default 30s)"},

    {"Secure serving flags", "secure-port", "PORT", KCM_OPTIONS_PORT, AT(secure_port),
     "HTTPS port for /healthz, /livez, /readyz and /metrics; 0 turns\n"
     "it off (default 10257)"},
    {NULL, "bind-address", "IP", KCM_OPTIONS_IP, AT(bind_address),
     "address to listen on for --secure-port; 0.0.0.0 or :: for every\n"
     "interface (default 0.0.0.0)"},
    {NULL, "cert-dir", "DIR", KCM_OPTIONS_STRING, AT(cert_dir),
     "where the self-signed certificate made when no --tls-cert-file\n"
     "is given is kept (kcm.crt, kcm.key) and found again; empty keeps\n"
     "it in memory (default \"\")"},
    {NULL, "tls-cert-file", "PATH", KCM_OPTIONS_STRING, AT(tls_cert_file),
     "PEM certificate (chain) to serve; read again when it changes"},
    {NULL, "tls-private-key-file", "PATH", KCM_OPTIONS_STRING, AT(tls_key_file),
     "PEM private key of --tls-cert-file"},
    {NULL, "tls-min-version", "V", KCM_OPTIONS_TLS_VERSION, AT(tls13_only),
     "VersionTLS12 or VersionTLS13 (default VersionTLS12)"},

    {"Authentication flags", "authentication-kubeconfig", "PATH", KCM_OPTIONS_STRING, AT(authn_kubeconfig),
     "kubeconfig for TokenReviews of bearer tokens (default: kcm's own\n"
     "connection)"},
    {NULL, "authentication-token-webhook-cache-ttl", "D", KCM_OPTIONS_DURATION, AT(token_ttl_ms),
     "how long TokenReview answers are cached (default 10s)"},
    {NULL, "client-ca-file", "PATH", KCM_OPTIONS_STRING, AT(client_ca_file),
     "PEM CAs that sign client certificates; a verified one's common\n"
     "name is the user, its organizations the groups"},

    {"Authorization flags", "authorization-kubeconfig", "PATH", KCM_OPTIONS_STRING, AT(authz_kubeconfig),
     "kubeconfig for SubjectAccessReviews (default: kcm's own\n"
     "connection)"},
    {NULL, "authorization-always-allow-paths", "LIST", KCM_OPTIONS_STRING, AT(always_allow_paths),
     "paths anyone may get, even unauthenticated; '*' at the end\n"
     "matches a prefix (default /healthz,/readyz,/livez)"},
    {NULL, "authorization-webhook-cache-authorized-ttl", "D", KCM_OPTIONS_DURATION, AT(allow_ttl_ms),
     "how long allowing answers are cached (default 10s)"},
    {NULL, "authorization-webhook-cache-unauthorized-ttl", "D", KCM_OPTIONS_DURATION, AT(deny_ttl_ms),
     "how long refusing answers are cached (default 10s)"},

    {"Plain HTTP flags (local runs)", "health-probe-bind-address", "ADDR", KCM_OPTIONS_ADDRESS,
     AT(health_address),
     "serve /healthz, /livez and /readyz without TLS or authorization\n"
     "at [host]:port; a port alone (8081 or :8081) is served on\n"
     "loopback, 127.0.0.1; 0 turns it off (default 0)"},
    {NULL, "metrics-bind-address", "ADDR", KCM_OPTIONS_ADDRESS, AT(metrics_address),
     "serve /metrics without TLS or authorization at [host]:port; a\n"
     "port alone (8080 or :8080) is served on loopback, 127.0.0.1; 0\n"
     "turns it off (default 0)"},

    {"Logs flags", "v", "N", KCM_OPTIONS_LEVEL, AT(verbosity), "log verbosity (default 0)"},
    {NULL, "logging-format", "F", KCM_OPTIONS_LOG_FORMAT, AT(json_logs),
     "text (klog lines, the default) or json"},
    {NULL, "vmodule", "LIST", KCM_OPTIONS_VMODULE, AT(vmodule),
     "pattern=N,...: verbosity N for the source files (without .c)\n"
     "whose name matches the glob pattern, as klog reads it"},

    {"Misc flags", "kubeconfig", "PATH", KCM_OPTIONS_STRING, AT(kubeconfig),
     "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, or the\n"
     "in-cluster service account)"},
    {NULL, "context", "NAME", KCM_OPTIONS_STRING, AT(context),
     "kubeconfig context to use (default: current-context)"},
    {NULL, "master", "URL", KCM_OPTIONS_STRING, AT(master),
     "API server URL; overrides the kubeconfig's server"},
    {NULL, "kube-api-qps", "N", KCM_OPTIONS_RATE, AT(qps),
     "requests per second to the API server, per controller (default 20)"},
    {NULL, "kube-api-burst", "N", KCM_OPTIONS_POSITIVE, AT(burst),
     "requests allowed in a burst, per controller (default 30)"},
    {NULL, "kube-api-content-type", "TYPE", KCM_OPTIONS_CONTENT_TYPE, AT(json_api),
     "application/vnd.kubernetes.protobuf (the default: pods are read\n"
     "in protobuf where the server offers it, everything else in JSON)\n"
     "or application/json"},
};

/* kube-controller-manager's flags of controllers and features kcm does
 * not have: accepted, so that its argument lists can be reused, and
 * reported once. `boolean`: the flag may stand alone. */
static const struct {
  const char *name;
  bool boolean;
} foreign[] = {
    {"add-dir-header", true}, {"allocate-node-cidrs", true}, {"allow-metric-labels", false},
    {"allow-metric-labels-manifest", false}, {"alsologtostderr", true},
    {"attach-detach-reconcile-sync-period", false}, {"authentication-skip-lookup", true},
    {"authentication-tolerate-lookup-failure", true}, {"cidr-allocator-type", false},
    {"cloud-config", false}, {"cloud-provider", false}, {"cluster-cidr", false},
    {"cluster-name", false}, {"cluster-signing-cert-file", false},
    {"cluster-signing-duration", false}, {"cluster-signing-key-file", false},
    {"cluster-signing-kube-apiserver-client-cert-file", false},
    {"cluster-signing-kube-apiserver-client-key-file", false},
    {"cluster-signing-kubelet-client-cert-file", false},
    {"cluster-signing-kubelet-client-key-file", false},
    {"cluster-signing-kubelet-serving-cert-file", false},
    {"cluster-signing-kubelet-serving-key-file", false},
    {"cluster-signing-legacy-unknown-cert-file", false},
    {"cluster-signing-legacy-unknown-key-file", false}, {"concurrent-cron-job-syncs", false},
    {"concurrent-daemonset-syncs", false}, {"concurrent-deployment-syncs", false},
    {"concurrent-device-taint-eviction-syncs", false},
    {"concurrent-disruption-syncs", false}, {"concurrent-endpoint-syncs", false},
    {"concurrent-ephemeralvolume-syncs", false}, {"concurrent-gc-syncs", false},
    {"concurrent-horizontal-pod-autoscaler-syncs", false}, {"concurrent-job-syncs", false},
    {"concurrent-namespace-syncs", false}, {"concurrent-rc-syncs", false},
    {"concurrent-replicaset-syncs", false},
    {"concurrent-resource-quota-syncs", false}, {"concurrent-resourceclaim-syncs", false},
    {"concurrent-service-endpoint-syncs", false},
    {"concurrent-service-syncs", false}, {"concurrent-serviceaccount-token-syncs", false},
    {"concurrent-statefulset-syncs", false}, {"concurrent-ttl-after-finished-syncs", false},
    {"concurrent-validating-admission-policy-status-syncs", false},
    {"configure-cloud-routes", true}, {"contention-profiling", true},
    {"controller-shutdown-timeout", false},
    {"controller-start-interval", false}, {"deployment-controller-sync-period", false},
    {"disable-attach-detach-reconcile-sync", true}, {"disable-force-detach-on-timeout", true},
    {"disable-http2-serving", true}, {"disabled-metrics", false},
    {"enable-dynamic-provisioning", true}, {"enable-garbage-collector", true},
    {"enable-hostpath-provisioner", true}, {"enable-leader-migration", true},
    {"emulated-version", false}, {"enable-taint-manager", true}, {"endpoint-updates-batch-period", false},
    {"endpointslice-updates-batch-period", false},
    {"experimental-cluster-signing-duration", false}, {"external-cloud-volume-plugin", false},
    {"flex-volume-plugin-dir", false},
    {"horizontal-pod-autoscaler-cpu-initialization-period", false},
    {"horizontal-pod-autoscaler-downscale-stabilization", false},
    {"horizontal-pod-autoscaler-initial-readiness-delay", false},
    {"horizontal-pod-autoscaler-sync-period", false},
    {"horizontal-pod-autoscaler-tolerance", false}, {"http2-max-streams-per-connection", false},
    {"large-cluster-size-threshold", false},
    {"leader-migration-config", false}, {"legacy-service-account-token-clean-up-period", false},
    {"log-backtrace-at", false}, {"log-dir", false}, {"log-file", false},
    {"log-file-max-size", false}, {"log-flush-frequency", false},
    {"log-json-info-buffer-size", false}, {"log-json-split-stream", true},
    {"log-text-info-buffer-size", false}, {"log-text-split-stream", true}, {"logtostderr", true},
    {"max-endpoints-per-slice", false}, {"min-compatibility-version", false},
    {"mirroring-concurrent-service-endpoint-syncs", false},
    {"mirroring-endpointslice-updates-batch-period", false},
    {"mirroring-max-endpoints-per-subset", false}, {"namespace-sync-period", false},
    {"node-cidr-mask-size", false}, {"node-cidr-mask-size-ipv4", false},
    {"node-cidr-mask-size-ipv6", false}, {"node-eviction-rate", false},
    {"node-monitor-grace-period", false}, {"node-monitor-period", false},
    {"node-startup-grace-period", false}, {"one-output", true}, {"permit-address-sharing", true},
    {"permit-port-sharing", true}, {"pod-eviction-timeout", false}, {"profiling", true},
    {"pv-recycler-increment-timeout-nfs", false}, {"pv-recycler-minimum-timeout-hostpath", false},
    {"pv-recycler-minimum-timeout-nfs", false},
    {"pv-recycler-pod-template-filepath-hostpath", false},
    {"pv-recycler-pod-template-filepath-nfs", false},
    {"pv-recycler-timeout-increment-hostpath", false}, {"pvclaimbinder-sync-period", false},
    {"requestheader-allowed-names", false}, {"requestheader-client-ca-file", false},
    {"requestheader-extra-headers-prefix", false}, {"requestheader-group-headers", false},
    {"requestheader-uid-headers", false}, {"requestheader-username-headers", false},
    {"resource-quota-sync-period", false}, {"root-ca-file", false},
    {"route-reconciliation-period", false}, {"secondary-node-eviction-rate", false},
    {"service-account-private-key-file", false}, {"service-cluster-ip-range", false},
    {"show-hidden-metrics-for-version", false}, {"skip-headers", true},
    {"skip-log-headers", true}, {"stderrthreshold", false},
    {"terminated-pod-gc-threshold", false}, {"tls-cipher-suites", false},
    {"tls-curve-preferences", false}, {"tls-sni-cert-key", false}, {"unhealthy-zone-threshold", false},
    {"volume-host-allow-local-loopback", true},
    {"volume-host-cidr-denylist", false},
};

static const struct kcm_options defaults = {
    .qps = 20,
    .burst = 30,
    .controllers = "*",
    .min_resync_ms = 12 * 3600 * 1000ULL,
    .stand_aside = true,
    .conflict_quiet_ms = 120000,
    .conflict_system_namespaces = "kube-system",
    .shadow_window_ms = 60000,
    .leader_elect = true,
    .lease_ms = 15000,
    .renew_ms = 10000,
    .retry_ms = 2000,
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

/* One flag in --help: its section when it starts one, its name and
 * value, its help. */
static void usage_flag(FILE *out, const struct kcm_options_flag *f) {
  const char *h = f->help;
  int n;
  if (f->section)
    fprintf(out, "\n%s:\n", f->section);
  n = fprintf(out, "  %s%s%s%s", f->name[1] ? "--" : "-", f->name,
              f->type == KCM_OPTIONS_BOOLEAN ? "[=BOOL]" : " ", f->value ? f->value : "");
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

/* Whether a flag's name and the n bytes given match, '_' reading as '-'. */
static bool same_name(const char *name, const char *given, size_t n) {
  size_t i;
  for (i = 0; i < n; i++)
    if (name[i] != (given[i] == '_' ? '-' : given[i]))
      return false;
  return name[n] == '\0';
}

/* The flag of groups (NULL-ended; may be NULL) named name[0..n), and the
 * index of its group in *g; NULL for none. */
static const struct kcm_options_flag *group_flag(const struct kcm_options_group *const *groups,
                                                 const char *name, size_t n, size_t *g) {
  size_t k;
  for (*g = 0; groups && groups[*g]; ++*g)
    for (k = 0; k < groups[*g]->nflags; k++)
      if (same_name(groups[*g]->flags[k].name, name, n))
        return &groups[*g]->flags[k];
  return NULL;
}

/* The groups' flags come before this section of kcm's own. */
#define GROUPS_BEFORE "Plain HTTP flags (local runs)"

void kcm_options_usage(FILE *out, const struct kcm_options_group *const *groups) {
  const struct kcm_options_group *const *g;
  size_t i;
  int n;
  fprintf(out, "Usage: kcm [flags]\n"
               "       kcm why KIND/NAME [flags]   what a rollout waits for (see kcm why --help)\n"
               "\nkcm runs Kubernetes controllers against an API server:");
  for (g = groups, n = 0; g && *g; g++, n++)
    fprintf(out, "%s %s", n ? "," : "", (*g)->name);
  fprintf(out, "%s.\n", n ? "" : " none in this build");
  for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
    if (flags[i].section && !strcmp(flags[i].section, GROUPS_BEFORE))
      for (g = groups; g && *g; g++)
        for (size_t k = 0; k < (*g)->nflags; k++)
          usage_flag(out, &(*g)->flags[k]);
    usage_flag(out, &flags[i]);
  }
  fprintf(out, "\nFlags of kube-controller-manager's other controllers and features, accepted\n"
               "so that its argument lists can be reused, and reported once as ignored:\n");
  for (i = 0, n = 0; i < sizeof(foreign) / sizeof(foreign[0]); i++) {
    int len = (int)strlen(foreign[i].name) + 3;
    size_t k;
    if (group_flag(groups, foreign[i].name, strlen(foreign[i].name), &k))
      continue; /* a controller of this build has it */
    if (n + len > 78) {
      fputc('\n', out);
      n = 0;
    }
    n += fprintf(out, "%s--%s", n ? " " : "  ", foreign[i].name);
  }
  fprintf(out, "\n\n  --version[=raw]       print the version (raw: every build detail) and exit\n"
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
/* strconv.ParseBool's spellings. */
static const char *bool_value(const char *s, size_t n) {
  static const char *const ok[] = {"1", "t", "T", "TRUE", "true", "True",
                                   "0", "f", "F", "FALSE", "false", "False"};
  size_t i;
  for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
    if (strlen(ok[i]) == n && !strncmp(ok[i], s, n))
      return NULL;
  return "each value must be true or false";
}

static const char *level_value(const char *s, size_t n) {
  size_t i;
  if (!n || n > 9)
    return "each level must be a non-negative integer";
  for (i = 0; i < n; i++)
    if (s[i] < '0' || s[i] > '9')
      return "each level must be a non-negative integer";
  return NULL;
}

/* A list "key=value,..." whose keys are not empty and whose values check
 * says are good; NULL or why not. */
static const char *each_pair(const char *list, const char *(*check)(const char *s, size_t n)) {
  const char *p = list;
  while (*p) {
    size_t n = strcspn(p, ","), k = strcspn(p, "=");
    const char *why;
    if (k >= n || k == 0)
      return "each item must be key=value";
    if ((why = check(p + k + 1, n - k - 1)))
      return why;
    p += n + (p[n] == ',');
  }
  return NULL;
}

/* client-go's gate of streamed lists, on by default as from 1.35. */
#define WATCH_LIST_GATE "WatchListClient"

/* Gate `name` in a checked list: its last value given, else dflt. */
static bool gate_on(const char *list, const char *name, bool dflt) {
  const char *p = list;
  size_t len = strlen(name);
  while (*p) {
    size_t n = strcspn(p, ","), k = strcspn(p, "=");
    if (k == len && !strncmp(p, name, len))
      dflt = strchr("1tT", p[k + 1]) != NULL;
    p += n + (p[n] == ',');
  }
  return dflt;
}

/* Whether s is a port alone, 1 to 65535, in decimal without a leading
 * zero ("0" alone turns a listener off). */
static bool port_alone(const char *s) {
  size_t n = strspn(s, "0123456789");
  return n && n <= 5 && !s[n] && s[0] != '0' && atol(s) <= 65535;
}

/* Read value into the field of f at base (o, or a group's settings). */
static const char *set(const struct kcm_options_flag *f, const char *value, struct kcm_options *o,
                       void *base) {
  void *field = (char *)base + f->offset;
  const char *why;
  char host[64];
  int port;
  switch (f->type) {
  case KCM_OPTIONS_STRING:
    *(const char **)field = value;
    return NULL;
  case KCM_OPTIONS_POSITIVE:
    return int_value(value, 1, INT_MAX, field) ? "must be a positive integer" : NULL;
  case KCM_OPTIONS_LEVEL:
    return int_value(value, 0, INT_MAX, field) ? "must be a non-negative integer" : NULL;
  case KCM_OPTIONS_PORT:
    return int_value(value, 0, 65535, field) ? "must be a port number, 0 to 65535" : NULL;
  case KCM_OPTIONS_RATE: {
    char *end;
    double v = strtod(value, &end);
    if (end == value || *end || !(v >= 0 && v <= 1e9))
      return "must be a non-negative number";
    *(double *)field = v;
    return NULL;
  }
  case KCM_OPTIONS_DURATION:
    return kcm_options_duration(value, field) ? "must be a duration such as 15s, 500ms or 1m30s"
                                              : NULL;
  case KCM_OPTIONS_BOOLEAN:
    if (!strcmp(value, "true") || !strcmp(value, "1"))
      *(bool *)field = true;
    else if (!strcmp(value, "false") || !strcmp(value, "0"))
      *(bool *)field = false;
    else
      return "must be true or false";
    return NULL;
  case KCM_OPTIONS_ADDRESS:
    if (strcmp(value, "0") && !port_alone(value) &&
        kcm_server_parse_address(value, host, sizeof(host), &port))
      return "must be [host]:port, a port alone or 0";
    *(const char **)field = value;
    return NULL;
  case KCM_OPTIONS_IP: {
    char probe[16];
    if (strchr(value, ':') ? inet_pton(AF_INET6, value, probe) != 1
                           : inet_pton(AF_INET, value, probe) != 1)
      return "must be an IP address";
    *(const char **)field = value;
    return NULL;
  }
  case KCM_OPTIONS_LOG_FORMAT:
    if (strcmp(value, "json") && strcmp(value, "text"))
      return "must be text or json";
    *(bool *)field = !strcmp(value, "json");
    return NULL;
  case KCM_OPTIONS_CONTENT_TYPE:
    if (strcmp(value, "application/vnd.kubernetes.protobuf") && strcmp(value, "application/json"))
      return "must be application/vnd.kubernetes.protobuf or application/json";
    *(bool *)field = !strcmp(value, "application/json");
    return NULL;
  case KCM_OPTIONS_TLS_VERSION:
    if (strcmp(value, "VersionTLS12") && strcmp(value, "VersionTLS13"))
      return "must be VersionTLS12 or VersionTLS13 (kcm does not serve TLS 1.0 or 1.1)";
    *(bool *)field = !strcmp(value, "VersionTLS13");
    return NULL;
  case KCM_OPTIONS_VMODULE:
    if ((why = each_pair(value, level_value)))
      return why;
    *(const char **)field = value;
    return NULL;
  case KCM_OPTIONS_GATES:
    if ((why = each_pair(value, bool_value)))
      return why;
    *(const char **)field = value;
    o->no_watch_list = !gate_on(value, WATCH_LIST_GATE, true);
    return NULL;
  case KCM_OPTIONS_LOCK:
    return strcmp(value, "leases") ? "kcm holds its lock in a Lease: must be leases" : NULL;
  }
  return "unknown kind";
}

/* kube-controller-manager's controllers, by the names --controllers takes
 * (the older names, then the canonical ones of v1.29 on). */
static const char *const upstream_controllers[] = {
    "deployment", "replicaset", "deployment-controller", "replicaset-controller",
    "attachdetach", "bootstrapsigner", "cloud-node-lifecycle", "clusterrole-aggregation",
    "cronjob", "csrapproving", "csrcleaner", "csrsigning", "daemonset", "disruption", "endpoint",
    "endpointslice", "endpointslicemirroring", "ephemeral-volume", "garbagecollector",
    "horizontalpodautoscaling", "job", "legacy-service-account-token-cleaner", "namespace",
    "nodeipam", "nodelifecycle", "persistentvolume-binder", "persistentvolume-expander", "podgc",
    "pv-protection", "pvc-protection", "replicationcontroller", "resourceclaim", "resourcequota",
    "root-ca-cert-publisher", "route", "service", "service-cidr", "serviceaccount",
    "serviceaccount-token", "statefulset", "storage-version-gc", "storage-version-migrator",
    "taint-eviction-controller", "tokencleaner", "ttl", "ttl-after-finished",
    "validatingadmissionpolicy-status", "serviceaccount-token-controller", "endpoints-controller",
    "endpointslice-controller", "endpointslice-mirroring-controller",
    "replicationcontroller-controller", "pod-garbage-collector-controller",
    "resourcequota-controller", "namespace-controller", "serviceaccount-controller",
    "garbage-collector-controller", "daemonset-controller", "job-controller",
    "horizontal-pod-autoscaler-controller", "disruption-controller", "statefulset-controller",
    "cronjob-controller", "certificatesigningrequest-signing-controller",
    "certificatesigningrequest-approving-controller",
    "certificatesigningrequest-cleaner-controller", "ttl-controller",
    "bootstrap-signer-controller", "token-cleaner-controller", "node-ipam-controller",
    "node-lifecycle-controller", "persistentvolume-binder-controller",
    "persistentvolume-attach-detach-controller", "persistentvolume-expander-controller",
    "clusterrole-aggregation-controller", "persistentvolumeclaim-protection-controller",
    "persistentvolume-protection-controller", "ttl-after-finished-controller",
    "root-ca-certificate-publisher-controller", "ephemeral-volume-controller",
    "storageversion-garbage-collector-controller", "resourceclaim-controller",
    "legacy-serviceaccount-token-cleaner-controller",
    "validatingadmissionpolicy-status-controller", "service-cidr-controller",
    "storage-version-migrator-controller", "cloud-node-lifecycle-controller",
    "service-lb-controller", "node-route-controller", "selinux-warning-controller",
    "device-taint-eviction-controller", "kube-apiserver-serving-clustertrustbundle-publisher-controller",
    "podcertificaterequest-cleaner-controller", "podgroup-protection-controller",
    "resourcepoolstatusrequest-controller", "volumeattributesclass-protection-controller",
};

/* The index in upstream_controllers of the name s[0..n), or -1. */
static int controller_index(const char *s, size_t n) {
  size_t i;
  for (i = 0; i < sizeof(upstream_controllers) / sizeof(upstream_controllers[0]); i++)
    if (strlen(upstream_controllers[i]) == n && !strncmp(upstream_controllers[i], s, n))
      return (int)i;
  return -1;
}

/* Whether name[0..n) is one of names (NULL-ended). */
static bool listed(const char *const *names, const char *name, size_t n) {
  for (; *names; names++)
    if (strlen(*names) == n && !strncmp(*names, name, n))
      return true;
  return false;
}

/* Whether a group of o takes name[0..n) in --controllers. */
static bool grouped(const struct kcm_options *o, const char *name, size_t n) {
  size_t g;
  for (g = 0; g < o->ngroups; g++)
    if (o->groups[g]->controllers && listed(o->groups[g]->controllers, name, n))
      return true;
  return false;
}

/* --controllers as kube-controller-manager reads it: every name must be
 * one of upstream's or a group's (kcm_options_enables() says what it
 * turns on). */
static int controllers(struct kcm_options *o, char *err, size_t err_len) {
  const char *p = o->controllers;
  while (*p) {
    size_t n = strcspn(p, ",");
    bool minus = *p == '-';
    const char *name = p + minus;
    size_t len = n - minus;
    if (!(len == 1 && *name == '*' && !minus) && controller_index(name, len) < 0 &&
        !grouped(o, name, len)) {
      snprintf(err, err_len,
               "invalid value \"%s\" for flag --controllers: \"%.*s\" is not in the list of "
               "known controllers",
               o->controllers, (int)len, name);
      return -1;
    }
    p += n + (p[n] == ',');
  }
  return 0;
}

bool kcm_options_enables(const struct kcm_options *o, const char *const *names) {
  const char *p = o->controllers;
  bool named = false, star = false;
  while (*p) {
    size_t n = strcspn(p, ",");
    if (*p == '-' && listed(names, p + 1, n - 1))
      return false;
    if (n == 1 && *p == '*')
      star = true;
    else if (listed(names, p, n))
      named = true;
    p += n + (p[n] == ',');
  }
  return named || star;
}

const char *kcm_options_foreign(const struct kcm_options *o, char *buf, size_t len) {
  const char *p = o->controllers;
  size_t at = 0;
  buf[0] = '\0';
  while (*p) {
    size_t n = strcspn(p, ",");
    if (*p != '-' && !(n == 1 && *p == '*') && !grouped(o, p, n) && at + n + 2 < len)
      at += (size_t)snprintf(buf + at, len - at, "%s%.*s", at ? "," : "", (int)n, p);
    p += n + (p[n] == ',');
  }
  return buf;
}

const char *kcm_options_inert_gates(const struct kcm_options *o, char *buf, size_t len) {
  const char *p = o->feature_gates ? o->feature_gates : "";
  size_t at = 0, gate = strlen(WATCH_LIST_GATE);
  buf[0] = '\0';
  while (*p) {
    size_t n = strcspn(p, ","), k = strcspn(p, "=");
    if (!(k == gate && !strncmp(p, WATCH_LIST_GATE, gate)) && at + n + 2 < len)
      at += (size_t)snprintf(buf + at, len - at, "%s%.*s", at ? "," : "", (int)n, p);
    p += n + (p[n] == ',');
  }
  return buf;
}

/* A foreign flag given: taken once into o->ignored; its index or -1. */
static int foreign_flag(struct kcm_options *o, const char *name, size_t n) {
  size_t k, j;
  for (k = 0; k < sizeof(foreign) / sizeof(foreign[0]); k++) {
    if (!same_name(foreign[k].name, name, n))
      continue;
    for (j = 0; j < o->nignored && o->ignored[j] != foreign[k].name; j++)
      ;
    if (j == o->nignored && o->nignored < KCM_OPTIONS_MAX_IGNORED)
      o->ignored[o->nignored++] = foreign[k].name;
    return (int)k;
  }
  return -1;
}

/* --version's value: KCM_OPTIONS_VERSION, KCM_OPTIONS_RUN for false, or
 * KCM_OPTIONS_INVALID. */
static enum kcm_options_result version(struct kcm_options *o, const char *value, char *err,
                                       size_t err_len) {
  if (!value || !strcmp(value, "true") || !strcmp(value, "raw")) {
    o->version_raw = value && !strcmp(value, "raw");
    return KCM_OPTIONS_VERSION;
  }
  if (strcmp(value, "false")) {
    snprintf(err, err_len, "invalid value \"%s\" for flag --version: must be true, false or raw",
             value);
    return KCM_OPTIONS_INVALID;
  }
  return KCM_OPTIONS_RUN;
}

/* argv[*i], and its value when it takes the next argument (*i moved on). */
static enum kcm_options_result argument(struct kcm_options *o, int argc, char **argv, int *i,
                                        char *err, size_t err_len) {
  const char *arg = argv[*i], *name, *value = NULL, *eq, *why;
  const struct kcm_options_flag *f = NULL;
  void *base = o;
  size_t klen, k;
  int g;
  if (arg[0] != '-' || !arg[1]) {
    snprintf(err, err_len, "unexpected argument \"%s\"", arg);
    return KCM_OPTIONS_INVALID;
  }
  name = arg + (arg[1] == '-' ? 2 : 1);
  eq = strchr(name, '=');
  klen = eq ? (size_t)(eq - name) : strlen(name);
  if (eq)
    value = eq + 1;
  if ((klen == 1 && *name == 'h') || same_name("help", name, klen))
    return KCM_OPTIONS_HELP;
  if (same_name("version", name, klen))
    return version(o, value, err, err_len);
  for (k = 0; k < sizeof(flags) / sizeof(flags[0]); k++)
    if (same_name(flags[k].name, name, klen))
      f = &flags[k];
  if (!f && (f = group_flag(o->groups, name, klen, &k)))
    base = o->settings[k];
  if (!f && (g = foreign_flag(o, name, klen)) >= 0) {
    if (!value && !foreign[g].boolean && ++*i >= argc) {
      snprintf(err, err_len, "flag needs an argument: %s", arg);
      return KCM_OPTIONS_INVALID;
    }
    return KCM_OPTIONS_RUN;
  }
  if (!f) {
    snprintf(err, err_len, "unknown flag: %s", arg);
    return KCM_OPTIONS_INVALID;
  }
  if (!value && f->type == KCM_OPTIONS_BOOLEAN) {
    value = "true";
  } else if (!value) {
    if (*i + 1 >= argc) {
      snprintf(err, err_len, "flag needs an argument: %s", arg);
      return KCM_OPTIONS_INVALID;
    }
    value = argv[++*i];
  }
  if ((why = set(f, value, o, base))) {
    snprintf(err, err_len, "invalid value \"%s\" for flag %s%s: %s", value,
             f->name[1] ? "--" : "-", f->name, why);
    return KCM_OPTIONS_INVALID;
  }
  return KCM_OPTIONS_RUN;
}

/* An empty path is no path, as upstream reads these. */
static void no_empty_paths(struct kcm_options *o) {
  const char **paths[] = {&o->tls_cert_file, &o->tls_key_file, &o->client_ca_file,
                          &o->authn_kubeconfig, &o->authz_kubeconfig};
  size_t i;
  for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
    if (*paths[i] && !**paths[i])
      *paths[i] = NULL;
}

/* What no single flag decides. */
static enum kcm_options_result together(struct kcm_options *o, char *err, size_t err_len) {
  const char *why = NULL;
  if (controllers(o, err, err_len))
    return KCM_OPTIONS_INVALID;
  no_empty_paths(o);
  if (o->shadow && o->sa_credentials)
    why = "--shadow sends no write, so it needs no controller credentials: drop "
          "--use-service-account-credentials";
  else if (o->shadow && !o->shadow_window_ms)
    why = "--shadow-window must be longer than 0";
  else if (!o->tls_cert_file != !o->tls_key_file)
    why = "--tls-cert-file and --tls-private-key-file must be given together";
  if (!why)
    return KCM_OPTIONS_RUN;
  snprintf(err, err_len, "%s", why);
  return KCM_OPTIONS_INVALID;
}

/* Whether a flag of group g (of groups) has a name kcm or an earlier
 * group has taken; its name in *name. */
static bool taken(const struct kcm_options_group *const *groups, size_t g, const char **name) {
  size_t k, i, j;
  for (k = 0; k < groups[g]->nflags; k++) {
    *name = groups[g]->flags[k].name;
    for (i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
      if (!strcmp(flags[i].name, *name))
        return true;
    if (group_flag(groups, *name, strlen(*name), &j) && j < g)
      return true;
  }
  return false;
}

/* o's defaults: kcm's own, and a copy of each group's. */
static enum kcm_options_result start(struct kcm_options *o,
                                     const struct kcm_options_group *const *groups, char *err,
                                     size_t err_len) {
  const char *name;
  *o = defaults;
  o->groups = groups;
  for (; groups && groups[o->ngroups]; o->ngroups++) {
    const struct kcm_options_group *g = groups[o->ngroups];
    if (o->ngroups == KCM_OPTIONS_GROUPS || g->size > KCM_OPTIONS_SETTINGS) {
      snprintf(err, err_len, "the flags of %s do not fit: at most %d groups of %d bytes",
               g->name, KCM_OPTIONS_GROUPS, KCM_OPTIONS_SETTINGS);
      return KCM_OPTIONS_INVALID;
    }
    if (taken(groups, o->ngroups, &name)) {
      snprintf(err, err_len, "the flags of %s: --%s is another's", g->name, name);
      return KCM_OPTIONS_INVALID;
    }
    memcpy(o->settings[o->ngroups], g->defaults, g->size);
  }
  return KCM_OPTIONS_RUN;
}

const void *kcm_options_settings(const struct kcm_options *o, const struct kcm_options_group *g) {
  size_t i;
  for (i = 0; i < o->ngroups; i++)
    if (o->groups[i] == g)
      return o->settings[i];
  return NULL;
}

enum kcm_options_result kcm_options_parse(struct kcm_options *o,
                                          const struct kcm_options_group *const *groups,
                                          int argc, char **argv, char *err, size_t err_len) {
  int i;
  if (start(o, groups, err, err_len) != KCM_OPTIONS_RUN)
    return KCM_OPTIONS_INVALID;
  for (i = 1; i < argc; i++) {
    enum kcm_options_result r = argument(o, argc, argv, &i, err, err_len);
    if (r != KCM_OPTIONS_RUN)
      return r;
  }
  return together(o, err, err_len);
}

/* Whether argv asks for JSON logs: its last valid --logging-format is
 * json, read past any bad flag (a flag's value is not taken for one). */
static bool json_logs(const struct kcm_options_group *const *groups, int argc, char **argv) {
  struct kcm_options o;
  char err[128];
  int i;
  if (start(&o, groups, err, sizeof(err)) != KCM_OPTIONS_RUN)
    return false;
  for (i = 1; i < argc; i++)
    argument(&o, argc, argv, &i, err, sizeof(err));
  return o.json_logs;
}

int kcm_options_fail(const struct kcm_options *o, const char *fmt, ...) {
  char why[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  if (kcm_log_get_format() == KCM_LOG_JSON) {
    kcm_error("command failed err=\"%s\"", why);
  } else {
    kcm_options_usage(stderr, o->groups);
    fprintf(stderr, "\nError: %s\n", why);
  }
  return KCM_OPTIONS_EXIT_FAILURE;
}

int kcm_options_main(struct kcm_options *o, const struct kcm_options_group *const *groups,
                     int argc, char **argv) {
  char err[512];
  if (json_logs(groups, argc, argv))
    kcm_log_set_format(KCM_LOG_JSON);
  switch (kcm_options_parse(o, groups, argc, argv, err, sizeof(err))) {
  case KCM_OPTIONS_HELP:
    kcm_options_usage(stdout, groups);
    return 0;
  case KCM_OPTIONS_VERSION:
    kcm_version_print(stdout, o->version_raw);
    return 0;
  case KCM_OPTIONS_INVALID:
    return kcm_options_fail(o, "%s", err);
  case KCM_OPTIONS_RUN:
    break;
  }
  return -1;
}

void kcm_options_warn(const struct kcm_options *o) {
  char list[4096], gates[1024], foreign_controllers[1024], ours[256] = "";
  size_t i, at = 0;
  for (i = 0; i < o->nignored && at < sizeof(list); i++)
    at += (size_t)snprintf(list + at, sizeof(list) - at, "%s--%s", i ? "," : "", o->ignored[i]);
  if (o->nignored)
    kcm_warn("ignoring kube-controller-manager flags of controllers and features kcm does not "
             "have flags=\"%s\"",
             list);
  for (i = 0, at = 0; i < o->ngroups && at < sizeof(ours); i++)
    at += (size_t)snprintf(ours + at, sizeof(ours) - at, "%s%s", i ? "," : "", o->groups[i]->name);
  if (*kcm_options_foreign(o, foreign_controllers, sizeof(foreign_controllers)))
    kcm_warn("kcm runs only its own controllers; the others named in --controllers are "
             "kube-controller-manager's controllers=\"%s\" own=\"%s\"",
             foreign_controllers, ours);
  if (*kcm_options_inert_gates(o, gates, sizeof(gates)))
    kcm_warn("feature gates have no effect on kcm's controllers featureGates=\"%s\"", gates);
}

const char *kcm_options_local_address(const char *addr, char *buf, size_t len) {
  if (port_alone(addr))
    snprintf(buf, len, "127.0.0.1:%s", addr);
  else if (addr[0] == ':')
    snprintf(buf, len, "127.0.0.1%s", addr);
  else
    return addr;
  return buf;
}
