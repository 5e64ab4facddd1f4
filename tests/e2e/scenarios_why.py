"""`kcm why`: what a rollout waits for, as kcm's planner sees it."""

import json
import os
import pty
import re
import select
import subprocess

from harness import Skip, is_kcm, scenario, wait_for
from scenarios_replicaset import rs_manifest
from scenarios_deployment import (BAD_IMAGE, IMAGE, IMAGE2, deployment, rolling, stalled,
                                  wait_complete, wait_state)

# An image whose containers exit soon after each start: the local API
# server's kubelet and the real cluster's kwok nodes leave its pods running,
# never ready, in CrashLoopBackOff after three restarts.
CRASHLOOP_IMAGE = "busybox:crashloop"


def why(ctx, *args):
    """kcm why with the harness's kubeconfig in the scenario's namespace."""
    return subprocess.run([ctx.env.kcm_binary, "why", *args, "-n", ctx.ns,
                           "--kubeconfig", ctx.env.kubeconfig],
                          capture_output=True, text=True, timeout=60)


def skip_unless_kcm(ctx):
    """kcm why is kcm's subcommand: another controller-manager under
    comparison has none. One kcm or several (--sharded), it reads alike."""
    if not is_kcm(ctx.env.kcm_binary):
        raise Skip("kcm why is kcm's own")


def why_until(ctx, *lines, args=("deployment/web",), also=None, timeout=60):
    """Ask kcm why until its answer (exit 0) holds every line, and also(answer)
    if given; the answer."""
    last = []

    def check():
        p = why(ctx, *args)
        last[:] = [p]
        return p.returncode == 0 and all(line in p.stdout for line in lines) and \
            (also is None or also(p.stdout)) and p.stdout
    try:
        return wait_for(check, timeout=timeout, interval=0.5, what="kcm why to say %r" % (lines,))
    except AssertionError as e:
        p = last[0] if last else None
        raise AssertionError("%s; last answer (exit %s):\n%s%s" % (
            e, p and p.returncode, p and p.stdout, p and p.stderr))


def pods_of(ctx, rs):
    return [p["metadata"]["name"] for p in ctx.k.json("get", "pods")["items"]
            if any(r.get("uid") == rs["metadata"]["uid"]
                   for r in p["metadata"].get("ownerReferences") or [])]


@scenario("kcm why: a rollout held at maxUnavailable 0 by a pod whose image never pulls")
def why_held_by_unavailable(ctx):
    skip_unless_kcm(ctx)
    ctx.apply(deployment("web", 3, strategy=rolling(1, 0)))
    wait_complete(ctx, "web")
    ctx.k("set", "image", "deployment/web", "c=" + BAD_IMAGE)
    held_at = stalled(3, 1)
    _, (old, new) = wait_state(
        ctx, "web", lambda d, rses: held_at(d, rses) and rses[1]["status"].get("replicas") == 1,
        "the rollout to stall at 3 and 1, its new pod counted")
    old_name, new_name = old["metadata"]["name"], new["metadata"]["name"]
    (held,) = pods_of(ctx, new)

    # The pod's own status says why: its image is not pulled.
    why_until(ctx, "waits for 1 more pod of %s to be available" % new_name,
              "then: scale ReplicaSet %s down 3 -> 2" % old_name,
              "maxUnavailable 0: at least 3 of 3 stay available, 3 are",
              "held back by:\n    pod %s: Pending" % held,
              "\n      container c: waiting, ImagePullBackOff",
              "3 replicas: 1 updated, 3 ready, 3 available")

    p = why(ctx, "deploy/web", "-o", "json")
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    answer = json.loads(p.stdout)
    assert (answer["state"], answer["waitsForAvailable"], answer["next"]) == (
        "waiting-for-available", 1,
        {"action": "scale", "replicaSet": old_name, "from": 3, "to": 2}), answer
    assert [h["pod"] for h in answer["heldBy"]] == [held], answer
    assert answer["heldBy"][0]["reasons"][0].startswith(
        "container c: waiting, ImagePullBackOff"), answer

    # --watch answers again as the rollout moves, and ends with it: off a
    # terminal, the whole answer first, then a line per change.
    watch = subprocess.Popen([ctx.env.kcm_binary, "why", "deployment/web", "--watch", "-n",
                              ctx.ns, "--kubeconfig", ctx.env.kubeconfig],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ctx.k("set", "image", "deployment/web", "c=" + IMAGE)
        out, err = watch.communicate(timeout=60)
    finally:
        watch.kill()
    assert watch.returncode == 0, (watch.returncode, out, err)
    first, _, rest = out.partition("  progress deadline: ")
    assert "waits for 1 more pod of %s" % new_name in first, out
    changes = rest.splitlines()[1:]
    assert changes and all(re.match(r"\d\d:\d\d:\d\d deployment/web: 3 replicas: \d+ updated, "
                                     r"\d+ ready, \d+ available; ", c) for c in changes), out
    assert changes[-1].endswith("complete: every replica updated and available"), out
    wait_complete(ctx, "web", rev=3)


@scenario("kcm why: --watch on a terminal redraws the answer in place until the rollout ends")
def why_watch_terminal(ctx):
    skip_unless_kcm(ctx)
    ctx.apply(deployment("web", 2, image=BAD_IMAGE, strategy=rolling(1, 0)))
    why_until(ctx, "waits for 2 more pods of web-")
    master, slave = pty.openpty()
    watch = subprocess.Popen([ctx.env.kcm_binary, "why", "deployment/web", "--watch", "-n",
                              ctx.ns, "--kubeconfig", ctx.env.kubeconfig],
                             stdout=slave, stderr=subprocess.PIPE,
                             env=dict(os.environ, TERM="xterm", LC_ALL="C.UTF-8"))
    os.close(slave)
    seen = b""
    try:
        ctx.k("set", "image", "deployment/web", "c=" + IMAGE)
        while True:
            ready, _, _ = select.select([master], [], [], 60)
            assert ready, "no output for 60 s: %r" % seen[-2000:]
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal closed: kcm why has exited
                break
            if not chunk:
                break
            seen += chunk
        assert watch.wait(timeout=30) == 0, (watch.returncode, seen, watch.stderr.read())
    finally:
        watch.kill()
        os.close(master)
    text = seen.decode()
    # Each later answer moves up over the one before and clears it.
    assert re.search(r"\x1b\[\d+A\x1b\[J", text), text
    last = re.split(r"\x1b\[\d+A\x1b\[J", text)[-1]
    assert "complete: every replica updated and available" in last, text
    assert "waits for" not in last and "[####################] 2 replicas" in last, text


@scenario("kcm why: a clean rollout is complete")
def why_clean_rollout(ctx):
    skip_unless_kcm(ctx)
    ctx.apply(deployment("web", 3, strategy=rolling(1, 1)))
    wait_complete(ctx, "web")
    ctx.k("set", "image", "deployment/web", "c=" + IMAGE2)
    wait_complete(ctx, "web", rev=2)
    out = why_until(ctx, "complete: every replica updated and available")
    assert "deployment/web in %s: revision 2, RollingUpdate (maxSurge 1, maxUnavailable 1)" % (
        ctx.ns) in out, out
    assert "[####################] 3 replicas: 3 updated, 3 ready, 3 available" in out, out
    assert "held back by" not in out, out
    answer = json.loads(why(ctx, "deployment/web", "-o", "json").stdout)
    assert (answer["state"], answer["heldBy"], answer["availableReplicas"]) == (
        "complete", [], 3), answer


@scenario("kcm why: a rollout held by a crash loop names the container, its restarts and exit")
def why_crash_loop(ctx):
    skip_unless_kcm(ctx)
    ctx.apply(deployment("web", 2, image=CRASHLOOP_IMAGE))
    out = why_until(ctx, "waits for 2 more pods of web-",
                    "container c: waiting, CrashLoopBackOff: back-off 40s restarting failed "
                    "container=c; restarted 3 times, last exit code 1 (Error)",
                    also=lambda out: out.count(
                        ": Running, not ready\n      container c: waiting, CrashLoopBackOff") == 2)


@scenario("kcm why: a rollout held by minReadySeconds says how long each pod has been ready")
def why_min_ready(ctx):
    skip_unless_kcm(ctx)
    ctx.apply(deployment("web", 2, minReadySeconds=300))
    out = why_until(ctx, "waits for 2 more pods of web-", ", minReadySeconds 300\n")
    out = why_until(ctx, "2 replicas: 2 updated, 2 ready, 0 available")
    assert out.count(" of minReadySeconds 300") == 2, out
    assert out.count(": Running, ready for ") == 2, out


@scenario("kcm why: a paused rollout waits for resume")
def why_paused(ctx):
    skip_unless_kcm(ctx)
    ctx.apply(deployment("web", 2))
    wait_complete(ctx, "web")
    ctx.k("rollout", "pause", "deployment/web")
    ctx.k("set", "image", "deployment/web", "c=" + IMAGE2)
    why_until(ctx, "paused: the rollout waits for `kubectl rollout resume`; only scaling is done")
    answer = json.loads(why(ctx, "deployment/web", "-o", "json").stdout)
    assert answer["state"] == "paused", answer
    ctx.k("rollout", "resume", "deployment/web")
    wait_complete(ctx, "web", rev=2)
    why_until(ctx, "complete: every replica updated and available")


@scenario("kcm why: a quota that refuses pods shows as ReplicaFailure with the server's words")
def why_quota(ctx):
    skip_unless_kcm(ctx)
    if ctx.env.sim:
        ctx.api.faults(rules=[{"verb": "create", "resource": "pods", "namespace": ctx.ns,
                               "code": 403, "message": 'pods "web-" is forbidden: exceeded '
                               'quota: one, requested: pods=1, used: pods=1, limited: pods=1'}])
    else:
        ctx.apply(json.dumps({"apiVersion": "v1", "kind": "ResourceQuota",
                              "metadata": {"name": "one"}, "spec": {"hard": {"pods": "1"}}}))
        wait_for(lambda: ctx.k.json("get", "resourcequota", "one").get("status", {}).get("hard"),
                 timeout=30, what="the quota's status")
    try:
        ctx.apply(deployment("web", 3))
        why_until(ctx, "ReplicaFailure (FailedCreate): pods ", "is forbidden: exceeded quota: one")
        (rs,) = ctx.k.json("get", "rs")["items"]
        why_until(ctx, "ReplicaFailure (FailedCreate): pods ", "is forbidden: exceeded quota: one",
                  args=("rs/" + rs["metadata"]["name"],))
        answer = json.loads(why(ctx, "rs/" + rs["metadata"]["name"], "-o", "json").stdout)
        assert "exceeded quota: one" in answer["replicaFailure"], answer
    finally:
        if ctx.env.sim:
            ctx.api.faults(clear=True)


@scenario("kcm why: a ReplicaSet says what it waits for, the pods holding it, and its owner")
def why_replicaset(ctx):
    skip_unless_kcm(ctx)
    ctx.apply(rs_manifest("pull", 2, image=BAD_IMAGE))
    out = why_until(ctx, "replicaset/pull in %s" % ctx.ns, "waits for 2 more pods to be available",
                    args=("replicaset.apps/pull",),
                    also=lambda out: out.count("container c: waiting, ImagePullBackOff") == 2)
    assert "[--------------------] 2 replicas: 2 created, 0 ready, 0 available" in out, out
    assert "controlled by" not in out, out
    answer = json.loads(why(ctx, "rs/pull", "-o", "json").stdout)
    assert (answer["state"], len(answer["heldBy"])) == ("waiting-for-available", 2), answer

    ctx.apply(deployment("web", 2))
    _, (rs,) = wait_complete(ctx, "web")
    out = why_until(ctx, "complete: every replica available",
                    "controlled by Deployment web: its rollout sets the replicas "
                    "(kcm why deployment/web)", args=("rs/" + rs["metadata"]["name"],))
    assert "held back by" not in out, out
    # A pod that failed: kcm replaces it after a back-off, upstream at once.
    (pod,) = pods_of(ctx, rs)[:1]
    ctx.k("patch", "pod", pod, "--subresource=status", "--type=merge",
          "-p", '{"status":{"phase":"Failed"}}')
    why_until(ctx, "unlike kube-controller-manager: pods of it failed: kcm replaces pods that "
              "keep failing after 1s, 2s, 4s, ... up to --failed-pod-backoff",
              args=("rs/" + rs["metadata"]["name"],))
    # --watch ends once the ReplicaSet is complete.
    ctx.k("scale", "rs/pull", "--replicas=0")
    p = subprocess.run([ctx.env.kcm_binary, "why", "rs/pull", "--watch", "-n", ctx.ns,
                        "--kubeconfig", ctx.env.kubeconfig],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "complete: every replica available" in p.stdout, (
        p.returncode, p.stdout, p.stderr)


@scenario("kcm why: a Deployment whose selector overlaps another's names it")
def why_overlap(ctx):
    skip_unless_kcm(ctx)
    ctx.apply(deployment("a", 1, labels={"app": "web"}))
    ctx.apply(deployment("b", 1, labels={"app": "web", "tier": "x"}))
    ctx.apply(deployment("c", 1, labels={"app": "other"}))
    out = why_until(ctx, "selector overlaps deployment/b's", args=("deployment/a",))
    assert "deployment/c" not in out, out
    answer = json.loads(why(ctx, "deployment/b", "-o", "json").stdout)
    assert answer["overlaps"] == ["a"], answer
    answer = json.loads(why(ctx, "deployment/c", "-o", "json").stdout)
    assert answer["overlaps"] == [], answer


@scenario("kcm why: a rollout past its progress deadline says so, and --watch fails")
def why_past_deadline(ctx):
    skip_unless_kcm(ctx)
    ctx.apply(deployment("web", 2, image=BAD_IMAGE, progressDeadlineSeconds=3))
    p = subprocess.run([ctx.env.kcm_binary, "why", "deployment/web", "--watch", "-n", ctx.ns,
                        "--kubeconfig", ctx.env.kubeconfig],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert p.stdout.rstrip().endswith("; progress deadline exceeded (3s without progress)"), \
        p.stdout


@scenario("kcm why: bad arguments and missing objects get a clear error")
def why_errors(ctx):
    skip_unless_kcm(ctx)
    p = why(ctx, "deployment/nothing-here")
    assert p.returncode == 3 and "deployment nothing-here not found in namespace %s" % ctx.ns \
        in p.stderr, (p.returncode, p.stdout, p.stderr)
    for args, message in ((("pods/x",), "kcm cannot explain a pods"),
                          (("deployment.v2.apps/web",), "kcm cannot explain a deployment.v2.apps"),
                          (("web",), "web is not KIND/NAME"),
                          (("deploy/web", "-o", "yaml"), "-o takes text or json"),
                          (("deploy/a", "deploy/b"), "one object at a time")):
        p = why(ctx, *args)
        assert p.returncode == 2 and message in p.stderr, (args, p.returncode, p.stderr)


@scenario("kcm why: a read the user's RBAC refuses is named, and nothing is answered")
def why_refused_read(ctx):
    skip_unless_kcm(ctx)
    env = ctx.env
    own = ctx.ns + "-r"
    ctx.k("create", "namespace", own, namespaced=False)
    tns, token = env.user_token(own, "nobody")  # the local API server's is in a fixed one
    ctx.k("create", "namespace", tns, namespaced=False, check=False)  # may exist
    meta = {"name": "why-reader-" + ctx.ns, "namespace": tns}
    for obj in ({"kind": "Role", "metadata": meta, "rules": [
                    {"apiGroups": ["apps"], "resources": ["deployments", "replicasets"],
                     "verbs": ["get", "list", "watch"]}]},
                {"kind": "RoleBinding", "metadata": meta,
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                             "name": meta["name"]},
                 "subjects": [{"kind": "ServiceAccount", "name": "nobody", "namespace": tns}]}):
        obj["apiVersion"] = "rbac.authorization.k8s.io/v1"
        ctx.k("apply", "-f", "-", stdin=json.dumps(obj), namespaced=False)
    kubeconfig = env.token_kubectl(token, tns).base[2]
    p = subprocess.run([ctx.env.kcm_binary, "why", "deployment/web", "-n", tns,
                        "--kubeconfig", kubeconfig, "--request-timeout", "30s"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 3 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert p.stderr.count("kcm why: cannot list pods in namespace %s" % tns) == 1, p.stderr
    assert re.search(r"kcm why: cannot list pods in namespace %s: .*forbidden" % tns, p.stderr), \
        p.stderr
