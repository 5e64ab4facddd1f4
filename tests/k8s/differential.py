"""The same seeded sequence of kubectl operations on two clusters of
tests/k8s/cluster.sh, one run by kcm and one by kube-controller-manager,
and what users see compared after each: Deployments (spec, annotations,
status counts, conditions), their ReplicaSets (sizes, annotations, status)
and pods.

    python3 tests/k8s/differential.py --kcm build/kcm [--seed N] [--ops N] [--work DIR]

ReplicaSets are named for their template's hash, which kcm computes its
own way, so a ReplicaSet is known by its Deployment and image, and names
in condition messages are replaced by that. Exits non-zero at the first
operation after which the two differ, printing both sides.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from specs import CONTROLLERS, start_kcm, stop  # noqa: E402

IMAGES = ("nginx:1.7.9", "nginx:1.9.1", "nginx:1.10.0", "bad/nginx:1")
STRATEGIES = ({"type": "Recreate"},
              {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
              {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
              {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
              {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "50%", "maxUnavailable": "50%"}})
KEEP = ("deployment.kubernetes.io/revision", "deployment.kubernetes.io/revision-history",
        "deployment.kubernetes.io/desired-replicas", "deployment.kubernetes.io/max-replicas",
        "team")
COUNTS = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
          "availableReplicas", "unavailableReplicas", "terminatingReplicas", "collisionCount",
          "fullyLabeledReplicas")
NS = "diff"


class Side:
    def __init__(self, who, work):
        self.who, self.dir = who, os.path.join(work, who)
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")

    def k(self, *args, stdin=None):
        r = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, "-n", NS, *args],
                           input=stdin, capture_output=True, text=True, timeout=60)
        if r.returncode:
            raise RuntimeError("%s: kubectl %s: %s" % (self.who, " ".join(args), r.stderr.strip()))
        return r.stdout

    def items(self, kind):
        return json.loads(self.k("get", kind, "-o", "json"))["items"]


def image_of(obj):
    return obj["spec"]["template"]["spec"]["containers"][0]["image"]


def state(side):
    """What users see, with ReplicaSets known by Deployment and image."""
    deployments, rses, pods = side.items("deployments"), side.items("rs"), side.items("pods")
    names, out = {}, {"deployments": {}, "replicasets": {}, "pods": {}}
    for rs in rses:
        owner = (rs["metadata"].get("ownerReferences") or [{}])[0].get("name", "-")
        names[rs["metadata"]["name"]] = "%s@%s" % (owner, image_of(rs))
    for rs in rses:
        ann, st = rs["metadata"].get("annotations") or {}, rs.get("status", {})
        # A ReplicaSet's generation counts the controller's own resizes, as
        # many as the rollout's steps, which readiness timing decides: only
        # whether its status has seen the latest is compared.
        status = {k: v for k, v in st.items() if k in COUNTS and k != "observedGeneration"}
        status["observed"] = st.get("observedGeneration", 0) >= rs["metadata"]["generation"]
        out["replicasets"][names[rs["metadata"]["name"]]] = {
            "replicas": rs["spec"]["replicas"],
            "annotations": {k: v for k, v in ann.items() if k in KEEP}, "status": status}
    for d in deployments:
        st, ann = d.get("status", {}), d["metadata"].get("annotations") or {}
        conds = []
        for c in st.get("conditions") or []:
            msg = c.get("message", "")
            for name, known in names.items():
                msg = msg.replace('"%s"' % name, '"%s"' % known)
            conds.append((c["type"], c["status"], c.get("reason"), msg))
        out["deployments"][d["metadata"]["name"]] = {
            "replicas": d["spec"]["replicas"], "paused": d["spec"].get("paused", False),
            "image": image_of(d),
            "annotations": {k: v for k, v in ann.items() if k in KEEP},
            "status": {k: v for k, v in st.items() if k in COUNTS},
            "conditions": sorted(conds)}
    for p in pods:
        if p["metadata"].get("deletionTimestamp"):
            continue
        owner = (p["metadata"].get("ownerReferences") or [{}])[0].get("name", "-")
        key = names.get(owner, owner)
        ready = any(c["type"] == "Ready" and c["status"] == "True"
                    for c in p.get("status", {}).get("conditions") or [])
        out["pods"].setdefault(key, [0, 0])
        out["pods"][key][0] += 1
        out["pods"][key][1] += ready
    return out


def settled(side, timeout=90):
    """The state once every Deployment is observed and nothing moved for 3 s."""
    deadline, last, same_since = time.monotonic() + timeout, None, None
    while time.monotonic() < deadline:
        s = state(side)
        observed = all(d["status"].get("observedGeneration") is not None
                       for d in s["deployments"].values())
        generations = {d["metadata"]["name"]: (d["metadata"]["generation"],
                                               d.get("status", {}).get("observedGeneration"))
                       for d in side.items("deployments")}
        observed = observed and all(g == o for g, o in generations.values())
        if observed and s == last:
            if time.monotonic() - same_since >= 3:
                return s
        else:
            last, same_since = s, time.monotonic()
        time.sleep(0.5)
    return last


def differences(a, b, path=""):
    """(path, a's value, b's value) wherever a and b differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from differences(a.get(k), b.get(k), "%s/%s" % (path, k))
    elif a != b:
        yield path, a, b


def deployment(name, rnd):
    return json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": rnd.randint(0, 4), "revisionHistoryLimit": rnd.choice((1, 2, 10)),
                 "selector": {"matchLabels": {"app": name}},
                 "strategy": rnd.choice(STRATEGIES),
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "c", "image": IMAGES[0]}],
                                       "terminationGracePeriodSeconds": 0}}}})


def operations(seed, count):
    """(description, [kubectl args], stdin) for both sides, drawn from seed."""
    rnd, made, ops = random.Random(seed), [], []
    for _ in range(count):
        if not made or (len(made) < 3 and rnd.random() < 0.2):
            name = "d%d" % len(made)
            made.append(name)
            ops.append(("create " + name, ["apply", "-f", "-"], deployment(name, rnd)))
            continue
        name = rnd.choice(made)
        what = rnd.choice(("scale", "image", "image", "undo", "pause", "resume", "annotate",
                           "delete-pod"))
        if what == "scale":
            n = rnd.randint(0, 6)
            ops.append(("scale %s to %d" % (name, n),
                        ["scale", "deployment/" + name, "--replicas=%d" % n], None))
        elif what == "image":
            image = rnd.choice(IMAGES)
            ops.append(("image %s %s" % (name, image),
                        ["set", "image", "deployment/" + name, "c=" + image], None))
        elif what == "undo":
            ops.append(("undo " + name, ["rollout", "undo", "deployment/" + name], None))
        elif what == "pause":
            ops.append(("pause " + name, ["rollout", "pause", "deployment/" + name], None))
        elif what == "resume":
            ops.append(("resume " + name, ["rollout", "resume", "deployment/" + name], None))
        elif what == "annotate":
            ops.append(("annotate " + name, ["annotate", "--overwrite", "deployment/" + name,
                                             "team=t%d" % rnd.randint(0, 3)], None))
        else:
            ops.append(("delete a pod of " + name,
                        ["delete", "pod", "-l", "app=" + name, "--wait=false",
                         "--field-selector=status.phase!=Succeeded"], None))
    return ops


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kcm", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--ops", type=int, default=20)
    p.add_argument("--work", default=None)
    args = p.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="kcm-differential-")
    cluster = os.path.join(HERE, "cluster.sh")
    sides = [Side("kcm", work), Side("upstream", work)]
    kcm = None
    try:
        for s in sides:
            subprocess.run(["bash", cluster, "up", s.dir, CONTROLLERS[s.who]], check=True)
            s.k("create", "namespace", NS)
        kcm = start_kcm(os.path.abspath(args.kcm), sides[0].dir)
        for s in sides:  # the namespace's default ServiceAccount, which pods need
            for _ in range(100):
                if subprocess.run(["kubectl", "--kubeconfig", s.kubeconfig, "-n", NS, "get",
                                   "serviceaccount", "default"], capture_output=True).returncode == 0:
                    break
                time.sleep(0.1)
        for i, (what, cmd, stdin) in enumerate(operations(args.seed, args.ops)):
            outcome = []
            for s in sides:
                try:
                    s.k(*cmd, stdin=stdin)
                    outcome.append("ok")
                except RuntimeError as e:
                    outcome.append(str(e).split(": ", 2)[-1][:120])
            ours, theirs = (settled(s) for s in sides)
            same = ours == theirs and outcome[0] == outcome[1]
            print("%2d %-34s %s" % (i + 1, what, "same" if same else "DIFFERENT"), flush=True)
            if not same:
                print("  kubectl: kcm %s; upstream %s" % tuple(outcome))
                for path, a, b in differences(ours, theirs):
                    print("  %s: kcm %s; upstream %s" % (path, json.dumps(a), json.dumps(b)))
                print("kcm:      %s" % json.dumps(ours, sort_keys=True))
                print("upstream: %s" % json.dumps(theirs, sort_keys=True))
                return 1
        print("differential: seed %d, %d operations, the same after each; work directory %s" % (
            args.seed, args.ops, work))
        return 0
    finally:
        stop(kcm)
        for s in sides:
            subprocess.run(["bash", cluster, "down", s.dir])


if __name__ == "__main__":
    sys.exit(main())
