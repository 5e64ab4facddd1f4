/* items — splitting a list response into its items; see items.h. */
#include "items.h"

#include <string.h>

#include "kcm/error.h"

/* Where in the list object the reader is. */
enum {
  ST_START,      /* before the list object */
  ST_KEY,        /* in it: a member's key next (or '}' when it is the first) */
  ST_KEY_TEXT,   /* in a key */
  ST_COLON,      /* after a key */
  ST_VALUE,      /* a member's value next */
  ST_ITEMS,      /* in "items": an element next (or ']' when it is the first) */
  ST_ITEM_END,   /* after an element: ',' or ']' */
  ST_SCAN,       /* in a value */
  ST_MEMBER_END, /* after a member: ',' or '}' */
  ST_DONE,       /* after the list object: blanks only */
  ST_FAILED,
};

/* What the value being scanned is. */
enum { V_SKIP, V_ITEM, V_METADATA };

static bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static bool scalar_char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         c == '+' || c == '-' || c == '.';
}

void kcm_items_init(struct kcm_items *s, size_t max_bytes, kcm_items_cb cb, void *data) {
  memset(s, 0, sizeof(*s));
  kcm_buf_init(&s->part, max_bytes);
  s->max_bytes = max_bytes;
  s->cb = cb;
  s->data = data;
  s->first = true;
}

void kcm_items_release(struct kcm_items *s) {
  kcm_buf_release(&s->part);
  kcm_json_nest_release(&s->nest);
}

void kcm_items_reset(struct kcm_items *s) {
  struct kcm_buf part = s->part;
  struct kcm_json_nest nest = s->nest;
  kcm_items_init(s, s->max_bytes, s->cb, s->data);
  s->part = part;
  kcm_buf_reset(&s->part);
  s->nest = nest; /* its deep levels' memory, kept */
  s->nest.depth = 0;
}

static int fail(struct kcm_items *s, const char *why) {
  s->err = why;
  s->state = ST_FAILED;
  kcm_buf_reset(&s->part);
  return KCM_EINVAL;
}

/* Keep n more bytes of the value being captured. */
static int keep(struct kcm_items *s, const char *p, size_t n) {
  if (s->oversize)
    return 0;
  if (s->part.len + n > s->max_bytes) {
    s->oversize = true; /* reported when the value ends, wherever chunks end */
    kcm_buf_reset(&s->part);
    return 0;
  }
  return kcm_buf_append(&s->part, p, n) ? KCM_ENOMEM : 0;
}

/* The value being scanned ended: its last bytes are p[start, end). */
static int value_done(struct kcm_items *s, const char *p, size_t start, size_t end) {
  enum kcm_items_part part = s->value == V_ITEM ? KCM_ITEMS_ITEM : KCM_ITEMS_METADATA;
  const char *text = p + start;
  size_t len = end - start;
  int rc;

  s->state = s->value == V_ITEM ? ST_ITEM_END : ST_MEMBER_END;
  if (s->value == V_SKIP)
    return 0;
  if (s->part.len || s->oversize) {
    if ((rc = keep(s, text, len)))
      return rc;
    text = s->part.data;
    len = s->part.len;
  }
  if (s->oversize || len > s->max_bytes) {
    s->oversize = false;
    if (part == KCM_ITEMS_METADATA)
      return fail(s, "the list's metadata is larger than the size limit");
    return s->cb(part, NULL, 0, "item larger than the size limit", s->data);
  }
  rc = s->cb(part, text, len, NULL, s->data);
  kcm_buf_reset(&s->part);
  return rc;
}

/* Scan the value from p[i]; returns the index where scanning stopped, with
 * *ended set if the value ended just before it. */
static size_t scan(struct kcm_items *s, const char *p, size_t n, size_t i, bool *ended) {
  while (i < n) {
    char c = p[i];
    if (s->in_string) {
      if (s->escaped) {
        s->escaped = false;
        i++;
        continue;
      }
      while (i < n && p[i] != '"' && p[i] != '\\')
        i++;
      if (i == n)
        break;
      if (p[i++] == '\\') {
        s->escaped = true;
        continue;
      }
      s->in_string = false;
      if (!s->nest.depth) {
        *ended = true;
        return i;
      }
      continue;
    }
    if (s->scalar) {
      if (!scalar_char(c)) {
        *ended = true;
        return i;
      }
      i++;
      continue;
    }
    if (c == '"') {
      s->in_string = true;
    } else if (c == '{' || c == '[') {
      /* a level costs a byte: deeper than the cap is no item kcm reads,
       * and the stack stays within it */
      if (s->nest.depth >= s->max_bytes) {
        fail(s, "the list response nests deeper than an item may be long");
        return n;
      }
      if (kcm_json_nest_push(&s->nest, (uint8_t)c)) {
        fail(s, "out of memory");
        return n;
      }
    } else if (c == '}' || c == ']') {
      if (kcm_json_nest_top(&s->nest) != (c == '}' ? '{' : '[')) {
        fail(s, "the list response's brackets do not match");
        return n;
      }
      if (!--s->nest.depth) {
        *ended = true;
        return i + 1;
      }
    }
    i++;
  }
  return i;
}

/* A value of kind `value` starts with c. */
static int begin_value(struct kcm_items *s, char c, uint8_t value) {
  if (c != '{' && c != '[' && c != '"' && !scalar_char(c))
    return fail(s, "the list response is not valid JSON");
  s->state = ST_SCAN;
  s->value = value;
  s->nest.depth = 0;
  s->in_string = s->escaped = s->oversize = false;
  s->scalar = scalar_char(c);
  return 0;
}

static bool key_is(const struct kcm_items *s, const char *name) {
  size_t n = strlen(name);
  return s->key_len == n && !memcmp(s->key, name, n);
}

/* The first byte of a member's value, c, after the key in s->key. */
static int member_value(struct kcm_items *s, char c, size_t *i) {
  if (key_is(s, "items")) {
    if (s->seen_items)
      return fail(s, "the list response has two items lists");
    s->seen_items = true;
    if (c == '[') {
      s->state = ST_ITEMS;
      s->first = true;
      (*i)++;
      return 0;
    }
    if (c != 'n') /* null: no items */
      return fail(s, "the list response's items is not a list");
    return begin_value(s, c, V_SKIP);
  }
  return begin_value(s, c, key_is(s, "metadata") ? V_METADATA : V_SKIP);
}

/* One byte of a member's key. */
static void key_char(struct kcm_items *s, char c) {
  if (s->escaped) {
    s->escaped = false;
    s->key_len = sizeof(s->key); /* an escaped key is none kcm reads */
  } else if (c == '\\') {
    s->escaped = true;
  } else if (c == '"') {
    s->state = ST_COLON;
  } else if (s->key_len < sizeof(s->key) - 1) {
    s->key[s->key_len++] = c;
  } else {
    s->key_len = sizeof(s->key);
  }
}

/* A ',' or the closing bracket after an element or a member. */
static int separator(struct kcm_items *s, char c) {
  bool item = s->state == ST_ITEM_END;
  if (c == ',') {
    s->state = item ? ST_ITEMS : ST_KEY;
    s->first = false;
  } else if (c == (item ? ']' : '}')) {
    s->state = item ? ST_MEMBER_END : ST_DONE;
  } else {
    return fail(s, "the list response is not valid JSON");
  }
  return 0;
}

/* The byte c = p[*i] of the list's own structure (no blank, outside keys
 * and scanned values): the state moves on, and *i past what was read (a
 * value begun at *start). Returns 0 or an error. */
static int structure(struct kcm_items *s, char c, size_t *i, size_t *start) {
  switch (s->state) {
  case ST_START:
    if (c != '{')
      return fail(s, "the list response is not a JSON object");
    s->state = ST_KEY;
    s->first = true;
    break;
  case ST_KEY:
    if (c == '}' && s->first) {
      s->state = ST_DONE;
    } else if (c == '"') {
      s->state = ST_KEY_TEXT;
      s->key_len = 0;
      s->escaped = false;
    } else {
      return fail(s, "the list response is not valid JSON");
    }
    break;
  case ST_COLON:
    if (c != ':')
      return fail(s, "the list response is not valid JSON");
    s->state = ST_VALUE;
    break;
  case ST_VALUE:
    *start = *i;
    return member_value(s, c, i);
  case ST_ITEMS:
    if (c == ']' && s->first) {
      s->state = ST_MEMBER_END;
      break;
    }
    *start = *i;
    return begin_value(s, c, V_ITEM);
  case ST_ITEM_END:
  case ST_MEMBER_END:
    if (separator(s, c))
      return KCM_EINVAL;
    break;
  default: /* ST_DONE */
    return fail(s, "the list response has text after its end");
  }
  (*i)++;
  return 0;
}

int kcm_items_feed(struct kcm_items *s, const char *p, size_t n) {
  size_t i = 0, start = 0;
  int rc = 0;

  while (i < n && !rc) {
    if (s->state == ST_SCAN) {
      bool ended = false;
      i = scan(s, p, n, i, &ended);
      if (ended)
        rc = value_done(s, p, start, i);
    } else if (s->state == ST_FAILED) {
      return KCM_EINVAL;
    } else if (s->state == ST_KEY_TEXT) {
      key_char(s, p[i++]);
    } else if (blank(p[i])) {
      i++;
    } else {
      rc = structure(s, p[i], &i, &start);
    }
  }
  if (s->state == ST_FAILED)
    return KCM_EINVAL;
  if (!rc && s->state == ST_SCAN && s->value != V_SKIP)
    rc = keep(s, p + start, n - start);
  return rc;
}

int kcm_items_finish(struct kcm_items *s) {
  if (s->state == ST_FAILED)
    return KCM_EINVAL;
  if (s->state == ST_START)
    return fail(s, "the list response is not a JSON object");
  if (s->state != ST_DONE)
    return fail(s, "the list response ended early");
  if (!s->seen_items)
    return fail(s, "the list response has no items list");
  return 0;
}
