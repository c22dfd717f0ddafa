#!/bin/bash
# bench.sh — step "bench": the benchmarks BENCH names (default "torch quant"), each writing a results
# file $OUT/<suite>-$GPU.{md,jsonl,txt} with what, where, when, which tree and the command in its head:
#   torch    bench/torch_compare.py: our GEMM next to torch._scaled_mm / _int_mm / mm in one process, and
#            vLLM's cutlass_scaled_mm where the vllm step built it
#            (TORCH_M, TORCH_SUITES, TORCH_BUDGET_S = 220)               -> gemm-torch-$GPU.{md,jsonl}
#            and TFLOP/s against M per shape, every implementation (bench/plot.py) -> gemm-torch-{fp8,int8}-$GPU.png
#   quant    w8a8 demo (the main job: a layer's quantizers and GEMMs vs bf16) at DEMO_M tokens
#                                                                         -> demo-$GPU.txt
#   blockwise bench/blockwise_compare.py: block-scaled fp8 (DeepSeek-V3 shapes) next to torch and DeepGEMM
#            (BW_M, BW_SHAPES, BW_BUDGET_S = 200; BW_TILE_AB=1: also our normal tiles forced to 128 and 256 wide
#            at BW_TILE_AB_M; BW_SPLIT_AB=1: the K split forced to each of BW_SPLIT_AB_S at BW_SPLIT_AB_M)
#                                                                         -> blockwise-$GPU.{md,jsonl,png}
#   paths    w8a8 bench with each CUDA path forced (90 89 80 75) next to cuBLASLt  -> gemm-paths-$GPU.{md,jsonl}
#   host     bench/host_cost.py: an eager call's host time against the raw C call -> host-cost-$GPU.{txt,json}
#   cublaslt w8a8 bench (our kernels next to cuBLASLt int8 / fp8)         -> gemm-cublaslt-$GPU.jsonl
#   tp       w8a8 tp-bench --local W for W = 2 and NGPU (fused vs unfused) -> tp-bench-$GPU.jsonl
#   stack    w8a8 tp-stack --local W (a Llama-3.1-70B FP8 layer stack)    -> tp-stack-$GPU.jsonl
#   hw       bench/hw_limits.py: weight-read floor, clocks under load      -> hw-limits-$GPU.{md,jsonl}
. "$(dirname "$0")/lib.sh"
CLI="$BUILD/bin/w8a8"
# TFLOP/s against M, one panel per shape, every implementation of a results file (bench/plot.py; where matplotlib is)
plot() {
  local src=$1 png=$2
  shift 2
  [ -f "$src" ] && python3 bench/plot.py "$src" -o "$png" "$@" >>"$L/plot.txt" 2>&1 || echo "plot $(basename "$png"): not made (plot.txt)"
}
res=""
for b in ${BENCH:-torch quant}; do
  case $b in
  torch)
    tb=${TORCH_BUDGET_S:-220}
    cmd="python3 bench/torch_compare.py --budget-s $tb ${TORCH_M:+--m $TORCH_M} ${TORCH_SUITES:+--suites $TORCH_SUITES}"
    vso=${VLLM_BUILD:-${VLLM_SRC:-../vllm}/build}/vllm_cutlass.so  # (the vllm step's build, where it ran)
    [ -f "$vso" ] && export VLLM_CUTLASS_SO="$(cd "$(dirname "$vso")" && pwd)/vllm_cutlass.so"
    timeout -k 5 "$(cap $((tb + 60)))" $cmd -o "$OUT/gemm-torch-$GPU" >"$L/bench-torch.txt" 2>&1
    rc=$?
    headed "$OUT/gemm-torch-$GPU.md" "GEMM against torch on the same GPU, same process (bench/torch_compare.py)" "$cmd"
    echo "torch: exit $rc"; grep -iE 'geomean' "$OUT/gemm-torch-$GPU.md" 2>/dev/null | head -n 12
    for d in fp8 int8; do plot "$OUT/gemm-torch-$GPU.jsonl" "$OUT/gemm-torch-$d-$GPU.png" --dtype "$d"; done
    ;;
  blockwise)
    bb=${BW_BUDGET_S:-200}
    cmd="python3 bench/blockwise_compare.py --budget-s $bb ${BW_M:+--m $BW_M} ${BW_SHAPES:+--shapes $BW_SHAPES}"
    dg=${DG_SRC:-../dg}  # (the deepgemm step's build, where it ran)
    ls "$dg"/deep_gemm/*.so >/dev/null 2>&1 && export PYTHONPATH="$(cd "$dg" && pwd)${PYTHONPATH:+:$PYTHONPATH}"
    timeout -k 5 "$(cap $((bb + 90)))" $cmd -o "$OUT/blockwise-$GPU" >"$L/bench-blockwise.txt" 2>&1
    rc=$?
    headed "$OUT/blockwise-$GPU.md" "Block-scaled fp8 against torch and DeepGEMM, same process (bench/blockwise_compare.py)" "$cmd"
    echo "blockwise: exit $rc"; grep -iE 'geomean' "$OUT/blockwise-$GPU.md" 2>/dev/null | head -n 4
    plot "$OUT/blockwise-$GPU.jsonl" "$OUT/blockwise-$GPU.png"
    if [ -n "${BW_TILE_AB:-}" ]; then  # our normal tiles forced to each width (W8A8_DEV SM90_BW_TILE), same call
      for w in 128 256; do
        W8A8_DEV=SM90_BW_TILE=$w timeout -k 5 "$(cap 120)" python3 bench/blockwise_compare.py --impls w8a8_block \
          --m ${BW_TILE_AB_M:-256,1024,4096,16384} --budget-s 60 -o "$OUT/blockwise-t$w-$GPU" >>"$L/bench-blockwise.txt" 2>&1
        echo "blockwise tile $w: exit $?"
      done
    fi
    if [ -n "${BW_SPLIT_AB:-}" ]; then  # the K split forced (W8A8_DEV SM90_BW_SPLIT) at small M, same call
      for k in ${BW_SPLIT_AB_S:-1 2 4 8}; do
        W8A8_DEV=SM90_BW_SPLIT=$k timeout -k 5 "$(cap 120)" python3 bench/blockwise_compare.py --impls w8a8_block \
          --m ${BW_SPLIT_AB_M:-1,16,64,128} --budget-s 40 -o "$OUT/blockwise-s$k-$GPU" >>"$L/bench-blockwise.txt" 2>&1
        echo "blockwise split $k: exit $?"
      done
    fi
    ;;
  paths)
    # each CUDA kernel path on this GPU (W8A8_DEV CUDA_FORCE_PATH: the kernels a GPU of that capability runs) next
    # to cuBLASLt on the same shapes; the kernel column names what ran
    : >"$OUT/gemm-paths-$GPU.jsonl"
    for c in ${PATH_CCS:-90 89 80 75}; do
      timeout -k 5 "$(cap 120)" env W8A8_DEV=CUDA_FORCE_PATH=$c "$CLI" bench --gpu --suite llama8b \
        -m ${PATH_M:-1,16,128,1024,4096} -o - 2>>"$L/bench-paths.txt" >>"$OUT/gemm-paths-$GPU.jsonl"
      echo "paths $c: exit $?"
    done
    python3 bench/paths_table.py "$OUT/gemm-paths-$GPU.jsonl" --ccs "${PATH_CCS:-90 89 80 75}" >"$OUT/gemm-paths-$GPU.md"
    headed "$OUT/gemm-paths-$GPU.md" "Each CUDA path forced on this GPU next to cuBLASLt (w8a8 bench, bench/paths_table.py)" \
      "for cc in ${PATH_CCS:-90 89 80 75}; do W8A8_DEV=CUDA_FORCE_PATH=\$cc w8a8 bench --gpu --suite llama8b -m ${PATH_M:-1,16,128,1024,4096}; done"
    ;;
  host)
    cmd="python3 bench/host_cost.py --iters ${HOST_ITERS:-20000} --json $OUT/host-cost-$GPU.json"
    { header "Host time of an eager call from Python against the raw C call (bench/host_cost.py)" "$cmd"; echo;
      timeout -k 5 "$(cap 120)" $cmd 2>&1; } >"$OUT/host-cost-$GPU.txt"
    echo "host: exit $?"
    ;;
  quant)
    header "The main job: a layer's quantizers and GEMMs against bf16 (w8a8 demo)" \
      "for m in ${DEMO_M:-512 4096}; do $CLI demo -m \$m --iters 50; done" >"$OUT/demo-$GPU.txt"
    for m in ${DEMO_M:-512 4096}; do
      timeout -k 5 "$(cap 60)" "$CLI" demo -m "$m" --iters 50 >>"$OUT/demo-$GPU.txt" 2>&1
      echo "quant M=$m: exit $?"
    done
    ;;
  cublaslt)
    cmd="$CLI bench --gpu ${CUBLASLT_ARGS:-}"
    timeout -k 5 "$(cap 240)" $cmd -o "$OUT/gemm-cublaslt-$GPU.jsonl" >"$L/bench-cublaslt.txt" 2>&1
    echo "cublaslt: exit $?"
    ;;
  tp)
    for W in 2 $NGPU; do
      [ "$W" -lt 2 ] && continue
      timeout -k 5 "$(cap 120)" "$CLI" tp-bench --local "$W" -m 1024,8192 -i 10 -w 2 \
        -o "$OUT/tp-bench-w$W-$GPU.jsonl" >"$L/bench-tp-w$W.txt" 2>&1
      echo "tp W=$W: exit $?"
      [ "$NGPU" -lt 2 ] && break
    done
    ;;
  stack)
    W=$NGPU; [ "$W" -lt 2 ] && W=2; [ "$W" -gt 8 ] && W=8
    timeout -k 5 "$(cap 150)" "$CLI" tp-stack --local "$W" --tokens 1024,2048,4096,8192 --layers 2 -i 10 -w 2 \
      -o "$OUT/tp-stack-$GPU.jsonl" >"$L/bench-stack.txt" 2>&1
    echo "stack W=$W: exit $?"
    ;;
  hw)
    cmd="python3 bench/hw_limits.py ${HW_ARGS:-}"
    timeout -k 5 "$(cap 180)" $cmd -o "$OUT/hw-limits-$GPU" >"$L/bench-hw.txt" 2>&1
    echo "hw: exit $?"
    headed "$OUT/hw-limits-$GPU.md" "What the GPU allows: the weight-read floor at M <= 64, clocks and power under load" "$cmd"
    ;;
  *) echo "bench: unknown benchmark '$b'" ;;
  esac
  res="$res $b"
done
echo "bench: ran$res"
