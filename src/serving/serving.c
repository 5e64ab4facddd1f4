/*
 * kcm's HTTP endpoints on the listeners the flags turn on; what they say
 * comes from the owner's handlers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/log.h"
#include "kcm/serving.h"

#define CERT_RELOAD_MS 60000

/* Replace a body that could not be rendered with a 500 saying what. */
static void failed(struct kcm_server_response *resp, const char *what) {
  resp->status = 500;
  resp->content_type = "text/plain; charset=utf-8";
  kcm_buf_reset(&resp->body);
  kcm_buf_append_str(&resp->body, what);
}

/* /healthz, /livez and /readyz. Returns false for another path. */
static bool answer_health(struct kcm_serving *a, const struct kcm_server_request *req,
                          struct kcm_server_response *resp) {
  struct kcm_server_check checks[KCM_SERVING_CHECKS];
  const char *endpoint = kcm_server_path_under(req->path, "/healthz") ? "healthz"
                         : kcm_server_path_under(req->path, "/livez") ? "livez"
                         : kcm_server_path_under(req->path, "/readyz") ? "readyz"
                                                                       : NULL;
  if (!endpoint)
    return false;
  kcm_server_checks(endpoint, checks, a->h.checks(a->h.data, endpoint[0] == 'r', checks), req,
                    resp);
  return true;
}

/* /debug/shadow: with --shadow, what it found; else not found. */
static void answer_shadow(struct kcm_serving *a, struct kcm_server_response *resp) {
  if (!a->h.shadow) {
    kcm_server_not_found(resp);
    return;
  }
  resp->content_type = "application/json";
  if (a->h.shadow(a->h.data, &resp->body))
    failed(resp, "could not render the report\n");
}

static void answer_metrics(struct kcm_serving *a, struct kcm_server_response *resp) {
  resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
  if (a->h.metrics(a->h.data, &resp->body))
    failed(resp, "could not render the metrics\n");
}

static void on_health(void *data, struct kcm_server_exchange *x,
                      const struct kcm_server_request *req, struct kcm_server_response *resp) {
  if (!answer_health(data, req, resp))
    kcm_server_not_found(resp);
  kcm_server_reply(x);
}

static void on_metrics(void *data, struct kcm_server_exchange *x,
                       const struct kcm_server_request *req, struct kcm_server_response *resp) {
  if (!strcmp(req->path, "/metrics")) {
    answer_metrics(data, resp);
  } else if (!strcmp(req->path, "/debug/shadow")) {
    /* plans name objects and fields: for authorized callers only */
    resp->status = 403;
    resp->content_type = "text/plain; charset=utf-8";
    kcm_buf_append_str(&resp->body, "/debug/shadow is served on the secure port only, to "
                                    "callers authorized for it\n");
  } else {
    kcm_server_not_found(resp);
  }
  kcm_server_reply(x);
}

/* A request on the secure port, waiting for authentication and
 * authorization. */
struct secure_request {
  struct kcm_serving *a;
  struct kcm_server_exchange *x;
  const struct kcm_server_request *req;
  struct kcm_server_response *resp;
};

static void on_decision(void *data, const struct kcm_auth_decision *d) {
  struct secure_request *r = data;
  if (d->status != 200) {
    const char *type;
    kcm_v(4, "refused a request status=%d user=\"%s\" path=\"%s\" peer=\"%s\" reason=\"%s\"",
          d->status, d->user, r->req->path, r->req->peer, d->message);
    r->resp->status = d->status;
    if ((type = kcm_auth_refusal(d, &r->resp->body)))
      r->resp->content_type = type;
  } else if (strcmp(r->req->path, "/metrics") == 0) {
    answer_metrics(r->a, r->resp);
  } else if (strcmp(r->req->path, "/debug/shadow") == 0) {
    answer_shadow(r->a, r->resp);
  } else if (!answer_health(r->a, r->req, r->resp)) {
    kcm_server_not_found(r->resp);
  }
  kcm_server_reply(r->x);
  free(r);
}

static void on_secure(void *data, struct kcm_server_exchange *x,
                      const struct kcm_server_request *req, struct kcm_server_response *resp) {
  struct kcm_serving *a = data;
  struct secure_request *r = malloc(sizeof(*r));
  struct kcm_auth_request ar = {req->method, req->path, req->authorization, req->cert};
  if (r) {
    *r = (struct secure_request){a, x, req, resp};
    if (kcm_auth_check(&a->auth, &ar, on_decision, r) == 0)
      return;
    free(r);
  }
  resp->status = 500;
  kcm_buf_append_str(&resp->body, "out of memory\n");
  kcm_server_reply(x);
}

static int listen_on(struct kcm_serving *a, struct kcm_server *s, const char *what,
                     const struct kcm_server_options *so) {
  const char *why = NULL;
  int err = kcm_server_listen(s, a->loop, so, &why);
  if (err) {
    kcm_error("cannot serve what=\"%s\" address=\"%s\" err=\"%s\"", what, so->address, why);
    return err;
  }
  kcm_info("serving %s address=\"%s\"", what, s->address);
  return 0;
}

/* The plain listener for local runs, if its flag turned it on. */
static int serve_plain(struct kcm_serving *a, const char *flag, bool health) {
  char buf[96];
  struct kcm_server_options so = {0};
  int err;
  if (!strcmp(flag, "0"))
    return 0;
  so.address = kcm_options_local_address(flag, buf, sizeof(buf));
  so.handler = health ? on_health : on_metrics;
  so.data = a;
  if ((err = listen_on(a, health ? &a->health : &a->metrics, health ? "health probes" : "metrics",
                    &so)))
    return err;
  if (health)
    a->serving_health = true;
  else
    a->serving_metrics = true;
  return 0;
}

static void on_cert_reload(uv_timer_t *t) {
  struct kcm_serving *a = t->data;
  char *err = NULL;
  int rc = kcm_tls_reload(a->tls, &err);
  if (rc == 1)
    kcm_info("serving a new certificate");
  else if (rc < 0)
    kcm_error("cannot serve the changed certificate files, keeping the old ones err=\"%s\"",
              err ? err : kcm_strerror(rc));
  free(err);
}

/* A client for TokenReviews or SubjectAccessReviews: on its own
 * kubeconfig (loaded into *cfg), or on kcm's connection; 200 qps and 400
 * burst, as upstream's delegated clients. */
static int auth_client(struct kcm_serving *a, const char *kubeconfig,
                       struct kcm_client_config *cfg, struct kcm_client **c) {
  struct kcm_client_config_options co = {kubeconfig, NULL, NULL};
  char *err = NULL;
  int rc = kubeconfig ? kcm_client_config_load(cfg, &co, &err) : 0;
  if (rc) {
    kcm_error("cannot load a kubeconfig err=\"%s\"", err ? err : kcm_strerror(rc));
    free(err);
    return rc;
  }
  if ((rc = kcm_client_new(c, a->loop, kubeconfig ? cfg : a->cfg))) {
    kcm_error("cannot set up a client server=\"%s\" err=\"%s\"",
              (kubeconfig ? cfg : a->cfg)->server, kcm_strerror(rc));
    return rc;
  }
  kcm_client_set_rate_limit(*c, 200, 400);
  return 0;
}

/* Authentication and authorization of the secure port's requests. */
static int setup_auth(struct kcm_serving *a, const struct kcm_options *o) {
  struct kcm_auth_options ao = {0};
  int err = auth_client(a, o->authn_kubeconfig, &a->authn_cfg, &a->authn);
  if (err)
    return err;
  a->authz = a->authn;
  if ((!o->authz_kubeconfig != !o->authn_kubeconfig ||
       (o->authz_kubeconfig && strcmp(o->authz_kubeconfig, o->authn_kubeconfig))) &&
      (err = auth_client(a, o->authz_kubeconfig, &a->authz_cfg, &a->authz)))
    return err;
  ao.authn = a->authn;
  ao.authz = a->authz;
  ao.always_allow_paths = o->always_allow_paths;
  ao.token_ttl_ms = o->token_ttl_ms;
  ao.allow_ttl_ms = o->allow_ttl_ms;
  ao.deny_ttl_ms = o->deny_ttl_ms;
  if (kcm_auth_init(&a->auth, a->loop, &ao)) {
    kcm_error("cannot set up authentication err=\"out of memory\"");
    return KCM_ENOMEM;
  }
  return 0;
}

/* HTTPS on --secure-port, as kube-controller-manager serves it. */
static int serve_secure(struct kcm_serving *a, const struct kcm_options *o) {
  struct kcm_tls_options to = {o->tls_cert_file, o->tls_key_file, o->cert_dir, "kcm",
                               o->client_ca_file, o->bind_address, o->tls13_only};
  struct kcm_server_options so = {0};
  char address[96], *why = NULL;
  int err;
  if (o->secure_port == 0)
    return 0;
  if ((err = kcm_tls_new(&a->tls, &to, &why))) {
    kcm_error("cannot set up TLS err=\"%s\"", why ? why : kcm_strerror(err));
    free(why);
    return err;
  }
  if (!o->tls_cert_file)
    kcm_info("serving a self-signed certificate dir=\"%s\"", o->cert_dir);
  if ((err = setup_auth(a, o)))
    return err;
  snprintf(address, sizeof(address), strchr(o->bind_address, ':') ? "[%s]:%d" : "%s:%d",
           o->bind_address, o->secure_port);
  so.address = address;
  so.tls = a->tls;
  so.handler = on_secure;
  so.data = a;
  if ((err = listen_on(a, &a->secure, "securely", &so)))
    return err;
  a->serving_secure = true;
  uv_timer_init(a->loop, &a->cert_reload);
  a->cert_reload.data = a;
  uv_timer_start(&a->cert_reload, on_cert_reload, CERT_RELOAD_MS, CERT_RELOAD_MS);
  return 0;
}

int kcm_serving_start(struct kcm_serving *s, uv_loop_t *loop, const struct kcm_options *o,
                      const struct kcm_client_config *cfg, const struct kcm_serving_handlers *h) {
  int err;
  memset(s, 0, sizeof(*s));
  s->loop = loop;
  s->h = *h;
  s->cfg = cfg;
  if ((err = serve_secure(s, o)) || (err = serve_plain(s, o->health_address, true)) ||
      (err = serve_plain(s, o->metrics_address, false)))
    return err;
  return 0;
}

void kcm_serving_close(struct kcm_serving *s) {
  if (s->serving_secure) {
    kcm_server_close(&s->secure, NULL);
    uv_timer_stop(&s->cert_reload);
    uv_close((uv_handle_t *)&s->cert_reload, NULL);
  }
  if (s->authz && s->authz != s->authn)
    kcm_client_close(s->authz);
  if (s->authn)
    kcm_client_close(s->authn);
  s->authn = s->authz = NULL;
  if (s->serving_health)
    kcm_server_close(&s->health, NULL);
  if (s->serving_metrics)
    kcm_server_close(&s->metrics, NULL);
}

void kcm_serving_release(struct kcm_serving *s) {
  if (s->serving_secure)
    kcm_auth_release(&s->auth);
  kcm_tls_free(s->tls);
  s->tls = NULL;
  kcm_client_config_release(&s->authz_cfg);
  kcm_client_config_release(&s->authn_cfg);
}
