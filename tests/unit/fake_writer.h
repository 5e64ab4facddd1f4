/*
 * A writer for tests: it records every request a controller sends and
 * answers each only when the test says how, as upstream's controller
 * tests use a fake clientset.
 */
#ifndef KCM_TEST_FAKE_WRITER_H
#define KCM_TEST_FAKE_WRITER_H

#include <stdbool.h>
#include <stddef.h>

#include "kcm/writer.h"

#define FAKE_WRITER_CALLS 512

struct fake_call {
  char method[8];
  char path[KCM_CLIENT_PATH_MAX];
  char *body;          /* owned copy; "" for none */
  const char *content_type;
  char origin[300];    /* the sending sync's key; "" for none */
  bool repeatable;
  kcm_client_done_cb done;
  void *data;
  bool answered;
};

struct fake_writer {
  struct kcm_writer w;   /* what the controller is given */
  struct fake_call calls[FAKE_WRITER_CALLS];
  size_t n;
  int refuse;            /* non-zero: sends fail with this error */
  char events[64][128];  /* "reason: message" of the events answered */
  size_t nevents;
};

void fake_writer_init(struct fake_writer *f);
void fake_writer_release(struct fake_writer *f);
/* The first unanswered call with this method whose path contains `part`
 * (and is not an event, unless part names events), or -1. */
int fake_writer_find(const struct fake_writer *f, const char *method, const char *part);
/* How many unanswered calls match. */
size_t fake_writer_pending(const struct fake_writer *f, const char *method, const char *part);
/* Answer call i with an HTTP status and body; an error's message is the
 * body's Status message, as the client gives it. */
void fake_writer_answer(struct fake_writer *f, int i, long status, const char *body);
/* Answer call i as a request whose answer was lost. */
void fake_writer_lose(struct fake_writer *f, int i);
/* Answer every event post (201) until none is left; their reasons and
 * messages land in f->events. */
void fake_writer_events(struct fake_writer *f);
/* Whether an event "reason: message..." was posted (prefix match). */
bool fake_writer_has_event(const struct fake_writer *f, const char *prefix);
/* A Status body of reason and code with message. */
const char *fake_status(char *buf, size_t len, long code, const char *reason, const char *message);

#endif
