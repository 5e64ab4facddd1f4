/*
 * Tests for a controller's service-account token against the local API
 * server: the first token and the account it names, an account made when
 * missing, renewal before expiry and after a 401, and a token source
 * stopped cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/satoken.h"
#include "support.h"
#include "../../src/satoken/internal.h"

static void refresh_after_four_fifths(void **state) {
  assert_int_equal(kcm_satoken_refresh_ms(3600), 2880000);
  assert_int_equal(kcm_satoken_refresh_ms(10), 8000);
  assert_int_equal(kcm_satoken_refresh_ms(1), 1000); /* never sooner than a second */
  assert_int_equal(kcm_satoken_refresh_ms(-5), 1000);
}

struct fixture {
  uv_loop_t loop;
  struct kcm_client_config cfg;
  struct kcm_client *client;
  struct kcm_satoken t;
  char ns[64];
  int ready, closed;
};

static void on_ready(struct kcm_satoken *t) { ((struct fixture *)t->data)->ready++; }
static void on_closed(struct kcm_satoken *t) { ((struct fixture *)t->data)->closed++; }

static bool has_ready(void *arg) { return ((struct fixture *)arg)->ready > 0; }
static bool renewed(void *arg) { return ((struct fixture *)arg)->t.stats.issued >= 2; }

static void start(struct fixture *f, const char *account, int32_t seconds) {
  memset(f, 0, sizeof(*f));
  support_connect(&f->loop, &f->cfg, &f->client, "sat", f->ns, sizeof(f->ns));
  assert_int_equal(kcm_satoken_init(&f->t, &f->loop, f->client, 0, "kube-system", account), 0);
  f->t.data = f;
  f->t.seconds = seconds;
  kcm_satoken_start(&f->t, on_ready);
  assert_true(support_run_until(&f->loop, has_ready, f, 10000));
  assert_non_null(f->t.bearer.token);
}

static void stop(struct fixture *f) {
  kcm_satoken_stop(&f->t, on_closed);
  kcm_client_close(f->client);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(f->closed, 1);
  kcm_satoken_release(&f->t);
  assert_null(f->t.bearer.token);
  uv_loop_close(&f->loop);
  kcm_client_config_release(&f->cfg);
}

/* The token authenticates as the account: the API server's TokenReview
 * says so. */
static void the_token_is_the_accounts(void **state) {
  struct fixture f;
  struct support_result r = {0};
  char body[4096];
  start(&f, "replicaset-controller", 3600);
  snprintf(body, sizeof(body),
           "{\"apiVersion\":\"authentication.k8s.io/v1\",\"kind\":\"TokenReview\","
           "\"spec\":{\"token\":\"%s\"}}",
           f.t.bearer.token);
  support_request(&f.loop, f.client, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body,
                  &r);
  assert_int_equal(r.err, 0);
  assert_non_null(strstr(r.body, "\"authenticated\":true"));
  assert_non_null(strstr(r.body, "system:serviceaccount:kube-system:replicaset-controller"));
  support_result_free(&r);
  assert_int_equal(f.t.stats.issued, 1);
  assert_int_equal(f.t.stats.accounts_made, 0); /* it existed */
  stop(&f);
}

/* A missing account is made, then its token asked for again. */
static void a_missing_account_is_made(void **state) {
  struct fixture f;
  struct support_result r = {0};
  start(&f, "kcm-test-controller", 3600);
  assert_int_equal(f.t.stats.accounts_made, 1);
  support_request(&f.loop, f.client, "GET",
                  "/api/v1/namespaces/kube-system/serviceaccounts/kcm-test-controller", NULL, &r);
  assert_int_equal(r.err, 0);
  support_result_free(&r);
  stop(&f);
}

/* A token is replaced after 80% of its life, before it expires. */
static void a_token_is_renewed_before_it_expires(void **state) {
  struct fixture f;
  char *first;
  start(&f, "deployment-controller", 2);
  first = strdup(f.t.bearer.token);
  assert_true(support_run_until(&f.loop, renewed, &f, 10000));
  assert_string_not_equal(first, f.t.bearer.token);
  free(first);
  stop(&f);
}

static void on_answer(const struct kcm_client_response *resp, void *data) {
  struct support_result *r = data;
  r->status = resp->status;
  r->done = true;
}

/* The status of a GET of path sent with the token source's token. */
static long as_account(struct fixture *f, const char *path) {
  struct kcm_client_request_options o = {0};
  struct support_result r = {0};
  o.method = "GET";
  o.path = path;
  o.done = on_answer;
  o.data = &r;
  o.bearer = &f->t.bearer;
  assert_int_equal(kcm_client_request(f->client, &o, NULL), 0);
  support_wait(&f->loop, &r.done);
  return r.status;
}

/* A token the API server stops accepting (its account deleted) is
 * replaced at the first 401, long before its renewal was due; the account
 * is made again. */
static void a_refused_token_is_replaced_at_once(void **state) {
  static const char account[] = "/api/v1/namespaces/kube-system/serviceaccounts/kcm-test-refused";
  struct fixture f;
  struct support_result r = {0};
  start(&f, "kcm-test-refused", 3600);
  assert_int_equal(as_account(&f, account), 403); /* known, not allowed */
  support_request(&f.loop, f.client, "DELETE", account, NULL, &r);
  assert_int_equal(r.err, 0);
  support_result_free(&r);
  assert_int_equal(as_account(&f, account), 401);
  assert_true(support_run_until(&f.loop, renewed, &f, 10000));
  assert_int_equal(f.t.stats.refused, 1);
  assert_int_equal(f.t.stats.accounts_made, 2);
  assert_int_equal(as_account(&f, account), 403);
  stop(&f);
}

static int start_sim(void **state) {
  static const char *const args[] = {"--min-token-seconds", "1", NULL};
  return support_start_sim(args);
}

static int stop_sim(void **state) {
  support_stop_sim();
  return 0;
}

int main(void) {
  const struct CMUnitTest pure[] = {cmocka_unit_test(refresh_after_four_fifths)};
  const struct CMUnitTest live[] = {
      cmocka_unit_test(the_token_is_the_accounts),
      cmocka_unit_test(a_missing_account_is_made),
      cmocka_unit_test(a_token_is_renewed_before_it_expires),
      cmocka_unit_test(a_refused_token_is_replaced_at_once),
  };
  return cmocka_run_group_tests(pure, NULL, NULL) || cmocka_run_group_tests(live, start_sim,
                                                                            stop_sim);
}
