/*
 * client/kubeconfig.c — settings from kubeconfig files merged as client-go
 * merges them: the first file that sets current-context, or defines a
 * context, cluster or user of a name, wins.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/buf.h"
#include "kcm/error.h"

/* Find the entry called `name` in the list `section` (clusters, users,
 * contexts) of the first file that defines it, and return its inner map
 * (`inner`: cluster, user, context). Sets *file. */
static int find_named(struct kcm_client_kubeconfig *l, const char *section, const char *inner,
                      const char *name, struct kcm_client_kcfile **file, yaml_node_t **out) {
  size_t i;
  *out = NULL;
  for (i = 0; i < l->nfiles; i++) {
    struct kcm_client_kcfile *f = &l->files[i];
    yaml_node_t *list = kcm_client_yaml_get(f, kcm_client_yaml_root(f), section);
    yaml_node_item_t *it;
    size_t idx = 0;

    if (kcm_client_yaml_is_null(list))
      continue;
    if (list->type != YAML_SEQUENCE_NODE)
      return kcm_client_yaml_type_error(l, f, list, section, "a list");
    for (it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++, idx++) {
      yaml_node_t *entry = yaml_document_get_node(&f->doc, *it);
      yaml_node_t *n;
      char field[64];

      snprintf(field, sizeof(field), "%s[%zu]", section, idx);
      if (!entry || entry->type != YAML_MAPPING_NODE)
        return kcm_client_yaml_type_error(l, f, entry ? entry : list, field, "a mapping");
      n = kcm_client_yaml_get(f, entry, "name");
      if (!n || n->type != YAML_SCALAR_NODE)
        continue;
      if (strcmp((const char *)n->data.scalar.value, name) != 0)
        continue;
      *file = f;
      *out = kcm_client_yaml_get(f, entry, inner);
      if (*out && !kcm_client_yaml_is_null(*out) && (*out)->type != YAML_MAPPING_NODE) {
        snprintf(field, sizeof(field), "%s[%zu].%s", section, idx, inner);
        return kcm_client_yaml_type_error(l, f, *out, field, "a mapping");
      }
      if (kcm_client_yaml_is_null(*out))
        *out = NULL;
      return 0;
    }
  }
  return 0;
}

/* Read the PEM file `key` of `map` names (relative to f's directory). */
static int read_pem_file(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                         yaml_node_t *map, const char *key, const char *field,
                         const char *path, char **out, size_t *out_len) {
  char *abs = kcm_client_kcfile_path(f, path);
  int err;

  if (!abs)
    return kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
  err = kcm_client_read_file(abs, out, out_len, l->errmsg, key);
  if (err && l->errmsg && *l->errmsg) {
    yaml_node_t *n = kcm_client_yaml_get(f, map, key);
    char *inner = *l->errmsg;
    *l->errmsg = NULL;
    kcm_client_fail(l->errmsg, err, "kubeconfig %s: line %zu: %s: %s", f->path,
                    n->start_mark.line + 1, field, inner);
    free(inner);
  }
  if (!err && !strcmp(key, "client-key"))
    kcm_client_warn_if_shared(abs, "client key");
  free(abs);
  return err;
}

/* Load a PEM value given either inline (KEY-data, base64) or as a file. */
static int load_pem(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                    yaml_node_t *map, const char *section, const char *key, char **out,
                    size_t *out_len) {
  char data_key[64], field[96], *b64 = NULL, *path = NULL;
  int err;

  snprintf(data_key, sizeof(data_key), "%s-data", key);
  snprintf(field, sizeof(field), "%s.%s", section, data_key);
  err = kcm_client_yaml_string(l, f, map, data_key, field, &b64);
  if (err)
    return err;
  if (b64) {
    yaml_node_t *n = kcm_client_yaml_get(f, map, data_key);
    err = kcm_client_base64_decode(b64, strlen(b64), out, out_len);
    free(b64);
    if (err == KCM_EINVAL)
      return kcm_client_fail(l->errmsg, err, "kubeconfig %s: line %zu: %s: not valid base64",
                             f->path, n->start_mark.line + 1, field);
    return err ? kcm_client_fail(l->errmsg, err, "out of memory") : 0;
  }
  snprintf(field, sizeof(field), "%s.%s", section, key);
  err = kcm_client_yaml_string(l, f, map, key, field, &path);
  if (err || !path)
    return err;
  err = read_pem_file(l, f, map, key, field, path, out, out_len);
  free(path);
  return err;
}

/* The cluster's server names a host: client-go refuses a URL without one
 * ("host must be a URL or a host:port pair"), and "https://user@" is one
 * once its userinfo is taken out. The URL shown holds no userinfo. */
static int check_host(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                      yaml_node_t *c, const char *name, const char *server) {
  yaml_node_t *n = kcm_client_yaml_get(f, c, "server");
  char *shown;
  int err;

  if (!kcm_client_url_host_empty(server))
    return 0;
  if (!(shown = kcm_client_redact_url(server)))
    return kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
  err = kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: cluster \"%s\": "
                        "cluster.server \"%s\" has no host; it must be "
                        "https://host[:port]", f->path, n->start_mark.line + 1, name, shown);
  free(shown);
  return err;
}

/* The cluster called name; its server is not checked when --master
 * (master) replaces it. */
static int load_cluster(struct kcm_client_kubeconfig *l, struct kcm_client_config *cfg,
                        const char *name, const char *master) {
  struct kcm_client_kcfile *f = NULL;
  yaml_node_t *c;
  int err = find_named(l, "clusters", "cluster", name, &f, &c);

  if (err)
    return err;
  if (!f)
    return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig: context %s names cluster "
                           "\"%s\", which is not defined", cfg->context, name);
  if (!c)
    return 0;
  if ((err = kcm_client_yaml_string(l, f, c, "server", "cluster.server", &cfg->server)) ||
      (err = kcm_client_yaml_bool(l, f, c, "insecure-skip-tls-verify",
                                  "cluster.insecure-skip-tls-verify", &cfg->insecure)) ||
      (err = kcm_client_yaml_string(l, f, c, "tls-server-name", "cluster.tls-server-name",
                                    &cfg->tls_server_name)) ||
      (err = kcm_client_yaml_string(l, f, c, "proxy-url", "cluster.proxy-url",
                                    &cfg->proxy_url)) ||
      (err = load_pem(l, f, c, "cluster", "certificate-authority", &cfg->ca_pem,
                      &cfg->ca_pem_len)))
    return err;
  if (cfg->server && !(master && *master) && (err = check_host(l, f, c, name, cfg->server)))
    return err;
  if (cfg->insecure && cfg->ca_pem)
    return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: cluster \"%s\": specifying "
                           "a root certificates file with the insecure flag is not allowed",
                           f->path, name);
  return 0;
}

/* The user's token, token file, basic auth and client certificate. */
static int load_user_secrets(struct kcm_client_kubeconfig *l, struct kcm_client_config *cfg,
                             struct kcm_client_kcfile *f, yaml_node_t *u) {
  int err;

  if ((err = kcm_client_yaml_string(l, f, u, "token", "user.token", &cfg->token)) ||
      (err = kcm_client_yaml_string(l, f, u, "tokenFile", "user.tokenFile",
                                    &cfg->token_file)) ||
      (err = kcm_client_yaml_string(l, f, u, "username", "user.username", &cfg->username)) ||
      (err = kcm_client_yaml_string(l, f, u, "password", "user.password", &cfg->password)) ||
      (err = load_pem(l, f, u, "user", "client-certificate", &cfg->cert_pem,
                      &cfg->cert_pem_len)) ||
      (err = load_pem(l, f, u, "user", "client-key", &cfg->key_pem, &cfg->key_pem_len)))
    return err;
  if (cfg->token_file && cfg->token_file[0] != '/') {
    char *abs = kcm_client_kcfile_path(f, cfg->token_file);
    if (!abs)
      return kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
    free(cfg->token_file);
    cfg->token_file = abs;
  }
  if (cfg->token_file)
    kcm_client_warn_if_shared(cfg->token_file, "token file");
  return 0;
}

static int load_user(struct kcm_client_kubeconfig *l, struct kcm_client_config *cfg,
                     const char *name) {
  struct kcm_client_kcfile *f = NULL;
  yaml_node_t *u, *exec, *provider;
  int err = find_named(l, "users", "user", name, &f, &u);

  if (err)
    return err;
  if (!f)
    return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig: context %s names user \"%s\", "
                           "which is not defined", cfg->context, name);
  if (!u)
    return 0;
  if ((err = load_user_secrets(l, cfg, f, u)))
    return err;
  if (!cfg->cert_pem != !cfg->key_pem)
    return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: user \"%s\": "
                           "client-certificate and client-key must be given together",
                           f->path, name);
  exec = kcm_client_yaml_get(f, u, "exec");
  if (!kcm_client_yaml_is_null(exec) && (err = kcm_client_exec_config_load(l, cfg, f, exec)))
    return err;
  provider = kcm_client_yaml_get(f, u, "auth-provider");
  if (provider && !kcm_client_yaml_is_null(provider))
    return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: user.auth-provider: "
                           "auth-provider plugins were removed from Kubernetes clients; use "
                           "exec", f->path);
  return 0;
}

/* cfg->context: the one opts names, else the first file's current-context. */
static int choose_context(struct kcm_client_kubeconfig *l, struct kcm_client_config *cfg,
                          const struct kcm_client_config_options *opts) {
  size_t i;
  int err;

  if (opts->context && *opts->context) {
    cfg->context = strdup(opts->context);
  } else {
    for (i = 0; i < l->nfiles && !cfg->context; i++) {
      err = kcm_client_yaml_string(l, &l->files[i], kcm_client_yaml_root(&l->files[i]),
                                   "current-context", "current-context", &cfg->context);
      if (err)
        return err;
      if (cfg->context && !*cfg->context) {
        free(cfg->context);
        cfg->context = NULL;
      }
    }
    if (!cfg->context)
      return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: no current-context is "
                             "set; pass --context", cfg->source);
  }
  if (!cfg->context)
    return kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
  return 0;
}

static int from_kubeconfig(struct kcm_client_kubeconfig *l, struct kcm_client_config *cfg,
                           const struct kcm_client_config_options *opts) {
  struct kcm_client_kcfile *f = NULL;
  yaml_node_t *ctx;
  char *cluster = NULL, *user = NULL;
  int err = choose_context(l, cfg, opts);

  if (err)
    return err;
  err = find_named(l, "contexts", "context", cfg->context, &f, &ctx);
  if (err)
    return err;
  if (!f)
    return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: context \"%s\" is not "
                           "defined", cfg->source, cfg->context);
  if ((err = kcm_client_yaml_string(l, f, ctx, "cluster", "context.cluster", &cluster)) ||
      (err = kcm_client_yaml_string(l, f, ctx, "user", "context.user", &user)) ||
      (err = kcm_client_yaml_string(l, f, ctx, "namespace", "context.namespace",
                                    &cfg->namespace)))
    goto out;
  if (!cluster) {
    err = kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: context \"%s\" names no "
                          "cluster", f->path, cfg->context);
    goto out;
  }
  err = load_cluster(l, cfg, cluster, opts->master);
  if (!err && user)
    err = load_user(l, cfg, user);
out:
  free(cluster);
  free(user);
  return err;
}

int kcm_client_kubeconfig_load(struct kcm_client_config *cfg, char *const *paths,
                               size_t npaths, const struct kcm_client_config_options *opts,
                               char **errmsg) {
  struct kcm_client_kubeconfig l = {NULL, 0, errmsg};
  struct kcm_buf src = KCM_BUF_INIT(1 << 16);
  size_t i;
  int err = 0;

  l.files = calloc(npaths, sizeof(*l.files));
  if (!l.files)
    err = kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
  for (i = 0; !err && i < npaths; i++) {
    err = kcm_client_kcfile_load(&l.files[i], paths[i], errmsg);
    l.nfiles = i + 1;
    kcm_buf_appendf(&src, "%s%s", i ? ":" : "", paths[i]);
  }
  cfg->source = kcm_buf_take(&src);
  if (!err)
    err = from_kubeconfig(&l, cfg, opts);
  for (i = 0; i < l.nfiles; i++)
    kcm_client_kcfile_free(&l.files[i]);
  free(l.files);
  return err;
}
