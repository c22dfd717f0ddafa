// gemv.cu — scaled_mm for the fewest tokens (decode, M <= 8) on CUDA cores. Why: at such M the GEMM
// is a stream of the weights, and the tensor-core kernels pay for a pipeline built for reuse (tensor
// maps, mbarrier rings, clusters and their split-K sum). Measured on the H200: int8 at one token
// 1.01-1.48x of the tensor-core kernels on all 8 shapes (h200-gemv-ab-2026-11-30.txt), so the default
// rule (w8a8_cuda_gemv_wanted, plain C in sm90_plan.c) sends one int8 token here on sm_90; 2..8 tokens run only
// when forced.
//
// A warp owns R weight rows (output columns) per pass: R = 1 for one token, 4 from two tokens on. Its
// lanes read the rows in 16-byte pieces (4 in flight per lane at R = 1, 2 per row at R = 4), multiply
// them by every token's 16 activation bytes (L1-resident: all warps read the same few KB), reduce over
// the warp, and lane m R + r applies the epilogue. At one token ptxas gives 45-46 registers: 5 blocks
// of 256 threads per SM, ~80 KB in flight per SM, about 3x what hides HBM latency on the H200.
// int8: dp4a, exact wrapping int32 as the reference, so results are bit-identical to it. fp8 (one
// token only: the conversions cost ~64 instructions per 16 bytes, hidden by the stream at M = 1 but
// not at 2): e4m3 pairs converted exactly to f16x2, then fp32 FMAs in a fixed order.
// Grid-stride over groups of GEMV_WARPS x R columns.
//
// Takes (w8a8_cuda_gemv_takes): M <= 8 (int8) or M = 1 (fp8), no ready flags, A and B 16-byte aligned with row
// strides that are multiples of 16 bytes. Anything else: W8A8_ERROR_UNSUPPORTED_DEVICE, and the caller uses
// the other kernels.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <string.h>

#include "common.cuh"
#include "cuda_backend.h"

#define GEMV_WARPS 8     // warps (weight rows) per block
#define GEMV_UNROLL 4    // 16-byte weight pieces in flight per lane (one token; see gemv_kernel U)

// 16 bytes of a weight row, streamed: read once, so no L1 allocation.
W8A8_DEVFN uint4 gemv_ld_stream(const void *p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Two e4m3 values (low byte first) as floats, exactly (e4m3 fits in f16).
W8A8_DEVFN float2 gemv_fp8x2(uint32_t two) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two & 0xffffu), __NV_E4M3);
  __half2 hh;
  memcpy(&hh, &h, sizeof hh);
  return __half22float2(hh);
}

// acc += w . x over one 16-byte piece (4 words).
template <bool INT8>
W8A8_DEVFN void gemv_piece(const uint4 &w, const uint4 &x, int32_t &iacc, float &facc) {
  if constexpr (INT8) {
    iacc = __dp4a((int)w.x, (int)x.x, iacc);
    iacc = __dp4a((int)w.y, (int)x.y, iacc);
    iacc = __dp4a((int)w.z, (int)x.z, iacc);
    iacc = __dp4a((int)w.w, (int)x.w, iacc);
  } else {
    const uint32_t ww[4] = {w.x, w.y, w.z, w.w}, xx[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const float2 w0 = gemv_fp8x2(ww[j]), w1 = gemv_fp8x2(ww[j] >> 16);
      const float2 x0 = gemv_fp8x2(xx[j]), x1 = gemv_fp8x2(xx[j] >> 16);
      facc = __fmaf_rn(w0.x, x0.x, facc);
      facc = __fmaf_rn(w0.y, x0.y, facc);
      facc = __fmaf_rn(w1.x, x1.x, facc);
      facc = __fmaf_rn(w1.y, x1.y, facc);
    }
  }
}

// Turing's ptxas holds the 4-token kernel to 80 registers and spills unless told that one block per SM will do;
// the newer GPUs keep the code they were measured with.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define GEMV_BOUNDS __launch_bounds__(GEMV_WARPS * 32, 1)
#else
#define GEMV_BOUNDS __launch_bounds__(GEMV_WARPS * 32)
#endif

// MT: tokens per launch (compile time; rows m >= M are skipped). R: weight rows (output columns) per
// warp pass, sharing each token's 16-byte activation load (R = 1 re-reads it from L1 for every weight
// row). Even at R = 4, 2..8 tokens lose 12-75% to the tensor-core kernels
// (h200-torch-compare-gemv-r4-2026-11-30.md), so the default rule keeps this kernel at one token.
// U: weight pieces in flight per lane and row (R x U pieces per lane in all).
template <bool INT8, int MT, int R, int U>
__global__ void GEMV_BOUNDS gemv_kernel(const w8a8_mm_problem p) {
  static_assert(MT * R <= 32, "one lane per output of a warp pass");
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int M = (int)p.M;
  const int64_t K = p.K, K16 = K / 16 * 16, pieces = K16 / 16;
  const uint8_t *A = (const uint8_t *)p.a, *B = (const uint8_t *)p.b;
  const int64_t step = (int64_t)gridDim.x * GEMV_WARPS * R;
  for (int64_t n0 = ((int64_t)blockIdx.x * GEMV_WARPS + warp) * R; n0 < p.N; n0 += step) {
    // rows past N repeat row n0 (loaded, summed, never stored): no bounds test in the inner loops
    const uint8_t *brow[R];
#pragma unroll
    for (int r = 0; r < R; r++) brow[r] = B + (n0 + r < p.N ? n0 + r : n0) * p.ldb;
    int32_t iacc[MT][R];
    float facc[MT][R];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
      for (int r = 0; r < R; r++) iacc[m][r] = 0, facc[m][r] = 0.0f;
    // pieces lane, lane + 32, ...: U loads per row issued before any is used
    for (int64_t c0 = lane; c0 < pieces; c0 += 32 * U) {
      uint4 w[U][R];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int64_t c = c0 + 32 * u;
        if (c < pieces)
#pragma unroll
          for (int r = 0; r < R; r++) w[u][r] = gemv_ld_stream(brow[r] + 16 * c);
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        const int64_t c = c0 + 32 * u;
        if (c >= pieces) break;
#pragma unroll
        for (int m = 0; m < MT; m++)
          if (m < M) {
            const uint4 x = __ldg((const uint4 *)(A + m * p.lda + 16 * c));
#pragma unroll
            for (int r = 0; r < R; r++) gemv_piece<INT8>(w[u][r], x, iacc[m][r], facc[m][r]);
          }
      }
    }
    // the last K % 16 bytes, one per lane
    if (K16 + lane < K) {
#pragma unroll
      for (int r = 0; r < R; r++) {
        const uint8_t wb = brow[r][K16 + lane];
#pragma unroll
        for (int m = 0; m < MT; m++)
          if (m < M) {
            const uint8_t xb = A[m * p.lda + K16 + lane];
            if constexpr (INT8)
              iacc[m][r] += (int32_t)(int8_t)wb * (int32_t)(int8_t)xb;
            else
              facc[m][r] = __fmaf_rn(w8a8d_fp8_to_f32(wb), w8a8d_fp8_to_f32(xb), facc[m][r]);
          }
      }
    }
    // the warp's sums (a butterfly: every lane ends with the total, in the same order)
#pragma unroll
    for (int m = 0; m < MT; m++) {
      if (m >= M) continue;
#pragma unroll
      for (int r = 0; r < R; r++)
#pragma unroll
        for (int o = 16; o > 0; o /= 2) {
          if constexpr (INT8)
            iacc[m][r] = (int32_t)((uint32_t)iacc[m][r] + (uint32_t)__shfl_xor_sync(0xffffffffu, iacc[m][r], o));
          else
            facc[m][r] += __shfl_xor_sync(0xffffffffu, facc[m][r], o);
        }
    }
    // lane m R + r writes output (m, n0 + r) (register arrays indexed by compile-time m, r only)
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
      for (int r = 0; r < R; r++) {
        const int64_t n = n0 + r;
        if (lane != m * R + r || m >= M || n >= p.N) continue;
        float v;
        if constexpr (INT8) {
          int32_t d = iacc[m][r];
          if (p.azp_mode != W8A8_AZP_NONE) {
            const int32_t azp = p.azp_mode == W8A8_AZP_ADJ_ONLY ? 1 : p.azp_mode == W8A8_AZP_PER_TENSOR ? p.azp[0] : p.azp[m];
            d = (int32_t)((uint32_t)d - (uint32_t)azp * (uint32_t)p.azp_adj[n]); /* wraps, as the reference */
          }
          v = __int2float_rn(d);
        } else {
          v = facc[m][r];
        }
        const float sa = p.scale_a[p.scale_a_per_token ? m : 0], sb = p.scale_b[p.scale_b_per_channel ? n : 0];
        const bool has_bias = p.bias != NULL;
        const float bias = has_bias ? w8a8d_load_float((int)p.out_dtype, p.bias, n) : 0.0f;
        w8a8d_store_float((int)p.out_dtype, p.out, (int64_t)m * p.ldo + n, w8a8d_epilogue(v, sa, sb, has_bias, bias));
      }
  }
}

static unsigned long long g_gemv_launches;  // for the tests: proof that this kernel ran
extern "C" W8A8_HIDDEN unsigned long long w8a8_cuda_gemv_launches(void) {
  return __atomic_load_n(&g_gemv_launches, __ATOMIC_RELAXED);
}

// One launch of gemv_kernel<INT8, MT, R, U>: a grid of at most one wave (blocks per SM from the occupancy
// query, once per instantiation and device; the kernel strides over the column groups). The caller
// made the handle's device current.
#define GEMV_MAX_DEVICES 64
template <bool INT8, int MT, int R, int U>
static void gemv_launch(const w8a8_mm_problem *p, cudaStream_t stream, int num_sms) {
  const int64_t groups = (p->N + (int64_t)GEMV_WARPS * R - 1) / ((int64_t)GEMV_WARPS * R);
  static int per_sm[GEMV_MAX_DEVICES];  // 0: not asked yet (every thread that asks stores the same answer)
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= GEMV_MAX_DEVICES) {
    cudaGetLastError();
    dev = -1;
  }
  int b = dev >= 0 ? __atomic_load_n(&per_sm[dev], __ATOMIC_RELAXED) : 0;
  if (!b) {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, gemv_kernel<INT8, MT, R, U>, GEMV_WARPS * 32, 0) != cudaSuccess ||
        b < 1) {
      cudaGetLastError();
      b = 4;
    }
    if (dev >= 0) __atomic_store_n(&per_sm[dev], b, __ATOMIC_RELAXED);
  }
  const int64_t cap = (int64_t)num_sms * b;
  gemv_kernel<INT8, MT, R, U><<<(unsigned)(groups < cap ? groups : cap), GEMV_WARPS * 32, 0, stream>>>(*p);
}

extern "C" W8A8_HIDDEN w8a8_status w8a8_cuda_launch_gemv(const w8a8_mm_problem *p, cudaStream_t stream, int num_sms) {
  if (!w8a8_cuda_gemv_takes(p))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_scaled_mm: the CUDA-core kernel does not take this problem");
  // one token: one weight row per warp pass, 4 pieces in flight; more tokens (forced only): 4 rows per
  // pass sharing the activations, 2 pieces per row in flight
  if (p->in_dtype == W8A8_DTYPE_INT8) {
    if (p->M == 1)
      gemv_launch<true, 1, 1, GEMV_UNROLL>(p, stream, num_sms);
    else if (p->M <= 2)
      gemv_launch<true, 2, 4, 2>(p, stream, num_sms);
    else if (p->M <= 4)
      gemv_launch<true, 4, 4, 2>(p, stream, num_sms);
    else
      gemv_launch<true, 8, 4, 2>(p, stream, num_sms);
  } else {
    gemv_launch<false, 1, 1, GEMV_UNROLL>(p, stream, num_sms);
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return w8a8_cuda_error("w8a8_scaled_mm", "launch of the CUDA-core kernel", e);
  __atomic_add_fetch(&g_gemv_launches, 1ull, __ATOMIC_RELAXED);
  return W8A8_SUCCESS;
}
