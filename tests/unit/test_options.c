/*
 * Tests for kcm's command line: defaults, every kind of value, refusals
 * with the flag named, and the usage text drawn from the same table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcm/controllers.h"
#include "kcm/log.h"
#include "kcm/options.h"
#include "../../src/options/internal.h"

/* The names of kcm's two controllers, as their table rows give them. */
static const char *const DC[] = {"deployment", "deployment-controller", NULL};
static const char *const RS[] = {"replicaset", "replicaset-controller", NULL};

/* The program's flag groups: its controllers' (this test links its table). */
static const struct kcm_options_group *const *groups(void) {
  static const struct kcm_options_group *g[KCM_CONTROLLERS_MAX + 1];
  kcm_controllers_options(g);
  return g;
}

/* The value of a group's flag as o holds it, found by the flag's name. */
static const void *group_value(const struct kcm_options *o, const char *flag) {
  size_t i, k;
  for (i = 0; i < o->ngroups; i++)
    for (k = 0; k < o->groups[i]->nflags; k++)
      if (!strcmp(o->groups[i]->flags[k].name, flag))
        return (const char *)kcm_options_settings(o, o->groups[i]) + o->groups[i]->flags[k].offset;
  fail_msg("no group has --%s", flag);
  return NULL;
}
#define INT_FLAG(o, flag) (*(const int *)group_value(o, flag))
#define MS_FLAG(o, flag) (*(const uint64_t *)group_value(o, flag))

static enum kcm_options_result parse(struct kcm_options *o, char *err, size_t len, ...) {
  static char name[] = "kcm";
  char *argv[32] = {name};
  int argc = 1;
  va_list ap;
  va_start(ap, len);
  while (argc < 31 && (argv[argc] = va_arg(ap, char *)))
    argc++;
  va_end(ap);
  err[0] = '\0';
  return kcm_options_parse(o, groups(), argc, argv, err, len);
}

static void defaults_are_kube_controller_managers(void **state) {
  struct kcm_options o;
  char err[256];
  assert_int_equal(parse(&o, err, sizeof(err), NULL), KCM_OPTIONS_RUN);
  assert_int_equal(o.secure_port, 10257);
  assert_string_equal(o.bind_address, "0.0.0.0");
  assert_string_equal(o.cert_dir, "");
  assert_null(o.tls_cert_file);
  assert_false(o.tls13_only);
  assert_string_equal(o.always_allow_paths, "/healthz,/readyz,/livez");
  assert_int_equal(o.token_ttl_ms, 10000);
  assert_int_equal(o.allow_ttl_ms, 10000);
  assert_int_equal(o.deny_ttl_ms, 10000);
  assert_string_equal(o.health_address, "0"); /* plain listeners off */
  assert_string_equal(o.metrics_address, "0");
  assert_true(o.leader_elect);
  assert_int_equal(o.lease_ms, 15000);
  assert_int_equal(o.renew_ms, 10000);
  assert_int_equal(o.retry_ms, 2000);
  assert_null(o.lease_namespace); /* kube-system, or kcm-shards with --shards */
  assert_true(o.qps == 20);
  assert_int_equal(o.burst, 30);
  assert_int_equal(INT_FLAG(&o, "concurrent-deployment-syncs"), 5);
  assert_int_equal(INT_FLAG(&o, "concurrent-replicaset-syncs"), 5);
  assert_int_equal(MS_FLAG(&o, "status-write-interval"), 1000);
  assert_int_equal(MS_FLAG(&o, "deployment-sync-interval"), 1000);
  assert_int_equal(MS_FLAG(&o, "deployment-status-interval"), 1000);
  assert_int_equal(MS_FLAG(&o, "failed-pod-backoff"), 300000);
  assert_true(kcm_options_enables(&o, DC) && kcm_options_enables(&o, RS));
  assert_int_equal(o.verbosity, 0);
  assert_false(o.json_logs);
  assert_false(o.json_api); /* protobuf, as kube-controller-manager */
  assert_false(o.shadow);
  assert_int_equal(o.shadow_window_ms, 60000);
}

static void values_of_every_kind(void **state) {
  struct kcm_options o;
  char err[256];
  assert_int_equal(parse(&o, err, sizeof(err), "--secure-port=0", "--bind-address", "::1",
                         "--tls-cert-file=/c", "--tls-private-key-file", "/k",
                         "--tls-min-version=VersionTLS13", "--client-ca-file=",
                         "--authentication-token-webhook-cache-ttl=1m30s",
                         "--authorization-always-allow-paths=/healthz,/debug/*",
                         "--leader-elect=false", "--kube-api-qps=0.5", "-v", "4",
                         "--logging-format=json", "--controllers=*,-deployment",
                         "--health-probe-bind-address=:8081",
                         "--kube-api-content-type=application/json",
                         "--deployment-sync-interval=0", "--deployment-status-interval=250ms",
                         NULL),
                   KCM_OPTIONS_RUN);
  assert_int_equal(o.secure_port, 0);
  assert_string_equal(o.bind_address, "::1");
  assert_string_equal(o.tls_cert_file, "/c");
  assert_string_equal(o.tls_key_file, "/k");
  assert_true(o.tls13_only);
  assert_null(o.client_ca_file); /* empty is unset */
  assert_int_equal(o.token_ttl_ms, 90000);
  assert_string_equal(o.always_allow_paths, "/healthz,/debug/*");
  assert_false(o.leader_elect);
  assert_true(o.qps == 0.5);
  assert_int_equal(o.verbosity, 4);
  assert_true(o.json_logs);
  assert_false(kcm_options_enables(&o, DC));
  assert_true(kcm_options_enables(&o, RS));
  assert_string_equal(o.health_address, ":8081");
  assert_true(o.json_api);
  assert_int_equal(MS_FLAG(&o, "deployment-sync-interval"), 0);
  assert_int_equal(MS_FLAG(&o, "deployment-status-interval"), 250);
  assert_int_equal(MS_FLAG(&o, "status-write-interval"), 1000); /* another group's default */
  assert_int_equal(parse(&o, err, sizeof(err), "--leader-elect", "--v=2", NULL),
                   KCM_OPTIONS_RUN);
  assert_true(o.leader_elect);
  assert_int_equal(o.verbosity, 2);
  assert_int_equal(parse(&o, err, sizeof(err), "--help", NULL), KCM_OPTIONS_HELP);
  assert_int_equal(parse(&o, err, sizeof(err), "-h", NULL), KCM_OPTIONS_HELP);
  assert_int_equal(parse(&o, err, sizeof(err), "--version", NULL), KCM_OPTIONS_VERSION);
}

static void refusals_name_the_flag(void **state) {
  static const struct {
    const char *args[3];
    const char *message;
  } cases[] = {
      {{"--secure-port=70000"}, "invalid value \"70000\" for flag --secure-port: must be a port"},
      {{"--secure-port=-1"}, "invalid value \"-1\" for flag --secure-port"},
      {{"--bind-address=localhost"},
       "invalid value \"localhost\" for flag --bind-address: must be an IP address"},
      {{"--tls-min-version=VersionTLS10"},
       "invalid value \"VersionTLS10\" for flag --tls-min-version: must be VersionTLS12 or "
       "VersionTLS13"},
      {{"--shadow", "--use-service-account-credentials"},
       "--shadow sends no write, so it needs no controller credentials: drop "
       "--use-service-account-credentials"},
      {{"--shadow", "--shadow-window=0"}, "--shadow-window must be longer than 0"},
      {{"--tls-cert-file=/c"}, "--tls-cert-file and --tls-private-key-file must be given "
                               "together"},
      {{"--authorization-webhook-cache-authorized-ttl=10"},
       "invalid value \"10\" for flag --authorization-webhook-cache-authorized-ttl: must be a "
       "duration"},
      {{"--concurrent-deployment-syncs=0"},
       "invalid value \"0\" for flag --concurrent-deployment-syncs: must be a positive integer"},
      {{"-v", "-1"}, "invalid value \"-1\" for flag -v: must be a non-negative integer"},
      {{"--kube-api-qps=nan"}, "invalid value \"nan\" for flag --kube-api-qps"},
      {{"--leader-elect=maybe"}, "invalid value \"maybe\" for flag --leader-elect"},
      {{"--kube-api-content-type=application/yaml"},
       "invalid value \"application/yaml\" for flag --kube-api-content-type: must be "
       "application/vnd.kubernetes.protobuf or application/json"},
      {{"--metrics-bind-address=70000"},
       "invalid value \"70000\" for flag --metrics-bind-address: must be [host]:port, a port "
       "alone or 0"},
      {{"--metrics-bind-address=08080"}, "invalid value \"08080\" for flag --metrics-bind"},
      {{"--health-probe-bind-address=-1"}, "invalid value \"-1\" for flag --health-probe"},
      {{"--min-resync-period=1e300h"}, "invalid value \"1e300h\" for flag --min-resync-period"},
      {{"--controllers=endpoints"}, "\"endpoints\" is not in the list of known controllers"},
      {{"--controllers=*,-bogus"}, "\"bogus\" is not in the list of known controllers"},
      {{"--feature-gates=Foo"}, "invalid value \"Foo\" for flag --feature-gates: each item "
                                "must be key=value"},
      {{"--feature-gates=Foo=yes"}, "each value must be true or false"},
      {{"--vmodule=controller"}, "invalid value \"controller\" for flag --vmodule"},
      {{"--vmodule=controller=x"}, "each level must be a non-negative integer"},
      {{"--leader-elect-resource-lock=endpointsleases"}, "must be leases"},
      {{"--version=v2"}, "invalid value \"v2\" for flag --version"},
      {{"--cluster-cidr"}, "flag needs an argument: --cluster-cidr"},
      {{"--no-such-flag"}, "unknown flag: --no-such-flag"},
      {{"--kubeconfig"}, "flag needs an argument: --kubeconfig"},
      {{"stray"}, "unexpected argument \"stray\""},
  };
  struct kcm_options o;
  char err[256];
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    enum kcm_options_result r =
        parse(&o, err, sizeof(err), cases[i].args[0], cases[i].args[1], cases[i].args[2]);
    if (r != KCM_OPTIONS_INVALID || !strstr(err, cases[i].message))
      fail_msg("%s: got %d \"%s\", want \"%s\"", cases[i].args[0], r, err, cases[i].message);
  }
}

static void durations(void **state) {
  uint64_t ms;
  assert_int_equal(kcm_options_duration("1m30s", &ms), 0);
  assert_int_equal(ms, 90000);
  assert_int_equal(kcm_options_duration("1.5s", &ms), 0);
  assert_int_equal(ms, 1500);
  assert_int_equal(kcm_options_duration("500ms", &ms), 0);
  assert_int_equal(ms, 500);
  assert_int_equal(kcm_options_duration("0", &ms), 0);
  assert_int_equal(ms, 0);
  assert_int_equal(kcm_options_duration("15", &ms), -1);
  assert_int_equal(kcm_options_duration("-1s", &ms), -1);
  assert_int_equal(kcm_options_duration("", &ms), -1);
  assert_int_equal(kcm_options_duration("nans", &ms), -1);
  assert_int_equal(kcm_options_duration("infh", &ms), -1);
}

static void local_addresses_default_to_loopback(void **state) {
  char buf[64];
  assert_string_equal(kcm_options_local_address(":8081", buf, sizeof(buf)), "127.0.0.1:8081");
  assert_string_equal(kcm_options_local_address("0.0.0.0:8081", buf, sizeof(buf)),
                      "0.0.0.0:8081");
  assert_string_equal(kcm_options_local_address("[::1]:0", buf, sizeof(buf)), "[::1]:0");
}

/* A port alone, with or without its colon, is served on loopback, as the
 * usage says. */
static void a_port_alone_binds_loopback(void **state) {
  struct kcm_options o;
  char err[256], buf[64];
  assert_int_equal(parse(&o, err, sizeof(err), "--metrics-bind-address=19113",
                         "--health-probe-bind-address", "8081", NULL),
                   KCM_OPTIONS_RUN);
  assert_string_equal(kcm_options_local_address(o.metrics_address, buf, sizeof(buf)),
                      "127.0.0.1:19113");
  assert_string_equal(kcm_options_local_address(o.health_address, buf, sizeof(buf)),
                      "127.0.0.1:8081");
  assert_int_equal(parse(&o, err, sizeof(err), "--metrics-bind-address=65535", NULL),
                   KCM_OPTIONS_RUN);
  assert_string_equal(kcm_options_local_address(o.metrics_address, buf, sizeof(buf)),
                      "127.0.0.1:65535");
  /* 0 alone stays off. */
  assert_int_equal(parse(&o, err, sizeof(err), "--metrics-bind-address=0", NULL),
                   KCM_OPTIONS_RUN);
  assert_string_equal(o.metrics_address, "0");
}

/* What kcm_options_main() writes to stderr for argv (NULL-ended), and its
 * result in *rc; the text lasts until the next call. */
static const char *main_stderr(int *rc, ...) {
  static char name[] = "kcm", text[1 << 16];
  char *argv[16] = {name};
  int argc = 1, saved;
  struct kcm_options o;
  FILE *f = tmpfile();
  va_list ap;
  va_start(ap, rc);
  while (argc < 15 && (argv[argc] = va_arg(ap, char *)))
    argc++;
  va_end(ap);
  assert_non_null(f);
  fflush(stderr);
  saved = dup(2);
  dup2(fileno(f), 2);
  *rc = kcm_options_main(&o, groups(), argc, argv);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  kcm_log_set_format(KCM_LOG_TEXT);
  rewind(f);
  text[fread(text, 1, sizeof(text) - 1, f)] = '\0';
  fclose(f);
  return text;
}

/* The last line of text (which ends with a newline). */
static const char *last_line(const char *text) {
  size_t n = strlen(text);
  assert_true(n > 0 && text[n - 1] == '\n');
  while (n > 1 && text[n - 2] != '\n')
    n--;
  return text + n - 1;
}

/* As kube-controller-manager: the usage, then the error last, where a
 * terminal still shows it; exit status 1. */
static void a_bad_flag_prints_the_usage_then_the_error(void **state) {
  int rc;
  const char *text = main_stderr(&rc, "--foo", NULL);
  assert_int_equal(rc, 1);
  assert_true(!strncmp(text, "Usage: kcm [flags]\n", 19));
  assert_string_equal(last_line(text), "Error: unknown flag: --foo\n");
  assert_non_null(strstr(text, "print this help and exit\n\nError: "));
  text = main_stderr(&rc, "--kube-api-qps=fast", "-v", "2", NULL);
  assert_int_equal(rc, 1);
  assert_string_equal(last_line(text), "Error: invalid value \"fast\" for flag --kube-api-qps: "
                                       "must be a non-negative number\n");
}

/* A JSON line holding the error (and no usage), the whole of stderr. */
static void assert_one_json_error(const char *text, const char *err) {
  char field[256];
  assert_true(!strncmp(text, "{\"ts\":", 6));
  assert_ptr_equal(strchr(text, '\n'), text + strlen(text) - 1);
  assert_string_equal(text + strlen(text) - 2, "}\n");
  assert_non_null(strstr(text, "\"msg\":\"command failed\""));
  snprintf(field, sizeof(field), "\"err\":\"%s\"", err);
  if (!strstr(text, field))
    fail_msg("want %s in %s", field, text);
  assert_null(strstr(text, "Usage"));
}

/* With --logging-format=json, given before or after the bad flag, the
 * error is a JSON line; a value of another flag that reads like it is
 * not taken for it. */
static void flag_errors_are_json_under_json_logs(void **state) {
  int rc;
  const char *text = main_stderr(&rc, "--foo", "--logging-format=json", NULL);
  assert_int_equal(rc, 1);
  assert_one_json_error(text, "unknown flag: --foo");
  text = main_stderr(&rc, "--logging-format", "json", "--kube-api-burst=0", NULL);
  assert_int_equal(rc, 1);
  assert_one_json_error(text, "invalid value \\\"0\\\" for flag --kube-api-burst: must be a "
                              "positive integer");
  text = main_stderr(&rc, "--shadow", "--use-service-account-credentials",
                     "--logging_format=json", NULL);
  assert_int_equal(rc, 1);
  assert_one_json_error(text, "--shadow sends no write, so it needs no controller credentials: "
                              "drop --use-service-account-credentials");
  /* --kubeconfig takes it as its value; the last format given counts. */
  text = main_stderr(&rc, "--kubeconfig", "--logging-format=json", "--foo", NULL);
  assert_string_equal(last_line(text), "Error: unknown flag: --foo\n");
  text = main_stderr(&rc, "--logging-format=json", "--foo", "--logging-format=text", NULL);
  assert_string_equal(last_line(text), "Error: unknown flag: --foo\n");
}

static void usage_lists_every_flag_in_sections(void **state) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  static const char *const expected[] = {
      "Secure serving flags:", "--secure-port PORT", "--bind-address IP", "--cert-dir DIR",
      "--tls-cert-file PATH", "--tls-private-key-file PATH", "--tls-min-version V",
      "Authentication flags:", "--authentication-kubeconfig PATH", "--client-ca-file PATH",
      "--authentication-token-webhook-cache-ttl D", "Authorization flags:",
      "--authorization-kubeconfig PATH", "--authorization-always-allow-paths LIST",
      "--authorization-webhook-cache-authorized-ttl D",
      "--authorization-webhook-cache-unauthorized-ttl D", "--leader-elect[=BOOL]",
      "--concurrent-deployment-syncs N", "--concurrent-replicaset-syncs N", "-v N, --v N",
      "--kubeconfig PATH", "--health-probe-bind-address ADDR", "--metrics-bind-address ADDR",
      "(default 10257)", "--help"};
  size_t i;
  kcm_options_usage(f, groups());
  fclose(f);
  for (i = 0; i < sizeof(expected) / sizeof(expected[0]); i++)
    if (!strstr(text, expected[i]))
      fail_msg("usage lacks \"%s\":\n%s", expected[i], text);
  /* Sections in kube-controller-manager's order. */
  assert_true(strstr(text, "Generic flags:") < strstr(text, "Secure serving flags:"));
  assert_true(strstr(text, "Secure serving flags:") < strstr(text, "Authentication flags:"));
  assert_true(strstr(text, "Authentication flags:") < strstr(text, "Authorization flags:"));
  /* the controllers' own sections, in the table's order, before the plain HTTP flags */
  assert_true(strstr(text, "Authorization flags:") < strstr(text, "Deployment controller flags:"));
  assert_true(strstr(text, "Deployment controller flags:") <
              strstr(text, "ReplicaSet controller flags:"));
  assert_true(strstr(text, "ReplicaSet controller flags:") <
              strstr(text, "Plain HTTP flags (local runs):"));
  assert_non_null(strstr(text, "against an API server: deployment, replicaset.\n"));
  free(text);
}

/* kubeadm's kube-controller-manager arguments, as its static pod manifest
 * gives them (v1.24 to v1.31). */
static void kubeadms_arguments_run_unchanged(void **state) {
  static const char *const args[] = {
      "--allocate-node-cidrs=true",
      "--authentication-kubeconfig=/etc/kubernetes/controller-manager.conf",
      "--authorization-kubeconfig=/etc/kubernetes/controller-manager.conf",
      "--bind-address=127.0.0.1",
      "--client-ca-file=/etc/kubernetes/pki/ca.crt",
      "--cluster-cidr=10.244.0.0/16",
      "--cluster-name=kubernetes",
      "--cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt",
      "--cluster-signing-key-file=/etc/kubernetes/pki/ca.key",
      "--controllers=*,bootstrapsigner,tokencleaner",
      "--kubeconfig=/etc/kubernetes/controller-manager.conf",
      "--leader-elect=true",
      "--requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
      "--root-ca-file=/etc/kubernetes/pki/ca.crt",
      "--service-account-private-key-file=/etc/kubernetes/pki/sa.key",
      "--service-cluster-ip-range=10.96.0.0/12",
      "--use-service-account-credentials=true",
  };
  static const char *const ignored[] = {
      "allocate-node-cidrs", "cluster-cidr", "cluster-name", "cluster-signing-cert-file",
      "cluster-signing-key-file", "requestheader-client-ca-file", "root-ca-file",
      "service-account-private-key-file", "service-cluster-ip-range"};
  static char name[] = "kcm";
  char *argv[32] = {name}, err[256], foreign[256];
  struct kcm_options o;
  size_t i;
  for (i = 0; i < sizeof(args) / sizeof(args[0]); i++)
    assert_non_null(argv[i + 1] = strdup(args[i]));
  assert_int_equal(kcm_options_parse(&o, groups(), (int)i + 1, argv, err, sizeof(err)),
                   KCM_OPTIONS_RUN);
  assert_true(kcm_options_enables(&o, DC) && kcm_options_enables(&o, RS) && o.sa_credentials);
  assert_string_equal(o.bind_address, "127.0.0.1");
  assert_string_equal(o.client_ca_file, "/etc/kubernetes/pki/ca.crt");
  assert_string_equal(o.authn_kubeconfig, "/etc/kubernetes/controller-manager.conf");
  assert_string_equal(kcm_options_foreign(&o, foreign, sizeof(foreign)),
                      "bootstrapsigner,tokencleaner");
  assert_int_equal(o.nignored, sizeof(ignored) / sizeof(ignored[0]));
  for (i = 0; i < o.nignored; i++)
    assert_string_equal(o.ignored[i], ignored[i]);
  for (i = 1; argv[i]; i++)
    free(argv[i]);
}

/* Names read as upstream reads them: '_' as '-'; a foreign boolean alone
 * takes no value; one given twice is reported once. */
static void foreign_flags_and_names(void **state) {
  struct kcm_options o;
  char err[256], foreign[256];
  assert_int_equal(parse(&o, err, sizeof(err), "--concurrent_deployment_syncs=3", "--profiling",
                         "--kubeconfig", "/k", "--profiling=false", "--concurrent_rc_syncs", "2",
                         NULL),
                   KCM_OPTIONS_RUN);
  assert_int_equal(INT_FLAG(&o, "concurrent-deployment-syncs"), 3);
  assert_string_equal(o.kubeconfig, "/k");
  assert_int_equal(o.nignored, 2);
  assert_string_equal(o.ignored[0], "profiling");
  assert_string_equal(o.ignored[1], "concurrent-rc-syncs");
  /* The canonical names of v1.29 on, and their negations. */
  assert_int_equal(parse(&o, err, sizeof(err), "--controllers=deployment-controller,job", NULL),
                   KCM_OPTIONS_RUN);
  assert_true(kcm_options_enables(&o, DC) && !kcm_options_enables(&o, RS));
  assert_string_equal(kcm_options_foreign(&o, foreign, sizeof(foreign)), "job");
  assert_int_equal(parse(&o, err, sizeof(err), "--controllers=*,-replicaset-controller", NULL),
                   KCM_OPTIONS_RUN);
  assert_true(kcm_options_enables(&o, DC) && !kcm_options_enables(&o, RS));
  assert_string_equal(kcm_options_foreign(&o, foreign, sizeof(foreign)), "");
  assert_int_equal(parse(&o, err, sizeof(err), "--feature-gates=A=true,B=False",
                         "--leader-elect-resource-lock=leases", "--vmodule=controller*=4", NULL),
                   KCM_OPTIONS_RUN);
  assert_string_equal(o.feature_gates, "A=true,B=False");
  assert_string_equal(o.vmodule, "controller*=4");
  assert_false(o.no_watch_list); /* on by default, as in client-go from 1.35 */
  assert_string_equal(kcm_options_inert_gates(&o, foreign, sizeof(foreign)), "A=true,B=False");
  /* WatchListClient acts (its last value counts); the others do not. */
  assert_int_equal(parse(&o, err, sizeof(err),
                         "--feature-gates=WatchListClient=true,A=1,WatchListClient=false", NULL),
                   KCM_OPTIONS_RUN);
  assert_true(o.no_watch_list);
  assert_string_equal(kcm_options_inert_gates(&o, foreign, sizeof(foreign)), "A=1");
  assert_int_equal(parse(&o, err, sizeof(err), "--feature-gates=WatchListClient=F", NULL),
                   KCM_OPTIONS_RUN);
  assert_true(o.no_watch_list);
  assert_string_equal(kcm_options_inert_gates(&o, foreign, sizeof(foreign)), "");
  assert_int_equal(parse(&o, err, sizeof(err), "--feature-gates=WatchListClientX=false", NULL),
                   KCM_OPTIONS_RUN);
  assert_false(o.no_watch_list);
}

/* A group of another part: its flags read into settings of its own, which
 * start as its defaults on every parse; its names taken by --controllers
 * and not foreign; its section in --help before the plain HTTP flags. */
struct demo {
  int workers;
  uint64_t wait_ms;
  bool eager;
  int rc_workers;
};
static const struct kcm_options_flag demo_flags[] = {
    {"Demo controller flags", "concurrent-demo-syncs", "N", KCM_OPTIONS_POSITIVE,
     offsetof(struct demo, workers), "demos synced at once (default 2)"},
    {NULL, "demo-wait", "D", KCM_OPTIONS_DURATION, offsetof(struct demo, wait_ms),
     "how long a demo waits (default 3s)"},
    {NULL, "demo-eager", NULL, KCM_OPTIONS_BOOLEAN, offsetof(struct demo, eager),
     "whether a demo hurries (default false)"},
    /* a flag of kube-controller-manager's that kcm's own build ignores */
    {NULL, "concurrent-rc-syncs", "N", KCM_OPTIONS_POSITIVE, offsetof(struct demo, rc_workers),
     "ReplicationControllers synced at once (default 5)"},
};
static const struct demo demo_defaults = {2, 3000, false, 5};
static const struct kcm_options_group demo = {
    "demo", (const char *const[]){"demo", "demo-controller", NULL}, demo_flags, 4,
    &demo_defaults, sizeof(demo_defaults)};

static void a_group_owns_its_flags(void **state) {
  static char name[] = "kcm", a1[] = "--concurrent_demo_syncs=7", a2[] = "--demo-eager",
              a3[] = "--controllers=demo-controller,job", a4[] = "--demo-wait", a5[] = "0",
              a6[] = "--concurrent-demo-syncs=0";
  const struct kcm_options_group *with[] = {&demo, NULL};
  const struct kcm_options_group *none[] = {NULL};
  char *argv[] = {name, a1, a2, a3, a4, a5, NULL, NULL}, err[256], foreign[64], *text = NULL;
  const struct demo *d;
  struct kcm_options o;
  size_t len = 0;
  FILE *f;
  static char a7[] = "--concurrent-rc-syncs=9";
  argv[6] = a7;
  assert_int_equal(kcm_options_parse(&o, with, 7, argv, err, sizeof(err)), KCM_OPTIONS_RUN);
  argv[6] = NULL;
  assert_non_null(d = kcm_options_settings(&o, &demo));
  assert_int_equal(d->rc_workers, 9); /* the group's now, not ignored */
  assert_int_equal(o.nignored, 0);
  assert_int_equal(d->workers, 7);
  assert_int_equal(d->wait_ms, 0);
  assert_true(d->eager);
  assert_true(kcm_options_enables(&o, demo.controllers));
  assert_string_equal(kcm_options_foreign(&o, foreign, sizeof(foreign)), "job");
  /* parsed again: its defaults again */
  assert_int_equal(kcm_options_parse(&o, with, 1, argv, err, sizeof(err)), KCM_OPTIONS_RUN);
  d = kcm_options_settings(&o, &demo);
  assert_true(d->workers == 2 && d->wait_ms == 3000 && !d->eager);
  /* refused as kcm's own flags are */
  argv[1] = a6;
  assert_int_equal(kcm_options_parse(&o, with, 2, argv, err, sizeof(err)), KCM_OPTIONS_INVALID);
  assert_string_equal(err, "invalid value \"0\" for flag --concurrent-demo-syncs: must be a "
                           "positive integer");
  /* without the group, neither its flags nor its names exist */
  assert_int_equal(kcm_options_parse(&o, none, 2, argv, err, sizeof(err)), KCM_OPTIONS_INVALID);
  assert_string_equal(err, "unknown flag: --concurrent-demo-syncs=0");
  assert_null(kcm_options_settings(&o, &demo));
  {
    /* upstream's flags of kcm's controllers are accepted by a build without them */
    static char upstream[] = "--concurrent-deployment-syncs=3";
    char *args[] = {name, upstream, NULL};
    assert_int_equal(kcm_options_parse(&o, none, 2, args, err, sizeof(err)), KCM_OPTIONS_RUN);
    assert_int_equal(o.nignored, 1);
    assert_string_equal(o.ignored[0], "concurrent-deployment-syncs");
  }
  argv[1] = a3;
  assert_int_equal(kcm_options_parse(&o, none, 2, argv, err, sizeof(err)), KCM_OPTIONS_INVALID);
  assert_non_null(strstr(err, "\"demo-controller\" is not in the list of known controllers"));
  f = open_memstream(&text, &len);
  kcm_options_usage(f, with);
  fclose(f);
  assert_non_null(strstr(text, "against an API server: demo.\n"));
  assert_non_null(strstr(text, "\nDemo controller flags:\n  --concurrent-demo-syncs N"));
  assert_non_null(strstr(text, "  --demo-eager[=BOOL]"));
  assert_true(strstr(text, "Demo controller flags:") < strstr(text, "Plain HTTP flags"));
  /* listed once, with the group's flags, not among the flags kcm ignores */
  assert_non_null(strstr(text, "  --concurrent-rc-syncs N"));
  assert_null(strstr(strstr(text, "Flags of kube-controller-manager's other"), "concurrent-rc"));
  free(text);
}

/* More groups than kcm_options can hold, or settings larger than a slot,
 * are refused, not cut. */
static void groups_beyond_the_limits_are_refused(void **state) {
  static char name[] = "kcm";
  const struct kcm_options_group *many[KCM_OPTIONS_GROUPS + 2];
  struct kcm_options_group big = demo, flagless = {"flagless", NULL, NULL, 0, &demo_defaults, 0};
  char *argv[] = {name, NULL}, err[256];
  struct kcm_options o;
  size_t i;
  for (i = 0; i <= KCM_OPTIONS_GROUPS; i++)
    many[i] = &flagless;
  many[i] = NULL;
  assert_int_equal(kcm_options_parse(&o, many, 1, argv, err, sizeof(err)), KCM_OPTIONS_INVALID);
  assert_non_null(strstr(err, "the flags of flagless do not fit"));
  many[KCM_OPTIONS_GROUPS] = NULL;
  assert_int_equal(kcm_options_parse(&o, many, 1, argv, err, sizeof(err)), KCM_OPTIONS_RUN);
  big.size = KCM_OPTIONS_SETTINGS + 1;
  many[0] = &big;
  many[1] = NULL;
  assert_int_equal(kcm_options_parse(&o, many, 1, argv, err, sizeof(err)), KCM_OPTIONS_INVALID);
  /* a flag another group or kcm itself has taken */
  many[0] = &demo;
  many[1] = &demo;
  many[2] = NULL;
  assert_int_equal(kcm_options_parse(&o, many, 1, argv, err, sizeof(err)), KCM_OPTIONS_INVALID);
  assert_string_equal(err, "the flags of demo: --concurrent-demo-syncs is another's");
  {
    static const struct kcm_options_flag own[] = {
        {"Mine", "kubeconfig", "PATH", KCM_OPTIONS_STRING, 0, "mine"}};
    static const char *value;
    struct kcm_options_group mine = {"mine", NULL, own, 1, &value, sizeof(value)};
    many[0] = &mine;
    many[1] = NULL;
    assert_int_equal(kcm_options_parse(&o, many, 1, argv, err, sizeof(err)),
                     KCM_OPTIONS_INVALID);
    assert_string_equal(err, "the flags of mine: --kubeconfig is another's");
  }
}

static void version_forms(void **state) {
  struct kcm_options o;
  char err[256];
  assert_int_equal(parse(&o, err, sizeof(err), "--version", NULL), KCM_OPTIONS_VERSION);
  assert_false(o.version_raw);
  assert_int_equal(parse(&o, err, sizeof(err), "--version=raw", NULL), KCM_OPTIONS_VERSION);
  assert_true(o.version_raw);
  assert_int_equal(parse(&o, err, sizeof(err), "--version=false", "-v", "2", NULL),
                   KCM_OPTIONS_RUN);
  assert_int_equal(o.verbosity, 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(kubeadms_arguments_run_unchanged),
      cmocka_unit_test(foreign_flags_and_names),
      cmocka_unit_test(version_forms),
      cmocka_unit_test(a_group_owns_its_flags),
      cmocka_unit_test(groups_beyond_the_limits_are_refused),
      cmocka_unit_test(defaults_are_kube_controller_managers),
      cmocka_unit_test(values_of_every_kind),
      cmocka_unit_test(refusals_name_the_flag),
      cmocka_unit_test(durations),
      cmocka_unit_test(local_addresses_default_to_loopback),
      cmocka_unit_test(usage_lists_every_flag_in_sections),
      cmocka_unit_test(a_port_alone_binds_loopback),
      cmocka_unit_test(a_bad_flag_prints_the_usage_then_the_error),
      cmocka_unit_test(flag_errors_are_json_under_json_logs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
