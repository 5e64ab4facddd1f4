"""Scenarios about the kcm process itself."""

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
import time

from harness import (MANIFEST_VARIANTS, ROOT, Kcm, Skip, free_ports, manifest_objects,
                     manifest_yaml, scenario, suite_kcm_stopped, wait_for)


@scenario("kcm connects to the API server and keeps running")
def kcm_connects(ctx):
    kcm = ctx.env.kcm
    if kcm is None or not ctx.env.is_kcm:
        raise Skip("another controller-manager logs differently")
    wait_for(lambda: "connected to the API server" in kcm.text(), timeout=30,
             what="kcm to log its connection")
    assert kcm.alive(), "kcm exited: %s" % kcm.text()[-2000:]


def _sim_setting(ctx, subdir):
    """For scenarios that start their own kcm against the local API server:
    a new directory, the server URL, its CA data and its token."""
    env = ctx.env
    d = os.path.join(env.workdir, subdir)
    os.makedirs(d, exist_ok=True)
    server, ca = _sim_cluster(env)
    token = open(os.path.join(env.sim.dir, "token")).read().strip()
    return d, server, ca, token


def _sim_cluster(env):
    """The server URL and CA data of the local API server's kubeconfig."""
    import re
    text = open(env.kubeconfig).read()
    server = re.search(r"server: (\S+)", text).group(1)
    ca = re.search(r"certificate-authority-data: (\S+)", text).group(1)
    return server, ca


def _kubeconfig(path, server, ca, user_yaml):
    with open(path, "w") as f:
        f.write("current-context: x\n"
                "clusters: [{name: c, cluster: {server: '%s', certificate-authority-data: %s}}]\n"
                "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
                "users:\n- name: u\n  user:\n%s" % (server, ca, user_yaml))
    os.chmod(path, 0o600)


def _expect_sync(kcm, what, secrets=()):
    try:
        wait_for(lambda: "caches synced" in kcm.text() or not kcm.alive(), timeout=30,
                 what="kcm to sync its caches with %s" % what)
        assert "caches synced" in kcm.text(), "kcm with %s: %s" % (what, kcm.text()[-2000:])
        for secret in secrets:  # logged at the highest verbosity, still never a credential
            assert secret not in kcm.text(), "kcm with %s logged a credential" % what
        # Every credential file here is the owner's alone.
        assert "other users" not in kcm.text(), kcm.text()[-2000:]
    finally:
        code = kcm.stop()
    assert code == 0, "kcm with %s exited %s" % (what, code)


@scenario("kcm syncs its caches with every kind of credential",
          needs_sim="it uses the server's certificates and tokens")
def every_credential(ctx):
    env, sim = ctx.env, ctx.env.sim
    if not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    d, server, ca, token = _sim_setting(ctx, "credentials")
    with open(os.path.join(d, "token"), "w") as f:
        f.write(token + "\n")
    os.chmod(os.path.join(d, "token"), 0o600)
    plugin = os.path.join(d, "plugin.sh")
    with open(plugin, "w") as f:
        f.write("#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\","
                "\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}'\n" % token)
    os.chmod(plugin, 0o755)
    users = {
        "a bearer token": "    token: %s\n" % token,
        "a token file": "    tokenFile: token\n",
        "a client certificate": "    client-certificate: %s\n    client-key: %s\n" % (
            os.path.join(sim.dir, "client.crt"), os.path.join(sim.dir, "client.key")),
        "an exec plugin": "    exec: {apiVersion: client.authentication.k8s.io/v1, "
                          "command: ./plugin.sh, interactiveMode: Never}\n",
    }
    with open(os.path.join(sim.dir, "client.key")) as f:
        key = f.read().split("\n")[1]  # a line of the private key
    for i, (what, user) in enumerate(users.items()):
        path = os.path.join(d, "kubeconfig-%d" % i)
        _kubeconfig(path, server, ca, user)
        extra = ["-v", "10"] + (["--logging-format=json"] if i % 2 else [])
        kcm = Kcm(ctx.env.kcm_binary, path, d, log_name="kcm-%d.log" % i, extra=extra)
        _expect_sync(kcm, what, secrets=(token, key))
        if i % 2:
            for line in kcm.text().splitlines():
                assert isinstance(json.loads(line)["msg"], str), line
    # In a pod: the service host and port in the environment, and the
    # service account's token, CA and namespace in files.
    sa = os.path.join(d, "serviceaccount")
    os.makedirs(sa, exist_ok=True)
    with open(os.path.join(sa, "token"), "w") as f:
        f.write(token)
    with open(os.path.join(sa, "namespace"), "w") as f:
        f.write("kube-system\n")
    with open(os.path.join(sim.dir, "ca.crt")) as src, open(os.path.join(sa, "ca.crt"), "w") as f:
        f.write(src.read())
    port = server.rsplit(":", 1)[1]
    incluster_env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": port,
                     "KCM_SERVICEACCOUNT_DIR": sa, "HOME": d, "KUBECONFIG": ""}
    _expect_sync(Kcm(ctx.env.kcm_binary, None, d, log_name="kcm-incluster.log",
                     env=incluster_env), "in-cluster settings")


@scenario("a server certificate the kubeconfig's CA did not sign is refused, naming the server",
          needs_sim="it uses the server's certificates")
def untrusted_server(ctx):
    env, sim = ctx.env, ctx.env.sim
    if not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    d, server, _, token = _sim_setting(ctx, "untrusted")
    # Trust the sim's client certificate in place of its CA: the server's
    # chain then leads to no trusted certificate.
    with open(os.path.join(sim.dir, "client.crt"), "rb") as f:
        other = base64.b64encode(f.read()).decode()
    path = os.path.join(d, "kubeconfig")
    _kubeconfig(path, server, other, "    token: %s\n" % token)
    kcm = Kcm(env.kcm_binary, path, d, log_name="kcm-untrusted.log")
    try:
        line = wait_for(lambda: next((ln for ln in kcm.text().splitlines()
                                      if "cannot reach the API server" in ln), None)
                        or (not kcm.alive() and "exited"), timeout=30,
                        what="kcm to report the server it cannot trust")
        assert line != "exited", kcm.text()[-2000:]
        assert 'server="%s"' % server in line, line
        assert "certificate" in line, line
        assert "caches synced" not in kcm.text(), kcm.text()[-2000:]
        assert token not in kcm.text()
    finally:
        code = kcm.stop()
    assert code == 0, "kcm exited %s" % code


def _token_kcm(ctx, subdir, token, extra=()):
    """The server URL, and a kcm of the scenario's own against the local API
    server with a bearer token (None: the server's own) in the directory
    subdir."""
    if not ctx.env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    d, server, ca, own = _sim_setting(ctx, subdir)
    path = os.path.join(d, "kubeconfig")
    _kubeconfig(path, server, ca, "    token: %s\n" % (token or own))
    return server, Kcm(ctx.env.kcm_binary, path, d, log_name="kcm-%s.log" % subdir, extra=extra)


@scenario("a token the server refuses is reported as unauthorized, not as forbidden or "
          "unreachable", needs_sim="it uses the server's certificates")
def refused_token(ctx):
    server, kcm = _token_kcm(ctx, "refused-token", "not-a-token-of-this-server")
    try:
        line = wait_for(lambda: next((ln for ln in kcm.text().splitlines()
                                      if "/version" in ln or "the API server" in ln), None),
                        timeout=30, what="kcm to report the refused token")
        assert "unauthorized: the API server refused kcm's credentials" in line, line
        assert "token or client certificate in the kubeconfig" in line, line
        assert 'server="%s"' % server in line and "status=401" in line, line
        wait_for(lambda: "list failed" in kcm.text(), timeout=30, what="a list refused")
        text = kcm.text()
        assert "forbidden" not in text.lower() and "cannot reach" not in text, text[-3000:]
    finally:
        code = kcm.stop()
    assert code == 0, "kcm exited %s" % code


@scenario("a port alone given to --metrics-bind-address or --health-probe-bind-address is "
          "served on loopback", needs_sim="it uses the server's certificates and token")
def port_alone(ctx):
    metrics_port, health_port = free_ports(2)
    _, kcm = _token_kcm(ctx, "port-alone", None,
                        extra=["--metrics-bind-address=%d" % metrics_port,
                               "--health-probe-bind-address", str(health_port)])
    try:
        metrics, health = _served(kcm, "metrics"), _served(kcm, "health probes")
        assert metrics == "http://127.0.0.1:%d" % metrics_port, metrics
        assert health == "http://127.0.0.1:%d" % health_port, health
        assert _get(metrics + "/metrics")[0] == 200
        assert _get(health + "/healthz/ping") == (200, "ok")
    finally:
        code = kcm.stop()
    assert code == 0, "kcm exited %s" % code


WRITE = re.compile(r"\] (POST|PUT|PATCH|DELETE) (\S+) ")


def _writes(kcm):
    """The writes kcm logged at -v 6, leases excepted."""
    return [m.group(1) + " " + m.group(2) for m in WRITE.finditer(kcm.text())
            if "/leases" not in m.group(2)]


def _leads(kcm):
    return "successfully acquired lease" in kcm.text()


@scenario("only the leader writes; a standby takes over after SIGTERM and after kill -9",
          needs_sim="it counts each kcm's writes in the server's request log")
def leader_election(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    from scenarios_replicaset import rs_manifest, wait_replicas
    lease_s, retry_s = 4, 0.5
    args = ["-v", "6", "--leader-elect-resource-name=" + ctx.ns,
            "--leader-elect-lease-duration=%ds" % lease_s,
            "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=%gs" % retry_s]
    env.allow_lease(ctx.ns)

    def start(name):
        kcm = env.own_kcm(d, extra=args, log_name=name + ".log")
        wait_for(lambda: "caches synced" in kcm.text() or not kcm.alive(), timeout=30,
                 what="%s to sync its caches" % name)
        assert kcm.alive(), kcm.text()[-2000:]
        return kcm

    def lease():
        return ctx.k.json("get", "lease", ctx.ns, "-n", "kube-system")["spec"]

    # The suite's kcm would act too.
    with suite_kcm_stopped(ctx, "kcm-after-leader-election.log") as d:
        started = []
        try:
            a = start("a")
            started.append(a)
            wait_for(lambda: _leads(a), timeout=10, what="the first kcm to lead")
            b = start("b")
            started.append(b)
            spec = lease()
            assert spec["holderIdentity"].startswith(os.uname().nodename + "_"), spec
            assert (spec["leaseDurationSeconds"], spec.get("leaseTransitions", 0)) == (lease_s, 0)
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", spec["renewTime"]), spec
            first_holder = spec["holderIdentity"]
            last = ctx.api.get("/_sim/requests").json()["last"]

            ctx.apply(rs_manifest("web", 4))
            wait_replicas(ctx, "web", 4)
            assert not _leads(b) and not _writes(b), "the standby wrote: %s" % _writes(b)
            assert any("/pods" in w for w in _writes(a)), _writes(a)

            # SIGTERM: the leader releases the lease and the standby leads at its next try.
            assert a.stop() == 0, a.text()[-2000:]
            stopped = time.monotonic()
            wait_for(lambda: _leads(b), timeout=3, interval=0.05,
                     what="the standby to lead within 3 s of SIGTERM")
            took = time.monotonic() - stopped
            spec = lease()
            assert spec["holderIdentity"] not in ("", first_holder), spec
            assert spec["leaseTransitions"] == 1, spec
            ctx.k("scale", "rs", "web", "--replicas=6")
            wait_replicas(ctx, "web", 6)

            # kill -9: the lease is not released; the new standby waits it out.
            c = start("c")
            started.append(c)
            b.stop(signal.SIGKILL)
            killed = time.monotonic()
            limit = lease_s + retry_s * 2.2 + 1
            wait_for(lambda: _leads(c), timeout=limit, interval=0.05,
                     what="the standby to lead within the lease duration and a retry")
            took_kill = time.monotonic() - killed
            assert took_kill >= lease_s - 1, "took over a live lease after %.1f s" % took_kill
            assert lease()["leaseTransitions"] == 2, lease()
            ctx.k("scale", "rs", "web", "--replicas=8")
            wait_replicas(ctx, "web", 8)
            creates = [r for r in ctx.api.get("/_sim/requests?since=%d" % last).json()["items"]
                       if r["verb"] == "create" and r["resource"] == "pods"
                       and r["namespace"] == ctx.ns and r["code"] == 201]
            assert len(creates) == 8, "%d pods created for 8 replicas" % len(creates)
            print("    SIGTERM handover %.2f s, kill -9 handover %.2f s" % (took, took_kill))
        finally:
            for kcm in started:
                kcm.stop()
            ctx.k.run("delete", "lease", ctx.ns, "-n", "kube-system", check=False)


@scenario("bad flags are refused with exit status 1, the usage, then the reason last")
def bad_flags(ctx):
    binary = ctx.env.kcm_binary
    if not ctx.env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    missing = os.path.join(ctx.env.workdir, "no-such-kubeconfig")

    def run(*args):
        return subprocess.run([binary, *args], capture_output=True, text=True, timeout=30)

    refused = {
        ("--bogus",): "unknown flag: --bogus",
        ("extra",): 'unexpected argument "extra"',
        ("--kubeconfig",): "flag needs an argument: --kubeconfig",
        ("--kube-api-qps=fast",): 'invalid value "fast" for flag --kube-api-qps',
        ("--kube-api-burst=0",): 'invalid value "0" for flag --kube-api-burst',
        ("--concurrent-deployment-syncs=0",):
            'invalid value "0" for flag --concurrent-deployment-syncs',
        ("--concurrent-replicaset-syncs", "x"):
            'invalid value "x" for flag --concurrent-replicaset-syncs',
        ("-v", "-1"): 'invalid value "-1" for flag -v',
        ("--leader-elect=maybe",): 'invalid value "maybe" for flag --leader-elect',
        ("--leader-elect-lease-duration=15",):
            'invalid value "15" for flag --leader-elect-lease-duration: must be a duration',
        ("--leader-elect-renew-deadline=10x",):
            'invalid value "10x" for flag --leader-elect-renew-deadline',
        ("--shutdown-grace-period=-1s",): 'invalid value "-1s" for flag --shutdown-grace-period',
        ("--leader-elect-lease-duration=5s",):
            "the lease duration must be greater than the renew deadline",
        ("--leader-elect-retry-period=8500ms",):
            "the renew deadline must be greater than 1.2 times the retry period",
        ("--leader-elect-lease-duration=1m30s", "--leader-elect-renew-deadline=1m30s"):
            "the lease duration must be greater than the renew deadline",
        ("--leader-elect-resource-name=",): "the lease namespace and name must not be empty",
        ("--controllers=deployment,endpoints",):
            '"endpoints" is not in the list of known controllers',
        ("--min-resync-period=soon",): 'invalid value "soon" for flag --min-resync-period',
        ("--status-write-interval=1",):
            'invalid value "1" for flag --status-write-interval: must be a duration',
        ("--failed-pod-backoff=-1s",):
            'invalid value "-1s" for flag --failed-pod-backoff: must be a duration',
        ("--logging-format=xml",): 'invalid value "xml" for flag --logging-format',
        ("--metrics-bind-address=70000",):
            'invalid value "70000" for flag --metrics-bind-address: must be [host]:port, '
            'a port alone or 0',
        ("--health-probe-bind-address", ":99999"):
            'invalid value ":99999" for flag --health-probe-bind-address',
        ("--conflict-system-namespaces=kube_system",):
            'invalid value "kube_system" for flag --conflict-system-namespaces: each must be a '
            'namespace name',
        ("--conflict-system-namespaces=a,b,c,d,e,f,g,h,i",):
            'invalid value "a,b,c,d,e,f,g,h,i" for flag --conflict-system-namespaces: at most 8',
        # Where others write Leases, they could shrink every instance's share.
        ("--shards=4", "--leader-elect-resource-namespace=kube-system"):
            "invalid --shards settings: the shards' Leases need a namespace where only kcm "
            "writes Leases",
        ("--shards=4", "--leader-elect-resource-namespace=default"):
            "invalid --shards settings: the shards' Leases need a namespace where only kcm",
    }
    for args, message in refused.items():
        p = run(*args)
        assert p.returncode == 1, (args, p.returncode, p.stderr)
        # As kube-controller-manager: the usage first, the error on the last
        # line, where a terminal still shows it.
        usage, _, last = p.stderr.rstrip("\n").rpartition("\n")
        assert last.startswith("Error: ") and message in last, (args, p.stderr[-500:])
        assert usage.startswith("Usage: kcm [flags]\n"), (args, p.stderr[:500])
    # With --logging-format=json, before or after the bad flag, the error is
    # one JSON line and the whole of stderr: no usage.
    for args in (("--bogus", "--logging-format=json"), ("--logging-format", "json", "--bogus")):
        p = run(*args)
        assert p.returncode == 1, (args, p.returncode, p.stderr)
        lines = [json.loads(line) for line in p.stderr.splitlines()]
        assert len(lines) == 1 and lines[0]["err"] == "unknown flag: --bogus", (args, p.stderr)
    p = run("--leader-elect-lease-duration=5s", "--logging-format=json")
    assert p.returncode == 1 and "renew deadline" in json.loads(p.stderr)["err"], p.stderr
    # Accepted flags get past parsing and fail later, on the missing kubeconfig.
    for args in (("--leader-elect=false", "--leader-elect-lease-duration=5s"),
                 ("--leader-elect", "--leader-elect-retry-period=8s"),
                 ("--leader-elect-lease-duration=1m30s", "--leader-elect-renew-deadline=1m",
                  "--leader-elect-retry-period=1.5s", "--shutdown-grace-period=0"),
                 ("--leader-elect-resource-namespace=ops", "--leader-elect-resource-name=x"),
                 ("--shards=4",), ("--conflict-system-namespaces=",),
                 ("--conflict-system-namespaces=kube-system,platform",),
                 ("--health-probe-bind-address=0", "--metrics-bind-address=[::1]:0"),
                 ("--health-probe-bind-address=8081", "--metrics-bind-address", "19113"),
                 ("--controllers=*,-deployment", "--min-resync-period=1h30m"),
                 ("--logging-format=json",)):
        p = run("--kubeconfig", missing, *args)
        assert p.returncode == 1 and missing in p.stderr, (args, p.returncode, p.stderr)
    # With JSON logs every line is JSON, the fatal one and the warnings included.
    p = run("--kubeconfig", missing, "--logging-format=json", "--cluster-cidr=10.0.0.0/8")
    lines = [json.loads(line) for line in p.stderr.splitlines()]
    assert [o["msg"] for o in lines] == [
        "ignoring kube-controller-manager flags of controllers and features kcm does not have",
        "cannot load the settings"], lines
    assert lines[0]["flags"] == "--cluster-cidr" and missing in lines[1]["err"], lines
    p = run("--help")
    assert p.returncode == 0, p.stderr
    for flag in ("--kubeconfig", "--leader-elect-lease-duration", "--leader-elect-renew-deadline",
                 "--leader-elect-retry-period", "--leader-elect-resource-namespace",
                 "--leader-elect-resource-name", "--shutdown-grace-period",
                 "--health-probe-bind-address", "--metrics-bind-address",
                 "--concurrent-deployment-syncs", "--kube-api-qps"):
        assert flag in p.stdout, (flag, p.stdout)
    p = run("--version")
    assert p.returncode == 0 and re.match(r"kcm v\d+\.\d+\.\d+ \(commit (\w{12}|unknown), "
                                          r"built \d{4}-\d\d-\d\dT[\d:]+Z\)\n$", p.stdout), p.stdout
    p = run("--version=raw")
    assert p.returncode == 0 and p.stdout.startswith('version.Info{Major:"'), p.stdout


def _served(kcm, what):
    """The address kcm logged for its health probes or metrics."""
    m = wait_for(lambda: re.search(r'serving %s address="([^"]+)"' % what, kcm.text()),
                 timeout=10, what="kcm to serve %s" % what)
    return "http://" + m.group(1)


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@scenario("health probes and metrics are served")
def probes_and_metrics(ctx):
    kcm = ctx.env.kcm
    if kcm is None or not ctx.env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    health, metrics = _served(kcm, "health probes"), _served(kcm, "metrics")
    wait_for(lambda: _get(health + "/readyz")[0] == 200, timeout=30, what="kcm to be ready")
    for path in ("/healthz", "/livez", "/readyz", "/healthz/ping", "/readyz/informer-sync"):
        assert _get(health + path) == (200, "ok"), (path, _get(health + path))
    code, body = _get(health + "/readyz?verbose")
    assert code == 200 and body == ("[+]ping ok\n[+]informer-sync ok\n[+]shutdown ok\n"
                                    "[+]sole-controller ok\nreadyz check passed\n"), body
    code, body = _get(health + "/healthz?verbose&exclude=leaderElection")
    assert code == 200 and "[+]leaderElection excluded: ok\n" in body, body
    assert _get(health + "/nope")[0] == 404
    assert _get(health + "/healthz/nope")[0] == 404
    code, body = _get(metrics + "/metrics")
    assert code == 200, (code, body)
    assert re.search(r'^leader_election_master_status\{name="kcm"\} 1$', body, re.M), body
    # What was built, as kubernetes_build_info says it: the version --version prints.
    version = subprocess.run([ctx.env.kcm_binary, "--version"], capture_output=True, text=True,
                             timeout=10).stdout
    m = re.search(r'^kcm_build_info\{build_date="([^"]+)",compiler="[^"]+",'
                  r'git_commit="([0-9a-f]{40}|unknown)",git_tree_state="(clean|dirty|unknown)",'
                  r'git_version="(v[0-9.]+)",platform="linux/[a-z0-9]+"\} 1$', body, re.M)
    assert m, body
    assert version.startswith("kcm %s (commit %s, built %s)" % (m.group(4), m.group(2)[:12],
                                                                m.group(1))), (version, m.groups())
    rss = re.search(r"^process_resident_memory_bytes (\d+)$", body, re.M)
    assert rss and int(rss.group(1)) > 1 << 20, body
    assert re.search(r"^process_start_time_seconds \d+(\.\d+)?$", body, re.M), body
    # The counters move as work is done: a ReplicaSet of 2 makes the queue and the client work.

    def value(text, pattern):
        m = re.search(r"^%s (\S+)$" % pattern, text, re.M)
        return float(m.group(1)) if m else 0.0
    adds = r'workqueue_adds_total\{name="replicaset"\}'
    posts = r'rest_client_requests_total\{code="201",host="[^"]+",method="POST"\}'
    before = body
    from scenarios_replicaset import rs_manifest, wait_replicas
    ctx.apply(rs_manifest("web", 2))
    wait_replicas(ctx, "web", 2)
    after = _get(metrics + "/metrics")[1]
    assert value(after, adds) > value(before, adds), after
    assert value(after, posts) >= value(before, posts) + 2, after
    for family in ("workqueue_depth", "workqueue_queue_duration_seconds",
                   "workqueue_work_duration_seconds", "workqueue_retries_total",
                   "workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds",
                   "rest_client_request_duration_seconds", "rest_client_rate_limiter_duration_seconds"):
        assert "# TYPE %s " % family in after, family
    for family, groups in (("replicaset_controller_stale_sync_skips_total",
                            (("apps", "replicasets"), ("", "pods"))),
                           ("deployment_controller_stale_sync_skips_total",
                            (("apps", "deployments"), ("apps", "replicasets")))):
        assert "# TYPE %s counter" % family in after, family
        for g, r in groups:
            assert re.search(r'^%s\{group="%s",resource="%s"\} \d+$' % (family, g, r), after,
                             re.M), (family, g, r)
    families = re.findall(r"^# TYPE (\S+) ", body, re.M)
    assert len(families) == len(set(families)), families
    for line in body.splitlines():
        assert line.startswith("#") or re.fullmatch(r'[a-zA-Z_:][\w:]*(\{.*\})? \S+', line), line


@scenario("--controllers runs only the controllers it names",
          needs_sim="it relies on no other Deployment or ReplicaSet controller running")
def chosen_controllers(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    from scenarios_deployment import deployment, wait_complete
    from scenarios_replicaset import rs_manifest, wait_replicas
    with suite_kcm_stopped(ctx, "kcm-after-controllers.log") as d:
        kcm = None
        try:
            # Only the ReplicaSet controller: a ReplicaSet gets pods, a Deployment nothing.
            kcm = env.own_kcm(d, log_name="rs-only.log",
                              extra=["--controllers=replicaset", "--leader-elect=false"])
            wait_for(lambda: "caches synced" in kcm.text(), timeout=30, what="kcm to sync")
            assert 'resources="pods,replicasets"' in kcm.text(), kcm.text()[-2000:]
            assert 'name="deployment"' not in kcm.text()
            ctx.apply(rs_manifest("plain", 2))
            ctx.apply(deployment("web", 2))
            wait_replicas(ctx, "plain", 2)
            assert ctx.k.json("get", "deployment", "web").get("status", {}) == {}
            assert ctx.k.json("get", "replicasets", "-l", "app=web")["items"] == []
            assert kcm.stop() == 0
            # Everything but the ReplicaSet controller: the ReplicaSet appears, no pods.
            kcm = env.own_kcm(d, log_name="no-rs.log",
                              extra=["--controllers=*,-replicaset", "--leader-elect=false"])
            rses = wait_for(lambda: ctx.k.json("get", "replicasets", "-l", "app=web")["items"],
                            timeout=30, what="the Deployment's ReplicaSet")
            assert rses[0]["spec"]["replicas"] == 2, rses[0]["spec"]
            assert 'name="replicaset"' not in kcm.text()
            assert ctx.k.json("get", "pods", "-l", "app=web")["items"] == []
            assert kcm.stop() == 0
            kcm = None
        finally:
            if kcm:
                kcm.stop()
    wait_complete(ctx, "web")


# kube-controller-manager's arguments in kubeadm's static pod manifest
# (v1.24 to v1.31); CONF, CA: where kubeadm keeps its kubeconfig and CA.
KUBEADM_ARGS = [
    "--allocate-node-cidrs=true", "--authentication-kubeconfig=CONF",
    "--authorization-kubeconfig=CONF", "--bind-address=127.0.0.1", "--client-ca-file=CA",
    "--cluster-cidr=10.244.0.0/16", "--cluster-name=kubernetes",
    "--cluster-signing-cert-file=/etc/kubernetes/pki/ca.crt",
    "--cluster-signing-key-file=/etc/kubernetes/pki/ca.key",
    "--controllers=*,bootstrapsigner,tokencleaner", "--kubeconfig=CONF", "--leader-elect=true",
    "--requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
    "--root-ca-file=/etc/kubernetes/pki/ca.crt",
    "--service-account-private-key-file=/etc/kubernetes/pki/sa.key",
    "--service-cluster-ip-range=10.96.0.0/12", "--use-service-account-credentials=true"]


@scenario("kubeadm's kube-controller-manager arguments start kcm, what it ignores said once, "
          "each controller writing as its service account",
          needs_sim="it reads the server's audit and request logs")
def kubeadm_arguments(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    from scenarios_deployment import deployment, wait_complete
    from scenarios_replicaset import rs_manifest, wait_replicas
    with suite_kcm_stopped(ctx, "kcm-after-kubeadm.log") as d:
        ca = os.path.join(d, "ca.crt")
        with open(ca, "wb") as f:
            f.write(base64.b64decode(_sim_cluster(env)[1]))
        paths = {"CONF": env.kcm_kubeconfig, "CA": ca}
        args = [a.split("=")[0] + "=" + paths[a.split("=")[1]]
                if a.split("=")[1] in paths else a for a in KUBEADM_ARGS]
        kcm = Kcm(env.kcm_binary, None, d, log_name="kubeadm.log", extra=args)
        try:
            wait_for(lambda: "caches synced" in kcm.text() or not kcm.alive(), timeout=30,
                     what="kcm started with kubeadm's arguments")
            assert kcm.alive(), kcm.text()[-2000:]
            ctx.apply(rs_manifest("web", 2))
            wait_replicas(ctx, "web", 2)
            ctx.apply(deployment("site", 2))
            wait_complete(ctx, "site")
        finally:
            assert kcm.stop() == 0
    dc = "system:serviceaccount:kube-system:deployment-controller"
    dc_writes = {(e["verb"], e["objectRef"]["resource"], e["objectRef"].get("subresource", ""),
                  e["responseStatus"]["code"])
                 for e in env.audit(ctx.ns) if e["user"]["username"] == dc}
    assert {("create", "replicasets", "", 201), ("update", "deployments", "status", 200)} <= \
        dc_writes, dc_writes
    # --use-service-account-credentials: every write of the ReplicaSet
    # controller is made as its service account, with upstream's bootstrap
    # role alone (its status write an update, which the role grants).
    sa = "system:serviceaccount:kube-system:replicaset-controller"
    writes = {(e["verb"], e["objectRef"]["resource"], e["objectRef"].get("subresource", ""),
               e["user"]["username"], e["responseStatus"]["code"])
              for e in env.audit(ctx.ns) if e["verb"] not in ("get", "list", "watch")}
    assert ("create", "pods", "", sa, 201) in writes, writes
    assert ("update", "replicasets", "status", sa, 200) in writes, writes
    assert all(w[3] == sa for w in writes if w[1] == "pods" or w[1:3] == ("replicasets", "status"))
    assert {e["user"]["username"] for e in env.audit(ctx.ns) if e["verb"] not in (
        "get", "list", "watch") and e["userAgent"].startswith("kcm/")} == {sa, dc}, writes
    assert not [w for w in writes if w[4] == 403], writes
    # Each controller's requests name it, as upstream's clients do.
    agents = {(r["verb"], r["resource"]): r["userAgent"]
              for r in ctx.api.get("/_sim/requests").json()["items"] if r["namespace"] == ctx.ns}
    for write in (("create", "pods"), ("create", "events")):
        assert re.match(r"kcm/v[0-9.]+ \(linux/\w+\) kcm/replicaset-controller$",
                        agents.get(write, "")), (write, agents)
    lines = kcm.text().splitlines()
    ignored = [ln for ln in lines if "ignoring kube-controller-manager flags" in ln]
    assert len(ignored) == 1, ignored
    for flag in ("--allocate-node-cidrs", "--cluster-cidr", "--cluster-name",
                 "--cluster-signing-cert-file", "--cluster-signing-key-file",
                 "--requestheader-client-ca-file", "--root-ca-file",
                 "--service-account-private-key-file", "--service-cluster-ip-range"):
        assert flag in ignored[0], (flag, ignored[0])
    others = [ln for ln in lines if "others named in --controllers" in ln]
    assert len(others) == 1 and 'controllers="bootstrapsigner,tokencleaner"' in others[0], others
    assert 'starting controller name="deployment"' in kcm.text()
    assert 'starting controller name="replicaset"' in kcm.text()


@scenario("SIGTERM posts the events still queued before exiting",
          needs_sim="it delays the server's answers to Event writes")
def events_flushed(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    from scenarios_replicaset import rs_manifest
    # Every event POST in this namespace takes 400 ms, so they queue up.
    ctx.api.faults(rules=[{"verb": "create", "resource": "events", "namespace": ctx.ns,
                           "latencyMs": 400}])
    try:
        ctx.apply(rs_manifest("web", 6))
        wait_for(lambda: len(ctx.k.json("get", "pods", "-l", "app=web")["items"]) == 6,
                 timeout=30, what="6 pods")
        posted = len(ctx.k.json("get", "events")["items"])
        assert posted < 6, "the events were not held back (%d posted)" % posted
        code = env.restart_kcm("kcm-after-flush.log")
        assert code == 0, code
    finally:
        ctx.api.faults(clear=True)
    created = ctx.k.json("get", "events", "--field-selector", "reason=SuccessfulCreate")["items"]
    assert len(created) == 6, [e["message"] for e in created]
    env.wait_kcm_started()


@scenario("SIGTERM with a sync stuck past --shutdown-grace-period: kcm gives it up, releases "
          "the lease and exits 0 in time", needs_sim="it stalls the server's answers")
def grace_period_over(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    from scenarios_replicaset import rs_manifest
    with suite_kcm_stopped(ctx, "kcm-after-grace.log") as d:
        kcm = None
        # Every pod create in this namespace takes 30 s: the sync waits on them.
        ctx.api.faults(rules=[{"verb": "create", "resource": "pods", "namespace": ctx.ns,
                               "latencyMs": 30000}])
        try:
            kcm = env.own_kcm(d, log_name="grace.log",
                              extra=["--shutdown-grace-period=1s", "--metrics-bind-address=127.0.0.1:0"])
            m = wait_for(lambda: re.search(r'serving metrics address="127.0.0.1:(\d+)"',
                                           kcm.text()), timeout=30, what="kcm's metrics port")
            metrics = "http://127.0.0.1:%s/metrics" % m.group(1)
            ctx.apply(rs_manifest("stuck", 2))

            def syncing():
                with urllib.request.urlopen(metrics, timeout=5) as r:
                    text = r.read().decode()
                hit = re.search(r'^workqueue_longest_running_processor_seconds'
                                r'\{name="replicaset"\} (\S+)$', text, re.M)
                return hit and float(hit.group(1)) > 0
            wait_for(syncing, timeout=30, what="a ReplicaSet sync in progress")
            start = time.monotonic()
            code = kcm.stop()
            took = time.monotonic() - start
            kcm = None
            print("    exited %d after %.2f s with a sync stuck" % (code, took))
            assert code == 0, code
            assert took < 10, took
            log = open(os.path.join(d, "grace.log")).read()
            assert "did not finish within the shutdown grace period" in log, log[-2000:]
            assert "released lease" in log, log[-2000:]
        finally:
            ctx.api.faults(clear=True)
            if kcm:
                kcm.stop()


BASE_OBJECTS = {("ServiceAccount", "kcm"), ("ClusterRole", "kcm"), ("ClusterRoleBinding", "kcm"),
                ("Role", "kcm-leader-election"), ("RoleBinding", "kcm-leader-election"),
                ("ClusterRoleBinding", "kcm:system:auth-delegator"),
                ("ClusterRole", "kcm-metrics-reader"), ("Service", "kcm"),
                ("Role", "kcm-controller-tokens"), ("RoleBinding", "kcm-controller-tokens")}
# What each variant adds to manifests/base.
VARIANT_OBJECTS = {
    "static-pod": {("RoleBinding", "kcm-leader-election:kube-controller-manager")},
    "daemonset": {("DaemonSet", "kcm")},
    "deployment": {("Deployment", "kcm"), ("PodDisruptionBudget", "kcm")},
    "sharded": {("Deployment", "kcm"), ("PodDisruptionBudget", "kcm"), ("Role", "kcm-shards"),
                ("RoleBinding", "kcm-shards"), ("Namespace", "kcm-shards")},
}
# kubeadm's probe timings for kube-controller-manager.
KUBEADM_PROBE = {"initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 15}


def _check_base(objs):
    """The RBAC and Service every variant shares."""
    for (kind, _), o in objs.items():
        if kind not in ("ClusterRole", "ClusterRoleBinding"):
            assert o["metadata"]["namespace"] == "kube-system", o["metadata"]
    # Exactly the verbs kcm sends, per resource.
    granted = {}
    for rule in objs[("ClusterRole", "kcm")]["rules"]:
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                granted.setdefault((group, res), set()).update(rule["verbs"])
    assert granted == {
        ("apps", "deployments"): {"get", "list", "watch", "patch"},
        ("apps", "deployments/status"): {"patch"},
        ("apps", "deployments/finalizers"): {"update"},
        ("apps", "replicasets/finalizers"): {"update"},
        ("apps", "replicasets"): {"get", "list", "watch", "create", "patch", "delete"},
        ("apps", "replicasets/status"): {"patch"},
        ("", "pods"): {"list", "watch", "create", "patch", "delete"},
        ("", "events"): {"create", "patch"},
    }, granted
    lease_rules = objs[("Role", "kcm-leader-election")]["rules"]
    assert all(r["apiGroups"] == ["coordination.k8s.io"] and r["resources"] == ["leases"]
               for r in lease_rules), lease_rules
    assert {v for r in lease_rules for v in r["verbs"]} == {"create", "get", "update"}
    assert all(len(r.get("resourceNames") or ()) == 1 for r in lease_rules
               if "update" in r["verbs"]), lease_rules
    # --use-service-account-credentials: tokens of the two controllers' accounts only.
    assert objs[("Role", "kcm-controller-tokens")]["rules"] == [
        {"apiGroups": [""], "resources": ["serviceaccounts/token"],
         "resourceNames": ["deployment-controller", "replicaset-controller"],
         "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create"]}]
    for key in (("ClusterRoleBinding", "kcm"), ("RoleBinding", "kcm-leader-election"),
                ("ClusterRoleBinding", "kcm:system:auth-delegator"),
                ("RoleBinding", "kcm-controller-tokens")):
        b = objs[key]
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": "kcm",
                                  "namespace": "kube-system"}], b
    # The secure port's reviews, as kube-controller-manager delegates them.
    assert objs[("ClusterRoleBinding", "kcm:system:auth-delegator")]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
        "name": "system:auth-delegator"}
    assert objs[("ClusterRole", "kcm-metrics-reader")]["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    svc = objs[("Service", "kcm")]["spec"]
    assert svc["selector"] == {"app.kubernetes.io/name": "kcm"}, svc
    assert svc["ports"] == [{"name": "https-metrics", "port": 10257, "targetPort": "probe-port",
                             "protocol": "TCP"}], svc["ports"]


def _lease_name(objs):
    """The Lease the Role allows updating."""
    (name,) = [n for r in objs[("Role", "kcm-leader-election")]["rules"]
               if "update" in r["verbs"] for n in r["resourceNames"]]
    return name


def _check_pod(pod, port, host=None):
    """A kcm pod spec: hardened, its probes on the secure port with kubeadm's
    timings for kube-controller-manager, resources as measured; returns the
    container."""
    (c,) = pod["containers"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert (sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"],
            sc["capabilities"]) == (True, False, {"drop": ["ALL"]}), sc
    assert c["resources"] == {"requests": {"cpu": "20m", "memory": "32Mi"},
                              "limits": {"memory": "256Mi"}}, c["resources"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"probe-port": port}, ports
    for name, threshold in (("livenessProbe", 8), ("startupProbe", 24)):
        probe = c[name]
        assert probe["httpGet"].get("host") == host, (name, probe)
        assert probe["httpGet"]["port"] in (port, "probe-port"), (name, probe)
        assert probe["httpGet"]["scheme"] == "HTTPS", (name, probe)
        assert probe["httpGet"]["path"] == "/healthz", probe
        assert {k: probe.get(k) for k in (*KUBEADM_PROBE, "failureThreshold")} == dict(
            KUBEADM_PROBE, failureThreshold=threshold), probe
    assert not [a for a in c["args"] if a.startswith(("--health-probe-bind-address",
                                                       "--metrics-bind-address"))], c["args"]
    assert pod["terminationGracePeriodSeconds"] > 30
    return c


def _check_pod_network(pod):
    """The Deployment's and the DaemonSet's pods: the ServiceAccount kcm, not
    root, port 10257 in their own network namespace, ready on /readyz."""
    c = _check_pod(pod, 10257)
    assert pod["serviceAccountName"] == "kcm" and not pod.get("hostNetwork"), pod
    assert pod["securityContext"]["runAsNonRoot"] is True, pod["securityContext"]
    assert pod["priorityClassName"] == "system-cluster-critical", pod
    ready = c["readinessProbe"]["httpGet"]
    assert (ready["path"], ready["port"], ready["scheme"]) == ("/readyz", "probe-port", "HTTPS")
    assert not [a for a in c["args"] if a.startswith(("--secure-port", "--kubeconfig"))]
    return c


def _check_static_pod(pod):
    """The static pod: kubeadm's kubeconfig for kube-controller-manager, read
    only; the node's network, its own port 10267 on loopback."""
    conf = "/etc/kubernetes/controller-manager.conf"
    c = _check_pod(pod, 10267, host="127.0.0.1")
    assert pod["hostNetwork"] is True and pod["priorityClassName"] == "system-node-critical"
    assert "serviceAccountName" not in pod, pod
    for flag in ("--kubeconfig", "--authentication-kubeconfig", "--authorization-kubeconfig"):
        assert "%s=%s" % (flag, conf) in c["args"], (flag, c["args"])
    assert {"--secure-port=10267", "--bind-address=127.0.0.1",
            "--use-service-account-credentials=true"} <= set(c["args"]), c["args"]
    assert not [a for a in c["args"] if "10257" in a], c["args"]
    (mount,) = c["volumeMounts"]
    (vol,) = pod["volumes"]
    assert mount == {"name": vol["name"], "mountPath": conf, "readOnly": True}, mount
    assert vol["hostPath"] == {"path": conf, "type": "File"}, vol
    return c


def _workloads(builds):
    """{variant: (pod spec, its kcm container)} of the variants that run kcm."""
    return {"static-pod/node": builds["static-pod/node"][("Pod", "kcm")]["spec"],
            "daemonset": builds["daemonset"][("DaemonSet", "kcm")]["spec"]["template"]["spec"],
            "deployment": builds["deployment"][("Deployment", "kcm")]["spec"]["template"]["spec"],
            "sharded": builds["sharded"][("Deployment", "kcm")]["spec"]["template"]["spec"]}


def _leader_elect_name(pod):
    (c,) = pod["containers"]
    (name,) = [a.split("=", 1)[1] for a in c["args"]
               if a.startswith("--leader-elect-resource-name=")]
    return name


def _server_dry_run(ctx, variant):
    """`kubectl apply --dry-run=server` of what a variant builds: all of it on
    a real API server; on the local one, the kinds it serves, returning the
    others."""
    k = ctx.env.kubectl()
    served = {tuple(line.split()[-3::2]) for line in
              k("api-resources", "--no-headers", namespaced=False).splitlines()}
    # kustomize writes each object's top-level fields unindented.
    docs = [(re.search(r"^apiVersion: (\S+)$", d, re.M).group(1),
             re.search(r"^kind: (\S+)$", d, re.M).group(1), d)
            for d in manifest_yaml(variant).split("\n---\n")]
    sent = [d for av, kind, d in docs if (av, kind) in served]
    skipped = sorted({kind for av, kind, _ in docs if (av, kind) not in served})
    assert not skipped or ctx.env.sim, (variant, skipped)
    # A namespace a variant adds is made for real (the dry run of what goes
    # in it needs it), and deleted after unless it was there.
    made = []
    for _, kind, d in docs:
        name = re.search(r"^  name: (\S+)$", d, re.M).group(1)
        if kind == "Namespace" and k.run("get", "namespace", name, check=False,
                                         namespaced=False).returncode:
            k("create", "namespace", name, namespaced=False)
            made.append(name)
    try:
        out = k("apply", "--dry-run=server", "-f", "-", namespaced=False,
                stdin="\n---\n".join(sent))
    finally:
        for name in made:
            k.run("delete", "namespace", name, "--wait=false", check=False, namespaced=False)
    assert out.count("(server dry run)") == len(sent), (variant, out)
    return skipped


def _image(pod):
    return next(c["image"] for c in pod["containers"] if c["name"] == "kcm")


@scenario("the manifests install kcm with least privilege, probes and a hardened pod")
def manifests(ctx):
    builds = {v: manifest_objects(v) for v in MANIFEST_VARIANTS}
    base = builds["base"]
    assert set(base) == BASE_OBJECTS, set(base)
    _check_base(base)
    # Each variant is the base, unchanged, and its own objects.
    for variant, extra in VARIANT_OBJECTS.items():
        objs = builds[variant]
        assert set(objs) == BASE_OBJECTS | extra, (variant, set(objs))
        assert all(objs[key] == base[key] for key in BASE_OBJECTS), variant
    assert set(builds["static-pod/node"]) == {("Pod", "kcm")}
    # kubeadm's kubeconfig user holds kcm's roles (kcm does not yet act as
    # the controllers' ServiceAccounts).
    static = builds["static-pod"]
    user = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
             "name": "system:kube-controller-manager"}]
    for key, ref in ((("RoleBinding", "kcm-leader-election:kube-controller-manager"),
                      "Role/kcm-leader-election"),):
        b = static[key]
        assert b["subjects"] == user, b
        assert "%s/%s" % (b["roleRef"]["kind"], b["roleRef"]["name"]) == ref, b
    assert static[("RoleBinding", "kcm-leader-election:kube-controller-manager")][
        "metadata"]["namespace"] == "kube-system"
    pods = _workloads(builds)
    args = {"static-pod/node": _check_static_pod(pods["static-pod/node"])["args"],
            "daemonset": _check_pod_network(pods["daemonset"])["args"],
            "deployment": _check_pod_network(pods["deployment"])["args"],
            "sharded": _check_pod_network(pods["sharded"])["args"]}
    # The DaemonSet: every control-plane node, through kubeadm's taint.
    ds = pods["daemonset"]
    assert ds["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}, ds
    assert {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
            "effect": "NoSchedule"} in ds["tolerations"], ds["tolerations"]
    assert "affinity" not in ds
    # The Deployment: two replicas never on one node, one at a time out.
    d = builds["deployment"][("Deployment", "kcm")]["spec"]
    assert d["replicas"] == 2, d
    anti = pods["deployment"]["affinity"]["podAntiAffinity"]
    assert anti == {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname",
         "labelSelector": {"matchLabels": d["selector"]["matchLabels"]}}]}, anti
    assert d["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}, d["strategy"]
    pdb = builds["deployment"][("PodDisruptionBudget", "kcm")]
    assert pdb["metadata"]["namespace"] == "kube-system"
    assert pdb["spec"] == {"minAvailable": 1, "selector": d["selector"]}, pdb["spec"]
    assert base[("Service", "kcm")]["spec"]["selector"] == d["selector"]["matchLabels"]
    # Sharded: the same Deployment, three replicas acting at once, one out
    # at a time; it lists and renews the shards' and members' Leases.
    sharded = builds["sharded"]
    assert sharded[("Deployment", "kcm")]["spec"]["replicas"] == 3
    assert args["sharded"] == ["--shards=32", "--leader-elect-resource-namespace=kcm-shards"] + \
        args["deployment"][2:], args["sharded"]
    assert args["deployment"][:2] == ["--leader-elect=true",
                                      "--leader-elect-resource-namespace=kube-system"]
    assert sharded[("PodDisruptionBudget", "kcm")]["spec"] == {
        "maxUnavailable": 1, "selector": d["selector"]}
    # Every Lease of a namespace of their own, and none elsewhere.
    assert sharded[("Role", "kcm-shards")]["metadata"]["namespace"] == "kcm-shards"
    assert sharded[("Role", "kcm-shards")]["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "verbs": ["get", "list", "create", "update"]}]
    assert sharded[("RoleBinding", "kcm-shards")]["subjects"] == base[
        ("RoleBinding", "kcm-leader-election")]["subjects"]
    # One Lease name, the Role's, in every kcm container; set in one place.
    assert {v: _leader_elect_name(p) for v, p in pods.items()} == dict.fromkeys(pods, "kcm")
    assert _lease_name(base) == "kcm"
    copy = os.path.join(ctx.env.workdir, "manifests")
    shutil.copytree(os.path.join(ROOT, "manifests"), copy)
    param = os.path.join(copy, "base", "parameters", "lease.yaml")
    with open(param) as f:
        text = f.read()
    assert text.count("leaseName: kcm\n") == 1, text
    with open(param, "w") as f:
        f.write(text.replace("leaseName: kcm\n", "leaseName: kcm-other\n"))
    renamed = {v: manifest_objects(v, copy) for v in MANIFEST_VARIANTS}
    assert all(_lease_name(renamed[v]) == "kcm-other" for v in VARIANT_OBJECTS)
    assert {v: _leader_elect_name(p) for v, p in _workloads(renamed).items()} == dict.fromkeys(
        pods, "kcm-other")
    # One image, named in one place: base/image's entry.
    image = "ghcr.io/kcm-project/kcm:0.1.0"
    assert {v: _image(p) for v, p in pods.items()} == dict.fromkeys(pods, image)
    entry = os.path.join(copy, "base", "image", "kustomization.yaml")
    with open(entry) as f:
        text = f.read()
    with open(entry, "w") as f:
        f.write(text.replace("newName: ghcr.io/kcm-project/kcm\n", "newName: registry.test/kcm\n")
                .replace("newTag: 0.1.0\n", "newTag: v9\n"))
    assert {v: _image(p) for v, p in _workloads(
        {v: manifest_objects(v, copy) for v in pods}).items()} == dict.fromkeys(
            pods, "registry.test/kcm:v9")
    # kcm accepts each variant's arguments: it gets past its flags to the
    # missing kubeconfig.
    if ctx.env.is_kcm:
        missing = os.path.join(ctx.env.workdir, "none")
        for variant, argv in args.items():
            argv = [a for a in argv if not a.startswith("--kubeconfig=")]
            p = subprocess.run([ctx.env.kcm_binary, *argv, "--kubeconfig", missing],
                               capture_output=True, text=True, timeout=30)
            assert p.returncode == 1 and missing in p.stderr, (variant, p.returncode, p.stderr)
    # The API server accepts every object (dry run).
    skipped = {v: _server_dry_run(ctx, v) for v in MANIFEST_VARIANTS}
    print("server dry run: every variant accepted%s" % "".join(
        "; %s: not served, not sent: %s" % (v, ", ".join(k)) for v, k in skipped.items() if k))


@scenario("kcm works with only the permissions of its ClusterRole (with "
          "--use-service-account-credentials: of upstream's bootstrap roles)",
          needs_sim="it gives kcm a token of the server's own with only the manifests' roles")
def least_privilege(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    from scenarios_deployment import deployment, wait_complete
    # The harness runs kcm as its ServiceAccount, with manifests/base's RBAC
    # objects; or as kube-controller-manager's user, with manifests/static-pod's.
    assert env.kcm_kubeconfig != env.kubeconfig, "kcm runs with the harness's credentials"
    last = env.api.get("/_sim/requests?since=999999999").json()["last"]
    ctx.apply(deployment("web", 2))
    wait_complete(ctx, "web")
    ctx.k("scale", "deployment/web", "--replicas=3")
    ctx.k("set", "image", "deployment/web", "c=nginx:1.9.1")
    wait_complete(ctx, "web", rev=2)
    ctx.k("rollout", "undo", "deployment/web")
    wait_complete(ctx, "web", rev=3)
    events = ctx.k.json("get", "events", "--field-selector", "reason=ScalingReplicaSet")
    assert events["items"], "no ScalingReplicaSet events"
    mine = [r for r in env.api.get("/_sim/requests?since=%d" % last).json()["items"]
            if r["user"] in env.kcm_users]
    silent = env.kcm_users - {r["user"] for r in mine}
    assert not silent, "no request from %s" % sorted(silent)
    denied = ["%s %s" % (r["method"], r["path"]) for r in mine if r["code"] == 403]
    assert not denied, denied



# Text a server might send back: a line break and a forged klog line, quotes
# and a forged JSON field, a carriage return, a terminal escape, a line
# separator and a right-to-left override.
FORGED = 'I1125 08:00:00.000000       1 forged.go:1] "forged" evil="1"'
HOSTILE = 'denied\n' + FORGED + '\r\x1b[31m x","evil":"1\u2028\u202e'
KLOG_HEADER = re.compile(r'[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^ ]+:\d+\] ')
KLOG_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
KLOG_PAIR = re.compile(r' ([A-Za-z0-9_.-]+)=("(?:[^"\\]|\\.)*"|[^ "]*)')
JSON_BASE = {"ts", "caller", "msg", "v"}


def _go_quote(s):
    """s as Go's strconv.Quote writes it (for code points below U+10000)."""
    named = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
             "\v": "\\v", '"': '\\"', "\\": "\\\\"}
    return '"%s"' % "".join(named.get(c) or ("\\x%02x" % ord(c) if ord(c) < 0x20 or c == "\x7f"
                                             else c if c.isprintable() else "\\u%04x" % ord(c))
                            for c in s)


def _klog_keys(line):
    """The keys of one klog text line: the header, a message (quoted strings
    in it skipped) to the first ' key=', then only key=value pairs."""
    m = KLOG_HEADER.match(line)
    assert m, "not a klog line: %r" % line
    i = m.end()
    while i < len(line) and not KLOG_PAIR.match(line, i):
        q = KLOG_QUOTED.match(line, i) if line[i] == '"' else None
        assert line[i] != '"' or q, "an unterminated string: %r" % line
        i = q.end() if q else i + 1
    keys = []
    while i < len(line):
        p = KLOG_PAIR.match(line, i)
        assert p, "text after the pairs: %r" % line[i:]
        keys.append(p.group(1))
        i = p.end()
    return keys


def _log_hostile_text(ctx, d, mode, git_version, error_event):
    """kcm's log (mode: text or json) while the API server's answers carry HOSTILE."""
    from scenarios_replicaset import rs_manifest
    # /version first fails with the message, then answers the version;
    # every pod create here is refused with it.
    ctx.api.faults(clear=True, rules=[
        {"path": "/version", "code": 503, "message": HOSTILE, "count": 1},
        {"path": "/version", "code": 200, "contentType": "application/json",
         "body": json.dumps({"major": "1", "minor": "31", "gitVersion": git_version})},
        {"verb": "create", "resource": "pods", "namespace": ctx.ns, "code": 422,
         "reason": "Invalid", "message": HOSTILE}])
    extra = ["-v", "4", "--leader-elect=false"] + (
        ["--logging-format=json"] if mode == "json" else [])
    kcm = ctx.env.own_kcm(d, log_name="hostile-%s.log" % mode,
                          extra=extra)
    try:
        wait_for(lambda: "caches synced" in kcm.text() or not kcm.alive(), timeout=30,
                 what="kcm (%s) to sync its caches" % mode)
        assert kcm.alive(), kcm.text()[-2000:]
        ctx.apply(rs_manifest("web", 2))

        def told():  # the watch may open after the event: send it again
            if "watch error" not in kcm.text():
                ctx.api.faults(watchInject={"resource": "pods", "line": error_event})
            return all(s in kcm.text() for s in ("watch error", "sync failed",
                                                 "Error creating", "connected to"))
        wait_for(told, timeout=30, interval=0.5,
                 what="kcm (%s) to log the server's messages" % mode)
    finally:
        code = kcm.stop()
    assert code == 0, "kcm (%s) exited %s" % (mode, code)
    return kcm.text()


@scenario("text from the API server cannot forge kcm's log lines or keys, in text and JSON",
          needs_sim="it injects hostile text into the server's watch events")
def hostile_text_in_logs(ctx):
    if ctx.env.kcm is None or not ctx.env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    git_version = "v1.31.0\n" + FORGED + '","evil":"1'
    error_event = json.dumps({"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": HOSTILE, "reason": "InternalError", "code": 500}})
    logs = {}
    with suite_kcm_stopped(ctx, "kcm-after-hostile.log") as d:
        try:
            for mode in ("text", "json"):
                logs[mode] = _log_hostile_text(ctx, d, mode, git_version, error_event)
        finally:
            ctx.api.faults(clear=True)

    # Text: every line is one klog line with the program's keys.
    lines = logs["text"].splitlines()
    for line in lines:
        assert "evil" not in _klog_keys(line) and not line.startswith(FORGED[:20]), line
    quoted = _go_quote(HOSTILE)
    connected = next(ln for ln in lines if "] connected to the API server " in ln)
    assert _klog_keys(connected) == ["server", "version"], connected
    assert connected.endswith(" version=" + _go_quote(git_version)), connected
    watch = next(ln for ln in lines if "] watch error " in ln)
    assert _klog_keys(watch) == ["kind", "code", "message"], watch
    assert watch.endswith(" message=" + quoted), watch
    for what in ("] cannot reach the API server ", "] sync failed", "] event "):
        line = next(ln for ln in lines if what in ln)
        assert quoted[1:-1] in line, line

    # JSON: every line is one object; data is in values, never in keys.
    objs = [json.loads(line) for line in logs["json"].splitlines()]
    for o in objs:
        assert isinstance(o, dict) and isinstance(o["msg"], str) and "evil" not in o, o
    connected = next(o for o in objs if o["msg"] == "connected to the API server")
    assert set(connected) == JSON_BASE | {"server", "version"}, connected
    assert connected["version"] == git_version, connected
    watch = next(o for o in objs if o["msg"] == "watch error")
    assert set(watch) == JSON_BASE - {"v"} | {"kind", "code", "message"}, watch
    assert (watch["code"], watch["message"]) == (500, HOSTILE), watch
    for what in ("cannot reach the API server", "sync failed; retrying", "event"):
        o = next(o for o in objs if o["msg"] == what)
        assert any(HOSTILE in v for v in o.values() if isinstance(v, str)), o
    print("    %d text lines and %d JSON lines checked" % (len(lines), len(objs)))
