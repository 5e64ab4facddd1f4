/* framing — splitting a watch stream into events; see framing.h. */
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

void kcm_framer_reset(struct kcm_framer *f, bool by_length) {
  kcm_buf_reset(&f->part);
  f->skipping = false;
  f->by_length = by_length;
  f->len_bytes = 0;
  f->frame_len = f->frame_left = 0;
}

static bool blank(unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* The line's text without surrounding blanks, to the callback (if any). */
static int deliver(struct kcm_framer *f, const char *p, size_t n) {
  while (n && blank((unsigned char)*p)) {
    p++;
    n--;
  }
  while (n && blank((unsigned char)p[n - 1]))
    n--;
  return n ? f->cb(p, n, NULL, f->data) : 0;
}

bool kcm_framer_partial(const struct kcm_framer *f) {
  size_t i;
  if (f->by_length)
    return f->len_bytes > 0;
  if (f->skipping)
    return true;
  for (i = 0; i < f->part.len; i++)
    if (!blank((unsigned char)f->part.data[i]))
      return true;
  return false;
}

/* Length-prefixed frames: a 4-byte big-endian length, then the frame. */
static int feed_by_length(struct kcm_framer *f, const char *p, size_t n) {
  while (n > 0) {
    size_t take;
    int rc = 0;
    if (f->len_bytes < 4) {
      f->frame_len = f->frame_len << 8 | (uint8_t)*p++;
      n--;
      if (++f->len_bytes < 4)
        continue;
      f->frame_left = f->frame_len;
      f->skipping = f->frame_len > f->max_bytes;
      if (f->skipping)
        rc = f->cb(NULL, 0, "event larger than the size limit", f->data);
      else if (!f->frame_len)
        rc = f->cb("", 0, NULL, f->data);
      if (!f->frame_len)
        f->len_bytes = 0;
      if (rc)
        return rc;
      continue;
    }
    take = n < f->frame_left ? n : f->frame_left;
    f->frame_left -= (uint32_t)take;
    if (f->skipping) {
      /* dropped */
    } else if (f->frame_left) {
      if (kcm_buf_append(&f->part, p, take))
        return KCM_ENOMEM;
    } else if (f->part.len) {
      if (kcm_buf_append(&f->part, p, take))
        return KCM_ENOMEM;
      rc = f->cb(f->part.data, f->part.len, NULL, f->data);
      kcm_buf_reset(&f->part);
    } else {
      rc = f->cb(p, take, NULL, f->data); /* straight from the chunk */
    }
    p += take;
    n -= take;
    if (!f->frame_left) {
      f->len_bytes = 0;
      f->frame_len = 0;
      f->skipping = false;
    }
    if (rc)
      return rc;
  }
  return 0;
}

int kcm_framer_feed(struct kcm_framer *f, const char *p, size_t n) {
  if (f->by_length)
    return feed_by_length(f, p, n);
  while (n > 0) {
    const char *nl = memchr(p, '\n', n);
    size_t take = nl ? (size_t)(nl - p) : n;
    int rc = 0;

    if (f->skipping) {
      if (!nl)
        return 0;
      f->skipping = false;
    } else if (f->part.len + take > f->max_bytes) {
      kcm_buf_reset(&f->part);
      f->skipping = nl == NULL;
      rc = f->cb(NULL, 0, "event larger than the size limit", f->data);
    } else if (!nl) {
      return kcm_buf_append(&f->part, p, n) ? KCM_ENOMEM : 0;
    } else if (f->part.len) {
      if (kcm_buf_append(&f->part, p, take))
        return KCM_ENOMEM;
      rc = deliver(f, f->part.data, f->part.len);
      kcm_buf_reset(&f->part);
    } else {
      rc = deliver(f, p, take); /* straight from the chunk */
    }
    if (!nl)
      return rc;
    n -= take + 1;
    p = nl + 1;
    if (rc)
      return rc;
  }
  return 0;
}

int kcm_framer_flush(struct kcm_framer *f) {
  int rc = 0;
  if (f->by_length && f->len_bytes)
    rc = f->cb(NULL, 0, "event cut short", f->data);
  else if (!f->by_length && !f->skipping && f->part.len)
    rc = deliver(f, f->part.data, f->part.len);
  kcm_framer_reset(f, f->by_length);
  return rc;
}
