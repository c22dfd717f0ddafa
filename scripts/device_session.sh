#!/bin/bash
# device_session.sh — ONE device call that builds, tests and benchmarks whatever STEPS names, each
# step under its own `timeout`, logs under $OUT as it goes (a hung step loses nothing already
# written). Works on any number of GPUs (steps that need 2+ say so and skip on one).
#
#   OUT=/tmp/out STEPS="info build sm90wide sm90 tpgpu python torchcmp" bash scripts/device_session.sh
#
# Steps (in this order, whichever are named):
#   info      GPUs, topology, peer access, MPI / NCCL versions
#   build     make BUILD=$BUILD CUDA_ARCHS=90a lib tests cli (+ the MPI test binary when MPI is there)
#   sm90wide  the wide-N small-M cases of the session-1 stall, each in its own process (45 s each)
#   sm90      the sm90_ and tune_ test suites
#   tests     the tests named by TESTS (name prefixes, as w8a8_tests takes them)
#   gpu       the whole GPU suite (tests/run_gpu.sh's set: cuda_ sm90_ tp_gpu_ ...)
#   cuda      the cuda_ and graph_ tests only (with sm90: the rest of gpu without running sm90_ twice)
#   tpgpu     tp_gpu_ tests: W ranks as threads (spread over every visible GPU; one GPU: emulated)
#   tpmpi     the MPI+NCCL GPU tests, one process per GPU (mpirun -np NGPU; needs 2+ GPUs)
#   tp1conn   tp_gpu_ag/graph/back (and with 2+ GPUs tp_nccl/tp_ipc under mpirun) with CUDA_DEVICE_MAX_CONNECTIONS=1
#   memcheck  tp_gpu_ small shapes under compute-sanitizer memcheck
#   memcheck90  the split-K quad test and the gemv test under compute-sanitizer memcheck (session 7's kernels)
#   python    tests/run_python.sh (the torch tests run where torch sees a GPU)
#   torchcmp  bench/torch_compare.py (issue 4's side-by-side) -> $OUT/h200-torch-compare.{jsonl,md}
#   tpbench   w8a8 tp-bench --local W for W = 2, 4 (and the real GPUs when there are 2+)
#   stack     the layer-stack benchmark (bench/tp_stack) at every TP size the machine allows
#   (and scripts/steps/NAME.sh for any other NAME: sm90ab, envab, oldab, tpgroup, ...; see their headers)
# Env: BUILD (build-dev), BUDGET_S (stop starting steps after this many seconds, 560),
#      TORCH_M / TORCH_SUITES (torch_compare's --m / --suites), TORCH_BUDGET_S (200)
set -u
OUT=${OUT:-/tmp/w8a8-device-out}
BUILD=${BUILD:-build-dev}
STEPS=${STEPS:-"info build sm90wide sm90 tpgpu python"}
BUDGET=${BUDGET_S:-560}
mkdir -p "$OUT/logs"
S="$OUT/summary.txt"
L="$OUT/logs"
# The device tool returns at most 8 files: step logs go to $L and are packed into logs.tgz at the end.
pack() { tar czf "$OUT/logs.tgz" -C "$OUT" logs 2>/dev/null && rm -rf "$L"; }
trap pack EXIT
T0=$(date +%s)
export PATH=$PATH:/usr/local/cuda/bin
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
log() { echo "== [$(($(date +%s) - T0)) s] $*" | tee -a "$S"; }
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }
left() { echo $((BUDGET - ($(date +%s) - T0))); }
ok_budget() { [ "$(left)" -gt 15 ] || { log "budget spent: skipping $*"; return 1; }; }
tmo() { local t=$1 l; l=$(left); [ "$t" -gt "$l" ] && t=$l; [ "$t" -lt 5 ] && t=5; echo "$t"; }
NGPU=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
T="$BUILD/bin/w8a8_tests"
MPIRUN="mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS"
log "$(date -u +%FT%TZ) steps: $STEPS; $NGPU GPU(s)"
if has tests && [ -z "${TESTS:-}" ]; then
  log "the tests step needs TESTS (name prefixes); nothing run"
  exit 1
fi

if has info; then
  {
    nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
    nvidia-smi topo -m
    nvidia-smi nvlink -s 2>&1 | head -n 20
    nproc
    mpirun --version 2>&1 | head -n 1
    ls /usr/lib/x86_64-linux-gnu/libnccl* /usr/local/lib/libnccl* 2>/dev/null
    python3 -c 'import torch; print("torch", torch.__version__, "gpus", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version());
n = torch.cuda.device_count()
print("peer", [[torch.cuda.can_device_access_peer(i, j) if i != j else None for j in range(n)] for i in range(n)])' 2>&1
  } >"$L/info.txt" 2>&1
  log "info: $(head -n 2 "$L/info.txt" | tail -n 1); $(grep -E '^peer|^torch' "$L/info.txt" | tr '\n' ' ')"
fi

# EXCLUDE="path ..." : files moved aside before the build (others' work in progress in a shared
# tree travels with the working-tree copy; this keeps it out of a run that does not need it).
for x in ${EXCLUDE:-}; do [ -e "$x" ] && mkdir -p /tmp/w8a8-excluded && mv "$x" /tmp/w8a8-excluded/ && log "excluded $x"; done
if has build; then
  timeout 300 make BUILD="$BUILD" CUDA_ARCHS=90a -j"$(nproc)" lib tests cli >"$L/build.txt" 2>&1
  rc=$?
  log "build: exit $rc; $(grep -E 'NCCL|MPI|nvcc' "$L/build.txt" | head -n 3 | tr '\n' ' ')"
  [ $rc -eq 0 ] || { tail -n 30 "$L/build.txt" | tee -a "$S"; exit 1; }
  [ -x "$BUILD/bin/w8a8_tp_tests" ] || log "no MPI test binary (MPI not found by the Makefile)"
fi

if has sm90wide; then
  for t in sm90wide_int8_split8 sm90wide_int8_split1 sm90wide_fp8_split1 sm90wide_n64_split1 sm90wide_token_tiles \
    sm90wide_auto_split1; do
    ok_budget "$t" || break
    timeout -k 5 "$(tmo 90)" "$T" "$t" >>"$L/sm90-tests.txt" 2>&1
    rc=$?
    log "$t: exit $rc $([ $rc -ge 124 ] && echo '(TIMEOUT: hang)') $(grep -E '^[0-9]+ passed' "$L/sm90-tests.txt" | tail -n 1)"
    [ $rc -ge 124 ] && sleep 3
  done
fi

run_tests() { # name timeout args...
  local name=$1 t=$2
  shift 2
  ok_budget "$name" || return
  W8A8_TEST_VERBOSE=1 timeout -k 5 "$(tmo "$t")" stdbuf -oL "$T" "$@" >"$L/$name.txt" 2>&1
  local rc=$?
  log "$name: exit $rc $([ $rc -ge 124 ] && echo '(TIMEOUT)') $(grep -E '^[0-9]+ passed' "$L/$name.txt" | tail -n 1)"
  grep -E 'FAIL|SKIP' "$L/$name.txt" | head -n 12 | tee -a "$S"
}
if has sm90; then
  # the several-tiles-per-CTA cases first, in their own process (a hang there must not cost the rest)
  run_tests sm90-tiles 120 sm90_many_tiles
  run_tests sm90-suite 420 sm90_ tune_ -sm90_many_tiles
fi
# TESTS="name-prefix ...": those tests (e.g. the rest of a suite a budget cut short)
has tests && run_tests tests 480 $TESTS  # (the sm90_ suite alone > 150 s since session 27; BUDGET_S caps it)
has gpu && run_tests gpu-suite 480 cuda_ sm90_ tune_ graph_
has cuda && run_tests cuda-suite 180 cuda_ graph_
has tpgpu && run_tests tpgpu 300 tp_gpu

if has tpmpi; then
  if [ "$NGPU" -ge 2 ] && [ -x "$BUILD/bin/w8a8_tp_tests" ] && ok_budget tpmpi; then
    W8A8_TP_GPU=1 timeout -k 5 "$(tmo 150)" $MPIRUN -np "$NGPU" "$BUILD/bin/w8a8_tp_tests" >"$L/tpmpi.txt" 2>&1
    log "tpmpi (np $NGPU, NCCL): exit $? $(grep -E '^[0-9]+ passed' "$L/tpmpi.txt" | tail -n 1)"
    grep -E 'FAIL' "$L/tpmpi.txt" | head -n 12 | tee -a "$S"
  else
    log "tpmpi: skipped ($NGPU GPU(s))"
  fi
fi

# tp1conn: the TP GPU tests with CUDA_DEVICE_MAX_CONNECTIONS=1 (Megatron-LM sets it: every stream of a
# device in one hardware queue). The one-GEMM all-gather enqueues its flag-spinning GEMM before the
# side-stream copies that release it (review, session 29, open finding (e)); with peers on other
# GPUs (2+ GPUs: tp_gpu_ threads spread over them, the IPC transport under mpirun) this is the test.
if has tp1conn; then
  ( export CUDA_DEVICE_MAX_CONNECTIONS=1; run_tests tp1conn 240 tp_gpu_ag tp_gpu_graph tp_gpu_back )
  if [ "$NGPU" -ge 2 ] && [ -x "$BUILD/bin/w8a8_tp_tests" ] && ok_budget tp1conn-mpi; then
    CUDA_DEVICE_MAX_CONNECTIONS=1 W8A8_TP_IPC=1 W8A8_TP_GPU=1 timeout -k 5 "$(tmo 150)" $MPIRUN -x CUDA_DEVICE_MAX_CONNECTIONS \
      -x W8A8_TP_IPC -np "$NGPU" "$BUILD/bin/w8a8_tp_tests" tp_nccl tp_ipc >"$L/tp1conn-mpi.txt" 2>&1
    log "tp1conn-mpi (np $NGPU, one connection): exit $? $(grep -E '^[0-9]+ passed' "$L/tp1conn-mpi.txt" | tail -n 1)"
    grep -E 'FAIL' "$L/tp1conn-mpi.txt" | head -n 12 | tee -a "$S"
  fi
fi

if has memcheck90 && ok_budget memcheck90; then
  timeout -k 5 "$(tmo 240)" compute-sanitizer --tool memcheck --error-exitcode 99 "$T" sm90_split_quad cuda_gemv \
    >"$L/memcheck90.txt" 2>&1
  log "memcheck90: exit $? $(grep -E '^[0-9]+ passed' "$L/memcheck90.txt" | tail -n 1) $(grep 'ERROR SUMMARY' "$L/memcheck90.txt" | tail -n 1)"
fi
if has memcheck && ok_budget memcheck; then
  W8A8_GPU_TEST_SMALL=1 timeout -k 5 "$(tmo 150)" compute-sanitizer --tool memcheck --error-exitcode 99 "$T" tp_gpu_ag \
    tp_gpu_rs tp_gpu_graph tp_gpu_bad tp_gpu_back >"$L/memcheck.txt" 2>&1
  log "memcheck: exit $? $(grep -E '^[0-9]+ passed' "$L/memcheck.txt" | tail -n 1) $(grep 'ERROR SUMMARY' "$L/memcheck.txt" | tail -n 1)"
fi

if has python && ok_budget python; then
  W8A8_LIBRARY=$PWD/$BUILD/lib/libw8a8.so PYTHON=python3 BUILD=$BUILD timeout -k 5 "$(tmo 150)" sh tests/run_python.sh \
    >"$L/python.txt" 2>&1
  log "python: exit $? $(tail -n 1 "$L/python.txt")"
  grep -E '(FAIL|ERROR):' "$L/python.txt" | head -n 10 | tee -a "$S"
fi

if has torchcmp && ok_budget torchcmp; then
  tb=${TORCH_BUDGET_S:-200}
  [ "$tb" -gt "$(($(left) - 30))" ] && tb=$(($(left) - 30))
  W8A8_LIBRARY=$PWD/$BUILD/lib/libw8a8.so PYTHONPATH=python timeout -k 5 "$(tmo $((tb + 40)))" python3 -u \
    bench/torch_compare.py --budget-s "$tb" ${TORCH_M:+--m "$TORCH_M"} ${TORCH_SUITES:+--suites "$TORCH_SUITES"} \
    -o "$OUT/h200-torch-compare" >"$L/torchcmp.txt" 2>&1
  log "torchcmp: exit $?"
  grep -iE 'geomean|target|TFLOP' "$OUT/h200-torch-compare.md" 2>/dev/null | head -n 20 | tee -a "$S"
fi

if has tpbench; then
  for W in 2 4; do
    ok_budget "tp-bench W=$W" || break
    # ranks sharing GPUs (W > NGPU) only at 1024 tokens: session 9's W = 4 on 2 GPUs took ~90 s per shape at 8192
    ms=1024,8192; [ "$W" -gt "${NGPU:-1}" ] && ms=1024
    timeout -k 5 "$(tmo 90)" "$BUILD/bin/w8a8" tp-bench --local "$W" -m "$ms" -n 10 -w 2 \
      -o "$OUT/tp-bench-local-w$W.jsonl" >"$L/tp-bench-local-w$W.txt" 2>&1
    log "tp-bench --local $W: exit $?"
  done
fi

if has stack && [ -x "$BUILD/bin/tp_stack" ] && ok_budget stack; then
  timeout -k 5 "$(tmo 150)" "$BUILD/bin/tp_stack" -o "$OUT/tp-stack.jsonl" >"$L/tp-stack.txt" 2>&1
  log "stack: exit $?"
fi
# Steps kept in their own files: scripts/steps/NAME.sh for any NAME in STEPS, run with
# OUT, L (log dir: files there come back packed in logs.tgz), BUILD, T, NGPU, MPIRUN exported and
# LEFT_S = the seconds left in the budget (a step script must stay under it).
export OUT L BUILD T NGPU MPIRUN
for st in $STEPS; do
  [ -f "scripts/steps/$st.sh" ] || continue
  ok_budget "$st" || break
  LEFT_S=$(($(left) - 10)) timeout -k 5 "$(tmo $(($(left) - 5)))" bash "scripts/steps/$st.sh" >"$L/step-$st.txt" 2>&1
  log "step $st: exit $? $(tail -n 1 "$L/step-$st.txt")"
done
log "done in $(($(date +%s) - T0)) s"
