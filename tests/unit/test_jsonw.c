/* Unit tests for the JSON writer. */
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

#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"

static void members_and_elements_are_separated(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(1024);
  struct kcm_jsonw w;
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_object(&w, "metadata");
  kcm_jsonw_key_string(&w, "name", "web");
  kcm_jsonw_key(&w, "resourceVersion");
  kcm_jsonw_uint_string(&w, UINT64_MAX);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_array(&w, "items");
  kcm_jsonw_int(&w, INT64_MIN);
  kcm_jsonw_bool(&w, true);
  kcm_jsonw_null(&w);
  kcm_jsonw_object(&w);
  kcm_jsonw_end(&w);
  kcm_jsonw_array(&w);
  kcm_jsonw_end(&w);
  kcm_jsonw_raw(&w, "{\"a\":[1]}", 9);
  kcm_jsonw_string(&w, NULL);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_bool(&w, "paused", false);
  kcm_jsonw_key_int(&w, "replicas", 3);
  kcm_jsonw_end(&w);
  assert_int_equal(kcm_jsonw_finish(&w), 0);
  assert_string_equal(b.data, "{\"metadata\":{\"name\":\"web\",\"resourceVersion\":"
                              "\"18446744073709551615\"},\"items\":[-9223372036854775808,true,"
                              "null,{},[],{\"a\":[1]},\"\"],\"paused\":false,\"replicas\":3}");
  kcm_buf_release(&b);
}

/* Every byte value, in a key and in a value, reads back as it was. */
static void every_byte_reads_back(void **state) {
  char s[256];
  struct kcm_buf b = KCM_BUF_INIT(4096);
  struct kcm_jsonw w;
  struct json_object *doc, *v;
  int i;
  for (i = 1; i < 256; i++)
    s[i - 1] = (char)i;
  s[255] = '\0';
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, s, s);
  kcm_jsonw_end(&w);
  assert_int_equal(kcm_jsonw_finish(&w), 0);
  /* Only '"', '\\' and the control bytes are escaped; '/' and the rest
   * go as they are (json-c takes bytes above 0x7f only as UTF-8, so the
   * text is checked here for them and parsed without them). */
  assert_non_null(strstr(b.data, "\\u0001\\u0002"));
  assert_non_null(strstr(b.data, "\\b\\t\\n\\u000b\\f\\r"));
  assert_non_null(strstr(b.data, "!\\\"#"));
  assert_non_null(strstr(b.data, "[\\\\]"));
  assert_non_null(strstr(b.data, "./0"));
  assert_non_null(strstr(b.data, "\x7f\x80\x81"));
  kcm_buf_reset(&b);
  s[127] = '\0';
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, s, s);
  kcm_jsonw_end(&w);
  assert_int_equal(kcm_jsonw_finish(&w), 0);
  doc = json_tokener_parse(b.data);
  assert_non_null(doc);
  assert_true(json_object_object_get_ex(doc, s, &v));
  assert_string_equal(json_object_get_string(v), s);
  json_object_put(doc);
  kcm_buf_release(&b);
}

static void stringn_takes_nul_bytes(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(64);
  struct kcm_jsonw w;
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_stringn(&w, "a\0b", 3);
  assert_int_equal(kcm_jsonw_finish(&w), 0);
  assert_string_equal(b.data, "\"a\\u0000b\"");
  kcm_buf_release(&b);
}

/* Each misuse is KCM_EINVAL, kept, and nothing after it is written. */
static void misuse_is_an_error(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(1024);
  struct kcm_jsonw w;
  int depth;

  kcm_jsonw_start(&w, &b); /* nothing written */
  assert_int_equal(kcm_jsonw_finish(&w), KCM_EINVAL);

  kcm_jsonw_start(&w, &b); /* left open */
  kcm_jsonw_object(&w);
  assert_int_equal(kcm_jsonw_finish(&w), KCM_EINVAL);

  kcm_buf_reset(&b);
  kcm_jsonw_start(&w, &b); /* a value without a key */
  kcm_jsonw_object(&w);
  kcm_jsonw_int(&w, 1);
  kcm_jsonw_end(&w);
  kcm_jsonw_key_int(&w, "later", 2);
  assert_int_equal(kcm_jsonw_finish(&w), KCM_EINVAL);
  assert_string_equal(b.data, "{");

  kcm_jsonw_start(&w, &b); /* a key in an array */
  kcm_jsonw_array(&w);
  kcm_jsonw_key(&w, "k");
  assert_int_equal(kcm_jsonw_finish(&w), KCM_EINVAL);

  kcm_jsonw_start(&w, &b); /* a key without its value */
  kcm_jsonw_object(&w);
  kcm_jsonw_key(&w, "k");
  kcm_jsonw_end(&w);
  assert_int_equal(kcm_jsonw_finish(&w), KCM_EINVAL);

  kcm_jsonw_start(&w, &b); /* closed twice */
  kcm_jsonw_array(&w);
  kcm_jsonw_end(&w);
  kcm_jsonw_end(&w);
  assert_int_equal(kcm_jsonw_finish(&w), KCM_EINVAL);

  kcm_jsonw_start(&w, &b); /* two values at the top */
  kcm_jsonw_int(&w, 1);
  kcm_jsonw_int(&w, 2);
  assert_int_equal(kcm_jsonw_finish(&w), KCM_EINVAL);

  kcm_jsonw_start(&w, &b); /* too deep */
  for (depth = 0; depth <= KCM_JSONW_DEPTH; depth++)
    kcm_jsonw_array(&w);
  assert_int_equal(kcm_jsonw_finish(&w), KCM_EINVAL);

  kcm_buf_reset(&b); /* as deep as allowed */
  kcm_jsonw_start(&w, &b);
  for (depth = 0; depth < KCM_JSONW_DEPTH; depth++)
    kcm_jsonw_array(&w);
  for (depth = 0; depth < KCM_JSONW_DEPTH; depth++)
    kcm_jsonw_end(&w);
  assert_int_equal(kcm_jsonw_finish(&w), 0);
  assert_int_equal(b.len, 2 * KCM_JSONW_DEPTH);
  kcm_buf_release(&b);
}

/* The buffer's limit is the writer's error, kept to the end. */
static void the_limit_is_kept(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(10);
  struct kcm_jsonw w;
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_object(&w);
  kcm_jsonw_key_string(&w, "name", "a name too long");
  kcm_jsonw_end(&w);
  assert_int_equal(kcm_jsonw_finish(&w), KCM_ETOOBIG);
  assert_true(b.len <= 10);
  kcm_buf_release(&b);
}

/* The copy of text with path set to value, as a string (static). */
static const char *copy_set(const char *text, const char *const *path, const char *value,
                            int *err) {
  static struct kcm_buf b = KCM_BUF_INIT(4096);
  struct kcm_jsonw w;
  kcm_buf_reset(&b);
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_copy_set(&w, text, strlen(text), path, value);
  *err = kcm_jsonw_finish(&w);
  return b.data ? b.data : "";
}

static void copies_with_a_member_set(void **state) {
  static const char *const hash[] = {"metadata", "labels", "pod-template-hash", NULL};
  static const char *const top[] = {"b", NULL};
  int err;
  /* replaced in place, the rest as it was */
  assert_string_equal(
      copy_set("{\"metadata\":{\"labels\":{\"app\":\"web\",\"pod-template-hash\":\"old\","
               "\"z\":\"1\"},\"name\":\"x\"},\"spec\":{\"a\":[1, 2]}}", hash, "abc", &err),
      "{\"metadata\":{\"labels\":{\"app\":\"web\",\"pod-template-hash\":\"abc\",\"z\":\"1\"},"
      "\"name\":\"x\"},\"spec\":{\"a\":[1, 2]}}");
  assert_int_equal(err, 0);
  /* made in sorted place, with the objects the path needs */
  assert_string_equal(copy_set("{\"metadata\":{\"labels\":{\"a\":\"1\",\"z\":\"2\"}}}", hash,
                               "h", &err),
                      "{\"metadata\":{\"labels\":{\"a\":\"1\",\"pod-template-hash\":\"h\","
                      "\"z\":\"2\"}}}");
  assert_string_equal(copy_set("{\"metadata\":{\"labels\":null,\"name\":\"n\"}}", hash, "h", &err),
                      "{\"metadata\":{\"labels\":{\"pod-template-hash\":\"h\"},\"name\":\"n\"}}");
  assert_string_equal(copy_set("{\"spec\":{}}", hash, "h", &err),
                      "{\"metadata\":{\"labels\":{\"pod-template-hash\":\"h\"}},\"spec\":{}}");
  assert_string_equal(copy_set("{}", top, "v\"", &err), "{\"b\":\"v\\\"\"}");
  assert_string_equal(copy_set("{\"a\":1}", top, "v", &err), "{\"a\":1,\"b\":\"v\"}");
  assert_int_equal(err, 0);
  /* removed; nothing made for a removal */
  assert_string_equal(copy_set("{\"metadata\":{\"labels\":{\"pod-template-hash\":\"h\"}}}", hash,
                               NULL, &err),
                      "{\"metadata\":{\"labels\":{}}}");
  assert_string_equal(copy_set("{\"a\":{\"b\":1}}", hash, NULL, &err), "{\"a\":{\"b\":1}}");
  assert_int_equal(err, 0);
  /* out of order or named twice: set once, where it is; a removal leaves
   * what is not an object on the path as it is */
  assert_string_equal(copy_set("{\"z\":1,\"b\":\"x\"}", top, "v", &err), "{\"z\":1,\"b\":\"v\"}");
  assert_string_equal(copy_set("{\"b\":\"x\",\"b\":\"y\",\"c\":2}", top, "v", &err),
                      "{\"b\":\"v\",\"c\":2}");
  assert_string_equal(copy_set("{\"spec\":{},\"metadata\":{\"labels\":{\"a\":\"1\"},\"name\":\"n\"}}",
                               hash, "h", &err),
                      "{\"spec\":{},\"metadata\":{\"labels\":{\"a\":\"1\",\"pod-template-hash\":"
                      "\"h\"},\"name\":\"n\"}}");
  assert_string_equal(copy_set("{\"metadata\":{\"labels\":null}}", hash, NULL, &err),
                      "{\"metadata\":{\"labels\":null}}");
  assert_string_equal(copy_set("{\"metadata\":{\"labels\":\"x\"}}", hash, NULL, &err),
                      "{\"metadata\":{\"labels\":\"x\"}}");
  assert_string_equal(copy_set("{\"b\":[1]}", top, NULL, &err), "{}");
  assert_int_equal(err, 0);
  /* keys with escapes are copied as the names they are */
  assert_string_equal(copy_set("{\"\\u0061\\n\":1}", top, "v", &err), "{\"a\\n\":1,\"b\":\"v\"}");
  /* not an object; another type on the path; broken JSON */
  copy_set("[1]", top, "v", &err);
  assert_int_equal(err, KCM_EINVAL);
  copy_set("{\"metadata\":{\"labels\":\"x\"}}", hash, "h", &err);
  assert_int_equal(err, KCM_EINVAL);
  copy_set("{\"a\":}", top, "v", &err);
  assert_int_equal(err, KCM_EINVAL);
  copy_set("{\"a\":1} x", top, "v", &err);
  assert_int_equal(err, KCM_EINVAL);
}

/* A member set to a JSON value: replacing an object whole, or made. */
static void copies_with_a_member_set_to_json(void **state) {
  static const char *const spec[] = {"spec", NULL};
  struct kcm_buf b = KCM_BUF_INIT(4096);
  struct kcm_jsonw w;
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_copy_set_json(&w, "{\"metadata\":{\"n\": 1},\"spec\":{\"old\":[1]},\"z\":2.50}", 49,
                          spec, "{\"holder\":\"a\"}");
  assert_int_equal(kcm_jsonw_finish(&w), 0);
  assert_string_equal(b.data, "{\"metadata\":{\"n\": 1},\"spec\":{\"holder\":\"a\"},\"z\":2.50}");
  kcm_buf_reset(&b);
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_copy_set_json(&w, "{\"a\":1}", 7, spec, "[true]");
  assert_int_equal(kcm_jsonw_finish(&w), 0);
  assert_string_equal(b.data, "{\"a\":1,\"spec\":[true]}");
  kcm_buf_release(&b);
}

/* A json-c tree in its own order or sorted, '/' and bytes over 0x7f as
 * they are, numbers as read, a NULL member as null; deeper than the
 * writer's own containers. */
static void trees_are_written_whole(void **state) {
  struct kcm_buf b = KCM_BUF_INIT(1 << 20);
  struct kcm_jsonw w;
  struct json_object *doc = json_tokener_parse(
      "{\"z\":\"a/b \\\"q\\\" \\\\ \\n\\u0001 \u00e9\",\"a\":[1.50,-2,18446744073709551615]}");
  char *text, deep[2 * (KCM_JSONW_DEPTH + 10) + 1];
  int i;
  assert_non_null(doc);
  json_object_object_add(doc, "m", NULL);
  text = kcm_jsonw_tree_text(doc);
  assert_string_equal(text, "{\"z\":\"a/b \\\"q\\\" \\\\ \\n\\u0001 \u00e9\","
                            "\"a\":[1.50,-2,18446744073709551615],\"m\":null}");
  free(text);
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_array(&w);
  kcm_jsonw_tree(&w, doc, true);
  kcm_jsonw_tree(&w, NULL, true);
  kcm_jsonw_end(&w);
  assert_int_equal(kcm_jsonw_finish(&w), 0);
  assert_string_equal(b.data, "[{\"a\":[1.50,-2,18446744073709551615],\"m\":null,"
                              "\"z\":\"a/b \\\"q\\\" \\\\ \\n\\u0001 \u00e9\"},null]");
  json_object_put(doc);
  for (i = 0; i < KCM_JSONW_DEPTH + 10; i++) {
    deep[i] = '[';
    deep[2 * (KCM_JSONW_DEPTH + 10) - 1 - i] = ']';
  }
  deep[2 * (KCM_JSONW_DEPTH + 10)] = '\0';
  doc = kcm_json_tree(deep, strlen(deep));
  assert_non_null(doc);
  text = kcm_jsonw_tree_text(doc);
  assert_string_equal(text, deep);
  free(text);
  json_object_put(doc);
  kcm_buf_release(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(members_and_elements_are_separated),
      cmocka_unit_test(every_byte_reads_back),
      cmocka_unit_test(stringn_takes_nul_bytes),
      cmocka_unit_test(misuse_is_an_error),
      cmocka_unit_test(the_limit_is_kept),
      cmocka_unit_test(copies_with_a_member_set),
      cmocka_unit_test(copies_with_a_member_set_to_json),
      cmocka_unit_test(trees_are_written_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
