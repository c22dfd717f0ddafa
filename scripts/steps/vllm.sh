#!/bin/bash
# vllm.sh — step "vllm": vLLM's Hopper cutlass_scaled_mm (CUTLASS 3.x kernels, sm90a) built on the machine as a
# small torch extension from bench/vllm_ext/binding.cu and a carried source tree (VLLM_SRC, default ../vllm: the
# carried .dev/vllm beside the .dev snapshot a device command runs in; none of it is committed here), for the
# benchmarks (bench/torch_compare.py's vllm_cutlass rows; the bench step passes the library on) to time next to ours in
# one process: torch.ops.load_library("$VLLM_BUILD/vllm_cutlass.so"), then
# torch.ops.vllm_cutlass.cutlass_scaled_mm(out, a, b, a_scales, b_scales, bias). The import check runs fp8 and
# int8 GEMMs at M = 8 and 200 against a float reference. Flags as vLLM's CMake sets them for these files.
# Env: VLLM_SRC; VLLM_BUILD (the build folder, default $VLLM_SRC/build: a carried tree comes without it).
#
# The tree (about 30 MB): vLLM's files, each as stored at the vLLM commit beside it (read with the search tool's
# read_file, written to the same path under $VLLM_SRC; W = csrc/quantization/w8a8/cutlass, E = csrc/cutlass_extensions):
#   W/scaled_mm_c3x_sm90.cu 85c990cb, W/c3x/scaled_mm_helper.hpp 31106f4f, W/c3x/scaled_mm_kernels.hpp 85f1f913,
#   W/c3x/scaled_mm_sm90_fp8.cu e04bcc7f, W/c3x/scaled_mm_sm90_fp8_dispatch.cuh c30af866,
#   W/c3x/scaled_mm_sm90_int8.cu 50feac95, W/c3x/scaled_mm_sm90_int8_dispatch.cuh a9718d8a,
#   W/c3x/scaled_mm.cuh e04bcc7f, W/c3x/cutlass_gemm_caller.cuh 85f1f913, E/common.hpp 236e0fe9,
#   E/common.cpp c6991a3b, E/epilogue/scaled_mm_epilogues_c3x.hpp 00c11f4d,
#   E/epilogue/broadcast_load_epilogue_c3x.hpp 023df295, csrc/core/math.hpp a6974538, csrc/cuda_utils.h 110d790e
# and CUTLASS v4.4.2 (the tag vLLM's CMakeLists.txt pins) from the fetched mirror of NVIDIA/cutlass:
#   mkdir -p .dev/vllm/cutlass && git -C /work/.mirror/NVIDIA+cutlass/repo archive v4.4.2 include \
#     tools/util/include | tar -x -C .dev/vllm/cutlass
. "$(dirname "$0")/lib.sh"
src=${VLLM_SRC:-../vllm}
[ -f "$src/csrc/quantization/w8a8/cutlass/scaled_mm_c3x_sm90.cu" ] && [ -d "$src/cutlass/include/cute" ] ||
  { echo "vllm: no source tree at $src (carry it)"; exit 1; }
export VLLM_SRC=$(cd "$src" && pwd)
export VLLM_BUILD=${VLLM_BUILD:-$VLLM_SRC/build}
mkdir -p "$VLLM_BUILD"
# (torch's own nvcc flags come first; vLLM drops its __CUDA_NO_HALF*__ ones, undone here after them)
MAX_JOBS=$(nproc) TORCH_CUDA_ARCH_LIST=9.0a timeout -k 5 "$(cap 480)" python3 - >"$L/vllm-build.txt" 2>&1 <<'EOF'
import os
from torch.utils.cpp_extension import CUDA_HOME, load
s, w = os.environ["VLLM_SRC"], os.environ["VLLM_SRC"] + "/csrc/quantization/w8a8/cutlass/"
cccl = os.path.join(CUDA_HOME or "/usr/local/cuda", "include", "cccl")  # CUDA 13: libcu++ for the C++ compiler
macros = ["-DNDEBUG", "-DENABLE_FP8", "-DENABLE_SCALED_MM_SM90=1", "-DCUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL=1"]
print(load(
    name="vllm_cutlass", build_directory=os.environ["VLLM_BUILD"], verbose=True, is_python_module=False,
    sources=[os.path.abspath("bench/vllm_ext/binding.cu"), w + "scaled_mm_c3x_sm90.cu",
             w + "c3x/scaled_mm_sm90_fp8.cu", w + "c3x/scaled_mm_sm90_int8.cu",
             s + "/csrc/cutlass_extensions/common.cpp"],
    extra_include_paths=[s + "/csrc", s + "/cutlass/include", s + "/cutlass/tools/util/include"],
    extra_cflags=["-O3", "-std=c++17"] + macros + (["-I" + cccl] if os.path.isdir(cccl) else []),
    extra_cuda_cflags=["-gencode=arch=compute_90a,code=sm_90a", "-O3", "-std=c++17", "--expt-relaxed-constexpr",
                       "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
                       "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__"] + macros))
EOF
rc=$?
v=$(timeout -k 5 "$(cap 90)" python3 - 2>&1 <<'EOF' | tail -n 1
import os, torch
torch.ops.load_library(os.environ["VLLM_BUILD"] + "/vllm_cutlass.so")
op, d, n, k, res = torch.ops.vllm_cutlass.cutlass_scaled_mm, "cuda", 512, 1024, []
torch.manual_seed(0)
for dt in (torch.float8_e4m3fn, torch.int8):
    err = 0.0
    for m in (8, 200):
        if dt == torch.int8:
            a, b = (torch.randint(-8, 8, s, device=d, dtype=dt) for s in ((m, k), (n, k)))
        else:
            a, b = (torch.randn(s, device=d).to(dt) for s in ((m, k), (n, k)))
        b = b.t()  # (K, N) column-major
        sa, sb = torch.rand(m, 1, device=d) + 0.5, torch.rand(1, n, device=d) + 0.5
        out = torch.empty(m, n, device=d, dtype=torch.bfloat16)
        op(out, a, b, sa, sb, None)
        ref = (a.float() @ b.float()) * sa * sb
        err = max(err, ((out.float() - ref).abs().max() / ref.abs().max()).item())
    res.append(f"{str(dt)[6:]} max rel err {err:.1e}")
print("ok,", ", ".join(res))
EOF
)
echo "vllm: build exit $rc; import: $v"
[ $rc -eq 0 ]
