#!/usr/bin/env python3
"""A build of kcm with a third controller, touch (tests/third/touch), run
against the local API server: its flags in --help and at work, its name
taken by --controllers, its queue's metrics, its caches alone when it runs
alone, and kcm's own controllers beside it unchanged.

Usage: run.py KCM_THIRD_BINARY"""

import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "e2e"))

from harness import Env, Kcm, http_get, plain_port, wait_for  # noqa: E402

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: registry.k8s.io/pause:3.10}]}
"""


def check_help(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    assert "against an API server: deployment, replicaset, touch.\n" in out, out[:400]
    for want in ("\nTouch controller flags:\n  --concurrent-touch-syncs N",
                 "  --touch-word WORD", "\nDeployment controller flags:",
                 "\nReplicaSet controller flags:"):
        assert want in out, "--help lacks %r" % want
    assert out.index("Touch controller flags") < out.index("Plain HTTP flags")
    bad = subprocess.run([binary, "--concurrent-touch-syncs=0"], capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stderr.endswith("Error: invalid value \"0\" for flag --concurrent-touch-syncs: "
                               "must be a positive integer\n"), bad.stderr[-300:]


def alone(env, extra, log_name, until):
    """kcm_third with extra flags, until its log has `until`; its log."""
    kcm = Kcm(env.kcm_binary, env.kcm_kubeconfig, env.workdir,
              extra=("--leader-elect=false", *extra), log_name=log_name)
    try:
        wait_for(lambda: until in kcm.text() or not kcm.alive(), timeout=30,
                 what="%s to log %s" % (log_name, until))
        return kcm.text()
    finally:
        assert kcm.stop() == 0, kcm.text()[-2000:]


def main():
    binary = os.path.abspath(sys.argv[1])
    check_help(binary)
    env = Env(binary, ("--concurrent-touch-syncs=3", "--touch-word=ahoy"))
    try:
        k = env.kubectl("default")
        wait_for(lambda: "caches synced" in env.kcm.text() or not env.kcm.alive(), timeout=30,
                 what="kcm to sync")
        text = env.kcm.text()
        assert 'starting controller name="touch" workers=3' in text, text[-2000:]
        assert 'starting controller name="deployment" workers=5' in text, text[-2000:]
        k("apply", "-f", "-", stdin=DEPLOYMENT)
        # touch syncs it with its flag's word; kcm's own controllers roll it out
        wait_for(lambda: re.search(r'touched key="default/web" generation=1 word="ahoy"',
                                   env.kcm.text()), timeout=30, what="touch to sync web")
        wait_for(lambda: k.json("get", "deployment", "web").get("status", {})
                 .get("replicas") == 2, timeout=60, what="web's 2 replicas")
        port = plain_port(env.kcm, "metrics")
        status, body = http_get(port, "/metrics")
        assert status == 200
        m = re.search(r'^workqueue_adds_total\{name="touch"\} (\d+)', body, re.M)
        assert m and int(m.group(1)) >= 1, "no touch queue in /metrics"
        assert 'workqueue_adds_total{name="deployment"}' in body
        k("scale", "deployment", "web", "--replicas=3")
        wait_for(lambda: 'touched key="default/web" generation=2' in env.kcm.text(), timeout=30,
                 what="touch to see generation 2")
        assert env.kcm.stop() == 0
        # Alone, it caches Deployments alone; left out, it does not start.
        text = alone(env, ("--controllers=touch,job",), "touch-alone.log",
                     'touched key="default/web" generation=2')
        assert 'caches synced resources="deployments"' in text, text[-2000:]
        assert 'starting controller name="deployment"' not in text
        assert 'controllers="job" own="deployment,replicaset,touch"' in text, text[-2000:]
        # (the controllers start together, in the table's order)
        text = alone(env, ("--controllers=*,-touch-controller",), "touch-off.log",
                     'starting controller name="replicaset"')
        assert 'starting controller name="deployment"' in text
        assert 'starting controller name="touch"' not in text
    finally:
        env.close()
    print("PASS third controller: flags, --controllers, caches, metrics")


if __name__ == "__main__":
    main()
