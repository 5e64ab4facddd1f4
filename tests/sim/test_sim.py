"""Tests of the local API server: it must answer as kube-apiserver does where
kubectl and the controllers depend on it.

Each test class starts one server as a child process; each test works in its
own namespace.
"""

import http.client
import ipaddress
import itertools
import json
import os
import shutil
import tempfile
import time
import unittest

from simclient import Client, SimProcess, wait_for

APPS = "/apis/apps/v1/namespaces/%s/deployments"
RS = "/apis/apps/v1/namespaces/%s/replicasets"
PODS = "/api/v1/namespaces/%s/pods"
SVCS = "/api/v1/namespaces/%s/services"

_ns_counter = itertools.count(1)


def deployment(name, labels=None, replicas=None, image="nginx:1.7.9", **spec):
    labels = labels or {"app": name}
    d = {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": name},
         "spec": {"selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels},
                               "spec": {"containers": [{"name": "c", "image": image,
                                                        "ports": [{"containerPort": 80}]}]}}}}
    if replicas is not None:
        d["spec"]["replicas"] = replicas
    d["spec"].update(spec)
    return d


def pod(name, labels=None, image="nginx:1.7.9", **meta):
    p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
         "spec": {"containers": [{"name": "c", "image": image}]}}
    p["metadata"].update(meta)
    if COMPARE:
        # No scheduler of a real cluster binds it, so no node agent writes it.
        p["spec"]["schedulerName"] = "kcm-test-unscheduled"
    return p


def service(name, ports=None, **spec):
    s = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
         "spec": {"selector": {"app": name}, "ports": [{"port": 80}] if ports is None else ports}}
    s["spec"].update(spec)
    return s


# With KCM_SIM_COMPARE_KUBECONFIG set, the Basics tests run against that
# (real) API server instead, to check that the local one answers alike.
# Tests that need faults, the fake kubelet or the controllers that run
# beside a real API server (garbage collector, namespaces) are skipped.
COMPARE = os.environ.get("KCM_SIM_COMPARE_KUBECONFIG")


def fields(data):
    """A protobuf message's fields, in order: (number, bytes or int)."""
    out, i = [], 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v
    while i < len(data):
        tag = varint()
        if tag & 7 == 0:
            out.append((tag >> 3, varint()))
        elif tag & 7 == 2:
            n = varint()
            out.append((tag >> 3, data[i:i + n]))
            i += n
        else:
            raise ValueError("unexpected wire type %d" % (tag & 7))
    return out


def field(msg, number):
    """The first field `number` of msg (a message's bytes or its fields)."""
    if isinstance(msg, bytes):
        msg = fields(msg)
    return next((v for f, v in msg if f == number), None)


def unwrap(body):
    """kube-apiserver's protobuf envelope: the kind and the object's bytes."""
    assert body[:4] == b"k8s\x00", body[:16]
    unknown = fields(body[4:])
    return field(field(unknown, 1), 2).decode(), field(unknown, 2)


def sim_only(fn):
    return unittest.skipIf(COMPARE, "needs the local API server")(fn)


class SimTestCase(unittest.TestCase):
    args = ("--bookmark-interval", "1")

    @classmethod
    def setUpClass(cls):
        if COMPARE:
            cls.sim = None
            cls.c = Client.from_kubeconfig(COMPARE)
            return
        cls.sim = SimProcess(*cls.args)
        cls.c = cls.sim.client

    @classmethod
    def tearDownClass(cls):
        if cls.sim:
            cls.sim.stop()

    def setUp(self):
        self.ns = "t%d-%d" % (os.getpid(), next(_ns_counter))
        r = self.c.post("/api/v1/namespaces", {"metadata": {"name": self.ns}})
        self.assertEqual(r.status, 201, r.body)
        if COMPARE:
            # A real cluster's service account controller would make this.
            self.c.post("/api/v1/namespaces/%s/serviceaccounts" % self.ns,
                        {"metadata": {"name": "default"}})
        else:
            self.c.faults(clear=True)

    def create(self, path, obj, status=201):
        r = self.c.post(path % self.ns, obj)
        self.assertEqual(r.status, status, r.body)
        return r.json()

    def assertStatus(self, r, code, reason):
        self.assertEqual(r.status, code, r.body)
        body = r.json()
        self.assertEqual(body["kind"], "Status")
        self.assertEqual(body["status"], "Failure")
        self.assertEqual(body["code"], code)
        self.assertEqual(body.get("reason"), reason)
        return body


class Basics(SimTestCase):
    def test_a_kubeconfig_may_name_its_ca_by_file(self):
        """certificate-authority, a path relative to the kubeconfig's
        directory as kubectl reads it, as well as certificate-authority-data."""
        if COMPARE:
            self.skipTest("the local API server's own files")
        d = tempfile.mkdtemp(prefix="kcm-kubeconfig-")
        try:
            shutil.copy(os.path.join(self.sim.dir, "ca.crt"), os.path.join(d, "the-ca.crt"))
            with open(os.path.join(self.sim.dir, "token")) as f:
                token = f.read().strip()
            path = os.path.join(d, "kubeconfig")
            with open(path, "w") as f:
                f.write("clusters:\n- name: c\n  cluster:\n    server: %s\n"
                        "    certificate-authority: the-ca.crt\n"
                        "users:\n- name: u\n  user:\n    token: %s\n" % (self.sim.url, token))
            r = Client.from_kubeconfig(path).get("/api/v1/namespaces/" + self.ns)
            self.assertEqual(r.status, 200, r.body)
        finally:
            shutil.rmtree(d)

    def test_discovery_lists_resources_and_subresources(self):
        groups = self.c.get("/apis").json()
        self.assertIn("apps", [g["name"] for g in groups["groups"]])
        res = {r["name"]: r for r in self.c.get("/apis/apps/v1").json()["resources"]}
        self.assertEqual(res["deployments"]["kind"], "Deployment")
        self.assertIn("watch", res["deployments"]["verbs"])
        self.assertEqual(res["deployments/scale"]["group"], "autoscaling")
        self.assertEqual(res["deployments/scale"]["kind"], "Scale")
        core = {r["name"] for r in self.c.get("/api/v1").json()["resources"]}
        self.assertTrue({"pods", "pods/status", "pods/binding", "events", "namespaces"} <= core)
        self.assertEqual(self.c.get("/api").json()["versions"], ["v1"])

    def test_authentication(self):
        self.assertEqual(self.c.get("/version", token=False).status, 200)
        r = self.c.get("/api/v1/namespaces", token=False)
        self.assertStatus(r, 403, "Forbidden")
        r = self.c.get("/api/v1/namespaces", token=False,
                       headers={"Authorization": "Bearer wrong"})
        self.assertStatus(r, 401, "Unauthorized")

    def test_create_sets_metadata_and_defaults(self):
        d = self.create(APPS, deployment("web"))
        meta = d["metadata"]
        self.assertEqual(len(meta["uid"]), 36)
        self.assertTrue(int(meta["resourceVersion"]) > 0)
        self.assertEqual(meta["generation"], 1)
        self.assertRegex(meta["creationTimestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        spec = d["spec"]
        self.assertEqual(spec["replicas"], 1)
        self.assertEqual(spec["strategy"], {"type": "RollingUpdate", "rollingUpdate": {
            "maxUnavailable": "25%", "maxSurge": "25%"}})
        self.assertEqual(spec["revisionHistoryLimit"], 10)
        self.assertEqual(spec["progressDeadlineSeconds"], 600)
        tspec = spec["template"]["spec"]
        self.assertEqual(tspec["restartPolicy"], "Always")
        self.assertEqual(tspec["terminationGracePeriodSeconds"], 30)
        self.assertEqual(tspec["dnsPolicy"], "ClusterFirst")
        self.assertEqual(tspec["containers"][0]["imagePullPolicy"], "IfNotPresent")
        self.assertEqual(tspec["containers"][0]["ports"][0]["protocol"], "TCP")
        # A zero time is left out (omitzero), as kube-apiserver 1.34 and later write
        # it, also when a client sends it as null (kubectl before 1.34 does).
        self.assertNotIn("creationTimestamp", spec["template"]["metadata"])
        sent = deployment("zero")
        sent["spec"]["template"]["metadata"]["creationTimestamp"] = None
        kept = self.create(APPS, sent)["spec"]["template"]["metadata"]
        self.assertNotIn("creationTimestamp", kept)
        self.assertEqual(d["status"], {})
        rs = self.create(RS, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                              "metadata": {"name": "r"},
                              "spec": deployment("r")["spec"]})
        self.assertEqual(rs["spec"]["replicas"], 1)
        self.assertNotIn("strategy", rs["spec"])
        # Zero values of omitempty fields are not stored.
        body = deployment("z")
        body["spec"].update(minReadySeconds=0, paused=False)
        spec = self.create(APPS, body)["spec"]
        self.assertNotIn("minReadySeconds", spec)
        self.assertNotIn("paused", spec)
        body["metadata"]["name"] = "z2"
        body["spec"].update(minReadySeconds=5, paused=True)
        spec = self.create(APPS, body)["spec"]
        self.assertEqual((spec["minReadySeconds"], spec["paused"]), (5, True))

    def test_wire_format_details(self):
        self.create(APPS, deployment("web"))
        rs = self.create(RS, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                              "metadata": {"name": "r"}, "spec": deployment("r")["spec"]})
        self.assertEqual(rs["status"], {"replicas": 0})
        items = self.c.get(APPS % self.ns).json()["items"]
        self.assertNotIn("kind", items[0])
        self.assertNotIn("apiVersion", items[0])
        mf = items[0]["metadata"]["managedFields"][0]
        self.assertEqual((mf["operation"], mf["fieldsType"]), ("Update", "FieldsV1"))
        self.assertIn("f:spec", mf["fieldsV1"])
        r = self.c.delete(APPS % self.ns + "/web")
        self.assertEqual(r.status, 200, r.body)
        st = r.json()
        self.assertEqual((st["kind"], st["status"]), ("Status", "Success"))
        self.assertEqual(st["details"]["kind"], "deployments")
        self.assertEqual(st["details"]["uid"], items[0]["metadata"]["uid"])
        p = self.create(PODS, pod("p"))
        mounts = p["spec"]["containers"][0]["volumeMounts"]
        self.assertEqual(mounts[0]["mountPath"], "/var/run/secrets/kubernetes.io/serviceaccount")
        self.assertTrue(p["spec"]["volumes"][0]["name"].startswith("kube-api-access-"))
        self.create(PODS, pod("q"))
        token = self.c.get(PODS % self.ns + "?limit=1").json()["metadata"]["continue"]
        r = self.c.get(PODS % self.ns + "?limit=1&resourceVersion=1&continue=" + token)
        body = self.assertStatus(r, 400, "BadRequest")
        self.assertEqual(body["message"],
                         "specifying resource version is not allowed when using continue")

    def test_managed_fields_sent_are_kept_as_the_server_keeps_them(self):
        def entry(manager, when, owned, sub=None, **extra):
            e = {"manager": manager, "operation": "Update", "apiVersion": "apps/v1",
                 "time": when, "fieldsType": "FieldsV1", "fieldsV1": owned}
            if sub:
                e["subresource"] = sub
            e.update(extra)
            return e

        def entries(obj):
            return sorted((e["manager"], e.get("subresource", ""), e.get("time", ""))
                          for e in obj["metadata"].get("managedFields") or [])

        forged = entry("kube-controller-manager", "2099-01-01T00:00:00Z",
                       {"f:status": {"f:readyReplicas": {}}}, "status")
        # On a create, a sent entry loses the fields the object has; one
        # left with fields the object lacks stays, its time as sent.
        body = deployment("web")
        body["metadata"]["managedFields"] = [
            forged, entry("x", "2020-01-01T00:00:00Z", {"f:spec": {"f:replicas": {}}})]
        d = self.create(APPS, body)
        got = entries(d)
        self.assertEqual(len(got), 2, got)
        self.assertIn(("kube-controller-manager", "status", "2099-01-01T00:00:00Z"), got)
        creator = [m for m, sub, _ in got if not sub][0]
        # An update of the object itself replaces the stored entries with a
        # list that decodes; the writer's entry joins it.
        path = APPS % self.ns + "/web"
        d["metadata"]["labels"] = {"app": "web", "team": "a"}
        d["metadata"]["managedFields"] = [entry("evil", "2098-01-01T00:00:00Z",
                                                {"f:status": {"f:replicas": {}}}, "status")]
        r = self.c.put(path, d)
        self.assertEqual(r.status, 200, r.body)
        got = entries(r.json())
        self.assertIn(("evil", "status", "2098-01-01T00:00:00Z"), got)
        self.assertNotIn("kube-controller-manager", [m for m, _, _ in got])
        self.assertEqual(len(got), 2, got)
        # A status write ignores the entries it sends.
        r = self.c.patch(path + "/status", {"metadata": {"managedFields": []},
                                            "status": {"observedGeneration": 1}})
        self.assertEqual(r.status, 200, r.body)
        self.assertIn(("evil", "status", "2098-01-01T00:00:00Z"), entries(r.json()))
        self.assertIn(creator, [m for m, sub, _ in entries(r.json()) if sub == "status"])
        # A list that does not decode is ignored; one that decodes with a
        # manager over 128 bytes is refused, once the write has kept it (an
        # entry left without fields is dropped first).
        d = r.json()
        d["metadata"]["labels"]["team"] = "b"
        d["metadata"]["managedFields"] = [entry("bogus", "2098-01-01T00:00:00Z", {},
                                                operation="Bogus")]
        r = self.c.put(path, d)
        self.assertEqual(r.status, 200, r.body)
        self.assertNotIn("bogus", [m for m, _, _ in entries(r.json())])
        d = r.json()
        d["metadata"]["managedFields"] = [entry("m" * 129, "2098-01-01T00:00:00Z", {
            "f:metadata": {"f:labels": {"f:app": {}}}})]
        body = self.assertStatus(self.c.put(path, d), 422, "Invalid")
        self.assertEqual(body["details"]["causes"][0]["field"],
                         "metadata.managedFields[0].manager")
        # An empty list resets them: none are left, not even the writer's.
        d["metadata"]["labels"]["team"] = "c"
        d["metadata"]["managedFields"] = []
        r = self.c.put(path, d)
        self.assertEqual(r.status, 200, r.body)
        self.assertNotIn("managedFields", r.json()["metadata"])

    def test_status_counts_are_bounded(self):
        self.create(APPS, deployment("web"))
        rs = self.create(RS, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                              "metadata": {"name": "r"}, "spec": deployment("r")["spec"]})
        for path, status, field, msg in (
                (RS % self.ns + "/r/status", {"replicas": 1, "readyReplicas": 2},
                 "status.readyReplicas", "cannot be greater than status.replicas"),
                (RS % self.ns + "/r/status", {"replicas": 2, "readyReplicas": 1,
                                              "availableReplicas": 2},
                 "status.availableReplicas", "cannot be greater than readyReplicas"),
                (RS % self.ns + "/r/status", {"replicas": -1}, "status.replicas",
                 "must be greater than or equal to 0"),
                (APPS % self.ns + "/web/status", {"replicas": 1, "updatedReplicas": 2},
                 "status.updatedReplicas", "cannot be greater than status.replicas"),
                (APPS % self.ns + "/web/status", {"replicas": 2, "readyReplicas": 1,
                                                  "availableReplicas": 2},
                 "status.availableReplicas", "cannot be greater than readyReplicas")):
            body = self.assertStatus(self.c.patch(path, {"status": status}), 422, "Invalid")
            self.assertIn("%s: Invalid value" % field, body["message"])
            self.assertIn(msg, body["message"])
        r = self.c.patch(RS % self.ns + "/r/status", {"status": {"replicas": 2, "readyReplicas": 2,
                                                                 "availableReplicas": 1}})
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(rs["metadata"]["name"], "r")

    def test_terminating_replicas_are_kept_where_the_gate_is_on(self):
        """status.terminatingReplicas, 0 included (a pointer in Go): kept
        from 1.35, where DeploymentReplicaSetTerminatingReplicas is on;
        dropped on writes before, unless the stored status has it."""
        version = self.c.get("/version").json()
        kept = not COMPARE or int(version["minor"].rstrip("+")) >= 35
        self.create(APPS, deployment("web"))
        self.create(RS, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                         "metadata": {"name": "r"}, "spec": deployment("r")["spec"]})
        for path in (RS % self.ns + "/r/status", APPS % self.ns + "/web/status"):
            r = self.c.patch(path, {"status": {"terminatingReplicas": 0}})
            self.assertEqual(r.status, 200, r.body)
            self.assertEqual(r.json()["status"].get("terminatingReplicas"), 0 if kept else None)
            self.assertEqual(self.c.get(path).json()["status"].get("terminatingReplicas"),
                             0 if kept else None)
        if kept:
            body = self.assertStatus(self.c.patch(RS % self.ns + "/r/status",
                                                  {"status": {"terminatingReplicas": -1}}),
                                     422, "Invalid")
            self.assertIn("status.terminatingReplicas: Invalid value: -1: must be greater than "
                          "or equal to 0", body["message"])

    def test_times_are_decoded_like_the_server(self):
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "l"},
                 "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15,
                          "acquireTime": "2026-11-22T08:00:00.123456+02:00",
                          "renewTime": "2026-11-22T06:00:05.654321Z"}}
        got = self.create("/apis/coordination.k8s.io/v1/namespaces/%s/leases", lease)
        self.assertEqual(got["spec"]["acquireTime"], "2026-11-22T06:00:00.123456Z")
        self.assertEqual(got["spec"]["renewTime"], "2026-11-22T06:00:05.654321Z")
        lease["metadata"]["name"] = "l2"
        lease["spec"]["renewTime"] = "2026-11-22T06:00:05Z"
        body = self.assertStatus(
            self.c.post("/apis/coordination.k8s.io/v1/namespaces/%s/leases" % self.ns, lease),
            400, "BadRequest")
        self.assertIn('Lease in version "v1" cannot be handled as a Lease: parsing time',
                      body["message"])
        self.create(APPS, deployment("web"))
        r = self.c.patch(APPS % self.ns + "/web/status", {"status": {"conditions": [{
            "type": "Available", "status": "True",
            "lastUpdateTime": "2026-11-22T06:00:05.999Z",
            "lastTransitionTime": "2026-11-22T08:00:05+02:00"}]}})
        self.assertEqual(r.status, 200, r.body)
        cond = r.json()["status"]["conditions"][0]
        self.assertEqual(cond["lastUpdateTime"], "2026-11-22T06:00:05Z")
        self.assertEqual(cond["lastTransitionTime"], "2026-11-22T06:00:05Z")

    def test_reads_ahead_of_the_server_time_out(self):
        future = str(int(self.c.get(APPS % self.ns).json()["metadata"]["resourceVersion"]) + 10**6)
        body = self.assertStatus(self.c.get(APPS % self.ns + "?resourceVersion=" + future), 504,
                                 "Timeout")
        self.assertIn("Too large resource version", body["message"])
        self.assertEqual(body["details"]["causes"][0]["reason"], "ResourceVersionTooLarge")

    def test_generate_name(self):
        p = self.create(PODS, pod("", generateName="web-"))
        name = p["metadata"]["name"]
        self.assertRegex(name, r"^web-[bcdfghjklmnpqrstvwxz2456789]{5}$")
        long = self.create(PODS, pod("", generateName="x" * 70))
        self.assertEqual(len(long["metadata"]["name"]), 63)

    def test_create_conflicts_and_not_found(self):
        self.create(APPS, deployment("web"))
        body = self.assertStatus(self.c.post(APPS % self.ns, deployment("web")), 409,
                                 "AlreadyExists")
        self.assertEqual(body["message"], 'deployments.apps "web" already exists')
        self.assertEqual(body["details"], {"name": "web", "group": "apps", "kind": "deployments"})
        body = self.assertStatus(self.c.get(APPS % self.ns + "/nope"), 404, "NotFound")
        self.assertEqual(body["message"], 'deployments.apps "nope" not found')
        body = self.assertStatus(self.c.post(APPS % "no-such-ns", deployment("x")), 404,
                                 "NotFound")
        self.assertEqual(body["message"], 'namespaces "no-such-ns" not found')

    def test_a_write_refused_before_its_body_is_read_leaves_the_connection_usable(self):
        r = self.c.post(PODS % self.ns + "/a", pod("a", labels={"pad": "x" * 60}))
        self.assertStatus(r, 405, "MethodNotAllowed")
        r = self.c.get("/api/v1/namespaces/" + self.ns)  # the same connection
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["metadata"]["name"], self.ns)

    def test_stale_update_conflicts(self):
        d = self.create(APPS, deployment("web"))
        fresh = dict(d, spec=dict(d["spec"], replicas=3))
        r = self.c.put(APPS % self.ns + "/web", fresh)
        self.assertEqual(r.status, 200, r.body)
        new_rv = r.json()["metadata"]["resourceVersion"]
        self.assertGreater(int(new_rv), int(d["metadata"]["resourceVersion"]))
        stale = dict(d, spec=dict(d["spec"], replicas=5))
        body = self.assertStatus(self.c.put(APPS % self.ns + "/web", stale), 409, "Conflict")
        self.assertIn("the object has been modified", body["message"])
        self.assertEqual(self.c.get(APPS % self.ns + "/web").json()["spec"]["replicas"], 3)

    def test_generation_moves_on_spec_and_deployment_annotations_only(self):
        path = APPS % self.ns + "/web"
        self.create(APPS, deployment("web"))

        def gen():
            return self.c.get(path).json()["metadata"]["generation"]
        self.c.patch(path, {"metadata": {"labels": {"x": "y"}}})
        self.assertEqual(gen(), 1)
        self.c.patch(path, {"metadata": {"annotations": {"a": "b"}}})
        self.assertEqual(gen(), 2)
        self.c.patch(path, {"spec": {"replicas": 4}})
        self.assertEqual(gen(), 3)
        self.c.patch(path + "/status", {"status": {"replicas": 4}})
        self.assertEqual(gen(), 3)
        rs = RS % self.ns
        self.create(RS, {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"},
                         "spec": deployment("r")["spec"]})
        self.c.patch(rs + "/r", {"metadata": {"annotations": {"a": "b"}}})
        self.assertEqual(self.c.get(rs + "/r").json()["metadata"]["generation"], 1)

    def test_unchanged_write_keeps_resource_version(self):
        d = self.create(APPS, deployment("web"))
        r = self.c.patch(APPS % self.ns + "/web", {"spec": {"replicas": 1}})
        self.assertEqual(r.json()["metadata"]["resourceVersion"], d["metadata"]["resourceVersion"])

    def test_status_subresource_keeps_spec_and_main_update_keeps_status(self):
        path = APPS % self.ns + "/web"
        d = self.create(APPS, deployment("web"))
        d["spec"]["replicas"] = 9
        d["metadata"]["labels"] = {"changed": "yes"}
        d["status"] = {"observedGeneration": 1, "replicas": 2}
        r = self.c.put(path + "/status", d)
        self.assertEqual(r.status, 200, r.body)
        got = r.json()
        self.assertEqual(got["spec"]["replicas"], 1)
        self.assertNotIn("labels", got["metadata"])
        self.assertEqual(got["status"]["replicas"], 2)
        got["status"] = {"replicas": 7}
        got["spec"]["replicas"] = 2
        r = self.c.put(path, got)
        self.assertEqual(r.json()["status"]["replicas"], 2)
        self.assertEqual(r.json()["spec"]["replicas"], 2)

    def test_validation_errors(self):
        bad = deployment("web")
        bad["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
        body = self.assertStatus(self.c.post(APPS % self.ns, bad), 422, "Invalid")
        self.assertIn('Deployment.apps "web" is invalid', body["message"])
        self.assertEqual(body["details"]["kind"], "Deployment")
        self.assertIn("spec.template.metadata.labels",
                      [c["field"] for c in body["details"]["causes"]])
        self.assertIn("`selector` does not match template `labels`", body["message"])

        self.create(APPS, deployment("web"))
        cur = self.c.get(APPS % self.ns + "/web").json()
        cur["spec"]["selector"] = {"matchLabels": {"app": "web", "x": "y"}}
        cur["spec"]["template"]["metadata"]["labels"]["x"] = "y"
        body = self.assertStatus(self.c.put(APPS % self.ns + "/web", cur), 422, "Invalid")
        self.assertIn("field is immutable", body["message"])

        zero = deployment("z", strategy={"type": "RollingUpdate", "rollingUpdate": {
            "maxSurge": 0, "maxUnavailable": 0}})
        body = self.assertStatus(self.c.post(APPS % self.ns, zero), 422, "Invalid")
        self.assertIn("may not be 0 when `maxSurge` is 0", body["message"])

        empty = deployment("e")
        empty["spec"]["template"]["spec"]["containers"] = []
        body = self.assertStatus(self.c.post(APPS % self.ns, empty), 422, "Invalid")
        self.assertIn("spec.template.spec.containers: Required value", body["message"])

    def test_annotations_total_at_most_256_kib(self):
        # 50,000 keys "a00000".. with 0-byte values: 300,000 bytes, refused
        # as the real server refuses them; at 262,144 bytes exactly, kept.
        big = deployment("big")
        big["metadata"]["annotations"] = {"a%05d" % i: "" for i in range(50000)}
        body = self.assertStatus(self.c.post(APPS % self.ns, big), 422, "Invalid")
        self.assertIn("metadata.annotations: Too long: may not be more than 262144 bytes",
                      body["message"])
        fits = deployment("fits")
        fits["metadata"]["annotations"] = {"k": "\u00e9" * ((262144 - 1) // 2)}
        r = self.c.post(APPS % self.ns, fits)
        self.assertEqual(r.status, 201, r.body)
        over = deployment("over")
        over["metadata"]["annotations"] = {"k": "\u00e9" * (262144 // 2)}  # 2 bytes each
        self.assertStatus(self.c.post(APPS % self.ns, over), 422, "Invalid")

    def test_bad_input_gets_status_codes(self):
        r = self.c.post(APPS % self.ns, b'{"kind":')
        self.assertStatus(r, 400, "BadRequest")
        # Nesting past the reader's depth (10,000 levels for kube-apiserver)
        body = self.assertStatus(self.c.post(APPS % self.ns, b"[" * 10001 + b"]" * 10001), 400,
                                 "BadRequest")
        self.assertIn("exceeded max depth", body["message"])
        r = self.c.post(APPS % self.ns, b"name: x", content_type="text/plain")
        self.assertStatus(r, 415, "UnsupportedMediaType")
        body = self.assertStatus(self.c.post(APPS % self.ns, pod("p")), 400, "BadRequest")
        self.assertEqual(body["message"], 'Pod in version "v1" cannot be handled as a Deployment: '
                         'converting (v1.Pod) to (apps.Deployment): unknown conversion')
        self.create(APPS, deployment("web"))
        body = self.assertStatus(self.c.put(APPS % self.ns + "/web", deployment("other")), 400,
                                 "BadRequest")
        self.assertIn("does not match the name on the URL", body["message"])
        body = self.assertStatus(self.c.get(PODS % self.ns + "?labelSelector=app%20in%20("),
                                 400, "BadRequest")
        self.assertIn("unable to parse requirement", body["message"])
        body = self.assertStatus(
            self.c.get(APPS % self.ns + "?fieldSelector=spec.replicas%3D1"), 400, "BadRequest")
        self.assertEqual(body["message"], '"spec.replicas" is not a known field selector: only '
                                          '"metadata.name", "metadata.namespace"')
        body = self.assertStatus(self.c.get(PODS % self.ns + "?fieldSelector=spec.foo%3D1"), 400,
                                 "BadRequest")
        self.assertEqual(body["message"], "field label not supported: spec.foo")
        r = self.c.patch(APPS % self.ns + "/web", b"{not json")
        self.assertStatus(r, 400, "BadRequest")
        r = self.c.patch(APPS % self.ns + "/web", {"spec": {}}, ptype="application/json")
        self.assertStatus(r, 415, "UnsupportedMediaType")
        r = self.c.patch(APPS % self.ns + "/web",
                         [{"op": "test", "path": "/spec/replicas", "value": 7}], ptype="json")
        self.assertStatus(r, 422, "Invalid")
        r = self.c.get("/apis/apps/v1/namespaces/%s/widgets" % self.ns)
        self.assertStatus(r, 404, "NotFound")
        if not COMPARE:  # the local API server writes protobuf for pods only
            r = self.c.get(APPS % self.ns,
                           headers={"Accept": "application/vnd.kubernetes.protobuf"})
            self.assertStatus(r, 406, "NotAcceptable")

    def test_label_selectors(self):
        for name, labels in (("a", {"app": "web", "tier": "fe"}), ("b", {"app": "web"}),
                             ("c", {"app": "db", "tier": "be"}), ("d", {})):
            self.create(PODS, pod(name, labels))

        def names(selector):
            from urllib.parse import quote
            r = self.c.get(PODS % self.ns + "?labelSelector=" + quote(selector))
            self.assertEqual(r.status, 200, r.body)
            return sorted(i["metadata"]["name"] for i in r.json()["items"])
        self.assertEqual(names("app=web"), ["a", "b"])
        self.assertEqual(names("app==web"), ["a", "b"])
        self.assertEqual(names("app!=web"), ["c", "d"])
        self.assertEqual(names("app in (db, web),tier"), ["a", "c"])
        self.assertEqual(names("tier notin (fe)"), ["b", "c", "d"])
        self.assertEqual(names("tier"), ["a", "c"])
        self.assertEqual(names("!tier"), ["b", "d"])
        self.assertEqual(names(""), ["a", "b", "c", "d"])

    def test_field_selectors(self):
        self.create(PODS, pod("a"))
        self.create(PODS, pod("b"))
        r = self.c.get(PODS % self.ns + "?fieldSelector=metadata.name%3Db")
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["b"])
        r = self.c.get(PODS % self.ns + "?fieldSelector=status.phase%3DPending,"
                       "metadata.name!%3Db")
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["a"])
        r = self.c.get("/api/v1/pods?fieldSelector=metadata.namespace%3D" + self.ns)
        self.assertEqual(len(r.json()["items"]), 2)

    @sim_only
    def test_pagination_is_consistent_and_expires(self):
        for i in range(5):
            self.create(PODS, pod("p%d" % i))
        r = self.c.get(PODS % self.ns + "?limit=2").json()
        self.assertEqual([i["metadata"]["name"] for i in r["items"]], ["p0", "p1"])
        self.assertEqual(r["metadata"]["remainingItemCount"], 3)
        token = r["metadata"]["continue"]
        self.create(PODS, pod("p00"))  # after the snapshot: not in later pages
        r2 = self.c.get(PODS % self.ns + "?limit=2&continue=" + token).json()
        self.assertEqual([i["metadata"]["name"] for i in r2["items"]], ["p2", "p3"])
        self.assertEqual(r2["metadata"]["resourceVersion"], r["metadata"]["resourceVersion"])
        r3 = self.c.get(PODS % self.ns + "?limit=2&continue=" + r2["metadata"]["continue"])
        self.assertEqual([i["metadata"]["name"] for i in r3.json()["items"]], ["p4"])
        self.assertNotIn("continue", r3.json()["metadata"])
        whole = self.c.get(PODS % self.ns + "?resourceVersion=0&limit=2").json()
        self.assertEqual(len(whole["items"]), 6)  # served whole, as from the watch cache
        self.c.faults(compact=True)
        r = self.c.get(PODS % self.ns + "?limit=2&continue=" + token)
        self.assertStatus(r, 410, "Expired")
        r = self.c.get(PODS % self.ns + "?limit=2&continue=garbage!")
        self.assertStatus(r, 400, "BadRequest")

    def test_watch_resumes_from_resource_version(self):
        a = self.create(PODS, pod("a"))
        rv = a["metadata"]["resourceVersion"]
        self.create(PODS, pod("b"))
        self.c.patch(PODS % self.ns + "/a", {"metadata": {"labels": {"x": "1"}}})
        self.c.delete(PODS % self.ns + "/b")
        w = self.c.watch(PODS % self.ns + "?watch=1&resourceVersion=" + rv)
        got = [w.next() for _ in range(4)]
        w.close()
        # A pod's deletion is recorded first (deletionTimestamp), then it goes.
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in got],
                         [("ADDED", "b"), ("MODIFIED", "a"), ("MODIFIED", "b"), ("DELETED", "b")])
        self.assertIn("deletionTimestamp", got[2]["object"]["metadata"])
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in got]
        self.assertEqual(rvs, sorted(rvs))
        self.assertGreater(rvs[0], int(rv))

    def test_pods_in_protobuf(self):
        pb = {"Accept": "application/vnd.kubernetes.protobuf, application/json"}
        a = self.create(PODS, pod("a", {"app": "web"}))
        r = self.c.get(PODS % self.ns + "/a", headers=pb)
        self.assertEqual(r.headers["Content-Type"], "application/vnd.kubernetes.protobuf")
        kind, obj = unwrap(r.body)
        self.assertEqual(kind, "Pod")
        meta = fields(field(obj, 1))
        self.assertEqual(field(meta, 1), b"a")
        self.assertEqual(field(meta, 3), self.ns.encode())
        self.assertEqual(field(meta, 6), a["metadata"]["resourceVersion"].encode())
        self.assertEqual(fields(field(meta, 11)), [(1, b"app"), (2, b"web")])
        # A list: its metadata, then its items.
        r = self.c.get(PODS % self.ns, headers=pb)
        kind, lst = unwrap(r.body)
        self.assertEqual(kind, "PodList")
        want = self.c.get(PODS % self.ns).json()
        self.assertEqual(field(fields(field(lst, 1)), 2),
                         want["metadata"]["resourceVersion"].encode())
        self.assertEqual(len([v for f, v in fields(lst) if f == 2]), 1)
        if not COMPARE:  # kinds without protobuf here are answered in JSON
            r = self.c.get(APPS % self.ns, headers=pb)
            self.assertEqual(r.headers["Content-Type"], "application/json")
            r = self.c.get(APPS % self.ns, headers={"Accept": "application/vnd.kubernetes.protobuf"})
            self.assertStatus(r, 406, "NotAcceptable")
        # Errors come as a Status in protobuf.
        r = self.c.get(PODS % self.ns + "/nope", headers=pb)
        self.assertEqual(r.status, 404)
        kind, st = unwrap(r.body)
        self.assertEqual((kind, field(st, 6)), ("Status", 404))
        self.assertIn(b"not found", field(st, 3))
        # A watch: length-prefixed WatchEvents, each object in its envelope.
        w = self.c.watch(PODS % self.ns + "?watch=1&resourceVersion="
                         + a["metadata"]["resourceVersion"], headers=pb)
        self.assertEqual(w.headers["content-type"],
                         "application/vnd.kubernetes.protobuf;stream=watch")
        self.c.patch(PODS % self.ns + "/a", {"metadata": {"labels": {"x": "1"}}})
        ev = fields(w.next_frame())
        w.close()
        self.assertEqual(field(ev, 1), b"MODIFIED")
        kind, obj = unwrap(field(fields(field(ev, 2)), 1))
        self.assertEqual(kind, "Pod")
        self.assertIn((1, b"x"), fields([v for f, v in fields(field(obj, 1)) if f == 11][1]))

    def test_watch_without_version_starts_with_current_state(self):
        self.create(PODS, pod("a"))
        w = self.c.watch(PODS % self.ns + "?watch=1")
        first = w.next()
        self.assertEqual((first["type"], first["object"]["metadata"]["name"]), ("ADDED", "a"))
        self.create(PODS, pod("b"))
        e = w.next()
        w.close()
        self.assertEqual((e["type"], e["object"]["metadata"]["name"]), ("ADDED", "b"))

    @sim_only
    def test_watch_after_compaction_gets_410(self):
        a = self.create(PODS, pod("a"))
        self.create(PODS, pod("b"))
        self.c.faults(compact=True)
        w = self.c.watch(PODS % self.ns + "?watch=1&resourceVersion="
                         + a["metadata"]["resourceVersion"])
        self.assertEqual(w.status, 200)
        e = w.next()
        self.assertEqual(e["type"], "ERROR")
        self.assertEqual(e["object"]["code"], 410)
        self.assertEqual(e["object"]["reason"], "Expired")
        self.assertIn("too old resource version", e["object"]["message"])
        self.assertIsNone(w.next())
        w.close()

    def test_watch_label_selector_transitions(self):
        self.create(PODS, pod("a", {"app": "web"}))
        w = self.c.watch(PODS % self.ns + "?watch=1&labelSelector=app%3Dweb")
        self.assertEqual(w.next()["type"], "ADDED")
        self.c.patch(PODS % self.ns + "/a", {"metadata": {"labels": {"app": "db"}}})
        e = w.next()
        self.assertEqual(e["type"], "DELETED")
        self.c.patch(PODS % self.ns + "/a", {"metadata": {"labels": {"app": "web"}}})
        self.assertEqual(w.next()["type"], "ADDED")
        w.close()

    def test_watch_bookmarks_and_timeout(self):
        start = time.monotonic()
        # A change elsewhere gives the server a newer version to bookmark.
        other = "%s-other" % self.ns
        self.c.post("/api/v1/namespaces", {"metadata": {"name": other}})
        if COMPARE:
            self.c.post("/api/v1/namespaces/%s/serviceaccounts" % other,
                        {"metadata": {"name": "default"}})
        created = self.c.post(PODS % other, pod("elsewhere")).json()
        w = self.c.watch(PODS % self.ns + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=3")
        # From no version, the (empty) current state ends with a bookmark.
        e = w.next()
        self.assertEqual(e["type"], "BOOKMARK")
        self.assertEqual(e["object"]["kind"], "Pod")
        self.assertEqual(e["object"]["metadata"]["annotations"],
                         {"k8s.io/initial-events-end": "true"})
        self.assertGreaterEqual(int(e["object"]["metadata"]["resourceVersion"]),
                                int(created["metadata"]["resourceVersion"]))
        while True:
            e = w.next()
            if e is None:
                break
            self.assertEqual(e["type"], "BOOKMARK")
        self.assertGreaterEqual(time.monotonic() - start, 2.5)
        w.close()

    def test_streamed_list_sends_the_objects_then_a_bookmark(self):
        a = self.create(PODS, pod("a"))
        b = self.create(PODS, pod("b"))
        stream = PODS % self.ns + ("?watch=1&allowWatchBookmarks=true&resourceVersion=%s"
                                   "&resourceVersionMatch=NotOlderThan&sendInitialEvents=true"
                                   "&timeoutSeconds=5")
        for since in ("", a["metadata"]["resourceVersion"]):
            w = self.c.watch(stream % since)
            self.assertEqual(w.status, 200)
            added = [w.next(), w.next()]
            self.assertEqual([e["type"] for e in added], ["ADDED", "ADDED"])
            self.assertEqual(sorted(e["object"]["metadata"]["name"] for e in added), ["a", "b"])
            e = w.next()
            self.assertEqual(e["type"], "BOOKMARK")
            self.assertEqual(e["object"]["metadata"]["annotations"],
                             {"k8s.io/initial-events-end": "true"})
            self.assertGreaterEqual(int(e["object"]["metadata"]["resourceVersion"]),
                                    int(b["metadata"]["resourceVersion"]))
            self.c.patch(PODS % self.ns + "/a", {"metadata": {"labels": {"since": since or "0"}}})
            e = w.next()
            self.assertEqual((e["type"], e["object"]["metadata"]["name"]), ("MODIFIED", "a"))
            w.close()
        # Checked as kube-apiserver checks ListOptions.
        r = self.c.get(PODS % self.ns + "?watch=1&sendInitialEvents=true")
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                      r.json()["message"])
        r = self.c.get(PODS % self.ns + "?watch=1&resourceVersionMatch=NotOlderThan")
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("resourceVersionMatch is forbidden for watch unless sendInitialEvents is "
                      "provided", r.json()["message"])

    def test_strategic_merge_patch_merges_containers_by_name(self):
        d = deployment("web")
        d["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox:1"})
        self.create(APPS, d)
        path = APPS % self.ns + "/web"
        r = self.c.patch(path, {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "nginx:1.9.1"}]}}}}, ptype="strategic")
        self.assertEqual(r.status, 200, r.body)
        cs = r.json()["spec"]["template"]["spec"]["containers"]
        self.assertEqual([(c["name"], c["image"]) for c in cs],
                         [("c", "nginx:1.9.1"), ("side", "busybox:1")])
        self.assertEqual(cs[0]["ports"], [{"containerPort": 80, "protocol": "TCP"}])
        r = self.c.patch(path, {"spec": {"template": {"spec": {"containers": [
            {"name": "new", "image": "busybox:3"}]}}}}, ptype="strategic")
        self.assertEqual([c["name"] for c in r.json()["spec"]["template"]["spec"]["containers"]],
                         ["new", "c", "side"])  # items new to the list go first
        r = self.c.patch(path, {"spec": {"template": {"spec": {"containers": [
            {"name": "new", "$patch": "delete"}]}}}}, ptype="strategic")
        r = self.c.patch(path, {"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "side"}, {"name": "c"}],
            "containers": [{"name": "side", "image": "busybox:2"}]}}}}, ptype="strategic")
        cs = r.json()["spec"]["template"]["spec"]["containers"]
        self.assertEqual([(c["name"], c["image"]) for c in cs],
                         [("side", "busybox:2"), ("c", "nginx:1.9.1")])
        r = self.c.patch(path, {"spec": {"template": {"spec": {"containers": [
            {"name": "side", "$patch": "delete"}]}}}}, ptype="strategic")
        self.assertEqual([c["name"] for c in r.json()["spec"]["template"]["spec"]["containers"]],
                         ["c"])
        r = self.c.patch(path, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate",
                                                      "rollingUpdate": None}}},
                         ptype="strategic")
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["spec"]["strategy"], {"type": "Recreate"})

    def test_merge_and_json_patch(self):
        self.create(APPS, deployment("web"))
        path = APPS % self.ns + "/web"
        r = self.c.patch(path, {"metadata": {"labels": {"a": "1"}}})
        self.assertEqual(r.json()["metadata"]["labels"], {"a": "1"})
        r = self.c.patch(path, {"metadata": {"labels": None}})
        self.assertNotIn("labels", r.json()["metadata"])
        r = self.c.patch(path, [{"op": "replace", "path": "/spec/replicas", "value": 4},
                                {"op": "add", "path": "/metadata/annotations",
                                 "value": {"k": "v"}}], ptype="json")
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["spec"]["replicas"], 4)
        self.assertEqual(r.json()["metadata"]["annotations"], {"k": "v"})
        r = self.c.patch(path, {"metadata": {"resourceVersion": "1"}, "spec": {"replicas": 2}})
        self.assertStatus(r, 409, "Conflict")

    def test_scale_subresource(self):
        self.create(APPS, deployment("web", replicas=2))
        path = APPS % self.ns + "/web/scale"
        s = self.c.get(path).json()
        self.assertEqual((s["kind"], s["apiVersion"]), ("Scale", "autoscaling/v1"))
        self.assertEqual(s["spec"], {"replicas": 2})
        self.assertEqual(s["status"], {"replicas": 0, "selector": "app=web"})
        r = self.c.patch(path, {"spec": {"replicas": 5}})
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["spec"]["replicas"], 5)
        d = self.c.get(APPS % self.ns + "/web").json()
        self.assertEqual((d["spec"]["replicas"], d["metadata"]["generation"]), (5, 2))
        s["spec"]["replicas"] = 1
        self.assertStatus(self.c.put(path, s), 409, "Conflict")
        s = self.c.get(path).json()
        s["spec"]["replicas"] = -1
        body = self.assertStatus(self.c.put(path, s), 422, "Invalid")
        self.assertIn('Scale.autoscaling "web" is invalid', body["message"])
        s["spec"]["replicas"] = 3
        self.assertEqual(self.c.put(path, s).json()["spec"]["replicas"], 3)
        rs = self.create(RS, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                              "metadata": {"name": "r"}, "spec": deployment("r")["spec"]})
        self.assertEqual(self.c.get(RS % self.ns + "/r/scale").json()["spec"]["replicas"],
                         rs["spec"]["replicas"])

    def test_finalizers_hold_deletion(self):
        path = APPS % self.ns + "/web"
        d = deployment("web")
        d["metadata"]["finalizers"] = ["example.com/hold"]
        self.create(APPS, d)
        r = self.c.delete(path)
        self.assertEqual(r.status, 200, r.body)
        obj = self.c.get(path).json()
        self.assertIn("deletionTimestamp", obj["metadata"])
        self.assertEqual(obj["metadata"]["generation"], 2)
        obj["metadata"]["finalizers"].append("example.com/more")
        body = self.assertStatus(self.c.put(path, obj), 422, "Invalid")
        self.assertIn("no new finalizers can be added", body["message"])
        r = self.c.patch(path, {"metadata": {"finalizers": None}})
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(self.c.get(path).status, 404)

    def test_graceful_pod_deletion_and_preconditions(self):
        p = self.create(PODS, pod("a"))
        path = PODS % self.ns + "/a"
        body = self.assertStatus(self.c.delete(path, {"preconditions": {"uid": "wrong"}}), 409,
                                 "Conflict")
        self.assertIn('Operation cannot be fulfilled on Pod "a": the UID in the precondition '
                      '(wrong) does not match the UID in record', body["message"])
        self.assertEqual(body["details"]["kind"], "Pod")
        r = self.c.post(path + "/binding", {"apiVersion": "v1", "kind": "Binding",
                                            "metadata": {"name": "a"},
                                            "target": {"kind": "Node", "name": "node-9"}})
        self.assertEqual(r.status, 201, r.body)
        r = self.c.post(path + "/binding", {"target": {"kind": "Node", "name": "node-8"}})
        body = self.assertStatus(r, 400, "BadRequest")
        self.assertEqual(body["message"], "name in URL does not match name in Binding object")
        r = self.c.post(path + "/binding", {"metadata": {"name": "a"},
                                            "target": {"kind": "Node", "name": "node-8"}})
        body = self.assertStatus(r, 409, "Conflict")
        self.assertEqual(body["message"], 'Operation cannot be fulfilled on pods/binding "a": pod a '
                                          'is already assigned to node "node-9"')
        r = self.c.delete(path)
        self.assertEqual(r.status, 200, r.body)
        meta = r.json()["metadata"]
        self.assertEqual(meta["deletionGracePeriodSeconds"], 30)
        self.assertEqual(self.c.get(path).status, 200)
        r = self.c.delete(path + "?gracePeriodSeconds=0")
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(self.c.get(path).status, 404)
        self.create(PODS, pod("unbound"))
        self.assertEqual(self.c.delete(PODS % self.ns + "/unbound").status, 200)
        self.assertEqual(self.c.get(PODS % self.ns + "/unbound").status, 404)
        self.assertTrue(p["metadata"]["uid"])

    def _owned_chain(self):
        d = self.create(APPS, deployment("web"))
        ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
               "uid": d["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        rs = self.create(RS, {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                              "metadata": {"name": "web-1", "ownerReferences": [ref]},
                              "spec": deployment("web")["spec"]})
        pref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                "uid": rs["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}
        self.create(PODS, pod("web-1-a", {"app": "web"}, ownerReferences=[pref]))

    @sim_only
    def test_background_garbage_collection(self):
        self._owned_chain()
        r = self.c.delete(APPS % self.ns + "/web", {"propagationPolicy": "Background"})
        self.assertEqual(r.status, 200, r.body)
        wait_for(lambda: self.c.get(RS % self.ns + "/web-1").status == 404, what="RS collected")
        wait_for(lambda: self.c.get(PODS % self.ns + "/web-1-a").status == 404,
                 what="pod collected")

    @sim_only
    def test_orphan_garbage_collection(self):
        self._owned_chain()
        r = self.c.delete(APPS % self.ns + "/web", {"propagationPolicy": "Orphan"})
        self.assertIn(r.status, (200, 202), r.body)
        wait_for(lambda: self.c.get(APPS % self.ns + "/web").status == 404,
                 what="deployment deleted")
        rs = self.c.get(RS % self.ns + "/web-1").json()
        self.assertNotIn("ownerReferences", rs["metadata"])
        self.assertEqual(self.c.get(PODS % self.ns + "/web-1-a").status, 200)

    @sim_only
    def test_foreground_garbage_collection(self):
        self._owned_chain()
        r = self.c.delete(APPS % self.ns + "/web", {"propagationPolicy": "Foreground"})
        self.assertEqual(r.status, 200, r.body)
        self.assertIn("foregroundDeletion", r.json()["metadata"]["finalizers"])
        wait_for(lambda: self.c.get(APPS % self.ns + "/web").status == 404,
                 what="deployment deleted after its dependents")
        self.assertEqual(self.c.get(RS % self.ns + "/web-1").status, 404)
        self.assertEqual(self.c.get(PODS % self.ns + "/web-1-a").status, 404)

    @sim_only
    def test_namespace_deletion(self):
        d = deployment("web")
        d["metadata"]["finalizers"] = ["example.com/hold"]
        self.create(APPS, d)
        r = self.c.delete("/api/v1/namespaces/" + self.ns)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["status"]["phase"], "Terminating")
        body = self.assertStatus(self.c.post(APPS % self.ns, deployment("late")), 403,
                                 "Forbidden")
        self.assertEqual(body["details"]["causes"][0]["reason"], "NamespaceTerminating")
        wait_for(lambda: "deletionTimestamp" in self.c.get(APPS % self.ns + "/web").json()[
            "metadata"], what="content deleted")
        self.assertEqual(self.c.get("/api/v1/namespaces/" + self.ns).status, 200)
        self.c.patch(APPS % self.ns + "/web", {"metadata": {"finalizers": None}})
        wait_for(lambda: self.c.get("/api/v1/namespaces/" + self.ns).status == 404,
                 what="namespace removed")

    def test_table_watch_sends_headers_once(self):
        self.create(APPS, deployment("a"))
        self.create(APPS, deployment("b"))
        accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        w = self.c.watch(APPS % self.ns + "?watch=1", headers={"Accept": accept})
        first, second = w.next(), w.next()
        w.close()
        self.assertEqual(first["object"]["kind"], "Table")
        self.assertEqual(len(first["object"]["rows"]), 1)
        self.assertTrue(first["object"]["columnDefinitions"])
        self.assertIsNone(second["object"]["columnDefinitions"])

    def test_table_output(self):
        self.create(APPS, deployment("web", replicas=2))
        accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        t = self.c.get(APPS % self.ns, headers={"Accept": accept}).json()
        self.assertEqual(t["kind"], "Table")
        self.assertEqual([c["name"] for c in t["columnDefinitions"]],
                         ["Name", "Ready", "Up-to-date", "Available", "Age", "Containers",
                          "Images", "Selector"])
        self.assertEqual(t["rows"][0]["cells"][:4], ["web", "0/2", 0, 0])
        self.assertEqual(t["rows"][0]["object"]["kind"], "PartialObjectMetadata")


@unittest.skipIf(COMPARE, "fault injection is the local API server's")
class Faults(SimTestCase):
    def test_a_close_rule_drops_the_connection_without_an_answer(self):
        self.create(PODS, pod("a"))
        last = self.c.get("/_sim/requests").json()["last"]
        # Two: the test client tries a dropped request once more.
        self.c.faults(rules=[{"verb": "get", "resource": "pods", "name": "a", "close": True,
                              "count": 2}])
        with self.assertRaises((http.client.HTTPException, OSError)):
            self.c.get(PODS % self.ns + "/a")
        self.assertEqual(self.c.get(PODS % self.ns + "/a").status, 200)
        codes = [r["code"] for r in self.c.get("/_sim/requests?since=%d" % last).json()["items"]
                 if r["name"] == "a"]
        self.assertEqual(codes, [0, 0, 200])

    def test_an_answered_request_is_in_the_log_when_its_answer_arrives(self):
        # A client that read an answer and then asks for the log must find
        # its request there: clients assert on the log that way.
        self.create(PODS, pod("a"))
        for i in range(300):
            last = self.c.get("/_sim/requests").json()["last"]
            self.assertEqual(self.c.get(PODS % self.ns + "/a?try=%d" % i).status, 200)
            items = self.c.get("/_sim/requests?since=%d" % last).json()["items"]
            self.assertEqual([(r["query"], r["code"]) for r in items], [("try=%d" % i, 200)])

    def test_a_close_after_rule_carries_the_request_out_first(self):
        last = self.c.get("/_sim/requests").json()["last"]
        # Two: the test client sends a dropped request once more, which then
        # finds the pod made.
        self.c.faults(rules=[{"verb": "create", "resource": "pods", "closeAfter": True,
                              "count": 2}])
        with self.assertRaises((http.client.HTTPException, OSError)):
            self.c.post(PODS % self.ns, pod("a"))
        self.assertEqual(self.c.get(PODS % self.ns + "/a").status, 200)
        self.assertStatus(self.c.post(PODS % self.ns, pod("a")), 409, "AlreadyExists")
        codes = [r["code"] for r in self.c.get("/_sim/requests?since=%d" % last).json()["items"]
                 if r["resource"] == "pods"]
        self.assertEqual(codes, [0, 0, 200, 409])

    def test_injected_429_with_retry_after(self):
        self.c.faults(rules=[{"verb": "create", "resource": "pods", "code": 429, "retryAfter": 3,
                              "count": 1}])
        r = self.c.post(PODS % self.ns, pod("a"))
        body = self.assertStatus(r, 429, "TooManyRequests")
        self.assertEqual(r.headers.get("Retry-After"), "3")
        self.assertEqual(body["details"]["retryAfterSeconds"], 3)
        self.assertEqual(self.c.post(PODS % self.ns, pod("a")).status, 201)

    def test_injected_500_409_and_quota_403(self):
        self.create(PODS, pod("a"))
        self.c.faults(rules=[
            {"verb": "get", "resource": "pods", "name": "a", "code": 500},
            {"verb": "update", "resource": "pods", "subresource": "status", "code": 409},
            {"verb": "create", "resource": "pods", "code": 403,
             "message": 'pods "x" is forbidden: exceeded quota: q, requested: pods=1, '
                        'used: pods=2, limited: pods=2'}])
        self.assertStatus(self.c.get(PODS % self.ns + "/a"), 500, "InternalError")
        cur = self.c.get(PODS % self.ns).json()["items"][0]
        self.assertStatus(self.c.put(PODS % self.ns + "/a/status", cur), 409, "Conflict")
        body = self.assertStatus(self.c.post(PODS % self.ns, pod("b")), 403, "Forbidden")
        self.assertIn("exceeded quota", body["message"])
        self.c.faults(clear=True)
        self.assertEqual(self.c.get(PODS % self.ns + "/a").status, 200)

    def test_latency(self):
        self.c.faults(latencyMs=300)
        start = time.monotonic()
        self.c.get(PODS % self.ns)
        self.assertGreaterEqual(time.monotonic() - start, 0.3)

    def test_drop_watches_breaks_streams(self):
        w = self.c.watch(PODS % self.ns + "?watch=1&resourceVersion=0")
        self.c.faults(dropWatches=True)
        with self.assertRaises(ConnectionError):
            while w.next(timeout=5) is not None:
                pass
        w.close()

    def test_watch_delivery_delay(self):
        w = self.c.watch(PODS % self.ns + "?watch=1&resourceVersion=0")
        self.c.faults(watchDelayMs=700)
        created = time.monotonic()
        self.create(PODS, pod("a"))
        e = w.next(timeout=10)
        self.assertEqual(e["type"], "ADDED")
        self.assertGreaterEqual(time.monotonic() - created, 0.7)
        w.close()

    def test_raw_bodies_and_injected_watch_lines(self):
        self.c.faults(rules=[{"verb": "list", "resource": "pods", "body": "<html>oops</html>",
                              "code": 200, "count": 1}])
        r = self.c.get(PODS % self.ns)
        self.assertEqual((r.status, r.body), (200, b"<html>oops</html>"))
        self.assertEqual(r.headers.get("Content-Type"), "text/html")
        w = self.c.watch(PODS % self.ns + "?watch=1&resourceVersion=0")
        self.c.faults(watchInject={"resource": "pods", "line": '{"type":"ADDED","object":'})
        self.create(PODS, pod("after"))
        with self.assertRaises(ValueError):
            w.next()  # the injected, truncated line
        e = w.next()
        self.assertEqual(e["object"]["metadata"]["name"], "after")
        w.close()

    def test_rules_for_paths_outside_the_resources(self):
        # A rule without a path leaves /version alone; one with its path answers it.
        self.c.faults(rules=[{"code": 503}, {"path": "/version", "code": 500, "message": "m\n",
                                             "count": 1},
                             {"path": "/version", "body": '{"gitVersion":"x"}', "code": 200,
                              "contentType": "application/json", "count": 1}])
        try:
            r = self.c.get("/version")
            self.assertEqual((r.status, r.json()["message"]), (500, "m\n"))
            self.assertEqual(self.c.get("/version").json(), {"gitVersion": "x"})
            self.assertEqual(self.c.get("/version").json()["gitVersion"], "v1.31.0-kcmsim")
            self.assertEqual(self.c.get(PODS % self.ns).status, 503)
        finally:
            self.c.faults(clear=True)

    def test_bad_fault_requests(self):
        r = self.c.post("/_sim/faults", {"rules": [{"verb": "get", "cdoe": 500}]})
        self.assertEqual(r.status, 400)
        r = self.c.post("/_sim/faults", {"nonsense": True})
        self.assertEqual(r.status, 400)

    def test_request_log(self):
        last = self.c.get("/_sim/requests").json()["last"]
        self.create(PODS, pod("a"))
        items = self.c.get("/_sim/requests?since=%d" % last).json()["items"]
        self.assertIn(("create", "pods", 201),
                      [(i["verb"], i["resource"], i["code"]) for i in items])


    def test_watch_event_log(self):
        last = self.c.get("/_sim/watch-events").json()["last"]
        w = self.c.watch(PODS % self.ns + "?watch=1&resourceVersion=0")
        created = self.create(PODS, pod("logged"))
        e = w.next(timeout=10)
        self.assertEqual(e["object"]["metadata"]["name"], "logged")
        items = self.c.get("/_sim/watch-events?since=%d" % last).json()["items"]
        mine = [i for i in items if i["name"] == "logged"]
        self.assertEqual([(i["type"], i["resource"], i["namespace"]) for i in mine],
                         [("ADDED", "pods", self.ns)])
        self.assertEqual(str(mine[0]["resourceVersion"]),
                         created["metadata"]["resourceVersion"])
        w.close()

@unittest.skipIf(COMPARE, "needs the local API server")
class KeptState(unittest.TestCase):
    """--state: killed and started again, the server serves the same objects."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kcm-sim-state-")
        self.sim = SimProcess("--kubelet", "--ready-delay", "0.2",
                              "--state", os.path.join(self.tmp, "state.jsonl"))
        self.c = self.sim.client

    def tearDown(self):
        self.sim.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_objects_and_versions_survive_a_kill_and_watches_from_before_expire(self):
        self.c.post("/api/v1/namespaces", {"metadata": {"name": "kept"}})
        a = self.c.post(PODS % "kept", pod("a")).json()
        gone = self.c.post(PODS % "kept", pod("gone")).json()
        self.c.delete(PODS % "kept" + "/gone?gracePeriodSeconds=0")
        d = self.c.post(APPS % "kept", deployment("web")).json()
        wait_for(lambda: self.c.get(PODS % "kept" + "/a").json()["status"].get("phase") ==
                 "Running", what="the pod to run")
        before = self.c.get(PODS % "kept").json()
        self.sim.restart()
        after = self.c.get(PODS % "kept").json()
        self.assertEqual([p["metadata"]["name"] for p in after["items"]], ["a"])
        self.assertEqual(after["items"], before["items"])
        # The kubelet's node status writes at start move the version on.
        self.assertGreaterEqual(int(after["metadata"]["resourceVersion"]),
                                int(before["metadata"]["resourceVersion"]))
        got = self.c.get(APPS % "kept" + "/web").json()
        self.assertEqual(got["metadata"]["uid"], d["metadata"]["uid"])
        self.assertEqual(self.c.get(PODS % "kept" + "/gone").status, 404)
        # New writes go on from the kept resourceVersion.
        b = self.c.post(PODS % "kept", pod("b")).json()
        self.assertGreater(int(b["metadata"]["resourceVersion"]),
                           int(before["metadata"]["resourceVersion"]))
        # The kubelet is back at work.
        wait_for(lambda: self.c.get(PODS % "kept" + "/b").json()["status"].get("phase") ==
                 "Running", what="the new pod to run")
        # No history: a watch from before the restart expires at once.
        r = self.c.get(PODS % "kept" + "?watch=1&timeoutSeconds=1&resourceVersion=" +
                       gone["metadata"]["resourceVersion"])
        event = json.loads(r.body.decode().splitlines()[0])
        self.assertEqual((event["type"], event["object"]["code"]), ("ERROR", 410))
        self.assertNotEqual(a["metadata"]["uid"], b["metadata"]["uid"])


    def test_peaks_keep_the_most_replicas_of_every_version_across_a_kill(self):
        self.c.post("/api/v1/namespaces", {"metadata": {"name": "peaks"}})
        uid = self.c.post(APPS % "peaks", deployment("web", replicas=1)).json()[
            "metadata"]["uid"]
        for n in (5, 2):
            self.assertEqual(self.c.patch(APPS % "peaks" + "/web",
                                          {"spec": {"replicas": n}}).status, 200)
        self.assertEqual(self.c.get("/_sim/peaks").json()["items"][uid], 5)
        self.sim.restart()
        self.assertEqual(self.c.get("/_sim/peaks").json()["items"][uid], 5)


@unittest.skipIf(COMPARE, "the local API server's node agent; kwok plays it on a real cluster")
class FakeKubelet(SimTestCase):
    args = ("--kubelet", "--ready-delay", "0.2", "--terminate-delay", "0.2")

    def phase(self, name):
        r = self.c.get(PODS % self.ns + "/" + name)
        return r.json()["status"].get("phase") if r.status == 200 else None

    def test_pods_become_running_and_ready(self):
        self.create(PODS, pod("a"))
        wait_for(lambda: self.phase("a") == "Running", what="pod running")
        p = self.c.get(PODS % self.ns + "/a").json()
        self.assertIn(p["spec"]["nodeName"], ("node-1", "node-2", "node-3"))
        conds = {c["type"]: c["status"] for c in p["status"]["conditions"]}
        self.assertEqual(conds, {"Initialized": "True", "Ready": "True",
                                 "ContainersReady": "True", "PodScheduled": "True"})
        cs = p["status"]["containerStatuses"][0]
        self.assertTrue(cs["ready"])
        self.assertIn("running", cs["state"])
        self.assertTrue(p["status"]["podIP"].startswith("10.244."))
        nodes = self.c.get("/api/v1/nodes").json()["items"]
        self.assertEqual(len(nodes), 3)

    def test_marked_images_stay_not_ready_or_fail(self):
        self.create(PODS, pod("bad", image="nginx:bad"))
        self.create(PODS, pod("crash", image="crash:1"))
        wait_for(lambda: self.phase("crash") == "Failed", what="pod failed")
        p = wait_for(lambda: (lambda o: o if o["status"].get("containerStatuses") and "waiting" in
                              o["status"]["containerStatuses"][0]["state"] and
                              o["status"]["containerStatuses"][0]["state"]["waiting"]["reason"]
                              == "ImagePullBackOff" else None)(
            self.c.get(PODS % self.ns + "/bad").json()), what="image pull back-off")
        self.assertEqual(p["status"]["phase"], "Pending")

    def test_graceful_deletion_is_finished_by_the_kubelet(self):
        self.create(PODS, pod("a"))
        wait_for(lambda: self.phase("a") == "Running", what="pod running")
        r = self.c.delete(PODS % self.ns + "/a")
        self.assertEqual(r.status, 200, r.body)
        wait_for(lambda: self.c.get(PODS % self.ns + "/a").status == 404, what="pod gone")

    def test_finalizer_keeps_terminating_pod(self):
        self.create(PODS, pod("a", finalizers=["example.com/hold"]))
        wait_for(lambda: self.phase("a") == "Running", what="pod running")
        self.c.delete(PODS % self.ns + "/a")
        # The kubelet finishes (its final delete leaves no grace period), but
        # the finalizer keeps the pod.
        p = wait_for(lambda: (lambda o: o if o["metadata"].get("deletionGracePeriodSeconds") == 0
                              else None)(self.c.get(PODS % self.ns + "/a").json()),
                     what="kubelet finished the pod")
        self.assertIn("deletionTimestamp", p["metadata"])
        self.c.patch(PODS % self.ns + "/a", {"metadata": {"finalizers": None}})
        wait_for(lambda: self.c.get(PODS % self.ns + "/a").status == 404, what="pod gone")


@unittest.skipIf(COMPARE, "needs the local API server")
class Services(SimTestCase):
    """core/v1 Services: defaults, cluster IPs and node ports from the cluster's
    ranges, validation, patches and the table `kubectl get svc` prints."""

    def invalid(self, r):
        return self.assertStatus(r, 422, "Invalid")["message"]

    def test_create_sets_defaults_and_allocates(self):
        s = self.create(SVCS, service("web", [{"name": "http", "port": 80},
                                              {"name": "dns", "port": 53, "protocol": "UDP",
                                               "targetPort": "dns"}]))
        spec = s["spec"]
        ip = spec["clusterIP"]
        self.assertIn(ipaddress.ip_address(ip), ipaddress.ip_network("10.96.0.0/12"))
        self.assertNotEqual(ip, "10.96.0.1")  # the `kubernetes` Service's
        self.assertEqual(spec["clusterIPs"], [ip])
        self.assertEqual(spec["ports"], [
            {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80},
            {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": "dns"}])
        for key, value in (("type", "ClusterIP"), ("sessionAffinity", "None"),
                           ("ipFamilies", ["IPv4"]), ("ipFamilyPolicy", "SingleStack"),
                           ("internalTrafficPolicy", "Cluster")):
            self.assertEqual(spec[key], value, key)
        self.assertNotIn("externalTrafficPolicy", spec)
        self.assertEqual(s["status"], {"loadBalancer": {}})
        np = self.create(SVCS, service("np", type="NodePort"))["spec"]
        self.assertTrue(30000 <= np["ports"][0]["nodePort"] <= 32767)
        self.assertEqual(np["externalTrafficPolicy"], "Cluster")
        lb = self.create(SVCS, service("lb", type="LoadBalancer"))["spec"]
        self.assertEqual(lb["allocateLoadBalancerNodePorts"], True)
        self.assertIn("nodePort", lb["ports"][0])
        affinity = self.create(SVCS, service("sticky", sessionAffinity="ClientIP"))["spec"]
        self.assertEqual(affinity["sessionAffinityConfig"], {"clientIP": {"timeoutSeconds": 10800}})
        # Headless: no address; without a selector, either family.
        headless = self.create(SVCS, service("hl", [], clusterIP="None"))["spec"]
        self.assertEqual((headless["clusterIPs"], headless["ipFamilies"],
                          headless["ipFamilyPolicy"]), (["None"], ["IPv4"], "SingleStack"))
        bare = service("bare", [], clusterIP="None")
        del bare["spec"]["selector"]
        bare = self.create(SVCS, bare)["spec"]
        self.assertEqual((bare["ipFamilies"], bare["ipFamilyPolicy"]),
                         (["IPv4", "IPv6"], "RequireDualStack"))
        ext = self.create(SVCS, service("ext", [], type="ExternalName",
                                        externalName="db.example.com"))["spec"]
        for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy",
                    "internalTrafficPolicy"):
            self.assertNotIn(key, ext)
        res = {r["name"]: r for r in self.c.get("/api/v1").json()["resources"]}
        self.assertEqual((res["services"]["kind"], res["services"]["shortNames"],
                          res["services"]["categories"]), ("Service", ["svc"], ["all"]))
        self.assertEqual(sorted(res["services"]["verbs"]),
                         ["create", "delete", "deletecollection", "get", "list", "patch",
                          "update", "watch"])
        self.assertEqual(res["services/status"]["verbs"], ["get", "patch", "update"])

    def test_cluster_ips_are_unique_and_immutable(self):
        ips = [self.create(SVCS, service("s%d" % i))["spec"]["clusterIP"] for i in range(20)]
        self.assertEqual(len(set(ips)), 20)
        msg = self.invalid(self.c.post(SVCS % self.ns, service("dup", clusterIP=ips[0])))
        self.assertEqual(msg, 'Service "dup" is invalid: spec.clusterIPs: Invalid value: '
                              '[]string{"%s"}: failed to allocate IP %s: provided IP is already '
                              'allocated' % (ips[0], ips[0]))
        msg = self.invalid(self.c.post(SVCS % self.ns, service("k", clusterIP="10.96.0.1")))
        self.assertIn("failed to allocate IP 10.96.0.1: provided IP is already allocated", msg)
        msg = self.invalid(self.c.post(SVCS % self.ns, service("far", clusterIP="1.2.3.4")))
        self.assertIn("failed to allocate IP 1.2.3.4: the provided IP (1.2.3.4) is not in the "
                      "valid range. The range of valid IPs is 10.96.0.0/12", msg)
        # A requested address, then an update that leaves it out keeps it.
        s = self.create(SVCS, service("fixed", clusterIP="10.96.0.10"))
        self.assertEqual(s["spec"]["clusterIPs"], ["10.96.0.10"])
        r = self.c.put(SVCS % self.ns + "/fixed", service("fixed", [{"port": 81}]))
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual((r.json()["spec"]["clusterIP"], r.json()["spec"]["ports"][0]["port"]),
                         ("10.96.0.10", 81))
        r = self.c.patch(SVCS % self.ns + "/fixed", {"spec": {"clusterIP": "10.96.0.11"}})
        self.assertEqual(self.invalid(r), 'Service "fixed" is invalid: spec.clusterIPs[0]: '
                                          'Invalid value: []string{"10.96.0.11"}: may not change '
                                          'once set')
        # The deleted Service comes back in the answer; its address is free again.
        r = self.c.delete(SVCS % self.ns + "/fixed")
        self.assertEqual((r.status, r.json()["kind"]), (200, "Service"))
        self.create(SVCS, service("again", clusterIP="10.96.0.10"))

    def test_node_ports_are_unique_and_go_with_the_type(self):
        np = self.create(SVCS, service("np", type="NodePort"))["spec"]["ports"][0]["nodePort"]
        r = self.c.post(SVCS % self.ns, service("dup", [{"port": 80, "nodePort": np}],
                                                type="NodePort"))
        self.assertEqual(self.invalid(r), 'Service "dup" is invalid: spec.ports[0].nodePort: '
                                          'Invalid value: %d: provided port is already '
                                          'allocated' % np)
        r = self.c.post(SVCS % self.ns, service("low", [{"port": 80, "nodePort": 80}],
                                                type="NodePort"))
        self.assertIn("spec.ports[0].nodePort: Invalid value: 80: provided port is not in the "
                      "valid range. The range of valid ports is 30000-32767", self.invalid(r))
        # Back to ClusterIP: the node port and the external policy go.
        r = self.c.patch(SVCS % self.ns + "/np", {"spec": {"type": "ClusterIP"}},
                         ptype="strategic")
        self.assertEqual(r.status, 200, r.body)
        self.assertNotIn("nodePort", r.json()["spec"]["ports"][0])
        self.assertNotIn("externalTrafficPolicy", r.json()["spec"])
        self.create(SVCS, service("reuse", [{"port": 80, "nodePort": np}], type="NodePort"))
        got = self.c.get(SVCS % self.ns + "?fieldSelector=spec.type%3DNodePort").json()
        self.assertEqual([i["metadata"]["name"] for i in got["items"]], ["reuse"])

    def test_invalid_services_get_422(self):
        def message(body):
            return self.invalid(self.c.post(SVCS % self.ns, body))
        self.assertEqual(message(service("a", [])), 'Service "a" is invalid: spec.ports: '
                                                    'Required value')
        self.assertEqual(message(service("b", [{"port": 0, "targetPort": 80, "protocol": "FOO"}])),
                         'Service "b" is invalid: [spec.ports[0].port: Invalid value: 0: must be '
                         'between 1 and 65535, inclusive, spec.ports[0].protocol: Unsupported '
                         'value: "FOO": supported values: "SCTP", "TCP", "UDP"]')
        self.assertEqual(message(service("c", [{"port": 80}, {"port": 81}])),
                         'Service "c" is invalid: [spec.ports[0].name: Required value, '
                         'spec.ports[1].name: Required value]')
        self.assertEqual(message(service("d", [{"name": "x", "port": 80},
                                               {"name": "x", "port": 81}])),
                         'Service "d" is invalid: spec.ports[1].name: Duplicate value: "x"')
        self.assertEqual(message(service("e", type="Weird")),
                         'Service "e" is invalid: spec.type: Unsupported value: "Weird": '
                         'supported values: "ClusterIP", "ExternalName", "LoadBalancer", '
                         '"NodePort"')
        body = service("f", selector={"app": "-bad-"})
        self.assertIn('spec.selector: Invalid value: "-bad-": a valid label must be an empty '
                      'string', message(body))
        self.assertIn('metadata.name: Invalid value: "1web": a DNS-1035 label must consist of '
                      'lower case alphanumeric characters', message(service("1web")))
        body = self.assertStatus(self.c.post(SVCS % self.ns, service("g", [])), 422, "Invalid")
        self.assertEqual((body["details"]["kind"], body["details"]["causes"]),
                         ("Service", [{"reason": "FieldValueRequired",
                                       "message": "Required value", "field": "spec.ports"}]))
        self.create(SVCS, service("ok"))
        r = self.c.patch(SVCS % self.ns + "/ok", {"spec": {"ports": [{"port": 70000}]}})
        self.assertIn("spec.ports[0].port: Invalid value: 70000", self.invalid(r))

    def test_patches_and_the_status_subresource(self):
        self.create(SVCS, service("web", [{"name": "http", "port": 80},
                                          {"name": "metrics", "port": 9090}], type="LoadBalancer"))
        path = SVCS % self.ns + "/web"
        r = self.c.patch(path, {"spec": {"selector": {"version": "green"}}}, ptype="strategic")
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["spec"]["selector"], {"app": "web", "version": "green"})
        r = self.c.patch(path, {"spec": {"selector": {"app": None}}})  # JSON merge patch
        self.assertEqual(r.json()["spec"]["selector"], {"version": "green"})
        # Ports merge by port number; the node ports stay.
        before = self.c.get(path).json()["spec"]["ports"]
        r = self.c.patch(path, {"spec": {"ports": [{"port": 9090, "targetPort": 9100}]}},
                         ptype="strategic")
        ports = r.json()["spec"]["ports"]
        self.assertEqual([(p["name"], p["targetPort"], p["nodePort"]) for p in ports],
                         [("http", 80, before[0]["nodePort"]),
                          ("metrics", 9100, before[1]["nodePort"])])
        # The status subresource keeps the spec; the main resource keeps the status.
        r = self.c.patch(path + "/status", {"spec": {"selector": {"x": "y"}}, "status": {
            "loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}, ptype="strategic")
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["spec"]["selector"], {"version": "green"})
        r = self.c.patch(path, {"spec": {"selector": {"x": "y"}}, "status": {"loadBalancer": {}}})
        self.assertEqual(r.json()["status"], {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}})
        self.assertEqual(r.json()["spec"]["selector"], {"version": "green", "x": "y"})

    def test_table(self):
        accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}
        web = self.create(SVCS, service("web"))["spec"]
        np = self.create(SVCS, service("np", type="NodePort"))["spec"]
        self.create(SVCS, service("lb", type="LoadBalancer", externalIPs=["192.0.2.1"]))
        self.create(SVCS, service("ext", [], type="ExternalName", externalName="example.com"))
        t = self.c.get(SVCS % self.ns, headers=accept).json()
        self.assertEqual([(c["name"], c["priority"]) for c in t["columnDefinitions"]],
                         [("Name", 0), ("Type", 0), ("Cluster-IP", 0), ("External-IP", 0),
                          ("Port(s)", 0), ("Age", 0), ("Selector", 1)])
        self.assertTrue(t["columnDefinitions"][2]["description"].startswith(
            "clusterIP is the IP address of the service"))
        rows = {r["cells"][0]: r["cells"][:5] + r["cells"][6:] for r in t["rows"]}
        self.assertEqual(rows["web"], ["web", "ClusterIP", web["clusterIP"], "<none>", "80/TCP",
                                       "app=web"])
        self.assertEqual(rows["np"], ["np", "NodePort", np["clusterIP"], "<none>",
                                      "80:%d/TCP" % np["ports"][0]["nodePort"], "app=np"])
        self.assertEqual(rows["lb"][3], "192.0.2.1")
        self.assertEqual(rows["ext"][2:5], ["<none>", "example.com", "<none>"])
        r = self.c.patch(SVCS % self.ns + "/lb/status", {"status": {"loadBalancer": {
            "ingress": [{"ip": "192.0.2.9"}]}}})
        self.assertEqual(r.status, 200, r.body)
        t = self.c.get(SVCS % self.ns + "/lb", headers=accept).json()
        self.assertEqual(t["rows"][0]["cells"][3], "192.0.2.9,192.0.2.1")


RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def user(name):
    return {"kind": "User", "apiGroup": RBAC_GROUP, "name": name}


def group(name):
    return {"kind": "Group", "apiGroup": RBAC_GROUP, "name": name}


def rule(groups, res, verbs, names=None):
    r = {"apiGroups": groups, "resources": res, "verbs": verbs}
    if names:
        r["resourceNames"] = names
    return r


@unittest.skipIf(COMPARE, "needs the local API server")
class RbacCase(SimTestCase):
    """A server with users outside system:masters, and RBAC objects made for a test."""

    args = ("--extra-token", "alice-token:alice",
            "--extra-token", "bob-token:bob:devs,qa",
            "--sa-token", "kcm-token:kube-system:kcm",
            "--extra-token", "builder-token:system:serviceaccount:ci:builder:ci-bots",
            "--extra-token", "kcm-user-token:system:kube-controller-manager")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ca = os.path.join(cls.sim.dir, "ca.crt")
        cls.alice, cls.bob, cls.kcm, cls.builder = (
            Client(cls.sim.url, name + "-token", ca) for name in ("alice", "bob", "kcm", "builder"))

    @classmethod
    def tearDownClass(cls):
        for client in (cls.alice, cls.bob, cls.kcm, cls.builder):
            conn = getattr(client.local, "conn", None)
            if conn is not None:
                conn.close()
        super().tearDownClass()

    def rbac(self, plural, kind, name, ns=None, **fields):
        """Create an RBAC object as the admin; cluster-scoped ones go after the test."""
        path = RBAC + ("/namespaces/%s/%s" % (ns, plural) if ns else "/" + plural)
        body = {"apiVersion": RBAC_GROUP + "/v1", "kind": kind, "metadata": {"name": name}}
        body.update(fields)
        r = self.c.post(path, body)
        self.assertEqual(r.status, 201, r.body)
        if not ns:
            self.addCleanup(self.c.delete, path + "/" + name)
        return path + "/" + name

    def role(self, name, rules, ns=None):
        if ns:
            return self.rbac("roles", "Role", name, ns, rules=rules)
        return self.rbac("clusterroles", "ClusterRole", name, rules=rules)

    def bind(self, name, role_kind, role_name, subjects, ns=None):
        ref = {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": role_name}
        if ns:
            return self.rbac("rolebindings", "RoleBinding", name, ns, roleRef=ref,
                             subjects=subjects)
        return self.rbac("clusterrolebindings", "ClusterRoleBinding", name, roleRef=ref,
                         subjects=subjects)

    def namespace(self, name):
        r = self.c.post("/api/v1/namespaces", {"metadata": {"name": name}})
        self.assertEqual(r.status, 201, r.body)

    def assertForbidden(self, r, message):
        body = self.assertStatus(r, 403, "Forbidden")
        self.assertEqual(body["message"], message)
        return body

    @staticmethod
    def watch_status(client, path):
        w = client.watch(path)
        w.close()
        return w.status


class Authorization(RbacCase):
    """RBAC: what users outside system:masters may do."""

    def test_denials_are_worded_as_kube_apiserver_words_them(self):
        r = self.kcm.get("/api/v1/pods")
        self.assertEqual(r.status, 403)
        self.assertEqual(r.headers.get("Content-Type"), "application/json")
        self.assertEqual(r.body, (
            b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
            b'"pods is forbidden: User \\"system:serviceaccount:kube-system:kcm\\" cannot list '
            b'resource \\"pods\\" in API group \\"\\" at the cluster scope","reason":"Forbidden",'
            b'"details":{"kind":"pods"},"code":403}'))
        who = 'User "system:serviceaccount:kube-system:kcm"'
        self.assertForbidden(self.kcm.post(PODS % self.ns, pod("a")),
                             'pods is forbidden: %s cannot create resource "pods" in API group '
                             '"" in the namespace "%s"' % (who, self.ns))
        body = self.assertForbidden(
            self.kcm.get(PODS % self.ns + "/a"),
            'pods "a" is forbidden: %s cannot get resource "pods" in API group "" in the '
            'namespace "%s"' % (who, self.ns))
        self.assertEqual(body["details"], {"name": "a", "kind": "pods"})
        body = self.assertForbidden(
            self.kcm.put(RS % self.ns + "/r/status", {}),
            'replicasets.apps "r" is forbidden: %s cannot update resource "replicasets/status" '
            'in API group "apps" in the namespace "%s"' % (who, self.ns))
        self.assertEqual(body["details"], {"name": "r", "group": "apps", "kind": "replicasets"})
        # Authorization comes before routing: unknown resources are forbidden, not missing.
        self.assertForbidden(self.alice.get("/apis/apps/v1/namespaces/%s/widgets" % self.ns),
                             'widgets.apps is forbidden: User "alice" cannot list resource '
                             '"widgets" in API group "apps" in the namespace "%s"' % self.ns)
        body = self.assertForbidden(self.alice.get("/"),
                                    'forbidden: User "alice" cannot get path "/"')
        self.assertEqual(body["details"], {})

    def test_discovery_version_and_health_are_open_to_authenticated_users(self):
        for path in ("/api", "/api/v1", "/apis", "/apis/apps/v1", RBAC, "/version", "/healthz",
                     "/readyz", "/openapi/v3"):
            self.assertEqual(self.alice.get(path).status, 200, path)
        self.assertEqual(self.c.get("/version", token=False).status, 200)
        self.assertForbidden(self.c.get("/api", token=False),
                             'forbidden: User "system:anonymous" cannot get path "/api"')
        self.assertForbidden(self.alice.post("/version", {}),
                             'forbidden: User "alice" cannot post path "/version"')
        res = {r["name"]: r for r in self.alice.get(RBAC).json()["resources"]}
        self.assertEqual({n: (r["kind"], r["namespaced"]) for n, r in res.items()}, {
            "clusterroles": ("ClusterRole", False),
            "clusterrolebindings": ("ClusterRoleBinding", False),
            "roles": ("Role", True), "rolebindings": ("RoleBinding", True)})
        self.assertEqual(sorted(res["roles"]["verbs"]),
                         ["create", "delete", "deletecollection", "get", "list", "patch",
                          "update", "watch"])
        # The default policy is made of ordinary objects.
        b = self.c.get(RBAC + "/clusterrolebindings/system:public-info-viewer").json()
        self.assertEqual(b["metadata"]["labels"], {"kubernetes.io/bootstrapping": "rbac-defaults"})
        self.assertEqual([s["name"] for s in b["subjects"]],
                         ["system:authenticated", "system:unauthenticated"])
        self.assertEqual(self.c.get(RBAC + "/clusterroles/system:discovery").json()["rules"][0]
                         ["verbs"], ["get"])

    def test_system_masters_may_do_everything(self):
        path = RBAC + "/clusterrolebindings/cluster-admin"
        saved = self.c.get(path).json()
        self.assertEqual(saved["subjects"], [group("system:masters")])
        self.assertEqual(self.c.delete(path).status, 200)
        saved["metadata"] = {k: saved["metadata"][k] for k in ("name", "labels", "annotations")}
        self.addCleanup(self.c.post, RBAC + "/clusterrolebindings", saved)
        self.assertEqual(self.c.get("/api/v1/nodes").status, 200)
        self.assertEqual(self.c.get("/").status, 200)
        self.create(PODS, pod("a"))

    def test_each_request_is_authorized_as_its_verb(self):
        base = PODS % self.ns
        self.create(PODS, pod("p"))
        role = self.role("pods", [], ns=self.ns)
        self.bind("alice-pods", "Role", "pods", [user("alice")], ns=self.ns)
        n = itertools.count()

        def doomed():
            return self.create(PODS, pod("d%d" % next(n)))["metadata"]["name"]
        requests = {
            "get": lambda: self.alice.get(base + "/p"),
            "list": lambda: self.alice.get(base),
            "watch": lambda: self.watch_status(self.alice, base + "?watch=true"),
            "create": lambda: self.alice.post(base, pod("c%d" % next(n))),
            "update": lambda: self.alice.put(base + "/p", self.c.get(base + "/p").json()),
            "patch": lambda: self.alice.patch(base + "/p", {"metadata": {"labels": {
                "n": str(next(n))}}}),
            "delete": lambda: self.alice.delete(base + "/" + doomed()),
            "deletecollection": lambda: self.alice.delete(base + "?labelSelector=none%3D1"),
        }
        for granted in requests:
            r = self.c.patch(role, {"rules": [rule([""], ["pods"], [granted])]})
            self.assertEqual(r.status, 200, r.body)
            for verb, send in requests.items():
                got = send()
                status = got if isinstance(got, int) else got.status
                if verb == granted:
                    self.assertIn(status, (200, 201), (granted, verb, getattr(got, "body", "")))
                    continue
                self.assertEqual(status, 403, (granted, verb))
                if not isinstance(got, int):
                    self.assertIn('cannot %s resource "pods"' % verb, got.json()["message"])
        # A watch is not a list: it needs the watch verb.
        self.c.patch(role, {"rules": [rule([""], ["pods"], ["list"])]})
        self.assertEqual(self.alice.get(base).status, 200)
        self.assertForbidden(self.alice.get(base + "?watch=1&resourceVersion=0"),
                             'pods is forbidden: User "alice" cannot watch resource "pods" in '
                             'API group "" in the namespace "%s"' % self.ns)
        self.assertEqual(self.alice.get(base + "?watch=false").status, 200)
        self.c.patch(role, {"rules": [rule([""], ["pods"], ["watch"])]})
        w = self.alice.watch(base + "?watch=1")
        self.assertEqual(w.status, 200)
        self.assertEqual(w.next()["type"], "ADDED")
        w.close()

    def test_role_bindings_grant_in_their_namespace_only(self):
        other = self.ns + "-b"
        self.namespace(other)
        self.role("reader", [rule([""], ["pods"], ["get", "list", "watch"])], ns=self.ns)
        binding = self.bind("alice-reader", "Role", "reader", [user("alice")], ns=self.ns)
        self.assertEqual(self.alice.get(PODS % self.ns).status, 200)
        self.assertForbidden(self.alice.get(PODS % other),
                             'pods is forbidden: User "alice" cannot list resource "pods" in API '
                             'group "" in the namespace "%s"' % other)
        self.assertForbidden(self.alice.get("/api/v1/pods"),
                             'pods is forbidden: User "alice" cannot list resource "pods" in API '
                             'group "" at the cluster scope')
        # Bindings take effect, and stop, at once.
        self.assertEqual(self.c.delete(binding).status, 200)
        self.assertStatus(self.alice.get(PODS % self.ns), 403, "Forbidden")
        # A RoleBinding to a ClusterRole grants its rules in the binding's namespace.
        reader = self.ns + "-deployment-reader"
        self.role(reader, [rule(["apps"], ["deployments"], ["get", "list"])])
        self.bind("qa-reads", "ClusterRole", reader, [group("qa")], ns=other)
        self.assertEqual(self.bob.get(APPS % other).status, 200)
        self.assertStatus(self.bob.get(APPS % self.ns), 403, "Forbidden")
        self.assertStatus(self.bob.get("/apis/apps/v1/deployments"), 403, "Forbidden")
        # A ClusterRoleBinding grants them everywhere, the cluster scope included.
        self.bind(self.ns + "-devs-read", "ClusterRole", reader, [group("devs")])
        self.assertEqual(self.bob.get(APPS % self.ns).status, 200)
        self.assertEqual(self.bob.get("/apis/apps/v1/deployments").status, 200)
        # A Role is looked up in the binding's own namespace; a missing one is reported.
        self.bind("alice-reader", "Role", "reader", [user("alice")], ns=other)
        self.assertForbidden(self.alice.get(PODS % other),
                             'pods is forbidden: User "alice" cannot list resource "pods" in API '
                             'group "" in the namespace "%s": RBAC: '
                             'role.rbac.authorization.k8s.io "reader" not found' % other)

    def test_a_namespace_is_readable_through_its_own_role_bindings(self):
        other = self.ns + "-b"
        self.namespace(other)
        self.role("ns-reader", [rule([""], ["namespaces"], ["get"])], ns=self.ns)
        self.bind("alice-ns", "Role", "ns-reader", [user("alice")], ns=self.ns)
        self.assertEqual(self.alice.get("/api/v1/namespaces/" + self.ns).status, 200)
        self.assertForbidden(self.alice.get("/api/v1/namespaces/" + other),
                             'namespaces "%s" is forbidden: User "alice" cannot get resource '
                             '"namespaces" in API group "" in the namespace "%s"' % (other, other))
        self.assertStatus(self.alice.get("/api/v1/namespaces"), 403, "Forbidden")

    def test_service_account_and_group_subjects(self):
        reader = self.ns + "-pod-reader"
        self.role(reader, [rule([""], ["pods"], ["list"])])
        self.assertStatus(self.kcm.get("/api/v1/pods"), 403, "Forbidden")
        self.bind(reader + "-kcm", "ClusterRole", reader,
                  [{"kind": "ServiceAccount", "name": "kcm", "namespace": "kube-system"}])
        self.assertEqual(self.kcm.get("/api/v1/pods").status, 200)
        self.assertStatus(self.builder.get("/api/v1/pods"), 403, "Forbidden")
        # Service accounts are in system:serviceaccounts and system:serviceaccounts:NAMESPACE,
        # and --extra-token adds its own groups.
        for g in ("system:serviceaccounts:ci", "ci-bots", "system:serviceaccounts"):
            binding = self.bind(reader + "-" + g.replace(":", "-"), "ClusterRole", reader,
                                [group(g)])
            self.assertEqual(self.builder.get("/api/v1/pods").status, 200, g)
            self.c.delete(binding)
            self.assertStatus(self.builder.get("/api/v1/pods"), 403, "Forbidden")
        self.assertStatus(self.alice.get("/api/v1/pods"), 403, "Forbidden")
        # A service account's user name is a User subject too.
        self.bind(reader + "-user", "ClusterRole", reader,
                  [user("system:serviceaccount:ci:builder")])
        self.assertEqual(self.builder.get("/api/v1/pods").status, 200)
        # In a RoleBinding, a service account without a namespace is one of the
        # binding's namespace.
        leases = "/apis/coordination.k8s.io/v1/namespaces/%s/leases"
        self.role("lease-reader", [rule(["coordination.k8s.io"], ["leases"], ["list"])],
                  ns="kube-system")
        self.addCleanup(self.c.delete, RBAC + "/namespaces/kube-system/roles/lease-reader")
        self.bind("kcm-leases", "Role", "lease-reader",
                  [{"kind": "ServiceAccount", "name": "kcm"}], ns="kube-system")
        self.addCleanup(self.c.delete, RBAC + "/namespaces/kube-system/rolebindings/kcm-leases")
        self.assertEqual(self.kcm.get(leases % "kube-system").status, 200)
        self.assertStatus(self.kcm.get(leases % self.ns), 403, "Forbidden")
        log = self.c.get("/_sim/requests").json()["items"]
        self.assertIn("system:serviceaccount:ci:builder", {i["user"] for i in log})

    def test_resource_names_restrict_named_requests_only(self):
        self.create(PODS, pod("a"))
        self.create(PODS, pod("b"))
        self.role("only-a", [rule([""], ["pods"], ["get", "list", "watch", "create", "patch",
                                                   "delete"], names=["a"])], ns=self.ns)
        self.bind("alice-a", "Role", "only-a", [user("alice")], ns=self.ns)
        base = PODS % self.ns
        self.assertEqual(self.alice.get(base + "/a").status, 200)
        self.assertForbidden(self.alice.get(base + "/b"),
                             'pods "b" is forbidden: User "alice" cannot get resource "pods" in '
                             'API group "" in the namespace "%s"' % self.ns)
        # Neither a list nor a create names an object...
        self.assertStatus(self.alice.get(base), 403, "Forbidden")
        self.assertForbidden(self.alice.post(base, pod("a")),
                             'pods is forbidden: User "alice" cannot create resource "pods" in API '
                             'group "" in the namespace "%s"' % self.ns)
        # ...but a list or watch selecting metadata.name does.
        r = self.alice.get(base + "?fieldSelector=metadata.name%3Da")
        self.assertEqual([i["metadata"]["name"] for i in r.json()["items"]], ["a"])
        self.assertForbidden(self.alice.get(base + "?fieldSelector=metadata.name%3Db"),
                             'pods "b" is forbidden: User "alice" cannot list resource "pods" in '
                             'API group "" in the namespace "%s"' % self.ns)
        w = self.alice.watch(base + "?watch=1&fieldSelector=metadata.name%3Da")
        self.assertEqual(w.status, 200)
        self.assertEqual(w.next()["object"]["metadata"]["name"], "a")
        w.close()
        self.assertEqual(self.alice.patch(base + "/a", {"metadata": {"labels": {"x": "y"}}})
                         .status, 200)
        self.assertStatus(self.alice.delete(base + "/b"), 403, "Forbidden")
        self.assertEqual(self.alice.delete(base + "/a").status, 200)

    def test_subresources(self):
        self.create(PODS, pod("p"))
        self.create(APPS, deployment("web"))
        role = self.role("pods", [rule([""], ["pods"], ["get", "update", "patch"])], ns=self.ns)
        self.bind("alice-pods", "Role", "pods", [user("alice")], ns=self.ns)
        status = PODS % self.ns + "/p/status"
        cur = self.alice.get(PODS % self.ns + "/p").json()
        self.assertForbidden(self.alice.put(status, cur),
                             'pods "p" is forbidden: User "alice" cannot update resource '
                             '"pods/status" in API group "" in the namespace "%s"' % self.ns)
        self.assertStatus(self.alice.get(status), 403, "Forbidden")
        self.c.patch(role, {"rules": [rule([""], ["pods"], ["get", "update", "patch"]),
                                      rule([""], ["pods/status"], ["update"]),
                                      rule(["apps"], ["*/scale"], ["get", "patch"])]})
        self.assertEqual(self.alice.put(status, cur).status, 200)
        scale = APPS % self.ns + "/web/scale"
        self.assertEqual(self.alice.get(scale).json()["spec"]["replicas"], 1)
        self.assertEqual(self.alice.patch(scale, {"spec": {"replicas": 2}}).status, 200)
        # "*/scale" covers the scale of every resource of the group, and nothing else.
        self.assertStatus(self.alice.get(RS % self.ns + "/none/scale"), 404, "NotFound")
        self.assertStatus(self.alice.get(APPS % self.ns + "/web/status"), 403, "Forbidden")
        self.assertStatus(self.alice.get(APPS % self.ns + "/web"), 403, "Forbidden")

    def test_wildcards(self):
        self.create(PODS, pod("p"))
        self.role("all", [rule(["*"], ["*"], ["*"])], ns=self.ns)
        self.bind("alice-all", "Role", "all", [user("alice")], ns=self.ns)
        self.assertEqual(self.alice.post(APPS % self.ns, deployment("web")).status, 201)
        self.assertEqual(self.alice.get(PODS % self.ns + "/p/status").status, 200)
        self.assertEqual(self.alice.delete(PODS % self.ns).status, 200)
        self.assertEqual(self.alice.get(RBAC + "/namespaces/%s/roles" % self.ns).status, 200)
        self.assertStatus(self.alice.get("/api/v1/nodes"), 403, "Forbidden")
        self.role("core-get", [rule([""], ["*"], ["get"])], ns=self.ns)
        self.bind("bob-get", "Role", "core-get", [group("devs")], ns=self.ns)
        self.create(PODS, pod("q"))
        self.assertEqual(self.bob.get(PODS % self.ns + "/q").status, 200)
        self.assertForbidden(self.bob.get(APPS % self.ns + "/web"),
                             'deployments.apps "web" is forbidden: User "bob" cannot get resource '
                             '"deployments" in API group "apps" in the namespace "%s"' % self.ns)
        self.assertStatus(self.bob.get(PODS % self.ns), 403, "Forbidden")

    def test_rbac_objects_are_validated(self):
        roles = RBAC + "/namespaces/%s/roles" % self.ns
        bindings = RBAC + "/namespaces/%s/rolebindings" % self.ns

        def invalid(path, body, message):
            body = self.assertStatus(self.c.post(path, body), 422, "Invalid")
            self.assertEqual(body["message"], message)
            return body
        invalid(RBAC + "/clusterroles", {"metadata": {"name": "x"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"]}]},
            'ClusterRole.rbac.authorization.k8s.io "x" is invalid: rules[0].verbs: Required '
            'value: verbs must contain at least one value')
        invalid(roles, {"metadata": {"name": "x"}, "rules": [
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]},
            'Role.rbac.authorization.k8s.io "x" is invalid: rules[0].nonResourceURLs: Invalid '
            'value: []string{"/healthz"}: namespaced rules cannot apply to non-resource URLs')
        invalid(roles, {"metadata": {"name": "x"}, "rules": [{"verbs": ["get"]}]},
                'Role.rbac.authorization.k8s.io "x" is invalid: [rules[0].apiGroups: Required '
                'value: resource rules must supply at least one api group, rules[0].resources: '
                'Required value: resource rules must supply at least one resource]')
        invalid(roles, {"metadata": {"name": "a%b"}, "rules": []},
                'Role.rbac.authorization.k8s.io "a%b" is invalid: metadata.name: Invalid value: '
                '"a%b": may not contain \'%\'')
        body = invalid(bindings, {"metadata": {"name": "x"}},
                       'RoleBinding.rbac.authorization.k8s.io "x" is invalid: [roleRef.kind: '
                       'Unsupported value: "": supported values: "Role", "ClusterRole", '
                       'roleRef.name: Required value]')
        self.assertEqual([c["field"] for c in body["details"]["causes"]],
                         ["roleRef.kind", "roleRef.name"])
        invalid(RBAC + "/clusterrolebindings", {
            "metadata": {"name": "x"}, "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "kcm"}]},
            'ClusterRoleBinding.rbac.authorization.k8s.io "x" is invalid: [roleRef.kind: '
            'Unsupported value: "Role": supported values: "ClusterRole", '
            'subjects[0].namespace: Required value]')
        # Names only need to be path segments; rules and roleRef get their defaults.
        r = self.c.post(roles, {"metadata": {"name": "system:reader"},
                                "rules": [rule([""], ["pods"], ["get"])]})
        self.assertEqual(r.status, 201, r.body)
        self.assertEqual(r.json()["rules"], [rule([""], ["pods"], ["get"])])
        self.assertIsNone(self.c.post(roles, {"metadata": {"name": "empty"}}).json()["rules"])
        r = self.c.post(bindings, {"metadata": {"name": "b"},
                                   "roleRef": {"kind": "Role", "name": "system:reader"},
                                   "subjects": [{"kind": "User", "name": "alice"},
                                                {"kind": "ServiceAccount", "name": "x"}]})
        self.assertEqual(r.status, 201, r.body)
        b = r.json()
        self.assertEqual(b["roleRef"], {"kind": "Role", "name": "system:reader",
                                        "apiGroup": RBAC_GROUP})
        self.assertEqual(b["subjects"], [{"kind": "User", "name": "alice", "apiGroup": RBAC_GROUP},
                                         {"kind": "ServiceAccount", "name": "x"}])
        # Subjects change; the roleRef does not.
        b["subjects"] = [user("bob")]
        r = self.c.put(bindings + "/b", b)
        self.assertEqual(r.status, 200, r.body)
        b = r.json()
        b["roleRef"] = {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "view"}
        message = ('RoleBinding.rbac.authorization.k8s.io "b" is invalid: roleRef: Invalid value: '
                   'rbac.RoleRef{APIGroup:"rbac.authorization.k8s.io", Kind:"ClusterRole", '
                   'Name:"view"}: cannot change roleRef')
        body = self.assertStatus(self.c.put(bindings + "/b", b), 422, "Invalid")
        self.assertEqual(body["message"], message)
        self.assertEqual(body["details"]["causes"][0]["field"], "roleRef")
        body = self.assertStatus(self.c.patch(bindings + "/b", {"roleRef": {"name": "other"}}),
                                 422, "Invalid")
        self.assertIn("cannot change roleRef", body["message"])
        # They are ordinary resources otherwise.
        w = self.c.watch(bindings + "?watch=1&resourceVersion=" + b["metadata"]["resourceVersion"])
        self.assertEqual(self.c.delete(bindings + "/b").status, 200)
        self.assertEqual(w.next()["type"], "DELETED")
        w.close()
        self.assertEqual([i["metadata"]["name"] for i in self.c.get(roles).json()["items"]],
                         ["empty", "system:reader"])
        accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
        t = self.c.get(roles, headers={"Accept": accept}).json()
        self.assertEqual([c["name"] for c in t["columnDefinitions"]], ["Name", "Created At"])


TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


def token_review(token):
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}}


def access_review(user_name="", groups=(), path=None, verb="get", **attrs):
    spec = {"user": user_name, "groups": list(groups)}
    if path is not None:
        spec["nonResourceAttributes"] = {"path": path, "verb": verb}
    if attrs:
        spec["resourceAttributes"] = dict(attrs, verb=verb)
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": spec}


class Reviews(RbacCase):
    """TokenReview and SubjectAccessReview, for servers that delegate
    authentication and authorization to the API server."""

    def delegate(self):
        """Let kcm's service account review, as system:auth-delegator does."""
        self.bind("kcm-delegator", "ClusterRole", "system:auth-delegator",
                  [{"kind": "ServiceAccount", "name": "kcm", "namespace": "kube-system"}])

    def review(self, body, code=201):
        r = self.kcm.post(TOKEN_REVIEWS if body["kind"] == "TokenReview" else ACCESS_REVIEWS,
                          body)
        self.assertEqual(r.status, code, r.body)
        return r.json()

    def allowed(self, **kw):
        return self.review(access_review(**kw))["status"]

    def test_reviews_need_create_on_their_resource(self):
        who = 'User "system:serviceaccount:kube-system:kcm"'
        self.assertForbidden(self.kcm.post(TOKEN_REVIEWS, token_review("alice-token")),
                             'tokenreviews.authentication.k8s.io is forbidden: %s cannot create '
                             'resource "tokenreviews" in API group "authentication.k8s.io" at '
                             'the cluster scope' % who)
        self.assertForbidden(self.kcm.post(ACCESS_REVIEWS, access_review("alice", path="/x")),
                             'subjectaccessreviews.authorization.k8s.io is forbidden: %s cannot '
                             'create resource "subjectaccessreviews" in API group '
                             '"authorization.k8s.io" at the cluster scope' % who)
        role = self.c.get(RBAC + "/clusterroles/system:auth-delegator").json()
        self.assertEqual(role["rules"], [
            rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
            rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"])])
        self.delegate()
        self.review(token_review("alice-token"))
        self.review(access_review("alice", path="/x"))
        # Created, never stored: nothing else may be done with them.
        for method in ("GET", "DELETE"):
            for path in (TOKEN_REVIEWS, TOKEN_REVIEWS + "/x", ACCESS_REVIEWS):
                self.assertStatus(self.c.request(method, path), 405, "MethodNotAllowed")
        disc = {r["name"]: r for r in self.c.get("/apis/authentication.k8s.io/v1")
                .json()["resources"]}
        self.assertEqual(disc["tokenreviews"]["verbs"], ["create"])

    def test_token_reviews_name_the_token_s_user(self):
        self.delegate()
        r = self.review(token_review("alice-token"))
        self.assertEqual((r["kind"], r["apiVersion"]), ("TokenReview", "authentication.k8s.io/v1"))
        self.assertEqual(r["status"], {
            "authenticated": True,
            "user": {"username": "alice", "groups": ["system:authenticated"]},
            "audiences": ["https://kubernetes.default.svc.cluster.local"]})
        user_ = self.review(token_review("builder-token"))["status"]["user"]
        self.assertEqual(user_["username"], "system:serviceaccount:ci:builder")
        self.assertEqual(user_["groups"], ["ci-bots", "system:serviceaccounts",
                                           "system:serviceaccounts:ci", "system:authenticated"])
        self.assertEqual(len(user_["uid"]), 36)
        self.assertEqual(self.review(token_review("builder-token"))["status"]["user"]["uid"],
                         user_["uid"])
        # An unknown token is no error: the answer says nothing of it, as the
        # omitempty fields of kube-apiserver's answer leave it.
        self.assertEqual(self.review(token_review("nobody-token"))["status"], {"user": {}})
        body = self.assertStatus(self.kcm.post(TOKEN_REVIEWS, token_review("")), 400,
                                 "BadRequest")
        self.assertEqual(body["message"], "token is required for TokenReview in authentication")
        self.assertStatus(self.kcm.post(TOKEN_REVIEWS, dict(token_review("x"), kind="Pod")),
                          400, "BadRequest")
        self.assertStatus(self.kcm.post(TOKEN_REVIEWS, b"{", content_type="application/json"),
                          400, "BadRequest")

    def test_access_reviews_evaluate_rbac_for_non_resource_urls(self):
        self.delegate()
        self.assertEqual(self.allowed(user_name="alice", path="/metrics"), {"allowed": False})
        self.role("metrics-reader", [{"verbs": ["get"], "nonResourceURLs": ["/metrics"]},
                                     {"verbs": ["get"], "nonResourceURLs": ["/debug/*"]}])
        self.bind("alice-metrics", "ClusterRole", "metrics-reader", [user("alice")])
        self.assertEqual(self.allowed(user_name="alice", path="/metrics"), {
            "allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "alice-metrics" of '
                                       'ClusterRole "metrics-reader" to User "alice"'})
        self.assertFalse(self.allowed(user_name="alice", path="/metrics", verb="post")["allowed"])
        self.assertFalse(self.allowed(user_name="alice", path="/metrics/slis")["allowed"])
        self.assertTrue(self.allowed(user_name="alice", path="/debug/pprof/heap")["allowed"])
        self.assertTrue(self.allowed(user_name="alice", path="/debug/")["allowed"])
        self.assertFalse(self.allowed(user_name="alice", path="/debug")["allowed"])
        self.assertFalse(self.allowed(user_name="alice", path="/debugging")["allowed"])
        # The default policy: health for everyone, /metrics for system:monitoring.
        self.assertEqual(self.allowed(user_name="system:anonymous",
                                      groups=["system:unauthenticated"], path="/healthz"), {
            "allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding '
                                       '"system:public-info-viewer" of ClusterRole '
                                       '"system:public-info-viewer" to Group '
                                       '"system:unauthenticated"'})
        self.assertFalse(self.allowed(user_name="system:anonymous",
                                      groups=["system:unauthenticated"], path="/metrics")["allowed"])
        self.assertTrue(self.allowed(user_name="prom", groups=["system:monitoring"],
                                     path="/readyz/informer-sync")["allowed"])
        self.assertTrue(self.allowed(groups=["system:monitoring"], path="/metrics")["allowed"])
        self.assertEqual(self.allowed(user_name="root", groups=["system:masters"], path="/x"),
                         {"allowed": True})

    def test_access_reviews_evaluate_rbac_for_resources(self):
        self.delegate()
        self.role("pods", [rule([""], ["pods"], ["get"]), rule(["apps"], ["replicasets/status"],
                                                              ["patch"])], ns=self.ns)
        self.bind("devs-pods", "Role", "pods", [group("devs")], ns=self.ns)
        self.bind("kcm-pods", "Role", "pods", [{"kind": "ServiceAccount", "name": "kcm"}],
                  ns=self.ns)
        st = self.allowed(user_name="bob", groups=["devs"], namespace=self.ns, resource="pods",
                          name="p")
        self.assertEqual(st["reason"], 'RBAC: allowed by RoleBinding "devs-pods/%s" of Role '
                                       '"pods" to Group "devs"' % self.ns)
        st = self.allowed(user_name="system:serviceaccount:kube-system:kcm", namespace=self.ns,
                          resource="pods")
        self.assertFalse(st["allowed"])  # bound in this namespace, not kube-system's
        st = self.allowed(user_name="system:serviceaccount:%s:kcm" % self.ns, namespace=self.ns,
                          resource="pods")
        self.assertEqual(st["reason"], 'RBAC: allowed by RoleBinding "kcm-pods/%s" of Role '
                                       '"pods" to ServiceAccount "kcm/%s"' % (self.ns, self.ns))
        for attrs, verdict in (({"namespace": "other", "resource": "pods"}, False),
                               ({"namespace": self.ns, "resource": "pods", "verb": "list"}, False),
                               ({"namespace": self.ns, "group": "apps", "resource": "replicasets",
                                 "subresource": "status", "verb": "patch"}, True),
                               ({"namespace": self.ns, "group": "apps",
                                 "resource": "replicasets", "verb": "patch"}, False)):
            self.assertEqual(self.allowed(groups=["devs"], **attrs)["allowed"], verdict, attrs)
        # A missing role is named in the reason, as RBAC's resolution errors are.
        self.bind("devs-gone", "Role", "gone", [group("devs")], ns=self.ns)
        st = self.allowed(groups=["devs"], namespace=self.ns, resource="pods", verb="delete")
        self.assertEqual(st, {"allowed": False, "reason":
                              'RBAC: role.rbac.authorization.k8s.io "gone" not found'})

    def test_access_reviews_are_validated(self):
        self.delegate()

        def invalid(body, message):
            b = self.assertStatus(self.kcm.post(ACCESS_REVIEWS, body), 422, "Invalid")
            self.assertEqual(b["message"], 'SubjectAccessReview.authorization.k8s.io "" is '
                             'invalid: ' + message)
        invalid(access_review("alice"), 'spec.resourceAttributes: Invalid value: null: exactly '
                'one of nonResourceAttributes or resourceAttributes must be specified')
        invalid(access_review(path="/metrics"),
                'spec.user: Invalid value: "": at least one of user or group must be specified')
        both = access_review("alice", path="/metrics", resource="pods")
        invalid(both, 'spec.nonResourceAttributes: Invalid value: {"path":"/metrics",'
                '"verb":"get"}: cannot be specified in combination with resourceAttributes')
        invalid(access_review("alice", path=7),
                'spec.nonResourceAttributes.path: Invalid value: 7: must be a string')


SA = "/api/v1/namespaces/%s/serviceaccounts"
KCM_USER = 'User "system:serviceaccount:kube-system:%s"'


def token_request(seconds=None, **spec):
    if seconds is not None:
        spec["expirationSeconds"] = seconds
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}


def replicaset(name, labels=None):
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


class TokenCase(RbacCase):
    def issue(self, name, seconds=None, ns="kube-system", client=None, code=201, **spec):
        r = (client or self.c).post((SA % ns) + "/%s/token" % name, token_request(seconds, **spec))
        self.assertEqual(r.status, code, r.body)
        return r.json()

    def as_token(self, token):
        client = Client(self.sim.url, token, os.path.join(self.sim.dir, "ca.crt"))
        self.addCleanup(lambda: getattr(client.local, "conn", None) and client.local.conn.close())
        return client


class ServiceAccountTokens(TokenCase):
    """ServiceAccounts, the TokenRequest API and the controllers' bootstrap roles."""

    def test_service_accounts_are_objects_and_the_controllers_exist_at_start(self):
        names = {i["metadata"]["name"] for i in self.c.get(SA % "kube-system").json()["items"]}
        self.assertTrue({"deployment-controller", "replicaset-controller"} <= names, names)
        sa = self.create(SA, {"apiVersion": "v1", "kind": "ServiceAccount",
                              "metadata": {"name": "builder"}})
        self.assertEqual(sa["kind"], "ServiceAccount")
        self.assertEqual(len(sa["metadata"]["uid"]), 36)
        self.assertStatus(self.c.post(SA % self.ns, {"metadata": {"name": "builder"}}), 409,
                          "AlreadyExists")
        self.assertEqual(self.c.get((SA % self.ns) + "/builder").json()["metadata"]["uid"],
                         sa["metadata"]["uid"])
        self.assertEqual(self.c.delete((SA % self.ns) + "/builder").status, 200)
        self.assertStatus(self.c.get((SA % self.ns) + "/builder"), 404, "NotFound")
        disc = {r["name"]: r for r in self.c.get("/api/v1").json()["resources"]}
        self.assertEqual(disc["serviceaccounts"]["shortNames"], ["sa"])
        self.assertEqual(disc["serviceaccounts/token"], {
            "name": "serviceaccounts/token", "singularName": "", "namespaced": True,
            "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
            "verbs": ["create"]})

    def test_a_token_authenticates_as_its_service_account(self):
        before = time.time()
        tr = self.issue("replicaset-controller")
        self.assertEqual((tr["kind"], tr["apiVersion"]), ("TokenRequest", "authentication.k8s.io/v1"))
        self.assertEqual((tr["metadata"]["name"], tr["metadata"]["namespace"]),
                         ("replicaset-controller", "kube-system"))
        self.assertEqual(tr["spec"]["expirationSeconds"], 3600)
        self.assertEqual(tr["spec"]["audiences"], ["https://kubernetes.default.svc.cluster.local"])
        expires = time.mktime(time.strptime(tr["status"]["expirationTimestamp"],
                                            "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
        self.assertTrue(before + 3599 <= expires <= time.time() + 3600, (before, expires))
        rs = self.as_token(tr["status"]["token"])
        self.assertEqual(rs.get(PODS % self.ns).status, 200)
        # A null duration, as `kubectl create token` sends it, is defaulted too.
        tr = self.issue("replicaset-controller", expirationSeconds=None)
        self.assertEqual(tr["spec"]["expirationSeconds"], 3600)
        self.delegate_reviews()
        review = self.kcm.post(TOKEN_REVIEWS, token_review(tr["status"]["token"])).json()
        sa = self.c.get((SA % "kube-system") + "/replicaset-controller").json()
        self.assertEqual(review["status"]["user"], {
            "username": "system:serviceaccount:kube-system:replicaset-controller",
            "uid": sa["metadata"]["uid"],
            "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                       "system:authenticated"]})
        # A token for another audience is not one for this server.
        other = self.issue("replicaset-controller", audiences=["https://vault.example"])
        self.assertStatus(self.as_token(other["status"]["token"]).get(PODS % self.ns), 401,
                          "Unauthorized")
        forged = tr["status"]["token"][:-2] + ("AA" if tr["status"]["token"][-2:] != "AA"
                                               else "BB")
        self.assertStatus(self.as_token(forged).get(PODS % self.ns), 401, "Unauthorized")

    def delegate_reviews(self):
        self.bind("kcm-delegator", "ClusterRole", "system:auth-delegator",
                  [{"kind": "ServiceAccount", "name": "kcm", "namespace": "kube-system"}])

    def test_token_requests_are_validated_and_need_the_account(self):
        body = self.issue("replicaset-controller", 599, code=422)
        self.assertEqual(body["message"], 'TokenRequest.authentication.k8s.io "" is invalid: '
                         'spec.expirationSeconds: Invalid value: 599: may not specify a duration '
                         'less than 10 minutes')
        self.assertEqual(self.issue("replicaset-controller", 600)["spec"]["expirationSeconds"],
                         600)
        body = self.issue("nobody", code=404)
        self.assertEqual(body["message"], 'serviceaccounts "nobody" not found')
        r = self.c.post((SA % "kube-system") + "/replicaset-controller/token",
                        dict(token_request(), metadata={"name": "deployment-controller"}))
        body = self.assertStatus(r, 422, "Invalid")
        self.assertEqual(body["message"], 'TokenRequest.authentication.k8s.io '
                         '"replicaset-controller" is invalid: metadata.name: Invalid value: '
                         '"deployment-controller": must match the service account name if '
                         'specified')
        self.assertStatus(self.c.get((SA % "kube-system") + "/replicaset-controller/token"),
                          405, "MethodNotAllowed")
        self.assertStatus(self.c.post((SA % "kube-system") + "/replicaset-controller/token",
                                      dict(token_request(), kind="Pod")), 400, "BadRequest")

    def test_requesting_a_token_needs_create_on_serviceaccounts_token(self):
        self.assertForbidden(
            self.kcm.post((SA % "kube-system") + "/replicaset-controller/token", token_request()),
            'serviceaccounts "replicaset-controller" is forbidden: %s cannot create resource '
            '"serviceaccounts/token" in API group "" in the namespace "kube-system"'
            % (KCM_USER % "kcm"))
        self.bind("kcm-is-kcm", "ClusterRole", "system:kube-controller-manager",
                  [{"kind": "ServiceAccount", "name": "kcm", "namespace": "kube-system"}])
        self.issue("replicaset-controller", client=self.kcm)
        self.assertEqual(self.kcm.get((SA % "kube-system") + "/deployment-controller").status,
                         200)
        self.assertEqual(self.kcm.post(SA % self.ns, {"metadata": {"name": "x"}}).status, 201)
        self.assertForbidden(self.kcm.delete((SA % self.ns) + "/x"),
                             'serviceaccounts "x" is forbidden: %s cannot delete resource '
                             '"serviceaccounts" in API group "" in the namespace "%s"'
                             % (KCM_USER % "kcm", self.ns))

    def test_the_controllers_roles_allow_their_work_and_nothing_more(self):
        rsc = self.as_token(self.issue("replicaset-controller")["status"]["token"])
        dc = self.as_token(self.issue("deployment-controller")["status"]["token"])
        # The deployment controller makes ReplicaSets, reads Deployments and pods.
        self.assertEqual(dc.post(RS % self.ns, replicaset("web")).status, 201)
        self.assertEqual(dc.get(APPS % self.ns).status, 200)
        self.assertEqual(dc.get(PODS % self.ns).status, 200)
        self.assertForbidden(dc.post(PODS % self.ns, pod("p")),
                             'pods is forbidden: %s cannot create resource "pods" in API group '
                             '"" in the namespace "%s"' % (KCM_USER % "deployment-controller",
                                                           self.ns))
        # The ReplicaSet controller makes pods and writes ReplicaSet status.
        self.assertEqual(rsc.post(PODS % self.ns, pod("p")).status, 201)
        rs = self.c.get((RS % self.ns) + "/web").json()
        rs["status"] = {"replicas": 1, "observedGeneration": 1}
        self.assertEqual(rsc.put((RS % self.ns) + "/web/status", rs).status, 200)
        self.assertEqual(rsc.delete((PODS % self.ns) + "/p").status, 200)
        self.assertForbidden(rsc.post(RS % self.ns, replicaset("other")),
                             'replicasets.apps is forbidden: %s cannot create resource '
                             '"replicasets" in API group "apps" in the namespace "%s"'
                             % (KCM_USER % "replicaset-controller", self.ns))
        self.assertEqual(rsc.patch((RS % self.ns) + "/web/status", {"status": {}}).status, 403)
        event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
                 "involvedObject": {"kind": "ReplicaSet", "name": "web", "namespace": self.ns},
                 "reason": "SuccessfulCreate", "message": "m", "type": "Normal"}
        self.assertEqual(rsc.post("/api/v1/namespaces/%s/events" % self.ns, event).status, 201)
        # The roles are upstream's, bound to the kube-system accounts.
        role = self.c.get(RBAC + "/clusterroles/system:controller:replicaset-controller").json()
        self.assertIn(rule(["apps", "extensions"], ["replicasets"],
                           ["get", "list", "update", "watch"]), role["rules"])
        self.assertIn(rule([""], ["pods"], ["create", "delete", "list", "patch", "watch"]),
                      role["rules"])
        binding = self.c.get(RBAC + "/clusterrolebindings/system:controller:deployment-controller"
                             ).json()
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount",
                                                "name": "deployment-controller",
                                                "namespace": "kube-system"}])
        self.assertEqual(binding["roleRef"]["name"], "system:controller:deployment-controller")


    def test_kube_controller_manager_user_reads_and_asks_for_tokens(self):
        """What kubeadm's kubeconfig for kube-controller-manager may do: list
        and watch everything, get no pod, ask for the controllers' tokens."""
        kcm = self.as_token("kcm-user-token")
        self.assertEqual(kcm.get("/api/v1/pods").status, 200)
        self.assertEqual(kcm.get("/apis/apps/v1/replicasets?watch=1&timeoutSeconds=1").status, 200)
        self.create(PODS, pod("p"))
        self.assertForbidden(kcm.get((PODS % self.ns) + "/p"),
                             'pods "p" is forbidden: User "system:kube-controller-manager" '
                             'cannot get resource "pods" in API group "" in the namespace "%s"'
                             % self.ns)
        self.assertForbidden(kcm.post(PODS % self.ns, pod("q")),
                             'pods is forbidden: User "system:kube-controller-manager" cannot '
                             'create resource "pods" in API group "" in the namespace "%s"'
                             % self.ns)
        tr = self.issue("replicaset-controller", client=kcm)
        self.assertEqual(self.as_token(tr["status"]["token"]).get(PODS % self.ns).status, 200)


class ShortLivedTokens(TokenCase):
    """--min-token-seconds lets tests see tokens expire; --audit-log records who did what."""

    @classmethod
    def setUpClass(cls):
        cls.audit_dir = tempfile.mkdtemp(prefix="kcm-audit-")
        cls.audit = os.path.join(cls.audit_dir, "audit.log")
        cls.args = RbacCase.args + ("--min-token-seconds", "1", "--audit-log", cls.audit)
        super().setUpClass()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.audit_dir, ignore_errors=True)

    def test_an_expired_token_is_refused(self):
        body = self.issue("replicaset-controller", 0, code=422)
        self.assertIn("spec.expirationSeconds: Invalid value: 0: may not specify a duration "
                      "less than 1 seconds", body["message"])
        tr = self.issue("replicaset-controller", 3)
        self.assertEqual(tr["spec"]["expirationSeconds"], 3)
        client = self.as_token(tr["status"]["token"])
        self.assertEqual(client.get(PODS % self.ns).status, 200)
        wait_for(lambda: client.get(PODS % self.ns).status == 401, timeout=10,
                 what="the token to expire")
        self.assertGreaterEqual(time.time() + 1, time.mktime(time.strptime(
            tr["status"]["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone)

    def test_a_token_dies_with_its_service_account(self):
        self.create(SA, {"metadata": {"name": "worker"}})
        self.bind("worker-reads-%s" % self.ns, "ClusterRole",
                  "system:controller:replicaset-controller",
                  [{"kind": "ServiceAccount", "name": "worker", "namespace": self.ns}])
        old = self.as_token(self.issue("worker", ns=self.ns)["status"]["token"])
        self.assertEqual(old.get(PODS % self.ns).status, 200)
        self.assertEqual(self.c.delete((SA % self.ns) + "/worker").status, 200)
        self.assertStatus(old.get(PODS % self.ns), 401, "Unauthorized")
        self.create(SA, {"metadata": {"name": "worker"}})  # same name, another uid
        self.assertStatus(old.get(PODS % self.ns), 401, "Unauthorized")
        new = self.as_token(self.issue("worker", ns=self.ns)["status"]["token"])
        self.assertEqual(new.get(PODS % self.ns).status, 200)

    def test_the_audit_log_names_who_did_what(self):
        rsc = self.as_token(self.issue("replicaset-controller")["status"]["token"])
        agent = "kcm/v0.1 (linux/amd64) replicaset-controller"
        r = rsc.post(PODS % self.ns, pod("audited"), headers={"User-Agent": agent})
        self.assertEqual(r.status, 201, r.body)
        audit_id = r.headers["Audit-Id"]
        self.assertEqual(rsc.post(RS % self.ns, replicaset("nope")).status, 403)

        def events():
            with open(self.audit) as f:
                return [json.loads(line) for line in f]

        ev = wait_for(lambda: next((e for e in events() if e["auditID"] == audit_id), None),
                      timeout=5, what="the pod create in the audit log")
        self.assertEqual((ev["kind"], ev["apiVersion"], ev["level"], ev["stage"]),
                         ("Event", "audit.k8s.io/v1", "Metadata", "ResponseComplete"))
        self.assertEqual(ev["user"]["username"],
                         "system:serviceaccount:kube-system:replicaset-controller")
        self.assertIn("system:serviceaccounts:kube-system", ev["user"]["groups"])
        self.assertEqual(ev["userAgent"], agent)
        self.assertEqual(ev["verb"], "create")
        self.assertEqual(ev["objectRef"], {"resource": "pods", "namespace": self.ns,
                                           "name": "audited", "apiVersion": "v1"})
        self.assertEqual(ev["responseStatus"]["code"], 201)
        self.assertEqual(ev["requestURI"], PODS % self.ns)
        denied = wait_for(lambda: [e for e in events()
                                   if e.get("objectRef", {}).get("resource") == "replicasets"
                                   and e["objectRef"].get("namespace") == self.ns],
                          timeout=5, what="the denied create in the audit log")
        self.assertEqual(denied[0]["responseStatus"]["code"], 403)
        self.assertEqual(denied[0]["objectRef"]["apiGroup"], "apps")
        self.assertEqual(denied[0]["user"]["username"],
                         "system:serviceaccount:kube-system:replicaset-controller")
        issued = [e for e in events() if e.get("objectRef", {}).get("subresource") == "token"
                  and e["objectRef"].get("name") == "replicaset-controller"]
        self.assertIn(("kcm-admin", "create", 201),
                      [(e["user"]["username"], e["verb"], e["responseStatus"]["code"])
                       for e in issued])


if __name__ == "__main__":
    unittest.main()
