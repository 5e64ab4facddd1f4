/* Unit tests for klog-style logging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <regex.h>

#include "kcm/log.h"

static char *capture(void (*fn)(void)) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  kcm_log_set_output(f);
  fn();
  kcm_log_set_output(NULL);
  fclose(f);
  return text;
}

static void write_info(void) { kcm_info("hello key=\"%s\" n=%d", "value", 7); }

static void line_has_klog_header(void **state) {
  char *text = capture(write_info);
  regex_t re;
  assert_int_equal(regcomp(&re,
                           "^I[0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} +[0-9]+ "
                           "test_log\\.c:[0-9]+\\] hello key=\"value\" n=7\n$",
                           REG_EXTENDED),
                   0);
  assert_int_equal(regexec(&re, text, 0, NULL, 0), 0);
  regfree(&re);
  free(text);
}

static void write_levels(void) {
  kcm_warn("w");
  kcm_error("e");
  kcm_v(2, "hidden");
  kcm_log_set_verbosity(2);
  kcm_v(2, "shown");
  kcm_log_set_verbosity(0);
}

static void write_json_lines(void) {
  kcm_log_set_format(KCM_LOG_JSON);
  kcm_info("caches synced pods=%d elapsed=\"%s\" ratio=0.5", 12, "101ms");
  kcm_error("could not post an event event=\"%s\" err=\"%s\"", "FailedCreate ns/web",
            "said \\\"no\\\"\n");
  kcm_info("plain message, no pairs; a = sign alone");
  kcm_info("odd value key=v-1 last=\"unterminated");
  kcm_log_set_verbosity(4);
  kcm_v(4, "verbose detail n=%d", 1);
  kcm_log_set_verbosity(0);
  kcm_log_set_format(KCM_LOG_TEXT);
}

static void json_lines(void **state) {
  char *text = capture(write_json_lines), *lines[5], *save = NULL, *p;
  regex_t re;
  int i = 0;
  for (p = strtok_r(text, "\n", &save); p && i < 5; p = strtok_r(NULL, "\n", &save))
    lines[i++] = p;
  assert_int_equal(i, 5);
  assert_int_equal(regcomp(&re, "^\\{\"ts\":[0-9]+\\.[0-9]{6},\"caller\":\"test_log\\.c:[0-9]+\",",
                           REG_EXTENDED),
                   0);
  for (i = 0; i < 4; i++)
    assert_int_equal(regexec(&re, lines[i], 0, NULL, 0), 0);
  regfree(&re);
  assert_non_null(strstr(lines[0], "\"msg\":\"caches synced\",\"v\":0,\"pods\":12,"
                                    "\"elapsed\":\"101ms\",\"ratio\":0.5}"));
  assert_non_null(strstr(lines[1], "\"msg\":\"could not post an event\",\"event\":"
                                    "\"FailedCreate ns/web\",\"err\":\"said \\\"no\\\"\\n\"}"));
  assert_null(strstr(lines[1], "\"v\":"));
  assert_non_null(strstr(lines[2], "\"msg\":\"plain message, no pairs; a = sign alone\",\"v\":0}"));
  assert_non_null(strstr(lines[3], "\"msg\":\"odd value\",\"v\":0,\"key\":\"v-1\","
                                    "\"last\":\"unterminated\"}"));
  assert_non_null(strstr(lines[4], "\"msg\":\"verbose detail\",\"v\":4,\"n\":1}"));
  free(text);
}

static void severities_and_verbosity(void **state) {
  char *text = capture(write_levels);
  assert_non_null(strstr(text, "\nE"));
  assert_int_equal(text[0], 'W');
  assert_null(strstr(text, "hidden"));
  assert_non_null(strstr(text, "] shown\n"));
  free(text);
}

static void write_long(void) {
  char big[5000];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  kcm_info("%s|end", big);
}

static void long_messages_are_kept_whole(void **state) {
  char *text = capture(write_long);
  assert_non_null(strstr(text, "xxxx|end\n"));
  assert_true(strlen(text) > 5000);
  free(text);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(line_has_klog_header),
      cmocka_unit_test(json_lines),
      cmocka_unit_test(severities_and_verbosity),
      cmocka_unit_test(long_messages_are_kept_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
