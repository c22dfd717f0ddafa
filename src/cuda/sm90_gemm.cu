// sm90_gemm.cu — placeholder for the Hopper TMA + wgmma path: takes nothing yet.
#include "cuda_backend.h"

extern "C" w8a8_status w8a8_sm90_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p) {
  (void)h;
  (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_scaled_mm: the sm_90a kernel is not built yet");
}
