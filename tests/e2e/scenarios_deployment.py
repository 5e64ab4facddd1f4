"""Deployment scenarios driven with kubectl."""

import os

from harness import ROOT, scenario

EXAMPLE = os.path.join(ROOT, "manifests", "examples", "nginx-deployment.yaml")


@scenario("apply, scale and read back the example Deployment")
def apply_scale_read_back(ctx):
    k = ctx.k
    out = k("apply", "-f", EXAMPLE)
    assert "deployment.apps/nginx-deployment created" in out, out
    d = k.json("get", "deployment", "nginx-deployment")
    assert d["spec"]["replicas"] == 2, d["spec"]
    assert d["spec"]["selector"] == {"matchLabels": {"app": "nginx"}}
    c = d["spec"]["template"]["spec"]["containers"][0]
    assert (c["name"], c["image"], c["ports"][0]["containerPort"]) == ("nginx", "nginx:1.7.9", 80)
    assert d["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": "25%", "maxUnavailable": "25%"}
    gen = d["metadata"]["generation"]

    out = k("scale", "deployment/nginx-deployment", "--replicas=5")
    assert "deployment.apps/nginx-deployment scaled" in out, out
    replicas = k.jsonpath("get", "deployment", "nginx-deployment", expr="{.spec.replicas}")
    assert replicas == "5", replicas
    d = k.json("get", "deployment", "nginx-deployment")
    assert d["metadata"]["generation"] == gen + 1, d["metadata"]
    table = k("get", "deployment", "nginx-deployment")
    header = table.splitlines()[0].split()
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], table
    assert table.splitlines()[1].split()[0] == "nginx-deployment", table
    described = k("describe", "deployment", "nginx-deployment")
    assert "Replicas:" in described and "5 desired" in described, described
    assert "nginx:1.7.9" in described, described
