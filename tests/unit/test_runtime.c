/*
 * Tests for the runtime every controller's syncs share, with a controller
 * of the tests' own and a writer the tests answer: a sync moves on only
 * when every request in flight has answered, wave by wave, skipping a
 * failed step's group or halting; a key's fate after its sync
 * (forgotten, retried with backoff, dropped, queued again later); the
 * workers' cap and a worker given back; standing aside; requests named
 * by their sync; and the clocks, both injected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_writer.h"
#include "kcm/error.h"
#include "kcm/runtime.h"
#include "../../src/workqueue/internal.h"

/* What the test controller does in each sync. */
struct plan {
  int phases;           /* waves, each of `sends` GETs */
  int sends;
  int per_group;        /* waves in one group (0: 1) */
  enum { GO_ON, SKIP, HALT } on_error; /* what a failed GET does */
  int fail;             /* a KCM_E* code the sync ends with, or 0 */
  bool forget;          /* the error is not worth retrying */
  int64_t requeue_after_ms;
  bool give_back;       /* the last step gives its worker back */
};

#define MAX_STEPS 16

struct fixture {
  uv_loop_t loop;
  struct kcm_intern pool;
  struct fake_writer fw;
  struct kcm_runtime rt;
  struct kcm_runtime_ops ops;
  struct plan plan;
  int starts, steps_sent, releases, stopped;
  char started[16][32]; /* keys in the order their syncs started */
  size_t sent_at[MAX_STEPS]; /* the steps sent, by index, in order */
};

struct step {
  struct kcm_runtime_step at;
  int n; /* its index, to check the runtime hands back the right one */
};

struct job {
  struct kcm_runtime_job base;
  struct step steps[MAX_STEPS];
};

static uint64_t wall_now, queue_now;
static uint64_t wall(void) { return wall_now; }
static uint64_t queue_clock(struct kcm_workqueue *q) { return queue_now; }

static void answered(const struct kcm_client_response *resp, void *data) {
  struct job *j = data;
  struct fixture *f = j->base.rt->ctx;
  if (resp->err && f->plan.on_error == SKIP)
    kcm_runtime_skip_group(&j->base, 0); /* the failed step's group: the first */
  else if (resp->err && f->plan.on_error == HALT)
    kcm_runtime_halt(&j->base);
  kcm_runtime_answered(&j->base);
}

/* Plan phases x sends steps; the sync's fate is set here too. */
static void start(struct kcm_runtime_job *base) {
  struct fixture *f = base->rt->ctx;
  struct job *j = (struct job *)base;
  int per = f->plan.per_group ? f->plan.per_group : 1, n = 0, w, i;
  if (f->starts < 16)
    snprintf(f->started[f->starts], sizeof(f->started[0]), "%s", base->key);
  f->starts++;
  for (w = 0; w < f->plan.phases; w++)
    for (i = 0; i < f->plan.sends; i++, n++) {
      assert_true(n < MAX_STEPS);
      j->steps[n] = (struct step){{(uint32_t)w, (uint32_t)(w / per)}, n};
    }
  kcm_runtime_plan(base, j->steps, (size_t)n, sizeof(j->steps[0]));
  if (f->plan.fail) {
    kcm_runtime_fail(base, f->plan.fail, "planned failure");
    base->forget = f->plan.forget;
  }
  base->requeue_after_ms = f->plan.requeue_after_ms;
}

static void send_step(struct kcm_runtime_job *base, const void *step, size_t i) {
  struct fixture *f = base->rt->ctx;
  const struct step *s = step;
  struct kcm_write req;
  assert_int_equal(s->n, (int)i);
  if (f->steps_sent < MAX_STEPS)
    f->sent_at[f->steps_sent] = i;
  f->steps_sent++;
  assert_int_equal(kcm_writer_get(&req, KCM_KIND_POD, base->ns, base->name), 0);
  assert_int_equal(kcm_runtime_send(base, &req, answered, base), 0);
  if (f->plan.give_back && i + 1 == base->nsteps)
    kcm_runtime_give_back(base);
}

static void release(struct kcm_runtime_job *base) {
  ((struct fixture *)base->rt->ctx)->releases++;
}

static int setup(void **state) {
  struct fixture *f = calloc(1, sizeof(*f));
  assert_non_null(f);
  assert_int_equal(uv_loop_init(&f->loop), 0);
  kcm_intern_init(&f->pool);
  fake_writer_init(&f->fw);
  f->ops = (struct kcm_runtime_ops){"test", sizeof(struct job), 3, start, send_step, release};
  f->plan = (struct plan){.phases = 1, .sends = 1, .requeue_after_ms = -1};
  kcm_runtime_init(&f->rt, &f->loop, &f->ops, f, 1, &f->fw.w, &f->pool);
  wall_now = 1700000000000;
  queue_now = 1000;
  f->rt.wall_ms = wall;
  f->rt.queue.now = queue_clock;
  *state = f;
  return 0;
}

static void stopped(struct kcm_runtime *rt) { ((struct fixture *)rt->ctx)->stopped++; }

static int teardown(void **state) {
  struct fixture *f = *state;
  size_t i;
  kcm_runtime_stop(&f->rt, stopped);
  for (i = 0; i < f->fw.n; i++)
    if (!f->fw.calls[i].answered)
      fake_writer_answer(&f->fw, (int)i, 503, "");
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(f->stopped, 1);
  kcm_runtime_release(&f->rt);
  fake_writer_release(&f->fw);
  kcm_intern_release(&f->pool);
  assert_int_equal(uv_loop_close(&f->loop), 0);
  free(f);
  return 0;
}

/* Delayed keys whose time has come (by the queue's clock) move into the
 * queue, and the loop's next turn starts their syncs. */
static void promote(struct fixture *f) {
  kcm_workqueue_promote(&f->rt.queue);
  uv_run(&f->loop, UV_RUN_NOWAIT);
}

/* Answer the first unanswered GET. */
static void answer(struct fixture *f, long status) {
  int i = fake_writer_find(&f->fw, "GET", "/pods/");
  assert_true(i >= 0);
  fake_writer_answer(&f->fw, i, status, "{}");
}

static void sync_moves_on_when_every_request_has_answered(void **state) {
  struct fixture *f = *state;
  f->plan.sends = 2;
  f->plan.phases = 2;
  kcm_runtime_enqueue_key(&f->rt, "ns/a");
  kcm_runtime_run(&f->rt);
  assert_int_equal(f->starts, 1);
  assert_int_equal(f->steps_sent, 2); /* the first wave: two GETs */
  assert_int_equal(fake_writer_pending(&f->fw, "GET", "/pods/a"), 2);
  answer(f, 200);
  assert_int_equal(f->steps_sent, 2); /* one still in flight */
  answer(f, 200);
  assert_int_equal(f->steps_sent, 4); /* the second wave */
  assert_int_equal(f->sent_at[2], 2);
  assert_int_equal(f->sent_at[3], 3);
  answer(f, 200);
  assert_int_equal(f->releases, 0);
  answer(f, 200);
  assert_int_equal(f->releases, 1); /* nothing left: over */
  assert_int_equal(f->rt.stats.syncs, 1);
  assert_int_equal(f->rt.stats.errors, 0);
  assert_int_equal(f->rt.running, 0);
  assert_int_equal(kcm_workqueue_len(&f->rt.queue), 0);
  assert_int_equal(kcm_workqueue_requeues(&f->rt.queue, "ns/a"), 0);
}

static void a_failed_step_skips_the_rest_of_its_group(void **state) {
  struct fixture *f = *state;
  f->plan.sends = 1;
  f->plan.phases = 3;
  f->plan.per_group = 2; /* waves 0 and 1 are group 0; wave 2 group 1 */
  f->plan.on_error = SKIP;
  kcm_runtime_enqueue_key(&f->rt, "ns/a");
  kcm_runtime_run(&f->rt);
  assert_int_equal(f->steps_sent, 1);
  answer(f, 500);
  /* wave 1 is skipped with its group; wave 2 goes */
  assert_int_equal(f->steps_sent, 2);
  assert_int_equal(f->sent_at[1], 2);
  answer(f, 200);
  assert_int_equal(f->rt.stats.syncs, 1);
}

static void a_halt_ends_the_plan_after_its_wave(void **state) {
  struct fixture *f = *state;
  f->plan.sends = 2;
  f->plan.phases = 2;
  f->plan.on_error = HALT;
  kcm_runtime_enqueue_key(&f->rt, "ns/a");
  kcm_runtime_run(&f->rt);
  answer(f, 500);
  assert_int_equal(f->releases, 0); /* the rest of its wave is still in flight */
  answer(f, 200);
  assert_int_equal(f->steps_sent, 2); /* the second wave never went */
  assert_int_equal(f->releases, 1);
  assert_int_equal(f->rt.stats.syncs, 1);
}

static void a_sync_without_a_plan_is_over_at_once(void **state) {
  struct fixture *f = *state;
  f->plan.phases = 0;
  kcm_runtime_enqueue_key(&f->rt, "ns/a");
  kcm_runtime_run(&f->rt);
  assert_int_equal(f->starts, 1);
  assert_int_equal(f->steps_sent, 0);
  assert_int_equal(f->releases, 1);
  assert_int_equal(f->rt.running, 0);
}

static void failures_retry_with_backoff_until_dropped(void **state) {
  struct fixture *f = *state;
  int round;
  f->plan.sends = 0;
  f->plan.fail = KCM_ESERVER;
  kcm_runtime_enqueue_key(&f->rt, "ns/a");
  kcm_runtime_run(&f->rt);
  for (round = 1; round <= 3; round++) {
    assert_int_equal(f->starts, round);
    assert_int_equal(f->rt.stats.errors, round);
    assert_int_equal(kcm_workqueue_requeues(&f->rt.queue, "ns/a"), round);
    /* not before its backoff: 5 ms, doubling */
    promote(f);
    assert_int_equal(f->starts, round);
    queue_now += 5u << (round - 1);
    promote(f);
  }
  /* the fourth failure in a row is past max_retries (3): dropped */
  assert_int_equal(f->starts, 4);
  assert_int_equal(f->rt.stats.dropped, 1);
  assert_int_equal(kcm_workqueue_requeues(&f->rt.queue, "ns/a"), 0);
  assert_int_equal(kcm_workqueue_len(&f->rt.queue), 0);
}

static void an_error_not_worth_retrying_is_forgotten(void **state) {
  struct fixture *f = *state;
  f->plan.sends = 0;
  f->plan.fail = KCM_EINVAL;
  f->plan.forget = true;
  kcm_runtime_enqueue_key(&f->rt, "ns/a");
  kcm_runtime_run(&f->rt);
  assert_int_equal(f->rt.stats.errors, 1);
  assert_int_equal(f->rt.stats.dropped, 0);
  assert_int_equal(kcm_workqueue_requeues(&f->rt.queue, "ns/a"), 0);
  queue_now += 1000000;
  promote(f);
  assert_int_equal(f->starts, 1);
}

static void success_may_ask_for_the_key_later(void **state) {
  struct fixture *f = *state;
  f->plan.sends = 0;
  f->plan.requeue_after_ms = 3000;
  kcm_runtime_enqueue_key(&f->rt, "ns/a");
  kcm_runtime_run(&f->rt);
  assert_int_equal(f->starts, 1);
  queue_now += 2999;
  promote(f);
  assert_int_equal(f->starts, 1);
  queue_now += 1;
  promote(f);
  assert_int_equal(f->starts, 2);
}

static void workers_cap_the_syncs_and_a_worker_may_be_given_back(void **state) {
  struct fixture *f = *state;
  kcm_runtime_enqueue_key(&f->rt, "ns/a");
  kcm_runtime_enqueue_key(&f->rt, "ns/b");
  kcm_runtime_run(&f->rt);
  assert_int_equal(f->starts, 1); /* one worker */
  assert_string_equal(f->started[0], "ns/a");
  answer(f, 200);
  assert_int_equal(f->starts, 2); /* a's sync over: b's begins */
  assert_string_equal(f->started[1], "ns/b");
  answer(f, 200);
  /* A sync left waiting on its last request may give its worker back. */
  f->plan.give_back = true;
  kcm_runtime_enqueue_key(&f->rt, "ns/c");
  kcm_runtime_enqueue_key(&f->rt, "ns/d");
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(f->starts, 4);
  assert_int_equal(fake_writer_pending(&f->fw, "GET", "/pods/"), 2);
  answer(f, 200);
  answer(f, 200);
  assert_int_equal(f->rt.stats.syncs, 4);
  assert_int_equal(f->rt.running, 0);
}

static bool hold_ns_b(void *ctx, const char *ns, size_t n) {
  return n == 1 && ns[0] == 'b';
}

static void standing_aside_holds_keys_until_released(void **state) {
  struct fixture *f = *state;
  f->plan.sends = 0;
  kcm_runtime_gate(&f->rt, hold_ns_b, NULL);
  kcm_runtime_enqueue_key(&f->rt, "a/x");
  kcm_runtime_enqueue_key(&f->rt, "b/y");
  kcm_runtime_run(&f->rt);
  assert_int_equal(f->starts, 1);
  assert_string_equal(f->started[0], "a/x");
  assert_int_equal(f->rt.held.len, 1);
  kcm_runtime_gate(&f->rt, NULL, NULL);
  kcm_runtime_release_held(&f->rt);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(f->starts, 2);
  assert_string_equal(f->started[1], "b/y");
  /* Paused: keys wait in the queue, each once. */
  kcm_runtime_pause(&f->rt, true);
  kcm_runtime_enqueue_key(&f->rt, "a/x");
  kcm_runtime_enqueue_key(&f->rt, "a/x");
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(f->starts, 2);
  assert_int_equal(kcm_workqueue_len(&f->rt.queue), 1);
  kcm_runtime_pause(&f->rt, false);
  assert_int_equal(f->starts, 3);
}

static bool owned_a;

static bool owns_a(void *ctx, const char *ns, size_t n) {
  return owned_a && n == 1 && ns[0] == 'a';
}

static bool in_a(void *ctx, const char *ns, size_t n) { return n == 1 && ns[0] == 'a'; }

static void only_owned_namespaces_sync(void **state) {
  struct fixture *f = *state;
  owned_a = false;
  kcm_runtime_own(&f->rt, owns_a, NULL);
  kcm_runtime_enqueue_key(&f->rt, "a/x");
  kcm_runtime_enqueue_key(&f->rt, "b/y");
  kcm_runtime_run(&f->rt);
  assert_int_equal(f->starts, 0);
  assert_int_equal(f->rt.held.len, 2);
  /* a's namespace becomes its own: its key syncs, b's waits again */
  owned_a = true;
  kcm_runtime_release_held(&f->rt);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(f->starts, 1);
  assert_string_equal(f->started[0], "a/x");
  assert_int_equal(kcm_runtime_syncing(&f->rt, in_a, NULL), 1); /* its GET in flight */
  answer(f, 200);
  assert_int_equal(kcm_runtime_syncing(&f->rt, in_a, NULL), 0);
  assert_int_equal(f->starts, 1);
  assert_int_equal(f->rt.held.len, 1); /* b's */
  /* b's namespace is another's for good: its key is forgotten */
  assert_int_equal(kcm_runtime_drop_held(&f->rt, in_a, NULL), 0);
  assert_int_equal(kcm_runtime_drop_held(&f->rt, hold_ns_b, NULL), 1);
  assert_int_equal(f->rt.held.len, 0);
  kcm_runtime_own(&f->rt, NULL, NULL);
}

/* Each request a sync sends names the sync's key as its origin (what a
 * writer wrapped around the runtime's, --shadow's, files it under). */
static void requests_name_their_sync(void **state) {
  struct fixture *f = *state;
  f->plan.sends = 2;
  kcm_runtime_enqueue_key(&f->rt, "ns/a");
  kcm_runtime_enqueue_key(&f->rt, "ns/b");
  kcm_runtime_run(&f->rt); /* one worker: a, then b */
  assert_int_equal(f->fw.n, 2);
  assert_string_equal(f->fw.calls[0].origin, "ns/a");
  assert_string_equal(f->fw.calls[1].origin, "ns/a");
  answer(f, 200);
  answer(f, 200);
  assert_int_equal(f->fw.n, 4);
  assert_string_equal(f->fw.calls[2].origin, "ns/b");
  assert_string_equal(f->fw.calls[3].origin, "ns/b");
  answer(f, 200);
  answer(f, 200);
  assert_int_equal(f->releases, 2);
}

static void the_clocks_are_the_tests(void **state) {
  struct fixture *f = *state;
  assert_int_equal(kcm_runtime_wall_ms(&f->rt), 1700000000000);
  wall_now += 42;
  assert_int_equal(kcm_runtime_wall_ms(&f->rt), 1700000000042);
  f->rt.wall_ms = kcm_runtime_now_ms; /* the real one: after 2023 */
  assert_true(kcm_runtime_wall_ms(&f->rt) > 1700000000000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(sync_moves_on_when_every_request_has_answered, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_failed_step_skips_the_rest_of_its_group, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(a_halt_ends_the_plan_after_its_wave, setup, teardown),
      cmocka_unit_test_setup_teardown(a_sync_without_a_plan_is_over_at_once, setup, teardown),
      cmocka_unit_test_setup_teardown(failures_retry_with_backoff_until_dropped, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(an_error_not_worth_retrying_is_forgotten, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(success_may_ask_for_the_key_later, setup, teardown),
      cmocka_unit_test_setup_teardown(workers_cap_the_syncs_and_a_worker_may_be_given_back,
                                      setup, teardown),
      cmocka_unit_test_setup_teardown(standing_aside_holds_keys_until_released, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(only_owned_namespaces_sync, setup, teardown),
      cmocka_unit_test_setup_teardown(requests_name_their_sync, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(the_clocks_are_the_tests, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
