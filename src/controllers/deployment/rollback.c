/*
 * controllers/deployment/rollback.c — the legacy rollback requested with
 * the deprecated.deployment.rollback.to annotation.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"

/* --- legacy rollback ------------------------------------------------------------------------ */

/* Append a JSON pointer segment (RFC 6901 escaping) to b. */
static int pointer_segment(struct kcm_buf *b, const char *key) {
  int err = 0;
  for (; !err && *key; key++) {
    if (*key == '~')
      err = kcm_buf_append_str(b, "~0");
    else if (*key == '/')
      err = kcm_buf_append_str(b, "~1");
    else
      err = kcm_buf_append(b, key, 1);
  }
  return err;
}

/* One operation of a JSON patch; its value, when given, a string. */
static void add_op(struct kcm_jsonw *w, const char *op, const char *path, const char *value) {
  kcm_jsonw_object(w);
  kcm_jsonw_key_string(w, "op", op);
  kcm_jsonw_key_string(w, "path", path);
  if (value)
    kcm_jsonw_key_string(w, "value", value);
  kcm_jsonw_end(w);
}

/* The JSON patch that clears rollbackTo and, when template_json is given,
 * puts that template (less its hash label) and the annotations of `from`
 * (upstream's SetDeploymentAnnotationsTo) into the Deployment. */
static void rollback_update(struct dp_sync *s, const char *template_json,
                            const struct kcm_pairs *from) {
  const struct kcm_deployment *d = s->d;
  static const char *const hash[] = {"metadata", "labels", KCM_API_HASH_LABEL, NULL};
  struct kcm_pairs want;
  struct kcm_buf ops = KCM_BUF_INIT(KCM_API_OBJECT_MAX), path = KCM_BUF_INIT(1u << 16);
  struct kcm_jsonw w;
  uint32_t i;

  /* The annotations it should end with. */
  if (kcm_api_pairs_copy(&want, &d->annotations)) {
    nomem(s);
    return;
  }
  if (s->p->revision)
    dp_set_annotation(s, &want, KCM_DEPLOYMENT_REVISION, s->p->revision);
  if (from) {
    bool changed = false;
    kcm_api_pairs_keep(&want, dp_skip_annotation);
    if (kcm_api_pairs_update(&want, from, dp_skip_annotation, &changed))
      nomem(s);
  }
  kcm_api_pairs_remove(&want, KCM_DEPLOYMENT_ROLLBACK_TO);

  kcm_jsonw_start(&w, &ops);
  kcm_jsonw_array(&w);
  if (template_json) {
    kcm_jsonw_object(&w);
    kcm_jsonw_key_string(&w, "op", "replace");
    kcm_jsonw_key_string(&w, "path", "/spec/template");
    kcm_jsonw_key(&w, "value");
    kcm_jsonw_copy_set(&w, template_json, strlen(template_json), hash, NULL);
    kcm_jsonw_end(&w);
  }
  for (i = 0; !s->err && i < d->annotations.n; i++) {
    const char *k = d->annotations.items[i].key;
    if (kcm_api_pairs_get(&want, k))
      continue;
    kcm_buf_reset(&path);
    if (kcm_buf_append_str(&path, "/metadata/annotations/") || pointer_segment(&path, k))
      nomem(s);
    else
      add_op(&w, "remove", path.data, NULL);
  }
  for (i = 0; !s->err && i < want.n; i++) {
    const char *have = kcm_api_pairs_get(&d->annotations, want.items[i].key);
    if (have && !strcmp(have, want.items[i].value))
      continue;
    kcm_buf_reset(&path);
    if (kcm_buf_append_str(&path, "/metadata/annotations/") ||
        pointer_segment(&path, want.items[i].key))
      nomem(s);
    else
      add_op(&w, "add", path.data, want.items[i].value);
  }
  kcm_jsonw_end(&w);
  if (!s->err) {
    int err = kcm_jsonw_finish(&w);
    if (err)
      s->err = err;
    else if (!(s->p->rollback_ops = kcm_buf_take(&ops)))
      nomem(s);
  }
  kcm_buf_release(&ops);
  kcm_buf_release(&path);
  kcm_api_pairs_release(&want);
  dp_write_status(s, false); /* what getNewReplicaSet changed goes first */
  s->group++;
  dp_add_step(s, KCM_DEPLOYMENT_STEP_ROLLBACK);
}

/* Upstream's dp_rollback (the deprecated.deployment.rollback.to annotation). */
void dp_rollback(struct dp_sync *s, int *all, int64_t target) {
  const struct kcm_deployment *d = s->d;
  int new_rs = dp_get_new_rs(s, true);
  size_t n, i;

  if (s->err)
    return;
  n = dp_all_of(s, new_rs, all);
  if (target == 0) {
    int64_t max = 0, second = 0, v;
    for (i = 0; i < n; i++) {
      if (!kcm_deployment_revision_of(&view(s, all[i])->annotations, &v))
        continue;
      if (v >= max) {
        second = max;
        max = v;
      } else if (v > second) {
        second = v;
      }
    }
    if ((target = second) == 0) {
      dp_event(s, true, "DeploymentRollbackRevisionNotFound", "Unable to find last revision.");
      rollback_update(s, NULL, NULL);
      return;
    }
  }
  for (i = 0; i < n; i++) {
    const struct kcm_deployment_rs *r = view(s, all[i]);
    int64_t v;
    if (!kcm_deployment_revision_of(&r->annotations, &v) || v != target)
      continue;
    if (r->rs && !dp_template_of_equal(s, r)) {
      rollback_update(s, r->rs->template, &r->annotations);
      if (!s->err)
        dp_set_message(s, &s->p->steps[s->p->nsteps - 1], "DeploymentRollback", false,
                  "Rolled back deployment \"%s\" to revision %lld", d->o.name, (long long)v);
    } else {
      char *msg;
      if (asprintf(&msg, "The rollback revision contains the same template as current "
                         "deployment \"%s\"", d->o.name) < 0) {
        nomem(s);
        return;
      }
      dp_event(s, true, "DeploymentRollbackTemplateUnchanged", msg);
      free(msg);
      rollback_update(s, NULL, NULL);
    }
    return;
  }
  dp_event(s, true, "DeploymentRollbackRevisionNotFound",
           "Unable to find the revision to rollback to.");
  rollback_update(s, NULL, NULL);
}

