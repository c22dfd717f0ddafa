#!/bin/bash
# gpu_session.sh — one call on the GPU machine for the CUDA backend: build for sm_90a, the GPU
# tests, the same under compute-sanitizer (memcheck, racecheck), the CUDA-graph test on its
# own, and the benchmark against cuBLASLt. Every step runs under `timeout` and writes its log
# under $OUT as it goes (a hung step loses nothing already written).
#
#   OUT=/tmp/out scripts/gpu_session.sh
#   Env: GPU_SESSION_STEPS (default "build test graph bench sanitize"; also "check", "demo"), BENCH_ARGS (w8a8 bench options),
#        BENCH_TIMEOUT (default 300), BUILD (default build-gpu), GPU_TEST_FILTER (test name substrings)
set -u
OUT=${OUT:-/tmp/w8a8-gpu-out}
BUILD=${BUILD:-build-gpu}
STEPS=${GPU_SESSION_STEPS:-"build test graph bench sanitize"}
BENCH_ARGS=${BENCH_ARGS:-"--gpu --suite llama8b,llama70b-tp4 -m 1,16,64,128,512,2048,8192 --dtype both --scales token"}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-300}
mkdir -p "$OUT"
LOG="$OUT/session.log"
say() { echo "[gpu_session $(date +%H:%M:%S)] $*" | tee -a "$LOG"; }
has() { case " $STEPS " in *" $1 "*) return 0 ;; esac; return 1; }

say "steps: $STEPS"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu \
  --format=csv >>"$LOG" 2>&1
nvcc --version 2>&1 | tail -n 1 >>"$LOG"
T0=$(date +%s)

# W8A8_SM90_STUB=1: build the library with a stub in place of the Hopper path (src/cuda/sm90_*.cu and
# tests/test_sm90.c left out), to measure the portable kernel alone and keep the build short.
MAKEVARS=(BUILD="$BUILD" CUDA_ARCHS=90a)
if [ "${W8A8_SM90_STUB:-0}" = 1 ]; then
  mkdir -p "$BUILD"
  cat >"$BUILD/sm90_stub.cu" <<'STUB'
#include "cuda/cuda_backend.h"
extern "C" w8a8_status w8a8_sm90_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p) {
  (void)h;
  (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_scaled_mm: this build has no sm_90a kernel (stub)");
}
STUB
  MAKEVARS+=(LIB_CU="$(ls src/cuda/*.cu | grep -v '/sm90_' | tr '\n' ' ') $BUILD/sm90_stub.cu")
  MAKEVARS+=(TEST_C="$(ls tests/*.c | grep -v -e '/fuzz_' -e '/test_sm90' | tr '\n' ' ')")
fi

if has build; then
  say "build: make ${MAKEVARS[*]} -j16 lib tests"
  timeout 480 make "${MAKEVARS[@]}" -j16 lib tests >"$OUT/build.log" 2>&1
  rc=$?
  say "build: exit $rc ($(($(date +%s) - T0)) s)"
  tail -n 15 "$OUT/build.log"
  [ $rc -eq 0 ] || { say "build failed: stopping"; exit 1; }
  # Which tensor-core instructions the portable kernel compiled to (IMMA for int8; fp8 on sm_90?)
  { echo "SASS matrix instructions in gemm_mma.cu.o:"; cuobjdump -sass "$BUILD/obj/src/cuda/gemm_mma.cu.o" 2>&1 |
    grep -oE '(HMMA|IMMA|QMMA|HGMMA|IGMMA|QGMMA)[.A-Z0-9]*' | sort | uniq -c; } >>"$LOG" 2>&1
  # The CLI may not build while others' work is in flight; the bench then uses our driver.
  timeout 120 make "${MAKEVARS[@]}" -j16 cli >>"$OUT/build.log" 2>&1 || say "build: the CLI did not build (bench uses scripts/bench_cuda_main.c)"
  LIBS=$(make "${MAKEVARS[@]}" --no-print-directory --eval='print-ldlibs: ; @echo $(LDLIBS_ALL)' print-ldlibs 2>/dev/null)
  CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  # shellcheck disable=SC2086
  cc -std=c11 -D_GNU_SOURCE -O2 -Iinclude -Isrc -Itools -DW8A8_HAVE_CUDA -I"$CUDA_HOME/include" -fopenmp \
    scripts/bench_cuda_main.c tools/bench_cuda.c "$BUILD/lib/libw8a8.a" -L"$CUDA_HOME/lib64" -lcublasLt \
    -Wl,-rpath,"$CUDA_HOME/lib64" $LIBS -o "$BUILD/bench_cuda_main" >>"$OUT/build.log" 2>&1 ||
    say "build: bench driver failed to link"
fi

if has test; then
  say "test: w8a8_tests ${GPU_TEST_FILTER:-cuda_ smoke}"
  # shellcheck disable=SC2086
  timeout 300 "$BUILD/bin/w8a8_tests" ${GPU_TEST_FILTER:-cuda_ smoke} >"$OUT/test.log" 2>&1
  say "test: exit $? ($(($(date +%s) - T0)) s): $(tail -n 1 "$OUT/test.log")"
  grep -vE '^\[ (RUN|  OK) *\]' "$OUT/test.log" | tail -n 40
fi

if has graph; then
  say "graph: w8a8_tests cuda_graph"
  timeout 60 "$BUILD/bin/w8a8_tests" cuda_graph >>"$LOG" 2>&1
  say "graph: exit $?"
fi

if has check; then
  say "check: w8a8 check --gpu (every mode on random odd shapes vs the reference)"
  timeout "${CHECK_TIMEOUT:-60}" "$BUILD/bin/w8a8" check --gpu >"$OUT/check.log" 2>&1
  say "check: exit $? ($(($(date +%s) - T0)) s)"
  tail -n 5 "$OUT/check.log"
fi

if has demo; then
  say "demo: w8a8 demo (the README's main job, on the GPU)"
  timeout "${DEMO_TIMEOUT:-60}" "$BUILD/bin/w8a8" demo >"$OUT/demo.log" 2>&1
  say "demo: exit $? ($(($(date +%s) - T0)) s)"
  tail -n 14 "$OUT/demo.log"
fi

if has bench; then
  if [ -x "$BUILD/bin/w8a8" ] && "$BUILD/bin/w8a8" bench --help >/dev/null 2>&1; then
    BENCH=("$BUILD/bin/w8a8" bench $BENCH_ARGS)
  else
    BENCH=("$BUILD/bench_cuda_main" -m "${BENCH_MS:-1,16,64,128,512,2048,8192}")
  fi
  say "bench: ${BENCH[*]}"
  timeout "$BENCH_TIMEOUT" stdbuf -oL "${BENCH[@]}" -o "$OUT/bench.jsonl" >"$OUT/bench.txt" 2>"$OUT/bench.err"
  say "bench: exit $? ($(($(date +%s) - T0)) s)"
  tail -n 3 "$OUT/bench.err" >>"$LOG"
  rm -f "$OUT/bench.err"
  grep -E '^#|w8a8_cuda' "$OUT/bench.txt" | tail -n 60
fi
if has sanitize; then
  say "sanitize: compute-sanitizer memcheck + racecheck (tests/run_gpu.sh)"
  BUILD="$BUILD" GPU_TEST_LOGDIR="$OUT" GPU_TEST_TIMEOUT="${SANITIZE_TIMEOUT:-150}" GPU_TEST_REUSE_LOG="$OUT/test.log" \
    sh tests/run_gpu.sh >>"$LOG" 2>&1
  say "sanitize: exit $? ($(($(date +%s) - T0)) s)"
  cat "$OUT/gpu-test-summary.txt"
fi

say "done ($(($(date +%s) - T0)) s)"
ls -la "$OUT" >>"$LOG"
