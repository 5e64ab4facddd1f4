/*
 * list — the informer's list, read as it streams (items.c splits it). As
 * client-go's reflector asks: the first list at resourceVersion "0", which
 * the API server answers from its watch cache in one response whatever the
 * limit; a list after a 410 at "" (a consistent read, paged from etcd); a
 * relist at the last version seen and without a limit, so that the watch
 * cache answers it too. A server that paged a list at "0" has no watch
 * cache: every list to it is paged. The objects are gathered and, with the
 * last page, replace the cache. A list answered in protobuf (pods, when
 * asked for) is split by pbitems.c instead.
 *
 * With watch_list the list is streamed instead: a watch whose events
 * (event.c) gather here until the initial-events-end bookmark; a stream
 * refused or broken falls back to the list above (see kcm/informer.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "items.h"
#include "kcm/error.h"
#include "kcm/log.h"
#include "kcm/pb.h"
#include "pbitems.h"

#define LIST_TIMEOUT_MS 60000

static void on_list(const struct kcm_client_response *resp, void *data);

static int on_list_chunk(const char *p, size_t n, void *data) {
  struct kcm_informer *inf = data;
  int err;
  if (!inf->body_started) { /* the answer's encoding decides the reader */
    inf->body_started = true;
    inf->list_proto = kcm_informer_is_proto(kcm_client_response_type(inf->req));
  }
  if (inf->list_proto) {
    struct kcm_pbitems *pb = inf->pbitems;
    if ((err = kcm_pbitems_feed(pb, p, n)) == KCM_ENOMEM)
      pb->err = "out of memory";
  } else {
    struct kcm_items *items = inf->items;
    if ((err = kcm_items_feed(items, p, n)) == KCM_ENOMEM)
      items->err = "out of memory";
  }
  return err;
}

/* Why the list's reader failed, or NULL. */
static const char *reader_error(const struct kcm_informer *inf) {
  return inf->list_proto ? ((const struct kcm_pbitems *)inf->pbitems)->err
                         : ((const struct kcm_items *)inf->items)->err;
}

static void send_list(struct kcm_informer *inf) {
  struct kcm_buf path = KCM_BUF_INIT(4096);
  struct kcm_client_request_options o = {0};
  const char *rv = inf->rv_gone || inf->consistent ? "" : inf->rv[0] ? inf->rv : "0";
  bool page = inf->cont || inf->paged || !strcmp(rv, "") || !strcmp(rv, "0");
  int err = kcm_informer_collection_path(inf->opts.kind, inf->opts.namespace, &path);

  kcm_items_reset(inf->items);
  kcm_pbitems_reset(inf->pbitems);
  inf->body_started = inf->list_proto = false;
  inf->list_rv[0] = '\0';
  inf->at_zero = !inf->cont && !strcmp(rv, "0");
  if (!err)
    err = kcm_buf_append_str(&path, "?");
  if (!err && page)
    err = kcm_buf_appendf(&path, "limit=%u&", inf->opts.page_size);
  if (!err && inf->cont)
    err = kcm_informer_query_param(&path, "continue", inf->cont);
  else if (!err)
    err = kcm_informer_query_param(&path, "resourceVersion", rv);
  o.method = "GET";
  o.path = path.data;
  o.accept = kcm_informer_accept(inf);
  o.timeout_ms = LIST_TIMEOUT_MS;
  o.on_chunk = on_list_chunk;
  o.done = on_list;
  o.data = inf;
  if (!err)
    err = kcm_client_request(inf->client, &o, &inf->req);
  kcm_buf_release(&path);
  inf->stats.lists++;
  if (err) {
    kcm_error("cannot send a list request kind=\"%s\" err=\"%s\"",
              kcm_api_kind_name(inf->opts.kind), kcm_strerror(err));
    inf->req = NULL;
    kcm_informer_backoff(inf, 0);
  }
}

/* A list of pages from the first, dropping what was gathered. */
static void list_from_start(struct kcm_informer *inf) {
  inf->state = KCM_INFORMER_LISTING;
  free(inf->cont);
  inf->cont = NULL;
  kcm_informer_drop_pending(inf);
  send_list(inf);
}

void kcm_informer_start_list(struct kcm_informer *inf) {
  if (inf->synced)
    inf->stats.relists++;
  inf->lists_started++;
  inf->relist_after = false;
  if (!inf->opts.watch_list) {
    list_from_start(inf);
    return;
  }
  inf->state = KCM_INFORMER_LISTING;
  kcm_informer_drop_pending(inf);
  kcm_informer_start_stream(inf);
}

static int add_pending(struct kcm_informer *inf, struct kcm_object *o) {
  if (inf->npending == inf->cap_pending) {
    size_t cap = inf->cap_pending ? inf->cap_pending * 2 : 512;
    struct kcm_object **grown = realloc(inf->pending, cap * sizeof(*grown));
    if (!grown)
      return KCM_ENOMEM;
    inf->pending = grown;
    inf->cap_pending = cap;
  }
  inf->pending[inf->npending++] = o;
  return 0;
}

/* Keep a list's continue token (when not empty) or resourceVersion. */
static int keep_meta(struct kcm_informer *inf, bool is_continue, const char *s, size_t n) {
  if (is_continue && n) {
    free(inf->cont);
    if (!(inf->cont = strndup(s, n)))
      return KCM_ENOMEM;
  } else if (!is_continue && n < sizeof(inf->list_rv)) {
    memcpy(inf->list_rv, s, n);
    inf->list_rv[n] = '\0';
  }
  return 0;
}

/* A protobuf ListMeta: resourceVersion 2, continue 3. Malformed, it
 * fails the list (as malformed JSON does). */
static int read_pb_metadata(struct kcm_informer *inf, const char *msg, size_t len) {
  struct kcm_pb r;
  const uint8_t *s;
  size_t n;
  kcm_pb_start(&r, msg, len);
  while (kcm_pb_next(&r)) {
    if ((r.field == 2 || r.field == 3) && kcm_pb_bytes(&r, &s, &n)) {
      if (!memchr(s, '\0', n) && keep_meta(inf, r.field == 3, (const char *)s, n))
        return KCM_ENOMEM;
    } else if (r.field != 2 && r.field != 3) {
      kcm_pb_skip(&r);
    }
  }
  if (r.err) {
    ((struct kcm_pbitems *)inf->pbitems)->err = "the list's metadata is malformed";
    return KCM_EINVAL;
  }
  return 0;
}

/* The list's metadata: its continue token and resourceVersion. */
static int read_metadata(struct kcm_informer *inf, const char *text, size_t len) {
  struct kcm_json *j = &inf->page;

  free(inf->cont);
  inf->cont = NULL;
  if (inf->list_proto)
    return read_pb_metadata(inf, text, len);
  kcm_json_start(j, text, len);
  if (!kcm_json_object(j))
    return 0; /* not an object: no token, no version */
  while (kcm_json_member(j)) {
    const char *s;
    size_t n;
    bool is_continue = kcm_json_key_is(j, "continue");
    if ((is_continue || kcm_json_key_is(j, "resourceVersion")) && kcm_json_string(j, &s, &n)) {
      if (strlen(s) == n && keep_meta(inf, is_continue, s, n))
        return KCM_ENOMEM;
    } else if (!kcm_json_skip(j)) {
      break;
    }
  }
  return 0;
}

/* items.c's callback: one item of the list, or its metadata. */
static int on_list_part(enum kcm_items_part part, const char *text, size_t len,
                        const char *why, void *data) {
  struct kcm_informer *inf = data;
  struct kcm_object *o;
  int err;

  if (part == KCM_ITEMS_METADATA)
    return read_metadata(inf, text, len);
  if (!text) { /* over the size cap: which object it is cannot be told */
    struct kcm_informer_bad bad = {.e = {"", ""}};
    inf->stats.decode_errors++;
    snprintf(bad.e.problem, sizeof(bad.e.problem), "%s", why);
    kcm_informer_unreadable(inf, &bad, "list", true, false);
    return 0;
  }
  {
    struct kcm_informer_bad bad;
    o = inf->list_proto ? kcm_informer_decode_proto(inf, text, len, true, &bad)
                        : kcm_informer_decode(inf, text, len, &bad);
    if (!o)
      kcm_informer_unreadable(inf, &bad, "list", true, false);
  }
  if (o && !kcm_informer_kept(inf, o))
    return 0;
  if (o && (err = add_pending(inf, o))) {
    kcm_api_unref(o, inf->pool);
    return err;
  }
  return 0;
}

int kcm_informer_list_init(struct kcm_informer *inf) {
  inf->items = malloc(sizeof(struct kcm_items));
  inf->pbitems = malloc(sizeof(struct kcm_pbitems));
  if (!inf->items || !inf->pbitems) {
    free(inf->items);
    free(inf->pbitems);
    inf->items = inf->pbitems = NULL;
    return KCM_ENOMEM;
  }
  kcm_items_init(inf->items, inf->opts.max_event_bytes, on_list_part, inf);
  kcm_pbitems_init(inf->pbitems, inf->opts.max_event_bytes, on_list_part, inf);
  return 0;
}

void kcm_informer_list_release(struct kcm_informer *inf) {
  if (inf->items)
    kcm_items_release(inf->items);
  if (inf->pbitems)
    kcm_pbitems_release(inf->pbitems);
  free(inf->items);
  free(inf->pbitems);
  inf->items = inf->pbitems = NULL;
  free(inf->cont);
  inf->cont = NULL;
}

/* The objects gathered replace the cache. */
static void synced(struct kcm_informer *inf, bool proto, const char *how) {
  bool first = !inf->synced;
  kcm_informer_replace(inf, inf->pending, inf->npending);
  inf->npending = 0;
  inf->synced = true;
  inf->last_error[0] = '\0';
  inf->need_list = inf->relist_after;
  inf->consistent = inf->need_list;
  inf->rv_gone = false;
  inf->lists_applied = inf->lists_started;
  if (first)
    kcm_v(1, "cache synced kind=\"%s\" objects=%zu resourceVersion=\"%s\" encoding=\"%s\" "
          "by=\"%s\"", kcm_api_kind_name(inf->opts.kind), inf->objects.len, inf->rv,
          proto ? "protobuf" : "json", how);
  if (inf->on_listed)
    inf->on_listed(inf, inf->listed_ctx);
}

static void list_done(struct kcm_informer *inf) {
  synced(inf, inf->list_proto, "list");
  if (inf->need_list) /* asked for again while it was in flight */
    kcm_informer_start_list(inf);
  else
    kcm_informer_start_watch(inf);
}

/* --- a list streamed as watch events ------------------------------------------------------ */

int kcm_informer_gather(struct kcm_informer *inf, struct kcm_object *o, bool deleted) {
  int err;
  kcm_informer_keys_remove(&inf->list_unreadable, o->ns, o->name); /* read again */
  if (!deleted) { /* a later entry of the same name wins when they replace the cache */
    if ((err = add_pending(inf, o)))
      kcm_api_unref(o, inf->pool);
    return err;
  }
  kcm_informer_gather_gone(inf, o->ns, o->name);
  kcm_api_unref(o, inf->pool);
  return 0;
}

void kcm_informer_gather_gone(struct kcm_informer *inf, const char *ns, const char *name) {
  size_t i, kept = 0;
  for (i = 0; i < inf->npending; i++) {
    struct kcm_object *p = inf->pending[i];
    if (!strcmp(p->name, name) && !strcmp(p->ns, ns))
      kcm_api_unref(p, inf->pool);
    else
      inf->pending[kept++] = p;
  }
  inf->npending = kept;
  kcm_informer_keys_remove(&inf->list_unreadable, ns, name);
}

void kcm_informer_stream_done(struct kcm_informer *inf) {
  inf->streaming = false;
  inf->state = KCM_INFORMER_WATCHING;
  synced(inf, inf->watch_proto, "stream");
}

void kcm_informer_stream_ended(struct kcm_informer *inf, const struct kcm_client_response *resp,
                               int reason, bool at_once) {
  const char *why;
  kcm_informer_drop_pending(inf);
  inf->streaming = false;
  if (reason == KCM_INFORMER_STOP_EXPIRED || resp->err == KCM_EGONE) {
    inf->rv_gone = true; /* the newest state instead */
    kcm_informer_start_stream(inf);
    return;
  }
  if (resp->err == KCM_ETHROTTLED || resp->err == KCM_ENETWORK) {
    kcm_warn("streaming a list failed kind=\"%s\" err=\"%s: %s\"",
             kcm_api_kind_name(inf->opts.kind), kcm_strerror(resp->err), resp->message);
    kcm_informer_backoff(inf, resp->retry_after);
    return;
  }
  if (!resp->err && !reason && !at_once) {
    /* Cut before its end: again, after a wait, so that a server that cuts
     * every stream is not asked in a loop (client-go asks at once). */
    kcm_warn("a streamed list ended before its initial-events-end bookmark kind=\"%s\"",
             kcm_api_kind_name(inf->opts.kind));
    kcm_informer_backoff(inf, 0);
    return;
  }
  why = resp->err ? resp->message : reason ? "an error event" : "ended at once";
  inf->stats.fallbacks++;
  kcm_v(1, "cannot stream the list; listing kind=\"%s\" err=\"%s%s%s\"",
        kcm_api_kind_name(inf->opts.kind), resp->err ? kcm_strerror(resp->err) : "",
        resp->err ? ": " : "", why);
  list_from_start(inf);
}

/* The list failed, as message says: drop what it gathered and try again
 * after a wait. */
static void list_failed(struct kcm_informer *inf, double retry_after, const char *message) {
  snprintf(inf->last_error, sizeof(inf->last_error), "%s", message);
  kcm_informer_drop_pending(inf);
  inf->need_list = true;
  kcm_informer_backoff(inf, retry_after);
}

static void on_list(const struct kcm_client_response *resp, void *data) {
  struct kcm_informer *inf = data;
  const char *why = reader_error(inf);

  inf->req = NULL;
  if (inf->state == KCM_INFORMER_STOPPED) {
    kcm_informer_drop_pending(inf);
    kcm_informer_stop(inf, inf->on_closed);
    return;
  }
  if (resp->err == KCM_EGONE) {
    /* The version (or a continue token) is too old: list again, fresh. */
    kcm_v(1, "list expired; relisting kind=\"%s\" message=\"%s\"",
          kcm_api_kind_name(inf->opts.kind), resp->message);
    inf->rv_gone = true;
    list_from_start(inf);
    return;
  }
  if (resp->err == KCM_ENOTFOUND) {
    /* The resource does not exist here: an empty list, as client-go does. */
    kcm_informer_drop_pending(inf);
    free(inf->cont);
    inf->cont = NULL;
    list_done(inf);
    return;
  }
  if (resp->err && !(resp->err == KCM_ECANCELED && why)) {
    kcm_error("list failed kind=\"%s\" err=\"%s: %s\"", kcm_api_kind_name(inf->opts.kind),
              kcm_strerror(resp->err), resp->message);
    list_failed(inf, resp->retry_after, resp->message);
    return;
  }
  if (!resp->err && (inf->list_proto ? kcm_pbitems_finish(inf->pbitems)
                                     : kcm_items_finish(inf->items)))
    why = reader_error(inf);
  if (why) {
    kcm_error("list failed kind=\"%s\" err=\"%s\"", kcm_api_kind_name(inf->opts.kind), why);
    list_failed(inf, 0, why);
    return;
  }
  if (inf->cont) {
    if (inf->at_zero)
      inf->paged = true; /* no watch cache answered "0" */
    send_list(inf);
    return;
  }
  kcm_informer_set_rv(inf, inf->list_rv);
  list_done(inf);
}

void kcm_informer_drop_pending(struct kcm_informer *inf) {
  size_t i;
  for (i = 0; i < inf->npending; i++)
    kcm_api_unref(inf->pending[i], inf->pool);
  inf->npending = 0;
  kcm_informer_keys_clear(&inf->list_unreadable);
  inf->list_blind = false;
}

