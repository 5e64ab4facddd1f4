#!/usr/bin/env bash
# The real-server tier: kcm against the Kubernetes tests/k8s/go.mod pins,
# on clusters of tests/k8s/cluster.sh. First, tests/k8s/flags.py: kcm takes
# every flag and controller name kube-controller-manager --help lists.
#   (a) the project's e2e suite, kcm as kubeadm runs kube-controller-manager
#       (--use-service-account-credentials), a --shadow kcm beside it; the
#       scenarios that need the local API server are skipped, each saying why;
#       then tests/sim's tests of the local API server on the same server, so
#       that where it stands in for kube-apiserver it answers as this one does;
#   (b) upstream's sig-apps Deployment and ReplicaSet specs against kcm,
#       against three kcm instances with --shards and against
#       kube-controller-manager (tests/k8s/specs.py): kcm passes every spec
#       upstream passes, alone and sharded;
#   (c) the e2e suite again with kube-controller-manager's deployment and
#       replicaset controllers in kcm's place, so that the scenarios say what
#       today's upstream does;
#   (d) tests/k8s/differential.py: one seeded sequence of kubectl operations
#       on a cluster run by kcm and on one run by kube-controller-manager,
#       what users see the same after each;
#   (e) tests/k8s/adversary.py: a hostile tenant's seeded sequences of writes
#       (the fixed seeds, kcm listing in pages for half of them and as
#       streams for the others), kcm's invariants checked in a namespace the
#       tenant cannot read;
#   (f) tests/k8s/node/pods.py, beside (d) and (e), its lines marked "(f)":
#       kcm's image as pods on a real node (kubelet and containerd): the
#       static pod and the daemonset variant, real containers scaled and
#       rolled, takeovers timed; then the sharded variant, manifests/helm/kcm
#       installed over it by helm, and upstream's sig-apps specs against
#       that kcm pod.
#
#   bash tests/k8s/run.sh KCM [KCM_FOR_THE_SUITE]   # e.g. build/kcm build-sanitize/kcm
#   KCM_IMAGE=build/kcm-image.tar bash tests/k8s/run.sh build/kcm
#
# (f) runs the image KCM_IMAGE names (an OCI archive of
# tests/package/image.sh), or builds one from the tree.
# Exits 3, saying why and what would run it, when Kubernetes cannot be
# built here (no Go 1.25 or later).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
kcm=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
suite_kcm=$(cd "$(dirname "${2:-$1}")" && pwd)/$(basename "${2:-$1}")

rc=0
bin=$(bash "$here/build.sh") || rc=$?
if [ "$rc" -ne 0 ]; then
  [ "$rc" -eq 3 ] && echo "k8s: the real-server tier did not run; with Go 1.25 or later:" \
    "bash tests/k8s/run.sh $1" >&2
  exit "$rc"
fi
version=$(basename "$bin")
work=$(mktemp -d "${TMPDIR:-/tmp}/kcm-k8s-XXXXXX")
clusters=()
node=""
cleanup() {
  local d
  # pods.py takes its node and cluster down on SIGTERM.
  if [ -n "$node" ]; then
    kill -TERM "$node" 2>/dev/null || true
    wait "$node" 2>/dev/null || true
  fi
  for d in "${clusters[@]}"; do bash "$here/cluster.sh" down "$d" || true; done
  [ "${failed:-1}" = 0 ] && rm -rf "$work"
}
trap cleanup EXIT

up() { # NAME CONTROLLERS
  clusters+=("$work/$1")
  bash "$here/cluster.sh" up "$work/$1" "$2"
}

suite() { # DIR RUN.PY-ARGS...
  local d=$1
  shift
  KCM_E2E_KUBECONFIG=$d/kubeconfig KCM_E2E_KCM_KUBECONFIG=$d/kubeconfig-kcm \
    KCM_E2E_AUDIT_LOG=$d/audit.log python3 "$root/tests/e2e/run.py" "$@"
}

failed=0
start=$(date +%s)
echo "== kcm takes kube-controller-manager $version's flags and controller names"
python3 "$here/flags.py" "$kcm" "$bin/kube-controller-manager" || failed=1
echo "== (a) the e2e suite against kube-apiserver $version"
up a "*,-deployment,-replicaset"
suite "$work/a" --kcm "$suite_kcm" --kcm-arg=--use-service-account-credentials \
  --with-shadow || failed=1
echo "== the local API server's own tests, against kube-apiserver $version"
(cd "$root/tests/sim" && KCM_SIM_COMPARE_KUBECONFIG=$work/a/kubeconfig \
  python3 -m unittest -q test_sim) || failed=1
bash "$here/cluster.sh" down "$work/a"

echo "== (b) upstream's sig-apps Deployment and ReplicaSet specs, kcm (alone and sharded) beside kube-controller-manager $version"
python3 "$here/specs.py" --kcm "$kcm" --work "$work/specs" || failed=1

echo "== (c) the e2e suite with kube-controller-manager $version's controllers in kcm's place"
up c "*,-deployment,-replicaset"
suite "$work/c" --kcm "$bin/kube-controller-manager" \
  --kcm-arg=--controllers=deployment,replicaset --kcm-arg=--leader-elect=false \
  --kcm-arg=--secure-port=0 --kcm-arg=--use-service-account-credentials || failed=1
bash "$here/cluster.sh" down "$work/c"

# (f) mostly waits on a kubelet, so it runs beside (d) and (e), which start
# once its cluster and node are up (each picks free ports). Its lines are
# marked "(f)".
echo "== (f) kcm's image as pods on a real node: kubelet $version and containerd"
image=${KCM_IMAGE:-}
if [ -z "$image" ]; then
  image=$work/kcm-image.tar
  bash "$root/tests/package/image.sh" "$image" || { rm -f "$image"; failed=1; }
fi
helm=$(bash "$root/tests/helm/build.sh") || failed=1
if [ ! -f "$image" ] || [ -z "$helm" ]; then
  echo "k8s: (f) did not run: $([ -f "$image" ] && echo "helm was not built" ||
    echo "no image at $image")" >&2
  failed=1
else
  python3 -u "$here/node/pods.py" --image "$image" --helm "$helm" --work "$work/node" \
    > >(tee "$work/node.log" | sed -u 's/^/(f) /') 2>&1 &
  node=$!
  until grep -q "^node: kcm-node Ready" "$work/node.log" 2>/dev/null ||
    ! kill -0 "$node" 2>/dev/null; do
    sleep 1
  done
fi

echo "== (d) the same kubectl operations on a cluster run by kcm and on one run by kube-controller-manager $version"
python3 "$here/differential.py" --kcm "$kcm" --seed 1 --ops 20 --work "$work/differential" || failed=1

echo "== (e) a hostile tenant's writes against kcm on kube-apiserver $version"
python3 "$here/adversary.py" --kcm "$suite_kcm" --work "$work/adversary" --shrink-minutes 5 ||
  failed=1

if [ -n "$node" ]; then
  rc=0
  wait "$node" || rc=$?
  node=""
  echo "== (f) $([ "$rc" = 0 ] && echo passed || echo "FAILED: exit status $rc")"
  [ "$rc" -eq 0 ] || failed=1
fi

echo "k8s: the real-server tier took $(($(date +%s) - start)) s; $([ $failed = 0 ] && echo passed || echo "FAILED, work directory $work")"
exit "$failed"
