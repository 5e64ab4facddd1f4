/*
 * Tests for delegated authentication and authorization against the local
 * API server, which answers TokenReviews from its tokens and
 * SubjectAccessReviews through its RBAC: the always-allowed paths,
 * anonymous and refused credentials, the caches of both reviews and their
 * times, reviews in flight shared, failed reviews, client certificates,
 * system:masters, the refusal bodies and the caches' cap.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/auth.h"
#include "kcm/error.h"
#include "support.h"

#define READER "reader-token"   /* metrics-reader: may get /metrics */
#define NOBODY "nobody-token"   /* nobody: no RBAC of its own */
#define FORBIDDEN_ANONYMOUS "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""

/* What a check's callback saw. */
struct seen {
  int calls;
  int status;
  char user[128];
  char message[512];
  uint64_t at; /* the loop's time when it ran */
  uv_loop_t *loop;
};

struct fixture {
  uv_loop_t loop;
  struct kcm_client_config cfg;
  struct kcm_client *client;
  struct kcm_auth auth;
  char ns[64];
};

static void on_decision(void *data, const struct kcm_auth_decision *d) {
  struct seen *s = data;
  s->calls++;
  s->status = d->status;
  snprintf(s->user, sizeof(s->user), "%s", d->user);
  snprintf(s->message, sizeof(s->message), "%s", d->message);
  s->at = uv_now(s->loop);
}

/* A ClusterRole that reads /metrics and /allowed/..., bound to
 * metrics-reader and to the certificate user cert-reader; made once per
 * server. */
static void grant_metrics(struct fixture *f) {
  static bool made;
  struct support_result r = {0};
  const char *role =
      "{\"metadata\":{\"name\":\"metrics-reader\"},\"rules\":[{\"nonResourceURLs\":"
      "[\"/metrics\",\"/allowed/*\"],\"verbs\":[\"get\"]}]}";
  const char *binding =
      "{\"metadata\":{\"name\":\"metrics-reader\"},\"roleRef\":{\"apiGroup\":"
      "\"rbac.authorization.k8s.io\",\"kind\":\"ClusterRole\",\"name\":\"metrics-reader\"},"
      "\"subjects\":[{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"User\",\"name\":"
      "\"metrics-reader\"},{\"apiGroup\":\"rbac.authorization.k8s.io\",\"kind\":\"User\","
      "\"name\":\"cert-reader\"}]}";
  if (made)
    return;
  support_request(&f->loop, f->client, "POST", "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                  role, &r);
  assert_int_equal(r.err, 0);
  support_request(&f->loop, f->client, "POST",
                  "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding, &r);
  assert_int_equal(r.err, 0);
  support_result_free(&r);
  made = true;
}

/* kube-controller-manager's cache times. */
static struct kcm_auth_options ten_seconds(void) {
  struct kcm_auth_options o = {0};
  o.token_ttl_ms = o.allow_ttl_ms = o.deny_ttl_ms = 10000;
  return o;
}

/* A fixture whose reviews go to the local API server through its admin
 * client, unthrottled; o's clients are filled in. */
static void fixture_init(struct fixture *f, struct kcm_auth_options o) {
  memset(f, 0, sizeof(*f));
  support_connect(&f->loop, &f->cfg, &f->client, "auth", f->ns, sizeof(f->ns));
  kcm_client_set_rate_limit(f->client, 0, 0);
  grant_metrics(f);
  o.authn = f->client;
  o.authz = f->client;
  assert_int_equal(kcm_auth_init(&f->auth, &f->loop, &o), 0);
}

static void fixture_close(struct fixture *f) {
  support_faults(&f->loop, f->client, "{\"clear\":true}");
  kcm_client_close(f->client);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  kcm_auth_release(&f->auth);
  uv_loop_close(&f->loop);
  kcm_client_config_release(&f->cfg);
}

static bool called(void *arg) { return ((struct seen *)arg)->calls > 0; }

/* Check a request and wait for the decision. */
static struct seen check_with(struct fixture *f, const char *path, const char *authorization,
                              const struct kcm_tls_peer *cert) {
  struct kcm_auth_request r = {"GET", path, authorization, cert};
  struct seen s = {0};
  s.loop = &f->loop;
  assert_int_equal(kcm_auth_check(&f->auth, &r, on_decision, &s), 0);
  assert_true(support_run_until(&f->loop, called, &s, 10000));
  assert_int_equal(s.calls, 1);
  return s;
}

static struct seen check(struct fixture *f, const char *path, const char *authorization) {
  return check_with(f, path, authorization, NULL);
}

/* The server's admin token: kcm-admin, in system:masters. */
static const char *admin_token(void) {
  static char token[256];
  FILE *fp = fopen(support_sim_file("token"), "r");
  assert_non_null(fp);
  assert_non_null(fgets(token, sizeof(token), fp));
  fclose(fp);
  token[strcspn(token, "\r\n")] = '\0';
  return token;
}

static uint64_t deadline;
static bool past_deadline(void *arg) { return uv_now(arg) >= deadline; }

/* Run the loop until its clock reaches t: a cache time passing. */
static void run_until_time(struct fixture *f, uint64_t t) {
  deadline = t;
  assert_true(support_run_until(&f->loop, past_deadline, &f->loop, t - uv_now(&f->loop) + 5000));
}

#define assert_reviews(f, tokens, accesses)                                                    \
  do {                                                                                         \
    assert_int_equal((f)->auth.stats.token_reviews, (tokens));                                 \
    assert_int_equal((f)->auth.stats.access_reviews, (accesses));                              \
  } while (0)

static void always_allowed_paths_need_no_review(void **state) {
  struct kcm_auth_options o = ten_seconds();
  struct fixture f;
  struct seen s;
  o.always_allow_paths = "/healthz,/debug/*,/exact";
  fixture_init(&f, o);

  s = check(&f, "/healthz", NULL);
  assert_int_equal(s.status, 200);
  assert_string_equal(s.user, "system:anonymous");
  assert_string_equal(s.message, "");
  /* A '*' entry is a prefix; others match whole. */
  assert_int_equal(check(&f, "/debug/pprof/heap", NULL).status, 200);
  assert_int_equal(check(&f, "/debug/", NULL).status, 200);
  assert_int_equal(check(&f, "/exact", NULL).status, 200);
  assert_reviews(&f, 0, 0);

  /* Not in the list: asked of the API server, which gives anonymous nothing. */
  s = check(&f, "/exact/more", NULL);
  assert_int_equal(s.status, 403);
  assert_reviews(&f, 0, 1);
  s = check(&f, "/metrics", NULL);
  assert_int_equal(s.status, 403);
  assert_string_equal(s.user, "system:anonymous");
  assert_string_equal(s.message, FORBIDDEN_ANONYMOUS);
  assert_reviews(&f, 0, 2);
  /* Nor is /debug without the slash the '*' entry asks for, nor /healthz/x. */
  assert_int_equal(check(&f, "/debug", NULL).status, 403);
  assert_int_equal(check(&f, "/healthz/x", NULL).status, 403);
  assert_reviews(&f, 0, 4);
  fixture_close(&f);
}

static void default_paths_are_the_health_checks(void **state) {
  struct kcm_auth_options o = ten_seconds();
  struct fixture f;
  fixture_init(&f, o);
  assert_int_equal(check(&f, "/healthz", NULL).status, 200);
  assert_int_equal(check(&f, "/readyz", NULL).status, 200);
  assert_int_equal(check(&f, "/livez", NULL).status, 200);
  assert_reviews(&f, 0, 0);
  assert_int_equal(check(&f, "/metrics", NULL).status, 403);
  assert_reviews(&f, 0, 1);
  fixture_close(&f);
}

static void a_bogus_token_is_refused_and_cached_for_the_token_ttl(void **state) {
  struct kcm_auth_options o = ten_seconds();
  struct fixture f;
  struct seen s;
  o.token_ttl_ms = 200;
  fixture_init(&f, o);

  s = check(&f, "/metrics", "Bearer bogus");
  assert_int_equal(s.status, 401);
  assert_string_equal(s.user, "");
  assert_string_equal(s.message, "Unauthorized");
  assert_reviews(&f, 1, 0);
  /* Refused everywhere: a refused credential is not anonymous. */
  assert_int_equal(check(&f, "/healthz", "Bearer bogus").status, 401);
  assert_int_equal(check(&f, "/metrics", "bearer bogus").status, 401);
  assert_reviews(&f, 1, 0);
  assert_int_equal(f.auth.stats.cache_hits, 2);
  assert_int_equal(f.auth.tokens.len, 1);

  /* Once the time has passed the token is asked about again. */
  run_until_time(&f, s.at + 200);
  assert_int_equal(check(&f, "/metrics", "Bearer bogus").status, 401);
  assert_reviews(&f, 2, 0);
  fixture_close(&f);
}

static void headers_without_a_bearer_token_are_anonymous(void **state) {
  struct kcm_auth_options o = ten_seconds();
  struct fixture f;
  fixture_init(&f, o);
  assert_string_equal(check(&f, "/healthz", "Basic dXNlcjpwdw==").user, "system:anonymous");
  assert_string_equal(check(&f, "/healthz", "Bearer").user, "system:anonymous");
  assert_string_equal(check(&f, "/healthz", "Bearer ").user, "system:anonymous");
  assert_reviews(&f, 0, 0);
  /* The token ends at a space, as upstream splits the header. */
  assert_int_equal(check(&f, "/metrics", "Bearer " READER " trailing").status, 200);
  assert_reviews(&f, 1, 1);
  fixture_close(&f);
}

/* Allowed and denied answers are kept for their own times. */
static void review_caches(bool short_allow) {
  struct kcm_auth_options o = ten_seconds();
  struct fixture f;
  struct seen yes, no;
  if (short_allow)
    o.allow_ttl_ms = 200;
  else
    o.deny_ttl_ms = 200;
  o.token_ttl_ms = 60000;
  fixture_init(&f, o);

  yes = check(&f, "/metrics", "Bearer " READER);
  assert_int_equal(yes.status, 200);
  assert_string_equal(yes.user, "metrics-reader");
  assert_string_equal(yes.message, "");
  assert_reviews(&f, 1, 1);
  no = check(&f, "/metrics", "Bearer " NOBODY);
  assert_int_equal(no.status, 403);
  assert_string_equal(no.user, "nobody");
  assert_string_equal(no.message, "forbidden: User \"nobody\" cannot get path \"/metrics\"");
  assert_reviews(&f, 2, 2);
  /* Both from the caches now. */
  assert_int_equal(check(&f, "/metrics", "Bearer " READER).status, 200);
  assert_int_equal(check(&f, "/metrics", "Bearer " NOBODY).status, 403);
  assert_reviews(&f, 2, 2);
  assert_int_equal(f.auth.stats.cache_hits, 4);
  /* Another verb is another question. */
  {
    struct kcm_auth_request r = {"POST", "/metrics", "Bearer " READER, NULL};
    struct seen s = {0};
    s.loop = &f.loop;
    assert_int_equal(kcm_auth_check(&f.auth, &r, on_decision, &s), 0);
    assert_true(support_run_until(&f.loop, called, &s, 10000));
    assert_int_equal(s.status, 403);
    assert_string_equal(s.message,
                        "forbidden: User \"metrics-reader\" cannot post path \"/metrics\"");
  }
  assert_reviews(&f, 2, 3);

  /* After the short time only the answer it applies to is asked again. */
  run_until_time(&f, (yes.at > no.at ? yes.at : no.at) + 200);
  assert_int_equal(check(&f, "/metrics", "Bearer " READER).status, 200);
  assert_int_equal(check(&f, "/metrics", "Bearer " NOBODY).status, 403);
  assert_reviews(&f, 2, 4);
  fixture_close(&f);
}

static void allowed_answers_are_kept_for_the_allow_ttl(void **state) { review_caches(true); }
static void denied_answers_are_kept_for_the_deny_ttl(void **state) { review_caches(false); }

/* As upstream's caches, a time of 0 keeps no answer. */
static void a_zero_ttl_keeps_nothing(void **state) {
  struct kcm_auth_options o = {0};
  struct fixture f;
  fixture_init(&f, o);
  assert_int_equal(check(&f, "/metrics", "Bearer " READER).status, 200);
  assert_int_equal(check(&f, "/metrics", "Bearer " READER).status, 200);
  assert_reviews(&f, 2, 2);
  assert_int_equal(check(&f, "/metrics", "Bearer bogus").status, 401);
  assert_int_equal(check(&f, "/metrics", "Bearer bogus").status, 401);
  assert_reviews(&f, 4, 2);
  assert_int_equal(check(&f, "/metrics", "Bearer " NOBODY).status, 403);
  assert_int_equal(check(&f, "/metrics", "Bearer " NOBODY).status, 403);
  assert_reviews(&f, 6, 4);
  assert_int_equal(f.auth.stats.cache_hits, 0);
  assert_int_equal(f.auth.tokens.len, 0);
  assert_int_equal(f.auth.reviews.len, 0);
  /* Checks in flight together still share their reviews. */
  {
    struct kcm_auth_request r = {"GET", "/metrics", "Bearer " READER, NULL};
    struct seen s[3] = {{0}};
    int i;
    for (i = 0; i < 3; i++) {
      s[i].loop = &f.loop;
      assert_int_equal(kcm_auth_check(&f.auth, &r, on_decision, &s[i]), 0);
    }
    for (i = 0; i < 3; i++) {
      assert_true(support_run_until(&f.loop, called, &s[i], 10000));
      assert_int_equal(s[i].status, 200);
    }
  }
  assert_reviews(&f, 7, 5);
  assert_int_equal(f.auth.tokens.len, 0);
  assert_int_equal(f.auth.reviews.len, 0);
  fixture_close(&f);
}

#define SHARED 8

static void checks_in_flight_share_their_reviews(void **state) {
  struct kcm_auth_options o = ten_seconds();
  struct kcm_auth_request r = {"GET", "/metrics", "Bearer " READER, NULL};
  struct fixture f;
  struct seen s[SHARED];
  int i;
  fixture_init(&f, o);
  memset(s, 0, sizeof(s));
  for (i = 0; i < SHARED; i++) {
    s[i].loop = &f.loop;
    assert_int_equal(kcm_auth_check(&f.auth, &r, on_decision, &s[i]), 0);
    assert_int_equal(s[i].calls, 0); /* nothing known yet */
  }
  assert_reviews(&f, 1, 0);
  assert_true(support_run_until(&f.loop, called, &s[0], 10000));
  for (i = 0; i < SHARED; i++) {
    assert_true(support_run_until(&f.loop, called, &s[i], 10000));
    assert_int_equal(s[i].calls, 1);
    assert_int_equal(s[i].status, 200);
    assert_string_equal(s[i].user, "metrics-reader");
  }
  assert_reviews(&f, 1, 1);
  assert_int_equal(f.auth.stats.cache_hits, 0);

  /* A refused token shared the same way: one review, every check a 401. */
  r.authorization = "Bearer another-bogus";
  memset(s, 0, sizeof(s));
  for (i = 0; i < SHARED; i++) {
    s[i].loop = &f.loop;
    assert_int_equal(kcm_auth_check(&f.auth, &r, on_decision, &s[i]), 0);
  }
  for (i = 0; i < SHARED; i++) {
    assert_true(support_run_until(&f.loop, called, &s[i], 10000));
    assert_int_equal(s[i].calls, 1);
    assert_int_equal(s[i].status, 401);
  }
  assert_reviews(&f, 2, 1);
  fixture_close(&f);
}

static void failed_token_reviews_are_refusals_not_kept(void **state) {
  struct kcm_auth_options o = ten_seconds();
  struct fixture f;
  struct seen s;
  fixture_init(&f, o);
  support_faults(&f.loop, f.client,
                 "{\"rules\":[{\"resource\":\"tokenreviews\",\"verb\":\"create\",\"code\":500}]}");
  s = check(&f, "/metrics", "Bearer " READER);
  assert_int_equal(s.status, 401);
  assert_string_equal(s.message, "Unauthorized");
  assert_reviews(&f, 1, 0);
  assert_int_equal(f.auth.tokens.len, 0);
  /* Not anonymous either, even where anonymous may go. */
  assert_int_equal(check(&f, "/healthz", "Bearer " READER).status, 401);
  assert_reviews(&f, 2, 0);

  /* The server answers again: so is the token. */
  support_faults(&f.loop, f.client, "{\"clear\":true}");
  assert_int_equal(check(&f, "/metrics", "Bearer " READER).status, 200);
  assert_reviews(&f, 3, 1);
  fixture_close(&f);
}

static void failed_access_reviews_are_errors_not_kept(void **state) {
  static const char prefix[] = "Internal Server Error: \"/metrics\": ";
  struct kcm_auth_options o = ten_seconds();
  struct fixture f;
  struct seen s;
  fixture_init(&f, o);
  support_faults(&f.loop, f.client,
                 "{\"rules\":[{\"resource\":\"subjectaccessreviews\",\"verb\":\"create\","
                 "\"code\":500}]}");
  s = check(&f, "/metrics", "Bearer " READER);
  assert_int_equal(s.status, 500);
  assert_string_equal(s.user, "metrics-reader");
  assert_memory_equal(s.message, prefix, sizeof(prefix) - 1);
  assert_non_null(strstr(s.message, "SubjectAccessReview"));
  assert_reviews(&f, 1, 1);
  assert_int_equal(f.auth.reviews.len, 0);
  /* Anonymous too: the review could not be made. */
  s = check(&f, "/metrics", NULL);
  assert_int_equal(s.status, 500);
  assert_string_equal(s.user, "system:anonymous");
  assert_reviews(&f, 1, 2);
  assert_int_equal(check(&f, "/metrics", "Bearer " READER).status, 500);
  assert_reviews(&f, 1, 3); /* the token's answer kept, the failure not */

  support_faults(&f.loop, f.client, "{\"clear\":true}");
  assert_int_equal(check(&f, "/metrics", "Bearer " READER).status, 200);
  assert_int_equal(check(&f, "/metrics", NULL).status, 403);
  assert_reviews(&f, 1, 5);
  /* An answer that is not a SubjectAccessReview is a failure as well. */
  support_faults(&f.loop, f.client,
                 "{\"rules\":[{\"resource\":\"subjectaccessreviews\",\"verb\":\"create\","
                 "\"body\":\"<html>\",\"code\":200}]}");
  s = check(&f, "/metrics", "Bearer " NOBODY);
  assert_int_equal(s.status, 500);
  assert_memory_equal(s.message, prefix, sizeof(prefix) - 1);
  fixture_close(&f);
}

static void certificates_and_masters(void **state) {
  static char readers[] = "readers", masters[] = "system:masters", reader[] = "cert-reader",
              root[] = "cert-root", someone[] = "cert-other", none[] = "",
              expired[] = "certificate has expired";
  char *reader_groups[] = {readers, NULL}, *master_groups[] = {masters, NULL};
  struct kcm_tls_peer verified = {KCM_TLS_PEER_VERIFIED, reader, reader_groups};
  struct kcm_tls_peer master = {KCM_TLS_PEER_VERIFIED, root, master_groups};
  struct kcm_tls_peer other = {KCM_TLS_PEER_VERIFIED, someone, reader_groups};
  struct kcm_tls_peer nameless = {KCM_TLS_PEER_VERIFIED, none, reader_groups};
  struct kcm_tls_peer rejected = {KCM_TLS_PEER_REJECTED, expired, NULL};
  char admin[512];
  struct kcm_auth_options o = ten_seconds();
  struct fixture f;
  struct seen s;
  fixture_init(&f, o);
  snprintf(admin, sizeof(admin), "Bearer %s", admin_token());

  /* A verified certificate names the user: no TokenReview, even with a token. */
  s = check_with(&f, "/metrics", NULL, &verified);
  assert_int_equal(s.status, 200);
  assert_string_equal(s.user, "cert-reader");
  assert_reviews(&f, 0, 1);
  s = check_with(&f, "/metrics", "Bearer bogus", &other);
  assert_int_equal(s.status, 403);
  assert_string_equal(s.message, "forbidden: User \"cert-other\" cannot get path \"/metrics\"");
  assert_reviews(&f, 0, 2);

  /* system:masters may do anything, unasked. */
  s = check_with(&f, "/metrics", NULL, &master);
  assert_int_equal(s.status, 200);
  assert_string_equal(s.user, "cert-root");
  s = check(&f, "/anything", admin);
  assert_int_equal(s.status, 200);
  assert_string_equal(s.user, "kcm-admin");
  assert_reviews(&f, 1, 2);

  /* A certificate without a common name names nobody: the token counts. */
  s = check_with(&f, "/metrics", "Bearer " READER, &nameless);
  assert_int_equal(s.status, 200);
  assert_string_equal(s.user, "metrics-reader");
  assert_reviews(&f, 2, 3);

  /* A certificate that failed verification is a 401, unless a later
   * method succeeds; it is never anonymous. */
  s = check_with(&f, "/healthz", NULL, &rejected);
  assert_int_equal(s.status, 401);
  assert_string_equal(s.user, "");
  assert_int_equal(check_with(&f, "/healthz", "Bearer bogus", &rejected).status, 401);
  s = check_with(&f, "/metrics", "Bearer " READER, &rejected);
  assert_int_equal(s.status, 200);
  assert_string_equal(s.user, "metrics-reader");
  assert_reviews(&f, 3, 3);
  fixture_close(&f);
}

/* A refusal body as JSON, checked against the decision. */
static void assert_status_body(const struct kcm_auth_decision *d, const char *reason) {
  struct kcm_buf body = KCM_BUF_INIT(1 << 16);
  struct json_object *doc, *v;
  assert_string_equal(kcm_auth_refusal(d, &body), "application/json");
  assert_non_null(doc = json_tokener_parse(body.data));
  assert_string_equal(json_object_get_string(json_object_object_get(doc, "kind")), "Status");
  assert_string_equal(json_object_get_string(json_object_object_get(doc, "apiVersion")), "v1");
  assert_string_equal(json_object_get_string(json_object_object_get(doc, "status")), "Failure");
  assert_string_equal(json_object_get_string(json_object_object_get(doc, "reason")), reason);
  assert_string_equal(json_object_get_string(json_object_object_get(doc, "message")),
                      d->message);
  assert_true(json_object_object_get_ex(doc, "code", &v));
  assert_true(json_object_is_type(v, json_type_int));
  assert_int_equal(json_object_get_int(v), d->status);
  json_object_put(doc);
  kcm_buf_release(&body);
}

static void refusals_are_status_objects(void **state) {
  struct kcm_auth_options o = ten_seconds();
  struct kcm_auth_decision d;
  struct kcm_buf body = KCM_BUF_INIT(1 << 16);
  struct fixture f;
  struct seen s;
  fixture_init(&f, o);

  s = check(&f, "/metrics", "Bearer bogus");
  d = (struct kcm_auth_decision){s.status, s.user, s.message};
  assert_status_body(&d, "Unauthorized");
  s = check(&f, "/metrics", NULL);
  d = (struct kcm_auth_decision){s.status, s.user, s.message};
  assert_status_body(&d, "Forbidden");
  /* A message with quotes and backslashes survives as JSON. */
  d = (struct kcm_auth_decision){403, "x", "forbidden: User \"a\\\"b\" cannot get path \"/\""};
  assert_status_body(&d, "Forbidden");

  /* 500 is the message as text. */
  d = (struct kcm_auth_decision){500, "x", "Internal Server Error: \"/metrics\": broken"};
  assert_string_equal(kcm_auth_refusal(&d, &body), "text/plain; charset=utf-8");
  assert_int_equal(body.len, strlen(d.message) + 1);
  assert_memory_equal(body.data, "Internal Server Error: \"/metrics\": broken\n", body.len);
  kcm_buf_release(&body);
  /* No room: NULL, not a cut body. */
  body = (struct kcm_buf)KCM_BUF_INIT(8);
  assert_null(kcm_auth_refusal(&d, &body));
  d.status = 401;
  assert_null(kcm_auth_refusal(&d, &body));
  kcm_buf_release(&body);
  fixture_close(&f);
}

/* Many checks, in batches of 200 to spare the server thousands of
 * connections at once. */
struct many {
  int done, want, status; /* callbacks run, expected, the status all gave */
  uint64_t last;          /* the loop's time of the last callback */
  uv_loop_t *loop;
};

static void on_many(void *data, const struct kcm_auth_decision *d) {
  struct many *m = data;
  if (m->done++ && d->status != m->status)
    m->status = -1;
  else if (m->done == 1)
    m->status = d->status;
  m->last = uv_now(m->loop);
}

static bool many_done(void *arg) {
  struct many *m = arg;
  return m->done == m->want;
}

/* n checks of the paths path0, path1, ... with the header (NULL: none),
 * numbered as well when numbered; returns what they gave. */
static struct many check_many(struct fixture *f, int n, const char *path, const char *header,
                              bool numbered) {
  struct many m = {0};
  char p[64], h[64];
  m.loop = &f->loop;
  for (m.want = 0; m.want < n;) {
    struct kcm_auth_request r = {"GET", p, header ? h : NULL, NULL};
    snprintf(p, sizeof(p), "%s%d", path, m.want);
    if (header && numbered)
      snprintf(h, sizeof(h), "%s%d", header, m.want);
    else if (header)
      snprintf(h, sizeof(h), "%s", header);
    assert_int_equal(kcm_auth_check(&f->auth, &r, on_many, &m), 0);
    if (++m.want % 200 == 0 || m.want == n)
      assert_true(support_run_until(&f->loop, many_done, &m, 60000));
  }
  return m;
}

static void caches_hold_at_most_4096_answers(void **state) {
  struct kcm_auth_options o = ten_seconds();
  struct fixture f;
  struct many m;
  o.token_ttl_ms = 600000; /* nothing expires while the cache fills */
  fixture_init(&f, o);
  m = check_many(&f, 4200, "/healthz/", "Bearer bogus-", true);
  assert_int_equal(m.done, 4200);
  assert_int_equal(m.status, 401);
  assert_reviews(&f, 4200, 0);
  assert_int_equal(f.auth.tokens.len, 4096);
  fixture_close(&f);
}

/* Steps of iterations over the caches, counted through the linker. */
void *__real_kcm_map_next(struct kcm_map_iter *it);
void *__wrap_kcm_map_next(struct kcm_map_iter *it);
static size_t map_steps;
void *__wrap_kcm_map_next(struct kcm_map_iter *it) {
  map_steps++;
  return __real_kcm_map_next(it);
}

/* A full cache drops its expired answers in one pass over it, not a pass
 * for each. */
static void expired_answers_are_dropped_in_one_pass(void **state) {
  struct kcm_auth_options o = ten_seconds();
  struct fixture f;
  struct many allowed, denied;
  o.token_ttl_ms = 600000; /* the token stays known however slow the machine is */
  o.allow_ttl_ms = 600000;
  o.deny_ttl_ms = 200;
  fixture_init(&f, o);
  allowed = check_many(&f, 2048, "/allowed/", "Bearer " READER, false);
  assert_int_equal(allowed.status, 200);
  denied = check_many(&f, 2048, "/denied/", NULL, false);
  assert_int_equal(denied.status, 403);
  assert_int_equal(f.auth.reviews.len, 4096);
  run_until_time(&f, denied.last + 200);

  /* The 4097th answer: the 2048 denied ones have expired and make room. */
  map_steps = 0;
  assert_int_equal(check(&f, "/allowed/more", "Bearer " READER).status, 200);
  printf("    dropping 2048 expired of 4097 answers: %zu iteration steps\n", map_steps);
  assert_true(map_steps <= 2 * 4097);
  assert_int_equal(f.auth.reviews.len, 2049);
  assert_int_equal(check(&f, "/allowed/more", "Bearer " READER).status, 200);
  assert_reviews(&f, 1, 4097);
  fixture_close(&f);
}

static int start_sim(void **state) {
  static const char *const args[] = {"--extra-token", READER ":metrics-reader",
                                     "--extra-token", NOBODY ":nobody",
                                     NULL};
  return support_start_sim(args);
}

static int stop_sim(void **state) {
  support_stop_sim();
  return 0;
}

int main(void) {
  const struct CMUnitTest live[] = {
      cmocka_unit_test(always_allowed_paths_need_no_review),
      cmocka_unit_test(default_paths_are_the_health_checks),
      cmocka_unit_test(a_bogus_token_is_refused_and_cached_for_the_token_ttl),
      cmocka_unit_test(headers_without_a_bearer_token_are_anonymous),
      cmocka_unit_test(allowed_answers_are_kept_for_the_allow_ttl),
      cmocka_unit_test(denied_answers_are_kept_for_the_deny_ttl),
      cmocka_unit_test(a_zero_ttl_keeps_nothing),
      cmocka_unit_test(checks_in_flight_share_their_reviews),
      cmocka_unit_test(failed_token_reviews_are_refusals_not_kept),
      cmocka_unit_test(failed_access_reviews_are_errors_not_kept),
      cmocka_unit_test(certificates_and_masters),
      cmocka_unit_test(refusals_are_status_objects),
      cmocka_unit_test(caches_hold_at_most_4096_answers),
      cmocka_unit_test(expired_answers_are_dropped_in_one_pass),
  };
  return cmocka_run_group_tests(live, start_sim, stop_sim);
}
