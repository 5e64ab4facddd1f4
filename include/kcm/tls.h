/*
 * tls — the serving side of TLS, for kcm's secure port.
 *
 * struct kcm_tls is a serving identity: a certificate and key read from
 * files (--tls-cert-file, --tls-private-key-file), or, when none is given, a
 * self-signed pair made at start as kube-controller-manager makes one: kept
 * in memory, or written to and read back from a directory (--cert-dir) as
 * <pair>.crt and <pair>.key. With a client CA (--client-ca-file) clients are
 * asked for a certificate, which is verified against it but never required:
 * a session reports what it found, and authentication decides.
 *
 * Files given by name are read again by kcm_tls_reload() when they change,
 * so a rotated certificate is served to new connections without a restart;
 * sessions already open keep the one they started with.
 *
 * struct kcm_tls_session runs one connection's TLS over memory buffers: the
 * caller moves ciphertext between the socket and the session, so the
 * session never touches a file descriptor and never blocks. TLS 1.2 or 1.3
 * (--tls-min-version), forward-secret AEAD suites only, ALPN http/1.1.
 */
#ifndef KCM_TLS_H
#define KCM_TLS_H

#include <stdbool.h>
#include <stddef.h>

struct kcm_tls_options {
  const char *cert_file;      /* PEM certificate (chain); with key_file, or neither */
  const char *key_file;       /* PEM private key */
  const char *cert_dir;       /* where a made pair is kept; NULL or "": in memory */
  const char *pair_name;      /* file names in cert_dir; default "kcm" */
  const char *client_ca_file; /* PEM CAs client certificates are verified against */
  const char *bind_host;      /* the address served; a specific one joins the made
                                 certificate's names, as upstream adds it */
  bool tls13_only;            /* --tls-min-version=VersionTLS13 */
};

struct kcm_tls;

/* Set up a serving identity. On failure returns KCM_EINVAL (unusable
 * files), KCM_EIO or KCM_ENOMEM, and sets *err to a message naming the file
 * (caller frees it). */
int kcm_tls_new(struct kcm_tls **out, const struct kcm_tls_options *o, char **err);
void kcm_tls_free(struct kcm_tls *t);

/* Read the certificate, key and client CA files again if any changed since
 * they were read. Returns 1 when new ones took effect, 0 when nothing
 * changed, or a KCM_E* code with *err set (caller frees) when the new files
 * are unusable; the old ones are kept then. */
int kcm_tls_reload(struct kcm_tls *t, char **err);

/* The served certificate, PEM (static until the next reload); for the
 * tests, which verify it as a client would. */
const char *kcm_tls_cert_pem(const struct kcm_tls *t);

/* --- sessions ------------------------------------------------------------ */

struct kcm_tls_session;

/* What a client's certificate showed. */
enum kcm_tls_peer_state {
  KCM_TLS_PEER_NONE,     /* none was presented (or none was asked for) */
  KCM_TLS_PEER_VERIFIED, /* it chains to the client CA and is valid now */
  KCM_TLS_PEER_REJECTED, /* it was presented and failed verification */
};

/* A new server session; NULL when out of memory. */
struct kcm_tls_session *kcm_tls_session_new(struct kcm_tls *t);
void kcm_tls_session_free(struct kcm_tls_session *s);

/* Hand bytes received from the peer to the session. Returns 0 or
 * KCM_ENOMEM. */
int kcm_tls_session_feed(struct kcm_tls_session *s, const char *p, size_t n);

/* Run the handshake and decrypt what was fed: up to cap bytes of
 * application data go to buf. Returns the bytes written (0: nothing yet),
 * or KCM_ENETWORK when the peer broke the protocol or closed; then
 * *why (may be NULL) gets a static reason. */
int kcm_tls_session_read(struct kcm_tls_session *s, char *buf, size_t cap, const char **why);

/* Encrypt application data for the peer. Returns 0 or KCM_ENETWORK. */
int kcm_tls_session_write(struct kcm_tls_session *s, const char *p, size_t n);

/* Queue a close_notify alert. */
void kcm_tls_session_shutdown(struct kcm_tls_session *s);

/* Bytes waiting to be sent to the peer (handshake records, data, alerts). */
size_t kcm_tls_session_pending(const struct kcm_tls_session *s);
/* Move up to cap of them to buf; returns how many. */
size_t kcm_tls_session_drain(struct kcm_tls_session *s, char *buf, size_t cap);

bool kcm_tls_session_established(const struct kcm_tls_session *s);

/* What a client's certificate showed, after the handshake. Strings are
 * owned by the struct; kcm_tls_peer_release() frees them. */
struct kcm_tls_peer {
  enum kcm_tls_peer_state state;
  char *user;    /* verified: the subject's common name ("" if none);
                    rejected: why verification failed */
  char **groups; /* verified: the subject's organizations, NULL-terminated */
};

/* Fill *peer. Returns 0 or KCM_ENOMEM (*peer is then empty). */
int kcm_tls_session_peer(const struct kcm_tls_session *s, struct kcm_tls_peer *peer);
void kcm_tls_peer_release(struct kcm_tls_peer *peer);

#endif
