/* Unit tests for klog-style logging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>
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

/* --vmodule: the first matching pattern gives this file its level; a
 * change of the list or the verbosity reaches a call site already used. */
static void write_vmodule(void) {
  int i;
  for (i = 0; i < 4; i++) {
    static const char *const lists[] = {"other=5", "test_l*=3,test_log=1", "test_log=1", ""};
    assert_int_equal(kcm_log_set_vmodule(lists[i]), 0);
    kcm_v(3, "at three list=\"%s\"", lists[i]);
  }
  assert_int_equal(kcm_log_set_vmodule("bad"), -1);
  assert_int_equal(kcm_log_set_vmodule("x=1,=2"), -1);
}

static void vmodule_sets_a_files_level(void **state) {
  char *text = capture(write_vmodule);
  assert_null(strstr(text, "list=\"other=5\""));
  assert_non_null(strstr(text, "list=\"test_l*=3,test_log=1\""));
  assert_null(strstr(text, "list=\"test_log=1\""));
  assert_null(strstr(text, "list=\"\""));
  free(text);
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
                                    "\"FailedCreate ns/web\",\"err\":\"said \\\\\\\"no\\\\\\\"\\n\"}"));
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

/* A server's text as it might come back in a Status message: a line break, a
 * forged klog line, quotes, and a forged JSON field. */
#define FORGED_LINE "I1125 08:00:00.000000       1 forged.go:1] \"forged\" evil=\"1\""
#define HOSTILE "denied\n" FORGED_LINE

#define KEY_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"

/* Past the quoted string at p, or NULL when it does not end. */
static const char *skip_quoted(const char *p) {
  for (p++; *p && *p != '"'; p++)
    if (*p == '\\' && p[1])
      p++;
  return *p ? p + 1 : NULL;
}

/* The keys of one klog text line, or -1 when it is not one: the header,
 * then a message (quoted strings in it skipped) up to the first " key=",
 * then only key=value pairs, each value a quoted string or a bare word. */
static int klog_keys(const char *line, char keys[][32], int max) {
  regex_t re;
  regmatch_t m;
  const char *p;
  size_t k;
  int n = 0, found;
  assert_int_equal(regcomp(&re,
                           "^[IWEF][0-9]{4} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6} +[0-9]+ "
                           "[^ ]+:[0-9]+\\] ",
                           REG_EXTENDED),
                   0);
  found = regexec(&re, line, 1, &m, 0);
  regfree(&re);
  if (found != 0 || strchr(line, '\n'))
    return -1;
  for (p = line + m.rm_eo; *p;) { /* the message */
    if (*p == '"' && !(p = skip_quoted(p)))
      return -1;
    if (*p == ' ' && (k = strspn(p + 1, KEY_CHARS)) && p[1 + k] == '=')
      break;
    if (*p)
      p++;
  }
  while (*p) { /* the pairs */
    if (*p != ' ' || !(k = strspn(p + 1, KEY_CHARS)) || p[1 + k] != '=')
      return -1;
    if (n < max && k < 32) {
      memcpy(keys[n], p + 1, k);
      keys[n][k] = '\0';
    }
    n++;
    p += k + 2;
    if (*p == '"') {
      if (!(p = skip_quoted(p)))
        return -1;
    } else {
      p += strcspn(p, " ");
    }
  }
  return n;
}

static void write_forged_text(void) {
  kcm_error("watch error kind=\"%s\" code=%d message=\"%s\"", "Pod", 500, HOSTILE);
  kcm_info("serving %s address=\"%s\"", "x\n" FORGED_LINE, "127.0.0.1:1");
  kcm_info("serving %s address=\"%s\"", "x evil=\"1\"", "127.0.0.1:2");
  kcm_warn("%s can be read path=\"%s\"", "a=b", "/p");
  kcm_info("bare value v=%s n=%d", "two words", 3);
}

/* Data cannot break out of its value or its message: each call is one
 * line, and the keys are the ones the program wrote. */
static void text_values_cannot_forge_lines_or_keys(void **state) {
  char *text = capture(write_forged_text), *save = NULL, *line;
  static const char *want[][3] = {
      {"kind", "code", "message"}, {"address"}, {"address"}, {"path"}, {"v", "n"}};
  static const int nwant[] = {3, 1, 1, 1, 2};
  char keys[8][32];
  int i = 0, j;
  for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save), i++) {
    assert_true(i < 5);
    assert_int_equal(klog_keys(line, keys, 8), nwant[i]);
    for (j = 0; j < nwant[i]; j++)
      assert_string_equal(keys[j], want[i][j]);
  }
  assert_int_equal(i, 5);
  free(text);
}

static void write_escapes(void) {
  kcm_error("watch error kind=\"%s\" code=%d message=\"%s\"", "Pod", 500, HOSTILE);
  kcm_info("serving %s address=\"%s\"", "x evil=\"1\"", "a");
  /* \r, a terminal escape, a byte that is not UTF-8, U+2028, U+009B (CSI),
   * U+202E (right-to-left override), U+E0001 (a language tag), and a
   * printable é. */
  kcm_info("control value=\"%s\"",
           "a\rb\x1b[31mc\xff\xe2\x80\xa8\xc2\x9b\xe2\x80\xae\xf3\xa0\x80\x81\xc3\xa9");
  kcm_info("serving %s address=\"%s\"", "health probes", "b");
}

/* Values are quoted as Go's strconv.Quote does (as klog writes strings);
 * data in a message is written as it is when harmless, else quoted. */
static void text_escapes_as_klog_quotes(void **state) {
  char *text = capture(write_escapes);
  assert_non_null(strstr(text, "] watch error kind=\"Pod\" code=500 message=\"denied\\nI1125 "
                               "08:00:00.000000       1 forged.go:1] \\\"forged\\\" "
                               "evil=\\\"1\\\"\"\n"));
  assert_non_null(strstr(text, "] serving \"x evil=\\\"1\\\"\" address=\"a\"\n"));
  assert_non_null(
      strstr(text, "] control value=\"a\\rb\\x1b[31mc\\xff\\u2028\\u009b\\u202e\\U000e0001"
                   "\xc3\xa9\"\n"));
  assert_non_null(strstr(text, "] serving health probes address=\"b\"\n"));
  free(text);
}

/* The keys of a JSON line, parsed with json-c; NULL unless it is exactly one object. */
static json_object *json_line(const char *line) {
  struct json_tokener *tok = json_tokener_new();
  json_object *o = json_tokener_parse_ex(tok, line, (int)strlen(line));
  bool whole = o && json_tokener_get_error(tok) == json_tokener_success &&
               (size_t)json_tokener_get_parse_end(tok) == strlen(line) &&
               json_object_is_type(o, json_type_object);
  json_tokener_free(tok);
  if (!whole)
    json_object_put(o);
  return whole ? o : NULL;
}

static void assert_json_keys(json_object *o, const char *const *keys, size_t n) {
  size_t i;
  assert_int_equal(json_object_object_length(o), n);
  for (i = 0; i < n; i++)
    assert_true(json_object_object_get_ex(o, keys[i], NULL));
}

static void write_forged_json(void) {
  kcm_log_set_format(KCM_LOG_JSON);
  kcm_error("list failed kind=\"%s\" err=\"%s\"", "Pod", "x\",\"evil\":\"1");
  kcm_error("list failed kind=\"%s\" err=\"%s\"", "Pod", "x\" evil=\"1");
  kcm_info("serving %s address=\"%s\"", "x\n{\"evil\":1} y=\"2\"", "a");
  kcm_info("bare value w=%s n=%d", "12", 3);
  kcm_info("control value=\"%s\"",
           "a\rb\x1b[31mc\xff\xc2\x9b\xe2\x80\xa8\xe2\x80\xae\xf3\xa0\x80\x81\xc3\xa9");
  kcm_log_set_format(KCM_LOG_TEXT);
}

/* In JSON each call is one object whose keys come from the format alone;
 * data is a JSON string, escaped as component-base's (zap's) encoder does. */
static void json_values_cannot_forge_keys(void **state) {
  char *text = capture(write_forged_json), *lines[6], *save = NULL, *p;
  static const char *const err_keys[] = {"ts", "caller", "msg", "kind", "err"};
  static const char *const addr_keys[] = {"ts", "caller", "msg", "v", "address"};
  static const char *const bare_keys[] = {"ts", "caller", "msg", "v", "w", "n"};
  json_object *o[5], *v;
  int i = 0;
  for (p = strtok_r(text, "\n", &save); p && i < 6; p = strtok_r(NULL, "\n", &save))
    lines[i++] = p;
  assert_int_equal(i, 5);
  for (i = 0; i < 5; i++)
    assert_non_null(o[i] = json_line(lines[i]));
  assert_json_keys(o[0], err_keys, 5);
  assert_true(json_object_object_get_ex(o[0], "err", &v));
  assert_string_equal(json_object_get_string(v), "x\",\"evil\":\"1");
  assert_json_keys(o[1], err_keys, 5);
  assert_true(json_object_object_get_ex(o[1], "err", &v));
  assert_string_equal(json_object_get_string(v), "x\" evil=\"1");
  assert_json_keys(o[2], addr_keys, 5);
  assert_true(json_object_object_get_ex(o[2], "msg", &v));
  assert_string_equal(json_object_get_string(v), "serving x\n{\"evil\":1} y=\"2\"");
  assert_json_keys(o[3], bare_keys, 6);
  assert_non_null(strstr(lines[3], ",\"w\":\"12\",\"n\":3}")); /* a string stays one */
  assert_true(json_object_object_get_ex(o[4], "value", &v));
  assert_string_equal(
      json_object_get_string(v),
      "a\rb\x1b[31mc\xef\xbf\xbd\xc2\x9b\xe2\x80\xa8\xe2\x80\xae\xf3\xa0\x80\x81\xc3\xa9");
  assert_non_null(strstr(lines[4], "\"a\\rb\\u001b[31mc\\ufffd\\u009b\\u2028\\u202e"
                                   "\\udb40\\udc01\xc3\xa9\""));
  for (i = 0; i < 5; i++)
    json_object_put(o[i]);
  free(text);
}

static void write_conversions(void) {
  long long big = -1234567890123LL;
  const char *volatile none = NULL;
  kcm_info("conv value=\"%5d|%-4s|%.2s|%*d|%.*s|%%|%c|%lld|%zu|%hhu|%#x|%.1f|%+.3e|%lu|%s\"", 42,
           "ab", "xyz", -6, 7, 3, "abcdef", 'q', big, (size_t)9, (unsigned char)200, 255u, 2.25,
           12345.678, 77ul, none);
}

/* Conversions are those of printf, argument by argument. */
static void conversions_are_printf(void **state) {
  char *text = capture(write_conversions), want[256];
  snprintf(want, sizeof(want), "] conv value=\"%5d|%-4s|%.2s|%*d|%.*s|%%|%c|%lld|%zu|%hhu|%#x|"
                               "%.1f|%+.3e|%lu|(null)\"\n",
           42, "ab", "xyz", -6, 7, 3, "abcdef", 'q', -1234567890123LL, (size_t)9,
           (unsigned char)200, 255u, 2.25, 12345.678, 77ul);
  assert_non_null(strstr(text, want));
  free(text);
}

static void write_long_value(void) {
  char big[10001];
  memset(big, 'y', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  kcm_log_set_format(KCM_LOG_JSON);
  kcm_info("long value=\"%s|end\"", big);
  kcm_log_set_format(KCM_LOG_TEXT);
}

static void long_json_values_are_kept_whole(void **state) {
  char *text = capture(write_long_value), *save = NULL;
  json_object *o, *v;
  assert_non_null(o = json_line(strtok_r(text, "\n", &save)));
  assert_true(json_object_object_get_ex(o, "value", &v));
  assert_int_equal(json_object_get_string_len(v), 10004);
  json_object_put(o);
  free(text);
}

static char *plain(const char *s, size_t max) {
  struct kcm_buf b = KCM_BUF_INIT(4096);
  char *t;
  assert_int_equal(kcm_log_plain(&b, s, max), 0);
  assert_non_null(t = kcm_buf_take(&b));
  return t;
}

static void plain_text_reaches_a_terminal_as_one_line(void **state) {
  char *t;
  (void)state;
  /* an escape sequence, a C1 CSI, DEL, a line separator, a bidirectional
   * override, a byte that is not UTF-8, a newline: one space each */
  t = plain("a\x1b[2Jb\xc2\x9b" "31mc\x7f" "d\xe2\x80\xa8" "e\xe2\x80\xae" "f\xff" "g\nh", 300);
  assert_string_equal(t, "a [2Jb 31mc d e f g h");
  free(t);
  /* printable text past ASCII stays */
  t = plain("caf\xc3\xa9 \xe6\x97\xa5", 300);
  assert_string_equal(t, "caf\xc3\xa9 \xe6\x97\xa5");
  free(t);
  /* cut at a code point: "ab" and the 3-byte one at bytes 2..4 would pass 4 */
  t = plain("ab\xe6\x97\xa5" "cd", 4);
  assert_string_equal(t, "ab...");
  free(t);
  t = plain("ab\xe6\x97\xa5" "cd", 5);
  assert_string_equal(t, "ab\xe6\x97\xa5...");
  free(t);
  t = plain("abc", 3);
  assert_string_equal(t, "abc");
  free(t);
  t = plain(NULL, 3);
  assert_string_equal(t, "");
  free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(line_has_klog_header),
      cmocka_unit_test(vmodule_sets_a_files_level),
      cmocka_unit_test(json_lines),
      cmocka_unit_test(severities_and_verbosity),
      cmocka_unit_test(long_messages_are_kept_whole),
      cmocka_unit_test(text_values_cannot_forge_lines_or_keys),
      cmocka_unit_test(text_escapes_as_klog_quotes),
      cmocka_unit_test(json_values_cannot_forge_keys),
      cmocka_unit_test(conversions_are_printf),
      cmocka_unit_test(long_json_values_are_kept_whole),
      cmocka_unit_test(plain_text_reaches_a_terminal_as_one_line),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
