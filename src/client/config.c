/*
 * client/config.c — resolve connection settings from kubeconfig files or
 * the in-cluster service account; see include/kcm/client.h.
 *
 * Kubeconfig files are loaded with libyaml's document API so that every
 * error can name the file, the line and the field.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "kcm/buf.h"
#include "kcm/client.h"
#include "kcm/error.h"
#include "kcm/log.h"

#define MAX_FILE (16u << 20)
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct kc_file {
  char *path;
  char *dir;
  yaml_document_t doc;
  bool loaded;
};

struct loader {
  struct kc_file *files;
  size_t nfiles;
  char **errmsg;
};

static int fail(char **errmsg, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char **errmsg, int err, const char *fmt, ...) {
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

static int read_file(const char *path, char **data, size_t *len, char **errmsg,
                     const char *what) {
  struct kcm_buf b = KCM_BUF_INIT(MAX_FILE);
  char chunk[8192];
  size_t n;
  int err = 0;
  FILE *f = fopen(path, "rb");

  if (!f)
    return fail(errmsg, KCM_EIO, "%s %s: %s", what, path, strerror(errno));
  while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
    err = kcm_buf_append(&b, chunk, n);
    if (err)
      break;
  }
  if (!err && ferror(f))
    err = fail(errmsg, KCM_EIO, "%s %s: %s", what, path, strerror(errno));
  else if (err == KCM_ETOOBIG)
    fail(errmsg, err, "%s %s: larger than %u bytes", what, path, MAX_FILE);
  else if (err)
    fail(errmsg, err, "%s %s: out of memory", what, path);
  fclose(f);
  if (err) {
    kcm_buf_release(&b);
    return err;
  }
  *len = b.len;
  *data = kcm_buf_take(&b);
  return *data ? 0 : fail(errmsg, KCM_ENOMEM, "%s %s: out of memory", what, path);
}

/* A file holding credentials (or naming them: a kubeconfig can run a
 * command) should be the owner's alone, as kubectl and helm advise. */
static void warn_if_shared(const char *path, const char *what) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & (S_IRWXG | S_IRWXO)))
    kcm_warn("%s can be read or written by other users; it should be the owner's alone "
             "(chmod 600) path=\"%s\" mode=\"%04o\"",
             what, path, (unsigned)(st.st_mode & 07777));
}

/* --- base64 ---------------------------------------------------------------- */

static int b64_value(int c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

int kcm_client_base64_decode(const char *in, size_t len, char **out, size_t *out_len) {
  char *o = malloc(len / 4 * 3 + 4);
  unsigned acc = 0;
  int bits = 0, pad = 0;
  size_t n = 0, i;

  if (!o)
    return KCM_ENOMEM;
  for (i = 0; i < len; i++) {
    int c = (unsigned char)in[i], v;
    if (isspace(c))
      continue;
    if (c == '=') {
      pad++;
      continue;
    }
    v = b64_value(c);
    if (v < 0 || pad) {
      free(o);
      return KCM_EINVAL;
    }
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      o[n++] = (char)((acc >> bits) & 0xff);
    }
  }
  if (pad > 2 || bits >= 6) {
    free(o);
    return KCM_EINVAL;
  }
  o[n] = '\0';
  *out = o;
  *out_len = n;
  return 0;
}

/* --- YAML helpers ---------------------------------------------------------- */

static yaml_node_t *root_of(struct kc_file *f) {
  return f->loaded ? yaml_document_get_root_node(&f->doc) : NULL;
}

static yaml_node_t *map_get(struct kc_file *f, yaml_node_t *map, const char *key) {
  yaml_node_pair_t *p;

  if (!map || map->type != YAML_MAPPING_NODE)
    return NULL;
  for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(&f->doc, p->key);
    if (k && k->type == YAML_SCALAR_NODE && strlen(key) == k->data.scalar.length &&
        memcmp(k->data.scalar.value, key, k->data.scalar.length) == 0)
      return yaml_document_get_node(&f->doc, p->value);
  }
  return NULL;
}

static bool is_null(yaml_node_t *n) {
  const char *v;
  if (!n)
    return true;
  if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  v = (const char *)n->data.scalar.value;
  return !*v || !strcmp(v, "null") || !strcmp(v, "~") || !strcmp(v, "Null") ||
         !strcmp(v, "NULL");
}

static int type_error(struct loader *l, struct kc_file *f, yaml_node_t *n, const char *field,
                      const char *want) {
  return fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: %s: must be %s", f->path,
              n->start_mark.line + 1, field, want);
}

/* Copy a scalar field into *out (left NULL when absent or null). */
static int get_string(struct loader *l, struct kc_file *f, yaml_node_t *map, const char *key,
                      const char *field, char **out) {
  yaml_node_t *n = map_get(f, map, key);

  if (is_null(n))
    return 0;
  if (n->type != YAML_SCALAR_NODE)
    return type_error(l, f, n, field, "a string");
  *out = strndup((const char *)n->data.scalar.value, n->data.scalar.length);
  return *out ? 0 : fail(l->errmsg, KCM_ENOMEM, "out of memory");
}

static int get_bool(struct loader *l, struct kc_file *f, yaml_node_t *map, const char *key,
                    const char *field, bool *out) {
  static const char *const yes[] = {"true", "yes", "on", "y"};
  static const char *const no[] = {"false", "no", "off", "n"};
  yaml_node_t *n = map_get(f, map, key);
  const char *v;
  size_t i;

  if (is_null(n))
    return 0;
  if (n->type != YAML_SCALAR_NODE)
    return type_error(l, f, n, field, "true or false");
  v = (const char *)n->data.scalar.value;
  for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
    if (!strcasecmp(v, yes[i])) {
      *out = true;
      return 0;
    }
    if (!strcasecmp(v, no[i])) {
      *out = false;
      return 0;
    }
  }
  return type_error(l, f, n, field, "true or false");
}

static int load_file(struct kc_file *f, const char *path, char **errmsg) {
  yaml_parser_t parser;
  char *data = NULL, *slash;
  size_t len = 0;
  int err;

  memset(f, 0, sizeof(*f));
  f->path = strdup(path);
  f->dir = strdup(path);
  if (!f->path || !f->dir)
    return fail(errmsg, KCM_ENOMEM, "out of memory");
  slash = strrchr(f->dir, '/');
  if (slash)
    slash[slash == f->dir ? 1 : 0] = '\0';
  else
    strcpy(f->dir, ".");
  err = read_file(path, &data, &len, errmsg, "kubeconfig");
  if (err)
    return err;
  warn_if_shared(path, "kubeconfig");
  if (!yaml_parser_initialize(&parser)) {
    free(data);
    return fail(errmsg, KCM_ENOMEM, "out of memory");
  }
  yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
  if (!yaml_parser_load(&parser, &f->doc)) {
    err = fail(errmsg, KCM_EINVAL, "kubeconfig %s: line %zu column %zu: %s", path,
               parser.problem_mark.line + 1, parser.problem_mark.column + 1,
               parser.problem ? parser.problem : "invalid YAML");
  } else {
    yaml_node_t *root;
    f->loaded = true;
    root = yaml_document_get_root_node(&f->doc);
    if (root && !is_null(root) && root->type != YAML_MAPPING_NODE)
      err = fail(errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: the document must be a mapping",
                 path, root->start_mark.line + 1);
  }
  yaml_parser_delete(&parser);
  free(data);
  return err;
}

static void free_file(struct kc_file *f) {
  if (f->loaded)
    yaml_document_delete(&f->doc);
  free(f->path);
  free(f->dir);
}

/* Find the entry called `name` in the list `section` (clusters, users,
 * contexts) of the first file that defines it, and return its inner map
 * (`inner`: cluster, user, context). Sets *file. */
static int find_named(struct loader *l, const char *section, const char *inner,
                      const char *name, struct kc_file **file, yaml_node_t **out) {
  size_t i;
  *out = NULL;
  for (i = 0; i < l->nfiles; i++) {
    struct kc_file *f = &l->files[i];
    yaml_node_t *list = map_get(f, root_of(f), section);
    yaml_node_item_t *it;
    size_t idx = 0;

    if (is_null(list))
      continue;
    if (list->type != YAML_SEQUENCE_NODE)
      return type_error(l, f, list, section, "a list");
    for (it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++, idx++) {
      yaml_node_t *entry = yaml_document_get_node(&f->doc, *it);
      yaml_node_t *n;
      char field[64];

      snprintf(field, sizeof(field), "%s[%zu]", section, idx);
      if (!entry || entry->type != YAML_MAPPING_NODE)
        return type_error(l, f, entry ? entry : list, field, "a mapping");
      n = map_get(f, entry, "name");
      if (!n || n->type != YAML_SCALAR_NODE)
        continue;
      if (strcmp((const char *)n->data.scalar.value, name) != 0)
        continue;
      *file = f;
      *out = map_get(f, entry, inner);
      if (*out && !is_null(*out) && (*out)->type != YAML_MAPPING_NODE) {
        snprintf(field, sizeof(field), "%s[%zu].%s", section, idx, inner);
        return type_error(l, f, *out, field, "a mapping");
      }
      if (is_null(*out))
        *out = NULL;
      return 0;
    }
  }
  return 0;
}

/* An absolute path for a file named in `f` (relative to its directory). */
static char *resolve_path(struct kc_file *f, const char *p) {
  char *out = NULL;
  if (p[0] == '/')
    return strdup(p);
  if (asprintf(&out, "%s/%s", f->dir, p) < 0)
    return NULL;
  return out;
}

/* Load a PEM value given either inline (KEY-data, base64) or as a file. */
static int load_pem(struct loader *l, struct kc_file *f, yaml_node_t *map, const char *section,
                    const char *key, char **out, size_t *out_len) {
  char data_key[64], field[96], *b64 = NULL, *path = NULL;
  int err;

  snprintf(data_key, sizeof(data_key), "%s-data", key);
  snprintf(field, sizeof(field), "%s.%s", section, data_key);
  err = get_string(l, f, map, data_key, field, &b64);
  if (err)
    return err;
  if (b64) {
    yaml_node_t *n = map_get(f, map, data_key);
    err = kcm_client_base64_decode(b64, strlen(b64), out, out_len);
    free(b64);
    if (err == KCM_EINVAL)
      return fail(l->errmsg, err, "kubeconfig %s: line %zu: %s: not valid base64", f->path,
                  n->start_mark.line + 1, field);
    return err ? fail(l->errmsg, err, "out of memory") : 0;
  }
  snprintf(field, sizeof(field), "%s.%s", section, key);
  err = get_string(l, f, map, key, field, &path);
  if (err || !path)
    return err;
  {
    char *abs = resolve_path(f, path);
    free(path);
    if (!abs)
      return fail(l->errmsg, KCM_ENOMEM, "out of memory");
    err = read_file(abs, out, out_len, l->errmsg, key);
    if (err && l->errmsg && *l->errmsg) {
      yaml_node_t *n = map_get(f, map, key);
      char *inner = *l->errmsg;
      *l->errmsg = NULL;
      fail(l->errmsg, err, "kubeconfig %s: line %zu: %s: %s", f->path, n->start_mark.line + 1,
           field, inner);
      free(inner);
    }
    if (!err && !strcmp(key, "client-key"))
      warn_if_shared(abs, "client key");
    free(abs);
  }
  return err;
}

static int load_cluster(struct loader *l, struct kcm_client_config *cfg, const char *name) {
  struct kc_file *f = NULL;
  yaml_node_t *c;
  int err = find_named(l, "clusters", "cluster", name, &f, &c);

  if (err)
    return err;
  if (!f)
    return fail(l->errmsg, KCM_EINVAL, "kubeconfig: context %s names cluster \"%s\", which is "
                "not defined", cfg->context, name);
  if (!c)
    return 0;
  if ((err = get_string(l, f, c, "server", "cluster.server", &cfg->server)) ||
      (err = get_bool(l, f, c, "insecure-skip-tls-verify", "cluster.insecure-skip-tls-verify",
                      &cfg->insecure)) ||
      (err = get_string(l, f, c, "tls-server-name", "cluster.tls-server-name",
                        &cfg->tls_server_name)) ||
      (err = get_string(l, f, c, "proxy-url", "cluster.proxy-url", &cfg->proxy_url)) ||
      (err = load_pem(l, f, c, "cluster", "certificate-authority", &cfg->ca_pem,
                      &cfg->ca_pem_len)))
    return err;
  if (cfg->insecure && cfg->ca_pem)
    return fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: cluster \"%s\": specifying a root "
                "certificates file with the insecure flag is not allowed", f->path, name);
  return 0;
}

/* A list of strings (exec.args) as a NULL-terminated array. */
static int get_string_list(struct loader *l, struct kc_file *f, yaml_node_t *map,
                           const char *key, const char *field, char ***out) {
  yaml_node_t *list = map_get(f, map, key);
  yaml_node_item_t *it;
  size_t n = 0;
  *out = NULL;
  if (is_null(list))
    return 0;
  if (list->type != YAML_SEQUENCE_NODE)
    return type_error(l, f, list, field, "a list of strings");
  *out = calloc((size_t)(list->data.sequence.items.top - list->data.sequence.items.start) + 1,
                sizeof(char *));
  if (!*out)
    return fail(l->errmsg, KCM_ENOMEM, "out of memory");
  for (it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
    yaml_node_t *v = yaml_document_get_node(&f->doc, *it);
    if (!v || v->type != YAML_SCALAR_NODE)
      return type_error(l, f, v ? v : list, field, "a list of strings");
    if (!((*out)[n++] = strndup((const char *)v->data.scalar.value, v->data.scalar.length)))
      return fail(l->errmsg, KCM_ENOMEM, "out of memory");
  }
  return 0;
}

static int load_exec(struct loader *l, struct kcm_client_config *cfg, struct kc_file *f,
                     yaml_node_t *e) {
  struct kcm_client_exec *x;
  yaml_node_t *env;
  char *mode = NULL;
  int err;

  if (e->type != YAML_MAPPING_NODE)
    return type_error(l, f, e, "user.exec", "a mapping");
  x = cfg->exec = calloc(1, sizeof(*x));
  if (!x)
    return fail(l->errmsg, KCM_ENOMEM, "out of memory");
  if ((err = get_string(l, f, e, "apiVersion", "user.exec.apiVersion", &x->api_version)) ||
      (err = get_string(l, f, e, "command", "user.exec.command", &x->command)) ||
      (err = get_string(l, f, e, "installHint", "user.exec.installHint", &x->install_hint)) ||
      (err = get_string(l, f, e, "interactiveMode", "user.exec.interactiveMode", &mode)) ||
      (err = get_bool(l, f, e, "provideClusterInfo", "user.exec.provideClusterInfo",
                      &x->provide_cluster_info)) ||
      (err = get_string_list(l, f, e, "args", "user.exec.args", &x->args)))
    goto out;
  if (!x->command || !*x->command) {
    err = fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: user.exec.command: is required",
               f->path, e->start_mark.line + 1);
    goto out;
  }
  if (!x->api_version || (strcmp(x->api_version, "client.authentication.k8s.io/v1") &&
                          strcmp(x->api_version, "client.authentication.k8s.io/v1beta1"))) {
    err = fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: user.exec.apiVersion: must be "
               "client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1, not "
               "\"%s\"", f->path, e->start_mark.line + 1, x->api_version ? x->api_version : "");
    goto out;
  }
  if (!mode && !strcmp(x->api_version, "client.authentication.k8s.io/v1")) {
    err = fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: user.exec.interactiveMode: is "
               "required for client.authentication.k8s.io/v1 (Never, IfAvailable or Always)",
               f->path, e->start_mark.line + 1);
    goto out;
  }
  if (!mode || !strcmp(mode, "IfAvailable"))
    x->interactive = KCM_CLIENT_INTERACTIVE_IF_AVAILABLE;
  else if (!strcmp(mode, "Never"))
    x->interactive = KCM_CLIENT_INTERACTIVE_NEVER;
  else if (!strcmp(mode, "Always"))
    x->interactive = KCM_CLIENT_INTERACTIVE_ALWAYS;
  else {
    err = fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: user.exec.interactiveMode: must "
               "be Never, IfAvailable or Always, not \"%s\"", f->path, e->start_mark.line + 1,
               mode);
    goto out;
  }
  /* A command with a slash is a path, relative to the kubeconfig's directory;
   * a bare name is looked up in PATH. */
  if (strchr(x->command, '/') && x->command[0] != '/') {
    char *abs = resolve_path(f, x->command);
    if (!abs) {
      err = fail(l->errmsg, KCM_ENOMEM, "out of memory");
      goto out;
    }
    free(x->command);
    x->command = abs;
  }
  env = map_get(f, e, "env");
  if (!is_null(env)) {
    yaml_node_item_t *it;
    size_t n = 0;
    if (env->type != YAML_SEQUENCE_NODE) {
      err = type_error(l, f, env, "user.exec.env", "a list of {name, value}");
      goto out;
    }
    x->env = calloc((size_t)(env->data.sequence.items.top - env->data.sequence.items.start) + 1,
                    sizeof(char *));
    if (!x->env) {
      err = fail(l->errmsg, KCM_ENOMEM, "out of memory");
      goto out;
    }
    for (it = env->data.sequence.items.start; it < env->data.sequence.items.top; it++) {
      yaml_node_t *v = yaml_document_get_node(&f->doc, *it);
      char *name = NULL, *value = NULL;
      if (!v || v->type != YAML_MAPPING_NODE) {
        err = type_error(l, f, v ? v : env, "user.exec.env", "a list of {name, value}");
        goto out;
      }
      if ((err = get_string(l, f, v, "name", "user.exec.env.name", &name)) ||
          (err = get_string(l, f, v, "value", "user.exec.env.value", &value)) ||
          (!name && (err = type_error(l, f, v, "user.exec.env.name", "set"))) ||
          asprintf(&x->env[n++], "%s=%s", name, value ? value : "") < 0) {
        free(name);
        free(value);
        if (!err)
          err = fail(l->errmsg, KCM_ENOMEM, "out of memory");
        goto out;
      }
      free(name);
      free(value);
    }
  }
out:
  free(mode);
  return err;
}

static void free_strings(char **v) {
  size_t i;
  for (i = 0; v && v[i]; i++)
    free(v[i]);
  free(v);
}

static int load_user(struct loader *l, struct kcm_client_config *cfg, const char *name) {
  struct kc_file *f = NULL;
  yaml_node_t *u;
  int err = find_named(l, "users", "user", name, &f, &u);

  if (err)
    return err;
  if (!f)
    return fail(l->errmsg, KCM_EINVAL, "kubeconfig: context %s names user \"%s\", which is "
                "not defined", cfg->context, name);
  if (!u)
    return 0;
  if ((err = get_string(l, f, u, "token", "user.token", &cfg->token)) ||
      (err = get_string(l, f, u, "tokenFile", "user.tokenFile", &cfg->token_file)) ||
      (err = get_string(l, f, u, "username", "user.username", &cfg->username)) ||
      (err = get_string(l, f, u, "password", "user.password", &cfg->password)) ||
      (err = load_pem(l, f, u, "user", "client-certificate", &cfg->cert_pem,
                      &cfg->cert_pem_len)) ||
      (err = load_pem(l, f, u, "user", "client-key", &cfg->key_pem, &cfg->key_pem_len)))
    return err;
  if (cfg->token_file && cfg->token_file[0] != '/') {
    char *abs = resolve_path(f, cfg->token_file);
    if (!abs)
      return fail(l->errmsg, KCM_ENOMEM, "out of memory");
    free(cfg->token_file);
    cfg->token_file = abs;
  }
  if (cfg->token_file)
    warn_if_shared(cfg->token_file, "token file");
  if (!cfg->cert_pem != !cfg->key_pem)
    return fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: user \"%s\": client-certificate and "
                "client-key must be given together", f->path, name);
  if (!is_null(map_get(f, u, "exec")) && (err = load_exec(l, cfg, f, map_get(f, u, "exec"))))
    return err;
  if (map_get(f, u, "auth-provider") && !is_null(map_get(f, u, "auth-provider")))
    return fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: user.auth-provider: auth-provider "
                "plugins were removed from Kubernetes clients; use exec", f->path);
  return 0;
}

static int from_kubeconfig(struct loader *l, struct kcm_client_config *cfg,
                           const struct kcm_client_config_options *opts) {
  struct kc_file *f = NULL;
  yaml_node_t *ctx;
  char *cluster = NULL, *user = NULL;
  size_t i;
  int err;

  if (opts->context && *opts->context) {
    cfg->context = strdup(opts->context);
  } else {
    for (i = 0; i < l->nfiles && !cfg->context; i++) {
      err = get_string(l, &l->files[i], root_of(&l->files[i]), "current-context",
                       "current-context", &cfg->context);
      if (err)
        return err;
      if (cfg->context && !*cfg->context) {
        free(cfg->context);
        cfg->context = NULL;
      }
    }
    if (!cfg->context)
      return fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: no current-context is set; pass "
                  "--context", cfg->source);
  }
  if (!cfg->context)
    return fail(l->errmsg, KCM_ENOMEM, "out of memory");
  err = find_named(l, "contexts", "context", cfg->context, &f, &ctx);
  if (err)
    return err;
  if (!f)
    return fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: context \"%s\" is not defined",
                cfg->source, cfg->context);
  if ((err = get_string(l, f, ctx, "cluster", "context.cluster", &cluster)) ||
      (err = get_string(l, f, ctx, "user", "context.user", &user)) ||
      (err = get_string(l, f, ctx, "namespace", "context.namespace", &cfg->namespace)))
    goto out;
  if (!cluster) {
    err = fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: context \"%s\" names no cluster",
               f->path, cfg->context);
    goto out;
  }
  err = load_cluster(l, cfg, cluster);
  if (!err && user)
    err = load_user(l, cfg, user);
out:
  free(cluster);
  free(user);
  return err;
}

/* --- in-cluster ------------------------------------------------------------ */

static int from_cluster(struct kcm_client_config *cfg, char **errmsg) {
  const char *host = getenv("KUBERNETES_SERVICE_HOST");
  const char *port = getenv("KUBERNETES_SERVICE_PORT");
  const char *dir = getenv("KCM_SERVICEACCOUNT_DIR");
  char *path = NULL, *token = NULL, *ns = NULL;
  size_t len;
  int err;

  if (!dir || !*dir)
    dir = SA_DIR;
  if (asprintf(&cfg->server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
               port) < 0) {
    cfg->server = NULL;
    return fail(errmsg, KCM_ENOMEM, "out of memory");
  }
  cfg->source = strdup("in-cluster service account");
  if (asprintf(&cfg->token_file, "%s/token", dir) < 0) {
    cfg->token_file = NULL;
    return fail(errmsg, KCM_ENOMEM, "out of memory");
  }
  err = read_file(cfg->token_file, &token, &len, errmsg, "service account token");
  if (err)
    return err;
  free(token);
  if (asprintf(&path, "%s/ca.crt", dir) < 0)
    return fail(errmsg, KCM_ENOMEM, "out of memory");
  err = read_file(path, &cfg->ca_pem, &cfg->ca_pem_len, errmsg, "service account CA");
  free(path);
  if (err)
    return err;
  if (asprintf(&path, "%s/namespace", dir) < 0)
    return fail(errmsg, KCM_ENOMEM, "out of memory");
  if (access(path, F_OK) == 0 && read_file(path, &ns, &len, errmsg, "namespace") == 0) {
    while (len && isspace((unsigned char)ns[len - 1]))
      ns[--len] = '\0';
    cfg->namespace = ns;
  }
  free(path);
  return 0;
}

/* --- entry point ------------------------------------------------------------ */

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

/* Move the user and password of a server URL ("https://user:pass@host",
 * percent-encoded) out of it: they authenticate (Basic, as Go's HTTP client
 * does, unless the kubeconfig names a user of its own), and the URL, which
 * is logged, shown in metrics and messages, holds no secret. */
static int take_userinfo(struct kcm_client_config *cfg, char **errmsg) {
  size_t start, end, colon;
  char *bare, *user = NULL, *password = NULL;

  if (!kcm_client_url_userinfo(cfg->server, &start, &end))
    return 0;
  if (!(bare = kcm_client_redact_url(cfg->server)))
    return fail(errmsg, KCM_ENOMEM, "out of memory");
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
      return fail(errmsg, KCM_EINVAL, "server \"%s\" (from %s): the user and password are not "
                  "valid percent-encoding", bare, cfg->source ? cfg->source : "--master");
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

int kcm_client_config_load(struct kcm_client_config *cfg,
                           const struct kcm_client_config_options *opts, char **errmsg) {
  struct loader l = {NULL, 0, errmsg};
  char **paths = NULL, *home_cfg = NULL;
  size_t npaths = 0, i;
  const char *env = getenv("KUBECONFIG");
  int err = 0;

  memset(cfg, 0, sizeof(*cfg));
  if (errmsg)
    *errmsg = NULL;
  if (opts->kubeconfig && *opts->kubeconfig) {
    paths = malloc(sizeof(*paths));
    if (!paths || !(paths[0] = strdup(opts->kubeconfig))) {
      free(paths);
      return fail(errmsg, KCM_ENOMEM, "out of memory");
    }
    npaths = 1;
  } else if (env && *env) {
    err = kubeconfig_paths(env, &paths, &npaths);
    if (err)
      return fail(errmsg, err, "out of memory");
  }
  if (!npaths && !(env && *env)) {
    const char *home = getenv("HOME");
    if (home && asprintf(&home_cfg, "%s/.kube/config", home) >= 0 && access(home_cfg, F_OK) == 0) {
      paths = malloc(sizeof(*paths));
      if (!paths) {
        free(home_cfg);
        return fail(errmsg, KCM_ENOMEM, "out of memory");
      }
      paths[0] = home_cfg;
      home_cfg = NULL;
      npaths = 1;
    }
    free(home_cfg);
  }

  if (!npaths) {
    if (getenv("KUBERNETES_SERVICE_HOST") && getenv("KUBERNETES_SERVICE_PORT")) {
      err = from_cluster(cfg, errmsg);
    } else if (opts->master && *opts->master) {
      cfg->source = strdup("--master");
    } else if (env && *env) {
      err = fail(errmsg, KCM_EINVAL, "none of the files in KUBECONFIG (%s) exist, and kcm is "
                 "not running in a cluster (KUBERNETES_SERVICE_HOST is unset)", env);
    } else {
      err = fail(errmsg, KCM_EINVAL, "no kubeconfig: pass --kubeconfig, set KUBECONFIG or "
                 "create ~/.kube/config, or run kcm in a cluster");
    }
  } else {
    struct kcm_buf src = KCM_BUF_INIT(1 << 16);
    l.files = calloc(npaths, sizeof(*l.files));
    if (!l.files)
      err = fail(errmsg, KCM_ENOMEM, "out of memory");
    for (i = 0; !err && i < npaths; i++) {
      err = load_file(&l.files[i], paths[i], errmsg);
      l.nfiles = i + 1;
      kcm_buf_appendf(&src, "%s%s", i ? ":" : "", paths[i]);
    }
    cfg->source = kcm_buf_take(&src);
    if (!err)
      err = from_kubeconfig(&l, cfg, opts);
  }

  if (!err && opts->master && *opts->master) {
    free(cfg->server);
    cfg->server = strdup(opts->master);
  }
  if (!err && (!cfg->server || !*cfg->server))
    err = fail(errmsg, KCM_EINVAL, "kubeconfig %s: the cluster of context \"%s\" has no "
               "server; set cluster.server or pass --master", cfg->source ? cfg->source : "",
               cfg->context ? cfg->context : "");
  if (!err) {
    size_t n = strlen(cfg->server);
    while (n > 0 && cfg->server[n - 1] == '/')
      cfg->server[--n] = '\0';
    err = take_userinfo(cfg, errmsg);
  }
  if (!err && strncmp(cfg->server, "https://", 8) != 0 && strncmp(cfg->server, "http://", 7) != 0)
    err = fail(errmsg, KCM_EINVAL, "server \"%s\" (from %s): must start with https:// or "
               "http://", cfg->server, cfg->source ? cfg->source : "--master");
  if (!err && !cfg->namespace)
    cfg->namespace = strdup("default");

  for (i = 0; i < l.nfiles; i++)
    free_file(&l.files[i]);
  free(l.files);
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
  if (cfg->exec) {
    free(cfg->exec->api_version);
    free(cfg->exec->command);
    free(cfg->exec->install_hint);
    free_strings(cfg->exec->args);
    free_strings(cfg->exec->env);
    free(cfg->exec);
  }
  free(cfg->namespace);
  free(cfg->context);
  free(cfg->source);
  memset(cfg, 0, sizeof(*cfg));
}
