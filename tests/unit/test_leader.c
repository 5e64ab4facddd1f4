/*
 * Tests for leader election: the decision table (pure), and electors
 * against the local API server: acquiring, standing by, handing over on
 * release, taking over an expired lease, and losing the lease when renewals
 * keep failing.
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

#include "../../src/leader/internal.h"
#include "kcm/error.h"
#include "kcm/leader.h"
#include "peer.h"
#include "support.h"

#define NOW "2026-11-22T10:00:00.123456Z"

static struct kcm_lease_record rec(const char *holder, int32_t dur, int32_t transitions) {
  struct kcm_lease_record r = {0};
  r.exists = true;
  snprintf(r.holder, sizeof(r.holder), "%s", holder);
  r.duration_s = dur;
  snprintf(r.acquire, sizeof(r.acquire), "2026-11-22T09:00:00.000001Z");
  snprintf(r.renew, sizeof(r.renew), "2026-11-22T09:59:59.000001Z");
  r.transitions = transitions;
  return r;
}

static void decisions(void **state) {
  struct kcm_lease_record none = {0}, cur, next;

  /* No Lease: create it, holding it, with no transitions. */
  assert_int_equal(kcm_leader_decide(&none, "me", 15, 0, 0, NOW, &next), KCM_LEADER_CREATE);
  assert_string_equal(next.holder, "me");
  assert_int_equal(next.duration_s, 15);
  assert_string_equal(next.acquire, NOW);
  assert_string_equal(next.renew, NOW);
  assert_int_equal(next.transitions, 0);

  /* Held by another, seen 14.999 s ago with a 15 s duration: wait. */
  cur = rec("other", 15, 3);
  assert_int_equal(kcm_leader_decide(&cur, "me", 15, 1000, 15999, NOW, &next),
                   KCM_LEADER_WAIT);
  /* Unchanged for its whole duration on the local clock: take it. */
  assert_int_equal(kcm_leader_decide(&cur, "me", 15, 1000, 16000, NOW, &next),
                   KCM_LEADER_UPDATE);
  assert_string_equal(next.holder, "me");
  assert_string_equal(next.acquire, NOW);
  assert_int_equal(next.transitions, 4);
  /* The holder's own duration counts, not ours. */
  cur = rec("other", 60, 3);
  assert_int_equal(kcm_leader_decide(&cur, "me", 15, 0, 59999, NOW, &next), KCM_LEADER_WAIT);

  /* Released (empty holder): take it at once. */
  cur = rec("", 1, 3);
  assert_int_equal(kcm_leader_decide(&cur, "me", 15, 5000, 5000, NOW, &next),
                   KCM_LEADER_UPDATE);
  assert_int_equal(next.transitions, 4);

  /* Ours: renew, keeping acquireTime and the transition count. */
  cur = rec("me", 15, 3);
  assert_int_equal(kcm_leader_decide(&cur, "me", 15, 5000, 5000, NOW, &next),
                   KCM_LEADER_UPDATE);
  assert_string_equal(next.acquire, "2026-11-22T09:00:00.000001Z");
  assert_string_equal(next.renew, NOW);
  assert_int_equal(next.transitions, 3);

  /* Releasing: empty holder, 1 s, times now, transitions kept. */
  kcm_leader_release_record(&cur, NOW, &next);
  assert_string_equal(next.holder, "");
  assert_int_equal(next.duration_s, 1);
  assert_string_equal(next.acquire, NOW);
  assert_int_equal(next.transitions, 3);
}

static void records_round_trip(void **state) {
  struct kcm_lease_record r = rec("host_1", 15, 2), back;
  static const char text[] = "{\"metadata\":{\"name\":\"kcm\", \"labels\":{\"a\":\"\\u00e9\"}},"
                             "\"spec\":{\"holderIdentity\":\"x\",\"extra\":1},\"z\":2.50}";
  struct kcm_buf out = KCM_BUF_INIT(1 << 16);
  struct json_object *lease;
  struct kcm_jsonw w;
  char now[40];
  kcm_jsonw_start(&w, &out);
  kcm_leader_apply(&r, text, strlen(text), &w);
  assert_int_equal(kcm_jsonw_finish(&w), 0);
  assert_non_null(lease = json_tokener_parse(out.data));
  assert_int_equal(kcm_leader_parse(lease, &back), 0);
  assert_memory_equal(&r, &back, sizeof(r));
  json_object_put(lease);
  /* The spec is the record's alone; the rest is copied as it was written. */
  assert_null(strstr(out.data, "extra"));
  assert_true(!strncmp(out.data, "{\"metadata\":{\"name\":\"kcm\", \"labels\":{\"a\":\"\\u00e9\"}},",
                       strlen("{\"metadata\":{\"name\":\"kcm\", \"labels\":{\"a\":\"\\u00e9\"}},")));
  assert_non_null(strstr(out.data, "},\"z\":2.50}"));
  /* A Lease that is not an object is not written over. */
  kcm_buf_reset(&out);
  kcm_jsonw_start(&w, &out);
  kcm_leader_apply(&r, "[]", 2, &w);
  assert_int_equal(kcm_jsonw_finish(&w), KCM_EINVAL);
  kcm_buf_release(&out);
  /* A Lease with no spec has an empty record; a non-object is refused. */
  lease = json_tokener_parse("{\"metadata\":{}}");
  assert_int_equal(kcm_leader_parse(lease, &back), 0);
  assert_true(back.exists);
  assert_string_equal(back.holder, "");
  json_object_put(lease);
  lease = json_tokener_parse("[1]");
  assert_int_equal(kcm_leader_parse(lease, &back), KCM_EINVAL);
  json_object_put(lease);
  kcm_leader_now(now, sizeof(now));
  assert_int_equal(strlen(now), 27);
  assert_int_equal(now[19], '.');
  assert_int_equal(now[26], 'Z');
}

static bool peer_answered(void *arg) { return peer_count(arg) > 0; }

static void settings_are_checked(void **state) {
  struct kcm_leader_options o = {"kube-system", "kcm", NULL, 15000, 10000, 2000, 0};
  const char *why = NULL;
  assert_int_equal(kcm_leader_check(&o, &why), 0);
  o.renew_ms = 15000;
  assert_int_equal(kcm_leader_check(&o, &why), KCM_EINVAL);
  assert_non_null(strstr(why, "greater than the renew deadline"));
  o.renew_ms = 2400;
  assert_int_equal(kcm_leader_check(&o, &why), KCM_EINVAL);
  assert_non_null(strstr(why, "1.2 times the retry period"));
  o.renew_ms = 10000;
  o.retry_ms = 0;
  assert_int_equal(kcm_leader_check(&o, &why), KCM_EINVAL);
  o.retry_ms = 2000;
  o.name = "";
  assert_int_equal(kcm_leader_check(&o, &why), KCM_EINVAL);
  /* A name that a URL parser or the server would read as other segments. */
  o.name = "kcm/../x";
  assert_int_equal(kcm_leader_check(&o, &why), KCM_EINVAL);
  assert_non_null(strstr(why, "'/'"));
  o.name = "kcm%2Fx";
  assert_int_equal(kcm_leader_check(&o, &why), KCM_EINVAL);
  o.name = "kcm";
  o.ns = "..";
  assert_int_equal(kcm_leader_check(&o, &why), KCM_EINVAL);
  assert_non_null(strstr(why, "'..'"));
  /* Longer than the server allows, rather than cut short. */
  o.ns = "n123456789012345678901234567890123456789012345678901234567890123";
  assert_int_equal(kcm_leader_check(&o, &why), KCM_EINVAL);
  assert_non_null(strstr(why, "63"));
  o.ns = "kube system?";
  assert_int_equal(kcm_leader_check(&o, &why), 0);
}

/* A blank, '?' or '#' in the lease's namespace or name goes to the server
 * percent-encoded, not as the end of the path. */
static void lease_names_are_encoded_in_the_path(void **state) {
  static const struct peer_answer refused = {"HTTP/1.1 500 Internal Server Error", "{}"};
  static const char get[] =
      "GET /apis/coordination.k8s.io/v1/namespaces/kube%20system%3F/leases/kcm%231%20x "
      "HTTP/1.1\r\n";
  struct kcm_leader_options o = {"kube system?", "kcm#1 x", "host_a", 15000, 10000, 2000, 0};
  struct kcm_client_config cfg = {0};
  struct kcm_client *client;
  struct kcm_leader l;
  struct peer peer;
  uv_loop_t loop;
  char *head;
  peer_start(&peer, &refused, 1);
  cfg.server = strdup(peer.url);
  uv_loop_init(&loop);
  assert_int_equal(kcm_client_new(&client, &loop, &cfg), 0);
  assert_int_equal(kcm_leader_init(&l, &loop, client, &o), 0);
  kcm_leader_start(&l);
  assert_true(support_run_until(&loop, peer_answered, &peer, 10000));
  head = peer_request(&peer, 0);
  if (strncmp(head, get, strlen(get)) != 0)
    fail_msg("sent %.*s", (int)strcspn(head, "\r"), head);
  free(head);
  kcm_leader_close(&l);
  kcm_client_close(client);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  kcm_client_config_release(&cfg);
  peer_stop(&peer);
}

/* --- against the local API server ------------------------------------------------------------- */

struct fixture {
  struct kcm_client_config cfg;
  uv_loop_t loop;
  struct kcm_client *client;
  struct kcm_client *client_a; /* A's own, so A can vanish as a killed process does */
  char ns[64];
  struct kcm_leader a, b;
  int started_a, started_b, lost_a, released_a, released_b;
};

static void on_started(struct kcm_leader *l) {
  struct fixture *f = l->data;
  if (l == &f->a)
    f->started_a++;
  else
    f->started_b++;
}

static void on_lost(struct kcm_leader *l) { ((struct fixture *)l->data)->lost_a++; }

static void on_released(struct kcm_leader *l) {
  struct fixture *f = l->data;
  if (l == &f->a)
    f->released_a++;
  else
    f->released_b++;
}

static void elector(struct fixture *f, struct kcm_leader *l, struct kcm_client *c,
                    const char *identity, uint64_t lease_ms) {
  struct kcm_leader_options o = {f->ns, "lock", identity, lease_ms, 600, 200, 0};
  assert_int_equal(kcm_leader_init(l, &f->loop, c, &o), 0);
  l->data = f;
  l->on_started = on_started;
  l->on_lost = on_lost;
  l->on_released = on_released;
}

static void fixture_init(struct fixture *f, uint64_t lease_ms) {
  memset(f, 0, sizeof(*f));
  support_connect(&f->loop, &f->cfg, &f->client, "lease", f->ns, sizeof(f->ns));
  assert_int_equal(kcm_client_new(&f->client_a, &f->loop, &f->cfg), 0);
  elector(f, &f->a, f->client_a, "host_a", lease_ms);
  elector(f, &f->b, f->client, "host_b", lease_ms);
}

static void fixture_close(struct fixture *f) {
  support_faults(&f->loop, f->client, "{\"clear\":true}");
  kcm_leader_close(&f->a);
  kcm_leader_close(&f->b);
  if (f->client_a)
    kcm_client_close(f->client_a);
  kcm_client_close(f->client);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  uv_loop_close(&f->loop);
  kcm_client_config_release(&f->cfg);
}

static bool a_leads(void *arg) { return ((struct fixture *)arg)->started_a > 0; }
static bool b_leads(void *arg) { return ((struct fixture *)arg)->started_b > 0; }
static bool a_lost(void *arg) { return ((struct fixture *)arg)->lost_a > 0; }
static bool a_released(void *arg) { return ((struct fixture *)arg)->released_a > 0; }

/* The Lease as the server holds it. */
static struct kcm_lease_record server_record(struct fixture *f) {
  struct support_result r = {0};
  struct kcm_lease_record rec;
  struct json_object *o;
  char path[256];
  snprintf(path, sizeof(path), "/apis/coordination.k8s.io/v1/namespaces/%s/leases/lock", f->ns);
  support_request(&f->loop, f->client, "GET", path, NULL, &r);
  assert_int_equal(r.err, 0);
  o = json_tokener_parse(r.body);
  support_result_free(&r);
  assert_int_equal(kcm_leader_parse(o, &rec), 0);
  json_object_put(o);
  return rec;
}

static void one_leads_and_hands_over_on_release(void **state) {
  struct fixture f;
  struct kcm_lease_record r;
  uint64_t released_at;
  fixture_init(&f, 5000);
  kcm_leader_start(&f.a);
  assert_true(support_run_until(&f.loop, a_leads, &f, 5000));
  kcm_leader_start(&f.b);
  /* B keeps trying and never leads while A renews. */
  assert_false(support_run_until(&f.loop, b_leads, &f, 1500));
  assert_true(f.a.leading);
  r = server_record(&f);
  assert_string_equal(r.holder, "host_a");
  assert_int_equal(r.duration_s, 5);
  assert_int_equal(r.transitions, 0);
  assert_string_not_equal(r.renew, r.acquire); /* renewed since */

  kcm_leader_release(&f.a);
  assert_true(support_run_until(&f.loop, a_released, &f, 5000));
  released_at = uv_now(&f.loop);
  assert_false(f.a.leading);
  /* B takes it at its next try: within 2.2 retry periods, not a lease duration. */
  assert_true(support_run_until(&f.loop, b_leads, &f, 2000));
  assert_true(uv_now(&f.loop) - released_at < 1000);
  r = server_record(&f);
  assert_string_equal(r.holder, "host_b");
  assert_int_equal(r.transitions, 1);
  assert_int_equal(f.lost_a, 0);
  fixture_close(&f);
}

static void an_abandoned_lease_is_taken_after_its_duration(void **state) {
  struct fixture f;
  uint64_t stopped;
  fixture_init(&f, 2000);
  kcm_leader_start(&f.a);
  assert_true(support_run_until(&f.loop, a_leads, &f, 5000));
  /* A vanishes without releasing, as a killed process does. */
  kcm_leader_close(&f.a);
  kcm_client_close(f.client_a);
  f.client_a = NULL;
  stopped = uv_now(&f.loop);
  kcm_leader_start(&f.b);
  assert_true(support_run_until(&f.loop, b_leads, &f, 5000));
  assert_true(uv_now(&f.loop) - stopped >= 2000);
  assert_int_equal(server_record(&f).transitions, 1);
  fixture_close(&f);
}

static void failing_renewals_lose_the_lease(void **state) {
  struct fixture f;
  uint64_t faulted;
  fixture_init(&f, 5000);
  kcm_leader_start(&f.a);
  assert_true(support_run_until(&f.loop, a_leads, &f, 5000));
  support_faults(&f.loop, f.client,
                 "{\"rules\":[{\"resource\":\"leases\",\"verb\":\"update\",\"code\":500},"
                 "{\"resource\":\"leases\",\"verb\":\"get\",\"code\":500}]}");
  faulted = uv_now(&f.loop);
  /* Lost once no renewal succeeded for a retry period plus the renew deadline. */
  assert_true(support_run_until(&f.loop, a_lost, &f, 5000));
  assert_true(uv_now(&f.loop) - faulted >= 600);
  assert_false(f.a.leading);
  assert_true(kcm_leader_healthy(&f.a, uv_now(&f.loop), 0));
  fixture_close(&f);
}

static void health_fails_when_renewals_stall(void **state) {
  struct kcm_leader l;
  memset(&l, 0, sizeof(l));
  assert_true(kcm_leader_healthy(&l, 100000, 20000)); /* not leading */
  l.leading = true;
  l.lease_ms = 15000;
  l.renewed_at = 50000;
  assert_true(kcm_leader_healthy(&l, 85000, 20000));
  assert_false(kcm_leader_healthy(&l, 85001, 20000));
}

static int start_sim(void **state) { return support_start_sim(NULL); }
static int stop_sim(void **state) {
  support_stop_sim();
  return 0;
}

int main(void) {
  const struct CMUnitTest pure[] = {
      cmocka_unit_test(decisions),
      cmocka_unit_test(records_round_trip),
      cmocka_unit_test(settings_are_checked),
      cmocka_unit_test(health_fails_when_renewals_stall),
      cmocka_unit_test(lease_names_are_encoded_in_the_path),
  };
  const struct CMUnitTest live[] = {
      cmocka_unit_test(one_leads_and_hands_over_on_release),
      cmocka_unit_test(an_abandoned_lease_is_taken_after_its_duration),
      cmocka_unit_test(failing_renewals_lose_the_lease),
  };
  int failed = cmocka_run_group_tests(pure, NULL, NULL);
  return failed + cmocka_run_group_tests(live, start_sim, stop_sim);
}
