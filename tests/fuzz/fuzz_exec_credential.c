/*
 * Fuzz the exec credential plugin's answer: the input is what a plugin
 * wrote to stdout, read as an ExecCredential of
 * client.authentication.k8s.io/v1 and then of /v1beta1, the second time
 * over the first's result as a plugin's next run is read. Each reading
 * must give credentials (a token, or a client certificate with its key)
 * and no error, or an error and the earlier credentials untouched; never
 * a crash or leak.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_exec_credential.c:%d: check failed: %s\n", line, what);
  abort();
}

static void parse(struct kcm_client_creds *k, const char *text, const char *want) {
  struct kcm_client_creds before = *k;
  kcm_client_exec_parse(k, text, want, "plugin");
  if (k->error) {
    CHECK(*k->error);
    CHECK(k->valid == before.valid && k->token == before.token);
    CHECK(k->cert_pem == before.cert_pem && k->key_pem == before.key_pem);
    CHECK(k->expires == before.expires);
    return;
  }
  CHECK(k->valid);
  CHECK(k->token ? *k->token != '\0' : k->cert_pem != NULL);
  CHECK(!k->cert_pem == !k->key_pem);
  CHECK(!k->cert_pem || (k->cert_len == strlen(k->cert_pem) && k->key_len == strlen(k->key_pem)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct kcm_client_creds k;
  char *text = strndup((const char *)data, size);
  if (!text)
    return 0;
  memset(&k, 0, sizeof(k));
  parse(&k, text, "client.authentication.k8s.io/v1");
  parse(&k, text, "client.authentication.k8s.io/v1beta1");
  kcm_client_exec_creds_clear(&k);
  free(text);
  return 0;
}
