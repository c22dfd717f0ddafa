/* dispatch.c — placeholder CUDA dispatch until the kernels land. */
#include "cuda_backend.h"

w8a8_status w8a8_cuda_state_init(w8a8_handle *h, w8a8_cuda_state *st) {
  (void)h;
  (void)st;
  return W8A8_SUCCESS;
}
void w8a8_cuda_state_fini(w8a8_handle *h, w8a8_cuda_state *st) {
  (void)h;
  (void)st;
}
w8a8_status w8a8_cuda_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p) {
  (void)h;
  (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_scaled_mm: CUDA kernels not built yet");
}
w8a8_status w8a8_cuda_quantize(w8a8_handle *h, const w8a8_quant_problem *p) {
  (void)h;
  (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_quantize: CUDA kernels not built yet");
}
w8a8_status w8a8_cuda_colsum(w8a8_handle *h, const w8a8_colsum_problem *p) {
  (void)h;
  (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_colsum: CUDA kernels not built yet");
}
