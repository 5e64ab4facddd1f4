"""kcm with --shadow beside the live controller: it writes nothing, and
where the live one leaves an object as kcm would not, it says so."""

import re

from harness import Skip, http_get, plain_port, scenario, suite_kcm_stopped, wait_for
from scenarios_replicaset import rs_manifest

DISAGREES = "shadow: kcm would act where the live controller has not"


def _disagreements(report, obj):
    return [d for c in report["controllers"] for d in c["latest"] if d["object"] == obj]


@scenario("a shadow kcm that would replace failed pods at once, beside a live one that backs "
          "off, reports the ReplicaSet left short with both sides to authorized callers, and "
          "writes nothing",
          needs_sim="its kubelet fails the pods of images that name crash")
def shadow_reports_a_difference(ctx):
    env = ctx.env
    if not env.is_kcm:
        raise Skip("--shadow is kcm's")
    obj = "%s/crashy" % ctx.ns
    with suite_kcm_stopped(ctx, "kcm-after-shadow.log") as d:
        live = env.own_kcm(d, "live.log")  # the default --failed-pod-backoff, 5m
        shadow = env.own_shadow(d, "shadow.log", ("--failed-pod-backoff=0", "--shadow-window=5s"))
        try:
            wait_for(lambda: "caches synced" in shadow.text(), timeout=30,
                     what="the shadow's caches")
            # The local kubelet fails pods whose image names "crash": the live
            # kcm waits longer after each wave, which the shadow would not.
            ctx.apply(rs_manifest("crashy", 2, image="example/crash:1"))
            found = wait_for(lambda: _disagreements(env.shadow_report(shadow), obj), timeout=90,
                             what="the shadow to report the ReplicaSet")[0]
            assert found["reason"] == "create pods", found
            # and the status those creates would make: the pods counted
            assert re.match(r"create pods( \(x2\))?(; patch replicasets/crashy/status .*)?$",
                            found["plan"], re.S), found
            assert "replicas 2, status replicas" in found["observed"], found
            assert "unchanged for" in found["observed"], found
            line = next(ln for ln in shadow.text().splitlines() if DISAGREES in ln)
            assert 'object="%s"' % obj in line and 'plan="create pods' in line, line
            metrics = http_get(plain_port(shadow, "metrics"), "/metrics")[1]
            n = re.search(r'^kcm_shadow_disagreements_total\{controller="replicaset",'
                          r'reason="create pods"\} (\d+)$', metrics, re.M)
            assert n and int(n.group(1)) >= 1, metrics
            assert "kcm_shadow_compared_total" in metrics, metrics
            # Its plans only to authorized callers: not on the plain port.
            status, body = http_get(plain_port(shadow, "metrics"), "/debug/shadow")
            assert status == 403 and "secure port" in body, (status, body)
            # It read, and wrote nothing: every pod is the live kcm's, and no
            # lease, event or status came from the shadow.
            writes = env.shadow_writes()
            assert not writes, writes
            assert "acquire lease" in live.text() and "acquire lease" not in shadow.text()
        finally:
            assert shadow.stop() == 0
            assert live.stop() == 0
