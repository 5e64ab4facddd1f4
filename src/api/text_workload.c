/*
 * api/text_workload.c — a ReplicaSet or Deployment from its JSON text, read
 * in place like a pod (see text.c) but for the selector and the template,
 * which json-c reads from a small text holding only them; the memo of
 * recent templates lets a known template's spec be left out of that text.
 */
#include <stdlib.h>
#include <string.h>

#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/map.h"
#include "source.h"
#include "text.h"

static void memo_clear(struct kcm_api_memo *m, struct kcm_api_memo_slot *e) {
  if (e->text)
    m->bytes -= e->len + strlen(e->canonical) + 1;
  free(e->text);
  free(e->canonical);
  memset(e, 0, sizeof(*e));
}

void kcm_api_memo_release(struct kcm_api_memo *m) {
  size_t i;
  for (i = 0; m->slots && i < KCM_API_MEMO_SLOTS; i++)
    memo_clear(m, &m->slots[i]);
  free(m->slots);
  memset(m, 0, sizeof(*m));
}

/* Remember the template of a decoded object, in the slot its hash picks. */
static void memo_put(struct kcm_api_memo *m, uint64_t hash, const char *text, size_t len,
                     const struct kcm_object *o) {
  struct kcm_api_memo_slot *e;
  const char *canonical;
  uint64_t key;
  size_t size;
  if (o->kind == KCM_KIND_REPLICASET) {
    canonical = ((const struct kcm_replicaset *)o)->template;
    key = ((const struct kcm_replicaset *)o)->template_key;
  } else {
    canonical = ((const struct kcm_deployment *)o)->template;
    key = ((const struct kcm_deployment *)o)->template_key;
  }
  if (!m->slots && !(m->slots = calloc(KCM_API_MEMO_SLOTS, sizeof(*m->slots))))
    return; /* a memo is only a shortcut */
  e = &m->slots[hash % KCM_API_MEMO_SLOTS];
  memo_clear(m, e);
  size = len + strlen(canonical) + 1;
  if (m->bytes + size > KCM_API_MEMO_BYTES || !(e->text = malloc(len)) ||
      !(e->canonical = strdup(canonical))) {
    free(e->text);
    e->text = NULL;
    return;
  }
  memcpy(e->text, text, len);
  e->hash = hash;
  e->len = len;
  e->key = key;
  m->bytes += size;
}

/* The parts of a ReplicaSet or Deployment json-c reads (their text), and
 * values checked once everything is read. */
struct parts {
  const char *selector, *tmpl; /* in the object's text; NULL when absent or null */
  size_t selector_len, tmpl_len;
  bool tmpl_object;                       /* the template is an object (a memo key) */
  int64_t history, deadline, collisions, terminating; /* -1 when unset */
  enum { STRATEGY_NONE, STRATEGY_RECREATE, STRATEGY_ROLLING, STRATEGY_OTHER } strategy;
};

/* The text of the next value, or NULL for null. */
static int span(struct tctx *t, const char **text, size_t *len, bool *object) {
  *text = NULL;
  *len = 0;
  if (object)
    *object = kcm_json_peek(t->j) == KCM_JSON_OBJECT;
  if (kcm_json_null(t->j))
    return 0;
  return kcm_json_raw(t->j, text, len) ? 0 : ended(t);
}

static int i32(struct tctx *t, const char *field, int32_t *out) {
  int64_t v;
  int rc = integer(t, field, INT32_MIN, INT32_MAX, &v);
  if (rc > 0)
    *out = (int32_t)v;
  return rc;
}

/* maxSurge or maxUnavailable, as decode_intstr(). */
static int intstr(struct tctx *t, const char *field, struct kcm_intstr *out) {
  const char *s;
  size_t n;
  int64_t v;
  int rc;
  if (kcm_json_null(t->j))
    return 0;
  out->set = true;
  out->percent = false;
  if (kcm_json_peek(t->j) == KCM_JSON_NUMBER) {
    rc = kcm_json_int(t->j, &v);
    if (rc == KCM_ETOOBIG || (!rc && (v < 0 || v > INT32_MAX)))
      return bad(t, field, "out of range");
    if (!rc) {
      out->value = (int32_t)v;
      return 1;
    }
  } else if (kcm_json_string(t->j, &s, &n) && kcm_api_parse_percent(s, &out->value)) {
    out->percent = true;
    return 1;
  }
  return mismatch(t, field, "must be an integer or a percentage");
}

static int rolling_update(struct tctx *t, struct kcm_deployment *dp) {
  int rc = open_object(t, "spec.strategy.rollingUpdate");
  if (rc <= 0)
    return rc;
  while (kcm_json_member(t->j)) {
    if (kcm_json_key_is(t->j, "maxSurge"))
      rc = intstr(t, "spec.strategy.rollingUpdate.maxSurge", &dp->max_surge);
    else if (kcm_json_key_is(t->j, "maxUnavailable"))
      rc = intstr(t, "spec.strategy.rollingUpdate.maxUnavailable", &dp->max_unavailable);
    else
      rc = skip(t);
    if (rc < 0)
      return rc;
  }
  return ended(t);
}

static int strategy(struct tctx *t, struct kcm_deployment *dp, struct parts *w) {
  const char *s;
  size_t n;
  int rc = open_object(t, "spec.strategy");
  if (rc <= 0)
    return rc;
  while (kcm_json_member(t->j)) {
    if (kcm_json_key_is(t->j, "type")) {
      w->strategy = STRATEGY_NONE;
      if ((rc = str(t, "spec.strategy.type", &s, &n)) > 0)
        w->strategy = !strcmp(s, "Recreate")        ? STRATEGY_RECREATE
                      : !strcmp(s, "RollingUpdate") ? STRATEGY_ROLLING
                                                    : STRATEGY_OTHER;
    } else if (kcm_json_key_is(t->j, "rollingUpdate")) {
      rc = rolling_update(t, dp);
    } else {
      rc = skip(t);
    }
    if (rc < 0)
      return rc;
  }
  return ended(t);
}

static int workload_spec(struct tctx *t, struct kcm_object *o, struct parts *w) {
  struct kcm_replicaset *rs = o->kind == KCM_KIND_REPLICASET ? (struct kcm_replicaset *)o : NULL;
  struct kcm_deployment *dp = rs ? NULL : (struct kcm_deployment *)o;
  int rc = open_object(t, "spec");
  if (rc <= 0)
    return rc;
  while (kcm_json_member(t->j)) {
    if (kcm_json_key_is(t->j, "replicas"))
      rc = i32(t, "spec.replicas", rs ? &rs->replicas : &dp->replicas);
    else if (kcm_json_key_is(t->j, "minReadySeconds"))
      rc = i32(t, "spec.minReadySeconds", rs ? &rs->min_ready_seconds : &dp->min_ready_seconds);
    else if (kcm_json_key_is(t->j, "selector"))
      rc = span(t, &w->selector, &w->selector_len, NULL);
    else if (kcm_json_key_is(t->j, "template"))
      rc = span(t, &w->tmpl, &w->tmpl_len, &w->tmpl_object);
    else if (dp && kcm_json_key_is(t->j, "revisionHistoryLimit"))
      rc = integer(t, "spec.revisionHistoryLimit", 0, INT32_MAX, &w->history);
    else if (dp && kcm_json_key_is(t->j, "progressDeadlineSeconds"))
      rc = integer(t, "spec.progressDeadlineSeconds", 0, INT32_MAX, &w->deadline);
    else if (dp && kcm_json_key_is(t->j, "paused"))
      rc = boolean(t, "spec.paused", &dp->paused);
    else if (dp && kcm_json_key_is(t->j, "strategy"))
      rc = strategy(t, dp, w);
    else
      rc = skip(t);
    if (rc < 0)
      return rc;
  }
  return ended(t);
}

/* status.conditions, as decode_conditions(). */
static int conditions(struct tctx *t, struct kcm_conditions *out) {
  static const char *const names[4] = {"type", "status", "reason", "message"};
  uint32_t cap = 0;
  int rc;
  kcm_api_conditions_release(out);
  if ((rc = open_array(t, "status.conditions")) <= 0)
    return rc;
  while (kcm_json_element(t->j)) {
    struct kcm_condition *k;
    if (out->n == cap) {
      struct kcm_condition *grown =
          realloc(out->items, (cap = cap ? cap * 2 : 4) * sizeof(*out->items));
      if (!grown)
        return KCM_ENOMEM;
      out->items = grown;
    }
    k = &out->items[out->n++];
    memset(k, 0, sizeof(*k));
    if (!kcm_json_object(t->j))
      return mismatch(t, "status.conditions", "entries must be objects");
    while (kcm_json_member(t->j)) {
      char **dst[4] = {&k->type, &k->status, &k->reason, &k->message};
      const char *s;
      size_t n;
      int i;
      for (i = 0; i < 4 && !kcm_json_key_is(t->j, names[i]); i++)
        ;
      if (i < 4) {
        free(*dst[i]);
        *dst[i] = NULL;
        if ((rc = str(t, "status.conditions", &s, &n)) > 0 && !(*dst[i] = strndup(s, n)))
          return KCM_ENOMEM;
      } else if (kcm_json_key_is(t->j, "lastUpdateTime")) {
        rc = time_value(t, "status.conditions", &k->last_update);
      } else if (kcm_json_key_is(t->j, "lastTransitionTime")) {
        rc = time_value(t, "status.conditions", &k->last_transition);
      } else {
        rc = skip(t);
      }
      if (rc < 0)
        return rc;
    }
    TRY(ended(t));
    if (!k->type)
      return bad(t, "status.conditions", "entries need a type");
  }
  return ended(t);
}

static int workload_status(struct tctx *t, struct kcm_object *o, struct parts *w) {
  struct kcm_replicaset *rs = o->kind == KCM_KIND_REPLICASET ? (struct kcm_replicaset *)o : NULL;
  struct kcm_deployment *dp = rs ? NULL : (struct kcm_deployment *)o;
  const struct {
    const char *key, *field;
    int32_t *dst;
  } counts[] = {
      {"replicas", "status.replicas", rs ? &rs->status.replicas : &dp->status.replicas},
      {"readyReplicas", "status.readyReplicas", rs ? &rs->status.ready : &dp->status.ready},
      {"availableReplicas", "status.availableReplicas",
       rs ? &rs->status.available : &dp->status.available},
      {rs ? "fullyLabeledReplicas" : "updatedReplicas",
       rs ? "status.fullyLabeledReplicas" : "status.updatedReplicas",
       rs ? &rs->status.fully_labeled : &dp->status.updated},
      {rs ? NULL : "unavailableReplicas", "status.unavailableReplicas",
       rs ? NULL : &dp->status.unavailable},
  };
  size_t i;
  int rc = open_object(t, "status");
  if (rc <= 0)
    return rc;
  while (kcm_json_member(t->j)) {
    for (i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
      if (counts[i].key && kcm_json_key_is(t->j, counts[i].key))
        break;
    if (i < sizeof(counts) / sizeof(counts[0]))
      rc = i32(t, counts[i].field, counts[i].dst);
    else if (kcm_json_key_is(t->j, "observedGeneration"))
      rc = integer(t, "status.observedGeneration", 0, INT64_MAX,
                   rs ? &rs->status.observed_generation : &dp->status.observed_generation);
    else if (kcm_json_key_is(t->j, "conditions"))
      rc = conditions(t, rs ? &rs->status.conditions : &dp->status.conditions);
    else if (dp && kcm_json_key_is(t->j, "collisionCount"))
      rc = integer(t, "status.collisionCount", 0, INT32_MAX, &w->collisions);
    else if (kcm_json_key_is(t->j, "terminatingReplicas"))
      rc = integer(t, "status.terminatingReplicas", 0, INT32_MAX, &w->terminating);
    else
      rc = skip(t);
    if (rc < 0)
      return rc;
  }
  return ended(t);
}

/* spec.selector and spec.template through json-c, from a small text holding
 * only them; a template the memo knows leaves its spec out. */
static int spec_parts(struct tctx *t, struct kcm_object *o, const struct parts *w,
                      struct kcm_api_memo *memo) {
  static const char *const root[] = {NULL};
  struct kcm_buf b = KCM_BUF_INIT(w->selector_len + w->tmpl_len + 64);
  struct json_object *spec;
  const char *canonical = NULL;
  uint64_t hash = 0, key = 0;
  size_t from, to;
  int rc = 0;

  if (kcm_buf_append(&b, "{", 1) ||
      (w->selector && (kcm_buf_append(&b, "\"selector\":", 11) ||
                       kcm_buf_append(&b, w->selector, w->selector_len))) ||
      (w->tmpl && kcm_buf_append(&b, w->selector ? ",\"template\":" : "\"template\":",
                                 w->selector ? 12 : 11)))
    rc = KCM_ENOMEM;
  if (!rc && w->tmpl) {
    struct kcm_api_memo_slot *e = NULL;
    if (memo && w->tmpl_object) {
      hash = kcm_map_hash_bytes(KCM_MAP_HASH_INIT, w->tmpl, w->tmpl_len);
      e = memo->slots ? &memo->slots[hash % KCM_API_MEMO_SLOTS] : NULL;
      if (e && e->text && e->hash == hash && e->len == w->tmpl_len &&
          !memcmp(e->text, w->tmpl, w->tmpl_len)) {
        canonical = e->canonical;
        key = e->key;
      }
    }
    if (canonical)
      kcm_json_start(t->j, w->tmpl, w->tmpl_len);
    if (canonical && kcm_json_member_span(t->j, root, "spec", &from, &to))
      rc = kcm_buf_append(&b, w->tmpl, from) || kcm_buf_append(&b, w->tmpl + to, w->tmpl_len - to)
               ? KCM_ENOMEM
               : 0;
    else
      rc = kcm_buf_append(&b, w->tmpl, w->tmpl_len) ? KCM_ENOMEM : 0;
  }
  if (!rc && kcm_buf_append(&b, "}", 1))
    rc = KCM_ENOMEM;
  if (rc) {
    kcm_buf_release(&b);
    return rc;
  }
  if (!(spec = kcm_json_tree(b.data, b.len)))
    rc = bad(t, "(json)", "spec.selector or spec.template is not valid JSON");
  else
    rc = kcm_api_decode_spec_parts(o, spec, t->pool, canonical, key, t->err);
  json_object_put(spec);
  kcm_buf_release(&b);
  if (memo && w->tmpl && w->tmpl_object) {
    if (canonical)
      memo->hits++;
    else
      memo->misses++;
    if (!rc && !canonical)
      memo_put(memo, hash, w->tmpl, w->tmpl_len, o);
  }
  return rc;
}

/* A ReplicaSet or Deployment: read in place like a pod, but for the
 * selector and the template (see spec_parts()). */
int kcm_api_text_decode_workload(enum kcm_kind kind, const char *text, size_t len,
                                 struct kcm_json *j, struct kcm_api_memo *memo,
                                 struct kcm_intern *pool, struct kcm_object **out,
                                 struct kcm_api_error *err) {
  struct kcm_replicaset *rs = NULL;
  struct kcm_deployment *dp = NULL;
  struct kcm_object *o;
  struct parts w = {.history = -1, .deadline = -1, .collisions = -1, .terminating = -1};
  struct tctx t;
  struct kcm_api_src src = {.j = j, .pool = pool, .err = err};
  struct kcm_api_meta meta;
  int rc = 0;

  if (kind == KCM_KIND_REPLICASET) {
    if (!(rs = calloc(1, sizeof(*rs))))
      return KCM_ENOMEM;
    rs->replicas = 1;
    o = &rs->o;
  } else {
    if (!(dp = calloc(1, sizeof(*dp))))
      return KCM_ENOMEM;
    dp->replicas = 1;
    o = &dp->o;
  }
  o->kind = (uint8_t)kind;
  o->refs = 1;
  memset(&t, 0, sizeof(t));
  t.j = j;
  t.pool = pool;
  t.err = err;
  memset(&meta, 0, sizeof(meta));
  meta.o = o;
  meta.pairs = rs ? &rs->annotations : &dp->annotations;
  meta.writers = rs ? &rs->writers : &dp->writers;
  kcm_json_start(j, text, len);
  if (!kcm_json_object(j))
    rc = mismatch(&t, "(object)", "must be a JSON object");
  while (!rc && kcm_json_member(j)) {
    if (kcm_json_key_is(j, "metadata"))
      rc = kcm_api_meta_read(&src, &meta);
    else if (kcm_json_key_is(j, "spec"))
      rc = workload_spec(&t, o, &w);
    else if (kcm_json_key_is(j, "status"))
      rc = workload_status(&t, o, &w);
    else
      rc = skip(&t);
    rc = rc > 0 ? 0 : rc;
  }
  if (!rc && (j->err || !kcm_json_done(j)))
    rc = bad(&t, "(json)", j->err ? j->err : "text after the object");
  if (!rc)
    rc = kcm_api_meta_complete(&src, &meta);
  if (!rc)
    rc = spec_parts(&t, o, &w, memo);
  if (!rc && (rs ? rs->replicas : dp->replicas) < 0)
    rc = bad(&t, "spec.replicas", "must not be negative");
  if (!rc && w.strategy == STRATEGY_OTHER)
    rc = bad(&t, "spec.strategy.type", "must be Recreate or RollingUpdate");
  if (rc) {
    if (rc == KCM_ENOMEM && !err->field[0])
      bad(&t, "(object)", "out of memory");
    kcm_api_unref(o, pool);
    return rc;
  }
  if (dp) {
    dp->recreate = w.strategy == STRATEGY_RECREATE;
    dp->revision_history_limit = (int32_t)w.history;
    dp->progress_deadline = (int32_t)w.deadline;
    dp->status.collision_count = (int32_t)w.collisions;
    dp->status.terminating = (int32_t)w.terminating;
  } else {
    rs->status.terminating = (int32_t)w.terminating;
  }
  *out = o;
  return 0;
}

