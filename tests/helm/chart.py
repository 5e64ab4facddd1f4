"""manifests/helm/kcm against the kustomize variants it reads: for every
mode, with the default values and with every parameter changed, `helm
template` must render the very objects `kubectl kustomize` builds from
manifests/ with the same parameters; `helm lint --strict` passes for every
mode; values the chart cannot honour fail the render, saying why; the
chart's appVersion is the project's version and the image tag kustomize
names.

    python3 tests/helm/chart.py [--helm PATH]

Without --helm, builds helm from tests/helm/go.mod (tests/helm/build.sh).
Exits 3, saying so, when no Go toolchain can build it.
"""

import argparse
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(ROOT, "manifests", "helm", "kcm")
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
from harness import CommandError, local_object_list, manifests_with  # noqa: E402

# mode (and nodeManifest) -> the kustomize variant it renders
MODES = {
    ("staticPod", False): "static-pod",
    ("staticPod", True): "static-pod/node",
    ("daemonset", False): "daemonset",
    ("deployment", False): "deployment",
    ("sharded", False): "sharded",
}

# The chart's value -> the kustomize parameter it is, and the value both get.
CHANGED = {
    "leaseName": ("leaseName", "kcm-other"),
    "image.repository": ("newName", "registry.test/kcm"),
    "image.tag": ("newTag", "v9"),
    "monitoring.runbookBase": ("runbookBase", "https://runbooks.test/kcm.html"),
    "monitoring.prometheusServiceAccount": ("prometheusServiceAccount", "prom"),
    "monitoring.prometheusNamespace": ("prometheusNamespace", "observability"),
}


class Failed(Exception):
    pass


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)


def helm_template(helm, values):
    argv = [helm, "template", "kcm", CHART, "--namespace", "kube-system"]
    for k, v in values.items():
        argv += ["--set-string" if isinstance(v, str) else "--set", "%s=%s" % (k, v)]
    return run(argv)


def objects(what, text):
    """The objects of YAML TEXT by (kind, namespace, name); one twice fails."""
    try:
        items = local_object_list("-", text)
    except CommandError as e:
        raise Failed("%s: %s" % (what, e))
    out = {}
    for o in items:
        key = (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
        if key in out:
            raise Failed("%s: %s/%s/%s twice" % ((what,) + key))
        out[key] = o
    return out


def kustomize(manifests, variant):
    p = run(["kubectl", "kustomize", os.path.join(manifests, variant)])
    if p.returncode:
        raise Failed("kubectl kustomize %s: %s" % (variant, p.stderr.strip()))
    return objects("kubectl kustomize " + variant, p.stdout)


def compare(what, want, got):
    if want == got:
        return
    lines = []
    for key in sorted(set(want) | set(got)):
        a = json.dumps(want.get(key), indent=1, sort_keys=True).splitlines()
        b = json.dumps(got.get(key), indent=1, sort_keys=True).splitlines()
        if a != b:
            lines += ["%s %s/%s:" % key] + list(difflib.unified_diff(
                a, b, "kustomize", "helm", lineterm="", n=2))
    raise Failed("%s: helm renders other objects than kustomize:\n%s"
                 % (what, "\n".join(lines[:80])))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--helm", help="a helm binary (default: built by tests/helm/build.sh)")
    args = ap.parse_args()
    if not shutil.which("kubectl"):
        print("chart: no kubectl to build the kustomize variants with; the chart is not"
              " checked", file=sys.stderr)
        return 3
    helm = args.helm
    if not helm:
        p = subprocess.run(["bash", os.path.join(HERE, "build.sh")], stdout=subprocess.PIPE,
                           text=True)
        if p.returncode:
            return p.returncode
        helm = p.stdout.strip()
    work = tempfile.mkdtemp(prefix="kcm-chart-")
    try:
        checks(helm, work)
    except Failed as e:
        print("FAIL %s" % e, file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def checks(helm, work):
    changed = manifests_with(os.path.join(work, "manifests"), dict(CHANGED.values()))
    default_tree = os.path.join(ROOT, "manifests")
    n = 0
    for params, tree in (({}, default_tree), ({k: v for k, (_, v) in CHANGED.items()}, changed)):
        monitoring = kustomize(tree, "monitoring")
        for (mode, node), variant in MODES.items():
            want = kustomize(tree, variant)
            for with_monitoring in (False, True):
                values = dict(params, mode=mode)
                values["staticPod.nodeManifest"] = node
                values["monitoring.enabled"] = with_monitoring
                p = helm_template(helm, values)
                what = "helm template %s" % " ".join("%s=%s" % kv for kv in values.items())
                if p.returncode:
                    raise Failed("%s: %s" % (what, p.stderr.strip()))
                expect = {**want, **monitoring} if with_monitoring and not node else want
                compare(what, expect, objects(what, p.stdout))
                n += 1
    print("PASS helm template renders kustomize's objects: %d renders (%d modes, monitoring"
          " off and on, default and changed parameters)" % (n, len(MODES)))

    for mode, _ in MODES:
        p = run([helm, "lint", "--strict", CHART, "-n", "kube-system", "--set", "mode=" + mode])
        if p.returncode:
            raise Failed("helm lint --strict mode=%s: %s%s" % (mode, p.stdout, p.stderr))
    print("PASS helm lint --strict, every mode")

    refused = {
        "mode=daemonsets": "mode",
        "leaseName=Kcm_Lease": "leaseName",
        "staticPod.nodeManifest=true": "needs mode=staticPod",
        "replicas=3": "replicas",
        "image.repository=registry.test/kcm:v9": "repository",
        "monitoring.prometheusNamespace=Mon": "prometheusNamespace",
    }
    for setting, reason in refused.items():
        p = run([helm, "template", "kcm", CHART, "-n", "kube-system", "--set", setting])
        if p.returncode == 0 or reason not in p.stderr:
            raise Failed("helm template --set %s: want a failure naming %r, got rc %d: %s"
                         % (setting, reason, p.returncode, p.stderr.strip()[-400:]))
    p = run([helm, "template", "kcm", CHART, "-n", "default"])
    if p.returncode == 0 or "-n kube-system" not in p.stderr:
        raise Failed("helm template -n default: want a failure naming kube-system, got rc %d: %s"
                     % (p.returncode, p.stderr.strip()[-400:]))
    refused["-n default"] = "kube-system"
    print("PASS values the chart cannot honour fail the render: %s" % ", ".join(refused))

    # `helm package` copies what files/ links to: the packaged chart renders
    # as the tree does, dashboard included.
    p = run([helm, "package", CHART, "-d", work])
    if p.returncode:
        raise Failed("helm package: %s" % p.stderr.strip())
    packaged = os.path.join(work, next(f for f in os.listdir(work) if f.endswith(".tgz")))
    values = ["-n", "kube-system", "--set", "mode=sharded", "--set", "monitoring.enabled=true"]
    a = run([helm, "template", "kcm", CHART, *values])
    b = run([helm, "template", "kcm", packaged, *values])
    if a.returncode or b.returncode or a.stdout != b.stdout or "kcm.json" not in b.stdout:
        raise Failed("the packaged chart renders otherwise: %s%s" % (a.stderr, b.stderr))
    print("PASS the packaged chart (%d KiB) renders as the tree's" % (
        os.path.getsize(packaged) // 1024))

    version = re.search(r"project\(kcm VERSION (\S+)", open(
        os.path.join(ROOT, "CMakeLists.txt")).read()).group(1)
    chart = open(os.path.join(CHART, "Chart.yaml")).read()
    got = {k: re.search(r'^%s: "?([^"\s]+)"?$' % k, chart, re.M).group(1)
           for k in ("version", "appVersion")}
    tag = re.search(r"newTag: (\S+)", open(os.path.join(
        ROOT, "manifests", "base", "image", "kustomization.yaml")).read()).group(1)
    if got != {"version": version, "appVersion": version} or tag != version:
        raise Failed("versions: CMakeLists.txt %s, Chart.yaml %s, kustomize's image tag %s"
                     % (version, got, tag))
    print("PASS Chart.yaml's version and appVersion and kustomize's image tag are %s" % version)


if __name__ == "__main__":
    sys.exit(main())
