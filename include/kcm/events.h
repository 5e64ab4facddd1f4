/*
 * events — core/v1 Events about the objects a controller acts on.
 *
 * Each recorder posts Events as kube-controller-manager's recorders do:
 * name "<object name>.<nanosecond clock in hex>", the object's kind,
 * namespace, name, uid, apiVersion and resourceVersion, source.component
 * set to the controller ("replicaset-controller"), count 1, first and last
 * timestamps equal. Posting never blocks the caller; at most `max_in_flight`
 * posts are outstanding and further events are dropped and counted, so a
 * storm of events cannot exhaust memory.
 */
#ifndef KCM_EVENTS_H
#define KCM_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm/api.h"
#include "kcm/client.h"

struct kcm_events {
  struct kcm_client *client; /* borrowed */
  char component[64];
  size_t in_flight;
  size_t max_in_flight;
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
