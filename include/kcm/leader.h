/*
 * leader — leader election on a coordination.k8s.io/v1 Lease, as client-go's
 * leaderelection package does it.
 *
 * Candidates read the Lease every retry period (with up to 1.2× jitter) and
 * take it when it is missing, released (empty holder) or not renewed for its
 * leaseDurationSeconds as measured on the local clock since its content last
 * changed: only local clocks are trusted, so clock skew between candidates
 * does not matter. The leader renews every retry period, updating straight
 * from the Lease it last wrote and reading it again only after a failure; if
 * no renewal succeeds for the renew deadline it has lost the lease.
 * Releasing writes an empty holder with leaseDurationSeconds 1, so another
 * candidate takes over at its next try.
 *
 * The fields are written as client-go writes them: holderIdentity,
 * leaseDurationSeconds, acquireTime and renewTime (RFC 3339 with
 * microseconds), leaseTransitions (incremented when the holder changes).
 */
#ifndef KCM_LEADER_H
#define KCM_LEADER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/buf.h"
#include "kcm/client.h"

/* --- the record (pure) -------------------------------------------------------------------- */

struct kcm_lease_record {
  bool exists;
  char holder[256];
  int32_t duration_s;
  char acquire[40]; /* as written, "" when unset */
  char renew[40];
  int32_t transitions;
};

enum kcm_leader_step {
  KCM_LEADER_WAIT,   /* someone else holds it and it has not expired */
  KCM_LEADER_CREATE, /* there is no Lease: create it with *next */
  KCM_LEADER_UPDATE, /* take or renew it: update it to *next */
};

/* Each Lease of a LeaseList's text body[0..len), with its name and record,
 * to each() (an item without a name is passed over). 0, or KCM_EINVAL when
 * the body is not a list. */
int kcm_leader_each_listed(const char *body, size_t len,
                           void (*each)(const char *name, const struct kcm_lease_record *r,
                                        void *data),
                           void *data);

/* --- the elector ----------------------------------------------------------------------------- */

struct kcm_leader_options {
  const char *ns;        /* Lease namespace */
  const char *name;      /* Lease name */
  const char *identity;  /* NULL: "<hostname>_<random UUID>" */
  uint64_t lease_ms;     /* --leader-elect-lease-duration */
  uint64_t renew_ms;     /* --leader-elect-renew-deadline */
  uint64_t retry_ms;     /* --leader-elect-retry-period */
  unsigned limiter;      /* client rate limiter for the Lease requests */
};

struct kcm_leader;
typedef void (*kcm_leader_cb)(struct kcm_leader *l);

struct kcm_leader {
  uv_loop_t *loop;
  struct kcm_client *client;    /* borrowed */
  char ns[64], name[254], identity[320];
  uint64_t lease_ms, renew_ms, retry_ms;
  unsigned limiter;
  uv_timer_t timer;
  char *lease;                  /* owned: the Lease's JSON as last read, or as
                                   kcm made it to create it; NULL: none */
  struct kcm_lease_record observed;
  uint64_t observed_at;         /* loop ms when `observed` was first seen */
  uint64_t renewed_at;          /* loop ms of the last successful acquire or renew */
  bool leading;
  bool busy;                    /* a request is in flight */
  bool stopping;
  bool closed;
  uint64_t transitions;         /* times this process became leader */
  kcm_leader_cb on_started;     /* became leader */
  kcm_leader_cb on_lost;        /* could not renew within the deadline */
  kcm_leader_cb on_released;    /* kcm_leader_release() finished */
  void *data;
};

/* Validate the options (lease > renew > 1.2 × retry, all > 0; names set,
 * within the server's lengths and fit for a URL path);
 * returns 0, or KCM_EINVAL with a message in err (static). */
int kcm_leader_check(const struct kcm_leader_options *o, const char **err);
/* Set up; the client is borrowed and must outlive the elector. */
int kcm_leader_init(struct kcm_leader *l, uv_loop_t *loop, struct kcm_client *client,
                    const struct kcm_leader_options *o);
/* Start trying to acquire; again after kcm_leader_release() has finished. */
void kcm_leader_start(struct kcm_leader *l);
/* Stop trying; when leading, write the releasing record first. on_released
 * runs once, from the loop, when done. */
void kcm_leader_release(struct kcm_leader *l);
/* False when this process leads but has not renewed for lease duration +
 * tolerance: the process is wedged and should be restarted. */
bool kcm_leader_healthy(const struct kcm_leader *l, uint64_t now_ms, uint64_t tolerance_ms);
/* The gauge leader_election_master_status of l's Lease, in the text
 * format; without leader election (l NULL), 1 for a Lease named "kcm". 0
 * or an error of kcm_metrics. */
int kcm_leader_metrics(const struct kcm_leader *l, struct kcm_buf *out);
/* Close the timer and free what it holds (run the loop afterwards). */
void kcm_leader_close(struct kcm_leader *l);

#endif
