#!/usr/bin/env bash
# Install what kcm needs on Debian 12 (only the packages that are missing),
# then configure and build into build/.
#
#   bash tests/setup.sh            # release build with debug info
#   KCM_WERROR=ON bash tests/setup.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KCM_BUILD_DIR:-$root/build}

packages=(gcc make cmake pkg-config python3 openssl ca-certificates curl
          libcurl4-openssl-dev libssl-dev libjson-c-dev libyaml-dev libuv1-dev libcmocka-dev
          clang-14 libclang-rt-14-dev)  # clang: the fuzz targets (tests/fuzz/run.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
fi

if ! command -v kubectl >/dev/null 2>&1; then
  echo "setup: kubectl is required (the e2e tests and the demo drive everything with it)." >&2
  echo "setup: install it from https://kubernetes.io/docs/tasks/tools/ and run again." >&2
  exit 1
fi

cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKCM_WERROR="${KCM_WERROR:-OFF}" -DKCM_SANITIZE="${KCM_SANITIZE:-OFF}" >/dev/null
cmake --build "$build" -j"$(nproc)"
