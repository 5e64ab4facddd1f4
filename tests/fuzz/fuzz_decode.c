/*
 * Fuzz the object decoders: the first byte picks the kind (pod, ReplicaSet,
 * Deployment), the rest is the object's JSON as an API server might send
 * it. Each input is read in place (twice, the second time with the template
 * memo warm, as status-only watch events are read) and through a json-c
 * tree; whatever the input, decoding must return an object or an error,
 * never crash, leak or read out of bounds.
 */
#include <json-c/json.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/api.h"
#include "kcm/intern.h"
#include "kcm/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct kcm_intern pool;
  static struct kcm_json reader;
  static struct kcm_api_memo memo;
  static int ready;
  enum kcm_kind kind;
  struct kcm_api_error err;
  struct kcm_object *o = NULL;
  struct json_object *tree;
  char *copy;
  const char *text = (const char *)data + 1;
  size_t len = size ? size - 1 : 0;
  int i;

  if (!ready) {
    kcm_intern_init(&pool);
    kcm_json_init(&reader);
    ready = 1;
  }
  if (!size)
    return 0;
  kind = (enum kcm_kind)(data[0] % KCM_KIND_COUNT);
  for (i = 0; i < 2; i++) {
    if (kcm_api_decode_text(kind, text, len, &reader, &memo, &pool, &o, &err) == 0) {
      (void)kcm_api_size(o);
      kcm_api_unref(o, &pool);
    }
  }
  if (!(copy = strndup(text, len)))
    return 0;
  tree = json_tokener_parse(copy);
  free(copy);
  if (tree) {
    if (kcm_api_decode(kind, tree, &pool, &o, &err) == 0)
      kcm_api_unref(o, &pool);
    json_object_put(tree);
  }
  return 0;
}
