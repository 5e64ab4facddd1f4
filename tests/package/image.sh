#!/usr/bin/env bash
# The image build without an engine: the files the Dockerfile's build stage
# copies, alone in a directory, must configure and build kcm as its RUN
# line does, with the commit passed as a build argument reaching
# `kcm --version`.
#
#   bash tests/package/image.sh
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/kcm-image-XXXXXX")
trap 'rm -rf "$work"' EXIT

# COPY SRC [DEST] lines of the build stage (up to the second FROM).
awk '/^FROM/ { n++ } n == 1 && /^COPY / && !/--from/ { print $2 }' "$root/Dockerfile" |
  while read -r path; do cp -r "$root/$path" "$work/"; done
[ -f "$work/CMakeLists.txt" ] || { echo "image: the Dockerfile copies no CMakeLists.txt" >&2; exit 1; }

commit=0123456789abcdef0123456789abcdef01234567
SOURCE_DATE_EPOCH=1700000000 cmake -S "$work" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_TESTING=OFF -DKCM_GIT_COMMIT=$commit -DKCM_GIT_TREE_STATE=clean >"$work/log" 2>&1 ||
  { cat "$work/log" >&2; echo "image: cmake cannot configure from the copied files" >&2; exit 1; }
cmake --build "$work/build" -j"$(nproc)" --target kcm >"$work/log" 2>&1 ||
  { cat "$work/log" >&2; echo "image: kcm does not build from the copied files" >&2; exit 1; }
version=$("$work/build/kcm" --version=raw)
for want in "GitCommit:\"$commit\"" 'GitTreeState:"clean"' 'BuildDate:"2023-11-14T22:13:20Z"'; do
  [[ $version == *"$want"* ]] || { echo "image: kcm --version=raw lacks $want: $version" >&2; exit 1; }
done
echo "image: kcm builds from what the Dockerfile copies and knows its commit"
