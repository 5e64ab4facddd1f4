/*
 * api/meta.c — the metadata every kind shares, as one field list that JSON
 * and protobuf both read (ObjectMeta in upstream's generated.proto).
 *
 * A null reads as absent; a field the controllers depend on with a wrong
 * type is an error naming it. Labels, annotations and owner references
 * are gathered as their entries come and adopted when the metadata ends.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/buf.h"
#include "kcm/error.h"
#include "kcm/intern.h"
#include "kcm/labels.h"
#include "source.h"

#define COST_ANNOTATION "controller.kubernetes.io/pod-deletion-cost"

static int name(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  const char *p;
  size_t n;
  int rc;
  free(m->o->name);
  m->o->name = NULL;
  if ((rc = kcm_api_src_string(s, "metadata.name", &p, &n)) <= 0)
    return rc;
  if (memchr(p, '\0', n))
    return kcm_api_src_fail(s, "metadata.name", KCM_API_NUL_PROBLEM);
  m->name_long = n > KCM_API_NAME_MAX;
  return (m->o->name = strndup(p, n)) ? 1 : KCM_ENOMEM;
}

static int namespace(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  const char *p;
  size_t n;
  int rc;
  kcm_intern_put(s->pool, m->o->ns);
  m->o->ns = NULL;
  if ((rc = kcm_api_src_string(s, "metadata.namespace", &p, &n)) <= 0)
    return rc;
  if (memchr(p, '\0', n))
    return kcm_api_src_fail(s, "metadata.namespace", KCM_API_NUL_PROBLEM);
  return !n || (m->o->ns = kcm_intern_get(s->pool, p, n)) ? 1 : KCM_ENOMEM;
}

static int uid(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  const char *p;
  size_t n;
  char text[40];
  int rc;
  m->has_uid = false;
  if ((rc = kcm_api_src_string(s, "metadata.uid", &p, &n)) <= 0)
    return rc;
  kcm_api_src_cstr(text, sizeof(text), p, n);
  if (kcm_api_parse_uid(text, &m->o->uid))
    return kcm_api_src_fail(s, "metadata.uid", "is not a UID");
  m->has_uid = true;
  return 1;
}

static int resource_version(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  const char *p;
  size_t n;
  char text[40];
  int rc;
  m->has_rv = false;
  if ((rc = kcm_api_src_string(s, "metadata.resourceVersion", &p, &n)) <= 0)
    return rc;
  kcm_api_src_cstr(text, sizeof(text), p, n);
  if (strlen(text) != n || !kcm_api_parse_rv(text, &m->o->rv))
    return kcm_api_src_fail(s, "metadata.resourceVersion", "is not a number");
  m->has_rv = true;
  return 1;
}

static int generation(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  return kcm_api_src_int(s, "metadata.generation", 0, INT64_MAX, &m->o->generation);
}

static int created(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  return kcm_api_src_time(s, "metadata.creationTimestamp", &m->o->created);
}

static int deleted(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  return kcm_api_src_time(s, "metadata.deletionTimestamp", &m->o->deleted);
}

static int label(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  struct kcm_label *l;
  const char *p;
  size_t n;
  int rc = kcm_api_src_string(s, "metadata.labels", &p, &n);
  if (rc <= 0)
    return rc ? rc : kcm_api_src_fail(s, "metadata.labels", "must be an object of strings");
  if (!(l = kcm_buf_grow_items(m->labels, m->nlabels, sizeof(*l))))
    return KCM_ENOMEM;
  m->labels = l;
  l += m->nlabels;
  l->key = kcm_intern_get(s->pool, s->key, s->keylen);
  l->value = kcm_intern_get(s->pool, p, n);
  if (!l->key || !l->value) {
    kcm_intern_put(s->pool, l->key);
    kcm_intern_put(s->pool, l->value);
    return KCM_ENOMEM;
  }
  m->nlabels++;
  return 1;
}

static int labels(struct kcm_api_src *s, void *obj) {
  ((struct kcm_api_meta *)obj)->seen_labels = true;
  return kcm_api_src_map(s, "metadata.labels", label, obj);
}

static int32_t deletion_cost(const char *s) {
  char *end;
  long long v;
  errno = 0;
  v = strtoll(s, &end, 10);
  if (!errno && end != s && !*end && v >= INT32_MIN && v <= INT32_MAX)
    return (int32_t)v;
  return 0; /* an invalid cost counts as 0, as upstream */
}

/* A pod's annotation: only the deletion cost is read. */
static int cost(struct kcm_api_src *s, struct kcm_api_meta *m) {
  const char *p;
  size_t n;
  char *text;
  int rc;
  if (s->keylen != strlen(COST_ANNOTATION) || memcmp(s->key, COST_ANNOTATION, s->keylen))
    return kcm_api_src_skip(s);
  *m->deletion_cost = 0;
  if ((rc = kcm_api_src_string(s, "metadata.annotations", &p, &n)) <= 0)
    return rc;
  if (!(text = strndup(p, n)))
    return KCM_ENOMEM;
  *m->deletion_cost = deletion_cost(text);
  free(text);
  return 1;
}

/* Every annotation but kubectl's last-applied copy; a key given twice
 * keeps its last value. */
static int annotation(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  struct kcm_pair *a;
  const char *p;
  size_t n;
  int rc;
  if (!m->pairs)
    return cost(s, m);
  if ((rc = kcm_api_src_string(s, "metadata.annotations", &p, &n)) <= 0)
    return rc ? rc : kcm_api_src_fail(s, "metadata.annotations", "must be an object of strings");
  if (s->keylen == strlen(KCM_API_LAST_APPLIED) && !memcmp(s->key, KCM_API_LAST_APPLIED, s->keylen))
    return 1;
  if (!(a = kcm_buf_grow_items(m->annotations, m->nannotations, sizeof(*a))))
    return KCM_ENOMEM;
  m->annotations = a;
  a += m->nannotations;
  a->key = strndup(s->key, s->keylen);
  a->value = strndup(p, n);
  if (!a->key || !a->value) {
    free(a->key);
    free(a->value);
    return KCM_ENOMEM;
  }
  m->nannotations++;
  return 1;
}

static int annotations(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  /* a pod's that is no object: no annotations to read */
  if (!m->pairs && !kcm_api_src_is(s, KCM_JSON_OBJECT))
    return kcm_api_src_skip(s);
  m->seen_annotations = true;
  return kcm_api_src_map(s, "metadata.annotations", annotation, obj);
}

/* --- ownerReferences: only the first with controller: true is kept, and only its
 * other fields must have the right types ----------------------------------------- */

struct owner {
  struct kcm_api_meta *m;
  const char *val[3]; /* apiVersion, kind, name; pooled */
  const char *wrong, *wrong_problem;
  char uid[40];
  bool has_uid, controller, block;
};

static const char *const owner_fields[4] = {
    "metadata.ownerReferences.apiVersion", "metadata.ownerReferences.kind",
    "metadata.ownerReferences.name", "metadata.ownerReferences.uid"};

static int owner_string(struct kcm_api_src *s, struct owner *w, int i) {
  const char *p;
  size_t n;
  int rc;
  if (!kcm_api_src_is(s, KCM_JSON_STRING) && !kcm_api_src_is(s, KCM_JSON_NULL)) {
    w->wrong = owner_fields[i];
    w->wrong_problem = "must be a string";
    return kcm_api_src_skip(s);
  }
  if (i == 3) { /* parsed, not kept */
    w->has_uid = false;
    if ((rc = kcm_api_src_string(s, owner_fields[i], &p, &n)) > 0) {
      kcm_api_src_cstr(w->uid, sizeof(w->uid), p, n);
      w->has_uid = true;
    }
    return rc;
  }
  kcm_intern_put(s->pool, w->val[i]);
  w->val[i] = NULL;
  if ((rc = kcm_api_src_string(s, owner_fields[i], &p, &n)) <= 0)
    return rc;
  return (w->val[i] = kcm_intern_get(s->pool, p, n)) ? 1 : KCM_ENOMEM;
}

static int owner_api_version(struct kcm_api_src *s, void *obj) { return owner_string(s, obj, 0); }
static int owner_kind(struct kcm_api_src *s, void *obj) { return owner_string(s, obj, 1); }
static int owner_name(struct kcm_api_src *s, void *obj) { return owner_string(s, obj, 2); }
static int owner_uid(struct kcm_api_src *s, void *obj) { return owner_string(s, obj, 3); }

static int owner_controller(struct kcm_api_src *s, void *obj) {
  struct owner *w = obj;
  return kcm_api_src_bool(s, "metadata.ownerReferences.controller", &w->controller);
}

static int owner_block(struct kcm_api_src *s, void *obj) {
  struct owner *w = obj;
  if (kcm_api_src_is(s, KCM_JSON_BOOL) || kcm_api_src_is(s, KCM_JSON_NULL))
    return kcm_api_src_bool(s, "metadata.ownerReferences.blockOwnerDeletion", &w->block);
  w->wrong = "metadata.ownerReferences.blockOwnerDeletion";
  w->wrong_problem = "must be true or false";
  return kcm_api_src_skip(s);
}

static const struct kcm_api_field owner_list[] = {
    KCM_API_FIELD("kind", 1, owner_kind),
    KCM_API_FIELD("name", 3, owner_name),
    KCM_API_FIELD("uid", 4, owner_uid),
    KCM_API_FIELD("apiVersion", 5, owner_api_version),
    KCM_API_FIELD("controller", 6, owner_controller),
    KCM_API_FIELD("blockOwnerDeletion", 7, owner_block),
};

static int owner_check(struct kcm_api_src *s, struct owner *w) {
  struct kcm_object *o = w->m->o;
  if (!w->controller || o->has_controller)
    return 0;
  if (w->wrong)
    return kcm_api_src_fail(s, w->wrong, w->wrong_problem);
  if (!w->val[0] || !w->val[1] || !w->val[2] || !w->has_uid)
    return kcm_api_src_fail(s, "metadata.ownerReferences",
                            "apiVersion, kind, name and uid are required");
  if (kcm_api_parse_uid(w->uid, &o->controller.uid))
    return kcm_api_src_fail(s, "metadata.ownerReferences.uid", "is not a UID");
  o->controller.api_version = w->val[0];
  o->controller.kind = w->val[1];
  o->controller.name = w->val[2];
  o->controller.block_owner_deletion = w->block;
  o->has_controller = true;
  w->val[0] = w->val[1] = w->val[2] = NULL;
  return 0;
}

static int owner(struct kcm_api_src *s, void *obj) {
  struct owner w = {.m = obj};
  int rc, i;
  w.m->owners++;
  if (!kcm_api_src_is(s, KCM_JSON_OBJECT))
    return kcm_api_src_mismatch(s, "metadata.ownerReferences", "entries must be objects");
  rc = kcm_api_src_message(s, "metadata.ownerReferences", KCM_API_FIELDS(owner_list), &w);
  if (rc >= 0)
    rc = owner_check(s, &w);
  for (i = 0; i < 3; i++)
    kcm_intern_put(s->pool, w.val[i]);
  return rc < 0 ? rc : 1;
}

static int owners(struct kcm_api_src *s, void *obj) {
  ((struct kcm_api_meta *)obj)->seen_owners = true;
  return kcm_api_src_list(s, "metadata.ownerReferences", owner, obj);
}

/* --- managedFields: who wrote the status, and when ------------------------------- */

struct managed {
  const char *manager; /* pooled: the reader reuses its strings */
  int64_t at;
  bool status;
};

static int managed_manager(struct kcm_api_src *s, void *obj) {
  struct managed *e = obj;
  const char *p;
  size_t n;
  int rc;
  kcm_intern_put(s->pool, e->manager);
  e->manager = NULL;
  if ((rc = kcm_api_src_string(s, "metadata.managedFields.manager", &p, &n)) <= 0 || !n)
    return rc;
  return (e->manager = kcm_intern_get(s->pool, p, n)) ? 1 : KCM_ENOMEM;
}

static int managed_subresource(struct kcm_api_src *s, void *obj) {
  struct managed *e = obj;
  const char *p;
  size_t n;
  int rc = kcm_api_src_string(s, "metadata.managedFields.subresource", &p, &n);
  if (rc > 0)
    e->status = n == 6 && !memcmp(p, "status", 6);
  return rc;
}

static int managed_time(struct kcm_api_src *s, void *obj) {
  struct managed *e = obj;
  return kcm_api_src_time(s, "metadata.managedFields.time", &e->at);
}

static const struct kcm_api_field managed_list[] = {
    KCM_API_FIELD("manager", 1, managed_manager),
    KCM_API_FIELD("time", 4, managed_time),
    KCM_API_FIELD("subresource", 8, managed_subresource),
};

static int managed_entry(struct kcm_api_src *s, void *obj) {
  struct kcm_writers *writers = obj;
  struct managed e = {NULL, 0, false};
  int rc = kcm_api_src_message(s, "metadata.managedFields", KCM_API_FIELDS(managed_list), &e);
  if (rc <= 0 || !e.manager || !e.status || writers->n == KCM_STATUS_WRITERS) {
    writers->more |= rc > 0 && e.manager && e.status;
    kcm_intern_put(s->pool, e.manager);
    return rc;
  }
  writers->status[writers->n].manager = e.manager;
  writers->status[writers->n++].at = e.at;
  return 1;
}

static int managed_fields(struct kcm_api_src *s, void *obj) {
  struct kcm_api_meta *m = obj;
  if (!m->writers)
    return kcm_api_src_skip(s);
  return kcm_api_src_list(s, "metadata.managedFields", managed_entry, m->writers);
}

/* --- the list, and the metadata as a whole --------------------------------------- */

static const struct kcm_api_field meta_list[] = {
    KCM_API_FIELD("name", 1, name),
    KCM_API_FIELD("namespace", 3, namespace),
    KCM_API_FIELD("uid", 5, uid),
    KCM_API_FIELD("resourceVersion", 6, resource_version),
    KCM_API_FIELD("generation", 7, generation),
    KCM_API_FIELD("creationTimestamp", 8, created),
    KCM_API_FIELD("deletionTimestamp", 9, deleted),
    KCM_API_FIELD("labels", 11, labels),
    KCM_API_FIELD("annotations", 12, annotations),
    KCM_API_FIELD("ownerReferences", 13, owners),
    KCM_API_FIELD("managedFields", 17, managed_fields),
};

static void gathered_release(struct kcm_api_src *s, struct kcm_api_meta *m) {
  struct kcm_labels l = {m->labels, m->nlabels};
  struct kcm_pairs a = {m->annotations, m->nannotations};
  kcm_labels_release(&l, s->pool);
  kcm_api_pairs_release(&a);
  m->labels = NULL;
  m->annotations = NULL;
  m->nlabels = m->nannotations = 0;
}

int kcm_api_meta_read(struct kcm_api_src *s, struct kcm_api_meta *m) {
  struct kcm_object *o = m->o;
  int rc;
  m->owners = 0;
  m->seen_labels = m->seen_annotations = m->seen_owners = false;
  rc = kcm_api_src_message(s, "metadata", KCM_API_FIELDS(meta_list), m);
  if (rc > 0) {
    m->has_meta = true;
    if (m->seen_owners)
      o->nowners = m->owners > UINT16_MAX ? UINT16_MAX : (uint16_t)m->owners;
    rc = 0;
    if (m->seen_labels) {
      kcm_labels_release(&o->labels, s->pool);
      rc = kcm_labels_adopt(&o->labels, s->pool, m->labels, m->nlabels);
      m->labels = NULL;
      m->nlabels = 0;
    }
    if (!rc && m->pairs && m->seen_annotations) {
      kcm_api_pairs_release(m->pairs);
      rc = kcm_api_pairs_adopt(m->pairs, m->annotations, m->nannotations);
      m->annotations = NULL;
      m->nannotations = 0;
    }
    rc = rc ? rc : 1;
  }
  gathered_release(s, m);
  return rc;
}

int kcm_api_meta_complete(struct kcm_api_src *s, const struct kcm_api_meta *m) {
  const struct kcm_object *o = m->o;
  if (!m->has_meta)
    return kcm_api_src_fail(s, "metadata", "is required");
  if (!o->name || !*o->name)
    return kcm_api_src_fail(s, "metadata.name", "is required");
  if (m->name_long)
    return kcm_api_src_fail(s, "metadata.name", "is longer than 253 characters");
  if (!o->ns)
    return kcm_api_src_fail(s, "metadata.namespace", "is required");
  if (!m->has_uid)
    return kcm_api_src_fail(s, "metadata.uid", "is not a UID");
  if (!m->has_rv)
    return kcm_api_src_fail(s, "metadata.resourceVersion", "is required");
  return 0;
}
