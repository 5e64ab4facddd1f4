/*
 * events — core/v1 Events about the objects a controller acts on.
 *
 * Each recorder posts Events as kube-controller-manager's recorders do:
 * name "<object name>.<nanosecond clock in hex>", the object's kind,
 * namespace, name, uid, apiVersion and resourceVersion, source.component
 * set to the controller ("replicaset-controller"), count 1, first and last
 * timestamps equal. Events pass client-go's correlator first: more than 10
 * similar events (differing only in message) within 10 minutes become one
 * "(combined from similar events): ..." event, a repeat of an event patches
 * its count, lastTimestamp and message, and each source and object may
 * send 25 events, then one per 5 minutes. Recording never blocks the caller: events wait in a
 * queue and are sent one at a time, as client-go's single event writer
 * sends them, so a burst of events never holds up the controller's own
 * requests. A repeat of an event whose post still waits is folded into
 * that post (a create then creates it with the latest count; a patch
 * patches to it): the server ends as upstream's request per repeat leaves
 * it. Beyond `max_queued` waiting events further ones are dropped and
 * counted. A post the server did not answer (a network error or timeout)
 * is tried again, up to 12 times, `retry_ms` apart (the first wait random),
 * as client-go tries; one the server refused is not. Queued events are
 * dropped when the client closes.
 */
#ifndef KCM_EVENTS_H
#define KCM_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm/api.h"
#include "kcm/client.h"
#include "kcm/map.h"
#include "kcm/writer.h"

/* --- the correlator (pure) ------------------------------------------------------------------ */

/* A least-recently-used cache of at most `limit` keyed entries. */
struct kcm_event_entry;
struct kcm_event_cache {
  struct kcm_map map;                   /* key -> entry (entries owned) */
  struct kcm_event_entry *head, *tail; /* most recently used first */
  size_t limit;
  bool names; /* the logger's: each entry owns its event's name */
};

/* client-go's EventCorrelator state: spam buckets per source and object,
 * aggregation records per source, object, type and reason, and the last
 * occurrence of every event, each cache holding 4096 entries. */
struct kcm_event_correlator {
  struct kcm_event_cache spam, aggregate, log;
};

/* An event as the correlator sees it; strings borrowed for the call. */
struct kcm_event_fields {
  const char *component, *kind, *ns, *name, *uid, *api_version, *type, *reason, *message;
  uint64_t nanos; /* wall clock, for a new event's name "<object>.<hex nanos>" */
};

struct kcm_event_outcome {
  bool skip;       /* the spam filter drops it */
  bool aggregated; /* post it as "(combined from similar events): <message>" */
  bool repeat;     /* an earlier event with this name exists: patch its count */
  uint32_t count;
  char first[32];  /* firstTimestamp */
  char name[400];
};

void kcm_event_correlator_init(struct kcm_event_correlator *k);
void kcm_event_correlator_release(struct kcm_event_correlator *k);
/* Correlate one event at monotonic time now_ms (`now` is the wall clock as
 * RFC 3339): aggregation first, then counting, then the spam filter, as
 * client-go orders them. Returns 0 or KCM_ENOMEM. */
int kcm_event_correlate(struct kcm_event_correlator *k, const struct kcm_event_fields *f,
                        uint64_t now_ms, const char *now, struct kcm_event_outcome *out);

/* --- the recorder -------------------------------------------------------------------------- */

struct kcm_event_post;

struct kcm_events {
  struct kcm_writer *writer; /* borrowed: the controller's */
  char component[64];
  struct kcm_event_post *head, *tail; /* owned: waiting to be sent, oldest first */
  struct kcm_map waiting;    /* an Event's path -> its latest waiting post (borrowed) */
  size_t queued;
  size_t max_queued;         /* beyond it new events are dropped (default 1000) */
  uint64_t retry_ms;         /* wait between tries of an unanswered post (default 10 s;
                              * the first wait is random up to it) */
  bool sending;              /* one post is in flight */
  struct kcm_event_correlator correlator;
  uint64_t sent;
  uint64_t failed;
  uint64_t dropped;
  uint64_t skipped;          /* held back by the spam filter */
  uint64_t folded;           /* repeats folded into a waiting post */
};

/* Append kcm_events_total{controller,outcome} for the n recorders ev,
 * controller[i] naming ev[i]: their events sent, failed (refused, or
 * unanswered after every try), dropped (the queue full, out of memory, the
 * client closing), skipped by the spam filter and folded into a waiting
 * post. Returns 0 or an error
 * (KCM_ENOMEM; KCM_ETOOBIG for a controller name too long for a label). */
int kcm_events_metrics(const struct kcm_events *const *ev, const char *const *controller,
                       size_t n, struct kcm_buf *out);

/* The object an event is about; strings borrowed for the call. */
struct kcm_event_object {
  const char *kind;
  const char *api_version;
  const char *ns;
  const char *name;
  struct kcm_uid uid;
  uint64_t rv;
};

/* The Event kcm_events_record() creates, as client-go writes it (eventTime
 * null, reporting fields empty; NULL strings read as ""), into *body, and
 * with `patch` given, the strategic merge patch of a repeat's count,
 * lastTimestamp and message into *patch: heap strings the caller frees.
 * `out` is the correlator's outcome, `when` the time now (RFC 3339).
 * Returns 0 or KCM_ENOMEM (nothing left allocated). */
int kcm_events_bodies(const char *component, const struct kcm_event_object *obj, bool warning,
                      const char *reason, const char *message,
                      const struct kcm_event_outcome *out, const char *when, char **body,
                      char **patch);

void kcm_events_init(struct kcm_events *ev, struct kcm_writer *writer, const char *component);
/* Free the correlator's caches and the waiting posts' index (after the
 * client has closed, which drops the posts). */
void kcm_events_release(struct kcm_events *ev);
/* The reference to a cached object (kind and apiVersion from its kind). */
void kcm_events_object_of(const struct kcm_object *o, struct kcm_event_object *out);
void kcm_events_record(struct kcm_events *ev, const struct kcm_event_object *obj, bool warning,
                       const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
