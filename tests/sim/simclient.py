"""A small HTTPS client for the local API server (and any API server reachable
with a token kubeconfig written by it), used by the server's own tests and
by the e2e runner to inject faults.
"""

import base64
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body)


class Client:
    def __init__(self, url, token=None, ca_file=None, ca_data=None, cert=None):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 443
        self.token = token
        self.ctx = ssl.create_default_context()
        if ca_file:
            self.ctx.load_verify_locations(ca_file)
        elif ca_data:
            self.ctx.load_verify_locations(cadata=ca_data.decode())
        if cert:
            self.ctx.load_cert_chain(*cert)
        self.local = threading.local()

    @classmethod
    def from_sim_dir(cls, d):
        with open(os.path.join(d, "port")) as f:
            port = int(f.read())
        with open(os.path.join(d, "token")) as f:
            token = f.read().strip()
        return cls("https://127.0.0.1:%d" % port, token, os.path.join(d, "ca.crt"))

    @classmethod
    def from_kubeconfig(cls, path):
        """Read a kubeconfig with a token or client certificate (simple layout only)."""
        with open(path) as f:
            text = f.read()

        def field(name):
            m = re.search(r"^\s*%s:\s*(\S+)\s*$" % re.escape(name), text, re.M)
            return m.group(1).strip("'\"") if m else None
        server = field("server")
        ca = field("certificate-authority-data")
        ca_file = field("certificate-authority")
        if ca_file:  # relative to the kubeconfig, as kubectl resolves it
            ca_file = os.path.join(os.path.dirname(os.path.abspath(path)), ca_file)
        token = field("token")
        return cls(server, token, ca_file=ca_file, ca_data=base64.b64decode(ca) if ca else None)

    def _conn(self):
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=60)
            self.local.conn = conn
        return conn

    def request(self, method, path, body=None, headers=None, content_type=None, token=True):
        hdrs = {"Accept": "application/json"}
        if token and self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode()
            hdrs["Content-Type"] = content_type or "application/json"
        hdrs.update(headers or {})
        for attempt in range(2):
            conn = self._conn()
            try:
                conn.request(method, path, body=data, headers=hdrs)
                resp = conn.getresponse()
                raw = resp.read()
                return Response(resp.status, dict(resp.getheaders()), raw)
            except (http.client.HTTPException, ConnectionError, ssl.SSLError, OSError):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.request("PUT", path, body, **kw)

    def patch(self, path, body, ptype="merge", **kw):
        types = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
                 "strategic": "application/strategic-merge-patch+json"}
        return self.request("PATCH", path, body, content_type=types.get(ptype, ptype), **kw)

    def delete(self, path, body=None, **kw):
        return self.request("DELETE", path, body, **kw)

    def faults(self, **body):
        r = self.post("/_sim/faults", body)
        if r.status != 200:
            raise RuntimeError("fault injection refused: %s" % r.body.decode())
        return r.json()

    def watch(self, path, headers=None):
        """Open a watch; returns a Watch that yields decoded events."""
        import socket
        raw = socket.create_connection((self.host, self.port), timeout=60)
        sock = self.ctx.wrap_socket(raw, server_hostname=self.host)
        hdrs = {"Host": "%s:%d" % (self.host, self.port), "Accept": "application/json",
                "Authorization": "Bearer " + self.token}
        hdrs.update(headers or {})
        req = "GET %s HTTP/1.1\r\n%s\r\n" % (
            path, "".join("%s: %s\r\n" % kv for kv in hdrs.items()))
        sock.sendall(req.encode())
        return Watch(sock)


class Watch:
    """A watch stream read chunk by chunk, so that a clean end (the final
    zero-length chunk) is told apart from a broken connection."""

    def __init__(self, sock):
        self.sock = sock
        self.f = sock.makefile("rb")
        status_line = self.f.readline().decode()
        self.status = int(status_line.split()[1])
        self.headers = {}
        while True:
            line = self.f.readline().decode().strip()
            if not line:
                break
            k, _, v = line.partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.chunked = self.headers.get("transfer-encoding") == "chunked"
        self.pending = b""
        self.ended = False

    def _fill(self):
        """Read one more chunk into self.pending; False at the clean end."""
        size_line = self.f.readline()
        if not size_line:
            raise ConnectionError("watch stream broken")
        size = int(size_line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            self.f.readline()
            self.ended = True
            return False
        data = self.f.read(size)
        if len(data) < size or self.f.readline() != b"\r\n":
            raise ConnectionError("watch stream broken")
        self.pending += data
        return True

    def next(self, timeout=10):
        """The next event, or None when the stream ended cleanly.

        Raises ConnectionError if the connection broke without a clean end.
        """
        self.sock.settimeout(timeout)
        if not self.chunked:
            body = self.f.read()
            return json.loads(body) if body.strip() else None
        try:
            while b"\n" not in self.pending:
                if self.ended or not self._fill():
                    return None
        except OSError as e:
            raise ConnectionError("watch stream broken: %s" % e)
        line, _, self.pending = self.pending.partition(b"\n")
        return json.loads(line)

    def next_frame(self, timeout=10):
        """The next event of a protobuf watch (its bytes, without the
        4-byte length), or None when the stream ended cleanly."""
        self.sock.settimeout(timeout)
        try:
            while len(self.pending) < 4 or \
                    len(self.pending) < 4 + int.from_bytes(self.pending[:4], "big"):
                if self.ended or not self._fill():
                    return None
        except OSError as e:
            raise ConnectionError("watch stream broken: %s" % e)
        n = int.from_bytes(self.pending[:4], "big")
        frame, self.pending = self.pending[4:4 + n], self.pending[4 + n:]
        return frame

    def close(self):
        try:
            self.f.close()
            self.sock.close()
        except OSError:
            pass


class SimProcess:
    """The local API server run as a child process in a temporary directory."""

    def __init__(self, *args):
        self.dir = tempfile.mkdtemp(prefix="kcm-sim-")
        self.args = list(args)
        self._start(self.args)
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        self.client = Client.from_sim_dir(self.dir)

    def _start(self, args):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "apiserver.py"), "--dir", self.dir, *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError("local API server did not start: %s %s"
                               % (line, self.proc.stderr.read()))
        self.url = line.split()[1]

    def restart(self):
        """Kill the server (SIGKILL) and start it again on the same port, with
        the same certificates and token; its objects survive if it was started
        with --state."""
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        with open(os.path.join(self.dir, "token")) as f:
            token = f.read().strip()
        port = self.url.rsplit(":", 1)[1]
        self._start(self.args + ["--port", port, "--token", token])

    def stop(self):
        stop_process(self.proc, 10)
        subprocess.run(["rm", "-rf", self.dir])


def stop_process(proc, timeout, sig=signal.SIGTERM):
    """Send sig (SIGTERM), then SIGKILL if proc has not exited within
    timeout seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wait_for(fn, timeout=30, interval=0.05, what="condition"):
    """Poll fn() until it returns a true value; return that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)
