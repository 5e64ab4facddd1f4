/*
 * client/metrics.c — client-go's rest_client_* families: request and rate
 * limiter latency by method, and attempts and retries by status and method.
 * The counts live in the client struct; rendering reads them.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/* The methods the metrics tell apart; the last stands for any other. */
static const char *const verbs[KCM_CLIENT_VERBS] = {
    "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "OTHER",
};

/* client-go's buckets for request and rate limiter latency. */
static const double latency_buckets[] = {
    0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60,
};

void kcm_client_metrics_init(struct kcm_client *c) {
  size_t i;
  for (i = 0; i < KCM_CLIENT_VERBS; i++) {
    kcm_metrics_histogram_init(&c->duration[i], latency_buckets,
                               sizeof(latency_buckets) / sizeof(latency_buckets[0]));
    kcm_metrics_histogram_init(&c->throttled[i], latency_buckets,
                               sizeof(latency_buckets) / sizeof(latency_buckets[0]));
  }
}

uint8_t kcm_client_verb(const char *method) {
  uint8_t i;
  for (i = 0; i < KCM_CLIENT_VERBS - 1; i++)
    if (!strcasecmp(method, verbs[i]))
      return i;
  return KCM_CLIENT_VERBS - 1;
}

void kcm_client_count_attempt(struct kcm_client_request *r) {
  struct kcm_client *c = r->client;
  struct kcm_client_result *e = NULL;
  long status = 0;
  size_t i;

  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status < 0 || status > UINT16_MAX)
    status = 0;
  for (i = 0; i < c->nresults && !e; i++)
    if (c->results[i].code == status && c->results[i].verb == r->verb)
      e = &c->results[i];
  if (!e && c->nresults < KCM_CLIENT_RESULTS) {
    e = &c->results[c->nresults++];
    e->code = (uint16_t)status;
    e->verb = r->verb;
  }
  if (!e)
    return;
  e->requests++;
  if (r->retries)
    e->retries++;
}

void kcm_client_observe_throttle(struct kcm_client_request *r, uint64_t wait_ms) {
  struct kcm_client *c = r->client;
  if (c->limit[r->limiter].qps > 0) /* no limiter, no wait to count */
    kcm_metrics_histogram_observe(&c->throttled[r->verb], (double)wait_ms / 1000.0);
}

void kcm_client_observe_duration(struct kcm_client_request *r) {
  if (!r->watch)
    kcm_metrics_histogram_observe(&r->client->duration[r->verb],
                                  (double)(uv_now(r->client->loop) - r->created) / 1000.0);
}

/* One histogram family, a histogram per method that has observations. */
static void render_latency(const struct kcm_client *c, struct kcm_buf *out, const char *name,
                           const char *help, const struct kcm_metrics_histogram *h) {
  bool header = false;
  size_t i;
  for (i = 0; i < KCM_CLIENT_VERBS; i++) {
    const char *pairs[] = {"host", c->host, "verb", verbs[i], NULL};
    char labels[512];
    if (!h[i].count || kcm_metrics_labels(labels, sizeof(labels), pairs))
      continue;
    if (!header && kcm_metrics_family(out, name, "histogram", help))
      return;
    header = true;
    kcm_metrics_histogram_render(out, name, labels, &h[i]);
  }
}

/* One counter family over the results: every attempt, or the retries. */
static void render_results(const struct kcm_client *c, struct kcm_buf *out, const char *name,
                           const char *help, const char *method_label, bool retries) {
  bool header = false;
  size_t i;
  for (i = 0; i < c->nresults; i++) {
    const struct kcm_client_result *e = &c->results[i];
    uint64_t n = retries ? e->retries : e->requests;
    char code[16], labels[512];
    const char *pairs[] = {"code", code, "host", c->host, method_label, verbs[e->verb], NULL};
    if (e->code)
      snprintf(code, sizeof(code), "%u", (unsigned)e->code);
    else
      snprintf(code, sizeof(code), "<error>");
    if (!n || kcm_metrics_labels(labels, sizeof(labels), pairs))
      continue;
    if (!header && kcm_metrics_family(out, name, "counter", help))
      return;
    header = true;
    kcm_metrics_sample(out, name, labels, (double)n);
  }
}

void kcm_client_metrics(const struct kcm_client *c, struct kcm_buf *out) {
  /* component-base's help texts (ALPHA as upstream marks them), in the
   * name order Prometheus clients write families. */
  render_latency(c, out, "rest_client_rate_limiter_duration_seconds",
                 "[ALPHA] Client side rate limiter latency in seconds. Broken down by verb, and "
                 "host.",
                 c->throttled);
  render_latency(c, out, "rest_client_request_duration_seconds",
                 "[ALPHA] Request latency in seconds. Broken down by verb, and host.", c->duration);
  render_results(c, out, "rest_client_request_retries_total",
                 "[ALPHA] Number of request retries, partitioned by status code, verb, and host.",
                 "verb", true);
  render_results(c, out, "rest_client_requests_total",
                 "[ALPHA] Number of HTTP requests, partitioned by status code, method, and host.",
                 "method", false);
}
