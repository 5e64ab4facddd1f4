/*
 * Fuzz the list response reader: the input's first byte picks the cap on
 * one item, the second how many of the next bytes give chunk sizes; the
 * rest is a list response cut into those chunks, as a network may cut it.
 * The reader must hand out the same items, metadata and verdict as when
 * the body comes whole; and where json-c (strict) reads the body as one
 * JSON object with an "items" array, the reader must accept it too and
 * hand out exactly its elements, each reading back equal to json-c's, and
 * its metadata.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "items.h"
#include "chunks.h"
#include "kcm/buf.h"
#include "kcm/error.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_items.c:%d: check failed: %s\n", line, what);
  abort();
}

/* Every part handed out, framed by its kind and length, then the verdict. */
struct record {
  struct kcm_buf log;
  size_t items, oversize, metadata;
};

static int on_part(enum kcm_items_part part, const char *text, size_t len, const char *why,
                   void *data) {
  struct record *r = data;
  if (!text) {
    CHECK(part == KCM_ITEMS_ITEM && why && *why);
    r->oversize++;
    return kcm_buf_append_str(&r->log, "X\n");
  }
  if (part == KCM_ITEMS_ITEM)
    r->items++;
  else
    r->metadata++;
  if (kcm_buf_appendf(&r->log, "%c%zu:", part == KCM_ITEMS_ITEM ? 'I' : 'M', len) ||
      kcm_buf_append(&r->log, text, len))
    return KCM_ENOMEM;
  return 0;
}

/* Read body in chunks of the given sizes (the last repeats; none: whole). */
static int read_list(const char *body, size_t len, size_t cap, const uint8_t *sizes,
                     size_t nsizes, struct record *r, const char **err) {
  struct kcm_items s;
  size_t at = 0, k = 0;
  int rc = 0;

  kcm_buf_init(&r->log, (size_t)1 << 26);
  r->items = r->oversize = r->metadata = 0;
  kcm_items_init(&s, cap, on_part, r);
  while (at < len && !rc) {
    size_t n = nsizes ? (size_t)sizes[k < nsizes ? k : nsizes - 1] + 1 : len;
    if (n > len - at)
      n = len - at;
    rc = kcm_items_feed(&s, body + at, n);
    at += n;
    k++;
  }
  if (!rc)
    rc = kcm_items_finish(&s);
  *err = s.err;
  kcm_items_release(&s);
  return rc;
}

/* json-c's strict reading of text as one JSON value (blanks around it
 * allowed) into *out (NULL for null); false if it is not one. A NUL is
 * passed after the text, so that a number at its end is complete. */
static bool parse_strict(const char *text, size_t len, struct json_object **out) {
  struct json_tokener *tok = json_tokener_new();
  char *copy = malloc(len + 1);
  bool ok = false;

  *out = NULL;
  if (tok && copy && len < INT32_MAX) {
    size_t used;
    memcpy(copy, text, len);
    copy[len] = '\0';
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    *out = json_tokener_parse_ex(tok, copy, (int)len + 1);
    ok = json_tokener_get_error(tok) == json_tokener_success;
    used = (size_t)json_tokener_get_parse_end(tok);
    while (used < len && copy[used] && strchr(" \t\r\n", copy[used]))
      used++;
    if (!ok || used < len) {
      json_object_put(*out);
      *out = NULL;
      ok = false;
    }
  }
  json_tokener_free(tok);
  free(copy);
  return ok;
}

/* Equal as json-c writes them (json_object_equal() holds NaN, which
 * json-c reads even when strict, unequal to itself). */
static bool same(struct json_object *a, struct json_object *b) {
  const char *x = json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN);
  const char *y = json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN);
  return x && y && !strcmp(x, y); /* "null" for NULL */
}

/* The record's parts agree with json-c's reading of the body. */
static void check_against_json_c(const struct record *r, struct json_object *list) {
  struct json_object *items, *meta;
  const char *p = r->log.data, *end = p ? p + r->log.len : p;
  size_t i = 0, m = 0, n;

  CHECK(json_object_object_get_ex(list, "items", &items));
  n = json_object_array_length(items);
  CHECK(r->items == n);
  /* A repeated "metadata" is handed out each time; json-c keeps the last. */
  CHECK((r->metadata > 0) == json_object_object_get_ex(list, "metadata", &meta));
  while (p < end) {
    char kind = *p++;
    char *after;
    size_t len = strtoul(p, &after, 10);
    struct json_object *got;
    p = after;
    CHECK(*p++ == ':');
    CHECK(parse_strict(p, len, &got));
    if (kind == 'I')
      CHECK(same(got, json_object_array_get_idx(items, i++)));
    else if (++m == r->metadata)
      CHECK(same(got, meta));
    json_object_put(got);
    p += len;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct record whole, cut;
  const char *err_whole, *err_cut;
  struct fuzz_chunks c;
  int rc_whole, rc_cut;
  struct json_object *list, *items;

  if (!fuzz_chunks(data, size, &c))
    return 0;

  rc_whole = read_list(c.body, c.len, c.cap, NULL, 0, &whole, &err_whole);
  rc_cut = read_list(c.body, c.len, c.cap, c.sizes, c.nsizes, &cut, &err_cut);
  CHECK(rc_whole == rc_cut);
  CHECK((err_whole == NULL) == (err_cut == NULL));
  CHECK(!err_whole || !strcmp(err_whole, err_cut));
  CHECK(whole.log.len == cut.log.len &&
        (!whole.log.len || !memcmp(whole.log.data, cut.log.data, whole.log.len)));
  CHECK(rc_whole == 0 || rc_whole == KCM_EINVAL);
  CHECK((rc_whole == 0) == (err_whole == NULL));

  if (parse_strict(c.body, c.len, &list) && json_object_is_type(list, json_type_object) &&
      json_object_object_get_ex(list, "items", &items) &&
      json_object_is_type(items, json_type_array)) {
    /* Valid: only a repeated "items" (json-c keeps the last, an array; the
     * reader stops at the second, or at a first that is no list) or
     * metadata over the c.cap may fail it, and only an item over the c.cap may
     * be left out. */
    if (rc_whole)
      CHECK(!strcmp(err_whole, "the list response has two items lists") ||
            !strcmp(err_whole, "the list response's items is not a list") ||
            !strcmp(err_whole, "the list's metadata is larger than the size limit"));
    else if (!whole.oversize)
      check_against_json_c(&whole, list);
  }
  json_object_put(list);
  kcm_buf_release(&whole.log);
  kcm_buf_release(&cut.log);
  return 0;
}
