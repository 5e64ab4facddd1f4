/* auth — delegated authentication and authorization; see include/kcm/auth.h. */
#include "kcm/auth.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json-c/json.h>
#include <openssl/evp.h>

#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"
#include "kcm/log.h"

#define MAX_CACHED 4096
#define REVIEW_TIMEOUT_MS 10000
#define DEFAULT_ALLOW_PATHS "/healthz,/readyz,/livez"

/* A user as authentication found it. */
struct user {
  char *name, *uid;
  char **groups; /* NULL-terminated */
  char *extra;   /* the TokenReview's user.extra, JSON text; NULL when none */
};

struct check;

/* A cached answer, or one on its way with the checks that wait for it. */
struct entry {
  struct kcm_auth *a;
  struct kcm_map *map;
  char *key; /* owned */
  uint64_t expires;
  bool pending;
  struct check *waiters;
  bool yes;          /* authenticated / allowed */
  struct user user;  /* tokens: who */
  char *reason;      /* reviews: the SubjectAccessReview's reason */
  struct entry *next_dead; /* among the expired, while sweep() drops them */
};

struct check {
  struct kcm_auth *a;
  kcm_auth_done done;
  void *data;
  struct user user;
  bool known;     /* user holds who is asking */
  bool refused;   /* a credential was presented and not accepted */
  char *verb, *path;
  struct check *next; /* among an entry's waiters */
};

static void authorize(struct check *x);
static void after_authentication(struct check *x);

/* --- users ---------------------------------------------------------------- */

static void user_release(struct user *u) {
  char **g;
  free(u->name);
  free(u->uid);
  free(u->extra);
  for (g = u->groups; g && *g; g++)
    free(*g);
  free(u->groups);
  memset(u, 0, sizeof(*u));
}

static size_t count(const char *const *v) {
  size_t n = 0;
  while (v && v[n])
    n++;
  return n;
}

/* A deep copy of name, uid, groups and extra; an authenticated user also
 * gets system:authenticated unless a group says so (or says
 * system:unauthenticated), as upstream's AuthenticatedGroupAdder does. */
static int user_set(struct user *u, const char *name, const char *uid,
                    const char *const *groups, bool authenticated, const char *extra) {
  static const char all[] = "system:authenticated";
  size_t i, n = count(groups);
  const char *add = authenticated ? all : NULL;
  for (i = 0; add && i < n; i++)
    if (!strcmp(groups[i], all) || !strcmp(groups[i], "system:unauthenticated"))
      add = NULL;
  memset(u, 0, sizeof(*u));
  if (!(u->name = strdup(name)) || !(u->uid = strdup(uid ? uid : "")) ||
      !(u->groups = calloc(n + 2, sizeof(char *))) || (extra && !(u->extra = strdup(extra))))
    goto nomem;
  for (i = 0; i < n; i++)
    if (!(u->groups[i] = strdup(groups[i])))
      goto nomem;
  if (add && !(u->groups[n] = strdup(add)))
    goto nomem;
  return 0;
nomem:
  user_release(u);
  return KCM_ENOMEM;
}

static bool in_groups(const struct user *u, const char *g) {
  char **p;
  for (p = u->groups; p && *p; p++)
    if (!strcmp(*p, g))
      return true;
  return false;
}

/* --- caches --------------------------------------------------------------- */

static const struct kcm_map_type entry_type = KCM_MAP_STRING_KEYED(struct entry, key);

static void entry_free(struct entry *e) {
  free(e->key);
  user_release(&e->user);
  free(e->reason);
  free(e);
}

/* Drop answers past their time; pending ones stay. One pass gathers them,
 * as removing invalidates the iterator. */
static void sweep(struct kcm_map *m, uint64_t now) {
  struct kcm_map_iter it;
  struct entry *e, *dead = NULL;
  kcm_map_iter_init(&it, m);
  while ((e = kcm_map_next(&it)))
    if (!e->pending && e->expires <= now) {
      e->next_dead = dead;
      dead = e;
    }
  while ((e = dead)) {
    dead = e->next_dead;
    kcm_map_remove(m, e->key);
    entry_free(e);
  }
}

/* The live entry for key, or NULL. An expired one is dropped. */
static struct entry *lookup(struct kcm_map *m, const char *key, uint64_t now) {
  struct entry *e = kcm_map_get(m, key);
  if (e && !e->pending && e->expires <= now) {
    kcm_map_remove(m, key);
    entry_free(e);
    e = NULL;
  }
  return e;
}

/* A pending entry for key, with x waiting on it; takes key. */
static struct entry *start_entry(struct kcm_auth *a, struct kcm_map *m, char *key,
                                 struct check *x) {
  struct entry *e = calloc(1, sizeof(*e));
  if (!e || kcm_map_put(m, key, e, NULL)) {
    free(e);
    free(key);
    return NULL;
  }
  e->a = a;
  e->map = m;
  e->key = key;
  e->pending = true;
  e->waiters = x;
  x->next = NULL;
  return e;
}

/* The answer came: cache it (for a time above 0, room permitting) and hand
 * its waiters back. Returns the waiters; the entry may be gone afterwards. */
static struct check *settle(struct entry *e, bool cache, uint64_t ttl_ms) {
  struct kcm_auth *a = e->a;
  struct check *w = e->waiters;
  uint64_t now = uv_now(a->loop);
  cache = cache && ttl_ms > 0;
  e->waiters = NULL;
  e->pending = false;
  e->expires = now + ttl_ms;
  if (cache && e->map->len > MAX_CACHED)
    sweep(e->map, now);
  if (!cache || e->map->len > MAX_CACHED) {
    kcm_map_remove(e->map, e->key);
    return w; /* the caller frees e after serving the waiters */
  }
  return w;
}

/* --- answers -------------------------------------------------------------- */

static void finish(struct check *x, int status, const char *message) {
  struct kcm_auth_decision d;
  d.status = status;
  d.user = x->known ? x->user.name : "";
  d.message = message;
  x->done(x->data, &d);
  user_release(&x->user);
  free(x->verb);
  free(x->path);
  free(x);
}

/* Go's %q of s, near enough for a message: quotes, backslashes and
 * control bytes escaped. */
static void quote(char *out, size_t len, const char *s) {
  size_t n = 0;
  if (len < 3)
    return;
  out[n++] = '"';
  for (; *s && n + 6 < len; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      out[n++] = '\\';
      out[n++] = (char)c;
    } else if (c < 0x20 || c == 0x7f) {
      n += (size_t)snprintf(out + n, len - n, "\\x%02x", c);
    } else {
      out[n++] = (char)c;
    }
  }
  out[n++] = '"';
  out[n] = '\0';
}

static void forbid(struct check *x, const char *reason) {
  char user[300], path[600], msg[1400];
  quote(user, sizeof(user), x->user.name);
  quote(path, sizeof(path), x->path);
  snprintf(msg, sizeof(msg), "forbidden: User %s cannot %s path %s%s%s", user, x->verb, path,
           reason && *reason ? ": " : "", reason ? reason : "");
  finish(x, 403, msg);
}

static void fail(struct check *x, const char *why) {
  char path[600], msg[1200];
  quote(path, sizeof(path), x->path);
  snprintf(msg, sizeof(msg), "Internal Server Error: %s: %s", path, why);
  finish(x, 500, msg);
}

/* --- authentication ------------------------------------------------------- */

static char *token_key(const char *token) {
  unsigned char md[32];
  unsigned int n = 0;
  char *hex = malloc(65);
  size_t i;
  if (!hex || !EVP_Digest(token, strlen(token), md, &n, EVP_sha256(), NULL) || n != 32) {
    free(hex);
    return NULL;
  }
  for (i = 0; i < 32; i++)
    snprintf(hex + 2 * i, 3, "%02x", md[i]);
  return hex;
}

static void token_answer(struct check *x, const struct entry *e) {
  if (!e->yes) {
    x->refused = true;
    after_authentication(x);
    return;
  }
  if (user_set(&x->user, e->user.name, e->user.uid, (const char *const *)e->user.groups, true,
               e->user.extra)) {
    fail(x, "out of memory");
    return;
  }
  x->known = true;
  authorize(x);
}

static const char *string_at(struct json_object *o, const char *k) {
  struct json_object *v;
  return json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string)
             ? json_object_get_string(v)
             : NULL;
}

/* Read a TokenReview's status into e. Returns 0, or -1 for an answer that
 * is not one. */
static int read_token_review(struct entry *e, const char *body, size_t len) {
  struct json_object *doc = kcm_json_tree(body, len), *status, *user, *v, *groups;
  const char **list = NULL, *name;
  char *extra = NULL;
  int rc = -1;
  size_t i, n;
  if (!doc || !json_object_object_get_ex(doc, "status", &status) ||
      !json_object_is_type(status, json_type_object))
    goto out;
  e->yes = json_object_object_get_ex(status, "authenticated", &v) &&
           json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
  if (!e->yes) {
    rc = 0;
    goto out;
  }
  if (!json_object_object_get_ex(status, "user", &user) ||
      !json_object_is_type(user, json_type_object) || !(name = string_at(user, "username")) ||
      !*name)
    goto out;
  n = json_object_object_get_ex(user, "groups", &groups) &&
              json_object_is_type(groups, json_type_array)
          ? json_object_array_length(groups)
          : 0;
  if (!(list = calloc(n + 1, sizeof(char *))))
    goto out;
  for (i = 0; i < n; i++) {
    v = json_object_array_get_idx(groups, i);
    if (!json_object_is_type(v, json_type_string))
      goto out;
    list[i] = json_object_get_string(v);
  }
  v = NULL;
  json_object_object_get_ex(user, "extra", &v);
  if (v && json_object_is_type(v, json_type_object) && json_object_object_length(v) &&
      !(extra = kcm_jsonw_tree_text(v)))
    goto out;
  rc = user_set(&e->user, name, string_at(user, "uid"), list, false, extra);
out:
  free(extra);
  free((void *)list);
  json_object_put(doc);
  return rc;
}

static void on_token_review(const struct kcm_client_response *resp, void *data) {
  struct entry *e = data;
  struct kcm_auth *a = e->a;
  bool ok = resp->err == 0 && read_token_review(e, resp->body, resp->body_len) == 0;
  struct check *w, *next;
  if (!ok)
    kcm_warn("a TokenReview failed err=\"%s\" status=%ld message=\"%s\"",
             resp->err ? kcm_strerror(resp->err) : "not a TokenReview", resp->status,
             resp->message);
  w = settle(e, ok, a->o.token_ttl_ms);
  for (; w; w = next) {
    next = w->next;
    if (ok) {
      token_answer(w, e);
    } else {
      w->refused = true;
      after_authentication(w);
    }
  }
  if (kcm_map_get(&a->tokens, e->key) != e)
    entry_free(e);
}

static int send_token_review(struct kcm_auth *a, struct entry *e, const char *token) {
  struct kcm_buf text = KCM_BUF_INIT(SIZE_MAX);
  struct kcm_client_request_options ro = {0};
  struct kcm_jsonw w;
  char *body;
  int rc;
  kcm_jsonw_start(&w, &text);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "apiVersion", "authentication.k8s.io/v1");
  kcm_jsonw_key_string(&w, "kind", "TokenReview");
  kcm_jsonw_key_object(&w, "spec");
  kcm_jsonw_key_string(&w, "token", token);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  body = kcm_jsonw_finish(&w) ? NULL : kcm_buf_take(&text);
  kcm_buf_release(&text);
  if (!body)
    return KCM_ENOMEM;
  ro.method = "POST";
  ro.path = "/apis/authentication.k8s.io/v1/tokenreviews";
  ro.body = body;
  ro.body_len = strlen(body);
  ro.timeout_ms = REVIEW_TIMEOUT_MS;
  ro.limiter = a->o.limiter;
  ro.repeatable = true; /* a review is not stored: asking twice is asking once */
  ro.done = on_token_review;
  ro.data = e;
  rc = kcm_client_request(a->o.authn, &ro, NULL);
  free(body);
  if (rc == 0)
    a->stats.token_reviews++;
  return rc;
}

/* The bearer token of an Authorization header, as upstream reads it:
 * "Bearer" (any case), one space, the token up to the next space. */
static char *bearer_token(const char *header) {
  const char *sp;
  size_t n;
  if (!header || !(sp = strchr(header, ' ')) || sp - header != 6 ||
      strncasecmp(header, "bearer", 6))
    return NULL;
  n = strcspn(sp + 1, " ");
  return n ? strndup(sp + 1, n) : NULL;
}

static void authenticate_token(struct check *x, const char *header) {
  struct kcm_auth *a = x->a;
  char *token = a->o.authn ? bearer_token(header) : NULL, *key;
  struct entry *e;
  if (!token) {
    after_authentication(x);
    return;
  }
  key = token_key(token);
  if (!key) {
    free(token);
    fail(x, "out of memory");
    return;
  }
  e = lookup(&a->tokens, key, uv_now(a->loop));
  if (e && e->pending) {
    x->next = e->waiters;
    e->waiters = x;
  } else if (e) {
    a->stats.cache_hits++;
    token_answer(x, e);
  } else if (!(e = start_entry(a, &a->tokens, key, x))) {
    key = NULL;
    fail(x, "out of memory");
  } else if (send_token_review(a, e, token)) {
    kcm_map_remove(&a->tokens, e->key);
    entry_free(e);
    key = NULL;
    x->refused = true;
    after_authentication(x);
  } else {
    key = NULL;
  }
  free(key);
  explicit_bzero(token, strlen(token));
  free(token);
}

static void after_authentication(struct check *x) {
  static const char *const unauthenticated[] = {"system:unauthenticated", NULL};
  if (x->known) {
    authorize(x);
  } else if (x->refused) {
    finish(x, 401, "Unauthorized");
  } else if (user_set(&x->user, "system:anonymous", "", unauthenticated, false, NULL)) {
    fail(x, "out of memory");
  } else {
    x->known = true;
    authorize(x);
  }
}

/* --- authorization -------------------------------------------------------- */

static bool always_allowed(const struct kcm_auth *a, const char *path) {
  char **p;
  for (p = a->allow_paths; *p; p++) {
    size_t n = strlen(*p);
    if (n && (*p)[n - 1] == '*' ? !strncmp(path, *p, n - 1) : !strcmp(path, *p))
      return true;
  }
  return false;
}

/* The SubjectAccessReview to send, as JSON text: also the cache key. */
static char *review_doc(const struct check *x) {
  struct kcm_buf text = KCM_BUF_INIT(SIZE_MAX);
  struct kcm_jsonw w;
  char **g, *out = NULL;
  kcm_jsonw_start(&w, &text);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "apiVersion", "authorization.k8s.io/v1");
  kcm_jsonw_key_string(&w, "kind", "SubjectAccessReview");
  kcm_jsonw_key_object(&w, "spec");
  kcm_jsonw_key_object(&w, "nonResourceAttributes");
  kcm_jsonw_key_string(&w, "path", x->path);
  kcm_jsonw_key_string(&w, "verb", x->verb);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_string(&w, "user", x->user.name);
  kcm_jsonw_key_array(&w, "groups");
  for (g = x->user.groups; g && *g; g++)
    kcm_jsonw_string(&w, *g);
  kcm_jsonw_end(&w);
  if (x->user.extra) { /* written by kcm_jsonw_tree_text() */
    kcm_jsonw_key(&w, "extra");
    kcm_jsonw_raw(&w, x->user.extra, strlen(x->user.extra));
  }
  if (*x->user.uid)
    kcm_jsonw_key_string(&w, "uid", x->user.uid);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  if (!kcm_jsonw_finish(&w))
    out = kcm_buf_take(&text);
  kcm_buf_release(&text);
  return out;
}

static void review_answer(struct check *x, const struct entry *e) {
  if (e->yes)
    finish(x, 200, "");
  else
    forbid(x, e->reason);
}

static int read_access_review(struct entry *e, const char *body, size_t len) {
  struct json_object *doc = kcm_json_tree(body, len), *status, *v;
  const char *reason;
  int rc = -1;
  if (doc && json_object_object_get_ex(doc, "status", &status) &&
      json_object_is_type(status, json_type_object)) {
    e->yes = json_object_object_get_ex(status, "allowed", &v) &&
             json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v);
    reason = string_at(status, "reason");
    rc = reason && !(e->reason = strdup(reason)) ? -1 : 0;
  }
  json_object_put(doc);
  return rc;
}

static void on_access_review(const struct kcm_client_response *resp, void *data) {
  struct entry *e = data;
  struct kcm_auth *a = e->a;
  bool ok = resp->err == 0 && read_access_review(e, resp->body, resp->body_len) == 0;
  struct check *w, *next;
  char why[300];
  if (!ok) {
    snprintf(why, sizeof(why), "a SubjectAccessReview failed: %s",
             resp->err ? (*resp->message ? resp->message : kcm_strerror(resp->err))
                       : "the answer is not a SubjectAccessReview");
    kcm_warn("a SubjectAccessReview failed err=\"%s\" status=%ld message=\"%s\"",
             resp->err ? kcm_strerror(resp->err) : "not a SubjectAccessReview", resp->status,
             resp->message);
  }
  w = settle(e, ok, e->yes ? a->o.allow_ttl_ms : a->o.deny_ttl_ms);
  for (; w; w = next) {
    next = w->next;
    if (ok)
      review_answer(w, e);
    else
      fail(w, why);
  }
  if (kcm_map_get(&a->reviews, e->key) != e)
    entry_free(e);
}

static int send_access_review(struct kcm_auth *a, struct entry *e) {
  struct kcm_client_request_options ro = {0};
  int rc;
  ro.method = "POST";
  ro.path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
  ro.body = e->key;
  ro.body_len = strlen(e->key);
  ro.timeout_ms = REVIEW_TIMEOUT_MS;
  ro.limiter = a->o.limiter;
  ro.repeatable = true;
  ro.done = on_access_review;
  ro.data = e;
  rc = kcm_client_request(a->o.authz, &ro, NULL);
  if (rc == 0)
    a->stats.access_reviews++;
  return rc;
}

static void authorize(struct check *x) {
  struct kcm_auth *a = x->a;
  struct entry *e;
  char *key;
  if (in_groups(&x->user, "system:masters") || always_allowed(a, x->path)) {
    finish(x, 200, "");
    return;
  }
  if (!a->o.authz) {
    forbid(x, "");
    return;
  }
  if (!(key = review_doc(x))) {
    fail(x, "out of memory");
    return;
  }
  e = lookup(&a->reviews, key, uv_now(a->loop));
  if (e && e->pending) {
    free(key);
    x->next = e->waiters;
    e->waiters = x;
  } else if (e) {
    free(key);
    a->stats.cache_hits++;
    review_answer(x, e);
  } else if (!(e = start_entry(a, &a->reviews, key, x))) {
    fail(x, "out of memory");
  } else if (send_access_review(a, e)) {
    kcm_map_remove(&a->reviews, e->key);
    entry_free(e);
    fail(x, "cannot send a SubjectAccessReview");
  }
}

/* --- checks --------------------------------------------------------------- */

int kcm_auth_check(struct kcm_auth *a, const struct kcm_auth_request *r, kcm_auth_done done,
                   void *data) {
  struct check *x = calloc(1, sizeof(*x));
  size_t i;
  if (!x)
    return KCM_ENOMEM;
  x->a = a;
  x->done = done;
  x->data = data;
  x->verb = strdup(r->method);
  x->path = strdup(r->path);
  if (!x->verb || !x->path) {
    free(x->verb);
    free(x->path);
    free(x);
    return KCM_ENOMEM;
  }
  for (i = 0; x->verb[i]; i++)
    x->verb[i] = (char)(x->verb[i] >= 'A' && x->verb[i] <= 'Z' ? x->verb[i] + 32 : x->verb[i]);
  if (r->cert && r->cert->state == KCM_TLS_PEER_REJECTED) {
    x->refused = true;
  } else if (r->cert && r->cert->state == KCM_TLS_PEER_VERIFIED && *r->cert->user) {
    if (user_set(&x->user, r->cert->user, "", (const char *const *)r->cert->groups, true,
                 NULL)) {
      fail(x, "out of memory");
      return 0;
    }
    x->known = true;
    authorize(x);
    return 0;
  }
  authenticate_token(x, r->authorization);
  return 0;
}

int kcm_auth_init(struct kcm_auth *a, uv_loop_t *loop, const struct kcm_auth_options *o) {
  const char *p = o->always_allow_paths ? o->always_allow_paths : DEFAULT_ALLOW_PATHS;
  size_t n = 1, i = 0;
  memset(a, 0, sizeof(*a));
  a->loop = loop;
  a->o = *o;
  a->o.always_allow_paths = NULL;
  kcm_map_init(&a->tokens, &entry_type);
  kcm_map_init(&a->reviews, &entry_type);
  for (const char *q = p; *q; q++)
    n += *q == ',';
  if (!(a->allow_paths = calloc(n + 1, sizeof(char *))))
    return KCM_ENOMEM;
  for (;;) {
    size_t len = strcspn(p, ",");
    if (len && !(a->allow_paths[i++] = strndup(p, len))) {
      kcm_auth_release(a);
      return KCM_ENOMEM;
    }
    p += len;
    if (!*p)
      break;
    p++;
  }
  return 0;
}

const char *kcm_auth_refusal(const struct kcm_auth_decision *d, struct kcm_buf *body) {
  struct kcm_buf text = KCM_BUF_INIT(body->limit);
  struct kcm_jsonw w;
  int err;
  if (d->status == 500)
    return kcm_buf_appendf(body, "%s\n", d->message) ? NULL : "text/plain; charset=utf-8";
  kcm_jsonw_start(&w, &text);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "kind", "Status");
  kcm_jsonw_key_string(&w, "apiVersion", "v1");
  kcm_jsonw_key_object(&w, "metadata");
  kcm_jsonw_end(&w);
  kcm_jsonw_key_string(&w, "status", "Failure");
  kcm_jsonw_key_string(&w, "message", d->message);
  kcm_jsonw_key_string(&w, "reason", d->status == 401 ? "Unauthorized" : "Forbidden");
  if (d->status != 401) {
    kcm_jsonw_key_object(&w, "details");
    kcm_jsonw_end(&w);
  }
  kcm_jsonw_key_int(&w, "code", d->status);
  kcm_jsonw_end(&w);
  /* whole or not at all */
  err = kcm_jsonw_finish(&w) || kcm_buf_append(body, text.data, text.len);
  kcm_buf_release(&text);
  return err ? NULL : "application/json";
}

static void release_map(struct kcm_map *m) {
  struct kcm_map_iter it;
  struct entry *e;
  kcm_map_iter_init(&it, m);
  while ((e = kcm_map_next(&it)))
    entry_free(e);
  kcm_map_release(m);
}

void kcm_auth_release(struct kcm_auth *a) {
  char **p;
  for (p = a->allow_paths; p && *p; p++)
    free(*p);
  free(a->allow_paths);
  release_map(&a->tokens);
  release_map(&a->reviews);
  memset(a, 0, sizeof(*a));
}
