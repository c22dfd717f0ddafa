#!/bin/bash
# ncucmp.sh — step "ncucmp": Nsight Compute side by side of torch's fp8 rowwise kernel (CUTLASS
# 128 x 128 x 128 cooperative, 2 x 1 cluster, promotion every K-block) and ours on the same shape
# (8b-qkv, M = 8192): why torch's kernel is ~15-20% faster than fp8_128x256_promote, and why our
# B-multicast configs (*_mc2) are slow. Clocks are left free (--clock-control none) so that the
# durations compare with the benchmarks. Env: OUT, L, BUILD, LEFT_S. About 150 s. Last line: summary.
# torch 2.11 on CUDA 13 runs rowwise fp8 through cuBLASLt (an nvjet_sm90_qqtst_128x128_128x6_1x1
# ..._coopA_..._ovscale kernel), not CUTLASS: the filter matches either.
# NCUCMP_CONFIGS="name ..." replaces the list of our configurations ("none": torch only).
# NCUCMP_SHAPE / NCUCMP_M (sm90_dev's shape name and M: 8b-qkv, 8192) and NCUCMP_TORCH (rowwise or
# tensorwise: which of torch's fp8 kernels to profile) move the comparison to another shape (session 24:
# cuBLASLt's 64x72 1x2 tile against our skinny pairs at 8b-down, M = 129).
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-200}
. "$(dirname "$0")/common.sh"
need_sm90_dev ncucmp
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
SECT="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats"
res=""
SHAPE=${NCUCMP_SHAPE:-8b-qkv} M=${NCUCMP_M:-8192} TW=${NCUCMP_TORCH:-rowwise}
case "$SHAPE" in # bench/sm90_dev.c's SHAPES (N, K)
  70b-qkv-tp4) N=2560 K=8192 ;; 70b-o-tp4) N=8192 K=2048 ;; 70b-gateup-tp4) N=14336 K=8192 ;;
  70b-down-tp4) N=8192 K=7168 ;; 8b-qkv) N=6144 K=4096 ;; 8b-gateup) N=28672 K=4096 ;;
  8b-down) N=4096 K=14336 ;; 8b-o) N=4096 K=4096 ;;
  *) echo "ncucmp: unknown shape $SHAPE"; exit 1 ;;
esac
# Plain timings first (no profiler): the configurations side by side.
[ -n "${NCUCMP_CONFIGS:-}" ] || timeout -k 5 "$(cap 40)" "$DEV" -d fp8 -s "$SHAPE" -m "$M" -a >"$L/ncucmp-times-fp8.txt" 2>&1
[ -n "${NCUCMP_CONFIGS:-}" ] || timeout -k 5 "$(cap 30)" "$DEV" -d int8 -s "$SHAPE" -m "$M" -a >"$L/ncucmp-times-int8.txt" 2>&1
# torch_compare's data (randn-based fp8: the clocks depend on the data) for torch's kernel and ours
# (the heuristic's, through the Python package), three calls of each: ncu profiles the third of
# torch's and the first two of ours.
cat > /tmp/ncucmp_torch.py <<'PY'
import torch, w8a8, w8a8.torch
import os
M, N, K = (int(os.environ[v]) for v in ("NCUCMP_MM", "NCUCMP_NN", "NCUCMP_KK"))
g = torch.Generator(device="cuda"); g.manual_seed(1)
a = (torch.randn(M, K, device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
w = (torch.randn(N, K, device="cuda", generator=g) * 0.7).to(torch.float8_e4m3fn)
sa = (torch.rand(M, 1, device="cuda", generator=g) + 0.5) * 0.01
sb = (torch.rand(1, N, device="cuda", generator=g) + 0.5) * 0.01
if os.environ.get("NCUCMP_TORCH") == "tensorwise":
    sa, sb = sa.max().reshape(()), sb.max().reshape(())
for _ in range(3):
    torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
for _ in range(3):
    w8a8.scaled_mm(a, w.t(), sa, sb, out_dtype=torch.bfloat16)
torch.cuda.synchronize()
PY
prof() { # name, command...
  local name=$1; shift
  timeout -k 5 "$(cap 40)" "$NCU" --clock-control none $SECT "$@" >"$L/ncucmp-$name.txt" 2>&1
  res="$res $name:exit$?"
}
export W8A8_LIBRARY=$PWD/$BUILD/lib/libw8a8.so PYTHONPATH=python NCUCMP_MM=$M NCUCMP_NN=$N NCUCMP_KK=$K NCUCMP_TORCH=$TW
prof torch-and-ours --kernel-name regex:'nvjet|cutlass|sm90_' --launch-skip 2 --launch-count 3 python3 /tmp/ncucmp_torch.py
CFGS=${NCUCMP_CONFIGS:-fp8_128x256_promote fp8_128x256 fp8_128x128_promote fp8_128x128_promote_mc2 int8_128x256 int8_128x256_mc2}
[ "$CFGS" = none ] && CFGS=""
for c in $CFGS; do
  d=fp8; case $c in int8*) d=int8 ;; esac
  prof "$c" --kernel-name regex:'sm90_(gemm|skinny)_kernel' --launch-skip 3 --launch-count 1 "$DEV" -d $d -s "$SHAPE" -m "$M" -c "$c"
done
for f in "$L"/ncucmp-torch-and-ours.txt "$L"/ncucmp-fp8_*.txt "$L"/ncucmp-int8_*.txt; do
  [ -f "$f" ] || continue
  echo "$(basename "$f" .txt): $(grep -E '^\s+Duration|SM Frequency|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput' "$f" | awk '{print $1 $2 "=" $NF}' | tr '\n' ' ')"
done
echo "ncucmp:$res"
