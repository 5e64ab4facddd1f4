/* Tests for the Prometheus text format helpers and the process metrics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exposition.h"
#include "kcm/error.h"
#include "kcm/metrics.h"
#include "../../src/metrics/internal.h"

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

static void values_as_prometheus_reads_them(void **state) {
  static const struct {
    double v;
    const char *text;
  } cases[] = {
      {0, "0"},
      {-0.0, "0"},
      {1, "1"},
      {-1, "-1"},
      {42, "42"},
      {1e15, "1000000000000000"},
      {9007199254740992.0, "9007199254740992"},
      {18446744073709551615.0, "1.8446744073709552e+19"},
      {0.005, "0.005"},
      {1e-06, "1e-06"},
      {9.999999999999999e-06, "9.999999999999999e-06"},
      {0.1, "0.1"},
      {0.1 + 0.2, "0.30000000000000004"},
      {-2.5, "-2.5"},
      {1e300, "1e+300"},
      {1.0 / 3, "0.3333333333333333"},
      {1795344830.47, "1795344830.47"},
  };
  char buf[KCM_METRICS_VALUE_MAX];
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    assert_string_equal(kcm_metrics_format(buf, cases[i].v), cases[i].text);
    assert_true(strtod(buf, NULL) == cases[i].v);
  }
  assert_string_equal(kcm_metrics_format(buf, INFINITY), "+Inf");
  assert_string_equal(kcm_metrics_format(buf, -INFINITY), "-Inf");
  assert_string_equal(kcm_metrics_format(buf, NAN), "NaN");
  assert_string_equal(kcm_metrics_format(buf, -1.7976931348623157e308), "-1.7976931348623157e+308");
}

static void labels_and_help_are_escaped(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(4096);
  const char *pairs[] = {"name", "a\\b\"c\nd", "host", "h:1", NULL};
  const char *none[] = {NULL};
  char labels[64], tiny[8];
  assert_int_equal(kcm_metrics_labels(labels, sizeof(labels), pairs), 0);
  assert_string_equal(labels, "name=\"a\\\\b\\\"c\\nd\",host=\"h:1\"");
  assert_int_equal(kcm_metrics_labels(labels, sizeof(labels), none), 0);
  assert_string_equal(labels, "");
  assert_int_equal(kcm_metrics_labels(labels, sizeof(labels), NULL), 0);
  assert_string_equal(labels, "");
  assert_int_equal(kcm_metrics_labels(tiny, sizeof(tiny), pairs), KCM_ETOOBIG);
  assert_string_equal(tiny, "");
  assert_int_equal(kcm_metrics_labels(labels, sizeof(labels), pairs), 0);
  assert_int_equal(kcm_metrics_family(&b, "x_total", "counter", "Path C:\\tmp,\nsecond line."), 0);
  assert_int_equal(kcm_metrics_sample(&b, "x_total", labels, 7), 0);
  assert_string_equal(b.data, "# HELP x_total Path C:\\\\tmp,\\nsecond line.\n"
                              "# TYPE x_total counter\n"
                              "x_total{name=\"a\\\\b\\\"c\\nd\",host=\"h:1\"} 7\n");
  assert_null(expo_check(b.data));
  kcm_buf_release(&b);
}

static const double bounds[] = {0.005, 0.1, 1, 10};

static void histogram_buckets_and_rendering(void **state) {
  struct kcm_metrics_histogram h;
  struct kcm_buf b = KCM_BUF_INIT(4096);
  static const double descending[] = {1, 0.5}, with_nan[] = {NAN};
  static const double many[KCM_METRICS_MAX_BUCKETS + 1] = {0};
  assert_int_equal(kcm_metrics_histogram_init(&h, bounds, 0), KCM_EINVAL);
  assert_int_equal(kcm_metrics_histogram_init(&h, many, KCM_METRICS_MAX_BUCKETS + 1), KCM_EINVAL);
  assert_int_equal(kcm_metrics_histogram_init(&h, descending, 2), KCM_EINVAL);
  assert_int_equal(kcm_metrics_histogram_init(&h, bounds, 2), 0);
  assert_int_equal(kcm_metrics_histogram_init(&h, with_nan, 1), KCM_EINVAL);
  assert_int_equal(kcm_metrics_histogram_init(&h, bounds, 4), 0);
  /* Rendered before any observation: zeros throughout. */
  assert_int_equal(kcm_metrics_histogram_render(&b, "t_seconds", "", &h), 0);
  assert_string_equal(b.data, "t_seconds_bucket{le=\"0.005\"} 0\n"
                              "t_seconds_bucket{le=\"0.1\"} 0\n"
                              "t_seconds_bucket{le=\"1\"} 0\n"
                              "t_seconds_bucket{le=\"10\"} 0\n"
                              "t_seconds_bucket{le=\"+Inf\"} 0\n"
                              "t_seconds_sum 0\n"
                              "t_seconds_count 0\n");
  kcm_buf_reset(&b);
  kcm_metrics_histogram_observe(&h, 0);
  kcm_metrics_histogram_observe(&h, 0.005); /* a bound counts in its own bucket */
  kcm_metrics_histogram_observe(&h, 0.0050001);
  kcm_metrics_histogram_observe(&h, 1);
  kcm_metrics_histogram_observe(&h, 60); /* only in +Inf */
  assert_int_equal(h.count, 5);
  assert_int_equal(h.counts[0], 2);
  assert_int_equal(h.counts[1], 1);
  assert_int_equal(h.counts[2], 1);
  assert_int_equal(h.counts[3], 0);
  assert_int_equal(kcm_metrics_family(&b, "t_seconds", "histogram", "Test."), 0);
  assert_int_equal(kcm_metrics_histogram_render(&b, "t_seconds", "verb=\"GET\"", &h), 0);
  assert_string_equal(b.data, "# HELP t_seconds Test.\n"
                              "# TYPE t_seconds histogram\n"
                              "t_seconds_bucket{verb=\"GET\",le=\"0.005\"} 2\n"
                              "t_seconds_bucket{verb=\"GET\",le=\"0.1\"} 3\n"
                              "t_seconds_bucket{verb=\"GET\",le=\"1\"} 4\n"
                              "t_seconds_bucket{verb=\"GET\",le=\"10\"} 4\n"
                              "t_seconds_bucket{verb=\"GET\",le=\"+Inf\"} 5\n"
                              "t_seconds_sum{verb=\"GET\"} 61.0100001\n"
                              "t_seconds_count{verb=\"GET\"} 5\n");
  assert_null(expo_check(b.data));
  kcm_buf_release(&b);
}

/* A writer that runs out of room leaves the buffer as it was, so a page
 * never ends in half a line or half a histogram. */
static void writers_append_whole_lines(void **state) {
  struct kcm_metrics_histogram h;
  struct kcm_buf b = KCM_BUF_INIT(120);
  assert_int_equal(kcm_metrics_histogram_init(&h, bounds, 4), 0);
  assert_int_equal(kcm_buf_append_str(&b, "x 1\n"), 0);
  assert_int_equal(kcm_metrics_histogram_render(&b, "t_seconds", "", &h), KCM_ETOOBIG);
  assert_string_equal(b.data, "x 1\n");
  assert_int_equal(kcm_metrics_family(&b, "t_seconds", "histogram",
                                      "A help text far too long for what is left of this buffer, "
                                      "which holds one hundred and twenty bytes."),
                   KCM_ETOOBIG);
  assert_string_equal(b.data, "x 1\n");
  b.limit = 1 << 16;
  assert_int_equal(kcm_metrics_process(&b), 0);
  b.limit = b.len + 10;
  assert_int_equal(kcm_metrics_process(&b), KCM_ETOOBIG);
  assert_int_equal(b.len, b.limit - 10);
  kcm_buf_release(&b);
}

/* The checker the other tests rely on refuses what Prometheus refuses. */
static void checker_refuses_invalid_pages(void **state) {
  static const char *const bad[] = {
      "x 1\n",                                                    /* no TYPE */
      "# TYPE x gauge\n# TYPE x gauge\nx 1\n",                    /* two TYPE lines */
      "# TYPE x gauge\nx 1\n# TYPE x gauge\n",                    /* TYPE after samples */
      "# TYPE x gauge\n# TYPE y gauge\nx 1\ny 1\nx{a=\"b\"} 2\n", /* lines apart */
      "# TYPE x gauge\nx{a=\"b\"} 1\nx{a=\"b\"} 1\n",             /* series twice */
      "# TYPE x gauge\nx{a=\"b\",a=\"c\"} 1\n",                   /* label twice */
      "# TYPE x gauge\nx{a=\"\\q\"} 1\n",                         /* bad escape */
      "# TYPE x gauge\nx{a=\"b} 1\n",                             /* unterminated */
      "# TYPE x gauge\nx one\n",                                  /* bad value */
      "# TYPE x gauge\nx 1",                                      /* no newline */
      "# HELP x a\\q\n# TYPE x gauge\nx 1\n",                     /* bad escape in HELP */
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_count 3\n",
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\n",
  };
  size_t i;
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (!expo_check(bad[i]))
      fail_msg("accepted:\n%s", bad[i]);
  assert_null(expo_check("# HELP x Some help.\n# TYPE x gauge\nx{a=\"b\"} 1\nx{a=\"c\"} NaN\n"
                         "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
                         "h_sum 3.5\nh_count 2\n"));
  assert_true(expo_value("# TYPE x gauge\nx{a=\"b\"} 1.5\n", "x{a=\"b\"}") == 1.5);
  assert_true(isnan(expo_value("# TYPE x gauge\nx{a=\"b\"} 1.5\n", "x")));
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
  assert_true(spin > 0);
  assert_int_equal(kcm_metrics_process(&b), 0);
  assert_true(value_of(b.data, "process_cpu_seconds_total") >= 0);
  assert_true(value_of(b.data, "process_resident_memory_bytes") > 1 << 20);
  assert_true(value_of(b.data, "process_virtual_memory_bytes") >=
              value_of(b.data, "process_resident_memory_bytes"));
  assert_true(value_of(b.data, "process_open_fds") >= 3);
  assert_true(value_of(b.data, "process_max_fds") >= value_of(b.data, "process_open_fds"));
  start = value_of(b.data, "process_start_time_seconds");
  assert_true(start <= (double)time(NULL) + 1 && start > (double)time(NULL) - 600);
  assert_true(value_of(b.data, "process_virtual_memory_max_bytes") > 0);
  assert_non_null(strstr(b.data, "# TYPE process_cpu_seconds_total counter\n"));
  assert_null(expo_check(b.data));
  kcm_buf_release(&b);
}

/* process_open_fds counts this process's descriptors, the scrape's own not. */
static void open_fds_follow_the_process(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 16);
  double before, after;
  int fd;
  assert_int_equal(kcm_metrics_process(&b), 0);
  before = value_of(b.data, "process_open_fds");
  fd = open("/dev/null", O_RDONLY);
  assert_true(fd >= 0);
  kcm_buf_reset(&b);
  assert_int_equal(kcm_metrics_process(&b), 0);
  after = value_of(b.data, "process_open_fds");
  close(fd);
  assert_true(after == before + 1);
  kcm_buf_release(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(families_and_samples),
      cmocka_unit_test(values_as_prometheus_reads_them),
      cmocka_unit_test(labels_and_help_are_escaped),
      cmocka_unit_test(histogram_buckets_and_rendering),
      cmocka_unit_test(writers_append_whole_lines),
      cmocka_unit_test(checker_refuses_invalid_pages),
      cmocka_unit_test(process_metrics),
      cmocka_unit_test(open_fds_follow_the_process),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
