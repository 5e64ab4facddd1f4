/*
 * conflict/guard.c — what kcm does when another controller writes what it
 * manages: say so everywhere an operator looks, and stand aside. See
 * include/kcm/conflict.h.
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
                             uint64_t quiet_ms, bool stand_aside, const char *lease_ns,
                             const char *lease_name) {
  memset(g, 0, sizeof(*g));
  kcm_conflict_init(&g->c, own, (int64_t)((quiet_ms + 999) / 1000));
  g->stand_aside = stand_aside;
  snprintf(g->lease_ns, sizeof(g->lease_ns), "%s", lease_ns);
  snprintf(g->lease_name, sizeof(g->lease_name), "%s", lease_name);
  g->now = wall_now;
  uv_timer_init(loop, &g->timer);
  g->timer.data = g;
}

void kcm_conflict_guard_area(struct kcm_conflict_guard *g, enum kcm_conflict_area a,
                             struct kcm_runtime *rt) {
  g->rt[a] = rt;
  if (rt)
    g->c.watched |= 1u << a;
  else
    g->c.watched &= ~(1u << a);
}

static void began(struct kcm_conflict_guard *g, enum kcm_conflict_area a,
                  const struct kcm_object *o) {
  const struct kcm_conflict_state *s = &g->c.area[a];
  struct kcm_runtime *rt = g->rt[a];
  struct kcm_event_object obj, lease = {"Lease", "coordination.k8s.io/v1", g->lease_ns,
                                        g->lease_name, {{0}}, 0};
  const char *action = g->stand_aside ? "standing aside" : "writing on";
  kcm_error("another controller is writing what kcm's %s controller manages; %s "
            "manager=\"%s\" kind=\"%s\" object=\"%s\"",
            kcm_conflict_area_name(a), action, s->manager, s->kind, s->example);
  g->ever[a] = true;
  kcm_events_object_of(o, &obj);
  kcm_events_record(&rt->events, &obj, true, "ConflictingController",
                    "%s also writes %s objects (this %s); the %s controller of kcm is %s",
                    s->manager, kcm_conflict_area_kind(a), s->kind, kcm_conflict_area_name(a),
                    action);
  kcm_events_record(&rt->events, &lease, true, "ConflictingController",
                    "%s also writes %s objects (e.g. %s %s); the %s controller of kcm is %s",
                    s->manager, kcm_conflict_area_kind(a), s->kind, s->example,
                    kcm_conflict_area_name(a), action);
  if (g->stand_aside)
    kcm_runtime_pause(rt, true);
}

static void seen(struct kcm_conflict_guard *g, struct kcm_object *o,
                 const struct kcm_writers *before) {
  bool first;
  int a = kcm_conflict_observe(&g->c, o, before, g->now(), &first);
  if (a >= 0 && first)
    began(g, (enum kcm_conflict_area)a, o);
}

static void on_added(void *ctx, struct kcm_object *o) { seen(ctx, o, NULL); }

static void on_updated(void *ctx, struct kcm_object *old, struct kcm_object *cur) {
  seen(ctx, cur, kcm_api_writers_of(old));
}

static void on_deleted(void *ctx, struct kcm_object *o, bool unknown) {}

int kcm_conflict_guard_watch(struct kcm_conflict_guard *g, struct kcm_informer *replicasets,
                             struct kcm_informer *deployments) {
  struct kcm_informer_handler h = {on_added, on_updated, on_deleted, g};
  if (replicasets && kcm_informer_add_handler(replicasets, &h))
    return KCM_ENOMEM;
  if (deployments && kcm_informer_add_handler(deployments, &h))
    return KCM_ENOMEM;
  return 0;
}

static void on_timer(uv_timer_t *t) {
  struct kcm_conflict_guard *g = t->data;
  unsigned ended = kcm_conflict_expire(&g->c, g->now());
  int a;
  for (a = 0; a < KCM_CONFLICT_AREAS; a++) {
    if (!(ended & (1u << a)))
      continue;
    kcm_info("no write by another controller for a while; kcm's %s controller writes again "
             "manager=\"%s\" quietSeconds=%lld",
             kcm_conflict_area_name((enum kcm_conflict_area)a), g->c.area[a].manager,
             (long long)g->c.quiet_s);
    if (g->rt[a]->paused)
      kcm_runtime_pause(g->rt[a], false);
  }
}

void kcm_conflict_guard_lead(struct kcm_conflict_guard *g) {
  kcm_conflict_lead(&g->c, g->now());
  uv_timer_start(&g->timer, on_timer, EXPIRE_EVERY_MS, EXPIRE_EVERY_MS);
}

bool kcm_conflict_guard_clear(const struct kcm_conflict_guard *g) {
  int a;
  for (a = 0; a < KCM_CONFLICT_AREAS; a++)
    if (g->c.area[a].active)
      return false;
  return true;
}

int kcm_conflict_guard_metrics(const struct kcm_conflict_guard *g, struct kcm_buf *out) {
  char labels[400];
  int a;
  if (kcm_metrics_family(out, "kcm_conflicting_controller", "gauge",
                         "1 while another controller (field manager `manager`) writes the "
                         "objects of kind `kind` that kcm manages, 0 once it stopped (and, "
                         "with manager empty, before any)."))
    return KCM_ENOMEM;
  for (a = 0; a < KCM_CONFLICT_AREAS; a++) {
    const char *pairs[] = {"kind", kcm_conflict_area_kind((enum kcm_conflict_area)a), "manager",
                           g->c.area[a].manager, NULL};
    if (!g->rt[a] && !g->ever[a])
      continue;
    if (kcm_metrics_labels(labels, sizeof(labels), pairs) ||
        kcm_metrics_sample(out, "kcm_conflicting_controller", labels, g->c.area[a].active))
      return KCM_ENOMEM;
  }
  return 0;
}

void kcm_conflict_guard_close(struct kcm_conflict_guard *g) {
  uv_timer_stop(&g->timer);
  uv_close((uv_handle_t *)&g->timer, NULL);
}
