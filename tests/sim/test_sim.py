"""Tests of the local API server: it must answer as kube-apiserver does where
kubectl and the controllers depend on it.

Each test class starts one server as a child process; each test works in its
own namespace.
"""

import itertools
import os
import time
import unittest

from simclient import Client, SimProcess, wait_for

APPS = "/apis/apps/v1/namespaces/%s/deployments"
RS = "/apis/apps/v1/namespaces/%s/replicasets"
PODS = "/api/v1/namespaces/%s/pods"

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
    return p


# With KCM_SIM_COMPARE_KUBECONFIG set, the Basics tests run against that
# (real) API server instead, to check that the local one answers alike.
# Tests that need faults, the fake kubelet or the controllers that run
# beside a real API server (garbage collector, namespaces) are skipped.
COMPARE = os.environ.get("KCM_SIM_COMPARE_KUBECONFIG")


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
        self.assertIsNone(spec["template"]["metadata"]["creationTimestamp"])
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

    def test_bad_input_gets_status_codes(self):
        r = self.c.post(APPS % self.ns, b'{"kind":')
        self.assertStatus(r, 400, "BadRequest")
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
        if not COMPARE:  # the local API server speaks JSON only
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
        w = self.c.watch(PODS % self.ns + "?watch=1&allowWatchBookmarks=true&timeoutSeconds=3")
        # A change elsewhere gives the server a newer version to bookmark.
        other = "%s-other" % self.ns
        self.c.post("/api/v1/namespaces", {"metadata": {"name": other}})
        if COMPARE:
            self.c.post("/api/v1/namespaces/%s/serviceaccounts" % other,
                        {"metadata": {"name": "default"}})
        created = self.c.post(PODS % other, pod("elsewhere")).json()
        e = w.next()
        self.assertEqual(e["type"], "BOOKMARK")
        self.assertEqual(e["object"]["kind"], "Pod")
        self.assertGreaterEqual(int(e["object"]["metadata"]["resourceVersion"]),
                                int(created["metadata"]["resourceVersion"]))
        while True:
            e = w.next()
            if e is None:
                break
            self.assertEqual(e["type"], "BOOKMARK")
        self.assertGreaterEqual(time.monotonic() - start, 2.5)
        w.close()

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


@unittest.skipIf(COMPARE, "needs the local API server")
class Faults(SimTestCase):
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


@unittest.skipIf(COMPARE, "needs the local API server")
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


if __name__ == "__main__":
    unittest.main()
