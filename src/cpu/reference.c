/* reference.c — the plain scalar implementation of every operation.
 *
 * This is the ground truth the tests compare every other path against, so it
 * is written to be read, not to be fast: one output element at a time, in the
 * order the header's formulas are written. */
#include <math.h>

#include "../core/internal.h"

/* Load element i of a bf16/fp16/fp32 array as fp32. */
static float load_float(w8a8_dtype t, const void *base, int64_t i) {
  switch (t) {
    case W8A8_DTYPE_BF16: return w8a8_bf16_to_f32(((const uint16_t *)base)[i]);
    case W8A8_DTYPE_FP16: return w8a8_f16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
  }
}

/* Store fp32 r into element i of a bf16/fp16/fp32 array, rounding once (RNE). */
static void store_float(w8a8_dtype t, void *base, int64_t i, float r) {
  switch (t) {
    case W8A8_DTYPE_BF16: ((uint16_t *)base)[i] = w8a8_f32_to_bf16(r); break;
    case W8A8_DTYPE_FP16: ((uint16_t *)base)[i] = w8a8_f32_to_f16(r); break;
    default: ((float *)base)[i] = r; break;
  }
}

/* int32 arithmetic that wraps like the hardware's (the header requires K small
 * enough that it never does for valid inputs, but C must not see signed overflow). */
static int32_t wrap_sub_mul(int32_t acc, int32_t azp, int32_t adj) {
  return (int32_t)((uint32_t)acc - (uint32_t)azp * (uint32_t)adj);
}

/* Block-scaled fp8 (w8a8_scaled_mm_blockwise): each 128-deep block summed in k order, then added into acc with
 * the product of its two scales, in block order. */
static void ref_blockwise(const w8a8_mm_problem *p) {
  const int64_t MN = p->M * p->N;
  const int par = (double)MN * (double)(p->K + 1) > 4e6;
  float fp8[256];
  for (int i = 0; i < 256; i++) fp8[i] = w8a8_fp8_to_f32((uint8_t)i);
  const int64_t KB = (p->K + W8A8_BLOCK - 1) / W8A8_BLOCK;
#pragma omp parallel for schedule(static, 64) if (par)
  for (int64_t mn = 0; mn < MN; mn++) {
    const int64_t m = mn / p->N, n = mn % p->N;
    const uint8_t *a = (const uint8_t *)p->a + m * p->lda;
    const uint8_t *b = (const uint8_t *)p->b + n * p->ldb;
    float acc = 0.0f;
    for (int64_t kb = 0; kb < KB; kb++) {
      const int64_t k1 = (kb + 1) * W8A8_BLOCK < p->K ? (kb + 1) * W8A8_BLOCK : p->K;
      float part = 0.0f;
      for (int64_t k = kb * W8A8_BLOCK; k < k1; k++) part += fp8[a[k]] * fp8[b[k]];
      const float s = p->scale_a[m * p->sa_rs + kb * p->sa_cs] * p->scale_b[(n / W8A8_BLOCK) * p->sb_rs + kb * p->sb_cs];
      acc = fmaf(s, part, acc);
    }
    const float r = p->bias ? acc + load_float(p->out_dtype, p->bias, n) : acc;
    store_float(p->out_dtype, p->out, m * p->ldo + n, r);
  }
}

void w8a8_ref_scaled_mm(const w8a8_mm_problem *p) {
  if (p->block_scaled) {
    ref_blockwise(p);
    return;
  }
  /* Every element is computed on its own, in the same order whatever the thread: threads change
   * nothing but the time (the GPU tests' reference for a 64 x 28672 x 4096 product took most of
   * a 45 s step on one core). */
  const int64_t MN = p->M * p->N;
  const int par = (double)MN * (double)(p->K + 1) > 4e6;
  /* fp8 operands decoded through a table of w8a8_fp8_to_f32's 256 values: the same floats, without a ldexpf per
   * operand (which made the fp8 GPU tests' references most of their suites' time) */
  float fp8[256];
  for (int i = 0; i < 256; i++) fp8[i] = w8a8_fp8_to_f32((uint8_t)i);
#pragma omp parallel for schedule(static, 64) if (par)
  for (int64_t mn = 0; mn < MN; mn++) {
    const int64_t m = mn / p->N, n = mn % p->N;
    float sa = p->scale_a[p->scale_a_per_token ? m : 0];
    {
      float sb = p->scale_b[p->scale_b_per_channel ? n : 0];
      float v;
      if (p->in_dtype == W8A8_DTYPE_INT8) {
        const int8_t *a = (const int8_t *)p->a + m * p->lda;
        const int8_t *b = (const int8_t *)p->b + n * p->ldb;
        int32_t acc = 0;
        for (int64_t k = 0; k < p->K; k++) acc += (int32_t)a[k] * (int32_t)b[k];
        switch (p->azp_mode) {
          case W8A8_AZP_ADJ_ONLY: acc = wrap_sub_mul(acc, 1, p->azp_adj[n]); break;
          case W8A8_AZP_PER_TENSOR: acc = wrap_sub_mul(acc, p->azp[0], p->azp_adj[n]); break;
          case W8A8_AZP_PER_TOKEN: acc = wrap_sub_mul(acc, p->azp[m], p->azp_adj[n]); break;
          default: break;
        }
        v = (float)acc;
      } else {
        const uint8_t *a = (const uint8_t *)p->a + m * p->lda;
        const uint8_t *b = (const uint8_t *)p->b + n * p->ldb;
        v = 0.0f;
        for (int64_t k = 0; k < p->K; k++) v += fp8[a[k]] * fp8[b[k]];
      }
      float bias, *bp = NULL;
      if (p->bias) {
        bias = load_float(p->out_dtype, p->bias, n);
        bp = &bias;
      }
      store_float(p->out_dtype, p->out, m * p->ldo + n, w8a8_epilogue(v, sa, sb, bp));
    }
  }
}

void w8a8_ref_colsum(const w8a8_colsum_problem *p) {
  for (int64_t n = 0; n < p->N; n++) {
    int32_t s = 0;
    for (int64_t k = 0; k < p->K; k++) s += p->b[n * p->ldb + k];
    p->out[n] = s;
  }
}

/* Maxima and minima skip NaN inputs. Written as comparisons rather than fmaxf/fminf: glibc's
 * fmaxf returns NaN for a signalling NaN, which no vectorised or parallel max reproduces. */
static float nan_ignoring_max(float acc, float x) { return x > acc ? x : acc; }
static float nan_ignoring_min(float acc, float x) { return x < acc ? x : acc; }


static void quantize_row(const w8a8_quant_problem *p, int64_t m, float s, int32_t azp) {
  for (int64_t k = 0; k < p->K; k++) {
    float x = load_float(p->in_dtype, p->x, m * p->ldx + k);
    float y = x / s;
    if (p->out_dtype == W8A8_DTYPE_FP8_E4M3)
      ((uint8_t *)p->q)[m * p->ldq + k] = w8a8_f32_to_fp8(y);
    else
      ((int8_t *)p->q)[m * p->ldq + k] = w8a8_f32_to_int8_rne(y, azp);
  }
}

void w8a8_ref_quantize(const w8a8_quant_problem *p) {
  const float qmax = p->out_dtype == W8A8_DTYPE_FP8_E4M3 ? 448.0f : 127.0f;
  if (p->mode == W8A8_QUANT_STATIC_PER_TENSOR) {
    float s = p->scale[0];
    int32_t azp = p->azp ? p->azp[0] : 0;
    for (int64_t m = 0; m < p->M; m++) quantize_row(p, m, s, azp);
  } else if (p->mode == W8A8_QUANT_DYNAMIC_PER_TENSOR) {
    float amax = 0.0f;
    for (int64_t m = 0; m < p->M; m++)
      for (int64_t k = 0; k < p->K; k++) amax = nan_ignoring_max(amax, fabsf(load_float(p->in_dtype, p->x, m * p->ldx + k)));
    float s = w8a8_dynamic_scale(amax, qmax);
    for (int64_t m = 0; m < p->M; m++) quantize_row(p, m, s, 0);
    p->scale[0] = s;
  } else if (p->azp) { /* dynamic per-token, asymmetric int8 */
    for (int64_t m = 0; m < p->M; m++) {
      float lo = INFINITY, hi = -INFINITY;
      for (int64_t k = 0; k < p->K; k++) {
        float x = load_float(p->in_dtype, p->x, m * p->ldx + k);
        lo = nan_ignoring_min(lo, x);
        hi = nan_ignoring_max(hi, x);
      }
      if (p->K == 0) lo = hi = 0.0f;
      float s;
      int32_t azp;
      w8a8_asym_params(lo, hi, &s, &azp);
      quantize_row(p, m, s, azp);
      p->scale[m] = s;
      p->azp[m] = azp;
    }
  } else { /* dynamic per-token, symmetric */
    for (int64_t m = 0; m < p->M; m++) {
      float amax = 0.0f;
      for (int64_t k = 0; k < p->K; k++) amax = nan_ignoring_max(amax, fabsf(load_float(p->in_dtype, p->x, m * p->ldx + k)));
      if (p->scale_ub) amax = fminf(amax, *p->scale_ub);
      float s = w8a8_dynamic_scale(amax, qmax);
      quantize_row(p, m, s, 0);
      p->scale[m] = s;
    }
  }
}

/* ---- group and block scales ------------------------------------------------------------------------------------ */

static float value_of_x(const w8a8_quant_problem *p, int64_t m, int64_t k) {
  return load_float(p->in_dtype, p->x, m * p->ldx + k);
}

/* The smallest power of two >= s (s > 0 and finite): exact, where exp2f(ceilf(log2f(s))) may miss by a power. */
static float ue8m0_up(float s) {
  int e;
  const float f = frexpf(s, &e); /* s = f * 2^e, f in [0.5, 1) */
  return f == 0.5f ? s : ldexpf(1.0f, e);
}

void w8a8_ref_quantize_groups(const w8a8_quant_problem *p, w8a8_value_fn value) {
  if (!value) value = value_of_x;
  const int64_t G = W8A8_BLOCK;
  const int block = p->groups == W8A8_GROUPS_BLOCK;
  const int64_t RB = block ? (p->M + G - 1) / G : p->M, KB = (p->K + G - 1) / G;
  for (int64_t rb = 0; rb < RB; rb++)
    for (int64_t kb = 0; kb < KB; kb++) {
      const int64_t m0 = block ? rb * G : rb, m1 = block ? (m0 + G < p->M ? m0 + G : p->M) : rb + 1;
      const int64_t k0 = kb * G, k1 = k0 + G < p->K ? k0 + G : p->K;
      float amax = 0.0f;
      for (int64_t m = m0; m < m1; m++)
        for (int64_t k = k0; k < k1; k++) amax = nan_ignoring_max(amax, fabsf(value(p, m, k)));
      float s = w8a8_dynamic_scale(amax, 448.0f);
      if (p->ue8m0) s = ue8m0_up(s);
      for (int64_t m = m0; m < m1; m++)
        for (int64_t k = k0; k < k1; k++) ((uint8_t *)p->q)[m * p->ldq + k] = w8a8_f32_to_fp8(value(p, m, k) / s);
      p->scale[rb * p->s_rs + kb * p->s_cs] = s;
    }
}
