/*
 * event — reading a watch stream's events, one line each as framing.c
 * hands them out: ADDED, MODIFIED and DELETED go to the cache (or, while
 * the watch streams a list, to the objects list.c gathers), a BOOKMARK
 * moves the resourceVersion (and may end that list), an ERROR stops the
 * watch (to relist on 410).
 * A protobuf watch (pods, when asked for) holds one WatchEvent message per
 * frame instead of a JSON line, its object in the protobuf envelope.
 * Events that are not events are logged, counted and skipped; an object
 * that cannot be read keeps its last copy (kcm_informer_unreadable).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "internal.h"
#include "kcm/json.h"
#include "kcm/log.h"
#include "kcm/pb.h"

/* An ERROR event's Status (code and message): stop the watch, to relist
 * on 410. */
static int watch_stopped(struct kcm_informer *inf, int64_t c, const char *m) {
  if (c == 410) {
    kcm_v(1, "watch expired; relisting kind=\"%s\" message=\"%s\"",
          kcm_api_kind_name(inf->opts.kind), m);
    inf->stop_reason = KCM_INFORMER_STOP_EXPIRED;
  } else {
    kcm_error("watch error kind=\"%s\" code=%lld message=\"%s\"",
              kcm_api_kind_name(inf->opts.kind), (long long)c, m);
    inf->stop_reason = KCM_INFORMER_STOP_ERROR;
  }
  return 1;
}

static int watch_error(struct kcm_informer *inf, const char *text, size_t len) {
  struct json_object *obj = kcm_json_tree(text, len), *code, *msg;
  const char *m = "";
  int64_t c = 0;
  int rc;
  /* A Status code is an integer (json-c would also read "410" or 410.9). */
  if (json_object_object_get_ex(obj, "code", &code) && json_object_is_type(code, json_type_int))
    c = json_object_get_int64(code);
  if (json_object_object_get_ex(obj, "message", &msg) && json_object_is_type(msg, json_type_string))
    m = json_object_get_string(msg);
  rc = watch_stopped(inf, c, m);
  json_object_put(obj);
  return rc;
}

/* The same for a Status in protobuf: message 3, code 6. */
static int watch_error_pb(struct kcm_informer *inf, const char *obj, size_t len) {
  const uint8_t *kind, *raw = NULL, *s;
  size_t kind_len, raw_len = 0, n;
  const char *why;
  char *m = NULL;
  uint64_t c = 0;
  struct kcm_pb r;
  int rc;
  if (kcm_pb_unwrap((const uint8_t *)obj, len, &kind, &kind_len, &raw, &raw_len, &why)) {
    kcm_pb_start(&r, raw, raw_len);
    while (kcm_pb_next(&r)) {
      if (r.field == 3 && kcm_pb_bytes(&r, &s, &n)) {
        free(m);
        m = strndup((const char *)s, n);
      } else if (r.field == 6 && kcm_pb_varint(&r, &c)) {
        c = (uint64_t)(int64_t)(int32_t)c;
      } else if (r.field != 3 && r.field != 6) {
        kcm_pb_skip(&r);
      }
    }
  }
  rc = watch_stopped(inf, (int64_t)c, m ? m : "");
  free(m);
  return rc;
}

#define INITIAL_EVENTS_END "k8s.io/initial-events-end"

/* A protobuf map entry (key 1, value 2) is INITIAL_EVENTS_END: "true". */
static bool pb_end_mark(const uint8_t *p, size_t n) {
  static const char key[] = INITIAL_EVENTS_END;
  const uint8_t *s;
  size_t len;
  bool is_key = false, is_true = false;
  struct kcm_pb r;
  kcm_pb_start(&r, p, n);
  while (kcm_pb_next(&r)) {
    if ((r.field == 1 || r.field == 2) && kcm_pb_bytes(&r, &s, &len)) {
      if (r.field == 1)
        is_key = len == sizeof(key) - 1 && !memcmp(s, key, len);
      else
        is_true = len == 4 && !memcmp(s, "true", 4);
    } else if (r.field != 1 && r.field != 2) {
      kcm_pb_skip(&r);
    }
  }
  return !r.err && is_key && is_true;
}

/* A BOOKMARK's resourceVersion (rv holds 32; "" when unreadable), and
 * whether it ends a stream's initial events. */
static void read_bookmark(struct kcm_informer *inf, const char *obj, size_t len, char *rv,
                          bool *end) {
  static const char *const rv_path[] = {"metadata", "resourceVersion", NULL};
  static const char *const end_path[] = {"metadata", "annotations", INITIAL_EVENTS_END, NULL};
  static const uint32_t meta_path[] = {1, 0};
  struct kcm_json *j = &inf->page;
  const uint8_t *kind, *raw, *p;
  size_t kind_len, raw_len, n;
  const char *why, *s;
  struct kcm_pb r, meta;

  rv[0] = '\0';
  *end = false;
  if (!inf->watch_proto) {
    kcm_json_start(j, obj, len);
    if (kcm_json_find(j, rv_path) && kcm_json_string(j, &s, &n) && n < 32)
      memcpy(rv, s, n + 1);
    kcm_json_start(j, obj, len);
    *end = kcm_json_find(j, end_path) && kcm_json_string(j, &s, &n) && n == 4 &&
           !memcmp(s, "true", 4);
    return;
  }
  if (!kcm_pb_unwrap((const uint8_t *)obj, len, &kind, &kind_len, &raw, &raw_len, &why))
    return;
  kcm_pb_start(&r, raw, raw_len);
  if (!kcm_pb_find(&r, meta_path) || !kcm_pb_bytes(&r, &p, &n))
    return;
  kcm_pb_start(&meta, p, n); /* ObjectMeta: resourceVersion 6, annotations 12 */
  while (kcm_pb_next(&meta)) {
    if ((meta.field == 6 || meta.field == 12) && kcm_pb_bytes(&meta, &p, &n)) {
      if (meta.field == 12)
        *end = *end || pb_end_mark(p, n);
      else if (n < 32 && !memchr(p, '\0', n))
        memcpy(rv, p, n), rv[n] = '\0';
    } else if (meta.field != 6 && meta.field != 12) {
      kcm_pb_skip(&meta);
    }
  }
}

/* A change was skipped, whose cannot be told: any cached copy may be older. */
static void gap(struct kcm_informer *inf) {
  if (inf->streaming)
    inf->list_blind = true;
  else
    inf->blind = true;
}

static void malformed_event(struct kcm_informer *inf, const char *why) {
  inf->stats.decode_errors++;
  gap(inf);
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

/* Whether a changed object o is of a namespace kept; one that is not is
 * dropped, its version still taken as seen (not that of a streamed list's
 * ADDED object, older than the list). */
static bool kept(struct kcm_informer *inf, struct kcm_object *o, const char *type) {
  uint64_t rv = o->rv;
  if (kcm_informer_kept(inf, o))
    return true;
  if (!inf->streaming || strcmp(type, "ADDED"))
    format_rv(inf->rv, rv);
  return false;
}

/* Apply one event whose type and object were read: `o` is its object when
 * decoded already (else it is decoded from obj[0..objlen) here). Returns
 * non-zero to stop the watch. */
static int apply_event(struct kcm_informer *inf, const char *type, const char *obj,
                       size_t objlen, struct kcm_object *o, bool decoded) {

  if (o && !is_change(type)) { /* the type was repeated after the object */
    kcm_api_unref(o, inf->pool);
    o = NULL;
    decoded = false;
  }
  if (!type[0] || !obj) {
    inf->stats.decode_errors++;
    gap(inf);
    kcm_error("skipping a watch event without type and object kind=\"%s\"",
              kcm_api_kind_name(inf->opts.kind));
  } else if (!strcmp(type, "BOOKMARK")) {
    char rv[sizeof(inf->rv)];
    bool end;
    inf->watch_events++;
    inf->stats.bookmarks++;
    read_bookmark(inf, obj, objlen, rv, &end);
    kcm_informer_set_rv(inf, rv);
    if (inf->streaming && end) {
      kcm_informer_stream_done(inf);
      if (inf->need_list) { /* asked for again while it streamed */
        inf->stop_reason = KCM_INFORMER_STOP_EXPIRED;
        return 1;
      }
    }
  } else if (!strcmp(type, "ERROR")) {
    inf->watch_events++;
    return inf->watch_proto ? watch_error_pb(inf, obj, objlen) : watch_error(inf, obj, objlen);
  } else if (is_change(type)) {
    inf->watch_events++;
    inf->stats.events++;
    if (!decoded) {
      struct kcm_informer_bad bad;
      o = inf->watch_proto ? kcm_informer_decode_proto(inf, obj, objlen, false, &bad)
                           : kcm_informer_decode(inf, obj, objlen, &bad);
      if (!o)
        kcm_informer_unreadable(inf, &bad, inf->streaming ? "stream" : "watch", inf->streaming,
                                !strcmp(type, "DELETED"));
    }
    if (o && !kept(inf, o, type))
      o = NULL;
    if (o && inf->streaming) {
      /* A stream's ADDED events carry the objects' own versions, older
       * than its snapshot's: only later events move the version. */
      if (strcmp(type, "ADDED"))
        format_rv(inf->rv, o->rv);
      if (kcm_informer_gather(inf, o, !strcmp(type, "DELETED"))) {
        kcm_error("cannot gather a streamed list kind=\"%s\" err=\"out of memory\"",
                  kcm_api_kind_name(inf->opts.kind));
        inf->stop_reason = KCM_INFORMER_STOP_ERROR;
        return 1;
      }
    } else if (o) {
      format_rv(inf->rv, o->rv);
      if (!strcmp(type, "DELETED")) {
        kcm_informer_delete(inf, o->ns, o->name, o, false);
        kcm_api_unref(o, inf->pool);
      } else {
        /* what this event changed is what differs from the cached copy,
         * unless a change in between could not be read */
        inf->successive =
            !inf->blind && !kcm_informer_keys_has(&inf->unreadable, o->ns, o->name);
        kcm_informer_upsert(inf, o);
        inf->successive = false;
      }
    }
  } else {
    inf->watch_events++;
    inf->stats.decode_errors++;
    gap(inf);
    kcm_error("skipping a watch event of unknown type kind=\"%s\" type=\"%s\"",
              kcm_api_kind_name(inf->opts.kind), type);
  }
  return 0;
}

/* Read and apply the watch event text[0..len) (one line of the stream). Pods
 * are decoded while the event is read, in one pass (in_place); any other
 * kind, or a pod that turns out malformed, is cut out of the event first and
 * decoded on its own. More events after the first on the line are read in
 * turn; anything else after it is reported. Which kinds are read in place
 * their row of the kinds says (decode_at). */
static int read_event(struct kcm_informer *inf, const char *text, size_t len, bool in_place) {
  struct kcm_json *j = &inf->page;
  const char *obj, *s, *why, *rest, *end = text + len;
  size_t objlen, n;
  char type[16];
  struct kcm_object *o;
  struct kcm_api_error e;
  bool decoded;
  int stop;

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
        if (o) { /* a repeated key: the last counts, as Go reads JSON */
          kcm_api_unref(o, inf->pool);
          o = NULL;
          decoded = false;
        }
        obj = j->p;
        if (in_place && is_change(type)) {
          if (kcm_api_kind(inf->opts.kind)->decode_at(j, inf->pool, &o, &e))
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
    gap(inf);
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
  stop = apply_event(inf, type, obj, objlen, o, decoded);
  if (stop)
    return stop; /* an ERROR event: the watch stops */
  if (rest < end) {
    text = rest;
    len = (size_t)(end - rest);
    goto next;
  }
  return 0;
}

/* A protobuf watch event (one frame): WatchEvent{type 1, object 2:
 * RawExtension{raw 1}}. */
static int read_pb_event(struct kcm_informer *inf, const char *frame, size_t len) {
  struct kcm_pb r, ext;
  const uint8_t *s, *obj = NULL;
  size_t n, objlen = 0;
  char type[16] = "";
  kcm_pb_start(&r, frame, len);
  while (kcm_pb_next(&r)) {
    if (r.field == 1 && kcm_pb_bytes(&r, &s, &n)) {
      snprintf(type, sizeof(type), "%s",
               n < sizeof(type) && !memchr(s, '\0', n) ? "" : "(too long)");
      if (!type[0])
        memcpy(type, s, n), type[n] = '\0';
    } else if (r.field == 2 && kcm_pb_bytes(&r, &s, &n)) {
      kcm_pb_start(&ext, s, n);
      while (kcm_pb_next(&ext))
        if (ext.field == 1 ? !kcm_pb_bytes(&ext, &obj, &objlen) : !kcm_pb_skip(&ext))
          break;
      if (ext.err)
        r.err = ext.err;
    } else if (r.field != 1 && r.field != 2) {
      kcm_pb_skip(&r);
    }
  }
  if (r.err) {
    malformed_event(inf, r.err);
    return 0;
  }
  return apply_event(inf, type, (const char *)obj, objlen, NULL, false);
}

int kcm_informer_on_event(const char *text, size_t len, const char *why, void *data) {
  struct kcm_informer *inf = data;
  if (!text) {
    malformed_event(inf, why);
    return 0;
  }
  if (inf->watch_proto)
    return read_pb_event(inf, text, len);
  return read_event(inf, text, len, kcm_api_kind(inf->opts.kind)->decode_at != NULL);
}
