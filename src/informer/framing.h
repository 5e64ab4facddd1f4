/*
 * framing — splits a watch stream into events as bytes arrive.
 *
 * Watch responses are JSON events, one per line (API servers end each with
 * a newline, and JSON escapes the newlines inside strings), delivered in
 * chunks that may split a line at any byte. The framer passes each
 * non-blank line, without its surrounding blanks, to the callback: straight
 * from the chunk when it lies in one, else from a buffer holding the
 * pieces. It does not look inside: the reader of the line checks its
 * grammar, so one broken event costs that line only. A line longer than
 * the cap is reported (NULL text with a reason) and skipped.
 *
 * A protobuf watch stream (application/vnd.kubernetes.protobuf;stream=watch)
 * is framed by length instead: each event is a 4-byte big-endian length,
 * then that many bytes, passed whole to the callback the same way; a
 * length over the cap is reported and its bytes skipped.
 *
 * Internal to the informer module.
 */
#ifndef KCM_INFORMER_FRAMING_H
#define KCM_INFORMER_FRAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm/buf.h"

/* `text` is borrowed for the call; NULL with `why` set for a bad value.
 * Return non-zero to stop feeding (kcm_framer_feed then returns it). */
typedef int (*kcm_framer_cb)(const char *text, size_t len, const char *why, void *data);

struct kcm_framer {
  struct kcm_buf part; /* the start of a line split across chunks */
  size_t max_bytes;    /* cap on one line */
  bool skipping;       /* dropping input up to the next newline (or frame end) */
  bool by_length;      /* frames are length-prefixed, not lines */
  uint8_t len_bytes;   /* of the current frame's length, read so far */
  uint32_t frame_len;  /* the current frame's length, once read */
  uint32_t frame_left; /* its bytes still to come */
  kcm_framer_cb cb;
  void *data;
};

int kcm_framer_init(struct kcm_framer *f, size_t max_bytes, kcm_framer_cb cb, void *data);
void kcm_framer_release(struct kcm_framer *f);
/* Feed bytes; returns 0, the callback's non-zero result, or KCM_ENOMEM. */
int kcm_framer_feed(struct kcm_framer *f, const char *p, size_t n);
/* True if a line has begun and not ended. */
bool kcm_framer_partial(const struct kcm_framer *f);
/* At the end of a stream: deliver a last line that had no newline, then
 * reset. Returns 0 or the callback's result. */
int kcm_framer_flush(struct kcm_framer *f);
/* Drop any partial frame; frames are lines, or length-prefixed with by_length. */
void kcm_framer_reset(struct kcm_framer *f, bool by_length);

#endif
