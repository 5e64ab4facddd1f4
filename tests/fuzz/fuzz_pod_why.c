/*
 * Fuzz what `kcm why` says of a pod from its whole JSON text
 * (kcm_api_pod_why): whatever the text holds, the answer is a few lines
 * a terminal shows as they are (UTF-8; no control character but the line
 * ends, no DEL, C1 control, line or paragraph separator or bidirectional
 * control), each of bounded length, or a refusal of text that is no JSON
 * object.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/api.h"
#include "kcm/buf.h"
#include "kcm/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

/* Lines at most: the pod's reason, unschedulable, three containers and the
 * count of the rest; bytes a line: a few bounded texts and the words. */
#define LINES_MAX 6
#define LINE_MAX 2048

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_pod_why.c:%d: check failed: %s\n", line, what);
  abort();
}

/* The code point at s[0..n) and its length; 0 when not UTF-8. */
static size_t rune(const unsigned char *s, size_t n, uint32_t *r) {
  size_t len, i;
  if (s[0] < 0x80) {
    *r = s[0];
    return 1;
  }
  len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc2 ? 2 : 0;
  if (!len || s[0] > 0xf4 || n < len)
    return 0;
  *r = s[0] & (0x7fu >> len);
  for (i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    *r = *r << 6 | (s[i] & 0x3fu);
  }
  return len;
}

static bool shown_as_is(uint32_t r) {
  return (r >= 0x20 && r < 0x7f) ||
         (r > 0x9f && !(r >= 0x2028 && r <= 0x202e) && !(r >= 0x2066 && r <= 0x2069) &&
          !(r >= 0x200b && r <= 0x200f) && !(r >= 0xd800 && r <= 0xdfff));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct kcm_buf out = KCM_BUF_INIT(1 << 20);
  const unsigned char *u;
  size_t i = 0, len, line = 0, lines = 0;
  uint32_t r;
  int rc = kcm_api_pod_why((const char *)data, size, 1795000000, &out);
  CHECK(rc == 0 || rc == KCM_EINVAL || rc == KCM_ENOMEM);
  CHECK(rc == 0 || out.len == 0 || rc == KCM_ENOMEM);
  u = (const unsigned char *)out.data;
  CHECK(out.len == 0 || u[out.len - 1] == '\n');
  while (i < out.len) {
    if (u[i] == '\n') {
      CHECK(line > 0 && line <= LINE_MAX);
      lines++;
      line = 0;
      i++;
      continue;
    }
    len = rune(u + i, out.len - i, &r);
    CHECK(len > 0);
    CHECK(shown_as_is(r));
    i += len;
    line += len;
  }
  CHECK(lines <= LINES_MAX);
  kcm_buf_release(&out);
  return 0;
}
