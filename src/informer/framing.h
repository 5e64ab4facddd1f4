/*
 * framing — splits a watch stream into JSON values as bytes arrive.
 *
 * Watch responses are newline-delimited JSON events delivered in chunks
 * that may split an event at any byte. The framer finds where each value
 * ends by following its brackets and strings (the grammar is checked later,
 * by whoever reads the value) and passes the value's text to the callback:
 * straight from the chunk when it lies in one, else from a buffer holding
 * the pieces. API servers write one event per line, so a value that does
 * not start with '{', is cut by a newline, or is larger than the cap is
 * reported (NULL text with a reason) and skipped up to the next newline,
 * and the stream carries on.
 *
 * Internal to the informer module.
 */
#ifndef KCM_INFORMER_FRAMING_H
#define KCM_INFORMER_FRAMING_H

#include <stdbool.h>
#include <stddef.h>

#include "kcm/buf.h"

/* `text` is borrowed for the call; NULL with `why` set for a bad value.
 * Return non-zero to stop feeding (kcm_framer_feed then returns it). */
typedef int (*kcm_framer_cb)(const char *text, size_t len, const char *why, void *data);

struct kcm_framer {
  struct kcm_buf part; /* the start of a value split across chunks */
  size_t max_bytes;    /* cap on one value */
  unsigned depth;      /* open brackets of the value being read */
  bool in_string, escaped;
  bool skipping;       /* dropping input up to the next newline */
  bool pending;        /* inside a value */
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
