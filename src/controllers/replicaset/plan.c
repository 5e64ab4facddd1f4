/*
 * controllers/replicaset/plan.c — the ReplicaSet controller's pure
 * decisions: which pods it owns, how many to create or delete, and what
 * its status should say (which to delete first: rank.c). See
 * include/kcm/replicaset.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"
#include "kcm/labels.h"
#include "kcm/replicaset.h"

#include "internal.h"

bool kcm_replicaset_pod_active(const struct kcm_pod *p) {
  return p->phase != KCM_POD_SUCCEEDED && p->phase != KCM_POD_FAILED && !p->o.deleted;
}

bool kcm_replicaset_pod_available(const struct kcm_pod *p, int32_t min_ready, uint64_t now_ms) {
  if (!p->ready)
    return false;
  if (min_ready <= 0)
    return true;
  return p->ready_since && (uint64_t)(p->ready_since + min_ready) * 1000 <= now_ms;
}

/* Members of the pod a delete answered with: metadata's deletion fields
 * and finalizers, status.phase. */
static void read_deleted(struct kcm_json *j, bool *marked, bool *stays, bool *finished) {
  const char *s;
  size_t n;
  int64_t grace;
  bool meta = kcm_json_key_is(j, "metadata");
  if (!kcm_json_object(j)) {
    kcm_json_skip(j);
    return;
  }
  while (kcm_json_member(j)) {
    if (meta && kcm_json_key_is(j, "deletionTimestamp") && kcm_json_string(j, &s, &n)) {
      *marked = n > 0;
    } else if (meta && kcm_json_key_is(j, "deletionGracePeriodSeconds") &&
               kcm_json_peek(j) == KCM_JSON_NUMBER) {
      *stays |= !kcm_json_int(j, &grace) && grace > 0; /* a number is read either way */
    } else if (meta && kcm_json_key_is(j, "finalizers") && kcm_json_array(j)) {
      for (; kcm_json_element(j); *stays = true)
        if (!kcm_json_skip(j))
          return;
    } else if (!meta && kcm_json_key_is(j, "phase") && kcm_json_string(j, &s, &n)) {
      *finished = kcm_api_pod_phase(s) == KCM_POD_SUCCEEDED ||
                  kcm_api_pod_phase(s) == KCM_POD_FAILED;
    } else if (!kcm_json_skip(j)) {
      return;
    }
  }
}

bool kcm_replicaset_pod_left_terminating(struct kcm_json *j, const char *body, size_t len) {
  bool pod = false, marked = false, stays = false, finished = false;
  const char *s;
  size_t n;
  if (!body)
    return false;
  kcm_json_start(j, body, len);
  if (!kcm_json_object(j))
    return false;
  while (kcm_json_member(j)) {
    if (kcm_json_key_is(j, "kind"))
      pod = kcm_json_string(j, &s, &n) && !strcmp(s, "Pod");
    else if (kcm_json_key_is(j, "metadata") || kcm_json_key_is(j, "status"))
      read_deleted(j, &marked, &stays, &finished);
    else if (!kcm_json_skip(j))
      break;
  }
  return !j->err && pod && marked && stays && !finished;
}

int64_t kcm_replicaset_next_available_ms(struct kcm_pod *const *pods, size_t n,
                                         int32_t min_ready, uint64_t now_ms) {
  int64_t next = -1;
  size_t i;
  if (min_ready <= 0)
    return -1;
  for (i = 0; i < n; i++) {
    const struct kcm_pod *p = pods[i];
    int64_t at, wait;
    if (!p->ready || !p->ready_since)
      continue;
    at = (p->ready_since + min_ready) * 1000;
    wait = at - (int64_t)now_ms;
    if (wait > 0 && (next < 0 || wait < next))
      next = wait;
  }
  return next;
}

/* --- claiming ---------------------------------------------------------------------- */

int kcm_replicaset_claim(const struct kcm_replicaset *rs, struct kcm_pod *const *candidates,
                         size_t n, struct kcm_replicaset_claim *out) {
  bool deleting = rs->o.deleted != 0;
  size_t i;
  int err = 0;

  memset(out, 0, sizeof(*out));
  for (i = 0; !err && i < n; i++) {
    struct kcm_pod *p = candidates[i];
    bool matches;
    if (strcmp(p->o.ns, rs->o.ns) != 0)
      continue;
    if (!kcm_replicaset_pod_active(p)) {
      out->terminating += p->o.deleted && p->phase != KCM_POD_SUCCEEDED &&
                          p->phase != KCM_POD_FAILED && p->o.has_controller &&
                          kcm_api_uid_equal(&p->o.controller.uid, &rs->o.uid) &&
                          kcm_labels_matches(&rs->selector, &p->o.labels);
      continue;
    }
    matches = kcm_labels_matches(&rs->selector, &p->o.labels);
    if (p->o.has_controller) {
      if (!kcm_api_uid_equal(&p->o.controller.uid, &rs->o.uid))
        continue; /* another controller's pod: never touched */
      if (matches)
        err = KCM_BUF_PUSH(out->claimed, out->nclaimed, p);
      else if (!deleting)
        err = KCM_BUF_PUSH(out->release, out->nrelease, p);
      continue;
    }
    if (deleting || !matches)
      continue;
    err = KCM_BUF_PUSH(out->adopt, out->nadopt, p);
    if (!err)
      err = KCM_BUF_PUSH(out->claimed, out->nclaimed, p);
  }
  if (err)
    kcm_replicaset_claim_release(out);
  return err;
}

void kcm_replicaset_claim_release(struct kcm_replicaset_claim *c) {
  free(c->claimed);
  free(c->adopt);
  free(c->release);
  memset(c, 0, sizeof(*c));
}

bool kcm_replicaset_should_manage(const struct kcm_replicaset *rs, bool satisfied) {
  return satisfied && !rs->o.deleted;
}

int32_t kcm_replicaset_next_batch(int32_t batch, int32_t remaining) {
  return batch * 2 < remaining ? batch * 2 : remaining;
}

int32_t kcm_replicaset_diff(const struct kcm_replicaset *rs, size_t active, int32_t burst) {
  int64_t diff = (int64_t)active - rs->replicas;
  if (diff < -burst)
    diff = -burst;
  if (diff > burst)
    diff = burst;
  return (int32_t)-diff;
}

/* --- the plan ------------------------------------------------------------------------- */

enum { GROUP_CHECK, GROUP_CLAIM, GROUP_MANAGE, GROUP_STATUS };

static int add_step(struct kcm_replicaset_plan *p, uint32_t wave, uint32_t group,
                    enum kcm_replicaset_op op, uint32_t index) {
  struct kcm_replicaset_step st = {{wave, group}, op, index};
  return KCM_BUF_PUSH(p->steps, p->nsteps, st);
}

/* The deletes: the claimed pods ranked, the first -change of them. */
static int plan_deletes(const struct kcm_replicaset_input *in, struct kcm_replicaset_plan *p,
                        uint32_t wave) {
  const struct kcm_replicaset_claim *c = &p->claim;
  size_t n = (size_t)-p->change, i;
  int err = 0;

  if (!(p->order = malloc(c->nclaimed * sizeof(*p->order) + 1)))
    return KCM_ENOMEM;
  memcpy(p->order, c->claimed, c->nclaimed * sizeof(*p->order));
  if (n < c->nclaimed) {
    size_t nrel = 0;
    struct kcm_pod **related = in->related ? in->related(in->ctx, c, &nrel) : NULL;
    kcm_replicaset_rank(p->order, c->nclaimed, related, nrel, in->now_ms);
    free(related);
  }
  for (i = 0; !err && i < n; i++)
    err = add_step(p, wave, GROUP_MANAGE, KCM_REPLICASET_DELETE, (uint32_t)i);
  return err;
}

/* The creates in slow-start batches, one wave each; the last wave's number
 * in *wave. */
static int plan_creates(struct kcm_replicaset_plan *p, uint32_t *wave) {
  int32_t left = p->change, batch = 1, i;
  int err = 0;
  for (; !err && left > 0; (*wave)++) {
    int32_t n = batch < left ? batch : left;
    for (i = 0; !err && i < n; i++)
      err = add_step(p, *wave, GROUP_MANAGE, KCM_REPLICASET_CREATE, 0);
    left -= n;
    batch = kcm_replicaset_next_batch(batch, left);
  }
  (*wave)--;
  return err;
}

/* The claims, then creates or deletes when the ReplicaSet is managed. */
static int plan_steps(const struct kcm_replicaset_input *in, struct kcm_replicaset_plan *p) {
  const struct kcm_replicaset_claim *c = &p->claim;
  uint32_t wave = 0, i;
  int err = 0;

  if (c->nadopt)
    err = add_step(p, wave++, GROUP_CHECK, KCM_REPLICASET_RECHECK, 0);
  for (i = 0; !err && i < c->nadopt; i++)
    err = add_step(p, wave, GROUP_CLAIM, KCM_REPLICASET_ADOPT, i);
  for (i = 0; !err && i < c->nrelease; i++)
    err = add_step(p, wave, GROUP_CLAIM, KCM_REPLICASET_RELEASE, i);
  wave++;
  if (!err && kcm_replicaset_should_manage(in->rs, in->satisfied)) {
    p->change = kcm_replicaset_diff(in->rs, c->nclaimed, KCM_REPLICASET_BURST);
    if (p->change > 0 && in->create_wait_ms) {
      p->wait_ms = in->create_wait_ms; /* the sync after the wait creates */
      p->change = 0;
    }
    if (p->change)
      err = add_step(p, wave, GROUP_MANAGE, KCM_REPLICASET_EXPECT, 0);
    if (!err && p->change > 0 && !(err = plan_creates(p, &wave)))
      p->pod_err = kcm_replicaset_pod_body(in->rs, &p->pod_body, &p->name_at, &p->name_len);
    else if (!err && p->change < 0)
      err = plan_deletes(in, p, wave);
    wave++;
  }
  return err ? err : add_step(p, wave, GROUP_STATUS, KCM_REPLICASET_STATUS, 0);
}

int kcm_replicaset_plan(const struct kcm_replicaset_input *in, struct kcm_replicaset_plan *out) {
  int err;
  memset(out, 0, sizeof(*out));
  kcm_buf_init(&out->pod_body, KCM_API_OBJECT_MAX);
  if ((err = kcm_replicaset_claim(in->rs, in->candidates, in->ncandidates, &out->claim)) ||
      (err = plan_steps(in, out)))
    kcm_replicaset_plan_release(out);
  return err;
}

void kcm_replicaset_plan_release(struct kcm_replicaset_plan *p) {
  kcm_replicaset_claim_release(&p->claim);
  free(p->steps);
  free(p->order);
  kcm_buf_release(&p->pod_body);
  memset(p, 0, sizeof(*p));
}

/* --- status -------------------------------------------------------------------------- */

void kcm_replicaset_status_release(struct kcm_replicaset_status *s) {
  kcm_api_conditions_release(&s->conditions);
  memset(s, 0, sizeof(*s));
}

int kcm_replicaset_status(const struct kcm_replicaset *rs, struct kcm_pod *const *claimed,
                          size_t n, int32_t made, int32_t change, bool manage_failed,
                          const char *message, uint64_t now_ms,
                          struct kcm_replicaset_status *out) {
  const struct kcm_conditions *have = &rs->status.conditions;
  bool has_failure = false;
  uint32_t i;
  size_t k;

  memset(out, 0, sizeof(*out));
  out->terminating = -1;
  out->replicas = (int32_t)n;
  for (k = 0; k < n; k++) {
    struct kcm_pod *p = claimed[k];
    bool fully = true;
    uint32_t l;
    for (l = 0; fully && l < rs->template_labels.n; l++) {
      const char *v = kcm_labels_get(&p->o.labels, rs->template_labels.items[l].key);
      fully = v && strcmp(v, rs->template_labels.items[l].value) == 0;
    }
    out->fully_labeled += fully;
    if (p->ready) {
      out->ready++;
      out->available += kcm_replicaset_pod_available(p, rs->min_ready_seconds, now_ms);
    }
  }
  out->replicas += made;
  out->fully_labeled += made;
  out->observed_generation = rs->o.generation;
  /* Conditions: keep every one; add or drop ReplicaFailure only. */
  out->conditions.items = calloc(have->n + 1, sizeof(*out->conditions.items));
  if (!out->conditions.items)
    return KCM_ENOMEM;
  for (i = 0; i < have->n; i++) {
    const struct kcm_condition *c = &have->items[i];
    bool failure = c->type && strcmp(c->type, "ReplicaFailure") == 0;
    has_failure |= failure;
    if (failure && !manage_failed)
      continue; /* the failure no longer applies */
    if (kcm_api_condition_copy(&out->conditions.items[out->conditions.n++], c)) {
      kcm_replicaset_status_release(out);
      return KCM_ENOMEM;
    }
  }
  if (manage_failed && !has_failure) {
    struct kcm_condition *c = &out->conditions.items[out->conditions.n++];
    c->type = strdup("ReplicaFailure");
    c->status = strdup("True");
    c->reason = strdup(change > 0 ? "FailedCreate" : "FailedDelete");
    c->message = strdup(message ? message : "");
    c->last_transition = (int64_t)(now_ms / 1000);
    if (!c->type || !c->status || !c->reason || !c->message) {
      kcm_replicaset_status_release(out);
      return KCM_ENOMEM;
    }
  }
  return 0;
}

bool kcm_replicaset_status_changed(const struct kcm_replicaset *rs,
                                   const struct kcm_replicaset_status *s) {
  return s->replicas != rs->status.replicas || s->fully_labeled != rs->status.fully_labeled ||
         s->ready != rs->status.ready || s->available != rs->status.available ||
         (s->terminating >= 0 && s->terminating != rs->status.terminating) ||
         s->observed_generation != rs->status.observed_generation ||
         !kcm_api_conditions_equal(&s->conditions, &rs->status.conditions);
}

/* Every count of s at least the written one's, the conditions the same. */
static bool counts_gain(const struct kcm_replicaset *rs, const struct kcm_replicaset_status *s) {
  return s->replicas >= rs->status.replicas && s->fully_labeled >= rs->status.fully_labeled &&
         kcm_api_conditions_equal(&s->conditions, &rs->status.conditions) &&
         s->ready >= rs->status.ready && s->available >= rs->status.available;
}

bool kcm_replicaset_status_only_gains(const struct kcm_replicaset *rs,
                                      const struct kcm_replicaset_status *s) {
  return s->observed_generation == rs->status.observed_generation && counts_gain(rs, s);
}

bool kcm_replicaset_status_observes_gains(const struct kcm_replicaset *rs,
                                          const struct kcm_replicaset_status *s) {
  return s->observed_generation > rs->status.observed_generation && counts_gain(rs, s);
}

/* The generation observed, and as many pods as the spec asks, all available. */
static bool counts_met(const struct kcm_replicaset *rs, int64_t observed, int32_t replicas,
                       int32_t available) {
  return observed >= rs->o.generation && replicas == rs->replicas && available == rs->replicas;
}

bool kcm_replicaset_status_meets_spec(const struct kcm_replicaset *rs,
                                      const struct kcm_replicaset_status *s) {
  if (!counts_met(rs, s->observed_generation, s->replicas, s->available))
    return false;
  /* met now: a step's end, unless it was met already and only pods are
   * still going away */
  return s->terminating <= 0 || !counts_met(rs, rs->status.observed_generation,
                                             rs->status.replicas, rs->status.available);
}

int kcm_replicaset_status_patch(const struct kcm_replicaset *rs,
                                const struct kcm_replicaset_status *s, bool guarded,
                                struct kcm_buf *out) {
  struct kcm_jsonw w;
  kcm_jsonw_start(&w, out);
  kcm_jsonw_object(&w);
  if (guarded) {
    kcm_jsonw_key_object(&w, "metadata");
    kcm_jsonw_key(&w, "resourceVersion");
    kcm_jsonw_uint_string(&w, rs->o.rv);
    kcm_jsonw_end(&w);
  }
  kcm_jsonw_key_object(&w, "status");
  kcm_jsonw_key_int(&w, "replicas", s->replicas);
  kcm_jsonw_key_int(&w, "fullyLabeledReplicas", s->fully_labeled);
  kcm_jsonw_key_int(&w, "readyReplicas", s->ready);
  kcm_jsonw_key_int(&w, "availableReplicas", s->available);
  kcm_jsonw_key_int(&w, "observedGeneration", s->observed_generation);
  if (s->terminating >= 0)
    kcm_jsonw_key_int(&w, "terminatingReplicas", s->terminating);
  kcm_jsonw_key(&w, "conditions"); /* null removes them */
  kcm_api_write_conditions(&w, &s->conditions);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  return kcm_jsonw_finish(&w);
}

/* --- pods from the template ------------------------------------------------------------- */

/* The parts of a canonical template a pod takes: metadata's labels,
 * annotations and finalizers, and the spec, each as its JSON text (NULL
 * when absent or null). */
struct template_parts {
  const char *text[4];
  size_t len[4];
};
enum { PART_LABELS, PART_ANNOTATIONS, PART_FINALIZERS, PART_SPEC };

static void take_part(struct kcm_json *j, struct template_parts *t, int part) {
  if (kcm_json_peek(j) == KCM_JSON_NULL)
    kcm_json_skip(j);
  else
    kcm_json_raw(j, &t->text[part], &t->len[part]);
}

static int template_parts(const char *tmpl, struct template_parts *t) {
  struct kcm_json j;
  bool ok;
  memset(t, 0, sizeof(*t));
  kcm_json_init(&j);
  kcm_json_start(&j, tmpl, strlen(tmpl));
  ok = kcm_json_object(&j);
  while (ok && kcm_json_member(&j)) {
    if (kcm_json_key_is(&j, "spec")) {
      take_part(&j, t, PART_SPEC);
    } else if (kcm_json_key_is(&j, "metadata") && kcm_json_peek(&j) == KCM_JSON_OBJECT) {
      kcm_json_object(&j);
      while (kcm_json_member(&j)) {
        if (kcm_json_key_is(&j, "labels"))
          take_part(&j, t, PART_LABELS);
        else if (kcm_json_key_is(&j, "annotations"))
          take_part(&j, t, PART_ANNOTATIONS);
        else if (kcm_json_key_is(&j, "finalizers"))
          take_part(&j, t, PART_FINALIZERS);
        else
          kcm_json_skip(&j);
      }
    } else {
      kcm_json_skip(&j);
    }
  }
  ok = ok && kcm_json_done(&j);
  kcm_json_release(&j);
  return ok ? 0 : KCM_EINVAL;
}

static void write_part(struct kcm_jsonw *w, const struct template_parts *t, int part,
                       const char *key) {
  if (!t->text[part])
    return;
  kcm_jsonw_key(w, key);
  kcm_jsonw_raw(w, t->text[part], t->len[part]);
}

int kcm_replicaset_pod_body(const struct kcm_replicaset *rs, struct kcm_buf *out,
                            size_t *name_at, size_t *name_len) {
  struct template_parts t;
  struct kcm_jsonw w;
  char prefix[300], name[KCM_REPLICASET_NAME_MAX + 1];
  size_t base, at;
  int err;

  if ((err = template_parts(rs->template, &t)))
    return err;
  /* As the API server names it from generateName: the prefix cut short,
   * then the random characters (placeholders here). A prefix too long to be
   * a name is the ReplicaSet's name without the dash, as upstream. */
  snprintf(prefix, sizeof(prefix), "%s%s", rs->o.name, strlen(rs->o.name) < 253 ? "-" : "");
  base = strlen(prefix);
  if (base > KCM_REPLICASET_NAME_MAX - KCM_REPLICASET_NAME_RANDOM)
    base = KCM_REPLICASET_NAME_MAX - KCM_REPLICASET_NAME_RANDOM;
  snprintf(name, sizeof(name), "%.*s%.*s", (int)base, prefix, KCM_REPLICASET_NAME_RANDOM,
           "xxxxxxxxxx");
  kcm_jsonw_start(&w, out);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "apiVersion", "v1");
  kcm_jsonw_key_string(&w, "kind", "Pod");
  kcm_jsonw_key_object(&w, "metadata");
  kcm_jsonw_key(&w, "name");
  at = out->len + 1;
  kcm_jsonw_string(&w, name);
  /* The caller fills the placeholders in place: the name must be as it is
   * in the text, unescaped. */
  if (!w.err && out->len - at - 1 != strlen(name))
    return KCM_EINVAL;
  kcm_jsonw_key_string(&w, "generateName", prefix);
  kcm_jsonw_key_string(&w, "namespace", rs->o.ns);
  /* Only labels, annotations and finalizers come from the template's metadata. */
  write_part(&w, &t, PART_LABELS, "labels");
  write_part(&w, &t, PART_ANNOTATIONS, "annotations");
  write_part(&w, &t, PART_FINALIZERS, "finalizers");
  kcm_jsonw_key_array(&w, "ownerReferences");
  kcm_api_write_controller_ref(&w, "apps/v1", "ReplicaSet", rs->o.name, &rs->o.uid);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  write_part(&w, &t, PART_SPEC, "spec");
  kcm_jsonw_end(&w);
  if ((err = kcm_jsonw_finish(&w)))
    return err;
  *name_at = at;
  *name_len = strlen(name);
  return 0;
}

