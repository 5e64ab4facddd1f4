/* events — posting core/v1 Events; see include/kcm/events.h. */
#include "kcm/events.h"

#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcm/error.h"
#include "kcm/log.h"

#define DEFAULT_MAX_QUEUED 1000 /* client-go's maxQueuedEvents */

struct kcm_event_post {
  struct kcm_event_post *next;
  struct kcm_events *ev;
  char *body;
  char path[512];
  char what[160];
};

void kcm_events_init(struct kcm_events *ev, struct kcm_client *client, const char *component) {
  memset(ev, 0, sizeof(*ev));
  ev->client = client;
  snprintf(ev->component, sizeof(ev->component), "%s", component);
  ev->max_queued = DEFAULT_MAX_QUEUED;
}

void kcm_events_object_of(const struct kcm_object *o, struct kcm_event_object *out) {
  out->kind = kcm_api_kind_name((enum kcm_kind)o->kind);
  out->api_version = o->kind == KCM_KIND_POD ? "v1" : "apps/v1";
  out->ns = o->ns;
  out->name = o->name;
  out->uid = o->uid;
  out->rv = o->rv;
}

static void free_post(struct kcm_event_post *p) {
  free(p->body);
  free(p);
}

static void on_posted(const struct kcm_client_response *resp, void *data);

/* Send queued posts, one at a time, as client-go's single event writer
 * does: a controller's own requests are never queued behind a burst of its
 * events. A post the client refuses (it is closing) is dropped. */
static void send_next(struct kcm_events *ev) {
  while (!ev->sending && ev->head) {
    struct kcm_event_post *p = ev->head;
    struct kcm_client_request_options o = {0};
    ev->head = p->next;
    if (!ev->head)
      ev->tail = NULL;
    ev->queued--;
    o.method = "POST";
    o.path = p->path;
    o.body = p->body;
    o.body_len = strlen(p->body);
    o.done = on_posted;
    o.data = p;
    o.limiter = ev->limiter;
    if (kcm_client_request(ev->client, &o, NULL) == 0) {
      ev->sending = true;
    } else {
      ev->dropped++;
      free_post(p);
    }
  }
}

static void on_posted(const struct kcm_client_response *resp, void *data) {
  struct kcm_event_post *p = data;
  struct kcm_events *ev = p->ev;
  ev->sending = false;
  if (resp->err) {
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

static json_object *str(const char *s) { return json_object_new_string(s ? s : ""); }

void kcm_events_record(struct kcm_events *ev, const struct kcm_event_object *obj, bool warning,
                       const char *reason, const char *fmt, ...) {
  struct timespec ts;
  char name[400], when[32], uid[37], rv[24], *message = NULL;
  struct json_object *e, *meta, *inv, *src;
  struct kcm_event_post *p;
  const char *body;
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
  snprintf(name, sizeof(name), "%s.%llx", obj->name,
           (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec);
  kcm_api_format_time(ts.tv_sec, when, sizeof(when));
  kcm_api_format_uid(&obj->uid, uid, sizeof(uid));
  snprintf(rv, sizeof(rv), "%llu", (unsigned long long)obj->rv);

  e = json_object_new_object();
  meta = json_object_new_object();
  json_object_object_add(meta, "name", str(name));
  json_object_object_add(meta, "namespace", str(obj->ns));
  json_object_object_add(e, "metadata", meta);
  inv = json_object_new_object();
  json_object_object_add(inv, "kind", str(obj->kind));
  json_object_object_add(inv, "namespace", str(obj->ns));
  json_object_object_add(inv, "name", str(obj->name));
  json_object_object_add(inv, "uid", str(uid));
  json_object_object_add(inv, "apiVersion", str(obj->api_version));
  json_object_object_add(inv, "resourceVersion", str(rv));
  json_object_object_add(e, "involvedObject", inv);
  json_object_object_add(e, "reason", str(reason));
  json_object_object_add(e, "message", str(message));
  src = json_object_new_object();
  json_object_object_add(src, "component", str(ev->component));
  json_object_object_add(e, "source", src);
  json_object_object_add(e, "firstTimestamp", str(when));
  json_object_object_add(e, "lastTimestamp", str(when));
  json_object_object_add(e, "count", json_object_new_int(1));
  json_object_object_add(e, "type", str(warning ? "Warning" : "Normal"));
  json_object_object_add(e, "eventTime", NULL);
  json_object_object_add(e, "reportingComponent", str(""));
  json_object_object_add(e, "reportingInstance", str(""));
  body = json_object_to_json_string_ext(e, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

  p = calloc(1, sizeof(*p));
  if (!p || !(p->body = strdup(body))) {
    ev->dropped++;
    free(p);
    json_object_put(e);
    free(message);
    return;
  }
  p->ev = ev;
  snprintf(p->what, sizeof(p->what), "%s %s/%s", reason, obj->ns, obj->name);
  snprintf(p->path, sizeof(p->path), "/api/v1/namespaces/%s/events", obj->ns);
  if (ev->tail)
    ev->tail->next = p;
  else
    ev->head = p;
  ev->tail = p;
  ev->queued++;
  send_next(ev);
  json_object_put(e);
  free(message);
}
