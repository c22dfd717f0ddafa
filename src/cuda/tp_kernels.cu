// tp_kernels.cu — the two small kernels of the GPU tensor-parallel schedules (src/tp/tp_gpu.c).
//
//   tp_expand:  a rank's per-tensor or per-token scale_a (and zero point) written as one value
//               per row into the gathered buffer, so rows from ranks with different per-tensor
//               scales share one per-token GEMM description (as the CPU path does in ag_gemm.c).
//               The 8-bit rows themselves move with cudaMemcpy2DAsync (copy engine).
//   tp_reduce:  the reduce-scatter's sum. out[i, n] = round(((p_0 + p_1) + ... + p_{W-1}) + bias[n]),
//               fp32 additions in rank order with explicit __fadd_rn (nvcc may not contract or
//               reorder them), rounded once by common.cuh's converters: exactly gemm_rs.c's
//               rs_reduce, so int8 results match the CPU/MPI path bit for bit. The partials are
//               fp32, or (W8A8_TP_PARTIALS_OUT) out's bf16/fp16, each widened exactly to fp32
//               before it is added (gemm_rs.c rounds and widens them in place: the same values).
#include <stdint.h>

#include "common.cuh"
#include "cuda_backend.h"
#include "tp/tp_gpu.h"

__global__ void tp_expand_kernel(float *dst_scale, const float *scale, int scale_per_row, int32_t *dst_azp,
                                 const int32_t *azp, int azp_per_row, int64_t rows) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += (int64_t)gridDim.x * blockDim.x) {
    dst_scale[i] = scale[scale_per_row ? i : 0];
    if (dst_azp) dst_azp[i] = azp[azp_per_row ? i : 0];
  }
}

extern "C" w8a8_status w8a8_tp_launch_expand(float *dst_scale, const float *scale, int scale_per_row,
                                             int32_t *dst_azp, const int32_t *azp, int azp_per_row, int64_t rows,
                                             cudaStream_t stream) {
  if (rows <= 0) return W8A8_SUCCESS;
  int64_t blocks = (rows + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  tp_expand_kernel<<<(unsigned)blocks, 256, 0, stream>>>(dst_scale, scale, scale_per_row, dst_azp, azp, azp_per_row,
                                                          rows);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? W8A8_SUCCESS : w8a8_cuda_error("w8a8_all_gather_scaled_mm", "tp_expand launch", e);
}

// One thread per output element, grid-stride. The sources are [rows, N] dense, one per rank in
// rank order (passed by value: no device-side pointer table to keep in sync), of dtype src_dtype
// (fp32, bf16 or fp16: the same for every rank, so the branch in w8a8d_load_float is uniform).
__global__ void tp_reduce_kernel(w8a8_tp_reduce_srcs srcs, int src_dtype, int W, int64_t rows, int64_t N, void *out,
                                 int64_t ldo, int out_dtype, const void *bias) {
  const int64_t total = rows * N;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e / N, n = e - i * N;
    float s = w8a8d_load_float(src_dtype, srcs.p[0], e);
    for (int j = 1; j < W; j++) s = __fadd_rn(s, w8a8d_load_float(src_dtype, srcs.p[j], e));
    if (bias) s = __fadd_rn(s, w8a8d_load_float(out_dtype, bias, n));
    w8a8d_store_float(out_dtype, out, i * ldo + n, s);
  }
}

extern "C" w8a8_status w8a8_tp_launch_reduce(const w8a8_tp_reduce_srcs *srcs, w8a8_dtype src_dtype, int W,
                                             int64_t rows, int64_t N, void *out, int64_t ldo, w8a8_dtype out_dtype,
                                             const void *bias, int num_sms, cudaStream_t stream) {
  const int64_t total = rows * N;
  if (total <= 0) return W8A8_SUCCESS;
  int64_t blocks = (total + 255) / 256, cap = (int64_t)num_sms * 8;
  if (blocks > cap) blocks = cap;
  tp_reduce_kernel<<<(unsigned)blocks, 256, 0, stream>>>(*srcs, (int)src_dtype, W, rows, N, out, ldo, (int)out_dtype,
                                                          bias);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? W8A8_SUCCESS : w8a8_cuda_error("w8a8_scaled_mm_reduce_scatter", "tp_reduce launch", e);
}
