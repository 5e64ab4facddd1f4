/*
 * runtime — what every controller's syncs share: workers taking keys from
 * a rate-limited work queue, the sync job each key becomes, and what
 * happens to the key when the sync is over.
 *
 * A controller gives the runtime three functions (struct kcm_runtime_ops):
 * start plans the sync of a key from the cache and hands the runtime its
 * plan (kcm_runtime_plan); send sends one step of it; release frees what
 * the controller kept in its job. The job (struct kcm_runtime_job, the
 * first member of the controller's own job struct) counts the requests in
 * flight, holds references to the cached objects the sync reads, and keeps
 * the sync's first error.
 *
 * A plan is a list of steps in waves. The runtime sends every step of a
 * wave at once and the next wave once each request of the wave (and each
 * request its answers sent in turn) has answered. A step that fails may
 * skip the steps of its group not yet sent (kcm_runtime_skip_group) or
 * end the plan after its wave (kcm_runtime_halt); a step that needs no
 * request sends none.
 *
 * A sync is over when its plan has nothing left to send and nothing is in
 * flight. Its
 * key is then done in the queue and, as upstream's processNextWorkItem
 * decides: after an error, queued again with backoff (forgotten when the
 * job says the error is not worth retrying, or dropped after max_retries
 * failures in a row); after success forgotten, and queued again at once
 * (requeue), with backoff (requeue_after_ms 0) or later (> 0).
 *
 * Workers: at most `workers` syncs run at once. A sync whose only request
 * left is its status write may give its worker back (upstream's worker
 * would be blocked on that write; here it is not, so another key may run
 * while the key stays in processing until the answer).
 *
 * Everything runs on the loop's thread. Requests go through the writer,
 * so a test can answer them.
 */
#ifndef KCM_RUNTIME_H
#define KCM_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/api.h"
#include "kcm/events.h"
#include "kcm/informer.h"
#include "kcm/intern.h"
#include "kcm/labels.h"
#include "kcm/map.h"
#include "kcm/workqueue.h"
#include "kcm/writer.h"

struct kcm_runtime;

struct kcm_runtime_job {
  struct kcm_runtime *rt;
  struct kcm_runtime_job *next;
  char *key;                 /* owned: "namespace/name" */
  char *ns;                  /* owned: the key's namespace */
  const char *name;          /* the key's name, in the same allocation */
  struct kcm_object *object; /* the key's object, once start found it (and held it) */
  struct kcm_object **held;  /* references dropped when the sync is over */
  size_t nheld;
  int outstanding;           /* requests in flight */
  uint32_t sent;             /* requests sent */
  int err;                   /* the first error: the key is retried */
  char *err_msg;             /* owned; may be NULL */
  bool forget;               /* the error is not worth retrying */
  bool requeue;              /* sync again at once (not an error) */
  int64_t requeue_after_ms;  /* after success: -1 no, 0 with backoff, > 0 after that long */
  bool gave_back;            /* the worker was given back */
  uint64_t wrote_rv;         /* the newest version its writes to dependents got back */
  /* the plan (see kcm_runtime_plan) */
  const char *steps;         /* borrowed from the controller's job */
  size_t nsteps, step_size;
  size_t step;               /* the first step not yet sent */
  uint32_t skip_group;       /* while skipping */
  bool skipping;
  bool halted;               /* no wave after the one in flight */
};

/* The head of each step of a plan, the first member of the controller's
 * own step struct. Waves never decrease along a plan. */
struct kcm_runtime_step {
  uint32_t wave;  /* sent with the steps of the same wave */
  uint32_t group; /* skipped with the steps of the same group */
};

#define KCM_RUNTIME_BLIND UINT64_MAX /* a watch is down */

struct kcm_runtime_ops {
  const char *kind;          /* "replicaset": the key's name in logs, the queue's name,
                              * and the events' source "replicaset-controller" */
  size_t job_size;           /* of the controller's job, which begins with the runtime's */
  uint32_t max_retries;      /* failures in a row before a key is dropped; 0: never */
  void (*start)(struct kcm_runtime_job *j);
  /* Send step (its index i in the plan): kcm_runtime_send()s, or none. */
  void (*send)(struct kcm_runtime_job *j, const void *step, size_t i);
  void (*release)(struct kcm_runtime_job *j); /* may be NULL */
};

/* Whether the API server keeps a status field that not every server does
 * (one a feature gate may drop, or a release may not know): unknown until
 * a status write carrying it is answered, or until a cached object shows
 * it. Start it with kcm_runtime_field_init(). */
struct kcm_runtime_field {
  const char *name;  /* in status, e.g. "terminatingReplicas" */
  int8_t kept;       /* -1 unknown, 0 no, 1 yes */
  bool asking;       /* a write carrying it is in flight */
};

struct kcm_runtime {
  uv_loop_t *loop;
  struct kcm_workqueue queue;
  struct kcm_writer *writer;   /* borrowed */
  struct kcm_intern *pool;     /* borrowed: the cache's strings */
  const struct kcm_runtime_ops *ops;
  void *ctx;                   /* the controller */
  struct kcm_events events;    /* its recorder, as "<kind>-controller" */
  uint32_t workers;
  uint32_t running;            /* syncs holding a worker */
  bool pumping;                /* inside the loop starting syncs */
  bool stopping;
  bool paused;                 /* standing aside: keys wait in the queue */
  /* standing aside in some namespaces: a key whose namespace gate() names
   * leaves the queue and waits in `held` (owned "namespace/name" copies) */
  bool (*gate)(void *ctx, const char *ns, size_t n);
  void *gate_ctx;
  /* acting only in the namespaces owns() names (sharding); the others'
   * keys wait in `held` too */
  bool (*owns)(void *ctx, const char *ns, size_t n);
  void *owns_ctx;
  struct kcm_map held;
  struct kcm_runtime_job *jobs;
  struct kcm_informer *watched[KCM_KIND_COUNT]; /* borrowed, by kind: the informers
                                                  whose events it handles */
  struct kcm_informer *dependents; /* borrowed; see kcm_runtime_follow() */
  struct kcm_map wrote;        /* key -> the newest version its syncs' writes to
                                  dependents got back, until that cache has it */
  void (*on_stopped)(struct kcm_runtime *rt);
  void *data;                  /* free for the owner's use (on_stopped) */
  uint64_t (*wall_ms)(void);   /* see kcm_runtime_wall_ms() */
  struct {
    uint64_t syncs;
    uint64_t errors;
    uint64_t dropped;
    uint64_t adoptions;        /* claims sent */
    uint64_t releases;
    uint64_t stale_own;        /* syncs put off: the cached object behind a write to it */
    uint64_t stale_dependents; /* syncs put off: dependents behind a sync's writes */
  } stats;
};

/* Borrowed pointers must outlive the runtime. */
void kcm_runtime_init(struct kcm_runtime *rt, uv_loop_t *loop, const struct kcm_runtime_ops *ops,
                      void *ctx, uint32_t workers, struct kcm_writer *writer,
                      struct kcm_intern *pool);
/* Register the controller's handlers of inf's events (h copied, its ctx
 * set to the controller); before the informer starts. Returns 0 or
 * KCM_ENOMEM. */
int kcm_runtime_watch(struct kcm_runtime *rt, struct kcm_informer *inf,
                      const struct kcm_informer_handler *h);
/* Start taking keys. */
void kcm_runtime_run(struct kcm_runtime *rt);
/* Stand aside (start no sync; those in flight finish; keys keep coming and
 * wait, each once) or take keys again. */
void kcm_runtime_pause(struct kcm_runtime *rt, bool paused);
/* Hold back the keys of the namespaces gate(ctx, ns, n) names (NULL:
 * none): such a key leaves the queue when its turn comes and waits, once,
 * until kcm_runtime_release_held() queues every waiting key again. */
void kcm_runtime_gate(struct kcm_runtime *rt, bool (*gate)(void *ctx, const char *ns, size_t n),
                      void *ctx);
void kcm_runtime_release_held(struct kcm_runtime *rt);
/* Act only in the namespaces owns(ctx, ns, n) names (NULL: every one):
 * the keys of the others wait as a gate's do, until
 * kcm_runtime_release_held(). */
void kcm_runtime_own(struct kcm_runtime *rt, bool (*owns)(void *ctx, const char *ns, size_t n),
                     void *ctx);
/* Forget the held keys of the namespaces `in` names (no longer this
 * process's to sync); returns how many. */
size_t kcm_runtime_drop_held(struct kcm_runtime *rt,
                             bool (*in)(void *ctx, const char *ns, size_t n), void *ctx);
/* How many syncs in flight are of a namespace `in` names. */
size_t kcm_runtime_syncing(const struct kcm_runtime *rt,
                           bool (*in)(void *ctx, const char *ns, size_t n), void *ctx);
/* Stop taking keys; on_stopped runs once the syncs in flight are over and
 * the queue is closed. */
void kcm_runtime_stop(struct kcm_runtime *rt, void (*on_stopped)(struct kcm_runtime *rt));
void kcm_runtime_release(struct kcm_runtime *rt);

/* Queue the key of o ("namespace/name"), or key, for a watch event. */
void kcm_runtime_enqueue(struct kcm_runtime *rt, const struct kcm_object *o);
void kcm_runtime_enqueue_key(struct kcm_runtime *rt, const char *key);
/* Queue key in delay_ms (a watch event whose sync may wait). */
void kcm_runtime_enqueue_after(struct kcm_runtime *rt, const char *key, uint64_t delay_ms);
/* Sync j's key again in delay_ms, besides what becomes of it when this
 * sync is over. */
void kcm_runtime_again(struct kcm_runtime_job *j, uint64_t delay_ms);
/* Queue every object of inf in o's namespace whose selector (selector_of)
 * is not empty and takes o's labels, as upstream finds the owners that
 * would adopt an orphan (none for an object without labels); returns how
 * many. */
size_t kcm_runtime_enqueue_selecting(struct kcm_runtime *rt, const struct kcm_informer *inf,
                                     const struct kcm_object *o,
                                     const struct kcm_selector *(*selector_of)(
                                         const struct kcm_object *owner));

/* Follow the writes syncs make to the objects of `dependents` (a
 * ReplicaSet's pods, a Deployment's ReplicaSets): creates and owner
 * patches report what they got back with kcm_runtime_wrote(), and the
 * key's next sync asks kcm_runtime_stale() first. Call before running. */
void kcm_runtime_follow(struct kcm_runtime *rt, struct kcm_informer *dependents);
/* A write of j to a dependent was answered at resourceVersion rv. */
void kcm_runtime_wrote(struct kcm_runtime_job *j, uint64_t rv);
/* Whether the dependents' cache has not yet seen what the key's last
 * syncs wrote (counted in stats.stale_dependents): the sync should end
 * without acting, and the dependent's event queues the key again. A record
 * goes once seen, when the owner's uid changes, or after
 * KCM_INFORMER_BEHIND_TTL_MS. Call once j->object is set. */
bool kcm_runtime_stale(struct kcm_runtime_job *j);
/* The syncs put off, stats.stale_own and stats.stale_dependents, as the
 * counter `family` with labels group and resource: own and dependents
 * each {group, resource}. Returns 0 or an error of kcm_metrics. */
int kcm_runtime_stale_metrics(const struct kcm_runtime *rt, const char *family,
                              const char *const own[2], const char *const dependents[2],
                              struct kcm_buf *out);

/* Since when every watch of rt's informers has been up (loop ms), or
 * KCM_RUNTIME_BLIND while one is down. */
uint64_t kcm_runtime_watching_since(const struct kcm_runtime *rt);

/* The wall clock in ms (what the planners compare timestamps with). */
uint64_t kcm_runtime_now_ms(void);
/* rt's wall clock: rt->wall_ms, kcm_runtime_now_ms unless a test set
 * another. */
uint64_t kcm_runtime_wall_ms(const struct kcm_runtime *rt);

/* Not yet known, `name` in status. */
void kcm_runtime_field_init(struct kcm_runtime_field *f, const char *name);
/* A cached object's status has the field (have >= 0): the server kept it. */
void kcm_runtime_field_seen(struct kcm_runtime_field *f, int64_t have);
/* Whether the next status write should carry the field to find out if the
 * server keeps it: true once while it is unknown, until the answer. */
bool kcm_runtime_field_ask(struct kcm_runtime_field *f);
/* The answer to that write: the object written (NULL when the write
 * failed: the next write asks again), kept if its status has the field. */
void kcm_runtime_field_answer(struct kcm_runtime_field *f, const char *body, size_t len,
                              const char *kind);

/* The plan the sync runs once start returns: n steps of `size` bytes
 * each, each beginning with its struct kcm_runtime_step. Borrowed: it
 * must live until the sync is over. No plan: the sync is over at once. */
void kcm_runtime_plan(struct kcm_runtime_job *j, const void *steps, size_t n, size_t size);
/* The steps of `group` not yet sent are skipped. */
void kcm_runtime_skip_group(struct kcm_runtime_job *j, uint32_t group);
/* No step of a later wave is sent: the sync is over once the requests in
 * flight have answered. */
void kcm_runtime_halt(struct kcm_runtime_job *j);
/* Keep o alive until the sync is over. What a sync holds, with its object,
 * is what it read: hold every object the plan depends on (--shadow takes
 * a change to one of them as a change to the key). */
void kcm_runtime_hold(struct kcm_runtime_job *j, struct kcm_object *o);
/* Record the sync's first error. */
void kcm_runtime_fail(struct kcm_runtime_job *j, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Send req through the writer, its origin set to j's key; done(resp, data)
 * must end with kcm_runtime_answered(j). On failure (a request that could
 * not be built, or the writer refused it) the job has failed and done
 * never runs. */
int kcm_runtime_send(struct kcm_runtime_job *j, struct kcm_write *req, kcm_client_done_cb done,
                     void *data);
/* A request of j has answered: when it was the last in flight, the sync
 * moves on to its plan's next wave, and may be over, freeing j. */
void kcm_runtime_answered(struct kcm_runtime_job *j);
/* Adoption and release, as upstream's ControllerRefManager does them:
 * before the first adoption the owner (j->object) is read again (GET by name) and the
 * sync fails unless it is the same object (uid) and not being deleted;
 * each claim patches the object's ownerReferences (uid-guarded), a
 * NotFound or Invalid answer meaning the object is gone or changed, and
 * any other error failing the sync. Either failing halts the plan (as
 * upstream, which neither manages nor writes status after a claim error). */
void kcm_runtime_recheck(struct kcm_runtime_job *j);
/* Adopt or release o; the owner is j->object. Counted in stats when sent. */
void kcm_runtime_claim(struct kcm_runtime_job *j, const struct kcm_object *o, bool adopt);
/* The sync waits only for requests it no longer needs a worker for. */
void kcm_runtime_give_back(struct kcm_runtime_job *j);

#endif
