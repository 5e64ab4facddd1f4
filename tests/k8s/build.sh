#!/usr/bin/env bash
# Build the Kubernetes that tests/k8s/go.mod pins (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, etcd, kwok with the stages of
# kwokstages, and e2e.test of upstream's sig-apps specs) into a cache
# outside the tree, once per version and sources; print the directory that
# holds them.
#
#   bash tests/k8s/build.sh            # ~/.cache/kcm-k8s/v1.37.2
#   KCM_K8S_CACHE=/somewhere bash tests/k8s/build.sh
#   KCM_K8S_MODULE=DIR bash tests/k8s/build.sh
#
# KCM_K8S_MODULE names another module laid out as this one (go.mod, etcd/,
# e2e/) that pins another release (tests/k8s/matrix.sh writes them); kwok
# and its stages, which only play the nodes, are built from this one.
#
# Needs Go 1.25 or later (/usr/local/go/bin or PATH) and the Go module
# proxy; exits 3, saying so, without them.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
go=$(command -v go || true)
[ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go
if [ -z "$go" ] || ! "$go" version >/dev/null 2>&1; then
  echo "k8s: no Go toolchain found; install Go 1.25 or later (/usr/local/go) and run:" \
    "bash tests/k8s/build.sh" >&2
  exit 3
fi
have=$("$go" env GOVERSION)
minor=$(echo "$have" | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
if [ -z "$minor" ] || [ "$minor" -lt 25 ]; then
  echo "k8s: $go is $have; Go 1.25 or later is needed to build Kubernetes. Install it and run:" \
    "bash tests/k8s/build.sh" >&2
  exit 3
fi

module=$(cd "${KCM_K8S_MODULE:-$here}" && pwd)
version=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$module/go.mod")
cache=${KCM_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kcm-k8s}/$version
stamp=$(cat "$module/go.mod" "$module/go.sum" "$module"/*/*.go "$here/go.sum" \
  "$here"/kwokstages/*.go | sha256sum | cut -c1-16)
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet etcd kwok kwokstages e2e.test)
stamp=$stamp-${#bins[@]}
if [ "$(cat "$cache/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$cache"
  exit 0
fi

# What `kubectl version` and the components' /version report, as a release
# build stamps it.
minor_k8s=$(echo "$version" | cut -d. -f2)
ld=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor_k8s"
  ld+=" -X $pkg.gitTreeState=clean"
done

mkdir -p "$(dirname "$cache")"
work=$(mktemp -d "$(dirname "$cache")/.build-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "k8s: building Kubernetes $version into $cache (a first build takes a while)" >&2
export GOTOOLCHAIN=local GOFLAGS=-mod=readonly
start=$(date +%s)
nodes=(sigs.k8s.io/kwok/cmd/kwok ./kwokstages)
if [ "$module" != "$here" ]; then
  (cd "$here" && "$go" build -trimpath -o "$work/" "${nodes[@]}")
  nodes=()
fi
cd "$module"
"$go" build -trimpath -ldflags "$ld" -o "$work/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet ./etcd "${nodes[@]}"
"$go" test -c -trimpath -ldflags "$ld" -o "$work/e2e.test" ./e2e
for b in "${bins[@]}"; do
  [ -x "$work/$b" ] || { echo "k8s: $b was not built" >&2; exit 1; }
done
echo "$stamp" >"$work/stamp"
rm -rf "$cache"
mv "$work" "$cache"
trap - EXIT
echo "k8s: built in $(($(date +%s) - start)) s" >&2
echo "$cache"
