/*
 * api/proto.c — decoding pods from protobuf, as kube-apiserver writes them
 * for application/vnd.kubernetes.protobuf (field numbers from the upstream
 * generated.proto of core/v1 and meta/v1).
 *
 * The fields and rules are those of the JSON decoders (text.c): a pod is
 * the same struct kcm_pod whichever encoding it came in. The wire format
 * cannot say "null": an empty Time reads as absent, as upstream reads it,
 * and an empty string as the empty string. A field kcm reads with another
 * wire type is an error naming it; every other field is skipped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/pb.h"

#define COST_ANNOTATION "controller.kubernetes.io/pod-deletion-cost"

struct pctx {
  struct kcm_intern *pool;
  struct kcm_api_error *err;
  struct kcm_pod *pod;
  struct kcm_buf sidecars; /* as in text.c */
  struct kcm_buf inits;
  bool has_meta, has_uid, has_rv;
};

static int bad(struct pctx *c, const char *field, const char *problem) {
  snprintf(c->err->field, sizeof(c->err->field), "%s", field);
  snprintf(c->err->problem, sizeof(c->err->problem), "%s", problem);
  return KCM_EINVAL;
}

/* The walk of r ended: an error naming field if it ended early. */
static int ended(struct pctx *c, const struct kcm_pb *r, const char *field) {
  return r->err ? bad(c, field, r->err) : 0;
}

/* The current field's bytes (a string or a message), or an error naming it. */
static int bytes(struct pctx *c, struct kcm_pb *r, const char *field, const uint8_t **p,
                 size_t *n) {
  return kcm_pb_bytes(r, p, n) ? 0 : bad(c, field, r->err);
}

static int varint(struct pctx *c, struct kcm_pb *r, const char *field, uint64_t *v) {
  return kcm_pb_varint(r, v) ? 0 : bad(c, field, r->err);
}

static int skip(struct pctx *c, struct kcm_pb *r, const char *field) {
  return kcm_pb_skip(r) ? 0 : bad(c, field, r->err);
}

/* A string field into dst (cap bytes with its NUL); false when it does not fit. */
static bool short_string(const uint8_t *s, size_t n, char *dst, size_t cap) {
  if (n >= cap || memchr(s, '\0', n))
    return false;
  memcpy(dst, s, n);
  dst[n] = '\0';
  return true;
}

/* A meta/v1 Time: Unix seconds, 0 when empty (the zero time). */
static int time_of(struct pctx *c, struct kcm_pb *outer, const char *field, int64_t *out) {
  struct kcm_pb r;
  const uint8_t *p;
  size_t n;
  uint64_t v;
  TRY(bytes(c, outer, field, &p, &n));
  *out = 0;
  kcm_pb_start(&r, p, n);
  while (kcm_pb_next(&r))
    if (r.field == 1) {
      TRY(varint(c, &r, field, &v));
      *out = (int64_t)v;
    } else
      TRY(skip(c, &r, field));
  return ended(c, &r, field);
}

/* One map entry (labels, annotations): key 1, value 2. */
static int entry(struct pctx *c, struct kcm_pb *outer, const char *field, const uint8_t **key,
                 size_t *key_len, const uint8_t **value, size_t *value_len) {
  struct kcm_pb r;
  const uint8_t *p;
  size_t n;
  TRY(bytes(c, outer, field, &p, &n));
  *key = *value = (const uint8_t *)"";
  *key_len = *value_len = 0;
  kcm_pb_start(&r, p, n);
  while (kcm_pb_next(&r)) {
    if (r.field == 1)
      TRY(bytes(c, &r, field, key, key_len));
    else if (r.field == 2)
      TRY(bytes(c, &r, field, value, value_len));
    else
      TRY(skip(c, &r, field));
  }
  return ended(c, &r, field);
}

/* The labels, gathered across the metadata's entries (field 11). */
struct gathered {
  struct kcm_label *items;
  uint32_t n, cap;
};

static int label(struct pctx *c, struct kcm_pb *r, struct gathered *g) {
  const uint8_t *k, *v;
  size_t kn, vn;
  TRY(entry(c, r, "metadata.labels", &k, &kn, &v, &vn));
  if (g->n == g->cap) {
    uint32_t cap = g->cap ? g->cap * 2 : 8;
    struct kcm_label *grown = realloc(g->items, cap * sizeof(*grown));
    if (!grown)
      return KCM_ENOMEM;
    g->items = grown;
    g->cap = cap;
  }
  g->items[g->n].key = kcm_intern_get(c->pool, (const char *)k, kn);
  g->items[g->n].value = kcm_intern_get(c->pool, (const char *)v, vn);
  g->n++;
  return g->items[g->n - 1].key && g->items[g->n - 1].value ? 0 : KCM_ENOMEM;
}

static int annotation(struct pctx *c, struct kcm_pb *r) {
  const uint8_t *k, *v;
  size_t kn, vn;
  char cost[64];
  TRY(entry(c, r, "metadata.annotations", &k, &kn, &v, &vn));
  if (kn == strlen(COST_ANNOTATION) && !memcmp(k, COST_ANNOTATION, kn))
    c->pod->deletion_cost =
        short_string(v, vn, cost, sizeof(cost)) ? kcm_api_deletion_cost(cost) : 0;
  return 0;
}

/* One ownerReference; only the first with controller: true is kept. */
static int owner(struct pctx *c, struct kcm_pb *outer) {
  static const char *const fields[4] = {
      "metadata.ownerReferences.apiVersion", "metadata.ownerReferences.kind",
      "metadata.ownerReferences.name", "metadata.ownerReferences.uid"};
  struct kcm_object *o = &c->pod->o;
  const uint8_t *val[4] = {NULL, NULL, NULL, NULL}, *p;
  size_t len[4] = {0, 0, 0, 0}, n;
  uint64_t controller = 0, block = 0;
  struct kcm_pb r;
  char uid[40];
  int i;

  TRY(bytes(c, outer, "metadata.ownerReferences", &p, &n));
  kcm_pb_start(&r, p, n);
  while (kcm_pb_next(&r)) {
    /* kind 1, name 3, uid 4, apiVersion 5, controller 6, blockOwnerDeletion 7 */
    i = r.field == 5 ? 0 : r.field == 1 ? 1 : r.field == 3 ? 2 : r.field == 4 ? 3 : -1;
    if (i >= 0)
      TRY(bytes(c, &r, fields[i], &val[i], &len[i]));
    else if (r.field == 6)
      TRY(varint(c, &r, "metadata.ownerReferences.controller", &controller));
    else if (r.field == 7)
      TRY(varint(c, &r, "metadata.ownerReferences.blockOwnerDeletion", &block));
    else
      TRY(skip(c, &r, "metadata.ownerReferences"));
  }
  TRY(ended(c, &r, "metadata.ownerReferences"));
  if (!controller || o->has_controller)
    return 0;
  for (i = 0; i < 4; i++)
    if (!len[i])
      return bad(c, "metadata.ownerReferences", "apiVersion, kind, name and uid are required");
  if (!short_string(val[3], len[3], uid, sizeof(uid)) || kcm_api_parse_uid(uid, &o->controller.uid))
    return bad(c, "metadata.ownerReferences.uid", "is not a UID");
  o->controller.api_version = kcm_intern_get(c->pool, (const char *)val[0], len[0]);
  o->controller.kind = kcm_intern_get(c->pool, (const char *)val[1], len[1]);
  o->controller.name = kcm_intern_get(c->pool, (const char *)val[2], len[2]);
  o->controller.block_owner_deletion = block != 0;
  o->has_controller = true; /* so that kcm_api_unref() puts what was got */
  if (!o->controller.api_version || !o->controller.kind || !o->controller.name)
    return KCM_ENOMEM;
  return 0;
}

static int metadata_fields(struct pctx *c, struct kcm_pb *r, struct gathered *labels) {
  struct kcm_object *o = &c->pod->o;
  const uint8_t *s;
  size_t n;
  uint64_t v;
  char text[40];
  uint32_t owners = 0;

  while (kcm_pb_next(r)) {
    switch (r->field) {
    case 1:
      TRY(bytes(c, r, "metadata.name", &s, &n));
      if (memchr(s, '\0', n))
        return bad(c, "metadata.name", KCM_API_NUL_PROBLEM);
      free(o->name);
      if (!(o->name = strndup((const char *)s, n)))
        return KCM_ENOMEM;
      if (n > KCM_API_NAME_MAX)
        return bad(c, "metadata.name", "is longer than 253 characters");
      break;
    case 3:
      TRY(bytes(c, r, "metadata.namespace", &s, &n));
      if (memchr(s, '\0', n))
        return bad(c, "metadata.namespace", KCM_API_NUL_PROBLEM);
      kcm_intern_put(c->pool, o->ns);
      o->ns = NULL;
      if (n && !(o->ns = kcm_intern_get(c->pool, (const char *)s, n)))
        return KCM_ENOMEM;
      break;
    case 5:
      TRY(bytes(c, r, "metadata.uid", &s, &n));
      if (!short_string(s, n, text, sizeof(text)) || kcm_api_parse_uid(text, &o->uid))
        return bad(c, "metadata.uid", "is not a UID");
      c->has_uid = true;
      break;
    case 6:
      TRY(bytes(c, r, "metadata.resourceVersion", &s, &n));
      if (!short_string(s, n, text, sizeof(text)) || !kcm_api_parse_rv(text, &o->rv))
        return bad(c, "metadata.resourceVersion", "is not a number");
      c->has_rv = true;
      break;
    case 7:
      TRY(varint(c, r, "metadata.generation", &v));
      if ((int64_t)v < 0)
        return bad(c, "metadata.generation", "out of range");
      o->generation = (int64_t)v;
      break;
    case 8:
      TRY(time_of(c, r, "metadata.creationTimestamp", &o->created));
      break;
    case 9:
      TRY(time_of(c, r, "metadata.deletionTimestamp", &o->deleted));
      break;
    case 11:
      TRY(label(c, r, labels));
      break;
    case 12:
      TRY(annotation(c, r));
      break;
    case 13:
      owners++;
      TRY(owner(c, r));
      break;
    default:
      TRY(skip(c, r, "metadata"));
    }
  }
  o->nowners = owners > UINT16_MAX ? UINT16_MAX : (uint16_t)owners;
  return ended(c, r, "metadata");
}

static int metadata(struct pctx *c, struct kcm_pb *outer) {
  struct gathered labels = {NULL, 0, 0};
  struct kcm_pb r;
  const uint8_t *p;
  size_t n;
  int rc = bytes(c, outer, "metadata", &p, &n);
  if (rc)
    return rc;
  c->has_meta = true;
  kcm_pb_start(&r, p, n);
  rc = metadata_fields(c, &r, &labels);
  if (rc) {
    struct kcm_labels l = {labels.items, labels.n};
    kcm_labels_release(&l, c->pool);
    return rc;
  }
  kcm_labels_release(&c->pod->o.labels, c->pool);
  return kcm_labels_adopt(&c->pod->o.labels, c->pool, labels.items, labels.n);
}

/* An init container: its name is kept when restartPolicy is Always. */
static int init_container(struct pctx *c, struct kcm_pb *outer) {
  struct kcm_pb r;
  const uint8_t *p, *name = NULL, *policy = NULL;
  size_t n, name_len = 0, policy_len = 0;
  TRY(bytes(c, outer, "spec.initContainers", &p, &n));
  kcm_pb_start(&r, p, n);
  while (kcm_pb_next(&r)) {
    if (r.field == 1)
      TRY(bytes(c, &r, "spec.initContainers.name", &name, &name_len));
    else if (r.field == 24)
      TRY(bytes(c, &r, "spec.initContainers.restartPolicy", &policy, &policy_len));
    else
      TRY(skip(c, &r, "spec.initContainers"));
  }
  TRY(ended(c, &r, "spec.initContainers"));
  if (policy_len == 6 && !memcmp(policy, "Always", 6) && name_len && name_len < 256 &&
      !memchr(name, '\0', name_len) &&
      (kcm_buf_append(&c->sidecars, name, name_len) || kcm_buf_append(&c->sidecars, "", 1)))
    return KCM_ENOMEM;
  return 0;
}

static int spec(struct pctx *c, struct kcm_pb *outer) {
  struct kcm_pod *pod = c->pod;
  struct kcm_pb r;
  const uint8_t *p, *s;
  size_t n, len;
  TRY(bytes(c, outer, "spec", &p, &n));
  kcm_pb_start(&r, p, n);
  while (kcm_pb_next(&r)) {
    if (r.field == 10) {
      TRY(bytes(c, &r, "spec.nodeName", &s, &len));
      kcm_intern_put(c->pool, pod->node);
      pod->node = NULL;
      if (len && !(pod->node = kcm_intern_get(c->pool, (const char *)s, len)))
        return KCM_ENOMEM;
    } else if (r.field == 20) {
      TRY(init_container(c, &r));
    } else {
      TRY(skip(c, &r, "spec"));
    }
  }
  return ended(c, &r, "spec");
}

static int condition(struct pctx *c, struct kcm_pb *outer) {
  struct kcm_pb r;
  const uint8_t *p, *s;
  size_t n, len;
  bool ready_type = false, is_true = false;
  int64_t when = 0;
  TRY(bytes(c, outer, "status.conditions", &p, &n));
  kcm_pb_start(&r, p, n);
  while (kcm_pb_next(&r)) {
    if (r.field == 1) {
      TRY(bytes(c, &r, "status.conditions.type", &s, &len));
      ready_type = len == 5 && !memcmp(s, "Ready", 5);
    } else if (r.field == 2) {
      TRY(bytes(c, &r, "status.conditions.status", &s, &len));
      is_true = len == 4 && !memcmp(s, "True", 4);
    } else if (r.field == 4) {
      TRY(time_of(c, &r, "status.conditions.lastTransitionTime", &when));
    } else {
      TRY(skip(c, &r, "status.conditions"));
    }
  }
  TRY(ended(c, &r, "status.conditions"));
  if (ready_type) {
    c->pod->ready = is_true;
    if (is_true && when)
      c->pod->ready_since = when;
  }
  return 0;
}

/* A container status: restartCount 5, and for an init container its name 1. */
static int container_status(struct pctx *c, struct kcm_pb *outer, bool init) {
  const char *field = init ? "status.initContainerStatuses" : "status.containerStatuses";
  struct kcm_pb r;
  const uint8_t *p, *name = NULL;
  size_t n, name_len = 0;
  uint64_t v;
  int32_t restarts = 0;
  TRY(bytes(c, outer, field, &p, &n));
  kcm_pb_start(&r, p, n);
  while (kcm_pb_next(&r)) {
    if (r.field == 5) {
      TRY(varint(c, &r, field, &v));
      restarts = (int32_t)(int64_t)v;
    } else if (init && r.field == 1)
      TRY(bytes(c, &r, field, &name, &name_len));
    else
      TRY(skip(c, &r, field));
  }
  TRY(ended(c, &r, field));
  if (!init) {
    if (restarts > c->pod->restarts)
      c->pod->restarts = restarts;
    return 0;
  }
  if (name_len && name_len < 256 && !memchr(name, '\0', name_len) &&
      (kcm_buf_append(&c->inits, &restarts, sizeof(restarts)) ||
       kcm_buf_append(&c->inits, name, name_len) || kcm_buf_append(&c->inits, "", 1)))
    return KCM_ENOMEM;
  return 0;
}

static int status(struct pctx *c, struct kcm_pb *outer) {
  struct kcm_pb r;
  const uint8_t *p, *s;
  size_t n, len;
  char phase[16];
  TRY(bytes(c, outer, "status", &p, &n));
  kcm_pb_start(&r, p, n);
  while (kcm_pb_next(&r)) {
    if (r.field == 1) {
      TRY(bytes(c, &r, "status.phase", &s, &len));
      c->pod->phase = (uint8_t)kcm_api_pod_phase(
          short_string(s, len, phase, sizeof(phase)) ? phase : NULL);
    } else if (r.field == 2) {
      TRY(condition(c, &r));
    } else if (r.field == 8 || r.field == 10) {
      TRY(container_status(c, &r, r.field == 10));
    } else {
      TRY(skip(c, &r, "status"));
    }
  }
  return ended(c, &r, "status");
}

static int pod(struct pctx *c, const uint8_t *p, size_t n) {
  struct kcm_object *o = &c->pod->o;
  struct kcm_pb r;
  kcm_pb_start(&r, p, n);
  while (kcm_pb_next(&r)) {
    if (r.field == 1)
      TRY(metadata(c, &r));
    else if (r.field == 2)
      TRY(spec(c, &r));
    else if (r.field == 3)
      TRY(status(c, &r));
    else
      TRY(skip(c, &r, "(object)"));
  }
  TRY(ended(c, &r, "(protobuf)"));
  if (!c->has_meta)
    return bad(c, "metadata", "is required");
  if (!o->name || !*o->name)
    return bad(c, "metadata.name", "is required");
  if (!o->ns)
    return bad(c, "metadata.namespace", "is required");
  if (!c->has_uid)
    return bad(c, "metadata.uid", "is not a UID");
  if (!c->has_rv)
    return bad(c, "metadata.resourceVersion", "is required");
  return kcm_api_sidecar_restarts(c->pod, &c->sidecars, &c->inits);
}

int kcm_api_decode_pod_proto(const void *msg, size_t len, struct kcm_intern *pool,
                             struct kcm_object **out, struct kcm_api_error *err) {
  struct pctx c;
  struct kcm_pod *p = calloc(1, sizeof(*p));
  int rc;

  *out = NULL;
  memset(err, 0, sizeof(*err));
  if (!p)
    return KCM_ENOMEM;
  p->o.kind = KCM_KIND_POD;
  p->o.refs = 1;
  memset(&c, 0, sizeof(c));
  c.pool = pool;
  c.err = err;
  c.pod = p;
  kcm_buf_init(&c.sidecars, 1u << 20);
  kcm_buf_init(&c.inits, 1u << 20);
  rc = pod(&c, msg, len);
  kcm_buf_release(&c.sidecars);
  kcm_buf_release(&c.inits);
  if (rc) {
    if (rc == KCM_ENOMEM && !err->field[0])
      bad(&c, "(object)", "out of memory");
    kcm_api_unref(&p->o, pool);
    return rc;
  }
  *out = &p->o;
  return 0;
}

int kcm_api_decode_proto(enum kcm_kind kind, const void *body, size_t len,
                         struct kcm_intern *pool, struct kcm_object **out,
                         struct kcm_api_error *err) {
  const uint8_t *k, *raw;
  size_t klen, rawlen;
  const char *why;

  const struct kcm_api_kind *row = kcm_api_kind(kind);

  *out = NULL;
  memset(err, 0, sizeof(*err));
  if (!row || !row->decode_proto) {
    snprintf(err->field, sizeof(err->field), "(protobuf)");
    snprintf(err->problem, sizeof(err->problem), "%s is not read from protobuf",
             kcm_api_kind_name(kind));
    return KCM_EINVAL;
  }
  if (!kcm_pb_unwrap(body, len, &k, &klen, &raw, &rawlen, &why) ||
      (klen && (klen != strlen(row->name) || memcmp(k, row->name, klen)))) {
    snprintf(err->field, sizeof(err->field), "(protobuf)");
    snprintf(err->problem, sizeof(err->problem), "%s%s", why ? why : "not a ",
             why ? "" : row->name);
    return KCM_EINVAL;
  }
  return row->decode_proto(raw, rawlen, pool, out, err);
}

int kcm_api_decode_proto_bare(enum kcm_kind kind, const void *msg, size_t len,
                              struct kcm_intern *pool, struct kcm_object **out,
                              struct kcm_api_error *err) {
  const struct kcm_api_kind *row = kcm_api_kind(kind);
  if (row && row->decode_proto)
    return row->decode_proto(msg, len, pool, out, err);
  *out = NULL;
  memset(err, 0, sizeof(*err));
  snprintf(err->field, sizeof(err->field), "(protobuf)");
  snprintf(err->problem, sizeof(err->problem), "%s is not read from protobuf",
           kcm_api_kind_name(kind));
  return KCM_EINVAL;
}
