/* Unit tests for decoding cached objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "../../src/api/internal.h"
#include "../oracle/tree.h"
#include "kcm/api.h"
#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/pb.h"
#include "pbwrite.h"
#include "../../src/labels/internal.h"

static struct kcm_intern pool;

static int setup(void **state) {
  kcm_intern_init(&pool);
  return 0;
}
static int teardown(void **state) {
  assert_int_equal(kcm_intern_count(&pool), 0); /* every object released its strings */
  kcm_intern_release(&pool);
  return 0;
}

/* Objects decode two ways — from a json-c tree and from the text in place —
 * and both must give the same object or fail on the same field. */
static void same_meta(const struct kcm_object *a, const struct kcm_object *b) {
  uint32_t i;
  assert_string_equal(a->name, b->name);
  assert_ptr_equal(a->ns, b->ns);
  assert_memory_equal(&a->uid, &b->uid, sizeof(a->uid));
  assert_int_equal(a->rv, b->rv);
  assert_int_equal(a->generation, b->generation);
  assert_int_equal(a->created, b->created);
  assert_int_equal(a->deleted, b->deleted);
  assert_int_equal(a->labels.n, b->labels.n);
  for (i = 0; i < a->labels.n; i++) {
    assert_ptr_equal(a->labels.items[i].key, b->labels.items[i].key);
    assert_ptr_equal(a->labels.items[i].value, b->labels.items[i].value);
  }
  assert_int_equal(a->nowners, b->nowners);
  assert_int_equal(a->has_controller, b->has_controller);
  assert_ptr_equal(a->controller.name, b->controller.name);
  assert_memory_equal(&a->controller.uid, &b->controller.uid,
                      sizeof(a->controller.uid));
  assert_int_equal(kcm_api_size(a), kcm_api_size(b));
}

static void same_pairs(const struct kcm_pairs *a, const struct kcm_pairs *b) {
  uint32_t i;
  assert_int_equal(a->n, b->n);
  for (i = 0; i < a->n; i++) {
    assert_string_equal(a->items[i].key, b->items[i].key);
    assert_string_equal(a->items[i].value, b->items[i].value);
  }
}

static void same_string(const char *a, const char *b) {
  if (a || b) {
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a, b);
  }
}

static void same_conditions(const struct kcm_conditions *a,
                            const struct kcm_conditions *b) {
  uint32_t i;
  assert_int_equal(a->n, b->n);
  for (i = 0; i < a->n; i++) {
    same_string(a->items[i].type, b->items[i].type);
    same_string(a->items[i].status, b->items[i].status);
    same_string(a->items[i].reason, b->items[i].reason);
    same_string(a->items[i].message, b->items[i].message);
    assert_int_equal(a->items[i].last_update, b->items[i].last_update);
    assert_int_equal(a->items[i].last_transition, b->items[i].last_transition);
  }
}

static void same_selector(const struct kcm_selector *a,
                          const struct kcm_selector *b) {
  struct kcm_buf x = KCM_BUF_INIT(1u << 20), y = KCM_BUF_INIT(1u << 20);
  assert_int_equal(kcm_labels_selector_format(a, &x), 0);
  assert_int_equal(kcm_labels_selector_format(b, &y), 0);
  assert_int_equal(x.len, y.len);
  assert_memory_equal(x.data, y.data, x.len);
  assert_int_equal(a->nothing, b->nothing);
  kcm_buf_release(&x);
  kcm_buf_release(&y);
}

static void same_writers(const struct kcm_writers *a, const struct kcm_writers *b) {
  uint8_t i;
  assert_int_equal(a->n, b->n);
  assert_int_equal(a->more, b->more);
  for (i = 0; i < a->n; i++) {
    assert_ptr_equal(a->status[i].manager, b->status[i].manager); /* pooled */
    assert_int_equal(a->status[i].at, b->status[i].at);
  }
}

static void same_replicaset(const struct kcm_replicaset *a,
                            const struct kcm_replicaset *b) {
  uint32_t i;
  same_meta(&a->o, &b->o);
  same_writers(&a->writers, &b->writers);
  same_pairs(&a->annotations, &b->annotations);
  same_selector(&a->selector, &b->selector);
  assert_int_equal(a->template_labels.n, b->template_labels.n);
  for (i = 0; i < a->template_labels.n; i++)
    assert_ptr_equal(a->template_labels.items[i].value,
                     b->template_labels.items[i].value);
  assert_string_equal(a->template, b->template);
  assert_int_equal(a->template_key, b->template_key);
  assert_int_equal(a->replicas, b->replicas);
  assert_int_equal(a->min_ready_seconds, b->min_ready_seconds);
  assert_int_equal(a->status.replicas, b->status.replicas);
  assert_int_equal(a->status.fully_labeled, b->status.fully_labeled);
  assert_int_equal(a->status.ready, b->status.ready);
  assert_int_equal(a->status.available, b->status.available);
  assert_int_equal(a->status.terminating, b->status.terminating);
  assert_int_equal(a->status.observed_generation,
                   b->status.observed_generation);
  same_conditions(&a->status.conditions, &b->status.conditions);
}

static void same_deployment(const struct kcm_deployment *a,
                            const struct kcm_deployment *b) {
  same_meta(&a->o, &b->o);
  same_writers(&a->writers, &b->writers);
  same_pairs(&a->annotations, &b->annotations);
  same_selector(&a->selector, &b->selector);
  same_string(a->selector_json, b->selector_json);
  assert_string_equal(a->template, b->template);
  assert_int_equal(a->template_key, b->template_key);
  assert_int_equal(a->replicas, b->replicas);
  assert_int_equal(a->min_ready_seconds, b->min_ready_seconds);
  assert_int_equal(a->revision_history_limit, b->revision_history_limit);
  assert_int_equal(a->progress_deadline, b->progress_deadline);
  assert_memory_equal(&a->max_surge, &b->max_surge, sizeof(a->max_surge));
  assert_memory_equal(&a->max_unavailable, &b->max_unavailable,
                      sizeof(a->max_unavailable));
  assert_int_equal(a->recreate, b->recreate);
  assert_int_equal(a->paused, b->paused);
  assert_int_equal(a->status.observed_generation,
                   b->status.observed_generation);
  assert_int_equal(a->status.replicas, b->status.replicas);
  assert_int_equal(a->status.updated, b->status.updated);
  assert_int_equal(a->status.ready, b->status.ready);
  assert_int_equal(a->status.available, b->status.available);
  assert_int_equal(a->status.unavailable, b->status.unavailable);
  assert_int_equal(a->status.collision_count, b->status.collision_count);
  assert_int_equal(a->status.terminating, b->status.terminating);
  same_conditions(&a->status.conditions, &b->status.conditions);
}

static void same_pod(const struct kcm_pod *a, const struct kcm_pod *b) {
  uint32_t i;
  assert_string_equal(a->o.name, b->o.name);
  assert_ptr_equal(a->o.ns, b->o.ns);
  assert_memory_equal(&a->o.uid, &b->o.uid, sizeof(a->o.uid));
  assert_int_equal(a->o.rv, b->o.rv);
  assert_int_equal(a->o.generation, b->o.generation);
  assert_int_equal(a->o.created, b->o.created);
  assert_int_equal(a->o.deleted, b->o.deleted);
  assert_int_equal(a->o.labels.n, b->o.labels.n);
  for (i = 0; i < a->o.labels.n; i++) {
    assert_ptr_equal(a->o.labels.items[i].key, b->o.labels.items[i].key);
    assert_ptr_equal(a->o.labels.items[i].value, b->o.labels.items[i].value);
  }
  assert_int_equal(a->o.nowners, b->o.nowners);
  assert_int_equal(a->o.has_controller, b->o.has_controller);
  assert_ptr_equal(a->o.controller.api_version, b->o.controller.api_version);
  assert_ptr_equal(a->o.controller.kind, b->o.controller.kind);
  assert_ptr_equal(a->o.controller.name, b->o.controller.name);
  assert_memory_equal(&a->o.controller.uid, &b->o.controller.uid, sizeof(a->o.controller.uid));
  assert_int_equal(a->o.controller.block_owner_deletion, b->o.controller.block_owner_deletion);
  assert_ptr_equal(a->node, b->node);
  assert_int_equal(a->ready_since, b->ready_since);
  assert_int_equal(a->restarts, b->restarts);
  assert_int_equal(a->sidecar_restarts, b->sidecar_restarts);
  assert_int_equal(a->deletion_cost, b->deletion_cost);
  assert_int_equal(a->phase, b->phase);
  assert_int_equal(a->ready, b->ready);
  assert_int_equal(kcm_api_size(&a->o), kcm_api_size(&b->o));
}

static void same_object(enum kcm_kind kind, const struct kcm_object *a,
                        const struct kcm_object *b) {
  if (kind == KCM_KIND_POD)
    same_pod((const struct kcm_pod *)a, (const struct kcm_pod *)b);
  else if (kind == KCM_KIND_REPLICASET)
    same_replicaset((const struct kcm_replicaset *)a, (const struct kcm_replicaset *)b);
  else
    same_deployment((const struct kcm_deployment *)a, (const struct kcm_deployment *)b);
}

static struct kcm_object *decode_ok(enum kcm_kind kind, const char *json) {
  struct json_object *o = json_tokener_parse(json);
  struct kcm_object *obj = NULL, *text = NULL;
  struct kcm_api_error err;
  int rc;
  assert_non_null(o);
  rc = kcm_api_decode(kind, o, &pool, &obj, &err);
  if (rc)
    fail_msg("decode failed: %s %s", err.field, err.problem);
  json_object_put(o);
  rc = kcm_api_decode_text(kind, json, strlen(json), NULL, NULL, &pool, &text, &err);
  if (rc)
    fail_msg("decode from text failed: %s %s", err.field, err.problem);
  assert_int_equal(text->kind, kind);
  same_object(kind, obj, text);
  kcm_api_unref(text, &pool);
  return obj;
}

static void decode_fails(enum kcm_kind kind, const char *json, const char *field) {
  struct json_object *o = json_tokener_parse(json);
  struct kcm_object *obj = NULL;
  struct kcm_api_error err;
  assert_non_null(o);
  assert_int_equal(kcm_api_decode(kind, o, &pool, &obj, &err), KCM_EINVAL);
  assert_null(obj);
  if (strcmp(err.field, field))
    fail_msg("expected an error on %s, got %s: %s", field, err.field, err.problem);
  assert_true(strlen(err.problem) > 0);
  json_object_put(o);
  assert_int_equal(kcm_api_decode_text(kind, json, strlen(json), NULL, NULL, &pool, &obj, &err),
                   KCM_EINVAL);
  assert_null(obj);
  if (strcmp(err.field, field))
    fail_msg("text: expected an error on %s, got %s: %s", field, err.field, err.problem);
  assert_true(strlen(err.problem) > 0);
}

/* Broken JSON: the text decoder says where, the field being "(json)". */
static void text_fails(enum kcm_kind kind, const char *json) {
  struct kcm_object *obj = NULL;
  struct kcm_api_error err;
  assert_int_equal(kcm_api_decode_text(kind, json, strlen(json), NULL, NULL, &pool, &obj, &err),
                   KCM_EINVAL);
  assert_null(obj);
  assert_string_equal(err.field, "(json)");
  assert_true(strlen(err.problem) > 0);
}

#define META(extra)                                                                            \
  "\"metadata\":{\"name\":\"web-7d9f8-abcde\",\"namespace\":\"default\","                    \
  "\"uid\":\"30478c2c-7480-4d2d-a623-3c83746df9f3\",\"resourceVersion\":\"233\","            \
  "\"creationTimestamp\":\"2026-11-22T06:08:43Z\"" extra "}"

static const char running_pod[] =
    "{\"kind\":\"Pod\",\"apiVersion\":\"v1\"," META(
        ",\"generateName\":\"web-7d9f8-\",\"labels\":{\"app\":\"web\","
        "\"pod-template-hash\":\"7d9f8\"},\"annotations\":{"
        "\"controller.kubernetes.io/pod-deletion-cost\":\"-5\"},"
        "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Foo\",\"name\":\"f\","
        "\"uid\":\"00000000-0000-0000-0000-000000000001\"},{\"apiVersion\":\"apps/v1\","
        "\"kind\":\"ReplicaSet\",\"name\":\"web-7d9f8\","
        "\"uid\":\"ef7ccc18-6ba3-4691-b1e1-32ee1b2e8ad4\",\"controller\":true,"
        "\"blockOwnerDeletion\":true}],\"managedFields\":[{\"manager\":\"kcm\","
        "\"operation\":\"Update\",\"fieldsV1\":{\"f:metadata\":{}}}]") ","
    "\"spec\":{\"nodeName\":\"node-1\",\"containers\":[{\"name\":\"c\",\"image\":\"nginx\"}],"
    "\"initContainers\":[{\"name\":\"side\",\"image\":\"x\",\"restartPolicy\":\"Always\"},"
    "{\"name\":\"init\",\"image\":\"y\"}]},"
    "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Initialized\","
    "\"status\":\"True\"},{\"type\":\"Ready\",\"status\":\"True\",\"lastProbeTime\":null,"
    "\"lastTransitionTime\":\"2026-11-22T06:09:00Z\"}],\"containerStatuses\":["
    "{\"name\":\"c\",\"restartCount\":3},{\"name\":\"d\",\"restartCount\":7}],"
    "\"initContainerStatuses\":[{\"name\":\"side\",\"restartCount\":2},"
    "{\"name\":\"init\",\"restartCount\":9}]}}";

static void pod_fields(void **state) {
  struct kcm_pod *p = (struct kcm_pod *)decode_ok(KCM_KIND_POD, running_pod);
  char uid[37];
  assert_int_equal(p->o.kind, KCM_KIND_POD);
  assert_string_equal(p->o.name, "web-7d9f8-abcde");
  assert_string_equal(p->o.ns, "default");
  assert_int_equal(p->o.rv, 233);
  assert_int_equal(p->o.created, 1795327723);
  assert_int_equal(p->o.deleted, 0);
  kcm_api_format_uid(&p->o.uid, uid, sizeof(uid));
  assert_string_equal(uid, "30478c2c-7480-4d2d-a623-3c83746df9f3");
  assert_string_equal(kcm_labels_get(&p->o.labels, "pod-template-hash"), "7d9f8");
  assert_true(p->o.has_controller);
  assert_int_equal(p->o.nowners, 2);
  assert_string_equal(p->o.controller.kind, "ReplicaSet");
  assert_string_equal(p->o.controller.name, "web-7d9f8");
  assert_true(p->o.controller.block_owner_deletion);
  assert_string_equal(p->node, "node-1");
  assert_int_equal(p->phase, KCM_POD_RUNNING);
  assert_true(p->ready);
  assert_int_equal(p->ready_since, 1795327740);
  assert_int_equal(p->restarts, 7);
  assert_int_equal(p->sidecar_restarts, 2);
  assert_int_equal(p->deletion_cost, -5);
  assert_true(kcm_api_size(&p->o) < 1024);
  kcm_api_unref(&p->o, &pool);
}

static void pod_defaults(void **state) {
  struct kcm_pod *p = (struct kcm_pod *)decode_ok(
      KCM_KIND_POD, "{" META(",\"deletionTimestamp\":\"2026-11-22T06:10:00Z\","
                             "\"labels\":null,\"annotations\":{\"controller.kubernetes.io/"
                             "pod-deletion-cost\":\"not-a-number\"}") ",\"spec\":null}");
  assert_null(p->node);
  assert_int_equal(p->phase, KCM_POD_PENDING);
  assert_false(p->ready);
  assert_false(p->o.has_controller);
  assert_int_equal(p->o.labels.n, 0);
  assert_int_equal(p->o.deleted, 1795327800);
  assert_int_equal(p->deletion_cost, 0);
  kcm_api_unref(&p->o, &pool);
}

static const char replicaset[] =
    "{" META(",\"generation\":3,\"labels\":{\"app\":\"web\"},\"annotations\":{"
             "\"deployment.kubernetes.io/revision\":\"2\"}") ","
    "\"spec\":{\"replicas\":4,\"minReadySeconds\":10,\"selector\":{\"matchLabels\":"
    "{\"app\":\"web\"}},\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\","
    "\"image\":\"nginx:1.7.9\"}]},\"metadata\":{\"labels\":{\"pod-template-hash\":\"7d9f8\","
    "\"app\":\"web\"},\"creationTimestamp\":null}}},"
    "\"status\":{\"replicas\":4,\"fullyLabeledReplicas\":4,\"readyReplicas\":3,"
    "\"availableReplicas\":2,\"terminatingReplicas\":1,\"observedGeneration\":3,"
    "\"conditions\":[{\"type\":"
    "\"ReplicaFailure\",\"status\":\"True\",\"reason\":\"FailedCreate\",\"message\":"
    "\"quota\",\"lastTransitionTime\":\"2026-11-22T06:00:00Z\"}]}}";

/* What the decoders pass over: values kcm never reads, whatever their type. */
static void pod_oddities_are_ignored(void **state) {
  struct kcm_object *o = decode_ok(
      KCM_KIND_POD,
      "{" META(",\"labels\":{\"b\":\"1\",\"a\":\"2\",\"b\":\"3\"},\"annotations\":[],"
               "\"ownerReferences\":[{\"name\":5,\"controller\":false},{\"controller\":null}],"
               "\"name\":\"renamed\",\"extra\":{\"deep\":[[[{}]]],\"n\":-1.5e3}")
      ",\"spec\":{\"nodeName\":\"\",\"initContainers\":[5,{\"name\":7}]},"
      "\"status\":{\"phase\":\"Weird\",\"conditions\":[7,{\"type\":\"Other\","
      "\"lastTransitionTime\":5},{\"type\":\"Ready\",\"status\":\"False\","
      "\"lastTransitionTime\":\"bad\"}],\"containerStatuses\":[null,\"x\",{}],"
      "\"initContainerStatuses\":[{\"name\":\"z\",\"restartCount\":4}]},"
      "\"\\u0073pec\":{\"nodeName\":\"n\\u00e9\\ud83d\\ude00\"}}");
  const struct kcm_pod *p = (const struct kcm_pod *)o;
  assert_string_equal(o->name, "renamed");
  assert_int_equal(o->labels.n, 2);
  assert_string_equal(kcm_labels_get(&o->labels, "b"), "3"); /* the last of a repeated key */
  assert_int_equal(o->nowners, 2);
  assert_false(o->has_controller);
  assert_string_equal(p->node, "n\xc3\xa9\xf0\x9f\x98\x80"); /* escaped member name, UTF-16 pair */
  assert_int_equal(p->phase, KCM_POD_PENDING);
  assert_false(p->ready);
  assert_int_equal(p->sidecar_restarts, 0);
  kcm_api_unref(o, &pool);
}

/* A repeated "metadata" member (no API server sends one) is read as Go
 * reads it into the same struct: what the second leaves out, the first
 * gave. */
static void repeated_metadata_keeps_what_the_second_leaves_out(void **state) {
  static const char json[] =
      "{" META(",\"labels\":{\"a\":\"b\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\","
               "\"kind\":\"ReplicaSet\",\"name\":\"web\",\"uid\":"
               "\"6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51\",\"controller\":true}]")
      ",\"metadata\":{\"name\":\"second\"}}";
  struct kcm_object *o;
  struct kcm_api_error err;
  assert_int_equal(
      kcm_api_decode_text(KCM_KIND_POD, json, strlen(json), NULL, NULL, &pool, &o, &err), 0);
  assert_string_equal(o->name, "second");
  assert_int_equal(o->labels.n, 1);
  assert_string_equal(kcm_labels_get(&o->labels, "a"), "b");
  assert_int_equal(o->nowners, 1);
  assert_true(o->has_controller);
  kcm_api_unref(o, &pool);
}

/* A template's null creationTimestamp (kube-apiserver before 1.34, or a
 * client that sends its zero time) is the same template as one without. */
static void template_zero_time_is_no_time(void **state) {
  struct kcm_replicaset *a = (struct kcm_replicaset *)decode_ok(
      KCM_KIND_REPLICASET,
      "{" META("") ",\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":"
      "{\"metadata\":{\"creationTimestamp\":null,\"labels\":{\"a\":\"b\"}},\"spec\":{}}}}");
  struct kcm_replicaset *b = (struct kcm_replicaset *)decode_ok(
      KCM_KIND_REPLICASET,
      "{" META("") ",\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":"
      "{\"metadata\":{\"labels\":{\"a\":\"b\"}},\"spec\":{}}}}");
  assert_string_equal(a->template, b->template);
  assert_true(a->template_key == b->template_key);
  assert_null(strstr(a->template, "creationTimestamp"));
  kcm_api_unref(&a->o, &pool);
  kcm_api_unref(&b->o, &pool);
}

static void replicaset_fields(void **state) {
  struct kcm_replicaset *rs = (struct kcm_replicaset *)decode_ok(KCM_KIND_REPLICASET, replicaset);
  assert_int_equal(rs->replicas, 4);
  assert_int_equal(rs->min_ready_seconds, 10);
  assert_int_equal(rs->o.generation, 3);
  assert_string_equal(kcm_api_pairs_get(&rs->annotations, "deployment.kubernetes.io/revision"),
                      "2");
  assert_string_equal(rs->template,
                      "{\"metadata\":{\"labels\":{\"app\":\"web\","
                      "\"pod-template-hash\":\"7d9f8\"}},\"spec\":{\"containers\":[{\"image\":"
                      "\"nginx:1.7.9\",\"name\":\"c\"}]}}");
  assert_string_equal(kcm_labels_get(&rs->template_labels, "pod-template-hash"), "7d9f8");
  assert_true(kcm_labels_matches(&rs->selector, &rs->template_labels));
  assert_int_equal(rs->status.replicas, 4);
  assert_int_equal(rs->status.fully_labeled, 4);
  assert_int_equal(rs->status.ready, 3);
  assert_int_equal(rs->status.available, 2);
  assert_int_equal(rs->status.terminating, 1);
  assert_int_equal(rs->status.observed_generation, 3);
  assert_int_equal(rs->status.conditions.n, 1);
  assert_string_equal(rs->status.conditions.items[0].reason, "FailedCreate");
  assert_int_equal(rs->status.conditions.items[0].last_transition, 1795327200);
  kcm_api_unref(&rs->o, &pool);
}

/* ReplicaSets from text lose their managedFields before json-c sees them,
 * wherever the member stands, and decode as without. */
static void replicaset_text_skips_managed_fields(void **state) {
  static const char *const texts[] = {
      "{\"metadata\":{\"managedFields\":[{\"manager\":\"m\",\"fieldsV1\":{\"f:spec\":{}}}],"
      "\"name\":\"r\",\"namespace\":\"d\",\"uid\":\"30478c2c-7480-4d2d-a623-3c83746df9f3\","
      "\"resourceVersion\":\"7\"},\"spec\":{\"replicas\":2,\"selector\":{},\"template\":{}}}",
      "{\"metadata\":{\"name\":\"r\",\"namespace\":\"d\",\"managedFields\":[],"
      "\"uid\":\"30478c2c-7480-4d2d-a623-3c83746df9f3\",\"resourceVersion\":\"7\"},"
      "\"spec\":{\"replicas\":2,\"selector\":{},\"template\":{}}}",
      "{\"spec\":{\"replicas\":2,\"selector\":{},\"template\":{}},\"metadata\":{\"name\":\"r\","
      "\"namespace\":\"d\",\"uid\":\"30478c2c-7480-4d2d-a623-3c83746df9f3\","
      "\"resourceVersion\":\"7\",\"managedFields\":[{}]}}",
  };
  size_t i;
  for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
    struct kcm_object *o = NULL;
    struct kcm_api_error err;
    if (kcm_api_decode_text(KCM_KIND_REPLICASET, texts[i], strlen(texts[i]), NULL, NULL, &pool, &o,
                            &err))
      fail_msg("text %zu: %s %s", i, err.field, err.problem);
    assert_string_equal(o->name, "r");
    assert_int_equal(o->rv, 7);
    assert_int_equal(((struct kcm_replicaset *)o)->replicas, 2);
    kcm_api_unref(o, &pool);
  }
}

/* managedFields name the writers of the status, the first four kept in
 * order and the newest found among them; entries of the object itself or
 * other subresources, without a manager, or broken are told apart. */
static void workload_writers(void **state) {
  static const char head[] =
      "{\"metadata\":{\"name\":\"r\",\"namespace\":\"d\",\"uid\":"
      "\"30478c2c-7480-4d2d-a623-3c83746df9f3\",\"resourceVersion\":\"7\","
      "\"creationTimestamp\":\"2026-11-20T10:00:00Z\",\"managedFields\":[";
  static const char tail[] = "]},\"spec\":{\"selector\":{},\"template\":{}}}";
  static const struct {
    const char *fields, *status;
    int64_t status_at;
    int n;
    bool more;
  } cases[] = {
      {"{\"manager\":\"kcm\",\"operation\":\"Update\",\"time\":\"2026-11-20T10:00:00Z\","
       "\"fieldsV1\":{\"f:spec\":{}}},"
       "{\"manager\":\"kube-controller-manager\",\"operation\":\"Update\",\"subresource\":"
       "\"status\",\"time\":\"2026-11-20T10:05:00Z\"},"
       "{\"manager\":\"kcm\",\"subresource\":\"status\",\"time\":\"2026-11-20T10:01:00Z\"},"
       "{\"manager\":\"kubectl\",\"subresource\":\"scale\",\"time\":\"2026-11-20T10:09:00Z\"}",
       "kube-controller-manager", 1795169100, 2, false},
      /* writes of the object itself only: no status writer */
      {"{\"time\":\"2026-11-20T10:03:00Z\",\"manager\":\"kcm\"},"
       "{\"manager\":\"kubectl-edit\",\"time\":\"2026-11-20T10:04:00Z\"}",
       NULL, 0, 0, false},
      {"{\"manager\":\"\",\"subresource\":\"status\"},{\"subresource\":\"status\"},{}", NULL,
       0, 0, false},
      /* five status writers: four kept, the newest among them */
      {"{\"manager\":\"a\",\"subresource\":\"status\",\"time\":\"2026-11-20T10:01:00Z\"},"
       "{\"manager\":\"b\",\"subresource\":\"status\",\"time\":\"2026-11-20T10:04:00Z\"},"
       "{\"manager\":\"c\",\"subresource\":\"status\"},"
       "{\"manager\":\"d\",\"subresource\":\"status\",\"time\":\"2026-11-20T10:02:00Z\"},"
       "{\"manager\":\"e\",\"subresource\":\"status\",\"time\":\"2026-11-20T10:09:00Z\"}",
       "b", 1795169040, 4, true},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char text[2048];
    struct kcm_replicaset *rs;
    int64_t at;
    snprintf(text, sizeof(text), "%s%s%s", head, cases[i].fields, tail);
    rs = (struct kcm_replicaset *)decode_ok(KCM_KIND_REPLICASET, text);
    same_string(kcm_api_writers_newest(&rs->writers, &at), cases[i].status);
    assert_int_equal(at, cases[i].status_at);
    assert_int_equal(rs->writers.n, cases[i].n);
    assert_int_equal(rs->writers.more, cases[i].more);
    kcm_api_unref(&rs->o, &pool);
  }
  /* a Deployment too; a manager that is not a string is an error */
  {
    struct kcm_object *o = NULL;
    struct kcm_api_error err;
    static const char bad_manager[] =
        "{\"metadata\":{\"name\":\"r\",\"namespace\":\"d\",\"uid\":"
        "\"30478c2c-7480-4d2d-a623-3c83746df9f3\",\"resourceVersion\":\"7\","
        "\"managedFields\":[{\"manager\":7}]},\"spec\":{\"selector\":{},\"template\":{}}}";
    assert_int_equal(kcm_api_decode_text(KCM_KIND_DEPLOYMENT, bad_manager, strlen(bad_manager),
                                          NULL, NULL, &pool, &o, &err),
                     KCM_EINVAL);
    assert_string_equal(err.field, "metadata.managedFields.manager");
  }
}

/* A template the memo knows is not parsed again, and the object decodes as
 * without the memo: the same canonical template, key and labels, whatever
 * the order of the members around it. */
static struct kcm_object *decode_memo(enum kcm_kind kind, struct kcm_api_memo *m,
                                      const char *json) {
  struct kcm_object *a = NULL, *b = NULL;
  struct kcm_api_error err;
  if (kcm_api_decode_text(kind, json, strlen(json), NULL, m, &pool, &a, &err) ||
      kcm_api_decode_text(kind, json, strlen(json), NULL, NULL, &pool, &b, &err))
    fail_msg("decode failed: %s %s", err.field, err.problem);
  assert_string_equal(a->name, b->name);
  assert_int_equal(a->rv, b->rv);
  assert_int_equal(kcm_api_size(a), kcm_api_size(b));
  if (kind == KCM_KIND_REPLICASET) {
    struct kcm_replicaset *x = (struct kcm_replicaset *)a, *y = (struct kcm_replicaset *)b;
    uint32_t i;
    assert_string_equal(x->template, y->template);
    assert_int_equal(x->template_key, y->template_key);
    assert_int_equal(x->template_labels.n, y->template_labels.n);
    for (i = 0; i < x->template_labels.n; i++) {
      assert_ptr_equal(x->template_labels.items[i].key, y->template_labels.items[i].key);
      assert_ptr_equal(x->template_labels.items[i].value, y->template_labels.items[i].value);
    }
    assert_int_equal(x->replicas, y->replicas);
    assert_int_equal(x->status.replicas, y->status.replicas);
  } else {
    struct kcm_deployment *x = (struct kcm_deployment *)a, *y = (struct kcm_deployment *)b;
    assert_string_equal(x->template, y->template);
    assert_int_equal(x->template_key, y->template_key);
    assert_string_equal(x->selector_json, y->selector_json);
    assert_int_equal(x->replicas, y->replicas);
    assert_int_equal(x->status.updated, y->status.updated);
  }
  kcm_api_unref(b, &pool);
  return a;
}

#define RS_META(rv, extra)                                                                     \
  "\"metadata\":{\"name\":\"r\",\"namespace\":\"d\",\"uid\":\"30478c2c-7480-4d2d-a623-"      \
  "3c83746df9f3\",\"resourceVersion\":\"" rv "\"" extra "}"
#define SELECTOR "\"selector\":{\"matchLabels\":{\"app\":\"a\"}}"
#define TEMPLATE(image)                                                                        \
  "\"template\":{\"metadata\":{\"labels\":{\"app\":\"a\",\"pod-template-hash\":\"h\"}},"      \
  "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"" image "\"}]}}"

static void templates_known_by_the_memo(void **state) {
  struct kcm_api_memo m = {0};
  struct kcm_object *o;
  struct {
    enum kcm_kind kind;
    const char *json;
    uint64_t hits, misses; /* after it */
    const char *image;     /* in the decoded template */
  } steps[] = {
      {KCM_KIND_REPLICASET,
       "{" RS_META("1", ",\"managedFields\":[{\"manager\":\"m\"}]") ",\"spec\":{\"replicas\":2," SELECTOR
       "," TEMPLATE("x") "},\"status\":{}}",
       0, 1, "x"},
      /* a status change: the same template text */
      {KCM_KIND_REPLICASET,
       "{" RS_META("2", ",\"managedFields\":[{\"manager\":\"m\"}]") ",\"spec\":{\"replicas\":2," SELECTOR
       "," TEMPLATE("x") "},\"status\":{\"replicas\":2}}",
       1, 1, "x"},
      /* spec before metadata, managedFields last: both cuts, in text order */
      {KCM_KIND_REPLICASET,
       "{\"spec\":{" TEMPLATE("x") ",\"replicas\":3," SELECTOR "}," RS_META("3", ",\"managedFields\":[]")
       "}",
       2, 1, "x"},
      /* a new image: parsed */
      {KCM_KIND_REPLICASET,
       "{" RS_META("4", "") ",\"spec\":{\"replicas\":3," SELECTOR "," TEMPLATE("y") "}}",
       2, 2, "y"},
      /* the template's spec first in it */
      {KCM_KIND_REPLICASET,
       "{" RS_META("5", "") ",\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\","
       "\"image\":\"z\"}]},\"metadata\":{\"labels\":{\"app\":\"a\"}}},\"selector\":{}}}",
       2, 3, "z"},
      {KCM_KIND_REPLICASET,
       "{" RS_META("6", "") ",\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\","
       "\"image\":\"z\"}]},\"metadata\":{\"labels\":{\"app\":\"a\"}}},\"selector\":{}}}",
       3, 3, "z"},
      {KCM_KIND_DEPLOYMENT,
       "{" RS_META("7", "") ",\"spec\":{" SELECTOR "," TEMPLATE("x") "}}",
       4, 3, "x"},
  };
  size_t i;
  for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
    const char *tmpl;
    o = decode_memo(steps[i].kind, &m, steps[i].json);
    tmpl = steps[i].kind == KCM_KIND_REPLICASET ? ((struct kcm_replicaset *)o)->template
                                                : ((struct kcm_deployment *)o)->template;
    if (m.hits != steps[i].hits || m.misses != steps[i].misses)
      fail_msg("step %zu: %llu hits, %llu misses", i, (unsigned long long)m.hits,
               (unsigned long long)m.misses);
    assert_non_null(strstr(tmpl, steps[i].image));
    kcm_api_unref(o, &pool);
  }
  /* Past its byte budget the memo remembers nothing new. */
  m.bytes += KCM_API_MEMO_BYTES;
  for (i = 0; i < 2; i++)
    kcm_api_unref(decode_memo(KCM_KIND_REPLICASET, &m,
                              "{" RS_META("8", "") ",\"spec\":{\"selector\":{}," TEMPLATE("w") "}}"),
                  &pool);
  assert_int_equal(m.misses, 5);
  m.bytes -= KCM_API_MEMO_BYTES;
  kcm_api_memo_release(&m);
}

static void replicaset_defaults(void **state) {
  struct kcm_replicaset *rs = (struct kcm_replicaset *)decode_ok(
      KCM_KIND_REPLICASET,
      "{" META("") ",\"spec\":{\"selector\":{},\"template\":{}},\"status\":{\"replicas\":0}}");
  assert_int_equal(rs->replicas, 1);
  assert_true(kcm_labels_selector_empty(&rs->selector));
  assert_string_equal(rs->template, "{}");
  assert_int_equal(rs->status.conditions.n, 0);
  kcm_api_unref(&rs->o, &pool);
}

static void deployment_fields(void **state) {
  struct kcm_deployment *d = (struct kcm_deployment *)decode_ok(
      KCM_KIND_DEPLOYMENT,
      "{" META(",\"generation\":2") ",\"spec\":{\"replicas\":10,\"paused\":true,"
      "\"revisionHistoryLimit\":2,\"progressDeadlineSeconds\":600,"
      "\"selector\":{\"matchLabels\":{\"app\":\"web\"}},\"template\":{\"metadata\":"
      "{\"labels\":{\"app\":\"web\"}}},\"strategy\":{\"type\":\"RollingUpdate\","
      "\"rollingUpdate\":{\"maxSurge\":3,\"maxUnavailable\":\"25%\"}}},\"status\":"
      "{\"observedGeneration\":2,\"replicas\":10,\"updatedReplicas\":5,\"readyReplicas\":8,"
      "\"availableReplicas\":8,\"unavailableReplicas\":2,\"collisionCount\":1,"
      "\"conditions\":[{\"type\":\"Available\",\"status\":\"True\",\"lastUpdateTime\":"
      "\"2026-11-22T06:00:00Z\"}]}}");
  assert_int_equal(d->replicas, 10);
  assert_true(d->paused);
  assert_false(d->recreate);
  assert_int_equal(d->revision_history_limit, 2);
  assert_int_equal(d->progress_deadline, 600);
  assert_true(d->max_surge.set);
  assert_false(d->max_surge.percent);
  assert_int_equal(d->max_surge.value, 3);
  assert_true(d->max_unavailable.percent);
  assert_int_equal(d->max_unavailable.value, 25);
  assert_int_equal(d->status.updated, 5);
  assert_int_equal(d->status.unavailable, 2);
  assert_int_equal(d->status.collision_count, 1);
  assert_int_equal(d->status.conditions.items[0].last_update, 1795327200);
  assert_string_equal(d->selector_json, "{\"matchLabels\":{\"app\":\"web\"}}");
  kcm_api_unref(&d->o, &pool);

  d = (struct kcm_deployment *)decode_ok(
      KCM_KIND_DEPLOYMENT,
      "{" META("") ",\"spec\":{\"selector\":{\"matchLabels\":{\"a\":\"b\"}},\"template\":{},"
      "\"strategy\":{\"type\":\"Recreate\"}}}");
  assert_true(d->recreate);
  assert_int_equal(d->replicas, 1);
  assert_int_equal(d->revision_history_limit, -1);
  assert_int_equal(d->progress_deadline, -1);
  assert_int_equal(d->status.collision_count, -1);
  assert_int_equal(d->status.terminating, -1);
  assert_false(d->max_surge.set);
  kcm_api_unref(&d->o, &pool);
}

/* kubectl apply's copy of the object is never kept; other annotations are. */
static void last_applied_is_dropped(void **state) {
  struct kcm_deployment *d = (struct kcm_deployment *)decode_ok(
      KCM_KIND_DEPLOYMENT,
      "{" META(",\"annotations\":{\"kubectl.kubernetes.io/last-applied-configuration\":"
               "\"{}\",\"team\":\"a\"}") ",\"spec\":{\"selector\":{\"matchLabels\":"
      "{\"a\":\"b\"}},\"template\":{}}}");
  assert_null(kcm_api_pairs_get(&d->annotations, KCM_API_LAST_APPLIED));
  assert_string_equal(kcm_api_pairs_get(&d->annotations, "team"), "a");
  assert_int_equal(d->annotations.n, 1);
  kcm_api_unref(&d->o, &pool);
}

/* A ReplicaSet and the Deployment it was made from have the same template
 * key; a different template has another. */
static void template_keys_ignore_the_hash(void **state) {
  struct kcm_replicaset *rs = (struct kcm_replicaset *)decode_ok(KCM_KIND_REPLICASET, replicaset);
  struct kcm_deployment *same = (struct kcm_deployment *)decode_ok(
      KCM_KIND_DEPLOYMENT,
      "{" META("") ",\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
      "\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"nginx:1.7.9\"}]},"
      "\"metadata\":{\"labels\":{\"app\":\"web\"},\"creationTimestamp\":null}}}}");
  struct kcm_deployment *other = (struct kcm_deployment *)decode_ok(
      KCM_KIND_DEPLOYMENT,
      "{" META("") ",\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
      "\"template\":{\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"nginx:1.9\"}]},"
      "\"metadata\":{\"labels\":{\"app\":\"web\"},\"creationTimestamp\":null}}}}");
  assert_true(rs->template_key == same->template_key);
  assert_true(kcm_api_template_equal(rs->template, same->template));
  assert_false(rs->template_key == other->template_key);
  assert_false(kcm_api_template_equal(rs->template, other->template));
  /* The decoded template keeps its hash label. */
  assert_non_null(strstr(rs->template, "\"pod-template-hash\":\"7d9f8\""));
  /* Only the label is ignored: the hash first, last or alone in the labels,
   * never a pod-template-hash elsewhere, and no labels equal to empty ones. */
  assert_true(kcm_api_template_equal(
      "{\"metadata\":{\"labels\":{\"a\":\"1\",\"pod-template-hash\":\"x\",\"z\":\"2\"}}}",
      "{\"metadata\":{\"labels\":{\"a\":\"1\",\"z\":\"2\"}}}"));
  assert_true(kcm_api_template_equal("{\"metadata\":{\"labels\":{\"pod-template-hash\":\"x\","
                                     "\"z\":\"2\"}}}",
                                     "{\"metadata\":{\"labels\":{\"pod-template-hash\":\"y\","
                                     "\"z\":\"2\"}}}"));
  assert_true(kcm_api_template_equal("{\"metadata\":{\"labels\":{\"pod-template-hash\":\"x\"}}}",
                                     "{\"metadata\":{}}"));
  assert_false(kcm_api_template_equal(
      "{\"metadata\":{\"labels\":{\"a\":\"1\"}},\"spec\":{\"nodeSelector\":{"
      "\"pod-template-hash\":\"x\"}}}",
      "{\"metadata\":{\"labels\":{\"a\":\"1\"}},\"spec\":{\"nodeSelector\":{}}}"));
  assert_false(kcm_api_template_equal(
      "{\"metadata\":{\"labels\":{\"a\":\"1\",\"pod-template-hash\":\"x\"}}}",
      "{\"metadata\":{\"labels\":{\"a\":\"2\"}}}"));
  kcm_api_unref(&rs->o, &pool);
  kcm_api_unref(&same->o, &pool);
  kcm_api_unref(&other->o, &pool);
}

/* The conditions as kcm writes them, in text (reset first). */
static const char *conditions_text(const struct kcm_conditions *c, struct kcm_buf *text) {
  struct kcm_jsonw w;
  kcm_buf_reset(text);
  kcm_jsonw_start(&w, text);
  kcm_api_write_conditions(&w, c);
  assert_int_equal(kcm_jsonw_finish(&w), 0);
  return text->data;
}

static void pairs_and_conditions(void **state) {
  struct kcm_buf text = KCM_BUF_INIT(4096);
  struct kcm_pairs p = {0}, q;
  struct kcm_conditions c = {0}, d;
  struct kcm_condition a = {(char[]){"Available"}, (char[]){"True"}, (char[]){"R"},
                            (char[]){"m"}, 1, 2};
  struct kcm_condition b = {(char[]){"Progressing"}, (char[]){"False"}, NULL, NULL, 0, 0};

  assert_int_equal(kcm_api_pairs_set(&p, "m", "1"), 0);
  assert_int_equal(kcm_api_pairs_set(&p, "a", "2"), 0);
  assert_int_equal(kcm_api_pairs_set(&p, "z", "3"), 0);
  assert_int_equal(kcm_api_pairs_set(&p, "m", "4"), 0); /* replaced */
  assert_int_equal(p.n, 3);
  assert_string_equal(p.items[0].key, "a");
  assert_string_equal(p.items[2].key, "z");
  assert_string_equal(kcm_api_pairs_get(&p, "m"), "4");
  assert_int_equal(kcm_api_pairs_copy(&q, &p), 0);
  kcm_api_pairs_remove(&p, "m");
  kcm_api_pairs_remove(&p, "absent");
  assert_int_equal(p.n, 2);
  assert_null(kcm_api_pairs_get(&p, "m"));
  assert_string_equal(kcm_api_pairs_get(&q, "m"), "4");
  kcm_api_pairs_release(&p);
  kcm_api_pairs_release(&q);

  assert_string_equal(conditions_text(&c, &text), "null"); /* none: null */
  assert_int_equal(kcm_api_condition_append(&c, &a), 0);
  assert_int_equal(kcm_api_condition_append(&c, &b), 0);
  assert_int_equal(kcm_api_conditions_copy(&d, &c), 0);
  assert_true(kcm_api_conditions_equal(&c, &d));
  assert_string_equal(kcm_api_condition_get(&d, "Progressing")->status, "False");
  assert_string_equal(conditions_text(&c, &text),
                      "[{\"type\":\"Available\",\"status\":\"True\",\"lastUpdateTime\":"
                      "\"1970-01-01T00:00:01Z\",\"lastTransitionTime\":\"1970-01-01T00:00:02Z\","
                      "\"reason\":\"R\",\"message\":\"m\"},{\"type\":\"Progressing\","
                      "\"status\":\"False\"}]");
  kcm_buf_release(&text);
  kcm_api_condition_remove(&d, "Available");
  assert_false(kcm_api_conditions_equal(&c, &d));
  assert_null(kcm_api_condition_get(&d, "Available"));
  assert_int_equal(d.n, 1);
  kcm_api_conditions_release(&c);
  kcm_api_conditions_release(&d);
}

static bool not_x(const char *key) { return strcmp(key, "x") != 0; }
static bool is_x(const char *key) { return !not_x(key); }

/* update merges a sorted map into another, keep filters one; adopt sorts,
 * the last of a repeated key kept. */
static void pairs_merge(void **state) {
  struct kcm_pairs dst = {0}, src = {0}, made;
  struct kcm_pair *items = calloc(3, sizeof(*items));
  bool changed = false;
  assert_int_equal(kcm_api_pairs_set(&dst, "b", "1"), 0);
  assert_int_equal(kcm_api_pairs_set(&dst, "d", "2"), 0);
  assert_int_equal(kcm_api_pairs_set(&src, "a", "3"), 0);
  assert_int_equal(kcm_api_pairs_set(&src, "d", "2"), 0);
  assert_int_equal(kcm_api_pairs_set(&src, "x", "4"), 0);
  assert_int_equal(kcm_api_pairs_update(&dst, &src, is_x, &changed), 0);
  assert_true(changed); /* a came */
  assert_int_equal(dst.n, 3);
  assert_string_equal(dst.items[0].key, "a");
  assert_string_equal(dst.items[2].value, "2");
  changed = false;
  assert_int_equal(kcm_api_pairs_update(&dst, &src, is_x, &changed), 0);
  assert_false(changed); /* nothing new */
  assert_int_equal(kcm_api_pairs_set(&src, "b", "5"), 0);
  assert_int_equal(kcm_api_pairs_update(&dst, &src, NULL, &changed), 0);
  assert_true(changed);
  assert_int_equal(dst.n, 4);
  assert_string_equal(kcm_api_pairs_get(&dst, "b"), "5");
  assert_string_equal(kcm_api_pairs_get(&dst, "x"), "4");
  kcm_api_pairs_keep(&dst, not_x);
  assert_int_equal(dst.n, 3);
  assert_null(kcm_api_pairs_get(&dst, "x"));
  kcm_api_pairs_release(&dst);
  kcm_api_pairs_release(&src);

  assert_non_null(items);
  items[0] = (struct kcm_pair){strdup("k"), strdup("first")};
  items[1] = (struct kcm_pair){strdup("a"), strdup("1")};
  items[2] = (struct kcm_pair){strdup("k"), strdup("last")};
  assert_int_equal(kcm_api_pairs_adopt(&made, items, 3), 0);
  assert_int_equal(made.n, 2);
  assert_string_equal(made.items[0].key, "a");
  assert_string_equal(kcm_api_pairs_get(&made, "k"), "last");
  kcm_api_pairs_release(&made);
}

/* Reading an object back before adopting for it. */
static void rechecks(void **state) {
  struct kcm_uid u;
  assert_int_equal(kcm_api_parse_uid("11111111-2222-3333-4444-555555555555", &u), 0);
  assert_null(kcm_api_recheck("{\"metadata\":{\"uid\":\"11111111-2222-3333-4444-555555555555\"}}",
                              &u));
  assert_string_equal(
      kcm_api_recheck("{\"metadata\":{\"uid\":\"11111111-2222-3333-4444-000000000000\"}}", &u),
      "is gone: got another uid");
  assert_string_equal(kcm_api_recheck("{\"metadata\":{\"uid\":\"11111111-2222-3333-4444-"
                                      "555555555555\",\"deletionTimestamp\":"
                                      "\"2026-01-01T00:00:00Z\"}}",
                                      &u),
                      "has just been deleted");
  assert_string_equal(kcm_api_recheck("not json", &u), "cannot be read back");
}

static void bad_objects_name_the_field(void **state) {
  char long_name[400];
  char json[1024];
  decode_fails(KCM_KIND_POD, "[]", "(object)");
  decode_fails(KCM_KIND_POD, "{\"spec\":{}}", "metadata");
  decode_fails(KCM_KIND_POD, "{\"metadata\":5}", "metadata");
  decode_fails(KCM_KIND_POD,
               "{\"metadata\":{\"namespace\":\"d\",\"uid\":\"30478c2c-7480-4d2d-a623-"
               "3c83746df9f3\",\"resourceVersion\":\"1\"}}",
               "metadata.name");
  decode_fails(KCM_KIND_POD,
               "{\"metadata\":{\"name\":\"a\",\"namespace\":\"d\",\"uid\":\"nope\","
               "\"resourceVersion\":\"1\"}}",
               "metadata.uid");
  decode_fails(KCM_KIND_POD,
               "{\"metadata\":{\"name\":\"a\",\"namespace\":\"d\",\"uid\":\"30478c2c-7480-4d2d-"
               "a623-3c83746df9f3\",\"resourceVersion\":\"12a\"}}",
               "metadata.resourceVersion");
  decode_fails(KCM_KIND_POD, "{" META(",\"labels\":{\"a\":1}") "}", "metadata.labels");
  /* A NUL would cut the name short or leave an empty namespace. */
  decode_fails(KCM_KIND_POD,
               "{\"metadata\":{\"name\":\"a\\u0000b\",\"namespace\":\"d\",\"uid\":\"30478c2c-"
               "7480-4d2d-a623-3c83746df9f3\",\"resourceVersion\":\"1\"}}",
               "metadata.name");
  decode_fails(KCM_KIND_REPLICASET,
               "{\"metadata\":{\"name\":\"a\",\"namespace\":\"\\u0000\",\"uid\":\"30478c2c-"
               "7480-4d2d-a623-3c83746df9f3\",\"resourceVersion\":\"1\"}}",
               "metadata.namespace");
  /* Past int64, both decoders refuse (json-c would saturate it). */
  decode_fails(KCM_KIND_POD, "{" META(",\"generation\":9223372036854775808") "}",
               "metadata.generation");
  decode_fails(KCM_KIND_POD, "{" META(",\"generation\":33333333333333333331") "}",
               "metadata.generation");
  kcm_api_unref(decode_ok(KCM_KIND_POD, "{" META(",\"generation\":9223372036854775807") "}"),
                &pool);
  decode_fails(KCM_KIND_POD, "{" META(",\"creationTimestamp\":\"yesterday\"") "}",
               "metadata.creationTimestamp");
  decode_fails(KCM_KIND_POD, "{" META(",\"ownerReferences\":[{\"controller\":true}]") "}",
               "metadata.ownerReferences");
  decode_fails(KCM_KIND_POD, "{" META("") ",\"spec\":{\"nodeName\":7}}", "spec.nodeName");
  decode_fails(KCM_KIND_POD,
               "{" META("") ",\"status\":{\"containerStatuses\":[{\"restartCount\":\"x\"}]}}",
               "status.containerStatuses.restartCount");
  decode_fails(KCM_KIND_REPLICASET,
               "{" META("") ",\"spec\":{\"replicas\":\"3\",\"selector\":{},\"template\":{}}}",
               "spec.replicas");
  decode_fails(KCM_KIND_REPLICASET,
               "{" META("") ",\"spec\":{\"replicas\":2.5,\"selector\":{},\"template\":{}}}",
               "spec.replicas");
  decode_fails(KCM_KIND_REPLICASET,
               "{" META("") ",\"spec\":{\"replicas\":99999999999,\"selector\":{},"
               "\"template\":{}}}",
               "spec.replicas");
  decode_fails(KCM_KIND_REPLICASET, "{" META("") ",\"spec\":{\"selector\":{}}}",
               "spec.template");
  decode_fails(KCM_KIND_REPLICASET,
               "{" META("") ",\"spec\":{\"selector\":{\"matchLabels\":[]},\"template\":{}}}",
               "spec.selector");
  decode_fails(KCM_KIND_DEPLOYMENT,
               "{" META("") ",\"spec\":{\"selector\":{},\"template\":{},\"strategy\":{"
               "\"rollingUpdate\":{\"maxSurge\":\"lots\"}}}}",
               "spec.strategy.rollingUpdate.maxSurge");
  decode_fails(KCM_KIND_DEPLOYMENT,
               "{" META("") ",\"spec\":{\"selector\":{},\"template\":{}},\"status\":{"
               "\"conditions\":{}}}",
               "status.conditions");
  /* ReplicaSets and Deployments, one fault each. */
#define RS(extra) "{" META(extra) ",\"spec\":{\"selector\":{},\"template\":{}}}"
#define WITH_SPEC(spec)                                                        \
  "{" META("") ",\"spec\":{\"selector\":{},\"template\":{}" spec "}}"
#define WITH_STATUS(status)                                                    \
  "{" META(                                                                    \
      "") ",\"spec\":{\"selector\":{},\"template\":{}},\"status\":" status "}"
  static const struct {
    enum kcm_kind kind;
    const char *json, *field;
  } faults[] = {
      {KCM_KIND_REPLICASET, "[]", "(object)"},
      {KCM_KIND_REPLICASET, "{\"spec\":{}}", "metadata"},
      {KCM_KIND_REPLICASET, RS(",\"annotations\":[]"), "metadata.annotations"},
      {KCM_KIND_REPLICASET, RS(",\"annotations\":{\"a\":1}"),
       "metadata.annotations"},
      {KCM_KIND_DEPLOYMENT, RS(",\"annotations\":{\"a\":null}"),
       "metadata.annotations"},
      {KCM_KIND_REPLICASET,
       RS(",\"annotations\":{\"kubectl.kubernetes.io/"
          "last-applied-configuration\":{}}"),
       "metadata.annotations"},
      {KCM_KIND_REPLICASET, RS(",\"labels\":{\"a\":true}"), "metadata.labels"},
      {KCM_KIND_REPLICASET, "{" META("") ",\"spec\":7}", "spec"},
      {KCM_KIND_DEPLOYMENT,
       "{" META("") ",\"spec\":{\"selector\":{},\"template\":7}}",
       "spec.template"},
      {KCM_KIND_REPLICASET,
       "{" META(
           "") ",\"spec\":{\"selector\":{},\"template\":{\"metadata\":[]}}}",
       "spec.template.metadata"},
      {KCM_KIND_REPLICASET,
       "{" META("") ",\"spec\":{\"selector\":{},\"template\":{\"metadata\":"
                    "{\"labels\":{\"a\":1}}}}}",
       "spec.template.metadata.labels"},
      {KCM_KIND_REPLICASET, WITH_SPEC(",\"replicas\":-1"), "spec.replicas"},
      {KCM_KIND_REPLICASET, WITH_SPEC(",\"minReadySeconds\":\"5\""),
       "spec.minReadySeconds"},
      {KCM_KIND_DEPLOYMENT, WITH_SPEC(",\"revisionHistoryLimit\":-1"),
       "spec.revisionHistoryLimit"},
      {KCM_KIND_DEPLOYMENT, WITH_SPEC(",\"progressDeadlineSeconds\":1e3"),
       "spec.progressDeadlineSeconds"},
      {KCM_KIND_DEPLOYMENT, WITH_SPEC(",\"paused\":\"yes\""), "spec.paused"},
      {KCM_KIND_DEPLOYMENT, WITH_SPEC(",\"strategy\":[]"), "spec.strategy"},
      {KCM_KIND_DEPLOYMENT, WITH_SPEC(",\"strategy\":{\"type\":1}"),
       "spec.strategy.type"},
      {KCM_KIND_DEPLOYMENT, WITH_SPEC(",\"strategy\":{\"type\":\"Canary\"}"),
       "spec.strategy.type"},
      {KCM_KIND_DEPLOYMENT, WITH_SPEC(",\"strategy\":{\"rollingUpdate\":5}"),
       "spec.strategy.rollingUpdate"},
      {KCM_KIND_DEPLOYMENT,
       WITH_SPEC(",\"strategy\":{\"rollingUpdate\":{\"maxUnavailable\":-1}}"),
       "spec.strategy.rollingUpdate.maxUnavailable"},
      {KCM_KIND_DEPLOYMENT,
       WITH_SPEC(",\"strategy\":{\"rollingUpdate\":{\"maxSurge\":1.5}}"),
       "spec.strategy.rollingUpdate.maxSurge"},
      {KCM_KIND_DEPLOYMENT,
       WITH_SPEC(",\"strategy\":{\"rollingUpdate\":{\"maxSurge\":true}}"),
       "spec.strategy.rollingUpdate.maxSurge"},
      {KCM_KIND_DEPLOYMENT,
       WITH_SPEC(",\"strategy\":{\"rollingUpdate\":{\"maxSurge\":\"-5%\"}}"),
       "spec.strategy.rollingUpdate.maxSurge"},
      {KCM_KIND_DEPLOYMENT,
       WITH_SPEC(",\"strategy\":{\"rollingUpdate\":{\"maxSurge\":"
                 "99999999999999999999}}"),
       "spec.strategy.rollingUpdate.maxSurge"},
      {KCM_KIND_REPLICASET, WITH_STATUS("[]"), "status"},
      {KCM_KIND_REPLICASET, WITH_STATUS("{\"readyReplicas\":\"1\"}"),
       "status.readyReplicas"},
      {KCM_KIND_REPLICASET, WITH_STATUS("{\"fullyLabeledReplicas\":false}"),
       "status.fullyLabeledReplicas"},
      {KCM_KIND_DEPLOYMENT, WITH_STATUS("{\"unavailableReplicas\":3.5}"),
       "status.unavailableReplicas"},
      {KCM_KIND_REPLICASET, WITH_STATUS("{\"terminatingReplicas\":-1}"),
       "status.terminatingReplicas"},
      {KCM_KIND_DEPLOYMENT, WITH_STATUS("{\"observedGeneration\":-2}"),
       "status.observedGeneration"},
      {KCM_KIND_DEPLOYMENT, WITH_STATUS("{\"collisionCount\":-1}"),
       "status.collisionCount"},
      {KCM_KIND_REPLICASET, WITH_STATUS("{\"conditions\":[7]}"),
       "status.conditions"},
      {KCM_KIND_REPLICASET,
       WITH_STATUS("{\"conditions\":[{\"status\":\"True\"}]}"),
       "status.conditions"},
      {KCM_KIND_DEPLOYMENT,
       WITH_STATUS("{\"conditions\":[{\"type\":\"A\",\"reason\":5}]}"),
       "status.conditions"},
      {KCM_KIND_DEPLOYMENT,
       WITH_STATUS(
           "{\"conditions\":[{\"type\":\"A\",\"lastUpdateTime\":\"now\"}]}"),
       "status.conditions"},
  };
#undef RS
#undef WITH_SPEC
#undef WITH_STATUS
  for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
    decode_fails(faults[i].kind, faults[i].json, faults[i].field);
  decode_fails(KCM_KIND_POD, "{" META(",\"generation\":1.5") "}", "metadata.generation");
  decode_fails(KCM_KIND_POD, "{" META(",\"generation\":-1") "}", "metadata.generation");
  decode_fails(KCM_KIND_POD, "{" META(",\"labels\":[]") "}", "metadata.labels");
  decode_fails(KCM_KIND_POD, "{" META(",\"ownerReferences\":{}") "}",
               "metadata.ownerReferences");
  decode_fails(KCM_KIND_POD, "{" META(",\"ownerReferences\":[7]") "}",
               "metadata.ownerReferences");
  decode_fails(KCM_KIND_POD, "{" META(",\"ownerReferences\":[{\"controller\":\"yes\"}]") "}",
               "metadata.ownerReferences.controller");
  decode_fails(KCM_KIND_POD,
               "{" META(",\"ownerReferences\":[{\"controller\":true,\"apiVersion\":\"v1\","
                        "\"kind\":\"K\",\"name\":5,\"uid\":\"30478c2c-7480-4d2d-a623-"
                        "3c83746df9f3\"}]") "}",
               "metadata.ownerReferences.name");
  decode_fails(KCM_KIND_POD,
               "{" META(",\"ownerReferences\":[{\"controller\":true,\"apiVersion\":\"v1\","
                        "\"kind\":\"K\",\"name\":\"n\",\"uid\":\"x\"}]") "}",
               "metadata.ownerReferences.uid");
  decode_fails(KCM_KIND_POD,
               "{" META(",\"ownerReferences\":[{\"controller\":true,\"apiVersion\":\"v1\","
                        "\"kind\":\"K\",\"name\":\"n\",\"uid\":\"30478c2c-7480-4d2d-a623-"
                        "3c83746df9f3\",\"blockOwnerDeletion\":1}]") "}",
               "metadata.ownerReferences.blockOwnerDeletion");
  decode_fails(KCM_KIND_POD,
               "{" META(",\"annotations\":{\"controller.kubernetes.io/pod-deletion-cost\":3}") "}",
               "metadata.annotations");
  decode_fails(KCM_KIND_POD, "{" META("") ",\"spec\":[]}", "spec");
  decode_fails(KCM_KIND_POD, "{" META("") ",\"status\":\"x\"}", "status");
  decode_fails(KCM_KIND_POD, "{" META("") ",\"status\":{\"phase\":1}}", "status.phase");
  decode_fails(KCM_KIND_POD, "{" META("") ",\"status\":{\"conditions\":{}}}",
               "status.conditions");
  decode_fails(KCM_KIND_POD, "{" META("") ",\"status\":{\"conditions\":[{\"type\":1}]}}",
               "status.conditions.type");
  decode_fails(KCM_KIND_POD,
               "{" META("") ",\"status\":{\"conditions\":[{\"type\":\"Ready\","
                            "\"status\":\"True\",\"lastTransitionTime\":\"soon\"}]}}",
               "status.conditions.lastTransitionTime");
  decode_fails(KCM_KIND_POD,
               "{" META("") ",\"status\":{\"containerStatuses\":[{\"restartCount\":"
                            "9999999999}]}}",
               "status.containerStatuses.restartCount");
  decode_fails(KCM_KIND_POD,
               "{" META("") ",\"spec\":{\"initContainers\":{}},\"status\":{"
                            "\"initContainerStatuses\":[{\"name\":\"a\"}]}}",
               "spec.initContainers");
  decode_fails(KCM_KIND_POD,
               "{" META("") ",\"status\":{\"initContainerStatuses\":[{\"name\":[]}]}}",
               "status.initContainerStatuses.name");
  text_fails(KCM_KIND_POD, "{" META("") ",\"spec\":{\"nodeName\":\"a}}");
  text_fails(KCM_KIND_POD, "{" META("") ",\"spec\":{\"x\":tru}}");
  text_fails(KCM_KIND_POD, "{" META("") ",\"spec\":{\"x\":[1,]}}");
  text_fails(KCM_KIND_POD, "{" META("") "} trailing");
  text_fails(KCM_KIND_REPLICASET, "{" META("") ",\"spec\":{");
  memset(long_name, 'a', 300);
  long_name[300] = '\0';
  snprintf(json, sizeof(json),
           "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"d\",\"uid\":\"30478c2c-7480-4d2d-"
           "a623-3c83746df9f3\",\"resourceVersion\":\"1\"}}",
           long_name);
  decode_fails(KCM_KIND_POD, json, "metadata.name");
}

static void huge_strings_are_kept_whole(void **state) {
  size_t big = 1u << 20;
  char *json = malloc(2 * big + 1024), *p;
  struct kcm_replicaset *rs;
  p = json + sprintf(json, "{\"metadata\":{\"name\":\"r\",\"namespace\":\"d\",\"uid\":"
                           "\"30478c2c-7480-4d2d-a623-3c83746df9f3\",\"resourceVersion\":\"1\","
                           "\"annotations\":{\"a\":\"");
  memset(p, 'x', big);
  p += big;
  p += sprintf(p, "\"}},\"spec\":{\"selector\":{},\"template\":{\"metadata\":{"
                  "\"annotations\":{\"t\":\"");
  memset(p, 'y', big);
  p += big;
  sprintf(p, "\"}}}}}");
  rs = (struct kcm_replicaset *)decode_ok(KCM_KIND_REPLICASET, json);
  assert_int_equal(strlen(kcm_api_pairs_get(&rs->annotations, "a")), big);
  assert_true(strlen(rs->template) > big);
  kcm_api_unref(&rs->o, &pool);
  free(json);
}

static void canonical_json_sorts_and_escapes(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(4096);
  struct json_object *o = json_tokener_parse(
      "{\"z\":[3,{\"b\":true,\"a\":null}],\"a\":\"quote\\\" back\\\\ nl\\n tab\\t \\u0001 "
      "/slash é\",\"m\":-1.5e3,\"n\":12345678901}");
  assert_int_equal(kcm_api_canonical_json(o, &b), 0);
  assert_string_equal(b.data, "{\"a\":\"quote\\\" back\\\\ nl\\n tab\\t \\u0001 /slash é\","
                              "\"m\":-1.5e3,\"n\":12345678901,\"z\":[3,{\"a\":null,\"b\":true}]}");
  kcm_buf_release(&b);
  json_object_put(o);
}

/* The parsed owner-reference patch: its one reference and the object's uid. */
static struct json_object *owner_patch(bool adopt, const char *name, struct json_object **ref,
                                       const char **uid) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 20);
  struct kcm_uid owner, object;
  struct json_object *doc, *meta, *refs, *v;
  assert_int_equal(kcm_api_parse_uid("30478c2c-7480-4d2d-a623-3c83746df9f3", &owner), 0);
  assert_int_equal(kcm_api_parse_uid("aaaaaaaa-0000-0000-0000-000000000001", &object), 0);
  assert_int_equal(kcm_api_owner_patch(&b, adopt, "apps/v1", "ReplicaSet", name, &owner, &object),
                   0);
  doc = json_tokener_parse(b.data);
  if (!doc)
    fail_msg("not JSON: %s", b.data);
  kcm_buf_release(&b);
  assert_true(json_object_object_get_ex(doc, "metadata", &meta));
  assert_int_equal(json_object_object_length(meta), 2);
  assert_true(json_object_object_get_ex(meta, "ownerReferences", &refs));
  assert_int_equal(json_object_array_length(refs), 1);
  *ref = json_object_array_get_idx(refs, 0);
  assert_true(json_object_object_get_ex(meta, "uid", &v));
  *uid = json_object_get_string(v);
  return doc;
}

static const char *member(struct json_object *o, const char *key) {
  struct json_object *v;
  if (!json_object_object_get_ex(o, key, &v))
    fail_msg("no member %s", key);
  return json_object_get_string(v);
}

/* DeleteOptions with the preconditions upstream's controllers send. */
static void delete_options_carry_preconditions(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 20);
  struct kcm_uid uid;
  struct json_object *doc, *pre;
  (void)state;
  assert_int_equal(kcm_api_parse_uid("30478c2c-7480-4d2d-a623-3c83746df9f3", &uid), 0);
  assert_int_equal(kcm_api_delete_options(&b, &uid, 18446744073709551615ULL), 0);
  assert_non_null(doc = json_tokener_parse(b.data));
  assert_int_equal(json_object_object_length(doc), 3);
  assert_string_equal(member(doc, "apiVersion"), "v1");
  assert_string_equal(member(doc, "kind"), "DeleteOptions");
  assert_true(json_object_object_get_ex(doc, "preconditions", &pre));
  assert_int_equal(json_object_object_length(pre), 2);
  assert_string_equal(member(pre, "uid"), "30478c2c-7480-4d2d-a623-3c83746df9f3");
  assert_string_equal(member(pre, "resourceVersion"), "18446744073709551615");
  json_object_put(doc);
  kcm_buf_release(&b);
}

/* A name holding quotes, backslashes and control bytes (any bytes the
 * server sends) stays one JSON string, whole, in the patch. */
static void owner_patches_escape_names(void **state) {
  static const char *const names[] = {
      "web",
      "a\"b",
      "x\",\"uid\":\"00000000-0000-0000-0000-000000000000\",\"kind\":\"Pod",
      "back\\slash\\",
      "ctl\x01\x1f\n\r\t\b\f\x7f end",
      "\"\"\"\"",
      "\\\""};
  char longest[254];
  struct json_object *doc, *ref;
  const char *uid;
  size_t i;

  for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    doc = owner_patch(true, names[i], &ref, &uid);
    assert_string_equal(member(ref, "name"), names[i]);
    assert_string_equal(member(ref, "kind"), "ReplicaSet");
    assert_string_equal(member(ref, "apiVersion"), "apps/v1");
    assert_string_equal(member(ref, "uid"), "30478c2c-7480-4d2d-a623-3c83746df9f3");
    assert_string_equal(uid, "aaaaaaaa-0000-0000-0000-000000000001");
    assert_int_equal(json_object_object_length(ref), 6);
    json_object_put(doc);
  }
  /* The longest name, every byte escaped six-fold, is not cut short. */
  memset(longest, '\x01', sizeof(longest) - 1);
  longest[sizeof(longest) - 1] = '\0';
  doc = owner_patch(true, longest, &ref, &uid);
  assert_string_equal(member(ref, "name"), longest);
  json_object_put(doc);

  doc = owner_patch(false, "unused\"", &ref, &uid);
  assert_string_equal(member(ref, "$patch"), "delete");
  assert_string_equal(member(ref, "uid"), "30478c2c-7480-4d2d-a623-3c83746df9f3");
  assert_int_equal(json_object_object_length(ref), 2);
  assert_string_equal(uid, "aaaaaaaa-0000-0000-0000-000000000001");
  json_object_put(doc);
}

/* A resourceVersion from the server is digits within 64 bits: no sign, no
 * blanks, no wrap-around. */
static void resource_versions_are_digits(void **state) {
  static const char *const refused[] = {"", "-1", "+1", " 1", "1 ", "0x10", "1e3",
                                        "18446744073709551616", "99999999999999999999999"};
  char text[256];
  struct json_object *o;
  uint64_t rv = 7;
  size_t i;
  assert_true(kcm_api_parse_rv("0", &rv));
  assert_int_equal(rv, 0);
  assert_true(kcm_api_parse_rv("18446744073709551615", &rv));
  assert_true(rv == UINT64_MAX);
  for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
    if (kcm_api_parse_rv(refused[i], &rv))
      fail_msg("resourceVersion \"%s\" taken", refused[i]);
    snprintf(text, sizeof(text), "{\"metadata\":{\"resourceVersion\":\"%s\"}}", refused[i]);
    o = json_tokener_parse(text);
    assert_true(kcm_api_resource_version(o) == 0);
    json_object_put(o);
    if (kcm_api_resource_version_text(text, strlen(text)) != 0)
      fail_msg("resourceVersion \"%s\" taken from text", refused[i]);
  }
  snprintf(text, sizeof(text), "{\"metadata\":{\"resourceVersion\":\"12\"}}");
  assert_true(kcm_api_resource_version_text(text, strlen(text)) == 12);
  snprintf(text, sizeof(text), "{\"metadata\":{\"resourceVersion\":\"12\\u0000x\"}}");
  assert_true(kcm_api_resource_version_text(text, strlen(text)) == 0);
  o = json_tokener_parse("{\"metadata\":{\"resourceVersion\":12}}"); /* not a string */
  assert_true(kcm_api_resource_version(o) == 0);
  json_object_put(o);
  o = json_tokener_parse(
      "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"uid\":"
      "\"0f6b2c1e-8d1a-4c3e-9a7b-2b3c4d5e6f70\",\"resourceVersion\":\"-1\"}}");
  {
    struct kcm_object *obj = NULL;
    struct kcm_api_error err;
    const char *json = json_object_to_json_string(o);
    assert_int_equal(kcm_api_decode(KCM_KIND_POD, o, &pool, &obj, &err), KCM_EINVAL);
    assert_string_equal(err.field, "metadata.resourceVersion");
    const char *at;
    for (i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
      at = strstr(json, "\"-1\"");
      snprintf(text, sizeof(text), "%.*s\"%s\"%s", (int)(at - json), json, refused[i], at + 4);
      if (kcm_api_decode_text(KCM_KIND_POD, text, strlen(text), NULL, NULL, &pool, &obj, &err) !=
          KCM_EINVAL)
        fail_msg("resourceVersion \"%s\" decoded from text", refused[i]);
      assert_string_equal(err.field, "metadata.resourceVersion");
    }
    at = strstr(json, "\"-1\"");
    snprintf(text, sizeof(text), "%.*s\"12\\u0000x\"%s", (int)(at - json), json, at + 4);
    assert_int_equal(
        kcm_api_decode_text(KCM_KIND_POD, text, strlen(text), NULL, NULL, &pool, &obj, &err),
        KCM_EINVAL);
  }
  json_object_put(o);
}

static void times(void **state) {
  int64_t t;
  char buf[32];
  assert_int_equal(kcm_api_parse_time("2026-11-22T06:08:43Z", &t), 0);
  assert_int_equal(t, 1795327723);
  assert_int_equal(kcm_api_parse_time("2026-11-22T06:08:43.123456Z", &t), 0);
  assert_int_equal(t, 1795327723);
  assert_int_equal(kcm_api_parse_time("2026-11-22T08:08:43+02:00", &t), 0);
  assert_int_equal(t, 1795327723);
  assert_int_equal(kcm_api_parse_time("2026-11-22T05:08:43-01:00", &t), 0);
  assert_int_equal(t, 1795327723);
  kcm_api_format_time(t, buf, sizeof(buf));
  assert_string_equal(buf, "2026-11-22T06:08:43Z");
  assert_int_equal(kcm_api_parse_time("2026-11-22 06:08:43Z", &t), KCM_EINVAL);
  assert_int_equal(kcm_api_parse_time("2026-11-22T06:08:43", &t), KCM_EINVAL);
  assert_int_equal(kcm_api_parse_time("2026-13-22T06:08:43Z", &t), KCM_EINVAL);
  assert_int_equal(kcm_api_parse_time("2026-11-22T06:08:43.Z", &t), KCM_EINVAL);
  assert_int_equal(kcm_api_parse_time("", &t), KCM_EINVAL);
  assert_int_equal(kcm_api_parse_time("2026-11-22T06:08:43+99:99", &t), KCM_EINVAL);
}

static void uids(void **state) {
  struct kcm_uid a, b;
  char buf[37];
  assert_int_equal(kcm_api_parse_uid("30478C2C-7480-4d2d-a623-3c83746df9f3", &a), 0);
  kcm_api_format_uid(&a, buf, sizeof(buf));
  assert_string_equal(buf, "30478c2c-7480-4d2d-a623-3c83746df9f3");
  kcm_api_format_uid(&a, buf, 12); /* a short buffer gets the start, terminated */
  assert_string_equal(buf, "30478c2c-74");
  kcm_api_format_uid(&a, buf, sizeof(buf));
  assert_int_equal(kcm_api_parse_uid(buf, &b), 0);
  assert_true(kcm_api_uid_equal(&a, &b));
  assert_int_equal(kcm_api_parse_uid("30478c2c74804d2da6233c83746df9f3", &a), KCM_EINVAL);
  assert_int_equal(kcm_api_parse_uid("30478c2c-7480-4d2d-a623-3c83746df9fg", &a), KCM_EINVAL);
}

static void references_keep_objects_alive(void **state) {
  struct kcm_object *o = decode_ok(KCM_KIND_POD, running_pod);
  kcm_api_ref(o);
  kcm_api_unref(o, &pool);
  assert_string_equal(o->name, "web-7d9f8-abcde"); /* still alive */
  assert_true(kcm_intern_count(&pool) > 0);
  kcm_api_unref(o, &pool);
  assert_int_equal(kcm_intern_count(&pool), 0);
}

/* --- hostile sizes --------------------------------------------------------------------- */

/* Each repeated field at 50,000 entries (keys in reverse order, the worst
 * for an insertion sort): both decoders spend comparisons and reallocations
 * that grow as n log n at most. */
enum { MANY = 50000 };
#define N_LOG_N(fields) ((fields) * 40u * MANY) /* comparisons: n log2 n is about 16 n */
#define FEW_REALLOCS 64u

/* Append prefix, then MANY items, comma-separated, then suffix. In an
 * item, # stands for its index counting down (five digits) and @ for the
 * same number unpadded. */
static void many(struct kcm_buf *b, const char *prefix, const char *item, const char *suffix) {
  unsigned i;
  assert_int_equal(kcm_buf_append_str(b, prefix), 0);
  for (i = 0; i < MANY; i++) {
    unsigned k = MANY - 1 - i;
    const char *c;
    if (i)
      assert_int_equal(kcm_buf_append(b, ",", 1), 0);
    for (c = item; *c; c++) {
      if (*c == '#' || *c == '@')
        assert_int_equal(kcm_buf_appendf(b, *c == '#' ? "%05u" : "%u", k), 0);
      else
        assert_int_equal(kcm_buf_append(b, c, 1), 0);
    }
  }
  assert_int_equal(kcm_buf_append_str(b, suffix), 0);
}

#define HOSTILE_META                                                                           \
  "{\"metadata\":{\"name\":\"h\",\"namespace\":\"d\",\"uid\":\"30478c2c-7480-4d2d-a623-"     \
  "3c83746df9f3\",\"resourceVersion\":\"9\","
#define HOSTILE_SPEC                                                                           \
  "\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"a\"}},\"template\":{\"metadata\":{"    \
  "\"labels\":{\"app\":\"a\"}}}}}"

/* Decode text both ways, each within the budget for so many repeated
 * fields. */
static struct kcm_object *decode_within_budget(enum kcm_kind kind, const char *what,
                                               unsigned fields, const struct kcm_buf *b) {
  struct json_object *tree = json_tokener_parse(b->data);
  struct kcm_object *a = NULL, *t = NULL;
  struct kcm_api_error err;
  struct budget_use used;
  int rc;
  if (!tree)
    fail_msg("%s: not JSON", what);
  budget_start(N_LOG_N(fields), FEW_REALLOCS);
  rc = kcm_api_decode(kind, tree, &pool, &a, &err);
  budget_stop(&used);
  if (rc)
    fail_msg("%s: %s %s", what, err.field, err.problem);
  print_message("%s: tree %llu comparisons, %llu reallocations\n", what,
                (unsigned long long)used.compares, (unsigned long long)used.reallocs);
  json_object_put(tree);
  budget_start(N_LOG_N(fields), FEW_REALLOCS);
  rc = kcm_api_decode_text(kind, b->data, b->len, NULL, NULL, &pool, &t, &err);
  budget_stop(&used);
  if (rc)
    fail_msg("%s: text: %s %s", what, err.field, err.problem);
  print_message("%s: text %llu comparisons, %llu reallocations\n", what,
                (unsigned long long)used.compares, (unsigned long long)used.reallocs);
  same_object(kind, a, t);
  kcm_api_unref(t, &pool);
  return a;
}

static void many_labels_and_annotations(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(64u << 20);
  struct kcm_deployment *d;
  char key[16];
  many(&b, HOSTILE_META "\"labels\":{", "\"l#\":\"v@\"", ",\"l49999\":\"last\"},");
  many(&b, "\"annotations\":{", "\"a#\":\"v@\"", ",\"a49999\":\"last\"}},");
  assert_int_equal(kcm_buf_append_str(&b, HOSTILE_SPEC), 0);
  d = (struct kcm_deployment *)decode_within_budget(KCM_KIND_DEPLOYMENT, "labels, annotations",
                                                    2, &b);
  assert_int_equal(d->o.labels.n, MANY);
  assert_int_equal(d->annotations.n, MANY);
  assert_string_equal(kcm_labels_get(&d->o.labels, "l49999"), "last");
  assert_string_equal(kcm_api_pairs_get(&d->annotations, "a49999"), "last");
  snprintf(key, sizeof(key), "a%05u", 123);
  assert_string_equal(kcm_api_pairs_get(&d->annotations, key), "v123");
  kcm_api_unref(&d->o, &pool);
  kcm_buf_release(&b);
}

static void many_owners_finalizers_and_conditions(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(64u << 20);
  struct kcm_deployment *d;
  many(&b, HOSTILE_META "\"ownerReferences\":[",
       "{\"apiVersion\":\"v1\",\"kind\":\"K\",\"name\":\"o@\",\"uid\":"
       "\"00000000-0000-0000-0000-0000000#\"}",
       "],");
  many(&b, "\"finalizers\":[", "\"f@\"", "],");
  many(&b, "\"managedFields\":[", "{\"manager\":\"m@\",\"fieldsV1\":{\"f:a@\":{}}}", "]},");
  many(&b, "\"status\":{\"conditions\":[", "{\"type\":\"T@\",\"status\":\"True\"}", "]},");
  assert_int_equal(kcm_buf_append_str(&b, HOSTILE_SPEC), 0);
  d = (struct kcm_deployment *)decode_within_budget(KCM_KIND_DEPLOYMENT,
                                                    "owners, finalizers, conditions", 4, &b);
  assert_int_equal(d->o.nowners, MANY);
  assert_int_equal(d->status.conditions.n, MANY);
  kcm_api_unref(&d->o, &pool);
  kcm_buf_release(&b);
}

/* The template: 50,000 labels, annotations and containers, and a selector
 * of 50,000 values; then the template compared with its own copy. */
static void many_template_entries(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(64u << 20);
  struct kcm_replicaset *rs;
  struct kcm_deployment *d;
  size_t at;
  many(&b, HOSTILE_META "\"labels\":{}},\"spec\":{\"selector\":{\"matchExpressions\":["
       "{\"key\":\"app\",\"operator\":\"In\",\"values\":[",
       "\"v@\"", ",\"a\"]}]},\"template\":{\"metadata\":{\"labels\":{\"app\":\"a\",");
  many(&b, "", "\"l#\":\"v@\"", "},");
  many(&b, "\"annotations\":{", "\"a#\":\"v@\"", "}},");
  many(&b, "\"spec\":{\"containers\":[", "{\"name\":\"c@\",\"image\":\"i@\"}", "]}}}}");
  rs = (struct kcm_replicaset *)decode_within_budget(KCM_KIND_REPLICASET, "template", 4, &b);
  assert_int_equal(rs->template_labels.n, MANY + 1);
  assert_true(kcm_labels_matches(&rs->selector, &rs->template_labels));
  at = (size_t)(strstr(b.data, "\"app\":\"a\",") - b.data);
  memcpy(b.data + at, "\"app\":\"b\",", 10);
  d = (struct kcm_deployment *)decode_within_budget(KCM_KIND_DEPLOYMENT, "template", 4, &b);
  budget_start(N_LOG_N(4), FEW_REALLOCS);
  assert_false(kcm_api_template_equal(rs->template, d->template));
  budget_stop(NULL);
  kcm_api_unref(&d->o, &pool);
  memcpy(b.data + at, "\"app\":\"a\",", 10);
  d = (struct kcm_deployment *)decode_within_budget(KCM_KIND_DEPLOYMENT, "template", 4, &b);
  budget_start(N_LOG_N(4), FEW_REALLOCS);
  assert_true(kcm_api_template_equal(rs->template, d->template));
  budget_stop(NULL);
  kcm_api_unref(&d->o, &pool);
  kcm_api_unref(&rs->o, &pool);
  kcm_buf_release(&b);
}

/* A pod of 50,000 init containers (sidecars), statuses and conditions. */
static void many_pod_entries(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(64u << 20);
  struct kcm_pod *p;
  many(&b, HOSTILE_META "\"labels\":{}},\"spec\":{\"initContainers\":[",
       "{\"name\":\"s@\",\"restartPolicy\":\"Always\"}", "]},");
  many(&b, "\"status\":{\"initContainerStatuses\":[", "{\"name\":\"s@\",\"restartCount\":@}",
       "],");
  many(&b, "\"containerStatuses\":[", "{\"name\":\"c@\",\"restartCount\":@}", "],");
  many(&b, "\"conditions\":[", "{\"type\":\"T@\",\"status\":\"True\"}", "]}}");
  p = (struct kcm_pod *)decode_within_budget(KCM_KIND_POD, "pod", 4, &b);
  assert_int_equal(p->sidecar_restarts, MANY - 1);
  assert_int_equal(p->restarts, MANY - 1);
  kcm_api_unref(&p->o, &pool);
  kcm_buf_release(&b);
}


/* --- protobuf ----------------------------------------------------------------------- */

/* The items of the captured protobuf list (bare Pod messages), in order. */
static size_t pb_list_items(const char *body, size_t len, const uint8_t **items, size_t *lens,
                            size_t cap) {
  const uint8_t *kind, *raw, *p;
  size_t kind_len, raw_len, n, count = 0;
  const char *why;
  struct kcm_pb r;
  assert_true(kcm_pb_unwrap((const uint8_t *)body, len, &kind, &kind_len, &raw, &raw_len, &why));
  assert_int_equal(kind_len, 7);
  assert_memory_equal(kind, "PodList", 7);
  kcm_pb_start(&r, raw, raw_len);
  while (kcm_pb_next(&r)) {
    if (r.field != 2) {
      assert_true(kcm_pb_skip(&r));
      continue;
    }
    assert_true(kcm_pb_bytes(&r, &p, &n));
    assert_true(count < cap);
    items[count] = p;
    lens[count++] = n;
  }
  assert_null(r.err);
  return count;
}

/* kube-apiserver's list of the same pods in protobuf and in JSON: every
 * item decodes to the same pod either way. */
static void proto_pods_match_json(void **state) {
  size_t pb_len, json_len, lens[8], n, i;
  char *pb = pbw_read_data("pods-1.24.pb", &pb_len);
  char *json = pbw_read_data("pods-1.24.json", &json_len);
  struct json_object *list = json_tokener_parse(json), *items;
  const uint8_t *msgs[8];
  struct kcm_api_error err;
  int64_t ready_at;

  assert_true(json_object_object_get_ex(list, "items", &items));
  n = pb_list_items(pb, pb_len, msgs, lens, 8);
  assert_int_equal(n, 3);
  assert_int_equal(json_object_array_length(items), n);
  for (i = 0; i < n; i++) {
    struct kcm_object *from_pb, *from_json;
    const char *text = json_object_to_json_string(json_object_array_get_idx(items, i));
    assert_int_equal(kcm_api_decode_pod_proto(msgs[i], lens[i], &pool, &from_pb, &err), 0);
    assert_int_equal(kcm_api_decode_text(KCM_KIND_POD, text, strlen(text), NULL, NULL, &pool,
                                         &from_json, &err), 0);
    same_pod((struct kcm_pod *)from_pb, (struct kcm_pod *)from_json);
    if (!strcmp(from_pb->name, "web-7d9c-abcde")) { /* the fields are there, not just equal */
      struct kcm_pod *p = (struct kcm_pod *)from_pb;
      assert_int_equal(kcm_api_parse_time("2026-11-27T10:00:05Z", &ready_at), 0);
      assert_true(p->ready);
      assert_int_equal(p->ready_since, ready_at);
      assert_int_equal(p->restarts, 7);
      assert_int_equal(p->deletion_cost, -5);
      assert_int_equal(p->phase, KCM_POD_RUNNING);
      assert_string_equal(p->node, "node-a");
      assert_int_equal(p->o.nowners, 2);
      assert_true(p->o.has_controller);
      assert_string_equal(p->o.controller.name, "web-7d9c");
      assert_true(p->o.controller.block_owner_deletion);
      assert_int_equal(p->o.labels.n, 3);
    } else if (!strcmp(from_pb->name, "costly")) {
      struct kcm_pod *p = (struct kcm_pod *)from_pb;
      assert_true(p->o.deleted > 0);
      assert_int_equal(p->phase, KCM_POD_FAILED);
      assert_int_equal(p->deletion_cost, 2147483647);
      assert_false(p->ready);
    } else {
      assert_string_equal(from_pb->name, "bare");
      assert_false(from_pb->has_controller);
      assert_true(from_pb->created > 0);
    }
    kcm_api_unref(from_pb, &pool);
    kcm_api_unref(from_json, &pool);
  }
  json_object_put(list);
  free(pb);
  free(json);
}

/* A pod as kube-apiserver would write it, from parts the tests vary. */
static void pb_pod(struct kcm_buf *out, const char *name, const char *uid, const char *rv,
                   const struct kcm_buf *spec, const struct kcm_buf *status) {
  struct kcm_buf meta = KCM_BUF_INIT(1 << 20);
  pbw_str(&meta, 1, name);
  pbw_str(&meta, 3, "default");
  pbw_str(&meta, 5, uid);
  if (rv)
    pbw_str(&meta, 6, rv);
  pbw_msg(out, 1, &meta);
  if (spec)
    pbw_msg(out, 2, spec);
  if (status)
    pbw_msg(out, 3, status);
  kcm_buf_release(&meta);
}

/* Restartable init containers (sidecars, newer than the captured server)
 * count their restarts apart, as in JSON; a negative restartCount is a
 * ten-byte varint. */
static void proto_sidecars_and_counts(void **state) {
  struct kcm_buf pod = KCM_BUF_INIT(1 << 20), spec = KCM_BUF_INIT(1 << 20),
                 status = KCM_BUF_INIT(1 << 20), part = KCM_BUF_INIT(1 << 20);
  struct kcm_object *from_pb, *from_json;
  struct kcm_api_error err;
  static const char json[] =
      "{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"uid\":"
      "\"6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51\",\"resourceVersion\":\"9\"},"
      "\"spec\":{\"initContainers\":[{\"name\":\"side\",\"restartPolicy\":\"Always\"},"
      "{\"name\":\"init\"}]},\"status\":{\"initContainerStatuses\":[{\"name\":\"side\","
      "\"restartCount\":4},{\"name\":\"init\",\"restartCount\":9}],\"containerStatuses\":"
      "[{\"restartCount\":-1},{\"restartCount\":2}]}}";

  pbw_str(&part, 1, "side");
  pbw_str(&part, 24, "Always");
  pbw_msg(&spec, 20, &part);
  kcm_buf_reset(&part);
  pbw_str(&part, 1, "init");
  pbw_msg(&spec, 20, &part);
  kcm_buf_reset(&part);
  pbw_str(&part, 1, "side");
  pbw_int(&part, 5, 4);
  pbw_msg(&status, 10, &part);
  kcm_buf_reset(&part);
  pbw_str(&part, 1, "init");
  pbw_int(&part, 5, 9);
  pbw_msg(&status, 10, &part);
  kcm_buf_reset(&part);
  pbw_int(&part, 5, (uint64_t)(int64_t)-1);
  assert_int_equal(part.len, 11);
  pbw_msg(&status, 8, &part);
  kcm_buf_reset(&part);
  pbw_int(&part, 5, 2);
  pbw_msg(&status, 8, &part);
  pb_pod(&pod, "p", "6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51", "9", &spec, &status);

  assert_int_equal(kcm_api_decode_pod_proto(pod.data, pod.len, &pool, &from_pb, &err), 0);
  assert_int_equal(kcm_api_decode_text(KCM_KIND_POD, json, strlen(json), NULL, NULL, &pool,
                                       &from_json, &err), 0);
  same_pod((struct kcm_pod *)from_pb, (struct kcm_pod *)from_json);
  assert_int_equal(((struct kcm_pod *)from_pb)->sidecar_restarts, 4);
  assert_int_equal(((struct kcm_pod *)from_pb)->restarts, 2);
  kcm_api_unref(from_pb, &pool);
  kcm_api_unref(from_json, &pool);
  kcm_buf_release(&pod);
  kcm_buf_release(&spec);
  kcm_buf_release(&status);
  kcm_buf_release(&part);
}

static void proto_fails(const struct kcm_buf *pod, const char *field) {
  struct kcm_object *o = (struct kcm_object *)1;
  struct kcm_api_error err;
  assert_int_equal(kcm_api_decode_pod_proto(pod->data, pod->len, &pool, &o, &err), KCM_EINVAL);
  assert_null(o);
  assert_string_equal(err.field, field);
  assert_true(err.problem[0] != '\0');
}

/* A bad pod names the field, as in JSON; a cut message is an error
 * wherever it is cut inside a field. */
static void proto_bad_pods_name_the_field(void **state) {
  static const char uid[] = "6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51";
  struct kcm_buf pod = KCM_BUF_INIT(1 << 20), part = KCM_BUF_INIT(1 << 20);
  struct kcm_object *o;
  struct kcm_api_error err;
  size_t pb_len, lens[8], i, cut, failed = 0;
  const uint8_t *msgs[8];
  char *pb;

  pb_pod(&pod, "p", "not-a-uid", "9", NULL, NULL);
  proto_fails(&pod, "metadata.uid");
  kcm_buf_reset(&pod);
  /* a kind whose row has no protobuf reader is refused, bare or not */
  pb_pod(&pod, "p", uid, "9", NULL, NULL);
  o = (struct kcm_object *)1;
  assert_int_equal(
      kcm_api_decode_proto_bare(KCM_KIND_REPLICASET, pod.data, pod.len, &pool, &o, &err),
      KCM_EINVAL);
  assert_null(o);
  assert_string_equal(err.problem, "ReplicaSet is not read from protobuf");
  assert_int_equal(
      kcm_api_decode_proto(KCM_KIND_DEPLOYMENT, pod.data, pod.len, &pool, &o, &err), KCM_EINVAL);
  assert_string_equal(err.problem, "Deployment is not read from protobuf");
  assert_int_equal(kcm_api_decode_proto_bare(KCM_KIND_POD, pod.data, pod.len, &pool, &o, &err), 0);
  kcm_api_unref(o, &pool);
  kcm_buf_reset(&pod);
  pb_pod(&pod, "p", uid, NULL, NULL, NULL);
  proto_fails(&pod, "metadata.resourceVersion");
  kcm_buf_reset(&pod);
  pb_pod(&pod, "p", uid, "9x", NULL, NULL);
  proto_fails(&pod, "metadata.resourceVersion");
  kcm_buf_reset(&pod);
  pb_pod(&pod, "", uid, "9", NULL, NULL);
  proto_fails(&pod, "metadata.name");
  kcm_buf_reset(&pod);
  pbw_int(&part, 1, 5); /* a name that is a number */
  pbw_msg(&pod, 1, &part);
  proto_fails(&pod, "metadata.name");
  kcm_buf_reset(&pod);
  kcm_buf_reset(&part);
  pbw_int(&part, 10, 1); /* a nodeName that is a number */
  pb_pod(&pod, "p", uid, "9", &part, NULL);
  proto_fails(&pod, "spec.nodeName");
  kcm_buf_reset(&pod);
  kcm_buf_reset(&part);
  {
    struct kcm_buf meta = KCM_BUF_INIT(1 << 20);
    pbw_str(&part, 1, "ReplicaSet");
    pbw_str(&part, 6, "1"); /* controller: true, but as a string */
    pbw_str(&meta, 1, "p");
    pbw_str(&meta, 3, "default");
    pbw_msg(&meta, 13, &part);
    pbw_msg(&pod, 1, &meta);
    proto_fails(&pod, "metadata.ownerReferences.controller");
    kcm_buf_release(&meta);
  }
  kcm_buf_reset(&pod);
  kcm_buf_reset(&part);
  {
    static const char *const names[][2] = {{"a\0b", "default"}, {"a", "\0"}};
    struct kcm_buf meta = KCM_BUF_INIT(1 << 20);
    for (i = 0; i < 2; i++) {
      kcm_buf_reset(&pod);
      kcm_buf_reset(&meta);
      pbw_bytes(&meta, 1, names[i][0], strlen(names[i][0]) + (i == 0 ? 2 : 0));
      pbw_bytes(&meta, 3, names[i][1], i == 1 ? 1 : strlen(names[i][1]));
      pbw_str(&meta, 5, uid);
      pbw_str(&meta, 6, "9");
      pbw_msg(&pod, 1, &meta);
      proto_fails(&pod, i == 0 ? "metadata.name" : "metadata.namespace");
    }
    kcm_buf_release(&meta);
  }
  kcm_buf_reset(&pod);
  pb_pod(&pod, "p", uid, "9", NULL, NULL);
  pbw_tag(&pod, 7, 3); /* a group: kube-apiserver writes none */
  proto_fails(&pod, "(protobuf)");
  kcm_buf_release(&pod);
  kcm_buf_release(&part);

  pb = pbw_read_data("pods-1.24.pb", &pb_len);
  assert_int_equal(pb_list_items(pb, pb_len, msgs, lens, 8), 3);
  for (i = 0; i < 3; i++) {
    for (cut = 0; cut < lens[i]; cut++) {
      if (kcm_api_decode_pod_proto(msgs[i], cut, &pool, &o, &err) == 0)
        kcm_api_unref(o, &pool); /* cut between fields, after the required ones */
      else
        failed++;
    }
  }
  assert_true(failed > (lens[0] + lens[1] + lens[2]) / 2);
  free(pb);
}

/* The envelope: the "k8s" magic and a runtime.Unknown naming the kind. */
static void proto_envelope(void **state) {
  struct kcm_buf env = KCM_BUF_INIT(1 << 20), meta = KCM_BUF_INIT(1 << 20),
                 pod = KCM_BUF_INIT(1 << 20);
  struct kcm_object *o;
  struct kcm_api_error err;
  pb_pod(&pod, "p", "6f3c1f0e-1d2a-4b5c-8d9e-0a1b2c3d4e51", "9", NULL, NULL);
  pbw_str(&meta, 1, "v1");
  pbw_str(&meta, 2, "Pod");
  kcm_buf_append(&env, KCM_PB_MAGIC, KCM_PB_MAGIC_LEN);
  pbw_msg(&env, 1, &meta);
  pbw_msg(&env, 2, &pod);
  pbw_str(&env, 3, "");
  pbw_str(&env, 4, "");
  assert_int_equal(kcm_api_decode_proto(KCM_KIND_POD, env.data, env.len, &pool, &o, &err), 0);
  assert_string_equal(o->name, "p");
  kcm_api_unref(o, &pool);
  /* Without the magic, of another kind, or encoded: refused. */
  assert_int_equal(kcm_api_decode_proto(KCM_KIND_POD, env.data + 1, env.len - 1, &pool, &o,
                                        &err), KCM_EINVAL);
  assert_string_equal(err.field, "(protobuf)");
  assert_int_equal(kcm_api_decode_proto(KCM_KIND_REPLICASET, env.data, env.len, &pool, &o,
                                        &err), KCM_EINVAL);
  kcm_buf_reset(&env);
  kcm_buf_reset(&meta);
  pbw_str(&meta, 2, "Status");
  kcm_buf_append(&env, KCM_PB_MAGIC, KCM_PB_MAGIC_LEN);
  pbw_msg(&env, 1, &meta);
  pbw_msg(&env, 2, &pod);
  assert_int_equal(kcm_api_decode_proto(KCM_KIND_POD, env.data, env.len, &pool, &o, &err),
                   KCM_EINVAL);
  kcm_buf_reset(&env);
  kcm_buf_append(&env, KCM_PB_MAGIC, KCM_PB_MAGIC_LEN);
  pbw_msg(&env, 2, &pod);
  pbw_str(&env, 3, "gzip");
  assert_int_equal(kcm_api_decode_proto(KCM_KIND_POD, env.data, env.len, &pool, &o, &err),
                   KCM_EINVAL);
  assert_non_null(strstr(err.problem, "contentEncoding"));
  kcm_buf_release(&env);
  kcm_buf_release(&meta);
  kcm_buf_release(&pod);
}

/* The wire reader: varints up to ten bytes and 64 bits, every read within
 * bounds. */
static void proto_wire_reader(void **state) {
  static const uint8_t eleven[11] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                     0x80, 0x80, 0x80, 0x80, 0x01};
  static const uint32_t path[] = {1, 6, 0};
  struct kcm_buf m = KCM_BUF_INIT(1 << 20), inner = KCM_BUF_INIT(1 << 20);
  const uint8_t *p;
  size_t n;
  uint64_t v;
  struct kcm_pb r;

  assert_int_equal(kcm_pb_read_varint(eleven, 11, &v), -1);
  assert_int_equal(kcm_pb_read_varint(eleven, 5, &v), 0);
  assert_int_equal(kcm_pb_read_varint(eleven + 9, 2, &v), 2);
  assert_int_equal(v, 128);
  /* ten bytes: the tenth holds bit 63 alone; more overflows, as Go says */
  {
    static const uint8_t max[10] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    static const uint8_t over[10] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02};
    assert_int_equal(kcm_pb_read_varint(max, 10, &v), 10);
    assert_true(v == UINT64_MAX);
    assert_int_equal(kcm_pb_read_varint(over, 10, &v), -1);
  }
  pbw_int(&m, 3, UINT64_MAX);
  pbw_str(&inner, 6, "42");
  pbw_msg(&m, 1, &inner);
  kcm_pb_start(&r, m.data, m.len);
  assert_true(kcm_pb_find(&r, path));
  assert_true(kcm_pb_bytes(&r, &p, &n));
  assert_int_equal(n, 2);
  assert_memory_equal(p, "42", 2);
  /* A length past the end stops the walk. */
  kcm_buf_reset(&m);
  pbw_tag(&m, 2, 2);
  pbw_varint(&m, 100);
  kcm_pb_start(&r, m.data, m.len);
  assert_true(kcm_pb_next(&r));
  assert_false(kcm_pb_bytes(&r, &p, &n));
  assert_non_null(r.err);
  assert_false(kcm_pb_next(&r));
  /* Field 0 and the group wire types are malformed tags. */
  kcm_buf_reset(&m);
  pbw_tag(&m, 0, 0);
  kcm_pb_start(&r, m.data, m.len);
  assert_false(kcm_pb_next(&r));
  assert_non_null(r.err);
  kcm_buf_release(&m);
  kcm_buf_release(&inner);
}

/* Each row of the kinds describes its own struct: its index, where its
 * writers and replicas are, the counts its controller keeps. */
static void kinds_describe_their_structs(void **state) {
  struct kcm_replicaset rs = {0};
  struct kcm_deployment d = {0};
  struct kcm_pod p = {0};
  struct kcm_api_count counts[KCM_API_COUNTS];
  int k;
  (void)state;
  for (k = 0; k < KCM_KIND_COUNT; k++) {
    const struct kcm_api_kind *row = kcm_api_kind((enum kcm_kind)k);
    assert_non_null(row);
    assert_int_equal(row->kind, k);
    assert_true(row->size >= sizeof(struct kcm_object));
    assert_non_null(row->release);
    assert_non_null(row->held);
    assert_non_null(row->counts);
  }
  assert_null(kcm_api_kind(KCM_KIND_COUNT));
  rs.o.kind = KCM_KIND_REPLICASET;
  d.o.kind = KCM_KIND_DEPLOYMENT;
  p.o.kind = KCM_KIND_POD;
  assert_ptr_equal(kcm_api_writers_of(&rs.o), &rs.writers);
  assert_ptr_equal(kcm_api_writers_of(&d.o), &d.writers);
  assert_null(kcm_api_writers_of(&p.o));
  assert_int_equal(kcm_api_kind(KCM_KIND_POD)->counts(&p.o, counts), 0);
  rs.status.ready = 7;
  rs.status.observed_generation = 9;
  assert_int_equal(kcm_api_kind(KCM_KIND_REPLICASET)->counts(&rs.o, counts), 6);
  assert_string_equal(counts[2].name, "readyReplicas");
  assert_int_equal(counts[2].value, 7);
  assert_string_equal(counts[5].name, "observedGeneration");
  assert_int_equal(counts[5].value, 9);
  d.status.collision_count = 4;
  assert_int_equal(kcm_api_kind(KCM_KIND_DEPLOYMENT)->counts(&d.o, counts), 8);
  assert_string_equal(counts[6].name, "collisionCount");
  assert_int_equal(counts[6].value, 4);
  d.replicas = 3;
  assert_int_equal(*(const int32_t *)((const char *)&d + kcm_api_kind(KCM_KIND_DEPLOYMENT)
                                                           ->replicas_at),
                   3);
  assert_int_equal(kcm_api_kind(KCM_KIND_POD)->replicas_at, 0);
  assert_string_equal(kcm_api_kind(KCM_KIND_DEPLOYMENT)->api_version, "apps/v1");
  assert_string_equal(kcm_api_kind(KCM_KIND_POD)->api_version, "v1");
  assert_non_null(kcm_api_kind(KCM_KIND_POD)->decode_at);
  assert_null(kcm_api_kind(KCM_KIND_REPLICASET)->decode_at);
}

/* --- what a pod's status says holds it back (kcm why) ------------------------------ */

#define WHY_NOW 1795000000 /* 2026-11-18T11:06:40Z */

static char *pod_why(const char *text) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 20);
  char *t;
  assert_int_equal(kcm_api_pod_why(text, strlen(text), WHY_NOW, &b), 0);
  assert_non_null(t = kcm_buf_take(&b));
  return t;
}

static void pod_why_names_waiting_containers(void **state) {
  char *t;
  (void)state;
  t = pod_why("{\"spec\":{\"containers\":[{\"name\":\"app\"}]},\"status\":{\"phase\":\"Pending\","
              "\"containerStatuses\":[{\"name\":\"app\",\"ready\":false,\"restartCount\":0,"
              "\"state\":{\"waiting\":{\"reason\":\"ImagePullBackOff\",\"message\":"
              "\"Back-off pulling image \\\"bad\\\"\"}}}]}}");
  assert_string_equal(t, "container app: waiting, ImagePullBackOff: Back-off pulling image "
                         "\"bad\"\n");
  free(t);
  /* a crash loop: restarts and the last exit, how long ago */
  t = pod_why("{\"status\":{\"containerStatuses\":[{\"name\":\"app\",\"ready\":false,"
              "\"restartCount\":4,\"state\":{\"waiting\":{\"reason\":\"CrashLoopBackOff\"}},"
              "\"lastState\":{\"terminated\":{\"exitCode\":1,\"reason\":\"Error\","
              "\"finishedAt\":\"2026-11-18T11:04:35Z\"}}}]}}");
  assert_string_equal(t, "container app: waiting, CrashLoopBackOff; restarted 4 times, last "
                         "exit code 1 (Error) 2m5s ago\n");
  free(t);
}

static void pod_why_names_unready_and_unscheduled_pods(void **state) {
  char *t;
  (void)state;
  /* running, not ready, with a readiness probe; a ready one says nothing */
  t = pod_why("{\"spec\":{\"containers\":[{\"name\":\"a\",\"readinessProbe\":{}},{\"name\":\"b\"}]},"
              "\"status\":{\"containerStatuses\":[{\"name\":\"a\",\"ready\":false,\"state\":"
              "{\"running\":{\"startedAt\":\"2026-11-18T11:06:00Z\"}}},{\"name\":\"b\",\"ready\":"
              "true,\"state\":{\"running\":{}}}]}}");
  assert_string_equal(t, "container a: running for 40s, not ready (its readiness probe does "
                         "not pass)\n");
  free(t);
  t = pod_why("{\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\","
              "\"status\":\"False\",\"reason\":\"Unschedulable\",\"message\":\"0/3 nodes are "
              "available: 3 Insufficient cpu.\",\"lastTransitionTime\":\"2026-11-18T08:20:00Z\"}]}}");
  assert_string_equal(t, "not scheduled, Unschedulable: 0/3 nodes are available: 3 Insufficient "
                         "cpu. (for 2h46m)\n");
  free(t);
  /* evicted; an init container that failed; one waiting for its turn is no cause */
  t = pod_why("{\"status\":{\"phase\":\"Failed\",\"reason\":\"Evicted\",\"message\":\"low on "
              "memory\",\"initContainerStatuses\":[{\"name\":\"setup\",\"state\":{\"terminated\":"
              "{\"exitCode\":2}}},{\"name\":\"next\",\"state\":{\"waiting\":{\"reason\":"
              "\"PodInitializing\"}}}]}}");
  assert_string_equal(t, "Evicted: low on memory\ninit container setup: terminated, exit code 2\n");
  free(t);
  t = pod_why("{\"status\":{\"phase\":\"Running\"}}");
  assert_string_equal(t, "");
  free(t);
  /* a reason without a message; one PodScheduled line however many */
  t = pod_why("{\"status\":{\"reason\":\"Evicted\",\"conditions\":[{\"type\":\"PodScheduled\","
              "\"status\":\"False\"},{\"type\":\"PodScheduled\",\"status\":\"False\"}]}}");
  assert_string_equal(t, "Evicted\nnot scheduled\n");
  free(t);
}

static void pod_why_is_bounded_and_printable(void **state) {
  struct kcm_buf big = KCM_BUF_INIT(1 << 22), b = KCM_BUF_INIT(1 << 20);
  char *t, *line;
  int i;
  (void)state;
  /* control characters from the status reach no terminal */
  t = pod_why("{\"status\":{\"containerStatuses\":[{\"name\":\"a\\u001b[2J\",\"state\":{\"waiting\":"
              "{\"reason\":\"R\\u0085\",\"message\":\"x\\u202ey\\ny\"}}}]}}");
  assert_string_equal(t, "container a [2J: waiting, R : x y y\n");
  free(t);
  /* ten containers, a long message, and managedFields 5,000 levels deep */
  assert_int_equal(kcm_buf_append_str(&big, "{\"metadata\":{\"managedFields\":[{\"fieldsV1\":"), 0);
  for (i = 0; i < 5000; i++)
    assert_int_equal(kcm_buf_append_str(&big, "{\"f\":"), 0);
  assert_int_equal(kcm_buf_append_str(&big, "1"), 0);
  for (i = 0; i < 5000; i++)
    assert_int_equal(kcm_buf_append_str(&big, "}"), 0);
  assert_int_equal(kcm_buf_append_str(&big, "}]},\"status\":{\"containerStatuses\":["), 0);
  for (i = 0; i < 10; i++)
    assert_int_equal(kcm_buf_appendf(&big, "%s{\"name\":\"c%d\",\"state\":{\"waiting\":{\"message\":"
                                     "\"%0900d\"}}}", i ? "," : "", i, 0), 0);
  assert_int_equal(kcm_buf_append_str(&big, "]}}"), 0);
  assert_int_equal(kcm_api_pod_why(big.data, big.len, WHY_NOW, &b), 0);
  assert_non_null(t = kcm_buf_take(&b));
  line = strtok(t, "\n");
  for (i = 0; i < 3; i++, line = strtok(NULL, "\n")) {
    assert_non_null(line);
    assert_true(strlen(line) < 350);
    assert_non_null(strstr(line, "..."));
  }
  assert_string_equal(line, "and 7 more containers not ready");
  assert_null(strtok(NULL, "\n"));
  free(t);
  kcm_buf_release(&big);
  assert_int_equal(kcm_api_pod_why("[1]", 3, WHY_NOW, &b), KCM_EINVAL);
  assert_int_equal(kcm_api_pod_why("{", 1, WHY_NOW, &b), KCM_EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(kinds_describe_their_structs),
      cmocka_unit_test(pod_fields),
      cmocka_unit_test(resource_versions_are_digits),
      cmocka_unit_test(pod_defaults),
      cmocka_unit_test(pod_oddities_are_ignored),
      cmocka_unit_test(repeated_metadata_keeps_what_the_second_leaves_out),
      cmocka_unit_test(replicaset_fields),
      cmocka_unit_test(template_zero_time_is_no_time),
      cmocka_unit_test(replicaset_defaults),
      cmocka_unit_test(replicaset_text_skips_managed_fields),
      cmocka_unit_test(workload_writers),
      cmocka_unit_test(templates_known_by_the_memo),
      cmocka_unit_test(deployment_fields),
      cmocka_unit_test(last_applied_is_dropped),
      cmocka_unit_test(template_keys_ignore_the_hash),
      cmocka_unit_test(pairs_and_conditions),
      cmocka_unit_test(pairs_merge),
      cmocka_unit_test(rechecks),
      cmocka_unit_test(bad_objects_name_the_field),
      cmocka_unit_test(huge_strings_are_kept_whole),
      cmocka_unit_test(canonical_json_sorts_and_escapes),
      cmocka_unit_test(owner_patches_escape_names),
      cmocka_unit_test(delete_options_carry_preconditions),
      cmocka_unit_test(times),
      cmocka_unit_test(uids),
      cmocka_unit_test(references_keep_objects_alive),
      cmocka_unit_test(many_labels_and_annotations),
      cmocka_unit_test(many_owners_finalizers_and_conditions),
      cmocka_unit_test(many_template_entries),
      cmocka_unit_test(many_pod_entries),
      cmocka_unit_test(proto_pods_match_json),
      cmocka_unit_test(proto_sidecars_and_counts),
      cmocka_unit_test(proto_bad_pods_name_the_field),
      cmocka_unit_test(proto_envelope),
      cmocka_unit_test(proto_wire_reader),
      cmocka_unit_test(pod_why_names_waiting_containers),
      cmocka_unit_test(pod_why_names_unready_and_unscheduled_pods),
      cmocka_unit_test(pod_why_is_bounded_and_printable),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
