#!/usr/bin/env python3
"""Local Kubernetes API server for tests and the demo (Python 3 standard library).

Serves HTTPS on loopback with a certificate chain made at start with the
openssl CLI, authenticates bearer tokens (and client certificates signed by
its CA), and writes a kubeconfig for kubectl and kcm. With --kubelet it also
runs a fake scheduler and kubelet so pods become Running and Ready.

    python3 tests/sim/apiserver.py --dir /tmp/sim --kubelet

prints `READY https://127.0.0.1:PORT` once it serves, and writes
DIR/kubeconfig, DIR/kubeconfig-cert (client-certificate user), DIR/port,
DIR/token and DIR/ca.crt. SIGUSR1 drops every watch connection, SIGUSR2
compacts history; POST /_sim/faults does these and more (see docs/sim.md).
"""

import argparse
import base64
import os
import secrets
import signal
import ssl
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import rbac  # noqa: E402
import resources  # noqa: E402
import satokens  # noqa: E402
from api import ApiError  # noqa: E402
from collector import Collector  # noqa: E402
from kubelet import Kubelet  # noqa: E402
from server import SimServer  # noqa: E402

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


def openssl(*args, cwd):
    try:
        subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)
    except FileNotFoundError:
        sys.exit("apiserver: the openssl command is required to make certificates")
    except subprocess.CalledProcessError as e:
        sys.exit("apiserver: openssl %s failed: %s" % (args[0], e.stderr.decode().strip()))


def make_certs(d):
    """A CA, a serving certificate for loopback and an admin client certificate."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "3650",
            "-subj", "/CN=kcm-sim-ca", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    for name, subj, ext in (
            ("server", "/CN=kcm-sim",
             "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth\n"),
            ("client", "/O=system:masters/CN=kcm-admin", "extendedKeyUsage=clientAuth\n")):
        openssl("req", *ec, "-keyout", name + ".key", "-out", name + ".csr", "-subj", subj, cwd=d)
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".crt", "-days", "3650", "-extfile",
                name + ".ext", cwd=d)


def b64file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def write_kubeconfig(path, server, ca, user):
    user_lines = "\n".join("    %s: %s" % kv for kv in user.items())
    text = """apiVersion: v1
kind: Config
clusters:
- name: kcm-sim
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: kcm-sim
  context:
    cluster: kcm-sim
    user: kcm-sim-user
    namespace: default
current-context: kcm-sim
users:
- name: kcm-sim-user
  user:
%s
""" % (server, b64file(ca), user_lines)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def parse_args(argv):
    p = argparse.ArgumentParser(description="Local Kubernetes API server for kcm's tests.")
    p.add_argument("--dir", required=True, help="directory for certificates and kubeconfigs")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free port)")
    p.add_argument("--token", default="", help="admin bearer token (default: random)")
    p.add_argument("--extra-token", action="append", default=[], metavar="TOKEN:USER[:GROUPS]",
                   help="another accepted token; GROUPS is comma-separated; a USER of the form "
                   "system:serviceaccount:NAMESPACE:NAME is taken whole, as --sa-token does, "
                   "and so is one of the form system:NAME (system:kube-controller-manager)")
    p.add_argument("--sa-token", action="append", default=[], metavar="TOKEN:NAMESPACE:NAME",
                   help="a token of the service account NAMESPACE/NAME")
    p.add_argument("--basic-auth", default="", metavar="USER:PASSWORD",
                   help="also accept HTTP basic authentication for this user")
    p.add_argument("--kubelet", action="store_true", help="run the fake scheduler and kubelet")
    p.add_argument("--nodes", type=int, default=3, help="fake nodes (with --kubelet)")
    p.add_argument("--ready-delay", type=float, default=1.0,
                   help="seconds from binding to Running and Ready")
    p.add_argument("--terminate-delay", type=float, default=0.5,
                   help="longest time the kubelet takes to finish a graceful deletion")
    p.add_argument("--not-ready-marker", default="bad",
                   help="pods with an image containing this stay not ready")
    p.add_argument("--fail-marker", default="crash",
                   help="pods with an image containing this fail after starting")
    p.add_argument("--bookmark-interval", type=float, default=60.0,
                   help="seconds between watch bookmarks")
    p.add_argument("--max-events", type=int, default=100000,
                   help="watch history kept per resource before the oldest is compacted")
    p.add_argument("--state", default="", metavar="FILE",
                   help="keep every object in FILE, loaded at start, so the server can be "
                   "killed and started again (with the same --dir, --port and --token)")
    p.add_argument("--min-token-seconds", type=int, default=satokens.MIN_SECONDS, metavar="N",
                   help="shortest expirationSeconds a TokenRequest may ask for (600 as "
                   "kube-apiserver; lower it to test token expiry)")
    p.add_argument("--audit-log", default="", metavar="FILE",
                   help="append an audit.k8s.io/v1 Event (level Metadata) per request to FILE")
    args = p.parse_args(argv)
    if args.min_token_seconds < 1:
        p.error("--min-token-seconds must be at least 1")
    if args.nodes < 1:
        p.error("--nodes must be at least 1")
    for v in ("ready_delay", "terminate_delay", "bookmark_interval"):
        if getattr(args, v) < 0:
            p.error("--%s must not be negative" % v.replace("_", "-"))
    return args


def parse_extra_token(spec):
    """TOKEN:USER[:GROUPS] -> (token, (user, groups)). User names of service
    accounts contain colons: system:serviceaccount:NAMESPACE:NAME[:GROUPS]
    names that service account (with its groups)."""
    parts = spec.split(":")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        sys.exit("apiserver: --extra-token wants TOKEN:USER[:GROUPS], got %r" % spec)
    if ":".join(parts[1:3]) + ":" == rbac.SA_PREFIX:
        if len(parts) < 5 or not parts[3] or not parts[4] or len(parts) > 6:
            sys.exit("apiserver: --extra-token wants TOKEN:system:serviceaccount:NAMESPACE:NAME"
                     "[:GROUPS], got %r" % spec)
        user, groups = rbac.service_account_identity(parts[3], parts[4])
        extra = parts[5] if len(parts) > 5 else ""
    else:
        if parts[1] == "system":  # system:NAME, one user
            if len(parts) < 3 or not parts[2]:
                sys.exit("apiserver: --extra-token wants TOKEN:system:NAME[:GROUPS], got %r"
                         % spec)
            parts[1:3] = [parts[1] + ":" + parts[2]]
        if len(parts) > 3:
            sys.exit("apiserver: --extra-token wants TOKEN:USER[:GROUPS], got %r" % spec)
        user, groups = parts[1], ["system:authenticated"]
        extra = parts[2] if len(parts) > 2 else ""
    extra = [g for g in extra.split(",") if g and g not in groups]
    return parts[0], (user, extra + groups)


def build(args):
    """Create the certificates, server, kubelet and collector (not yet serving)."""
    d = os.path.abspath(args.dir)
    os.makedirs(d, exist_ok=True)
    if not os.path.exists(os.path.join(d, "ca.crt")):
        make_certs(d)  # else started again: the same certificates
    token = args.token or secrets.token_hex(16)
    tokens = {token: ("kcm-admin", ["system:masters", "system:authenticated"])}
    for spec in args.extra_token:
        extra, ident = parse_extra_token(spec)
        tokens[extra] = ident
    for spec in args.sa_token:
        parts = spec.split(":")
        if len(parts) != 3 or not all(parts):
            sys.exit("apiserver: --sa-token wants TOKEN:NAMESPACE:NAME, got %r" % spec)
        tokens[parts[0]] = rbac.service_account_identity(parts[1], parts[2])
    basic = {}
    if args.basic_auth:
        user, sep, pw = args.basic_auth.partition(":")
        if not sep or not user or not pw:
            sys.exit("apiserver: --basic-auth wants USER:PASSWORD")
        basic[user] = pw
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(d, "server.crt"), os.path.join(d, "server.key"))
    ctx.load_verify_locations(os.path.join(d, "ca.crt"))
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.set_alpn_protocols(["http/1.1"])
    srv = SimServer(("127.0.0.1", args.port), ctx, tokens, basic, args.bookmark_interval,
                    args.max_events)
    srv.api.ctx.manager = "kube-apiserver"
    if args.state:
        srv.api.store.keep(os.path.abspath(args.state))
    for ns in SYSTEM_NAMESPACES:
        try:
            srv.api.create(resources.BY_PLURAL["namespaces"], "",
                           {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": ns}})
        except ApiError:
            pass
    rbac.bootstrap(srv.api)
    # The controllers' ServiceAccounts, which kube-controller-manager makes
    # with --use-service-account-credentials.
    sa = resources.BY_PLURAL["serviceaccounts"]
    for name in rbac.CONTROLLER_ROLES:
        if not srv.api.store.get(sa.plural, (rbac.CONTROLLER_NAMESPACE, name)):
            srv.api.create(sa, rbac.CONTROLLER_NAMESPACE, {
                "kind": "ServiceAccount", "apiVersion": "v1", "metadata": {"name": name}})
    srv.issuer = satokens.TokenIssuer(srv.api, satokens.load_key(d), args.min_token_seconds)
    if args.audit_log:
        try:
            srv.audit = open(os.path.abspath(args.audit_log), "a", encoding="utf-8")
        except OSError as e:
            sys.exit("apiserver: --audit-log %s: %s" % (args.audit_log, e.strerror))
    collector = Collector(srv.api)
    kubelet = None
    if args.kubelet:
        kubelet = Kubelet(srv.api, args.nodes, args.ready_delay, args.terminate_delay,
                          args.not_ready_marker, args.fail_marker)
        srv.kubelet = kubelet
    port = srv.server_address[1]
    url = "https://127.0.0.1:%d" % port
    ca = os.path.join(d, "ca.crt")
    write_kubeconfig(os.path.join(d, "kubeconfig"), url, ca, {"token": token})
    write_kubeconfig(os.path.join(d, "kubeconfig-cert"), url, ca, {
        "client-certificate-data": b64file(os.path.join(d, "client.crt")),
        "client-key-data": b64file(os.path.join(d, "client.key"))})
    for name, value, mode in (("port", str(port), 0o644), ("token", token, 0o600)):
        fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "w") as f:
            f.write(value + "\n")
    return srv, collector, kubelet, url


def main(argv=None):
    args = parse_args(argv if argv is not None else sys.argv[1:])
    srv, collector, kubelet, url = build(args)
    collector.start()
    if kubelet:
        kubelet.start()
    stop = threading.Event()

    def on_term(signum, frame):
        stop.set()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.signal(signal.SIGUSR1, lambda s, f: srv.api.store.drop_watches())
    signal.signal(signal.SIGUSR2, lambda s, f: srv.api.store.compact())
    t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
    t.start()
    print("READY %s" % url, flush=True)
    while not stop.wait(0.5):
        pass
    srv.shutdown()
    collector.stop()
    if kubelet:
        kubelet.stop()
    srv.server_close()
    if srv.audit is not None:
        srv.audit.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
