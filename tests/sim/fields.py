"""metadata.managedFields as kube-apiserver keeps them for Update operations.

Each manager (the `fieldManager` parameter, else the User-Agent up to its
first "/") owns the fields it set. A write gives its manager the fields that
changed and takes them from everyone else; fields that disappear are owned
by no one. Ownership is written in the FieldsV1 form: `f:<field>` for struct
and map fields, `k:{...}` for items of lists keyed by merge keys, `v:<json>`
for set items, and `.` for a map, optional struct or list item owned as a
whole. The encoding follows the upstream format closely enough for kubectl
and for clients that skip these fields; server-side apply is not modelled.

Entries a client sends on a create or an update of the object itself are
kept as kube-apiserver keeps them (`requested`): a list that decodes
replaces the stored one, manager, subresource and time included; an empty
list resets them; anything that does not decode is ignored. The write then
takes its fields from every entry; fields no write ever set stay with
whoever claims them.
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


MANAGER_LIMIT = 128  # bytes of a manager's name
SUBRESOURCE_LIMIT = 256
RESET = object()  # requested(): the client asked for no entries


def _decodes(entry):
    """Whether one sent entry decodes as kube-apiserver's DecodeManagedFields
    reads it: an Apply or Update with an apiVersion, FieldsV1 and a time
    that parses, if any."""
    if not isinstance(entry, dict):
        return False
    if entry.get("operation") not in ("Apply", "Update") or not entry.get("apiVersion"):
        return False
    if entry.get("fieldsType") != "FieldsV1" or not isinstance(entry.get("fieldsV1", {}), dict):
        return False
    for key in ("manager", "subresource"):
        if not isinstance(entry.get(key, ""), str):
            return False
    when = entry.get("time")
    if when is not None:
        from api import parse_rfc3339
        try:
            parse_rfc3339(when)
        except (TypeError, ValueError):
            return False
    return True


def requested(meta, subresource=None):
    """The entries a write asks for: None to keep the stored ones (none
    sent, a subresource write, or a list that does not decode), RESET, or
    the list sent."""
    if subresource is not None or "managedFields" not in meta:
        return None
    sent = meta["managedFields"]
    if sent is None:
        return None
    if sent == [] or sent == [{}]:
        return RESET
    if isinstance(sent, list) and all(_decodes(e) for e in sent):
        return [dict(e) for e in sent]
    return None


def validate(entries, errs):
    """ValidateManagedFields' limits on entries that decoded."""
    for i, e in enumerate(entries or ()):
        at = "metadata.managedFields[%d]" % i
        manager = e.get("manager", "")
        if len(manager.encode()) > MANAGER_LIMIT:
            errs.items.append((at + ".manager", "FieldValueTooLong",
                               "Too long: may not be more than %d bytes" % MANAGER_LIMIT))
        offset = 0
        for ch in manager:
            if not ch.isprintable():
                errs.invalid(at + ".manager", manager, "invalid character U+%04X (at "
                             "position %d)" % (ord(ch), offset))
            offset += len(ch.encode())
        if len(e.get("subresource", "").encode()) > SUBRESOURCE_LIMIT:
            errs.items.append((at + ".subresource", "FieldValueTooLong",
                               "Too long: may not be more than %d bytes" % SUBRESOURCE_LIMIT))


def track(old, new, manager, api_version, now, subresource=None, entries=None):
    """Set new["metadata"]["managedFields"] after `manager` wrote `new` over
    `old`, starting from `entries` (by default old's)."""
    meta = new["metadata"]
    if entries is None:
        entries = (old or {}).get("metadata", {}).get("managedFields") or []
    entries = [e for e in entries if isinstance(e, dict)]
    new_paths = owned_paths(new, subresource)
    all_new = dict(new_paths)
    all_new.update(owned_paths(new, None if subresource == "status" else "status"))
    if old is None:
        changed = set(new_paths)
        gone = set()
    else:
        old_paths = owned_paths(old, subresource)
        changed = {p for p, v in new_paths.items() if old_paths.get(p, "\0") != v}
        all_old = dict(old_paths)
        all_old.update(owned_paths(old, None if subresource == "status" else "status"))
        gone = set(all_old) - set(all_new)
    out = []
    mine = None
    for e in entries:
        owned = _flatten(e.get("fieldsV1") or {})
        if e.get("manager") == manager and (e.get("subresource") or None) == subresource:
            mine = e
            continue
        kept = owned - changed - gone
        if not kept:
            continue  # an entry left without fields goes
        if kept == owned:
            out.append(e)
        elif kept:
            out.append(dict(e, fieldsV1=_tree(kept)))
    if mine is not None and not changed:
        out.append(mine)  # nothing changed: its entry stays as it was
    else:
        owned = ((_flatten(mine.get("fieldsV1") or {}) if mine else set()) - gone) | changed
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
