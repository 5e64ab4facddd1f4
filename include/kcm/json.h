/*
 * json — a pull reader over a complete JSON text, for the hot paths.
 *
 * kcm reads every pod it caches from a list page or a watch event. Building
 * a json-c tree for one costs about twenty times what extracting the dozen
 * fields kcm keeps does (a hash table per object, an allocation per value),
 * so pods, list pages and watch events are read with this cursor instead:
 * the caller asks for the value it expects next and skips the rest. Nothing
 * is allocated per value; strings are unescaped into a scratch buffer the
 * cursor owns and reuses.
 *
 * The reader checks the JSON grammar of everything it passes, skipped
 * values included, and stops at the first error: j->err then holds a static
 * description and j->err_at its byte offset, and every later call fails.
 * It takes any depth of nesting (kube-apiserver stores 10,000 levels in a
 * managedFields entry), without recursion: skipping a value costs its
 * length in time and its depth in bytes.
 *
 *   kcm_json_start(&j, text, len);
 *   if (kcm_json_object(&j))
 *     while (kcm_json_member(&j))           // j.key, j.keylen: the member's name
 *       if (kcm_json_key_is(&j, "name")) kcm_json_string(&j, &s, &n);
 *       else kcm_json_skip(&j);
 *
 * A cursor is used from one thread; kcm_json_release() frees its scratch.
 */
#ifndef KCM_JSON_H
#define KCM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kcm/buf.h"

/* The open containers of a reader: a stack of '{' and '[' with no depth
 * limit but memory (a level costs a byte of input, so it never holds more
 * than the text has bytes). The first levels live inline; deeper ones in
 * `high`, grown as needed and kept for reuse. */
#define KCM_JSON_NEST_INLINE 64
struct kcm_json_nest {
  uint8_t low[KCM_JSON_NEST_INLINE];
  uint8_t *high; /* owned: levels from KCM_JSON_NEST_INLINE on */
  size_t cap;    /* of high */
  size_t depth;
};

/* Push c ('{' or '['): 0, or KCM_ENOMEM with nothing pushed. */
int kcm_json_nest_grow(struct kcm_json_nest *n, uint8_t c);
static inline int kcm_json_nest_push(struct kcm_json_nest *n, uint8_t c) {
  if (n->depth < KCM_JSON_NEST_INLINE) {
    n->low[n->depth++] = c;
    return 0;
  }
  return kcm_json_nest_grow(n, c);
}
/* The innermost open container ('{' or '['); 0 when none is open. */
static inline uint8_t kcm_json_nest_top(const struct kcm_json_nest *n) {
  size_t d = n->depth;
  if (!d)
    return 0;
  return d <= KCM_JSON_NEST_INLINE ? n->low[d - 1] : n->high[d - 1 - KCM_JSON_NEST_INLINE];
}
/* Free the deep levels' memory; the stack is empty. */
void kcm_json_nest_release(struct kcm_json_nest *n);

enum kcm_json_type {
  KCM_JSON_NONE, /* end of input or an error */
  KCM_JSON_OBJECT,
  KCM_JSON_ARRAY,
  KCM_JSON_STRING,
  KCM_JSON_NUMBER,
  KCM_JSON_BOOL,
  KCM_JSON_NULL,
};

struct kcm_json {
  const char *start, *p, *end; /* the text (borrowed) and the read position */
  const char *err;             /* first error, static; NULL while none */
  size_t err_at;               /* its byte offset in the text */
  const char *key;             /* the current member's name, keylen bytes (in the text, or
                                  in `keys` when it had escapes); not NUL-terminated */
  size_t keylen;
  struct kcm_buf keys, strs;   /* owned scratch for names and string values */
  struct kcm_json_nest nest;   /* open containers, any depth */
  bool first;                  /* no member or element read yet in the open container */
};

void kcm_json_init(struct kcm_json *j);
/* Point the cursor at text[0..len); keeps the scratch memory. */
void kcm_json_start(struct kcm_json *j, const char *text, size_t len);
void kcm_json_release(struct kcm_json *j);

/* The type of the next value (whitespace skipped), without reading it. */
enum kcm_json_type kcm_json_peek(struct kcm_json *j);

/* Enter an object: true if the next value is one (its '{' is read). */
bool kcm_json_object(struct kcm_json *j);
/* The next member of the innermost open object: true with j->key set and
 * the ':' read, the value next; false at its end ('}' read) or on error. */
bool kcm_json_member(struct kcm_json *j);
/* Whether the current member is called `name` (inline, so the length of a
 * literal name is known at compile time). */
static inline bool kcm_json_key_is(const struct kcm_json *j, const char *name) {
  size_t n = strlen(name);
  return j->keylen == n && memcmp(j->key, name, n) == 0;
}
/* Enter an array; kcm_json_element() is true while an element is next. */
bool kcm_json_array(struct kcm_json *j);
bool kcm_json_element(struct kcm_json *j);

/* Readers for the next value. Each returns false (reading nothing) when the
 * value has another type, so the caller can name the field in its error. */
/* *s is NUL-terminated and valid until the next string is read. */
bool kcm_json_string(struct kcm_json *j, const char **s, size_t *len);
bool kcm_json_bool(struct kcm_json *j, bool *out);
/* Reads null; false if the next value is not null. */
bool kcm_json_null(struct kcm_json *j);
/* An integer (no fraction or exponent). Returns 0, KCM_EINVAL when the
 * value is not an integer, KCM_ETOOBIG when it does not fit in int64. */
int kcm_json_int(struct kcm_json *j, int64_t *out);

/* Skip the next value, checking its grammar. False on error. */
bool kcm_json_skip(struct kcm_json *j);
/* Skip the next value and give its text. */
bool kcm_json_raw(struct kcm_json *j, const char **text, size_t *len);
/* True if only whitespace is left and no error happened. */
bool kcm_json_done(struct kcm_json *j);

/* Move into nested objects along `path` (NULL-terminated member names)
 * from the start of the text: true with the value at the path next. */
bool kcm_json_find(struct kcm_json *j, const char *const *path);

/* Where member `key` of the object at `parent` (a path as for
 * kcm_json_find; {NULL} for the top) is: text[*from, *to) holds it with one
 * adjacent comma, so the text without those bytes is the object without the
 * member. False when absent. */
bool kcm_json_member_span(struct kcm_json *j, const char *const *parent, const char *key,
                          size_t *from, size_t *to);

/* text[0..len), a JSON text, into out with every \u escape of a printable
 * character (not '"', '\\', one below U+0020 or DEL; a surrogate pair as
 * one) written as that character in UTF-8: the same value, as short as
 * JSON lets it be. kube-apiserver writes '<', '>', '&', U+2028 and U+2029
 * as \u escapes, so an object it stored at 1.4 MiB can be served as more
 * JSON than its 3 MiB limit on a request takes back; shortened, it fits
 * again. Only strings are rewritten; the grammar is not checked. 0,
 * KCM_ENOMEM or KCM_ETOOBIG (out's limit). */
int kcm_json_shorten_escapes(const char *text, size_t len, struct kcm_buf *out);

/* --- json-c trees --------------------------------------------------------------------- */

struct json_object;

/* A json-c tree of text[0..len), an object or an array, whatever its
 * depth up to KCM_JSON_TREE_MAX_DEPTH: json-c's tokener refuses what nests
 * deeper than it was made for (32 levels by default), so it is made for
 * the depth the text has. json-c frees and writes trees by recursion, a
 * call a level, so deeper text is refused rather than risk the stack:
 * kube-apiserver reads no JSON deeper than 10,000 levels. Caller frees with
 * json_object_put(); NULL for text that is not one JSON object or array
 * (json-c takes a bare number at the end of its input as unfinished), too
 * deep, or out of memory. For any text kcm did not write itself: a
 * server's answer, an object's parts. */
#define KCM_JSON_TREE_MAX_DEPTH 20000
struct json_object *kcm_json_tree(const char *text, size_t len);
/* The deepest nesting of arrays and objects in text[0..len) (strings
 * skipped; the grammar is not checked). */
size_t kcm_json_deepest(const char *text, size_t len);

#endif
