/*
 * api/selector.c — label sets and label selectors read from json-c trees
 * (metadata.labels, spec.selector), into the labels module's structs.
 */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"
#include "kcm/labels.h"

static int cmp_label(const void *a, const void *b) {
  return strcmp(((const struct kcm_label *)a)->key, ((const struct kcm_label *)b)->key);
}

int kcm_api_labels_decode(struct kcm_labels *out, struct kcm_intern *pool,
                          struct json_object *obj, const char **why) {
  struct json_object_iterator it, end;
  size_t n, i = 0;

  out->items = NULL;
  out->n = 0;
  if (!obj || json_object_is_type(obj, json_type_null))
    return 0;
  if (!json_object_is_type(obj, json_type_object)) {
    *why = "must be an object of strings";
    return KCM_EINVAL;
  }
  n = (size_t)json_object_object_length(obj);
  if (!n)
    return 0;
  if (n > UINT32_MAX) {
    *why = "too many entries";
    return KCM_EINVAL;
  }
  out->items = calloc(n, sizeof(*out->items));
  if (!out->items)
    return KCM_ENOMEM;
  it = json_object_iter_begin(obj);
  end = json_object_iter_end(obj);
  for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it), i++) {
    struct json_object *v = json_object_iter_peek_value(&it);
    const char *k = json_object_iter_peek_name(&it);
    if (!json_object_is_type(v, json_type_string)) {
      out->n = (uint32_t)i;
      kcm_labels_release(out, pool);
      *why = "must be an object of strings";
      return KCM_EINVAL;
    }
    out->items[i].key = kcm_intern_str(pool, k);
    out->items[i].value =
        kcm_intern_get(pool, json_object_get_string(v), (size_t)json_object_get_string_len(v));
    if (!out->items[i].key || !out->items[i].value) {
      kcm_intern_put(pool, out->items[i].key);
      kcm_intern_put(pool, out->items[i].value);
      out->n = (uint32_t)i;
      kcm_labels_release(out, pool);
      return KCM_ENOMEM;
    }
  }
  out->n = (uint32_t)n;
  qsort(out->items, n, sizeof(*out->items), cmp_label);
  return 0;
}

static int decode_expression(struct kcm_selector *s, struct json_object *e, const char **why) {
  struct json_object *key, *op, *values;
  const char *ops;
  enum kcm_labels_op kind;
  size_t i, n = 0;
  int err;

  if (!json_object_is_type(e, json_type_object) ||
      !json_object_object_get_ex(e, "key", &key) || !json_object_is_type(key, json_type_string) ||
      !json_object_object_get_ex(e, "operator", &op) || !json_object_is_type(op, json_type_string)) {
    *why = "matchExpressions entries need a string key and operator";
    return KCM_EINVAL;
  }
  ops = json_object_get_string(op);
  if (!strcmp(ops, "In"))
    kind = KCM_LABELS_IN;
  else if (!strcmp(ops, "NotIn"))
    kind = KCM_LABELS_NOT_IN;
  else if (!strcmp(ops, "Exists"))
    kind = KCM_LABELS_EXISTS;
  else if (!strcmp(ops, "DoesNotExist"))
    kind = KCM_LABELS_DOES_NOT_EXIST;
  else {
    *why = "unknown matchExpressions operator";
    return KCM_EINVAL;
  }
  if (json_object_object_get_ex(e, "values", &values) && values &&
      !json_object_is_type(values, json_type_null)) {
    if (!json_object_is_type(values, json_type_array)) {
      *why = "matchExpressions values must be a list";
      return KCM_EINVAL;
    }
    n = json_object_array_length(values);
  }
  if ((kind == KCM_LABELS_IN || kind == KCM_LABELS_NOT_IN) && n == 0) {
    *why = "In and NotIn need values";
    return KCM_EINVAL;
  }
  if ((kind == KCM_LABELS_EXISTS || kind == KCM_LABELS_DOES_NOT_EXIST) && n > 0) {
    *why = "Exists and DoesNotExist take no values";
    return KCM_EINVAL;
  }
  if ((err = kcm_labels_selector_add(s, json_object_get_string(key), kind, n)))
    return err;
  for (i = 0; i < n; i++) {
    struct json_object *v = json_object_array_get_idx(values, i);
    if (!json_object_is_type(v, json_type_string)) {
      *why = "matchExpressions values must be strings";
      return KCM_EINVAL;
    }
    if ((err = kcm_labels_selector_add_value(s, json_object_get_string(v))))
      return err;
  }
  return 0;
}

int kcm_api_selector_decode(struct kcm_selector *out, struct json_object *obj, const char **why) {
  struct json_object *ml, *me;
  int err = 0;

  memset(out, 0, sizeof(*out));
  if (!obj || json_object_is_type(obj, json_type_null)) {
    out->nothing = true;
    return 0;
  }
  if (!json_object_is_type(obj, json_type_object)) {
    *why = "must be a label selector object";
    return KCM_EINVAL;
  }
  if (json_object_object_get_ex(obj, "matchLabels", &ml) && ml &&
      !json_object_is_type(ml, json_type_null)) {
    struct json_object_iterator it, end;
    if (!json_object_is_type(ml, json_type_object)) {
      *why = "matchLabels must be an object of strings";
      return KCM_EINVAL;
    }
    it = json_object_iter_begin(ml);
    end = json_object_iter_end(ml);
    for (; !err && !json_object_iter_equal(&it, &end); json_object_iter_next(&it)) {
      struct json_object *v = json_object_iter_peek_value(&it);
      if (!json_object_is_type(v, json_type_string)) {
        *why = "matchLabels must be an object of strings";
        err = KCM_EINVAL;
        break;
      }
      err = kcm_labels_selector_add(out, json_object_iter_peek_name(&it), KCM_LABELS_IN, 1);
      if (!err)
        err = kcm_labels_selector_add_value(out, json_object_get_string(v));
    }
  }
  if (!err && json_object_object_get_ex(obj, "matchExpressions", &me) && me &&
      !json_object_is_type(me, json_type_null)) {
    size_t i, n;
    if (!json_object_is_type(me, json_type_array)) {
      *why = "matchExpressions must be a list";
      err = KCM_EINVAL;
    } else {
      n = json_object_array_length(me);
      for (i = 0; !err && i < n; i++)
        err = decode_expression(out, json_object_array_get_idx(me, i), why);
    }
  }
  if (err) {
    kcm_labels_selector_release(out);
    return err;
  }
  kcm_labels_selector_seal(out);
  return 0;
}
