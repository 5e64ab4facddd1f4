"""Service-account tokens as kube-apiserver issues and checks them: the
TokenRequest API (POST .../serviceaccounts/NAME/token) and the bearer-token
authenticator that accepts what it issued.

A token is a JWT (header.claims.signature, base64url) with the claims of
upstream's service-account tokens (iss, sub, aud, exp, iat, nbf and the
kubernetes.io block naming the namespace and the service account's name and
uid), signed with HMAC-SHA256 by a key kept in the server's directory, so
tokens stay valid when the server is started again. It authenticates as
system:serviceaccount:NS:NAME until it expires, and only while its
ServiceAccount exists with the same uid and is not being deleted (as
--service-account-lookup does), and only if one of its audiences is the API
server's.
"""

import base64
import datetime
import hashlib
import hmac
import json
import os
import secrets
import time

import rbac
import resources
from api import ApiError, invalid, not_found
from resources import FieldErrors

# The audience and issuer of the API server's own tokens (kubeadm's defaults).
API_AUDIENCES = ["https://kubernetes.default.svc.cluster.local"]
ISSUER = "https://kubernetes.default.svc.cluster.local"

DEFAULT_SECONDS = 3600      # TokenRequestSpec.expirationSeconds default
MIN_SECONDS = 600           # validation.MinTokenAgeSec
MAX_SECONDS = 1 << 32


def _b64(raw):
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _rfc3339(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%SZ")


def load_key(directory):
    """The signing key in DIR/sa.key, made on first start (mode 0600)."""
    path = os.path.join(directory, "sa.key")
    try:
        with open(path) as f:
            key = f.read().strip()
        if key:
            return bytes.fromhex(key)
    except FileNotFoundError:
        pass
    key = secrets.token_bytes(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.hex() + "\n")
    return key


class TokenIssuer:
    """Issues tokens for the ServiceAccounts in `api`'s store and checks them.
    min_seconds is the shortest expirationSeconds accepted (600 as upstream;
    tests may lower it)."""

    def __init__(self, api, key, min_seconds=MIN_SECONDS, clock=time.time):
        self.api, self.key, self.min_seconds, self.clock = api, key, min_seconds, clock

    def _sign(self, data):
        return _b64(hmac.new(self.key, data.encode(), hashlib.sha256).digest())

    def request(self, ns, name, body):
        """Answer a TokenRequest (kind already checked) for ServiceAccount ns/name."""
        res = resources.BY_PLURAL["serviceaccounts"]
        meta = body.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        spec = body.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        errs = FieldErrors()
        # The body may name the account, but only the one in the URL.
        if meta.get("name") and meta["name"] != name:
            errs.invalid("metadata.name", meta["name"],
                         "must match the service account name if specified")
        elif meta.get("namespace") and meta["namespace"] != ns:
            errs.invalid("metadata.namespace", meta["namespace"],
                         "must match the service account namespace if specified")
        if errs:
            raise invalid(res, name, errs, kind="TokenRequest", group="authentication.k8s.io")
        with self.api.lock:
            entry = self.api.store.get(res.plural, (ns, name))
            if entry is None:
                raise not_found(res, name)
            sa_uid = entry.obj["metadata"]["uid"]
        auds = spec.get("audiences") or list(API_AUDIENCES)
        exp = spec.get("expirationSeconds")
        if exp is None:  # absent or null: defaulted
            exp = DEFAULT_SECONDS
        if not isinstance(auds, list) or not all(isinstance(a, str) for a in auds):
            errs.invalid("spec.audiences", auds, "must be a list of strings")
        if not isinstance(exp, int) or isinstance(exp, bool):
            errs.invalid("spec.expirationSeconds", exp, "must be an integer")
        elif exp < self.min_seconds:
            errs.invalid("spec.expirationSeconds", exp,
                         "may not specify a duration less than 10 minutes"
                         if self.min_seconds == MIN_SECONDS else
                         "may not specify a duration less than %d seconds" % self.min_seconds)
        elif exp > MAX_SECONDS:
            errs.invalid("spec.expirationSeconds", exp,
                         "may not specify a duration larger than 2^32 seconds")
        if errs:
            raise invalid(res, "", errs, kind="TokenRequest", group="authentication.k8s.io")
        now = int(self.clock())
        claims = {"aud": auds, "exp": now + exp, "iat": now, "iss": ISSUER, "nbf": now,
                  "jti": secrets.token_hex(16),
                  "kubernetes.io": {"namespace": ns,
                                    "serviceaccount": {"name": name, "uid": sa_uid}},
                  "sub": "%s%s:%s" % (rbac.SA_PREFIX, ns, name)}
        head = _b64(json.dumps({"alg": "HS256", "kid": "kcm-sim"}).encode()) + "." + \
            _b64(json.dumps(claims, separators=(",", ":")).encode())
        token = head + "." + self._sign(head)
        return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": name, "namespace": ns,
                             "creationTimestamp": _rfc3339(now)},
                "spec": {"audiences": auds, "expirationSeconds": exp, "boundObjectRef": None},
                "status": {"token": token, "expirationTimestamp": _rfc3339(now + exp)}}

    def authenticate(self, token):
        """(user, groups, uid) for a valid token this server issued, else None."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        head = parts[0] + "." + parts[1]
        if not hmac.compare_digest(self._sign(head), parts[2]):
            return None
        try:
            claims = json.loads(_unb64(parts[1]))
            sa = claims["kubernetes.io"]
            ns, name, uid = sa["namespace"], sa["serviceaccount"]["name"], \
                sa["serviceaccount"]["uid"]
            exp, auds = claims["exp"], claims["aud"]
        except (ValueError, KeyError, TypeError):
            return None
        if self.clock() >= exp or not set(auds) & set(API_AUDIENCES):
            return None
        with self.api.lock:
            entry = self.api.store.get("serviceaccounts", (ns, name))
            meta = entry.obj["metadata"] if entry else {}
        if meta.get("uid") != uid or meta.get("deletionTimestamp"):
            return None
        user, groups = rbac.service_account_identity(ns, name)
        return user, groups, uid
