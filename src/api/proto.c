/*
 * api/proto.c — objects in protobuf, as kube-apiserver writes them for
 * application/vnd.kubernetes.protobuf: the envelope, and the kind's row's
 * reader of the message inside it.
 *
 * A kind's reader reads the same field list as its JSON decoder (see
 * source.h): an object is the same struct whichever encoding it came in.
 * The wire format cannot say "null": an empty Time reads as absent, as
 * upstream reads it, and an empty string as the empty string.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/pb.h"

int kcm_api_decode_proto(enum kcm_kind kind, const void *body, size_t len,
                         struct kcm_intern *pool, struct kcm_object **out,
                         struct kcm_api_error *err) {
  const uint8_t *k, *raw;
  size_t klen, rawlen;
  const char *why;

  const struct kcm_api_kind *row = kcm_api_kind(kind);

  *out = NULL;
  memset(err, 0, sizeof(*err));
  if (!row || !row->decode_proto) {
    snprintf(err->field, sizeof(err->field), "(protobuf)");
    snprintf(err->problem, sizeof(err->problem), "%s is not read from protobuf",
             kcm_api_kind_name(kind));
    return KCM_EINVAL;
  }
  if (!kcm_pb_unwrap(body, len, &k, &klen, &raw, &rawlen, &why) ||
      (klen && (klen != strlen(row->name) || memcmp(k, row->name, klen)))) {
    snprintf(err->field, sizeof(err->field), "(protobuf)");
    snprintf(err->problem, sizeof(err->problem), "%s%s", why ? why : "not a ",
             why ? "" : row->name);
    return KCM_EINVAL;
  }
  return row->decode_proto(raw, rawlen, pool, out, err);
}

int kcm_api_decode_proto_bare(enum kcm_kind kind, const void *msg, size_t len,
                              struct kcm_intern *pool, struct kcm_object **out,
                              struct kcm_api_error *err) {
  const struct kcm_api_kind *row = kcm_api_kind(kind);
  if (row && row->decode_proto)
    return row->decode_proto(msg, len, pool, out, err);
  *out = NULL;
  memset(err, 0, sizeof(*err));
  snprintf(err->field, sizeof(err->field), "(protobuf)");
  snprintf(err->problem, sizeof(err->problem), "%s is not read from protobuf",
           kcm_api_kind_name(kind));
  return KCM_EINVAL;
}
