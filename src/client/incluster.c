/*
 * client/incluster.c — settings inside a cluster, as client-go's
 * InClusterConfig reads them: the API server from KUBERNETES_SERVICE_HOST
 * and KUBERNETES_SERVICE_PORT, the service account's token file, CA and
 * namespace from its mounted directory.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "kcm/error.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* cfg->namespace from the directory's namespace file, when it is there. */
static int read_namespace(struct kcm_client_config *cfg, const char *dir, char **errmsg) {
  char *path = NULL, *ns = NULL;
  size_t len;

  if (asprintf(&path, "%s/namespace", dir) < 0)
    return kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
  if (access(path, F_OK) == 0 &&
      kcm_client_read_file(path, &ns, &len, errmsg, "namespace") == 0) {
    while (len && isspace((unsigned char)ns[len - 1]))
      ns[--len] = '\0';
    cfg->namespace = ns;
  }
  free(path);
  return 0;
}

int kcm_client_incluster_load(struct kcm_client_config *cfg, char **errmsg) {
  const char *host = getenv("KUBERNETES_SERVICE_HOST");
  const char *port = getenv("KUBERNETES_SERVICE_PORT");
  const char *dir = getenv("KCM_SERVICEACCOUNT_DIR");
  char *path = NULL, *token = NULL;
  size_t len;
  int err;

  if (!dir || !*dir)
    dir = SA_DIR;
  if (asprintf(&cfg->server, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
               port) < 0) {
    cfg->server = NULL;
    return kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
  }
  cfg->source = strdup("in-cluster service account");
  if (asprintf(&cfg->token_file, "%s/token", dir) < 0) {
    cfg->token_file = NULL;
    return kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
  }
  err = kcm_client_read_file(cfg->token_file, &token, &len, errmsg, "service account token");
  if (err)
    return err;
  free(token);
  if (asprintf(&path, "%s/ca.crt", dir) < 0)
    return kcm_client_fail(errmsg, KCM_ENOMEM, "out of memory");
  err = kcm_client_read_file(path, &cfg->ca_pem, &cfg->ca_pem_len, errmsg,
                             "service account CA");
  free(path);
  if (err)
    return err;
  return read_namespace(cfg, dir, errmsg);
}
