#!/usr/bin/env bash
# Run every fuzz target of the module for FUZZTIME each and print how many
# inputs each one executed. Minimisation of a new input is capped at
# FUZZMINIMIZETIME: Go's default (60 s per input, not counted as execs)
# otherwise spends a short run minimising instead of fuzzing.
#
#   scripts/fuzz.sh [package pattern ...]    (default ./...)
#   FUZZTIME=15s FUZZMINIMIZETIME=1s FUZZPARALLEL=2 scripts/fuzz.sh
set -uo pipefail
go=${GO:-go}
fuzztime=${FUZZTIME:-20s}
minimize=${FUZZMINIMIZETIME:-1s}
parallel=${FUZZPARALLEL:-}
patterns=("$@")
[ ${#patterns[@]} -eq 0 ] && patterns=(./...)

log=$(mktemp)
trap 'rm -f "$log"' EXIT
summary=()
failed=0
for pkg in $("$go" list "${patterns[@]}"); do
  targets=$("$go" test -list '^Fuzz' "$pkg" | grep '^Fuzz') || continue
  for f in $targets; do
    echo "== $pkg $f"
    args=(-run '^$' -fuzz "^$f\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize")
    [ -n "$parallel" ] && args+=(-parallel "$parallel")
    "$go" test "${args[@]}" "$pkg" >"$log" 2>&1
    rc=$?
    # The last progress line holds the total: "fuzz: elapsed: 15s, execs: 491063 (…/sec), …".
    execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    execs=${execs:-0}
    if [ $rc -ne 0 ]; then
      cat "$log"
      summary+=("$(printf '%-12s %-28s %s' FAIL "$f" "$pkg")")
      failed=$((failed + 1))
      continue
    fi
    tail -1 "$log"
    echo "$f: $execs execs"
    summary+=("$(printf '%12s %-28s %s' "$execs" "$f" "$pkg")")
  done
done
echo
echo "execs per target (FUZZTIME=$fuzztime, FUZZMINIMIZETIME=$minimize):"
printf '%s\n' "${summary[@]}"
if [ $failed -gt 0 ]; then
  echo "$failed fuzz target(s) failed" >&2
  exit 1
fi
