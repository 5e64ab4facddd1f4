/*
 * controllers/replicaset/internal.h — the planner's steps that the tests
 * drive one by one. Not installed; include/kcm/replicaset.h is the
 * interface.
 */
#ifndef KCM_REPLICASET_INTERNAL_H
#define KCM_REPLICASET_INTERNAL_H

#include "kcm/replicaset.h"

/* Replicas are managed only when the expectations are satisfied (the cache
 * has seen every earlier create and delete) and the ReplicaSet is not being
 * deleted. */
bool kcm_replicaset_should_manage(const struct kcm_replicaset *rs, bool satisfied);

/* Slow start: the next batch after one of `batch`, with `remaining` left
 * (1, 2, 4, 8, ... never more than remaining). */
int32_t kcm_replicaset_next_batch(int32_t batch, int32_t remaining);

/* Draw the random end of a pod name of len bytes as the API server draws
 * it, before each create: 5 characters, each uniform over
 * bcdfghjklmnpqrstvwxz2456789, from one call of uniform(n), a random number
 * below n. */
void kcm_replicaset_pod_name_fill(char *name, size_t len, uint32_t (*uniform)(uint32_t n));

/* The pod to create from the ReplicaSet's template (labels, annotations and
 * finalizers of the template, its spec, and the controller reference).
 * kcm names it as the API server would name it from its generateName, which
 * it carries too: the prefix cut to 58 characters, then 5 random ones. With
 * a name chosen before it is sent, a create whose answer was lost can be
 * sent again and its AlreadyExists tells that the pod was made. The name
 * is the len bytes at out->data + *name_at, ending in placeholders for
 * kcm_replicaset_pod_name_fill() to replace before each create. */
#define KCM_REPLICASET_NAME_MAX 63
#define KCM_REPLICASET_NAME_RANDOM 5
int kcm_replicaset_pod_body(const struct kcm_replicaset *rs, struct kcm_buf *out,
                            size_t *name_at, size_t *name_len);

#endif
