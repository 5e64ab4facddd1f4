#!/usr/bin/env bash
# Install what is missing on Debian 12 for what is asked, then configure
# and build into build/ (KCM_BUILD_DIR). Prints what it installs and
# builds, and nothing more when everything is there and up to date.
#
#   bash tests/setup.sh          # kcm, the tests and the package (tests/run.sh)
#   bash tests/setup.sh kcm      # kcm alone (the demo)
#   bash tests/setup.sh fuzz     # clang for tests/fuzz/run.sh; builds nothing
#   KCM_WERROR=ON KCM_SANITIZE=ON bash tests/setup.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${KCM_BUILD_DIR:-$root/build}
what=${1:-all}

packages=(gcc make cmake pkg-config python3 openssl ca-certificates curl
          libcurl4-openssl-dev libssl-dev libjson-c-dev libyaml-dev libuv1-dev)
case "$what" in
  kcm) ;;
  # the unit tests; tests/package; tests/lint/workflows.sh; the image
  # (tests/package/image.sh) and the real node (tests/k8s/node)
  all) packages+=(libcmocka-dev lintian help2man dpkg-dev shellcheck
                  buildah mmdebstrap containerd runc containernetworking-plugins) ;;
  fuzz) packages=(clang-14 libclang-rt-14-dev) ;;
  *)
    echo "usage: $0 [all|kcm|fuzz]" >&2
    exit 2
    ;;
esac
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: apt-get update"
  $sudo apt-get update -qq
  # A line per package as apt sets it up, the dependencies pulled in too.
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    "${missing[@]}" | sed -u -n 's/^Setting up \([^ ]*\) (\([^)]*\)).*/setup:   installed \1 \2/p'
fi
[ "$what" = fuzz ] && exit 0

if ! command -v kubectl >/dev/null 2>&1; then
  echo "setup: kubectl is required (the e2e tests and the demo drive everything with it)." >&2
  echo "setup: install it from https://kubernetes.io/docs/tasks/tools/ and run again." >&2
  exit 1
fi

# The demo builds kcm alone, and a fresh build/ for it needs no cmocka.
flags=(-DBUILD_TESTING=ON)
target=()
if [ "$what" = kcm ]; then
  target=(--target kcm)
  flags=()
  [ -f "$build/CMakeCache.txt" ] || flags=(-DBUILD_TESTING=OFF)
fi
[ -f "$build/CMakeCache.txt" ] || echo "setup: configuring $build"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${flags[@]}" \
  -DKCM_WERROR="${KCM_WERROR:-OFF}" -DKCM_SANITIZE="${KCM_SANITIZE:-OFF}" >/dev/null
# The compiler's lines only: one per file compiled or linked, none when
# nothing changed; warnings and errors in full.
cmake --build "$build" -j"$(nproc)" "${target[@]}" 2>&1 |
  sed -u -n -E \
    -e '/Building C object/{s|^\[ *([0-9]+%)\] .*\.dir/(.*)\.o$|setup: [\1] compiling \2|p;d}' \
    -e '/Linking C executable/{s|^\[ *([0-9]+%)\] Linking C executable (.*)$|setup: [\1] linking \2|p;d}' \
    -e '/^\[ *[0-9]+%\]|^g?make/d' -e p
