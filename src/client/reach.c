/* The first contact with the API server: /version until it answers. */
#include <json-c/json.h>

#include "kcm/client.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/log.h"
#include "kcm/ratelimit.h"

#define FIRST_BACKOFF_MS 800
#define MAX_BACKOFF_MS 30000
#define VERSION_PATH "/version"

static void ask(struct kcm_client_reach *r);

static void on_retry(uv_timer_t *t) { ask(t->data); }

/* A failed /version, said as what it is: the server refused the
 * credentials (401), authorization refused the request (403), or the
 * server was not reached (or answered with another error). */
static void report(const struct kcm_client_reach *r, const struct kcm_client_response *resp,
                   uint64_t wait) {
  unsigned long long ms = (unsigned long long)wait;
  if (resp->status == 401)
    kcm_error("unauthorized: the API server refused kcm's credentials; check the token or "
              "client certificate in the kubeconfig, or the service account token "
              "server=\"%s\" status=401 err=\"%s\" retryIn=\"%llums\"",
              r->server, resp->message, ms);
  else if (resp->status == 403)
    kcm_error("forbidden: the API server authenticated kcm but refuses the request; check the "
              "ClusterRole and ClusterRoleBinding of kcm's user server=\"%s\" status=403 "
              "verb=\"get\" path=\"" VERSION_PATH "\" err=\"%s\" retryIn=\"%llums\"",
              r->server, resp->message, ms);
  else
    kcm_error("cannot reach the API server server=\"%s\" err=\"%s: %s\" retryIn=\"%llums\"",
              r->server, kcm_strerror(resp->err), resp->message, ms);
}

static void on_version(const struct kcm_client_response *resp, void *data) {
  struct kcm_client_reach *r = data;
  struct json_object *obj, *ver;
  uint64_t wait;
  if (resp->err == KCM_ECANCELED)
    return;
  if (resp->err) {
    wait = kcm_ratelimit_backoff(FIRST_BACKOFF_MS, MAX_BACKOFF_MS, r->failures++);
    report(r, resp, wait);
    uv_timer_start(&r->retry, on_retry, wait, 0);
    return;
  }
  obj = kcm_json_tree(resp->body, strlen(resp->body));
  kcm_info("connected to the API server server=\"%s\" version=\"%s\"", r->server,
           obj && json_object_object_get_ex(obj, "gitVersion", &ver)
               ? json_object_get_string(ver)
               : "unknown");
  json_object_put(obj);
  r->failures = 0;
}

static void ask(struct kcm_client_reach *r) {
  struct kcm_client_request_options o = {
      .method = "GET", .path = VERSION_PATH, .timeout_ms = 10000, .done = on_version, .data = r};
  int err = kcm_client_request(r->client, &o, NULL);
  if (err)
    kcm_error("cannot send a request err=\"%s\"", kcm_strerror(err));
}

void kcm_client_reach_start(struct kcm_client_reach *r, uv_loop_t *loop, struct kcm_client *c,
                            const char *server) {
  r->client = c;
  r->server = server;
  r->failures = 0;
  uv_timer_init(loop, &r->retry);
  r->retry.data = r;
  ask(r);
}

void kcm_client_reach_stop(struct kcm_client_reach *r) {
  uv_timer_stop(&r->retry);
  uv_close((uv_handle_t *)&r->retry, NULL);
}
