"""Fault scenarios: the local API server misbehaves, or kcm dies, while
Deployments scale and roll. In the end every Deployment has exactly its
replicas, and at no sampled moment more active pods than it may have."""

import http.client
import json
import os
import random
import signal
import threading
import time
import urllib.parse
from collections import Counter

from harness import Skip, scenario, suite_kcm_stopped, wait_for
from scenarios_deployment import complete, deployment, rolling, summary, wait_state


def active_by_app(api, ns):
    """Active pods (not terminating, not finished) of a namespace by app label."""
    items = api.get("/api/v1/namespaces/%s/pods" % ns).json()["items"]
    return Counter(p["metadata"].get("labels", {}).get("app") for p in items
                   if not p["metadata"].get("deletionTimestamp")
                   and p["status"].get("phase") not in ("Succeeded", "Failed"))


def asked(api, ns):
    """A count for ActivePods, by app label: the pods the app's ReplicaSets
    ask for (their spec.replicas summed), and under "+app" how many active
    pods one of them has beyond the most it has ever asked for, which is 0 or
    less unless a ReplicaSet made a pod too many. That most comes from the
    local API server, which keeps the highest spec.replicas of every stored
    version, read after the pods: every pod counted was asked for by a spec
    it has seen."""
    pods = api.get("/api/v1/namespaces/%s/pods" % ns).json()["items"]
    peaks = api.get("/_sim/peaks").json()["items"]
    rses = api.get("/apis/apps/v1/namespaces/%s/replicasets" % ns).json()["items"]
    owned = Counter()
    for p in pods:
        if p["metadata"].get("deletionTimestamp") or p["status"].get("phase") in (
                "Succeeded", "Failed"):
            continue
        for ref in p["metadata"].get("ownerReferences") or []:
            if ref.get("controller"):
                owned[ref["uid"]] += 1
    out = Counter()
    for rs in rses:
        meta = rs["metadata"]
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller"):
                app = ref["name"]
                out[app] += rs["spec"]["replicas"]
                # A ReplicaSet made after the peaks were read owns no pod counted.
                peak = peaks.get(meta["uid"], owned[meta["uid"]])
                out["+" + app] = max(out.get("+" + app, -1 << 30), owned[meta["uid"]] - peak)
    return out


def no_pod_too_many(most, name):
    assert most["+" + name] <= 0, "one of %s's ReplicaSets had %d active pods more than it " \
        "ever asked for" % (name, most["+" + name])


class ActivePods:
    """Samples active_by_app (or another count by app: `count`) every 50 ms
    in a thread and keeps the most seen."""

    def __init__(self, ctx, count=active_by_app):
        self.api, self.ns, self.count = ctx.api, ctx.ns, count
        self.most = Counter()
        self.samples = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.is_set():
            try:
                seen = self.count(self.api, self.ns)
            except (OSError, http.client.HTTPException, ValueError):
                continue  # the server is being restarted
            for app, n in seen.items():
                self.most[app] = max(self.most[app], n)
            self.samples += 1
            self.stopping.wait(0.05)

    def stop(self):
        self.stopping.set()
        self.thread.join()
        assert self.samples > 10, "only %d samples" % self.samples
        return self.most


def last_request(ctx):
    return ctx.api.get("/_sim/requests").json()["last"]


def requests_since(ctx, last):
    return [r for r in ctx.api.get("/_sim/requests?since=%d" % last).json()["items"]
            if r["namespace"] == ctx.ns or not r["namespace"]]


def cache_lists(requests):
    """kcm's lists of a whole kind (its caches'), by resource: lists, and
    watches that stream a list (sendInitialEvents=true); not the list in a
    namespace that looks a taken pod name up."""
    def full(r):
        query = urllib.parse.parse_qs(r.get("query") or "")
        return r["verb"] == "list" or (r["verb"] == "watch" and
                                       query.get("sendInitialEvents") == ["true"])
    return Counter(r["resource"] for r in requests if full(r)
                   and r["userAgent"].startswith("kcm/") and not r["namespace"])


def exactly(ctx, name, n, timeout=90):
    """Wait for the Deployment to complete with n replicas; then it has n
    active pods, all of one ReplicaSet."""
    d, rses = wait_state(ctx, name, lambda d, rses: complete(d) and d["spec"]["replicas"] == n,
                         "deployment %s to complete with %d replicas" % (name, n), timeout)
    active = active_by_app(ctx.api, ctx.ns)[name]
    assert active == n, "%d active pods for %d replicas; %s" % (active, n, summary(d, rses))
    assert len([rs for rs in rses if rs["spec"]["replicas"]]) == (1 if n else 0), summary(d, rses)


def settled(ctx, name, n):
    """Create a Deployment of n replicas, wait for it, then start sampling."""
    ctx.apply(deployment(name, n))
    exactly(ctx, name, n)
    return ActivePods(ctx)


@scenario("with watch events 5 s late, a Deployment scaled from 0 to 100 never runs more than "
          "100 pods", needs_sim="it delays the server's watch events")
def late_watch(ctx):
    sampler = settled(ctx, "late", 0)
    ctx.api.faults(watchDelayMs=5000)
    try:
        ctx.k("scale", "deployment/late", "--replicas=100")
        wait_for(lambda: active_by_app(ctx.api, ctx.ns)["late"] >= 100, timeout=90,
                 interval=0.2, what="100 active pods")
        time.sleep(6)  # longer than the delay: late events must not add pods
    finally:
        ctx.api.faults(clear=True)
    most = sampler.stop()
    exactly(ctx, "late", 100)
    assert most["late"] == 100, "%d active pods at one moment; at most 100 wanted" % most["late"]


@scenario("history compacted under kcm's watches: it relists each kind once at most and "
          "converges",
          needs_sim="it compacts the server's history under kcm's watches")
def compacted(ctx):
    ctx.apply(deployment("compacted", 5))
    exactly(ctx, "compacted", 5)
    last = last_request(ctx)
    ctx.k("scale", "deployment/compacted", "--replicas=15")
    # Every watch ends and finds its resourceVersion gone: 410 Gone.
    ctx.api.faults(compact=True, dropWatches=True)
    exactly(ctx, "compacted", 15)
    lists = cache_lists(requests_since(ctx, last))
    if ctx.env.is_kcm:
        # A kind whose last version kcm saw is the newest the server wrote
        # (the ReplicaSet just scaled, say) may watch on without a 410.
        assert sum(lists.values()) >= 1 and max(lists.values()) == 1, lists


DROP_SECONDS = float(os.environ.get("KCM_E2E_DROP_SECONDS", "60"))


@scenario("every watch dropped every 2 s for a minute while Deployments scale and roll: no pod "
          "too many or too few", needs_sim="it drops the server's watches")
def dropped_watches(ctx):
    names = ["drop%d" % i for i in range(3)]
    for name in names:
        ctx.apply(deployment(name, 4))
    for name in names:
        exactly(ctx, name, 4)
    # Upstream's bound is on the ReplicaSets' specs (see the soak below).
    sampler = ActivePods(ctx, asked)
    stop = threading.Event()

    def drop():
        while not stop.wait(2):
            ctx.api.faults(dropWatches=True)
    dropper = threading.Thread(target=drop, daemon=True)
    dropper.start()
    rng = random.Random(7)
    try:
        deadline = time.monotonic() + DROP_SECONDS
        while time.monotonic() < deadline:
            for name in names:
                if rng.random() < 0.5:
                    n = rng.randint(1, 8)
                    ctx.k("scale", "deployment/" + name, "--replicas=%d" % n)
                else:
                    ctx.k("set", "image", "deployment/" + name, "c=nginx:%d" % rng.randint(1, 99))
            time.sleep(2)
    finally:
        stop.set()
        dropper.join()
    for name in names:
        d = ctx.k.json("get", "deployment", name)
        exactly(ctx, name, d["spec"]["replicas"])
    most = sampler.stop()
    # At most 8 replicas, and maxSurge 25 % of that, rounded up: 10 pods.
    for name in names:
        assert most[name] <= 10, "%s's ReplicaSets asked for %d pods at one moment" % (
            name, most[name])
        no_pod_too_many(most, name)


@scenario("429 with Retry-After, then 500s, then 409 on status writes: kcm waits, retries and "
          "converges", needs_sim="it makes the server answer 429, 500 and 409")
def error_storm(ctx):
    ns = ctx.ns
    sampler = settled(ctx, "storm", 2)
    # Too many requests: the server asks for a second's pause.
    last = last_request(ctx)
    ctx.api.faults(rules=[
        {"verb": "create", "resource": "pods", "namespace": ns, "code": 429, "retryAfter": 1,
         "count": 4},
        {"verb": "patch", "resource": "replicasets", "namespace": ns, "code": 429,
         "retryAfter": 1, "count": 2}])
    ctx.k("scale", "deployment/storm", "--replicas=6")
    exactly(ctx, "storm", 6)
    reqs = requests_since(ctx, last)
    throttled = [r["time"] for r in reqs if r["code"] == 429 and r["resource"] == "pods"]
    created = [r["time"] for r in reqs if r["code"] == 201 and r["resource"] == "pods"]
    assert len(throttled) == 4, reqs
    assert min(created) - min(throttled) >= 0.9, "a pod created %.2f s after a 429" % (
        min(created) - min(throttled))
    # Server errors: the syncs fail and are retried with backoff.
    ctx.api.faults(rules=[{"verb": "create", "resource": "pods", "namespace": ns, "code": 500,
                           "count": 4}])
    ctx.k("scale", "deployment/storm", "--replicas=9")
    exactly(ctx, "storm", 9)
    # Conflicts on every status write for a while.
    last = last_request(ctx)
    ctx.api.faults(rules=[
        {"verb": ctx.env.status_verb, "resource": "replicasets", "subresource": "status",
         "namespace": ns, "code": 409, "count": 5},
        {"verb": ctx.env.status_verb, "resource": "deployments", "subresource": "status",
         "namespace": ns, "code": 409, "count": 5}])
    ctx.k("scale", "deployment/storm", "--replicas=4")
    exactly(ctx, "storm", 4)
    conflicts = [r for r in requests_since(ctx, last) if r["code"] == 409]
    assert len(conflicts) == 10, conflicts
    ctx.api.faults(clear=True)
    most = sampler.stop()
    assert most["storm"] <= 9, "%d active pods at one moment" % most["storm"]


@scenario("pod creates carried out but never answered: kcm sends them again under the same "
          "names, learns the pods were made, and makes none too many; a name taken gets "
          "another", needs_sim="it makes the server lose its answers to pod creates")
def lost_answers(ctx):
    ns = ctx.ns
    ctx.apply(deployment("lost", 0))
    exactly(ctx, "lost", 0)
    sampler = ActivePods(ctx, asked)
    active = ActivePods(ctx)
    last = last_request(ctx)
    ctx.api.faults(rules=[{"verb": "create", "resource": "pods", "namespace": ns,
                           "closeAfter": True, "count": 5}])
    ctx.k("scale", "deployment/lost", "--replicas=10")
    exactly(ctx, "lost", 10)
    reqs = [r for r in requests_since(ctx, last) if r["resource"] == "pods"]
    lost = [r for r in reqs if r["verb"] == "create" and r["code"] == 0]
    assert len(lost) == 5, "%d creates lost their answers" % len(lost)
    # Names said to be taken, by pods that are not there: other names.
    last = last_request(ctx)
    ctx.api.faults(rules=[{"verb": "create", "resource": "pods", "namespace": ns, "code": 409,
                           "reason": "AlreadyExists", "message": "taken", "count": 2}])
    ctx.k("scale", "deployment/lost", "--replicas=12")
    exactly(ctx, "lost", 12)
    ctx.api.faults(clear=True)
    most, most_active = sampler.stop(), active.stop()
    no_pod_too_many(most, "lost")
    assert most_active["lost"] == 12, "%d active pods at one moment" % most_active["lost"]
    taken = [r for r in requests_since(ctx, last) if r["resource"] == "pods"]
    # Looked up with a list by name: upstream's role for the ReplicaSet
    # controller may list pods, not get them.
    looked = [r["code"] for r in taken
              if r["verb"] == "list" and "fieldSelector=metadata.name" in r["query"]]
    assert looked == [200, 200], "the taken names were looked up: %s" % looked
    made = [r for r in taken if r["verb"] == "create" and r["code"] == 201]
    assert len(made) == 2, "%d pods made under new names" % len(made)
    deleted = [r["name"] for r in reqs + taken if r["verb"] == "delete"]
    assert not deleted, "pods made too many were deleted: %s" % deleted


@scenario("the API server killed mid-rollout and started again on its kept state: kcm carries "
          "on, relisting each kind once at most",
          needs_sim="it kills the server and starts it again")
def server_restarted(ctx):
    env = ctx.env
    ctx.apply(deployment("restarted", 10))
    exactly(ctx, "restarted", 10)
    sampler = ActivePods(ctx, asked)
    pid = env.kcm.proc.pid if env.kcm else None
    ctx.k("set", "image", "deployment/restarted", "c=nginx:2")
    wait_for(lambda: any(p["spec"]["containers"][0]["image"] == "nginx:2" for p in ctx.api.get(
        "/api/v1/namespaces/%s/pods" % ctx.ns).json()["items"]), timeout=30, interval=0.05,
        what="the rollout to start")
    env.sim.restart()
    d, rses = wait_state(ctx, "restarted", lambda d, rses: complete(d) and len(
        [rs for rs in rses if rs["spec"]["replicas"]]) == 1 and rses[-1]["spec"]["template"][
        "spec"]["containers"][0]["image"] == "nginx:2", "the rollout to finish", timeout=90)
    exactly(ctx, "restarted", 10)
    most = sampler.stop()
    # maxSurge 25 % of 10, rounded up. Upstream's bound is on the ReplicaSets'
    # specs: pods of one scaled down may outlive that for a moment (see the soak).
    assert most["restarted"] <= 13, "the ReplicaSets asked for %d pods at one moment" % (
        most["restarted"])
    # A create sent as the server died may have been made with its answer
    # lost: kcm sends it again under the same name and learns so.
    no_pod_too_many(most, "restarted")
    if env.kcm and env.is_kcm:
        assert env.kcm.alive() and env.kcm.proc.pid == pid, "kcm restarted"
        lists = cache_lists(requests_since(ctx, 0))
        assert all(n <= 1 for n in lists.values()), lists


def _short_lease_kcm(ctx, log_name):
    """A kcm with its own short lease, so one killed is followed within seconds."""
    ctx.env.allow_lease(ctx.ns)
    return ctx.env.own_kcm(ctx.env.workdir, log_name=log_name,
                           extra=("--leader-elect-resource-name=" + ctx.ns,
                                  "--leader-elect-lease-duration=3s",
                                  "--leader-elect-renew-deadline=2s",
                                  "--leader-elect-retry-period=0.5s"))


@scenario("kcm killed with SIGKILL while scaling to 100 and restarted: 100 pods, never more; "
          "killed and restarted with nothing to do: no write",
          needs_sim="it counts kcm's writes in the server's request log")
def killed_mid_scale(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    with suite_kcm_stopped(ctx, "kcm-after-faults.log"):
        kcm = None
        try:
            kcm = _short_lease_kcm(ctx, "kcm-before-kill.log")
            ctx.apply(deployment("killed", 0))
            exactly(ctx, "killed", 0, timeout=60)
            sampler = ActivePods(ctx)
            ctx.k("scale", "deployment/killed", "--replicas=100")
            wait_for(lambda: active_by_app(ctx.api, ctx.ns)["killed"] >= 20, timeout=60,
                     interval=0.05, what="the first pods")
            kcm.stop(sig=signal.SIGKILL)
            kcm = _short_lease_kcm(ctx, "kcm-after-kill.log")
            exactly(ctx, "killed", 100)
            most = sampler.stop()
            assert most["killed"] == 100, "%d active pods at one moment" % most["killed"]
            # Killed again with nothing left to do: the next one writes nothing.
            kcm.stop(sig=signal.SIGKILL)
            last = last_request(ctx)
            kcm = _short_lease_kcm(ctx, "kcm-idle-restart.log")
            wait_for(lambda: "successfully acquired lease" in kcm.text(), timeout=30,
                     what="the restarted kcm to lead")
            wait_for(lambda: "starting controller" in kcm.text(), timeout=30,
                     what="the restarted kcm to start its controllers")
            time.sleep(2)  # room for an unwanted write to show
            writes = ["%s %s %s" % (r["verb"], r["resource"], r["name"])
                      for r in requests_since(ctx, last)
                      if r["userAgent"].startswith("kcm/") and r["verb"] in ("create", "delete")
                      and r["resource"] in ("pods", "replicasets")]
            assert not writes, "the restarted kcm wrote: %s" % writes
        finally:
            if kcm:
                kcm.stop()


SOAK_SECONDS = float(os.environ.get("KCM_E2E_SOAK_SECONDS", "30"))


def _surge(replicas, value):
    """maxSurge (int or percent, rounded up) for a number of replicas."""
    if isinstance(value, str):
        return -(-replicas * int(value.rstrip("%")) // 100)
    return value


@scenario("soak: 20 Deployments scaled, rolled, paused, resumed, rolled back and robbed of pods "
          "at random; never more replicas than replicas + maxSurge, every spec met in the end",
          needs_sim="it changes objects through the server's own client, faster than kubectl")
def soak(ctx):
    """KCM_E2E_SOAK_SECONDS sets how long the changes go on (CI: 30 s). The
    bound is upstream's: the ReplicaSets of a Deployment ask for at most
    replicas + maxSurge pods (pods of a ReplicaSet scaled down may outlive
    that for a moment, as the ReplicaSet controller deletes them)."""
    rng = random.Random(int(os.environ.get("KCM_E2E_SOAK_SEED", "11")))
    api, ns = ctx.api, ctx.ns
    base = "/apis/apps/v1/namespaces/%s/deployments" % ns
    strategies = [("25%", "25%"), (1, 0), (0, 1), (2, 1)]
    names = ["soak%d" % i for i in range(20)]
    surge, history, paused = {}, {}, set()
    for i, name in enumerate(names):
        s, u = strategies[i % len(strategies)]
        n = rng.randint(1, 5)
        surge[name] = s
        history[name] = [(time.monotonic(), n)]
        r = api.post(base, json.loads(deployment(name, n, strategy=rolling(s, u),
                                                 revisionHistoryLimit=3)))
        assert r.status == 201, r.body
    for name in names:
        exactly(ctx, name, history[name][-1][1])

    violations, stop = [], threading.Event()

    def allowed(name, now):
        # The most replicas asked for in the last 10 s, the value in force
        # 10 s ago included: kcm may not have seen a change yet.
        before = [n for t, n in history[name] if t < now - 10][-1:]
        most = max(before + [n for t, n in history[name] if t >= now - 10])
        return most + _surge(most, surge[name])

    def watch():
        samples = 0
        while not stop.is_set():
            now = time.monotonic()
            try:
                seen = asked(api, ns)
            except (OSError, http.client.HTTPException, ValueError):
                continue
            samples += 1
            for name in names:
                if seen[name] > allowed(name, now):
                    violations.append("%s: its ReplicaSets ask for %d pods, at most %d allowed" % (
                        name, seen[name], allowed(name, now)))
                if seen["+" + name] > 0:
                    violations.append("%s: a ReplicaSet has %d active pods more than it ever "
                                      "asked for" % (name, seen["+" + name]))
            stop.wait(0.1)
        assert samples > 10

    checker = threading.Thread(target=watch, daemon=True)
    checker.start()
    ops = Counter()
    try:
        deadline = time.monotonic() + SOAK_SECONDS
        while time.monotonic() < deadline and not violations:
            name = rng.choice(names)
            op = rng.choice(["scale", "scale", "image", "image", "pause", "undo", "kill"])
            ops[op] += 1
            if op == "scale":
                n = rng.randint(0, 8)
                history[name].append((time.monotonic(), n))
                api.patch(base + "/" + name, {"spec": {"replicas": n}})
            elif op == "image":
                api.patch(base + "/" + name, {"spec": {"template": {"spec": {"containers": [
                    {"name": "c", "image": "nginx:%d" % rng.randint(1, 40)}]}}}}, "strategic")
            elif op == "pause":
                api.patch(base + "/" + name, {"spec": {"paused": name not in paused}})
                paused.symmetric_difference_update({name})
            elif op == "undo":
                ctx.k.run("rollout", "undo", "deployment/" + name, check=False)
            else:
                pods = api.get("/api/v1/namespaces/%s/pods?labelSelector=app%%3D%s" % (
                    ns, name)).json()["items"]
                if pods:
                    victim = rng.choice(pods)["metadata"]["name"]
                    api.delete("/api/v1/namespaces/%s/pods/%s" % (ns, victim))
            time.sleep(rng.uniform(0.05, 0.3))
        for name in paused:
            api.patch(base + "/" + name, {"spec": {"paused": False}})
        for name in names:
            d = api.get(base + "/" + name).json()
            exactly(ctx, name, d["spec"]["replicas"], timeout=120)
            image = d["spec"]["template"]["spec"]["containers"][0]["image"]
            pods = api.get("/api/v1/namespaces/%s/pods?labelSelector=app%%3D%s" % (
                ns, name)).json()["items"]
            stale = [p["metadata"]["name"] for p in pods if not p["metadata"].get(
                "deletionTimestamp") and p["spec"]["containers"][0]["image"] != image]
            assert not stale, "%s: pods of an old template: %s" % (name, stale)
    finally:
        stop.set()
        checker.join()
    assert not violations, violations[:5]
    print("    soak: %.0f s, %s" % (SOAK_SECONDS, ", ".join(
        "%s %d" % kv for kv in sorted(ops.items()))), flush=True)
