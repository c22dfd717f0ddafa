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
#include <stdint.h>

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
        if (asym) {
          hi = fmaxf(hi, v[i]);
          lo = fminf(lo, v[i]);
        } else {
          hi = fmaxf(hi, fabsf(v[i]));
        }
      }
    }
    for (int64_t k = (int64_t)QT_REGS * QT_BLOCK + threadIdx.x; k < p.K; k += QT_BLOCK) {
      float x = w8a8d_load_float(IN_DT, xrow, xoff + k);
      if (asym) {
        hi = fmaxf(hi, x);
        lo = fminf(lo, x);
      } else {
        hi = fmaxf(hi, fabsf(x));
      }
    }
    w8a8d_block_reduce_max_min<QT_BLOCK>(hi, lo, asym);
    float s;
    int32_t azp;
    w8a8d_row_scale(asym, hi, lo, p.K, qmax, p.scale_ub, &s, &azp);
    const int64_t qoff = m * p.ldq;
#pragma unroll
    for (int i = 0; i < QT_REGS; i++) {
      int64_t k = (int64_t)i * QT_BLOCK + threadIdx.x;
      if (k < p.K) ((uint8_t *)p.q)[qoff + k] = w8a8d_quant8(fp8, v[i], s, azp);
    }
    for (int64_t k = (int64_t)QT_REGS * QT_BLOCK + threadIdx.x; k < p.K; k += QT_BLOCK)
      ((uint8_t *)p.q)[qoff + k] = w8a8d_quant8(fp8, w8a8d_load_float(IN_DT, xrow, xoff + k), s, azp);
    if (threadIdx.x == 0) {
      p.scale[m] = s;
      if (asym) p.azp[m] = azp;
    }
    __syncthreads(); /* the reduction's shared memory is reused by the next row */
  }
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
  const unsigned K = (unsigned)p.K; /* < 2^31 (validated), so k + kstep never wraps */
  const unsigned k0 = blockIdx.x * blockDim.x + threadIdx.x, kstep = gridDim.x * blockDim.x;
  for (int64_t m = blockIdx.y; m < p.M; m += gridDim.y) {
    const char *xr = (const char *)p.x + m * p.ldx * (IN_DT == W8A8_DTYPE_FP32 ? 4 : 2);
    char *qr = (char *)p.q + m * p.ldq;
    for (unsigned k = k0; k < K; k += kstep)
      ((uint8_t *)qr)[k] = w8a8d_quant8(fp8, w8a8d_load_float(IN_DT, xr, k), s, azp);
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
