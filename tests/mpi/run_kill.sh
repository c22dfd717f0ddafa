#!/bin/sh
# run_kill.sh — a rank that dies mid-sequence: every survivor must return W8A8_ERROR_TIMEOUT within
# twice the communicator's timeout, then W8A8_ERROR_BROKEN (tests/mpi/test_tp_fault.c, tp_kill_main).
# The last rank exits without MPI_Finalize before its 4th call ("agree": the survivors wait in the
# agreement) or right after that call's agreement ("schedule": they wait for its rows).
# Open MPI's mpirun kills the whole job when a rank exits early; --enable-recovery keeps the
# survivors running, as a real job that outlives a rank does. The survivors exit without
# MPI_Finalize (which could wait for the dead rank), so mpirun's own exit code and its PMIx
# messages mean nothing here: each survivor's "tp_kill rank r: PASS" line is the result.
# Usage: run_kill.sh BINARY [NP ...]   (default NPs: 2 3 4). Ends with "N passed, N failed".
bin=$1
shift
nps=${*:-"2 3 4"}
pass=0
fail=0
if ! mpirun --version 2>/dev/null | grep -q "Open MPI"; then
  echo "run_kill.sh: needs Open MPI's mpirun (--enable-recovery); skipped"
  echo "0 passed, 0 failed"
  exit 0
fi
for np in $nps; do
  for mode in agree schedule; do
    # (stdin from /dev/null: under `timeout` mpirun is in a background process group, where forwarding a
    # terminal's stdin to rank 0 would stop it)
    out=$(W8A8_TP_KILL_TEST=$mode timeout 60 mpirun --allow-run-as-root --oversubscribe --enable-recovery \
      -np "$np" "$bin" </dev/null 2>&1)
    rc=$?
    lines=$(echo "$out" | grep "^tp_kill rank")
    npass=$(echo "$lines" | grep -c ": PASS")
    nfail=$(echo "$lines" | grep -c ": FAIL")
    echo "== np $np, $mode:"
    echo "$lines"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
      echo "   FAILED: hung (killed by timeout after 60 s)"
      echo "$out" | tail -n 20
      fail=$((fail + 1))
    elif [ "$npass" -eq $((np - 1)) ] && [ "$nfail" -eq 0 ]; then
      pass=$((pass + 1))
    else
      echo "   FAILED: $npass of $((np - 1)) survivors passed"
      echo "$out" | tail -n 20
      fail=$((fail + 1))
    fi
  done
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
