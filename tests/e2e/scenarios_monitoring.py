"""manifests/monitoring: its alerts and its Grafana dashboard read only
metrics kcm exports, in PromQL that parses, and each alert says how bad it
is and where its runbook is."""

import json
import os
import re
import shutil
import subprocess
import tempfile

from harness import ROOT, CommandError, Skip, local_objects, scenario, wait_for

MONITORING = os.path.join(ROOT, "manifests", "monitoring")
RUNBOOK = os.path.join(ROOT, "docs", "monitoring.md")

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


def dashboard_queries(dashboard):
    """Every PromQL query of a dashboard: each panel's targets, and the
    label_values() selectors of its variables."""
    queries = []
    for panel in dashboard["panels"]:
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


def check_rules(rule):
    """The PrometheusRule's alerts: (where, expr) of each, after asserting
    each has a wait, a severity, a summary, a description and a runbook
    section that exists."""
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
            assert page == "docs/monitoring.md" and anchor in anchors, (where, notes, anchors)
    return queries


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


@scenario("the monitoring alerts and dashboard read only metrics kcm exports")
def monitoring_metrics(ctx):
    kcm = ctx.env.kcm
    if kcm is None or not ctx.env.is_kcm:
        raise Skip("kcm itself is scraped")
    objects = built_objects()
    assert ("ServiceMonitor", "kcm") in objects and ("ClusterRoleBinding",
                                                     "kcm-metrics-reader-prometheus") in objects
    cm = objects[("ConfigMap", "kcm-dashboard")]
    assert cm["metadata"]["labels"].get("grafana_dashboard") == "1", cm["metadata"]
    rule = objects[("PrometheusRule", "kcm")]
    rule_queries = check_rules(rule)
    dashboard_qs = dashboard_queries(json.loads(cm["data"]["kcm.json"]))
    queries = rule_queries + [(w, grafana_to_promql(q)) for w, q in dashboard_qs]
    for where, q in queries:
        assert not promql_problems(q), (where, q, promql_problems(q))
    ran = promtool_check(rule, dashboard_qs)
    print("  %d alert and %d dashboard queries; promtool check rules %s" % (
        len(rule_queries), len(dashboard_qs), "passed" if ran else "not installed"))
    names = set().union(*(metric_names(q) for _, q in queries))
    readers = {n: sorted(w for w, q in queries if n in metric_names(q)) for n in names}
    # A Deployment of 2: both queues add, retry and sync; the client is
    # rate limited and answered.
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
        return not last["missing"]
    try:
        wait_for(all_exported, timeout=20, interval=0.5, what="every metric to be exported")
    except AssertionError:
        raise AssertionError("kcm does not export what manifests/monitoring reads: %s" % "; ".join(
            "%s (%s; read by %s)" % (n, why, ", ".join(readers[n]))
            for n, why in last["missing"].items()))
    print("  kcm exports all %d metrics read: %s" % (len(names), " ".join(sorted(names))))
