"""Request semantics of the local API server: create, get, list, update, patch,
delete and the status, scale and binding subresources, with kube-apiserver's
metadata rules, optimistic concurrency, graceful deletion and finalizers.

Everything that writes (HTTP handlers, the fake kubelet, the garbage
collector) goes through `Api`, so every write obeys the same rules and
produces the same watch events.
"""

import bisect
import copy
import datetime
import json
import random
import threading
import time
import uuid

import fields
import patch as patchlib
import resources
import selector as sel
from store import Expired, Store

GENERATE_CHARS = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339(offset=0.0):
    t = datetime.datetime.fromtimestamp(time.time() + offset, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text):
    if not text:
        return None
    text = text.replace("Z", "+00:00")
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def details(**fields):
    """A Status details block; empty values are left out, as Go's omitempty does."""
    return {k: v for k, v in fields.items() if v not in ("", None)}


class ApiError(Exception):
    """An error answered as a metav1.Status."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self):
        # Keys in the order metav1.Status serializes them.
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message}
        if self.reason:
            st["reason"] = self.reason
        if self.details is not None:
            st["details"] = self.details
        st["code"] = self.code
        return st


def not_found(res, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (res.qualified, name),
                    details(name=name, group=res.group, kind=res.plural))


def already_exists(res, name):
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (res.qualified, name),
                    details(name=name, group=res.group, kind=res.plural))


def conflict(res, name, why="the object has been modified; please apply your changes to the "
                           "latest version and try again"):
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                    % (res.qualified, name, why),
                    details(name=name, group=res.group, kind=res.plural))


def bad_request(message):
    return ApiError(400, "BadRequest", message)


def invalid(res, name, errs, kind=None, group=None):
    items = errs.items
    kind = kind or res.kind
    group = res.group if group is None else group
    qualified = "%s.%s" % (kind, group) if group else kind
    rendered = ["%s: %s" % (f, m) for f, _, m in items]
    body = rendered[0] if len(rendered) == 1 else "[" + ", ".join(rendered) + "]"
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (qualified, name, body),
                    details(name=name, group=group, kind=kind,
                            causes=[{"reason": r, "message": m, "field": f}
                                    for f, r, m in items]))


def forbidden_namespace_terminating(res, name, ns):
    return ApiError(403, "Forbidden",
                    '%s "%s" is forbidden: unable to create new content in namespace %s because '
                    "it is being terminated" % (res.qualified, name, ns),
                    details(name=name, group=res.group, kind=res.plural,
                            causes=[{"reason": "NamespaceTerminating",
                                     "message": "namespace %s is being terminated" % ns,
                                     "field": "metadata.namespace"}]))


def go_json_error(raw, err):
    """Word a JSON syntax error as Go's encoding/json does."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    pos = getattr(err, "pos", len(text))
    if not text.strip() or pos >= len(text.rstrip()):
        return "unexpected end of JSON input"
    return "invalid character '%s' looking for beginning of value" % text[pos]


def _json_kind(value):
    return {list: "array", str: "string", bool: "bool", type(None): "null"}.get(
        type(value), "number")


def key_of(obj):
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class Api:
    def __init__(self, max_events=100000):
        self.store = Store([r.plural for r in resources.ALL], max_events=max_events)
        self.lock = self.store.cond
        self.ctx = threading.local()  # .manager: who is writing (managedFields)

    @property
    def manager(self):
        return getattr(self.ctx, "manager", "unknown")

    # --- helpers -----------------------------------------------------------------

    def _entry(self, res, ns, name):
        entry = self.store.get(res.plural, (ns if res.namespaced else "", name))
        if entry is None:
            raise not_found(res, name)
        return entry

    def _check_namespace(self, res, ns, name):
        if not res.namespaced:
            return
        entry = self.store.get("namespaces", ("", ns))
        if entry is None:
            raise ApiError(404, "NotFound", 'namespaces "%s" not found' % ns,
                           details(name=ns, kind="namespaces"))
        if entry.obj.get("metadata", {}).get("deletionTimestamp"):
            raise forbidden_namespace_terminating(res, name, ns)

    @staticmethod
    def _check_kind(res, body, kind=None, api_version=None):
        kind = kind or res.kind
        api_version = api_version or res.api_version
        if not isinstance(body, dict):
            raise bad_request("the object provided is unrecognized (must be of type %s): couldn't "
                              "get version/kind; json parse error: json: cannot unmarshal %s "
                              "into Go value of type struct { APIVersion string "
                              "\"json:\\\"apiVersion,omitempty\\\"\"; Kind string "
                              "\"json:\\\"kind,omitempty\\\"\" }"
                              % (kind, _json_kind(body)))
        got_kind, got_av = body.get("kind"), body.get("apiVersion")
        if (got_kind or kind) != kind or (got_av or api_version) != api_version:
            got_kind, got_av = got_kind or kind, got_av or api_version
            version = got_av.split("/")[-1]
            known = resources.BY_KIND.get((got_av, got_kind))
            if known is None and got_kind not in ("Scale", "Binding", "DeleteOptions"):
                raise bad_request('no kind "%s" is registered for version "%s" in scheme '
                                  '"pkg/api/legacyscheme/scheme.go:30"' % (got_kind, got_av))
            internal = (res.group or "core") if kind == res.kind else api_version.split("/")[0]
            raise bad_request('%s in version "%s" cannot be handled as a %s: converting (%s.%s) '
                              'to (%s.%s): unknown conversion'
                              % (got_kind, version, kind, version, got_kind, internal, kind))
        body["kind"], body["apiVersion"] = kind, api_version

    @staticmethod
    def _decode_times(res, obj):
        try:
            resources.normalize_times(obj)
        except resources.TimeError as e:
            raise bad_request('%s in version "%s" cannot be handled as a %s: %s'
                              % (res.kind, res.version, res.kind, e))

    def _allocate(self, res, obj, old):
        """Let the resource take what it needs from cluster-wide pools, as the
        registry's BeginCreate/BeginUpdate hooks do before the strategy runs."""
        def others():
            skip = key_of(old) if old is not None else None
            return [e.obj for k, e in self.store.items(res.plural) if k != skip]
        try:
            errs = res.allocate(obj, old, others)
        except resources.InternalError as e:
            raise ApiError(500, "InternalError", "Internal error occurred: %s" % e,
                           {"causes": [{"message": str(e)}]})
        if errs:
            raise invalid(res, obj["metadata"].get("name") or "", errs)

    def _commit(self, res, key, obj):
        obj["metadata"]["resourceVersion"] = str(self.store.next_rv())
        return self.store.put(res.plural, key, obj).obj

    def _remove(self, res, key, obj):
        final = copy.deepcopy(obj)
        final["metadata"]["resourceVersion"] = str(self.store.next_rv())
        return self.store.remove(res.plural, key, final).obj

    # --- reads -------------------------------------------------------------------

    def get(self, res, ns, name):
        with self.lock:
            return self._entry(res, ns, name).obj

    def list(self, res, ns, label_selector="", field_selector="", limit=0, cont="",
             resource_version=""):
        """Returns (entries, list resourceVersion, continue token, remaining count)."""
        reqs, terms = self.parse_selectors(res, label_selector, field_selector)
        with self.lock:
            start_key = None
            if cont:
                rv, start_key = self._decode_continue(cont)
                try:
                    snap = self.store.snapshot(res.plural, rv)
                except Expired:
                    raise ApiError(410, "Expired",
                                   "The provided continue parameter is too old to display a "
                                   "consistent list result. You can start a new list without "
                                   "the continue parameter.")
            elif resource_version == "0" or not limit:
                # Served from the watch cache: the whole list, pagination ignored.
                rv, snap = self.store.rv, None
            else:
                rv = self.store.rv
                snap = self.store.snapshot(res.plural)
            if snap is None:
                items = [e for k, e in self.store.items(res.plural, (ns or None) if res.namespaced
                                                          else None)
                         if self._matches(e.obj, reqs, terms)]
                items.sort(key=lambda e: key_of(e.obj))
                return items, rv, "", None
            # A page is a slice of the snapshot; with neither a namespace nor a
            # selector to filter by, the remaining count is arithmetic, so paging
            # through n objects costs O(n), not O(n^2).
            ns_filter = bool(ns and res.namespaced)
            plain = not ns_filter and not reqs and not terms
            keys, entries = snap.keys, snap.entries
            i = bisect.bisect_right(keys, start_key) if start_key is not None else 0
            if ns_filter:  # keys sort by namespace first: skip straight to it
                i = max(i, bisect.bisect_left(keys, (ns,)))
            out, next_key, remaining = [], None, 0
            while i < len(keys):
                k, e = keys[i], entries[i]
                i += 1
                if ns_filter and k[0] != ns:
                    if k[0] > ns:
                        break
                    continue
                if not plain and not self._matches(e.obj, reqs, terms):
                    continue
                if len(out) >= limit:
                    next_key = key_of(out[-1].obj)
                    if plain:
                        remaining = len(keys) - i + 1
                    else:
                        remaining = 1 + sum(
                            1 for k2, e2 in zip(keys[i:], entries[i:])
                            if (not ns_filter or k2[0] == ns)
                            and self._matches(e2.obj, reqs, terms))
                    break
                out.append(e)
            token = self._encode_continue(rv, next_key) if next_key else ""
            return out, rv, token, (remaining if next_key else None)

    @staticmethod
    def _encode_continue(rv, key):
        import base64
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)})
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def _decode_continue(token):
        import base64
        try:
            pad = "=" * (-len(token) % 4)
            data = json.loads(base64.urlsafe_b64decode(token + pad))
            return int(data["rv"]), tuple(data["start"])
        except Exception:
            raise bad_request("invalid continue token: continue key is not valid: illegal "
                              "base64 data at input byte 0")

    @staticmethod
    def parse_selectors(res, label_selector, field_selector):
        try:
            reqs = sel.parse_label_selector(label_selector or "")
            terms = sel.parse_field_selector(field_selector or "", res.supported_fields(),
                                             res.unsupported_field)
        except sel.SelectorError as e:
            raise bad_request(str(e))
        return reqs, terms

    @staticmethod
    def _matches(obj, reqs, terms):
        if reqs and not sel.labels_match(reqs, obj["metadata"].get("labels")):
            return False
        if terms and not sel.fields_match(terms, obj):
            return False
        return True

    # --- create ------------------------------------------------------------------

    def create(self, res, ns, body, dry_run=False, keep_status=False):
        """POST. keep_status (internal, for bulk loading) stores the given
        status instead of the one a new object starts with."""
        self._check_kind(res, body)
        meta = body.get("metadata")
        if meta is None:
            meta = body["metadata"] = {}
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if res.namespaced:
            if meta.get("namespace") and ns and meta["namespace"] != ns:
                raise bad_request("the namespace of the provided object does not match the "
                                  "namespace sent on the request")
            meta["namespace"] = ns or meta.get("namespace") or ""
        else:
            meta.pop("namespace", None)
        with self.lock:
            name = meta.get("name") or meta.get("generateName") or ""
            if res.namespaced:
                self._check_namespace(res, meta["namespace"], name)
            if not meta.get("name") and isinstance(meta.get("generateName"), str):
                meta["name"] = self._generate_name(res, meta["namespace"], meta["generateName"])
            sent = fields.requested(meta)
            for f in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds",
                      "selfLink", "managedFields"):
                meta.pop(f, None)
            meta.pop("generation", None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            self._decode_times(res, body)
            res.default(body)
            self._allocate(res, body, None)
            status = body.get("status")
            res.prepare_create(body)
            if keep_status and status is not None:
                body["status"] = status
            errs = res.validate(body, None)
            if errs:
                raise invalid(res, meta.get("name") or "", errs)
            key = key_of(body)
            if self.store.get(res.plural, key) is not None:
                raise already_exists(res, meta["name"])
            fields.track(None, body, self.manager, res.api_version, now_rfc3339(),
                         entries=sent if isinstance(sent, list) else None)
            fields.validate(meta.get("managedFields"), errs)
            if errs:
                raise invalid(res, meta.get("name") or "", errs)
            body = _ordered(body)
            if dry_run:
                return body
            return self._commit(res, key, body)

    def _generate_name(self, res, ns, prefix):
        prefix = prefix[:58]
        while True:
            name = prefix + "".join(random.choice(GENERATE_CHARS) for _ in range(5))
            if self.store.get(res.plural, (ns, name)) is None:
                return name

    # --- update ------------------------------------------------------------------

    def update(self, res, ns, name, body, subresource=None, dry_run=False):
        """PUT. Returns (object, created)."""
        self._check_kind(res, body)
        meta = body.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise bad_request("metadata must be an object")
        if meta.get("name") and meta["name"] != name:
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                              % (meta["name"], name))
        if res.namespaced and meta.get("namespace") and meta["namespace"] != ns:
            raise bad_request("the namespace of the provided object does not match the namespace "
                              "sent on the request")
        meta["name"] = name
        with self.lock:
            entry = self.store.get(res.plural, (ns if res.namespaced else "", name))
            if entry is None:
                if res.create_on_update and subresource is None:
                    return self.create(res, ns, body, dry_run), True
                raise not_found(res, name)
            rv = meta.get("resourceVersion")
            if rv and rv != entry.obj["metadata"]["resourceVersion"]:
                raise conflict(res, name)
            return self._write(res, entry.obj, body, subresource, dry_run), False

    def _write(self, res, old, new, subresource=None, dry_run=False):
        """Carry system metadata over, run the strategy, validate and store."""
        meta = new["metadata"]
        ometa = old["metadata"]
        sent = fields.requested(meta, subresource)
        for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "namespace", "name", "generation"):
            if f in ometa:
                meta[f] = ometa[f]
            else:
                meta.pop(f, None)
        meta.pop("selfLink", None)
        meta["resourceVersion"] = ometa["resourceVersion"]
        self._decode_times(res, new)
        if ometa.get("deletionTimestamp"):
            added = set(meta.get("finalizers") or []) - set(ometa.get("finalizers") or [])
            if added and subresource is None:
                errs = resources.FieldErrors()
                errs.forbidden("metadata.finalizers",
                               "no new finalizers can be added if the object is being deleted, "
                               "found new finalizers %s" % json.dumps(sorted(added)))
                raise invalid(res, ometa["name"], errs)
        res.default(new)
        if subresource == "status":
            res.prepare_status_update(new, old)
        else:
            self._allocate(res, new, old)
            res.prepare_update(new, old)
        errs = res.validate(new, old)
        if errs:
            raise invalid(res, ometa["name"], errs)
        if isinstance(sent, list):
            meta["managedFields"] = sent
        elif sent is None and ometa.get("managedFields") is not None:
            meta["managedFields"] = ometa["managedFields"]
        else:
            meta.pop("managedFields", None)
        new = _ordered(new)
        if new == old:
            return old
        if sent is not fields.RESET:  # a reset keeps no entry, not even the writer's
            fields.track(old, new, self.manager, res.api_version, now_rfc3339(), subresource,
                         entries=meta.get("managedFields") or [])
            fields.validate(new["metadata"].get("managedFields"), errs)
            if errs:
                raise invalid(res, ometa["name"], errs)
        if dry_run:
            return new
        key = key_of(old)
        # An object being deleted goes once its last finalizer is gone and no
        # grace period is left (a namespace also waits for spec.finalizers).
        ns_pending = res.plural == "namespaces" and (new.get("spec") or {}).get("finalizers")
        if (meta.get("deletionTimestamp") and not meta.get("finalizers")
                and not meta.get("deletionGracePeriodSeconds") and not ns_pending):
            return self._remove(res, key, new)
        return self._commit(res, key, new)

    # --- patch -------------------------------------------------------------------

    PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
                   "application/strategic-merge-patch+json")

    def patch(self, res, ns, name, content_type, raw, subresource=None, dry_run=False):
        if content_type not in self.PATCH_TYPES:
            raise ApiError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
        try:
            patch_doc = json.loads(raw)
        except RecursionError:  # see decode_body
            raise bad_request("json parse error: exceeded max depth")
        except (ValueError, UnicodeDecodeError) as e:
            if content_type != "application/json-patch+json":
                raise bad_request("Invalid JSON Patch")
            raise bad_request(go_json_error(raw, e))
        with self.lock:
            entry = self._entry(res, ns, name)
            current = entry.obj
            if subresource == "scale":
                target = self.scale_of(res, current)
            else:
                target = current
            try:
                result = self.apply_patch(res.kind if subresource != "scale" else "Scale",
                                          content_type, target, patch_doc)
            except patchlib.PatchError as e:
                if e.code == 422:
                    raise ApiError(422, "Invalid", "the server rejected our request due to an "
                                   "error in our request", {})
                raise bad_request(e.message)
            if not isinstance(result, dict):
                raise bad_request("Invalid JSON Patch")
            if subresource == "scale":
                return self.update_scale(res, ns, name, result, dry_run)
            meta = result.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise bad_request("metadata must be an object")
            rv = meta.get("resourceVersion")
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise conflict(res, name)
            if meta.get("name", name) != name:
                raise bad_request("the name of the object (%s) does not match the name on the URL "
                                  "(%s)" % (meta.get("name"), name))
            if meta.get("uid") and meta["uid"] != current["metadata"].get("uid"):
                raise conflict(res, name, "Precondition failed: UID in precondition: %s, UID in "
                                          "object meta: %s" % (meta["uid"],
                                                               current["metadata"].get("uid")))
            self._check_kind(res, result)
            return self._write(res, current, result, subresource, dry_run)

    @staticmethod
    def apply_patch(kind, content_type, target, patch_doc):
        if content_type == "application/json-patch+json":
            return patchlib.json_patch(target, patch_doc)
        if content_type == "application/merge-patch+json":
            if not isinstance(patch_doc, dict):
                raise patchlib.PatchError(400, "Invalid JSON Patch")
            return patchlib.merge_patch(target, patch_doc)
        return patchlib.strategic_merge_patch(kind, target, patch_doc)

    # --- scale -------------------------------------------------------------------

    @staticmethod
    def scale_of(res, obj):
        meta = obj["metadata"]
        return {
            "kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {"name": meta["name"], "namespace": meta.get("namespace"),
                         "uid": meta["uid"], "resourceVersion": meta["resourceVersion"],
                         "creationTimestamp": meta["creationTimestamp"]},
            "spec": {"replicas": (obj.get("spec") or {}).get("replicas", 0)},
            "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                       "selector": sel.selector_object_string((obj.get("spec") or {})
                                                              .get("selector"))},
        }

    def get_scale(self, res, ns, name):
        with self.lock:
            return self.scale_of(res, self._entry(res, ns, name).obj)

    def update_scale(self, res, ns, name, scale, dry_run=False):
        self._check_kind(res, scale, "Scale", "autoscaling/v1")
        with self.lock:
            entry = self._entry(res, ns, name)
            cur = entry.obj
            smeta = scale.get("metadata") or {}
            if smeta.get("name") and smeta["name"] != name:
                raise bad_request("the name of the object (%s) does not match the name on the URL "
                                  "(%s)" % (smeta["name"], name))
            rv = smeta.get("resourceVersion")
            if rv and rv != cur["metadata"]["resourceVersion"]:
                raise conflict(res, name)
            replicas = (scale.get("spec") or {}).get("replicas", 0)
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                errs = resources.FieldErrors()
                errs.invalid("spec.replicas", replicas, "must be greater than or equal to 0")
                raise invalid(res, name, errs, kind="Scale", group="autoscaling")
            new = copy.deepcopy(cur)
            new["spec"]["replicas"] = replicas
            obj = self._write(res, cur, new, "scale", dry_run)
            return self.scale_of(res, obj)

    # --- binding -------------------------------------------------------------------

    def bind(self, ns, name, body):
        res = resources.BY_PLURAL["pods"]
        if not isinstance(body, dict):
            raise bad_request("binding must be an object")
        bname = (body.get("metadata") or {}).get("name")
        if bname != name:
            raise bad_request("name in URL does not match name in Binding object")
        target = body.get("target") or {}
        node = target.get("name")
        if not node:
            errs = resources.FieldErrors()
            errs.required("target.name")
            raise invalid(res, name, errs, kind="Binding", group="")
        with self.lock:
            entry = self._entry(res, ns, name)
            pod = entry.obj
            why = None
            if pod["metadata"].get("deletionTimestamp"):
                why = "pod %s is being deleted, cannot be assigned to a host" % name
            elif (pod.get("spec") or {}).get("nodeName"):
                why = 'pod %s is already assigned to node "%s"' % (name, pod["spec"]["nodeName"])
            if why:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on pods/binding '
                               '"%s": %s' % (name, why), details(name=name, kind="pods/binding"))
            new = copy.deepcopy(pod)
            new["spec"]["nodeName"] = node
            conds = new.setdefault("status", {}).setdefault("conditions", [])
            conds[:] = [c for c in conds if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                          "lastTransitionTime": now_rfc3339()})
            self._commit(res, key_of(pod), new)
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "code": 201}

    # --- delete ------------------------------------------------------------------

    def delete(self, res, ns, name, opts=None, dry_run=False):
        """Returns (http code, body): the deleted object's last state for kinds
        that return it (pods, services) and for objects that stay while
        finalizers or a grace period run, else a Status of success, as
        kube-apiserver answers."""
        opts = opts or {}
        with self.lock:
            entry = self._entry(res, ns, name)
            cur = entry.obj
            meta = cur["metadata"]
            self._check_preconditions(res, cur, opts.get("preconditions") or {})
            policy = self._propagation(res, opts)
            new = copy.deepcopy(cur)
            nmeta = new["metadata"]
            finalizers = [f for f in nmeta.get("finalizers") or []
                          if f not in ("orphan", "foregroundDeletion")]
            if policy == "Orphan":
                finalizers.append("orphan")
            elif policy == "Foreground":
                finalizers.append("foregroundDeletion")
            elif policy is None:
                finalizers += [f for f in meta.get("finalizers") or []
                               if f in ("orphan", "foregroundDeletion")]
            if finalizers:
                nmeta["finalizers"] = finalizers
            else:
                nmeta.pop("finalizers", None)
            if res.plural == "namespaces":
                return self._delete_namespace(res, cur, new, dry_run)
            grace = self._grace(res, cur, opts)
            if grace is not None:
                # Graceful kinds (pods) always record the deletion first;
                # with no grace left and no finalizers they then go.
                if meta.get("deletionTimestamp"):
                    remaining = meta.get("deletionGracePeriodSeconds") or 0
                    if grace < remaining:
                        nmeta["deletionTimestamp"] = now_rfc3339(grace)
                        nmeta["deletionGracePeriodSeconds"] = grace
                else:
                    nmeta["deletionTimestamp"] = now_rfc3339(grace)
                    nmeta["deletionGracePeriodSeconds"] = grace
            elif finalizers and not meta.get("deletionTimestamp"):
                nmeta["deletionTimestamp"] = now_rfc3339()
                nmeta["deletionGracePeriodSeconds"] = 0
                if res.has_generation:
                    nmeta["generation"] = meta.get("generation", 0) + 1
            gone = not finalizers and not nmeta.get("deletionGracePeriodSeconds")
            if dry_run:
                return 200, new
            if new != cur and (grace is not None or not gone):
                new = self._commit(res, key_of(cur), new)
            if gone:
                final = self._remove(res, key_of(cur), new)
                if res.return_deleted:
                    return 200, final
                return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                             "status": "Success",
                             "details": {"name": name, "group": res.group, "kind": res.plural,
                                         "uid": meta.get("uid")}}
            code = 202 if opts.get("orphanDependents") is False else 200
            return code, new

    @staticmethod
    def _check_preconditions(res, cur, pre):
        meta = cur["metadata"]
        why = None
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            why = ("the UID in the precondition (%s) does not match the UID in record (%s). The "
                   "object might have been deleted and then recreated" % (pre["uid"],
                                                                          meta.get("uid")))
        elif pre.get("resourceVersion") and pre["resourceVersion"] != meta["resourceVersion"]:
            why = ("the ResourceVersion in the precondition (%s) does not match the "
                   "ResourceVersion in record (%s). The object might have been modified"
                   % (pre["resourceVersion"], meta["resourceVersion"]))
        if why:
            raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                           % (res.qualified_kind, meta["name"], why),
                           details(name=meta["name"], group=res.group, kind=res.kind))

    @staticmethod
    def _propagation(res, opts):
        policy = opts.get("propagationPolicy")
        errs = resources.FieldErrors()
        if policy is not None and opts.get("orphanDependents") is not None:
            errs.invalid("propagationPolicy", policy,
                         "orphanDependents and deletionPropagation cannot be both set")
        elif policy not in (None, "Orphan", "Foreground", "Background"):
            errs.not_supported("propagationPolicy", policy,
                               ["Foreground", "Background", "Orphan", "nil"])
        if errs:
            raise invalid(res, "", errs, kind="DeleteOptions", group="meta.k8s.io")
        if policy is None and opts.get("orphanDependents") is not None:
            policy = "Orphan" if opts["orphanDependents"] else "Background"
        return policy

    @staticmethod
    def _grace(res, obj, opts):
        """The grace period that applies, or None for kinds deleted at once."""
        if res.plural != "pods":
            return None
        grace = opts.get("gracePeriodSeconds")
        spec = obj.get("spec") or {}
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        if grace < 0:
            grace = 1
        phase = (obj.get("status") or {}).get("phase")
        if not spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            grace = 0
        return grace

    def _delete_namespace(self, res, cur, new, dry_run):
        meta = new["metadata"]
        if not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = now_rfc3339()
            meta["deletionGracePeriodSeconds"] = 0
            new.setdefault("status", {})["phase"] = "Terminating"
        if dry_run:
            return 200, new
        if new != cur:
            return 200, self._commit(res, key_of(cur), new)
        return 200, cur

    def finalize_namespace(self, name):
        """What the namespace controller does once a terminating namespace is empty."""
        res = resources.BY_PLURAL["namespaces"]
        with self.lock:
            entry = self.store.get("namespaces", ("", name))
            if entry is None:
                return
            new = copy.deepcopy(entry.obj)
            new["spec"]["finalizers"] = []
            if new["metadata"].get("finalizers"):
                self._commit(res, ("", name), new)
            else:
                self._remove(res, ("", name), new)

    def delete_collection(self, res, ns, label_selector, field_selector, opts, dry_run=False):
        entries, rv, _, _ = self.list(res, ns, label_selector, field_selector)
        items = []
        for e in entries:
            meta = e.obj["metadata"]
            try:
                self.delete(res, meta.get("namespace", ""), meta["name"], opts, dry_run)
                items.append(e.obj)
            except ApiError as err:
                if err.code != 404:
                    raise
        return {"kind": res.kind + "List", "apiVersion": res.api_version,
                "metadata": {"resourceVersion": str(self.store.rv)}, "items": items}

    # --- internal writers (kubelet, garbage collector) -------------------------------

    def mutate(self, res, key, fn, subresource=None):
        """Apply fn(copy) to the stored object and write it; no-op if it is gone."""
        with self.lock:
            entry = self.store.get(res.plural, key)
            if entry is None:
                return None
            new = copy.deepcopy(entry.obj)
            if fn(new) is False:
                return entry.obj
            return self._write(res, entry.obj, new, subresource)


_META_ORDER = ("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
               "annotations", "ownerReferences", "finalizers")


def _ordered(obj):
    """Order top-level and metadata keys as Go's struct encoding does."""
    out = {}
    for k in ("kind", "apiVersion", "metadata", "spec", "status"):
        if k in obj:
            out[k] = obj[k]
    for k, v in obj.items():
        if k not in out:
            out[k] = v
    meta = out.get("metadata")
    if isinstance(meta, dict):
        m = {k: meta[k] for k in _META_ORDER if k in meta}
        for k, v in meta.items():
            if k not in m:
                m[k] = v
        out["metadata"] = m
    return out
