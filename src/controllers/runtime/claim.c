/*
 * controllers/runtime/claim.c — adopting and releasing the objects an
 * owner selects. See include/kcm/runtime.h.
 */
#include <stdio.h>
#include <string.h>

#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/runtime.h"

static void on_recheck(const struct kcm_client_response *resp, void *data) {
  struct kcm_runtime_job *j = data;
  const char *why;
  if (resp->err)
    kcm_runtime_fail(j, resp->err, "can't recheck DeletionTimestamp: %s", resp->message);
  else if ((why = kcm_api_recheck(resp->body, &j->object->uid)))
    kcm_runtime_fail(j, KCM_ECONFLICT, "original %s %s %s",
                     kcm_api_kind_name((enum kcm_kind)j->object->kind), j->key, why);
  if (j->err)
    kcm_runtime_halt(j);
  kcm_runtime_answered(j);
}

void kcm_runtime_recheck(struct kcm_runtime_job *j) {
  struct kcm_write req;
  kcm_writer_get(&req, (enum kcm_kind)j->object->kind, j->object->ns, j->object->name);
  if (kcm_runtime_send(j, &req, on_recheck, j))
    kcm_runtime_halt(j);
}

static void on_claim(const struct kcm_client_response *resp, void *data) {
  struct kcm_runtime_job *j = data;
  /* NotFound: the object is gone; Invalid: its uid changed. Both are fine. */
  if (resp->err && resp->err != KCM_ENOTFOUND && resp->err != KCM_EINVALID) {
    kcm_runtime_fail(j, resp->err, "cannot update the owner of an object: %s", resp->message);
    kcm_runtime_halt(j);
  } else if (!resp->err)
    kcm_runtime_wrote(j, kcm_api_resource_version_text(resp->body, resp->body_len));
  kcm_runtime_answered(j);
}

void kcm_runtime_claim(struct kcm_runtime_job *j, const struct kcm_object *o, bool adopt) {
  const struct kcm_object *owner = j->object;
  struct kcm_buf body = KCM_BUF_INIT(1u << 20);
  struct kcm_write req;
  kcm_writer_owner(&req, &body, (enum kcm_kind)o->kind, o->ns, o->name, &o->uid, adopt,
                   (enum kcm_kind)owner->kind, owner->name, &owner->uid);
  if (kcm_runtime_send(j, &req, on_claim, j))
    kcm_runtime_halt(j); /* after the others, as upstream goes on */
  else if (adopt)
    j->rt->stats.adoptions++;
  else
    j->rt->stats.releases++;
  kcm_buf_release(&body);
}
