"""Scenarios for who may read what on kcm's secure port: the health paths
anyone, /metrics a user the API server vouches for (TokenReview, or a
client certificate of a CA given with --client-ca-file) and authorizes
(SubjectAccessReview), the answers cached."""

import json
import os
import subprocess
import time

from harness import Skip, manifest_objects, scenario, wait_for
from scenarios_serving import https_get

REVIEWS = ("tokenreviews", "subjectaccessreviews")


def _get(port, path, **kw):
    """https_get's status and body; status 0 while nothing listens yet."""
    try:
        status, body, _ = https_get(port, path, **kw)
    except ConnectionRefusedError:
        return 0, ""
    return status, body


def _openssl(d, *args):
    subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)


def _client_certs(d, cn):
    """Two CAs and a client certificate for `cn` from each, made with the
    openssl CLI in d. Returns (the first CA's file, {ca: (cert, key)})."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    with open(os.path.join(d, "client.ext"), "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    out = {}
    for ca in ("trusted", "other"):
        _openssl(d, "req", "-x509", *ec, "-keyout", ca + "-ca.key", "-out", ca + "-ca.crt",
                 "-days", "1", "-subj", "/CN=kcm-e2e-%s-ca" % ca,
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        _openssl(d, "req", *ec, "-keyout", ca + ".key", "-out", ca + ".csr",
                 "-subj", "/O=kcm-e2e/CN=" + cn)
        _openssl(d, "x509", "-req", "-in", ca + ".csr", "-CA", ca + "-ca.crt",
                 "-CAkey", ca + "-ca.key", "-CAcreateserial", "-out", ca + ".crt", "-days", "1",
                 "-extfile", "client.ext")
        out[ca] = (os.path.join(d, ca + ".crt"), os.path.join(d, ca + ".key"))
    return os.path.join(d, "trusted-ca.crt"), out


def _reviews_since(env, last):
    """The reviews kcm sent the local API server since request number
    `last`, counted by resource."""
    items = env.api.get("/_sim/requests?since=%d" % last).json()["items"]
    counts = dict.fromkeys(REVIEWS, 0)
    for r in items:
        if r["user"] in env.kcm_users and r["resource"] in REVIEWS and r["verb"] == "create":
            counts[r["resource"]] += 1
    return counts


def _last_request(env):
    return env.api.get("/_sim/requests?since=999999999").json()["last"]


@scenario("secure port: health for anyone; /metrics for a user the API server vouches for "
          "and authorizes, by token or client certificate, the reviews cached")
def secure_port(ctx):
    env = ctx.env
    if env.kcm is None or not env.kcm.secure_port:
        raise Skip("kcm runs elsewhere, or another controller-manager is tested")
    port = env.kcm.secure_port
    wait_for(lambda: _get(port, "/healthz")[0] == 200, timeout=30,
             what="kcm's secure port to answer /healthz")
    for path in ("/healthz", "/readyz", "/livez"):
        assert _get(port, path) == (200, "ok"), (path, _get(port, path))

    # The metrics reader's ClusterRole from manifests/, bound to users made here.
    reader_role = manifest_objects()[("ClusterRole", "kcm-metrics-reader")]
    ctx.k("apply", "-f", "-", namespaced=False, stdin=json.dumps(reader_role))
    reader_ns, reader = env.user_token(ctx.ns, "metrics-reader")
    _, nobody = env.user_token(ctx.ns, "nobody")
    cn = "kcm-e2e-scraper-" + ctx.ns
    bindings = {ctx.ns + "-reader": {"kind": "ServiceAccount", "name": "metrics-reader",
                                     "namespace": reader_ns},
                ctx.ns + "-cert": {"kind": "User", "name": cn,
                                   "apiGroup": "rbac.authorization.k8s.io"}}
    ctx.k("apply", "--validate=false", "-f", "-", namespaced=False, stdin=json.dumps({
        "apiVersion": "v1", "kind": "List", "items": [{
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name}, "subjects": [subject],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "kcm-metrics-reader"}} for name, subject in bindings.items()]}))
    d = os.path.join(env.workdir, ctx.ns)
    os.makedirs(d, exist_ok=True)
    kcm = None
    try:
        # Ten scrapes with one token within the caches' 10 s: one TokenReview
        # and one SubjectAccessReview.
        last = _last_request(env) if env.sim else None
        started = time.monotonic()
        for _ in range(10):
            status, body = _get(port, "/metrics", token=reader)
            assert status == 200, (status, body[:300])
        took = time.monotonic() - started
        assert "# TYPE " in body and "\n# HELP " in "\n" + body, body[:300]
        if env.sim:
            assert took < 10, "10 scrapes took %.1f s, longer than the caches keep" % took
            counts = _reviews_since(env, last)
            print("    10 scrapes in %.2f s: %d TokenReview(s), %d SubjectAccessReview(s)"
                  % (took, counts["tokenreviews"], counts["subjectaccessreviews"]))
            assert counts == {"tokenreviews": 1, "subjectaccessreviews": 1}, counts

        for who, kw, want in (("a bogus token", {"token": "bogus-" + ctx.ns}, 401),
                              ("anonymous", {}, 403),
                              ("a user without RBAC", {"token": nobody}, 403)):
            got = _get(port, "/metrics", **kw)
            assert got[0] == want, "/metrics for %s: %s" % (who, got)
        # /debug/shadow is authorized as /metrics is, for its own URL: the
        # metrics reader's role does not reach it.
        for who, kw in (("anonymous", {}), ("the metrics reader", {"token": reader})):
            got = _get(port, "/debug/shadow", **kw)
            assert got[0] == 403, "/debug/shadow for %s: %s" % (who, got)
        # As upstream's delegated authentication: a credential presented and
        # refused is refused on every path; only none at all is anonymous.
        got = _get(port, "/healthz", token="bogus-" + ctx.ns)
        assert got[0] == 401, "/healthz with a bogus token: %s" % (got,)

        # Client certificates: kcm trusts one CA, not the other.
        ca_file, certs = _client_certs(d, cn)
        kcm = env.own_kcm(d, log_name="client-ca.log",
                          extra=["--client-ca-file", ca_file])
        wait_for(lambda: _get(kcm.secure_port, "/healthz")[0] == 200 or not kcm.alive(),
                 timeout=30, what="the second kcm's secure port")
        assert kcm.alive(), kcm.text()[-2000:]
        status, body = _get(kcm.secure_port, "/metrics", cert=certs["trusted"])
        assert status == 200 and "# TYPE " in body, (status, body[:300])
        got = _get(kcm.secure_port, "/metrics", cert=certs["other"])
        assert got[0] == 401, "/metrics for another CA's certificate: %s" % (got,)
        assert kcm.stop() == 0, kcm.text()[-2000:]
    finally:
        if kcm is not None:
            kcm.stop()
        for name in bindings:
            ctx.k.run("delete", "clusterrolebinding", name, namespaced=False, check=False)
