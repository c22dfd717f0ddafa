#!/bin/sh
# run_cli_args.sh BIN — the CLI on malformed command lines: every row of
# tests/cli/*.tsv runs BIN with its arguments and must exit with the row's status and print the row's text
# on stderr or stdout. Rows: EXIT<TAB>TEXT<TAB>ARGS, ARGS in shell quoting (eval'd), TEXT a fixed string
# ("-" checks only the exit status: a tab is blank to `read`, so an empty field would vanish); '#' lines
# and blank lines are skipped. Rows run on the CPU paths only (no row may need a GPU), each under a 60 s
# timeout. Ends with "N passed, M failed".
BIN=$1
[ -x "$BIN" ] || { echo "run_cli_args: $BIN is not an executable"; echo "0 passed, 1 failed"; exit 1; }
here=$(dirname "$0")
pass=0 fail=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/w8a8-cli.XXXXXX")
for table in "$here"/cli/*.tsv; do
  [ -f "$table" ] || continue
  while IFS='	' read -r want text args; do
    case "$want" in ''|'#'*) continue ;; esac
    eval "set -- $args"
    timeout 60 "$BIN" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    rc=$?
    ok=1
    [ "$rc" = "$want" ] || ok=0
    if [ "$text" != "-" ] && ! grep -qF -- "$text" "$tmp/err" && ! grep -qF -- "$text" "$tmp/out"; then ok=0; fi
    if [ $ok = 1 ]; then
      pass=$((pass + 1))
    else
      fail=$((fail + 1))
      echo "FAIL $(basename "$table"): w8a8 $args: exit $rc (want $want), text \"$text\":"
      head -c 400 "$tmp/err"
      echo
    fi
  done <"$table"
done
rm -rf "$tmp"
echo "$pass passed, $fail failed"
[ $fail = 0 ]
