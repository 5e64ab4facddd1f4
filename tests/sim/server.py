"""HTTPS front end of the local API server: authentication, routing,
discovery, content negotiation (JSON and Table), chunked watch streams and
the /_sim control endpoints used by tests to inject faults.
"""

import collections
import gzip
import json
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import openapi
import protobuf
import rbac
import resources
import reviews
import tables
from api import Api, ApiError, bad_request, go_json_error
from faults import DEFAULTS, Faults
from store import Expired, dumps

VERSION = {
    "major": "1", "minor": "31", "gitVersion": "v1.31.0-kcmsim", "gitCommit": "0" * 40,
    "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.22.0",
    "compiler": "gc", "platform": "linux/amd64",
}

MAX_BODY = 3 * 1024 * 1024
GZIP_MIN = 128 * 1024


class RawResponse(Exception):
    """An injected answer sent as-is instead of a Status."""

    def __init__(self, code, body, content_type):
        super().__init__("raw response")
        self.code, self.body, self.content_type = code, body, content_type


class DropConnection(Exception):
    """An injected fault: close the connection without an answer."""


class Route:
    __slots__ = ("kind", "res", "ns", "name", "sub", "group", "version")

    def __init__(self, kind, res=None, ns="", name="", sub="", group="", version=""):
        self.kind, self.res, self.ns, self.name, self.sub = kind, res, ns, name, sub
        self.group, self.version = group, version


def route(path):
    parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/") if p]
    if not parts:
        return Route("root")
    head = parts[0]
    if head == "_sim":
        return Route("sim", name="/".join(parts[1:]))
    if head in ("healthz", "livez", "readyz") and len(parts) == 1:
        return Route("health")
    if head == "version" and len(parts) == 1:
        return Route("version")
    if head == "openapi":
        return Route("openapi", name="/".join(parts[1:]))
    if head == "api":
        if len(parts) == 1:
            return Route("api")
        group, version, rest = "", parts[1], parts[2:]
    elif head == "apis":
        if len(parts) == 1:
            return Route("apis")
        if len(parts) == 2:
            return Route("group", group=parts[1])
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return Route("notfound")
    if not rest:
        return Route("groupversion", group=group, version=version)
    ns = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and \
            rest[2] not in resources.BY_PLURAL["namespaces"].subresources:
        ns, rest = rest[1], rest[2:]
        res = resources.BY_PATH.get((group, version, rest[0]))
        if res is None or not res.namespaced:
            return Route("notfound")
    else:
        res = resources.BY_PATH.get((group, version, rest[0]))
        if res is None:
            return Route("notfound")
    if len(rest) > 3:
        return Route("notfound")
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and sub not in res.subresources:
        return Route("notfound")
    return Route("resource", res=res, ns=ns, name=name, sub=sub, group=group, version=version)


def bulk_load(api, body):
    """Load many running pods (and the ReplicaSets owning them) straight into
    the store, for benchmarks: {"namespaces": 10, "pods": 10000,
    "replicasets": 200, "image": "nginx:1.7.9", "nodes": 100}."""
    if not isinstance(body, dict):
        raise ValueError("body must be an object")
    npods = int(body.get("pods", 0))
    nrs = max(1, int(body.get("replicasets", max(1, npods // 50))))
    nns = max(1, int(body.get("namespaces", 1)))
    nodes = max(1, int(body.get("nodes", 100)))
    image = str(body.get("image", "nginx:1.7.9"))
    prefix = str(body.get("prefix", "bench"))
    if npods < 0 or npods > 1000000:
        raise ValueError("pods must be between 0 and 1000000")
    api.ctx.manager = "bulk-loader"
    nsres, rsres, podres = (resources.BY_PLURAL[p] for p in
                            ("namespaces", "replicasets", "pods"))
    owners = []
    for i in range(nns):
        ns = "%s-%d" % (prefix, i)
        try:
            api.create(nsres, "", {"metadata": {"name": ns}})
        except ApiError:
            pass
    for i in range(nrs):
        ns = "%s-%d" % (prefix, i % nns)
        h = "%08x" % (0x9e3779b9 * (i + 1) & 0xffffffff)
        labels = {"app": "%s-%d" % (prefix, i), "pod-template-hash": h}
        replicas = npods // nrs + (1 if i < npods % nrs else 0)
        rs = api.create(rsres, ns, {
            "metadata": {"name": "%s-%d-%s" % (prefix, i, h), "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "app", "image": image,
                                                           "ports": [{"containerPort": 80}]}]}}}})
        owners.append(rs)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for i in range(npods):
        rs = owners[i % nrs]
        meta = rs["metadata"]
        node = "bench-node-%d" % (i % nodes)
        name = "%s-%05x" % (meta["name"], i)
        api.create(podres, meta["namespace"], {
            "metadata": {"name": name, "generateName": meta["name"] + "-",
                         "labels": dict(meta["labels"]),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": meta["name"], "uid": meta["uid"],
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"nodeName": node,
                     "containers": [{"name": "app", "image": image,
                                     "ports": [{"containerPort": 80}]}]},
            "status": {"phase": "Running", "qosClass": "BestEffort",
                       "hostIP": "10.0.%d.%d" % (i % nodes // 250, i % nodes % 250 + 1),
                       "podIP": "10.244.%d.%d" % (i // 250 % 250, i % 250 + 2),
                       "podIPs": [{"ip": "10.244.%d.%d" % (i // 250 % 250, i % 250 + 2)}],
                       "startTime": now,
                       "conditions": [
                           {"type": t, "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": now}
                           for t in ("Initialized", "Ready", "ContainersReady",
                                     "PodScheduled")],
                       "containerStatuses": [{
                           "name": "app", "state": {"running": {"startedAt": now}},
                           "lastState": {}, "ready": True, "restartCount": 0,
                           "image": image,
                           "imageID": "docker.io/library/nginx@sha256:" + "0" * 64,
                           "containerID": "containerd://%064x" % i, "started": True}]},
        }, keep_status=True)
    return {"pods": npods, "replicasets": nrs, "namespaces": nns,
            "resourceVersion": api.store.rv}


_EMPTY_TEMPLATE = {"metadata": {}, "spec": {"containers": None}}
_BOOKMARK_BODIES = {
    "Deployment": {"spec": {"replicas": 0, "selector": None, "template": _EMPTY_TEMPLATE,
                            "strategy": {}}, "status": {}},
    "ReplicaSet": {"spec": {"selector": None, "template": _EMPTY_TEMPLATE},
                   "status": {"replicas": 0}},
    "Pod": {"spec": {"containers": None}, "status": {}},
    "Namespace": {"spec": {}, "status": {}},
    "Node": {"spec": {}, "status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                                    "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "",
                                                 "kernelVersion": "", "osImage": "",
                                                 "containerRuntimeVersion": "",
                                                 "kubeletVersion": "", "kubeProxyVersion": "",
                                                 "operatingSystem": "", "architecture": ""}}},
    "Event": {"involvedObject": {}, "reportingComponent": "", "reportingInstance": "",
              "source": {}, "firstTimestamp": None, "lastTimestamp": None, "eventTime": None},
    "Lease": {"spec": {}},
}


def bookmark_object(res, rv):
    """A BOOKMARK's object: the kind's empty object, as Go serializes its zero
    value, carrying only the resourceVersion."""
    obj = {"kind": res.kind, "apiVersion": res.api_version,
           "metadata": {"resourceVersion": str(rv)}}
    obj.update(_BOOKMARK_BODIES.get(res.kind, {}))
    return obj


def wants_table(accept):
    for part in (accept or "").split(","):
        params = [p.strip() for p in part.split(";")]
        if "as=Table" in params and "g=meta.k8s.io" in params:
            return True
    return False


class Journal:
    """The latest 20,000 entries of a log, each numbered ("seq") as added."""

    def __init__(self):
        self.lock = threading.Lock()
        self.entries = collections.deque(maxlen=20000)
        self.seq = 0

    def append(self, entry):
        with self.lock:
            self.seq += 1
            entry["seq"] = self.seq
            self.entries.append(entry)

    def since(self, seq):
        """The entries numbered after seq, and the last number given."""
        with self.lock:
            return [x for x in self.entries if x["seq"] > seq], self.seq


def _micro_time(ts):
    t = time.gmtime(ts)
    return time.strftime("%Y-%m-%dT%H:%M:%S", t) + ".%06dZ" % int((ts % 1) * 1e6)


def audit_event(handler, r, verb, user, groups, received):
    """The audit.k8s.io/v1 Event kube-apiserver logs at level Metadata, stage
    ResponseComplete, for a request (`handler` after answering it)."""
    ev = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
          "auditID": handler.audit_id, "stage": "ResponseComplete",
          "requestURI": handler.path, "verb": verb, "user": {}}
    if user:
        ev["user"]["username"] = user
        if groups:
            ev["user"]["groups"] = list(groups)
    ev["sourceIPs"] = [handler.client_address[0]]
    agent = handler.headers.get("User-Agent")
    if agent:
        ev["userAgent"] = agent
    if r.res is not None:
        ref = {"resource": r.res.plural}
        for key, value in (("namespace", r.ns), ("name", handler.object_name),
                           ("apiGroup", r.group), ("apiVersion", r.version),
                           ("subresource", r.sub)):
            if value:
                ref[key] = value
        ev["objectRef"] = ref
    ev["responseStatus"] = {"metadata": {}, "code": handler.status_code}
    ev["requestReceivedTimestamp"] = _micro_time(received)
    ev["stageTimestamp"] = _micro_time(time.time())
    return ev


class SimServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, ssl_ctx, tokens, basic=None, bookmark_interval=60.0,
                 max_events=100000):
        super().__init__(addr, Handler)
        self.ssl_ctx = ssl_ctx
        self.tokens = tokens  # token -> (user, [groups])
        self.basic = basic or {}  # user -> password
        self.api = Api(max_events=max_events)
        self.authorizer = rbac.Authorizer(self.api)
        self.faults = Faults()
        self.watch_list = True  # the WatchList gate: streamed lists offered
        self.bookmark_interval = bookmark_interval
        self.default_watch_timeout = 1800
        self.requests = Journal()  # requests served
        self.sent = Journal()      # watch events written to watchers
        self.closing = False
        self.kubelet = None
        self.openapi_docs = openapi.documents()
        self.issuer = None   # satokens.TokenIssuer: tokens of the TokenRequest API
        self.audit = None    # file the audit log is written to (--audit-log)
        self.audit_lock = threading.Lock()

    def lookup_token(self, token):
        """(user, groups, uid) a bearer token authenticates as, or None."""
        ident = self.tokens.get(token)
        if ident is not None:
            user, groups = ident
            uid = ""
            if user.startswith(rbac.SA_PREFIX):
                # A static service-account token's uid: the same account, the same uid.
                uid = str(uuid.uuid5(uuid.NAMESPACE_URL, "serviceaccount:" + user))
            return user, groups, uid
        return self.issuer.authenticate(token) if self.issuer else None

    def finish_request(self, request, client_address):
        # As Go's net/http: no Nagle delay, so a small watch event or response
        # is not held back waiting for the client's delayed ACK (~40 ms).
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        if self.ssl_ctx is not None:
            try:
                request.settimeout(10)
                request = self.ssl_ctx.wrap_socket(request, server_side=True)
                request.settimeout(None)
            except (ssl.SSLError, OSError):
                request.close()
                return
        self.RequestHandlerClass(request, client_address, self)

    def handle_error(self, request, client_address):
        pass  # broken connections are normal for a test server

    def record(self, entry):
        self.requests.append(entry)

    def write_audit(self, event):
        line = json.dumps(event, separators=(",", ":")) + "\n"
        with self.audit_lock:
            self.audit.write(line)
            self.audit.flush()

    def record_sent(self, ev, plural, user_agent):
        """Note when a watch event went out to a watcher, to tell the server's
        share of a latency from its client's."""
        meta = ev.entry.obj["metadata"]
        self.sent.append({"time": time.time(), "resource": plural, "type": ev.type,
                          "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
                          "resourceVersion": ev.rv, "userAgent": user_agent})

    def shutdown(self):
        self.closing = True
        with self.api.lock:
            self.api.lock.notify_all()
        super().shutdown()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kcm-sim"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    # --- plumbing ---------------------------------------------------------------

    def do_GET(self):
        self.dispatch()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def read_body(self):
        self.body_read = True
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if te == "chunked":
            chunks, total = [], 0
            while True:
                line = self.rfile.readline(1024)
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline(1024)
                    break
                total += size
                if total > MAX_BODY:
                    raise ApiError(413, "RequestEntityTooLarge",
                                   "Request entity too large: limit is 3145728")
                chunks.append(self.rfile.read(size))
                self.rfile.readline(1024)
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            raise ApiError(413, "RequestEntityTooLarge", "Request entity too large: limit is "
                           "3145728")
        return self.rfile.read(length) if length else b""

    def drain_body(self):
        """Reads a body the request was refused before reading, so that the
        next request on the connection does not start inside it."""
        if self.body_read or self.command not in ("POST", "PUT", "PATCH", "DELETE"):
            return
        try:
            self.read_body()
        except (ApiError, ValueError, OSError):
            self.close_connection = True

    def send_json(self, code, body, headers=None, content_type="application/json"):
        if self.drop_answer:
            # Carried out, but the answer is lost (a `closeAfter` fault).
            self.status_code = 0
            self.close_connection = True
            return
        # body: a JSON value, its text, or its text in parts (list of bytes)
        parts = body if isinstance(body, list) else \
            [body if isinstance(body, bytes) else dumps(body).encode()]
        size = sum(len(p) for p in parts)
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", self.audit_id)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if size >= GZIP_MIN and "gzip" in (self.headers.get("Accept-Encoding") or ""):
            parts = [gzip.compress(b"".join(parts), 1)]
            size = len(parts[0])
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        self.status_code = code
        self.record_request()
        if self.command != "HEAD":
            for part in parts:
                self.wfile.write(part)
        self.status_code = code

    def send_error_status(self, err):
        headers = dict(err.headers)
        if getattr(self, "protobuf", False):
            return self.send_json(err.code, protobuf.status(err.status()), headers,
                                  content_type=protobuf.MEDIA)
        self.send_json(err.code, err.status(), headers)

    def send_text(self, code, text):
        raw = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.status_code = code
        self.record_request()
        self.wfile.write(raw)
        self.status_code = code

    # --- authentication -----------------------------------------------------------

    def authenticate(self):
        """Return (user, groups); raise ApiError 401 on bad credentials."""
        auth = self.headers.get("Authorization") or ""
        if auth.startswith("Bearer "):
            ident = self.server.lookup_token(auth[7:].strip())
            if ident is None:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            return ident[0], ident[1]
        if auth.startswith("Basic "):
            import base64
            try:
                user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
            except Exception:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            if self.server.basic.get(user) != pw or not pw:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            return user, ["system:authenticated"]
        if auth:
            raise ApiError(401, "Unauthorized", "Unauthorized")
        cert = None
        try:
            cert = self.connection.getpeercert()
        except (AttributeError, ValueError):
            cert = None
        if cert:
            subject = dict(x[0] for x in cert.get("subject", ()))
            groups = [v for rdn in cert.get("subject", ()) for k, v in rdn
                      if k == "organizationName"]
            return subject.get("commonName", ""), groups + ["system:authenticated"]
        return "system:anonymous", ["system:unauthenticated"]

    # --- dispatch ---------------------------------------------------------------

    def record_request(self):
        """Add this request to the server's log, once. An answer records its
        request before its body goes out, so a client that has read the answer
        finds the request in /_sim/requests; a stream, or an answer never
        sent, records when it ends."""
        if self.recorded or self.route.kind == "sim":
            return
        self.recorded = True
        r, url = self.route, self.url
        self.server.record({
            "time": time.time(), "user": self.user, "verb": self.verb, "method": self.command,
            "path": url.path, "query": url.query, "code": self.status_code,
            "resource": r.res.plural if r.res else "", "subresource": r.sub,
            "namespace": r.ns, "name": r.name,
            "userAgent": self.headers.get("User-Agent") or "",
            "acceptEncoding": self.headers.get("Accept-Encoding") or "",
            "tlsResumed": bool(getattr(self.connection, "session_reused", False)),
            "ms": round((time.monotonic() - self.started) * 1000, 3)})

    def dispatch(self):
        self.audit_id = str(uuid.uuid4())
        self.status_code = 0
        self.body_read = False
        self.drop_answer = False
        self.protobuf = False  # this answer is written in protobuf
        self.recorded = False
        started = self.started = time.monotonic()
        url = self.url = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query,
                                                            keep_blank_values=True).items()}
        r = self.route = route(url.path)
        verb = self.verb = self.command.lower()
        user, groups = "", []
        self.user = user
        self.object_name = r.name
        received = time.time()
        agent = self.headers.get("User-Agent") or ""
        self.server.api.ctx.manager = query.get("fieldManager") or agent.split("/")[0] or \
            "unknown"
        try:
            user, groups = self.authenticate()
            self.user = user
            if r.kind == "sim":
                return self.handle_sim(r, query)
            try:
                attrs = rbac.request_attributes(self.command, url.path, url.query)
            except ValueError as e:
                text = "Internal Server Error: %s: failed to create RequestInfo: %s" % (
                    json.dumps(self.path), e)
                for a, b in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;")):
                    text = text.replace(a, b)
                return self.send_text(500, text + "\n")
            if r.kind == "resource":
                verb = self.verb = attrs.verb
            allowed, reason = self.server.authorizer.authorize(user, groups, attrs)
            if not allowed:
                raise rbac.forbidden(user, attrs, reason)
            if r.kind == "resource":
                return self.handle_resource(r, verb, query)
            if self.command != "GET":
                raise ApiError(405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource")
            return self.handle_static(r, url.path)
        except ApiError as e:
            self.drain_body()
            self.send_error_status(e)
        except RawResponse as e:
            self.send_json(e.code, e.body, content_type=e.content_type)
        except DropConnection:
            self.status_code = 0
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        finally:
            if r.kind != "sim" and self.server.audit is not None:
                self.server.write_audit(audit_event(
                    self, r, verb, user, groups, received))
            self.record_request()

    def handle_static(self, r, path):
        port = self.server.server_address[1]
        self.apply_faults("get", r)
        if r.kind == "version":
            return self.send_json(200, VERSION)
        if r.kind == "health":
            return self.send_text(200, "ok")
        if r.kind == "openapi":
            docs = self.server.openapi_docs
            if r.name == "v3":
                return self.send_json(200, openapi.index(docs))
            if r.name.startswith("v3/") and r.name[3:] in docs:
                return self.send_json(200, docs[r.name[3:]])
            raise self.not_found_path()
        if r.kind == "root":
            paths = ["/api", "/api/v1", "/apis"]
            for g, v in resources.groups():
                if g:
                    paths += ["/apis/" + g, "/apis/%s/%s" % (g, v)]
            paths += ["/healthz", "/livez", "/readyz", "/version"]
            return self.send_json(200, {"paths": sorted(set(paths))})
        if r.kind == "api":
            return self.send_json(200, {
                "kind": "APIVersions", "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                "serverAddress": "127.0.0.1:%d" % port}]})
        if r.kind == "apis":
            groups = [self.group_doc(g) for g, _ in resources.groups() if g]
            return self.send_json(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                        "groups": groups})
        if r.kind == "group":
            if not any(g == r.group for g, _ in resources.groups()):
                raise self.not_found_path()
            doc = self.group_doc(r.group)
            doc.update({"kind": "APIGroup", "apiVersion": "v1"})
            return self.send_json(200, doc)
        if r.kind == "groupversion":
            res = [x for x in resources.ALL if x.group == r.group and x.version == r.version]
            if not res:
                raise self.not_found_path()
            gv = "%s/%s" % (r.group, r.version) if r.group else r.version
            out = {"kind": "APIResourceList", "groupVersion": gv, "resources": []}
            if r.group:
                out["apiVersion"] = "v1"
            for x in res:
                out["resources"].extend(x.discovery())
            return self.send_json(200, out)
        raise self.not_found_path()

    @staticmethod
    def group_doc(group):
        versions = [{"groupVersion": "%s/%s" % (g, v), "version": v}
                    for g, v in resources.groups() if g == group]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    @staticmethod
    def not_found_path():
        return ApiError(404, "NotFound", "the server could not find the requested resource",
                        {})

    # --- resources -------------------------------------------------------------------

    def handle_resource(self, r, verb, query):
        res = r.res
        method = self.command
        if res.namespaced and not r.ns and r.name and res.plural != "namespaces":
            raise self.not_found_path()
        if method in ("PUT", "PATCH") and not r.name:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                           "the requested resource")
        if (method == "POST") != (r.sub in ("binding", "token")) and (r.name or r.sub):
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                           "the requested resource")
        self.apply_faults(verb, r)
        if res.review:
            return self.handle_review(r, verb)
        api = self.server.api
        dry = query.get("dryRun") == "All"
        table = wants_table(self.headers.get("Accept")) and verb in ("get", "list", "watch") \
            and not r.sub and res.plural in tables.PRINTERS
        self.check_accept(res.plural)
        self.protobuf = verb in ("get", "list", "watch") and not table and not r.sub and \
            protobuf.chosen(self.headers.get("Accept"), res.plural)
        if verb == "watch":
            return self.serve_watch(r, query, table)
        if verb == "list":
            return self.serve_list(r, query, table)
        if verb == "get":
            if r.sub == "scale":
                return self.send_json(200, api.get_scale(res, r.ns, r.name))
            self.wait_for_version(query)
            obj = api.get(res, r.ns, r.name)
            if table:
                meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
                return self.send_json(200, tables.table(res.plural, [obj], meta,
                                                        query.get("includeObject", "Metadata")))
            if self.protobuf:
                return self.send_json(200, protobuf.envelope(res.kind, res.api_version,
                                                             protobuf.pod(obj)),
                                      content_type=protobuf.MEDIA)
            return self.send_json(200, obj)
        body_raw = self.read_body()
        if verb == "create":
            kind = {"binding": "Binding", "token": "TokenRequest"}.get(r.sub, res.kind)
            body = self.decode_body(body_raw, kind)
            if r.sub == "binding":
                return self.send_json(201, api.bind(r.ns, r.name, body))
            if r.sub == "token":
                api._check_kind(res, body, "TokenRequest", "authentication.k8s.io/v1")
                return self.send_json(201, self.server.issuer.request(r.ns, r.name, body))
            if isinstance(body, dict) and isinstance(body.get("metadata"), dict):
                self.object_name = body["metadata"].get("name") or ""
            return self.send_json(201, api.create(res, r.ns, body, dry))
        if verb == "update":
            body = self.decode_body(body_raw, "Scale" if r.sub == "scale" else res.kind)
            if r.sub == "scale":
                return self.send_json(200, api.update_scale(res, r.ns, r.name, body, dry))
            obj, created = api.update(res, r.ns, r.name, body, r.sub or None, dry)
            return self.send_json(201 if created else 200, obj)
        if verb == "patch":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            obj = api.patch(res, r.ns, r.name, ctype, body_raw, r.sub or None, dry)
            return self.send_json(200, obj)
        opts = self.delete_options(body_raw, query)
        if verb == "delete":
            code, obj = api.delete(res, r.ns, r.name, opts, dry)
            return self.send_json(code, obj)
        lst = api.delete_collection(res, r.ns, query.get("labelSelector", ""),
                                    query.get("fieldSelector", ""), opts, dry)
        return self.send_json(200, lst)

    def handle_review(self, r, verb):
        """A TokenReview or SubjectAccessReview: answered, not stored."""
        if verb != "create" or r.name:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on "
                           "the requested resource")
        self.check_accept()
        body = self.decode_body(self.read_body(), r.res.kind)
        self.server.api._check_kind(r.res, body)
        if r.res.plural == "tokenreviews":
            return self.send_json(201, reviews.token_review(body, self.server.lookup_token))
        return self.send_json(201, reviews.access_review(body, self.server.authorizer))

    def check_accept(self, plural=None):
        """Refuse an Accept the answer cannot meet: JSON, or for the kinds
        written in protobuf (plural), protobuf."""
        accept = self.headers.get("Accept") or ""
        if not accept:
            return
        for part in accept.split(","):
            mt = part.split(";")[0].strip()
            if mt in ("application/json", "*/*", "application/*", "") or \
                    (mt == protobuf.MEDIA and plural in protobuf.KINDS):
                return
        raise ApiError(406, "NotAcceptable",
                       "only the following media types are accepted: application/json")

    def decode_body(self, raw, kind):
        ctype = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if ctype not in ("application/json", ""):
            raise ApiError(415, "UnsupportedMediaType",
                           "the body of the request was in an unknown format - accepted media "
                           "types include: application/json, application/yaml, "
                           "application/vnd.kubernetes.protobuf")
        try:
            return json.loads(raw)
        except RecursionError:
            # Python's reader stops near 1,000 levels; kube-apiserver's at 10,000.
            raise bad_request("the object provided is unrecognized (must be of type %s): "
                              "couldn't get version/kind; json parse error: exceeded max depth"
                              % kind)
        except (ValueError, UnicodeDecodeError) as e:
            text = raw.decode("utf-8", "replace")
            shown = text if text else "<empty>"
            if len(shown) > 120:
                shown = shown[:120] + "..."
            raise bad_request("the object provided is unrecognized (must be of type %s): "
                              "couldn't get version/kind; json parse error: %s (%s)"
                              % (kind, go_json_error(raw, e), shown))

    def delete_options(self, raw, query):
        opts = {}
        if raw.strip():
            opts = self.decode_body(raw, "DeleteOptions")
            if not isinstance(opts, dict):
                raise bad_request("DeleteOptions must be an object")
        if "gracePeriodSeconds" in query:
            try:
                opts["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
            except ValueError:
                raise bad_request("invalid gracePeriodSeconds: %s" % query["gracePeriodSeconds"])
        if "propagationPolicy" in query:
            opts["propagationPolicy"] = query["propagationPolicy"]
        if "orphanDependents" in query:
            opts["orphanDependents"] = query["orphanDependents"] == "true"
        return opts

    def apply_faults(self, verb, r):
        faults = self.server.faults
        if faults.latency_ms and r.res:
            time.sleep(faults.latency_ms / 1000.0)
        rule = faults.match(verb, r.res.plural if r.res else "", r.sub, r.ns, r.name,
                            self.path.split("?", 1)[0])
        if rule is None:
            return
        if rule.get("latencyMs"):
            time.sleep(rule["latencyMs"] / 1000.0)
        if rule.get("close"):
            if self.command in ("POST", "PUT", "PATCH", "DELETE"):
                self.read_body()
            raise DropConnection()
        if rule.get("closeAfter"):
            self.drop_answer = True
            return
        code = rule.get("code")
        if "body" in rule:
            if self.command in ("POST", "PUT", "PATCH", "DELETE"):
                self.read_body()
            raise RawResponse(code or 200, rule["body"].encode(),
                              rule.get("contentType", "text/html"))
        if code is None:
            return
        reason, message = DEFAULTS.get(code, ("", "injected fault"))
        reason = rule.get("reason", reason)
        message = rule.get("message", message)
        headers, details = {}, {"name": r.name, "group": r.res.group if r.res else "",
                                "kind": r.res.plural if r.res else ""}
        if rule.get("retryAfter") is not None:
            headers["Retry-After"] = str(rule["retryAfter"])
            details["retryAfterSeconds"] = rule["retryAfter"]
        # Drain the request body so the connection stays usable.
        if self.command in ("POST", "PUT", "PATCH", "DELETE"):
            self.read_body()
        raise ApiError(code, reason, message, details, headers)

    # --- list and watch ----------------------------------------------------------

    def wait_for_version(self, query):
        """A read at a resourceVersion the server has not reached waits up to 3 s,
        then answers 504, as the watch cache does."""
        rv = query.get("resourceVersion", "")
        if not rv:
            return
        try:
            wanted = int(rv)
        except ValueError:
            raise bad_request("invalid resource version: %s" % rv)
        store = self.server.api.store
        with store.cond:
            deadline = time.monotonic() + 3
            while wanted > store.rv and time.monotonic() < deadline:
                store.cond.wait(deadline - time.monotonic())
            if wanted > store.rv:
                raise ApiError(504, "Timeout", "Timeout: Too large resource version: %d, "
                               "current: %d" % (wanted, store.rv),
                               {"causes": [{"reason": "ResourceVersionTooLarge",
                                            "message": "Too large resource version"}],
                                "retryAfterSeconds": 1})

    def serve_list(self, r, query, table):
        api = self.server.api
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise bad_request("invalid limit: %s" % query.get("limit"))
        if query.get("continue") and query.get("resourceVersion"):
            api._decode_continue(query["continue"])  # a bad token is reported first
            raise bad_request("specifying resource version is not allowed when using continue")
        self.wait_for_version(query)
        entries, rv, cont, remaining = api.list(
            r.res, r.ns, query.get("labelSelector", ""), query.get("fieldSelector", ""),
            limit, query.get("continue", ""), query.get("resourceVersion", ""))
        meta = {"resourceVersion": str(rv)}
        if cont:
            meta["continue"] = cont
            meta["remainingItemCount"] = remaining
        if table:
            return self.send_json(200, tables.table(r.res.plural, [e.obj for e in entries], meta,
                                                    query.get("includeObject", "Metadata")))
        if self.protobuf:
            for e in entries:
                if e.pb is None:
                    e.pb = protobuf.pod(e.obj)
            return self.send_json(200, protobuf.list_parts(r.res.kind, r.res.api_version, meta,
                                                           [e.pb for e in entries]),
                                  content_type=protobuf.MEDIA)
        head = ('{"kind":"%sList","apiVersion":"%s","metadata":%s,"items":['
                % (r.res.kind, r.res.api_version, dumps(meta))).encode()
        # Written a few hundred items at a time: one body of 50,000 pods
        # (200 MB) would cost more in page faults than in anything else.
        raws = [e.item_raw for e in entries]
        step = 256
        parts = [head] + [b",".join(raws[i:i + step]) + (b"," if i + step < len(raws) else b"")
                          for i in range(0, len(raws), step)] + [b"]}"]
        return self.send_json(200, parts)

    def start_stream(self):
        self.send_response(200)
        self.send_header("Content-Type",
                         protobuf.WATCH_MEDIA if self.protobuf else "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", self.audit_id)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.status_code = 200

    def write_chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def abort_stream(self):
        """Break the connection as a failing network would: no final chunk."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def watch_event(self, etype, obj_raw, obj=None, entry=None):
        """One event of the stream: obj_raw is the object's JSON; in a
        protobuf stream obj (the object itself) is written instead, from
        its entry's message when it is the stored one (encoded once for
        every watcher)."""
        if self.protobuf:
            if obj.get("kind") == "Status":
                return protobuf.watch_frame(etype, protobuf.status(obj))
            if entry is not None and entry.pb is None:
                entry.pb = protobuf.pod(obj)
            return protobuf.watch_frame(etype, protobuf.envelope(
                obj.get("kind") or "Pod", obj.get("apiVersion") or "v1",
                entry.pb if entry is not None else protobuf.pod(obj)))
        return b'{"type":"%s","object":%s}\n' % (etype.encode(), obj_raw)

    def serve_watch(self, r, query, table):
        api, store, res = self.server.api, self.server.api.store, r.res
        reqs, terms = api.parse_selectors(res, query.get("labelSelector", ""),
                                          query.get("fieldSelector", ""))
        try:
            timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else \
                self.server.default_watch_timeout
        except ValueError:
            raise bad_request("invalid timeoutSeconds: %s" % query["timeoutSeconds"])
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        include = query.get("includeObject", "Metadata")
        rv_param = query.get("resourceVersion", "")
        ns = r.ns if res.namespaced else ""
        start = time.monotonic()
        deadline = start + timeout
        headers_sent = [False]
        agent = self.headers.get("User-Agent") or ""

        def visible(obj):
            if ns and obj["metadata"].get("namespace") != ns:
                return False
            return api._matches(obj, reqs, terms)

        def encode(etype, obj, raw=None, entry=None):
            if table:
                meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
                t = tables.table(res.plural, [obj], meta, include)
                if headers_sent[0]:
                    t["columnDefinitions"] = None
                headers_sent[0] = True
                raw = dumps(t).encode()
            if self.protobuf:
                return self.watch_event(etype, None, obj, entry)
            return self.watch_event(etype, raw if raw is not None else dumps(obj).encode())

        send_initial = self.watch_list_options(query)
        initial = []
        with store.cond:
            epoch = store.drop_epoch
            if send_initial is not None:
                # A streamed list (the WatchList gate): the current objects
                # (or none), whatever version is asked for, as not older.
                if rv_param not in ("", "0"):
                    try:
                        int(rv_param)
                    except ValueError:
                        raise bad_request("invalid resource version: %s" % rv_param)
                cursor = store.rv
                if send_initial:
                    initial = sorted((e for _, e in store.items(res.plural, ns or None)
                                      if visible(e.obj)),
                                     key=lambda e: (e.obj["metadata"].get("namespace", ""),
                                                    e.obj["metadata"]["name"]))
            elif rv_param in ("", "0"):
                cursor = store.rv
                initial = [e for _, e in store.items(res.plural, ns or None) if visible(e.obj)]
                initial.sort(key=lambda e: (e.obj["metadata"].get("namespace", ""),
                                            e.obj["metadata"]["name"]))
            else:
                try:
                    cursor = int(rv_param)
                except ValueError:
                    raise bad_request("invalid resource version: %s" % rv_param)
                try:
                    store.events_since(res.plural, cursor)
                except Expired as e:
                    self.start_stream()
                    self.write_chunk(self.expired_event(e))
                    return self.end_stream()
        self.start_stream()
        for e in initial:
            self.write_chunk(encode("ADDED", e.obj, e.raw, e))
        if (send_initial or (send_initial is None and rv_param in ("", "0"))) and bookmarks \
                and not table:
            # Asked for, or the default since 1.32 for a watch from no
            # version: the current state, then a bookmark marking its end.
            mark = bookmark_object(res, cursor)
            mark["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
            self.write_chunk(self.watch_event("BOOKMARK", dumps(mark).encode(), mark))
        told = cursor  # the newest version the client has been told of
        interval = self.server.bookmark_interval
        next_bookmark = min(start + interval, deadline - 2) if bookmarks else None
        while True:
            out, expired, held = [], None, False
            with store.cond:
                while True:
                    if store.drop_epoch != epoch or self.server.closing:
                        return self.abort_stream()
                    now = time.monotonic()
                    try:
                        pending = store.events_since(res.plural, cursor)
                    except Expired as e:
                        expired = e
                        break
                    delay = store.watch_delay
                    ready = [ev for ev in pending if ev.ts + delay <= now] if delay else pending
                    held = len(ready) < len(pending)
                    if ready:
                        out = ready
                        cursor = ready[-1].rv
                        break
                    if now >= deadline:
                        break
                    if next_bookmark is not None and now >= next_bookmark:
                        break
                    wake = deadline
                    if next_bookmark is not None:
                        wake = min(wake, next_bookmark)
                    if pending:
                        wake = min(wake, pending[0].ts + delay)
                    store.cond.wait(max(0.0, wake - now))
                latest = store.latest(res.plural)
            if expired is not None:
                self.write_chunk(self.expired_event(expired))
                return self.end_stream()
            for ev in out:
                chunk = self.filter_event(ev, visible, encode)
                if chunk:
                    self.write_chunk(chunk)
                    told = ev.rv
                    if ev.type != "RAW":
                        self.server.record_sent(ev, res.plural, agent)
            now = time.monotonic()
            if next_bookmark is not None and now >= next_bookmark:
                # Bookmarks carry the newest version of this resource, and only
                # when the watcher has not been told of it yet.
                if latest > told and not held:
                    cursor = told = max(cursor, latest)
                    mark = bookmark_object(res, told)
                    self.write_chunk(self.watch_event("BOOKMARK", dumps(mark).encode(), mark))
                next_bookmark = now + interval
                if next_bookmark > deadline - 2:
                    next_bookmark = deadline - 2 if deadline - 2 > now else None
            if now >= deadline:
                return self.end_stream()

    def watch_list_options(self, query):
        """sendInitialEvents (None when not given) after checking it and
        resourceVersionMatch as kube-apiserver does."""
        given = query.get("sendInitialEvents")
        match = query.get("resourceVersionMatch", "")
        errs = resources.FieldErrors()
        if given is not None:
            if match != "NotOlderThan":
                errs.forbidden("resourceVersionMatch", "sendInitialEvents requires setting "
                               "resourceVersionMatch to NotOlderThan")
            if not self.server.watch_list:
                errs.forbidden("sendInitialEvents", "sendInitialEvents is forbidden for watch "
                               "unless the WatchList feature gate is enabled")
        if match:
            if given is None:
                errs.forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden for "
                               "watch unless sendInitialEvents is provided")
            if match != "NotOlderThan":
                errs.not_supported("resourceVersionMatch", match, ["NotOlderThan"])
        if errs:
            items = ["%s: %s" % (f, m) for f, _, m in errs.items]
            raise ApiError(422, "Invalid", 'ListOptions.meta.k8s.io "" is invalid: %s'
                           % (items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"),
                           {"group": "meta.k8s.io", "kind": "ListOptions",
                            "causes": [{"reason": r, "message": m, "field": f}
                                       for f, r, m in errs.items]})
        if given is None:
            return None
        if given not in ("true", "false", "1", "0", "True", "False"):
            raise bad_request("invalid sendInitialEvents: %s" % given)
        return given in ("true", "1", "True")

    def expired_event(self, e):
        st = ApiError(410, "Expired", str(e)).status()
        return self.watch_event("ERROR", dumps(st).encode(), st)

    def filter_event(self, ev, visible, encode):
        if ev.type == "RAW":  # an injected line: an event in JSON, or garbage
            if not self.protobuf:
                return ev.entry + b"\n"
            try:
                e = json.loads(ev.entry)
                etype, obj = e["type"], e["object"]
            except (ValueError, KeyError, TypeError):
                return protobuf.raw_frame(ev.entry)
            if not isinstance(etype, str) or not isinstance(obj, dict):
                return protobuf.raw_frame(ev.entry)
            return self.watch_event(etype, None, obj)
        obj = ev.entry.obj
        if ev.type == "ADDED":
            return encode("ADDED", obj, ev.entry.raw, ev.entry) if visible(obj) else None
        if ev.type == "DELETED":
            return encode("DELETED", obj, ev.entry.raw, ev.entry) if visible(ev.old or obj) else None
        now_in, was_in = visible(obj), visible(ev.old)
        if now_in and was_in:
            return encode("MODIFIED", obj, ev.entry.raw, ev.entry)
        if now_in:
            return encode("ADDED", obj, ev.entry.raw, ev.entry)
        if was_in:
            prev = dict(ev.old)
            prev["metadata"] = dict(prev["metadata"], resourceVersion=str(ev.rv))
            return encode("DELETED", prev)
        return None

    # --- /_sim control ---------------------------------------------------------------

    def handle_sim(self, r, query):
        srv = self.server
        store = srv.api.store
        if r.name == "faults" and self.command == "GET":
            return self.send_json(200, dict(srv.faults.describe(),
                                            watchDelayMs=int(store.watch_delay * 1000)))
        if r.name == "faults" and self.command == "POST":
            try:
                body = json.loads(self.read_body() or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("body must be an object")
                self.apply_sim_faults(body)
            except ValueError as e:
                return self.send_json(400, {"error": str(e)})
            return self.send_json(200, dict(srv.faults.describe(),
                                            watchDelayMs=int(store.watch_delay * 1000)))
        if r.name in ("requests", "watch-events") and self.command == "GET":
            journal = srv.requests if r.name == "requests" else srv.sent
            items, last = journal.since(int(query.get("since") or 0))
            return self.send_json(200, {"items": items, "last": last})
        if r.name == "state" and self.command == "GET":
            with store.cond:
                counts = {p: len(o) for p, o in store.objects.items()}
                return self.send_json(200, {"resourceVersion": store.rv, "objects": counts,
                                            "compacted": {p: lg.compacted
                                                          for p, lg in store.logs.items()}})
        if r.name == "peaks" and self.command == "GET":
            with store.cond:
                return self.send_json(200, {"items": dict(store.peaks)})
        if r.name == "bulk" and self.command == "POST":
            try:
                body = json.loads(self.read_body() or b"{}")
                result = bulk_load(srv.api, body)
            except (ValueError, TypeError, KeyError) as e:
                return self.send_json(400, {"error": str(e)})
            except ApiError as e:
                return self.send_json(400, {"error": e.message})
            return self.send_json(200, result)
        if r.name == "kubelet" and srv.kubelet is not None:
            if self.command == "POST":
                try:
                    srv.kubelet.configure(json.loads(self.read_body() or b"{}"))
                except (ValueError, TypeError) as e:
                    return self.send_json(400, {"error": str(e)})
            return self.send_json(200, srv.kubelet.describe())
        return self.send_json(404, {"error": "unknown control endpoint: /_sim/" + r.name})

    def apply_sim_faults(self, body):
        srv = self.server
        store = srv.api.store
        known = {"clear", "rules", "addRule", "latencyMs", "watchDelayMs", "dropWatches",
                 "compact", "watchInject", "watchList"}
        unknown = set(body) - known
        if unknown:
            raise ValueError("unknown fault fields: %s" % ", ".join(sorted(unknown)))
        if body.get("clear"):
            srv.faults.clear()
            store.watch_delay = 0.0
            srv.watch_list = True
        if "watchList" in body:
            # false: as a server whose WatchList gate is off
            srv.watch_list = bool(body["watchList"])
        if "rules" in body:
            if not isinstance(body["rules"], list):
                raise ValueError("rules must be a list")
            srv.faults.set_rules(body["rules"])
        if "addRule" in body:
            srv.faults.add_rule(body["addRule"])
        if "latencyMs" in body:
            srv.faults.latency_ms = max(0, int(body["latencyMs"]))
        if "watchDelayMs" in body:
            with store.cond:
                store.watch_delay = max(0, int(body["watchDelayMs"])) / 1000.0
                store.cond.notify_all()
        if "watchInject" in body:
            inj = body["watchInject"]
            if not isinstance(inj, dict) or inj.get("resource") not in store.logs or \
                    not isinstance(inj.get("line"), str):
                raise ValueError("watchInject wants {resource, line}")
            store.inject(inj["resource"], inj["line"].encode())
        # Watches are dropped before history is compacted: a watch opened
        # again after the drop then meets the compaction (410) once, and no
        # list a 410 starts is cut by the drop.
        if body.get("dropWatches"):
            store.drop_watches()
        if body.get("compact"):
            store.compact()
