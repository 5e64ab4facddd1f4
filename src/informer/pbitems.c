/* pbitems — splitting a protobuf list response into its items; see pbitems.h. */
#include "pbitems.h"

#include <string.h>

#include "kcm/error.h"
#include "kcm/pb.h"

/* What the value being read is. */
enum { V_NONE, V_SKIP, V_ITEM, V_METADATA };

void kcm_pbitems_init(struct kcm_pbitems *s, size_t max_bytes, kcm_items_cb cb, void *data) {
  memset(s, 0, sizeof(*s));
  kcm_buf_init(&s->part, max_bytes);
  s->max_bytes = max_bytes;
  s->cb = cb;
  s->data = data;
}

void kcm_pbitems_release(struct kcm_pbitems *s) { kcm_buf_release(&s->part); }

void kcm_pbitems_reset(struct kcm_pbitems *s) {
  struct kcm_buf part = s->part;
  kcm_pbitems_init(s, s->max_bytes, s->cb, s->data);
  s->part = part;
  kcm_buf_reset(&s->part);
}

static int fail(struct kcm_pbitems *s, const char *why) {
  s->err = why;
  kcm_buf_reset(&s->part);
  return KCM_EINVAL;
}

/* A field's header is whole: its tag and, for wire types 0 and 2, a
 * varint. Decide what its value is. Returns 0, or KCM_EINVAL. */
static int header_done(struct kcm_pbitems *s, uint64_t tag, uint64_t arg) {
  unsigned wire = (unsigned)(tag & 7);
  uint64_t field = tag >> 3;

  if (wire == KCM_PB_VARINT)
    return 0; /* the varint was the value */
  if (wire != KCM_PB_BYTES) {
    s->value = V_SKIP;
    s->value_left = wire == KCM_PB_FIXED64 ? 8 : 4;
  } else if (!s->in_list && field == 2) {
    if (s->seen_list)
      return fail(s, "two lists in one response");
    s->in_list = s->seen_list = true;
    s->list_left = arg;
    return 0;
  } else {
    s->value = s->in_list && field == 2 ? V_ITEM : s->in_list && field == 1 ? V_METADATA : V_SKIP;
    s->value_left = arg;
    s->oversize = s->value != V_SKIP && arg > s->max_bytes;
    if (s->value == V_METADATA && s->oversize)
      return fail(s, "list metadata larger than the size limit");
  }
  if (s->in_list && s->value_left > s->list_left)
    return fail(s, "a field runs past the end of the list");
  return 0;
}

/* Take header bytes from p[0..n); the bytes used, or -1 (s->err set). */
static long header(struct kcm_pbitems *s, const uint8_t *p, size_t n) {
  size_t used = 0;
  while (used < n) {
    uint64_t tag = 0, arg = 0;
    int a, b = 0;
    if (s->hdr_len == sizeof(s->hdr))
      return fail(s, "malformed field header"), -1;
    s->hdr[s->hdr_len++] = p[used++];
    a = kcm_pb_read_varint(s->hdr, s->hdr_len, &tag);
    if (a > 0 && ((tag & 7) == KCM_PB_VARINT || (tag & 7) == KCM_PB_BYTES))
      b = kcm_pb_read_varint(s->hdr + a, s->hdr_len - (size_t)a, &arg);
    else if (a > 0)
      b = 1; /* fixed-size values need no more header */
    if (a < 0 || b < 0)
      return fail(s, "malformed varint"), -1;
    if (!a || !b)
      continue;
    if ((tag >> 3) == 0 || ((tag & 7) != KCM_PB_VARINT && (tag & 7) != KCM_PB_BYTES &&
                            (tag & 7) != KCM_PB_FIXED64 && (tag & 7) != KCM_PB_FIXED32))
      return fail(s, "malformed field tag"), -1;
    if (s->in_list) {
      if (s->hdr_len > s->list_left)
        return fail(s, "a field runs past the end of the list"), -1;
      s->list_left -= s->hdr_len;
    }
    s->hdr_len = 0;
    if (header_done(s, tag, arg))
      return -1;
    break;
  }
  return (long)used;
}

/* The value being read ended: its last bytes are p[0..n). */
static int value_done(struct kcm_pbitems *s, const uint8_t *p, size_t n) {
  enum kcm_items_part part = s->value == V_ITEM ? KCM_ITEMS_ITEM : KCM_ITEMS_METADATA;
  int rc;
  s->value = V_NONE;
  if (s->oversize) {
    s->oversize = false;
    return s->cb(part, NULL, 0, "item larger than the size limit", s->data);
  }
  if (!s->part.len)
    return s->cb(part, (const char *)p, n, NULL, s->data);
  if (kcm_buf_append(&s->part, p, n))
    return KCM_ENOMEM;
  rc = s->cb(part, s->part.data, s->part.len, NULL, s->data);
  kcm_buf_reset(&s->part);
  return rc;
}

int kcm_pbitems_feed(struct kcm_pbitems *s, const char *text, size_t n) {
  const uint8_t *p = (const uint8_t *)text;
  while (n > 0 && !s->err) {
    size_t take;
    int rc;
    if (s->magic < KCM_PB_MAGIC_LEN) {
      if (*p != (uint8_t)KCM_PB_MAGIC[s->magic])
        return fail(s, "not a protobuf object (no k8s magic)");
      s->magic++;
      p++;
      n--;
      continue;
    }
    if (s->in_list && !s->list_left && s->value == V_NONE && !s->hdr_len) {
      s->in_list = false; /* the list ended: the envelope's fields go on */
      continue;
    }
    if (s->value == V_NONE) {
      long used = header(s, p, n);
      if (used < 0)
        return KCM_EINVAL;
      p += used;
      n -= (size_t)used;
      if (s->value == V_NONE || s->value_left)
        continue;
      if (s->value == V_SKIP) /* an empty field skipped */
        s->value = V_NONE;
      else if ((rc = value_done(s, p, 0))) /* an empty item or metadata */
        return rc;
      continue;
    }
    take = n < s->value_left ? n : (size_t)s->value_left;
    s->value_left -= take;
    if (s->in_list)
      s->list_left -= take;
    if (s->value == V_SKIP) {
      if (!s->value_left)
        s->value = V_NONE;
    } else if (s->value_left) {
      if (!s->oversize && kcm_buf_append(&s->part, p, take))
        return KCM_ENOMEM;
    } else if ((rc = value_done(s, p, take))) {
      return rc;
    }
    p += take;
    n -= take;
  }
  return s->err ? KCM_EINVAL : 0;
}

int kcm_pbitems_finish(struct kcm_pbitems *s) {
  if (s->err)
    return KCM_EINVAL;
  if (s->magic < KCM_PB_MAGIC_LEN)
    return fail(s, "not a protobuf object (no k8s magic)");
  if (s->hdr_len || s->value != V_NONE || (s->in_list && s->list_left))
    return fail(s, "list cut short");
  if (!s->seen_list)
    return fail(s, "no list in the response");
  return 0;
}
