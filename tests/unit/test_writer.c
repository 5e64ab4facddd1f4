/*
 * Tests for a merge patch spliced into an object's text (a status write
 * sent as an update): the result equals the patch applied to the whole
 * object; a stale resourceVersion is a conflict; other patches are left to
 * the whole-object path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <string.h>

#include "../../src/writer/internal.h"
#include "kcm/error.h"

static const char object[] =
    "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"web\","
    "\"resourceVersion\":\"7\",\"annotations\":{\"deployment.kubernetes.io/revision\":\"1\","
    "\"team\":\"blue\",\"a\\\"b\":\"q\"}},\"spec\":{\"replicas\":3},"
    "\"status\":{\"replicas\":2,\"conditions\":[{\"type\":\"Old\"}]}}";

/* RFC 7386 on a json-c tree, as a reference. */
static struct json_object *merged(struct json_object *target, struct json_object *patch) {
  if (!json_object_is_type(patch, json_type_object))
    return json_object_get(patch);
  if (!json_object_is_type(target, json_type_object))
    target = NULL;
  {
    struct json_object *out = target ? json_object_get(target) : json_object_new_object();
    struct json_object *copy = NULL;
    json_object_deep_copy(out, &copy, NULL);
    json_object_put(out);
    json_object_object_foreach(patch, key, value) {
      struct json_object *old = NULL;
      if (!value) {
        json_object_object_del(copy, key);
        continue;
      }
      json_object_object_get_ex(copy, key, &old);
      json_object_object_add(copy, key, merged(old, value));
    }
    return copy;
  }
}

/* text parsed as RFC 8259 JSON (json-c's default parser takes trailing
 * commas and more); NULL if it is not. A name given twice keeps its last
 * value, as Go's encoding/json does. */
static struct json_object *strict(const char *text) {
  struct json_tokener *tok = json_tokener_new();
  struct json_object *o;
  json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
  o = json_tokener_parse_ex(tok, text, (int)strlen(text) + 1);
  if (json_tokener_get_error(tok) != json_tokener_success) {
    json_object_put(o);
    o = NULL;
  }
  json_tokener_free(tok);
  return o;
}

/* The splice of patch_text into text equals the merge patch applied to the
 * whole object, in JSON a strict parser reads; with whole_ok it may leave
 * the patch to the whole-object path instead. */
static void splices_as_merge_or(const char *text, const char *patch_text, bool whole_ok) {
  struct json_object *patch = json_tokener_parse(patch_text), *doc = strict(text);
  struct json_object *want, *got;
  struct kcm_buf out = KCM_BUF_INIT(1u << 20);
  int rc;
  assert_non_null(patch);
  assert_non_null(doc);
  rc = kcm_writer_splice_merge(text, strlen(text), patch, &out);
  if (rc == KCM_WRITER_WHOLE && whole_ok) {
    json_object_put(doc);
    json_object_put(patch);
    kcm_buf_release(&out);
    return;
  }
  if (rc)
    fail_msg("patch %s into %s: %d", patch_text, text, rc);
  assert_true(kcm_buf_append(&out, "", 1) == 0);
  got = strict(out.data);
  if (!got)
    fail_msg("not JSON: %s", out.data);
  want = merged(doc, patch);
  if (!json_object_equal(want, got))
    fail_msg("patch %s gave %s", patch_text, out.data);
  json_object_put(want);
  json_object_put(got);
  json_object_put(doc);
  json_object_put(patch);
  kcm_buf_release(&out);
}

static void splices_as_merge(const char *text, const char *patch_text) {
  splices_as_merge_or(text, patch_text, false);
}

/* Status replaced, annotations set, replaced and removed, the rest kept. */
static void status_and_annotations(void **state) {
  splices_as_merge(object, "{\"metadata\":{\"resourceVersion\":\"7\"},"
                           "\"status\":{\"replicas\":3,\"conditions\":null}}");
  splices_as_merge(object, "{\"metadata\":{\"resourceVersion\":\"7\",\"annotations\":{"
                           "\"deployment.kubernetes.io/revision\":\"2\",\"new\":\"x\\ny\","
                           "\"team\":null,\"a\\\"b\":\"r\",\"absent\":null}},"
                           "\"status\":{\"observedGeneration\":4}}");
  /* no status yet; an empty object; a null status */
  splices_as_merge("{\"metadata\":{\"resourceVersion\":\"7\",\"annotations\":{}}}",
                   "{\"metadata\":{\"annotations\":{\"k\":\"v\"}},\"status\":{\"replicas\":1}}");
  splices_as_merge("{}", "{\"status\":{\"replicas\":1}}");
  splices_as_merge("{\"status\":null, \"x\" : 1 }", "{\"status\":{\"replicas\":1}}");
}

/* Adding and removing together, whitespace before a comma, and names given
 * twice (the last one counts) keep the result the merge, in valid JSON. */
static void edits_together_stay_valid(void **state) {
  splices_as_merge("{\"metadata\":{\"annotations\":{\"a\":\"1\"}}}",
                   "{\"metadata\":{\"annotations\":{\"b\":\"2\",\"a\":null}}}");
  splices_as_merge("{\"metadata\":{\"annotations\":{\"a\":\"1\" ,\"b\":\"2\"}}}",
                   "{\"metadata\":{\"annotations\":{\"a\":null}}}");
  splices_as_merge("{\"metadata\":{\"annotations\":{ \"a\":\"1\" , \"b\":\"2\" }}}",
                   "{\"metadata\":{\"annotations\":{\"b\":null,\"a\":null,\"c\":\"3\"}}}");
  splices_as_merge("{\"metadata\":{\"annotations\":{\"a\":\"1\",\"b\":\"2\"}}}",
                   "{\"metadata\":{\"annotations\":{\"a\":null,\"b\":null}}}");
  splices_as_merge_or("{\"metadata\":{\"annotations\":{\"a\":\"1\",\"a\":\"2\"}}}",
                      "{\"metadata\":{\"annotations\":{\"a\":\"3\"}}}", true);
  splices_as_merge_or("{\"metadata\":{\"annotations\":{\"a\":\"1\",\"a\":\"2\"}}}",
                      "{\"metadata\":{\"annotations\":{\"a\":null}}}", true);
  splices_as_merge_or("{\"status\":{\"replicas\":1},\"status\":{\"replicas\":2}}",
                      "{\"status\":{\"readyReplicas\":3}}", true);
  splices_as_merge_or("{\"metadata\":{\"resourceVersion\":\"6\",\"resourceVersion\":\"7\"}}",
                      "{\"metadata\":{\"resourceVersion\":\"7\"},\"status\":{}}", true);
  splices_as_merge_or("{\"metadata\":{\"annotations\":{\"a\":\"1\"}},"
                      "\"metadata\":{\"annotations\":{\"b\":\"1\"}}}",
                      "{\"metadata\":{\"annotations\":{\"b\":\"2\"}}}", true);
  /* no object, or no metadata, to splice into */
  splices_as_merge_or("\"\"", "{}", true);
  splices_as_merge_or("{\"a\":1}", "{\"metadata\":{}}", true);
}

/* A resourceVersion other than the object's is a conflict; what it cannot
 * splice is left to the whole-object path. */
static void conflicts_and_the_rest(void **state) {
  static const char *const whole[] = {
      "{\"spec\":{\"replicas\":1}}",
      "{\"metadata\":{\"labels\":{\"a\":\"b\"}}}",
      "{\"metadata\":{\"annotations\":{\"a\":1}}}",
      "{\"metadata\":{\"resourceVersion\":7}}",
      "[]",
  };
  struct json_object *patch = json_tokener_parse("{\"metadata\":{\"resourceVersion\":\"8\"},"
                                                 "\"status\":{\"replicas\":3}}");
  struct kcm_buf out = KCM_BUF_INIT(1u << 20);
  size_t i;
  assert_int_equal(kcm_writer_splice_merge(object, strlen(object), patch, &out), KCM_ECONFLICT);
  json_object_put(patch);
  for (i = 0; i < sizeof(whole) / sizeof(whole[0]); i++) {
    patch = json_tokener_parse(whole[i]);
    kcm_buf_reset(&out);
    if (kcm_writer_splice_merge(object, strlen(object), patch, &out) != KCM_WRITER_WHOLE)
      fail_msg("patch %s was spliced", whole[i]);
    json_object_put(patch);
  }
  /* broken text: left whole (where the JSON parser will say why) */
  patch = json_tokener_parse("{\"status\":{\"replicas\":3}}");
  kcm_buf_reset(&out);
  assert_int_equal(kcm_writer_splice_merge("{\"status\":", 10, patch, &out), KCM_WRITER_WHOLE);
  json_object_put(patch);
  kcm_buf_release(&out);
}

static long dry_status;

static void on_dry_answer(const struct kcm_client_response *resp, void *data) {
  (*(int *)data)++;
  dry_status = resp->status;
  assert_int_equal(resp->err, 0);
  assert_string_equal(resp->body, "{}");
}

/* --shadow's writer answers a write itself, later on the loop, and sends
 * nothing (it has no client to send with here). */
static void dry_writer_answers_without_sending(void **state) {
  uv_loop_t loop;
  struct kcm_writer w;
  struct kcm_write req;
  int answers = 0;
  uv_loop_init(&loop);
  kcm_writer_init_dry(&w, NULL, 0, &loop);
  assert_int_equal(kcm_writer_patch(&req, KCM_KIND_REPLICASET, "ns", "web", "status",
                                    KCM_PATCH_MERGE, "{}"),
                   0);
  assert_int_equal(kcm_writer_send(&w, &req, on_dry_answer, &answers), 0);
  assert_int_equal(kcm_writer_delete(&req, KCM_KIND_POD, "ns", "web-1", NULL), 0);
  assert_int_equal(kcm_writer_send(&w, &req, on_dry_answer, &answers), 0);
  assert_int_equal(answers, 0); /* not from within the send */
  uv_run(&loop, UV_RUN_DEFAULT);
  assert_int_equal(answers, 2);
  assert_int_equal(dry_status, 200);
  assert_int_equal(w.withheld, 2);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(status_and_annotations),
      cmocka_unit_test(edits_together_stay_valid),
      cmocka_unit_test(conflicts_and_the_rest),
      cmocka_unit_test(dry_writer_answers_without_sending),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
