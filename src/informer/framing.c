/* framing — splitting a watch stream into JSON values; see framing.h. */
#include "framing.h"

#include <string.h>

#include "kcm/error.h"

#define MAX_DEPTH 64

int kcm_framer_init(struct kcm_framer *f, size_t max_bytes, kcm_framer_cb cb, void *data) {
  memset(f, 0, sizeof(*f));
  f->tok = json_tokener_new_ex(MAX_DEPTH);
  if (!f->tok)
    return KCM_ENOMEM;
  f->max_bytes = max_bytes;
  f->cb = cb;
  f->data = data;
  return 0;
}

void kcm_framer_release(struct kcm_framer *f) {
  if (f->tok)
    json_tokener_free(f->tok);
  f->tok = NULL;
}

void kcm_framer_reset(struct kcm_framer *f) {
  json_tokener_reset(f->tok);
  f->bytes = 0;
  f->skipping = false;
  f->pending = false;
}

bool kcm_framer_partial(const struct kcm_framer *f) { return f->pending || f->skipping; }

static int skip_to_newline(struct kcm_framer *f, const char **p, size_t *n) {
  const char *nl = memchr(*p, '\n', *n);
  if (!nl) {
    *p += *n;
    *n = 0;
    return 0;
  }
  *n -= (size_t)(nl + 1 - *p);
  *p = nl + 1;
  f->skipping = false;
  return 1;
}

int kcm_framer_feed(struct kcm_framer *f, const char *p, size_t n) {
  while (n > 0) {
    struct json_object *v;
    enum json_tokener_error jerr;
    size_t used, chunk;
    int rc;

    if (f->skipping && !skip_to_newline(f, &p, &n))
      return 0;
    /* Whitespace between values is not part of any value. */
    if (!f->pending) {
      while (n > 0 && (*p == '\n' || *p == '\r' || *p == ' ' || *p == '\t')) {
        p++;
        n--;
      }
      if (!n)
        return 0;
    }
    /* Never hand json-c more than the cap allows. */
    chunk = n;
    if (chunk > f->max_bytes - f->bytes + 1)
      chunk = f->max_bytes - f->bytes + 1;
    if (chunk > (size_t)INT32_MAX)
      chunk = INT32_MAX;
    v = json_tokener_parse_ex(f->tok, p, (int)chunk);
    jerr = json_tokener_get_error(f->tok);
    if (jerr == json_tokener_continue) {
      f->pending = true;
      f->bytes += chunk;
      p += chunk;
      n -= chunk;
      if (f->bytes > f->max_bytes) {
        json_tokener_reset(f->tok);
        f->pending = false;
        f->bytes = 0;
        f->skipping = true;
        if ((rc = f->cb(NULL, "event larger than the size limit", f->data)))
          return rc;
      }
      continue;
    }
    used = json_tokener_get_parse_end(f->tok);
    json_tokener_reset(f->tok);
    f->pending = false;
    f->bytes = 0;
    if (jerr != json_tokener_success) {
      /* Drop the rest of this line; json-c stopped at the bad byte. */
      f->skipping = true;
      if ((rc = f->cb(NULL, json_tokener_error_desc(jerr), f->data)))
        return rc;
      if (used == 0)
        used = 1;
      p += used;
      n -= used;
      continue;
    }
    p += used;
    n -= used;
    rc = f->cb(v, NULL, f->data);
    json_object_put(v);
    if (rc)
      return rc;
  }
  return 0;
}
