"""manifests/monitoring: its alerts and its Grafana dashboard read only
metrics kcm exports, in PromQL that parses, each alert says how bad it is
and where its runbook is, the dashboard reads every family, and its
parameters reach every object. And kcm's /metrics exports exactly the
families docs/operations.md lists."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from harness import (ROOT, CommandError, Skip, is_kcm, local_objects, manifest_objects,
                     manifests_with, scenario, suite_kcm_stopped, wait_for)

MONITORING = os.path.join(ROOT, "manifests", "monitoring")
RUNBOOK = os.path.join(ROOT, "docs", "monitoring.md")
OPERATIONS = os.path.join(ROOT, "docs", "operations.md")
# The parameters' defaults (parameters/monitoring.yaml, base/parameters).
RUNBOOK_BASE = "https://github.com/kcm-project/kcm/blob/main/docs/monitoring.md"
PROMETHEUS = ("prometheus-k8s", "monitoring")
LEASE = "kcm"
LEADER_ALERTS = ("KcmNoLeader", "KcmMultipleLeaders")
# How kcm runs, and which documented families it exports then (see
# documented_families).
MODES = {"alone": {"always", "unsharded", "event"},
         "shadow": {"always", "unsharded", "event", "shadow"},
         "shards": {"always", "event", "shards"}}

AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count",
                "count_values", "bottomk", "topk", "quantile"}
FUNCTIONS = {
    "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes", "clamp",
    "clamp_max", "clamp_min", "count_over_time", "day_of_month", "day_of_week", "day_of_year",
    "days_in_month", "delta", "deriv", "exp", "floor", "histogram_quantile", "holt_winters",
    "hour", "idelta", "increase", "irate", "label_join", "label_replace", "last_over_time",
    "ln", "log10", "log2", "max_over_time", "min_over_time", "minute", "month",
    "predict_linear", "present_over_time", "quantile_over_time", "rate", "resets", "round",
    "scalar", "sgn", "sort", "sort_desc", "sqrt", "stddev_over_time", "stdvar_over_time",
    "sum_over_time", "time", "timestamp", "vector", "year",
}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "Inf", "NaN", "inf", "nan"}
HISTOGRAM_SERIES = ("_bucket", "_sum", "_count")
# Grafana's interval variables, and a value for the dashboard's own ones.
GRAFANA_INTERVALS = {"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}
SEVERITIES = {"critical", "warning", "info"}


def grafana_to_promql(expr):
    """A dashboard query as Prometheus would get it from Grafana."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: GRAFANA_INTERVALS.get(m.group(1), "kcm"), expr)


def promql_problems(expr):
    """What makes expr malformed PromQL, by a minimal reading: unbalanced
    brackets, or a call of something that is no PromQL function."""
    problems, stack = [], []
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    pairs = {")": "(", "]": "[", "}": "{"}
    for c in text:
        if c in "([{":
            stack.append(c)
        elif c in pairs and (not stack or stack.pop() != pairs[c]):
            problems.append("unbalanced %r" % c)
    if stack:
        problems.append("unclosed %r" % "".join(stack))
    for name in re.findall(r"([A-Za-z_:][\w:]*)\s*\(", re.sub(r"\{[^{}]*\}", "", text)):
        if name not in FUNCTIONS | AGGREGATIONS | KEYWORDS:
            problems.append("%s( is no PromQL function" % name)
    return problems


def metric_names(expr):
    """The metric names an expression reads: what is left once strings,
    label matchers, ranges, grouping labels, numbers, functions and
    keywords are taken out."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)
    text = re.sub(r"\{[^{}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"(?<![\w:])\d+(\.\d*)?([eE][-+]?\d+)?", " ", text)
    text = re.sub(r"\boffset\s+\w+", " ", text)
    return {n for n in re.findall(r"[A-Za-z_:][\w:]*", text)
            if n not in FUNCTIONS | AGGREGATIONS | KEYWORDS}


def built_objects():
    """The objects `kubectl kustomize manifests/monitoring` builds, by
    (kind, name)."""
    env = dict(os.environ, KUBECONFIG=os.devnull)
    built = subprocess.run(["kubectl", "kustomize", MONITORING], capture_output=True, text=True,
                           timeout=60, env=env)
    if built.returncode != 0:
        raise CommandError("kubectl kustomize %s: %s" % (MONITORING, built.stderr.strip()))
    return local_objects("-", stdin=built.stdout)


def panels(dashboard):
    """Every panel of a dashboard, those in collapsed rows too; rows
    themselves left out."""
    def walk(items):
        for p in items:
            if p["type"] != "row":
                yield p
            yield from walk(p.get("panels", []))
    return list(walk(dashboard["panels"]))


def dashboard_queries(dashboard):
    """Every PromQL query of a dashboard: each panel's targets, and the
    label_values() selectors of its variables."""
    queries = []
    for panel in panels(dashboard):
        targets = [t["expr"] for t in panel.get("targets", []) if t.get("expr")]
        assert targets, "panel %r has no query" % panel["title"]
        queries += [("panel %r" % panel["title"], t) for t in targets]
    for var in dashboard["templating"]["list"]:
        if var["type"] != "query":
            continue
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        m = re.fullmatch(r"label_values\((.*),\s*\w+\)", query)
        assert m, "variable %r: %r is not label_values(selector, label)" % (var["name"], query)
        queries.append(("variable %r" % var["name"], m.group(1)))
    return queries


def runbook_anchors():
    """The anchors of docs/monitoring.md's headings, as GitHub makes them."""
    with open(RUNBOOK) as f:
        headings = re.findall(r"^#+\s+(.*?)\s*$", f.read(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def check_rules(rule, base=RUNBOOK_BASE):
    """The PrometheusRule's alerts: (where, expr) of each, after asserting
    each has a wait, a severity, a summary, a description and a runbook:
    a section of docs/monitoring.md that exists, at the address base."""
    anchors = runbook_anchors()
    queries = []
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            where = "alert %s" % r.get("alert") if "alert" in r else "record %s" % r.get("record")
            queries.append((where, r["expr"]))
            if "alert" not in r:
                continue
            assert re.fullmatch(r"\d+[smh]", r.get("for", "")), (where, r.get("for"))
            assert r.get("labels", {}).get("severity") in SEVERITIES, (where, r.get("labels"))
            notes = r.get("annotations", {})
            assert notes.get("summary") and notes.get("description"), (where, notes)
            page, _, anchor = notes.get("runbook_url", "").partition("#")
            assert page == base and anchor in anchors, (where, notes, sorted(anchors))
    return queries


def leases_watched(rule):
    """alert -> the Lease names the alert's expression selects."""
    return {r["alert"]: re.findall(r'leader_election_master_status\{name="([^"]*)"\}', r["expr"])
            for g in rule["spec"]["groups"] for r in g["rules"] if r.get("alert") in LEADER_ALERTS}


def check_scrape_token(objects, account, namespace):
    """The ServiceMonitor sends a token of Prometheus's service account
    (account in namespace) from a service-account-token Secret beside it,
    and the binding lets that account read /metrics."""
    sm = objects[("ServiceMonitor", "kcm")]
    assert sm["metadata"]["namespace"] == namespace, sm["metadata"]
    secrets = set()
    for ep in sm["spec"]["endpoints"]:
        assert "bearerTokenFile" not in ep, ep
        auth = ep.get("authorization", {})
        assert auth.get("type") == "Bearer" and auth["credentials"]["key"] == "token", ep
        secrets.add(auth["credentials"]["name"])
    for name in secrets:
        secret = objects.get(("Secret", name))
        assert secret, "no Secret %s for the ServiceMonitor" % name
        assert secret["type"] == "kubernetes.io/service-account-token", secret
        assert secret["metadata"]["namespace"] == namespace, secret["metadata"]
        assert secret["metadata"]["annotations"][
            "kubernetes.io/service-account.name"] == account, secret["metadata"]
    binding = objects[("ClusterRoleBinding", "kcm-metrics-reader-prometheus")]
    assert binding["roleRef"]["name"] == "kcm-metrics-reader", binding
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account,
                                    "namespace": namespace}], binding["subjects"]
    return secrets


def check_parameters(workdir):
    """Changed in one place each, the Lease name (base/parameters) and the
    parameters of monitoring/parameters reach every object that names them."""
    values = {"leaseName": "kcm-other", "runbookBase": "https://wiki.example.com/kcm/runbooks",
              "prometheusServiceAccount": "kps-prometheus", "prometheusNamespace": "observe"}
    copy = manifests_with(os.path.join(workdir, "manifests-monitoring"), values)
    objects = manifest_objects("monitoring", copy)
    rule = objects[("PrometheusRule", "kcm")]
    check_rules(rule, values["runbookBase"])
    assert leases_watched(rule) == dict.fromkeys(LEADER_ALERTS, ["kcm-other"]), rule
    check_scrape_token(objects, values["prometheusServiceAccount"], values["prometheusNamespace"])
    placed = {k: o["metadata"].get("namespace") for k, o in objects.items()
              if k[0] != "ClusterRoleBinding"}
    assert set(placed.values()) == {values["prometheusNamespace"]}, placed


def documented_families(path=OPERATIONS):
    """family -> when kcm exports it, from the list in the Metrics section
    of docs/operations.md: a bullet that starts "with `--shadow`:" or
    "with `--shards`:" lists families of that mode ("shadow", "shards"),
    one that starts "after the first ...:" families that appear after that
    event ("event"); a family followed by "(without `--shards`)" is
    "unsharded"; any other is "always". A name after "kube-controller-
    manager's" is upstream's, not kcm's."""
    with open(path) as f:
        text = f.read()
    section = re.search(r"^## Metrics\n(.*?)^## ", text, re.M | re.S)
    assert section, "%s has no Metrics section" % path
    bullets = re.findall(r"^- (.*(?:\n  .*)*)", section.group(1), re.M)
    families = {}
    for b in bullets:
        b = " ".join(b.split())
        m = re.match(r"with `--(shadow|shards)`:|after the first [^:`]*:", b)
        when = (m.group(1) or "event") if m else "always"
        for name, unsharded in re.findall(
                r"(?<!kube-controller-manager's )`([a-z][a-z0-9]*(?:_[a-z0-9]+)+)(?:\{[^`]*\})?`"
                r"( \(without `--shards`\))?", b):
            assert name not in families, "%s is listed twice" % name
            families[name] = "unsharded" if unsharded else when
    return families


def family_of(name, documented):
    """The documented family a name read belongs to (a histogram's series,
    _bucket, _sum and _count, to theirs), or None."""
    if name in documented:
        return name
    return next((name[:-len(s)] for s in HISTOGRAM_SERIES
                 if name.endswith(s) and name[:-len(s)] in documented), None)


def promtool_check(rule, queries):
    """`promtool check rules` on the PrometheusRule's groups and on one
    recording rule per dashboard query, when promtool is installed (the
    Debian package prometheus has it). Returns whether it ran."""
    promtool = shutil.which("promtool")
    if not promtool:
        return False
    groups = list(rule["spec"]["groups"]) + [{"name": "dashboard", "rules": [
        {"record": "dashboard:query_%d" % i, "expr": grafana_to_promql(q)}
        for i, (_, q) in enumerate(queries)]}]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump({"groups": groups}, f)  # JSON is YAML
        f.flush()
        p = subprocess.run([promtool, "check", "rules", f.name], capture_output=True, text=True,
                           timeout=60)
    assert p.returncode == 0, "promtool check rules:\n" + p.stdout + p.stderr
    return True


def exported(body):
    """The sample names of a /metrics page, and the type of each family."""
    samples = set(re.findall(r"^([A-Za-z_:][\w:]*)(?:\{| )", body, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", body, re.M))
    return samples, types


def unexported(names, body):
    """The names kcm does not export, each with why. A histogram's series
    (_bucket, _sum, _count) count by their family."""
    samples, types = exported(body)
    missing = {}
    for name in sorted(names):
        family = next((name[:-len(s)] for s in HISTOGRAM_SERIES if name.endswith(s)
                       and types.get(name[:-len(s)]) == "histogram"), name)
        if types.get(name) == "histogram":
            missing[name] = "a histogram: read its _bucket, _sum or _count series"
        elif family not in types:
            missing[name] = "no such family"
        elif name not in samples:
            missing[name] = "family %s (%s) has no %s sample" % (family, types[family], name)
    return missing


def families(body):
    """The families of a /metrics page."""
    return set(exported(body)[1])


def readers(queries):
    """name read -> where it is read."""
    out = {}
    for where, q in queries:
        for n in metric_names(q):
            out.setdefault(n, []).append(where)
    return out


def unread(names, dashboard_qs):
    """The families among names that no dashboard panel reads."""
    read = readers((w, q) for w, q in dashboard_qs if w.startswith("panel "))
    return sorted(n for n in names if not any(family_of(r, {n}) for r in read))


@scenario("the monitoring alerts and dashboard read only metrics kcm exports, every family "
          "kcm exports is on the dashboard, and the parameters reach every object")
def monitoring_metrics(ctx):
    env = ctx.env
    objects = built_objects()
    cm = objects[("ConfigMap", "kcm-dashboard")]
    assert cm["metadata"]["labels"].get("grafana_dashboard") == "1", cm["metadata"]
    # The parameters' defaults: kube-prometheus's Prometheus sends a token
    # from a Secret; the runbooks are on the project's site; the Lease kcm.
    check_scrape_token(objects, *PROMETHEUS)
    rule = objects[("PrometheusRule", "kcm")]
    rule_queries = check_rules(rule)
    assert leases_watched(rule) == dict.fromkeys(LEADER_ALERTS, [LEASE]), leases_watched(rule)
    check_parameters(env.workdir)
    dashboard_qs = dashboard_queries(json.loads(cm["data"]["kcm.json"]))
    queries = rule_queries + [(w, grafana_to_promql(q)) for w, q in dashboard_qs]
    for where, q in queries:
        assert not promql_problems(q), (where, q, promql_problems(q))
    ran = promtool_check(rule, dashboard_qs)
    print("  %d alert and %d dashboard queries; promtool check rules %s" % (
        len(rule_queries), len(dashboard_qs), "passed" if ran else "not installed"))
    # Every name read is of a documented family, and every documented
    # family is on the dashboard. (The scenario below checks that kcm
    # exports exactly these.)
    documented = documented_families()
    read = readers(queries)
    stray = {n: w for n, w in read.items() if not family_of(n, documented)}
    assert not stray, "not in docs/operations.md's list of metrics: %s" % stray
    missing = unread(documented, dashboard_qs)
    assert not missing, "no dashboard panel reads %s" % ", ".join(missing)
    if env.kcm is None or not is_kcm(env.kcm_binary):
        raise Skip("the manifests are checked; kcm itself is scraped")
    # The suite's kcm (one of the instances with --shards) exports, at
    # once, every family it always does in its mode: each name read of
    # those, and nothing the dashboard leaves out. A Deployment of 2: both
    # queues add, retry and sync; the client is rate limited and answered.
    mode, kcm = ("shards", env.kcm.members[0]) if env.sharded else ("alone", env.kcm)
    names = {n for n in read if documented[family_of(n, documented)] in MODES[mode] - {"event"}}
    later = sorted(set(read) - names)
    from scenarios_deployment import deployment, wait_complete
    from scenarios_kcm import _get, _served
    metrics = _served(kcm, "metrics")
    ctx.apply(deployment("watched", 2))
    wait_complete(ctx, "watched")
    last = {}

    def all_exported():
        code, body = _get(metrics + "/metrics")
        assert code == 200, (code, body)
        last["missing"] = unexported(names, body)
        last["body"] = body
        return not last["missing"]
    try:
        wait_for(all_exported, timeout=20, interval=0.5, what="every metric to be exported")
    except AssertionError:
        raise AssertionError("kcm does not export what manifests/monitoring reads: %s" % "; ".join(
            "%s (%s; read by %s)" % (n, why, ", ".join(sorted(read[n])))
            for n, why in last["missing"].items()))
    missing = unread(families(last["body"]), dashboard_qs)
    assert not missing, "no dashboard panel reads %s, which kcm exports" % ", ".join(missing)
    print("  kcm (%s) exports all %d metrics read of what it always exports then: %s" % (
        mode, len(names), " ".join(sorted(names))))
    print("  read, exported in another mode or after a retry: %s" % " ".join(later))


def _retried_page(ctx, kcm, what):
    """The /metrics page of kcm, a process just started while the local API
    server answers /version with 429 and Retry-After, once its client has
    retried (and the faults are cleared)."""
    from scenarios_kcm import _get, _served
    url = _served(kcm, "metrics") + "/metrics"

    def retried():
        assert kcm.alive(), "%s exited; see %s" % (what, kcm.log_path)
        code, body = _get(url)
        return code == 200 and re.search(r"^rest_client_request_retries_total\{", body, re.M)
    try:
        wait_for(retried, timeout=30, interval=0.2, what="%s to retry after a 429" % what)
    finally:
        ctx.api.faults(clear=True)
    return url


def _check_page(url, expected, mode, pages):
    """Wait until the families on the page at url are `expected`; keep the
    page in pages[mode]."""
    from scenarios_kcm import _get

    def exact():
        code, body = _get(url)
        assert code == 200, (code, body)
        pages[mode] = body
        return families(body) == expected
    try:
        wait_for(exact, timeout=20, interval=0.5, what="kcm %s's families" % mode)
    except AssertionError:
        got = families(pages[mode])
        raise AssertionError("kcm %s: exported, not in docs/operations.md: %s; listed there, not "
                             "exported: %s" % (mode, sorted(got - expected) or "none",
                                               sorted(expected - got) or "none"))


def _page_with(url, line, what):
    """The page at url once it has a line matching `line`."""
    from scenarios_kcm import _get

    def has():
        code, body = _get(url)
        return code == 200 and re.search("^%s$" % line, body, re.M) and body
    return wait_for(has, timeout=30, interval=0.2, what="%s to export %s" % (what, line))


@scenario("the metrics docs/operations.md lists are exactly those kcm's /metrics exports, "
          "alone, with --shadow and with --shards (a request retried after a 429), and the "
          "monitoring dashboard and alerts read only those",
          needs_sim="it makes the server answer 429 with Retry-After")
def documented_metrics(ctx):
    env = ctx.env
    if env.kcm is None or not is_kcm(env.kcm_binary):
        raise Skip("kcm itself is run and inspected")
    from scenarios_replicaset import rs_manifest
    documented = documented_families()
    expected = {m: {f for f, when in documented.items() if when in MODES[m]} for m in MODES}
    # Each mode lists what the others do not: the list was read as meant.
    assert expected["alone"] < expected["shadow"] and expected["shards"] - expected["alone"], \
        documented
    version_429 = {"path": "/version", "code": 429, "retryAfter": 1}
    pages = {}
    # Processes of this scenario's own, one at a time (the suite's kcm
    # stopped: two would sync the same objects), each retrying its first
    # request. Their Leases are in this namespace.
    env.allow_lease(namespace=ctx.ns)
    lease = ["--leader-elect-resource-name=" + ctx.ns,
             "--leader-elect-resource-namespace=" + ctx.ns, "--leader-elect-lease-duration=4s",
             "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=0.5s"]
    runs = (("shadow", lambda d: env.own_shadow(d, "metrics-shadow.log",
                                                extra=["--shadow-window=2s"])),
            ("alone", lambda d: env.own_kcm(d, "metrics-alone.log", extra=lease)),
            ("shards", lambda d: env.own_kcm(d, "metrics-shards.log",
                                             extra=["--shards=4"] + lease)))
    # Series each mode must come to: the Lease named as kcm was told (a kcm
    # without one says kcm); the shadow's disagreement, as no live
    # controller makes the pod of a ReplicaSet (other namespaces may add
    # theirs).
    series = {"shadow": [r'leader_election_master_status\{name="%s"\} 1' % LEASE,
                         r'kcm_shadow_disagreements_total\{controller="replicaset",'
                         r'reason="create pods"\} [1-9][0-9]*'],
              "alone": [r'leader_election_master_status\{name="%s"\} 1' % ctx.ns]}
    with suite_kcm_stopped(ctx, "kcm-after-metrics.log") as d:
        ctx.apply(rs_manifest("unserved", 1))
        for mode, start in runs:
            ctx.api.faults(rules=[version_429])
            kcm = start(d)
            try:
                url = _retried_page(ctx, kcm, "kcm " + mode)
                _check_page(url, expected[mode], mode, pages)
                for line in series.get(mode, []):
                    pages[mode] = _page_with(url, line, "kcm " + mode)
            finally:
                code = kcm.stop()
            assert code == 0, "kcm %s exited %s on SIGTERM; see %s" % (mode, code, kcm.log_path)
    # What the alerts and the dashboard read is exported (a histogram's
    # series as such), and every family exported is on the dashboard.
    objects = built_objects()
    rule_queries = check_rules(objects[("PrometheusRule", "kcm")])
    dashboard_qs = dashboard_queries(json.loads(objects[("ConfigMap", "kcm-dashboard")]["data"][
        "kcm.json"]))
    read = readers(rule_queries + [(w, grafana_to_promql(q)) for w, q in dashboard_qs])
    every = "\n".join(pages.values())
    missing = unexported(read, every)
    assert not missing, "read, not exported: %s" % {
        n: (why, read[n]) for n, why in missing.items()}
    missing = unread(families(every), dashboard_qs)
    assert not missing, "no dashboard panel reads %s, which kcm exports" % ", ".join(missing)
    print("  %s" % "; ".join("%s: %d families" % (m, len(families(b))) for m, b in pages.items()))
