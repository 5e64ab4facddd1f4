"""A small OpenAPI v3 description of the served paths.

kubectl reads /openapi/v3 to learn that PATCH accepts the `fieldValidation`
parameter (so it leaves validation to the server) and which patch content
types each kind accepts. The documents list every path and operation with
its group-version-kind, without component schemas: kubectl then computes
strategic merge patches from its compiled-in types, as it does for any
built-in kind.
"""

import hashlib
import json

import resources

PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json",
               "application/merge-patch+json", "application/strategic-merge-patch+json")


def _gv_path(group, version):
    return "apis/%s/%s" % (group, version) if group else "api/%s" % version


def _param(name):
    return {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}


def _op(action, gvk, params, body=None):
    op = {"x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
          "parameters": [_param(p) for p in params],
          "responses": {"200": {"description": "OK"}}}
    if body:
        op["requestBody"] = {"content": {t: {"schema": {"type": "object"}} for t in body}}
    return op


def gv_document(group, version):
    paths = {}
    prefix = "/" + _gv_path(group, version)
    for res in resources.ALL:
        if (res.group, res.version) != (group, version):
            continue
        gvk = {"group": res.group, "version": res.version, "kind": res.kind}
        base = prefix + ("/namespaces/{namespace}/" if res.namespaced else "/") + res.plural
        write = ("dryRun", "fieldManager", "fieldValidation")
        paths[base] = {
            "get": _op("list", gvk, ("labelSelector", "fieldSelector", "limit", "continue",
                                     "resourceVersion", "watch", "timeoutSeconds")),
            "post": _op("post", gvk, write, ("application/json",)),
            "delete": _op("deletecollection", gvk, ("labelSelector", "fieldSelector")),
        }
        if res.review:  # only created
            paths[base] = {"post": paths[base]["post"]}
            continue
        item = base + "/{name}"
        paths[item] = {
            "get": _op("get", gvk, ()),
            "put": _op("put", gvk, write, ("application/json",)),
            "patch": _op("patch", gvk, write + ("force",), PATCH_TYPES),
            "delete": _op("delete", gvk, ("gracePeriodSeconds", "propagationPolicy", "dryRun")),
        }
        for sub, (sgroup, sversion, skind, verbs) in res.subresources.items():
            sgvk = gvk if sgroup is None else {"group": sgroup, "version": sversion,
                                                "kind": skind}
            ops = {}
            if "get" in verbs:
                ops["get"] = _op("get", sgvk, ())
            if "update" in verbs:
                ops["put"] = _op("put", sgvk, write, ("application/json",))
            if "patch" in verbs:
                ops["patch"] = _op("patch", sgvk, write + ("force",), PATCH_TYPES)
            if "create" in verbs:
                ops["post"] = _op("post", sgvk, write, ("application/json",))
            paths["%s/%s" % (item, sub)] = ops
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes (kcm local API server)", "version": "v1.31.0"},
            "paths": paths, "components": {"schemas": {}}}


def documents():
    """{'apis/apps/v1': document} for every served group version."""
    return {_gv_path(g, v): gv_document(g, v) for g, v in resources.groups()}


def index(docs):
    out = {}
    for path, doc in docs.items():
        digest = hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()
        out[path] = {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (path, digest)}
    return {"paths": out}
