/*
 * client — how kcm reaches the API server: connection settings from a
 * kubeconfig or the in-cluster environment, and HTTP requests driven by
 * libcurl's multi-socket interface on the libuv loop.
 *
 * Settings (struct kcm_client_config) are resolved once at start:
 *   --kubeconfig PATH, else $KUBECONFIG (a colon-separated list merged so
 *   that the first file to set a value or map entry wins), else
 *   ~/.kube/config, else the in-cluster service account. --context picks a
 *   context; --master replaces the server URL.
 *
 * Requests (struct kcm_client) never block: kcm_client_request() queues a
 * transfer and returns; the callback runs on the loop when it completes.
 * Each client has a token bucket in front of the network; a 429, or a 5xx
 * carrying Retry-After, is retried after the time the server asked for (up
 * to 10 times, counting the resends of a repeatable request); a 401 drops cached credentials (token file, exec plugin
 * output) so the next request fetches fresh ones. Exec plugin credentials
 * are cached until their expirationTimestamp.
 * Only this module knows HTTP: callers get a KCM_E* code mapped from the
 * status (404 KCM_ENOTFOUND, 409 KCM_ECONFLICT, 429 KCM_ETHROTTLED, ...)
 * and the body.
 *
 * kcm_client_metrics() renders client-go's rest_client_* families, labelled
 * with the server's host[:port]: every attempt that reached the network by
 * status ("<error>" when no answer came) and method, the attempts after
 * the first by status and method, the time each request took from
 * kcm_client_request() to its callback (retries included; watches are
 * left out, as client-go leaves them out),
 * and the time each waited for its rate limiter.
 */
#ifndef KCM_CLIENT_H
#define KCM_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/api.h"
#include "kcm/buf.h"

enum kcm_client_interactive {
  KCM_CLIENT_INTERACTIVE_NEVER,
  KCM_CLIENT_INTERACTIVE_IF_AVAILABLE,
  KCM_CLIENT_INTERACTIVE_ALWAYS,
};

/* A user.exec credential plugin (client.authentication.k8s.io v1 or v1beta1). */
struct kcm_client_exec {
  char *api_version;  /* client.authentication.k8s.io/v1 or /v1beta1 */
  char *command;      /* resolved against the kubeconfig's directory if relative */
  char **args;        /* NULL-terminated */
  char **env;         /* NULL-terminated "NAME=value" */
  char *install_hint;
  bool provide_cluster_info;
  enum kcm_client_interactive interactive;
};

/* Resolved connection settings. Every pointer is owned by the struct and
 * freed by kcm_client_config_release(); unset values are NULL. */
struct kcm_client_config {
  char *server;           /* scheme://host[:port], no trailing slash */
  char *ca_pem;           /* trusted CA certificates (PEM) */
  size_t ca_pem_len;
  bool insecure;          /* skip TLS verification (insecure-skip-tls-verify) */
  char *tls_server_name;  /* name to verify the server certificate against */
  char *proxy_url;
  char *cert_pem;         /* client certificate (PEM) */
  size_t cert_pem_len;
  char *key_pem;          /* client key (PEM) */
  size_t key_pem_len;
  char *token;            /* bearer token */
  char *token_file;       /* file the bearer token is read from */
  char *username;         /* basic authentication */
  char *password;
  struct kcm_client_exec *exec; /* credential plugin */
  char *namespace;        /* the context's namespace, "default" if unset */
  char *context;          /* name of the context used; NULL in-cluster */
  char *source;           /* where the settings came from, for messages */
};

struct kcm_client_config_options {
  const char *kubeconfig; /* --kubeconfig; NULL: $KUBECONFIG, ~/.kube/config, in-cluster */
  const char *context;    /* --context; NULL: current-context */
  const char *master;     /* --master; NULL: the cluster's server */
};

/* Resolve settings. On failure returns a KCM_E* code and sets *errmsg to a
 * message naming the file, line and field at fault (caller frees it). */
int kcm_client_config_load(struct kcm_client_config *cfg,
                           const struct kcm_client_config_options *opts, char **errmsg);

void kcm_client_config_release(struct kcm_client_config *cfg);

/* Decode standard base64 (whitespace ignored). Caller frees *out. */
int kcm_client_base64_decode(const char *in, size_t len, char **out, size_t *out_len);

/* --- requests ------------------------------------------------------------- */

struct kcm_client;
struct kcm_client_request;

/* The outcome of a request, valid during the callback only. */
/* A token sent instead of the client's credentials: a controller's
 * service-account token. Its owner replaces the token (and bumps the
 * generation); a 401 answering the token still current calls refused, once
 * per token, as client-go resets its cached token source on a 401. */
struct kcm_client_bearer {
  char *token;         /* NULL or "": none yet */
  uint64_t generation; /* bumped with each new token */
  void (*refused)(struct kcm_client_bearer *b); /* may be NULL */
};

struct kcm_client_response {
  int err;              /* 0 for 2xx, else a KCM_E* code */
  long status;          /* HTTP status; 0 if no response arrived */
  const char *body;     /* response body (NUL-terminated), "" if none */
  size_t body_len;
  const char *message;  /* what went wrong, for logs: the Status message,
                           the transport error, or ""; never NULL */
  double retry_after;   /* seconds from a Retry-After header, or 0 */
  bool unanswered;      /* it failed without an answer after it went out
                           (the connection broke, or the deadline passed):
                           the server may have carried it out */
};

typedef void (*kcm_client_done_cb)(const struct kcm_client_response *resp, void *data);

/* Was the request refused because its namespace is being deleted (403
 * with the NamespaceTerminating cause)? */
bool kcm_client_namespace_terminating(const struct kcm_client_response *resp);
/* Streamed body bytes (watches). Return 0 to continue, non-zero to stop the
 * transfer, which then completes with KCM_ECANCELED. */
typedef int (*kcm_client_chunk_cb)(const char *p, size_t n, void *data);

/* Rate limiters per client. kube-controller-manager gives every controller
 * a client, and so a limiter, of its own, and its informers another; kcm
 * gives each its own limiter on one client: 0 is the informers' (and any
 * request's that names none), KCM_CLIENT_LIMITER_LEASES that of leader
 * election, the shards' Leases and service account tokens, and each
 * controller has the one at KCM_CLIENT_LIMITER_CONTROLLERS plus its place
 * in the table of controllers. */
#define KCM_CLIENT_LIMITERS 10
#define KCM_CLIENT_LIMITER_LEASES 1
#define KCM_CLIENT_LIMITER_CONTROLLERS 2

struct kcm_client_request_options {
  const char *method;       /* "GET", "POST", ... */
  const char *path;         /* absolute path with query, e.g. "/api/v1/pods?limit=500" */
  const char *body;         /* borrowed until the request starts (it is copied) */
  size_t body_len;
  const char *content_type; /* default application/json when there is a body */
  const char *accept;       /* the Accept header; default application/json */
  long timeout_ms;          /* whole-request limit; 0: 60 s (30 min when streaming) */
  long idle_timeout_ms;     /* fail if no byte arrives for this long; 0: no limit */
  size_t max_body;          /* cap on a buffered response (default KCM_API_OBJECT_MAX) */
  kcm_client_chunk_cb on_chunk; /* if set the body is streamed, not buffered */
  bool watch;               /* a watch: left out of the latency histogram */
  kcm_client_done_cb done;  /* always called exactly once, on the loop */
  void *data;
  unsigned limiter;         /* which rate limiter to draw from, < KCM_CLIENT_LIMITERS */
  uint64_t delay_ms;        /* wait this long before going to the limiter and curl */
  struct kcm_client_bearer *bearer; /* when set (outliving the request), its token,
                                read at each attempt, is sent instead of the
                                client's credentials; a 401 leaves those alone */
  const char *agent;        /* appended to the User-Agent ("kcm/VERSION (OS/ARCH)
                               kcm/<agent>"), e.g. "deployment-controller" */
  bool repeatable;          /* sending it again does no more than sending it once (a
                               create of a named object, a delete): an attempt that
                               got no answer is sent again 1, 2, 4, 8, 8, ... s
                               later, until one is answered, the retry limit is
                               reached or timeout_ms has passed since the request
                               was made, so that the caller learns what the server
                               did. The answer may then be a create's 409
                               AlreadyExists or a delete's 404 for its own work;
                               so may any answer on a connection kept alive, which
                               curl itself sends again on a new connection when the
                               old one closes before answering */
};

struct kcm_client_stats {
  uint64_t requests;        /* requests sent to the network, retries included */
  uint64_t retries;         /* resent after 429 or 5xx with Retry-After, or unanswered */
  uint64_t throttled_ms;    /* total time requests waited for the rate limiter */
  uint64_t exec_runs;       /* credential plugin runs */
  uint64_t unauthorized;    /* 401 answers */
};

/* Create a client on `loop`. The config is borrowed and must outlive the
 * client. Each limiter allows 20 requests per second with bursts of 30 (the
 * kube-controller-manager defaults) until kcm_client_set_rate_limit().
 * Returns 0 or a KCM_E* code. */
/* Name the program in the User-Agent of every request by the last part of
 * argv0, as client-go's DefaultUserAgent does ("kcm" until called; names
 * longer than 63 bytes or empty are ignored). kube-apiserver takes that name
 * as the field manager of kcm's writes. Call before any request. */
void kcm_client_set_program(const char *argv0);
/* The name kcm_client_set_program() gave ("kcm" by default). */
const char *kcm_client_program(void);

int kcm_client_new(struct kcm_client **out, uv_loop_t *loop,
                   const struct kcm_client_config *cfg);

/* Start a request. On success `done` will be called once; on failure
 * (KCM_ENOMEM, KCM_EINVAL) it will not. *out (may be NULL) receives a handle
 * valid until `done` runs, for kcm_client_cancel(). */
int kcm_client_request(struct kcm_client *c, const struct kcm_client_request_options *o,
                       struct kcm_client_request **out);

/* The Content-Type of the answer being received (from a chunk callback:
 * the headers have arrived), or NULL if it had none (or r is NULL). Owned
 * by the request. */
const char *kcm_client_response_type(const struct kcm_client_request *r);

/* Stop a request; its `done` runs with KCM_ECANCELED from the loop. */
void kcm_client_cancel(struct kcm_client_request *r);

/* Cancel everything, then free the client once the loop has closed its
 * handles (run the loop until it returns). */
void kcm_client_close(struct kcm_client *c);

/* Requests per second and burst of every limiter (--kube-api-qps,
 * --kube-api-burst); qps <= 0 lifts the limit. */
void kcm_client_set_rate_limit(struct kcm_client *c, double qps, int burst);

/* Append rest_client_rate_limiter_duration_seconds,
 * rest_client_request_duration_seconds, rest_client_request_retries_total
 * and rest_client_requests_total in the Prometheus text format, headers
 * included; a family with no sample yet is left out, as client-go leaves it
 * out. Output that does not fit the buffer's limit is left out in whole
 * lines. */
void kcm_client_metrics(const struct kcm_client *c, struct kcm_buf *out);

/* --- text from and to the network (pure functions) ---------------------- */

/* The longest pause a Retry-After is honoured for, in seconds: the default
 * time limit of a request. kube-apiserver asks for 1 s (max-in-flight) or
 * a few (priority and fairness); a longer pause cannot be waited out within
 * one request, and a bogus or hostile value must not park a request or an
 * informer for longer than that. */
#define KCM_CLIENT_RETRY_AFTER_MAX 60

/* Is line[0..len) (a header line as received, CRLF included or not) the
 * header `name` (any case)? Then [*value, *value + *value_len) is its value
 * without the blanks and line end around it. */
bool kcm_client_header_value(const char *line, size_t len, const char *name, const char **value,
                             size_t *value_len);

/* Read a Retry-After value v[0..n) as client-go does: delay-seconds only
 * (digits, blanks around them allowed); an HTTP-date or any other text is
 * no Retry-After (false). *seconds is capped at KCM_CLIENT_RETRY_AFTER_MAX,
 * however many digits there are. */
bool kcm_client_retry_after(const char *v, size_t n, uint32_t *seconds);

/* Append s[0..n) to out percent-encoded for a URL path segment or query
 * value: every byte but the unreserved ones (RFC 3986: letters, digits and
 * "-._~") becomes %XX. Returns 0 or KCM_ETOOBIG / KCM_ENOMEM. */
int kcm_client_escape(struct kcm_buf *out, const char *s, size_t n);

/* What makes s unfit for a namespace or name in a URL path, or NULL: client-go's
 * IsValidPathSegmentName refuses "." and ".." (a URL parser drops or climbs
 * them) and a '/' or '%' (the server would read other segments), names the
 * API server never gives out. */
const char *kcm_client_segment_problem(const char *s);

/* The longest path kcm_client_path() writes, NUL included: an API prefix, a
 * namespace (63 characters) and a name (253) with every byte percent-encoded,
 * and a subresource. */
#define KCM_CLIENT_PATH_MAX 1100

/* Write into out[0..cap) the path of `resource` under `api` ("/api/v1",
 * "/apis/apps/v1", ...) as client-go's request builder makes it:
 * api/namespaces/ns/resource[/name[/sub]], or api/resource when ns is NULL
 * or "". ns and name are percent-encoded (kcm_client_escape); api, resource
 * and sub are the caller's own text, written as they are. Returns 0;
 * KCM_EINVAL for an empty name or a namespace or name with a
 * kcm_client_segment_problem(); KCM_ETOOBIG when it does not fit; or
 * KCM_ENOMEM. On failure out holds why, for the caller's message. */
int kcm_client_path(char *out, size_t cap, const char *api, const char *ns, const char *resource,
                    const char *name, const char *sub);

/* The URL path of an object of `kind` (e.g.
 * "/apis/apps/v1/namespaces/x/replicasets/y/status"), or of its collection
 * when name is NULL, from the kind's row (kcm_api_kind) into out[0..cap)
 * by kcm_client_path(): 0, or an error with why in out. */
int kcm_client_object_path(enum kcm_kind kind, const char *ns, const char *name, const char *sub,
                           char *out, size_t cap);

/* The n bytes at s with each %XX decoded, NUL-terminated (caller frees);
 * NULL when a '%' is not followed by two hex digits, or out of memory. */
char *kcm_client_unescape(const char *s, size_t n);

/* Where the userinfo of url ("scheme://user:password@host...") lies,
 * '@' included: url[*start..*end). False when it has none. */
bool kcm_client_url_userinfo(const char *url, size_t *start, size_t *end);

/* A copy of url without its userinfo, for messages (caller frees; NULL when
 * out of memory). */
char *kcm_client_redact_url(const char *url);

/* Whether url ("scheme://[userinfo@]host[:port][/path]") names no host: its
 * authority, without userinfo and port, is empty ("https://user@",
 * "https://:443", "https:///x", "https://[]"). False without "://". */
bool kcm_client_url_host_empty(const char *url);

/* --- the first contact --------------------------------------------------------------------- */

/* Ask the server its /version until it answers, logging the version once
 * it does and each failure before (0.8 s apart, doubling to 30 s). The
 * client is borrowed; server is the address to log. */
struct kcm_client_reach {
  struct kcm_client *client;
  const char *server;
  uv_timer_t retry;
  uint32_t failures; /* in a row */
};

void kcm_client_reach_start(struct kcm_client_reach *r, uv_loop_t *loop, struct kcm_client *c,
                            const char *server);
/* Stop retrying (a request in flight ends with the client). */
void kcm_client_reach_stop(struct kcm_client_reach *r);

#endif
