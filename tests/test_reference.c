/* test_reference.c — the scalar reference (the ground truth of every other test) is
 * itself checked here, through the public API on a CPU handle forced to
 * W8A8_KERNEL_REFERENCE, against computations written independently in this file:
 *
 *   ref_*   scaled_mm and colsum against int64 / double arithmetic on fresh random data,
 *           every scale, bias, zero-point mode and output dtype, strided submatrices;
 *           int8 compared bit for bit, fp8 within a bound derived from the fp32 sum.
 *   quant_* the quantizers on hand-computed cases that follow the formulas of w8a8.h
 *           (vLLM / torch semantics), random data against an independent implementation
 *           of the same formulas, and dequantization round trips (within half a step).
 *
 * Rounding to bf16/fp16/fp8 here goes through double arithmetic (nearbyint of the
 * scaled significand), not through src/core/numeric.c. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- independent helpers ------------------------------------------------- */

static uint64_t rs = 0x2545f4914f6cdd1dull;
static uint64_t rnd64(void) {
  rs ^= rs >> 12;
  rs ^= rs << 25;
  rs ^= rs >> 27;
  return rs * 2685821657736338717ull;
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd64() % (uint64_t)(hi - lo + 1)); }
static float rnd_unit(void) { return (float)(rnd64() >> 40) * 0x1p-24f; } /* [0, 1) */

/* Decode from the fields of each format. */
static double dec_bits(uint32_t c, int bits, int ebits, int mbits, int bias, int fn) {
  int sign = (c >> (bits - 1)) & 1, emaxf = (1 << ebits) - 1;
  int e = (int)((c >> mbits) & (uint32_t)emaxf);
  uint32_t m = c & ((1u << mbits) - 1);
  double v;
  if (fn ? (e == emaxf && m == (1u << mbits) - 1) : (e == emaxf && m)) return NAN;
  if (!fn && e == emaxf) return sign ? -INFINITY : INFINITY;
  v = e == 0 ? ldexp(m, 1 - bias - mbits) : ldexp((double)((1u << mbits) + m), e - bias - mbits);
  return sign ? -v : v;
}
static double dec_bf16(uint16_t c) { return dec_bits(c, 16, 8, 7, 127, 0); }
static double dec_f16(uint16_t c) { return dec_bits(c, 16, 5, 10, 15, 0); }
static double dec_fp8(uint8_t c) { return dec_bits(c, 8, 4, 3, 7, 1); }

/* Nearest value with p significand bits and minimum normal exponent emin, ties to even
 * (nearbyint in the default rounding mode). */
static double round_fmt(double x, int p, int emin) {
  if (x == 0 || isnan(x) || isinf(x)) return x;
  int e;
  frexp(fabs(x), &e);
  int E = e - 1 < emin ? emin : e - 1;
  return ldexp(nearbyint(ldexp(x, p - 1 - E)), E - (p - 1));
}
static double to_bf16(double x) {
  double r = round_fmt(x, 8, -126);
  return fabs(r) > 0x1.fep127 ? copysign(INFINITY, r) : r;
}
static double to_f16(double x) {
  double r = round_fmt(x, 11, -14);
  return fabs(r) > 65504.0 ? copysign(INFINITY, r) : r;
}
static double to_fp8(double x) { /* the header: clamp to +-448, then round */
  if (isnan(x)) return x;
  if (x > 448) x = 448;
  if (x < -448) x = -448;
  return round_fmt(x, 4, -6);
}

/* Encode a value that is exactly representable (search the codes: 256 or 65536). */
static uint8_t enc_fp8(double v) {
  for (int c = 0; c < 256; c++)
    if (dec_fp8((uint8_t)c) == v && !signbit(dec_fp8((uint8_t)c)) == !signbit(v)) return (uint8_t)c;
  return 0x7f;
}

/* Encode an exactly representable finite fp16 value from its exponent and significand. */
static uint16_t enc_f16(double v) {
  uint16_t sign = signbit(v) ? 0x8000 : 0;
  double a = fabs(v);
  if (a < 0x1p-14) return (uint16_t)(sign | (uint16_t)(a * 0x1p24)); /* subnormal (or zero) */
  int e;
  frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
  return (uint16_t)(sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)(ldexp(a, 11 - e) - 1024));
}

/* Same value (NaN matches NaN; zeros must agree in sign). */
static int same(double a, double b) {
  if (isnan(a) || isnan(b)) return isnan(a) && isnan(b);
  return a == b && !signbit(a) == !signbit(b);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (p) memset(p, 0xA5, n); /* poison */
  return p;
}

static w8a8_handle *ref_handle(void) {
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CPU, 0) != W8A8_SUCCESS) return NULL;
  if (w8a8_set_kernel(h, W8A8_KERNEL_REFERENCE) != W8A8_SUCCESS) {
    w8a8_destroy(h);
    return NULL;
  }
  return h;
}

/* ---- scaled_mm ------------------------------------------------------------- */

typedef struct mm_case {
  w8a8_dtype in, out;
  int sa_tok, sb_ch, bias, azp; /* azp: 0 none, 1 adj only, 2 per-tensor, 3 per-token */
  int M, N, K;
  int extreme; /* 1: every operand -128 (int8) or +-448 (fp8) */
} mm_case;

/* Run one case through the API and compare every element (and the padding) with the
 * independent computation. Returns the number of wrong elements. */
static int run_mm(w8a8_handle *h, const mm_case *c) {
  const int M = c->M, N = c->N, K = c->K, lda = K + 3, ldb = K + 5, ldo = N + 2;
  const int is8 = c->in == W8A8_DTYPE_INT8;
  size_t es = w8a8_dtype_size(c->out);
  uint8_t *a = xmalloc((size_t)M * lda), *b = xmalloc((size_t)N * ldb);
  uint8_t *out = xmalloc((size_t)M * ldo * es), *bias = xmalloc((size_t)N * es);
  float *sa = xmalloc(sizeof(float) * M), *sb = xmalloc(sizeof(float) * N);
  int32_t *azp = xmalloc(sizeof(int32_t) * M), *adj = xmalloc(sizeof(int32_t) * N);
  int wrong = 0;
  if (!a || !b || !out || !bias || !sa || !sb || !azp || !adj) {
    CHECK(0, "out of memory");
    wrong = 1;
    goto done;
  }
  for (int m = 0; m < M; m++)
    for (int k = 0; k < K; k++) {
      uint8_t v;
      if (c->extreme)
        v = is8 ? 0x80 : (uint8_t)(rnd64() & 1 ? 0x7e : 0xfe);
      else if (is8)
        v = (uint8_t)rnd64();
      else
        do v = (uint8_t)rnd64(); while ((v & 0x7f) == 0x7f); /* no NaN operands */
      a[(size_t)m * lda + k] = v;
    }
  for (int n = 0; n < N; n++)
    for (int k = 0; k < K; k++) {
      uint8_t v;
      if (c->extreme)
        v = is8 ? 0x80 : 0x7e;
      else if (is8)
        v = (uint8_t)rnd64();
      else
        do v = (uint8_t)rnd64(); while ((v & 0x7f) == 0x7f);
      b[(size_t)n * ldb + k] = v;
    }
  int nsa = c->sa_tok ? M : 1, nsb = c->sb_ch ? N : 1;
  for (int i = 0; i < nsa; i++) sa[i] = ldexpf(1.0f + rnd_unit(), rnd_int(-12, -4));
  for (int i = 0; i < nsb; i++) sb[i] = ldexpf(1.0f + rnd_unit(), rnd_int(-10, -2));
  for (int n = 0; n < N; n++) {
    float bv = (rnd_unit() - 0.5f) * 64.0f;
    if (es == 4) memcpy(bias + 4 * n, &bv, 4);
    /* bf16/fp16 bias: a random representable value, stored by its code */
    if (c->out == W8A8_DTYPE_BF16) ((uint16_t *)bias)[n] = (uint16_t)(0x3c00 + rnd_int(0, 0x0a00)) ^ (rnd64() & 1 ? 0x8000 : 0);
    if (c->out == W8A8_DTYPE_FP16) ((uint16_t *)bias)[n] = (uint16_t)(0x2000 + rnd_int(0, 0x3000)) ^ (rnd64() & 1 ? 0x8000 : 0);
  }
  int nazp = c->azp == 3 ? M : 1;
  for (int i = 0; i < nazp; i++) azp[i] = rnd_int(-200, 200);
  for (int n = 0; n < N; n++) adj[n] = rnd_int(-20000, 20000);

  w8a8_matrix A = w8a8_matrix_make(c->in, W8A8_ROW_MAJOR, M, K, lda, a);
  w8a8_matrix B = w8a8_matrix_make(c->in, W8A8_COL_MAJOR, K, N, ldb, b);
  w8a8_matrix O = w8a8_matrix_make(c->out, W8A8_ROW_MAJOR, M, N, ldo, out);
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, nsa, sa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, nsb, sb);
  w8a8_vector BI = w8a8_vector_make(c->out, N, bias);
  w8a8_zero_point ZP;
  ZP.azp = w8a8_vector_make(W8A8_DTYPE_INT32, c->azp >= 2 ? nazp : 0, c->azp >= 2 ? azp : NULL);
  ZP.azp_adj = w8a8_vector_make(W8A8_DTYPE_INT32, N, adj);
  w8a8_status s = w8a8_scaled_mm(h, &A, &B, &SA, &SB, c->bias ? &BI : NULL, c->azp ? &ZP : NULL, &O);
  if (s != W8A8_SUCCESS) {
    CHECK(0, "scaled_mm: %s: %s", w8a8_status_name(s), w8a8_last_error());
    wrong = 1;
    goto done;
  }
  for (int m = 0; m < M; m++) {
    float fsa = sa[c->sa_tok ? m : 0];
    for (int n = 0; n < N; n++) {
      float fsb = sb[c->sb_ch ? n : 0];
      double bv = 0;
      if (c->bias) {
        if (es == 4) {
          float f;
          memcpy(&f, bias + 4 * n, 4);
          bv = f;
        } else {
          bv = c->out == W8A8_DTYPE_BF16 ? dec_bf16(((uint16_t *)bias)[n]) : dec_f16(((uint16_t *)bias)[n]);
        }
      }
      const uint8_t *po = out + ((size_t)m * ldo + n) * es;
      double got = es == 4 ? (double)*(const float *)po
                   : c->out == W8A8_DTYPE_BF16 ? dec_bf16(*(const uint16_t *)po) : dec_f16(*(const uint16_t *)po);
      int ok;
      double want = 0;
      if (is8) {
        int64_t acc = 0;
        for (int k = 0; k < K; k++)
          acc += (int64_t)(int8_t)a[(size_t)m * lda + k] * (int8_t)b[(size_t)n * ldb + k];
        if (c->azp == 1) acc -= adj[n];
        if (c->azp >= 2) acc -= (int64_t)azp[c->azp == 3 ? m : 0] * adj[n];
        if (acc > INT32_MAX || acc < INT32_MIN) {
          CHECK(0, "test data overflowed int32");
          wrong++;
          continue;
        }
        /* the header's epilogue, in fp32 */
        float t = fsa * (float)acc;
        float r = c->bias ? fmaf(fsb, t, (float)bv) : fsb * t;
        want = es == 4 ? (double)r : c->out == W8A8_DTYPE_BF16 ? to_bf16(r) : to_f16(r);
        ok = same(got, want);
      } else {
        double acc = 0, mag = 0;
        for (int k = 0; k < K; k++) {
          double p = dec_fp8(a[(size_t)m * lda + k]) * dec_fp8(b[(size_t)n * ldb + k]);
          acc += p;
          mag += fabs(p);
        }
        want = (double)fsb * ((double)fsa * acc) + bv;
        /* fp32 summation: each partial sum rounds by <= 2^-24 of the running |sum| <= mag */
        double tol = (double)fsa * fsb * mag * (K + 4) * 0x1p-24 + fabs(want) * 0x1p-22 + 1e-30;
        tol += fabs(want) * (c->out == W8A8_DTYPE_BF16 ? 0x1p-8 : c->out == W8A8_DTYPE_FP16 ? 0x1p-11 : 0);
        if (c->out == W8A8_DTYPE_FP16) tol += 0x1p-24;
        ok = fabs(got - want) <= tol;
      }
      if (!ok && wrong++ < 4)
        CHECK(0, "%s->%s sa%d sb%d bias%d azp%d %dx%dx%d%s: out[%d,%d] = %.9g, want %.9g",
              w8a8_dtype_name(c->in), w8a8_dtype_name(c->out), c->sa_tok, c->sb_ch, c->bias, c->azp, M, N, K,
              c->extreme ? " extreme" : "", m, n, got, want);
    }
    /* the padding between rows is not written */
    for (size_t i = (size_t)N * es; i < (size_t)ldo * es; i++)
      if (out[(size_t)m * ldo * es + i] != 0xA5 && wrong++ < 4) CHECK(0, "row padding written at row %d", m);
  }
done:
  free(a);
  free(b);
  free(out);
  free(bias);
  free(sa);
  free(sb);
  free(azp);
  free(adj);
  return wrong;
}

static void mm_all_modes(w8a8_dtype in) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no reference handle: %s", w8a8_last_error());
  const w8a8_dtype outs[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  int cases = 0, bad = 0;
  for (int o = 0; o < 3; o++)
    for (int sa = 0; sa < 2; sa++)
      for (int sb = 0; sb < 2; sb++)
        for (int bias = 0; bias < 2; bias++)
          for (int azp = 0; azp < (in == W8A8_DTYPE_INT8 ? 4 : 1); azp++) {
            mm_case c = {in, outs[o], sa, sb, bias, azp, rnd_int(1, 9), rnd_int(1, 11), rnd_int(1, 70), 0};
            bad += run_mm(h, &c) != 0;
            cases++;
          }
  CHECK(bad == 0, "%d of %d mode combinations wrong", bad, cases);
  w8a8_destroy(h);
}

W8A8_TEST(ref_gemm_int8_all_modes) { mm_all_modes(W8A8_DTYPE_INT8); }
W8A8_TEST(ref_gemm_fp8_all_modes) { mm_all_modes(W8A8_DTYPE_FP8_E4M3); }

/* Larger and extreme accumulators: int8 K = 131071 of (-128)*(-128) is 2^31 - 2^14, the
 * largest exact sum the header allows; fp8 +-448 products. */
W8A8_TEST(ref_gemm_extremes) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no reference handle");
  mm_case c1 = {W8A8_DTYPE_INT8, W8A8_DTYPE_FP32, 0, 0, 0, 0, 1, 2, 131071, 1};
  CHECK(run_mm(h, &c1) == 0, "int8 K=131071 extreme");
  mm_case c2 = {W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 1, 1, 1, 3, 17, 13, 1000, 0};
  CHECK(run_mm(h, &c2) == 0, "int8 17x13x1000");
  mm_case c3 = {W8A8_DTYPE_FP8_E4M3, W8A8_DTYPE_FP32, 1, 1, 1, 0, 3, 5, 4096, 1};
  CHECK(run_mm(h, &c3) == 0, "fp8 extreme K=4096");
  mm_case c4 = {W8A8_DTYPE_FP8_E4M3, W8A8_DTYPE_FP16, 1, 0, 0, 0, 16, 7, 100, 0};
  CHECK(run_mm(h, &c4) == 0, "fp8 16x7x100 fp16");
  w8a8_destroy(h);
}

W8A8_TEST(ref_colsum_random) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no reference handle");
  for (int t = 0; t < 20; t++) {
    int K = rnd_int(0, 300), N = rnd_int(1, 40), ld = K + rnd_int(0, 9);
    if (ld == 0) ld = 1;
    int8_t *b = xmalloc((size_t)N * ld);
    int32_t *s = xmalloc(sizeof(int32_t) * (N + 1));
    REQUIRE(b && s, "oom");
    for (int i = 0; i < N * ld; i++) b[i] = (int8_t)rnd64();
    if (t == 0)
      for (int i = 0; i < N * ld; i++) b[i] = -128;
    w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, ld, b);
    w8a8_vector S = w8a8_vector_make(W8A8_DTYPE_INT32, N, s);
    REQUIRE_OK(w8a8_colsum(h, &B, &S));
    for (int n = 0; n < N; n++) {
      int64_t want = 0;
      for (int k = 0; k < K; k++) want += b[(size_t)n * ld + k];
      CHECK(s[n] == want, "colsum K=%d n=%d: %d, want %lld", K, n, s[n], (long long)want);
    }
    CHECK(s[N] == (int32_t)0xA5A5A5A5, "colsum wrote past N");
    free(b);
    free(s);
  }
  w8a8_destroy(h);
}

/* ---- quantizers: hand-computed cases --------------------------------------- */

/* Quantize one fp32 matrix [M,K] (ld K) on the reference. */
static w8a8_status quant(w8a8_handle *h, const float *x, int M, int K, w8a8_dtype qd, void *q,
                         w8a8_quant_mode mode, float *scale, int32_t *azp, const float *ub) {
  w8a8_matrix X = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, K, K, (void *)x);
  w8a8_matrix Q = w8a8_matrix_make(qd, W8A8_ROW_MAJOR, M, K, K, q);
  int n = mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? M : 1;
  w8a8_vector S = w8a8_vector_make(W8A8_DTYPE_FP32, n, scale);
  w8a8_vector Z = w8a8_vector_make(W8A8_DTYPE_INT32, n, azp);
  return w8a8_quantize(h, &X, &Q, mode, &S, azp ? &Z : NULL, ub);
}

W8A8_TEST(quant_fp8_static_hand) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no handle");
  /* x / 0.5 = 2, -4, 2000 (saturates), NaN, 0.6 (-> 0.625), -inf (-> -448), 2e-9 (-> 0), 0 */
  const float x[8] = {1.0f, -2.0f, 1000.0f, NAN, 0.3f, -INFINITY, 1e-9f, 0.0f};
  const uint8_t want[8] = {0x40, 0xc8, 0x7e, 0x7f, 0x32, 0xfe, 0x00, 0x00};
  uint8_t q[8];
  float s = 0.5f;
  REQUIRE_OK(quant(h, x, 1, 8, W8A8_DTYPE_FP8_E4M3, q, W8A8_QUANT_STATIC_PER_TENSOR, &s, NULL, NULL));
  for (int i = 0; i < 8; i++) CHECK(q[i] == want[i], "q[%d] = 0x%02x, want 0x%02x", i, q[i], want[i]);
  CHECK(s == 0.5f, "a static scale is an input");
  /* saturation and NaN on both sides */
  const float y[8] = {500.0f, -1e30f, INFINITY, 464.0f, 447.9f, -NAN, 0x1p-10f, -0.0f};
  const uint8_t wy[8] = {0x7e, 0xfe, 0x7e, 0x7e, 0x7e, 0xff, 0x00, 0x80};
  s = 1.0f;
  REQUIRE_OK(quant(h, y, 2, 4, W8A8_DTYPE_FP8_E4M3, q, W8A8_QUANT_STATIC_PER_TENSOR, &s, NULL, NULL));
  for (int i = 0; i < 8; i++)
    CHECK(i == 5 ? (q[i] & 0x7f) == 0x7f : q[i] == wy[i], "saturation q[%d] = 0x%02x, want 0x%02x", i, q[i], wy[i]);
  w8a8_destroy(h);
}

W8A8_TEST(quant_int8_static_hand) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no handle");
  /* x / 0.5 = 2.5, -2.5, 1.5, 127, 127.5, -128.5, 200, NaN: half to even, clamp, NaN -> 0 */
  const float x[8] = {1.25f, -1.25f, 0.75f, 63.5f, 63.75f, -64.25f, 100.0f, NAN};
  const int8_t want[8] = {2, -2, 2, 127, 127, -128, 127, 0};
  int8_t q[8];
  float s = 0.5f;
  REQUIRE_OK(quant(h, x, 2, 4, W8A8_DTYPE_INT8, q, W8A8_QUANT_STATIC_PER_TENSOR, &s, NULL, NULL));
  for (int i = 0; i < 8; i++) CHECK(q[i] == want[i], "q[%d] = %d, want %d", i, q[i], want[i]);
  /* static zero point 10: rne(x/s) + 10, clamped; NaN -> azp */
  const float z[4] = {1.25f, -100.0f, 58.5f, NAN};
  const int8_t wz[4] = {12, -128, 127, 10};
  int32_t azp = 10;
  REQUIRE_OK(quant(h, z, 1, 4, W8A8_DTYPE_INT8, q, W8A8_QUANT_STATIC_PER_TENSOR, &s, &azp, NULL));
  for (int i = 0; i < 4; i++) CHECK(q[i] == wz[i], "azp q[%d] = %d, want %d", i, q[i], wz[i]);
  CHECK(azp == 10, "a static zero point is an input");
  w8a8_destroy(h);
}

W8A8_TEST(quant_dynamic_per_token_scale_ub) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no handle");
  const float x[8] = {0.5f, -3.0f, 2.0f, 0.25f, /* amax 3 clipped to 1.27 */
                      0.1f, 0.2f, -0.3f, 0.0f}; /* amax 0.3 < 1.27 */
  float ub = 1.27f, s[2];
  int8_t q[8];
  REQUIRE_OK(quant(h, x, 2, 4, W8A8_DTYPE_INT8, q, W8A8_QUANT_DYNAMIC_PER_TOKEN, s, NULL, &ub));
  CHECK(s[0] == 1.27f / 127.0f && s[1] == 0.3f / 127.0f, "scales %a %a", (double)s[0], (double)s[1]);
  const int8_t want[8] = {50, -128, 127, 25, 42, 85, -127, 0};
  for (int i = 0; i < 8; i++) CHECK(q[i] == want[i], "int8 q[%d] = %d, want %d", i, q[i], want[i]);
  uint8_t f[8];
  REQUIRE_OK(quant(h, x, 2, 4, W8A8_DTYPE_FP8_E4M3, f, W8A8_QUANT_DYNAMIC_PER_TOKEN, s, NULL, &ub));
  CHECK(s[0] == 1.27f / 448.0f && s[1] == 0.3f / 448.0f, "fp8 scales %a %a", (double)s[0], (double)s[1]);
  /* row 0: 0.5/s = 176.4 -> 176, -3/s -> -448, 2/s -> 448, 0.25/s = 88.2 -> 88 */
  CHECK(dec_fp8(f[0]) == 176 && dec_fp8(f[1]) == -448 && dec_fp8(f[2]) == 448 && dec_fp8(f[3]) == 88,
        "fp8 row 0: %g %g %g %g", dec_fp8(f[0]), dec_fp8(f[1]), dec_fp8(f[2]), dec_fp8(f[3]));
  /* row 1: -0.3/s = -448 exactly (amax row), 0 */
  CHECK(dec_fp8(f[6]) == -448 && f[7] == 0, "fp8 row 1: %g 0x%02x", dec_fp8(f[6]), f[7]);
  w8a8_destroy(h);
}

W8A8_TEST(quant_min_scale_on_zero_rows) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no handle");
  const float x[8] = {0, 0, 0, 0, -0.0f, 0, 0, 0};
  float s[2];
  int32_t azp[2];
  int8_t q[8];
  uint8_t f[8];
  REQUIRE_OK(quant(h, x, 2, 4, W8A8_DTYPE_INT8, q, W8A8_QUANT_DYNAMIC_PER_TOKEN, s, NULL, NULL));
  CHECK(s[0] == 1.0f / (127.0f * 512.0f) && s[1] == s[0], "int8 MIN_SCALE: %a", (double)s[0]);
  for (int i = 0; i < 8; i++) CHECK(q[i] == 0, "q[%d] = %d", i, q[i]);
  REQUIRE_OK(quant(h, x, 2, 4, W8A8_DTYPE_FP8_E4M3, f, W8A8_QUANT_DYNAMIC_PER_TOKEN, s, NULL, NULL));
  CHECK(s[0] == 1.0f / (448.0f * 512.0f), "fp8 MIN_SCALE: %a", (double)s[0]);
  REQUIRE_OK(quant(h, x, 2, 4, W8A8_DTYPE_FP8_E4M3, f, W8A8_QUANT_DYNAMIC_PER_TENSOR, s, NULL, NULL));
  CHECK(s[0] == 1.0f / (448.0f * 512.0f), "fp8 per-tensor MIN_SCALE: %a", (double)s[0]);
  /* asymmetric: lo = hi = 0, s = MIN_SCALE, azp = -128, every q = -128 (dequantizes to 0) */
  REQUIRE_OK(quant(h, x, 2, 4, W8A8_DTYPE_INT8, q, W8A8_QUANT_DYNAMIC_PER_TOKEN, s, azp, NULL));
  CHECK(s[0] == 1.0f / (127.0f * 512.0f) && azp[0] == -128 && azp[1] == -128, "asym zero row: s %a azp %d",
        (double)s[0], azp[0]);
  for (int i = 0; i < 8; i++) CHECK(q[i] == -128, "asym q[%d] = %d", i, q[i]);
  w8a8_destroy(h);
}

W8A8_TEST(quant_asymmetric_rows_hand) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no handle");
  /* all positive: lo 1, hi 4, s = 3/255, azp = rne(-128 - 85) = -213 (below int8: not clamped) */
  const float x[8] = {1, 2, 3, 4, -4, -3, -2, -1};
  float s[2];
  int32_t azp[2];
  int8_t q[8];
  REQUIRE_OK(quant(h, x, 2, 4, W8A8_DTYPE_INT8, q, W8A8_QUANT_DYNAMIC_PER_TOKEN, s, azp, NULL));
  CHECK(s[0] == 3.0f / 255.0f && s[1] == 3.0f / 255.0f, "scales %a %a", (double)s[0], (double)s[1]);
  CHECK(azp[0] == -213, "azp of an all-positive row = %d, want -213", azp[0]);
  CHECK(azp[1] == 212, "azp of an all-negative row = %d, want 212", azp[1]);
  const int8_t want[8] = {-128, -43, 42, 127, -128, -43, 42, 127};
  for (int i = 0; i < 8; i++) CHECK(q[i] == want[i], "q[%d] = %d, want %d", i, q[i], want[i]);
  w8a8_destroy(h);
}

W8A8_TEST(quant_dynamic_per_tensor_hand) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no handle");
  const float x[4] = {1.0f, -896.0f, 3.0f, 0.0f};
  float s = -1;
  uint8_t f[4];
  int8_t q[4];
  REQUIRE_OK(quant(h, x, 2, 2, W8A8_DTYPE_FP8_E4M3, f, W8A8_QUANT_DYNAMIC_PER_TENSOR, &s, NULL, NULL));
  CHECK(s == 2.0f, "scale %g, want 896/448 = 2", (double)s);
  CHECK(f[0] == 0x30 && f[1] == 0xfe && f[2] == 0x3c && f[3] == 0x00, "q = %02x %02x %02x %02x", f[0], f[1], f[2],
        f[3]);
  REQUIRE_OK(quant(h, x, 2, 2, W8A8_DTYPE_INT8, q, W8A8_QUANT_DYNAMIC_PER_TENSOR, &s, NULL, NULL));
  CHECK(s == 896.0f / 127.0f, "int8 scale %a", (double)s);
  CHECK(q[0] == 0 && q[1] == -127 && q[2] == 0 && q[3] == 0, "int8 q = %d %d %d %d", q[0], q[1], q[2], q[3]);
  w8a8_destroy(h);
}

/* The reference and the fast CPU path (W8A8_KERNEL_AUTO): the same call, bit for bit. */
static w8a8_handle *auto_handle(void) {
  w8a8_handle *h = NULL;
  return w8a8_create(&h, W8A8_DEVICE_CPU, 0) == W8A8_SUCCESS ? h : NULL;
}

/* Static int8 with zero points at the ends of int32: q = clamp(rne(x / s) + azp, -128, 127) with the sum taken
 * exactly, never rne(x / s) saturated to int32 first (which turned 2^31 + INT32_MIN into -1). */
W8A8_TEST(quant_int8_static_azp_int32_ends) {
  w8a8_handle *hs[2] = {ref_handle(), auto_handle()};
  REQUIRE(hs[0] && hs[1], "no handle");
  /* the case that found it: s = 1e-30, azp = INT32_MIN, x > 0 gives 127 */
  for (int hi = 0; hi < 2; hi++) {
    const float x[3] = {1.0f, 3.5f, 1e-20f};
    int8_t q[3];
    float s = 1e-30f;
    int32_t azp = INT32_MIN;
    REQUIRE_OK(quant(hs[hi], x, 1, 3, W8A8_DTYPE_INT8, q, W8A8_QUANT_STATIC_PER_TENSOR, &s, &azp, NULL));
    for (int i = 0; i < 3; i++) CHECK(q[i] == 127, "handle %d: q[%d] = %d, want 127", hi, i, q[i]);
  }
  static const float xs[] = {0x1p31f,  0x1p31f + 256, 0x1p31f - 128, -0x1p31f, -0x1p31f - 256, 0x1p32f, -0x1p32f,
                             1e30f,    -1e30f,        3e9f,          -3e9f,    0.0f,           2.5f,    -7.0f,
                             INFINITY, -INFINITY,     NAN,           0x1p31f + 512, -0x1p31f + 128};
  enum { K = sizeof xs / sizeof xs[0] };
  static const int32_t zs[] = {INT32_MIN, INT32_MIN + 5, INT32_MIN + 200, INT32_MAX, INT32_MAX - 5, INT32_MAX - 300,
                               1 << 30,   -(1 << 30)};
  int wrong = 0;
  for (size_t zi = 0; zi < sizeof zs / sizeof zs[0]; zi++) {
    int8_t q[2][K];
    for (int hi = 0; hi < 2; hi++) {
      float s = 1.0f;
      int32_t azp = zs[zi];
      REQUIRE_OK(quant(hs[hi], xs, 1, K, W8A8_DTYPE_INT8, q[hi], W8A8_QUANT_STATIC_PER_TENSOR, &s, &azp, NULL));
    }
    for (int k = 0; k < K; k++) {
      /* independent: x / 1 is x; rne in double; the sum in double is exact at these magnitudes */
      double v = isnan(xs[k]) ? 0.0 : isinf(xs[k]) ? xs[k] : nearbyint((double)xs[k]);
      v += zs[zi];
      int want = v > 127 ? 127 : v < -128 ? -128 : (int)v;
      for (int hi = 0; hi < 2; hi++)
        if (q[hi][k] != want && wrong++ < 8)
          CHECK(0, "%s: x %a azp %d: q = %d, want %d", hi ? "auto" : "reference", (double)xs[k], zs[zi], q[hi][k],
                want);
    }
  }
  CHECK(wrong == 0, "%d values wrong", wrong);
  w8a8_destroy(hs[0]);
  w8a8_destroy(hs[1]);
}

/* Dynamic asymmetric int8 on rows whose range is tiny against their magnitude. A constant row c != 0 gets s = |c|
 * and azp = -128 - sign(c): every q is -128 and s * (q - azp) is c exactly (it used to get MIN_SCALE and, past
 * |c| ~ 33026, an azp saturated to int32 that dequantized to about +-33026). Rows of two neighbouring floats get
 * s >= |lo| * 2^-30, so that azp fits in int32, and dequantize within one ulp. */
W8A8_TEST(quant_asym_constant_rows_round_trip) {
  w8a8_handle *hs[2] = {ref_handle(), auto_handle()};
  REQUIRE(hs[0] && hs[1], "no handle");
  const float min_scale = 1.0f / (127.0f * 512.0f);
  static const float cs[] = {40000.0f, -40000.0f, 1e30f, -1e30f,   0.3f,     -7.0f,      1e-40f,
                             33027.0f, 1.0f,      0.0f,  FLT_MAX,  -FLT_MAX, -1.17e-38f, 16514.0f};
  enum { R = sizeof cs / sizeof cs[0], K = 19 };
  float x[R * K];
  for (int r = 0; r < R; r++)
    for (int k = 0; k < K; k++) x[r * K + k] = cs[r];
  int8_t q[2][R * K];
  float s[2][R];
  int32_t z[2][R];
  for (int hi = 0; hi < 2; hi++)
    REQUIRE_OK(quant(hs[hi], x, R, K, W8A8_DTYPE_INT8, q[hi], W8A8_QUANT_DYNAMIC_PER_TOKEN, s[hi], z[hi], NULL));
  CHECK(memcmp(q[0], q[1], sizeof q[0]) == 0 && memcmp(s[0], s[1], sizeof s[0]) == 0 &&
            memcmp(z[0], z[1], sizeof z[0]) == 0,
        "the fast path differs from the reference on constant rows");
  for (int r = 0; r < R; r++) {
    const float c = cs[r];
    const float want_s = c == 0.0f ? min_scale : fabsf(c);
    const int32_t want_z = c > 0 ? -129 : c < 0 ? -127 : -128;
    CHECK(s[0][r] == want_s && z[0][r] == want_z, "row %g: s %a azp %d, want %a %d", (double)c, (double)s[0][r],
          z[0][r], (double)want_s, want_z);
    for (int k = 0; k < K; k++) {
      const int qi = q[0][r * K + k];
      const float deq = (float)((int64_t)qi - z[0][r]) * s[0][r];
      if (k == 0 || qi != -128 || deq != c)
        CHECK(qi == -128 && deq == c, "row %g: q[%d] = %d dequantizes to %a, want -128 and %a", (double)c, k, qi,
              (double)deq, (double)c);
    }
  }
  /* two neighbouring floats, alternating */
  static const float ns[] = {40000.0f, -40000.0f, 1e30f, -1e30f, 33027.0f, 16514.0f, -2e9f, 7e37f};
  enum { RN = sizeof ns / sizeof ns[0] };
  float y[RN * K];
  for (int r = 0; r < RN; r++)
    for (int k = 0; k < K; k++) y[r * K + k] = k % 2 ? nextafterf(ns[r], INFINITY) : ns[r];
  for (int hi = 0; hi < 2; hi++)
    REQUIRE_OK(quant(hs[hi], y, RN, K, W8A8_DTYPE_INT8, q[hi], W8A8_QUANT_DYNAMIC_PER_TOKEN, s[hi], z[hi], NULL));
  CHECK(memcmp(q[0], q[1], RN * K) == 0 && memcmp(s[0], s[1], 4 * RN) == 0 && memcmp(z[0], z[1], 4 * RN) == 0,
        "the fast path differs from the reference on near-constant rows");
  for (int r = 0; r < RN; r++) {
    const float lo = ns[r];
    CHECK(s[0][r] >= fabsf(lo) * 0x1p-30f && z[0][r] > INT32_MIN && z[0][r] < INT32_MAX,
          "row %g: s %a azp %d (|lo / s| must stay <= 2^30)", (double)lo, (double)s[0][r], z[0][r]);
    for (int k = 0; k < 2; k++) {
      const float xv = y[r * K + k], ulp = nextafterf(fabsf(xv), INFINITY) - fabsf(xv);
      const float deq = (float)((int64_t)q[0][r * K + k] - z[0][r]) * s[0][r];
      CHECK(fabsf(deq - xv) <= ulp, "row %g: x %a (q %d, azp %d, s %a) dequantizes to %a, more than an ulp off",
            (double)lo, (double)xv, q[0][r * K + k], z[0][r], (double)s[0][r], (double)deq);
    }
  }
  w8a8_destroy(hs[0]);
  w8a8_destroy(hs[1]);
}

/* bf16 and fp16 inputs are converted exactly before the division. */
W8A8_TEST(quant_half_inputs_hand) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no handle");
  const uint16_t xb[3] = {0x3f80, 0xc000, 0x4049}; /* bf16 1, -2, 3.140625 */
  const uint16_t xh[3] = {0x3c00, 0xc000, 0x4248}; /* fp16 1, -2, 3.140625 */
  for (int t = 0; t < 2; t++) {
    int8_t q[3];
    float s = 0.25f;
    w8a8_matrix X = w8a8_matrix_make(t ? W8A8_DTYPE_FP16 : W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, 1, 3, 3,
                                     (void *)(t ? xh : xb));
    w8a8_matrix Q = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 1, 3, 3, q);
    w8a8_vector S = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &s);
    REQUIRE_OK(w8a8_quantize(h, &X, &Q, W8A8_QUANT_STATIC_PER_TENSOR, &S, NULL, NULL));
    CHECK(q[0] == 4 && q[1] == -8 && q[2] == 13, "%s: %d %d %d", t ? "fp16" : "bf16", q[0], q[1], q[2]);
  }
  w8a8_destroy(h);
}

/* ---- quantizers: random data against an independent implementation ------- */

static int rne_int(float y) { return (int)nearbyint((double)y); } /* |y| kept small by the callers' clamps */

/* Expected q (as int for int8, code for fp8), scales and zero points of one call. */
static int check_quant_random(w8a8_handle *h, w8a8_dtype xd, w8a8_dtype qd, w8a8_quant_mode mode, int asym,
                              int use_ub, int M, int K) {
  const int ldx = K + 2, ldq = K + 5, fp8 = qd == W8A8_DTYPE_FP8_E4M3;
  const float qmax = fp8 ? 448.0f : 127.0f, min_scale = 1.0f / (qmax * 512.0f);
  size_t xes = w8a8_dtype_size(xd);
  uint8_t *xbuf = xmalloc((size_t)M * ldx * xes), *q = xmalloc((size_t)M * ldq);
  float *xv = xmalloc(sizeof(float) * M * K); /* x as fp32 values */
  float *scale = xmalloc(sizeof(float) * (M + 1));
  int32_t *azp = xmalloc(sizeof(int32_t) * (M + 1));
  int wrong = 0;
  if (!xbuf || !q || !xv || !scale || !azp) return 1;
  for (int m = 0; m < M; m++) {
    float rowmag = ldexpf(1.0f, rnd_int(-6, 8)), shift = (m % 3 == 0) ? rowmag * 2 : 0; /* some one-signed rows */
    for (int k = 0; k < K; k++) {
      float v = (rnd_unit() * 2 - 1) * rowmag + shift;
      if (xd == W8A8_DTYPE_BF16 || xd == W8A8_DTYPE_FP16) {
        /* store the nearest half value (own rounding), and use exactly that value */
        double r = xd == W8A8_DTYPE_BF16 ? to_bf16(v) : to_f16(v);
        uint16_t code = 0;
        /* encode: bf16 = top half of the fp32 bits; fp16 by search over exponent/mantissa */
        if (xd == W8A8_DTYPE_BF16) {
          float fr = (float)r;
          uint32_t u;
          memcpy(&u, &fr, 4);
          code = (uint16_t)(u >> 16);
        } else {
          code = enc_f16(r);
        }
        ((uint16_t *)xbuf)[(size_t)m * ldx + k] = code;
        v = (float)r;
      } else {
        ((float *)xbuf)[(size_t)m * ldx + k] = v;
      }
      xv[(size_t)m * K + k] = v;
    }
  }
  float ub = 0;
  if (use_ub) ub = ldexpf(1.0f, rnd_int(-4, 6));
  int nscale = mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? M : 1;
  float static_s = ldexpf(1.0f + rnd_unit(), rnd_int(-8, 0));
  int32_t static_azp = rnd_int(-50, 50);
  if (mode == W8A8_QUANT_STATIC_PER_TENSOR) {
    scale[0] = static_s;
    azp[0] = static_azp;
  }
  w8a8_matrix X = w8a8_matrix_make(xd, W8A8_ROW_MAJOR, M, K, ldx, xbuf);
  w8a8_matrix Q = w8a8_matrix_make(qd, W8A8_ROW_MAJOR, M, K, ldq, q);
  w8a8_vector S = w8a8_vector_make(W8A8_DTYPE_FP32, nscale, scale);
  w8a8_vector Z = w8a8_vector_make(W8A8_DTYPE_INT32, nscale, azp);
  w8a8_status st = w8a8_quantize(h, &X, &Q, mode, &S, asym ? &Z : NULL, use_ub ? &ub : NULL);
  if (st != W8A8_SUCCESS) {
    CHECK(0, "quantize: %s", w8a8_last_error());
    return 1;
  }
  /* the header's formulas, step by step in fp32 */
  float tensor_amax = 0;
  for (int i = 0; i < M * K; i++) tensor_amax = fmaxf(tensor_amax, fabsf(xv[i]));
  long half_step_misses = 0;
  for (int m = 0; m < M; m++) {
    float s;
    int32_t z = 0;
    const float *row = xv + (size_t)m * K;
    if (mode == W8A8_QUANT_STATIC_PER_TENSOR) {
      s = static_s;
      z = asym ? static_azp : 0;
    } else if (mode == W8A8_QUANT_DYNAMIC_PER_TENSOR) {
      s = tensor_amax / qmax;
      if (!(s > min_scale)) s = min_scale;
    } else if (asym) {
      float lo = row[0], hi = row[0];
      for (int k = 1; k < K; k++) {
        lo = fminf(lo, row[k]);
        hi = fmaxf(hi, row[k]);
      }
      if (lo == hi && lo != 0.0f && isfinite(lo)) {
        s = fabsf(lo); /* a constant row */
      } else {
        s = (hi - lo) / 255.0f;
        if (!(s > min_scale)) s = min_scale;
        if (fabsf(lo) * 0x1p-30f > s) s = fabsf(lo) * 0x1p-30f;
      }
      z = rne_int(-128.0f - lo / s);
    } else {
      float amax = 0;
      for (int k = 0; k < K; k++) amax = fmaxf(amax, fabsf(row[k]));
      if (use_ub) amax = fminf(amax, ub);
      s = amax / qmax;
      if (!(s > min_scale)) s = min_scale;
    }
    if (mode != W8A8_QUANT_STATIC_PER_TENSOR && (m == 0 || mode == W8A8_QUANT_DYNAMIC_PER_TOKEN)) {
      int i = mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? m : 0;
      if (scale[i] != s && wrong++ < 4) CHECK(0, "scale[%d] = %a, want %a", i, (double)scale[i], (double)s);
      if (asym && azp[i] != z && wrong++ < 4) CHECK(0, "azp[%d] = %d, want %d", i, azp[i], z);
    }
    for (int k = 0; k < K; k++) {
      float y = row[k] / s;
      uint8_t got = q[(size_t)m * ldq + k];
      if (fp8) {
        double want = to_fp8(y);
        if (got != enc_fp8(want) && wrong++ < 4)
          CHECK(0, "fp8 q[%d,%d] = 0x%02x, want %g (x %g / s %g)", m, k, got, want, (double)row[k], (double)s);
        /* round trip: |x/s - q| <= half an fp8 step at |x/s| (when not saturated) */
        double ay = fabs((double)y);
        if (ay <= 448) {
          int e;
          frexp(ay, &e);
          double ulp = ldexp(1.0, (e - 1 < -6 ? -6 : e - 1) - 3);
          if (fabs(ay - fabs(dec_fp8(got))) > 0.5 * ulp) half_step_misses++;
        }
      } else {
        double yc = y > 1e6f ? 1e6 : y < -1e6f ? -1e6 : y;
        int want = (int)nearbyint(yc) + z;
        want = want > 127 ? 127 : want < -128 ? -128 : want;
        if ((int8_t)got != want && wrong++ < 4)
          CHECK(0, "int8 q[%d,%d] = %d, want %d (x %g / s %g, azp %d)", m, k, (int8_t)got, want, (double)row[k],
                (double)s, z);
        /* round trip: s*(q - azp) within half a step of x, unless clamped */
        int qi = (int8_t)got;
        if (qi > -128 && qi < 127 && fabs((double)s * (qi - z) - row[k]) > 0.5 * s + fabs(y) * s * 0x1p-22)
          half_step_misses++;
        if (mode != W8A8_QUANT_STATIC_PER_TENSOR && !use_ub && (qi == 127 || qi == -128) &&
            fabs((double)s * (qi - z) - row[k]) > 1.5 * s)
          half_step_misses++; /* dynamic ranges cover the row: a clamp costs at most one step */
      }
    }
    for (int k = K; k < ldq; k++)
      if (q[(size_t)m * ldq + k] != 0xA5 && wrong++ < 4) CHECK(0, "q row padding written");
  }
  if (half_step_misses && wrong++ < 4) CHECK(0, "%ld elements dequantize further than half a step", half_step_misses);
  free(xbuf);
  free(q);
  free(xv);
  free(scale);
  free(azp);
  return wrong;
}

W8A8_TEST(quant_random_all_modes_vs_formulas) {
  w8a8_handle *h = ref_handle();
  REQUIRE(h, "no handle");
  const w8a8_dtype xds[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  int bad = 0, n = 0;
  for (int xi = 0; xi < 3; xi++)
    for (int fp8 = 0; fp8 < 2; fp8++)
      for (int mode = 0; mode < 3; mode++)
        for (int asym = 0; asym < 2; asym++)
          for (int ub = 0; ub < 2; ub++) {
            if (asym && (fp8 || mode == W8A8_QUANT_DYNAMIC_PER_TENSOR)) continue; /* not supported */
            if (ub && (mode != W8A8_QUANT_DYNAMIC_PER_TOKEN || asym)) continue;
            int M = rnd_int(1, 9), K = rnd_int(1, 150);
            bad += check_quant_random(h, xds[xi], fp8 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8,
                                      (w8a8_quant_mode)mode, asym, ub, M, K) != 0;
            n++;
          }
  CHECK(bad == 0, "%d of %d quantizer configurations wrong", bad, n);
  w8a8_destroy(h);
}
