/*
 * leader internals: the Lease record read from a json-c tree and written
 * into a Lease's text, for leader.c and the tests. Not part of the
 * module's public interface, which keeps json-c types out of include/kcm.
 */
#ifndef KCM_LEADER_INTERNAL_H
#define KCM_LEADER_INTERNAL_H

#include <json-c/json.h>

#include "kcm/jsonw.h"
#include "kcm/leader.h"

/* Read the record from a Lease object; returns 0 or KCM_EINVAL. */
int kcm_leader_parse(struct json_object *lease, struct kcm_lease_record *out);
/* The Lease's text (len bytes) with its spec set to the record, into w;
 * everything else in it is copied as it is. kcm_jsonw_finish() says
 * whether it worked (KCM_EINVAL: the text is not an object). */
void kcm_leader_apply(const struct kcm_lease_record *r, const char *lease, size_t len,
                      struct kcm_jsonw *w);

#endif
