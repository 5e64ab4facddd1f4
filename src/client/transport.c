/*
 * client/transport.c — libcurl's multi-socket interface on the libuv loop,
 * and the easy handles requests are sent with.
 *
 * curl tells us which sockets to watch and when to wake; uv_poll handles
 * watch the sockets and one uv_timer carries curl's timeout. Nothing here
 * blocks. A finished transfer is handed to kcm_client_transfers_done().
 * Easy handles are kept for reuse, reset, and get the options every
 * request shares (TLS, proxy, keep-alive, callbacks) when taken.
 */
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "internal.h"
#include "kcm/error.h"


/* A socket curl watches. The poll handle of a connection lives as long as
 * the connection, not one transfer, so a kept-alive connection costs the
 * next request no handle setup; and curl asking again for what the poll
 * already watches costs nothing (uv_poll_start() on a started handle costs
 * two epoll_ctl calls). */
struct sock_ctx {
  uv_poll_t poll;
  curl_socket_t fd;
  struct kcm_client *client;
  struct sock_ctx *next;
  int events; /* what the poll watches now (UV_READABLE | UV_WRITABLE), 0 if stopped */
  bool kept;  /* a connection curl opened through on_open_socket() and closes through
                 on_close_socket(); other sockets lose their poll when curl drops them */
};

static void on_sock_closed(uv_handle_t *h) {
  struct sock_ctx *sc = h->data;
  struct kcm_client *c = sc->client;
  free(sc);
  kcm_client_handle_gone(c);
}

static void unlink_sock(struct kcm_client *c, struct sock_ctx *sc) {
  struct sock_ctx **pp;
  for (pp = &c->socks; *pp; pp = &(*pp)->next) {
    if (*pp == sc) {
      *pp = sc->next;
      return;
    }
  }
}

static void on_poll(uv_poll_t *h, int status, int events);

static void watch(struct sock_ctx *sc, int events) {
  if (events == sc->events)
    return;
  if (events)
    uv_poll_start(&sc->poll, events, on_poll);
  else
    uv_poll_stop(&sc->poll);
  sc->events = events;
}

static void on_poll(uv_poll_t *h, int status, int events) {
  struct sock_ctx *sc = h->data;
  int flags = 0, running;

  if (status < 0)
    flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE)
    flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE)
    flags |= CURL_CSELECT_OUT;
  sc->client->in_curl = true;
  curl_multi_socket_action(sc->client->multi, sc->fd, flags, &running);
  sc->client->in_curl = false;
  kcm_client_transfers_done(sc->client);
}

static struct sock_ctx *find_sock(struct kcm_client *c, curl_socket_t fd) {
  struct sock_ctx *sc;
  for (sc = c->socks; sc && sc->fd != fd; sc = sc->next)
    ;
  return sc;
}

static struct sock_ctx *new_sock(struct kcm_client *c, curl_socket_t s, bool kept) {
  struct sock_ctx *sc = calloc(1, sizeof(*sc));
  if (!sc)
    return NULL;
  sc->fd = s;
  sc->client = c;
  sc->kept = kept;
  if (uv_poll_init_socket(c->loop, &sc->poll, s) != 0) {
    free(sc);
    return NULL;
  }
  sc->poll.data = sc;
  sc->next = c->socks;
  c->socks = sc;
  c->open_handles++;
  return sc;
}

static void drop_sock(struct kcm_client *c, struct sock_ctx *sc) {
  unlink_sock(c, sc);
  uv_poll_stop(&sc->poll);
  uv_close((uv_handle_t *)&sc->poll, on_sock_closed);
}

static int on_socket(CURL *easy, curl_socket_t s, int action, void *userp, void *socketp) {
  struct kcm_client *c = userp;
  struct sock_ctx *sc = socketp ? socketp : find_sock(c, s);
  int events = 0;

  (void)easy;
  if (action == CURL_POLL_REMOVE) {
    if (!sc)
      return 0;
    if (!sc->kept) {
      curl_multi_assign(c->multi, s, NULL);
      drop_sock(c, sc);
      return 0;
    }
    watch(sc, 0); /* the connection waits in curl's pool for the next transfer */
    return 0;
  }
  if (!sc && !(sc = new_sock(c, s, false)))
    return -1;
  curl_multi_assign(c->multi, s, sc);
  if (action & CURL_POLL_IN)
    events |= UV_READABLE;
  if (action & CURL_POLL_OUT)
    events |= UV_WRITABLE;
  watch(sc, events);
  return 0;
}

static curl_socket_t on_open_socket(void *userp, curlsocktype purpose,
                                    struct curl_sockaddr *a) {
  struct kcm_client *c = userp;
  curl_socket_t s;
  if (purpose != CURLSOCKTYPE_IPCXN)
    return CURL_SOCKET_BAD;
  s = socket(a->family, a->socktype, a->protocol);
  if (s != CURL_SOCKET_BAD && !new_sock(c, s, true)) {
    close(s);
    return CURL_SOCKET_BAD;
  }
  return s;
}

/* curl closes a socket: its poll handle goes first, so that libuv never
 * watches a number the kernel may hand to the next socket. */
static int on_close_socket(void *userp, curl_socket_t s) {
  struct kcm_client *c = userp;
  struct sock_ctx *sc = find_sock(c, s);
  if (sc)
    drop_sock(c, sc);
  return close(s);
}

static void on_timer(uv_timer_t *t) {
  struct kcm_client *c = t->data;
  int running;
  c->in_curl = true;
  curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  c->in_curl = false;
  kcm_client_transfers_done(c);
}

static int on_timeout(CURLM *multi, long timeout_ms, void *userp) {
  struct kcm_client *c = userp;
  if (timeout_ms < 0)
    uv_timer_stop(&c->timer);
  else
    uv_timer_start(&c->timer, on_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

static size_t on_write(char *p, size_t size, size_t n, void *userp) {
  struct kcm_client_request *r = userp;
  size_t len = size * n;
  long status = 0;

  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
  /* Error bodies are buffered even for streams, to report their Status. */
  if (r->on_chunk && status >= 200 && status < 300) {
    r->streamed = true;
    if (r->on_chunk(p, len, r->data) != 0) {
      r->stop_err = KCM_ECANCELED;
      return 0;
    }
    return len;
  }
  if (kcm_buf_append(&r->resp, p, len) != 0) {
    r->stop_err = KCM_ETOOBIG;
    return 0;
  }
  return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *userp) {
  struct kcm_client_request *r = userp;
  size_t len = size * n, vlen;
  const char *v;
  uint32_t seconds;

  /* Text that is not a count of seconds is no Retry-After, as in client-go. */
  if (kcm_client_header_value(p, len, "Retry-After", &v, &vlen) &&
      kcm_client_retry_after(v, vlen, &seconds)) {
    r->retry_after = seconds;
    r->has_retry_after = true;
  }
  return len;
}

int kcm_client_transport_init(struct kcm_client *c) {
  if (!(c->multi = curl_multi_init()) || !(c->share = curl_share_init()) ||
      curl_share_setopt(c->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION))
    return KCM_ENOMEM;
  curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
  curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_timeout);
  curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
  curl_multi_setopt(c->multi, CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
  return 0;
}

/* The options every request of the client shares: the connection (TLS,
 * proxy, target, keep-alive, protocols) and the callbacks. They are set on
 * each handle taken, since curl_easy_reset() clears them from a spare one;
 * the reset is what makes a reused handle start without the last transfer's
 * status, URL and per-request options. */
static void easy_defaults(struct kcm_client *c, CURL *e) {
  const struct kcm_client_config *cfg = c->cfg;

  curl_easy_setopt(e, CURLOPT_SHARE, c->share);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, c);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, c);
  /* No Accept-Encoding: as kube-controller-manager (DisableCompression),
   * kcm does not ask for gzip, which costs both sides more CPU than it saves
   * on the networks between control-plane components. */
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 30L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 10L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
  if (cfg->insecure) {
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
  } else if (cfg->ca_pem) {
    /* The configured authority is the only root, as in client-go: curl's
     * default bundle and directory would trust every public CA as well. */
    struct curl_blob ca = {cfg->ca_pem, cfg->ca_pem_len, CURL_BLOB_NOCOPY};
    curl_easy_setopt(e, CURLOPT_CAINFO, NULL);
    curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    curl_easy_setopt(e, CURLOPT_CAINFO_BLOB, &ca);
  }
  if (cfg->cert_pem && cfg->key_pem) {
    struct curl_blob cert = {cfg->cert_pem, cfg->cert_pem_len, CURL_BLOB_NOCOPY};
    struct curl_blob key = {cfg->key_pem, cfg->key_pem_len, CURL_BLOB_NOCOPY};
    curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
  }
  if (c->connect_to)
    curl_easy_setopt(e, CURLOPT_CONNECT_TO, c->connect_to);
  if (cfg->proxy_url)
    curl_easy_setopt(e, CURLOPT_PROXY, cfg->proxy_url);
}

CURL *kcm_client_easy_take(struct kcm_client *c) {
  CURL *e = c->nspare ? c->spare[--c->nspare] : curl_easy_init();
  if (e)
    easy_defaults(c, e);
  return e;
}

void kcm_client_easy_give(struct kcm_client *c, CURL *e) {
  if (!c->closing && c->nspare < KCM_CLIENT_SPARE) {
    curl_easy_reset(e); /* it has left the multi handle */
    c->spare[c->nspare++] = e;
  } else {
    curl_easy_cleanup(e);
  }
}

void kcm_client_transport_close(struct kcm_client *c) {
  struct sock_ctx *sc;

  curl_multi_cleanup(c->multi);
  c->multi = NULL;
  while (c->nspare)
    curl_easy_cleanup(c->spare[--c->nspare]);
  curl_share_cleanup(c->share); /* after the last handle that used it */
  c->share = NULL;
  /* curl may not report every socket as removed during cleanup. */
  while ((sc = c->socks)) {
    c->socks = sc->next;
    uv_poll_stop(&sc->poll);
    uv_close((uv_handle_t *)&sc->poll, on_sock_closed);
  }
  uv_timer_stop(&c->timer);
}
