/*
 * Tests for the table of controllers and the set one process runs: every
 * row whole, every name --controllers takes turning on its row alone, and
 * a set built from the flags rendering the metrics of what it runs, and a
 * sharded set acting in a shard taken once its caches are whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/caches.h"
#include "kcm/controllers.h"
#include "kcm/error.h"
#include "kcm/leader.h"

/* argv copies: the options borrow from them, so they stay until the next call. */
static void parse(struct kcm_options *o, const char *a, const char *b) {
  static char name[] = "kcm", first[128], second[128];
  char *argv[3] = {name, first, second};
  char err[256];
  snprintf(first, sizeof(first), "%s", a);
  snprintf(second, sizeof(second), "%s", b ? b : "");
  static const struct kcm_options_group *groups[KCM_CONTROLLERS_MAX + 1]; /* o borrows it */
  kcm_controllers_options(groups);
  assert_int_equal(kcm_options_parse(o, groups, b ? 3 : 2, argv, err, sizeof(err)),
                   KCM_OPTIONS_RUN);
}

/* The rows of the program's table: 2 of them, deployment then replicaset. */
static size_t rows(void) {
  size_t n = 0;
  while (kcm_controllers_table[n])
    n++;
  assert_int_equal(n, 2);
  return n;
}

static void every_row_is_whole(void **state) {
  size_t i, j, k, n = rows();
  const char *const *p, *const *q;
  for (i = 0; i < n; i++) {
    const struct kcm_controllers_row *r = kcm_controllers_table[i];
    char account[64];
    assert_non_null(r->options.name);
    assert_string_equal(r->options.controllers[0], r->options.name);
    snprintf(account, sizeof(account), "%s-controller", r->options.name);
    assert_string_equal(r->account, account); /* upstream's User-Agent and account */
    assert_true(r->kinds & (1u << r->kind));
    assert_true(r->kinds & (1u << r->dependents));
    assert_true(r->size > 0 && r->init && r->runtime && r->pacers && r->release);
    /* its flags: a section of its own, each with help, within its settings */
    assert_true(r->options.nflags > 0 && r->options.flags[0].section);
    assert_true(r->options.defaults && r->options.size <= KCM_OPTIONS_SETTINGS);
    for (k = 0; k < r->options.nflags; k++)
      assert_true(r->options.flags[k].help && r->options.flags[k].offset < r->options.size);
    for (j = 0; j < i; j++) {
      const struct kcm_controllers_row *o = kcm_controllers_table[j];
      assert_true(r->kind != o->kind || !r->guarded || !o->guarded); /* one area each */
      for (p = r->options.controllers; *p; p++)
        for (q = o->options.controllers; *q; q++)
          assert_string_not_equal(*p, *q);
    }
  }
}

static void each_name_turns_on_its_row_alone(void **state) {
  struct kcm_options o;
  struct kcm_controllers s;
  char flag[96], foreign[64];
  size_t i, j, n = rows();
  const char *const *p;
  for (i = 0; i < n; i++)
    for (p = kcm_controllers_table[i]->options.controllers; *p; p++) {
      snprintf(flag, sizeof(flag), "--controllers=%s", *p);
      parse(&o, flag, NULL);
      kcm_controllers_choose(&s, &o);
      assert_int_equal(s.enabled, 1);
      assert_int_equal(s.kinds, kcm_controllers_table[i]->kinds);
      assert_string_equal(kcm_options_foreign(&o, foreign, sizeof(foreign)), "");
      /* "*" with this one left out: every other row */
      snprintf(flag, sizeof(flag), "--controllers=*,-%s", *p);
      parse(&o, flag, NULL);
      kcm_controllers_choose(&s, &o);
      assert_int_equal(s.enabled, n - 1);
      for (j = 0; j < n; j++)
        assert_int_equal(kcm_options_enables(&o, kcm_controllers_table[j]->options.controllers),
                         j != i);
    }
}

static void upstreams_other_controllers_are_foreign(void **state) {
  struct kcm_options o;
  struct kcm_controllers s;
  char foreign[64];
  parse(&o, "--controllers=deployment,job,-ttl,*,replicaset-controller", NULL);
  kcm_controllers_choose(&s, &o);
  assert_int_equal(s.enabled, rows());
  assert_string_equal(kcm_options_foreign(&o, foreign, sizeof(foreign)), "job");
  parse(&o, "--controllers=-deployment,-replicaset", NULL);
  kcm_controllers_choose(&s, &o);
  assert_int_equal(s.enabled, 0);
  assert_int_equal(s.kinds, 0);
}

/* Built on caches with no client (nothing is sent before they start). */
static void set_renders_what_it_runs(void **state) {
  const char *flags[][2] = {{"--controllers=replicaset", NULL}, {"--shadow", NULL}};
  size_t n;
  for (n = 0; n < 2; n++) {
    uv_loop_t loop;
    struct kcm_options o;
    struct kcm_controllers s;
    struct kcm_caches c;
    struct kcm_intern pool;
    struct kcm_buf out;
    assert_int_equal(uv_loop_init(&loop), 0);
    kcm_intern_init(&pool);
    kcm_buf_init(&out, 1 << 20);
    parse(&o, flags[n][0], flags[n][1]);
    kcm_controllers_choose(&s, &o);
    assert_int_equal(kcm_caches_init(&c, &loop, NULL, &pool, s.kinds, &o), 0);
    assert_int_equal(kcm_controllers_init(&s, &loop, NULL, c.informers, &pool), 0);
    kcm_controllers_metrics(&s, 0, &out);
    assert_non_null(strstr(out.data, "workqueue_depth{name=\"replicaset\"} 0"));
    assert_non_null(strstr(out.data, "replicaset_controller_stale_sync_skips_total"));
    assert_true(!strstr(out.data, "name=\"deployment\"") == (n == 0));
    assert_true(!strstr(out.data, "deployment_controller_stale_sync_skips_total") == (n == 0));
    if (n == 1) {
      kcm_buf_reset(&out);
      assert_int_equal(kcm_controllers_shadow_report(&s, &out), 0);
      assert_non_null(strstr(out.data, "\"deployment\""));
      assert_non_null(strstr(out.data, "\"replicaset\""));
    }
    assert_int_equal(kcm_controllers_stop(&s), n == 0 ? 1 : rows());
    kcm_caches_stop(&c, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(s.running, 0);
    kcm_controllers_release(&s);
    kcm_caches_release(&c);
    kcm_buf_release(&out);
    kcm_intern_release(&pool);
    assert_int_equal(uv_loop_close(&loop), 0);
  }
}

/* Flags parsed without the table's groups leave a controller without its
 * settings: refused, not read. */
static void settings_come_from_the_tables_groups(void **state) {
  static char name[] = "kcm";
  char *argv[] = {name, NULL}, err[128];
  uv_loop_t loop;
  struct kcm_options o;
  struct kcm_controllers s;
  struct kcm_caches c;
  struct kcm_intern pool;
  assert_int_equal(uv_loop_init(&loop), 0);
  kcm_intern_init(&pool);
  assert_int_equal(kcm_options_parse(&o, NULL, 1, argv, err, sizeof(err)), KCM_OPTIONS_RUN);
  kcm_controllers_choose(&s, &o);
  assert_int_equal(s.enabled, rows());
  assert_int_equal(kcm_caches_init(&c, &loop, NULL, &pool, s.kinds, &o), 0);
  assert_int_equal(kcm_controllers_init(&s, &loop, NULL, c.informers, &pool), KCM_EINVAL);
  kcm_controllers_release(&s);
  kcm_caches_stop(&c, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  kcm_caches_release(&c);
  kcm_intern_release(&pool);
  assert_int_equal(uv_loop_close(&loop), 0);
}

static bool acts_in(struct kcm_controllers *s, const char *ns) {
  struct kcm_runtime *rt = s->one[0].rt;
  return rt->owns(rt->owns_ctx, ns, strlen(ns));
}

/* A shard taken is listed again, and acted on once every cache has; its
 * objects kept from the take; given up, it is neither. */
static void a_taken_shard_is_acted_on_once_every_cache_is_whole(void **state) {
  uv_loop_t loop;
  struct kcm_options o;
  struct kcm_controllers s;
  struct kcm_caches c;
  struct kcm_intern pool;
  struct kcm_shards sh;
  struct kcm_shards_options so = {4, "kcm-shards", "kcm", "me", 15000, 10000, 2000, 0};
  struct kcm_buf out = KCM_BUF_INIT(1 << 16);
  const char *ns = "team-a";
  uint32_t k = kcm_shards_of(ns, strlen(ns), 4), kind, last = 0;

  assert_int_equal(uv_loop_init(&loop), 0);
  kcm_intern_init(&pool);
  parse(&o, "--shards=4", NULL);
  kcm_controllers_choose(&s, &o);
  assert_int_equal(kcm_caches_init(&c, &loop, NULL, &pool, s.kinds, &o), 0);
  assert_int_equal(kcm_controllers_init(&s, &loop, NULL, c.informers, &pool), 0);
  assert_int_equal(kcm_shards_init(&sh, &loop, NULL, &so), 0);
  assert_int_equal(kcm_controllers_shard(&s, &sh), 0);
  for (kind = 0; kind < KCM_KIND_COUNT; kind++)
    if (s.kinds & (1u << kind))
      last = kind;
  assert_false(acts_in(&s, ns));
  assert_false(c.informers[last].keep(c.informers[last].keep_ctx, ns, strlen(ns)));

  sh.shard[k].held = true;
  sh.on_taken(&sh, k);
  assert_true(c.informers[last].keep(c.informers[last].keep_ctx, ns, strlen(ns)));
  assert_true(c.informers[last].need_list); /* listed again */
  assert_false(acts_in(&s, ns));
  for (kind = 0; kind < KCM_KIND_COUNT; kind++) {
    struct kcm_informer *inf = &c.informers[kind];
    if (!(s.kinds & (1u << kind)))
      continue;
    assert_false(acts_in(&s, ns)); /* not before every cache has listed */
    inf->lists_applied = inf->lists_started = inf->lists_started + 1;
    inf->on_listed(inf, inf->listed_ctx);
  }
  assert_true(acts_in(&s, ns));
  sh.shard[k].draining = true;
  assert_false(acts_in(&s, ns));
  sh.shard[k].draining = sh.shard[k].held = false;
  sh.on_given_up(&sh, k);
  assert_false(acts_in(&s, ns));
  assert_false(c.informers[last].keep(c.informers[last].keep_ctx, ns, strlen(ns)));
  assert_int_equal(kcm_controllers_shard_metrics(&s, &out), 0);
  assert_non_null(strstr(out.data, "kcm_shards_objects_dropped_total 0"));

  kcm_controllers_stop(&s);
  kcm_caches_stop(&c, NULL);
  kcm_shards_close(&sh);
  uv_run(&loop, UV_RUN_DEFAULT);
  kcm_shards_release(&sh);
  kcm_controllers_release(&s);
  kcm_caches_release(&c);
  kcm_buf_release(&out);
  kcm_intern_release(&pool);
  assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_row_is_whole),
      cmocka_unit_test(each_name_turns_on_its_row_alone),
      cmocka_unit_test(upstreams_other_controllers_are_foreign),
      cmocka_unit_test(set_renders_what_it_runs),
      cmocka_unit_test(settings_come_from_the_tables_groups),
      cmocka_unit_test(a_taken_shard_is_acted_on_once_every_cache_is_whole),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
