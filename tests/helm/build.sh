#!/usr/bin/env bash
# Build helm as tests/helm/go.mod pins it, once, into a cache outside the
# tree; print its path. Exits 3, saying so, without a Go toolchain.
#
#   bash tests/helm/build.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
go=$(command -v go || true)
[ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go
if [ -z "$go" ] || ! "$go" version >/dev/null 2>&1; then
  echo "helm: no Go toolchain to build helm (tests/helm/go.mod); install Go and run:" \
    "bash tests/helm/build.sh" >&2
  exit 3
fi
version=$(awk '$1 == "helm.sh/helm/v4" {print $2; exit}' "$here/go.mod")
stamp=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
bin=${XDG_CACHE_HOME:-$HOME/.cache}/kcm-tools/helm-$version-$stamp
if [ ! -x "$bin" ]; then
  mkdir -p "$(dirname "$bin")"
  echo "helm: building helm $version into $bin" >&2
  (cd "$here" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$go" build -trimpath \
    -ldflags "-X helm.sh/helm/v4/internal/version.version=$version" \
    -o "$bin.tmp" helm.sh/helm/v4/cmd/helm)
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
