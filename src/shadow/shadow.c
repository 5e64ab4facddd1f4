/*
 * shadow/shadow.c — judging what kcm would have written against what the
 * live controller did. See include/kcm/shadow.h.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"
#include "kcm/log.h"
#include "kcm/map.h"
#include "kcm/metrics.h"
#include "kcm/shadow.h"
#include "kcm/workqueue.h"

#include "internal.h"

#define BODY_EXCERPT 160 /* bytes of a patch's body kept in its plan line */

struct pending {
  char *key;
  uint64_t since;  /* when a plan was first made for the unchanged key */
  uint64_t inputs; /* what the syncs that planned it read (kcm_shadow_over) */
  bool reported;   /* judged a disagreement already */
};

static const struct kcm_map_type pending_type = KCM_MAP_STRING_KEYED(struct pending, key);

/* A sync in progress, and the writes it has sent. */
struct syncing {
  char *key;
  struct kcm_buf plan;
};

static const struct kcm_map_type syncing_type = KCM_MAP_STRING_KEYED(struct syncing, key);

static void free_syncing(struct syncing *y) {
  if (y) {
    kcm_buf_release(&y->plan);
    free(y->key);
    free(y);
  }
}

void kcm_shadow_init(struct kcm_shadow *s, const char *controller, uint64_t window_ms) {
  memset(s, 0, sizeof(*s));
  s->controller = controller;
  s->window_ms = window_ms;
  kcm_map_init(&s->pending, &pending_type);
  kcm_map_init(&s->syncing, &syncing_type);
}

/* --- following a runtime ------------------------------------------------------------------ */

/* The shadow whose member p is (the runtime holds its ops as const; they
 * are the shadow's own). */
#define SHADOW_OF(member, p)                                                                   \
  ((struct kcm_shadow *)((uintptr_t)(p) - offsetof(struct kcm_shadow, member)))

/* The wrapping writer: a write a sync sends is added to its plan. */
static int send_recorded(struct kcm_writer *w, const struct kcm_write *req,
                         kcm_client_done_cb done, void *data) {
  struct kcm_shadow *s = SHADOW_OF(writer, w);
  int err = kcm_writer_send(s->inner, req, done, data);
  if (!err && req->origin)
    kcm_shadow_sent(s, req->origin, req);
  return err;
}

/* What a sync read: its object and each it held, by uid and version. */
static uint64_t inputs_of(const struct kcm_runtime_job *j) {
  uint64_t h = KCM_MAP_HASH_INIT;
  size_t i;
  for (i = 0; i < j->nheld; i++) {
    h = kcm_map_hash_bytes(h, &j->held[i]->uid, sizeof(j->held[i]->uid));
    h = kcm_map_hash_bytes(h, &j->held[i]->rv, sizeof(j->held[i]->rv));
  }
  if (j->object) {
    h = kcm_map_hash_bytes(h, &j->object->uid, sizeof(j->object->uid));
    h = kcm_map_hash_bytes(h, &j->object->rv, sizeof(j->object->rv));
  }
  return kcm_map_hash_bytes(h, &j->nheld, sizeof(j->nheld));
}

/* The wrapping release: the sync is judged, and the key synced again
 * when the judgment waits; then the controller's own release. */
static void release_job(struct kcm_runtime_job *j) {
  struct kcm_runtime *rt = j->rt;
  struct kcm_shadow *s = SHADOW_OF(ops, rt->ops);
  uint64_t since = kcm_runtime_watching_since(rt), again;
  again = kcm_shadow_over(s, j->key, j->object, inputs_of(j),
                          since == KCM_RUNTIME_BLIND ? KCM_SHADOW_BLIND : since, uv_now(rt->loop));
  if (again && !rt->stopping)
    kcm_workqueue_add_after(&rt->queue, j->key, again);
  if (s->wrapped->release)
    s->wrapped->release(j);
}

void kcm_shadow_follow(struct kcm_shadow *s, struct kcm_runtime *rt) {
  s->inner = rt->writer;
  s->writer = *rt->writer;
  s->writer.send = send_recorded;
  s->writer.as_update = false; /* the inner writer's own send decides */
  rt->writer = &s->writer;
  s->wrapped = rt->ops;
  s->ops = *rt->ops;
  s->ops.release = release_job;
  rt->ops = &s->ops;
}

static void free_pending(struct pending *p) {
  if (p) {
    free(p->key);
    free(p);
  }
}

void kcm_shadow_release(struct kcm_shadow *s) {
  struct kcm_map_iter it;
  struct pending *p;
  struct syncing *y;
  kcm_map_iter_init(&it, &s->pending);
  while ((p = kcm_map_next(&it)))
    free_pending(p);
  kcm_map_release(&s->pending);
  kcm_map_iter_init(&it, &s->syncing);
  while ((y = kcm_map_next(&it)))
    free_syncing(y);
  kcm_map_release(&s->syncing);
}

/* --- plans -------------------------------------------------------------------------------- */

static const char *verb_of(const char *method) {
  if (!strcmp(method, "POST"))
    return "create";
  if (!strcmp(method, "DELETE"))
    return "delete";
  if (!strcmp(method, "PUT"))
    return "update";
  return "patch";
}

/* The part of a request path after ".../namespaces/NS/", without the
 * query: "pods", "replicasets/web-1/status"; the whole path without a
 * namespace. */
static void target_of(const char *path, char *dst, size_t len) {
  const char *at = strstr(path, "/namespaces/"), *slash;
  size_t n;
  if (at && (slash = strchr(at + strlen("/namespaces/"), '/')))
    at = slash + 1;
  else
    at = path;
  n = strcspn(at, "?");
  snprintf(dst, len, "%.*s", (int)n, at);
}

/* Annotations whose values a plan shows: the Deployment controller's own. */
static const char *const shown[] = {
    "deployment.kubernetes.io/revision", "deployment.kubernetes.io/revision-history",
    "deployment.kubernetes.io/desired-replicas", "deployment.kubernetes.io/max-replicas", NULL};

static bool shown_annotation(const char *key, size_t n) {
  size_t i;
  for (i = 0; shown[i]; i++)
    if (strlen(shown[i]) == n && !memcmp(shown[i], key, n))
      return true;
  return false;
}

/* The value next in j, as compact JSON, to w; in an object named
 * "annotations" (within) every value but the controller's own annotations
 * replaced by a mark, since users keep secrets there. False when j is not
 * JSON; w holds its own errors. */
static bool copy_redacted(struct kcm_json *j, struct kcm_jsonw *w, bool within) {
  const char *raw;
  size_t n;
  /* Deeper than the writer nests, a value is shown as it is: kcm's own
   * bodies hold no annotations that deep. */
  switch (w->depth + 1 < KCM_JSONW_DEPTH ? kcm_json_peek(j) : KCM_JSON_NONE) {
  case KCM_JSON_OBJECT:
    kcm_json_object(j);
    kcm_jsonw_object(w);
    while (kcm_json_member(j)) {
      bool hide = within && !shown_annotation(j->key, j->keylen);
      bool annotations = kcm_json_key_is(j, "annotations");
      kcm_jsonw_keyn(w, j->key, j->keylen);
      if (hide ? !kcm_json_skip(j) : !copy_redacted(j, w, annotations))
        return false;
      if (hide)
        kcm_jsonw_string(w, "(redacted)");
    }
    kcm_jsonw_end(w);
    return !j->err;
  case KCM_JSON_ARRAY:
    kcm_json_array(j);
    kcm_jsonw_array(w);
    while (kcm_json_element(j))
      if (!copy_redacted(j, w, false))
        return false;
    kcm_jsonw_end(w);
    return !j->err;
  default:
    if (!kcm_json_raw(j, &raw, &n))
      return false;
    kcm_jsonw_raw(w, raw, n);
    return true;
  }
}

void kcm_shadow_plan_add(struct kcm_buf *plan, const struct kcm_write *req) {
  char target[KCM_CLIENT_PATH_MAX];
  if (!strcmp(req->method, "GET") || strstr(req->path, "dryRun="))
    return;
  target_of(req->path, target, sizeof(target));
  kcm_buf_appendf(plan, "%s %s", verb_of(req->method), target);
  /* A patch's body is what it changes; a create's is the whole object. It
   * is shown compact (one line per write), annotation values redacted. */
  if (req->body && strcmp(req->method, "POST")) {
    struct kcm_buf body = KCM_BUF_INIT(1u << 24);
    struct kcm_json j;
    struct kcm_jsonw w;
    kcm_json_init(&j);
    kcm_json_start(&j, req->body, strlen(req->body));
    kcm_jsonw_start(&w, &body);
    kcm_buf_append_str(plan, " ");
    if (copy_redacted(&j, &w, false) && kcm_json_done(&j) && !kcm_jsonw_finish(&w)) {
      kcm_buf_append(plan, body.data, body.len < BODY_EXCERPT ? body.len : BODY_EXCERPT);
      if (body.len > BODY_EXCERPT)
        kcm_buf_append_str(plan, "...");
    } else {
      kcm_buf_appendf(plan, "(%zu bytes, not shown)", strlen(req->body));
    }
    kcm_json_release(&j);
    kcm_buf_release(&body);
  }
  kcm_buf_append_str(plan, "\n");
}

void kcm_shadow_reason(const char *plan, char *dst, size_t len) {
  /* "patch replicasets/web-1/status {...}" -> "patch replicasets/status" */
  const char *sp = strchr(plan, ' '), *res, *end;
  size_t vn, rn;
  const char *sub = NULL;
  size_t sn = 0;
  if (!sp) {
    snprintf(dst, len, "other");
    return;
  }
  vn = (size_t)(sp - plan);
  res = sp + 1;
  rn = strcspn(res, "/ \n");
  end = res + rn;
  if (*end == '/') {
    const char *name = end + 1, *after = name + strcspn(name, "/ \n");
    if (*after == '/') {
      sub = after + 1;
      sn = strcspn(sub, "/ \n");
    }
  }
  if (sub)
    snprintf(dst, len, "%.*s %.*s/%.*s", (int)vn, plan, (int)rn, res, (int)sn, sub);
  else
    snprintf(dst, len, "%.*s %.*s", (int)vn, plan, (int)rn, res);
}

/* The plan on one line: writes "; "-separated, a run of the same write
 * ("create pods") once with its count. */
static void plan_line(const char *plan, char *dst, size_t len) {
  size_t at = 0;
  const char *line = plan;
  dst[0] = '\0';
  while (*line && at < len) {
    size_t n = strcspn(line, "\n"), times = 1;
    const char *next = line + n + (line[n] == '\n');
    while (!strncmp(next, line, n) && (next[n] == '\n' || next[n] == '\0')) {
      times++;
      next += n + (next[n] == '\n');
    }
    if (times > 1)
      at += (size_t)snprintf(dst + at, len - at, "%s%.*s (x%zu)", at ? "; " : "", (int)n, line,
                             times);
    else
      at += (size_t)snprintf(dst + at, len - at, "%s%.*s", at ? "; " : "", (int)n, line);
    line = next;
  }
}

/* What the cache shows of o, for the disagreement's "observed": its
 * spec's replicas and the status counts its controller keeps (those set). */
static void observed_of(const struct kcm_object *o, uint64_t quiet_ms, char *dst, size_t len) {
  const struct kcm_api_kind *k;
  struct kcm_api_count counts[KCM_API_COUNTS];
  size_t at, i, n;
  const struct kcm_writers *w;
  const char *who;
  int64_t written;
  if (!o) {
    snprintf(dst, len, "not in the cache; unchanged for %llus",
             (unsigned long long)(quiet_ms / 1000));
    return;
  }
  k = kcm_api_kind(o->kind);
  w = kcm_api_writers_of(o);
  at = (size_t)snprintf(dst, len, "resourceVersion %llu, generation %lld",
                        (unsigned long long)o->rv, (long long)o->generation);
  if (k->replicas_at && at < len)
    at += (size_t)snprintf(dst + at, len - at, ", replicas %d, status",
                           *(const int32_t *)((const char *)o + k->replicas_at));
  for (i = 0, n = k->counts(o, counts); i < n && at < len; i++)
    if (counts[i].value >= 0)
      at += (size_t)snprintf(dst + at, len - at, " %s %lld", counts[i].name,
                             (long long)counts[i].value);
  if (w && (who = kcm_api_writers_newest(w, &written)) && at < len) {
    char when[32];
    kcm_api_format_time(written, when, sizeof(when));
    at += (size_t)snprintf(dst + at, len - at, ", status written by %s at %s", who, when);
  }
  if (at < len)
    snprintf(dst + at, len - at, "; unchanged for %llus", (unsigned long long)(quiet_ms / 1000));
}

/* --- judging ------------------------------------------------------------------------------ */

void kcm_shadow_changed(struct kcm_shadow *s, const char *key) {
  free_pending(kcm_map_remove(&s->pending, key));
}

/* Reasons fill the slots in the order met; the last slot is "other". */
static void count_reason(struct kcm_shadow *s, const char *reason) {
  size_t i;
  for (i = 0; i < KCM_SHADOW_REASONS - 1; i++) {
    if (!s->reasons[i].name[0])
      snprintf(s->reasons[i].name, sizeof(s->reasons[i].name), "%s", reason);
    if (!strcmp(s->reasons[i].name, reason))
      break;
  }
  if (i == KCM_SHADOW_REASONS - 1)
    snprintf(s->reasons[i].name, sizeof(s->reasons[i].name), "other");
  s->reasons[i].n++;
}

static void disagree(struct kcm_shadow *s, const char *key, const char *plan,
                     const struct kcm_object *o, uint64_t quiet_ms) {
  struct kcm_shadow_disagreement *d = &s->latest[s->next];
  s->next = (s->next + 1) % KCM_SHADOW_LATEST;
  if (s->nlatest < KCM_SHADOW_LATEST)
    s->nlatest++;
  d->at = (int64_t)time(NULL);
  snprintf(d->key, sizeof(d->key), "%s", key);
  kcm_shadow_reason(plan, d->reason, sizeof(d->reason));
  plan_line(plan, d->plan, sizeof(d->plan));
  observed_of(o, quiet_ms, d->observed, sizeof(d->observed));
  s->disagreements++;
  count_reason(s, d->reason);
  kcm_warn("shadow: kcm would act where the live controller has not controller=\"%s\" "
           "object=\"%s\" reason=\"%s\" plan=\"%s\" observed=\"%s\"",
           s->controller, key, d->reason, d->plan, d->observed);
}

uint64_t kcm_shadow_judge(struct kcm_shadow *s, const char *key, const char *plan,
                          const struct kcm_object *o, uint64_t watching_since,
                          uint64_t now_ms) {
  struct pending *p = kcm_map_get(&s->pending, key);
  uint64_t start, age;
  s->syncs++;
  if (!*plan) {
    s->agreements++;
    kcm_shadow_changed(s, key);
    return 0;
  }
  if (!p) {
    if (!(p = calloc(1, sizeof(*p))) || !(p->key = strdup(key)) ||
        kcm_map_put(&s->pending, key, p, NULL)) {
      free_pending(p);
      return 0; /* not judged: short of memory */
    }
    p->since = now_ms;
    return s->window_ms ? s->window_ms : 1;
  }
  if (p->reported)
    return 0;
  if (watching_since == KCM_SHADOW_BLIND || watching_since > now_ms)
    return KCM_SHADOW_RECHECK_MS;
  start = watching_since > p->since ? watching_since : p->since;
  age = now_ms - start;
  if (age < s->window_ms)
    return s->window_ms - age;
  p->reported = true;
  disagree(s, key, plan, o, age);
  return 0;
}

void kcm_shadow_sent(struct kcm_shadow *s, const char *key, const struct kcm_write *req) {
  struct syncing *y = kcm_map_get(&s->syncing, key);
  if (!y) {
    if (!(y = calloc(1, sizeof(*y))) || !(y->key = strdup(key)) ||
        kcm_map_put(&s->syncing, y->key, y, NULL)) {
      free_syncing(y);
      return;
    }
    kcm_buf_init(&y->plan, KCM_SHADOW_PLAN_BYTES);
  }
  kcm_shadow_plan_add(&y->plan, req);
}

uint64_t kcm_shadow_over(struct kcm_shadow *s, const char *key, const struct kcm_object *o,
                         uint64_t inputs, uint64_t watching_since, uint64_t now_ms) {
  struct syncing *y = kcm_map_remove(&s->syncing, key);
  struct pending *p = kcm_map_get(&s->pending, key);
  uint64_t again;
  if (p && p->inputs != inputs)
    kcm_shadow_changed(s, key);
  again = kcm_shadow_judge(s, key, y && y->plan.len ? y->plan.data : "", o, watching_since,
                           now_ms);
  if ((p = kcm_map_get(&s->pending, key)))
    p->inputs = inputs;
  free_syncing(y);
  return again;
}

/* --- reports ------------------------------------------------------------------------------ */

static int family(struct kcm_buf *out, const char *name, const char *help) {
  return kcm_metrics_family(out, name, "counter", help);
}

static int sample(struct kcm_buf *out, const char *name, const char *controller,
                  const char *reason, uint64_t v) {
  const char *pairs[] = {"controller", controller, reason ? "reason" : NULL, reason, NULL};
  char labels[256];
  int err = kcm_metrics_labels(labels, sizeof(labels), pairs);
  return err ? err : kcm_metrics_sample(out, name, labels, (double)v);
}

static uint64_t syncs_of(const struct kcm_shadow *s) { return s->syncs; }
static uint64_t compared_of(const struct kcm_shadow *s) {
  return s->agreements + s->disagreements;
}
static uint64_t agreements_of(const struct kcm_shadow *s) { return s->agreements; }

/* The counters with one sample per controller. */
static const struct {
  const char *name, *help;
  uint64_t (*value)(const struct kcm_shadow *s);
} counters[] = {
    {"kcm_shadow_syncs_total", "Syncs of a kcm in shadow mode.", syncs_of},
    {"kcm_shadow_compared_total",
     "Syncs of a kcm in shadow mode whose plan was compared with what the live controller did "
     "(agreements and disagreements).",
     compared_of},
    {"kcm_shadow_agreements_total",
     "Syncs of a kcm in shadow mode that would write nothing to what the live controller left.",
     agreements_of},
};

int kcm_shadow_metrics(struct kcm_shadow *const *s, size_t n, struct kcm_buf *out) {
  size_t c, i, r;
  int err = 0;
  for (c = 0; c < sizeof(counters) / sizeof(counters[0]) && !err; c++) {
    err = family(out, counters[c].name, counters[c].help);
    for (i = 0; i < n && !err; i++)
      err = sample(out, counters[c].name, s[i]->controller, NULL, counters[c].value(s[i]));
  }
  err = err ? err
            : family(out, "kcm_shadow_disagreements_total",
                     "Objects the live controller left unchanged for a whole window that a kcm "
                     "in shadow mode would change, by the first write it would send.");
  for (i = 0; i < n && !err; i++)
    for (r = 0; r < KCM_SHADOW_REASONS && s[i]->reasons[r].name[0] && !err; r++)
      err = sample(out, "kcm_shadow_disagreements_total", s[i]->controller,
                   s[i]->reasons[r].name, s[i]->reasons[r].n);
  return err;
}

static void report_one(const struct kcm_shadow *s, struct kcm_jsonw *w) {
  size_t i;
  kcm_jsonw_object(w);
  kcm_jsonw_key_string(w, "controller", s->controller);
  kcm_jsonw_key_int(w, "windowSeconds", (int64_t)(s->window_ms / 1000));
  kcm_jsonw_key_int(w, "syncs", (int64_t)s->syncs);
  kcm_jsonw_key_int(w, "compared", (int64_t)(s->agreements + s->disagreements));
  kcm_jsonw_key_int(w, "agreements", (int64_t)s->agreements);
  kcm_jsonw_key_int(w, "disagreements", (int64_t)s->disagreements);
  kcm_jsonw_key_array(w, "latest");
  for (i = 0; i < s->nlatest; i++) {
    const struct kcm_shadow_disagreement *d =
        &s->latest[(s->next + KCM_SHADOW_LATEST - 1 - i) % KCM_SHADOW_LATEST];
    char when[32];
    kcm_api_format_time(d->at, when, sizeof(when));
    kcm_jsonw_object(w);
    kcm_jsonw_key_string(w, "time", when);
    kcm_jsonw_key_string(w, "object", d->key);
    kcm_jsonw_key_string(w, "reason", d->reason);
    kcm_jsonw_key_string(w, "plan", d->plan);
    kcm_jsonw_key_string(w, "observed", d->observed);
    kcm_jsonw_end(w);
  }
  kcm_jsonw_end(w);
  kcm_jsonw_end(w);
}

int kcm_shadow_report(struct kcm_shadow *const *s, size_t n, struct kcm_buf *out) {
  struct kcm_jsonw w;
  size_t i;
  int err;
  kcm_jsonw_start(&w, out);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "kind", "ShadowReport");
  kcm_jsonw_key_array(&w, "controllers");
  for (i = 0; i < n; i++)
    report_one(s[i], &w);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  err = kcm_jsonw_finish(&w);
  return err ? err : kcm_buf_append(out, "\n", 1);
}
