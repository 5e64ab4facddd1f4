/* tls — the serving side of TLS; see include/kcm/tls.h. */
#include "kcm/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "kcm/error.h"

/* What a file looked like when it was read, to notice a change. */
struct stamp {
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
  bool set;
};

struct kcm_tls {
  SSL_CTX *ctx; /* the current identity; sessions hold their own reference */
  char *cert_file, *key_file, *ca_file; /* owned; NULL when not from files */
  struct stamp cert_st, key_st, ca_st;
  X509 *made_cert; /* owned: a pair made at start, when no files are served */
  EVP_PKEY *made_key;
  char *cert_pem; /* owned: the served certificate */
  bool tls13_only;
};

struct kcm_tls_session {
  SSL *ssl;
  BIO *in, *out; /* owned by ssl */
};

static char *message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A message ending with OpenSSL's first queued error, if any. */
static char *message(const char *fmt, ...) {
  char head[512], reason[256] = "";
  unsigned long e = ERR_get_error();
  char *out;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof(head), fmt, ap);
  va_end(ap);
  if (e)
    ERR_error_string_n(e, reason, sizeof(reason));
  ERR_clear_error();
  if (asprintf(&out, "%s%s%s", head, e ? ": " : "", reason) < 0)
    return NULL;
  return out;
}

static void stamp_of(const char *path, struct stamp *st) {
  struct stat sb;
  memset(st, 0, sizeof(*st));
  if (!path || stat(path, &sb))
    return;
  st->dev = sb.st_dev;
  st->ino = sb.st_ino;
  st->size = sb.st_size;
  st->mtime = sb.st_mtim;
  st->set = true;
}

static bool same_stamp(const struct stamp *a, const struct stamp *b) {
  return a->set == b->set && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
         a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

/* --- a self-signed pair, as kube-controller-manager makes one ------------- */

static int add_ext(X509 *x, int nid, const char *value) {
  X509V3_CTX v3;
  X509_EXTENSION *ext;
  int ok;
  X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
  ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
  if (!ext)
    return -1;
  ok = X509_add_ext(x, ext, -1);
  X509_EXTENSION_free(ext);
  return ok ? 0 : -1;
}

/* An ECDSA P-256 key and a certificate for "localhost@<now>", valid from an
 * hour ago (clock skew) for a year, naming localhost, 127.0.0.1 and a
 * specific bind address. Upstream makes RSA 2048 under a CA of its own;
 * P-256 makes each handshake several times cheaper to serve. */
static int make_pair(const char *bind_host, X509 **cert, EVP_PKEY **key) {
  unsigned char serial[16];
  char cn[64], san[160];
  X509 *x = NULL;
  EVP_PKEY *k = EVP_EC_gen("P-256");
  BIGNUM *bn = NULL;
  X509_NAME *name;
  int rc = -1;
  if (!k || !(x = X509_new()) || RAND_bytes(serial, sizeof(serial)) != 1)
    goto out;
  serial[0] &= 0x7f; /* positive */
  if (!(bn = BN_bin2bn(serial, sizeof(serial), NULL)) ||
      !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) || !X509_set_version(x, 2) ||
      !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
      !X509_gmtime_adj(X509_getm_notAfter(x), 365L * 24 * 3600) || !X509_set_pubkey(x, k))
    goto out;
  snprintf(cn, sizeof(cn), "localhost@%lld", (long long)time(NULL));
  name = X509_get_subject_name(x);
  if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1,
                                  -1, 0) ||
      !X509_set_issuer_name(x, name))
    goto out;
  if (bind_host && *bind_host && strcmp(bind_host, "0.0.0.0") && strcmp(bind_host, "::") &&
      strcmp(bind_host, "127.0.0.1"))
    snprintf(san, sizeof(san), "DNS:localhost,IP:127.0.0.1,IP:%s", bind_host);
  else
    snprintf(san, sizeof(san), "DNS:localhost,IP:127.0.0.1");
  if (add_ext(x, NID_basic_constraints, "critical,CA:FALSE") ||
      add_ext(x, NID_key_usage, "critical,digitalSignature") ||
      add_ext(x, NID_ext_key_usage, "serverAuth") || add_ext(x, NID_subject_alt_name, san) ||
      !X509_sign(x, k, EVP_sha256()))
    goto out;
  *cert = x;
  *key = k;
  x = NULL;
  k = NULL;
  rc = 0;
out:
  BN_free(bn);
  X509_free(x);
  EVP_PKEY_free(k);
  return rc;
}

/* Write a made pair to dir/<pair>.crt and .key (the key readable by its
 * owner only), creating dir. */
static int write_pair(const char *crt, const char *key_path, const char *dir, X509 *cert,
                      EVP_PKEY *key, char **err) {
  FILE *f;
  int fd;
  if (mkdir(dir, 0755) && errno != EEXIST) {
    *err = message("cannot create --cert-dir %s: %s", dir, strerror(errno));
    return KCM_EIO;
  }
  fd = open(key_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || !(f = fdopen(fd, "w"))) {
    *err = message("cannot write %s: %s", key_path, strerror(errno));
    if (fd >= 0)
      close(fd);
    return KCM_EIO;
  }
  if (!PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) || fclose(f)) {
    *err = message("cannot write %s", key_path);
    return KCM_EIO;
  }
  if (!(f = fopen(crt, "we")) || !PEM_write_X509(f, cert) || fclose(f)) {
    *err = message("cannot write %s: %s", crt, strerror(errno));
    return KCM_EIO;
  }
  return 0;
}

/* --- the context ---------------------------------------------------------- */

static int accept_any(int preverified, X509_STORE_CTX *x) {
  (void)preverified;
  (void)x;
  return 1; /* the result is read after the handshake; authentication decides */
}

static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg) {
  static const unsigned char http11[] = "\x08http/1.1";
  unsigned char *sel;
  (void)ssl;
  (void)arg;
  if (SSL_select_next_proto(&sel, outlen, http11, sizeof(http11) - 1, in, inlen) !=
      OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_NOACK;
  *out = sel;
  return SSL_TLSEXT_ERR_OK;
}

static SSL_CTX *new_ctx(bool tls13_only) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx)
    return NULL;
  if (!SSL_CTX_set_min_proto_version(ctx, tls13_only ? TLS1_3_VERSION : TLS1_2_VERSION) ||
      !SSL_CTX_set_cipher_list(ctx, "ECDHE+AESGCM:ECDHE+CHACHA20")) {
    SSL_CTX_free(ctx);
    return NULL;
  }
  /* Renegotiation is a way to make a server do handshakes for free. */
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                               SSL_OP_NO_COMPRESSION);
  /* Idle sessions give their record buffers back. */
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
  return ctx;
}

static int use_client_ca(SSL_CTX *ctx, const char *ca_file, char **err) {
  STACK_OF(X509_NAME) *names;
  if (!SSL_CTX_load_verify_locations(ctx, ca_file, NULL) ||
      !(names = SSL_load_client_CA_file(ca_file))) {
    *err = message("cannot use --client-ca-file %s", ca_file);
    return KCM_EINVAL;
  }
  SSL_CTX_set_client_CA_list(ctx, names);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_any);
  return 0;
}

static char *pem_of(X509 *x) {
  BIO *b = BIO_new(BIO_s_mem());
  char *p = NULL, *out = NULL;
  long n;
  if (b && PEM_write_bio_X509(b, x) && (n = BIO_get_mem_data(b, &p)) > 0 &&
      (out = malloc((size_t)n + 1))) {
    memcpy(out, p, (size_t)n);
    out[n] = '\0';
  }
  BIO_free(b);
  return out;
}

/* A context serving t's files or made pair, with t's client CA. */
static int build_ctx(struct kcm_tls *t, SSL_CTX **out, char **err) {
  SSL_CTX *ctx = new_ctx(t->tls13_only);
  int rc = KCM_EINVAL;
  if (!ctx) {
    *err = message("cannot set up TLS");
    return KCM_ENOMEM;
  }
  if (t->cert_file) {
    if (!SSL_CTX_use_certificate_chain_file(ctx, t->cert_file)) {
      *err = message("cannot use --tls-cert-file %s", t->cert_file);
      goto fail;
    }
    if (!SSL_CTX_use_PrivateKey_file(ctx, t->key_file, SSL_FILETYPE_PEM)) {
      *err = message("cannot use --tls-private-key-file %s", t->key_file);
      goto fail;
    }
    if (!SSL_CTX_check_private_key(ctx)) {
      *err = message("--tls-private-key-file %s does not match --tls-cert-file %s",
                     t->key_file, t->cert_file);
      goto fail;
    }
  } else if (!SSL_CTX_use_certificate(ctx, t->made_cert) ||
             !SSL_CTX_use_PrivateKey(ctx, t->made_key)) {
    *err = message("cannot serve the self-signed certificate");
    rc = KCM_ENOMEM;
    goto fail;
  }
  if (t->ca_file && (rc = use_client_ca(ctx, t->ca_file, err)))
    goto fail;
  *out = ctx;
  return 0;
fail:
  SSL_CTX_free(ctx);
  return rc;
}

static void swap_ctx(struct kcm_tls *t, SSL_CTX *ctx) {
  X509 *leaf = SSL_CTX_get0_certificate(ctx);
  char *pem = leaf ? pem_of(leaf) : NULL;
  SSL_CTX_free(t->ctx);
  t->ctx = ctx;
  if (pem) {
    free(t->cert_pem);
    t->cert_pem = pem;
  }
  stamp_of(t->cert_file, &t->cert_st);
  stamp_of(t->key_file, &t->key_st);
  stamp_of(t->ca_file, &t->ca_st);
}

/* No files given: the pair in cert_dir if both files are readable there
 * (made by an earlier start), else a new one, written there when a
 * directory is set. */
static int choose_pair(struct kcm_tls *t, const struct kcm_tls_options *o, char **err) {
  const char *pair = o->pair_name && *o->pair_name ? o->pair_name : "kcm";
  char *crt = NULL, *key = NULL;
  int rc = KCM_ENOMEM;
  if (o->cert_dir && *o->cert_dir) {
    char *c = NULL, *k = NULL;
    /* Each pointer kept only when its asprintf succeeded (else undefined). */
    if (asprintf(&c, "%s/%s.crt", o->cert_dir, pair) < 0)
      goto out;
    crt = c;
    if (asprintf(&k, "%s/%s.key", o->cert_dir, pair) < 0)
      goto out;
    key = k;
    if (access(crt, R_OK) == 0 && access(key, R_OK) == 0) {
      t->cert_file = crt;
      t->key_file = key;
      return 0;
    }
  }
  if (make_pair(o->bind_host, &t->made_cert, &t->made_key)) {
    *err = message("cannot make a self-signed certificate");
    goto out;
  }
  rc = crt ? write_pair(crt, key, o->cert_dir, t->made_cert, t->made_key, err) : 0;
out:
  free(crt);
  free(key);
  return rc;
}

int kcm_tls_new(struct kcm_tls **out, const struct kcm_tls_options *o, char **err) {
  struct kcm_tls *t;
  SSL_CTX *ctx;
  int rc;
  *err = NULL;
  if (!o->cert_file != !o->key_file) {
    *err = strdup("--tls-cert-file and --tls-private-key-file must be given together");
    return KCM_EINVAL;
  }
  if (!(t = calloc(1, sizeof(*t))))
    return KCM_ENOMEM;
  t->tls13_only = o->tls13_only;
  if ((o->cert_file && !(t->cert_file = strdup(o->cert_file))) ||
      (o->key_file && !(t->key_file = strdup(o->key_file))) ||
      (o->client_ca_file && !(t->ca_file = strdup(o->client_ca_file)))) {
    kcm_tls_free(t);
    return KCM_ENOMEM;
  }
  rc = t->cert_file ? 0 : choose_pair(t, o, err);
  if (rc == 0 && (rc = build_ctx(t, &ctx, err)) == 0)
    swap_ctx(t, ctx);
  if (rc) {
    kcm_tls_free(t);
    return rc;
  }
  *out = t;
  return 0;
}

void kcm_tls_free(struct kcm_tls *t) {
  if (!t)
    return;
  SSL_CTX_free(t->ctx);
  free(t->cert_file);
  free(t->key_file);
  free(t->ca_file);
  X509_free(t->made_cert);
  EVP_PKEY_free(t->made_key);
  free(t->cert_pem);
  free(t);
}

int kcm_tls_reload(struct kcm_tls *t, char **err) {
  struct stamp c, k, a;
  SSL_CTX *ctx;
  int rc;
  *err = NULL;
  if (!t->cert_file && !t->ca_file)
    return 0;
  stamp_of(t->cert_file, &c);
  stamp_of(t->key_file, &k);
  stamp_of(t->ca_file, &a);
  if (same_stamp(&c, &t->cert_st) && same_stamp(&k, &t->key_st) && same_stamp(&a, &t->ca_st))
    return 0;
  if ((rc = build_ctx(t, &ctx, err))) {
    /* Don't retry the same broken files every tick. */
    t->cert_st = c;
    t->key_st = k;
    t->ca_st = a;
    return rc;
  }
  swap_ctx(t, ctx);
  return 1;
}

const char *kcm_tls_cert_pem(const struct kcm_tls *t) { return t->cert_pem; }

/* --- sessions ------------------------------------------------------------- */

struct kcm_tls_session *kcm_tls_session_new(struct kcm_tls *t) {
  struct kcm_tls_session *s = calloc(1, sizeof(*s));
  if (!s)
    return NULL;
  s->ssl = SSL_new(t->ctx);
  s->in = BIO_new(BIO_s_mem());
  s->out = BIO_new(BIO_s_mem());
  if (!s->ssl || !s->in || !s->out) {
    BIO_free(s->in);
    BIO_free(s->out);
    SSL_free(s->ssl);
    free(s);
    return NULL;
  }
  BIO_set_mem_eof_return(s->in, -1); /* empty means "wait", not end of stream */
  SSL_set_bio(s->ssl, s->in, s->out);
  SSL_set_accept_state(s->ssl);
  return s;
}

void kcm_tls_session_free(struct kcm_tls_session *s) {
  if (!s)
    return;
  SSL_free(s->ssl);
  free(s);
}

int kcm_tls_session_feed(struct kcm_tls_session *s, const char *p, size_t n) {
  return n == 0 || BIO_write(s->in, p, (int)n) == (int)n ? 0 : KCM_ENOMEM;
}

int kcm_tls_session_read(struct kcm_tls_session *s, char *buf, size_t cap, const char **why) {
  size_t got = 0;
  int rc;
  if (!SSL_is_init_finished(s->ssl)) {
    rc = SSL_do_handshake(s->ssl);
    if (rc != 1)
      goto check;
  }
  if (cap == 0)
    return 0;
  rc = SSL_read_ex(s->ssl, buf, cap, &got);
  if (rc == 1)
    return (int)(got > (size_t)INT32_MAX ? INT32_MAX : got);
check:
  switch (SSL_get_error(s->ssl, rc)) {
  case SSL_ERROR_WANT_READ:
  case SSL_ERROR_WANT_WRITE:
    ERR_clear_error();
    return 0;
  case SSL_ERROR_ZERO_RETURN:
    if (why)
      *why = "closed by the peer";
    break;
  default:
    if (why)
      *why = SSL_is_init_finished(s->ssl) ? "broken TLS record" : "TLS handshake failed";
    break;
  }
  ERR_clear_error();
  return KCM_ENETWORK;
}

int kcm_tls_session_write(struct kcm_tls_session *s, const char *p, size_t n) {
  size_t done = 0;
  if (n == 0)
    return 0;
  if (SSL_write_ex(s->ssl, p, n, &done) != 1 || done != n) {
    ERR_clear_error();
    return KCM_ENETWORK;
  }
  return 0;
}

void kcm_tls_session_shutdown(struct kcm_tls_session *s) {
  if (SSL_is_init_finished(s->ssl))
    SSL_shutdown(s->ssl);
  ERR_clear_error();
}

size_t kcm_tls_session_pending(const struct kcm_tls_session *s) {
  return BIO_ctrl_pending(s->out);
}

size_t kcm_tls_session_drain(struct kcm_tls_session *s, char *buf, size_t cap) {
  int n = BIO_read(s->out, buf, cap > INT32_MAX ? INT32_MAX : (int)cap);
  return n > 0 ? (size_t)n : 0;
}

bool kcm_tls_session_established(const struct kcm_tls_session *s) {
  return SSL_is_init_finished(s->ssl);
}

static char *entry_text(X509_NAME *name, int idx) {
  unsigned char *utf8 = NULL;
  char *out;
  int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, idx)));
  if (n < 0)
    return NULL;
  if (memchr(utf8, '\0', (size_t)n)) { /* a name that C strings would cut short */
    OPENSSL_free(utf8);
    return NULL;
  }
  out = malloc((size_t)n + 1);
  if (out) {
    memcpy(out, utf8, (size_t)n);
    out[n] = '\0';
  }
  OPENSSL_free(utf8);
  return out;
}

static int rejected(struct kcm_tls_peer *peer, const char *why) {
  kcm_tls_peer_release(peer);
  peer->state = KCM_TLS_PEER_REJECTED;
  peer->user = strdup(why);
  return peer->user ? 0 : KCM_ENOMEM;
}

int kcm_tls_session_peer(const struct kcm_tls_session *s, struct kcm_tls_peer *peer) {
  X509 *cert = SSL_get0_peer_certificate(s->ssl);
  X509_NAME *name;
  long verify;
  int idx, n = 0;
  memset(peer, 0, sizeof(*peer));
  if (!cert)
    return 0;
  verify = SSL_get_verify_result(s->ssl);
  if (verify != X509_V_OK)
    return rejected(peer, X509_verify_cert_error_string(verify));
  peer->state = KCM_TLS_PEER_VERIFIED;
  name = X509_get_subject_name(cert);
  idx = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  peer->user = idx >= 0 ? entry_text(name, idx) : strdup("");
  for (idx = -1; (idx = X509_NAME_get_index_by_NID(name, NID_organizationName, idx)) >= 0;)
    n++;
  peer->groups = calloc((size_t)n + 1, sizeof(char *));
  if (!peer->user || !peer->groups)
    return rejected(peer, "the certificate's subject cannot be read");
  n = 0;
  for (idx = -1; (idx = X509_NAME_get_index_by_NID(name, NID_organizationName, idx)) >= 0;)
    if (!(peer->groups[n++] = entry_text(name, idx)))
      return rejected(peer, "the certificate's subject cannot be read");
  return 0;
}

void kcm_tls_peer_release(struct kcm_tls_peer *peer) {
  char **g;
  free(peer->user);
  for (g = peer->groups; g && *g; g++)
    free(*g);
  free(peer->groups);
  memset(peer, 0, sizeof(*peer));
}
