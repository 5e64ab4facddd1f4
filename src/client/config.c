/*
 * client/config.c — resolve connection settings (see include/kcm/client.h):
 * pick their source (kubeconfig files, the in-cluster service account or
 * --master alone), then check the server they name. Also the file reading
 * and failure messages every source shares.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/log.h"

#define MAX_FILE (16u << 20)

int kcm_client_fail(char **errmsg, int err, const char *fmt, ...) {
  va_list ap;
  char *msg = NULL;

  va_start(ap, fmt);
  if (vasprintf(&msg, fmt, ap) < 0)
    msg = NULL;
  va_end(ap);
  if (errmsg) {
    free(*errmsg);
    *errmsg = msg;
  } else {
    free(msg);
  }
  return err;
}

int kcm_client_read_file(const char *path, char **data, size_t *len, char **errmsg,
                         const char *what) {
  struct kcm_buf b = KCM_BUF_INIT(MAX_FILE);
  char chunk[8192];
  size_t n;
  int err = 0;
  FILE *f = fopen(path, "rb");

  if (!f)
    return kcm_client_fail(errmsg, KCM_EIO, "%s %s: %s", what, path, strerror(errno));
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    err = kcm_buf_append(&b, chunk, n);
    if (err)
      break;
  }
  if (!err && ferror(f))
    err = kcm_client_fail(errmsg, KCM_EIO, "%s %s: %s", what, path, strerror(errno));
  else if (err == KCM_ETOOBIG)
    kcm_client_fail(errmsg, err, "%s %s: larger than %u bytes", what, path, MAX_FILE);
  else if (err)
    kcm_client_fail(errmsg, err, "%s %s: out of memory", what, path);
  fclose(f);
  if (err) {
    kcm_buf_release(&b);
    return err;
  }
  *len = b.len;
  *data = kcm_buf_take(&b);
  return *data ? 0 : kcm_client_fail(errmsg, KCM_ENOMEM, "%s %s: out of memory", what, path);
}

/* A file holding credentials (or naming them: a kubeconfig can run a
 * command) should be the owner's alone, as kubectl and helm advise. */
void kcm_client_warn_if_shared(const char *path, const char *what) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & (S_IRWXG | S_IRWXO)))
    kcm_warn("%s can be read or written by other users; it should be the owner's alone "
             "(chmod 600) path=\"%s\" mode=\"%04o\"",
             what, path, (unsigned)(st.st_mode & 07777));
}

/* Split $KUBECONFIG on ':' keeping only files that exist. */
static int kubeconfig_paths(const char *list, char ***out, size_t *n) {
  char *copy = strdup(list), *save = NULL, *p;
  char **paths = NULL;
  size_t count = 0;

  if (!copy)
    return KCM_ENOMEM;
  for (p = strtok_r(copy, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
    char **grown;
    if (!*p || access(p, F_OK) != 0)
      continue;
    grown = realloc(paths, (count + 1) * sizeof(*paths));
    if (!grown || !(grown[count] = strdup(p))) {
      free(grown ? grown : paths);
      free(copy);
      return KCM_ENOMEM;
    }
    paths = grown;
    count++;
  }
  free(copy);
  *out = paths;
  *n = count;
  return 0;
}

/* A one-path list holding `path` (owned by the list then). */
static char **one_path(char *path) {
  char **paths = malloc(sizeof(*paths));
  if (paths)
    paths[0] = path;
  return paths;
}

/* The kubeconfig files to merge: --kubeconfig, else those in $KUBECONFIG
 * that exist, else ~/.kube/config when $KUBECONFIG is unset and it exists.
 * None: *npaths is 0. */
static int choose_files(const struct kcm_client_config_options *opts, const char *env,
                        char ***paths, size_t *npaths, char **errmsg) {
  char *home_cfg = NULL;
  int err;

  if (opts->kubeconfig && *opts->kubeconfig) {
    char *copy = strdup(opts->kubeconfig);
    if (!copy || !(*paths = one_path(copy))) {
      free(copy);
      return kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
    }
    *npaths = 1;
  } else if (env && *env) {
    err = kubeconfig_paths(env, paths, npaths);
    if (err)
      return kcm_client_fail(errmsg, err, "out of memory");
  }
  if (!*npaths && !(env && *env)) {
    const char *home = getenv("HOME");
    /* asprintf leaves home_cfg undefined when it fails: not freed then. */
    if (home && asprintf(&home_cfg, "%s/.kube/config", home) < 0)
      return kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
    if (home_cfg && access(home_cfg, F_OK) == 0) {
      if (!(*paths = one_path(home_cfg))) {
        free(home_cfg);
        return kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
      }
      home_cfg = NULL;
      *npaths = 1;
    }
    free(home_cfg);
  }
  return 0;
}

static bool env_set(const char *name) {
  const char *v = getenv(name);
  return v && *v;
}

/* Settings when no kubeconfig file is there: in the cluster (its service's
 * host and port both set and not empty, as client-go asks), else the
 * --master URL alone. */
static int without_files(struct kcm_client_config *cfg,
                         const struct kcm_client_config_options *opts, const char *env,
                         char **errmsg) {
  if (env_set("KUBERNETES_SERVICE_HOST") && env_set("KUBERNETES_SERVICE_PORT"))
    return kcm_client_incluster_load(cfg, errmsg);
  if (opts->master && *opts->master) {
    cfg->source = strdup("--master");
    return 0;
  }
  if (env && *env)
    return kcm_client_fail(errmsg, KCM_EINVAL, "none of the files in KUBECONFIG (%s) exist, and "
                           "kcm is not running in a cluster (KUBERNETES_SERVICE_HOST or "
                           "KUBERNETES_SERVICE_PORT is unset or empty)", env);
  return kcm_client_fail(errmsg, KCM_EINVAL, "no kubeconfig: pass --kubeconfig, set KUBECONFIG "
                         "or create ~/.kube/config, or run kcm in a cluster");
}

/* Move the user and password of a server URL ("https://user:pass@host",
 * percent-encoded) out of it: they authenticate (Basic, as Go's HTTP client
 * does, unless the kubeconfig names a user of its own), and the URL, which
 * is logged, shown in metrics and messages, holds no secret. `from` names
 * where the URL came from, for messages. */
static int take_userinfo(struct kcm_client_config *cfg, const char *from, char **errmsg) {
  size_t start, end, colon;
  char *bare, *user = NULL, *password = NULL;

  if (!kcm_client_url_userinfo(cfg->server, &start, &end))
    return 0;
  if (!(bare = kcm_client_redact_url(cfg->server)))
    return kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
  for (colon = start; colon < end - 1 && cfg->server[colon] != ':'; colon++)
    ;
  if (!cfg->username && !cfg->token && !cfg->token_file && !cfg->exec) {
    user = kcm_client_unescape(cfg->server + start, colon - start);
    password = colon < end - 1
                   ? kcm_client_unescape(cfg->server + colon + 1, end - 1 - (colon + 1))
                   : strdup("");
    if (!user || !password) {
      free(user);
      if (password)
        explicit_bzero(password, strlen(password));
      free(password);
      explicit_bzero(cfg->server, strlen(cfg->server));
      free(cfg->server);
      cfg->server = bare;
      return kcm_client_fail(errmsg, KCM_EINVAL, "server \"%s\" (from %s): the user and "
                             "password are not valid percent-encoding", bare, from);
    }
    if (cfg->password)
      explicit_bzero(cfg->password, strlen(cfg->password));
    free(cfg->password);
    cfg->username = user;
    cfg->password = password;
  }
  explicit_bzero(cfg->server, strlen(cfg->server));
  free(cfg->server);
  cfg->server = bare;
  return 0;
}

/* The server: --master over the source's, without trailing slashes or
 * userinfo, http or https, with a host; the namespace "default" when none
 * is set. */
static int check_server(struct kcm_client_config *cfg,
                        const struct kcm_client_config_options *opts, char **errmsg) {
  const char *from = cfg->source ? cfg->source : "--master";
  size_t n;
  int err;

  if (opts->master && *opts->master) {
    free(cfg->server);
    cfg->server = strdup(opts->master);
    from = "--master";
  }
  if (!cfg->server || !*cfg->server)
    return kcm_client_fail(errmsg, KCM_EINVAL, "kubeconfig %s: the cluster of context \"%s\" "
                           "has no server; set cluster.server or pass --master",
                           cfg->source ? cfg->source : "", cfg->context ? cfg->context : "");
  n = strlen(cfg->server);
  while (n > 0 && cfg->server[n - 1] == '/')
    cfg->server[--n] = '\0';
  err = take_userinfo(cfg, from, errmsg);
  if (err)
    return err;
  if (strncmp(cfg->server, "https://", 8) != 0 && strncmp(cfg->server, "http://", 7) != 0)
    return kcm_client_fail(errmsg, KCM_EINVAL, "server \"%s\" (from %s): must start with "
                           "https:// or http://", cfg->server, from);
  if (kcm_client_url_host_empty(cfg->server))
    return kcm_client_fail(errmsg, KCM_EINVAL, "server \"%s\" (from %s): has no host; it "
                           "must be https://host[:port]", cfg->server, from);
  if (!cfg->namespace)
    cfg->namespace = strdup("default");
  return 0;
}

int kcm_client_config_load(struct kcm_client_config *cfg,
                           const struct kcm_client_config_options *opts, char **errmsg) {
  char **paths = NULL;
  size_t npaths = 0, i;
  const char *env = getenv("KUBECONFIG");
  int err;

  memset(cfg, 0, sizeof(*cfg));
  if (errmsg)
    *errmsg = NULL;
  err = choose_files(opts, env, &paths, &npaths, errmsg);
  if (err)
    return err;
  if (!npaths)
    err = without_files(cfg, opts, env, errmsg);
  else
    err = kcm_client_kubeconfig_load(cfg, paths, npaths, opts, errmsg);
  if (!err)
    err = check_server(cfg, opts, errmsg);
  for (i = 0; i < npaths; i++)
    free(paths[i]);
  free(paths);
  if (err)
    kcm_client_config_release(cfg);
  return err;
}

void kcm_client_config_release(struct kcm_client_config *cfg) {
  free(cfg->server);
  free(cfg->ca_pem);
  free(cfg->tls_server_name);
  free(cfg->proxy_url);
  free(cfg->cert_pem);
  if (cfg->key_pem)
    explicit_bzero(cfg->key_pem, cfg->key_pem_len);
  free(cfg->key_pem);
  if (cfg->token)
    explicit_bzero(cfg->token, strlen(cfg->token));
  free(cfg->token);
  free(cfg->token_file);
  free(cfg->username);
  if (cfg->password)
    explicit_bzero(cfg->password, strlen(cfg->password));
  free(cfg->password);
  kcm_client_exec_config_free(cfg->exec);
  free(cfg->namespace);
  free(cfg->context);
  free(cfg->source);
  memset(cfg, 0, sizeof(*cfg));
}
