/*
 * events — core/v1 Events about the objects a controller acts on.
 *
 * Each recorder posts Events as kube-controller-manager's recorders do:
 * name "<object name>.<nanosecond clock in hex>", the object's kind,
 * namespace, name, uid, apiVersion and resourceVersion, source.component
 * set to the controller ("replicaset-controller"), count 1, first and last
 * timestamps equal. Recording never blocks the caller: events wait in a
 * queue and are sent one at a time, as client-go's single event writer
 * sends them, so a burst of events never holds up the controller's own
 * requests. Beyond `max_queued` waiting events further ones are dropped and
 * counted. Queued events are dropped when the client closes.
 */
#ifndef KCM_EVENTS_H
#define KCM_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm/api.h"
#include "kcm/client.h"

struct kcm_event_post;

struct kcm_events {
  struct kcm_client *client; /* borrowed */
  unsigned limiter;          /* the client limiter events draw from (default 0) */
  char component[64];
  struct kcm_event_post *head, *tail; /* owned: waiting to be sent, oldest first */
  size_t queued;
  size_t max_queued;         /* beyond it new events are dropped (default 1000) */
  bool sending;              /* one post is in flight */
  uint64_t sent;
  uint64_t failed;
  uint64_t dropped;
};

/* The object an event is about; strings borrowed for the call. */
struct kcm_event_object {
  const char *kind;
  const char *api_version;
  const char *ns;
  const char *name;
  struct kcm_uid uid;
  uint64_t rv;
};

void kcm_events_init(struct kcm_events *ev, struct kcm_client *client, const char *component);
/* The reference to a cached object (kind and apiVersion from its kind). */
void kcm_events_object_of(const struct kcm_object *o, struct kcm_event_object *out);
void kcm_events_record(struct kcm_events *ev, const struct kcm_event_object *obj, bool warning,
                       const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
