/*
 * api/text.c — decoding objects from their JSON text: the entry points, the
 * metadata every kind shares, and pods.
 *
 * Objects are read in place with the kcm_json pull reader and the readers
 * of text.h: the fields and rules are those of api.c's decoders (a null
 * reads as absent; a field the controllers depend on with a wrong type is
 * an error naming it; a bad value somewhere kcm never reads is no error),
 * found in the order they come in the text. A ReplicaSet's or Deployment's
 * spec and status are read in text_workload.c; a pod is read here, beside
 * the metadata, so that the compiler inlines that into the hottest decoder
 * as it can. The selector and template of a ReplicaSet or Deployment are
 * the exception: json-c reads them from a small text holding only them,
 * and the spec of a template the memo knows is left out of it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/map.h"
#include "text.h"

#define COST_ANNOTATION "controller.kubernetes.io/pod-deletion-cost"

/* --- metadata ------------------------------------------------------------------------ */

static int labels(struct tctx *t, struct kcm_object *o) {
  struct kcm_label *items = NULL;
  uint32_t n = 0, cap = 0;
  int rc = 0;

  kcm_labels_release(&o->labels, t->pool);
  if (kcm_json_null(t->j))
    return 0;
  if (!kcm_json_object(t->j))
    return mismatch(t, "metadata.labels", "must be an object of strings");
  while (kcm_json_member(t->j)) {
    const char *key, *s;
    size_t len;
    if (!kcm_json_string(t->j, &s, &len)) {
      rc = mismatch(t, "metadata.labels", "must be an object of strings");
      break;
    }
    if (n == cap) {
      struct kcm_label *grown;
      cap = cap ? cap * 2 : 8;
      if (!(grown = realloc(items, cap * sizeof(*items)))) {
        rc = KCM_ENOMEM;
        break;
      }
      items = grown;
    }
    key = kcm_intern_get(t->pool, t->j->key, t->j->keylen);
    items[n].value = kcm_intern_get(t->pool, s, len);
    items[n].key = key;
    n++;
    if (!key || !items[n - 1].value) {
      rc = KCM_ENOMEM;
      break;
    }
  }
  if (!rc && t->j->err)
    rc = bad(t, "(json)", t->j->err);
  if (rc) {
    struct kcm_labels l = {items, n};
    kcm_labels_release(&l, t->pool);
    return rc;
  }
  return kcm_labels_adopt(&o->labels, t->pool, items, n);
}

/* One ownerReference; only the first with controller: true is kept, and
 * only its other fields must have the right types. */
static int owner(struct tctx *t, struct kcm_object *o) {
  static const char *const names[4] = {"apiVersion", "kind", "name", "uid"};
  static const char *const fields[4] = {
      "metadata.ownerReferences.apiVersion", "metadata.ownerReferences.kind",
      "metadata.ownerReferences.name", "metadata.ownerReferences.uid"};
  const char *val[4] = {NULL, NULL, NULL, NULL}, *wrong = NULL, *wrong_problem = NULL;
  struct kcm_uid uid;
  bool controller = false, block = false, uid_ok = false;
  int i, rc = 0;

  if (!kcm_json_object(t->j))
    return mismatch(t, "metadata.ownerReferences", "entries must be objects");
  while (!rc && kcm_json_member(t->j)) {
    const char *s;
    size_t n;
    for (i = 0; i < 4 && !kcm_json_key_is(t->j, names[i]); i++)
      ;
    if (kcm_json_key_is(t->j, "controller")) {
      rc = boolean(t, "metadata.ownerReferences.controller", &controller);
    } else if (kcm_json_key_is(t->j, "blockOwnerDeletion")) {
      if (kcm_json_peek(t->j) == KCM_JSON_BOOL || kcm_json_peek(t->j) == KCM_JSON_NULL)
        rc = boolean(t, "", &block);
      else if (!(rc = skip(t))) {
        wrong = "metadata.ownerReferences.blockOwnerDeletion";
        wrong_problem = "must be true or false";
      }
    } else if (i < 4) {
      if (kcm_json_peek(t->j) == KCM_JSON_STRING && (rc = str(t, fields[i], &s, &n)) > 0) {
        kcm_intern_put(t->pool, val[i]);
        if (i == 3)
          uid_ok = !kcm_api_parse_uid(s, &uid);
        if (!(val[i] = kcm_intern_get(t->pool, s, n)))
          rc = KCM_ENOMEM;
      } else if (kcm_json_peek(t->j) == KCM_JSON_NULL) {
        kcm_intern_put(t->pool, val[i]);
        val[i] = NULL;
        rc = kcm_json_null(t->j) ? 0 : ended(t);
      } else if (!(rc = skip(t))) {
        wrong = fields[i];
        wrong_problem = "must be a string";
      }
    } else {
      rc = skip(t);
    }
    rc = rc > 0 ? 0 : rc;
  }
  if (!rc)
    rc = ended(t);
  if (!rc && controller && !o->has_controller) {
    if (wrong)
      rc = bad(t, wrong, wrong_problem);
    else if (!val[0] || !val[1] || !val[2] || !val[3])
      rc = bad(t, "metadata.ownerReferences", "apiVersion, kind, name and uid are required");
    else if (!uid_ok)
      rc = bad(t, "metadata.ownerReferences.uid", "is not a UID");
    if (!rc) {
      o->controller.api_version = val[0];
      o->controller.kind = val[1];
      o->controller.name = val[2];
      o->controller.uid = uid;
      o->controller.block_owner_deletion = block;
      o->has_controller = true;
      val[0] = val[1] = val[2] = NULL;
    }
  }
  for (i = 0; i < 4; i++)
    kcm_intern_put(t->pool, val[i]);
  return rc;
}

static int owners(struct tctx *t, struct kcm_object *o) {
  uint32_t n = 0;
  int rc = open_array(t, "metadata.ownerReferences");
  if (rc <= 0)
    return rc;
  while (kcm_json_element(t->j)) {
    n++;
    TRY(owner(t, o));
  }
  o->nowners = n > UINT16_MAX ? UINT16_MAX : (uint16_t)n;
  return ended(t);
}

static int annotations(struct tctx *t, struct kcm_pod *p) {
  if (kcm_json_peek(t->j) != KCM_JSON_OBJECT)
    return skip(t); /* not an object: no annotations to read, as in api.c */
  kcm_json_object(t->j);
  while (kcm_json_member(t->j)) {
    const char *s;
    size_t n;
    if (!kcm_json_key_is(t->j, COST_ANNOTATION)) {
      TRY(skip(t));
      continue;
    }
    int rc = str(t, "metadata.annotations", &s, &n);
    p->deletion_cost = 0;
    if (rc < 0)
      return rc;
    if (rc)
      p->deletion_cost = kcm_api_deletion_cost(s);
  }
  return ended(t);
}

/* Every annotation but kubectl's last-applied copy, as decode_pairs(); a
 * key given twice keeps its last value. */
static int pairs(struct tctx *t, struct kcm_pairs *out) {
  struct kcm_pair *items = NULL;
  uint32_t n = 0, cap = 0;
  int rc = 0;

  kcm_api_pairs_release(out);
  if (kcm_json_null(t->j))
    return 0;
  if (!kcm_json_object(t->j))
    return mismatch(t, "metadata.annotations", "must be an object of strings");
  while (!rc && kcm_json_member(t->j)) {
    const char *s;
    size_t len;
    if (!kcm_json_string(t->j, &s, &len)) {
      rc = mismatch(t, "metadata.annotations", "must be an object of strings");
      break;
    }
    if (kcm_json_key_is(t->j, KCM_API_LAST_APPLIED))
      continue;
    if (n == cap) {
      struct kcm_pair *grown = realloc(items, (cap = cap ? cap * 2 : 8) * sizeof(*items));
      if (!grown) {
        rc = KCM_ENOMEM;
        break;
      }
      items = grown;
    }
    items[n].key = strndup(t->j->key, t->j->keylen);
    items[n].value = strndup(s, len);
    if (!items[n++].key || !items[n - 1].value)
      rc = KCM_ENOMEM;
  }
  if (!rc)
    rc = ended(t);
  if (rc) {
    struct kcm_pairs all = {items, n};
    kcm_api_pairs_release(&all);
    return rc;
  }
  return kcm_api_pairs_adopt(out, items, n);
}

/* One managedFields entry into t->writers: kept when it is the status's. */
static int managed_entry(struct tctx *t) {
  const char *s, *manager = NULL; /* pooled: the reader reuses its strings */
  size_t n;
  int64_t at = 0;
  int rc = open_object(t, "metadata.managedFields");
  bool status = false;
  if (rc <= 0)
    return rc;
  while (kcm_json_member(t->j)) {
    if (kcm_json_key_is(t->j, "manager")) {
      kcm_intern_put(t->pool, manager);
      manager = NULL;
      if ((rc = str(t, "metadata.managedFields.manager", &s, &n)) > 0 && n &&
          !(manager = kcm_intern_get(t->pool, s, n)))
        return KCM_ENOMEM;
    } else if (kcm_json_key_is(t->j, "subresource")) {
      if ((rc = str(t, "metadata.managedFields.subresource", &s, &n)) > 0)
        status = n == 6 && !memcmp(s, "status", 6);
    } else if (kcm_json_key_is(t->j, "time")) {
      rc = time_value(t, "metadata.managedFields.time", &at);
    } else {
      rc = skip(t);
    }
    if (rc < 0) {
      kcm_intern_put(t->pool, manager);
      return rc;
    }
  }
  if ((rc = ended(t)) < 0) {
    kcm_intern_put(t->pool, manager);
    return rc;
  }
  if (!manager || !status || t->writers->n == KCM_STATUS_WRITERS) {
    t->writers->more |= manager && status;
    kcm_intern_put(t->pool, manager);
    return 1;
  }
  t->writers->status[t->writers->n].manager = manager;
  t->writers->status[t->writers->n++].at = at;
  return 1;
}

static int managed_fields(struct tctx *t) {
  int rc = open_array(t, "metadata.managedFields");
  if (rc <= 0)
    return rc;
  while (kcm_json_element(t->j))
    TRY(managed_entry(t));
  return ended(t);
}

int kcm_api_text_metadata(struct tctx *t, struct kcm_object *o) {
  int rc = open_object(t, "metadata");
  if (rc <= 0)
    return rc;
  t->has_meta = true;
  while (kcm_json_member(t->j)) {
    const char *s;
    size_t n;
    if (kcm_json_key_is(t->j, "name")) {
      free(o->name);
      o->name = NULL;
      if ((rc = str(t, "metadata.name", &s, &n)) > 0) {
        if (memchr(s, '\0', n))
          return bad(t, "metadata.name", KCM_API_NUL_PROBLEM);
        t->name_long = n > KCM_API_NAME_MAX;
        if (!(o->name = strndup(s, n)))
          return KCM_ENOMEM;
      }
    } else if (kcm_json_key_is(t->j, "namespace")) {
      kcm_intern_put(t->pool, o->ns);
      o->ns = NULL;
      if ((rc = str(t, "metadata.namespace", &s, &n)) > 0 && memchr(s, '\0', n))
        return bad(t, "metadata.namespace", KCM_API_NUL_PROBLEM);
      if (rc > 0 && n && !(o->ns = kcm_intern_get(t->pool, s, n)))
        return KCM_ENOMEM;
    } else if (kcm_json_key_is(t->j, "uid")) {
      t->has_uid = false;
      if ((rc = str(t, "metadata.uid", &s, &n)) > 0) {
        if (kcm_api_parse_uid(s, &o->uid))
          return bad(t, "metadata.uid", "is not a UID");
        t->has_uid = true;
      }
    } else if (kcm_json_key_is(t->j, "resourceVersion")) {
      t->has_rv = false;
      if ((rc = str(t, "metadata.resourceVersion", &s, &n)) > 0) {
        if (strlen(s) != n || !kcm_api_parse_rv(s, &o->rv))
          return bad(t, "metadata.resourceVersion", "is not a number");
        t->has_rv = true;
      }
    } else if (kcm_json_key_is(t->j, "generation")) {
      rc = integer(t, "metadata.generation", 0, INT64_MAX, &o->generation);
    } else if (kcm_json_key_is(t->j, "creationTimestamp")) {
      rc = time_value(t, "metadata.creationTimestamp", &o->created);
    } else if (kcm_json_key_is(t->j, "deletionTimestamp")) {
      rc = time_value(t, "metadata.deletionTimestamp", &o->deleted);
    } else if (kcm_json_key_is(t->j, "labels")) {
      rc = labels(t, o);
    } else if (kcm_json_key_is(t->j, "ownerReferences")) {
      rc = owners(t, o);
    } else if (kcm_json_key_is(t->j, "annotations")) {
      rc = t->pairs ? pairs(t, t->pairs) : annotations(t, t->pod);
    } else if (t->writers && kcm_json_key_is(t->j, "managedFields")) {
      rc = managed_fields(t);
    } else {
      rc = skip(t);
    }
    if (rc < 0)
      return rc;
  }
  return ended(t);
}

/* The checks decode_meta() makes once every field is read. */
int kcm_api_text_metadata_complete(struct tctx *t, struct kcm_object *o) {
  if (!t->has_meta)
    return bad(t, "metadata", "is required");
  if (!o->name || !*o->name)
    return bad(t, "metadata.name", "is required");
  if (t->name_long)
    return bad(t, "metadata.name", "is longer than 253 characters");
  if (!o->ns)
    return bad(t, "metadata.namespace", "is required");
  if (!t->has_uid)
    return bad(t, "metadata.uid", "is not a UID");
  if (!t->has_rv)
    return bad(t, "metadata.resourceVersion", "is required");
  return 0;
}

/* --- pods: spec and status ----------------------------------------------------------- */

static int init_containers(struct tctx *t) {
  if (kcm_json_peek(t->j) != KCM_JSON_ARRAY) {
    t->init_bad = kcm_json_peek(t->j) != KCM_JSON_NULL;
    return skip(t);
  }
  kcm_json_array(t->j);
  while (kcm_json_element(t->j)) {
    char name[256] = "";
    bool always = false;
    if (kcm_json_peek(t->j) != KCM_JSON_OBJECT) {
      TRY(skip(t));
      continue;
    }
    kcm_json_object(t->j);
    while (kcm_json_member(t->j)) {
      const char *s;
      size_t n;
      bool is_name = kcm_json_key_is(t->j, "name");
      if ((is_name || kcm_json_key_is(t->j, "restartPolicy")) &&
          kcm_json_peek(t->j) == KCM_JSON_STRING && kcm_json_string(t->j, &s, &n)) {
        if (is_name)
          copy_short(name, sizeof(name), s, n);
        else
          always = !strcmp(s, "Always");
      } else {
        TRY(skip(t));
      }
    }
    TRY(ended(t));
    if (always && *name && kcm_buf_append(&t->sidecars, name, strlen(name) + 1))
      return KCM_ENOMEM;
  }
  return ended(t);
}

static int spec(struct tctx *t, struct kcm_pod *p) {
  int rc = open_object(t, "spec");
  if (rc <= 0)
    return rc;
  while (kcm_json_member(t->j)) {
    const char *s;
    size_t n;
    if (kcm_json_key_is(t->j, "nodeName")) {
      kcm_intern_put(t->pool, p->node);
      p->node = NULL;
      if ((rc = str(t, "spec.nodeName", &s, &n)) > 0 && n &&
          !(p->node = kcm_intern_get(t->pool, s, n)))
        return KCM_ENOMEM;
    } else if (kcm_json_key_is(t->j, "initContainers")) {
      rc = init_containers(t);
    } else {
      rc = skip(t);
    }
    if (rc < 0)
      return rc;
  }
  return ended(t);
}

static int condition(struct tctx *t, struct kcm_pod *p) {
  char when[64] = "";
  bool ready_type = false, is_true = false, when_set = false, when_string = true;
  if (kcm_json_peek(t->j) != KCM_JSON_OBJECT)
    return skip(t); /* not an object: ignored, as in api.c */
  kcm_json_object(t->j);
  while (kcm_json_member(t->j)) {
    const char *s;
    size_t n;
    int rc = 0;
    if (kcm_json_key_is(t->j, "type")) {
      ready_type = false;
      if ((rc = str(t, "status.conditions.type", &s, &n)) > 0)
        ready_type = !strcmp(s, "Ready");
    } else if (kcm_json_key_is(t->j, "status")) {
      is_true = false;
      if ((rc = str(t, "status.conditions.status", &s, &n)) > 0)
        is_true = !strcmp(s, "True");
    } else if (kcm_json_key_is(t->j, "lastTransitionTime")) {
      when_set = kcm_json_peek(t->j) != KCM_JSON_NULL;
      when_string = kcm_json_peek(t->j) == KCM_JSON_STRING;
      if (when_string && kcm_json_string(t->j, &s, &n))
        copy_short(when, sizeof(when), s, n);
      else
        rc = skip(t);
    } else {
      rc = skip(t);
    }
    if (rc < 0)
      return rc;
  }
  TRY(ended(t));
  if (!ready_type)
    return 0;
  p->ready = is_true;
  if (!p->ready || !when_set)
    return 0;
  if (!when_string)
    return bad(t, "status.conditions.lastTransitionTime", "must be a string");
  if (kcm_api_parse_time(when, &p->ready_since))
    return bad(t, "status.conditions.lastTransitionTime", "is not an RFC 3339 time");
  return 0;
}

/* restartCount of a container status (ignored when not an object). */
static int restarts(struct tctx *t, const char *field, bool init) {
  char name[256] = "";
  int64_t r = 0;
  if (init)
    t->init_statuses++;
  if (kcm_json_peek(t->j) != KCM_JSON_OBJECT)
    return skip(t);
  kcm_json_object(t->j);
  while (kcm_json_member(t->j)) {
    const char *s;
    size_t n;
    int rc = 0;
    if (kcm_json_key_is(t->j, "restartCount")) {
      rc = integer(t, field, INT32_MIN, INT32_MAX, &r);
    } else if (init && kcm_json_key_is(t->j, "name")) {
      name[0] = '\0';
      if ((rc = str(t, "status.initContainerStatuses.name", &s, &n)) > 0)
        copy_short(name, sizeof(name), s, n);
    } else {
      rc = skip(t);
    }
    if (rc < 0)
      return rc;
  }
  TRY(ended(t));
  if (!init) {
    if (r > t->pod->restarts)
      t->pod->restarts = (int32_t)r;
    return 0;
  }
  if (*name) {
    int32_t r32 = (int32_t)r;
    if (kcm_buf_append(&t->inits, &r32, sizeof(r32)) ||
        kcm_buf_append(&t->inits, name, strlen(name) + 1))
      return KCM_ENOMEM;
  }
  return 0;
}

static int status(struct tctx *t, struct kcm_pod *p) {
  int rc = open_object(t, "status");
  if (rc <= 0)
    return rc;
  while (kcm_json_member(t->j)) {
    const char *s;
    size_t n;
    if (kcm_json_key_is(t->j, "phase")) {
      rc = str(t, "status.phase", &s, &n);
      p->phase = (uint8_t)kcm_api_pod_phase(rc > 0 ? s : NULL);
    } else if (kcm_json_key_is(t->j, "conditions")) {
      if ((rc = open_array(t, "status.conditions")) > 0) {
        while (kcm_json_element(t->j))
          TRY(condition(t, p));
        rc = ended(t);
      }
    } else if (kcm_json_key_is(t->j, "containerStatuses") ||
               kcm_json_key_is(t->j, "initContainerStatuses")) {
      bool init = t->j->key[0] == 'i';
      if ((rc = open_array(t, init ? "status.initContainerStatuses"
                                   : "status.containerStatuses")) > 0) {
        while (kcm_json_element(t->j))
          TRY(restarts(t,
                       init ? "status.initContainerStatuses.restartCount"
                            : "status.containerStatuses.restartCount",
                       init));
        rc = ended(t);
      }
    } else {
      rc = skip(t);
    }
    if (rc < 0)
      return rc;
  }
  return ended(t);
}

int32_t kcm_api_deletion_cost(const char *s) {
  char *end;
  long long v;
  errno = 0;
  v = strtoll(s, &end, 10);
  if (!errno && end != s && !*end && v >= INT32_MIN && v <= INT32_MAX)
    return (int32_t)v;
  return 0; /* an invalid cost counts as 0, as upstream */
}

int kcm_api_sidecar_restarts(struct kcm_pod *p, const struct kcm_buf *sidecars,
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

static int pod(struct tctx *t) {
  struct kcm_pod *p = t->pod;
  int rc = 0;
  if (!kcm_json_object(t->j))
    return mismatch(t, "(object)", "must be a JSON object");
  while (kcm_json_member(t->j)) {
    if (kcm_json_key_is(t->j, "metadata"))
      rc = kcm_api_text_metadata(t, &p->o);
    else if (kcm_json_key_is(t->j, "spec"))
      rc = spec(t, p);
    else if (kcm_json_key_is(t->j, "status"))
      rc = status(t, p);
    else
      rc = skip(t);
    if (rc < 0)
      return rc;
  }
  if (t->j->err || (t->whole && !kcm_json_done(t->j)))
    return bad(t, "(json)", t->j->err);
  TRY(kcm_api_text_metadata_complete(t, &p->o));
  if (t->init_statuses && t->init_bad)
    return bad(t, "spec.initContainers", "must be a list");
  return kcm_api_sidecar_restarts(t->pod, &t->sidecars, &t->inits);
}

static int decode_pod(struct kcm_json *j, bool whole, struct kcm_intern *pool,
                      struct kcm_object **out, struct kcm_api_error *err) {
  struct tctx t;
  struct kcm_pod *p = calloc(1, sizeof(*p));
  int rc;
  if (!p)
    return KCM_ENOMEM;
  p->o.kind = KCM_KIND_POD;
  p->o.refs = 1;
  memset(&t, 0, sizeof(t));
  t.j = j;
  t.pool = pool;
  t.err = err;
  t.pod = p;
  t.whole = whole;
  kcm_buf_init(&t.sidecars, 1u << 20);
  kcm_buf_init(&t.inits, 1u << 20);
  rc = pod(&t);
  kcm_buf_release(&t.sidecars);
  kcm_buf_release(&t.inits);
  if (rc) {
    if (rc == KCM_ENOMEM && !err->field[0])
      bad(&t, "(object)", "out of memory");
    kcm_api_unref(&p->o, pool);
    return rc;
  }
  *out = &p->o;
  return 0;
}


/* --- entry points ------------------------------------------------------------------- */

int kcm_api_decode_text(enum kcm_kind kind, const char *text, size_t len, struct kcm_json *j,
                        struct kcm_api_memo *memo, struct kcm_intern *pool,
                        struct kcm_object **out, struct kcm_api_error *err) {
  struct kcm_json own;
  int rc;

  *out = NULL;
  memset(err, 0, sizeof(*err));
  if (!j) {
    kcm_json_init(&own);
    j = &own;
  }
  if (kind == KCM_KIND_POD) {
    kcm_json_start(j, text, len);
    rc = decode_pod(j, true, pool, out, err);
  } else {
    rc = kcm_api_text_decode_workload(kind, text, len, j, memo, pool, out, err);
  }
  if (j == &own)
    kcm_json_release(&own);
  return rc;
}

int kcm_api_decode_pod_at(struct kcm_json *j, struct kcm_intern *pool, struct kcm_object **out,
                          struct kcm_api_error *err) {
  *out = NULL;
  memset(err, 0, sizeof(*err));
  return decode_pod(j, false, pool, out, err);
}

uint64_t kcm_api_resource_version_text(const char *body, size_t len) {
  static const char *const path[] = {"metadata", "resourceVersion", NULL};
  struct kcm_json j;
  const char *s;
  size_t n;
  uint64_t rv = 0;
  kcm_json_init(&j);
  kcm_json_start(&j, body, len);
  if (kcm_json_find(&j, path) && kcm_json_string(&j, &s, &n) &&
      (strlen(s) != n || !kcm_api_parse_rv(s, &rv)))
    rv = 0;
  kcm_json_release(&j);
  return rv;
}
