/*
 * controllers — the table of kcm's controllers, and the set of them that
 * one process runs.
 *
 * A row (struct kcm_controllers_row) holds what the rest of kcm needs of a
 * controller: its flags (with the names --controllers takes), the kinds
 * it caches, whom it writes as, whether it has a conflict area, and the
 * functions that build, expose and free it; its rate limiter is the
 * client's at KCM_CLIENT_LIMITER_CONTROLLERS plus its place in the table.
 * A controller's row lives in its own directory; the table
 * (src/controllers/table/table.c, linked into the program, not into this
 * module) lists the rows a build runs, at most KCM_CONTROLLERS_MAX. Adding
 * a controller is its directory (its module, which the program links) plus
 * one line there.
 *
 * The set (struct kcm_controllers) holds, for each row --controllers
 * enables, the controller, its writer, its shadow (--shadow) and its
 * token (--use-service-account-credentials), and does to every enabled
 * controller what main asks: start, stop, render metrics. Everything runs
 * on the loop's thread.
 */
#ifndef KCM_CONTROLLERS_H
#define KCM_CONTROLLERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/buf.h"
#include "kcm/client.h"
#include "kcm/conflict.h"
#include "kcm/informer.h"
#include "kcm/intern.h"
#include "kcm/options.h"
#include "kcm/pacer.h"
#include "kcm/runtime.h"
#include "kcm/satoken.h"
#include "kcm/shadow.h"
#include "kcm/shards.h"
#include "kcm/writer.h"

/* What a controller is built from. Borrowed: all of it outlives the
 * controller. */
struct kcm_controllers_env {
  uv_loop_t *loop;
  struct kcm_writer *writer;       /* its own */
  struct kcm_informer *informers;  /* by enum kcm_kind; those of the row's kinds are set up */
  struct kcm_intern *pool;
  const struct kcm_options *opt;
  const void *settings;            /* its flags' values: the row's options.size bytes */
};

#define KCM_CONTROLLERS_PACERS 2 /* pacers a controller may expose */

/* What `kcm why` gives a row's why(): the caches of the row's kinds, in
 * one namespace, synced; the object asked about; the time; and the whole
 * text of a few objects the answer names. */
struct kcm_controllers_why {
  struct kcm_informer *informers; /* by enum kcm_kind */
  const char *ns;
  const char *name;
  uint64_t now_ms;                /* Unix milliseconds */
  bool json;                      /* -o json: one JSON object and a newline */
  bool line;                      /* text in one line: where it stands, what it waits for */
  /* Object `name` of `kind` in ns as a GET of it answered, JSON text of
   * *len bytes, valid during why(); NULL when there is none yet. Asking
   * for one not read yet has it read, and why() is then called again; a
   * read that failed stays NULL until the object changes. */
  const char *(*text)(void *ctx, enum kcm_kind kind, const char *name, size_t *len);
  void *ctx;
};

struct kcm_controllers_row {
  /* options.name ("deployment": logs, metrics, its queue), the names
   * --controllers takes for it, its flags and their defaults */
  struct kcm_options_group options;
  enum kcm_kind kind;        /* of its keys: the objects whose status it writes */
  bool guarded;              /* kind is its conflict area: another's status writes there
                                make it stand aside (kcm/conflict.h) */
  enum kcm_kind dependents;  /* of what its syncs create and own */
  const char *account;       /* "deployment-controller": its User-Agent, and the
                                service account it may write as */
  unsigned kinds;            /* 1 << enum kcm_kind of every cache it reads */
  size_t size;               /* of the controller */
  /* Build the controller in c (size bytes, zeroed) and register with the
   * informers. Returns 0 or an error of kcm_error. */
  int (*init)(void *c, const struct kcm_controllers_env *env);
  struct kcm_runtime *(*runtime)(void *c);
  /* Its pacers and their names (at most KCM_CONTROLLERS_PACERS); returns
   * how many. */
  size_t (*pacers)(const void *c, const struct kcm_pacer **p, const char **names);
  void (*release)(void *c);
  /* kcm why: append to out what the object of the row's kind named in in
   * waits for, as the controller's own planner sees it; *ended: 0 while
   * it waits, 1 done, -1 failed for good. Returns 0, KCM_ENOTFOUND (no
   * such object) or KCM_ENOMEM. NULL: the row answers nothing. */
  int (*why)(const struct kcm_controllers_why *in, struct kcm_buf *out, int *ended);
};

/* Controllers a build may have: one rate limiter and one flag group each. */
#define KCM_CONTROLLERS_MAX (KCM_CLIENT_LIMITERS - KCM_CLIENT_LIMITER_CONTROLLERS)
_Static_assert(KCM_CONTROLLERS_MAX <= KCM_OPTIONS_GROUPS, "a flag group for each controller");
/* The build's rows, NULL-ended, at most KCM_CONTROLLERS_MAX; defined by the
 * program (src/controllers/table/table.c). */
extern const struct kcm_controllers_row *const kcm_controllers_table[];

/* One row's controller, when enabled. */
struct kcm_controllers_one {
  const struct kcm_controllers_row *row;
  void *c;                  /* owned; NULL: not enabled */
  struct kcm_runtime *rt;   /* in c */
  struct kcm_writer writer;
  struct kcm_shadow *shadow; /* owned, with --shadow; else NULL */
  struct kcm_satoken token; /* --use-service-account-credentials */
  bool has_token;
};

struct kcm_controllers {
  struct kcm_controllers_one one[KCM_CONTROLLERS_MAX]; /* in table order */
  size_t rows;              /* in the table */
  const struct kcm_options *opt; /* borrowed */
  struct kcm_informer *informers; /* borrowed, by enum kcm_kind */
  unsigned kinds;           /* 1 << enum kcm_kind of every cache an enabled one reads */
  size_t enabled;
  size_t running;           /* started and not yet stopped */
  int tokens_wanted, tokens_ready;
  bool tokens_started;
  void (*on_token)(void *data);   /* a token came */
  void (*on_stopped)(void *data); /* the last running controller stopped */
  void *data;
  struct kcm_shards *shards;      /* borrowed, with --shards */
  struct kcm_controllers_fence *sharding; /* owned: by shard, whether its caches are whole */
};

/* The rows' flag groups, for kcm_options_parse(): NULL-ended in out
 * (KCM_CONTROLLERS_MAX + 1 of them); returns how many. */
size_t kcm_controllers_options(const struct kcm_options_group *out[KCM_CONTROLLERS_MAX + 1]);
/* The rows --controllers enables and the caches they need (no I/O); opt
 * was parsed with kcm_controllers_options(). */
void kcm_controllers_choose(struct kcm_controllers *s, const struct kcm_options *opt);

/* Build every enabled controller: its writer on the client (a dry one
 * with --shadow), its token, the controller itself. informers is indexed
 * by enum kcm_kind. Logs and returns an error of kcm_error. */
int kcm_controllers_init(struct kcm_controllers *s, uv_loop_t *loop, struct kcm_client *client,
                         struct kcm_informer *informers, struct kcm_intern *pool);
/* Point the guard at each area's controller (NULL for one not enabled)
 * and at the caches of the areas' kinds. 0 or KCM_ENOMEM. */
int kcm_controllers_guard(struct kcm_controllers *s, struct kcm_conflict_guard *g);
/* With --shards, before the caches start: the caches keep only the
 * objects of the namespaces of the shards sh holds or is taking; a shard
 * taken is listed again, and each controller acts in its namespaces once
 * every cache has; a shard given up is forgotten; the syncs in flight
 * are counted per shard for draining (sh->data and its callbacks are
 * set). 0 or KCM_ENOMEM. */
int kcm_controllers_shard(struct kcm_controllers *s, struct kcm_shards *sh);
/* kcm_shards_objects_dropped_total, with --shards. */
int kcm_controllers_shard_metrics(const struct kcm_controllers *s, struct kcm_buf *out);
/* With --use-service-account-credentials, ask for the tokens (once): false
 * until every one has come (on_token runs as each does). */
bool kcm_controllers_tokens_ready(struct kcm_controllers *s);
/* Start taking keys, each enabled controller in table order. */
void kcm_controllers_run(struct kcm_controllers *s);
/* Stop taking keys; on_stopped runs once every one's syncs are over.
 * Returns how many are still running (0: on_stopped will not run). */
size_t kcm_controllers_stop(struct kcm_controllers *s);
/* Stop asking for tokens (a request in flight ends with the client). */
void kcm_controllers_stop_tokens(struct kcm_controllers *s);
/* Events queued or in flight, all controllers together. */
size_t kcm_controllers_events_pending(const struct kcm_controllers *s);
/* The controllers' work queue, event and pacer metric families, and
 * "<name>_controller_stale_sync_skips_total" of each (upstream's name for
 * the ReplicaSet controller's counter since 1.36, the same for the
 * others). */
void kcm_controllers_metrics(const struct kcm_controllers *s, uint64_t now_ms,
                             struct kcm_buf *out);
/* --shadow: the shadows' metric families and the /debug/shadow report. */
int kcm_controllers_shadow_metrics(struct kcm_controllers *s, struct kcm_buf *out);
int kcm_controllers_shadow_report(struct kcm_controllers *s, struct kcm_buf *out);
/* Free the controllers, their shadows and tokens (the loop stopped). */
void kcm_controllers_release(struct kcm_controllers *s);

#endif
