"""The resources the local API server serves, with kube-apiserver's defaulting,
validation and update strategies for each.

Each Resource knows its group/version/kind, whether it is namespaced, its
subresources, the field labels it supports in field selectors, and hooks:
`default(obj)`, `validate(obj, old)` returning field errors, and
`prepare_create(obj)` / `prepare_update(new, old)` / `prepare_status_update(new, old)`
which do what the upstream registry strategies do (reset status on create,
bump metadata.generation, keep the spec on a status write), and
`allocate(obj, old, others)`, which takes what a write needs from cluster-wide
pools (a Service's cluster IP and node ports) before the strategy runs.
"""

import copy
import ipaddress
import json
import random
import re

import selector as sel

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PERCENT = re.compile(r"^[0-9]+%$")


class FieldErrors:
    """Collects field errors the way apimachinery's field.ErrorList renders them."""

    def __init__(self):
        self.items = []  # (field, reason, message)

    def __bool__(self):
        return bool(self.items)

    def required(self, field, detail=""):
        self.items.append((field, "FieldValueRequired",
                           "Required value" + (": " + detail if detail else "")))

    def invalid(self, field, value, detail):
        self.items.append((field, "FieldValueInvalid",
                           "Invalid value: %s: %s" % (go_value(value), detail)))

    def forbidden(self, field, detail):
        self.items.append((field, "FieldValueForbidden", "Forbidden: " + detail))

    def not_supported(self, field, value, valid):
        self.items.append((field, "FieldValueNotSupported",
                           "Unsupported value: %s: supported values: %s"
                           % (go_value(value), ", ".join('"%s"' % v for v in valid))))

    def duplicate(self, field, value):
        self.items.append((field, "FieldValueDuplicate", "Duplicate value: %s" % go_value(value)))


class InternalError(Exception):
    """A failure kube-apiserver answers with 500 InternalError (a pool ran dry)."""


class GoRepr:
    """A value already rendered the way Go's %#v prints the typed original."""

    def __init__(self, text):
        self.text = text


def _go_str(v):
    return json.dumps(v) if isinstance(v, str) else json.dumps(str(v))


def go_string_map(m):
    if m is None:
        return "map[string]string(nil)"
    return "map[string]string{%s}" % ", ".join(
        "%s:%s" % (_go_str(k), _go_str(v)) for k, v in sorted(m.items()))


def go_labels(m):
    return GoRepr(go_string_map(m if isinstance(m, dict) else None))


def go_selector(sel_obj):
    sel_obj = sel_obj if isinstance(sel_obj, dict) else {}
    exprs = sel_obj.get("matchExpressions")
    if exprs:
        rendered = "[]v1.LabelSelectorRequirement{%s}" % ", ".join(
            'v1.LabelSelectorRequirement{Key:%s, Operator:%s, Values:%s}' % (
                _go_str(e.get("key", "")), _go_str(e.get("operator", "")),
                "[]string{%s}" % ", ".join(_go_str(v) for v in e["values"])
                if e.get("values") else "[]string(nil)")
            for e in exprs if isinstance(e, dict))
    else:
        rendered = "[]v1.LabelSelectorRequirement(nil)"
    return GoRepr("v1.LabelSelector{MatchLabels:%s, MatchExpressions:%s}" % (
        go_string_map(sel_obj.get("matchLabels")), rendered))


def go_intstr(v):
    if isinstance(v, str):
        return GoRepr('intstr.IntOrString{Type:1, IntVal:0, StrVal:%s}' % _go_str(v))
    return GoRepr("intstr.IntOrString{Type:0, IntVal:%d, StrVal:\"\"}" % (v or 0))


def go_value(value):
    """Render a value roughly as Go's %#v does in validation messages."""
    if isinstance(value, GoRepr):
        return value.text
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def int_or_percent(value, total, round_up):
    """Resolve an IntOrString against a total, as intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and PERCENT.match(value):
        pct = int(value[:-1])
        num = pct * total
        return -(-num // 100) if round_up else num // 100
    return None


# --- time fields ------------------------------------------------------------------

# metav1.Time fields: any RFC 3339 time is accepted and kept to the second.
TIME_KEYS = {"creationTimestamp", "deletionTimestamp", "lastTransitionTime", "lastUpdateTime",
             "lastProbeTime", "lastHeartbeatTime", "startTime", "startedAt", "finishedAt",
             "firstTimestamp", "lastTimestamp", "time"}
# metav1.MicroTime fields: exactly six fractional digits.
MICRO_KEYS = {"eventTime", "acquireTime", "renewTime", "lastObservedTime"}
_TIME_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$")
_MICRO_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d{6})(Z|[+-]\d\d:\d\d)$")


class TimeError(ValueError):
    pass


def _utc(date, frac, zone):
    import datetime
    t = datetime.datetime.fromisoformat(date + ("+00:00" if zone == "Z" else zone))
    t = t.astimezone(datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + frac + "Z"


def normalize_times(obj):
    """Parse every Time and MicroTime field as kube-apiserver decodes them:
    Times lose their fraction, MicroTimes need six digits; both become UTC."""
    if isinstance(obj, list):
        for v in obj:
            normalize_times(v)
        return
    if not isinstance(obj, dict):
        return
    for k, v in obj.items():
        if isinstance(v, str) and k in TIME_KEYS:
            m = _TIME_RE.match(v)
            if not m:
                raise TimeError('parsing time "%s" as "2006-01-02T15:04:05Z07:00": cannot parse '
                                '"%s" as "2006"' % (v, v))
            obj[k] = _utc(m.group(1), "", m.group(3))
        elif isinstance(v, str) and k in MICRO_KEYS:
            m = _MICRO_RE.match(v)
            if not m:
                raise TimeError('parsing time "%s" as "2006-01-02T15:04:05.000000Z07:00": cannot '
                                'parse "%s" as ".000000"' % (v, v[19:]))
            obj[k] = _utc(m.group(1), m.group(2), m.group(3))
        elif isinstance(v, (dict, list)):
            normalize_times(v)


# --- pod spec defaulting ---------------------------------------------------------


def _image_pull_policy(image):
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    if ":" not in last or last.endswith(":latest"):
        return "Always"
    return "IfNotPresent"


def default_container(c):
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if isinstance(c.get("image"), str) and "imagePullPolicy" not in c:
        c["imagePullPolicy"] = _image_pull_policy(c["image"])
    c.setdefault("resources", {})
    for p in c.get("ports") or []:
        if isinstance(p, dict):
            p.setdefault("protocol", "TCP")
    for e in c.get("env") or []:
        ref = isinstance(e, dict) and (e.get("valueFrom") or {}).get("fieldRef")
        if isinstance(ref, dict):
            ref.setdefault("apiVersion", "v1")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        pr = c.get(probe)
        if isinstance(pr, dict):
            pr.setdefault("timeoutSeconds", 1)
            pr.setdefault("periodSeconds", 10)
            pr.setdefault("successThreshold", 1)
            pr.setdefault("failureThreshold", 3)
            hg = pr.get("httpGet")
            if isinstance(hg, dict):
                hg.setdefault("path", "/")
                hg.setdefault("scheme", "HTTP")


def default_pod_spec(spec):
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                default_container(c)


def default_template(tmpl):
    if not isinstance(tmpl, dict):
        return
    meta = tmpl.setdefault("metadata", {})
    if isinstance(meta, dict) and "creationTimestamp" in meta and meta["creationTimestamp"] is None:
        del meta["creationTimestamp"]  # the zero time: left out, as 1.34 and later write it
    default_pod_spec(tmpl.setdefault("spec", {}))


# --- validation helpers -----------------------------------------------------------


SUBDOMAIN_DETAIL = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                    "characters, '-' or '.', and must start and end with an alphanumeric "
                    "character (e.g. 'example.com', regex used for validation is "
                    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_DETAIL = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-', and must start and end with an alphanumeric character (e.g. "
                "'my-name',  or '123-abc', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


def path_segment_errors(name):
    """What apimachinery's IsValidPathSegmentName says of a name (RBAC names
    only have to be usable as one path segment)."""
    if name in (".", ".."):
        return ["may not be '%s'" % name]
    return ["may not contain '%s'" % c for c in ("/", "%") if c in name]


def validate_labels(errs, labels, path):
    """A label map (metadata.labels, a Service's selector): qualified-name keys
    and label values, as ValidateLabels."""
    if not isinstance(labels, dict):
        errs.invalid(path, labels, "must be a map of strings")
        return
    for k, v in labels.items():
        for e in sel.qualified_name_errors(k):
            errs.invalid(path, k, e)
        if not isinstance(v, str):
            errs.invalid(path, v, "must be a string")
            continue
        for e in sel.label_value_errors(v):
            errs.invalid(path, v, e)


def validate_object_meta(errs, meta, namespaced, name_re=DNS1123_SUBDOMAIN, name_kind="subdomain",
                         name_errors=None):
    """name_errors(name), when given, replaces the name_re check."""
    if not isinstance(meta, dict):
        errs.required("metadata")
        return
    name = meta.get("name")
    if not name and not meta.get("generateName"):
        errs.required("metadata.name", "name or generateName is required")
    elif name and name_errors is not None:
        for msg in name_errors(name) if isinstance(name, str) else ["must be a string"]:
            errs.invalid("metadata.name", name, msg)
    elif name:
        if not isinstance(name, str) or not name_re.match(name) or len(name) > 253:
            errs.invalid("metadata.name", name,
                         LABEL_DETAIL if name_kind == "label" else SUBDOMAIN_DETAIL)
    validate_labels(errs, meta.get("labels") or {}, "metadata.labels")
    ann = meta.get("annotations") or {}
    if not isinstance(ann, dict):
        errs.invalid("metadata.annotations", ann, "must be a map of strings")
    else:
        total = 0
        for k, v in ann.items():
            for e in sel.qualified_name_errors(k.lower()):
                errs.invalid("metadata.annotations", k, e)
            if not isinstance(v, str):
                errs.invalid("metadata.annotations", v, "must be a string")
                continue
            total += len(k.encode()) + len(v.encode())  # bytes, as Go's len()
        if total > 256 * 1024:
            errs.items.append(("metadata.annotations", "FieldValueTooLong",
                               "Too long: may not be more than 262144 bytes"))
    controllers = 0
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        path = "metadata.ownerReferences[%d]" % i
        if not isinstance(ref, dict):
            errs.invalid(path, ref, "must be an object")
            continue
        for f in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(f):
                errs.required(path + "." + f if f != "uid" else "metadata.ownerReferences.uid",
                              "uid must not be empty" if f == "uid" else "")
        if ref.get("controller"):
            controllers += 1
    if controllers > 1:
        errs.invalid("metadata.ownerReferences", meta.get("ownerReferences"),
                     "Only one reference can have Controller set to true")
    for i, f in enumerate(meta.get("finalizers") or []):
        if not isinstance(f, str):
            errs.invalid("metadata.finalizers[%d]" % i, f, "must be a string")
            continue
        for e in sel.qualified_name_errors(f):
            errs.invalid("metadata.finalizers[%d]" % i, f, e)
    if namespaced is False and meta.get("namespace"):
        errs.forbidden("metadata.namespace", "not allowed on this type")


def validate_containers(errs, containers, path, required=True):
    if not containers:
        if required:
            errs.required(path)
        return
    if not isinstance(containers, list):
        errs.invalid(path, containers, "must be a list")
        return
    names = set()
    for i, c in enumerate(containers):
        p = "%s[%d]" % (path, i)
        if not isinstance(c, dict):
            errs.invalid(p, c, "must be an object")
            continue
        name = c.get("name")
        if not name:
            errs.required(p + ".name")
        elif not isinstance(name, str) or not DNS1123_LABEL.match(name) or len(name) > 63:
            errs.invalid(p + ".name", name, LABEL_DETAIL)
        elif name in names:
            errs.duplicate(p + ".name", name)
        names.add(name)
        if not c.get("image") or not isinstance(c.get("image"), str):
            errs.required(p + ".image")
        for j, port in enumerate(c.get("ports") or []):
            pp = "%s.ports[%d]" % (p, j)
            cp = port.get("containerPort") if isinstance(port, dict) else None
            if not isinstance(cp, int) or isinstance(cp, bool) or not 1 <= cp <= 65535:
                errs.invalid(pp + ".containerPort", cp,
                             "must be between 1 and 65535, inclusive")
            proto = port.get("protocol") if isinstance(port, dict) else None
            if proto not in ("TCP", "UDP", "SCTP"):
                errs.not_supported(pp + ".protocol", proto, ["SCTP", "TCP", "UDP"])
        policy = c.get("imagePullPolicy")
        if policy not in ("Always", "IfNotPresent", "Never"):
            errs.not_supported(p + ".imagePullPolicy", policy, ["Always", "IfNotPresent", "Never"])


def validate_pod_spec(errs, spec, path):
    if not isinstance(spec, dict):
        errs.required(path)
        return
    validate_containers(errs, spec.get("containers"), path + ".containers")
    validate_containers(errs, spec.get("initContainers"), path + ".initContainers", False)
    rp = spec.get("restartPolicy")
    if rp not in ("Always", "OnFailure", "Never"):
        errs.not_supported(path + ".restartPolicy", rp, ["Always", "OnFailure", "Never"])
    dp = spec.get("dnsPolicy")
    if dp not in ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"):
        errs.not_supported(path + ".dnsPolicy", dp,
                           ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"])
    tgp = spec.get("terminationGracePeriodSeconds")
    if tgp is not None and (not isinstance(tgp, int) or tgp < 0):
        errs.invalid(path + ".terminationGracePeriodSeconds", tgp,
                     "must be greater than or equal to 0")


def validate_template(errs, tmpl, selector, path):
    if not isinstance(tmpl, dict):
        errs.required(path)
        return
    labels = (tmpl.get("metadata") or {}).get("labels") or {}
    if selector is not None and not sel.selector_object_is_empty(selector):
        if not sel.selector_object_matches(selector, labels):
            errs.invalid(path + ".metadata.labels", go_labels(labels),
                         "`selector` does not match template `labels`")
    tmeta = tmpl.get("metadata") or {}
    tmp = FieldErrors()
    validate_object_meta(tmp, dict(tmeta, name=tmeta.get("name") or "x"), True)
    for f, r, m in tmp.items:
        errs.items.append((path + "." + f, r, m))
    spec = tmpl.get("spec")
    validate_pod_spec(errs, spec, path + ".spec")
    if isinstance(spec, dict) and spec.get("restartPolicy") not in (None, "Always"):
        errs.not_supported(path + ".spec.restartPolicy", spec.get("restartPolicy"), ["Always"])


def validate_nonneg(errs, value, path):
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        errs.invalid(path, value, "must be an integer")
    elif value < 0:
        errs.invalid(path, value, "must be greater than or equal to 0")


def validate_selector(errs, selector, path):
    if selector is None:
        errs.required(path)
        return
    if not isinstance(selector, dict):
        errs.invalid(path, selector, "must be a label selector")
        return
    if sel.selector_object_is_empty(selector):
        errs.invalid(path, go_selector(selector), "empty selector is invalid for deployment")
    for f, m in sel.selector_object_errors(selector, path):
        errs.items.append((f, "FieldValueInvalid", m))


def _bump_generation_if(new, old, changed):
    meta = new.setdefault("metadata", {})
    gen = (old.get("metadata") or {}).get("generation", 1)
    meta["generation"] = gen + 1 if changed else gen


# --- resources -----------------------------------------------------------------


class Resource:
    group = ""
    version = "v1"
    plural = ""
    singular = ""
    kind = ""
    namespaced = True
    short_names = ()
    categories = ()
    verbs = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    subresources = {}  # name -> (group, version, kind, verbs)
    field_labels = ()
    has_generation = False
    create_on_update = False
    return_deleted = False  # a delete that removes the object answers with it, not a Status
    review = False  # created and answered, never stored (TokenReview, SubjectAccessReview)

    @property
    def api_version(self):
        return "%s/%s" % (self.group, self.version) if self.group else self.version

    @property
    def qualified(self):
        """`deployments.apps` or `pods`, as used in error messages."""
        return "%s.%s" % (self.plural, self.group) if self.group else self.plural

    @property
    def qualified_kind(self):
        return "%s.%s" % (self.kind, self.group) if self.group else self.kind

    # Kinds without a field-label conversion of their own answer an unknown
    # field with the generic wording; the others with their own.
    generic_field_labels = False

    def supported_fields(self):
        base = {"metadata.name"}
        if self.namespaced:
            base.add("metadata.namespace")
        return base | set(self.field_labels)

    def unsupported_field(self, path):
        if self.generic_field_labels:
            return ('"%s" is not a known field selector: only "metadata.name", '
                    '"metadata.namespace"' % path)
        return "field label not supported: %s" % path

    def default(self, obj):
        pass

    def validate(self, obj, old):
        errs = FieldErrors()
        validate_object_meta(errs, obj.get("metadata"), self.namespaced)
        self.validate_spec(errs, obj, old)
        return errs

    def validate_spec(self, errs, obj, old):
        pass

    def allocate(self, obj, old, others):
        """Take from cluster-wide pools on create and main-resource update;
        others() lists the other stored objects. Returns field errors or None."""
        return None

    def prepare_create(self, obj):
        if self.has_generation:
            obj["metadata"]["generation"] = 1

    def prepare_update(self, new, old):
        """Main-resource update: the status block is kept from the stored object."""
        if "status" in old:
            new["status"] = copy.deepcopy(old["status"])
        else:
            new.pop("status", None)
        if self.has_generation:
            _bump_generation_if(new, old, new.get("spec") != old.get("spec"))

    def prepare_status_update(self, new, old):
        new["spec"] = copy.deepcopy(old.get("spec"))
        if new["spec"] is None:
            new.pop("spec")
        if self.has_generation:
            new["metadata"]["generation"] = old["metadata"].get("generation", 1)

    def discovery(self):
        out = [{
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }]
        if self.short_names:
            out[0]["shortNames"] = list(self.short_names)
        if self.categories:
            out[0]["categories"] = list(self.categories)
        for name, (group, version, kind, verbs) in sorted(self.subresources.items()):
            entry = {"name": "%s/%s" % (self.plural, name), "singularName": "",
                     "namespaced": self.namespaced, "kind": kind, "verbs": list(verbs)}
            if group is not None:
                entry["group"], entry["version"] = group, version
            out.append(entry)
        return out


class Namespaces(Resource):
    plural, singular, kind = "namespaces", "namespace", "Namespace"
    namespaced = False
    short_names = ("ns",)
    verbs = ("create", "delete", "get", "list", "patch", "update", "watch")
    subresources = {"status": (None, None, "Namespace", ("get", "patch", "update")),
                    "finalize": (None, None, "Namespace", ("update",))}
    field_labels = ("status.phase",)

    def default(self, obj):
        meta = obj.setdefault("metadata", {})
        if meta.get("name"):
            meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta["name"]

    def validate(self, obj, old):
        errs = FieldErrors()
        validate_object_meta(errs, obj.get("metadata"), False, DNS1123_LABEL, "label")
        name = (obj.get("metadata") or {}).get("name") or ""
        if len(name) > 63:
            errs.invalid("metadata.name", name, "must be no more than 63 characters")
        return errs

    def prepare_create(self, obj):
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}

    def prepare_update(self, new, old):
        new["spec"] = copy.deepcopy(old.get("spec"))
        new["status"] = copy.deepcopy(old.get("status"))


class Nodes(Resource):
    plural, singular, kind = "nodes", "node", "Node"
    namespaced = False
    short_names = ("no",)
    subresources = {"status": (None, None, "Node", ("get", "patch", "update"))}
    field_labels = ("spec.unschedulable",)

    def prepare_create(self, obj):
        obj.setdefault("spec", {})
        obj.setdefault("status", {})


class Pods(Resource):
    plural, singular, kind = "pods", "pod", "Pod"
    short_names = ("po",)
    categories = ("all",)
    return_deleted = True
    subresources = {"status": (None, None, "Pod", ("get", "patch", "update")),
                    "binding": (None, None, "Binding", ("create",))}
    field_labels = ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                    "spec.serviceAccountName", "spec.hostNetwork", "status.phase",
                    "status.podIP", "status.podIPs", "status.nominatedNodeName")

    def default(self, obj):
        spec = obj.get("spec")
        default_pod_spec(spec)
        if isinstance(spec, dict):
            # What admission adds to every pod (ServiceAccount, Priority,
            # DefaultTolerationSeconds) and PodSpec defaulting outside templates.
            spec.setdefault("serviceAccountName", "default")
            spec.setdefault("serviceAccount", spec["serviceAccountName"])
            _add_token_volume(spec)
            spec.setdefault("enableServiceLinks", True)
            spec.setdefault("priority", 0)
            spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
            tolerations = spec.setdefault("tolerations", [])
            if isinstance(tolerations, list):
                have = {t.get("key") for t in tolerations if isinstance(t, dict)}
                for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
                    if key not in have:
                        tolerations.append({"key": key, "operator": "Exists",
                                            "effect": "NoExecute", "tolerationSeconds": 300})

    def validate_spec(self, errs, obj, old):
        spec = obj.get("spec")
        validate_pod_spec(errs, spec, "spec")
        if old is not None and isinstance(spec, dict):
            a, b = _pod_spec_mutable_view(spec), _pod_spec_mutable_view(old.get("spec") or {})
            if a != b:
                errs.forbidden("spec", "pod updates may not change fields other than "
                               "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                               "`spec.activeDeadlineSeconds`, `spec.tolerations` (only additions "
                               "to existing tolerations) or "
                               "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if "
                               "it was previously negative)")

    def prepare_create(self, obj):
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj.get("spec") or {})}

    def prepare_update(self, new, old):
        new["status"] = copy.deepcopy(old.get("status"))

    def prepare_status_update(self, new, old):
        new["spec"] = copy.deepcopy(old.get("spec"))
        new["metadata"].pop("ownerReferences", None)
        if (old.get("metadata") or {}).get("ownerReferences"):
            new["metadata"]["ownerReferences"] = copy.deepcopy(old["metadata"]["ownerReferences"])


SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def _add_token_volume(spec):
    """The projected service-account token volume admission adds to pods."""
    if spec.get("automountServiceAccountToken") is False:
        return
    containers = [c for c in spec.get("containers") or [] if isinstance(c, dict)]
    if any(m.get("mountPath") == SA_MOUNT for c in containers
           for m in c.get("volumeMounts") or [] if isinstance(m, dict)):
        return
    import random
    name = "kube-api-access-" + "".join(random.choice("bcdfghjklmnpqrstvwxz2456789")
                                        for _ in range(5))
    volumes = spec.setdefault("volumes", [])
    if not isinstance(volumes, list):
        return
    volumes.append({"name": name, "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
        "defaultMode": 420}})
    for c in containers:
        c.setdefault("volumeMounts", []).append(
            {"name": name, "readOnly": True, "mountPath": SA_MOUNT})


def _pod_spec_mutable_view(spec):
    view = copy.deepcopy(spec)
    for key in ("containers", "initContainers"):
        for c in view.get(key) or []:
            if isinstance(c, dict):
                c.pop("image", None)
    view.pop("activeDeadlineSeconds", None)
    view.pop("tolerations", None)
    view.pop("terminationGracePeriodSeconds", None)
    # The scheduler's binding writes nodeName once.
    view.pop("nodeName", None)
    return view


def qos_class(spec):
    requests, limits, guaranteed = False, False, True
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        res = c.get("resources") or {} if isinstance(c, dict) else {}
        req = res.get("requests") or {}
        lim = res.get("limits") or {}
        if req or lim:
            requests = True
        if lim:
            limits = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and req[r] != lim[r]):
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


class Events(Resource):
    plural, singular, kind = "events", "event", "Event"
    short_names = ("ev",)
    create_on_update = True

    def default(self, obj):
        # Fields core/v1 Event serializes even when unset.
        for key, value in (("source", {}), ("firstTimestamp", None), ("lastTimestamp", None),
                           ("eventTime", None), ("reportingComponent", ""),
                           ("reportingInstance", "")):
            obj.setdefault(key, value)
    field_labels = ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                    "involvedObject.uid", "involvedObject.apiVersion",
                    "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
                    "reportingComponent", "source", "type")

    def validate_spec(self, errs, obj, old):
        inv = obj.get("involvedObject")
        ns = (obj.get("metadata") or {}).get("namespace")
        if not isinstance(inv, dict):
            errs.required("involvedObject")
            return
        if inv.get("namespace") and ns and inv["namespace"] != ns:
            errs.invalid("involvedObject.namespace", inv["namespace"],
                         "does not match event.namespace")


class Leases(Resource):
    group = "coordination.k8s.io"
    plural, singular, kind = "leases", "lease", "Lease"
    generic_field_labels = True

    def validate_spec(self, errs, obj, old):
        spec = obj.get("spec") or {}
        lds = spec.get("leaseDurationSeconds")
        if lds is not None and (not isinstance(lds, int) or lds <= 0):
            errs.invalid("spec.leaseDurationSeconds", lds, "must be greater than 0")
        lt = spec.get("leaseTransitions")
        if lt is not None and (not isinstance(lt, int) or lt < 0):
            errs.invalid("spec.leaseTransitions", lt, "must be greater than or equal to 0")


class ServiceAccounts(Resource):
    plural, singular, kind = "serviceaccounts", "serviceaccount", "ServiceAccount"
    short_names = ("sa",)
    generic_field_labels = True
    # The TokenRequest API (satokens.py): create only, answered and not stored.
    subresources = {"token": ("authentication.k8s.io", "v1", "TokenRequest", ("create",))}


# --- services -----------------------------------------------------------------------

# The cluster's single-stack IPv4 service range (--service-cluster-ip-range, as
# kubeadm sets it) and node port range (--service-node-port-range).
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/12")
KUBERNETES_SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service's, which is not created here
# Random allocations come from above the low bands that upstream's allocators
# keep for requested values (the first 256 addresses, the first 86 ports).
DYNAMIC_IPS = (int(SERVICE_CIDR.network_address) + 257, int(SERVICE_CIDR.broadcast_address) - 1)
NODE_PORTS = (30000, 32767)
DYNAMIC_NODE_PORT = 30086

SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
PORT_NAME_CHARS = re.compile(r"^[-a-z0-9]+$")
IP_DETAIL = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
PORT_RANGE_DETAIL = "must be between 1 and 65535, inclusive"


def dns1035_label_errors(name):
    """IsDNS1035Label: what a Service's name must be."""
    errs = ["must be no more than 63 characters"] if len(name) > 63 else []
    if not DNS1035_LABEL.match(name):
        errs.append("a DNS-1035 label must consist of lower case alphanumeric characters or "
                    "'-', start with an alphabetic character, and end with an alphanumeric "
                    "character (e.g. 'my-name',  or 'abc-123', regex used for validation is "
                    "'[a-z]([-a-z0-9]*[a-z0-9])?')")
    return errs


def port_name_errors(name):
    """IsValidPortName: an IANA service name, as a named targetPort."""
    errs = ["must be no more than 15 characters"] if len(name) > 15 else []
    if not PORT_NAME_CHARS.match(name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    elif not re.search("[a-z]", name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name.startswith("-") or name.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _port_number(value):
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


def _ip(value):
    try:
        return ipaddress.ip_address(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _ports(spec):
    ports = spec.get("ports")
    return [p for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []


def _needs_cluster_ip(spec):
    return spec.get("type") != "ExternalName"


def _needs_node_ports(spec):
    return spec.get("type") in ("NodePort", "LoadBalancer")


def _needs_health_check_port(spec):
    return spec.get("type") == "LoadBalancer" and spec.get("externalTrafficPolicy") == "Local"


def _externally_accessible(spec):
    return _needs_node_ports(spec) or spec.get("type") == "ClusterIP" and spec.get("externalIPs")


def _headless(spec):
    return spec.get("clusterIPs") == ["None"]


def _port_node_ports(spec):
    return {p["nodePort"] for p in _ports(spec) if p.get("nodePort")}


def _node_ports(spec):
    """The node ports a Service holds: its ports' and its health check's."""
    return _port_node_ports(spec) | ({spec["healthCheckNodePort"]}
                                     if spec.get("healthCheckNodePort") else set())


def _go_service_port(protocol, port):
    """The core.ServicePort key a duplicate port is reported with."""
    return GoRepr('core.ServicePort{Name:"", Protocol:%s, AppProtocol:(*string)(nil), Port:%s, '
                  'TargetPort:intstr.IntOrString{Type:0, IntVal:0, StrVal:""}, NodePort:0}'
                  % (_go_str(protocol or ""), port if isinstance(port, int) else 0))


def validate_cluster_ips(errs, spec):
    """ValidateServiceClusterIPsRelatedFields: clusterIP and clusterIPs agree,
    and hold valid addresses, at most one of each family."""
    ip, ips = spec.get("clusterIP") or "", spec.get("clusterIPs") or []
    if ip:
        if not ips:
            errs.required("spec.clusterIPs")
        elif ips[0] != ip:
            errs.invalid("spec.clusterIPs", go_strings(ips), "first value must match `clusterIP`")
    elif ips:
        errs.invalid("spec.clusterIPs", go_strings(ips),
                     "must be empty when `clusterIP` is not specified")
    seen = set()
    for i, family in enumerate(spec.get("ipFamilies") or []):
        if family not in ("IPv4", "IPv6"):
            errs.not_supported("spec.ipFamilies[%d]" % i, family, ["IPv4", "IPv6"])
        if family in seen:
            errs.duplicate("spec.ipFamilies[%d]" % i, family)
        seen.add(family)
    policy = spec.get("ipFamilyPolicy")
    if policy is not None and policy not in ("PreferDualStack", "RequireDualStack",
                                             "SingleStack"):
        errs.not_supported("spec.ipFamilyPolicy", policy,
                           ["PreferDualStack", "RequireDualStack", "SingleStack"])
    bad = False
    for i, value in enumerate(ips):
        if i == 0 and value == "None":
            if len(ips) > 1:
                bad = True
                errs.invalid("spec.clusterIPs", go_strings(ips),
                             "'None' must be the first and only value")
        elif _ip(value) is None:
            bad = True
            errs.invalid("spec.clusterIPs[%d]" % i, value, IP_DETAIL)
    if len(ips) > 2:
        errs.invalid("spec.clusterIPs", go_strings(ips), "may only hold up to 2 values")
    if bad or _headless(spec):
        return
    if len(ips) == 2 and _ip(ips[0]).version == _ip(ips[1]).version:
        errs.invalid("spec.clusterIPs", go_strings(ips),
                     "may specify no more than one IP for each IP family")
    for i, (value, family) in enumerate(zip(ips, spec.get("ipFamilies") or [])):
        version = _ip(value).version
        if family in ("IPv4", "IPv6") and family != "IPv%d" % version:
            errs.invalid("spec.clusterIPs[%d]" % i, value,
                         "expected an %s value as indicated by `ipFamilies[%d]`" % (family, i))


class Services(Resource):
    plural, singular, kind = "services", "service", "Service"
    short_names = ("svc",)
    categories = ("all",)
    subresources = {"status": (None, None, "Service", ("get", "patch", "update"))}
    field_labels = ("spec.clusterIP", "spec.type")
    create_on_update = True
    return_deleted = True

    def default(self, obj):
        """SetDefaults_Service, with Go's omitempty for the fields it drops."""
        spec = obj.setdefault("spec", {})
        if not isinstance(spec, dict):
            return
        if not spec.get("type"):
            spec["type"] = "ClusterIP"
        if not spec.get("sessionAffinity"):
            spec["sessionAffinity"] = "None"
        if spec["sessionAffinity"] == "None":
            spec.pop("sessionAffinityConfig", None)
        elif spec["sessionAffinity"] == "ClientIP":
            cfg = spec.get("sessionAffinityConfig")
            client = cfg.get("clientIP") if isinstance(cfg, dict) else None
            if not isinstance(client, dict) or client.get("timeoutSeconds") is None:
                spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
        for p in _ports(spec):
            if not p.get("protocol"):
                p["protocol"] = "TCP"
            if p.get("targetPort") in (None, 0, ""):
                p["targetPort"] = p.get("port", 0)
            _drop_empty(p, ("name",))
            if p.get("nodePort") == 0:
                del p["nodePort"]
        stype = spec["type"]
        if _externally_accessible(spec) and not spec.get("externalTrafficPolicy"):
            spec["externalTrafficPolicy"] = "Cluster"
        if spec.get("internalTrafficPolicy") is None and stype in ("ClusterIP", "NodePort",
                                                                   "LoadBalancer"):
            spec["internalTrafficPolicy"] = "Cluster"
        if stype == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is None:
            spec["allocateLoadBalancerNodePorts"] = True
        if stype == "ExternalName":
            # Read back without it, as upstream's read-time defaulting drops it.
            spec.pop("internalTrafficPolicy", None)
        _drop_empty(spec, ("clusterIP", "clusterIPs", "externalIPs", "externalName",
                           "externalTrafficPolicy", "ipFamilies"))
        if spec.get("healthCheckNodePort") == 0:
            del spec["healthCheckNodePort"]

    def allocate(self, obj, old, others):
        """The registry's BeginCreate/BeginUpdate: carry over what was allocated
        before when a client leaves it out, settle the IP families, then
        allocate the cluster IP and node ports."""
        spec = obj.get("spec")
        errs = FieldErrors()
        if not isinstance(spec, dict):
            return errs
        ospec = (old.get("spec") or {}) if old is not None else None
        if ospec is not None:
            if _needs_cluster_ip(ospec) and _needs_cluster_ip(spec):
                for f in ("clusterIP", "clusterIPs"):
                    if not spec.get(f) and ospec.get(f):
                        spec[f] = copy.deepcopy(ospec[f])
            if _needs_node_ports(ospec) and _needs_node_ports(spec):
                kept = _port_node_ports(spec) & _port_node_ports(ospec)
                by_name = {p.get("name", ""): p.get("nodePort") for p in _ports(ospec)}
                for p in _ports(spec):
                    np = by_name.get(p.get("name", ""))
                    if not p.get("nodePort") and np and np not in kept:
                        p["nodePort"] = np
            if _needs_health_check_port(ospec) and _needs_health_check_port(spec) and \
                    not spec.get("healthCheckNodePort"):
                spec["healthCheckNodePort"] = ospec.get("healthCheckNodePort")
            # A client that sent only the singular field changes both.
            if spec.get("clusterIP") != ospec.get("clusterIP") and spec.get("clusterIP") and \
                    spec.get("clusterIPs") == ospec.get("clusterIPs"):
                spec["clusterIPs"] = [spec["clusterIP"]]
        elif spec.get("clusterIP") and not spec.get("clusterIPs"):
            spec["clusterIPs"] = [spec["clusterIP"]]
        if not _needs_cluster_ip(spec):
            return errs
        self._init_families(errs, spec, ospec)
        if errs:
            return errs
        taken = [o.get("spec") or {} for o in others()]
        if not _headless(spec) and (ospec is None or not _needs_cluster_ip(ospec)):
            self._allocate_cluster_ip(errs, spec, taken)
        if _needs_node_ports(spec):
            self._allocate_node_ports(errs, spec, taken)
        return errs

    @staticmethod
    def _init_families(errs, spec, ospec):
        """initIPFamilyFields on a single-stack IPv4 cluster."""
        if spec.get("ipFamilyPolicy") is None:
            if ospec and ospec.get("ipFamilyPolicy"):
                spec["ipFamilyPolicy"] = ospec["ipFamilyPolicy"]
            elif spec.get("clusterIP") == "None" and not spec.get("selector"):
                spec["ipFamilyPolicy"] = "RequireDualStack"
            else:
                spec["ipFamilyPolicy"] = "SingleStack"
        validate_cluster_ips(errs, spec)
        if errs:
            return
        families = spec.setdefault("ipFamilies", [])
        ips = spec.get("clusterIPs") or []
        for i, value in enumerate(ips):
            if value == "None":
                break
            if i >= len(families):
                if _ip(value).version == 6:
                    errs.invalid("spec.clusterIPs[%d]" % i, go_strings(ips),
                                 "IPv6 is not configured on this cluster")
                else:
                    families.append("IPv4")
        if errs:
            return
        if spec.get("clusterIP") == "None" and not spec.get("selector"):
            # Headless without a selector: its endpoints may be of either family.
            if not families:
                families.append("IPv4")
            if len(families) < 2 and spec["ipFamilyPolicy"] != "SingleStack":
                families.append("IPv6" if families[0] == "IPv4" else "IPv4")
            return
        if spec["ipFamilyPolicy"] == "RequireDualStack":
            errs.invalid("spec.ipFamilyPolicy", spec["ipFamilyPolicy"],
                         "this cluster is not configured for dual-stack services")
        for i, family in enumerate(families):
            if family != "IPv4":
                errs.invalid("spec.ipFamilies[%d]" % i, family, "not configured on this cluster")
        if not families:
            families.append("IPv4")

    @staticmethod
    def _allocate_cluster_ip(errs, spec, taken):
        used = {KUBERNETES_SERVICE_IP}
        for other in taken:
            used.update(other.get("clusterIPs") or [])
        ips = spec.get("clusterIPs")
        if not ips:
            # The range holds about a million addresses: a free one turns up.
            while True:
                ip = str(ipaddress.ip_address(random.randint(*DYNAMIC_IPS)))
                if ip not in used:
                    break
            spec["clusterIP"], spec["clusterIPs"] = ip, [ip]
            return
        addr = _ip(ips[0])
        if addr not in SERVICE_CIDR or addr in (SERVICE_CIDR.network_address,
                                                SERVICE_CIDR.broadcast_address):
            why = ("the provided IP (%s) is not in the valid range. The range of valid IPs is %s"
                   % (ips[0], SERVICE_CIDR))
        elif str(addr) in used:
            why = "provided IP is already allocated"
        else:
            return
        errs.invalid("spec.clusterIPs", go_strings(ips),
                     "failed to allocate IP %s: %s" % (ips[0], why))

    @staticmethod
    def _allocate_node_ports(errs, spec, taken):
        used = set().union(*(_node_ports(o) for o in taken))
        by_port = {}  # service port -> node port: a port's protocols share one

        def reserve(value, path, port):
            if not isinstance(value, int) or not NODE_PORTS[0] <= value <= NODE_PORTS[1]:
                why = ("provided port is not in the valid range. The range of valid ports is "
                       "%d-%d" % NODE_PORTS)
            elif value in used and by_port.get(port) != value:
                why = "provided port is already allocated"
            else:
                used.add(value)
                by_port.setdefault(port, value)
                return
            errs.invalid(path, value, why)

        def take():
            free = [n for n in range(DYNAMIC_NODE_PORT, NODE_PORTS[1] + 1) if n not in used] or \
                [n for n in range(NODE_PORTS[0], DYNAMIC_NODE_PORT) if n not in used]
            if not free:
                raise InternalError("failed to allocate a nodePort: range is full")
            n = random.choice(free)
            used.add(n)
            return n

        ports = _ports(spec)
        allocate = spec["type"] == "NodePort" or spec.get("allocateLoadBalancerNodePorts") is True
        for i, p in enumerate(ports):
            if p.get("nodePort"):
                reserve(p["nodePort"], "spec.ports[%d].nodePort" % i, p.get("port"))
        for p in ports:
            if not p.get("nodePort") and allocate:
                p["nodePort"] = by_port.get(p.get("port")) or take()
                by_port.setdefault(p.get("port"), p["nodePort"])
        if not _needs_health_check_port(spec):
            return
        hc = spec.get("healthCheckNodePort")
        if not hc:
            spec["healthCheckNodePort"] = take()
        elif hc in used:
            raise InternalError("failed to allocate requested HealthCheck NodePort %s: provided "
                                "port is already allocated" % hc)

    def prepare_create(self, obj):
        obj["status"] = {"loadBalancer": {}}

    def prepare_update(self, new, old):
        super().prepare_update(new, old)
        spec, ospec = new.get("spec"), old.get("spec") or {}
        if not isinstance(spec, dict):
            return
        # dropTypeDependentFields: what the old type needed and the client
        # left as it was goes with a change of type.
        if _needs_cluster_ip(ospec) and not _needs_cluster_ip(spec):
            for f in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if spec.get(f) == ospec.get(f):
                    spec.pop(f, None)
        if _needs_node_ports(ospec) and not _needs_node_ports(spec) and \
                _port_node_ports(spec) <= _port_node_ports(ospec):
            for p in _ports(spec):
                p.pop("nodePort", None)
        if _needs_health_check_port(ospec) and not _needs_health_check_port(spec) and \
                spec.get("healthCheckNodePort") == ospec.get("healthCheckNodePort"):
            spec.pop("healthCheckNodePort", None)
        if ospec.get("type") == "LoadBalancer" and spec.get("type") != "LoadBalancer" and \
                spec.get("allocateLoadBalancerNodePorts") == \
                ospec.get("allocateLoadBalancerNodePorts"):
            spec.pop("allocateLoadBalancerNodePorts", None)
        if _needs_node_ports(ospec) and not _needs_node_ports(spec) and \
                spec.get("externalTrafficPolicy") == ospec.get("externalTrafficPolicy"):
            spec.pop("externalTrafficPolicy", None)
        if spec.get("type") != "LoadBalancer" and isinstance(new.get("status"), dict):
            new["status"]["loadBalancer"] = {}

    def validate(self, obj, old):
        errs = FieldErrors()
        validate_object_meta(errs, obj.get("metadata"), True, name_errors=dns1035_label_errors)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            errs.required("spec")
            return errs
        stype = spec.get("type")
        ospec = (old.get("spec") or {}) if old is not None else None
        if ospec is not None and _needs_cluster_ip(spec) and _needs_cluster_ip(ospec) and \
                not (_headless(spec) and _headless(ospec)):
            # validateUpgradeDowngradeClusterIPs, single-stack: the primary stays.
            ips, old_ips = spec.get("clusterIPs") or [], ospec.get("clusterIPs") or []
            for i, ip in enumerate(old_ips if len(ips) == len(old_ips) else old_ips[:1]):
                if ips[i:i + 1] != [ip]:
                    errs.invalid("spec.clusterIPs[%d]" % i, go_strings(ips),
                                 "may not change once set")
        ports = spec.get("ports")
        if ports is not None and not isinstance(ports, list):
            errs.invalid("spec.ports", ports, "must be a list")
            ports = []
        ports = ports or []
        if not ports and not _headless(spec) and stype != "ExternalName":
            errs.required("spec.ports")
        if stype in ("LoadBalancer", "NodePort") and _headless(spec):
            errs.invalid("spec.clusterIPs[0]", "None",
                         "may not be set to 'None' for %s services" % stype)
        elif stype == "ExternalName":
            for f in ("clusterIPs", "ipFamilies", "ipFamilyPolicy"):
                if spec.get(f):
                    errs.forbidden("spec." + f, "may not be set for ExternalName services")
            cname = spec.get("externalName") or ""
            cname = cname[:-1] if cname.endswith(".") else cname
            if not cname:
                errs.required("spec.externalName")
            elif len(cname) > 253:
                errs.invalid("spec.externalName", cname, "must be no more than 253 characters")
            elif not DNS1123_SUBDOMAIN.match(cname):
                errs.invalid("spec.externalName", cname, SUBDOMAIN_DETAIL)
        names = set()
        for i, p in enumerate(ports):
            self._validate_port(errs, p, len(ports) > 1, names, "spec.ports[%d]" % i)
        if spec.get("selector") is not None:
            validate_labels(errs, spec["selector"], "spec.selector")
        affinity = spec.get("sessionAffinity")
        if not affinity:
            errs.required("spec.sessionAffinity")
        elif affinity not in ("ClientIP", "None"):
            errs.not_supported("spec.sessionAffinity", affinity, ["ClientIP", "None"])
        elif affinity == "ClientIP":
            timeout = spec["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"]
            if not isinstance(timeout, int) or not 0 < timeout <= 86400:
                errs.invalid("spec.sessionAffinityConfig.clientIP.timeoutSeconds", timeout,
                             "must be greater than 0 and less than 86400")
        if stype != "ExternalName":
            validate_cluster_ips(errs, spec)
        for i, ip in enumerate(spec.get("externalIPs") or []):
            if _ip(ip) is None:
                errs.invalid("spec.externalIPs[%d]" % i, ip, IP_DETAIL)
        if not stype:
            errs.required("spec.type")
        elif stype not in SERVICE_TYPES:
            errs.not_supported("spec.type", stype, SERVICE_TYPES)
        seen_node_ports, seen_ports = set(), set()
        for i, p in enumerate(ports):
            if not isinstance(p, dict):
                continue
            path = "spec.ports[%d]" % i
            if p.get("nodePort"):
                if stype == "ClusterIP":
                    errs.forbidden(path + ".nodePort", "may not be used when `type` is 'ClusterIP'")
                if (p.get("protocol"), p["nodePort"]) in seen_node_ports:
                    errs.duplicate(path + ".nodePort", p["nodePort"])
                seen_node_ports.add((p.get("protocol"), p["nodePort"]))
            if (p.get("protocol"), p.get("port")) in seen_ports:
                errs.duplicate(path, _go_service_port(p.get("protocol"), p.get("port")))
            seen_ports.add((p.get("protocol"), p.get("port")))
        if spec.get("allocateLoadBalancerNodePorts") is not None and stype != "LoadBalancer":
            errs.forbidden("spec.allocateLoadBalancerNodePorts",
                           "may only be used when `type` is 'LoadBalancer'")
        self._validate_traffic_policies(errs, spec)
        return errs

    @staticmethod
    def _validate_port(errs, p, require_name, names, path):
        if not isinstance(p, dict):
            errs.invalid(path, p, "must be an object")
            return
        name = p.get("name") or ""
        if require_name and not name:
            errs.required(path + ".name")
        elif name:
            if len(name) > 63:
                errs.invalid(path + ".name", name, "must be no more than 63 characters")
            if not DNS1123_LABEL.match(name):
                errs.invalid(path + ".name", name, LABEL_DETAIL)
            if name in names:
                errs.duplicate(path + ".name", name)
            names.add(name)
        if not _port_number(p.get("port")):
            errs.invalid(path + ".port", p.get("port"), PORT_RANGE_DETAIL)
        proto = p.get("protocol")
        if not proto:
            errs.required(path + ".protocol")
        elif proto not in ("TCP", "UDP", "SCTP"):
            errs.not_supported(path + ".protocol", proto, ["SCTP", "TCP", "UDP"])
        target = p.get("targetPort")
        if isinstance(target, str):
            for msg in port_name_errors(target):
                errs.invalid(path + ".targetPort", target, msg)
        elif not _port_number(target):
            errs.invalid(path + ".targetPort", target, PORT_RANGE_DETAIL)
        if isinstance(p.get("appProtocol"), str):
            for msg in sel.qualified_name_errors(p["appProtocol"]):
                errs.invalid(path + ".appProtocol", p["appProtocol"], msg)

    @staticmethod
    def _validate_traffic_policies(errs, spec):
        external = spec.get("externalTrafficPolicy")
        if not _externally_accessible(spec):
            if external:
                errs.invalid("spec.externalTrafficPolicy", external,
                             "may only be set for externally-accessible services")
        elif not external:
            errs.required("spec.externalTrafficPolicy")
        elif external not in ("Cluster", "Local"):
            errs.not_supported("spec.externalTrafficPolicy", external, ["Cluster", "Local"])
        hc = spec.get("healthCheckNodePort")
        if not _needs_health_check_port(spec):
            if hc:
                errs.invalid("spec.healthCheckNodePort", hc, "may only be set when `type` is "
                             "'LoadBalancer' and `externalTrafficPolicy` is 'Local'")
        elif not hc:
            errs.required("spec.healthCheckNodePort")
        internal = spec.get("internalTrafficPolicy")
        if internal is None and spec.get("type") in ("ClusterIP", "NodePort", "LoadBalancer"):
            errs.required("spec.internalTrafficPolicy")
        elif internal is not None and internal not in ("Cluster", "Local"):
            errs.not_supported("spec.internalTrafficPolicy", internal, ["Cluster", "Local"])


class _AppsWorkload(Resource):
    group = "apps"
    has_generation = True
    generic_field_labels = True
    empty_status = {}
    # Status fields Go leaves out when zero (omitempty, not pointers).
    status_omitempty = ()

    # Spec fields Go leaves out when zero.
    spec_omitempty = ("minReadySeconds",)

    def default(self, obj):
        status = obj.get("status")
        if isinstance(status, dict):
            for f in self.status_omitempty:
                if status.get(f) in (0, None, [], {}) and f in status:
                    del status[f]
        spec = obj.get("spec")
        if isinstance(spec, dict):
            for f in self.spec_omitempty:
                if f in spec and spec[f] in (0, False, None):
                    del spec[f]

    def prepare_create(self, obj):
        super().prepare_create(obj)
        obj["status"] = copy.deepcopy(self.empty_status)

    def prepare_status_update(self, new, old):
        super().prepare_status_update(new, old)
        new["metadata"].pop("labels", None)
        if (old.get("metadata") or {}).get("labels") is not None:
            new["metadata"]["labels"] = copy.deepcopy(old["metadata"]["labels"])

    # Counts of the status that may not exceed another, as
    # ValidateReplicaSetStatus and ValidateDeploymentStatus say.
    status_counts = ()
    status_bounds = ()  # (count, bound, the bound's name in the message)

    def validate_status(self, errs, status):
        if not isinstance(status, dict):
            return
        for f in self.status_counts:
            validate_nonneg(errs, status.get(f), "status." + f)
        for f, bound, name in self.status_bounds:
            v, b = status.get(f, 0), status.get(bound, 0)
            if (isinstance(v, int) and isinstance(b, int) and not isinstance(v, bool)
                    and not isinstance(b, bool) and v > b):
                errs.invalid("status." + f, v, "cannot be greater than " + name)

    def validate_common(self, errs, obj, old):
        self.validate_status(errs, obj.get("status"))
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            errs.required("spec")
            return None
        validate_nonneg(errs, spec.get("replicas"), "spec.replicas")
        validate_nonneg(errs, spec.get("minReadySeconds"), "spec.minReadySeconds")
        selector = spec.get("selector")
        validate_selector(errs, selector, "spec.selector")
        validate_template(errs, spec.get("template"), selector if isinstance(selector, dict)
                          else None, "spec.template")
        if old is not None and (old.get("spec") or {}).get("selector") != selector:
            errs.invalid("spec.selector", go_selector(selector), "field is immutable")
        return spec


class Deployments(_AppsWorkload):
    plural, singular, kind = "deployments", "deployment", "Deployment"
    short_names = ("deploy",)
    categories = ("all",)
    subresources = {"status": (None, None, "Deployment", ("get", "patch", "update")),
                    "scale": ("autoscaling", "v1", "Scale", ("get", "patch", "update"))}

    # terminatingReplicas is a pointer: 0 is written
    status_omitempty = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                        "availableReplicas", "unavailableReplicas", "conditions")
    spec_omitempty = ("minReadySeconds", "paused")
    status_counts = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                     "availableReplicas", "unavailableReplicas", "terminatingReplicas",
                     "collisionCount")
    status_bounds = (("updatedReplicas", "replicas", "status.replicas"),
                     ("readyReplicas", "replicas", "status.replicas"),
                     ("availableReplicas", "replicas", "status.replicas"),
                     ("availableReplicas", "readyReplicas", "readyReplicas"))

    def default(self, obj):
        super().default(obj)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        spec.setdefault("replicas", 1)
        strategy = spec.setdefault("strategy", {})
        if isinstance(strategy, dict):
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                ru = strategy.setdefault("rollingUpdate", {})
                if isinstance(ru, dict):
                    ru.setdefault("maxUnavailable", "25%")
                    ru.setdefault("maxSurge", "25%")
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        default_template(spec.get("template"))

    def prepare_update(self, new, old):
        super().prepare_update(new, old)
        # A Deployment's generation also moves when its annotations change,
        # because the controller copies them to its ReplicaSets.
        if ((new.get("metadata") or {}).get("annotations") !=
                (old.get("metadata") or {}).get("annotations")):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1

    def validate_spec(self, errs, obj, old):
        spec = self.validate_common(errs, obj, old)
        if spec is None:
            return
        validate_nonneg(errs, spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit")
        strategy = spec.get("strategy") or {}
        stype = strategy.get("type")
        if stype not in ("Recreate", "RollingUpdate"):
            errs.not_supported("spec.strategy.type", stype, ["Recreate", "RollingUpdate"])
        ru = strategy.get("rollingUpdate")
        if stype == "Recreate" and ru is not None:
            errs.forbidden("spec.strategy.rollingUpdate",
                           "may not be specified when strategy `type` is 'Recreate'")
        if stype == "RollingUpdate":
            if not isinstance(ru, dict):
                errs.required("spec.strategy.rollingUpdate",
                              "this should be defaulted and never be nil")
            else:
                self._validate_rolling(errs, ru)
        pds = spec.get("progressDeadlineSeconds")
        if pds is not None:
            validate_nonneg(errs, pds, "spec.progressDeadlineSeconds")
            mrs = spec.get("minReadySeconds") or 0
            if isinstance(pds, int) and isinstance(mrs, int) and pds <= mrs:
                errs.invalid("spec.progressDeadlineSeconds", pds,
                             "must be greater than minReadySeconds")

    @staticmethod
    def _validate_rolling(errs, ru):
        values = {}
        for f in ("maxUnavailable", "maxSurge"):
            v = ru.get(f)
            path = "spec.strategy.rollingUpdate." + f
            if isinstance(v, bool) or not (v is None or isinstance(v, int) or
                                          (isinstance(v, str) and PERCENT.match(v))):
                errs.invalid(path, v, "a valid percent string must be a numeric string followed "
                             "by an ending '%' (e.g. '1%',  or '93%', regex used for validation "
                             "is '[0-9]+%')")
                continue
            if isinstance(v, int) and v < 0:
                errs.invalid(path, v, "must be greater than or equal to 0")
            if isinstance(v, str) and int(v[:-1]) > 100:
                errs.invalid(path, v, "must not be greater than 100%")
            values[f] = v
        mu, ms = values.get("maxUnavailable"), values.get("maxSurge")
        if "maxUnavailable" in values and "maxSurge" in values:
            if int_or_percent(mu or 0, 100, False) == 0 and int_or_percent(ms or 0, 100, True) == 0:
                errs.invalid("spec.strategy.rollingUpdate.maxUnavailable", go_intstr(mu),
                             "may not be 0 when `maxSurge` is 0")


class ReplicaSets(_AppsWorkload):
    plural, singular, kind = "replicasets", "replicaset", "ReplicaSet"
    short_names = ("rs",)
    categories = ("all",)
    subresources = {"status": (None, None, "ReplicaSet", ("get", "patch", "update")),
                    "scale": ("autoscaling", "v1", "Scale", ("get", "patch", "update"))}
    empty_status = {"replicas": 0}
    status_omitempty = ("fullyLabeledReplicas", "readyReplicas", "availableReplicas",
                        "observedGeneration", "conditions")  # terminatingReplicas: a pointer
    status_counts = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas",
                     "terminatingReplicas", "observedGeneration")
    status_bounds = (("fullyLabeledReplicas", "replicas", "status.replicas"),
                     ("readyReplicas", "replicas", "status.replicas"),
                     ("availableReplicas", "replicas", "status.replicas"),
                     ("availableReplicas", "readyReplicas", "readyReplicas"))

    def default(self, obj):
        super().default(obj)
        status = obj.get("status")
        if isinstance(status, dict):
            status.setdefault("replicas", 0)
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            return
        spec.setdefault("replicas", 1)
        default_template(spec.get("template"))

    def validate_spec(self, errs, obj, old):
        self.validate_common(errs, obj, old)


RBAC_GROUP = "rbac.authorization.k8s.io"


def go_strings(values):
    """A []string as Go's %#v prints it."""
    return GoRepr("[]string{%s}" % ", ".join(_go_str(v) for v in values))


def _string_list(errs, rule, key, path):
    value = rule.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errs.invalid(path + "." + key, value, "must be a list of strings")
        return []
    return value


def validate_policy_rule(errs, rule, namespaced, path):
    """As the rbac validation's validatePolicyRule."""
    if not isinstance(rule, dict):
        errs.invalid(path, rule, "must be an object")
        return
    verbs = _string_list(errs, rule, "verbs", path)
    groups = _string_list(errs, rule, "apiGroups", path)
    res = _string_list(errs, rule, "resources", path)
    names = _string_list(errs, rule, "resourceNames", path)
    urls = _string_list(errs, rule, "nonResourceURLs", path)
    if not verbs:
        errs.required(path + ".verbs", "verbs must contain at least one value")
    if urls:
        if namespaced:
            errs.invalid(path + ".nonResourceURLs", go_strings(urls),
                         "namespaced rules cannot apply to non-resource URLs")
        if groups or res or names:
            errs.invalid(path + ".nonResourceURLs", go_strings(urls),
                         "rules cannot apply to both regular resources and non-resource URLs")
        return
    if not groups:
        errs.required(path + ".apiGroups", "resource rules must supply at least one api group")
    if not res:
        errs.required(path + ".resources", "resource rules must supply at least one resource")


def _drop_empty(obj, keys):
    """Leave out what Go's omitempty leaves out."""
    for k in keys:
        if k in obj and obj[k] in ("", [], None):
            del obj[k]


class _Rbac(Resource):
    group = RBAC_GROUP
    generic_field_labels = True

    def validate(self, obj, old):
        errs = FieldErrors()
        validate_object_meta(errs, obj.get("metadata"), self.namespaced,
                             name_errors=path_segment_errors)
        self.validate_spec(errs, obj, old)
        return errs


class _Roles(_Rbac):
    def default(self, obj):
        # `rules` has no omitempty: an object without rules carries null.
        obj.setdefault("rules", None)
        for rule in obj["rules"] if isinstance(obj["rules"], list) else ():
            if isinstance(rule, dict):
                _drop_empty(rule, ("apiGroups", "resources", "resourceNames", "nonResourceURLs"))

    def validate_spec(self, errs, obj, old):
        rules = obj.get("rules")
        if rules is not None and not isinstance(rules, list):
            errs.invalid("rules", rules, "must be a list of rules")
            return
        for i, rule in enumerate(rules or []):
            validate_policy_rule(errs, rule, self.namespaced, "rules[%d]" % i)


class ClusterRoles(_Roles):
    plural, singular, kind = "clusterroles", "clusterrole", "ClusterRole"
    namespaced = False

    def validate_spec(self, errs, obj, old):
        super().validate_spec(errs, obj, old)
        agg = obj.get("aggregationRule")
        if agg is not None and not (agg.get("clusterRoleSelectors")
                                    if isinstance(agg, dict) else None):
            errs.required("aggregationRule.clusterRoleSelectors",
                          "at least one clusterRoleSelector required if aggregationRule is "
                          "non-nil")


class Roles(_Roles):
    plural, singular, kind = "roles", "role", "Role"


class _Bindings(_Rbac):
    role_kinds = ("Role", "ClusterRole")

    def default(self, obj):
        ref = obj.get("roleRef")
        if not isinstance(ref, dict):
            ref = obj["roleRef"] = {}
        if not ref.get("apiGroup"):
            ref["apiGroup"] = RBAC_GROUP
        subjects = obj.get("subjects")
        for s in subjects if isinstance(subjects, list) else ():
            if not isinstance(s, dict):
                continue
            if not s.get("apiGroup") and s.get("kind") in ("User", "Group"):
                s["apiGroup"] = RBAC_GROUP
            _drop_empty(s, ("apiGroup", "namespace"))
        _drop_empty(obj, ("subjects",))

    @staticmethod
    def role_ref(obj):
        ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
        return tuple(ref.get(k) or "" for k in ("apiGroup", "kind", "name"))

    def validate_spec(self, errs, obj, old):
        group, kind, name = self.role_ref(obj)
        if group != RBAC_GROUP:
            errs.not_supported("roleRef.apiGroup", group, [RBAC_GROUP])
        if kind not in self.role_kinds:
            errs.not_supported("roleRef.kind", kind, list(self.role_kinds))
        if not name:
            errs.required("roleRef.name")
        else:
            for msg in path_segment_errors(name):
                errs.invalid("roleRef.name", name, msg)
        subjects = obj.get("subjects")
        if subjects is not None and not isinstance(subjects, list):
            errs.invalid("subjects", subjects, "must be a list of subjects")
            subjects = []
        for i, s in enumerate(subjects or []):
            self._validate_subject(errs, s, "subjects[%d]" % i)
        if old is not None and self.role_ref(old) != (group, kind, name):
            errs.invalid("roleRef", GoRepr('rbac.RoleRef{APIGroup:%s, Kind:%s, Name:%s}'
                                           % (_go_str(group), _go_str(kind), _go_str(name))),
                         "cannot change roleRef")

    def _validate_subject(self, errs, s, path):
        if not isinstance(s, dict):
            errs.invalid(path, s, "must be an object")
            return
        name, kind, group = (s.get(k) or "" for k in ("name", "kind", "apiGroup"))
        if not name:
            errs.required(path + ".name")
        if kind == "ServiceAccount":
            if name and (not DNS1123_SUBDOMAIN.match(name) or len(name) > 253):
                errs.invalid(path + ".name", name, SUBDOMAIN_DETAIL if len(name) <= 253
                             else "must be no more than 253 characters")
            if group:
                errs.not_supported(path + ".apiGroup", group, [""])
            if not self.namespaced and not s.get("namespace"):
                errs.required(path + ".namespace")
        elif kind in ("User", "Group"):
            if not name:
                errs.invalid(path + ".name", name, "%s name cannot be empty" % kind.lower())
            if group != RBAC_GROUP:
                errs.not_supported(path + ".apiGroup", group, [RBAC_GROUP])
        else:
            errs.not_supported(path + ".kind", kind, ["ServiceAccount", "User", "Group"])


class ClusterRoleBindings(_Bindings):
    plural, singular, kind = "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding"
    namespaced = False
    role_kinds = ("ClusterRole",)


class RoleBindings(_Bindings):
    plural, singular, kind = "rolebindings", "rolebinding", "RoleBinding"


class _Review(Resource):
    namespaced = False
    verbs = ("create",)
    review = True


class TokenReviews(_Review):
    group = "authentication.k8s.io"
    plural, singular, kind = "tokenreviews", "tokenreview", "TokenReview"


class SubjectAccessReviews(_Review):
    group = "authorization.k8s.io"
    plural, singular, kind = ("subjectaccessreviews", "subjectaccessreview",
                              "SubjectAccessReview")


ALL = [Namespaces(), Nodes(), Pods(), Events(), Leases(), ServiceAccounts(), Services(),
       Deployments(), ReplicaSets(), ClusterRoles(), ClusterRoleBindings(), Roles(),
       RoleBindings(), TokenReviews(), SubjectAccessReviews()]
BY_PATH = {(r.group, r.version, r.plural): r for r in ALL}
BY_KIND = {(r.api_version, r.kind): r for r in ALL}
BY_PLURAL = {r.plural: r for r in ALL}


def groups():
    """[(group, version)] in the order discovery lists them."""
    out = []
    for r in ALL:
        gv = (r.group, r.version)
        if gv not in out:
            out.append(gv)
    return out
