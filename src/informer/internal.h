/*
 * informer internals shared by its files. Not part of the module's
 * interface (include/kcm/informer.h is).
 *
 *   informer.c  the reflector: lifecycle, the state machine (list, then
 *               watch; backoff between failed attempts), the watch request,
 *               decoding one object
 *   list.c      the list, read as it streams (split by items.c), or
 *               streamed as watch events; falling back from one to the other
 *   event.c     reading the events of a watch stream (framed by framing.c)
 *   store.c     the cache: add, update, delete, relist; the handlers;
 *               writes the cache is behind; resync
 *   index.c     the indexes: by namespace and by controller uid
 */
#ifndef KCM_INFORMER_INTERNAL_H
#define KCM_INFORMER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm/buf.h"
#include "kcm/informer.h"

/* Why the informer stopped its own watch (inf->stop_reason). */
enum { KCM_INFORMER_STOP_EXPIRED = 1, KCM_INFORMER_STOP_ERROR = 2 };

/* --- informer.c: the state machine ---------------------------------------------------- */

/* Wait before the next attempt (list or watch, as inf->need_list says). */
void kcm_informer_backoff(struct kcm_informer *inf, double retry_after_s);
void kcm_informer_start_watch(struct kcm_informer *inf);
/* Send the watch that streams a list (state and pending as the list's). */
void kcm_informer_start_stream(struct kcm_informer *inf);
/* Append name=value, the value percent-encoded. */
int kcm_informer_query_param(struct kcm_buf *b, const char *name, const char *value);
/* Decode one object from its text; log and count it when malformed (NULL). */
struct kcm_object *kcm_informer_decode(struct kcm_informer *inf, const char *text, size_t len,
                                       const char *where);
/* The same for an object in protobuf: a bare Pod message (a list's item)
 * or one in its envelope (a watch event's). */
struct kcm_object *kcm_informer_decode_proto(struct kcm_informer *inf, const void *msg,
                                             size_t len, bool bare, const char *where);
/* Is this Content-Type protobuf? And the Accept header to send. */
bool kcm_informer_is_proto(const char *content_type);
const char *kcm_informer_accept(const struct kcm_informer *inf);
/* Whether o is of a namespace the filter keeps; when not, it is dropped
 * (unreferenced) and counted. */
bool kcm_informer_kept(struct kcm_informer *inf, struct kcm_object *o);
/* Take rv as the last version seen, if it fits. */
void kcm_informer_set_rv(struct kcm_informer *inf, const char *rv);

/* --- list.c ------------------------------------------------------------------------------ */

/* Set up the list's reader, or free it (with the list's state). */
int kcm_informer_list_init(struct kcm_informer *inf);
void kcm_informer_list_release(struct kcm_informer *inf);
/* Start a full list (the first, or a relist): streamed with watch_list. */
void kcm_informer_start_list(struct kcm_informer *inf);
/* A streamed list's object (taking over the reference), or its deletion. */
int kcm_informer_gather(struct kcm_informer *inf, struct kcm_object *o, bool deleted);
/* The initial-events-end bookmark: the objects gathered replace the cache;
 * the stream goes on as the watch. */
void kcm_informer_stream_done(struct kcm_informer *inf);
/* The stream ended before that bookmark: reason is the informer's stop
 * reason, at_once whether it ended in under a second with no events. */
void kcm_informer_stream_ended(struct kcm_informer *inf, const struct kcm_client_response *resp,
                               int reason, bool at_once);
/* Drop the objects of the list being assembled. */
void kcm_informer_drop_pending(struct kcm_informer *inf);

/* --- event.c ----------------------------------------------------------------------------- */

/* The framer's callback: read and apply one line of the watch stream. */
int kcm_informer_on_event(const char *text, size_t len, const char *why, void *data);

/* --- store.c ----------------------------------------------------------------------------- */

void kcm_informer_store_init(struct kcm_informer *inf);
/* Drop every cached object and record of a write. */
void kcm_informer_store_release(struct kcm_informer *inf);
/* Put o (taking over the caller's reference) and tell the handlers. */
void kcm_informer_upsert(struct kcm_informer *inf, struct kcm_object *o);
/* Remove ns/name and tell the handlers, reporting `final` (or the cached
 * object when NULL). */
void kcm_informer_delete(struct kcm_informer *inf, const char *ns, const char *name,
                         struct kcm_object *final, bool unknown);
/* Apply a full list objs[0..n) (taking over their references): upsert
 * everything in it, delete what it lacks. */
void kcm_informer_replace(struct kcm_informer *inf, struct kcm_object **objs, size_t n);
/* The resync timer's callback: every cached object to the handlers. */
void kcm_informer_resync(uv_timer_t *t);

/* --- index.c ----------------------------------------------------------------------------- */

void kcm_informer_index_init(struct kcm_informer *inf);
void kcm_informer_index_release(struct kcm_informer *inf);
/* Add o to the bucket of its namespace and of its controller, or take it out. */
void kcm_informer_link(struct kcm_informer *inf, struct kcm_object *o);
void kcm_informer_unlink(struct kcm_informer *inf, struct kcm_object *o);

#endif
