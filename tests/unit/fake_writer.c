/*
 * A writer that records requests and answers them when the test says.
 */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/client/internal.h"
#include "fake_writer.h"
#include "kcm/error.h"

static int record(struct kcm_writer *w, const struct kcm_write *req, kcm_client_done_cb done,
                  void *data) {
  struct fake_writer *f = w->data;
  struct fake_call *c;
  if (f->refuse)
    return f->refuse;
  if (f->n == FAKE_WRITER_CALLS)
    return KCM_ENOMEM;
  c = &f->calls[f->n++];
  memset(c, 0, sizeof(*c));
  snprintf(c->method, sizeof(c->method), "%s", req->method);
  snprintf(c->path, sizeof(c->path), "%s", req->path);
  c->body = strdup(req->body ? req->body : "");
  c->content_type = req->content_type;
  snprintf(c->origin, sizeof(c->origin), "%s", req->origin ? req->origin : "");
  c->repeatable = req->repeatable;
  c->done = done;
  c->data = data;
  return 0;
}

void fake_writer_init(struct fake_writer *f) {
  memset(f, 0, sizeof(*f));
  f->w.send = record;
  f->w.data = f;
}

void fake_writer_release(struct fake_writer *f) {
  size_t i;
  for (i = 0; i < f->n; i++)
    free(f->calls[i].body);
}

static bool matches(const struct fake_call *c, const char *method, const char *part) {
  bool event = strstr(c->path, "/events") != NULL;
  return !c->answered && !strcmp(c->method, method) && strstr(c->path, part) &&
         (!event || strstr(part, "/events"));
}

int fake_writer_find(const struct fake_writer *f, const char *method, const char *part) {
  size_t i;
  for (i = 0; i < f->n; i++)
    if (matches(&f->calls[i], method, part))
      return (int)i;
  return -1;
}

size_t fake_writer_pending(const struct fake_writer *f, const char *method, const char *part) {
  size_t i, n = 0;
  for (i = 0; i < f->n; i++)
    n += matches(&f->calls[i], method, part);
  return n;
}

static void deliver(struct fake_writer *f, int i, struct kcm_client_response *resp) {
  struct fake_call *c = &f->calls[i];
  if (i < 0 || (size_t)i >= f->n || c->answered) {
    fprintf(stderr, "fake writer: no call %d to answer; calls:\n", i);
    for (size_t k = 0; k < f->n; k++)
      fprintf(stderr, "  %s %s%s\n", f->calls[k].method, f->calls[k].path,
              f->calls[k].answered ? " (answered)" : "");
    abort();
  }
  c->answered = true;
  c->done(resp, c->data);
}

void fake_writer_answer(struct fake_writer *f, int i, long status, const char *body) {
  struct kcm_client_response resp = {0};
  char *message = NULL;
  resp.status = status;
  resp.err = kcm_client_status_error(status);
  resp.body = body ? body : "";
  resp.body_len = strlen(resp.body);
  if (resp.err)
    message = kcm_client_error_message(resp.body, resp.body_len);
  resp.message = message ? message : "";
  deliver(f, i, &resp);
  free(message);
}

void fake_writer_lose(struct fake_writer *f, int i) {
  struct kcm_client_response resp = {0};
  resp.err = KCM_ETIMEOUT;
  resp.body = "";
  resp.message = "context deadline exceeded";
  resp.unanswered = true;
  deliver(f, i, &resp);
}

void fake_writer_events(struct fake_writer *f) {
  int i;
  while ((i = fake_writer_find(f, "POST", "/events")) >= 0 ||
         (i = fake_writer_find(f, "PATCH", "/events")) >= 0) {
    struct json_object *doc = json_tokener_parse(f->calls[i].body), *reason, *message;
    if (f->nevents < 64 && doc && json_object_object_get_ex(doc, "reason", &reason) &&
        json_object_object_get_ex(doc, "message", &message))
      snprintf(f->events[f->nevents++], sizeof(f->events[0]), "%s: %s",
               json_object_get_string(reason), json_object_get_string(message));
    json_object_put(doc);
    fake_writer_answer(f, i, 201, "{}");
  }
}

bool fake_writer_has_event(const struct fake_writer *f, const char *prefix) {
  size_t i;
  for (i = 0; i < f->nevents; i++)
    if (!strncmp(f->events[i], prefix, strlen(prefix)))
      return true;
  return false;
}

const char *fake_status(char *buf, size_t len, long code, const char *reason,
                        const char *message) {
  snprintf(buf, len,
           "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"%s\","
           "\"reason\":\"%s\",\"code\":%ld}",
           message, reason, code);
  return buf;
}
