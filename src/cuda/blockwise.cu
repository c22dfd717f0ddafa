// blockwise.cu — block-scaled fp8 on any CUDA GPU: w8a8_scaled_mm_blockwise and the group / block quantizers.
//
// A portable kernel, written for exactness first: every product of two e4m3 values is exact in fp32, so a
// thread that sums its block's products in k order gets the CPU reference's block sums bit for bit, and the
// promotion acc = fmaf(sa * sb, block, acc) in block order is the reference's too: the tests ask for equal bits.
// Tiles of 64 x 64 outputs, 256 threads of 4 x 4 outputs, K staged through shared memory 32 columns at a time
// (decoded to fp32 once per element). On sm_90a the Hopper kernel (sm90_blockwise.cu) runs instead where it takes p.
#include <cuda_runtime.h>
#include <stdint.h>

#include "act_math.cuh"
#include "common.cuh"
#include "cuda_backend.h"

namespace {

constexpr int BW_TILE = 64;   // outputs per tile side
constexpr int BW_KC = 32;     // K columns staged per step (a 128-deep block is 4 steps)
constexpr int BW_THREADS = 256;

struct bw_args {
  const uint8_t *a, *b;
  int64_t lda, ldb;
  void *out;
  int64_t ldo;
  int M, N, K, out_kind;
  const float *sa, *sb;
  int64_t sa_rs, sa_cs, sb_rs, sb_cs;
  const void *bias;
};

__global__ void __launch_bounds__(BW_THREADS) bw_gemm_kernel(const bw_args p) {
  __shared__ float As[BW_KC][BW_TILE + 1];  // [k][m]
  __shared__ float Bs[BW_KC][BW_TILE + 1];  // [k][n]
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * BW_TILE, n0 = blockIdx.x * BW_TILE;
  float acc[4][4], part[4][4];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
  const int KB = (p.K + W8A8_BLOCK - 1) / W8A8_BLOCK;
  for (int kb = 0; kb < KB; kb++) {
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) part[i][j] = 0.0f;
    const int kend = min(p.K, (kb + 1) * W8A8_BLOCK);
    for (int k0 = kb * W8A8_BLOCK; k0 < kend; k0 += BW_KC) {
      // stage A[m0.., k0..k0+32) and B[n0.., k0..): 64 x 32 each, 8 elements per thread
      for (int e = threadIdx.x; e < BW_TILE * BW_KC; e += BW_THREADS) {
        const int r = e / BW_KC, c = e % BW_KC, k = k0 + c;
        const int m = m0 + r, n = n0 + r;
        As[c][r] = m < p.M && k < kend ? w8a8d_fp8_to_f32(p.a[(int64_t)m * p.lda + k]) : 0.0f;
        Bs[c][r] = n < p.N && k < kend ? w8a8d_fp8_to_f32(p.b[(int64_t)n * p.ldb + k]) : 0.0f;
      }
      __syncthreads();
      // k in order; zeros past the block's end add nothing (x + 0 * y == x for the finite products here)
      const int kc = min(BW_KC, kend - k0);
      for (int c = 0; c < kc; c++) {
        float av[4], bv[4];
        for (int i = 0; i < 4; i++) av[i] = As[c][ty * 4 + i], bv[i] = Bs[c][tx * 4 + i];
        for (int i = 0; i < 4; i++)
          for (int j = 0; j < 4; j++) part[i][j] = __fadd_rn(part[i][j], __fmul_rn(av[i], bv[j]));
      }
      __syncthreads();
    }
    for (int i = 0; i < 4; i++) {
      const int m = m0 + ty * 4 + i;
      if (m >= p.M) continue;
      const float sa = p.sa[(int64_t)m * p.sa_rs + (int64_t)kb * p.sa_cs];
      for (int j = 0; j < 4; j++) {
        const int n = n0 + tx * 4 + j;
        if (n >= p.N) continue;
        const float s = __fmul_rn(sa, p.sb[(int64_t)(n / W8A8_BLOCK) * p.sb_rs + (int64_t)kb * p.sb_cs]);
        acc[i][j] = __fmaf_rn(s, part[i][j], acc[i][j]);
      }
    }
  }
  for (int i = 0; i < 4; i++) {
    const int m = m0 + ty * 4 + i;
    if (m >= p.M) continue;
    for (int j = 0; j < 4; j++) {
      const int n = n0 + tx * 4 + j;
      if (n >= p.N) continue;
      float r = acc[i][j];
      if (p.bias) r = __fadd_rn(r, w8a8d_load_float(p.out_kind, p.bias, n));
      w8a8d_store_float(p.out_kind, p.out, (int64_t)m * p.ldo + n, r);
    }
  }
}

// Group / block quantization: one CTA of 128 threads per group (a row's 128 columns) or per 128 x 128 block,
// the amax reduced exactly (max is order-free), then each value divided by the scale (IEEE division, as the
// reference's) and converted as the reference converts.
struct bwq_args {
  const void *x;
  int64_t ldx;
  uint8_t *q;
  int64_t ldq;
  float *scale;
  int64_t s_rs, s_cs;
  int M, K, in_kind, block_rows, ue8m0;
  int silu;  // y = silu(x[m, k]) * x[m, K + k] (w8a8_silu_mul_quantize_groups), else x[m, k]
};

// The value quantized at (m, k): x, or the SiLU-mul of its two halves with the CPU's bits (act_math.cuh).
__device__ __forceinline__ float bwq_value(const bwq_args &p, int m, int k) {
  const int64_t i = (int64_t)m * p.ldx + k;
  if (!p.silu) return w8a8d_load_float(p.in_kind, p.x, i);
  return silu_mul(w8a8d_load_float(p.in_kind, p.x, i), w8a8d_load_float(p.in_kind, p.x, i + p.K));
}

__device__ __forceinline__ float bwq_ue8m0(float s) {
  int e;
  const float f = frexpf(s, &e);
  return f == 0.5f ? s : ldexpf(1.0f, e);
}

__global__ void __launch_bounds__(128) bw_quant_kernel(const bwq_args p) {
  __shared__ float red[4];
  const int kb = blockIdx.x, rb = blockIdx.y;
  const int k = kb * W8A8_BLOCK + threadIdx.x;
  const int m0 = rb * p.block_rows, m1 = min(p.M, m0 + p.block_rows);
  float amax = 0.0f;
  if (k < p.K)
    for (int m = m0; m < m1; m++) {
      const float v = fabsf(bwq_value(p, m, k));
      amax = v > amax ? v : amax;  // (NaN skipped, as the reference's comparison)
    }
  for (int o = 16; o > 0; o /= 2) {
    const float t = __shfl_xor_sync(0xffffffffu, amax, o);
    amax = t > amax ? t : amax;
  }
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = red[0];
  for (int w = 1; w < 4; w++) amax = red[w] > amax ? red[w] : amax;
  float s = __fdiv_rn(amax, 448.0f);
  const float min_scale = 1.0f / (448.0f * 512.0f);
  s = s > min_scale ? s : min_scale;
  if (p.ue8m0) s = bwq_ue8m0(s);
  if (k < p.K)
    for (int m = m0; m < m1; m++)
      p.q[(int64_t)m * p.ldq + k] = w8a8d_f32_to_fp8(__fdiv_rn(bwq_value(p, m, k), s));
  if (threadIdx.x == 0) p.scale[(int64_t)rb * p.s_rs + (int64_t)kb * p.s_cs] = s;
}

}  // namespace

// The Hopper kernel where the handle's dispatch picks sm_90a (sm90_blockwise.cu), else, or where it declines p
// under W8A8_KERNEL_AUTO, the portable kernel.
extern "C" W8A8_HIDDEN w8a8_status w8a8_cuda_scaled_mm_blockwise(w8a8_handle *h, const w8a8_mm_problem *p) {
  static const char fn[] = "w8a8_scaled_mm_blockwise";
  const w8a8_cuda_target t = w8a8_cuda_target_of((const w8a8_cuda_state *)h->cuda);
  if (h->kernel == W8A8_KERNEL_SM90 && w8a8_cuda_dispatch_cc(&t) != 90)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the handle forces the sm_90a kernel; this GPU runs as %d.%d",
                    fn, w8a8_cuda_dispatch_cc(&t) / 10, w8a8_cuda_dispatch_cc(&t) % 10);
  if (w8a8_cuda_sm90_first(&t, h->kernel)) {
    w8a8_cuda_guard g;
    W8A8_CHECK(w8a8_cuda_guard_enter(fn, h, &g));
    const w8a8_status s = w8a8_sm90_scaled_mm_blockwise(h, p);
    w8a8_cuda_guard_exit(&g);
    if (s != W8A8_ERROR_UNSUPPORTED_DEVICE || h->kernel == W8A8_KERNEL_SM90) return s;
    w8a8_clear_error(); /* the fast path declined this input: not the caller's error */
  }
  bw_args a;
  a.a = (const uint8_t *)p->a, a.b = (const uint8_t *)p->b;
  a.lda = p->lda, a.ldb = p->ldb;
  a.out = p->out, a.ldo = p->ldo;
  a.M = (int)p->M, a.N = (int)p->N, a.K = (int)p->K, a.out_kind = (int)p->out_dtype;
  a.sa = p->scale_a, a.sb = p->scale_b;
  a.sa_rs = p->sa_rs, a.sa_cs = p->sa_cs, a.sb_rs = p->sb_rs, a.sb_cs = p->sb_cs;
  a.bias = p->bias;
  const dim3 grid((unsigned)((p->N + BW_TILE - 1) / BW_TILE), (unsigned)((p->M + BW_TILE - 1) / BW_TILE));
  if (grid.y > 65535u)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: M = %lld is more than this kernel's %d rows", fn,
                    (long long)p->M, 65535 * BW_TILE);
  w8a8_cuda_guard g;
  W8A8_CHECK(w8a8_cuda_guard_enter(fn, h, &g));
  bw_gemm_kernel<<<grid, BW_THREADS, 0, (cudaStream_t)h->stream>>>(a);
  const cudaError_t e = cudaGetLastError();
  w8a8_cuda_guard_exit(&g);
  if (e != cudaSuccess) return w8a8_cuda_error(fn, "kernel launch", e);
  w8a8_note_launch(h, "cuda-blockwise", "", 1, p->M, p->N, p->K);
  return W8A8_SUCCESS;
}

extern "C" W8A8_HIDDEN w8a8_status w8a8_cuda_quantize_groups(w8a8_handle *h, const w8a8_quant_problem *p, int silu) {
  const char *fn = silu ? "w8a8_silu_mul_quantize_groups" : "w8a8_quantize_groups";
  bwq_args a;
  a.silu = silu;
  a.x = p->x, a.ldx = p->ldx, a.q = (uint8_t *)p->q, a.ldq = p->ldq;
  a.scale = p->scale, a.s_rs = p->s_rs, a.s_cs = p->s_cs;
  a.M = (int)p->M, a.K = (int)p->K, a.in_kind = (int)p->in_dtype;
  a.block_rows = p->groups == W8A8_GROUPS_BLOCK ? W8A8_BLOCK : 1;
  a.ue8m0 = p->ue8m0;
  const int64_t rows = (p->M + a.block_rows - 1) / a.block_rows;
  if (rows > 65535)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: %lld rows of groups are more than this kernel's 65535", fn,
                    (long long)rows);
  const dim3 grid((unsigned)((p->K + W8A8_BLOCK - 1) / W8A8_BLOCK), (unsigned)rows);
  w8a8_cuda_guard g;
  W8A8_CHECK(w8a8_cuda_guard_enter(fn, h, &g));
  bw_quant_kernel<<<grid, 128, 0, (cudaStream_t)h->stream>>>(a);
  const cudaError_t e = cudaGetLastError();
  w8a8_cuda_guard_exit(&g);
  return e == cudaSuccess ? W8A8_SUCCESS : w8a8_cuda_error(fn, "kernel launch", e);
}
