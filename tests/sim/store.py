"""Versioned object storage for the local API server, in the manner of etcd
plus kube-apiserver's watch cache.

Every write takes the next value of one increasing resourceVersion counter.
Each resource keeps a bounded log of its watch events; a watch that starts
from a version older than the log reaches gets 410 Expired. Paginated lists
read from a snapshot taken at the list's resourceVersion, so later pages are
consistent with the first; compaction drops the snapshots.

Stored objects are never mutated after they are stored: writers build a new
dict, and the JSON text of each object is kept beside it so that lists and
watch events are served without re-encoding.
"""

import bisect
import json
import os
import threading
import time


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"))


class Expired(Exception):
    """The requested resourceVersion is no longer available."""

    def __init__(self, requested, oldest):
        super().__init__("too old resource version: %d (%d)" % (requested, oldest))
        self.requested = requested
        self.oldest = oldest


class Entry:
    __slots__ = ("obj", "raw", "_item_raw", "pb")

    def __init__(self, obj):
        self.obj = obj
        self.raw = dumps(obj).encode()
        self._item_raw = None
        self.pb = None  # the protobuf message, once a client asked for it

    @property
    def item_raw(self):
        """The JSON text as a list item: without kind and apiVersion."""
        if self._item_raw is None:
            head = dumps({"kind": self.obj.get("kind"),
                          "apiVersion": self.obj.get("apiVersion")}).encode()[:-1] + b","
            if self.raw.startswith(head):
                self._item_raw = b"{" + self.raw[len(head):]
            else:
                item = {k: v for k, v in self.obj.items() if k not in ("kind", "apiVersion")}
                self._item_raw = dumps(item).encode()
        return self._item_raw


class Snapshot:
    """A resource's objects at one resourceVersion, sorted by key."""

    __slots__ = ("keys", "entries")

    def __init__(self, pairs):
        self.keys = [k for k, _ in pairs]
        self.entries = [e for _, e in pairs]


class Event:
    __slots__ = ("rv", "type", "entry", "old", "ts")

    def __init__(self, rv, etype, entry, old, ts):
        self.rv, self.type, self.entry, self.old, self.ts = rv, etype, entry, old, ts


class Log:
    """The watch history of one resource: events in increasing rv order."""

    __slots__ = ("rvs", "events", "compacted")

    def __init__(self):
        self.rvs = []
        self.events = []
        self.compacted = 0  # watches must start at or after this rv


class Store:
    def __init__(self, plurals, max_events=100000):
        self.cond = threading.Condition(threading.RLock())
        self.rv = 1
        self.objects = {p: {} for p in plurals}
        self.logs = {p: Log() for p in plurals}
        self.uids = {}  # uid -> (plural, key)
        self.dependents = {}  # owner uid -> {(plural, key)}
        self.listeners = []  # fn(plural, Event), called with the lock held
        self.max_events = max_events
        self.snapshots = {}  # (plural, rv) -> Snapshot
        self.drop_epoch = 0  # bumped to make every open watch drop its connection
        self.watch_delay = 0.0  # seconds each watch event is held back
        self.journal = None  # every write, a JSON line each, when the state is kept
        self.peaks = {}  # uid -> the most spec.replicas any stored version had

    # --- kept state ------------------------------------------------------------

    def keep(self, path):
        """Keep every write in the file at `path`, as etcd keeps a real API
        server's: load what it holds first (objects and the resourceVersion,
        with no watch history, as a restarted server's watch cache has none),
        then append each write and flush it, so a killed server loses none."""
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    try:
                        op, plural, key, value = json.loads(line)
                    except ValueError:
                        break  # the last line, cut short when the server was killed
                    key = tuple(key)
                    old = self.objects[plural].get(key)
                    if op == "put":
                        self.objects[plural][key] = Entry(value)
                        self._peak(value)
                        self.uids[value["metadata"].get("uid")] = (plural, key)
                        rv = int(value["metadata"]["resourceVersion"])
                    else:
                        del self.objects[plural][key]
                        self.uids.pop(old.obj["metadata"].get("uid"), None)
                        rv = value
                    self._index_owners(plural, key, old.obj if old else None,
                                       value if op == "put" else None)
                    self.rv = max(self.rv, rv)
            self.uids.pop(None, None)
            for log in self.logs.values():
                log.compacted = self.rv
        self.journal = open(path, "a")

    def _journal(self, op, plural, key, value):
        if self.journal:
            self.journal.write(dumps([op, plural, list(key), value]) + "\n")
            self.journal.flush()

    # --- reads -----------------------------------------------------------------

    def get(self, plural, key):
        return self.objects[plural].get(key)

    def by_uid(self, uid):
        ref = self.uids.get(uid)
        if ref is None:
            return None, None, None
        plural, key = ref
        return plural, key, self.objects[plural].get(key)

    def items(self, plural, namespace=None):
        objs = self.objects[plural]
        if namespace is None:
            return list(objs.items())
        return [(k, e) for k, e in objs.items() if k[0] == namespace]

    def snapshot(self, plural, rv=None):
        """A sorted, consistent view of a resource at `rv` (default: now)."""
        if rv is None:
            rv = self.rv
            snap = self.snapshots.get((plural, rv))
            if snap is None:
                snap = Snapshot(sorted(self.objects[plural].items(), key=lambda kv: kv[0]))
                if len(self.snapshots) >= 32:
                    self.snapshots.pop(next(iter(self.snapshots)))
                self.snapshots[(plural, rv)] = snap
            return snap
        snap = self.snapshots.get((plural, rv))
        if snap is None:
            raise Expired(rv, self.logs[plural].compacted)
        return snap

    # --- writes ----------------------------------------------------------------

    def next_rv(self):
        self.rv += 1
        return self.rv

    def put(self, plural, key, obj):
        """Store `obj` (whose metadata.resourceVersion the caller set to next_rv())."""
        rv = int(obj["metadata"]["resourceVersion"])
        old = self.objects[plural].get(key)
        entry = Entry(obj)
        self.objects[plural][key] = entry
        uid = obj["metadata"].get("uid")
        if uid:
            self.uids[uid] = (plural, key)
        self._index_owners(plural, key, old.obj if old else None, obj)
        self._peak(obj)
        self._journal("put", plural, key, obj)
        self._append(plural, Event(rv, "MODIFIED" if old else "ADDED", entry,
                                   old.obj if old else None, time.monotonic()))
        return entry

    def remove(self, plural, key, final):
        """Remove the object at `key`; `final` is its last state with a new rv."""
        old = self.objects[plural].pop(key)
        uid = old.obj["metadata"].get("uid")
        if uid:
            self.uids.pop(uid, None)
        self._index_owners(plural, key, old.obj, None)
        self._journal("delete", plural, key, int(final["metadata"]["resourceVersion"]))
        entry = Entry(final)
        self._append(plural, Event(int(final["metadata"]["resourceVersion"]), "DELETED", entry,
                                   old.obj, time.monotonic()))
        return entry

    def _peak(self, obj):
        """Note the object's spec.replicas, for tests that bound what a
        controller did by what it was ever asked for."""
        replicas = (obj.get("spec") or {}).get("replicas")
        uid = obj["metadata"].get("uid")
        if uid and isinstance(replicas, int):
            self.peaks[uid] = max(self.peaks.get(uid, replicas), replicas)

    def _index_owners(self, plural, key, old, new):
        def uids(o):
            if o is None:
                return set()
            return {r.get("uid") for r in (o["metadata"].get("ownerReferences") or [])
                    if isinstance(r, dict) and r.get("uid")}
        before, after = uids(old), uids(new)
        for u in before - after:
            deps = self.dependents.get(u)
            if deps:
                deps.discard((plural, key))
                if not deps:
                    del self.dependents[u]
        for u in after - before:
            self.dependents.setdefault(u, set()).add((plural, key))

    def _append(self, plural, event):
        log = self.logs[plural]
        log.rvs.append(event.rv)
        log.events.append(event)
        if len(log.events) > self.max_events:
            cut = len(log.events) // 10 or 1
            log.compacted = log.rvs[cut - 1]
            del log.rvs[:cut]
            del log.events[:cut]
        if event.type != "RAW":
            for fn in self.listeners:
                fn(plural, event)
        self.cond.notify_all()

    # --- watch support -----------------------------------------------------------

    def events_since(self, plural, rv):
        """Events of `plural` with resourceVersion > rv; Expired if history is gone."""
        log = self.logs[plural]
        if rv < log.compacted:
            raise Expired(rv, log.compacted + 1)
        i = bisect.bisect_right(log.rvs, rv)
        return log.events[i:]

    def inject(self, plural, line):
        """Send a raw line to every watch of `plural` (a malformed event, say)."""
        with self.cond:
            self._append(plural, Event(self.next_rv(), "RAW", line, None, time.monotonic()))

    def latest(self, plural):
        """The resourceVersion of the newest event of `plural` (0 if none)."""
        log = self.logs[plural]
        return log.rvs[-1] if log.rvs else log.compacted

    def compact(self):
        """Forget all history: watches and continue tokens from before now expire."""
        with self.cond:
            for log in self.logs.values():
                log.compacted = self.rv
                log.rvs.clear()
                log.events.clear()
            self.snapshots.clear()

    def drop_watches(self):
        with self.cond:
            self.drop_epoch += 1
            self.cond.notify_all()
