"""Server-side printing: meta.k8s.io/v1 Table responses, which `kubectl get`
asks for and prints. Columns, their order, types and priorities follow the
upstream printers; priority 1 columns are the ones `-o wide` adds.
"""

import time

import selector as sel
from api import parse_rfc3339


def human_duration(seconds):
    """Render an age the way apimachinery's HumanDuration does."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return "%ds" % s
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return "%dm" % minutes if rest == 0 else "%dm%ds" % (minutes, rest)
    if minutes < 180:
        return "%dm" % minutes
    hours = s // 3600
    if hours < 8:
        rest = minutes % 60
        return "%dh" % hours if rest == 0 else "%dh%dm" % (hours, rest)
    if hours < 48:
        return "%dh" % hours
    if hours < 24 * 8:
        rest = hours % 24
        return "%dd" % (hours // 24) if rest == 0 else "%dd%dh" % (hours // 24, rest)
    if hours < 24 * 365 * 2:
        return "%dd" % (hours // 24)
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return "%dy" % years if days == 0 else "%dy%dd" % (years, days)
    return "%dy" % (hours // 24 // 365)


def age(ts):
    t = parse_rfc3339(ts)
    if t is None:
        return "<unknown>"
    return human_duration(time.time() - t)


def _col(name, ctype, desc, priority=0, fmt=""):
    return {"name": name, "type": ctype, "format": fmt, "description": desc, "priority": priority}


NAME = _col("Name", "string", "Name of the object, unique within its namespace.", fmt="name")
AGE = _col("Age", "string", "Time since the object was created.")


def _containers(spec):
    return spec.get("containers") or []


def _names(spec):
    return ",".join(c.get("name", "") for c in _containers(spec))


def _images(spec):
    return ",".join(c.get("image", "") for c in _containers(spec))


def _selector(spec):
    s = sel.selector_object_string(spec.get("selector"))
    return s or "<none>"


# Deployments and ReplicaSets end with the same wide columns.
WORKLOAD_WIDE = [
    _col("Containers", "string", "Names of the containers in the template.", 1),
    _col("Images", "string", "Images of the containers in the template.", 1),
    _col("Selector", "string", "Label selector of the pods.", 1),
]


def _workload_row(o, counts):
    spec = o.get("spec") or {}
    tspec = (spec.get("template") or {}).get("spec") or {}
    return ([o["metadata"]["name"]] + counts + [age(o["metadata"].get("creationTimestamp")),
                                                 _names(tspec), _images(tspec), _selector(spec)])


def deployment_row(o):
    spec, status = o.get("spec") or {}, o.get("status") or {}
    return _workload_row(o, ["%d/%d" % (status.get("readyReplicas", 0), spec.get("replicas", 0)),
                             status.get("updatedReplicas", 0),
                             status.get("availableReplicas", 0)])


DEPLOYMENT_COLUMNS = [
    NAME,
    _col("Ready", "string", "Ready pods out of the desired replicas."),
    _col("Up-to-date", "string", "Pods that run the current template."),
    _col("Available", "string", "Pods ready for at least minReadySeconds."),
    AGE,
] + WORKLOAD_WIDE


def replicaset_row(o):
    spec, status = o.get("spec") or {}, o.get("status") or {}
    return _workload_row(o, [spec.get("replicas", 0), status.get("replicas", 0),
                             status.get("readyReplicas", 0)])


REPLICASET_COLUMNS = [
    NAME,
    _col("Desired", "integer", "Number of replicas wanted."),
    _col("Current", "integer", "Number of replicas that exist."),
    _col("Ready", "integer", "Number of ready replicas."),
    AGE,
] + WORKLOAD_WIDE


def pod_status_reason(o):
    status = o.get("status") or {}
    reason = status.get("reason") or status.get("phase") or ""
    ready, running = 0, False
    init_busy = False
    inits = status.get("initContainerStatuses") or []
    for i, cs in enumerate(inits):
        state = cs.get("state") or {}
        term = state.get("terminated")
        if term and term.get("exitCode") == 0:
            continue
        init_busy = True
        if term:
            reason = "Init:" + (term.get("reason") or "ExitCode:%d" % term.get("exitCode", 0))
        elif (state.get("waiting") or {}).get("reason") not in (None, "", "PodInitializing"):
            reason = "Init:" + state["waiting"]["reason"]
        else:
            reason = "Init:%d/%d" % (i, len(inits))
        break
    if not init_busy:
        for cs in reversed(status.get("containerStatuses") or []):
            state = cs.get("state") or {}
            if (state.get("waiting") or {}).get("reason"):
                reason = state["waiting"]["reason"]
            elif state.get("terminated"):
                term = state["terminated"]
                reason = term.get("reason") or (
                    "Signal:%d" % term["signal"] if term.get("signal")
                    else "ExitCode:%d" % term.get("exitCode", 0))
            elif cs.get("ready") and state.get("running"):
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running"
    if o["metadata"].get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    return reason, ready


def pod_row(o):
    spec, status = o.get("spec") or {}, o.get("status") or {}
    reason, ready = pod_status_reason(o)
    restarts = sum(cs.get("restartCount", 0) for cs in status.get("containerStatuses") or [])
    gates = spec.get("readinessGates") or []
    return [o["metadata"]["name"], "%d/%d" % (ready, len(_containers(spec))), reason,
            str(restarts), age(o["metadata"].get("creationTimestamp")),
            status.get("podIP") or "<none>", spec.get("nodeName") or "<none>",
            status.get("nominatedNodeName") or "<none>",
            "<none>" if not gates else "%d/%d" % (0, len(gates))]


POD_COLUMNS = [
    NAME,
    _col("Ready", "string", "Ready containers out of all containers."),
    _col("Status", "string", "The phase of the pod, or why it is not running."),
    _col("Restarts", "string", "Container restarts."),
    AGE,
    _col("IP", "string", "IP address of the pod.", 1),
    _col("Node", "string", "Node the pod is bound to.", 1),
    _col("Nominated Node", "string", "Node nominated by preemption.", 1),
    _col("Readiness Gates", "string", "Readiness gates that are true.", 1),
]


def _service_external_ip(spec, status):
    """getServiceExternalIP, with the load balancer's addresses unclipped (the
    server prints wide)."""
    stype = spec.get("type")
    external = spec.get("externalIPs") or []
    if stype in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if stype == "LoadBalancer":
        ingress = (status.get("loadBalancer") or {}).get("ingress") or []
        lb = sorted({i.get("ip") or i.get("hostname") for i in ingress
                     if isinstance(i, dict) and (i.get("ip") or i.get("hostname"))})
        return ",".join(lb + external) or "<pending>"
    if stype == "ExternalName":
        return spec.get("externalName", "")
    return "<unknown>"


def service_row(o):
    spec, status = o.get("spec") or {}, o.get("status") or {}
    ports = ",".join(
        ("%s:%s/%s" % (p.get("port"), p["nodePort"], p.get("protocol", "")) if p.get("nodePort")
         else "%s/%s" % (p.get("port"), p.get("protocol", "")))
        for p in spec.get("ports") or [])
    selector = spec.get("selector") or {}
    return [o["metadata"]["name"], spec.get("type", ""), (spec.get("clusterIPs") or ["<none>"])[0],
            _service_external_ip(spec, status), ports or "<none>",
            age(o["metadata"].get("creationTimestamp")),
            ",".join("%s=%s" % kv for kv in sorted(selector.items())) or "<none>"]


# The descriptions are ServiceSpec's field documentation, as upstream's.
SERVICE_COLUMNS = [
    NAME,
    _col("Type", "string",
         "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are "
         "ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a "
         "cluster-internal IP address for load-balancing to endpoints. Endpoints are determined "
         "by the selector or if that is not specified, by manual construction of an Endpoints "
         "object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated "
         "and the endpoints are published as a set of endpoints rather than a virtual IP. "
         "\"NodePort\" builds on ClusterIP and allocates a port on every node which routes to "
         "the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates "
         "an external load-balancer (if supported in the current cloud) which routes to the "
         "same endpoints as the clusterIP. \"ExternalName\" aliases this service to the "
         "specified externalName. Several other fields do not apply to ExternalName services. "
         "More info: https://kubernetes.io/docs/concepts/services-networking/service/"
         "#publishing-services-service-types"),
    _col("Cluster-IP", "string",
         "clusterIP is the IP address of the service and is usually assigned randomly. If an "
         "address is specified manually, is in-range (as per system configuration), and is not "
         "in use, it will be allocated to the service; otherwise creation of the service will "
         "fail. This field may not be changed through updates unless the type field is also "
         "being changed to ExternalName (which requires this field to be blank) or the type "
         "field is being changed from ExternalName (in which case this field may optionally be "
         "specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a "
         "valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual "
         "IP), which is useful when direct endpoint connections are preferred and proxying is "
         "not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this "
         "field is specified when creating a Service of type ExternalName, creation will fail. "
         "This field will be wiped when updating a Service to type ExternalName. More info: "
         "https://kubernetes.io/docs/concepts/services-networking/service/"
         "#virtual-ips-and-service-proxies"),
    _col("External-IP", "string",
         "externalIPs is a list of IP addresses for which nodes in the cluster will also accept "
         "traffic for this service.  These IPs are not managed by Kubernetes.  The user is "
         "responsible for ensuring that traffic arrives at a node with this IP.  A common "
         "example is external load-balancers that are not part of the Kubernetes system."),
    _col("Port(s)", "string",
         "The list of ports that are exposed by this service. More info: "
         "https://kubernetes.io/docs/concepts/services-networking/service/"
         "#virtual-ips-and-service-proxies"),
    AGE,
    _col("Selector", "string",
         "Route service traffic to pods with label keys and values matching this selector. If "
         "empty or not present, the service is assumed to have an external process managing "
         "its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, "
         "NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: "
         "https://kubernetes.io/docs/concepts/services-networking/service/", 1),
]


def namespace_row(o):
    return [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""),
            age(o["metadata"].get("creationTimestamp"))]


NAMESPACE_COLUMNS = [NAME, _col("Status", "string", "Phase of the namespace."), AGE]


def node_row(o):
    status = o.get("status") or {}
    ready = "Unknown"
    for c in status.get("conditions") or []:
        if c.get("type") == "Ready":
            ready = "Ready" if c.get("status") == "True" else "NotReady"
    if (o.get("spec") or {}).get("unschedulable"):
        ready += ",SchedulingDisabled"
    labels = o["metadata"].get("labels") or {}
    roles = sorted(k.split("/", 1)[1] for k in labels
                   if k.startswith("node-role.kubernetes.io/") and "/" in k)
    info = status.get("nodeInfo") or {}
    addrs = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [o["metadata"]["name"], ready, ",".join(roles) or "<none>",
            age(o["metadata"].get("creationTimestamp")), info.get("kubeletVersion", ""),
            addrs.get("InternalIP", "<none>"), addrs.get("ExternalIP", "<none>"),
            info.get("osImage", ""), info.get("kernelVersion", ""),
            info.get("containerRuntimeVersion", "")]


NODE_COLUMNS = [
    NAME, _col("Status", "string", "Readiness of the node."),
    _col("Roles", "string", "Roles of the node."), AGE,
    _col("Version", "string", "Kubelet version."),
    _col("Internal-IP", "string", "Internal address.", 1),
    _col("External-IP", "string", "External address.", 1),
    _col("OS-Image", "string", "Operating system image.", 1),
    _col("Kernel-Version", "string", "Kernel version.", 1),
    _col("Container-Runtime", "string", "Container runtime version.", 1),
]


def event_row(o):
    last = o.get("lastTimestamp") or o.get("eventTime") or o.get("firstTimestamp")
    first = o.get("firstTimestamp") or o.get("eventTime")
    inv = o.get("involvedObject") or {}
    src = o.get("source") or {}
    source = src.get("component", "")
    if src.get("host"):
        source += ", " + src["host"]
    count = o.get("count") or ((o.get("series") or {}).get("count")) or 1
    return [age(last) if last else "<unknown>", o.get("type", ""), o.get("reason", ""),
            "%s/%s" % ((inv.get("kind") or "").lower(), inv.get("name", "")),
            inv.get("fieldPath", ""), source or o.get("reportingComponent", ""),
            (o.get("message") or "").strip(), age(first) if first else "<unknown>",
            count, o["metadata"]["name"]]


EVENT_COLUMNS = [
    _col("Last Seen", "string", "Time since the event was last seen."),
    _col("Type", "string", "Normal or Warning."),
    _col("Reason", "string", "Short reason for the event."),
    _col("Object", "string", "The object the event is about."),
    _col("Subobject", "string", "Field path within the object.", 1),
    _col("Source", "string", "Component that reported the event.", 1),
    _col("Message", "string", "What happened."),
    _col("First Seen", "string", "Time since the event was first seen.", 1),
    _col("Count", "string", "How many times the event occurred.", 1),
    _col("Name", "string", "Name of the event object.", 1, "name"),
]


def lease_row(o):
    return [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity") or "",
            age(o["metadata"].get("creationTimestamp"))]


LEASE_COLUMNS = [NAME, _col("Holder", "string", "Identity of the holder."), AGE]


def role_row(o):
    return [o["metadata"]["name"], o["metadata"].get("creationTimestamp") or ""]


# Roles have no printer of their own: the default columns.
ROLE_COLUMNS = [NAME, _col("Created At", "date", "Time the object was created.")]


def binding_row(o):
    ref = o.get("roleRef") or {}
    subjects = [s for s in o.get("subjects") or [] if isinstance(s, dict)]

    def names(kind, fmt):
        return ", ".join(fmt(s) for s in subjects if s.get("kind") == kind)
    return [o["metadata"]["name"], "%s/%s" % (ref.get("kind", ""), ref.get("name", "")),
            age(o["metadata"].get("creationTimestamp")),
            names("User", lambda s: s.get("name", "")),
            names("Group", lambda s: s.get("name", "")),
            names("ServiceAccount", lambda s: "%s/%s" % (s.get("namespace", ""),
                                                         s.get("name", "")))]


BINDING_COLUMNS = [
    NAME, _col("Role", "string", "The role the binding grants."), AGE,
    _col("Users", "string", "Users in the binding.", 1),
    _col("Groups", "string", "Groups in the binding.", 1),
    _col("ServiceAccounts", "string", "Service accounts in the binding.", 1),
]

PRINTERS = {
    "deployments": (DEPLOYMENT_COLUMNS, deployment_row),
    "replicasets": (REPLICASET_COLUMNS, replicaset_row),
    "pods": (POD_COLUMNS, pod_row),
    "services": (SERVICE_COLUMNS, service_row),
    "namespaces": (NAMESPACE_COLUMNS, namespace_row),
    "nodes": (NODE_COLUMNS, node_row),
    "events": (EVENT_COLUMNS, event_row),
    "leases": (LEASE_COLUMNS, lease_row),
    "clusterroles": (ROLE_COLUMNS, role_row),
    "roles": (ROLE_COLUMNS, role_row),
    "clusterrolebindings": (BINDING_COLUMNS, binding_row),
    "rolebindings": (BINDING_COLUMNS, binding_row),
}


def table(plural, objects, list_meta, include="Metadata", headers=True):
    """Build a Table for `objects` of resource `plural`."""
    columns, row = PRINTERS[plural]
    rows = []
    for o in objects:
        r = {"cells": row(o)}
        if include == "Object":
            r["object"] = o
        elif include == "None":
            r["object"] = None
        else:
            r["object"] = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                           "metadata": o["metadata"]}
        rows.append(r)
    out = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta}
    if headers:
        out["columnDefinitions"] = columns
    out["rows"] = rows
    return out
