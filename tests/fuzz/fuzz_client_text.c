/*
 * Fuzz the client's reading of what a server sends and its writing of
 * what goes into URLs: the input is read as a header line (Retry-After
 * and its value), as a URL whose user information is cut out, and as text
 * percent-encoded and decoded again. A Retry-After is taken only when it
 * is digits within blanks and never past the cap; encoding leaves only
 * unreserved bytes and '%' and decodes to the input; a redacted URL is the
 * input without its user information; never a crash or leak.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/buf.h"
#include "kcm/client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_client_text.c:%d: check failed: %s\n", line, what);
  abort();
}

static void retry_after(const char *text, size_t n) {
  const char *v;
  size_t vlen, i, digits = 0;
  uint32_t s = 0;
  if (!kcm_client_header_value(text, n, "Retry-After", &v, &vlen))
    v = text, vlen = n;
  CHECK(v >= text && v + vlen <= text + n);
  if (!kcm_client_retry_after(v, vlen, &s))
    return;
  CHECK(s <= KCM_CLIENT_RETRY_AFTER_MAX);
  for (i = 0; i < vlen; i++) {
    CHECK((v[i] >= '0' && v[i] <= '9') || v[i] == ' ' || v[i] == '\t');
    digits += v[i] >= '0' && v[i] <= '9';
  }
  CHECK(digits > 0);
}

static void escape(const char *text, size_t n) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 20);
  char *back;
  size_t i;
  if (kcm_client_escape(&b, text, n) != 0) {
    kcm_buf_release(&b);
    return;
  }
  for (i = 0; i < b.len; i++)
    CHECK(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~%",
                 b.data[i]) && b.data[i]);
  back = kcm_client_unescape(b.data ? b.data : "", b.len);
  CHECK(back && memcmp(back, text, n) == 0 && back[n] == '\0');
  free(back);
  kcm_buf_release(&b);
  free(kcm_client_unescape(text, n)); /* any text: decoded or refused */
}

static void redact(const char *url) {
  size_t start, end;
  char *r = kcm_client_redact_url(url);
  CHECK(r);
  if (kcm_client_url_userinfo(url, &start, &end)) {
    CHECK(start < end && end <= strlen(url) && url[end - 1] == '@');
    CHECK(strlen(r) == strlen(url) - (end - start));
    CHECK(!memcmp(r, url, start) && !strcmp(r + start, url + end));
    CHECK(!kcm_client_url_userinfo(r, &start, &end));
  } else {
    CHECK(!strcmp(r, url));
  }
  free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  retry_after(text, size);
  escape(text, size);
  redact(text);
  free(text);
  return 0;
}
