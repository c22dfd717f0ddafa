#!/bin/sh
# test_tally.sh — tests/cli/tally.sh reads every form of summary line the stages print, and a stage
# that skips tests reports them: the sum run_all.sh prints depends on it. Ends with "N passed, N failed".
here=$(dirname "$0")
. "$here/tally.sh"
pass=0 fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/w8a8-tally.XXXXXX")
check() { # text, expected "P F S" (or "none")
  printf '%s\n' "$1" >"$tmp/log"
  got=$(summary_of "$tmp/log") || got=none
  if [ "$got" = "$2" ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: '$1' -> '$got', want '$2'"; fi
}
check "409 passed, 0 failed" "409 0 0"
check "12 passed, 3 failed, 200 skipped" "12 3 200"
check "7 passed, 0 failed (5 skipped)" "7 0 5"
check "$(printf 'noise\n1 passed, 1 failed, 1 skipped\nmore noise\n5 passed, 0 failed, 2 skipped')" "5 0 2"
check "no summary here" "none"
check "passed, failed" "none"
check "3 passed, 1 failed; 4 skipped elsewhere" "3 1 0"
# the unit test binary's own line (arg 1): its skip count is that of its "[ SKIP ]" lines, whatever this build
# skips, and passed + failed + skipped is the number of tests run
if [ -n "$1" ] && [ -x "$1" ]; then
  "$1" not_built cli_parse_strict >"$tmp/unit" 2>&1
  got=$(summary_of "$tmp/unit") || got=none
  runs=$(grep -c '^\[ RUN  \]' "$tmp/unit")
  skips=$(grep -c '^\[ SKIP \]' "$tmp/unit")
  set -- $got
  if [ "$got" != none ] && [ "$3" = "$skips" ] && [ $(($1 + $2 + $3)) = "$runs" ]; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1))
    echo "FAIL: the unit binary's summary '$got' for $runs tests, $skips skipped:"
    tail -n 3 "$tmp/unit"
  fi
fi
rm -rf "$tmp"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
