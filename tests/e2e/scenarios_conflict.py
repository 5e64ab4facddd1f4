"""Another controller doing kcm's job: noticed by its status writes,
reported with bounded names, stood aside from in the namespaces it writes
(and everywhere once it writes in enough of them), and given back to kcm
once it stops. What a tenant can write stands nothing aside beyond the
namespaces whose status it may write."""

import json
import os
import re
import time

from harness import (Skip, extra_namespaces, http_get, plain_port, scenario, suite_kcm_stopped,
                     wait_for)
from scenarios_deployment import complete, deployment, wait_state
from scenarios_faults import ActivePods, active_by_app, exactly, last_request, requests_since

STAND_IN = "kube-controller-manager"
HELD = "another controller writes the status of what kcm's"
EVERYWHERE = "manages in"


def _metric(port, name):
    """{labels text: value} of a gauge on kcm's /metrics."""
    body = http_get(port, "/metrics")[1]
    return {labels: float(v) for labels, v in re.findall(
        r"^%s\{([^}]*)\} (\S+)$" % name, body, re.M)}


def _held_namespaces(port):
    """kcm_conflicting_namespaces by kind."""
    return {re.search(r'kind="(\w+)"', k).group(1): int(v)
            for k, v in _metric(port, "kcm_conflicting_namespaces").items()}


def _everywhere(port):
    """kcm_conflicting_controller by kind: (manager, value)."""
    out = {}
    for labels, v in _metric(port, "kcm_conflicting_controller").items():
        kind = re.search(r'kind="(\w+)"', labels).group(1)
        out[kind] = (re.search(r'manager="([^"]*)"', labels).group(1), int(v))
    return out


def _held_in(log, ns):
    """The areas kcm's log says are held in namespace ns."""
    return {a for a in ("replicaset", "deployment")
            for line in log.splitlines()
            if "%s %s controller manages;" % (HELD, a) in line and 'namespace="%s"' % ns in line}


def _set_ready(ctx, pod, ready):
    cond = {"type": "Ready", "status": "True" if ready else "False"}
    r = ctx.api.patch("/api/v1/namespaces/%s/pods/%s/status" % (ctx.ns, pod),
                      {"status": {"conditions": [cond]}})
    assert r.status == 200, r.body


def _ready_replicas(ctx, rs):
    return ctx.api.get("/apis/apps/v1/namespaces/%s/replicasets/%s" % (ctx.ns, rs)).json()[
        "status"].get("readyReplicas", 0)


def _race(ctx, kcm, app):
    """Make two pods of app not ready, then ready again one at a time, so
    that both controllers write the ReplicaSet's and the Deployment's status,
    until kcm's log says both areas are held in ctx's namespace. kcm reports
    fewer ready pods, and a ReplicaSet back at its spec, at once, as the
    stand-in does: either may write those first. One pod ready of two, kcm
    reports --status-write-interval after its last status write, and the
    stand-in at once: the stand-in writes it."""
    rs = [r for r in ctx.k.json("get", "rs", "-l", "app=" + app)["items"]
          if r["spec"]["replicas"]][0]["metadata"]["name"]
    pods = [p["metadata"]["name"]
            for p in ctx.api.get("/api/v1/namespaces/%s/pods" % ctx.ns).json()["items"]
            if p["metadata"]["name"].startswith(rs)]
    total = _ready_replicas(ctx, rs)
    assert total >= 2 and len(pods) >= 2, (total, pods)
    # Until kcm has seen a write of the other's in two different seconds (the
    # managedFields time has no finer grain): rounds come faster than that.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        for pod in pods[:2]:
            _set_ready(ctx, pod, False)
        wait_for(lambda: _ready_replicas(ctx, rs) == total - 2, what="two pods not ready")
        for i, pod in enumerate(pods[:2]):
            _set_ready(ctx, pod, True)
            wait_for(lambda: _ready_replicas(ctx, rs) == total - 1 + i,
                     what="%d of the two pods ready again" % (i + 1))
        if len(_held_in(kcm.text(), ctx.ns)) == 2:
            return
    raise AssertionError("kcm did not stand aside in %s: %s" % (ctx.ns, kcm.text()[-3000:]))


def _complete(ctx, name, n, timeout=60):
    """Wait, with kubectl alone, for the Deployment to complete with n replicas."""
    wait_state(ctx, name, lambda d, rses: complete(d) and d["spec"]["replicas"] == n,
               "deployment %s to complete with %d replicas" % (name, n), timeout)


def _events(ctx, ns, **match):
    """Warning events ConflictingController in ns."""
    items = ctx.k.json("get", "events", "-n", ns, "--field-selector",
                       "reason=ConflictingController", namespaced=False)["items"]
    return [e for e in items if e["type"] == "Warning"
            and all(e["involvedObject"].get(k) == v for k, v in match.items())]


def _leading_kcm(ctx, d, log_name, *extra):
    """kcm of the scenario's own, leading with a Lease named after the
    namespace, once it says it leads."""
    kcm = ctx.env.own_kcm(d, log_name, extra=(
        "--leader-elect-resource-name=" + ctx.ns, "--leader-elect-lease-duration=3s",
        "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=0.5s", *extra))
    wait_for(lambda: "starting controller" in kcm.text(), timeout=30, what="kcm to lead")
    return kcm


def _stand_in(ctx, d, log_name):
    """A copy of kcm under kube-controller-manager's name, which the API
    server records as its field manager, writing without a lease or
    standing aside (as kube-controller-manager's controllers turned back on
    would); once its caches are synced."""
    stand_in = os.path.join(d, STAND_IN)
    if not os.path.exists(stand_in):
        os.symlink(os.path.abspath(ctx.env.kcm_binary), stand_in)
    other = ctx.env.own_kcm(d, log_name, binary=stand_in, extra=(
        "--leader-elect=false", "--stand-aside-on-conflict=false",
        "--status-write-interval=0", "--deployment-sync-interval=0"))
    wait_for(lambda: "caches synced" in other.text(), timeout=30, what="the stand-in to sync")
    return other


def _made_pods(ctx, last, ns):
    """Pods kcm created in ns since request `last` of the local API server."""
    return [r for r in ctx.api.get("/_sim/requests?since=%d" % last).json()["items"]
            if r["namespace"] == ns and r["verb"] == "create" and r["resource"] == "pods"
            and r["userAgent"].startswith("kcm/")]


@scenario("another controller writing the status of kcm's objects: kcm stands aside in that "
          "namespace, then in every namespace once it writes in a system namespace, says so with bounded "
          "names on every channel, and takes over again once it stops; kubectl edits raise "
          "nothing",
          needs_sim="it counts each controller's writes in the server's request log")
def second_controller(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    env.allow_lease(ctx.ns)
    with suite_kcm_stopped(ctx, "kcm-after-conflict.log") as d, \
            extra_namespaces(ctx, "b", "c") as (b, c):
        # kcm, leading with a lease of its own; then a stand-in for
        # kube-controller-manager.
        kcm = _leading_kcm(ctx, d, "conflict-kcm.log", "--conflict-quiet-period=20s",
                           "--conflict-system-namespaces=" + b.ns)
        other = None
        try:
            health, metrics = plain_port(kcm, "health probes"), plain_port(kcm, "metrics")
            for x, n in ((ctx, 2), (b, 2), (c, 1)):
                x.apply(deployment("web", n))
            for x, n in ((ctx, 2), (b, 2), (c, 1)):
                exactly(x, "web", n)
            # A user's edits: a scale, an annotation, a label, a new template.
            ctx.k("scale", "deployment/web", "--replicas=3")
            ctx.k("annotate", "deployment/web", "team=blue")
            ctx.k("label", "rs", "-l", "app=web", "tier=front")
            ctx.k("set", "image", "deployment/web", "c=nginx:1.9.1")
            exactly(ctx, "web", 3)
            assert HELD not in kcm.text(), kcm.text()[-3000:]
            assert http_get(health, "/readyz")[0] == 200

            other = _stand_in(ctx, d, "stand-in.log")

            # One namespace: held there, nowhere else; kcm stays ready.
            _race(ctx, kcm, "web")
            line = next(ln for ln in kcm.text().splitlines()
                        if HELD + " replicaset controller manages;" in ln)
            assert 'manager="%s"' % STAND_IN in line and "standing aside in its namespace" in line, line
            print("    " + line[line.index("another"):])
            wait_for(lambda: _held_namespaces(metrics) == {"ReplicaSet": 1, "Deployment": 1},
                     timeout=10, what="kcm_conflicting_namespaces 1 for both kinds")
            assert all(v == 0 for _, v in _everywhere(metrics).values()), _everywhere(metrics)
            assert http_get(health, "/readyz")[0] == 200
            example = re.search(r'object="([^"]+)"', line).group(1)
            # The stand-in, a kcm too, may report kcm's writes on the same
            # object ("other", writing on): kcm's event is the one naming it.
            on_object = wait_for(lambda: [e for e in _events(ctx, ctx.ns, name=example)
                                          if STAND_IN in e["message"]], timeout=20,
                                 what="kcm's event on " + example)
            assert "standing aside here" in on_object[0]["message"], on_object[0]["message"]
            assert not _events(ctx, "kube-system", name=ctx.ns), "an event on the Lease"
            # Held here: the stand-in alone scales.
            last = last_request(ctx)
            ctx.k("scale", "deployment/web", "--replicas=5")
            wait_for(lambda: active_by_app(ctx.api, ctx.ns)["web"] == 5, timeout=30,
                     what="5 pods")
            assert not _made_pods(ctx, last, ctx.ns), "kcm made pods while standing aside"

            # A system namespace (one only administrators write): every
            # namespace is held.
            _race(b, kcm, "web")
            log = kcm.text()
            line = next(ln for ln in log.splitlines() if EVERYWHERE in ln and HELD in ln)
            assert ("in 2 namespaces, a system namespace among them; standing aside in every "
                    "namespace") in line, line
            print("    " + line[line.index("another"):])
            wait_for(lambda: _everywhere(metrics) == {"ReplicaSet": (STAND_IN, 1),
                                                      "Deployment": (STAND_IN, 1)},
                     timeout=10, what="kcm_conflicting_controller 1 for both kinds")
            code, body = http_get(health, "/readyz?verbose")
            assert code == 500 and "[-]sole-controller failed" in body, (code, body)
            on_lease = wait_for(lambda: _events(ctx, "kube-system", name=ctx.ns), timeout=20,
                                what="the event on the Lease")
            assert on_lease[0]["involvedObject"]["kind"] == "Lease", on_lease
            assert "in 2 namespaces" in on_lease[0]["message"], on_lease[0]["message"]
            last = last_request(ctx)
            c.k("scale", "deployment/web", "--replicas=4")
            wait_for(lambda: active_by_app(ctx.api, c.ns)["web"] == 4, timeout=30,
                     what="4 pods in " + c.ns)
            assert not _made_pods(ctx, last, c.ns), "kcm made pods while standing aside"

            # The stand-in stops: after the quiet period kcm writes again.
            sampler = ActivePods(ctx)
            assert other.stop() == 0
            other = None
            wait_for(lambda: _everywhere(metrics) == {"ReplicaSet": (STAND_IN, 0),
                                                      "Deployment": (STAND_IN, 0)}
                     and _held_namespaces(metrics) == {"ReplicaSet": 0, "Deployment": 0},
                     timeout=60, what="kcm to take over again")
            assert kcm.text().count("writes again in every namespace") == 2, kcm.text()[-3000:]
            assert http_get(health, "/readyz")[0] == 200
            last = last_request(ctx)
            ctx.k("scale", "deployment/web", "--replicas=6")
            exactly(ctx, "web", 6)
            most = sampler.stop()
            assert most["web"] <= 6, "%d active pods at one moment" % most["web"]
            made = [r for r in requests_since(ctx, last) if r["verb"] == "create"
                    and r["resource"] == "pods" and r["code"] == 201]
            assert len(made) == 1, "%d pods made for 1 more replica: %s" % (
                len(made), json.dumps(made)[:2000])
        finally:
            for p in (other, kcm):
                if p:
                    p.stop()


# --- what a tenant can write ----------------------------------------------------------------

TENANT_RULES = [  # as the aggregated `edit` role grants them for apps
    {"apiGroups": ["apps"], "resources": ["deployments", "replicasets", "deployments/scale",
                                          "replicasets/scale"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
]
STATUS_RULES = [{"apiGroups": ["apps"], "resources": ["deployments/status", "replicasets/status"],
                 "verbs": ["get", "update", "patch"]}]
EVIL = 'x"} 1 kcm_evil{a="y'  # a field manager no label or event may carry


def _grant(ctx, ns, name, rules):
    """A Role of rules in ns, bound to the ServiceAccount tenant of ns."""
    meta = {"name": name, "namespace": ns}
    ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}
    for obj in ({"kind": "Role", "metadata": meta, "rules": rules},
                {"kind": "RoleBinding", "metadata": meta, "roleRef": ref,
                 "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": ns}]}):
        obj["apiVersion"] = "rbac.authorization.k8s.io/v1"
        ctx.k("apply", "-f", "-", stdin=json.dumps(obj), namespaced=False)


def _forged(manager, when, field="readyReplicas"):
    return {"manager": manager, "operation": "Update", "apiVersion": "apps/v1", "time": when,
            "fieldsType": "FieldsV1", "subresource": "status",
            "fieldsV1": {"f:status": {"f:" + field: {}}}}


def _in(seconds):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + seconds))


@scenario("what a tenant may write stands nothing aside: ReplicaSets claiming a Deployment "
          "made under kube-controller-manager's name, forged managedFields on creates and "
          "updates, an admin's one-off status write; status writes by a tenant allowed them "
          "hold back only the tenant's namespace, named by no string the tenant chose")
def tenant_cannot_switch_kcm_off(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    env.allow_lease(ctx.ns)
    own = ctx.ns + "-t"
    ctx.k("create", "namespace", own, namespaced=False)
    tns, token = env.user_token(own, "tenant")  # the local API server's is in a fixed one
    ctx.k("create", "namespace", tns, namespaced=False, check=False)  # may exist
    _grant(ctx, tns, "tenant-apps", TENANT_RULES)
    tenant = env.token_kubectl(token, tns)
    with suite_kcm_stopped(ctx, "kcm-after-tenant.log") as d:
        # Every namespace held only while a system namespace is (kcm's
        # default, kube-system), where the tenant writes nothing.
        kcm = env.own_kcm(d, "tenant-kcm.log", extra=(
            "--leader-elect-resource-name=" + ctx.ns, "--leader-elect-lease-duration=3s",
            "--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=0.5s",
            "--conflict-quiet-period=10s"))
        try:
            health, metrics = plain_port(kcm, "health probes"), plain_port(kcm, "metrics")
            wait_for(lambda: "starting controller" in kcm.text(), timeout=30,
                     what="kcm to lead")
            ctx.apply(deployment("web", 2))
            _complete(ctx, "web", 2)

            # The tenant's own Deployment, and ReplicaSets claiming it that
            # the tenant makes under kube-controller-manager's name, with
            # managedFields naming it the status writer from now to 2099.
            tenant("apply", "-f", "-", stdin=deployment("mine", 1))
            mine = tenant.json("get", "deployment/mine")
            wait_for(lambda: tenant.json("get", "deployment/mine")["status"].get(
                "readyReplicas") == 1, timeout=60, what="the tenant's Deployment")
            owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "mine",
                     "uid": mine["metadata"]["uid"], "controller": True,
                     "blockOwnerDeletion": True}
            for i, when in enumerate((_in(1), _in(30), "2099-01-01T00:00:00Z")):
                labels = {"app": "mine", "decoy": str(i)}
                rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                      "metadata": {"name": "decoy-%d" % i, "ownerReferences": [owner],
                                   "labels": labels,
                                   "managedFields": [_forged(STAND_IN, when),
                                                     _forged(EVIL, when, "replicas")]},
                      "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                               "template": {"metadata": {"labels": labels},
                                            "spec": {"containers": [{"name": "c",
                                                                     "image": "nginx"}]}}}}
                tenant("create", "--field-manager=" + STAND_IN, "-f", "-", stdin=json.dumps(rs))
            made = tenant.json("get", "rs", "decoy-2", "--show-managed-fields")
            assert STAND_IN in [e["manager"] for e in made["metadata"]["managedFields"]
                                if e.get("subresource") == "status"], \
                "the API server dropped the managedFields sent: %s" % made["metadata"]

            # Updates of the tenant's own objects forging the status writer,
            # each followed by a status write of kcm's beside the forgery.
            for i, when in enumerate((_in(2), "2099-01-01T00:00:00Z")):
                for kind, name in (("deployment", "mine"), ("rs", "decoy-%d" % i)):
                    obj = tenant.json("get", kind, name, "--show-managed-fields")
                    obj["metadata"]["managedFields"] = (
                        obj["metadata"].get("managedFields", []) +
                        [_forged(STAND_IN, when), _forged(EVIL, _in(-1), "replicas")])
                    obj["metadata"].setdefault("annotations", {})["round"] = str(i)
                    tenant("replace", "-f", "-", stdin=json.dumps(obj))
                tenant("scale", "deployment/mine", "--replicas=%d" % (2 + i))
                wait_for(lambda: tenant.json("get", "deployment/mine")["status"].get(
                    "readyReplicas") == 2 + i, timeout=60, what="kcm to roll the tenant's scale")

            # An admin's one-off status write, as upstream's e2e spec "should
            # run the lifecycle of a Deployment" makes one: kcm writes the
            # real status back.
            ctx.k("patch", "deployment/web", "--subresource=status", "--type=merge",
                  "-p", '{"status":{"readyReplicas":0,"availableReplicas":0}}')
            wait_for(lambda: ctx.k.json("get", "deployment/web")["status"].get(
                "availableReplicas") == 2, timeout=30, what="kcm to write the status back")

            # Nothing is held: the victim scales, a new Deployment rolls out.
            ctx.k("scale", "deployment/web", "--replicas=4")
            ctx.apply(deployment("new", 1))
            _complete(ctx, "web", 4)
            _complete(ctx, "new", 1)
            log = kcm.text()
            assert HELD not in log, log[-3000:]
            assert _held_namespaces(metrics) == {"ReplicaSet": 0, "Deployment": 0}
            assert all(v == 0 for _, v in _everywhere(metrics).values()), _everywhere(metrics)
            assert http_get(health, "/readyz")[0] == 200

            # Allowed to write status, the tenant holds back its own namespace.
            _grant(ctx, tns, "tenant-status", STATUS_RULES)
            for i in range(30):
                tenant("patch", "rs/decoy-0", "--subresource=status", "--type=merge",
                       "--field-manager=" + EVIL,
                       "-p", json.dumps({"status": {"replicas": 1, "readyReplicas": i % 2,
                                                    "observedGeneration": 1}}))
                if _held_namespaces(metrics).get("ReplicaSet") == 1:
                    break
                time.sleep(1)  # the server stamps whole seconds: a newer entry
            assert _held_namespaces(metrics) == {"ReplicaSet": 1, "Deployment": 0}, \
                _held_namespaces(metrics)
            tenant("patch", "rs/decoy-0", "--subresource=status", "--type=merge",
                   "--field-manager=" + EVIL, "-p",
                   '{"status":{"replicas":1,"readyReplicas":1}}')
            line = next(ln for ln in kcm.text().splitlines() if HELD in ln)
            assert 'namespace="%s"' % tns in line and 'manager="other"' in line, line
            ctx.k("scale", "deployment/web", "--replicas=5")
            _complete(ctx, "web", 5)
            assert http_get(health, "/readyz")[0] == 200
            assert all(v == 0 for _, v in _everywhere(metrics).values()), _everywhere(metrics)
            body = http_get(metrics, "/metrics")[1]
            assert "kcm_evil" not in body, [ln for ln in body.splitlines() if "evil" in ln]
            on_decoy = wait_for(lambda: _events(ctx, tns, name="decoy-0"), timeout=20,
                                what="the event on decoy-0")
            assert "(other)" in on_decoy[0]["message"], on_decoy[0]["message"]
            assert not any("kcm_evil" in e["message"]
                           for ns in (tns, ctx.ns, "kube-system") for e in _events(ctx, ns))
            assert not _events(ctx, "kube-system", name=ctx.ns), "an event on the Lease"
            # Once quiet, kcm writes the tenant's ReplicaSet's status again.
            wait_for(lambda: "writes again namespace=\"%s\"" % tns in kcm.text(), timeout=40,
                     what="kcm to write again in " + tns)
            wait_for(lambda: tenant.json("get", "rs", "decoy-0")["status"].get(
                "readyReplicas", 0) == 0, timeout=30, what="kcm to sync the held ReplicaSet")
        finally:
            kcm.stop()
            for kind in ("role", "rolebinding"):
                ctx.k.run("delete", kind, "tenant-apps", "tenant-status", "-n", tns,
                          "--ignore-not-found", check=False, namespaced=False)
            tenant.run("delete", "deployment/mine", check=False)
            tenant.run("delete", "rs", "-l", "decoy", check=False)
            ctx.k.run("delete", "namespace", own, "--wait=false", check=False, namespaced=False)


# --- what kcm cannot have seen is no evidence -------------------------------------------------

def _deep_entry(depth=140):
    """A managedFields entry nested deeper than kcm once read."""
    v = {}
    for _ in range(depth):
        v = {"f:a": v}
    return {"manager": "tenant", "operation": "Update", "apiVersion": "apps/v1",
            "time": _in(0), "fieldsType": "FieldsV1", "fieldsV1": v}


def _tenant_rs(name):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}],
                                           "terminationGracePeriodSeconds": 1}}}}


def _all_ready(kubectls, names, what):
    """Wait for kcm to report each ReplicaSet of names ready in each namespace."""
    for k in kubectls:
        for name in names:
            wait_for(lambda: k.json("get", "rs", name)["status"].get("readyReplicas") == 1,
                     timeout=60, what="kcm to report %s %s ready" % (what, name))


def _scales_unheld(ctx):
    """The Deployment web of ctx's namespace scales from 2 to 4 within 30 s,
    and the suite's kcm holds no namespace."""
    start = time.monotonic()
    ctx.k("scale", "deployment/web", "--replicas=4")
    _complete(ctx, "web", 4, timeout=30)
    print("    the Deployment elsewhere scaled 2 to 4 in %.1f s" % (time.monotonic() - start))
    log = ctx.env.kcm.text()
    assert HELD not in log, [ln for ln in log.splitlines() if HELD in ln][:3]


def _tenant_in(ctx, spaces, rights="edit"):
    """kubectl for each namespace as one ServiceAccount bound to `rights`
    (a ClusterRole) in each of them, and nowhere else."""
    home = spaces[0].ns
    ctx.k("create", "serviceaccount", "tenant", "-n", home, namespaced=False)
    for x in spaces:
        ctx.k("create", "rolebinding", "tenant", "--clusterrole=" + rights,
              "--serviceaccount=%s:tenant" % home, "-n", x.ns, namespaced=False)
    token = ctx.k("create", "token", "tenant", "-n", home, namespaced=False).strip()
    return [ctx.env.token_kubectl(token, x.ns) for x in spaces]


@scenario("a tenant's hidden re-creates stand nothing aside: with edit rights in three "
          "namespaces, its ReplicaSets made deeper than kcm once read, deleted, made again "
          "with a forged status writer and made shallow again hold none of them, and a "
          "Deployment in a namespace it cannot read scales at once")
def hidden_recreates(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    if not env.real:
        raise Skip("the tenant is a ServiceAccount with the edit ClusterRole of kube-apiserver")
    ctx.apply(deployment("web", 2))
    _complete(ctx, "web", 2)
    with extra_namespaces(ctx, "t1", "t2", "t3") as spaces:
        tenants = _tenant_in(ctx, spaces)
        names = ("r1", "r2")
        for t in tenants:
            for name in names:
                t("create", "-f", "-", stdin=json.dumps(_tenant_rs(name)))
        _all_ready(tenants, names, "the tenant's")
        forged = _forged("other", _in(0), "replicas")
        for t in tenants:
            for name in names:
                rs = t.json("get", "rs", name, "--show-managed-fields")
                rs["metadata"]["managedFields"].append(_deep_entry())
                t("replace", "-f", "-", stdin=json.dumps(rs))
                t("delete", "rs", name, "--wait=true")
                again = _tenant_rs(name)
                again["metadata"]["managedFields"] = [forged, _deep_entry()]
                t("create", "-f", "-", stdin=json.dumps(again))
                rs = t.json("get", "rs", name, "--show-managed-fields")
                rs["metadata"]["managedFields"] = [e for e in rs["metadata"]["managedFields"]
                                                   if e["manager"] != "tenant"]
                t("replace", "-f", "-", stdin=json.dumps(rs))
        _scales_unheld(ctx)


@scenario("a relist is no evidence: ReplicaSets deleted and made again with a forged status "
          "writer in three namespaces while kcm's watches are held back, then found by the "
          "relist a 410 starts, hold no namespace, and a Deployment elsewhere scales at once",
          needs_sim="it holds kcm's watches back and compacts the server's history")
def relisted_recreates(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    ctx.apply(deployment("web", 2))
    _complete(ctx, "web", 2)
    names = ("r1", "r2")
    with extra_namespaces(ctx, "t1", "t2", "t3") as spaces:
        for x in spaces:
            for name in names:
                x.k("create", "-f", "-", stdin=json.dumps(_tenant_rs(name)))
        _all_ready([x.k for x in spaces], names, "the first")
        try:
            ctx.api.faults(watchDelayMs=120000)  # kcm sees none of what follows
            forged = _forged("other", _in(0), "replicas")
            for x in spaces:
                for name in names:
                    x.k("delete", "rs", name, "--wait=false")
                    again = _tenant_rs(name)
                    again["metadata"]["managedFields"] = [forged]
                    x.k("create", "-f", "-", stdin=json.dumps(again))
            # Its watches dropped and history gone: kcm relists.
            ctx.api.faults(watchDelayMs=0, dropWatches=True, compact=True)
        finally:
            ctx.api.faults(clear=True)
        _all_ready([x.k for x in spaces], names, "after the relist")
        _scales_unheld(ctx)


@scenario("standing aside in every namespace lasts only while its cause does: held in two "
          "namespaces with --conflict-cluster-namespaces=2, kcm writes again everywhere but "
          "there once one of them is quiet, though another controller keeps writing in the other",
          needs_sim="it counts each controller's writes in the server's request log")
def everywhere_lifts_with_its_cause(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    env.allow_lease(ctx.ns)
    quiet = 15
    with suite_kcm_stopped(ctx, "kcm-after-lift.log") as d, extra_namespaces(ctx, "b") as (b,):
        kcm = _leading_kcm(ctx, d, "lift-kcm.log", "--conflict-quiet-period=%ds" % quiet,
                           "--conflict-cluster-namespaces=2")
        other = None
        try:
            metrics = plain_port(kcm, "metrics")
            for x in (ctx, b):
                x.apply(deployment("web", 2))
            for x in (ctx, b):
                exactly(x, "web", 2)
            other = _stand_in(ctx, d, "lift-stand-in.log")
            _race(ctx, kcm, "web")
            _race(b, kcm, "web")
            wait_for(lambda: _everywhere(metrics).get("ReplicaSet", ("", 0))[1] == 1,
                     timeout=10, what="kcm to stand aside in every namespace")
            # Both controllers go on writing in ctx's namespace, none in b's.
            rs = [r for r in ctx.k.json("get", "rs", "-l", "app=web")["items"]
                  if r["spec"]["replicas"]][0]["metadata"]["name"]
            pod = [p["metadata"]["name"]
                   for p in ctx.api.get("/api/v1/namespaces/%s/pods" % ctx.ns).json()["items"]
                   if p["metadata"]["name"].startswith(rs)][0]
            start, ready, lifted = time.monotonic(), False, None
            while time.monotonic() - start < quiet + 25:
                _set_ready(ctx, pod, ready)
                ready = not ready
                time.sleep(1)
                if all(v == 0 for _, v in _everywhere(metrics).values()):
                    lifted = time.monotonic() - start
                    break
            assert lifted is not None, "still standing aside everywhere %d s on: %s" % (
                quiet + 25, _everywhere(metrics))
            held = _held_namespaces(metrics)
            assert held.get("ReplicaSet", 0) >= 1, held
            print("    every namespace lifted %.0f s after both were held, "
                  "with %s still held" % (lifted, held))
        finally:
            for p in (other, kcm):
                if p:
                    p.stop()
