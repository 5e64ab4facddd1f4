/*
 * controllers/deployment/bodies.c — the request bodies of a plan's writes.
 * Each write is guarded by the object's resourceVersion, as upstream's
 * updates are, so a write computed from a stale cache fails with a
 * conflict instead of undoing someone else's change. See
 * include/kcm/deployment.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../api/internal.h"
#include "kcm/deployment.h"
#include "kcm/error.h"
#include "kcm/json.h"

static struct json_object *meta_with_rv(uint64_t rv) {
  struct json_object *meta = json_object_new_object();
  json_object_object_add(meta, "resourceVersion", kcm_api_json_rv(rv));
  return meta;
}

int kcm_deployment_status_body(const struct kcm_deployment *d, const struct kcm_deployment_plan *p,
                               bool probe, uint64_t resource_version, struct kcm_buf *out) {
  const struct kcm_deployment_status *s = &p->status;
  int32_t terminating = probe ? p->terminating : s->terminating;
  struct json_object *doc = json_object_new_object(), *meta = meta_with_rv(resource_version);
  struct json_object *st = json_object_new_object();
  const char *rev = kcm_api_pairs_get(&d->annotations, KCM_DEPLOYMENT_REVISION);

  /* The status subresource keeps the annotations it is sent: the revision
   * travels with the status, as upstream's UpdateStatus carries it. */
  if (p->revision && (!rev || strcmp(rev, p->revision))) {
    struct json_object *ann = json_object_new_object();
    json_object_object_add(ann, KCM_DEPLOYMENT_REVISION, json_object_new_string(p->revision));
    json_object_object_add(meta, "annotations", ann);
  }
  json_object_object_add(doc, "metadata", meta);
  const struct kcm_api_int_field counts[] = {
      {"observedGeneration", s->observed_generation}, {"replicas", s->replicas},
      {"updatedReplicas", s->updated}, {"readyReplicas", s->ready},
      {"availableReplicas", s->available}, {"unavailableReplicas", s->unavailable}};
  kcm_api_json_add_ints(st, counts, 6);
  /* null removes them all */
  json_object_object_add(st, "conditions", kcm_api_conditions_json(&s->conditions));
  if (s->collision_count >= 0)
    json_object_object_add(st, "collisionCount", json_object_new_int(s->collision_count));
  if (terminating != KCM_DEPLOYMENT_UNWRITTEN) /* null removes it */
    json_object_object_add(st, "terminatingReplicas",
                           terminating >= 0 ? json_object_new_int(terminating) : NULL);
  json_object_object_add(doc, "status", st);
  return kcm_api_json_emit(doc, out);
}

int kcm_deployment_scale_body(const struct kcm_deployment_plan *p,
                              const struct kcm_deployment_step *s, uint64_t resource_version,
                              struct kcm_buf *out) {
  const struct kcm_deployment_rs *r = &p->rs[s->rs];
  const struct kcm_pairs *have = r->rs ? &r->rs->annotations : NULL;
  struct json_object *doc = json_object_new_object(), *meta = meta_with_rv(resource_version);
  struct json_object *spec = json_object_new_object(), *ann = json_object_new_object();
  uint32_t i;

  /* Only the annotations that change; upstream never removes one here. */
  for (i = 0; i < s->annotations.n; i++) {
    const char *k = s->annotations.items[i].key, *v = s->annotations.items[i].value;
    const char *cur = have ? kcm_api_pairs_get(have, k) : NULL;
    if (!cur || strcmp(cur, v))
      json_object_object_add(ann, k, json_object_new_string(v));
  }
  json_object_object_add(meta, "annotations", ann);
  json_object_object_add(doc, "metadata", meta);
  json_object_object_add(spec, "replicas", json_object_new_int(s->replicas));
  if (!r->rs || r->rs->min_ready_seconds != s->min_ready_seconds)
    json_object_object_add(spec, "minReadySeconds", json_object_new_int(s->min_ready_seconds));
  json_object_object_add(doc, "spec", spec);
  return kcm_api_json_emit(doc, out);
}

int kcm_deployment_rollback_body(const struct kcm_deployment_plan *p, uint64_t resource_version,
                                 struct kcm_buf *out) {
  struct json_object *ops = kcm_json_tree(p->rollback_ops, strlen(p->rollback_ops)), *all, *test;
  size_t i;
  if (!ops || !json_object_is_type(ops, json_type_array)) {
    json_object_put(ops);
    return KCM_EINVAL;
  }
  /* First make sure it is the version the plan was made from. */
  all = json_object_new_array();
  test = json_object_new_object();
  json_object_object_add(test, "op", json_object_new_string("test"));
  json_object_object_add(test, "path", json_object_new_string("/metadata/resourceVersion"));
  json_object_object_add(test, "value", kcm_api_json_rv(resource_version));
  json_object_array_add(all, test);
  for (i = 0; i < json_object_array_length(ops); i++)
    json_object_array_add(all, json_object_get(json_object_array_get_idx(ops, i)));
  json_object_put(ops);
  return kcm_api_json_emit(all, out);
}

int kcm_deployment_create_failed_body(const struct kcm_deployment *d,
                                      const struct kcm_deployment_step *create, const char *message,
                                      uint64_t now_ms, uint64_t resource_version,
                                      struct kcm_buf *out) {
  struct kcm_conditions conds;
  const struct kcm_condition *cur;
  char type[] = "Progressing", status[] = "False", reason[] = "ReplicaSetCreateError";
  char *msg = strdup(message);
  struct kcm_condition c = {type, status, reason, msg, (int64_t)(now_ms / 1000),
                            (int64_t)(now_ms / 1000)};
  struct json_object *doc, *st;
  int err;

  if (d->progress_deadline < 0 || d->progress_deadline == INT32_MAX) {
    free(msg);
    return 0; /* no progress to report on */
  }
  if (!msg || kcm_api_conditions_copy(&conds, &create->conditions)) {
    free(msg);
    return KCM_ENOMEM;
  }
  cur = kcm_api_condition_get(&conds, c.type);
  if (!cur || !cur->status || strcmp(cur->status, c.status) || !cur->reason ||
      strcmp(cur->reason, c.reason)) {
    if (cur && cur->status && !strcmp(cur->status, c.status))
      c.last_transition = cur->last_transition;
    kcm_api_condition_remove(&conds, c.type);
    if ((err = kcm_api_condition_append(&conds, &c))) {
      kcm_api_conditions_release(&conds);
      free(msg);
      return err;
    }
  }
  free(msg);
  doc = json_object_new_object();
  st = json_object_new_object();
  json_object_object_add(doc, "metadata", meta_with_rv(resource_version));
  json_object_object_add(st, "conditions", kcm_api_conditions_json(&conds));
  json_object_object_add(doc, "status", st);
  kcm_api_conditions_release(&conds);
  return kcm_api_json_emit(doc, out);
}

int kcm_deployment_collision_body(const struct kcm_deployment *d, uint64_t resource_version,
                                  struct kcm_buf *out) {
  struct json_object *doc = json_object_new_object(), *st = json_object_new_object();
  int32_t next = kcm_deployment_next_collision_count(d);
  json_object_object_add(doc, "metadata", meta_with_rv(resource_version));
  json_object_object_add(st, "collisionCount", json_object_new_int(next));
  json_object_object_add(doc, "status", st);
  return kcm_api_json_emit(doc, out);
}
