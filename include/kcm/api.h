/*
 * api — the Kubernetes objects kcm caches, decoded once into small structs.
 *
 * Pods, ReplicaSets and Deployments keep only what the controllers read.
 * Pod templates are kept as canonical JSON text (keys sorted, compact), used
 * to create pods and to compare templates. Strings that repeat across
 * objects (namespaces, node names, labels, owner names) come from a
 * struct kcm_intern pool.
 *
 * Objects are immutable once decoded and reference-counted: the cache
 * holds one reference, and code that keeps an object past the current loop
 * turn takes its own with kcm_api_ref() and drops it with kcm_api_unref().
 * The pool passed to kcm_api_unref() must be the one used to decode.
 *
 * Decoding is strict where the controllers depend on a field (a wrong type
 * is an error naming the field) and lenient elsewhere (unknown fields and
 * nulls are ignored; absent fields take the API defaults).
 */
#ifndef KCM_API_H
#define KCM_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kcm/buf.h"
#include "kcm/intern.h"
#include "kcm/json.h"
#include "kcm/jsonw.h"
#include "kcm/labels.h"

enum kcm_kind {
  KCM_KIND_POD,
  KCM_KIND_REPLICASET,
  KCM_KIND_DEPLOYMENT,
  KCM_KIND_COUNT,
};

struct kcm_uid {
  uint8_t b[16];
};

/* The ownerReference with controller: true, when the object has one. */
struct kcm_owner {
  const char *api_version; /* pooled */
  const char *kind;        /* pooled */
  const char *name;        /* pooled */
  struct kcm_uid uid;
  bool block_owner_deletion;
};

/* The head of every cached object. */
struct kcm_object {
  const char *ns;   /* pooled */
  char *name;       /* owned */
  struct kcm_uid uid;
  uint64_t rv;      /* metadata.resourceVersion */
  int64_t generation;
  int64_t created;  /* creationTimestamp, Unix seconds */
  int64_t deleted;  /* deletionTimestamp, Unix seconds; 0 if not being deleted */
  struct kcm_labels labels;
  struct kcm_owner controller;
  uint32_t refs;
  uint16_t nowners;  /* ownerReferences, the controller included */
  uint8_t kind;      /* enum kcm_kind */
  bool has_controller;
  /* Links kept by the informer's store; no one else touches them. */
  struct kcm_object *ns_prev, *ns_next, *own_prev, *own_next;
};

/* The most bytes of one object's JSON kcm reads (a watch event, a list
 * item, an answer). What kube-apiserver stores is bounded by etcd's request
 * limit (--max-request-bytes, 1.5 MiB by default) and its own 3 MiB on a
 * request body, but what it serves can be larger: as JSON, a stored byte
 * can take six ("\u003c" for '<', "\u0001" for a control byte), and it
 * adds managedFields. 64 MiB holds an object at etcd's limit raised to
 * 10 MiB; it only bounds what a broken or hostile server could make kcm
 * buffer. */
#define KCM_API_OBJECT_MAX (64u << 20)

/* The longest object name: a DNS-1123 subdomain. */
#define KCM_API_NAME_MAX 253

/* The label that tells a Deployment's ReplicaSets (and their pods) apart. */
#define KCM_API_HASH_LABEL "pod-template-hash"
/* kubectl apply's copy of the object; never decoded (large, never read). */
#define KCM_API_LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"

/* A map of owned strings (annotations). */
struct kcm_pair {
  char *key;
  char *value;
};

struct kcm_pairs {
  struct kcm_pair *items; /* sorted by key */
  uint32_t n;
};

const char *kcm_api_pairs_get(const struct kcm_pairs *p, const char *key);
bool kcm_api_pairs_equal(const struct kcm_pairs *a, const struct kcm_pairs *b);
/* Set key to a copy of value, keeping the order. Returns 0 or KCM_ENOMEM. */
int kcm_api_pairs_set(struct kcm_pairs *p, const char *key, const char *value);
void kcm_api_pairs_remove(struct kcm_pairs *p, const char *key);
/* Make a map of `items` (n pairs of owned strings), taking over the array
 * and its strings: sorted by key, and of a key given twice the last pair
 * kept, as a JSON object decodes; n log n comparisons. Returns 0 or
 * KCM_ENOMEM (the items freed, *out empty). */
int kcm_api_pairs_adopt(struct kcm_pairs *out, struct kcm_pair *items, uint32_t n);
/* Set every key of src that skip (may be NULL) does not refuse to a copy of
 * its value in dst, in one walk of both; *changed set when dst changed.
 * Returns 0 or KCM_ENOMEM (dst then holds some of the changes, still a
 * valid map). */
int kcm_api_pairs_update(struct kcm_pairs *dst, const struct kcm_pairs *src,
                         bool (*skip)(const char *key), bool *changed);
/* Drop, in one walk, every pair whose key keep refuses. */
void kcm_api_pairs_keep(struct kcm_pairs *p, bool (*keep)(const char *key));
int kcm_api_pairs_copy(struct kcm_pairs *dst, const struct kcm_pairs *src);
void kcm_api_pairs_release(struct kcm_pairs *p);

struct kcm_condition {
  char *type;
  char *status;
  char *reason;
  char *message;
  int64_t last_update;     /* 0 if absent */
  int64_t last_transition; /* 0 if absent */
};

struct kcm_conditions {
  struct kcm_condition *items;
  uint32_t n;
};

/* Conditions keep their order; copies own their strings. */
int kcm_api_condition_copy(struct kcm_condition *dst, const struct kcm_condition *src);
const struct kcm_condition *kcm_api_condition_get(const struct kcm_conditions *c,
                                                  const char *type);
void kcm_api_condition_remove(struct kcm_conditions *c, const char *type);
/* Append a copy of cond. Returns 0 or KCM_ENOMEM. */
int kcm_api_condition_append(struct kcm_conditions *c, const struct kcm_condition *cond);
int kcm_api_conditions_copy(struct kcm_conditions *dst, const struct kcm_conditions *src);
void kcm_api_conditions_release(struct kcm_conditions *c);
/* Every field equal, in the same order. */
bool kcm_api_conditions_equal(const struct kcm_conditions *a, const struct kcm_conditions *b);

enum kcm_pod_phase {
  KCM_POD_PENDING,
  KCM_POD_RUNNING,
  KCM_POD_SUCCEEDED,
  KCM_POD_FAILED,
  KCM_POD_UNKNOWN,
};

/* status.phase as an enum: unset or unknown values read as Pending. */
enum kcm_pod_phase kcm_api_pod_phase(const char *phase);

struct kcm_pod {
  struct kcm_object o;
  const char *node;        /* spec.nodeName, pooled; NULL if not scheduled */
  int64_t ready_since;     /* when Ready last became True; 0 if not ready */
  int32_t restarts;        /* highest restartCount of the regular containers */
  int32_t sidecar_restarts; /* highest of the restartable init containers */
  int32_t deletion_cost;   /* controller.kubernetes.io/pod-deletion-cost, 0 if unset */
  uint8_t phase;           /* enum kcm_pod_phase */
  bool ready;
};

/* The entries of a ReplicaSet's or Deployment's metadata.managedFields
 * for its status subresource: the field managers kube-apiserver records
 * (the first word of a writer's User-Agent, or the fieldManager it names)
 * and their times. On a write the server stamps only the writer's own
 * entry; anyone who may update the object may send the others. */
#define KCM_STATUS_WRITERS 4
struct kcm_writers {
  struct kcm_status_writer {
    const char *manager; /* pooled */
    int64_t at;          /* Unix seconds; 0 when the entry has no time */
  } status[KCM_STATUS_WRITERS]; /* the first ones, in the object's order */
  uint8_t n;                    /* kept */
  bool more;                    /* there were more than KCM_STATUS_WRITERS */
};

struct kcm_replicaset {
  struct kcm_object o;
  struct kcm_writers writers;
  struct kcm_pairs annotations;
  struct kcm_selector selector;
  struct kcm_labels template_labels;
  char *template;           /* canonical JSON of spec.template */
  uint64_t template_key;    /* kcm_api_template_key() of spec.template */
  int32_t replicas;         /* spec.replicas (default 1) */
  int32_t min_ready_seconds;
  struct {
    int32_t replicas;
    int32_t fully_labeled;
    int32_t ready;
    int32_t available;
    int32_t terminating; /* pods being deleted; -1 when unset */
    int64_t observed_generation;
    struct kcm_conditions conditions;
  } status;
};

/* An int-or-percent value (maxSurge, maxUnavailable). */
struct kcm_intstr {
  int32_t value;
  bool percent;
  bool set;
};

struct kcm_deployment {
  struct kcm_object o;
  struct kcm_writers writers;
  struct kcm_pairs annotations;
  struct kcm_selector selector;
  char *selector_json;      /* canonical JSON of spec.selector; NULL if absent */
  char *template;           /* canonical JSON of spec.template */
  uint64_t template_key;    /* kcm_api_template_key() of spec.template */
  int32_t replicas;         /* spec.replicas (default 1) */
  int32_t min_ready_seconds;
  int32_t revision_history_limit; /* -1 when unset (no cleanup) */
  int32_t progress_deadline;      /* seconds; -1 when unset */
  struct kcm_intstr max_surge;
  struct kcm_intstr max_unavailable;
  bool recreate;            /* strategy Recreate (else RollingUpdate) */
  bool paused;
  struct {
    int64_t observed_generation;
    int32_t replicas;
    int32_t updated;
    int32_t ready;
    int32_t available;
    int32_t unavailable;
    int32_t terminating;     /* the sum of its ReplicaSets'; -1 when unset */
    int32_t collision_count; /* -1 when unset */
    struct kcm_conditions conditions;
  } status;
};

/* The writers kept of a ReplicaSet or a Deployment; NULL for another kind. */
const struct kcm_writers *kcm_api_writers_of(const struct kcm_object *o);
/* The newest status entry kept: its manager (NULL for none) and *at. */
const char *kcm_api_writers_newest(const struct kcm_writers *w, int64_t *at);

/* Why decoding failed: the field and the problem, for logs. */
struct kcm_api_error {
  char field[96];
  char problem[96];
};


/* Pod templates of recently decoded ReplicaSets and Deployments, by their
 * text. Most watch events of those kinds change only status, so the
 * template comes byte for byte as before: its canonical JSON and key are
 * then copied from here and its spec is not parsed again. Zeroed = empty;
 * kcm_api_memo_release() frees the entries. */
#define KCM_API_MEMO_SLOTS 1024        /* templates remembered, one per slot */
#define KCM_API_MEMO_BYTES (4u << 20)  /* text they may hold together */
struct kcm_api_memo {
  struct kcm_api_memo_slot {
    uint64_t hash;   /* of text */
    char *text;      /* spec.template as it came; NULL: a free slot */
    size_t len;
    char *canonical; /* its canonical JSON */
    uint64_t key;    /* its kcm_api_template_key() */
  } *slots;          /* KCM_API_MEMO_SLOTS of them, allocated on first use */
  size_t bytes;      /* of text and canonical JSON held */
  uint64_t hits, misses;
};

void kcm_api_memo_release(struct kcm_api_memo *m);

/* Decode one object of `kind` from its JSON text (the tests check it
 * against a json-c tree decoder with the same rules). Objects are read in
 * place with `j` (scratch reused across calls; NULL for a temporary one) —
 * about ten times faster than through a json-c tree — but for the
 * selector and template of a ReplicaSet or Deployment, which json-c reads,
 * without the template's spec when `memo` (may be NULL) knows the
 * template. Broken JSON is an error with the field "(json)". */
int kcm_api_decode_text(enum kcm_kind kind, const char *text, size_t len, struct kcm_json *j,
                        struct kcm_api_memo *memo, struct kcm_intern *pool,
                        struct kcm_object **out, struct kcm_api_error *err);

/* The pod whose JSON object is the reader's next value, as
 * kcm_api_decode_text() reads it; the reader is left after the value (or
 * anywhere in it, on an error). */
int kcm_api_decode_pod_at(struct kcm_json *j, struct kcm_intern *pool, struct kcm_object **out,
                          struct kcm_api_error *err);

/* Decode an object of kind from protobuf, as kube-apiserver writes it for
 * application/vnd.kubernetes.protobuf, with the fields and rules of
 * kcm_api_decode_text(); a kind whose row has no protobuf reader is
 * refused. _proto takes the object in its envelope (the "k8s" magic and a
 * runtime.Unknown, as a watch event holds it); _proto_bare takes the bare
 * message (an item of a list). */
int kcm_api_decode_proto(enum kcm_kind kind, const void *body, size_t len,
                         struct kcm_intern *pool, struct kcm_object **out,
                         struct kcm_api_error *err);
int kcm_api_decode_proto_bare(enum kcm_kind kind, const void *msg, size_t len,
                              struct kcm_intern *pool, struct kcm_object **out,
                              struct kcm_api_error *err);

void kcm_api_writers_release(struct kcm_writers *w, struct kcm_intern *pool);

struct kcm_object *kcm_api_ref(struct kcm_object *o);
void kcm_api_unref(struct kcm_object *o, struct kcm_intern *pool);

/* Bytes of memory an object holds (struct, strings it owns, label and
 * annotation arrays; pooled strings not counted). An observer: the tests
 * and benchmarks read it, kcm does not. */
size_t kcm_api_size(const struct kcm_object *o);

/* A status count an object's controller keeps, by the name it has in the
 * API ("readyReplicas"); the spec's replicas count as "replicas". */
struct kcm_api_count {
  const char *name;
  int64_t value;
};
#define KCM_API_COUNTS 10 /* the most counts a kind has */

/* A kind: how the API serves it and how kcm keeps it. One row each
 * (src/api/kind_<kind>.c), indexed by enum kcm_kind; what differs between
 * kinds outside their decoders and their controllers is read from here. */
struct kcm_api_kind {
  enum kcm_kind kind;
  const char *name;        /* "ReplicaSet" */
  const char *singular;    /* "replicaset": the name kubectl and discovery give it */
  const char *short_name;  /* "rs": kubectl's short name */
  const char *group;       /* "apps"; "" for the core group */
  const char *version;     /* "v1" */
  const char *plural;      /* "replicasets": the resource */
  const char *prefix;      /* "/apis/apps/v1": where its paths begin */
  const char *api_version; /* "apps/v1": its apiVersion, as a reference to it carries */
  size_t size;             /* of its struct */
  /* Its protobuf reader of a bare message (src/api/proto.c); NULL: it is
   * read as JSON only. */
  int (*decode_proto)(const void *msg, size_t len, struct kcm_intern *pool,
                      struct kcm_object **out, struct kcm_api_error *err);
  bool patch_as_update;    /* upstream's bootstrap roles grant its merge and JSON
                              patches only as update (sent as GET, then PUT) */
  size_t writers_at;       /* where its struct kcm_writers is; 0: it keeps none */
  size_t replicas_at;      /* where its int32_t spec.replicas is; 0: it has none */
  /* Its reader of a whole JSON text, as kcm_api_decode_text() (which
   * calls it with j and memo set). */
  int (*decode_text)(const char *text, size_t len, struct kcm_json *j,
                     struct kcm_api_memo *memo, struct kcm_intern *pool,
                     struct kcm_object **out, struct kcm_api_error *err);
  /* Its reader in place, in one pass over a list page or watch event (as
   * kcm_api_decode_pod_at()); NULL: its objects are cut out of the text
   * first and read with kcm_api_decode_text(). */
  int (*decode_at)(struct kcm_json *j, struct kcm_intern *pool, struct kcm_object **out,
                   struct kcm_api_error *err);
  /* The counts its controller writes in its status, in a fixed order, into
   * out (KCM_API_COUNTS); returns how many (0: none kept). */
  size_t (*counts)(const struct kcm_object *o, struct kcm_api_count *out);
  /* Free what the struct holds beyond struct kcm_object. */
  void (*release)(struct kcm_object *o, struct kcm_intern *pool);
  /* Bytes it holds beyond struct kcm_object and its name and labels. */
  size_t (*held)(const struct kcm_object *o);
};

/* The row of kind, or NULL for none. */
const struct kcm_api_kind *kcm_api_kind(enum kcm_kind kind);
const char *kcm_api_kind_name(enum kcm_kind kind); /* "Pod", ...; "Unknown" for none */

/* Parts of the objects kcm writes, written with w. */
/* A UID in its 36-character form, as a string. */
void kcm_api_write_uid(struct kcm_jsonw *w, const struct kcm_uid *u);
/* The ownerReference making the owner (api_version, kind, name, uid) an
 * object's controller, as upstream's controllers write it. */
void kcm_api_write_controller_ref(struct kcm_jsonw *w, const char *api_version,
                                  const char *kind, const char *name,
                                  const struct kcm_uid *uid);
/* The conditions as the API writes them: an array, or null when there are
 * none (which, in a patch, removes them). */
void kcm_api_write_conditions(struct kcm_jsonw *w, const struct kcm_conditions *c);
/* Append to b the strategic merge patch of an object's ownerReferences
 * that upstream's controllers send: with adopt, one making the owner
 * (api_version, kind, name, owner uid) its controller; without, one
 * dropping the reference to the owner uid. The object's uid is in the
 * patch, so it fails on another object of the same name. Every string is
 * written escaped. Returns 0, KCM_ETOOBIG or KCM_ENOMEM. */
int kcm_api_owner_patch(struct kcm_buf *b, bool adopt, const char *api_version,
                        const char *kind, const char *name, const struct kcm_uid *owner,
                        const struct kcm_uid *object);
/* Append to b the DeleteOptions that delete an object only while it has
 * this uid and resourceVersion. Returns 0, KCM_ETOOBIG or KCM_ENOMEM. */
int kcm_api_delete_options(struct kcm_buf *b, const struct kcm_uid *uid, uint64_t rv);

/* What pod text[0..len) (its JSON, as a GET answers) says keeps it from
 * being ready, appended to out as lines of plain text, each ending in
 * "\n": the pod's own reason (Evicted, ...), PodScheduled False with its
 * reason and message, and up to 3 containers (init containers first) that
 * hold it: waiting and why, terminated and how, or running and not ready
 * (its readiness probe, if it has one, does not pass), with restarts and
 * the last exit; the rest are counted. Text from the pod is bounded and
 * printable (kcm_log_plain()); now_s for "for 2m5s". Nothing is appended
 * when the status names no cause. Returns 0, KCM_EINVAL for text that is
 * not a JSON object, or KCM_ENOMEM. */
int kcm_api_pod_why(const char *text, size_t len, int64_t now_s, struct kcm_buf *out);

/* Parse an RFC 3339 time ("2026-11-22T06:00:05Z", fractions and offsets
 * allowed) into Unix seconds. Returns 0 or KCM_EINVAL. */
int kcm_api_parse_time(const char *s, int64_t *out);
/* Format Unix seconds as "2026-11-22T06:00:05Z" into buf (at least 21 bytes). */
void kcm_api_format_time(int64_t t, char *buf, size_t len);

/* Pod templates compare as upstream's EqualIgnoreHash does: without the
 * pod-template-hash label, an empty label map counting as none.
 * kcm_api_template_key() digests a template that way (equal templates have
 * equal keys); kcm_api_template_equal() compares two canonical templates. */
bool kcm_api_template_equal(const char *a, const char *b);

/* Read back an object before adopting for it (upstream's
 * RecheckDeletionTimestamp): NULL when the body is the object with this uid
 * and it is not being deleted, else why not. */
const char *kcm_api_recheck(const char *body, const struct kcm_uid *uid);
/* metadata.resourceVersion of an object's text, 0 if missing, without
 * building a tree. */
uint64_t kcm_api_resource_version_text(const char *body, size_t len);

/* A resourceVersion as the API server writes it: decimal digits only (no
 * sign or blanks), within 64 bits. False for anything else. */
bool kcm_api_parse_rv(const char *s, uint64_t *out);

int kcm_api_parse_uid(const char *s, struct kcm_uid *out);
/* Format a UID in its 36-character form into buf (at least 37 bytes). */
void kcm_api_format_uid(const struct kcm_uid *u, char *buf, size_t len);
bool kcm_api_uid_equal(const struct kcm_uid *a, const struct kcm_uid *b);

#endif
