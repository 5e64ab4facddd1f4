/*
 * The input layout the stream readers' fuzz targets share: the first byte
 * picks the cap on one value, the second how many of the next bytes give
 * chunk sizes, and the rest is the body those sizes cut.
 */
#ifndef KCM_FUZZ_CHUNKS_H
#define KCM_FUZZ_CHUNKS_H

#include <stddef.h>
#include <stdint.h>

struct fuzz_chunks {
  size_t cap;
  const uint8_t *sizes; /* each chunk's size less one; the last repeats */
  size_t nsizes;
  const char *body;
  size_t len;
};

/* Split an input; 0 when it is too short to hold the layout. */
static inline int fuzz_chunks(const uint8_t *data, size_t size, struct fuzz_chunks *c) {
  if (size < 2 || size < 2 + (size_t)(data[1] % 8))
    return 0;
  c->cap = 8 + (size_t)data[0] * 16;
  c->nsizes = data[1] % 8;
  c->sizes = data + 2;
  c->body = (const char *)data + 2 + c->nsizes;
  c->len = size - 2 - c->nsizes;
  return 1;
}

#endif
