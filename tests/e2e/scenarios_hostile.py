"""Scenarios with objects a tenant may make as large as the API server lets
them be: kcm must roll them out in bounded time and keep answering its
probes meanwhile."""

import json
import os
import threading
import time

from harness import Skip, extra_namespaces, scenario, suite_kcm_stopped, wait_for
from scenarios_deployment import IMAGE, IMAGE2, complete, deployment, wait_state
from scenarios_serving import _cpu_seconds, _kcm_port, _percentile, https_get

ANNOTATION_LIMIT = 256 * 1024  # bytes of keys and values, as the API server counts them
DIGITS = "0123456789abcdefghijklmnopqrstuvwxyz"


def many_annotations(n, prefix):
    """n distinct annotations of 5 bytes each: a 4-character key (prefix and
    three base-36 digits) and a 1-character value."""
    out = {}
    for i in range(n):
        key = prefix[i // 36 ** 3] + DIGITS[i // 36 ** 2 % 36] + DIGITS[i // 36 % 36] + DIGITS[i % 36]
        out[key] = "v"
    assert len(out) == n and sum(len(k) + len(v) for k, v in out.items()) < ANNOTATION_LIMIT
    return out


def big_deployment(name, replicas, image, annotations, template_annotations):
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels, "annotations": template_annotations},
                              "spec": {"containers": [{"name": "c", "image": image}],
                                       "terminationGracePeriodSeconds": 1}}}}


class Prober:
    """A thread calling probe("/healthz") every 100 ms until stopped; keeps
    each answer's status and seconds, or the error it raised."""

    def __init__(self, probe):
        self.probe = probe
        self.results = []
        self.errors = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.done.wait(0.1):
            try:
                status, _, seconds = self.probe("/healthz")
                self.results.append((status, seconds))
            except OSError as e:
                self.errors.append(repr(e))

    def start(self):
        self.thread.start()

    def stop(self):
        self.done.set()
        self.thread.join()


def roll_big_deployment(k, workdir, probe=None, pid=None, timeout=240):
    """Create a Deployment of 3 replicas with 50,000 annotations and a pod
    template with 20,000, wait for its rollout, change its image and wait
    again, probing meanwhile when probe is given; print kcm's CPU seconds
    (pid given), the probes' count, p50 and max, and the rollout times.
    Returns (rolled out, seconds, CPU seconds, probe results, probe errors)."""
    d = big_deployment("big", 3, IMAGE, many_annotations(50000, "abcde"),
                       many_annotations(20000, "fghij"))
    path = os.path.join(workdir, "big-deployment.json")
    with open(path, "w") as f:
        json.dump(d, f)
    cpu = _cpu_seconds(pid) if pid else 0.0
    prober = Prober(probe) if probe else None
    rolled, times = True, []
    start = time.monotonic()
    try:
        if prober:
            prober.start()
        # create, not apply: a last-applied copy would take the annotations past the limit
        k("create", "-f", path)
        for step in ("create", "image"):
            if step == "image":
                k("set", "image", "deployment/big", "c=" + IMAGE2)
            left = timeout - (time.monotonic() - start)
            p = k.run("rollout", "status", "deployment/big", "--timeout=%ds" % max(1, left),
                      check=False, timeout=max(1, left) + 30)
            times.append(time.monotonic() - start - sum(times))
            if p.returncode != 0 or "successfully rolled out" not in p.stdout:
                rolled = False
                break
    finally:
        if prober:
            prober.stop()
    cpu = (_cpu_seconds(pid) - cpu) if pid else None
    wall = time.monotonic() - start
    results = prober.results if prober else []
    errors = prober.errors if prober else []
    seconds = [s for _, s in results]
    print("    50,000 annotations, 20,000 on the template, 3 replicas, rolled once: %s in "
          "%.1f s (created %s, image changed %s); kcm CPU %s; %d probes, p50 %s, max %s, "
          "%d failed"
          % ("done" if rolled else "NOT done", wall,
             "%.1f s" % times[0] if times else "-",
             "%.1f s" % times[1] if len(times) > 1 else "-",
             "%.1f s" % cpu if cpu is not None else "-", len(results),
             "%.1f ms" % (1000 * _percentile(seconds, 0.5)) if seconds else "-",
             "%.1f ms" % (1000 * max(seconds)) if seconds else "-",
             len(errors) + sum(1 for st, _ in results if st != 200)), flush=True)
    return rolled, wall, cpu, results, errors


# The probes' bound; a sanitizer build, two to three times slower, is given more.
PROBE_SECONDS = float(os.environ.get("KCM_E2E_PROBE_SECONDS", "1.0"))


@scenario("a Deployment with 50,000 annotations and 20,000 on its pod template rolls out "
          "and rolls again while probes are answered under a second, in under 30 s of kcm CPU")
def big_annotations(ctx):
    kcm = ctx.env.kcm
    port = _kcm_port(ctx)
    probe = (lambda path: https_get(port, path, timeout=5)) if port else None
    rolled, wall, cpu, results, errors = roll_big_deployment(
        ctx.k, ctx.env.workdir, probe, kcm.proc.pid if kcm and kcm.proc else None)
    assert rolled, "the rollout did not finish within %.0f s" % wall
    assert not errors, errors[:5]
    assert all(status == 200 and seconds < PROBE_SECONDS for status, seconds in results), \
        [r for r in results if r[0] != 200 or r[1] >= PROBE_SECONDS][:5]
    assert cpu is None or cpu < 30, "kcm used %.1f s of CPU" % cpu


# --- objects as deep and as large as the API server keeps ----------------------------------

# kube-apiserver 1.37 decodes JSON to 10,000 levels and keeps managedFields
# entries as sent when they decode, so fieldsV1 may nest nearly that deep,
# on the object and on its pod template; etcd (1.5 MiB a request by
# default) keeps an object of 1.4 MiB, which the server serves as JSON six
# times as large when its strings are all '<' ("\u003c").
DEEP = 9990
BIG_VALUE = 1400 * 1024


def _managed(depth):
    """A managedFields entry whose fieldsV1 nests `depth` levels, as JSON
    text (Python's json module recurses per level)."""
    return ('{"manager":"tenant","operation":"Update","apiVersion":"apps/v1",'
            '"time":"2026-12-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":%s%s%s}'
            % ('{"f:a":' * depth, "{}", "}" * depth))


def _replicaset_text(name, replicas, meta_depth=0, template_depth=0, env=None):
    """A ReplicaSet as JSON text: managedFields meta_depth deep on it,
    template_depth deep on its pod template, an env value `env`."""
    labels = {"app": name}
    container = {"name": "c", "image": IMAGE}
    if env:
        container["env"] = [{"name": "E", "value": env}]
    template = json.dumps({"metadata": {"labels": labels},
                           "spec": {"containers": [container],
                                    "terminationGracePeriodSeconds": 1}})
    if template_depth:
        template = template.replace('{"metadata": {', '{"metadata": {"managedFields": [%s], '
                                    % _managed(template_depth), 1)
    meta = '{"name": "%s"%s}' % (name, ', "managedFields": [%s]' % _managed(meta_depth)
                                 if meta_depth else "")
    return ('{"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": %s, "spec": '
            '{"replicas": %d, "selector": {"matchLabels": %s}, "template": %s}}'
            % (meta, replicas, json.dumps(labels), template))


def _ready_rs(ctx, name, n, timeout=60):
    """Wait for kcm to report n ready pods of the ReplicaSet (read with a
    JSONPath: a deep template is more than Python's json module reads)."""
    want = "%d %d" % (n, n)
    wait_for(lambda: ctx.k.jsonpath("get", "rs", name,
                                    expr="{.status.readyReplicas} {.status.replicas}") == want,
             timeout=timeout, what="ReplicaSet %s with %d ready pods" % (name, n))


@scenario("objects as deep and as large as the API server keeps them are read in paged lists, "
          "streamed lists and watches: ReplicaSets whose managedFields nest 9,990 levels, on "
          "themselves and on their pod template, and one served as 8 MiB of JSON get their "
          "pods, one made deep by an update is scaled, and a Deployment beside them rolls out")
def deep_and_large_objects(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    if not env.real:
        raise Skip("kube-apiserver is the measure of what is stored and served")
    base = "/apis/apps/v1/namespaces/%s/replicasets" % ctx.ns
    for name, text in (
            ("deep", _replicaset_text("deep", 1, meta_depth=DEEP)),
            ("deep-template", _replicaset_text("deep-template", 1, template_depth=DEEP)),
            ("big", _replicaset_text("big", 1, env="<" * BIG_VALUE)),
            ("later", _replicaset_text("later", 1))):
        ctx.k("create", "--raw", base, "-f", "-", stdin=text, namespaced=False)
    served = ctx.k("get", "--raw", base + "/big", namespaced=False)
    assert len(served) > 6 * BIG_VALUE, len(served)
    with suite_kcm_stopped(ctx, "kcm-after-deep.log") as d, \
            extra_namespaces(ctx, "b") as (b,):
        for gates in ("WatchListClient=false", "WatchListClient=true"):
            kcm = env.own_kcm(d, "deep-kcm-%s.log" % gates[-4:], extra=(
                "--leader-elect=false", "--feature-gates=" + gates))
            try:
                wait_for(lambda: "caches synced" in kcm.text() or not kcm.alive(), timeout=60,
                         what="kcm to sync its caches (%s)" % gates)
                assert kcm.alive(), kcm.text()[-3000:]
                for name in ("deep", "deep-template", "big", "later"):
                    _ready_rs(ctx, name, 1 if gates.endswith("false") else 2)
                if gates.endswith("false"):
                    b.apply(deployment("web", 2))
                    wait_state(b, "web", lambda dp, rses: complete(dp), "web to complete",
                               timeout=60)
                    # A Deployment of a deep template: its ReplicaSet and pod.
                    text = _replicaset_text("deep-deployment", 1, template_depth=DEEP).replace(
                        '"kind": "ReplicaSet"', '"kind": "Deployment"', 1)
                    ctx.k("create", "--raw", base.replace("replicasets", "deployments"), "-f",
                          "-", stdin=text, namespaced=False)
                    wait_for(lambda: ctx.k.jsonpath(
                        "get", "deployment", "deep-deployment",
                        expr="{.status.availableReplicas}") == "1", timeout=60,
                        what="the Deployment of a deep template to roll out")
                    # Watched: each ReplicaSet scaled, "later" made deep in
                    # the same update.
                    for name in ("deep", "deep-template", "big"):
                        ctx.k("scale", "rs", name, "--replicas=2")
                    later = ctx.k.json("get", "rs", "later")
                    patch = ('{"metadata":{"managedFields":[%s]},"spec":{"replicas":2}}'
                             % _managed(DEEP))
                    ctx.k("patch", "rs", "later", "--type=merge", "-p", patch)
                    assert ctx.k.json("get", "rs", "later")["metadata"]["resourceVersion"] != \
                        later["metadata"]["resourceVersion"]
                    for name in ("deep", "deep-template", "big", "later"):
                        _ready_rs(ctx, name, 2)
                else:
                    b.k("scale", "deployment/web", "--replicas=3")
                    wait_state(b, "web", lambda dp, rses: complete(dp) and
                               dp["spec"]["replicas"] == 3, "web to complete with 3", timeout=60)
                log = kcm.text()
                assert "cannot read an object" not in log and "malformed" not in log, \
                    [ln for ln in log.splitlines() if "read" in ln][:5]
            finally:
                assert kcm.stop() == 0, kcm.text()[-3000:]
