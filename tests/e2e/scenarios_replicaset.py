"""ReplicaSet scenarios driven with kubectl."""

import calendar
import json
import time

from harness import scenario, wait_for


def rs_manifest(name, replicas, labels=None, min_ready=0, image="nginx:1.7.9", finalizers=None):
    labels = labels or {"app": name}
    tmpl_meta = {"labels": labels}
    if finalizers:
        tmpl_meta["finalizers"] = finalizers
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
        "spec": {"replicas": replicas, "minReadySeconds": min_ready,
                 "selector": {"matchLabels": labels},
                 "template": {"metadata": tmpl_meta,
                              "spec": {"containers": [{"name": "c", "image": image}],
                                       "terminationGracePeriodSeconds": 1}}}})


def pods(ctx, selector):
    return ctx.k.json("get", "pods", "-l", selector)["items"]


def active(items):
    return [p for p in items if not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") not in ("Succeeded", "Failed")]


def owner_uid(pod):
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref["uid"]
    return None


def rs_status(ctx, name):
    return ctx.k.json("get", "rs", name).get("status", {})


def wait_replicas(ctx, name, n, ready=True, timeout=60):
    """Wait until the ReplicaSet reports n replicas (and n ready) and n active pods exist."""
    def done():
        rs = ctx.k.json("get", "rs", name)
        st = rs.get("status", {})
        if st.get("replicas", 0) != n or st.get("observedGeneration") != rs["metadata"][
                "generation"]:
            return False
        if ready and st.get("readyReplicas", 0) != n:
            return False
        sel = ",".join("%s=%s" % kv for kv in rs["spec"]["selector"]["matchLabels"].items())
        return len(active(pods(ctx, sel))) == n
    wait_for(done, timeout=timeout, interval=0.2,
             what="ReplicaSet %s to have %d replicas" % (name, n))


@scenario("ReplicaSet scales up and down with kubectl scale")
def scale(ctx):
    ctx.apply(rs_manifest("web", 3))
    wait_replicas(ctx, "web", 3)
    items = pods(ctx, "app=web")
    uid = ctx.k.json("get", "rs", "web")["metadata"]["uid"]
    for p in items:
        assert p["metadata"]["generateName"] == "web-", p["metadata"]
        assert owner_uid(p) == uid
        ref = p["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["apiVersion"], ref["blockOwnerDeletion"]) == (
            "ReplicaSet", "apps/v1", True), ref
    ctx.k("scale", "rs", "web", "--replicas=5")
    wait_replicas(ctx, "web", 5)
    ctx.k("scale", "rs", "web", "--replicas=1")
    wait_replicas(ctx, "web", 1)
    table = ctx.k("get", "rs", "web").splitlines()
    assert table[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "AGE"], table
    assert table[1].split()[:4] == ["web", "1", "1", "1"], table
    events = ctx.k("get", "events", "--field-selector", "involvedObject.name=web")
    assert "SuccessfulCreate" in events and "SuccessfulDelete" in events, events
    described = ctx.k("describe", "rs", "web")
    assert "1 current / 1 desired" in described, described
    assert "replicaset-controller" in described and "Created pod: web-" in described, described


@scenario("a deleted pod is replaced")
def replace_deleted(ctx):
    ctx.apply(rs_manifest("web", 2))
    wait_replicas(ctx, "web", 2)
    victim = pods(ctx, "app=web")[0]["metadata"]["name"]
    ctx.k("delete", "pod", victim, "--wait=false")
    wait_for(lambda: victim not in [p["metadata"]["name"] for p in active(pods(ctx, "app=web"))]
             and len(active(pods(ctx, "app=web"))) == 2, timeout=60, interval=0.2,
             what="a replacement pod")
    wait_replicas(ctx, "web", 2)


@scenario("a pod held terminating by a finalizer is replaced at once and not counted")
def terminating_not_counted(ctx):
    ctx.apply(rs_manifest("web", 2))
    wait_replicas(ctx, "web", 2)
    held = pods(ctx, "app=web")[0]["metadata"]["name"]
    ctx.k("patch", "pod", held, "--type=merge", "-p",
          '{"metadata":{"finalizers":["example.com/hold"]}}')
    ctx.k("delete", "pod", held, "--wait=false")
    # The replacement comes while the old pod is still there, terminating.
    wait_replicas(ctx, "web", 2)
    everything = pods(ctx, "app=web")
    assert held in [p["metadata"]["name"] for p in everything], "the held pod vanished"
    assert len(everything) == 3, [p["metadata"]["name"] for p in everything]
    assert rs_status(ctx, "web")["replicas"] == 2
    ctx.k("patch", "pod", held, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')


@scenario("a matching orphan is adopted and no extra pod is created")
def adopt_orphan(ctx):
    ctx.apply(json.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "orphan", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:1.7.9"}]}}))
    wait_for(lambda: ctx.k.json("get", "pod", "orphan")["status"].get("phase") == "Running"
             or ctx.env.real, timeout=30, what="the orphan to run")
    ctx.apply(rs_manifest("web", 1))
    uid = ctx.k.json("get", "rs", "web")["metadata"]["uid"]
    wait_for(lambda: owner_uid(ctx.k.json("get", "pod", "orphan")) == uid, timeout=30,
             what="the orphan to be adopted")
    wait_replicas(ctx, "web", 1)
    assert [p["metadata"]["name"] for p in pods(ctx, "app=web")] == ["orphan"]


@scenario("a relabelled pod is released and replaced")
def release_relabelled(ctx):
    ctx.apply(rs_manifest("web", 2))
    wait_replicas(ctx, "web", 2)
    moved = pods(ctx, "app=web")[0]["metadata"]["name"]
    ctx.k("label", "pod", moved, "app=elsewhere", "--overwrite")
    wait_for(lambda: owner_uid(ctx.k.json("get", "pod", moved)) is None, timeout=30,
             what="the relabelled pod to be released")
    wait_replicas(ctx, "web", 2)
    assert moved not in [p["metadata"]["name"] for p in pods(ctx, "app=web")]


@scenario("pod deletion cost decides which pod goes")
def deletion_cost(ctx):
    ctx.apply(rs_manifest("web", 3))
    wait_replicas(ctx, "web", 3)
    names = sorted(p["metadata"]["name"] for p in pods(ctx, "app=web"))
    cheap = names[1]
    for n in names:
        cost = "-100" if n == cheap else "100"
        ctx.k("annotate", "pod", n, "controller.kubernetes.io/pod-deletion-cost=" + cost)
    ctx.k("scale", "rs", "web", "--replicas=2")
    wait_replicas(ctx, "web", 2)
    left = sorted(p["metadata"]["name"] for p in active(pods(ctx, "app=web")))
    assert cheap not in left and len(left) == 2, (cheap, left)


@scenario("minReadySeconds delays availableReplicas")
def min_ready(ctx):
    ctx.apply(rs_manifest("web", 2, min_ready=4))
    wait_replicas(ctx, "web", 2)
    st = rs_status(ctx, "web")
    assert st.get("availableReplicas", 0) < 2, st  # ready, not yet available
    wait_for(lambda: rs_status(ctx, "web").get("availableReplicas") == 2, timeout=30,
             interval=0.2, what="the pods to become available")
    seen = time.time()
    # Not before the later pod's Ready transition (whole seconds, as the
    # server stamps it) is minReadySeconds old; the server shares this clock.
    ready = max(calendar.timegm(time.strptime(c["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ"))
                for p in pods(ctx, "app=web") for c in p["status"]["conditions"]
                if c["type"] == "Ready")
    assert seen >= ready + 4, "available %.1f s after the last pod became ready" % (seen - ready)


@scenario("exceeded quota sets ReplicaFailure, then recovers",
          needs_sim="it makes the server refuse pod creates as over quota")
def quota(ctx):
    message = 'pods "web-" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2'
    ctx.api.faults(rules=[{"verb": "create", "resource": "pods", "namespace": ctx.ns,
                           "code": 403, "message": message}])
    last = ctx.api.get("/_sim/requests").json()["last"]
    ctx.apply(rs_manifest("web", 10))

    def failure():
        conds = rs_status(ctx, "web").get("conditions") or []
        return [c for c in conds if c["type"] == "ReplicaFailure"]
    cond = wait_for(failure, timeout=30, what="the ReplicaFailure condition")[0]
    assert (cond["status"], cond["reason"]) == ("True", "FailedCreate"), cond
    assert "exceeded quota" in cond["message"], cond
    time.sleep(1.5)  # let the retries run while the quota stays exceeded
    creates = [r for r in ctx.api.get("/_sim/requests?since=%d" % last).json()["items"]
               if r["verb"] == "create" and r["resource"] == "pods" and r["namespace"] == ctx.ns]
    # Slow start: each sync tries one pod and stops at the failure.
    assert 1 <= len(creates) <= 12, len(creates)
    events = ctx.k("get", "events", "--field-selector", "reason=FailedCreate")
    assert "Error creating" in events and "exceeded quota" in events, events
    ctx.api.faults(clear=True)
    wait_replicas(ctx, "web", 10, timeout=120)
    wait_for(lambda: not failure(), timeout=30, what="ReplicaFailure to be removed")


@scenario("with watch events 3 s late, scaling to 50 never runs more than 50 pods",
          needs_sim="it delays the server's watch events")
def delayed_watch(ctx):
    ctx.apply(rs_manifest("web", 1))
    wait_replicas(ctx, "web", 1)
    ctx.api.faults(watchDelayMs=3000)
    try:
        ctx.k("scale", "rs", "web", "--replicas=50")
        most = 0
        deadline = time.monotonic() + 120
        while True:
            items = ctx.api.get("/api/v1/namespaces/%s/pods?labelSelector=app%%3Dweb"
                                % ctx.ns).json()["items"]
            n = len(active(items))
            most = max(most, n)
            assert n <= 50, "%d active pods" % n
            ready = sum(1 for p in active(items)
                        for c in p["status"].get("conditions") or []
                        if c["type"] == "Ready" and c["status"] == "True")
            if n == 50 and ready == 50:
                break
            assert time.monotonic() < deadline, "only %d of 50 pods after 120 s" % n
            time.sleep(0.1)
        time.sleep(4)  # longer than the delay: late events must not add pods
        items = ctx.api.get("/api/v1/namespaces/%s/pods?labelSelector=app%%3Dweb"
                            % ctx.ns).json()["items"]
        assert len(active(items)) == 50, len(active(items))
    finally:
        ctx.api.faults(clear=True)


@scenario("status is never written from a copy older than kcm's own last write",
          needs_sim="it reads kcm's status writes in the server's request log")
def no_stale_status_writes(ctx):
    last = ctx.api.get("/_sim/requests").json()["last"]
    ctx.apply(rs_manifest("web", 30))
    wait_replicas(ctx, "web", 30)
    for n in (5, 12, 3):
        ctx.k("scale", "rs", "web", "--replicas=%d" % n)
        wait_replicas(ctx, "web", n)
    writes = [r for r in ctx.api.get("/_sim/requests?since=%d" % last).json()["items"]
              if r["resource"] == "replicasets" and r["subresource"] == "status"
              and r["namespace"] == ctx.ns and r["method"] != "GET"]
    # Only kcm writes this ReplicaSet, one sync at a time: a write guarded by
    # a cached version can conflict only if the cache lags kcm's own writes.
    assert len(writes) >= 3, writes
    assert [r["code"] for r in writes if r["code"] != 200] == [], writes


@scenario("a sync waiting only for its status write leaves its worker to another ReplicaSet",
          needs_sim="it delays the server's answers to status writes")
def status_write_frees_worker(ctx):
    # kcm runs upstream's 5 ReplicaSet workers; six ReplicaSets whose status
    # writes each take 4 s. The sixth's pod must not wait for those answers.
    ctx.api.faults(rules=[{"verb": ctx.env.status_verb, "resource": "replicasets",
                           "subresource": "status", "namespace": ctx.ns, "latencyMs": 4000}])
    try:
        names = ["rs%d" % i for i in range(6)]
        ctx.apply("\n".join(rs_manifest(n, 1) for n in names))
        base = "/api/v1/namespaces/%s/pods" % ctx.ns
        wait_for(lambda: len(ctx.api.get(base).json()["items"]) == 6, timeout=30, interval=0.05,
                 what="a pod for each of the six ReplicaSets")
        written = [rs["metadata"]["name"] for rs in ctx.api.get(
            "/apis/apps/v1/namespaces/%s/replicasets" % ctx.ns).json()["items"]
                   if "observedGeneration" in (rs.get("status") or {})]
        assert written == [], "pods waited for the status writes of %s" % written
    finally:
        ctx.api.faults(clear=True)
    for n in names:
        wait_replicas(ctx, n, 1)


@scenario("pods that keep failing are replaced with a growing wait, until one is ready",
          needs_sim="its kubelet fails the pods of images that name crash")
def failing_pods_back_off(ctx):
    # The local kubelet fails pods whose image names "crash" 0.5 s after
    # they are created. Replaced at once, as upstream does, two replicas
    # would take about 48 pods in 12 s; with the waits (none, then 1, 2, 4 s
    # and 8 s) they take about 12.
    ctx.apply(rs_manifest("crashy", 2, image="example/crash:1"))
    started = time.monotonic()
    base = "/api/v1/namespaces/%s/pods?labelSelector=app%%3Dcrashy" % ctx.ns
    wait_for(lambda: any(p["status"].get("phase") == "Failed"
                         for p in ctx.api.get(base).json()["items"]),
             timeout=30, what="a pod to fail")
    time.sleep(max(0.0, 12 - (time.monotonic() - started)))  # let it go on failing
    made = len(ctx.api.get(base).json()["items"])
    assert 6 <= made <= 18, "%d pods in 12 s" % made
    events = ctx.k("get", "events", "--field-selector", "reason=FailedPodsBackoff")
    assert "creating replacements in" in events, events
    # A template that works: the next pod becomes ready, the waits are over.
    ctx.k("patch", "rs", "crashy", "--type=merge", "-p", json.dumps(
        {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}}}))
    wait_replicas(ctx, "crashy", 2, timeout=60)


@scenario("similar events are combined after nine, as client-go combines them")
def events_combined(ctx):
    ctx.apply(rs_manifest("web", 12))
    wait_replicas(ctx, "web", 12, ready=False)

    def created():
        return [e for e in ctx.k.json("get", "events", "--field-selector",
                                      "involvedObject.name=web,reason=SuccessfulCreate")["items"]]
    combined = "(combined from similar events): Created pod: "

    def settled():
        items = created()
        return sum(e.get("count", 1) for e in items) == 12 and items
    items = wait_for(settled, timeout=30, what="12 SuccessfulCreate occurrences")
    plain = [e for e in items if not e["message"].startswith(combined)]
    merged = [e for e in items if e["message"].startswith(combined)]
    assert len(plain) == 9 and all(e.get("count", 1) == 1 for e in plain), \
        [(e["message"], e.get("count")) for e in items]
    assert len(merged) == 1 and merged[0]["count"] == 3, merged
    assert merged[0]["source"]["component"] == "replicaset-controller", merged[0]
    described = ctx.k("describe", "rs", "web")
    assert "(combined from similar events): Created pod: web-" in described, described
