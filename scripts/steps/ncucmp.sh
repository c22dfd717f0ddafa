#!/bin/bash
# ncucmp.sh — step "ncucmp": Nsight Compute side by side of torch's fp8 rowwise kernel (CUTLASS
# 128 x 128 x 128 cooperative, 2 x 1 cluster, promotion every K-block) and ours on the same shape
# (8b-qkv, M = 8192): why torch's kernel is ~15-20% faster than fp8_128x256_promote, and why our
# B-multicast configs (*_mc2) are slow. Clocks are left free (--clock-control none) so that the
# durations compare with the benchmarks. Env: OUT, L, BUILD, LEFT_S. About 150 s. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-200}
T0=$(date +%s)
cap() { local t=$1 l=$((LEFT_S - ($(date +%s) - T0) - 8)); [ "$t" -gt "$l" ] && t=$l; [ "$t" -lt 5 ] && t=5; echo "$t"; }
DEV="$BUILD/bin/sm90_dev"
gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/local/cuda/include bench/sm90_dev.c "$BUILD/lib/libw8a8.a" \
  -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lm -fopenmp -lstdc++ $(pkg-config --libs nccl 2>/dev/null || echo -lnccl) \
  $(mpicc --showme:link 2>/dev/null) -o "$DEV" >"$L/ncucmp-build.txt" 2>&1 || { echo "ncucmp: sm90_dev did not build"; exit 1; }
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
SECT="--section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats"
res=""
# Plain timings first (no profiler): the configurations side by side.
timeout -k 5 "$(cap 40)" "$DEV" -d fp8 -s 8b-qkv -m 8192 -a >"$L/ncucmp-times-fp8.txt" 2>&1
timeout -k 5 "$(cap 30)" "$DEV" -d int8 -s 8b-qkv -m 8192 -a >"$L/ncucmp-times-int8.txt" 2>&1
cat > /tmp/ncucmp_torch.py <<'PY'
import torch
M, N, K = 8192, 6144, 4096
a = (torch.randn(M, K, device="cuda") * 0.5).to(torch.float8_e4m3fn)
w = (torch.randn(N, K, device="cuda") * 0.5).to(torch.float8_e4m3fn)
sa = torch.rand(M, 1, device="cuda") + 0.5
sb = torch.rand(1, N, device="cuda") + 0.5
for _ in range(6):
    torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
torch.cuda.synchronize()
PY
prof() { # name, command...
  local name=$1; shift
  timeout -k 5 "$(cap 40)" "$NCU" --clock-control none $SECT "$@" >"$L/ncucmp-$name.txt" 2>&1
  res="$res $name:exit$?"
}
prof torch-rowwise --kernel-name regex:cutlass --launch-skip 3 --launch-count 1 python3 /tmp/ncucmp_torch.py
for c in fp8_128x256_promote fp8_128x256 fp8_128x128_promote fp8_128x128_promote_mc2 int8_128x256 int8_128x256_mc2; do
  d=fp8; case $c in int8*) d=int8 ;; esac
  prof "$c" --kernel-name regex:sm90_gemm_kernel --launch-skip 3 --launch-count 1 "$DEV" -d $d -s 8b-qkv -m 8192 -c "$c"
done
for f in "$L"/ncucmp-torch-rowwise.txt "$L"/ncucmp-fp8_*.txt "$L"/ncucmp-int8_*.txt; do
  [ -f "$f" ] || continue
  echo "$(basename "$f" .txt): $(grep -E '^\s+Duration|SM Frequency|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput' "$f" | awk '{print $1 $2 "=" $NF}' | tr '\n' ' ')"
done
echo "ncucmp:$res"
