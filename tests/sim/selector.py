"""Label and field selectors, parsed and matched the way kube-apiserver does.

Label selector strings follow the apimachinery grammar: comma-separated
requirements `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`,
`k>n`, `k<n`. Field selectors are `path=v`, `path==v`, `path!=v` with
backslash escapes, limited to the fields each resource supports.
"""

import re


class SelectorError(ValueError):
    """A selector that does not parse; the message is what the server says."""


_NAME_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS1123_SUB_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def qualified_name_errors(key):
    """Return a list of problems with a label key (empty when valid)."""
    errs = []
    name = key
    if "/" in key:
        prefix, name = key.split("/", 1)
        if not prefix:
            errs.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _DNS1123_SUB_RE.match(prefix):
            errs.append("prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                        "alphanumeric characters, '-' or '.', and must start and end with an "
                        "alphanumeric character")
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    elif not _NAME_RE.match(name):
        errs.append("name part must consist of alphanumeric characters, '-', '_' or '.', and "
                    "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                    "'my.name',  or '123-abc', regex used for validation is "
                    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
    return errs


def label_value_errors(value):
    if value == "":
        return []
    if len(value) > 63:
        return ["must be no more than 63 characters"]
    if not _NAME_RE.match(value):
        return ["a valid label must be an empty string or consist of alphanumeric characters, "
                "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"]
    return []


# --- label selector strings -------------------------------------------------

_SPECIAL = "!=(),<>"


def _lex(text):
    """Split a selector into tokens: identifiers and operators."""
    tokens = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
            continue
        two = text[i:i + 2]
        if two in ("==", "!="):
            tokens.append(two)
            i += 2
            continue
        if c in _SPECIAL:
            tokens.append(c)
            i += 1
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in _SPECIAL:
            j += 1
        tokens.append(text[i:j])
        i = j
    return tokens


def _is_ident(tok):
    return tok is not None and tok not in ("==", "!=") and tok not in _SPECIAL


class Requirement:
    __slots__ = ("key", "op", "values")

    def __init__(self, key, op, values):
        self.key, self.op, self.values = key, op, values

    def matches(self, labels):
        has = self.key in labels
        val = labels.get(self.key)
        op = self.op
        if op == "exists":
            return has
        if op == "!":
            return not has
        if op in ("=", "==", "in"):
            return has and val in self.values
        if op in ("!=", "notin"):
            return not has or val not in self.values
        if op in (">", "<"):
            if not has:
                return False
            try:
                lv = int(val)
            except ValueError:
                return False
            rv = int(self.values[0])
            return lv > rv if op == ">" else lv < rv
        return False


def parse_label_selector(text):
    """Parse a label selector string into a list of Requirements.

    Raises SelectorError with the server's wording on bad input.
    """
    reqs = []
    toks = _lex(text or "")
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take():
        nonlocal pos
        tok = peek()
        pos += 1
        return tok

    while pos < len(toks):
        tok = take()
        if tok == "!":
            key = take()
            if not _is_ident(key):
                raise SelectorError("unable to parse requirement: found '%s', expected: identifier"
                                    % (key or ""))
            _check_key(key)
            reqs.append(Requirement(key, "!", []))
        elif _is_ident(tok):
            key = tok
            _check_key(key)
            op = peek()
            if op is None or op == ",":
                reqs.append(Requirement(key, "exists", []))
            elif op in ("=", "==", "!="):
                take()
                val = peek()
                if val is None or val == ",":
                    val = ""
                elif _is_ident(val):
                    take()
                else:
                    raise SelectorError("unable to parse requirement: found '%s', expected: "
                                        "identifier" % val)
                _check_value(val)
                reqs.append(Requirement(key, op, [val]))
            elif op in ("in", "notin"):
                take()
                if take() != "(":
                    raise SelectorError("unable to parse requirement: found '%s', expected: '('"
                                        % (toks[pos - 1] if pos - 1 < len(toks) else ""))
                values = []
                while True:
                    val = peek()
                    if val == ")":
                        take()
                        break
                    if val is None:
                        raise SelectorError("unable to parse requirement: found '', expected: "
                                            "',', ')' or identifier")
                    if val == ",":
                        take()
                        values.append("")
                        continue
                    if not _is_ident(val):
                        raise SelectorError("unable to parse requirement: found '%s', expected: "
                                            "',', ')' or identifier" % val)
                    take()
                    _check_value(val)
                    values.append(val)
                    sep = peek()
                    if sep == ",":
                        take()
                    elif sep != ")":
                        raise SelectorError("unable to parse requirement: found '%s', expected: "
                                            "',' or ')'" % (sep or ""))
                if not values:
                    raise SelectorError("unable to parse requirement: for 'in', 'notin' "
                                        "operators, values set can't be empty")
                reqs.append(Requirement(key, op, values))
            elif op in (">", "<"):
                take()
                val = take()
                if not _is_ident(val):
                    raise SelectorError("unable to parse requirement: found '%s', expected: "
                                        "identifier" % (val or ""))
                try:
                    int(val)
                except ValueError:
                    raise SelectorError("unable to parse requirement: for 'Gt', 'Lt' operators, "
                                        "the value must be an integer")
                reqs.append(Requirement(key, op, [val]))
            else:
                raise SelectorError("unable to parse requirement: found '%s', expected: "
                                    "in, notin, =, ==, !=, gt, lt" % op)
        else:
            raise SelectorError("found '%s', expected: !, identifier, or 'end of string'" % tok)
        sep = peek()
        if sep is None:
            break
        if sep != ",":
            raise SelectorError("found '%s', expected: ',' or 'end of string'" % sep)
        take()
        if peek() is None:
            raise SelectorError("found '', expected: identifier after ','")
    return reqs


def _check_key(key):
    errs = qualified_name_errors(key)
    if errs:
        raise SelectorError("unable to parse requirement: values[0][%s]: Invalid value: \"%s\": %s"
                            % (key, key, errs[0]))


def _check_value(val):
    errs = label_value_errors(val)
    if errs:
        raise SelectorError("unable to parse requirement: values[0][%s]: Invalid value: \"%s\": %s"
                            % (val, val, errs[0]))


def labels_match(reqs, labels):
    labels = labels or {}
    return all(r.matches(labels) for r in reqs)


# --- metav1.LabelSelector objects ----------------------------------------------


def selector_object_matches(sel, labels):
    """Match a metav1.LabelSelector (matchLabels/matchExpressions) against labels.

    A nil selector matches nothing; an empty one matches everything.
    """
    if sel is None:
        return False
    labels = labels or {}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in sel.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        has = key in labels
        if op == "In" and not (has and labels[key] in values):
            return False
        if op == "NotIn" and has and labels[key] in values:
            return False
        if op == "Exists" and not has:
            return False
        if op == "DoesNotExist" and has:
            return False
    return True


def selector_object_errors(sel, path):
    """Validation errors for a metav1.LabelSelector, as (field, detail) pairs."""
    errs = []
    for k, v in (sel.get("matchLabels") or {}).items():
        for e in qualified_name_errors(k):
            errs.append(("%s.matchLabels" % path, "Invalid value: \"%s\": %s" % (k, e)))
        if not isinstance(v, str):
            errs.append(("%s.matchLabels" % path, "Invalid value: %r: must be a string" % (v,)))
            continue
        for e in label_value_errors(v):
            errs.append(("%s.matchLabels" % path, "Invalid value: \"%s\": %s" % (v, e)))
    for i, expr in enumerate(sel.get("matchExpressions") or []):
        op = expr.get("operator")
        values = expr.get("values") or []
        p = "%s.matchExpressions[%d]" % (path, i)
        if op in ("In", "NotIn") and not values:
            errs.append((p + ".values", "Required value: must be specified when `operator` is "
                         "'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and values:
            errs.append((p + ".values", "Forbidden: may not be specified when `operator` is "
                         "'Exists' or 'DoesNotExist'"))
        elif op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            errs.append((p + ".operator", "Invalid value: \"%s\": not a valid selector operator"
                         % op))
    return errs


def selector_object_string(sel):
    """Render a metav1.LabelSelector as the string form (as in scale.status.selector)."""
    if not sel:
        return ""
    parts = []
    reqs = []
    for k, v in (sel.get("matchLabels") or {}).items():
        reqs.append((k, "=", [v]))
    for expr in sel.get("matchExpressions") or []:
        op = {"In": "in", "NotIn": "notin", "Exists": "", "DoesNotExist": "!"}.get(
            expr.get("operator"), "")
        reqs.append((expr.get("key"), op, sorted(expr.get("values") or [])))
    reqs.sort(key=lambda r: r[0])
    for key, op, values in reqs:
        if op == "=":
            parts.append("%s=%s" % (key, values[0]))
        elif op in ("in", "notin"):
            parts.append("%s %s (%s)" % (key, op, ",".join(values)))
        elif op == "!":
            parts.append("!%s" % key)
        else:
            parts.append(key)
    return ",".join(parts)


def selector_object_is_empty(sel):
    return not sel or (not sel.get("matchLabels") and not sel.get("matchExpressions"))


# --- field selectors -----------------------------------------------------------


def parse_field_selector(text, supported, unsupported_message):
    """Parse `a=b,c!=d` into (path, op, value) triples.

    `supported` is the set of field paths the resource allows;
    `unsupported_message(path)` words the error for any other.
    """
    out = []
    if not text:
        return out
    for term in _split_unescaped(text, ","):
        if term == "":
            continue
        for op in ("!=", "==", "="):
            idx = _find_unescaped(term, op)
            if idx >= 0:
                path, value = term[:idx], _unescape(term[idx + len(op):])
                break
        else:
            raise SelectorError("invalid selector: '%s'; can't understand '%s'" % (text, term))
        if path not in supported:
            raise SelectorError(unsupported_message(path))
        out.append((path, "!=" if op == "!=" else "=", value))
    return out


def _split_unescaped(text, sep):
    parts, cur, i = [], [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if c == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _find_unescaped(term, op):
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        if term.startswith(op, i):
            return i
        i += 1
    return -1


def _unescape(value):
    return re.sub(r"\\(.)", r"\1", value)


def field_value(obj, path):
    """Look up a dotted path in an object; missing values read as ''."""
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def fields_match(terms, obj):
    for path, op, value in terms:
        got = field_value(obj, path)
        if (got == value) != (op == "="):
            return False
    return True
