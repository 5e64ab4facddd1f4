"""kcm as a pod on a real node: a cluster of ../cluster.sh with no kwok
nodes, a kubelet beside it (node.sh) holding kcm's image, and kcm
installed as README's in-cluster quick start says, the manifests rendered
by kustomize with two local changes only (the image's name, and where the
static pod's kubeconfig is on this node):

  1. the static pod of manifests/static-pod/node, started by the kubelet,
     its probes passing, leading;
  2. a Deployment of real containers, scaled with `kubectl scale` and rolled;
  3. `kubectl apply -k` of the daemonset variant: its pod Ready (its
     readiness probe through the kubelet), reaching the API server through
     the `kubernetes` Service, standing by;
  4. the leader's container killed: the other takes over (time measured),
     the killed one restarts; the new leader's pod deleted: another takes
     over (time measured); a scale is acted on after each;
  5. the sharded variant in their place: the DaemonSet deleted, `kubectl
     apply -k` of manifests/sharded while the static pod still leads (it
     creates the sharded Deployment's pods), then the static pod's file
     removed: one sharded pod runs (the required anti-affinity leaves the
     other two Pending on one node) and holds all 32 shards, and acts on a
     scale;
  6. `helm install` of manifests/helm/kcm in mode sharded over those
     objects (--take-ownership): the chart's objects are the same, so the
     Deployment's spec, its ReplicaSet and its running pod stay as they
     were;
  7. upstream's sig-apps Deployment and ReplicaSet specs against that kcm
     pod, their pods real containers: every spec passes, the one that reads
     each replica's HTTP answer through the API server's proxy included.
     The node has no registry to pull from: standin.c's image is in its
     runtime under the names of the images those specs run (agnhost, pause;
     `e2e.test --list-images`), doing what they ask of them.

    python3 tests/k8s/node/pods.py --image build/kcm-image.tar --helm HELM [--work DIR]

Prints each step and its figures; exits non-zero at the first that fails,
leaving the work directory (logs of every component) in place.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
PAUSE = "localhost/kcm-e2e/pause:1"
NS = "node-apps"


class Failed(Exception):
    pass


class Cluster:
    def __init__(self, work):
        self.dir = os.path.join(work, "cluster")
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.sock = os.path.join(self.dir, "node", "containerd.sock")

    def k(self, *args, stdin=None, check=True):
        r = subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, *args],
                           input=stdin, capture_output=True, text=True, timeout=120)
        if check and r.returncode:
            raise Failed("kubectl %s: %s" % (" ".join(args), r.stderr.strip()))
        return r.stdout

    def get(self, *args):
        return json.loads(self.k("get", "-o", "json", *args))

    def lease_holder(self):
        r = self.k("-n", "kube-system", "get", "lease", "kcm", "-o", "json", check=False)
        return json.loads(r)["spec"].get("holderIdentity", "") if r else ""

    def kcm_pods(self):
        pods = self.get("-n", "kube-system", "pods", "-l", "app.kubernetes.io/name=kcm")
        return pods["items"]


def wait(what, cond, timeout):
    """Polls COND until it returns something true; returns it and the seconds taken."""
    start = time.monotonic()
    while True:
        got = cond()
        if got:
            return got, time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise Failed("%s: not within %d s" % (what, timeout))
        time.sleep(0.2)


def ready(pod):
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in pod.get("status", {}).get("conditions", []))


def image_name(archive):
    with tarfile.open(archive) as t:
        index = json.load(t.extractfile("index.json"))
    return index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]


def split_image(image):
    """NAME:TAG as (NAME, TAG); a registry's port is not a tag."""
    head, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:
        raise Failed("the image %s has no tag" % image)
    return head, tag


def overlay(work, name, variant, image, patches=""):
    """A kustomization in WORK/NAME over manifests/VARIANT, naming IMAGE."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    repo, tag = split_image(image)
    with open(os.path.join(d, "kustomization.yaml"), "w") as f:
        f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                "resources:\n  - %s\nimages:\n  - name: ghcr.io/kcm-project/kcm\n"
                "    newName: %s\n    newTag: %s\n%s"
                % (os.path.relpath(os.path.join(ROOT, "manifests", variant), d), repo, tag,
                   patches))
    return d


def controller_manager_conf(c, path):
    """As kubeadm writes controller-manager.conf: the CA inline, for root alone."""
    src = open(c.kubeconfig.replace("kubeconfig", "kubeconfig-kcm")).read()
    server = next(l.split()[-1] for l in src.splitlines() if "server:" in l)
    token = next(l.split()[-1] for l in src.splitlines() if "token:" in l)
    ca = subprocess.run(["base64", "-w0", os.path.join(c.dir, "pki", "ca.crt")],
                        capture_output=True, text=True, check=True).stdout
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\nclusters:\n  - name: kubernetes\n"
                "    cluster:\n      server: %s\n      certificate-authority-data: %s\n"
                "contexts:\n  - name: kcm\n    context: {cluster: kubernetes, user: kcm}\n"
                "current-context: kcm\nusers:\n  - name: kcm\n    user:\n      token: %s\n"
                % (server, ca, token))
    os.chmod(path, 0o600)


def kill_container(c, pod):
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("//", 1)[1]
    subprocess.run(["ctr", "-a", c.sock, "-n", "k8s.io", "tasks", "kill", "-s", "KILL", cid],
                   check=True, capture_output=True)


def scaled(c, replicas):
    def done():
        d = c.get("-n", NS, "deployment", "web")
        s = d.get("status", {})
        return (s.get("observedGeneration") == d["metadata"]["generation"]
                and s.get("availableReplicas") == replicas
                and s.get("updatedReplicas") == replicas and s.get("replicas") == replicas)
    return done


def running_pods(c):
    pods = c.get("-n", NS, "pods", "-l", "app=web")["items"]
    return [p for p in pods if p["spec"].get("nodeName") == "kcm-node"
            and all("running" in s.get("state", {})
                    for s in p.get("status", {}).get("containerStatuses", [{}]))
            and not p["metadata"].get("deletionTimestamp")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--image", required=True, help="kcm's image, an OCI archive")
    ap.add_argument("--helm", required=True, help="a helm binary (tests/helm/build.sh)")
    ap.add_argument("--work", help="work directory (default: a new one under /tmp)")
    args = ap.parse_args()
    # Stopped, it still takes its node and cluster down (the finally below).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    work = os.path.abspath(args.work or tempfile.mkdtemp(prefix="kcm-node-"))
    os.makedirs(work, exist_ok=True)
    image = image_name(args.image)
    c = Cluster(work)
    bin_dir = subprocess.run(["bash", os.path.join(HERE, "..", "build.sh")], check=True,
                             stdout=subprocess.PIPE, text=True).stdout.strip()
    listed = subprocess.run([os.path.join(bin_dir, "e2e.test"), "--list-images"], check=True,
                            capture_output=True, text=True).stdout.split()
    standins = [i for i in listed if re.fullmatch(
        r"registry\.k8s\.io/(e2e-test-images/agnhost|pause):[^/]+", i)]
    env = dict(os.environ, KCM_K8S_KWOK_NODES="0", KCM_NODE_STANDIN_NAMES=" ".join(standins))
    ok = False
    try:
        subprocess.run(["bash", os.path.join(HERE, "..", "cluster.sh"), "up", c.dir],
                       env=env, check=True)
        r = subprocess.run(["bash", os.path.join(HERE, "node.sh"), "up", c.dir, args.image],
                           env=env)
        if r.returncode == 3:
            return 3
        if r.returncode:
            raise Failed("the node did not come up")
        steps(c, work, image)
        sharded(c, work, image, args.helm)
        specs(c, work, bin_dir, standins)
        ok = True
    except (Failed, subprocess.CalledProcessError) as e:
        print("FAIL %s" % e, file=sys.stderr)
        for p in c.kcm_pods() if os.path.exists(c.kubeconfig) else []:
            name = p["metadata"]["name"]
            print("--- kube-system/%s: %s" % (name, json.dumps(p.get("status", {}))[:2000]),
                  file=sys.stderr)
            print(c.k("-n", "kube-system", "logs", name, "--tail=20", check=False), file=sys.stderr)
    finally:
        # A second SIGTERM must not cut the teardown short.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.run(["bash", os.path.join(HERE, "node.sh"), "down", c.dir])
        subprocess.run(["bash", os.path.join(HERE, "..", "cluster.sh"), "down", c.dir])
    if ok:
        shutil.rmtree(work, ignore_errors=True)
        return 0
    print("node: work directory %s" % work, file=sys.stderr)
    return 1


def steps(c, work, image):
    host = socket.gethostname()
    manifests = os.path.join(c.dir, "node", "manifests")

    # 1. The static pod, as README installs it on a kubeadm node.
    c.k("apply", "-k", os.path.join(ROOT, "manifests", "static-pod"))
    conf = os.path.join(c.dir, "node", "controller-manager.conf")
    controller_manager_conf(c, conf)
    d = overlay(work, "static-pod", "static-pod/node", image,
                "patches:\n  - target: {kind: Pod, name: kcm}\n    patch: |-\n"
                "      - op: test\n        path: /spec/volumes/0/hostPath/path\n"
                "        value: /etc/kubernetes/controller-manager.conf\n"
                "      - op: replace\n        path: /spec/volumes/0/hostPath/path\n"
                "        value: %s\n" % conf)
    # Written whole (the kubelet skips files whose names start with a dot),
    # 0600 as README installs it.
    with open(os.path.join(manifests, ".kcm.yaml"), "w") as f:
        f.write(c.k("kustomize", d))
    os.chmod(os.path.join(manifests, ".kcm.yaml"), 0o600)
    os.rename(os.path.join(manifests, ".kcm.yaml"), os.path.join(manifests, "kcm.yaml"))
    start = time.monotonic()
    _, took = wait("the static pod Ready", lambda: any(
        ready(p) for p in c.kcm_pods() if p["metadata"]["name"] == "kcm-kcm-node"), 120)
    holder, _ = wait("the static pod leading",
                     lambda: c.lease_holder().startswith(host + "_") and c.lease_holder(), 60)
    print("PASS the static pod of manifests/static-pod/node: Ready %.1f s after it was written,"
          " leading (%s)" % (took, holder))

    # 2. Real containers, scaled and rolled.
    c.k("create", "namespace", NS)
    c.k("-n", NS, "create", "deployment", "web", "--image", PAUSE, "--replicas", "2")
    _, t_create = wait("web: 2 pods available", scaled(c, 2), 120)
    c.k("-n", NS, "scale", "deployment", "web", "--replicas", "5")
    _, t_scale = wait("web scaled to 5", scaled(c, 5), 120)
    pods, _ = wait("5 containers running", lambda: len(running_pods(c)) == 5 and running_pods(c), 60)
    c.k("-n", NS, "set", "env", "deployment/web", "ROLL=1")
    _, t_roll = wait("web rolled", scaled(c, 5), 180)
    rs = c.get("-n", NS, "replicasets", "-l", "app=web")["items"]
    sizes = sorted((r["spec"]["replicas"], r["metadata"]["annotations"].get(
        "deployment.kubernetes.io/revision")) for r in rs)
    if sizes != [(0, "1"), (5, "2")]:
        raise Failed("web's ReplicaSets after the rollout: %s" % sizes)
    history = c.k("-n", NS, "rollout", "history", "deployment/web")
    print("PASS a Deployment of real containers: 2 available in %.1f s; kubectl scale to 5 in"
          " %.1f s; rolled in %.1f s, ReplicaSets %s; %d lines of rollout history"
          % (t_create, t_scale, t_roll, sizes, len(history.strip().splitlines())))

    # 3. The daemonset variant beside it.
    c.k("apply", "-k", overlay(work, "daemonset", "daemonset", image))
    ds, took = wait("the DaemonSet's pod Ready", lambda: [
        p for p in c.kcm_pods() if p["metadata"]["name"] != "kcm-kcm-node" and ready(p)], 180)
    ds_name = ds[0]["metadata"]["name"]
    if c.lease_holder().startswith(ds_name + "_"):
        raise Failed("the DaemonSet's pod took the Lease from a live leader")
    print("PASS kubectl apply -k of the daemonset variant: %s Ready in %.1f s, standing by"
          % (ds_name, took))

    # 4. Takeover: the leader's container killed, then the new leader's pod deleted.
    static = next(p for p in c.kcm_pods() if p["metadata"]["name"] == "kcm-kcm-node")
    kill_container(c, static)
    start = time.monotonic()
    c.k("-n", NS, "scale", "deployment", "web", "--replicas", "3")
    # The Lease expires; the standby, or the killed container restarted
    # under a new identity, takes it.
    old_holder = holder
    holder, _ = wait("another kcm leading", lambda: (
        c.lease_holder() and c.lease_holder() != old_holder and c.lease_holder()), 90)
    t_lease = time.monotonic() - start
    wait("web scaled to 3 by the new leader", scaled(c, 3), 90)
    t_scale = time.monotonic() - start
    wait("the killed container restarted", lambda: any(
        p["status"]["containerStatuses"][0].get("restartCount", 0) >= 1 and ready(p)
        for p in c.kcm_pods() if p["metadata"]["name"] == "kcm-kcm-node"), 180)
    print("PASS the leader's container killed: %s leads %.1f s later, a scale done %.1f s"
          " later; the static pod's container restarted" % (holder.split("_")[0], t_lease,
                                                            t_scale))

    c.k("-n", "kube-system", "delete", "pod", ds_name, "--wait=false")
    start = time.monotonic()
    c.k("-n", NS, "scale", "deployment", "web", "--replicas", "4")
    # kcm gives its Lease up as it stops: the static pod, or the DaemonSet's
    # new pod if it starts first, takes it at once.
    holder, _ = wait("another kcm leading", lambda: (
        c.lease_holder() and not c.lease_holder().startswith(ds_name + "_")
        and c.lease_holder()), 90)
    t_lease = time.monotonic() - start
    wait("web scaled to 4", scaled(c, 4), 90)
    t_scale = time.monotonic() - start
    wait("the DaemonSet's pod replaced", lambda: [
        p for p in c.kcm_pods() if p["metadata"]["name"] not in ("kcm-kcm-node", ds_name)
        and ready(p)], 180)
    print("PASS the leader's pod deleted: %s leads %.1f s later, a scale done %.1f s later;"
          " the DaemonSet's pod replaced" % (holder.split("_")[0], t_lease, t_scale))


def shard_holders(c):
    leases = c.get("-n", "kcm-shards", "leases")["items"]
    return {l["metadata"]["name"]: l["spec"].get("holderIdentity", "") for l in leases
            if re.fullmatch(r"kcm-shard-\d\d", l["metadata"]["name"])}


def sharded(c, work, image, helm):
    manifests = os.path.join(c.dir, "node", "manifests")

    # 5. The sharded variant. Its required anti-affinity keeps its pods off
    # a node with another kcm pod, so the leader-elected ones go: the
    # DaemonSet first, the static pod once it has made the sharded pods.
    c.k("-n", "kube-system", "delete", "daemonset", "kcm")
    wait("the DaemonSet's pods gone", lambda: all(
        p["metadata"]["name"] == "kcm-kcm-node" for p in c.kcm_pods()), 120)
    c.k("apply", "-k", overlay(work, "sharded", "sharded", image))
    wait("the sharded Deployment's 3 pods made", lambda: len(
        [p for p in c.kcm_pods() if p["metadata"]["name"] != "kcm-kcm-node"]) == 3, 120)
    os.remove(os.path.join(manifests, "kcm.yaml"))
    running, took = wait("a sharded pod Ready", lambda: [
        p for p in c.kcm_pods() if p["metadata"]["name"] != "kcm-kcm-node" and ready(p)], 180)
    pod = running[0]["metadata"]["name"]
    _, t_shards = wait("one sharded pod holding all 32 shards", lambda: (
        (lambda h: len(h) == 32 and all(v.startswith(pod + "_") for v in h.values()))(
            shard_holders(c))), 120)
    c.k("-n", NS, "scale", "deployment", "web", "--replicas", "2")
    _, t_scale = wait("web scaled to 2 by the sharded kcm", scaled(c, 2), 90)
    pending = [p["metadata"]["name"] for p in c.kcm_pods()
               if p["status"].get("phase") == "Pending"]
    if len(pending) != 2:
        raise Failed("the sharded Deployment's other pods: %s Pending, want 2" % pending)
    print("PASS kubectl apply -k of the sharded variant: %s Ready %.1f s after the static pod's"
          " file was removed, holding all 32 shards %.1f s later, a scale done in %.1f s; 2 pods"
          " Pending (required anti-affinity, one node)" % (pod, took, t_shards, t_scale))

    # 6. The chart over the same objects.
    before = c.get("-n", "kube-system", "deployment", "kcm")
    repo, tag = split_image(image)
    r = subprocess.run([helm, "install", "kcm", os.path.join(ROOT, "manifests", "helm", "kcm"),
                        "--namespace", "kube-system", "--kubeconfig", c.kubeconfig,
                        "--take-ownership", "--set", "mode=sharded",
                        "--set", "image.repository=" + repo, "--set-string", "image.tag=" + tag],
                       capture_output=True, text=True, timeout=300)
    if r.returncode:
        raise Failed("helm install: %s" % r.stderr.strip()[-2000:])
    # Helm's annotations bump the generation (a Deployment's annotations
    # reach its ReplicaSets); its spec must not change, nor its ReplicaSet.
    after, _ = wait("the sharded kcm observing the annotated Deployment", lambda: (
        lambda d: d["status"].get("observedGeneration") == d["metadata"]["generation"] and d)(
            c.get("-n", "kube-system", "deployment", "kcm")), 60)
    owner = after["metadata"].get("annotations", {}).get("meta.helm.sh/release-name")
    if owner != "kcm" or after["spec"] != before["spec"]:
        raise Failed("after helm install: release %r, spec %s" % (
            owner, "the same" if after["spec"] == before["spec"] else "changed"))
    sets = [r["metadata"]["name"] for r in c.get("-n", "kube-system", "replicasets",
                                                 "-l", "app.kubernetes.io/name=kcm")["items"]]
    status = json.loads(subprocess.run(
        [helm, "status", "kcm", "-n", "kube-system", "--kubeconfig", c.kubeconfig, "-o", "json"],
        capture_output=True, text=True, check=True).stdout)["info"]["status"]
    same = [p for p in c.kcm_pods() if p["metadata"]["name"] == pod and ready(p)]
    if status != "deployed" or not same or len(sets) != 1:
        raise Failed("helm status %s; %s %s; ReplicaSets %s" % (
            status, pod, "Ready" if same else "gone", sets))
    c.k("-n", NS, "scale", "deployment", "web", "--replicas", "3")
    wait("web scaled to 3 after helm install", scaled(c, 3), 90)
    print("PASS helm install of manifests/helm/kcm (mode sharded) over kustomize's objects:"
          " release deployed, the Deployment's spec and its one ReplicaSet unchanged, %s still"
          " Ready, a scale done" % pod)


def specs(c, work, bin_dir, standins):
    # 7. Upstream's specs, against the kcm pod of step 5.
    sys.path.insert(0, os.path.join(HERE, ".."))
    from specs import run_specs
    d = os.path.join(work, "specs")
    os.makedirs(d, exist_ok=True)
    start = time.monotonic()
    log = os.path.join(d, "e2e.log")
    try:
        states = run_specs(bin_dir, c.kubeconfig, os.path.join(d, "report.json"), log)
    except (OSError, ValueError) as e:
        raise Failed("upstream's specs on the node left no report (%s); log: %s" % (e, log))
    took = time.monotonic() - start
    for spec, state in sorted(states.items()):
        print("  %-7s %s" % (state, spec))
    # Every spec passes but those for a cloud provider, which are skipped.
    passed = [s for s, state in states.items() if state == "passed"]
    wrong = [s for s, state in states.items() if state != "passed" and not (
        state == "skipped" and "[Provider:" in s)]
    served = [s for s in passed if "serve a basic image on each replica" in s]
    if wrong or not served or len(passed) < 10:
        raise Failed("upstream's specs on the node: %d passed, not passed: %s (log: %s)" % (
            len(passed), "; ".join("%s %s" % (states[s], s) for s in wrong) or "-", log))
    print("PASS upstream's sig-apps Deployment and ReplicaSet specs against kcm's pod, on real"
          " containers: %d passed, %d skipped, in %.0f s (images stood in for: %s)" % (
              len(passed), len(states) - len(passed), took, " ".join(standins)))


if __name__ == "__main__":
    sys.exit(main())
