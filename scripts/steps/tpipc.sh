#!/bin/bash
# tpipc.sh — the IPC transport of GPU tensor parallelism (processes of one host, CUDA IPC mappings of
# the peers' workspaces, copy engine, interprocess events; opt-in with W8A8_TP_IPC=1), as a step of
# scripts/device_session.sh (STEPS="build ... tpipc"). Needs 2+ GPUs. Two commands, under `timeout`:
#   1. W8A8_TP_IPC=1 mpirun -np NGPU w8a8_tp_tests   tp_ipc_* (the IPC transport: same checks as
#      tp_nccl_*; they FAIL if IPC was not chosen where every GPU pair has peer access) and
#      tp_nccl_* (forced to NCCL at creation) side by side                    (~60 s on 2 GPUs)
#   2. W8A8_TP_IPC=1 mpirun -np NGPU w8a8 tp-bench --nccl  -> $OUT/tpipc-bench.jsonl ("transport":
#      "ipc" when chosen; the header's "# library transport:" line says why not otherwise)
# Env from device_session.sh: OUT, L (logs, packed into logs.tgz), BUILD, NGPU, MPIRUN, LEFT_S.
# Under 150 s whatever LEFT_S says; the last line is the summary.
set -u
OUT=${OUT:-/tmp/w8a8-device-out}
L=${L:-$OUT/logs}
BUILD=${BUILD:-build-dev}
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
LEFT_S=${LEFT_S:-150}
[ "$LEFT_S" -gt 145 ] && LEFT_S=145
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS}
export W8A8_TP_IPC=1
# A peer that failed makes the others fail after 40 s instead of 300 (GROUP ranks; the IPC
# transport's collectives are MPI's and release failed peers at once).
export W8A8_TP_TIMEOUT_S=40
mkdir -p "$L" "$OUT"
. "$(dirname "$0")/common.sh"
enough() { [ $((LEFT_S - ($(date +%s) - T0))) -gt 20 ]; }
say() { echo "[tpipc $(($(date +%s) - T0)) s] $*"; }
R1="-" R2="-"
say "NGPU=$NGPU LEFT_S=$LEFT_S BUILD=$BUILD"
if [ "$NGPU" -lt 2 ]; then
  say "needs 2+ GPUs"
  echo "tpipc: skipped ($NGPU GPU)"
  exit 0
fi

# 1. the tests, IPC and NCCL transports side by side
if [ -x "$BUILD/bin/w8a8_tp_tests" ] && enough; then
  W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap 80)" $MPIRUN -x W8A8_TP_IPC -x W8A8_TP_TIMEOUT_S -x W8A8_TEST_VERBOSE \
    -np "$NGPU" stdbuf -oL "$BUILD/bin/w8a8_tp_tests" tp_ipc_ tp_nccl_ >"$L/tpipc-tests.txt" 2>&1
  rc=$?
  R1="exit $rc $(grep -E '^[0-9]+ passed' "$L/tpipc-tests.txt" | tail -n 1)"
  [ $rc -ge 124 ] && R1="$R1 TIMEOUT"
  say "w8a8_tp_tests -np $NGPU, W8A8_TP_IPC=1: $R1"
  grep -E 'FAIL|SKIP|skipped:|tp_nccl: ' "$L/tpipc-tests.txt" | sort | uniq -c | sort -rn | head -n 16
  grep -E '^\[ *(OK|FAIL) *\] *tp_(ipc|nccl)' "$L/tpipc-tests.txt" | head -n 20
fi

# 2. tp-bench over the IPC transport (the "comm" column is still the bench's own NCCL send/recv)
if [ -x "$BUILD/bin/w8a8" ] && enough; then
  timeout -k 5 "$(cap 50)" $MPIRUN -x W8A8_TP_IPC -x W8A8_TP_TIMEOUT_S -np "$NGPU" stdbuf -oL "$BUILD/bin/w8a8" \
    tp-bench --nccl -m 1024,8192 -n 10 -w 2 -o "$OUT/tpipc-bench.jsonl" >"$L/tpipc-bench.txt" 2>&1
  rc=$?
  R2="exit $rc$([ $rc -ge 124 ] && echo ' TIMEOUT') $(grep -E '^# library transport' "$L/tpipc-bench.txt" | head -n 1)"
  say "tp-bench --nccl (np $NGPU, W8A8_TP_IPC=1): $R2"
  grep -vE '^tp-bench: .* done$' "$L/tpipc-bench.txt" | head -n 30
fi
say "done"
echo "tpipc: tests [$R1] bench [$R2]"
