/*
 * client/exec.c — credentials from an exec plugin (user.exec).
 *
 * The plugin runs with uv_spawn, off the loop's critical path: requests
 * that need credentials wait until it has finished. Its environment is
 * ours plus the kubeconfig's env entries plus KUBERNETES_EXEC_INFO, an
 * ExecCredential with spec.interactive false (and spec.cluster when
 * provideClusterInfo is set). Its stdout is an ExecCredential whose status
 * carries a token or a client certificate and key, and optionally an
 * expirationTimestamp; the credentials are kept until shortly before it.
 * stderr passes through to ours, as client-go does.
 */
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/jsonw.h"
#include "kcm/log.h"

#define MAX_OUTPUT (1u << 20)
#define PLUGIN_TIMEOUT_MS 60000
#define EXPIRY_MARGIN_S 10

extern char **environ;

bool kcm_client_creds_fresh(struct kcm_client *c) {
  struct kcm_client_creds *k = &c->creds;
  return k->valid && (!k->expires || time(NULL) + EXPIRY_MARGIN_S < k->expires);
}

static void clear(struct kcm_client_creds *k) {
  if (k->token)
    explicit_bzero(k->token, strlen(k->token));
  free(k->token);
  free(k->cert_pem);
  if (k->key_pem)
    explicit_bzero(k->key_pem, k->key_len);
  free(k->key_pem);
  k->token = k->cert_pem = k->key_pem = NULL;
  k->cert_len = k->key_len = 0;
  k->expires = 0;
  k->valid = false;
}

void kcm_client_creds_invalidate(struct kcm_client *c) { c->creds.valid = false; }

static void set_error(struct kcm_client_creds *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_error(struct kcm_client_creds *k, const char *fmt, ...) {
  char *msg = NULL;
  va_list ap;
  va_start(ap, fmt);
  if (vasprintf(&msg, fmt, ap) < 0)
    msg = NULL;
  va_end(ap);
  free(k->error);
  k->error = msg;
}

void kcm_client_exec_parse(struct kcm_client_creds *k, const char *text, const char *want,
                           const char *command) {
  struct json_object *doc = json_tokener_parse(text);
  struct json_object *v, *status;
  const char *token = NULL, *cert = NULL, *key = NULL, *exp = NULL;
  int64_t expires = 0;

  if (!doc || !json_object_is_type(doc, json_type_object)) {
    set_error(k, "exec plugin %s wrote no ExecCredential JSON to stdout", command);
    goto out;
  }
  if (!json_object_object_get_ex(doc, "apiVersion", &v) ||
      !json_object_is_type(v, json_type_string) || strcmp(json_object_get_string(v), want) != 0) {
    set_error(k, "exec plugin answered with an ExecCredential of another apiVersion than %s",
              want);
    goto out;
  }
  if (!json_object_object_get_ex(doc, "status", &status) ||
      !json_object_is_type(status, json_type_object)) {
    set_error(k, "exec plugin %s: the ExecCredential has no status", command);
    goto out;
  }
  if (json_object_object_get_ex(status, "token", &v) && json_object_is_type(v, json_type_string))
    token = json_object_get_string(v);
  if (json_object_object_get_ex(status, "clientCertificateData", &v) &&
      json_object_is_type(v, json_type_string))
    cert = json_object_get_string(v);
  if (json_object_object_get_ex(status, "clientKeyData", &v) &&
      json_object_is_type(v, json_type_string))
    key = json_object_get_string(v);
  if (json_object_object_get_ex(status, "expirationTimestamp", &v) &&
      json_object_is_type(v, json_type_string))
    exp = json_object_get_string(v);
  if (token && !*token)
    token = NULL; /* an empty token is none */
  if (!token && (!cert || !key)) {
    set_error(k, "exec plugin %s: the ExecCredential carries neither a token nor a client "
              "certificate and key", command);
    goto out;
  }
  if (!cert != !key) {
    set_error(k, "exec plugin %s: clientCertificateData and clientKeyData must come together",
              command);
    goto out;
  }
  if (exp && kcm_api_parse_time(exp, &expires)) {
    set_error(k, "exec plugin %s: expirationTimestamp is not an RFC 3339 time", command);
    goto out;
  }
  clear(k);
  k->token = token ? strdup(token) : NULL;
  if (cert) {
    k->cert_pem = strdup(cert);
    k->key_pem = strdup(key);
    k->cert_len = strlen(cert);
    k->key_len = strlen(key);
  }
  k->expires = expires;
  k->valid = (!token || k->token) && (!cert || (k->cert_pem && k->key_pem));
  free(k->error);
  k->error = k->valid ? NULL : strdup("out of memory");
out:
  json_object_put(doc);
}

void kcm_client_exec_creds_clear(struct kcm_client_creds *k) {
  clear(k);
  free(k->error);
  k->error = NULL;
}

/* Parse the plugin's ExecCredential, then wipe what it wrote. */
static void parse_output(struct kcm_client *c) {
  struct kcm_client_creds *k = &c->creds;
  kcm_client_exec_parse(k, k->output.data ? k->output.data : "", c->cfg->exec->api_version,
                        c->cfg->exec->command);
  if (k->output.data)
    explicit_bzero(k->output.data, k->output.len);
  kcm_buf_release(&k->output);
}

static void on_plugin_handle_closed(uv_handle_t *h) {
  struct kcm_client *c = h->data;
  if (--c->creds.open == 0) {
    c->creds.running = false;
    if (!c->closing) {
      if (!c->creds.failed)
        parse_output(c);
      kcm_client_creds_ready(c);
    }
  }
  kcm_client_handle_closed(h); /* may free c: nothing after this */
}

static void finish_run(struct kcm_client *c) {
  struct kcm_client_creds *k = &c->creds;
  uv_timer_stop(&k->kill);
  if (!uv_is_closing((uv_handle_t *)&k->out))
    uv_close((uv_handle_t *)&k->out, on_plugin_handle_closed);
  if (!uv_is_closing((uv_handle_t *)&k->proc))
    uv_close((uv_handle_t *)&k->proc, on_plugin_handle_closed);
  if (!uv_is_closing((uv_handle_t *)&k->kill))
    uv_close((uv_handle_t *)&k->kill, on_plugin_handle_closed);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig) {
  struct kcm_client *c = p->data;
  struct kcm_client_creds *k = &c->creds;
  k->exit_status = status;
  if (status || sig) {
    k->failed = true;
    char detail[64];
    snprintf(detail, sizeof(detail), sig ? "was killed by signal %d" : "exited with status %d",
             sig ? sig : (int)status);
    free(k->error);
    k->error = NULL;
    if (asprintf(&k->error, "exec plugin %s %s%s%s", c->cfg->exec->command, detail,
                 c->cfg->exec->install_hint ? "; " : "",
                 c->cfg->exec->install_hint ? c->cfg->exec->install_hint : "") < 0)
      k->error = NULL;
    kcm_buf_release(&k->output);
  }
  finish_run(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  static char chunk[65536];
  buf->base = chunk;
  buf->len = sizeof(chunk);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct kcm_client *c = s->data;
  if (n > 0 && kcm_buf_append(&c->creds.output, buf->base, (size_t)n) != 0) {
    c->creds.failed = true;
    set_error(&c->creds, "exec plugin %s wrote more than 1 MiB to stdout",
              c->cfg->exec->command);
    uv_process_kill(&c->creds.proc, SIGKILL);
  }
  if (n < 0)
    uv_read_stop(s);
}

static void on_kill(uv_timer_t *t) {
  struct kcm_client *c = t->data;
  c->creds.failed = true;
  set_error(&c->creds, "exec plugin %s did not finish within 60 s", c->cfg->exec->command);
  uv_process_kill(&c->creds.proc, SIGKILL);
}

/* The base64 of cfg's CA certificates, appended to b. */
static void ca_data(const struct kcm_client_config *cfg, struct kcm_buf *b) {
  static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  size_t i;
  for (i = 0; i < cfg->ca_pem_len; i += 3) {
    unsigned v = (unsigned char)cfg->ca_pem[i] << 16;
    char q[4];
    if (i + 1 < cfg->ca_pem_len)
      v |= (unsigned char)cfg->ca_pem[i + 1] << 8;
    if (i + 2 < cfg->ca_pem_len)
      v |= (unsigned char)cfg->ca_pem[i + 2];
    q[0] = tbl[v >> 18 & 63];
    q[1] = tbl[v >> 12 & 63];
    q[2] = i + 1 < cfg->ca_pem_len ? tbl[v >> 6 & 63] : '=';
    q[3] = i + 2 < cfg->ca_pem_len ? tbl[v & 63] : '=';
    kcm_buf_append(b, q, 4);
  }
}

/* KUBERNETES_EXEC_INFO for the plugin: a heap string, NULL when out of
 * memory. */
static char *exec_info(struct kcm_client *c) {
  const struct kcm_client_config *cfg = c->cfg;
  struct kcm_buf out = KCM_BUF_INIT(1u << 23);
  struct kcm_jsonw w;
  char *text = NULL;
  kcm_jsonw_start(&w, &out);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "kind", "ExecCredential");
  kcm_jsonw_key_string(&w, "apiVersion", cfg->exec->api_version);
  kcm_jsonw_key_object(&w, "spec");
  kcm_jsonw_key_bool(&w, "interactive", false);
  if (cfg->exec->provide_cluster_info) {
    kcm_jsonw_key_object(&w, "cluster");
    kcm_jsonw_key_string(&w, "server", cfg->server);
    if (cfg->tls_server_name)
      kcm_jsonw_key_string(&w, "tls-server-name", cfg->tls_server_name);
    if (cfg->insecure)
      kcm_jsonw_key_bool(&w, "insecure-skip-tls-verify", true);
    if (cfg->ca_pem) {
      struct kcm_buf b = KCM_BUF_INIT(1u << 22);
      ca_data(cfg, &b);
      kcm_jsonw_key_string(&w, "certificate-authority-data", b.data);
      kcm_buf_release(&b);
    }
    if (cfg->proxy_url)
      kcm_jsonw_key_string(&w, "proxy-url", cfg->proxy_url);
    kcm_jsonw_end(&w);
  }
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  if (!kcm_jsonw_finish(&w))
    text = kcm_buf_take(&out);
  kcm_buf_release(&out);
  return text;
}

/* The plugin's command line and environment, NULL-terminated: env is
 * KUBERNETES_EXEC_INFO (env[0], owned), then kcm's own environment but
 * for any KUBERNETES_EXEC_INFO, then the kubeconfig's; the other strings
 * are borrowed. KCM_ENOMEM: neither is set. */
static int plugin_command(struct kcm_client *c, char ***argsp, char ***envp) {
  const struct kcm_client_exec *x = c->cfg->exec;
  char **env = NULL, **args = NULL, *info = NULL;
  size_t nenv = 0, nargs = 0, i, j = 0;

  while (environ[nenv])
    nenv++;
  for (i = 0; x->env && x->env[i]; i++)
    nenv++;
  for (i = 0; x->args && x->args[i]; i++)
    nargs++;
  info = exec_info(c);
  env = calloc(nenv + 2, sizeof(*env));
  args = calloc(nargs + 2, sizeof(*args));
  if (!info || !env || !args || asprintf(&env[j], "KUBERNETES_EXEC_INFO=%s", info) < 0) {
    free(info);
    free(env);
    free(args);
    return KCM_ENOMEM;
  }
  free(info);
  j++;
  for (i = 0; environ[i]; i++) {
    if (strncmp(environ[i], "KUBERNETES_EXEC_INFO=", 21))
      env[j++] = environ[i];
  }
  for (i = 0; x->env && x->env[i]; i++)
    env[j++] = x->env[i];
  args[0] = x->command;
  for (i = 0; i < nargs; i++)
    args[i + 1] = x->args[i];
  *argsp = args;
  *envp = env;
  return 0;
}

/* Spawn the plugin, its stdout piped into k->output, its stderr kcm's; a
 * run is counted. The process, pipe and timer handles are open after,
 * whatever uv_spawn returned. */
static int spawn(struct kcm_client *c, char **args, char **env) {
  struct kcm_client_creds *k = &c->creds;
  uv_process_options_t po = {0};
  uv_stdio_container_t stdio[3];

  kcm_buf_init(&k->output, MAX_OUTPUT);
  uv_pipe_init(c->loop, &k->out, 0);
  uv_timer_init(c->loop, &k->kill);
  k->out.data = k->kill.data = k->proc.data = c;
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&k->out;
  stdio[2].flags = UV_INHERIT_FD;
  stdio[2].data.fd = 2;
  po.file = c->cfg->exec->command;
  po.args = args;
  po.env = env;
  po.stdio = stdio;
  po.stdio_count = 3;
  po.exit_cb = on_exit_cb;
  k->running = true;
  k->failed = false;
  k->runs++;
  c->stats.exec_runs++;
  return uv_spawn(c->loop, &k->proc, &po);
}

void kcm_client_creds_fetch(struct kcm_client *c) {
  struct kcm_client_creds *k = &c->creds;
  const struct kcm_client_exec *x = c->cfg->exec;
  char **env = NULL, **args = NULL;
  int rc;

  if (k->running || c->closing)
    return;
  if (x->interactive == KCM_CLIENT_INTERACTIVE_ALWAYS) {
    set_error(k, "exec plugin %s needs an interactive terminal (interactiveMode: Always), and kcm "
              "runs without one", x->command);
    kcm_client_creds_ready(c);
    return;
  }
  if (plugin_command(c, &args, &env)) {
    set_error(k, "exec plugin %s: out of memory", x->command);
    kcm_client_creds_ready(c);
    return;
  }
  rc = spawn(c, args, env);
  free(env[0]);
  free(env);
  free(args);
  c->open_handles += 3;
  k->open = 3;
  if (rc) {
    char detail[256];
    snprintf(detail, sizeof(detail), "%s: %s%s%s", x->command, uv_strerror(rc),
             x->install_hint ? "; " : "", x->install_hint ? x->install_hint : "");
    set_error(k, "cannot run exec plugin %s", detail);
    k->failed = true;
    /* uv_spawn failed: the process handle still needs closing. */
    finish_run(c);
    return;
  }
  uv_read_start((uv_stream_t *)&k->out, on_alloc, on_read);
  uv_timer_start(&k->kill, on_kill, PLUGIN_TIMEOUT_MS, 0);
}

void kcm_client_creds_close(struct kcm_client *c) {
  if (c->creds.running) {
    uv_process_kill(&c->creds.proc, SIGKILL);
    finish_run(c);
  }
}

void kcm_client_creds_release(struct kcm_client *c) {
  clear(&c->creds);
  kcm_buf_release(&c->creds.output);
  free(c->creds.error);
  c->creds.error = NULL;
}
