/*
 * Fuzz the merge patch spliced into an object's text (a status write sent
 * as an update): the input is the object's text, a NUL, then the patch.
 * Where a strict parser reads the object as JSON, a splice that succeeds
 * must give text the strict parser reads too, equal to the patch merged
 * into the whole object as RFC 7386 says (a name given twice keeping its
 * last value, as Go does); a conflict must come from a resourceVersion
 * other than the object's; anything else is left to the whole-object path.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "../../src/writer/internal.h"
#include "kcm/buf.h"
#include "kcm/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_splice.c:%d: check failed: %s\n", line, what);
  abort();
}

/* text[0..len) as RFC 8259 JSON, or NULL. */
static struct json_object *strict(const char *text, size_t len) {
  struct json_tokener *tok = json_tokener_new();
  struct json_object *o;
  if (!tok || len > INT32_MAX - 1)
    return NULL;
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  o = json_tokener_parse_ex(tok, text, (int)len);
  if (o && json_tokener_get_error(tok) == json_tokener_success &&
      tok->char_offset < (int)len) { /* text after the value: whitespace only */
    size_t i;
    for (i = (size_t)tok->char_offset; i < len; i++)
      if (!strchr(" \t\r\n", text[i])) {
        json_object_put(o);
        o = NULL;
        break;
      }
  } else if (json_tokener_get_error(tok) != json_tokener_success) {
    json_object_put(o);
    o = NULL;
  }
  json_tokener_free(tok);
  return o;
}

/* RFC 7386 on copies: target stays as it was. */
static struct json_object *merged(struct json_object *target, struct json_object *patch) {
  struct json_object *out = NULL;
  if (!json_object_is_type(patch, json_type_object)) {
    json_object_deep_copy(patch, &out, NULL);
    return out;
  }
  if (json_object_is_type(target, json_type_object))
    json_object_deep_copy(target, &out, NULL);
  else
    out = json_object_new_object();
  json_object_object_foreach(patch, key, value) {
    struct json_object *old = NULL;
    if (!value) {
      json_object_object_del(out, key);
      continue;
    }
    json_object_object_get_ex(out, key, &old);
    json_object_object_add(out, key, merged(old, value));
  }
  return out;
}

/* Whether no number in o is NaN or infinite (json-c reads them even when
 * strict; JSON has neither, and NaN equals nothing). */
static bool all_finite(struct json_object *o) {
  size_t i;
  switch (json_object_get_type(o)) {
  case json_type_double:
    return isfinite(json_object_get_double(o));
  case json_type_array:
    for (i = 0; i < json_object_array_length(o); i++)
      if (!all_finite(json_object_array_get_idx(o, i)))
        return false;
    return true;
  case json_type_object: {
    json_object_object_foreach(o, key, value) {
      (void)key;
      if (!all_finite(value))
        return false;
    }
    return true;
  }
  default:
    return true;
  }
}

static const char *rv_of(struct json_object *o) {
  struct json_object *meta, *rv;
  if (!json_object_object_get_ex(o, "metadata", &meta) ||
      !json_object_object_get_ex(meta, "resourceVersion", &rv) ||
      !json_object_is_type(rv, json_type_string))
    return NULL;
  return json_object_get_string(rv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data, *nul = memchr(data, 0, size);
  struct json_object *patch, *doc, *want, *got;
  struct kcm_buf out = KCM_BUF_INIT(1u << 24);
  size_t len;
  int rc;

  if (!nul)
    return 0;
  len = (size_t)(nul - text);
  if (!(patch = strict(nul + 1, size - len - 1)))
    return 0;
  if (!all_finite(patch)) {
    json_object_put(patch);
    return 0;
  }
  rc = kcm_writer_splice_merge(text, len, patch, &out);
  doc = strict(text, len);
  if (doc && !all_finite(doc)) {
    json_object_put(doc);
    doc = NULL;
  }
  if (doc && rc == 0) {
    got = strict(out.data, out.len);
    if (!got)
      fprintf(stderr, "spliced: %.*s\n", (int)(out.len < 4000 ? out.len : 4000), out.data);
    CHECK(got);
    want = merged(doc, patch);
    if (!json_object_equal(want, got))
      fprintf(stderr, "want: %s\ngot:  %s\n", json_object_to_json_string(want),
              json_object_to_json_string(got));
    CHECK(json_object_equal(want, got));
    json_object_put(want);
    json_object_put(got);
  } else if (doc && rc == KCM_ECONFLICT) {
    const char *have = rv_of(doc), *asked = rv_of(patch);
    CHECK(asked && (!have || strcmp(have, asked)));
  } else {
    CHECK(rc == 0 || rc == KCM_WRITER_WHOLE || rc == KCM_ECONFLICT || rc == KCM_ENOMEM);
  }
  json_object_put(doc);
  json_object_put(patch);
  kcm_buf_release(&out);
  return 0;
}
