#!/bin/sh
# run_cli_args.sh BIN — the CLI's command lines and outputs.
#
# 1. Every row of tests/cli/*.tsv runs BIN with its arguments and must exit with the row's status and print
#    the row's text on stderr or stdout. Rows: EXIT<TAB>TEXT<TAB>ARGS, ARGS in shell quoting (eval'd), TEXT a
#    fixed string ("-" checks only the exit status: a tab is blank to `read`, so an empty field would
#    vanish); '#' lines and blank lines are skipped. ARGS starting with "@np2 " run under `mpirun -np 2`,
#    those starting with "@mpi " as one process of an MPI build (both skipped, and counted as such,
#    without mpirun or an MPI build). A bad command line (exit 2, no mpirun)
#    must say so in ONE line on stderr and nothing on stdout: the usage is for --help.
# 2. The JSON lines of bench, demo and tp-bench: every line parses and follows docs/CLI.md's schema
#    (tests/cli/check_json.py where python3 is, `w8a8 plot`'s strict reader everywhere), -o - and --json put
#    them on stdout (and the table on stderr, and no file named "-"), and `w8a8 plot` charts them.
# Rows run on the CPU paths only (no row may need a GPU), each under a 60 s timeout (120 s for the demo).
# Ends with "N passed, N failed, N skipped".
BIN=$1
[ -x "$BIN" ] || { echo "run_cli_args: $BIN is not an executable"; echo "0 passed, 1 failed"; exit 1; }
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
here=$(cd "$(dirname "$0")" && pwd)
pass=0 fail=0 skip=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/w8a8-cli.XXXXXX")
MPIRUN=""
if command -v mpirun >/dev/null 2>&1 && "$BIN" version | grep -q mpi; then
  MPIRUN="mpirun --allow-run-as-root --oversubscribe -np 2"
fi
PY=""
command -v python3 >/dev/null 2>&1 && python3 -c 'import json' >/dev/null 2>&1 && PY=python3

ok() { pass=$((pass + 1)); }
bad() { # what went wrong (the caller prints the detail)
  fail=$((fail + 1))
  echo "FAIL $1"
}

# ---- 1. the rows ----------------------------------------------------------------------------------------
for table in "$here"/cli/*.tsv; do
  [ -f "$table" ] || continue
  while IFS='	' read -r want text args; do
    case "$want" in ''|'#'*) continue ;; esac
    mpi=""
    case "$args" in
      "@np2 "* | "@mpi "*)
        if [ -z "$MPIRUN" ]; then
          skip=$((skip + 1))
          continue
        fi
        case "$args" in "@np2 "*) mpi=$MPIRUN ;; esac
        args=${args#@* }
        ;;
    esac
    eval "set -- $args"
    (cd "$tmp" && timeout 60 $mpi "$BIN" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null)
    rc=$?
    why=""
    [ "$rc" = "$want" ] || why="exit $rc (want $want)"
    if [ "$text" != "-" ] && ! grep -qF -- "$text" "$tmp/err" && ! grep -qF -- "$text" "$tmp/out"; then
      why="$why; no text \"$text\""
    fi
    if [ "$want" = 2 ] && [ -z "$mpi" ] && { [ "$(wc -l <"$tmp/err")" -ne 1 ] || [ -s "$tmp/out" ]; }; then
      why="$why; a bad command line must be one line on stderr ($(wc -l <"$tmp/err") lines; stdout $(wc -c <"$tmp/out") bytes)"
    fi
    if [ -z "$why" ]; then
      ok
    else
      bad "$(basename "$table"): w8a8 $args: ${why#; }:"
      head -c 600 "$tmp/err"
      echo
    fi
  done <"$table"
done

# ---- 2. the JSON lines -------------------------------------------------------------------------------------
# json_ok NAME FILE COMMAND MIN_ROWS: the file follows the schema (python3), and w8a8 plot reads every line.
json_ok() {
  if [ -n "$PY" ]; then
    if out=$($PY "$here/cli/check_json.py" "$2" "$3" "$4" 2>&1); then ok; else bad "$1: $out"; fi
  else
    skip=$((skip + 1))
  fi
  if "$BIN" plot -y p50_us "$2" >"$tmp/plot" 2>&1; then ok; else bad "$1: w8a8 plot -y p50_us $2:"; head -n 5 "$tmp/plot"; fi
}
# run NAME EXIT COMMAND...: in $tmp/run (a fresh directory), stdout to $tmp/out, stderr to $tmp/err; status 0
# when COMMAND exits EXIT, else a failure counted (the caller counts the success of what it checks).
run() {
  name=$1 want=$2
  shift 2
  rm -rf "$tmp/run" && mkdir "$tmp/run"
  (cd "$tmp/run" && timeout 120 "$@" >"$tmp/out" 2>"$tmp/err" </dev/null)
  rc=$?
  [ "$rc" = "$want" ] && return 0
  bad "$name: exit $rc (want $want):"
  tail -n 5 "$tmp/err"
  return 1
}

small="-q -m 1,3 -n 16 -k 32 -i 3 -w 1 --no-baselines"
# -o FILE: JSON lines in the file, the table on stdout
if run "bench -o FILE" 0 "$BIN" bench --cpu $small -o "$tmp/bench.jsonl"; then
  json_ok "bench -o FILE" "$tmp/bench.jsonl" bench 4
  if grep -q '^# OK' "$tmp/out"; then ok; else bad "bench -o FILE: no table on stdout"; fi
fi
# -o -: the JSON lines on stdout, the table on stderr, and no file named "-"
if run "bench -o -" 0 "$BIN" bench --cpu $small -o -; then
  cp "$tmp/out" "$tmp/bench-stdout.jsonl"
  json_ok "bench -o - (stdout)" "$tmp/bench-stdout.jsonl" bench 4
  if grep -q '^# OK' "$tmp/err"; then ok; else bad "bench -o -: the table is not on stderr"; fi
  if [ ! -e "$tmp/run/-" ]; then ok; else bad "bench -o -: wrote a file named '-'"; fi
fi
if run "bench --json" 0 "$BIN" bench --cpu $small --json; then
  cp "$tmp/out" "$tmp/bench-json.jsonl"
  json_ok "bench --json" "$tmp/bench-json.jsonl" bench 4
fi
# the demo (the main job) at a small M: one row per layer and dtype
if run "demo --json" 0 "$BIN" demo --cpu -m 4 --rows 1 -i 1 -w 0 --json; then
  cp "$tmp/out" "$tmp/demo.jsonl"
  json_ok "demo --json" "$tmp/demo.jsonl" demo 8
  if grep -q '^demo PASSED' "$tmp/err"; then ok; else bad "demo --json: the table is not on stderr"; fi
fi
# tp-bench on 2 CPU ranks: rank 0 alone writes, one header
if [ -n "$MPIRUN" ]; then
  if run "tp-bench -o -" 0 $MPIRUN "$BIN" tp-bench -s 64 -m 4 -i 2 -w 0 -d int8 --shape 70b-o -o -; then
    cp "$tmp/out" "$tmp/tp.jsonl"
    json_ok "tp-bench -o -" "$tmp/tp.jsonl" tp-bench 1
    if [ "$(grep -c '"type":"header"' "$tmp/tp.jsonl")" = 1 ]; then ok; else bad "tp-bench -o -: not one header"; fi
    if [ ! -e "$tmp/run/-" ]; then ok; else bad "tp-bench -o -: wrote a file named '-'"; fi
  fi
else
  skip=$((skip + 4))
fi

# ---- 3. w8a8 plot ----------------------------------------------------------------------------------------------
if [ -s "$tmp/bench.jsonl" ]; then
  if run "plot" 0 "$BIN" plot --dtype int8 "$tmp/bench.jsonl"; then
    if grep -q 'tflops vs M' "$tmp/out" && grep -q 'w8a8_cpu int8' "$tmp/out"; then
      ok
    else
      bad "plot: no chart of w8a8_cpu int8:"
      head -n 20 "$tmp/out"
    fi
  fi
  # a broken line is refused with its number
  { head -n 2 "$tmp/bench.jsonl"; echo '{"type":"row","M":1,}'; } >"$tmp/broken.jsonl"
  if run "plot (broken)" 1 "$BIN" plot "$tmp/broken.jsonl"; then
    if grep -q 'broken.jsonl:3: not a JSON object' "$tmp/err"; then ok; else bad "plot: line 3 not named:"; cat "$tmp/err"; fi
  fi
  # an image: matplotlib where python3 has it, else a message and the chart in the terminal (exit 1)
  if [ -n "$PY" ] && $PY -c 'import matplotlib' >/dev/null 2>&1; then
    if run "plot -o" 0 "$BIN" plot -o "$tmp/bench.png" "$tmp/bench.jsonl"; then
      if [ -s "$tmp/bench.png" ]; then ok; else bad "plot -o: no image"; fi
    fi
  elif run "plot -o (no matplotlib)" 1 "$BIN" plot -o "$tmp/bench.png" "$tmp/bench.jsonl"; then
    if grep -qi 'matplotlib\|python3\|plot\.py' "$tmp/err" && grep -q 'tflops vs M' "$tmp/out" && [ ! -e "$tmp/bench.png" ]; then
      ok
    else
      bad "plot -o without matplotlib: no clear message and terminal chart:"
      cat "$tmp/err"
    fi
  fi
fi

rm -rf "$tmp"
echo "$pass passed, $fail failed, $skip skipped"
[ $fail = 0 ]
