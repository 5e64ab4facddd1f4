/*
 * campaign/campaign.c — leader election or shards, from the flags. See
 * include/kcm/campaign.h.
 */
#include "kcm/campaign.h"

#include <stddef.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/log.h"

const char *kcm_campaign_lease_namespace(const struct kcm_options *f) {
  if (f->lease_namespace)
    return f->lease_namespace;
  return f->shards ? KCM_CAMPAIGN_SHARDS_NAMESPACE : KCM_CAMPAIGN_LEADER_NAMESPACE;
}

static struct kcm_leader_options leader_options(const struct kcm_options *f) {
  return (struct kcm_leader_options){kcm_campaign_lease_namespace(f), f->lease_name, NULL,
                                     f->lease_ms, f->renew_ms, f->retry_ms,
                                     KCM_CLIENT_LIMITER_LEASES};
}

static struct kcm_shards_options shards_options(const struct kcm_options *f) {
  return (struct kcm_shards_options){(uint32_t)f->shards, kcm_campaign_lease_namespace(f),
                                     f->lease_name, NULL, f->lease_ms, f->renew_ms,
                                     f->retry_ms, KCM_CLIENT_LIMITER_LEASES};
}

const char *kcm_campaign_check(const struct kcm_options *f) {
  struct kcm_leader_options lo = leader_options(f);
  struct kcm_shards_options so = shards_options(f);
  const char *why = NULL;
  if (f->shards)
    kcm_shards_check(&so, &why);
  else if (f->leader_elect)
    kcm_leader_check(&lo, &why);
  return why;
}

static void started(struct kcm_leader *l) {
  struct kcm_campaign *c = l->data;
  if (c->on_active)
    c->on_active(c);
}

static void lost(struct kcm_leader *l) {
  struct kcm_campaign *c = l->data;
  kcm_error("leaderelection lost lease=\"%s/%s\"", l->ns, l->name);
  if (c->on_lost)
    c->on_lost(c);
}

static void stopped(struct kcm_campaign *c) {
  if (c->on_stopped)
    c->on_stopped(c);
}

static void leader_released(struct kcm_leader *l) {
  kcm_leader_close(l);
  stopped(l->data);
}

static void shards_stopped(struct kcm_shards *s) {
  struct kcm_campaign *c = (struct kcm_campaign *)(void *)((char *)s -
                                                           offsetof(struct kcm_campaign, shards));
  kcm_shards_close(s);
  stopped(c);
}

int kcm_campaign_init(struct kcm_campaign *c, uv_loop_t *loop, struct kcm_client *client,
                      const struct kcm_options *f) {
  struct kcm_leader_options lo = leader_options(f);
  struct kcm_shards_options so = shards_options(f);
  int err = 0;

  memset(c, 0, sizeof(*c));
  c->mode = f->shadow ? KCM_CAMPAIGN_ALONE
            : f->shards ? KCM_CAMPAIGN_SHARDS
            : f->leader_elect ? KCM_CAMPAIGN_LEADER
                              : KCM_CAMPAIGN_ALONE;
  if (c->mode == KCM_CAMPAIGN_SHARDS && (err = kcm_shards_init(&c->shards, loop, client, &so)))
    kcm_error("cannot set up the shards err=\"%s\"", kcm_strerror(err));
  if (c->mode == KCM_CAMPAIGN_LEADER) {
    if ((err = kcm_leader_init(&c->leader, loop, client, &lo)))
      kcm_error("cannot set up leader election err=\"%s\"", kcm_strerror(err));
    c->leader.data = c;
    c->leader.on_started = started;
    c->leader.on_lost = lost;
    c->leader.on_released = leader_released;
  }
  return err;
}

struct kcm_shards *kcm_campaign_shards(struct kcm_campaign *c) {
  return c->mode == KCM_CAMPAIGN_SHARDS ? &c->shards : NULL;
}

void kcm_campaign_start(struct kcm_campaign *c) {
  if (c->mode == KCM_CAMPAIGN_LEADER)
    kcm_leader_start(&c->leader);
  else if (c->mode == KCM_CAMPAIGN_SHARDS)
    kcm_shards_start(&c->shards);
}

bool kcm_campaign_active(const struct kcm_campaign *c) {
  return c->mode != KCM_CAMPAIGN_LEADER || c->leader.leading;
}

bool kcm_campaign_healthy(const struct kcm_campaign *c, uint64_t now_ms, uint64_t tolerance_ms) {
  return c->mode != KCM_CAMPAIGN_LEADER || kcm_leader_healthy(&c->leader, now_ms, tolerance_ms);
}

bool kcm_campaign_ready(const struct kcm_campaign *c) {
  return c->mode != KCM_CAMPAIGN_SHARDS || kcm_shards_ready(&c->shards);
}

void kcm_campaign_stop(struct kcm_campaign *c) {
  if (c->mode == KCM_CAMPAIGN_LEADER) {
    kcm_leader_release(&c->leader);
  } else if (c->mode == KCM_CAMPAIGN_SHARDS) {
    kcm_shards_stop(&c->shards, shards_stopped);
  } else {
    stopped(c);
  }
}

/* With shards no instance leads: leader_election_master_status is left out,
 * as the alerts on it would count every instance a leader. */
int kcm_campaign_metrics(const struct kcm_campaign *c, struct kcm_buf *out) {
  if (c->mode == KCM_CAMPAIGN_SHARDS)
    return kcm_shards_metrics(&c->shards, out);
  return kcm_leader_metrics(c->mode == KCM_CAMPAIGN_LEADER ? &c->leader : NULL, out);
}

void kcm_campaign_release(struct kcm_campaign *c) {
  if (c->mode == KCM_CAMPAIGN_SHARDS)
    kcm_shards_release(&c->shards);
}
