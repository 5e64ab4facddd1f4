/*
 * Tests for a controller's service-account token against the local API
 * server: the first token and the account it names, an account made when
 * missing, renewal before expiry, and a token source stopped cleanly.
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
  assert_non_null(f->t.token);
}

static void stop(struct fixture *f) {
  kcm_satoken_stop(&f->t, on_closed);
  kcm_client_close(f->client);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(f->closed, 1);
  kcm_satoken_release(&f->t);
  assert_null(f->t.token);
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
           f.t.token);
  support_request(&f.loop, f.client, "POST", "/apis/authentication.k8s.io/v1/tokenreviews", body,
                  &r);
  assert_int_equal(r.err, 0);
  assert_non_null(strstr(r.body, "\"authenticated\":true"));
  assert_non_null(strstr(r.body, "system:serviceaccount:kube-system:replicaset-controller"));
  support_result_free(&r);
  assert_int_equal(f.t.stats.issued, 1);
  assert_false(f.t.made_account); /* it existed */
  stop(&f);
}

/* A missing account is made, then its token asked for again. */
static void a_missing_account_is_made(void **state) {
  struct fixture f;
  struct support_result r = {0};
  start(&f, "kcm-test-controller", 3600);
  assert_true(f.t.made_account);
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
  first = strdup(f.t.token);
  assert_true(support_run_until(&f.loop, renewed, &f, 10000));
  assert_string_not_equal(first, f.t.token);
  free(first);
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
  };
  return cmocka_run_group_tests(pure, NULL, NULL) || cmocka_run_group_tests(live, start_sim,
                                                                            stop_sim);
}
