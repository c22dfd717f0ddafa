#!/bin/bash
# deepgemm.sh — step "deepgemm": DeepGEMM built on the machine from a carried source tree (DG_SRC, default ../dg:
# its repository with third-party/cutlass/include and third-party/fmt/include at the commits its submodules pin,
# put together from the fetched mirrors and carried; none of it is committed here), for the DeepGEMM rows of the
# blockwise bench, which finds it there. Its kernels compile on first use (JIT, cached under DG_JIT_CACHE_DIR).
. "$(dirname "$0")/lib.sh"
src=${DG_SRC:-../dg}
[ -f "$src/setup.py" ] || { echo "deepgemm: no source tree at $src (carry it)"; exit 1; }
# (its develop.sh, with python3: link CUTLASS's headers into its include tree, build the extension, link the .so)
(cd "$src" && ln -sfn "$PWD/third-party/cutlass/include/cutlass" deep_gemm/include/cutlass &&
  ln -sfn "$PWD/third-party/cutlass/include/cute" deep_gemm/include/cute &&
  MAX_JOBS=$(nproc) timeout -k 5 "$(cap 300)" python3 setup.py build &&
  so=$(find build -name '*.so' -type f | head -n 1) && [ -n "$so" ] && ln -sf "../$so" deep_gemm/) \
  >"$L/deepgemm-build.txt" 2>&1
rc=$?
v=$(cd "$src" && python3 -c 'import deep_gemm; print(deep_gemm.__version__)' 2>&1 | tail -n 1)
echo "deepgemm: build exit $rc; import: $v"
[ $rc -eq 0 ]
