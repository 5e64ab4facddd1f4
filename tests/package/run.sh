#!/usr/bin/env bash
# The Debian package, as an operator meets it: built by CPack, checked by
# lintian (no errors, no warnings), installed with dpkg, its binary and
# man page in place, then kcm started as kcm.service starts it (the flags
# of /etc/default/kcm, with the local API server's kubeconfig in place of
# kubeadm's) until it leads, stopped with SIGTERM (exit 0), and the
# package purged. Installs into the system, so it needs root or sudo; a
# kcm package already installed is left as it was and the test fails.
#
#   bash tests/package/run.sh BUILD_DIR
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
for tool in lintian help2man dpkg-shlibdeps; do
  if ! command -v "$tool" >/dev/null; then
    echo "package: $tool not found (bash tests/setup.sh installs it)" >&2
    exit 1
  fi
done
if dpkg-query -W -f='${Status}' kcm 2>/dev/null | grep -q "ok installed"; then
  echo "package: a kcm package is installed already; remove it first (dpkg -r kcm)" >&2
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kcm-package-XXXXXX")
pids=()
installed=0
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ "$installed" = 1 ]; then $sudo dpkg --purge kcm >/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "package: $*" >&2
  exit 1
}
# shellcheck source=tests/wait_for_line.sh
source "$root/tests/wait_for_line.sh"

echo "== cmake --build $build --target package"
cmake --build "$build" --target package >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "CPack failed"; }
version=$(sed -n 's/^project(kcm VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
deb=$build/kcm_${version}_$(dpkg --print-architecture).deb
[ -f "$deb" ] || fail "CPack made no $deb"

echo "== lintian $(basename "$deb")"
rc=0
lintian --fail-on error,warning "$deb" >"$work/lintian.log" 2>&1 || rc=$?
grep -v "running with root privileges" "$work/lintian.log" | sed 's/^/   /' || true
[ "$rc" = 0 ] || fail "lintian found errors or warnings"

echo "== dpkg --install"
$sudo dpkg --install "$deb" >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg --install failed"; }
installed=1
/usr/bin/kcm --version | grep -q "^kcm v$version " || fail "/usr/bin/kcm --version does not name v$version"
/usr/bin/kcm --version | grep -q "commit unknown" && fail "the packaged kcm does not know its commit"
for f in /usr/share/man/man1/kcm.1.gz /lib/systemd/system/kcm.service /etc/default/kcm \
  /usr/share/doc/kcm/copyright /usr/share/kcm/manifests/static-pod/kustomization.yaml; do
  [ -f "$f" ] || fail "$f is not installed"
done
[ "$(readlink /usr/bin/kubectl-kcm)" = kcm ] || fail "/usr/bin/kubectl-kcm is not a link to kcm"
if command -v kubectl >/dev/null; then
  kubectl kcm why --help | grep -q '^Usage: kcm why KIND/NAME' ||
    fail "kubectl kcm why --help does not run kcm why"
fi
zcat /usr/share/man/man1/kcm.1.gz | grep -qF 'leader\-elect\-resource\-name' ||
  fail "the man page lacks the flags of --help"
zcat /usr/share/man/man1/kcm.1.gz | grep -qF 'kcm why' || fail "the man page lacks kcm why"
grep -q '^ExecStart=/usr/bin/kcm \$KCM_ARGS$' /lib/systemd/system/kcm.service ||
  fail "kcm.service does not start /usr/bin/kcm with \$KCM_ARGS"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /lib/systemd/system/kcm.service 2>&1 | grep -v "^$" | sed 's/^/   /' || true
  SYSTEMD_LOG_LEVEL=err systemd-analyze verify /lib/systemd/system/kcm.service >/dev/null 2>&1 ||
    fail "systemd-analyze verify refuses kcm.service"
fi

echo "== kcm as kcm.service runs it, against the local API server"
python3 "$root/tests/sim/apiserver.py" --dir "$work/apiserver" >"$work/apiserver.log" 2>&1 &
pids+=($!)
wait_for_line "$work/apiserver.log" '^READY' 20
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# shellcheck source=/dev/null
KCM_ARGS=$(set +u; . /etc/default/kcm; echo "$KCM_ARGS")
KCM_ARGS=${KCM_ARGS//\/etc\/kubernetes\/controller-manager.conf/$work/apiserver/kubeconfig}
KCM_ARGS=${KCM_ARGS//--secure-port=10267/--secure-port=$port}
read -r -a args <<<"$KCM_ARGS"
/usr/bin/kcm "${args[@]}" >"$work/kcm.log" 2>&1 &
kcm=$!
pids+=($kcm)
wait_for_line "$work/kcm.log" 'successfully acquired lease' 30
curl -sfk "https://127.0.0.1:$port/healthz" >/dev/null || fail "no /healthz on :$port"
kill -TERM "$kcm"
rc=0
wait "$kcm" || rc=$?
[ "$rc" = 0 ] || { cat "$work/kcm.log" >&2; fail "kcm exited $rc on SIGTERM"; }
grep -q 'released' "$work/kcm.log" || { cat "$work/kcm.log" >&2; fail "kcm did not release its lease"; }

echo "== dpkg --purge kcm"
$sudo dpkg --purge kcm >/dev/null
installed=0
[ ! -e /usr/bin/kcm ] && [ ! -e /etc/default/kcm ] || fail "dpkg --purge left kcm's files"
echo "package: built, lintian-clean, installed, started, stopped and purged"
