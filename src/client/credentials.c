/*
 * client/credentials.c — the credentials each attempt carries: a bearer
 * token (exec plugin, else the token file, else the inline token), else
 * basic auth; an exec plugin's client certificate. The token file is
 * re-read every minute and after a 401, which also drops exec credentials.
 * Headers holding credentials are wiped before they are freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "kcm/error.h"
#include "kcm/log.h"

#define TOKEN_REREAD_SECONDS 60

/* The bearer token: the token file (re-read every minute and after a 401)
 * wins over the inline token, as client-go does. */
const char *kcm_client_current_token(struct kcm_client *c) {
  const struct kcm_client_config *cfg = c->cfg;
  time_t now = time(NULL);

  if (cfg->token_file && (!c->token || now - c->token_read_at >= TOKEN_REREAD_SECONDS)) {
    FILE *f = fopen(cfg->token_file, "r");
    if (f) {
      char buf[16384];
      size_t n = fread(buf, 1, sizeof(buf) - 1, f);
      fclose(f);
      while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        n--;
      buf[n] = '\0';
      if (n) {
        char *t = strdup(buf);
        if (t) {
          free(c->token);
          c->token = t;
        }
      }
      explicit_bzero(buf, sizeof(buf));
    } else if (!c->token) {
      kcm_warn("cannot read token file path=\"%s\"", cfg->token_file);
    }
    c->token_read_at = now;
  }
  if (cfg->exec && c->creds.token)
    return c->creds.token;
  return c->token ? c->token : cfg->token;
}

void kcm_client_token_release(struct kcm_client *c) {
  if (c->token)
    explicit_bzero(c->token, strlen(c->token));
  free(c->token);
  c->token = NULL;
}

void kcm_client_free_sent_headers(struct kcm_client_request *r) {
  struct curl_slist *h;
  for (h = r->sent_headers; h; h = h->next)
    explicit_bzero(h->data, strlen(h->data));
  curl_slist_free_all(r->sent_headers);
  r->sent_headers = NULL;
}

int kcm_client_attach_credentials(struct kcm_client_request *r, const char *token) {
  struct kcm_client *c = r->client;
  const struct kcm_client_config *cfg = c->cfg;
  struct curl_slist *h = NULL, *own;
  CURL *e = r->easy;
  char *hdr = NULL;
  bool ok = true;

  kcm_client_free_sent_headers(r);
  for (own = r->headers; own && ok; own = own->next)
    ok = (h = curl_slist_append(h, own->data)) != NULL;
  curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_NONE);
  if (ok && token && *token) {
    ok = asprintf(&hdr, "Authorization: Bearer %s", token) >= 0 &&
         (h = curl_slist_append(h, hdr)) != NULL;
    if (hdr)
      explicit_bzero(hdr, strlen(hdr));
    free(hdr);
  } else if (ok && cfg->username) {
    curl_easy_setopt(e, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    curl_easy_setopt(e, CURLOPT_USERNAME, cfg->username);
    curl_easy_setopt(e, CURLOPT_PASSWORD, cfg->password ? cfg->password : "");
  }
  r->sent_headers = h;
  if (!ok)
    return KCM_ENOMEM;
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->sent_headers);
  if (cfg->exec && c->creds.cert_pem) {
    struct curl_blob cert = {c->creds.cert_pem, c->creds.cert_len, CURL_BLOB_COPY};
    struct curl_blob key = {c->creds.key_pem, c->creds.key_len, CURL_BLOB_COPY};
    curl_easy_setopt(e, CURLOPT_SSLCERT_BLOB, &cert);
    curl_easy_setopt(e, CURLOPT_SSLCERTTYPE, "PEM");
    curl_easy_setopt(e, CURLOPT_SSLKEY_BLOB, &key);
    curl_easy_setopt(e, CURLOPT_SSLKEYTYPE, "PEM");
  }
  return 0;
}

void kcm_client_note_unauthorized(struct kcm_client_request *r) {
  struct kcm_client *c = r->client;
  long status = 0;
  curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
  if (status != 401)
    return;
  if (r->bearer) { /* not the client's credentials that were refused */
    if (r->bearer->refused && r->bearer_generation == r->bearer->generation)
      r->bearer->refused(r->bearer);
    return;
  }
  c->stats.unauthorized++;
  c->token_read_at = 0; /* re-read the token file */
  if (c->cfg->exec)
    kcm_client_creds_invalidate(c);
}
