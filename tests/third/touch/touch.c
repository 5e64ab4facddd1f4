/*
 * touch — a third controller for a test build of kcm: it takes a key for
 * every Deployment event, and its sync logs the generation it sees and
 * the word its flag gave. It writes nothing. It exists to show that a
 * controller joins kcm by its directory and one line in the table.
 */
#include <stddef.h>
#include <stdint.h>

#include "kcm/controllers.h"
#include "kcm/informer.h"
#include "kcm/log.h"
#include "kcm/runtime.h"

struct touch {
  struct kcm_runtime rt;
  struct kcm_informer *deployments; /* borrowed */
  const char *word;                 /* borrowed from the flags */
  uint64_t synced;
};

struct settings {
  int workers;
  const char *word;
};

static const struct kcm_options_flag flags[] = {
    {"Touch controller flags", "concurrent-touch-syncs", "N", KCM_OPTIONS_POSITIVE,
     offsetof(struct settings, workers), "Deployments touched at once (default 1)"},
    {NULL, "touch-word", "WORD", KCM_OPTIONS_STRING, offsetof(struct settings, word),
     "what each sync logs (default hello)"},
};

static const struct settings defaults = {1, "hello"};

static void start(struct kcm_runtime_job *j) {
  struct touch *t = j->rt->ctx;
  struct kcm_object *o = kcm_informer_get(t->deployments, j->ns, j->name);
  t->synced++;
  kcm_info("touched key=\"%.64s\" generation=%lld word=\"%.32s\" syncs=%llu", j->key,
           o ? (long long)o->generation : -1LL, t->word, (unsigned long long)t->synced);
}

static const struct kcm_runtime_ops ops = {
    .kind = "touch",
    .job_size = sizeof(struct kcm_runtime_job),
    .start = start,
};

/* The handlers' ctx is the controller. */
static void added(void *ctx, struct kcm_object *o) {
  kcm_runtime_enqueue(&((struct touch *)ctx)->rt, o);
}

static void updated(void *ctx, struct kcm_object *old, struct kcm_object *cur) {
  (void)old;
  added(ctx, cur);
}

static void deleted(void *ctx, struct kcm_object *o, bool unknown) {
  (void)unknown;
  added(ctx, o);
}

static const struct kcm_informer_handler events = {added, updated, deleted, NULL};

static int init(void *c, const struct kcm_controllers_env *e) {
  struct touch *t = c;
  const struct settings *s = e->settings;
  t->deployments = &e->informers[KCM_KIND_DEPLOYMENT];
  t->word = s->word;
  kcm_runtime_init(&t->rt, e->loop, &ops, t, (uint32_t)s->workers, e->writer, e->pool);
  return kcm_runtime_watch(&t->rt, t->deployments, &events);
}

static struct kcm_runtime *runtime(void *c) { return &((struct touch *)c)->rt; }

static size_t pacers(const void *c, const struct kcm_pacer **p, const char **names) {
  (void)c, (void)p, (void)names;
  return 0;
}

static void release(void *c) { kcm_runtime_release(&((struct touch *)c)->rt); }

const struct kcm_controllers_row kcm_touch_row = {
    .options = {"touch", (const char *const[]){"touch", "touch-controller", NULL}, flags,
                sizeof(flags) / sizeof(flags[0]), &defaults, sizeof(defaults)},
    .kind = KCM_KIND_DEPLOYMENT,
    .dependents = KCM_KIND_DEPLOYMENT,
    .account = "touch-controller",
    .kinds = 1u << KCM_KIND_DEPLOYMENT,
    .size = sizeof(struct touch),
    .init = init,
    .runtime = runtime,
    .pacers = pacers,
    .release = release,
};
