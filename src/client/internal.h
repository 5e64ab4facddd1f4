/*
 * client internals shared by the module's files. Not part of the module's
 * interface.
 *
 *   client.c       the client: made, closed, freed
 *   request.c      a request's life: gates, attempts, retries, report
 *   transport.c    curl's multi-socket interface on the loop; easy handles
 *   credentials.c  what credentials an attempt carries
 *   exec.c         credentials from an exec plugin
 *   metrics.c      the rest_client_* families
 *   config.c       settings: their source picked, the server checked, freed
 *   kubeconfig.c   settings from kubeconfig files merged: context, cluster, user
 *   yaml.c         one kubeconfig file parsed; its fields read, typed
 *   exec_config.c  a kubeconfig user's exec plugin settings
 *   incluster.c    settings from the in-cluster service account
 *   parse.c        pure text functions: headers, statuses, paths, base64
 */
#ifndef KCM_CLIENT_INTERNAL_H
#define KCM_CLIENT_INTERNAL_H

#include <curl/curl.h>
#include <stdint.h>
#include <time.h>
#include <yaml.h>

#include "kcm/buf.h"
#include "kcm/client.h"
#include "kcm/metrics.h"
#include "kcm/ratelimit.h"

struct sock_ctx;

/* Methods the metrics tell apart (GET, POST, PUT, PATCH, DELETE, HEAD,
 * OPTIONS); any other counts as the last, "OTHER". */
#define KCM_CLIENT_VERBS 8
/* Distinct (status, method) pairs the request counters keep; an attempt
 * ending in a pair past them is not counted. */
#define KCM_CLIENT_RESULTS 128

/* How the attempts of one method ended with one status. */
struct kcm_client_result {
  uint16_t code;     /* HTTP status; 0: no response ("<error>") */
  uint8_t verb;      /* index of the method */
  uint64_t requests; /* attempts (rest_client_requests_total) */
  uint64_t retries;  /* of them, resent after Retry-After (rest_client_request_retries_total) */
};

struct kcm_client_request {
  struct kcm_client *client;
  CURL *easy;
  struct curl_slist *headers;      /* the request's own (Accept, Content-Type) */
  struct curl_slist *sent_headers; /* those and the credentials of the attempt in curl */
  char *body;
  size_t body_len;
  char *content_type;
  struct kcm_buf resp;
  kcm_client_chunk_cb on_chunk;
  bool watch;
  kcm_client_done_cb done;
  void *data;
  uint32_t retry_after;  /* seconds the last answer's Retry-After asked for, capped */
  uint64_t start_at;     /* parked: when to send (loop ms) */
  uint64_t created;      /* loop ms when the caller asked */
  uint64_t deadline;     /* loop ms when its time limit passes: every attempt, and every
                            pause between them, ends by then */
  int stop_err;          /* why the write callback stopped the transfer */
  int fail_err;          /* set when it failed before reaching the network */
  char *fail_msg;
  uint32_t retries;
  uint32_t resends;      /* of them, after no answer came */
  unsigned limiter;      /* index into the client's limit[] */
  uint8_t verb;          /* index of the method, for the metrics */
  char method[8];
  bool has_retry_after;  /* the answer carried Retry-After */
  bool canceled;
  bool streamed;         /* body bytes went to on_chunk */
  bool delayed;          /* parked for its delay_ms, not yet admitted */
  bool repeatable;       /* resent when an attempt gets no answer */
  bool after_unanswered; /* an earlier attempt went out and got no answer */
  struct kcm_client_bearer *bearer; /* the caller's token, instead of the client's */
  uint64_t bearer_generation;        /* of the token the last attempt sent */
  struct kcm_client_request *prev, *next;
  char errbuf[CURL_ERROR_SIZE];
};

/* Credentials from an exec plugin. */
struct kcm_client_creds {
  char *token;
  char *cert_pem;
  size_t cert_len;
  char *key_pem;
  size_t key_len;
  int64_t expires;  /* Unix seconds; 0: never */
  bool valid;
  bool running;     /* the plugin is running */
  bool failed;      /* this run failed before its output could be read */
  char *error;      /* why the last run failed */
  uv_process_t proc;
  uv_pipe_t out;
  uv_timer_t kill;
  struct kcm_buf output;
  int64_t exit_status;
  int open;         /* plugin handles not yet closed */
  uint64_t runs;
};

#define KCM_CLIENT_SPARE 32

struct kcm_client {
  uv_loop_t *loop;
  const struct kcm_client_config *cfg;
  CURLM *multi;
  /* TLS sessions shared by every handle: a new connection resumes one
   * instead of receiving, parsing and verifying the server's chain again. */
  CURLSH *share;
  uv_timer_t timer; /* curl's timeout */
  uv_timer_t defer; /* reports finished requests on the next loop turn */
  uv_timer_t gate;  /* releases parked requests */
  struct kcm_client_request *active;   /* in curl */
  struct kcm_client_request *finished; /* to report from `defer` */
  struct kcm_client_request *parked;   /* waiting for a token or a retry, by start_at */
  struct kcm_client_request *waiting;  /* waiting for exec credentials */
  /* Finished easy handles, reset, for the next requests: a new handle costs
   * curl a large zeroed struct and a 16 KiB buffer. */
  CURL *spare[KCM_CLIENT_SPARE];
  size_t nspare;
  struct sock_ctx *socks;
  size_t pending;
  int open_handles;
  bool closing;
  bool in_curl;       /* inside curl_multi_socket_action: curl takes no new transfer */
  char *url_host;
  struct curl_slist *connect_to;
  char *token; /* last token read from cfg->token_file */
  time_t token_read_at;
  struct kcm_ratelimit limit[KCM_CLIENT_LIMITERS];
  struct kcm_client_creds creds;
  struct kcm_client_stats stats;
  /* Metrics, with client-go's names. */
  char *host; /* the server's host[:port], their host label */
  struct kcm_metrics_histogram duration[KCM_CLIENT_VERBS];  /* whole requests, retries included */
  struct kcm_metrics_histogram throttled[KCM_CLIENT_VERBS]; /* waits for the rate limiter */
  struct kcm_client_result results[KCM_CLIENT_RESULTS];
  size_t nresults;
};

/* client.c */
/* A loop handle of c has closed: c is freed once closed and the last is. */
void kcm_client_handle_gone(struct kcm_client *c);
/* uv_close() callback for a handle whose data is the client. */
void kcm_client_handle_closed(uv_handle_t *h);

/* request.c */
/* Settle the transfers curl has finished: retry, resend or report each. */
void kcm_client_transfers_done(struct kcm_client *c);
/* Report, now, the requests waiting to be reported from the loop. */
void kcm_client_report_finished(struct kcm_client *c);
/* The exec plugin has finished: admit or fail the requests waiting for it. */
void kcm_client_creds_ready(struct kcm_client *c);

/* transport.c */
/* c's multi and share handles, with the socket and timer callbacks. */
int kcm_client_transport_init(struct kcm_client *c);
/* An easy handle (a spare one, else new) with the options every request
 * shares, or NULL. */
CURL *kcm_client_easy_take(struct kcm_client *c);
/* Keep e, out of the multi handle, for a later request, or free it. */
void kcm_client_easy_give(struct kcm_client *c, CURL *e);
/* Free the multi, share and spare handles; close the sockets' polls and
 * stop curl's timer (closed by the caller). */
void kcm_client_transport_close(struct kcm_client *c);

/* credentials.c */
/* The bearer token for the next attempt (NULL or "" for none); re-reads the
 * token file when due. Owned by the client. */
const char *kcm_client_current_token(struct kcm_client *c);
/* Wipe and free the token read from the token file. */
void kcm_client_token_release(struct kcm_client *c);
/* Set r's headers for its next attempt (its own, then `token` or basic
 * auth) and an exec plugin's certificate. 0, or KCM_ENOMEM. */
int kcm_client_attach_credentials(struct kcm_client_request *r, const char *token);
/* Wipe and free the headers of r's last attempt. */
void kcm_client_free_sent_headers(struct kcm_client_request *r);
/* After a 401: count it, re-read the token file and re-run the plugin. */
void kcm_client_note_unauthorized(struct kcm_client_request *r);

/* exec.c */
/* Read an ExecCredential (NUL-terminated text) of apiVersion `want` from
 * the plugin `command` into k: fresh credentials (k->valid), or k->error
 * saying why not, the earlier credentials kept then. */
void kcm_client_exec_parse(struct kcm_client_creds *k, const char *text, const char *want,
                           const char *command);
/* Drop k's credentials and error. */
void kcm_client_exec_creds_clear(struct kcm_client_creds *k);
/* True when exec credentials are there and not about to expire. */
bool kcm_client_creds_fresh(struct kcm_client *c);
/* Start the plugin unless it runs; kcm_client_creds_ready() is called when
 * it has finished (successfully or not). */
void kcm_client_creds_fetch(struct kcm_client *c);
void kcm_client_creds_invalidate(struct kcm_client *c);
void kcm_client_creds_close(struct kcm_client *c);
void kcm_client_creds_release(struct kcm_client *c);

/* metrics.c */
void kcm_client_metrics_init(struct kcm_client *c);
/* The index of `method` among the metrics' verbs. */
uint8_t kcm_client_verb(const char *method);
/* Count an attempt that reached the network as it ended: its status (0
 * when no answer came) and whether it was a retry. */
void kcm_client_count_attempt(struct kcm_client_request *r);
/* The rate limiter's wait for r (when the limiter limits at all). */
void kcm_client_observe_throttle(struct kcm_client_request *r, uint64_t wait_ms);
/* r's whole duration, retries included (not for streams). */
void kcm_client_observe_duration(struct kcm_client_request *r);

/* config.c */
/* Set *errmsg (when errmsg is not NULL) to the message, replacing the one
 * there; returns err. */
int kcm_client_fail(char **errmsg, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The whole file at `path` (at most 16 MiB, NUL-terminated) into *data,
 * owned by the caller; `what` names it in the message of a failure. */
int kcm_client_read_file(const char *path, char **data, size_t *len, char **errmsg,
                         const char *what);
/* Warn when others than the owner can read or write the file at `path`. */
void kcm_client_warn_if_shared(const char *path, const char *what);

/* yaml.c */
/* A kubeconfig file, parsed. */
struct kcm_client_kcfile {
  char *path;
  char *dir; /* its directory, against which the paths it names resolve */
  yaml_document_t doc;
  bool loaded;
};

/* Kubeconfig files merged (the first that sets a value wins), and where
 * the message of a failure goes. */
struct kcm_client_kubeconfig {
  struct kcm_client_kcfile *files;
  size_t nfiles;
  char **errmsg;
};

/* Read and parse the file at `path` into f (freed with kcfile_free even
 * when this fails). */
int kcm_client_kcfile_load(struct kcm_client_kcfile *f, const char *path, char **errmsg);
void kcm_client_kcfile_free(struct kcm_client_kcfile *f);
/* An absolute path for `p`, named in f (relative to its directory); NULL
 * when out of memory. Freed by the caller. */
char *kcm_client_kcfile_path(struct kcm_client_kcfile *f, const char *p);
/* f's root node; NULL when f did not parse or is empty. */
yaml_node_t *kcm_client_yaml_root(struct kcm_client_kcfile *f);
/* The value of `key` in the mapping `map`; NULL when absent or map is not
 * a mapping. */
yaml_node_t *kcm_client_yaml_get(struct kcm_client_kcfile *f, yaml_node_t *map, const char *key);
/* True for an absent node and for YAML's plain null scalars. */
bool kcm_client_yaml_is_null(yaml_node_t *n);
/* KCM_EINVAL, with "<file>: line N: <field>: must be <want>". */
int kcm_client_yaml_type_error(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                               yaml_node_t *n, const char *field, const char *want);
/* The scalar `key` of `map` copied into *out, owned by the caller (left
 * alone when absent or null); `field` names it in messages. */
int kcm_client_yaml_string(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                           yaml_node_t *map, const char *key, const char *field, char **out);
int kcm_client_yaml_bool(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                         yaml_node_t *map, const char *key, const char *field, bool *out);
/* A list of strings as a NULL-terminated array owned by the caller (also
 * after a failure, partly filled). */
int kcm_client_yaml_strings(struct kcm_client_kubeconfig *l, struct kcm_client_kcfile *f,
                            yaml_node_t *map, const char *key, const char *field, char ***out);

/* kubeconfig.c */
/* Settings from the kubeconfig files `paths` merged, for the context opts
 * names or the current one; sets cfg->source to the files' list. */
int kcm_client_kubeconfig_load(struct kcm_client_config *cfg, char *const *paths,
                               size_t npaths, const struct kcm_client_config_options *opts,
                               char **errmsg);

/* exec_config.c */
/* cfg->exec from the user's `exec` mapping e, in f. */
int kcm_client_exec_config_load(struct kcm_client_kubeconfig *l, struct kcm_client_config *cfg,
                                struct kcm_client_kcfile *f, yaml_node_t *e);
/* Free x and what it holds. */
void kcm_client_exec_config_free(struct kcm_client_exec *x);

/* incluster.c */
/* Settings from KUBERNETES_SERVICE_HOST and _PORT and the service account's
 * token, CA and namespace. */
int kcm_client_incluster_load(struct kcm_client_config *cfg, char **errmsg);

/* parse.c */
/* The KCM_E* code of an HTTP status; 0 for 2xx. */
int kcm_client_status_error(long status);
/* The message of a metav1.Status body, or a printable prefix of the body;
 * NULL when out of memory. Freed by the caller. */
char *kcm_client_error_message(const char *body, size_t len);

/* An observer for the tests; /metrics renders the same counts. */
const struct kcm_client_stats *kcm_client_stats(const struct kcm_client *c);

/* Requests in flight (an observer for the tests). */
size_t kcm_client_pending(const struct kcm_client *c);

#endif
