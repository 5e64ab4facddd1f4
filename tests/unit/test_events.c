/*
 * Tests for the event recorder against the local API server: the Event it
 * posts, one post in flight at a time, the bound on waiting events, and
 * dropping what waits when the client closes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/events.h"
#include "peer.h"
#include "support.h"
#include "../../src/client/internal.h"

struct fixture {
  struct kcm_client_config cfg;
  uv_loop_t loop;
  struct kcm_client *client;
  struct kcm_writer writer;
  struct kcm_events ev;
  char ns[64];
};

static void fixture_init(struct fixture *f) {
  memset(f, 0, sizeof(*f));
  support_connect(&f->loop, &f->cfg, &f->client, "ev", f->ns, sizeof(f->ns));
  kcm_writer_init(&f->writer, f->client, 0);
  kcm_events_init(&f->ev, &f->writer, "replicaset-controller");
}

static void fixture_close(struct fixture *f) {
  kcm_client_close(f->client);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  kcm_events_release(&f->ev);
  uv_loop_close(&f->loop);
  kcm_client_config_release(&f->cfg);
}

static struct kcm_event_object object(const struct fixture *f, const char *name) {
  struct kcm_event_object o = {"ReplicaSet", "apps/v1", f->ns, name, {{0}}, 42};
  memset(o.uid.b, 0xab, sizeof(o.uid.b));
  return o;
}

static bool all_settled(void *arg) {
  const struct kcm_events *ev = arg;
  return !ev->sending && ev->queued == 0;
}

/* The events of the fixture's namespace, as the server holds them. */
static struct json_object *list_events(struct fixture *f) {
  struct support_result r = {0};
  char path[160];
  struct json_object *o;
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", f->ns);
  support_request(&f->loop, f->client, "GET", path, NULL, &r);
  assert_int_equal(r.err, 0);
  o = json_tokener_parse(r.body);
  support_result_free(&r);
  assert_non_null(o);
  return o;
}

/* The one item of a list; the test fails unless there is exactly one. */
static struct json_object *only_item(struct json_object *list) {
  struct json_object *items;
  assert_true(json_object_object_get_ex(list, "items", &items));
  assert_int_equal(json_object_array_length(items), 1);
  return json_object_array_get_idx(items, 0);
}

static const char *field(struct json_object *o, const char *a, const char *b) {
  struct json_object *v;
  if (!json_object_object_get_ex(o, a, &v))
    return "";
  if (b && !json_object_object_get_ex(v, b, &v))
    return "";
  return json_object_get_string(v);
}

static void posts_the_event_upstream_posts(void **state) {
  struct fixture f;
  struct kcm_event_object o;
  struct json_object *list, *e;
  fixture_init(&f);
  o = object(&f, "web-1");
  kcm_events_record(&f.ev, &o, false, "SuccessfulCreate", "Created pod: %s", "web-1-abcde");
  assert_true(support_run_until(&f.loop, all_settled, &f.ev, 10000));
  assert_int_equal(f.ev.sent, 1);
  list = list_events(&f);
  e = only_item(list);
  assert_string_equal(field(e, "reason", NULL), "SuccessfulCreate");
  assert_string_equal(field(e, "message", NULL), "Created pod: web-1-abcde");
  assert_string_equal(field(e, "type", NULL), "Normal");
  assert_string_equal(field(e, "source", "component"), "replicaset-controller");
  assert_string_equal(field(e, "involvedObject", "kind"), "ReplicaSet");
  assert_string_equal(field(e, "involvedObject", "name"), "web-1");
  assert_string_equal(field(e, "involvedObject", "resourceVersion"), "42");
  assert_string_equal(field(e, "count", NULL), "1");
  assert_string_equal(field(e, "firstTimestamp", NULL), field(e, "lastTimestamp", NULL));
  assert_int_equal(strncmp(field(e, "metadata", "name"), "web-1.", 6), 0);
  json_object_put(list);
  fixture_close(&f);
}

/* A post the server leaves unanswered is tried again, until it is posted;
 * one the server refuses is not. */
static void unanswered_posts_are_tried_again(void **state) {
  struct fixture f;
  struct kcm_event_object o;
  struct json_object *list;
  char rule[256];
  fixture_init(&f);
  f.ev.retry_ms = 50;
  snprintf(rule, sizeof(rule),
           "{\"rules\":[{\"verb\":\"create\",\"resource\":\"events\",\"namespace\":\"%s\","
           "\"close\":true,\"count\":3}]}",
           f.ns);
  support_faults(&f.loop, f.client, rule);
  o = object(&f, "web-1");
  kcm_events_record(&f.ev, &o, false, "SuccessfulCreate", "Created pod: %s", "web-1-abcde");
  assert_true(support_run_until(&f.loop, all_settled, &f.ev, 10000));
  assert_int_equal(f.ev.sent, 1);
  assert_int_equal(f.ev.failed, 0);
  list = list_events(&f);
  assert_string_equal(field(only_item(list), "message", NULL), "Created pod: web-1-abcde");
  json_object_put(list);
  /* Refused: given up at once. */
  snprintf(rule, sizeof(rule),
           "{\"rules\":[{\"verb\":\"create\",\"resource\":\"events\",\"namespace\":\"%s\","
           "\"code\":400}]}",
           f.ns);
  support_faults(&f.loop, f.client, rule);
  kcm_events_record(&f.ev, &o, true, "FailedCreate", "Error creating: %s", "quota");
  assert_true(support_run_until(&f.loop, all_settled, &f.ev, 10000));
  assert_int_equal(f.ev.sent, 1);
  assert_int_equal(f.ev.failed, 1);
  support_faults(&f.loop, f.client, "{\"clear\":true}");
  fixture_close(&f);
}

/* Quotes, backslashes and control bytes in a message reach the server
 * intact; so does a Warning. */
static void messages_keep_every_character(void **state) {
  static const char msg[] = "Error creating: \"x\" is invalid:\n\tpath C:\\dir \x01 caf\xc3\xa9";
  struct fixture f;
  struct kcm_event_object o;
  struct json_object *list, *e;
  fixture_init(&f);
  o = object(&f, "web-2");
  kcm_events_record(&f.ev, &o, true, "FailedCreate", "%s", msg);
  assert_true(support_run_until(&f.loop, all_settled, &f.ev, 10000));
  assert_int_equal(f.ev.sent, 1);
  list = list_events(&f);
  e = only_item(list);
  assert_string_equal(field(e, "message", NULL), msg);
  assert_string_equal(field(e, "type", NULL), "Warning");
  json_object_put(list);
  fixture_close(&f);
}

static void sends_one_at_a_time_and_bounds_the_queue(void **state) {
  struct fixture f;
  struct kcm_event_object o;
  struct json_object *list, *items;
  int i;
  fixture_init(&f);
  f.ev.max_queued = 3;
  o = object(&f, "web-2");
  for (i = 0; i < 6; i++)
    kcm_events_record(&f.ev, &o, true, "FailedCreate", "Error creating: %d", i);
  /* One is on its way, three wait, two did not fit. */
  assert_true(f.ev.sending);
  assert_int_equal(f.ev.queued, 3);
  assert_int_equal(f.ev.dropped, 2);
  assert_true(support_run_until(&f.loop, all_settled, &f.ev, 10000));
  assert_int_equal(f.ev.sent, 4);
  assert_int_equal(f.ev.failed, 0);
  list = list_events(&f);
  assert_true(json_object_object_get_ex(list, "items", &items));
  assert_int_equal(json_object_array_length(items), 4);
  assert_string_equal(field(json_object_array_get_idx(items, 0), "type", NULL), "Warning");
  json_object_put(list);
  {
    const struct kcm_events *ev[] = {&f.ev};
    const char *names[] = {"replicaset"};
    struct kcm_buf m = KCM_BUF_INIT(1 << 16);
    assert_int_equal(kcm_events_metrics(ev, names, 1, &m), 0);
    assert_non_null(strstr(m.data, "# TYPE kcm_events_total counter\n"));
    assert_non_null(strstr(m.data, "kcm_events_total{controller=\"replicaset\",outcome=\"sent\"} 4\n"));
    assert_non_null(
        strstr(m.data, "kcm_events_total{controller=\"replicaset\",outcome=\"dropped\"} 2\n"));
    assert_non_null(
        strstr(m.data, "kcm_events_total{controller=\"replicaset\",outcome=\"failed\"} 0\n"));
    kcm_buf_release(&m);
  }
  fixture_close(&f);
}

/* Refused because its namespace is gone: the events waiting for that
 * namespace are dropped unsent, the others are posted. */
static void a_gone_namespace_drops_its_waiting_events(void **state) {
  struct fixture f;
  struct kcm_event_object gone, here;
  uint64_t before;
  int i;
  fixture_init(&f);
  gone = object(&f, "web-4");
  gone.ns = "no-such-namespace";
  here = object(&f, "web-4");
  before = kcm_client_stats(f.client)->requests;
  for (i = 0; i < 5; i++) {
    kcm_events_record(&f.ev, &gone, false, "SuccessfulCreate", "Created pod: %d", i);
    if (i % 2)
      kcm_events_record(&f.ev, &here, false, "SuccessfulCreate", "Created pod: %d", i);
  }
  assert_true(support_run_until(&f.loop, all_settled, &f.ev, 10000));
  assert_int_equal(f.ev.failed, 5);
  assert_int_equal(f.ev.sent, 2);
  assert_int_equal(kcm_client_stats(f.client)->requests - before, 3);
  fixture_close(&f);
}

static void closing_drops_what_waits(void **state) {
  struct fixture f;
  struct kcm_event_object o;
  int i;
  fixture_init(&f);
  o = object(&f, "web-3");
  for (i = 0; i < 5; i++)
    kcm_events_record(&f.ev, &o, false, "SuccessfulDelete", "Deleted pod: %d", i);
  assert_int_equal(f.ev.queued, 4);
  kcm_client_close(f.client);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  /* The one in flight was canceled, the waiting ones never sent; nothing
   * is left allocated (the sanitizer build checks). */
  assert_false(f.ev.sending);
  assert_int_equal(f.ev.queued, 0);
  assert_null(f.ev.head);
  assert_int_equal(f.ev.sent + f.ev.failed, 1);
  assert_int_equal(f.ev.dropped, 4);
  kcm_events_release(&f.ev);
  uv_loop_close(&f.loop);
  kcm_client_config_release(&f.cfg);
}

/* --- the correlator ----------------------------------------------------------------------- */

#define MIN_MS 60000ULL

static struct kcm_event_fields fields(const char *object, const char *reason,
                                      const char *message) {
  struct kcm_event_fields f = {"replicaset-controller", "ReplicaSet", "ns", object, "u-1",
                               "apps/v1", "Normal", reason, message, 0xabc};
  return f;
}

static struct kcm_event_outcome correlate(struct kcm_event_correlator *k, const char *object,
                                          const char *reason, const char *message,
                                          uint64_t now_ms) {
  struct kcm_event_fields f = fields(object, reason, message);
  struct kcm_event_outcome out;
  assert_int_equal(kcm_event_correlate(k, &f, now_ms, "2026-11-22T10:00:00Z", &out), 0);
  return out;
}

static void repeats_are_counted(void **state) {
  struct kcm_event_correlator k;
  struct kcm_event_outcome a, b, c;
  kcm_event_correlator_init(&k);
  a = correlate(&k, "web", "SuccessfulCreate", "Created pod: p1", 1000);
  assert_false(a.repeat || a.aggregated || a.skip);
  assert_int_equal(a.count, 1);
  assert_string_equal(a.name, "web.abc");
  b = correlate(&k, "web", "SuccessfulCreate", "Created pod: p1", 2000);
  c = correlate(&k, "web", "SuccessfulCreate", "Created pod: p1", 3000);
  assert_true(b.repeat && c.repeat);
  assert_int_equal(c.count, 3);
  assert_string_equal(c.name, "web.abc");
  assert_string_equal(c.first, a.first);
  /* Another object, reason or type is another event. */
  assert_false(correlate(&k, "api", "SuccessfulCreate", "Created pod: p1", 3000).repeat);
  assert_false(correlate(&k, "web", "SuccessfulDelete", "Created pod: p1", 3000).repeat);
  kcm_event_correlator_release(&k);
}

static void similar_events_are_combined(void **state) {
  struct kcm_event_correlator k;
  struct kcm_event_outcome o;
  char msg[64];
  int i;
  kcm_event_correlator_init(&k);
  /* Nine messages go out as they are; the tenth starts the aggregate. */
  for (i = 1; i <= 9; i++) {
    snprintf(msg, sizeof(msg), "Created pod: p%d", i);
    o = correlate(&k, "web", "SuccessfulCreate", msg, 1000 + (uint64_t)i);
    assert_false(o.aggregated);
  }
  o = correlate(&k, "web", "SuccessfulCreate", "Created pod: p10", 2000);
  assert_true(o.aggregated);
  assert_false(o.repeat);
  assert_int_equal(o.count, 1);
  /* Further new messages patch that aggregate. */
  o = correlate(&k, "web", "SuccessfulCreate", "Created pod: p11", 3000);
  assert_true(o.aggregated && o.repeat);
  assert_int_equal(o.count, 2);
  /* Ten minutes of quiet start afresh. */
  o = correlate(&k, "web", "SuccessfulCreate", "Created pod: p12", 3000 + 10 * MIN_MS + 1);
  assert_false(o.aggregated);
  kcm_event_correlator_release(&k);
}

static void spam_is_limited_per_object(void **state) {
  struct kcm_event_correlator k;
  int i, sent = 0;
  kcm_event_correlator_init(&k);
  for (i = 0; i < 40; i++)
    sent += !correlate(&k, "web", "FailedCreate", "Error creating: quota", 1000).skip;
  assert_int_equal(sent, 25);
  /* Another object has its own budget. */
  assert_false(correlate(&k, "api", "FailedCreate", "Error creating: quota", 1000).skip);
  /* One more every five minutes. */
  assert_true(correlate(&k, "web", "FailedCreate", "Error creating: quota", 1000 + 4 * MIN_MS)
                  .skip);
  assert_false(correlate(&k, "web", "FailedCreate", "Error creating: quota", 1000 + 5 * MIN_MS)
                   .skip);
  assert_true(correlate(&k, "web", "FailedCreate", "Error creating: quota", 1000 + 5 * MIN_MS)
                  .skip);
  kcm_event_correlator_release(&k);
}

static void caches_are_bounded(void **state) {
  struct kcm_event_correlator k;
  char object[32];
  int i;
  kcm_event_correlator_init(&k);
  for (i = 0; i < 5000; i++) {
    snprintf(object, sizeof(object), "rs-%d", i);
    correlate(&k, object, "SuccessfulCreate", "Created pod: p", 1000);
  }
  assert_int_equal(k.log.map.len, 4096);
  assert_int_equal(k.spam.map.len, 4096);
  /* The oldest were forgotten: their repeat is a new event again. */
  assert_false(correlate(&k, "rs-0", "SuccessfulCreate", "Created pod: p", 2000).repeat);
  assert_true(correlate(&k, "rs-4999", "SuccessfulCreate", "Created pod: p", 2000).repeat);
  kcm_event_correlator_release(&k);
}

static void repeats_patch_the_server_event(void **state) {
  struct fixture f;
  struct kcm_event_object o;
  struct json_object *list, *e;
  int i;
  fixture_init(&f);
  o = object(&f, "web-4");
  for (i = 0; i < 3; i++) {
    kcm_events_record(&f.ev, &o, true, "FailedCreate", "Error creating: quota");
    assert_true(support_run_until(&f.loop, all_settled, &f.ev, 10000));
  }
  assert_int_equal(f.ev.sent, 3);
  list = list_events(&f);
  e = only_item(list);
  assert_string_equal(field(e, "count", NULL), "3");
  assert_string_equal(field(e, "message", NULL), "Error creating: quota");
  json_object_put(list);
  fixture_close(&f);
}

/* Repeats of an event that has not been sent yet are folded into the post
 * that waits: the server ends with the same count, timestamps and message
 * upstream's one request per repeat leaves, for fewer requests. A waiting
 * create takes the latest count; a waiting patch the latest patch. */
static void waiting_repeats_are_folded(void **state) {
  struct fixture f;
  struct kcm_event_object a, b;
  struct json_object *list, *items, *e;
  uint64_t before;
  size_t i, n;
  fixture_init(&f);
  a = object(&f, "web-5");
  b = object(&f, "web-6");
  before = kcm_client_stats(f.client)->requests;
  kcm_events_record(&f.ev, &a, false, "SuccessfulCreate", "Created pod: x"); /* in flight */
  for (i = 0; i < 3; i++) /* a create waiting, then two repeats of it */
    kcm_events_record(&f.ev, &b, true, "FailedCreate", "Error creating: quota");
  assert_int_equal(f.ev.queued, 1);
  assert_true(support_run_until(&f.loop, all_settled, &f.ev, 10000));
  kcm_events_record(&f.ev, &a, false, "SuccessfulCreate", "Created pod: x"); /* a patch, in flight */
  for (i = 0; i < 3; i++) /* a patch waiting, then two more repeats */
    kcm_events_record(&f.ev, &b, true, "FailedCreate", "Error creating: quota");
  assert_int_equal(f.ev.queued, 1);
  assert_true(support_run_until(&f.loop, all_settled, &f.ev, 10000));
  assert_int_equal(kcm_client_stats(f.client)->requests - before, 4);
  assert_int_equal(f.ev.sent, 4);
  assert_int_equal(f.ev.folded, 4);
  list = list_events(&f);
  assert_true(json_object_object_get_ex(list, "items", &items));
  assert_int_equal(json_object_array_length(items), 2);
  for (i = n = 0; i < 2; i++) {
    e = json_object_array_get_idx(items, i);
    if (!strcmp(field(e, "involvedObject", "name"), "web-6")) {
      assert_string_equal(field(e, "count", NULL), "6");
      assert_string_equal(field(e, "type", NULL), "Warning");
      n++;
    } else {
      assert_string_equal(field(e, "count", NULL), "2");
    }
  }
  assert_int_equal(n, 1);
  json_object_put(list);
  fixture_close(&f);
}

/* Names come from the server: a '?', '#' or blank in an object's name or
 * namespace reaches the URL percent-encoded, so it cannot end the path or
 * start a query; a name holding '/' or '%', or one that is "." or ".."
 * (which the API server gives no object), is not sent but dropped. */
static void names_are_encoded_in_the_path(void **state) {
  static const struct peer_answer created = {"HTTP/1.1 201 Created", "{}"};
  static const char post[] = "POST /api/v1/namespaces/team%20a%3F%23/events HTTP/1.1\r\n";
  static const char patch[] = "PATCH /api/v1/namespaces/team%20a%3F%23/events/web%3Fx%231%20y.";
  struct kcm_client_config cfg = {0};
  struct kcm_client *client;
  struct kcm_writer writer;
  struct kcm_events ev;
  struct peer peer;
  uv_loop_t loop;
  char *head;
  struct kcm_event_object o = {"ReplicaSet", "apps/v1", "team a?#", "web?x#1 y", {{0}}, 42};
  peer_start(&peer, &created, 1);
  cfg.server = strdup(peer.url);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&client, &loop, &cfg), 0);
  kcm_writer_init(&writer, client, 0);
  kcm_events_init(&ev, &writer, "replicaset-controller");
  ev.retry_ms = 1;
  kcm_events_record(&ev, &o, false, "SuccessfulCreate", "Created pod");
  assert_true(support_run_until(&loop, all_settled, &ev, 10000));
  kcm_events_record(&ev, &o, false, "SuccessfulCreate", "Created pod"); /* a repeat: PATCH */
  assert_true(support_run_until(&loop, all_settled, &ev, 10000));
  o.name = "web/../x";
  kcm_events_record(&ev, &o, false, "SuccessfulCreate", "Created pod");
  o.name = "web%2Fx";
  kcm_events_record(&ev, &o, false, "SuccessfulCreate", "Created pod");
  o.name = "web";
  o.ns = "..";
  kcm_events_record(&ev, &o, false, "SuccessfulCreate", "Created pod");
  assert_true(support_run_until(&loop, all_settled, &ev, 10000));
  head = peer_request(&peer, 0);
  if (!head || strncmp(head, post, strlen(post)) != 0)
    fail_msg("sent %.*s", head ? (int)strcspn(head, "\r") : 6, head ? head : "(none)");
  free(head);
  assert_int_equal(ev.sent, 2);
  assert_int_equal(ev.dropped, 3);
  assert_int_equal(peer_count(&peer), 2);
  head = peer_request(&peer, 0);
  if (strncmp(head, post, strlen(post)) != 0)
    fail_msg("sent %.*s", (int)strcspn(head, "\r"), head);
  free(head);
  head = peer_request(&peer, 1);
  if (strncmp(head, patch, strlen(patch)) != 0)
    fail_msg("sent %.*s", (int)strcspn(head, "\r"), head);
  free(head);
  kcm_client_close(client);
  uv_run(&loop, UV_RUN_DEFAULT);
  kcm_events_release(&ev);
  uv_loop_close(&loop);
  kcm_client_config_release(&cfg);
  peer_stop(&peer);
}

static int start_sim(void **state) { return support_start_sim(NULL); }
static int stop_sim(void **state) {
  support_stop_sim();
  return 0;
}

/* The Event and the repeat's patch: every string escaped (quotes,
 * backslashes, control characters, UTF-8 kept), NULL read as "", the
 * members in client-go's order, numbers and null where the API has them. */
static void bodies_are_escaped_json(void **state) {
  static const char odd[] = "a \"quoted\" \\ back\nslash\t\x01\x1f caf\xc3\xa9 </x>";
  static const char *const keys[] = {"metadata", "involvedObject", "reason", "message",
                                     "source", "firstTimestamp", "lastTimestamp", "count",
                                     "type", "eventTime", "reportingComponent",
                                     "reportingInstance"};
  struct kcm_event_object o = {"ReplicaSet", "apps/v1", "ns", odd, {{0}}, 18446744073709551615ULL};
  struct kcm_event_outcome out = {false, false, true, 7, "2026-11-22T06:00:00Z", "ev.1"};
  struct json_object *doc, *v;
  struct json_object_iterator it, end;
  char *body, *patch;
  size_t i = 0;
  (void)state;
  memset(o.uid.b, 0xab, sizeof(o.uid.b));

  assert_int_equal(kcm_events_bodies("c\"omp", &o, true, NULL, odd, &out, "2026-11-22T06:00:05Z",
                                     &body, &patch),
                   0);
  assert_non_null(doc = json_tokener_parse(body));
  it = json_object_iter_begin(doc);
  end = json_object_iter_end(doc);
  for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it), i++) {
    assert_true(i < sizeof(keys) / sizeof(keys[0]));
    assert_string_equal(json_object_iter_peek_name(&it), keys[i]);
  }
  assert_int_equal(i, sizeof(keys) / sizeof(keys[0]));
  assert_string_equal(field(doc, "metadata", "name"), "ev.1");
  assert_string_equal(field(doc, "metadata", "namespace"), "ns");
  assert_string_equal(field(doc, "involvedObject", "name"), odd);
  assert_string_equal(field(doc, "involvedObject", "uid"),
                      "abababab-abab-abab-abab-abababababab");
  assert_string_equal(field(doc, "involvedObject", "resourceVersion"), "18446744073709551615");
  assert_string_equal(field(doc, "reason", NULL), "");
  /* as client-go since 1.28 reports it: the source's component; no host */
  assert_string_equal(field(doc, "reportingComponent", NULL), "c\"omp");
  assert_string_equal(field(doc, "reportingInstance", NULL), "");
  assert_string_equal(field(doc, "message", NULL), odd);
  assert_string_equal(field(doc, "source", "component"), "c\"omp");
  assert_string_equal(field(doc, "firstTimestamp", NULL), "2026-11-22T06:00:00Z");
  assert_string_equal(field(doc, "lastTimestamp", NULL), "2026-11-22T06:00:05Z");
  assert_string_equal(field(doc, "type", NULL), "Warning");
  assert_true(json_object_object_get_ex(doc, "count", &v) && json_object_is_type(v, json_type_int));
  assert_int_equal(json_object_get_int(v), 7);
  assert_true(json_object_object_get_ex(doc, "eventTime", &v) && v == NULL);
  json_object_put(doc);

  assert_non_null(doc = json_tokener_parse(patch));
  assert_int_equal(json_object_object_length(doc), 3);
  assert_true(json_object_object_get_ex(doc, "count", &v) && json_object_get_int(v) == 7);
  assert_string_equal(field(doc, "lastTimestamp", NULL), "2026-11-22T06:00:05Z");
  assert_string_equal(field(doc, "message", NULL), odd);
  json_object_put(doc);
  free(body);
  free(patch);

  assert_int_equal(
      kcm_events_bodies("c", &o, false, "R", "m", &out, "2026-11-22T06:00:05Z", &body, NULL), 0);
  assert_non_null(doc = json_tokener_parse(body));
  assert_string_equal(field(doc, "type", NULL), "Normal");
  assert_string_equal(field(doc, "reason", NULL), "R");
  json_object_put(doc);
  free(body);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(posts_the_event_upstream_posts),
      cmocka_unit_test(unanswered_posts_are_tried_again),
      cmocka_unit_test(messages_keep_every_character),
      cmocka_unit_test(sends_one_at_a_time_and_bounds_the_queue),
      cmocka_unit_test(closing_drops_what_waits),
      cmocka_unit_test(a_gone_namespace_drops_its_waiting_events),
      cmocka_unit_test(repeats_patch_the_server_event),
      cmocka_unit_test(waiting_repeats_are_folded),
  };
  const struct CMUnitTest pure[] = {
      cmocka_unit_test(bodies_are_escaped_json),
      cmocka_unit_test(repeats_are_counted),
      cmocka_unit_test(similar_events_are_combined),
      cmocka_unit_test(spam_is_limited_per_object),
      cmocka_unit_test(caches_are_bounded),
      cmocka_unit_test(names_are_encoded_in_the_path),
  };
  int failed = cmocka_run_group_tests(pure, NULL, NULL);
  return failed + cmocka_run_group_tests(tests, start_sim, stop_sim);
}
