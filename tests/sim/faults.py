"""Run-time fault injection: chosen requests answered with an error status,
added latency, and (through the store) dropped watches, compaction and
delayed watch delivery.

A rule matches on any of verb, resource, subresource, namespace, name and
path (a missing field matches anything; a request outside the resources,
such as /version, matches only the rules that name its path) and answers with `code` (and optional
`reason`, `message`, `retryAfter`), with a raw `body` (status `code`,
default 200, and `contentType`, default text/html) in place of a Status,
closes the connection without an answer (`close`: true), carries the
request out and then closes it without an answer (`closeAfter`: true), or
only adds `latencyMs`. `count` limits
how many requests a rule answers; without it the rule stays until cleared.
"""

import threading

DEFAULTS = {
    400: ("BadRequest", "injected fault"),
    403: ("Forbidden", "injected fault"),
    404: ("NotFound", "injected fault"),
    409: ("Conflict", "Operation cannot be fulfilled: the object has been modified; please "
                      "apply your changes to the latest version and try again"),
    410: ("Expired", "injected fault"),
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: injected fault"),
    503: ("ServiceUnavailable", "injected fault"),
    504: ("Timeout", "injected fault"),
}

MATCH_FIELDS = ("verb", "resource", "subresource", "namespace", "name", "path")


class Faults:
    def __init__(self):
        self.lock = threading.Lock()
        self.rules = []
        self.latency_ms = 0
        self.hits = 0

    def set_rules(self, rules):
        checked = [self._check(r) for r in rules]
        with self.lock:
            self.rules = checked

    def add_rule(self, rule):
        checked = self._check(rule)
        with self.lock:
            self.rules.append(checked)

    @staticmethod
    def _check(rule):
        if not isinstance(rule, dict):
            raise ValueError("a rule must be an object")
        unknown = set(rule) - set(MATCH_FIELDS) - {"code", "reason", "message", "retryAfter",
                                                   "count", "latencyMs", "body", "contentType",
                                                   "close", "closeAfter"}
        if unknown:
            raise ValueError("unknown rule fields: %s" % ", ".join(sorted(unknown)))
        code = rule.get("code")
        low = 200 if "body" in rule else 400
        if code is not None and (not isinstance(code, int) or not low <= code <= 599):
            raise ValueError("code must be an HTTP status (%d-599)" % low)
        if code is None and not rule.get("latencyMs") and "body" not in rule and \
                not rule.get("close") and not rule.get("closeAfter"):
            raise ValueError("a rule needs a code, a body, close, closeAfter or latencyMs")
        if "body" in rule and not isinstance(rule["body"], str):
            raise ValueError("body must be a string")
        return dict(rule)

    def match(self, verb, resource, subresource, namespace, name, path=""):
        """Return the first matching rule (consuming one of its count) or None."""
        req = {"verb": verb, "resource": resource, "subresource": subresource or "",
               "namespace": namespace or "", "name": name or "", "path": path}
        with self.lock:
            for rule in self.rules:
                if any(f in rule and rule[f] != req[f] for f in MATCH_FIELDS):
                    continue
                if not resource and "path" not in rule:
                    continue
                if "count" in rule:
                    if rule["count"] <= 0:
                        continue
                    rule["count"] -= 1
                self.hits += 1
                return dict(rule)
        return None

    def clear(self):
        with self.lock:
            self.rules = []
            self.latency_ms = 0

    def describe(self):
        with self.lock:
            return {"rules": [dict(r) for r in self.rules], "latencyMs": self.latency_ms,
                    "hits": self.hits}
