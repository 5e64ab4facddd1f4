/*
 * Tests for the probe and metrics server: addresses, requests handed to the
 * handler, answers, refusals, and closing with connections open.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/server.h"

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

/* --- a raw TCP client -------------------------------------------------------------------- */

struct fetch {
  uv_tcp_t tcp;
  uv_connect_t connect;
  uv_write_t write;
  char request[9100];
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

/* Send a raw request and read the answer until the server closes. */
static void fetch(uv_loop_t *loop, int port, const char *request, struct fetch *f) {
  struct sockaddr_in sa;
  memset(f, 0, sizeof(*f));
  snprintf(f->request, sizeof(f->request), "%s", request);
  uv_ip4_addr("127.0.0.1", port, &sa);
  uv_tcp_init(loop, &f->tcp);
  f->tcp.data = f->connect.data = f;
  uv_tcp_connect(&f->connect, &f->tcp, (const struct sockaddr *)&sa, fetch_connected);
  while (!f->done)
    uv_run(loop, UV_RUN_ONCE);
}

/* --- serving ------------------------------------------------------------------------------ */

static void handler(void *data, const struct kcm_server_request *req,
                    struct kcm_server_response *resp) {
  int *calls = data;
  (*calls)++;
  if (strcmp(req->path, "/hello")) {
    resp->status = 404;
    kcm_buf_append_str(&resp->body, "404 page not found\n");
    return;
  }
  resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
  kcm_buf_appendf(&resp->body, "%s %s [%s]\n", req->method, req->path, req->query);
}

static bool closed;
static void on_closed(struct kcm_server *s) { closed = true; }

static void serves_and_refuses(void **state) {
  uv_loop_t loop;
  struct kcm_server s, other, third;
  struct fetch f;
  const char *err = NULL;
  char big[9000];
  int calls = 0;

  uv_loop_init(&loop);
  assert_int_equal(kcm_server_listen(&s, &loop, "127.0.0.1:0", handler, &calls, &err), 0);
  assert_true(s.port > 0);

  fetch(&loop, s.port, "GET /hello?verbose&x=1 HTTP/1.1\r\nHost: x\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 200 OK\r\n"));
  assert_non_null(strstr(f.answer, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  assert_non_null(strstr(f.answer, "Content-Length: 25\r\n"));
  assert_non_null(strstr(f.answer, "Connection: close\r\n"));
  assert_non_null(strstr(f.answer, "\r\n\r\nGET /hello [verbose&x=1]\n"));

  fetch(&loop, s.port, "HEAD /hello HTTP/1.0\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 200 OK\r\n"));
  assert_non_null(strstr(f.answer, "Content-Length: 15\r\n"));
  assert_non_null(strstr(f.answer, "\r\n\r\n"));
  assert_string_equal(strstr(f.answer, "\r\n\r\n"), "\r\n\r\n");

  fetch(&loop, s.port, "GET /nope HTTP/1.1\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 404 Not Found\r\n"));
  assert_int_equal(calls, 3);

  /* Refused before the handler. */
  fetch(&loop, s.port, "POST /hello HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 405 Method Not Allowed\r\n"));
  fetch(&loop, s.port, "nonsense\r\n\r\n", &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 400 Bad Request\r\n"));
  memset(big, 'a', sizeof(big) - 1);
  memcpy(big, "GET /", 5);
  big[sizeof(big) - 1] = '\0';
  fetch(&loop, s.port, big, &f);
  assert_non_null(strstr(f.answer, "HTTP/1.1 431 Request Header Fields Too Large\r\n"));
  assert_int_equal(calls, 3);

  /* The port is taken now. */
  {
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", s.port);
    assert_int_equal(kcm_server_listen(&other, &loop, addr, handler, &calls, &err), KCM_EIO);
    assert_non_null(strstr(err, "address already in use"));
    assert_int_equal(kcm_server_listen(&third, &loop, "localhost:1", handler, &calls, &err),
                     KCM_EINVAL);
  }

  kcm_server_close(&s, on_closed);
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_true(closed);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static void closing_drops_idle_connections(void **state) {
  uv_loop_t loop;
  struct kcm_server s;
  struct fetch f;
  const char *err = NULL;
  int calls = 0;
  uv_loop_init(&loop);
  assert_int_equal(kcm_server_listen(&s, &loop, "127.0.0.1:0", handler, &calls, &err), 0);
  /* A client that sends half a request and waits. */
  memset(&f, 0, sizeof(f));
  snprintf(f.request, sizeof(f.request), "GET /hello HTTP/1.1\r\n");
  {
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", s.port, &sa);
    uv_tcp_init(&loop, &f.tcp);
    f.tcp.data = f.connect.data = &f;
    uv_tcp_connect(&f.connect, &f.tcp, (const struct sockaddr *)&sa, fetch_connected);
  }
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(addresses),
      cmocka_unit_test(serves_and_refuses),
      cmocka_unit_test(closing_drops_idle_connections),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
