/* pb — reading the protobuf wire format; see include/kcm/pb.h. */
#include "kcm/pb.h"

#include <string.h>

void kcm_pb_start(struct kcm_pb *r, const void *p, size_t n) {
  r->p = p;
  r->end = r->p + n;
  r->err = NULL;
  r->field = 0;
  r->wire = 0;
}

int kcm_pb_read_varint(const uint8_t *p, size_t n, uint64_t *v) {
  uint64_t x = 0;
  size_t i;
  for (i = 0; i < n && i < 10; i++) {
    if (i == 9 && p[i] > 1)
      return -1; /* past 64 bits */
    x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
    if (!(p[i] & 0x80)) {
      *v = x;
      return (int)i + 1;
    }
  }
  return i == 10 ? -1 : 0;
}

static bool varint(struct kcm_pb *r, uint64_t *v) {
  int used = kcm_pb_read_varint(r->p, (size_t)(r->end - r->p), v);
  if (used <= 0) {
    r->err = used ? "malformed varint" : "message cut short";
    r->p = r->end;
    return false;
  }
  r->p += used;
  return true;
}

bool kcm_pb_next(struct kcm_pb *r) {
  uint64_t tag;
  if (r->err || r->p >= r->end || !varint(r, &tag))
    return false;
  r->field = (uint32_t)(tag >> 3);
  r->wire = (uint8_t)(tag & 7);
  if ((tag >> 3) == 0 || (tag >> 3) > UINT32_MAX ||
      (r->wire != KCM_PB_VARINT && r->wire != KCM_PB_FIXED64 && r->wire != KCM_PB_BYTES &&
       r->wire != KCM_PB_FIXED32)) {
    r->err = "malformed field tag";
    r->p = r->end;
    return false;
  }
  return true;
}

static bool wrong_wire(struct kcm_pb *r) {
  r->err = "field of the wrong wire type";
  r->p = r->end;
  return false;
}

bool kcm_pb_varint(struct kcm_pb *r, uint64_t *v) {
  if (r->wire != KCM_PB_VARINT)
    return wrong_wire(r);
  return varint(r, v);
}

bool kcm_pb_bytes(struct kcm_pb *r, const uint8_t **p, size_t *n) {
  uint64_t len;
  if (r->wire != KCM_PB_BYTES)
    return wrong_wire(r);
  if (!varint(r, &len))
    return false;
  if (len > (uint64_t)(r->end - r->p)) {
    r->err = "message cut short";
    r->p = r->end;
    return false;
  }
  *p = r->p;
  *n = (size_t)len;
  r->p += len;
  return true;
}

bool kcm_pb_skip(struct kcm_pb *r) {
  uint64_t v;
  const uint8_t *p;
  size_t n = r->wire == KCM_PB_FIXED64 ? 8 : 4;
  if (r->wire == KCM_PB_VARINT)
    return varint(r, &v);
  if (r->wire == KCM_PB_BYTES)
    return kcm_pb_bytes(r, &p, &n);
  if ((size_t)(r->end - r->p) < n) {
    r->err = "message cut short";
    r->p = r->end;
    return false;
  }
  r->p += n;
  return true;
}

bool kcm_pb_find(struct kcm_pb *r, const uint32_t *path) {
  const uint8_t *p;
  size_t n;
  while (kcm_pb_next(r)) {
    if (r->field != *path) {
      if (!kcm_pb_skip(r))
        return false;
    } else if (!path[1]) {
      return true;
    } else if (!kcm_pb_bytes(r, &p, &n)) {
      return false;
    } else {
      kcm_pb_start(r, p, n);
      path++;
    }
  }
  return false;
}

bool kcm_pb_unwrap(const uint8_t *p, size_t n, const uint8_t **kind, size_t *kind_len,
                   const uint8_t **raw, size_t *raw_len, const char **why) {
  struct kcm_pb r, meta;
  const uint8_t *s;
  size_t len;
  bool has_raw = false;

  *kind = NULL;
  *kind_len = 0;
  if (n < KCM_PB_MAGIC_LEN || memcmp(p, KCM_PB_MAGIC, KCM_PB_MAGIC_LEN)) {
    *why = "not a protobuf object (no k8s magic)";
    return false;
  }
  kcm_pb_start(&r, p + KCM_PB_MAGIC_LEN, n - KCM_PB_MAGIC_LEN);
  while (kcm_pb_next(&r)) {
    if (r.field == 1 && kcm_pb_bytes(&r, &s, &len)) { /* typeMeta */
      kcm_pb_start(&meta, s, len);
      while (kcm_pb_next(&meta))
        if (meta.field == 2 ? !kcm_pb_bytes(&meta, kind, kind_len) : !kcm_pb_skip(&meta))
          break;
      if (meta.err)
        r.err = meta.err;
    } else if (r.field == 2 && kcm_pb_bytes(&r, raw, raw_len)) {
      has_raw = true;
    } else if (r.field == 3 && kcm_pb_bytes(&r, &s, &len)) { /* contentEncoding */
      if (len)
        r.err = "encoded content (contentEncoding) is not read";
    } else if (r.field != 1 && r.field != 2 && r.field != 3) {
      kcm_pb_skip(&r);
    }
  }
  if (!r.err && !has_raw)
    r.err = "no object in the envelope";
  *why = r.err;
  return !r.err;
}
