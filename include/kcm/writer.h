/*
 * writer — how a controller's requests reach the API server.
 *
 * Every request a controller makes (its creates, patches, deletes, the
 * reads that check an answer, and its events) is described by a struct
 * kcm_write and handed to a writer, which sends it and calls done once
 * with the answer. The client writer sends with kcm_client_request() on
 * one of the client's rate limiters; a test gives a writer that records
 * the requests and answers them as the test decides.
 *
 * The builders make each kind of request from a kind, a namespace and a
 * name: the URL path (by kcm_client_object_path(): percent-encoded, refused for
 * a name no API server gives out), the method, the content type, and
 * whether it may be sent again after a lost answer (a read, a create of a
 * named object, a delete: not a patch).
 */
#ifndef KCM_WRITER_H
#define KCM_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kcm/api.h"
#include "kcm/client.h"

enum kcm_patch_type {
  KCM_PATCH_MERGE,     /* application/merge-patch+json */
  KCM_PATCH_STRATEGIC, /* application/strategic-merge-patch+json */
  KCM_PATCH_JSON,      /* application/json-patch+json */
};

/* One request. Strings are borrowed until kcm_writer_send() returns. */
struct kcm_write {
  const char *method;
  char path[KCM_CLIENT_PATH_MAX]; /* with its query; after a failed build, why */
  const char *body;               /* NULL for none */
  const char *content_type;       /* NULL: application/json */
  bool repeatable;                /* see struct kcm_client_request_options */
  uint64_t delay_ms;              /* wait before sending */
  int err;                        /* a builder's error; such a request is never sent */
  const char *origin;             /* the key of the sync sending it (kcm_runtime_send);
                                     NULL for another sender */
  bool update_only;               /* a patch upstream's bootstrap roles allow only as
                                     `update` (deployments, deployments/status,
                                     replicasets/status): see kcm_writer.as_update */
};

/* The writer the controllers write through. */
struct kcm_writer {
  /* Send req: 0 and done(data) runs once, later, on the loop; or an error
   * and done never runs. */
  int (*send)(struct kcm_writer *w, const struct kcm_write *req, kcm_client_done_cb done,
              void *data);
  struct kcm_client *client; /* the client writer's; borrowed */
  unsigned limiter;          /* the client writer's rate limiter */
  const char *agent;         /* the client writer's User-Agent component, or NULL */
  struct kcm_client_bearer *bearer; /* the client writer's token instead of the client's
                                       credentials (--use-service-account-credentials),
                                       or NULL */
  bool as_update;            /* send an update_only patch as GET, the patch applied
                                to the object read, PUT: what a service account
                                holding only upstream's bootstrap role may do */
  bool dry;                  /* sends nothing that writes (kcm_writer_init_dry) */
  uint64_t withheld;         /* the dry writer's: requests answered, never sent */
  void *data;                /* free for another writer's use */
};

/* A writer sending through client (borrowed, outliving the writer) on the
 * given rate limiter; set agent and bearer after, if wanted. */
void kcm_writer_init(struct kcm_writer *w, struct kcm_client *client, unsigned limiter);
/* A writer that sends through client only what writes nothing (a GET, a
 * dry run) and answers every other request itself, on a later turn of
 * loop, as a 200 with the body "{}": --shadow's, whose controllers plan
 * and record but change nothing. */
void kcm_writer_init_dry(struct kcm_writer *w, struct kcm_client *client, unsigned limiter,
                         uv_loop_t *loop);
/* req->err when the request could not be built, else the writer's answer. */
int kcm_writer_send(struct kcm_writer *w, const struct kcm_write *req, kcm_client_done_cb done,
                    void *data);

/* The builders fill *req and return 0, or an error with why in req->path
 * (and in req->err). sub: a subresource ("status") or NULL. */
int kcm_writer_get(struct kcm_write *req, enum kcm_kind kind, const char *ns, const char *name);
/* A list of the objects named `name` in ns (none or one): a GET of the
 * collection with a field selector, for an identity that may list but not
 * get (upstream's replicaset-controller role, for pods). */
int kcm_writer_find(struct kcm_write *req, enum kcm_kind kind, const char *ns, const char *name);
/* POST body to the namespace's collection; dry_run asks the server only to
 * tell what it would create. */
int kcm_writer_create(struct kcm_write *req, enum kcm_kind kind, const char *ns,
                      const char *body, bool dry_run);
int kcm_writer_patch(struct kcm_write *req, enum kcm_kind kind, const char *ns, const char *name,
                     const char *sub, enum kcm_patch_type type, const char *body);
/* body: DeleteOptions or NULL. */
int kcm_writer_delete(struct kcm_write *req, enum kcm_kind kind, const char *ns,
                      const char *name, const char *body);
/* The patch adopting (or releasing) the object ns/name of uid `uid` by the
 * owner of kind owner_kind, owner_name and owner_uid (its apiVersion and
 * kind from its row), built with kcm_api_owner_patch() into body, which
 * must live until the request is sent. */
int kcm_writer_owner(struct kcm_write *req, struct kcm_buf *body, enum kcm_kind kind,
                     const char *ns, const char *name, const struct kcm_uid *uid, bool adopt,
                     enum kcm_kind owner_kind, const char *owner_name,
                     const struct kcm_uid *owner_uid);

#endif
