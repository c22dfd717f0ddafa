/* act_cpu.c — the fused SiLU-and-mul quantizer on the CPU: the scalar reference (the ground truth
 * the CUDA kernel is compared with, bit for bit), threaded over rows with OpenMP.
 *
 * y[m,k] = silu(x[m,k]) * x[m,K+k] in fp32, then exactly w8a8_ref_quantize's rules on y
 * (reference.c): the same scale helpers (numeric.c), the same NaN-ignoring max/min, the same
 * IEEE division y / s and conversions. y is recomputed where a dynamic mode needs it twice
 * (reduction, then quantization): no scratch buffer, and it is deterministic, so the two
 * passes see the same values. */
#include <math.h>
#include <string.h>

#include "../core/internal.h"
#include "cpu_kernels.h"

/* Separate statements and no contraction: each step below must be ONE IEEE operation, so
 * that src/cuda/act.cu (which spells every step with an _rn intrinsic) gets the same bits.
 * gcc in -std=c11 mode does not contract (-ffp-contract=off); clang honours this pragma. */
#pragma STDC FP_CONTRACT OFF

/* w8a8's expf (w8a8.h): x = k ln2 + r, |r| <= ln2/2, exp(r) by its Taylor polynomial of
 * degree 11 (truncation 0.347^12/12! < 2^-47 relative), times 2^k, all in double, then one
 * rounding to fp32. src/cuda/act.cu's w8a8d_act_expf is the same sequence of operations with
 * the same constants: change both or neither. */
float w8a8_act_expf(float x) {
  if (x != x) return x;
  double xd = (double)x;
  /* exp(100) overflows fp32 and exp(-110) rounds to 0: clamping there changes no result
   * and keeps 2^k a normal double (infinities included). */
  if (xd > 100.0) xd = 100.0;
  if (xd < -110.0) xd = -110.0;
  const double shift = 0x1.8p52; /* adding and subtracting it rounds to an integer (RNE) */
  double kd = xd * 0x1.71547652b82fep+0; /* x / ln2 */
  kd = kd + shift;
  kd = kd - shift;
  /* r = x - k ln2 with ln2 = hi + lo; k * hi is exact (|k| < 2^8, hi has 32 bits) */
  double t = kd * 0x1.62e42fee00000p-1;
  double r = xd - t;
  t = kd * 0x1.a39ef35793c76p-33;
  r = r - t;
  static const double c[12] = {1.0,
                               1.0,
                               0x1.0000000000000p-1,
                               0x1.5555555555555p-3,
                               0x1.5555555555555p-5,
                               0x1.1111111111111p-7,
                               0x1.6c16c16c16c17p-10,
                               0x1.a01a01a01a01ap-13,
                               0x1.a01a01a01a01ap-16,
                               0x1.71de3a556c734p-19,
                               0x1.27e4fb7789f5cp-22,
                               0x1.ae64567f544e4p-26};
  double p = c[11];
  for (int i = 10; i >= 0; i--) {
    p = p * r;
    p = p + c[i];
  }
  /* 2^k from its bits: k is in [-159, 145], far from the double range's ends */
  int64_t k = (int64_t)kd;
  uint64_t bits = (uint64_t)(k + 1023) << 52;
  double two_k;
  memcpy(&two_k, &bits, 8);
  return (float)(p * two_k);
}

float w8a8_silu_mul(float g, float u) {
  float e = w8a8_act_expf(-g);
  float d = 1.0f + e;
  float s = g / d;
  float y = s * u;
  /* Which NaN an IEEE operation returns (sign, payload) is not fixed by the standard and
   * differs between x86 and the GPU, and between operand orders a compiler may pick: one
   * canonical NaN makes the quantized bits (fp8 keeps the sign) the same everywhere. */
  if (y != y) {
    const uint32_t qnan = 0x7fc00000u;
    memcpy(&y, &qnan, 4);
  }
  return y;
}

static float load_in(w8a8_dtype t, const void *base, int64_t i) {
  switch (t) {
    case W8A8_DTYPE_BF16: return w8a8_bf16_to_f32(((const uint16_t *)base)[i]);
    case W8A8_DTYPE_FP16: return w8a8_f16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
  }
}

/* y[m,k]: the gate at column k, the up projection at column K + k of the same row. */
static float act_y(const w8a8_quant_problem *p, int64_t m, int64_t k) {
  const int64_t row = m * p->ldx;
  return w8a8_silu_mul(load_in(p->in_dtype, p->x, row + k), load_in(p->in_dtype, p->x, row + p->K + k));
}

/* As reference.c: comparisons, so that NaN is skipped whatever its bits. */
static float nan_ignoring_max(float acc, float v) { return v > acc ? v : acc; }
static float nan_ignoring_min(float acc, float v) { return v < acc ? v : acc; }

static void quantize_row(const w8a8_quant_problem *p, int64_t m, float s, int32_t azp) {
  for (int64_t k = 0; k < p->K; k++) {
    float y = act_y(p, m, k) / s;
    if (p->out_dtype == W8A8_DTYPE_FP8_E4M3)
      ((uint8_t *)p->q)[m * p->ldq + k] = w8a8_f32_to_fp8(y);
    else
      ((int8_t *)p->q)[m * p->ldq + k] = w8a8_f32_to_int8_rne(y, azp);
  }
}

float w8a8_silu_mul_value(const w8a8_quant_problem *p, int64_t m, int64_t k) { return act_y(p, m, k); }

w8a8_status w8a8_cpu_silu_mul_quantize(w8a8_handle *h, const w8a8_quant_problem *p) {
  if (p->groups != W8A8_GROUPS_NONE) {
    w8a8_ref_quantize_groups(p, w8a8_silu_mul_value);
    return W8A8_SUCCESS;
  }
  const float qmax = p->out_dtype == W8A8_DTYPE_FP8_E4M3 ? 448.0f : 127.0f;
  const int nt = w8a8_cpu_threads(h);
  /* Threads only for enough work: each element costs an exp (about 30 flops). */
  const int par = (double)p->M * (double)p->K > 16384.0;
  if (p->mode == W8A8_QUANT_STATIC_PER_TENSOR) {
    const float s = p->scale[0];
    const int32_t azp = p->azp ? p->azp[0] : 0;
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t m = 0; m < p->M; m++) quantize_row(p, m, s, azp);
  } else if (p->mode == W8A8_QUANT_DYNAMIC_PER_TENSOR) {
    /* max over non-negative, NaN-free values: any grouping gives the same result */
    float amax = 0.0f;
#pragma omp parallel for schedule(static) num_threads(nt) if (par) reduction(max : amax)
    for (int64_t m = 0; m < p->M; m++) {
      float a = 0.0f;
      for (int64_t k = 0; k < p->K; k++) a = nan_ignoring_max(a, fabsf(act_y(p, m, k)));
      amax = a > amax ? a : amax;
    }
    const float s = w8a8_dynamic_scale(amax, qmax);
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t m = 0; m < p->M; m++) quantize_row(p, m, s, 0);
    p->scale[0] = s;
  } else {
#pragma omp parallel for schedule(static) num_threads(nt) if (par)
    for (int64_t m = 0; m < p->M; m++) {
      float s;
      int32_t azp = 0;
      if (p->azp) { /* asymmetric int8 */
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t k = 0; k < p->K; k++) {
          float y = act_y(p, m, k);
          lo = nan_ignoring_min(lo, y);
          hi = nan_ignoring_max(hi, y);
        }
        if (p->K == 0) lo = hi = 0.0f;
        w8a8_asym_params(lo, hi, &s, &azp);
      } else {
        float amax = 0.0f;
        for (int64_t k = 0; k < p->K; k++) amax = nan_ignoring_max(amax, fabsf(act_y(p, m, k)));
        if (p->scale_ub) amax = fminf(amax, *p->scale_ub);
        s = w8a8_dynamic_scale(amax, qmax);
      }
      quantize_row(p, m, s, azp);
      p->scale[m] = s;
      if (p->azp) p->azp[m] = azp;
    }
  }
  return W8A8_SUCCESS;
}
