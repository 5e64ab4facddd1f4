/*
 * campaign — what lets this process act, from the flags: nothing to wait
 * for (--leader-elect=false, or --shadow, which writes nothing), the
 * leader's Lease (--leader-elect, the default: a standby sends no write),
 * or with --shards the shards' Leases, every instance acting in the
 * namespaces of the shards it holds.
 */
#ifndef KCM_CAMPAIGN_H
#define KCM_CAMPAIGN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/buf.h"
#include "kcm/client.h"
#include "kcm/leader.h"
#include "kcm/options.h"
#include "kcm/shards.h"

enum kcm_campaign_mode {
  KCM_CAMPAIGN_ALONE,  /* acts from the start */
  KCM_CAMPAIGN_LEADER, /* acts while leading */
  KCM_CAMPAIGN_SHARDS, /* acts in the namespaces of the shards it holds */
};

struct kcm_campaign {
  enum kcm_campaign_mode mode;
  struct kcm_leader leader;  /* LEADER */
  struct kcm_shards shards;  /* SHARDS */
  void (*on_active)(struct kcm_campaign *c);  /* LEADER: it leads */
  void (*on_lost)(struct kcm_campaign *c);    /* LEADER: another may lead by now */
  void (*on_stopped)(struct kcm_campaign *c); /* see kcm_campaign_stop() */
  void *data;
};

/* Where the Leases are without --leader-elect-resource-namespace: the
 * leader's in kube-system, as kube-controller-manager's; the shards' in a
 * namespace of their own, where only kcm writes Leases (see
 * kcm_shards_check). */
#define KCM_CAMPAIGN_LEADER_NAMESPACE "kube-system"
#define KCM_CAMPAIGN_SHARDS_NAMESPACE "kcm-shards"
const char *kcm_campaign_lease_namespace(const struct kcm_options *f);
/* Whether the flags' leader election or shard settings are wrong: NULL,
 * or what is wrong (static). */
const char *kcm_campaign_check(const struct kcm_options *f);
/* Set up from the flags; the client is borrowed and must outlive it.
 * 0, or an error (logged). */
int kcm_campaign_init(struct kcm_campaign *c, uv_loop_t *loop, struct kcm_client *client,
                      const struct kcm_options *f);
/* The shards' coordinator (SHARDS), or NULL. */
struct kcm_shards *kcm_campaign_shards(struct kcm_campaign *c);
void kcm_campaign_start(struct kcm_campaign *c);
/* Whether it may act: always but while LEADER and not leading. */
bool kcm_campaign_active(const struct kcm_campaign *c);
/* /healthz: false when leading but not renewed for the lease duration
 * and tolerance_ms. /readyz: false while SHARDS short of its share. */
bool kcm_campaign_healthy(const struct kcm_campaign *c, uint64_t now_ms, uint64_t tolerance_ms);
bool kcm_campaign_ready(const struct kcm_campaign *c);
/* Give up what it holds (the leader's Lease; the shards, then the member
 * Lease); on_stopped runs once, from the loop, when done. */
void kcm_campaign_stop(struct kcm_campaign *c);
/* leader_election_master_status, and the shards' metrics with SHARDS. */
int kcm_campaign_metrics(const struct kcm_campaign *c, struct kcm_buf *out);
/* Free what it holds once the loop has run out. */
void kcm_campaign_release(struct kcm_campaign *c);

#endif
