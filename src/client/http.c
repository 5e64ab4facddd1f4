/*
 * client/http.c — HTTP requests to the API server on the libuv loop.
 *
 * libcurl's multi-socket interface tells us which sockets to watch and when
 * to wake; uv_poll handles watch the sockets and one uv_timer carries
 * curl's timeout. Nothing here blocks.
 *
 * A request passes two gates before it reaches curl: exec-plugin
 * credentials (when the user has an exec plugin) and the token bucket.
 * Requests held at either wait in a list; a request answered with 429 (or
 * a 5xx carrying Retry-After) goes back to the bucket's list to be resent
 * after the time the server asked for. Results are reported through each
 * request's `done` callback; canceled and failed-before-sending ones from a
 * zero-delay timer, so a callback never runs inside kcm_client_request()
 * or kcm_client_cancel().
 */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "kcm/error.h"
#include "kcm/log.h"

#define DEFAULT_MAX_BODY (16u << 20)
#define TOKEN_REREAD_SECONDS 60
#define MAX_RETRIES 10
#define DEFAULT_TIMEOUT_MS 60000L
#define STREAM_TIMEOUT_MS (30L * 60 * 1000)
#define USER_AGENT "kcm/" KCM_VERSION

/* The methods the metrics tell apart; the last stands for any other. */
static const char *const verbs[KCM_CLIENT_VERBS] = {
    "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "OTHER",
};

/* client-go's buckets for request and rate limiter latency. */
static const double latency_buckets[] = {
    0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60,
};

/* A socket curl watches. The poll handle of a connection lives as long as
 * the connection, not one transfer, so a kept-alive connection costs the
 * next request no handle setup; and curl asking again for what the poll
 * already watches costs nothing (uv_poll_start() on a started handle costs
 * two epoll_ctl calls). */
struct sock_ctx {
  uv_poll_t poll;
  curl_socket_t fd;
  struct kcm_client *client;
  struct sock_ctx *next;
  int events; /* what the poll watches now (UV_READABLE | UV_WRITABLE), 0 if stopped */
  bool kept;  /* a connection curl opened through on_open_socket() and closes through
                 on_close_socket(); other sockets lose their poll when curl drops them */
};

static void check_multi_info(struct kcm_client *c);
static void on_poll(uv_poll_t *h, int status, int events);
static void admit(struct kcm_client_request *r);

/* --- lists -------------------------------------------------------------------------- */

static void list_unlink(struct kcm_client_request **list, struct kcm_client_request *r) {
  if (r->prev)
    r->prev->next = r->next;
  else if (*list == r)
    *list = r->next;
  if (r->next)
    r->next->prev = r->prev;
  r->prev = r->next = NULL;
}

static void list_push(struct kcm_client_request **list, struct kcm_client_request *r) {
  r->prev = NULL;
  r->next = *list;
  if (*list)
    (*list)->prev = r;
  *list = r;
}

/* Keep `parked` ordered by start_at. */
static void park(struct kcm_client *c, struct kcm_client_request *r);

/* --- handle bookkeeping ----------------------------------------------------------------- */

static void maybe_free(struct kcm_client *c) {
  if (!c->closing || c->open_handles > 0)
    return;
  curl_slist_free_all(c->connect_to);
  free(c->url_host);
  free(c->host);
  if (c->token)
    explicit_bzero(c->token, strlen(c->token));
  free(c->token);
  kcm_client_creds_release(c);
  free(c);
}

void kcm_client_handle_closed(uv_handle_t *h) {
  struct kcm_client *c = h->data;
  c->open_handles--;
  maybe_free(c);
}

static void on_sock_closed(uv_handle_t *h) {
  struct sock_ctx *sc = h->data;
  struct kcm_client *c = sc->client;
  free(sc);
  c->open_handles--;
  maybe_free(c);
}

static void unlink_sock(struct kcm_client *c, struct sock_ctx *sc) {
  struct sock_ctx **pp;
  for (pp = &c->socks; *pp; pp = &(*pp)->next) {
    if (*pp == sc) {
      *pp = sc->next;
      return;
    }
  }
}

/* --- curl callbacks ----------------------------------------------------------------------- */

static void watch(struct sock_ctx *sc, int events) {
  if (events == sc->events)
    return;
  if (events)
    uv_poll_start(&sc->poll, events, on_poll);
  else
    uv_poll_stop(&sc->poll);
  sc->events = events;
}

static void on_poll(uv_poll_t *h, int status, int events) {
  struct sock_ctx *sc = h->data;
  int flags = 0, running;

  if (status < 0)
    flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE)
    flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE)
    flags |= CURL_CSELECT_OUT;
  sc->client->in_curl = true;
  curl_multi_socket_action(sc->client->multi, sc->fd, flags, &running);
  sc->client->in_curl = false;
  check_multi_info(sc->client);
}

static struct sock_ctx *find_sock(struct kcm_client *c, curl_socket_t fd) {
  struct sock_ctx *sc;
  for (sc = c->socks; sc && sc->fd != fd; sc = sc->next)
    ;
  return sc;
}

static struct sock_ctx *new_sock(struct kcm_client *c, curl_socket_t s, bool kept) {
  struct sock_ctx *sc = calloc(1, sizeof(*sc));
  if (!sc)
    return NULL;
  sc->fd = s;
  sc->client = c;
  sc->kept = kept;
  if (uv_poll_init_socket(c->loop, &sc->poll, s) != 0) {
    free(sc);
    return NULL;
  }
  sc->poll.data = sc;
  sc->next = c->socks;
  c->socks = sc;
  c->open_handles++;
  return sc;
}

static void drop_sock(struct kcm_client *c, struct sock_ctx *sc) {
  unlink_sock(c, sc);
  uv_poll_stop(&sc->poll);
  uv_close((uv_handle_t *)&sc->poll, on_sock_closed);
}

static int on_socket(CURL *easy, curl_socket_t s, int action, void *userp, void *socketp) {
  struct kcm_client *c = userp;
  struct sock_ctx *sc = socketp ? socketp : find_sock(c, s);
  int events = 0;

  (void)easy;
  if (action == CURL_POLL_REMOVE) {
    if (!sc)
      return 0;
    if (!sc->kept) {
      curl_multi_assign(c->multi, s, NULL);
      drop_sock(c, sc);
      return 0;
    }
    watch(sc, 0); /* the connection waits in curl's pool for the next transfer */
    return 0;
  }
  if (!sc && !(sc = new_sock(c, s, false)))
    return -1;
  curl_multi_assign(c->multi, s, sc);
  if (action & CURL_POLL_IN)
    events |= UV_READABLE;
  if (action & CURL_POLL_OUT)
    events |= UV_WRITABLE;
  watch(sc, events);
  return 0;
}

static curl_socket_t on_open_socket(void *userp, curlsocktype purpose,
                                    struct curl_sockaddr *a) {
  struct kcm_client *c = userp;
  curl_socket_t s;
  if (purpose != CURLSOCKTYPE_IPCXN)
    return CURL_SOCKET_BAD;
  s = socket(a->family, a->socktype, a->protocol);
  if (s != CURL_SOCKET_BAD && !new_sock(c, s, true)) {
    close(s);
    return CURL_SOCKET_BAD;
  }
  return s;
}

/* curl closes a socket: its poll handle goes first, so that libuv never
 * watches a number the kernel may hand to the next socket. */
static int on_close_socket(void *userp, curl_socket_t s) {
  struct kcm_client *c = userp;
  struct sock_ctx *sc = find_sock(c, s);
  if (sc)
    drop_sock(c, sc);
  return close(s);
}

static void on_timer(uv_timer_t *t) {
  struct kcm_client *c = t->data;
  int running;
  c->in_curl = true;
  curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  c->in_curl = false;
  check_multi_info(c);
}

static int on_timeout(CURLM *multi, long timeout_ms, void *userp) {
  struct kcm_client *c = userp;
  if (timeout_ms < 0)
    uv_timer_stop(&c->timer);
  else
    uv_timer_start(&c->timer, on_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

static size_t on_write(char *p, size_t size, size_t n, void *userp) {
  struct kcm_client_request *r = userp;
  size_t len = size * n;
  long status = 0;

  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
  /* Error bodies are buffered even for streams, to report their Status. */
  if (r->on_chunk && status >= 200 && status < 300) {
    r->streamed = true;
    if (r->on_chunk(p, len, r->data) != 0) {
      r->stop_err = KCM_ECANCELED;
      return 0;
    }
    return len;
  }
  if (kcm_buf_append(&r->resp, p, len) != 0) {
    r->stop_err = KCM_ETOOBIG;
    return 0;
  }
  return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *userp) {
  struct kcm_client_request *r = userp;
  size_t len = size * n, vlen;
  const char *v;
  uint32_t seconds;

  /* Text that is not a count of seconds is no Retry-After, as in client-go. */
  if (kcm_client_header_value(p, len, "Retry-After", &v, &vlen) &&
      kcm_client_retry_after(v, vlen, &seconds)) {
    r->retry_after = seconds;
    r->has_retry_after = true;
  }
  return len;
}

/* --- metrics ---------------------------------------------------------------------------------- */

static uint8_t verb_of(const char *method) {
  uint8_t i;
  for (i = 0; i < KCM_CLIENT_VERBS - 1; i++)
    if (!strcasecmp(method, verbs[i]))
      return i;
  return KCM_CLIENT_VERBS - 1;
}

/* Count an attempt that reached the network as it ended: its status (0
 * when no answer came) and whether it was a retry. */
static void count_attempt(struct kcm_client_request *r) {
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

/* --- responses ------------------------------------------------------------------------------ */

static int status_error(long status) {
  if (status >= 200 && status < 300)
    return 0;
  switch (status) {
  case 401:
  case 403:
    return KCM_EFORBIDDEN;
  case 404:
    return KCM_ENOTFOUND;
  case 409:
    return KCM_ECONFLICT;
  case 410:
    return KCM_EGONE;
  case 429:
    return KCM_ETHROTTLED;
  case 504:
    return KCM_ETIMEOUT;
  }
  if (status >= 500)
    return KCM_ESERVER;
  return KCM_EINVALID;
}

/* The message of a metav1.Status body, or a printable prefix of the body. */
static char *error_message(const char *body, size_t len) {
  struct json_tokener *tok;
  struct json_object *obj, *msg;
  char *out = NULL;
  size_t i, n;

  if (!len)
    return strdup("");
  tok = json_tokener_new();
  obj = tok ? json_tokener_parse_ex(tok, body, (int)(len > INT32_MAX ? INT32_MAX : len)) : NULL;
  if (tok)
    json_tokener_free(tok);
  if (obj && json_object_object_get_ex(obj, "message", &msg) &&
      json_object_is_type(msg, json_type_string))
    out = strdup(json_object_get_string(msg));
  json_object_put(obj);
  if (out)
    return out;
  n = len < 200 ? len : 200;
  out = malloc(n + 1);
  if (!out)
    return NULL;
  for (i = 0; i < n; i++)
    out[i] = (body[i] >= 0x20 && body[i] < 0x7f) ? body[i] : ' ';
  out[n] = '\0';
  return out;
}

bool kcm_client_namespace_terminating(const struct kcm_client_response *resp) {
  return resp->status == 403 && strstr(resp->body, "\"NamespaceTerminating\"") != NULL;
}

/* Did this attempt fail in transit after it went out? Counted as sent once
 * curl began the transfer on a connection: a request that may have reached
 * the server is taken to have reached it. */
static bool went_unanswered(struct kcm_client_request *r, CURLcode code) {
  long status = 0, sent = 0;
  curl_off_t started = 0;
  if (code == CURLE_OK || r->canceled || r->fail_err || !r->easy ||
      (code == CURLE_WRITE_ERROR && r->stop_err))
    return false;
  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_getinfo(r->easy, CURLINFO_REQUEST_SIZE, &sent);
  curl_easy_getinfo(r->easy, CURLINFO_PRETRANSFER_TIME_T, &started);
  return status == 0 && (sent > 0 || started > 0);
}

static void report(struct kcm_client_request *r, CURLcode code) {
  struct kcm_client_response resp = {0};
  char *msg = NULL;

  if (r->easy)
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &resp.status);
  resp.retry_after = r->retry_after;
  resp.body = r->resp.data ? r->resp.data : "";
  resp.body_len = r->resp.len;
  if (r->canceled) {
    resp.err = KCM_ECANCELED;
    resp.message = "canceled";
  } else if (r->fail_err) {
    resp.err = r->fail_err;
    resp.message = r->fail_msg ? r->fail_msg : kcm_strerror(r->fail_err);
    resp.status = 0;
  } else if (code == CURLE_WRITE_ERROR && r->stop_err) {
    resp.err = r->stop_err;
    resp.message = r->stop_err == KCM_ETOOBIG ? "response body over the size limit" : "stopped";
  } else if (code != CURLE_OK) {
    resp.err = code == CURLE_OPERATION_TIMEDOUT ? KCM_ETIMEOUT : KCM_ENETWORK;
    resp.message = r->errbuf[0] ? r->errbuf : curl_easy_strerror(code);
    resp.unanswered = r->after_unanswered || went_unanswered(r, code);
  } else {
    resp.err = status_error(resp.status);
    if (resp.err) {
      msg = error_message(resp.body, resp.body_len);
      resp.message = msg ? msg : "";
    } else {
      resp.message = "";
    }
  }
  if (kcm_log_verbosity() >= 6 && r->easy) {
    char *url = NULL, *shown;
    long version = 0;
    curl_easy_getinfo(r->easy, CURLINFO_EFFECTIVE_URL, &url);
    curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &version);
    shown = kcm_client_redact_url(url ? url : "");
    kcm_v(6, "%s %s %ld in %llu milliseconds http=\"%s\"", r->method, shown ? shown : "",
          resp.status, (unsigned long long)(uv_now(r->client->loop) - r->created),
          version == CURL_HTTP_VERSION_2_0 ? "2" : "1.1");
    free(shown);
  }
  if (!r->on_chunk)
    kcm_metrics_histogram_observe(&r->client->duration[r->verb],
                                  (double)(uv_now(r->client->loop) - r->created) / 1000.0);
  if (r->done)
    r->done(&resp, r->data);
  free(msg);
}

/* Drop the headers of the last attempt, wiping its credentials. */
static void free_sent_headers(struct kcm_client_request *r) {
  struct curl_slist *h;
  for (h = r->sent_headers; h; h = h->next)
    explicit_bzero(h->data, strlen(h->data));
  curl_slist_free_all(r->sent_headers);
  r->sent_headers = NULL;
}

static void free_request(struct kcm_client_request *r) {
  struct kcm_client *c = r->client;
  if (r->easy && !c->closing && c->nspare < KCM_CLIENT_SPARE) {
    curl_easy_reset(r->easy); /* it has left the multi handle */
    c->spare[c->nspare++] = r->easy;
  } else if (r->easy) {
    curl_easy_cleanup(r->easy);
  }
  curl_slist_free_all(r->headers);
  free_sent_headers(r);
  free(r->body);
  free(r->content_type);
  free(r->fail_msg);
  kcm_buf_release(&r->resp);
  free(r);
}

static void on_defer(uv_timer_t *t) {
  struct kcm_client *c = t->data;
  while (c->finished) {
    struct kcm_client_request *r = c->finished;
    list_unlink(&c->finished, r);
    c->pending--;
    report(r, CURLE_OK);
    free_request(r);
  }
}

/* Report a request that never reached curl (or left it), from the loop. */
static void finish_later(struct kcm_client_request *r) {
  struct kcm_client *c = r->client;
  list_push(&c->finished, r);
  if (!c->closing)
    uv_timer_start(&c->defer, on_defer, 0, 0);
}

static void fail_later(struct kcm_client_request *r, int err, const char *msg) {
  r->fail_err = err;
  free(r->fail_msg);
  r->fail_msg = msg ? strdup(msg) : NULL;
  finish_later(r);
}

/* Should this answer be retried after Retry-After? (429, or 5xx with it.) */
static bool wants_retry(struct kcm_client_request *r, CURLcode code) {
  long status = 0;
  if (code != CURLE_OK || r->canceled || r->streamed || r->retries >= MAX_RETRIES)
    return false;
  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status != 429 && !(status >= 500 && r->has_retry_after))
    return false;
  /* A pause that would outlast the time limit ends the request with this
   * answer, its Retry-After told to the caller. */
  return uv_now(r->client->loop) + (r->has_retry_after ? r->retry_after * 1000ull : 1000) <
         r->deadline;
}

/* 1, 2, 4, 8, 8, ... s between attempts that got no answer. */
static uint64_t resend_wait(const struct kcm_client_request *r) {
  return 1000u << (r->resends < 3 ? r->resends : 3);
}

/* Should this failure be sent again? A repeatable request is, whenever no
 * answer came, while its time limit since it was made allows: curl itself
 * sends a request again on a new connection when a kept-alive one closes
 * before answering, so that a refused connection may follow an attempt
 * that went out. */
static bool wants_resend(struct kcm_client_request *r, CURLcode code) {
  if (went_unanswered(r, code))
    r->after_unanswered = true;
  if (!r->repeatable || r->streamed || r->retries >= MAX_RETRIES || code == CURLE_OK ||
      r->canceled || (code == CURLE_WRITE_ERROR && r->stop_err))
    return false;
  return uv_now(r->client->loop) + resend_wait(r) < r->deadline;
}

static void note_unauthorized(struct kcm_client_request *r) {
  struct kcm_client *c = r->client;
  long status = 0;
  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status != 401)
    return;
  c->stats.unauthorized++;
  c->token_read_at = 0; /* re-read the token file */
  if (c->cfg->exec)
    kcm_client_creds_invalidate(c);
}

static void check_multi_info(struct kcm_client *c) {
  CURLMsg *m;
  int left;

  while ((m = curl_multi_info_read(c->multi, &left))) {
    struct kcm_client_request *r = NULL;
    CURLcode code;

    if (m->msg != CURLMSG_DONE)
      continue;
    code = m->data.result;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
    curl_multi_remove_handle(c->multi, m->easy_handle);
    list_unlink(&c->active, r);
    count_attempt(r);
    note_unauthorized(r);
    if (wants_retry(r, code) || wants_resend(r, code)) {
      uint64_t wait = r->has_retry_after ? (uint64_t)r->retry_after * 1000 : 1000;
      if (code != CURLE_OK) {
        wait = resend_wait(r);
        r->resends++;
        kcm_v(2, "sending again a request that got no answer method=\"%s\" err=\"%s\" "
              "seconds=%llu attempt=%u", r->method,
              r->errbuf[0] ? r->errbuf : curl_easy_strerror(code),
              (unsigned long long)(wait / 1000), r->retries + 1);
      } else {
        kcm_v(2, "retrying after the server asked for a pause seconds=%llu attempt=%u",
              (unsigned long long)(wait / 1000), r->retries + 1);
      }
      r->retries++;
      c->stats.retries++;
      kcm_buf_reset(&r->resp);
      r->retry_after = 0;
      r->has_retry_after = false;
      r->errbuf[0] = '\0';
      r->start_at = uv_now(c->loop) + wait;
      park(c, r);
      continue;
    }
    c->pending--;
    report(r, code);
    free_request(r);
  }
}

/* --- sending ------------------------------------------------------------------------------------ */

/* The bearer token: the token file (re-read every minute and after a 401)
 * wins over the inline token, as client-go does. */
static const char *current_token(struct kcm_client *c) {
  const struct kcm_client_config *cfg = c->cfg;
  time_t now = time(NULL);

  if (cfg->token_file && (!c->token || now - c->token_read_at >= TOKEN_REREAD_SECONDS)) {
    FILE *f = fopen(cfg->token_file, "r");
    if (f) {
      char buf[16384];
      size_t n = fread(buf, 1, sizeof(buf) - 1, f);
      fclose(f);
      while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        n--;
      buf[n] = '\0';
      if (n) {
        char *t = strdup(buf);
        if (t) {
          free(c->token);
          c->token = t;
        }
      }
      explicit_bzero(buf, sizeof(buf));
    } else if (!c->token) {
      kcm_warn("cannot read token file path=\"%s\"", cfg->token_file);
    }
    c->token_read_at = now;
  }
  if (cfg->exec && c->creds.token)
    return c->creds.token;
  return c->token ? c->token : cfg->token;
}

/* Give the request its credentials and hand it to curl. Each attempt gets
 * its headers afresh: the request's own, then the credentials of now. */
static void launch(struct kcm_client_request *r) {
  struct kcm_client *c = r->client;
  const struct kcm_client_config *cfg = c->cfg;
  const char *token = current_token(c);
  struct curl_slist *h = NULL, *own;
  CURL *e = r->easy;
  uint64_t now = uv_now(c->loop);
  char *hdr = NULL;
  bool ok = true;

  if (now >= r->deadline) {
    fail_later(r, KCM_ETIMEOUT, "the time limit passed before the request could be sent");
    return;
  }
  free_sent_headers(r);
  for (own = r->headers; own && ok; own = own->next)
    ok = (h = curl_slist_append(h, own->data)) != NULL;
  curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_NONE);
  if (ok && token && *token) {
    ok = asprintf(&hdr, "Authorization: Bearer %s", token) >= 0 &&
         (h = curl_slist_append(h, hdr)) != NULL;
    if (hdr)
      explicit_bzero(hdr, strlen(hdr));
    free(hdr);
  } else if (ok && cfg->username) {
    curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    curl_easy_setopt(e, CURLOPT_USERNAME, cfg->username);
    curl_easy_setopt(e, CURLOPT_PASSWORD, cfg->password ? cfg->password : "");
  }
  r->sent_headers = h;
  if (!ok) {
    fail_later(r, KCM_ENOMEM, "out of memory");
    return;
  }
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->sent_headers);
  /* The attempt ends by the request's deadline: the pauses before it, for
   * the rate limiter or a Retry-After, have used up part of the limit. */
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)(r->deadline - now));
  if (cfg->exec && c->creds.cert_pem) {
    struct curl_blob cert = {c->creds.cert_pem, c->creds.cert_len, CURL_BLOB_COPY};
    struct curl_blob key = {c->creds.key_pem, c->creds.key_len, CURL_BLOB_COPY};
    curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (curl_multi_add_handle(c->multi, e) != CURLM_OK) {
    fail_later(r, KCM_ENOMEM, "cannot start the transfer");
    return;
  }
  c->stats.requests++;
  list_push(&c->active, r);
}

static void on_gate(uv_timer_t *t);

static void arm_gate(struct kcm_client *c) {
  uint64_t now = uv_now(c->loop);
  if (!c->parked || c->closing) {
    uv_timer_stop(&c->gate);
    return;
  }
  uv_timer_start(&c->gate, on_gate, c->parked->start_at > now ? c->parked->start_at - now : 0,
                 0);
}

static void park(struct kcm_client *c, struct kcm_client_request *r) {
  struct kcm_client_request **pp = &c->parked, *prev = NULL;
  while (*pp && (*pp)->start_at <= r->start_at) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  r->next = *pp;
  r->prev = prev;
  if (*pp)
    (*pp)->prev = r;
  *pp = r;
  arm_gate(c);
}

static void on_gate(uv_timer_t *t) {
  struct kcm_client *c = t->data;
  uint64_t now = uv_now(c->loop);
  while (c->parked && c->parked->start_at <= now) {
    struct kcm_client_request *r = c->parked;
    list_unlink(&c->parked, r);
    if (r->delayed) {
      r->delayed = false;
      admit(r);
      continue;
    }
    if (c->cfg->exec && !kcm_client_creds_fresh(c)) {
      list_push(&c->waiting, r); /* credentials expired while it waited */
      kcm_client_creds_fetch(c);
      continue;
    }
    launch(r);
  }
  arm_gate(c);
}

/* The gates: credentials (unless the caller just got them), then the rate
 * limiter. */
static void admit_gated(struct kcm_client_request *r, bool check_creds) {
  struct kcm_client *c = r->client;
  uint64_t now, wait;
  if (check_creds && c->cfg->exec && !kcm_client_creds_fresh(c)) {
    list_push(&c->waiting, r);
    kcm_client_creds_fetch(c);
    return;
  }
  now = uv_now(c->loop);
  wait = kcm_ratelimit_reserve(&c->limit[r->limiter], now);
  if (c->limit[r->limiter].qps > 0) /* no limiter, no wait to count */
    kcm_metrics_histogram_observe(&c->throttled[r->verb], (double)wait / 1000.0);
  if (wait || c->in_curl) {
    /* Throttled, or asked from inside curl (by a watch's chunk handler,
     * say), which takes no new transfer then: sent from the loop. */
    c->stats.throttled_ms += wait;
    r->start_at = now + wait;
    park(c, r);
    return;
  }
  launch(r);
}

static void admit(struct kcm_client_request *r) { admit_gated(r, true); }

void kcm_client_creds_ready(struct kcm_client *c) {
  /* Credentials that are already about to expire still serve the requests
   * that waited for them. */
  bool ok = c->creds.valid;
  if (!ok)
    kcm_error("cannot get credentials err=\"%s\"",
              c->creds.error ? c->creds.error : "the exec plugin gave no usable credentials");
  while (c->waiting) {
    struct kcm_client_request *r = c->waiting;
    list_unlink(&c->waiting, r);
    if (ok)
      admit_gated(r, false);
    else
      fail_later(r, KCM_EFORBIDDEN,
                 c->creds.error ? c->creds.error : "the exec plugin gave no usable credentials");
  }
}

/* --- public API ------------------------------------------------------------------------------------ */

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
  size_t i;
  int err;

  uv_once(&once, global_init);
  c = calloc(1, sizeof(*c));
  if (!c)
    return KCM_ENOMEM;
  c->loop = loop;
  c->cfg = cfg;
  err = setup_target(c);
  if (!err && (!(c->multi = curl_multi_init()) || !(c->share = curl_share_init()) ||
               curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION)))
    err = KCM_ENOMEM;
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
  curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
  curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timeout);
  curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
  curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  uv_timer_init(loop, &c->timer);
  uv_timer_init(loop, &c->defer);
  uv_timer_init(loop, &c->gate);
  c->timer.data = c->defer.data = c->gate.data = c;
  c->open_handles = 3;
  for (i = 0; i < KCM_CLIENT_VERBS; i++) {
    kcm_metrics_histogram_init(&c->duration[i], latency_buckets,
                               sizeof(latency_buckets) / sizeof(latency_buckets[0]));
    kcm_metrics_histogram_init(&c->throttled[i], latency_buckets,
                               sizeof(latency_buckets) / sizeof(latency_buckets[0]));
  }
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

int kcm_client_request(struct kcm_client *c, const struct kcm_client_request_options *o,
                       struct kcm_client_request **out) {
  const struct kcm_client_config *cfg = c->cfg;
  struct kcm_client_request *r;
  char *url = NULL, *hdr = NULL;
  long timeout_ms;
  CURL *e;

  if (c->closing || !o->method || !o->path || o->path[0] != '/' || !o->done ||
      o->limiter >= KCM_CLIENT_LIMITERS)
    return KCM_EINVAL;
  r = calloc(1, sizeof(*r));
  if (!r)
    return KCM_ENOMEM;
  r->client = c;
  r->on_chunk = o->on_chunk;
  r->done = o->done;
  r->data = o->data;
  r->limiter = o->limiter;
  r->repeatable = o->repeatable;
  timeout_ms = o->timeout_ms > 0 ? o->timeout_ms
                                 : (o->on_chunk ? STREAM_TIMEOUT_MS : DEFAULT_TIMEOUT_MS);
  r->verb = verb_of(o->method);
  r->created = uv_now(c->loop);
  r->deadline = r->created + o->delay_ms + (uint64_t)timeout_ms;
  snprintf(r->method, sizeof(r->method), "%s", o->method);
  kcm_buf_init(&r->resp, o->max_body ? o->max_body : DEFAULT_MAX_BODY);
  r->easy = e = c->nspare ? c->spare[--c->nspare] : curl_easy_init();
  if (!e || asprintf(&url, "%s%s", c->url_host, o->path) < 0)
    goto nomem;
  curl_easy_setopt(e, CURLOPT_URL, url);
  free(url);
  curl_easy_setopt(e, CURLOPT_PRIVATE, r);
  curl_easy_setopt(e, CURLOPT_SHARE, c->share);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, c);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, c);
  curl_easy_setopt(e, CURLOPT_USERAGENT, USER_AGENT);
  /* No Accept-Encoding: as kube-controller-manager (DisableCompression),
   * kcm does not ask for gzip, which costs both sides more CPU than it saves
   * on the networks between control-plane components. */
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  if (o->idle_timeout_ms > 0) {
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (o->idle_timeout_ms + 999) / 1000);
  }
  if (strcmp(o->method, "GET") != 0)
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, o->method);
  if (o->body) {
    r->body = malloc(o->body_len ? o->body_len : 1);
    if (!r->body)
      goto nomem;
    memcpy(r->body, o->body, o->body_len);
    r->body_len = o->body_len;
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
    if (asprintf(&hdr, "Content-Type: %s",
                 o->content_type ? o->content_type : "application/json") < 0)
      goto nomem;
    r->headers = curl_slist_append(r->headers, hdr);
    free(hdr);
    hdr = NULL;
  }
  r->headers = curl_slist_append(r->headers, "Accept: application/json");
  if (!r->headers)
    goto nomem;
  if (cfg->insecure) {
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  } else if (cfg->ca_pem) {
    /* The configured authority is the only root, as in client-go: curl's
     * default bundle and directory would trust every public CA as well. */
    struct curl_blob ca = {cfg->ca_pem, cfg->ca_pem_len, CURL_BLOB_NOCOPY};
    curl_easy_setopt(e, CURLOPT_CAINFO, NULL);
    curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
  }
  if (cfg->cert_pem && cfg->key_pem) {
    struct curl_blob cert = {cfg->cert_pem, cfg->cert_pem_len, CURL_BLOB_NOCOPY};
    struct curl_blob key = {cfg->key_pem, cfg->key_pem_len, CURL_BLOB_NOCOPY};
    curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (c->connect_to)
    curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
  if (cfg->proxy_url)
    curl_easy_setopt(e, CURLOPT_PROXY, cfg->proxy_url);
  c->pending++;
  if (out)
    *out = r;
  if (o->delay_ms) {
    r->delayed = true;
    r->start_at = uv_now(c->loop) + o->delay_ms;
    park(c, r);
  } else {
    admit(r);
  }
  return 0;
nomem:
  free_request(r);
  return KCM_ENOMEM;
}

/* Which list holds r (it is in at most one). */
static struct kcm_client_request **list_of(struct kcm_client *c, struct kcm_client_request *r) {
  struct kcm_client_request **lists[] = {&c->active, &c->parked, &c->waiting, &c->finished};
  size_t i;
  for (i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
    struct kcm_client_request *x;
    for (x = *lists[i]; x; x = x->next)
      if (x == r)
        return lists[i];
  }
  return NULL;
}

void kcm_client_cancel(struct kcm_client_request *r) {
  struct kcm_client *c = r->client;
  struct kcm_client_request **list;
  if (r->canceled)
    return;
  r->canceled = true;
  list = list_of(c, r);
  if (list == &c->finished)
    return; /* already reporting */
  if (list == &c->active) {
    count_attempt(r);
    curl_multi_remove_handle(c->multi, r->easy);
  }
  if (list)
    list_unlink(list, r);
  finish_later(r);
}

size_t kcm_client_pending(const struct kcm_client *c) { return c->pending; }

void kcm_client_close(struct kcm_client *c) {
  struct sock_ctx *sc;

  while (c->active)
    kcm_client_cancel(c->active);
  while (c->parked)
    kcm_client_cancel(c->parked);
  while (c->waiting)
    kcm_client_cancel(c->waiting);
  c->closing = true;
  on_defer(&c->defer);
  kcm_client_creds_close(c);
  curl_multi_cleanup(c->multi);
  c->multi = NULL;
  while (c->nspare)
    curl_easy_cleanup(c->spare[--c->nspare]);
  curl_share_cleanup(c->share); /* after the last handle that used it */
  c->share = NULL;
  /* curl may not report every socket as removed during cleanup. */
  while ((sc = c->socks)) {
    c->socks = sc->next;
    uv_poll_stop(&sc->poll);
    uv_close((uv_handle_t *)&sc->poll, on_sock_closed);
  }
  uv_timer_stop(&c->timer);
  uv_timer_stop(&c->defer);
  uv_timer_stop(&c->gate);
  uv_close((uv_handle_t *)&c->timer, kcm_client_handle_closed);
  uv_close((uv_handle_t *)&c->defer, kcm_client_handle_closed);
  uv_close((uv_handle_t *)&c->gate, kcm_client_handle_closed);
}
