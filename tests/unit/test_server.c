/*
 * Tests for the probe and metrics server: addresses, requests handed to the
 * handler (at once or later), answers, refusals, closing with connections
 * open; TLS with a made or given certificate, client certificates, reload;
 * and what a hostile peer can do: floods of idle and half-open connections,
 * heads that never end, and running out of file descriptors.
 *
 * Plain-HTTP tests drive the loop and a libuv client on one thread. The
 * TLS and flood tests run the server's loop on a thread of its own and talk
 * to it with blocking sockets, as an outside client would.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "kcm/error.h"
#include "kcm/server.h"
#include "kcm/tls.h"

static void addresses(void **state) {
  char host[64];
  int port;
  assert_int_equal(kcm_server_parse_address(":8081", host, sizeof(host), &port), 0);
  assert_string_equal(host, "0.0.0.0");
  assert_int_equal(port, 8081);
  assert_int_equal(kcm_server_parse_address("127.0.0.1:0", host, sizeof(host), &port), 0);
  assert_string_equal(host, "127.0.0.1");
  assert_int_equal(port, 0);
  assert_int_equal(kcm_server_parse_address("[::1]:9", host, sizeof(host), &port), 0);
  assert_string_equal(host, "::1");
  assert_int_equal(kcm_server_parse_address("8081", host, sizeof(host), &port), KCM_EINVAL);
  assert_int_equal(kcm_server_parse_address(":65536", host, sizeof(host), &port), KCM_EINVAL);
  assert_int_equal(kcm_server_parse_address(":x", host, sizeof(host), &port), KCM_EINVAL);
  assert_int_equal(kcm_server_parse_address(":", host, sizeof(host), &port), KCM_EINVAL);
  assert_int_equal(kcm_server_parse_address("[::1:9", host, sizeof(host), &port), KCM_EINVAL);
}

/* --- a raw TCP client on the test's loop ------------------------------------------------------ */

struct fetch {
  uv_tcp_t tcp;
  uv_connect_t connect;
  uv_write_t write;
  char request[17000];
  char answer[8192];
  size_t len;
  bool done;
};

static void fetch_closed(uv_handle_t *h) { ((struct fetch *)h->data)->done = true; }

static void fetch_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  struct fetch *f = h->data;
  (void)suggested;
  *buf = uv_buf_init(f->answer + f->len, (unsigned)(sizeof(f->answer) - 1 - f->len));
}

static void fetch_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  struct fetch *f = s->data;
  (void)buf;
  if (n > 0) {
    f->len += (size_t)n;
    f->answer[f->len] = '\0';
  } else if (n < 0) {
    uv_close((uv_handle_t *)s, fetch_closed);
  }
}

static void fetch_connected(uv_connect_t *req, int status) {
  struct fetch *f = req->data;
  uv_buf_t b = uv_buf_init(f->request, (unsigned)strlen(f->request));
  assert_int_equal(status, 0);
  uv_write(&f->write, (uv_stream_t *)&f->tcp, &b, 1, NULL);
  uv_read_start((uv_stream_t *)&f->tcp, fetch_alloc, fetch_read);
}

static void fetch_start(uv_loop_t *loop, int port, const char *request, struct fetch *f) {
  struct sockaddr_in sa;
  memset(f, 0, sizeof(*f));
  snprintf(f->request, sizeof(f->request), "%s", request);
  uv_ip4_addr("127.0.0.1", port, &sa);
  uv_tcp_init(loop, &f->tcp);
  f->tcp.data = f->connect.data = f;
  uv_tcp_connect(&f->connect, &f->tcp, (const struct sockaddr *)&sa, fetch_connected);
}

/* Send a raw request and read the answer until the server closes. */
static void fetch(uv_loop_t *loop, int port, const char *request, struct fetch *f) {
  fetch_start(loop, port, request, f);
  while (!f->done)
    uv_run(loop, UV_RUN_ONCE);
}

/* --- handlers ----------------------------------------------------------------------------- */

struct later {
  uv_timer_t timer;
  struct kcm_server_exchange *x;
};

static void later_closed(uv_handle_t *h) { free(h->data); }

static void reply_later(uv_timer_t *t) {
  struct later *l = t->data;
  kcm_server_reply(l->x);
  uv_close((uv_handle_t *)&l->timer, later_closed);
}

static int calls;

/* /hello answers at once, /later 20 ms later (as after an authentication
 * round trip), /echo says what the server saw of the request and its
 * sender; anything else is 404. */
static void handler(void *data, struct kcm_server_exchange *x,
                    const struct kcm_server_request *req, struct kcm_server_response *resp) {
  uv_loop_t *loop = data;
  calls++;
  if (!strcmp(req->path, "/echo")) {
    char **g;
    kcm_buf_appendf(&resp->body, "peer=%s cert=%d user=%s groups=", req->peer,
                    (int)req->cert->state, req->cert->user ? req->cert->user : "");
    for (g = req->cert->groups; g && *g; g++)
      kcm_buf_appendf(&resp->body, "%s%s", *g, g[1] ? "," : "");
    kcm_buf_appendf(&resp->body, " authorization=%s\n",
                    req->authorization ? req->authorization : "-");
  } else if (!strcmp(req->path, "/later")) {
    struct later *l = calloc(1, sizeof(*l));
    assert_non_null(l);
    l->x = x;
    uv_timer_init(loop, &l->timer);
    l->timer.data = l;
    kcm_buf_append_str(&resp->body, "later\n");
    uv_timer_start(&l->timer, reply_later, 20, 0);
    return;
  } else if (!strcmp(req->path, "/hello")) {
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    kcm_buf_appendf(&resp->body, "%s %s [%s]\n", req->method, req->path, req->query);
  } else {
    kcm_server_not_found(resp);
  }
  kcm_server_reply(x);
}

static bool closed;
static void on_closed(struct kcm_server *s) { closed = true; }

static struct kcm_server_options plain(uv_loop_t *loop, const char *address) {
  struct kcm_server_options o = {0};
  o.address = address;
  o.handler = handler;
  o.data = loop;
  return o;
}

/* --- plain HTTP ----------------------------------------------------------------------------- */

static void serves_and_refuses(void **state) {
  uv_loop_t loop;
  struct kcm_server s, other, third;
  struct kcm_server_options o;
  struct fetch f;
  const char *err = NULL;
  char big[17000];

  calls = 0;
  uv_loop_init(&loop);
  o = plain(&loop, "127.0.0.1:0");
  assert_int_equal(kcm_server_listen(&s, &loop, &o, &err), 0);
  assert_true(s.port > 0);

  fetch(&loop, s.port, "GET /hello?verbose&x=1 HTTP/1.1\r\nHost: x\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 200 OK\r\n"));
  assert_non_null(strstr(f.answer, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  assert_non_null(strstr(f.answer, "Content-Length: 25\r\n"));
  assert_non_null(strstr(f.answer, "Connection: close\r\n"));
  /* as k8s.io/apiserver answers: nothing kept by a cache on the way */
  assert_non_null(strstr(f.answer, "Cache-Control: no-cache, private\r\n"));
  assert_non_null(strstr(f.answer, "\r\n\r\nGET /hello [verbose&x=1]\n"));

  fetch(&loop, s.port, "HEAD /hello HTTP/1.0\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 200 OK\r\n"));
  assert_non_null(strstr(f.answer, "Content-Length: 15\r\n"));
  assert_string_equal(strstr(f.answer, "\r\n\r\n"), "\r\n\r\n");

  fetch(&loop, s.port, "GET /nope HTTP/1.1\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 404 Not Found\r\n"));
  assert_int_equal(calls, 3);

  /* Answered later, after the handler returned. */
  fetch(&loop, s.port, "GET /later HTTP/1.1\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 200 OK\r\n"));
  assert_non_null(strstr(f.answer, "\r\n\r\nlater\n"));

  /* Headers: the first Authorization is kept, trimmed; the name in any case. */
  fetch(&loop, s.port,
        "GET /echo HTTP/1.1\r\nHost: x\r\nauthorization:  Bearer abc \r\n"
        "Authorization: Bearer second\r\n\r\n",
        &f);
  assert_non_null(strstr(f.answer, "peer=127.0.0.1 cert=0 user= groups= "
                                   "authorization=Bearer abc\n"));
  assert_int_equal(calls, 5);

  /* Refused before the handler. */
  fetch(&loop, s.port, "POST /hello HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 405 Method Not Allowed\r\n"));
  fetch(&loop, s.port, "nonsense\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 400 Bad Request\r\n"));
  fetch(&loop, s.port, "GET /hello HTTP/1.1\r\nno colon here\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 400 Bad Request\r\n"));
  fetch(&loop, s.port, "GET /hello HTTP/1.1\r\nAuthorization: Bearer x\nT\rH\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 400 Bad Request\r\n"));
  fetch(&loop, s.port, "GET /hel\x01lo HTTP/1.1\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 400 Bad Request\r\n"));
  fetch(&loop, s.port, "GET /hello HTTP/2.0\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 400 Bad Request\r\n"));
  fetch(&loop, s.port, "GET http://x/hello HTTP/1.1\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 400 Bad Request\r\n"));
  memset(big, 'a', sizeof(big) - 1);
  memcpy(big, "GET /", 5);
  big[sizeof(big) - 1] = '\0';
  fetch(&loop, s.port, big, &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 431 Request Header Fields Too Large\r\n"));
  assert_int_equal(calls, 5);

  /* The port is taken now. */
  {
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", s.port);
    o.address = addr;
    assert_int_equal(kcm_server_listen(&other, &loop, &o, &err), KCM_EIO);
    assert_non_null(strstr(err, "address already in use"));
    o.address = "localhost:1";
    assert_int_equal(kcm_server_listen(&third, &loop, &o, &err), KCM_EINVAL);
  }

  closed = false;
  kcm_server_close(&s, on_closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_true(closed);
  assert_int_equal(s.stats.served, 5);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void closing_drops_idle_connections(void **state) {
  uv_loop_t loop;
  struct kcm_server s;
  struct kcm_server_options o;
  struct fetch f;
  const char *err = NULL;
  calls = 0;
  uv_loop_init(&loop);
  o = plain(&loop, "127.0.0.1:0");
  assert_int_equal(kcm_server_listen(&s, &loop, &o, &err), 0);
  /* A client that sends half a request and waits. */
  fetch_start(&loop, s.port, "GET /hello HTTP/1.1\r\n", &f);
  while (s.connections == 0)
    uv_run(&loop, UV_RUN_ONCE);
  closed = false;
  kcm_server_close(&s, on_closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_true(closed);
  assert_true(f.done); /* the client saw the connection end */
  assert_int_equal(f.len, 0);
  assert_int_equal(calls, 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

/* An exchange the handler still holds when the server closes is freed when
 * the handler answers it (the sanitizer build checks nothing leaks). */
static void closing_waits_for_exchanges_in_hand(void **state) {
  uv_loop_t loop;
  struct kcm_server s;
  struct kcm_server_options o;
  struct fetch f;
  const char *err = NULL;
  calls = 0;
  uv_loop_init(&loop);
  o = plain(&loop, "127.0.0.1:0");
  assert_int_equal(kcm_server_listen(&s, &loop, &o, &err), 0);
  fetch_start(&loop, s.port, "GET /later HTTP/1.1\r\n\r\n", &f);
  while (calls == 0)
    uv_run(&loop, UV_RUN_ONCE);
  closed = false;
  kcm_server_close(&s, on_closed);
  while (!f.done)
    uv_run(&loop, UV_RUN_ONCE);
  assert_false(closed); /* the exchange is still in the handler's hands */
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_true(closed);
  assert_int_equal(f.len, 0); /* the connection was gone: nothing was sent */
  assert_int_equal(s.connections, 0);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void health_checks(void **state) {
  struct kcm_server_check checks[] = {{"ping", true}, {"informer-sync", false}};
  struct kcm_server_request req = {"GET", "/readyz", "", NULL, "127.0.0.1", NULL};
  struct kcm_server_response resp = {200, NULL, KCM_BUF_INIT(4096)};
  kcm_server_checks("readyz", checks, 2, &req, &resp);
  assert_int_equal(resp.status, 500);
  assert_string_equal(resp.body.data, "[+]ping ok\n[-]informer-sync failed: reason withheld\n"
                                      "readyz check failed\n");
  kcm_buf_reset(&resp.body);
  req.query = "exclude=informer-sync";
  kcm_server_checks("readyz", checks, 2, &req, &resp);
  assert_int_equal(resp.status, 200);
  assert_string_equal(resp.body.data, "ok");
  kcm_buf_reset(&resp.body);
  req.path = "/readyz/ping";
  kcm_server_checks("readyz", checks, 2, &req, &resp);
  assert_int_equal(resp.status, 200);
  kcm_buf_reset(&resp.body);
  req.path = "/readyz/nope";
  kcm_server_checks("readyz", checks, 2, &req, &resp);
  assert_int_equal(resp.status, 404);
  assert_true(kcm_server_path_under("/readyz/x", "/readyz"));
  assert_false(kcm_server_path_under("/readyzx", "/readyz"));
  kcm_buf_release(&resp.body);
}

/* --- a server on a thread of its own ------------------------------------------------------------ */

struct running {
  uv_loop_t loop;
  struct kcm_server s;
  uv_async_t stop;
  uv_thread_t thread;
};

static void on_stop(uv_async_t *a) {
  struct running *r = a->data;
  kcm_server_close(&r->s, NULL);
  uv_close((uv_handle_t *)&r->stop, NULL);
}

static void run_loop(void *arg) {
  struct running *r = arg;
  uv_run(&r->loop, UV_RUN_DEFAULT);
}

static void start(struct running *r, struct kcm_server_options o) {
  const char *err = NULL;
  uv_loop_init(&r->loop);
  o.handler = handler;
  o.data = &r->loop;
  if (!o.address)
    o.address = "127.0.0.1:0";
  assert_int_equal(kcm_server_listen(&r->s, &r->loop, &o, &err), 0);
  uv_async_init(&r->loop, &r->stop, on_stop);
  r->stop.data = r;
  assert_int_equal(uv_thread_create(&r->thread, run_loop, r), 0);
}

static void stop(struct running *r) {
  uv_async_send(&r->stop);
  uv_thread_join(&r->thread);
  assert_int_equal(r->s.connections, 0);
  assert_int_equal(uv_loop_close(&r->loop), 0);
}

/* A blocking connection from source address `from` (NULL: any); reads
 * give up after 10 s, so a test that fails does not hang. */
static int dial(const char *from, int port) {
  struct sockaddr_in sa = {0}, src = {0};
  struct timeval tv = {10, 0};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (from) {
    src.sin_family = AF_INET;
    assert_int_equal(inet_pton(AF_INET, from, &src.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof(src)), 0);
  }
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  return fd;
}

/* Read until the peer closes (or 10 s pass); returns the bytes read, or -1
 * for a reset or a timeout. */
static ssize_t read_all(int fd, char *buf, size_t cap) {
  size_t n = 0;
  for (;;) {
    ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
    if (r < 0)
      return -1;
    if (r == 0)
      break;
    n += (size_t)r;
  }
  buf[n] = '\0';
  return (ssize_t)n;
}

/* --- TLS clients ------------------------------------------------------------------------------ */

static SSL_CTX *client_ctx(const char *trusted_pem, X509 *cert, EVP_PKEY *key) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  assert_non_null(ctx);
  if (trusted_pem) {
    BIO *b = BIO_new_mem_buf(trusted_pem, -1);
    X509 *ca = PEM_read_bio_X509(b, NULL, NULL, NULL);
    assert_non_null(ca);
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
    X509_free(ca);
    BIO_free(b);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  }
  if (cert) {
    assert_int_equal(SSL_CTX_use_certificate(ctx, cert), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(ctx, key), 1);
  }
  return ctx;
}

/* GET path over TLS from `from`, verifying the server as `host` when the
 * context trusts a certificate. Returns the answer (static), or NULL when
 * the handshake failed. */
static const char *tls_get(SSL_CTX *ctx, const char *from, int port, const char *host,
                           const char *path) {
  static char answer[8192];
  char req[256];
  size_t n = 0, got;
  int fd = dial(from, port);
  SSL *ssl = SSL_new(ctx);
  unsigned char ip[16];
  SSL_set_fd(ssl, fd);
  if (inet_pton(AF_INET, host, ip) == 1)
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host);
  else
    SSL_set1_host(ssl, host);
  if (SSL_connect(ssl) != 1) {
    SSL_free(ssl);
    close(fd);
    ERR_clear_error();
    return NULL;
  }
  snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host);
  assert_int_equal(SSL_write(ssl, req, (int)strlen(req)), (int)strlen(req));
  while (n < sizeof(answer) - 1 && SSL_read_ex(ssl, answer + n, sizeof(answer) - 1 - n, &got))
    n += got;
  answer[n] = '\0';
  SSL_free(ssl);
  close(fd);
  ERR_clear_error();
  return answer;
}

/* A certificate for cn (and organizations), signed by issuer (itself when
 * NULL); a CA when ca is set. */
static X509 *make_cert(const char *cn, const char *const *orgs, X509 *issuer,
                       EVP_PKEY *issuer_key, EVP_PKEY *key, bool ca, long valid_s) {
  X509 *x = X509_new();
  X509_NAME *name = X509_get_subject_name(x);
  X509V3_CTX v3;
  X509_EXTENSION *ext;
  static long serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
  X509_set_version(x, 2);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), valid_s);
  X509_set_pubkey(x, key);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0);
  for (; orgs && *orgs; orgs++)
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)*orgs, -1, -1,
                               0);
  X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name);
  X509V3_set_ctx(&v3, issuer ? issuer : x, x, NULL, NULL, 0);
  ext = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints,
                            ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  if (!ca) {
    ext = X509V3_EXT_conf_nid(NULL, &v3, NID_ext_key_usage, "clientAuth,serverAuth");
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
    ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
    X509_add_ext(x, ext, -1);
    X509_EXTENSION_free(ext);
  }
  assert_true(X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()) > 0);
  return x;
}

static void write_pem(const char *path, X509 *cert, EVP_PKEY *key) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  if (cert)
    PEM_write_X509(f, cert);
  if (key)
    PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
  fclose(f);
}

static char *temp_dir(void) {
  char tmpl[] = "/tmp/kcm-test-server-XXXXXX";
  char *d = mkdtemp(tmpl);
  assert_non_null(d);
  return strdup(d);
}

static void remove_dir(char *dir) {
  char cmd[300];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  free(dir);
}

/* --- TLS -------------------------------------------------------------------------------------- */

static void tls_serves_a_made_certificate_kept_in_cert_dir(void **state) {
  char *dir = temp_dir(), path[400], *pem;
  struct kcm_tls_options to = {0};
  struct kcm_tls *tls, *again;
  struct kcm_server_options o = {0};
  struct running r;
  struct stat st;
  const char *answer;
  char *err = NULL;
  SSL_CTX *trusting, *other;

  to.cert_dir = dir;
  assert_int_equal(kcm_tls_new(&tls, &to, &err), 0);
  snprintf(path, sizeof(path), "%s/kcm.key", dir);
  assert_int_equal(stat(path, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0600); /* the key is its owner's only */
  snprintf(path, sizeof(path), "%s/kcm.crt", dir);
  assert_int_equal(stat(path, &st), 0);
  /* A second start serves the same certificate. */
  assert_int_equal(kcm_tls_new(&again, &to, &err), 0);
  assert_string_equal(kcm_tls_cert_pem(again), kcm_tls_cert_pem(tls));
  kcm_tls_free(again);
  pem = strdup(kcm_tls_cert_pem(tls));

  o.tls = tls;
  start(&r, o);
  trusting = client_ctx(pem, NULL, NULL);
  answer = tls_get(trusting, NULL, r.s.port, "localhost", "/hello");
  assert_non_null(answer);
  assert_non_null(strstr(answer, "HTTP/1.1 200 OK\r\n"));
  assert_non_null(strstr(answer, "\r\n\r\nGET /hello []\n"));
  assert_non_null(tls_get(trusting, NULL, r.s.port, "127.0.0.1", "/hello"));
  /* It names localhost and 127.0.0.1 only. */
  assert_null(tls_get(trusting, NULL, r.s.port, "kcm.example", "/hello"));
  /* A client that trusts something else refuses it. */
  again = NULL;
  to.cert_dir = NULL; /* in memory: a new pair each time */
  assert_int_equal(kcm_tls_new(&again, &to, &err), 0);
  assert_string_not_equal(kcm_tls_cert_pem(again), pem);
  other = client_ctx(kcm_tls_cert_pem(again), NULL, NULL);
  assert_null(tls_get(other, NULL, r.s.port, "localhost", "/hello"));
  stop(&r);
  SSL_CTX_free(trusting);
  SSL_CTX_free(other);
  kcm_tls_free(again);
  kcm_tls_free(tls);
  free(pem);
  remove_dir(dir);
}

static void plain_http_on_the_tls_port_is_told_so(void **state) {
  struct kcm_tls_options to = {0};
  struct kcm_server_options o = {0};
  struct running r;
  char *err = NULL, answer[1024];
  int fd;
  assert_int_equal(kcm_tls_new(&o.tls, &to, &err), 0);
  start(&r, o);
  fd = dial(NULL, r.s.port);
  assert_int_equal(send(fd, "GET /hello HTTP/1.1\r\n\r\n", 23, 0), 23);
  assert_true(read_all(fd, answer, sizeof(answer)) > 0);
  assert_string_equal(answer, "HTTP/1.0 400 Bad Request\r\n\r\n"
                              "Client sent an HTTP request to an HTTPS server.\n");
  close(fd);
  /* Garbage where a handshake should be: the connection ends, no answer. */
  fd = dial(NULL, r.s.port);
  assert_int_equal(send(fd, "\x16\x03\x01\x00\x05hello", 10, 0), 10);
  assert_true(read_all(fd, answer, sizeof(answer)) <= 7); /* nothing, or an alert */
  close(fd);
  stop(&r);
  assert_int_equal(r.s.stats.served, 0);
  kcm_tls_free(o.tls);
}

static void client_certificates_are_verified_not_required(void **state) {
  static const char *const groups[] = {"team-a", "system:masters", NULL};
  char *dir = temp_dir(), ca_path[400], *err = NULL;
  EVP_PKEY *ca_key = EVP_EC_gen("P-256"), *other_key = EVP_EC_gen("P-256");
  EVP_PKEY *alice_key = EVP_EC_gen("P-256");
  X509 *ca = make_cert("test-ca", NULL, NULL, NULL, ca_key, true, 3600);
  X509 *other = make_cert("other-ca", NULL, NULL, NULL, other_key, true, 3600);
  X509 *alice = make_cert("alice", groups, ca, ca_key, alice_key, false, 3600);
  X509 *mallory = make_cert("mallory", groups, other, other_key, alice_key, false, 3600);
  X509 *expired = make_cert("old", NULL, ca, ca_key, alice_key, false, -60);
  struct kcm_tls_options to = {0};
  struct kcm_server_options o = {0};
  struct running r;
  SSL_CTX *none, *good, *bad, *old;
  const char *answer;

  snprintf(ca_path, sizeof(ca_path), "%s/ca.crt", dir);
  write_pem(ca_path, ca, NULL);
  to.client_ca_file = ca_path;
  assert_int_equal(kcm_tls_new(&o.tls, &to, &err), 0);
  start(&r, o);
  none = client_ctx(NULL, NULL, NULL);
  good = client_ctx(NULL, alice, alice_key);
  bad = client_ctx(NULL, mallory, alice_key);
  old = client_ctx(NULL, expired, alice_key);

  answer = tls_get(none, NULL, r.s.port, "localhost", "/echo");
  assert_non_null(answer);
  assert_non_null(strstr(answer, "cert=0 user= groups= "));
  answer = tls_get(good, NULL, r.s.port, "localhost", "/echo");
  assert_non_null(answer);
  assert_non_null(strstr(answer, "cert=1 user=alice groups=team-a,system:masters "));
  answer = tls_get(bad, NULL, r.s.port, "localhost", "/echo");
  assert_non_null(answer);
  assert_non_null(strstr(answer, "cert=2 user=unable to verify the first certificate groups= "));
  answer = tls_get(old, NULL, r.s.port, "localhost", "/echo");
  assert_non_null(answer);
  assert_non_null(strstr(answer, "cert=2 user=certificate has expired groups= "));
  stop(&r);

  /* Without a client CA, no certificate is asked for: none is seen. */
  kcm_tls_free(o.tls);
  to.client_ca_file = NULL;
  assert_int_equal(kcm_tls_new(&o.tls, &to, &err), 0);
  start(&r, o);
  answer = tls_get(good, NULL, r.s.port, "localhost", "/echo");
  assert_non_null(answer);
  assert_non_null(strstr(answer, "cert=0 user= groups= "));
  stop(&r);
  kcm_tls_free(o.tls);

  /* An unreadable client CA file is an error that names it. */
  to.client_ca_file = "/nonexistent/ca.crt";
  assert_int_equal(kcm_tls_new(&o.tls, &to, &err), KCM_EINVAL);
  assert_non_null(strstr(err, "--client-ca-file /nonexistent/ca.crt"));
  free(err);

  SSL_CTX_free(none);
  SSL_CTX_free(good);
  SSL_CTX_free(bad);
  SSL_CTX_free(old);
  X509_free(ca);
  X509_free(other);
  X509_free(alice);
  X509_free(mallory);
  X509_free(expired);
  EVP_PKEY_free(ca_key);
  EVP_PKEY_free(other_key);
  EVP_PKEY_free(alice_key);
  remove_dir(dir);
}

/* Files given by name are served, read again when they change, and kept
 * when the new ones are broken. */
static void given_certificates_are_reloaded(void **state) {
  char *dir = temp_dir(), crt[400], key[400], *err = NULL, *first;
  EVP_PKEY *k1 = EVP_EC_gen("P-256"), *k2 = EVP_EC_gen("P-256");
  X509 *c1 = make_cert("one", NULL, NULL, NULL, k1, false, 3600);
  X509 *c2 = make_cert("two", NULL, NULL, NULL, k2, false, 3600);
  struct kcm_tls_options to = {0};
  struct kcm_tls *tls, *half = NULL;
  struct timespec later[2] = {{0, UTIME_NOW}, {0, 0}};

  snprintf(crt, sizeof(crt), "%s/tls.crt", dir);
  snprintf(key, sizeof(key), "%s/tls.key", dir);
  write_pem(crt, c1, NULL);
  write_pem(key, NULL, k1);
  to.cert_file = crt;
  to.key_file = key;
  assert_int_equal(kcm_tls_new(&tls, &to, &err), 0);
  first = strdup(kcm_tls_cert_pem(tls));
  assert_int_equal(kcm_tls_reload(tls, &err), 0); /* unchanged */

  write_pem(crt, c2, NULL);
  write_pem(key, NULL, k2);
  later[1].tv_sec = time(NULL) + 2; /* a different mtime even within one clock tick */
  utimensat(AT_FDCWD, crt, later, 0);
  {
    int rc = kcm_tls_reload(tls, &err);
    if (rc != 1)
      fprintf(stderr, "reload: %d %s\n", rc, err ? err : "");
    assert_int_equal(rc, 1);
  }
  assert_string_not_equal(kcm_tls_cert_pem(tls), first);

  /* A key that does not match: refused, the served pair kept. */
  write_pem(key, NULL, k1);
  later[1].tv_sec = time(NULL) + 5;
  utimensat(AT_FDCWD, key, later, 0);
  assert_int_equal(kcm_tls_reload(tls, &err), KCM_EINVAL);
  assert_non_null(strstr(err, key));
  assert_non_null(strstr(err, "key values mismatch"));
  free(err);
  assert_int_equal(kcm_tls_reload(tls, &err), 0); /* not tried again until it changes */

  /* Half a pair is refused at the start. */
  to.key_file = NULL;
  assert_int_equal(kcm_tls_new(&half, &to, &err), KCM_EINVAL);
  assert_null(half);
  free(err);
  kcm_tls_free(tls);
  free(first);
  X509_free(c1);
  X509_free(c2);
  EVP_PKEY_free(k1);
  EVP_PKEY_free(k2);
  remove_dir(dir);
}

/* --- hostile peers ----------------------------------------------------------------------------- */

/* 1,000 idle or half-open connections from one address: a probe from
 * another address is served, and so is a new one from the flooding
 * address, which only displaces its own oldest. */
static void a_flood_of_idle_connections_keeps_no_probe_out(void **state) {
  struct kcm_tls_options to = {0};
  struct kcm_server_options o = {0};
  struct running r;
  char *err = NULL;
  SSL_CTX *ctx = client_ctx(NULL, NULL, NULL);
  const char *answer;
  int fds[1000];
  size_t i;

  assert_int_equal(kcm_tls_new(&o.tls, &to, &err), 0);
  start(&r, o);
  for (i = 0; i < 1000; i++) {
    fds[i] = dial("127.0.0.1", r.s.port);
    if (i % 2) /* half of them start a handshake and stop */
      assert_int_equal(send(fds[i], "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11, 0),
                       11);
  }
  answer = tls_get(ctx, "127.0.0.2", r.s.port, "localhost", "/hello");
  assert_non_null(answer);
  assert_non_null(strstr(answer, "HTTP/1.1 200 OK\r\n"));
  answer = tls_get(ctx, "127.0.0.1", r.s.port, "localhost", "/hello");
  assert_non_null(answer);
  assert_non_null(strstr(answer, "HTTP/1.1 200 OK\r\n"));
  for (i = 0; i < 1000; i++)
    close(fds[i]);
  stop(&r);
  /* The flooder kept no more than 64 at a time: the rest were displaced
   * (or refused, when nothing older was waiting). */
  assert_true(r.s.stats.displaced + r.s.stats.refused >= 1000 - 64);
  assert_int_equal(r.s.stats.served, 2);
  SSL_CTX_free(ctx);
  kcm_tls_free(o.tls);
}

/* A head that never ends is dropped when its time is up. */
static void a_slow_head_is_dropped(void **state) {
  struct kcm_server_options o = {0};
  struct running r;
  char answer[256];
  int fd;
  o.head_timeout_ms = 200;
  start(&r, o);
  fd = dial(NULL, r.s.port);
  assert_int_equal(send(fd, "GET /hello HTTP/1.1\r\nHost: x\r\n", 30, 0), 30);
  assert_int_equal(read_all(fd, answer, sizeof(answer)), 0); /* closed, unanswered */
  close(fd);
  stop(&r);
  assert_int_equal(r.s.stats.timed_out, 1);
  assert_int_equal(r.s.stats.served, 0);
}

static bool ticked;
static void on_tick(uv_timer_t *t) { ticked = true; }

/* Out of file descriptors: the loop goes on, the connections that cannot
 * be taken are dropped, and once descriptors are back the server answers
 * again. */
static void running_out_of_descriptors_does_not_stop_the_loop(void **state) {
  uv_loop_t loop;
  struct kcm_server s;
  struct kcm_server_options o;
  struct rlimit old, low;
  uv_timer_t tick;
  struct fetch f;
  const char *err = NULL;
  int fds[40], spare, i, dropped;

  calls = 0;
  uv_loop_init(&loop);
  o = plain(&loop, "127.0.0.1:0");
  assert_int_equal(kcm_server_listen(&s, &loop, &o, &err), 0);
  /* 40 connections wait in the backlog; then only 3 descriptors are left. */
  for (i = 0; i < 40; i++)
    fds[i] = dial(NULL, s.port);
  assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
  spare = open("/dev/null", O_RDONLY | O_CLOEXEC); /* the highest in use, roughly */
  assert_true(spare >= 0);
  low = old;
  low.rlim_cur = (rlim_t)spare + 3;
  close(spare);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
  uv_timer_init(&loop, &tick);
  ticked = false;
  uv_timer_start(&tick, on_tick, 100, 0);
  while (!ticked) /* a spinning accept would never let the timer fire */
    uv_run(&loop, UV_RUN_ONCE);
  assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
  /* A few were accepted; libuv closed the others (its spare descriptor
   * lets it accept and drop them) rather than leave them to spin on. */
  assert_true(s.stats.accepted <= 3);
  for (i = 0, dropped = 0; i < 40; i++) {
    char c;
    ssize_t n = recv(fds[i], &c, 1, MSG_DONTWAIT);
    dropped += n == 0 || (n < 0 && errno == ECONNRESET);
  }
  assert_true(dropped >= 40 - 3);
  for (i = 0; i < 40; i++)
    close(fds[i]);
  fetch(&loop, s.port, "GET /hello HTTP/1.1\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 200 OK\r\n"));
  uv_close((uv_handle_t *)&tick, NULL);
  kcm_server_close(&s, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  struct rlimit nofile;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(addresses),
      cmocka_unit_test(serves_and_refuses),
      cmocka_unit_test(closing_drops_idle_connections),
      cmocka_unit_test(closing_waits_for_exchanges_in_hand),
      cmocka_unit_test(health_checks),
      cmocka_unit_test(tls_serves_a_made_certificate_kept_in_cert_dir),
      cmocka_unit_test(plain_http_on_the_tls_port_is_told_so),
      cmocka_unit_test(client_certificates_are_verified_not_required),
      cmocka_unit_test(given_certificates_are_reloaded),
      cmocka_unit_test(a_flood_of_idle_connections_keeps_no_probe_out),
      cmocka_unit_test(a_slow_head_is_dropped),
      cmocka_unit_test(running_out_of_descriptors_does_not_stop_the_loop),
  };
  /* The flood test holds 1,000 client sockets besides the server's. */
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  return cmocka_run_group_tests(tests, NULL, NULL);
}
