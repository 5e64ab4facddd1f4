# wait_for_line FILE PATTERN SECONDS: returns once FILE has a line matching
# PATTERN (grep), polling every 0.1 s; after SECONDS without one, prints the
# file and what was awaited to stderr and exits 1. Sourced by the scripts
# that start a process and wait for what it logs.
wait_for_line() {
  local i
  for ((i = 0; i < $3 * 10; i++)); do
    if grep -q "$2" "$1" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  cat "$1" >&2
  echo "$(basename "$0" .sh): no '$2' in $1 within $3 s" >&2
  exit 1
}
