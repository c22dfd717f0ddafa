// tp_kernels.cu — the small kernels of the GPU tensor-parallel schedules (src/tp/tp_gpu.c).
//
//   tp_pack:    the all-gather's own rows (strided a -> the dense gathered buffer), one scale and
//               zero point per row, and the one-GEMM ready flags' reset, in one launch.
//   tp_expand:  a rank's per-tensor or per-token scale_a (and zero point) written as one value
//               per row into the gathered buffer (and the peers': W8A8_TP_AG_SCALES), so rows from
//               ranks with different per-tensor scales share one per-token GEMM description (as the
//               CPU path does in ag_gemm.c);
//               with the rows' cudaMemcpy2DAsync (copy engine), the pack where tp_pack declines.
//   tp_scale_rows: the block-scaled all-gather's own group scales ([rows, ceil(K/128)] in the caller's strides)
//               as dense rows of the gathered buffer.
//   tp_reduce:  the reduce-scatter's sum. out[i, n] = round(((p_0 + p_1) + ... + p_{W-1}) + bias[n]),
//               fp32 additions in rank order with explicit __fadd_rn (nvcc may not contract or
//               reorder them), rounded once by common.cuh's converters: exactly gemm_rs.c's
//               rs_reduce, so int8 results match the CPU/MPI path bit for bit. The partials are
//               fp32, or (W8A8_TP_PARTIALS_OUT) out's bf16/fp16, each widened exactly to fp32
//               before it is added (gemm_rs.c rounds and widens them in place: the same values).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/knobs.h"
#include "../cuda/common.cuh"
#include "../cuda/cuda_backend.h"
#include "tp_gpu.h"

// One scale (and zero point) per row, grid-stride: tp_expand's body, and tp_pack's. Each row's values go to
// the own gathered buffer and, where the all-gather pushes its scales (W8A8_TP_AG_SCALES, tp_gpu.c), to every
// peer's (peers.n destinations, the peers' memory through peer access or the same GPU).
static __device__ __forceinline__ void tp_expand_rows(float *dst_scale, const float *scale, int scale_per_row,
                                                      int32_t *dst_azp, const int32_t *azp, int azp_per_row,
                                                      int64_t rows, const w8a8_tp_scale_dsts &peers) {
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < rows; i += (int64_t)gridDim.x * blockDim.x) {
    const float s = scale[scale_per_row ? i : 0];
    const int32_t z = dst_azp ? azp[azp_per_row ? i : 0] : 0;
    dst_scale[i] = s;
    if (dst_azp) dst_azp[i] = z;
    for (int j = 0; j < peers.n; j++) {
      peers.scale[j][i] = s;
      if (peers.azp[j]) peers.azp[j][i] = z;
    }
  }
}

__global__ void tp_expand_kernel(float *dst_scale, const float *scale, int scale_per_row, int32_t *dst_azp,
                                 const int32_t *azp, int azp_per_row, int64_t rows,
                                 const __grid_constant__ w8a8_tp_scale_dsts peers) {
  tp_expand_rows(dst_scale, scale, scale_per_row, dst_azp, azp, azp_per_row, rows, peers);
}

static w8a8_tp_scale_dsts scale_dsts_or_none(const w8a8_tp_scale_dsts *peers) {
  w8a8_tp_scale_dsts d;
  if (peers) return *peers;
  memset(&d, 0, sizeof d);
  return d;
}

extern "C" w8a8_status w8a8_tp_launch_expand(float *dst_scale, const float *scale, int scale_per_row,
                                             int32_t *dst_azp, const int32_t *azp, int azp_per_row, int64_t rows,
                                             const w8a8_tp_scale_dsts *peers, cudaStream_t stream) {
  if (rows <= 0) return W8A8_SUCCESS;
  int64_t blocks = (rows + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  tp_expand_kernel<<<(unsigned)blocks, 256, 0, stream>>>(dst_scale, scale, scale_per_row, dst_azp, azp, azp_per_row,
                                                          rows, scale_dsts_or_none(peers));
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? W8A8_SUCCESS : w8a8_cuda_error("w8a8_all_gather_scaled_mm", "tp_expand launch", e);
}

__global__ void tp_scale_rows_kernel(float *dst, const float *src, int64_t rs, int64_t cs, int64_t rows, int64_t S) {
  const int64_t n = rows * S;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / S, j = i - r * S;
    dst[i] = src[r * rs + j * cs];
  }
}

extern "C" w8a8_status w8a8_tp_launch_scale_rows(float *dst, const float *src, int64_t rs, int64_t cs, int64_t rows,
                                                 int64_t S, cudaStream_t stream) {
  if (rows <= 0 || S <= 0) return W8A8_SUCCESS;
  int64_t blocks = (rows * S + 255) / 256;
  if (blocks > 1024) blocks = 1024;
  tp_scale_rows_kernel<<<(unsigned)blocks, 256, 0, stream>>>(dst, src, rs, cs, rows, S);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? W8A8_SUCCESS
                          : w8a8_cuda_error("w8a8_all_gather_scaled_mm_blockwise", "tp_scale_rows launch", e);
}

// tp_pack: the all-gather's own-row pack in one launch on the SMs, replacing cudaMemcpy2DAsync (copy
// engine) + tp_expand + two cudaMemsetAsync of the ready flags: 70b-qkv's 33.5 MB of own rows at 8192
// tokens went from ~45 to ~21 us (h200x2-tp-agpack-2026-11-30.txt). Rows move in 16-byte units (the host
// takes this kernel only where dst, src, K and lda are multiples of 16; else the copy-engine path), one
// block of 256 threads per row in turn (grid-stride, up to 8 blocks per SM): at K = 4096..8192 bytes each
// thread moves 1-2 units per row, so the loads in flight come from occupancy; the four-load loop
// engages only above 12 KB per row. Rows of a few bytes leave most of a block idle: correct, not fast
// (hidden sizes are >= 2 KB). Scales (and zero points) one per row, as tp_expand; flags[0..nflags) = 0
// but flags[own] = 1 (the one-GEMM ready table), by block 0.
__global__ void tp_pack_kernel(uint8_t *dst, const uint8_t *src, int64_t lda, int64_t K, int64_t rows,
                               float *dst_scale, const float *scale, int scale_per_row, int32_t *dst_azp,
                               const int32_t *azp, int azp_per_row, unsigned int *flags, int nflags, int own,
                               const __grid_constant__ w8a8_tp_scale_dsts peers) {
  const int64_t U = K >> 4;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const uint4 *s = (const uint4 *)(src + r * lda);
    uint4 *d = (uint4 *)(dst + r * K);
    int64_t u = threadIdx.x;
    for (; u + 3 * (int64_t)blockDim.x < U; u += 4 * (int64_t)blockDim.x) {
      uint4 v0 = __ldg(s + u), v1 = __ldg(s + u + blockDim.x), v2 = __ldg(s + u + 2 * blockDim.x),
            v3 = __ldg(s + u + 3 * blockDim.x);
      d[u] = v0;
      d[u + blockDim.x] = v1;
      d[u + 2 * blockDim.x] = v2;
      d[u + 3 * blockDim.x] = v3;
    }
    for (; u < U; u += blockDim.x) d[u] = __ldg(s + u);
  }
  tp_expand_rows(dst_scale, scale, scale_per_row, dst_azp, azp, azp_per_row, rows, peers);
  if (blockIdx.x == 0 && flags)
    for (int i = threadIdx.x; i < nflags; i += blockDim.x) flags[i] = i == own ? 1u : 0u;
}

// tp_copy2d: rows [rows, width] bytes from src (row stride lds) to dst (row stride ldd), where the copy
// engine's cudaMemcpy2DAsync cannot take a pitch (cudaDevAttrMaxPitch, 2^31 - 1 bytes on the H200, while the
// public API admits strides up to 2^32). 16-byte units where both bases, both strides and the width are
// multiples of 16, else bytes; one block per row in turn (grid-stride), 64-bit offsets.
__global__ void tp_copy2d_kernel(uint8_t *dst, int64_t ldd, const uint8_t *src, int64_t lds, int64_t width,
                                 int64_t rows, int vec) {
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const uint8_t *s = src + r * lds;
    uint8_t *d = dst + r * ldd;
    if (vec) {
      const uint4 *s4 = (const uint4 *)s;
      uint4 *d4 = (uint4 *)d;
      for (int64_t u = threadIdx.x; u < width >> 4; u += blockDim.x) d4[u] = __ldg(s4 + u);
    } else {
      for (int64_t u = threadIdx.x; u < width; u += blockDim.x) d[u] = __ldg(s + u);
    }
  }
}

extern "C" w8a8_status w8a8_tp_launch_copy2d(void *dst, int64_t ldd, const void *src, int64_t lds, int64_t width,
                                             int64_t rows, int num_sms, cudaStream_t stream) {
  if (rows <= 0 || width <= 0) return W8A8_SUCCESS;
  const int vec = ((uintptr_t)dst % 16) == 0 && ((uintptr_t)src % 16) == 0 && ldd % 16 == 0 && lds % 16 == 0 &&
                  width % 16 == 0;
  int64_t blocks = rows;
  const int64_t most = (int64_t)(num_sms > 0 ? num_sms : 132) * 8;
  if (blocks > most) blocks = most;
  tp_copy2d_kernel<<<(unsigned)blocks, 256, 0, stream>>>((uint8_t *)dst, ldd, (const uint8_t *)src, lds, width, rows,
                                                          vec);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? W8A8_SUCCESS : w8a8_cuda_error("w8a8_all_gather_scaled_mm", "tp_copy2d launch", e);
}

extern "C" int w8a8_tp_pack_takes(const void *dst, const void *src, int64_t lda, int64_t K) {
  return ((uintptr_t)dst % 16) == 0 && ((uintptr_t)src % 16) == 0 && lda % 16 == 0 && K % 16 == 0 && K > 0;
}

extern "C" w8a8_status w8a8_tp_launch_pack(uint8_t *dst, const uint8_t *src, int64_t lda, int64_t K, int64_t rows,
                                           float *dst_scale, const float *scale, int scale_per_row, int32_t *dst_azp,
                                           const int32_t *azp, int azp_per_row, unsigned int *flags, int nflags,
                                           int own, const w8a8_tp_scale_dsts *peers, int num_sms,
                                           cudaStream_t stream) {
  if (rows <= 0 && nflags <= 0) return W8A8_SUCCESS;
  int64_t blocks = rows > 0 ? rows : 1;
  const int64_t most = (int64_t)(num_sms > 0 ? num_sms : 132) * 8;
  if (blocks > most) blocks = most;
  tp_pack_kernel<<<(unsigned)blocks, 256, 0, stream>>>(dst, src, lda, K, rows > 0 ? rows : 0, dst_scale, scale,
                                                       scale_per_row, dst_azp, azp, azp_per_row, flags, nflags, own,
                                                       scale_dsts_or_none(peers));
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? W8A8_SUCCESS : w8a8_cuda_error("w8a8_all_gather_scaled_mm", "tp_pack launch", e);
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

// The same sum, 8 consecutive elements of a row per thread; the default (rs_o -12%, rs_down -5% in the
// TP = 2 layer stack at 8192 tokens, h200x2-tp-stack-2026-11-29-s5-reduce-vec.txt; W8A8_DEV TP_REDUCE_VEC=0
// keeps the scalar kernel). The scalar kernel above divides a 64-bit
// index per element and branches on the dtypes per element; this one divides once per 8 elements,
// has the dtypes as template constants, and moves 16 or 32 bytes per load and 16 per 16-bit store.
// The additions are the same __fadd_rn in the same (rank, then bias) order and the conversions the
// same helpers (loads: common.cuh's w8a8d_load8, as act.cu): the same bits. Taken where every row
// of 8 elements is 16-byte aligned in every array (N and ldo multiples of 8, bases 16-byte
// aligned); else the scalar kernel runs.
template <int DT>
__device__ __forceinline__ void tp_store8(void *base, int64_t i, const float (&v)[8]) {
  if constexpr (DT == W8A8_DTYPE_FP32) {
    float4 *p = (float4 *)((float *)base + i);
    p[0] = make_float4(v[0], v[1], v[2], v[3]);
    p[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const uint32_t lo = DT == W8A8_DTYPE_BF16 ? w8a8d_f32_to_bf16(v[2 * k]) : w8a8d_f32_to_f16(v[2 * k]);
      const uint32_t hi = DT == W8A8_DTYPE_BF16 ? w8a8d_f32_to_bf16(v[2 * k + 1]) : w8a8d_f32_to_f16(v[2 * k + 1]);
      w[k] = lo | (hi << 16);
    }
    *(uint4 *)((uint16_t *)base + i) = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

template <int SRC, int OUT>
__global__ void tp_reduce8_kernel(w8a8_tp_reduce_srcs srcs, int W, int64_t rows, int64_t N, void *out, int64_t ldo,
                                  const void *bias) {
  const int64_t cpr = N / 8, total = rows * cpr;
  for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int64_t i = e / cpr, n = (e - i * cpr) * 8;
    float s[8], t[8];
    w8a8d_load8<SRC>(srcs.p[0], i * N + n, s);
    for (int j = 1; j < W; j++) {
      w8a8d_load8<SRC>(srcs.p[j], i * N + n, t);
#pragma unroll
      for (int k = 0; k < 8; k++) s[k] = __fadd_rn(s[k], t[k]);
    }
    if (bias) {
      w8a8d_load8<OUT>(bias, n, t);
#pragma unroll
      for (int k = 0; k < 8; k++) s[k] = __fadd_rn(s[k], t[k]);
    }
    tp_store8<OUT>(out, i * ldo + n, s);
  }
}

// W8A8_DEV TP_REDUCE_VEC: 1 (default) the 8-wide kernel where it applies, 0 the scalar one
static int reduce_vec(void) { return (int)w8a8_knob_int(W8A8_KNOB_TP_REDUCE_VEC); }
static bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

template <int SRC, int OUT>
static void launch8(const w8a8_tp_reduce_srcs *srcs, int W, int64_t rows, int64_t N, void *out, int64_t ldo,
                    const void *bias, unsigned blocks, cudaStream_t stream) {
  tp_reduce8_kernel<SRC, OUT><<<blocks, 256, 0, stream>>>(*srcs, W, rows, N, out, ldo, bias);
}

extern "C" w8a8_status w8a8_tp_launch_reduce(const w8a8_tp_reduce_srcs *srcs, w8a8_dtype src_dtype, int W,
                                             int64_t rows, int64_t N, void *out, int64_t ldo, w8a8_dtype out_dtype,
                                             const void *bias, int num_sms, cudaStream_t stream) {
  const int64_t total = rows * N;
  if (total <= 0) return W8A8_SUCCESS;
  const int64_t cap = (int64_t)num_sms * 8;
  bool vec = reduce_vec() && N % 8 == 0 && ldo % 8 == 0 && aligned16(out) && (!bias || aligned16(bias)) &&
             (src_dtype == W8A8_DTYPE_FP32 || src_dtype == out_dtype);
  for (int j = 0; j < W && vec; j++) vec = aligned16(srcs->p[j]);
  if (vec) {
    int64_t blocks = (total / 8 + 255) / 256;
    if (blocks > cap) blocks = cap;
    const unsigned b = (unsigned)blocks;
    if (src_dtype == W8A8_DTYPE_FP32 && out_dtype == W8A8_DTYPE_FP32)
      launch8<W8A8_DTYPE_FP32, W8A8_DTYPE_FP32>(srcs, W, rows, N, out, ldo, bias, b, stream);
    else if (src_dtype == W8A8_DTYPE_FP32 && out_dtype == W8A8_DTYPE_BF16)
      launch8<W8A8_DTYPE_FP32, W8A8_DTYPE_BF16>(srcs, W, rows, N, out, ldo, bias, b, stream);
    else if (src_dtype == W8A8_DTYPE_FP32)
      launch8<W8A8_DTYPE_FP32, W8A8_DTYPE_FP16>(srcs, W, rows, N, out, ldo, bias, b, stream);
    else if (src_dtype == W8A8_DTYPE_BF16)
      launch8<W8A8_DTYPE_BF16, W8A8_DTYPE_BF16>(srcs, W, rows, N, out, ldo, bias, b, stream);
    else
      launch8<W8A8_DTYPE_FP16, W8A8_DTYPE_FP16>(srcs, W, rows, N, out, ldo, bias, b, stream);
  } else {
    int64_t blocks = (total + 255) / 256;
    if (blocks > cap) blocks = cap;
    tp_reduce_kernel<<<(unsigned)blocks, 256, 0, stream>>>(*srcs, (int)src_dtype, W, rows, N, out, ldo,
                                                            (int)out_dtype, bias);
  }
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? W8A8_SUCCESS : w8a8_cuda_error("w8a8_scaled_mm_reduce_scatter", "tp_reduce launch", e);
}
