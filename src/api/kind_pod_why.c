/*
 * api/kind_pod_why.c — what a pod's status says keeps it from being ready,
 * in a few lines of plain text, for `kcm why`. Read from the whole pod as a
 * GET of it answers (a json-c tree: this runs for a few pods, not the
 * cache), so any field kube-apiserver serves may be looked at.
 */
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "kcm/api.h"
#include "kcm/json.h"
#include "kcm/log.h"

#define TEXT_MAX 300   /* bytes of a message kept */
#define WORD_MAX 128   /* bytes of a name or a reason kept */
#define CONTAINERS 3   /* container lines at most; the rest are counted */

struct pod_why {
  json_object *pod;
  int64_t now_s;
  struct kcm_buf *out;
  int lines, more, err;
};

static json_object *member(json_object *o, const char *key, json_type type) {
  json_object *v;
  return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, type) ? v : NULL;
}

static const char *string(json_object *o, const char *key) {
  json_object *v = member(o, key, json_type_string);
  return v && json_object_get_string_len(v) ? json_object_get_string(v) : NULL;
}

static int64_t integer(json_object *o, const char *key) {
  json_object *v = member(o, key, json_type_int);
  return v ? json_object_get_int64(v) : 0;
}

static void put(struct pod_why *w, const char *s) {
  if (!w->err)
    w->err = kcm_buf_append_str(w->out, s);
}

/* Text from the object, bounded and printable. */
static void plain(struct pod_why *w, const char *s, size_t max) {
  if (!w->err && s)
    w->err = kcm_log_plain(w->out, s, max);
}

/* before, the time since the RFC 3339 time in o's member key ("2m5s"),
 * after; nothing without one. */
static void since(struct pod_why *w, json_object *o, const char *key, const char *before,
                  const char *after) {
  char buf[64];
  int64_t t, s;
  const char *v = string(o, key);
  if (!v || kcm_api_parse_time(v, &t) || t > w->now_s)
    return;
  s = w->now_s - t;
  if (s < 120)
    snprintf(buf, sizeof(buf), "%llds", (long long)s);
  else if (s < 7200)
    snprintf(buf, sizeof(buf), "%lldm%llds", (long long)(s / 60), (long long)(s % 60));
  else if (s < 172800)
    snprintf(buf, sizeof(buf), "%lldh%lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
  else
    snprintf(buf, sizeof(buf), "%lldd%lldh", (long long)(s / 86400), (long long)(s / 3600 % 24));
  if (!w->err)
    w->err = kcm_buf_appendf(w->out, "%s%s%s", before, buf, after);
}

/* ", Reason: message" of a state or condition, each when present. */
static void reason(struct pod_why *w, json_object *o) {
  const char *r = string(o, "reason"), *m = string(o, "message");
  if (r) {
    put(w, ", ");
    plain(w, r, WORD_MAX);
  }
  if (m) {
    put(w, r ? ": " : ", ");
    plain(w, m, TEXT_MAX);
  }
}

/* Whether the pod's spec gives container `name` a readiness probe. */
static bool probed(const struct pod_why *w, const char *name) {
  json_object *spec = member(w->pod, "spec", json_type_object);
  json_object *cs = member(spec, "containers", json_type_array);
  size_t i, n = cs ? json_object_array_length(cs) : 0;
  for (i = 0; i < n; i++) {
    json_object *c = json_object_array_get_idx(cs, i);
    const char *cn = string(c, "name");
    if (cn && name && !strcmp(cn, name))
      return member(c, "readinessProbe", json_type_object) != NULL;
  }
  return false;
}

/* How a terminated state ended: " exit code 1 (Error)". */
static void ended(struct pod_why *w, json_object *t) {
  const char *r = string(t, "reason");
  if (!w->err)
    w->err = kcm_buf_appendf(w->out, "exit code %lld", (long long)integer(t, "exitCode"));
  if (r) {
    put(w, " (");
    plain(w, r, WORD_MAX);
    put(w, ")");
  }
}

/* One container that is not ready: its state and why, its restarts. */
static void container(struct pod_why *w, json_object *cs, bool init) {
  json_object *state = member(cs, "state", json_type_object);
  json_object *last = member(member(cs, "lastState", json_type_object), "terminated",
                             json_type_object);
  json_object *s;
  int64_t restarts = integer(cs, "restartCount");
  const char *name = string(cs, "name");

  put(w, init ? "init container " : "container ");
  plain(w, name ? name : "?", WORD_MAX);
  if ((s = member(state, "waiting", json_type_object))) {
    put(w, ": waiting");
    reason(w, s);
  } else if ((s = member(state, "terminated", json_type_object))) {
    put(w, ": terminated, ");
    ended(w, s);
  } else if ((s = member(state, "running", json_type_object))) {
    put(w, ": running");
    since(w, s, "startedAt", " for ", "");
    put(w, ", not ready");
    if (!init && probed(w, name))
      put(w, " (its readiness probe does not pass)");
  } else
    put(w, ": not started");
  if (restarts > 0 && !w->err)
    w->err = kcm_buf_appendf(w->out, "; restarted %lld time%s", (long long)restarts,
                             restarts == 1 ? "" : "s");
  if (last) {
    put(w, restarts > 0 ? ", last " : "; last ");
    ended(w, last);
    since(w, last, "finishedAt", " ", " ago");
  }
  put(w, "\n");
  w->lines++;
}

/* Whether an init container still keeps the pod from starting: waiting
 * (but for its turn), or ended in failure. */
static bool init_holds(json_object *cs) {
  json_object *state = member(cs, "state", json_type_object), *s;
  const char *r;
  if ((s = member(state, "waiting", json_type_object)))
    return !(r = string(s, "reason")) || strcmp(r, "PodInitializing");
  if ((s = member(state, "terminated", json_type_object)))
    return integer(s, "exitCode") != 0;
  return false;
}

static void containers(struct pod_why *w, json_object *status, const char *key, bool init) {
  json_object *all = member(status, key, json_type_array);
  size_t i, n = all ? json_object_array_length(all) : 0;
  for (i = 0; i < n; i++) {
    json_object *cs = json_object_array_get_idx(all, i);
    json_object *ready = member(cs, "ready", json_type_boolean);
    if (init ? !init_holds(cs) : ready && json_object_get_boolean(ready))
      continue;
    if (w->lines >= CONTAINERS)
      w->more++;
    else
      container(w, cs, init);
  }
}

/* The pod's own reason (Evicted, ...) and an unschedulable pod's why. */
static void pod_level(struct pod_why *w, json_object *status) {
  json_object *conds = member(status, "conditions", json_type_array);
  size_t i, n = conds ? json_object_array_length(conds) : 0;
  const char *r = string(status, "reason");
  if (r) {
    plain(w, r, WORD_MAX);
    if (string(status, "message")) {
      put(w, ": ");
      plain(w, string(status, "message"), TEXT_MAX);
    }
    put(w, "\n");
  }
  for (i = 0; i < n; i++) {
    json_object *c = json_object_array_get_idx(conds, i);
    const char *type = string(c, "type"), *st = string(c, "status");
    if (type && st && !strcmp(type, "PodScheduled") && !strcmp(st, "False")) {
      put(w, "not scheduled");
      reason(w, c);
      since(w, c, "lastTransitionTime", " (for ", ")");
      put(w, "\n");
      break;
    }
  }
}

int kcm_api_pod_why(const char *text, size_t len, int64_t now_s, struct kcm_buf *out) {
  struct pod_why w = {kcm_json_tree(text, len), now_s, out, 0, 0, 0};
  json_object *status = member(w.pod, "status", json_type_object);
  if (!w.pod || !json_object_is_type(w.pod, json_type_object)) {
    json_object_put(w.pod);
    return KCM_EINVAL;
  }
  pod_level(&w, status);
  containers(&w, status, "initContainerStatuses", true);
  containers(&w, status, "containerStatuses", false);
  if (w.more && !w.err)
    w.err = kcm_buf_appendf(out, "and %d more container%s not ready\n", w.more,
                            w.more == 1 ? "" : "s");
  json_object_put(w.pod);
  return w.err;
}
