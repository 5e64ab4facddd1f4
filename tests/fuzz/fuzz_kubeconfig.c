/*
 * Fuzz kubeconfig loading: the input is written to a kubeconfig file and
 * loaded as kcm loads --kubeconfig. Loading must give settings or an error
 * message naming what is wrong, never crash or leak; it may read the files
 * a kubeconfig names but runs nothing (an exec plugin runs only when a
 * request needs credentials).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcm/client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char path[64];
  struct kcm_client_config cfg;
  struct kcm_client_config_options o = {0};
  char *errmsg = NULL;
  FILE *f;

  if (!path[0]) {
    char dir[] = "/tmp/kcm-fuzz-XXXXXX";
    if (!mkdtemp(dir))
      abort();
    snprintf(path, sizeof(path), "%s/kubeconfig", dir);
  }
  if (!(f = fopen(path, "wb")))
    abort();
  if (size && fwrite(data, 1, size, f) != size)
    abort();
  fclose(f);
  o.kubeconfig = path;
  if (kcm_client_config_load(&cfg, &o, &errmsg) == 0) {
    if (!cfg.server)
      abort(); /* loaded settings always name a server */
    kcm_client_config_release(&cfg);
  } else if (!errmsg || !*errmsg) {
    abort(); /* every failure says why */
  }
  free(errmsg);
  return 0;
}
