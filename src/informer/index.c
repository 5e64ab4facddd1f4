/*
 * index — the informer's indexes: by namespace and by controller uid (the
 * uid of the owner reference with controller: true; objects without one
 * share the bucket of orphans). A bucket heads a list threaded through
 * the objects' own links (ns_prev/ns_next, own_prev/own_next), so an
 * object is added or removed in constant time; a bucket goes when empty.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"

struct kcm_informer_bucket {
  const char *ns;     /* by_ns: pooled namespace */
  struct kcm_uid uid; /* by_owner */
  struct kcm_object *head;
  size_t n;
};

static uint64_t hash_ns(const void *key) {
  return kcm_map_hash_bytes(KCM_MAP_HASH_INIT, key, strlen(key));
}

static bool match_ns(const void *key, const void *entry) {
  return strcmp(key, ((const struct kcm_informer_bucket *)entry)->ns) == 0;
}

static uint64_t hash_uid(const void *key) {
  return kcm_map_hash_bytes(KCM_MAP_HASH_INIT, key, sizeof(struct kcm_uid));
}

static bool match_uid(const void *key, const void *entry) {
  return kcm_api_uid_equal(key, &((const struct kcm_informer_bucket *)entry)->uid);
}

static const struct kcm_map_type ns_type = {.hash_key = hash_ns, .match = match_ns};
static const struct kcm_map_type owner_type = {.hash_key = hash_uid, .match = match_uid};

static const struct kcm_uid no_owner; /* all zero: the bucket of orphans */

/* The owner-index bucket of an object: its controller's uid, or no_owner. */
static const struct kcm_uid *owner_of(const struct kcm_object *o) {
  return o->has_controller ? &o->controller.uid : &no_owner;
}

void kcm_informer_link(struct kcm_informer *inf, struct kcm_object *o) {
  struct kcm_informer_bucket *b = kcm_map_get(&inf->by_ns, o->ns);
  if (!b && (b = calloc(1, sizeof(*b)))) {
    b->ns = kcm_intern_ref(o->ns);
    if (kcm_map_put(&inf->by_ns, o->ns, b, NULL)) {
      kcm_intern_put(inf->pool, b->ns);
      free(b);
      b = NULL;
    }
  }
  o->ns_prev = NULL;
  o->ns_next = NULL;
  if (b) {
    o->ns_next = b->head;
    if (b->head)
      b->head->ns_prev = o;
    b->head = o;
    b->n++;
  }
  o->own_prev = o->own_next = NULL;
  b = kcm_map_get(&inf->by_owner, owner_of(o));
  if (!b && (b = calloc(1, sizeof(*b)))) {
    b->uid = *owner_of(o);
    if (kcm_map_put(&inf->by_owner, &b->uid, b, NULL)) {
      free(b);
      b = NULL;
    }
  }
  if (b) {
    o->own_next = b->head;
    if (b->head)
      b->head->own_prev = o;
    b->head = o;
    b->n++;
  }
}

void kcm_informer_unlink(struct kcm_informer *inf, struct kcm_object *o) {
  struct kcm_informer_bucket *b = kcm_map_get(&inf->by_ns, o->ns);
  if (b) {
    if (o->ns_prev)
      o->ns_prev->ns_next = o->ns_next;
    else if (b->head == o)
      b->head = o->ns_next;
    if (o->ns_next)
      o->ns_next->ns_prev = o->ns_prev;
    if (--b->n == 0) {
      kcm_map_remove(&inf->by_ns, o->ns);
      kcm_intern_put(inf->pool, b->ns);
      free(b);
    }
  }
  o->ns_prev = o->ns_next = NULL;
  b = kcm_map_get(&inf->by_owner, owner_of(o));
  if (b) {
    if (o->own_prev)
      o->own_prev->own_next = o->own_next;
    else if (b->head == o)
      b->head = o->own_next;
    if (o->own_next)
      o->own_next->own_prev = o->own_prev;
    if (--b->n == 0) {
      kcm_map_remove(&inf->by_owner, owner_of(o));
      free(b);
    }
  }
  o->own_prev = o->own_next = NULL;
}

void kcm_informer_index_init(struct kcm_informer *inf) {
  kcm_map_init(&inf->by_ns, &ns_type);
  kcm_map_init(&inf->by_owner, &owner_type);
}

void kcm_informer_index_release(struct kcm_informer *inf) {
  struct kcm_map_iter it;
  struct kcm_informer_bucket *b;

  kcm_map_iter_init(&it, &inf->by_ns);
  while ((b = kcm_map_next(&it))) {
    kcm_intern_put(inf->pool, b->ns);
    free(b);
  }
  kcm_map_release(&inf->by_ns);
  kcm_map_iter_init(&it, &inf->by_owner);
  while ((b = kcm_map_next(&it)))
    free(b);
  kcm_map_release(&inf->by_owner);
}

struct kcm_object *kcm_informer_first_in(const struct kcm_informer *inf, const char *ns) {
  struct kcm_informer_bucket *b = kcm_map_get(&inf->by_ns, ns);
  return b ? b->head : NULL;
}

struct kcm_object *kcm_informer_first_owned(const struct kcm_informer *inf,
                                            const struct kcm_uid *owner) {
  struct kcm_informer_bucket *b = kcm_map_get(&inf->by_owner, owner ? owner : &no_owner);
  return b ? b->head : NULL;
}

struct kcm_object *kcm_informer_controller_of(const struct kcm_informer *inf,
                                              const struct kcm_object *o, const char *kind) {
  struct kcm_object *owner;
  if (!o->has_controller || strcmp(o->controller.kind, kind) != 0)
    return NULL;
  owner = kcm_informer_get(inf, o->ns, o->controller.name);
  return owner && kcm_api_uid_equal(&owner->uid, &o->controller.uid) ? owner : NULL;
}

int kcm_informer_claimable(const struct kcm_informer *inf, const struct kcm_uid *owner,
                           const char *ns, struct kcm_object ***out, size_t *n) {
  struct kcm_object **all = NULL, *o;
  size_t i;

  *n = 0;
  for (i = 0; i < 2; i++) {
    for (o = kcm_informer_first_owned(inf, i ? NULL : owner); o; o = o->own_next) {
      struct kcm_object **grown;
      if (strcmp(o->ns, ns) != 0)
        continue;
      if (!(grown = kcm_buf_grow_items(all, *n, sizeof(*grown)))) {
        free(all);
        *n = 0;
        return KCM_ENOMEM;
      }
      all = grown;
      all[(*n)++] = o;
    }
  }
  *out = all;
  return 0;
}
