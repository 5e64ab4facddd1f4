/* server — the health endpoints' answers; see include/kcm/server.h. */
#include "kcm/server.h"

#include <string.h>

static bool excluded(const char *query, const char *name) {
  const char *p = query;
  size_t n = strlen(name);
  while ((p = strstr(p, "exclude="))) {
    p += 8;
    if (!strncmp(p, name, n) && (p[n] == '\0' || p[n] == '&'))
      return true;
  }
  return false;
}

static bool has_param(const char *query, const char *param) {
  size_t n = strlen(param);
  const char *p = query;
  for (; p && *p; p = strchr(p, '&'), p = p ? p + 1 : NULL)
    if (!strncmp(p, param, n) && (p[n] == '\0' || p[n] == '&' || p[n] == '='))
      return true;
  return false;
}

bool kcm_server_path_under(const char *path, const char *prefix) {
  size_t n = strlen(prefix);
  return !strncmp(path, prefix, n) && (path[n] == '\0' || path[n] == '/');
}

void kcm_server_not_found(struct kcm_server_response *resp) {
  resp->status = 404;
  kcm_buf_reset(&resp->body);
  kcm_buf_append_str(&resp->body, "404 page not found\n");
}

void kcm_server_checks(const char *endpoint, const struct kcm_server_check *checks, size_t n,
                       const struct kcm_server_request *req, struct kcm_server_response *resp) {
  const char *sub = req->path + 1 + strlen(endpoint);
  bool failed = false;
  size_t i;
  if (*sub == '/') {
    for (i = 0; i < n; i++)
      if (!strcmp(sub + 1, checks[i].name)) {
        resp->status = checks[i].ok ? 200 : 500;
        kcm_buf_appendf(&resp->body, checks[i].ok ? "ok" : "internal server error: %s check "
                                                           "failed\n", checks[i].name);
        return;
      }
    kcm_server_not_found(resp);
    return;
  }
  for (i = 0; i < n; i++)
    if (!checks[i].ok && !excluded(req->query, checks[i].name))
      failed = true;
  resp->status = failed ? 500 : 200;
  if (!failed && !has_param(req->query, "verbose")) {
    kcm_buf_append_str(&resp->body, "ok");
    return;
  }
  for (i = 0; i < n; i++) {
    if (excluded(req->query, checks[i].name))
      kcm_buf_appendf(&resp->body, "[+]%s excluded: ok\n", checks[i].name);
    else if (checks[i].ok)
      kcm_buf_appendf(&resp->body, "[+]%s ok\n", checks[i].name);
    else
      kcm_buf_appendf(&resp->body, "[-]%s failed: reason withheld\n", checks[i].name);
  }
  kcm_buf_appendf(&resp->body, "%s check %s\n", endpoint, failed ? "failed" : "passed");
}
