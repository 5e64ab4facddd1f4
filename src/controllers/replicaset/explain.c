/*
 * controllers/replicaset/explain.c — `kcm why` for a ReplicaSet, from the
 * planner its controller runs, and the pods that hold an object back
 * (shared with the Deployment's answer), written as text or JSON.
 */
#include <stdlib.h>
#include <string.h>

#include "kcm/controllers.h"
#include "kcm/jsonw.h"
#include "kcm/labels.h"
#include "kcm/log.h"
#include "kcm/replicaset.h"

#define WORDS_MAX 300 /* bytes of text from an object shown */
#define BAR 20        /* cells of the progress bar */

void kcm_replicaset_why_json_text(struct kcm_jsonw *j, const char *key, const char *text) {
  struct kcm_buf b = KCM_BUF_INIT(WORDS_MAX + 8);
  kcm_log_plain(&b, text ? text : "", WORDS_MAX);
  kcm_jsonw_key(j, key);
  kcm_jsonw_stringn(j, b.data ? b.data : "", b.len);
  kcm_buf_release(&b);
}

/* --- the pods that hold an object back ----------------------------------------------- */

/* Pod p in a few words; its restarts unless the lines of its reasons
 * (which give them) follow. */
static void pod_words(const struct kcm_pod *p, int32_t min_ready, uint64_t now_ms, bool reasons,
                      struct kcm_buf *out) {
  static const char *const phases[] = {"Pending", "Running", "Succeeded", "Failed", "Unknown"};
  kcm_buf_append_str(out, phases[p->phase < 5 ? p->phase : 4]);
  if (p->o.deleted)
    kcm_buf_append_str(out, ", terminating");
  else if (!p->node)
    kcm_buf_append_str(out, ", not scheduled to a node");
  else if (!p->ready)
    kcm_buf_append_str(out, ", not ready");
  else
    kcm_buf_appendf(out, ", ready for %llds of minReadySeconds %d",
                    (long long)((int64_t)(now_ms / 1000) - p->ready_since), min_ready);
  if (p->restarts > 0 && !reasons)
    kcm_buf_appendf(out, ", restarted %d time%s", p->restarts, p->restarts == 1 ? "" : "s");
}

/* What pod o's whole status says, as lines (kcm_api_pod_why()) into out;
 * nothing while `kcm why` has not read it. */
static void pod_reasons(const struct kcm_controllers_why *in, const struct kcm_object *o,
                        struct kcm_buf *out) {
  size_t len;
  const char *t = in->text ? in->text(in->ctx, KCM_KIND_POD, o->name, &len) : NULL;
  if (t)
    kcm_api_pod_why(t, len, (int64_t)(in->now_ms / 1000), out);
}

/* The lines of b, each after indent (text) or as a JSON string (j). */
static void lines(const struct kcm_buf *b, const char *indent, struct kcm_buf *out,
                  struct kcm_jsonw *j) {
  const char *line, *nl;
  for (line = b->data; line && line < b->data + b->len; line = nl + 1) {
    if (!(nl = memchr(line, '\n', (size_t)(b->data + b->len - line))))
      break;
    if (j)
      kcm_jsonw_stringn(j, line, (size_t)(nl - line));
    else {
      kcm_buf_append_str(out, indent);
      kcm_buf_append(out, line, (size_t)(nl - line + 1));
    }
  }
}

static void pod_json(struct kcm_jsonw *j, const struct kcm_pod *p, const struct kcm_buf *words,
                     const struct kcm_buf *why) {
  kcm_jsonw_object(j);
  kcm_jsonw_key_string(j, "pod", p->o.name);
  kcm_jsonw_key(j, "why");
  kcm_jsonw_stringn(j, words->data ? words->data : "", words->len);
  kcm_jsonw_key_int(j, "restarts", p->restarts);
  kcm_jsonw_key_array(j, "reasons");
  lines(why, NULL, NULL, j);
  kcm_jsonw_end(j);
  kcm_jsonw_end(j);
}

void kcm_replicaset_why_pods(const struct kcm_controllers_why *in, kcm_replicaset_why_holds holds,
                             const void *ctx, int32_t min_ready, struct kcm_buf *out,
                             struct kcm_jsonw *j) {
  const struct kcm_object *o;
  size_t shown = 0;
  struct kcm_buf words = KCM_BUF_INIT(4096), why = KCM_BUF_INIT(64u << 10);
  if (j)
    kcm_jsonw_key_array(j, "heldBy");
  for (o = kcm_informer_first_in(&in->informers[KCM_KIND_POD], in->ns); o; o = o->ns_next) {
    const struct kcm_pod *p = (const struct kcm_pod *)o;
    if (!holds(ctx, p))
      continue;
    kcm_buf_reset(&words);
    kcm_buf_reset(&why);
    if (shown++ < KCM_REPLICASET_WHY_PODS)
      pod_reasons(in, o, &why);
    else if (!j)
      continue;
    pod_words(p, min_ready, in->now_ms, why.len > 0, &words);
    if (j) {
      pod_json(j, p, &words, &why);
      continue;
    }
    kcm_buf_appendf(out, "%s    pod %s: ", shown == 1 ? "  held back by:\n" : "", o->name);
    kcm_buf_append(out, words.data, words.len);
    kcm_buf_append_str(out, "\n");
    lines(&why, "      ", out, NULL);
  }
  if (j)
    kcm_jsonw_end(j);
  else if (shown > KCM_REPLICASET_WHY_PODS)
    kcm_buf_appendf(out, "    and %zu more\n", shown - KCM_REPLICASET_WHY_PODS);
  kcm_buf_release(&words);
  kcm_buf_release(&why);
}

/* --- where kcm differs from kube-controller-manager -------------------------------------- */

/* ReplicaSet rs's pods in the cache: failed, and active (and of those
 * ready and available) by its own rule. */
struct pod_counts {
  int32_t failed, active, ready, available;
};

static struct pod_counts count_pods(const struct kcm_controllers_why *in,
                                    const struct kcm_replicaset *rs) {
  struct pod_counts c = {0, 0, 0, 0};
  const struct kcm_object *o;
  for (o = kcm_informer_first_owned(&in->informers[KCM_KIND_POD], &rs->o.uid); o;
       o = o->own_next) {
    const struct kcm_pod *p = (const struct kcm_pod *)o;
    if (strcmp(o->ns, rs->o.ns) || !o->has_controller ||
        !kcm_api_uid_equal(&o->controller.uid, &rs->o.uid) ||
        !kcm_labels_matches(&rs->selector, &o->labels))
      continue;
    if (p->phase == KCM_POD_FAILED && !o->deleted)
      c.failed++;
    if (!kcm_replicaset_pod_active(p))
      continue;
    c.active++;
    c.ready += p->ready;
    c.available += kcm_replicaset_pod_available(p, rs->min_ready_seconds, in->now_ms);
  }
  return c;
}

void kcm_replicaset_why_upstream(const struct kcm_controllers_why *in,
                                 const struct kcm_replicaset *rs, bool waits,
                                 struct kcm_buf *out, struct kcm_jsonw *j) {
  static const char *const notes[] = {
      "pods of it failed: kcm replaces pods that keep failing after 1s, 2s, 4s, ... up to "
      "--failed-pod-backoff (5m by default); kube-controller-manager replaces them at once",
      "its status counts fewer pods than there are: kcm writes a status that only adds pods up "
      "to --status-write-interval (1s by default) later; kube-controller-manager at once",
  };
  struct pod_counts c = rs ? count_pods(in, rs) : (struct pod_counts){0, 0, 0, 0};
  bool say[2];
  size_t i;
  say[0] = c.failed > 0;
  say[1] = rs && waits && (c.active > rs->status.replicas || c.ready > rs->status.ready ||
                  c.available > rs->status.available);
  if (j)
    kcm_jsonw_key_array(j, "unlikeUpstream");
  for (i = 0; i < 2; i++) {
    if (!say[i])
      continue;
    if (j)
      kcm_jsonw_string(j, notes[i]);
    else
      kcm_buf_appendf(out, "  unlike kube-controller-manager: %s\n", notes[i]);
  }
  if (j)
    kcm_jsonw_end(j);
}

/* --- a ReplicaSet ----------------------------------------------------------------------- */

struct explain {
  const struct kcm_controllers_why *in;
  const struct kcm_replicaset *rs;
  struct kcm_replicaset_plan plan;
  struct kcm_replicaset_status st; /* as the sync would write it */
  const char *state;
};

/* Pods of the ReplicaSet not available (or going). */
static bool holds(const void *ctx, const struct kcm_pod *p) {
  const struct explain *e = ctx;
  return p->o.has_controller && kcm_api_uid_equal(&p->o.controller.uid, &e->rs->o.uid) &&
         !strcmp(p->o.ns, e->rs->o.ns) && p->phase != KCM_POD_SUCCEEDED &&
         p->phase != KCM_POD_FAILED &&
         (p->o.deleted || !kcm_replicaset_pod_available(p, e->rs->min_ready_seconds,
                                                        e->in->now_ms));
}

/* Its ReplicaFailure condition as its controller last wrote it; NULL if
 * none is True. */
static const struct kcm_condition *failure(const struct kcm_replicaset *rs) {
  const struct kcm_condition *f = kcm_api_condition_get(&rs->status.conditions, "ReplicaFailure");
  return f && f->status && !strcmp(f->status, "True") ? f : NULL;
}

/* The Deployment (or other owner) that sets its replicas. */
static void owner_text(const struct explain *e, struct kcm_buf *out) {
  const struct kcm_owner *c = &e->rs->o.controller;
  if (!e->rs->o.has_controller)
    return;
  kcm_buf_append_str(out, "  controlled by ");
  kcm_log_plain(out, c->kind, WORDS_MAX);
  kcm_buf_append_str(out, " ");
  kcm_log_plain(out, c->name, WORDS_MAX);
  if (c->kind && !strcmp(c->kind, "Deployment")) {
    kcm_buf_append_str(out, ": its rollout sets the replicas (kcm why deployment/");
    kcm_log_plain(out, c->name, WORDS_MAX);
    kcm_buf_append_str(out, ")");
  }
  kcm_buf_append_str(out, "\n");
}

static void next_text(const struct explain *e, struct kcm_buf *out) {
  const struct kcm_replicaset_claim *c = &e->plan.claim;
  int32_t n = e->plan.change;
  if (c->nadopt || c->nrelease) {
    kcm_buf_appendf(out, "  next: adopt %zu and release %zu pod%s by their ownerReferences\n",
                    c->nadopt, c->nrelease, c->nadopt + c->nrelease == 1 ? "" : "s");
  }
  if (n > 0)
    kcm_buf_appendf(out, "  next: create %d pod%s, now (the controller has not done it yet)\n",
                    n, n == 1 ? "" : "s");
  else if (n < 0) {
    int32_t i;
    kcm_buf_appendf(out, "  next: delete %d pod%s, now: ", -n, n == -1 ? "" : "s");
    for (i = 0; i < -n && i < KCM_REPLICASET_WHY_PODS; i++)
      kcm_buf_appendf(out, "%s%s", i ? ", " : "", e->plan.order[i]->o.name);
    kcm_buf_appendf(out, "%s first\n", -n > KCM_REPLICASET_WHY_PODS ? ", ..." : "");
  }
}

static void text(const struct explain *e, struct kcm_buf *out) {
  const struct kcm_replicaset *rs = e->rs;
  const struct kcm_condition *f = failure(e->rs);
  int i, full = rs->replicas > 0 ? (int)((int64_t)(e->st.available < 0 ? 0
                                          : e->st.available > rs->replicas ? rs->replicas
                                          : e->st.available) * BAR / rs->replicas) : BAR;
  kcm_buf_appendf(out, "replicaset/%s in %s", rs->o.name, rs->o.ns);
  if (rs->min_ready_seconds)
    kcm_buf_appendf(out, ": minReadySeconds %d", rs->min_ready_seconds);
  kcm_buf_append_str(out, "\n  [");
  for (i = 0; i < BAR; i++)
    kcm_buf_append_str(out, i < full ? "#" : "-");
  kcm_buf_appendf(out, "] %d replica%s: %d created, %d ready, %d available\n", rs->replicas,
                  rs->replicas == 1 ? "" : "s", e->st.replicas, e->st.ready, e->st.available);
  owner_text(e, out);
  if (rs->o.deleted)
    kcm_buf_append_str(out, "  being deleted: no pod is created or deleted for it\n");
  next_text(e, out);
  if (!strcmp(e->state, "complete"))
    kcm_buf_append_str(out, "  complete: every replica available\n");
  else if (!strcmp(e->state, "waiting-for-available"))
    kcm_buf_appendf(out, "  waits for %d more pod%s to be available\n",
                    rs->replicas - e->st.available,
                    rs->replicas - e->st.available == 1 ? "" : "s");
  kcm_replicaset_why_pods(e->in, holds, e, rs->min_ready_seconds, out, NULL);
  kcm_replicaset_why_upstream(e->in, rs, true, out, NULL);
  if (f) {
    kcm_buf_append_str(out, "  ReplicaFailure (");
    kcm_log_plain(out, f->reason, WORDS_MAX);
    kcm_buf_append_str(out, "): ");
    kcm_log_plain(out, f->message, WORDS_MAX);
    kcm_buf_append_str(out, "\n");
  }
}

/* The answer in one line, for --watch when not on a terminal. */
static void line_text(const struct explain *e, struct kcm_buf *out) {
  const struct kcm_replicaset *rs = e->rs;
  kcm_buf_appendf(out, "replicaset/%s: %d replica%s: %d created, %d ready, %d available; ",
                  rs->o.name, rs->replicas, rs->replicas == 1 ? "" : "s", e->st.replicas,
                  e->st.ready, e->st.available);
  if (!strcmp(e->state, "acting") && !e->plan.change)
    kcm_buf_appendf(out, "next: adopt %zu and release %zu pods, now", e->plan.claim.nadopt,
                    e->plan.claim.nrelease);
  else if (!strcmp(e->state, "acting"))
    kcm_buf_appendf(out, "next: %s %d pod%s, now", e->plan.change > 0 ? "create" : "delete",
                    e->plan.change > 0 ? e->plan.change : -e->plan.change,
                    e->plan.change == 1 || e->plan.change == -1 ? "" : "s");
  else if (!strcmp(e->state, "waiting-for-available"))
    kcm_buf_appendf(out, "waits for %d more pod%s to be available",
                    rs->replicas - e->st.available,
                    rs->replicas - e->st.available == 1 ? "" : "s");
  else
    kcm_buf_appendf(out, "%s", !strcmp(e->state, "complete") ? "complete: every replica available"
                                                             : "being deleted");
  kcm_buf_append_str(out, "\n");
}

static void json(const struct explain *e, struct kcm_jsonw *j) {
  const struct kcm_replicaset *rs = e->rs;
  const struct kcm_condition *f = failure(e->rs);
  kcm_jsonw_object(j);
  kcm_jsonw_key_string(j, "kind", "ReplicaSet");
  kcm_jsonw_key_string(j, "namespace", rs->o.ns);
  kcm_jsonw_key_string(j, "name", rs->o.name);
  kcm_jsonw_key_string(j, "state", e->state);
  kcm_jsonw_key_int(j, "replicas", rs->replicas);
  kcm_jsonw_key_int(j, "createdReplicas", e->st.replicas);
  kcm_jsonw_key_int(j, "readyReplicas", e->st.ready);
  kcm_jsonw_key_int(j, "availableReplicas", e->st.available);
  if (rs->o.has_controller) {
    kcm_jsonw_key_object(j, "controlledBy");
    kcm_replicaset_why_json_text(j, "kind", rs->o.controller.kind);
    kcm_replicaset_why_json_text(j, "name", rs->o.controller.name);
    kcm_jsonw_end(j);
  }
  if (e->plan.change) {
    kcm_jsonw_key_object(j, "next");
    kcm_jsonw_key_string(j, "action", e->plan.change > 0 ? "create" : "delete");
    kcm_jsonw_key_int(j, "pods", e->plan.change > 0 ? e->plan.change : -e->plan.change);
    kcm_jsonw_end(j);
  }
  kcm_replicaset_why_pods(e->in, holds, e, rs->min_ready_seconds, NULL, j);
  kcm_replicaset_why_upstream(e->in, rs, true, NULL, j);
  if (f)
    kcm_replicaset_why_json_text(j, "replicaFailure", f->message);
  kcm_jsonw_end(j);
}

/* The plan and the status it would write, from the caches; 0 or an error. */
static int plan(struct explain *e) {
  struct kcm_replicaset_input in = {0};
  struct kcm_object **pods = NULL;
  size_t n = 0;
  int err = kcm_informer_claimable(&e->in->informers[KCM_KIND_POD], &e->rs->o.uid, e->rs->o.ns,
                                   &pods, &n);
  if (err)
    return err;
  in.rs = e->rs;
  in.candidates = (struct kcm_pod *const *)(void *)pods;
  in.ncandidates = n;
  in.satisfied = true; /* the daemon's expectations are its own: as if met */
  in.now_ms = e->in->now_ms;
  err = kcm_replicaset_plan(&in, &e->plan);
  free(pods);
  if (err)
    return err;
  err = kcm_replicaset_status(e->rs, e->plan.claim.claimed, e->plan.claim.nclaimed, 0,
                              e->plan.change, false, NULL, e->in->now_ms, &e->st);
  if (e->rs->o.deleted)
    e->state = "deleting";
  else if (e->plan.change || e->plan.claim.nadopt || e->plan.claim.nrelease)
    e->state = "acting";
  else if (e->st.available >= e->rs->replicas && e->st.replicas == e->rs->replicas)
    e->state = "complete";
  else
    e->state = "waiting-for-available";
  return err;
}

int kcm_replicaset_explain(const struct kcm_controllers_why *in, struct kcm_buf *out,
                           int *ended) {
  struct explain e;
  int err;
  memset(&e, 0, sizeof(e));
  e.in = in;
  *ended = 0;
  e.rs = (const struct kcm_replicaset *)kcm_informer_get(&in->informers[KCM_KIND_REPLICASET],
                                                         in->ns, in->name);
  if (!e.rs)
    return KCM_ENOTFOUND;
  if (!(err = plan(&e))) {
    *ended = !strcmp(e.state, "complete");
    if (in->json) {
      struct kcm_jsonw j;
      kcm_jsonw_start(&j, out);
      json(&e, &j);
      if (!(err = kcm_jsonw_finish(&j)))
        err = kcm_buf_append_str(out, "\n");
    } else if (in->line)
      line_text(&e, out);
    else
      text(&e, out);
  }
  kcm_replicaset_status_release(&e.st);
  kcm_replicaset_plan_release(&e.plan);
  return err;
}
