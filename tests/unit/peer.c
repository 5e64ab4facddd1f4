/* A scripted HTTP server for tests; see peer.h. */
#include "peer.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_HEAD 65536

static bool write_all(int fd, const char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0)
      return false;
    p += w;
    n -= (size_t)w;
  }
  return true;
}

/* Read one request's head into buf (NUL-terminated) and skip its body. */
static bool read_request(int fd, char *buf, size_t cap) {
  size_t len = 0;
  char *end = NULL, value[32];
  long body;
  while (!end) {
    ssize_t r = len + 1 < cap ? recv(fd, buf + len, cap - 1 - len, 0) : -1;
    if (r <= 0)
      return false;
    len += (size_t)r;
    buf[len] = '\0';
    end = strstr(buf, "\r\n\r\n");
  }
  body = (long)len - (long)(end + 4 - buf);
  end[2] = '\0'; /* the head keeps its last line's CRLF */
  if (peer_header(buf, "Content-Length", value, sizeof(value)))
    body = atol(value) - body;
  else
    body = 0;
  while (body > 0) {
    char skip[4096];
    ssize_t r = recv(fd, skip, body < (long)sizeof(skip) ? (size_t)body : sizeof(skip), 0);
    if (r <= 0)
      return false;
    body -= r;
  }
  return true;
}

static void *serve(void *arg) {
  struct peer *p = arg;
  char *head = malloc(MAX_HEAD);
  for (;;) {
    const struct peer_answer *a;
    char *answer = NULL;
    size_t i, body_len;
    int fd = accept(p->fd, NULL, NULL);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      break; /* peer_stop() shut the socket down */
    }
    if (!head || !read_request(fd, head, MAX_HEAD)) {
      close(fd);
      continue;
    }
    pthread_mutex_lock(&p->mu);
    i = p->nrequests;
    if (i < PEER_MAX_REQUESTS)
      p->requests[p->nrequests++] = strdup(head);
    pthread_mutex_unlock(&p->mu);
    a = &p->answers[i < p->nanswers ? i : p->nanswers - 1];
    body_len = p->lengths ? p->lengths[i < p->nanswers ? i : p->nanswers - 1]
               : a->body ? strlen(a->body) : 0;
    if (asprintf(&answer, "%s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", a->head,
                 body_len) >= 0) {
      write_all(fd, answer, strlen(answer));
      if (body_len)
        write_all(fd, a->body, body_len);
    }
    free(answer);
    shutdown(fd, SHUT_WR);
    close(fd);
  }
  free(head);
  return NULL;
}

void peer_start(struct peer *p, const struct peer_answer *answers, size_t n) {
  peer_start_sized(p, answers, NULL, n);
}

void peer_start_sized(struct peer *p, const struct peer_answer *answers, const size_t *lengths,
                      size_t n) {
  struct sockaddr_in a = {0};
  socklen_t alen = sizeof(a);
  memset(p, 0, sizeof(*p));
  assert_true(n >= 1);
  p->answers = answers;
  p->lengths = lengths;
  p->nanswers = n;
  p->fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(p->fd >= 0);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(bind(p->fd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(p->fd, 16), 0);
  assert_int_equal(getsockname(p->fd, (struct sockaddr *)&a, &alen), 0);
  p->port = ntohs(a.sin_port);
  snprintf(p->url, sizeof(p->url), "http://127.0.0.1:%u", p->port);
  pthread_mutex_init(&p->mu, NULL);
  assert_int_equal(pthread_create(&p->thread, NULL, serve, p), 0);
}

void peer_stop(struct peer *p) {
  size_t i;
  shutdown(p->fd, SHUT_RDWR); /* wakes accept() */
  pthread_join(p->thread, NULL);
  close(p->fd);
  for (i = 0; i < p->nrequests; i++)
    free(p->requests[i]);
  pthread_mutex_destroy(&p->mu);
}

size_t peer_count(struct peer *p) {
  size_t n;
  pthread_mutex_lock(&p->mu);
  n = p->nrequests;
  pthread_mutex_unlock(&p->mu);
  return n;
}

char *peer_request(struct peer *p, size_t i) {
  char *out = NULL;
  pthread_mutex_lock(&p->mu);
  if (i < p->nrequests)
    out = strdup(p->requests[i]);
  pthread_mutex_unlock(&p->mu);
  return out;
}

/* The next header line of head named `name` at or after *at; its value in
 * [*v, *v + *n). */
static bool next_header(const char **at, const char *name, const char **v, size_t *n) {
  size_t len = strlen(name);
  const char *line = *at;
  while ((line = strstr(line, "\r\n"))) {
    line += 2;
    if (!strncasecmp(line, name, len) && line[len] == ':') {
      const char *e = strstr(line, "\r\n");
      *v = line + len + 1;
      while (**v == ' ' || **v == '\t')
        (*v)++;
      *n = e ? (size_t)(e - *v) : strlen(*v);
      *at = line;
      return true;
    }
  }
  return false;
}

size_t peer_header_count(const char *head, const char *name) {
  const char *at = head, *v;
  size_t n, count = 0;
  while (next_header(&at, name, &v, &n))
    count++;
  return count;
}

bool peer_header(const char *head, const char *name, char *out, size_t cap) {
  const char *at = head, *v;
  size_t n;
  if (!next_header(&at, name, &v, &n) || n >= cap)
    return false;
  memcpy(out, v, n);
  out[n] = '\0';
  return true;
}
