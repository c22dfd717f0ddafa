/* quant_fast.c — the vectorized quantizers (AVX2), OpenMP over rows.
 *
 * Bit-identical to w8a8_ref_quantize: the same IEEE division x / s (vdivps, never a
 * multiplication by 1/s), the same NaN rules (max/min ignore NaN like fmaxf/fminf, fp8
 * keeps NaN, int8 maps NaN to the zero point), the same rounding (RNE) and saturation.
 * Per-row scalars (scales, zero points) are computed with the reference's scalar formulas.
 * Row tails (K % 8) go through the reference's scalar conversions. */
#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gemm_kernels.h"

w8a8_status w8a8_cpu_quantize_fast(w8a8_handle *h, const w8a8_quant_problem *p) {
  const w8a8_cpu_features *f = &h->cpu;
  if (!(f->avx2 && f->fma && f->f16c))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_quantize: the fast CPU quantizers need AVX2, FMA and F16C");
  return w8a8_quantize_avx2(p, w8a8_cpu_threads(h));
}

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>

static float load1(w8a8_dtype t, const void *base, int64_t i) {
  switch (t) {
    case W8A8_DTYPE_BF16: return w8a8_bf16_to_f32(((const uint16_t *)base)[i]);
    case W8A8_DTYPE_FP16: return w8a8_f16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
  }
}

static inline __m256 load8(w8a8_dtype t, const void *base, int64_t i) {
  switch (t) {
    case W8A8_DTYPE_BF16:
      return _mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i))), 16));
    case W8A8_DTYPE_FP16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)base + i)));
    default: return _mm256_loadu_ps((const float *)base + i);
  }
}

/* fp32 -> e4m3fn as w8a8_f32_to_fp8: NaN -> sign|0x7f, |y| >= 448 -> sign|0x7e,
 * |y| < 2^-6 -> rint(|y|*512) (subnormals), else RNE on the top 3 mantissa bits
 * (carry into the exponent is the right answer). Result in the low byte of each lane. */
static inline __m256i f32_to_fp8_8(__m256 y) {
  const __m256i u = _mm256_castps_si256(y);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(u, 24), _mm256_set1_epi32(0x80));
  const __m256i x = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256 a = _mm256_castsi256_ps(x);
  /* normal: ((x + 0x7ffff + lsb) >> 20) - (120 << 3) */
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 20), _mm256_set1_epi32(1));
  __m256i nrm = _mm256_sub_epi32(
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7ffff)), lsb), 20),
      _mm256_set1_epi32(120 << 3));
  __m256i sub = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(512.0f)),
                                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  __m256i is_sub = _mm256_castps_si256(_mm256_cmp_ps(a, _mm256_set1_ps(0x1p-6f), _CMP_LT_OQ));
  __m256i r = _mm256_blendv_epi8(nrm, sub, is_sub);
  __m256i is_sat = _mm256_cmpgt_epi32(x, _mm256_set1_epi32(0x43dfffff)); /* a >= 448 (inf, NaN too) */
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7e), is_sat);
  __m256i is_nan = _mm256_cmpgt_epi32(x, _mm256_set1_epi32(0x7f800000));
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7f), is_nan);
  return _mm256_or_si256(r, sign);
}

/* int8 as w8a8_f32_to_int8_rne for |azp| <= 2^24: NaN -> 0; rne; clamp to +-2^25 (which
 * cannot change clamp(r + azp) for such azp, and keeps r + azp inside int32); + azp; clamp. */
static inline __m256i f32_to_i8_8(__m256 y, __m256i vazp) {
  __m256 ok = _mm256_cmp_ps(y, y, _CMP_ORD_Q);
  y = _mm256_and_ps(y, ok); /* NaN -> +0 */
  y = _mm256_min_ps(_mm256_max_ps(y, _mm256_set1_ps(-0x1p25f)), _mm256_set1_ps(0x1p25f));
  __m256i i = _mm256_add_epi32(_mm256_cvtps_epi32(y), vazp); /* cvtps: RNE (MXCSR default) */
  return _mm256_min_epi32(_mm256_max_epi32(i, _mm256_set1_epi32(-128)), _mm256_set1_epi32(127));
}

/* 8 int32 lanes (each a byte value) -> 8 bytes at dst. */
static inline void store8_bytes(void *dst, __m256i v) {
  __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
  __m128i w = _mm_packs_epi32(lo, hi); /* values fit int16 (signed int8, or 0..255) */
  w = _mm_packus_epi16(_mm_and_si128(w, _mm_set1_epi16(0xff)), w);
  _mm_storel_epi64((__m128i *)dst, w);
}

static void quantize_row(const w8a8_quant_problem *p, int64_t m, float s, int32_t azp) {
  const void *x = (const char *)p->x + (size_t)(m * p->ldx) * w8a8_dtype_size(p->in_dtype);
  const int fp8 = p->out_dtype == W8A8_DTYPE_FP8_E4M3;
  uint8_t *q = (uint8_t *)p->q + m * p->ldq;
  const __m256 vs = _mm256_set1_ps(s);
  int64_t k = 0;
  if (fp8 || (azp >= -(1 << 24) && azp <= (1 << 24))) {
    const __m256i vazp = _mm256_set1_epi32(azp);
    for (; k + 8 <= p->K; k += 8) {
      __m256 y = _mm256_div_ps(load8(p->in_dtype, x, k), vs);
      store8_bytes(q + k, fp8 ? f32_to_fp8_8(y) : f32_to_i8_8(y, vazp));
    }
  }
  for (; k < p->K; k++) {
    float y = load1(p->in_dtype, x, k) / s;
    q[k] = fp8 ? w8a8_f32_to_fp8(y) : (uint8_t)w8a8_f32_to_int8_rne(y, azp);
  }
}

/* max |x| over a row, NaN ignored (as fmaxf): max_ps(v, acc) returns acc when v is NaN. */
static float row_amax(const w8a8_quant_problem *p, int64_t m) {
  const void *x = (const char *)p->x + (size_t)(m * p->ldx) * w8a8_dtype_size(p->in_dtype);
  const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 acc = _mm256_setzero_ps();
  int64_t k = 0;
  for (; k + 8 <= p->K; k += 8) acc = _mm256_max_ps(_mm256_and_ps(load8(p->in_dtype, x, k), absmask), acc);
  float t[8], r = 0.0f;
  _mm256_storeu_ps(t, acc);
  for (int i = 0; i < 8; i++) r = fmaxf(r, t[i]);
  for (; k < p->K; k++) r = fmaxf(r, fabsf(load1(p->in_dtype, x, k)));
  return r;
}

static void row_minmax(const w8a8_quant_problem *p, int64_t m, float *lo_out, float *hi_out) {
  const void *x = (const char *)p->x + (size_t)(m * p->ldx) * w8a8_dtype_size(p->in_dtype);
  __m256 lo = _mm256_set1_ps(INFINITY), hi = _mm256_set1_ps(-INFINITY);
  int64_t k = 0;
  for (; k + 8 <= p->K; k += 8) {
    __m256 v = load8(p->in_dtype, x, k);
    lo = _mm256_min_ps(v, lo);
    hi = _mm256_max_ps(v, hi);
  }
  float tl[8], th[8], l = INFINITY, h = -INFINITY;
  _mm256_storeu_ps(tl, lo);
  _mm256_storeu_ps(th, hi);
  for (int i = 0; i < 8; i++) {
    l = fminf(l, tl[i]);
    h = fmaxf(h, th[i]);
  }
  for (; k < p->K; k++) {
    float v = load1(p->in_dtype, x, k);
    l = fminf(l, v);
    h = fmaxf(h, v);
  }
  *lo_out = l;
  *hi_out = h;
}


w8a8_status w8a8_quantize_avx2(const w8a8_quant_problem *p, int nthreads) {
  const int64_t M = p->M;
  const float qmax = p->out_dtype == W8A8_DTYPE_FP8_E4M3 ? 448.0f : 127.0f;
  int T = nthreads < 1 ? 1 : nthreads;
  if ((double)M * (double)p->K < 65536.0) T = 1; /* not worth a fork/join */
  if (p->mode == W8A8_QUANT_STATIC_PER_TENSOR) {
    const float s = p->scale[0];
    const int32_t azp = p->azp ? p->azp[0] : 0;
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t m = 0; m < M; m++) quantize_row(p, m, s, azp);
  } else if (p->mode == W8A8_QUANT_DYNAMIC_PER_TENSOR) {
    float amax = 0.0f;
    /* max is exact and order-free: the same result as the reference's serial loop */
#pragma omp parallel for schedule(static) num_threads(T) reduction(max : amax)
    for (int64_t m = 0; m < M; m++) {
      float r = row_amax(p, m);
      if (r > amax) amax = r;
    }
    const float s = w8a8_dynamic_scale(amax, qmax);
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t m = 0; m < M; m++) quantize_row(p, m, s, 0);
    p->scale[0] = s;
  } else if (p->azp) { /* dynamic per-token, asymmetric int8 */
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t m = 0; m < M; m++) {
      float lo, hi;
      row_minmax(p, m, &lo, &hi);
      if (p->K == 0) lo = hi = 0.0f;
      float s;
      int32_t azp;
      w8a8_asym_params(lo, hi, &s, &azp);
      quantize_row(p, m, s, azp);
      p->scale[m] = s;
      p->azp[m] = azp;
    }
  } else { /* dynamic per-token, symmetric */
#pragma omp parallel for schedule(static) num_threads(T)
    for (int64_t m = 0; m < M; m++) {
      float amax = row_amax(p, m);
      if (p->scale_ub) amax = fminf(amax, *p->scale_ub);
      float s = w8a8_dynamic_scale(amax, qmax);
      quantize_row(p, m, s, 0);
      p->scale[m] = s;
    }
  }
  return W8A8_SUCCESS;
}
#pragma GCC pop_options
