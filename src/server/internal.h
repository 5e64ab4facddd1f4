/*
 * server internals: what the module's own code and its tests share, and no
 * other module calls.
 */
#ifndef KCM_SERVER_INTERNAL_H
#define KCM_SERVER_INTERNAL_H

#include "kcm/server.h"

/* Parse a request head of len bytes, ending in the blank line, in place
 * (NULs are written into it): the request line and the first
 * Authorization header into req's method, path, query and authorization.
 * Returns 0, or the status to refuse it with: 400 (malformed, a control byte
 * other than tab, not HTTP/1.0 or 1.1, a target that is not a path) or 405 (not GET or
 * HEAD). */
int kcm_server_parse_head(char *head, size_t len, struct kcm_server_request *req);

#endif
