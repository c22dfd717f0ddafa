/* test_act.c — w8a8_silu_mul_quantize (the fused SiLU-and-mul quantizer).
 *
 *   act_expf_*:        w8a8's expf against libm's exp in double rounded to fp32 (a near-correctly
 *                      rounded oracle) over a sweep of every 97th float of the range that matters,
 *                      plus its special values.
 *   act_silu_*:        the y formula against an independent double evaluation, and its NaN rule.
 *   act_cpu_*:         the fused call against the two-step definition: y computed element by
 *                      element, then w8a8_quantize (reference kernel) on the fp32 y: every byte of
 *                      q, every scale and zero point equal, padding untouched, 1 and 2 threads.
 *   act_bad_*:         every validation failure: the status, a message naming the call and the
 *                      argument, and nothing written.
 *   act_cuda_*:        the CUDA kernels against the CPU path, bit for bit (int8 and fp8: the expf
 *                      is the same sequence of IEEE operations on both), a CUDA-graph capture, and
 *                      device-pointer checks. SKIP without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "harness.h"

static uint64_t rng = 0x243f6a8885a308d3ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f; }
static void reseed(void) {
  static uint64_t calls;
  rng ^= 0x2545f4914f6cdd1dull * ++calls; /* fresh data per case */
  if (!rng) rng = 1;
}
static uint32_t fbits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static float bitsf(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- the expf -------------------------------------------------------------------------- */

W8A8_TEST(act_expf_sweep) {
  /* Every 97th float in [-110, 100] (both signs): about 23 million values. The oracle
   * (float)exp((double)x) is correctly rounded except for double-rounding cases; ours is
   * within 0.5 + 2^-20 ulp, so the two may differ by one ulp only where the exact value is
   * within about 2^-20 ulp of a rounding midpoint: a handful of values at most. */
  long long n = 0, off1 = 0, worse = 0;
  for (int sign = 0; sign < 2; sign++)
    for (uint32_t u = 0; u <= 0x42dc0000u; u += 97) { /* 0x42dc0000 = 110.0f */
      const float x = bitsf(u | (sign ? 0x80000000u : 0u));
      if (x > 100.0f) continue;
      const float got = w8a8_act_expf(x), want = (float)exp((double)x);
      n++;
      if (fbits(got) == fbits(want)) continue;
      const int64_t d = (int64_t)fbits(got) - (int64_t)fbits(want); /* both >= 0: bits order like values */
      if (d == 1 || d == -1) {
        off1++;
      } else if (worse++ < 5) {
        CHECK(0, "expf(%a) = %a; libm's exp rounded to fp32 gives %a", (double)x, (double)got, (double)want);
      }
    }
  printf("    %lld values, %lld one ulp off libm's correctly rounded exp, %lld worse\n", n, off1, worse);
  CHECK(worse == 0, "%lld values more than one ulp off", worse);
  CHECK(off1 * 100000 <= n, "%lld of %lld values one ulp off: expected almost none", off1, n);
}

W8A8_TEST(act_expf_specials) {
  CHECK(w8a8_act_expf(0.0f) == 1.0f && w8a8_act_expf(-0.0f) == 1.0f, "exp(0)");
  CHECK(w8a8_act_expf(1.0f) == (float)exp(1.0), "exp(1) = %a", (double)w8a8_act_expf(1.0f));
  CHECK(isinf(w8a8_act_expf(INFINITY)) && w8a8_act_expf(INFINITY) > 0, "exp(inf)");
  CHECK(fbits(w8a8_act_expf(-INFINITY)) == 0, "exp(-inf) = %a", (double)w8a8_act_expf(-INFINITY));
  CHECK(isnan(w8a8_act_expf(NAN)), "exp(NaN)");
  CHECK(isinf(w8a8_act_expf(88.8f)) && w8a8_act_expf(88.7f) == (float)exp((double)88.7f), "overflow edge");
  CHECK(w8a8_act_expf(-100.0f) == (float)exp(-100.0) && w8a8_act_expf(-100.0f) > 0, "subnormal result");
  CHECK(fbits(w8a8_act_expf(-104.0f)) == 0 && fbits(w8a8_act_expf(-1e30f)) == 0, "underflow to +0");
}

/* ---- the y formula ---------------------------------------------------------------------- */

W8A8_TEST(act_silu_formula) {
  reseed();
  int bad = 0;
  for (int i = 0; i < 200000; i++) {
    const float g = frand(-30.0f, 30.0f), u = frand(-8.0f, 8.0f);
    const float y = w8a8_silu_mul(g, u);
    const double want = (double)g / (1.0 + exp(-(double)g)) * (double)u;
    /* fp32: expf (0.5+ ulp), 1 + e, the division, the product: a few ulp of y at most */
    const double tol = 4.0 * 0x1p-24 * fabs(want) + 0x1p-149;
    if (fabs((double)y - want) > tol && bad++ < 5)
      CHECK(0, "silu(%a) * %a = %a; double gives %a", (double)g, (double)u, (double)y, want);
  }
  CHECK(bad == 0, "%d values off", bad);
  /* the formula's edge cases (w8a8.h) */
  CHECK(fbits(w8a8_silu_mul(-INFINITY, 1.0f)) == 0x7fc00000u, "silu(-inf): -inf / inf is NaN, canonical");
  CHECK(fbits(w8a8_silu_mul(NAN, 2.0f)) == 0x7fc00000u, "NaN gate");
  CHECK(fbits(w8a8_silu_mul(bitsf(0xffc00001u), 2.0f)) == 0x7fc00000u, "negative NaN gate: canonical");
  CHECK(fbits(w8a8_silu_mul(1.0f, -NAN)) == 0x7fc00000u, "NaN up");
  CHECK(fbits(w8a8_silu_mul(INFINITY, 0.0f)) == 0x7fc00000u, "inf * 0");
  CHECK(w8a8_silu_mul(INFINITY, 2.0f) == INFINITY, "silu(inf) = inf");
  CHECK(fbits(w8a8_silu_mul(-200.0f, 3.0f)) == 0x80000000u, "silu(-200) = -0: -0 * 3 = -0");
  CHECK(fbits(w8a8_silu_mul(-0.0f, 3.0f)) == 0x80000000u, "silu(-0) = -0");
  CHECK(w8a8_silu_mul(0.0f, 5.0f) == 0.0f, "silu(0)");
}

/* ---- the fused call on the CPU against the two-step definition --------------------------- */

static void put(w8a8_dtype t, void *base, int64_t i, float f) {
  if (t == W8A8_DTYPE_FP32) ((float *)base)[i] = f;
  else if (t == W8A8_DTYPE_BF16) ((uint16_t *)base)[i] = w8a8_f32_to_bf16(f);
  else ((uint16_t *)base)[i] = w8a8_f32_to_f16(f);
}
static float get(w8a8_dtype t, const void *base, int64_t i) {
  if (t == W8A8_DTYPE_FP32) return ((const float *)base)[i];
  if (t == W8A8_DTYPE_BF16) return w8a8_bf16_to_f32(((const uint16_t *)base)[i]);
  return w8a8_f16_to_f32(((const uint16_t *)base)[i]);
}

/* Gate and up values of real MLPs' range, with the occasional special: NaN, infinities, huge
 * values, a gate deep in the negative tail (silu = -0), and a row scaled up so that per-token
 * scales differ a lot. Padding gets values too (they must not matter). */
static void fill_x(w8a8_dtype t, void *x, int64_t M, int64_t ld, int specials) {
  for (int64_t m = 0; m < M; m++) {
    const float row_scale = (m % 7 == 3) ? 64.0f : 1.0f;
    for (int64_t i = 0; i < ld; i++) {
      float f = frand(-6.0f, 6.0f) * row_scale;
      const uint32_t k = rnd() % 2000;
      if (specials && k == 0) f = NAN;
      else if (specials && k == 1) f = (rnd() & 1) ? INFINITY : -INFINITY;
      else if (specials && k == 2) f = (rnd() & 1) ? 6e4f : -6e4f;
      else if (specials && k == 3) f = -120.0f;
      else if (k < 40) f = 0.0f;
      put(t, x, m * ld + i, f);
    }
  }
}

typedef struct act_case {
  int64_t M, I, padx, padq;
  w8a8_dtype in, out;
  w8a8_quant_mode mode;
  int azp, ub, specials;
} act_case;

static w8a8_handle *cpu_handle(w8a8_kernel k, int threads) {
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CPU, 0) != W8A8_SUCCESS) return NULL;
  w8a8_set_kernel(h, k);
  w8a8_set_num_threads(h, threads);
  return h;
}

/* Outputs of one call, poisoned before it. */
typedef struct act_out {
  uint8_t *q;
  float *s;
  int32_t *z;
} act_out;

static int out_alloc(act_out *o, const act_case *c, int64_t ldq, int64_t ns) {
  o->q = malloc((size_t)(c->M * ldq) + 1);
  o->s = malloc(4 * (size_t)ns + 4);
  o->z = malloc(4 * (size_t)ns + 4);
  return o->q && o->s && o->z;
}
static void out_free(act_out *o) { free(o->q), free(o->s), free(o->z); }

/* The two-step definition on the CPU reference: y (fp32, [M, I]) then w8a8_quantize. */
static int two_step(const act_case *c, const void *x, int64_t ldx, int64_t ldq, int64_t ns, float static_s,
                    float ub, act_out *o) {
  float *y = malloc(4 * (size_t)(c->M * c->I) + 4);
  w8a8_handle *r = cpu_handle(W8A8_KERNEL_REFERENCE, 1);
  int ok = y && r;
  for (int64_t m = 0; ok && m < c->M; m++)
    for (int64_t k = 0; k < c->I; k++)
      y[m * c->I + k] = w8a8_silu_mul(get(c->in, x, m * ldx + k), get(c->in, x, m * ldx + c->I + k));
  if (ok) {
    for (int64_t i = 0; i < ns; i++) o->s[i] = c->mode == W8A8_QUANT_STATIC_PER_TENSOR ? static_s : -7.0f;
    for (int64_t i = 0; i < ns; i++) o->z[i] = c->mode == W8A8_QUANT_STATIC_PER_TENSOR ? 13 : 555;
    w8a8_matrix ym = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, c->M, c->I, c->I, y);
    w8a8_matrix qm = w8a8_matrix_make(c->out, W8A8_ROW_MAJOR, c->M, c->I, ldq, o->q);
    w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, ns, o->s), zv = w8a8_vector_make(W8A8_DTYPE_INT32, ns, o->z);
    w8a8_status s = w8a8_quantize(r, &ym, &qm, c->mode, &sv, c->azp ? &zv : NULL, c->ub ? &ub : NULL);
    if (s != W8A8_SUCCESS) {
      CHECK(0, "w8a8_quantize -> %s: %s", w8a8_status_name(s), w8a8_last_error());
      ok = 0;
    }
  }
  free(y);
  w8a8_destroy(r);
  return ok;
}

static int same_outputs(const char *what, const act_case *c, const act_out *got, const act_out *want, int64_t ldq,
                        int64_t ns) {
  size_t bytes = (size_t)(c->M * ldq), d = 0;
  while (d < bytes && got->q[d] == want->q[d]) d++;
  if (d < bytes) {
    CHECK(0, "%s: q differs at byte %zu (row %lld col %lld): 0x%02x, expected 0x%02x", what, d, (long long)(d / ldq),
          (long long)(d % ldq), got->q[d], want->q[d]);
    return 0;
  }
  if (memcmp(got->s, want->s, 4 * (size_t)ns) != 0) {
    int64_t i = 0;
    while (fbits(got->s[i]) == fbits(want->s[i])) i++;
    CHECK(0, "%s: scale[%lld] is %a, expected %a", what, (long long)i, (double)got->s[i], (double)want->s[i]);
    return 0;
  }
  if (c->azp && memcmp(got->z, want->z, 4 * (size_t)ns) != 0) {
    CHECK(0, "%s: zero points differ", what);
    return 0;
  }
  return 1;
}

static int run_cpu_case(const act_case *c) {
  reseed();
  const int64_t ldx = 2 * c->I + c->padx, ldq = c->I + c->padq;
  const int64_t ns = c->mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? c->M : 1;
  const size_t es = w8a8_dtype_size(c->in);
  void *x = malloc(es * (size_t)(c->M * ldx) + 4);
  act_out want = {0}, got = {0};
  if (!x || !out_alloc(&want, c, ldq, ns) || !out_alloc(&got, c, ldq, ns)) {
    CHECK(0, "alloc");
    return 1;
  }
  fill_x(c->in, x, c->M, ldx, c->specials);
  const float static_s = frand(0.01f, 0.5f), ub = frand(0.5f, 4.0f);
  for (size_t i = 0; i < (size_t)(c->M * ldq); i++) want.q[i] = (uint8_t)rnd(); /* padding: poison, kept */
  memcpy(got.q, want.q, (size_t)(c->M * ldq));
  int bad = !two_step(c, x, ldx, ldq, ns, static_s, ub, &want);
  /* the fused call: reference kernel 1 thread, AUTO with 2 threads (OpenMP over rows) */
  for (int v = 0; v < 2 && !bad; v++) {
    w8a8_handle *h = cpu_handle(v ? W8A8_KERNEL_AUTO : W8A8_KERNEL_REFERENCE, v ? 2 : 1);
    for (int64_t m = 0; m < c->M; m++)
      for (int64_t k = 0; k < c->I; k++) got.q[m * ldq + k] = (uint8_t)rnd(); /* poison q */
    for (int64_t i = 0; i < ns; i++) got.s[i] = c->mode == W8A8_QUANT_STATIC_PER_TENSOR ? static_s : -7.0f;
    for (int64_t i = 0; i < ns; i++) got.z[i] = c->mode == W8A8_QUANT_STATIC_PER_TENSOR ? 13 : 555;
    w8a8_matrix xm = w8a8_matrix_make(c->in, W8A8_ROW_MAJOR, c->M, 2 * c->I, ldx, x);
    w8a8_matrix qm = w8a8_matrix_make(c->out, W8A8_ROW_MAJOR, c->M, c->I, ldq, got.q);
    w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, ns, got.s), zv = w8a8_vector_make(W8A8_DTYPE_INT32, ns, got.z);
    w8a8_status s = w8a8_silu_mul_quantize(h, &xm, &qm, c->mode, &sv, c->azp ? &zv : NULL, c->ub ? &ub : NULL);
    w8a8_destroy(h);
    if (s != W8A8_SUCCESS) {
      CHECK(0, "w8a8_silu_mul_quantize -> %s: %s", w8a8_status_name(s), w8a8_last_error());
      bad = 1;
    } else if (!same_outputs(v ? "cpu 2 threads" : "cpu reference", c, &got, &want, ldq, ns)) {
      bad = 1;
    }
  }
  if (bad)
    CHECK(0, "case M=%lld I=%lld padx %lld padq %lld in %s out %s mode %d azp %d ub %d specials %d",
          (long long)c->M, (long long)c->I, (long long)c->padx, (long long)c->padq, w8a8_dtype_name(c->in),
          w8a8_dtype_name(c->out), (int)c->mode, c->azp, c->ub, c->specials);
  free(x);
  out_free(&want);
  out_free(&got);
  return bad;
}

static const w8a8_dtype in_types[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};

/* Every dtype, mode, zero point and bound combination w8a8_quantize takes, on `shapes`. */
static void all_modes(int (*run)(const act_case *), const int64_t (*shapes)[4], int nshapes, int fp8_ok,
                      const char *what) {
  int n = 0, failed = 0;
  for (int i = 0; i < 3; i++)
    for (int o = 0; o < 2; o++) {
      const w8a8_dtype out = o ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
      if (o && !fp8_ok) continue;
      for (int mode = 0; mode < 3; mode++)
        for (int az = 0; az < 2; az++)
          for (int ub = 0; ub < 2; ub++) {
            if (az && (out != W8A8_DTYPE_INT8 || mode == W8A8_QUANT_DYNAMIC_PER_TENSOR)) continue;
            if (ub && (mode != W8A8_QUANT_DYNAMIC_PER_TOKEN || az)) continue;
            for (int s = 0; s < nshapes; s++) {
              const int64_t *sh = shapes[s];
              act_case c = {sh[0], sh[1], sh[2], sh[3], in_types[i], out, (w8a8_quant_mode)mode, az, ub, s % 2};
              failed += run(&c);
              n++;
              if (failed > 3) goto done;
            }
          }
    }
done:
  printf("    %d %s cases, %d failed\n", n, what, failed);
}

W8A8_TEST(act_cpu_all_modes) {
  /* M, I, x padding, q padding; 40 x 600 takes the OpenMP path (more than 16384 y) */
  static const int64_t shapes[][4] = {{1, 1, 0, 0}, {3, 13, 5, 3}, {40, 600, 7, 9}, {5, 0, 0, 0}, {7, 64, 0, 0}};
  all_modes(run_cpu_case, shapes, 5, 1, "cpu");
}

W8A8_TEST(act_cpu_empty) {
  w8a8_handle *h = cpu_handle(W8A8_KERNEL_AUTO, 0);
  REQUIRE(h, "%s", w8a8_last_error());
  float s[3] = {-1, -1, -1};
  uint8_t q = 0x5a;
  /* M == 0: nothing written, NULL data allowed */
  w8a8_matrix x0 = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, 0, 8, 8, NULL);
  w8a8_matrix q0 = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 0, 4, 4, NULL);
  w8a8_vector s0 = w8a8_vector_make(W8A8_DTYPE_FP32, 0, NULL);
  REQUIRE_OK(w8a8_silu_mul_quantize(h, &x0, &q0, W8A8_QUANT_DYNAMIC_PER_TOKEN, &s0, NULL, NULL));
  w8a8_vector s1 = w8a8_vector_make(W8A8_DTYPE_FP32, 1, s);
  REQUIRE_OK(w8a8_silu_mul_quantize(h, &x0, &q0, W8A8_QUANT_DYNAMIC_PER_TENSOR, &s1, NULL, NULL));
  CHECK(s[0] == -1.0f, "M == 0 wrote the scale");
  /* I == 0 with rows: the dynamic scales are MIN_SCALE, as w8a8_quantize */
  w8a8_matrix xe = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, 3, 0, 0, NULL);
  w8a8_matrix qe = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, 3, 0, 0, NULL);
  w8a8_vector s3 = w8a8_vector_make(W8A8_DTYPE_FP32, 3, s);
  REQUIRE_OK(w8a8_silu_mul_quantize(h, &xe, &qe, W8A8_QUANT_DYNAMIC_PER_TOKEN, &s3, NULL, NULL));
  for (int i = 0; i < 3; i++) CHECK(s[i] == 1.0f / (448.0f * 512.0f), "scale[%d] = %a", i, (double)s[i]);
  CHECK(q == 0x5a, "q touched");
  w8a8_destroy(h);
}

/* ---- zero points at the ends of int32, constant rows ------------------------------------------ */

/* x [AZ_R, 2 * I] fp32 whose rows of y = silu(gate) * up are constant (gate 100: silu(100) is 100 exactly, since
 * exp(-100) vanishes next to 1) or alternate between two neighbouring values (up and the next float above it). */
#define AZ_R 10
static void azp_extreme_x(float *x, int64_t I) {
  static const float up[AZ_R] = {400.0f, -400.0f, 1e28f, -1e28f, 0.003f, 0.0f, 1e-42f, 330.27f, -2e7f, 7e35f};
  for (int r = 0; r < AZ_R; r++)
    for (int64_t k = 0; k < I; k++) {
      x[r * 2 * I + k] = 100.0f;
      x[r * 2 * I + I + k] = r >= 7 && k % 2 ? nextafterf(up[r], INFINITY) : up[r];
    }
}

/* clamp(rne(y / s) + azp, -128, 127), the sum in double (exact at these magnitudes). */
static int int8_formula(float y, float s, int32_t azp) {
  const float d = y / s;
  double v = d != d ? 0.0 : isinf(d) ? (double)d : nearbyint((double)d);
  v += azp;
  return v > 127 ? 127 : v < -128 ? -128 : (int)v;
}

/* Checks of one handle's outputs for azp_extreme_x: static (s, azp at the int32 ends) against the formula, dynamic
 * per-token: constant rows give s = |y|, azp = -128 - sign(y), every q -128 and an exact round trip. */
static void check_azp_extremes(const char *what, const float *x, int64_t I, const int8_t *qs, const int8_t *qd,
                               const float *sd, const int32_t *zd, float static_s, int32_t static_z) {
  int wrong = 0;
  for (int r = 0; r < AZ_R; r++) {
    for (int64_t k = 0; k < I; k++) {
      const float y = w8a8_silu_mul(x[r * 2 * I + k], x[r * 2 * I + I + k]);
      const int want = int8_formula(y, static_s, static_z);
      if (qs[r * I + k] != want && wrong++ < 4)
        CHECK(0, "%s static s %g azp %d: y %a gives q %d, want %d", what, (double)static_s, static_z, (double)y,
              qs[r * I + k], want);
      const float deq = (float)((int64_t)qd[r * I + k] - zd[r]) * sd[r];
      if (r < 7 && y != 0.0f && (qd[r * I + k] != -128 || deq != y) && wrong++ < 4)
        CHECK(0, "%s: constant row %a: q %d, s %a, azp %d dequantize to %a", what, (double)y, qd[r * I + k],
              (double)sd[r], zd[r], (double)deq);
      const float ulp = nextafterf(fabsf(y), INFINITY) - fabsf(y);
      if (r >= 7 && !(fabsf(deq - y) <= ulp) && wrong++ < 4)
        CHECK(0, "%s: near-constant row: y %a (q %d, s %a, azp %d) dequantizes to %a", what, (double)y,
              qd[r * I + k], (double)sd[r], zd[r], (double)deq);
    }
  }
  CHECK(wrong == 0, "%s: %d values wrong", what, wrong);
}

/* Both CPU paths (the reference, AUTO with 2 threads) on azp_extreme_x, bit for bit alike and right. */
W8A8_TEST(act_cpu_azp_extremes) {
  enum { I = 24 };
  float x[AZ_R * 2 * I];
  azp_extreme_x(x, I);
  static const int32_t zs[] = {INT32_MIN, INT32_MAX};
  int8_t qs[2][AZ_R * I], qd[2][AZ_R * I];
  float sd[2][AZ_R];
  int32_t zd[2][AZ_R];
  for (int zi = 0; zi < 2; zi++)
    for (int v = 0; v < 2; v++) {
      w8a8_handle *h = cpu_handle(v ? W8A8_KERNEL_AUTO : W8A8_KERNEL_REFERENCE, v ? 2 : 1);
      REQUIRE(h, "%s", w8a8_last_error());
      float s = 1e-30f;
      int32_t z = zs[zi];
      w8a8_matrix xm = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, AZ_R, 2 * I, 2 * I, x);
      w8a8_matrix qm = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, AZ_R, I, I, qs[v]);
      w8a8_vector s1 = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &s), z1 = w8a8_vector_make(W8A8_DTYPE_INT32, 1, &z);
      REQUIRE_OK(w8a8_silu_mul_quantize(h, &xm, &qm, W8A8_QUANT_STATIC_PER_TENSOR, &s1, &z1, NULL));
      qm.data = qd[v];
      w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, AZ_R, sd[v]), zv = w8a8_vector_make(W8A8_DTYPE_INT32, AZ_R, zd[v]);
      REQUIRE_OK(w8a8_silu_mul_quantize(h, &xm, &qm, W8A8_QUANT_DYNAMIC_PER_TOKEN, &sv, &zv, NULL));
      w8a8_destroy(h);
      check_azp_extremes(v ? "cpu auto" : "cpu reference", x, I, qs[v], qd[v], sd[v], zd[v], 1e-30f, zs[zi]);
    }
  CHECK(memcmp(qs[0], qs[1], sizeof qs[0]) == 0 && memcmp(qd[0], qd[1], sizeof qd[0]) == 0 &&
            memcmp(sd[0], sd[1], sizeof sd[0]) == 0 && memcmp(zd[0], zd[1], sizeof zd[0]) == 0,
        "AUTO differs from the reference");
}

/* ---- bad input: status, message, nothing written ---------------------------------------- */

typedef struct bad_env {
  w8a8_handle *h;
  uint16_t x[4 * 20];
  uint8_t q[4 * 12];
  float s[8];
  int32_t z[8];
  float ub;
} bad_env;

static void expect_bad(bad_env *e, const char *what, w8a8_status want, const char *needle, const w8a8_matrix *x,
                       const w8a8_matrix *q, w8a8_quant_mode mode, const w8a8_vector *s, const w8a8_vector *z,
                       const float *ub) {
  uint8_t q0[sizeof e->q];
  float s0[8];
  int32_t z0[8];
  memcpy(q0, e->q, sizeof q0);
  memcpy(s0, e->s, sizeof s0);
  memcpy(z0, e->z, sizeof z0);
  w8a8_status st = w8a8_silu_mul_quantize(e->h, x, q, mode, s, z, ub);
  const char *msg = w8a8_last_error();
  CHECK(st == want, "%s: got %s (%s), expected %s", what, w8a8_status_name(st), msg, w8a8_status_name(want));
  CHECK(strstr(msg, "w8a8_silu_mul_quantize") != NULL, "%s: message does not name the call: %s", what, msg);
  CHECK(strstr(msg, needle) != NULL, "%s: message does not mention '%s': %s", what, needle, msg);
  CHECK(memcmp(q0, e->q, sizeof q0) == 0 && memcmp(s0, e->s, sizeof s0) == 0 && memcmp(z0, e->z, sizeof z0) == 0,
        "%s: a failed call wrote to the caller's memory", what);
}

W8A8_TEST(act_bad_input) {
  bad_env e;
  memset(&e, 0, sizeof e);
  e.h = cpu_handle(W8A8_KERNEL_AUTO, 0);
  REQUIRE(e.h, "%s", w8a8_last_error());
  for (int i = 0; i < 8; i++) e.s[i] = 0.25f, e.z[i] = 3;
  memset(e.q, 0x33, sizeof e.q);
  e.ub = 2.0f;
  const int64_t M = 4, I = 10;
  const w8a8_quant_mode TOK = W8A8_QUANT_DYNAMIC_PER_TOKEN, ST = W8A8_QUANT_STATIC_PER_TENSOR,
                        DT = W8A8_QUANT_DYNAMIC_PER_TENSOR;
  w8a8_matrix x = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, 2 * I, 2 * I, e.x);
  w8a8_matrix q = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, I, 12, e.q);
  w8a8_vector st = w8a8_vector_make(W8A8_DTYPE_FP32, M, e.s), s1 = w8a8_vector_make(W8A8_DTYPE_FP32, 1, e.s);
  w8a8_vector zt = w8a8_vector_make(W8A8_DTYPE_INT32, M, e.z);
  /* the baseline is valid (it writes: run it on copies, then restore) */
  {
    bad_env keep = e;
    REQUIRE_OK(w8a8_silu_mul_quantize(e.h, &x, &q, TOK, &st, NULL, NULL));
    memcpy(e.q, keep.q, sizeof e.q);
    memcpy(e.s, keep.s, sizeof e.s);
  }
  w8a8_status hs = w8a8_silu_mul_quantize(NULL, &x, &q, TOK, &st, NULL, NULL);
  CHECK(hs == W8A8_ERROR_INVALID_HANDLE, "NULL handle: %s", w8a8_status_name(hs));

  expect_bad(&e, "x NULL", W8A8_ERROR_NULL_POINTER, "x is NULL", NULL, &q, TOK, &st, NULL, NULL);
  expect_bad(&e, "q NULL", W8A8_ERROR_NULL_POINTER, "q is NULL", &x, NULL, TOK, &st, NULL, NULL);
  expect_bad(&e, "scale NULL", W8A8_ERROR_NULL_POINTER, "scale is NULL", &x, &q, TOK, NULL, NULL, NULL);
  w8a8_matrix b = x;
  b.dtype = W8A8_DTYPE_INT8;
  expect_bad(&e, "x int8", W8A8_ERROR_INVALID_DTYPE, "x->dtype", &b, &q, TOK, &st, NULL, NULL);
  b.dtype = (w8a8_dtype)77;
  expect_bad(&e, "x dtype 77", W8A8_ERROR_INVALID_DTYPE, "x->dtype", &b, &q, TOK, &st, NULL, NULL);
  b = q;
  b.dtype = W8A8_DTYPE_BF16;
  expect_bad(&e, "q bf16", W8A8_ERROR_INVALID_DTYPE, "q->dtype", &x, &b, TOK, &st, NULL, NULL);
  b = x;
  b.layout = W8A8_COL_MAJOR;
  b.ld = M;
  expect_bad(&e, "x column-major", W8A8_ERROR_INVALID_LAYOUT, "x", &b, &q, TOK, &st, NULL, NULL);
  b = q;
  b.layout = (w8a8_layout)5;
  expect_bad(&e, "q layout 5", W8A8_ERROR_INVALID_LAYOUT, "q->layout", &x, &b, TOK, &st, NULL, NULL);
  b = x;
  b.cols = 19;
  expect_bad(&e, "odd x->cols", W8A8_ERROR_INVALID_SHAPE, "even", &b, &q, TOK, &st, NULL, NULL);
  b = x;
  b.rows = -1;
  expect_bad(&e, "negative rows", W8A8_ERROR_INVALID_SHAPE, ">= 0", &b, &q, TOK, &st, NULL, NULL);
  b = q;
  b.cols = 11;
  expect_bad(&e, "q too wide", W8A8_ERROR_INVALID_SHAPE, "q is 4 x 11", &x, &b, TOK, &st, NULL, NULL);
  b = q;
  b.rows = 3;
  expect_bad(&e, "q rows", W8A8_ERROR_INVALID_SHAPE, "must be 4 x 10", &x, &b, TOK, &st, NULL, NULL);
  b = x;
  b.ld = 19;
  expect_bad(&e, "x ld", W8A8_ERROR_INVALID_STRIDE, "x->ld is 19", &b, &q, TOK, &st, NULL, NULL);
  b = x;
  b.ld = INT64_MAX / 2;
  expect_bad(&e, "x span", W8A8_ERROR_INVALID_SHAPE, "2^62", &b, &q, TOK, &st, NULL, NULL);
  b = x;
  b.data = NULL;
  expect_bad(&e, "x data NULL", W8A8_ERROR_NULL_POINTER, "x->data", &b, &q, TOK, &st, NULL, NULL);
  b = x;
  b.data = (char *)e.x + 1;
  expect_bad(&e, "x misaligned", W8A8_ERROR_MISALIGNED, "x->data", &b, &q, TOK, &st, NULL, NULL);
  expect_bad(&e, "mode 9", W8A8_ERROR_INVALID_VALUE, "mode is 9", &x, &q, (w8a8_quant_mode)9, &st, NULL, NULL);
  expect_bad(&e, "per-token scale len 1", W8A8_ERROR_INVALID_SCALE, "scale->len is 1", &x, &q, TOK, &s1, NULL, NULL);
  expect_bad(&e, "static scale len M", W8A8_ERROR_INVALID_SCALE, "scale->len is 4", &x, &q, ST, &st, NULL, NULL);
  w8a8_vector sv = st;
  sv.dtype = W8A8_DTYPE_INT32;
  expect_bad(&e, "scale int32", W8A8_ERROR_INVALID_SCALE, "scale->dtype", &x, &q, TOK, &sv, NULL, NULL);
  sv = st;
  sv.data = NULL;
  expect_bad(&e, "scale data NULL", W8A8_ERROR_NULL_POINTER, "scale->data", &x, &q, TOK, &sv, NULL, NULL);
  sv = st;
  sv.data = (char *)e.s + 2;
  expect_bad(&e, "scale misaligned", W8A8_ERROR_MISALIGNED, "scale->data", &x, &q, TOK, &sv, NULL, NULL);
  const float bad_scales[3] = {0.0f, -1.0f, NAN};
  for (int i = 0; i < 3; i++) {
    float keep = e.s[0];
    e.s[0] = bad_scales[i];
    expect_bad(&e, "static scale <= 0 or NaN", W8A8_ERROR_INVALID_SCALE, "static scale", &x, &q, ST, &s1, NULL, NULL);
    e.s[0] = keep;
  }
  expect_bad(&e, "scale_ub per-tensor", W8A8_ERROR_INVALID_SCALE, "scale_ub", &x, &q, DT, &s1, NULL, &e.ub);
  float neg_ub = -1.0f;
  expect_bad(&e, "scale_ub <= 0", W8A8_ERROR_INVALID_SCALE, "scale_ub", &x, &q, TOK, &st, NULL, &neg_ub);
  expect_bad(&e, "scale_ub misaligned", W8A8_ERROR_MISALIGNED, "scale_ub",&x, &q, TOK, &st, NULL,
             (const float *)((char *)&e.ub + 1));
  b = q;
  b.dtype = W8A8_DTYPE_FP8_E4M3;
  expect_bad(&e, "azp with fp8", W8A8_ERROR_INVALID_ZERO_POINT, "int8 only", &x, &b, TOK, &st, &zt, NULL);
  expect_bad(&e, "azp dynamic per-tensor", W8A8_ERROR_INVALID_ZERO_POINT, "symmetric only", &x, &q, DT, &s1, &zt,
             NULL);
  expect_bad(&e, "azp with scale_ub", W8A8_ERROR_INVALID_SCALE, "scale_ub", &x, &q, TOK, &st, &zt, &e.ub);
  w8a8_vector zb = zt;
  zb.len = 1;
  expect_bad(&e, "azp len", W8A8_ERROR_INVALID_ZERO_POINT, "azp->len is 1", &x, &q, TOK, &st, &zb, NULL);
  zb = zt;
  zb.dtype = W8A8_DTYPE_FP32;
  expect_bad(&e, "azp fp32", W8A8_ERROR_INVALID_ZERO_POINT, "azp->dtype", &x, &q, TOK, &st, &zb, NULL);
  /* overlaps: q over x (x viewed as int8 bytes is not possible: alias q on x's memory) */
  b = q;
  b.data = e.x;
  expect_bad(&e, "q overlaps x", W8A8_ERROR_OVERLAP, "overlaps x", &x, &b, TOK, &st, NULL, NULL);
  sv = st;
  sv.data = e.x;
  expect_bad(&e, "scale overlaps x", W8A8_ERROR_OVERLAP, "scale", &x, &q, TOK, &sv, NULL, NULL);
  sv = st;
  sv.data = e.q;
  expect_bad(&e, "q overlaps scale", W8A8_ERROR_OVERLAP, "q", &x, &q, TOK, &sv, NULL, NULL);
  zb = zt;
  zb.data = e.s;
  expect_bad(&e, "scale overlaps azp", W8A8_ERROR_OVERLAP, "azp", &x, &q, TOK, &st, &zb, NULL);
  /* a CUDA handle's pointer checks come with the CUDA tests (act_cuda_bad_pointers) */
  w8a8_destroy(e.h);
}

/* ---- CUDA: the kernels against the CPU path, bit for bit --------------------------------- */

#ifndef W8A8_HAVE_CUDA
W8A8_TEST(act_cuda_not_built) { SKIP("built without CUDA"); }
#else
#include <cuda_runtime.h>

#define GPU_OR_SKIP()                                                  \
  do {                                                                 \
    if (w8a8_cuda_device_count() == 0) SKIP("no CUDA device visible"); \
  } while (0)

static w8a8_handle *gpu;
static int gpu_cc(void) {
  w8a8_handle_info info;
  return w8a8_get_info(gpu, &info) == W8A8_SUCCESS ? info.cc_major * 10 + info.cc_minor : 0;
}

/* One case on the GPU handle `gpu` (on its current stream) against the CPU reference. */
static int run_cuda_case(const act_case *c) {
  reseed();
  const int64_t ldx = 2 * c->I + c->padx, ldq = c->I + c->padq;
  const int64_t ns = c->mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? c->M : 1;
  const size_t es = w8a8_dtype_size(c->in), xb = es * (size_t)(c->M * ldx) + 16, qb = (size_t)(c->M * ldq) + 8;
  void *x = malloc(xb), *dx = NULL, *dq = NULL, *ds = NULL, *dz = NULL, *du = NULL;
  act_out want = {0}, got = {0};
  int bad = 0;
  if (!x || !out_alloc(&want, c, ldq, ns) || !out_alloc(&got, c, ldq, ns) || cudaMalloc(&dx, xb) != cudaSuccess ||
      cudaMalloc(&dq, qb) != cudaSuccess || cudaMalloc(&ds, 4 * (size_t)ns + 4) != cudaSuccess ||
      cudaMalloc(&dz, 4 * (size_t)ns + 4) != cudaSuccess || cudaMalloc(&du, 4) != cudaSuccess) {
    CHECK(0, "alloc");
    bad = 1;
    goto out;
  }
  fill_x(c->in, x, c->M, ldx, c->specials);
  const float static_s = frand(0.01f, 0.5f), ub = frand(0.5f, 4.0f);
  for (size_t i = 0; i < (size_t)(c->M * ldq); i++) want.q[i] = (uint8_t)rnd(); /* poison, padding kept */
  for (int64_t i = 0; i < ns; i++) got.s[i] = c->mode == W8A8_QUANT_STATIC_PER_TENSOR ? static_s : -7.0f;
  for (int64_t i = 0; i < ns; i++) got.z[i] = c->mode == W8A8_QUANT_STATIC_PER_TENSOR ? 13 : 555;
  if (cudaMemcpy(dx, x, xb, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(dq, want.q, (size_t)(c->M * ldq), cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(ds, got.s, 4 * (size_t)ns, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(dz, got.z, 4 * (size_t)ns, cudaMemcpyHostToDevice) != cudaSuccess ||
      cudaMemcpy(du, &ub, 4, cudaMemcpyHostToDevice) != cudaSuccess) {
    CHECK(0, "upload");
    bad = 1;
    goto out;
  }
  /* the reference on the same bytes (the CPU path is checked against the definition above) */
  {
    w8a8_handle *r = cpu_handle(W8A8_KERNEL_REFERENCE, 0);
    memcpy(want.s, got.s, 4 * (size_t)ns);
    memcpy(want.z, got.z, 4 * (size_t)ns);
    w8a8_matrix xm = w8a8_matrix_make(c->in, W8A8_ROW_MAJOR, c->M, 2 * c->I, ldx, x);
    w8a8_matrix qm = w8a8_matrix_make(c->out, W8A8_ROW_MAJOR, c->M, c->I, ldq, want.q);
    w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, ns, want.s), zv = w8a8_vector_make(W8A8_DTYPE_INT32, ns, want.z);
    w8a8_status s = w8a8_silu_mul_quantize(r, &xm, &qm, c->mode, &sv, c->azp ? &zv : NULL, c->ub ? &ub : NULL);
    w8a8_destroy(r);
    if (s != W8A8_SUCCESS) {
      CHECK(0, "cpu -> %s: %s", w8a8_status_name(s), w8a8_last_error());
      bad = 1;
      goto out;
    }
  }
  {
    w8a8_matrix xm = w8a8_matrix_make(c->in, W8A8_ROW_MAJOR, c->M, 2 * c->I, ldx, dx);
    w8a8_matrix qm = w8a8_matrix_make(c->out, W8A8_ROW_MAJOR, c->M, c->I, ldq, dq);
    w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, ns, ds), zv = w8a8_vector_make(W8A8_DTYPE_INT32, ns, dz);
    w8a8_status s = w8a8_silu_mul_quantize(gpu, &xm, &qm, c->mode, &sv, c->azp ? &zv : NULL,
                                           c->ub ? (const float *)du : NULL);
    if (s != W8A8_SUCCESS) {
      CHECK(0, "cuda -> %s: %s", w8a8_status_name(s), w8a8_last_error());
      bad = 1;
      goto out;
    }
  }
  if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(got.q, dq, (size_t)(c->M * ldq), cudaMemcpyDeviceToHost) ||
      cudaMemcpy(got.s, ds, 4 * (size_t)ns, cudaMemcpyDeviceToHost) ||
      cudaMemcpy(got.z, dz, 4 * (size_t)ns, cudaMemcpyDeviceToHost)) {
    CHECK(0, "device error: %s", cudaGetErrorString(cudaGetLastError()));
    bad = 1;
    goto out;
  }
  bad = !same_outputs("cuda", c, &got, &want, ldq, ns);
  if (bad)
    CHECK(0, "case M=%lld I=%lld padx %lld padq %lld in %s out %s mode %d azp %d ub %d specials %d",
          (long long)c->M, (long long)c->I, (long long)c->padx, (long long)c->padq, w8a8_dtype_name(c->in),
          w8a8_dtype_name(c->out), (int)c->mode, c->azp, c->ub, c->specials);
out:
  free(x);
  out_free(&want);
  out_free(&got);
  cudaFree(dx), cudaFree(dq), cudaFree(ds), cudaFree(dz), cudaFree(du);
  return bad;
}

W8A8_TEST(act_cuda_all_modes) {
  GPU_OR_SKIP();
  REQUIRE(w8a8_create(&gpu, W8A8_DEVICE_CUDA, 0) == W8A8_SUCCESS, "%s", w8a8_last_error());
  /* M, I, x padding, q padding. Vector path (I % 8 == 0, 16-byte rows): 17x4096, 300x104 padded,
   * 2x20000 (tail past the 8192 held in registers), 33x7168 (70B's TP=4 shard). Scalar path: odd
   * sizes, 5x9001 with a tail. */
  static const int64_t shapes[][4] = {{1, 1, 0, 0},     {3, 13, 5, 3},   {17, 4096, 0, 0}, {5, 9001, 3, 7},
                                      {300, 104, 24, 8}, {2, 20000, 0, 0}, {64, 0, 0, 0},    {33, 7168, 0, 0}};
  all_modes(run_cuda_case, shapes, 8, gpu_cc() >= 89, "cuda");
  w8a8_destroy(gpu);
}

/* Captured into a CUDA graph on a non-blocking stream, replayed on fresh data. */
W8A8_TEST(act_cuda_graph) {
  GPU_OR_SKIP();
  REQUIRE(w8a8_create(&gpu, W8A8_DEVICE_CUDA, 0) == W8A8_SUCCESS, "%s", w8a8_last_error());
  const int64_t M = 96, I = 1024;
  const w8a8_dtype qt = gpu_cc() >= 89 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
  cudaStream_t st;
  REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess, "stream");
  REQUIRE_OK(w8a8_set_stream(gpu, st));
  uint16_t *x = malloc(2 * (size_t)(M * 2 * I));
  uint8_t *q = malloc((size_t)(M * I)), *rq = malloc((size_t)(M * I));
  float s[96 + 1], rs[96 + 1];
  void *dx, *dq, *ds, *ds1;
  REQUIRE(x && q && rq && cudaMalloc(&dx, 2 * (size_t)(M * 2 * I)) == cudaSuccess &&
              cudaMalloc(&dq, (size_t)(M * I)) == cudaSuccess && cudaMalloc(&ds, 4 * (size_t)M) == cudaSuccess &&
              cudaMalloc(&ds1, 4) == cudaSuccess,
          "alloc");
  w8a8_matrix xm = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, 2 * I, 2 * I, dx);
  w8a8_matrix qm = w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, I, I, dq);
  w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, M, ds), s1 = w8a8_vector_make(W8A8_DTYPE_FP32, 1, ds1);
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal) == cudaSuccess, "begin capture");
  /* dynamic per-tensor first (memset + 3 kernels), then per-token into the same q */
  w8a8_status a = w8a8_silu_mul_quantize(gpu, &xm, &qm, W8A8_QUANT_DYNAMIC_PER_TENSOR, &s1, NULL, NULL);
  w8a8_status b = w8a8_silu_mul_quantize(gpu, &xm, &qm, W8A8_QUANT_DYNAMIC_PER_TOKEN, &sv, NULL, NULL);
  cudaError_t ce = cudaStreamEndCapture(st, &graph);
  REQUIRE(a == W8A8_SUCCESS && b == W8A8_SUCCESS, "calls during capture: %s / %s: %s", w8a8_status_name(a),
          w8a8_status_name(b), w8a8_last_error());
  REQUIRE(ce == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "capture: %s",
          cudaGetErrorString(ce));
  w8a8_handle *r = cpu_handle(W8A8_KERNEL_REFERENCE, 0);
  for (int rep = 0; rep < 3; rep++) {
    reseed();
    fill_x(W8A8_DTYPE_BF16, x, M, 2 * I, rep == 2);
    REQUIRE(cudaMemcpy(dx, x, 2 * (size_t)(M * 2 * I), cudaMemcpyHostToDevice) == cudaSuccess &&
                cudaMemset(dq, 0x7f, (size_t)(M * I)) == cudaSuccess,
            "upload");
    REQUIRE(cudaGraphLaunch(exec, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess, "replay");
    REQUIRE(cudaMemcpy(q, dq, (size_t)(M * I), cudaMemcpyDeviceToHost) == cudaSuccess &&
                cudaMemcpy(s, ds, 4 * (size_t)M, cudaMemcpyDeviceToHost) == cudaSuccess &&
                cudaMemcpy(s + M, ds1, 4, cudaMemcpyDeviceToHost) == cudaSuccess,
            "download");
    w8a8_matrix xh = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, 2 * I, 2 * I, x);
    w8a8_matrix qh = w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, I, I, rq);
    w8a8_vector sh = w8a8_vector_make(W8A8_DTYPE_FP32, M, rs), s1h = w8a8_vector_make(W8A8_DTYPE_FP32, 1, rs + M);
    REQUIRE_OK(w8a8_silu_mul_quantize(r, &xh, &qh, W8A8_QUANT_DYNAMIC_PER_TENSOR, &s1h, NULL, NULL));
    REQUIRE_OK(w8a8_silu_mul_quantize(r, &xh, &qh, W8A8_QUANT_DYNAMIC_PER_TOKEN, &sh, NULL, NULL));
    CHECK(memcmp(q, rq, (size_t)(M * I)) == 0 && memcmp(s, rs, 4 * (size_t)(M + 1)) == 0,
          "replay %d: outputs differ from the reference", rep);
  }
  w8a8_destroy(r);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  w8a8_set_stream(gpu, NULL);
  cudaStreamDestroy(st);
  free(x), free(q), free(rq);
  cudaFree(dx), cudaFree(dq), cudaFree(ds), cudaFree(ds1);
  w8a8_destroy(gpu);
}

/* act.cu on azp_extreme_x against the CPU reference, bit for bit: static with zero points at the int32 ends and
 * dynamic per-token asymmetric on constant and near-constant rows, on the vector path (I = 24) and the scalar one
 * (I = 13). */
W8A8_TEST(act_cuda_azp_extremes) {
  GPU_OR_SKIP();
  REQUIRE(w8a8_create(&gpu, W8A8_DEVICE_CUDA, 0) == W8A8_SUCCESS, "%s", w8a8_last_error());
  w8a8_handle *r = cpu_handle(W8A8_KERNEL_REFERENCE, 1);
  REQUIRE(r, "%s", w8a8_last_error());
  enum { IMAX = 24 };
  float x[AZ_R * 2 * IMAX];
  void *dx, *dq, *ds, *dz;
  REQUIRE(cudaMalloc(&dx, sizeof x) == cudaSuccess && cudaMalloc(&dq, AZ_R * IMAX) == cudaSuccess &&
              cudaMalloc(&ds, 4 * AZ_R) == cudaSuccess && cudaMalloc(&dz, 4 * AZ_R) == cudaSuccess,
          "alloc");
  static const int64_t Is[2] = {24, 13};
  static const int32_t zs[2] = {INT32_MIN, INT32_MAX};
  for (int ii = 0; ii < 2; ii++)
    for (int zi = 0; zi < 2; zi++) {
      const int64_t I = Is[ii];
      azp_extreme_x(x, I);
      REQUIRE(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice) == cudaSuccess, "upload");
      int8_t q[2][2][AZ_R * IMAX]; /* [cpu, gpu][static, dynamic] */
      float sd[2][AZ_R];
      int32_t zd[2][AZ_R];
      for (int dev = 0; dev < 2; dev++) {
        float s = 1e-30f;
        int32_t z = zs[zi];
        if (dev) {
          REQUIRE(cudaMemcpy(ds, &s, 4, cudaMemcpyHostToDevice) == cudaSuccess &&
                      cudaMemcpy(dz, &z, 4, cudaMemcpyHostToDevice) == cudaSuccess,
                  "upload");
        }
        w8a8_matrix xm = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, AZ_R, 2 * I, 2 * I, dev ? dx : (void *)x);
        w8a8_matrix qm = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, AZ_R, I, I, dev ? dq : (void *)q[0][0]);
        w8a8_vector s1 = w8a8_vector_make(W8A8_DTYPE_FP32, 1, dev ? ds : (void *)&s);
        w8a8_vector z1 = w8a8_vector_make(W8A8_DTYPE_INT32, 1, dev ? dz : (void *)&z);
        REQUIRE_OK(w8a8_silu_mul_quantize(dev ? gpu : r, &xm, &qm, W8A8_QUANT_STATIC_PER_TENSOR, &s1, &z1, NULL));
        if (dev) REQUIRE(cudaMemcpy(q[1][0], dq, (size_t)(AZ_R * I), cudaMemcpyDeviceToHost) == cudaSuccess, "download");
        qm.data = dev ? dq : (void *)q[0][1];
        w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, AZ_R, dev ? ds : (void *)sd[0]);
        w8a8_vector zv = w8a8_vector_make(W8A8_DTYPE_INT32, AZ_R, dev ? dz : (void *)zd[0]);
        REQUIRE_OK(w8a8_silu_mul_quantize(dev ? gpu : r, &xm, &qm, W8A8_QUANT_DYNAMIC_PER_TOKEN, &sv, &zv, NULL));
        if (dev)
          REQUIRE(cudaMemcpy(q[1][1], dq, (size_t)(AZ_R * I), cudaMemcpyDeviceToHost) == cudaSuccess &&
                      cudaMemcpy(sd[1], ds, 4 * AZ_R, cudaMemcpyDeviceToHost) == cudaSuccess &&
                      cudaMemcpy(zd[1], dz, 4 * AZ_R, cudaMemcpyDeviceToHost) == cudaSuccess,
                  "download: %s", cudaGetErrorString(cudaGetLastError()));
      }
      check_azp_extremes("cuda", x, I, q[1][0], q[1][1], sd[1], zd[1], 1e-30f, zs[zi]);
      CHECK(memcmp(q[0][0], q[1][0], (size_t)(AZ_R * I)) == 0, "I %lld azp %d: static q differs from the reference",
            (long long)I, zs[zi]);
      CHECK(memcmp(q[0][1], q[1][1], (size_t)(AZ_R * I)) == 0 && memcmp(sd[0], sd[1], sizeof sd[0]) == 0 &&
                memcmp(zd[0], zd[1], sizeof zd[0]) == 0,
            "I %lld: dynamic asymmetric outputs differ from the reference", (long long)I);
    }
  w8a8_destroy(r);
  cudaFree(dx), cudaFree(dq), cudaFree(ds), cudaFree(dz);
  w8a8_destroy(gpu);
}

W8A8_TEST(act_cuda_bad_pointers) {
  GPU_OR_SKIP();
  REQUIRE(w8a8_create(&gpu, W8A8_DEVICE_CUDA, 0) == W8A8_SUCCESS, "%s", w8a8_last_error());
  uint16_t hx[2 * 16];
  void *dx, *dq, *ds;
  REQUIRE(cudaMalloc(&dx, sizeof hx) == cudaSuccess && cudaMalloc(&dq, 16) == cudaSuccess &&
              cudaMalloc(&ds, 8) == cudaSuccess,
          "alloc");
  w8a8_matrix x = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, 2, 16, 16, hx);
  w8a8_matrix q = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 2, 8, 8, dq);
  w8a8_vector s = w8a8_vector_make(W8A8_DTYPE_FP32, 2, ds);
  w8a8_status st = w8a8_silu_mul_quantize(gpu, &x, &q, W8A8_QUANT_DYNAMIC_PER_TOKEN, &s, NULL, NULL);
  CHECK(st == W8A8_ERROR_INVALID_POINTER && strstr(w8a8_last_error(), "x") != NULL, "host x: %s: %s",
        w8a8_status_name(st), w8a8_last_error());
  x.data = dx;
  float hs[2];
  s.data = hs;
  st = w8a8_silu_mul_quantize(gpu, &x, &q, W8A8_QUANT_DYNAMIC_PER_TOKEN, &s, NULL, NULL);
  CHECK(st == W8A8_ERROR_INVALID_POINTER && strstr(w8a8_last_error(), "scale") != NULL, "host scale: %s: %s",
        w8a8_status_name(st), w8a8_last_error());
  s.data = ds;
  REQUIRE_OK(w8a8_silu_mul_quantize(gpu, &x, &q, W8A8_QUANT_DYNAMIC_PER_TOKEN, &s, NULL, NULL));
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "device error");
  cudaFree(dx), cudaFree(dq), cudaFree(ds);
  w8a8_destroy(gpu);
}
#endif
