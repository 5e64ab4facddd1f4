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

/* Decide what to do with the Lease as last read. `observed_ms` is the local
 * time at which its content was first seen, `now_ms` the local time now and
 * `now` the wall clock as RFC 3339 with microseconds. Fills *next for
 * CREATE and UPDATE. */
enum kcm_leader_step kcm_leader_decide(const struct kcm_lease_record *cur, const char *identity,
                                       int32_t duration_s, uint64_t observed_ms,
                                       uint64_t now_ms, const char *now,
                                       struct kcm_lease_record *next);

/* The wall clock as "2026-11-22T10:20:01.123456Z" (at least 28 bytes). */
void kcm_leader_now(char *buf, size_t len);

/* The record that releases a lease held as *cur. */
void kcm_leader_release_record(const struct kcm_lease_record *cur, const char *now,
                               struct kcm_lease_record *out);

#endif
