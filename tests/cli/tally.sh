# tally.sh — sourced by tests/run_all.sh: reads a stage's summary line. Stages end with
# "N passed, N failed", some with the tests they skipped as ", N skipped" (tests/test_main.c,
# tests/run_python.sh) or " (N skipped)" (older binaries): a skipped test is neither passed nor failed,
# and the total must say how many there were.

# summary_of FILE: "P F S" from the last summary line of FILE (S = 0 when the line has no skip count);
# nothing, and status 1, when FILE has no summary line.
summary_of() {
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
  [ -n "$line" ] || return 1
  p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
  s=$(echo "$line" | sed -nE 's/^[0-9]+ passed, [0-9]+ failed(, | \()([0-9]+) skipped.*/\2/p')
  echo "$p $f ${s:-0}"
}
