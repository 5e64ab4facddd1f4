/*
 * store — the informer's cache: objects by (namespace, name), kept in the
 * indexes (index.c), and the handlers told of every change once it is in.
 * Also the writes the cache is behind (kcm_informer_written) and the
 * periodic resync.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"
#include "kcm/log.h"

struct objkey {
  const char *ns;
  const char *name;
};

static uint64_t hash_objkey(const void *key) {
  const struct objkey *k = key;
  uint64_t h = kcm_map_hash_bytes(KCM_MAP_HASH_INIT, k->ns, strlen(k->ns));
  h = kcm_map_hash_bytes(h, "/", 1);
  return kcm_map_hash_bytes(h, k->name, strlen(k->name));
}

static bool match_obj(const void *key, const void *entry) {
  const struct objkey *k = key;
  const struct kcm_object *o = entry;
  return strcmp(k->name, o->name) == 0 && strcmp(k->ns, o->ns) == 0;
}

/* A version written to an object and not yet seen in the cache. */
struct behind {
  char *ns, *name; /* owned */
  uint64_t rv;
  uint64_t at; /* loop time of the write, ms */
};

static bool match_behind(const void *key, const void *entry) {
  const struct objkey *k = key;
  const struct behind *b = entry;
  return strcmp(k->name, b->name) == 0 && strcmp(k->ns, b->ns) == 0;
}

/* An object known by its namespace and name alone. */
struct key {
  char *ns, *name; /* owned */
};

static bool match_key(const void *key, const void *entry) {
  const struct objkey *k = key;
  const struct key *e = entry;
  return strcmp(k->name, e->name) == 0 && strcmp(k->ns, e->ns) == 0;
}

static const struct kcm_map_type obj_type = {.hash_key = hash_objkey, .match = match_obj};
static const struct kcm_map_type behind_type = {.hash_key = hash_objkey, .match = match_behind};
static const struct kcm_map_type key_type = {.hash_key = hash_objkey, .match = match_key};

void kcm_informer_keys_init(struct kcm_map *m) { kcm_map_init(m, &key_type); }

int kcm_informer_keys_add(struct kcm_map *m, const char *ns, const char *name) {
  struct objkey k = {ns, name};
  struct key *e;
  if (kcm_map_get(m, &k))
    return 0;
  if (!(e = malloc(sizeof(*e))))
    return KCM_ENOMEM;
  e->ns = strdup(ns);
  e->name = strdup(name);
  if (!e->ns || !e->name || kcm_map_put(m, &k, e, NULL)) {
    free(e->ns);
    free(e->name);
    free(e);
    return KCM_ENOMEM;
  }
  return 1;
}

bool kcm_informer_keys_has(const struct kcm_map *m, const char *ns, const char *name) {
  struct objkey k = {ns, name};
  return m->len && kcm_map_get(m, &k);
}

static void free_key(struct key *e) {
  if (e) {
    free(e->ns);
    free(e->name);
    free(e);
  }
}

void kcm_informer_keys_remove(struct kcm_map *m, const char *ns, const char *name) {
  struct objkey k = {ns, name};
  if (m->len)
    free_key(kcm_map_remove(m, &k));
}

void kcm_informer_keys_clear(struct kcm_map *m) {
  struct kcm_map_iter it;
  struct key *e;
  kcm_map_iter_init(&it, m);
  while ((e = kcm_map_next(&it)))
    free_key(e);
  kcm_map_release(m);
  kcm_map_init(m, &key_type);
}

static void free_behind(struct behind *b) {
  if (b) {
    free(b->ns);
    free(b->name);
    free(b);
  }
}

/* Forget a write to ns/name once the cache holds version rv or newer
 * (rv 0: the object is gone, forget it in any case). */
static void caught_up(struct kcm_informer *inf, const char *ns, const char *name, uint64_t rv) {
  struct objkey k = {ns, name};
  struct behind *b;
  if (!inf->behind.len || !(b = kcm_map_get(&inf->behind, &k)))
    return;
  if (rv == 0 || rv >= b->rv)
    free_behind(kcm_map_remove(&inf->behind, &k));
}

/* Put `o` (taking over the caller's reference) and tell the handlers. */
void kcm_informer_upsert(struct kcm_informer *inf, struct kcm_object *o) {
  struct objkey k = {o->ns, o->name};
  void *prev = NULL;
  uint32_t i;

  if (kcm_map_put(&inf->objects, &k, o, &prev)) {
    kcm_error("cache insert failed kind=\"%s\" namespace=\"%s\" name=\"%s\" err=\"out of "
              "memory\"", kcm_api_kind_name(inf->opts.kind), o->ns, o->name);
    kcm_api_unref(o, inf->pool);
    return;
  }
  if (prev)
    kcm_informer_unlink(inf, prev);
  kcm_informer_link(inf, o);
  caught_up(inf, o->ns, o->name, o->rv);
  kcm_informer_keys_remove(&inf->unreadable, o->ns, o->name); /* read again */
  for (i = 0; i < inf->nhandlers; i++) {
    struct kcm_informer_handler *h = &inf->handlers[i];
    if (prev && h->updated)
      h->updated(h->ctx, prev, o);
    else if (!prev && h->added)
      h->added(h->ctx, o);
  }
  if (prev)
    kcm_api_unref(prev, inf->pool);
}

/* Remove the object with o's key; report `final` (or the cached one). */
void kcm_informer_delete(struct kcm_informer *inf, const char *ns, const char *name,
                         struct kcm_object *final, bool unknown) {
  struct objkey k = {ns, name};
  struct kcm_object *old = kcm_map_remove(&inf->objects, &k);
  struct kcm_object *report;
  uint32_t i;
  kcm_informer_keys_remove(&inf->unreadable, ns, name);
  if (!old)
    return;
  kcm_informer_unlink(inf, old);
  caught_up(inf, ns, name, 0);
  report = final ? final : old;
  for (i = 0; i < inf->nhandlers; i++) {
    struct kcm_informer_handler *h = &inf->handlers[i];
    if (h->deleted)
      h->deleted(h->ctx, report, unknown);
  }
  kcm_api_unref(old, inf->pool);
}

/* Apply a full list: upsert everything in it, delete what it lacks and
 * could read. */
void kcm_informer_replace(struct kcm_informer *inf, struct kcm_object **objs, size_t n) {
  struct kcm_map present;
  struct kcm_map_iter it;
  struct kcm_object *o, **gone = NULL;
  size_t i, ngone = 0;

  kcm_map_init(&present, &obj_type);
  for (i = 0; i < n; i++) {
    struct objkey k = {objs[i]->ns, objs[i]->name};
    kcm_map_put(&present, &k, objs[i], NULL);
  }
  if (inf->objects.len && !(gone = malloc(inf->objects.len * sizeof(*gone))))
    kcm_error("relist: out of memory finding vanished objects kind=\"%s\"",
              kcm_api_kind_name(inf->opts.kind));
  kcm_map_iter_init(&it, &inf->objects);
  while (gone && !inf->list_blind && (o = kcm_map_next(&it))) {
    struct objkey k = {o->ns, o->name};
    if (!kcm_map_get(&present, &k) && !kcm_informer_keys_has(&inf->list_unreadable, o->ns, o->name))
      gone[ngone++] = o;
  }
  kcm_map_release(&present);
  for (i = 0; i < ngone; i++)
    kcm_informer_delete(inf, gone[i]->ns, gone[i]->name, NULL, true);
  free(gone);
  for (i = 0; i < n; i++)
    kcm_informer_upsert(inf, objs[i]);
  /* What the list could not read is what is unreadable now. */
  kcm_informer_keys_clear(&inf->unreadable);
  inf->unreadable = inf->list_unreadable;
  kcm_informer_keys_init(&inf->list_unreadable);
  inf->blind = inf->list_blind;
  inf->list_blind = false;
}

/* Forget the keys of m in namespaces keep() no longer names. */
static void drop_unkept_keys(struct kcm_informer *inf, struct kcm_map *m) {
  struct kcm_map_iter it;
  struct key *e, **gone = NULL;
  size_t n = 0, i;
  kcm_map_iter_init(&it, m);
  while ((e = kcm_map_next(&it))) {
    struct key **grown;
    if (inf->keep(inf->keep_ctx, e->ns, strlen(e->ns)))
      continue;
    if (!(grown = kcm_buf_grow_items(gone, n, sizeof(*grown))))
      break; /* the rest at the next purge or list */
    gone = grown;
    gone[n++] = e;
  }
  for (i = 0; i < n; i++) {
    struct objkey k = {gone[i]->ns, gone[i]->name};
    free_key(kcm_map_remove(m, &k));
  }
  free(gone);
}

size_t kcm_informer_purge(struct kcm_informer *inf) {
  struct kcm_map_iter it;
  struct kcm_object *o, **gone = NULL;
  size_t i, n = 0, kept;

  if (!inf->keep)
    return 0;
  kcm_map_iter_init(&it, &inf->objects);
  while ((o = kcm_map_next(&it))) {
    struct kcm_object **grown;
    if (inf->keep(inf->keep_ctx, o->ns, strlen(o->ns)))
      continue;
    if (!(grown = kcm_buf_grow_items(gone, n, sizeof(*grown))))
      break; /* the rest at the next purge or list */
    gone = grown;
    gone[n++] = o;
  }
  /* and those a list in flight has gathered */
  for (i = kept = 0; i < inf->npending; i++) {
    struct kcm_object *p = inf->pending[i];
    if (inf->keep(inf->keep_ctx, p->ns, strlen(p->ns)))
      inf->pending[kept++] = p;
    else
      kcm_api_unref(p, inf->pool);
  }
  inf->npending = kept;
  for (i = 0; i < n; i++) {
    struct objkey k = {gone[i]->ns, gone[i]->name};
    kcm_map_remove(&inf->objects, &k);
    kcm_informer_unlink(inf, gone[i]);
    caught_up(inf, gone[i]->ns, gone[i]->name, 0);
    kcm_informer_keys_remove(&inf->unreadable, gone[i]->ns, gone[i]->name);
    kcm_api_unref(gone[i], inf->pool);
  }
  free(gone);
  drop_unkept_keys(inf, &inf->unreadable);
  drop_unkept_keys(inf, &inf->list_unreadable);
  return n;
}

void kcm_informer_store_init(struct kcm_informer *inf) {
  kcm_map_init(&inf->objects, &obj_type);
  kcm_map_init(&inf->behind, &behind_type);
  kcm_informer_keys_init(&inf->unreadable);
  kcm_informer_keys_init(&inf->list_unreadable);
}

void kcm_informer_store_release(struct kcm_informer *inf) {
  struct kcm_map_iter it;
  struct kcm_object *o;
  struct behind *bh;

  kcm_map_iter_init(&it, &inf->objects);
  while ((o = kcm_map_next(&it)))
    kcm_api_unref(o, inf->pool);
  kcm_map_release(&inf->objects);
  kcm_map_iter_init(&it, &inf->behind);
  while ((bh = kcm_map_next(&it)))
    free_behind(bh);
  kcm_map_release(&inf->behind);
  kcm_informer_keys_clear(&inf->unreadable);
  kcm_informer_keys_clear(&inf->list_unreadable);
  kcm_map_release(&inf->unreadable);
  kcm_map_release(&inf->list_unreadable);
}

int kcm_informer_add_handler(struct kcm_informer *inf, const struct kcm_informer_handler *h) {
  struct kcm_informer_handler *grown =
      realloc(inf->handlers, (inf->nhandlers + 1) * sizeof(*grown));
  if (!grown)
    return KCM_ENOMEM;
  inf->handlers = grown;
  inf->handlers[inf->nhandlers++] = *h;
  return 0;
}

void kcm_informer_resync(uv_timer_t *t) {
  struct kcm_informer *inf = t->data;
  struct kcm_map_iter it;
  struct kcm_object *o;
  uint32_t i;
  if (!inf->synced)
    return;
  kcm_map_iter_init(&it, &inf->objects);
  while ((o = kcm_map_next(&it))) {
    for (i = 0; i < inf->nhandlers; i++) {
      if (inf->handlers[i].updated)
        inf->handlers[i].updated(inf->handlers[i].ctx, o, o);
    }
  }
}

/* --- reads and writes ---------------------------------------------------------------- */

struct kcm_object *kcm_informer_get(const struct kcm_informer *inf, const char *ns,
                                    const char *name) {
  struct objkey k = {ns, name};
  return kcm_map_get(&inf->objects, &k);
}

void kcm_informer_written(struct kcm_informer *inf, const char *ns, const char *name,
                          uint64_t rv) {
  struct objkey k = {ns, name};
  struct kcm_object *o = kcm_map_get(&inf->objects, &k);
  struct behind *b;
  if (!rv || !o || o->rv >= rv)
    return; /* nothing cached to be behind, or already caught up */
  b = kcm_map_get(&inf->behind, &k);
  if (!b) {
    b = calloc(1, sizeof(*b));
    if (!b || !(b->ns = strdup(ns)) || !(b->name = strdup(name)) ||
        kcm_map_put(&inf->behind, &k, b, NULL)) {
      free_behind(b); /* without the record a write may conflict, no more */
      return;
    }
  }
  if (rv > b->rv)
    b->rv = rv;
  b->at = uv_now(inf->loop);
}

bool kcm_informer_behind(struct kcm_informer *inf, const struct kcm_object *o) {
  struct objkey k = {o->ns, o->name};
  struct behind *b;
  if (!inf->behind.len || !(b = kcm_map_get(&inf->behind, &k)))
    return false;
  if (o->rv >= b->rv || uv_now(inf->loop) - b->at > KCM_INFORMER_BEHIND_TTL_MS) {
    if (o->rv < b->rv)
      kcm_warn("the cache never caught up with a write kind=\"%s\" namespace=\"%s\" "
               "name=\"%s\" written=%llu cached=%llu", kcm_api_kind_name(inf->opts.kind),
               o->ns, o->name, (unsigned long long)b->rv, (unsigned long long)o->rv);
    free_behind(kcm_map_remove(&inf->behind, &k));
    return false;
  }
  return true;
}

bool kcm_informer_seen(const struct kcm_informer *inf, uint64_t rv) {
  uint64_t at;
  return !inf->rv[0] || !kcm_api_parse_rv(inf->rv, &at) || at >= rv;
}

size_t kcm_informer_len(const struct kcm_informer *inf) { return inf->objects.len; }

