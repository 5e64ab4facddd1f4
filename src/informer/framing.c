/* framing — splitting a watch stream into JSON values; see framing.h. */
#include "framing.h"

#include <string.h>

#include "kcm/error.h"

int kcm_framer_init(struct kcm_framer *f, size_t max_bytes, kcm_framer_cb cb, void *data) {
  memset(f, 0, sizeof(*f));
  kcm_buf_init(&f->part, max_bytes);
  f->max_bytes = max_bytes;
  f->cb = cb;
  f->data = data;
  return 0;
}

void kcm_framer_release(struct kcm_framer *f) { kcm_buf_release(&f->part); }

void kcm_framer_reset(struct kcm_framer *f) {
  kcm_buf_reset(&f->part);
  f->depth = 0;
  f->in_string = f->escaped = f->skipping = f->pending = false;
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

/* Bytes the scan stops at: inside strings, the quote, the backslash and
 * the newline; outside, quotes, brackets and the newline. API servers write
 * one event per line, so a newline before the value ends means it is
 * broken, and the next line is the next event. */
static const bool in_string_stop[256] = {['"'] = 1, ['\\'] = 1, ['\n'] = 1};
static const bool outside_stop[256] = {['"'] = 1,  ['{'] = 1, ['['] = 1,
                                       ['}'] = 1,  [']'] = 1, ['\n'] = 1};

enum scan_result { SCAN_MORE, SCAN_DONE, SCAN_BROKEN };

/* Read on through p[0..n); *used is how many bytes belong to the value
 * (up to its end, or to the newline that breaks it). */
static enum scan_result scan(struct kcm_framer *f, const char *p, size_t n, size_t *used) {
  size_t i = 0;
  enum scan_result r = SCAN_MORE;
  while (i < n) {
    unsigned char c;
    if (f->escaped) {
      f->escaped = false;
      if (p[i] == '\n') {
        r = SCAN_BROKEN;
        break;
      }
      i++;
      continue;
    }
    if (f->in_string) {
      while (i < n && !in_string_stop[(unsigned char)p[i]])
        i++;
      if (i == n)
        break;
      c = (unsigned char)p[i++];
      if (c == '\\') {
        f->escaped = true;
      } else if (c == '"') {
        f->in_string = false;
      } else {
        r = SCAN_BROKEN;
        break;
      }
      continue;
    }
    while (i < n && !outside_stop[(unsigned char)p[i]])
      i++;
    if (i == n)
      break;
    c = (unsigned char)p[i++];
    if (c == '"') {
      f->in_string = true;
    } else if (c == '{' || c == '[') {
      f->depth++;
    } else if (c == '\n') {
      r = SCAN_BROKEN;
      break;
    } else if (--f->depth == 0) {
      r = SCAN_DONE;
      break;
    }
  }
  *used = i;
  return r;
}

int kcm_framer_feed(struct kcm_framer *f, const char *p, size_t n) {
  while (n > 0) {
    enum scan_result result;
    size_t used;
    int rc;

    if (f->skipping && !skip_to_newline(f, &p, &n))
      return 0;
    if (!f->pending) {
      /* Whitespace between values is not part of any value. */
      while (n > 0 && (*p == '\n' || *p == '\r' || *p == ' ' || *p == '\t')) {
        p++;
        n--;
      }
      if (!n)
        return 0;
      if (*p != '{') {
        f->skipping = true;
        if ((rc = f->cb(NULL, 0, "a watch event must be a JSON object", f->data)))
          return rc;
        continue;
      }
      f->pending = true;
    }
    result = scan(f, p, n, &used);
    if (result == SCAN_BROKEN) {
      kcm_framer_reset(f);
      p += used;
      n -= used;
      if ((rc = f->cb(NULL, 0, "the event ends before its JSON value does", f->data)))
        return rc;
      continue;
    }
    if (f->part.len + used > f->max_bytes) {
      kcm_framer_reset(f);
      f->skipping = true;
      if ((rc = f->cb(NULL, 0, "event larger than the size limit", f->data)))
        return rc;
      continue;
    }
    if (result == SCAN_MORE) {
      if (kcm_buf_append(&f->part, p, used))
        return KCM_ENOMEM;
      p += used;
      n -= used;
      continue;
    }
    if (f->part.len) {
      if (kcm_buf_append(&f->part, p, used))
        return KCM_ENOMEM;
      rc = f->cb(f->part.data, f->part.len, NULL, f->data);
    } else {
      rc = f->cb(p, used, NULL, f->data);
    }
    kcm_framer_reset(f);
    p += used;
    n -= used;
    if (rc)
      return rc;
  }
  return 0;
}
