#!/usr/bin/env bash
# Build kcm and run every test: unit tests, the local API server's own
# tests, the Debian package (built, checked by lintian, installed, run and
# purged: tests/package/run.sh), the image (tests/package/image.sh: built
# from the Dockerfile by buildah, twice with one digest), the e2e scenarios
# against the local API
# server (kcm, with a kcm in --shadow beside it that must agree and write
# nothing), and the demo; then
# the unit tests and the e2e scenarios again in a build with
# AddressSanitizer and UndefinedBehaviorSanitizer (leak checks included:
# every kcm the scenarios start and stop must exit with nothing leaked),
# kcm run this time as kubeadm runs kube-controller-manager: as the user
# system:kube-controller-manager with --use-service-account-credentials,
# holding only upstream's bootstrap roles and manifests/static-pod's RBAC;
# then the real-server tier (tests/k8s/run.sh: kube-apiserver, etcd and
# kube-controller-manager of the release tests/k8s/go.mod pins, built from
# Go modules, the e2e scenarios on it with the sanitizer build, upstream's
# sig-apps specs against kcm and kube-controller-manager, the scenarios
# with kube-controller-manager in kcm's place, and the image as pods on a
# real node: kubelet and containerd); then each libFuzzer target
# of tests/fuzz for KCM_FUZZ_SECONDS (15) seconds.
#
# Where the real-server tier runs, the scenarios that do not need the local
# API server run against the real one only. Without Go 1.25 or later it is
# left out, saying so, and every scenario runs against the local one.
#
#   bash tests/run.sh              # everything
#   bash tests/run.sh -L unit      # extra arguments go to the first ctest run
#   KCM_NO_SANITIZE=1 bash tests/run.sh   # skip the sanitizer build
#   KCM_NO_K8S=1 bash tests/run.sh        # skip the real-server tier
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KCM_BUILD_DIR:-$root/build}
start=$(date +%s)

bash "$root/tests/setup.sh"

# Kubernetes first, as it is the longest build: whether the tier can run
# decides where the scenarios run.
real=0
if [ -z "${KCM_NO_K8S:-}" ]; then
  rc=0
  bash "$root/tests/k8s/build.sh" >/dev/null || rc=$?
  if [ "$rc" -eq 0 ]; then
    real=1
  elif [ "$rc" -ne 3 ]; then
    echo "tests: building Kubernetes failed" >&2
    exit "$rc"
  fi
else
  echo "tests: KCM_NO_K8S is set: the real-server tier is left out (bash tests/k8s/run.sh build/kcm runs it)"
fi
export KCM_E2E_ONLY_LOCAL=$real

ctest --test-dir "$build" --output-on-failure "$@"

suite_kcm=$build/kcm
if [ -z "${KCM_NO_SANITIZE:-}" ]; then
  echo "== unit and e2e tests under AddressSanitizer and UndefinedBehaviorSanitizer"
  KCM_BUILD_DIR="$build-sanitize" KCM_SANITIZE=ON bash "$root/tests/setup.sh" >/dev/null
  ctest --test-dir "$build-sanitize" --output-on-failure -L unit
  # The long fault scenarios ran in full above; shorter here, and the
  # probes' bound scaled to the slower build.
  KCM_E2E_DROP_SECONDS=20 KCM_E2E_SOAK_SECONDS=15 KCM_E2E_PROBE_SECONDS=3 \
    python3 "$root/tests/e2e/run.py" --kcm "$build-sanitize/kcm" \
    --kcm-arg=--use-service-account-credentials
  suite_kcm=$build-sanitize/kcm
fi
if [ "$real" = 1 ]; then
  echo "== the real-server tier"
  KCM_E2E_PROBE_SECONDS=3 KCM_IMAGE="$build/kcm-image.tar" \
    bash "$root/tests/k8s/run.sh" "$build/kcm" "$suite_kcm"
fi
if [ -z "${KCM_NO_FUZZ:-}" ]; then
  echo "== fuzz targets, ${KCM_FUZZ_SECONDS:-15} s each"
  bash "$root/tests/setup.sh" fuzz
  KCM_FUZZ_BUILD_DIR="$build-fuzz" bash "$root/tests/fuzz/run.sh" "${KCM_FUZZ_SECONDS:-15}"
fi
echo "tests: everything passed in $(($(date +%s) - start)) s"
