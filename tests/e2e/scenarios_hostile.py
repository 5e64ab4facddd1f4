"""Scenarios with objects a tenant may make as large as the API server lets
them be: kcm must roll them out in bounded time and keep answering its
probes meanwhile."""

import json
import os
import threading
import time

from harness import scenario
from scenarios_deployment import IMAGE, IMAGE2
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
