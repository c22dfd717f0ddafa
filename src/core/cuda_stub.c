/* cuda_stub.c — the CUDA backend's entry points in a build without CUDA. */
#ifndef W8A8_HAVE_CUDA
#include "internal.h"

int w8a8_cuda_available_count(void) { return 0; }

static w8a8_status not_built(const char *fn) {
  return w8a8_err(W8A8_ERROR_NOT_BUILT, "%s: this libw8a8 was built without CUDA (no nvcc found at build time)", fn);
}
w8a8_status w8a8_cuda_handle_init(w8a8_handle *h) {
  (void)h;
  return not_built("w8a8_create");
}
void w8a8_cuda_handle_fini(w8a8_handle *h) { (void)h; }
w8a8_status w8a8_cuda_get_info(const w8a8_handle *h, w8a8_handle_info *info) {
  (void)h;
  (void)info;
  return not_built("w8a8_get_info");
}
w8a8_status w8a8_cuda_check_pointer(const w8a8_handle *h, const char *fn, const char *arg, const void *ptr) {
  (void)h;
  (void)arg;
  (void)ptr;
  return not_built(fn);
}
w8a8_status w8a8_cuda_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p) {
  (void)h;
  (void)p;
  return not_built("w8a8_scaled_mm");
}
w8a8_status w8a8_cuda_scaled_mm_blockwise(w8a8_handle *h, const w8a8_mm_problem *p) {
  (void)h;
  (void)p;
  return not_built("w8a8_scaled_mm_blockwise");
}
w8a8_status w8a8_cuda_quantize_groups(w8a8_handle *h, const w8a8_quant_problem *p, int silu) {
  (void)h;
  (void)p;
  return not_built(silu ? "w8a8_silu_mul_quantize_groups" : "w8a8_quantize_groups");
}
w8a8_status w8a8_cuda_quantize(w8a8_handle *h, const w8a8_quant_problem *p) {
  (void)h;
  (void)p;
  return not_built("w8a8_quantize");
}
w8a8_status w8a8_cuda_silu_mul_quantize(w8a8_handle *h, const w8a8_quant_problem *p) {
  (void)h;
  (void)p;
  return not_built("w8a8_silu_mul_quantize");
}
w8a8_status w8a8_cuda_colsum(w8a8_handle *h, const w8a8_colsum_problem *p) {
  (void)h;
  (void)p;
  return not_built("w8a8_colsum");
}
#else
typedef int w8a8_cuda_stub_unused;
#endif
