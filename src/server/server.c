/* server — health and metrics over plain HTTP; see include/kcm/server.h. */
#include "kcm/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/log.h"

#define MAX_REQUEST 8192
#define MAX_CONNECTIONS 64
#define REQUEST_TIMEOUT_MS 10000
#define MAX_BODY (16u << 20)

struct kcm_server_conn {
  struct kcm_server *s;
  struct kcm_server_conn *next, *prev;
  uv_tcp_t tcp;
  uv_timer_t timer;
  uv_write_t write;
  struct kcm_buf in;
  char *out;
  int open; /* handles not yet closed */
  bool closing;
};

int kcm_server_parse_address(const char *addr, char *host, size_t host_len, int *port) {
  const char *colon;
  size_t hlen;
  char *end;
  long p;
  if (!addr)
    return KCM_EINVAL;
  if (addr[0] == '[') {
    const char *close = strchr(addr, ']');
    if (!close || close[1] != ':')
      return KCM_EINVAL;
    hlen = (size_t)(close - addr - 1);
    addr++;
    colon = close + 1;
  } else {
    colon = strrchr(addr, ':');
    if (!colon)
      return KCM_EINVAL;
    hlen = (size_t)(colon - addr);
  }
  if (hlen >= host_len)
    return KCM_EINVAL;
  p = strtol(colon + 1, &end, 10);
  if (!colon[1] || *end || p < 0 || p > 65535)
    return KCM_EINVAL;
  if (hlen)
    memcpy(host, addr, hlen);
  host[hlen] = '\0';
  if (!hlen)
    snprintf(host, host_len, "0.0.0.0");
  *port = (int)p;
  return 0;
}

static const char *reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 503: return "Service Unavailable";
  default: return "Unknown";
  }
}

static void maybe_closed(struct kcm_server *s) {
  if (s->closing && !s->listening && s->connections == 0 && s->on_closed) {
    void (*cb)(struct kcm_server *) = s->on_closed;
    s->on_closed = NULL;
    cb(s);
  }
}

static void on_conn_handle_closed(uv_handle_t *h) {
  struct kcm_server_conn *c = h->data;
  struct kcm_server *s = c->s;
  if (--c->open > 0)
    return;
  if (c->prev)
    c->prev->next = c->next;
  else
    s->conns = c->next;
  if (c->next)
    c->next->prev = c->prev;
  kcm_buf_release(&c->in);
  free(c->out);
  free(c);
  s->connections--;
  maybe_closed(s);
}

static void close_conn(struct kcm_server_conn *c) {
  if (c->closing)
    return;
  c->closing = true;
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, on_conn_handle_closed);
  uv_close((uv_handle_t *)&c->tcp, on_conn_handle_closed);
}

static void on_written(uv_write_t *w, int status) {
  (void)status;
  close_conn(w->data);
}

static void send_response(struct kcm_server_conn *c, int status, const char *content_type,
                          const struct kcm_buf *body, bool head) {
  struct kcm_buf out = KCM_BUF_INIT(MAX_BODY + 512);
  uv_buf_t b;
  size_t n = body ? body->len : 0;
  uv_read_stop((uv_stream_t *)&c->tcp);
  if (kcm_buf_appendf(&out,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n",
                      status, reason(status), content_type, n) ||
      (!head && n && kcm_buf_append(&out, body->data, n))) {
    kcm_buf_release(&out);
    close_conn(c);
    return;
  }
  c->out = kcm_buf_take(&out);
  if (!c->out) {
    close_conn(c);
    return;
  }
  b = uv_buf_init(c->out, (unsigned)strlen(c->out));
  c->write.data = c;
  if (uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_written))
    close_conn(c);
}

static void send_text(struct kcm_server_conn *c, int status, const char *text) {
  struct kcm_buf body = KCM_BUF_INIT(256);
  if (kcm_buf_append_str(&body, text) == 0)
    send_response(c, status, "text/plain; charset=utf-8", &body, false);
  else
    close_conn(c);
  kcm_buf_release(&body);
}

/* Parse the request line and hand the request to the handler. */
static void serve(struct kcm_server_conn *c) {
  struct kcm_server *s = c->s;
  struct kcm_server_request req;
  struct kcm_server_response resp;
  char *line = c->in.data, *sp1, *sp2, *eol, *q;

  eol = strstr(line, "\r\n");
  *eol = '\0';
  sp1 = strchr(line, ' ');
  sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
  if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/1.", 7) || sp1[1] != '/') {
    send_text(c, 400, "bad request\n");
    return;
  }
  *sp1 = *sp2 = '\0';
  if (strcmp(line, "GET") && strcmp(line, "HEAD")) {
    send_text(c, 405, "method not allowed\n");
    return;
  }
  req.method = line;
  req.path = sp1 + 1;
  q = strchr(sp1 + 1, '?');
  if (q)
    *q = '\0';
  req.query = q ? q + 1 : "";
  resp.status = 200;
  resp.content_type = "text/plain; charset=utf-8";
  kcm_buf_init(&resp.body, MAX_BODY);
  s->handler(s->data, &req, &resp);
  send_response(c, resp.status, resp.content_type, &resp.body, !strcmp(req.method, "HEAD"));
  kcm_buf_release(&resp.body);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  static char slab[4096];
  (void)h;
  (void)suggested;
  *buf = uv_buf_init(slab, sizeof(slab));
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
  struct kcm_server_conn *c = stream->data;
  if (n < 0) {
    close_conn(c);
    return;
  }
  if (n == 0 || c->out)
    return;
  if (kcm_buf_append(&c->in, buf->base, (size_t)n)) {
    send_text(c, 431, "request too large\n");
    return;
  }
  if (strstr(c->in.data, "\r\n\r\n"))
    serve(c);
}

static void on_timeout(uv_timer_t *t) { close_conn(t->data); }

static void on_connection(uv_stream_t *server, int status) {
  struct kcm_server *s = server->data;
  struct kcm_server_conn *c;
  if (status < 0 || s->closing)
    return;
  c = calloc(1, sizeof(*c));
  if (!c)
    return;
  c->s = s;
  kcm_buf_init(&c->in, MAX_REQUEST);
  uv_tcp_init(s->loop, &c->tcp);
  uv_timer_init(s->loop, &c->timer);
  c->tcp.data = c->timer.data = c;
  c->open = 2;
  c->next = s->conns;
  if (s->conns)
    s->conns->prev = c;
  s->conns = c;
  s->connections++;
  if (uv_accept(server, (uv_stream_t *)&c->tcp)) {
    close_conn(c);
    return;
  }
  if (s->connections > MAX_CONNECTIONS) {
    send_text(c, 503, "too many connections\n");
    return;
  }
  uv_timer_start(&c->timer, on_timeout, REQUEST_TIMEOUT_MS, 0);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int kcm_server_listen(struct kcm_server *s, uv_loop_t *loop, const char *addr,
                      kcm_server_handler handler, void *data, const char **err) {
  struct sockaddr_storage sa;
  struct sockaddr_storage bound;
  int namelen = sizeof(bound), port, rc;
  char host[64];

  memset(s, 0, sizeof(*s));
  if (kcm_server_parse_address(addr, host, sizeof(host), &port)) {
    *err = "not an address of the form [host]:port";
    return KCM_EINVAL;
  }
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&sa) &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&sa)) {
    *err = "not an IP address";
    return KCM_EINVAL;
  }
  s->loop = loop;
  s->handler = handler;
  s->data = data;
  uv_tcp_init(loop, &s->tcp);
  s->tcp.data = s;
  s->listening = true;
  if ((rc = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&sa, 0)) ||
      (rc = uv_listen((uv_stream_t *)&s->tcp, 128, on_connection))) {
    *err = uv_strerror(rc);
    kcm_server_close(s, NULL);
    return KCM_EIO;
  }
  uv_tcp_getsockname(&s->tcp, (struct sockaddr *)&bound, &namelen);
  s->port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
  snprintf(s->address, sizeof(s->address), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host,
           s->port);
  return 0;
}

static void on_listener_closed(uv_handle_t *h) {
  struct kcm_server *s = h->data;
  s->listening = false;
  maybe_closed(s);
}

void kcm_server_close(struct kcm_server *s, void (*on_closed)(struct kcm_server *s)) {
  struct kcm_server_conn *c, *next;
  if (s->closing)
    return;
  s->closing = true;
  s->on_closed = on_closed;
  for (c = s->conns; c; c = next) {
    next = c->next;
    close_conn(c);
  }
  uv_close((uv_handle_t *)&s->tcp, on_listener_closed);
}
