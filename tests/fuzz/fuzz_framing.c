/*
 * Fuzz the watch-stream framer: the input is a stream of watch events cut
 * into chunks whose sizes the input's first bytes choose, as a network may
 * cut it. Every line handed out must lie within what was fed, be non-empty
 * and carry no surrounding blanks; each is then read as a pod, as the
 * informer reads the object of an event.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "framing.h"
#include "kcm/api.h"
#include "kcm/intern.h"
#include "kcm/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct kcm_intern pool;
static struct kcm_json reader;

static int on_line(const char *text, size_t len, const char *why, void *arg) {
  struct kcm_object *o;
  struct kcm_api_error err;
  size_t *lines = arg;
  if (!text) {
    if (!why || !*why)
      abort(); /* a skipped line always says why */
    return 0;
  }
  if (!len || text[0] == ' ' || text[0] == '\n' || text[len - 1] == ' ' ||
      text[len - 1] == '\n' || memchr(text, '\n', len))
    abort();
  (*lines)++;
  if (kcm_api_decode_text(KCM_KIND_POD, text, len, &reader, NULL, &pool, &o, &err) == 0)
    kcm_api_unref(o, &pool);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  struct kcm_framer f;
  size_t lines = 0, off = 0, cuts = size ? data[0] % 8 : 0, at = 1;
  if (!ready) {
    kcm_intern_init(&pool);
    kcm_json_init(&reader);
    ready = 1;
  }
  if (size < 1 + cuts)
    return 0;
  if (kcm_framer_init(&f, 4096, on_line, &lines))
    return 0;
  off = 1 + cuts;
  while (off < size) {
    size_t n = size - off;
    if (at <= cuts) {
      size_t want = (size_t)data[at++] + 1;
      n = want < n ? want : n;
    }
    kcm_framer_feed(&f, (const char *)data + off, n);
    off += n;
  }
  kcm_framer_flush(&f);
  kcm_framer_release(&f);
  return 0;
}
