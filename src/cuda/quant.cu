// quant.cu — the quantizers (fp32/bf16/fp16 -> int8/fp8) and the int8 column sums,
// bit-identical to src/cpu/reference.c.
//
// Kernels:
//   quant_per_token:  one block per row, ONE pass over x: the row is loaded once into
//                     registers (converted to fp32 on the way), reduced to its max (or
//                     min/max for the zero point), then quantized from the registers.
//                     Rows longer than the register budget re-read their tail (L2).
//   amax_per_tensor:  grid-wide max |x| with atomicMax on the fp32 bits (valid for
//                     non-negative floats) into the handle's amax slot (w8a8_cuda_state.amax),
//                     which the launcher zeroed with cudaMemsetAsync; no host synchronization.
//   quant_per_tensor: element-wise; the scale comes from device memory (static: the
//                     caller's; dynamic: computed by every thread from the amax slot, and
//                     block (0,0)'s first thread stores it in the caller's scale[0]). The
//                     caller's scale is never scratch: it is written by the call's last
//                     kernel only, so a failed launch leaves it as it was.
//   colsum:           one warp per column of B.
//   quant_per_token_vec: the per-token quantizer where x's and q's rows allow whole
//                     runs of 8 (K % 8 == 0, x and its row pitch 16-byte aligned, q and ldq 8-byte):
//                     one 16-byte load (two for fp32) and one 8-byte store per run, 256 threads a
//                     row, rows up to 8192 held in registers. Same operations in the same order per
//                     element as quant_per_token, so the same bits. W8A8_DEV QUANT_VEC=0 keeps the
//                     scalar kernel.
// The int8 rules (the zero point added exactly, the asymmetric scale and zero point of a row) are
// src/core/internal.h's w8a8_f32_to_int8_rne and w8a8_asym_params, the host's own code.
#include <stdint.h>

#include "../core/knobs.h"
#include "common.cuh"
#include "cuda_backend.h"

#define QT_BLOCK 512 /* threads per row in the per-token kernel */
#define QT_REGS 16   /* row elements held in registers per thread: rows up to 8192 in one pass */

template <int IN_DT>
__global__ void __launch_bounds__(QT_BLOCK) quant_per_token(w8a8_quant_problem p) {
  const bool fp8 = p.out_dtype == W8A8_DTYPE_FP8_E4M3;
  const bool asym = p.azp != NULL;
  const float qmax = fp8 ? 448.0f : 127.0f;
  for (int64_t m = blockIdx.x; m < p.M; m += gridDim.x) {
    const char *xrow = (const char *)p.x;
    const int64_t xoff = m * p.ldx;
    float v[QT_REGS];
    float hi = asym ? -INFINITY : 0.0f, lo = INFINITY;
#pragma unroll
    for (int i = 0; i < QT_REGS; i++) {
      int64_t k = (int64_t)i * QT_BLOCK + threadIdx.x;
      v[i] = 0.0f;
      if (k < p.K) {
        v[i] = w8a8d_load_float(IN_DT, xrow, xoff + k);
        w8a8d_track(asym, v[i], hi, lo);
      }
    }
    for (int64_t k = (int64_t)QT_REGS * QT_BLOCK + threadIdx.x; k < p.K; k += QT_BLOCK) {
      w8a8d_track(asym, w8a8d_load_float(IN_DT, xrow, xoff + k), hi, lo);
    }
    w8a8d_block_reduce_max_min<QT_BLOCK>(hi, lo, asym);
    float s;
    int32_t azp;
    w8a8d_row_scale(asym, hi, lo, p.K, qmax, p.scale_ub, &s, &azp);
    const float rcp = w8a8d_quant_rcp(true, s);
    const int64_t qoff = m * p.ldq;
#pragma unroll
    for (int i = 0; i < QT_REGS; i++) {
      int64_t k = (int64_t)i * QT_BLOCK + threadIdx.x;
      if (k < p.K) ((uint8_t *)p.q)[qoff + k] = w8a8d_quant8(fp8, v[i], s, rcp, azp);
    }
    for (int64_t k = (int64_t)QT_REGS * QT_BLOCK + threadIdx.x; k < p.K; k += QT_BLOCK)
      ((uint8_t *)p.q)[qoff + k] = w8a8d_quant8(fp8, w8a8d_load_float(IN_DT, xrow, xoff + k), s, rcp, azp);
    if (threadIdx.x == 0) {
      p.scale[m] = s;
      if (asym) p.azp[m] = azp;
    }
    __syncthreads(); /* the reduction's shared memory is reused by the next row */
  }
}

#define QV_BLOCK 256 /* threads per row in the vectorized per-token kernel */
#define QV_VEC 8     /* consecutive elements per run */
#define QV_RUNS 4    /* runs per thread held in registers: rows up to 256 * 8 * 4 = 8192 in one pass */
static_assert(QV_VEC == 8, "w8a8d_store_q8 stores runs of 8");

template <int IN_DT>
__global__ void __launch_bounds__(QV_BLOCK) quant_per_token_vec(w8a8_quant_problem p) {
  const bool fp8 = p.out_dtype == W8A8_DTYPE_FP8_E4M3;
  const bool asym = p.azp != NULL;
  const float qmax = fp8 ? 448.0f : 127.0f;
  const int64_t step = (int64_t)QV_BLOCK * QV_VEC, k_first = (int64_t)threadIdx.x * QV_VEC;
  for (int64_t m = blockIdx.x; m < p.M; m += gridDim.x) {
    const int64_t row = m * p.ldx;
    float v[QV_RUNS][QV_VEC];
    float hi = asym ? -INFINITY : 0.0f, lo = INFINITY; /* fmaxf / fminf drop NaN, as the scalar kernel */
#pragma unroll
    for (int r = 0; r < QV_RUNS; r++) {
      const int64_t k0 = k_first + r * step;
      if (k0 < p.K) {
        w8a8d_load8<IN_DT>(p.x, row + k0, v[r]);
#pragma unroll
        for (int j = 0; j < QV_VEC; j++) w8a8d_track(asym, v[r][j], hi, lo);
      }
    }
    for (int64_t k0 = k_first + QV_RUNS * step; k0 < p.K; k0 += step) {
      float t[QV_VEC];
      w8a8d_load8<IN_DT>(p.x, row + k0, t);
#pragma unroll
      for (int j = 0; j < QV_VEC; j++) w8a8d_track(asym, t[j], hi, lo);
    }
    w8a8d_block_reduce_max_min<QV_BLOCK>(hi, lo, asym);
    float s;
    int32_t azp;
    w8a8d_row_scale(asym, hi, lo, p.K, qmax, p.scale_ub, &s, &azp);
    const float rcp = w8a8d_quant_rcp(true, s); /* (s > 0) */
    uint8_t *qrow = (uint8_t *)p.q + m * p.ldq;
#pragma unroll
    for (int r = 0; r < QV_RUNS; r++) {
      const int64_t k0 = k_first + r * step;
      if (k0 < p.K) {
        w8a8d_store_q8(qrow + k0, fp8, v[r], s, rcp, azp);
      }
    }
    for (int64_t k0 = k_first + QV_RUNS * step; k0 < p.K; k0 += step) {
      float t[QV_VEC];
      w8a8d_load8<IN_DT>(p.x, row + k0, t);
      w8a8d_store_q8(qrow + k0, fp8, t, s, rcp, azp);
    }
    if (threadIdx.x == 0) {
      p.scale[m] = s;
      if (asym) p.azp[m] = azp;
    }
    __syncthreads(); /* the reduction's shared memory is reused by the next row */
  }
}

/* The fast arithmetic's proof (test cuda_quant_math_exhaustive): which = 0: w8a8d_f32_to_fp8_fast against
 * w8a8d_f32_to_fp8 on every 32-bit pattern (grid-stride); 3: w8a8d_f32_to_int8_rne_fast against the host's rule
 * w8a8_f32_to_int8_rne (azp 0) likewise; which = 1: w8a8d_div_rcp against w8a8d_div_like_host for
 * every bf16 pattern x times the n_s divisors sv[] (device memory, > 0); which = 2: the same for n_x pseudo-random
 * fp32 patterns per divisor. Adds the mismatches to *bad (device memory, zeroed by the caller). */
__global__ void __launch_bounds__(256) quant_math_check(int which, const float *sv, int n_s, long long n_x,
                                                      unsigned long long *bad) {
  const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned long long nt = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long miss = 0;
  if (which == 0) {
    for (unsigned long long u = tid; u < (1ull << 32); u += nt) {
      const float f = __uint_as_float((uint32_t)u);
      miss += w8a8d_f32_to_fp8_fast(f) != w8a8d_f32_to_fp8(f);
    }
  } else if (which == 3) {
    for (unsigned long long u = tid; u < (1ull << 32); u += nt) {
      const float f = __uint_as_float((uint32_t)u);
      miss += w8a8d_f32_to_int8_rne_fast(f, 0) != w8a8_f32_to_int8_rne(f, 0);
    }
  } else {
    const unsigned long long per = which == 1 ? 65536ull : (unsigned long long)n_x;
    for (unsigned long long i = tid; i < per * (unsigned long long)n_s; i += nt) {
      const unsigned long long d = i / per, k = i % per;
      const float s = sv[d];
      uint32_t u;
      if (which == 1) {
        u = (uint32_t)k << 16;
      } else { /* a splitmix64 hash of (k, d) */
        unsigned long long z = (k + 1) * 0x9e3779b97f4a7c15ull + d * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        u = (uint32_t)(z ^ (z >> 31));
      }
      const float x = __uint_as_float(u), rcp = __fdiv_rn(1.0f, s);
      miss += __float_as_uint(w8a8d_div_rcp(x, s, rcp)) != __float_as_uint(w8a8d_div_like_host(x, s));
    }
  }
  if (miss) atomicAdd(bad, miss);
}

extern "C" W8A8_HIDDEN int w8a8_cuda_quant_math_check(int which, const float *s_dev, int n_s, long long n_x,
                                                      unsigned long long *bad_dev, int num_sms) {
  quant_math_check<<<(unsigned)num_sms * 8, 256>>>(which, s_dev, n_s, n_x, bad_dev);
  return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

/* W8A8_DEV QUANT_VEC=0 keeps the scalar per-token kernel everywhere (tests compare the two). */
static unsigned long long g_quant_vec_launches; /* for the tests: proof that the vectorized kernel ran */
extern "C" W8A8_HIDDEN unsigned long long w8a8_cuda_quant_vec_launches(void) {
  return __atomic_load_n(&g_quant_vec_launches, __ATOMIC_RELAXED);
}
static bool quant_vec_takes(const w8a8_quant_problem *p) {
  const size_t es = w8a8_dtype_size(p->in_dtype);
  return w8a8_knob_int(W8A8_KNOB_QUANT_VEC) != 0 && p->K % QV_VEC == 0 && (uintptr_t)p->x % 16 == 0 &&
         ((size_t)p->ldx * es) % 16 == 0 && (uintptr_t)p->q % 8 == 0 && p->ldq % 8 == 0;
}

template <int IN_DT>
__global__ void __launch_bounds__(256) amax_per_tensor(w8a8_quant_problem p, float *amax) {
  float a = 0.0f, unused = 0.0f;
  for (int64_t m = blockIdx.y; m < p.M; m += gridDim.y)
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < p.K; k += (int64_t)gridDim.x * blockDim.x)
      a = fmaxf(a, fabsf(w8a8d_load_float(IN_DT, p.x, m * p.ldx + k)));
  w8a8d_block_reduce_max_min<256>(a, unused, false);
  /* a >= 0 and never NaN (fmaxf drops NaN): its bits order like the values. */
  if (threadIdx.x == 0 && a > 0.0f) atomicMax((int *)amax, __float_as_int(a));
}

/* dynamic (amax != NULL): the scale is computed here from amax[0] and stored in scale[0]; static:
 * scale[0] is the scale. */
template <int IN_DT>
__global__ void __launch_bounds__(256) quant_per_tensor(w8a8_quant_problem p, const float *amax) {
  const bool fp8 = p.out_dtype == W8A8_DTYPE_FP8_E4M3;
  float s;
  if (amax) {
    s = w8a8d_scale_from(amax[0], fp8 ? 448.0f : 127.0f);
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) p.scale[0] = s;
  } else {
    s = p.scale[0];
  }
  const int32_t azp = p.azp ? p.azp[0] : 0;
  const float rcp = w8a8d_quant_rcp(amax != NULL, s);
  const unsigned K = (unsigned)p.K; /* < 2^31 (validated), so k + kstep never wraps */
  const unsigned k0 = blockIdx.x * blockDim.x + threadIdx.x, kstep = gridDim.x * blockDim.x;
  for (int64_t m = blockIdx.y; m < p.M; m += gridDim.y) {
    const char *xr = (const char *)p.x + m * p.ldx * (IN_DT == W8A8_DTYPE_FP32 ? 4 : 2);
    char *qr = (char *)p.q + m * p.ldq;
    for (unsigned k = k0; k < K; k += kstep)
      ((uint8_t *)qr)[k] = w8a8d_quant8(fp8, w8a8d_load_float(IN_DT, xr, k), s, rcp, azp);
  }
}

__global__ void __launch_bounds__(256) colsum_kernel(w8a8_colsum_problem p) {
  int64_t warps = (int64_t)gridDim.x * (blockDim.x >> 5);
  for (int64_t n = (int64_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); n < p.N; n += warps) {
    const int8_t *col = p.b + n * p.ldb;
    int32_t s = 0;
    for (int64_t k = threadIdx.x & 31; k < p.K; k += 32) s += col[k];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if ((threadIdx.x & 31) == 0) p.out[n] = s;
  }
}

static unsigned grid_x_for(int64_t K, int threads) {
  int64_t g = (K + threads - 1) / threads;
  if (g > 1024) g = 1024;
  return (unsigned)(g > 0 ? g : 1);
}

static unsigned grid_y_for(int64_t M, unsigned gx, int num_sms) {
  int64_t want = ((int64_t)num_sms * 8 + gx - 1) / gx; /* about 8 blocks per SM in all */
  if (want < 1) want = 1;
  if (want > M) want = M;
  if (want > 65535) want = 65535;
  return (unsigned)want;
}

/* One instantiation per input dtype; the launchers pick it at run time. */
#define W8A8_BY_IN_DTYPE(dt, KERNEL, GRID, BLOCK, STREAM, ...)                          \
  do {                                                                                  \
    if ((dt) == W8A8_DTYPE_BF16)                                                        \
      KERNEL<W8A8_DTYPE_BF16><<<(GRID), (BLOCK), 0, (STREAM)>>>(__VA_ARGS__);           \
    else if ((dt) == W8A8_DTYPE_FP16)                                                   \
      KERNEL<W8A8_DTYPE_FP16><<<(GRID), (BLOCK), 0, (STREAM)>>>(__VA_ARGS__);           \
    else                                                                                \
      KERNEL<W8A8_DTYPE_FP32><<<(GRID), (BLOCK), 0, (STREAM)>>>(__VA_ARGS__);           \
  } while (0)

static w8a8_status launched(const char *fn, const char *what) {
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? W8A8_SUCCESS : w8a8_cuda_error(fn, what, e);
}

extern "C" w8a8_status w8a8_cuda_launch_quantize(const w8a8_quant_problem *p, cudaStream_t stream, int num_sms,
                                                  float *amax) {
  static const char fn[] = "w8a8_quantize";
  const w8a8_quant_problem q = *p;
  if (p->mode == W8A8_QUANT_DYNAMIC_PER_TOKEN) {
    int64_t g = p->M < 2147483647 ? p->M : 2147483647;
    if (quant_vec_takes(p)) {
      W8A8_BY_IN_DTYPE(p->in_dtype, quant_per_token_vec, (unsigned)g, QV_BLOCK, stream, q);
      W8A8_CHECK(launched(fn, "per-token quantize kernel launch"));
      __atomic_add_fetch(&g_quant_vec_launches, 1ull, __ATOMIC_RELAXED);
      return W8A8_SUCCESS;
    }
    W8A8_BY_IN_DTYPE(p->in_dtype, quant_per_token, (unsigned)g, QT_BLOCK, stream, q);
    return launched(fn, "per-token quantize kernel launch");
  }
  unsigned gx = grid_x_for(p->K, 256), gy = grid_y_for(p->M, gx, num_sms);
  dim3 grid(gx, gy);
  if (p->mode == W8A8_QUANT_DYNAMIC_PER_TENSOR) {
    cudaError_t e = cudaMemsetAsync(amax, 0, sizeof(float), stream);
    if (e != cudaSuccess) return w8a8_cuda_error(fn, "cudaMemsetAsync of the amax slot", e);
    W8A8_BY_IN_DTYPE(p->in_dtype, amax_per_tensor, grid, 256, stream, q, amax);
    W8A8_CHECK(launched(fn, "amax kernel launch"));
    W8A8_BY_IN_DTYPE(p->in_dtype, quant_per_tensor, grid, 256, stream, q, (const float *)amax);
    return launched(fn, "quantize kernel launch");
  }
  W8A8_BY_IN_DTYPE(p->in_dtype, quant_per_tensor, grid, 256, stream, q, (const float *)NULL);
  return launched(fn, "quantize kernel launch");
}

extern "C" w8a8_status w8a8_cuda_launch_colsum(const w8a8_colsum_problem *p, cudaStream_t stream, int num_sms) {
  int64_t blocks = (p->N + 7) / 8;
  int64_t cap = (int64_t)num_sms * 16;
  if (blocks > cap) blocks = cap;
  colsum_kernel<<<(unsigned)blocks, 256, 0, stream>>>(*p);
  return launched("w8a8_colsum", "colsum kernel launch");
}
