/* json — a pull reader over a complete JSON text; see kcm/json.h. */
#include "kcm/json.h"

#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include <json-c/json.h>

#include "kcm/error.h"

void kcm_json_init(struct kcm_json *j) {
  memset(j, 0, sizeof(*j));
  kcm_buf_init(&j->keys, SIZE_MAX);
  kcm_buf_init(&j->strs, SIZE_MAX);
}

void kcm_json_start(struct kcm_json *j, const char *text, size_t len) {
  j->start = j->p = text;
  j->end = text + len;
  j->err = NULL;
  j->err_at = 0;
  j->key = "";
  j->keylen = 0;
  j->nest.depth = 0;
  j->first = false;
}

void kcm_json_release(struct kcm_json *j) {
  kcm_buf_release(&j->keys);
  kcm_buf_release(&j->strs);
  kcm_json_nest_release(&j->nest);
}

int kcm_json_nest_grow(struct kcm_json_nest *n, uint8_t c) {
  size_t at = n->depth - KCM_JSON_NEST_INLINE;
  if (at == n->cap) {
    size_t cap = n->cap ? n->cap * 2 : 256;
    uint8_t *grown = realloc(n->high, cap);
    if (!grown)
      return KCM_ENOMEM;
    n->high = grown;
    n->cap = cap;
  }
  n->high[at] = c;
  n->depth++;
  return 0;
}

void kcm_json_nest_release(struct kcm_json_nest *n) {
  free(n->high);
  n->high = NULL;
  n->cap = n->depth = 0;
}

static bool fail(struct kcm_json *j, const char *why) {
  if (!j->err) {
    j->err = why;
    j->err_at = (size_t)(j->p - j->start);
  }
  j->p = j->end;
  return false;
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

static void ws(struct kcm_json *j) {
  while (j->p < j->end && is_space(*j->p))
    j->p++;
}

enum kcm_json_type kcm_json_peek(struct kcm_json *j) {
  if (j->err)
    return KCM_JSON_NONE;
  ws(j);
  if (j->p == j->end)
    return KCM_JSON_NONE;
  switch (*j->p) {
  case '{':
    return KCM_JSON_OBJECT;
  case '[':
    return KCM_JSON_ARRAY;
  case '"':
    return KCM_JSON_STRING;
  case 't':
  case 'f':
    return KCM_JSON_BOOL;
  case 'n':
    return KCM_JSON_NULL;
  default:
    if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9'))
      return KCM_JSON_NUMBER;
    fail(j, "unexpected character");
    return KCM_JSON_NONE;
  }
}

/* --- scalars ------------------------------------------------------------------------ */

static int hex4(const char *p) {
  int v = 0, i;
  for (i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      v |= c - 'A' + 10;
    else
      return -1;
  }
  return v;
}

static int put_utf8(struct kcm_buf *b, unsigned cp) {
  char u[4];
  size_t n;
  if (cp < 0x80) {
    u[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    u[0] = (char)(0xc0 | (cp >> 6));
    u[1] = (char)(0x80 | (cp & 0x3f));
    n = 2;
  } else if (cp < 0x10000) {
    u[0] = (char)(0xe0 | (cp >> 12));
    u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    u[2] = (char)(0x80 | (cp & 0x3f));
    n = 3;
  } else {
    u[0] = (char)(0xf0 | (cp >> 18));
    u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    u[3] = (char)(0x80 | (cp & 0x3f));
    n = 4;
  }
  return kcm_buf_append(b, u, n);
}

/* Read one escape after its backslash (at j->p) into b, or only check it
 * when b is NULL. */
static bool escape(struct kcm_json *j, struct kcm_buf *b) {
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  const char *e;
  unsigned cp;
  int hi, lo;

  if (j->p == j->end)
    return fail(j, "unterminated string");
  if (*j->p != 'u') {
    if (!(e = memchr(from, *j->p, sizeof(from) - 1)))
      return fail(j, "invalid escape in a string");
    j->p++;
    return !b || !kcm_buf_append(b, &to[e - from], 1) || fail(j, "out of memory");
  }
  if (j->end - j->p < 5 || (hi = hex4(j->p + 1)) < 0)
    return fail(j, "invalid \\u escape in a string");
  j->p += 5;
  cp = (unsigned)hi;
  if (hi >= 0xd800 && hi < 0xdc00 && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u' &&
      (lo = hex4(j->p + 2)) >= 0xdc00 && lo < 0xe000) {
    cp = 0x10000 + (((unsigned)hi - 0xd800) << 10) + ((unsigned)lo - 0xdc00);
    j->p += 6;
  } else if (hi >= 0xd800 && hi < 0xe000) {
    cp = 0xfffd; /* a lone surrogate, as Go's decoder reads it */
  }
  return !b || !put_utf8(b, cp) || fail(j, "out of memory");
}

/* Bytes that end a run of plain string characters. */
static const bool special[256] = {
    [0x00] = 1, [0x01] = 1, [0x02] = 1, [0x03] = 1, [0x04] = 1, [0x05] = 1, [0x06] = 1,
    [0x07] = 1, [0x08] = 1, [0x09] = 1, [0x0a] = 1, [0x0b] = 1, [0x0c] = 1, [0x0d] = 1,
    [0x0e] = 1, [0x0f] = 1, [0x10] = 1, [0x11] = 1, [0x12] = 1, [0x13] = 1, [0x14] = 1,
    [0x15] = 1, [0x16] = 1, [0x17] = 1, [0x18] = 1, [0x19] = 1, [0x1a] = 1, [0x1b] = 1,
    [0x1c] = 1, [0x1d] = 1, [0x1e] = 1, [0x1f] = 1, ['"'] = 1,  ['\\'] = 1};

/* Whether none of the 8 bytes at p is special: a quote, a backslash or a
 * control character (bytes below 0x20), tested a word at a time. */
static bool plain8(const char *p) {
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  uint64_t v, q, b;
  memcpy(&v, p, 8);
  q = v ^ (ones * '"');
  b = v ^ (ones * '\\');
  return !((((q - ones) & ~q) | ((b - ones) & ~b) | ((v - ones * 0x20) & ~v)) & highs);
}

#ifdef __SSE2__
/* How many of the 16 bytes at p come before the first special one (16 when
 * none is): the same test as plain8(), 16 bytes at a time, and it says where. */
static unsigned plain16(const char *p) {
  __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
  __m128i ctl = _mm_set1_epi8(0x1f);
  __m128i hit = _mm_or_si128(
      _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
      _mm_cmpeq_epi8(_mm_max_epu8(v, ctl), ctl));
  unsigned m = (unsigned)_mm_movemask_epi8(hit);
  return m ? (unsigned)__builtin_ctz(m) : 16;
}
#endif

/* Read the string at j->p (its opening quote) into b (reset first), or
 * only check it when b is NULL. */
static bool string_into(struct kcm_json *j, struct kcm_buf *b) {
  const char *run;
  if (b)
    kcm_buf_reset(b);
  j->p++;
  run = j->p;
  for (;;) {
    unsigned char c;
    if (j->p == j->end)
      return fail(j, "unterminated string");
    /* Plain characters first: most of a Kubernetes object is in strings. */
#ifdef __SSE2__
    while (j->end - j->p >= 16) {
      unsigned n = plain16(j->p);
      j->p += n;
      if (n < 16)
        break;
    }
#endif
    while (j->end - j->p >= 8 && plain8(j->p))
      j->p += 8;
    while (j->p < j->end && !special[(unsigned char)*j->p])
      j->p++;
    if (j->p == j->end)
      return fail(j, "unterminated string");
    c = (unsigned char)*j->p;
    if (c == '"' || c == '\\') {
      if (b && j->p > run && kcm_buf_append(b, run, (size_t)(j->p - run)))
        return fail(j, "out of memory");
      j->p++;
      if (c == '"')
        break;
      if (!escape(j, b))
        return false;
      run = j->p;
      continue;
    }
    return fail(j, "control character in a string");
  }
  if (b && !b->data && kcm_buf_append(b, "", 0))
    return fail(j, "out of memory");
  return true;
}

static bool digits(struct kcm_json *j) {
  const char *s = j->p;
  while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
    j->p++;
  return j->p > s;
}

/* Check the number at j->p; *integer tells whether it has no fraction or
 * exponent. */
static bool number(struct kcm_json *j, bool *integer) {
  *integer = true;
  if (*j->p == '-')
    j->p++;
  if (j->p < j->end && *j->p == '0')
    j->p++;
  else if (!digits(j))
    return fail(j, "invalid number");
  if (j->p < j->end && *j->p == '.') {
    *integer = false;
    j->p++;
    if (!digits(j))
      return fail(j, "invalid number");
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    *integer = false;
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
      j->p++;
    if (!digits(j))
      return fail(j, "invalid number");
  }
  return true;
}

static bool literal(struct kcm_json *j, const char *word, size_t n) {
  if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n))
    return fail(j, "invalid literal");
  j->p += n;
  return true;
}

bool kcm_json_string(struct kcm_json *j, const char **s, size_t *len) {
  if (kcm_json_peek(j) != KCM_JSON_STRING || !string_into(j, &j->strs))
    return false;
  *s = j->strs.data;
  *len = j->strs.len;
  return true;
}

bool kcm_json_bool(struct kcm_json *j, bool *out) {
  if (kcm_json_peek(j) != KCM_JSON_BOOL)
    return false;
  *out = *j->p == 't';
  return *out ? literal(j, "true", 4) : literal(j, "false", 5);
}

bool kcm_json_null(struct kcm_json *j) {
  return kcm_json_peek(j) == KCM_JSON_NULL && literal(j, "null", 4);
}

int kcm_json_int(struct kcm_json *j, int64_t *out) {
  const char *s;
  bool integer, neg;
  uint64_t v = 0, limit;

  if (kcm_json_peek(j) != KCM_JSON_NUMBER)
    return KCM_EINVAL;
  s = j->p;
  if (!number(j, &integer))
    return KCM_EINVAL;
  if (!integer)
    return KCM_EINVAL;
  neg = *s == '-';
  limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  for (s += neg; s < j->p; s++) {
    unsigned d = (unsigned)(*s - '0');
    if (v > (limit - d) / 10)
      return KCM_ETOOBIG;
    v = v * 10 + d;
  }
  *out = neg ? (int64_t)(0 - v) : (int64_t)v;
  return 0;
}

/* --- containers --------------------------------------------------------------------- */

static bool enter(struct kcm_json *j, char open) {
  if (kcm_json_nest_push(&j->nest, (uint8_t)open))
    return fail(j, "out of memory");
  j->p++;
  j->first = true;
  return true;
}

bool kcm_json_object(struct kcm_json *j) {
  return kcm_json_peek(j) == KCM_JSON_OBJECT && enter(j, '{');
}

bool kcm_json_array(struct kcm_json *j) {
  return kcm_json_peek(j) == KCM_JSON_ARRAY && enter(j, '[');
}

/* Before the next member or element of the open container of kind `open`:
 * true if one follows, false at the end (the container is closed). */
static bool next_item(struct kcm_json *j, char open) {
  char close = open == '{' ? '}' : ']';
  if (j->err)
    return false;
  if (kcm_json_nest_top(&j->nest) != (uint8_t)open)
    return fail(j, "read past the end of a container");
  ws(j);
  if (j->p == j->end)
    return fail(j, open == '{' ? "unterminated object" : "unterminated array");
  if (*j->p == close) {
    j->p++;
    j->nest.depth--;
    j->first = false;
    return false;
  }
  if (!j->first) {
    if (*j->p != ',')
      return fail(j, open == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
    j->p++;
    ws(j);
  }
  j->first = false;
  return true;
}

bool kcm_json_member(struct kcm_json *j) {
  const char *name;
  if (!next_item(j, '{'))
    return false;
  if (j->p == j->end || *j->p != '"')
    return fail(j, "expected a member name");
  name = j->p + 1;
  if (!string_into(j, NULL))
    return false;
  j->key = name;
  j->keylen = (size_t)(j->p - 1 - name);
  if (memchr(name, '\\', j->keylen)) { /* escaped: keep the decoded name */
    j->p = name - 1;
    if (!string_into(j, &j->keys))
      return false;
    j->key = j->keys.data;
    j->keylen = j->keys.len;
  }
  ws(j);
  if (j->p == j->end || *j->p != ':')
    return fail(j, "expected ':'");
  j->p++;
  return true;
}


bool kcm_json_element(struct kcm_json *j) { return next_item(j, '['); }

/* --- skipping ----------------------------------------------------------------------- */

bool kcm_json_skip(struct kcm_json *j) {
  size_t base = j->nest.depth;
  do {
    bool integer;
    switch (kcm_json_peek(j)) {
    case KCM_JSON_OBJECT:
    case KCM_JSON_ARRAY:
      if (!enter(j, *j->p))
        return false;
      break;
    case KCM_JSON_STRING:
      if (!string_into(j, NULL))
        return false;
      break;
    case KCM_JSON_NUMBER:
      if (!number(j, &integer))
        return false;
      break;
    case KCM_JSON_BOOL:
      if (!(*j->p == 't' ? literal(j, "true", 4) : literal(j, "false", 5)))
        return false;
      break;
    case KCM_JSON_NULL:
      if (!literal(j, "null", 4))
        return false;
      break;
    default:
      return fail(j, "expected a value");
    }
    /* Close finished containers; stop at the next value to skip. */
    while (j->nest.depth > base) {
      uint8_t open = kcm_json_nest_top(&j->nest);
      bool more = next_item(j, (char)open);
      if (j->err)
        return false;
      if (!more)
        continue;
      if (open == '{') {
        /* A member name, checked without being kept. */
        if (j->p == j->end || *j->p != '"')
          return fail(j, "expected a member name");
        if (!string_into(j, NULL))
          return false;
        ws(j);
        if (j->p == j->end || *j->p != ':')
          return fail(j, "expected ':'");
        j->p++;
      }
      break;
    }
  } while (j->nest.depth > base);
  j->first = false;
  return true;
}

bool kcm_json_raw(struct kcm_json *j, const char **text, size_t *len) {
  const char *s;
  if (kcm_json_peek(j) == KCM_JSON_NONE)
    return fail(j, "expected a value");
  s = j->p;
  if (!kcm_json_skip(j))
    return false;
  *text = s;
  *len = (size_t)(j->p - s);
  return true;
}

bool kcm_json_done(struct kcm_json *j) {
  if (j->err)
    return false;
  ws(j);
  return j->p == j->end || fail(j, "unexpected text after the value");
}

bool kcm_json_find(struct kcm_json *j, const char *const *path) {
  kcm_json_start(j, j->start, (size_t)(j->end - j->start));
  for (; *path; path++) {
    bool found = false;
    if (!kcm_json_object(j))
      return false;
    while (!found && kcm_json_member(j)) {
      if (kcm_json_key_is(j, *path))
        found = true;
      else if (!kcm_json_skip(j))
        return false;
    }
    if (!found)
      return false;
  }
  return true;
}

bool kcm_json_member_span(struct kcm_json *j, const char *const *parent, const char *key,
                          size_t *from, size_t *to) {
  size_t len = (size_t)(j->end - j->start);
  const char *before;
  if (!kcm_json_find(j, parent) || !kcm_json_object(j))
    return false;
  before = j->p;
  while (kcm_json_member(j)) {
    bool found = kcm_json_key_is(j, key);
    if (!kcm_json_skip(j))
      return false;
    if (found) {
      /* a comma before it (a member before) goes with it; else one after */
      size_t lead = (size_t)(before - j->start), next = (size_t)(j->p - j->start);
      while (lead < next && is_space(j->start[lead]))
        lead++;
      *from = (size_t)(before - j->start);
      *to = next;
      while (j->start[lead] != ',' && next < len && is_space(j->start[next]))
        next++;
      if (j->start[lead] != ',' && next < len && j->start[next] == ',')
        *to = next + 1;
      return true;
    }
    before = j->p;
  }
  return false;
}

/* --- shorter escapes ---------------------------------------------------------------- */

int kcm_json_shorten_escapes(const char *text, size_t len, struct kcm_buf *out) {
  const char *p = text, *end = text + len, *run = text;
  bool in_string = false;
  int err = 0;
  while (p < end && !err) {
    const char *u;
    int hi, lo;
    unsigned cp;
    if (!in_string) {
      if (!(u = memchr(p, '"', (size_t)(end - p))))
        break;
      p = u + 1;
      in_string = true;
      continue;
    }
    while (p < end && *p != '"' && *p != '\\')
      p++;
    if (p == end)
      break;
    if (*p == '"') {
      p++;
      in_string = false;
      continue;
    }
    /* an escape: only \uXXXX of a printable character is rewritten */
    if (end - p < 6 || p[1] != 'u' || (hi = hex4(p + 2)) < 0) {
      p += end - p < 2 ? 1 : 2;
      continue;
    }
    u = p;
    p += 6;
    cp = (unsigned)hi;
    if (hi >= 0xd800 && hi < 0xdc00) {
      if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || (lo = hex4(p + 2)) < 0xdc00 ||
          lo >= 0xe000)
        continue; /* a lone surrogate stays as it is */
      cp = 0x10000 + (((unsigned)hi - 0xd800) << 10) + ((unsigned)lo - 0xdc00);
      p += 6;
    } else if ((hi >= 0xdc00 && hi < 0xe000) || cp < 0x20 || cp == '"' || cp == '\\' ||
               cp == 0x7f) {
      continue;
    }
    if (!(err = kcm_buf_append(out, run, (size_t)(u - run))))
      err = put_utf8(out, cp);
    run = p;
  }
  if (!err)
    err = kcm_buf_append(out, run, (size_t)(end - run));
  return err;
}

/* --- json-c trees ------------------------------------------------------------------- */

size_t kcm_json_deepest(const char *text, size_t len) {
  const char *p = text, *end = text + len;
  size_t depth = 0, deepest = 0;
  while (p < end) {
    const char *q = p;
    while (q < end && *q != '"' && *q != '{' && *q != '[' && *q != '}' && *q != ']')
      q++;
    if (q == end)
      break;
    p = q + 1;
    switch (*q) {
    case '"': /* to the closing quote, escapes skipped */
      while (p < end && *p != '"')
        p += *p == '\\' && end - p > 1 ? 2 : 1;
      if (p < end)
        p++;
      break;
    case '{':
    case '[':
      if (++depth > deepest)
        deepest = depth;
      break;
    default:
      if (depth)
        depth--;
    }
  }
  return deepest;
}

struct json_object *kcm_json_tree(const char *text, size_t len) {
  size_t deepest = kcm_json_deepest(text, len);
  struct json_tokener *tok;
  struct json_object *doc;
  if (!text || len > INT32_MAX || deepest > KCM_JSON_TREE_MAX_DEPTH)
    return NULL;
  /* json-c counts the top value as a level too */
  if (!(tok = json_tokener_new_ex(deepest + 2 > JSON_TOKENER_DEFAULT_DEPTH
                                      ? (int)deepest + 2
                                      : JSON_TOKENER_DEFAULT_DEPTH)))
    return NULL;
  if ((doc = json_tokener_parse_ex(tok, text, (int)len))) {
    const char *rest = text + json_tokener_get_parse_end(tok); /* blanks only */
    while (rest < text + len && is_space(*rest))
      rest++;
    if (rest < text + len) {
      json_object_put(doc);
      doc = NULL;
    }
  }
  json_tokener_free(tok);
  return doc;
}
