/*
 * list — the informer's paged list. Every list is paged, so no response
 * holds more than a page; the first list (and any after a 410) is a
 * consistent read at "", later ones ask for the last version seen. The
 * pages' objects are gathered and, with the last page, replace the cache.
 */
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "internal.h"
#include "kcm/error.h"
#include "kcm/log.h"

#define LIST_TIMEOUT_MS 60000

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
    err = kcm_informer_query_param(&path, "continue", inf->cont);
  else if (!err)
    err = kcm_informer_query_param(&path, "resourceVersion", rv);
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
    kcm_informer_backoff(inf, 0);
  }
}

void kcm_informer_start_list(struct kcm_informer *inf) {
  if (inf->synced)
    inf->stats.relists++;
  inf->state = KCM_INFORMER_LISTING;
  free(inf->cont);
  inf->cont = NULL;
  kcm_informer_drop_pending(inf);
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
        o = kcm_informer_decode(inf, text, n, "list");
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
    kcm_informer_set_rv(inf, rv);
  return 0;
}

static void list_done(struct kcm_informer *inf) {
  bool first = !inf->synced;
  kcm_informer_replace(inf, inf->pending, inf->npending);
  inf->npending = 0;
  inf->synced = true;
  inf->need_list = false;
  inf->rv_gone = false;
  if (first)
    kcm_v(1, "cache synced kind=\"%s\" objects=%zu resourceVersion=\"%s\"",
          kcm_api_kind_name(inf->opts.kind), inf->objects.len, inf->rv);
  kcm_informer_start_watch(inf);
}

static void on_list(const struct kcm_client_response *resp, void *data) {
  struct kcm_informer *inf = data;
  const char *why = NULL;
  int err;

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
    kcm_informer_start_list(inf);
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
  if (resp->err) {
    kcm_error("list failed kind=\"%s\" err=\"%s: %s\"", kcm_api_kind_name(inf->opts.kind),
              kcm_strerror(resp->err), resp->message);
    kcm_informer_drop_pending(inf);
    inf->need_list = true;
    kcm_informer_backoff(inf, resp->retry_after);
    return;
  }
  err = apply_page(inf, resp->body, resp->body_len, &why);
  if (err) {
    kcm_error("list failed kind=\"%s\" err=\"%s\"", kcm_api_kind_name(inf->opts.kind), why);
    kcm_informer_drop_pending(inf);
    inf->need_list = true;
    kcm_informer_backoff(inf, 0);
    return;
  }
  if (inf->cont)
    send_list(inf);
  else
    list_done(inf);
}

void kcm_informer_drop_pending(struct kcm_informer *inf) {
  size_t i;
  for (i = 0; i < inf->npending; i++)
    kcm_api_unref(inf->pending[i], inf->pool);
  inf->npending = 0;
}

