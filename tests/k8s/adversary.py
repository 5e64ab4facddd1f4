"""A hostile tenant against kcm on a cluster of tests/k8s/cluster.sh: seeded,
replayable sequences of what a namespace user may write (forged
managedFields, objects at the server's limits, odd names and values,
foreign ownerReferences, finalizers, overlapping selectors, scale and status
writes, bursts), sent straight to kube-apiserver with a ServiceAccount's
token, and checked every --check-every ops against a namespace the tenant
cannot read:

  1. a victim Deployment there scales (2 -> 4, or back) and rolls out, each
     within --bound seconds;
  2. kcm holds no namespace but the tenant's, and never stands aside in
     every namespace (its log, kcm_conflicting_controller);
  3. nothing the tenant chose (each name, label value, annotation and
     manager name holds a marker, advx<seed>, but the managers it
     impersonates) reaches /metrics, a log line's message or an unquoted
     value, or an event outside the tenant's namespaces; no log line is
     4 KiB or longer;
  4. kcm runs, its /healthz answers, and its log has no sanitizer report
     (built with AddressSanitizer and UndefinedBehaviorSanitizer).

    python3 tests/k8s/adversary.py --kcm build/kcm --work /tmp/adv [--seed 1]
        [--ops 30] [--minutes 60] [--rights edit|edit+status|both]
        [--lists streamed|paged|both]
        [--kcm-arg=--feature-gates=WatchListClient=false]
    python3 tests/k8s/adversary.py --kcm build/kcm --replay-file /tmp/adv/shrunk-1.json
    python3 tests/k8s/adversary.py --kcm build/kcm --replay 'OP;OP;...'  # JSON objects

Ops: create, update (read, modify, write), patch (JSON merge patch),
delete, recreate, scale and status writes of Deployments, ReplicaSets and
pods, with what they change drawn too: forged managedFields entries (any
manager, time and subresource, fieldsV1 nested up to the 9,996 levels
kube-apiserver takes), managedFields in pod templates, annotations of any
text or near 256 KiB, env values of up to 3 MiB, ownerReferences,
finalizers, labels, selectors, replicas, images; bursts of one of them;
"hide" (objects kcm has synced made deep, deleted, made again under their
names with a forged status entry, made shallow); "storm" (status writes in
each namespace, as another controller makes them); "restart" (of kcm).

The tenant has three namespaces, adv-t1..3; as "edit" its ServiceAccount
holds the ClusterRole edit there, as "edit+status" also update and patch
of deployments/status, replicasets/status and pods/status. With "both"
(the default), odd seeds run as "edit", even ones as "edit+status"; with
--lists both (the default), kcm lists in pages for odd seeds
(--feature-gates=WatchListClient=false) and as streams for even ones. Each
sequence starts on a clean state (the namespaces and the victim made anew,
kcm restarted) and ends with kcm restarted once more, the tenant's objects
in place, and checked again; a "restart" op restarts kcm mid-sequence.
Without --seed, seeds 1 to 4 run, 30 ops each (about 2.5 minutes on two
cores when they pass); with --minutes, new seeds run until the time is up.

On a failure, the seed, rights set and sequence are printed, then the
sequence is shrunk (delta debugging, each try on a clean state, for at
most --shrink-minutes) to the shortest one found that still fails the same
way, printed as one JSON line that --replay takes, with the command that
replays it. The run stops at the first failing seed unless --keep-going.
Prints a summary; exits non-zero when an invariant fails.
"""

import argparse
import copy
import http.client
import json
import os
import random
import re
import shlex
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from specs import CONTROLLERS, start_kcm, stop  # noqa: E402
from harness import free_ports  # noqa: E402

TENANT = ("adv-t1", "adv-t2", "adv-t3")
VICTIM_NS, VICTIM = "adv-victim", "victim"
HOME = "adv-home"  # where the tenant's ServiceAccounts live
SA = {"edit": "adv-edit", "edit+status": "adv-edit-status"}
IMAGE = "registry.k8s.io/pause:3.10"
FINALIZER = "adv.example/hold"
SEEDS = (1, 2, 3, 4)
# Nesting of a forged fieldsV1, in levels of objects; kube-apiserver 1.37
# takes up to 9,996 in metadata.managedFields (its decoder stops at 10,000
# levels in all).
DEPTHS = (65, 130, 140, 1000, 5000, 9996)
HELD = "another controller writes the status of what kcm's "
EVERYWHERE = "standing aside in every namespace"
LONG_LINE = 4096
# A build with AddressSanitizer and UndefinedBehaviorSanitizer reports so.
SANITIZER = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
# A failure's kinds, the first found naming it.
ORDER = ("kcm-exited", "sanitizer", "healthz", "stand-aside", "held-outside", "victim-scale",
         "victim-rollout", "log-long", "log-marker", "metrics-marker", "event-marker")

KINDS = {"deploy": ("/apis/apps/v1", "deployments", "Deployment", "apps/v1"),
         "rs": ("/apis/apps/v1", "replicasets", "ReplicaSet", "apps/v1"),
         "pod": ("/api/v1", "pods", "Pod", "v1")}


# --- JSON deeper than Python's decoder goes ----------------------------------------------------
# Objects nested deeper than CUT levels are held as their text behind a
# placeholder string, and written back as that text: Python's decoder,
# deepcopy and comparisons recurse.
CUT = 50
RAW, RAW_ID = [], {}  # the texts, and each one's index
RAW_REF = re.compile(r'"\\u0000adv-raw:(\d+)"')
TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]')


def raw(text):
    if text not in RAW_ID:
        RAW_ID[text] = len(RAW)
        RAW.append(text)
    return "\x00adv-raw:%d" % RAW_ID[text]


def is_raw(v):
    return isinstance(v, str) and v.startswith("\x00adv-raw:")


def nested(depth):
    """fieldsV1 of `depth` levels of objects."""
    return raw('{"f:a":' * (depth - 1) + "{}" + "}" * (depth - 1))


def loads(text):
    if text.count("{") + text.count("[") < CUT:
        return json.loads(text)
    out, last, depth, start = [], 0, 0, None
    for m in TOKEN.finditer(text):
        c = m.group()
        if c in "{[":
            depth += 1
            if depth == CUT and start is None:
                start = m.start()
        elif c in "}]":
            if depth == CUT and start is not None:
                out += [text[last:start], json.dumps(raw(text[start:m.end()]))]
                last, start = m.end(), None
            depth -= 1
    return json.loads("".join(out) + text[last:])


def dumps(obj):
    return RAW_REF.sub(lambda m: RAW[int(m.group(1))], json.dumps(obj))


def depth_of(v):
    """Levels of objects and arrays in v; CUT or more for one cut."""
    if is_raw(v):
        return CUT
    if isinstance(v, dict):
        v = list(v.values())
    if isinstance(v, list):
        return 1 + max((depth_of(x) for x in v), default=0)
    return 0


# --- the API server over HTTPS -----------------------------------------------------------------
def kubeconfig(path):
    """(server, CA file, token) of a kubeconfig cluster.sh wrote."""
    text = open(path).read()
    return tuple(re.search(r"^\s*%s: (\S+)" % k, text, re.M).group(1)
                 for k in ("server", "certificate-authority", "token"))


class Api:
    def __init__(self, server, ca, token, agent):
        u = urllib.parse.urlsplit(server)
        self.host, self.port = u.hostname, u.port
        self.ctx = ssl.create_default_context(cafile=ca)
        self.headers = {"Authorization": "Bearer " + token, "Accept": "application/json",
                        "User-Agent": agent}
        self.conn = None

    def call(self, method, path, body=None, ctype="application/json", timeout=60):
        """(status, parsed body or None)."""
        data = None if body is None else body if isinstance(body, bytes) else dumps(
            body).encode()
        headers = dict(self.headers, **({"Content-Type": ctype} if data is not None else {}))
        for attempt in range(3):
            try:
                if not self.conn:
                    self.conn = http.client.HTTPSConnection(self.host, self.port,
                                                            context=self.ctx, timeout=timeout)
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                text = r.read()
                break
            except (OSError, http.client.HTTPException):
                if self.conn:
                    self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
                time.sleep(0.5)
        try:
            return r.status, loads(text.decode("utf-8", "replace")) if text else None
        except ValueError:
            return r.status, None


def path(kind, ns, name=None, sub=None, query=None):
    prefix, plural = KINDS[kind][:2]
    p = "%s/namespaces/%s/%s" % (prefix, ns, plural)
    if name is not None:
        p += "/" + urllib.parse.quote(name, safe="")
    if sub:
        p += "/" + sub
    return p + ("?" + urllib.parse.urlencode(query) if query else "")


# --- the tenant's objects and writes -----------------------------------------------------------
def stamp(when):
    t = time.time() + {"past": -86400, "now": 0, "future": 86400}[when]
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def entry(kind, manager, when, sub, depth):
    """A managedFields entry as a tenant may forge it."""
    if depth:
        fields = nested(depth)
    elif sub:
        fields = {"f:status": {"f:replicas": {}}}
    else:
        fields = {"f:metadata": {"f:annotations": {}}}
    e = {"manager": manager, "operation": "Update", "apiVersion": KINDS[kind][3],
         "time": stamp(when), "fieldsType": "FieldsV1", "fieldsV1": fields}
    if sub:
        e["subresource"] = sub
    return e


def base(kind, name, marker, app, replicas=1):
    labels = {"adv": marker, "app": app}
    spec = {"containers": [{"name": "c", "image": IMAGE}], "terminationGracePeriodSeconds": 0}
    meta = {"name": name, "labels": dict(labels)}
    if kind == "pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    return {"apiVersion": "apps/v1", "kind": KINDS[kind][2], "metadata": meta,
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": dict(labels)}, "spec": spec}}}


def pod_spec(kind, obj):
    return obj["spec"] if kind == "pod" else obj["spec"]["template"]["spec"]


def shallow(obj):
    """obj without its deep managedFields entries; whether it had one."""
    mf = obj["metadata"].get("managedFields") or []
    keep = [e for e in mf if depth_of(e.get("fieldsV1")) < 20]
    obj["metadata"]["managedFields"] = keep
    return len(keep) != len(mf)


class Tenant:
    """Runs ops as one ServiceAccount of the tenant; counts what it sent."""

    def __init__(self, api, admin, marker):
        self.api, self.admin, self.marker = api, admin, marker
        self.requests, self.why = 0, ""  # the first refusal's message of an op

    def call(self, *a, **kw):
        self.requests += 1
        st, body = self.api.call(*a, **kw)
        if st >= 300 and st not in (404, 409) and not self.why:
            self.why = str((body or {}).get("message", ""))
        return st, body

    def uid_of(self, target, fallback):
        """(kind, name, uid) an ownerReference names: the victim's (a uid
        learnt elsewhere), an invented one, or another tenant object's."""
        if target == "victim":
            st, d = self.admin.call("GET", path("deploy", VICTIM_NS, VICTIM))
            return "Deployment", VICTIM, (d or {}).get("metadata", {}).get("uid", fallback)
        if target == "invented":
            return "ReplicaSet", self.marker + "-nobody", fallback
        kind, ns, name = target
        st, o = self.call("GET", path(kind, TENANT[ns - 1], name))
        uid = o["metadata"]["uid"] if st == 200 else fallback
        return KINDS[kind][2], name, uid

    def mutate(self, kind, obj, muts):
        meta = obj.setdefault("metadata", {})
        for m in muts:
            what, args = m[0], m[1:]
            if what == "mf":
                meta.setdefault("managedFields", []).append(entry(kind, *args))
            elif what == "mf-shallow":
                shallow(obj)
            elif what == "mf-reset":
                meta["managedFields"] = []
            elif what == "tmpl-mf" and kind != "pod":
                obj["spec"]["template"]["metadata"]["managedFields"] = [
                    entry(kind, self.marker + "-tmpl", "now", "", args[0])]
            elif what == "annotation":
                meta.setdefault("annotations", {})["adv.example/" + self.marker] = args[0]
            elif what == "big" and args[0] == "annotation":
                meta.setdefault("annotations", {})["adv.example/%s-big" % self.marker] = (
                    self.marker + "b" * args[1])[:args[1]]
            elif what == "big":
                c = pod_spec(kind, obj)["containers"][0]
                c["env"] = [{"name": "BIG", "value": (self.marker + "e" * args[1])[:args[1]]}]
            elif what == "owner":
                target, controller, fallback = args
                okind, oname, uid = self.uid_of(target, fallback)
                meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": okind,
                                            "name": oname, "uid": uid,
                                            "controller": controller}]
            elif what == "finalizer":
                if FINALIZER not in meta.get("finalizers", []):
                    meta.setdefault("finalizers", []).append(FINALIZER)
            elif what == "label":
                meta.setdefault("labels", {})[args[0]] = args[1]
            elif what == "selector":
                meta.setdefault("labels", {})["app"] = args[0]
                if kind != "pod":
                    obj["spec"]["selector"] = {"matchLabels": {"app": args[0]}}
                    obj["spec"]["template"]["metadata"].setdefault("labels", {})["app"] = args[0]
            elif what == "replicas" and kind != "pod":
                obj["spec"]["replicas"] = args[0]
            elif what == "image":
                pod_spec(kind, obj)["containers"][0]["image"] = args[0]
        return obj

    def write(self, op):
        """Run one op; the status codes of its requests."""
        do = op["do"]
        if do == "burst":
            return [c for _ in range(op["n"]) for c in self.write(op["op"])]
        if do == "hide":
            return self.hide(op)
        if do == "storm":
            return self.storm(op)
        kind, name = op.get("kind"), op.get("name")
        ns = TENANT[op["ns"] - 1] if "ns" in op else None
        q = {"fieldManager": op["fm"]} if op.get("fm") else None
        if do == "create":
            obj = self.mutate(kind, base(kind, name, self.marker, op["app"], op["replicas"]),
                              op["with"])
            return [self.call("POST", path(kind, ns, query=q), obj)[0]]
        if do in ("update", "patch"):
            codes = []
            for _ in range(2):  # once more after a conflict
                st, obj = self.call("GET", path(kind, ns, name))
                codes.append(st)
                if st != 200:
                    return codes
                new = self.mutate(kind, copy.deepcopy(obj), op["with"])
                if do == "update":
                    st = self.call("PUT", path(kind, ns, name, query=q), new)[0]
                else:
                    patch = merge_patch(obj, new)
                    if not patch:
                        return codes
                    st = self.call("PATCH", path(kind, ns, name, query=q), patch,
                                   "application/merge-patch+json")[0]
                codes.append(st)
                if st != 409:
                    return codes
            return codes
        if do == "delete":
            return [self.call("DELETE", path(kind, ns, name),
                              {"propagationPolicy": op["policy"]})[0]]
        if do == "recreate":
            codes = [self.call("DELETE", path(kind, ns, name))[0]]
            obj = self.mutate(kind, base(kind, name, self.marker, op["app"], op["replicas"]),
                              op["with"])
            return codes + [self.call("POST", path(kind, ns, query=q), obj)[0]]
        if do == "scale":
            if op["how"] == "patch":
                return [self.call("PATCH", path(kind, ns, name, "scale", q),
                                  {"spec": {"replicas": op["replicas"]}},
                                  "application/merge-patch+json")[0]]
            st, sc = self.call("GET", path(kind, ns, name, "scale"))
            if st != 200:
                return [st]
            sc["spec"]["replicas"] = op["replicas"]
            return [st, self.call("PUT", path(kind, ns, name, "scale", q), sc)[0]]
        if do == "status":
            st, obj = self.call("GET", path(kind, ns, name))
            if st != 200:
                return [st]
            obj["status"] = op["status"]
            return [st, self.call("PUT", path(kind, ns, name, "status", q), obj)[0]]
        raise ValueError("unknown op %r" % do)

    def made(self, kind, objs, codes):
        """objs made (when missing), once kcm has written their status."""
        for ns, name in objs:
            codes.append(self.call("POST", path(kind, ns),
                                   base(kind, name, self.marker, name, 1))[0])
        deadline = time.monotonic() + 15
        for ns, name in objs:
            while time.monotonic() < deadline:
                st, o = self.call("GET", path(kind, ns, name))
                if st != 200 or (o.get("status") or {}).get("observedGeneration", 0) >= 1:
                    break
                time.sleep(0.2)

    def storm(self, op):
        """Status writes, as another controller makes them, to objects in
        each namespace, `writes` times over."""
        kind, codes = op["kind"], []
        objs = [(TENANT[n - 1], name) for n in op["ns"] for name in op["names"]]
        self.made(kind, objs, codes)
        q = {"fieldManager": op["fm"]} if op.get("fm") else None
        for w in range(op["writes"]):
            if w:  # managedFields times are in seconds: a write in a later one
                time.sleep(1.1)
            for ns, name in objs:
                st, o = self.call("GET", path(kind, ns, name))
                if st == 200:
                    o["status"] = {"replicas": 5 + w, "readyReplicas": w, "availableReplicas": w,
                                   "observedGeneration": o["metadata"]["generation"]}
                    st = self.call("PUT", path(kind, ns, name, "status", q), o)[0]
                codes.append(st)
        return codes

    def hide(self, op):
        """Objects kcm has synced, made deep (kcm skips the update), deleted
        (skipped too), made again under the same names with a forged status
        entry of another manager, then made shallow."""
        kind, codes = op["kind"], []
        objs = [(TENANT[n - 1], name) for n in op["ns"] for name in op["names"]]
        self.made(kind, objs, codes)
        for ns, name in objs:
            for _ in range(3):  # again after a conflict with kcm's writes
                st, o = self.call("GET", path(kind, ns, name))
                if st == 200:
                    o["metadata"].setdefault("managedFields", []).append(
                        entry(kind, op["manager"], "now", "", op["depth"]))
                    st = self.call("PUT", path(kind, ns, name), o)[0]
                codes.append(st)
                if st != 409:
                    break
        for ns, name in objs:
            codes.append(self.call("DELETE", path(kind, ns, name))[0])
        for ns, name in objs:
            o = base(kind, name, self.marker, name, 1)
            o["metadata"]["managedFields"] = [entry(kind, op["manager"], "now", "status", 0)]
            if op["deep"]:
                o["metadata"]["managedFields"].append(
                    entry(kind, op["manager"], "now", "", op["depth"]))
            codes.append(self.call("POST", path(kind, ns), o)[0])
        for ns, name in objs if op["deep"] else ():
            st, o = self.call("GET", path(kind, ns, name))
            if st == 200 and shallow(o):
                st = self.call("PUT", path(kind, ns, name), o)[0]
            codes.append(st)
        return codes


def merge_patch(old, new):
    """The JSON merge patch that makes old new."""
    out = {}
    for k, v in new.items():
        if k not in old:
            out[k] = v
        elif old[k] != v:
            out[k] = merge_patch(old[k], v) if isinstance(v, dict) and isinstance(
                old[k], dict) else v
    for k in old:
        if k not in new:
            out[k] = None
    return out


# --- drawing sequences ---------------------------------------------------------------------------
def weighted(rnd, table):
    total = sum(w for _, w in table)
    x = rnd.uniform(0, total)
    for v, w in table:
        x -= w
        if x <= 0:
            return v
    return table[-1][0]


class Draw:
    """Op descriptions (JSON-serialisable dicts) drawn from a seed."""

    def __init__(self, seed):
        self.rnd, self.m = random.Random(seed), "advx%d" % seed
        short = {"deploy": "d", "rs": "r", "pod": "p"}
        self.names = {k: ["%s-%s%d" % (self.m, s, i) for i in range(3)] for k, s in short.items()}
        self.apps = ["%s-a%d" % (self.m, i) for i in range(3)]
        self.made = set()

    def manager(self):
        r = self.rnd
        if r.random() < 0.5:
            return r.choice(("kube-controller-manager", "other", "kcm"))
        n = weighted(r, ((8, 3), (40, 3), (128 - len(self.m), 3), (140, 1)))  # 140: too long
        tail = "".join(chr(r.randint(0x20, 0x7e)) for _ in range(n))
        if r.random() < 0.3:
            tail = ' namespace="kube-system" x=' + tail
        return (self.m + tail)[:max(n, len(self.m))]

    def text(self):
        """An annotation value: anything goes there."""
        parts = ['"quoted"', "back\\slash\\", "new\nline\r\n", "\x1b[31mred\x1b[0m",
                 "\u2028line sep", "\u202ebidi\u202c", "nul\x00byte", ' key="forged" ',
                 ' namespace="kube-system"', "%s%n%d", "\u00e9\u4e2d\U0001f600", "\t\x7f\x01"]
        return self.m + "".join(self.rnd.sample(parts, self.rnd.randint(1, 5)))

    def label(self):
        r = self.rnd
        key = r.choice(("adv-l", "adv.example/l", "app"))
        if r.random() < 0.15:  # refused: too long, or a quote
            return [key, self.m + r.choice(("x" * 60, '"q"'))]
        alphabet = "abcXYZ019-_."
        v = self.m + "".join(r.choice(alphabet) for _ in range(r.randint(0, 63 - len(self.m))))
        return [key, v.rstrip("-_.") or self.m]

    def target(self):
        r = self.rnd
        what = weighted(r, (("object", 5), ("victim", 2), ("invented", 3)))
        if what != "object":
            return what
        kind = r.choice(("deploy", "rs"))
        return [kind, r.randint(1, 3), r.choice(self.names[kind])]

    def mutation(self, kind, small=False):
        r = self.rnd
        what = weighted(r, (("mf", 25), ("annotation", 12), ("big", 5), ("owner", 8),
                            ("finalizer", 5), ("label", 8), ("selector", 6), ("replicas", 10),
                            ("image", 4), ("tmpl-mf", 4), ("mf-shallow", 4), ("mf-reset", 2)))
        if what == "big" and small:  # a burst of megabytes loads the server, not kcm
            what = "replicas"
        if what == "mf":
            return ["mf", self.manager(), weighted(r, (("past", 2), ("now", 6), ("future", 2))),
                    "status" if r.random() < 0.6 else "",
                    0 if r.random() < 0.55 else r.choice(DEPTHS)]
        if what == "tmpl-mf":
            return ["tmpl-mf", r.choice((0, 3) + DEPTHS[:4])]
        if what == "annotation":
            return ["annotation", self.text()]
        if what == "big":
            if r.random() < 0.5:  # annotations may hold 256 KiB in all
                return ["big", "annotation", r.choice((200000, 262000, 262144, 300000))]
            return ["big", "env", r.choice((500000, 1000000, 1400000, 1550000, 1600000, 3200000))]
        if what == "owner":
            return ["owner", self.target(), r.random() < 0.6,
                    str(uuid.UUID(int=r.getrandbits(128)))]
        if what == "label":
            return ["label"] + self.label()
        if what == "selector":
            return ["selector", r.choice(self.apps)]
        if what == "replicas":
            return ["replicas", r.randint(0, 4)]
        if what == "image":
            return ["image", r.choice((IMAGE, "registry.k8s.io/pause:3.9", self.m + "/none:1"))]
        return [what]

    def mutations(self, kind, lo, hi, small=False):
        return [self.mutation(kind, small) for _ in range(self.rnd.randint(lo, hi))]

    def place(self, kind, existing):
        """(namespace index, name): mostly one made before, for ops on one."""
        r = self.rnd
        made = sorted((ns, n) for k, ns, n in self.made if k == kind)
        if existing and made and r.random() < 0.85:
            return made[r.randrange(len(made))]
        if r.random() < 0.12:
            name = r.choice((self.m + "." + "n" * (252 - len(self.m)),  # 253, the longest
                             self.m + "-x.y.z", self.m + "_Bad"))
        else:
            name = r.choice(self.names[kind])
        return r.randint(1, 3), name

    def one(self, small=False):
        r = self.rnd
        if small:
            do = weighted(r, (("patch", 4), ("scale", 3), ("status", 2)))
        else:
            do = weighted(r, (("create", 20 if len(self.made) > 3 else 40), ("update", 10),
                              ("patch", 10), ("delete", 5),
                              ("recreate", 5), ("scale", 8), ("status", 8), ("burst", 5),
                              ("hide", 8), ("storm", 4), ("restart", 4)))
        if do == "restart":
            return {"do": "restart"}
        if do == "burst":
            return {"do": "burst", "n": r.randint(10, 50), "op": self.one(small=True)}
        if do == "hide":
            kind = "rs" if r.random() < 0.7 else "deploy"
            return {"do": "hide", "kind": kind,
                    "ns": [1, 2, 3] if r.random() < 0.85 else [r.randint(1, 3)],
                    "names": ["%s-h%s%d" % (self.m, kind[0], i)
                              for i in range(weighted(r, ((1, 1), (2, 4), (3, 2))))],
                    "depth": r.choice(DEPTHS[1:]), "manager": self.manager(),
                    "deep": r.random() < 0.5}
        if do == "storm":
            kind = "rs" if r.random() < 0.7 else "deploy"
            op = {"do": "storm", "kind": kind,
                  "ns": [1, 2, 3] if r.random() < 0.75 else [r.randint(1, 3)],
                  "names": ["%s-s%s%d" % (self.m, kind[0], i) for i in range(r.randint(1, 2))],
                  "writes": r.randint(1, 3)}
            if r.random() < 0.7:
                op["fm"] = self.manager()
            return op
        kinds = ("deploy", "rs") if do == "scale" else ("deploy", "rs", "pod")
        kind = weighted(r, tuple((k, {"deploy": 35, "rs": 40, "pod": 25}[k]) for k in kinds))
        ns, name = self.place(kind, do not in ("create", "recreate"))
        op = {"do": do, "kind": kind, "ns": ns, "name": name}
        if do in ("create", "recreate"):
            self.made.add((kind, ns, name))
            op.update(app=r.choice(self.apps), replicas=r.randint(0, 3),
                      **{"with": self.mutations(kind, 0, 3)})
        elif do in ("update", "patch"):
            op["with"] = self.mutations(kind, 1, 3, small)
        elif do == "delete":
            op["policy"] = r.choice(("Background", "Foreground", "Orphan"))
        elif do == "scale":
            op.update(replicas=r.randint(0, 5), how=r.choice(("put", "patch")))
        elif do == "status":
            n = r.randint(0, 9)
            op["status"] = ({"phase": "Running", "conditions": [
                {"type": "Ready", "status": r.choice(("True", "False"))}]} if kind == "pod" else
                {"replicas": n, "readyReplicas": r.randint(0, n),
                 "availableReplicas": r.randint(0, n), "observedGeneration": r.randint(0, 9)})
        if do != "delete" and r.random() < 0.3:
            op["fm"] = self.manager()
        return op


def generate(seed, count):
    d = Draw(seed)
    return [d.one() for _ in range(count)]


def describe(op):
    if op["do"] == "burst":
        return "burst %dx %s" % (op["n"], describe(op["op"]))
    if op["do"] == "hide":
        return "hide %s %s in t%s (depth %d, manager %.30r, %s)" % (
            len(op["names"]), op["kind"], ",t".join(map(str, op["ns"])), op["depth"],
            op["manager"], "re-made deep" if op["deep"] else "re-made shallow")
    if op["do"] == "storm":
        return "storm %dx status of %d %s in t%s%s" % (
            op["writes"], len(op["names"]), op["kind"], ",t".join(map(str, op["ns"])),
            " fm=%.20r" % op["fm"] if op.get("fm") else "")
    if op["do"] == "restart":
        return "restart kcm"
    muts = ",".join(m[0] + ("%d" % m[4] if m[0] == "mf" and m[4] else "") for m in
                    op.get("with", []))
    return "%s %s t%d %.40s%s%s" % (op["do"], op["kind"], op["ns"], op["name"],
                                    " [%s]" % muts if muts else "",
                                    " fm=%.20r" % op["fm"] if op.get("fm") else "")


# --- the cluster, kcm and the checks -------------------------------------------------------------
def http_get(port, p, timeout=5):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", p)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


LOG_HEADER = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ \S+:\d+\] ")
LOG_KEY = re.compile(r" ([A-Za-z_][A-Za-z0-9_.\-]*)=")


def log_values(line):
    """The key="value" pairs of a klog line, past its message: [(key,
    start, end)] of each value, quotes included when it has them."""
    h = LOG_HEADER.match(line)
    out, i = [], h.end() if h else 0
    while True:
        m = LOG_KEY.search(line, i)
        if not m:
            return out
        j = k = m.end()
        if j < len(line) and line[j] == '"':
            k = j + 1
            while k < len(line) and line[k] != '"':
                k += 2 if line[k] == "\\" else 1
            k += 1
        else:
            while k < len(line) and line[k] != " ":
                k += 1
        out.append((m.group(1), j, k))
        i = k


class Env:
    """The cluster, the tenant's identities and kcm."""

    def __init__(self, args, work):
        self.args, self.work = args, work
        self.dir = os.path.join(work, "cluster")
        self.kcm, self.logs, self.started = None, [], 0
        self.paged = False  # kcm lists in pages, not streams
        self.victim_replicas, self.rollouts = 2, 0

    def up(self):
        subprocess.run(["bash", os.path.join(HERE, "cluster.sh"), "up", self.dir,
                        CONTROLLERS["kcm"]], check=True)
        server, ca, token = kubeconfig(os.path.join(self.dir, "kubeconfig"))
        self.server, self.ca = server, ca
        self.admin = Api(server, ca, token, "adversary-admin")
        self.k("create", "namespace", HOME)
        self.tokens = {}
        for rights, sa in SA.items():
            self.k("-n", HOME, "create", "serviceaccount", sa)
            self.tokens[rights] = self.k("-n", HOME, "create", "token", sa,
                                         "--duration=24h").strip()

    def down(self):
        """Stop kcm and the cluster, a second Ctrl-C notwithstanding."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        self.stop_kcm()
        subprocess.run(["bash", os.path.join(HERE, "cluster.sh"), "down", self.dir],
                       start_new_session=True)

    def k(self, *args):
        return subprocess.run(["kubectl", "--kubeconfig", os.path.join(self.dir, "kubeconfig"),
                               *args], check=True, capture_output=True, text=True).stdout

    @staticmethod
    def ok(res):
        """The body of an answer that must succeed."""
        if res[0] >= 300:
            raise RuntimeError("the API server answered %d: %s" % (res[0], dumps(res[1])[:300]))
        return res[1]

    def tenant(self, rights, marker):
        # The manager of writes without fieldManager is the agent's first word.
        api = Api(self.server, self.ca, self.tokens[rights], marker + "-tenant/1.0")
        return Tenant(api, self.admin, marker)

    # kcm
    def start_kcm(self):
        self.started += 1
        self.health, self.metrics = free_ports(2)
        name = "kcm-%d" % self.started
        self.logs.append(os.path.join(self.dir, name + ".log"))
        self.kcm = start_kcm(os.path.abspath(self.args.kcm), self.dir, name, (
            "--metrics-bind-address=127.0.0.1:%d" % self.metrics,
            "--health-probe-bind-address=127.0.0.1:%d" % self.health,
            "--conflict-quiet-period=%ds" % self.args.quiet_period, *self.args.kcm_arg,
            *(["--feature-gates=WatchListClient=false"] if self.paged else [])))
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and self.kcm.poll() is None:
            try:
                http_get(self.health, "/healthz", 1)
                return
            except OSError:
                time.sleep(0.1)

    def stop_kcm(self):
        stop(self.kcm)
        self.kcm = None

    # the clean state
    def strip_finalizers(self, ns):
        for kind in KINDS:
            st, lst = self.admin.call("GET", path(kind, ns))
            for o in (lst or {}).get("items") or [] if st == 200 else ():
                if o["metadata"].get("finalizers"):
                    self.admin.call("PATCH", path(kind, ns, o["metadata"]["name"]),
                                    {"metadata": {"finalizers": None}},
                                    "application/merge-patch+json")

    def reset(self):
        """Tenant and victim namespaces made anew, kcm restarted, the victim
        available."""
        self.stop_kcm()
        nss = TENANT + (VICTIM_NS,)
        for ns in nss:
            self.strip_finalizers(ns)
            self.admin.call("DELETE", "/api/v1/namespaces/" + ns)
        deadline = time.monotonic() + 180
        while True:
            left = [ns for ns in nss if self.admin.call("GET", "/api/v1/namespaces/" + ns)[0]
                    != 404]
            if not left:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("namespaces %s were not deleted within 180 s" % left)
            for ns in left:
                self.strip_finalizers(ns)
            time.sleep(1)
        for ns in nss:
            self.ok(self.admin.call("POST", "/api/v1/namespaces", {"metadata": {"name": ns}}))
        rbac = "/apis/rbac.authorization.k8s.io/v1/namespaces/%s/"
        for ns in TENANT:  # edit for both; the status subresources for one
            self.ok(self.admin.call("POST", rbac % ns + "roles", {
                "metadata": {"name": "adv-status"},
                "rules": [{"apiGroups": ["apps"], "verbs": ["update", "patch"],
                           "resources": ["deployments/status", "replicasets/status"]},
                          {"apiGroups": [""], "verbs": ["update", "patch"],
                           "resources": ["pods/status"]}]}))
            for name, kind, role, sas in (
                    ("adv-edit", "ClusterRole", "edit", SA.values()),
                    ("adv-status", "Role", "adv-status", [SA["edit+status"]])):
                self.ok(self.admin.call("POST", rbac % ns + "rolebindings", {
                    "metadata": {"name": name},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind,
                                "name": role},
                    "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": HOME}
                                 for sa in sas]}))
        for ns in nss:  # pods need the namespace's default ServiceAccount
            for _ in range(300):
                if self.admin.call("GET", "/api/v1/namespaces/%s/serviceaccounts/default"
                                   % ns)[0] == 200:
                    break
                time.sleep(0.1)
        self.logs = []
        self.start_kcm()
        self.victim_replicas, self.rollouts = 2, 0
        d = base("deploy", VICTIM, "victim", VICTIM, 2)
        d["metadata"]["labels"] = {"app": VICTIM}
        d["spec"]["template"]["metadata"]["labels"] = {"app": VICTIM}
        self.ok(self.admin.call("POST", path("deploy", VICTIM_NS), d))
        bad = self.complete(60)
        if bad:
            raise RuntimeError("the victim Deployment is not available on a clean state within "
                               "60 s (%s); kcm's log: %s" % (bad, self.logs[-1]))

    # the checks
    def victim(self):
        return self.admin.call("GET", path("deploy", VICTIM_NS, VICTIM))[1] or {}

    def complete(self, bound):
        deadline = time.monotonic() + bound
        while True:
            d = self.victim()
            st, want = d.get("status") or {}, (d.get("spec") or {}).get("replicas")
            if (st.get("observedGeneration", 0) >= d.get("metadata", {}).get("generation", 1) and
                    st.get("updatedReplicas", 0) == st.get("availableReplicas", 0) ==
                    st.get("replicas", 0) == want):
                return None
            if time.monotonic() > deadline:
                return "spec.replicas %s, generation %s, status %s" % (
                    want, d.get("metadata", {}).get("generation"), json.dumps(st)[:400])
            time.sleep(0.25)

    def check(self, marker):
        """[(kind, detail)] of the invariants that fail now: what kcm serves,
        logs and records first; the victim's scale and rollout when those
        hold, then what kcm logged and recorded meanwhile."""
        out = self.check_served(marker) + self.check_log(marker) + self.check_events(marker)
        if out:
            return out
        self.victim_replicas = 6 - self.victim_replicas
        self.ok(self.admin.call("PATCH", path("deploy", VICTIM_NS, VICTIM, "scale"),
                                {"spec": {"replicas": self.victim_replicas}},
                                "application/merge-patch+json"))
        bad = self.complete(self.args.bound)
        if bad:
            out.append(("victim-scale", "the victim was not scaled to %d within %d s: %s%s" % (
                self.victim_replicas, self.args.bound, bad, self.log_tail())))
        else:
            self.rollouts += 1
            self.ok(self.admin.call("PATCH", path("deploy", VICTIM_NS, VICTIM), {
                "spec": {"template": {"metadata": {"annotations": {
                    "adv.example/rollout": str(self.rollouts)}}}}},
                "application/merge-patch+json"))
            bad = self.complete(self.args.bound)
            if bad:
                out.append(("victim-rollout", "the victim's rollout %d did not complete "
                            "within %d s: %s%s" % (self.rollouts, self.args.bound, bad,
                                                   self.log_tail())))
        return out + self.check_served(marker) + self.check_log(marker) + self.check_events(
            marker)

    def check_served(self, marker):
        """kcm runs, /healthz answers, /metrics holds no marker and shows kcm
        standing aside nowhere."""
        if self.kcm is None or self.kcm.poll() is not None:
            return [("kcm-exited", "kcm exited with %s%s" % (
                self.kcm and self.kcm.returncode, self.log_tail()))]
        out = []
        try:
            st, body = http_get(self.health, "/healthz")
            if st != 200:
                out.append(("healthz", "/healthz answered %d: %.200r" % (st, body)))
            st, body = http_get(self.metrics, "/metrics")
        except OSError as e:
            return out + [("healthz", "kcm does not answer: %s" % e)]
        text = body.decode("utf-8", "replace")
        for line in text.splitlines():
            if marker in line:
                out.append(("metrics-marker", "/metrics: %.300r" % line))
            if line.startswith("kcm_conflicting_controller{") and float(
                    line.rsplit(" ", 1)[1]) != 0:
                out.append(("stand-aside", "/metrics: " + line))
        return out

    def log_tail(self, n=3):
        """kcm's last warnings and errors, to print with a failure."""
        if not self.logs:
            return ""
        with open(self.logs[-1], "rb") as f:
            lines = [l.decode("utf-8", "replace").rstrip("\n")[:300] for l in f
                     if l[:1] in (b"W", b"E", b"F")]
        return "".join("\n    %s: %s" % (os.path.basename(self.logs[-1]), l)
                       for l in lines[-n:])

    def check_log(self, marker):
        out = []
        for p in self.logs:
            with open(p, "rb") as f:
                for n, raw_line in enumerate(f, 1):
                    where = "%s:%d" % (os.path.basename(p), n)
                    line = raw_line.decode("utf-8", "replace").rstrip("\n")
                    if any(x in line for x in SANITIZER):
                        out.append(("sanitizer", "%s: %.400s" % (where, line)))
                    if len(raw_line) >= LONG_LINE:
                        out.append(("log-long", "%s is %d bytes: %.200r" % (
                            where, len(raw_line), line)))
                    values = log_values(line) if HELD in line or marker in line else []
                    if HELD in line:
                        if EVERYWHERE in line:
                            out.append(("stand-aside", "%s: %.400s" % (where, line)))
                        ns = [line[a + 1:b - 1] for k, a, b in values if k == "namespace"]
                        if ns and ns[0] not in TENANT:
                            out.append(("held-outside", "%s: %.400s" % (where, line)))
                    quoted = [(a, b) for _, a, b in values if line[a:a + 1] == '"']
                    for m in re.finditer(re.escape(marker), line):
                        if not any(a < m.start() and m.end() < b for a, b in quoted):
                            out.append(("log-marker", "%s: the tenant's text outside a quoted "
                                        "value: %.400r" % (where, line)))
                            break
        return out

    def check_events(self, marker):
        out, cont = [], ""
        while True:
            st, lst = self.admin.call("GET", "/api/v1/events?limit=500" + (
                "&continue=" + urllib.parse.quote(cont) if cont else ""))
            for e in (lst or {}).get("items") or []:
                ns = e["metadata"].get("namespace")
                if ns not in TENANT and marker in json.dumps(e, ensure_ascii=False):
                    out.append(("event-marker", "event %s/%s by %s: %s %.300r" % (
                        ns, e["metadata"]["name"],
                        e.get("reportingComponent") or (e.get("source") or {}).get("component"),
                        e.get("reason"), e.get("message"))))
            cont = ((lst or {}).get("metadata") or {}).get("continue")
            if not cont:
                return out


# --- running, shrinking ---------------------------------------------------------------------------
class Stats:
    def __init__(self):
        self.sequences, self.shrinks, self.ops, self.requests, self.codes = 0, 0, 0, 0, {}


def count(op):
    return op["n"] if op["do"] == "burst" else 1


def run(env, ops, rights, marker, stats, quiet=False):
    """Run ops on a clean state, checking every --check-every ops, at the
    end, and once more after kcm restarts; (the failures of the first check
    that finds any, [] when none does; the ops run until then)."""
    say = (lambda *a, **kw: None) if quiet else print
    started = time.monotonic()
    env.reset()
    say("      clean state in %.0f s" % (time.monotonic() - started), flush=True)
    tenant = env.tenant(rights, marker)
    st = tenant.api.call("GET", path("deploy", VICTIM_NS))[0]
    if st != 403:
        raise RuntimeError("the tenant reads the victim's namespace (%d)" % st)
    stats.sequences += 1
    failures = []
    try:
        for i, op in enumerate(ops, 1):
            if op["do"] == "restart":
                env.stop_kcm()
                env.start_kcm()
                codes = []
            else:
                tenant.why = ""
                codes = tenant.write(op)
            stats.ops += count(op)
            for c in codes:
                if c >= 300:
                    stats.codes[c] = stats.codes.get(c, 0) + 1
            summary = {}
            for c in codes:
                summary[c] = summary.get(c, 0) + 1
            say("  %3d %s -> %s%s" % (i, describe(op), " ".join(
                "%d" % c if n == 1 else "%dx%d" % (c, n) for c, n in summary.items()) or "-",
                " (%.90r)" % tenant.why if op["do"] != "restart" and tenant.why else ""),
                flush=True)
            if i % env.args.check_every == 0 or i == len(ops):
                failures = env.check(marker)
                say("      check after op %d: %s" % (i, "ok" if not failures else "FAIL"),
                    flush=True)
                if failures:
                    return failures, ops[:i]
        if not ops:
            failures = env.check(marker)
            if failures:
                return failures, ops
        env.stop_kcm()
        env.start_kcm()
        failures = env.check(marker)
        say("      check after kcm restarted with the tenant's objects: %s" % (
            "ok" if not failures else "FAIL"), flush=True)
        return failures, ops
    finally:
        stats.requests += tenant.requests


def primary(failures):
    kinds = {k for k, _ in failures}
    return next(k for k in ORDER if k in kinds)


def shrink(env, ops, rights, marker, kind, stats, minutes):
    """The shortest sublist of ops found, within minutes, that fails with
    kind (delta debugging: chunks, then single ops, removed)."""
    deadline, tries = time.monotonic() + minutes * 60, 0
    n = 2
    while len(ops) > 1 and time.monotonic() < deadline:
        n = min(n, len(ops))
        size = (len(ops) + n - 1) // n
        removed = False
        for start in range(0, len(ops), size):
            if time.monotonic() > deadline:
                break
            trial = ops[:start] + ops[start + size:]
            tries += 1
            stats.shrinks += 1
            failures, ran = run(env, trial, rights, marker, stats, quiet=True)
            found = [k for k, _ in failures]
            print("  shrink try %d: %d ops -> %s" % (
                tries, len(trial), "fails (%s)" % kind if kind in found else
                "passes" if not found else "other (%s)" % ",".join(sorted(set(found)))),
                flush=True)
            if kind in found:
                ops, removed = ran, True
                break
        if removed:
            n = max(n - 1, 2)
        elif n >= len(ops):
            break
        else:
            n = min(n * 2, len(ops))
    return ops, tries


def parse_replay(text):
    """Ops from a printed sequence: its JSON line, a JSON list, or JSON
    objects separated by ';'."""
    text = text.strip()
    try:
        v = json.loads(text)
        if isinstance(v, dict) and "ops" in v:
            return v["ops"], v.get("marker"), v.get("rights")
        if isinstance(v, list):
            return v, None, None
        return [v], None, None
    except ValueError:
        pass
    ops, dec, i = [], json.JSONDecoder(), 0
    while i < len(text):
        while i < len(text) and text[i] in "; \n\t":
            i += 1
        if i < len(text):
            op, i = dec.raw_decode(text, i)
            ops.append(op)
    return ops, None, None


def rights_of(seed, choice):
    if choice != "both":
        return choice
    return "edit" if seed % 2 else "edit+status"


def paged_of(seed, choice):
    """Whether kcm lists in pages for this seed."""
    return choice == "paged" or (choice == "both" and seed % 2 == 1)


# Options a replay repeats when not at these values.
DEFAULTS = {"check_every": 5, "bound": 30, "quiet_period": 20}


def report(env, args, seed, rights, marker, ops, failures, stats):
    """Print a failure and its sequence, shrink it, print the shortest one
    and how to replay it; the shortest one."""
    kind = primary(failures)
    print("FAIL seed %s, rights %s: %s" % (seed, rights, kind))
    for k, detail in failures:
        print("  %s: %s" % (k, detail))
    print("sequence (%d ops): %s" % (len(ops), json.dumps(
        {"marker": marker, "rights": rights, "ops": ops})))
    shrunk, tries = ops, 0
    if args.shrink_minutes > 0 and len(ops) > 1:
        print("shrinking (at most %g min) ..." % args.shrink_minutes, flush=True)
        shrunk, tries = shrink(env, ops, rights, marker, kind, stats, args.shrink_minutes)
    line = json.dumps({"marker": marker, "rights": rights, "ops": shrunk})
    name = os.path.join(args.work, "shrunk-%s.json" % seed)
    with open(name, "w") as f:
        f.write(line + "\n")
    print("shortest failing sequence (%d ops, %d shrink tries; %s):" % (len(shrunk), tries, kind))
    for i, op in enumerate(shrunk, 1):
        print("  %3d %s" % (i, describe(op)))
    print(line)
    extra = ["--kcm-arg=" + a for a in args.kcm_arg] + (
        ["--lists=paged"] if env.paged else []) + [
        "--%s=%s" % (k.replace("_", "-"), getattr(args, k)) for k, v in DEFAULTS.items()
        if getattr(args, k) != v]
    print("replay: " + " ".join(shlex.quote(a) for a in [
        "python3", os.path.relpath(__file__), "--kcm", args.kcm, *extra, "--replay-file", name]))
    return shrunk


def interrupted(*_):
    raise KeyboardInterrupt


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kcm", required=True)
    p.add_argument("--work", default=None, help="where the cluster, logs and sequences go")
    p.add_argument("--seed", type=int, action="append",
                   help="a seed to run (repeatable; default %s)" % ",".join(map(str, SEEDS)))
    p.add_argument("--ops", type=int, default=30, help="operations per sequence")
    p.add_argument("--minutes", type=float, default=0,
                   help="run new seeds, from --seed or the one after the default ones, "
                   "until this many minutes pass")
    p.add_argument("--replay", help="a printed sequence: its JSON line, or op;op;...")
    p.add_argument("--replay-file", help="a file holding what --replay takes")
    p.add_argument("--rights", choices=("edit", "edit+status", "both"), default="both")
    p.add_argument("--lists", choices=("streamed", "paged", "both"), default="both",
                   help="how kcm lists: streamed, in pages, or by seed")
    p.add_argument("--kcm-arg", action="append", default=[], help="an extra kcm argument")
    p.add_argument("--check-every", type=int, default=DEFAULTS["check_every"],
                   help="ops between checks")
    p.add_argument("--bound", type=int, default=DEFAULTS["bound"],
                   help="seconds a victim scale or rollout may take")
    p.add_argument("--quiet-period", type=int, default=DEFAULTS["quiet_period"],
                   help="kcm's --conflict-quiet-period, in seconds")
    p.add_argument("--shrink-minutes", type=float, default=10,
                   help="time shrinking a failing sequence may take; 0 does not shrink")
    p.add_argument("--keep-going", action="store_true",
                   help="run the other seeds after a failure")
    args = p.parse_args()
    args.work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="kcm-adversary-"))
    os.makedirs(args.work, exist_ok=True)
    signal.signal(signal.SIGTERM, interrupted)

    jobs = []  # (seed, rights, marker, ops)
    if args.replay or args.replay_file:
        ops, marker, rights = parse_replay(args.replay or open(args.replay_file).read())
        if not marker:
            m = re.search(r"advx\d+", json.dumps(ops))
            marker = m.group() if m else "advx0"
        rights = rights if rights and args.rights == "both" else rights_of(1, args.rights)
        jobs.append(("replay", rights, marker, ops))
    started = time.monotonic()

    def seeds():
        if args.minutes:
            s = (args.seed or [max(SEEDS) + 1])[0]
            while time.monotonic() - started < args.minutes * 60:
                yield s
                s += 1
        else:
            yield from args.seed or SEEDS

    env, stats, failed = Env(args, args.work), Stats(), []
    try:
        env.up()
        for job in jobs or ((s, rights_of(s, args.rights), "advx%d" % s,
                             generate(s, args.ops)) for s in seeds()):
            seed, rights, marker, ops = job
            env.paged = paged_of(seed, args.lists) if seed != "replay" else args.lists == "paged"
            print("adversary: seed %s, rights %s, lists %s, %d ops" % (
                seed, rights, "paged" if env.paged else "streamed", len(ops)), flush=True)
            failures, ran = run(env, ops, rights, marker, stats)
            if failures:
                if len(ran) < len(ops):
                    print("  (ops %d to %d did not run)" % (len(ran) + 1, len(ops)))
                ops = ran
                failed.append((seed, primary(failures),
                               report(env, args, seed, rights, marker, ops, failures, stats)))
                if not args.keep_going:
                    break
    except KeyboardInterrupt:
        print("adversary: interrupted", flush=True)
        failed.append(("interrupted", "", []))
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        print("adversary: could not go on: %s" % e, flush=True)
        failed.append(("error", "", []))
    finally:
        env.down()
    codes = ", ".join("%d: %d" % kv for kv in sorted(stats.codes.items())) or "none"
    for seed, kind, shrunk in failed:
        if kind:
            print("adversary: seed %s fails (%s), shortest sequence %d ops" % (
                seed, kind, len(shrunk)))
    print("adversary: %d sequences (%d of them shrinking), %d operations (%d requests; refused "
          "by status: %s), %.0f s: %s; work directory %s" % (
              stats.sequences, stats.shrinks, stats.ops, stats.requests, codes,
              time.monotonic() - started, "FAIL" if failed else "PASS", args.work))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
