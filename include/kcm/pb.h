/*
 * pb — reading the protobuf wire format, as kube-apiserver writes objects
 * in application/vnd.kubernetes.protobuf.
 *
 * A struct kcm_pb walks the fields of one message held in memory; it owns
 * nothing (the bytes are the caller's for as long as the reader is used).
 * Every read checks the bounds: a truncated or malformed message stops the
 * walk with r->err set (static text), never a read past the end.
 */
#ifndef KCM_PB_H
#define KCM_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kcm_pb_wire {
  KCM_PB_VARINT = 0,
  KCM_PB_FIXED64 = 1,
  KCM_PB_BYTES = 2, /* length-delimited: strings, bytes, messages */
  KCM_PB_FIXED32 = 5,
};

/* Every object kube-apiserver writes in protobuf starts with these four
 * bytes, then a runtime.Unknown message holding the object. */
#define KCM_PB_MAGIC "k8s\0"
#define KCM_PB_MAGIC_LEN 4

struct kcm_pb {
  const uint8_t *p, *end;
  const char *err; /* why the walk stopped early, or NULL */
  uint32_t field;  /* the field kcm_pb_next() found */
  uint8_t wire;    /* and its wire type */
};

void kcm_pb_start(struct kcm_pb *r, const void *p, size_t n);
/* Move to the next field: true with r->field and r->wire set; false at the
 * end of the message, or with r->err on a malformed tag. */
bool kcm_pb_next(struct kcm_pb *r);
/* The value of the current field, which must be of the matching wire type
 * (else r->err, false). */
bool kcm_pb_varint(struct kcm_pb *r, uint64_t *v);
bool kcm_pb_bytes(struct kcm_pb *r, const uint8_t **p, size_t *n);
/* Pass over the current field's value, whatever its wire type. */
bool kcm_pb_skip(struct kcm_pb *r);
/* Walk into the message to the field path[0], then inside it to path[1],
 * and so on to the last (a list ending in 0): true with r at that field,
 * ready for kcm_pb_bytes() or kcm_pb_varint(); false when a field of the
 * path is absent, not a message, or malformed. The first occurrence of
 * each counts. */
bool kcm_pb_find(struct kcm_pb *r, const uint32_t *path);
/* A varint from p[0..n): the bytes it takes, 0 if n ends before it does,
 * -1 if it is longer than ten bytes or holds more than 64 bits. */
int kcm_pb_read_varint(const uint8_t *p, size_t n, uint64_t *v);

/* The object inside a runtime.Unknown envelope (magic included): its kind
 * and the message. Returns false (with *why) when p[0..n) is no envelope. */
bool kcm_pb_unwrap(const uint8_t *p, size_t n, const uint8_t **kind, size_t *kind_len,
                   const uint8_t **raw, size_t *raw_len, const char **why);

#endif
