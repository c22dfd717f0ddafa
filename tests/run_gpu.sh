#!/bin/sh
# run_gpu.sh — the GPU suite (`make gpu-test`): the CUDA tests, then the same tests under
# compute-sanitizer memcheck and racecheck (with W8A8_GPU_TEST_SMALL=1: the largest shapes
# are left out, the sanitizers slow kernels down 10-100x). Writes one log per stage and a
# summary; ends with "N passed, N failed" like tests/run_all.sh.
# Env: BUILD (default build), GPU_TEST_LOGDIR (default $BUILD), GPU_TEST_FILTER (the plain run; default every
#      GPU test: "cuda_ smoke sm90 tune_ tp_gpu act_ blockwise_cuda"), GPU_SAN_FILTER (the sanitizer runs; default the tests
#      with small shapes: "cuda_ smoke tp_gpu_ag tp_gpu_rs tp_gpu_graph tp_gpu_bad act_ blockwise_cuda"),
#      COMPUTE_SANITIZER (path), GPU_TEST_TIMEOUT (seconds per stage, default 600),
#      GPU_TEST_REUSE_LOG (a log of the plain run just made: counted instead of running it again).
BUILD=${BUILD:-build}
LOGDIR=${GPU_TEST_LOGDIR:-$BUILD}
FILTER=${GPU_TEST_FILTER:-"cuda_ smoke sm90 tune_ tp_gpu act_ blockwise_cuda"}
# The sm90 tests' shapes (N = 28672 for the wide cases) and the 2 s rank-timeout test are left out of the
# sanitizer runs, which slow kernels down 10-100x.
SAN_FILTER=${GPU_SAN_FILTER:-"cuda_ smoke tp_gpu_ag tp_gpu_rs tp_gpu_graph tp_gpu_bad act_ blockwise_cuda"}
TMO=${GPU_TEST_TIMEOUT:-600}
T="$BUILD/bin/w8a8_tests"
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
SUMMARY="$LOGDIR/gpu-test-summary.txt"
mkdir -p "$LOGDIR"
total_pass=0
total_fail=0

{
  echo "# w8a8 GPU test summary"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "host: $(uname -n)"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)"
  echo "library: $("$BUILD/bin/w8a8" version 2>/dev/null | head -n 1)"
  echo "filter: $FILTER (sanitizers: $SAN_FILTER)"
} >"$SUMMARY"

stage() { # name, log, command...
  name=$1
  log=$2
  shift 2
  echo "== $name: $*"
  start=$(date +%s)
  rc=0
  if [ $# -gt 0 ]; then # no command: count an existing log
    "$@" >"$log" 2>&1
    rc=$?
  fi
  secs=$(($(date +%s) - start))
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
  if [ -z "$line" ]; then
    p=0
    f=1
    line="no summary line"
  else
    p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/')
  fi
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  errs=$(grep -E '^========= (ERROR SUMMARY|RACECHECK SUMMARY)' "$log" | tail -n 1)
  grep -vE '^\[ (RUN|  OK) *\]' "$log" | grep -vE '^=========     ' | tail -n 25
  echo "== $name: $p passed, $f failed (exit $rc, ${secs}s) $errs"
  echo "$name: $p passed, $f failed (exit $rc, ${secs}s) $errs" >>"$SUMMARY"
  total_pass=$((total_pass + p))
  total_fail=$((total_fail + f))
}

if [ -n "${GPU_TEST_REUSE_LOG:-}" ] && [ -f "$GPU_TEST_REUSE_LOG" ]; then
  # the caller (the GPU-machine script under scripts/) just ran the plain tests: count that run, do not repeat it
  stage tests "$GPU_TEST_REUSE_LOG"
else
  # shellcheck disable=SC2086
  stage tests "$LOGDIR/gpu-tests.log" timeout "$TMO" stdbuf -oL "$T" $FILTER
fi
if [ -x "$CS" ]; then
  # shellcheck disable=SC2086
  stage memcheck "$LOGDIR/gpu-memcheck.log" env W8A8_GPU_TEST_SMALL=1 timeout "$TMO" \
    "$CS" --tool memcheck --error-exitcode 99 "$T" $SAN_FILTER
  # shellcheck disable=SC2086
  stage racecheck "$LOGDIR/gpu-racecheck.log" env W8A8_GPU_TEST_SMALL=1 timeout "$TMO" \
    "$CS" --tool racecheck --racecheck-report all --error-exitcode 99 "$T" $SAN_FILTER
else
  echo "compute-sanitizer not found: sanitizer stages not run" | tee -a "$SUMMARY"
  total_fail=$((total_fail + 1))
fi
echo "$total_pass passed, $total_fail failed" | tee -a "$SUMMARY"
[ "$total_fail" -eq 0 ]
