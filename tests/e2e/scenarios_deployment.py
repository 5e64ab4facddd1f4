"""Deployment scenarios driven with kubectl.

ScalingReplicaSet events are expected in the current wording ("Scaled up
replica set X from A to B"); with KCM_E2E_LEGACY_EVENTS=1 the older wording
("Scaled up replica set X to B" for a new ReplicaSet, "Scaled up replica set
X to B from A" otherwise) is expected instead, to compare with older
controller-managers such as v1.24.
"""

import json
import os
import subprocess
import threading
import time
from collections import Counter

from harness import ROOT, Context, scenario, wait_for

EXAMPLE = os.path.join(ROOT, "manifests", "examples", "nginx-deployment.yaml")
LEGACY_EVENTS = os.environ.get("KCM_E2E_LEGACY_EVENTS") == "1"

IMAGE, IMAGE2, IMAGE3 = "nginx:1.7.9", "nginx:1.9.1", "nginx:1.10.3"
BAD_IMAGE = "nginx:bad-tag"  # never pulled: its pods never become ready

REVISION = "deployment.kubernetes.io/revision"
HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED = "deployment.kubernetes.io/desired-replicas"
MAX = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
HASH = "pod-template-hash"


# --- manifests ---------------------------------------------------------------------

def deployment(name, replicas, image=IMAGE, labels=None, annotations=None, **spec):
    labels = labels or {"app": name}
    meta = {"name": name}
    if annotations:
        meta["annotations"] = annotations
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": dict({"replicas": replicas, "selector": {"matchLabels": labels},
                      "template": {"metadata": {"labels": labels},
                                   "spec": {"containers": [{"name": "c", "image": image}],
                                            "terminationGracePeriodSeconds": 1}}}, **spec)})


def rolling(surge, unavailable):
    return {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}


# --- reading state -------------------------------------------------------------------

def annotations(obj):
    return obj["metadata"].get("annotations") or {}


def revision(obj):
    return int(annotations(obj).get(REVISION, "0"))


def controller_uid(obj):
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref["uid"]
    return None


def image_of(obj):
    return obj["spec"]["template"]["spec"]["containers"][0]["image"]


def condition(d, ctype):
    for c in d.get("status", {}).get("conditions") or []:
        if c["type"] == ctype:
            return c
    return {}


def state(ctx, name):
    """The Deployment and the ReplicaSets it controls, oldest revision first."""
    items = ctx.k.json("get", "deployment,replicaset")["items"]
    d = next(i for i in items if i["kind"] == "Deployment" and i["metadata"]["name"] == name)
    rses = [i for i in items if i["kind"] == "ReplicaSet"
            and controller_uid(i) == d["metadata"]["uid"]]
    return d, sorted(rses, key=lambda rs: (revision(rs), rs["metadata"]["creationTimestamp"]))


def summary(d, rses):
    st = d.get("status", {})
    conds = ", ".join("%s=%s/%s" % (c["type"], c["status"], c.get("reason"))
                      for c in st.get("conditions") or [])
    out = ["deployment %s gen %s rev %s replicas %s status %s [%s]" % (
        d["metadata"]["name"], d["metadata"]["generation"], annotations(d).get(REVISION),
        d["spec"]["replicas"], {k: v for k, v in st.items() if k != "conditions"}, conds)]
    for rs in rses:
        s = rs.get("status", {})
        out.append("rs %s rev %s %s spec %s status %s/%s/%s (replicas/ready/available)" % (
            rs["metadata"]["name"], annotations(rs).get(REVISION), image_of(rs),
            rs["spec"]["replicas"], s.get("replicas", 0), s.get("readyReplicas", 0),
            s.get("availableReplicas", 0)))
    return "; ".join(out)


def complete(d):
    """Observed, every replica updated and available, Progressing and Available true."""
    st, want = d.get("status", {}), d["spec"]["replicas"]
    return (st.get("observedGeneration", 0) >= d["metadata"]["generation"]
            and st.get("updatedReplicas", 0) == st.get("replicas", 0) == want
            and st.get("availableReplicas", 0) == want
            and condition(d, "Progressing").get("reason") == "NewReplicaSetAvailable"
            and condition(d, "Available").get("status") == "True")


def observed(d):
    return d.get("status", {}).get("observedGeneration", 0) >= d["metadata"]["generation"]


def wait_state(ctx, name, pred, what, timeout=30):
    """Wait until pred(deployment, replicasets) holds; return both."""
    last = []

    def check():
        last[:] = [state(ctx, name)]
        return pred(*last[0]) and last[0]
    try:
        return wait_for(check, timeout=timeout, interval=0.2, what=what)
    except AssertionError as e:
        raise AssertionError("%s; last seen: %s" % (e, summary(*last[0]) if last else "-"))


def wait_complete(ctx, name, rev=1, timeout=30):
    return wait_state(ctx, name, lambda d, rses: complete(d) and revision(d) == rev,
                      "deployment %s to complete revision %d" % (name, rev), timeout)


def active_pods(ctx, selector):
    return [p for p in ctx.k.json("get", "pods", "-l", selector)["items"]
            if not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") not in ("Succeeded", "Failed")]


def scaled(direction, rs, old, new, created=False):
    """The ScalingReplicaSet message for scaling rs from old to new replicas."""
    if LEGACY_EVENTS and created:
        return "Scaled up replica set %s to %d" % (rs, new)
    if LEGACY_EVENTS:
        return "Scaled %s replica set %s to %d from %d" % (direction, rs, new, old)
    return "Scaled %s replica set %s from %d to %d" % (direction, rs, old, new)


def scaling_events(ctx, name):
    return ctx.k.json("get", "events", "--field-selector",
                      "involvedObject.kind=Deployment,involvedObject.name=%s,"
                      "reason=ScalingReplicaSet" % name)["items"]


def wait_event(ctx, name, message):
    seen = []

    def found():
        seen[:] = scaling_events(ctx, name)
        return [e for e in seen if e["message"] == message]
    try:
        event = wait_for(found, timeout=20, interval=0.2, what="event %r" % message)[0]
    except AssertionError as e:
        raise AssertionError("%s; ScalingReplicaSet events: %s"
                             % (e, [x["message"] for x in seen])) from None
    assert (event["type"], event["source"].get("component")) == (
        "Normal", "deployment-controller"), event
    return event


class Watch:
    """`kubectl get -w` in the background: every change of the listed objects, in order,
    starting with the objects as they are."""

    def __init__(self, ctx, *args):
        cmd = ctx.k.base + ["-n", ctx.ns, "get", *args, "--watch", "-o", "json",
                            "--output-watch-events"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.events = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        buf = ""
        for line in self.proc.stdout:
            buf += line
            try:
                ev = json.loads(buf)
            except ValueError:
                continue
            buf = ""
            self.events.append((ev["type"], ev["object"]))

    def started(self):
        wait_for(lambda: self.events or self.proc.poll() is not None, timeout=20,
                 what="the watch to start")
        assert self.events, "kubectl watch ended: %s" % self.proc.stderr.read()
        return self

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)
        self.thread.join(10)
        return list(self.events)


def rs_totals(events, owner):
    """After each ReplicaSet event: {name: spec.replicas} of the owner's ReplicaSets."""
    specs = {}
    for kind, rs in events:
        if controller_uid(rs) != owner:
            continue
        if kind == "DELETED":
            specs.pop(rs["metadata"]["name"], None)
        else:
            specs[rs["metadata"]["name"]] = rs["spec"]["replicas"]
        yield dict(specs)


# --- scenarios ---------------------------------------------------------------------

@scenario("apply, scale and read back the example Deployment")
def apply_scale_read_back(ctx):
    k = ctx.k
    out = k("apply", "-f", EXAMPLE)
    assert "deployment.apps/nginx-deployment created" in out, out
    d = k.json("get", "deployment", "nginx-deployment")
    assert d["spec"]["replicas"] == 2, d["spec"]
    assert d["spec"]["selector"] == {"matchLabels": {"app": "nginx"}}
    c = d["spec"]["template"]["spec"]["containers"][0]
    assert (c["name"], c["image"], c["ports"][0]["containerPort"]) == ("nginx", "nginx:1.7.9", 80)
    assert d["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": "25%"}
    gen = d["metadata"]["generation"]

    out = k("scale", "deployment/nginx-deployment", "--replicas=5")
    assert "deployment.apps/nginx-deployment scaled" in out, out
    replicas = k.jsonpath("get", "deployment", "nginx-deployment", expr="{.spec.replicas}")
    assert replicas == "5", replicas
    d = k.json("get", "deployment", "nginx-deployment")
    assert d["metadata"]["generation"] == gen + 1, d["metadata"]
    table = k("get", "deployment", "nginx-deployment")
    header = table.splitlines()[0].split()
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], table
    assert table.splitlines()[1].split()[0] == "nginx-deployment", table
    described = k("describe", "deployment", "nginx-deployment")
    assert "Replicas:" in described and "5 desired" in described, described
    assert "nginx:1.7.9" in described, described


@scenario("a new Deployment gets one labelled, annotated ReplicaSet and completes")
def create_and_complete(ctx):
    ctx.apply(deployment("web", 3, annotations={"example.com/team": "a"}))
    d, rses = wait_complete(ctx, "web")
    assert len(rses) == 1, summary(d, rses)
    rs = rses[0]
    h = rs["metadata"]["labels"].get(HASH)
    assert h and rs["metadata"]["name"] == "web-" + h, rs["metadata"]
    labels = {"app": "web", HASH: h}
    assert rs["metadata"]["labels"] == labels, rs["metadata"]["labels"]
    assert rs["spec"]["selector"] == {"matchLabels": labels}, rs["spec"]["selector"]
    assert rs["spec"]["template"]["metadata"]["labels"] == labels, rs["spec"]["template"]
    ref = rs["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"],
            ref["blockOwnerDeletion"]) == ("Deployment", "web", d["metadata"]["uid"], True,
                                           True), ref
    pods = active_pods(ctx, "app=web")
    assert len(pods) == 3, [p["metadata"]["name"] for p in pods]
    for p in pods:
        assert p["metadata"]["labels"].get(HASH) == h, p["metadata"]["labels"]
        assert controller_uid(p) == rs["metadata"]["uid"], p["metadata"]

    assert annotations(d).get(REVISION) == "1", annotations(d)
    a = annotations(rs)
    assert LAST_APPLIED in annotations(d), annotations(d)
    assert LAST_APPLIED not in a, a
    assert (a.get(REVISION), a.get(DESIRED), a.get(MAX), a.get("example.com/team")) == (
        "1", "3", "4", "a"), a

    st = d["status"]
    assert st["observedGeneration"] == d["metadata"]["generation"], st
    assert (st.get("replicas"), st.get("updatedReplicas"), st.get("readyReplicas"),
            st.get("availableReplicas"), st.get("unavailableReplicas", 0)) == (3, 3, 3, 3, 0), st
    avail, prog = condition(d, "Available"), condition(d, "Progressing")
    assert (avail["status"], avail["reason"], avail["message"]) == (
        "True", "MinimumReplicasAvailable", "Deployment has minimum availability."), avail
    assert (prog["status"], prog["reason"], prog["message"]) == (
        "True", "NewReplicaSetAvailable",
        'ReplicaSet "%s" has successfully progressed.' % rs["metadata"]["name"]), prog

    out = ctx.k("rollout", "status", "deployment/web", "--timeout=30s")
    assert 'deployment "web" successfully rolled out' in out, out
    wait_event(ctx, "web", scaled("up", rs["metadata"]["name"], 0, 3, created=True))
    described = ctx.k("describe", "deployment", "web")
    assert "ScalingReplicaSet" in described and "deployment-controller" in described, described
    assert "NewReplicaSet:" in described and rs["metadata"]["name"] in described, described


@scenario("kubectl scale resizes the Deployment's ReplicaSet, with events")
def scale_up_and_down(ctx):
    ctx.apply(deployment("web", 2))
    _, (rs,) = wait_complete(ctx, "web")
    name = rs["metadata"]["name"]
    for old, new, direction, surge in ((2, 5, "up", 2), (5, 1, "down", 1)):
        ctx.k("scale", "deployment/web", "--replicas=%d" % new)
        d, rses = wait_state(ctx, "web", lambda d, rses: complete(d) and d["spec"]["replicas"]
                             == new and len(rses) == 1 and rses[0]["spec"]["replicas"] == new,
                             "the ReplicaSet to have %d replicas" % new)
        a = annotations(rses[0])
        assert (rses[0]["metadata"]["name"], a.get(DESIRED), a.get(MAX), revision(d)) == (
            name, str(new), str(new + surge), 1), summary(d, rses)
        assert len(active_pods(ctx, "app=web")) == new
        wait_event(ctx, "web", scaled(direction, name, old, new))


@scenario("a rolling update keeps within maxSurge and maxUnavailable")
def rolling_update_bounds(ctx):
    replicas, surge, unavailable = 6, 2, 1
    ctx.apply(deployment("web", replicas, strategy=rolling(surge, unavailable)))
    d, (first,) = wait_complete(ctx, "web")
    uid = d["metadata"]["uid"]
    rs_watch = Watch(ctx, "replicasets").started()
    d_watch = Watch(ctx, "deployment", "web").started()
    ctx.k("set", "image", "deployment/web", "c=" + IMAGE2)
    try:
        d, rses = wait_complete(ctx, "web", rev=2)
    finally:
        rs_events, d_events = rs_watch.stop(), d_watch.stop()

    peak = 0
    for specs in rs_totals(rs_events, uid):
        total = sum(specs.values())
        assert total <= replicas + surge, "ReplicaSets sum to %d replicas: %s" % (total, specs)
        peak = max(peak, total)
    assert peak == replicas + surge, "the surge was never used: at most %d replicas" % peak
    # The Deployment's status.replicas sums its ReplicaSets' status, which
    # can lag their specs: kube-controller-manager 1.37 was seen reporting 9
    # of 6 + 2 for a moment. kcm writes a ReplicaSet's status again at once
    # after a conflict, so its sum stays within the bound.
    for _, obj in d_events:
        st = obj.get("status", {})
        if ctx.env.is_kcm:
            assert st.get("replicas", 0) <= replicas + surge, "too many replicas: %s" % st
        assert st.get("availableReplicas", 0) >= replicas - unavailable, \
            "too few available: %s" % st
    old, new = rses[0], rses[-1]
    assert len(rses) == 2 and old["metadata"]["uid"] == first["metadata"]["uid"], \
        summary(d, rses)
    assert (old["spec"]["replicas"], old["status"].get("replicas", 0)) == (0, 0), \
        summary(d, rses)
    assert (revision(new), image_of(new), new["spec"]["replicas"]) == (2, IMAGE2, replicas), \
        summary(d, rses)


@scenario("Recreate never runs old and new pods together")
def recreate(ctx):
    ctx.apply(deployment("web", 3, strategy={"type": "Recreate"}))
    _, (first,) = wait_complete(ctx, "web")
    old_hash = first["metadata"]["labels"][HASH]
    d_watch = Watch(ctx, "deployment", "web").started()
    pod_watch = Watch(ctx, "pods", "-l", "app=web").started()
    ctx.k("set", "image", "deployment/web", "c=" + IMAGE2)
    try:
        d, rses = wait_complete(ctx, "web", rev=2)
    finally:
        d_events, pod_events = d_watch.stop(), pod_watch.stop()

    for _, obj in d_events:
        st = obj.get("status", {})
        assert not (st.get("updatedReplicas", 0) > 0 and st.get("replicas", 0) !=
                    st.get("updatedReplicas", 0)), "new pods ran alongside old ones: %s" % st
    assert any(obj["status"].get("observedGeneration") == d["metadata"]["generation"] and
               not obj["status"].get("updatedReplicas") for _, obj in d_events), \
        "the watch never saw the old pods go first: %s" % [obj["status"] for _, obj in d_events]
    running, new_seen = {}, set()
    for kind, pod in pod_events:
        meta = pod["metadata"]
        if kind == "DELETED" or pod["status"].get("phase") in ("Succeeded", "Failed"):
            running.pop(meta["uid"], None)
        else:
            running[meta["uid"]] = (meta["name"], meta["labels"][HASH],
                                    bool(meta.get("deletionTimestamp")))
        hashes = {h for _, h, _ in running.values()}
        assert len(hashes) < 2, "pods of both templates at once: %s" % sorted(running.values())
        if meta["labels"][HASH] != old_hash:
            new_seen.add(meta["uid"])
    assert len(new_seen) >= 3, "the watch saw %d new pods" % len(new_seen)
    assert [rs["spec"]["replicas"] for rs in rses] == [0, 3], summary(d, rses)


@scenario("kubectl rollout undo brings back the old ReplicaSet as a new revision")
def rollout_undo(ctx):
    ctx.apply(deployment("web", 2))
    _, (first,) = wait_complete(ctx, "web")
    ctx.k("set", "image", "deployment/web", "c=" + IMAGE2)
    wait_complete(ctx, "web", rev=2)
    out = ctx.k("rollout", "undo", "deployment/web")
    assert "rolled back" in out, out
    d, rses = wait_complete(ctx, "web", rev=3)
    assert len(rses) == 2, summary(d, rses)
    second, back = rses
    assert back["metadata"]["uid"] == first["metadata"]["uid"], summary(d, rses)
    assert (annotations(back).get(REVISION), annotations(back).get(HISTORY),
            back["spec"]["replicas"], image_of(back)) == ("3", "1", 2, IMAGE), summary(d, rses)
    assert (revision(second), second["spec"]["replicas"]) == (2, 0), summary(d, rses)
    assert image_of(d) == IMAGE, d["spec"]["template"]
    history = ctx.k("rollout", "history", "deployment/web").splitlines()
    header = [i for i, line in enumerate(history) if line.startswith("REVISION")]
    assert header, history
    revisions = [line.split()[0] for line in history[header[0] + 1:] if line.strip()]
    assert revisions == ["2", "3"], history


@scenario("revisionHistoryLimit keeps the newest old ReplicaSets")
def revision_history_limit(ctx):
    ctx.apply(deployment("web", 1, revisionHistoryLimit=2))
    _, (rs,) = wait_complete(ctx, "web")
    uids = {1: rs["metadata"]["uid"]}
    for rev in range(2, 6):
        ctx.k("set", "env", "deployment/web", "STEP=%d" % rev)
        _, rses = wait_complete(ctx, "web", rev=rev)
        uids[rev] = rses[-1]["metadata"]["uid"]
    d, rses = wait_state(ctx, "web", lambda d, rses: len(rses) <= 3,
                         "the old ReplicaSets to be cleaned up")
    assert [revision(rs) for rs in rses] == [3, 4, 5], summary(d, rses)
    assert [rs["metadata"]["uid"] for rs in rses] == [uids[3], uids[4], uids[5]], uids
    left = {rs["metadata"]["uid"] for rs in ctx.k.json("get", "replicasets")["items"]}
    assert not left & {uids[1], uids[2]}, "revisions 1 and 2 are still there"


@scenario("a paused Deployment scales but does not roll out until resumed")
def pause_and_resume(ctx):
    ctx.apply(deployment("web", 3))
    _, (first,) = wait_complete(ctx, "web")
    ctx.k("rollout", "pause", "deployment/web")

    def paused(d, rses):
        c = condition(d, "Progressing")
        return observed(d) and (c.get("status"), c.get("reason")) == ("Unknown",
                                                                      "DeploymentPaused")
    d, _ = wait_state(ctx, "web", paused, "Progressing DeploymentPaused")
    assert condition(d, "Progressing")["message"] == "Deployment is paused", d["status"]
    ctx.k("set", "image", "deployment/web", "c=" + IMAGE2)
    ctx.k("set", "image", "deployment/web", "c=" + IMAGE3)
    ctx.k("scale", "deployment/web", "--replicas=5")
    # The Deployment's status sums its ReplicaSets' once it sees them: one
    # read may find the ReplicaSet's newer, so both are awaited.
    d, rses = wait_state(ctx, "web", lambda d, rses: paused(d, rses) and len(rses) == 1 and
                         rses[0]["status"].get("availableReplicas") == 5 and
                         d["status"].get("replicas") == 5,
                         "the paused Deployment and its ReplicaSet to scale to 5")
    rs = rses[0]
    assert (rs["metadata"]["uid"], image_of(rs), rs["spec"]["replicas"], revision(d)) == (
        first["metadata"]["uid"], IMAGE, 5, 1), summary(d, rses)
    assert annotations(rs).get(DESIRED) == "5", annotations(rs)
    assert d["status"].get("replicas") == 5, d["status"]

    ctx.k("rollout", "resume", "deployment/web")
    d, rses = wait_complete(ctx, "web", rev=2)
    assert [(image_of(rs), rs["spec"]["replicas"]) for rs in rses] == [(IMAGE, 0), (IMAGE3, 5)], \
        summary(d, rses)


@scenario("a stuck rollout exceeds its progress deadline, then recovers")
def progress_deadline(ctx):
    ctx.apply(deployment("web", 2, image=BAD_IMAGE, progressDeadlineSeconds=6,
                         minReadySeconds=0))

    def timed_out(d, rses):
        return condition(d, "Progressing").get("reason") == "ProgressDeadlineExceeded"
    d, (rs,) = wait_state(ctx, "web", timed_out, "ProgressDeadlineExceeded", timeout=25)
    c = condition(d, "Progressing")
    assert (c["status"], c["message"]) == (
        "False", 'ReplicaSet "%s" has timed out progressing.' % rs["metadata"]["name"]), c
    p = ctx.k.run("rollout", "status", "deployment/web", "--timeout=20s", check=False)
    assert p.returncode != 0 and 'deployment "web" exceeded its progress deadline' in p.stderr, \
        (p.returncode, p.stdout, p.stderr)

    ctx.k("set", "image", "deployment/web", "c=" + IMAGE)
    d, rses = wait_complete(ctx, "web", rev=2)
    c = condition(d, "Progressing")
    assert (c["status"], c["message"]) == (
        "True", 'ReplicaSet "%s" has successfully progressed.' % rses[-1]["metadata"]["name"]), c
    assert [rs["spec"]["replicas"] for rs in rses] == [0, 2], summary(d, rses)


def stalled(old_n, new_n):
    """Old ReplicaSet at old_n (all available), new one at new_n, all observed."""
    def check(d, rses):
        return (observed(d) and len(rses) == 2
                and [rs["spec"]["replicas"] for rs in rses] == [old_n, new_n]
                and rses[0]["status"].get("availableReplicas") == old_n
                and d["status"].get("availableReplicas") == old_n)
    return check


@scenario("scaling a stuck rollout scales its ReplicaSets proportionally")
def proportional_scaling(ctx):
    ctx.apply(deployment("web", 10, strategy=rolling(3, 2)))
    wait_complete(ctx, "web")
    ctx.k("set", "image", "deployment/web", "c=" + BAD_IMAGE)
    wait_state(ctx, "web", stalled(8, 5), "the rollout to stall at 8 old and 5 new replicas")
    ctx.k("scale", "deployment/web", "--replicas=30")
    d, rses = wait_state(ctx, "web", stalled(20, 13), "20 old and 13 new replicas")
    for rs in rses:
        assert (annotations(rs).get(DESIRED), annotations(rs).get(MAX)) == ("30", "33"), \
            annotations(rs)


@scenario("kubectl rollout restart rolls out a new ReplicaSet")
def rollout_restart(ctx):
    ctx.apply(deployment("web", 2))
    wait_complete(ctx, "web")
    ctx.k("rollout", "restart", "deployment/web")
    d, rses = wait_complete(ctx, "web", rev=2)
    key = "kubectl.kubernetes.io/restartedAt"
    stamp = (d["spec"]["template"]["metadata"].get("annotations") or {}).get(key)
    assert stamp, d["spec"]["template"]
    assert len(rses) == 2, summary(d, rses)
    old, new = rses
    assert (new["spec"]["template"]["metadata"].get("annotations") or {}).get(key) == stamp, \
        new["spec"]["template"]
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, 2), summary(d, rses)


def server_minor(ctx):
    v = ctx.k.json("version")["serverVersion"]
    return int("".join(ch for ch in v["minor"] if ch.isdigit()))


@scenario("pods held in deletion are counted in terminatingReplicas, on the ReplicaSet and "
          "its Deployment, where the server keeps the field")
def terminating_replicas(ctx):
    hold = "kcm.test/hold"
    d = json.loads(deployment("web", 2))
    d["spec"]["template"]["metadata"]["finalizers"] = [hold]
    ctx.apply(json.dumps(d))
    wait_complete(ctx, "web")
    # DeploymentReplicaSetTerminatingReplicas: on from 1.35; the local server keeps the field.
    kept = not ctx.env.real or server_minor(ctx) >= 35
    victim = ctx.k.json("get", "pods", "-l", "app=web")["items"][0]["metadata"]["name"]
    ctx.k("delete", "pod", victim, "--wait=false")

    def counts(want):
        def check(d, rses):
            rs = [r for r in rses if r["spec"]["replicas"] > 0]
            return (complete(d) and len(rs) == 1 and
                    rs[0]["status"].get("terminatingReplicas") == want and
                    d["status"].get("terminatingReplicas") == want)
        return check
    wait_state(ctx, "web", counts(1 if kept else None),
               "a replacement, and the pod held in deletion counted where kept")
    ctx.k("patch", "pod", victim, "--type=json",
          "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
    d, rses = wait_state(ctx, "web", counts(0 if kept else None),
                         "the held pod gone, and no pod counted")
    for p in ctx.k.json("get", "pods", "-l", "app=web")["items"]:
        ctx.k("patch", "pod", p["metadata"]["name"], "--type=json",
              "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')


@scenario("a Deployment of a 253-character name gets ReplicaSets whose names cut it to fit "
          "their hash")
def longest_name(ctx):
    name = "long-" + "n" * 248
    ctx.apply(deployment(name, 1, labels={"app": "long"}))
    wait_complete(ctx, name)
    ctx.k("set", "image", "deployment/" + name, "c=" + IMAGE2)
    d, rses = wait_complete(ctx, name, rev=2)
    assert len(rses) == 2, summary(d, rses)
    for rs in rses:
        h = rs["metadata"]["labels"][HASH]
        assert rs["metadata"]["name"] == name[:253 - 1 - len(h)] + "-" + h, \
            rs["metadata"]["name"]
    pods = active_pods(ctx, "app=long")
    assert len(pods) == 1 and len(pods[0]["metadata"]["name"]) <= 63, pods
    assert pods[0]["metadata"]["labels"][HASH] == rses[1]["metadata"]["labels"][HASH]


@scenario("a Deployment with 0 replicas has an empty ReplicaSet and is complete")
def zero_replicas(ctx):
    ctx.apply(deployment("web", 0))
    d, rses = wait_state(ctx, "web", lambda d, rses: complete(d) and len(rses) == 1,
                         "the empty Deployment to complete")
    rs = rses[0]
    assert (rs["spec"]["replicas"], rs["status"].get("replicas", 0)) == (0, 0), summary(d, rses)
    assert (revision(rs), annotations(rs).get(DESIRED), annotations(rs).get(MAX)) == (
        1, "0", "0"), annotations(rs)
    assert condition(d, "Available")["status"] == "True", d["status"]
    out = ctx.k("rollout", "status", "deployment/web", "--timeout=30s")
    assert 'deployment "web" successfully rolled out' in out, out
    assert ctx.k.json("get", "pods", "-l", "app=web")["items"] == []
    assert scaling_events(ctx, "web") == []


@scenario("two Deployments with the same selector each keep their own ReplicaSet")
def same_selector(ctx):
    names = ("web-a", "web-b")
    for name, image in zip(names, (IMAGE, IMAGE2)):
        ctx.apply(deployment(name, 2, image=image, labels={"app": "web"}))

    def snapshot():
        rses = sorted(ctx.k.json("get", "replicasets")["items"],
                      key=lambda rs: rs["metadata"]["name"])
        return ([(rs["metadata"]["name"], rs["metadata"]["uid"], rs["metadata"]["generation"],
                  rs["spec"]["replicas"], controller_uid(rs)) for rs in rses],
                sorted(e["metadata"]["name"] + ":" + str(e.get("count"))
                       for n in names for e in scaling_events(ctx, n)))
    owned = {}
    for name, image in zip(names, (IMAGE, IMAGE2)):
        d, rses = wait_complete(ctx, name)
        assert len(rses) == 1 and image_of(rses[0]) == image, summary(d, rses)
        assert rses[0]["metadata"]["name"].startswith(name + "-"), summary(d, rses)
        owned[rses[0]["metadata"]["uid"]] = 2
    pods = Counter(controller_uid(p) for p in active_pods(ctx, "app=web"))
    assert pods == owned, "pods per owner: %s, ReplicaSets: %s" % (pods, owned)
    for name in names:
        wait_event(ctx, name, scaled("up", state(ctx, name)[1][0]["metadata"]["name"], 0, 2,
                                        created=True))
    before = snapshot()
    assert len(before[0]) == 2, before

    # Make both Deployments sync again, and give the controller time with another one.
    for name in names:
        ctx.k("annotate", "deployment", name, "example.com/touched=1")
    for name in names:
        wait_state(ctx, name, lambda d, rses: observed(d) and complete(d) and all(
            annotations(rs).get("example.com/touched") == "1" for rs in rses),
            "%s to sync its annotation" % name)
    ctx.apply(deployment("probe", 2))
    wait_complete(ctx, "probe")
    after = snapshot()
    after = ([rs for rs in after[0] if not rs[0].startswith("probe-")], after[1])
    assert after == before, "ReplicaSets or events changed:\n%s\n%s" % (before, after)


@scenario("an orphaned ReplicaSet is adopted by a new Deployment without new pods")
def orphan_and_adopt(ctx):
    manifest = deployment("web", 2)
    ctx.apply(manifest)
    _, (rs,) = wait_complete(ctx, "web")
    rs_uid = rs["metadata"]["uid"]
    pod_uids = sorted(p["metadata"]["uid"] for p in active_pods(ctx, "app=web"))
    ctx.k("delete", "deployment", "web", "--cascade=orphan")

    def rs_of_web():
        return ctx.k.json("get", "replicasets", "-l", "app=web")["items"]
    wait_for(lambda: [rs["metadata"].get("ownerReferences") or None for rs in rs_of_web()]
             == [None], timeout=30, interval=0.2, what="the ReplicaSet to lose its owner")
    ctx.apply(manifest)
    d, rses = wait_state(ctx, "web", lambda d, rses: complete(d) and rses,
                         "the new Deployment to adopt the ReplicaSet")
    assert [rs["metadata"]["uid"] for rs in rs_of_web()] == [rs_uid], summary(d, rses)
    assert controller_uid(rses[0]) == d["metadata"]["uid"], rses[0]["metadata"]
    assert revision(d) == 1, annotations(d)
    assert sorted(p["metadata"]["uid"] for p in active_pods(ctx, "app=web")) == pod_uids


@scenario("25% surge rounds up and 25% unavailable rounds down")
def percent_rounding(ctx):
    ctx.apply(deployment("web", 10))
    d, (first,) = wait_complete(ctx, "web")
    watch = Watch(ctx, "replicasets").started()
    ctx.k("set", "image", "deployment/web", "c=" + BAD_IMAGE)
    try:
        d, rses = wait_state(ctx, "web", stalled(8, 5),
                             "the rollout to stall at 8 old and 5 new replicas")
    finally:
        events = watch.stop()
    old, new = (rs["metadata"]["name"] for rs in rses)
    sizes = [specs for specs in rs_totals(events, d["metadata"]["uid"]) if new in specs]
    assert sizes and sizes[0][new] == 3, "the new ReplicaSet started with: %s" % sizes[:1]
    for specs in sizes:
        assert specs[old] >= 8 and sum(specs.values()) <= 13, "ReplicaSets at %s" % specs
    for rs in rses:
        assert annotations(rs).get(MAX) == "13", annotations(rs)
    wait_event(ctx, "web", scaled("up", new, 0, 3, created=True))


@scenario("a restarted controller-manager finds its Deployments done and writes nothing",
          needs_sim="it counts kcm's writes in the server's request log")
def restart_writes_nothing(ctx):
    if ctx.env.kcm is None:
        return  # the controller-manager is not ours to restart
    ctx.apply(deployment("rolled", 3, annotations={"kubernetes.io/change-cause": "v1"}))
    ctx.apply(deployment("recreated", 2, strategy={"type": "Recreate"}))
    ctx.apply(deployment("empty", 0))
    ctx.apply(deployment("held", 2))
    for name in ("rolled", "recreated", "held"):
        wait_complete(ctx, name)
    for name in ("rolled", "recreated"):
        ctx.k("set", "image", "deployment/" + name, "c=" + IMAGE2)
        wait_complete(ctx, name, rev=2)
    ctx.k("rollout", "pause", "deployment/held")
    ctx.k("set", "image", "deployment/held", "c=" + IMAGE3)
    wait_state(ctx, "held", lambda d, rses: observed(d) and condition(d, "Progressing").get(
        "reason") == "DeploymentPaused", "the paused Deployment to be observed")
    wait_state(ctx, "empty", lambda d, rses: complete(d), "the empty Deployment to complete")
    # A Deployment in another namespace shows when the restarted process is at work.
    other = ctx.ns + "-probe"
    ctx.k("create", "namespace", other, namespaced=False)
    try:
        probe = Context(ctx.env, other)
        probe.apply(deployment("probe", 1))
        wait_complete(probe, "probe")
        last = ctx.api.get("/_sim/requests").json()["last"]
        code = ctx.env.restart_kcm("kcm-restarted.log")
        # The restarted process queues every Deployment when its caches sync; a change
        # made afterwards is handled once it runs, and the rest must be left alone.
        if ctx.env.is_kcm:  # upstream's exits non-zero on SIGTERM
            assert code == 0, "kcm exited %s on SIGTERM" % code
            wait_for(lambda: "caches synced" in ctx.env.kcm.text(), timeout=30,
                     what="the restarted kcm to sync its caches")
        probe.k("scale", "deployment/probe", "--replicas=2")
        wait_state(probe, "probe", lambda d, rses: complete(d) and d["status"]["replicas"] == 2,
                   "the restarted controller-manager to scale the probe")
        time.sleep(1)  # room for a late, unwanted write to show
        writes = ["%s %s %s" % (r["verb"], r["resource"], r["name"])
                  for r in ctx.api.get("/_sim/requests?since=%d" % last).json()["items"]
                  if r["namespace"] == ctx.ns and not r["userAgent"].startswith("kubectl")
                  and r["verb"] not in ("get", "list", "watch")]
        assert not writes, "the restarted controller-manager wrote: %s" % writes
    finally:
        ctx.k.run("delete", "namespace", other, "--wait=false", check=False, namespaced=False)
    d, rses = state(ctx, "held")
    assert len(rses) == 1 and image_of(rses[0]) == IMAGE, summary(d, rses)
