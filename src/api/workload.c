/*
 * api/workload.c — what reading a ReplicaSet and a Deployment share (see
 * workload.h): the handlers of their common fields, their conditions, the
 * selector and template read through json-c with the memo, and the
 * reading of the whole object around a kind's field list.
 */
#include <stdlib.h>
#include <string.h>

#include "kcm/api.h"
#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/map.h"
#include "workload.h"

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
                     const struct kcm_api_parts *parts) {
  struct kcm_api_memo_slot *e;
  const char *canonical = *parts->template;
  uint64_t key = *parts->template_key;
  size_t size;
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

/* --- the fields both kinds have ------------------------------------------------------ */

int kcm_api_workload_metadata(struct kcm_api_src *s, void *obj) {
  struct kcm_api_workload *w = obj;
  return kcm_api_meta_read(s, &w->meta);
}

static int i32(struct kcm_api_src *s, const char *field, int32_t *out) {
  int64_t v = 0;
  int rc = kcm_api_src_int(s, field, INT32_MIN, INT32_MAX, &v);
  if (rc > 0)
    *out = (int32_t)v;
  return rc;
}

int kcm_api_workload_count(struct kcm_api_src *s, const char *field, int32_t *out) {
  int64_t v = 0;
  int rc = kcm_api_src_int(s, field, 0, INT32_MAX, &v);
  if (rc > 0)
    *out = (int32_t)v;
  return rc;
}

int kcm_api_workload_replicas(struct kcm_api_src *s, void *obj) {
  return i32(s, "spec.replicas", ((struct kcm_api_workload *)obj)->replicas);
}

int kcm_api_workload_min_ready(struct kcm_api_src *s, void *obj) {
  return i32(s, "spec.minReadySeconds", ((struct kcm_api_workload *)obj)->min_ready_seconds);
}

int kcm_api_workload_count_replicas(struct kcm_api_src *s, void *obj) {
  return i32(s, "status.replicas", ((struct kcm_api_workload *)obj)->count_replicas);
}

int kcm_api_workload_ready(struct kcm_api_src *s, void *obj) {
  return i32(s, "status.readyReplicas", ((struct kcm_api_workload *)obj)->ready);
}

int kcm_api_workload_available(struct kcm_api_src *s, void *obj) {
  return i32(s, "status.availableReplicas", ((struct kcm_api_workload *)obj)->available);
}

int kcm_api_workload_terminating(struct kcm_api_src *s, void *obj) {
  return kcm_api_workload_count(s, "status.terminatingReplicas",
                                ((struct kcm_api_workload *)obj)->terminating);
}

int kcm_api_workload_observed(struct kcm_api_src *s, void *obj) {
  return kcm_api_src_int(s, "status.observedGeneration", 0, INT64_MAX,
                         ((struct kcm_api_workload *)obj)->observed_generation);
}

/* The text of the value, or NULL for null; JSON only. */
static int span(struct kcm_api_src *s, const char *field, const char **text, size_t *len,
                bool *object) {
  *text = NULL;
  *len = 0;
  if (!s->j)
    return kcm_api_src_fail(s, field, "is not read from protobuf");
  if (object)
    *object = kcm_json_peek(s->j) == KCM_JSON_OBJECT;
  if (kcm_json_null(s->j))
    return 0;
  return kcm_json_raw(s->j, text, len) ? 1 : kcm_api_src_mismatch(s, field, "");
}

int kcm_api_workload_selector(struct kcm_api_src *s, void *obj) {
  struct kcm_api_workload *w = obj;
  return span(s, "spec.selector", &w->selector, &w->selector_len, NULL);
}

int kcm_api_workload_template(struct kcm_api_src *s, void *obj) {
  struct kcm_api_workload *w = obj;
  return span(s, "spec.template", &w->tmpl, &w->tmpl_len, &w->tmpl_object);
}

/* --- status.conditions ------------------------------------------------------------------ */

static int condition_string(struct kcm_api_src *s, char **dst) {
  const char *p;
  size_t n;
  int rc;
  free(*dst);
  *dst = NULL;
  if ((rc = kcm_api_src_string(s, "status.conditions", &p, &n)) <= 0)
    return rc;
  return (*dst = strndup(p, n)) ? 1 : KCM_ENOMEM;
}

int kcm_api_workload_condition_type(struct kcm_api_src *s, void *obj) {
  return condition_string(s, &((struct kcm_condition *)obj)->type);
}

int kcm_api_workload_condition_status(struct kcm_api_src *s, void *obj) {
  return condition_string(s, &((struct kcm_condition *)obj)->status);
}

int kcm_api_workload_condition_reason(struct kcm_api_src *s, void *obj) {
  return condition_string(s, &((struct kcm_condition *)obj)->reason);
}

int kcm_api_workload_condition_message(struct kcm_api_src *s, void *obj) {
  return condition_string(s, &((struct kcm_condition *)obj)->message);
}

int kcm_api_workload_condition_updated(struct kcm_api_src *s, void *obj) {
  return kcm_api_src_time(s, "status.conditions", &((struct kcm_condition *)obj)->last_update);
}

int kcm_api_workload_condition_transitioned(struct kcm_api_src *s, void *obj) {
  return kcm_api_src_time(s, "status.conditions",
                          &((struct kcm_condition *)obj)->last_transition);
}

int kcm_api_workload_condition(struct kcm_api_src *s, struct kcm_api_workload *w,
                               const struct kcm_api_field *fields, size_t n) {
  struct kcm_conditions *all = w->conditions;
  struct kcm_condition k;
  int rc;
  if (!kcm_api_src_is(s, KCM_JSON_OBJECT))
    return kcm_api_src_mismatch(s, "status.conditions", "entries must be objects");
  memset(&k, 0, sizeof(k));
  rc = kcm_api_src_message(s, "status.conditions", fields, n, &k);
  if (rc >= 0 && !k.type)
    rc = kcm_api_src_fail(s, "status.conditions", "entries need a type");
  if (rc >= 0 && KCM_BUF_PUSH(all->items, all->n, k))
    rc = KCM_ENOMEM;
  if (rc < 0) {
    free(k.type);
    free(k.status);
    free(k.reason);
    free(k.message);
    return rc;
  }
  return 1;
}

/* spec.selector and spec.template through json-c, from a small text holding
 * only them; a template the memo knows leaves its spec out. */
static int spec_parts(struct kcm_api_src *s, const struct kcm_api_workload *w,
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
      kcm_json_start(s->j, w->tmpl, w->tmpl_len);
    if (canonical && kcm_json_member_span(s->j, root, "spec", &from, &to))
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
    rc = kcm_api_src_fail(s, "(json)", "spec.selector or spec.template is not valid JSON");
  else
    rc = kcm_api_decode_spec_parts(&w->parts, spec, s->pool, canonical, key, s->err);
  json_object_put(spec);
  kcm_buf_release(&b);
  if (memo && w->tmpl && w->tmpl_object) {
    if (canonical)
      memo->hits++;
    else
      memo->misses++;
    if (!rc && !canonical)
      memo_put(memo, hash, w->tmpl, w->tmpl_len, &w->parts);
  }
  return rc;
}

/* --- the whole object ------------------------------------------------------------------- */

int kcm_api_workload_decode(struct kcm_api_src *s, struct kcm_api_workload *w, void *obj,
                            const char *text, size_t len, struct kcm_api_memo *memo,
                            const struct kcm_api_field *fields, size_t n) {
  int rc;
  w->meta.o = w->o;
  kcm_json_start(s->j, text, len);
  rc = kcm_api_src_json_object(s, true, fields, n, obj);
  if (rc >= 0)
    rc = kcm_api_meta_complete(s, &w->meta);
  if (!rc)
    rc = spec_parts(s, w, memo);
  if (!rc && *w->replicas < 0)
    rc = kcm_api_src_fail(s, "spec.replicas", "must not be negative");
  if (rc == KCM_ENOMEM && !s->err->field[0])
    kcm_api_src_fail(s, "(object)", "out of memory");
  return rc;
}
