/*
 * client/yaml.c — one kubeconfig file, parsed with libyaml's document API
 * so that every error can name the file, the line and the field; its
 * fields read as strings, booleans and lists of strings.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "kcm/error.h"

yaml_node_t *kcm_client_yaml_root(struct kcm_client_kcfile *f) {
  return f->loaded ? yaml_document_get_root_node(&f->doc) : NULL;
}

yaml_node_t *kcm_client_yaml_get(struct kcm_client_kcfile *f, yaml_node_t *map, const char *key) {
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

bool kcm_client_yaml_is_null(yaml_node_t *n) {
  const char *v;
  if (!n)
    return true;
  if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
    return false;
  v = (const char *)n->data.scalar.value;
  return !*v || !strcmp(v, "null") || !strcmp(v, "~") || !strcmp(v, "Null") ||
         !strcmp(v, "NULL");
}

int kcm_client_yaml_type_error(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                               yaml_node_t *n, const char *field, const char *want) {
  return kcm_client_fail(l->errmsg, KCM_EINVAL, "kubeconfig %s: line %zu: %s: must be %s",
                         f->path, n->start_mark.line + 1, field, want);
}

int kcm_client_yaml_string(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                           yaml_node_t *map, const char *key, const char *field, char **out) {
  yaml_node_t *n = kcm_client_yaml_get(f, map, key);

  if (kcm_client_yaml_is_null(n))
    return 0;
  if (n->type != YAML_SCALAR_NODE)
    return kcm_client_yaml_type_error(l, f, n, field, "a string");
  *out = strndup((const char *)n->data.scalar.value, n->data.scalar.length);
  return *out ? 0 : kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
}

int kcm_client_yaml_bool(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                         yaml_node_t *map, const char *key, const char *field, bool *out) {
  static const char *const yes[] = {"true", "yes", "on", "y"};
  static const char *const no[] = {"false", "no", "off", "n"};
  yaml_node_t *n = kcm_client_yaml_get(f, map, key);
  const char *v;
  size_t i;

  if (kcm_client_yaml_is_null(n))
    return 0;
  if (n->type != YAML_SCALAR_NODE)
    return kcm_client_yaml_type_error(l, f, n, field, "true or false");
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
  return kcm_client_yaml_type_error(l, f, n, field, "true or false");
}

int kcm_client_yaml_strings(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                            yaml_node_t *map, const char *key, const char *field, char ***out) {
  yaml_node_t *list = kcm_client_yaml_get(f, map, key);
  yaml_node_item_t *it;
  size_t n = 0;
  *out = NULL;
  if (kcm_client_yaml_is_null(list))
    return 0;
  if (list->type != YAML_SEQUENCE_NODE)
    return kcm_client_yaml_type_error(l, f, list, field, "a list of strings");
  *out = calloc((size_t)(list->data.sequence.items.top - list->data.sequence.items.start) + 1,
                sizeof(char *));
  if (!*out)
    return kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
  for (it = list->data.sequence.items.start; it < list->data.sequence.items.top; it++) {
    yaml_node_t *v = yaml_document_get_node(&f->doc, *it);
    if (!v || v->type != YAML_SCALAR_NODE)
      return kcm_client_yaml_type_error(l, f, v ? v : list, field, "a list of strings");
    if (!((*out)[n++] = strndup((const char *)v->data.scalar.value, v->data.scalar.length)))
      return kcm_client_fail(l->errmsg, KCM_ENOMEM, "out of memory");
  }
  return 0;
}

/* f's path and directory. */
static int set_names(struct kcm_client_kcfile *f, const char *path, char **errmsg) {
  char *slash;

  f->path = strdup(path);
  f->dir = strdup(path);
  if (!f->path || !f->dir)
    return kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
  slash = strrchr(f->dir, '/');
  if (slash)
    slash[slash == f->dir ? 1 : 0] = '\0';
  else
    strcpy(f->dir, ".");
  return 0;
}

/* Parse `len` bytes of `data` into f's document, whose root must be a
 * mapping (or empty). */
static int parse(struct kcm_client_kcfile *f, const char *data, size_t len, char **errmsg) {
  yaml_parser_t parser;
  int err = 0;

  if (!yaml_parser_initialize(&parser))
    return kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
  yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
  if (!yaml_parser_load(&parser, &f->doc)) {
    err = kcm_client_fail(errmsg, KCM_EINVAL, "kubeconfig %s: line %zu column %zu: %s",
                          f->path, parser.problem_mark.line + 1,
                          parser.problem_mark.column + 1,
                          parser.problem ? parser.problem : "invalid YAML");
  } else {
    yaml_node_t *root;
    f->loaded = true;
    root = yaml_document_get_root_node(&f->doc);
    if (root && !kcm_client_yaml_is_null(root) && root->type != YAML_MAPPING_NODE)
      err = kcm_client_fail(errmsg, KCM_EINVAL,
                            "kubeconfig %s: line %zu: the document must be a mapping", f->path,
                            root->start_mark.line + 1);
  }
  yaml_parser_delete(&parser);
  return err;
}

int kcm_client_kcfile_load(struct kcm_client_kcfile *f, const char *path, char **errmsg) {
  char *data = NULL;
  size_t len = 0;
  int err;

  memset(f, 0, sizeof(*f));
  err = set_names(f, path, errmsg);
  if (err)
    return err;
  err = kcm_client_read_file(path, &data, &len, errmsg, "kubeconfig");
  if (err)
    return err;
  kcm_client_warn_if_shared(path, "kubeconfig");
  err = parse(f, data, len, errmsg);
  free(data);
  return err;
}

void kcm_client_kcfile_free(struct kcm_client_kcfile *f) {
  if (f->loaded)
    yaml_document_delete(&f->doc);
  free(f->path);
  free(f->dir);
}

char *kcm_client_kcfile_path(struct kcm_client_kcfile *f, const char *p) {
  char *out = NULL;
  if (p[0] == '/')
    return strdup(p);
  if (asprintf(&out, "%s/%s", f->dir, p) < 0)
    return NULL;
  return out;
}
