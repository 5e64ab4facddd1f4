/* informer — list/watch reflector and indexed cache; see include/kcm/informer.h. */
#include "kcm/informer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "framing.h"
#include "kcm/error.h"
#include "kcm/log.h"

#define DEFAULT_PAGE 500
#define DEFAULT_PAGE_BYTES (16u << 20)
#define DEFAULT_EVENT_BYTES (3u << 20)
#define SHORT_WATCH_MS 1000
#define LIST_TIMEOUT_MS 60000

struct kcm_informer_bucket {
  const char *ns;     /* by_ns: pooled namespace */
  struct kcm_uid uid; /* by_owner */
  struct kcm_object *head;
  size_t n;
};

struct objkey {
  const char *ns;
  const char *name;
};

/* --- maps ------------------------------------------------------------------------ */

static uint64_t hash_objkey(const void *key) {
  const struct objkey *k = key;
  uint64_t h = kcm_map_hash_bytes(KCM_MAP_HASH_INIT, k->ns, strlen(k->ns));
  h = kcm_map_hash_bytes(h, "/", 1);
  return kcm_map_hash_bytes(h, k->name, strlen(k->name));
}

static bool match_obj(const void *key, const void *entry) {
  const struct objkey *k = key;
  const struct kcm_object *o = entry;
  return strcmp(k->name, o->name) == 0 && strcmp(k->ns, o->ns) == 0;
}

static uint64_t hash_ns(const void *key) {
  return kcm_map_hash_bytes(KCM_MAP_HASH_INIT, key, strlen(key));
}

static bool match_ns(const void *key, const void *entry) {
  return strcmp(key, ((const struct kcm_informer_bucket *)entry)->ns) == 0;
}

static uint64_t hash_uid(const void *key) {
  return kcm_map_hash_bytes(KCM_MAP_HASH_INIT, key, sizeof(struct kcm_uid));
}

static bool match_uid(const void *key, const void *entry) {
  return kcm_api_uid_equal(key, &((const struct kcm_informer_bucket *)entry)->uid);
}

/* A version written to an object and not yet seen in the cache. */
struct behind {
  char *ns, *name; /* owned */
  uint64_t rv;
  uint64_t at; /* loop time of the write, ms */
};

static bool match_behind(const void *key, const void *entry) {
  const struct objkey *k = key;
  const struct behind *b = entry;
  return strcmp(k->name, b->name) == 0 && strcmp(k->ns, b->ns) == 0;
}

static const struct kcm_map_type obj_type = {hash_objkey, match_obj};
static const struct kcm_map_type behind_type = {hash_objkey, match_behind};
static const struct kcm_map_type ns_type = {hash_ns, match_ns};
static const struct kcm_map_type owner_type = {hash_uid, match_uid};

/* --- indexes ------------------------------------------------------------------------ */

static const struct kcm_uid no_owner; /* all zero: the bucket of orphans */

/* The owner-index bucket of an object: its controller's uid, or no_owner. */
static const struct kcm_uid *owner_of(const struct kcm_object *o) {
  return o->has_controller ? &o->controller.uid : &no_owner;
}

static void link_obj(struct kcm_informer *inf, struct kcm_object *o) {
  struct kcm_informer_bucket *b = kcm_map_get(&inf->by_ns, o->ns);
  if (!b && (b = calloc(1, sizeof(*b)))) {
    b->ns = kcm_intern_ref(o->ns);
    if (kcm_map_put(&inf->by_ns, o->ns, b, NULL)) {
      kcm_intern_put(inf->pool, b->ns);
      free(b);
      b = NULL;
    }
  }
  o->ns_prev = NULL;
  o->ns_next = NULL;
  if (b) {
    o->ns_next = b->head;
    if (b->head)
      b->head->ns_prev = o;
    b->head = o;
    b->n++;
  }
  o->own_prev = o->own_next = NULL;
  b = kcm_map_get(&inf->by_owner, owner_of(o));
  if (!b && (b = calloc(1, sizeof(*b)))) {
    b->uid = *owner_of(o);
    if (kcm_map_put(&inf->by_owner, &b->uid, b, NULL)) {
      free(b);
      b = NULL;
    }
  }
  if (b) {
    o->own_next = b->head;
    if (b->head)
      b->head->own_prev = o;
    b->head = o;
    b->n++;
  }
}

static void unlink_obj(struct kcm_informer *inf, struct kcm_object *o) {
  struct kcm_informer_bucket *b = kcm_map_get(&inf->by_ns, o->ns);
  if (b) {
    if (o->ns_prev)
      o->ns_prev->ns_next = o->ns_next;
    else if (b->head == o)
      b->head = o->ns_next;
    if (o->ns_next)
      o->ns_next->ns_prev = o->ns_prev;
    if (--b->n == 0) {
      kcm_map_remove(&inf->by_ns, o->ns);
      kcm_intern_put(inf->pool, b->ns);
      free(b);
    }
  }
  o->ns_prev = o->ns_next = NULL;
  b = kcm_map_get(&inf->by_owner, owner_of(o));
  if (b) {
    if (o->own_prev)
      o->own_prev->own_next = o->own_next;
    else if (b->head == o)
      b->head = o->own_next;
    if (o->own_next)
      o->own_next->own_prev = o->own_prev;
    if (--b->n == 0) {
      kcm_map_remove(&inf->by_owner, owner_of(o));
      free(b);
    }
  }
  o->own_prev = o->own_next = NULL;
}

/* --- store ---------------------------------------------------------------------------- */

static void free_behind(struct behind *b) {
  if (b) {
    free(b->ns);
    free(b->name);
    free(b);
  }
}

/* Forget a write to ns/name once the cache holds version rv or newer
 * (rv 0: the object is gone, forget it in any case). */
static void caught_up(struct kcm_informer *inf, const char *ns, const char *name, uint64_t rv) {
  struct objkey k = {ns, name};
  struct behind *b;
  if (!inf->behind.len || !(b = kcm_map_get(&inf->behind, &k)))
    return;
  if (rv == 0 || rv >= b->rv)
    free_behind(kcm_map_remove(&inf->behind, &k));
}

/* Put `o` (taking over the caller's reference) and tell the handlers. */
static void store_upsert(struct kcm_informer *inf, struct kcm_object *o) {
  struct objkey k = {o->ns, o->name};
  void *prev = NULL;
  uint32_t i;

  if (kcm_map_put(&inf->objects, &k, o, &prev)) {
    kcm_error("cache insert failed kind=\"%s\" namespace=\"%s\" name=\"%s\" err=\"out of "
              "memory\"", kcm_api_kind_name(inf->opts.kind), o->ns, o->name);
    kcm_api_unref(o, inf->pool);
    return;
  }
  if (prev)
    unlink_obj(inf, prev);
  link_obj(inf, o);
  caught_up(inf, o->ns, o->name, o->rv);
  for (i = 0; i < inf->nhandlers; i++) {
    struct kcm_informer_handler *h = &inf->handlers[i];
    if (prev && h->updated)
      h->updated(h->ctx, prev, o);
    else if (!prev && h->added)
      h->added(h->ctx, o);
  }
  if (prev)
    kcm_api_unref(prev, inf->pool);
}

/* Remove the object with o's key; report `final` (or the cached one). */
static void store_delete(struct kcm_informer *inf, const char *ns, const char *name,
                         struct kcm_object *final, bool unknown) {
  struct objkey k = {ns, name};
  struct kcm_object *old = kcm_map_remove(&inf->objects, &k);
  struct kcm_object *report;
  uint32_t i;
  if (!old)
    return;
  unlink_obj(inf, old);
  caught_up(inf, ns, name, 0);
  report = final ? final : old;
  for (i = 0; i < inf->nhandlers; i++) {
    struct kcm_informer_handler *h = &inf->handlers[i];
    if (h->deleted)
      h->deleted(h->ctx, report, unknown);
  }
  kcm_api_unref(old, inf->pool);
}

/* Apply a full list: upsert everything in it, delete what it lacks. */
static void store_replace(struct kcm_informer *inf) {
  struct kcm_map present;
  struct kcm_map_iter it;
  struct kcm_object *o, **gone = NULL;
  size_t i, ngone = 0;

  kcm_map_init(&present, &obj_type);
  for (i = 0; i < inf->npending; i++) {
    struct objkey k = {inf->pending[i]->ns, inf->pending[i]->name};
    kcm_map_put(&present, &k, inf->pending[i], NULL);
  }
  if (inf->objects.len && !(gone = malloc(inf->objects.len * sizeof(*gone))))
    kcm_error("relist: out of memory finding vanished objects kind=\"%s\"",
              kcm_api_kind_name(inf->opts.kind));
  kcm_map_iter_init(&it, &inf->objects);
  while (gone && (o = kcm_map_next(&it))) {
    struct objkey k = {o->ns, o->name};
    if (!kcm_map_get(&present, &k))
      gone[ngone++] = o;
  }
  kcm_map_release(&present);
  for (i = 0; i < ngone; i++)
    store_delete(inf, gone[i]->ns, gone[i]->name, NULL, true);
  free(gone);
  for (i = 0; i < inf->npending; i++)
    store_upsert(inf, inf->pending[i]);
  inf->npending = 0;
}

static void drop_pending(struct kcm_informer *inf) {
  size_t i;
  for (i = 0; i < inf->npending; i++)
    kcm_api_unref(inf->pending[i], inf->pool);
  inf->npending = 0;
}

/* --- paths ----------------------------------------------------------------------------- */

int kcm_informer_path(enum kcm_kind kind, const char *ns, const char *name, const char *sub,
                      char *out, size_t cap) {
  static const char *const prefix[KCM_KIND_COUNT] = {"/api/v1", "/apis/apps/v1",
                                                     "/apis/apps/v1"};
  static const char *const plural[KCM_KIND_COUNT] = {"pods", "replicasets", "deployments"};
  if (kind >= KCM_KIND_COUNT) {
    snprintf(out, cap, "no kind %d", (int)kind);
    return KCM_EINVAL;
  }
  return kcm_client_path(out, cap, prefix[kind], ns, plural[kind], name, sub);
}

int kcm_informer_collection_path(enum kcm_kind kind, const char *ns, struct kcm_buf *out) {
  char path[KCM_CLIENT_PATH_MAX];
  int err = kcm_informer_path(kind, ns, NULL, NULL, path, sizeof(path));
  return err ? err : kcm_buf_append_str(out, path);
}

/* Append name=value, the value percent-encoded: the server's text (a
 * continue token, a resourceVersion) goes back to it byte for byte. */
static int query_param(struct kcm_buf *b, const char *name, const char *value) {
  int err = kcm_buf_appendf(b, "%s=", name);
  return err ? err : kcm_client_escape(b, value, strlen(value));
}

/* --- decoding helpers ---------------------------------------------------------------- */

/* metadata.<key> of an object's text, for logs ("" when unreadable). */
static void meta_string(const char *text, size_t len, const char *key, char *out, size_t cap) {
  const char *path[] = {"metadata", key, NULL}, *s;
  struct kcm_json j;
  size_t n;
  kcm_json_init(&j);
  kcm_json_start(&j, text, len);
  snprintf(out, cap, "%s", kcm_json_find(&j, path) && kcm_json_string(&j, &s, &n) ? s : "");
  kcm_json_release(&j);
}

/* Decode one object from its text; log and count it when malformed. */
static struct kcm_object *decode(struct kcm_informer *inf, const char *text, size_t len,
                                 const char *where) {
  struct kcm_object *o = NULL;
  struct kcm_api_error e;
  char ns[64], name[256];
  int err = kcm_api_decode_text(inf->opts.kind, text, len, &inf->item, &inf->memo, inf->pool,
                                &o, &e);
  if (err) {
    inf->stats.decode_errors++;
    meta_string(text, len, "namespace", ns, sizeof(ns));
    meta_string(text, len, "name", name, sizeof(name));
    kcm_error("skipping a malformed object kind=\"%s\" namespace=\"%s\" name=\"%s\" in=\"%s\" "
              "field=\"%s\" problem=\"%s\"", kcm_api_kind_name(inf->opts.kind), ns, name, where,
              e.field, e.problem);
    return NULL;
  }
  return o;
}

static void set_rv(struct kcm_informer *inf, const char *rv) {
  if (rv && *rv && strlen(rv) < sizeof(inf->rv))
    snprintf(inf->rv, sizeof(inf->rv), "%s", rv);
}

/* --- state machine -------------------------------------------------------------------- */

static void start_list(struct kcm_informer *inf);
static void start_watch(struct kcm_informer *inf);

static void next_attempt(struct kcm_informer *inf) {
  if (inf->need_list)
    start_list(inf);
  else
    start_watch(inf);
}

static void on_timer(uv_timer_t *t) {
  struct kcm_informer *inf = t->data;
  if (inf->state == KCM_INFORMER_BACKOFF)
    next_attempt(inf);
}

/* Wait before the next attempt: jittered exponential backoff, reset after
 * a quiet period. */
static void backoff(struct kcm_informer *inf, double retry_after_s) {
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

/* --- list ------------------------------------------------------------------------------- */

static void on_list(const struct kcm_client_response *resp, void *data);

static void send_list(struct kcm_informer *inf) {
  struct kcm_buf path = KCM_BUF_INIT(4096);
  struct kcm_client_request_options o = {0};
  /* Lists are always paged, so no response holds more than a page; the
   * first list (and any after a 410) is a consistent read at "". */
  const char *rv = inf->rv_gone ? "" : inf->rv;
  bool page = inf->opts.page_size > 0;
  int err = kcm_informer_collection_path(inf->opts.kind, inf->opts.namespace, &path);

  if (!err)
    err = kcm_buf_append_str(&path, "?");
  if (!err && page)
    err = kcm_buf_appendf(&path, "limit=%u&", inf->opts.page_size);
  if (!err && inf->cont)
    err = query_param(&path, "continue", inf->cont);
  else if (!err)
    err = query_param(&path, "resourceVersion", rv);
  o.method = "GET";
  o.path = path.data;
  o.timeout_ms = LIST_TIMEOUT_MS;
  o.max_body = inf->opts.max_page_bytes;
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
    backoff(inf, 0);
  }
}

static void start_list(struct kcm_informer *inf) {
  if (inf->synced)
    inf->stats.relists++;
  inf->state = KCM_INFORMER_LISTING;
  free(inf->cont);
  inf->cont = NULL;
  drop_pending(inf);
  send_list(inf);
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

/* Decode one page; returns 0 or a KCM_E* code with *why set. */
static int apply_page(struct kcm_informer *inf, const char *body, size_t len,
                      const char **why) {
  struct kcm_json *j = &inf->page;
  char rv[sizeof(inf->rv)] = "";
  bool has_items = false, bad_items = false;
  int err = 0;

  free(inf->cont);
  inf->cont = NULL;
  kcm_json_start(j, body, len);
  if (!kcm_json_object(j)) {
    *why = "the list response is not a JSON object";
    return KCM_EINVAL;
  }
  while (!err && kcm_json_member(j)) {
    if (kcm_json_key_is(j, "items")) {
      has_items = true;
      if (kcm_json_null(j))
        continue;
      if (!kcm_json_array(j)) {
        bad_items = true;
        break;
      }
      while (!err && kcm_json_element(j)) {
        const char *text;
        size_t n;
        struct kcm_object *o;
        if (!kcm_json_raw(j, &text, &n))
          break;
        o = decode(inf, text, n, "list");
        if (o && (err = add_pending(inf, o)))
          kcm_api_unref(o, inf->pool);
      }
    } else if (kcm_json_key_is(j, "metadata") && kcm_json_object(j)) {
      while (!err && kcm_json_member(j)) {
        const char *s;
        size_t n;
        bool is_continue = kcm_json_key_is(j, "continue");
        if ((is_continue || kcm_json_key_is(j, "resourceVersion")) &&
            kcm_json_string(j, &s, &n)) {
          if (is_continue && n) {
            free(inf->cont);
            if (!(inf->cont = strdup(s)))
              err = KCM_ENOMEM;
          } else if (!is_continue && n < sizeof(rv)) {
            memcpy(rv, s, n + 1);
          }
        } else if (!kcm_json_skip(j)) {
          break;
        }
      }
    } else if (!kcm_json_skip(j)) {
      break;
    }
  }
  if (err == KCM_ENOMEM) {
    *why = "out of memory";
    return err;
  }
  if (bad_items || (!j->err && !has_items)) {
    *why = "the list response has no items list";
    return KCM_EINVAL;
  }
  if (j->err || !kcm_json_done(j)) {
    *why = j->err;
    return KCM_EINVAL;
  }
  if (!inf->cont)
    set_rv(inf, rv);
  return 0;
}

static void list_done(struct kcm_informer *inf) {
  bool first = !inf->synced;
  store_replace(inf);
  inf->synced = true;
  inf->need_list = false;
  inf->rv_gone = false;
  if (first)
    kcm_v(1, "cache synced kind=\"%s\" objects=%zu resourceVersion=\"%s\"",
          kcm_api_kind_name(inf->opts.kind), inf->objects.len, inf->rv);
  start_watch(inf);
}

static void on_list(const struct kcm_client_response *resp, void *data) {
  struct kcm_informer *inf = data;
  const char *why = NULL;
  int err;

  inf->req = NULL;
  if (inf->state == KCM_INFORMER_STOPPED) {
    drop_pending(inf);
    kcm_informer_stop(inf, inf->on_closed);
    return;
  }
  if (resp->err == KCM_EGONE) {
    /* The version (or a continue token) is too old: list again, fresh. */
    kcm_v(1, "list expired; relisting kind=\"%s\" message=\"%s\"",
          kcm_api_kind_name(inf->opts.kind), resp->message);
    inf->rv_gone = true;
    start_list(inf);
    return;
  }
  if (resp->err == KCM_ENOTFOUND) {
    /* The resource does not exist here: an empty list, as client-go does. */
    drop_pending(inf);
    free(inf->cont);
    inf->cont = NULL;
    list_done(inf);
    return;
  }
  if (resp->err) {
    kcm_error("list failed kind=\"%s\" err=\"%s: %s\"", kcm_api_kind_name(inf->opts.kind),
              kcm_strerror(resp->err), resp->message);
    drop_pending(inf);
    inf->need_list = true;
    backoff(inf, resp->retry_after);
    return;
  }
  err = apply_page(inf, resp->body, resp->body_len, &why);
  if (err) {
    kcm_error("list failed kind=\"%s\" err=\"%s\"", kcm_api_kind_name(inf->opts.kind), why);
    drop_pending(inf);
    inf->need_list = true;
    backoff(inf, 0);
    return;
  }
  if (inf->cont)
    send_list(inf);
  else
    list_done(inf);
}

/* --- watch ------------------------------------------------------------------------------ */

enum { STOP_EXPIRED = 1, STOP_ERROR = 2 };

/* An ERROR event's Status: stop the watch, to relist on 410. */
static int watch_error(struct kcm_informer *inf, const char *text, size_t len) {
  struct json_tokener *tok = json_tokener_new();
  struct json_object *obj = tok ? json_tokener_parse_ex(tok, text, (int)len) : NULL, *code, *msg;
  const char *m = "";
  int64_t c = 0;
  if (tok)
    json_tokener_free(tok);
  /* A Status code is an integer (json-c would also read "410" or 410.9). */
  if (json_object_object_get_ex(obj, "code", &code) && json_object_is_type(code, json_type_int))
    c = json_object_get_int64(code);
  if (json_object_object_get_ex(obj, "message", &msg) && json_object_is_type(msg, json_type_string))
    m = json_object_get_string(msg);
  if (c == 410) {
    kcm_v(1, "watch expired; relisting kind=\"%s\" message=\"%s\"",
          kcm_api_kind_name(inf->opts.kind), m);
    inf->stop_reason = STOP_EXPIRED;
  } else {
    kcm_error("watch error kind=\"%s\" code=%lld message=\"%s\"",
              kcm_api_kind_name(inf->opts.kind), (long long)c, m);
    inf->stop_reason = STOP_ERROR;
  }
  json_object_put(obj);
  return 1;
}

static void malformed_event(struct kcm_informer *inf, const char *why) {
  inf->stats.decode_errors++;
  kcm_error("skipping a malformed watch event kind=\"%s\" problem=\"%s\"",
            kcm_api_kind_name(inf->opts.kind), why);
}

static bool is_change(const char *type) {
  return !strcmp(type, "ADDED") || !strcmp(type, "MODIFIED") || !strcmp(type, "DELETED");
}

/* A resourceVersion in decimal, as the API server writes it (out holds 32). */
static void format_rv(char *out, uint64_t v) {
  char digits[24];
  size_t n = 0;
  do
    digits[n++] = (char)('0' + v % 10);
  while ((v /= 10));
  while (n)
    *out++ = digits[--n];
  *out = '\0';
}

/* Read and apply the watch event text[0..len) (one line of the stream). Pods
 * are decoded while the event is read, in one pass (in_place); any other
 * kind, or a pod that turns out malformed, is cut out of the event first and
 * decoded on its own. More events after the first on the line are read in
 * turn; anything else after it is reported. */
static int read_event(struct kcm_informer *inf, const char *text, size_t len, bool in_place) {
  static const char *const rv_path[] = {"metadata", "resourceVersion", NULL};
  struct kcm_json *j = &inf->page;
  const char *obj, *s, *why, *rest, *end = text + len;
  size_t objlen, n;
  char type[16];
  struct kcm_object *o;
  struct kcm_api_error e;
  bool decoded;

next: /* the next event on the line: a loop, not a call, as a line may hold very many */
  obj = NULL;
  objlen = 0;
  type[0] = '\0';
  o = NULL;
  decoded = false;
  kcm_json_start(j, text, len);
  if (kcm_json_object(j)) {
    while (kcm_json_member(j)) {
      if (kcm_json_key_is(j, "type") && kcm_json_peek(j) == KCM_JSON_STRING) {
        if (!kcm_json_string(j, &s, &n))
          break; /* a broken string: j->err says why */
        if (n < sizeof(type))
          memcpy(type, s, n + 1);
        else
          strcpy(type, "(too long)");
      } else if (kcm_json_key_is(j, "object") && kcm_json_peek(j) == KCM_JSON_OBJECT) {
        obj = j->p;
        if (in_place && !decoded && is_change(type)) {
          if (kcm_api_decode_pod_at(j, inf->pool, &o, &e))
            return read_event(inf, text, len, false); /* which reports it */
          decoded = true;
          objlen = (size_t)(j->p - obj);
        } else {
          kcm_json_raw(j, &obj, &objlen);
        }
      } else {
        kcm_json_skip(j);
      }
    }
  }
  why = j->err;
  rest = j->p;
  while (!why && rest < end && (*rest == ' ' || *rest == '\t' || *rest == '\r'))
    rest++;
  if (!why && rest < end && *rest != '{') {
    inf->stats.decode_errors++; /* the event itself is good: apply it */
    kcm_error("skipping text after a watch event kind=\"%s\" problem=\"not an event\"",
              kcm_api_kind_name(inf->opts.kind));
    rest = end;
  }
  if (why) {
    if (o)
      kcm_api_unref(o, inf->pool);
    malformed_event(inf, why);
    return 0;
  }
  if (!type[0] || !obj) {
    inf->stats.decode_errors++;
    kcm_error("skipping a watch event without type and object kind=\"%s\"",
              kcm_api_kind_name(inf->opts.kind));
  } else if (!strcmp(type, "BOOKMARK")) {
    char rv[sizeof(inf->rv)] = "";
    inf->watch_events++;
    inf->stats.bookmarks++;
    kcm_json_start(j, obj, objlen);
    if (kcm_json_find(j, rv_path) && kcm_json_string(j, &s, &n) && n < sizeof(rv))
      memcpy(rv, s, n + 1);
    set_rv(inf, rv);
  } else if (!strcmp(type, "ERROR")) {
    inf->watch_events++;
    return watch_error(inf, obj, objlen);
  } else if (is_change(type)) {
    inf->watch_events++;
    inf->stats.events++;
    if (!decoded)
      o = decode(inf, obj, objlen, "watch");
    if (o) {
      format_rv(inf->rv, o->rv);
      if (!strcmp(type, "DELETED")) {
        store_delete(inf, o->ns, o->name, o, false);
        kcm_api_unref(o, inf->pool);
      } else {
        store_upsert(inf, o);
      }
    }
  } else {
    inf->watch_events++;
    inf->stats.decode_errors++;
    kcm_error("skipping a watch event of unknown type kind=\"%s\" type=\"%s\"",
              kcm_api_kind_name(inf->opts.kind), type);
  }
  if (rest < end) {
    text = rest;
    len = (size_t)(end - rest);
    goto next;
  }
  return 0;
}

static int on_event(const char *text, size_t len, const char *why, void *data) {
  struct kcm_informer *inf = data;
  if (!text) {
    malformed_event(inf, why);
    return 0;
  }
  return read_event(inf, text, len, inf->opts.kind == KCM_KIND_POD);
}

static int on_chunk(const char *p, size_t n, void *data) {
  struct kcm_informer *inf = data;
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
    kcm_framer_reset(inf->framer);
  if (inf->state == KCM_INFORMER_STOPPED) {
    kcm_informer_stop(inf, inf->on_closed);
    return;
  }
  if (reason == STOP_EXPIRED || resp->err == KCM_EGONE) {
    inf->need_list = true;
    start_list(inf);
    return;
  }
  if (reason == STOP_ERROR) {
    backoff(inf, 0);
    return;
  }
  if (resp->err) {
    kcm_warn("watch failed kind=\"%s\" err=\"%s: %s\"", kcm_api_kind_name(inf->opts.kind),
             kcm_strerror(resp->err), resp->message);
    backoff(inf, resp->retry_after);
    return;
  }
  if (lasted < SHORT_WATCH_MS && inf->watch_events == 0) {
    kcm_warn("very short watch kind=\"%s\" lasted=\"%llums\"",
             kcm_api_kind_name(inf->opts.kind), (unsigned long long)lasted);
    backoff(inf, 0);
    return;
  }
  start_watch(inf); /* the server ended it on time: carry on */
}

static void start_watch(struct kcm_informer *inf) {
  struct kcm_buf path = KCM_BUF_INIT(4096);
  struct kcm_client_request_options o = {0};
  uint32_t min = inf->opts.watch_timeout_min_s;
  uint32_t timeout = min + (uint32_t)((double)min * (rand() / (RAND_MAX + 1.0)));
  int err = kcm_informer_collection_path(inf->opts.kind, inf->opts.namespace, &path);

  if (!err)
    err = kcm_buf_append_str(&path, "?allowWatchBookmarks=true&");
  if (!err)
    err = query_param(&path, "resourceVersion", inf->rv);
  if (!err)
    err = kcm_buf_appendf(&path, "&timeoutSeconds=%u&watch=1", timeout);
  inf->state = KCM_INFORMER_WATCHING;
  inf->watch_started = uv_now(inf->loop);
  inf->watch_events = 0;
  o.method = "GET";
  o.path = path.data;
  /* The server ends the watch at `timeout`; a stream silent for longer
   * than that is dead. */
  o.timeout_ms = (long)(timeout + 60) * 1000;
  o.idle_timeout_ms = (long)(timeout + 30) * 1000;
  o.on_chunk = on_chunk;
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
    backoff(inf, 0);
  }
}

/* --- resync ------------------------------------------------------------------------------ */

static void on_resync(uv_timer_t *t) {
  struct kcm_informer *inf = t->data;
  struct kcm_map_iter it;
  struct kcm_object *o;
  uint32_t i;
  if (!inf->synced)
    return;
  kcm_map_iter_init(&it, &inf->objects);
  while ((o = kcm_map_next(&it))) {
    for (i = 0; i < inf->nhandlers; i++) {
      if (inf->handlers[i].updated)
        inf->handlers[i].updated(inf->handlers[i].ctx, o, o);
    }
  }
}

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
  if (!inf->opts.max_page_bytes)
    inf->opts.max_page_bytes = DEFAULT_PAGE_BYTES;
  if (!inf->opts.max_event_bytes)
    inf->opts.max_event_bytes = DEFAULT_EVENT_BYTES;
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
  kcm_map_init(&inf->objects, &obj_type);
  kcm_map_init(&inf->behind, &behind_type);
  kcm_map_init(&inf->by_ns, &ns_type);
  kcm_map_init(&inf->by_owner, &owner_type);
  kcm_json_init(&inf->page);
  kcm_json_init(&inf->item);
  inf->framer = malloc(sizeof(struct kcm_framer));
  if (!inf->framer)
    return KCM_ENOMEM;
  err = kcm_framer_init(inf->framer, inf->opts.max_event_bytes, on_event, inf);
  if (err) {
    free(inf->framer);
    inf->framer = NULL;
    return err;
  }
  uv_timer_init(loop, &inf->timer);
  uv_timer_init(loop, &inf->resync);
  inf->timer.data = inf->resync.data = inf;
  inf->need_list = true;
  inf->state = KCM_INFORMER_IDLE;
  return 0;
}

int kcm_informer_add_handler(struct kcm_informer *inf, const struct kcm_informer_handler *h) {
  struct kcm_informer_handler *grown =
      realloc(inf->handlers, (inf->nhandlers + 1) * sizeof(*grown));
  if (!grown)
    return KCM_ENOMEM;
  inf->handlers = grown;
  inf->handlers[inf->nhandlers++] = *h;
  return 0;
}

void kcm_informer_start(struct kcm_informer *inf) {
  if (inf->state != KCM_INFORMER_IDLE)
    return;
  if (inf->opts.resync_ms)
    uv_timer_start(&inf->resync, on_resync, inf->opts.resync_ms, inf->opts.resync_ms);
  start_list(inf);
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
  struct kcm_map_iter it;
  struct kcm_object *o;
  struct behind *bh;
  struct kcm_informer_bucket *b;

  drop_pending(inf);
  kcm_map_iter_init(&it, &inf->objects);
  while ((o = kcm_map_next(&it)))
    kcm_api_unref(o, inf->pool);
  kcm_map_release(&inf->objects);
  kcm_map_iter_init(&it, &inf->behind);
  while ((bh = kcm_map_next(&it)))
    free_behind(bh);
  kcm_map_release(&inf->behind);
  kcm_map_iter_init(&it, &inf->by_ns);
  while ((b = kcm_map_next(&it))) {
    kcm_intern_put(inf->pool, b->ns);
    free(b);
  }
  kcm_map_release(&inf->by_ns);
  kcm_map_iter_init(&it, &inf->by_owner);
  while ((b = kcm_map_next(&it)))
    free(b);
  kcm_map_release(&inf->by_owner);
  if (inf->framer) {
    kcm_framer_release(inf->framer);
    free(inf->framer);
  }
  kcm_json_release(&inf->page);
  kcm_json_release(&inf->item);
  kcm_api_memo_release(&inf->memo);
  free(inf->pending);
  free(inf->cont);
  free(inf->handlers);
  free(inf->ns);
  inf->handlers = NULL;
  inf->ns = NULL;
  inf->pending = NULL;
  inf->cont = NULL;
  inf->framer = NULL;
}

/* --- reads ---------------------------------------------------------------------------------- */

bool kcm_informer_synced(const struct kcm_informer *inf) { return inf->synced; }

struct kcm_object *kcm_informer_get(const struct kcm_informer *inf, const char *ns,
                                    const char *name) {
  struct objkey k = {ns, name};
  return kcm_map_get(&inf->objects, &k);
}

void kcm_informer_written(struct kcm_informer *inf, const char *ns, const char *name,
                          uint64_t rv) {
  struct objkey k = {ns, name};
  struct kcm_object *o = kcm_map_get(&inf->objects, &k);
  struct behind *b;
  if (!rv || !o || o->rv >= rv)
    return; /* nothing cached to be behind, or already caught up */
  b = kcm_map_get(&inf->behind, &k);
  if (!b) {
    b = calloc(1, sizeof(*b));
    if (!b || !(b->ns = strdup(ns)) || !(b->name = strdup(name)) ||
        kcm_map_put(&inf->behind, &k, b, NULL)) {
      free_behind(b); /* without the record a write may conflict, no more */
      return;
    }
  }
  if (rv > b->rv)
    b->rv = rv;
  b->at = uv_now(inf->loop);
}

bool kcm_informer_behind(struct kcm_informer *inf, const struct kcm_object *o) {
  struct objkey k = {o->ns, o->name};
  struct behind *b;
  if (!inf->behind.len || !(b = kcm_map_get(&inf->behind, &k)))
    return false;
  if (o->rv >= b->rv || uv_now(inf->loop) - b->at > KCM_INFORMER_BEHIND_TTL_MS) {
    if (o->rv < b->rv)
      kcm_warn("the cache never caught up with a write kind=\"%s\" namespace=\"%s\" "
               "name=\"%s\" written=%llu cached=%llu", kcm_api_kind_name(inf->opts.kind),
               o->ns, o->name, (unsigned long long)b->rv, (unsigned long long)o->rv);
    free_behind(kcm_map_remove(&inf->behind, &k));
    return false;
  }
  return true;
}

size_t kcm_informer_len(const struct kcm_informer *inf) { return inf->objects.len; }

struct kcm_object *kcm_informer_first_in(const struct kcm_informer *inf, const char *ns) {
  struct kcm_informer_bucket *b = kcm_map_get(&inf->by_ns, ns);
  return b ? b->head : NULL;
}

struct kcm_object *kcm_informer_first_owned(const struct kcm_informer *inf,
                                            const struct kcm_uid *owner) {
  struct kcm_informer_bucket *b = kcm_map_get(&inf->by_owner, owner ? owner : &no_owner);
  return b ? b->head : NULL;
}
