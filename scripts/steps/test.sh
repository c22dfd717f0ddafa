#!/bin/bash
# test.sh — step "test": the GPU test suites SUITES names (default "gpu python"), in order:
#   gpu       every GPU test (tests/run_gpu.sh's plain set: cuda_ smoke sm90 tune_ tp_gpu act_)
#   memcheck  the small-shape GPU tests under compute-sanitizer memcheck
#   tp1conn   the TP GPU tests with CUDA_DEVICE_MAX_CONNECTIONS=1 (every stream in one hardware queue)
#   tpmpi     the MPI + NCCL / IPC tests, one process per GPU (needs 2+ GPUs and the MPI test binary)
#   python    tests/run_python.sh (the torch tests where torch sees a GPU)
#   ptx       the portable paths from PTX only: a build with ARCHS_PTX (default "75 80 89" as PTX) run
#             with CUDA_FORCE_PTX_JIT=1 (needs that build: BUILD_PTX, default build-ptx)
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
  gpu) run_tests gpu 420 cuda_ smoke sm90 tune_ tp_gpu act_ ;;
  memcheck)
    W8A8_GPU_TEST_SMALL=1 timeout -k 5 "$(cap 240)" "$CS" --tool memcheck --error-exitcode 99 "$TBIN" cuda_ smoke \
      tp_gpu_ag tp_gpu_rs tp_gpu_graph tp_gpu_bad act_ sm90_split_quad >"$L/memcheck.txt" 2>&1
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
  *) echo "test: unknown suite '$s'" ;;
  esac
  res="$res $s"
done
echo "test: ran$res"
