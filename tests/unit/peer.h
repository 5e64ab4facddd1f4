/*
 * A scripted HTTP/1.1 server on loopback, on a thread of its own, for tests
 * that must see exactly what the client sent: it answers the n-th request
 * with the n-th scripted answer (the last one repeats), closes each
 * connection after its answer, and keeps every request it read.
 */
#ifndef KCM_TEST_PEER_H
#define KCM_TEST_PEER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define PEER_MAX_REQUESTS 64

struct peer_answer {
  const char *head; /* status line and headers, without the blank line, e.g.
                       "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1";
                       Content-Length and Connection: close are added */
  const char *body; /* NULL: none */
};

struct peer {
  int fd;
  unsigned port;
  char url[64]; /* "http://127.0.0.1:<port>" */
  const struct peer_answer *answers; /* borrowed */
  size_t nanswers;
  const size_t *lengths; /* of the bodies (borrowed), for binary ones; NULL: strlen */
  pthread_t thread;
  pthread_mutex_t mu;
  char *requests[PEER_MAX_REQUESTS]; /* heads (request line and headers) as read; owned */
  size_t nrequests;
};

/* Listen on an ephemeral loopback port and serve `answers` (n >= 1) until
 * peer_stop(). Aborts the test on failure. */
void peer_start(struct peer *p, const struct peer_answer *answers, size_t n);
/* The same with answers whose bodies are lengths[i] bytes long. */
void peer_start_sized(struct peer *p, const struct peer_answer *answers, const size_t *lengths,
                      size_t n);
void peer_stop(struct peer *p);
/* Requests read so far (safe from any thread). */
size_t peer_count(struct peer *p);
/* A copy of the head of request i (caller frees), or NULL. */
char *peer_request(struct peer *p, size_t i);
/* How many header lines of head are named `name` (any case). */
size_t peer_header_count(const char *head, const char *name);
/* The value of the first header `name` in head, copied into out. */
bool peer_header(const char *head, const char *name, char *out, size_t cap);

#endif
