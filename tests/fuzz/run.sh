#!/usr/bin/env bash
# Build the libFuzzer targets with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and run each, as many at once as there are
# CPUs (KCM_FUZZ_JOBS), for a bounded time from
# a copy of its seed corpus (tests/fuzz/corpus/<target>; the copy grows,
# the corpus in the tree does not). Installs nothing. Exits 0 only when
# every target ran clean; else names each target that crashed, leaked,
# timed out or ran out of memory, with the input kept under
# <build>/crashes/<target>/ and the command that replays it.
#
#   bash tests/fuzz/run.sh            # 30 s per target
#   bash tests/fuzz/run.sh 600        # longer
#   KCM_FUZZ_RUNS=1000 bash tests/fuzz/run.sh   # smoke: 1000 inputs per target
#   KCM_FUZZ_TARGETS="decode framing" bash tests/fuzz/run.sh
#   KCM_FUZZ_JOBS=1 bash tests/fuzz/run.sh     # one at a time (default: CPUs, at most 4)
#   KCM_FUZZ_BUILD_DIR=... KCM_FUZZ_CC=clang-15 KCM_WERROR=ON bash tests/fuzz/run.sh
set -euo pipefail

seconds=${1:-30}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(realpath -m "${KCM_FUZZ_BUILD_DIR:-$root/build-fuzz}")
cc=${KCM_FUZZ_CC:-clang-14}
read -r -a targets <<<"${KCM_FUZZ_TARGETS:-decode framing items proto kubeconfig selector exec_credential client_text http_head tls_accept splice escapes reviews pod_why}"

if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: $0 [seconds-per-target]" >&2
  exit 2
fi
# At most 4 at once: each may take 2 GiB under AddressSanitizer.
jobs=${KCM_FUZZ_JOBS:-$(($(nproc) < 4 ? $(nproc) : 4))}
if ! [[ $jobs =~ ^[0-9]+$ ]] || [ "$jobs" -lt 1 ]; then
  echo "fuzz: KCM_FUZZ_JOBS must be a number of at least 1, not '$jobs'" >&2
  exit 2
fi
if ! command -v "$cc" >/dev/null 2>&1; then
  echo "fuzz: $cc not found (Debian: apt-get install clang-14 libclang-rt-14-dev)" >&2
  exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/kcm-fuzz-run-XXXXXX")
pids=() # of the targets running, oldest first
declare -A running=() # pid -> target
cleanup() {
  local p
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'echo "fuzz: interrupted" >&2; exit 130' INT
trap 'echo "fuzz: stopped" >&2; exit 143' TERM
# Leaks fail a run (the default, made explicit); UBSan reports carry a stack.
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

mkdir -p "$build"
if ! CC=$cc cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKCM_FUZZ=ON \
       -DKCM_WERROR="${KCM_WERROR:-OFF}" >"$work/configure.log" 2>&1 ||
   ! cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" \
       >"$work/build.log" 2>&1; then
  cat "$work/configure.log" "$work/build.log" 2>/dev/null | tail -40 >&2
  echo "fuzz: the build failed" >&2
  exit 1
fi

if [ -n "${KCM_FUZZ_RUNS:-}" ]; then
  budget=(-runs="$KCM_FUZZ_RUNS")
  limit=$((600 + seconds))
else
  budget=(-max_total_time="$seconds")
  limit=$((seconds + 120)) # the last input, the final leak check and the stats
fi

rm -rf "$build/crashes"
failed=()

# Says how target $1 ended (exit status $2); keeps what a failure left.
report() {
  local t=$1 rc=$2 dir=$work/$1 runs cov keep a
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$dir/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$dir/log" | tail -1 || true)
  if [ "$rc" -eq 0 ] && [ -z "$(ls -A "$dir/artifacts")" ]; then
    echo "fuzz_$t: clean, ${runs:-?} inputs, ${cov:-no coverage figures}"
    return
  fi
  failed+=("$t")
  keep=$build/crashes/$t
  mkdir -p "$keep"
  echo "fuzz_$t: FAILED (exit status $rc) after ${runs:-?} inputs" >&2
  grep -E "ERROR|SUMMARY|runtime error|check failed|timeout|out-of-memory" \
    "$dir/log" | head -20 >&2 || true
  cp "$dir/log" "$keep/log"
  for a in "$dir/artifacts/"*; do
    [ -e "$a" ] || continue
    cp "$a" "$keep/"
    echo "fuzz_$t: input kept in $keep/$(basename "$a"); replay: $build/tests/fuzz/fuzz_$t" \
      "$keep/$(basename "$a")" >&2
  done
  echo "fuzz_$t: full log in $keep/log" >&2
}

# Waits for the oldest running target to end (they all have one time
# budget), and reports it.
reap() {
  local p=${pids[0]} rc=0
  wait "$p" || rc=$?
  report "${running[$p]}" "$rc"
  unset "running[$p]"
  pids=("${pids[@]:1}")
}

for t in "${targets[@]}"; do
  while [ "${#pids[@]}" -ge "$jobs" ]; do reap; done
  dir=$work/$t
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp "$root/tests/fuzz/corpus/$t/"* "$dir/corpus/"
  # In the background, so that a signal to this script stops it at once.
  (cd "$dir" && exec timeout -k 10 "$limit" "$build/tests/fuzz/fuzz_$t" "${budget[@]}" \
     -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
     corpus </dev/null >"$dir/log" 2>&1) &
  running[$!]=$t
  pids+=("$!")
done
while [ "${#pids[@]}" -gt 0 ]; do reap; done

if ((${#failed[@]})); then
  echo "fuzz: ${#failed[@]} target(s) failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: all ${#targets[@]} targets clean"
