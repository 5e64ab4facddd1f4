/*
 * jsonw — the JSON writer: every JSON text kcm sends or shows (request
 * bodies and patches, Events, the /debug/shadow report) is written by
 * one, and every JSON string kcm writes is escaped by kcm_jsonw_escape().
 * The logger keeps its own encoder (a log line allocates nothing).
 *
 * A writer appends to a buffer it borrows, in the order of the calls,
 * compact and with '/' unescaped. Commas and the ':' after a key are its
 * business; the caller says what comes:
 *
 *   kcm_jsonw_start(&w, &out);
 *   kcm_jsonw_object(&w);
 *   kcm_jsonw_key_object(&w, "metadata");
 *   kcm_jsonw_key_string(&w, "name", name);
 *   kcm_jsonw_end(&w);
 *   kcm_jsonw_key_int(&w, "replicas", 3);
 *   kcm_jsonw_end(&w);
 *   err = kcm_jsonw_finish(&w);   // {"metadata":{"name":"..."},"replicas":3}
 *
 * The first error (out of memory, the buffer's limit, nesting past
 * KCM_JSONW_DEPTH, a container left open) is kept; later calls then write
 * nothing, so a caller checks once, at kcm_jsonw_finish(). What the
 * buffer holds after an error is not a JSON text.
 */
#ifndef KCM_JSONW_H
#define KCM_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm/buf.h"

/* Containers a writer nests; a value written whole with kcm_jsonw_raw()
 * may nest deeper. */
#define KCM_JSONW_DEPTH 64

struct kcm_jsonw {
  struct kcm_buf *out; /* borrowed */
  int err;             /* the first error; 0 while none */
  uint32_t depth;      /* containers open */
  uint64_t arrays;     /* bit d: the container at depth d+1 is an array */
  uint64_t filled;     /* bit d: it has a member or element already */
  bool keyed;          /* a key was written: its value is next */
  bool whole;          /* the top value has begun */
};

/* Append the n bytes at s to b as a JSON string: quoted, with '"', '\\'
 * and the bytes below 0x20 escaped (\n, \r, \t, \b, \f, else \u00XX),
 * every other byte as it is. Returns 0, KCM_ETOOBIG or KCM_ENOMEM. */
int kcm_jsonw_escape(struct kcm_buf *b, const char *s, size_t n);

/* Write into out, after what it holds. */
void kcm_jsonw_start(struct kcm_jsonw *w, struct kcm_buf *out);

void kcm_jsonw_object(struct kcm_jsonw *w);
void kcm_jsonw_array(struct kcm_jsonw *w);
/* Close the innermost open object or array. */
void kcm_jsonw_end(struct kcm_jsonw *w);
/* The name of the next member of the open object. */
void kcm_jsonw_key(struct kcm_jsonw *w, const char *name);
void kcm_jsonw_keyn(struct kcm_jsonw *w, const char *name, size_t n);

/* Values. A NULL string is written as "". */
void kcm_jsonw_string(struct kcm_jsonw *w, const char *s);
void kcm_jsonw_stringn(struct kcm_jsonw *w, const char *s, size_t n);
void kcm_jsonw_int(struct kcm_jsonw *w, int64_t v);
/* v in decimal, as a string: how the API writes a resourceVersion. */
void kcm_jsonw_uint_string(struct kcm_jsonw *w, uint64_t v);
void kcm_jsonw_bool(struct kcm_jsonw *w, bool v);
void kcm_jsonw_null(struct kcm_jsonw *w);
/* text[0..n), one JSON value the caller vouches for, as it is. */
void kcm_jsonw_raw(struct kcm_jsonw *w, const char *text, size_t n);

/* A key and its value, for brevity. */
void kcm_jsonw_key_object(struct kcm_jsonw *w, const char *name);
void kcm_jsonw_key_array(struct kcm_jsonw *w, const char *name);
void kcm_jsonw_key_string(struct kcm_jsonw *w, const char *name, const char *s);
void kcm_jsonw_key_int(struct kcm_jsonw *w, const char *name, int64_t v);
void kcm_jsonw_key_bool(struct kcm_jsonw *w, const char *name, bool v);

/* The JSON object text[0..len), as a value, with the member at path (a
 * NULL-ended list of names, one per level) set to the string value, or
 * removed when value is NULL; the rest is copied as it is. Objects the
 * path needs and the text lacks (or holds as null) are made; a removal
 * leaves them as they are. A member made goes before the first whose name
 * sorts after its own, so a canonical text (keys sorted) stays canonical;
 * of a name on the path given twice, the first is kept. Text that is not
 * an object, broken JSON, or another type than an object on the path of a
 * value set is KCM_EINVAL. */
void kcm_jsonw_copy_set(struct kcm_jsonw *w, const char *text, size_t len,
                        const char *const *path, const char *value);
/* The same, the member set to json, one JSON value the caller vouches for
 * (as kcm_jsonw_raw() writes it), or removed when json is NULL. */
void kcm_jsonw_copy_set_json(struct kcm_jsonw *w, const char *text, size_t len,
                             const char *const *path, const char *json);

/* A json-c tree (NULL: null), whatever its depth, as one value: members
 * in the tree's order, or sorted by name (bytewise) with `sorted` (the
 * canonical JSON that templates are compared by); numbers as json-c read
 * them. Its recursion goes as deep as the tree, which kcm_json_tree()
 * bounds. */
struct json_object;
void kcm_jsonw_tree(struct kcm_jsonw *w, struct json_object *v, bool sorted);
/* The same, alone, in a heap string the caller frees; NULL when out of
 * memory. */
char *kcm_jsonw_tree_text(struct json_object *v);

/* 0 when the text is whole (one value, every container closed), else the first
 * error: KCM_ENOMEM, KCM_ETOOBIG, or KCM_EINVAL for a misuse (nesting too
 * deep, a container left open or closed twice, a key outside an object, a
 * value where a key belongs, or a second value at the top). */
int kcm_jsonw_finish(struct kcm_jsonw *w);

#endif
