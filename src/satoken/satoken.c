/*
 * satoken/satoken.c — a controller's service-account token, requested and
 * renewed. See include/kcm/satoken.h.
 */
#include <json-c/json.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"
#include "kcm/log.h"
#include "kcm/satoken.h"

#include "internal.h"

#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 60000

static void request_token(struct kcm_satoken *t);
static void refused(struct kcm_client_bearer *b);

uint64_t kcm_satoken_refresh_ms(int64_t life_s) {
  if (life_s <= 1)
    return 1000;
  if (life_s > INT32_MAX)
    life_s = INT32_MAX;
  return (uint64_t)life_s * 800 > 1000 ? (uint64_t)life_s * 800 : 1000;
}

int kcm_satoken_init(struct kcm_satoken *t, uv_loop_t *loop, struct kcm_client *client,
                     unsigned limiter, const char *ns, const char *name) {
  memset(t, 0, sizeof(*t));
  if (strlen(ns) >= sizeof(t->ns) || strlen(name) >= sizeof(t->name))
    return KCM_EINVAL;
  t->loop = loop;
  t->client = client;
  t->limiter = limiter;
  snprintf(t->ns, sizeof(t->ns), "%s", ns);
  snprintf(t->name, sizeof(t->name), "%s", name);
  t->backoff_ms = BACKOFF_FIRST_MS;
  t->seconds = KCM_SATOKEN_SECONDS;
  t->bearer.refused = refused;
  uv_timer_init(loop, &t->timer);
  t->timer.data = t;
  return 0;
}

static void on_timer(uv_timer_t *timer) { request_token(timer->data); }

static void again_in(struct kcm_satoken *t, uint64_t ms) {
  if (!t->stopping)
    uv_timer_start(&t->timer, on_timer, ms, 0);
}

static void failed(struct kcm_satoken *t, const char *what, const char *why) {
  t->asking = false;
  t->stats.failures++;
  kcm_warn("cannot get a service account token serviceAccount=\"%s/%s\" step=\"%s\" err=\"%s\" "
           "retryIn=\"%llums\"",
           t->ns, t->name, what, why, (unsigned long long)t->backoff_ms);
  again_in(t, t->backoff_ms);
  t->backoff_ms = t->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : t->backoff_ms * 2;
}

/* A TokenRequest's answer: the token, and its life from now. */
static int read_answer(const char *body, char **token, int64_t *life_s) {
  struct json_object *doc = kcm_json_tree(body, strlen(body)), *status, *tok, *exp;
  int64_t expires;
  int err = KCM_EINVAL;
  if (doc && json_object_object_get_ex(doc, "status", &status) &&
      json_object_object_get_ex(status, "token", &tok) &&
      json_object_is_type(tok, json_type_string) && json_object_get_string_len(tok) > 0 &&
      json_object_object_get_ex(status, "expirationTimestamp", &exp) &&
      !kcm_api_parse_time(json_object_get_string(exp), &expires)) {
    *life_s = expires - (int64_t)time(NULL);
    *token = strdup(json_object_get_string(tok));
    err = *token ? 0 : KCM_ENOMEM;
  }
  json_object_put(doc);
  return err;
}

static void on_account(const struct kcm_client_response *resp, void *data) {
  struct kcm_satoken *t = data;
  if (t->stopping)
    return;
  /* AlreadyExists: made meanwhile, by kube-controller-manager or a peer. */
  if (resp->err && resp->status != 409) {
    failed(t, "create the ServiceAccount", resp->message);
    return;
  }
  t->asking = false;
  t->stats.accounts_made += !resp->err;
  kcm_info("created a service account serviceAccount=\"%s/%s\"", t->ns, t->name);
  request_token(t);
}

/* The start of a body: its apiVersion and kind, the object left open. */
static void begin(struct kcm_jsonw *w, struct kcm_buf *body, const char *api_version,
                  const char *kind) {
  kcm_jsonw_start(w, body);
  kcm_jsonw_object(w);
  kcm_jsonw_key_string(w, "apiVersion", api_version);
  kcm_jsonw_key_string(w, "kind", kind);
}

/* Close w's object and POST it to the ServiceAccount's collection (name
 * NULL) or its subresource. */
static void post(struct kcm_satoken *t, struct kcm_jsonw *w, const char *name, const char *sub,
                 kcm_client_done_cb done, const char *step) {
  struct kcm_client_request_options o = {0};
  char path[KCM_CLIENT_PATH_MAX];
  kcm_jsonw_end(w);
  o.method = "POST";
  o.path = path;
  o.body = w->out->data;
  o.body_len = w->out->len;
  o.limiter = t->limiter;
  o.done = done;
  o.data = t;
  t->asking = true;
  if (kcm_jsonw_finish(w) ||
      kcm_client_path(path, sizeof(path), "/api/v1", t->ns, "serviceaccounts", name, sub) ||
      kcm_client_request(t->client, &o, NULL))
    failed(t, step, "the request could not be sent");
  kcm_buf_release(w->out); /* the body was copied */
}

static void make_account(struct kcm_satoken *t) {
  struct kcm_buf body = KCM_BUF_INIT(1u << 16);
  struct kcm_jsonw w;
  t->made_account = true;
  begin(&w, &body, "v1", "ServiceAccount");
  kcm_jsonw_key_object(&w, "metadata");
  kcm_jsonw_key_string(&w, "name", t->name);
  kcm_jsonw_end(&w);
  post(t, &w, NULL, NULL, on_account, "create the ServiceAccount");
}

static void on_token(const struct kcm_client_response *resp, void *data) {
  struct kcm_satoken *t = data;
  char *token = NULL;
  int64_t life = 0;
  bool first;
  if (t->stopping)
    return;
  t->asking = false;
  if (resp->status == 404 && !t->made_account) { /* once between two tokens */
    make_account(t);
    return;
  }
  if (resp->err) {
    failed(t, "request a token", resp->message);
    return;
  }
  if (read_answer(resp->body, &token, &life)) {
    failed(t, "request a token", "the answer holds no token and expiry");
    return;
  }
  first = !t->bearer.token;
  free(t->bearer.token);
  t->bearer.token = token;
  t->bearer.generation++;
  t->stats.issued++;
  t->made_account = false;
  t->backoff_ms = BACKOFF_FIRST_MS;
  kcm_v(2, "got a service account token serviceAccount=\"%s/%s\" lifetime=\"%llds\"", t->ns,
        t->name, (long long)life);
  again_in(t, kcm_satoken_refresh_ms(life));
  if (first && t->on_ready)
    t->on_ready(t);
}

static void request_token(struct kcm_satoken *t) {
  struct kcm_buf body = KCM_BUF_INIT(1u << 16);
  struct kcm_jsonw w;
  if (t->stopping)
    return;
  begin(&w, &body, "authentication.k8s.io/v1", "TokenRequest");
  kcm_jsonw_key_object(&w, "spec");
  kcm_jsonw_key_int(&w, "expirationSeconds", t->seconds);
  kcm_jsonw_end(&w);
  post(t, &w, t->name, "token", on_token, "request a token");
}

/* A 401 answered the current token: ask for another now (unless asking
 * already), keeping the old one until then. */
static void refused(struct kcm_client_bearer *b) {
  struct kcm_satoken *t = (struct kcm_satoken *)((char *)b - offsetof(struct kcm_satoken, bearer));
  t->stats.refused++;
  if (t->stopping || t->asking)
    return;
  kcm_warn("the API server refused a service account token; asking for a new one "
           "serviceAccount=\"%s/%s\"",
           t->ns, t->name);
  uv_timer_stop(&t->timer);
  request_token(t);
}

void kcm_satoken_start(struct kcm_satoken *t, void (*on_ready)(struct kcm_satoken *t)) {
  if (t->started)
    return;
  t->started = true;
  t->on_ready = on_ready;
  request_token(t);
}

static void on_timer_closed(uv_handle_t *h) {
  struct kcm_satoken *t = h->data;
  if (t->on_closed)
    t->on_closed(t);
}

void kcm_satoken_stop(struct kcm_satoken *t, void (*on_closed)(struct kcm_satoken *t)) {
  t->stopping = true;
  t->on_closed = on_closed;
  uv_timer_stop(&t->timer);
  uv_close((uv_handle_t *)&t->timer, on_timer_closed);
}

void kcm_satoken_release(struct kcm_satoken *t) {
  if (t->bearer.token)
    explicit_bzero(t->bearer.token, strlen(t->bearer.token));
  free(t->bearer.token);
  t->bearer.token = NULL;
}
