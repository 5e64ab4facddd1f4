/*
 * Fuzz the secure port's first bytes: what a peer sends is fed, in pieces
 * whose sizes the input's first byte sets, to a TLS server session (with a
 * client CA, so certificate messages are parsed too), which must answer,
 * wait for more, or end the connection, never crash or leak; what it has
 * to send is drained as the server would drain it. Before the handshake the
 * server tells plain HTTP apart by its first byte, as kcm does.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "kcm/tls.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct kcm_tls *tls;

/* A serving identity made once, with a client CA written next to it. */
static struct kcm_tls *identity(void) {
  char dir[] = "/tmp/kcm-fuzz-tls-XXXXXX", ca[64], *err = NULL;
  struct kcm_tls_options o = {0};
  FILE *f;
  if (!mkdtemp(dir))
    abort();
  snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
  o.cert_dir = dir;
  if (kcm_tls_new(&tls, &o, &err)) /* makes dir/kcm.crt, used as the CA below */
    abort();
  if (!(f = fopen(ca, "w")) || fputs(kcm_tls_cert_pem(tls), f) < 0 || fclose(f))
    abort();
  kcm_tls_free(tls);
  o.client_ca_file = ca;
  if (kcm_tls_new(&tls, &o, &err))
    abort();
  return tls;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct kcm_tls_session *s;
  struct kcm_tls_peer peer;
  char plain[4096], out[16384];
  size_t step, at = 0;
  if (!tls)
    tls = identity();
  if (size < 1)
    return 0;
  step = (size_t)data[0] + 1;
  data++;
  size--;
  if (!(s = kcm_tls_session_new(tls)))
    return 0;
  while (at < size) {
    size_t n = size - at < step ? size - at : step;
    int got;
    if (kcm_tls_session_feed(s, (const char *)data + at, n))
      break;
    at += n;
    while ((got = kcm_tls_session_read(s, plain, sizeof(plain), NULL)) > 0)
      ;
    while (kcm_tls_session_pending(s) > 0)
      kcm_tls_session_drain(s, out, sizeof(out));
    if (got < 0)
      break;
  }
  if (kcm_tls_session_established(s) && kcm_tls_session_peer(s, &peer) == 0)
    kcm_tls_peer_release(&peer);
  kcm_tls_session_free(s);
  return 0;
}
