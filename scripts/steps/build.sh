#!/bin/bash
# build.sh — step "build": the library, CLI and tests for sm_90a (make BUILD=$BUILD CUDA_ARCHS=$ARCHS),
# and the bench tools (bench/*.c) against its static library. ARCHS: default 90a; ARCHS_PTX_MAIN: PTX to add
# (default none: the device runs its SASS; the PTX proof has its own builds, build_ptx.sh).
. "$(dirname "$0")/lib.sh"
timeout -k 5 "$(cap 400)" make BUILD="$BUILD" CUDA_ARCHS="${ARCHS:-90a}" CUDA_ARCHS_PTX="${ARCHS_PTX_MAIN-}" -j"$(nproc)" lib tests cli >"$L/build.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 40 "$L/build.txt"; echo "build: make exit $rc"; exit 1; }
for b in bench/*.c; do
  n=$(basename "$b" .c)
  build_bench "$b" "$BUILD/bin/$n" >>"$L/build-bench.txt" 2>&1 || echo "bench tool $n did not build"
done
echo "build: ok ($(grep -c 'nvcc' "$L/build.txt") nvcc lines; MPI test binary: $([ -x "$BUILD/bin/w8a8_tp_tests" ] && echo yes || echo no))"
