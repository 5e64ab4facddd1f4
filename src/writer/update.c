/*
 * writer/update.c — a patch sent as an update: GET the object, apply the
 * patch to it here, PUT it back. Upstream's bootstrap roles for the
 * Deployment and ReplicaSet controllers grant `update` but not `patch` on
 * deployments, deployments/status and replicasets/status, so a writer
 * acting as those controllers' service accounts writes them this way.
 * The patch's own guard (a resourceVersion in a merge patch, a `test` op
 * in a JSON patch) still holds: it is applied to the object read, so the
 * PUT carries the version the patch was made from, and the API server
 * answers 409 if the object has moved on.
 */
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"

struct update {
  struct kcm_writer *w;
  struct kcm_write put;
  char *patch;
  bool json_patch;
  kcm_client_done_cb done;
  void *data;
};

static void finish(struct update *u, const struct kcm_client_response *resp) {
  u->done(resp, u->data);
  free(u->patch);
  free(u);
}

static void on_put(const struct kcm_client_response *resp, void *data) { finish(data, resp); }

/* RFC 7386: objects merge key by key, null removes, anything else replaces. */
static struct json_object *merge(struct json_object *target, struct json_object *patch) {
  if (!json_object_is_type(patch, json_type_object)) {
    json_object_put(target);
    return json_object_get(patch);
  }
  if (!json_object_is_type(target, json_type_object)) {
    json_object_put(target);
    target = json_object_new_object();
  }
  json_object_object_foreach(patch, key, value) {
    struct json_object *old = NULL;
    if (!value) {
      json_object_object_del(target, key);
      continue;
    }
    json_object_object_get_ex(target, key, &old);
    json_object_object_add(target, key, merge(json_object_get(old), value));
  }
  return target;
}

/* The parent object of an RFC 6901 pointer into doc (objects only) and the
 * last segment, unescaped, into key; NULL when the path does not lead to an
 * object. */
static struct json_object *parent_of(struct json_object *doc, const char *ptr, char *key,
                                     size_t cap) {
  struct json_object *at = doc;
  if (*ptr++ != '/')
    return NULL;
  for (;;) {
    size_t n = 0;
    for (; *ptr && *ptr != '/'; ptr++) {
      char c = *ptr;
      if (c == '~') {
        c = ptr[1] == '0' ? '~' : ptr[1] == '1' ? '/' : 0;
        if (!c)
          return NULL;
        ptr++;
      }
      if (n + 1 >= cap)
        return NULL;
      key[n++] = c;
    }
    key[n] = '\0';
    if (!*ptr)
      return json_object_is_type(at, json_type_object) ? at : NULL;
    if (!json_object_object_get_ex(at, key, &at) || !json_object_is_type(at, json_type_object))
      return NULL;
    ptr++;
  }
}

/* RFC 6902's test, add, replace and remove on object members: 0, KCM_ECONFLICT
 * when a test fails, KCM_EINVAL for an operation it cannot apply. */
static int apply_ops(struct json_object *doc, struct json_object *ops) {
  size_t i;
  if (!json_object_is_type(ops, json_type_array))
    return KCM_EINVAL;
  for (i = 0; i < json_object_array_length(ops); i++) {
    struct json_object *op = json_object_array_get_idx(ops, i), *name, *path, *value = NULL;
    struct json_object *parent, *old = NULL;
    const char *verb;
    char key[512];
    if (!json_object_object_get_ex(op, "op", &name) ||
        !json_object_object_get_ex(op, "path", &path) ||
        !(parent = parent_of(doc, json_object_get_string(path), key, sizeof(key))))
      return KCM_EINVAL;
    verb = json_object_get_string(name);
    json_object_object_get_ex(op, "value", &value);
    json_object_object_get_ex(parent, key, &old);
    if (!strcmp(verb, "test")) {
      if (!old || !json_object_equal(old, value))
        return KCM_ECONFLICT;
    } else if (!strcmp(verb, "remove") || (!strcmp(verb, "replace") && !old)) {
      if (!old)
        return KCM_EINVAL;
      json_object_object_del(parent, key);
    } else if (!strcmp(verb, "add") || !strcmp(verb, "replace")) {
      json_object_object_add(parent, key, json_object_get(value));
    } else {
      return KCM_EINVAL;
    }
  }
  return 0;
}

/* The object read: apply the patch and send it back, or answer why not. */
static void on_got(const struct kcm_client_response *resp, void *data) {
  struct update *u = data;
  struct json_object *doc, *patch;
  struct kcm_client_response failed = {0};
  int err;

  if (resp->err) {
    finish(u, resp);
    return;
  }
  doc = json_tokener_parse(resp->body);
  patch = json_tokener_parse(u->patch);
  if (!doc || !patch) {
    err = KCM_EINVAL;
  } else if (u->json_patch) {
    err = apply_ops(doc, patch);
  } else {
    doc = merge(doc, patch);
    err = 0;
  }
  json_object_put(patch);
  if (!err) {
    u->put.body = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
    err = u->put.body ? u->w->send(u->w, &u->put, on_put, u) : KCM_ENOMEM;
    json_object_put(doc); /* the body was copied when sent */
    if (!err)
      return;
  } else {
    json_object_put(doc);
  }
  failed.err = err;
  failed.status = err == KCM_ECONFLICT ? 409 : 0;
  failed.body = err == KCM_ECONFLICT
                    ? "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                      "\"message\":\"the object has been modified\",\"reason\":\"Conflict\","
                      "\"code\":409}"
                    : "";
  failed.body_len = strlen(failed.body);
  failed.message = err == KCM_ECONFLICT ? "the object has been modified"
                                        : "the patch cannot be applied to the object read";
  finish(u, &failed);
}

int kcm_writer_send_as_update(struct kcm_writer *w, const struct kcm_write *req,
                              kcm_client_done_cb done, void *data) {
  struct update *u = calloc(1, sizeof(*u));
  struct kcm_write get;
  int err;
  if (!u || !(u->patch = strdup(req->body ? req->body : ""))) {
    free(u);
    return KCM_ENOMEM;
  }
  u->w = w;
  u->done = done;
  u->data = data;
  u->json_patch = req->content_type && strstr(req->content_type, "json-patch");
  u->put = *req;
  u->put.method = "PUT";
  u->put.content_type = NULL;
  u->put.repeatable = false;
  get = *req;
  /* The object itself: its status subresource is the same object, and the
   * roles grant `get` on the resource, not on its status. */
  if (strlen(get.path) > 7 && !strcmp(get.path + strlen(get.path) - 7, "/status"))
    get.path[strlen(get.path) - 7] = '\0';
  get.method = "GET";
  get.body = NULL;
  get.content_type = NULL;
  get.repeatable = true;
  if ((err = w->send(w, &get, on_got, u))) {
    free(u->patch);
    free(u);
  }
  return err;
}
