"""The release patterns of manifests/examples/strategies, walked step by step
with kubectl as their READMEs tell a user to.

At every step a scenario checks what `kubectl get pods -L version` shows (how
many pods of each version exist and are ready) and which ready pods the
Service's selector picks; across each step's changes, from watches, the
pattern's promise: Recreate never runs two versions together, a ramped
rollout keeps within maxSurge and maxUnavailable, blue/green never leaves
the Service short of ready pods.
"""

import json
import os
from collections import Counter

from harness import ROOT, scenario, wait_for
from scenarios_deployment import (Watch, controller_uid, rs_totals, scaled, wait_complete,
                                  wait_event)

STRATEGIES = os.path.join(ROOT, "manifests", "examples", "strategies")
APP = "app=my-app"
V1, V2 = "v1.0.0", "v2.0.0"


def manifest(pattern, name):
    return os.path.join(STRATEGIES, pattern, name)


def apply(ctx, pattern, *names):
    for name in names:
        ctx.k("apply", "-f", manifest(pattern, name))


# --- pods as `kubectl get pods -L version` shows them --------------------------------

def ready(pod):
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in pod.get("status", {}).get("conditions") or [])


def active(pod):
    """Neither terminating nor terminated: what a ReplicaSet counts."""
    return (not pod["metadata"].get("deletionTimestamp")
            and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"))


def version(pod):
    return pod["metadata"].get("labels", {}).get("version")


def serving(pods):
    """The pods that are active and ready: what a Service sends traffic to."""
    return [p for p in pods if active(p) and ready(p)]


def matches(selector, pod):
    labels = pod["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def tally(pods):
    """{version: (active pods, of them ready)}."""
    count, ready_count = Counter(), Counter()
    for p in pods:
        if active(p):
            count[version(p)] += 1
            ready_count[version(p)] += ready(p)
    return {v: (count[v], ready_count[v]) for v in count}


def service_selector(ctx):
    return ctx.k.json("get", "service", "my-app")["spec"].get("selector") or {}


def wait_pods(ctx, want, behind_service=None):
    """Wait until the pods of app my-app are exactly `want` ({version: n},
    all active pods ready) and, given behind_service ({version: n}), the
    Service's selector picks exactly those ready pods."""
    seen = {}

    def check():
        pods = ctx.k.json("get", "pods", "-l", APP)["items"]
        seen["pods"] = tally(pods)
        if seen["pods"] != {v: (n, n) for v, n in want.items()}:
            return False
        if behind_service is None:
            return True
        sel = service_selector(ctx)
        picked = Counter(version(p) for p in serving(pods) if matches(sel, p))
        seen["service"] = (sel, dict(picked))
        return dict(picked) == behind_service
    try:
        wait_for(check, timeout=60, interval=0.2,
                 what="pods %s, behind the Service %s" % (want, behind_service))
    except AssertionError as e:
        table = ctx.k("get", "pods", "-L", "version", check=False)
        raise AssertionError("%s; last seen %s (active, ready) by version, Service %s:\n%s" % (
            e, seen.get("pods"), seen.get("service"), table)) from None


def rolled_out(ctx, deployment, want, behind_service):
    """kubectl rollout status returns for the Deployment, then wait_pods."""
    out = ctx.k("rollout", "status", "deployment/" + deployment, "--timeout=60s", timeout=90)
    assert "successfully rolled out" in out, out
    wait_pods(ctx, want, behind_service)


def delete_and_gone(ctx, deployment, selector):
    """kubectl delete deployment: its ReplicaSets and pods go too."""
    ctx.k("delete", "deployment", deployment)

    def gone():
        return not ctx.k.json("get", "replicasets,pods", "-l", selector)["items"]
    wait_for(gone, timeout=60, interval=0.2,
             what="the ReplicaSets and pods of %s to be deleted" % deployment)


def replay(events, start_rv):
    """The pods as they were after each watch event past start_rv, oldest first
    ({uid: pod}), the events of several watches merged by resourceVersion;
    a Service's events set the selector passed along ({} until one is seen)."""
    order = sorted(events, key=lambda e: int(e[1]["metadata"]["resourceVersion"]))
    pods, selector = {}, {}
    for kind, obj in order:
        if obj["kind"] == "Service":
            selector = obj["spec"].get("selector") or {}
        elif kind == "DELETED":
            pods.pop(obj["metadata"]["uid"], None)
        else:
            pods[obj["metadata"]["uid"]] = obj
        if int(obj["metadata"]["resourceVersion"]) > start_rv:
            yield pods, selector


def list_rv(ctx):
    """The resourceVersion of a consistent list of the namespace's pods
    (kubectl's own lists carry none)."""
    raw = ctx.k("get", "--raw", "/api/v1/namespaces/%s/pods?limit=1" % ctx.ns, namespaced=False)
    return int(json.loads(raw)["metadata"]["resourceVersion"])


# --- scenarios ---------------------------------------------------------------------

@scenario("strategy recreate: v1 goes before v2 comes, no old pod beside a new one")
def strategy_recreate(ctx):
    apply(ctx, "recreate", "app-v1.yaml", "service.yaml")
    _, (first,) = wait_complete(ctx, "my-app")
    wait_pods(ctx, {V1: 3}, behind_service={V1: 3})
    start = list_rv(ctx)
    pods = Watch(ctx, "pods", "-l", APP).started()
    apply(ctx, "recreate", "app-v2.yaml")
    try:
        _, (_, second) = wait_complete(ctx, "my-app", rev=2, timeout=60)
        wait_pods(ctx, {V2: 3}, behind_service={V2: 3})
    finally:
        events = pods.stop()
    saw_v2 = False
    for state, _ in replay(events, start):
        versions = {version(p) for p in state.values()
                    if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")}
        assert len(versions) < 2, "pods of %s at once: %s" % (
            sorted(versions), sorted((p["metadata"]["name"], version(p)) for p in state.values()))
        saw_v2 = saw_v2 or V2 in versions
    assert saw_v2, "the watch saw no v2 pod"
    down = scaled("down", first["metadata"]["name"], 3, 0)
    up = scaled("up", second["metadata"]["name"], 0, 3, created=True)
    a, b = wait_event(ctx, "my-app", down), wait_event(ctx, "my-app", up)
    assert a["lastTimestamp"] <= b["lastTimestamp"], (a, b)
    delete_and_gone(ctx, "my-app", APP)


def ramped(ctx, v2_file, surge, unavailable):
    replicas = 10
    apply(ctx, "ramped", "app-v1.yaml", "service.yaml")
    d, _ = wait_complete(ctx, "my-app", timeout=60)
    wait_pods(ctx, {V1: replicas}, behind_service={V1: replicas})
    start = list_rv(ctx)
    rs_watch, pod_watch = Watch(ctx, "replicasets").started(), Watch(ctx, "pods", "-l", APP)
    pod_watch.started()
    apply(ctx, "ramped", v2_file)
    try:
        wait_complete(ctx, "my-app", rev=2, timeout=90)
        wait_pods(ctx, {V2: replicas}, behind_service={V2: replicas})
    finally:
        rs_events, pod_events = rs_watch.stop(), pod_watch.stop()
    peak = 0
    for specs in rs_totals(rs_events, d["metadata"]["uid"]):
        total = sum(specs.values())
        assert total <= replicas + surge, "ReplicaSets sum to %d replicas: %s" % (total, specs)
        peak = max(peak, total)
    assert peak == replicas + surge, "the surge was never used: at most %d replicas" % peak
    mixed = False
    for state, _ in replay(pod_events, start):
        up = len(serving(state.values()))
        assert up >= replicas - unavailable, "%d ready pods: %s" % (up, tally(state.values()))
        mixed = mixed or len({version(p) for p in serving(state.values())}) > 1
    assert mixed, "v1 and v2 were never ready side by side"
    delete_and_gone(ctx, "my-app", APP)


@scenario("strategy ramped: one pod at a time (maxSurge 1, maxUnavailable 0)")
def strategy_ramped(ctx):
    ramped(ctx, "app-v2.yaml", surge=1, unavailable=0)


@scenario("strategy ramped, fast: maxSurge 50% and maxUnavailable 30% of 10")
def strategy_ramped_fast(ctx):
    ramped(ctx, "app-v2-fast.yaml", surge=5, unavailable=3)


def service_never_short(events, start, want):
    """From merged pod and Service watches: at every change past start the
    Service's selector picked `want` ready pods of one version."""
    for pods, selector in replay(events, start):
        picked = [p for p in serving(pods.values()) if matches(selector, p)]
        versions = {version(p) for p in picked}
        assert len(picked) == want and len(versions) == 1, \
            "the Service %s picked %d ready pods of %s" % (selector, len(picked), versions)


def switch(ctx, to):
    ctx.k("patch", "service", "my-app", "-p",
          json.dumps({"spec": {"selector": {"version": to}}}))


@scenario("strategy blue/green: v2 beside v1, the Service switched, switched back, "
          "v1 removed")
def strategy_blue_green(ctx):
    apply(ctx, "blue-green", "app-v1.yaml", "service.yaml")
    rolled_out(ctx, "my-app-v1", {V1: 10}, {V1: 10})
    start = list_rv(ctx)
    pod_watch = Watch(ctx, "pods", "-l", APP).started()
    svc_watch = Watch(ctx, "service", "my-app").started()
    try:
        apply(ctx, "blue-green", "app-v2.yaml")
        rolled_out(ctx, "my-app-v2", {V1: 10, V2: 10}, {V1: 10})
        switch(ctx, V2)
        wait_pods(ctx, {V1: 10, V2: 10}, behind_service={V2: 10})
        switch(ctx, V1)  # the rollback: blue is still there
        wait_pods(ctx, {V1: 10, V2: 10}, behind_service={V1: 10})
        switch(ctx, V2)
        wait_pods(ctx, {V1: 10, V2: 10}, behind_service={V2: 10})
        delete_and_gone(ctx, "my-app-v1", "app=my-app,version=" + V1)
        wait_pods(ctx, {V2: 10}, behind_service={V2: 10})
    finally:
        events = pod_watch.stop() + svc_watch.stop()
    assert sum(1 for _, o in events if o["kind"] == "Service") >= 4, "the watch missed a switch"
    service_never_short(events, start, 10)


def owned_by_own_version(ctx):
    """Each pod's ReplicaSet belongs to the Deployment of the pod's version:
    the two Deployments' selectors do not overlap, so neither adopts the
    other's pods."""
    rses = {rs["metadata"]["uid"]: rs for rs in ctx.k.json("get", "replicasets")["items"]}
    for p in ctx.k.json("get", "pods", "-l", APP)["items"]:
        rs = rses.get(controller_uid(p))
        assert rs, "pod %s has no ReplicaSet of its own" % p["metadata"]["name"]
        owner = rs["metadata"]["ownerReferences"][0]["name"]
        assert owner == "my-app-" + version(p).split(".")[0], (p["metadata"]["name"], owner)


@scenario("strategy canary: 1 pod of v2 beside 10 of v1 behind one Service, then v2 to 10, "
          "v1 removed")
def strategy_canary(ctx):
    apply(ctx, "canary", "app-v1.yaml", "service.yaml")
    rolled_out(ctx, "my-app-v1", {V1: 10}, {V1: 10})
    apply(ctx, "canary", "app-v2.yaml")
    rolled_out(ctx, "my-app-v2", {V1: 10, V2: 1}, {V1: 10, V2: 1})
    owned_by_own_version(ctx)
    ctx.k("scale", "deployment/my-app-v2", "--replicas=10")
    rolled_out(ctx, "my-app-v2", {V1: 10, V2: 10}, {V1: 10, V2: 10})
    owned_by_own_version(ctx)
    delete_and_gone(ctx, "my-app-v1", "app=my-app,version=" + V1)
    wait_pods(ctx, {V2: 10}, behind_service={V2: 10})


def rs_specs(ctx):
    """The Deployment my-app and [(version, spec.replicas)] of its scaled
    ReplicaSets."""
    d = ctx.k.json("get", "deployment", "my-app")
    rses = [rs for rs in ctx.k.json("get", "replicasets")["items"]
            if controller_uid(rs) == d["metadata"]["uid"] and rs["spec"]["replicas"]]
    return d, sorted((rs["spec"]["template"]["metadata"]["labels"]["version"],
                      rs["spec"]["replicas"]) for rs in rses)


def held(ctx, old):
    """Apply v2 and pause once its first pod is asked for: the rollout holds
    at `old` v1 pods and one v2 pod. The v2 pod's minReadySeconds (5 s)
    keeps the rollout from its next step until the pause has landed; held
    is proven once the paused Deployment reports the v2 pod available (the
    sync that would have taken the next step) with its ReplicaSets still at
    old and 1."""
    apply(ctx, "canary/native", "app-v2.yaml")
    wait_for(lambda: rs_specs(ctx)[1] == [(V1, old), (V2, 1)], timeout=30, interval=0.1,
             what="a ReplicaSet of v2 with one replica")
    ctx.k("rollout", "pause", "deployment/my-app")

    def holding():
        d, specs = rs_specs(ctx)
        st = d.get("status", {})
        return (d["spec"].get("paused") and st.get("availableReplicas") == old + 1
                and st.get("observedGeneration") == d["metadata"]["generation"]
                and specs == [(V1, old), (V2, 1)])
    wait_for(holding, timeout=60, interval=0.2, what="the paused rollout to hold")
    wait_pods(ctx, {V1: old, V2: 1}, behind_service={V1: old, V2: 1})


@scenario("strategy canary, native: maxSurge 1 held by rollout pause, aborted by undo, then "
          "promoted")
def strategy_canary_native(ctx):
    replicas = 5
    apply(ctx, "canary/native", "app-v1.yaml", "service.yaml")
    wait_complete(ctx, "my-app", timeout=60)
    wait_pods(ctx, {V1: replicas}, behind_service={V1: replicas})
    held(ctx, replicas)
    out = ctx.k.run("rollout", "undo", "deployment/my-app", check=False)
    assert out.returncode != 0 and "paused" in out.stderr, (out.returncode, out.stderr)

    start = list_rv(ctx)
    pod_watch = Watch(ctx, "pods", "-l", APP).started()
    try:
        ctx.k("rollout", "resume", "deployment/my-app")
        ctx.k("rollout", "undo", "deployment/my-app")
        wait_complete(ctx, "my-app", rev=3, timeout=60)
        wait_pods(ctx, {V1: replicas}, behind_service={V1: replicas})
    finally:
        events = pod_watch.stop()
    for state, _ in replay(events, start):
        up = len(serving(state.values()))
        assert up >= replicas, "%d ready pods while aborting: %s" % (up, tally(state.values()))

    held(ctx, replicas)
    ctx.k("rollout", "resume", "deployment/my-app")
    wait_complete(ctx, "my-app", rev=4, timeout=90)
    wait_pods(ctx, {V2: replicas}, behind_service={V2: replicas})
    delete_and_gone(ctx, "my-app", APP)
