/* error — descriptions of kcm error codes; see include/kcm/error.h. */
#include "kcm/error.h"

const char *kcm_strerror(int err) {
  switch (err) {
  case KCM_OK: return "success";
  case KCM_ENOMEM: return "out of memory";
  case KCM_EINVAL: return "invalid input";
  case KCM_ETOOBIG: return "input too large";
  case KCM_EIO: return "input/output error";
  case KCM_ENOTFOUND: return "not found";
  case KCM_ECONFLICT: return "conflict";
  case KCM_EFORBIDDEN: return "forbidden";
  case KCM_EINVALID: return "rejected by the server as invalid";
  case KCM_ETHROTTLED: return "throttled";
  case KCM_ESERVER: return "server error";
  case KCM_ENETWORK: return "network error";
  case KCM_ETIMEOUT: return "timed out";
  case KCM_EGONE: return "resource version too old";
  case KCM_ECANCELED: return "canceled";
  case KCM_EUNAUTHORIZED: return "unauthorized";
  }
  return "unknown error";
}
