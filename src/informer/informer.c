/*
 * informer — the reflector: an informer's lifecycle and its state machine
 * (list, then watch; a failed attempt waits with backoff), the watch
 * request, and decoding one object. The list is in list.c, the watch
 * stream's events in event.c, the cache in store.c and index.c; see
 * include/kcm/informer.h.
 */
#include "kcm/informer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "framing.h"
#include "internal.h"
#include "kcm/error.h"
#include "kcm/log.h"
#include "kcm/pb.h"

#define DEFAULT_PAGE 500
#define SHORT_WATCH_MS 1000

/* --- paths ----------------------------------------------------------------------------- */

int kcm_informer_collection_path(enum kcm_kind kind, const char *ns, struct kcm_buf *out) {
  char path[KCM_CLIENT_PATH_MAX];
  int err = kcm_client_object_path(kind, ns, NULL, NULL, path, sizeof(path));
  return err ? err : kcm_buf_append_str(out, path);
}

/* Append name=value, the value percent-encoded: the server's text (a
 * continue token, a resourceVersion) goes back to it byte for byte. */
int kcm_informer_query_param(struct kcm_buf *b, const char *name, const char *value) {
  int err = kcm_buf_appendf(b, "%s=", name);
  return err ? err : kcm_client_escape(b, value, strlen(value));
}

/* --- decoding helpers ---------------------------------------------------------------- */

/* metadata.<key> of an object's text ("" when unreadable, or longer than
 * out holds: a name cut short would name another object). */
static void meta_string(const char *text, size_t len, const char *key, char *out, size_t cap) {
  const char *path[] = {"metadata", key, NULL}, *s;
  struct kcm_json j;
  size_t n;
  kcm_json_init(&j);
  kcm_json_start(&j, text, len);
  out[0] = '\0';
  if (kcm_json_find(&j, path) && kcm_json_string(&j, &s, &n) && n < cap && strlen(s) == n)
    memcpy(out, s, n + 1);
  kcm_json_release(&j);
}

struct kcm_object *kcm_informer_decode(struct kcm_informer *inf, const char *text, size_t len,
                                       struct kcm_informer_bad *bad) {
  struct kcm_object *o = NULL;
  int err = kcm_api_decode_text(inf->opts.kind, text, len, &inf->item, &inf->memo, inf->pool,
                                &o, &bad->e);
  if (err) {
    inf->stats.decode_errors++;
    meta_string(text, len, "namespace", bad->ns, sizeof(bad->ns));
    meta_string(text, len, "name", bad->name, sizeof(bad->name));
    return NULL;
  }
  return o;
}

/* metadata.<field> of a Pod message, for logs ("" when unreadable). */
static void pb_meta_string(const void *msg, size_t len, uint32_t field, char *out, size_t cap) {
  const uint32_t path[] = {1, field, 0};
  const uint8_t *s;
  size_t n;
  struct kcm_pb r;
  kcm_pb_start(&r, msg, len);
  out[0] = '\0';
  if (kcm_pb_find(&r, path) && kcm_pb_bytes(&r, &s, &n) && n < cap && !memchr(s, '\0', n)) {
    memcpy(out, s, n);
    out[n] = '\0';
  }
}

struct kcm_object *kcm_informer_decode_proto(struct kcm_informer *inf, const void *msg,
                                             size_t len, bool bare, struct kcm_informer_bad *bad) {
  struct kcm_object *o = NULL;
  const uint8_t *kind, *raw = msg;
  size_t kind_len, raw_len = len;
  const char *why;
  int err = bare ? kcm_api_decode_proto_bare(inf->opts.kind, msg, len, inf->pool, &o, &bad->e)
                 : kcm_api_decode_proto(inf->opts.kind, msg, len, inf->pool, &o, &bad->e);
  if (err) {
    inf->stats.decode_errors++;
    if (!bare && !kcm_pb_unwrap(msg, len, &kind, &kind_len, &raw, &raw_len, &why))
      raw_len = 0;
    pb_meta_string(raw, raw_len, 3, bad->ns, sizeof(bad->ns));
    pb_meta_string(raw, raw_len, 1, bad->name, sizeof(bad->name));
    return NULL;
  }
  return o;
}

void kcm_informer_unreadable(struct kcm_informer *inf, const struct kcm_informer_bad *bad,
                             const char *where, bool in_list, bool deleted) {
  struct kcm_map *set = in_list ? &inf->list_unreadable : &inf->unreadable;
  bool named = bad->name[0] != '\0', fresh = true;
  int added = 0;

  inf->stats.unreadable++;
  if (named && inf->keep && !inf->keep(inf->keep_ctx, bad->ns, strlen(bad->ns)))
    return; /* of a namespace not kept: nothing to keep */
  if (deleted && named) {
    /* Gone, whatever its last state: that is known. */
    if (in_list)
      kcm_informer_gather_gone(inf, bad->ns, bad->name);
    else
      kcm_informer_delete(inf, bad->ns, bad->name, NULL, false);
    return;
  }
  if (deleted) { /* gone, but which: any cached copy may be a ghost */
    if (in_list)
      inf->list_blind = true;
    else
      inf->blind = true;
    return;
  }
  if (named && set->len < KCM_INFORMER_UNREADABLE_MAX) {
    fresh = !kcm_informer_keys_has(&inf->unreadable, bad->ns, bad->name);
    added = kcm_informer_keys_add(set, bad->ns, bad->name);
    fresh = fresh && added == 1;
  }
  if (added < 0 || !named || set->len >= KCM_INFORMER_UNREADABLE_MAX) {
    /* Which copy is old cannot be told: all may be. */
    fresh = in_list ? !inf->list_blind : !inf->blind;
    if (in_list)
      inf->list_blind = true;
    else
      inf->blind = true;
  }
  if (fresh)
    kcm_error("cannot read an object; keeping its last copy kind=\"%s\" namespace=\"%s\" "
              "name=\"%s\" in=\"%s\" field=\"%s\" problem=\"%s\"",
              kcm_api_kind_name(inf->opts.kind), bad->ns, bad->name, where, bad->e.field,
              bad->e.problem);
}

bool kcm_informer_successive(const struct kcm_informer *inf) { return inf->successive; }

bool kcm_informer_is_proto(const char *content_type) {
  static const char media[] = "application/vnd.kubernetes.protobuf";
  size_t n = sizeof(media) - 1;
  return content_type && !strncasecmp(content_type, media, n) &&
         (content_type[n] == '\0' || content_type[n] == ';' || content_type[n] == ' ');
}

const char *kcm_informer_accept(const struct kcm_informer *inf) {
  return inf->opts.protobuf && kcm_api_kind(inf->opts.kind)->decode_proto
             ? "application/vnd.kubernetes.protobuf, application/json"
             : "application/json";
}

bool kcm_informer_kept(struct kcm_informer *inf, struct kcm_object *o) {
  if (!inf->keep || inf->keep(inf->keep_ctx, o->ns, strlen(o->ns)))
    return true;
  inf->stats.filtered++;
  kcm_api_unref(o, inf->pool);
  return false;
}

void kcm_informer_filter(struct kcm_informer *inf, bool (*keep)(void *ctx, const char *ns,
                                                                size_t n),
                         void *ctx) {
  inf->keep = keep;
  inf->keep_ctx = ctx;
}

void kcm_informer_relist(struct kcm_informer *inf) {
  inf->consistent = true;
  switch (inf->state) {
  case KCM_INFORMER_WATCHING:
    inf->need_list = true; /* whatever ends the watch, a list follows */
    if (inf->req && !inf->stop_reason) {
      inf->stop_reason = KCM_INFORMER_STOP_EXPIRED;
      kcm_client_cancel(inf->req);
    }
    break;
  case KCM_INFORMER_LISTING:
    inf->relist_after = true;
    break;
  case KCM_INFORMER_BACKOFF:
  case KCM_INFORMER_IDLE:
    inf->need_list = true;
    break;
  case KCM_INFORMER_STOPPED:
    break;
  }
}

void kcm_informer_set_rv(struct kcm_informer *inf, const char *rv) {
  if (rv && *rv && strlen(rv) < sizeof(inf->rv))
    snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
}

/* --- state machine -------------------------------------------------------------------- */

static void next_attempt(struct kcm_informer *inf) {
  if (inf->need_list)
    kcm_informer_start_list(inf);
  else
    kcm_informer_start_watch(inf);
}

static void on_timer(uv_timer_t *t) {
  struct kcm_informer *inf = t->data;
  if (inf->state == KCM_INFORMER_BACKOFF)
    next_attempt(inf);
}

/* Wait before the next attempt: jittered exponential backoff, reset after
 * a quiet period. */
void kcm_informer_backoff(struct kcm_informer *inf, double retry_after_s) {
  uint64_t now = uv_now(inf->loop), wait;
  inf->stats.failures++;
  if (!inf->backoff_ms || now - inf->last_failure > inf->opts.backoff_reset_ms)
    inf->backoff_ms = inf->opts.backoff_initial_ms;
  else if (inf->backoff_ms * 2 < inf->opts.backoff_max_ms)
    inf->backoff_ms *= 2;
  else
    inf->backoff_ms = inf->opts.backoff_max_ms;
  inf->last_failure = now;
  wait = inf->backoff_ms + (uint64_t)((double)inf->backoff_ms * (rand() / (RAND_MAX + 1.0)));
  /* The client caps Retry-After; checked here again before the conversion,
   * so that no value (NaN included) stops or hot-loops the informer. */
  if (retry_after_s > 0) {
    double ms = retry_after_s < KCM_CLIENT_RETRY_AFTER_MAX ? retry_after_s * 1000.0
                                                           : KCM_CLIENT_RETRY_AFTER_MAX * 1000.0;
    if (ms > (double)wait)
      wait = (uint64_t)ms;
  }
  inf->state = KCM_INFORMER_BACKOFF;
  inf->retry_in_ms = wait;
  uv_timer_start(&inf->timer, on_timer, wait, 0);
}

/* --- watch ------------------------------------------------------------------------------ */

static int on_chunk(const char *p, size_t n, void *data) {
  struct kcm_informer *inf = data;
  if (!inf->body_started) { /* the answer's encoding decides the framing */
    inf->body_started = true;
    inf->watch_proto = kcm_informer_is_proto(kcm_client_response_type(inf->req));
    kcm_framer_reset(inf->framer, inf->watch_proto);
  }
  return kcm_framer_feed(inf->framer, p, n);
}

static void on_watch(const struct kcm_client_response *resp, void *data) {
  struct kcm_informer *inf = data;
  uint64_t lasted = uv_now(inf->loop) - inf->watch_started;
  int reason = inf->stop_reason;

  inf->req = NULL;
  inf->stop_reason = 0;
  /* A last line without its newline is read too: whole, it is an event;
   * cut short, it is reported as a malformed one. */
  if (reason == 0)
    kcm_framer_flush(inf->framer);
  else
    kcm_framer_reset(inf->framer, inf->watch_proto);
  if (inf->state == KCM_INFORMER_STOPPED) {
    kcm_informer_stop(inf, inf->on_closed);
    return;
  }
  if (inf->streaming) { /* before its initial-events-end bookmark */
    kcm_informer_stream_ended(inf, resp, reason,
                              lasted < SHORT_WATCH_MS && inf->watch_events == 0);
    return;
  }
  if (reason == KCM_INFORMER_STOP_EXPIRED || resp->err == KCM_EGONE) {
    inf->need_list = true;
    kcm_informer_start_list(inf);
    return;
  }
  if (reason == KCM_INFORMER_STOP_ERROR) {
    kcm_informer_backoff(inf, 0);
    return;
  }
  if (resp->err) {
    kcm_warn("watch failed kind=\"%s\" err=\"%s: %s\"", kcm_api_kind_name(inf->opts.kind),
             kcm_strerror(resp->err), resp->message);
    kcm_informer_backoff(inf, resp->retry_after);
    return;
  }
  if (lasted < SHORT_WATCH_MS && inf->watch_events == 0) {
    kcm_warn("very short watch kind=\"%s\" lasted=\"%llums\"",
             kcm_api_kind_name(inf->opts.kind), (unsigned long long)lasted);
    kcm_informer_backoff(inf, 0);
    return;
  }
  next_attempt(inf); /* the server ended it on time: carry on (or list, if asked) */
}

/* A watch from inf->rv; with stream, one that sends the current objects
 * first (a streamed list, at "" after a 410). The parameters in client-go's
 * order. */
static void send_watch(struct kcm_informer *inf, bool stream) {
  struct kcm_buf path = KCM_BUF_INIT(4096);
  struct kcm_client_request_options o = {0};
  uint32_t min = inf->opts.watch_timeout_min_s;
  uint32_t timeout = min + (uint32_t)((double)min * (rand() / (RAND_MAX + 1.0)));
  int err = kcm_informer_collection_path(inf->opts.kind, inf->opts.namespace, &path);

  if (!err)
    err = kcm_buf_append_str(&path, "?allowWatchBookmarks=true&");
  if (!err)
    err = kcm_informer_query_param(&path, "resourceVersion",
                                   stream && (inf->rv_gone || inf->consistent) ? "" : inf->rv);
  if (!err && stream)
    err = kcm_buf_append_str(&path, "&resourceVersionMatch=NotOlderThan&sendInitialEvents=true");
  if (!err)
    err = kcm_buf_appendf(&path, "&timeoutSeconds=%u&watch=1", timeout);
  inf->streaming = stream;
  if (stream)
    inf->stats.streams++;
  else
    inf->state = KCM_INFORMER_WATCHING;
  inf->watch_started = uv_now(inf->loop);
  inf->watch_events = 0;
  inf->body_started = false;
  o.method = "GET";
  o.accept = kcm_informer_accept(inf);
  o.path = path.data;
  /* The server ends the watch at `timeout`; a stream silent for longer
   * than that is dead. */
  o.timeout_ms = (long)(timeout + 60) * 1000;
  o.idle_timeout_ms = (long)(timeout + 30) * 1000;
  o.on_chunk = on_chunk;
  o.watch = true;
  o.done = on_watch;
  o.data = inf;
  if (!err)
    err = kcm_client_request(inf->client, &o, &inf->req);
  kcm_buf_release(&path);
  inf->stats.watches++;
  if (err) {
    kcm_error("cannot send a watch request kind=\"%s\" err=\"%s\"",
              kcm_api_kind_name(inf->opts.kind), kcm_strerror(err));
    inf->req = NULL;
    inf->streaming = false;
    kcm_informer_backoff(inf, 0);
  }
}

void kcm_informer_start_watch(struct kcm_informer *inf) { send_watch(inf, false); }

void kcm_informer_start_stream(struct kcm_informer *inf) { send_watch(inf, true); }

/* --- lifecycle ----------------------------------------------------------------------------- */

int kcm_informer_init(struct kcm_informer *inf, uv_loop_t *loop, struct kcm_client *client,
                      struct kcm_intern *pool, const struct kcm_informer_options *opts) {
  int err;
  memset(inf, 0, sizeof(*inf));
  inf->loop = loop;
  inf->client = client;
  inf->pool = pool;
  inf->opts = *opts;
  if (inf->opts.kind >= KCM_KIND_COUNT ||
      (opts->namespace && *opts->namespace && kcm_client_segment_problem(opts->namespace)))
    return KCM_EINVAL;
  if (!inf->opts.page_size)
    inf->opts.page_size = DEFAULT_PAGE;
  if (!inf->opts.max_event_bytes)
    inf->opts.max_event_bytes = KCM_API_OBJECT_MAX;
  if (!inf->opts.backoff_initial_ms)
    inf->opts.backoff_initial_ms = 800;
  if (!inf->opts.backoff_max_ms)
    inf->opts.backoff_max_ms = 30000;
  if (!inf->opts.backoff_reset_ms)
    inf->opts.backoff_reset_ms = 120000;
  if (!inf->opts.watch_timeout_min_s)
    inf->opts.watch_timeout_min_s = 300;
  if (opts->namespace && !(inf->ns = strdup(opts->namespace)))
    return KCM_ENOMEM;
  inf->opts.namespace = inf->ns;
  kcm_informer_store_init(inf);
  kcm_informer_index_init(inf);
  kcm_json_init(&inf->page);
  kcm_json_init(&inf->item);
  if (kcm_informer_list_init(inf))
    return KCM_ENOMEM;
  inf->framer = malloc(sizeof(struct kcm_framer));
  err = inf->framer ? kcm_framer_init(inf->framer, inf->opts.max_event_bytes,
                                      kcm_informer_on_event, inf)
                    : KCM_ENOMEM;
  if (err) {
    free(inf->framer);
    inf->framer = NULL;
    kcm_informer_list_release(inf);
    return err;
  }
  uv_timer_init(loop, &inf->timer);
  uv_timer_init(loop, &inf->resync);
  inf->timer.data = inf->resync.data = inf;
  inf->need_list = true;
  inf->state = KCM_INFORMER_IDLE;
  return 0;
}

void kcm_informer_start(struct kcm_informer *inf) {
  if (inf->state != KCM_INFORMER_IDLE)
    return;
  if (inf->opts.resync_ms)
    uv_timer_start(&inf->resync, kcm_informer_resync, inf->opts.resync_ms, inf->opts.resync_ms);
  kcm_informer_start_list(inf);
}

static void on_handle_closed(uv_handle_t *h) {
  struct kcm_informer *inf = h->data;
  if (--inf->closing == 0 && inf->on_closed)
    inf->on_closed(inf);
}

void kcm_informer_stop(struct kcm_informer *inf, void (*on_closed)(struct kcm_informer *inf)) {
  inf->on_closed = on_closed;
  if (inf->state == KCM_INFORMER_STOPPED && inf->req)
    return; /* waiting for the request to report */
  inf->state = KCM_INFORMER_STOPPED;
  if (inf->req) {
    kcm_client_cancel(inf->req); /* its callback calls back here */
    return;
  }
  if (inf->closing || uv_is_closing((uv_handle_t *)&inf->timer))
    return;
  inf->closing = 2;
  uv_close((uv_handle_t *)&inf->timer, on_handle_closed);
  uv_close((uv_handle_t *)&inf->resync, on_handle_closed);
}

void kcm_informer_release(struct kcm_informer *inf) {
  kcm_informer_drop_pending(inf);
  kcm_informer_store_release(inf);
  kcm_informer_index_release(inf);
  if (inf->framer) {
    kcm_framer_release(inf->framer);
    free(inf->framer);
  }
  kcm_json_release(&inf->page);
  kcm_json_release(&inf->item);
  kcm_api_memo_release(&inf->memo);
  kcm_informer_list_release(inf);
  free(inf->pending);
  free(inf->handlers);
  free(inf->ns);
  inf->handlers = NULL;
  inf->ns = NULL;
  inf->pending = NULL;
  inf->framer = NULL;
}

bool kcm_informer_synced(const struct kcm_informer *inf) { return inf->synced; }
