/*
 * client/request.c — a request's life: made, held at the gates, sent,
 * retried or resent, reported.
 *
 * A request passes two gates before each attempt reaches curl: exec-plugin
 * credentials (when the user has an exec plugin) and the token bucket.
 * Requests held at either wait in a list; a request answered with 429 (or
 * a 5xx carrying Retry-After) goes back to the bucket's list to be resent
 * after the time the server asked for, and a repeatable one that got no
 * answer is resent after a backoff, all within its deadline. Results are
 * reported through each request's `done` callback; canceled and
 * failed-before-sending ones from a zero-delay timer, so a callback never
 * runs inside kcm_client_request() or kcm_client_cancel().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"
#include "kcm/log.h"
#include "kcm/version.h"

#define MAX_RETRIES 10
#define DEFAULT_TIMEOUT_MS 60000L
#define STREAM_TIMEOUT_MS (30L * 60 * 1000)

static void admit(struct kcm_client_request *r);
static void park(struct kcm_client *c, struct kcm_client_request *r);

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

/* --- responses ------------------------------------------------------------------------------ */

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

static void log_done(struct kcm_client_request *r, long status) {
  char *url = NULL, *shown;
  long version = 0;
  curl_easy_getinfo(r->easy, CURLINFO_EFFECTIVE_URL, &url);
  curl_easy_getinfo(r->easy, CURLINFO_HTTP_VERSION, &version);
  shown = kcm_client_redact_url(url ? url : "");
  kcm_v(6, "%s %s %ld in %llu milliseconds http=\"%s\"", r->method, shown ? shown : "", status,
        (unsigned long long)(uv_now(r->client->loop) - r->created),
        version == CURL_HTTP_VERSION_2_0 ? "2" : "1.1");
  free(shown);
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
    resp.err = kcm_client_status_error(resp.status);
    if (resp.err) {
      msg = kcm_client_error_message(resp.body, resp.body_len);
      resp.message = msg ? msg : "";
    } else {
      resp.message = "";
    }
  }
  if (kcm_log_verbosity() >= 6 && r->easy)
    log_done(r, resp.status);
  kcm_client_observe_duration(r);
  if (r->done)
    r->done(&resp, r->data);
  free(msg);
}

static void free_request(struct kcm_client_request *r) {
  if (r->easy)
    kcm_client_easy_give(r->client, r->easy);
  curl_slist_free_all(r->headers);
  kcm_client_free_sent_headers(r);
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

void kcm_client_report_finished(struct kcm_client *c) { on_defer(&c->defer); }

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

/* --- retries ---------------------------------------------------------------------------------- */

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

/* Park r for its next attempt: after the server's Retry-After (or a second)
 * for an answer, after the resend backoff for no answer. */
static void retry_later(struct kcm_client_request *r, CURLcode code) {
  struct kcm_client *c = r->client;
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
}

void kcm_client_transfers_done(struct kcm_client *c) {
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
    kcm_client_count_attempt(r);
    kcm_client_note_unauthorized(r);
    if (wants_retry(r, code) || wants_resend(r, code)) {
      retry_later(r, code);
      continue;
    }
    c->pending--;
    report(r, code);
    free_request(r);
  }
}

/* --- sending ------------------------------------------------------------------------------------ */

/* Give the request its credentials and hand it to curl. Each attempt gets
 * its headers afresh: the request's own, then the credentials of now. */
static void launch(struct kcm_client_request *r) {
  struct kcm_client *c = r->client;
  const char *token = r->bearer ? r->bearer->token : kcm_client_current_token(c);
  uint64_t now = uv_now(c->loop);
  int err;

  if (r->bearer)
    r->bearer_generation = r->bearer->generation;
  if (now >= r->deadline) {
    fail_later(r, KCM_ETIMEOUT, "the time limit passed before the request could be sent");
    return;
  }
  if ((err = kcm_client_attach_credentials(r, token))) {
    fail_later(r, err, "out of memory");
    return;
  }
  /* The attempt ends by the request's deadline: the pauses before it, for
   * the rate limiter or a Retry-After, have used up part of the limit. */
  curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, (long)(r->deadline - now));
  if (curl_multi_add_handle(c->multi, r->easy) != CURLM_OK) {
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

/* Keep `parked` ordered by start_at. */
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
  kcm_client_observe_throttle(r, wait);
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
      fail_later(r, KCM_EUNAUTHORIZED,
                 c->creds.error ? c->creds.error : "the exec plugin gave no usable credentials");
  }
}

/* --- public API ------------------------------------------------------------------------------------ */

static char program[64] = "kcm";
static char user_agent[64 + sizeof(KCM_USER_AGENT_REST)] = KCM_USER_AGENT;

void kcm_client_set_program(const char *argv0) {
  const char *base = argv0 ? strrchr(argv0, '/') : NULL;
  base = base ? base + 1 : argv0;
  if (!base || !*base || strlen(base) >= sizeof(program) || strpbrk(base, " \t\r\n/()"))
    return;
  snprintf(program, sizeof(program), "%s", base);
  snprintf(user_agent, sizeof(user_agent), "%s%s", program, KCM_USER_AGENT_REST);
}

const char *kcm_client_program(void) { return program; }

/* The options of r's own: where, how and what it sends, where the answer
 * goes, and how long the connection may stay silent. */
static int request_options(struct kcm_client_request *r,
                           const struct kcm_client_request_options *o) {
  CURL *e = r->easy;
  char *url = NULL, *hdr = NULL;

  if (asprintf(&url, "%s%s", r->client->url_host, o->path) < 0)
    return KCM_ENOMEM;
  curl_easy_setopt(e, CURLOPT_URL, url);
  free(url);
  if (o->agent && asprintf(&hdr, "%s/%s", user_agent, o->agent) < 0)
    return KCM_ENOMEM;
  curl_easy_setopt(e, CURLOPT_USERAGENT, hdr ? hdr : user_agent); /* copied */
  free(hdr);
  hdr = NULL;
  curl_easy_setopt(e, CURLOPT_PRIVATE, r);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, r->errbuf);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, r);
  if (o->idle_timeout_ms > 0) {
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (o->idle_timeout_ms + 999) / 1000);
  }
  if (strcmp(o->method, "GET") != 0)
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, o->method);
  if (o->body) {
    r->body = malloc(o->body_len ? o->body_len : 1);
    if (!r->body)
      return KCM_ENOMEM;
    memcpy(r->body, o->body, o->body_len);
    r->body_len = o->body_len;
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)o->body_len);
    if (asprintf(&hdr, "Content-Type: %s",
                 o->content_type ? o->content_type : "application/json") < 0)
      return KCM_ENOMEM;
    r->headers = curl_slist_append(r->headers, hdr);
    free(hdr);
  }
  if (asprintf(&hdr, "Accept: %s", o->accept ? o->accept : "application/json") < 0)
    return KCM_ENOMEM;
  r->headers = curl_slist_append(r->headers, hdr);
  free(hdr);
  return r->headers ? 0 : KCM_ENOMEM;
}

int kcm_client_request(struct kcm_client *c, const struct kcm_client_request_options *o,
                       struct kcm_client_request **out) {
  struct kcm_client_request *r;
  long timeout_ms;

  if (c->closing || !o->method || !o->path || o->path[0] != '/' || !o->done ||
      o->limiter >= KCM_CLIENT_LIMITERS)
    return KCM_EINVAL;
  r = calloc(1, sizeof(*r));
  if (!r)
    return KCM_ENOMEM;
  r->client = c;
  r->on_chunk = o->on_chunk;
  r->watch = o->watch;
  r->done = o->done;
  r->data = o->data;
  r->limiter = o->limiter;
  r->repeatable = o->repeatable;
  r->bearer = o->bearer;
  timeout_ms = o->timeout_ms > 0 ? o->timeout_ms
                                 : (o->on_chunk ? STREAM_TIMEOUT_MS : DEFAULT_TIMEOUT_MS);
  r->verb = kcm_client_verb(o->method);
  r->created = uv_now(c->loop);
  r->deadline = r->created + o->delay_ms + (uint64_t)timeout_ms;
  snprintf(r->method, sizeof(r->method), "%s", o->method);
  kcm_buf_init(&r->resp, o->max_body ? o->max_body : KCM_API_OBJECT_MAX);
  r->easy = kcm_client_easy_take(c);
  if (!r->easy || request_options(r, o) != 0) {
    free_request(r);
    return KCM_ENOMEM;
  }
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
    kcm_client_count_attempt(r);
    curl_multi_remove_handle(c->multi, r->easy);
  }
  if (list)
    list_unlink(list, r);
  finish_later(r);
}

size_t kcm_client_pending(const struct kcm_client *c) { return c->pending; }

const char *kcm_client_response_type(const struct kcm_client_request *r) {
  char *type = NULL;
  if (!r || !r->easy || curl_easy_getinfo(r->easy, CURLINFO_CONTENT_TYPE, &type) != CURLE_OK)
    return NULL;
  return type;
}
