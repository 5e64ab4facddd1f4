/* expectations — controller expectations; see include/kcm/expectations.h. */
#include "kcm/expectations.h"

#include <stdlib.h>
#include <string.h>

#include "kcm/log.h"

struct record {
  char *key;
  int64_t add;
  int64_t del;
  uint64_t timestamp;
  char **pods; /* keys of pods expected to be deleted */
  size_t npods;
};

static const struct kcm_map_type record_type = KCM_MAP_STRING_KEYED(struct record, key);

static void clear_pods(struct record *r) {
  size_t i;
  for (i = 0; i < r->npods; i++)
    free(r->pods[i]);
  free(r->pods);
  r->pods = NULL;
  r->npods = 0;
}

static void free_record(struct record *r) {
  clear_pods(r);
  free(r->key);
  free(r);
}

void kcm_expectations_init(struct kcm_expectations *e, uint64_t ttl_ms) {
  kcm_map_init(&e->records, &record_type);
  e->ttl_ms = ttl_ms;
}

void kcm_expectations_release(struct kcm_expectations *e) {
  struct kcm_map_iter it;
  struct record *r;
  kcm_map_iter_init(&it, &e->records);
  while ((r = kcm_map_next(&it)))
    free_record(r);
  kcm_map_release(&e->records);
}

bool kcm_expectations_satisfied(struct kcm_expectations *e, const char *key, uint64_t now_ms) {
  struct record *r = kcm_map_get(&e->records, key);
  if (!r || !e->ttl_ms)
    return true;
  if (r->add <= 0 && r->del <= 0)
    return true;
  if (now_ms - r->timestamp > e->ttl_ms) {
    kcm_v(2, "expectations expired key=\"%s\" add=%lld del=%lld", key, (long long)r->add,
          (long long)r->del);
    return true;
  }
  return false;
}

/* A fresh record for key (replacing any). NULL when out of memory. */
static struct record *reset(struct kcm_expectations *e, const char *key, uint64_t now_ms) {
  struct record *r = kcm_map_get(&e->records, key);
  if (!r) {
    r = calloc(1, sizeof(*r));
    if (!r || !(r->key = strdup(key)) || kcm_map_put(&e->records, r->key, r, NULL)) {
      if (r)
        free(r->key);
      free(r);
      kcm_error("expectations: out of memory key=\"%s\"", key);
      return NULL;
    }
  }
  clear_pods(r);
  r->add = r->del = 0;
  r->timestamp = now_ms;
  return r;
}

void kcm_expectations_expect_creations(struct kcm_expectations *e, const char *key, int64_t n,
                                       uint64_t now_ms) {
  struct record *r = reset(e, key, now_ms);
  if (r)
    r->add = n;
}

void kcm_expectations_expect_deletions(struct kcm_expectations *e, const char *key,
                                       const char *const *pods, size_t n, uint64_t now_ms) {
  struct record *r = reset(e, key, now_ms);
  size_t i;
  if (!r)
    return;
  r->pods = calloc(n ? n : 1, sizeof(*r->pods));
  for (i = 0; r->pods && i < n; i++) {
    if (!(r->pods[i] = strdup(pods[i])))
      break;
    r->npods++;
  }
  /* If memory ran out, expect only what is tracked: never wait forever. */
  r->del = (int64_t)r->npods;
}

void kcm_expectations_creation_observed(struct kcm_expectations *e, const char *key) {
  struct record *r = kcm_map_get(&e->records, key);
  if (r)
    r->add--;
}

void kcm_expectations_deletion_observed(struct kcm_expectations *e, const char *key,
                                        const char *pod) {
  struct record *r = kcm_map_get(&e->records, key);
  size_t i;
  if (!r)
    return;
  for (i = 0; i < r->npods; i++) {
    if (strcmp(r->pods[i], pod) == 0) {
      free(r->pods[i]);
      r->pods[i] = r->pods[--r->npods];
      r->del--;
      return;
    }
  }
}

void kcm_expectations_delete(struct kcm_expectations *e, const char *key) {
  struct record *r = kcm_map_remove(&e->records, key);
  if (r)
    free_record(r);
}

bool kcm_expectations_get(struct kcm_expectations *e, const char *key, int64_t *add,
                          int64_t *del) {
  struct record *r = kcm_map_get(&e->records, key);
  if (!r)
    return false;
  *add = r->add;
  *del = r->del;
  return true;
}
