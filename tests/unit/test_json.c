/*
 * Tests for the pull reader: the JSON grammar (what passes and what is
 * refused, with where), strings and their escapes, integers at the edges,
 * and walking objects, arrays and paths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/json.h"

static bool valid(const char *text) {
  struct kcm_json j;
  bool ok;
  kcm_json_init(&j);
  kcm_json_start(&j, text, strlen(text));
  ok = kcm_json_skip(&j) && kcm_json_done(&j);
  kcm_json_release(&j);
  return ok;
}

static void grammar(void **state) {
  static const char *const good[] = {
      "{}", "[]", "0", "-0", "12", "-3.25", "1e9", "2E-3", "0.5e+2", "true", "false", "null",
      "\"\"", "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u00e9\"", " { \"a\" : [ 1 , { } , [ ] ] } \n",
      "{\"a\":{\"b\":{\"c\":[null,true,false,\"x\"]}}}", "[[[[[[[[[[]]]]]]]]]]",
  };
  static const char *const bad[] = {
      "",      "{",       "}",         "[1,]",      "{\"a\":1,}", "{\"a\"}",     "{a:1}",
      "01",    "1.",      ".5",        "-",         "1e",         "+1",          "tru",
      "nul",   "\"abc",   "\"\\x\"",   "\"\\u12g4\"", "\"a\nb\"",  "[1 2]",       "{\"a\":1 \"b\":2}",
      "1 2",   "[}",      "{]",        "{\"a\":}",  "[,1]",      "\"\\",        "{\"a\" 1}",
  };
  size_t i;
  for (i = 0; i < sizeof(good) / sizeof(good[0]); i++)
    if (!valid(good[i]))
      fail_msg("refused valid JSON: %s", good[i]);
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    if (valid(bad[i]))
      fail_msg("accepted broken JSON: %s", bad[i]);
}

static void errors_say_what_and_where(void **state) {
  static const char text[] = "{\"a\":[1,2,x]}";
  struct kcm_json j;
  kcm_json_init(&j);
  kcm_json_start(&j, text, strlen(text));
  assert_false(kcm_json_skip(&j));
  assert_string_equal(j.err, "unexpected character");
  assert_int_equal(j.err_at, 10);
  /* Every later call fails too. */
  assert_false(kcm_json_object(&j));
  assert_int_equal(kcm_json_peek(&j), KCM_JSON_NONE);
  kcm_json_release(&j);
}

/* "{"a":{"a":...1...}}" nested n levels, then a member "b":2 at the top. */
static char *nested(size_t n, const char *inner) {
  size_t len = n * 5 + strlen(inner) + n + 16, i, at = 0;
  char *text = malloc(len);
  assert_non_null(text);
  for (i = 0; i < n; i++)
    at += (size_t)sprintf(text + at, "{\"a\":");
  at += (size_t)sprintf(text + at, "%s", inner);
  for (i = 0; i < n; i++)
    text[at++] = '}';
  text[at] = '\0';
  return text;
}

/* kube-apiserver stores managedFields 10,000 levels deep: the reader takes
 * any depth, skips it without recursion, and still checks the brackets. */
static void any_depth_is_read(void **state) {
  static const size_t depths[] = {63, 64, 65, 200, 10000, 100000};
  size_t i;
  for (i = 0; i < sizeof(depths) / sizeof(depths[0]); i++) {
    char *inner = nested(depths[i], "[1,{\"x\":[true]}]"), *text = malloc(strlen(inner) + 64);
    struct kcm_json j;
    const char *s;
    size_t n;
    assert_non_null(text);
    sprintf(text, "{\"deep\":%s,\"name\":\"after\"}", inner);
    assert_true(valid(inner));
    kcm_json_init(&j);
    kcm_json_start(&j, text, strlen(text));
    assert_true(kcm_json_object(&j));
    assert_true(kcm_json_member(&j));
    assert_true(kcm_json_skip(&j));
    assert_true(kcm_json_member(&j));
    assert_true(kcm_json_key_is(&j, "name"));
    assert_true(kcm_json_string(&j, &s, &n));
    assert_string_equal(s, "after");
    assert_false(kcm_json_member(&j));
    assert_true(kcm_json_done(&j));
    assert_int_equal(kcm_json_deepest(text, strlen(text)), depths[i] + 4);
    /* a bracket of the wrong kind, however deep, is refused */
    inner[strlen(inner) - depths[i] / 2] = ']';
    assert_false(valid(inner));
    kcm_json_release(&j);
    free(inner);
    free(text);
  }
}

/* json-c trees of text of any depth, and nothing but one value. */
static void trees_of_any_depth(void **state) {
  char *text = nested(10000, "7");
  struct json_object *doc = kcm_json_tree(text, strlen(text)), *v = doc;
  size_t levels = 0;
  assert_non_null(doc);
  while (json_object_is_type(v, json_type_object) && json_object_object_get_ex(v, "a", &v))
    levels++;
  assert_int_equal(levels, 10000);
  assert_int_equal(json_object_get_int(v), 7);
  json_object_put(doc);
  free(text);
  /* deeper than json-c's recursion is trusted with: refused */
  text = nested(KCM_JSON_TREE_MAX_DEPTH + 1, "7");
  assert_null(kcm_json_tree(text, strlen(text)));
  free(text);
  assert_null(kcm_json_tree("{} {}", 5));
  assert_null(kcm_json_tree("{\"a\":", 5));
  assert_non_null(doc = kcm_json_tree("{\"a\":\"[{\"} \n", 12));
  json_object_put(doc);
  /* brackets inside strings are not nesting */
  assert_int_equal(kcm_json_deepest("[\"[[[\\\"[\",{}]", 13), 2);
  assert_int_equal(kcm_json_deepest("[\"\\", 4), 1); /* an escape cut at the end */
}

static void strings_unescape(void **state) {
  static const char text[] = "[\"plain\",\"tab\\tq\\\"\",\"\\u00e9\\u20ac\\ud83d\\ude00\","
                             "\"\\ud800x\",\"\"]";
  struct kcm_json j;
  const char *s;
  size_t n;
  kcm_json_init(&j);
  kcm_json_start(&j, text, strlen(text));
  assert_true(kcm_json_array(&j));
  assert_true(kcm_json_element(&j));
  assert_true(kcm_json_string(&j, &s, &n));
  assert_string_equal(s, "plain");
  assert_true(kcm_json_element(&j));
  assert_true(kcm_json_string(&j, &s, &n));
  assert_string_equal(s, "tab\tq\"");
  assert_true(kcm_json_element(&j));
  assert_true(kcm_json_string(&j, &s, &n));
  assert_string_equal(s, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  assert_int_equal(n, 9);
  assert_true(kcm_json_element(&j));
  assert_true(kcm_json_string(&j, &s, &n));
  assert_string_equal(s, "\xef\xbf\xbdx"); /* a lone surrogate reads as U+FFFD */
  assert_true(kcm_json_element(&j));
  assert_true(kcm_json_string(&j, &s, &n));
  assert_string_equal(s, "");
  assert_int_equal(n, 0);
  assert_false(kcm_json_element(&j));
  assert_true(kcm_json_done(&j));
  kcm_json_release(&j);
}

/* Strings are scanned many bytes at a time: a special byte (quote,
 * backslash, control byte) is found wherever it stands, and bytes just
 * outside those classes (0x20, 0x7f, 0x80, 0xff) are plain. */
static void special_bytes_found_anywhere(void **state) {
  static const unsigned char plain[] = {0x20, 0x7f, 0x80, 0xff};
  char text[64], want[64];
  struct kcm_json j;
  const char *s;
  size_t len, at, i, n;
  kcm_json_init(&j);
  for (len = 1; len < 40; len++) {
    for (at = 0; at < len; at++) {
      /* an escape at `at` */
      memset(text, 'a', sizeof(text));
      text[0] = '"';
      memcpy(text + 1 + at, "\\n", 2);
      text[len + 2] = '"';
      memset(want, 'a', len);
      want[at] = '\n';
      kcm_json_start(&j, text, len + 3);
      assert_true(kcm_json_string(&j, &s, &n));
      assert_int_equal(n, len);
      assert_memory_equal(s, want, len);
      /* a control byte at `at` */
      memset(text, 'a', sizeof(text));
      text[0] = '"';
      text[1 + at] = 0x1f;
      text[len + 1] = '"';
      kcm_json_start(&j, text, len + 2);
      assert_false(kcm_json_string(&j, &s, &n));
      assert_string_equal(j.err, "control character in a string");
      assert_int_equal(j.err_at, 1 + at);
      /* plain bytes at `at` */
      for (i = 0; i < sizeof(plain); i++) {
        text[1 + at] = (char)plain[i];
        kcm_json_start(&j, text, len + 2);
        assert_true(kcm_json_string(&j, &s, &n));
        assert_int_equal(n, len);
      }
      /* the closing quote at `at`: the rest is not JSON */
      text[1 + at] = '"';
      kcm_json_start(&j, text, len + 2);
      assert_true(kcm_json_string(&j, &s, &n));
      assert_int_equal(n, at);
    }
  }
  kcm_json_release(&j);
}

static int64_t read_int(const char *text, int *rc) {
  struct kcm_json j;
  int64_t v = 42;
  kcm_json_init(&j);
  kcm_json_start(&j, text, strlen(text));
  *rc = kcm_json_int(&j, &v);
  kcm_json_release(&j);
  return v;
}

static void integers(void **state) {
  int rc;
  assert_int_equal(read_int("9223372036854775807", &rc), INT64_MAX);
  assert_int_equal(rc, 0);
  assert_true(read_int("-9223372036854775808", &rc) == INT64_MIN);
  assert_int_equal(rc, 0);
  read_int("9223372036854775808", &rc);
  assert_int_equal(rc, KCM_ETOOBIG);
  read_int("-9223372036854775809", &rc);
  assert_int_equal(rc, KCM_ETOOBIG);
  read_int("1.0", &rc);
  assert_int_equal(rc, KCM_EINVAL);
  read_int("1e3", &rc);
  assert_int_equal(rc, KCM_EINVAL);
  read_int("\"1\"", &rc);
  assert_int_equal(rc, KCM_EINVAL);
  assert_int_equal(read_int("-17", &rc), -17);
}

static void members_types_and_paths(void **state) {
  static const char text[] =
      "{\"kind\":\"Pod\",\"metadata\":{\"labels\":{\"a\":\"b\"},\"name\":\"web\"},"
      "\"ok\":true,\"gone\":null,\"n\":[1,2]}";
  static const char *const name[] = {"metadata", "name", NULL};
  static const char *const missing[] = {"metadata", "namespace", NULL};
  static const char *const through[] = {"ok", "x", NULL};
  struct kcm_json j;
  const char *s, *raw;
  size_t n;
  bool b;
  int members = 0;
  kcm_json_init(&j);
  kcm_json_start(&j, text, strlen(text));
  assert_true(kcm_json_object(&j));
  while (kcm_json_member(&j)) {
    members++;
    if (kcm_json_key_is(&j, "ok")) {
      assert_false(kcm_json_string(&j, &s, &n)); /* a type mismatch reads nothing */
      assert_null(j.err);
      assert_true(kcm_json_bool(&j, &b));
      assert_true(b);
    } else if (kcm_json_key_is(&j, "gone")) {
      assert_int_equal(kcm_json_peek(&j), KCM_JSON_NULL);
      assert_true(kcm_json_null(&j));
    } else if (kcm_json_key_is(&j, "metadata")) {
      assert_true(kcm_json_raw(&j, &raw, &n));
      assert_int_equal(n, strlen("{\"labels\":{\"a\":\"b\"},\"name\":\"web\"}"));
      assert_memory_equal(raw, "{\"labels\"", 9);
    } else {
      assert_true(kcm_json_skip(&j));
    }
  }
  assert_int_equal(members, 5);
  assert_true(kcm_json_done(&j));
  assert_true(kcm_json_find(&j, name));
  assert_true(kcm_json_string(&j, &s, &n));
  assert_string_equal(s, "web");
  assert_false(kcm_json_find(&j, missing));
  assert_false(kcm_json_find(&j, through));
  kcm_json_release(&j);
}

/* Taking a member's span out leaves a valid object, whatever the
 * whitespace around its comma. */
static void member_spans_take_one_comma(void **state) {
  static const char *const root[] = {NULL};
  static const struct {
    const char *text, *key, *left;
  } cases[] = {
      {"{\"a\":1,\"b\":2}", "a", "{\"b\":2}"},
      {"{\"a\":1,\"b\":2}", "b", "{\"a\":1}"},
      {"{\"a\":1 ,\"b\":2}", "a", "{\"b\":2}"},
      {"{ \"a\" : 1 , \"b\":2 , \"c\":3 }", "b", "{ \"a\" : 1 , \"c\":3 }"},
      {"{\"a\":1 , \"b\":2 }", "b", "{\"a\":1 }"},
      {"{ \"a\":1 }", "a", "{ }"},
  };
  struct kcm_json j;
  size_t i, from, to;
  kcm_json_init(&j);
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char left[64];
    size_t len = strlen(cases[i].text);
    kcm_json_start(&j, cases[i].text, len);
    assert_true(kcm_json_member_span(&j, root, cases[i].key, &from, &to));
    snprintf(left, sizeof(left), "%.*s%s", (int)from, cases[i].text, cases[i].text + to);
    if (strcmp(left, cases[i].left))
      fail_msg("%s without %s: %s", cases[i].text, cases[i].key, left);
  }
  kcm_json_release(&j);
}

/* Escapes of printable characters written as the characters: the same
 * values, fewer bytes; control characters, quotes, backslashes and lone
 * surrogates stay escaped, and text outside strings is untouched. */
static void escapes_are_shortened(void **state) {
  static const struct {
    const char *in, *out;
  } cases[] = {
      {"{\"a\":\"\\u003c\\u003e\\u0026\"}", "{\"a\":\"<>&\"}"},
      {"[\"\\u2028\\u2029\\u00e9\"]", "[\"\xe2\x80\xa8\xe2\x80\xa9\xc3\xa9\"]"},
      {"\"\\u0001\\u001f\\u007f\\u0022\\u005c\\n\\\"\\\\\"",
       "\"\\u0001\\u001f\\u007f\\u0022\\u005c\\n\\\"\\\\\""},
      {"\"\\ud83d\\ude00|\\ud800x|\\udc00|\\ud800\\u0041\"",
       "\"\xf0\x9f\x98\x80|\\ud800x|\\udc00|\\ud800A\""},
      {"{\"\\u003ck\":[1, true, \"\\\\u003c\"]}", "{\"<k\":[1, true, \"\\\\u003c\"]}"},
      {"\"cut \\u00", "\"cut \\u00"},
      {"", ""},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct kcm_buf out = KCM_BUF_INIT(1 << 16);
    assert_int_equal(kcm_json_shorten_escapes(cases[i].in, strlen(cases[i].in), &out), 0);
    assert_string_equal(out.data ? out.data : "", cases[i].out);
    kcm_buf_release(&out);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(grammar),
      cmocka_unit_test(errors_say_what_and_where),
      cmocka_unit_test(any_depth_is_read),
      cmocka_unit_test(trees_of_any_depth),
      cmocka_unit_test(escapes_are_shortened),
      cmocka_unit_test(strings_unescape),
      cmocka_unit_test(special_bytes_found_anywhere),
      cmocka_unit_test(integers),
      cmocka_unit_test(members_types_and_paths),
      cmocka_unit_test(member_spans_take_one_comma),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
