/*
 * client/parse.c — the text the client reads from the network and writes
 * into URLs: header lines, Retry-After, status codes and Status messages,
 * percent-encoding, the userinfo of a server URL, and base64 (kubeconfig's
 * inline certificates and keys). Pure functions of their arguments.
 */
#include <ctype.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"
#include "kcm/api.h"
#include "kcm/error.h"
#include "kcm/json.h"
#include "kcm/pb.h"

static bool blank(char c) { return c == ' ' || c == '\t'; }

bool kcm_client_header_value(const char *line, size_t len, const char *name, const char **value,
                             size_t *value_len) {
  size_t n = strlen(name);
  const char *v, *end = line + len;
  if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':')
    return false;
  v = line + n + 1;
  while (end > v && (end[-1] == '\n' || end[-1] == '\r' || blank(end[-1])))
    end--;
  while (v < end && blank(*v))
    v++;
  *value = v;
  *value_len = (size_t)(end - v);
  return true;
}

bool kcm_client_retry_after(const char *v, size_t n, uint32_t *seconds) {
  const char *end = v + n;
  uint32_t s = 0;
  while (v < end && blank(*v))
    v++;
  while (end > v && blank(end[-1]))
    end--;
  if (v == end)
    return false;
  for (; v < end; v++) {
    if (*v < '0' || *v > '9')
      return false;
    /* Checked before it grows: past the cap the value stays at it. */
    if (s <= KCM_CLIENT_RETRY_AFTER_MAX)
      s = s * 10 + (uint32_t)(*v - '0');
  }
  *seconds = s < KCM_CLIENT_RETRY_AFTER_MAX ? s : KCM_CLIENT_RETRY_AFTER_MAX;
  return true;
}

static bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '-' || c == '.' || c == '_' || c == '~';
}

int kcm_client_escape(struct kcm_buf *out, const char *s, size_t n) {
  static const char hex[] = "0123456789ABCDEF";
  size_t i = 0;
  int err = 0;
  while (!err && i < n) {
    size_t run = i;
    while (run < n && unreserved((unsigned char)s[run]))
      run++;
    if (run > i)
      err = kcm_buf_append(out, s + i, run - i);
    if (!err && run < n) {
      unsigned char c = (unsigned char)s[run];
      char enc[3] = {'%', hex[c >> 4], hex[c & 15]};
      err = kcm_buf_append(out, enc, 3);
      run++;
    }
    i = run;
  }
  return err;
}

const char *kcm_client_segment_problem(const char *s) {
  if (!strcmp(s, ".") || !strcmp(s, ".."))
    return "may not be '.' or '..'";
  if (strpbrk(s, "/%"))
    return "may not contain '/' or '%'";
  return NULL;
}

static int append_segment(struct kcm_buf *b, const char *s) {
  int err = kcm_buf_append(b, "/", 1);
  return err ? err : kcm_client_escape(b, s, strlen(s));
}

int kcm_client_path(char *out, size_t cap, const char *api, const char *ns, const char *resource,
                    const char *name, const char *sub) {
  struct kcm_buf b = KCM_BUF_INIT(cap ? cap - 1 : 0);
  bool in_ns = ns && *ns;
  const char *why = NULL, *what = "namespace", *bad = ns;
  int err;
  if (in_ns)
    why = kcm_client_segment_problem(ns);
  if (!why && name) {
    why = *name ? kcm_client_segment_problem(name) : "may not be empty";
    what = "resource name";
    bad = name;
  }
  if (why) {
    snprintf(out, cap, "invalid %s \"%.64s\": %s", what, bad, why);
    return KCM_EINVAL;
  }
  err = kcm_buf_append_str(&b, api);
  if (!err && in_ns && !(err = kcm_buf_append_str(&b, "/namespaces")))
    err = append_segment(&b, ns);
  if (!err && !(err = kcm_buf_append(&b, "/", 1)))
    err = kcm_buf_append_str(&b, resource);
  if (!err && name)
    err = append_segment(&b, name);
  if (!err && sub && !(err = kcm_buf_append(&b, "/", 1)))
    err = kcm_buf_append_str(&b, sub);
  if (err)
    snprintf(out, cap, "the path of %s \"%.64s\" is %s", name ? "resource name" : "namespace",
             name ? name : in_ns ? ns : "", err == KCM_ETOOBIG ? "too long" : "out of memory");
  else
    memcpy(out, b.data, b.len + 1);
  kcm_buf_release(&b);
  return err;
}

int kcm_client_object_path(enum kcm_kind kind, const char *ns, const char *name, const char *sub,
                           char *out, size_t cap) {
  const struct kcm_api_kind *k = kcm_api_kind(kind);
  if (!k) {
    snprintf(out, cap, "no kind %d", (int)kind);
    return KCM_EINVAL;
  }
  return kcm_client_path(out, cap, k->prefix, ns, k->plural, name, sub);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

char *kcm_client_unescape(const char *s, size_t n) {
  char *out = malloc(n + 1), *o = out;
  size_t i;
  if (!out)
    return NULL;
  for (i = 0; i < n; i++) {
    int hi, lo;
    if (s[i] == '%' && i + 2 < n &&
        (hi = hex_digit(s[i + 1])) >= 0 && (lo = hex_digit(s[i + 2])) >= 0) {
      *o++ = (char)(hi << 4 | lo);
      i += 2;
    } else if (s[i] == '%') {
      free(out);
      return NULL;
    } else {
      *o++ = s[i];
    }
  }
  *o = '\0';
  return out;
}

bool kcm_client_url_userinfo(const char *url, size_t *start, size_t *end) {
  const char *a = strstr(url, "://"), *p, *at = NULL;
  if (!a)
    return false;
  a += 3;
  /* The authority ends at the path, query or fragment; its userinfo at its
   * last '@' (a password may hold more). */
  for (p = a; *p && *p != '/' && *p != '?' && *p != '#'; p++)
    if (*p == '@')
      at = p;
  if (!at)
    return false;
  *start = (size_t)(a - url);
  *end = (size_t)(at + 1 - url);
  return true;
}

char *kcm_client_redact_url(const char *url) {
  size_t start, end, len = strlen(url);
  char *out;
  if (!kcm_client_url_userinfo(url, &start, &end))
    return strdup(url);
  out = malloc(len - (end - start) + 1);
  if (!out)
    return NULL;
  memcpy(out, url, start);
  memcpy(out + start, url + end, len - end + 1);
  return out;
}

bool kcm_client_url_host_empty(const char *url) {
  const char *a = strstr(url, "://"), *h;
  size_t start, end;
  if (!a)
    return false;
  h = kcm_client_url_userinfo(url, &start, &end) ? url + end : a + 3;
  if (*h == '[')
    return h[1] == ']';
  return !*h || *h == ':' || *h == '/' || *h == '?' || *h == '#';
}

static int b64_value(int c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  if (c == '+')
    return 62;
  if (c == '/')
    return 63;
  return -1;
}

int kcm_client_base64_decode(const char *in, size_t len, char **out, size_t *out_len) {
  char *o = malloc(len / 4 * 3 + 4);
  unsigned acc = 0;
  int bits = 0, pad = 0;
  size_t n = 0, i;

  if (!o)
    return KCM_ENOMEM;
  for (i = 0; i < len; i++) {
    int c = (unsigned char)in[i], v;
    if (isspace(c))
      continue;
    if (c == '=') {
      pad++;
      continue;
    }
    v = b64_value(c);
    if (v < 0 || pad) {
      free(o);
      return KCM_EINVAL;
    }
    acc = (acc << 6) | (unsigned)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      o[n++] = (char)((acc >> bits) & 0xff);
    }
  }
  if (pad > 2 || bits >= 6) {
    free(o);
    return KCM_EINVAL;
  }
  o[n] = '\0';
  *out = o;
  *out_len = n;
  return 0;
}

int kcm_client_status_error(long status) {
  if (status >= 200 && status < 300)
    return 0;
  switch (status) {
  case 401:
    return KCM_EUNAUTHORIZED;
  case 403:
    return KCM_EFORBIDDEN;
  case 404:
    return KCM_ENOTFOUND;
  case 409:
    return KCM_ECONFLICT;
  case 410:
    return KCM_EGONE;
  case 429:
    return KCM_ETHROTTLED;
  case 504:
    return KCM_ETIMEOUT;
  }
  if (status >= 500)
    return KCM_ESERVER;
  return KCM_EINVALID;
}

/* The message of a Status in protobuf (field 3), as kube-apiserver writes
 * errors to a client that asked for protobuf; NULL when body is none. */
static char *protobuf_message(const char *body, size_t len) {
  static const uint32_t message[] = {3, 0};
  const uint8_t *kind, *raw, *s;
  size_t kind_len, raw_len, n;
  const char *why;
  struct kcm_pb r;
  if (!kcm_pb_unwrap((const uint8_t *)body, len, &kind, &kind_len, &raw, &raw_len, &why))
    return NULL;
  kcm_pb_start(&r, raw, raw_len);
  if (!kcm_pb_find(&r, message) || !kcm_pb_bytes(&r, &s, &n))
    return strdup("");
  return strndup((const char *)s, n);
}

char *kcm_client_error_message(const char *body, size_t len) {
  struct json_object *obj, *msg;
  char *out = NULL;
  size_t i, n;

  if (!len)
    return strdup("");
  if ((out = protobuf_message(body, len)))
    return out;
  obj = kcm_json_tree(body, len);
  if (obj && json_object_object_get_ex(obj, "message", &msg) &&
      json_object_is_type(msg, json_type_string))
    out = strdup(json_object_get_string(msg));
  json_object_put(obj);
  if (out)
    return out;
  n = len < 200 ? len : 200;
  out = malloc(n + 1);
  if (!out)
    return NULL;
  for (i = 0; i < n; i++)
    out[i] = (body[i] >= 0x20 && body[i] < 0x7f) ? body[i] : ' ';
  out[n] = '\0';
  return out;
}

bool kcm_client_namespace_terminating(const struct kcm_client_response *resp) {
  return resp->status == 403 && strstr(resp->body, "\"NamespaceTerminating\"") != NULL;
}
