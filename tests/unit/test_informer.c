/*
 * Tests for the informer: watch-stream framing and list-response splitting
 * at every byte, and list/watch against the local API server with faults
 * injected, checking that the cache converges to the server's state.
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

#include "../../src/informer/framing.h"
#include "../../src/informer/items.h"
#include "../../src/informer/pbitems.h"
#include "kcm/error.h"
#include "kcm/informer.h"
#include "kcm/pb.h"
#include "pbwrite.h"
#include "peer.h"
#include "support.h"
#include "../../src/client/internal.h"

/* --- framing ----------------------------------------------------------------------- */

struct collected {
  char values[16][256];
  int n;
  int errors;
};

/* Values the framer passes on are counted when they are valid JSON, as the
 * informer reads them; reported and invalid ones are errors. */
static int collect(const char *text, size_t len, const char *why, void *data) {
  struct collected *c = data;
  struct kcm_json j;
  bool valid;
  if (!text) {
    assert_non_null(why);
    c->errors++;
    return 0;
  }
  kcm_json_init(&j);
  kcm_json_start(&j, text, len);
  valid = kcm_json_skip(&j) && kcm_json_done(&j);
  kcm_json_release(&j);
  if (!valid) {
    c->errors++;
    return 0;
  }
  if (c->n < 16)
    snprintf(c->values[c->n], sizeof(c->values[0]), "%.*s", (int)len, text);
  c->n++;
  return 0;
}

static const char stream[] =
    "{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"name\":\"a\"},\"x\":[1,2,{\"y\":null}]}}\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"s\":\"line\\nbreak \\\"q\\\" \\u00e9 }{\"}}\n"
    "\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"12\"}}}\n";

static void expect_stream(const struct collected *c) {
  assert_int_equal(c->errors, 0);
  assert_int_equal(c->n, 3);
  assert_non_null(strstr(c->values[0], "\"ADDED\""));
  assert_non_null(strstr(c->values[1], "line\\nbreak"));
  assert_non_null(strstr(c->values[2], "\"resourceVersion\":\"12\""));
}

static void framing_at_every_split(void **state) {
  size_t len = strlen(stream), i;
  for (i = 0; i <= len; i++) {
    struct kcm_framer f;
    struct collected c = {0};
    assert_int_equal(kcm_framer_init(&f, 1 << 20, collect, &c), 0);
    assert_int_equal(kcm_framer_feed(&f, stream, i), 0);
    assert_int_equal(kcm_framer_feed(&f, stream + i, len - i), 0);
    expect_stream(&c);
    assert_false(kcm_framer_partial(&f));
    kcm_framer_release(&f);
  }
}

static void framing_byte_by_byte(void **state) {
  size_t len = strlen(stream), i;
  struct kcm_framer f;
  struct collected c = {0};
  assert_int_equal(kcm_framer_init(&f, 1 << 20, collect, &c), 0);
  for (i = 0; i < len; i++)
    assert_int_equal(kcm_framer_feed(&f, stream + i, 1), 0);
  expect_stream(&c);
  kcm_framer_release(&f);
}

static void framing_skips_bad_values(void **state) {
  static const char bad[] = "{\"type\":\"ADDED\",\"object\":{}}\n"
                            "{\"type\": tru\n"
                            "]]]\n"
                            "{\"type\":\"DELETED\",\"object\":{}}\n";
  size_t len = strlen(bad), i;
  for (i = 0; i <= len; i++) {
    struct kcm_framer f;
    struct collected c = {0};
    assert_int_equal(kcm_framer_init(&f, 1 << 20, collect, &c), 0);
    kcm_framer_feed(&f, bad, i);
    kcm_framer_feed(&f, bad + i, len - i);
    /* Both good events survive; each bad line is reported (two bad lines
     * may be reported as one when a chunk ends inside the first). */
    assert_int_equal(c.n, 2);
    assert_true(c.errors >= 1 && c.errors <= 2);
    assert_non_null(strstr(c.values[1], "DELETED"));
    kcm_framer_release(&f);
  }
}

static void framing_caps_event_size(void **state) {
  char big[600];
  struct kcm_framer f;
  struct collected c = {0};
  memset(big, 'x', sizeof(big));
  assert_int_equal(kcm_framer_init(&f, 128, collect, &c), 0);
  kcm_framer_feed(&f, "{\"type\":\"ADDED\",\"object\":{\"big\":\"", 34);
  kcm_framer_feed(&f, big, sizeof(big));
  kcm_framer_feed(&f, "\"}}\n{\"type\":\"DELETED\",\"object\":{}}\n", 35);
  assert_int_equal(c.errors, 1);
  assert_int_equal(c.n, 1);
  assert_non_null(strstr(c.values[0], "DELETED"));
  kcm_framer_release(&f);
}

static void framing_reports_truncated_end(void **state) {
  static const char last[] = "{\"type\":\"DELETED\",\"object\":{}}";
  struct kcm_framer f;
  struct collected c = {0};
  assert_int_equal(kcm_framer_init(&f, 1 << 20, collect, &c), 0);
  kcm_framer_feed(&f, "{\"type\":\"ADDED\",\"obj", 20);
  assert_true(kcm_framer_partial(&f));
  assert_int_equal(c.n, 0);
  kcm_framer_reset(&f, false);
  assert_false(kcm_framer_partial(&f));
  /* At the end of a stream, a last line without its newline is delivered. */
  kcm_framer_feed(&f, last, strlen(last));
  assert_int_equal(c.n, 0);
  assert_int_equal(kcm_framer_flush(&f), 0);
  assert_int_equal(c.n, 1);
  assert_false(kcm_framer_partial(&f));
  kcm_framer_release(&f);
}

/* --- against the local API server ---------------------------------------------------- */

/* How an informer under test asks: protobuf, streamed lists. */
enum { WIRE_PROTOBUF = 1, WIRE_STREAM = 2 };

struct fixture {
  uv_loop_t loop;
  struct kcm_client_config cfg;
  struct kcm_client *client;
  struct kcm_intern pool;
  struct kcm_informer inf;
  char ns[64];
  int added, updated, deleted, deleted_unknown, resynced;
  bool closed;
};

static void h_added(void *ctx, struct kcm_object *o) { ((struct fixture *)ctx)->added++; }
static void h_updated(void *ctx, struct kcm_object *a, struct kcm_object *b) {
  ((struct fixture *)ctx)->updated++;
  if (a == b)
    ((struct fixture *)ctx)->resynced++;
}
static void h_deleted(void *ctx, struct kcm_object *o, bool unknown) {
  struct fixture *f = ctx;
  f->deleted++;
  if (unknown)
    f->deleted_unknown++;
}

static void fixture_init_with(struct fixture *f, uint64_t resync_ms, unsigned how);

static void fixture_init(struct fixture *f) { fixture_init_with(f, 0, 0); }

static void fixture_init_resync(struct fixture *f, uint64_t resync_ms) {
  fixture_init_with(f, resync_ms, 0);
}

static void fixture_init_with(struct fixture *f, uint64_t resync_ms, unsigned how) {
  struct kcm_informer_options io = {0};
  struct kcm_informer_handler h = {h_added, h_updated, h_deleted, NULL};

  memset(f, 0, sizeof(*f));
  support_connect(&f->loop, &f->cfg, &f->client, "inf", f->ns, sizeof(f->ns));
  kcm_intern_init(&f->pool);
  support_faults(&f->loop, f->client, "{\"clear\":true}");
  io.kind = KCM_KIND_POD;
  io.namespace = f->ns;
  io.backoff_initial_ms = 50;
  io.backoff_max_ms = 400;
  io.watch_timeout_min_s = 5;
  io.resync_ms = resync_ms;
  io.protobuf = how & WIRE_PROTOBUF;
  io.watch_list = how & WIRE_STREAM;
  assert_int_equal(kcm_informer_init(&f->inf, &f->loop, f->client, &f->pool, &io), 0);
  h.ctx = f;
  assert_int_equal(kcm_informer_add_handler(&f->inf, &h), 0);
}

static void on_closed(struct kcm_informer *inf) {
  struct fixture *f = (struct fixture *)((char *)inf - offsetof(struct fixture, inf));
  f->closed = true;
}

static bool is_closed(void *arg) { return ((struct fixture *)arg)->closed; }

static void fixture_free(struct fixture *f) {
  support_faults(&f->loop, f->client, "{\"clear\":true}");
  kcm_informer_stop(&f->inf, on_closed);
  assert_true(support_run_until(&f->loop, is_closed, f, 10000));
  kcm_informer_release(&f->inf);
  assert_int_equal(kcm_intern_count(&f->pool), 0);
  kcm_intern_release(&f->pool);
  kcm_client_close(f->client);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  kcm_client_config_release(&f->cfg);
}

static void make_pod(struct fixture *f, const char *name, const char *extra) {
  struct support_result r = {0};
  char path[128], body[1024];
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", f->ns);
  snprintf(body, sizeof(body),
           "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"app\":\"t\"}%s},\"spec\":"
           "{\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}]}}",
           name, extra ? extra : "");
  support_request(&f->loop, f->client, "POST", path, body, &r);
  if (r.err)
    fail_msg("creating pod %s: %s", name, r.message);
  support_result_free(&r);
}

/* A pod controlled by a ReplicaSet that exists (else the garbage collector
 * would remove the pod). */
static void make_owned_pod(struct fixture *f, const char *name, struct kcm_uid *owner) {
  struct support_result r = {0};
  struct json_object *doc, *meta, *uid;
  char path[128], extra[512];
  snprintf(path, sizeof(path), "/apis/apps/v1/namespaces/%s/replicasets", f->ns);
  support_request(&f->loop, f->client, "POST", path,
                  "{\"metadata\":{\"name\":\"rs\"},\"spec\":{\"replicas\":0,\"selector\":"
                  "{\"matchLabels\":{\"app\":\"t\"}},\"template\":{\"metadata\":{\"labels\":"
                  "{\"app\":\"t\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}}}",
                  &r);
  assert_int_equal(r.err, 0);
  doc = json_tokener_parse(r.body);
  json_object_object_get_ex(doc, "metadata", &meta);
  json_object_object_get_ex(meta, "uid", &uid);
  assert_int_equal(kcm_api_parse_uid(json_object_get_string(uid), owner), 0);
  snprintf(extra, sizeof(extra),
           ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
           "\"name\":\"rs\",\"uid\":\"%s\",\"controller\":true}]", json_object_get_string(uid));
  json_object_put(doc);
  support_result_free(&r);
  make_pod(f, name, extra);
}

static void pod_call(struct fixture *f, const char *method, const char *name, const char *body) {
  struct support_result r = {0};
  char path[160];
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s%s", f->ns, name,
           strcmp(method, "DELETE") ? "" : "?gracePeriodSeconds=0");
  support_request(&f->loop, f->client, method, path, body, &r);
  if (r.err)
    fail_msg("%s pod %s: %s", method, name, r.message);
  support_result_free(&r);
}

/* True when the cache holds exactly the server's pods, at the same versions. */
static bool converged(void *arg) {
  struct fixture *f = arg;
  struct support_result r = {0};
  struct json_object *doc, *items;
  char path[128];
  size_t i, n;
  bool same;

  if (!kcm_informer_synced(&f->inf))
    return false;
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", f->ns);
  support_request(&f->loop, f->client, "GET", path, NULL, &r);
  if (r.err) {
    support_result_free(&r);
    return false;
  }
  doc = json_tokener_parse(r.body);
  support_result_free(&r);
  json_object_object_get_ex(doc, "items", &items);
  n = json_object_array_length(items);
  same = n == kcm_informer_len(&f->inf);
  for (i = 0; same && i < n; i++) {
    struct json_object *meta, *name, *rv;
    struct kcm_object *o;
    json_object_object_get_ex(json_object_array_get_idx(items, i), "metadata", &meta);
    json_object_object_get_ex(meta, "name", &name);
    json_object_object_get_ex(meta, "resourceVersion", &rv);
    o = kcm_informer_get(&f->inf, f->ns, json_object_get_string(name));
    same = o && o->rv == strtoull(json_object_get_string(rv), NULL, 10);
  }
  json_object_put(doc);
  return same;
}

static bool synced(void *arg) { return kcm_informer_synced(&((struct fixture *)arg)->inf); }

static void wait_converged(struct fixture *f) {
  if (!support_run_until(&f->loop, converged, f, 20000))
    fail_msg("the cache did not converge: %zu objects, state %d", kcm_informer_len(&f->inf),
             f->inf.state);
}

/* List, then watch, in JSON or (with protobuf) in the local API server's
 * protobuf. */
static void lists_then_watches_in(unsigned how) {
  struct fixture f;
  struct kcm_object *o;
  struct kcm_uid owner;
  bool protobuf = how & WIRE_PROTOBUF;
  int n = 0;

  fixture_init_with(&f, 0, how);
  make_pod(&f, "a", NULL);
  make_pod(&f, "b", NULL);
  make_owned_pod(&f, "c", &owner);
  kcm_informer_start(&f.inf);
  wait_converged(&f);
  assert_int_equal(f.added, 3);
  for (o = kcm_informer_first_in(&f.inf, f.ns); o; o = o->ns_next)
    n++;
  assert_int_equal(n, 3);
  o = kcm_informer_first_owned(&f.inf, &owner);
  assert_non_null(o);
  assert_string_equal(o->name, "c");
  assert_null(o->own_next);

  make_pod(&f, "d", NULL);
  pod_call(&f, "PATCH", "a", "{\"metadata\":{\"labels\":{\"x\":\"y\"}}}");
  pod_call(&f, "DELETE", "c", NULL);
  wait_converged(&f);
  assert_int_equal(f.added, 4);
  assert_true(f.updated >= 1);
  assert_true(f.deleted >= 1);
  assert_int_equal(f.deleted_unknown, 0);
  assert_string_equal(kcm_labels_get(&kcm_informer_get(&f.inf, f.ns, "a")->labels, "x"), "y");
  assert_null(kcm_informer_first_owned(&f.inf, &owner));
  for (n = 0, o = kcm_informer_first_owned(&f.inf, NULL); o; o = o->own_next)
    n++;
  assert_int_equal(n, 3); /* a, b and d have no controller */
  { /* the watch resumes from the last event's version: the server's newest */
    struct support_result r = {0};
    char path[128], want[64];
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", f.ns);
    support_request(&f.loop, f.client, "GET", path, NULL, &r);
    assert_int_equal(r.err, 0);
    assert_int_equal(sscanf(strstr(r.body, "\"resourceVersion\":\""), "\"resourceVersion\":\"%63[0-9]", want), 1);
    support_result_free(&r);
    assert_string_equal(f.inf.rv, want);
  }
  assert_int_equal(f.inf.stats.decode_errors, 0);
  assert_int_equal(f.inf.stats.streams, how & WIRE_STREAM ? 1 : 0);
  assert_int_equal(f.inf.stats.fallbacks, 0);
  assert_int_equal(f.inf.list_proto, protobuf && !(how & WIRE_STREAM));
  assert_int_equal(f.inf.watch_proto, protobuf);
  fixture_free(&f);
}

static void lists_then_watches(void **state) { lists_then_watches_in(0); }

/* resourceVersion of the last list (or streamed list) of the fixture's
 * pods the local API server was asked for ("(none)" when none). */
static const char *last_list_rv(struct fixture *f) {
  static char rv[64];
  struct support_result r = {0};
  struct json_object *doc, *items;
  char path[128];
  size_t i;
  snprintf(rv, sizeof(rv), "(none)");
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", f->ns);
  support_request(&f->loop, f->client, "GET", "/_sim/requests?since=0", NULL, &r);
  assert_int_equal(r.err, 0);
  doc = json_tokener_parse(r.body);
  support_result_free(&r);
  assert_true(json_object_object_get_ex(doc, "items", &items));
  for (i = 0; i < json_object_array_length(items); i++) {
    struct json_object *it = json_object_array_get_idx(items, i), *p, *q;
    const char *query, *v;
    if (!json_object_object_get_ex(it, "path", &p) || strcmp(json_object_get_string(p), path) ||
        !json_object_object_get_ex(it, "query", &q))
      continue;
    query = json_object_get_string(q);
    if (strstr(query, "watch=1") && !strstr(query, "sendInitialEvents=true"))
      continue; /* a watch, not a list */
    v = strstr(query, "resourceVersion=");
    snprintf(rv, sizeof(rv), "%.*s", v ? (int)strcspn(v + 16, "&") : 6, v ? v + 16 : "(none)");
  }
  json_object_put(doc);
  return rv;
}

static bool keeping;
static int listed;

static bool keep_if(void *ctx, const char *ns, size_t n) { return keeping; }
static void on_listed(struct kcm_informer *inf, void *ctx) { listed++; }

static uint64_t want_filtered;

static bool filtered_enough(void *arg) {
  return ((struct fixture *)arg)->inf.stats.filtered >= want_filtered;
}

static bool holds(void *arg) {
  struct fixture *f = arg;
  return kcm_informer_len(&f->inf) == 3 && f->inf.lists_applied > 1;
}

/* Objects of namespaces not kept are dropped as read; kept again, a relist
 * brings them; no longer kept, a purge forgets them telling no handler. */
static void keeps_only_the_namespaces_asked_in(unsigned how) {
  struct fixture f;
  fixture_init_with(&f, 0, how);
  keeping = false;
  listed = 0;
  kcm_informer_filter(&f.inf, keep_if, NULL);
  f.inf.on_listed = on_listed;
  make_pod(&f, "a", NULL);
  make_pod(&f, "b", NULL);
  kcm_informer_start(&f.inf);
  assert_true(support_run_until(&f.loop, synced, &f, 10000));
  assert_int_equal(kcm_informer_len(&f.inf), 0);
  assert_int_equal(f.inf.stats.filtered, 2);
  assert_int_equal(listed, 1);
  assert_int_equal(f.inf.lists_applied, 1);
  make_pod(&f, "c", NULL); /* an event dropped too */
  want_filtered = 3;
  assert_true(support_run_until(&f.loop, filtered_enough, &f, 10000));
  assert_int_equal(kcm_informer_len(&f.inf), 0);
  assert_int_equal(f.added, 0);

  keeping = true;
  kcm_informer_relist(&f.inf);
  assert_true(support_run_until(&f.loop, holds, &f, 10000));
  assert_int_equal(f.added, 3);
  /* the relist was a consistent read: another client's writes are in it
   * (a stream goes on as the watch: the local server logs it when it ends) */
  if (!(how & WIRE_STREAM))
    assert_string_equal(last_list_rv(&f), "");
  assert_int_equal(f.inf.lists_applied, f.inf.lists_started);
  assert_int_equal(listed, 2);
  wait_converged(&f);

  keeping = false;
  assert_int_equal(kcm_informer_purge(&f.inf), 3);
  assert_int_equal(kcm_informer_len(&f.inf), 0);
  assert_null(kcm_informer_first_in(&f.inf, f.ns));
  assert_int_equal(f.deleted, 0);
  want_filtered = f.inf.stats.filtered + 1;
  pod_call(&f, "DELETE", "a", NULL); /* not kept: nothing to tell */
  assert_true(support_run_until(&f.loop, filtered_enough, &f, 10000));
  assert_int_equal(f.deleted, 0);
  assert_int_equal(kcm_informer_len(&f.inf), 0);
  fixture_free(&f);
}

static void keeps_only_the_namespaces_asked(void **state) { keeps_only_the_namespaces_asked_in(0); }

static void keeps_only_the_namespaces_asked_streaming(void **state) {
  keeps_only_the_namespaces_asked_in(WIRE_STREAM);
}

static void lists_then_watches_in_protobuf(void **state) { lists_then_watches_in(WIRE_PROTOBUF); }

static void streams_then_watches(void **state) { lists_then_watches_in(WIRE_STREAM); }

static void streams_then_watches_in_protobuf(void **state) {
  lists_then_watches_in(WIRE_STREAM | WIRE_PROTOBUF);
}

/* A server without the WatchList gate refuses the stream: listed instead. */
static void stream_refused_by_the_local_server(void **state) {
  struct fixture f;
  fixture_init_with(&f, 0, WIRE_STREAM);
  make_pod(&f, "a", NULL);
  support_faults(&f.loop, f.client, "{\"watchList\":false}");
  kcm_informer_start(&f.inf);
  wait_converged(&f);
  assert_int_equal(f.inf.stats.fallbacks, 1);
  assert_int_equal(f.inf.stats.streams, 1);
  assert_true(f.inf.stats.lists >= 1);
  make_pod(&f, "b", NULL);
  wait_converged(&f);
  fixture_free(&f);
}

static void converges_after_dropped_watches(void **state) {
  struct fixture f;
  char name[16];
  int i;
  fixture_init(&f);
  kcm_informer_start(&f.inf);
  assert_true(support_run_until(&f.loop, synced, &f, 10000));
  for (i = 0; i < 5; i++) {
    snprintf(name, sizeof(name), "p%d", i);
    make_pod(&f, name, NULL);
    support_faults(&f.loop, f.client, "{\"dropWatches\":true}");
  }
  pod_call(&f, "DELETE", "p0", NULL);
  wait_converged(&f);
  assert_true(f.inf.stats.watches >= 2);
  assert_int_equal(f.inf.stats.relists, 0); /* a dropped watch resumes, it does not relist */
  fixture_free(&f);
}

static void relists_after_history_is_compacted(void **state) {
  struct fixture f;
  fixture_init(&f);
  make_pod(&f, "keep", NULL);
  make_pod(&f, "gone", NULL);
  kcm_informer_start(&f.inf);
  wait_converged(&f);
  /* Cut the informer off, change things, and forget the history. */
  support_faults(&f.loop, f.client,
                 "{\"rules\":[{\"verb\":\"watch\",\"resource\":\"pods\",\"code\":500}],"
                 "\"dropWatches\":true}");
  pod_call(&f, "DELETE", "gone", NULL);
  make_pod(&f, "new", NULL);
  support_faults(&f.loop, f.client, "{\"compact\":true}");
  support_faults(&f.loop, f.client, "{\"rules\":[]}");
  wait_converged(&f);
  assert_true(f.inf.stats.relists >= 1);
  assert_int_equal(f.deleted_unknown, 1);
  assert_null(kcm_informer_get(&f.inf, f.ns, "gone"));
  assert_non_null(kcm_informer_get(&f.inf, f.ns, "new"));
  fixture_free(&f);
}

static void throttled_list_honours_retry_after(void **state) {
  struct fixture f;
  uint64_t started;
  fixture_init(&f);
  support_faults(&f.loop, f.client,
                 "{\"rules\":[{\"verb\":\"list\",\"resource\":\"pods\",\"code\":429,"
                 "\"retryAfter\":1,\"count\":1}]}");
  uv_update_time(&f.loop);
  started = uv_now(&f.loop);
  kcm_informer_start(&f.inf);
  assert_true(support_run_until(&f.loop, synced, &f, 10000));
  assert_true(uv_now(&f.loop) - started >= 1000);
  /* The client waited as asked and sent the list again; the informer never
   * saw a failure. */
  assert_int_equal(kcm_client_stats(f.client)->retries, 1);
  assert_int_equal(f.inf.stats.failures, 0);
  fixture_free(&f);
}

static void server_errors_and_latency(void **state) {
  struct fixture f;
  fixture_init(&f);
  make_pod(&f, "a", NULL);
  support_faults(&f.loop, f.client,
                 "{\"rules\":[{\"verb\":\"list\",\"resource\":\"pods\",\"code\":500,"
                 "\"count\":3}],\"latencyMs\":100}");
  kcm_informer_start(&f.inf);
  wait_converged(&f);
  assert_int_equal(f.inf.stats.failures, 3);
  make_pod(&f, "b", NULL);
  wait_converged(&f);
  fixture_free(&f);
}

struct lookup {
  struct fixture *f;
  const char *name;
};

static bool cached(void *arg) {
  struct lookup *l = arg;
  return kcm_informer_get(&l->f->inf, l->f->ns, l->name) != NULL;
}

static bool gone(void *arg) { return !cached(arg); }

static void garbage_is_counted_and_skipped(void **state) {
  struct fixture f;
  struct support_result r = {0};
  struct lookup after = {&f, "after"};
  char path[160];

  fixture_init(&f);
  make_pod(&f, "good", NULL);
  make_pod(&f, "odd", NULL);
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/odd/status", f.ns);
  support_request(&f.loop, f.client, "PATCH", path,
                  "{\"status\":{\"containerStatuses\":[{\"name\":\"c\",\"restartCount\":\"x\"}]}}",
                  &r);
  support_result_free(&r);
  support_faults(&f.loop, f.client,
                 "{\"rules\":[{\"verb\":\"list\",\"resource\":\"pods\",\"body\":"
                 "\"<html>proxy error</html>\",\"count\":1}]}");
  kcm_informer_start(&f.inf);
  assert_true(support_run_until(&f.loop, synced, &f, 10000));
  assert_int_equal(f.inf.stats.failures, 1);      /* the HTML page */
  assert_int_equal(f.inf.stats.decode_errors, 1); /* the pod kcm cannot decode */
  assert_null(kcm_informer_get(&f.inf, f.ns, "odd"));
  assert_non_null(kcm_informer_get(&f.inf, f.ns, "good"));
  support_faults(&f.loop, f.client,
                 "{\"watchInject\":{\"resource\":\"pods\",\"line\":\"{\\\"type\\\":oops\"}}");
  make_pod(&f, "after", NULL);
  assert_true(support_run_until(&f.loop, cached, &after, 10000));
  assert_int_equal(f.inf.stats.decode_errors, 2); /* the injected line */
  assert_int_equal(f.inf.stats.relists, 0);
  fixture_free(&f);
}

/* An event whose type is a broken string (a control character in it, a bad
 * escape, cut short) is counted and skipped like any malformed event. */
static void broken_event_type_is_skipped(void **state) {
  struct fixture f;
  struct lookup after = {&f, "after"};

  fixture_init(&f);
  kcm_informer_start(&f.inf);
  wait_converged(&f);
  support_faults(&f.loop, f.client,
                 "{\"watchInject\":{\"resource\":\"pods\",\"line\":\"{\\\"type\\\":\\\"ADD\\tED\\\","
                 "\\\"object\\\":{}}\"}}");
  support_faults(&f.loop, f.client,
                 "{\"watchInject\":{\"resource\":\"pods\",\"line\":\"{\\\"type\\\":\\\"\\\\x\\\"}\"}}");
  support_faults(&f.loop, f.client,
                 "{\"watchInject\":{\"resource\":\"pods\",\"line\":\"{\\\"type\\\":\\\"ADDED\"}}");
  make_pod(&f, "after", NULL);
  assert_true(support_run_until(&f.loop, cached, &after, 10000));
  assert_int_equal(f.inf.stats.decode_errors, 3);
  assert_int_equal(f.inf.stats.relists, 0);
  fixture_free(&f);
}

/* Events are lines, but a line holding two events gives both; text after an
 * event that is no event is reported, and the event kept. */
static void events_sharing_a_line(void **state) {
  struct fixture f;
  struct lookup second = {&f, "second"}, after = {&f, "after"};
  char inject[1024];
  static const char pod[] =
      "{\\\"type\\\":\\\"ADDED\\\",\\\"object\\\":{\\\"metadata\\\":{\\\"name\\\":"
      "\\\"%s\\\",\\\"namespace\\\":\\\"%s\\\",\\\"uid\\\":"
      "\\\"00000000-0000-0000-0000-00000000000%d\\\",\\\"resourceVersion\\\":\\\"2\\\"}}}";
  char one[400], two[400];

  fixture_init(&f);
  kcm_informer_start(&f.inf);
  wait_converged(&f);
  snprintf(one, sizeof(one), pod, "first", f.ns, 1);
  snprintf(two, sizeof(two), pod, "second", f.ns, 2);
  snprintf(inject, sizeof(inject),
           "{\"watchInject\":{\"resource\":\"pods\",\"line\":\"%s %s\"}}", one, two);
  support_faults(&f.loop, f.client, inject);
  assert_true(support_run_until(&f.loop, cached, &second, 10000));
  assert_non_null(kcm_informer_get(&f.inf, f.ns, "first"));
  assert_int_equal(f.inf.stats.decode_errors, 0);
  snprintf(one, sizeof(one), pod, "third", f.ns, 3);
  snprintf(inject, sizeof(inject),
           "{\"watchInject\":{\"resource\":\"pods\",\"line\":\"%s ]\"}}", one);
  support_faults(&f.loop, f.client, inject);
  make_pod(&f, "after", NULL);
  assert_true(support_run_until(&f.loop, cached, &after, 10000));
  assert_non_null(kcm_informer_get(&f.inf, f.ns, "third"));
  assert_int_equal(f.inf.stats.decode_errors, 1);
  assert_int_equal(f.inf.stats.relists, 0);
  fixture_free(&f);
}

/* A key given twice in an event counts once, the last time, as Go reads
 * JSON: a type repeated after a decoded pod leaves no pod behind (the
 * sanitizer build checks nothing leaks), a repeated object replaces the
 * first. */
static void repeated_event_keys_keep_the_last(void **state) {
  struct fixture f;
  struct lookup second = {&f, "second-object"}, after = {&f, "after"};
  char inject[1024];
  static const char pod[] =
      "{\\\"metadata\\\":{\\\"name\\\":\\\"%s\\\",\\\"namespace\\\":\\\"%s\\\","
      "\\\"uid\\\":\\\"00000000-0000-0000-0000-00000000000%d\\\",\\\"resourceVersion\\\":\\\"2\\\"}}";
  char one[400], two[400];

  fixture_init(&f);
  kcm_informer_start(&f.inf);
  wait_converged(&f);
  snprintf(one, sizeof(one), pod, "first-object", f.ns, 1);
  snprintf(two, sizeof(two), pod, "second-object", f.ns, 2);
  snprintf(inject, sizeof(inject),
           "{\"watchInject\":{\"resource\":\"pods\",\"line\":\"{\\\"type\\\":\\\"ADDED\\\","
           "\\\"object\\\":%s,\\\"object\\\":%s}\"}}", one, two);
  support_faults(&f.loop, f.client, inject);
  assert_true(support_run_until(&f.loop, cached, &second, 10000));
  assert_null(kcm_informer_get(&f.inf, f.ns, "first-object"));
  snprintf(one, sizeof(one), pod, "retyped", f.ns, 3);
  snprintf(inject, sizeof(inject),
           "{\"watchInject\":{\"resource\":\"pods\",\"line\":\"{\\\"type\\\":\\\"ADDED\\\","
           "\\\"object\\\":%s,\\\"type\\\":\\\"FOO\\\"}\"}}", one);
  support_faults(&f.loop, f.client, inject);
  make_pod(&f, "after", NULL);
  assert_true(support_run_until(&f.loop, cached, &after, 10000));
  assert_null(kcm_informer_get(&f.inf, f.ns, "retyped"));
  assert_int_equal(f.inf.stats.decode_errors, 1); /* the unknown type */
  fixture_free(&f);
}

/* A line may hold very many events (here 50000 bookmarks, 1.5 MB): each is
 * read in turn, however many there are. */
static void many_events_on_one_line(void **state) {
  static const char head[] = "{\"watchInject\":{\"resource\":\"pods\",\"line\":\"";
  static const char bookmark[] = "{\\\"type\\\":\\\"BOOKMARK\\\",\\\"object\\\":{}}";
  struct fixture f;
  struct lookup after = {&f, "after"};
  struct kcm_buf inject = KCM_BUF_INIT(4u << 20);
  uint64_t before;
  int i;

  fixture_init(&f);
  kcm_informer_start(&f.inf);
  wait_converged(&f);
  assert_int_equal(kcm_buf_append_str(&inject, head), 0);
  for (i = 0; i < 50000; i++)
    assert_int_equal(kcm_buf_append_str(&inject, bookmark), 0);
  assert_int_equal(kcm_buf_append_str(&inject, "\"}}"), 0);
  before = f.inf.stats.bookmarks;
  support_faults(&f.loop, f.client, inject.data);
  kcm_buf_release(&inject);
  make_pod(&f, "after", NULL);
  assert_true(support_run_until(&f.loop, cached, &after, 20000));
  assert_true(f.inf.stats.bookmarks >= before + 50000);
  assert_int_equal(f.inf.stats.decode_errors, 0);
  assert_int_equal(f.inf.stats.relists, 0);
  fixture_free(&f);
}

static bool caught_up_with(void *arg) {
  struct lookup *l = arg;
  struct kcm_object *o = kcm_informer_get(&l->f->inf, l->f->ns, l->name);
  return o && !kcm_informer_behind(&l->f->inf, o) && l->f->inf.behind.len == 0;
}

/* A write the cache has not seen makes the object "behind" until the event
 * that carries it arrives. */
static void writes_the_cache_has_not_seen(void **state) {
  struct fixture f;
  struct support_result r = {0};
  struct lookup a = {&f, "a"};
  struct kcm_object *o;
  char path[160];
  uint64_t rv;

  fixture_init(&f);
  make_pod(&f, "a", NULL);
  kcm_informer_start(&f.inf);
  wait_converged(&f);
  o = kcm_informer_get(&f.inf, f.ns, "a");
  assert_non_null(o);
  kcm_informer_written(&f.inf, f.ns, "a", o->rv); /* already cached */
  assert_false(kcm_informer_behind(&f.inf, o));
  assert_int_equal(f.inf.behind.len, 0);
  kcm_informer_written(&f.inf, f.ns, "gone", o->rv + 5); /* nothing cached */
  assert_int_equal(f.inf.behind.len, 0);
  kcm_informer_written(&f.inf, f.ns, "a", o->rv + 1000000);
  assert_true(kcm_informer_behind(&f.inf, o));
  assert_int_equal(f.inf.behind.len, 1);
  /* The object going drops the record. */
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/a", f.ns);
  support_request(&f.loop, f.client, "DELETE", path, NULL, &r);
  assert_int_equal(r.err, 0);
  assert_true(support_run_until(&f.loop, gone, &a, 10000));
  assert_int_equal(f.inf.behind.len, 0);
  /* A real write: behind until its event is in the cache. */
  make_pod(&f, "a", NULL);
  assert_true(support_run_until(&f.loop, cached, &a, 10000));
  snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/a", f.ns);
  support_request(&f.loop, f.client, "PATCH", path,
                  "{\"metadata\":{\"labels\":{\"moved\":\"on\"}}}", &r);
  assert_int_equal(r.err, 0);
  rv = kcm_api_resource_version_text(r.body, strlen(r.body));
  assert_true(rv > 0);
  kcm_informer_written(&f.inf, f.ns, "a", rv);
  assert_true(support_run_until(&f.loop, caught_up_with, &a, 10000));
  assert_true(kcm_informer_get(&f.inf, f.ns, "a")->rv >= rv);
  support_result_free(&r);
  fixture_free(&f);
}

/* --- exactly what goes on the wire (a scripted server) ------------------------------- */

struct wire {
  struct peer peer;
  uv_loop_t loop;
  struct kcm_client_config cfg;
  struct kcm_client *client;
  struct kcm_intern pool;
  struct kcm_informer inf;
  bool closed;
};

/* Added to the next wire's informer when set. */
static const struct kcm_informer_handler *wire_handler;

/* lengths: of the answers' bodies when binary (NULL: text). */
static void wire_start_with(struct wire *w, const struct peer_answer *answers,
                            const size_t *lengths, size_t n, const char *ns, unsigned how) {
  struct kcm_informer_options io = {0};
  memset(w, 0, sizeof(*w));
  peer_start_sized(&w->peer, answers, lengths, n);
  w->cfg.server = strdup(w->peer.url);
  uv_loop_init(&w->loop);
  assert_int_equal(kcm_client_new(&w->client, &w->loop, &w->cfg), 0);
  kcm_intern_init(&w->pool);
  io.kind = KCM_KIND_POD;
  io.namespace = ns;
  io.page_size = 2;
  io.watch_timeout_min_s = 5;
  io.protobuf = how & WIRE_PROTOBUF;
  io.watch_list = how & WIRE_STREAM;
  assert_int_equal(kcm_informer_init(&w->inf, &w->loop, w->client, &w->pool, &io), 0);
  if (wire_handler)
    assert_int_equal(kcm_informer_add_handler(&w->inf, wire_handler), 0);
  kcm_informer_start(&w->inf);
}

static void wire_start(struct wire *w, const struct peer_answer *answers, size_t n,
                       const char *ns) {
  wire_start_with(w, answers, NULL, n, ns, 0);
}

static void wire_closed(struct kcm_informer *inf) {
  ((struct wire *)((char *)inf - offsetof(struct wire, inf)))->closed = true;
}

static bool wire_is_closed(void *arg) { return ((struct wire *)arg)->closed; }

static void wire_stop(struct wire *w) {
  kcm_informer_stop(&w->inf, wire_closed);
  assert_true(support_run_until(&w->loop, wire_is_closed, w, 10000));
  kcm_informer_release(&w->inf);
  kcm_intern_release(&w->pool);
  kcm_client_close(w->client);
  uv_run(&w->loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&w->loop), 0);
  kcm_client_config_release(&w->cfg);
  peer_stop(&w->peer);
}

struct seen {
  struct peer *peer;
  size_t n;
};

static bool peer_saw(void *arg) {
  struct seen *s = arg;
  return peer_count(s->peer) >= s->n;
}

/* The request target of head (its request line between the spaces), and
 * the value of its query parameter `name`, decoded (caller frees). */
static char *query_param(const char *head, const char *name) {
  const char *q = strchr(head, '?'), *end = strchr(head, '\r'), *v;
  size_t n = strlen(name);
  assert_non_null(q);
  for (v = q; v && v < end; v = strchr(v + 1, '&')) {
    if (!strncmp(v + 1, name, n) && v[1 + n] == '=') {
      const char *e = v + 2 + n;
      while (*e != '&' && *e != ' ')
        e++;
      return kcm_client_unescape(v + 2 + n, (size_t)(e - (v + 2 + n)));
    }
  }
  return NULL;
}

/* The continue token, the resourceVersion and the namespace reach the
 * server byte for byte, whatever they hold. */
static void list_query_is_encoded(void **state) {
  static const char token[] = "a&b=c+d/e f%g?h#i";
  static const char rv[] = "12&x=1 %2F";
  char page1[256], page2[256], *head, *v;
  struct kcm_informer_options io = {0};
  struct kcm_informer bad;
  struct peer_answer answers[3] = {
      {"HTTP/1.1 200 OK\r\nContent-Type: application/json", page1},
      {"HTTP/1.1 200 OK\r\nContent-Type: application/json", page2},
      {"HTTP/1.1 200 OK\r\nContent-Type: application/json", ""},
  };
  struct wire w;
  struct seen s;
  snprintf(page1, sizeof(page1), "{\"metadata\":{\"continue\":\"%s\"},\"items\":[]}", token);
  snprintf(page2, sizeof(page2), "{\"metadata\":{\"resourceVersion\":\"%s\"},\"items\":[]}", rv);
  wire_start(&w, answers, 3, "team a?#");
  s.peer = &w.peer;
  s.n = 3;
  assert_true(support_run_until(&w.loop, peer_saw, &s, 5000));

  head = peer_request(&w.peer, 1);
  assert_true(!strncmp(head, "GET /api/v1/namespaces/team%20a%3F%23/pods?", 43));
  /* The request line is three fields: nothing in the target splits it. */
  assert_non_null(strstr(strchr(head, ' ') + 1, " HTTP/1.1\r\n"));
  assert_true(strchr(strchr(head, ' ') + 1, ' ') == strstr(head, " HTTP/1.1\r\n"));
  v = query_param(head, "continue");
  assert_non_null(v);
  assert_string_equal(v, token);
  free(v);
  assert_null(query_param(head, "resourceVersion")); /* the token carries it */
  free(head);

  head = peer_request(&w.peer, 2);
  v = query_param(head, "resourceVersion");
  assert_non_null(v);
  assert_string_equal(v, rv);
  free(v);
  v = query_param(head, "watch");
  assert_string_equal(v, "1");
  free(v);
  free(head);
  /* A namespace a URL parser or the server would read as other segments. */
  io.kind = KCM_KIND_POD;
  io.namespace = "team/b";
  assert_int_equal(kcm_informer_init(&bad, &w.loop, w.client, &w.pool, &io), KCM_EINVAL);
  io.namespace = "..";
  assert_int_equal(kcm_informer_init(&bad, &w.loop, w.client, &w.pool, &io), KCM_EINVAL);
  wire_stop(&w);
}

#define OK_JSON "HTTP/1.1 200 OK\r\nContent-Type: application/json"
#define GONE "HTTP/1.1 410 Gone\r\nContent-Type: application/json"
#define GONE_BODY "{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\",\"message\":\"too old\"}"

/* Start an informer on `answers` (see wire_start_with) and wait until
 * each has been asked for. */
static void wire_answer_all_with(struct wire *w, const struct peer_answer *answers,
                                 const size_t *lengths, size_t n, const char *ns, unsigned how) {
  struct seen s;
  wire_start_with(w, answers, lengths, n, ns, how);
  s.peer = &w->peer;
  s.n = n;
  assert_true(support_run_until(&w->loop, peer_saw, &s, 10000));
}

static void wire_answer_all(struct wire *w, const struct peer_answer *answers, size_t n) {
  wire_answer_all_with(w, answers, NULL, n, "default", 0);
}

/* Request i's query parameter `name` is `want` (NULL: absent). */
static void expect_param(struct wire *w, size_t i, const char *name, const char *want) {
  char *head = peer_request(&w->peer, i), *v;
  assert_non_null(head);
  v = query_param(head, name);
  if (!want)
    assert_null(v);
  else
    assert_string_equal(v ? v : "(absent)", want);
  free(v);
  free(head);
}

/* As client-go's reflector: the first list at "0" (the watch cache answers
 * it whole, the limit ignored); after an expired watch a relist at the
 * last version without a limit (the watch cache again); after that list
 * expires too, a consistent list at "", paged. */
static void lists_ask_the_watch_cache(void **state) {
  static const struct peer_answer answers[] = {
      {OK_JSON, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[]}"},
      {GONE, GONE_BODY}, /* the watch */
      {GONE, GONE_BODY}, /* the relist at 10 */
      {OK_JSON, "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":[]}"},
      {OK_JSON, ""}, /* watches from here on */
  };
  struct wire w;
  wire_answer_all(&w, answers, 5);
  expect_param(&w, 0, "resourceVersion", "0");
  expect_param(&w, 0, "limit", "2");
  expect_param(&w, 1, "watch", "1");
  expect_param(&w, 1, "resourceVersion", "10");
  expect_param(&w, 2, "resourceVersion", "10");
  expect_param(&w, 2, "limit", NULL);
  expect_param(&w, 2, "watch", NULL);
  expect_param(&w, 3, "resourceVersion", "");
  expect_param(&w, 3, "limit", "2");
  expect_param(&w, 4, "resourceVersion", "20");
  expect_param(&w, 4, "watch", "1");
  wire_stop(&w);
}

/* A server that pages a list at "0" has no watch cache: relists to it are
 * paged too, as client-go's reflector does. */
static void paged_answer_at_zero_keeps_paging(void **state) {
  static const struct peer_answer answers[] = {
      {OK_JSON, "{\"metadata\":{\"continue\":\"c1\"},\"items\":[{\"metadata\":{\"name\":\"a\","
                "\"namespace\":\"default\",\"uid\":\"6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51\","
                "\"resourceVersion\":\"9\"}}]}"},
      {OK_JSON, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[]}"},
      {GONE, GONE_BODY}, /* the watch */
      {OK_JSON, "{\"metadata\":{\"resourceVersion\":\"11\"},\"items\":[]}"},
      {OK_JSON, ""},
  };
  struct wire w;
  wire_answer_all(&w, answers, 5);
  expect_param(&w, 1, "continue", "c1");
  expect_param(&w, 3, "resourceVersion", "10");
  expect_param(&w, 3, "limit", "2");
  assert_true(w.inf.paged);
  wire_stop(&w);
}

/* A list response that breaks off, or turns out malformed after items were
 * read, costs the attempt: nothing of it reaches the cache, and the next
 * attempt lists again. */
static void malformed_list_is_retried_whole(void **state) {
  static const struct peer_answer answers[] = {
      {OK_JSON, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[{\"metadata\":{\"name\":"
                "\"a\",\"namespace\":\"default\",\"uid\":"
                "\"6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51\",\"resourceVersion\":\"9\"}}]]}"},
      {OK_JSON, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[{\"metadata\":{\"name\":"
                "\"b\",\"namespace\":\"default\",\"uid\":"
                "\"6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e52\",\"resourceVersion\":\"9\"}}]}"},
      {OK_JSON, ""},
  };
  struct wire w;
  wire_answer_all(&w, answers, 3);
  assert_true(w.inf.synced);
  assert_int_equal(w.inf.stats.failures >= 1, 1);
  assert_null(kcm_informer_get(&w.inf, "default", "a"));
  assert_non_null(kcm_informer_get(&w.inf, "default", "b"));
  expect_param(&w, 1, "resourceVersion", "0"); /* nothing of the broken list was kept */
  wire_stop(&w);
}

static bool backing_off(void *arg) {
  return ((struct kcm_informer *)arg)->state == KCM_INFORMER_BACKOFF;
}

/* A Retry-After past any sane pause neither stops the informer nor turns
 * into no pause: it waits the client's cap. */
static void huge_retry_after_is_capped(void **state) {
  static const struct peer_answer answers[] = {
      {"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 100000000", NULL},
  };
  struct wire w;
  wire_start(&w, answers, 1, "default");
  assert_true(support_run_until(&w.loop, backing_off, &w.inf, 3000));
  assert_int_equal(w.inf.retry_in_ms, KCM_CLIENT_RETRY_AFTER_MAX * 1000);
  assert_int_equal(w.inf.stats.failures, 1);
  assert_int_equal(peer_count(&w.peer), 1);
  wire_stop(&w);
}

#define PB_LIST "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.kubernetes.protobuf"
#define PB_WATCH "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.kubernetes.protobuf;stream=watch"

static bool asks_for_protobuf(struct wire *w, size_t i) {
  char *head = peer_request(&w->peer, i), accept[256] = "";
  bool yes;
  assert_non_null(head);
  assert_true(peer_header(head, "Accept", accept, sizeof(accept)));
  yes = !strcmp(accept, "application/vnd.kubernetes.protobuf, application/json");
  if (!yes)
    assert_string_equal(accept, "application/json");
  free(head);
  return yes;
}

/* Pods in protobuf, as kube-apiserver answered a list and a watch of them:
 * the cache holds what the JSON answers would have given. */
static void protobuf_list_and_watch(void **state) {
  size_t list_len, watch_len;
  char *list = pbw_read_data("pods-1.24.pb", &list_len);
  char *watch = pbw_read_data("watch-1.24.pb", &watch_len);
  struct peer_answer answers[] = {{PB_LIST, list}, {PB_WATCH, watch}, {OK_JSON, ""}};
  size_t lengths[] = {list_len, watch_len, 0};
  struct kcm_object *web;
  struct wire w;
  wire_answer_all_with(&w, answers, lengths, 3, "fixture", WIRE_PROTOBUF);
  assert_true(asks_for_protobuf(&w, 0));
  assert_true(asks_for_protobuf(&w, 1));
  assert_true(w.inf.synced);
  assert_int_equal(w.inf.stats.decode_errors, 0);
  assert_int_equal(w.inf.stats.events, 3);
  assert_int_equal(w.inf.stats.bookmarks, 1);
  assert_string_equal(w.inf.rv, "250"); /* the bookmark's */
  web = kcm_informer_get(&w.inf, "fixture", "web-7d9c-abcde");
  assert_non_null(web);
  assert_string_equal(kcm_labels_get(&web->labels, "extra"), "1"); /* the watch's change */
  assert_null(kcm_informer_get(&w.inf, "fixture", "bare"));      /* deleted */
  assert_non_null(kcm_informer_get(&w.inf, "fixture", "costly"));
  assert_int_equal(kcm_informer_len(&w.inf), 2);
  wire_stop(&w);
  free(list);
  free(watch);
}

/* A server that answers JSON when protobuf is asked for (as for kinds it
 * has no protobuf for) is read as JSON; without protobuf asked for, only
 * JSON is accepted. */
static void protobuf_asked_json_answered(void **state) {
  static const struct peer_answer answers[] = {
      {OK_JSON, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[{\"metadata\":{\"name\":"
                "\"a\",\"namespace\":\"default\",\"uid\":"
                "\"6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51\",\"resourceVersion\":\"9\"}}]}"},
      {OK_JSON, "{\"type\":\"DELETED\",\"object\":{\"metadata\":{\"name\":\"a\",\"namespace\":"
                "\"default\",\"uid\":\"6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51\","
                "\"resourceVersion\":\"11\"}}}\n"},
      {OK_JSON, ""},
  };
  struct wire w;
  wire_answer_all_with(&w, answers, NULL, 3, "default", WIRE_PROTOBUF);
  assert_true(asks_for_protobuf(&w, 0));
  assert_int_equal(w.inf.stats.decode_errors, 0);
  assert_int_equal(w.inf.stats.events, 1);
  assert_null(kcm_informer_get(&w.inf, "default", "a"));
  wire_stop(&w);
  wire_answer_all(&w, answers, 3);
  assert_false(asks_for_protobuf(&w, 0));
  assert_false(asks_for_protobuf(&w, 1));
  wire_stop(&w);
}

/* A protobuf ERROR event with a 410 Status relists, as in JSON. */
static void protobuf_expired_watch_relists(void **state) {
  struct kcm_buf frames = KCM_BUF_INIT(1 << 20), ev = KCM_BUF_INIT(1 << 20),
                 st = KCM_BUF_INIT(1 << 20), env = KCM_BUF_INIT(1 << 20),
                 meta = KCM_BUF_INIT(1 << 20);
  struct peer_answer answers[4] = {{PB_LIST, "k8s\0\x12\x06\x0a\x04\x12\x02" "10"},
                                   {PB_WATCH, NULL},
                                   {PB_LIST, "k8s\0\x12\x06\x0a\x04\x12\x02" "20"},
                                   {OK_JSON, ""}};
  size_t lengths[4] = {12, 0, 12, 0};
  struct wire w;
  uint8_t len[4] = {0, 0, 0, 0};

  pbw_str(&st, 3, "too old resource version: 10 (15)");
  pbw_str(&st, 4, "Expired");
  pbw_int(&st, 6, 410);
  pbw_str(&meta, 2, "Status");
  kcm_buf_append(&env, KCM_PB_MAGIC, KCM_PB_MAGIC_LEN);
  pbw_msg(&env, 1, &meta);
  pbw_msg(&env, 2, &st);
  kcm_buf_reset(&meta);
  pbw_msg(&meta, 1, &env); /* the RawExtension */
  pbw_str(&ev, 1, "ERROR");
  pbw_msg(&ev, 2, &meta);
  len[3] = (uint8_t)ev.len;
  kcm_buf_append(&frames, len, 4);
  kcm_buf_append(&frames, ev.data, ev.len);
  answers[1].body = frames.data;
  lengths[1] = frames.len;
  wire_answer_all_with(&w, answers, lengths, 4, "default", WIRE_PROTOBUF);
  expect_param(&w, 1, "watch", "1");
  expect_param(&w, 2, "watch", NULL); /* the relist */
  expect_param(&w, 2, "resourceVersion", "10");
  expect_param(&w, 3, "resourceVersion", "20");
  assert_int_equal(w.inf.stats.decode_errors, 0);
  wire_stop(&w);
  kcm_buf_release(&frames);
  kcm_buf_release(&ev);
  kcm_buf_release(&st);
  kcm_buf_release(&env);
  kcm_buf_release(&meta);
}

/* --- lists streamed as watch events ------------------------------------------------------- */

#define UNPROCESSABLE "HTTP/1.1 422 Unprocessable Entity\r\nContent-Type: application/json"
#define EV(type, name, rv)                                                                     \
  "{\"type\":\"" type "\",\"object\":{\"metadata\":{\"name\":\"" name "\",\"namespace\":"  \
  "\"default\",\"uid\":\"6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51\",\"resourceVersion\":"        \
  "\"" rv "\"}}}\n"
#define END_MARK(rv)                                                                           \
  "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"" rv "\","         \
  "\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}}}}\n"

/* Request i streams a list from resourceVersion rv. */
static void expect_streamed(struct wire *w, size_t i, const char *rv) {
  expect_param(w, i, "watch", "1");
  expect_param(w, i, "sendInitialEvents", "true");
  expect_param(w, i, "resourceVersionMatch", "NotOlderThan");
  expect_param(w, i, "allowWatchBookmarks", "true");
  expect_param(w, i, "resourceVersion", rv);
  expect_param(w, i, "limit", NULL);
}

/* Request i watches from rv, with no initial events. */
static void expect_watch(struct wire *w, size_t i, const char *rv) {
  expect_param(w, i, "watch", "1");
  expect_param(w, i, "sendInitialEvents", NULL);
  expect_param(w, i, "resourceVersionMatch", NULL);
  expect_param(w, i, "resourceVersion", rv);
}

/* The objects streamed before the initial-events-end bookmark, changes and
 * deletions among them, replace the cache at that bookmark; the same
 * stream goes on as the watch, and the next watch starts where it ended.
 * An ADDED object's version is its own, not the stream's. */
static void streamed_list_then_the_same_stream(void **state) {
  static const struct peer_answer answers[] = {
      {OK_JSON, EV("ADDED", "a", "5") EV("ADDED", "b", "7") EV("ADDED", "c", "6")
                    EV("DELETED", "c", "8") EV("MODIFIED", "b", "9") END_MARK("10")
                        EV("MODIFIED", "a", "11")},
      {OK_JSON, ""},
  };
  struct wire w;
  wire_answer_all_with(&w, answers, NULL, 2, "default", WIRE_STREAM);
  expect_streamed(&w, 0, "");
  expect_watch(&w, 1, "11");
  assert_true(kcm_informer_synced(&w.inf));
  assert_int_equal(kcm_informer_len(&w.inf), 2);
  assert_int_equal(kcm_informer_get(&w.inf, "default", "a")->rv, 11);
  assert_int_equal(kcm_informer_get(&w.inf, "default", "b")->rv, 9);
  assert_null(kcm_informer_get(&w.inf, "default", "c"));
  assert_int_equal(w.inf.stats.streams, 1);
  assert_int_equal(w.inf.stats.lists, 0);
  assert_int_equal(w.inf.stats.fallbacks, 0);
  wire_stop(&w);
}

/* A server that refuses the stream (its WatchList gate off) is listed at
 * once; so is one whose stream ends at once with nothing in it. */
static void refused_stream_falls_back_to_a_list(void **state) {
  static const struct peer_answer refused[] = {
      {UNPROCESSABLE, "{\"kind\":\"Status\",\"code\":422,\"reason\":\"Invalid\",\"message\":"
                      "\"sendInitialEvents is forbidden for watch unless the WatchList feature "
                      "gate is enabled\"}"},
      {OK_JSON, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[]}"},
      {OK_JSON, ""},
  };
  static const struct peer_answer empty[] = {
      {OK_JSON, ""},
      {OK_JSON, "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":[]}"},
      {OK_JSON, ""},
  };
  const struct peer_answer *cases[] = {refused, empty};
  size_t i;
  for (i = 0; i < 2; i++) {
    struct wire w;
    wire_answer_all_with(&w, cases[i], NULL, 3, "default", WIRE_STREAM);
    expect_streamed(&w, 0, "");
    expect_param(&w, 1, "watch", NULL);
    expect_param(&w, 1, "resourceVersion", "0");
    expect_watch(&w, 2, "10");
    assert_true(kcm_informer_synced(&w.inf));
    assert_int_equal(w.inf.stats.fallbacks, 1);
    wire_stop(&w);
  }
}

/* A stream cut before its bookmark is dropped and streamed again. */
static void cut_stream_is_streamed_again(void **state) {
  static const struct peer_answer answers[] = {
      {OK_JSON, EV("ADDED", "a", "5")},
      {OK_JSON, EV("ADDED", "b", "7") END_MARK("10")},
      {OK_JSON, ""},
  };
  struct wire w;
  wire_answer_all_with(&w, answers, NULL, 3, "default", WIRE_STREAM);
  expect_streamed(&w, 0, "");
  expect_streamed(&w, 1, "");
  expect_watch(&w, 2, "10");
  assert_null(kcm_informer_get(&w.inf, "default", "a"));
  assert_non_null(kcm_informer_get(&w.inf, "default", "b"));
  assert_int_equal(w.inf.stats.fallbacks, 0);
  wire_stop(&w);
}

/* A watch that expires streams again from the last version; a stream that
 * expires too streams from "", the newest state; 429 waits and streams
 * again. */
static void expired_stream_streams_the_newest(void **state) {
  static const struct peer_answer answers[] = {
      {OK_JSON, EV("ADDED", "a", "5") END_MARK("10")},
      {GONE, GONE_BODY}, /* the watch at 10 */
      {GONE, GONE_BODY}, /* the stream at 10 */
      {"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Type: application/json",
       "{\"kind\":\"Status\",\"code\":429}"},
      {OK_JSON, EV("ADDED", "b", "15") END_MARK("20")},
      {OK_JSON, ""},
  };
  struct wire w;
  wire_answer_all_with(&w, answers, NULL, 6, "default", WIRE_STREAM);
  expect_streamed(&w, 0, "");
  expect_watch(&w, 1, "10");
  expect_streamed(&w, 2, "10");
  expect_streamed(&w, 3, "");
  expect_streamed(&w, 4, "");
  expect_watch(&w, 5, "20");
  assert_null(kcm_informer_get(&w.inf, "default", "a"));
  assert_non_null(kcm_informer_get(&w.inf, "default", "b"));
  assert_int_equal(w.inf.stats.relists, 1);
  assert_int_equal(w.inf.stats.fallbacks, 0);
  wire_stop(&w);
}

/* A protobuf watch event: WatchEvent{type, RawExtension{envelope{Pod}}}
 * framed by its length; the pod's ObjectMeta holds name (1), namespace
 * (3), uid (5), resourceVersion (6) and, when end, the annotation that
 * ends a stream's initial events (12). */
static void pb_event(struct kcm_buf *frames, const char *type, const char *name, const char *rv,
                     bool end) {
  struct kcm_buf meta = KCM_BUF_INIT(1 << 20), pod = KCM_BUF_INIT(1 << 20),
                 env = KCM_BUF_INIT(1 << 20), ev = KCM_BUF_INIT(1 << 20),
                 part = KCM_BUF_INIT(1 << 20);
  uint8_t len[4];
  if (name) {
    pbw_str(&meta, 1, name);
    pbw_str(&meta, 3, "default");
    pbw_str(&meta, 5, "6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51");
  }
  pbw_str(&meta, 6, rv);
  if (end) {
    pbw_str(&part, 1, "k8s.io/initial-events-end");
    pbw_str(&part, 2, "true");
    pbw_msg(&meta, 12, &part);
  }
  pbw_msg(&pod, 1, &meta);
  kcm_buf_reset(&part);
  pbw_str(&part, 1, "v1");
  pbw_str(&part, 2, "Pod");
  kcm_buf_append(&env, KCM_PB_MAGIC, KCM_PB_MAGIC_LEN);
  pbw_msg(&env, 1, &part);
  pbw_msg(&env, 2, &pod);
  kcm_buf_reset(&part);
  pbw_msg(&part, 1, &env);
  pbw_str(&ev, 1, type);
  pbw_msg(&ev, 2, &part);
  len[0] = len[1] = 0;
  len[2] = (uint8_t)(ev.len >> 8);
  len[3] = (uint8_t)ev.len;
  kcm_buf_append(frames, len, 4);
  kcm_buf_append(frames, ev.data, ev.len);
  kcm_buf_release(&meta);
  kcm_buf_release(&pod);
  kcm_buf_release(&env);
  kcm_buf_release(&ev);
  kcm_buf_release(&part);
}

/* In protobuf, the bookmark's annotation ends the initial events too; a
 * bookmark without it does not. */
static void streamed_list_in_protobuf(void **state) {
  struct kcm_buf frames = KCM_BUF_INIT(1 << 20);
  struct peer_answer answers[2] = {{PB_WATCH, NULL}, {OK_JSON, ""}};
  size_t lengths[2] = {0, 0};
  struct wire w;
  pb_event(&frames, "ADDED", "a", "5", false);
  pb_event(&frames, "BOOKMARK", NULL, "8", false);
  pb_event(&frames, "ADDED", "b", "7", false);
  pb_event(&frames, "BOOKMARK", NULL, "10", true);
  answers[0].body = frames.data;
  lengths[0] = frames.len;
  wire_answer_all_with(&w, answers, lengths, 2, "default", WIRE_PROTOBUF | WIRE_STREAM);
  assert_true(asks_for_protobuf(&w, 0));
  expect_streamed(&w, 0, "");
  expect_watch(&w, 1, "10");
  assert_int_equal(kcm_informer_len(&w.inf), 2);
  assert_int_equal(w.inf.stats.decode_errors, 0);
  assert_int_equal(w.inf.stats.fallbacks, 0);
  wire_stop(&w);
  kcm_buf_release(&frames);
}

/* A protobuf list whose metadata is malformed (its version's length runs
 * past it) costs the attempt, as malformed JSON does. */
static void protobuf_bad_list_metadata_is_retried(void **state) {
  static const struct peer_answer answers[] = {
      {PB_LIST, "k8s\0\x12\x06\x0a\x04\x12\x03" "10"},
      {PB_LIST, "k8s\0\x12\x06\x0a\x04\x12\x02" "10"},
      {OK_JSON, ""},
  };
  static const size_t lengths[] = {12, 12, 0};
  struct wire w;
  wire_answer_all_with(&w, answers, lengths, 3, "default", true);
  assert_true(w.inf.stats.failures >= 1);
  expect_param(&w, 1, "watch", NULL);
  expect_param(&w, 2, "watch", "1");
  expect_param(&w, 2, "resourceVersion", "10");
  wire_stop(&w);
}

/* Broken protobuf events are counted and skipped, the stream read on. */
static void protobuf_bad_events_are_skipped(void **state) {
  struct kcm_buf frames = KCM_BUF_INIT(1 << 20), ev = KCM_BUF_INIT(1 << 20),
                 ext = KCM_BUF_INIT(1 << 20);
  size_t watch_len;
  char *watch = pbw_read_data("watch-1.24.pb", &watch_len);
  struct peer_answer answers[3] = {{PB_LIST, "k8s\0\x12\x04\x0a\x02\x12\x00"}, /* empty */
                                   {PB_WATCH, NULL},
                                   {OK_JSON, ""}};
  size_t lengths[3] = {10, 0, 0};
  struct wire w;
  uint8_t len[4];

  /* An event whose object is no envelope, one of an unknown type, then
   * the captured events. */
  pbw_str(&ext, 1, "not protobuf");
  pbw_str(&ev, 1, "ADDED");
  pbw_msg(&ev, 2, &ext);
  len[0] = len[1] = len[2] = 0;
  len[3] = (uint8_t)ev.len;
  kcm_buf_append(&frames, len, 4);
  kcm_buf_append(&frames, ev.data, ev.len);
  kcm_buf_reset(&ev);
  pbw_str(&ev, 1, "SIDEWAYS");
  pbw_msg(&ev, 2, &ext);
  len[3] = (uint8_t)ev.len;
  kcm_buf_append(&frames, len, 4);
  kcm_buf_append(&frames, ev.data, ev.len);
  kcm_buf_append(&frames, watch, watch_len);
  answers[1].body = frames.data;
  lengths[1] = frames.len;
  wire_answer_all_with(&w, answers, lengths, 3, "fixture", WIRE_PROTOBUF);
  assert_int_equal(w.inf.stats.decode_errors, 2);
  assert_int_equal(w.inf.stats.bookmarks, 1);
  assert_string_equal(w.inf.rv, "250");
  /* The captured events modify pods this list did not have: added. */
  assert_non_null(kcm_informer_get(&w.inf, "fixture", "web-7d9c-abcde"));
  wire_stop(&w);
  kcm_buf_release(&frames);
  kcm_buf_release(&ev);
  kcm_buf_release(&ext);
  free(watch);
}

/* --- objects the cache cannot read ---------------------------------------------------- */

/* A pod kcm cannot read: restartCount of the wrong type. */
#define BAD_POD(name, rv)                                                                      \
  "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"default\",\"uid\":"                     \
  "\"6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51\",\"resourceVersion\":\"" rv "\"},\"status\":"        \
  "{\"containerStatuses\":[{\"name\":\"c\",\"restartCount\":\"x\"}]}}"
#define POD(name, rv)                                                                          \
  "{\"metadata\":{\"name\":\"" name "\",\"namespace\":\"default\",\"uid\":"                     \
  "\"6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51\",\"resourceVersion\":\"" rv "\"}}"
#define EVENT(type, obj) "{\"type\":\"" type "\",\"object\":" obj "}\n"

/* What the handlers were told: "+name@rv", "~name@rv" for an update
 * (with "!" when successive), "-name@rv" for a deletion. */
static struct kcm_buf told;
static struct kcm_informer *telling;
static void tell_added(void *ctx, struct kcm_object *o) {
  kcm_buf_appendf(&told, "+%s@%llu ", o->name, (unsigned long long)o->rv);
}
static void tell_updated(void *ctx, struct kcm_object *old, struct kcm_object *cur) {
  kcm_buf_appendf(&told, "~%s@%llu%s ", cur->name, (unsigned long long)cur->rv,
                  kcm_informer_successive(telling) ? "!" : "");
}
static void tell_deleted(void *ctx, struct kcm_object *o, bool unknown) {
  kcm_buf_appendf(&told, "-%s@%llu ", o->name, (unsigned long long)o->rv);
}
static const struct kcm_informer_handler teller = {tell_added, tell_updated, tell_deleted, NULL};

/* An object the cache cannot read keeps its last copy: a watch event of
 * it changes nothing, a relist does not delete it, and the update that
 * follows it is not successive (what changed between the copies is more
 * than one write). A DELETED event of it deletes it. A list item whose
 * name cannot be read either makes the relist delete nothing. */
static void unreadable_objects_keep_their_last_copy_in(unsigned how) {
  static const char *const first = "{\"metadata\":{\"resourceVersion\":\"6\"},\"items\":["
      POD("a", "5") "," POD("b", "6") "]}";
  static const char *const relist = "{\"metadata\":{\"resourceVersion\":\"10\"},\"items\":["
      POD("a", "9") "," BAD_POD("b", "10") "]}";
  static const char *const blind = "{\"metadata\":{\"resourceVersion\":\"20\"},\"items\":["
      "{\"metadata\":{\"namespace\":\"default\"},\"status\":{\"phase\":7}}]}";
  struct peer_answer answers[] = {
      {OK_JSON, first},
      {OK_JSON, EVENT("MODIFIED", BAD_POD("b", "7")) EVENT("MODIFIED", POD("a", "8"))},
      {GONE, GONE_BODY},
      {OK_JSON, relist},
      {OK_JSON, EVENT("MODIFIED", POD("b", "11")) EVENT("MODIFIED", POD("b", "12"))
                    EVENT("MODIFIED", BAD_POD("a", "13")) EVENT("DELETED", BAD_POD("b", "14"))
                        EVENT("MODIFIED", POD("a", "15"))},
      {GONE, GONE_BODY},
      {OK_JSON, blind},
      {OK_JSON, ""},
  };
  struct wire w;
  const size_t n = sizeof(answers) / sizeof(answers[0]);
  kcm_buf_init(&told, 1 << 16);
  if (how & WIRE_STREAM) { /* the lists streamed: each list's objects, then its bookmark */
    answers[0].body = EVENT("ADDED", POD("a", "5")) EVENT("ADDED", POD("b", "6")) END_MARK("6")
        EVENT("MODIFIED", BAD_POD("b", "7")) EVENT("MODIFIED", POD("a", "8"));
    answers[1] = (struct peer_answer){GONE, GONE_BODY};
    answers[2] = (struct peer_answer){
        OK_JSON, EVENT("ADDED", POD("a", "9")) EVENT("ADDED", BAD_POD("b", "10")) END_MARK("10")
                     EVENT("MODIFIED", POD("b", "11")) EVENT("MODIFIED", POD("b", "12"))
                         EVENT("MODIFIED", BAD_POD("a", "13")) EVENT("DELETED", BAD_POD("b", "14"))
                             EVENT("MODIFIED", POD("a", "15"))};
    answers[3] = (struct peer_answer){GONE, GONE_BODY};
    answers[4] = (struct peer_answer){
        OK_JSON, EVENT("ADDED", "{\"metadata\":{\"namespace\":\"default\"},\"status\":{\"phase\":7}}")
                     END_MARK("20")};
    answers[5] = (struct peer_answer){OK_JSON, ""};
  }
  wire_handler = &teller;
  telling = &w.inf;
  wire_answer_all_with(&w, answers, NULL, how & WIRE_STREAM ? 6 : n, "default", how);
  wire_handler = NULL;
  assert_string_equal(told.data, "+a@5 +b@6 ~a@8! ~a@9 ~b@11 ~b@12! -b@12 ~a@15 ");
  /* the last list deleted nothing: it had an item whose name is unknown */
  assert_non_null(kcm_informer_get(&w.inf, "default", "a"));
  assert_true(w.inf.blind);
  assert_int_equal(w.inf.stats.unreadable, 5);
  wire_stop(&w);
  kcm_buf_release(&told);
}

static void unreadable_objects_keep_their_last_copy(void **state) {
  unreadable_objects_keep_their_last_copy_in(0);
}

static void unreadable_objects_keep_their_last_copy_streamed(void **state) {
  unreadable_objects_keep_their_last_copy_in(WIRE_STREAM);
}

/* A key goes with its object: a pod first seen unreadable and then deleted
 * leaves nothing in the set of unreadable objects; a deletion of an object
 * whose name cannot be read makes the cache blind (a ghost may be left). */
static void unreadable_keys_go_with_their_objects(void **state) {
  static const struct peer_answer answers[] = {
      {OK_JSON, "{\"metadata\":{\"resourceVersion\":\"4\"},\"items\":[]}"},
      {OK_JSON, EVENT("ADDED", BAD_POD("x", "5")) EVENT("DELETED", POD("x", "6"))
                    EVENT("ADDED", POD("y", "7"))},
      {OK_JSON, EVENT("DELETED", "{\"metadata\":{\"namespace\":\"default\"},\"status\":"
                                 "{\"phase\":7}}")},
      {OK_JSON, ""},
  };
  struct wire w;
  wire_answer_all_with(&w, answers, NULL, 4, "default", 0);
  assert_non_null(kcm_informer_get(&w.inf, "default", "y"));
  assert_null(kcm_informer_get(&w.inf, "default", "x"));
  assert_int_equal(w.inf.unreadable.len, 0);
  assert_true(w.inf.blind);
  wire_stop(&w);
}

/* --- list responses, split into items ------------------------------------------------ */

/* What the reader handed out, as "I:<item>\n", "M:<metadata>\n" and
 * "X:<why>\n" lines, then "=<result>:<error>". */
static int record(enum kcm_items_part part, const char *text, size_t len, const char *why,
                  void *data) {
  struct kcm_buf *log = data;
  if (!text)
    return kcm_buf_appendf(log, "X:%s\n", why);
  return kcm_buf_appendf(log, "%c:%.*s\n", part == KCM_ITEMS_ITEM ? 'I' : 'M', (int)len, text);
}

static uint64_t fnv(const char *p, size_t n) {
  uint64_t h = 14695981039346656037ULL;
  while (n--)
    h = (h ^ (uint8_t)*p++) * 1099511628211ULL;
  return h;
}

/* The same for a protobuf list, whose parts are bytes: "<part>:<length>:<digest>". */
static int pb_record_part(enum kcm_items_part part, const char *text, size_t len,
                          const char *why, void *data) {
  if (!text)
    return kcm_buf_appendf(data, "X:%s\n", why);
  return kcm_buf_appendf(data, "%c:%zu:%016llx\n", part == KCM_ITEMS_ITEM ? 'I' : 'M', len,
                         (unsigned long long)fnv(text, len));
}

/* Feed body[0..len) to the JSON reader (or with proto, the protobuf one)
 * in pieces cut at cuts[0..n) (ascending offsets), then finish; returns
 * the record (caller frees). */
static char *split_any(bool proto, const char *body, size_t len, size_t max, const size_t *cuts,
                       size_t n) {
  struct kcm_buf log = KCM_BUF_INIT(1 << 20);
  struct kcm_items s;
  struct kcm_pbitems pb;
  size_t at = 0, i;
  int rc = 0;
  if (proto)
    kcm_pbitems_init(&pb, max, pb_record_part, &log);
  else
    kcm_items_init(&s, max, record, &log);
  for (i = 0; i <= n && !rc; i++) {
    size_t end = i < n ? cuts[i] : len;
    rc = proto ? kcm_pbitems_feed(&pb, body + at, end - at) : kcm_items_feed(&s, body + at, end - at);
    at = end;
  }
  if (!rc)
    rc = proto ? kcm_pbitems_finish(&pb) : kcm_items_finish(&s);
  kcm_buf_appendf(&log, "=%d:%s", rc, (proto ? pb.err : s.err) ? (proto ? pb.err : s.err) : "");
  if (proto)
    kcm_pbitems_release(&pb);
  else
    kcm_items_release(&s);
  return kcm_buf_take(&log);
}

static char *json_items(const char *body, size_t len, size_t max, const size_t *cuts, size_t n) {
  return split_any(false, body, len, max, cuts, n);
}

static char *pb_items(const char *body, size_t len, size_t max, const size_t *cuts, size_t n) {
  return split_any(true, body, len, max, cuts, n);
}

static char *split_list(const char *body, size_t max, const size_t *cuts, size_t n) {
  return json_items(body, strlen(body), max, cuts, n);
}

static char *whole_list(const char *body, size_t max) { return split_list(body, max, NULL, 0); }

typedef char *(*split_reader)(const char *, size_t, size_t, const size_t *, size_t);

/* The record of a body is `want` whether it comes whole, in two pieces cut
 * anywhere, or a byte at a time. */
static void expect_same_split_as(split_reader read, const char *body, size_t len, size_t max,
                                 const char *want) {
  size_t i, *bytes = calloc(len + 1, sizeof(*bytes));
  char *got;
  for (i = 0; i <= len; i++) {
    got = read(body, len, max, &i, 1);
    assert_string_equal(got, want);
    free(got);
  }
  for (i = 0; i < len; i++)
    bytes[i] = i + 1;
  got = read(body, len, max, bytes, len ? len - 1 : 0);
  assert_string_equal(got, want);
  free(got);
  free(bytes);
}

static void expect_same_split(const char *body, size_t max) {
  char *want = whole_list(body, max);
  expect_same_split_as(json_items, body, strlen(body), max, want);
  free(want);
}

static const char list_body[] =
    " {\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"42\","
    "\"continue\":\"t\\\"k\"},\n\"items\":[{\"metadata\":{\"name\":\"a\"},\"s\":\"]}[{\\\\\"},"
    "{\"x\":[1,-2.5e3,true,null,{\"y\":\"\\u00e9\"}]} , 7,\"str\",null,[]],\"extra\":{\"items\":"
    "[{\"no\":1}]},\"n\":-1} \r\n";

static void items_at_every_split(void **state) {
  char *got = whole_list(list_body, 1 << 20);
  assert_string_equal(got,
                      "M:{\"resourceVersion\":\"42\",\"continue\":\"t\\\"k\"}\n"
                      "I:{\"metadata\":{\"name\":\"a\"},\"s\":\"]}[{\\\\\"}\n"
                      "I:{\"x\":[1,-2.5e3,true,null,{\"y\":\"\\u00e9\"}]}\n"
                      "I:7\nI:\"str\"\nI:null\nI:[]\n=0:");
  free(got);
  expect_same_split(list_body, 1 << 20);
}

static void items_empty_and_null_lists(void **state) {
  char *got = whole_list("{\"items\":[]}", 64);
  assert_string_equal(got, "=0:");
  free(got);
  got = whole_list("{\"metadata\":{},\"items\":null}", 64);
  assert_string_equal(got, "M:{}\n=0:");
  free(got);
  /* metadata after the items is read too */
  got = whole_list("{\"items\":[{}],\"metadata\":{\"resourceVersion\":\"9\"}}", 64);
  assert_string_equal(got, "I:{}\nM:{\"resourceVersion\":\"9\"}\n=0:");
  free(got);
}

static void items_malformed_lists_fail(void **state) {
  static const struct {
    const char *body, *why;
  } cases[] = {
      {"", "the list response is not a JSON object"},
      {"<html>proxy error</html>", "the list response is not a JSON object"},
      {"[{\"items\":[]}]", "the list response is not a JSON object"},
      {"{}", "the list response has no items list"},
      {"{\"kind\":\"PodList\"}", "the list response has no items list"},
      {"{\"items\":{}}", "the list response's items is not a list"},
      {"{\"items\":\"x\"}", "the list response's items is not a list"},
      {"{\"items\":[],\"items\":[]}", "the list response has two items lists"},
      {"{\"items\":[{}", "the list response ended early"},
      {"{\"items\":[{\"a\":\"}]}", "the list response ended early"},
      {"{\"items\":[]", "the list response ended early"},
      {"{\"items\":[{]}]}", "the list response's brackets do not match"},
      {"{\"items\":[],}", "the list response is not valid JSON"},
      {"{\"items\":[{},]}", "the list response is not valid JSON"},
      {"{\"items\":[{}{}]}", "the list response is not valid JSON"},
      {"{\"items\" [] }", "the list response is not valid JSON"},
      {"{items:[]}", "the list response is not valid JSON"},
      {"{\"a\":1\"b\",\"items\":[]}", "the list response is not valid JSON"},
      {"{\"items\":[]}x", "the list response has text after its end"},
      {"{\"items\":[]}{}", "the list response has text after its end"},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char *got = whole_list(cases[i].body, 64), want[160];
    snprintf(want, sizeof(want), "=%d:%s", KCM_EINVAL, cases[i].why);
    assert_non_null(strstr(got, want));
    free(got);
    expect_same_split(cases[i].body, 64);
  }
}

/* Items nest to any depth (kube-apiserver keeps managedFields 10,000
 * levels deep): a deep item is passed whole, the list goes on, and a
 * bracket of the wrong kind deep inside still fails the list. */
static void items_nest_to_any_depth(void **state) {
  static const int depths[] = {300, 10000};
  char *tail;
  size_t k;
  for (k = 0; k < 2; k++) {
    struct kcm_buf deep = KCM_BUF_INIT(1 << 20);
    int i, n = depths[k];
    char *got, *want;
    kcm_buf_append_str(&deep, "{\"items\":[");
    for (i = 0; i < n; i++)
      kcm_buf_append_str(&deep, "[");
    for (i = 0; i < n; i++)
      kcm_buf_append_str(&deep, "]");
    kcm_buf_append_str(&deep, ",{\"n\":1}]}");
    got = whole_list(deep.data, 1 << 20);
    want = malloc(2 * (size_t)n + 64);
    assert_non_null(want);
    strcpy(want, "I:");
    memcpy(want + 2, deep.data + 10, 2 * (size_t)n);
    strcpy(want + 2 + 2 * n, "\nI:{\"n\":1}\n=0:");
    assert_string_equal(got, want);
    free(got);
    free(want);
    if (n < 1000) /* at every split: quadratic in the length */
      expect_same_split(deep.data, 1 << 20);
    deep.data[10 + n + n / 2] = '}';
    got = whole_list(deep.data, 1 << 20);
    assert_non_null(strstr(got, "the list response's brackets do not match"));
    free(got);
    kcm_buf_release(&deep);
  }
  /* A level costs a byte: an item nested deeper than the cap fails the
   * list rather than grow the stack past it. */
  tail = whole_list("{\"items\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}", 24);
  assert_non_null(strstr(tail, "nests deeper than an item may be long"));
  free(tail);
}

static void items_over_the_cap_are_skipped(void **state) {
  static const char body[] = "{\"metadata\":{\"resourceVersion\":\"5\"},\"items\":["
                             "{\"name\":\"big-big-big-big-big-big\"},{\"name\":\"ok\"},"
                             "\"a-long-string-value-here\",{\"n\":1}]}";
  char *got = whole_list(body, 24);
  assert_string_equal(got, "M:{\"resourceVersion\":\"5\"}\n"
                           "X:item larger than the size limit\n"
                           "I:{\"name\":\"ok\"}\n"
                           "X:item larger than the size limit\n"
                           "I:{\"n\":1}\n=0:");
  free(got);
  expect_same_split(body, 24);
  /* The list's metadata has the same cap, and fails the list. */
  got = whole_list("{\"metadata\":{\"continue\":\"a-token-longer-than-the-cap\"},\"items\":[]}", 24);
  assert_non_null(strstr(got, "the list's metadata is larger than the size limit"));
  free(got);
}

/* The reader stops when the callback says so, and passes its result on. */
static int stop_at_second(enum kcm_items_part part, const char *text, size_t len,
                          const char *why, void *data) {
  int *seen = data;
  return ++*seen == 2 ? 77 : 0;
}

static void items_callback_stops_the_reader(void **state) {
  static const char body[] = "{\"items\":[1,2,3]}";
  struct kcm_items s;
  int seen = 0;
  kcm_items_init(&s, 64, stop_at_second, &seen);
  assert_int_equal(kcm_items_feed(&s, body, strlen(body)), 77);
  assert_int_equal(seen, 2);
  kcm_items_reset(&s);
  seen = -10;
  assert_int_equal(kcm_items_feed(&s, body, strlen(body)), 0);
  assert_int_equal(kcm_items_finish(&s), 0);
  assert_int_equal(seen, -7);
  kcm_items_release(&s);
}

static int start_sim(void **state) { return support_start_sim(NULL); }
static int stop_sim(void **state) {
  support_stop_sim();
  return 0;
}

static bool resynced_twice(void *arg) { return ((struct fixture *)arg)->resynced >= 2; }

static void periodic_resync(void **state) {
  struct fixture f;
  fixture_init_resync(&f, 200);
  make_pod(&f, "a", NULL);
  kcm_informer_start(&f.inf);
  wait_converged(&f);
  assert_true(support_run_until(&f.loop, resynced_twice, &f, 5000));
  assert_int_equal(f.updated, f.resynced); /* nothing changed: only resyncs */
  assert_int_equal(f.inf.stats.lists, 1);  /* a resync replays the cache; it does not list */
  fixture_free(&f);
}

/* --- protobuf: framing by length, lists split into items ----------------------------- */

/* What the length framer handed out: "F:<length>:<digest>" per frame,
 * "X:<why>" per frame reported. */
static int pb_record_frame(const char *text, size_t len, const char *why, void *data) {
  if (!text)
    return kcm_buf_appendf(data, "X:%s\n", why);
  return kcm_buf_appendf(data, "F:%zu:%016llx\n", len, (unsigned long long)fnv(text, len));
}

/* Feed body[0..len) in pieces cut at cuts[0..n), then end the stream. */
static char *pb_frames(const char *body, size_t len, size_t max, const size_t *cuts, size_t n) {
  struct kcm_buf log = KCM_BUF_INIT(1 << 20);
  struct kcm_framer f;
  size_t at = 0, i;
  assert_int_equal(kcm_framer_init(&f, max, pb_record_frame, &log), 0);
  kcm_framer_reset(&f, true);
  for (i = 0; i <= n; i++) {
    size_t end = i < n ? cuts[i] : len;
    assert_int_equal(kcm_framer_feed(&f, body + at, end - at), 0);
    at = end;
  }
  kcm_framer_flush(&f);
  kcm_framer_release(&f);
  return kcm_buf_take(&log);
}

/* kube-apiserver's protobuf watch: four events, length-prefixed. */
static void framing_by_length(void **state) {
  size_t len;
  char *body = pbw_read_data("watch-1.24.pb", &len), *want = pb_frames(body, len, 1 << 20, NULL, 0),
       *got;
  struct kcm_framer f;
  struct kcm_buf log = KCM_BUF_INIT(1 << 20);
  assert_int_equal(strncmp(want, "F:3692:", 7), 0);
  assert_non_null(strstr(want, "\nF:1373:"));
  assert_non_null(strstr(want, "\nF:1372:"));
  assert_non_null(strstr(want, "\nF:104:"));
  assert_null(strstr(want, "X:"));
  expect_same_split_as(pb_frames, body, len, 1 << 20, want);
  /* A frame over the cap is reported and skipped; the next is whole. */
  got = pb_frames(body, len, 2000, NULL, 0);
  assert_int_equal(strncmp(got, "X:event larger than the size limit\nF:1373:", 42), 0);
  free(got);
  /* A stream that ends inside a frame reports it. */
  got = pb_frames(body, 3692 + 4 + 10, 1 << 20, NULL, 0);
  assert_non_null(strstr(got, "\nX:event cut short\n"));
  free(got);
  /* Empty frames are passed on (the reader reports them). */
  assert_int_equal(kcm_framer_init(&f, 64, pb_record_frame, &log), 0);
  kcm_framer_reset(&f, true);
  assert_int_equal(kcm_framer_feed(&f, "\0\0\0\0\0\0\0\1x", 9), 0);
  assert_false(kcm_framer_partial(&f));
  assert_string_equal(log.data, "F:0:cbf29ce484222325\nF:1:af63f54c86021707\n");
  kcm_framer_release(&f);
  kcm_buf_release(&log);
  free(want);
  free(body);
}

/* kube-apiserver's protobuf list: its metadata and three items, cut anywhere. */
static void pbitems_at_every_split(void **state) {
  size_t len, i, n = 0;
  char *body = pbw_read_data("pods-1.24.pb", &len), *want = pb_items(body, len, 1 << 20, NULL, 0);
  for (i = 0; want[i]; i++)
    n += want[i] == '\n';
  assert_int_equal(n, 4);
  assert_int_equal(strncmp(want, "M:", 2), 0);
  assert_non_null(strstr(want, "=0:"));
  expect_same_split_as(pb_items, body, len, 1 << 20, want);
  free(want);
  free(body);
}

/* Whatever cuts a list short or breaks its framing fails it. */
static void pbitems_malformed_lists_fail(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 20), list = KCM_BUF_INIT(1 << 20);
  size_t len, cut;
  char *body = pbw_read_data("pods-1.24.pb", &len), *got;

  /* Every cut before the envelope's last two (empty) fields. */
  for (cut = 0; cut + 4 < len; cut++) {
    got = pb_items(body, cut, 1 << 20, NULL, 0);
    assert_non_null(strstr(got, "=-2:"));
    free(got);
  }
  got = pb_items("{\"items\":[]}", 12, 64, NULL, 0);
  assert_string_equal(got, "=-2:not a protobuf object (no k8s magic)");
  free(got);
  /* An item longer than the list that holds it. */
  kcm_buf_append(&b, KCM_PB_MAGIC, KCM_PB_MAGIC_LEN);
  pbw_tag(&list, 2, 2);
  pbw_varint(&list, 50);
  pbw_msg(&b, 2, &list);
  got = pb_items(b.data, b.len, 1 << 20, NULL, 0);
  assert_string_equal(got, "=-2:a field runs past the end of the list");
  free(got);
  /* A group, and two lists. */
  kcm_buf_reset(&b);
  kcm_buf_append(&b, KCM_PB_MAGIC, KCM_PB_MAGIC_LEN);
  pbw_tag(&b, 5, 3);
  got = pb_items(b.data, b.len, 1 << 20, NULL, 0);
  assert_string_equal(got, "=-2:malformed field tag");
  free(got);
  kcm_buf_reset(&b);
  kcm_buf_reset(&list);
  kcm_buf_append(&b, KCM_PB_MAGIC, KCM_PB_MAGIC_LEN);
  pbw_str(&list, 2, "item");
  pbw_msg(&b, 2, &list);
  pbw_msg(&b, 2, &list);
  got = pb_items(b.data, b.len, 1 << 20, NULL, 0);
  assert_string_equal(got, "I:4:2841a0c596d6f426\n=-2:two lists in one response");
  free(got);
  /* No list at all. */
  kcm_buf_reset(&b);
  kcm_buf_append(&b, KCM_PB_MAGIC, KCM_PB_MAGIC_LEN);
  pbw_str(&b, 3, "");
  got = pb_items(b.data, b.len, 1 << 20, NULL, 0);
  assert_string_equal(got, "=-2:no list in the response");
  free(got);
  kcm_buf_release(&b);
  kcm_buf_release(&list);
  free(body);
}

/* Items over the cap are reported and skipped; metadata over it fails. */
static void pbitems_over_the_cap(void **state) {
  size_t len;
  char *body = pbw_read_data("pods-1.24.pb", &len), *got = pb_items(body, len, 1000, NULL, 0);
  assert_int_equal(strncmp(got, "M:", 2), 0);
  assert_non_null(strstr(got, "\nX:item larger than the size limit\n"
                              "X:item larger than the size limit\n"
                              "X:item larger than the size limit\n=0:"));
  free(got);
  expect_same_split_as(pb_items, body, len, 1000, (got = pb_items(body, len, 1000, NULL, 0)));
  free(got);
  got = pb_items(body, len, 4, NULL, 0);
  assert_string_equal(got, "=-2:list metadata larger than the size limit");
  free(got);
  free(body);
}

int main(void) {
  const struct CMUnitTest framing[] = {
      cmocka_unit_test(framing_at_every_split),
      cmocka_unit_test(framing_byte_by_byte),
      cmocka_unit_test(framing_skips_bad_values),
      cmocka_unit_test(framing_caps_event_size),
      cmocka_unit_test(framing_reports_truncated_end),
      cmocka_unit_test(framing_by_length),
  };
  const struct CMUnitTest items[] = {
      cmocka_unit_test(items_at_every_split),
      cmocka_unit_test(items_empty_and_null_lists),
      cmocka_unit_test(items_malformed_lists_fail),
      cmocka_unit_test(items_nest_to_any_depth),
      cmocka_unit_test(unreadable_objects_keep_their_last_copy),
      cmocka_unit_test(unreadable_objects_keep_their_last_copy_streamed),
      cmocka_unit_test(unreadable_keys_go_with_their_objects),
      cmocka_unit_test(items_over_the_cap_are_skipped),
      cmocka_unit_test(items_callback_stops_the_reader),
      cmocka_unit_test(pbitems_at_every_split),
      cmocka_unit_test(pbitems_malformed_lists_fail),
      cmocka_unit_test(pbitems_over_the_cap),
  };
  const struct CMUnitTest live[] = {
      cmocka_unit_test(lists_then_watches),
      cmocka_unit_test(keeps_only_the_namespaces_asked),
      cmocka_unit_test(keeps_only_the_namespaces_asked_streaming),
      cmocka_unit_test(lists_then_watches_in_protobuf),
      cmocka_unit_test(streams_then_watches),
      cmocka_unit_test(streams_then_watches_in_protobuf),
      cmocka_unit_test(stream_refused_by_the_local_server),
      cmocka_unit_test(converges_after_dropped_watches),
      cmocka_unit_test(relists_after_history_is_compacted),
      cmocka_unit_test(throttled_list_honours_retry_after),
      cmocka_unit_test(server_errors_and_latency),
      cmocka_unit_test(garbage_is_counted_and_skipped),
      cmocka_unit_test(broken_event_type_is_skipped),
      cmocka_unit_test(events_sharing_a_line),
      cmocka_unit_test(repeated_event_keys_keep_the_last),
      cmocka_unit_test(many_events_on_one_line),
      cmocka_unit_test(writes_the_cache_has_not_seen),
      cmocka_unit_test(periodic_resync),
  };
  const struct CMUnitTest wire[] = {
      cmocka_unit_test(list_query_is_encoded),
      cmocka_unit_test(lists_ask_the_watch_cache),
      cmocka_unit_test(paged_answer_at_zero_keeps_paging),
      cmocka_unit_test(malformed_list_is_retried_whole),
      cmocka_unit_test(huge_retry_after_is_capped),
      cmocka_unit_test(protobuf_list_and_watch),
      cmocka_unit_test(protobuf_asked_json_answered),
      cmocka_unit_test(protobuf_bad_events_are_skipped),
      cmocka_unit_test(protobuf_expired_watch_relists),
      cmocka_unit_test(streamed_list_then_the_same_stream),
      cmocka_unit_test(refused_stream_falls_back_to_a_list),
      cmocka_unit_test(cut_stream_is_streamed_again),
      cmocka_unit_test(expired_stream_streams_the_newest),
      cmocka_unit_test(streamed_list_in_protobuf),
      cmocka_unit_test(protobuf_bad_list_metadata_is_retried),
  };
  int failed = cmocka_run_group_tests_name("framing", framing, NULL, NULL);
  failed += cmocka_run_group_tests_name("items", items, NULL, NULL);
  failed += cmocka_run_group_tests_name("wire", wire, NULL, NULL);
  failed += cmocka_run_group_tests_name("informer", live, start_sim, stop_sim);
  return failed;
}
