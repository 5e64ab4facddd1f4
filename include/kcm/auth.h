/*
 * auth — who is asking, and may they: delegated authentication and
 * authorization for kcm's secure port, as kube-controller-manager does it
 * (k8s.io/apiserver's DelegatingAuthenticationOptions and
 * DelegatingAuthorizationOptions).
 *
 * Authentication, in order, the first success wins:
 *   1. a client certificate verified against --client-ca-file: the user is
 *      its common name, the groups its organizations;
 *   2. "Authorization: Bearer <token>": a TokenReview to the API server
 *      (authentication.k8s.io/v1); answers, authenticated or not, are cached
 *      for --authentication-token-webhook-cache-ttl (10s; 0 caches
 *      nothing, as upstream), keyed by the token's SHA-256, never by the
 *      token;
 *   3. nothing presented: the user is system:anonymous in group
 *      system:unauthenticated.
 * A certificate that fails verification, or a token the API server does not
 * accept (or cannot be asked about), is a 401, unless a later method
 * succeeds: a bad credential never falls back to anonymous. Authenticated
 * users get the group system:authenticated.
 *
 * Authorization, the first "allow" wins: members of system:masters; paths
 * in --authorization-always-allow-paths (exact, or a prefix where the entry
 * ends in '*'; default /healthz,/readyz,/livez); then a SubjectAccessReview
 * (authorization.k8s.io/v1, non-resource attributes: the path and the
 * lowercase method as verb), whose answers are cached for
 * --authorization-webhook-cache-authorized-ttl and -unauthorized-ttl (10s
 * each; 0 caches nothing). Not allowed is a 403 naming the user, verb and
 * path; a review that could not be made is a 500.
 *
 * Reviews of the same token, or of the same user and request, that are in
 * flight at once are sent once. Caches hold at most 4096 answers each.
 */
#ifndef KCM_AUTH_H
#define KCM_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/buf.h"
#include "kcm/client.h"
#include "kcm/map.h"
#include "kcm/tls.h"

struct kcm_auth_options {
  struct kcm_client *authn; /* borrowed: TokenReviews go here; NULL: tokens are not
                               looked up and count for nothing */
  struct kcm_client *authz; /* borrowed: SubjectAccessReviews; NULL: only the
                               always-allowed paths and groups pass */
  unsigned limiter;         /* the clients' rate limiter to draw from */
  const char *always_allow_paths; /* comma-separated; NULL: the default above */
  uint64_t token_ttl_ms;    /* how long answers are cached; 0: not at all */
  uint64_t allow_ttl_ms;
  uint64_t deny_ttl_ms;
};

struct kcm_auth_stats {
  uint64_t token_reviews;  /* TokenReviews sent */
  uint64_t access_reviews; /* SubjectAccessReviews sent */
  uint64_t cache_hits;     /* answers taken from a cache */
};

struct kcm_auth {
  uv_loop_t *loop;
  struct kcm_auth_options o;
  char **allow_paths;   /* owned, NULL-terminated */
  struct kcm_map tokens;  /* owned entries: token hash -> user */
  struct kcm_map reviews; /* owned entries: review spec -> decision */
  struct kcm_auth_stats stats;
};

/* What a request shows of its sender. */
struct kcm_auth_request {
  const char *method;        /* "GET" */
  const char *path;          /* "/metrics" */
  const char *authorization; /* the Authorization header, or NULL */
  const struct kcm_tls_peer *cert; /* the client's certificate, or NULL */
};

/* The outcome, valid during the callback only. */
struct kcm_auth_decision {
  int status;          /* 200 allowed, 401, 403 or 500 */
  const char *user;    /* who asked ("" when authentication failed) */
  const char *message; /* why not, for the answer's body; "" when allowed */
};

typedef void (*kcm_auth_done)(void *data, const struct kcm_auth_decision *d);

/* Returns 0 or KCM_ENOMEM (options copied; the clients are borrowed). */
int kcm_auth_init(struct kcm_auth *a, uv_loop_t *loop, const struct kcm_auth_options *o);

/* Decide on a request. done runs exactly once: before this returns when
 * the caches or the rules answer, else on the loop when the reviews do.
 * The request is borrowed for the call only. Returns 0, or KCM_ENOMEM
 * (done will not run). */
int kcm_auth_check(struct kcm_auth *a, const struct kcm_auth_request *r, kcm_auth_done done,
                   void *data);

/* The body of a refusal, as kube-controller-manager writes it: a v1
 * Status (JSON) for 401 and 403, the message as text for 500. Appends to
 * body and returns the content type, or NULL when out of room. */
const char *kcm_auth_refusal(const struct kcm_auth_decision *d, struct kcm_buf *body);

/* Free the caches. Every check must have finished: close the clients
 * (which ends their reviews) and run the loop first. */
void kcm_auth_release(struct kcm_auth *a);

#endif
