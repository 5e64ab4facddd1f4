/*
 * leader internals: the Lease record read from and written to a json-c
 * tree, for leader.c and the tests. Not part of the module's public
 * interface, which keeps json-c types out of include/kcm.
 */
#ifndef KCM_LEADER_INTERNAL_H
#define KCM_LEADER_INTERNAL_H

#include <json-c/json.h>

#include "kcm/leader.h"

/* Read the record from a Lease object; returns 0 or KCM_EINVAL. */
int kcm_leader_parse(struct json_object *lease, struct kcm_lease_record *out);
/* Set a Lease object's spec to the record. */
void kcm_leader_apply(const struct kcm_lease_record *r, struct json_object *lease);

#endif
