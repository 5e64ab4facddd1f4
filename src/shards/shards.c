/*
 * shards/shards.c — the coordinator: a member Lease, a listing of the
 * Leases every retry period, and an elector per shard taken. See
 * include/kcm/shards.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/log.h"
#include "kcm/metrics.h"
#include "kcm/shards.h"

int kcm_shards_check(const struct kcm_shards_options *o, const char **err) {
  struct kcm_leader_options lo = {o->ns, o->prefix, o->identity, o->lease_ms, o->renew_ms,
                                  o->retry_ms, o->limiter};
  if (o->count < 1 || o->count > KCM_SHARDS_MAX) {
    *err = "--shards must be between 1 and 256";
    return KCM_EINVAL;
  }
  if (o->prefix && strlen(o->prefix) > 48) {
    *err = "the Lease name must be at most 48 characters with --shards";
    return KCM_EINVAL;
  }
  if (o->ns && (!strncmp(o->ns, "kube-", 5) || !strcmp(o->ns, "default"))) {
    *err = "the shards' Leases need a namespace where only kcm writes Leases: whoever may "
           "create a Lease beside them can add members and shrink every instance's share, "
           "and components write Leases in kube-system, kube-node-lease and default; give "
           "--leader-elect-resource-namespace a namespace of their own (kcm-shards by default)";
    return KCM_EINVAL;
  }
  return kcm_leader_check(&lo, err);
}

/* A 32-bit digest of the identity, to name its member Lease. */
static uint32_t digest(const char *s) {
  uint32_t h = 2166136261u;
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 16777619u;
  return h;
}

static void on_taken(struct kcm_leader *l);
static void member_lost(struct kcm_leader *l);
static void on_lost(struct kcm_leader *l);
static void on_released(struct kcm_leader *l);

int kcm_shards_init(struct kcm_shards *s, uv_loop_t *loop, struct kcm_client *client,
                    const struct kcm_shards_options *o) {
  struct kcm_leader_options lo = {o->ns, o->prefix, o->identity, o->lease_ms, o->renew_ms,
                                  o->retry_ms, o->limiter};
  char name[128];
  const char *why;
  int err;

  if (kcm_shards_check(o, &why))
    return KCM_EINVAL;
  memset(s, 0, sizeof(*s));
  if (!(s->shard = calloc(o->count, sizeof(*s->shard))))
    return KCM_ENOMEM;
  for (uint32_t i = 0; i < o->count; i++) {
    s->shard[i].owner = s;
    s->shard[i].index = i;
  }
  s->loop = loop;
  s->client = client;
  snprintf(s->ns, sizeof(s->ns), "%s", o->ns);
  snprintf(s->prefix, sizeof(s->prefix), "%s", o->prefix);
  s->count = o->count;
  s->lease_ms = o->lease_ms;
  s->renew_ms = o->renew_ms;
  s->retry_ms = o->retry_ms;
  s->limiter = o->limiter;
  s->live = 1;
  /* The member Lease's elector makes the identity the shards' use. */
  lo.name = "member";
  if ((err = kcm_leader_init(&s->member, loop, client, &lo))) {
    free(s->shard);
    return err;
  }
  snprintf(name, sizeof(name), "%s-member-%08x", s->prefix, digest(s->member.identity));
  snprintf(s->member.name, sizeof(s->member.name), "%s", name);
  s->member.data = s;
  s->member.on_lost = member_lost;
  uv_timer_init(loop, &s->timer);
  s->timer.data = s;
  return 0;
}

/* --- shards ---------------------------------------------------------------------------------- */

static bool is_free(const struct kcm_shards *s, const struct kcm_lease_record *r,
                    uint64_t seen_at, uint64_t now) {
  return !r->exists || !r->holder[0] ||
         now >= seen_at + (uint64_t)(r->duration_s > 0 ? r->duration_s : 1) * 1000;
}

static int shard_elector(struct kcm_shards *s, struct kcm_shard *sh) {
  struct kcm_leader_options lo = {s->ns, NULL, s->member.identity, s->lease_ms, s->renew_ms,
                                  s->retry_ms, s->limiter};
  char name[128];
  int err;
  if (sh->inited)
    return 0;
  snprintf(name, sizeof(name), "%s-shard-%02u", s->prefix, sh->index);
  lo.name = name;
  if ((err = kcm_leader_init(&sh->elector, s->loop, s->client, &lo)))
    return err;
  sh->elector.on_started = on_taken;
  sh->elector.on_lost = on_lost;
  sh->elector.on_released = on_released;
  sh->elector.data = sh;
  sh->inited = true;
  return 0;
}

/* Try to take a shard the listing saw free: its elector starts from what
 * was listed, so an expired Lease is taken at once. */
static void take(struct kcm_shards *s, struct kcm_shard *sh) {
  if (shard_elector(s, sh))
    return;
  sh->trying = true;
  sh->elector.observed = sh->seen;
  sh->elector.observed_at = sh->seen_at;
  kcm_leader_start(&sh->elector);
}

static void drain(struct kcm_shards *s, struct kcm_shard *sh) {
  sh->draining = true;
  kcm_info("giving up a shard shard=%u share=%u live=%u", sh->index, s->share, s->live);
}

/* Release the draining shards none of whose syncs is in flight. */
static void release_drained(struct kcm_shards *s) {
  uint32_t i;
  for (i = 0; i < s->count; i++) {
    struct kcm_shard *sh = &s->shard[i];
    if (sh->draining && sh->held && !sh->elector.stopping &&
        (!s->syncing || !s->syncing(s, i)))
      kcm_leader_release(&sh->elector);
  }
}

static void on_taken(struct kcm_leader *l) {
  struct kcm_shard *sh = l->data;
  struct kcm_shards *s = sh->owner;
  sh->held = true;
  sh->trying = false;
  s->stats.taken++;
  if (s->on_taken)
    s->on_taken(s, sh->index);
}

/* The member Lease lost (the API server out of reach past the renew
 * deadline): counted out by the others, it takes no shard until it holds
 * its member Lease again, and tries for it at once. */
static void member_lost(struct kcm_leader *l) {
  struct kcm_shards *s = l->data;
  s->member_listed = false;
  if (!s->stopping)
    kcm_leader_start(l);
}

static void on_lost(struct kcm_leader *l) {
  struct kcm_shard *sh = l->data;
  struct kcm_shards *s = sh->owner;
  sh->held = false;
  sh->draining = false;
  s->stats.lost++;
  if (s->on_given_up)
    s->on_given_up(s, sh->index);
  kcm_leader_release(l); /* stop trying; the next listing decides again */
}

/* Whether an elector of a shard not held is still trying. */
static bool moving(const struct kcm_shards *s) {
  uint32_t i;
  for (i = 0; i < s->count; i++)
    if (s->shard[i].trying)
      return true;
  return false;
}

static void on_released(struct kcm_leader *l) {
  struct kcm_shard *sh = l->data;
  struct kcm_shards *s = sh->owner;
  bool had = sh->held || sh->trying; /* objects of it may be cached */
  if (sh->held && sh->draining)
    s->stats.released++;
  sh->held = false;
  sh->trying = false;
  sh->draining = false;
  if (had && s->on_given_up)
    s->on_given_up(s, sh->index);
  if (s->stopping && s->on_stopped && !kcm_shards_held(s) && !moving(s))
    kcm_leader_release(&s->member);
}

/* --- the listing ------------------------------------------------------------------------------ */

/* "member-" and eight lower-case hex digits, as members name their Lease. */
static bool is_member_name(const char *name) {
  size_t i;
  if (strncmp(name, "member-", 7) || strlen(name) != 15)
    return false;
  for (i = 7; i < 15; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
      return false;
  return true;
}

/* Keep what the listing shows of one Lease: a shard's (returns its index)
 * or a member's (returns -1, as for any other Lease). */
static long saw(struct kcm_shards *s, const char *name, const struct kcm_lease_record *r,
                struct kcm_shards_peer **peers, size_t *npeers, uint64_t now) {
  size_t plen = strlen(s->prefix), i;
  struct kcm_shards_peer *p, *grown;
  char *end;
  unsigned long k;

  if (strncmp(name, s->prefix, plen) || name[plen] != '-')
    return -1;
  name += plen + 1;
  if (!strncmp(name, "shard-", 6)) {
    char exact[32];
    /* only the name this instance would give the shard: not "shard-003",
     * "shard-+3" or "shard- 3" beside "shard-03" */
    k = strtoul(name + 6, &end, 10);
    if (*end || end == name + 6 || k >= s->count ||
        (snprintf(exact, sizeof(exact), "shard-%02lu", k), strcmp(exact, name)))
      return -1;
    if (memcmp(&s->shard[k].seen, r, sizeof(*r)) || !s->shard[k].seen_at) {
      s->shard[k].seen = *r;
      s->shard[k].seen_at = now;
    }
    return (long)k;
  }
  if (!strcmp(name - plen - 1, s->member.name)) {
    s->member_listed = s->member.leading;
    return -1;
  }
  if (!is_member_name(name))
    return -1;
  for (i = 0, p = NULL; i < s->npeers && !p; i++)
    if (!strcmp(s->peers[i].name, name - plen - 1))
      p = &s->peers[i];
  if (!(grown = realloc(*peers, (*npeers + 1) * sizeof(**peers))))
    return -1;
  *peers = grown;
  grown = &grown[(*npeers)++];
  snprintf(grown->name, sizeof(grown->name), "%s", name - plen - 1);
  grown->seen = *r;
  grown->seen_at = p && !memcmp(&p->seen, r, sizeof(*r)) ? p->seen_at : now;
  return -1;
}

/* The shards' Leases seen absent when the listing has none of them. */
static void forget_unlisted(struct kcm_shards *s, const bool *listed, uint64_t now) {
  uint32_t i;
  for (i = 0; i < s->count; i++)
    if (!listed[i] && s->shard[i].seen.exists) {
      memset(&s->shard[i].seen, 0, sizeof(s->shard[i].seen));
      s->shard[i].seen_at = now;
    }
}

struct listing {
  struct kcm_shards *s;
  struct kcm_shards_peer *peers;
  size_t npeers;
  bool *listed;
  uint64_t now;
};

static void listed_lease(const char *name, const struct kcm_lease_record *r, void *data) {
  struct listing *l = data;
  long k = saw(l->s, name, r, &l->peers, &l->npeers, l->now);
  if (k >= 0)
    l->listed[k] = true;
}

static int take_listing(struct kcm_shards *s, const char *body, uint64_t now) {
  struct listing l = {s, NULL, 0, calloc(s->count, sizeof(bool)), now};

  if (!l.listed || kcm_leader_each_listed(body, strlen(body), listed_lease, &l)) {
    free(l.listed);
    free(l.peers);
    return KCM_EINVAL;
  }
  forget_unlisted(s, l.listed, now);
  free(l.listed);
  free(s->peers);
  s->peers = l.peers;
  s->npeers = l.npeers;
  return 0;
}

/* Whether a Lease's renewTime is older than its duration by the wall
 * clock (second precision). Only for counting members: a live one renews
 * every retry period, so only a clock skewed by about the lease duration
 * counts it out; a shard is taken by the local clock alone, as leader
 * election takes a lease. */
static bool unrenewed(const struct kcm_lease_record *r, int64_t wall) {
  int64_t renewed;
  return r->renew[0] && !kcm_api_parse_time(r->renew, &renewed) &&
         wall > renewed + (r->duration_s > 0 ? r->duration_s : 1) + 1;
}

/* Whether a peer's member Lease counts it live. */
static bool peer_live(const struct kcm_shards *s, const struct kcm_shards_peer *p, uint64_t now,
                      int64_t wall) {
  return !is_free(s, &p->seen, p->seen_at, now) && !unrenewed(&p->seen, wall);
}

/* Instances live: itself and each member Lease held and renewed within
 * its duration, both as listed and as its renewTime says: a joining
 * instance would otherwise count a dead one for a lease duration, and
 * leave shards the others drained untaken meanwhile. *rank: how many of
 * them have an identity that sorts before its own. */
static uint32_t count_live(const struct kcm_shards *s, uint64_t now, uint32_t *rank) {
  int64_t wall = (int64_t)time(NULL);
  uint32_t live = 1;
  size_t i;
  *rank = 0;
  for (i = 0; i < s->npeers; i++)
    if (peer_live(s, &s->peers[i], now, wall)) {
      live++;
      *rank += strcmp(s->peers[i].seen.holder, s->member.identity) < 0;
    }
  return live;
}

/* One round's moves. */
static void move(struct kcm_shards *s, uint64_t now) {
  struct kcm_shards_seen seen[KCM_SHARDS_MAX];
  enum kcm_shards_move moves[KCM_SHARDS_MAX];
  uint32_t i, rank;

  for (i = 0; i < s->count; i++) {
    struct kcm_shard *sh = &s->shard[i];
    bool free_now = is_free(s, &sh->seen, sh->seen_at, now);
    /* Trying for a shard another live instance holds: stop, and count it
     * out of this round already, so that a race lost costs no round. */
    bool lost = sh->trying && !free_now && strcmp(sh->seen.holder, s->member.identity);
    if (free_now && !sh->held && s->listed_at)
      sh->unowned_ms += now - s->listed_at;
    seen[i] = (struct kcm_shards_seen){sh->held, (sh->trying && !lost) || sh->draining,
                                       free_now};
    if (lost)
      kcm_leader_release(&sh->elector);
  }
  s->live = count_live(s, now, &rank);
  s->share = kcm_shards_plan(seen, s->count, s->live, rank, moves);
  for (i = 0; i < s->count; i++) {
    /* Not before its own member Lease is listed: the others count it
     * from then on, and it counts those that started with it. */
    if (moves[i] == KCM_SHARDS_TAKE && s->member_listed)
      take(s, &s->shard[i]);
    else if (moves[i] == KCM_SHARDS_DRAIN)
      drain(s, &s->shard[i]);
  }
  release_drained(s);
}

static void schedule(struct kcm_shards *s);

static void on_listed(const struct kcm_client_response *resp, void *data) {
  struct kcm_shards *s = data;
  uint64_t now = uv_now(s->loop);
  s->listing = false;
  if (resp->err == KCM_ECANCELED || s->stopping)
    return;
  if (resp->err || take_listing(s, resp->body, now))
    kcm_v(2, "cannot list the shards' Leases namespace=\"%s\" err=\"%s\"", s->ns,
          resp->err ? resp->message : "malformed list");
  else {
    move(s, now);
    s->listed_at = now;
  }
  schedule(s);
}

static void list(struct kcm_shards *s) {
  struct kcm_client_request_options o = {0};
  char path[KCM_CLIENT_PATH_MAX];
  if (s->listing || s->stopping)
    return;
  if (kcm_client_path(path, sizeof(path), "/apis/coordination.k8s.io/v1", s->ns, "leases", NULL,
                      NULL)) {
    schedule(s);
    return;
  }
  o.method = "GET";
  o.path = path;
  o.timeout_ms = (long)s->renew_ms;
  o.done = on_listed;
  o.data = s;
  o.limiter = s->limiter;
  if (kcm_client_request(s->client, &o, NULL) == 0)
    s->listing = true;
  else
    schedule(s);
}

/* While stopping: how often the shards still draining are looked at. */
#define DRAIN_POLL_MS 50

static void on_timer(uv_timer_t *t) {
  struct kcm_shards *s = t->data;
  uint32_t i;
  release_drained(s);
  if (!s->stopping) {
    list(s);
    return;
  }
  for (i = 0; i < s->count; i++)
    if (s->shard[i].draining && s->shard[i].held && !s->shard[i].elector.stopping) {
      uv_timer_start(&s->timer, on_timer, DRAIN_POLL_MS, 0);
      return;
    }
}

/* Milliseconds from now to when a Lease held by another, as last listed,
 * expires (0: not held, or expired); UINT64_MAX for its own. */
static uint64_t expires_in(const struct kcm_shards *s, const struct kcm_lease_record *r,
                           uint64_t seen_at, uint64_t now) {
  uint64_t at = seen_at + (uint64_t)(r->duration_s > 0 ? r->duration_s : 1) * 1000;
  if (r->exists && r->holder[0] && !strcmp(r->holder, s->member.identity))
    return UINT64_MAX;
  return is_free(s, r, seen_at, now) ? 0 : at - now;
}

/* The next round: a retry period on, or as soon as another's Lease expires
 * if that comes first, so that a vanished instance's shards are taken one
 * lease duration after their last renewal was listed, not up to a retry
 * period later. */
static void schedule(struct kcm_shards *s) {
  uint64_t now = uv_now(s->loop), next = s->retry_ms, in;
  uint32_t i;
  size_t k;
  if (s->stopping)
    return;
  for (i = 0; i < s->count; i++)
    if ((in = expires_in(s, &s->shard[i].seen, s->shard[i].seen_at, now)) && in < next)
      next = in;
  for (k = 0; k < s->npeers; k++)
    if ((in = expires_in(s, &s->peers[k].seen, s->peers[k].seen_at, now)) && in < next)
      next = in;
  uv_timer_start(&s->timer, on_timer, next, 0);
}

void kcm_shards_start(struct kcm_shards *s) {
  kcm_info("sharing the work by namespace shards=%u leases=\"%s/%s-shard-*\" identity=\"%s\"",
           s->count, s->ns, s->prefix, s->member.identity);
  kcm_leader_start(&s->member);
  list(s);
}

bool kcm_shards_owns(const struct kcm_shards *s, const char *ns, size_t n) {
  const struct kcm_shard *sh = &s->shard[kcm_shards_of(ns, n, s->count)];
  return sh->held && !sh->draining;
}

bool kcm_shards_keeps(const struct kcm_shards *s, const char *ns, size_t n) {
  const struct kcm_shard *sh = &s->shard[kcm_shards_of(ns, n, s->count)];
  return sh->held || sh->trying;
}

uint32_t kcm_shards_held(const struct kcm_shards *s) {
  uint32_t i, n = 0;
  for (i = 0; i < s->count; i++)
    n += s->shard[i].held;
  return n;
}

bool kcm_shards_ready(const struct kcm_shards *s) {
  uint64_t now = uv_now(s->loop);
  uint32_t i;
  if (!s->listed_at)
    return false;
  if (kcm_shards_held(s) >= s->share)
    return true;
  for (i = 0; i < s->count; i++)
    if (!s->shard[i].held && is_free(s, &s->shard[i].seen, s->shard[i].seen_at, now))
      return false;
  return true;
}

/* --- stopping and metrics ------------------------------------------------------------------- */

static void member_released(struct kcm_leader *l) {
  struct kcm_shards *s = l->data;
  void (*cb)(struct kcm_shards *) = s->on_stopped;
  s->on_stopped = NULL;
  if (cb)
    cb(s);
}

void kcm_shards_stop(struct kcm_shards *s, void (*on_stopped)(struct kcm_shards *s)) {
  uint32_t i;
  bool waiting = false;
  if (s->stopping)
    return;
  s->stopping = true;
  s->on_stopped = on_stopped;
  s->member.on_released = member_released;
  uv_timer_stop(&s->timer);
  for (i = 0; i < s->count; i++) {
    struct kcm_shard *sh = &s->shard[i];
    if (sh->held) {
      sh->draining = true;
      waiting = true;
    } else if (sh->trying) {
      kcm_leader_release(&sh->elector); /* may answer later */
    }
  }
  if (waiting)
    uv_timer_start(&s->timer, on_timer, 0, 0);
  else if (!moving(s))
    kcm_leader_release(&s->member);
  /* else the last shard's on_released releases the member Lease */
}

int kcm_shards_metrics(const struct kcm_shards *s, struct kcm_buf *out) {
  static const char *const moves[] = {"taken", "released", "lost"};
  const uint64_t counts[] = {s->stats.taken, s->stats.released, s->stats.lost};
  const struct {
    const char *name, *help;
    uint32_t value;
  } gauges[] = {
      {"kcm_shards_held", "Shards whose Lease this instance holds.", kcm_shards_held(s)},
      {"kcm_shards_share", "Shards this instance aims to hold.", s->share},
      {"kcm_shards_live_instances", "Instances whose member Lease is live, this one included.",
       s->live},
      {"kcm_shards_server_selected",
       "1 when the API server sends only this instance's shards (shard selectors), 0 when "
       "kcm reads every namespace's objects and drops those of other shards.",
       0},
  };
  char labels[128];
  uint32_t i;
  int err = 0;

  for (i = 0; !err && i < sizeof(gauges) / sizeof(gauges[0]); i++)
    if (!(err = kcm_metrics_family(out, gauges[i].name, "gauge", gauges[i].help)))
      err = kcm_metrics_sample(out, gauges[i].name, "", gauges[i].value);
  if (!err)
    err = kcm_metrics_family(out, "kcm_shard_moves_total", "counter",
                             "Shards taken, released after draining, and lost.");
  for (i = 0; !err && i < 3; i++) {
    const char *l[] = {"move", moves[i], NULL};
    if (!(err = kcm_metrics_labels(labels, sizeof(labels), l)))
      err = kcm_metrics_sample(out, "kcm_shard_moves_total", labels, counts[i]);
  }
  if (!err)
    err = kcm_metrics_family(out, "kcm_shard_unowned_seconds_total", "counter",
                             "Time each shard was listed without an owner.");
  for (i = 0; !err && i < s->count; i++) {
    char shard[16];
    const char *l[] = {"shard", shard, NULL};
    snprintf(shard, sizeof(shard), "%02u", i);
    if (!(err = kcm_metrics_labels(labels, sizeof(labels), l)))
      err = kcm_metrics_sample(out, "kcm_shard_unowned_seconds_total", labels,
                               (double)s->shard[i].unowned_ms / 1000.0);
  }
  return err;
}

void kcm_shards_close(struct kcm_shards *s) {
  uint32_t i;
  if (s->closed)
    return;
  s->closed = true;
  uv_timer_stop(&s->timer);
  uv_close((uv_handle_t *)&s->timer, NULL);
  for (i = 0; i < s->count; i++)
    if (s->shard[i].inited)
      kcm_leader_close(&s->shard[i].elector);
  kcm_leader_close(&s->member);
}

void kcm_shards_release(struct kcm_shards *s) {
  free(s->shard);
  free(s->peers);
  s->shard = NULL;
  s->peers = NULL;
}
