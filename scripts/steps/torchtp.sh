#!/bin/bash
# torchtp.sh — scripts/device_session.sh step (STEPS="... torchtp"), issues 7 and 8:
#   1. tests/python/test_torch_tp.py: the fused TP ops on a communicator bootstrapped through
#      torch.distributed, W = 1 and W = NGPU processes (skips without torch / CUDA / NCCL);
#   2. bench/torch_tp_compare.py on every GPU (only with 2 or more): w8a8 fused and unfused next to
#      torch's unfused collectives + _scaled_mm and torch.ops.symm_mem's fused ops, Llama-3.1-70B
#      shapes at TP = NGPU -> $OUT/torch-tp-compare-w$NGPU.{jsonl,md}.
# Env (device_session.sh exports them): OUT, L (logs: packed into logs.tgz), BUILD (libw8a8 built
# there), NGPU, LEFT_S (seconds left in the session's budget). The whole step stays under 195 s and
# LEFT_S; each part runs under `timeout`. Logs: $L/torchtp-test.txt, $L/torchtp-compare.txt.
# The last line printed is the step's summary (device_session.sh puts it in summary.txt).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/w8a8-device-out}
L=${L:-$OUT/logs}
BUILD=${BUILD:-build-dev}
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
CAP=${LEFT_S:-195}
[ "$CAP" -gt 195 ] && CAP=195
mkdir -p "$L" "$OUT"
T0=$(date +%s)
left() { echo $((CAP - ($(date +%s) - T0))); }
export W8A8_LIBRARY=${W8A8_LIBRARY:-$PWD/$BUILD/lib/libw8a8.so}
export PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
echo "torchtp: $NGPU GPU(s), $CAP s, $W8A8_LIBRARY"
if [ ! -f "$W8A8_LIBRARY" ]; then
  echo "torchtp: $W8A8_LIBRARY is missing (run the build step first)"
  exit 1
fi

# 1. the test (normally 20-40 s: two launches of fresh processes)
t=$(left); [ "$t" -gt 110 ] && t=110
# each of its two launches (W = 1, W = NGPU) gets half of the time
W8A8_TORCH_TP_TIMEOUT_S=$((t / 2 - 3)) timeout -k 5 "$t" \
  python3 -m unittest discover -s tests/python -t tests/python -p test_torch_tp.py -v >"$L/torchtp-test.txt" 2>&1
trc=$?
tres=$(grep -E '^(OK|FAILED)' "$L/torchtp-test.txt" | tail -n 1)
[ $trc -ge 124 ] && tres="TIMEOUT after $t s"
echo "test: exit $trc: $(grep -E '^Ran ' "$L/torchtp-test.txt" | tail -n 1) ${tres:-}"
grep -E 'checks,|FAIL|skipped|Error' "$L/torchtp-test.txt" | head -n 20

# 2. the comparison (2+ GPUs)
crc=-
if [ "$NGPU" -ge 2 ]; then
  l=$(left)
  b=$((l - 45)); [ "$b" -gt 120 ] && b=120
  if [ "$b" -lt 20 ]; then
    echo "compare: skipped, $l s left"
  else
    P="$OUT/torch-tp-compare-w$NGPU"
    timeout -k 5 $((l - 3)) python3 -u bench/torch_tp_compare.py --world "$NGPU" --budget-s "$b" --grace-s 30 \
      -o "$P" >"$L/torchtp-compare.txt" 2>&1
    crc=$?
    echo "compare: exit $crc ($([ $crc -ge 124 ] && echo 'TIMEOUT' || echo "budget $b s")) -> $P.{jsonl,md}"
    grep -E '^\| (ag_mm|mm_rs) \||^Wrong|^- `' "$P.md" 2>/dev/null | head -n 20
    grep -E 'Error|Traceback|killing' "$L/torchtp-compare.txt" | head -n 8
  fi
else
  echo "compare: skipped ($NGPU GPU: TP needs 2+)"
fi
echo "torchtp: test exit $trc (${tres:-no result}), compare exit $crc, $(($(date +%s) - T0)) s"
[ "$trc" -eq 0 ] && { [ "$crc" = "-" ] || [ "$crc" -eq 0 ]; }
