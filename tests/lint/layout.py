#!/usr/bin/env python3
"""The tree's shape, checked: each module's DEPS in CMakeLists.txt are the
modules its files include (no more, no fewer), a file in src/ includes
only public headers (kcm/...) and those of its own directory (never
another module's internals), a kind is named (KCM_KIND_POD, struct
kcm_replicaset, ...) only by its own file in the api module, where its row
and field lists are, by the table of rows, and by the controllers
(everywhere else a kind's row of the kinds says what differs), no function in src/ is over 80 lines, and src/main.c
is at most 400 lines. Prints each finding and exits 1 when
there is one."""

import glob
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FUNCTION_LINES = 80
MAIN_LINES = 400


def modules(cmake):
    """name -> (sources, kcm modules in DEPS) of every kcm_module()."""
    out = {}
    for m in re.finditer(r"kcm_module\((\w+)\s+SOURCES(.*?)(?:DEPS(.*?))?\)", cmake, re.S):
        deps = [d[len("kcm_"):] for d in (m.group(3) or "").split() if d.startswith("kcm_")]
        out[m.group(1)] = (m.group(2).split(), deps)
    return out


def included(name, sources, known):
    """The other modules whose headers the module's files include."""
    files = [os.path.join(ROOT, s) for s in sources]
    files += glob.glob(os.path.join(ROOT, os.path.dirname(sources[0]), "*.h"))
    files.append(os.path.join(ROOT, "include", "kcm", name + ".h"))
    found = set()
    for path in files:
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for inc in re.findall(r'#include "([^"]+)"', f.read()):
                if inc.startswith("kcm/"):
                    other = inc[len("kcm/"):-len(".h")]
                elif inc.startswith("../"):
                    other = inc.split("/")[-2]
                else:
                    continue
                if other in known and other != name:
                    found.add(other)
    return found


def check_deps(findings):
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        mods = modules(f.read())
    for name, (sources, deps) in sorted(mods.items()):
        inc = included(name, sources, mods)
        for other in sorted(inc - set(deps)):
            findings.append("CMakeLists.txt: kcm_%s includes %s.h but does not list kcm_%s"
                            % (name, other, other))
        for other in sorted(set(deps) - inc):
            findings.append("CMakeLists.txt: kcm_%s lists kcm_%s but includes none of its headers"
                            % (name, other))


def check_internal_includes(findings):
    """Only kcm/ headers, system headers and the file's own directory's."""
    for path in sorted(glob.glob(os.path.join(ROOT, "src", "**", "*.[ch]"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        with open(path) as f:
            for n, line in enumerate(f, 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if m and not m.group(1).startswith("kcm/") and "/" in m.group(1):
                    findings.append("%s:%d: includes %s, another directory's header"
                                    % (rel, n, m.group(1)))


# Where a kind may be named: its own file in the api module (its row and its
# field lists), the api module's table of rows, the controllers, and the
# table of them.
KIND_NAMES = re.compile(r"\bKCM_KIND_(?!COUNT\b)[A-Z]+\b|\bstruct kcm_(?:pod|replicaset|deployment)\b")
KIND_PLACES = ("src/api/kind_", "src/api/api.c", "src/controllers/deployment/", "src/controllers/replicaset/",
               "src/controllers/table/table.c", "include/kcm/api.h",
               "include/kcm/deployment.h", "include/kcm/replicaset.h")


def check_kind_branches(findings):
    """A kind named outside its own file, the tables and the controllers."""
    paths = glob.glob(os.path.join(ROOT, "src", "**", "*.[ch]"), recursive=True)
    paths += glob.glob(os.path.join(ROOT, "include", "kcm", "*.h"))
    for path in sorted(paths):
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(KIND_PLACES):
            continue
        with open(path) as f:
            text = code_only(f.read())
        for n, line in enumerate(text.split("\n"), 1):
            m = KIND_NAMES.search(line)
            if m:
                findings.append("%s:%d: names %s: read what differs from the kind's row"
                                % (rel, n, m.group(0)))


def code_only(text):
    """C text with comments and string and character literals emptied, its
    lines where they were."""
    return re.sub(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  lambda m: ("\n" * m.group(0).count("\n")) if m.group(0)[0] == "/" else
                  m.group(0)[0] * 2, text, flags=re.S)


def functions(text):
    """(name, first line, lines) of each function defined in C text."""
    text = code_only(text)
    depth, line, start, name, head_from = 0, 1, None, None, 0
    for i, ch in enumerate(text):
        if ch == "\n":
            line += 1
        elif ch == "{":
            if depth == 0:
                head = text[head_from:i]
                called = re.findall(r"([A-Za-z_]\w*)\s*\(", head)
                start, name = (line, called[0]) if called and "=" not in head else (None, None)
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                if start is not None:
                    yield name, start, line - start + 1
                start, head_from = None, i + 1
        elif ch == ";" and depth == 0:
            head_from = i + 1


def check_sizes(findings):
    for path in sorted(glob.glob(os.path.join(ROOT, "src", "**", "*.c"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        with open(path) as f:
            text = f.read()
        for name, start, n in functions(text):
            if n > FUNCTION_LINES:
                findings.append("%s:%d: %s is %d lines (at most %d)"
                                % (rel, start, name, n, FUNCTION_LINES))
    with open(os.path.join(ROOT, "src", "main.c")) as f:
        n = f.read().count("\n")
    if n > MAIN_LINES:
        findings.append("src/main.c is %d lines (at most %d)" % (n, MAIN_LINES))


def main():
    findings = []
    check_deps(findings)
    check_internal_includes(findings)
    check_kind_branches(findings)
    check_sizes(findings)
    for line in findings:
        print(line)
    print("layout: %d finding%s" % (len(findings), "" if len(findings) == 1 else "s"))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
