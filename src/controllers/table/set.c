/*
 * The set of controllers one process runs: each enabled row's
 * controller, writer, shadow and token, and what is done to all of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/controllers.h"
#include "kcm/error.h"
#include "kcm/events.h"
#include "kcm/leader.h"
#include "kcm/log.h"
#include "kcm/workqueue.h"

#include "internal.h"

size_t kcm_controllers_options(const struct kcm_options_group *out[KCM_CONTROLLERS_MAX + 1]) {
  size_t n;
  for (n = 0; n < KCM_CONTROLLERS_MAX && kcm_controllers_table[n]; n++)
    out[n] = &kcm_controllers_table[n]->options;
  out[n] = NULL;
  return n;
}

void kcm_controllers_choose(struct kcm_controllers *s, const struct kcm_options *opt) {
  memset(s, 0, sizeof(*s));
  s->opt = opt;
  for (; s->rows < KCM_CONTROLLERS_MAX && kcm_controllers_table[s->rows]; s->rows++) {
    const struct kcm_controllers_row *r = kcm_controllers_table[s->rows];
    s->one[s->rows].row = r;
    if (kcm_options_enables(opt, r->options.controllers)) {
      s->kinds |= r->kinds;
      s->enabled++;
    }
  }
}

static void on_token(struct kcm_satoken *t) {
  struct kcm_controllers *s = t->data;
  s->tokens_ready++;
  if (s->on_token)
    s->on_token(s->data);
}

/* The writer of o: dry with --shadow; with --use-service-account-credentials
 * it sends as the row's service account in kube-system, which has only
 * upstream's bootstrap role: a token of its own, and the writes the role
 * grants as update sent as updates. */
static int setup_writer(struct kcm_controllers *s, struct kcm_controllers_one *o,
                        uv_loop_t *loop, struct kcm_client *client) {
  unsigned limiter = KCM_CLIENT_LIMITER_CONTROLLERS + (unsigned)(o - s->one);
  if (s->opt->shadow)
    kcm_writer_init_dry(&o->writer, client, limiter, loop);
  else
    kcm_writer_init(&o->writer, client, limiter);
  o->writer.agent = o->row->account;
  if (!s->opt->sa_credentials)
    return 0;
  if (kcm_satoken_init(&o->token, loop, client, KCM_CLIENT_LIMITER_LEASES, "kube-system",
                       o->row->account)) {
    kcm_error("cannot set up a token account=\"%s\"", o->row->account);
    return KCM_EINVAL;
  }
  o->has_token = true;
  o->token.data = s;
  s->tokens_wanted++;
  o->writer.bearer = &o->token.bearer;
  o->writer.as_update = true;
  return 0;
}

int kcm_controllers_init(struct kcm_controllers *s, uv_loop_t *loop, struct kcm_client *client,
                         struct kcm_informer *informers, struct kcm_intern *pool) {
  struct kcm_controllers_one *o;
  int err;
  s->informers = informers;
  if (kcm_controllers_table[s->rows]) {
    kcm_error("the table lists more controllers than a build may have max=%d",
              KCM_CONTROLLERS_MAX);
    return KCM_EINVAL;
  }
  for (o = s->one; o < s->one + s->rows; o++) {
    struct kcm_controllers_env env = {loop, &o->writer, informers, pool, s->opt,
                                      kcm_options_settings(s->opt, &o->row->options)};
    if (!kcm_options_enables(s->opt, o->row->options.controllers))
      continue;
    if (!env.settings) {
      kcm_error("the flags were not parsed with the table's groups name=\"%s\"",
                o->row->options.name);
      return KCM_EINVAL;
    }
    if ((err = setup_writer(s, o, loop, client)))
      return err;
    if (!(o->c = calloc(1, o->row->size)))
      err = KCM_ENOMEM;
    else
      err = o->row->init(o->c, &env);
    if (err) {
      kcm_error("cannot set up a controller name=\"%s\" err=\"%s\"", o->row->options.name,
                kcm_strerror(err));
      return err;
    }
    o->rt = o->row->runtime(o->c);
    o->rt->data = s;
    if (s->opt->shadow) {
      if (!(o->shadow = malloc(sizeof(*o->shadow))))
        return KCM_ENOMEM;
      kcm_shadow_init(o->shadow, o->row->options.name, s->opt->shadow_window_ms);
      kcm_shadow_follow(o->shadow, o->rt);
    }
  }
  if (s->opt->shadow)
    kcm_info("shadow mode: the controllers write nothing and take no lease; what they would "
             "change is reported window=\"%llus\"",
             (unsigned long long)(s->opt->shadow_window_ms / 1000));
  return 0;
}

int kcm_controllers_guard(struct kcm_controllers *s, struct kcm_conflict_guard *g) {
  size_t i;
  for (i = 0; i < s->rows; i++) {
    const struct kcm_controllers_one *o = &s->one[i];
    enum kcm_kind k = o->row->kind;
    if (!o->row->guarded)
      continue;
    kcm_conflict_guard_area(g, k, o->c ? o->rt : NULL);
    /* a cache kept for another controller: another's writes there are seen too */
    if ((s->kinds & (1u << k)) && kcm_conflict_guard_watch(g, &s->informers[k]))
      return KCM_ENOMEM;
  }
  return 0;
}

bool kcm_controllers_tokens_ready(struct kcm_controllers *s) {
  struct kcm_controllers_one *o;
  if (s->tokens_ready == s->tokens_wanted)
    return true;
  if (!s->tokens_started) {
    s->tokens_started = true;
    EACH(s, o) {
      if (o->has_token)
        kcm_satoken_start(&o->token, on_token);
    }
  }
  return false;
}

void kcm_controllers_run(struct kcm_controllers *s) {
  struct kcm_controllers_one *o;
  EACH(s, o) {
    kcm_info("starting controller name=\"%s\" workers=%u", o->row->options.name, o->rt->workers);
    kcm_runtime_run(o->rt);
    s->running++;
  }
  if (!s->running)
    kcm_info("no controller is enabled");
}

static void on_runtime_stopped(struct kcm_runtime *rt) {
  struct kcm_controllers *s = rt->data;
  if (--s->running == 0 && s->on_stopped)
    s->on_stopped(s->data);
}

size_t kcm_controllers_stop(struct kcm_controllers *s) {
  struct kcm_controllers_one *o;
  size_t n = 0;
  EACH(s, o) {
    n++;
  }
  s->running = n; /* a controller never started still stops */
  EACH(s, o) {
    kcm_runtime_stop(o->rt, on_runtime_stopped);
  }
  return n;
}

void kcm_controllers_stop_tokens(struct kcm_controllers *s) {
  struct kcm_controllers_one *o;
  EACH(s, o) {
    if (o->has_token)
      kcm_satoken_stop(&o->token, NULL);
  }
}

size_t kcm_controllers_events_pending(const struct kcm_controllers *s) {
  const struct kcm_controllers_one *o;
  size_t n = 0;
  EACH(s, o) {
    n += o->rt->events.queued + o->rt->events.sending;
  }
  return n;
}

/* The syncs one controller put off, by the group and resource of its
 * own kind and of its dependents'. */
static void stale_metrics(const struct kcm_controllers_one *o, struct kcm_buf *out) {
  const struct kcm_api_kind *own = kcm_api_kind(o->row->kind);
  const struct kcm_api_kind *dep = kcm_api_kind(o->row->dependents);
  char family[96];
  snprintf(family, sizeof(family), "%s_controller_stale_sync_skips_total", o->row->options.name);
  kcm_runtime_stale_metrics(o->rt, family, (const char *const[]){own->group, own->plural},
                            (const char *const[]){dep->group, dep->plural}, out);
}

void kcm_controllers_metrics(const struct kcm_controllers *s, uint64_t now_ms,
                             struct kcm_buf *out) {
  const struct kcm_workqueue *queues[KCM_CONTROLLERS_MAX] = {NULL};
  const struct kcm_events *events[KCM_CONTROLLERS_MAX] = {NULL};
  const char *names[KCM_CONTROLLERS_MAX] = {NULL};
  const struct kcm_pacer *pacers[KCM_CONTROLLERS_MAX * KCM_CONTROLLERS_PACERS];
  const char *owners[KCM_CONTROLLERS_MAX * KCM_CONTROLLERS_PACERS];
  const char *pacer_names[KCM_CONTROLLERS_MAX * KCM_CONTROLLERS_PACERS];
  const struct kcm_controllers_one *o;
  size_t n = 0, np = 0, i, k;
  EACH(s, o) {
    queues[n] = &o->rt->queue;
    events[n] = &o->rt->events;
    names[n++] = o->row->options.name;
    k = o->row->pacers(o->c, pacers + np, pacer_names + np);
    for (i = 0; i < k; i++)
      owners[np + i] = o->row->options.name;
    np += k;
  }
  kcm_workqueue_metrics_many(queues, names, n, now_ms, out);
  kcm_events_metrics(events, names, n, out);
  kcm_pacer_metrics(pacers, owners, pacer_names, np, out);
  EACH(s, o) {
    stale_metrics(o, out);
  }
}

/* The shadows of the enabled controllers. */
static size_t shadows(struct kcm_controllers *s, struct kcm_shadow *out[KCM_CONTROLLERS_MAX]) {
  struct kcm_controllers_one *o;
  size_t n = 0;
  EACH(s, o) {
    if (o->shadow)
      out[n++] = o->shadow;
  }
  return n;
}

int kcm_controllers_shadow_metrics(struct kcm_controllers *s, struct kcm_buf *out) {
  struct kcm_shadow *sh[KCM_CONTROLLERS_MAX];
  return kcm_shadow_metrics(sh, shadows(s, sh), out);
}

int kcm_controllers_shadow_report(struct kcm_controllers *s, struct kcm_buf *out) {
  struct kcm_shadow *sh[KCM_CONTROLLERS_MAX];
  return kcm_shadow_report(sh, shadows(s, sh), out);
}

void kcm_controllers_release(struct kcm_controllers *s) {
  struct kcm_controllers_one *o;
  EACH(s, o) {
    if (o->has_token)
      kcm_satoken_release(&o->token);
    o->row->release(o->c); /* its runtime's writer and ops may be the shadow's */
    free(o->c);
    o->c = NULL;
    if (o->shadow)
      kcm_shadow_release(o->shadow);
    free(o->shadow);
    o->shadow = NULL;
  }
  free(s->sharding);
  s->sharding = NULL;
}
