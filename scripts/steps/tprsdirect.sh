#!/bin/bash
# tprsdirect.sh — step "tprsdirect" (issue 6; session 11, run in session 12: lost 0.82-0.95x, default 0): the fused reduce-scatter with the
# peers' fp32 partials stored straight from the GEMMs' epilogues into their receive buffers
# (W8A8_TP_RS_DIRECT=1) against the copy-engine push after each piece's GEMM (=0, the default).
#   1. the tp_gpu reduce-scatter tests (tp_gpu_rs_direct_w2/_w3/_w4 count the direct pieces; on one GPU the
#      ranks share it and the direct stores are plain local stores);
#   2. with 2+ GPUs only: tp-bench --local NGPU at 1024 and 2048 tokens with W8A8_TP_RS_DIRECT = 0, 1,
#      two rounds, the second in reverse order;
#   3. with 2+ GPUs only: the IPC transport's tests (processes, mpirun) with the switch on (the direct
#      stores go into the peers' workspaces through their CUDA IPC mappings).
# Prediction: 70b-o rs at 1024 tokens, TP = 2, 139.5 -> ~110 us (the push no longer waits for the whole
# peer chunk's GEMM).
# Env from device_session.sh: L, BUILD, LEFT_S, NGPU. Last line: summary.
set -u
: "${L:?}" "${BUILD:?}"
LEFT_S=${LEFT_S:-300}
. "$(dirname "$0")/common.sh"
tp_tests tprsdirect 200 tp_gpu_rs
tp_env_ab tprsdirect W8A8_TP_RS_DIRECT "0 1" rs "$W"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe -x NCCL_NVLS_ENABLE -x TORCH_SYMM_MEM_DISABLE_MULTICAST -x NVSHMEM_DISABLE_NVLS}
if [ -x "$BUILD/bin/w8a8_tp_tests" ]; then
  W8A8_TP_IPC=1 W8A8_TP_RS_DIRECT=1 W8A8_TP_TIMEOUT_S=40 W8A8_TEST_VERBOSE=1 timeout -k 5 "$(cap 80)" \
    $MPIRUN -x W8A8_TP_IPC -x W8A8_TP_RS_DIRECT -x W8A8_TP_TIMEOUT_S -x W8A8_TEST_VERBOSE -np "$W" \
    stdbuf -oL "$BUILD/bin/w8a8_tp_tests" tp_ipc_ >"$L/tprsdirect-ipc-tests.txt" 2>&1
  res="$res ipc tests (direct on): exit $? $(grep -E 'passed' "$L/tprsdirect-ipc-tests.txt" | tail -n 1);"
fi
echo "tprsdirect:$res"
