/*
 * client internals shared by http.c (requests) and exec.c (credential
 * plugins). Not part of the module's interface.
 */
#ifndef KCM_CLIENT_INTERNAL_H
#define KCM_CLIENT_INTERNAL_H

#include <curl/curl.h>
#include <stdint.h>
#include <time.h>

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

/* http.c */
void kcm_client_creds_ready(struct kcm_client *c);
void kcm_client_handle_closed(uv_handle_t *h);

#endif
