/* The json-c tree decoder the decoders are checked against; see tree.h. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/api/internal.h"
#include "tree.h"

static int cmp_pair(const void *a, const void *b) {
  return strcmp(((const struct kcm_pair *)a)->key, ((const struct kcm_pair *)b)->key);
}
#include "kcm/error.h"

/* --- field access --------------------------------------------------------------- */

static int get_array(struct kcm_api_dctx *d, struct json_object *o, const char *key,
                     const char *field, struct json_object **out) {
  *out = kcm_api_get(o, key);
  if (*out && !json_object_is_type(*out, json_type_array))
    return kcm_api_bad(d, field, "must be a list");
  return 0;
}

static int get_string(struct kcm_api_dctx *d, struct json_object *o, const char *key,
                      const char *field, const char **out) {
  struct json_object *v = kcm_api_get(o, key);
  *out = NULL;
  if (!v)
    return 0;
  if (!json_object_is_type(v, json_type_string))
    return kcm_api_bad(d, field, "must be a string");
  *out = json_object_get_string(v);
  return 0;
}

static int get_int(struct kcm_api_dctx *d, struct json_object *o, const char *key,
                   const char *field, int64_t lo, int64_t hi, int64_t *out) {
  struct json_object *v = kcm_api_get(o, key);
  int64_t x;
  if (!v)
    return 0;
  if (!json_object_is_type(v, json_type_int))
    return kcm_api_bad(d, field, "must be an integer");
  errno = 0;
  x = json_object_get_int64(v);
  /* json-c holds numbers past INT64_MAX as unsigned and saturates them. */
  if (x == INT64_MAX && json_object_get_uint64(v) != (uint64_t)INT64_MAX)
    return kcm_api_bad(d, field, "out of range");
  if (errno || x < lo || x > hi)
    return kcm_api_bad(d, field, "out of range");
  *out = x;
  return 0;
}

static int get_i32(struct kcm_api_dctx *d, struct json_object *o, const char *key,
                   const char *field, int32_t *out) {
  int64_t v = *out;
  int err = get_int(d, o, key, field, INT32_MIN, INT32_MAX, &v);
  *out = (int32_t)v;
  return err;
}

static int get_bool(struct kcm_api_dctx *d, struct json_object *o, const char *key,
                    const char *field, bool *out) {
  struct json_object *v = kcm_api_get(o, key);
  if (!v)
    return 0;
  if (!json_object_is_type(v, json_type_boolean))
    return kcm_api_bad(d, field, "must be true or false");
  *out = json_object_get_boolean(v);
  return 0;
}

static int get_time(struct kcm_api_dctx *d, struct json_object *o, const char *key,
                    const char *field, int64_t *out) {
  const char *s;
  int err = get_string(d, o, key, field, &s);
  if (err || !s)
    return err;
  if (kcm_api_parse_time(s, out))
    return kcm_api_bad(d, field, "is not an RFC 3339 time");
  return 0;
}

static int owned_string(struct kcm_api_dctx *d, struct json_object *o, const char *key,
                        const char *field, char **out) {
  const char *s;
  int err = get_string(d, o, key, field, &s);
  *out = NULL;
  if (err || !s)
    return err;
  *out = strdup(s);
  return *out ? 0 : KCM_ENOMEM;
}

/* --- shared parts ---------------------------------------------------------------- */

static int decode_pairs(struct kcm_api_dctx *d, struct json_object *obj, const char *field,
                        struct kcm_pairs *out) {
  struct json_object_iterator it, end;
  size_t n;
  out->items = NULL;
  out->n = 0;
  if (!obj)
    return 0;
  if (!json_object_is_type(obj, json_type_object))
    return kcm_api_bad(d, field, "must be an object of strings");
  n = (size_t)json_object_object_length(obj);
  if (!n)
    return 0;
  out->items = calloc(n, sizeof(*out->items));
  if (!out->items)
    return KCM_ENOMEM;
  it = json_object_iter_begin(obj);
  end = json_object_iter_end(obj);
  for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
    struct json_object *v = json_object_iter_peek_value(&it);
    struct kcm_pair *p = &out->items[out->n];
    if (!json_object_is_type(v, json_type_string))
      return kcm_api_bad(d, field, "must be an object of strings");
    /* kubectl's copy of the whole object: large, and never read. */
    if (!strcmp(json_object_iter_peek_name(&it), KCM_API_LAST_APPLIED))
      continue;
    p->key = strdup(json_object_iter_peek_name(&it));
    p->value = strdup(json_object_get_string(v));
    out->n++;
    if (!p->key || !p->value)
      return KCM_ENOMEM;
  }
  if (out->n > 1)
    qsort(out->items, out->n, sizeof(*out->items), cmp_pair);
  return 0;
}

static int decode_conditions(struct kcm_api_dctx *d, struct json_object *status,
                             const char *field, struct kcm_conditions *out) {
  struct json_object *list;
  size_t i, n;
  int err = get_array(d, status, "conditions", field, &list);
  if (err || !list)
    return err;
  n = json_object_array_length(list);
  if (!n)
    return 0;
  out->items = calloc(n, sizeof(*out->items));
  if (!out->items)
    return KCM_ENOMEM;
  for (i = 0; i < n; i++) {
    struct json_object *c = json_object_array_get_idx(list, i);
    struct kcm_condition *k = &out->items[out->n];
    if (!json_object_is_type(c, json_type_object))
      return kcm_api_bad(d, field, "entries must be objects");
    out->n++;
    if ((err = owned_string(d, c, "type", field, &k->type)) ||
        (err = owned_string(d, c, "status", field, &k->status)) ||
        (err = owned_string(d, c, "reason", field, &k->reason)) ||
        (err = owned_string(d, c, "message", field, &k->message)) ||
        (err = get_time(d, c, "lastUpdateTime", field, &k->last_update)) ||
        (err = get_time(d, c, "lastTransitionTime", field, &k->last_transition)))
      return err;
    if (!k->type)
      return kcm_api_bad(d, field, "entries need a type");
  }
  return 0;
}

static int decode_owners(struct kcm_api_dctx *d, struct kcm_object *o,
                         struct json_object *meta) {
  struct json_object *refs;
  size_t i, n;
  int err = get_array(d, meta, "ownerReferences", "metadata.ownerReferences", &refs);
  if (err || !refs)
    return err;
  n = json_object_array_length(refs);
  o->nowners = n > UINT16_MAX ? UINT16_MAX : (uint16_t)n;
  for (i = 0; i < n; i++) {
    struct json_object *r = json_object_array_get_idx(refs, i);
    const char *av, *kind, *name, *uid;
    bool controller = false, block = false;
    if (!json_object_is_type(r, json_type_object))
      return kcm_api_bad(d, "metadata.ownerReferences", "entries must be objects");
    if ((err =
             get_bool(d, r, "controller", "metadata.ownerReferences.controller", &controller)))
      return err;
    if (!controller || o->has_controller)
      continue;
    if ((err = get_string(d, r, "apiVersion", "metadata.ownerReferences.apiVersion", &av)) ||
        (err = get_string(d, r, "kind", "metadata.ownerReferences.kind", &kind)) ||
        (err = get_string(d, r, "name", "metadata.ownerReferences.name", &name)) ||
        (err = get_string(d, r, "uid", "metadata.ownerReferences.uid", &uid)) ||
        (err = get_bool(d, r, "blockOwnerDeletion",
                        "metadata.ownerReferences.blockOwnerDeletion", &block)))
      return err;
    if (!av || !kind || !name || !uid)
      return kcm_api_bad(d, "metadata.ownerReferences",
                         "apiVersion, kind, name and uid are required");
    if (kcm_api_parse_uid(uid, &o->controller.uid))
      return kcm_api_bad(d, "metadata.ownerReferences.uid", "is not a UID");
    o->controller.api_version = kcm_intern_str(d->pool, av);
    o->controller.kind = kcm_intern_str(d->pool, kind);
    o->controller.name = kcm_intern_str(d->pool, name);
    o->controller.block_owner_deletion = block;
    o->has_controller = true;
    if (!o->controller.api_version || !o->controller.kind || !o->controller.name)
      return KCM_ENOMEM;
  }
  return 0;
}

static int decode_meta(struct kcm_api_dctx *d, struct kcm_object *o, struct json_object *obj,
                       struct json_object **meta_out) {
  struct json_object *meta;
  const char *name, *ns, *uid, *rv;
  const char *why = NULL;
  int err = kcm_api_get_object(d, obj, "metadata", "metadata", &meta);

  if (err)
    return err;
  if (!meta)
    return kcm_api_bad(d, "metadata", "is required");
  *meta_out = meta;
  if ((err = get_string(d, meta, "name", "metadata.name", &name)) ||
      (err = get_string(d, meta, "namespace", "metadata.namespace", &ns)) ||
      (err = get_string(d, meta, "uid", "metadata.uid", &uid)) ||
      (err = get_string(d, meta, "resourceVersion", "metadata.resourceVersion", &rv)) ||
      (err = get_int(d, meta, "generation", "metadata.generation", 0, INT64_MAX,
                     &o->generation)) ||
      (err =
           get_time(d, meta, "creationTimestamp", "metadata.creationTimestamp", &o->created)) ||
      (err = get_time(d, meta, "deletionTimestamp", "metadata.deletionTimestamp", &o->deleted)))
    return err;
  if (name && strlen(name) != (size_t)json_object_get_string_len(kcm_api_get(meta, "name")))
    return kcm_api_bad(d, "metadata.name", KCM_API_NUL_PROBLEM);
  if (ns && strlen(ns) != (size_t)json_object_get_string_len(kcm_api_get(meta, "namespace")))
    return kcm_api_bad(d, "metadata.namespace", KCM_API_NUL_PROBLEM);
  if (!name || !*name)
    return kcm_api_bad(d, "metadata.name", "is required");
  if (strlen(name) > KCM_API_NAME_MAX)
    return kcm_api_bad(d, "metadata.name", "is longer than 253 characters");
  if (!ns || !*ns)
    return kcm_api_bad(d, "metadata.namespace", "is required");
  if (!uid || kcm_api_parse_uid(uid, &o->uid))
    return kcm_api_bad(d, "metadata.uid", "is not a UID");
  if (!rv)
    return kcm_api_bad(d, "metadata.resourceVersion", "is required");
  if (!kcm_api_parse_rv(rv, &o->rv))
    return kcm_api_bad(d, "metadata.resourceVersion", "is not a number");
  if (!(o->name = strdup(name)) || !(o->ns = kcm_intern_str(d->pool, ns)))
    return KCM_ENOMEM;
  err = kcm_api_labels_decode(&o->labels, d->pool, kcm_api_get(meta, "labels"), &why);
  if (err == KCM_EINVAL)
    return kcm_api_bad(d, "metadata.labels", why);
  if (err)
    return err;
  return decode_owners(d, o, meta);
}

/* The most restarts of a restartable init container (a sidecar), from the
 * statuses in `list` (checked first): the sidecars' names sorted once, each
 * status looked up among them. */
static int sidecar_restarts(struct kcm_api_dctx *d, struct kcm_pod *p, struct json_object *spec,
                            struct json_object *list) {
  struct json_object *inits;
  const char **sidecars = NULL, *name;
  size_t i, m, k = 0, n = json_object_array_length(list);
  int32_t r = 0;
  int err;

  for (i = 0; i < n; i++) {
    struct json_object *cs = json_object_array_get_idx(list, i);
    if ((err = get_string(d, cs, "name", "status.initContainerStatuses.name", &name)) ||
        (err = get_i32(d, cs, "restartCount", "status.initContainerStatuses.restartCount", &r)))
      return err;
  }
  if ((err = get_array(d, spec, "initContainers", "spec.initContainers", &inits)))
    return err;
  m = inits ? json_object_array_length(inits) : 0;
  if (m && !(sidecars = malloc(m * sizeof(*sidecars))))
    return KCM_ENOMEM;
  for (i = 0; i < m; i++) {
    struct json_object *c = json_object_array_get_idx(inits, i);
    const char *cname = NULL, *policy = NULL;
    get_string(d, c, "name", "spec.initContainers.name", &cname);
    get_string(d, c, "restartPolicy", "spec.initContainers.restartPolicy", &policy);
    if (cname && policy && !strcmp(policy, "Always"))
      sidecars[k++] = cname;
  }
  if (k)
    qsort(sidecars, k, sizeof(*sidecars), kcm_api_cmp_str);
  for (i = 0; k && i < n; i++) {
    struct json_object *cs = json_object_array_get_idx(list, i);
    name = NULL;
    r = 0;
    get_string(d, cs, "name", "", &name);
    get_i32(d, cs, "restartCount", "", &r);
    if (name && bsearch(&name, sidecars, k, sizeof(*sidecars), kcm_api_cmp_str) &&
        r > p->sidecar_restarts)
      p->sidecar_restarts = r;
  }
  free(sidecars);
  return 0;
}

static int decode_pod(struct kcm_api_dctx *d, struct kcm_pod *p, struct json_object *obj,
                      struct json_object *meta) {
  struct json_object *spec, *status, *list;
  const char *node, *phase, *cost;
  size_t i, n;
  int err;

  if ((err = kcm_api_get_object(d, obj, "spec", "spec", &spec)) ||
      (err = kcm_api_get_object(d, obj, "status", "status", &status)) ||
      (err = get_string(d, spec, "nodeName", "spec.nodeName", &node)) ||
      (err = get_string(d, status, "phase", "status.phase", &phase)))
    return err;
  if (node && *node && !(p->node = kcm_intern_str(d->pool, node)))
    return KCM_ENOMEM;
  p->phase = (uint8_t)kcm_api_pod_phase(phase);
  if ((err = get_string(d, kcm_api_get(meta, "annotations"),
                        "controller.kubernetes.io/pod-deletion-cost", "metadata.annotations",
                        &cost)))
    return err;
  if (cost) {
    char *end;
    long long v;
    errno = 0;
    v = strtoll(cost, &end, 10);
    if (!errno && end != cost && !*end && v >= INT32_MIN && v <= INT32_MAX)
      p->deletion_cost = (int32_t)v; /* an invalid cost counts as 0, as upstream */
  }
  if ((err = get_array(d, status, "conditions", "status.conditions", &list)))
    return err;
  n = list ? json_object_array_length(list) : 0;
  for (i = 0; i < n; i++) {
    struct json_object *c = json_object_array_get_idx(list, i);
    const char *type, *st;
    if ((err = get_string(d, c, "type", "status.conditions.type", &type)) ||
        (err = get_string(d, c, "status", "status.conditions.status", &st)))
      return err;
    if (type && !strcmp(type, "Ready")) {
      p->ready = st && !strcmp(st, "True");
      if (p->ready && (err = get_time(d, c, "lastTransitionTime",
                                      "status.conditions.lastTransitionTime", &p->ready_since)))
        return err;
    }
  }
  if ((err = get_array(d, status, "containerStatuses", "status.containerStatuses", &list)))
    return err;
  n = list ? json_object_array_length(list) : 0;
  for (i = 0; i < n; i++) {
    int32_t r = 0;
    if ((err = get_i32(d, json_object_array_get_idx(list, i), "restartCount",
                       "status.containerStatuses.restartCount", &r)))
      return err;
    if (r > p->restarts)
      p->restarts = r;
  }
  /* Restartable init containers (sidecars) count separately. */
  if ((err = get_array(d, status, "initContainerStatuses", "status.initContainerStatuses",
                       &list)))
    return err;
  n = list ? json_object_array_length(list) : 0;
  return n ? sidecar_restarts(d, p, spec, list) : 0;
}

/* metadata.managedFields summed up, as text.c's managed_fields() does. */
static int decode_writers(struct kcm_api_dctx *d, struct json_object *meta,
                          struct kcm_writers *w) {
  struct json_object *list;
  size_t i, n;
  int err;
  if ((err = get_array(d, meta, "managedFields", "metadata.managedFields", &list)) || !list)
    return err;
  n = json_object_array_length(list);
  for (i = 0; i < n; i++) {
    struct json_object *e = json_object_array_get_idx(list, i);
    const char *manager, *sub, *s;
    int64_t at = 0;
    if (!e)
      continue;
    if (!json_object_is_type(e, json_type_object))
      return kcm_api_bad(d, "metadata.managedFields", "must be an object");
    if ((err = get_string(d, e, "manager", "metadata.managedFields.manager", &manager)) ||
        (err = get_string(d, e, "subresource", "metadata.managedFields.subresource", &sub)) ||
        (err = get_time(d, e, "time", "metadata.managedFields.time", &at)))
      return err;
    if (!manager || !*manager || !sub || strcmp(sub, "status"))
      continue;
    if (w->n == KCM_STATUS_WRITERS) {
      w->more = true;
      continue;
    }
    if (!(s = kcm_intern_get(d->pool, manager, strlen(manager))))
      return KCM_ENOMEM;
    w->status[w->n].manager = s;
    w->status[w->n++].at = at;
  }
  return 0;
}

static int decode_replicaset(struct kcm_api_dctx *d, struct kcm_replicaset *rs,
                             struct json_object *obj, struct json_object *meta) {
  struct json_object *spec, *status;
  int64_t term = -1;
  int err;

  rs->replicas = 1;
  if ((err = decode_pairs(d, kcm_api_get(meta, "annotations"), "metadata.annotations",
                          &rs->annotations)) ||
      (err = decode_writers(d, meta, &rs->writers)) ||
      (err = kcm_api_get_object(d, obj, "spec", "spec", &spec)) ||
      (err = kcm_api_get_object(d, obj, "status", "status", &status)) ||
      (err = get_i32(d, spec, "replicas", "spec.replicas", &rs->replicas)) ||
      (err = get_i32(d, spec, "minReadySeconds", "spec.minReadySeconds",
                     &rs->min_ready_seconds)) ||
      (err = kcm_api_decode_spec_parts(
           &(struct kcm_api_parts){&rs->selector, &rs->template, &rs->template_key,
                                   &rs->template_labels, NULL},
           spec, d->pool, NULL, 0, d->err)) ||
      (err = get_i32(d, status, "replicas", "status.replicas", &rs->status.replicas)) ||
      (err = get_i32(d, status, "fullyLabeledReplicas", "status.fullyLabeledReplicas",
                     &rs->status.fully_labeled)) ||
      (err = get_i32(d, status, "readyReplicas", "status.readyReplicas", &rs->status.ready)) ||
      (err = get_i32(d, status, "availableReplicas", "status.availableReplicas",
                     &rs->status.available)) ||
      (err = get_int(d, status, "observedGeneration", "status.observedGeneration", 0, INT64_MAX,
                     &rs->status.observed_generation)) ||
      (err = get_int(d, status, "terminatingReplicas", "status.terminatingReplicas", 0,
                     INT32_MAX, &term)) ||
      (err = decode_conditions(d, status, "status.conditions", &rs->status.conditions)))
    return err;
  if (rs->replicas < 0)
    return kcm_api_bad(d, "spec.replicas", "must not be negative");
  rs->status.terminating = (int32_t)term;
  return 0;
}

static int decode_intstr(struct kcm_api_dctx *d, struct json_object *o, const char *key,
                         const char *field, struct kcm_intstr *out) {
  struct json_object *v = kcm_api_get(o, key);
  if (!v)
    return 0;
  out->set = true;
  if (json_object_is_type(v, json_type_int)) {
    int64_t x = json_object_get_int64(v);
    if (x < 0 || x > INT32_MAX)
      return kcm_api_bad(d, field, "out of range");
    out->value = (int32_t)x;
    return 0;
  }
  if (json_object_is_type(v, json_type_string) &&
      kcm_api_parse_percent(json_object_get_string(v), &out->value)) {
    out->percent = true;
    return 0;
  }
  return kcm_api_bad(d, field, "must be an integer or a percentage");
}

static int decode_deployment(struct kcm_api_dctx *d, struct kcm_deployment *dp,
                             struct json_object *obj, struct json_object *meta) {
  struct json_object *spec, *status, *strategy, *ru;
  const char *type;
  int64_t rhl = -1, pd = -1, cc = -1, term = -1;
  int err;

  dp->replicas = 1;
  if ((err = decode_pairs(d, kcm_api_get(meta, "annotations"), "metadata.annotations",
                          &dp->annotations)) ||
      (err = decode_writers(d, meta, &dp->writers)) ||
      (err = kcm_api_get_object(d, obj, "spec", "spec", &spec)) ||
      (err = kcm_api_get_object(d, obj, "status", "status", &status)) ||
      (err = get_i32(d, spec, "replicas", "spec.replicas", &dp->replicas)) ||
      (err = get_i32(d, spec, "minReadySeconds", "spec.minReadySeconds",
                     &dp->min_ready_seconds)) ||
      (err = get_int(d, spec, "revisionHistoryLimit", "spec.revisionHistoryLimit", 0, INT32_MAX,
                     &rhl)) ||
      (err = get_int(d, spec, "progressDeadlineSeconds", "spec.progressDeadlineSeconds", 0,
                     INT32_MAX, &pd)) ||
      (err = get_bool(d, spec, "paused", "spec.paused", &dp->paused)) ||
      (err = kcm_api_decode_spec_parts(
           &(struct kcm_api_parts){&dp->selector, &dp->template, &dp->template_key, NULL,
                                   &dp->selector_json},
           spec, d->pool, NULL, 0, d->err)) ||
      (err = kcm_api_get_object(d, spec, "strategy", "spec.strategy", &strategy)) ||
      (err = get_string(d, strategy, "type", "spec.strategy.type", &type)) ||
      (err = kcm_api_get_object(d, strategy, "rollingUpdate", "spec.strategy.rollingUpdate",
                                &ru)) ||
      (err = decode_intstr(d, ru, "maxSurge", "spec.strategy.rollingUpdate.maxSurge",
                           &dp->max_surge)) ||
      (err =
           decode_intstr(d, ru, "maxUnavailable", "spec.strategy.rollingUpdate.maxUnavailable",
                         &dp->max_unavailable)) ||
      (err = get_int(d, status, "observedGeneration", "status.observedGeneration", 0, INT64_MAX,
                     &dp->status.observed_generation)) ||
      (err = get_i32(d, status, "replicas", "status.replicas", &dp->status.replicas)) ||
      (err = get_i32(d, status, "updatedReplicas", "status.updatedReplicas",
                     &dp->status.updated)) ||
      (err = get_i32(d, status, "readyReplicas", "status.readyReplicas", &dp->status.ready)) ||
      (err = get_i32(d, status, "availableReplicas", "status.availableReplicas",
                     &dp->status.available)) ||
      (err = get_i32(d, status, "unavailableReplicas", "status.unavailableReplicas",
                     &dp->status.unavailable)) ||
      (err =
           get_int(d, status, "collisionCount", "status.collisionCount", 0, INT32_MAX, &cc)) ||
      (err = get_int(d, status, "terminatingReplicas", "status.terminatingReplicas", 0,
                     INT32_MAX, &term)) ||
      (err = decode_conditions(d, status, "status.conditions", &dp->status.conditions)))
    return err;
  if (dp->replicas < 0)
    return kcm_api_bad(d, "spec.replicas", "must not be negative");
  if (type && strcmp(type, "Recreate") && strcmp(type, "RollingUpdate"))
    return kcm_api_bad(d, "spec.strategy.type", "must be Recreate or RollingUpdate");
  dp->recreate = type && !strcmp(type, "Recreate");
  dp->revision_history_limit = (int32_t)rhl;
  dp->progress_deadline = (int32_t)pd;
  dp->status.collision_count = (int32_t)cc;
  dp->status.terminating = (int32_t)term;
  return 0;
}

int kcm_api_decode(enum kcm_kind kind, struct json_object *obj, struct kcm_intern *pool,
                   struct kcm_object **out, struct kcm_api_error *err) {
  struct kcm_api_dctx d = {pool, err, NULL, 0};
  struct json_object *meta = NULL;
  struct kcm_object *o;
  int rc;

  memset(err, 0, sizeof(*err));
  *out = NULL;
  if (kind >= KCM_KIND_COUNT)
    return KCM_EINVAL;
  if (!obj || !json_object_is_type(obj, json_type_object))
    return kcm_api_bad(&d, "(object)", "must be a JSON object");
  o = calloc(1, kcm_api_kind(kind)->size);
  if (!o)
    return KCM_ENOMEM;
  o->kind = (uint8_t)kind;
  o->refs = 1;
  rc = decode_meta(&d, o, obj, &meta);
  if (!rc) {
    switch (kind) {
    case KCM_KIND_POD:
      rc = decode_pod(&d, (struct kcm_pod *)o, obj, meta);
      break;
    case KCM_KIND_REPLICASET:
      rc = decode_replicaset(&d, (struct kcm_replicaset *)o, obj, meta);
      break;
    default:
      rc = decode_deployment(&d, (struct kcm_deployment *)o, obj, meta);
      break;
    }
  }
  if (rc) {
    if (rc == KCM_ENOMEM && !err->field[0])
      kcm_api_bad(&d, "(object)", "out of memory");
    kcm_api_unref(o, pool);
    return rc;
  }
  *out = o;
  return 0;
}
