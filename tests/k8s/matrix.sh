#!/usr/bin/env bash
# The version matrix: tests/k8s/run.sh (the e2e suite, upstream's sig-apps
# specs beside kube-controller-manager, the suite with upstream in kcm's
# place) on each Kubernetes minor kcm supports, oldest to newest.
#
#   bash tests/k8s/matrix.sh KCM [VERSION ...]
#   # default: v1.34.4 v1.35.4 v1.36.3, then the release go.mod pins
#
# For a release other than the pinned one it writes a module beside the
# build cache (~/.cache/kcm-k8s/modules/VERSION): this directory's etcd/ and
# e2e/ mains, k8s.io/kubernetes at VERSION, its staging modules replaced by
# the matching v0.x, etcd at the version that release requires, resolved
# with `go mod tidy` through the module proxy. Nothing of it enters the
# tree. Each release's output goes to DIR/VERSION.log and a table of the
# three results to standard output; the exit status is 1 if any failed.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ $# -lt 1 ]; then
  echo "usage: $0 KCM [VERSION ...]" >&2
  exit 2
fi
kcm=$1
shift
pinned=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(v1.34.4 v1.35.4 v1.36.3 "$pinned")
go=$(command -v go || true)
[ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go
[ -n "$go" ] || { echo "matrix: no Go toolchain (Go 1.25 or later is needed)" >&2; exit 3; }
root=${KCM_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kcm-k8s}
logs=$(mktemp -d "${TMPDIR:-/tmp}/kcm-matrix-XXXXXX")

# module VERSION: write and resolve the module that pins VERSION; print its dir.
module() {
  local v=$1 dir=$root/modules/$1 gomod minor etcd
  gomod=$(GOFLAGS= "$go" mod download -json "k8s.io/kubernetes@$v" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["GoMod"])') || return 1
  minor=v0.${v#v1.}
  etcd=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2; exit}' "$gomod")
  mkdir -p "$dir"
  rm -rf "$dir/etcd" "$dir/e2e"
  cp -r "$here/etcd" "$here/e2e" "$dir/"
  {
    echo "module kcm.test/k8s"
    echo
    echo "go 1.26.0"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes $v"
    echo "	go.etcd.io/etcd/server/v3 $etcd"
    echo ")"
    echo
    echo "replace ("
    sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$gomod" |
      sort -u | while read -r m; do echo "	$m => $m $minor"; done
    echo ")"
    echo
    echo "tool ("
    echo "	k8s.io/kubernetes/cmd/kube-apiserver"
    echo "	k8s.io/kubernetes/cmd/kube-controller-manager"
    echo "	k8s.io/kubernetes/cmd/kube-scheduler"
    echo ")"
  } >"$dir/go.mod"
  (cd "$dir" && GOFLAGS=-mod=mod GOTOOLCHAIN=local "$go" mod tidy >&2) || return 1
  echo "$dir"
}

summary() { # LOG: "a | b | c" from run.sh's output
  awk '
    /^== \(a\)/ {part = "a"} /^== \(b\)/ {part = "b"} /^== \(c\)/ {part = "c"}
    / passed, .* failed, .* skipped$/ {r[part] = $1 " passed, " $3 " failed, " $8 " skipped"}
    /^specs: kcm passed/ {r[part] = "kcm passed " $4 " upstream " $6 " both failed " $9 ", " $11 " problems"}
    END {printf "%s | %s | %s", r["a"], r["b"], r["c"]}' "$1"
}

failed=0
rows=()
for v in "${versions[@]}"; do
  echo "== Kubernetes $v" >&2
  env=()
  if [ "$v" != "$pinned" ]; then
    dir=$(module "$v") || { rows+=("$v | module did not resolve | |"); failed=1; continue; }
    env=(KCM_K8S_MODULE="$dir")
  fi
  start=$(date +%s)
  env "${env[@]}" bash "$here/run.sh" "$kcm" >"$logs/$v.log" 2>&1
  rc=$?
  [ $rc = 0 ] || failed=1
  rows+=("$v | $(summary "$logs/$v.log") | $(($(date +%s) - start)) s, exit $rc")
  echo "   exit $rc, log $logs/$v.log" >&2
done
echo "| Kubernetes | (a) e2e suite, kcm | (b) sig-apps specs | (c) e2e suite, upstream | time |"
echo "|---|---|---|---|---|"
for r in "${rows[@]}"; do echo "| $r |"; done
echo "logs: $logs" >&2
exit $failed
