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

#include "kcm/deployment.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"

/* The document's start: its metadata with the resourceVersion, left open
 * for more members. */
static void begin(struct kcm_jsonw *w, struct kcm_buf *out, uint64_t rv) {
  kcm_jsonw_start(w, out);
  kcm_jsonw_object(w);
  kcm_jsonw_key_object(w, "metadata");
  kcm_jsonw_key(w, "resourceVersion");
  kcm_jsonw_uint_string(w, rv);
}

int kcm_deployment_status_body(const struct kcm_deployment *d, const struct kcm_deployment_plan *p,
                               bool probe, uint64_t resource_version, struct kcm_buf *out) {
  const struct kcm_deployment_status *s = &p->status;
  int32_t terminating = probe ? p->terminating : s->terminating;
  const char *rev = kcm_api_pairs_get(&d->annotations, KCM_DEPLOYMENT_REVISION);
  struct kcm_jsonw w;

  begin(&w, out, resource_version);
  /* The status subresource keeps the annotations it is sent: the revision
   * travels with the status, as upstream's UpdateStatus carries it. */
  if (p->revision && (!rev || strcmp(rev, p->revision))) {
    kcm_jsonw_key_object(&w, "annotations");
    kcm_jsonw_key_string(&w, KCM_DEPLOYMENT_REVISION, p->revision);
    kcm_jsonw_end(&w);
  }
  kcm_jsonw_end(&w);
  kcm_jsonw_key_object(&w, "status");
  kcm_jsonw_key_int(&w, "observedGeneration", s->observed_generation);
  kcm_jsonw_key_int(&w, "replicas", s->replicas);
  kcm_jsonw_key_int(&w, "updatedReplicas", s->updated);
  kcm_jsonw_key_int(&w, "readyReplicas", s->ready);
  kcm_jsonw_key_int(&w, "availableReplicas", s->available);
  kcm_jsonw_key_int(&w, "unavailableReplicas", s->unavailable);
  kcm_jsonw_key(&w, "conditions"); /* null removes them all */
  kcm_api_write_conditions(&w, &s->conditions);
  if (s->collision_count >= 0)
    kcm_jsonw_key_int(&w, "collisionCount", s->collision_count);
  if (terminating != KCM_DEPLOYMENT_UNWRITTEN) { /* null removes it */
    kcm_jsonw_key(&w, "terminatingReplicas");
    if (terminating >= 0)
      kcm_jsonw_int(&w, terminating);
    else
      kcm_jsonw_null(&w);
  }
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  return kcm_jsonw_finish(&w);
}

int kcm_deployment_scale_body(const struct kcm_deployment_plan *p,
                              const struct kcm_deployment_step *s, uint64_t resource_version,
                              struct kcm_buf *out) {
  const struct kcm_deployment_rs *r = &p->rs[s->rs];
  const struct kcm_pairs *have = r->rs ? &r->rs->annotations : NULL;
  struct kcm_jsonw w;
  uint32_t i;

  begin(&w, out, resource_version);
  /* Only the annotations that change; upstream never removes one here. */
  kcm_jsonw_key_object(&w, "annotations");
  for (i = 0; i < s->annotations.n; i++) {
    const char *k = s->annotations.items[i].key, *v = s->annotations.items[i].value;
    const char *cur = have ? kcm_api_pairs_get(have, k) : NULL;
    if (!cur || strcmp(cur, v))
      kcm_jsonw_key_string(&w, k, v);
  }
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_object(&w, "spec");
  kcm_jsonw_key_int(&w, "replicas", s->replicas);
  if (!r->rs || r->rs->min_ready_seconds != s->min_ready_seconds)
    kcm_jsonw_key_int(&w, "minReadySeconds", s->min_ready_seconds);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  return kcm_jsonw_finish(&w);
}

int kcm_deployment_rollback_body(const struct kcm_deployment_plan *p, uint64_t resource_version,
                                 struct kcm_buf *out) {
  struct kcm_jsonw w;
  struct kcm_json j;
  const char *op;
  size_t len;
  bool ok;

  kcm_jsonw_start(&w, out);
  kcm_jsonw_array(&w);
  /* First make sure it is the version the plan was made from. */
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "op", "test");
  kcm_jsonw_key_string(&w, "path", "/metadata/resourceVersion");
  kcm_jsonw_key(&w, "value");
  kcm_jsonw_uint_string(&w, resource_version);
  kcm_jsonw_end(&w);
  kcm_json_init(&j);
  kcm_json_start(&j, p->rollback_ops, strlen(p->rollback_ops));
  ok = kcm_json_array(&j);
  while (ok && kcm_json_element(&j) && (ok = kcm_json_raw(&j, &op, &len)))
    kcm_jsonw_raw(&w, op, len);
  ok = ok && kcm_json_done(&j);
  kcm_json_release(&j);
  if (!ok)
    return KCM_EINVAL;
  kcm_jsonw_end(&w);
  return kcm_jsonw_finish(&w);
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
  struct kcm_jsonw w;
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
  begin(&w, out, resource_version);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_object(&w, "status");
  kcm_jsonw_key(&w, "conditions");
  kcm_api_write_conditions(&w, &conds);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  kcm_api_conditions_release(&conds);
  return kcm_jsonw_finish(&w);
}

int kcm_deployment_collision_body(const struct kcm_deployment *d, uint64_t resource_version,
                                  struct kcm_buf *out) {
  struct kcm_jsonw w;
  begin(&w, out, resource_version);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_object(&w, "status");
  kcm_jsonw_key_int(&w, "collisionCount", kcm_deployment_next_collision_count(d));
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  return kcm_jsonw_finish(&w);
}
