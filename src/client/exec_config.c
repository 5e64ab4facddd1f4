/*
 * client/exec_config.c — a kubeconfig user's exec credential plugin:
 * command, arguments, environment, apiVersion and interactiveMode, checked
 * as client-go checks them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"

#define API_V1 "client.authentication.k8s.io/v1"
#define API_V1BETA1 "client.authentication.k8s.io/v1beta1"

static void free_strings(char **v) {
  size_t i;
  for (i = 0; v && v[i]; i++)
    free(v[i]);
  free(v);
}

void kcm_client_exec_config_free(struct kcm_client_exec *x) {
  if (!x)
    return;
  free(x->api_version);
  free(x->command);
  free(x->install_hint);
  free_strings(x->args);
  free_strings(x->env);
  free(x);
}

/* Every field but env; the interactiveMode into *mode. */
static int read_fields(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                       yaml_node_t *e, struct kcm_client_exec *x, char **mode) {
  int err;

  if ((err = kcm_client_yaml_string(l, f, e, "apiVersion", "user.exec.apiVersion",
                                    &x->api_version)) ||
      (err = kcm_client_yaml_string(l, f, e, "command", "user.exec.command", &x->command)) ||
      (err = kcm_client_yaml_string(l, f, e, "installHint", "user.exec.installHint",
                                    &x->install_hint)) ||
      (err = kcm_client_yaml_string(l, f, e, "interactiveMode", "user.exec.interactiveMode",
                                    mode)) ||
      (err = kcm_client_yaml_bool(l, f, e, "provideClusterInfo", "user.exec.provideClusterInfo",
                                  &x->provide_cluster_info)))
    return err;
  return kcm_client_yaml_strings(l, f, e, "args", "user.exec.args", &x->args);
}

/* The command is there and the apiVersion one kcm speaks. */
static int check_command(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                         yaml_node_t *e, const struct kcm_client_exec *x) {
  if (!x->command || !*x->command)
    return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: "
                           "user.exec.command: is required", f->path, e->start_mark.line + 1);
  if (!x->api_version || (strcmp(x->api_version, API_V1) && strcmp(x->api_version, API_V1BETA1)))
    return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: "
                           "user.exec.apiVersion: must be " API_V1 " or " API_V1BETA1 ", not "
                           "\"%s\"", f->path, e->start_mark.line + 1,
                           x->api_version ? x->api_version : "");
  return 0;
}

/* x->interactive from `mode` (NULL when not given). */
static int set_interactive(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                           yaml_node_t *e, struct kcm_client_exec *x, const char *mode) {
  if (!mode && !strcmp(x->api_version, API_V1))
    return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: "
                           "user.exec.interactiveMode: is required for " API_V1 " (Never, "
                           "IfAvailable or Always)", f->path, e->start_mark.line + 1);
  if (!mode || !strcmp(mode, "IfAvailable"))
    x->interactive = KCM_CLIENT_INTERACTIVE_IF_AVAILABLE;
  else if (!strcmp(mode, "Never"))
    x->interactive = KCM_CLIENT_INTERACTIVE_NEVER;
  else if (!strcmp(mode, "Always"))
    x->interactive = KCM_CLIENT_INTERACTIVE_ALWAYS;
  else
    return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: "
                           "user.exec.interactiveMode: must be Never, IfAvailable or Always, "
                           "not \"%s\"", f->path, e->start_mark.line + 1, mode);
  return 0;
}

/* A command with a slash is a path, relative to the kubeconfig's directory;
 * a bare name is looked up in PATH. */
static int resolve_command(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                           struct kcm_client_exec *x) {
  char *abs;

  if (!strchr(x->command, '/') || x->command[0] == '/')
    return 0;
  abs = kcm_client_kcfile_path(f, x->command);
  if (!abs)
    return kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
  free(x->command);
  x->command = abs;
  return 0;
}

/* One {name, value} of env, v, as "name=value" into *out, which is left
 * NULL on failure (asprintf leaves its pointer undefined when it fails, so
 * it is stored only on success). */
static int env_entry(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                     yaml_node_t *env, yaml_node_t *v, char **out) {
  char *name = NULL, *value = NULL, *entry;
  int err;

  *out = NULL;
  if (!v || v->type != YAML_MAPPING_NODE)
    return kcm_client_yaml_type_error(l, f, v ? v : env, "user.exec.env",
                                      "a list of {name, value}");
  if (!(err = kcm_client_yaml_string(l, f, v, "name", "user.exec.env.name", &name)) &&
      !(err = kcm_client_yaml_string(l, f, v, "value", "user.exec.env.value", &value)) &&
      !(err = name ? 0 : kcm_client_yaml_type_error(l, f, v, "user.exec.env.name", "set"))) {
    if (asprintf(&entry, "%s=%s", name, value ? value : "") < 0)
      err = kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
    else
      *out = entry;
  }
  free(name);
  free(value);
  return err;
}

/* x->env: the list env as "name=value" strings, NULL-terminated. */
static int read_env(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                    yaml_node_t *e, struct kcm_client_exec *x) {
  yaml_node_t *env = kcm_client_yaml_get(f, e, "env");
  yaml_node_item_t *it;
  size_t n = 0;
  int err;

  if (kcm_client_yaml_is_null(env))
    return 0;
  if (env->type != YAML_SEQUENCE_NODE)
    return kcm_client_yaml_type_error(l, f, env, "user.exec.env", "a list of {name, value}");
  x->env = calloc((size_t)(env->data.sequence.items.top - env->data.sequence.items.start) + 1,
                  sizeof(char *));
  if (!x->env)
    return kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
  for (it = env->data.sequence.items.start; it < env->data.sequence.items.top; it++) {
    err = env_entry(l, f, env, yaml_document_get_node(&f->doc, *it), &x->env[n]);
    if (err)
      return err;
    n++;
  }
  return 0;
}

int kcm_client_exec_config_load(struct kcm_client_kubeconfig *l, struct kcm_client_config *cfg,
                                struct kcm_client_kcfile *f, yaml_node_t *e) {
  struct kcm_client_exec *x;
  char *mode = NULL;
  int err;

  if (e->type != YAML_MAPPING_NODE)
    return kcm_client_yaml_type_error(l, f, e, "user.exec", "a mapping");
  x = cfg->exec = calloc(1, sizeof(*x));
  if (!x)
    return kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
  if (!(err = read_fields(l, f, e, x, &mode)) && !(err = check_command(l, f, e, x)) &&
      !(err = set_interactive(l, f, e, x, mode)) && !(err = resolve_command(l, f, x)))
    err = read_env(l, f, e, x);
  free(mode);
  return err;
}
