/*
 * Tests for the client module: kubeconfig resolution (fields, merge rules,
 * in-cluster settings, bad files) and HTTP requests against the local API
 * server started as a child process.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/client/internal.h"
#include "exposition.h"
#include "pbwrite.h"
#include "peer.h"
#include "support.h"
#include "kcm/client.h"
#include "kcm/error.h"
#include "kcm/log.h"

static char tmpdir[256];

static void write_file(const char *name, const char *text) {
  char path[512];
  FILE *f;
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *path_of(const char *name) {
  static char path[512];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  return path;
}

static bool contains(const char *text, const char *what) { return strstr(text, what) != NULL; }

static int load(struct kcm_client_config *cfg, const char *kubeconfig, const char *context,
                const char *master, char **errmsg) {
  struct kcm_client_config_options o = {kubeconfig, context, master};
  return kcm_client_config_load(cfg, &o, errmsg);
}

static int setup_dir(void **state) {
  snprintf(tmpdir, sizeof(tmpdir), "/tmp/kcm-test-client-XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
  unsetenv("KUBECONFIG");
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  setenv("HOME", tmpdir, 1);
  return 0;
}

static int teardown_dir(void **state) {
  char cmd[600];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
  return system(cmd) == 0 ? 0 : -1;
}

static const char basic_config[] =
    "apiVersion: v1\n"
    "kind: Config\n"
    "current-context: one\n"
    "clusters:\n"
    "- name: c1\n"
    "  cluster:\n"
    "    server: https://10.0.0.1:6443/\n"
    "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJU\n"
    "- name: c2\n"
    "  cluster:\n"
    "    server: https://c2.example:443\n"
    "    insecure-skip-tls-verify: true\n"
    "    tls-server-name: api.internal\n"
    "contexts:\n"
    "- name: one\n"
    "  context: {cluster: c1, user: u1}\n"
    "- name: two\n"
    "  context: {cluster: c2, user: u2, namespace: team-b}\n"
    "users:\n"
    "- name: u1\n"
    "  user:\n"
    "    token: abc123\n"
    "- name: u2\n"
    "  user:\n"
    "    username: admin\n"
    "    password: secret\n";

static void current_context_token_and_ca_data(void **state) {
  struct kcm_client_config cfg;
  char *err = NULL;
  write_file("config", basic_config);
  assert_int_equal(load(&cfg, path_of("config"), NULL, NULL, &err), 0);
  assert_string_equal(cfg.server, "https://10.0.0.1:6443");
  assert_string_equal(cfg.token, "abc123");
  assert_string_equal(cfg.context, "one");
  assert_string_equal(cfg.namespace, "default");
  assert_int_equal(cfg.ca_pem_len, 15);
  assert_memory_equal(cfg.ca_pem, "-----BEGIN CERT", 15);
  assert_false(cfg.insecure);
  kcm_client_config_release(&cfg);
}

static void context_flag_selects_cluster_user_namespace(void **state) {
  struct kcm_client_config cfg;
  char *err = NULL;
  write_file("config", basic_config);
  assert_int_equal(load(&cfg, path_of("config"), "two", NULL, &err), 0);
  assert_string_equal(cfg.server, "https://c2.example:443");
  assert_true(cfg.insecure);
  assert_string_equal(cfg.tls_server_name, "api.internal");
  assert_string_equal(cfg.username, "admin");
  assert_string_equal(cfg.password, "secret");
  assert_null(cfg.token);
  assert_string_equal(cfg.namespace, "team-b");
  kcm_client_config_release(&cfg);
}

static void master_flag_overrides_server(void **state) {
  struct kcm_client_config cfg;
  char *err = NULL;
  write_file("config", basic_config);
  assert_int_equal(load(&cfg, path_of("config"), NULL, "http://127.0.0.1:8080", &err), 0);
  assert_string_equal(cfg.server, "http://127.0.0.1:8080");
  assert_string_equal(cfg.token, "abc123");
  kcm_client_config_release(&cfg);
}

static void relative_paths_resolve_against_the_file(void **state) {
  struct kcm_client_config cfg;
  char *err = NULL, dir[600];
  snprintf(dir, sizeof(dir), "%s/sub", tmpdir);
  mkdir(dir, 0700);
  write_file("sub/ca.pem", "CA-PEM");
  write_file("sub/tok", "file-token\n");
  write_file("sub/cert.pem", "CERT");
  write_file("sub/key.pem", "KEY");
  write_file("sub/config", "current-context: x\n"
                           "clusters: [{name: c, cluster: {server: 'https://h:1', "
                           "certificate-authority: ca.pem}}]\n"
                           "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                           "users: [{name: u, user: {tokenFile: tok, client-certificate: "
                           "cert.pem, client-key: key.pem}}]\n");
  assert_int_equal(load(&cfg, path_of("sub/config"), NULL, NULL, &err), 0);
  assert_string_equal(cfg.ca_pem, "CA-PEM");
  assert_string_equal(cfg.cert_pem, "CERT");
  assert_string_equal(cfg.key_pem, "KEY");
  assert_string_equal(cfg.token_file, path_of("sub/tok"));
  kcm_client_config_release(&cfg);
}

static void kubeconfig_list_first_value_wins(void **state) {
  struct kcm_client_config cfg;
  char *err = NULL, list[2048];
  int rc;
  write_file("a", "current-context: ctx\n"
                  "users: [{name: red, user: {token: from-a}}]\n");
  write_file("b", "current-context: other\n"
                  "clusters: [{name: c, cluster: {server: 'https://b:1'}}]\n"
                  "contexts: [{name: ctx, context: {cluster: c, user: red}}]\n"
                  "users: [{name: red, user: {token: from-b, username: ignored}}]\n");
  snprintf(list, sizeof(list), "%s/a:%s/missing:%s/b", tmpdir, tmpdir, tmpdir);
  setenv("KUBECONFIG", list, 1);
  rc = load(&cfg, NULL, NULL, NULL, &err);
  unsetenv("KUBECONFIG");
  if (rc != 0)
    fail_msg("%s", err);
  assert_string_equal(cfg.context, "ctx");
  assert_string_equal(cfg.server, "https://b:1");
  assert_string_equal(cfg.token, "from-a");
  assert_null(cfg.username); /* the second file's `red` is ignored entirely */
  kcm_client_config_release(&cfg);
}

static void home_config_is_the_fallback(void **state) {
  struct kcm_client_config cfg;
  char *err = NULL, dir[600];
  snprintf(dir, sizeof(dir), "%s/.kube", tmpdir);
  mkdir(dir, 0700);
  write_file(".kube/config", basic_config);
  assert_int_equal(load(&cfg, NULL, NULL, NULL, &err), 0);
  assert_string_equal(cfg.server, "https://10.0.0.1:6443");
  kcm_client_config_release(&cfg);
  unlink(path_of(".kube/config"));
}

static void in_cluster_settings(void **state) {
  struct kcm_client_config cfg;
  char *err = NULL, dir[600];
  snprintf(dir, sizeof(dir), "%s/sa", tmpdir);
  mkdir(dir, 0700);
  write_file("sa/token", "sa-token\n");
  write_file("sa/ca.crt", "SA-CA");
  write_file("sa/namespace", "kube-system\n");
  setenv("KCM_SERVICEACCOUNT_DIR", dir, 1);
  setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  assert_int_equal(load(&cfg, NULL, NULL, NULL, &err), 0);
  assert_string_equal(cfg.server, "https://[fd00::1]:443");
  assert_string_equal(cfg.ca_pem, "SA-CA");
  assert_string_equal(cfg.namespace, "kube-system");
  assert_string_equal(cfg.token_file, path_of("sa/token"));
  kcm_client_config_release(&cfg);
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  assert_int_equal(load(&cfg, NULL, NULL, NULL, &err), 0);
  assert_string_equal(cfg.server, "https://10.96.0.1:443");
  kcm_client_config_release(&cfg);
  /* An empty host or port is not a cluster, as client-go reads them. */
  setenv("KUBERNETES_SERVICE_HOST", "", 1);
  assert_int_equal(load(&cfg, NULL, NULL, "http://m:1", &err), 0);
  assert_string_equal(cfg.source, "--master");
  assert_null(cfg.token_file);
  kcm_client_config_release(&cfg);
  setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  setenv("KUBERNETES_SERVICE_PORT", "", 1);
  assert_int_equal(load(&cfg, NULL, NULL, "http://m:1", &err), 0);
  assert_string_equal(cfg.source, "--master");
  kcm_client_config_release(&cfg);
  unsetenv("KUBERNETES_SERVICE_HOST");
  unsetenv("KUBERNETES_SERVICE_PORT");
  unsetenv("KCM_SERVICEACCOUNT_DIR");
}

/* A bad file gives an error naming the file, the line and the field. */
static void expect_error(const char *text, const char *context, const char *want1,
                         const char *want2) {
  struct kcm_client_config cfg;
  char *err = NULL;
  write_file("bad", text);
  assert_int_not_equal(load(&cfg, path_of("bad"), context, NULL, &err), 0);
  assert_non_null(err);
  if (!strstr(err, path_of("bad")) || !strstr(err, want1) || (want2 && !strstr(err, want2)))
    fail_msg("unexpected message: %s", err);
  free(err);
}

static void bad_files_are_reported_precisely(void **state) {
  expect_error("clusters: [\n  - name: x\n", NULL, "line", NULL);
  expect_error("- just\n- a list\n", NULL, "line 1", "must be a mapping");
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
               "clusters:\n- name: c\n  cluster:\n    server: {a: b}\n",
               NULL, "line 6", "cluster.server: must be a string");
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
               "clusters:\n- name: c\n  cluster:\n    server: https://a\n"
               "    certificate-authority-data: '!!!'\n",
               NULL, "line 7", "not valid base64");
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
               "clusters:\n- name: c\n  cluster:\n    server: https://a\n"
               "    insecure-skip-tls-verify: maybe\n",
               NULL, "line 7", "insecure-skip-tls-verify: must be true or false");
  expect_error("current-context: nope\n", NULL, "context \"nope\" is not defined", NULL);
  expect_error("clusters: []\n", NULL, "no current-context", NULL);
  expect_error("contexts: 5\n", "x", "contexts: must be a list", NULL);
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
               "clusters: [{name: c, cluster: {server: 'ftp://a'}}]\n",
               NULL, "must start with https://", NULL);
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
               "clusters: [{name: c, cluster: {insecure-skip-tls-verify: true, "
               "certificate-authority-data: QQ==, server: 'https://a'}}]\n",
               NULL, "insecure flag is not allowed", NULL);
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
               "clusters: [{name: c, cluster: {server: 'https://a'}}]\n"
               "users: [{name: u, user: {client-certificate-data: QQ==}}]\n",
               NULL, "must be given together", NULL);
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
               "clusters: [{name: c, cluster: {server: 'https://a', "
               "certificate-authority: nofile.pem}}]\n",
               NULL, "nofile.pem", "No such file");
}

/* Loading the kubeconfig "nohost" (with --master when master is set) is
 * refused with a message holding both words and none of the userinfo. */
static void expect_no_host(const char *master, const char *word1, const char *word2) {
  struct kcm_client_config cfg;
  char *err = NULL;
  assert_int_equal(load(&cfg, path_of("nohost"), NULL, master, &err), KCM_EINVAL);
  assert_null(cfg.server);
  assert_non_null(err);
  if (!contains(err, "no host") || !contains(err, word1) || !contains(err, word2) ||
      contains(err, "b.example") || contains(err, "user") || contains(err, "pw"))
    fail_msg("unexpected message: %s", err);
  free(err);
}

/* A server URL whose host is empty once its user and password are taken
 * out is refused (client-go: "host must be a URL or a host:port pair"),
 * naming the file, the line and the cluster, and none of the userinfo. */
static void server_without_a_host_is_refused(void **state) {
  static const char *const urls[] = {"https://b.example@", "https://@", "https://:443",
                                     "https:///path", "https://user:pw@/x", "http://[]:80"};
  struct kcm_client_config cfg;
  char kc[512], *err = NULL;
  size_t i;

  for (i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
    snprintf(kc, sizeof(kc),
             "current-context: x\ncontexts: [{name: x, context: {cluster: prod}}]\n"
             "clusters:\n- name: prod\n  cluster:\n    server: '%s'\n", urls[i]);
    write_file("nohost", kc);
    expect_no_host(NULL, "line 6", "cluster \"prod\"");
    expect_no_host(NULL, path_of("nohost"), "cluster.server");
    /* --master replaces the cluster's server, as client-go's override does,
     * and is checked itself. */
    assert_int_equal(load(&cfg, path_of("nohost"), NULL, "https://h:1", &err), 0);
    assert_string_equal(cfg.server, "https://h:1");
    kcm_client_config_release(&cfg);
    expect_no_host(urls[i], "--master", "server");
  }
  /* A host after the userinfo, or in brackets, is one. */
  assert_int_equal(load(&cfg, path_of("nohost"), NULL, "https://u:p@h", &err), 0);
  assert_string_equal(cfg.server, "https://h");
  kcm_client_config_release(&cfg);
  assert_int_equal(load(&cfg, path_of("nohost"), NULL, "https://[::1]:6443/", &err), 0);
  assert_string_equal(cfg.server, "https://[::1]:6443");
  kcm_client_config_release(&cfg);
}

/* What was written to f, which is then closed (caller frees). */
static char *read_back(FILE *f) {
  size_t len = (size_t)ftell(f);
  char *text = calloc(1, len + 1);
  assert_non_null(text);
  rewind(f);
  assert_int_equal(fread(text, 1, len, f), len);
  fclose(f);
  return text;
}

/* Load name and return what was logged (caller frees). */
static char *load_logging(const char *name) {
  struct kcm_client_config cfg;
  char *errmsg = NULL;
  FILE *log = tmpfile();
  assert_non_null(log);
  kcm_log_set_output(log);
  assert_int_equal(load(&cfg, path_of(name), NULL, NULL, &errmsg), 0);
  kcm_log_set_output(NULL);
  kcm_client_config_release(&cfg);
  return read_back(log);
}

static void shared_credential_files_are_warned_of(void **state) {
  char kc[1024], *logged;
  write_file("shared.key", "-----BEGIN PRIVATE KEY-----\nQQ==\n-----END PRIVATE KEY-----\n");
  write_file("shared.crt", "-----BEGIN CERTIFICATE-----\nQQ==\n-----END CERTIFICATE-----\n");
  write_file("shared.token", "abc\n");
  snprintf(kc, sizeof(kc),
           "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
           "clusters: [{name: c, cluster: {server: 'https://a'}}]\n"
           "users: [{name: u, user: {client-certificate: shared.crt, client-key: shared.key, "
           "tokenFile: shared.token}}]\n");
  write_file("shared-config", kc);
  assert_int_equal(chmod(path_of("shared-config"), 0644), 0);
  assert_int_equal(chmod(path_of("shared.key"), 0640), 0);
  assert_int_equal(chmod(path_of("shared.token"), 0606), 0);
  assert_int_equal(chmod(path_of("shared.crt"), 0644), 0);
  logged = load_logging("shared-config");
  assert_non_null(strstr(logged, "kubeconfig can be read or written by other users"));
  assert_non_null(strstr(logged, "shared-config\" mode=\"0644\""));
  assert_non_null(strstr(logged, "client key can be read"));
  assert_non_null(strstr(logged, "shared.key\" mode=\"0640\""));
  assert_non_null(strstr(logged, "token file can be read"));
  assert_non_null(strstr(logged, "shared.token\" mode=\"0606\""));
  assert_null(strstr(logged, "shared.crt")); /* a certificate is public */
  free(logged);
  /* The owner's alone: nothing to say. */
  assert_int_equal(chmod(path_of("shared-config"), 0600), 0);
  assert_int_equal(chmod(path_of("shared.key"), 0400), 0);
  assert_int_equal(chmod(path_of("shared.token"), 0600), 0);
  logged = load_logging("shared-config");
  assert_string_equal(logged, "");
  free(logged);
}

static void missing_file_and_no_config(void **state) {
  struct kcm_client_config cfg;
  char *err = NULL;
  assert_int_equal(load(&cfg, path_of("does-not-exist"), NULL, NULL, &err), KCM_EIO);
  assert_non_null(strstr(err, "does-not-exist"));
  free(err);
  err = NULL;
  assert_int_equal(load(&cfg, NULL, NULL, NULL, &err), KCM_EINVAL);
  assert_non_null(strstr(err, "no kubeconfig"));
  free(err);
}

static void base64_decoding(void **state) {
  char *out;
  size_t n;
  assert_int_equal(kcm_client_base64_decode("aGVs\nbG8=", 9, &out, &n), 0);
  assert_int_equal(n, 5);
  assert_string_equal(out, "hello");
  free(out);
  assert_int_equal(kcm_client_base64_decode("a*==", 4, &out, &n), KCM_EINVAL);
  assert_int_equal(kcm_client_base64_decode("QQ=A", 4, &out, &n), KCM_EINVAL);
}

/* --- text from and to the network --------------------------------------------- */

static uint32_t retry_after_of(const char *v, bool *ok) {
  uint32_t s = 12345;
  *ok = kcm_client_retry_after(v, strlen(v), &s);
  return s;
}

static void retry_after_values(void **state) {
  static const char *const refused[] = {"", "  ", "nan", "inf", "1e3", "1.0", "-1", "+1",
                                        "0x1", "1 2", "1s", "Wed, 21 Oct 2015 07:28:00 GMT",
                                        "\x01", "\xff"};
  size_t i;
  bool ok;
  assert_int_equal(retry_after_of("0", &ok), 0);
  assert_true(ok);
  assert_int_equal(retry_after_of(" 7\t", &ok), 7);
  assert_true(ok);
  assert_int_equal(retry_after_of("60", &ok), 60);
  assert_int_equal(retry_after_of("61", &ok), KCM_CLIENT_RETRY_AFTER_MAX);
  assert_int_equal(retry_after_of("4294967296", &ok), KCM_CLIENT_RETRY_AFTER_MAX);
  assert_int_equal(retry_after_of("00000000000000000000000000001", &ok), 1);
  assert_int_equal(retry_after_of("99999999999999999999999999999", &ok),
                   KCM_CLIENT_RETRY_AFTER_MAX);
  assert_true(ok);
  for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
    retry_after_of(refused[i], &ok);
    if (ok)
      fail_msg("Retry-After \"%s\" taken", refused[i]);
  }
}

static void header_lines(void **state) {
  const char *v;
  size_t n;
  assert_true(kcm_client_header_value("retry-AFTER:  3 \r\n", 18, "Retry-After", &v, &n));
  assert_int_equal(n, 1);
  assert_memory_equal(v, "3", 1);
  assert_true(kcm_client_header_value("Retry-After:\r\n", 14, "Retry-After", &v, &n));
  assert_int_equal(n, 0);
  assert_false(kcm_client_header_value("Retry-After-X: 3\r\n", 18, "Retry-After", &v, &n));
  assert_false(kcm_client_header_value("Retry-After", 11, "Retry-After", &v, &n));
  assert_false(kcm_client_header_value("HTTP/1.1 429 x\r\n", 16, "Retry-After", &v, &n));
}

/* Paths as client-go builds them: names percent-encoded; names a URL parser
 * or the server would read as other segments refused with a reason; a path
 * that does not fit refused rather than cut. */
static void resource_paths(void **state) {
  char path[KCM_CLIENT_PATH_MAX], small[128], name[254];
  const char *bad[] = {".", "..", "a/b", "a%2Fb", "/", "%"};
  size_t i;
  assert_int_equal(kcm_client_path(path, sizeof(path), "/api/v1", "n s", "pods", "a?b#c d", NULL),
                   0);
  assert_string_equal(path, "/api/v1/namespaces/n%20s/pods/a%3Fb%23c%20d");
  assert_int_equal(kcm_client_path(path, sizeof(path), "/apis/apps/v1", "ns", "replicasets", "rs",
                                   "status"),
                   0);
  assert_string_equal(path, "/apis/apps/v1/namespaces/ns/replicasets/rs/status");
  assert_int_equal(kcm_client_path(path, sizeof(path), "/api/v1", NULL, "pods", NULL, NULL), 0);
  assert_string_equal(path, "/api/v1/pods");
  assert_int_equal(kcm_client_path(path, sizeof(path), "/api/v1", "", "pods", "..a", NULL), 0);
  assert_string_equal(path, "/api/v1/pods/..a");
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    assert_int_equal(kcm_client_path(path, sizeof(path), "/api/v1", "ns", "pods", bad[i], NULL),
                     KCM_EINVAL);
    assert_non_null(strstr(path, "invalid resource name"));
    assert_int_equal(kcm_client_path(path, sizeof(path), "/api/v1", bad[i], "pods", "p", NULL),
                     KCM_EINVAL);
    assert_non_null(strstr(path, "invalid namespace"));
  }
  assert_int_equal(kcm_client_path(path, sizeof(path), "/api/v1", "ns", "pods", "", NULL),
                   KCM_EINVAL);
  assert_string_equal(path, "invalid resource name \"\": may not be empty");
  /* The longest names, every byte encoded, fit; a path that does not is refused. */
  memset(name, ' ', sizeof(name) - 1);
  name[sizeof(name) - 1] = '\0';
  assert_int_equal(kcm_client_path(path, sizeof(path), "/apis/coordination.k8s.io/v1",
                                   name + 253 - 63, "replicasets", name, "status"),
                   0);
  assert_int_equal(strlen(path), 28 + 12 + 3 * 63 + 13 + 3 * 253 + 7);
  assert_int_equal(kcm_client_path(small, sizeof(small), "/api/v1", "ns", "pods", name, NULL),
                   KCM_ETOOBIG);
  assert_non_null(strstr(small, "too long"));
  assert_int_equal(kcm_client_path(small, sizeof(small), "/api/v1", "ns", "pods", "p", NULL), 0);
  assert_string_equal(small, "/api/v1/namespaces/ns/pods/p");
}

static void url_text(void **state) {
  static const char token[] = "a&b=c+d/e f%g?h#i\xc3\xa9~._-Z9";
  struct kcm_buf b = KCM_BUF_INIT(1024);
  char *back, *r;
  size_t start, end;
  assert_int_equal(kcm_client_escape(&b, token, strlen(token)), 0);
  assert_string_equal(b.data, "a%26b%3Dc%2Bd%2Fe%20f%25g%3Fh%23i%C3%A9~._-Z9");
  back = kcm_client_unescape(b.data, b.len);
  assert_string_equal(back, token);
  free(back);
  assert_null(kcm_client_unescape("a%2", 3));
  assert_null(kcm_client_unescape("a%zz", 4));
  kcm_buf_release(&b);

  assert_true(kcm_client_url_userinfo("https://u:p@w@h:1/x@y", &start, &end));
  assert_int_equal(start, 8);
  assert_int_equal(end, 14);
  assert_false(kcm_client_url_userinfo("https://h:1/x@y", &start, &end));
  assert_false(kcm_client_url_userinfo("h@x", &start, &end));
  assert_true(kcm_client_url_host_empty("https://b.example@"));
  assert_true(kcm_client_url_host_empty("https://u:p@:443/x"));
  assert_true(kcm_client_url_host_empty("https://?q"));
  assert_true(kcm_client_url_host_empty("https://[]:1"));
  assert_false(kcm_client_url_host_empty("https://u@h"));
  assert_false(kcm_client_url_host_empty("https://[::1]"));
  assert_false(kcm_client_url_host_empty("https://h/x@"));
  assert_false(kcm_client_url_host_empty("no-scheme"));
  r = kcm_client_redact_url("https://admin:s3cret@h:6443/api?x=a@b");
  assert_string_equal(r, "https://h:6443/api?x=a@b");
  free(r);
  r = kcm_client_redact_url("http://h");
  assert_string_equal(r, "http://h");
  free(r);
}

/* --- HTTP against the local API server -------------------------------------- */

static pid_t sim_pid;
static char simdir[300];

static int start_sim(void **state) {
  int fds[2];
  char line[256] = {0};
  FILE *out;

  setup_dir(state);
  snprintf(simdir, sizeof(simdir), "%s/sim", tmpdir);
  assert_int_equal(pipe(fds), 0);
  sim_pid = fork();
  assert_true(sim_pid >= 0);
  if (sim_pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    execlp("python3", "python3", KCM_TEST_SIM, "--dir", simdir, "--bookmark-interval", "1",
           (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  out = fdopen(fds[0], "r");
  if (!fgets(line, sizeof(line), out) || strncmp(line, "READY ", 6) != 0) {
    fprintf(stderr, "local API server did not start: %s\n", line);
    return -1;
  }
  fclose(out);
  return 0;
}

static int stop_sim(void **state) {
  int status;
  kill(sim_pid, SIGTERM);
  waitpid(sim_pid, &status, 0);
  return teardown_dir(state);
}

struct result {
  bool done;
  int err;
  long status;
  uint64_t retries;
  uint64_t elapsed_ms;
  double retry_after;
  bool unanswered;
  char body[4096];
  char message[512];
  size_t streamed;
};

static void on_done(const struct kcm_client_response *resp, void *data) {
  struct result *r = data;
  r->done = true;
  r->err = resp->err;
  r->status = resp->status;
  r->retry_after = resp->retry_after;
  r->unanswered = resp->unanswered;
  snprintf(r->body, sizeof(r->body), "%s", resp->body);
  snprintf(r->message, sizeof(r->message), "%s", resp->message);
}

static void run_until_done(uv_loop_t *loop, struct result *r) { support_wait(loop, &r->done); }

static void close_client(uv_loop_t *loop, struct kcm_client *c) {
  kcm_client_close(c);
  uv_run(loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(loop), 0);
}

/* Send a request on c and run the loop until it completes. */
static void send_on(uv_loop_t *loop, struct kcm_client *c, const char *method, const char *path,
                    const char *body, size_t max_body, struct result *r) {
  struct kcm_client_request_options o = {0};
  memset(r, 0, sizeof(*r));
  o.method = method;
  o.path = path;
  o.body = body;
  o.body_len = body ? strlen(body) : 0;
  o.timeout_ms = 10000;
  o.max_body = max_body;
  o.done = on_done;
  o.data = r;
  assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  run_until_done(loop, r);
}

static void request(const char *kubeconfig, const char *method, const char *path, const char *body,
                    size_t max_body, struct result *r) {
  struct kcm_client_config cfg;
  struct kcm_client *c;
  char *err = NULL;
  uv_loop_t loop;
  uint64_t started;

  assert_int_equal(load(&cfg, kubeconfig, NULL, NULL, &err), 0);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  uv_update_time(&loop);
  started = uv_now(&loop);
  send_on(&loop, c, method, path, body, max_body, r);
  r->elapsed_ms = uv_now(&loop) - started;
  r->retries = kcm_client_stats(c)->retries;
  close_client(&loop, c);
  kcm_client_config_release(&cfg);
}

static char *sim_file(const char *name) {
  static char path[600];
  snprintf(path, sizeof(path), "%s/%s", simdir, name);
  return path;
}

static void token_request_succeeds(void **state) {
  struct result r;
  request(sim_file("kubeconfig"), "GET", "/version", NULL, 0, &r);
  assert_int_equal(r.err, 0);
  assert_int_equal(r.status, 200);
  assert_non_null(strstr(r.body, "\"gitVersion\""));
}

/* As kube-controller-manager, kcm does not ask for compressed answers. */
static void compression_is_not_requested(void **state) {
  struct result r;
  request(sim_file("kubeconfig"), "GET", "/api/v1/namespaces/default", NULL, 0, &r);
  assert_int_equal(r.err, 0);
  request(sim_file("kubeconfig"), "GET", "/_sim/requests?since=0", NULL, 0, &r);
  assert_int_equal(r.err, 0);
  assert_non_null(strstr(r.body, "\"path\":\"/api/v1/namespaces/default\""));
  assert_non_null(strstr(r.body, "\"acceptEncoding\":\"\""));
  assert_null(strstr(r.body, "gzip"));
}

static void client_certificate_authenticates(void **state) {
  struct result r;
  request(sim_file("kubeconfig-cert"), "GET", "/api/v1/namespaces/default", NULL, 0, &r);
  assert_int_equal(r.err, 0);
  assert_non_null(strstr(r.body, "\"name\":\"default\""));
}

static void status_codes_map_to_errors(void **state) {
  struct result r;
  request(sim_file("kubeconfig"), "GET", "/api/v1/namespaces/nope", NULL, 0, &r);
  assert_int_equal(r.err, KCM_ENOTFOUND);
  assert_int_equal(r.status, 404);
  assert_string_equal(r.message, "namespaces \"nope\" not found");
  request(sim_file("kubeconfig"), "POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"a\"}}",
          0, &r);
  assert_int_equal(r.err, 0);
  assert_int_equal(r.status, 201);
  request(sim_file("kubeconfig"), "POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"a\"}}",
          0, &r);
  assert_int_equal(r.err, KCM_ECONFLICT);
  request(sim_file("kubeconfig"), "POST", "/api/v1/namespaces", "{bad json", 0, &r);
  assert_int_equal(r.err, KCM_EINVALID);
  assert_int_equal(r.status, 400);
}

/* The server's kubeconfig with a token it refuses, written as name. */
static void write_refused_token_config(const char *name) {
  char cfg[4096];
  FILE *f = fopen(sim_file("kubeconfig"), "r");
  size_t n = fread(cfg, 1, sizeof(cfg) - 1, f);
  char *tok;
  fclose(f);
  cfg[n] = '\0';
  tok = strstr(cfg, "token: ");
  assert_non_null(tok);
  strcpy(tok, "token: wrong\n");
  write_file(name, cfg);
}

static void wrong_token_is_refused(void **state) {
  struct result r;
  write_refused_token_config("wrong-token");
  request(path_of("wrong-token"), "GET", "/api/v1/namespaces", NULL, 0, &r);
  assert_int_equal(r.err, KCM_EUNAUTHORIZED);
  assert_int_equal(r.status, 401);
  assert_string_equal(r.message, "Unauthorized");
}

static void set_faults(const char *json) {
  struct result r;
  request(sim_file("kubeconfig"), "POST", "/_sim/faults", json, 0, &r);
  assert_int_equal(r.err, 0);
}

static bool something_logged(void *arg) { return ftell((FILE *)arg) > 0; }

/* What the first contact with the server (kcm_client_reach) logs of its
 * first answer, with the settings of kubeconfig (caller frees). */
static char *first_contact_logged(const char *kubeconfig) {
  struct kcm_client_config cfg;
  struct kcm_client_reach reach;
  struct kcm_client *c;
  uv_loop_t loop;
  char *err = NULL;
  FILE *log = tmpfile();
  assert_non_null(log);
  assert_int_equal(load(&cfg, kubeconfig, NULL, NULL, &err), 0);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  kcm_log_set_output(log);
  kcm_client_reach_start(&reach, &loop, c, cfg.server);
  assert_true(support_run_until(&loop, something_logged, log, 10000));
  kcm_log_set_output(NULL);
  kcm_client_reach_stop(&reach);
  close_client(&loop, c);
  kcm_client_config_release(&cfg);
  return read_back(log);
}

/* A 401 reached the server: its credentials were refused, which is said,
 * with where to look; it is neither "forbidden" nor "cannot reach". */
static void refused_credentials_are_named_unauthorized(void **state) {
  char *logged;
  write_refused_token_config("refused-token");
  logged = first_contact_logged(path_of("refused-token"));
  if (!contains(logged, "] unauthorized: the API server refused kcm's credentials") ||
      !contains(logged, "the token or client certificate in the kubeconfig") ||
      !contains(logged, "service account token") || !contains(logged, " status=401 ") ||
      contains(logged, "cannot reach") || contains(logged, "forbidden"))
    fail_msg("%s", logged);
  free(logged);
}

/* A 403: authenticated, but authorization refuses; the verb and what was
 * asked for are named, with the server's message. */
static void refused_access_is_named_forbidden(void **state) {
  char *logged;
  set_faults("{\"rules\":[{\"path\":\"/version\",\"code\":403,\"count\":1,\"message\":"
             "\"forbidden: User \\\"kcm\\\" cannot get path \\\"/version\\\"\"}]}");
  logged = first_contact_logged(sim_file("kubeconfig"));
  set_faults("{\"clear\":true}");
  if (!contains(logged, "] forbidden: the API server authenticated kcm but refuses the request") ||
      !contains(logged, "ClusterRole") || !contains(logged, " status=403 ") ||
      !contains(logged, " verb=\"get\" path=\"/version\" ") ||
      !contains(logged, "err=\"forbidden: User \\\"kcm\\\" cannot get path") ||
      contains(logged, "cannot reach") || contains(logged, "nauthorized"))
    fail_msg("%s", logged);
  free(logged);
}

static void untrusted_server_certificate_is_refused(void **state) {
  struct result r;
  char cfg[8192], *ca;
  FILE *f = fopen(sim_file("kubeconfig-cert"), "r");
  size_t n = fread(cfg, 1, sizeof(cfg) - 1, f);
  fclose(f);
  cfg[n] = '\0';
  /* Trust the client certificate instead of the CA that signed the server's. */
  ca = strstr(cfg, "certificate-authority-data: ");
  assert_non_null(ca);
  {
    char *cert = strstr(cfg, "client-certificate-data: ");
    char *end = strchr(cert, '\n');
    char line[8192];
    char rest[8192];
    char *ca_end = strchr(ca, '\n');
    snprintf(line, sizeof(line), "certificate-authority-data: %.*s",
             (int)(end - cert - 25), cert + 25);
    snprintf(rest, sizeof(rest), "%s", ca_end);
    snprintf(ca, sizeof(cfg) - (size_t)(ca - cfg), "%s%s", line, rest);
  }
  write_file("wrong-ca", cfg);
  request(path_of("wrong-ca"), "GET", "/version", NULL, 0, &r);
  assert_int_equal(r.err, KCM_ENETWORK);
  assert_int_equal(r.status, 0);
  assert_true(strlen(r.message) > 0);
}

static void body_over_limit_is_refused(void **state) {
  struct result r;
  request(sim_file("kubeconfig"), "GET", "/api/v1/namespaces", NULL, 64, &r);
  assert_int_equal(r.err, KCM_ETOOBIG);
}

/* A server URL on loopback where nothing listens: a port just freed. */
static void closed_port(char *master, size_t len) {
  struct sockaddr_in a = {0};
  socklen_t alen = sizeof(a);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
  close(fd);
  snprintf(master, len, "https://127.0.0.1:%d", ntohs(a.sin_port));
}

/* A request whose connection broke after it was sent may have been carried
 * out; one that never reached the server was not. */
static void unanswered_requests_are_told_apart(void **state) {
  struct kcm_client_config cfg;
  struct kcm_client *c;
  struct result r;
  char *err = NULL, master[64];
  uv_loop_t loop;

  set_faults("{\"rules\":[{\"verb\":\"create\",\"resource\":\"events\","
             "\"close\":true,\"count\":1}]}");
  request(sim_file("kubeconfig"), "POST", "/api/v1/namespaces/default/events",
          "{\"metadata\":{\"name\":\"unanswered\"}}", 0, &r);
  assert_int_equal(r.err, KCM_ENETWORK);
  assert_int_equal(r.status, 0);
  assert_true(r.unanswered);
  set_faults("{\"clear\":true}");
  /* A refusal is an answer. */
  request(sim_file("kubeconfig"), "POST", "/api/v1/namespaces/default/events", "{", 0, &r);
  assert_int_equal(r.status, 400);
  assert_false(r.unanswered);

  closed_port(master, sizeof(master));
  assert_int_equal(load(&cfg, sim_file("kubeconfig"), NULL, master, &err), 0);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  send_on(&loop, c, "POST", "/api/v1/namespaces/default/events", "{}", 0, &r);
  assert_int_equal(r.err, KCM_ENETWORK);
  assert_false(r.unanswered);
  close_client(&loop, c);
  kcm_client_config_release(&cfg);
}

/* A repeatable request whose attempt was carried out but got no answer is
 * sent again, and its answer tells that the first did the work. */
static void unanswered_repeatable_requests_are_sent_again(void **state) {
  struct kcm_client_config cfg;
  struct kcm_client_request_options o = {0};
  struct kcm_client *c;
  struct result r = {0};
  char *err = NULL, master[64];
  uv_loop_t loop;

  assert_int_equal(load(&cfg, sim_file("kubeconfig"), NULL, NULL, &err), 0);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  set_faults("{\"rules\":[{\"verb\":\"create\",\"resource\":\"namespaces\","
             "\"closeAfter\":true,\"count\":1}]}");
  o.method = "POST";
  o.path = "/api/v1/namespaces";
  o.body = "{\"metadata\":{\"name\":\"sent-again\"}}";
  o.body_len = strlen(o.body);
  o.timeout_ms = 10000;
  o.done = on_done;
  o.data = &r;
  o.repeatable = true;
  assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  run_until_done(&loop, &r);
  set_faults("{\"clear\":true}");
  assert_int_equal(r.status, 409);
  assert_int_equal(r.err, KCM_ECONFLICT);
  assert_false(r.unanswered);
  assert_int_equal(kcm_client_stats(c)->retries, 1);
  close_client(&loop, c);
  kcm_client_config_release(&cfg);

  /* Not repeatable, on a new connection: the loss is reported, though the
   * server did the work. */
  set_faults("{\"rules\":[{\"verb\":\"create\",\"resource\":\"namespaces\","
             "\"closeAfter\":true,\"count\":1}]}");
  request(sim_file("kubeconfig"), "POST", "/api/v1/namespaces",
          "{\"metadata\":{\"name\":\"sent-once\"}}", 0, &r);
  set_faults("{\"clear\":true}");
  assert_int_equal(r.err, KCM_ENETWORK);
  assert_true(r.unanswered);
  assert_int_equal(r.retries, 0);
  request(sim_file("kubeconfig"), "GET", "/api/v1/namespaces/sent-once", NULL, 0, &r);
  assert_int_equal(r.status, 200);

  /* A refused connection may follow an attempt that went out (curl sends
   * again on a new connection): tried again while the time limit allows,
   * 1 s later, and not 2 s after that. */
  closed_port(master, sizeof(master));
  assert_int_equal(load(&cfg, sim_file("kubeconfig"), NULL, master, &err), 0);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  memset(&r, 0, sizeof(r));
  o.timeout_ms = 2500;
  assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  run_until_done(&loop, &r);
  assert_int_equal(r.err, KCM_ENETWORK);
  assert_false(r.unanswered);
  assert_int_equal(kcm_client_stats(c)->retries, 1);
  assert_int_equal(kcm_client_stats(c)->requests, 2);
  close_client(&loop, c);
  kcm_client_config_release(&cfg);
}

static void throttling_is_retried_as_the_server_asks(void **state) {
  struct result r;
  /* Retried after the Retry-After pause, then it succeeds. */
  set_faults("{\"rules\":[{\"verb\":\"list\",\"resource\":\"nodes\",\"code\":429,"
             "\"retryAfter\":1,\"count\":1}]}");
  request(sim_file("kubeconfig"), "GET", "/api/v1/nodes", NULL, 0, &r);
  assert_int_equal(r.err, 0);
  assert_int_equal(r.retries, 1);
  assert_true(r.elapsed_ms >= 1000);
  /* 5xx with Retry-After is retried too; without it, it is not. */
  set_faults("{\"rules\":[{\"verb\":\"list\",\"resource\":\"nodes\",\"code\":503,"
             "\"retryAfter\":0,\"count\":2}]}");
  request(sim_file("kubeconfig"), "GET", "/api/v1/nodes", NULL, 0, &r);
  assert_int_equal(r.err, 0);
  assert_int_equal(r.retries, 2);
  set_faults("{\"rules\":[{\"verb\":\"list\",\"resource\":\"nodes\",\"code\":500,"
             "\"count\":1}]}");
  request(sim_file("kubeconfig"), "GET", "/api/v1/nodes", NULL, 0, &r);
  assert_int_equal(r.err, KCM_ESERVER);
  assert_int_equal(r.retries, 0);
  /* It gives up after ten retries and reports the last answer. */
  set_faults("{\"rules\":[{\"verb\":\"list\",\"resource\":\"nodes\",\"code\":429,"
             "\"retryAfter\":0}]}");
  request(sim_file("kubeconfig"), "GET", "/api/v1/nodes", NULL, 0, &r);
  assert_int_equal(r.err, KCM_ETHROTTLED);
  assert_int_equal(r.status, 429);
  assert_int_equal(r.retries, 10);
  assert_true(r.retry_after == 0);
  set_faults("{\"clear\":true}");
}

/* The client's metrics page, which must parse; the caller frees it. */
static char *metrics_page(struct kcm_client *c) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 20);
  char *page;
  const char *why;
  kcm_client_metrics(c, &b);
  page = kcm_buf_take(&b);
  assert_non_null(page);
  if ((why = expo_check(page)))
    fail_msg("%s in:\n%s", why, page);
  return page;
}

/* The host label of a client of cfg: the server's host and port. */
static const char *host_of(const struct kcm_client_config *cfg) {
  return strstr(cfg->server, "://") + 3;
}

/* The value of the series printf formats, NAN when the page has none. */
__attribute__((format(printf, 2, 3))) static double metric(const char *page, const char *fmt, ...) {
  char series[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(series, sizeof(series), fmt, ap);
  va_end(ap);
  return expo_value(page, series);
}

/* rest_client_requests_total and rest_client_request_retries_total of one
 * status and method. */
static double requests(const char *page, const char *host, const char *code, const char *method) {
  return metric(page, "rest_client_requests_total{code=\"%s\",host=\"%s\",method=\"%s\"}", code,
                host, method);
}

static double retries(const char *page, const char *host, const char *code, const char *verb) {
  return metric(page, "rest_client_request_retries_total{code=\"%s\",host=\"%s\",verb=\"%s\"}",
                code, host, verb);
}

/* A series of a histogram family by verb, e.g. "request_duration_seconds_count". */
static double by_verb(const char *page, const char *series, const char *host, const char *verb) {
  return metric(page, "rest_client_%s{host=\"%s\",verb=\"%s\"}", series, host, verb);
}

static void rate_limit_spaces_requests(void **state) {
  struct kcm_client_config cfg;
  struct kcm_client *c;
  char *err = NULL;
  uv_loop_t loop;
  struct result rs[8];
  struct kcm_client_request_options o = {0};
  uint64_t started;
  int i, done;

  assert_int_equal(load(&cfg, sim_file("kubeconfig"), NULL, NULL, &err), 0);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  kcm_client_set_rate_limit(c, 10, 2); /* 2 at once, then one every 100 ms */
  o.method = "GET";
  o.path = "/version";
  o.done = on_done;
  memset(rs, 0, sizeof(rs));
  uv_update_time(&loop);
  started = uv_now(&loop);
  for (i = 0; i < 8; i++) {
    o.data = &rs[i];
    assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  }
  do {
    support_run_once(&loop);
    for (done = 0, i = 0; i < 8; i++)
      done += rs[i].done;
  } while (done < 8);
  for (i = 0; i < 8; i++)
    assert_int_equal(rs[i].err, 0);
  /* Six waited for tokens: at least 600 ms in all. */
  assert_true(uv_now(&loop) - started >= 600);
  assert_true(kcm_client_stats(c)->throttled_ms >= 100 + 200 + 300 + 400 + 500 + 600);
  /* The rate limiter histogram holds each wait: 0, 0, 0.1, 0.2, ... 0.6 s. */
  {
    static const struct {
      const char *le;
      double n;
    } buckets[] = {{"0.005", 2}, {"0.025", 2}, {"0.1", 3}, {"0.25", 4},
                   {"0.5", 7},   {"1", 8},     {"+Inf", 8}};
    const char *host = host_of(&cfg);
    char *page = metrics_page(c);
    for (i = 0; i < (int)(sizeof(buckets) / sizeof(buckets[0])); i++)
      if (metric(page,
                 "rest_client_rate_limiter_duration_seconds_bucket{host=\"%s\",verb=\"GET\","
                 "le=\"%s\"}",
                 host, buckets[i].le) != buckets[i].n)
        fail_msg("le=%s is not %g in:\n%s", buckets[i].le, buckets[i].n, page);
    assert_true(fabs(by_verb(page, "rate_limiter_duration_seconds_sum", host, "GET") - 2.1) < 1e-9);
    assert_true(by_verb(page, "request_duration_seconds_count", host, "GET") == 8);
    assert_true(requests(page, host, "200", "GET") == 8);
    free(page);
  }
  close_client(&loop, c);
  kcm_client_config_release(&cfg);
}

/* Every limiter has its own tokens: one that is spent does not hold back
 * requests drawing from another. */
static void limiters_are_independent(void **state) {
  struct kcm_client_config cfg;
  struct kcm_client *c;
  char *err = NULL;
  uv_loop_t loop;
  struct result first, held, other;
  struct kcm_client_request_options o = {0};
  uint64_t started, other_at = 0;

  assert_int_equal(load(&cfg, sim_file("kubeconfig"), NULL, NULL, &err), 0);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  kcm_client_set_rate_limit(c, 1, 1); /* one token, then one a second */
  o.method = "GET";
  o.path = "/version";
  o.done = on_done;
  memset(&first, 0, sizeof(first));
  memset(&held, 0, sizeof(held));
  memset(&other, 0, sizeof(other));
  uv_update_time(&loop);
  started = uv_now(&loop);
  o.data = &first;
  assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  o.data = &held;
  assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  o.data = &other;
  o.limiter = KCM_CLIENT_LIMITERS - 1;
  assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  o.limiter = KCM_CLIENT_LIMITERS;
  assert_int_equal(kcm_client_request(c, &o, NULL), KCM_EINVAL);
  while (!first.done || !held.done || !other.done) {
    support_run_once(&loop);
    if (other.done && !other_at)
      other_at = uv_now(&loop);
  }
  assert_int_equal(first.err + held.err + other.err, 0);
  assert_true(held.done && uv_now(&loop) - started >= 900);
  assert_true(other_at - started < 900);
  assert_true(kcm_client_stats(c)->throttled_ms >= 900);
  assert_true(kcm_client_stats(c)->throttled_ms < 1900);
  close_client(&loop, c);
  kcm_client_config_release(&cfg);
}

/* Attempts are counted by status and method, retries apart, and a request
 * that got no answer as "<error>". */
static void requests_are_counted_by_code_and_method(void **state) {
  struct kcm_client_config cfg;
  struct kcm_client *c;
  char *err = NULL, *page;
  const char *host;
  uv_loop_t loop;
  struct result r;

  assert_int_equal(load(&cfg, sim_file("kubeconfig"), NULL, NULL, &err), 0);
  host = host_of(&cfg);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  page = metrics_page(c);
  assert_string_equal(page, ""); /* nothing sent, no family */
  free(page);
  send_on(&loop, c, "GET", "/version", NULL, 0, &r);
  send_on(&loop, c, "GET", "/version", NULL, 0, &r);
  send_on(&loop, c, "GET", "/api/v1/namespaces/nope", NULL, 0, &r);
  assert_int_equal(r.status, 404);
  send_on(&loop, c, "POST", "/api/v1/namespaces", "{\"metadata\":{\"name\":\"counted\"}}", 0, &r);
  assert_int_equal(r.status, 201);
  send_on(&loop, c, "POST", "/api/v1/namespaces", "{bad json", 0, &r);
  assert_int_equal(r.status, 400);
  set_faults("{\"rules\":[{\"verb\":\"list\",\"resource\":\"nodes\",\"code\":429,"
             "\"retryAfter\":0,\"count\":2}]}");
  send_on(&loop, c, "GET", "/api/v1/nodes", NULL, 0, &r);
  set_faults("{\"clear\":true}");
  assert_int_equal(r.status, 200);

  page = metrics_page(c);
  assert_true(requests(page, host, "200", "GET") == 3);
  assert_true(requests(page, host, "404", "GET") == 1);
  assert_true(requests(page, host, "429", "GET") == 2);
  assert_true(requests(page, host, "201", "POST") == 1);
  assert_true(requests(page, host, "400", "POST") == 1);
  /* The two attempts after the first 429: one more 429, then the 200. */
  assert_true(retries(page, host, "429", "GET") == 1);
  assert_true(retries(page, host, "200", "GET") == 1);
  assert_true(isnan(retries(page, host, "201", "POST")));
  /* One observation per request, however many attempts it took. */
  assert_true(by_verb(page, "request_duration_seconds_count", host, "GET") == 4);
  assert_true(by_verb(page, "request_duration_seconds_count", host, "POST") == 2);
  assert_true(metric(page,
                     "rest_client_rate_limiter_duration_seconds_bucket{host=\"%s\",verb=\"POST\","
                     "le=\"0.005\"}",
                     host) == 2);
  assert_int_equal(expo_lines(page, "# TYPE "), 4);
  free(page);
  close_client(&loop, c);

  /* Nothing listens on port 1: no answer. */
  free(cfg.server);
  cfg.server = strdup("https://127.0.0.1:1");
  host = host_of(&cfg);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  send_on(&loop, c, "DELETE", "/api/v1/namespaces/counted", NULL, 0, &r);
  assert_int_equal(r.err, KCM_ENETWORK);
  page = metrics_page(c);
  assert_true(requests(page, host, "<error>", "DELETE") == 1);
  assert_non_null(strstr(page, "host=\"127.0.0.1:1\""));
  free(page);
  close_client(&loop, c);
  kcm_client_config_release(&cfg);
}

/* --- exec plugins and token files ------------------------------------------------ */

/* The server and CA lines of the local API server's kubeconfig. */
static void sim_cluster(char *server, size_t slen, char *ca, size_t clen) {
  char text[8192], *p;
  FILE *f = fopen(sim_file("kubeconfig"), "r");
  size_t n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = '\0';
  p = strstr(text, "server: ");
  assert_non_null(p);
  snprintf(server, slen, "%.*s", (int)strcspn(p + 8, "\n"), p + 8);
  p = strstr(text, "certificate-authority-data: ");
  assert_non_null(p);
  snprintf(ca, clen, "%.*s", (int)strcspn(p + 28, "\n"), p + 28);
}

static char *read_text(const char *path) {
  static char text[16384];
  FILE *f = fopen(path, "r");
  size_t n;
  assert_non_null(f);
  n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = '\0';
  while (n && text[n - 1] == '\n')
    text[--n] = '\0';
  return text;
}

/* Write a kubeconfig whose user is `user_yaml` (indented under `user:`). */
static void write_user_kubeconfig(const char *name, const char *user_yaml) {
  char server[256], ca[4096], text[16384];
  sim_cluster(server, sizeof(server), ca, sizeof(ca));
  snprintf(text, sizeof(text),
           "current-context: x\n"
           "clusters: [{name: c, cluster: {server: '%s', certificate-authority-data: %s}}]\n"
           "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
           "users:\n- name: u\n  user:\n%s",
           server, ca, user_yaml);
  write_file(name, text);
}

static void write_plugin(const char *name, const char *script) {
  write_file(name, script);
  chmod(path_of(name), 0755);
}

/* A request with a fresh client, counting plugin runs across two requests. */
static void two_requests(const char *kubeconfig, struct result *first, struct result *second,
                         uint64_t *runs) {
  struct kcm_client_config cfg;
  struct kcm_client *c;
  char *err = NULL;
  uv_loop_t loop;
  struct kcm_client_request_options o = {0};

  memset(first, 0, sizeof(*first));
  memset(second, 0, sizeof(*second));
  if (load(&cfg, kubeconfig, NULL, NULL, &err))
    fail_msg("%s", err);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  o.method = "GET";
  o.path = "/api/v1/namespaces/default";
  o.done = on_done;
  o.data = first;
  assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  run_until_done(&loop, first);
  if (second != first) {
    o.data = second;
    assert_int_equal(kcm_client_request(c, &o, NULL), 0);
    run_until_done(&loop, second);
  }
  *runs = kcm_client_stats(c)->exec_runs;
  close_client(&loop, c);
  kcm_client_config_release(&cfg);
}

static void exec_plugin_token_is_cached(void **state) {
  struct result a, b;
  uint64_t runs;
  char script[1024];
  snprintf(script, sizeof(script),
           "#!/bin/sh\n"
           "printf '%%s' \"$KUBERNETES_EXEC_INFO\" > \"$(dirname \"$0\")/exec-info\"\n"
           "echo \"$GREETING\" > \"$(dirname \"$0\")/exec-env\"\n"
           "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
           "\"status\":{\"token\":\"%s\",\"expirationTimestamp\":\"2999-01-01T00:00:00Z\"}}'\n",
           read_text(sim_file("token")));
  mkdir(path_of("bin"), 0700);
  write_plugin("bin/plugin", script);
  write_user_kubeconfig("exec-config",
                        "    exec:\n"
                        "      apiVersion: client.authentication.k8s.io/v1\n"
                        "      command: ./bin/plugin\n"
                        "      interactiveMode: Never\n"
                        "      provideClusterInfo: true\n"
                        "      env: [{name: GREETING, value: hello}]\n");
  two_requests(path_of("exec-config"), &a, &b, &runs);
  assert_int_equal(a.err, 0);
  assert_int_equal(b.err, 0);
  assert_int_equal(runs, 1); /* the credential was cached */
  assert_non_null(strstr(read_text(path_of("bin/exec-info")), "\"interactive\":false"));
  assert_non_null(strstr(read_text(path_of("bin/exec-info")), "\"kind\":\"ExecCredential\""));
  assert_non_null(strstr(read_text(path_of("bin/exec-info")), "\"server\":\"https://127.0.0.1:"));
  assert_string_equal(read_text(path_of("bin/exec-env")), "hello");
}

static void exec_plugin_rerun_when_expiring_or_refused(void **state) {
  struct result a, b;
  uint64_t runs;
  char script[1024];
  /* Credentials that expire at once are fetched for every request. */
  snprintf(script, sizeof(script),
           "#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\","
           "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\","
           "\"expirationTimestamp\":\"2000-01-01T00:00:00Z\"}}'\n",
           read_text(sim_file("token")));
  write_plugin("expiring", script);
  write_user_kubeconfig("expiring-config",
                        "    exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
                        "command: ./expiring}\n");
  two_requests(path_of("expiring-config"), &a, &b, &runs);
  assert_int_equal(a.err, 0);
  assert_int_equal(b.err, 0);
  assert_int_equal(runs, 2);
  /* A token the server refuses is fetched again after the 401. */
  write_file("current-token", "wrong");
  write_plugin("from-file", "#!/bin/sh\necho \"{\\\"apiVersion\\\":\\\"client.authentication."
                            "k8s.io/v1\\\",\\\"kind\\\":\\\"ExecCredential\\\",\\\"status\\\":"
                            "{\\\"token\\\":\\\"$(cat \"$(dirname \"$0\")/current-token\")\\\"}}\"\n");
  write_user_kubeconfig("refused-config",
                        "    exec: {apiVersion: client.authentication.k8s.io/v1, "
                        "command: ./from-file, interactiveMode: IfAvailable}\n");
  {
    struct kcm_client_config cfg;
    struct kcm_client *c;
    char *err = NULL;
    uv_loop_t loop;
    struct kcm_client_request_options o = {0};
    assert_int_equal(load(&cfg, path_of("refused-config"), NULL, NULL, &err), 0);
    uv_loop_init(&loop);
    assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
    o.method = "GET";
    o.path = "/api/v1/namespaces/default";
    o.done = on_done;
    o.data = &a;
    memset(&a, 0, sizeof(a));
    assert_int_equal(kcm_client_request(c, &o, NULL), 0);
    run_until_done(&loop, &a);
    assert_int_equal(a.status, 401);
    write_file("current-token", read_text(sim_file("token")));
    memset(&b, 0, sizeof(b));
    o.data = &b;
    assert_int_equal(kcm_client_request(c, &o, NULL), 0);
    run_until_done(&loop, &b);
    assert_int_equal(b.err, 0);
    assert_int_equal(kcm_client_stats(c)->exec_runs, 2);
    assert_int_equal(kcm_client_stats(c)->unauthorized, 1);
    close_client(&loop, c);
    kcm_client_config_release(&cfg);
  }
}

static void exec_plugin_client_certificate(void **state) {
  struct result a;
  uint64_t runs;
  char script[2048];
  /* sim_file returns one static buffer: build the second path separately. */
  {
    char crt[700], key[700];
    snprintf(crt, sizeof(crt), "%s", sim_file("client.crt"));
    snprintf(key, sizeof(key), "%s", sim_file("client.key"));
    snprintf(script, sizeof(script),
             "#!/bin/sh\npython3 -c 'import json,sys; print(json.dumps({\"apiVersion\": "
             "\"client.authentication.k8s.io/v1\", \"kind\": \"ExecCredential\", \"status\": "
             "{\"clientCertificateData\": open(sys.argv[1]).read(), \"clientKeyData\": "
             "open(sys.argv[2]).read()}}))' '%s' '%s'\n",
             crt, key);
  }
  write_plugin("cert-plugin", script);
  write_user_kubeconfig("cert-exec-config",
                        "    exec: {apiVersion: client.authentication.k8s.io/v1, "
                        "command: ./cert-plugin, interactiveMode: Never}\n");
  two_requests(path_of("cert-exec-config"), &a, &a, &runs);
  assert_int_equal(a.err, 0);
  assert_non_null(strstr(a.body, "\"name\":\"default\""));
}

/* The ExecCredential parser on its own: good answers, and bad ones that
 * must be refused with a reason and leave the earlier credentials. */
static void exec_credentials_are_parsed_strictly(void **state) {
  static const char v1[] = "client.authentication.k8s.io/v1";
  static const char *const bad[] = {
      "", "[]", "null", "{\"apiVersion\":null,\"status\":{\"token\":\"t\"}}",
      "{\"apiVersion\":5,\"status\":{\"token\":\"t\"}}",
      "{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"status\":{\"token\":\"t\"}}",
      "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":null}",
      "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"\"}}",
      "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"token\":7}}",
      "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"clientKeyData\":\"k\"}}",
      "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"t\","
      "\"clientCertificateData\":\"c\"}}",
      "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\"t\","
      "\"expirationTimestamp\":\"tomorrow\"}}",
  };
  struct kcm_client_creds k;
  size_t i;
  memset(&k, 0, sizeof(k));
  kcm_client_exec_parse(&k,
                        "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{"
                        "\"token\":\"abc\",\"expirationTimestamp\":\"2030-01-02T03:04:05Z\"}}",
                        v1, "plugin");
  assert_true(k.valid);
  assert_null(k.error);
  assert_string_equal(k.token, "abc");
  assert_int_equal(k.expires, 1893553445);
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    kcm_client_exec_parse(&k, bad[i], v1, "plugin");
    assert_non_null(k.error);
    assert_string_equal(k.token, "abc"); /* kept */
  }
  kcm_client_exec_parse(&k,
                        "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{"
                        "\"clientCertificateData\":\"C\",\"clientKeyData\":\"K\"}}",
                        v1, "plugin");
  assert_true(k.valid);
  assert_null(k.token);
  assert_string_equal(k.cert_pem, "C");
  assert_string_equal(k.key_pem, "K");
  /* An empty token beside a certificate is no token: the certificate
   * counts, the answer is good. */
  kcm_client_exec_parse(&k,
                        "{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{"
                        "\"token\":\"\",\"clientCertificateData\":\"C2\",\"clientKeyData\":\"K2\"}}",
                        v1, "plugin");
  assert_null(k.error);
  assert_true(k.valid);
  assert_null(k.token);
  assert_string_equal(k.cert_pem, "C2");
  kcm_client_exec_creds_clear(&k);
  assert_false(k.valid);
}

static void exec_plugin_failures_are_clear(void **state) {
  struct result a;
  uint64_t runs;
  write_plugin("failing", "#!/bin/sh\necho 'no session' >&2\nexit 3\n");
  write_user_kubeconfig("failing-config",
                        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                        "      command: ./failing\n      interactiveMode: Never\n"
                        "      installHint: install the cloud CLI\n");
  two_requests(path_of("failing-config"), &a, &a, &runs);
  assert_int_equal(a.err, KCM_EUNAUTHORIZED);
  assert_non_null(strstr(a.message, "exited with status 3"));
  assert_non_null(strstr(a.message, "install the cloud CLI"));
  write_plugin("garbage", "#!/bin/sh\necho 'Please log in at https://example.com'\n");
  write_user_kubeconfig("garbage-config",
                        "    exec: {apiVersion: client.authentication.k8s.io/v1, "
                        "command: ./garbage, interactiveMode: Never}\n");
  two_requests(path_of("garbage-config"), &a, &a, &runs);
  assert_int_equal(a.err, KCM_EUNAUTHORIZED);
  assert_non_null(strstr(a.message, "no ExecCredential JSON"));
  write_user_kubeconfig("missing-config",
                        "    exec: {apiVersion: client.authentication.k8s.io/v1, "
                        "command: ./no-such-plugin, interactiveMode: Never}\n");
  two_requests(path_of("missing-config"), &a, &a, &runs);
  assert_int_equal(a.err, KCM_EUNAUTHORIZED);
  assert_non_null(strstr(a.message, "no-such-plugin"));
  write_user_kubeconfig("interactive-config",
                        "    exec: {apiVersion: client.authentication.k8s.io/v1, "
                        "command: ./garbage, interactiveMode: Always}\n");
  two_requests(path_of("interactive-config"), &a, &a, &runs);
  assert_int_equal(a.err, KCM_EUNAUTHORIZED);
  assert_non_null(strstr(a.message, "interactive"));
}

static void token_file_reread_after_refusal(void **state) {
  struct kcm_client_config cfg;
  struct kcm_client *c;
  char *err = NULL, user[512];
  uv_loop_t loop;
  struct result a, b;
  struct kcm_client_request_options o = {0};

  write_file("rotating-token", "stale");
  snprintf(user, sizeof(user), "    tokenFile: rotating-token\n");
  write_user_kubeconfig("tokenfile-config", user);
  assert_int_equal(load(&cfg, path_of("tokenfile-config"), NULL, NULL, &err), 0);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  o.method = "GET";
  o.path = "/api/v1/namespaces/default";
  o.done = on_done;
  memset(&a, 0, sizeof(a));
  o.data = &a;
  assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  run_until_done(&loop, &a);
  assert_int_equal(a.status, 401);
  write_file("rotating-token", read_text(sim_file("token"))); /* the token rotates */
  memset(&b, 0, sizeof(b));
  o.data = &b;
  assert_int_equal(kcm_client_request(c, &o, NULL), 0);
  run_until_done(&loop, &b);
  assert_int_equal(b.err, 0);
  close_client(&loop, c);
  kcm_client_config_release(&cfg);
}

static void tls_server_name_is_verified(void **state) {
  struct result a;
  uint64_t runs;
  char server[256], ca[4096], text[16384];
  sim_cluster(server, sizeof(server), ca, sizeof(ca));
  /* Connect to 127.0.0.1 but verify the certificate as "localhost". */
  snprintf(text, sizeof(text),
           "current-context: x\n"
           "clusters: [{name: c, cluster: {server: '%s', certificate-authority-data: %s, "
           "tls-server-name: localhost}}]\n"
           "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
           "users: [{name: u, user: {token: %s}}]\n",
           server, ca, read_text(sim_file("token")));
  write_file("sni-config", text);
  two_requests(path_of("sni-config"), &a, &a, &runs);
  assert_int_equal(a.err, 0);
  snprintf(text, sizeof(text),
           "current-context: x\n"
           "clusters: [{name: c, cluster: {server: '%s', certificate-authority-data: %s, "
           "tls-server-name: api.example.com}}]\n"
           "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
           "users: [{name: u, user: {token: %s}}]\n",
           server, ca, read_text(sim_file("token")));
  write_file("wrong-sni-config", text);
  two_requests(path_of("wrong-sni-config"), &a, &a, &runs);
  assert_int_equal(a.err, KCM_ENETWORK); /* the certificate is not for that name */
  assert_non_null(strstr(a.message, "api.example.com"));
}

static void bad_exec_settings(void **state) {
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
               "clusters: [{name: c, cluster: {server: 'https://a'}}]\n"
               "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
               "command: x}}}]\n",
               NULL, "line 4", "interactiveMode: is required");
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
               "clusters: [{name: c, cluster: {server: 'https://a'}}]\n"
               "users: [{name: u, user: {exec: {apiVersion: v1, command: x}}}]\n",
               NULL, "line 4", "user.exec.apiVersion");
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
               "clusters: [{name: c, cluster: {server: 'https://a'}}]\n"
               "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
               "interactiveMode: Never}}}]\n",
               NULL, "line 4", "user.exec.command: is required");
  expect_error("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
               "clusters: [{name: c, cluster: {server: 'https://a'}}]\n"
               "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, "
               "command: x, interactiveMode: Sometimes}}}]\n",
               NULL, "line 4", "Sometimes");
}

static int on_chunk(const char *p, size_t n, void *data) {
  struct result *r = data;
  r->streamed += n;
  /* Stop once the initial events (the existing namespaces) have arrived. */
  return memmem(p, n, "\"kube-system\"", 13) ? 1 : 0;
}

/* A client on its own loop with one namespace watch started. */
struct watch_fixture {
  struct kcm_client_config cfg;
  struct kcm_client *client;
  struct kcm_client_request *req;
  uv_loop_t loop;
  struct result r;
};

static void start_watch(struct watch_fixture *w) {
  struct kcm_client_request_options o = {0};
  char *err = NULL;

  memset(w, 0, sizeof(*w));
  assert_int_equal(load(&w->cfg, sim_file("kubeconfig"), NULL, NULL, &err), 0);
  uv_loop_init(&w->loop);
  assert_int_equal(kcm_client_new(&w->client, &w->loop, &w->cfg), 0);
  o.method = "GET";
  o.path = "/api/v1/namespaces?watch=1&timeoutSeconds=30";
  o.on_chunk = on_chunk;
  o.done = on_done;
  o.data = &w->r;
  assert_int_equal(kcm_client_request(w->client, &o, &w->req), 0);
}

static void finish_watch(struct watch_fixture *w) {
  close_client(&w->loop, w->client);
  kcm_client_config_release(&w->cfg);
}

static void watch_streams_until_stopped(void **state) {
  struct watch_fixture w;
  start_watch(&w);
  run_until_done(&w.loop, &w.r);
  assert_int_equal(w.r.err, KCM_ECANCELED);
  assert_true(w.r.streamed > 0);
  finish_watch(&w);
}

static int count_chunk(const char *p, size_t n, void *data) {
  (void)p;
  ((struct result *)data)->streamed += n;
  return 0;
}

/* A streamed list is timed as any request; a watch, open-ended, is not. */
static void streamed_lists_are_timed_watches_are_not(void **state) {
  struct watch_fixture w;
  struct kcm_client_request_options o = {0};
  char *err = NULL, *page;
  const char *host;

  memset(&w, 0, sizeof(w));
  assert_int_equal(load(&w.cfg, sim_file("kubeconfig"), NULL, NULL, &err), 0);
  host = host_of(&w.cfg);
  uv_loop_init(&w.loop);
  assert_int_equal(kcm_client_new(&w.client, &w.loop, &w.cfg), 0);
  o.method = "GET";
  o.path = "/api/v1/namespaces?resourceVersion=0";
  o.on_chunk = count_chunk;
  o.done = on_done;
  o.data = &w.r;
  assert_int_equal(kcm_client_request(w.client, &o, NULL), 0);
  run_until_done(&w.loop, &w.r);
  assert_int_equal(w.r.err, 0);
  assert_true(w.r.streamed > 0);
  memset(&w.r, 0, sizeof(w.r));
  o.path = "/api/v1/namespaces?watch=1&timeoutSeconds=1";
  o.watch = true;
  assert_int_equal(kcm_client_request(w.client, &o, NULL), 0);
  run_until_done(&w.loop, &w.r);
  assert_int_equal(w.r.err, 0);
  page = metrics_page(w.client);
  assert_true(by_verb(page, "request_duration_seconds_count", host, "GET") == 1);
  free(page);
  finish_watch(&w);
}

/* A watch whose first chunk sends another request, as an informer's
 * handler recording an Event does. */
struct nested {
  struct kcm_client *client;
  struct result inner;
  bool sent;
  int send_err;
  bool watch_done;
};

static void nested_watch_done(const struct kcm_client_response *resp, void *data) {
  (void)resp;
  ((struct nested *)data)->watch_done = true;
}

static int send_from_chunk(const char *p, size_t n, void *data) {
  struct nested *x = data;
  struct kcm_client_request_options o = {0};
  (void)p;
  (void)n;
  if (x->sent)
    return 0;
  x->sent = true;
  o.method = "GET";
  o.path = "/api/v1/namespaces/default";
  o.done = on_done;
  o.data = &x->inner;
  x->send_err = kcm_client_request(x->client, &o, NULL);
  return 0;
}

static void a_request_sent_while_a_chunk_is_handled_completes(void **state) {
  struct watch_fixture w;
  struct nested x = {0};
  struct kcm_client_request_options o = {0};
  char *err = NULL;

  memset(&w, 0, sizeof(w));
  assert_int_equal(load(&w.cfg, sim_file("kubeconfig"), NULL, NULL, &err), 0);
  uv_loop_init(&w.loop);
  assert_int_equal(kcm_client_new(&w.client, &w.loop, &w.cfg), 0);
  x.client = w.client;
  o.method = "GET";
  o.path = "/api/v1/namespaces?watch=1&timeoutSeconds=30";
  o.on_chunk = send_from_chunk;
  o.done = nested_watch_done;
  o.data = &x;
  assert_int_equal(kcm_client_request(w.client, &o, &w.req), 0);
  run_until_done(&w.loop, &x.inner);
  assert_int_equal(x.send_err, 0);
  assert_int_equal(x.inner.err, 0);
  assert_int_equal(x.inner.status, 200);
  assert_non_null(strstr(x.inner.body, "\"name\":\"default\""));
  kcm_client_cancel(w.req);
  finish_watch(&w);
  assert_true(x.watch_done);
}

/* Whether the log entry of the request for `path` says it resumed a TLS session. */
static bool resumed_in(const char *log, const char *path) {
  char needle[300];
  const char *p;
  snprintf(needle, sizeof(needle), "\"path\":\"%s\"", path);
  assert_non_null(p = strstr(log, needle));
  assert_non_null(p = strstr(p, "\"tlsResumed\":"));
  return !strncmp(p + 13, "true", 4);
}

/* A connection opened after the first resumes its TLS session instead of a
 * full handshake, whichever handle opens it. */
static void new_connections_resume_the_tls_session(void **state) {
  struct watch_fixture w;
  struct result first, second, log;
  struct kcm_client_request_options o = {0};
  const char *p;
  char since[64], *err = NULL;

  request(sim_file("kubeconfig"), "GET", "/_sim/requests?since=1000000000", NULL, 0, &log);
  assert_non_null(p = strstr(log.body, "\"last\":"));
  snprintf(since, sizeof(since), "/_sim/requests?since=%ld", strtol(p + 7, NULL, 10));
  memset(&w, 0, sizeof(w));
  assert_int_equal(load(&w.cfg, sim_file("kubeconfig"), NULL, NULL, &err), 0);
  uv_loop_init(&w.loop);
  assert_int_equal(kcm_client_new(&w.client, &w.loop, &w.cfg), 0);
  send_on(&w.loop, w.client, "GET", "/api/v1/namespaces/default", NULL, 0, &first);
  /* A watch holds that connection, so the next request needs another. */
  o.method = "GET";
  o.path = "/api/v1/namespaces?watch=1&timeoutSeconds=30";
  o.on_chunk = count_chunk;
  o.done = on_done;
  o.data = &w.r;
  assert_int_equal(kcm_client_request(w.client, &o, &w.req), 0);
  while (!w.r.streamed)
    support_run_once(&w.loop);
  send_on(&w.loop, w.client, "GET", "/api/v1/namespaces/kube-system", NULL, 0, &second);
  assert_int_equal(first.status, 200);
  assert_int_equal(second.status, 200);
  kcm_client_cancel(w.req);
  run_until_done(&w.loop, &w.r);
  finish_watch(&w);

  request(sim_file("kubeconfig"), "GET", since, NULL, 0, &log);
  assert_int_equal(log.err, 0);
  assert_false(resumed_in(log.body, "/api/v1/namespaces/default"));
  assert_true(resumed_in(log.body, "/api/v1/namespaces/kube-system"));
}

static void cancel_reports_from_the_loop(void **state) {
  struct watch_fixture w;
  start_watch(&w);
  assert_int_equal(kcm_client_pending(w.client), 1);
  kcm_client_cancel(w.req);
  assert_false(w.r.done); /* never from inside cancel */
  run_until_done(&w.loop, &w.r);
  assert_int_equal(w.r.err, KCM_ECANCELED);
  assert_int_equal(w.r.streamed, 0);
  assert_int_equal(kcm_client_pending(w.client), 0);
  finish_watch(&w);
}

/* --- exactly what goes on the wire (a scripted server) ------------------------ */

struct wire {
  struct peer peer;
  struct kcm_client_config cfg;
  struct kcm_client *c;
  uv_loop_t loop;
};

/* A client of the scripted server, authenticated by a token file holding
 * `token` (NULL: none). */
static void wire_start(struct wire *w, const struct peer_answer *answers, size_t n,
                       const char *token) {
  memset(w, 0, sizeof(*w));
  peer_start(&w->peer, answers, n);
  w->cfg.server = strdup(w->peer.url);
  if (token) {
    write_file("wire-token", token);
    w->cfg.token_file = strdup(path_of("wire-token"));
  }
  uv_loop_init(&w->loop);
  assert_int_equal(kcm_client_new(&w->c, &w->loop, &w->cfg), 0);
}

static void wire_stop(struct wire *w) {
  close_client(&w->loop, w->c);
  kcm_client_config_release(&w->cfg);
  peer_stop(&w->peer);
}

static bool is_done(void *arg) { return ((struct result *)arg)->done; }

/* Send a GET with the time limit timeout_ms; false if no answer came within
 * limit_ms. */
static bool wire_get(struct wire *w, const char *path, long timeout_ms, uint64_t limit_ms,
                     struct result *r) {
  struct kcm_client_request_options o = {0};
  uint64_t started;
  memset(r, 0, sizeof(*r));
  o.method = "GET";
  o.path = path;
  o.timeout_ms = timeout_ms;
  o.done = on_done;
  o.data = r;
  uv_update_time(&w->loop);
  started = uv_now(&w->loop);
  assert_int_equal(kcm_client_request(w->c, &o, NULL), 0);
  if (!support_run_until(&w->loop, is_done, r, limit_ms))
    return false;
  r->elapsed_ms = uv_now(&w->loop) - started;
  r->retries = kcm_client_stats(w->c)->retries;
  return true;
}

static const char ok_head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json";

/* Every attempt carries its credentials once: a retry after 429 does not
 * add a second Authorization header, and a token file rotated between
 * attempts sends the new token alone. */
static void retries_carry_one_authorization(void **state) {
  const struct peer_answer answers[] = {
      {"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0", NULL},
      {"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1", NULL},
      {ok_head, "{}"},
  };
  struct wire w;
  struct result r = {0};
  struct kcm_client_request_options o = {0};
  bool rotated = false;
  char value[256], *head;
  size_t i;

  wire_start(&w, answers, 3, "old-token\n");
  o.method = "GET";
  o.path = "/api/v1/nodes";
  o.timeout_ms = 10000;
  o.done = on_done;
  o.data = &r;
  assert_int_equal(kcm_client_request(w.c, &o, NULL), 0);
  while (!r.done) {
    support_run_once(&w.loop);
    if (!rotated && peer_count(&w.peer) == 2) {
      /* Rotated during the second pause; due to be read again. */
      write_file("wire-token", "new-token\n");
      w.c->token_read_at -= 3600;
      rotated = true;
    }
  }
  assert_true(rotated);
  assert_int_equal(r.status, 200);
  assert_int_equal(peer_count(&w.peer), 3);
  for (i = 0; i < 3; i++) {
    head = peer_request(&w.peer, i);
    assert_int_equal(peer_header_count(head, "Authorization"), 1);
    assert_true(peer_header(head, "Authorization", value, sizeof(value)));
    assert_string_equal(value, i < 2 ? "Bearer old-token" : "Bearer new-token");
    assert_int_equal(peer_header_count(head, "Accept"), 1);
    assert_int_equal(peer_header_count(head, "User-Agent"), 1);
    free(head);
  }
  wire_stop(&w);
}

/* The owner of a request's token, counting the 401s it is told of; it
 * replaces the token at once when asked to. */
struct token_owner {
  struct kcm_client_bearer bearer;
  int refused;
  char *renew_to;
};

static void token_refused(struct kcm_client_bearer *b) {
  struct token_owner *t = (struct token_owner *)b;
  t->refused++;
  if (t->renew_to) {
    b->token = t->renew_to;
    b->generation++;
  }
}

/* A request may carry a token of its own (a controller's service account)
 * and name its component in the User-Agent: the token is read at each
 * attempt, so a refreshed one is used on a retry; a 401 for it leaves the
 * client's own token alone and tells the token's owner; without either,
 * the client's token and the plain User-Agent. */
static void a_request_may_carry_its_own_token_and_agent(void **state) {
  const struct peer_answer answers[] = {
      {"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1", NULL},
      {"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json", "{}"},
      {ok_head, "{}"},
  };
  struct wire w;
  struct result r = {0};
  struct kcm_client_request_options o = {0};
  static char first[] = "sa-token-1", second[] = "sa-token-2";
  struct token_owner token = {{first, 1, token_refused}, 0, NULL};
  char value[256], *head;
  bool swapped = false;

  wire_start(&w, answers, 3, "own-token\n");
  o.method = "GET";
  o.path = "/api/v1/pods";
  o.timeout_ms = 10000;
  o.done = on_done;
  o.data = &r;
  o.bearer = &token.bearer;
  o.agent = "replicaset-controller";
  assert_int_equal(kcm_client_request(w.c, &o, NULL), 0);
  while (!r.done) {
    support_run_once(&w.loop);
    if (!swapped && peer_count(&w.peer) == 1) {
      token.bearer.token = second; /* refreshed while the request waits to retry */
      token.bearer.generation++;
      swapped = true;
    }
  }
  assert_int_equal(r.status, 401);
  assert_int_equal(kcm_client_stats(w.c)->unauthorized, 0);
  assert_int_equal(token.refused, 1);
  head = peer_request(&w.peer, 0);
  assert_true(peer_header(head, "Authorization", value, sizeof(value)));
  assert_string_equal(value, "Bearer sa-token-1");
  assert_true(peer_header(head, "User-Agent", value, sizeof(value)));
  assert_true(strncmp(value, "kcm/v", 5) == 0);
  assert_string_equal(kcm_client_program(), "kcm");
  assert_non_null(strstr(value, ") kcm/replicaset-controller"));
  free(head);
  head = peer_request(&w.peer, 1);
  assert_true(peer_header(head, "Authorization", value, sizeof(value)));
  assert_string_equal(value, "Bearer sa-token-2");
  free(head);
  /* The next request of the same handle, without: the client's own. */
  assert_true(wire_get(&w, "/api/v1/nodes", 10000, 10000, &r));
  assert_int_equal(r.status, 200);
  head = peer_request(&w.peer, 2);
  assert_true(peer_header(head, "Authorization", value, sizeof(value)));
  assert_string_equal(value, "Bearer own-token");
  assert_true(peer_header(head, "User-Agent", value, sizeof(value)));
  assert_null(strstr(value, "replicaset-controller"));
  free(head);
  wire_stop(&w);
}

/* Two requests sent with one token, both answered 401: the owner is told
 * once, for the first; the second was sent with the token it has since
 * replaced. */
static void a_refused_token_is_reported_once(void **state) {
  const struct peer_answer answers[] = {
      {"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json", "{}"},
      {"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json", "{}"},
  };
  struct wire w;
  struct result r[2] = {{0}, {0}};
  struct kcm_client_request_options o = {0};
  static char first[] = "sa-token-1", second[] = "sa-token-2";
  struct token_owner token = {{first, 1, token_refused}, 0, second};
  int i;

  wire_start(&w, answers, 2, "own-token\n");
  o.method = "GET";
  o.path = "/api/v1/pods";
  o.timeout_ms = 10000;
  o.done = on_done;
  o.bearer = &token.bearer;
  for (i = 0; i < 2; i++) {
    o.data = &r[i];
    assert_int_equal(kcm_client_request(w.c, &o, NULL), 0);
  }
  support_wait(&w.loop, &r[0].done);
  support_wait(&w.loop, &r[1].done);
  assert_int_equal(r[0].status, 401);
  assert_int_equal(r[1].status, 401);
  assert_int_equal(token.refused, 1);
  assert_string_equal(token.bearer.token, "sa-token-2");
  wire_stop(&w);
}

/* The User-Agent names the program as it was started (the last part of
 * argv[0]), as client-go's does; a name that cannot be one word is
 * ignored. */
static void the_program_names_the_user_agent(void **state) {
  const struct peer_answer answers[] = {{ok_head, "{}"}};
  struct wire w;
  struct result r = {0};
  char value[256], *head;

  wire_start(&w, answers, 1, "own-token\n");
  kcm_client_set_program("/opt/bin/kube-controller-manager");
  kcm_client_set_program("two words");
  kcm_client_set_program("");
  assert_string_equal(kcm_client_program(), "kube-controller-manager");
  assert_true(wire_get(&w, "/api/v1/nodes", 10000, 10000, &r));
  kcm_client_set_program("kcm");
  head = peer_request(&w.peer, 0);
  assert_true(peer_header(head, "User-Agent", value, sizeof(value)));
  assert_true(strncmp(value, "kube-controller-manager/v", 25) == 0);
  assert_non_null(strstr(value, " (linux/"));
  free(head);
  wire_stop(&w);
}

/* Retry-After is whole seconds (delay-seconds), as client-go reads it; any
 * other text is no Retry-After; a long pause is capped, and one that would
 * pass the request's time limit ends the request with the answer. */
static void retry_after_is_whole_seconds_within_the_time_limit(void **state) {
  static const char *const not_seconds[] = {"nan", "1e308", "1e8", "1.5", "-1", "+1", "0x10",
                                            "inf", "", "Fri, 31 Dec 1999 23:59:59 GMT"};
  struct peer_answer answers[2] = {{NULL, NULL}, {ok_head, "{}"}};
  char head[128];
  struct wire w;
  struct result r;
  size_t i;

  for (i = 0; i < sizeof(not_seconds) / sizeof(not_seconds[0]); i++) {
    /* A 429 is retried after a second without a usable Retry-After; a 503
     * is not retried at all. */
    snprintf(head, sizeof(head), "HTTP/1.1 429 Too Many Requests\r\nRetry-After: %s",
             not_seconds[i]);
    answers[0].head = head;
    wire_start(&w, answers, 2, NULL);
    if (!wire_get(&w, "/api/v1/nodes", 10000, 5000, &r))
      fail_msg("Retry-After: %s: no answer within 5 s", not_seconds[i]);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.retries, 1);
    assert_true(r.elapsed_ms >= 1000);
    wire_stop(&w);
    snprintf(head, sizeof(head), "HTTP/1.1 503 Service Unavailable\r\nRetry-After: %s",
             not_seconds[i]);
    wire_start(&w, answers, 2, NULL);
    assert_true(wire_get(&w, "/api/v1/nodes", 10000, 5000, &r));
    if (r.status != 503 || r.retries != 0)
      fail_msg("Retry-After: %s: 503 retried", not_seconds[i]);
    assert_true(r.retry_after == 0);
    wire_stop(&w);
  }

  /* Past the cap, and past the time limit: the 429 at once, with the cap. */
  answers[0].head = "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 100000000000000000000000";
  wire_start(&w, answers, 2, NULL);
  assert_true(wire_get(&w, "/api/v1/nodes", 3000, 2000, &r));
  assert_int_equal(r.status, 429);
  assert_int_equal(r.err, KCM_ETHROTTLED);
  assert_int_equal(r.retries, 0);
  assert_true(r.retry_after == KCM_CLIENT_RETRY_AFTER_MAX);
  wire_stop(&w);

  /* Within the cap but past the time limit. */
  answers[0].head = "HTTP/1.1 429 Too Many Requests\r\nRetry-After:  2 ";
  wire_start(&w, answers, 2, NULL);
  assert_true(wire_get(&w, "/api/v1/nodes", 1500, 1000, &r));
  assert_int_equal(r.status, 429);
  assert_int_equal(r.retries, 0);
  assert_true(r.retry_after == 2);
  wire_stop(&w);
  /* Within both: waited for, blanks around the number allowed. */
  wire_start(&w, answers, 2, NULL);
  assert_true(wire_get(&w, "/api/v1/nodes", 5000, 4500, &r));
  assert_int_equal(r.status, 200);
  assert_int_equal(r.retries, 1);
  assert_true(r.elapsed_ms >= 2000);
  wire_stop(&w);
}

/* A password in the server URL authenticates (Basic), and appears in no
 * log line at any verbosity, no metric and no error message. */
static void url_credentials_stay_secret(void **state) {
  static const char secret[] = "pw-S3CRET";
  const struct peer_answer answers[] = {
      {ok_head, "{}"},
      {"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json",
       "{\"kind\":\"Status\",\"message\":\"broken\"}"},
  };
  struct kcm_client_config cfg;
  struct kcm_client *c;
  struct result r;
  struct peer peer;
  uv_loop_t loop;
  char url[128], kc[512], value[128], *err = NULL, *page, *head, *logged;
  FILE *log = tmpfile();

  peer_start(&peer, answers, 2);
  snprintf(url, sizeof(url), "http://admin:%s%%40x@127.0.0.1:%u/", secret, peer.port);
  snprintf(kc, sizeof(kc),
           "current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
           "clusters: [{name: c, cluster: {server: '%s'}}]\nusers: [{name: u, user: {}}]\n",
           url);
  write_file("userinfo-config", kc);
  assert_non_null(log);
  kcm_log_set_output(log);
  kcm_log_set_verbosity(10);
  assert_int_equal(load(&cfg, path_of("userinfo-config"), NULL, NULL, &err), 0);
  /* What kcm logs at start (the server it connects to) holds no secret. */
  assert_false(contains(cfg.server, secret));
  assert_string_equal(cfg.username, "admin");
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&c, &loop, &cfg), 0);
  send_on(&loop, c, "GET", "/api/v1/nodes?limit=1", NULL, 0, &r);
  assert_int_equal(r.status, 200);
  send_on(&loop, c, "GET", "/api/v1/nodes", NULL, 0, &r);
  assert_int_equal(r.status, 500);
  assert_false(contains(r.message, secret));
  page = metrics_page(c);
  assert_false(contains(page, secret));
  assert_true(contains(page, "127.0.0.1"));
  free(page);
  close_client(&loop, c);
  kcm_client_config_release(&cfg);

  /* --master, and a URL refused. */
  assert_int_equal(load(&cfg, path_of("userinfo-config"), NULL, url, &err), 0);
  assert_false(contains(cfg.server, secret));
  kcm_client_config_release(&cfg);
  snprintf(url, sizeof(url), "ftp://admin:%s@127.0.0.1/", secret);
  assert_int_equal(load(&cfg, path_of("userinfo-config"), NULL, url, &err), KCM_EINVAL);
  assert_non_null(err);
  assert_false(contains(err, secret));
  assert_true(contains(err, "ftp://127.0.0.1"));
  free(err);
  err = NULL;

  kcm_log_set_verbosity(0);
  kcm_log_set_output(NULL);
  logged = read_back(log);
  assert_true(contains(logged, "GET http://127.0.0.1:")); /* the -v 6 request lines */
  if (contains(logged, secret))
    fail_msg("the password was logged:\n%s", logged);
  free(logged);

  /* The password is still the password: percent-decoded, sent as Basic. */
  head = peer_request(&peer, 0);
  assert_true(peer_header(head, "Authorization", value, sizeof(value)));
  assert_string_equal(value, "Basic YWRtaW46cHctUzNDUkVUQHg="); /* admin:pw-S3CRET@x */
  assert_false(contains(head, secret));
  free(head);
  peer_stop(&peer);
}

/* An error's message, from a Status in JSON or (to a client that asked for
 * protobuf) in protobuf; other bodies are shown as printable text. */
static void error_messages_of_every_encoding(void **state) {
  static const char json[] = "{\"kind\":\"Status\",\"code\":410,\"message\":\"too old\"}";
  struct kcm_buf status = KCM_BUF_INIT(1 << 20), meta = KCM_BUF_INIT(1 << 20),
                 body = KCM_BUF_INIT(1 << 20);
  char *m = kcm_client_error_message(json, strlen(json));
  assert_string_equal(m, "too old");
  free(m);
  pbw_str(&meta, 1, "v1");
  pbw_str(&meta, 2, "Status");
  pbw_str(&status, 2, "Failure");
  pbw_str(&status, 3, "too old resource version: 5 (9)");
  pbw_str(&status, 4, "Expired");
  pbw_int(&status, 6, 410);
  kcm_buf_append(&body, "k8s\0", 4);
  pbw_msg(&body, 1, &meta);
  pbw_msg(&body, 2, &status);
  m = kcm_client_error_message(body.data, body.len);
  assert_string_equal(m, "too old resource version: 5 (9)");
  free(m);
  m = kcm_client_error_message("<html>\x01" "bad gateway</html>", 25);
  assert_string_equal(m, "<html> bad gateway</html>");
  free(m);
  kcm_buf_release(&status);
  kcm_buf_release(&meta);
  kcm_buf_release(&body);
}

int main(void) {
  const struct CMUnitTest config_tests[] = {
      cmocka_unit_test(error_messages_of_every_encoding),
      cmocka_unit_test(current_context_token_and_ca_data),
      cmocka_unit_test(context_flag_selects_cluster_user_namespace),
      cmocka_unit_test(master_flag_overrides_server),
      cmocka_unit_test(relative_paths_resolve_against_the_file),
      cmocka_unit_test(kubeconfig_list_first_value_wins),
      cmocka_unit_test(home_config_is_the_fallback),
      cmocka_unit_test(in_cluster_settings),
      cmocka_unit_test(bad_files_are_reported_precisely),
      cmocka_unit_test(server_without_a_host_is_refused),
      cmocka_unit_test(missing_file_and_no_config),
      cmocka_unit_test(shared_credential_files_are_warned_of),
      cmocka_unit_test(base64_decoding),
      cmocka_unit_test(exec_credentials_are_parsed_strictly),
      cmocka_unit_test(bad_exec_settings),
      cmocka_unit_test(retry_after_values),
      cmocka_unit_test(header_lines),
      cmocka_unit_test(url_text),
      cmocka_unit_test(resource_paths),
  };
  const struct CMUnitTest http_tests[] = {
      cmocka_unit_test(token_request_succeeds),
      cmocka_unit_test(compression_is_not_requested),
      cmocka_unit_test(client_certificate_authenticates),
      cmocka_unit_test(status_codes_map_to_errors),
      cmocka_unit_test(wrong_token_is_refused),
      cmocka_unit_test(refused_credentials_are_named_unauthorized),
      cmocka_unit_test(refused_access_is_named_forbidden),
      cmocka_unit_test(untrusted_server_certificate_is_refused),
      cmocka_unit_test(body_over_limit_is_refused),
      cmocka_unit_test(unanswered_requests_are_told_apart),
      cmocka_unit_test(unanswered_repeatable_requests_are_sent_again),
      cmocka_unit_test(throttling_is_retried_as_the_server_asks),
      cmocka_unit_test(rate_limit_spaces_requests),
      cmocka_unit_test(limiters_are_independent),
      cmocka_unit_test(requests_are_counted_by_code_and_method),
      cmocka_unit_test(exec_plugin_token_is_cached),
      cmocka_unit_test(exec_plugin_rerun_when_expiring_or_refused),
      cmocka_unit_test(exec_plugin_client_certificate),
      cmocka_unit_test(exec_plugin_failures_are_clear),
      cmocka_unit_test(token_file_reread_after_refusal),
      cmocka_unit_test(tls_server_name_is_verified),
      cmocka_unit_test(watch_streams_until_stopped),
      cmocka_unit_test(streamed_lists_are_timed_watches_are_not),
      cmocka_unit_test(a_request_sent_while_a_chunk_is_handled_completes),
      cmocka_unit_test(cancel_reports_from_the_loop),
      cmocka_unit_test(new_connections_resume_the_tls_session),
  };
  const struct CMUnitTest wire_tests[] = {
      cmocka_unit_test(retries_carry_one_authorization),
      cmocka_unit_test(a_request_may_carry_its_own_token_and_agent),
      cmocka_unit_test(a_refused_token_is_reported_once),
      cmocka_unit_test(the_program_names_the_user_agent),
      cmocka_unit_test(retry_after_is_whole_seconds_within_the_time_limit),
      cmocka_unit_test(url_credentials_stay_secret),
  };
  int failed = cmocka_run_group_tests_name("config", config_tests, setup_dir, teardown_dir);
  failed += cmocka_run_group_tests_name("wire", wire_tests, setup_dir, teardown_dir);
  failed += cmocka_run_group_tests_name("http", http_tests, start_sim, stop_sim);
  return failed;
}
