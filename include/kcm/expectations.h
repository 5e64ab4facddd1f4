/*
 * expectations — what a controller has asked for and not yet seen in its
 * cache (upstream's ControllerExpectations with UID-tracked deletions).
 *
 * Before creating n pods for a ReplicaSet the controller records that it
 * expects n creations; each pod the informer delivers lowers the count, as
 * does each creation that was never sent or failed. Before deleting pods it
 * records their keys; a deletion lowers the count only for a recorded key,
 * so a pod seen first terminating and then gone counts once. While a
 * record is unfulfilled and younger than the TTL (5 minutes upstream), the
 * controller plans no new creates or deletes for that key, so a watch that
 * lags never makes it act twice. A missing record counts as satisfied.
 * Counts may go negative. Keys and pod keys are copied.
 */
#ifndef KCM_EXPECTATIONS_H
#define KCM_EXPECTATIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm/map.h"

struct kcm_expectations {
  struct kcm_map records;
  uint64_t ttl_ms;
};

/* ttl_ms 0: no record is ever waited for. */
void kcm_expectations_init(struct kcm_expectations *e, uint64_t ttl_ms);
void kcm_expectations_release(struct kcm_expectations *e);

/* No record, fulfilled, or older than the TTL. */
bool kcm_expectations_satisfied(struct kcm_expectations *e, const char *key, uint64_t now_ms);
/* Replace the record: n creations expected. */
void kcm_expectations_expect_creations(struct kcm_expectations *e, const char *key, int64_t n,
                                       uint64_t now_ms);
/* Replace the record: the deletion of these pods ("namespace/name") expected. */
void kcm_expectations_expect_deletions(struct kcm_expectations *e, const char *key,
                                       const char *const *pods, size_t n, uint64_t now_ms);
void kcm_expectations_creation_observed(struct kcm_expectations *e, const char *key);
/* Lower the deletion count if `pod` was expected to go (once per pod). */
void kcm_expectations_deletion_observed(struct kcm_expectations *e, const char *key,
                                        const char *pod);
void kcm_expectations_delete(struct kcm_expectations *e, const char *key);

/* For tests and logs: the counts of a record (false if none). */
bool kcm_expectations_get(struct kcm_expectations *e, const char *key, int64_t *add,
                          int64_t *del);

#endif
