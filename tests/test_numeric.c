/* test_numeric.c — the scalar conversions of src/core/numeric.c, which every host
 * implementation (the reference included) uses, checked against independent oracles:
 *
 *   - decoders written from the format definitions (ldexp of the fields);
 *   - a brute-force nearest-representable search: the sorted table of every finite
 *     value of the target format, nearest by distance, ties to the even code, with
 *     the format's overflow rule (bf16/fp16: to inf, as if 2^(emax+1) were an even
 *     code; fp8 e4m3fn: saturate to +-448, the header's clamp).
 *
 * Inputs: every code of each format (round trips), every midpoint between adjacent
 * values and its float neighbours, and millions of random floats. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "harness.h"

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint64_t rnd64(void) { /* xorshift64* */
  rs ^= rs >> 12;
  rs ^= rs << 25;
  rs ^= rs >> 27;
  return rs * 2685821657736338717ull;
}
static float bits_to_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static uint32_t f_to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* ---- a small description of each 16/8-bit format ------------------------ */
typedef struct fmt {
  const char *name;
  int bits, ebits, mbits, bias;
  int fn;        /* e4m3fn: no inf, only S.1111.111 is NaN, saturating conversion */
  double maxval; /* largest finite */
  uint32_t (*conv)(float);
  float (*dec)(uint32_t);
} fmt;

/* Value of a code from the format's fields; NaN for NaN codes, +-inf for inf. */
static double decode(const fmt *f, uint32_t c) {
  int sign = (c >> (f->bits - 1)) & 1;
  int e = (int)((c >> f->mbits) & ((1u << f->ebits) - 1));
  uint32_t m = c & ((1u << f->mbits) - 1);
  int emax_field = (1 << f->ebits) - 1;
  double v;
  if (f->fn) {
    if (e == emax_field && m == (1u << f->mbits) - 1) return NAN;
  } else if (e == emax_field) {
    if (m) return NAN;
    return sign ? -INFINITY : INFINITY;
  }
  if (e == 0)
    v = ldexp((double)m, 1 - f->bias - f->mbits);
  else
    v = ldexp((double)((1u << f->mbits) + m), e - f->bias - f->mbits);
  return sign ? -v : v;
}

static uint32_t conv_bf16(float x) { return w8a8_f32_to_bf16(x); }
static uint32_t conv_f16(float x) { return w8a8_f32_to_f16(x); }
static uint32_t conv_fp8(float x) { return w8a8_f32_to_fp8(x); }
static float dec_bf16(uint32_t c) { return w8a8_bf16_to_f32((uint16_t)c); }
static float dec_f16(uint32_t c) { return w8a8_f16_to_f32((uint16_t)c); }
static float dec_fp8(uint32_t c) { return w8a8_fp8_to_f32((uint8_t)c); }

static const fmt F_BF16 = {"bf16", 16, 8, 7, 127, 0, 0x1.fep127, conv_bf16, dec_bf16};
static const fmt F_F16 = {"fp16", 16, 5, 10, 15, 0, 65504.0, conv_f16, dec_f16};
static const fmt F_FP8 = {"fp8_e4m3", 8, 4, 3, 7, 1, 448.0, conv_fp8, dec_fp8};

/* Sorted non-negative finite values and their codes; for bf16/fp16 one more entry:
 * the overflow point 2^(emax+1) standing for inf (code of +inf, which is even). */
typedef struct table {
  int n;
  double *v;
  uint32_t *code;
} table;

static table make_table(const fmt *f) {
  table t;
  uint32_t half = 1u << (f->bits - 1);
  t.v = malloc(sizeof(double) * (half + 1));
  t.code = malloc(sizeof(uint32_t) * (half + 1));
  t.n = 0;
  for (uint32_t c = 0; c < half; c++) { /* positive codes are increasing in value */
    double v = decode(f, c);
    if (isnan(v) || isinf(v)) continue;
    t.v[t.n] = v;
    t.code[t.n++] = c;
  }
  if (!f->fn) {
    t.v[t.n] = 2.0 * ldexp(1.0, (1 << f->ebits) - 2 - f->bias); /* 2^(emax+1) */
    t.code[t.n++] = ((1u << f->ebits) - 1) << f->mbits;           /* +inf */
  }
  return t;
}

static void free_table(table *t) {
  free(t->v);
  free(t->code);
}

/* The oracle: the code x converts to. NaN inputs return UINT32_MAX (checked apart). */
static uint32_t oracle(const fmt *f, const table *t, float x) {
  if (isnan(x)) return UINT32_MAX;
  uint32_t sign = signbit(x) ? 1u << (f->bits - 1) : 0;
  double a = fabs((double)x);
  if (f->fn && a > f->maxval) a = f->maxval; /* saturate (inf included) */
  if (!f->fn && a >= t->v[t->n - 1]) return sign | t->code[t->n - 1];
  /* first entry >= a */
  int lo = 0, hi = t->n - 1;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->v[mid] >= a)
      hi = mid;
    else
      lo = mid + 1;
  }
  int best = lo;
  if (lo > 0) {
    double dup = t->v[lo] - a, ddown = a - t->v[lo - 1];
    if (ddown < dup || (ddown == dup && (t->code[lo - 1] & 1u) == 0)) best = lo - 1;
  }
  return sign | t->code[best];
}

static int is_nan_code(const fmt *f, uint32_t c) { return isnan(decode(f, c)); }

/* Check one input; returns 1 when wrong (and reports the first few). */
static int check_one(const fmt *f, const table *t, float x, int *reported) {
  uint32_t got = f->conv(x);
  uint32_t want = oracle(f, t, x);
  int bad;
  if (want == UINT32_MAX)
    bad = !is_nan_code(f, got) || ((got >> (f->bits - 1)) & 1) != (uint32_t)(signbit(x) != 0);
  else
    bad = got != want;
  if (bad && (*reported)++ < 5)
    CHECK(0, "%s(%a = 0x%08x) = 0x%x, oracle 0x%x", f->name, (double)x, f_to_bits(x), got, want);
  return bad;
}

/* Every code decodes to the value of its fields, and converts back to itself. */
static void roundtrip_all(const fmt *f) {
  int wrong = 0;
  for (uint32_t c = 0; c < (1u << f->bits); c++) {
    double want = decode(f, c);
    float got = f->dec(c);
    if (isnan(want)) {
      if (!isnan(got) && wrong++ < 5) CHECK(0, "%s decode 0x%x = %g, want NaN", f->name, c, (double)got);
      uint32_t back = f->conv(got);
      if ((!is_nan_code(f, back) || (back >> (f->bits - 1)) != (c >> (f->bits - 1))) && wrong++ < 5)
        CHECK(0, "%s NaN 0x%x -> 0x%x lost NaN or sign", f->name, c, back);
      continue;
    }
    if (((double)got != want || !signbit(got) != !signbit(want)) && wrong++ < 5)
      CHECK(0, "%s decode 0x%x = %a, want %a", f->name, c, (double)got, want);
    uint32_t back = f->conv(got);
    if (back != c && wrong++ < 5) CHECK(0, "%s round trip 0x%x -> %a -> 0x%x", f->name, c, (double)got, back);
  }
}

W8A8_TEST(numeric_bf16_all_codes_roundtrip) { roundtrip_all(&F_BF16); }
W8A8_TEST(numeric_fp16_all_codes_roundtrip) { roundtrip_all(&F_F16); }
W8A8_TEST(numeric_fp8_all_codes_roundtrip) { roundtrip_all(&F_FP8); }

/* NaN payloads: bf16/fp16 keep a NaN quiet (never turn it into inf); fp8 NaN is 0x7f|sign. */
W8A8_TEST(numeric_nan_stays_nan) {
  uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0xffc00000u, 0x7f802000u};
  for (unsigned i = 0; i < sizeof nans / sizeof nans[0]; i++) {
    float x = bits_to_f(nans[i]);
    uint16_t b = w8a8_f32_to_bf16(x), h = w8a8_f32_to_f16(x);
    uint8_t q = w8a8_f32_to_fp8(x);
    CHECK(isnan(w8a8_bf16_to_f32(b)) && (b >> 15) == (nans[i] >> 31), "bf16(0x%08x) = 0x%04x", nans[i], b);
    CHECK(isnan(w8a8_f16_to_f32(h)) && (h >> 15) == (nans[i] >> 31), "fp16(0x%08x) = 0x%04x", nans[i], h);
    CHECK(q == ((nans[i] >> 24 & 0x80u) | 0x7fu), "fp8(0x%08x) = 0x%02x", nans[i], q);
  }
  /* the special values of the header */
  CHECK(w8a8_f32_to_fp8(INFINITY) == 0x7e && w8a8_f32_to_fp8(-INFINITY) == 0xfe, "fp8(+-inf) must be +-448");
  CHECK(w8a8_f32_to_f16(65520.0f) == 0x7c00, "fp16(65520) must overflow to inf (tie to even)");
  CHECK(w8a8_f32_to_f16(65519.996f) == 0x7bff, "fp16(just below 65520) is 65504");
  CHECK(w8a8_f32_to_bf16(0x1.ffp127f) == 0x7f80, "bf16 overflow to inf");
  CHECK(w8a8_f32_to_fp8(464.0f) == 0x7e && w8a8_f32_to_fp8(1e30f) == 0x7e, "fp8 saturates");
  CHECK(w8a8_f32_to_fp8(-0.0f) == 0x80 && w8a8_f32_to_fp8(0x1p-10f) == 0x00 && w8a8_f32_to_fp8(0x1.2p-10f) == 0x01,
        "fp8 tiny values: -0 -> 0x80, 2^-10 (tie) -> 0, just above -> 2^-9");
}

/* Midpoints between adjacent values (exact in fp32 for all three formats), their
 * float neighbours, and the values themselves; both signs. */
static void midpoints(const fmt *f) {
  table t = make_table(f);
  int reported = 0, wrong = 0;
  long count = 0;
  for (int i = 0; i + 1 < t.n; i++) {
    double mid = 0.5 * (t.v[i] + t.v[i + 1]);
    float m = (float)mid;
    if ((double)m != mid) {
      CHECK(0, "%s midpoint %a not exact in fp32", f->name, mid);
      continue;
    }
    float xs[5] = {m, nextafterf(m, 0.0f), nextafterf(m, INFINITY), (float)t.v[i], (float)t.v[i + 1]};
    for (int j = 0; j < 5; j++) {
      if (isinf(xs[j])) continue;
      wrong += check_one(f, &t, xs[j], &reported);
      wrong += check_one(f, &t, -xs[j], &reported);
      count += 2;
    }
  }
  CHECK(wrong == 0, "%s: %d of %ld midpoint inputs wrong", f->name, wrong, count);
  free_table(&t);
}

W8A8_TEST(numeric_bf16_rne_midpoints) { midpoints(&F_BF16); }
W8A8_TEST(numeric_fp16_rne_midpoints) { midpoints(&F_F16); }
W8A8_TEST(numeric_fp8_rne_midpoints) { midpoints(&F_FP8); }

/* Random floats: half uniformly random bit patterns (NaN, inf, huge, tiny), half with
 * exponents around the format's range so rounding and subnormals are exercised. */
static void random_floats(const fmt *f, long n) {
  table t = make_table(f);
  int reported = 0;
  long wrong = 0;
  int emin = 1 - f->bias - f->mbits - 3, emax = (1 << f->ebits) - 1 - f->bias + 2;
  for (long i = 0; i < n; i++) {
    uint64_t r = rnd64();
    float x;
    if (i & 1) {
      x = bits_to_f((uint32_t)r);
    } else {
      int e = emin + (int)((r >> 32) % (uint64_t)(emax - emin + 1));
      float mant = 1.0f + (float)(r & 0x7fffffu) * 0x1p-23f;
      x = ldexpf(mant, e);
      if (r & (1ull << 63)) x = -x;
    }
    wrong += check_one(f, &t, x, &reported);
  }
  CHECK(wrong == 0, "%s: %ld of %ld random inputs wrong", f->name, wrong, n);
  free_table(&t);
}

W8A8_TEST(numeric_bf16_rne_random) { random_floats(&F_BF16, 2000000); }
W8A8_TEST(numeric_fp16_rne_random) { random_floats(&F_F16, 2000000); }
W8A8_TEST(numeric_fp8_rne_random) { random_floats(&F_FP8, 2000000); }

/* ---- int8 ---------------------------------------------------------------- */

/* Independent: round half to even through floor in double, add the zero point in double (exact: beyond 2^52 the
 * sum is far outside int8 whatever azp is), clamp to int8. NaN gives clamp(azp). */
static int oracle_int8(float x, int32_t azp) {
  double v = 0;
  if (!isnan(x) && isinf(x)) {
    v = x;
  } else if (!isnan(x)) {
    double d = x, fl = floor(d), frac = d - fl;
    v = frac > 0.5 ? fl + 1 : frac < 0.5 ? fl : (fmod(fl, 2.0) == 0 ? fl : fl + 1);
  }
  v += azp;
  return v > 127 ? 127 : v < -128 ? -128 : (int)v;
}

W8A8_TEST(numeric_int8_rne_and_clamp) {
  static const struct {
    float x;
    int32_t azp;
    int want;
  } hand[] = {
      {0.5f, 0, 0},      {1.5f, 0, 2},     {2.5f, 0, 2},       {-0.5f, 0, 0},    {-1.5f, 0, -2},   {-2.5f, 0, -2},
      {126.5f, 0, 126},  {127.5f, 0, 127}, {128.0f, 0, 127},   {-128.5f, 0, -128}, {-129.0f, 0, -128},
      {1e10f, 0, 127},   {-1e10f, 0, -128}, {INFINITY, 0, 127}, {-INFINITY, 0, -128}, {NAN, 0, 0},
      {NAN, 5, 5},       {NAN, -300, -128}, {0.49999997f, 0, 0}, {2.5f, 10, 12},  {-200.0f, 10, -128},
      {100.0f, 27, 127}, {3e9f, -1000, 127}, {-3e9f, 1000, -128}, {-0.0f, 0, 0},  {0.5f, -213, -128},
      /* zero points at the int32 ends: rne(x) + azp is exact, never rne(x) saturated to int32 first */
      {0x1p31f, INT32_MIN, 0},          {0x1p31f, INT32_MIN + 5, 5},       {0x1p31f + 256, INT32_MIN, 127},
      {0x1p31f - 128, INT32_MIN, -128}, {0x1p31f - 128, INT32_MIN + 100, -28}, {1e30f, INT32_MIN, 127},
      {INFINITY, INT32_MIN, 127},       {NAN, INT32_MIN, -128},            {-0x1p31f, INT32_MAX, -1},
      {-0x1p31f - 256, INT32_MAX, -128}, {-0x1p31f - 256, INT32_MAX - 200, -128}, {-1e30f, INT32_MAX, -128},
      {-INFINITY, INT32_MAX, -128},     {NAN, INT32_MAX, 127},             {-0x1p32f, INT32_MAX, -128},
  };
  for (unsigned i = 0; i < sizeof hand / sizeof hand[0]; i++) {
    int got = w8a8_f32_to_int8_rne(hand[i].x, hand[i].azp);
    CHECK(got == hand[i].want, "int8_rne(%g, azp %d) = %d, want %d", (double)hand[i].x, hand[i].azp, got,
          hand[i].want);
    CHECK(oracle_int8(hand[i].x, hand[i].azp) == hand[i].want, "oracle disagrees on %g", (double)hand[i].x);
  }
  long wrong = 0;
  for (long i = 0; i < 2000000; i++) {
    uint64_t r = rnd64();
    float x;
    if (i % 4 == 0)
      x = (float)((int)(r % 1200) - 600) * 0.5f; /* exact halves: the ties */
    else if (i % 4 == 1)
      x = bits_to_f((uint32_t)r);
    else
      x = ((float)(int32_t)(r >> 32) / 2147483648.0f) * 300.0f;
    int32_t azp = (int32_t)((r >> 20) % 601) - 300;
    if (i % 5 == 4) { /* x near +-2^31 and 2^32 (steps of 256), azp near the opposite int32 end */
      x = ldexpf(1.0f, 31 + (int)(r >> 60 & 1)) + (float)((int)(r % 9) - 4) * 256.0f;
      if (r >> 63) x = -x;
      azp = r >> 63 ? INT32_MAX - (int32_t)((r >> 8) % 300) : INT32_MIN + (int32_t)((r >> 8) % 300);
    }
    int got = w8a8_f32_to_int8_rne(x, azp), want = oracle_int8(x, azp);
    if (got != want && wrong++ < 5) CHECK(0, "int8_rne(%a, %d) = %d, want %d", (double)x, azp, got, want);
  }
  CHECK(wrong == 0, "%ld random int8 conversions wrong", wrong);
}

W8A8_TEST(numeric_int32_saturation) {
  CHECK(w8a8_f32_to_int32_sat(NAN) == 0, "NaN");
  CHECK(w8a8_f32_to_int32_sat(INFINITY) == INT32_MAX && w8a8_f32_to_int32_sat(-INFINITY) == INT32_MIN, "inf");
  CHECK(w8a8_f32_to_int32_sat(2147483648.0f) == INT32_MAX, "2^31");
  CHECK(w8a8_f32_to_int32_sat(-2147483648.0f) == INT32_MIN, "-2^31");
  CHECK(w8a8_f32_to_int32_sat(2147483520.0f) == 2147483520, "largest float below 2^31");
  CHECK(w8a8_f32_to_int32_sat(-7.0f) == -7 && w8a8_f32_to_int32_sat(7.9f) == 7, "truncates");
}
