/*
 * Test support: writing the protobuf wire format by hand, for messages the
 * tests shape (malformed ones included), and reading the captured answers
 * of kube-apiserver kept in tests/unit/data.
 */
#ifndef KCM_TEST_PBWRITE_H
#define KCM_TEST_PBWRITE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/buf.h"

static inline void pbw_varint(struct kcm_buf *b, uint64_t v) {
  uint8_t out[10];
  size_t n = 0;
  do {
    out[n] = (uint8_t)(v & 0x7f);
    v >>= 7;
    if (v)
      out[n] |= 0x80;
    n++;
  } while (v);
  kcm_buf_append(b, out, n);
}

static inline void pbw_tag(struct kcm_buf *b, uint32_t field, unsigned wire) {
  pbw_varint(b, (uint64_t)field << 3 | wire);
}

/* A length-delimited field: a string, bytes, or a message written before. */
static inline void pbw_bytes(struct kcm_buf *b, uint32_t field, const void *p, size_t n) {
  pbw_tag(b, field, 2);
  pbw_varint(b, n);
  kcm_buf_append(b, p, n);
}

static inline void pbw_str(struct kcm_buf *b, uint32_t field, const char *s) {
  pbw_bytes(b, field, s, strlen(s));
}

static inline void pbw_msg(struct kcm_buf *b, uint32_t field, const struct kcm_buf *m) {
  pbw_bytes(b, field, m->data ? m->data : "", m->len);
}

static inline void pbw_int(struct kcm_buf *b, uint32_t field, uint64_t v) {
  pbw_tag(b, field, 0);
  pbw_varint(b, v);
}

#ifdef KCM_TEST_DATA
/* The whole of tests/unit/data/<name> (caller frees); aborts when unreadable. */
static inline char *pbw_read_data(const char *name, size_t *len) {
  char path[512];
  FILE *f;
  char *data;
  long n;
  snprintf(path, sizeof(path), "%s/%s", KCM_TEST_DATA, name);
  f = fopen(path, "rb");
  if (!f || fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) ||
      !(data = malloc((size_t)n + 1)) || fread(data, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "cannot read %s\n", path);
    abort();
  }
  fclose(f);
  data[n] = '\0';
  *len = (size_t)n;
  return data;
}
#endif

#endif
