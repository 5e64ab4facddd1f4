"""kcm takes kube-controller-manager's command line: every flag the given
kube-controller-manager lists in --help is one kcm knows or accepts and
ignores, and every controller name it lists is one --controllers takes, so
that a kubeadm argument list of that release starts kcm unchanged.

    python3 tests/k8s/flags.py KCM KUBE_CONTROLLER_MANAGER
"""
import os
import re
import subprocess
import sys
import tempfile


def help_text(binary):
    p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=60)
    return p.stdout + p.stderr


def flags(text):
    return set(re.findall(r"^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)", text, re.M))


def controllers(text):
    m = re.search(r"All controllers: ([a-z0-9, -]+)", text)
    if not m:
        sys.exit("flags: no 'All controllers:' list in kube-controller-manager --help")
    return [c.strip() for c in m.group(1).split(",") if c.strip()]


def main():
    kcm, upstream = sys.argv[1:3]
    text = help_text(upstream)
    wanted, names = flags(text), controllers(text)
    known = flags(help_text(kcm)) | set(re.findall(r"--([a-z0-9][a-z0-9-]*)", help_text(kcm)))
    missing = sorted(wanted - known)
    # The controller names: kcm gets past its flags to the missing kubeconfig.
    with tempfile.TemporaryDirectory() as d:
        none = os.path.join(d, "none")
        refused = []
        for name in names:
            p = subprocess.run([kcm, "--controllers=*,%s" % name, "--kubeconfig", none],
                               capture_output=True, text=True, timeout=30)
            if none not in p.stderr:
                refused.append(name)
    for f in missing:
        print("flags: kcm does not take --%s" % f)
    for n in refused:
        print("flags: kcm's --controllers refuses %s" % n)
    if missing or refused:
        sys.exit(1)
    print("flags: kcm takes all %d flags and %d controller names of %s" % (
        len(wanted), len(names), os.path.basename(upstream)))


if __name__ == "__main__":
    main()
