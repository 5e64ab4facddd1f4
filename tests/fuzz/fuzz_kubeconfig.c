/*
 * Fuzz kubeconfig loading: the input is written to a kubeconfig file and
 * loaded as kcm loads --kubeconfig; when it holds a line "---8<---", the
 * text before it and the text after it are two files loaded as $KUBECONFIG
 * lists them, merged. Loading must give settings or an error naming what
 * is wrong, never crash or leak. Settings must be whole: a server URL with
 * its scheme and no trailing slash, a namespace, a client certificate only
 * with its key, an exec plugin only with a command. Loading may read the
 * files a kubeconfig names (bounded, as every file it reads) but runs
 * nothing: an exec plugin is only described here and runs when a request
 * needs credentials.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kcm/client.h"
#include "kcm/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond) ((cond) ? (void)0 : check_failed(#cond, __LINE__))
#define SEPARATOR "\n---8<---\n"

static void check_failed(const char *what, int line) {
  fprintf(stderr, "fuzz_kubeconfig.c:%d: check failed: %s\n", line, what);
  abort();
}

/* The owner's alone, as a kubeconfig should be (kcm warns otherwise). */
static void write_file(const char *path, const uint8_t *data, size_t size) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0);
  CHECK(!size || write(fd, data, size) == (ssize_t)size);
  CHECK(close(fd) == 0);
}

static void check_config(const struct kcm_client_config *cfg) {
  size_t n;
  char **v;
  CHECK(cfg->server && cfg->namespace && cfg->source && cfg->context);
  n = strlen(cfg->server);
  CHECK(!strncmp(cfg->server, "https://", 8) || !strncmp(cfg->server, "http://", 7));
  CHECK(cfg->server[n - 1] != '/');
  CHECK(!cfg->cert_pem == !cfg->key_pem);
  CHECK(!(cfg->insecure && cfg->ca_pem));
  if (cfg->exec) {
    CHECK(cfg->exec->command && *cfg->exec->command && cfg->exec->api_version);
    for (v = cfg->exec->env; v && *v; v++)
      CHECK(strchr(*v, '=') != NULL);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static char one[64], two[64], list[140];
  struct kcm_client_config cfg;
  struct kcm_client_config_options o = {0};
  const uint8_t *cut = NULL;
  char *errmsg = NULL;
  size_t i;
  int rc;

  if (!one[0]) {
    char dir[] = "/tmp/kcm-fuzz-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    snprintf(one, sizeof(one), "%s/kubeconfig", dir);
    snprintf(two, sizeof(two), "%s/second", dir);
    snprintf(list, sizeof(list), "%s:%s", one, two);
    /* Never the in-cluster settings; no warnings about the files named. */
    unsetenv("KUBERNETES_SERVICE_HOST");
    kcm_log_set_output(fopen("/dev/null", "w"));
  }
  for (i = 0; !cut && i + sizeof(SEPARATOR) - 1 <= size; i++)
    if (!memcmp(data + i, SEPARATOR, sizeof(SEPARATOR) - 1))
      cut = data + i;
  if (cut) {
    write_file(one, data, (size_t)(cut - data) + 1);
    write_file(two, cut + sizeof(SEPARATOR) - 1,
               size - (size_t)(cut - data) - (sizeof(SEPARATOR) - 1));
    setenv("KUBECONFIG", list, 1);
  } else {
    write_file(one, data, size);
    o.kubeconfig = one;
  }
  rc = kcm_client_config_load(&cfg, &o, &errmsg);
  if (rc == 0) {
    check_config(&cfg);
    kcm_client_config_release(&cfg);
  } else {
    /* Every failure says why and leaves nothing behind. */
    CHECK(errmsg && *errmsg);
    CHECK(!cfg.server && !cfg.exec && !cfg.token);
  }
  free(errmsg);
  unsetenv("KUBECONFIG");
  return 0;
}
