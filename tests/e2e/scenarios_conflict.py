"""Another controller doing kcm's job: noticed, reported on every channel,
stood aside from, and given back to kcm once it stops."""

import json
import os
import re

from harness import Skip, http_get, plain_port, scenario, suite_kcm_stopped, wait_for
from scenarios_deployment import deployment
from scenarios_faults import ActivePods, active_by_app, exactly, last_request, requests_since

STAND_IN = "kube-controller-manager"
CONFLICT = "another controller is writing what kcm's"


def _conflicts(port):
    """kcm_conflicting_controller for the stand-in, by kind."""
    body = http_get(port, "/metrics")[1]
    return {kind: int(v) for kind, v in re.findall(
        r'^kcm_conflicting_controller\{kind="(\w+)",manager="%s"\} (\d)$' % STAND_IN, body,
        re.M)}


def _areas_told(log):
    return {a for a in ("replicaset", "deployment")
            if "%s %s controller manages" % (CONFLICT, a) in log}


def _set_ready(ctx, pod, ready):
    cond = {"type": "Ready", "status": "True" if ready else "False"}
    r = ctx.api.patch("/api/v1/namespaces/%s/pods/%s/status" % (ctx.ns, pod),
                      {"status": {"conditions": [cond]}})
    assert r.status == 200, r.body


def _ready_replicas(ctx, rs):
    return ctx.api.get("/apis/apps/v1/namespaces/%s/replicasets/%s" % (ctx.ns, rs)).json()[
        "status"].get("readyReplicas", 0)


@scenario("another controller writing kcm's objects is reported within a minute on every "
          "channel; kcm stands aside (no pod made twice) and takes over again once it stops; "
          "kubectl edits raise nothing",
          needs_sim="it counts each controller's writes in the server's request log")
def second_controller(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    env.allow_lease(ctx.ns)
    with suite_kcm_stopped(ctx, "kcm-after-conflict.log") as d:
        # kcm, leading with a lease of its own; and a copy of it under
        # kube-controller-manager's name, which the API server records as
        # its field manager, writing without a lease or standing aside (as
        # kube-controller-manager's controllers turned back on would).
        stand_in = os.path.join(d, STAND_IN)
        os.symlink(os.path.abspath(env.kcm_binary), stand_in)
        kcm = env.own_kcm(d, "conflict-kcm.log", extra=(
            "--leader-elect-resource-name=" + ctx.ns, "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=0.5s",
            "--conflict-quiet-period=10s"))
        other = None
        try:
            health, metrics = plain_port(kcm, "health probes"), plain_port(kcm, "metrics")
            wait_for(lambda: "starting controller" in kcm.text(), timeout=30,
                     what="kcm to lead")
            ctx.apply(deployment("web", 2))
            exactly(ctx, "web", 2)
            # A user's edits: a scale, an annotation, a label, a new template.
            ctx.k("scale", "deployment/web", "--replicas=3")
            ctx.k("annotate", "deployment/web", "team=blue")
            ctx.k("label", "rs", "-l", "app=web", "tier=front")
            ctx.k("set", "image", "deployment/web", "c=nginx:1.9.1")
            exactly(ctx, "web", 3)
            assert CONFLICT not in kcm.text(), kcm.text()[-3000:]
            assert http_get(health, "/readyz")[0] == 200

            other = env.own_kcm(d, "stand-in.log", binary=stand_in, extra=(
                "--leader-elect=false", "--stand-aside-on-conflict=false",
                "--status-write-interval=0", "--deployment-sync-interval=0"))
            wait_for(lambda: "caches synced" in other.text(), timeout=30,
                     what="the stand-in to sync")
            # Readiness changes make both write the ReplicaSet's and the
            # Deployment's status; kcm waits --status-write-interval before
            # reporting more ready pods, the stand-in does not, and writes
            # first. Until both of kcm's controllers have seen it.
            rs = ctx.k.json("get", "rs", "-l", "app=web")["items"]
            rs = [r for r in rs if r["spec"]["replicas"]][0]["metadata"]["name"]
            pod = [p for p in ctx.api.get("/api/v1/namespaces/%s/pods" % ctx.ns).json()["items"]
                   if p["metadata"]["name"].startswith(rs)][0]["metadata"]["name"]
            for _ in range(20):
                _set_ready(ctx, pod, False)
                wait_for(lambda: _ready_replicas(ctx, rs) == 2, what="a pod not ready")
                _set_ready(ctx, pod, True)
                wait_for(lambda: _ready_replicas(ctx, rs) == 3, what="the pod ready again")
                if len(_areas_told(kcm.text())) == 2:
                    break
            log = kcm.text()
            assert len(_areas_told(log)) == 2, log[-3000:]
            line = next(ln for ln in log.splitlines() if CONFLICT + " replicaset" in ln)
            assert 'manager="%s"' % STAND_IN in line, line
            assert 'object="%s/' % ctx.ns in line and "standing aside" in line, line
            print("    " + line[line.index("another"):])

            # Every channel: the metric, /readyz, events on the object and the Lease.
            both = {"ReplicaSet": 1, "Deployment": 1}
            wait_for(lambda: _conflicts(metrics) == both, timeout=10,
                     what="kcm_conflicting_controller 1 for both kinds")
            code, body = http_get(health, "/readyz?verbose")
            assert code == 500 and "[-]sole-controller failed" in body, (code, body)

            def events(ns, name):
                return [e for e in ctx.k.json("get", "events", "-n", ns, "--field-selector",
                                               "reason=ConflictingController",
                                               namespaced=False)["items"]
                        if e["involvedObject"]["name"] == name and e["type"] == "Warning"]
            on_lease = wait_for(lambda: events("kube-system", ctx.ns), timeout=20,
                                what="the event on the Lease")
            assert on_lease[0]["involvedObject"]["kind"] == "Lease", on_lease
            assert STAND_IN in on_lease[0]["message"], on_lease[0]["message"]
            example = line.split('object="%s/' % ctx.ns)[1].split('"')[0]
            wait_for(lambda: events(ctx.ns, example), timeout=20, what="the event on " + example)

            # Standing aside: the stand-in alone scales; kcm makes no pod.
            last = last_request(ctx)
            sampler = ActivePods(ctx)
            ctx.k("scale", "deployment/web", "--replicas=5")
            wait_for(lambda: active_by_app(ctx.api, ctx.ns)["web"] == 5, timeout=30,
                     what="5 pods")
            ours = [r for r in requests_since(ctx, last)
                    if r["verb"] == "create" and r["resource"] == "pods"
                    and r["userAgent"].startswith("kcm/")]
            assert not ours, "kcm made pods while standing aside: %s" % ours

            # The stand-in stops: after the quiet period kcm writes again.
            assert other.stop() == 0
            other = None
            wait_for(lambda: _conflicts(metrics) == {"ReplicaSet": 0, "Deployment": 0},
                     timeout=40, what="kcm to take over again")
            assert kcm.text().count("writes again") == 2, kcm.text()[-3000:]
            code, body = http_get(health, "/readyz?verbose")
            assert code == 200, body
            ctx.k("scale", "deployment/web", "--replicas=6")
            exactly(ctx, "web", 6)
            most = sampler.stop()
            assert most["web"] <= 6, "%d active pods at one moment" % most["web"]
            made = [r for r in requests_since(ctx, last) if r["verb"] == "create"
                    and r["resource"] == "pods" and r["code"] == 201]
            assert len(made) == 3, "%d pods made for 3 more replicas: %s" % (
                len(made), json.dumps(made)[:2000])
        finally:
            for p in (other, kcm):
                if p:
                    p.stop()
