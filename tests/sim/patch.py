"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

The strategic merge patch knows the patch strategies of the fields that the
served kinds carry (containers merged by name, container ports by
containerPort, a Service's ports by port, ...) and the directives kubectl
sends: `$patch` (replace, delete, merge), `$retainKeys`,
`$setElementOrder/<field>` and `$deleteFromPrimitiveList/<field>`.
"""

import copy
import json


class PatchError(Exception):
    """A patch that cannot be applied; `code` is the HTTP status to answer."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


# --- JSON merge patch -----------------------------------------------------------


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# --- JSON patch -------------------------------------------------------------------


def _pointer(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(422, "invalid JSON pointer: %s" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts, path):
    cur = doc
    for p in parts:
        if isinstance(cur, dict):
            if p not in cur:
                raise PatchError(422, "jsonpatch: path %s does not exist" % path)
            cur = cur[p]
        elif isinstance(cur, list):
            idx = _index(p, len(cur), path)
            cur = cur[idx]
        else:
            raise PatchError(422, "jsonpatch: path %s does not exist" % path)
    return cur


def _index(p, n, path, allow_end=False):
    if allow_end and p == "-":
        return n
    try:
        idx = int(p)
    except ValueError:
        raise PatchError(422, "jsonpatch: invalid index %r in %s" % (p, path))
    if idx < 0 or idx > n or (idx == n and not allow_end):
        raise PatchError(422, "jsonpatch: index out of bounds in %s" % path)
    return idx


def _add(doc, path, value):
    parts = _pointer(path)
    if not parts:
        return value
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(last, len(parent), path, allow_end=True), value)
    else:
        raise PatchError(422, "jsonpatch add operation does not apply: doc is missing path: %s"
                         % path)
    return doc


def _remove(doc, path):
    parts = _pointer(path)
    if not parts:
        raise PatchError(422, "jsonpatch: cannot remove the whole document")
    parent = _walk(doc, parts[:-1], path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(422, "jsonpatch remove operation does not apply: doc is missing "
                             "path: \"%s\"" % path)
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(last, len(parent), path))
    raise PatchError(422, "jsonpatch remove operation does not apply: doc is missing path: \"%s\""
                     % path)


def json_patch(target, ops):
    if not isinstance(ops, list):
        raise PatchError(400, "json: cannot unmarshal object into Go value of type "
                         "jsonpatch.Patch")
    doc = copy.deepcopy(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchError(400, "unexpected kind of patch operation: %r" % (op,))
        kind, path = op.get("op"), op.get("path")
        if not isinstance(path, str):
            raise PatchError(422, "%s operation does not apply: doc is missing path" % kind)
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            parts = _pointer(path)
            if not parts:
                doc = copy.deepcopy(op.get("value"))
                continue
            _walk(doc, parts, path)
            _remove(doc, path)
            doc = _add(doc, path, copy.deepcopy(op.get("value")))
        elif kind in ("move", "copy"):
            src = op.get("from")
            if not isinstance(src, str):
                raise PatchError(422, "%s operation does not apply: missing from" % kind)
            value = copy.deepcopy(_walk(doc, _pointer(src), src))
            if kind == "move":
                _remove(doc, src)
            doc = _add(doc, path, value)
        elif kind == "test":
            try:
                got = _walk(doc, _pointer(path), path)
            except PatchError:
                got = None
            if got != op.get("value"):
                raise PatchError(422, "testing value %s failed: test failed" % path)
        else:
            raise PatchError(400, "Unexpected kind: %s" % kind)
    return doc


# --- strategic merge patch ---------------------------------------------------------

_META_LISTS = {"finalizers": (None, "merge"), "ownerReferences": ("uid", "merge")}
_POD_SPEC_LISTS = {
    "containers": ("name", "merge"),
    "initContainers": ("name", "merge"),
    "ephemeralContainers": ("name", "merge"),
    "volumes": ("name", "merge,retainKeys"),
    "imagePullSecrets": ("name", "merge"),
    "hostAliases": ("ip", "merge"),
    "topologySpreadConstraints": ("topologyKey", "merge"),
    "schedulingGates": ("name", "merge"),
    "resourceClaims": ("name", "merge,retainKeys"),
}
_CONTAINER_LISTS = {
    "ports": ("containerPort", "merge"),
    "env": ("name", "merge"),
    "volumeMounts": ("mountPath", "merge"),
    "volumeDevices": ("devicePath", "merge"),
}
_STATUS_LISTS = {
    "Pod": {"conditions": ("type", "merge"), "podIPs": ("ip", "merge")},
    "Node": {"conditions": ("type", "merge"), "addresses": ("type", "merge")},
    "Deployment": {"conditions": ("type", "merge")},
    "ReplicaSet": {"conditions": ("type", "merge")},
    "Namespace": {"conditions": ("type", "merge")},
    "Service": {"conditions": ("type", "merge")},
}
# Lists directly under spec, by kind: a Service's ports merge by port number.
_SPEC_LISTS = {"Service": {"ports": ("port", "merge")}}
_POD_SPEC_PREFIX = {"Pod": ("spec",), "Deployment": ("spec", "template", "spec"),
                    "ReplicaSet": ("spec", "template", "spec")}
_TEMPLATE_META = {"Deployment": ("spec", "template", "metadata"),
                  "ReplicaSet": ("spec", "template", "metadata")}
_RETAIN_KEYS_MAPS = {("Deployment", ("spec", "strategy"))}


def _list_strategy(kind, path):
    """(mergeKey, strategy) for the list at `path` in an object of `kind`, or None."""
    if len(path) == 2 and path[0] == "metadata" and path[1] in _META_LISTS:
        return _META_LISTS[path[1]]
    tmeta = _TEMPLATE_META.get(kind)
    if tmeta and path[:-1] == tmeta and path[-1] in _META_LISTS:
        return _META_LISTS[path[-1]]
    prefix = _POD_SPEC_PREFIX.get(kind)
    if prefix and path[:len(prefix)] == prefix:
        rest = path[len(prefix):]
        if len(rest) == 1 and rest[0] in _POD_SPEC_LISTS:
            return _POD_SPEC_LISTS[rest[0]]
        if (len(rest) == 2 and rest[0] in ("containers", "initContainers", "ephemeralContainers")
                and rest[1] in _CONTAINER_LISTS):
            return _CONTAINER_LISTS[rest[1]]
    if len(path) == 2 and path[0] in ("spec", "status"):
        lists = _SPEC_LISTS if path[0] == "spec" else _STATUS_LISTS
        return lists.get(kind, {}).get(path[1])
    return None


def strategic_merge_patch(kind, target, patch):
    if not isinstance(patch, dict):
        raise PatchError(400, "invalid strategic merge patch: not an object")
    out = _merge_map(kind, copy.deepcopy(target), patch, ())
    return out if out is not None else {}


def _merge_map(kind, orig, patch, path):
    if not isinstance(orig, dict):
        orig = {}
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip(patch)
    if directive == "delete":
        return None
    if directive not in (None, "merge"):
        raise PatchError(400, "Unexpected $patch directive: %s" % directive)
    retain = patch.get("$retainKeys")
    orders = {}
    deletes = {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/"):
            orders[key.split("/", 1)[1]] = value
        elif key.startswith("$deleteFromPrimitiveList/"):
            deletes[key.split("/", 1)[1]] = value
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        sub = path + (key,)
        if value is None:
            orig.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(kind, orig.get(key), value, sub)
            if merged is None:
                orig.pop(key, None)
            else:
                orig[key] = merged
        elif isinstance(value, list):
            orig[key] = _merge_list(kind, orig.get(key), value, sub, orders.get(key))
        else:
            orig[key] = value
    for key, values in deletes.items():
        if isinstance(orig.get(key), list):
            orig[key] = [v for v in orig[key] if v not in values]
    for key, order in orders.items():
        if key not in patch and isinstance(orig.get(key), list):
            orig[key] = _merge_list(kind, orig[key], [], path + (key,), order)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError(400, "invalid patch: $retainKeys must be a list")
        for key in list(orig):
            if key not in retain:
                del orig[key]
    return orig


def _strip(value):
    """Remove directive keys from a patch fragment that is taken as-is."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value
                if not (isinstance(v, dict) and v.get("$patch") == "replace" and len(v) == 1)]
    return value


def _merge_list(kind, orig, patch, path, order=None):
    info = _list_strategy(kind, path)
    if info is None or "merge" not in info[1]:
        return _strip(patch)
    merge_key = info[0]
    orig = list(orig) if isinstance(orig, list) else []
    if merge_key is None:
        merged = orig + [v for v in patch if v not in orig]
        if order is None:
            return merged
        return _normalize_order(merged, order, orig, lambda v: json.dumps(v, sort_keys=True))
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return _strip(patch)
    merged = list(orig)
    patched = []
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            raise PatchError(400, "map: %s does not contain declared merge key: %s"
                             % (json.dumps(item), merge_key))
        key = item[merge_key]
        idx = next((i for i, o in enumerate(merged)
                    if isinstance(o, dict) and o.get(merge_key) == key), -1)
        if item.get("$patch") == "delete":
            if idx >= 0:
                merged.pop(idx)
            continue
        patched.append(item)
        if idx >= 0:
            merged[idx] = _merge_map(kind, merged[idx], item, path)
        else:
            merged.append(_merge_map(kind, {}, item, path))

    def ident(v):
        return json.dumps(v.get(merge_key) if isinstance(v, dict) else v, sort_keys=True)
    return _normalize_order(merged, order if order is not None else patched, orig, ident)


def _normalize_order(merged, patch_order, server_order, ident):
    """Order a merged list as strategic merge patch does: items named by the
    patch (or its $setElementOrder) keep the patch's order, the others keep
    the live order, and the two are interleaved by their live positions."""
    in_patch = {ident(v): i for i, v in enumerate(patch_order)}
    live = {ident(v): i for i, v in enumerate(server_order)}
    right = sorted((v for v in merged if ident(v) in in_patch), key=lambda v: in_patch[ident(v)])
    left = [v for v in merged if ident(v) not in in_patch]
    left.sort(key=lambda v: live.get(ident(v), len(live)))
    out, i, j = [], 0, 0
    while i < len(left) or j < len(right):
        if j >= len(right):
            out.append(left[i])
            i += 1
        elif i >= len(left):
            out.append(right[j])
            j += 1
        else:
            li, ri = live.get(ident(left[i])), live.get(ident(right[j]))
            if li is not None and ri is not None and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out
