/* Unit tests for the work queue contract, on a clock the tests control. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "exposition.h"
#include "kcm/workqueue.h"
#include "../../src/workqueue/internal.h"

static uint64_t fake_ms;
static uint64_t fake_now(struct kcm_workqueue *q) { return fake_ms; }

struct ctx {
  uv_loop_t loop;
  struct kcm_workqueue q;
  int ready_calls;
  int drained_calls;
  bool closed;
};

static void on_ready(struct kcm_workqueue *q, void *data) { ((struct ctx *)data)->ready_calls++; }
static void on_drained(struct kcm_workqueue *q, void *data) {
  ((struct ctx *)data)->drained_calls++;
}
static void on_closed(struct kcm_workqueue *q, void *data) { ((struct ctx *)data)->closed = true; }

static void open_queue(struct ctx *c) {
  memset(c, 0, sizeof(*c));
  uv_loop_init(&c->loop);
  fake_ms = 1000000;
  kcm_workqueue_init(&c->q, &c->loop, "test");
  c->q.now = fake_now;
  kcm_ratelimit_init(&c->q.bucket, 10, 100, fake_ms);
  kcm_workqueue_set_ready(&c->q, on_ready, c);
}

static void close_queue(struct ctx *c) {
  kcm_workqueue_close(&c->q, on_closed, c);
  uv_run(&c->loop, UV_RUN_DEFAULT);
  assert_true(c->closed);
  assert_int_equal(uv_loop_close(&c->loop), 0);
}

static void dedup_and_fifo(void **state) {
  struct ctx c;
  open_queue(&c);
  kcm_workqueue_add(&c.q, "ns/a");
  kcm_workqueue_add(&c.q, "ns/b");
  kcm_workqueue_add(&c.q, "ns/a");
  kcm_workqueue_add(&c.q, "ns/c");
  assert_int_equal(kcm_workqueue_len(&c.q), 3);
  assert_int_equal(c.ready_calls, 0); /* never from inside add */
  uv_run(&c.loop, UV_RUN_NOWAIT);
  assert_int_equal(c.ready_calls, 1);
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/a");
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/b");
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/c");
  assert_null(kcm_workqueue_get(&c.q));
  kcm_workqueue_done(&c.q, "ns/a");
  kcm_workqueue_done(&c.q, "ns/b");
  kcm_workqueue_done(&c.q, "ns/c");
  assert_int_equal(c.q.items.len, 0); /* nothing left behind */
  close_queue(&c);
}

static void never_twice_at_once(void **state) {
  struct ctx c;
  open_queue(&c);
  kcm_workqueue_add(&c.q, "ns/a");
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/a");
  /* Added while processing: held back, and coalesced into one more run. */
  kcm_workqueue_add(&c.q, "ns/a");
  kcm_workqueue_add(&c.q, "ns/a");
  assert_int_equal(kcm_workqueue_len(&c.q), 0);
  assert_null(kcm_workqueue_get(&c.q));
  kcm_workqueue_done(&c.q, "ns/a");
  assert_int_equal(kcm_workqueue_len(&c.q), 1);
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/a");
  assert_null(kcm_workqueue_get(&c.q));
  kcm_workqueue_done(&c.q, "ns/a");
  assert_int_equal(kcm_workqueue_len(&c.q), 0);
  close_queue(&c);
}

static void add_after_keeps_the_earliest_time(void **state) {
  struct ctx c;
  open_queue(&c);
  kcm_workqueue_add_after(&c.q, "ns/a", 500);
  kcm_workqueue_add_after(&c.q, "ns/a", 50);
  kcm_workqueue_add_after(&c.q, "ns/a", 900);
  kcm_workqueue_add_after(&c.q, "ns/b", 100);
  kcm_workqueue_add_after(&c.q, "ns/c", 0); /* no delay: at once */
  assert_int_equal(kcm_workqueue_len(&c.q), 1);
  fake_ms += 49;
  kcm_workqueue_promote(&c.q);
  assert_int_equal(kcm_workqueue_len(&c.q), 1);
  fake_ms += 1;
  kcm_workqueue_promote(&c.q);
  assert_int_equal(kcm_workqueue_len(&c.q), 2);
  fake_ms += 50;
  kcm_workqueue_promote(&c.q);
  assert_int_equal(kcm_workqueue_len(&c.q), 3);
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/c");
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/a");
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/b");
  fake_ms += 10000;
  kcm_workqueue_promote(&c.q);
  assert_int_equal(kcm_workqueue_len(&c.q), 0); /* a's later deadlines were merged */
  close_queue(&c);
}

static void rate_limited_backoff_and_forget(void **state) {
  struct ctx c;
  uint64_t waits[] = {5, 10, 20, 40};
  int i;
  open_queue(&c);
  for (i = 0; i < 4; i++) {
    kcm_workqueue_add_rate_limited(&c.q, "ns/a");
    assert_int_equal(kcm_workqueue_requeues(&c.q, "ns/a"), i + 1);
    fake_ms += waits[i] - 1;
    kcm_workqueue_promote(&c.q);
    assert_int_equal(kcm_workqueue_len(&c.q), 0);
    fake_ms += 1;
    kcm_workqueue_promote(&c.q);
    assert_int_equal(kcm_workqueue_len(&c.q), 1);
    kcm_workqueue_get(&c.q);
    kcm_workqueue_done(&c.q, "ns/a");
  }
  kcm_workqueue_forget(&c.q, "ns/a");
  assert_int_equal(kcm_workqueue_requeues(&c.q, "ns/a"), 0);
  assert_int_equal(c.q.stats.retries, 4);
  close_queue(&c);
}

static void overall_bucket_limits_many_keys(void **state) {
  struct ctx c;
  char key[32];
  int i;
  open_queue(&c);
  /* 100 keys pass at their first 5 ms backoff; the 101st waits for a token. */
  for (i = 0; i < 101; i++) {
    snprintf(key, sizeof(key), "ns/k%d", i);
    kcm_workqueue_add_rate_limited(&c.q, key);
  }
  fake_ms += 5;
  kcm_workqueue_promote(&c.q);
  assert_int_equal(kcm_workqueue_len(&c.q), 100);
  fake_ms += 94;
  kcm_workqueue_promote(&c.q);
  assert_int_equal(kcm_workqueue_len(&c.q), 100);
  fake_ms += 1;
  kcm_workqueue_promote(&c.q);
  assert_int_equal(kcm_workqueue_len(&c.q), 101);
  close_queue(&c);
}

static void shutdown_drains(void **state) {
  struct ctx c;
  open_queue(&c);
  kcm_workqueue_add(&c.q, "ns/a");
  kcm_workqueue_add(&c.q, "ns/b");
  kcm_workqueue_add_after(&c.q, "ns/late", 100);
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/a");
  kcm_workqueue_shutdown(&c.q, on_drained, &c);
  kcm_workqueue_add(&c.q, "ns/c"); /* ignored */
  kcm_workqueue_add(&c.q, "ns/a"); /* ignored too */
  uv_run(&c.loop, UV_RUN_NOWAIT);
  assert_int_equal(c.drained_calls, 0); /* ns/a is still being processed */
  assert_int_equal(kcm_workqueue_len(&c.q), 1);
  kcm_workqueue_done(&c.q, "ns/a");
  assert_int_equal(kcm_workqueue_len(&c.q), 1);
  uv_run(&c.loop, UV_RUN_NOWAIT);
  assert_int_equal(c.drained_calls, 1);
  fake_ms += 1000;
  kcm_workqueue_promote(&c.q);
  assert_int_equal(kcm_workqueue_len(&c.q), 1); /* the delayed key was dropped */
  close_queue(&c);
}

static void timings(void **state) {
  struct ctx c;
  open_queue(&c);
  kcm_workqueue_add(&c.q, "ns/a");
  fake_ms += 250;
  kcm_workqueue_get(&c.q);
  fake_ms += 1500;
  assert_true(kcm_workqueue_longest_running(&c.q) == 1.5);
  assert_true(kcm_workqueue_unfinished(&c.q) == 1.5);
  kcm_workqueue_done(&c.q, "ns/a");
  assert_true(c.q.stats.queue_seconds == 0.25);
  assert_true(c.q.stats.work_seconds == 1.5);
  assert_true(kcm_workqueue_longest_running(&c.q) == 0);
  close_queue(&c);
}

/* --- metrics ----------------------------------------------------------------------------- */

/* The value of one workqueue series of the queue named "test", from a page
 * that must parse. */
static double metric(struct ctx *c, const char *family, const char *extra) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 16);
  char series[256];
  const char *why;
  double v;
  kcm_workqueue_metrics(&c->q, NULL, fake_ms, &b);
  why = expo_check(b.data);
  if (why)
    fail_msg("%s in:\n%s", why, b.data);
  snprintf(series, sizeof(series), "workqueue_%s{name=\"test\"%s}", family, extra);
  v = expo_value(b.data, series);
  if (isnan(v))
    fail_msg("no %s in:\n%s", series, b.data);
  kcm_buf_release(&b);
  return v;
}

static void metrics_follow_the_queue(void **state) {
  struct ctx c;
  open_queue(&c);
  assert_true(metric(&c, "depth", "") == 0);
  assert_true(metric(&c, "adds_total", "") == 0);
  assert_true(metric(&c, "queue_duration_seconds_count", "") == 0);
  kcm_workqueue_add(&c.q, "ns/a");
  kcm_workqueue_add(&c.q, "ns/b");
  kcm_workqueue_add(&c.q, "ns/a"); /* already waiting: not an add */
  assert_true(metric(&c, "adds_total", "") == 2);
  assert_true(metric(&c, "depth", "") == 2);

  fake_ms += 250;
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/a");
  assert_true(metric(&c, "depth", "") == 1);
  assert_true(metric(&c, "queue_duration_seconds_count", "") == 1);
  assert_true(metric(&c, "queue_duration_seconds_sum", "") == 0.25);
  assert_true(metric(&c, "queue_duration_seconds_bucket", ",le=\"0.1\"") == 0);
  assert_true(metric(&c, "queue_duration_seconds_bucket", ",le=\"1\"") == 1);
  fake_ms += 1500;
  assert_true(metric(&c, "unfinished_work_seconds", "") == 1.5);
  assert_true(metric(&c, "longest_running_processor_seconds", "") == 1.5);

  assert_string_equal(kcm_workqueue_get(&c.q), "ns/b"); /* waited 1.75 s */
  assert_true(metric(&c, "queue_duration_seconds_sum", "") == 2);
  assert_true(metric(&c, "queue_duration_seconds_bucket", ",le=\"1\"") == 1);
  assert_true(metric(&c, "queue_duration_seconds_bucket", ",le=\"10\"") == 2);
  fake_ms += 500;
  assert_true(metric(&c, "unfinished_work_seconds", "") == 2.5);
  assert_true(metric(&c, "longest_running_processor_seconds", "") == 2);

  /* Added while processing: an add, and waiting to run (client-go's depth),
   * though not in the FIFO until done(). */
  kcm_workqueue_add(&c.q, "ns/a");
  assert_true(metric(&c, "adds_total", "") == 3);
  assert_true(metric(&c, "depth", "") == 1);
  assert_int_equal(kcm_workqueue_len(&c.q), 0);
  kcm_workqueue_done(&c.q, "ns/a");
  assert_true(metric(&c, "work_duration_seconds_count", "") == 1);
  assert_true(metric(&c, "work_duration_seconds_sum", "") == 2);
  assert_true(metric(&c, "depth", "") == 1);
  kcm_workqueue_done(&c.q, "ns/b");
  assert_true(metric(&c, "work_duration_seconds_count", "") == 2);
  assert_true(metric(&c, "work_duration_seconds_sum", "") == 2.5);
  assert_true(metric(&c, "work_duration_seconds_bucket", ",le=\"1\"") == 1);
  assert_true(metric(&c, "unfinished_work_seconds", "") == 0);
  assert_true(metric(&c, "longest_running_processor_seconds", "") == 0);

  /* It waited from the add made while it was processing. */
  fake_ms += 20;
  assert_string_equal(kcm_workqueue_get(&c.q), "ns/a");
  assert_true(metric(&c, "queue_duration_seconds_count", "") == 3);
  assert_true(metric(&c, "queue_duration_seconds_bucket", ",le=\"0.01\"") == 0);
  assert_true(metric(&c, "queue_duration_seconds_bucket", ",le=\"0.1\"") == 1);
  assert_true(metric(&c, "queue_duration_seconds_bucket", ",le=\"1\"") == 2);
  assert_true(metric(&c, "depth", "") == 0);
  kcm_workqueue_done(&c.q, "ns/a");
  close_queue(&c);
}

static void retries_count_every_add_after(void **state) {
  struct ctx c;
  open_queue(&c);
  kcm_workqueue_add_rate_limited(&c.q, "ns/a");
  assert_true(metric(&c, "retries_total", "") == 1);
  assert_true(metric(&c, "adds_total", "") == 0); /* not yet due */
  kcm_workqueue_add_after(&c.q, "ns/b", 100);
  kcm_workqueue_add_after(&c.q, "ns/c", 0); /* at once: a retry and an add */
  assert_true(metric(&c, "retries_total", "") == 3);
  assert_true(metric(&c, "adds_total", "") == 1);
  assert_true(metric(&c, "depth", "") == 1);
  fake_ms += 5;
  kcm_workqueue_promote(&c.q);
  assert_true(metric(&c, "adds_total", "") == 2);
  assert_true(metric(&c, "depth", "") == 2);
  kcm_workqueue_add_rate_limited(&c.q, "ns/a"); /* waits 10 ms, a is queued meanwhile */
  assert_true(metric(&c, "retries_total", "") == 4);
  fake_ms += 100;
  kcm_workqueue_promote(&c.q);
  assert_true(metric(&c, "adds_total", "") == 3); /* b; a was still waiting */
  assert_true(metric(&c, "depth", "") == 3);
  kcm_workqueue_shutdown(&c.q, NULL, NULL);
  kcm_workqueue_add_after(&c.q, "ns/d", 10); /* ignored */
  assert_true(metric(&c, "retries_total", "") == 4);
  close_queue(&c);
}

/* Two queues under one header per family, as the controllers' queues are
 * served on one page. */
static void several_queues_render_one_header_per_family(void **state) {
  static const char *const families[] = {
      "workqueue_adds_total",
      "workqueue_depth",
      "workqueue_longest_running_processor_seconds",
      "workqueue_queue_duration_seconds",
      "workqueue_retries_total",
      "workqueue_unfinished_work_seconds",
      "workqueue_work_duration_seconds",
  };
  struct ctx c;
  struct kcm_workqueue other;
  const struct kcm_workqueue *qs[] = {&c.q, &other};
  const char *names[] = {"deployment", "replicaset"};
  struct kcm_buf b = KCM_BUF_INIT(1 << 16);
  char prefix[128];
  size_t i;
  const char *why;
  open_queue(&c);
  kcm_workqueue_init(&other, &c.loop, "other\"queue");
  other.now = fake_now;
  kcm_workqueue_add(&c.q, "ns/a");
  kcm_workqueue_add(&other, "ns/a");
  kcm_workqueue_add(&other, "ns/b");
  kcm_workqueue_metrics_many(qs, names, 2, fake_ms, &b);
  if ((why = expo_check(b.data)))
    fail_msg("%s in:\n%s", why, b.data);
  for (i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
    snprintf(prefix, sizeof(prefix), "# TYPE %s ", families[i]);
    assert_int_equal(expo_lines(b.data, prefix), 1);
    snprintf(prefix, sizeof(prefix), "# HELP %s [BETA] ", families[i]);
    assert_int_equal(expo_lines(b.data, prefix), 1);
  }
  assert_true(expo_value(b.data, "workqueue_depth{name=\"deployment\"}") == 1);
  assert_true(expo_value(b.data, "workqueue_depth{name=\"replicaset\"}") == 2);
  assert_int_equal(expo_lines(b.data, "workqueue_queue_duration_seconds_bucket{"), 22);
  /* Without names each queue is labelled with its own, escaped. */
  kcm_buf_reset(&b);
  kcm_workqueue_metrics_many(qs, NULL, 2, fake_ms, &b);
  assert_null(expo_check(b.data));
  assert_true(expo_value(b.data, "workqueue_adds_total{name=\"test\"}") == 1);
  assert_true(expo_value(b.data, "workqueue_adds_total{name=\"other\\\"queue\"}") == 2);
  kcm_buf_reset(&b);
  kcm_workqueue_metrics(&other, "replicaset", fake_ms, &b);
  assert_null(expo_check(b.data));
  assert_true(expo_value(b.data, "workqueue_adds_total{name=\"replicaset\"}") == 2);
  kcm_buf_release(&b);
  kcm_workqueue_close(&other, NULL, NULL);
  close_queue(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dedup_and_fifo),
      cmocka_unit_test(never_twice_at_once),
      cmocka_unit_test(add_after_keeps_the_earliest_time),
      cmocka_unit_test(rate_limited_backoff_and_forget),
      cmocka_unit_test(overall_bucket_limits_many_keys),
      cmocka_unit_test(shutdown_drains),
      cmocka_unit_test(timings),
      cmocka_unit_test(metrics_follow_the_queue),
      cmocka_unit_test(retries_count_every_add_after),
      cmocka_unit_test(several_queues_render_one_header_per_family),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
