/* events — the correlator: client-go's spam filter, aggregator and
 * de-duplicating logger, in the same order and with the same limits; see
 * include/kcm/events.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/error.h"
#include "kcm/events.h"

#define CACHE_ENTRIES 4096        /* client-go's maxLruCacheEntries */
#define AGGREGATE_MAX 10          /* defaultAggregateMaxEvents */
#define AGGREGATE_INTERVAL_MS 600000
#define SPAM_BURST 25.0           /* defaultSpamBurst */
#define SPAM_REFILL_MS 300000.0   /* defaultSpamQPS: one token every 5 minutes */

/* An entry of one of the three caches; each cache uses its own part. */
struct kcm_event_entry {
  struct kcm_event_entry *prev, *next; /* most recently used first */
  char *key;
  union {
    struct { /* spam filter */
      double tokens;
      uint64_t refilled_ms;
    } spam;
    struct { /* aggregator */
      uint64_t locals[AGGREGATE_MAX];
      uint64_t seen_ms;
      size_t n;
    } agg;
    struct { /* logger */
      char *name; /* the event's, owned; NULL until first logged */
      uint32_t count;
      char first[32];
    } log;
  } u;
};

static uint64_t hash_str(const char *s) {
  return kcm_map_hash_bytes(KCM_MAP_HASH_INIT, s, strlen(s));
}

static const struct kcm_map_type entry_type = KCM_MAP_STRING_KEYED(struct kcm_event_entry, key);

static void cache_init(struct kcm_event_cache *c, bool names) {
  memset(c, 0, sizeof(*c));
  kcm_map_init(&c->map, &entry_type);
  c->limit = CACHE_ENTRIES;
  c->names = names;
}

static void unlink_entry(struct kcm_event_cache *c, struct kcm_event_entry *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    c->head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    c->tail = e->prev;
  e->prev = e->next = NULL;
}

static void push_front(struct kcm_event_cache *c, struct kcm_event_entry *e) {
  e->next = c->head;
  if (c->head)
    c->head->prev = e;
  c->head = e;
  if (!c->tail)
    c->tail = e;
}

static void free_entry(const struct kcm_event_cache *c, struct kcm_event_entry *e) {
  if (c->names)
    free(e->u.log.name);
  free(e->key);
  free(e);
}

/* The entry for key, made most recent; created (evicting the least recently
 * used past the limit) when missing. NULL when out of memory. */
static struct kcm_event_entry *lookup(struct kcm_event_cache *c, const char *key) {
  struct kcm_event_entry *e = kcm_map_get(&c->map, key);
  if (e) {
    unlink_entry(c, e);
    push_front(c, e);
    return e;
  }
  e = calloc(1, sizeof(*e));
  if (!e || !(e->key = strdup(key)) || kcm_map_put(&c->map, e->key, e, NULL)) {
    if (e)
      free(e->key);
    free(e);
    return NULL;
  }
  push_front(c, e);
  if (c->map.len > c->limit) {
    struct kcm_event_entry *old = c->tail;
    unlink_entry(c, old);
    kcm_map_remove(&c->map, old->key);
    free_entry(c, old);
  }
  return e;
}

static void cache_release(struct kcm_event_cache *c) {
  struct kcm_event_entry *e = c->head, *next;
  for (; e; e = next) {
    next = e->next;
    free_entry(c, e);
  }
  kcm_map_release(&c->map);
  memset(c, 0, sizeof(*c));
}

void kcm_event_correlator_init(struct kcm_event_correlator *k) {
  cache_init(&k->spam, false);
  cache_init(&k->aggregate, false);
  cache_init(&k->log, true);
}

void kcm_event_correlator_release(struct kcm_event_correlator *k) {
  cache_release(&k->spam);
  cache_release(&k->aggregate);
  cache_release(&k->log);
}

static char *join(const struct kcm_event_fields *f, bool with_reason, const char *message) {
  char *out = NULL;
  int n;
  if (with_reason)
    n = asprintf(&out, "%s%s%s%s%s%s%s%s%s%s", f->component, f->kind, f->ns, f->name, f->uid,
                 f->api_version, f->type, f->reason, message ? "\x1f" : "",
                 message ? message : "");
  else
    n = asprintf(&out, "%s%s%s%s%s%s", f->component, f->kind, f->ns, f->name, f->uid,
                 f->api_version);
  return n < 0 ? NULL : out;
}

int kcm_event_correlate(struct kcm_event_correlator *k, const struct kcm_event_fields *f,
                        uint64_t now_ms, const char *now, struct kcm_event_outcome *out) {
  struct kcm_event_entry *agg, *log, *spam;
  char *agg_key = join(f, true, NULL), *event_key = join(f, true, f->message), *spam_key = NULL;
  const char *cache_key;
  uint64_t local = hash_str(f->message);
  size_t i;
  int err = KCM_ENOMEM;

  memset(out, 0, sizeof(*out));
  if (!agg_key || !event_key || !(agg = lookup(&k->aggregate, agg_key)))
    goto done;
  /* Aggregate: similar events (all but the message) past the threshold
   * within the interval become one "(combined from similar events)" event. */
  if (now_ms - agg->u.agg.seen_ms > AGGREGATE_INTERVAL_MS || !agg->u.agg.seen_ms)
    agg->u.agg.n = 0;
  agg->u.agg.seen_ms = now_ms ? now_ms : 1;
  for (i = 0; i < agg->u.agg.n && agg->u.agg.locals[i] != local; i++)
    ;
  if (i == agg->u.agg.n)
    agg->u.agg.locals[agg->u.agg.n++] = local;
  if (agg->u.agg.n < AGGREGATE_MAX) {
    cache_key = event_key;
  } else {
    agg->u.agg.n--; /* keep the set below the threshold, as client-go's PopAny does */
    out->aggregated = true;
    cache_key = agg_key;
  }
  /* Count repeats: the same event (or aggregate) again is a patch of its
   * count, lastTimestamp and message. */
  if (!(log = lookup(&k->log, cache_key)))
    goto done;
  if (log->u.log.count > 0) {
    out->repeat = true;
    out->count = log->u.log.count + 1;
    snprintf(out->first, sizeof(out->first), "%s", log->u.log.first);
    snprintf(out->name, sizeof(out->name), "%s", log->u.log.name);
  } else {
    out->count = 1;
    snprintf(out->first, sizeof(out->first), "%s", now);
    snprintf(out->name, sizeof(out->name), "%s.%llx", f->name, (unsigned long long)f->nanos);
    if (!(log->u.log.name = strdup(out->name)))
      goto done;
    snprintf(log->u.log.first, sizeof(log->u.log.first), "%s", out->first);
  }
  log->u.log.count = out->count;
  /* Spam filter: a bucket of 25 per source and object, one more every 5 minutes. */
  if (!(spam_key = join(f, false, NULL)) || !(spam = lookup(&k->spam, spam_key)))
    goto done;
  if (!spam->u.spam.refilled_ms) {
    spam->u.spam.tokens = SPAM_BURST;
    spam->u.spam.refilled_ms = now_ms;
  }
  spam->u.spam.tokens += (double)(now_ms - spam->u.spam.refilled_ms) / SPAM_REFILL_MS;
  if (spam->u.spam.tokens > SPAM_BURST)
    spam->u.spam.tokens = SPAM_BURST;
  spam->u.spam.refilled_ms = now_ms;
  if (spam->u.spam.tokens >= 1.0)
    spam->u.spam.tokens -= 1.0;
  else
    out->skip = true;
  err = 0;
done:
  free(agg_key);
  free(event_key);
  free(spam_key);
  return err;
}
