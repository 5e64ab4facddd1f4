"""Scenarios about several kcm instances sharing the work by namespace (--shards)."""

import signal
import time

import re

from harness import (Skip, extra_namespaces, http_get, plain_port, scenario, suite_kcm_stopped,
                     wait_for)
from scenarios_deployment import (IMAGE2, IMAGE3, Watch, deployment, rolling, rs_totals,
                                  wait_complete)

SHARDS = 8
LEASE_S, RENEW_S, RETRY_S = 4, 3, 0.5
REPLICAS, SURGE = 3, 1


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


@scenario("three sharded instances share the namespaces, each shard held by one; killed, "
          "restarted and stopped during rollouts, they hand their shards over (a kill -9 within "
          "the lease duration and a retry, a SIGTERM at once), no Deployment's ReplicaSets "
          "exceed replicas + maxSurge, and no pod is created twice")
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
        started, watches = {}, []

        def start(name):
            started[name] = env.own_kcm(d, extra=args, log_name="shard-%s.log" % name)
            wait_for(lambda: _identity(started[name]), timeout=30,
                     what="instance %s to start its shards" % name)
            return _identity(started[name])

        def spread():
            h = _holders(ctx, prefix)
            counts = sorted(list(h.values()).count(i) for i in ids)
            return len(h) == SHARDS and counts == [2, 3, 3]
        try:
            ids = {start(name): name for name in "abc"}
            wait_for(spread, timeout=30, interval=0.2,
                     what="the %d shards spread 3, 3, 2 over three instances" % SHARDS)
            for space in spaces:
                space.apply(deployment("web", REPLICAS, strategy=rolling(SURGE, 0)))
            for space in spaces:
                wait_complete(space, "web")
            _check_caches(ctx, prefix, spaces, started, ids)
            watches = [Watch(space, "replicasets").started() for space in spaces]

            # A rollout, and a kill -9 of the instance holding the most during
            # it: its shards wait out their Leases.
            for space in spaces:
                space.k("set", "image", "deployment/web", "c=" + IMAGE2)
            holders = _holders(ctx, prefix)
            victim = max(ids, key=lambda i: list(holders.values()).count(i))
            lost = sorted(s for s, h in holders.items() if h == victim)
            started.pop(ids.pop(victim)).stop(signal.SIGKILL)
            killed = time.monotonic()

            def taken_over():
                h = _holders(ctx, prefix)
                return all(h.get(s) not in (None, victim) for s in lost)
            limit = LEASE_S + RETRY_S * 2.2 + 2
            wait_for(taken_over, timeout=limit, interval=0.05,
                     what="the killed instance's shards taken within the lease and a retry")
            took_kill = time.monotonic() - killed
            assert took_kill >= LEASE_S - 1, "a live shard taken after %.1f s" % took_kill
            # Restarted, it joins: the others drain down to its share.
            ids[start("d")] = "d"
            wait_for(spread, timeout=30, interval=0.2, what="the shards spread again")
            for space in spaces:
                wait_complete(space, "web", rev=2, timeout=60)

            # Another rollout, and a SIGTERM during it: the shards are
            # released and taken at the next round.
            for space in spaces:
                space.k("set", "image", "deployment/web", "c=" + IMAGE3)
            holders = _holders(ctx, prefix)
            leaving = next(i for i in ids if ids[i] != "d")
            survivor = [i for i in ids if i != leaving]
            moving = sorted(s for s, h in holders.items() if h == leaving)
            assert started.pop(ids.pop(leaving)).stop() == 0
            stopped = time.monotonic()
            wait_for(lambda: all(_holders(ctx, prefix).get(s) in survivor for s in moving),
                     timeout=RETRY_S * 2.2 + 2, interval=0.05,
                     what="the stopped instance's shards taken at the next round")
            took_term = time.monotonic() - stopped
            for space in spaces:
                wait_complete(space, "web", rev=3, timeout=60)
            _check_rollouts(env, spaces, [w.stop() for w in watches])
            watches = []
            print("    kill -9: %d shards served again after %.2f s; SIGTERM: %d after %.2f s; "
                  "namespaces in shards %s" % (len(lost), took_kill, len(moving), took_term,
                                              sorted({_shard_of(s.ns) for s in spaces})))
        finally:
            for w in watches:
                w.stop()
            for kcm in started.values():
                kcm.stop()


def _check_caches(ctx, prefix, spaces, started, ids):
    """Each instance holds what the Leases say, and caches only its shards:
    it read and dropped the objects of the others' namespaces."""
    holders = _holders(ctx, prefix)
    for i, name in ids.items():
        kcm = started[name]
        mine = {k for k, h in holders.items() if h == i}
        assert _metric(kcm, "kcm_shards_held") == len(mine)
        # No instance leads: the alerts on leader election must not count
        # three leaders.
        assert _metric(kcm, "leader_election_master_status") is None, name
        # It says it drops the others' objects itself, as its log does.
        assert _metric(kcm, "kcm_shards_server_selected") == 0, name
        assert "the objects of other namespaces are dropped as they are read" in kcm.text()
        if any(_shard_of(s.ns) not in mine for s in spaces):
            wait_for(lambda: _metric(kcm, "kcm_shards_objects_dropped_total") > 0,
                     timeout=10, what="%s to drop the objects of others' shards" % name)


def _check_rollouts(env, spaces, rs_events):
    """At every ReplicaSet change the Deployment's ReplicaSets held at most
    replicas + maxSurge; and, as the audit log shows, each of the three
    rollouts (the first included) created exactly one pod per replica."""
    for space, events in zip(spaces, rs_events):
        d = space.k.json("get", "deployment", "web")
        for specs in rs_totals(events, d["metadata"]["uid"]):
            assert sum(specs.values()) <= REPLICAS + SURGE, "%s: ReplicaSets at %s" % (
                space.ns, specs)
    if getattr(env, "audit_log", None):
        creates = {s.ns: 0 for s in spaces}
        for e in env.audit(*creates):
            if e["verb"] == "create" and e["objectRef"]["resource"] == "pods" and \
                    not e["objectRef"].get("subresource") and e.get("stage") in (
                        None, "ResponseComplete") and \
                    e.get("responseStatus", {}).get("code") == 201:
                creates[e["objectRef"]["namespace"]] += 1
        assert set(creates.values()) == {3 * REPLICAS}, "pods created for %d each: %s" % (
            3 * REPLICAS, creates)
