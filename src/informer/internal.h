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
/* An object that could not be decoded: its namespace and name as far as
 * they could be read ("" otherwise), and why. */
struct kcm_informer_bad {
  char ns[64], name[KCM_API_NAME_MAX + 1];
  struct kcm_api_error e;
};
/* Decode one object from its text; NULL when it cannot be read, *bad then
 * saying what and why (counted; logged by kcm_informer_unreadable). */
struct kcm_object *kcm_informer_decode(struct kcm_informer *inf, const char *text, size_t len,
                                       struct kcm_informer_bad *bad);
/* The same for an object in protobuf: a bare Pod message (a list's item)
 * or one in its envelope (a watch event's). */
struct kcm_object *kcm_informer_decode_proto(struct kcm_informer *inf, const void *msg,
                                             size_t len, bool bare, struct kcm_informer_bad *bad);
/* An object read `where` ("list", "watch") could not be read: keep its
 * last copy. In a list being assembled it is recorded there; else (a
 * watch event, `deleted` for DELETED) it is marked unreadable, or deleted.
 * Logs once per object while it stays unreadable. */
void kcm_informer_unreadable(struct kcm_informer *inf, const struct kcm_informer_bad *bad,
                             const char *where, bool in_list, bool deleted);
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
/* A streamed list's object ns/name is gone. */
void kcm_informer_gather_gone(struct kcm_informer *inf, const char *ns, const char *name);
/* The initial-events-end bookmark: the objects gathered replace the cache;
 * the stream goes on as the watch. */
void kcm_informer_stream_done(struct kcm_informer *inf);
/* The stream ended before that bookmark: reason is the informer's stop
 * reason, at_once whether it ended in under a second with no events. */
void kcm_informer_stream_ended(struct kcm_informer *inf, const struct kcm_client_response *resp,
                               int reason, bool at_once);
/* Drop the objects of the list being assembled, and what it could not read. */
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
 * everything in it, delete what it lacks but list_unreadable names (all
 * of it with list_blind), which becomes the set of unreadable objects. */
void kcm_informer_replace(struct kcm_informer *inf, struct kcm_object **objs, size_t n);
/* The set of objects by (namespace, name) that `unreadable` and
 * `list_unreadable` are. Adding returns 1 when added, 0 when already
 * there, KCM_ENOMEM. */
void kcm_informer_keys_init(struct kcm_map *m);
int kcm_informer_keys_add(struct kcm_map *m, const char *ns, const char *name);
bool kcm_informer_keys_has(const struct kcm_map *m, const char *ns, const char *name);
void kcm_informer_keys_remove(struct kcm_map *m, const char *ns, const char *name);
void kcm_informer_keys_clear(struct kcm_map *m);
/* The resync timer's callback: every cached object to the handlers. */
void kcm_informer_resync(uv_timer_t *t);

/* --- index.c ----------------------------------------------------------------------------- */

void kcm_informer_index_init(struct kcm_informer *inf);
void kcm_informer_index_release(struct kcm_informer *inf);
/* Add o to the bucket of its namespace and of its controller, or take it out. */
void kcm_informer_link(struct kcm_informer *inf, struct kcm_object *o);
void kcm_informer_unlink(struct kcm_informer *inf, struct kcm_object *o);

#endif
