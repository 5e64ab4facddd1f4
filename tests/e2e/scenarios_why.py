"""`kcm why`: what a rollout waits for, as kcm's planner sees it."""

import json
import subprocess

from harness import Skip, is_kcm, scenario
from scenarios_deployment import (BAD_IMAGE, IMAGE, deployment, rolling, stalled, wait_complete,
                                  wait_state)


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


def pods_of(ctx, rs):
    return [p["metadata"]["name"] for p in ctx.k.json("get", "pods")["items"]
            if any(r.get("uid") == rs["metadata"]["uid"]
                   for r in p["metadata"].get("ownerReferences") or [])]


@scenario("kcm why: a rollout held at maxUnavailable 0 by a pod that never becomes ready")
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

    p = why(ctx, "deployment/web")
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    for line in ("waits for 1 more pod of %s to be available" % new_name,
                 "then: scale ReplicaSet %s down 3 -> 2" % old_name,
                 "maxUnavailable 0: at least 3 of 3 stay available, 3 are",
                 "held back by:\n    pod %s: Pending" % held,
                 "3 replicas: 1 updated, 3 ready, 3 available"):
        assert line in p.stdout, (line, p.stdout)

    p = why(ctx, "deploy/web", "-o", "json")
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    answer = json.loads(p.stdout)
    assert (answer["state"], answer["waitsForAvailable"], answer["next"]) == (
        "waiting-for-available", 1,
        {"action": "scale", "replicaSet": old_name, "from": 3, "to": 2}), answer
    assert [h["pod"] for h in answer["heldBy"]] == [held], answer

    # --watch answers again as the rollout moves, and ends with it.
    watch = subprocess.Popen([ctx.env.kcm_binary, "why", "deployment/web", "--watch", "-n",
                              ctx.ns, "--kubeconfig", ctx.env.kubeconfig],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ctx.k("set", "image", "deployment/web", "c=" + IMAGE)
        out, err = watch.communicate(timeout=60)
    finally:
        watch.kill()
    assert watch.returncode == 0, (watch.returncode, out, err)
    assert out.index("waits for 1 more pod of %s" % new_name) < out.rindex(
        "complete: every replica updated and available"), out
    assert out.rstrip().endswith("complete: every replica updated and available"), out
    wait_complete(ctx, "web", rev=3)


@scenario("kcm why: a rollout past its progress deadline says so, and --watch fails")
def why_past_deadline(ctx):
    skip_unless_kcm(ctx)
    ctx.apply(deployment("web", 2, image=BAD_IMAGE, progressDeadlineSeconds=3))
    p = subprocess.run([ctx.env.kcm_binary, "why", "deployment/web", "--watch", "-n", ctx.ns,
                        "--kubeconfig", ctx.env.kubeconfig],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "progress deadline exceeded (3s without progress)" in p.stdout, p.stdout


@scenario("kcm why: bad arguments and missing objects get a clear error")
def why_errors(ctx):
    skip_unless_kcm(ctx)
    p = why(ctx, "deployment/nothing-here")
    assert p.returncode == 3 and "deployment nothing-here not found in namespace %s" % ctx.ns \
        in p.stderr, (p.returncode, p.stdout, p.stderr)
    for args, message in ((("pods/x",), "kcm cannot explain a pods"),
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
    assert "forbidden" in p.stderr, p.stderr
