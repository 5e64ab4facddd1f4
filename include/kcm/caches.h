/*
 * caches — the informers of the kinds the enabled controllers read, as
 * one: set up, started, watched until every one has synced, stopped.
 *
 * Each informer resyncs at a period drawn in [min, 2 min), as
 * kube-controller-manager draws its informers' periods, and lists and
 * watches in protobuf and with streamed lists unless the flags say not.
 * Everything runs on the loop's thread.
 */
#ifndef KCM_CACHES_H
#define KCM_CACHES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/api.h"
#include "kcm/buf.h"
#include "kcm/client.h"
#include "kcm/informer.h"
#include "kcm/intern.h"
#include "kcm/options.h"

struct kcm_caches {
  uv_loop_t *loop;
  struct kcm_informer informers[KCM_KIND_COUNT]; /* by kind; those of `kinds` set up */
  unsigned kinds;           /* 1 << enum kcm_kind of each informer set up */
  int open;                 /* informers not yet closed, while stopping */
  uv_timer_t check;         /* until every informer has synced */
  uint64_t started;         /* loop ms at kcm_caches_start() */
  bool synced;
  void (*on_synced)(struct kcm_caches *c);
  void (*on_closed)(struct kcm_caches *c);
  void *data;               /* free for the owner's use */
};

/* Set up the informers of kinds on client (borrowed, as pool; both must
 * outlive the caches). Logs and returns an error of kcm_error. */
int kcm_caches_init(struct kcm_caches *c, uv_loop_t *loop, struct kcm_client *client,
                    struct kcm_intern *pool, unsigned kinds, const struct kcm_options *opt);
/* Start listing and watching; on_synced runs once every informer has
 * synced, after logging "caches synced" with the objects each holds. */
void kcm_caches_start(struct kcm_caches *c, void (*on_synced)(struct kcm_caches *c));
/* Stop every informer; on_closed (may be NULL) runs once all are closed
 * (at once when none was set up). */
void kcm_caches_stop(struct kcm_caches *c, void (*on_closed)(struct kcm_caches *c));
/* Append kcm_cache_unreadable_objects_total{kind}. 0 or KCM_ENOMEM. */
int kcm_caches_metrics(const struct kcm_caches *c, struct kcm_buf *out);
/* Drop the caches, after on_closed. */
void kcm_caches_release(struct kcm_caches *c);

#endif
