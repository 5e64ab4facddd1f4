/*
 * server — a small plain-HTTP/1.1 server on the libuv loop, for health
 * probes and metrics.
 *
 * It answers GET and HEAD only, one request per connection (the answer
 * carries "Connection: close"), from a handler that fills a status, a
 * content type and a body. Requests are bounded: 8 KiB of request line and
 * headers, 10 s to send them, 64 connections at once; anything else gets
 * 400, 405, 431 or 503 without reaching the handler.
 */
#ifndef KCM_SERVER_H
#define KCM_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "kcm/buf.h"

struct kcm_server_request {
  const char *method; /* "GET" or "HEAD" */
  const char *path;   /* "/healthz" */
  const char *query;  /* "verbose&exclude=x", "" when none */
};

struct kcm_server_response {
  int status;               /* default 200 */
  const char *content_type; /* default "text/plain; charset=utf-8"; borrowed, static */
  struct kcm_buf body;      /* owned by the server; the handler appends */
};

typedef void (*kcm_server_handler)(void *data, const struct kcm_server_request *req,
                                   struct kcm_server_response *resp);

struct kcm_server_conn;

struct kcm_server {
  uv_loop_t *loop;
  uv_tcp_t tcp;
  kcm_server_handler handler;
  void *data;
  char address[80]; /* the address listened on, "127.0.0.1:8081" */
  int port;         /* the port bound (useful with port 0) */
  struct kcm_server_conn *conns; /* owned: open connections */
  size_t connections;
  bool listening;
  bool closing;
  void (*on_closed)(struct kcm_server *s);
};

/* Parse a bind address as kube-controller-manager's flags take it: ":8081"
 * (every interface), "127.0.0.1:8081", "[::1]:8081"; port 0 picks a free
 * port. Returns 0 or KCM_EINVAL. host gets "0.0.0.0" for an empty host. */
int kcm_server_parse_address(const char *addr, char *host, size_t host_len, int *port);

/* Listen on addr. Returns 0, or a KCM_E* code with a message in *err
 * (static or from uv_strerror). After KCM_EIO the server's handle is
 * closing: keep *s until the loop has run. */
int kcm_server_listen(struct kcm_server *s, uv_loop_t *loop, const char *addr,
                      kcm_server_handler handler, void *data, const char **err);

/* Stop listening and drop open connections; on_closed (may be NULL) runs
 * once every handle is closed. */
void kcm_server_close(struct kcm_server *s, void (*on_closed)(struct kcm_server *s));

#endif
