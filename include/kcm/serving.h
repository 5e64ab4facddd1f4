/*
 * serving — kcm's HTTP endpoints: /healthz, /livez, /readyz, /metrics and
 * /debug/shadow, on the listeners the flags turn on.
 *
 * --secure-port serves HTTPS as kube-controller-manager does: every
 * request authenticated (TokenReview, or a client certificate of
 * --client-ca-file) and authorized (SubjectAccessReview) unless its path
 * is always allowed; the certificate files are read again every minute.
 * --health-probe-bind-address and --metrics-bind-address serve plain HTTP
 * for local runs: the probes on one, /metrics on the other (/debug/shadow
 * names objects and fields, so it is served on the secure port only).
 *
 * What the endpoints say comes from the owner's handlers. Everything runs
 * on the loop's thread.
 */
#ifndef KCM_SERVING_H
#define KCM_SERVING_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "kcm/auth.h"
#include "kcm/buf.h"
#include "kcm/client.h"
#include "kcm/options.h"
#include "kcm/server.h"
#include "kcm/tls.h"

#define KCM_SERVING_CHECKS 8 /* checks an endpoint may have */

struct kcm_serving_handlers {
  /* The checks of /readyz (ready) or of /healthz and /livez, into out (at
   * most KCM_SERVING_CHECKS); returns how many. */
  size_t (*checks)(void *data, bool ready, struct kcm_server_check *out);
  /* Append the metrics in the text format: non-zero answers 500. */
  int (*metrics)(void *data, struct kcm_buf *out);
  /* Append the /debug/shadow report (JSON): non-zero answers 500. NULL:
   * not found (no --shadow). */
  int (*shadow)(void *data, struct kcm_buf *out);
  void *data;
};

struct kcm_serving {
  uv_loop_t *loop;
  struct kcm_serving_handlers h;
  const struct kcm_client_config *cfg; /* borrowed: kcm's own connection */
  struct kcm_tls *tls;
  struct kcm_server secure, health, metrics;
  bool serving_secure, serving_health, serving_metrics;
  struct kcm_auth auth;
  struct kcm_client_config authn_cfg, authz_cfg;
  struct kcm_client *authn, *authz; /* owned; authz may be authn */
  uv_timer_t cert_reload;
};

/* Listen on what o turns on. cfg is the connection the delegated clients
 * use when no kubeconfig of their own is given. Logs and returns an error
 * of kcm_error when a listener, TLS or a client cannot be set up. */
int kcm_serving_start(struct kcm_serving *s, uv_loop_t *loop, const struct kcm_options *o,
                      const struct kcm_client_config *cfg, const struct kcm_serving_handlers *h);
/* Stop listening and close the delegated clients (the loop's next turns). */
void kcm_serving_close(struct kcm_serving *s);
/* Free the rest, once the loop has stopped. */
void kcm_serving_release(struct kcm_serving *s);

#endif
