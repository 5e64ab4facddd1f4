/*
 * client/client.c — the client itself: made from its settings (the target
 * URL, the TLS name to connect as, the metrics' host label), its loop
 * handles, rate limits and stats, and closing it. It is freed once the
 * last of its loop handles has closed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"

static void maybe_free(struct kcm_client *c) {
  if (!c->closing || c->open_handles > 0)
    return;
  curl_slist_free_all(c->connect_to);
  free(c->url_host);
  free(c->host);
  kcm_client_token_release(c);
  kcm_client_creds_release(c);
  free(c);
}

void kcm_client_handle_gone(struct kcm_client *c) {
  c->open_handles--;
  maybe_free(c);
}

void kcm_client_handle_closed(uv_handle_t *h) { kcm_client_handle_gone(h->data); }

/* Where requests go (url_host, and connect_to when the TLS name differs
 * from the host) and the host label of the metrics. */
static int setup_target(struct kcm_client *c) {
  CURLU *u = curl_url();
  char *host = NULL, *port = NULL, *scheme = NULL, *given_port = NULL;
  int err = 0;

  if (!u)
    return KCM_ENOMEM;
  if (curl_url_set(u, CURLUPART_URL, c->cfg->server, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
    err = KCM_EINVAL;
    goto out;
  }
  /* The metrics' host: the server URL's host, and its port if it names one. */
  if (curl_url_get(u, CURLUPART_PORT, &given_port, 0) != CURLUE_OK)
    c->host = strdup(host);
  else if (asprintf(&c->host, "%s:%s", host, given_port) < 0)
    c->host = NULL;
  if (!c->host) {
    err = KCM_ENOMEM;
    goto out;
  }
  if (c->cfg->tls_server_name && *c->cfg->tls_server_name) {
    /* Address requests to the TLS name (for SNI and verification) but
     * connect to the configured host. */
    char *entry = NULL;
    if (asprintf(&entry, "%s:%s:%s:%s", c->cfg->tls_server_name, port, host, port) < 0) {
      err = KCM_ENOMEM;
      goto out;
    }
    c->connect_to = curl_slist_append(NULL, entry);
    free(entry);
    if (asprintf(&c->url_host, "%s://%s:%s", scheme, c->cfg->tls_server_name, port) < 0)
      c->url_host = NULL;
  } else {
    c->url_host = strdup(c->cfg->server);
  }
  if (!c->url_host)
    err = KCM_ENOMEM;
out:
  curl_free(host);
  curl_free(port);
  curl_free(given_port);
  curl_free(scheme);
  curl_url_cleanup(u);
  return err;
}

static void global_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int kcm_client_new(struct kcm_client **out, uv_loop_t *loop,
                   const struct kcm_client_config *cfg) {
  static uv_once_t once = UV_ONCE_INIT;
  struct kcm_client *c;
  int err;

  uv_once(&once, global_init);
  c = calloc(1, sizeof(*c));
  if (!c)
    return KCM_ENOMEM;
  c->loop = loop;
  c->cfg = cfg;
  err = setup_target(c);
  if (!err)
    err = kcm_client_transport_init(c);
  if (err) {
    if (c->multi)
      curl_multi_cleanup(c->multi);
    if (c->share)
      curl_share_cleanup(c->share);
    curl_slist_free_all(c->connect_to);
    free(c->url_host);
    free(c->host);
    free(c);
    return err;
  }
  uv_timer_init(loop, &c->timer);
  uv_timer_init(loop, &c->defer);
  uv_timer_init(loop, &c->gate);
  c->timer.data = c->defer.data = c->gate.data = c;
  c->open_handles = 3;
  kcm_client_metrics_init(c);
  kcm_client_set_rate_limit(c, 20, 30);
  *out = c;
  return 0;
}

void kcm_client_set_rate_limit(struct kcm_client *c, double qps, int burst) {
  size_t i;
  for (i = 0; i < KCM_CLIENT_LIMITERS; i++)
    kcm_ratelimit_init(&c->limit[i], qps, burst, uv_now(c->loop));
}

const struct kcm_client_stats *kcm_client_stats(const struct kcm_client *c) {
  return &c->stats;
}

void kcm_client_close(struct kcm_client *c) {
  while (c->active)
    kcm_client_cancel(c->active);
  while (c->parked)
    kcm_client_cancel(c->parked);
  while (c->waiting)
    kcm_client_cancel(c->waiting);
  c->closing = true;
  kcm_client_report_finished(c);
  kcm_client_creds_close(c);
  kcm_client_transport_close(c);
  uv_timer_stop(&c->defer);
  uv_timer_stop(&c->gate);
  uv_close((uv_handle_t *)&c->timer, kcm_client_handle_closed);
  uv_close((uv_handle_t *)&c->defer, kcm_client_handle_closed);
  uv_close((uv_handle_t *)&c->gate, kcm_client_handle_closed);
}
