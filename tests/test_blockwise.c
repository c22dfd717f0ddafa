/* test_blockwise.c — block-scaled fp8: w8a8_scaled_mm_blockwise and the group / block quantizers, on the CPU,
 * against the header's formulas written out here, on fresh random data with partial groups and blocks, both
 * scale layouts with padded strides, poisoned outputs and every element checked. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "core/internal.h"

static uint64_t rng_state;
static uint32_t rnd(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(rng_state >> 33);
}
static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f; }
/* a random finite e4m3 byte (0x7f / 0xff are NaN) */
static uint8_t rnd_fp8(void) {
  uint8_t v;
  do v = (uint8_t)rnd();
  while ((v & 0x7f) == 0x7f);
  return v;
}

static int64_t blocks(int64_t n) { return (n + 127) / 128; }

/* A scale matrix rows x cols in `layout` with a padded ld, filled with positive scales; the pad poisoned. */
typedef struct smat {
  w8a8_matrix m;
  float *buf;
  size_t bytes;
} smat;
static smat make_scales(int64_t rows, int64_t cols, w8a8_layout layout, float lo, float hi) {
  smat s;
  const int64_t inner = layout == W8A8_ROW_MAJOR ? cols : rows, outer = layout == W8A8_ROW_MAJOR ? rows : cols;
  const int64_t ld = inner + 3;
  s.bytes = sizeof(float) * (size_t)(ld * (outer ? outer : 1));
  s.buf = malloc(s.bytes);
  for (int64_t i = 0; i < ld * outer; i++) s.buf[i] = i % ld < inner ? rndf(lo, hi) : -12345.0f;
  s.m = w8a8_matrix_make(W8A8_DTYPE_FP32, layout, rows, cols, ld, s.buf);
  return s;
}
static float sget(const smat *s, int64_t i, int64_t j) {
  return s->buf[s->m.layout == W8A8_ROW_MAJOR ? i * s->m.ld + j : j * s->m.ld + i];
}

static float out_to_f32(w8a8_dtype t, const void *p, int64_t i) {
  if (t == W8A8_DTYPE_BF16) return w8a8_bf16_to_f32(((const uint16_t *)p)[i]);
  if (t == W8A8_DTYPE_FP16) return w8a8_f16_to_f32(((const uint16_t *)p)[i]);
  return ((const float *)p)[i];
}
static uint32_t out_bits(w8a8_dtype t, const void *p, int64_t i) {
  if (t == W8A8_DTYPE_FP32) {
    uint32_t u;
    memcpy(&u, (const float *)p + i, 4);
    return u;
  }
  return ((const uint16_t *)p)[i];
}
static uint32_t round_bits(w8a8_dtype t, float r) {
  if (t == W8A8_DTYPE_BF16) return w8a8_f32_to_bf16(r);
  if (t == W8A8_DTYPE_FP16) return w8a8_f32_to_f16(r);
  uint32_t u;
  memcpy(&u, &r, 4);
  return u;
}

/* Where a GEMM case runs: the CPU handle's own memory, or a CUDA handle's copies (dev_copy, below). */
static void *dev_copy(const void *src, size_t bytes);
static void dev_back(void *dst, const void *src, size_t bytes);
static void dev_free(void *d);

/* One GEMM case: the header's order of operations gives the bits (exact), or, for a kernel that sums a block's
 * products in another order (the Hopper kernel's tensor cores), the header's bound around a double-precision sum;
 * a double-precision sum checks the scale either way. gpu: h is a CUDA handle, the operands go to its device;
 * want: the launch record's kernel (NULL: not checked). lda = K + pad_a, ldb = K + pad_b (K rounded up to 16 first
 * where the pad is a multiple of 16). */
static void gemm_case_on(w8a8_handle *h, int gpu, int exact, const char *want, int64_t pad_a, int64_t pad_b, int64_t M,
                         int64_t N, int64_t K, w8a8_dtype od, int with_bias, w8a8_layout la, w8a8_layout lb) {
  /* a pad that is a multiple of 16 keeps the rows 16-byte aligned (what TMA needs) whatever K is */
  const int64_t lda = (pad_a % 16 ? K : (K + 15) / 16 * 16) + pad_a, ldb = (pad_b % 16 ? K : (K + 15) / 16 * 16) + pad_b;
  /* ldo: odd cases a two-element pad (element-wise stores), even ones whole 16-byte rows (the staged epilogue's) */
  const int64_t ldo = (M + N) % 2 ? N + 2 : (N + 15) / 16 * 16 + 16, KB = blocks(K), NB = blocks(N);
  uint8_t *a = malloc((size_t)(M * lda + 1)), *b = malloc((size_t)(N * ldb + 1));
  for (int64_t i = 0; i < M * lda; i++) a[i] = rnd_fp8();
  for (int64_t i = 0; i < N * ldb; i++) b[i] = rnd_fp8();
  smat sa = make_scales(M, KB, la, 1e-3f, 4e-2f), sb = make_scales(NB, KB, lb, 1e-3f, 4e-2f);
  const size_t es = w8a8_dtype_size(od);
  char *bias = malloc(es * (size_t)(N + 1)), *out = malloc(es * (size_t)(M * ldo + 1));
  for (int64_t n = 0; n < N; n++) {
    const uint32_t bb = round_bits(od, rndf(-2.0f, 2.0f));
    memcpy(bias + es * (size_t)n, &bb, es);
  }
  memset(out, 0x7b, es * (size_t)(M * ldo)); /* poison: the padding must stay so */
  const size_t a_bytes = (size_t)(M * lda + 1), b_bytes = (size_t)(N * ldb + 1), o_bytes = es * (size_t)(M * ldo + 1);
  void *da = a, *db = b, *dsa = sa.buf, *dsb = sb.buf, *dbias = bias, *dout = out;
  if (gpu) {
    da = dev_copy(a, a_bytes), db = dev_copy(b, b_bytes), dsa = dev_copy(sa.buf, sa.bytes);
    dsb = dev_copy(sb.buf, sb.bytes), dbias = dev_copy(bias, es * (size_t)(N + 1)), dout = dev_copy(out, o_bytes);
    REQUIRE(da && db && dsa && dsb && dbias && dout, "device copies");
  }
  w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, lda, da);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, ldb, db);
  w8a8_matrix O = w8a8_matrix_make(od, W8A8_ROW_MAJOR, M, N, ldo, dout);
  w8a8_vector BI = w8a8_vector_make(od, N, dbias);
  w8a8_matrix SA = sa.m, SB = sb.m;
  SA.data = dsa, SB.data = dsb;
  w8a8_status st = w8a8_scaled_mm_blockwise(h, &A, &B, &SA, &SB, with_bias ? &BI : NULL, &O);
  CHECK(st == W8A8_SUCCESS, "M N K %lld %lld %lld: %s %s", (long long)M, (long long)N, (long long)K,
        w8a8_status_name(st), w8a8_last_error());
  if (st == W8A8_SUCCESS && want && *want) {
    w8a8_launch_info li;
    REQUIRE_OK(w8a8_get_last_launch(h, &li));
    CHECK(strcmp(li.kernel, want) == 0, "M N K %lld %lld %lld: ran %s (%s), expected %s", (long long)M, (long long)N,
          (long long)K, li.kernel, li.config, want);
    if (strncmp(li.kernel, "sm90", 4) == 0) /* the record names the tile it ran */
      CHECK(li.config && (strncmp(li.config, "tile_n", 6) == 0 || strncmp(li.config, "swap_n", 6) == 0),
            "M N K %lld %lld %lld: launch record's configuration '%s'", (long long)M, (long long)N, (long long)K,
            li.config ? li.config : "(null)");
  }
  if (gpu) {
    dev_back(out, dout, o_bytes);
    dev_free(da), dev_free(db), dev_free(dsa), dev_free(dsb), dev_free(dbias), dev_free(dout);
  }
  /* fp8's latitude (the header's): 2e-3 of the sum of |terms|, and the output's rounding */
  const double round_rel = od == W8A8_DTYPE_BF16 ? 1.0 / 256 : od == W8A8_DTYPE_FP16 ? 1.0 / 1024 : 1e-6;
  int64_t bad = 0;
  for (int64_t m = 0; m < M && st == W8A8_SUCCESS; m++)
    for (int64_t n = 0; n < ldo; n++) {
      const int64_t i = m * ldo + n;
      if (n >= N) { /* padding */
        uint8_t poison[4];
        memset(poison, 0x7b, sizeof poison);
        if (memcmp(out + es * (size_t)i, poison, es) != 0 && bad++ < 5)
          CHECK(0, "out[%lld][%lld] is past N but was written", (long long)m, (long long)n);
        continue;
      }
      float acc = 0.0f;
      double dacc = 0.0, dabs = 0.0;
      for (int64_t kb = 0; kb < KB; kb++) {
        float part = 0.0f;
        double dpart = 0.0, dpa = 0.0;
        for (int64_t k = kb * 128; k < K && k < kb * 128 + 128; k++) {
          const float x = w8a8_fp8_to_f32(a[m * lda + k]), y = w8a8_fp8_to_f32(b[n * ldb + k]);
          part += x * y;
          dpart += (double)x * y;
          dpa += fabs((double)x * y);
        }
        const float s = sget(&sa, m, kb) * sget(&sb, n / 128, kb);
        acc = fmaf(s, part, acc);
        dacc += (double)s * dpart;
        dabs += (double)s * dpa;
      }
      float r = acc;
      double dr = dacc;
      if (with_bias) {
        const float bv = out_to_f32(od, bias, n);
        r = acc + bv;
        dr += bv;
      }
      const uint32_t wbits = round_bits(od, r), got = out_bits(od, out, i);
      if (exact && wbits != got && bad++ < 5)
        CHECK(0, "M N K %lld %lld %lld %s: out[%lld][%lld] bits %08x, the header's formula gives %08x", (long long)M,
              (long long)N, (long long)K, w8a8_dtype_name(od), (long long)m, (long long)n, got, wbits);
      const double gerr = fabs(out_to_f32(od, out, i) - dr), gtol = 2e-3 * dabs + round_rel * fabs(dr) + 1e-6;
      if (!exact && !(gerr <= gtol) && bad++ < 5)
        CHECK(0, "M N K %lld %lld %lld %s: out[%lld][%lld] = %.8g, double-precision sum %.8g (the header's bound %g)",
              (long long)M, (long long)N, (long long)K, w8a8_dtype_name(od), (long long)m, (long long)n,
              (double)out_to_f32(od, out, i), dr, gtol);
      /* the formula itself against a double-precision sum (fp32 accumulation and the output's rounding); the
       * tensor core's block sums keep fewer bits, so the Hopper kernel is held to the header's bound above */
      const double err = fabs(out_to_f32(od, out, i) - dr), tol = 1e-5 * dabs + 8e-3 * fabs(dr) + 1e-6;
      if (exact && err > tol && bad++ < 5)
        CHECK(0, "out[%lld][%lld] = %g, double-precision sum %g (tolerance %g)", (long long)m, (long long)n,
              (double)out_to_f32(od, out, i), dr, tol);
    }
  free(a), free(b), free(sa.buf), free(sb.buf), free(bias), free(out);
}

/* The CPU gives the header's formula bit for bit on every path: the reference, and the AVX2 kernel (AUTO where the
 * CPU has AVX2, FMA and F16C; GENERIC forces it) over the shapes that reach its 16-row panels, several 512-deep
 * slices, partial blocks and column tails. */
W8A8_TEST(blockwise_gemm_cpu) {
  rng_state = 0x5eed0001ull ^ (uint64_t)time(NULL);
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  w8a8_handle_info info;
  REQUIRE_OK(w8a8_get_info(h, &info));
  const int avx2 = strstr(info.features, "avx2") && strstr(info.features, "fma") && strstr(info.features, "f16c");
  static const int64_t shapes[][3] = {{1, 1, 1},     {3, 130, 257},  {17, 256, 128}, {5, 129, 300},  {64, 128, 512},
                                      {2, 300, 127}, {9, 7, 0},      {33, 200, 1000}, {16, 48, 640},  {40, 97, 1300},
                                      {1, 1000, 2100}, {300, 61, 384}, {31, 250, 129}};
  static const w8a8_dtype outs[3] = {W8A8_DTYPE_BF16, W8A8_DTYPE_FP16, W8A8_DTYPE_FP32};
  static const w8a8_kernel kernels[2] = {W8A8_KERNEL_AUTO, W8A8_KERNEL_REFERENCE};
  int v = 0;
  for (int kk = 0; kk < 2; kk++) {
    REQUIRE_OK(w8a8_set_kernel(h, kernels[kk]));
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !w8a8_test_failed(); i++)
      for (int o = 0; o < 3 && !w8a8_test_failed(); o++, v++) {
        const char *want = avx2 && kernels[kk] == W8A8_KERNEL_AUTO ? "cpu-avx2" : "cpu-reference";
        gemm_case_on(h, 0, 1, want, 5, 7, shapes[i][0], shapes[i][1], shapes[i][2], outs[o], v % 2,
                     v % 3 ? W8A8_ROW_MAJOR : W8A8_COL_MAJOR, v % 4 < 2 ? W8A8_ROW_MAJOR : W8A8_COL_MAJOR);
      }
  }
  /* GENERIC: the AVX2 kernel or its refusal */
  REQUIRE_OK(w8a8_set_kernel(h, W8A8_KERNEL_GENERIC));
  if (avx2)
    gemm_case_on(h, 0, 1, "cpu-avx2", 5, 7, 4, 140, 260, W8A8_DTYPE_BF16, 1, W8A8_ROW_MAJOR, W8A8_ROW_MAJOR);
  REQUIRE_OK(w8a8_destroy(h));
}

/* The quantizers: per-token groups (plain and SiLU-mul) and 128 x 128 blocks, with and without UE8M0. */
typedef enum { Q_GROUPS, Q_BLOCKS, Q_SILU } qkind;

static void quant_case(w8a8_handle *h, qkind kind, int64_t M, int64_t K, w8a8_dtype xd, unsigned flags,
                       w8a8_layout sl) {
  const int64_t xcols = kind == Q_SILU ? 2 * K : K, ldx = xcols + 3, ldq = K + 9;
  const int64_t SR = kind == Q_BLOCKS ? blocks(M) : M, SC = blocks(K);
  const size_t xs = w8a8_dtype_size(xd);
  char *x = malloc(xs * (size_t)(M * ldx + 1));
  for (int64_t m = 0; m < M; m++)
    for (int64_t c = 0; c < xcols; c++) {
      /* magnitudes vary by group, so that each group's scale is its own; a few zero groups */
      const int64_t g = c / 128 + m / 7;
      const float mag = g % 5 == 4 ? 0.0f : powf(4.0f, (float)(g % 5) - 2.0f);
      float v = rndf(-mag, mag);
      if (xd == W8A8_DTYPE_BF16) {
        const uint16_t u = w8a8_f32_to_bf16(v);
        memcpy(x + xs * (size_t)(m * ldx + c), &u, 2);
      } else if (xd == W8A8_DTYPE_FP16) {
        const uint16_t u = w8a8_f32_to_f16(v);
        memcpy(x + xs * (size_t)(m * ldx + c), &u, 2);
      } else {
        memcpy(x + xs * (size_t)(m * ldx + c), &v, 4);
      }
    }
  uint8_t *q = malloc((size_t)(M * ldq + 1));
  memset(q, 0x5a, (size_t)(M * ldq));
  smat s = make_scales(SR, SC, sl, -1.0f, -1.0f); /* poisoned: every scale must be written */
  w8a8_matrix X = w8a8_matrix_make(xd, W8A8_ROW_MAJOR, M, xcols, ldx, x);
  w8a8_matrix Q = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, ldq, q);
  const w8a8_status st = kind == Q_GROUPS   ? w8a8_quantize_groups(h, &X, &Q, &s.m, flags)
                         : kind == Q_BLOCKS ? w8a8_quantize_blocks(h, &X, &Q, &s.m, flags)
                                            : w8a8_silu_mul_quantize_groups(h, &X, &Q, &s.m, flags);
  CHECK(st == W8A8_SUCCESS, "kind %d M %lld K %lld: %s %s", kind, (long long)M, (long long)K, w8a8_status_name(st),
        w8a8_last_error());
  int bad = 0;
  for (int64_t r = 0; r < SR && st == W8A8_SUCCESS; r++)
    for (int64_t kb = 0; kb < SC; kb++) {
      const int64_t m0 = kind == Q_BLOCKS ? r * 128 : r, m1 = kind == Q_BLOCKS ? (m0 + 128 < M ? m0 + 128 : M) : r + 1;
      const int64_t k1 = kb * 128 + 128 < K ? kb * 128 + 128 : K;
      float amax = 0.0f;
      for (int64_t m = m0; m < m1; m++)
        for (int64_t k = kb * 128; k < k1; k++) {
          float y = out_to_f32(xd, x, m * ldx + k);
          if (kind == Q_SILU) y = w8a8_silu_mul(y, out_to_f32(xd, x, m * ldx + K + k));
          amax = fabsf(y) > amax ? fabsf(y) : amax;
        }
      float want = amax / 448.0f;
      if (want < 1.0f / (448.0f * 512.0f)) want = 1.0f / (448.0f * 512.0f);
      if (flags & W8A8_SCALE_UE8M0) {
        float p2 = 1.0f;
        while (p2 < want) p2 *= 2.0f;
        while (p2 / 2.0f >= want) p2 /= 2.0f;
        want = p2;
      }
      const float got = sget(&s, r, kb);
      if (got != want && bad++ < 5)
        CHECK(0, "kind %d: scale[%lld][%lld] = %g, expected %g", kind, (long long)r, (long long)kb, (double)got,
              (double)want);
      for (int64_t m = m0; m < m1; m++)
        for (int64_t k = kb * 128; k < k1; k++) {
          float y = out_to_f32(xd, x, m * ldx + k);
          if (kind == Q_SILU) y = w8a8_silu_mul(y, out_to_f32(xd, x, m * ldx + K + k));
          const uint8_t wq = w8a8_f32_to_fp8(y / want);
          if (q[m * ldq + k] != wq && bad++ < 5)
            CHECK(0, "kind %d: q[%lld][%lld] = 0x%02x, expected 0x%02x", kind, (long long)m, (long long)k,
                  q[m * ldq + k], wq);
        }
    }
  for (int64_t m = 0; m < M && st == W8A8_SUCCESS; m++)
    for (int64_t k = K; k < ldq; k++)
      if (q[m * ldq + k] != 0x5a && bad++ < 5) CHECK(0, "q[%lld][%lld] past K was written", (long long)m, (long long)k);
  free(x), free(q), free(s.buf);
}

W8A8_TEST(blockwise_quantizers_cpu) {
  rng_state = 0x5eed0002ull ^ (uint64_t)time(NULL);
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  static const int64_t shapes[][2] = {{1, 1}, {3, 128}, {5, 300}, {130, 257}, {256, 512}};
  static const w8a8_dtype ins[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  int v = 0;
  for (int kind = Q_GROUPS; kind <= Q_SILU && !w8a8_test_failed(); kind++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !w8a8_test_failed(); i++)
      for (unsigned f = 0; f < 2 && !w8a8_test_failed(); f++, v++)
        quant_case(h, (qkind)kind, shapes[i][0], shapes[i][1], ins[v % 3], f ? W8A8_SCALE_UE8M0 : 0,
                   v % 2 ? W8A8_COL_MAJOR : W8A8_ROW_MAJOR);
  REQUIRE_OK(w8a8_destroy(h));
}

/* Quantize activations by groups and weights by blocks, then the block GEMM: close to the fp32 product. */
W8A8_TEST(blockwise_round_trip_cpu) {
  rng_state = 0x5eed0003ull ^ (uint64_t)time(NULL);
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  enum { M = 7, N = 200, K = 300 };
  static float x[M * K], w[N * K], out[M * N], sa[M * 3], sb[2 * 3];
  static uint8_t xq[M * K], wq[N * K];
  for (int i = 0; i < M * K; i++) x[i] = rndf(-3.0f, 3.0f) * (i % K < 128 ? 1.0f : 0.01f);
  for (int i = 0; i < N * K; i++) w[i] = rndf(-0.05f, 0.05f);
  w8a8_matrix X = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, K, K, x);
  w8a8_matrix XQ = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K, xq);
  w8a8_matrix SA = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, 3, 3, sa);
  w8a8_matrix W = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, N, K, K, w);
  w8a8_matrix WQ = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, N, K, K, wq);
  w8a8_matrix SB = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 2, 3, 3, sb);
  REQUIRE_OK(w8a8_quantize_groups(h, &X, &XQ, &SA, 0));
  REQUIRE_OK(w8a8_quantize_blocks(h, &W, &WQ, &SB, 0));
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, wq); /* the same bytes as b */
  w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, out);
  REQUIRE_OK(w8a8_scaled_mm_blockwise(h, &XQ, &B, &SA, &SB, NULL, &O));
  for (int m = 0; m < M; m++)
    for (int n = 0; n < N; n++) {
      double ref = 0.0, mag = 0.0;
      for (int k = 0; k < K; k++) ref += (double)x[m * K + k] * w[n * K + k], mag += fabs((double)x[m * K + k] * w[n * K + k]);
      CHECK(fabs(out[m * N + n] - ref) <= 0.08 * mag + 1e-6, "out[%d][%d] = %g, fp32 product %g (sum|xw| %g)", m, n,
            (double)out[m * N + n], ref, mag);
    }
  REQUIRE_OK(w8a8_destroy(h));
}

/* Bad input: a specific status naming the call, nothing written. */
W8A8_TEST(blockwise_bad_input) {
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  static uint8_t a[4 * 256], b[8 * 256];
  static int8_t ai[4 * 256];
  static float sa[4 * 2], sb[1 * 2], out[4 * 8];
  for (int i = 0; i < 32; i++) out[i] = -7.0f;
  w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, 4, 256, 256, a);
  w8a8_matrix AI = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 4, 256, 256, ai);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, 256, 8, 256, b);
  w8a8_matrix BI = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, 256, 8, 256, b);
  w8a8_matrix SA = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 4, 2, 2, sa);
  w8a8_matrix SA_BAD = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 4, 1, 1, sa);
  w8a8_matrix SA_BF16 = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, 4, 2, 2, sa);
  w8a8_matrix SB = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 1, 2, 2, sb);
  w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 4, 8, 8, out);
  w8a8_matrix O_ON_SA = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 1, 8, 8, sa);
  CHECK(w8a8_scaled_mm_blockwise(h, &AI, &BI, &SA, &SB, NULL, &O) == W8A8_ERROR_INVALID_DTYPE, "int8 operands");
  CHECK(strstr(w8a8_last_error(), "w8a8_scaled_mm_blockwise") != NULL, "names the call: %s", w8a8_last_error());
  CHECK(w8a8_scaled_mm_blockwise(h, &A, &B, &SA_BAD, &SB, NULL, &O) == W8A8_ERROR_INVALID_SCALE, "scale_a shape");
  CHECK(strstr(w8a8_last_error(), "4 x 2") != NULL, "says the shape it expects: %s", w8a8_last_error());
  CHECK(w8a8_scaled_mm_blockwise(h, &A, &B, &SA_BF16, &SB, NULL, &O) == W8A8_ERROR_INVALID_SCALE, "scale_a dtype");
  CHECK(w8a8_scaled_mm_blockwise(h, &A, &B, &SA, &SA, NULL, &O) == W8A8_ERROR_INVALID_SCALE, "scale_b shape");
  CHECK(w8a8_scaled_mm_blockwise(h, &A, &B, NULL, &SB, NULL, &O) == W8A8_ERROR_NULL_POINTER, "NULL scale_a");
  w8a8_matrix A1 = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, 1, 256, 256, a);
  w8a8_matrix SA1 = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 1, 2, 2, sa + 6);
  (void)SA1;
  CHECK(w8a8_scaled_mm_blockwise(h, &A1, &B, &SA, &SB, NULL, &O_ON_SA) != W8A8_SUCCESS, "shape or overlap refused");
  for (int i = 0; i < 32; i++) CHECK(out[i] == -7.0f, "out[%d] written by a refused call", i);
  /* quantizers */
  static float x[4 * 256];
  static uint8_t q[4 * 256];
  static float s[4 * 2];
  for (int i = 0; i < 8; i++) s[i] = -3.0f;
  w8a8_matrix X = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 4, 256, 256, x);
  w8a8_matrix Q = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, 4, 256, 256, q);
  w8a8_matrix QI = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 4, 256, 256, q);
  w8a8_matrix S = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 4, 2, 2, s);
  w8a8_matrix SBLK = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 1, 2, 2, s);
  CHECK(w8a8_quantize_groups(h, &X, &QI, &S, 0) == W8A8_ERROR_INVALID_DTYPE, "int8 q");
  CHECK(w8a8_quantize_groups(h, &X, &Q, &S, 2) == W8A8_ERROR_INVALID_VALUE, "unknown flag");
  CHECK(w8a8_quantize_groups(h, &X, &Q, &SBLK, 0) == W8A8_ERROR_INVALID_SCALE, "block-shaped scale for groups");
  CHECK(w8a8_quantize_blocks(h, &X, &Q, &S, 0) == W8A8_ERROR_INVALID_SCALE, "group-shaped scale for blocks");
  CHECK(strstr(w8a8_last_error(), "w8a8_quantize_blocks") != NULL, "names the call: %s", w8a8_last_error());
  w8a8_matrix X_ODD = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 4, 255, 256, x);
  CHECK(w8a8_silu_mul_quantize_groups(h, &X_ODD, &Q, &S, 0) == W8A8_ERROR_INVALID_SHAPE, "odd silu x");
  for (int i = 0; i < 8; i++) CHECK(s[i] == -3.0f, "scale[%d] written by a refused call", i);
  REQUIRE_OK(w8a8_destroy(h));
}

#ifndef W8A8_HAVE_CUDA
static void *dev_copy(const void *src, size_t bytes) { return (void)src, (void)bytes, NULL; }
static void dev_back(void *dst, const void *src, size_t bytes) { (void)dst, (void)src, (void)bytes; }
static void dev_free(void *d) { (void)d; }
#else
#include <cuda_runtime.h>

static void *dev_copy(const void *src, size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes) != cudaSuccess) return NULL;
  cudaMemcpy(d, src, bytes, cudaMemcpyHostToDevice);
  return d;
}
static void dev_back(void *dst, const void *src, size_t bytes) {
  cudaDeviceSynchronize();
  cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
}
static void dev_free(void *d) { cudaFree(d); }

/* The portable CUDA kernels give the CPU reference's bits (every fp8 product is exact in fp32 and each block is
 * summed in k order): GEMM and the group / block quantizers, on the same random data. */
W8A8_TEST(blockwise_cuda_matches_cpu) {
  if (w8a8_cuda_device_count() < 1) SKIP("no CUDA device");
  rng_state = 0x5eed0004ull ^ (uint64_t)time(NULL);
  w8a8_handle *c = NULL, *g = NULL;
  REQUIRE_OK(w8a8_create(&c, W8A8_DEVICE_CPU, 0));
  REQUIRE_OK(w8a8_create(&g, W8A8_DEVICE_CUDA, 0));
  static const int64_t shapes[][3] = {{1, 1, 1}, {3, 130, 257}, {70, 200, 384}, {129, 65, 1000}, {256, 384, 512}};
  for (size_t si = 0; si < sizeof shapes / sizeof shapes[0] && !w8a8_test_failed(); si++) {
    const int64_t M = shapes[si][0], N = shapes[si][1], K = shapes[si][2], KB = blocks(K), NB = blocks(N);
    const w8a8_dtype od = si % 3 == 0 ? W8A8_DTYPE_BF16 : si % 3 == 1 ? W8A8_DTYPE_FP16 : W8A8_DTYPE_FP32;
    const size_t es = w8a8_dtype_size(od);
    /* activations and weights in fp32, quantized on both sides */
    float *x = malloc(sizeof(float) * (size_t)(M * K)), *w = malloc(sizeof(float) * (size_t)(N * K));
    for (int64_t i = 0; i < M * K; i++) x[i] = rndf(-4.0f, 4.0f) * (float)(1 + i % 7);
    for (int64_t i = 0; i < N * K; i++) w[i] = rndf(-0.1f, 0.1f);
    uint8_t *xq = malloc((size_t)(M * K)), *wq = malloc((size_t)(N * K)), *gq = malloc((size_t)(N * K + M * K));
    float *sx = malloc(sizeof(float) * (size_t)(M * KB)), *sw = malloc(sizeof(float) * (size_t)(NB * KB));
    float *gs = malloc(sizeof(float) * (size_t)(M * KB + NB * KB));
    void *dx = dev_copy(x, sizeof(float) * (size_t)(M * K)), *dw = dev_copy(w, sizeof(float) * (size_t)(N * K));
    void *dxq = NULL, *dwq = NULL, *dsx = NULL, *dsw = NULL, *dout = NULL, *dbias = NULL;
    REQUIRE(dx && dw && cudaMalloc(&dxq, (size_t)(M * K)) == cudaSuccess && cudaMalloc(&dwq, (size_t)(N * K)) == cudaSuccess &&
                cudaMalloc(&dsx, sizeof(float) * (size_t)(M * KB)) == cudaSuccess &&
                cudaMalloc(&dsw, sizeof(float) * (size_t)(NB * KB)) == cudaSuccess &&
                cudaMalloc(&dout, es * (size_t)(M * N)) == cudaSuccess && cudaMalloc(&dbias, es * (size_t)N) == cudaSuccess,
            "cudaMalloc");
    cudaMemset(dsx, 0xff, sizeof(float) * (size_t)(M * KB)); /* poison */
    cudaMemset(dout, 0x7b, es * (size_t)(M * N));
    const unsigned fl = si % 2 ? W8A8_SCALE_UE8M0 : 0;
    w8a8_matrix X = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, K, K, x);
    w8a8_matrix XQ = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K, xq);
    w8a8_matrix SX = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_COL_MAJOR, M, KB, M, sx);
    w8a8_matrix W = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, N, K, K, w);
    w8a8_matrix WQ = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, N, K, K, wq);
    w8a8_matrix SW = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, NB, KB, KB, sw);
    REQUIRE_OK(w8a8_quantize_groups(c, &X, &XQ, &SX, fl));
    REQUIRE_OK(w8a8_quantize_blocks(c, &W, &WQ, &SW, fl));
    w8a8_matrix DX = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, K, K, dx);
    w8a8_matrix DXQ = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K, dxq);
    w8a8_matrix DSX = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_COL_MAJOR, M, KB, M, dsx);
    w8a8_matrix DW = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, N, K, K, dw);
    w8a8_matrix DWQ = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, N, K, K, dwq);
    w8a8_matrix DSW = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, NB, KB, KB, dsw);
    REQUIRE_OK(w8a8_quantize_groups(g, &DX, &DXQ, &DSX, fl));
    REQUIRE_OK(w8a8_quantize_blocks(g, &DW, &DWQ, &DSW, fl));
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess, "quantizers: %s", cudaGetErrorString(cudaGetLastError()));
    cudaMemcpy(gq, dxq, (size_t)(M * K), cudaMemcpyDeviceToHost);
    cudaMemcpy(gq + M * K, dwq, (size_t)(N * K), cudaMemcpyDeviceToHost);
    cudaMemcpy(gs, dsx, sizeof(float) * (size_t)(M * KB), cudaMemcpyDeviceToHost);
    cudaMemcpy(gs + M * KB, dsw, sizeof(float) * (size_t)(NB * KB), cudaMemcpyDeviceToHost);
    CHECK(memcmp(gq, xq, (size_t)(M * K)) == 0, "M N K %lld %lld %lld: the GPU's group quantization differs",
          (long long)M, (long long)N, (long long)K);
    CHECK(memcmp(gq + M * K, wq, (size_t)(N * K)) == 0, "the GPU's block quantization differs");
    CHECK(memcmp(gs, sx, sizeof(float) * (size_t)(M * KB)) == 0, "the GPU's group scales differ");
    CHECK(memcmp(gs + M * KB, sw, sizeof(float) * (size_t)(NB * KB)) == 0, "the GPU's block scales differ");
    /* the GEMM, with a bias, on the CPU's quantized operands (the same bytes on both sides) */
    char *bias = malloc(es * (size_t)N), *ref = malloc(es * (size_t)(M * N)), *got = malloc(es * (size_t)(M * N));
    for (int64_t n = 0; n < N; n++) {
      const uint32_t bb = round_bits(od, rndf(-1.0f, 1.0f));
      memcpy(bias + es * (size_t)n, &bb, es);
    }
    cudaMemcpy(dbias, bias, es * (size_t)N, cudaMemcpyHostToDevice);
    w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, wq);
    w8a8_matrix O = w8a8_matrix_make(od, W8A8_ROW_MAJOR, M, N, N, ref);
    w8a8_vector BI = w8a8_vector_make(od, N, bias);
    REQUIRE_OK(w8a8_scaled_mm_blockwise(c, &XQ, &B, &SX, &SW, &BI, &O));
    w8a8_matrix DB = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, dwq);
    w8a8_matrix DO = w8a8_matrix_make(od, W8A8_ROW_MAJOR, M, N, N, dout);
    w8a8_vector DBI = w8a8_vector_make(od, N, dbias);
    REQUIRE_OK(w8a8_set_kernel(g, W8A8_KERNEL_GENERIC)); /* the portable kernel, the CPU's bits */
    REQUIRE_OK(w8a8_scaled_mm_blockwise(g, &DXQ, &DB, &DSX, &DSW, &DBI, &DO));
    REQUIRE_OK(w8a8_set_kernel(g, W8A8_KERNEL_AUTO));
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess, "GEMM: %s", cudaGetErrorString(cudaGetLastError()));
    cudaMemcpy(got, dout, es * (size_t)(M * N), cudaMemcpyDeviceToHost);
    int64_t bad = 0;
    for (int64_t i = 0; i < M * N; i++)
      if (out_bits(od, got, i) != out_bits(od, ref, i) && bad++ < 5)
        CHECK(0, "M N K %lld %lld %lld: out[%lld][%lld] bits %08x on the GPU, %08x on the CPU", (long long)M,
              (long long)N, (long long)K, (long long)(i / N), (long long)(i % N), out_bits(od, got, i),
              out_bits(od, ref, i));
    w8a8_launch_info li;
    REQUIRE_OK(w8a8_get_last_launch(g, &li));
    CHECK(strcmp(li.kernel, "cuda-blockwise") == 0, "launch record: %s", li.kernel);
    free(x), free(w), free(xq), free(wq), free(gq), free(sx), free(sw), free(gs), free(bias), free(ref), free(got);
    cudaFree(dx), cudaFree(dw), cudaFree(dxq), cudaFree(dwq), cudaFree(dsx), cudaFree(dsw), cudaFree(dout),
        cudaFree(dbias);
  }
  /* the SiLU-mul group quantizer: the CPU's bits (y = silu(gate) * up by the same operations), partial groups, bf16
   * and fp32 in, both scale layouts, UE8M0 */
  static const int64_t sshapes[][2] = {{1, 128}, {7, 300}, {33, 1000}};
  for (size_t si = 0; si < 3 && !w8a8_test_failed(); si++) {
    const int64_t M = sshapes[si][0], I = sshapes[si][1], KB = blocks(I), ldx = 2 * I + 8;
    const w8a8_dtype xd = si % 2 ? W8A8_DTYPE_BF16 : W8A8_DTYPE_FP32;
    const size_t xs = w8a8_dtype_size(xd);
    char *x = malloc(xs * (size_t)(M * ldx));
    for (int64_t e = 0; e < M * ldx; e++) {
      const float v = rndf(-6.0f, 6.0f) * (float)(1 + e % 5);
      if (xd == W8A8_DTYPE_BF16) {
        const uint16_t u = w8a8_f32_to_bf16(v);
        memcpy(x + 2 * e, &u, 2);
      } else {
        memcpy(x + 4 * e, &v, 4);
      }
    }
    uint8_t *q = malloc((size_t)(M * I)), *gq = malloc((size_t)(M * I));
    float *sc = malloc(sizeof(float) * (size_t)(M * KB)), *gsc = malloc(sizeof(float) * (size_t)(M * KB));
    const w8a8_layout sl = si == 1 ? W8A8_COL_MAJOR : W8A8_ROW_MAJOR;
    const int64_t sld = sl == W8A8_ROW_MAJOR ? KB : M;
    const unsigned fl = si == 2 ? W8A8_SCALE_UE8M0 : 0;
    w8a8_matrix X = w8a8_matrix_make(xd, W8A8_ROW_MAJOR, M, 2 * I, ldx, x);
    w8a8_matrix Q = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, I, I, q);
    w8a8_matrix S = w8a8_matrix_make(W8A8_DTYPE_FP32, sl, M, KB, sld, sc);
    REQUIRE_OK(w8a8_silu_mul_quantize_groups(c, &X, &Q, &S, fl));
    void *dx = dev_copy(x, xs * (size_t)(M * ldx)), *dq = dev_copy(q, (size_t)(M * I));
    void *ds = dev_copy(sc, sizeof(float) * (size_t)(M * KB));
    REQUIRE(dx && dq && ds, "device copies");
    cudaMemset(dq, 0x5a, (size_t)(M * I)), cudaMemset(ds, 0xff, sizeof(float) * (size_t)(M * KB));
    w8a8_matrix DX = w8a8_matrix_make(xd, W8A8_ROW_MAJOR, M, 2 * I, ldx, dx);
    w8a8_matrix DQ = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, I, I, dq);
    w8a8_matrix DS = w8a8_matrix_make(W8A8_DTYPE_FP32, sl, M, KB, sld, ds);
    REQUIRE_OK(w8a8_silu_mul_quantize_groups(g, &DX, &DQ, &DS, fl));
    dev_back(gq, dq, (size_t)(M * I));
    dev_back(gsc, ds, sizeof(float) * (size_t)(M * KB));
    CHECK(memcmp(gq, q, (size_t)(M * I)) == 0, "M %lld I %lld: the GPU's SiLU-mul group quantization differs",
          (long long)M, (long long)I);
    CHECK(memcmp(gsc, sc, sizeof(float) * (size_t)(M * KB)) == 0, "M %lld I %lld: the GPU's SiLU-mul group scales "
          "differ", (long long)M, (long long)I);
    free(x), free(q), free(gq), free(sc), free(gsc);
    dev_free(dx), dev_free(dq), dev_free(ds);
  }
  REQUIRE_OK(w8a8_destroy(c));
  REQUIRE_OK(w8a8_destroy(g));
}

/* What AUTO runs on this GPU (the Hopper kernel on sm_90a, else the portable one) over the tile shapes of its plan:
 * the swapped tiles of 16, 32 and 64 tokens, the 128 x 128 tiles and (1100 x 3900: 144 of them fill 132 SMs) the
 * 128 x 256 ones, each whole, partial and split over K (a cluster per tile), partial groups and blocks, both scale
 * layouts, every output dtype; operands that TMA cannot address
 * (lda % 16 != 0) fall back to the portable kernel under AUTO. */
W8A8_TEST(blockwise_cuda_auto) {
  if (w8a8_cuda_device_count() < 1) SKIP("no CUDA device");
  rng_state = 0x5eed0005ull ^ (uint64_t)time(NULL);
  w8a8_handle *g = NULL;
  REQUIRE_OK(w8a8_create(&g, W8A8_DEVICE_CUDA, 0));
  w8a8_handle_info info;
  REQUIRE_OK(w8a8_get_info(g, &info));
  const int hopper = strstr(info.features, "wgmma") != NULL; /* (w8a8_get_info: where AUTO runs sm_90a code) */
  const char *fast = hopper ? "sm90-blockwise" : "cuda-blockwise";
  printf("    AUTO runs %s here\n", fast);
  static const int64_t shapes[][3] = {{1, 256, 128},   {7, 130, 1000},   {16, 4096, 7168}, {17, 300, 2048},
                                      {40, 2112, 512}, {64, 1024, 4096}, {65, 200, 384},   {128, 512, 1536},
                                      {129, 384, 300}, {300, 1000, 640}, {1, 7168, 64},    {520, 256, 2048},
                                      {1100, 3900, 300}};
  static const w8a8_dtype outs[3] = {W8A8_DTYPE_BF16, W8A8_DTYPE_FP16, W8A8_DTYPE_FP32};
  const char *small = getenv("W8A8_GPU_TEST_SMALL"); /* (the sanitizer's runs: shapes of up to 1 M weights) */
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !w8a8_test_failed(); i++)
    if (!(small && *small == '1' && shapes[i][1] * shapes[i][2] > (1 << 20)))
      gemm_case_on(g, 1, !hopper, fast, 16, 48, shapes[i][0], shapes[i][1], shapes[i][2], outs[i % 3], (int)(i % 2),
                   i % 3 ? W8A8_ROW_MAJOR : W8A8_COL_MAJOR, i % 4 < 2 ? W8A8_ROW_MAJOR : W8A8_COL_MAJOR);
  /* lda not a multiple of 16: the portable kernel, the CPU's bits */
  gemm_case_on(g, 1, 1, "cuda-blockwise", 5, 16, 33, 200, 300, W8A8_DTYPE_BF16, 1, W8A8_ROW_MAJOR, W8A8_ROW_MAJOR);
  REQUIRE_OK(w8a8_destroy(g));
}
#endif
