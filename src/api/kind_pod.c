/*
 * api/kind_pod.c — the Pod's row of the kinds, and its fields: one list
 * that the JSON and the protobuf decoders both read (core/v1 Pod in
 * upstream's generated.proto), with the rules of source.h.
 *
 * A restartable init container (a sidecar) counts its restarts apart;
 * its name is matched with its status's once the pod is read. A wrong
 * type where kcm reads nothing it depends on is no error: a condition or
 * a container status that is no object is passed over, and so is a bad
 * lastTransitionTime on a condition other than Ready and True.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/intern.h"
#include "source.h"

struct pod_read {
  struct kcm_pod *pod;
  struct kcm_api_meta meta;
  struct kcm_buf sidecars; /* names of restartable init containers, NUL-separated */
  struct kcm_buf inits;    /* init container statuses: int32 restarts, then name NUL */
  uint32_t init_statuses;
  bool init_bad; /* spec.initContainers was not a list */
};

static int metadata(struct kcm_api_src *s, void *obj) {
  struct pod_read *r = obj;
  return kcm_api_meta_read(s, &r->meta);
}

/* --- spec ------------------------------------------------------------------------------ */

static int node_name(struct kcm_api_src *s, void *obj) {
  struct kcm_pod *p = ((struct pod_read *)obj)->pod;
  const char *v;
  size_t n;
  int rc;
  kcm_intern_put(s->pool, p->node);
  p->node = NULL;
  if ((rc = kcm_api_src_string(s, "spec.nodeName", &v, &n)) <= 0 || !n)
    return rc;
  return (p->node = kcm_intern_get(s->pool, v, n)) ? 1 : KCM_ENOMEM;
}

struct init_container {
  char name[256];
  bool always;
};

/* A string of an init container, when it is one. */
static int init_string(struct kcm_api_src *s, const char **v, size_t *n) {
  if (!kcm_api_src_is(s, KCM_JSON_STRING))
    return kcm_api_src_skip(s);
  return kcm_api_src_string(s, "spec.initContainers", v, n);
}

static int init_name(struct kcm_api_src *s, void *obj) {
  struct init_container *c = obj;
  const char *v;
  size_t n;
  int rc = init_string(s, &v, &n);
  if (rc > 0)
    kcm_api_src_cstr(c->name, sizeof(c->name), v, n);
  return rc;
}

static int init_policy(struct kcm_api_src *s, void *obj) {
  struct init_container *c = obj;
  const char *v;
  size_t n;
  int rc = init_string(s, &v, &n);
  if (rc > 0)
    c->always = kcm_api_src_cstr_is(v, n, "Always");
  return rc;
}

static const struct kcm_api_field init_container_list[] = {
    KCM_API_FIELD("name", 1, init_name),
    KCM_API_FIELD("restartPolicy", 24, init_policy),
};

static int init_container(struct kcm_api_src *s, void *obj) {
  struct pod_read *r = obj;
  struct init_container c = {"", false};
  int rc;
  if (!kcm_api_src_is(s, KCM_JSON_OBJECT))
    return kcm_api_src_skip(s);
  rc = kcm_api_src_message(s, "spec.initContainers", KCM_API_FIELDS(init_container_list), &c);
  if (rc > 0 && c.always && *c.name &&
      kcm_buf_append(&r->sidecars, c.name, strlen(c.name) + 1))
    return KCM_ENOMEM;
  return rc;
}

static int init_containers(struct kcm_api_src *s, void *obj) {
  struct pod_read *r = obj;
  if (!kcm_api_src_is(s, KCM_JSON_ARRAY)) {
    r->init_bad = !kcm_api_src_is(s, KCM_JSON_NULL);
    return kcm_api_src_skip(s);
  }
  return kcm_api_src_list(s, "spec.initContainers", init_container, r);
}

static const struct kcm_api_field spec_list[] = {
    KCM_API_FIELD("nodeName", 10, node_name),
    KCM_API_FIELD("initContainers", 20, init_containers),
};

/* --- status ---------------------------------------------------------------------------- */

static int phase(struct kcm_api_src *s, void *obj) {
  struct kcm_pod *p = ((struct pod_read *)obj)->pod;
  const char *v;
  size_t n;
  char text[16] = "";
  int rc = kcm_api_src_string(s, "status.phase", &v, &n);
  if (rc < 0)
    return rc;
  if (rc)
    kcm_api_src_cstr(text, sizeof(text), v, n);
  p->phase = (uint8_t)kcm_api_pod_phase(rc ? text : NULL);
  return rc;
}

struct condition {
  int64_t when;
  const char *when_problem; /* a lastTransitionTime that is no time */
  bool ready_type, is_true, when_set;
};

static int condition_type(struct kcm_api_src *s, void *obj) {
  struct condition *c = obj;
  const char *v;
  size_t n;
  int rc = kcm_api_src_string(s, "status.conditions.type", &v, &n);
  c->ready_type = rc > 0 && kcm_api_src_cstr_is(v, n, "Ready");
  return rc;
}

static int condition_status(struct kcm_api_src *s, void *obj) {
  struct condition *c = obj;
  const char *v;
  size_t n;
  int rc = kcm_api_src_string(s, "status.conditions.status", &v, &n);
  c->is_true = rc > 0 && kcm_api_src_cstr_is(v, n, "True");
  return rc;
}

static int condition_when(struct kcm_api_src *s, void *obj) {
  struct condition *c = obj;
  int rc;
  c->when_problem = NULL;
  rc = kcm_api_src_time_soft(s, "status.conditions.lastTransitionTime", &c->when,
                             &c->when_problem);
  c->when_set = rc > 0;
  return rc;
}

static const struct kcm_api_field condition_list[] = {
    KCM_API_FIELD("type", 1, condition_type),
    KCM_API_FIELD("status", 2, condition_status),
    KCM_API_FIELD("lastTransitionTime", 4, condition_when),
};

static int condition(struct kcm_api_src *s, void *obj) {
  struct kcm_pod *p = ((struct pod_read *)obj)->pod;
  struct condition c = {0, NULL, false, false, false};
  int rc;
  if (!kcm_api_src_is(s, KCM_JSON_OBJECT))
    return kcm_api_src_skip(s);
  rc = kcm_api_src_message(s, "status.conditions", KCM_API_FIELDS(condition_list), &c);
  if (rc <= 0 || !c.ready_type)
    return rc;
  p->ready = c.is_true;
  if (!p->ready || !c.when_set)
    return rc;
  if (c.when_problem)
    return kcm_api_src_fail(s, "status.conditions.lastTransitionTime", c.when_problem);
  p->ready_since = c.when;
  return rc;
}

static int conditions(struct kcm_api_src *s, void *obj) {
  return kcm_api_src_list(s, "status.conditions", condition, obj);
}

struct container_status {
  char name[256];
  int64_t restarts;
  bool init;
};

static int status_restarts(struct kcm_api_src *s, void *obj) {
  struct container_status *c = obj;
  return kcm_api_src_int(s,
                         c->init ? "status.initContainerStatuses.restartCount"
                                 : "status.containerStatuses.restartCount",
                         INT32_MIN, INT32_MAX, &c->restarts);
}

static int status_name(struct kcm_api_src *s, void *obj) {
  struct container_status *c = obj;
  const char *v;
  size_t n;
  int rc;
  if (!c->init)
    return kcm_api_src_skip(s);
  c->name[0] = '\0';
  if ((rc = kcm_api_src_string(s, "status.initContainerStatuses.name", &v, &n)) > 0)
    kcm_api_src_cstr(c->name, sizeof(c->name), v, n);
  return rc;
}

static const struct kcm_api_field container_status_list[] = {
    KCM_API_FIELD("name", 1, status_name),
    KCM_API_FIELD("restartCount", 5, status_restarts),
};

static int container_status(struct kcm_api_src *s, struct pod_read *r, bool init) {
  struct container_status c = {"", 0, init};
  int32_t restarts;
  int rc;
  r->init_statuses += init;
  if (!kcm_api_src_is(s, KCM_JSON_OBJECT))
    return kcm_api_src_skip(s);
  rc = kcm_api_src_message(s, init ? "status.initContainerStatuses" : "status.containerStatuses",
                           KCM_API_FIELDS(container_status_list), &c);
  if (rc <= 0)
    return rc;
  restarts = (int32_t)c.restarts;
  if (!init) {
    if (restarts > r->pod->restarts)
      r->pod->restarts = restarts;
    return rc;
  }
  if (*c.name && (kcm_buf_append(&r->inits, &restarts, sizeof(restarts)) ||
                  kcm_buf_append(&r->inits, c.name, strlen(c.name) + 1)))
    return KCM_ENOMEM;
  return rc;
}

static int main_status(struct kcm_api_src *s, void *obj) { return container_status(s, obj, false); }
static int init_status(struct kcm_api_src *s, void *obj) { return container_status(s, obj, true); }

static int main_statuses(struct kcm_api_src *s, void *obj) {
  return kcm_api_src_list(s, "status.containerStatuses", main_status, obj);
}

static int init_statuses(struct kcm_api_src *s, void *obj) {
  return kcm_api_src_list(s, "status.initContainerStatuses", init_status, obj);
}

static const struct kcm_api_field status_list[] = {
    KCM_API_FIELD("phase", 1, phase),
    KCM_API_FIELD("conditions", 2, conditions),
    KCM_API_FIELD("containerStatuses", 8, main_statuses),
    KCM_API_FIELD("initContainerStatuses", 10, init_statuses),
};

/* --- the pod --------------------------------------------------------------------------- */

static const struct kcm_api_field pod_list[] = {
    KCM_API_FIELD("metadata", 1, metadata),
    KCM_API_MESSAGE("spec", 2, "spec", spec_list),
    KCM_API_MESSAGE("status", 3, "status", status_list),
};

/* The most restarts of a sidecar: an init container status whose name is
 * among the restartable init containers'. */
static int sidecar_restarts(struct kcm_pod *p, const struct kcm_buf *sidecars,
                            const struct kcm_buf *inits) {
  const char **names, *side;
  size_t n = 0, off = 0;
  for (side = sidecars->data; side && side < sidecars->data + sidecars->len;
       side += strlen(side) + 1)
    n++;
  if (!n || !inits->len)
    return 0;
  if (!(names = malloc(n * sizeof(*names))))
    return KCM_ENOMEM;
  n = 0;
  for (side = sidecars->data; side < sidecars->data + sidecars->len; side += strlen(side) + 1)
    names[n++] = side;
  qsort(names, n, sizeof(*names), kcm_api_cmp_str);
  while (off < inits->len) {
    int32_t r;
    const char *name = inits->data + off + sizeof(r);
    memcpy(&r, inits->data + off, sizeof(r));
    off += sizeof(r) + strlen(name) + 1;
    if (r > p->sidecar_restarts && bsearch(&name, names, n, sizeof(*names), kcm_api_cmp_str))
      p->sidecar_restarts = r;
  }
  free(names);
  return 0;
}

/* A pod from s: JSON at its cursor (whole: nothing may follow), or the
 * protobuf message msg[0..len). */
static int decode(struct kcm_api_src *s, const void *msg, size_t len, bool whole,
                  struct kcm_object **out) {
  struct pod_read r;
  struct kcm_pod *p = calloc(1, sizeof(*p));
  int rc;

  *out = NULL;
  memset(s->err, 0, sizeof(*s->err));
  if (!p)
    return KCM_ENOMEM;
  p->o.kind = KCM_KIND_POD;
  p->o.refs = 1;
  memset(&r, 0, sizeof(r));
  r.pod = p;
  r.meta.o = &p->o;
  r.meta.deletion_cost = &p->deletion_cost;
  kcm_buf_init(&r.sidecars, 1u << 20);
  kcm_buf_init(&r.inits, 1u << 20);
  rc = s->j ? kcm_api_src_json_object(s, whole, KCM_API_FIELDS(pod_list), &r)
            : kcm_api_src_proto_object(s, msg, len, KCM_API_FIELDS(pod_list), &r);
  if (rc > 0)
    rc = kcm_api_meta_complete(s, &r.meta);
  if (!rc && r.init_statuses && r.init_bad)
    rc = kcm_api_src_fail(s, "spec.initContainers", "must be a list");
  if (!rc)
    rc = sidecar_restarts(p, &r.sidecars, &r.inits);
  kcm_buf_release(&r.sidecars);
  kcm_buf_release(&r.inits);
  if (rc) {
    if (rc == KCM_ENOMEM && !s->err->field[0])
      kcm_api_src_fail(s, "(object)", "out of memory");
    kcm_api_unref(&p->o, s->pool);
    return rc;
  }
  *out = &p->o;
  return 0;
}

int kcm_api_decode_pod_json(struct kcm_json *j, bool whole, struct kcm_intern *pool,
                            struct kcm_object **out, struct kcm_api_error *err) {
  struct kcm_api_src s = {.j = j, .pool = pool, .err = err};
  return decode(&s, NULL, 0, whole, out);
}

static int decode_text(const char *text, size_t len, struct kcm_json *j,
                       struct kcm_api_memo *memo, struct kcm_intern *pool,
                       struct kcm_object **out, struct kcm_api_error *err) {
  (void)memo;
  kcm_json_start(j, text, len);
  return kcm_api_decode_pod_json(j, true, pool, out, err);
}

int kcm_api_decode_pod_at(struct kcm_json *j, struct kcm_intern *pool, struct kcm_object **out,
                          struct kcm_api_error *err) {
  return kcm_api_decode_pod_json(j, false, pool, out, err);
}

int kcm_api_decode_pod_proto(const void *msg, size_t len, struct kcm_intern *pool,
                             struct kcm_object **out, struct kcm_api_error *err) {
  struct kcm_api_src s = {.pool = pool, .err = err};
  return decode(&s, msg, len, false, out);
}

/* --- the row --------------------------------------------------------------------------- */

static size_t no_counts(const struct kcm_object *o, struct kcm_api_count *out) {
  (void)o;
  (void)out;
  return 0;
}

static void release(struct kcm_object *o, struct kcm_intern *pool) {
  kcm_intern_put(pool, ((struct kcm_pod *)o)->node);
}

static size_t held(const struct kcm_object *o) {
  (void)o;
  return 0;
}

const struct kcm_api_kind kcm_api_kind_pod = {
    .kind = KCM_KIND_POD,
    .name = "Pod",
    .singular = "pod",
    .short_name = "po",
    .group = "",
    .version = "v1",
    .plural = "pods",
    .prefix = "/api/v1",
    .api_version = "v1",
    .size = sizeof(struct kcm_pod),
    .decode_proto = kcm_api_decode_pod_proto,
    .decode_text = decode_text,
    .decode_at = kcm_api_decode_pod_at,
    .counts = no_counts,
    .release = release,
    .held = held,
};
