#!/bin/bash
# tpmulti.sh — GPU tensor parallelism with ranks on DIFFERENT GPUs, as a step of
# scripts/device_session.sh (STEPS="... tpmulti"). Four commands, each under `timeout`:
#   1. $T tp_gpu                      in-process ranks, rank r on GPU r % NGPU (peer access)
#   2. mpirun -np NGPU w8a8_tp_tests  one process per GPU: the NCCL transport (tp_nccl_*), plus
#                                     the CPU/MPI tests (NGPU >= 2 only)
#   3. w8a8 tp-bench --local NGPU     threads, one GPU each   -> $OUT/tpmulti-bench-local.jsonl
#   4. mpirun -np NGPU w8a8 tp-bench --nccl                   -> $OUT/tpmulti-bench-nccl.jsonl
# Env from device_session.sh: OUT, L (logs, packed into logs.tgz), BUILD (built with
# `make lib tests cli`), T (test binary), NGPU, MPIRUN (mpirun with the NVLS-off env exported),
# LEFT_S (seconds this step may take). About 200 s on 2 GPUs; the last line is the summary.
set -u
OUT=${OUT:-/tmp/w8a8-device-out}
L=${L:-$OUT/logs}
BUILD=${BUILD:-build-dev}
T=${T:-$BUILD/bin/w8a8_tests}
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
LEFT_S=${LEFT_S:-240}
# NVLink SHARP / multicast stays off (never cuMulticastCreate on these machines).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS}
# A rank group whose peer failed reports W8A8_ERROR_COMM after this many seconds instead of
# waiting the default 300 s (longer than any timeout below).
export W8A8_TP_TIMEOUT_S=40
mkdir -p "$L" "$OUT"
. "$(dirname "$0")/common.sh"
enough() { [ $((LEFT_S - ($(date +%s) - T0))) -gt 25 ]; }
say() { echo "[tpmulti $(($(date +%s) - T0)) s] $*"; }
W=$NGPU
[ "$W" -lt 2 ] && W=2 # one GPU: the benches emulate 2 ranks on it
say "NGPU=$NGPU LEFT_S=$LEFT_S BUILD=$BUILD"
nvidia-smi topo -m 2>&1 | head -n 6
R1="-" R2="-" R3="-" R4="-"

# 1. in-process ranks across the GPUs
if enough; then
  W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap 90)" stdbuf -oL "$T" tp_gpu >"$L/tpmulti-tp_gpu.txt" 2>&1
  rc=$?
  R1="exit $rc $(grep -E '^[0-9]+ passed' "$L/tpmulti-tp_gpu.txt" | tail -n 1)"
  [ $rc -ge 124 ] && R1="$R1 TIMEOUT"
  say "tp_gpu (rank r on GPU r % $NGPU): $R1"
  grep -E 'FAIL|skipped:|^    ' "$L/tpmulti-tp_gpu.txt" | sort | uniq -c | sort -rn | head -n 12
fi

# 2. one process per GPU: NCCL
if [ "$NGPU" -ge 2 ] && [ -x "$BUILD/bin/w8a8_tp_tests" ] && enough; then
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT timeout -k 5 "$(cap 60)" $MPIRUN -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS \
    -x W8A8_TP_TIMEOUT_S -np "$NGPU" "$BUILD/bin/w8a8_tp_tests" >"$L/tpmulti-nccl-tests.txt" 2>&1
  rc=$?
  R2="exit $rc $(grep -E '^[0-9]+ passed' "$L/tpmulti-nccl-tests.txt" | tail -n 1)"
  [ $rc -ge 124 ] && R2="$R2 TIMEOUT"
  say "w8a8_tp_tests -np $NGPU (tp_nccl_*: NCCL transport): $R2"
  grep -E 'FAIL|skipped:|tp_nccl: ' "$L/tpmulti-nccl-tests.txt" | sort | uniq -c | sort -rn | head -n 12
  grep -E 'via (P2P|SHM|NET)|NVLS' "$L/tpmulti-nccl-tests.txt" | head -n 4
else
  say "NCCL tests skipped (NGPU=$NGPU, need 2+ and $BUILD/bin/w8a8_tp_tests)"
fi

# 3. tp-bench, threads (one GPU per rank; ranks share GPUs only when NGPU < W)
BENCH_ARGS="-m 1024,8192 -n 10 -w 2"
if [ -x "$BUILD/bin/w8a8" ] && enough; then
  timeout -k 5 "$(cap 40)" stdbuf -oL "$BUILD/bin/w8a8" tp-bench --local "$W" $BENCH_ARGS \
    -o "$OUT/tpmulti-bench-local.jsonl" >"$L/tpmulti-bench-local.txt" 2>&1
  rc=$?
  R3="exit $rc$([ $rc -ge 124 ] && echo ' TIMEOUT')"
  say "tp-bench --local $W: $R3"
  grep -vE '^tp-bench: .* done$' "$L/tpmulti-bench-local.txt" | head -n 30
fi

# 4. tp-bench, one process per GPU (NCCL)
if [ "$NGPU" -ge 2 ] && [ -x "$BUILD/bin/w8a8" ] && enough; then
  timeout -k 5 "$(cap 40)" $MPIRUN -x W8A8_TP_TIMEOUT_S -np "$NGPU" "$BUILD/bin/w8a8" tp-bench --nccl $BENCH_ARGS \
    -o "$OUT/tpmulti-bench-nccl.jsonl" >"$L/tpmulti-bench-nccl.txt" 2>&1
  rc=$?
  R4="exit $rc$([ $rc -ge 124 ] && echo ' TIMEOUT')"
  say "tp-bench --nccl (np $NGPU): $R4"
  grep -vE '^tp-bench: .* done$' "$L/tpmulti-bench-nccl.txt" | head -n 30
fi

say "done"
echo "tpmulti: tp_gpu [$R1] nccl-tests [$R2] bench-local [$R3] bench-nccl [$R4]"
