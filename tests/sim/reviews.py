"""TokenReview and SubjectAccessReview, as kube-apiserver answers them for
a server that delegates authentication and authorization to it (kcm's
secure port, metrics-server, aggregated API servers).

Neither is stored: a review is created, answered with its status filled
in, and forgotten. The caller needs `create` on the review's resource,
which the bootstrap ClusterRole system:auth-delegator grants.
"""

import rbac
import resources
from api import bad_request, invalid
from resources import FieldErrors
from satokens import API_AUDIENCES


def _answer(body, status):
    """The review sent back: the request with an empty metadata (as a Go
    ObjectMeta with nothing set serializes) and the status."""
    out = {"kind": body["kind"], "apiVersion": body["apiVersion"],
           "metadata": {}, "spec": body.get("spec") or {}}
    out["status"] = status
    return out


def token_review(body, lookup):
    """Answer a TokenReview (already checked to be one) through `lookup`,
    token -> (user, groups, uid) or None, the server's own authenticator. An
    unknown token is not an error: the status says nothing but an empty
    user, as kube-apiserver's omitempty fields leave it."""
    spec = body.get("spec")
    token = spec.get("token") if isinstance(spec, dict) else None
    if not isinstance(token, str) or not token:
        raise bad_request("token is required for TokenReview in authentication")
    ident = lookup(token)
    if ident is None:
        return _answer(body, {"user": {}})
    name, groups, uid = ident
    user = {"username": name}
    if uid:
        user["uid"] = uid
    user["groups"] = list(groups)
    return _answer(body, {"authenticated": True, "user": user, "audiences": list(API_AUDIENCES)})


ATTRIBUTE_FIELDS = ("verb", "path", "group", "version", "namespace", "resource", "subresource",
                    "name")


def _strings(value):
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def access_review(body, authorizer):
    """Answer a SubjectAccessReview (already checked to be one): the
    attributes of spec.resourceAttributes or spec.nonResourceAttributes,
    for spec.user and spec.groups, through the same authorizer as every
    request. RBAC never denies outright, so `denied` is never set."""
    res = resources.BY_PLURAL["subjectaccessreviews"]
    spec = body.get("spec")
    if not isinstance(spec, dict):
        spec = body["spec"] = {}
    ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    user, groups = spec.get("user") or "", spec.get("groups") or []
    errs = FieldErrors()
    for key in ("resourceAttributes", "nonResourceAttributes"):
        attrs = spec.get(key)
        if attrs is not None and not isinstance(attrs, dict):
            errs.invalid("spec." + key, attrs, "must be an object")
        for field, value in (attrs or {}).items() if isinstance(attrs, dict) else ():
            if field in ATTRIBUTE_FIELDS and not isinstance(value, str):
                errs.invalid("spec.%s.%s" % (key, field), value, "must be a string")
    if not isinstance(user, str):
        errs.invalid("spec.user", user, "must be a string")
    if not _strings(groups):
        errs.invalid("spec.groups", groups, "must be a list of strings")
    if ra is not None and nra is not None:
        errs.invalid("spec.nonResourceAttributes", nra,
                     "cannot be specified in combination with resourceAttributes")
    if ra is None and nra is None:
        errs.invalid("spec.resourceAttributes", nra,
                     "exactly one of nonResourceAttributes or resourceAttributes must be "
                     "specified")
    if not user and not groups:
        errs.invalid("spec.user", user, "at least one of user or group must be specified")
    if errs:
        raise invalid(res, "", errs)
    if ra is not None:
        attrs = rbac.Attributes("", ra.get("verb") or "")
        attrs.resource_request = True
        for field in ("group", "version", "namespace", "resource", "subresource", "name"):
            setattr(attrs, field, ra.get(field) or "")
    else:
        attrs = rbac.Attributes(nra.get("path") or "", nra.get("verb") or "")
    allowed, reason = authorizer.authorize(user, groups, attrs)
    status = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return _answer(body, status)
