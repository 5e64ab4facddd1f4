#!/usr/bin/env bash
# The image, built from the Dockerfile by buildah with no registry: the
# Dockerfile's `debian:bookworm` is made from Debian's packages by
# mmdebstrap (cached outside the tree), and the Dockerfile runs as written.
# Built twice from nothing, the two must have one digest (the build's
# timestamps come from SOURCE_DATE_EPOCH); the image must know its commit,
# run as the non-root user and hold only kcm, its shared libraries, the CA
# bundle and the user. Writes the image as an OCI archive and prints its
# name, digest and size.
#
#   bash tests/package/image.sh [OUT.tar]     # default build/kcm-image.tar
#
# Needs root (buildah with chroot isolation), buildah, mmdebstrap and the
# Debian mirror (bash tests/setup.sh installs the tools). The image is
# named localhost/kcm:<commit>, or KCM_IMAGE_NAME.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=${1:-$root/build/kcm-image.tar}
for tool in buildah mmdebstrap; do
  command -v "$tool" >/dev/null || { echo "image: $tool not found (bash tests/setup.sh installs it)" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "image: buildah runs here as root; run as root" >&2; exit 1; }

cache=${XDG_CACHE_HOME:-$HOME/.cache}/kcm-image
work=$(mktemp -d "${TMPDIR:-/tmp}/kcm-image-XXXXXX")
store=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs)
cleanup() {
  buildah "${store[@]}" rm --all >/dev/null 2>&1 || true
  # vfs layers are plain directories, some of them read-only.
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The base: Debian bookworm with apt, as the registry's debian:bookworm is,
# from this machine's Debian mirror; one tree per day at most, the older
# ones (and a tree left half made) removed.
mkdir -p "$cache"
base=$cache/bookworm-$(date -u +%Y%m%d)
if [ ! -d "$base" ]; then
  rm -rf "$cache"/bookworm-*
  echo "image: making debian:bookworm from Debian's packages (mmdebstrap)"
  mmdebstrap --quiet --variant=apt --format=directory \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    bookworm "$base.part" >"$work/log" 2>&1 ||
    { cat "$work/log" >&2; echo "image: mmdebstrap failed" >&2; exit 1; }
  mv "$base.part" "$base"
fi
c=$(buildah "${store[@]}" from scratch)
buildah "${store[@]}" add "$c" "$base" / >/dev/null
buildah "${store[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --cmd /bin/bash "$c"
buildah "${store[@]}" commit -q "$c" docker.io/library/debian:bookworm >/dev/null
buildah "${store[@]}" rm "$c" >/dev/null

# As the Dockerfile's header says to build it.
commit=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)
state=clean
[ -z "$(git -C "$root" status --porcelain 2>/dev/null)" ] || state=dirty
epoch=$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 1700000000)
name=${KCM_IMAGE_NAME:-localhost/kcm:${commit:0:12}}
build() { # TAG
  buildah "${store[@]}" bud --quiet --isolation chroot --network host --layers=false \
    --timestamp "$epoch" --build-arg KCM_GIT_COMMIT="$commit" \
    --build-arg KCM_GIT_TREE_STATE="$state" --build-arg SOURCE_DATE_EPOCH="$epoch" \
    -t "$1" "$root" >"$work/log" 2>&1 ||
    { tail -40 "$work/log" >&2; echo "image: the Dockerfile does not build" >&2; exit 1; }
  buildah "${store[@]}" push --quiet --digestfile "$work/digest" "$1" \
    "oci-archive:$work/$2.tar:$name" >/dev/null
  cat "$work/digest"
}
start=$(date +%s)
first=$(build localhost/kcm:first first)
took=$(($(date +%s) - start))
second=$(build localhost/kcm:second second)
if [ "$first" != "$second" ]; then
  echo "image: two builds of one commit differ: $first and $second" >&2
  exit 1
fi

# What is in it, and how it runs.
c=$(buildah "${store[@]}" from localhost/kcm:first)
mnt=$(buildah "${store[@]}" mount "$c")
user=$(buildah "${store[@]}" inspect --format '{{.OCIv1.Config.User}}' localhost/kcm:first)
[ "$user" = 65532:65532 ] || { echo "image: runs as '$user', not 65532:65532" >&2; exit 1; }
version=$(chroot --userspec=65532:65532 "$mnt" /usr/local/bin/kcm --version=raw)
[[ $version == *"GitCommit:\"$commit\""* ]] ||
  { echo "image: kcm --version=raw lacks the commit $commit: $version" >&2; exit 1; }
[ "$(readlink "$mnt/usr/local/bin/kubectl-kcm")" = kcm ] &&
  chroot --userspec=65532:65532 "$mnt" /usr/local/bin/kubectl-kcm why --help | grep -q '^Usage: kcm why' ||
  { echo "image: /usr/local/bin/kubectl-kcm is no link that runs kcm why" >&2; exit 1; }
extra=$(cd "$mnt" && find . -type f ! -path './usr/local/bin/kcm' ! -path './etc/passwd' \
  ! -path './etc/group' ! -path './etc/ssl/certs/ca-certificates.crt' ! -name '*.so*' | sort)
[ -z "$extra" ] || { echo "image: files beyond kcm's own: $extra" >&2; exit 1; }
[ ! -e "$mnt/bin/sh" ] || { echo "image: has a shell" >&2; exit 1; }
size=$(du -sk "$mnt" | cut -f1)
libs=$(cd "$mnt" && find . -name '*.so*' -type f | wc -l)
buildah "${store[@]}" umount "$c" >/dev/null

mkdir -p "$(dirname "$out")"
mv "$work/first.tar" "$out"
echo "image: $name $first: $((size / 1024)) MiB unpacked ($libs shared libraries)," \
  "$(($(stat -c %s "$out") / 1024 / 1024)) MiB archived; built in ${took} s, twice with one digest"
echo "image: OCI archive at $out"
