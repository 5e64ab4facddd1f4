/*
 * framing — splits a watch stream into JSON values as bytes arrive.
 *
 * Watch responses are newline-delimited JSON events delivered in chunks
 * that may split an event at any byte. The framer feeds the bytes to one
 * json_tokener, which keeps its state across chunks, so no line buffer is
 * needed. Each complete value is passed to the callback; a value that is
 * malformed or larger than the cap is reported (NULL value with a reason)
 * and skipped up to the next newline, and the stream carries on.
 *
 * Internal to the informer module.
 */
#ifndef KCM_INFORMER_FRAMING_H
#define KCM_INFORMER_FRAMING_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

/* `value` is borrowed for the call; NULL with `why` set for a bad value.
 * Return non-zero to stop feeding (kcm_framer_feed then returns it). */
typedef int (*kcm_framer_cb)(struct json_object *value, const char *why, void *data);

struct kcm_framer {
  struct json_tokener *tok;
  size_t bytes;     /* bytes of the value being read */
  size_t max_bytes; /* cap on one value */
  bool skipping;    /* dropping input up to the next newline */
  bool pending;     /* the tokener holds part of a value */
  kcm_framer_cb cb;
  void *data;
};

int kcm_framer_init(struct kcm_framer *f, size_t max_bytes, kcm_framer_cb cb, void *data);
void kcm_framer_release(struct kcm_framer *f);
/* Feed bytes; returns 0, the callback's non-zero result, or KCM_ENOMEM. */
int kcm_framer_feed(struct kcm_framer *f, const char *p, size_t n);
/* True if the stream ended inside a value (a truncated last event). */
bool kcm_framer_partial(const struct kcm_framer *f);
void kcm_framer_reset(struct kcm_framer *f);

#endif
