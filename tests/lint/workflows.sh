#!/usr/bin/env bash
# Check .github/workflows with actionlint (the version tests/lint/go.mod
# pins, built once into a cache outside the tree), and with shellcheck on
# their run: scripts when it is installed. Exits 3, saying so, without a Go
# toolchain.
#
#   bash tests/lint/workflows.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
go=$(command -v go || true)
[ -x /usr/local/go/bin/go ] && go=/usr/local/go/bin/go
if [ -z "$go" ]; then
  echo "workflows: no Go toolchain to build actionlint; the workflows are not checked" >&2
  exit 3
fi
stamp=$(cat "$here/go.mod" "$here/go.sum" | sha256sum | cut -c1-16)
bin=${XDG_CACHE_HOME:-$HOME/.cache}/kcm-tools/actionlint-$stamp
if [ ! -x "$bin" ]; then
  mkdir -p "$(dirname "$bin")"
  (cd "$here" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
    "$go" build -trimpath -o "$bin.tmp" github.com/rhysd/actionlint/cmd/actionlint)
  mv "$bin.tmp" "$bin"
fi
command -v shellcheck >/dev/null || echo "workflows: shellcheck not installed; run: scripts unchecked"
cd "$root"
"$bin" -no-color .github/workflows/*.yml
echo "workflows: $(ls .github/workflows/*.yml | wc -l) checked by actionlint $("$bin" -version | head -1)"
