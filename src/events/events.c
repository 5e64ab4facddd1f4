/* events — posting core/v1 Events; see include/kcm/events.h. */
#include "kcm/events.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcm/error.h"
#include "kcm/jsonw.h"
#include "kcm/log.h"
#include "kcm/metrics.h"

#define DEFAULT_MAX_QUEUED 1000 /* client-go's maxQueuedEvents */
#define DEFAULT_RETRY_MS 10000  /* client-go's sleep between tries of one event */
#define MAX_TRIES 12            /* client-go's maxTriesPerEvent */

struct kcm_event_post {
  struct kcm_event_post *next;
  struct kcm_events *ev;
  char *body;  /* the whole Event, to create it */
  char *patch; /* or, for a repeat, its count, lastTimestamp and message */
  char *path;  /* the Event's own path; its collection's is path[0..dir_len) */
  size_t dir_len;
  char what[160];
  unsigned tries;    /* sends that failed in transport */
  uint64_t delay_ms; /* before the next send */
};

static const struct kcm_map_type post_type = KCM_MAP_STRING_KEYED(struct kcm_event_post, path);

void kcm_events_init(struct kcm_events *ev, struct kcm_writer *writer, const char *component) {
  memset(ev, 0, sizeof(*ev));
  kcm_map_init(&ev->waiting, &post_type);
  ev->writer = writer;
  snprintf(ev->component, sizeof(ev->component), "%s", component);
  ev->max_queued = DEFAULT_MAX_QUEUED;
  ev->retry_ms = DEFAULT_RETRY_MS;
  kcm_event_correlator_init(&ev->correlator);
}

void kcm_events_release(struct kcm_events *ev) {
  kcm_event_correlator_release(&ev->correlator);
  kcm_map_release(&ev->waiting);
}

void kcm_events_object_of(const struct kcm_object *o, struct kcm_event_object *out) {
  out->kind = kcm_api_kind_name((enum kcm_kind)o->kind);
  out->api_version = kcm_api_kind(o->kind)->api_version;
  out->ns = o->ns;
  out->name = o->name;
  out->uid = o->uid;
  out->rv = o->rv;
}

static void free_post(struct kcm_event_post *p) {
  free(p->body);
  free(p->patch);
  free(p->path);
  free(p);
}

static void on_posted(const struct kcm_client_response *resp, void *data);

/* p leaves the queue: it is no longer the post a repeat folds into. */
static void unindex(struct kcm_events *ev, struct kcm_event_post *p) {
  if (kcm_map_get(&ev->waiting, p->path) == p)
    kcm_map_remove(&ev->waiting, p->path);
}

/* Send queued posts, one at a time, as client-go's single event writer
 * does: a controller's own requests are never queued behind a burst of its
 * events. A post the client refuses (it is closing) is dropped. */
static void send_next(struct kcm_events *ev) {
  while (!ev->sending && ev->head) {
    struct kcm_event_post *p = ev->head;
    struct kcm_write req = {0};
    ev->head = p->next;
    if (!ev->head)
      ev->tail = NULL;
    ev->queued--;
    unindex(ev, p);
    req.method = p->patch ? "PATCH" : "POST";
    snprintf(req.path, sizeof(req.path), "%.*s", (int)(p->patch ? strlen(p->path) : p->dir_len),
             p->path);
    req.body = p->patch ? p->patch : p->body;
    req.content_type = p->patch ? "application/strategic-merge-patch+json" : NULL;
    req.delay_ms = p->delay_ms;
    if (kcm_writer_send(ev->writer, &req, on_posted, p) == 0) {
      ev->sending = true;
    } else {
      ev->dropped++;
      free_post(p);
    }
  }
}

/* Put p back at the head of the queue, to be sent next. A newer post for
 * the same Event, if one waits, stays the one repeats fold into. */
static void resend(struct kcm_events *ev, struct kcm_event_post *p) {
  if (!kcm_map_get(&ev->waiting, p->path))
    (void)kcm_map_put(&ev->waiting, p->path, p, NULL); /* ENOMEM: repeats queue behind */
  p->next = ev->head;
  ev->head = p;
  if (!ev->tail)
    ev->tail = p;
  ev->queued++;
  send_next(ev);
}

/* Did the server refuse the post because its namespace is gone or going?
 * Then every event waiting for that namespace would be refused too. */
static bool namespace_gone(const struct kcm_client_response *resp,
                           const struct kcm_event_post *p) {
  return (resp->err == KCM_ENOTFOUND && !p->patch) ||
         kcm_client_namespace_terminating(resp);
}

/* Drop the waiting posts to the collection of `to` (one namespace's
 * events); returns how many. */
static size_t drop_path(struct kcm_events *ev, const struct kcm_event_post *to) {
  struct kcm_event_post **pp = &ev->head, *p;
  size_t n = 0;
  ev->tail = NULL;
  while ((p = *pp)) {
    if (p->dir_len == to->dir_len && memcmp(p->path, to->path, p->dir_len) == 0) {
      *pp = p->next;
      unindex(ev, p);
      free_post(p);
      n++;
    } else {
      ev->tail = p;
      pp = &p->next;
    }
  }
  ev->queued -= n;
  return n;
}

static void on_posted(const struct kcm_client_response *resp, void *data) {
  struct kcm_event_post *p = data;
  struct kcm_events *ev = p->ev;
  ev->sending = false;
  p->delay_ms = 0;
  if (resp->err == KCM_ENOTFOUND && p->patch) {
    /* The earlier event is gone (events expire): create it anew. */
    free(p->patch);
    p->patch = NULL;
    resend(ev, p);
    return;
  }
  if ((resp->err == KCM_ENETWORK || resp->err == KCM_ETIMEOUT) && ++p->tries < MAX_TRIES) {
    /* Not answered (the server restarting, say): as client-go, try again
     * after a while, the first wait random so that clients spread out,
     * holding back the events behind it meanwhile. */
    p->delay_ms = p->tries == 1 ? (uint64_t)rand() % (ev->retry_ms + 1) : ev->retry_ms;
    kcm_v(2, "could not post an event; retrying event=\"%s\" err=\"%s: %s\" in=\"%llums\"",
          p->what, kcm_strerror(resp->err), resp->message, (unsigned long long)p->delay_ms);
    resend(ev, p);
    return;
  }
  if (resp->err && namespace_gone(resp, p)) {
    size_t n = drop_path(ev, p);
    ev->failed += 1 + n;
    kcm_v(2, "could not post an event; dropping the others of its namespace event=\"%s\" "
          "err=\"%s: %s\" dropped=%zu", p->what, kcm_strerror(resp->err), resp->message, n);
  } else if (resp->err) {
    ev->failed++;
    if (resp->err != KCM_ECANCELED)
      kcm_v(2, "could not post an event event=\"%s\" err=\"%s: %s\"", p->what,
            kcm_strerror(resp->err), resp->message);
  } else {
    ev->sent++;
  }
  free_post(p);
  send_next(ev);
}

/* Fold the repeat p into the post still waiting for its Event, if any:
 * a waiting create takes p's whole Event (the latest count, lastTimestamp
 * and message), a waiting patch p's patch. Frees p and returns true when
 * folded. */
static bool fold(struct kcm_events *ev, struct kcm_event_post *p) {
  struct kcm_event_post *w = kcm_map_get(&ev->waiting, p->path);
  char *swap;
  if (!w)
    return false;
  swap = w->body;
  w->body = p->body;
  p->body = swap;
  if (w->patch) {
    swap = w->patch;
    w->patch = p->patch;
    p->patch = swap;
  }
  memcpy(w->what, p->what, sizeof(w->what));
  free_post(p);
  ev->folded++;
  return true;
}

int kcm_events_bodies(const char *component, const struct kcm_event_object *obj, bool warning,
                      const char *reason, const char *message,
                      const struct kcm_event_outcome *out, const char *when, char **body,
                      char **patch) {
  struct kcm_buf b = KCM_BUF_INIT(KCM_API_OBJECT_MAX), p = KCM_BUF_INIT(KCM_API_OBJECT_MAX);
  struct kcm_jsonw w;
  int err;

  kcm_jsonw_start(&w, &b);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_object(&w, "metadata");
  kcm_jsonw_key_string(&w, "name", out->name);
  kcm_jsonw_key_string(&w, "namespace", obj->ns);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_object(&w, "involvedObject");
  kcm_jsonw_key_string(&w, "kind", obj->kind);
  kcm_jsonw_key_string(&w, "namespace", obj->ns);
  kcm_jsonw_key_string(&w, "name", obj->name);
  kcm_jsonw_key(&w, "uid");
  kcm_api_write_uid(&w, &obj->uid);
  kcm_jsonw_key_string(&w, "apiVersion", obj->api_version);
  kcm_jsonw_key(&w, "resourceVersion");
  kcm_jsonw_uint_string(&w, obj->rv);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_string(&w, "reason", reason);
  kcm_jsonw_key_string(&w, "message", message);
  kcm_jsonw_key_object(&w, "source");
  kcm_jsonw_key_string(&w, "component", component);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_string(&w, "firstTimestamp", out->first);
  kcm_jsonw_key_string(&w, "lastTimestamp", when);
  kcm_jsonw_key_int(&w, "count", (int32_t)out->count);
  kcm_jsonw_key_string(&w, "type", warning ? "Warning" : "Normal");
  kcm_jsonw_key(&w, "eventTime");
  kcm_jsonw_null(&w);
  kcm_jsonw_key_string(&w, "reportingComponent", component); /* as client-go has since 1.28 */
  kcm_jsonw_key_string(&w, "reportingInstance", "");
  kcm_jsonw_end(&w);
  err = kcm_jsonw_finish(&w);
  if (!err && patch) {
    kcm_jsonw_start(&w, &p);
    kcm_jsonw_object(&w);
    kcm_jsonw_key_int(&w, "count", (int32_t)out->count);
    kcm_jsonw_key_string(&w, "lastTimestamp", when);
    kcm_jsonw_key_string(&w, "message", message);
    kcm_jsonw_end(&w);
    err = kcm_jsonw_finish(&w);
  }
  *body = err ? NULL : kcm_buf_take(&b);
  if (patch)
    *patch = err ? NULL : kcm_buf_take(&p);
  kcm_buf_release(&b);
  kcm_buf_release(&p);
  if (!err && *body && (!patch || *patch))
    return 0;
  free(*body);
  if (patch) {
    free(*patch);
    *patch = NULL;
  }
  *body = NULL;
  return err ? err : KCM_ENOMEM;
}

void kcm_events_record(struct kcm_events *ev, const struct kcm_event_object *obj, bool warning,
                       const char *reason, const char *fmt, ...) {
  static const char combined[] = "(combined from similar events): ";
  struct timespec ts, mono;
  char when[32], uid[37], path[KCM_CLIENT_PATH_MAX], *message = NULL, *text = NULL;
  struct kcm_event_fields fields;
  struct kcm_event_outcome out;
  struct kcm_event_post *p;
  va_list ap;

  va_start(ap, fmt);
  if (vasprintf(&message, fmt, ap) < 0)
    message = NULL;
  va_end(ap);
  kcm_v(4, "event object=\"%s/%s\" kind=\"%s\" type=\"%s\" reason=\"%s\" message=\"%s\"",
        obj->ns, obj->name, obj->kind, warning ? "Warning" : "Normal", reason,
        message ? message : "");
  if (ev->queued >= ev->max_queued || !message) {
    ev->dropped++;
    free(message);
    return;
  }
  clock_gettime(CLOCK_REALTIME, &ts);
  kcm_api_format_time(ts.tv_sec, when, sizeof(when));
  kcm_api_format_uid(&obj->uid, uid, sizeof(uid));
  fields = (struct kcm_event_fields){
      ev->component, obj->kind, obj->ns, obj->name, uid, obj->api_version,
      warning ? "Warning" : "Normal", reason, message,
      (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  if (kcm_event_correlate(&ev->correlator, &fields,
                          (uint64_t)mono.tv_sec * 1000 + (uint64_t)mono.tv_nsec / 1000000, when,
                          &out) ||
      out.skip || (out.aggregated && asprintf(&text, "%s%s", combined, message) < 0)) {
    if (out.skip)
      ev->skipped++;
    else
      ev->dropped++;
    free(message);
    return;
  }
  if (text) {
    free(message);
    message = text;
  }
  if (kcm_client_path(path, sizeof(path), "/api/v1", obj->ns, "events", out.name, NULL)) {
    kcm_warn("cannot post an event event=\"%s %s/%s\" err=\"%s\"", reason, obj->ns, obj->name,
             path);
    ev->dropped++;
    free(message);
    return;
  }

  p = calloc(1, sizeof(*p));
  if (!p || !(p->path = strdup(path)) ||
      kcm_events_bodies(ev->component, obj, warning, reason, message, &out, when, &p->body,
                        out.repeat ? &p->patch : NULL)) {
    ev->dropped++;
    if (p)
      free_post(p);
    free(message);
    return;
  }
  p->ev = ev;
  p->dir_len = (size_t)(strrchr(p->path, '/') - p->path);
  snprintf(p->what, sizeof(p->what), "%s %s/%s", reason, obj->ns, obj->name);
  if (out.repeat && fold(ev, p)) {
    free(message);
    return;
  }
  if (!kcm_map_get(&ev->waiting, p->path))
    (void)kcm_map_put(&ev->waiting, p->path, p, NULL); /* ENOMEM: not folded into */
  if (ev->tail)
    ev->tail->next = p;
  else
    ev->head = p;
  ev->tail = p;
  ev->queued++;
  send_next(ev);
  free(message);
}

int kcm_events_metrics(const struct kcm_events *const *ev, const char *const *controller,
                       size_t n, struct kcm_buf *out) {
  static const char name[] = "kcm_events_total";
  size_t i, k;
  int err = kcm_metrics_family(out, name, "counter",
                               "Events a controller recorded, by outcome: sent, failed (refused, "
                               "or unanswered after every try), dropped (the queue full, or not "
                               "sent at all), skipped (the spam filter) or folded (a repeat "
                               "merged into its event's waiting post).");
  for (i = 0; i < n && !err; i++) {
    const struct {
      const char *outcome;
      uint64_t value;
    } rows[] = {{"sent", ev[i]->sent},
                {"failed", ev[i]->failed},
                {"dropped", ev[i]->dropped},
                {"skipped", ev[i]->skipped},
                {"folded", ev[i]->folded}};
    for (k = 0; k < sizeof(rows) / sizeof(rows[0]) && !err; k++) {
      const char *pairs[] = {"controller", controller[i], "outcome", rows[k].outcome, NULL};
      char labels[200];
      err = kcm_metrics_labels(labels, sizeof(labels), pairs);
      err = err ? err : kcm_metrics_sample(out, name, labels, (double)rows[k].value);
    }
  }
  return err;
}
