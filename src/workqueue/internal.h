/*
 * workqueue internals: what the module's own code and its tests share, and no
 * other module calls.
 */
#ifndef KCM_WORKQUEUE_INTERNAL_H
#define KCM_WORKQUEUE_INTERNAL_H

#include "kcm/workqueue.h"

/* Observers for the tests; kcm_workqueue_metrics() renders the same. */
size_t kcm_workqueue_len(const struct kcm_workqueue *q);

/* Seconds the longest-running key has been processing (0 if none). */
double kcm_workqueue_longest_running(struct kcm_workqueue *q);

/* Render the workqueue_* families of one queue, headers included, its
 * samples labelled name="<name>" (NULL: the queue's own name). now_ms is
 * the queue's clock (uv_now of its loop). Output that does not fit the
 * buffer's limit is left out in whole lines. */
void kcm_workqueue_metrics(const struct kcm_workqueue *q, const char *name, uint64_t now_ms,
                           struct kcm_buf *out);

/* Move delayed keys whose time has come into the FIFO (the delay timer
 * calls this; tests with their own clock call it directly). */
void kcm_workqueue_promote(struct kcm_workqueue *q);

/* Seconds of work in progress summed over the keys being processed. */
double kcm_workqueue_unfinished(struct kcm_workqueue *q);

#endif
