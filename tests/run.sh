#!/usr/bin/env bash
# Build kcm and run every test: unit tests, the local API server's own
# tests and the e2e scenarios (kubectl against the local API server and
# kcm, with a kcm in --shadow beside it that must agree and write
# nothing); then the unit tests and the e2e scenarios again in a build with
# AddressSanitizer and UndefinedBehaviorSanitizer (leak checks included:
# every kcm the scenarios start and stop must exit with nothing leaked),
# kcm run this time as kubeadm runs kube-controller-manager: as the user
# system:kube-controller-manager with --use-service-account-credentials,
# holding only upstream's bootstrap roles and manifests/static-pod's RBAC;
# then each libFuzzer target for KCM_FUZZ_SECONDS (15) seconds.
#
#   bash tests/run.sh              # everything
#   bash tests/run.sh -L unit      # extra arguments go to the first ctest run
#   KCM_NO_SANITIZE=1 bash tests/run.sh   # skip the sanitizer build
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KCM_BUILD_DIR:-$root/build}

bash "$root/tests/setup.sh"
ctest --test-dir "$build" --output-on-failure "$@"

if [ -z "${KCM_NO_SANITIZE:-}" ]; then
  echo "== unit and e2e tests under AddressSanitizer and UndefinedBehaviorSanitizer"
  KCM_BUILD_DIR="$build-sanitize" KCM_SANITIZE=ON bash "$root/tests/setup.sh" >/dev/null
  ctest --test-dir "$build-sanitize" --output-on-failure -L unit
  # The long fault scenarios ran in full above; shorter here, and the
  # probes' bound scaled to the slower build.
  KCM_E2E_DROP_SECONDS=20 KCM_E2E_SOAK_SECONDS=15 KCM_E2E_PROBE_SECONDS=3 \
    python3 "$root/tests/e2e/run.py" --kcm "$build-sanitize/kcm" \
    --kcm-arg=--use-service-account-credentials
fi
if [ -z "${KCM_NO_FUZZ:-}" ]; then
  echo "== fuzz targets, ${KCM_FUZZ_SECONDS:-15} s each"
  KCM_FUZZ_BUILD_DIR="$build-fuzz" bash "$root/tests/fuzz/run.sh" "${KCM_FUZZ_SECONDS:-15}"
fi
