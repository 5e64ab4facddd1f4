/*
 * Fuzz label selectors: the input is JSON for a metav1.LabelSelector,
 * decoded as the API objects' spec.selector is; a member "labels" (which
 * a LabelSelector does not have, so its decoder skips it) is a label set,
 * decoded as metadata.labels is. The selector is matched against that set,
 * the set of its own matchLabels and a fixed one, and formatted to its
 * string form ("app=web,tier in (a,b)"; kcm has no parser for that form).
 * Decoding must give a selector or an error, never crash or leak, and each
 * match must agree with a plain reading of the JSON: every matchLabels
 * entry equal, every expression holding.
 */
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/api/internal.h"
#include "kcm/buf.h"
#include "kcm/intern.h"
#include "kcm/labels.h"
#include "../../src/labels/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_selector.c:%d: check failed: %s\n", line, what);
  abort();
}

/* The value of key in a set decoded from JSON: its pooled strings are
 * compared as C strings, as the selector's are. */
static const char *value_of(const struct kcm_labels *l, const char *key) {
  uint32_t i;
  for (i = 0; i < l->n; i++)
    if (!strcmp(l->items[i].key, key))
      return l->items[i].value;
  return NULL;
}

static bool listed(struct json_object *values, const char *v) {
  size_t i, n = values && json_object_is_type(values, json_type_array)
                    ? json_object_array_length(values)
                    : 0;
  for (i = 0; i < n; i++)
    if (!strcmp(json_object_get_string(json_object_array_get_idx(values, i)), v))
      return true;
  return false;
}

/* Whether the selector the decoder accepted in `doc` selects l, read
 * straight from the JSON. */
static bool plain_match(struct json_object *doc, const struct kcm_labels *l) {
  struct json_object *ml, *me;
  size_t i, n;
  if (!doc || json_object_is_type(doc, json_type_null))
    return false; /* a null selector selects nothing */
  if (json_object_object_get_ex(doc, "matchLabels", &ml) &&
      json_object_is_type(ml, json_type_object)) {
    json_object_object_foreach(ml, key, val) {
      const char *v = value_of(l, key);
      if (!v || strcmp(v, json_object_get_string(val)))
        return false;
    }
  }
  if (!json_object_object_get_ex(doc, "matchExpressions", &me) ||
      !json_object_is_type(me, json_type_array))
    return true;
  n = json_object_array_length(me);
  for (i = 0; i < n; i++) {
    struct json_object *e = json_object_array_get_idx(me, i), *key, *op, *values = NULL;
    const char *v, *ops;
    json_object_object_get_ex(e, "key", &key);
    json_object_object_get_ex(e, "operator", &op);
    json_object_object_get_ex(e, "values", &values);
    v = value_of(l, json_object_get_string(key));
    ops = json_object_get_string(op);
    if ((!strcmp(ops, "In") && (!v || !listed(values, v))) ||
        (!strcmp(ops, "NotIn") && v && listed(values, v)) || (!strcmp(ops, "Exists") && !v) ||
        (!strcmp(ops, "DoesNotExist") && v))
      return false;
  }
  return true;
}

static void check_match(struct json_object *doc, const struct kcm_selector *sel,
                        const struct kcm_labels *l) {
  CHECK(kcm_labels_matches(sel, l) == plain_match(doc, l));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct kcm_intern pool;
  static struct kcm_labels fixed;
  static size_t pooled; /* strings of the fixed set */
  static int ready;
  struct json_object *doc, *member;
  struct kcm_selector sel;
  struct kcm_labels labels;
  struct kcm_buf out = KCM_BUF_INIT(1u << 20);
  const char *why = NULL;
  char *text;

  if (!ready) {
    struct json_object *o = json_tokener_parse("{\"app\":\"web\",\"tier\":\"front\",\"env\":\"\"}");
    kcm_intern_init(&pool);
    CHECK(kcm_api_labels_decode(&fixed, &pool, o, &why) == 0);
    json_object_put(o);
    pooled = kcm_intern_count(&pool);
    ready = 1;
  }
  if (!(text = strndup((const char *)data, size)))
    return 0;
  doc = json_tokener_parse(text);
  free(text);

  if (kcm_api_selector_decode(&sel, doc, &why) == 0) {
    CHECK(kcm_labels_selector_empty(&sel) == (!sel.nothing && sel.n == 0));
    check_match(doc, &sel, &fixed);
    CHECK(kcm_labels_selector_format(&sel, &out) == 0);
    if (json_object_object_get_ex(doc, "matchLabels", &member) &&
        kcm_api_labels_decode(&labels, &pool, member, &why) == 0) {
      check_match(doc, &sel, &labels);
      kcm_labels_release(&labels, &pool);
    }
    if (json_object_object_get_ex(doc, "labels", &member) &&
        kcm_api_labels_decode(&labels, &pool, member, &why) == 0) {
      check_match(doc, &sel, &labels);
      kcm_labels_release(&labels, &pool);
    }
    kcm_labels_selector_release(&sel);
  } else {
    CHECK(why && *why);
  }
  kcm_buf_release(&out);
  json_object_put(doc);
  CHECK(kcm_intern_count(&pool) == pooled); /* every other string was given back */
  return 0;
}
