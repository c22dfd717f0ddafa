#!/bin/bash
# test.sh — step "test": the GPU test suites SUITES names (default "gpu python"), in order:
#   gpu       every GPU test (tests/run_gpu.sh's plain set: cuda_ smoke sm90 tune_ tp_gpu act_ blockwise_cuda)
#   memcheck  the small-shape GPU tests under compute-sanitizer memcheck
#   tp1conn   the TP GPU tests with CUDA_DEVICE_MAX_CONNECTIONS=1 (every stream in one hardware queue)
#   tpmpi     the MPI + NCCL / IPC tests, one process per GPU (needs 2+ GPUs and the MPI test binary)
#   python    tests/run_python.sh (the torch tests where torch sees a GPU)
#   ptx       the portable kernels from PTX alone: for each architecture of ARCHS_PTX (default "75 80 89"), the
#             PTX-only build $BUILD_PTX-<arch> (the build_ptx step; BUILD_PTX default build-ptx) runs the CUDA
#             correctness tests (cuda_ smoke act_, less the tuning table's, which forces the sm_90a kernel) with
#             CUDA_FORCE_PTX_JIT=1, each handle required to run that architecture's kernels
#             (W8A8_TEST_EXPECT_CC: on this GPU, compute_75 code means the sm_75 kernel), then the small shapes
#             under compute-sanitizer memcheck (PTX_MEMCHECK=0: not)
#   force     this build dispatching as an older GPU (W8A8_DEV CUDA_FORCE_PATH) for each of FORCE_CCS (default
#             "75 80"): the same tests, on the SASS of the kernels a Turing / Ampere GPU runs
# TESTS="prefix ..." runs those test names instead of SUITES.
. "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -n "${TESTS:-}" ]; then
  run_tests tests 480 $TESTS
  exit $?
fi
res=""
for s in ${SUITES:-gpu python}; do
  case $s in
  gpu) run_tests gpu 420 cuda_ smoke sm90 tune_ tp_gpu act_ blockwise_cuda ;;
  memcheck)
    W8A8_GPU_TEST_SMALL=1 timeout -k 5 "$(cap 240)" "$CS" --tool memcheck --error-exitcode 99 "$TBIN" cuda_ smoke \
      tp_gpu_ag tp_gpu_rs tp_gpu_graph tp_gpu_bad act_ sm90_split_quad blockwise_cuda >"$L/memcheck.txt" 2>&1
    echo "memcheck: exit $? $(grep -E '^[0-9]+ passed' "$L/memcheck.txt" | tail -n 1) $(grep 'ERROR SUMMARY' "$L/memcheck.txt" | tail -n 1)"
    ;;
  tp1conn) CUDA_DEVICE_MAX_CONNECTIONS=1 run_tests tp1conn 240 tp_gpu_ag tp_gpu_graph tp_gpu_back ;;
  tpmpi)
    if [ "$NGPU" -ge 2 ] && [ -x "$BUILD/bin/w8a8_tp_tests" ]; then
      W8A8_TP_GPU=1 timeout -k 5 "$(cap 150)" $MPIRUN -np "$NGPU" "$BUILD/bin/w8a8_tp_tests" >"$L/tpmpi.txt" 2>&1
      echo "tpmpi (np $NGPU): exit $? $(grep -E '^[0-9]+ passed' "$L/tpmpi.txt" | tail -n 1)"
    else
      echo "tpmpi: skipped ($NGPU GPU(s))"
    fi
    ;;
  python)
    PYTHON=python3 BUILD=$BUILD timeout -k 5 "$(cap 150)" sh tests/run_python.sh >"$L/python.txt" 2>&1
    echo "python: exit $? $(tail -n 1 "$L/python.txt")"
    ;;
  ptx)
    # the architectures side by side (each process JIT-compiles its PTX on the CPU: over a minute for the
    # block-scaled tests alone), each writing its summary lines to its own file, shown in order after
    for a in ${ARCHS_PTX:-75 80 89}; do
      (
        tb="${BUILD_PTX:-build-ptx}-$a/bin/w8a8_tests"
        [ -x "$tb" ] || { echo "ptx $a: no $tb (the build_ptx step makes it)"; exit 0; }
        CUDA_FORCE_PTX_JIT=1 W8A8_TEST_EXPECT_CC=$a TBIN=$tb run_tests "ptx-$a" 300 cuda_ smoke act_ blockwise_cuda -tune_cuda
        [ "${PTX_MEMCHECK:-1}" = 0 ] && exit 0
        W8A8_GPU_TEST_SMALL=1 CUDA_FORCE_PTX_JIT=1 W8A8_TEST_EXPECT_CC=$a timeout -k 5 "$(cap 180)" "$CS" --tool memcheck \
          --error-exitcode 99 "$tb" cuda_ act_cuda -cuda_quant_math_exhaustive -tune_cuda >"$L/ptx-$a-memcheck.txt" 2>&1
        echo "ptx-$a memcheck: exit $? $(grep -E '^[0-9]+ passed' "$L/ptx-$a-memcheck.txt" | tail -n 1)" \
          "$(grep 'ERROR SUMMARY' "$L/ptx-$a-memcheck.txt" | tail -n 1)"
      ) >"$L/ptx-$a-summary.txt" 2>&1 &
    done
    wait
    for a in ${ARCHS_PTX:-75 80 89}; do cat "$L/ptx-$a-summary.txt"; done
    ;;
  force)
    for c in ${FORCE_CCS:-75 80}; do
      W8A8_DEV=CUDA_FORCE_PATH=$c W8A8_TEST_EXPECT_CC=$c run_tests "force-$c" 240 cuda_ smoke act_ blockwise_cuda -tune_cuda
    done
    ;;
  *) echo "test: unknown suite '$s'" ;;
  esac
  res="$res $s"
done
echo "test: ran$res"
