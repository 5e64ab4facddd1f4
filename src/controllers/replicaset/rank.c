/*
 * controllers/replicaset/rank.c — which of a ReplicaSet's pods to delete
 * first (upstream's ActivePodsWithRanks). See include/kcm/replicaset.h.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/replicaset.h"

struct ranked {
  struct kcm_pod *pod;
  int rank;
};

static int phase_ordinal(uint8_t phase) {
  switch (phase) {
  case KCM_POD_PENDING:
    return 0;
  case KCM_POD_UNKNOWN:
    return 1;
  case KCM_POD_RUNNING:
    return 2;
  default:
    return 3;
  }
}

/* floor(log2(now - t)) in nanoseconds, -1 when t is not in the past. */
static int64_t log_rank(int64_t t_s, uint64_t now_ns) {
  double d = (double)now_ns - (double)t_s * 1e9;
  return d > 0 ? (int64_t)log2(d) : -1;
}

/* Is a before b in deletion order? t == 0 means unset; an unset time
 * sorts first, then the later time. */
static int time_order(int64_t a, int64_t b, const struct kcm_pod *pa, const struct kcm_pod *pb,
                      uint64_t now_ns) {
  int64_t diff;
  if (!a || !b)
    return !a ? -1 : 1;
  diff = log_rank(a, now_ns) - log_rank(b, now_ns);
  if (diff == 0)
    return memcmp(pa->o.uid.b, pb->o.uid.b, sizeof(pa->o.uid.b)) < 0 ? -1 : 1;
  return diff < 0 ? -1 : 1;
}

static int compare(const void *x, const void *y, void *arg) {
  const struct ranked *a = x, *b = y;
  uint64_t now_ns = *(const uint64_t *)arg;
  const struct kcm_pod *p = a->pod, *q = b->pod;
  bool p_ready, q_ready;

  /* 1. unscheduled first */
  if (p->node != q->node && (!p->node || !q->node))
    return !p->node ? -1 : 1;
  /* 2. Pending < Unknown < Running */
  if (phase_ordinal(p->phase) != phase_ordinal(q->phase))
    return phase_ordinal(p->phase) < phase_ordinal(q->phase) ? -1 : 1;
  /* 3. not ready first */
  p_ready = p->ready;
  q_ready = q->ready;
  if (p_ready != q_ready)
    return !p_ready ? -1 : 1;
  /* 4. lower deletion cost first */
  if (p->deletion_cost != q->deletion_cost)
    return p->deletion_cost < q->deletion_cost ? -1 : 1;
  /* 5. more related pods on the same node first */
  if (a->rank != b->rank)
    return a->rank > b->rank ? -1 : 1;
  /* 6. ready for a shorter time first */
  if (p_ready && q_ready && p->ready_since != q->ready_since)
    return time_order(p->ready_since, q->ready_since, p, q, now_ns);
  /* 7. more restarts first (regular containers, then sidecars) */
  if (p->restarts != q->restarts)
    return p->restarts > q->restarts ? -1 : 1;
  if (p->sidecar_restarts != q->sidecar_restarts)
    return p->sidecar_restarts > q->sidecar_restarts ? -1 : 1;
  /* 8. newer first */
  if (p->o.created != q->o.created)
    return time_order(p->o.created, q->o.created, p, q, now_ns);
  return 0;
}

static int node_order(const void *x, const void *y) {
  uintptr_t a = (uintptr_t)*(const char *const *)x, b = (uintptr_t)*(const char *const *)y;
  return a < b ? -1 : a > b;
}

/* How many of nodes[0..n) (sorted by node_order) are `node`. */
static int count_on(const char **nodes, size_t n, const char *node) {
  size_t lo = 0, hi = n, first;
  while (lo < hi) { /* the first not before node */
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)nodes[mid] < (uintptr_t)node)
      lo = mid + 1;
    else
      hi = mid;
  }
  first = lo;
  hi = n;
  while (lo < hi) { /* the first after node */
    size_t mid = lo + (hi - lo) / 2;
    if ((uintptr_t)nodes[mid] <= (uintptr_t)node)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - first > INT32_MAX ? INT32_MAX : (int)(lo - first);
}

void kcm_replicaset_rank(struct kcm_pod **pods, size_t n, struct kcm_pod *const *related,
                         size_t nrelated, uint64_t now_ms) {
  struct ranked *r;
  const char **nodes;
  uint64_t now_ns;
  size_t i, nnodes = 0;
  if (n < 2)
    return;
  r = malloc(n * sizeof(*r));
  nodes = malloc((nrelated ? nrelated : 1) * sizeof(*nodes));
  if (!r || !nodes) {
    free(r);
    free(nodes);
    return; /* leave the order as it is: any order is valid, just not preferred */
  }
  /* Rank: active related pods on the same node, counted from the nodes of
   * the active ones in order (node names are pooled, so equal names are
   * the same pointer; unscheduled pods share NULL, as upstream's ""). */
  for (i = 0; i < nrelated; i++)
    if (kcm_replicaset_pod_active(related[i]))
      nodes[nnodes++] = related[i]->node;
  if (nnodes > 1)
    qsort(nodes, nnodes, sizeof(*nodes), node_order);
  for (i = 0; i < n; i++) {
    r[i].pod = pods[i];
    r[i].rank = count_on(nodes, nnodes, pods[i]->node);
  }
  free(nodes);
  now_ns = now_ms * 1000000ULL;
  qsort_r(r, n, sizeof(*r), compare, &now_ns);
  for (i = 0; i < n; i++)
    pods[i] = r[i].pod;
  free(r);
}
