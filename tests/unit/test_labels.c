/* Unit tests for label sets and selectors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "budget.h"
#include "../../src/api/internal.h"
#include "kcm/error.h"
#include "kcm/labels.h"
#include "../../src/labels/internal.h"

static struct kcm_intern pool;

static int setup(void **state) {
  kcm_intern_init(&pool);
  return 0;
}
static int teardown(void **state) {
  assert_int_equal(kcm_intern_count(&pool), 0); /* every reference was dropped */
  kcm_intern_release(&pool);
  return 0;
}

static void labels_of(struct kcm_labels *l, const char *json) {
  const char *why = NULL;
  struct json_object *o = json_tokener_parse(json);
  assert_int_equal(kcm_api_labels_decode(l, &pool, o, &why), 0);
  json_object_put(o);
}

static void decode_sorts_and_finds(void **state) {
  struct kcm_labels l;
  labels_of(&l, "{\"tier\":\"fe\",\"app\":\"web\",\"pod-template-hash\":\"abc\"}");
  assert_int_equal(l.n, 3);
  assert_string_equal(l.items[0].key, "app");
  assert_string_equal(kcm_labels_get(&l, "tier"), "fe");
  assert_string_equal(kcm_labels_get(&l, "pod-template-hash"), "abc");
  assert_null(kcm_labels_get(&l, "missing"));
  kcm_labels_release(&l, &pool);
}

static void decode_rejects_non_strings(void **state) {
  struct kcm_labels l;
  const char *why = NULL;
  struct json_object *o = json_tokener_parse("{\"a\":\"x\",\"b\":5}");
  assert_int_equal(kcm_api_labels_decode(&l, &pool, o, &why), KCM_EINVAL);
  assert_non_null(why);
  json_object_put(o);
  o = json_tokener_parse("[1]");
  assert_int_equal(kcm_api_labels_decode(&l, &pool, o, &why), KCM_EINVAL);
  json_object_put(o);
  assert_int_equal(kcm_api_labels_decode(&l, &pool, NULL, &why), 0);
  assert_int_equal(l.n, 0);
}

struct match_case {
  const char *selector;
  const char *labels;
  bool want;
};

static void selectors_match(void **state) {
  static const struct match_case cases[] = {
      {"{\"matchLabels\":{\"app\":\"web\"}}", "{\"app\":\"web\",\"x\":\"y\"}", true},
      {"{\"matchLabels\":{\"app\":\"web\"}}", "{\"app\":\"db\"}", false},
      {"{\"matchLabels\":{\"app\":\"web\"}}", "{}", false},
      {"{}", "{}", true},
      {"{}", "{\"a\":\"b\"}", true},
      {"null", "{\"a\":\"b\"}", false},
      {"{\"matchExpressions\":[{\"key\":\"t\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]}]}",
       "{\"t\":\"b\"}", true},
      {"{\"matchExpressions\":[{\"key\":\"t\",\"operator\":\"In\",\"values\":[\"a\"]}]}",
       "{\"t\":\"c\"}", false},
      {"{\"matchExpressions\":[{\"key\":\"t\",\"operator\":\"NotIn\",\"values\":[\"a\"]}]}",
       "{}", true},
      {"{\"matchExpressions\":[{\"key\":\"t\",\"operator\":\"NotIn\",\"values\":[\"a\"]}]}",
       "{\"t\":\"a\"}", false},
      {"{\"matchExpressions\":[{\"key\":\"t\",\"operator\":\"Exists\"}]}", "{\"t\":\"\"}", true},
      {"{\"matchExpressions\":[{\"key\":\"t\",\"operator\":\"Exists\"}]}", "{}", false},
      {"{\"matchExpressions\":[{\"key\":\"t\",\"operator\":\"DoesNotExist\"}]}", "{}", true},
      {"{\"matchExpressions\":[{\"key\":\"t\",\"operator\":\"DoesNotExist\"}]}", "{\"t\":\"x\"}",
       false},
      {"{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":[{\"key\":\"env\","
       "\"operator\":\"In\",\"values\":[\"prod\"]}]}",
       "{\"app\":\"web\",\"env\":\"prod\"}", true},
      {"{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":[{\"key\":\"env\","
       "\"operator\":\"In\",\"values\":[\"prod\"]}]}",
       "{\"app\":\"web\",\"env\":\"dev\"}", false},
  };
  size_t i;
  for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    struct kcm_selector s;
    struct kcm_labels l;
    const char *why = NULL;
    struct json_object *o = json_tokener_parse(cases[i].selector);
    assert_int_equal(kcm_api_selector_decode(&s, o, &why), 0);
    labels_of(&l, cases[i].labels);
    if (kcm_labels_matches(&s, &l) != cases[i].want)
      fail_msg("case %zu: %s vs %s", i, cases[i].selector, cases[i].labels);
    kcm_labels_release(&l, &pool);
    kcm_labels_selector_release(&s);
    json_object_put(o);
  }
}

static void selector_strings(void **state) {
  struct kcm_selector s;
  struct kcm_buf b = KCM_BUF_INIT(1024);
  const char *why = NULL;
  struct json_object *o = json_tokener_parse(
      "{\"matchLabels\":{\"tier\":\"fe\",\"app\":\"web\"},\"matchExpressions\":["
      "{\"key\":\"env\",\"operator\":\"In\",\"values\":[\"prod\",\"dev\"]},"
      "{\"key\":\"gone\",\"operator\":\"DoesNotExist\"},{\"key\":\"x\",\"operator\":\"Exists\"},"
      "{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[\"b\"]}]}");
  assert_int_equal(kcm_api_selector_decode(&s, o, &why), 0);
  assert_int_equal(kcm_labels_selector_format(&s, &b), 0);
  assert_string_equal(b.data, "app=web,env in (dev,prod),!gone,tier=fe,x,zone notin (b)");
  assert_false(kcm_labels_selector_empty(&s));
  kcm_buf_release(&b);
  kcm_labels_selector_release(&s);
  json_object_put(o);
}

static void bad_selectors(void **state) {
  static const char *const bad[] = {
      "[]",
      "{\"matchLabels\":{\"a\":1}}",
      "{\"matchExpressions\":{}}",
      "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Like\"}]}",
      "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}",
      "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\",\"values\":[\"x\"]}]}",
      "{\"matchExpressions\":[{\"operator\":\"Exists\"}]}",
      "{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[1]}]}",
  };
  size_t i;
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct kcm_selector s;
    const char *why = NULL;
    struct json_object *o = json_tokener_parse(bad[i]);
    if (kcm_api_selector_decode(&s, o, &why) != KCM_EINVAL || !why)
      fail_msg("accepted: %s", bad[i]);
    json_object_put(o);
  }
}

/* Hostile sizes: the work of each step grows as n log n at most. */
enum { MANY = 50000 };
#define N_LOG_N (40u * MANY) /* comparisons: n log2 n is about 16 n */
#define FEW_REALLOCS 64u

/* 50,000 labels in reverse order, each given twice: sorted and the last
 * of each key kept with n log n comparisons. */
static void many_labels_adopt(void **state) {
  struct kcm_label *items = malloc(2 * MANY * sizeof(*items));
  struct kcm_labels l;
  char key[16], value[16];
  uint32_t i;
  assert_non_null(items);
  for (i = 0; i < 2 * MANY; i++) {
    snprintf(key, sizeof(key), "k%05u", MANY - 1 - i % MANY);
    snprintf(value, sizeof(value), "%s%u", i < MANY ? "old" : "new", i % MANY);
    items[i].key = kcm_intern_str(&pool, key);
    items[i].value = kcm_intern_str(&pool, value);
  }
  budget_start(N_LOG_N, FEW_REALLOCS);
  assert_int_equal(kcm_labels_adopt(&l, &pool, items, 2 * MANY), 0);
  budget_stop(NULL);
  assert_int_equal(l.n, MANY);
  for (i = 0; i < MANY; i++) {
    snprintf(key, sizeof(key), "k%05u", i);
    snprintf(value, sizeof(value), "new%u", MANY - 1 - i);
    assert_string_equal(l.items[i].key, key);
    assert_string_equal(l.items[i].value, value);
  }
  kcm_labels_release(&l, &pool);
}

/* A selector of 50,000 matchLabels and an expression of 50,000 values. */
static void many_selector_terms(void **state) {
  struct json_object *sel = json_object_new_object(), *ml = json_object_new_object();
  struct json_object *expr = json_object_new_object(), *values = json_object_new_array();
  struct json_object *exprs = json_object_new_array();
  struct kcm_selector s;
  struct kcm_labels l;
  const char *why = NULL;
  char key[16];
  uint32_t i;
  for (i = 0; i < MANY; i++) {
    snprintf(key, sizeof(key), "k%05u", MANY - 1 - i);
    json_object_object_add(ml, key, json_object_new_string("v"));
    json_object_array_add(values, json_object_new_string(key));
  }
  json_object_object_add(expr, "key", json_object_new_string("z"));
  json_object_object_add(expr, "operator", json_object_new_string("In"));
  json_object_object_add(expr, "values", values);
  json_object_array_add(exprs, expr);
  json_object_object_add(sel, "matchLabels", ml);
  json_object_object_add(sel, "matchExpressions", exprs);
  budget_start(N_LOG_N, FEW_REALLOCS);
  assert_int_equal(kcm_api_selector_decode(&s, sel, &why), 0);
  budget_stop(NULL);
  assert_int_equal(s.n, MANY + 1);
  assert_int_equal(s.reqs[MANY].nvalues, MANY);
  json_object_put(sel);
  sel = json_object_new_object();
  for (i = 0; i < MANY; i++) {
    snprintf(key, sizeof(key), "k%05u", i);
    json_object_object_add(sel, key, json_object_new_string("v"));
  }
  json_object_object_add(sel, "z", json_object_new_string("k00007"));
  assert_int_equal(kcm_api_labels_decode(&l, &pool, sel, &why), 0);
  budget_start(N_LOG_N, 0);
  assert_true(kcm_labels_matches(&s, &l));
  budget_stop(NULL);
  kcm_labels_release(&l, &pool);
  kcm_labels_selector_release(&s);
  json_object_put(sel);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(decode_sorts_and_finds),
      cmocka_unit_test(decode_rejects_non_strings),
      cmocka_unit_test(selectors_match),
      cmocka_unit_test(selector_strings),
      cmocka_unit_test(bad_selectors),
      cmocka_unit_test(many_labels_adopt),
      cmocka_unit_test(many_selector_terms),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
