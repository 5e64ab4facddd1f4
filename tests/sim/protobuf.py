"""Pods in protobuf (application/vnd.kubernetes.protobuf), as kube-apiserver
writes them to the clients that ask: kube-controller-manager does, and so
does kcm.

Only pods are offered (a request for any other kind is answered in JSON, as
kube-apiserver answers for kinds it has no protobuf for), and of a pod the
metadata is written whole while its spec and status carry the fields in the
schemas below: what controllers read, and the common fields beside them.
Field numbers are those of the upstream generated.proto (core/v1, meta/v1,
runtime).

Framing, as kube-apiserver writes it:
  - an object: the magic b"k8s\\0", then a runtime.Unknown {typeMeta 1
    {apiVersion 1, kind 2}, raw 2, contentEncoding 3, contentType 4};
  - a list: the same envelope around {metadata 1 (ListMeta), items 2...};
  - a watch (Content-Type ...;stream=watch): each event a 4-byte big-endian
    length, then a bare WatchEvent {type 1, object 2 {raw 1: the object in
    its envelope}}.
"""

import calendar
import json
import struct
import time

MEDIA = "application/vnd.kubernetes.protobuf"
WATCH_MEDIA = MEDIA + ";stream=watch"
MAGIC = b"k8s\x00"
KINDS = ("pods",)  # the resources (plural) offered in protobuf


def chosen(accept, plural):
    """Whether the answer is protobuf: the first media type of Accept the
    server can write decides, and only pods have protobuf here."""
    for part in (accept or "").split(","):
        mt = part.split(";")[0].strip()
        if mt == MEDIA:
            return plural in KINDS
        if mt in ("application/json", "*/*", "application/*"):
            return False
    return False


_SMALL = [bytes((i,)) for i in range(128)]


def _varint(v):
    if 0 <= v < 128:
        return _SMALL[v]
    if v < 0:
        v += 1 << 64  # negative integers: ten bytes, as Go writes int32 and int64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


_TAGS = {}


def _tag(field, wire):
    t = _TAGS.get((field, wire))
    if t is None:
        t = _TAGS[(field, wire)] = _varint(field << 3 | wire)
    return t


def _bytes(field, data):
    return _tag(field, 2) + _varint(len(data)) + data


def _str(field, s):
    return _bytes(field, s.encode())


def _int(field, v):
    return _tag(field, 0) + _varint(int(v))


def _time(field, s):
    """A meta/v1 Time {seconds 1, nanos 2}; a zero time is written empty."""
    if not s:
        return _bytes(field, b"")
    secs = calendar.timegm(time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S"))
    return _bytes(field, _int(1, secs) + _int(2, 0))


# A schema maps a JSON key to (field, type); a type is "str", "int", "bool",
# "time", "map" (map<string,string>), "raw" (FieldsV1: the JSON text as
# bytes), a nested schema (dict), or a list of one of those (repeated).
OWNER = {"kind": (1, "str"), "name": (3, "str"), "uid": (4, "str"),
         "apiVersion": (5, "str"), "controller": (6, "bool"),
         "blockOwnerDeletion": (7, "bool")}
MANAGED = {"manager": (1, "str"), "operation": (2, "str"), "apiVersion": (3, "str"),
           "time": (4, "time"), "fieldsType": (6, "str"), "fieldsV1": (7, "raw"),
           "subresource": (8, "str")}
OBJECT_META = {"name": (1, "str"), "generateName": (2, "str"), "namespace": (3, "str"),
               "selfLink": (4, "str"), "uid": (5, "str"), "resourceVersion": (6, "str"),
               "generation": (7, "int"), "creationTimestamp": (8, "time"),
               "deletionTimestamp": (9, "time"), "deletionGracePeriodSeconds": (10, "int"),
               "labels": (11, "map"), "annotations": (12, "map"),
               "ownerReferences": (13, [OWNER]), "finalizers": (14, ["str"]),
               "managedFields": (17, [MANAGED])}
PORT = {"name": (1, "str"), "hostPort": (2, "int"), "containerPort": (3, "int"),
        "protocol": (4, "str"), "hostIP": (5, "str")}
ENV = {"name": (1, "str"), "value": (2, "str")}
CONTAINER = {"name": (1, "str"), "image": (2, "str"), "command": (3, ["str"]),
             "args": (4, ["str"]), "workingDir": (5, "str"), "ports": (6, [PORT]),
             "env": (7, [ENV]), "terminationMessagePath": (13, "str"),
             "imagePullPolicy": (14, "str"), "terminationMessagePolicy": (20, "str"),
             "restartPolicy": (24, "str")}
TOLERATION = {"key": (1, "str"), "operator": (2, "str"), "value": (3, "str"),
              "effect": (4, "str"), "tolerationSeconds": (5, "int")}
POD_SPEC = {"containers": (2, [CONTAINER]), "restartPolicy": (3, "str"),
            "terminationGracePeriodSeconds": (4, "int"), "activeDeadlineSeconds": (5, "int"),
            "dnsPolicy": (6, "str"), "nodeSelector": (7, "map"),
            "serviceAccountName": (8, "str"), "serviceAccount": (9, "str"),
            "nodeName": (10, "str"), "hostNetwork": (11, "bool"), "hostname": (16, "str"),
            "subdomain": (17, "str"), "schedulerName": (19, "str"),
            "initContainers": (20, [CONTAINER]), "automountServiceAccountToken": (21, "bool"),
            "tolerations": (22, [TOLERATION]), "priorityClassName": (24, "str"),
            "priority": (25, "int"), "enableServiceLinks": (30, "bool"),
            "preemptionPolicy": (31, "str")}
CONDITION = {"type": (1, "str"), "status": (2, "str"), "lastProbeTime": (3, "time"),
             "lastTransitionTime": (4, "time"), "reason": (5, "str"), "message": (6, "str")}
STATE = {"waiting": (1, {"reason": (1, "str"), "message": (2, "str")}),
         "running": (2, {"startedAt": (1, "time")}),
         "terminated": (3, {"exitCode": (1, "int"), "signal": (2, "int"),
                            "reason": (3, "str"), "message": (4, "str"),
                            "startedAt": (5, "time"), "finishedAt": (6, "time"),
                            "containerID": (7, "str")})}
CONTAINER_STATUS = {"name": (1, "str"), "state": (2, STATE), "lastState": (3, STATE),
                    "ready": (4, "bool"), "restartCount": (5, "int"), "image": (6, "str"),
                    "imageID": (7, "str"), "containerID": (8, "str"), "started": (9, "bool")}
POD_STATUS = {"phase": (1, "str"), "conditions": (2, [CONDITION]), "message": (3, "str"),
              "reason": (4, "str"), "hostIP": (5, "str"), "podIP": (6, "str"),
              "startTime": (7, "time"), "containerStatuses": (8, [CONTAINER_STATUS]),
              "qosClass": (9, "str"), "initContainerStatuses": (10, [CONTAINER_STATUS]),
              "podIPs": (12, [{"ip": (1, "str")}])}
POD = {"metadata": (1, OBJECT_META), "spec": (2, POD_SPEC), "status": (3, POD_STATUS)}
STATUS = {"metadata": (1, {"resourceVersion": (2, "str"), "continue": (3, "str")}),
          "status": (2, "str"), "message": (3, "str"), "reason": (4, "str"),
          "code": (6, "int")}


def _value(field, kind, v):
    if isinstance(kind, list):
        return b"".join(_value(field, kind[0], item) for item in (v or []))
    if isinstance(kind, dict):
        return _bytes(field, message(kind, v or {}))
    if kind == "str":
        return _str(field, v)
    if kind == "int":
        return _int(field, v)
    if kind == "bool":
        return _int(field, 1 if v else 0)
    if kind == "time":
        return _time(field, v)
    if kind == "raw":
        return _bytes(field, _bytes(1, json.dumps(v, separators=(",", ":")).encode()))
    # map<string,string>: an entry {key 1, value 2} per pair, sorted as Go writes them
    return b"".join(_bytes(field, _str(1, k) + _str(2, v[k])) for k in sorted(v or {}))


_ORDER = {}  # id(schema) -> its (key, field, kind) in field order


def message(schema, obj):
    """The fields of obj that schema knows, in field order (as Go writes
    them); nulls are left out."""
    order = _ORDER.get(id(schema))
    if order is None:
        order = _ORDER[id(schema)] = sorted(((k, f, kind) for k, (f, kind) in schema.items()),
                                            key=lambda e: e[1])
    get = obj.get
    return b"".join(_value(field, kind, v) for key, field, kind in order
                    if (v := get(key)) is not None)


def envelope(kind, api_version, raw):
    """An object in kube-apiserver's protobuf envelope."""
    type_meta = _str(1, api_version) + _str(2, kind)
    return MAGIC + _bytes(1, type_meta) + _bytes(2, raw) + _str(3, "") + _str(4, "")


def pod(obj):
    """A pod's message (without the envelope)."""
    return message(POD, obj)


def status(st):
    return envelope("Status", "v1", message(STATUS, st))


def list_parts(kind, api_version, meta, items):
    """A list as parts of one body: the envelope's head, the items' fields
    as they are, and its tail (the raw field's length is known up front)."""
    list_meta = _bytes(1, message(STATUS["metadata"][1], meta) +
                       (_int(4, meta["remainingItemCount"])
                        if meta.get("remainingItemCount") is not None else b""))
    fields = [_tag(2, 2) + _varint(len(m)) + m for m in items]
    raw_len = len(list_meta) + sum(len(f) for f in fields)
    type_meta = _str(1, api_version) + _str(2, kind + "List")
    head = MAGIC + _bytes(1, type_meta) + _tag(2, 2) + _varint(raw_len) + list_meta
    return [head] + fields + [_str(3, "") + _str(4, "")]


def watch_frame(etype, obj_envelope):
    """One event of a protobuf watch stream."""
    event = _str(1, etype) + _bytes(2, _bytes(1, obj_envelope))
    return struct.pack(">I", len(event)) + event


def raw_frame(data):
    """Bytes framed as an event (the faults' garbage)."""
    return struct.pack(">I", len(data)) + data
