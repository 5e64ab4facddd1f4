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
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"

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
static void answer_failed(struct update *u, int err);

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

/* --- a merge patch spliced into the object's text -------------------------------------- */

#define MAX_EDITS 64

struct edit {
  size_t from, to; /* text[from, to) is replaced */
  char *with;      /* owned */
};

struct splice {
  struct kcm_json j;
  struct edit e[MAX_EDITS];
  size_t n;
};

static int add_edit(struct splice *s, size_t from, size_t to, char *with) {
  if (!with)
    return KCM_ENOMEM;
  if (s->n == MAX_EDITS) {
    free(with);
    return KCM_WRITER_WHOLE;
  }
  s->e[s->n++] = (struct edit){from, to, with};
  return 0;
}

/* A new string formatted as printf would; NULL when memory is short. */
static char *format(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *format(const char *fmt, ...) {
  va_list ap;
  char *out;
  int n;
  va_start(ap, fmt);
  n = vasprintf(&out, fmt, ap);
  va_end(ap);
  return n < 0 ? NULL : out;
}

/* The value at path: its offset and length in the text. */
static bool value_at(struct splice *s, const char *const *path, size_t *at, size_t *len) {
  const char *text;
  if (!kcm_json_find(&s->j, path) || !kcm_json_raw(&s->j, &text, len))
    return false;
  *at = (size_t)(text - s->j.start);
  return true;
}

/* Whether the object whose '{' is at `at` has no member. */
static bool empty_object(const char *text, size_t at) {
  at++;
  while (text[at] && strchr(" \t\r\n", text[at]))
    at++;
  return text[at] == '}';
}

/* Whether the object at `parent` holds no more than one member `key` (with
 * two, Go and the API server keep the last: left to the whole-object path,
 * whose parser does the same). */
static bool once(struct splice *s, const char *const *parent, const char *key) {
  int seen = 0;
  if (!kcm_json_find(&s->j, parent) || !kcm_json_object(&s->j))
    return !s->j.err;
  while (kcm_json_member(&s->j))
    if ((kcm_json_key_is(&s->j, key) && ++seen > 1) || !kcm_json_skip(&s->j))
      return false;
  return !s->j.err;
}

#define MAX_ANNOTATIONS 32 /* in one patch; kcm's carry one or two */

/* The JSON string v appended to out. */
static int string_of(struct kcm_buf *out, struct json_object *v) {
  return kcm_jsonw_escape(out, json_object_get_string(v), (size_t)json_object_get_string_len(v));
}

/* The patch's annotations (a string each, or null to remove it): the
 * object's annotations rebuilt from their text, each member the patch
 * names replaced or dropped, the new ones after the rest. */
static int splice_annotations(struct splice *s, struct json_object *patch) {
  static const char *const parent[] = {"metadata", "annotations", NULL};
  const char *names[MAX_ANNOTATIONS];
  struct json_object *values[MAX_ANNOTATIONS];
  bool met[MAX_ANNOTATIONS] = {false};
  struct kcm_buf out = KCM_BUF_INIT((size_t)-1);
  size_t n = 0, i, at, len;
  const char *mark;
  bool first = true;
  int err = KCM_WRITER_WHOLE;

  json_object_object_foreach(patch, key, value) {
    if (n == MAX_ANNOTATIONS || (value && !json_object_is_type(value, json_type_string)))
      return KCM_WRITER_WHOLE;
    names[n] = key;
    values[n++] = value;
  }
  /* no annotations yet (rare) or not an object: apply the patch whole */
  if (!value_at(s, parent, &at, &len) || s->j.start[at] != '{' || !kcm_json_find(&s->j, parent) ||
      !kcm_json_object(&s->j))
    return KCM_WRITER_WHOLE;
  if (kcm_buf_append(&out, "{", 1))
    goto out;
  for (mark = s->j.p; kcm_json_member(&s->j); mark = s->j.p) {
    const char *name = mark, *raw;
    size_t rawlen;
    while (*name != '"') /* whitespace and the comma before the name */
      name++;
    for (i = 0; i < n && !(strlen(names[i]) == s->j.keylen &&
                           !memcmp(names[i], s->j.key, s->j.keylen));
         i++)
      ;
    if (!kcm_json_raw(&s->j, &raw, &rawlen) || (i < n && met[i]))
      goto out; /* broken, or a name given twice */
    if (i < n && (met[i] = true) && !values[i])
      continue;
    if ((!first && kcm_buf_append(&out, ",", 1)) ||
        kcm_buf_append(&out, name, (size_t)(raw - name)) ||
        (i < n ? string_of(&out, values[i]) : kcm_buf_append(&out, raw, rawlen))) {
      err = KCM_ENOMEM;
      goto out;
    }
    first = false;
  }
  if (s->j.err)
    goto out;
  for (i = 0; i < n; i++) {
    if (met[i] || !values[i])
      continue;
    if ((!first && kcm_buf_append(&out, ",", 1)) ||
        kcm_jsonw_escape(&out, names[i], strlen(names[i])) || kcm_buf_append(&out, ":", 1) ||
        string_of(&out, values[i])) {
      err = KCM_ENOMEM;
      goto out;
    }
    first = false;
  }
  if (kcm_buf_append(&out, "}", 2)) { /* with the NUL */
    err = KCM_ENOMEM;
    goto out;
  }
  err = add_edit(s, at, at + len, out.data);
  out.data = NULL; /* the edit owns it */
out:
  kcm_buf_release(&out);
  return err;
}

/* metadata: a resourceVersion equal to the object's, and annotations. */
static int splice_metadata(struct splice *s, struct json_object *meta) {
  static const char *const rv_path[] = {"metadata", "resourceVersion", NULL};
  static const char *const top[] = {NULL}, *const metadata[] = {"metadata", NULL};
  size_t at, len;
  if (!json_object_is_type(meta, json_type_object) || !once(s, top, "metadata") ||
      !value_at(s, metadata, &at, &len) || s->j.start[at] != '{' ||
      !once(s, metadata, "resourceVersion") || !once(s, metadata, "annotations"))
    return KCM_WRITER_WHOLE; /* no metadata object to splice into, or a name twice */
  json_object_object_foreach(meta, key, value) {
    if (!strcmp(key, "resourceVersion")) {
      const char *have;
      size_t n;
      if (!json_object_is_type(value, json_type_string))
        return KCM_WRITER_WHOLE;
      if (!kcm_json_find(&s->j, rv_path) || !kcm_json_string(&s->j, &have, &n))
        return KCM_WRITER_WHOLE;
      if (n != (size_t)json_object_get_string_len(value) ||
          memcmp(have, json_object_get_string(value), n))
        return KCM_ECONFLICT;
    } else if (!strcmp(key, "annotations") && json_object_is_type(value, json_type_object)) {
      int err = splice_annotations(s, value);
      if (err)
        return err;
    } else {
      return KCM_WRITER_WHOLE;
    }
  }
  return 0;
}

/* status: the object's own (a small part of it) merged with the patch's. */
static int splice_status(struct splice *s, struct json_object *status) {
  static const char *const path[] = {"status", NULL}, *const top[] = {NULL};
  struct json_object *now = NULL;
  size_t at, len;
  char *with, *text;
  if (!once(s, top, "status"))
    return KCM_WRITER_WHOLE;
  if (value_at(s, path, &at, &len)) {
    now = kcm_json_tree(s->j.start + at, len);
    if (!now && strncmp(s->j.start + at, "null", 4))
      return KCM_WRITER_WHOLE;
    now = merge(now, status);
    with = kcm_jsonw_tree_text(now);
    json_object_put(now);
    return add_edit(s, at, at + len, with);
  }
  if (s->j.err || !value_at(s, top, &at, &len) || s->j.start[at] != '{')
    return KCM_WRITER_WHOLE;
  now = merge(NULL, status);
  text = kcm_jsonw_tree_text(now);
  json_object_put(now);
  with = text ? format("%s%s", empty_object(s->j.start, at) ? "\"status\":" : ",\"status\":",
                       text)
              : NULL;
  free(text);
  return add_edit(s, at + len - 1, at + len - 1, with);
}

static int by_offset(const void *a, const void *b) {
  const struct edit *x = a, *y = b;
  return x->from < y->from ? -1 : x->from > y->from;
}

int kcm_writer_splice_merge(const char *text, size_t len, struct json_object *patch,
                            struct kcm_buf *out) {
  struct splice s;
  size_t i, at = 0;
  int err = 0;
  if (!json_object_is_type(patch, json_type_object))
    return KCM_WRITER_WHOLE;
  memset(&s, 0, sizeof(s));
  kcm_json_init(&s.j);
  kcm_json_start(&s.j, text, len);
  if (kcm_json_peek(&s.j) != KCM_JSON_OBJECT) { /* the patch replaces it whole */
    kcm_json_release(&s.j);
    return KCM_WRITER_WHOLE;
  }
  json_object_object_foreach(patch, key, value) {
    if (!strcmp(key, "metadata"))
      err = splice_metadata(&s, value);
    else if (!strcmp(key, "status") && value)
      err = splice_status(&s, value);
    else
      err = KCM_WRITER_WHOLE;
    if (err)
      break;
  }
  qsort(s.e, s.n, sizeof(s.e[0]), by_offset);
  for (i = 0; !err && i < s.n; i++) {
    if (s.e[i].from < at) {
      err = KCM_WRITER_WHOLE; /* overlapping edits: a key given twice */
      break;
    }
    if (kcm_buf_append(out, text + at, s.e[i].from - at) ||
        kcm_buf_append_str(out, s.e[i].with))
      err = KCM_ENOMEM;
    at = s.e[i].to;
  }
  if (!err && kcm_buf_append(out, text + at, len - at))
    err = KCM_ENOMEM;
  for (i = 0; i < s.n; i++)
    free(s.e[i].with);
  kcm_json_release(&s.j);
  return err;
}

/* The object read: apply the patch and send it back, or answer why not. */
static void on_got(const struct kcm_client_response *resp, void *data) {
  struct update *u = data;
  struct json_object *doc, *patch;
  int err;

  if (resp->err) {
    finish(u, resp);
    return;
  }
  patch = kcm_json_tree(u->patch, strlen(u->patch));
  if (patch && !u->json_patch) {
    /* A status write: the object's text kept, its status replaced; its
     * escapes shortened, so that what the server took it takes back. */
    struct kcm_buf body = KCM_BUF_INIT((size_t)-1), read = KCM_BUF_INIT((size_t)-1);
    err = kcm_json_shorten_escapes(resp->body, resp->body_len, &read);
    if (!err)
      err = kcm_writer_splice_merge(read.data, read.len, patch, &body);
    kcm_buf_release(&read);
    if (err != KCM_WRITER_WHOLE) {
      json_object_put(patch);
      if (!err) {
        u->put.body = body.data;
        err = u->w->send(u->w, &u->put, on_put, u);
        kcm_buf_release(&body); /* the body was copied when sent */
        if (!err)
          return;
      }
      kcm_buf_release(&body);
      answer_failed(u, err);
      return;
    }
    kcm_buf_release(&body);
  }
  doc = kcm_json_tree(resp->body, strlen(resp->body));
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
    char *body = kcm_jsonw_tree_text(doc);
    u->put.body = body;
    err = body ? u->w->send(u->w, &u->put, on_put, u) : KCM_ENOMEM;
    free(body); /* the body was copied when sent */
  }
  json_object_put(doc);
  if (!err)
    return;
  answer_failed(u, err);
}

/* Answer the caller an error made here, as the API server would word it. */
static void answer_failed(struct update *u, int err) {
  struct kcm_client_response failed = {0};
  failed.err = err;
  failed.status = err == KCM_ECONFLICT ? 409 : 0;
  failed.body = err == KCM_ECONFLICT
                    ? "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\","
                      "\"message\":\"the object has been modified\",\"reason\":\"Conflict\","
                      "\"code\":409}"
                    : "";
  failed.body_len = strlen(failed.body);
  failed.message = err == KCM_ECONFLICT ? "the object has been modified"
                   : err == KCM_ENOMEM  ? "out of memory"
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
