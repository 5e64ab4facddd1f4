/*
 * Tests for the Deployment controller's planning: the behaviours upstream's
 * deployment_util_test.go, sync_test.go, rolling_test.go, recreate_test.go,
 * progress_test.go and rollback_test.go check, as tables over decoded
 * objects.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/controllers/deployment/internal.h"
#include "budget.h"
#include "../../src/api/internal.h"
#include "../oracle/tree.h"
#include "kcm/buf.h"
#include "kcm/deployment.h"
#include "kcm/error.h"

static struct kcm_intern pool;

#define D_UID "dddddddd-0000-0000-0000-000000000001"
#define OTHER_UID "eeeeeeee-0000-0000-0000-000000000002"
#define NOW_S 1800000000LL
#define NOW_MS ((uint64_t)NOW_S * 1000 + 500)

static int setup(void **state) {
  kcm_intern_init(&pool);
  return 0;
}

static int teardown(void **state) {
  assert_int_equal(kcm_intern_count(&pool), 0);
  kcm_intern_release(&pool);
  return 0;
}

static struct kcm_object *decode(enum kcm_kind kind, const char *json) {
  struct json_object *o = json_tokener_parse(json);
  struct kcm_object *obj = NULL;
  struct kcm_api_error err;
  if (!o)
    fail_msg("bad test JSON: %s", json);
  if (kcm_api_decode(kind, o, &pool, &obj, &err))
    fail_msg("decode: %s %s", err.field, err.problem);
  json_object_put(o);
  return obj;
}

static void iso(int64_t t, char *buf, size_t len) { kcm_api_format_time(t, buf, len); }

/* --- building objects -------------------------------------------------------------------- */

struct dspec {
  int replicas;
  const char *surge;       /* JSON value */
  const char *unavailable; /* JSON value */
  bool recreate;
  bool paused;
  int history;             /* revisionHistoryLimit; -1: unset */
  int deadline;            /* progressDeadlineSeconds; -1: unset */
  int min_ready;
  const char *image;
  const char *annotations; /* JSON object */
  const char *status;      /* JSON object */
  const char *selector;    /* JSON object */
  int64_t generation;
  bool deleting;
  const char *name;        /* default web */
};

static struct dspec dspec(int replicas) {
  struct dspec s = {replicas, "\"25%\"", "\"25%\"", false, false, 10, 600, 0, "nginx:1",
                    "{}", "{}", "{\"matchLabels\":{\"app\":\"web\"}}", 1, false, NULL};
  return s;
}

static struct kcm_deployment *make_d(const struct dspec *s) {
  struct kcm_deployment *d;
  char *json, strategy[256], extra[256] = "", del[96] = "";
  if (s->recreate)
    snprintf(strategy, sizeof(strategy), "{\"type\":\"Recreate\"}");
  else
    snprintf(strategy, sizeof(strategy),
             "{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":%s,"
             "\"maxUnavailable\":%s}}",
             s->surge, s->unavailable);
  if (s->history >= 0)
    snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
             ",\"revisionHistoryLimit\":%d", s->history);
  if (s->deadline >= 0)
    snprintf(extra + strlen(extra), sizeof(extra) - strlen(extra),
             ",\"progressDeadlineSeconds\":%d", s->deadline);
  if (s->deleting)
    snprintf(del, sizeof(del), ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"");
  assert_true(asprintf(
      &json,
           "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"" D_UID "\","
           "\"resourceVersion\":\"40\",\"generation\":%lld,\"creationTimestamp\":"
           "\"2026-01-01T00:00:00Z\",\"annotations\":%s%s},"
           "\"spec\":{\"replicas\":%d,\"minReadySeconds\":%d,\"paused\":%s,\"selector\":%s,"
           "\"strategy\":%s%s,\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"},"
           "\"creationTimestamp\":null},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
           "\"%s\"}]}}},\"status\":%s}",
           s->name ? s->name : "web", (long long)s->generation, s->annotations, del, s->replicas,
           s->min_ready,
           s->paused ? "true" : "false", s->selector, strategy, extra, s->image, s->status) > 0);
  d = (struct kcm_deployment *)decode(KCM_KIND_DEPLOYMENT, json);
  free(json);
  return d;
}

struct rsspec {
  const char *name;
  int64_t age;             /* seconds before NOW; orders creation */
  int replicas;
  const char *image;       /* template image; default nginx:1 */
  int revision;            /* 0: no revision annotation */
  const char *annotations; /* more annotations, a JSON fragment with a leading comma */
  int ready, available, status_replicas;
  const char *owner;       /* controller uid; default D_UID; "" for an orphan */
  const char *labels;      /* JSON object; default app=web plus the hash */
  const char *conditions;  /* JSON array */
  int64_t generation, observed;
  bool deleting;
  const char *status;      /* more status fields, with a leading comma */
};

static struct kcm_replicaset *make_rs(const struct rsspec *s) {
  struct kcm_replicaset *rs;
  char *json, *ann, owner[512] = "", created[32], labels[256], del[96] = "";
  const char *owner_uid = s->owner ? s->owner : D_UID;
  if (*owner_uid)
    snprintf(owner, sizeof(owner),
             ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\","
             "\"name\":\"web\",\"uid\":\"%s\",\"controller\":true,\"blockOwnerDeletion\":true}]",
             owner_uid);
  iso(NOW_S - (s->age ? s->age : 1000), created, sizeof(created));
  if (s->revision)
    assert_true(asprintf(&ann, "{\"deployment.kubernetes.io/revision\":\"%d\"%s}", s->revision,
                         s->annotations ? s->annotations : "") > 0);
  else
    assert_true(asprintf(&ann, "{\"x\":\"y\"%s}", s->annotations ? s->annotations : "") > 0);
  snprintf(labels, sizeof(labels), "{\"app\":\"web\",\"pod-template-hash\":\"%s\"}", s->name);
  if (s->deleting)
    snprintf(del, sizeof(del), ",\"deletionTimestamp\":\"2026-01-01T00:00:00Z\"");
  assert_true(asprintf(
      &json,
           "{\"metadata\":{\"name\":\"web-%s\",\"namespace\":\"ns\",\"uid\":"
           "\"aaaaaaaa-0000-0000-0000-%012x\",\"resourceVersion\":\"7\",\"generation\":%lld,"
           "\"creationTimestamp\":\"%s\",\"labels\":%s,\"annotations\":%s%s%s},"
           "\"spec\":{\"replicas\":%d,\"selector\":{\"matchLabels\":{\"app\":\"web\","
           "\"pod-template-hash\":\"%s\"}},\"template\":{\"metadata\":{\"labels\":%s,"
           "\"creationTimestamp\":null},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
           "\"%s\"}]}}},\"status\":{\"replicas\":%d,\"readyReplicas\":%d,\"availableReplicas\":"
           "%d,\"observedGeneration\":%lld,\"conditions\":%s%s}}",
           s->name, (unsigned)(s->name[0] * 977 + strlen(s->name) * 31 + s->name[1]),
           (long long)(s->generation ? s->generation : 1), created,
           s->labels ? s->labels : labels, ann, owner, del, s->replicas, s->name, labels,
           s->image ? s->image : "nginx:1", s->status_replicas ? s->status_replicas : s->replicas,
           s->ready, s->available,
           (long long)(s->observed ? s->observed : (s->generation ? s->generation : 1)),
           s->conditions ? s->conditions : "[]", s->status ? s->status : "") > 0);
  rs = (struct kcm_replicaset *)decode(KCM_KIND_REPLICASET, json);
  free(json);
  free(ann);
  return rs;
}

/* One planned sync over a Deployment and its ReplicaSets. */
struct run {
  struct kcm_deployment *d;
  struct kcm_replicaset *rs[16];
  size_t n;
  struct kcm_deployment_plan plan;
  bool running;             /* what pods_running answers */
  const struct kcm_deployment_alias *alias;
  int8_t terminating_kept;  /* whether the server keeps status.terminatingReplicas */
  uint64_t status_wait_ms;  /* until a status write may go */
};

static bool answer_running(void *ctx, const struct kcm_replicaset *rs) {
  return ((struct run *)ctx)->running;
}

static void plan(struct run *r) {
  struct kcm_deployment_input in = {r->d,     r->rs,  r->n, answer_running,
                                    r,        r->alias, NOW_MS, r->terminating_kept,
                                    r->status_wait_ms};
  assert_int_equal(kcm_deployment_plan(&in, &r->plan), 0);
}

static void done(struct run *r) {
  size_t i;
  kcm_deployment_plan_release(&r->plan);
  for (i = 0; i < r->n; i++)
    kcm_api_unref(&r->rs[i]->o, &pool);
  kcm_api_unref(&r->d->o, &pool);
}

/* The replicas each ReplicaSet is scaled to ("name=N,..."), in step order,
 * with "+name=N" for a creation and "-name" for a deletion. */
static void writes(const struct run *r, char *buf, size_t len) {
  size_t i, o = 0;
  buf[0] = '\0';
  for (i = 0; i < r->plan.nsteps && o < len; i++) {
    const struct kcm_deployment_step *s = &r->plan.steps[i];
    const char *name = s->rs >= 0 ? r->plan.rs[s->rs].name : "";
    if (!strncmp(name, "web-", 4))
      name += 4;
    if (s->op == KCM_DEPLOYMENT_STEP_SCALE)
      o += (size_t)snprintf(buf + o, len - o, "%s%s=%d", o ? "," : "", name, s->replicas);
    else if (s->op == KCM_DEPLOYMENT_STEP_CREATE)
      o += (size_t)snprintf(buf + o, len - o, "%s+new=%d", o ? "," : "",
                            r->plan.rs[s->rs].replicas);
    else if (s->op == KCM_DEPLOYMENT_STEP_DELETE)
      o += (size_t)snprintf(buf + o, len - o, "%s-%s", o ? "," : "", name);
  }
}

static const struct kcm_deployment_step *has_step(const struct run *r, enum kcm_deployment_op op) {
  size_t i;
  for (i = 0; i < r->plan.nsteps; i++)
    if (r->plan.steps[i].op == op)
      return &r->plan.steps[i];
  return NULL;
}

/* The first step of a kind; the test fails without one. */
static const struct kcm_deployment_step *find_step(const struct run *r, enum kcm_deployment_op op) {
  static const struct kcm_deployment_step none;
  const struct kcm_deployment_step *s = has_step(r, op);
  if (!s)
    fail_msg("no step of kind %d", (int)op);
  return s ? s : &none;
}

static const struct kcm_condition *has_cond(const struct run *r, const char *type) {
  return kcm_api_condition_get(&r->plan.status.conditions, type);
}

/* The planned condition of a type; the test fails without one. */
static const struct kcm_condition *cond(const struct run *r, const char *type) {
  static char empty[] = "";
  static const struct kcm_condition none = {empty, empty, empty, empty, 0, 0};
  const struct kcm_condition *c = has_cond(r, type);
  if (!c)
    fail_msg("no %s condition", type);
  return c ? c : &none;
}

/* --- arithmetic ------------------------------------------------------------------------- */

static struct kcm_intstr is_int(int v) { return (struct kcm_intstr){v, false, true}; }
static struct kcm_intstr is_pct(int v) { return (struct kcm_intstr){v, true, true}; }

static void fenceposts(void **state) {
  static const struct {
    struct kcm_intstr surge, unavail;
    int32_t desired, want_surge, want_unavail;
  } cases[] = {
      {{0, false, true}, {1, false, true}, 0, 0, 1},
      {{39, true, true}, {39, true, true}, 10, 4, 3},   /* surge rounds up, unavailable down */
      {{0, false, false}, {39, true, true}, 10, 0, 3},  /* unset counts as 0 */
      {{39, true, true}, {0, false, false}, 10, 4, 0},
      {{0, false, false}, {0, false, false}, 10, 0, 1}, /* both 0: one may be unavailable */
      {{25, true, true}, {25, true, true}, 10, 3, 2},
      {{100, true, true}, {0, true, true}, 3, 3, 0},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int32_t s, u;
    kcm_deployment_fenceposts(&cases[i].surge, &cases[i].unavail, cases[i].desired, &s, &u);
    assert_int_equal(s, cases[i].want_surge);
    assert_int_equal(u, cases[i].want_unavail);
  }
  {
    struct kcm_intstr p = is_pct(33), n = is_int(7);
    assert_int_equal(kcm_deployment_scaled(&p, 10, true), 4);
    assert_int_equal(kcm_deployment_scaled(&p, 10, false), 3);
    assert_int_equal(kcm_deployment_scaled(&n, 10, true), 7);
  }
}

static void max_unavailable(void **state) {
  static const struct {
    int replicas;
    const char *surge, *unavail;
    bool recreate;
    int want;
  } cases[] = {
      {10, "1", "0", false, 0},   {10, "0", "1", false, 1},    {10, "0", "0", false, 1},
      {10, "0", "\"25%\"", false, 2}, {10, "0", "\"120%\"", false, 10}, /* capped at replicas */
      {0, "0", "1", false, 0},    {10, "1", "1", true, 0},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct dspec s = dspec(cases[i].replicas);
    struct kcm_deployment *d;
    s.surge = cases[i].surge;
    s.unavailable = cases[i].unavail;
    s.recreate = cases[i].recreate;
    d = make_d(&s);
    assert_int_equal(kcm_deployment_max_unavailable(d), cases[i].want);
    kcm_api_unref(&d->o, &pool);
  }
}

static void hash_names(void **state) {
  const char *t = "{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{}}";
  char a[16], b[16], c[16], d[16], again[16];
  size_t i;
  kcm_deployment_hash(t, -1, a, sizeof(a));
  kcm_deployment_hash(t, 0, b, sizeof(b));
  kcm_deployment_hash(t, 1, c, sizeof(c));
  kcm_deployment_hash("{\"metadata\":{}}", -1, d, sizeof(d));
  kcm_deployment_hash(t, -1, again, sizeof(again));
  assert_string_equal(a, again); /* stable across runs: names depend only on the input */
  assert_string_not_equal(a, b); /* a collision count of 0 still changes the hash */
  assert_string_not_equal(b, c);
  assert_string_not_equal(a, d);
  for (i = 0; a[i]; i++)
    assert_non_null(strchr("bcdfghjklmnpqrstvwxz2456789", a[i]));
  assert_true(strlen(a) >= 1 && strlen(a) <= 10);
  /* FNV-32a of the text, its decimal digits mapped to letters: pinned so a
   * change of names across versions is noticed. */
  kcm_deployment_hash("", -1, a, sizeof(a));
  assert_string_equal(a, "65bb57b6b5"); /* 2166136261 */
}

static void parse_ints(void **state) {
  int64_t v;
  assert_true(kcm_deployment_parse_int("3546343826724305832", &v));
  assert_true(v == 3546343826724305832LL);
  assert_true(kcm_deployment_parse_int("+5", &v) && v == 5);
  assert_true(kcm_deployment_parse_int("-5", &v) && v == -5);
  assert_false(kcm_deployment_parse_int("", &v));
  assert_false(kcm_deployment_parse_int(" 5", &v));
  assert_false(kcm_deployment_parse_int("5 ", &v));
  assert_false(kcm_deployment_parse_int("1.5", &v));
  assert_false(kcm_deployment_parse_int("99999999999999999999", &v));
}

static void templates_ignore_the_hash(void **state) {
  const char *a = "{\"metadata\":{\"labels\":{\"app\":\"web\",\"pod-template-hash\":\"x\"}},"
                  "\"spec\":{\"c\":1}}";
  const char *b = "{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"c\":1}}";
  const char *c = "{\"metadata\":{\"labels\":{\"app\":\"web\"}},\"spec\":{\"c\":2}}";
  const char *only = "{\"metadata\":{\"labels\":{\"pod-template-hash\":\"x\"}},\"spec\":{}}";
  const char *none = "{\"metadata\":{},\"spec\":{}}";
  struct json_object *ja = json_tokener_parse(a), *jb = json_tokener_parse(b);
  struct json_object *jo = json_tokener_parse(only), *jn = json_tokener_parse(none);
  uint64_t ka, kb, ko, kn;

  assert_true(kcm_api_template_equal(a, b));
  assert_false(kcm_api_template_equal(b, c));
  assert_true(kcm_api_template_equal(only, none)); /* an empty label map is no labels */
  assert_int_equal(kcm_api_template_key(ja, &ka), 0);
  assert_int_equal(kcm_api_template_key(jb, &kb), 0);
  assert_int_equal(kcm_api_template_key(jo, &ko), 0);
  assert_int_equal(kcm_api_template_key(jn, &kn), 0);
  assert_true(ka == kb);
  assert_true(ko == kn);
  /* The parsed template is left as it was. */
  assert_true(kcm_api_template_equal(json_object_to_json_string(ja), a));
  assert_non_null(strstr(json_object_to_json_string(ja), "pod-template-hash"));
  json_object_put(ja);
  json_object_put(jb);
  json_object_put(jo);
  json_object_put(jn);
}

/* --- creating the first ReplicaSet ---------------------------------------------------------- */

static void creates_the_first_replica_set(void **state) {
  struct dspec s = dspec(3);
  struct run r = {0};
  const struct kcm_deployment_step *st;
  struct json_object *body;
  char hash[16], name[32], w[256];

  s.annotations = "{\"team\":\"a\",\"kubectl.kubernetes.io/last-applied-configuration\":\"{}\"}";
  r.d = make_d(&s);
  plan(&r);
  writes(&r, w, sizeof(w));
  assert_string_equal(w, "+new=3");
  kcm_deployment_hash(r.d->template, -1, hash, sizeof(hash));
  snprintf(name, sizeof(name), "web-%s", hash);
  st = find_step(&r, KCM_DEPLOYMENT_STEP_CREATE);
  assert_non_null(st);
  assert_string_equal(st->reason, "ScalingReplicaSet");
  snprintf(w, sizeof(w), "Scaled up replica set %s from 0 to 3", name);
  assert_string_equal(st->message, w);
  body = json_tokener_parse(r.plan.create_body);
  assert_non_null(body);
  {
    struct json_object *meta = json_object_object_get(body, "metadata");
    struct json_object *spec = json_object_object_get(body, "spec");
    struct json_object *ann = json_object_object_get(meta, "annotations");
    struct json_object *ref = json_object_array_get_idx(
        json_object_object_get(meta, "ownerReferences"), 0);
    struct json_object *tl = json_object_object_get(
        json_object_object_get(json_object_object_get(spec, "template"), "metadata"), "labels");
    struct json_object *ml =
        json_object_object_get(json_object_object_get(spec, "selector"), "matchLabels");
    assert_string_equal(json_object_get_string(json_object_object_get(meta, "name")), name);
    assert_string_equal(
        json_object_get_string(json_object_object_get(
            json_object_object_get(meta, "labels"), "pod-template-hash")),
        hash);
    assert_string_equal(json_object_get_string(json_object_object_get(tl, "pod-template-hash")),
                        hash);
    assert_string_equal(json_object_get_string(json_object_object_get(tl, "app")), "web");
    assert_string_equal(json_object_get_string(json_object_object_get(ml, "pod-template-hash")),
                        hash);
    assert_string_equal(json_object_get_string(json_object_object_get(ml, "app")), "web");
    assert_string_equal(json_object_get_string(json_object_object_get(ref, "uid")), D_UID);
    assert_string_equal(json_object_get_string(json_object_object_get(ref, "kind")),
                        "Deployment");
    assert_true(json_object_get_boolean(json_object_object_get(ref, "controller")));
    assert_true(json_object_get_boolean(json_object_object_get(ref, "blockOwnerDeletion")));
    assert_int_equal(json_object_get_int(json_object_object_get(spec, "replicas")), 3);
    assert_string_equal(json_object_get_string(json_object_object_get(
                            ann, "deployment.kubernetes.io/revision")),
                        "1");
    assert_string_equal(json_object_get_string(json_object_object_get(
                            ann, "deployment.kubernetes.io/desired-replicas")),
                        "3");
    assert_string_equal(json_object_get_string(json_object_object_get(
                            ann, "deployment.kubernetes.io/max-replicas")),
                        "4");
    assert_string_equal(json_object_get_string(json_object_object_get(ann, "team")), "a");
    assert_null(json_object_object_get(ann, "kubectl.kubernetes.io/last-applied-configuration"));
  }
  json_object_put(body);
  /* The Deployment: revision 1, NewReplicaSetCreated, written once at the end. */
  assert_string_equal(r.plan.revision, "1");
  assert_non_null(has_cond(&r, "Progressing"));
  assert_string_equal(cond(&r, "Progressing")->reason, "NewReplicaSetCreated");
  assert_string_equal(cond(&r, "Progressing")->status, "True");
  assert_string_equal(cond(&r, "Available")->reason, "MinimumReplicasUnavailable");
  assert_int_equal(r.plan.status.observed_generation, 1);
  assert_int_equal(r.plan.steps[r.plan.nsteps - 1].op, KCM_DEPLOYMENT_STEP_STATUS);
  done(&r);
}

/* A new ReplicaSet's name stays within 253 characters: the Deployment's
 * name is cut before the separator and the hash (#132560). */
static void long_names_are_cut(void **state) {
  char name[KCM_API_NAME_MAX + 1];
  struct dspec s = dspec(1);
  struct run r = {0};
  const char *rs;
  memset(name, 'a', KCM_API_NAME_MAX);
  name[KCM_API_NAME_MAX] = 0;
  s.name = name;
  r.d = make_d(&s);
  plan(&r);
  rs = r.plan.rs[r.plan.new_rs].name;
  assert_int_equal(strlen(rs), KCM_API_NAME_MAX);
  assert_true(strlen(strrchr(rs, '-') + 1) >= 8); /* the whole hash */
  assert_int_equal(strspn(rs, "a"), KCM_API_NAME_MAX - 1 - strlen(strrchr(rs, '-') + 1));
  done(&r);
  s.name = "web"; /* short: whole */
  r = (struct run){0};
  r.d = make_d(&s);
  plan(&r);
  assert_int_equal(strncmp(r.plan.rs[r.plan.new_rs].name, "web-", 4), 0);
  done(&r);
}

static void collision_count_renames(void **state) {
  struct dspec s = dspec(1);
  struct run a = {0}, b = {0};
  a.d = make_d(&s);
  s.status = "{\"collisionCount\":1}";
  b.d = make_d(&s);
  plan(&a);
  plan(&b);
  assert_string_not_equal(a.plan.rs[a.plan.new_rs].name, b.plan.rs[b.plan.new_rs].name);
  assert_int_equal(b.plan.status.collision_count, 1);
  done(&a);
  done(&b);
}

/* --- taking over, steady state -------------------------------------------------------------- */

/* A complete Deployment exactly as upstream leaves it, with more status
 * fields (a leading comma) for it and for its old and new ReplicaSets. */
static void steady_state(struct run *r, const char *more, const char *old_more,
                         const char *new_more) {
  struct dspec s = dspec(3);
  char status[1024], t[32];
  iso(NOW_S - 500, t, sizeof(t));
  snprintf(status, sizeof(status),
           "{\"observedGeneration\":4,\"replicas\":3,\"updatedReplicas\":3,\"readyReplicas\":3,"
           "\"availableReplicas\":3,\"conditions\":[{\"type\":\"Available\",\"status\":\"True\","
           "\"lastUpdateTime\":\"%s\",\"lastTransitionTime\":\"%s\",\"reason\":"
           "\"MinimumReplicasAvailable\",\"message\":\"Deployment has minimum availability.\"},"
           "{\"type\":\"Progressing\",\"status\":\"True\",\"lastUpdateTime\":\"%s\","
           "\"lastTransitionTime\":\"%s\",\"reason\":\"NewReplicaSetAvailable\",\"message\":"
           "\"ReplicaSet \\\"web-5d4b9c7f8\\\" has successfully progressed.\"}]%s}",
           t, t, t, t, more ? more : "");
  s.status = status;
  s.generation = 4;
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"2\",\"team\":\"a\"}";
  r->d = make_d(&s);
  /* Upstream's names (its own hash), an old ReplicaSet, and the new one. */
  r->rs[r->n++] = make_rs(&(struct rsspec){.name = "7c5ddbdf54", .age = 900, .image = "nginx:0",
                                         .revision = 1,
                                         .annotations = ",\"team\":\"a\","
                                                        "\"deployment.kubernetes.io/desired-"
                                                        "replicas\":\"3\","
                                                        "\"deployment.kubernetes.io/max-"
                                                        "replicas\":\"4\"",
                                         .status = old_more});
  r->rs[r->n++] = make_rs(&(struct rsspec){.name = "5d4b9c7f8", .age = 600, .replicas = 3,
                                         .revision = 2, .ready = 3, .available = 3,
                                         .annotations = ",\"team\":\"a\","
                                                        "\"deployment.kubernetes.io/desired-"
                                                        "replicas\":\"3\","
                                                        "\"deployment.kubernetes.io/max-"
                                                        "replicas\":\"4\"",
                                         .status = new_more});
}

static void steady_state_writes_nothing(void **state) {
  struct run r = {0};
  steady_state(&r, NULL, NULL, NULL);
  plan(&r);
  assert_int_equal(r.plan.nsteps, 0);
  assert_int_equal(r.plan.nadopt + r.plan.nrelease, 0);
  assert_int_equal(r.plan.new_rs, 1);
  assert_false(kcm_deployment_status_changed(r.d, &r.plan));
  assert_true(r.plan.requeue_after_ms < 0);
  done(&r);
}

/* status.terminatingReplicas (KEP-3973): the sum of its ReplicaSets',
 * where the server keeps the field; unset when a ReplicaSet its
 * controller has synced lacks it. */
static void terminating_replicas_sum(void **state) {
  const struct kcm_deployment_step *st;
  struct kcm_buf body = KCM_BUF_INIT(1u << 16);
  struct run r = {.terminating_kept = 1};

  steady_state(&r, NULL, ",\"terminatingReplicas\":1", ",\"terminatingReplicas\":2");
  plan(&r);
  assert_int_equal(r.plan.status.terminating, 3);
  assert_true(kcm_deployment_status_changed(r.d, &r.plan));
  assert_non_null(st = find_step(&r, KCM_DEPLOYMENT_STEP_STATUS));
  assert_int_equal(kcm_deployment_status_body(r.d, &r.plan, false, 40, &body), 0);
  assert_non_null(strstr(body.data, "\"terminatingReplicas\":3"));
  done(&r);

  /* Written already: nothing to do. */
  r = (struct run){.terminating_kept = 1};
  steady_state(&r, ",\"terminatingReplicas\":3", ",\"terminatingReplicas\":1",
               ",\"terminatingReplicas\":2");
  plan(&r);
  assert_int_equal(r.plan.nsteps, 0);
  done(&r);

  /* Complete, and fewer old pods left terminating: a count that may wait,
   * while the last one gone, or more terminating, may not. */
  {
    static const struct {
      const char *written, *old_rs;
      bool progress;
    } cases[] = {
        {",\"terminatingReplicas\":5", ",\"terminatingReplicas\":2", true},
        {",\"terminatingReplicas\":5", ",\"terminatingReplicas\":0", false},
        {",\"terminatingReplicas\":1", ",\"terminatingReplicas\":2", false},
    };
    size_t i;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
      r = (struct run){.terminating_kept = 1};
      steady_state(&r, cases[i].written, cases[i].old_rs, ",\"terminatingReplicas\":0");
      plan(&r);
      assert_true(kcm_deployment_status_changed(r.d, &r.plan));
      if (kcm_deployment_status_progress(r.d, &r.plan) != cases[i].progress)
        fail_msg("case %zu: progress-only should be %d", i, cases[i].progress);
      kcm_deployment_plan_release(&r.plan);
      r.status_wait_ms = 700;
      plan(&r);
      assert_int_equal(r.plan.paced_ms, cases[i].progress ? 700 : 0);
      assert_int_equal(has_step(&r, KCM_DEPLOYMENT_STEP_STATUS) == NULL, cases[i].progress);
      done(&r);
    }
  }

  /* A synced ReplicaSet without it: the sum is unset, and null removes it. */
  r = (struct run){.terminating_kept = 1};
  steady_state(&r, ",\"terminatingReplicas\":3", NULL, ",\"terminatingReplicas\":2");
  plan(&r);
  assert_int_equal(r.plan.status.terminating, -1);
  assert_non_null(find_step(&r, KCM_DEPLOYMENT_STEP_STATUS));
  kcm_buf_reset(&body);
  assert_int_equal(kcm_deployment_status_body(r.d, &r.plan, false, 40, &body), 0);
  assert_non_null(strstr(body.data, "\"terminatingReplicas\":null"));
  done(&r);

  /* Where the server drops the field it is neither compared nor written. */
  r = (struct run){.terminating_kept = 0};
  steady_state(&r, ",\"terminatingReplicas\":7", ",\"terminatingReplicas\":1",
               ",\"terminatingReplicas\":2");
  plan(&r);
  assert_int_equal(r.plan.nsteps, 0);
  assert_int_equal(r.plan.status.terminating, KCM_DEPLOYMENT_UNWRITTEN);
  done(&r);
  kcm_buf_release(&body);
}

static void empty_selector_selects_all(void **state) {
  struct dspec s = dspec(1);
  struct run r = {0};
  s.selector = "{}";
  s.generation = 3;
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "a", .owner = ""});
  plan(&r);
  assert_int_equal(r.plan.nsteps, 2);
  assert_int_equal(r.plan.steps[0].op, KCM_DEPLOYMENT_STEP_EVENT);
  assert_true(r.plan.steps[0].warning);
  assert_string_equal(r.plan.steps[0].reason, "SelectingAll");
  assert_string_equal(r.plan.steps[0].message,
                      "This deployment is selecting all pods. A non-empty selector is required.");
  assert_int_equal(r.plan.steps[1].op, KCM_DEPLOYMENT_STEP_STATUS);
  assert_true(r.plan.steps[1].lenient);
  assert_int_equal(r.plan.status.observed_generation, 3);
  assert_int_equal(r.plan.nadopt, 0);
  done(&r);
}

/* --- claiming ----------------------------------------------------------------------------- */

static void claims_replica_sets(void **state) {
  struct dspec s = dspec(1);
  struct run r = {0};
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "own", .replicas = 1, .revision = 1});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "orphan", .owner = "", .image = "nginx:0"});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "other", .owner = OTHER_UID});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "relabelled", .labels = "{\"app\":\"db\"}"});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "orphan-db", .owner = "",
                                         .labels = "{\"app\":\"db\"}"});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "orphan-gone", .owner = "", .deleting = true});
  plan(&r);
  assert_int_equal(r.plan.nadopt, 1);
  assert_string_equal(r.plan.adopt[0]->o.name, "web-orphan");
  assert_int_equal(r.plan.nrelease, 1);
  assert_string_equal(r.plan.release[0]->o.name, "web-relabelled");
  assert_int_equal(r.plan.nrs, 2); /* own and the adopted one */
  /* The Deployment read again first; both claims at once; the rest after,
   * one wave each. */
  assert_true(r.plan.nsteps > 3);
  assert_int_equal(r.plan.steps[0].op, KCM_DEPLOYMENT_STEP_RECHECK);
  assert_int_equal(r.plan.steps[1].op, KCM_DEPLOYMENT_STEP_ADOPT);
  assert_int_equal(r.plan.steps[1].rs, 0);
  assert_int_equal(r.plan.steps[2].op, KCM_DEPLOYMENT_STEP_RELEASE);
  assert_int_equal(r.plan.steps[2].rs, 0);
  assert_true(r.plan.steps[1].at.wave > r.plan.steps[0].at.wave);
  assert_int_equal(r.plan.steps[2].at.wave, r.plan.steps[1].at.wave);
  for (size_t i = 3; i < r.plan.nsteps; i++) {
    assert_true(r.plan.steps[i].op > KCM_DEPLOYMENT_STEP_RELEASE);
    assert_true(r.plan.steps[i].at.wave > r.plan.steps[i - 1].at.wave);
    assert_true(r.plan.steps[i].at.group > r.plan.steps[2].at.group);
  }
  done(&r);

  /* Being deleted: no adoption, no release, only the status. */
  s.deleting = true;
  memset(&r, 0, sizeof(r));
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "orphan", .owner = ""});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "relabelled", .labels = "{\"app\":\"db\"}"});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "own", .replicas = 5, .revision = 1});
  plan(&r);
  assert_int_equal(r.plan.nadopt + r.plan.nrelease, 0);
  assert_null(has_step(&r, KCM_DEPLOYMENT_STEP_CREATE));
  assert_int_equal(r.plan.nsteps, 1);
  assert_int_equal(r.plan.steps[0].op, KCM_DEPLOYMENT_STEP_STATUS);
  done(&r);
}

/* --- rolling updates ---------------------------------------------------------------------- */

struct roll_case {
  const char *what;
  int replicas;
  const char *surge, *unavail;
  struct rsspec old, new_;
  const char *want;
};

static void rolling_update(void **state) {
  static const struct roll_case cases[] = {
      /* reconcileNewReplicaSet */
      {"new scales up within surge", 10, "2", "0",
       {.name = "o", .age = 900, .replicas = 10, .available = 10, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 0, .revision = 2}, "n=2"},
      {"new never above the surge", 10, "2", "0",
       {.name = "o", .age = 900, .replicas = 10, .available = 10, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 2, .available = 2, .revision = 2}, "o=8"},
      {"new above replicas scales down", 10, "2", "0",
       {.name = "o", .age = 900, .replicas = 0, .image = "nginx:0", .revision = 1},
       {.name = "n", .age = 10, .replicas = 12, .available = 12, .revision = 2}, "n=10"},
      /* reconcileOldReplicaSets */
      {"unavailable new pods block scale-down", 10, "2", "0",
       {.name = "o", .age = 900, .replicas = 10, .available = 10, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 2, .available = 0, .revision = 2}, ""},
      {"unhealthy old replicas go first", 10, "0", "2",
       {.name = "o", .age = 900, .replicas = 10, .available = 8, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 0, .revision = 2}, "o=8"},
      {"old scale down by the available surplus", 10, "3", "2",
       {.name = "o", .age = 900, .replicas = 10, .available = 10, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 3, .available = 3, .revision = 2}, "o=5"},
      /* more of upstream's rolling_test.go, through a whole sync */
      {"no surge: nothing new until an old one goes", 10, "0", "0",
       {.name = "o", .age = 900, .replicas = 10, .available = 10, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 0, .revision = 2}, "o=9"},
      {"new fills up to replicas plus surge", 10, "2", "0",
       {.name = "o", .age = 900, .replicas = 5, .available = 5, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 0, .revision = 2}, "n=7"},
      {"no surge: old scale down by maxUnavailable", 10, "0", "2",
       {.name = "o", .age = 900, .replicas = 10, .available = 10, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 0, .revision = 2}, "o=8"},
      {"one unhealthy old replica cleaned up, one ready scaled down", 10, "0", "2",
       {.name = "o", .age = 900, .replicas = 10, .available = 9, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 0, .revision = 2}, "o=9,o=8"},
      {"new unavailable pods hold the old ones", 10, "0", "2",
       {.name = "o", .age = 900, .replicas = 8, .available = 8, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 2, .available = 0, .revision = 2}, ""},
      {"mostly unhealthy old: only the cleanup allowance goes", 10, "0", "2",
       {.name = "o", .age = 900, .replicas = 10, .available = 1, .image = "nginx:0",
        .revision = 1},
       {.name = "n", .age = 10, .replicas = 0, .revision = 2}, "o=8"},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct dspec s = dspec(cases[i].replicas);
    struct run r = {0};
    char w[256];
    s.surge = cases[i].surge;
    s.unavailable = cases[i].unavail;
    s.annotations = "{\"deployment.kubernetes.io/revision\":\"2\"}";
    r.d = make_d(&s);
    r.rs[r.n++] = make_rs(&cases[i].old);
    r.rs[r.n++] = make_rs(&cases[i].new_);
    plan(&r);
    writes(&r, w, sizeof(w));
    if (strcmp(w, cases[i].want))
      fail_msg("%s: wrote \"%s\", want \"%s\"", cases[i].what, w, cases[i].want);
    done(&r);
  }
}

/* upstream's worked example: 10 replicas, maxUnavailable 2, maxSurge 3 */
static void cleanup_unhealthy_then_scale_down(void **state) {
  struct dspec s = dspec(10);
  struct run r = {0};
  char w[256];
  s.surge = "3";
  s.unavailable = "2";
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"3\"}";
  r.d = make_d(&s);
  /* The good old one, a crash-looping one, and the new one. */
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "good", .age = 900, .replicas = 8,
                                         .available = 8, .image = "nginx:0", .revision = 1});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "crash", .age = 500, .replicas = 5,
                                         .available = 0, .image = "nginx:bad", .revision = 2});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .age = 10, .replicas = 0, .revision = 3});
  plan(&r);
  writes(&r, w, sizeof(w));
  /* The new one cannot grow (13 pods); the 5 unhealthy ones go, oldest
   * first, all of them lenient. */
  assert_string_equal(w, "crash=0");
  assert_true(find_step(&r, KCM_DEPLOYMENT_STEP_SCALE)->lenient);
  done(&r);
}

/* --- proportional scaling ------------------------------------------------------------------- */

struct scale_case {
  const char *what;
  int old_replicas, new_replicas;
  const char *surge, *unavail;
  struct rsspec a, b;
  const char *want;
};

static void proportional_scaling(void **state) {
  static const struct scale_case cases[] = {
      {"upstream e2e: 10 -> 30 with 8 and 5", 10, 30, "3", "2",
       {.name = "old", .age = 900, .replicas = 8, .available = 8, .image = "nginx:0",
        .revision = 1,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"13\""},
       {.name = "new", .age = 10, .replicas = 5, .revision = 2,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"13\""},
       "old=20,new=13"},
      {"scale down 10 -> 5", 10, 5, "3", "2",
       {.name = "old", .age = 900, .replicas = 8, .available = 8, .image = "nginx:0",
        .revision = 1,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"13\""},
       {.name = "new", .age = 10, .replicas = 5, .revision = 2,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"13\""},
       /* allowed 5+3=8 of 13: old 8*8/13=4.9 -> 5, new 5*8/13=3.1 -> 3 */
       "old=5,new=3"},
      {"leftovers go to the largest", 5, 7, "0", "1",
       {.name = "old", .age = 900, .replicas = 3, .image = "nginx:0", .revision = 1,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"5\","
                       "\"deployment.kubernetes.io/max-replicas\":\"5\""},
       {.name = "new", .age = 10, .replicas = 2, .revision = 2,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"5\","
                       "\"deployment.kubernetes.io/max-replicas\":\"5\""},
       /* 3*7/5=4.2 -> +1, 2*7/5=2.8 -> +1, leftover 0... to_add 2: old 4, new 3 */
       "old=4,new=3"},
      {"equal sizes: newer first when growing", 4, 5, "0", "1",
       {.name = "old", .age = 900, .replicas = 2, .image = "nginx:0", .revision = 1,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"4\","
                       "\"deployment.kubernetes.io/max-replicas\":\"4\""},
       {.name = "new", .age = 10, .replicas = 2, .revision = 2,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"4\","
                       "\"deployment.kubernetes.io/max-replicas\":\"4\""},
       /* 2*5/4=2.5 rounds to 3 for the first (the newer): +1, then nothing left */
       "new=3,old=2"},
      {"a max-replicas of 0 stands for status.replicas (13)", 10, 30, "3", "2",
       {.name = "old", .age = 900, .replicas = 8, .available = 8, .image = "nginx:0",
        .revision = 1,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"0\""},
       {.name = "new", .age = 10, .replicas = 5, .revision = 2,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"0\""},
       "old=20,new=13"},
      {"a max-replicas of negative stands for status.replicas (13)", 10, 30, "3", "2",
       {.name = "old", .age = 900, .replicas = 8, .available = 8, .image = "nginx:0",
        .revision = 1,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"-13\""},
       {.name = "new", .age = 10, .replicas = 5, .revision = 2,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"-13\""},
       "old=20,new=13"},
      {"a max-replicas of past int32 stands for status.replicas (13)", 10, 30, "3", "2",
       {.name = "old", .age = 900, .replicas = 8, .available = 8, .image = "nginx:0",
        .revision = 1,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"4294967299\""},
       {.name = "new", .age = 10, .replicas = 5, .revision = 2,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"4294967299\""},
       "old=20,new=13"},
      {"to zero", 10, 0, "3", "2",
       {.name = "old", .age = 900, .replicas = 8, .image = "nginx:0", .revision = 1,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"13\""},
       {.name = "new", .age = 10, .replicas = 5, .revision = 2,
        .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                       "\"deployment.kubernetes.io/max-replicas\":\"13\""},
       "old=0,new=0"},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct dspec s = dspec(cases[i].new_replicas);
    struct run r = {0};
    char w[256], status[128];
    size_t k;
    s.surge = cases[i].surge;
    s.unavailable = cases[i].unavail;
    s.generation = 2;
    s.annotations = "{\"deployment.kubernetes.io/revision\":\"2\"}";
    snprintf(status, sizeof(status), "{\"replicas\":%d}",
             cases[i].a.replicas + cases[i].b.replicas);
    s.status = status;
    r.d = make_d(&s);
    r.rs[r.n++] = make_rs(&cases[i].a);
    r.rs[r.n++] = make_rs(&cases[i].b);
    plan(&r);
    writes(&r, w, sizeof(w));
    if (strcmp(w, cases[i].want))
      fail_msg("%s: wrote \"%s\", want \"%s\"", cases[i].what, w, cases[i].want);
    /* Every scaled ReplicaSet carries the new desired and max annotations. */
    for (k = 0; k < r.plan.nsteps; k++) {
      char desired[16];
      snprintf(desired, sizeof(desired), "%d", cases[i].new_replicas);
      if (r.plan.steps[k].op != KCM_DEPLOYMENT_STEP_SCALE)
        continue;
      assert_string_equal(kcm_api_pairs_get(&r.plan.steps[k].annotations,
                                            KCM_DEPLOYMENT_DESIRED),
                          desired);
    }
    done(&r);
  }
}

/* Upstream's TestScale table (sync_test.go), run through a whole sync: the
 * Deployment went from `from` to `to` replicas (and surge_from to surge_to;
 * maxUnavailable 0) over ReplicaSets listed newest first. */
struct table_rs {
  const char *name;
  int replicas;
  bool is_new;   /* its template is the Deployment's */
  int desired;   /* desired-replicas annotation; 0: from */
  int available; /* -1: replicas */
};

struct table_case {
  const char *what;
  int from, to, surge_from, surge_to;
  struct table_rs rs[3];
  const char *want; /* every ReplicaSet's replicas afterwards, in listed order */
};

static void upstream_scale_table(void **state) {
  static const struct table_case cases[] = {
      {"normal scaling event: 10 -> 12", 10, 12, 0, 0, {{"v1", 10, true, 0, -1}}, "v1=12"},
      {"normal scaling event: 10 -> 5", 10, 5, 0, 0, {{"v1", 10, true, 0, -1}}, "v1=5"},
      {"proportional scaling: 5 -> 10", 5, 10, 0, 0,
       {{"v2", 2, true, 0, -1}, {"v1", 3, false, 0, -1}}, "v2=4,v1=6"},
      {"proportional scaling: 5 -> 3", 5, 3, 0, 0,
       {{"v2", 2, true, 0, -1}, {"v1", 3, false, 0, -1}}, "v2=1,v1=2"},
      {"proportional scaling: 9 -> 4", 9, 4, 0, 0,
       {{"v2", 8, true, 0, -1}, {"v1", 1, false, 0, -1}}, "v2=4,v1=0"},
      {"proportional scaling: 7 -> 10", 7, 10, 0, 0,
       {{"v3", 2, true, 0, -1}, {"v2", 3, false, 0, -1}, {"v1", 2, false, 0, -1}},
       "v3=3,v2=4,v1=3"},
      {"proportional scaling: 13 -> 8", 13, 8, 0, 0,
       {{"v3", 2, true, 0, -1}, {"v2", 8, false, 0, -1}, {"v1", 3, false, 0, -1}},
       "v3=1,v2=5,v1=2"},
      {"leftover distribution: 3 -> 4", 3, 4, 0, 0,
       {{"v3", 1, true, 0, -1}, {"v2", 1, false, 0, -1}, {"v1", 1, false, 0, -1}},
       "v3=2,v2=1,v1=1"},
      {"leftover distribution: 3 -> 2", 3, 2, 0, 0,
       {{"v3", 1, true, 0, -1}, {"v2", 1, false, 0, -1}, {"v1", 1, false, 0, -1}},
       "v3=1,v2=1,v1=0"},
      {"proportional scaling (no new rs): 4 -> 5", 4, 5, 0, 0,
       {{"v2", 2, false, 0, -1}, {"v1", 2, false, 0, -1}}, "v2=3,v1=2"},
      {"proportional scaling: 6 -> 0", 6, 0, 0, 0,
       {{"v3", 3, true, 0, -1}, {"v2", 2, false, 0, -1}, {"v1", 1, false, 0, -1}},
       "v3=0,v2=0,v1=0"},
      {"proportional scaling: 0 -> 6", 6, 6, 0, 0,
       {{"v3", 0, true, 0, -1}, {"v2", 0, false, 0, -1}, {"v1", 0, false, 0, -1}},
       "v3=6,v2=0,v1=0"},
      {"one ReplicaSet's desired annotation lags", 5, 5, 0, 0,
       {{"v3", 2, true, 0, -1}, {"v2", 1, false, 3, -1}, {"v1", 1, false, 0, -1}},
       "v3=2,v2=2,v1=1"},
      {"deployment with surge pods", 10, 20, 2, 2,
       {{"v2", 6, true, 0, -1}, {"v1", 6, false, 0, -1}}, "v2=11,v1=11"},
      {"change both surge and size", 10, 50, 3, 6,
       {{"v2", 5, true, 0, -1}, {"v1", 8, false, 0, -1}}, "v2=22,v1=34"},
      {"change both size and template", 10, 14, 0, 0,
       {{"v2", 7, false, 0, -1}, {"v1", 3, false, 0, -1}}, "v2=10,v1=4"},
      {"saturated but broken new replica set does not affect old pods", 2, 2, 1, 1,
       {{"v2", 2, true, 0, 0}, {"v1", 1, false, 0, -1}}, "v2=2,v1=1"},
  };
  static const char *images[] = {"nginx:0a", "nginx:0b", "nginx:0c"};
  size_t i, k, j;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const struct table_case *c = &cases[i];
    struct dspec s = dspec(c->to);
    struct run r = {0};
    char surge[16], ann[3][160], got[128] = "";
    int size[3] = {0, 0, 0};
    size_t o = 0;
    snprintf(surge, sizeof(surge), "%d", c->surge_to);
    s.surge = surge;
    s.unavailable = "0";
    s.generation = 2;
    s.annotations = "{\"deployment.kubernetes.io/revision\":\"3\"}";
    r.d = make_d(&s);
    for (k = 0; k < 3 && c->rs[k].name; k++) {
      const struct table_rs *t = &c->rs[k];
      int desired = t->desired ? t->desired : c->from;
      snprintf(ann[k], sizeof(ann[k]),
               ",\"deployment.kubernetes.io/desired-replicas\":\"%d\","
               "\"deployment.kubernetes.io/max-replicas\":\"%d\"",
               desired, desired + c->surge_from);
      r.rs[r.n++] = make_rs(&(struct rsspec){
          .name = t->name, .age = 100 * (int64_t)(k + 1), .replicas = t->replicas,
          .image = t->is_new ? NULL : images[k], .revision = 3 - (int)k,
          .annotations = ann[k], .ready = t->available < 0 ? t->replicas : t->available,
          .available = t->available < 0 ? t->replicas : t->available});
      size[k] = t->replicas;
    }
    plan(&r);
    for (j = 0; j < r.plan.nsteps; j++) {
      const struct kcm_deployment_step *st = &r.plan.steps[j];
      if (st->op == KCM_DEPLOYMENT_STEP_CREATE || st->op == KCM_DEPLOYMENT_STEP_DELETE)
        fail_msg("%s: a ReplicaSet was created or deleted", c->what);
      if (st->op != KCM_DEPLOYMENT_STEP_SCALE)
        continue;
      for (k = 0; k < r.n; k++)
        if (!strcmp(r.plan.rs[st->rs].name + 4, c->rs[k].name))
          size[k] = st->replicas;
    }
    for (k = 0; k < r.n; k++)
      o += (size_t)snprintf(got + o, sizeof(got) - o, "%s%s=%d", k ? "," : "", c->rs[k].name,
                            size[k]);
    if (strcmp(got, c->want))
      fail_msg("%s: got \"%s\", want \"%s\"", c->what, got, c->want);
    done(&r);
  }
}

static void scaling_events_name_their_direction(void **state) {
  struct dspec s = dspec(5);
  struct run r = {0};
  const struct kcm_deployment_step *st;
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"1\"}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){
      .name = "n", .replicas = 3, .available = 3, .revision = 1,
      .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"3\","
                     "\"deployment.kubernetes.io/max-replicas\":\"4\""});
  plan(&r);
  st = find_step(&r, KCM_DEPLOYMENT_STEP_SCALE);
  assert_non_null(st);
  assert_string_equal(st->message, "Scaled up replica set web-n from 3 to 5");
  assert_string_equal(kcm_api_pairs_get(&st->annotations, KCM_DEPLOYMENT_MAX), "7");
  done(&r);
}

/* --- paused, recreate, rollback ----------------------------------------------------------- */

static void paused_only_scales(void **state) {
  struct dspec s = dspec(4);
  struct run r = {0};
  char w[256];
  s.paused = true;
  s.image = "nginx:2"; /* the template changed while paused */
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"1\"}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){
      .name = "n", .replicas = 2, .available = 2, .revision = 1,
      .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"2\","
                     "\"deployment.kubernetes.io/max-replicas\":\"3\""});
  plan(&r);
  writes(&r, w, sizeof(w));
  assert_string_equal(w, "n=4");
  assert_null(has_step(&r, KCM_DEPLOYMENT_STEP_CREATE));
  assert_string_equal(cond(&r, "Progressing")->reason, "DeploymentPaused");
  assert_string_equal(cond(&r, "Progressing")->status, "Unknown");
  done(&r);
}

static void recreate_waits_for_old_pods(void **state) {
  struct dspec s = dspec(3);
  struct run r = {0};
  char w[256];
  s.recreate = true;
  s.image = "nginx:2";
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"1\"}";
  /* Old ones still scaled: scale them down, nothing created. */
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "o", .replicas = 3, .available = 3,
                                         .revision = 1});
  plan(&r);
  writes(&r, w, sizeof(w));
  assert_string_equal(w, "o=0");
  done(&r);
  /* Scaled down but pods still there: wait. */
  memset(&r, 0, sizeof(r));
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "o", .replicas = 0, .status_replicas = 0,
                                         .revision = 1});
  r.running = true;
  plan(&r);
  writes(&r, w, sizeof(w));
  assert_string_equal(w, "");
  done(&r);
  /* Gone: the new one is created at full size. */
  memset(&r, 0, sizeof(r));
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "o", .replicas = 0, .revision = 1});
  plan(&r);
  writes(&r, w, sizeof(w));
  assert_string_equal(w, "+new=3");
  assert_string_equal(r.plan.revision, "2");
  done(&r);
}

static void history_limit_deletes_oldest(void **state) {
  struct dspec s = dspec(1);
  struct run r = {0};
  char w[256], status[512];
  snprintf(status, sizeof(status),
           "{\"observedGeneration\":1,\"replicas\":1,\"updatedReplicas\":1,"
           "\"availableReplicas\":1,\"readyReplicas\":1}");
  s.history = 1;
  s.status = status;
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"5\"}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "r1", .age = 900, .image = "a", .revision = 1});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "r3", .age = 800, .image = "c", .revision = 3});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "r2", .age = 700, .image = "b", .revision = 2});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "busy", .age = 650, .image = "e", .revision = 0,
                                         .replicas = 0, .status_replicas = 1});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "r4", .age = 600, .image = "d", .revision = 4,
                                         .generation = 3, .observed = 2});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .age = 10, .replicas = 1, .available = 1,
                                         .ready = 1, .revision = 5});
  plan(&r);
  writes(&r, w, sizeof(w));
  /* 5 old, keep 1: the 4 lowest revisions are candidates (busy has
   * revision 0); busy still has a pod and r4 is not observed. */
  assert_string_equal(w, "-r1,-r2,-r3");
  done(&r);
}

/* Upstream's cleanupDeployment table: old ReplicaSets (spec/status
 * replicas, deleting) against revisionHistoryLimit. */
static void cleanup_table(void **state) {
  static const struct {
    int limit;
    struct {
      const char *name;
      int spec, status;
      bool deleting;
    } old[4];
    const char *want;
  } cases[] = {
      {1, {{"r1", 0, 0, false}, {"r2", 0, 0, false}, {"r3", 0, 0, false}}, "-r1,-r2"},
      {0,
       {{"r1", 0, 0, false}, {"r2", 0, 1, false}, {"r3", 1, 0, false}, {"r4", 1, 1, false}},
       "-r1"},
      {0, {{"r1", 0, 0, false}, {"r2", 0, 0, false}}, "-r1,-r2"},
      {0, {{"r1", 1, 1, false}, {"r2", 1, 1, false}}, ""},
      {0, {{"r1", 0, 0, true}}, ""},
      {-1, {{"r1", 0, 0, false}, {"r2", 0, 0, false}, {"r3", 0, 0, false}}, ""},
  };
  static const char *images[] = {"nginx:0a", "nginx:0b", "nginx:0c", "nginx:0d"};
  size_t i, k;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct dspec s = dspec(1);
    struct run r = {0};
    char w[256], ann[160];
    /* Paused, and sized to what exists, so the sync only cleans up. */
    for (k = 0; k < 4 && cases[i].old[k].name; k++)
      s.replicas += cases[i].old[k].spec;
    s.paused = true;
    s.history = cases[i].limit; /* -1: unset, unlimited in apps/v1 */
    s.surge = "0";
    s.unavailable = "1";
    s.annotations = "{\"deployment.kubernetes.io/revision\":\"9\"}";
    snprintf(ann, sizeof(ann),
             ",\"deployment.kubernetes.io/desired-replicas\":\"%d\","
             "\"deployment.kubernetes.io/max-replicas\":\"%d\"",
             s.replicas, s.replicas);
    r.d = make_d(&s);
    for (k = 0; k < 4 && cases[i].old[k].name; k++)
      r.rs[r.n++] = make_rs(&(struct rsspec){
          .name = cases[i].old[k].name, .age = 900 - 10 * (int64_t)k, .image = images[k],
          .revision = (int)k + 1, .replicas = cases[i].old[k].spec, .annotations = ann,
          .status_replicas = cases[i].old[k].status, .available = cases[i].old[k].status,
          .ready = cases[i].old[k].status, .deleting = cases[i].old[k].deleting});
    r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .age = 10, .replicas = 1,
                                           .available = 1, .ready = 1, .revision = 9,
                                           .annotations = ann});
    plan(&r);
    writes(&r, w, sizeof(w));
    if (strcmp(w, cases[i].want))
      fail_msg("case %zu: wrote \"%s\", want \"%s\"", i, w, cases[i].want);
    done(&r);
  }
}

static void undo_reuses_the_old_replica_set(void **state) {
  struct dspec s = dspec(2);
  struct run r = {0};
  const struct kcm_deployment_rs *v;
  char w[256];
  s.image = "nginx:0"; /* back to revision 1's template */
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"2\"}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "one", .age = 900, .image = "nginx:0",
                                         .revision = 1});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "two", .age = 500, .replicas = 2,
                                         .available = 2, .revision = 2});
  plan(&r);
  writes(&r, w, sizeof(w));
  /* First its annotations (revision 3, history 1), in one write. */
  assert_int_equal(r.plan.steps[0].op, KCM_DEPLOYMENT_STEP_SCALE);
  v = &r.plan.rs[r.plan.new_rs];
  assert_string_equal(v->name, "web-one");
  assert_string_equal(kcm_api_pairs_get(&v->annotations, KCM_DEPLOYMENT_REVISION), "3");
  assert_string_equal(kcm_api_pairs_get(&v->annotations, KCM_DEPLOYMENT_REVISION_HISTORY), "1");
  assert_null(has_step(&r, KCM_DEPLOYMENT_STEP_CREATE));
  done(&r);
}

static void revision_history_is_capped(void **state) {
  struct dspec s = dspec(1);
  struct run r = {0};
  char hist[2100], ann[2300];
  const char *got;
  size_t i;
  /* 2000 characters of history: "1000,1001,..." */
  hist[0] = '\0';
  for (i = 0; strlen(hist) + 5 <= 2000; i++)
    snprintf(hist + strlen(hist), sizeof(hist) - strlen(hist), "%s%zu", i ? "," : "", 1000 + i);
  snprintf(ann, sizeof(ann), ",\"deployment.kubernetes.io/revision-history\":\"%s\"", hist);
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"9000\"}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "one", .age = 900, .revision = 5000,
                                         .annotations = ann});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "two", .age = 500, .image = "x",
                                         .revision = 8999});
  plan(&r);
  got = kcm_api_pairs_get(&r.plan.rs[r.plan.new_rs].annotations,
                          KCM_DEPLOYMENT_REVISION_HISTORY);
  assert_non_null(got);
  assert_true(strlen(got) <= KCM_DEPLOYMENT_HISTORY_CHARS);
  assert_string_equal(got + strlen(got) - 5, ",5000"); /* appended */
  assert_true(strncmp(got, "1000,", 5) != 0);           /* the oldest dropped */
  assert_string_equal(kcm_api_pairs_get(&r.plan.rs[r.plan.new_rs].annotations,
                                        KCM_DEPLOYMENT_REVISION),
                      "9000");
  done(&r);
}

static void legacy_rollback(void **state) {
  struct dspec s = dspec(2);
  struct run r = {0};
  const struct kcm_deployment_step *st;
  struct kcm_buf b = KCM_BUF_INIT(1 << 20);
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"2\","
                  "\"deprecated.deployment.rollback.to\":\"0\",\"team\":\"new\"}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "one", .age = 900, .image = "nginx:0",
                                         .revision = 1, .annotations = ",\"team\":\"old\""});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "two", .age = 500, .replicas = 2,
                                         .available = 2, .revision = 2});
  plan(&r);
  st = &r.plan.steps[r.plan.nsteps - 1];
  assert_int_equal(st->op, KCM_DEPLOYMENT_STEP_ROLLBACK);
  assert_string_equal(st->reason, "DeploymentRollback");
  assert_string_equal(st->message, "Rolled back deployment \"web\" to revision 1");
  assert_int_equal(kcm_deployment_rollback_body(&r.plan, 77, &b), 0);
  assert_non_null(strstr(b.data, "{\"op\":\"test\",\"path\":\"/metadata/resourceVersion\","
                                 "\"value\":\"77\"}"));
  assert_non_null(strstr(b.data, "\"op\":\"replace\",\"path\":\"/spec/template\""));
  assert_non_null(strstr(b.data, "nginx:0"));
  assert_null(strstr(b.data, "pod-template-hash"));
  assert_non_null(strstr(b.data, "{\"op\":\"remove\",\"path\":"
                                 "\"/metadata/annotations/deprecated.deployment.rollback.to\"}"));
  assert_non_null(strstr(b.data, "{\"op\":\"add\",\"path\":\"/metadata/annotations/team\","
                                 "\"value\":\"old\"}"));
  kcm_buf_release(&b);
  done(&r);

  /* Nothing to roll back to: a warning, and the annotation goes. */
  s.annotations = "{\"deprecated.deployment.rollback.to\":\"7\",\"a/b~c\":\"x\"}";
  memset(&r, 0, sizeof(r));
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "two", .replicas = 2, .revision = 1});
  plan(&r);
  st = find_step(&r, KCM_DEPLOYMENT_STEP_EVENT);
  assert_non_null(st);
  assert_string_equal(st->reason, "DeploymentRollbackRevisionNotFound");
  assert_string_equal(st->message, "Unable to find the revision to rollback to.");
  assert_int_equal(r.plan.steps[r.plan.nsteps - 1].op, KCM_DEPLOYMENT_STEP_ROLLBACK);
  assert_null(strstr(r.plan.rollback_ops, "/spec/template"));
  assert_null(strstr(r.plan.rollback_ops, "a~1b~0c")); /* untouched */
  done(&r);
}

/* --- progress and status --------------------------------------------------------------------- */

static char *progressing_status(char *buf, size_t len, const char *reason, const char *status,
                                int64_t updated_ago, int updated_replicas, int available) {
  char t[32], old[32];
  bool ok = available == 3;
  iso(NOW_S - updated_ago, t, sizeof(t));
  iso(NOW_S - 1000, old, sizeof(old));
  snprintf(buf, len,
           "{\"observedGeneration\":1,\"replicas\":3,\"updatedReplicas\":%d,\"readyReplicas\":%d,"
           "\"availableReplicas\":%d,\"unavailableReplicas\":%d,\"conditions\":[{\"type\":"
           "\"Progressing\",\"status\":\"%s\",\"lastUpdateTime\":\"%s\",\"lastTransitionTime\":"
           "\"%s\",\"reason\":\"%s\",\"message\":\"%s\"},{\"type\":\"Custom\",\"status\":\"True\","
           "\"reason\":\"Mine\"},{\"type\":\"Available\",\"status\":\"%s\",\"lastUpdateTime\":"
           "\"%s\",\"lastTransitionTime\":\"%s\",\"reason\":\"%s\",\"message\":\"%s\"}]}",
           updated_replicas, available, available, 3 - available, status, t, t, reason,
           strcmp(reason, "ReplicaSetUpdated") ? "m" : "ReplicaSet \\\"web-n\\\" is progressing.",
           ok ? "True" : "False", old, old,
           ok ? "MinimumReplicasAvailable" : "MinimumReplicasUnavailable",
           ok ? "Deployment has minimum availability."
              : "Deployment does not have minimum availability.");
  return buf;
}

static void progress_conditions(void **state) {
  struct dspec s = dspec(3);
  struct run r = {0};
  char st[1024];
  const struct kcm_condition *c;
  s.deadline = 10;
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"1\"}";

  /* More pods available: progressing, the transition time kept. */
  s.status = progressing_status(st, sizeof(st), "ReplicaSetUpdated", "True", 5, 3, 1);
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .replicas = 3, .ready = 2,
                                         .available = 2, .revision = 1});
  plan(&r);
  c = cond(&r, "Progressing");
  assert_string_equal(c->reason, "ReplicaSetUpdated");
  assert_string_equal(c->message, "ReplicaSet \"web-n\" is progressing.");
  assert_true(c->last_update == NOW_S);
  assert_true(c->last_transition == NOW_S - 5);
  assert_non_null(has_cond(&r, "Custom")); /* foreign conditions stay */
  done(&r);

  /* No progress for longer than the deadline: timed out. */
  memset(&r, 0, sizeof(r));
  s.status = progressing_status(st, sizeof(st), "ReplicaSetUpdated", "True", 11, 3, 1);
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .replicas = 3, .ready = 1,
                                         .available = 1, .revision = 1});
  plan(&r);
  c = cond(&r, "Progressing");
  assert_string_equal(c->reason, "ProgressDeadlineExceeded");
  assert_string_equal(c->status, "False");
  assert_string_equal(c->message, "ReplicaSet \"web-n\" has timed out progressing.");
  done(&r);

  /* No progress yet, within the deadline: checked again when it passes. */
  memset(&r, 0, sizeof(r));
  s.status = progressing_status(st, sizeof(st), "ReplicaSetUpdated", "True", 4, 3, 1);
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .replicas = 3, .ready = 1,
                                         .available = 1, .revision = 1});
  plan(&r);
  assert_false(kcm_deployment_status_changed(r.d, &r.plan));
  /* 4.5 s have passed of 10: 5.5 s left, plus a second. */
  assert_int_equal(r.plan.requeue_after_ms, 6500);
  done(&r);

  /* Timed out, then progress again: back to ReplicaSetUpdated, a new transition. */
  memset(&r, 0, sizeof(r));
  s.status = progressing_status(st, sizeof(st), "ProgressDeadlineExceeded", "False", 30, 3, 1);
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .replicas = 3, .ready = 2,
                                         .available = 2, .revision = 1});
  plan(&r);
  c = cond(&r, "Progressing");
  assert_string_equal(c->reason, "ReplicaSetUpdated");
  assert_string_equal(c->status, "True");
  assert_true(c->last_transition == NOW_S);
  done(&r);

  /* Complete: NewReplicaSetAvailable; no requeue. */
  memset(&r, 0, sizeof(r));
  s.status = progressing_status(st, sizeof(st), "ReplicaSetUpdated", "True", 4, 3, 2);
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .replicas = 3, .ready = 3,
                                         .available = 3, .revision = 1});
  plan(&r);
  c = cond(&r, "Progressing");
  assert_string_equal(c->reason, "NewReplicaSetAvailable");
  assert_string_equal(c->message, "ReplicaSet \"web-n\" has successfully progressed.");
  assert_string_equal(cond(&r, "Available")->reason, "MinimumReplicasAvailable");
  assert_int_equal(r.plan.status.available, 3);
  assert_int_equal(r.plan.status.updated, 3);
  assert_int_equal(r.plan.status.unavailable, 0);
  done(&r);

  /* No deadline: no Progressing condition at all. */
  memset(&r, 0, sizeof(r));
  s.deadline = -1;
  s.status = progressing_status(st, sizeof(st), "ReplicaSetUpdated", "True", 4, 3, 2);
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .replicas = 3, .ready = 3,
                                         .available = 3, .revision = 1});
  plan(&r);
  assert_null(has_cond(&r, "Progressing"));
  assert_true(r.plan.requeue_after_ms < 0);
  done(&r);
}

/* Only counts moved, short of complete: a write that may wait, and does
 * within the status interval (left out of the plan, the key synced again
 * once the interval is over). Reaching complete, leaving it, or any other
 * change may not. */
static void progress_only_statuses(void **state) {
  static const struct {
    int updated, was_available, available;
    int64_t generation;
    const char *rs;
    bool progress;
  } cases[] = {
      {3, 1, 2, 1, "n", true},   /* one more available */
      {3, 2, 1, 1, "n", true},   /* one fewer, still rolling */
      {3, 2, 3, 1, "n", false},  /* complete now */
      {3, 3, 2, 1, "n", false},  /* complete before */
      {3, 1, 2, 2, "n", false},  /* a new generation observed */
      {3, 1, 2, 1, "m", false},  /* another new ReplicaSet: another message */
  };
  struct dspec s = dspec(3);
  char st[1024];
  size_t i, steps;
  s.deadline = 10;
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"1\"}";
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct run r = {0};
    s.generation = cases[i].generation;
    s.status = progressing_status(st, sizeof(st),
                                  cases[i].was_available == 3 ? "NewReplicaSetAvailable"
                                                              : "ReplicaSetUpdated",
                                  "True", 5, cases[i].updated, cases[i].was_available);
    r.d = make_d(&s);
    r.rs[r.n++] = make_rs(&(struct rsspec){.name = cases[i].rs, .replicas = 3,
                                           .ready = cases[i].available,
                                           .available = cases[i].available, .revision = 1});
    plan(&r);
    assert_true(kcm_deployment_status_changed(r.d, &r.plan));
    if (kcm_deployment_status_progress(r.d, &r.plan) != cases[i].progress)
      fail_msg("case %zu: progress-only should be %d", i, cases[i].progress);
    assert_int_equal(r.plan.paced_ms, 0);
    assert_int_equal(r.plan.steps[r.plan.nsteps - 1].op, KCM_DEPLOYMENT_STEP_STATUS);
    steps = r.plan.nsteps;
    kcm_deployment_plan_release(&r.plan);
    r.status_wait_ms = 700;
    plan(&r);
    assert_int_equal(r.plan.nsteps, cases[i].progress ? steps - 1 : steps);
    assert_int_equal(r.plan.paced_ms, cases[i].progress ? 700 : 0);
    done(&r);
  }
}

static void pause_and_resume_conditions(void **state) {
  struct dspec s = dspec(1);
  struct run r = {0};
  char st[1024];
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"1\"}";
  s.status = progressing_status(st, sizeof(st), "DeploymentPaused", "Unknown", 100, 1, 1);
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .replicas = 1, .revision = 1});
  plan(&r);
  /* Resumed: DeploymentResumed first; the rollout then reports progress
   * from now, not from when it was paused. */
  assert_non_null(has_cond(&r, "Progressing"));
  assert_true(cond(&r, "Progressing")->last_update == NOW_S);
  assert_string_not_equal(cond(&r, "Progressing")->reason, "ProgressDeadlineExceeded");
  done(&r);

  /* A timed-out Deployment keeps its condition when paused. */
  memset(&r, 0, sizeof(r));
  s.paused = true;
  s.status = progressing_status(st, sizeof(st), "ProgressDeadlineExceeded", "False", 100, 1, 0);
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .replicas = 1, .revision = 1});
  plan(&r);
  assert_string_equal(cond(&r, "Progressing")->reason, "ProgressDeadlineExceeded");
  done(&r);
}

static void replica_failure_surfaces(void **state) {
  struct dspec s = dspec(3);
  struct run r = {0};
  char t[32], conds[512];
  const struct kcm_condition *c;
  iso(NOW_S - 30, t, sizeof(t));
  snprintf(conds, sizeof(conds),
           "[{\"type\":\"ReplicaFailure\",\"status\":\"True\",\"lastTransitionTime\":\"%s\","
           "\"reason\":\"FailedCreate\",\"message\":\"quota\"}]",
           t);
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"1\"}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "n", .replicas = 3, .status_replicas = 2,
                                         .revision = 1, .conditions = conds});
  plan(&r);
  c = cond(&r, "ReplicaFailure");
  assert_non_null(c);
  assert_string_equal(c->reason, "FailedCreate");
  assert_string_equal(c->message, "quota");
  assert_true(c->last_update == NOW_S - 30);
  assert_true(c->last_transition == NOW_S - 30);
  done(&r);
}

/* --- aliases and bodies ----------------------------------------------------------------------- */

/* A ReplicaSet the API server changed on creation is still the new one. */
static void alias_finds_a_changed_template(void **state) {
  struct dspec s = dspec(1);
  struct run r = {0};
  struct kcm_deployment_alias a;
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"1\"}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "m", .replicas = 1, .available = 1,
                                         .ready = 1, .image = "nginx:1-mutated", .revision = 1});
  plan(&r);
  assert_non_null(has_step(&r, KCM_DEPLOYMENT_STEP_CREATE)); /* without the alias: a new one */
  kcm_deployment_plan_release(&r.plan);
  a.template_key = r.d->template_key;
  a.rs_template_key = r.rs[0]->template_key;
  a.rs_uid = r.rs[0]->o.uid;
  r.alias = &a;
  plan(&r);
  assert_null(has_step(&r, KCM_DEPLOYMENT_STEP_CREATE));
  assert_int_equal(r.plan.new_rs, 0);
  done(&r);
}

static void request_bodies(void **state) {
  struct dspec s = dspec(2);
  struct run r = {0};
  struct kcm_buf b = KCM_BUF_INIT(1 << 20);
  const struct kcm_deployment_step *create;
  r.d = make_d(&s);
  plan(&r);
  assert_int_equal(kcm_deployment_status_body(r.d, &r.plan, false, 41, &b), 0);
  assert_non_null(strstr(b.data, "\"resourceVersion\":\"41\""));
  assert_non_null(strstr(b.data, "\"annotations\":{\"deployment.kubernetes.io/revision\":\"1\"}"));
  assert_non_null(strstr(b.data, "\"observedGeneration\":1"));
  assert_null(strstr(b.data, "collisionCount")); /* unset stays unset */
  kcm_buf_reset(&b);
  create = find_step(&r, KCM_DEPLOYMENT_STEP_CREATE);
  assert_int_equal(kcm_deployment_create_failed_body(r.d, create, "Failed to create: quota",
                                                     NOW_MS, 41, &b),
                   0);
  assert_non_null(strstr(b.data, "\"reason\":\"ReplicaSetCreateError\""));
  assert_non_null(strstr(b.data, "\"status\":\"False\""));
  assert_non_null(strstr(b.data, "\"message\":\"Failed to create: quota\""));
  kcm_buf_reset(&b);
  assert_int_equal(kcm_deployment_collision_body(r.d, 41, &b), 0);
  assert_string_equal(b.data, "{\"metadata\":{\"resourceVersion\":\"41\"},\"status\":"
                              "{\"collisionCount\":1}}");
  kcm_buf_release(&b);
  done(&r);

  /* A scale writes only the annotations that change. */
  memset(&r, 0, sizeof(r));
  s = dspec(4);
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"1\"}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){
      .name = "n", .replicas = 2, .revision = 1,
      .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"2\","
                     "\"deployment.kubernetes.io/max-replicas\":\"3\""});
  plan(&r);
  assert_int_equal(
      kcm_deployment_scale_body(&r.plan, find_step(&r, KCM_DEPLOYMENT_STEP_SCALE), 8, &b), 0);
  assert_string_equal(b.data,
                      "{\"metadata\":{\"resourceVersion\":\"8\",\"annotations\":"
                      "{\"deployment.kubernetes.io/desired-replicas\":\"4\","
                      "\"deployment.kubernetes.io/max-replicas\":\"5\"}},"
                      "\"spec\":{\"replicas\":4}}");
  kcm_buf_release(&b);
  done(&r);
}

/* --- hostile sizes ---------------------------------------------------------------------- */

/* 50,000 annotations go from the Deployment to its ReplicaSets and back in
 * one walk of each map: comparisons grow as n log n, reallocations not at
 * all with n. */
enum { MANY = 50000 };
#define N_LOG_N (4u * 40u * MANY)
#define FEW_REALLOCS 64u

/* first (a JSON fragment, may be empty) then MANY members "<prefix>NNNNN":
 * "<value>": an object, or without braces a fragment whose members each
 * start with a comma. */
static char *many_annotations(const char *first, const char *prefix, const char *value,
                              bool braces) {
  struct kcm_buf b = KCM_BUF_INIT(16u << 20);
  unsigned i;
  assert_int_equal(kcm_buf_appendf(&b, "%s%s", braces ? "{" : "", first), 0);
  for (i = 0; i < MANY; i++)
    assert_int_equal(kcm_buf_appendf(&b, "%s\"%s%05u\":\"%s\"",
                                     i || *first || !braces ? "," : "", prefix, MANY - 1 - i,
                                     value),
                     0);
  assert_int_equal(kcm_buf_append_str(&b, braces ? "}" : ""), 0);
  return kcm_buf_take(&b);
}

static void plan_within_budget(struct run *r) {
  struct budget_use used;
  budget_start(N_LOG_N, FEW_REALLOCS);
  plan(r);
  budget_stop(&used);
  print_message("plan: %llu comparisons, %llu reallocations\n",
                (unsigned long long)used.compares, (unsigned long long)used.reallocs);
}

static void many_annotations_in_one_walk(void **state) {
  struct dspec s = dspec(2);
  struct run r = {0};
  char *dann = many_annotations("\"deployment.kubernetes.io/revision\":\"1\"", "a", "new", true);
  char *rsann = many_annotations("", "b", "old", false), key[16];
  const struct kcm_deployment_rs *v;

  /* A rollout: the new ReplicaSet takes the Deployment's annotations. */
  s.image = "nginx:2";
  s.annotations = dann;
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "one", .age = 900, .replicas = 2,
                                         .available = 2, .revision = 1});
  plan_within_budget(&r);
  v = &r.plan.rs[find_step(&r, KCM_DEPLOYMENT_STEP_CREATE)->rs];
  snprintf(key, sizeof(key), "a%05u", 77);
  assert_string_equal(kcm_api_pairs_get(&v->annotations, key), "new");
  assert_string_equal(kcm_api_pairs_get(&v->annotations, KCM_DEPLOYMENT_REVISION), "2");
  done(&r);

  /* The new ReplicaSet exists with 50,000 other keys, between the
   * Deployment's in order. */
  memset(&r, 0, sizeof(r));
  s.image = "nginx:1";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "one", .age = 900, .replicas = 2,
                                         .available = 2, .revision = 1, .annotations = rsann});
  plan_within_budget(&r);
  v = &r.plan.rs[r.plan.new_rs];
  assert_string_equal(kcm_api_pairs_get(&v->annotations, key), "new");
  key[0] = 'b';
  assert_string_equal(kcm_api_pairs_get(&v->annotations, key), "old");
  done(&r);

  /* A legacy rollback to it: the Deployment's 50,000 go, its 50,000 come. */
  free(dann);
  dann = many_annotations("\"deployment.kubernetes.io/revision\":\"2\","
                          "\"deprecated.deployment.rollback.to\":\"1\"",
                          "a", "new", true);
  memset(&r, 0, sizeof(r));
  s.image = "nginx:2";
  s.annotations = dann;
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "one", .age = 900, .image = "nginx:0",
                                         .revision = 1, .annotations = rsann});
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "two", .age = 500, .replicas = 2,
                                         .available = 2, .revision = 2});
  plan_within_budget(&r);
  assert_int_equal(r.plan.steps[r.plan.nsteps - 1].op, KCM_DEPLOYMENT_STEP_ROLLBACK);
  assert_non_null(strstr(r.plan.rollback_ops,
                         "{\"op\":\"remove\",\"path\":\"/metadata/annotations/a00077\"}"));
  assert_non_null(strstr(r.plan.rollback_ops,
                         "{\"op\":\"add\",\"path\":"
                         "\"/metadata/annotations/b00077\",\"value\":\"old\"}"));
  done(&r);
  free(dann);
  free(rsann);
}

/* A stable merge sort: equal keys keep their order, and the comparisons
 * stay within n log2 n whatever the input's order. */
static unsigned long sort_compares;

static bool by_seventh(struct dp_sync *s, int a, int b) {
  sort_compares++;
  return a % 7 < b % 7;
}

static bool by_value_down(struct dp_sync *s, int a, int b) {
  sort_compares++;
  return a > b;
}

static void sorts_are_stable_merges(void **state) {
  static const size_t sizes[] = {0, 1, 2, 3, 5, 8, 9, 31, 64, 100, 1000, 4097, 50000};
  struct dp_sync s = {0};
  int *l = malloc(50000 * sizeof(*l));
  size_t k, i, n;
  unsigned long reversed = 0;
  assert_non_null(l);
  for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
    n = sizes[k];
    for (i = 0; i < n; i++)
      l[i] = (int)i;
    sort_compares = 0;
    dp_sort(&s, l, n, by_seventh);
    assert_int_equal(s.err, 0);
    for (i = 1; i < n; i++)
      assert_true(l[i - 1] % 7 < l[i] % 7 || (l[i - 1] % 7 == l[i] % 7 && l[i - 1] < l[i]));
    assert_true(sort_compares <= n * 17);
    /* Reversed input costs n log2 n at most; sorted input about n. */
    sort_compares = 0;
    dp_sort(&s, l, n, by_value_down);
    for (i = 1; i < n; i++)
      assert_true(l[i - 1] > l[i]);
    assert_true(sort_compares <= n * 17);
    reversed = sort_compares;
    sort_compares = 0;
    dp_sort(&s, l, n, by_value_down);
    assert_true(sort_compares <= n);
  }
  print_message("50,000 reversed: %lu comparisons, sorted: %lu\n", reversed, sort_compares);
  free(l);
}

/* 50,000 old ReplicaSets created in the same second, listed newest name
 * first, in a rolling update: ordering them (by name, as their times tie)
 * takes about log2 n comparisons each, and the oldest are scaled down
 * first. */
static void many_old_replica_sets_sort_in_n_log_n(void **state) {
  struct dspec s = dspec(MANY);
  struct kcm_replicaset **rs = calloc(MANY + 1, sizeof(*rs));
  struct kcm_deployment_input in;
  struct kcm_deployment_plan p;
  struct budget_use used;
  char created[32], name[16];
  size_t i, k = 0;
  struct kcm_deployment *d;

  assert_non_null(rs);
  s.image = "nginx:2";
  d = make_d(&s);
  iso(NOW_S - 1000, created, sizeof(created));
  for (i = 0; i <= MANY; i++) {
    bool new_rs = i == MANY;
    char *json;
    /* old: one ready replica each; new: the surge, none available */
    assert_true(asprintf(
        &json,
        "{\"metadata\":{\"name\":\"web-r%05zu\",\"namespace\":\"ns\",\"uid\":"
        "\"aaaaaaaa-0000-0000-0000-%012zx\",\"resourceVersion\":\"7\",\"generation\":1,"
        "\"creationTimestamp\":\"%s\",\"labels\":{\"app\":\"web\"},\"annotations\":"
        "{\"deployment.kubernetes.io/revision\":\"%zu\"},\"ownerReferences\":[{\"apiVersion\":"
        "\"apps/v1\",\"kind\":\"Deployment\",\"name\":\"web\",\"uid\":\"" D_UID "\","
        "\"controller\":true}]},\"spec\":{\"replicas\":%d,\"selector\":{\"matchLabels\":"
        "{\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"},"
        "\"creationTimestamp\":null},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":"
        "\"nginx:%d\"}]}}},\"status\":{\"replicas\":%d,\"readyReplicas\":%d,"
        "\"availableReplicas\":%d,\"observedGeneration\":1}}",
        MANY - 1 - i, i, created, i + 1, new_rs ? MANY / 4 : 1, new_rs ? 2 : 1,
        new_rs ? MANY / 4 : 1, new_rs ? 0 : 1, new_rs ? 0 : 1) > 0);
    rs[i] = (struct kcm_replicaset *)decode(KCM_KIND_REPLICASET, json);
    free(json);
  }

  in = (struct kcm_deployment_input){d, rs, MANY + 1, NULL, NULL, NULL, NOW_MS, 1, 0};
  budget_start(40u * MANY, MANY); /* reallocations: a few per step at most */
  assert_int_equal(kcm_deployment_plan(&in, &p), 0);
  budget_stop(&used);
  print_message("plan: %llu comparisons, %llu reallocations\n",
                (unsigned long long)used.compares, (unsigned long long)used.reallocs);

  /* The surge's worth of the oldest (by name) go to zero, in order. */
  for (i = 0; i < p.nsteps; i++) {
    if (p.steps[i].op != KCM_DEPLOYMENT_STEP_SCALE)
      continue;
    snprintf(name, sizeof(name), "web-r%05zu", k++);
    assert_string_equal(p.rs[p.steps[i].rs].name, name);
    assert_int_equal(p.steps[i].replicas, 0);
  }
  assert_int_equal(k, MANY / 4);
  kcm_deployment_plan_release(&p);
  for (i = 0; i <= MANY; i++)
    kcm_api_unref(&rs[i]->o, &pool);
  kcm_api_unref(&d->o, &pool);
  free(rs);
}

/* --- numbers at their limits ------------------------------------------------------------- */

/* The API's largest numbers (int32 replicas and surges, int64 revisions)
 * never overflow: a surge of MaxInt32 means all at once, sums saturate. */
static void numbers_at_their_limits(void **state) {
  struct dspec s = dspec(3);
  struct run r = {0};
  const struct kcm_deployment_rs *v;
  struct kcm_buf b = KCM_BUF_INIT(4096);
  char w[256];

  /* maxSurge 2147483647: the new ReplicaSet at full size at once. */
  s.surge = "2147483647";
  s.unavailable = "0";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "one", .age = 900, .image = "nginx:0",
                                         .replicas = 3, .available = 3, .revision = 1});
  plan(&r);
  writes(&r, w, sizeof(w));
  assert_string_equal(w, "+new=3");
  v = &r.plan.rs[find_step(&r, KCM_DEPLOYMENT_STEP_CREATE)->rs];
  assert_string_equal(kcm_api_pairs_get(&v->annotations, KCM_DEPLOYMENT_MAX), "2147483647");
  done(&r);

  /* 2147483647 replicas with a surge of 100%, a revision at int64's
   * limit, collisionCount at int32's. */
  memset(&r, 0, sizeof(r));
  s = dspec(2147483647);
  s.surge = "\"100%\"";
  s.unavailable = "\"100%\"";
  s.status = "{\"collisionCount\":2147483647}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "one", .age = 900, .image = "nginx:0",
                                         .replicas = 2147483647, .status_replicas = 2147483647,
                                         .ready = 2147483647, .available = 2147483647,
                                         .revision = 1});
  r.rs[r.n++] = make_rs(&(struct rsspec){
      .name = "two", .age = 800, .image = "nginx:9", .replicas = 2147483647,
      .status_replicas = 2147483647, .ready = 2147483647, .available = 2147483647,
      .annotations = ",\"deployment.kubernetes.io/revision\":\"9223372036854775807\""});
  plan(&r);
  assert_true(r.plan.status.replicas >= 0);
  assert_true(r.plan.status.ready >= 0);
  assert_true(r.plan.status.available >= 0);
  assert_int_equal(kcm_deployment_collision_body(r.d, 1, &b), 0);
  assert_non_null(strstr(b.data, "\"collisionCount\":2147483647"));
  kcm_buf_release(&b);
  done(&r);

  /* Proportional scaling of two full ReplicaSets to 2147483647. */
  memset(&r, 0, sizeof(r));
  s = dspec(2147483647);
  s.surge = "2147483647";
  s.unavailable = "0";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){
      .name = "one", .age = 900, .image = "nginx:0", .replicas = 2000000000, .revision = 1,
      .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                     "\"deployment.kubernetes.io/max-replicas\":\"1\""});
  r.rs[r.n++] = make_rs(&(struct rsspec){
      .name = "two", .age = 500, .replicas = 2000000000, .revision = 2,
      .annotations = ",\"deployment.kubernetes.io/desired-replicas\":\"10\","
                     "\"deployment.kubernetes.io/max-replicas\":\"1\""});
  plan(&r);
  writes(&r, w, sizeof(w));
  print_message("proportional: %s\n", w);
  for (size_t i = 0; i < r.plan.nsteps; i++)
    assert_true(r.plan.steps[i].replicas >= 0);
  done(&r);
}

/* --- what a rollout waits for ------------------------------------------------------------ */

static void why(struct run *r, struct kcm_deployment_why *w) {
  struct kcm_deployment_input in = {r->d, r->rs, r->n, answer_running, r, r->alias, NOW_MS,
                                    r->terminating_kept, 5000};
  assert_int_equal(kcm_deployment_why(&in, w), 0);
}

#define SIZED ",\"deployment.kubernetes.io/desired-replicas\":\"3\"," \
              "\"deployment.kubernetes.io/max-replicas\":\"4\""

/* Mid-rollout at maxSurge 1, maxUnavailable 0: the old ReplicaSet at 3,
 * the new one at `at` with `available` of its pods available; status:
 * the Deployment's (NULL: none). */
static void mid_rollout(struct run *r, int at, int available, bool paused, const char *status) {
  struct dspec s = dspec(3);
  s.surge = "1";
  s.unavailable = "0";
  s.image = "nginx:2";
  s.paused = paused;
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"2\"}";
  if (status)
    s.status = status;
  r->d = make_d(&s);
  r->rs[r->n++] = make_rs(&(struct rsspec){.name = "o", .age = 900, .replicas = 3, .ready = 3,
                                          .available = 3, .image = "nginx:1", .revision = 1,
                                          .annotations = SIZED});
  if (at >= 0)
    r->rs[r->n++] = make_rs(&(struct rsspec){.name = "n", .age = 100, .replicas = at,
                                            .ready = available, .available = available,
                                            .image = "nginx:2", .revision = 2,
                                            .annotations = SIZED});
}

/* Mid-rollout, held, with a Progressing condition of that status and
 * reason last updated 100 s ago, and the counts as they are (no progress
 * since): whether it timed out and how long is left. */
static void check_progressing(const char *cstatus, const char *reason, bool timed_out,
                              int64_t left) {
  static const char counts[] = "\"replicas\":4,\"updatedReplicas\":1,\"readyReplicas\":3,"
                               "\"availableReplicas\":3,\"unavailableReplicas\":1";
  struct run r = {0};
  struct kcm_deployment_why w;
  char status[512], t[32];
  iso(NOW_S - 100, t, sizeof(t));
  snprintf(status, sizeof(status), "{\"observedGeneration\":1,%s,\"conditions\":[{\"type\":"
           "\"Progressing\",\"status\":\"%s\",\"lastUpdateTime\":\"%s\",\"reason\":\"%s\"}]}",
           counts, cstatus, t, reason);
  mid_rollout(&r, 1, 0, false, status);
  why(&r, &w);
  assert_int_equal(w.timed_out, timed_out);
  assert_int_equal(w.deadline_left_s, left);
  kcm_deployment_why_release(&w);
  done(&r);
}

static void explains_what_a_rollout_waits_for(void **state) {
  struct run r = {0};
  struct kcm_deployment_why w;

  /* Held by maxUnavailable 0: the old one goes down once a new pod is
   * available, and the planner, asked with one more, says to what. */
  mid_rollout(&r, 1, 0, false, NULL);
  why(&r, &w);
  assert_int_equal(w.state, KCM_DEPLOYMENT_WHY_AVAILABLE);
  assert_int_equal(w.more, 1);
  assert_true(w.has_next);
  assert_int_equal(w.next.op, KCM_DEPLOYMENT_STEP_SCALE);
  assert_string_equal(w.next.rs, "web-o");
  assert_int_equal(w.next.from, 3);
  assert_int_equal(w.next.to, 2);
  assert_int_equal(w.max_surge, 1);
  assert_int_equal(w.max_unavailable, 0);
  assert_int_equal(w.max_total, 4);
  assert_int_equal(w.min_available, 3);
  assert_int_equal(w.total, 4);
  assert_int_equal(w.available, 3);
  assert_int_equal(w.deadline_left_s, 600); /* Progressing is set by this very sync */
  assert_false(w.timed_out);
  kcm_deployment_why_release(&w);
  done(&r);

  /* Nothing held: the planner acts now, and says how. */
  memset(&r, 0, sizeof(r));
  mid_rollout(&r, -1, 0, false, NULL);
  why(&r, &w);
  assert_int_equal(w.state, KCM_DEPLOYMENT_WHY_ACTING);
  assert_int_equal(w.next.op, KCM_DEPLOYMENT_STEP_CREATE);
  assert_int_equal(strncmp(w.next.rs, "web-", 4), 0);
  assert_int_equal(w.next.to, 1);
  kcm_deployment_why_release(&w);
  done(&r);

  /* Paused mid-rollout: nothing moves, whatever is available. */
  memset(&r, 0, sizeof(r));
  mid_rollout(&r, 1, 1, true, NULL);
  why(&r, &w);
  assert_int_equal(w.state, KCM_DEPLOYMENT_WHY_PAUSED);
  assert_false(w.has_next);
  kcm_deployment_why_release(&w);
  done(&r);

  /* Past its deadline, and a deadline running. */
  check_progressing("False", "ProgressDeadlineExceeded", true, INT64_MIN);
  check_progressing("True", "ReplicaSetUpdated", false, 500);
}

static void explains_the_end_of_a_rollout(void **state) {
  struct run r = {0};
  struct kcm_deployment_why w;
  struct dspec s = dspec(3);

  /* Complete: nothing to wait for, no deadline running. */
  steady_state(&r, NULL, NULL, NULL);
  why(&r, &w);
  assert_int_equal(w.state, KCM_DEPLOYMENT_WHY_COMPLETE);
  assert_false(w.has_next);
  assert_int_equal(w.deadline_left_s, INT64_MIN);
  kcm_deployment_why_release(&w);
  done(&r);

  /* Scaled all the way, pods not all available: nothing follows them. */
  memset(&r, 0, sizeof(r));
  mid_rollout(&r, 3, 1, false, NULL);
  kcm_api_unref(&r.rs[0]->o, &pool);
  r.rs[0] = make_rs(&(struct rsspec){.name = "o", .age = 900, .image = "nginx:1",
                                    .revision = 1, .annotations = SIZED});
  why(&r, &w);
  assert_int_equal(w.state, KCM_DEPLOYMENT_WHY_AVAILABLE);
  assert_int_equal(w.more, 2);
  assert_false(w.has_next);
  kcm_deployment_why_release(&w);
  done(&r);

  /* Recreate: old pods still running hold the new ReplicaSet back. */
  memset(&r, 0, sizeof(r));
  s.recreate = true;
  s.image = "nginx:2";
  s.annotations = "{\"deployment.kubernetes.io/revision\":\"1\"}";
  r.d = make_d(&s);
  r.rs[r.n++] = make_rs(&(struct rsspec){.name = "o", .replicas = 0, .revision = 1});
  r.running = true;
  why(&r, &w);
  assert_int_equal(w.state, KCM_DEPLOYMENT_WHY_OLD_PODS);
  assert_true(w.has_next);
  assert_int_equal(w.next.op, KCM_DEPLOYMENT_STEP_CREATE);
  assert_int_equal(w.next.to, 3);
  assert_int_equal(w.max_surge, 0);
  kcm_deployment_why_release(&w);
  done(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(numbers_at_their_limits),
      cmocka_unit_test(many_annotations_in_one_walk),
      cmocka_unit_test(sorts_are_stable_merges),
      cmocka_unit_test(many_old_replica_sets_sort_in_n_log_n),
      cmocka_unit_test(fenceposts),
      cmocka_unit_test(max_unavailable),
      cmocka_unit_test(hash_names),
      cmocka_unit_test(parse_ints),
      cmocka_unit_test(templates_ignore_the_hash),
      cmocka_unit_test(creates_the_first_replica_set),
      cmocka_unit_test(collision_count_renames),
      cmocka_unit_test(long_names_are_cut),
      cmocka_unit_test(steady_state_writes_nothing),
      cmocka_unit_test(terminating_replicas_sum),
      cmocka_unit_test(empty_selector_selects_all),
      cmocka_unit_test(claims_replica_sets),
      cmocka_unit_test(rolling_update),
      cmocka_unit_test(cleanup_unhealthy_then_scale_down),
      cmocka_unit_test(proportional_scaling),
      cmocka_unit_test(upstream_scale_table),
      cmocka_unit_test(scaling_events_name_their_direction),
      cmocka_unit_test(paused_only_scales),
      cmocka_unit_test(recreate_waits_for_old_pods),
      cmocka_unit_test(history_limit_deletes_oldest),
      cmocka_unit_test(cleanup_table),
      cmocka_unit_test(undo_reuses_the_old_replica_set),
      cmocka_unit_test(revision_history_is_capped),
      cmocka_unit_test(legacy_rollback),
      cmocka_unit_test(progress_conditions),
      cmocka_unit_test(progress_only_statuses),
      cmocka_unit_test(pause_and_resume_conditions),
      cmocka_unit_test(replica_failure_surfaces),
      cmocka_unit_test(alias_finds_a_changed_template),
      cmocka_unit_test(request_bodies),
      cmocka_unit_test(explains_what_a_rollout_waits_for),
      cmocka_unit_test(explains_the_end_of_a_rollout),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
