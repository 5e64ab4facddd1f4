/*
 * server — a small HTTP/1.1 server on the libuv loop, plain or over TLS,
 * for health probes and metrics.
 *
 * It answers GET and HEAD only, one request per connection (the answer
 * carries "Connection: close"). A request is handed to the handler as an
 * exchange, which the handler answers with kcm_server_reply() at once or
 * later (after an authentication round trip, say); the request and the
 * response stay valid until then, even if the peer has gone.
 *
 * Every peer is a stranger. The TLS handshake and the request head must
 * arrive within head_timeout_ms of the connection, and the head within
 * 16 KiB; anything else is refused (400, 405, 431) or dropped without
 * reaching the handler. Connections are limited per peer address and in
 * all; a connection over either limit displaces the oldest of those that
 * are still waiting for their head (the peer's own first), so idle or
 * half-open connections, however many, cannot keep another peer's probe
 * out, and a peer that floods only displaces itself. Accept failures
 * (EMFILE) are counted and logged, never retried in a spin: libuv drops
 * the pending connection.
 */
#ifndef KCM_SERVER_H
#define KCM_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/buf.h"
#include "kcm/map.h"
#include "kcm/tls.h"

struct kcm_server_request {
  const char *method;        /* "GET" or "HEAD" */
  const char *path;          /* "/healthz", as sent (not percent-decoded) */
  const char *query;         /* "verbose&exclude=x", "" when none */
  const char *authorization; /* the first Authorization header's value, or NULL */
  const char *peer;          /* the client's IP address */
  const struct kcm_tls_peer *cert; /* the client's certificate (state NONE on plain HTTP) */
};

struct kcm_server_response {
  int status;               /* default 200 */
  const char *content_type; /* default "text/plain; charset=utf-8"; borrowed, static */
  struct kcm_buf body;      /* owned by the server; the handler appends */
};

struct kcm_server_exchange;

/* Called once per request head. The handler fills resp and calls
 * kcm_server_reply(x), now or later; req and resp are valid until then. */
typedef void (*kcm_server_handler)(void *data, struct kcm_server_exchange *x,
                                   const struct kcm_server_request *req,
                                   struct kcm_server_response *resp);

struct kcm_server_options {
  const char *address;      /* "[host]:port", as kcm_server_parse_address() reads it */
  struct kcm_tls *tls;      /* borrowed, outlives the server; NULL: plain HTTP */
  kcm_server_handler handler;
  void *data;
  unsigned max_connections; /* 0: 512 */
  unsigned max_per_peer;    /* 0: 64 */
  uint64_t head_timeout_ms; /* 0: 5000 */
};

struct kcm_server_stats {
  uint64_t accepted;     /* connections accepted */
  uint64_t displaced;    /* closed to make room for a newer one */
  uint64_t refused;      /* closed on arrival: no room and nothing to displace */
  uint64_t timed_out;    /* closed for not sending their head in time */
  uint64_t accept_errors; /* failed accepts (EMFILE, ENFILE, ...) */
  uint64_t served;       /* requests answered */
};

struct kcm_server_conn;

struct kcm_server {
  uv_loop_t *loop;
  uv_tcp_t tcp;
  struct kcm_server_options o;
  char address[80]; /* the address listened on, "127.0.0.1:8081" */
  int port;         /* the port bound (useful with port 0) */
  struct kcm_server_conn *oldest, *newest; /* owned: every connection, by age */
  struct kcm_map peers;  /* peer address -> connections open from it */
  size_t connections;    /* allocated (closing ones and unanswered exchanges too) */
  size_t open;           /* not closing: what the limits count */
  struct kcm_server_stats stats;
  uint64_t last_accept_log;
  bool listening;
  bool closing;
  void (*on_closed)(struct kcm_server *s);
};

/* Parse a bind address as kube-controller-manager's flags take it: ":8081"
 * (every interface), "127.0.0.1:8081", "[::1]:8081"; port 0 picks a free
 * port. Returns 0 or KCM_EINVAL. host gets "0.0.0.0" for an empty host. */
int kcm_server_parse_address(const char *addr, char *host, size_t host_len, int *port);

/* Listen. Returns 0, or a KCM_E* code with a message in *err (static or
 * from uv_strerror). After KCM_EIO the server's handle is closing: keep *s
 * until the loop has run. */
int kcm_server_listen(struct kcm_server *s, uv_loop_t *loop, const struct kcm_server_options *o,
                      const char **err);

/* Send the response of exchange x and close its connection (or only free
 * the exchange, if the peer is gone). Call exactly once per exchange. */
void kcm_server_reply(struct kcm_server_exchange *x);

/* --- health endpoints --------------------------------------------------- */

struct kcm_server_check {
  const char *name; /* "ping", "informer-sync" */
  bool ok;
};

/* Answer /<endpoint>[/<check>] as kube-apiserver's healthz handlers do:
 * "ok", or with ?verbose (and always on failure) one "[+]name ok" /
 * "[-]name failed: reason withheld" line per check, then "<endpoint> check
 * passed|failed"; ?exclude=name leaves a check out; /<endpoint>/<check>
 * answers one, 404 for an unknown one. */
void kcm_server_checks(const char *endpoint, const struct kcm_server_check *checks, size_t n,
                       const struct kcm_server_request *req, struct kcm_server_response *resp);

/* Is path prefix itself, or under it ("/healthz", "/healthz/ping")? */
bool kcm_server_path_under(const char *path, const char *prefix);

/* A 404 "page not found" answer. */
void kcm_server_not_found(struct kcm_server_response *resp);

/* Stop listening and drop open connections; on_closed (may be NULL) runs
 * once every handle is closed and every exchange answered. */
void kcm_server_close(struct kcm_server *s, void (*on_closed)(struct kcm_server *s));

#endif
