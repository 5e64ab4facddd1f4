/*
 * api/workload.h — what reading a ReplicaSet and a Deployment share: the
 * handlers of the fields both have, which each kind lists in its own file
 * (kind_replicaset.c, kind_deployment.c), and the reading of the whole
 * object around that list. Internal to api/.
 *
 * The selector and the template are the exception to reading in place:
 * their text is kept, and json-c reads it once the object is read (a
 * small text holding only them; the memo of recent templates lets a known
 * template's spec be left out of it). They are read from JSON only.
 */
#ifndef KCM_API_WORKLOAD_H
#define KCM_API_WORKLOAD_H

#include "internal.h"
#include "source.h"

/* Where a kind's reader puts what it reads, and what it gathers. A kind's
 * read state begins with one, so that the shared handlers take the same
 * obj as the kind's own. */
struct kcm_api_workload {
  struct kcm_object *o;
  struct kcm_api_meta meta;
  struct kcm_api_parts parts;
  int32_t *replicas, *min_ready_seconds; /* spec */
  int32_t *count_replicas, *ready, *available, *terminating; /* status */
  int64_t *observed_generation;
  struct kcm_conditions *conditions; /* grown with kcm_buf_grow_items() */
  const char *selector, *tmpl; /* their text in the object's; NULL when absent or null */
  size_t selector_len, tmpl_len;
  bool tmpl_object; /* the template is an object (a memo key) */
};

/* Point w at the members a ReplicaSet and a Deployment (x, either) both
 * have by the same names; the selector and template parts are the kind's
 * to set. */
#define KCM_API_WORKLOAD_POINT(w, x)                                                           \
  do {                                                                                         \
    (w)->o = &(x)->o;                                                                          \
    (w)->meta.pairs = &(x)->annotations;                                                       \
    (w)->meta.writers = &(x)->writers;                                                         \
    (w)->replicas = &(x)->replicas;                                                            \
    (w)->min_ready_seconds = &(x)->min_ready_seconds;                                          \
    (w)->count_replicas = &(x)->status.replicas;                                               \
    (w)->ready = &(x)->status.ready;                                                           \
    (w)->available = &(x)->status.available;                                                   \
    (w)->terminating = &(x)->status.terminating;                                               \
    (w)->observed_generation = &(x)->status.observed_generation;                               \
    (w)->conditions = &(x)->status.conditions;                                                 \
  } while (0)

/* The shared fields' handlers; obj is the kind's read state. */
int kcm_api_workload_metadata(struct kcm_api_src *s, void *obj);
int kcm_api_workload_replicas(struct kcm_api_src *s, void *obj);
int kcm_api_workload_min_ready(struct kcm_api_src *s, void *obj);
int kcm_api_workload_selector(struct kcm_api_src *s, void *obj);
int kcm_api_workload_template(struct kcm_api_src *s, void *obj);
int kcm_api_workload_count_replicas(struct kcm_api_src *s, void *obj);
int kcm_api_workload_ready(struct kcm_api_src *s, void *obj);
int kcm_api_workload_available(struct kcm_api_src *s, void *obj);
int kcm_api_workload_terminating(struct kcm_api_src *s, void *obj);
int kcm_api_workload_observed(struct kcm_api_src *s, void *obj);
/* A non-negative int32 into *out (a field kcm keeps as -1 when unset). */
int kcm_api_workload_count(struct kcm_api_src *s, const char *field, int32_t *out);
/* One entry of status.conditions, its fields as listed (the protobuf
 * numbers differ between the kinds); appended to w->conditions. */
int kcm_api_workload_condition(struct kcm_api_src *s, struct kcm_api_workload *w,
                               const struct kcm_api_field *fields, size_t n);
/* A condition's fields' handlers, for the kinds' lists. */
int kcm_api_workload_condition_type(struct kcm_api_src *s, void *obj);
int kcm_api_workload_condition_status(struct kcm_api_src *s, void *obj);
int kcm_api_workload_condition_reason(struct kcm_api_src *s, void *obj);
int kcm_api_workload_condition_message(struct kcm_api_src *s, void *obj);
int kcm_api_workload_condition_updated(struct kcm_api_src *s, void *obj);
int kcm_api_workload_condition_transitioned(struct kcm_api_src *s, void *obj);

/* Read the object text[0..len) by the kind's top-level fields into w's
 * destinations (the kind's struct, allocated and defaulted by the kind),
 * then its selector and template; 0 or an error in s->err. The kind
 * checks what is its own, and releases the object on an error. */
int kcm_api_workload_decode(struct kcm_api_src *s, struct kcm_api_workload *w, void *obj,
                            const char *text, size_t len, struct kcm_api_memo *memo,
                            const struct kcm_api_field *fields, size_t n);

#endif
