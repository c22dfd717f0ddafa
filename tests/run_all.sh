#!/bin/sh
# run_all.sh — everything `make test` runs (CPU and MPI; CI has no GPU).
# Each stage prints its own "N passed, N failed" line; the last line here sums them.
# Env: BUILD (build dir, default build), FUZZ_SECONDS (default 60), MPI_NPS (default "1 2 3 4").
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
MPI_NPS=${MPI_NPS:-"1 2 3 4"}
total_pass=0
total_fail=0
log=$(mktemp)

# Parse the "N passed, N failed" line of a stage's output and add it up.
tally() { # name, exit code, log file
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$3" | tail -n 1)
  if [ -z "$line" ]; then
    echo "== $1: no summary line (exit $2): counted as 1 failure"
    total_fail=$((total_fail + 1))
    return
  fi
  p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
  if [ "$2" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  echo "== $1: $p passed, $f failed"
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
}

stage() { # name, command...
  name=$1
  shift
  echo "== $name: $*"
  "$@" >"$log" 2>&1
  rc=$?
  grep -vE '^\[ (RUN|  OK) *\]' "$log" | tail -n 40
  tally "$name" $rc "$log"
}

stage unit "$BUILD/bin/w8a8_tests"
# The scalar fallback paths, as on a CPU without AVX2.
stage unit-noavx env W8A8_CPU_DISABLE=avx2,avx512 "$BUILD/bin/w8a8_tests" cpu_ ref_ quant_ gemm_

if [ -x "$BUILD/bin/w8a8_tp_tests" ]; then
  MPIRUN="mpirun --allow-run-as-root --oversubscribe"
  for np in $MPI_NPS; do
    stage "mpi-np$np" timeout 600 $MPIRUN -np "$np" "$BUILD/bin/w8a8_tp_tests"
  done
fi

if [ -x "$BUILD-asan/bin/w8a8_tests" ]; then
  stage asan-ubsan env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$BUILD-asan/bin/w8a8_tests"
fi

if [ -x "$BUILD/bin/fuzz_validate" ] && [ "$FUZZ_SECONDS" -gt 0 ]; then
  stage fuzz sh tests/run_fuzz.sh "$BUILD/bin/fuzz_validate" "$FUZZ_SECONDS"
fi

if [ -x "$BUILD/bin/w8a8" ]; then
  stage cli-check sh -c "'$BUILD/bin/w8a8' check --cpu && echo '1 passed, 0 failed'"
fi

rm -f "$log"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
