/* gemm_fast.c — placeholder until the AVX2 kernels land: always defers to the reference. */
#include "cpu_kernels.h"

size_t w8a8_cpu_workspace_bytes(const w8a8_handle *h) {
  (void)h;
  return 0;
}

w8a8_status w8a8_cpu_gemm_fast(w8a8_handle *h, const w8a8_mm_problem *p) {
  (void)h;
  (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_scaled_mm: no fast CPU kernel in this build");
}

w8a8_status w8a8_cpu_quantize_fast(w8a8_handle *h, const w8a8_quant_problem *p) {
  (void)h;
  (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_quantize: no fast CPU kernel in this build");
}
