/*
 * api/source.h — one value of an object, in JSON or in protobuf: the
 * readers a field list's handlers use, so that a kind lists its fields
 * once and both encodings read them by the same rules.
 *
 * A field list names each field as JSON spells it and by its protobuf
 * number (upstream's generated.proto). Reading a message walks its fields
 * in the order they come and hands each listed one to its handler; the
 * rest are passed over. A handler reads exactly one value with the
 * readers below (or passes it over with kcm_api_src_skip()).
 *
 * The readers return 1 when a value was read, 0 when it is absent (a JSON
 * null; protobuf has none), or a negative error, with the field and the
 * problem in s->err. A list is a JSON array or the repeated occurrences of
 * a protobuf field; a map a JSON object of members or repeated protobuf
 * entries (key 1, value 2). A source owns nothing: the text or message,
 * the cursor and the pool are the caller's. Internal to api/ (meta.c
 * and the kinds' files).
 */
#ifndef KCM_API_SOURCE_H
#define KCM_API_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/pb.h"

struct kcm_api_src {
  struct kcm_json *j; /* JSON: the cursor, before the value; NULL for protobuf */
  struct kcm_pb *pb;  /* protobuf: the reader, at the value's field */
  const char *within; /* protobuf: the message being read, for errors */
  const uint8_t *value; /* protobuf: a map entry's value, taken out of its entry */
  size_t value_len;
  bool has_value;
  const char *key; /* in a map: the entry's key (not NUL-terminated) */
  size_t keylen;
  struct kcm_intern *pool;
  struct kcm_api_error *err;
};

typedef int (*kcm_api_read)(struct kcm_api_src *s, void *obj);

struct kcm_api_field {
  const char *name; /* as JSON spells it */
  uint32_t len;     /* strlen(name) */
  uint32_t number;  /* in protobuf; 0: read from JSON only */
  kcm_api_read read; /* NULL: a message, read by the list below with the same obj */
  const struct kcm_api_field *fields;
  size_t nfields;
  const char *path; /* the message's, in errors */
};

#define KCM_API_FIELD(json, number, read) {json, sizeof(json) - 1, number, read, NULL, 0, NULL}
/* A field that is a message whose fields are list's, read into the same obj. */
#define KCM_API_MESSAGE(json, number, path, list)                                              \
  {json, sizeof(json) - 1, number, NULL, list, sizeof(list) / sizeof((list)[0]), path}
#define KCM_API_FIELDS(list) (list), (sizeof(list) / sizeof((list)[0]))

/* The readers are plain static functions, a copy in each file that reads
 * fields, so that the compiler inlines them into the handlers as it
 * weighs each use; each file uses some. */
#define SOURCE static __attribute__((unused))

SOURCE int kcm_api_src_fail(struct kcm_api_src *s, const char *field, const char *problem) {
  snprintf(s->err->field, sizeof(s->err->field), "%s", field);
  snprintf(s->err->problem, sizeof(s->err->problem), "%s", problem);
  return KCM_EINVAL;
}

/* The value is not what the field takes: problem, unless the text is
 * broken (JSON) or the message malformed (protobuf), which is told instead. */
SOURCE int kcm_api_src_mismatch(struct kcm_api_src *s, const char *field, const char *problem) {
  if (s->j)
    return s->j->err ? kcm_api_src_fail(s, "(json)", s->j->err)
                     : kcm_api_src_fail(s, field, problem);
  return kcm_api_src_fail(s, field, s->pb->err ? s->pb->err : problem);
}

/* Whether the value is of this JSON type; in protobuf, a string, object
 * or list is any length-delimited field, a number or bool a varint, and
 * nothing is null. */
SOURCE bool kcm_api_src_is(struct kcm_api_src *s, enum kcm_json_type type) {
  if (s->j)
    return kcm_json_peek(s->j) == type;
  if (s->has_value)
    return type == KCM_JSON_STRING;
  switch (type) {
  case KCM_JSON_OBJECT:
  case KCM_JSON_ARRAY:
  case KCM_JSON_STRING:
    return s->pb->wire == KCM_PB_BYTES;
  case KCM_JSON_NUMBER:
  case KCM_JSON_BOOL:
    return s->pb->wire == KCM_PB_VARINT;
  default:
    return false;
  }
}

SOURCE int kcm_api_src_skip(struct kcm_api_src *s) {
  if (s->j)
    return kcm_json_skip(s->j) ? 0 : kcm_api_src_mismatch(s, "", "");
  if (s->has_value)
    return 0;
  return kcm_pb_skip(s->pb) ? 0 : kcm_api_src_mismatch(s, s->within, "");
}

/* A string's bytes: NUL-terminated in JSON, not in protobuf. */
SOURCE int kcm_api_src_string(struct kcm_api_src *s, const char *field, const char **p, size_t *n) {
  if (s->j) {
    if (kcm_json_null(s->j))
      return 0;
    return kcm_json_string(s->j, p, n) ? 1 : kcm_api_src_mismatch(s, field, "must be a string");
  }
  if (s->has_value) {
    *p = (const char *)s->value;
    *n = s->value_len;
    return 1;
  }
  return kcm_pb_bytes(s->pb, (const uint8_t **)p, n) ? 1 : kcm_api_src_mismatch(s, field, "");
}

SOURCE int kcm_api_src_int(struct kcm_api_src *s, const char *field, int64_t lo, int64_t hi,
                    int64_t *out) {
  int64_t v;
  if (s->j) {
    int rc;
    if (kcm_json_null(s->j))
      return 0;
    rc = kcm_json_int(s->j, &v);
    if (rc == KCM_ETOOBIG || (!rc && (v < lo || v > hi)))
      return kcm_api_src_fail(s, field, "out of range");
    if (rc)
      return kcm_api_src_mismatch(s, field, "must be an integer");
  } else {
    uint64_t u;
    if (s->has_value || !kcm_pb_varint(s->pb, &u))
      return kcm_api_src_mismatch(s, field, "must be an integer");
    v = (int64_t)u;
    if (v < lo || v > hi)
      return kcm_api_src_fail(s, field, "out of range");
  }
  *out = v;
  return 1;
}

SOURCE int kcm_api_src_bool(struct kcm_api_src *s, const char *field, bool *out) {
  uint64_t u;
  if (s->j) {
    if (kcm_json_null(s->j))
      return 0;
    return kcm_json_bool(s->j, out) ? 1 : kcm_api_src_mismatch(s, field, "must be true or false");
  }
  if (s->has_value || !kcm_pb_varint(s->pb, &u))
    return kcm_api_src_mismatch(s, field, "must be true or false");
  *out = u != 0;
  return 1;
}

/* A meta/v1 Time as Unix seconds (an RFC 3339 string in JSON); a value
 * that is no time is passed over and returns 2 with *problem set, for a
 * field whose rules decide later whether it counts. */
SOURCE int kcm_api_src_time_soft(struct kcm_api_src *s, const char *field, int64_t *out,
                          const char **problem) {
  struct kcm_pb r;
  const char *p;
  size_t n;
  uint64_t v;
  int rc;
  if (s->j) {
    if (kcm_json_null(s->j))
      return 0;
    if (kcm_json_peek(s->j) != KCM_JSON_STRING) {
      *problem = "must be a string";
      return (rc = kcm_api_src_skip(s)) < 0 ? rc : 2;
    }
    if (!kcm_json_string(s->j, &p, &n))
      return kcm_api_src_mismatch(s, field, "must be a string");
    if (kcm_api_parse_time(p, out)) { /* the reader's strings end in a NUL */
      *problem = "is not an RFC 3339 time";
      return 2;
    }
    return 1;
  }
  /* Time: seconds 1, nanos 2; an empty one is the zero time */
  if (s->has_value || s->pb->wire != KCM_PB_BYTES) {
    *problem = "must be a Time";
    return (rc = kcm_api_src_skip(s)) < 0 ? rc : 2;
  }
  if (!kcm_pb_bytes(s->pb, (const uint8_t **)&p, &n))
    return kcm_api_src_mismatch(s, field, "");
  kcm_pb_start(&r, p, n);
  rc = 0; /* an empty Time is the zero time, which JSON writes as null */
  while (kcm_pb_next(&r)) {
    if (r.field != 1 ? !kcm_pb_skip(&r) : !kcm_pb_varint(&r, &v))
      break;
    if (r.field == 1) {
      *out = (int64_t)v;
      rc = 1;
    }
  }
  return r.err ? kcm_api_src_fail(s, field, r.err) : rc;
}

/* The same, where a value that is no time is an error. */
SOURCE int kcm_api_src_time(struct kcm_api_src *s, const char *field, int64_t *out) {
  const char *problem = NULL;
  int rc = kcm_api_src_time_soft(s, field, out, &problem);
  return rc == 2 ? kcm_api_src_fail(s, field, problem) : rc;
}

/* The handler of the field named key[0..len), or NULL. */
SOURCE const struct kcm_api_field *src_field_named(const struct kcm_api_field *f, size_t n,
                                           const char *key, size_t len) {
  for (; n; f++, n--)
    if (f->len == len && !memcmp(f->name, key, len))
      return f;
  return NULL;
}

SOURCE const struct kcm_api_field *src_field_numbered(const struct kcm_api_field *f, size_t n,
                                             uint32_t number) {
  for (; n; f++, n--)
    if (f->number == number)
      return f;
  return NULL;
}

SOURCE int src_read(struct kcm_api_src *s, const struct kcm_api_field *f, void *obj);

/* The members of the JSON object just entered. */
SOURCE int src_json_members(struct kcm_api_src *s, const struct kcm_api_field *fields, size_t n,
                        void *obj) {
  while (kcm_json_member(s->j)) {
    const struct kcm_api_field *f = src_field_named(fields, n, s->j->key, s->j->keylen);
    int rc;
    if (!f) {
      if (kcm_json_skip(s->j))
        continue;
      break;
    }
    if ((rc = src_read(s, f, obj)) < 0)
      return rc;
  }
  return s->j->err ? kcm_api_src_fail(s, "(json)", s->j->err) : 1;
}

/* The fields of the protobuf message p[0..len); field names it in errors. */
SOURCE int src_proto_fields(struct kcm_api_src *s, const char *field, const uint8_t *p, size_t len,
                        const struct kcm_api_field *fields, size_t n, void *obj) {
  struct kcm_pb r, *outer = s->pb;
  const char *within = s->within;
  int rc = 1;
  kcm_pb_start(&r, p, len);
  s->pb = &r;
  s->within = field;
  while (kcm_pb_next(&r)) {
    const struct kcm_api_field *f = src_field_numbered(fields, n, r.field);
    if (!f) {
      if (kcm_pb_skip(&r))
        continue;
      rc = kcm_api_src_fail(s, field, r.err);
      break;
    }
    if ((rc = src_read(s, f, obj)) < 0)
      break;
  }
  s->pb = outer;
  s->within = within;
  if (rc < 0)
    return rc;
  return r.err ? kcm_api_src_fail(s, field, r.err) : 1;
}

/* A message: each field in fields[0..n) read by its handler with obj. */
SOURCE int kcm_api_src_message(struct kcm_api_src *s, const char *field,
                        const struct kcm_api_field *fields, size_t n, void *obj) {
  const uint8_t *p;
  size_t len;
  if (s->j) {
    if (kcm_json_null(s->j))
      return 0;
    if (!kcm_json_object(s->j))
      return kcm_api_src_mismatch(s, field, "must be an object");
    return src_json_members(s, fields, n, obj);
  }
  if (s->has_value || !kcm_pb_bytes(s->pb, &p, &len))
    return kcm_api_src_mismatch(s, field, "must be a message");
  return src_proto_fields(s, field, p, len, fields, n, obj);
}

/* The value of field f, by its handler or its list. */
SOURCE int src_read(struct kcm_api_src *s, const struct kcm_api_field *f, void *obj) {
  return f->read ? f->read(s, obj) : kcm_api_src_message(s, f->path, f->fields, f->nfields, obj);
}

/* A list: each(s, obj) for every element. */
SOURCE int kcm_api_src_list(struct kcm_api_src *s, const char *field, kcm_api_read each, void *obj) {
  int rc;
  if (!s->j)
    return (rc = each(s, obj)) < 0 ? rc : 1;
  if (kcm_json_null(s->j))
    return 0;
  if (!kcm_json_array(s->j))
    return kcm_api_src_mismatch(s, field, "must be a list");
  while (kcm_json_element(s->j))
    if ((rc = each(s, obj)) < 0)
      return rc;
  return s->j->err ? kcm_api_src_fail(s, "(json)", s->j->err) : 1;
}

/* A map: each(s, obj) for every entry, with s->key set and its value next. */
SOURCE int kcm_api_src_map(struct kcm_api_src *s, const char *field, kcm_api_read each, void *obj) {
  struct kcm_pb r;
  const uint8_t *p, *key = (const uint8_t *)"";
  size_t len;
  int rc;
  if (s->j) {
    if (kcm_json_null(s->j))
      return 0;
    if (!kcm_json_object(s->j))
      return kcm_api_src_mismatch(s, field, "must be an object of strings");
    while (kcm_json_member(s->j)) {
      s->key = s->j->key;
      s->keylen = s->j->keylen;
      if ((rc = each(s, obj)) < 0)
        return rc;
    }
    return s->j->err ? kcm_api_src_fail(s, "(json)", s->j->err) : 1;
  }
  if (s->has_value || !kcm_pb_bytes(s->pb, &p, &len))
    return kcm_api_src_mismatch(s, field, "must be a map entry");
  s->keylen = 0;
  s->value = key;
  s->value_len = 0;
  kcm_pb_start(&r, p, len);
  while (kcm_pb_next(&r)) {
    if (r.field == 1 && kcm_pb_bytes(&r, &key, &s->keylen))
      continue;
    if (r.field == 2 && kcm_pb_bytes(&r, &s->value, &s->value_len))
      continue;
    if (r.field > 2 && kcm_pb_skip(&r))
      continue;
    break;
  }
  if (r.err)
    return kcm_api_src_fail(s, field, r.err);
  s->key = (const char *)key;
  s->has_value = true;
  rc = each(s, obj);
  s->has_value = false;
  return rc < 0 ? rc : 1;
}

/* A whole object: JSON text at j's cursor (nothing may follow it when
 * whole), or a protobuf message msg[0..len). */
SOURCE int kcm_api_src_json_object(struct kcm_api_src *s, bool whole,
                            const struct kcm_api_field *fields, size_t n, void *obj) {
  int rc;
  if (!kcm_json_object(s->j))
    return kcm_api_src_mismatch(s, "(object)", "must be a JSON object");
  if ((rc = src_json_members(s, fields, n, obj)) < 0)
    return rc;
  if (whole && !kcm_json_done(s->j))
    return kcm_api_src_fail(s, "(json)", s->j->err ? s->j->err : "text after the object");
  return 1;
}

SOURCE int kcm_api_src_proto_object(struct kcm_api_src *s, const void *msg, size_t len,
                             const struct kcm_api_field *fields, size_t n, void *obj) {
  return src_proto_fields(s, "(protobuf)", msg, len, fields, n, obj);
}

/* s[0..n) as a C string into dst[cap]: up to its first NUL, "" when that
 * does not fit; the value a C reader of the text would see. */
SOURCE void kcm_api_src_cstr(char *dst, size_t cap, const char *s, size_t n) {
  const char *nul = memchr(s, '\0', n);
  if (nul)
    n = (size_t)(nul - s);
  if (n >= cap)
    n = 0;
  memcpy(dst, s, n);
  dst[n] = '\0';
}

/* Whether s[0..n), read up to its first NUL, is lit. */
SOURCE bool kcm_api_src_cstr_is(const char *s, size_t n, const char *lit) {
  size_t len = strlen(lit);
  return n >= len && !memcmp(s, lit, len) && (n == len || s[len] == '\0');
}

/* --- the metadata every kind shares (meta.c) --------------------------------------- */

/* What reading an object's metadata fills and gathers. */
struct kcm_api_meta {
  struct kcm_object *o;
  struct kcm_pairs *pairs;     /* a ReplicaSet's or Deployment's annotations; NULL: none */
  struct kcm_writers *writers; /* its managedFields, summed up; NULL: skipped */
  int32_t *deletion_cost;      /* a pod's: its deletion cost annotation; NULL: none */
  struct kcm_label *labels;    /* gathered across the entries (kcm_buf_grow_items()) */
  uint32_t nlabels;
  struct kcm_pair *annotations;
  uint32_t nannotations;
  uint32_t owners;
  bool seen_labels, seen_annotations, seen_owners; /* in this metadata */
  bool has_meta, has_uid, has_rv, name_long;
};

/* The value of metadata: 1 when read (what was gathered adopted into
 * m->o), 0 when null, or an error (nothing gathered is kept). */
int kcm_api_meta_read(struct kcm_api_src *s, struct kcm_api_meta *m);
/* The checks once the whole object is read. */
int kcm_api_meta_complete(struct kcm_api_src *s, const struct kcm_api_meta *m);

#endif
