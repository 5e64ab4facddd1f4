/*
 * The JSON writer: separators by the state of the open containers,
 * strings through one escaper.
 */
#include "kcm/jsonw.h"

#include "kcm/error.h"
#include "kcm/json.h"

#include <inttypes.h>
#include <stdint.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

int kcm_jsonw_escape(struct kcm_buf *b, const char *s, size_t n) {
  size_t i, start = 0;
  int err = kcm_buf_append(b, "\"", 1);
  for (i = 0; !err && i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    const char *esc = NULL;
    char u[8];
    if (c >= 0x20 && c != '"' && c != '\\')
      continue;
    switch (c) {
    case '"':
      esc = "\\\"";
      break;
    case '\\':
      esc = "\\\\";
      break;
    case '\n':
      esc = "\\n";
      break;
    case '\r':
      esc = "\\r";
      break;
    case '\t':
      esc = "\\t";
      break;
    case '\b':
      esc = "\\b";
      break;
    case '\f':
      esc = "\\f";
      break;
    default:
      snprintf(u, sizeof(u), "\\u%04x", c);
      esc = u;
    }
    err = kcm_buf_append(b, s + start, i - start);
    if (!err)
      err = kcm_buf_append_str(b, esc);
    start = i + 1;
  }
  if (!err)
    err = kcm_buf_append(b, s + start, n - start);
  return err ? err : kcm_buf_append(b, "\"", 1);
}

void kcm_jsonw_start(struct kcm_jsonw *w, struct kcm_buf *out) {
  memset(w, 0, sizeof(*w));
  w->out = out;
}

static void fail(struct kcm_jsonw *w, int err) {
  if (!w->err)
    w->err = err;
}

static void put(struct kcm_jsonw *w, const char *p, size_t n) {
  if (!w->err)
    fail(w, kcm_buf_append(w->out, p, n));
}

static bool in_object(const struct kcm_jsonw *w) {
  return w->depth && !(w->arrays >> (w->depth - 1) & 1);
}

/* Before a value: the comma between elements, and a check that a value
 * may come here (after a key in an object; anywhere in an array; once at
 * the top). */
static bool before_value(struct kcm_jsonw *w) {
  if (w->err)
    return false;
  if (in_object(w)) {
    if (!w->keyed) {
      fail(w, KCM_EINVAL);
      return false;
    }
    w->keyed = false;
    return true;
  }
  if (!w->depth) {
    if (w->whole) /* a second value at the top */
      fail(w, KCM_EINVAL);
    w->whole = true;
    return !w->err;
  }
  uint64_t bit = UINT64_C(1) << (w->depth - 1);
  if (w->filled & bit)
    put(w, ",", 1);
  w->filled |= bit;
  return !w->err;
}

static void open_container(struct kcm_jsonw *w, bool array) {
  if (!before_value(w))
    return;
  if (w->depth == KCM_JSONW_DEPTH) {
    fail(w, KCM_EINVAL);
    return;
  }
  uint64_t bit = UINT64_C(1) << w->depth;
  w->arrays = array ? w->arrays | bit : w->arrays & ~bit;
  w->filled &= ~bit;
  w->depth++;
  put(w, array ? "[" : "{", 1);
}

void kcm_jsonw_object(struct kcm_jsonw *w) { open_container(w, false); }

void kcm_jsonw_array(struct kcm_jsonw *w) { open_container(w, true); }

void kcm_jsonw_end(struct kcm_jsonw *w) {
  if (w->err)
    return;
  if (!w->depth || w->keyed) {
    fail(w, KCM_EINVAL);
    return;
  }
  w->depth--;
  put(w, w->arrays >> w->depth & 1 ? "]" : "}", 1);
}

void kcm_jsonw_key(struct kcm_jsonw *w, const char *name) {
  kcm_jsonw_keyn(w, name, strlen(name));
}

void kcm_jsonw_keyn(struct kcm_jsonw *w, const char *name, size_t n) {
  uint64_t bit;
  if (w->err)
    return;
  if (!in_object(w) || w->keyed) {
    fail(w, KCM_EINVAL);
    return;
  }
  bit = UINT64_C(1) << (w->depth - 1);
  if (w->filled & bit)
    put(w, ",", 1);
  w->filled |= bit;
  if (!w->err)
    fail(w, kcm_jsonw_escape(w->out, name, n));
  put(w, ":", 1);
  w->keyed = true;
}

void kcm_jsonw_stringn(struct kcm_jsonw *w, const char *s, size_t n) {
  if (before_value(w))
    fail(w, kcm_jsonw_escape(w->out, s ? s : "", s ? n : 0));
}

void kcm_jsonw_string(struct kcm_jsonw *w, const char *s) {
  kcm_jsonw_stringn(w, s, s ? strlen(s) : 0);
}

void kcm_jsonw_int(struct kcm_jsonw *w, int64_t v) {
  char num[24];
  int n = snprintf(num, sizeof(num), "%" PRId64, v);
  if (before_value(w))
    put(w, num, (size_t)n);
}

void kcm_jsonw_uint_string(struct kcm_jsonw *w, uint64_t v) {
  char num[24];
  int n = snprintf(num, sizeof(num), "\"%" PRIu64 "\"", v);
  if (before_value(w))
    put(w, num, (size_t)n);
}

void kcm_jsonw_bool(struct kcm_jsonw *w, bool v) {
  if (before_value(w))
    put(w, v ? "true" : "false", v ? 4 : 5);
}

void kcm_jsonw_null(struct kcm_jsonw *w) {
  if (before_value(w))
    put(w, "null", 4);
}

void kcm_jsonw_raw(struct kcm_jsonw *w, const char *text, size_t n) {
  if (before_value(w))
    put(w, text, n);
}

void kcm_jsonw_key_object(struct kcm_jsonw *w, const char *name) {
  kcm_jsonw_key(w, name);
  kcm_jsonw_object(w);
}

void kcm_jsonw_key_array(struct kcm_jsonw *w, const char *name) {
  kcm_jsonw_key(w, name);
  kcm_jsonw_array(w);
}

void kcm_jsonw_key_string(struct kcm_jsonw *w, const char *name, const char *s) {
  kcm_jsonw_key(w, name);
  kcm_jsonw_string(w, s);
}

void kcm_jsonw_key_int(struct kcm_jsonw *w, const char *name, int64_t v) {
  kcm_jsonw_key(w, name);
  kcm_jsonw_int(w, v);
}

void kcm_jsonw_key_bool(struct kcm_jsonw *w, const char *name, bool v) {
  kcm_jsonw_key(w, name);
  kcm_jsonw_bool(w, v);
}

int kcm_jsonw_finish(struct kcm_jsonw *w) {
  if (!w->err && (w->depth || w->keyed || !w->whole))
    w->err = KCM_EINVAL;
  return w->err;
}

/* --- copies with one member set ------------------------------------------------------ */

/* -1, 0 or 1 as the member name key[0..n) sorts before, as or after name. */
static int name_cmp(const char *key, size_t n, const char *name) {
  size_t m = strlen(name);
  int c = memcmp(key, name, n < m ? n : m);
  return c ? c : (n > m) - (n < m);
}

/* Member path[0] (and the objects holding the rest of the path) with its
 * value, a string or (raw) a JSON text, as made where the copy had none. */
static void write_made(struct kcm_jsonw *w, const char *const *path, const char *value,
                       bool raw) {
  size_t d;
  if (!value)
    return;
  for (d = 0; path[d + 1]; d++)
    kcm_jsonw_key_object(w, path[d]);
  kcm_jsonw_key(w, path[d]);
  if (raw)
    kcm_jsonw_raw(w, value, strlen(value));
  else
    kcm_jsonw_string(w, value);
  while (d--)
    kcm_jsonw_end(w);
}

/* Whether the object text[0..len) has a member called name. */
static bool has_member(struct kcm_json *j, const char *text, size_t len, const char *name) {
  kcm_json_start(j, text, len);
  if (!kcm_json_object(j))
    return false;
  while (kcm_json_member(j))
    if (!name_cmp(j->key, j->keylen, name) || !kcm_json_skip(j))
      return !j->err;
  return false;
}

/* Copy the object text[0..len) with path set: the member on the path
 * where it is (its first, when named twice; the others dropped), or, made,
 * before the first member whose name sorts after it. */
static void copy_set(struct kcm_jsonw *w, const char *text, size_t len, const char *const *path,
                     const char *value, bool as_json) {
  struct kcm_json j;
  bool exists, done = false;
  const char *raw;
  size_t rawlen;

  kcm_json_init(&j);
  exists = has_member(&j, text, len, path[0]);
  kcm_json_start(&j, text, len);
  if (!kcm_json_object(&j))
    fail(w, KCM_EINVAL);
  kcm_jsonw_object(w);
  while (!w->err && kcm_json_member(&j)) {
    int cmp = name_cmp(j.key, j.keylen, path[0]);
    if (!exists && !done && cmp > 0) {
      write_made(w, path, value, as_json);
      done = true;
    }
    if (cmp) {
      kcm_jsonw_keyn(w, j.key, j.keylen);
      if (kcm_json_raw(&j, &raw, &rawlen))
        kcm_jsonw_raw(w, raw, rawlen);
    } else if (done) { /* named again: the first one counts */
      kcm_json_skip(&j);
    } else if (path[1] && kcm_json_peek(&j) == KCM_JSON_OBJECT) {
      kcm_jsonw_keyn(w, j.key, j.keylen);
      if (kcm_json_raw(&j, &raw, &rawlen))
        copy_set(w, raw, rawlen, path + 1, value, as_json);
    } else if (path[1] && !value) { /* nothing beneath it to remove: as it is */
      kcm_jsonw_keyn(w, j.key, j.keylen);
      if (kcm_json_raw(&j, &raw, &rawlen))
        kcm_jsonw_raw(w, raw, rawlen);
    } else if (path[1] && kcm_json_peek(&j) != KCM_JSON_NULL) {
      fail(w, KCM_EINVAL); /* not an object: nothing to set a member of */
    } else {
      kcm_json_skip(&j);
      write_made(w, path, value, as_json);
    }
    done = done || !cmp;
  }
  if (!w->err && !done)
    write_made(w, path, value, as_json);
  if (!w->err && (j.err || !kcm_json_done(&j)))
    fail(w, KCM_EINVAL);
  kcm_jsonw_end(w);
  kcm_json_release(&j);
}

void kcm_jsonw_copy_set(struct kcm_jsonw *w, const char *text, size_t len,
                        const char *const *path, const char *value) {
  if (!w->err)
    copy_set(w, text, len, path, value, false);
}

void kcm_jsonw_copy_set_json(struct kcm_jsonw *w, const char *text, size_t len,
                             const char *const *path, const char *json) {
  if (!w->err)
    copy_set(w, text, len, path, json, true);
}

/* --- json-c trees ------------------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* v's text appended to b, members in name order when sorted. */
static int tree(struct kcm_buf *b, struct json_object *v, bool sorted) {
  int err = 0;
  switch (json_object_get_type(v)) {
  case json_type_null:
    return kcm_buf_append(b, "null", 4);
  case json_type_boolean:
    return kcm_buf_append_str(b, json_object_get_boolean(v) ? "true" : "false");
  case json_type_int:
  case json_type_double:
    /* json-c writes a parsed number as it read it */
    return kcm_buf_append_str(b, json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
  case json_type_string:
    return kcm_jsonw_escape(b, json_object_get_string(v), (size_t)json_object_get_string_len(v));
  case json_type_array: {
    size_t i, n = json_object_array_length(v);
    err = kcm_buf_append(b, "[", 1);
    for (i = 0; !err && i < n; i++) {
      if (i)
        err = kcm_buf_append(b, ",", 1);
      if (!err)
        err = tree(b, json_object_array_get_idx(v, i), sorted);
    }
    return err ? err : kcm_buf_append(b, "]", 1);
  }
  case json_type_object: {
    size_t n = (size_t)json_object_object_length(v), i = 0;
    const char **names = n ? malloc(n * sizeof(*names)) : NULL;
    struct json_object_iterator it = json_object_iter_begin(v), end = json_object_iter_end(v);
    if (n && !names)
      return KCM_ENOMEM;
    for (; !json_object_iter_equal(&it, &end); json_object_iter_next(&it))
      names[i++] = json_object_iter_peek_name(&it);
    if (n && sorted)
      qsort(names, n, sizeof(*names), cmp_name);
    err = kcm_buf_append(b, "{", 1);
    for (i = 0; !err && i < n; i++) {
      struct json_object *child = NULL;
      json_object_object_get_ex(v, names[i], &child);
      if (i)
        err = kcm_buf_append(b, ",", 1);
      if (!err)
        err = kcm_jsonw_escape(b, names[i], strlen(names[i]));
      if (!err)
        err = kcm_buf_append(b, ":", 1);
      if (!err)
        err = tree(b, child, sorted);
    }
    free(names);
    return err ? err : kcm_buf_append(b, "}", 1);
  }
  }
  return KCM_EINVAL;
}

void kcm_jsonw_tree(struct kcm_jsonw *w, struct json_object *v, bool sorted) {
  if (before_value(w))
    fail(w, tree(w->out, v, sorted));
}

char *kcm_jsonw_tree_text(struct json_object *v) {
  struct kcm_buf b = KCM_BUF_INIT(SIZE_MAX);
  struct kcm_jsonw w;
  char *text = NULL;
  kcm_jsonw_start(&w, &b);
  kcm_jsonw_tree(&w, v, false);
  if (!kcm_jsonw_finish(&w))
    text = kcm_buf_take(&b);
  kcm_buf_release(&b);
  return text;
}
