/*
 * Fuzz the object decoders: the first byte picks the kind (pod, ReplicaSet,
 * Deployment), the rest is the object's JSON as an API server might send
 * it. The text is decoded in place three times (without the template memo,
 * then twice with it, the second time finding the template there, as
 * status-only watch events are read) and, when json-c reads it as strict
 * JSON without repeated member names, through a json-c tree. Decoding must
 * give an object or an error, never crash, leak or read out of bounds; the
 * in-place decodings must agree with each other, and with the tree's
 * wherever json-c takes the text, on success and on every field kcm keeps;
 * every object must give back its pooled strings.
 */
#include <json-c/json.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/api/internal.h"
#include "../oracle/tree.h"
#include "kcm/api.h"
#include "kcm/buf.h"
#include "kcm/intern.h"
#include "kcm/json.h"
#include "kcm/labels.h"
#include "../../src/labels/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_decode.c:%d: check failed: %s\n", line, what);
  abort();
}

static bool same_str(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static void same_labels(const struct kcm_labels *a, const struct kcm_labels *b) {
  uint32_t i;
  CHECK(a->n == b->n);
  for (i = 0; i < a->n; i++) {
    CHECK(a->items[i].key == b->items[i].key); /* pooled: equal strings are one pointer */
    CHECK(a->items[i].value == b->items[i].value);
  }
}

static void same_pairs(const struct kcm_pairs *a, const struct kcm_pairs *b) {
  uint32_t i;
  CHECK(a->n == b->n);
  for (i = 0; i < a->n; i++) {
    CHECK(same_str(a->items[i].key, b->items[i].key));
    CHECK(same_str(a->items[i].value, b->items[i].value));
  }
}

static void same_conditions(const struct kcm_conditions *a, const struct kcm_conditions *b) {
  uint32_t i;
  CHECK(a->n == b->n);
  for (i = 0; i < a->n; i++) {
    CHECK(same_str(a->items[i].type, b->items[i].type));
    CHECK(same_str(a->items[i].status, b->items[i].status));
    CHECK(same_str(a->items[i].reason, b->items[i].reason));
    CHECK(same_str(a->items[i].message, b->items[i].message));
    CHECK(a->items[i].last_update == b->items[i].last_update);
    CHECK(a->items[i].last_transition == b->items[i].last_transition);
  }
}

static void same_writers(const struct kcm_writers *a, const struct kcm_writers *b) {
  uint8_t i;
  CHECK(a->n == b->n && a->more == b->more && a->n <= KCM_STATUS_WRITERS);
  for (i = 0; i < a->n; i++) {
    CHECK(a->status[i].manager == b->status[i].manager); /* pooled */
    CHECK(a->status[i].at == b->status[i].at);
  }
}

static void same_selector(const struct kcm_selector *a, const struct kcm_selector *b) {
  struct kcm_buf x = KCM_BUF_INIT(1u << 20), y = KCM_BUF_INIT(1u << 20);
  CHECK(a->nothing == b->nothing);
  CHECK(kcm_labels_selector_format(a, &x) == kcm_labels_selector_format(b, &y));
  CHECK(x.len == y.len && (!x.len || !memcmp(x.data, y.data, x.len)));
  kcm_buf_release(&x);
  kcm_buf_release(&y);
}

static void same_object(const struct kcm_object *a, const struct kcm_object *b) {
  CHECK(a->kind == b->kind);
  CHECK(a->refs == 1 && b->refs == 1);
  CHECK(same_str(a->name, b->name));
  CHECK(a->ns == b->ns);
  CHECK(!memcmp(&a->uid, &b->uid, sizeof(a->uid)));
  CHECK(a->rv == b->rv);
  CHECK(a->generation == b->generation);
  CHECK(a->created == b->created);
  CHECK(a->deleted == b->deleted);
  same_labels(&a->labels, &b->labels);
  CHECK(a->nowners == b->nowners);
  CHECK(a->has_controller == b->has_controller);
  CHECK(a->controller.api_version == b->controller.api_version);
  CHECK(a->controller.kind == b->controller.kind);
  CHECK(a->controller.name == b->controller.name);
  CHECK(!memcmp(&a->controller.uid, &b->controller.uid, sizeof(a->controller.uid)));
  CHECK(a->controller.block_owner_deletion == b->controller.block_owner_deletion);
  CHECK(kcm_api_size(a) == kcm_api_size(b));
  if (a->kind == KCM_KIND_POD) {
    const struct kcm_pod *x = (const struct kcm_pod *)a, *y = (const struct kcm_pod *)b;
    CHECK(x->node == y->node);
    CHECK(x->ready_since == y->ready_since);
    CHECK(x->restarts == y->restarts);
    CHECK(x->sidecar_restarts == y->sidecar_restarts);
    CHECK(x->deletion_cost == y->deletion_cost);
    CHECK(x->phase == y->phase);
    CHECK(x->ready == y->ready);
  } else if (a->kind == KCM_KIND_REPLICASET) {
    const struct kcm_replicaset *x = (const struct kcm_replicaset *)a;
    const struct kcm_replicaset *y = (const struct kcm_replicaset *)b;
    same_writers(&x->writers, &y->writers);
    same_pairs(&x->annotations, &y->annotations);
    same_selector(&x->selector, &y->selector);
    same_labels(&x->template_labels, &y->template_labels);
    CHECK(same_str(x->template, y->template));
    CHECK(x->template_key == y->template_key);
    CHECK(x->replicas == y->replicas);
    CHECK(x->min_ready_seconds == y->min_ready_seconds);
    CHECK(x->status.replicas == y->status.replicas);
    CHECK(x->status.fully_labeled == y->status.fully_labeled);
    CHECK(x->status.ready == y->status.ready);
    CHECK(x->status.available == y->status.available);
    CHECK(x->status.terminating == y->status.terminating);
    CHECK(x->status.observed_generation == y->status.observed_generation);
    same_conditions(&x->status.conditions, &y->status.conditions);
  } else {
    const struct kcm_deployment *x = (const struct kcm_deployment *)a;
    const struct kcm_deployment *y = (const struct kcm_deployment *)b;
    same_writers(&x->writers, &y->writers);
    same_pairs(&x->annotations, &y->annotations);
    same_selector(&x->selector, &y->selector);
    CHECK(same_str(x->selector_json, y->selector_json));
    CHECK(same_str(x->template, y->template));
    CHECK(x->template_key == y->template_key);
    CHECK(x->replicas == y->replicas);
    CHECK(x->min_ready_seconds == y->min_ready_seconds);
    CHECK(x->revision_history_limit == y->revision_history_limit);
    CHECK(x->progress_deadline == y->progress_deadline);
    CHECK(!memcmp(&x->max_surge, &y->max_surge, sizeof(x->max_surge)));
    CHECK(!memcmp(&x->max_unavailable, &y->max_unavailable, sizeof(x->max_unavailable)));
    CHECK(x->recreate == y->recreate);
    CHECK(x->paused == y->paused);
    CHECK(x->status.observed_generation == y->status.observed_generation);
    CHECK(x->status.replicas == y->status.replicas);
    CHECK(x->status.updated == y->status.updated);
    CHECK(x->status.ready == y->status.ready);
    CHECK(x->status.available == y->status.available);
    CHECK(x->status.unavailable == y->status.unavailable);
    CHECK(x->status.collision_count == y->status.collision_count);
    CHECK(x->status.terminating == y->status.terminating);
    same_conditions(&x->status.conditions, &y->status.conditions);
  }
}

/* The nesting this harness compares at: json-c's trees, and its own
 * recursion, go this deep; deeper text is decoded, not compared. */
#define COMPARED_DEPTH 64

/* Whether some object in the text repeats a member name (escaped or not):
 * json-c keeps the last, the in-place reader reads each, so such text is
 * not compared. An object of more than 64 members is not checked and
 * counts as repeating. */
static bool repeats_names(struct kcm_json *j, unsigned depth) {
  struct kcm_buf names = KCM_BUF_INIT(SIZE_MAX);
  size_t at[64], len[64], n = 0, i;
  bool repeats = false;
  enum kcm_json_type t = kcm_json_peek(j);
  if (depth > COMPARED_DEPTH)
    return false;
  if (t == KCM_JSON_OBJECT) {
    kcm_json_object(j);
    while (!repeats && kcm_json_member(j)) {
      for (i = 0; i < n; i++)
        if (len[i] == j->keylen && !memcmp(names.data + at[i], j->key, j->keylen))
          repeats = true;
      if (repeats || n == 64 || kcm_buf_append(&names, j->key, j->keylen)) {
        repeats = true;
        break;
      }
      at[n] = names.len - j->keylen;
      len[n++] = j->keylen;
      repeats = repeats_names(j, depth + 1);
    }
    kcm_buf_release(&names);
    return repeats;
  }
  if (t == KCM_JSON_ARRAY) {
    kcm_json_array(j);
    while (!repeats && kcm_json_element(j))
      repeats = repeats_names(j, depth + 1);
    return repeats;
  }
  kcm_json_skip(j);
  return false;
}

/* The text as a json-c tree when json-c reads all of it as strict JSON. */
static struct json_object *strict_tree(const char *text, size_t len) {
  struct json_tokener *tok = json_tokener_new_ex(COMPARED_DEPTH);
  struct json_object *tree;
  size_t end;
  if (!tok || len > INT32_MAX) {
    if (tok)
      json_tokener_free(tok);
    return NULL;
  }
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  tree = json_tokener_parse_ex(tok, text, (int)len);
  end = json_tokener_get_parse_end(tok);
  json_tokener_free(tok);
  while (tree && end < len &&
         (text[end] == ' ' || text[end] == '\t' || text[end] == '\n' || text[end] == '\r'))
    end++;
  if (tree && end != len) {
    json_object_put(tree);
    tree = NULL;
  }
  return tree;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct kcm_intern pool;
  static struct kcm_json reader;
  static int ready;
  struct kcm_api_memo memo = {0};
  enum kcm_kind kind;
  struct kcm_api_error err, text_err;
  struct kcm_object *plain = NULL, *first = NULL, *again = NULL, *tree_obj = NULL;
  struct json_object *tree;
  const char *text = (const char *)data + 1;
  size_t len = size ? size - 1 : 0;
  int rc_plain, rc_first, rc_again;

  if (!ready) {
    kcm_intern_init(&pool);
    kcm_json_init(&reader);
    ready = 1;
  }
  if (!size)
    return 0;
  kind = (enum kcm_kind)(data[0] % KCM_KIND_COUNT);

  rc_plain = kcm_api_decode_text(kind, text, len, NULL, NULL, &pool, &plain, &text_err);
  CHECK(rc_plain ? !plain && text_err.field[0] && text_err.problem[0]
                 : plain && plain->kind == kind);
  rc_first = kcm_api_decode_text(kind, text, len, &reader, &memo, &pool, &first, &err);
  rc_again = kcm_api_decode_text(kind, text, len, &reader, &memo, &pool, &again, &err);
  CHECK(rc_first == rc_plain && rc_again == rc_plain);
  if (!rc_plain) {
    same_object(plain, first);
    same_object(plain, again);
  }

  kcm_json_start(&reader, text, len);
  if (!repeats_names(&reader, 0) && !reader.err && (tree = strict_tree(text, len))) {
    int rc_tree = kcm_api_decode(kind, tree, &pool, &tree_obj, &err);
    CHECK(rc_tree ? !tree_obj && err.field[0] && err.problem[0] : tree_obj != NULL);
    if (rc_tree != rc_plain)
      fprintf(stderr, "tree: %d (%s: %s), text: %d (%s: %s)\n", rc_tree, rc_tree ? err.field : "",
              rc_tree ? err.problem : "", rc_plain, text_err.field, text_err.problem);
    CHECK(rc_tree == rc_plain);
    if (!rc_tree)
      same_object(plain, tree_obj);
    kcm_api_unref(tree_obj, &pool);
    json_object_put(tree);
  }

  kcm_api_unref(plain, &pool);
  kcm_api_unref(first, &pool);
  kcm_api_unref(again, &pool);
  kcm_api_memo_release(&memo);
  CHECK(kcm_intern_count(&pool) == 0); /* every pooled string was given back */
  return 0;
}
