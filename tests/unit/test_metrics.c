/* Tests for the Prometheus text format helpers and the process metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kcm/metrics.h"

static void families_and_samples(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(4096);
  assert_int_equal(kcm_metrics_family(&b, "workqueue_depth", "gauge", "Current depth."), 0);
  assert_int_equal(kcm_metrics_sample(&b, "workqueue_depth", "name=\"deployment\"", 3), 0);
  assert_int_equal(kcm_metrics_sample(&b, "x_seconds", "", 0.25), 0);
  assert_int_equal(kcm_metrics_sample(&b, "x_total", "", 12345678901.0), 0);
  assert_int_equal(kcm_metrics_sample(&b, "x_start", "", 1795344830.47), 0);
  assert_string_equal(b.data, "# HELP workqueue_depth Current depth.\n"
                              "# TYPE workqueue_depth gauge\n"
                              "workqueue_depth{name=\"deployment\"} 3\n"
                              "x_seconds 0.25\n"
                              "x_total 12345678901\n"
                              "x_start 1795344830.47\n");
  kcm_buf_release(&b);
}

static double value_of(const char *text, const char *name) {
  char key[128];
  const char *p;
  snprintf(key, sizeof(key), "\n%s ", name);
  p = strstr(text, key);
  if (!p)
    fail_msg("no %s in:\n%s", name, text);
  return p ? strtod(p + strlen(key), NULL) : -1;
}

static void process_metrics(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 16);
  double start;
  volatile double spin = 0;
  int i;
  for (i = 0; i < 2000000; i++)
    spin += i;
  assert_int_equal(kcm_metrics_process(&b), 0);
  assert_true(value_of(b.data, "process_cpu_seconds_total") >= 0);
  assert_true(value_of(b.data, "process_resident_memory_bytes") > 1 << 20);
  assert_true(value_of(b.data, "process_virtual_memory_bytes") >=
              value_of(b.data, "process_resident_memory_bytes"));
  assert_true(value_of(b.data, "process_open_fds") >= 3);
  assert_true(value_of(b.data, "process_max_fds") >= value_of(b.data, "process_open_fds"));
  start = value_of(b.data, "process_start_time_seconds");
  assert_true(start <= (double)time(NULL) + 1 && start > (double)time(NULL) - 600);
  assert_non_null(strstr(b.data, "# TYPE process_cpu_seconds_total counter\n"));
  kcm_buf_release(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(families_and_samples),
      cmocka_unit_test(process_metrics),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
