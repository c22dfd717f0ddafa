/* cpu_kernels.h — the CPU fast kernels' entry points (src/cpu/gemm_fast.c, quant_fast.c).
 * Each returns W8A8_ERROR_UNSUPPORTED_DEVICE when it cannot take the problem on this CPU
 * (the dispatcher then runs the reference), W8A8_SUCCESS when it computed the result. */
#ifndef W8A8_CPU_KERNELS_H
#define W8A8_CPU_KERNELS_H
#include "../core/internal.h"

/* Bytes of packing workspace a CPU handle allocates at creation (may be 0). */
W8A8_HIDDEN size_t w8a8_cpu_workspace_bytes(const w8a8_handle *h);
W8A8_HIDDEN w8a8_status w8a8_cpu_gemm_fast(w8a8_handle *h, const w8a8_mm_problem *p);
W8A8_HIDDEN w8a8_status w8a8_cpu_quantize_fast(w8a8_handle *h, const w8a8_quant_problem *p);
W8A8_HIDDEN int w8a8_cpu_threads(const w8a8_handle *h);

#endif
