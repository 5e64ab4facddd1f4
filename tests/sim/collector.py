"""The controllers that kube-apiserver relies on and this server stands in for:
the garbage collector (background, foreground and orphan propagation through
ownerReferences) and the namespace controller (emptying a terminating
namespace, then finalizing it).

Store events arrive through a listener with the store lock held, so they are
only queued here; a worker thread acts on them through the Api.
"""

import collections
import threading

import resources
from api import ApiError


class Collector:
    def __init__(self, api):
        self.api = api
        self.store = api.store
        self.cond = threading.Condition()
        self.queue = collections.deque()
        self.stopped = False
        self.store.listeners.append(self.on_event)
        self.thread = threading.Thread(target=self.run, name="collector", daemon=True)

    def start(self):
        self.thread.start()

    def stop(self):
        with self.cond:
            self.stopped = True
            self.cond.notify()

    def _push(self, item):
        with self.cond:
            self.queue.append(item)
            self.cond.notify()

    def on_event(self, plural, ev):
        obj = ev.entry.obj
        meta = obj["metadata"]
        if ev.type == "DELETED":
            self._push(("owner-gone", meta.get("uid")))
            for ref in meta.get("ownerReferences") or []:
                self._push(("finalize", ref.get("uid")))
            ns = meta.get("namespace")
            if ns:
                self._push(("namespace", ns))
            return
        if ev.type == "ADDED" and meta.get("ownerReferences"):
            self._push(("dependent", plural, (meta.get("namespace") or "", meta["name"])))
        if meta.get("deletionTimestamp"):
            if plural == "namespaces":
                self._push(("namespace", meta["name"]))
            elif {"orphan", "foregroundDeletion"} & set(meta.get("finalizers") or []):
                self._push(("finalize", meta.get("uid")))

    def run(self):
        self.api.ctx.manager = "kube-controller-manager"
        while True:
            with self.cond:
                while not self.queue and not self.stopped:
                    self.cond.wait()
                if self.stopped:
                    return
                item = self.queue.popleft()
            try:
                getattr(self, "do_" + item[0].replace("-", "_"))(*item[1:])
            except ApiError:
                pass  # a conflict or a vanished object; a later event retries

    # --- garbage collection -------------------------------------------------------

    def do_owner_gone(self, uid):
        with self.api.lock:
            deps = list(self.store.dependents.get(uid, ()))
        for plural, key in deps:
            self.do_dependent(plural, key)

    def do_dependent(self, plural, key):
        """Delete an object whose owners are all gone; drop refs to missing owners."""
        res = resources.BY_PLURAL[plural]
        with self.api.lock:
            entry = self.store.get(plural, key)
            if entry is None:
                return
            refs = entry.obj["metadata"].get("ownerReferences") or []
            absent = {r.get("uid") for r in refs if self._owner(r, key[0]) is None}
            if not absent:
                return
            if len(absent) == len(refs):
                if not entry.obj["metadata"].get("deletionTimestamp"):
                    self.api.delete(res, key[0], key[1],
                                    {"propagationPolicy": "Background",
                                     "preconditions": {"uid": entry.obj["metadata"]["uid"]}})
                return

            def drop(o):
                o["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") not in absent]
            self.api.mutate(res, key, drop)

    def _owner(self, ref, namespace):
        plural, key, entry = self.store.by_uid(ref.get("uid"))
        if entry is None:
            return None
        if key[0] and key[0] != namespace:
            return None  # owners must live in the dependent's namespace
        return entry

    def do_finalize(self, uid):
        """Carry out the orphan and foregroundDeletion finalizers of a deleting owner."""
        with self.api.lock:
            plural, key, entry = self.store.by_uid(uid)
            if entry is None or not entry.obj["metadata"].get("deletionTimestamp"):
                return
            finalizers = entry.obj["metadata"].get("finalizers") or []
            deps = list(self.store.dependents.get(uid, ()))
            res = resources.BY_PLURAL[plural]
            if "orphan" in finalizers:
                for dplural, dkey in deps:
                    def unown(o):
                        o["metadata"]["ownerReferences"] = [
                            r for r in o["metadata"].get("ownerReferences") or []
                            if r.get("uid") != uid]
                        if not o["metadata"]["ownerReferences"]:
                            del o["metadata"]["ownerReferences"]
                    self.api.mutate(resources.BY_PLURAL[dplural], dkey, unown)
                self._drop_finalizer(res, key, "orphan")
                return
            if "foregroundDeletion" not in finalizers:
                return
            blocking = 0
            for dplural, dkey in deps:
                dentry = self.store.get(dplural, dkey)
                if dentry is None:
                    continue
                dmeta = dentry.obj["metadata"]
                if any(r.get("uid") == uid and r.get("blockOwnerDeletion")
                       for r in dmeta.get("ownerReferences") or []):
                    blocking += 1
                if not dmeta.get("deletionTimestamp"):
                    self.api.delete(resources.BY_PLURAL[dplural], dkey[0], dkey[1],
                                    {"propagationPolicy": "Foreground"})
            if blocking == 0:
                self._drop_finalizer(res, key, "foregroundDeletion")

    def _drop_finalizer(self, res, key, name):
        def drop(o):
            fins = [f for f in o["metadata"].get("finalizers") or [] if f != name]
            if fins:
                o["metadata"]["finalizers"] = fins
            else:
                o["metadata"].pop("finalizers", None)
        self.api.mutate(res, key, drop)

    # --- namespace controller ---------------------------------------------------

    def do_namespace(self, name):
        with self.api.lock:
            ns = self.store.get("namespaces", ("", name))
            if ns is None or not ns.obj["metadata"].get("deletionTimestamp"):
                return
            remaining = []
            for res in resources.ALL:
                if res.namespaced:
                    remaining += [(res, k, e) for k, e in self.store.items(res.plural, name)]
            if not remaining:
                self.api.finalize_namespace(name)
                return
            for res, key, entry in remaining:
                if not entry.obj["metadata"].get("deletionTimestamp"):
                    self.api.delete(res, key[0], key[1], {"propagationPolicy": "Background"})
