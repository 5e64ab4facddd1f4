/*
 * Fuzz the exec credential plugin's answer: the input is what a plugin
 * wrote to stdout, read as a client.authentication.k8s.io/v1
 * ExecCredential. The result must be credentials (a token, or a client
 * certificate with its key) or an error saying why, never a crash or leak.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct kcm_client_creds k;
  char *text = strndup((const char *)data, size);
  if (!text)
    return 0;
  memset(&k, 0, sizeof(k));
  kcm_client_exec_parse(&k, text, "client.authentication.k8s.io/v1", "plugin");
  if (k.valid ? (k.error || (!k.token && !(k.cert_pem && k.key_pem))) : !k.error)
    abort();
  kcm_client_exec_creds_clear(&k);
  free(text);
  return 0;
}
