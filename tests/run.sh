#!/usr/bin/env bash
# Build kcm and run every test: unit tests, the local API server's own
# tests and the e2e scenarios (kubectl against the local API server and kcm).
#
#   bash tests/run.sh              # everything
#   bash tests/run.sh -L unit      # extra arguments go to ctest
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KCM_BUILD_DIR:-$root/build}

bash "$root/tests/setup.sh"
ctest --test-dir "$build" --output-on-failure "$@"
