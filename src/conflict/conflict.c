/*
 * conflict/conflict.c — another controller's writes told from kcm's. See
 * include/kcm/conflict.h.
 */
#include <stdio.h>
#include <string.h>

#include "kcm/conflict.h"

void kcm_conflict_init(struct kcm_conflict *c, const char *own, int64_t quiet_s) {
  memset(c, 0, sizeof(*c));
  snprintf(c->own, sizeof(c->own), "%s", own);
  c->quiet_s = quiet_s > 0 ? quiet_s : 1;
  c->watched = (1u << KCM_CONFLICT_AREAS) - 1;
}

void kcm_conflict_lead(struct kcm_conflict *c, int64_t now) {
  c->leading = now;
  if (!now)
    memset(c->area, 0, sizeof(c->area));
}

static bool foreign(const struct kcm_conflict *c, const char *manager, int64_t at) {
  return c->leading && manager && strcmp(manager, c->own) && at >= c->leading;
}

/* The area and writer of o's newest foreign write, if the event brought one. */
static int foreign_write(const struct kcm_conflict *c, const struct kcm_object *o,
                         const struct kcm_writers *w, const struct kcm_writers *before,
                         const char **manager) {
  bool rs = o->kind == KCM_KIND_REPLICASET;
  if (foreign(c, w->status, w->status_at) &&
      (!before || before->status != w->status || before->status_at != w->status_at)) {
    *manager = w->status;
    return rs ? KCM_CONFLICT_REPLICASET : KCM_CONFLICT_DEPLOYMENT;
  }
  /* A ReplicaSet a Deployment owns, just created by another. */
  if (rs && !before && o->has_controller && o->controller.kind &&
      !strcmp(o->controller.kind, "Deployment") && foreign(c, w->creator, o->created)) {
    *manager = w->creator;
    return KCM_CONFLICT_DEPLOYMENT;
  }
  return -1;
}

int kcm_conflict_observe(struct kcm_conflict *c, const struct kcm_object *o,
                         const struct kcm_writers *before, int64_t now, bool *began) {
  const struct kcm_writers *w;
  struct kcm_conflict_state *s;
  const char *manager = NULL;
  int area;

  *began = false;
  if (!(w = kcm_api_writers_of(o)))
    return -1;
  if ((area = foreign_write(c, o, w, before, &manager)) < 0 || !(c->watched & (1u << area)))
    return -1;
  s = &c->area[area];
  if (!s->active) {
    memset(s, 0, sizeof(*s));
    s->active = *began = true;
    s->since = now;
  }
  snprintf(s->manager, sizeof(s->manager), "%s", manager);
  snprintf(s->kind, sizeof(s->kind), "%s", kcm_api_kind_name((enum kcm_kind)o->kind));
  snprintf(s->example, sizeof(s->example), "%s/%s", o->ns ? o->ns : "", o->name);
  s->last = now;
  s->writes++;
  return area;
}

unsigned kcm_conflict_expire(struct kcm_conflict *c, int64_t now) {
  unsigned ended = 0;
  int i;
  for (i = 0; i < KCM_CONFLICT_AREAS; i++)
    if (c->area[i].active && now - c->area[i].last >= c->quiet_s) {
      c->area[i].active = false;
      ended |= 1u << i;
    }
  return ended;
}

const char *kcm_conflict_area_name(enum kcm_conflict_area a) {
  return a == KCM_CONFLICT_REPLICASET ? "replicaset" : "deployment";
}

const char *kcm_conflict_area_kind(enum kcm_conflict_area a) {
  return a == KCM_CONFLICT_REPLICASET ? "ReplicaSet" : "Deployment";
}
