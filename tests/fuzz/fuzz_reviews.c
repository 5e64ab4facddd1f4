/*
 * Fuzz the readers of the API server's answers that kcm's secure port and
 * --use-service-account-credentials rely on: the input's first byte picks
 * a TokenReview, a SubjectAccessReview or a TokenRequest answer, the rest
 * is its body. Each reader must take what it can or refuse the body, never
 * keep a half-read answer: an authenticated user has a name and a list of
 * groups, a refusal no reason it cannot keep, a token is not empty, and
 * nothing leaks.
 * auth.c and satoken.c are compiled into this file to reach their readers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/auth/auth.c"
#include "../../src/satoken/satoken.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_reviews.c:%d: check failed: %s\n", line, what);
  abort();
}

static void token_review(const char *body, size_t len) {
  struct entry e;
  memset(&e, 0, sizeof(e));
  if (read_token_review(&e, body, len) == 0 && e.yes) {
    size_t i;
    CHECK(e.user.name && *e.user.name && e.user.uid && e.user.groups);
    for (i = 0; e.user.groups[i]; i++)
      CHECK(i < len); /* NULL-terminated, each group read from the body */
  }
  user_release(&e.user);
}

static void access_review(const char *body, size_t len) {
  struct entry e;
  memset(&e, 0, sizeof(e));
  if (read_access_review(&e, body, len) != 0)
    CHECK(!e.reason);
  free(e.reason);
}

static void token_request(const char *body) {
  char *token = NULL;
  int64_t life = 0;
  int rc = read_answer(body, &token, &life);
  CHECK(rc == 0 || rc == KCM_EINVAL || rc == KCM_ENOMEM);
  CHECK((rc == 0) == (token != NULL));
  CHECK(!token || *token);
  free(token);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *body;
  if (size < 1 || !(body = malloc(size)))
    return 0;
  memcpy(body, data + 1, size - 1);
  body[size - 1] = '\0'; /* answers come NUL-terminated, as the client keeps them */
  switch (data[0] % 3) {
  case 0:
    token_review(body, size - 1);
    break;
  case 1:
    access_review(body, size - 1);
    break;
  default:
    token_request(body);
  }
  free(body);
  return 0;
}
