/*
 * pbitems — splitting a protobuf list response into its items as bytes
 * arrive: items.c's work for application/vnd.kubernetes.protobuf.
 *
 * The body is the "k8s" magic, then a runtime.Unknown whose field 2 (raw)
 * holds the list: a message whose field 1 is its ListMeta and whose field
 * 2, repeated, its items. The reader walks that path by tags and lengths,
 * passes each item's bytes and the ListMeta's to the callback (straight
 * from the chunk when they lie in one, else from a buffer holding the
 * pieces), and skips every other field, so memory is bounded by one item.
 * Lengths are checked against the message that holds them; an item over
 * the cap is reported (NULL text with a reason) and skipped; metadata over
 * the cap, a malformed tag, or a body that ends inside a field fails the
 * list.
 *
 * Internal to the informer module.
 */
#ifndef KCM_INFORMER_PBITEMS_H
#define KCM_INFORMER_PBITEMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "items.h"
#include "kcm/buf.h"

struct kcm_pbitems {
  struct kcm_buf part;  /* the value being kept, when split across chunks */
  size_t max_bytes;     /* cap on one item, and on the metadata */
  const char *err;      /* why the list is malformed (static text), or NULL */
  kcm_items_cb cb;      /* as items.c's: the parts are bytes, not text */
  void *data;
  uint8_t magic;        /* bytes of the magic seen */
  uint8_t hdr[20];      /* a field's tag and length, when split across chunks */
  uint8_t hdr_len;
  uint8_t value;        /* what the value being read is (skipped, item, metadata) */
  bool in_list;         /* inside the envelope's raw field */
  bool seen_list;
  bool oversize;
  uint64_t list_left;   /* bytes of the list still to come, when in_list */
  uint64_t value_left;  /* bytes of the value being read (or skipped) still to come */
};

void kcm_pbitems_init(struct kcm_pbitems *s, size_t max_bytes, kcm_items_cb cb, void *data);
void kcm_pbitems_release(struct kcm_pbitems *s);
/* Ready for a new response (keeps the buffer's memory). */
void kcm_pbitems_reset(struct kcm_pbitems *s);
/* Feed bytes; returns 0, the callback's non-zero result, KCM_EINVAL for a
 * malformed list (s->err says why) or KCM_ENOMEM. */
int kcm_pbitems_feed(struct kcm_pbitems *s, const char *p, size_t n);
/* At the end of the response: 0 if the list was whole, else KCM_EINVAL
 * with s->err set. */
int kcm_pbitems_finish(struct kcm_pbitems *s);

#endif
