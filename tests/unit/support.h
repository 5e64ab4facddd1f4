/*
 * Test support: the local API server as a child process, and synchronous
 * helpers that run a libuv loop until a request finishes or a condition
 * holds.
 */
#ifndef KCM_TEST_SUPPORT_H
#define KCM_TEST_SUPPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "kcm/client.h"

/* Start the local API server in a fresh directory; extra arguments follow.
 * Returns 0 or -1 (after printing why). */
int support_start_sim(const char *const *extra_args);
void support_stop_sim(void);
/* A file in the server's directory (kubeconfig, token, ...); static buffer. */
const char *support_sim_file(const char *name);
/* The directory of the running test's scratch files. */
const char *support_tmpdir(void);

struct support_result {
  bool done;
  int err;
  long status;
  double retry_after;
  char *body; /* owned; freed by the next request or support_result_free */
  char message[512];
};

void support_result_free(struct support_result *r);

/* Send a request and run the loop until it completes. */
void support_request(uv_loop_t *loop, struct kcm_client *c, const char *method,
                     const char *path, const char *body, struct support_result *r);

/* Run the loop until cond(arg) is true or timeout_ms passes; returns cond's
 * last value. */
bool support_run_until(uv_loop_t *loop, bool (*cond)(void *arg), void *arg, uint64_t timeout_ms);

/* Run the loop until *flag is true. A bare `while (!*flag)
 * uv_run(loop, UV_RUN_ONCE)` can sleep on after a timer's callback set the
 * flag, until the loop's next event (a token source's renewal, an hour
 * away); the tick of support_run_until() wakes it. */
void support_wait(uv_loop_t *loop, const bool *flag);
/* One uv_run(UV_RUN_ONCE) that returns within 20 ms, for a loop that checks
 * its own condition. */
void support_run_once(uv_loop_t *loop);

/* Load the server's kubeconfig into *cfg, start *loop and a client on it,
 * and create a fresh namespace "<prefix>-<pid>-<n>" in ns. Aborts the test
 * on failure. */
void support_connect(uv_loop_t *loop, struct kcm_client_config *cfg, struct kcm_client **c,
                     const char *prefix, char *ns, size_t ns_len);

/* POST /_sim/faults with a JSON body; aborts the test on refusal. */
void support_faults(uv_loop_t *loop, struct kcm_client *c, const char *json);

#endif
