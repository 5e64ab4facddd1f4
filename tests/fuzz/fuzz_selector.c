/*
 * Fuzz label handling: the input is JSON for a metav1.LabelSelector, read
 * as a selector and as a label set; the selector is matched against the
 * set and a fixed one and formatted back to its string form. Decoding must
 * give a selector or an error, never crash or leak.
 */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/buf.h"
#include "kcm/intern.h"
#include "kcm/labels.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct kcm_intern pool;
  static int ready;
  struct json_object *doc, *labels_obj = NULL, *fixed_obj;
  struct kcm_selector sel;
  struct kcm_labels labels, fixed;
  struct kcm_buf out = KCM_BUF_INIT(1u << 20);
  const char *why = NULL;
  char *text;

  if (!ready) {
    kcm_intern_init(&pool);
    ready = 1;
  }
  if (!(text = strndup((const char *)data, size)))
    return 0;
  doc = json_tokener_parse(text);
  free(text);
  fixed_obj = json_tokener_parse("{\"app\":\"web\",\"tier\":\"front\",\"env\":\"\"}");
  if (kcm_labels_decode(&fixed, &pool, fixed_obj, &why) == 0) {
    if (kcm_labels_selector_decode(&sel, doc, &why) == 0) {
      (void)kcm_labels_matches(&sel, &fixed);
      (void)kcm_labels_selector_empty(&sel);
      kcm_labels_selector_format(&sel, &out);
      if (doc && json_object_is_type(doc, json_type_object) &&
          json_object_object_get_ex(doc, "matchLabels", &labels_obj) &&
          kcm_labels_decode(&labels, &pool, labels_obj, &why) == 0) {
        (void)kcm_labels_matches(&sel, &labels);
        (void)kcm_labels_equal(&labels, &fixed);
        kcm_labels_release(&labels, &pool);
      }
      kcm_labels_selector_release(&sel);
    }
    kcm_labels_release(&fixed, &pool);
  }
  kcm_buf_release(&out);
  json_object_put(fixed_obj);
  json_object_put(doc);
  return 0;
}
