/*
 * error — the error codes every kcm function returns.
 *
 * Functions return 0 on success or a negative KCM_E* code. What to do
 * about one (retry, back off, give up) is the caller's to decide: the
 * work queue retries a failed sync whatever its code, and the client
 * resends what may be resent.
 */
#ifndef KCM_ERROR_H
#define KCM_ERROR_H

enum kcm_error {
  KCM_OK = 0,
  KCM_ENOMEM = -1,     /* out of memory */
  KCM_EINVAL = -2,     /* bad argument or malformed input */
  KCM_ETOOBIG = -3,    /* input over a size limit */
  KCM_EIO = -4,        /* reading a file or running a command failed */
  KCM_ENOTFOUND = -5,  /* a named thing does not exist (404, missing key) */
  KCM_ECONFLICT = -6,  /* optimistic-concurrency conflict or already exists (409) */
  KCM_EFORBIDDEN = -7, /* 403: authenticated, but not allowed */
  KCM_EINVALID = -8,   /* the server rejected the object (400, 422) */
  KCM_ETHROTTLED = -9, /* 429: slow down */
  KCM_ESERVER = -10,   /* 5xx */
  KCM_ENETWORK = -11,  /* connection, TLS or protocol failure */
  KCM_ETIMEOUT = -12,  /* a deadline passed */
  KCM_EGONE = -13,     /* 410: the resourceVersion is too old */
  KCM_ECANCELED = -14, /* the operation was stopped by its owner */
  KCM_EUNAUTHORIZED = -15, /* 401: credentials refused, or none to send */
};

/* A short description of a KCM_E* code. */
const char *kcm_strerror(int err);

#endif
