"""metadata.managedFields as kube-apiserver keeps them for Update operations.

Each manager (the `fieldManager` parameter, else the User-Agent up to its
first "/") owns the fields it set. A write gives its manager the fields that
changed and takes them from everyone else; fields that disappear are owned
by no one. Ownership is written in the FieldsV1 form: `f:<field>` for struct
and map fields, `k:{...}` for items of lists keyed by merge keys, `v:<json>`
for set items, and `.` for a map, optional struct or list item owned as a
whole. The encoding follows the upstream format closely enough for kubectl
and for clients that skip these fields; server-side apply is not modelled.
"""

import json

# Fields that name the object rather than describe it: never owned.
_SYSTEM_META = {"name", "namespace", "uid", "resourceVersion", "generation",
                "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                "managedFields", "selfLink", "generateName"}
# Lists whose items are identified by these keys (those an item has: a
# container's ports have containerPort, a Service's port).
_KEYED = {
    "containers": ("name",), "initContainers": ("name",), "ephemeralContainers": ("name",),
    "ports": ("containerPort", "port", "protocol"), "env": ("name",),
    "volumeMounts": ("mountPath",), "volumes": ("name",), "imagePullSecrets": ("name",),
    "conditions": ("type",), "ownerReferences": ("uid",), "podIPs": ("ip",), "hostIPs": ("ip",),
    "addresses": ("type",),
}
_SETS = {"finalizers"}
# Values owned as a whole (x-kubernetes-map-type: atomic and similar).
_ATOMIC = {"selector", "tolerations", "containerStatuses", "initContainerStatuses", "args",
           "command", "resources", "securityContext", "nodeAffinity", "capacity",
           "allocatable", "nodeInfo", "involvedObject", "source", "series", "related"}
# Plain (non-pointer) structs: no "." marker of their own.
_STRUCTS = {"metadata", "spec", "status", "template", "strategy"}


def _leaf_paths(value, prefix, out):
    """Add (path, value) for every owned position under `value`."""
    if isinstance(value, dict):
        for k, v in value.items():
            if v is None:
                continue  # a null is an unset field: nobody owns it
            key = prefix + ("f:" + k,)
            name = k
            if isinstance(v, dict) and v and name not in _ATOMIC:
                if name not in _STRUCTS:
                    out[key + (".",)] = None
                _leaf_paths(v, key, out)
            elif isinstance(v, list) and v and (name in _KEYED or name in _SETS):
                _list_paths(name, v, key, out)
            else:
                out[key] = json.dumps(v, sort_keys=True)


def _list_paths(name, items, key, out):
    if name in _SETS:
        for item in items:
            out[key + ("v:" + json.dumps(item),)] = None
        return
    fields = _KEYED[name]
    for item in items:
        if not isinstance(item, dict):
            out[key] = json.dumps(items, sort_keys=True)
            return
        ident = {f: item[f] for f in fields if f in item}
        ikey = key + ("k:" + json.dumps(ident, separators=(",", ":")),)
        out[ikey + (".",)] = None
        _leaf_paths(item, ikey, out)


def owned_paths(obj, subresource=None):
    """{path: value} of the fields a write of `obj` could own."""
    out = {}
    for top, value in obj.items():
        if top in ("kind", "apiVersion"):
            continue
        if (top == "status") != (subresource == "status") and top != "metadata":
            continue
        if top == "metadata":
            if subresource == "status":
                continue
            meta = {k: v for k, v in value.items() if k not in _SYSTEM_META}
            if meta:
                _leaf_paths({"metadata": meta}, (), out)
            continue
        _leaf_paths({top: value}, (), out)
    return out


def _tree(paths):
    root = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(part, {})
    return root


def _flatten(tree, prefix=(), out=None):
    out = set() if out is None else out
    for k, v in tree.items():
        path = prefix + (k,)
        if v:
            _flatten(v, path, out)
        else:
            out.add(path)
    return out


def track(old, new, manager, api_version, now, subresource=None):
    """Set new["metadata"]["managedFields"] after `manager` wrote `new` over `old`."""
    meta = new["metadata"]
    entries = (old or {}).get("metadata", {}).get("managedFields") or []
    entries = [e for e in entries if isinstance(e, dict)]
    new_paths = owned_paths(new, subresource)
    all_new = dict(new_paths)
    all_new.update(owned_paths(new, None if subresource == "status" else "status"))
    if old is None:
        changed = set(new_paths)
    else:
        old_paths = owned_paths(old, subresource)
        changed = {p for p, v in new_paths.items() if old_paths.get(p, "\0") != v}
    out = []
    mine = None
    for e in entries:
        owned = _flatten(e.get("fieldsV1") or {})
        if e.get("manager") == manager and e.get("subresource") == subresource:
            mine = owned
            continue
        owned = {p for p in owned - changed if p in all_new}
        if owned:
            e = dict(e, fieldsV1=_tree(owned))
            out.append(e)
    owned = ((mine or set()) | changed) & set(all_new)
    if owned:
        entry = {"manager": manager, "operation": "Update", "apiVersion": api_version,
                 "time": now, "fieldsType": "FieldsV1", "fieldsV1": _tree(owned)}
        if subresource:
            entry["subresource"] = subresource
        out.append(entry)
    if out:
        meta["managedFields"] = out
    else:
        meta.pop("managedFields", None)
