/*
 * writer/writer.c — requests described once, sent through a client or a
 * test's writer. See include/kcm/writer.h.
 */
#include <stdlib.h>
#include <string.h>

#include "kcm/buf.h"
#include "kcm/error.h"
#include "internal.h"
#include "kcm/writer.h"

static int client_send(struct kcm_writer *w, const struct kcm_write *req, kcm_client_done_cb done,
                       void *data) {
  struct kcm_client_request_options o = {0};
  o.method = req->method;
  o.path = req->path;
  o.body = req->body;
  o.body_len = req->body ? strlen(req->body) : 0;
  o.content_type = req->content_type;
  o.repeatable = req->repeatable;
  o.delay_ms = req->delay_ms;
  o.limiter = w->limiter;
  o.agent = w->agent;
  o.bearer = w->bearer;
  o.done = done;
  o.data = data;
  return kcm_client_request(w->client, &o, NULL);
}

void kcm_writer_init(struct kcm_writer *w, struct kcm_client *client, unsigned limiter) {
  memset(w, 0, sizeof(*w));
  w->send = client_send;
  w->client = client;
  w->limiter = limiter;
}

/* An answer the dry writer gives on the loop's next turn. */
struct dry_answer {
  uv_timer_t timer;
  kcm_client_done_cb done;
  void *data;
};

static void dry_closed(uv_handle_t *h) { free(h->data); }

static void dry_answer(uv_timer_t *t) {
  struct dry_answer *a = t->data;
  struct kcm_client_response resp = {0};
  resp.status = 200;
  resp.body = "{}";
  resp.body_len = 2;
  resp.message = "";
  a->done(&resp, a->data);
  uv_close((uv_handle_t *)&a->timer, dry_closed);
}

static int dry_send(struct kcm_writer *w, const struct kcm_write *req, kcm_client_done_cb done,
                    void *data) {
  struct dry_answer *a;
  if (!strcmp(req->method, "GET") || strstr(req->path, "dryRun="))
    return client_send(w, req, done, data);
  if (!(a = malloc(sizeof(*a))))
    return KCM_ENOMEM;
  a->done = done;
  a->data = data;
  uv_timer_init(w->data, &a->timer);
  a->timer.data = a;
  uv_timer_start(&a->timer, dry_answer, 0, 0);
  w->withheld++;
  return 0;
}

void kcm_writer_init_dry(struct kcm_writer *w, struct kcm_client *client, unsigned limiter,
                         uv_loop_t *loop) {
  kcm_writer_init(w, client, limiter);
  w->send = dry_send;
  w->dry = true;
  w->data = loop;
}

int kcm_writer_send(struct kcm_writer *w, const struct kcm_write *req, kcm_client_done_cb done,
                    void *data) {
  if (req->err)
    return req->err;
  if (w->as_update && req->update_only)
    return kcm_writer_send_as_update(w, req, done, data);
  return w->send(w, req, done, data);
}

static int build(struct kcm_write *req, const char *method, enum kcm_kind kind, const char *ns,
                 const char *name, const char *sub, const char *body) {
  memset(req, 0, sizeof(*req));
  req->method = method;
  req->body = body;
  req->repeatable = strcmp(method, "PATCH") != 0;
  req->err = kcm_client_object_path(kind, ns, name, sub, req->path, sizeof(req->path));
  return req->err;
}

int kcm_writer_get(struct kcm_write *req, enum kcm_kind kind, const char *ns, const char *name) {
  return build(req, "GET", kind, ns, name, NULL, NULL);
}

/* Insert s at req->path + at (moving what follows). */
static int insert(struct kcm_write *req, size_t at, const char *s) {
  size_t n = strlen(s), len = strlen(req->path);
  if (len + n >= sizeof(req->path)) {
    strcpy(req->path, "path too long");
    return req->err = KCM_EINVAL;
  }
  memmove(req->path + at + n, req->path + at, len - at + 1);
  memcpy(req->path + at, s, n);
  return 0;
}

int kcm_writer_find(struct kcm_write *req, enum kcm_kind kind, const char *ns, const char *name) {
  size_t at;
  if (build(req, "GET", kind, ns, name, NULL, NULL))
    return req->err;
  /* .../pods/NAME -> .../pods?fieldSelector=metadata.name%3DNAME (NAME
   * percent-encoded already, holding no slash). */
  at = (size_t)(strrchr(req->path, '/') - req->path);
  if (insert(req, at + 1, "?fieldSelector=metadata.name%3D"))
    return req->err;
  memmove(req->path + at, req->path + at + 1, strlen(req->path + at + 1) + 1);
  return 0;
}

int kcm_writer_create(struct kcm_write *req, enum kcm_kind kind, const char *ns,
                      const char *body, bool dry_run) {
  if (build(req, "POST", kind, ns, NULL, NULL, body) || !dry_run)
    return req->err;
  return insert(req, strlen(req->path), "?dryRun=All");
}

int kcm_writer_patch(struct kcm_write *req, enum kcm_kind kind, const char *ns, const char *name,
                     const char *sub, enum kcm_patch_type type, const char *body) {
  static const char *const types[] = {
      [KCM_PATCH_MERGE] = "application/merge-patch+json",
      [KCM_PATCH_STRATEGIC] = "application/strategic-merge-patch+json",
      [KCM_PATCH_JSON] = "application/json-patch+json",
  };
  if (build(req, "PATCH", kind, ns, name, sub, body))
    return req->err;
  req->content_type = types[type];
  req->update_only = (sub && !strcmp(sub, "status")) ||
                     (kcm_api_kind(kind)->patch_as_update && type != KCM_PATCH_STRATEGIC);
  return 0;
}

int kcm_writer_delete(struct kcm_write *req, enum kcm_kind kind, const char *ns,
                      const char *name, const char *body) {
  return build(req, "DELETE", kind, ns, name, NULL, body);
}

int kcm_writer_owner(struct kcm_write *req, struct kcm_buf *body, enum kcm_kind kind,
                     const char *ns, const char *name, const struct kcm_uid *uid, bool adopt,
                     enum kcm_kind owner_kind, const char *owner_name,
                     const struct kcm_uid *owner_uid) {
  const struct kcm_api_kind *owner = kcm_api_kind(owner_kind);
  int err = owner ? 0 : KCM_EINVAL;
  kcm_buf_reset(body);
  if (err || (err = kcm_api_owner_patch(body, adopt, owner->api_version, owner->name, owner_name,
                                        owner_uid, uid))) {
    memset(req, 0, sizeof(*req));
    strcpy(req->path, err == KCM_EINVAL ? "an owner of no kind" : "out of memory");
    return req->err = err;
  }
  return kcm_writer_patch(req, kind, ns, name, NULL, KCM_PATCH_STRATEGIC, body->data);
}
