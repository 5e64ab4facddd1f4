"""Authorization as kube-apiserver does it with --authorization-mode=RBAC:
members of system:masters may do everything; everyone else may do what the
rules of the Roles and ClusterRoles bound to them allow.

A request is first described by its attributes as the apiserver's
RequestInfoFactory parses them (verb, API group, namespace, resource,
subresource, name; or, for other paths, the lowercase HTTP method and the
path), then checked against every rule reachable through the
ClusterRoleBindings and, in the request's namespace, the RoleBindings whose
subjects name the user, one of its groups, or its service account. A denial
is answered with the 403 Status kube-apiserver sends.

The default ClusterRoles and ClusterRoleBindings that make discovery,
/version and the health paths readable, cluster-admin, system:monitoring,
system:auth-delegator, system:kube-controller-manager and the roles of the
deployment and replicaset controllers' ServiceAccounts are created at
start, as the apiserver's RBAC bootstrap does. SubjectAccessReviews (reviews.py) are answered by the same
authorizer.
"""

import copy
import json
import urllib.parse

import resources
import selector as sel
from api import ApiError, details

PRIVILEGED_GROUP = "system:masters"
SA_PREFIX = "system:serviceaccount:"
SPECIAL_VERBS = ("proxy", "watch")
NAMESPACE_SUBRESOURCES = ("status", "finalize")


class Attributes:
    """What authorization sees of a request (authorizer.Attributes)."""

    __slots__ = ("resource_request", "path", "verb", "group", "version", "namespace",
                 "resource", "subresource", "name")

    def __init__(self, path, verb):
        self.resource_request = False
        self.path, self.verb = path, verb
        self.group = self.version = self.namespace = ""
        self.resource = self.subresource = self.name = ""


class _AnyField:
    """Every field path is accepted: the name is read from the selector before
    the resource's own field labels are checked."""

    def __contains__(self, path):
        return True


def request_attributes(method, path, raw_query=""):
    """Parse a request as kube-apiserver's RequestInfoFactory does. Raises
    ValueError for a special-verb path without a resource."""
    url = path + ("?" + raw_query if raw_query else "")
    path = urllib.parse.unquote(path)
    attrs = Attributes(path, method.lower())
    parts = path.strip("/").split("/") if path.strip("/") else []
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return attrs
    prefix, parts = parts[0], parts[1:]
    if prefix == "apis":
        if len(parts) < 3:
            return attrs
        attrs.group, parts = parts[0], parts[1:]
    attrs.resource_request = True
    attrs.version, parts = parts[0], parts[1:]
    if parts[0] in SPECIAL_VERBS:
        if len(parts) < 2:
            raise ValueError("unable to determine kind and namespace from url, %s" % url)
        attrs.verb, parts = parts[0], parts[1:]
    else:
        attrs.verb = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update",
                      "PATCH": "patch", "DELETE": "delete"}.get(method, "")
    if parts[0] == "namespaces":
        if len(parts) > 1:
            attrs.namespace = parts[1]
            if len(parts) > 2 and parts[2] not in NAMESPACE_SUBRESOURCES:
                parts = parts[2:]
    if len(parts) >= 3 and attrs.verb != "proxy":
        attrs.subresource = parts[2]
    if len(parts) >= 2:
        attrs.name = parts[1]
    attrs.resource = parts[0]
    if not attrs.name and attrs.verb == "get":
        query = urllib.parse.parse_qs(raw_query, keep_blank_values=True)
        watch = query.get("watch")
        # Any value but 0 or false means true, as the query parameter codec reads it.
        if watch and not (watch[0] == "0" or watch[0].lower() == "false"):
            attrs.verb = "watch"
        else:
            attrs.verb = "list"
        # A list or watch of one object by field selector is a request for that name.
        selected = query.get("fieldSelector")
        if selected:
            try:
                terms = sel.parse_field_selector(selected[0], _AnyField(), str)
            except sel.SelectorError:
                terms = []
            for field, op, value in terms:
                if field == "metadata.name" and op == "=":
                    if not resources.path_segment_errors(value):
                        attrs.name = value
                    break
    if not attrs.name and attrs.verb == "delete":
        attrs.verb = "deletecollection"
    return attrs


# --- rule matching (rbac/v1 evaluation helpers) ------------------------------------


def _has(rule, key, value, wildcard="*"):
    values = rule.get(key) or []
    return wildcard in values or value in values


def _resource_matches(rule, combined, subresource):
    for r in rule.get("resources") or []:
        if r == "*" or r == combined:
            return True
        # "*/scale" matches the scale subresource of every resource.
        if subresource and r == "*/" + subresource:
            return True
    return False


def _url_matches(rule, path):
    for u in rule.get("nonResourceURLs") or []:
        if u == "*" or u == path:
            return True
        if u.endswith("*") and path.startswith(u.rstrip("*")):
            return True
    return False


def rule_allows(attrs, rule):
    if not _has(rule, "verbs", attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule, attrs.path)
    combined = attrs.resource + ("/" + attrs.subresource if attrs.subresource else "")
    names = rule.get("resourceNames") or []
    return (_has(rule, "apiGroups", attrs.group)
            and _resource_matches(rule, combined, attrs.subresource)
            and (not names or attrs.name in names))


def _describe_subject(subject, binding_ns):
    """As rbac's describeSubject: a service account as NAME/NAMESPACE."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        return "%s %s" % (kind, _q("%s/%s" % (name, subject.get("namespace") or binding_ns)))
    return "%s %s" % (kind, _q(name))


def _describe_source(binding, subject, binding_ns):
    """What allowed a request, as the binding describers' String() words it
    (a RoleBinding as NAME/NAMESPACE)."""
    ref = binding.get("roleRef") or {}
    name = binding["metadata"]["name"]
    if binding_ns:
        kind, name = "RoleBinding", "%s/%s" % (name, binding_ns)
    else:
        kind = "ClusterRoleBinding"
    return "%s %s of %s %s to %s" % (kind, _q(name), ref.get("kind"), _q(ref.get("name")),
                                     _describe_subject(subject, binding_ns))


def _applies(subject, user, groups, namespace):
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user == name
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        # A RoleBinding's service accounts default to the binding's namespace.
        ns = subject.get("namespace") or namespace
        return bool(ns) and user == "%s%s:%s" % (SA_PREFIX, ns, name)
    return False


class Authorizer:
    def __init__(self, api):
        self.api = api

    def _role_rules(self, ref, namespace):
        """The rules a roleRef points at; raises LookupError as the listers do."""
        kind, name = ref.get("kind"), ref.get("name")
        if kind == "Role":
            entry = self.api.store.get("roles", (namespace, name))
        elif kind == "ClusterRole":
            entry = self.api.store.get("clusterroles", ("", name))
        else:
            raise LookupError('unsupported role reference kind: "%s"' % kind)
        if entry is None:
            raise LookupError('%s.%s "%s" not found' % (kind.lower(), resources.RBAC_GROUP, name))
        return entry.obj.get("rules") or []

    def visit_rules(self, user, groups, namespace):
        """Yield (rule, source, error) for every rule bound to the user at
        the cluster scope and, with a namespace, in that namespace; source
        describes the binding and subject that bring the rule."""
        store = self.api.store
        scopes = [("clusterrolebindings", None, "")]
        if namespace:
            scopes.append(("rolebindings", namespace, namespace))
        for plural, selector_ns, binding_ns in scopes:
            for _, entry in sorted(store.items(plural, selector_ns), key=lambda kv: kv[0]):
                binding = entry.obj
                subject = next((s for s in binding.get("subjects") or []
                                if isinstance(s, dict) and _applies(s, user, groups, binding_ns)),
                               None)
                if subject is None:
                    continue
                try:
                    rules = self._role_rules(binding.get("roleRef") or {}, binding_ns)
                except LookupError as e:
                    yield None, None, str(e)
                    continue
                for rule in rules:
                    if isinstance(rule, dict):
                        yield rule, (binding, subject, binding_ns), None

    def authorize(self, user, groups, attrs):
        """(allowed, reason), as the privileged-group and RBAC authorizers
        answer: an allowing reason names the binding, a refusing one the
        roles that could not be found."""
        if PRIVILEGED_GROUP in groups:
            return True, ""
        errors = []
        with self.api.lock:
            for rule, source, err in self.visit_rules(user, groups, attrs.namespace):
                if rule is not None and rule_allows(attrs, rule):
                    return True, "RBAC: allowed by " + _describe_source(*source)
                if err:
                    errors.append(err)
        if not errors:
            return False, ""
        return False, "RBAC: " + _aggregate(errors)


def _aggregate(messages):
    """Render errors as apimachinery's aggregate error does."""
    if len(messages) == 1:
        return messages[0]
    seen = []
    for m in messages:
        if m not in seen:
            seen.append(m)
    return seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"


def _q(text):
    """Go's %q for the strings that appear here."""
    return json.dumps(text, ensure_ascii=False)


def forbidden(user, attrs, reason=""):
    """The 403 kube-apiserver answers a request its authorizers did not allow."""
    if attrs.resource_request:
        target = attrs.resource + ("/" + attrs.subresource if attrs.subresource else "")
        scope = ("in the namespace %s" % _q(attrs.namespace) if attrs.namespace
                 else "at the cluster scope")
        why = "User %s cannot %s resource %s in API group %s %s" % (
            _q(user), attrs.verb, _q(target), _q(attrs.group), scope)
    else:
        why = "User %s cannot %s path %s" % (_q(user), attrs.verb, _q(attrs.path))
    if reason:
        why += ": " + reason
    if not attrs.resource_request:
        return ApiError(403, "Forbidden", "forbidden: " + why, {})
    qualified = attrs.resource + ("." + attrs.group if attrs.group else "")
    subject = qualified + (" %s" % _q(attrs.name) if attrs.name else "")
    return ApiError(403, "Forbidden", "%s is forbidden: %s" % (subject, why),
                    details(name=attrs.name, group=attrs.group, kind=attrs.resource))


# --- the default policy -------------------------------------------------------------

_DEFAULT_META = {"labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
                 "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}}

BOOTSTRAP_CLUSTER_ROLES = {
    "cluster-admin": [
        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
        {"verbs": ["*"], "nonResourceURLs": ["*"]}],
    "system:discovery": [
        {"verbs": ["get"], "nonResourceURLs": [
            "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
            "/openapi/*", "/readyz", "/version", "/version/"]}],
    "system:basic-user": [
        {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
         "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
        {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
         "resources": ["selfsubjectreviews"]}],
    "system:public-info-viewer": [
        {"verbs": ["get"], "nonResourceURLs": [
            "/healthz", "/livez", "/readyz", "/version", "/version/"]}],
    # For servers that delegate authentication and authorization here; bound
    # by whoever runs one (no default binding).
    "system:auth-delegator": [
        {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
         "resources": ["tokenreviews"]},
        {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
         "resources": ["subjectaccessreviews"]}],
    "system:monitoring": [
        {"verbs": ["get"], "nonResourceURLs": [
            "/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis",
            "/readyz", "/readyz/*"]}],
}

# eventsRule() of upstream's bootstrap policy.
_EVENTS_RULE = {"verbs": ["create", "patch", "update"], "apiGroups": ["", "events.k8s.io"],
                "resources": ["events"]}

# The controllers' roles, as bootstrappolicy's controller_policy.go has them
# (rules sorted as its PolicyRuleBuilder sorts them), each bound to the
# ServiceAccount kube-system/NAME that --use-service-account-credentials
# gives the controller.
CONTROLLER_ROLE_PREFIX = "system:controller:"
CONTROLLER_ROLES = {
    "deployment-controller": [
        {"verbs": ["get", "list", "update", "watch"], "apiGroups": ["apps", "extensions"],
         "resources": ["deployments"]},
        {"verbs": ["update"], "apiGroups": ["apps", "extensions"],
         "resources": ["deployments/status"]},
        {"verbs": ["update"], "apiGroups": ["apps", "extensions"],
         "resources": ["deployments/finalizers"]},
        {"verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
         "apiGroups": ["apps", "extensions"], "resources": ["replicasets"]},
        {"verbs": ["get", "list", "update", "watch"], "apiGroups": [""], "resources": ["pods"]},
        _EVENTS_RULE],
    "replicaset-controller": [
        {"verbs": ["get", "list", "update", "watch"], "apiGroups": ["apps", "extensions"],
         "resources": ["replicasets"]},
        {"verbs": ["update"], "apiGroups": ["apps", "extensions"],
         "resources": ["replicasets/status"]},
        {"verbs": ["update"], "apiGroups": ["apps", "extensions"],
         "resources": ["replicasets/finalizers"]},
        {"verbs": ["create", "delete", "list", "patch", "watch"], "apiGroups": [""],
         "resources": ["pods"]},
        _EVENTS_RULE],
}
CONTROLLER_NAMESPACE = "kube-system"

# What system:kube-controller-manager (policy.go) grants for leader election,
# the controllers' ServiceAccounts and their tokens, reviews and informers.
BOOTSTRAP_CLUSTER_ROLES["system:kube-controller-manager"] = [
    _EVENTS_RULE,
    {"verbs": ["create"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"]},
    {"verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "resourceNames": ["kube-controller-manager"]},
    {"verbs": ["create"], "apiGroups": [""], "resources": ["endpoints"]},
    {"verbs": ["get", "update"], "apiGroups": [""], "resources": ["endpoints"],
     "resourceNames": ["kube-controller-manager"]},
    {"verbs": ["create"], "apiGroups": [""], "resources": ["secrets", "serviceaccounts"]},
    {"verbs": ["delete"], "apiGroups": [""], "resources": ["secrets"]},
    {"verbs": ["get"], "apiGroups": [""],
     "resources": ["configmaps", "namespaces", "secrets", "serviceaccounts"]},
    {"verbs": ["update"], "apiGroups": [""], "resources": ["secrets", "serviceaccounts"]},
    {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"]},
    {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
     "resources": ["subjectaccessreviews"]},
    {"verbs": ["list", "watch"], "apiGroups": ["*"], "resources": ["*"]},
    {"verbs": ["create"], "apiGroups": [""], "resources": ["serviceaccounts/token"]}]
for _name, _rules in CONTROLLER_ROLES.items():
    BOOTSTRAP_CLUSTER_ROLES[CONTROLLER_ROLE_PREFIX + _name] = _rules

BOOTSTRAP_CLUSTER_ROLE_BINDINGS = {
    "cluster-admin": ["system:masters"],
    "system:discovery": ["system:authenticated"],
    "system:basic-user": ["system:authenticated"],
    "system:public-info-viewer": ["system:authenticated", "system:unauthenticated"],
    "system:monitoring": ["system:monitoring"],
    "system:kube-controller-manager": [{"kind": "User", "apiGroup": resources.RBAC_GROUP,
                                        "name": "system:kube-controller-manager"}],
}
for _name in CONTROLLER_ROLES:
    BOOTSTRAP_CLUSTER_ROLE_BINDINGS[CONTROLLER_ROLE_PREFIX + _name] = [
        {"kind": "ServiceAccount", "name": _name, "namespace": CONTROLLER_NAMESPACE}]


def bootstrap(api):
    """Create the default ClusterRoles and ClusterRoleBindings (those kept
    from before a restart stay as they are)."""
    roles = resources.BY_PLURAL["clusterroles"]
    bindings = resources.BY_PLURAL["clusterrolebindings"]
    for name, rules in BOOTSTRAP_CLUSTER_ROLES.items():
        if api.store.get(roles.plural, ("", name)):
            continue
        api.create(roles, "", {"kind": "ClusterRole", "apiVersion": roles.api_version,
                               "metadata": dict(copy.deepcopy(_DEFAULT_META), name=name),
                               "rules": copy.deepcopy(rules)})
    for name, subjects in BOOTSTRAP_CLUSTER_ROLE_BINDINGS.items():
        if api.store.get(bindings.plural, ("", name)):
            continue
        api.create(bindings, "", {
            "kind": "ClusterRoleBinding", "apiVersion": bindings.api_version,
            "metadata": dict(copy.deepcopy(_DEFAULT_META), name=name),
            "roleRef": {"apiGroup": resources.RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [s if isinstance(s, dict) else
                         {"kind": "Group", "apiGroup": resources.RBAC_GROUP, "name": s}
                         for s in copy.deepcopy(subjects)]})


def service_account_identity(namespace, name):
    """The user and groups a service account's token authenticates as."""
    return ("%s%s:%s" % (SA_PREFIX, namespace, name),
            ["system:serviceaccounts", "system:serviceaccounts:" + namespace,
             "system:authenticated"])
