"""The e2e harness: the cluster (the local API server with its fake kubelet,
or a real one named by KCM_E2E_KUBECONFIG), kcm itself, and kubectl as the
client of record.

Scenarios are functions registered with @scenario. Each gets a Context with
a fresh namespace and a kubectl bound to it; a scenario fails by raising.
"""

import contextlib
import glob
import json
import os
import signal
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "sim"))

from simclient import Client, SimProcess, stop_process, wait_for  # noqa: E402

SCENARIOS = []


def scenario(name, needs_sim=None):
    """Register a scenario. needs_sim: why it runs only against the local
    API server (it injects faults, reads the server's logs, ...); against a
    real cluster it is skipped with that reason."""
    def register(fn):
        SCENARIOS.append((name, fn, needs_sim))
        return fn
    return register


class CommandError(AssertionError):
    pass


class Skip(Exception):
    """Raised by a scenario that does not apply to the controller-manager or
    cluster under test; reported as SKIP with the reason."""


def is_kcm(binary):
    """Whether binary is kcm (its --version says so), not another
    controller-manager under comparison."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.startswith("kcm ")


class Kubectl:
    def __init__(self, kubeconfig, namespace, cache_dir):
        self.base = ["kubectl", "--kubeconfig", kubeconfig, "--cache-dir", cache_dir]
        self.namespace = namespace

    def run(self, *args, check=True, namespaced=True, stdin=None, timeout=120):
        cmd = list(self.base)
        if namespaced and self.namespace:
            cmd += ["-n", self.namespace]
        cmd += list(args)
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise CommandError("`%s` failed (%d): %s" % (" ".join(cmd[5:]), p.returncode,
                                                          p.stderr.strip() or p.stdout.strip()))
        return p

    def __call__(self, *args, **kw):
        return self.run(*args, **kw).stdout

    def json(self, *args, **kw):
        return json.loads(self.run(*args, "-o", "json", **kw).stdout)

    def jsonpath(self, *args, expr, **kw):
        return self.run(*args, "-o", "jsonpath=" + expr, **kw).stdout


def free_ports(n):
    """n ports free on 127.0.0.1 now, all different: each is held until all
    are picked, as a port just let go of may be handed out again at once."""
    held = [socket.socket() for _ in range(n)]
    try:
        for s in held:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def free_port():
    """A port free on 127.0.0.1 now (kcm takes 0 to mean "off" for
    --secure-port, so the harness picks one)."""
    return free_ports(1)[0]


class Kcm:
    """kcm run as a child process, its log kept in a file. kubeconfig None
    leaves kcm to find its settings (env: extra environment variables)."""

    def __init__(self, binary, kubeconfig, workdir, extra=(), log_name="kcm.log", env=None):
        self.log_path = os.path.join(workdir, log_name)
        self.log = open(self.log_path, "w")
        args = [binary, "-v", "2", *extra]
        self.secure_port = None
        if is_kcm(binary):  # probes and metrics on loopback, free ports
            self.secure_port = free_port()
            args[1:1] = ["--health-probe-bind-address=127.0.0.1:0",
                         "--metrics-bind-address=127.0.0.1:0",
                         "--bind-address=127.0.0.1", "--secure-port=%d" % self.secure_port]
        if kubeconfig:
            args[1:1] = ["--kubeconfig", kubeconfig]
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=full_env)

    def text(self):
        with open(self.log_path) as f:
            return f.read()

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM, timeout=45):
        # 45 s: as the manifest's terminationGracePeriodSeconds, above kcm's
        # 30 s --shutdown-grace-period.
        stop_process(self.proc, timeout, sig)
        self.log.close()
        return self.proc.returncode


class KcmGroup:
    """Several kcm instances sharing the work (--shards), stopped, read and
    checked as one: its log is theirs, one after another."""

    SHARDS, LEASES = 32, "kcm-e2e-shards"

    def __init__(self, binary, kubeconfig, workdir, count, extra=(), log_name="kcm.log"):
        base, ext = os.path.splitext(log_name)
        args = (*extra, "--shards=%d" % self.SHARDS, "--leader-elect-resource-name=kcm-e2e",
                "--leader-elect-resource-namespace=" + self.LEASES)
        self.members = [Kcm(binary, kubeconfig, workdir, args, "%s-%d%s" % (base, i, ext))
                        for i in range(count)]
        self.log_path = self.members[0].log_path
        # The scenarios that probe one process's ports, or count its CPU, skip.
        self.secure_port = self.proc = None

    def text(self):
        return "".join(m.text() for m in self.members)

    def alive(self):
        return all(m.alive() for m in self.members)

    def stop(self, sig=signal.SIGTERM, timeout=45):
        codes = [m.stop(sig, timeout) for m in self.members]
        return next((c for c in codes if c != 0), 0)


# The directories under manifests/ that `kubectl kustomize` builds: what
# every variant shares, then the three ways of running kcm (static-pod/node
# is the Pod copied to the nodes, static-pod its RBAC).
MANIFEST_VARIANTS = ("base", "static-pod", "static-pod/node", "daemonset", "deployment",
                     "sharded")


def manifest_yaml(variant="base", manifests=None):
    """What `kubectl kustomize manifests/<variant>` builds, as YAML
    (manifests: another copy of the manifests/ directory)."""
    path = os.path.join(manifests or os.path.join(ROOT, "manifests"), variant)
    p = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True,
                       timeout=60, env=dict(os.environ, KUBECONFIG=os.devnull))
    if p.returncode != 0:
        raise CommandError("kubectl kustomize manifests/%s: %s" % (variant, p.stderr.strip()))
    return p.stdout


def manifest_objects(variant="base", manifests=None):
    """The objects kustomize builds from manifests/<variant>, parsed by
    kubectl without a server, by (kind, name)."""
    return local_objects("-", manifest_yaml(variant, manifests))


# The files of manifests/ where each parameter is set, once.
PARAMETER_FILES = ("base/parameters/lease.yaml", "monitoring/parameters/monitoring.yaml")


def manifests_with(dest, values):
    """A copy of manifests/ at DEST with VALUES written where each is set:
    keys of the parameter ConfigMaps (leaseName, runbookBase,
    prometheusServiceAccount, prometheusNamespace), and newName and newTag
    of base/image's entry. Each must be found exactly once."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "manifests"), dest, symlinks=True)
    changed = dict.fromkeys(values, 0)
    for path in PARAMETER_FILES + ("base/image/kustomization.yaml",):
        path = os.path.join(dest, path)
        with open(path) as f:
            text = f.read()
        for key, value in values.items():
            text, n = re.subn(r"^( +%s: ).*$" % key, lambda m: m.group(1) + value, text,
                              flags=re.M)
            changed[key] += n
        with open(path, "w") as f:
            f.write(text)
    assert changed == dict.fromkeys(values, 1), changed
    return dest


def local_objects(source, stdin=None):
    """The objects of a file or directory, or of YAML on stdin when source
    is "-", parsed by kubectl without a server, by (kind, name)."""
    return {(o["kind"], o["metadata"]["name"]): o for o in local_object_list(source, stdin)}


def local_object_list(source, stdin=None):
    """As local_objects, as a list in the order read, repeats included."""
    p = subprocess.run(["kubectl", "label", "--local", "-f", source, "checked=yes", "-o", "json"],
                       input=stdin, capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, KUBECONFIG=os.devnull))
    if p.returncode != 0:
        raise CommandError("kubectl cannot read %s: %s" % (
            "the objects" if source == "-" else source, p.stderr.strip()))
    objects, text, i = [], p.stdout, 0
    decoder = json.JSONDecoder()
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        obj, i = decoder.raw_decode(text, i)
        objects.extend(obj["items"] if obj.get("kind") == "List" else [obj])
    return objects


RBAC_KINDS = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
              "Role": "roles", "RoleBinding": "rolebindings"}


def rbac_path(obj):
    """The API path of an RBAC object's collection."""
    ns = obj["metadata"].get("namespace")
    return "/apis/rbac.authorization.k8s.io/v1%s/%s" % (
        "/namespaces/" + ns if ns else "", RBAC_KINDS[obj["kind"]])


# The user kubeadm's kubeconfig for kube-controller-manager names.
CONTROLLER_MANAGER_USER = "system:kube-controller-manager"


def uses_service_account_credentials(args):
    """Whether a controller-manager argument list turns on
    --use-service-account-credentials (the last mention wins)."""
    on = False
    for a in args:
        name, eq, value = a.partition("=")
        if name == "--use-service-account-credentials":
            on = not eq or value.lower() in ("true", "1", "t")
    return on


# The ServiceAccounts whose tokens the local API server accepts from the
# start, in USER_NAMESPACE (which needs not exist).
USER_ACCOUNTS = ("metrics-reader", "nobody", "tenant")
USER_NAMESPACE = "kcm-e2e"


# A kcm run with --shadow beside the live one: its program name (so its
# User-Agent and field manager) and, against the local API server, the
# ServiceAccount it reads as, which may only read.
SHADOW_NAME = "kcm-shadow"
SHADOW_RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["apps"], "resources": ["replicasets", "deployments"],
                 "verbs": ["get", "list", "watch"]}]
READ_VERBS = ("get", "list", "watch")
REVIEWS = ("tokenreviews", "subjectaccessreviews")
# The ServiceAccount and ClusterRole of the reader of kcm's /debug/shadow.
DEBUG_NAME = "kcm-e2e-debug"


def plain_port(kcm, what):
    """The port of kcm's plain listener `what` ("metrics", "health probes"),
    from its log."""
    m = wait_for(lambda: re.search(r'serving %s address="127.0.0.1:(\d+)"' % what, kcm.text()),
                 timeout=30, what="kcm's %s port" % what)
    return int(m.group(1))


def http_get(port, path):
    """(status, body) of a plain GET on loopback."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


class LocalOnly:
    """Env.api against a real cluster. A scenario that reads the local API
    server's request log or switches its faults is skipped there when it
    gets that far, with the reason, rather than failing on a missing client
    (scenarios that need it throughout say so with needs_sim)."""

    def __getattr__(self, name):
        raise Skip("it uses the local API server's own client (%s)" % name)


LOCAL_ONLY = LocalOnly()


class Env:
    def __init__(self, kcm_binary, kcm_args=(), sharded=0):
        self.workdir = tempfile.mkdtemp(prefix="kcm-e2e-")
        self.cache_dir = os.path.join(self.workdir, "kubectl-cache")
        self.sim = None
        self.kcm = None
        self.sa_mode = uses_service_account_credentials(kcm_args)
        real = os.environ.get("KCM_E2E_KUBECONFIG")
        if real:
            self.kubeconfig = real
            self.real = True
            self.audit_log = os.environ.get("KCM_E2E_AUDIT_LOG")
        else:
            # kcm's token: of its ServiceAccount, authorized by the roles in
            # manifests/base; with --use-service-account-credentials, of
            # kube-controller-manager's user, as the static pod runs (its
            # bootstrap ClusterRole and manifests/static-pod's binding only).
            self.sa_token = "kcm-sa-" + os.urandom(8).hex()
            identity = (("--extra-token", self.sa_token + ":" + CONTROLLER_MANAGER_USER)
                        if self.sa_mode else ("--sa-token", self.sa_token + ":kube-system:kcm"))
            # Tokens of ServiceAccounts for scenarios that need users of their own.
            self.user_tokens = {name: "kcm-e2e-%s-%s" % (name, os.urandom(8).hex())
                                for name in USER_ACCOUNTS}
            users = [a for name, token in self.user_tokens.items()
                     for a in ("--sa-token", "%s:%s:%s" % (token, USER_NAMESPACE, name))]
            self.shadow_token = "kcm-shadow-" + os.urandom(8).hex()
            users += ["--sa-token", "%s:kube-system:%s" % (self.shadow_token, SHADOW_NAME)]
            # Its objects kept in a file, so a scenario can kill and restart it.
            # Who did what, as kube-apiserver's audit log says it.
            self.audit_log = os.path.join(self.workdir, "audit.jsonl")
            self.sim = SimProcess("--kubelet", "--ready-delay", "0.5",
                                  "--state", os.path.join(self.workdir, "sim-state.jsonl"),
                                  "--audit-log", self.audit_log,
                                  *identity, *users)
            self.kubeconfig = self.sim.kubeconfig
            self.real = False
        self.kcm_binary = kcm_binary
        self.is_kcm = is_kcm(kcm_binary)
        self.shadow = None       # the suite's shadow kcm (run.py --with-shadow)
        self.shadow_args = ()
        self.shadow_reports = []  # of the suite's shadows stopped so far
        self._debug_token = None
        self.kcm_args = tuple(kcm_args)
        # The kubeconfig kcm runs with: against the local API server, the
        # token above, authorized by the RBAC objects of manifests/base (or
        # manifests/static-pod) only; elsewhere (or for another
        # controller-manager) the harness's own.
        self.kcm_kubeconfig = os.environ.get("KCM_E2E_KCM_KUBECONFIG") or self.kubeconfig
        if self.sim and self.is_kcm:
            self.kcm_kubeconfig = self._service_account_kubeconfig()
        self.sharded = sharded
        if sharded:
            # Its Leases in a namespace of their own, as manifests/sharded has
            # them; the scenarios that inspect one kcm process skip, as for
            # another controller-manager.
            # (Those an earlier run left would make them wait out a lease.)
            k = self.kubectl(KcmGroup.LEASES)
            k.run("create", "namespace", KcmGroup.LEASES, check=False, namespaced=False)
            k("delete", "leases", "--all")
            self.allow_lease(namespace=KcmGroup.LEASES)
            self.is_kcm = False
        if os.environ.get("KCM_E2E_START_KCM", "1") != "0":
            self.start_kcm("kcm.log")

    def _service_account_kubeconfig(self):
        from apiserver import write_kubeconfig
        variant = "static-pod" if self.sa_mode else "base"
        for obj in manifest_objects(variant).values():
            if obj["kind"] in RBAC_KINDS:
                r = self.api.post(rbac_path(obj), obj)
                if r.status != 201:
                    raise RuntimeError("the local API server refused %s %s: %s" % (
                        obj["kind"], obj["metadata"]["name"], r.body.decode()))
        path = os.path.join(self.workdir, "kubeconfig-kcm")
        write_kubeconfig(path, self.sim.url, os.path.join(self.sim.dir, "ca.crt"),
                         {"token": self.sa_token})
        return path

    @property
    def kcm_subject(self):
        """The RBAC subject kcm authenticates as against the local API server."""
        if self.sa_mode:
            return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
                    "name": CONTROLLER_MANAGER_USER}
        return {"kind": "ServiceAccount", "name": "kcm", "namespace": "kube-system"}

    @property
    def kcm_users(self):
        """The users kcm's requests are made as against the local API
        server: its ServiceAccount; or with --use-service-account-credentials
        kube-controller-manager's user and the two controllers' accounts."""
        if self.sa_mode:
            return {CONTROLLER_MANAGER_USER} | {
                "system:serviceaccount:kube-system:%s-controller" % c
                for c in ("deployment", "replicaset")}
        return {"system:serviceaccount:kube-system:kcm"}

    @property
    def status_verb(self):
        """The verb of kcm's status writes as the API server sees them: a
        patch, or with --use-service-account-credentials an update (the
        bootstrap roles grant no patch on replicasets/status and
        deployments/status)."""
        return "update" if self.sa_mode else "patch"

    def audit(self, *namespaces):
        """The audit events about objects in these namespaces: the local API
        server's, or a real one's given as KCM_E2E_AUDIT_LOG (with the files
        kube-apiserver rotated it into, PATH-<time>.EXT)."""
        base, ext = os.path.splitext(self.audit_log)
        events = []
        for name in sorted(glob.glob(glob.escape(base) + "-*" + ext)) + [self.audit_log]:
            with open(name) as f:
                for line in f:
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue  # empty, or cut by a rotation
                    if (e.get("objectRef") or {}).get("namespace") in namespaces:
                        events.append(e)
        return events

    def user_token(self, namespace, name):
        """A bearer token of the ServiceAccount `name` (one of
        USER_ACCOUNTS) and the namespace it is in: on a real cluster made
        in `namespace` with kubectl, on the local API server one it
        accepts from the start."""
        if self.sim:
            return USER_NAMESPACE, self.user_tokens[name]
        k = self.kubectl(namespace)
        k("create", "serviceaccount", name)
        return namespace, k("create", "token", name).strip()

    def token_kubectl(self, token, namespace):
        """kubectl as the holder of a bearer token: the suite's cluster, with
        that token for its only credentials."""
        cfg = json.loads(self.kubectl()("config", "view", "--raw", "--minify", "--flatten",
                                         "-o", "json", namespaced=False))
        cfg["users"] = [{"name": "bearer", "user": {"token": token}}]
        for c in cfg["contexts"]:
            c["context"]["user"] = "bearer"
        fd, path = tempfile.mkstemp(prefix="kubeconfig-token-", dir=self.workdir)
        with os.fdopen(fd, "w") as f:
            json.dump(cfg, f)
        return Kubectl(path, namespace, self.cache_dir)

    def allow_lease(self, name=None, namespace="kube-system"):
        """Let kcm's service account hold the Lease `name` in kube-system
        too, as an operator renaming --leader-elect-resource-name would, or
        (name None) list and write every Lease of `namespace`, as the
        sharded manifests grant in a namespace of their own (nothing to do
        when kcm does not run as its service account)."""
        if self.kcm_kubeconfig == self.kubeconfig:
            return
        role = "kcm-lease-" + (name or "all")
        rule = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                "resourceNames": [name], "verbs": ["get", "update"]}
        if not name:
            rule = dict(rule, verbs=["get", "list", "create", "update"])
            del rule["resourceNames"]
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role}
        items = [{"kind": "Role", "rules": [rule]},
                 {"kind": "RoleBinding", "roleRef": ref, "subjects": [self.kcm_subject]}]
        for obj in items:
            obj.update(apiVersion="rbac.authorization.k8s.io/v1",
                       metadata={"name": role, "namespace": namespace})
        self.kubectl()("apply", "--validate=false", "-f", "-", namespaced=False,
                       stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))

    def own_kcm(self, workdir, log_name, extra=(), binary=None):
        """A kcm of a scenario's own, run as the suite's is: its kubeconfig,
        and --use-service-account-credentials when the suite's has it
        (binary: the suite's kcm under another path)."""
        ident = ("--use-service-account-credentials",) if self.sa_mode else ()
        return Kcm(binary or self.kcm_binary, self.kcm_kubeconfig, workdir,
                   extra=(*ident, *extra), log_name=log_name)

    def own_shadow(self, workdir, log_name, extra=()):
        """kcm with --shadow (and extra), named kcm-shadow, reading as a
        ServiceAccount that may only read (against the local API server;
        elsewhere with the harness's kubeconfig)."""
        link = os.path.join(workdir, SHADOW_NAME)
        if not os.path.exists(link):
            os.symlink(self.kcm_binary, link)
        kubeconfig = self.kubeconfig
        if self.sim:
            kubeconfig = os.path.join(self.workdir, "kubeconfig-shadow")
            if not os.path.exists(kubeconfig):
                self._grant_shadow(kubeconfig)
        return Kcm(link, kubeconfig, workdir, extra=("--shadow", *extra), log_name=log_name)

    def _grant_shadow(self, kubeconfig):
        from apiserver import write_kubeconfig
        meta = {"name": SHADOW_NAME}
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": meta, "rules": SHADOW_RULES}
        subjects = [{"kind": "ServiceAccount", "name": SHADOW_NAME, "namespace": "kube-system"}]
        binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": meta,
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": SHADOW_NAME}, "subjects": subjects}
        # Its secure port asks the API server who a caller is and what it may do.
        delegator = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                     "metadata": {"name": SHADOW_NAME + ":auth-delegator"},
                     "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                 "kind": "ClusterRole", "name": "system:auth-delegator"},
                     "subjects": subjects}
        for obj in (role, binding, delegator):
            r = self.api.post(rbac_path(obj), obj)
            if r.status not in (201, 409):
                raise RuntimeError("cannot grant the shadow %s: %s" % (obj["kind"],
                                                                       r.body.decode()))
        write_kubeconfig(kubeconfig, self.sim.url, os.path.join(self.sim.dir, "ca.crt"),
                         {"token": self.shadow_token})

    def start_shadow(self, log_name):
        """Start the suite's shadow (run.py --with-shadow)."""
        self.shadow = self.own_shadow(self.workdir, log_name, self.shadow_args)

    def stop_shadow(self):
        """Stop the suite's shadow, keeping its report; its exit status."""
        self.shadow_reports.append(self.shadow_report())
        code = self.shadow.stop()
        self.shadow = None
        return code

    def debug_token(self):
        """A bearer token that may GET /debug/shadow: of the ServiceAccount
        DEBUG_NAME in kube-system, bound to a ClusterRole of that one URL
        (made at the first call)."""
        if self._debug_token is None:
            meta = {"name": DEBUG_NAME}
            subject = {"kind": "ServiceAccount", "name": DEBUG_NAME, "namespace": "kube-system"}
            items = [
                {"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": dict(meta, namespace="kube-system")},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": meta,
                 "rules": [{"nonResourceURLs": ["/debug/shadow"], "verbs": ["get"]}]},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": meta, "subjects": [subject],
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": DEBUG_NAME}}]
            self.kubectl()("apply", "--validate=false", "-f", "-", namespaced=False,
                           stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
            self._debug_token = self.kubectl("kube-system")("create", "token",
                                                            DEBUG_NAME).strip()
        return self._debug_token

    def shadow_report(self, kcm=None):
        """A shadow's /debug/shadow, as JSON (the suite's by default), from
        its secure port: the plain one refuses it."""
        from scenarios_serving import https_get
        kcm = kcm or self.shadow
        token = self.debug_token()
        def answered():
            try:
                return https_get(kcm.secure_port, "/debug/shadow", token=token)
            except OSError:
                return None  # not listening yet

        status, body, _ = wait_for(answered, timeout=30, what="the shadow's secure port")
        assert status == 200, (status, body)
        return json.loads(body)

    def shadow_writes(self):
        """What the audit log shows the shadow sent other than reads (local
        API server only). The reviews its secure port asks for (who a
        caller is, what it may do) store nothing, and are reads here."""
        with open(self.audit_log) as f:
            events = [json.loads(line) for line in f if line.strip()]
        return [e for e in events if e.get("userAgent", "").startswith(SHADOW_NAME + "/")
                and e.get("verb") not in READ_VERBS
                and (e.get("objectRef") or {}).get("resource") not in REVIEWS]

    def restart_kcm(self, log_name):
        """Stop kcm with SIGTERM and start it again; returns the old exit status."""
        code = self.kcm.stop()
        self.start_kcm(log_name)
        return code

    def start_kcm(self, log_name):
        if self.sharded:
            self.kcm = KcmGroup(self.kcm_binary, self.kcm_kubeconfig, self.workdir,
                                self.sharded, self.kcm_args, log_name)
            self.wait_shards_held()
        else:
            self.kcm = Kcm(self.kcm_binary, self.kcm_kubeconfig, self.workdir,
                           extra=self.kcm_args, log_name=log_name)

    def wait_shards_held(self):
        """Wait until every shard's Lease has a holder."""
        def held():
            items = self.kubectl(KcmGroup.LEASES).json("get", "leases")["items"]
            assert self.kcm.alive(), "a sharded kcm exited; see %s" % self.workdir
            return sum(1 for le in items if "-shard-" in le["metadata"]["name"] and
                       (le.get("spec") or {}).get("holderIdentity")) == KcmGroup.SHARDS
        wait_for(held, timeout=60, interval=0.5, what="every shard to be held")

    def wait_kcm_started(self):
        """Wait until the suite's kcm has synced its caches or exited."""
        wait_for(lambda: "caches synced" in self.kcm.text() or not self.kcm.alive(), timeout=30,
                 what="the suite's kcm to start again")

    @property
    def api(self):
        """Direct API access: the local API server's client, or against a
        real cluster a stand-in whose every use skips the scenario."""
        return self.sim.client if self.sim else LOCAL_ONLY

    def kubectl(self, namespace=""):
        return Kubectl(self.kubeconfig, namespace, self.cache_dir)

    def close(self):
        if self.shadow:
            self.shadow.stop()
            self.shadow = None
        code = self.kcm.stop() if self.kcm else None
        if self.sim:
            self.sim.stop()
        return code


@contextlib.contextmanager
def suite_kcm_stopped(ctx, log_name):
    """For a scenario that runs kcm processes of its own, which the suite's
    kcm would compete with: stops the suite's kcm with SIGTERM (asserting
    it exits 0) and yields a new directory for the scenario's processes,
    workdir/<namespace>. On the way out, however the scenario ended, starts
    the suite's kcm again (its log in log_name) and waits for it to sync its
    caches. The scenario stops its own processes first."""
    env = ctx.env
    d = os.path.join(env.workdir, ctx.ns)
    os.makedirs(d, exist_ok=True)
    shadowed = env.shadow is not None
    if shadowed:  # it would report the suite's kcm as doing nothing
        assert env.stop_shadow() == 0
    assert env.kcm.stop() == 0
    try:
        yield d
    finally:
        env.start_kcm(log_name)
        env.wait_kcm_started()
        if shadowed:
            env.start_shadow("shadow-" + log_name)


@contextlib.contextmanager
def extra_namespaces(ctx, *suffixes):
    """Contexts in namespaces of ctx's name and a suffix each, deleted after."""
    names = ["%s-%s" % (ctx.ns, s) for s in suffixes]
    for n in names:
        ctx.k("create", "namespace", n, namespaced=False)
    try:
        yield [Context(ctx.env, n) for n in names]
    finally:
        for n in names:
            ctx.k.run("delete", "namespace", n, "--wait=false", check=False, namespaced=False)


class Context:
    def __init__(self, env, namespace):
        self.env = env
        self.ns = namespace
        self.k = env.kubectl(namespace)
        self.api = env.api

    def apply(self, text):
        return self.k("apply", "-f", "-", stdin=text)


__all__ = ["scenario", "SCENARIOS", "Env", "Context", "Kubectl", "Kcm", "KcmGroup", "Client", "Skip",
           "local_objects", "suite_kcm_stopped", "extra_namespaces", "wait_for", "CommandError", "ROOT", "time",
           "plain_port", "http_get", "SHADOW_NAME"]
