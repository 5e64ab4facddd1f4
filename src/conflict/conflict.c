/*
 * conflict/conflict.c — another controller's status writes told from
 * kcm's and from a tenant's forgeries, counted by namespace. See
 * include/kcm/conflict.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/conflict.h"

#define UPSTREAM "kube-controller-manager"

struct nskey {
  const char *s;
  size_t n;
};

static uint64_t space_hash(const void *key) {
  const struct nskey *k = key;
  return kcm_map_hash_bytes(KCM_MAP_HASH_INIT, k->s, k->n);
}

static bool space_match(const void *key, const void *entry) {
  const struct nskey *k = key;
  const char *ns = ((const struct kcm_conflict_space *)entry)->ns;
  return !strncmp(ns, k->s, k->n) && !ns[k->n];
}

static const struct kcm_map_type space_type = {.hash_key = space_hash, .match = space_match};

/* The next name of a comma-separated list from *p: [*from, *to). False
 * at its end. */
static bool next_name(const char **p, const char **from, const char **to) {
  if (!**p)
    return false;
  *from = *p;
  *to = strchr(*p, ',');
  if (!*to)
    *to = *p + strlen(*p);
  *p = **to ? *to + 1 : *to;
  return true;
}

/* A namespace name: a DNS-1123 label. */
static bool is_label(const char *s, size_t n) {
  size_t i;
  if (!n || n > 63 || s[0] == '-' || s[n - 1] == '-')
    return false;
  for (i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
      return false;
  return true;
}

const char *kcm_conflict_system_problem(const char *system) {
  const char *p = system ? system : "", *from, *to;
  unsigned n = 0;
  while (next_name(&p, &from, &to)) {
    if (!is_label(from, (size_t)(to - from)))
      return "each must be a namespace name (lower-case letters, digits and '-', at most 63)";
    if (++n > KCM_CONFLICT_SYSTEM_MAX)
      return "at most 8 namespaces";
  }
  return NULL;
}

void kcm_conflict_init(struct kcm_conflict *c, const char *own, int64_t quiet_s,
                       uint32_t cluster_at, const char *system) {
  const char *p = system ? system : "", *from, *to;
  int a;
  memset(c, 0, sizeof(*c));
  snprintf(c->own, sizeof(c->own), "%s", own);
  c->quiet_s = quiet_s > 0 ? quiet_s : 1;
  c->cluster_at = cluster_at;
  while (c->nsystem < KCM_CONFLICT_SYSTEM_MAX && next_name(&p, &from, &to))
    if (is_label(from, (size_t)(to - from)))
      snprintf(c->system[c->nsystem++], sizeof(c->system[0]), "%.*s", (int)(to - from), from);
  c->watched = (1u << KCM_KIND_COUNT) - 1;
  for (a = 0; a < KCM_KIND_COUNT; a++) {
    kcm_map_init(&c->area[a].spaces, &space_type);
    c->area[a].manager = "";
  }
}

static void clear(struct kcm_conflict_state *s) {
  struct kcm_map_iter it;
  struct kcm_conflict_space *sp;
  kcm_map_iter_init(&it, &s->spaces);
  while ((sp = kcm_map_next(&it))) {
    free(sp->ns);
    free(sp);
  }
  kcm_map_release(&s->spaces);
  s->held = s->held_system = 0;
  s->cluster = false;
}

static bool is_system(const struct kcm_conflict *c, const char *ns, size_t n) {
  unsigned i;
  for (i = 0; i < c->nsystem; i++)
    if (!strncmp(c->system[i], ns, n) && !c->system[i][n])
      return true;
  return false;
}

/* Whether the area stands aside in every namespace now: while a system
 * namespace is held, or (when asked for) cluster_at namespaces are. Sets
 * s->cluster; true when it changed. */
static bool settle(const struct kcm_conflict *c, struct kcm_conflict_state *s, int64_t now) {
  bool everywhere = s->held_system || (c->cluster_at && s->held >= c->cluster_at);
  if (everywhere == s->cluster)
    return false;
  s->cluster = everywhere;
  if (everywhere)
    s->cluster_since = now;
  return true;
}

void kcm_conflict_release(struct kcm_conflict *c) {
  int a;
  for (a = 0; a < KCM_KIND_COUNT; a++)
    clear(&c->area[a]);
}

void kcm_conflict_lead(struct kcm_conflict *c, int64_t now) {
  c->leading = now;
  if (!now)
    kcm_conflict_release(c);
}

/* Whether a count the object's controller keeps differs between a and b. */
static bool counts_changed(const struct kcm_object *a, const struct kcm_object *b) {
  const struct kcm_api_kind *k = kcm_api_kind(a->kind);
  struct kcm_api_count x[KCM_API_COUNTS], y[KCM_API_COUNTS];
  size_t i, n = k->counts(a, x);
  k->counts(b, y);
  for (i = 0; i < n; i++)
    if (x[i].value != y[i].value)
      return true;
  return false;
}

static bool has_entry(const struct kcm_writers *w, const struct kcm_status_writer *e) {
  uint8_t i;
  for (i = 0; i < w->n; i++)
    if (w->status[i].manager == e->manager && w->status[i].at == e->at) /* pooled */
      return true;
  return false;
}

/* The manager of another's status entry that came with the change from old
 * to cur, when a count changed with it; else NULL. On a write the server
 * stamps the writer's entry alone, so through kcm's own writes every other
 * entry stays as it was or goes. With more entries than kept, whether one
 * is new cannot be told: none is taken for new. */
static const char *foreign_status_write(const struct kcm_conflict *c,
                                        const struct kcm_object *old,
                                        const struct kcm_object *cur) {
  const struct kcm_writers *w = kcm_api_writers_of(cur), *before = kcm_api_writers_of(old);
  uint8_t i;
  if (!c->leading || !w || !before || old->kind != cur->kind || w->more || before->more ||
      !kcm_api_uid_equal(&old->uid, &cur->uid) || !counts_changed(old, cur))
    return NULL;
  for (i = 0; i < w->n; i++) {
    const struct kcm_status_writer *e = &w->status[i];
    if (e->at >= c->leading && strcmp(e->manager, c->own) && !has_entry(before, e))
      return e->manager;
  }
  return NULL;
}

void kcm_conflict_observe(struct kcm_conflict *c, const struct kcm_object *old,
                          const struct kcm_object *cur, bool successive, int64_t now,
                          struct kcm_conflict_change *ch) {
  enum kcm_kind a = (enum kcm_kind)cur->kind;
  struct kcm_conflict_state *s;
  struct nskey key = {cur->ns ? cur->ns : "", cur->ns ? strlen(cur->ns) : 0};
  struct kcm_conflict_space *sp;

  memset(ch, 0, sizeof(*ch));
  ch->area = -1;
  if (a >= KCM_KIND_COUNT)
    return;
  s = &c->area[a];
  if (!old || !successive || !(c->watched & (1u << a)) ||
      !(ch->manager = foreign_status_write(c, old, cur)))
    return;
  ch->area = (int)a;
  s->writes++;
  s->manager = kcm_conflict_manager_class(ch->manager);
  if (!(sp = kcm_map_get(&s->spaces, &key))) {
    /* a system namespace is tracked however many others are */
    if ((s->spaces.len >= KCM_CONFLICT_SPACES && !is_system(c, key.s, key.n)) ||
        !(sp = calloc(1, sizeof(*sp))) ||
        !(sp->ns = strndup(key.s, key.n)) || kcm_map_put(&s->spaces, &key, sp, NULL)) {
      if (sp)
        free(sp->ns);
      free(sp);
      s->dropped++;
      return;
    }
    sp->since = now;
    sp->system = is_system(c, key.s, key.n);
  }
  sp->last = now;
  sp->writes++;
  ch->space = sp;
  if (!sp->held && sp->writes >= KCM_CONFLICT_WRITES) {
    sp->held = ch->held = true;
    s->held++;
    s->held_system += sp->system;
    ch->cluster = settle(c, s, now);
  }
}

/* Remove sp from s and free it; tell `ended` when it was held. */
static unsigned drop(struct kcm_conflict_state *s, int a, struct kcm_conflict_space *sp,
                     void (*ended)(void *data, int area, const char *ns), void *data) {
  struct nskey key = {sp->ns, strlen(sp->ns)};
  unsigned less = 0;
  kcm_map_remove(&s->spaces, &key);
  if (sp->held) {
    s->held--;
    s->held_system -= sp->system;
    less = 1u << a;
    if (ended)
      ended(data, a, sp->ns);
  }
  free(sp->ns);
  free(sp);
  return less;
}

unsigned kcm_conflict_expire(struct kcm_conflict *c, int64_t now,
                             void (*ended)(void *data, int area, const char *ns), void *data) {
  unsigned less = 0;
  int a;
  for (a = 0; a < KCM_KIND_COUNT; a++) {
    struct kcm_conflict_state *s = &c->area[a];
    struct kcm_conflict_space *sp, **quiet;
    struct kcm_map_iter it;
    size_t n = 0, i;
    /* Gathered first: a removal invalidates the iterator. Without memory
     * for the list, the next call tries again. */
    if (!s->spaces.len || !(quiet = malloc(s->spaces.len * sizeof(*quiet))))
      goto cluster;
    kcm_map_iter_init(&it, &s->spaces);
    while ((sp = kcm_map_next(&it)))
      if (now - sp->last >= c->quiet_s)
        quiet[n++] = sp;
    for (i = 0; i < n; i++)
      less |= drop(s, a, quiet[i], ended, data);
    free(quiet);
  cluster:
    if (s->cluster && settle(c, s, now))
      less |= 1u << a;
  }
  return less;
}

bool kcm_conflict_holds(const struct kcm_conflict *c, enum kcm_kind a, const char *ns,
                        size_t n) {
  const struct kcm_conflict_state *s = &c->area[a];
  const struct kcm_conflict_space *sp;
  struct nskey key = {ns, n};
  if (s->cluster)
    return true;
  if (!s->held)
    return false;
  sp = kcm_map_get(&s->spaces, &key);
  return sp && sp->held;
}

const char *kcm_conflict_manager_class(const char *manager) {
  return manager && !strcmp(manager, UPSTREAM) ? UPSTREAM : "other";
}

const char *kcm_conflict_area_name(enum kcm_kind a) {
  return kcm_api_kind(a) ? kcm_api_kind(a)->singular : "unknown";
}

const char *kcm_conflict_area_kind(enum kcm_kind a) { return kcm_api_kind_name(a); }
