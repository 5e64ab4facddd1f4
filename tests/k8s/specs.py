"""Upstream's sig-apps Deployment and ReplicaSet e2e specs, run against kcm,
against three kcm instances sharing the work (--shards=32, with the Role of
manifests/sharded) and against kube-controller-manager, each on a cluster
of tests/k8s/cluster.sh (the three side by side), and compared: every spec
upstream passes, kcm must pass, alone and sharded; the specs both fail are
the ones tests/k8s/specs-failing.txt names, each with its reason.

    python3 tests/k8s/specs.py --kcm build/kcm [--work DIR]
        [--only kcm|kcm-sharded|upstream]

Prints one line per spec and controller, then the verdict; exits non-zero
when kcm fails a spec upstream passes, or when the list of specs both fail
is not the one in specs-failing.txt.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
FOCUS = r"\[sig-apps\] (Deployment|ReplicaSet) "
KNOWN = os.path.join(HERE, "specs-failing.txt")
# kcm beside kube-controller-manager's other controllers; upstream's whole set.
CONTROLLERS = {"kcm": "*,-deployment,-replicaset", "kcm-sharded": "*,-deployment,-replicaset",
               "upstream": "*"}
ROOT = os.path.dirname(os.path.dirname(HERE))
SHARDS = 32


def known_failing():
    """{spec: reason} of specs-failing.txt ("spec text<TAB>reason" lines)."""
    out = {}
    with open(KNOWN) as f:
        for line in f:
            line = line.rstrip("\n")
            if line and not line.startswith("#"):
                spec, _, reason = line.partition("\t")
                out[spec] = reason
    return out


def run_specs(bin_dir, kubeconfig, report, log):
    """Run the focused specs; {spec text: "passed" | "failed" | "skipped" | ...}."""
    cmd = [os.path.join(bin_dir, "e2e.test"), "--kubeconfig", kubeconfig,
           "--provider", "skeleton", "--ginkgo.focus", FOCUS, "--ginkgo.no-color",
           "--ginkgo.timeout", "1h", "--ginkgo.json-report", report]
    with open(log, "w") as f:
        subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=os.path.dirname(report))
    with open(report) as f:
        suites = json.load(f)
    states = {}
    for suite in suites:
        for spec in suite.get("SpecReports") or []:
            text = " ".join(spec.get("ContainerHierarchyTexts") or []) + " " + spec.get(
                "LeafNodeText", "")
            if spec.get("LeafNodeType") == "It" and re.match(FOCUS, text):
                states[text] = spec["State"]
    return states


def start_kcm(kcm, d, name="kcm", extra=()):
    """kcm as kubeadm's controller manager authenticates."""
    log = open(os.path.join(d, name + ".log"), "w")
    return subprocess.Popen([kcm, "--kubeconfig", os.path.join(d, "kubeconfig-kcm"),
                             "--use-service-account-credentials", "--leader-elect=false",
                             "--secure-port=0", *extra], stdout=log, stderr=subprocess.STDOUT)


def start_sharded(kcm, d, count=3):
    """count kcm instances with --shards, their Leases in kcm-shards as
    manifests/sharded has them (its Role, bound to kubeadm's controller
    manager user here); once every shard is held."""
    kubectl = ["kubectl", "--kubeconfig", os.path.join(d, "kubeconfig")]
    subprocess.run(kubectl + ["apply", "-f", os.path.join(ROOT, "manifests", "sharded",
                                                          "rbac.yaml")],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(kubectl + ["-n", "kcm-shards", "create", "rolebinding", "kcm-shards-kubeadm",
                              "--role=kcm-shards", "--user=system:kube-controller-manager"],
                   check=True, stdout=subprocess.DEVNULL)
    procs = [start_kcm(kcm, d, "kcm-%d" % i, (
        "--shards=%d" % SHARDS, "--leader-elect-resource-namespace=kcm-shards",
        "--health-probe-bind-address=127.0.0.1:0", "--metrics-bind-address=0"))
        for i in range(count)]
    deadline = time.monotonic() + 60
    while True:
        out = subprocess.run(kubectl + ["-n", "kcm-shards", "get", "leases", "-o", "json"],
                             capture_output=True, text=True)
        held = [le for le in json.loads(out.stdout or '{"items": []}')["items"]
                if "-shard-" in le["metadata"]["name"] and
                (le.get("spec") or {}).get("holderIdentity")]
        if len(held) == SHARDS:
            return procs
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            for p in procs:
                stop(p)
            raise RuntimeError("the %d shards were not all held within 60 s (%d were); logs "
                               "in %s" % (SHARDS, len(held), d))
        time.sleep(0.5)


def stop(p):
    if p and p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(45)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# Clusters come up one at a time (each picks free ports); the specs then run
# side by side, as they mostly wait.
STARTING = threading.Lock()


def one(who, args, bin_dir):
    d = os.path.join(args.work, who)
    os.makedirs(d, exist_ok=True)
    cluster = os.path.join(HERE, "cluster.sh")
    kcms = []
    try:
        with STARTING:
            subprocess.run(["bash", cluster, "up", d, CONTROLLERS[who]], check=True)
            if who == "kcm":
                kcms = [start_kcm(os.path.abspath(args.kcm), d)]
            elif who == "kcm-sharded":
                kcms = start_sharded(os.path.abspath(args.kcm), d)
        started = time.monotonic()
        states = run_specs(bin_dir, os.path.join(d, "kubeconfig"), os.path.join(d, "report.json"),
                           os.path.join(d, "e2e.log"))
        print("specs: %s ran %d specs in %.0f s (log: %s)" % (
            who, len(states), time.monotonic() - started, os.path.join(d, "e2e.log")))
        return states
    finally:
        for kcm in kcms:
            stop(kcm)
        subprocess.run(["bash", cluster, "down", d])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kcm", required=True)
    p.add_argument("--work", default=None)
    p.add_argument("--only", choices=sorted(CONTROLLERS))
    args = p.parse_args()
    args.work = args.work or tempfile.mkdtemp(prefix="kcm-specs-")
    bin_dir = subprocess.run(["bash", os.path.join(HERE, "build.sh")], check=True,
                             capture_output=True, text=True).stdout.strip()
    who = [args.only] if args.only else ["upstream", "kcm", "kcm-sharded"]
    with ThreadPoolExecutor(len(who)) as pool:
        runs = {w: pool.submit(one, w, args, bin_dir) for w in who}
    results = {w: r.result() for w, r in runs.items()}
    specs = sorted(set().union(*(r.keys() for r in results.values())))
    for s in specs:
        print("  %s  %s" % ("  ".join("%s=%-7s" % (w, results[w].get(s, "-")) for w in who), s))
    if args.only:
        return 0
    known = known_failing()
    up, bad = results["upstream"], 0
    for w in ("kcm", "kcm-sharded"):
        for s in specs:
            if up.get(s) == "passed" and results[w].get(s) != "passed":
                print("FAIL %s does not pass what kube-controller-manager passes: %s" % (w, s))
                bad += 1
    both = {s for s in specs if up.get(s) == "failed" and results["kcm"].get(s) == "failed"}
    for s in sorted(both - set(known)):
        print("FAIL both fail, and specs-failing.txt does not say why: %s" % s)
        bad += 1
    for s in sorted(set(known) - both):
        print("FAIL specs-failing.txt names a spec that does not fail for both: %s" % s)
        bad += 1
    print("specs: kcm passed %d, sharded %d, kube-controller-manager %d, both failed %d "
          "(known), %d problems; work directory %s" % (
              *(sum(1 for s in specs if results[w].get(s) == "passed")
                for w in ("kcm", "kcm-sharded", "upstream")),
              len(both & set(known)), bad, args.work))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
