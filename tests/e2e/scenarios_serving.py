"""Scenarios for kcm's secure port: what anyone may read, what needs a
user the API server vouches for and authorizes, and what a flood of
connections cannot take away from a probe."""

import os
import re
import resource
import socket
import ssl
import time

from harness import Skip, scenario, wait_for

# A TLS record header and the start of a ClientHello that never ends.
HALF_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"


def _kcm_port(ctx):
    kcm = ctx.env.kcm
    if kcm is None or not kcm.secure_port:
        return None
    return kcm.secure_port


def https_get(port, path, token=None, source=None, cert=None, timeout=10):
    """GET https://127.0.0.1:port/path without verifying the server (as
    `curl -k`), from a chosen source address; returns (status, body,
    seconds)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(*cert)
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                  source_address=(source, 0) if source else None) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            head = "GET %s HTTP/1.1\r\nHost: localhost\r\n" % path
            if token:
                head += "Authorization: Bearer %s\r\n" % token
            s.sendall((head + "\r\n").encode())
            return _answer(s, start)


def _cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _percentile(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def http_get(port, path, source=None, timeout=10):
    """GET http://127.0.0.1:port/path from a chosen source address;
    returns (status, body, seconds)."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                  source_address=(source, 0) if source else None) as s:
        s.sendall(("GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n" % path).encode())
        return _answer(s, start)


def _answer(s, start):
    """Read an answer to its end: (status, body, seconds since start)."""
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(), time.monotonic() - start


def _flood_and_probe(port, first_bytes, probe):
    """Hold 1,000 connections from 127.0.0.1 (every other one sends
    first_bytes and stops), probe 30 times from 127.0.0.2 and 30 times from
    127.0.0.1, then wait for the held ones to be dropped. Returns the probe
    times from each peer and how long the drop took."""
    held, other, same = [], [], []
    try:
        for i in range(1000):
            s = socket.create_connection(("127.0.0.1", port), timeout=10,
                                         source_address=("127.0.0.1", 0))
            if i % 2:
                s.sendall(first_bytes)
            held.append(s)
        for _ in range(30):
            status, body, seconds = probe("/healthz", "127.0.0.2")
            assert (status, body) == (200, "ok"), (status, body)
            other.append(seconds)
            status, body, seconds = probe("/readyz", "127.0.0.1")
            assert (status, body) == (200, "ok"), (status, body)
            same.append(seconds)
        start = time.monotonic()
        for s in held:
            s.settimeout(max(0.1, 15 - (time.monotonic() - start)))
            try:
                assert s.recv(1024) == b""
            except ConnectionResetError:
                pass
        return other, same, time.monotonic() - start
    finally:
        for s in held:
            s.close()


@scenario("probes are answered under a second while 1,000 idle and half-open connections "
          "from one peer are held open, on the secure port and on the plain one")
def flood(ctx):
    port = _kcm_port(ctx)
    if port is None:
        raise Skip("kcm's own ports are probed")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 1200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    kcm = ctx.env.kcm
    m = wait_for(lambda: re.search(r'serving health probes address="127.0.0.1:(\d+)"',
                                   kcm.text()), timeout=10, what="kcm's plain health port")
    plain_port = int(m.group(1))
    wait_for(lambda: https_get(port, "/healthz")[0] == 200, timeout=30,
             what="kcm's secure port to answer")
    for name, target, first_bytes, get in (
            ("secure port", port, HALF_HELLO, https_get),
            ("plain health port", plain_port, b"GET /healthz HTTP/1.1\r\nX: ", http_get)):
        cpu = _cpu_seconds(kcm.proc.pid)
        other, same, dropped = _flood_and_probe(
            target, first_bytes, lambda path, source: get(target, path, source=source))
        cpu = _cpu_seconds(kcm.proc.pid) - cpu
        print("    %s, 1,000 connections held: probes from another peer p50 %.1f ms, max "
              "%.1f ms; from the flooding peer p50 %.1f ms, max %.1f ms; kcm CPU %.2f s; "
              "the held ones dropped within %.1f s"
              % (name, 1000 * _percentile(other, 0.5), 1000 * max(other),
                 1000 * _percentile(same, 0.5), 1000 * max(same), cpu, dropped))
        assert max(other) < 1.0 and max(same) < 1.0, (name, other, same)
