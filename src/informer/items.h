/*
 * items — splitting a list response into its items as bytes arrive.
 *
 * A list answered from the API server's watch cache comes in one response
 * of any size, so it is read as it streams: the reader walks the list
 * object's members, passes each element of "items" and the value of
 * "metadata" to the callback as text, and skips every other member. Memory
 * is bounded by one item (its text is handed straight from the chunk when
 * it lies in one, else from a buffer holding the pieces), never by the
 * body. Items may nest to any depth (kube-apiserver stores managedFields
 * entries 10,000 levels deep). The reader checks the list's structure
 * (brackets, strings, separators); the callback checks each value's grammar, so one broken item
 * costs that item only. An item longer than the cap is reported (NULL text
 * with a reason) and skipped; a "metadata" longer than the cap fails the
 * list.
 *
 * Internal to the informer module.
 */
#ifndef KCM_INFORMER_ITEMS_H
#define KCM_INFORMER_ITEMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm/buf.h"
#include "kcm/json.h"

enum kcm_items_part { KCM_ITEMS_ITEM, KCM_ITEMS_METADATA };

/* `text` is borrowed for the call; NULL with `why` set for an item over the
 * cap. Return non-zero to stop feeding (kcm_items_feed then returns it). */
typedef int (*kcm_items_cb)(enum kcm_items_part part, const char *text, size_t len,
                            const char *why, void *data);

struct kcm_items {
  struct kcm_buf part;  /* the value being kept, when split across chunks */
  size_t max_bytes;     /* cap on one item, and on the metadata */
  const char *err;      /* why the list is malformed (static text), or NULL */
  kcm_items_cb cb;
  void *data;
  uint8_t state;        /* where in the list object the reader is */
  uint8_t value;        /* the value being scanned: an item, the metadata, skipped */
  bool first;           /* no member (or element) yet in the object (or items) */
  bool in_string, escaped, scalar, oversize, seen_items;
  char key[16];         /* the member's key, when short and plain */
  uint8_t key_len;      /* sizeof(key) for a key too long or escaped */
  struct kcm_json_nest nest; /* open containers inside the value being scanned, any depth */
};

void kcm_items_init(struct kcm_items *s, size_t max_bytes, kcm_items_cb cb, void *data);
void kcm_items_release(struct kcm_items *s);
/* Ready for a new response (keeps the buffer's memory). */
void kcm_items_reset(struct kcm_items *s);
/* Feed bytes; returns 0, the callback's non-zero result, KCM_EINVAL for a
 * malformed list (s->err says why) or KCM_ENOMEM. */
int kcm_items_feed(struct kcm_items *s, const char *p, size_t n);
/* At the end of the response: 0 if the list was whole, else KCM_EINVAL
 * with s->err set. */
int kcm_items_finish(struct kcm_items *s);

#endif
