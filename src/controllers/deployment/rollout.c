/*
 * controllers/deployment/rollout.c — the arithmetic of rollouts: surge and
 * unavailability fenceposts, the hash that names a ReplicaSet, and the
 * parsing of the annotations that carry revisions. See
 * include/kcm/deployment.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/deployment.h"

#include "internal.h"

int32_t kcm_deployment_scaled(const struct kcm_intstr *v, int32_t total, bool round_up) {
  int64_t x;
  if (!v || !v->set)
    return 0;
  if (!v->percent)
    return v->value;
  x = (int64_t)v->value * (total > 0 ? total : 0);
  x = round_up ? (x + 99) / 100 : x / 100;
  return kcm_deployment_clamp32(x);
}

void kcm_deployment_fenceposts(const struct kcm_intstr *surge, const struct kcm_intstr *unavail,
                               int32_t desired, int32_t *max_surge, int32_t *max_unavailable) {
  int32_t s = kcm_deployment_scaled(surge, desired, true);
  int32_t u = kcm_deployment_scaled(unavail, desired, false);
  if (s == 0 && u == 0)
    u = 1;
  *max_surge = s;
  *max_unavailable = u;
}

/* 0 for Recreate. */
static int32_t max_surge(const struct kcm_deployment *d) {
  int32_t s, u;
  if (d->recreate)
    return 0;
  kcm_deployment_fenceposts(&d->max_surge, &d->max_unavailable, d->replicas, &s, &u);
  return s;
}

int32_t kcm_deployment_max_unavailable(const struct kcm_deployment *d) {
  int32_t s, u;
  if (d->recreate || d->replicas == 0)
    return 0;
  kcm_deployment_fenceposts(&d->max_surge, &d->max_unavailable, d->replicas, &s, &u);
  return u > d->replicas ? d->replicas : u;
}

int32_t kcm_deployment_clamp32(int64_t v) {
  return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v;
}

int32_t kcm_deployment_max_total(const struct kcm_deployment *d) {
  return kcm_deployment_clamp32((int64_t)d->replicas + max_surge(d));
}

int32_t kcm_deployment_next_collision_count(const struct kcm_deployment *d) {
  int32_t c = d->status.collision_count;
  return c < 0 ? 1 : c < INT32_MAX ? c + 1 : INT32_MAX;
}

void kcm_deployment_hash(const char *template_json, int32_t collision_count, char *buf,
                         size_t len) {
  static const char letters[] = "bcdfghjklmnpqrstvwxz2456789";
  uint32_t h = 2166136261u;
  char digits[16];
  const char *p;
  size_t i;

  for (p = template_json; *p; p++) {
    h ^= (unsigned char)*p;
    h *= 16777619u;
  }
  if (collision_count >= 0) {
    /* The count as 8 bytes: a little-endian uint32, then 4 zero bytes. */
    uint32_t c = (uint32_t)collision_count;
    for (i = 0; i < 8; i++) {
      h ^= i < 4 ? (c >> (8 * i)) & 0xff : 0;
      h *= 16777619u;
    }
  }
  snprintf(digits, sizeof(digits), "%u", h);
  for (i = 0; digits[i] && i + 1 < len; i++)
    buf[i] = letters[(unsigned char)digits[i] % (sizeof(letters) - 1)];
  if (len)
    buf[i < len ? i : len - 1] = '\0';
}

bool kcm_deployment_parse_int(const char *s, int64_t *out) {
  const char *p = s;
  char *end;
  long long v;
  if (!s || !*s)
    return false;
  if (*p == '+' || *p == '-')
    p++;
  if (*p < '0' || *p > '9')
    return false; /* strtoll would also take spaces */
  errno = 0;
  v = strtoll(s, &end, 10);
  if (errno || *end)
    return false;
  *out = v;
  return true;
}

bool kcm_deployment_revision_of(const struct kcm_pairs *annotations, int64_t *out) {
  const char *v = kcm_api_pairs_get(annotations, KCM_DEPLOYMENT_REVISION);
  if (!v) {
    *out = 0;
    return true;
  }
  return kcm_deployment_parse_int(v, out);
}
