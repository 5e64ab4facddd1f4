/*
 * api/text.c — decoding objects from their JSON text: the entry points.
 *
 * Objects are read in place with the kcm_json pull reader, each kind by
 * the field list of its own file (kind_<kind>.c; the metadata every kind
 * shares in meta.c, what ReplicaSets and Deployments share in workload.c).
 * A null reads as absent; a field the controllers depend on with a wrong
 * type is an error naming it; a bad value somewhere kcm never reads is no
 * error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/map.h"
#include "internal.h"

/* --- entry points ------------------------------------------------------------------- */

int kcm_api_decode_text(enum kcm_kind kind, const char *text, size_t len, struct kcm_json *j,
                        struct kcm_api_memo *memo, struct kcm_intern *pool,
                        struct kcm_object **out, struct kcm_api_error *err) {
  const struct kcm_api_kind *row = kcm_api_kind(kind);
  struct kcm_json own;
  int rc;

  *out = NULL;
  memset(err, 0, sizeof(*err));
  if (!j) {
    kcm_json_init(&own);
    j = &own;
  }
  if (row) {
    rc = row->decode_text(text, len, j, memo, pool, out, err);
  } else {
    snprintf(err->field, sizeof(err->field), "(object)");
    snprintf(err->problem, sizeof(err->problem), "is of no kind kcm reads");
    rc = KCM_EINVAL;
  }
  if (j == &own)
    kcm_json_release(&own);
  return rc;
}

uint64_t kcm_api_resource_version_text(const char *body, size_t len) {
  static const char *const path[] = {"metadata", "resourceVersion", NULL};
  struct kcm_json j;
  const char *s;
  size_t n;
  uint64_t rv = 0;
  kcm_json_init(&j);
  kcm_json_start(&j, body, len);
  if (kcm_json_find(&j, path) && kcm_json_string(&j, &s, &n) &&
      (strlen(s) != n || !kcm_api_parse_rv(s, &rv)))
    rv = 0;
  kcm_json_release(&j);
  return rv;
}
