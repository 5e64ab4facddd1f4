"""A fake scheduler and kubelet: binds each new pod to one of a few fake
nodes, reports it Pending with its containers being created, then after a
delay Running and Ready, and finishes graceful deletions.

Pods whose image contains the not-ready marker stay Pending in
ImagePullBackOff, as with an image that cannot be pulled. Pods whose image
contains "crashloop" run and never get ready, their containers in
CrashLoopBackOff after three restarts. Pods whose image contains the fail
marker (and not "crashloop") start and then fail (phase Failed).
"""

import heapq
import itertools
import threading
import time

import resources
from api import ApiError, key_of, now_rfc3339

PODS = resources.BY_PLURAL["pods"]
NODES = resources.BY_PLURAL["nodes"]


class Kubelet:
    def __init__(self, api, nodes=3, ready_delay=1.0, terminate_delay=0.5,
                 not_ready_marker="bad", fail_marker="crash"):
        self.api = api
        self.nodes = ["node-%d" % (i + 1) for i in range(nodes)]
        self.ready_delay = ready_delay
        self.terminate_delay = terminate_delay
        self.not_ready_marker = not_ready_marker
        self.fail_marker = fail_marker
        self.cond = threading.Condition()
        self.heap = []
        self.seq = itertools.count()
        self.next_node = itertools.cycle(range(max(1, nodes)))
        self.next_ip = itertools.count(2)
        self.stopped = False
        api.store.listeners.append(self.on_event)
        self.thread = threading.Thread(target=self.run, name="kubelet", daemon=True)

    def configure(self, body):
        if not isinstance(body, dict):
            raise ValueError("body must be an object")
        for field in ("readyDelay", "terminateDelay"):
            if field in body:
                value = float(body[field])
                if value < 0:
                    raise ValueError("%s must be >= 0" % field)
                setattr(self, "ready_delay" if field == "readyDelay" else "terminate_delay", value)
        if "notReadyMarker" in body:
            self.not_ready_marker = str(body["notReadyMarker"])
        if "failMarker" in body:
            self.fail_marker = str(body["failMarker"])

    def describe(self):
        return {"nodes": self.nodes, "readyDelay": self.ready_delay,
                "terminateDelay": self.terminate_delay, "notReadyMarker": self.not_ready_marker,
                "failMarker": self.fail_marker}

    def start(self):
        self.api.ctx.manager = "kubelet"
        for i, name in enumerate(self.nodes):
            self._register_node(name, i)
        self._resume()
        self.thread.start()

    def _resume(self):
        """Started again on kept state: take up each pod where it was."""
        for key, entry in self.api.store.items("pods"):
            pod = entry.obj
            meta, spec = pod["metadata"], pod.get("spec") or {}
            phase = (pod.get("status") or {}).get("phase")
            if meta.get("deletionTimestamp"):
                grace = meta.get("deletionGracePeriodSeconds") or 0
                self._schedule(min(grace, self.terminate_delay), "kill", key, meta.get("uid"))
            elif not spec.get("nodeName"):
                self._schedule(0, "bind", key, meta.get("uid"))
            elif not phase:
                self._schedule(0, "accept", key, meta.get("uid"))
            elif phase == "Pending":
                self._schedule(self.ready_delay, "start", key, meta.get("uid"))

    def stop(self):
        with self.cond:
            self.stopped = True
            self.cond.notify()

    def _register_node(self, name, i):
        try:
            self.api.create(NODES, "", {
                "kind": "Node", "apiVersion": "v1",
                "metadata": {"name": name, "labels": {
                    "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64"}},
                "spec": {"podCIDR": "10.244.%d.0/24" % (i + 1)},
            })
        except ApiError:
            pass
        now = now_rfc3339()

        def ready(o):
            o["status"] = {
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": now,
                                "lastTransitionTime": now, "reason": "KubeletReady",
                                "message": "kubelet is posting ready status"}],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.%d" % (i + 1)},
                              {"type": "Hostname", "address": name}],
                "nodeInfo": {"kubeletVersion": "v1.31.0-kcmsim", "osImage": "Debian GNU/Linux 12",
                             "kernelVersion": "6.1.0", "containerRuntimeVersion": "fake://1.0",
                             "operatingSystem": "linux", "architecture": "amd64"},
            }
        self.api.mutate(NODES, ("", name), ready, subresource="status")

    # --- events -------------------------------------------------------------------

    def _schedule(self, delay, action, key, uid):
        with self.cond:
            heapq.heappush(self.heap, (time.monotonic() + delay, next(self.seq), action, key, uid))
            self.cond.notify()

    def on_event(self, plural, ev):
        if plural != "pods" or ev.type == "DELETED":
            return
        obj = ev.entry.obj
        meta = obj["metadata"]
        key, uid = key_of(obj), meta.get("uid")
        old = ev.old
        if meta.get("deletionTimestamp"):
            if old is None or not old["metadata"].get("deletionTimestamp"):
                grace = meta.get("deletionGracePeriodSeconds") or 0
                self._schedule(min(grace, self.terminate_delay), "kill", key, uid)
            return
        node = (obj.get("spec") or {}).get("nodeName")
        old_node = ((old or {}).get("spec") or {}).get("nodeName")
        if ev.type == "ADDED" and not node:
            self._schedule(0, "bind", key, uid)
        elif node and not old_node and node in self.nodes:
            self._schedule(0, "accept", key, uid)

    def run(self):
        self.api.ctx.manager = "kubelet"
        while True:
            with self.cond:
                while not self.stopped:
                    now = time.monotonic()
                    if self.heap and self.heap[0][0] <= now:
                        break
                    self.cond.wait(self.heap[0][0] - now if self.heap else None)
                if self.stopped:
                    return
                _, _, action, key, uid = heapq.heappop(self.heap)
            try:
                getattr(self, "do_" + action)(key, uid)
            except ApiError:
                pass  # the pod changed or went away meanwhile

    # --- actions --------------------------------------------------------------------

    def _live(self, key, uid):
        entry = self.api.store.get("pods", key)
        if entry is None or entry.obj["metadata"].get("uid") != uid:
            return None
        return entry.obj

    def do_bind(self, key, uid):
        with self.api.lock:
            pod = self._live(key, uid)
            if pod is None or pod["metadata"].get("deletionTimestamp") or \
                    (pod.get("spec") or {}).get("nodeName"):
                return
            node = self.nodes[next(self.next_node)] if self.nodes else "node-1"
            self.api.bind(key[0], key[1], {"metadata": {"name": key[1]},
                                           "target": {"kind": "Node", "name": node}})

    def _images(self, pod):
        return [c.get("image", "") for c in (pod.get("spec") or {}).get("containers") or []]

    def do_accept(self, key, uid):
        """The kubelet saw the pod: Pending, containers being created."""
        n = next(self.next_ip)
        now = now_rfc3339()

        def pending(o):
            spec = o.get("spec") or {}
            idx = self.nodes.index(spec["nodeName"]) + 1 if spec.get("nodeName") in self.nodes \
                else 1
            st = o.setdefault("status", {})
            st["phase"] = "Pending"
            st["hostIP"] = "10.0.0.%d" % idx
            st["podIP"] = "10.244.%d.%d" % (idx, n % 250 + 2)
            st["podIPs"] = [{"ip": st["podIP"]}]
            st["startTime"] = now
            names = [c.get("name") for c in spec.get("containers") or []]
            st["conditions"] = _conditions(st.get("conditions"), now, initialized=True,
                                           ready=False, names=names)
            st["containerStatuses"] = [{
                "name": c.get("name"), "state": {"waiting": {"reason": "ContainerCreating"}},
                "lastState": {}, "ready": False, "restartCount": 0, "image": c.get("image"),
                "imageID": "", "started": False} for c in spec.get("containers") or []]
        with self.api.lock:
            if self._live(key, uid) is None:
                return
            self.api.mutate(PODS, key, pending, subresource="status")
        self._schedule(self.ready_delay, "start", key, uid)

    def do_start(self, key, uid):
        now = now_rfc3339()
        with self.api.lock:
            pod = self._live(key, uid)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                return
            images = self._images(pod)
            bad = bool(self.not_ready_marker) and any(self.not_ready_marker in i for i in images)
            loop = not bad and any("crashloop" in i for i in images)
            fail = not loop and bool(self.fail_marker) and \
                any(self.fail_marker in i for i in images)

            def running(o):
                st = o["status"]
                spec = o.get("spec") or {}
                names = [c.get("name") for c in spec.get("containers") or []]
                statuses = []
                for c in spec.get("containers") or []:
                    cs = {"name": c.get("name"), "lastState": {}, "restartCount": 0,
                          "image": c.get("image"), "imageID": "", "ready": False,
                          "started": False}
                    if bad:
                        cs["state"] = {"waiting": {"reason": "ImagePullBackOff",
                                                   "message": 'Back-off pulling image "%s"'
                                                              % c.get("image")}}
                    elif loop:
                        cs.update({"restartCount": 3, "lastState": {"terminated": {
                            "exitCode": 1, "reason": "Error", "startedAt": now,
                            "finishedAt": now, "containerID": _cid(o, c)}},
                            "state": {"waiting": {
                                "reason": "CrashLoopBackOff",
                                "message": "back-off 40s restarting failed container=%s"
                                           % c.get("name")}}})
                    elif fail:
                        cs["state"] = {"terminated": {"exitCode": 1, "reason": "Error",
                                                      "startedAt": now, "finishedAt": now,
                                                      "containerID": _cid(o, c)}}
                        cs["containerID"] = _cid(o, c)
                        cs["imageID"] = _image_id(c.get("image"))
                    else:
                        cs.update({"state": {"running": {"startedAt": now}}, "ready": True,
                                   "started": True, "imageID": _image_id(c.get("image")),
                                   "containerID": _cid(o, c)})
                    statuses.append(cs)
                st["containerStatuses"] = statuses
                if fail:
                    st["phase"] = "Failed"
                elif not bad:
                    st["phase"] = "Running"
                st["conditions"] = _conditions(st.get("conditions"), now, initialized=True,
                                               ready=not bad and not fail and not loop,
                                               names=names,
                                               failed=fail)
            self.api.mutate(PODS, key, running, subresource="status")

    def do_kill(self, key, uid):
        with self.api.lock:
            pod = self._live(key, uid)
            if pod is None:
                return
            self.api.delete(PODS, key[0], key[1],
                            {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})


def _cid(pod, c):
    import hashlib
    h = hashlib.sha256(("%s/%s" % (pod["metadata"]["uid"], c.get("name"))).encode()).hexdigest()
    return "containerd://" + h


def _image_id(image):
    import hashlib
    repo = (image or "").split("@")[0].rsplit(":", 1)[0] if ":" in (image or "").rsplit(
        "/", 1)[-1] else (image or "")
    return "%s@sha256:%s" % (repo, hashlib.sha256((image or "").encode()).hexdigest())


def _conditions(old, now, initialized, ready, names, failed=False):
    """PodScheduled/Initialized/ContainersReady/Ready, keeping transition times."""
    prev = {c.get("type"): c for c in old or []}

    def cond(ctype, ok, reason=None, message=None):
        c = {"type": ctype, "status": "True" if ok else "False", "lastProbeTime": None}
        p = prev.get(ctype)
        c["lastTransitionTime"] = p["lastTransitionTime"] if p and p.get("status") == c[
            "status"] else now
        if not ok and reason:
            c["reason"] = reason
            c["message"] = message
        return c

    unready = "containers with unready status: [%s]" % " ".join(names)
    reason = "PodFailed" if failed else "ContainersNotReady"
    return [cond("Initialized", initialized),
            cond("Ready", ready, reason, unready if not failed else ""),
            cond("ContainersReady", ready, reason, unready if not failed else ""),
            cond("PodScheduled", True)]
