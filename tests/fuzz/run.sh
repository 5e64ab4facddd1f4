#!/usr/bin/env bash
# Build the libFuzzer targets with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and run each for a bounded time from a copy
# of its seed corpus (tests/fuzz/corpus/<target>). Exits non-zero, naming
# the target and the input, if one crashes, leaks or times out.
#
#   bash tests/fuzz/run.sh          # 30 s per target
#   bash tests/fuzz/run.sh 600      # longer
#   KCM_FUZZ_BUILD_DIR=... bash tests/fuzz/run.sh
set -euo pipefail

seconds=${1:-30}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${KCM_FUZZ_BUILD_DIR:-$root/build-fuzz}
targets=(decode framing kubeconfig selector exec_credential)

CC=${KCM_FUZZ_CC:-clang-14} cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKCM_FUZZ=ON -DKCM_WERROR="${KCM_WERROR:-OFF}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >/dev/null

work=$(mktemp -d /tmp/kcm-fuzz-run-XXXXXX)
trap 'rm -rf "$work"' EXIT
failed=0
for t in "${targets[@]}"; do
  mkdir -p "$work/$t/corpus" "$work/$t/crashes"
  cp "$root/tests/fuzz/corpus/$t/"* "$work/$t/corpus/"
  if (cd "$work/$t" && "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$work/$t/crashes/" \
        corpus </dev/null >log 2>&1); then
    echo "fuzz_$t: clean, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work/$t/log" |
      grep -o '[0-9]*$') runs in ${seconds}s, $(grep -o 'cov: [0-9]* ft: [0-9]*' "$work/$t/log" |
      tail -1)"
  else
    failed=1
    echo "fuzz_$t: FAILED; the input is kept in $root/build-fuzz-crashes/$t:" >&2
    mkdir -p "$root/build-fuzz-crashes/$t"
    cp "$work/$t/crashes/"* "$root/build-fuzz-crashes/$t/" 2>/dev/null || true
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$work/$t/log" | head -20 >&2
  fi
done
exit $failed
