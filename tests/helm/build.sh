#!/usr/bin/env bash
# Build helm as tests/helm/go.mod pins it, once, into a cache outside the
# tree; print its path. Exits 3, saying so, without the Go go.mod asks for.
#
#   bash tests/helm/build.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
go=$(command -v go || true)
[ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go
need=$(awk '$1 == "go" {print $2; exit}' "$here/go.mod")
have=$([ -n "$go" ] && "$go" env GOVERSION 2>/dev/null || true)
if [ -z "$have" ] || [ "$(printf '%s\n' "go$need" "$have" | sort -V | head -1)" != "go$need" ]; then
  echo "helm: Go $need or later is needed to build helm (tests/helm/go.mod)${have:+; $go is $have};" \
    "install it and run: bash tests/helm/build.sh" >&2
  exit 3
fi
version=$(awk '$1 == "helm.sh/helm/v4" {print $2; exit}' "$here/go.mod")
stamp=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
bin=${XDG_CACHE_HOME:-$HOME/.cache}/kcm-tools/helm-$version-$stamp
if [ ! -x "$bin" ]; then
  mkdir -p "$(dirname "$bin")"
  echo "helm: building helm $version into $bin" >&2
  # Two builds at once each write their own file; the last one in wins.
  tmp=$(mktemp -d "$bin.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  (cd "$here" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly "$go" build -trimpath \
    -ldflags "-X helm.sh/helm/v4/internal/version.version=$version" \
    -o "$tmp/helm" helm.sh/helm/v4/cmd/helm)
  mv "$tmp/helm" "$bin"
fi
echo "$bin"
