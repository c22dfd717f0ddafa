// act.cu — the fused SiLU-and-mul quantizer on the GPU, bit-identical to src/cpu/act_cpu.c.
//
// y = silu(gate) * up is never written to memory: each kernel reads gate and up once (bf16:
// 4 bytes per y), computes y in fp32 and writes the 1-byte q.
//
// Kernels:
//   act_per_token:   one block per row, ONE pass over x: the row's y (up to 8192 values) stays in
//                    registers between the block's max (or min/max) reduction and the
//                    quantization; longer rows recompute the tail (x from L2).
//   act_amax:        dynamic per-tensor: grid-wide max |y| by atomicMax on the fp32 bits into
//                    the handle's amax slot (zeroed by cudaMemsetAsync), as quant.cu's amax_per_tensor.
//   act_per_tensor:  element-wise quantization with a per-tensor scale from device memory
//                    (static: the caller's; dynamic: the amax slot, turned into the scale by every
//                    thread, and block (0,0)'s first thread stores it in the caller's scale[0]: the
//                    call's last kernel is the only one that writes what the caller owns).
// Each thread handles runs of 8 consecutive y: with 16-byte aligned rows (the usual case) a run
// is one 16-byte load of gate, one of up (two each for fp32) and one 8-byte store of q.
// Everything runs on the handle's stream; nothing allocates or synchronizes (graph-capturable).
#include <stdint.h>

#include "act_math.cuh"
#include "common.cuh"
#include "cuda_backend.h"

#define AQ_BLOCK 256 /* threads per block */
#define AQ_VEC 8     /* consecutive y per thread run */
#define AQ_RUNS 4    /* runs per thread held in registers: rows up to 256 * 8 * 4 = 8192 in one pass */
static_assert(AQ_VEC == 8, "w8a8d_store_q8 stores runs of 8");

// ---- arithmetic: act_math.cuh (act_expf, silu_mul), the same operations as src/cpu/act_cpu.c ----

// ---- loads: one run of AQ_VEC y values starting at column k0 of row m ---------------------


/* y of columns k0 .. k0+7 of row m (values past K are 0 and must not be used). VEC: the run is
 * whole (K % 8 == 0) and 16-byte aligned in gate and up. */
template <int IN_DT, bool VEC>
W8A8_DEVFN void act_run(const w8a8_quant_problem &p, int64_t m, int64_t k0, float *y) {
  const int64_t row = m * p.ldx;
  if (VEC) {
    float g[AQ_VEC], u[AQ_VEC];
    w8a8d_load8<IN_DT>(p.x, row + k0, g);
    w8a8d_load8<IN_DT>(p.x, row + p.K + k0, u);
#pragma unroll
    for (int j = 0; j < AQ_VEC; j++) y[j] = silu_mul(g[j], u[j]);
  } else {
    /* one element at a time: ptxas otherwise keeps 16 loads and 8 exps in flight and spills */
#pragma unroll 1
    for (int j = 0; j < AQ_VEC; j++)
      if (k0 + j < p.K)
        y[j] = silu_mul(w8a8d_load_float(IN_DT, p.x, row + k0 + j), w8a8d_load_float(IN_DT, p.x, row + p.K + k0 + j));
  }
}

template <bool VEC>
W8A8_DEVFN void store_run(const w8a8_quant_problem &p, int64_t m, int64_t k0, const float *y, float s, float rcp,
                        int32_t azp) {
  const bool fp8 = p.out_dtype == W8A8_DTYPE_FP8_E4M3;
  uint8_t *q = (uint8_t *)p.q + m * p.ldq + k0;
  if (VEC) {
    w8a8d_store_q8(q, fp8, y, s, rcp, azp);
  } else {
#pragma unroll
    for (int j = 0; j < AQ_VEC; j++)
      if (k0 + j < p.K) q[j] = w8a8d_quant8(fp8, y[j], s, rcp, azp);
  }
}

// ---- kernels -------------------------------------------------------------------------------

template <int IN_DT, bool VEC>
__global__ void __launch_bounds__(AQ_BLOCK) act_per_token(w8a8_quant_problem p) {
  const bool asym = p.azp != NULL;
  const float qmax = p.out_dtype == W8A8_DTYPE_FP8_E4M3 ? 448.0f : 127.0f;
  const int64_t step = (int64_t)AQ_BLOCK * AQ_VEC;
  const int64_t k_first = (int64_t)threadIdx.x * AQ_VEC;
  for (int64_t m = blockIdx.x; m < p.M; m += gridDim.x) {
    float y[AQ_RUNS][AQ_VEC];
    /* fmaxf / fminf drop NaN, like the reference's comparisons */
    float hi = asym ? -INFINITY : 0.0f, lo = INFINITY;
#pragma unroll
    for (int r = 0; r < AQ_RUNS; r++) {
      const int64_t k0 = k_first + r * step;
      if (k0 < p.K) {
        act_run<IN_DT, VEC>(p, m, k0, y[r]);
#pragma unroll
        for (int j = 0; j < AQ_VEC; j++)
          if (k0 + j < p.K) w8a8d_track(asym, y[r][j], hi, lo);
      }
    }
    for (int64_t k0 = k_first + AQ_RUNS * step; k0 < p.K; k0 += step) {
      float t[AQ_VEC];
      act_run<IN_DT, VEC>(p, m, k0, t);
#pragma unroll
      for (int j = 0; j < AQ_VEC; j++)
        if (k0 + j < p.K) w8a8d_track(asym, t[j], hi, lo);
    }
    w8a8d_block_reduce_max_min<AQ_BLOCK>(hi, lo, asym);
    float s;
    int32_t azp;
    w8a8d_row_scale(asym, hi, lo, p.K, qmax, p.scale_ub, &s, &azp);
    const float rcp = w8a8d_quant_rcp(true, s);
#pragma unroll
    for (int r = 0; r < AQ_RUNS; r++) {
      const int64_t k0 = k_first + r * step;
      if (k0 < p.K) store_run<VEC>(p, m, k0, y[r], s, rcp, azp);
    }
    for (int64_t k0 = k_first + AQ_RUNS * step; k0 < p.K; k0 += step) {
      float t[AQ_VEC];
      act_run<IN_DT, VEC>(p, m, k0, t);
      store_run<VEC>(p, m, k0, t, s, rcp, azp);
    }
    if (threadIdx.x == 0) {
      p.scale[m] = s;
      if (asym) p.azp[m] = azp;
    }
    __syncthreads(); /* the reduction's shared memory is reused by the next row */
  }
}

template <int IN_DT, bool VEC>
__global__ void __launch_bounds__(AQ_BLOCK) act_amax(w8a8_quant_problem p, float *amax) {
  float a = 0.0f, unused = 0.0f;
  const int64_t step = (int64_t)gridDim.x * AQ_BLOCK * AQ_VEC;
  for (int64_t m = blockIdx.y; m < p.M; m += gridDim.y)
    for (int64_t k0 = ((int64_t)blockIdx.x * AQ_BLOCK + threadIdx.x) * AQ_VEC; k0 < p.K; k0 += step) {
      float y[AQ_VEC];
      act_run<IN_DT, VEC>(p, m, k0, y);
#pragma unroll
      for (int j = 0; j < AQ_VEC; j++)
        if (k0 + j < p.K) a = fmaxf(a, fabsf(y[j]));
    }
  w8a8d_block_reduce_max_min<AQ_BLOCK>(a, unused, false);
  /* a >= 0 and never NaN: its bits order like the values */
  if (threadIdx.x == 0 && a > 0.0f) atomicMax((int *)amax, __float_as_int(a));
}

/* dynamic (amax != NULL): the scale is computed here from amax[0] and stored in scale[0]; static:
 * scale[0] is the scale. */
template <int IN_DT, bool VEC>
__global__ void __launch_bounds__(AQ_BLOCK) act_per_tensor(w8a8_quant_problem p, const float *amax) {
  float s;
  if (amax) {
    s = w8a8d_scale_from(amax[0], p.out_dtype == W8A8_DTYPE_FP8_E4M3 ? 448.0f : 127.0f);
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) p.scale[0] = s;
  } else {
    s = p.scale[0];
  }
  const int32_t azp = p.azp ? p.azp[0] : 0;
  const float rcp = w8a8d_quant_rcp(amax != NULL, s);
  const int64_t step = (int64_t)gridDim.x * AQ_BLOCK * AQ_VEC;
  for (int64_t m = blockIdx.y; m < p.M; m += gridDim.y)
    for (int64_t k0 = ((int64_t)blockIdx.x * AQ_BLOCK + threadIdx.x) * AQ_VEC; k0 < p.K; k0 += step) {
      float y[AQ_VEC];
      act_run<IN_DT, VEC>(p, m, k0, y);
      store_run<VEC>(p, m, k0, y, s, rcp, azp);
    }
}

// ---- launchers -----------------------------------------------------------------------------

/* One instantiation per input dtype and load width. */
#define ACT_LAUNCH(KERNEL, GRID, STREAM, ...)                                                   \
  do {                                                                                          \
    if (vec) {                                                                                  \
      if (p->in_dtype == W8A8_DTYPE_BF16)                                                       \
        KERNEL<W8A8_DTYPE_BF16, true><<<(GRID), AQ_BLOCK, 0, (STREAM)>>>(__VA_ARGS__);          \
      else if (p->in_dtype == W8A8_DTYPE_FP16)                                                  \
        KERNEL<W8A8_DTYPE_FP16, true><<<(GRID), AQ_BLOCK, 0, (STREAM)>>>(__VA_ARGS__);          \
      else                                                                                      \
        KERNEL<W8A8_DTYPE_FP32, true><<<(GRID), AQ_BLOCK, 0, (STREAM)>>>(__VA_ARGS__);          \
    } else {                                                                                    \
      if (p->in_dtype == W8A8_DTYPE_BF16)                                                       \
        KERNEL<W8A8_DTYPE_BF16, false><<<(GRID), AQ_BLOCK, 0, (STREAM)>>>(__VA_ARGS__);         \
      else if (p->in_dtype == W8A8_DTYPE_FP16)                                                  \
        KERNEL<W8A8_DTYPE_FP16, false><<<(GRID), AQ_BLOCK, 0, (STREAM)>>>(__VA_ARGS__);         \
      else                                                                                      \
        KERNEL<W8A8_DTYPE_FP32, false><<<(GRID), AQ_BLOCK, 0, (STREAM)>>>(__VA_ARGS__);         \
    }                                                                                           \
  } while (0)

static const char fn[] = "w8a8_silu_mul_quantize";

static w8a8_status launched(const char *what) {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? W8A8_SUCCESS : w8a8_cuda_error(fn, what, e);
}

static w8a8_status launch(const w8a8_quant_problem *p, cudaStream_t stream, int num_sms, float *amax) {
  const w8a8_quant_problem q = *p;
  const size_t es = w8a8_dtype_size(p->in_dtype);
  /* Whole 16-byte runs in gate and up, 8-byte runs in q. */
  const bool vec = p->K % AQ_VEC == 0 && (uintptr_t)p->x % 16 == 0 && ((size_t)p->ldx * es) % 16 == 0 &&
                   (uintptr_t)p->q % 8 == 0 && p->ldq % 8 == 0;
  if (p->mode == W8A8_QUANT_DYNAMIC_PER_TOKEN) {
    const unsigned g = (unsigned)(p->M < 2147483647 ? p->M : 2147483647);
    ACT_LAUNCH(act_per_token, g, stream, q);
    return launched("per-token kernel launch");
  }
  /* per-tensor: x-blocks over a row's runs, y-blocks over rows, about 8 blocks per SM */
  int64_t runs = (p->K + AQ_VEC - 1) / AQ_VEC, gx = (runs + AQ_BLOCK - 1) / AQ_BLOCK;
  if (gx < 1) gx = 1;
  if (gx > 1024) gx = 1024;
  int64_t gy = ((int64_t)num_sms * 8 + gx - 1) / gx;
  if (gy > p->M) gy = p->M;
  if (gy > 65535) gy = 65535;
  if (gy < 1) gy = 1;
  const dim3 grid((unsigned)gx, (unsigned)gy);
  if (p->mode == W8A8_QUANT_DYNAMIC_PER_TENSOR) {
    const cudaError_t e = cudaMemsetAsync(amax, 0, sizeof(float), stream);
    if (e != cudaSuccess) return w8a8_cuda_error(fn, "cudaMemsetAsync of the amax slot", e);
    ACT_LAUNCH(act_amax, grid, stream, q, amax);
    W8A8_CHECK(launched("amax kernel launch"));
    ACT_LAUNCH(act_per_tensor, grid, stream, q, (const float *)amax);
    return launched("quantize kernel launch");
  }
  ACT_LAUNCH(act_per_tensor, grid, stream, q, (const float *)NULL);
  return launched("quantize kernel launch");
}

extern "C" w8a8_status w8a8_cuda_silu_mul_quantize(w8a8_handle *h, const w8a8_quant_problem *p) {
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  if (p->out_dtype == W8A8_DTYPE_FP8_E4M3) W8A8_CHECK(w8a8_cuda_need_fp8(fn, h));
  /* The handle's device is current for the call only (as dispatch.c's guard). */
  int prev = -1;
  cudaError_t e = cudaGetDevice(&prev);
  if (e != cudaSuccess) return w8a8_cuda_error(fn, "cudaGetDevice", e);
  if (prev != h->device_index && (e = cudaSetDevice(h->device_index)) != cudaSuccess)
    return w8a8_cuda_error(fn, "cudaSetDevice", e);
  cudaGetLastError(); /* a stale, non-sticky error of the caller's is not ours */
  const w8a8_status s = launch(p, (cudaStream_t)h->stream, st->prop.multiProcessorCount, st->amax);
  if (prev != h->device_index) cudaSetDevice(prev);
  return s;
}
