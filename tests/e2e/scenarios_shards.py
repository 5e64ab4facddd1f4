"""Scenarios about several kcm instances sharing the work by namespace (--shards)."""

import signal
import time

import re

from harness import (Skip, extra_namespaces, http_get, plain_port, scenario, suite_kcm_stopped,
                     wait_for)
from scenarios_replicaset import rs_manifest, wait_replicas

SHARDS = 8
LEASE_S, RENEW_S, RETRY_S = 4, 3, 0.5


SUFFIXES = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")


def _shard_of(namespace):
    """As kcm_shards_of: FNV-1a 64, MurmurHash3's finalizer, equal ranges."""
    m = (1 << 64) - 1
    h = 0xcbf29ce484222325
    for b in namespace.encode():
        h = ((h ^ b) * 0x100000001b3) & m
    for mult in (0xff51afd7ed558ccd, 0xc4ceb9fe1a85ec53):
        h = ((h ^ (h >> 33)) * mult) & m
    h ^= h >> 33
    return h * SHARDS >> 64


def _holders(ctx, prefix):
    """shard -> holder of the shards' Leases (absent: none)."""
    items = ctx.k.json("get", "leases")["items"]
    out = {}
    for lease in items:
        name = lease["metadata"]["name"]
        if name.startswith(prefix + "-shard-"):
            holder = (lease.get("spec") or {}).get("holderIdentity") or ""
            if holder:
                out[int(name.rsplit("-", 1)[1])] = holder
    return out


def _metric(kcm, name):
    code, body = http_get(plain_port(kcm, "metrics"), "/metrics")
    assert code == 200, body
    m = re.search(r"^%s(?:\{[^}]*\})? (\S+)$" % name, body, re.M)
    return float(m.group(1)) if m else None


def _identity(kcm):
    for line in kcm.text().splitlines():
        if "sharing the work by namespace" in line:
            return line.split('identity="', 1)[1].split('"', 1)[0]
    return None


@scenario("three sharded instances share the namespaces, each shard held by one; a kill -9 "
          "hands its shards over within the lease duration and a retry, a SIGTERM at once, "
          "and every ReplicaSet keeps its replicas")
def sharded_instances(ctx):
    env = ctx.env
    if env.kcm is None or not env.is_kcm:
        raise Skip("kcm itself is run and inspected")
    prefix = ctx.ns
    # The Leases in the scenario's namespace: a namespace of their own, as
    # manifests/sharded has them.
    args = ["--shards=%d" % SHARDS, "--leader-elect-resource-name=" + prefix,
            "--leader-elect-resource-namespace=" + ctx.ns,
            "--leader-elect-lease-duration=%ds" % LEASE_S,
            "--leader-elect-renew-deadline=%ds" % RENEW_S,
            "--leader-elect-retry-period=%gs" % RETRY_S]
    env.allow_lease(namespace=ctx.ns)
    with suite_kcm_stopped(ctx, "kcm-after-shards.log") as d, extra_namespaces(ctx, *SUFFIXES) as spaces:
        started = {}
        try:
            for name in "abc":
                started[name] = env.own_kcm(d, extra=args, log_name="shard-%s.log" % name)
            wait_for(lambda: all(_identity(k) for k in started.values()), timeout=30,
                     what="every instance to start its shards")
            ids = {_identity(k): name for name, k in started.items()}

            def spread():
                h = _holders(ctx, prefix)
                counts = sorted(list(h.values()).count(i) for i in ids)
                return len(h) == SHARDS and counts == [2, 3, 3]
            wait_for(spread, timeout=30, interval=0.2,
                     what="the %d shards spread 3, 3, 2 over three instances" % SHARDS)
            for space in spaces:
                space.apply(rs_manifest("web", 2))
            for space in spaces:
                wait_replicas(space, "web", 2)
            # Each holds what the Leases say, and caches only its shards: it
            # read and dropped the pods of the others' namespaces.
            holders = _holders(ctx, prefix)
            mine = {i: {_shard_of(s.ns) for s in spaces} & {
                k for k, h in holders.items() if h == i} for i in ids}
            for i, name in ids.items():
                kcm = started[name]
                assert _metric(kcm, "kcm_shards_held") == list(holders.values()).count(i)
                others = sum(1 for s in spaces if _shard_of(s.ns) not in mine[i])
                if others:
                    wait_for(lambda: _metric(kcm, "kcm_shards_objects_dropped_total") > 0,
                             timeout=10, what="%s to drop the objects of others' shards" % name)

            # kill -9 of the instance holding the most: its shards wait out their Leases.
            holders = _holders(ctx, prefix)
            victim = max(ids, key=lambda i: list(holders.values()).count(i))
            lost = sorted(s for s, h in holders.items() if h == victim)
            started[ids[victim]].stop(signal.SIGKILL)
            killed = time.monotonic()

            def taken_over():
                h = _holders(ctx, prefix)
                return all(h.get(s) not in (None, victim) for s in lost)
            limit = LEASE_S + RETRY_S * 2.2 + 2
            wait_for(taken_over, timeout=limit, interval=0.05,
                     what="the killed instance's shards taken within the lease and a retry")
            took_kill = time.monotonic() - killed
            assert took_kill >= LEASE_S - 1, "a live shard taken after %.1f s" % took_kill
            for space in spaces:
                space.k("scale", "rs", "web", "--replicas=3")
            for space in spaces:
                wait_replicas(space, "web", 3)

            # SIGTERM: the shards are released and taken at the next listing.
            holders = _holders(ctx, prefix)
            survivor = [i for i in ids if i != victim]
            leaving = survivor[0]
            moving = sorted(s for s, h in holders.items() if h == leaving)
            assert started[ids[leaving]].stop() == 0
            stopped = time.monotonic()
            wait_for(lambda: all(_holders(ctx, prefix).get(s) == survivor[1] for s in moving),
                     timeout=RETRY_S * 2.2 + 2, interval=0.05,
                     what="the stopped instance's shards taken at the next round")
            took_term = time.monotonic() - stopped
            for space in spaces:
                space.k("scale", "rs", "web", "--replicas=1")
            for space in spaces:
                wait_replicas(space, "web", 1)
            if getattr(env, "audit_log", None):
                for space in spaces:
                    creates = [e for e in env.audit(space.ns)
                               if e["verb"] == "create" and e["objectRef"]["resource"] == "pods"
                               and e.get("responseStatus", {}).get("code") == 201]
                    assert len(creates) == 3, "%s: %d pods created for 3" % (space.ns,
                                                                              len(creates))
            print("    kill -9: %d shards served again after %.2f s; SIGTERM: %d after %.2f s; "
                  "namespaces in shards %s" % (len(lost), took_kill, len(moving), took_term,
                                              sorted({_shard_of(s.ns) for s in spaces})))
        finally:
            for kcm in started.values():
                kcm.stop()
