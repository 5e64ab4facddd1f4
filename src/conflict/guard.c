/*
 * conflict/guard.c — what kcm does when another controller writes what it
 * manages: say so where an operator looks, and stand aside where it
 * writes. See include/kcm/conflict.h.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kcm/buf.h"
#include "kcm/conflict.h"
#include "kcm/error.h"
#include "kcm/events.h"
#include "kcm/informer.h"
#include "kcm/log.h"
#include "kcm/metrics.h"
#include "kcm/runtime.h"

#define EXPIRE_EVERY_MS 5000

static int64_t wall_now(void) { return (int64_t)time(NULL); }

void kcm_conflict_guard_init(struct kcm_conflict_guard *g, uv_loop_t *loop, const char *own,
                             uint64_t quiet_ms, uint32_t cluster_at, const char *system,
                             bool stand_aside, const char *lease_ns, const char *lease_name) {
  memset(g, 0, sizeof(*g));
  kcm_conflict_init(&g->c, own, (int64_t)((quiet_ms + 999) / 1000), cluster_at, system);
  g->stand_aside = stand_aside;
  snprintf(g->lease_ns, sizeof(g->lease_ns), "%s", lease_ns);
  snprintf(g->lease_name, sizeof(g->lease_name), "%s", lease_name);
  g->now = wall_now;
  uv_timer_init(loop, &g->timer);
  g->timer.data = g;
}

static bool gate(void *ctx, const char *ns, size_t n) {
  const struct kcm_conflict_gate *gt = ctx;
  return kcm_conflict_holds(&gt->g->c, gt->area, ns, n);
}

void kcm_conflict_guard_area(struct kcm_conflict_guard *g, enum kcm_kind a,
                             struct kcm_runtime *rt) {
  g->rt[a] = rt;
  g->gates[a] = (struct kcm_conflict_gate){g, a};
  if (rt)
    g->c.watched |= 1u << a;
  else
    g->c.watched &= ~(1u << a);
  if (rt && g->stand_aside)
    kcm_runtime_gate(rt, gate, &g->gates[a]);
}

/* A namespace held: a warning, and an event on the object. */
static void held(struct kcm_conflict_guard *g, enum kcm_kind a,
                 const struct kcm_conflict_change *ch, const struct kcm_object *o) {
  const char *who = kcm_conflict_manager_class(ch->manager);
  const char *action = g->stand_aside ? "standing aside in its namespace" : "writing on";
  struct kcm_event_object obj;
  kcm_warn("another controller writes the status of what kcm's %s controller manages; %s "
              "namespace=\"%s\" manager=\"%s\" fieldManager=\"%.128s\" kind=\"%s\" "
              "object=\"%s\" writes=%u",
              kcm_conflict_area_name(a), action, o->ns, who, ch->manager,
              kcm_conflict_area_kind(a), o->name, ch->space->writes);
  kcm_events_object_of(o, &obj);
  kcm_events_record(&g->rt[a]->events, &obj, true, "ConflictingController",
                    "Another controller (%s) writes %s status in this namespace; kcm's %s "
                    "controller is %s until none does for %llds",
                    who, kcm_conflict_area_kind(a), kcm_conflict_area_name(a),
                    g->stand_aside ? "standing aside here" : "writing on",
                    (long long)g->c.quiet_s);
}

/* Every namespace held: an error, an event on the Lease, and a pause. */
static void held_everywhere(struct kcm_conflict_guard *g, enum kcm_kind a) {
  const struct kcm_conflict_state *s = &g->c.area[a];
  struct kcm_event_object lease = {"Lease", "coordination.k8s.io/v1", g->lease_ns,
                                   g->lease_name, {{0}}, 0};
  const char *action = g->stand_aside ? "standing aside in every namespace" : "writing on";
  const char *where = s->held_system ? "a system namespace among them" : "as many as set";
  kcm_error("another controller writes the status of what kcm's %s controller manages in "
            "%u namespaces, %s; %s manager=\"%s\"",
            kcm_conflict_area_name(a), s->held, where, action, s->manager);
  g->ever[a] = true;
  kcm_events_record(&g->rt[a]->events, &lease, true, "ConflictingController",
                    "Another controller (%s) writes %s status in %u namespaces, %s; kcm's %s "
                    "controller is %s",
                    s->manager, kcm_conflict_area_kind(a), s->held, where,
                    kcm_conflict_area_name(a), action);
  if (g->stand_aside)
    kcm_runtime_pause(g->rt[a], true);
}

static void on_added(void *ctx, struct kcm_object *o) {}

static void on_updated(void *ctx, struct kcm_object *old, struct kcm_object *cur) {
  const struct kcm_conflict_watch *w = ctx;
  struct kcm_conflict_guard *g = w->g;
  struct kcm_conflict_change ch;
  kcm_conflict_observe(&g->c, old, cur, kcm_informer_successive(w->inf), g->now(), &ch);
  if (ch.area < 0)
    return;
  if (ch.held)
    held(g, (enum kcm_kind)ch.area, &ch, cur);
  if (ch.cluster)
    held_everywhere(g, (enum kcm_kind)ch.area);
}

static void on_deleted(void *ctx, struct kcm_object *o, bool unknown) {}

int kcm_conflict_guard_watch(struct kcm_conflict_guard *g, struct kcm_informer *inf) {
  struct kcm_conflict_watch *w = &g->watches[inf->opts.kind];
  struct kcm_informer_handler h = {on_added, on_updated, on_deleted, w};
  w->g = g;
  w->inf = inf;
  return kcm_informer_add_handler(inf, &h) ? KCM_ENOMEM : 0;
}

static void ended(void *data, int a, const char *ns) {
  const struct kcm_conflict_guard *g = data;
  kcm_info("no status write by another controller for a while; kcm's %s controller writes "
           "again namespace=\"%s\" quietSeconds=%lld",
           kcm_conflict_area_name((enum kcm_kind)a), ns, (long long)g->c.quiet_s);
}

static void on_timer(uv_timer_t *t) {
  struct kcm_conflict_guard *g = t->data;
  bool everywhere[KCM_KIND_COUNT];
  unsigned less;
  int a;
  for (a = 0; a < KCM_KIND_COUNT; a++)
    everywhere[a] = g->c.area[a].cluster;
  less = kcm_conflict_expire(&g->c, g->now(), ended, g);
  for (a = 0; a < KCM_KIND_COUNT; a++) {
    struct kcm_runtime *rt = g->rt[a];
    if (!(less & (1u << a)) || !rt)
      continue;
    if (everywhere[a] && !g->c.area[a].cluster) {
      kcm_info("kcm's %s controller writes again in every namespace quietSeconds=%lld",
               kcm_conflict_area_name((enum kcm_kind)a), (long long)g->c.quiet_s);
      if (rt->paused)
        kcm_runtime_pause(rt, false);
    }
    kcm_runtime_release_held(rt);
  }
}

void kcm_conflict_guard_lead(struct kcm_conflict_guard *g) {
  kcm_conflict_lead(&g->c, g->now());
  uv_timer_start(&g->timer, on_timer, EXPIRE_EVERY_MS, EXPIRE_EVERY_MS);
}

bool kcm_conflict_guard_clear(const struct kcm_conflict_guard *g) {
  int a;
  for (a = 0; a < KCM_KIND_COUNT; a++)
    if (g->c.area[a].cluster)
      return false;
  return true;
}

int kcm_conflict_guard_metrics(const struct kcm_conflict_guard *g, struct kcm_buf *out) {
  char labels[200];
  int a;
  if (kcm_metrics_family(out, "kcm_conflicting_controller", "gauge",
                         "1 while another controller (field manager class `manager`: "
                         "kube-controller-manager or other) writes the status of objects of "
                         "kind `kind` in enough namespaces that kcm stands aside in every "
                         "namespace, 0 once it stopped (and, with manager empty, before any)."))
    return KCM_ENOMEM;
  for (a = 0; a < KCM_KIND_COUNT; a++) {
    const char *pairs[] = {"kind", kcm_conflict_area_kind((enum kcm_kind)a), "manager",
                           g->ever[a] ? g->c.area[a].manager : "", NULL};
    if (!g->rt[a] && !g->ever[a])
      continue;
    if (kcm_metrics_labels(labels, sizeof(labels), pairs) ||
        kcm_metrics_sample(out, "kcm_conflicting_controller", labels, g->c.area[a].cluster))
      return KCM_ENOMEM;
  }
  if (kcm_metrics_family(out, "kcm_conflicting_namespaces", "gauge",
                         "Namespaces in which another controller writes the status of objects "
                         "of kind `kind`, and kcm's controller stands aside."))
    return KCM_ENOMEM;
  for (a = 0; a < KCM_KIND_COUNT; a++) {
    const char *pairs[] = {"kind", kcm_conflict_area_kind((enum kcm_kind)a), NULL};
    if (!g->rt[a])
      continue;
    if (kcm_metrics_labels(labels, sizeof(labels), pairs) ||
        kcm_metrics_sample(out, "kcm_conflicting_namespaces", labels, g->c.area[a].held))
      return KCM_ENOMEM;
  }
  return 0;
}

void kcm_conflict_guard_close(struct kcm_conflict_guard *g) {
  uv_timer_stop(&g->timer);
  uv_close((uv_handle_t *)&g->timer, NULL);
  kcm_conflict_lead(&g->c, 0); /* watch events until the end count nothing */
}
