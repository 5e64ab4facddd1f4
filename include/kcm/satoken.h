/*
 * satoken — the token of a controller's service account, as
 * kube-controller-manager's --use-service-account-credentials gets one:
 * requested with kcm's own credentials through the TokenRequest API
 * (POST /api/v1/namespaces/NS/serviceaccounts/NAME/token, for an hour),
 * the ServiceAccount created when it is missing (once between two tokens), and requested again
 * once 80% of its life has passed (client-go's dynamic controller client
 * builder keeps the same leeway), or, after a failure, again with backoff
 * (1 s doubling to 60 s) while the old token, if any, stays in use. A 401
 * answering a request made with the current token asks for a new one at
 * once (client-go's token source is reset by a 401 the same way): the
 * account was deleted and made again, or the signing key rotated.
 *
 * The token is `bearer.token` (NULL until the first one): a writer sending
 * as the controller hands `&bearer` to the client, which reads the token at
 * each attempt. Everything runs on the loop.
 */
#ifndef KCM_SATOKEN_H
#define KCM_SATOKEN_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/client.h"

#define KCM_SATOKEN_SECONDS 3600

struct kcm_satoken {
  uv_loop_t *loop;
  struct kcm_client *client; /* borrowed: kcm's own credentials */
  unsigned limiter;
  char ns[64];
  char name[254];
  struct kcm_client_bearer bearer; /* its token owned; NULL until the first one */
  uv_timer_t timer;          /* the next request */
  uint64_t backoff_ms;       /* the wait after the next failure */
  int32_t seconds;           /* the life asked for (default KCM_SATOKEN_SECONDS) */
  bool started, stopping;
  bool made_account;         /* since the last token */
  bool asking;               /* a request of ours is in flight */
  void (*on_ready)(struct kcm_satoken *t); /* once, with the first token */
  void (*on_closed)(struct kcm_satoken *t);
  void *data;                /* free for the owner's use */
  struct {
    uint64_t issued;
    uint64_t failures;
    uint64_t refused;        /* 401s answering the current token */
    uint64_t accounts_made;
  } stats;
};

/* ns/name: the ServiceAccount. The client must outlive the token source.
 * Returns 0 or KCM_EINVAL (a name too long). */
int kcm_satoken_init(struct kcm_satoken *t, uv_loop_t *loop, struct kcm_client *client,
                     unsigned limiter, const char *ns, const char *name);
/* Request the first token (once; later calls do nothing). */
void kcm_satoken_start(struct kcm_satoken *t, void (*on_ready)(struct kcm_satoken *t));
/* Stop requesting; on_closed (may be NULL) runs from the loop once the
 * timer is closed. A request in flight is ended by closing the client. */
void kcm_satoken_stop(struct kcm_satoken *t, void (*on_closed)(struct kcm_satoken *t));
/* Free the token, after on_closed. */
void kcm_satoken_release(struct kcm_satoken *t);

#endif
