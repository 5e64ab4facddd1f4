/* server — health and metrics over HTTP or HTTPS; see include/kcm/server.h. */
#include "kcm/server.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kcm/error.h"
#include "kcm/log.h"

#include "internal.h"

#define MAX_HEAD 16384
#define MAX_BODY (16u << 20)
#define DEFAULT_MAX_CONNECTIONS 512
#define DEFAULT_MAX_PER_PEER 64
#define DEFAULT_HEAD_TIMEOUT_MS 5000
#define ACCEPT_LOG_INTERVAL_MS 10000

enum conn_state {
  READING,  /* handshake and request head */
  HANDLING, /* the handler has the exchange */
  WRITING,  /* the answer is on its way; closed once written */
};

struct peer {
  char addr[INET6_ADDRSTRLEN];
  unsigned open;
};

/* A connection, and the exchange its request became. */
struct kcm_server_conn {
  struct kcm_server *s;
  struct kcm_server_conn *older, *newer;
  struct peer *peer; /* NULL once closing */
  char addr[INET6_ADDRSTRLEN];
  uv_tcp_t tcp;
  uv_timer_t timer;
  struct kcm_tls_session *tls; /* owned; NULL on plain HTTP */
  struct kcm_buf in;           /* the request head, plaintext */
  struct kcm_server_request req;
  struct kcm_server_response resp;
  struct kcm_tls_peer cert;
  enum conn_state state;
  int handles;     /* handles not yet closed */
  unsigned writes; /* writes in flight */
  bool closing;
};

struct write_req {
  uv_write_t w;
  struct kcm_server_conn *c;
  char *data; /* owned */
};

static struct kcm_server_conn *conn_of(struct kcm_server_exchange *x) {
  return (struct kcm_server_conn *)(void *)x;
}

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
  case 401: return "Unauthorized";
  case 403: return "Forbidden";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 429: return "Too Many Requests";
  case 431: return "Request Header Fields Too Large";
  case 500: return "Internal Server Error";
  case 503: return "Service Unavailable";
  default: return "Unknown";
  }
}

/* --- peers ---------------------------------------------------------------- */

static const struct kcm_map_type peer_type = KCM_MAP_STRING_KEYED(struct peer, addr);

/* The peer's IP address; an IPv4 client of a dual-stack socket as IPv4. */
static void peer_address(uv_tcp_t *tcp, char *out, size_t len) {
  struct sockaddr_storage sa;
  int n = sizeof(sa);
  snprintf(out, len, "unknown");
  if (uv_tcp_getpeername(tcp, (struct sockaddr *)&sa, &n))
    return;
  if (sa.ss_family == AF_INET) {
    uv_ip4_name((struct sockaddr_in *)&sa, out, len);
  } else if (sa.ss_family == AF_INET6) {
    const struct in6_addr *a = &((struct sockaddr_in6 *)&sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(a))
      inet_ntop(AF_INET, &a->s6_addr[12], out, (socklen_t)len);
    else
      uv_ip6_name((struct sockaddr_in6 *)&sa, out, len);
  }
}

static struct peer *peer_get(struct kcm_server *s, const char *addr) {
  struct peer *p = kcm_map_get(&s->peers, addr);
  if (p)
    return p;
  if (!(p = calloc(1, sizeof(*p))))
    return NULL;
  snprintf(p->addr, sizeof(p->addr), "%s", addr);
  if (kcm_map_put(&s->peers, p->addr, p, NULL)) {
    free(p);
    return NULL;
  }
  return p;
}

static void peer_put(struct kcm_server *s, struct peer *p) {
  if (p && --p->open == 0) {
    kcm_map_remove(&s->peers, p->addr);
    free(p);
  }
}

/* --- connections ---------------------------------------------------------- */

static void maybe_closed(struct kcm_server *s) {
  if (s->closing && !s->listening && s->connections == 0 && s->on_closed) {
    void (*cb)(struct kcm_server *) = s->on_closed;
    s->on_closed = NULL;
    cb(s);
  }
}

static void free_conn(struct kcm_server_conn *c) {
  struct kcm_server *s = c->s;
  if (c->older)
    c->older->newer = c->newer;
  else
    s->oldest = c->newer;
  if (c->newer)
    c->newer->older = c->older;
  else
    s->newest = c->older;
  kcm_buf_release(&c->in);
  kcm_buf_release(&c->resp.body);
  kcm_tls_session_free(c->tls);
  kcm_tls_peer_release(&c->cert);
  free(c);
  s->connections--;
  maybe_closed(s);
}

static void on_handle_closed(uv_handle_t *h) {
  struct kcm_server_conn *c = h->data;
  if (--c->handles == 0 && c->state != HANDLING)
    free_conn(c);
}

static void close_conn(struct kcm_server_conn *c) {
  if (c->closing)
    return;
  c->closing = true;
  c->s->open--;
  peer_put(c->s, c->peer);
  c->peer = NULL;
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, on_handle_closed);
  uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
}

static void on_written(uv_write_t *w, int status) {
  struct write_req *wr = (struct write_req *)(void *)w;
  struct kcm_server_conn *c = wr->c;
  free(wr->data);
  free(wr);
  c->writes--;
  if (status < 0 || (c->state == WRITING && c->writes == 0))
    close_conn(c);
}

/* Send n bytes of data (taking ownership of it). */
static void send_raw(struct kcm_server_conn *c, char *data, size_t n) {
  struct write_req *wr;
  uv_buf_t b;
  if (c->closing || !(wr = malloc(sizeof(*wr)))) {
    free(data);
    close_conn(c);
    return;
  }
  wr->c = c;
  wr->data = data;
  b = uv_buf_init(data, (unsigned)n);
  if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, on_written)) {
    free(data);
    free(wr);
    close_conn(c);
    return;
  }
  c->writes++;
}

/* Send what the TLS session has for the peer. */
static void flush_tls(struct kcm_server_conn *c) {
  size_t n;
  while (!c->closing && (n = kcm_tls_session_pending(c->tls)) > 0) {
    char *data = malloc(n);
    if (!data) {
      close_conn(c);
      return;
    }
    send_raw(c, data, kcm_tls_session_drain(c->tls, data, n));
  }
}

static void on_timeout(uv_timer_t *t) {
  struct kcm_server_conn *c = t->data;
  if (c->state == READING)
    c->s->stats.timed_out++;
  close_conn(c);
}

/* Send status and body, then close once written. */
static void send_response(struct kcm_server_conn *c, int status, const char *content_type,
                          const struct kcm_buf *body, bool head) {
  struct kcm_buf out = KCM_BUF_INIT(MAX_BODY + 512);
  size_t n = body ? body->len : 0;
  c->state = WRITING;
  uv_read_stop((uv_stream_t *)&c->tcp);
  /* A peer that does not read its answer is not kept either. */
  uv_timer_start(&c->timer, on_timeout, c->s->o.head_timeout_ms * 2, 0);
  if (kcm_buf_appendf(&out,
                      "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                      "Cache-Control: no-cache, private\r\nX-Content-Type-Options: nosniff\r\n"
                      "Connection: close\r\n\r\n",
                      status, reason(status), content_type, n) ||
      (!head && n && kcm_buf_append(&out, body->data, n))) {
    kcm_buf_release(&out);
    close_conn(c);
    return;
  }
  if (c->tls) {
    int rc = kcm_tls_session_write(c->tls, out.data, out.len);
    kcm_buf_release(&out);
    if (rc) {
      close_conn(c);
      return;
    }
    kcm_tls_session_shutdown(c->tls);
    flush_tls(c);
  } else {
    size_t len = out.len;
    send_raw(c, kcm_buf_take(&out), len);
  }
  if (!c->closing && c->writes == 0)
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

/* A control byte other than tab: never part of a header or request line. */
static bool has_control(const char *p) {
  for (; *p; p++)
    if (((unsigned char)*p < 0x20 && *p != '\t') || *p == 0x7f)
      return true;
  return false;
}

static bool is_token_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

/* Read the header lines in [p, end), each ending "\r\n", keeping the
 * first Authorization. Returns 0 or -1 for a malformed line. */
static int read_headers(char *p, char *end, const char **authorization) {
  while (p < end) {
    char *eol = strstr(p, "\r\n"), *colon, *v, *ve;
    if (!eol || eol >= end)
      return -1;
    *eol = '\0';
    colon = p;
    while (is_token_char(*colon))
      colon++;
    if (colon == p || *colon != ':' || has_control(colon))
      return -1;
    *colon = '\0';
    for (v = colon + 1; *v == ' ' || *v == '\t'; v++)
      ;
    for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
      ;
    *ve = '\0';
    if (!*authorization && !strcasecmp(p, "authorization"))
      *authorization = v;
    p = eol + 2;
  }
  return 0;
}

int kcm_server_parse_head(char *head, size_t len, struct kcm_server_request *req) {
  char *end = head + len, *eol, *sp1, *sp2, *q;
  const char *authorization = NULL;
  if (len < 4 || memcmp(end - 4, "\r\n\r\n", 4) || memchr(head, '\0', len))
    return 400;
  end[-2] = '\0'; /* the blank line: the headers end before it */
  eol = strstr(head, "\r\n");
  if (!eol)
    return 400;
  *eol = '\0';
  if (has_control(head))
    return 400;
  sp1 = strchr(head, ' ');
  sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
  if (!sp1 || !sp2 || (strcmp(sp2 + 1, "HTTP/1.1") && strcmp(sp2 + 1, "HTTP/1.0")) ||
      sp1[1] != '/' || read_headers(eol + 2, end - 2, &authorization))
    return 400;
  *sp1 = *sp2 = '\0';
  if (strcmp(head, "GET") && strcmp(head, "HEAD"))
    return 405;
  q = strchr(sp1 + 1, '?');
  if (q)
    *q = '\0';
  req->method = head;
  req->path = sp1 + 1;
  req->query = q ? q + 1 : "";
  req->authorization = authorization;
  return 0;
}

/* The head is complete: parse it and hand the exchange to the handler. */
static void serve(struct kcm_server_conn *c, size_t head_len) {
  struct kcm_server *s = c->s;
  int status = kcm_server_parse_head(c->in.data, head_len, &c->req);
  if (status) {
    send_text(c, status, status == 405 ? "method not allowed\n" : "bad request\n");
    return;
  }
  if (c->tls && kcm_tls_session_peer(c->tls, &c->cert)) {
    close_conn(c);
    return;
  }
  c->req.peer = c->addr;
  c->req.cert = &c->cert;
  c->resp.status = 200;
  c->resp.content_type = "text/plain; charset=utf-8";
  kcm_buf_init(&c->resp.body, MAX_BODY);
  c->state = HANDLING;
  uv_read_stop((uv_stream_t *)&c->tcp);
  uv_timer_stop(&c->timer);
  s->o.handler(s->o.data, (struct kcm_server_exchange *)(void *)c, &c->req, &c->resp);
}

void kcm_server_reply(struct kcm_server_exchange *x) {
  struct kcm_server_conn *c = conn_of(x);
  if (c->state != HANDLING)
    return;
  c->s->stats.served++;
  if (c->closing) { /* the server closed while the handler worked */
    c->state = WRITING;
    if (c->handles == 0)
      free_conn(c);
    return;
  }
  send_response(c, c->resp.status, c->resp.content_type, &c->resp.body,
                !strcmp(c->req.method, "HEAD"));
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  static char slab[4096];
  (void)h;
  (void)suggested;
  *buf = uv_buf_init(slab, sizeof(slab));
}

/* Plaintext arrived: keep it, and serve once the head is complete. */
static int take_plain(struct kcm_server_conn *c, const char *p, size_t n) {
  if (kcm_buf_append(&c->in, p, n)) {
    send_text(c, 431, "request too large\n");
    return -1;
  }
  return 0;
}

/* Ciphertext arrived: run the handshake, decrypt, answer the handshake. */
static int take_tls(struct kcm_server_conn *c, const char *p, size_t n) {
  char plain[4096];
  int got;
  if (!kcm_tls_session_established(c->tls) && c->in.len == 0 && p[0] >= 'A' && p[0] <= 'Z') {
    /* Plain HTTP on the TLS port: say so, as Go's servers do. */
    static const char msg[] = "HTTP/1.0 400 Bad Request\r\n\r\n"
                              "Client sent an HTTP request to an HTTPS server.\n";
    char *copy = strdup(msg);
    c->state = WRITING;
    if (copy)
      send_raw(c, copy, sizeof(msg) - 1);
    else
      close_conn(c);
    return -1;
  }
  if (kcm_tls_session_feed(c->tls, p, n)) {
    close_conn(c);
    return -1;
  }
  while ((got = kcm_tls_session_read(c->tls, plain, sizeof(plain), NULL)) > 0)
    if (take_plain(c, plain, (size_t)got))
      return -1;
  flush_tls(c);
  if (got < 0) {
    close_conn(c);
    return -1;
  }
  return 0;
}

static void on_read(uv_stream_t *stream, ssize_t n, const uv_buf_t *buf) {
  struct kcm_server_conn *c = stream->data;
  const char *end;
  if (n < 0) {
    close_conn(c);
    return;
  }
  if (n == 0 || c->state != READING || c->closing)
    return;
  if ((c->tls ? take_tls : take_plain)(c, buf->base, (size_t)n) || c->closing ||
      c->state != READING || !c->in.len)
    return;
  end = memmem(c->in.data, c->in.len, "\r\n\r\n", 4);
  if (end)
    serve(c, (size_t)(end - c->in.data) + 4);
}

/* Close the oldest connection still waiting for its head, of peer p (or of
 * anyone). Returns it, or NULL if there is none. */
static struct kcm_server_conn *displace(struct kcm_server *s, const struct peer *p) {
  struct kcm_server_conn *c;
  for (c = s->oldest; c; c = c->newer)
    if (!c->closing && c->state == READING && (!p || c->peer == p)) {
      close_conn(c);
      return c;
    }
  return NULL;
}

static void accept_failed(struct kcm_server *s, int status) {
  uint64_t now = uv_now(s->loop);
  s->stats.accept_errors++;
  if (s->last_accept_log && now - s->last_accept_log < ACCEPT_LOG_INTERVAL_MS)
    return;
  s->last_accept_log = now;
  kcm_warn("cannot accept a connection address=\"%s\" err=\"%s\" failures=%llu", s->address,
           uv_strerror(status), (unsigned long long)s->stats.accept_errors);
}

static void on_connection(uv_stream_t *server, int status) {
  struct kcm_server *s = server->data;
  struct kcm_server_conn *c, *gone;
  if (status < 0) {
    accept_failed(s, status);
    return;
  }
  if (s->closing || !(c = calloc(1, sizeof(*c))))
    return;
  c->s = s;
  kcm_buf_init(&c->in, MAX_HEAD);
  uv_tcp_init(s->loop, &c->tcp);
  uv_timer_init(s->loop, &c->timer);
  c->tcp.data = c->timer.data = c;
  c->handles = 2;
  c->older = s->newest;
  if (s->newest)
    s->newest->newer = c;
  else
    s->oldest = c;
  s->newest = c;
  s->connections++;
  s->open++;
  if ((status = uv_accept(server, (uv_stream_t *)&c->tcp))) {
    accept_failed(s, status);
    close_conn(c);
    return;
  }
  s->stats.accepted++;
  peer_address(&c->tcp, c->addr, sizeof(c->addr));
  if (!(c->peer = peer_get(s, c->addr))) {
    close_conn(c);
    return;
  }
  c->peer->open++;
  /* Over a limit, the oldest connection still waiting for its head goes:
   * the peer's own first. When that is this one, it is refused. */
  gone = NULL;
  if (c->peer->open > s->o.max_per_peer)
    gone = displace(s, c->peer);
  else if (s->open > s->o.max_connections)
    gone = displace(s, NULL);
  if (gone == c) {
    s->stats.refused++;
    return;
  }
  if (gone)
    s->stats.displaced++;
  if (s->o.tls && !(c->tls = kcm_tls_session_new(s->o.tls))) {
    close_conn(c);
    return;
  }
  uv_timer_start(&c->timer, on_timeout, s->o.head_timeout_ms, 0);
  uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

int kcm_server_listen(struct kcm_server *s, uv_loop_t *loop, const struct kcm_server_options *o,
                      const char **err) {
  struct sockaddr_storage sa;
  struct sockaddr_storage bound;
  int namelen = sizeof(bound), port, rc;
  char host[64];

  memset(s, 0, sizeof(*s));
  if (kcm_server_parse_address(o->address, host, sizeof(host), &port)) {
    *err = "not an address of the form [host]:port";
    return KCM_EINVAL;
  }
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&sa) &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&sa)) {
    *err = "not an IP address";
    return KCM_EINVAL;
  }
  s->loop = loop;
  s->o = *o;
  if (!s->o.max_connections)
    s->o.max_connections = DEFAULT_MAX_CONNECTIONS;
  if (!s->o.max_per_peer)
    s->o.max_per_peer = DEFAULT_MAX_PER_PEER;
  if (!s->o.head_timeout_ms)
    s->o.head_timeout_ms = DEFAULT_HEAD_TIMEOUT_MS;
  kcm_map_init(&s->peers, &peer_type);
  uv_tcp_init(loop, &s->tcp);
  s->tcp.data = s;
  s->listening = true;
  if ((rc = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&sa, 0)) ||
      (rc = uv_listen((uv_stream_t *)&s->tcp, 511, on_connection))) {
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
  kcm_map_release(&s->peers);
  maybe_closed(s);
}

void kcm_server_close(struct kcm_server *s, void (*on_closed)(struct kcm_server *s)) {
  struct kcm_server_conn *c, *next;
  if (s->closing)
    return;
  s->closing = true;
  s->on_closed = on_closed;
  for (c = s->oldest; c; c = next) {
    next = c->newer;
    close_conn(c);
  }
  uv_close((uv_handle_t *)&s->tcp, on_listener_closed);
}
