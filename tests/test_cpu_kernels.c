/* test_cpu_kernels.c — the CPU fast kernels (AVX2, and AVX-512 where the CPU has it)
 * against the scalar reference, on fresh random data every run.
 *
 * Three CPU handles: REFERENCE (ground truth), GENERIC (the AVX2 kernels, what CI's
 * CPUs run) and AUTO (the fastest path: AVX-512 VNNI here when present). int8 results
 * and every quantizer output must match bit for bit; fp8 GEMM within
 * 1e-5 * sum_k |a||b| * |sa*sb| plus one rounding of the output dtype. Outputs are
 * poisoned first and the gaps of strided outputs must stay poisoned.
 * run_all.sh reruns the cpu_ tests with W8A8_CPU_DISABLE=avx2,avx512: GENERIC then
 * reports UNSUPPORTED_DEVICE (checked) and AUTO falls back to the reference. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "core/knobs.h"
#include "cpu/gemm_kernels.h" /* w8a8_cpu_amx{,_bf16}_runs, W8A8_CPU_AMX{,BF16}_MMIN; handle->cpu */

/* ---- random numbers (seeded per run; the seed is printed with every failure) ---- */
static uint64_t g_seed, g_state;
static void rng_init(void) {
  if (!g_seed) {
    const char *s = getenv("W8A8_TEST_SEED");
    g_seed = s ? strtoull(s, NULL, 0) : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid() ^ 0x9e3779b97f4a7c15ull;
    if (!g_seed) g_seed = 1;
    printf("    seed %llu (W8A8_TEST_SEED to repeat)\n", (unsigned long long)g_seed);
    g_state = g_seed;
  }
}
static uint64_t rnd(void) {
  g_state ^= g_state << 13;
  g_state ^= g_state >> 7;
  g_state ^= g_state << 17;
  return g_state;
}
static int rnd_int(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }
static float rnd_unif(float lo, float hi) { return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24); }

/* ---- handles ---- */
typedef struct trio {
  w8a8_handle *ref, *gen, *aut;
  int have_avx2;
} trio;

static int make_trio(trio *t) {
  memset(t, 0, sizeof *t);
  if (w8a8_create(&t->ref, W8A8_DEVICE_CPU, 0) || w8a8_create(&t->gen, W8A8_DEVICE_CPU, 0) ||
      w8a8_create(&t->aut, W8A8_DEVICE_CPU, 0))
    return -1;
  if (w8a8_set_kernel(t->ref, W8A8_KERNEL_REFERENCE) || w8a8_set_kernel(t->gen, W8A8_KERNEL_GENERIC)) return -1;
  w8a8_handle_info info;
  if (w8a8_get_info(t->gen, &info)) return -1;
  t->have_avx2 = strstr(info.features, "avx2") && strstr(info.features, "fma") && strstr(info.features, "f16c");
  return 0;
}
static void free_trio(trio *t) {
  w8a8_destroy(t->ref);
  w8a8_destroy(t->gen);
  w8a8_destroy(t->aut);
}

/* ---- GEMM case ---- */
typedef struct mm_case {
  int64_t M, N, K, pad_a, pad_b, pad_o; /* ld = cols + pad */
  w8a8_dtype in, out;
  int sa_tok, sb_chan, bias;
  int azp; /* 0 none, 1 adj only (premultiplied), 2 per tensor, 3 per token */
  int extreme; /* int8: 0 random, 1 mostly -128/127, 2 all -128 */
  int threads;
} mm_case;

static uint16_t f32_bits_hi(float f) { /* a bf16 with this value's top bits (exact for the values we use) */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}

static size_t osize(w8a8_dtype t) { return t == W8A8_DTYPE_FP32 ? 4 : 2; }
static double out_value(w8a8_dtype t, const void *base, int64_t i) {
  if (t == W8A8_DTYPE_FP32) return ((const float *)base)[i];
  uint16_t h = ((const uint16_t *)base)[i];
  if (t == W8A8_DTYPE_BF16) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  /* fp16 */
  int e = (h >> 10) & 31, m = h & 1023;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -v : v;
}
static double fp8_value(uint8_t v) {
  int e = (v >> 3) & 15, m = v & 7;
  if (e == 15 && m == 7) return NAN;
  double r = e == 0 ? ldexp(m, -9) : ldexp(8 + m, e - 10);
  return (v & 0x80) ? -r : r;
}

static uint8_t rnd_fp8(void) {
  uint8_t v;
  do v = (uint8_t)rnd(); while ((v & 0x7f) == 0x7f); /* no NaN: a NaN test has its own case */
  return v;
}

/* Runs one case on every handle; returns the number of mismatching elements. */
static long run_mm(trio *t, const mm_case *c, const char *what) {
  const int64_t M = c->M, N = c->N, K = c->K;
  const int64_t lda = K + c->pad_a, ldb = K + c->pad_b, ldo = N + c->pad_o;
  const size_t os = osize(c->out);
  uint8_t *a = malloc((size_t)(M * lda) + 1), *b = malloc((size_t)(N * ldb) + 1);
  float *sa = malloc(sizeof(float) * (size_t)(M + 1)), *sb = malloc(sizeof(float) * (size_t)(N + 1));
  char *bias = malloc(os * (size_t)(N + 1));
  int32_t *azp = malloc(4 * (size_t)(M + 1)), *adj = malloc(4 * (size_t)(N + 1));
  char *ref = malloc(os * (size_t)(M * ldo) + 1), *out = malloc(os * (size_t)(M * ldo) + 1);
  double *mag = calloc((size_t)(M * N) + 1, sizeof(double));
  long bad = 0;
  for (int64_t i = 0; i < M * lda; i++) {
    if (c->in == W8A8_DTYPE_FP8_E4M3) a[i] = rnd_fp8();
    else if (c->extreme == 2) a[i] = 0x80;
    else if (c->extreme == 1) a[i] = (rnd() & 3) ? (rnd() & 1 ? 0x80 : 0x7f) : (uint8_t)rnd();
    else a[i] = (uint8_t)rnd();
  }
  for (int64_t i = 0; i < N * ldb; i++) {
    if (c->in == W8A8_DTYPE_FP8_E4M3) b[i] = rnd_fp8();
    else if (c->extreme == 2) b[i] = 0x80;
    else if (c->extreme == 1) b[i] = (rnd() & 3) ? (rnd() & 1 ? 0x80 : 0x7f) : (uint8_t)rnd();
    else b[i] = (uint8_t)rnd();
  }
  for (int64_t i = 0; i <= M; i++) sa[i] = rnd_unif(1e-3f, 2e-2f) * (c->in == W8A8_DTYPE_FP8_E4M3 ? 0.05f : 1.0f);
  for (int64_t i = 0; i <= N; i++) sb[i] = rnd_unif(1e-3f, 2e-2f);
  for (int64_t i = 0; i <= N; i++) {
    float v = rnd_unif(-4.0f, 4.0f);
    if (c->out == W8A8_DTYPE_FP32) ((float *)bias)[i] = v;
    else if (c->out == W8A8_DTYPE_BF16) ((uint16_t *)bias)[i] = f32_bits_hi(v);
    else ((uint16_t *)bias)[i] = (uint16_t)(0x3c00 + (rnd() % 0x600) - 0x300) | (uint16_t)(rnd() & 0x8000);
  }
  for (int64_t i = 0; i <= M; i++) azp[i] = rnd_int(-128, 127);
  for (int64_t n = 0; n < N; n++) {
    int32_t s = 0;
    for (int64_t k = 0; k < K; k++) s += (int8_t)b[n * ldb + k];
    adj[n] = c->azp == 1 ? s * rnd_int(-128, 127) : s;
  }
  w8a8_matrix A = w8a8_matrix_make(c->in, W8A8_ROW_MAJOR, M, K, lda, a);
  w8a8_matrix B = w8a8_matrix_make(c->in, W8A8_COL_MAJOR, K, N, ldb, b);
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, c->sa_tok ? M : 1, sa);
  w8a8_vector SB = w8a8_vector_make(W8A8_DTYPE_FP32, c->sb_chan ? N : 1, sb);
  w8a8_vector BI = w8a8_vector_make(c->out, N, bias);
  w8a8_zero_point ZP;
  ZP.azp = w8a8_vector_make(W8A8_DTYPE_INT32, c->azp == 3 ? M : 1, c->azp == 1 ? NULL : azp);
  ZP.azp_adj = w8a8_vector_make(W8A8_DTYPE_INT32, N, adj);
  const w8a8_zero_point *zp = c->azp ? &ZP : NULL;

  memset(ref, 0xa5, os * (size_t)(M * ldo));
  w8a8_matrix R = w8a8_matrix_make(c->out, W8A8_ROW_MAJOR, M, N, ldo, ref);
  w8a8_status s = w8a8_scaled_mm(t->ref, &A, &B, &SA, &SB, c->bias ? &BI : NULL, zp, &R);
  if (s != W8A8_SUCCESS) {
    CHECK(0, "%s: reference failed: %s", what, w8a8_last_error());
    bad = 1;
    goto done;
  }
  /* sum_k |a||b| for the fp8 bound */
  if (c->in == W8A8_DTYPE_FP8_E4M3)
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) acc += fabs(fp8_value(a[m * lda + k]) * fp8_value(b[n * ldb + k]));
        mag[m * N + n] = acc;
      }
  for (int hi = 0; hi < 2; hi++) {
    w8a8_handle *h = hi == 0 ? t->gen : t->aut;
    const char *hn = hi == 0 ? "GENERIC" : "AUTO";
    w8a8_set_num_threads(h, c->threads);
    memset(out, 0xa5, os * (size_t)(M * ldo));
    w8a8_matrix O = w8a8_matrix_make(c->out, W8A8_ROW_MAJOR, M, N, ldo, out);
    s = w8a8_scaled_mm(h, &A, &B, &SA, &SB, c->bias ? &BI : NULL, zp, &O);
    if (hi == 0 && !t->have_avx2) {
      CHECK(s == W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: GENERIC without AVX2 returned %s", what, w8a8_status_name(s));
      continue;
    }
    if (s != W8A8_SUCCESS) {
      CHECK(0, "%s %s: %s: %s", what, hn, w8a8_status_name(s), w8a8_last_error());
      bad++;
      continue;
    }
    long nbad = 0;
    for (int64_t m = 0; m < M; m++) {
      /* the gap between N and ldo is not ours to write */
      for (int64_t n = N; n < ldo; n++)
        for (size_t q = 0; q < os; q++)
          if ((uint8_t)out[(size_t)(m * ldo + n) * os + q] != 0xa5) nbad++;
      for (int64_t n = 0; n < N; n++) {
        const size_t off = (size_t)(m * ldo + n) * os;
        if (c->in == W8A8_DTYPE_INT8) {
          if (memcmp(out + off, ref + off, os) != 0) {
            if (nbad < 3)
              CHECK(0, "%s %s: out[%lld,%lld] = %.9g, reference %.9g (bits differ; seed %llu)", what, hn, (long long)m,
                    (long long)n, out_value(c->out, out, m * ldo + n), out_value(c->out, ref, m * ldo + n),
                    (unsigned long long)g_seed);
            nbad++;
          }
        } else {
          double o = out_value(c->out, out, m * ldo + n), r = out_value(c->out, ref, m * ldo + n);
          double ssa = sa[c->sa_tok ? m : 0], ssb = sb[c->sb_chan ? n : 0];
          /* one ulp of the output dtype (fp32: two, for the epilogue's roundings of t and r) */
          double rel = c->out == W8A8_DTYPE_BF16 ? 0x1p-7 : c->out == W8A8_DTYPE_FP16 ? 0x1p-10 : 0x1p-22;
          double tol = 1e-5 * mag[m * N + n] * fabs(ssa * ssb) + rel * fmax(fabs(o), fabs(r)) +
                       (c->out == W8A8_DTYPE_FP16 ? 0x1p-24 : 0x1p-126);
          int ok = isnan(r) ? isnan(o) : (isinf(r) ? o == r : fabs(o - r) <= tol);
          if (!ok) {
            if (nbad < 3)
              CHECK(0, "%s %s: out[%lld,%lld] = %.9g, reference %.9g, tolerance %.3g (seed %llu)", what, hn,
                    (long long)m, (long long)n, o, r, tol, (unsigned long long)g_seed);
            nbad++;
          }
        }
      }
    }
    if (nbad) CHECK(0, "%s %s: %ld of %lld elements wrong", what, hn, nbad, (long long)(M * N));
    bad += nbad;
  }
done:
  free(a), free(b), free(sa), free(sb), free(bias), free(azp), free(adj), free(ref), free(out), free(mag);
  return bad;
}

static const w8a8_dtype OUTS[3] = {W8A8_DTYPE_BF16, W8A8_DTYPE_FP16, W8A8_DTYPE_FP32};

/* Every scale mode x output dtype x bias x zero-point mode, on an odd strided shape. */
static void all_modes(w8a8_dtype in) {
  rng_init();
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  int nazp = in == W8A8_DTYPE_INT8 ? 4 : 1;
  int idx = 0;
  for (int sat = 0; sat < 2; sat++)
    for (int sbc = 0; sbc < 2; sbc++)
      for (int o = 0; o < 3; o++)
        for (int bias = 0; bias < 2; bias++)
          for (int z = 0; z < nazp; z++, idx++) {
            mm_case c = {0};
            /* alternate a prefill-like and a decode-like shape (int8: the packed and the raw-B kernels) */
            c.M = idx & 1 ? 3 : 53;
            c.N = 29;
            c.K = idx & 2 ? 77 : 40;
            c.pad_a = idx % 3, c.pad_b = (idx / 3) % 4, c.pad_o = idx % 5;
            c.in = in, c.out = OUTS[o];
            c.sa_tok = sat, c.sb_chan = sbc, c.bias = bias, c.azp = z;
            c.threads = 1 + (idx & 1);
            char what[128];
            snprintf(what, sizeof what, "%s M%lld N%lld K%lld sa%d sb%d out=%s bias%d azp%d", w8a8_dtype_name(in),
                     (long long)c.M, (long long)c.N, (long long)c.K, sat, sbc, w8a8_dtype_name(c.out), bias, z);
            run_mm(&t, &c, what);
          }
  free_trio(&t);
}

W8A8_TEST(cpu_gemm_int8_all_modes) { all_modes(W8A8_DTYPE_INT8); }
W8A8_TEST(cpu_gemm_fp8_all_modes) { all_modes(W8A8_DTYPE_FP8_E4M3); }

/* Odd shapes, tails of every loop, strides, both thread counts. */
static void shapes(w8a8_dtype in) {
  rng_init();
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  static const int64_t Ms[] = {1, 2, 3, 4, 5, 17, 33};
  static const int64_t Ns[] = {1, 7, 13, 50};
  static const int64_t Ks[] = {0, 1, 13, 31, 64, 100};
  for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
    for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
      for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++) {
        mm_case c = {0};
        c.M = Ms[mi], c.N = Ns[ni], c.K = Ks[ki];
        c.pad_a = rnd_int(0, 1) * rnd_int(1, 9), c.pad_b = rnd_int(0, 1) * rnd_int(1, 9),
        c.pad_o = rnd_int(0, 1) * rnd_int(1, 5);
        c.in = in, c.out = OUTS[rnd_int(0, 2)];
        c.sa_tok = rnd_int(0, 1), c.sb_chan = rnd_int(0, 1), c.bias = rnd_int(0, 1);
        c.azp = in == W8A8_DTYPE_INT8 ? rnd_int(0, 3) : 0;
        c.threads = rnd_int(1, 2);
        char what[96];
        snprintf(what, sizeof what, "%s M%lld N%lld K%lld", w8a8_dtype_name(in), (long long)c.M, (long long)c.N,
                 (long long)c.K);
        if (run_mm(&t, &c, what) && w8a8_test_failed()) goto out;
      }
  /* larger: several panels, blocks of A (M > 256), B slices (K > KC), decode with a long K */
  static const int64_t big[][3] = {{67, 130, 257}, {300, 20, 40}, {9, 61, 2100}, {3, 50, 2113}, {1, 97, 4099}};
  for (size_t i = 0; i < sizeof big / sizeof *big; i++)
    for (int th = 1; th <= 2; th++) {
      mm_case c = {0};
      c.M = big[i][0], c.N = big[i][1], c.K = big[i][2];
      c.pad_a = 3, c.pad_b = 5, c.pad_o = 2;
      c.in = in, c.out = OUTS[rnd_int(0, 2)];
      c.sa_tok = 1, c.sb_chan = 1, c.bias = rnd_int(0, 1);
      c.azp = in == W8A8_DTYPE_INT8 ? rnd_int(0, 3) : 0;
      c.threads = th;
      char what[96];
      snprintf(what, sizeof what, "%s M%lld N%lld K%lld threads %d", w8a8_dtype_name(in), (long long)c.M,
               (long long)c.N, (long long)c.K, th);
      run_mm(&t, &c, what);
    }
out:
  free_trio(&t);
}

W8A8_TEST(cpu_gemm_int8_shapes) { shapes(W8A8_DTYPE_INT8); }
W8A8_TEST(cpu_gemm_fp8_shapes) { shapes(W8A8_DTYPE_FP8_E4M3); }

/* The outer-product paths (AVX2: int8 M >= 49, fp8 M >= 32; VNNI: int8 M >= 16, K % 4 == 0):
 * row-panel tails, column-tile tails, k-pair/quad tails, slice boundaries (KC 512/1024),
 * two A blocks (M > 256), rows split across threads (N <= 48), strides, both thread counts,
 * M = 255..257 with several items per thread. */
static void outer_shapes(w8a8_dtype in) {
  rng_init();
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  const int64_t m0 = in == W8A8_DTYPE_INT8 ? 49 : 32;
  const int64_t cases[][3] = {{m0, 1, 1},      {m0, 6, 2},       {m0 + 1, 7, 3},   {64, 47, 513},
                              {65, 49, 1025},  {96, 20, 1023},   {100, 97, 2049},  {127, 5, 64},
                              {256, 53, 130},  {273, 50, 77},    {300, 13, 1100},  {m0 + 15, 96, 4},
                              /* int8 M 16..48 with K % 4 == 0: the VNNI path where there is one */
                              {16, 50, 1028},  {17, 12, 4},      {33, 100, 2048},
                              /* M = 255/256/257 around one A block, several column items (the B
                               * prefetch of the next slice and of the next item, last item
                               * included), N and K off every block size */
                              {255, 101, 1100}, {256, 150, 1030}, {257, 99, 600}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int th = 1; th <= 2; th++) {
      mm_case c = {0};
      c.M = cases[i][0], c.N = cases[i][1], c.K = cases[i][2];
      c.pad_a = rnd_int(0, 1) * rnd_int(1, 9), c.pad_b = rnd_int(0, 1) * rnd_int(1, 9),
      c.pad_o = rnd_int(0, 1) * rnd_int(1, 5);
      c.in = in, c.out = OUTS[rnd_int(0, 2)];
      c.sa_tok = rnd_int(0, 1), c.sb_chan = rnd_int(0, 1), c.bias = rnd_int(0, 1);
      c.azp = in == W8A8_DTYPE_INT8 ? rnd_int(0, 3) : 0;
      c.threads = th;
      char what[96];
      snprintf(what, sizeof what, "outer %s M%lld N%lld K%lld threads %d", w8a8_dtype_name(in), (long long)c.M,
               (long long)c.N, (long long)c.K, th);
      if (run_mm(&t, &c, what) && w8a8_test_failed()) goto out;
    }
out:
  free_trio(&t);
}

W8A8_TEST(cpu_gemm_int8_outer_shapes) { outer_shapes(W8A8_DTYPE_INT8); }
W8A8_TEST(cpu_gemm_fp8_outer_shapes) { outer_shapes(W8A8_DTYPE_FP8_E4M3); }

/* On an AVX-512 VNNI CPU, int8 with K % 4 == 0 and M >= 16 runs gemm_avx512vnni.c (and fp8's
 * outer path an AVX-512 kernel); the AVX2 kernels (what CI's CPUs run) are then covered here, on handles created with AVX-512 off
 * (the features are read at w8a8_create). A runner that already restricts the ISA
 * (W8A8_CPU_DISABLE=avx2: scalar fallback) is left as it is. */
static void without_avx512(void (*fn)(w8a8_dtype), w8a8_dtype in) {
  if (getenv("W8A8_CPU_DISABLE")) {
    fn(in);
    return;
  }
  w8a8_dev_set("CPU_DISABLE", "avx512");
  fn(in);
  w8a8_dev_set("CPU_DISABLE", NULL);
}
W8A8_TEST(cpu_gemm_int8_outer_shapes_avx2) { without_avx512(outer_shapes, W8A8_DTYPE_INT8); }
W8A8_TEST(cpu_gemm_int8_all_modes_avx2) { without_avx512(all_modes, W8A8_DTYPE_INT8); }
/* fp8's outer path likewise has an AVX-512 FMA kernel next to the AVX2 one */
W8A8_TEST(cpu_gemm_fp8_outer_shapes_avx2) { without_avx512(outer_shapes, W8A8_DTYPE_FP8_E4M3); }

/* On an AMX CPU, int8 with M >= 3 runs gemm_amx.c; the VNNI kernel and the raw decode path
 * (M 3..48) are then covered here, on handles created with AMX off (the other AVX-512 paths stay on). */
static void without_amx(void (*fn)(w8a8_dtype), w8a8_dtype in) {
  if (getenv("W8A8_CPU_DISABLE")) {
    fn(in);
    return;
  }
  w8a8_dev_set("CPU_DISABLE", "amx");
  fn(in);
  w8a8_dev_set("CPU_DISABLE", NULL);
}
W8A8_TEST(cpu_gemm_int8_outer_shapes_vnni) { without_amx(outer_shapes, W8A8_DTYPE_INT8); }
W8A8_TEST(cpu_gemm_int8_all_modes_vnni) { without_amx(all_modes, W8A8_DTYPE_INT8); }
W8A8_TEST(cpu_gemm_int8_shapes_noamx) { without_amx(shapes, W8A8_DTYPE_INT8); }

/* The AMX kernel (gemm_amx.c) on the shapes around its tiles: M around 16-row tiles and the
 * 256-row A block, N around 16/32/64-column tiles and items, K around 64-byte chunks (13: one
 * partial chunk; 4096: many), every element bit-exact against the reference, strided A, B and
 * out, and every scale / bias / zero-point / output dtype combination cycled over the shapes.
 * The AUTO handle must really have run the AMX path for every case with M >= 3 (the kernel's
 * run counter); where AMX is not usable (CI's AMD CPUs, W8A8_CPU_DISABLE) the test is skipped. */
W8A8_TEST(cpu_gemm_int8_amx) {
  rng_init();
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  const int amx = t.aut->cpu.amx;
  if (!amx) {
    free_trio(&t);
    SKIP("AMX is not usable here (CPUID/XCR0/permission, or W8A8_CPU_DISABLE)");
  }
  static const int64_t Ms[] = {1, 3, 16, 17, 255}; /* 1: the raw decode path; 3: AMX's smallest M */
  static const int64_t Ns[] = {7, 64, 100};
  static const int64_t Ks[] = {13, 64, 100, 4096};
  int idx = 0;
  long want = 0;
  const long runs0 = w8a8_cpu_amx_runs();
  for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
    for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
      for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++, idx++) {
        mm_case c = {0};
        c.M = Ms[mi], c.N = Ns[ni], c.K = Ks[ki];
        c.pad_a = idx % 3 ? rnd_int(1, 9) : 0, c.pad_b = idx % 4 ? rnd_int(1, 70) : 0, c.pad_o = idx % 2 ? rnd_int(1, 5) : 0;
        c.in = W8A8_DTYPE_INT8, c.out = OUTS[idx % 3];
        c.sa_tok = (idx >> 1) & 1, c.sb_chan = (idx >> 2) & 1, c.bias = (idx / 3) & 1, c.azp = idx % 4;
        c.threads = 1 + (idx & 1);
        char what[128];
        snprintf(what, sizeof what, "amx M%lld N%lld K%lld sa%d sb%d out=%s bias%d azp%d threads %d", (long long)c.M,
                 (long long)c.N, (long long)c.K, c.sa_tok, c.sb_chan, w8a8_dtype_name(c.out), c.bias, c.azp, c.threads);
        run_mm(&t, &c, what);
        if (c.M >= W8A8_CPU_AMX_MMIN) want += 2; /* GENERIC and AUTO both take the fast kernels */
      }
  CHECK(w8a8_cpu_amx_runs() - runs0 == want, "the AMX kernel ran %ld times for %ld eligible cases",
        w8a8_cpu_amx_runs() - runs0, want);
  /* several 4 KiB k slices (C accumulated across them), two 256-column items, the tail of each */
  {
    static const int64_t sh[][3] = {{17, 9, 12289}, {40, 300, 8200}, {300, 70, 4160}};
    const long r0 = w8a8_cpu_amx_runs();
    for (int i = 0; i < 3; i++) {
      mm_case c = {0};
      c.M = sh[i][0], c.N = sh[i][1], c.K = sh[i][2], c.pad_a = 3, c.pad_b = 1, c.pad_o = 2;
      c.in = W8A8_DTYPE_INT8, c.out = OUTS[i], c.sa_tok = 1, c.sb_chan = 1, c.bias = 1, c.azp = 3 - i;
      c.threads = 2 - (i & 1);
      char what[96];
      snprintf(what, sizeof what, "amx k slices M%lld N%lld K%lld", (long long)c.M, (long long)c.N, (long long)c.K);
      run_mm(&t, &c, what);
    }
    CHECK(w8a8_cpu_amx_runs() - r0 == 6, "the AMX kernel ran %ld times for 3 long-K cases", w8a8_cpu_amx_runs() - r0);
  }
  free_trio(&t);
}

/* On an AMX-BF16 CPU, fp8 runs gemm_amx.c at every M >= W8A8_CPU_AMXBF16_MMIN; the FMA
 * paths (dot, AVX-512 outer) are then covered here, on handles created with AMX off. */
W8A8_TEST(cpu_gemm_fp8_all_modes_noamx) { without_amx(all_modes, W8A8_DTYPE_FP8_E4M3); }
W8A8_TEST(cpu_gemm_fp8_shapes_noamx) { without_amx(shapes, W8A8_DTYPE_FP8_E4M3); }
W8A8_TEST(cpu_gemm_fp8_outer_shapes_noamx) { without_amx(outer_shapes, W8A8_DTYPE_FP8_E4M3); }

static int amx_bf16_usable(const trio *t) { return t->aut->cpu.amx_bf16; }

/* The AMX-BF16 fp8 kernel (gemm_amx.c) on the shapes around its tiles (M around 16-row
 * panels and the 256-row block, N around 16/32-column tiles, K around 32-k chunks: 13 one partial
 * chunk, 4096 two 2048-k slices), strided A, B and out, every scale / bias / output dtype cycled
 * over the shapes; every element against the reference within the fp8 tolerance of run_mm. The
 * run counter proves the kernel ran for every case; skipped where AMX-BF16 is not usable. */
W8A8_TEST(cpu_gemm_fp8_amx_bf16) {
  rng_init();
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  if (!amx_bf16_usable(&t)) {
    free_trio(&t);
    SKIP("AMX-BF16 is not usable here (CPUID/XCR0/permission, or W8A8_CPU_DISABLE)");
  }
  static const int64_t Ms[] = {1, 16, 17, 255};
  static const int64_t Ns[] = {7, 64, 100};
  static const int64_t Ks[] = {13, 64, 100, 4096};
  int idx = 0;
  long want = 0;
  const long runs0 = w8a8_cpu_amx_bf16_runs();
  for (size_t mi = 0; mi < sizeof Ms / sizeof *Ms; mi++)
    for (size_t ni = 0; ni < sizeof Ns / sizeof *Ns; ni++)
      for (size_t ki = 0; ki < sizeof Ks / sizeof *Ks; ki++, idx++) {
        mm_case c = {0};
        c.M = Ms[mi], c.N = Ns[ni], c.K = Ks[ki];
        c.pad_a = idx % 3 ? rnd_int(1, 9) : 0, c.pad_b = idx % 4 ? rnd_int(1, 70) : 0, c.pad_o = idx % 2 ? rnd_int(1, 5) : 0;
        c.in = W8A8_DTYPE_FP8_E4M3, c.out = OUTS[idx % 3];
        c.sa_tok = (idx >> 1) & 1, c.sb_chan = (idx >> 2) & 1, c.bias = (idx / 3) & 1;
        c.threads = 1 + (idx & 1);
        char what[128];
        snprintf(what, sizeof what, "amx-bf16 M%lld N%lld K%lld sa%d sb%d out=%s bias%d threads %d", (long long)c.M,
                 (long long)c.N, (long long)c.K, c.sa_tok, c.sb_chan, w8a8_dtype_name(c.out), c.bias, c.threads);
        run_mm(&t, &c, what);
        if (c.M >= W8A8_CPU_AMXBF16_MMIN) want += 2; /* GENERIC and AUTO both take the fast kernels */
      }
  CHECK(w8a8_cpu_amx_bf16_runs() - runs0 == want, "the AMX-BF16 kernel ran %ld times for %ld eligible cases",
        w8a8_cpu_amx_bf16_runs() - runs0, want);
  /* several 2048-k slices (C^T reloaded across them), two 256-column items and their tails, two
   * A blocks (M > 256), rows split across threads (N <= 256) */
  {
    static const int64_t sh[][3] = {{17, 9, 6145}, {40, 300, 4100}, {300, 70, 2080}, {33, 513, 100}};
    const long r0 = w8a8_cpu_amx_bf16_runs();
    for (int i = 0; i < 4; i++) {
      mm_case c = {0};
      c.M = sh[i][0], c.N = sh[i][1], c.K = sh[i][2], c.pad_a = 3, c.pad_b = 1, c.pad_o = 2;
      c.in = W8A8_DTYPE_FP8_E4M3, c.out = OUTS[i % 3], c.sa_tok = 1, c.sb_chan = 1, c.bias = 1;
      c.threads = 2 - (i & 1);
      char what[96];
      snprintf(what, sizeof what, "amx-bf16 k slices M%lld N%lld K%lld", (long long)c.M, (long long)c.N, (long long)c.K);
      run_mm(&t, &c, what);
    }
    CHECK(w8a8_cpu_amx_bf16_runs() - r0 == 8, "the AMX-BF16 kernel ran %ld times for 4 cases", w8a8_cpu_amx_bf16_runs() - r0);
  }
  free_trio(&t);
}

/* Extreme fp8 operands on the AMX-BF16 kernel against the reference, every element: NaN (0x7f and
 * 0xff) in A rows and B columns at the start, inside and in the K tail of a chunk and of a 2048-k
 * slice (the output row / column must be NaN, everything else finite and within tolerance, as the
 * reference computes it); all +-448 (the largest products); all subnormals (the smallest). e4m3fn
 * has no infinities, so NaN is the only non-finite input. */
W8A8_TEST(cpu_gemm_fp8_amx_bf16_nan_extremes) {
  rng_init();
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  if (!amx_bf16_usable(&t)) {
    free_trio(&t);
    SKIP("AMX-BF16 is not usable here (CPUID/XCR0/permission, or W8A8_CPU_DISABLE)");
  }
  const long runs0 = w8a8_cpu_amx_bf16_runs();
  static const int64_t sh[][3] = {{20, 37, 2061}, {3, 40, 45}};
  for (int si = 0; si < 2; si++) {
    const int64_t M = sh[si][0], N = sh[si][1], K = sh[si][2];
    for (int mode = 0; mode < 3; mode++) {
      uint8_t *a = malloc((size_t)(M * K)), *b = malloc((size_t)(N * K));
      float *ref = malloc(sizeof(float) * (size_t)(M * N)), *out = malloc(sizeof(float) * (size_t)(M * N));
      for (int64_t i = 0; i < M * K; i++)
        a[i] = mode == 1 ? (uint8_t)(0x7e | (rnd() & 0x80)) : mode == 2 ? (uint8_t)((rnd() % 7 + 1) | (rnd() & 0x80)) : rnd_fp8();
      for (int64_t i = 0; i < N * K; i++)
        b[i] = mode == 1 ? (uint8_t)(0x7e | (rnd() & 0x80)) : mode == 2 ? (uint8_t)((rnd() % 7 + 1) | (rnd() & 0x80)) : rnd_fp8();
      int nan_row = -1, nan_col = -1;
      if (mode == 0) {
        nan_row = (int)(M / 2), nan_col = (int)(N - 2);
        a[nan_row * K + 0] = 0x7f;                        /* chunk start */
        a[(M - 1) * K + K - 1] = 0xff;                    /* last row, K tail */
        b[nan_col * K + (K > 2048 ? 2047 : 31)] = 0xff;   /* end of a slice / chunk */
        b[0 * K + K - 1] = 0x7f;                          /* column 0, K tail */
      }
      float sa = 0.01f, sb = 0.02f;
      w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K, a);
      w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, b);
      w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sb);
      w8a8_matrix R = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, ref);
      memset(ref, 0xa5, sizeof(float) * (size_t)(M * N));
      REQUIRE_OK(w8a8_scaled_mm(t.ref, &A, &B, &SA, &SB, NULL, NULL, &R));
      memset(out, 0xa5, sizeof(float) * (size_t)(M * N));
      w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, out);
      w8a8_set_num_threads(t.aut, 2);
      REQUIRE_OK(w8a8_scaled_mm(t.aut, &A, &B, &SA, &SB, NULL, NULL, &O));
      long nbad = 0;
      for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
          const double o = out[m * N + n], r = ref[m * N + n];
          double mag = 0;
          for (int64_t k = 0; k < K; k++) mag += fabs(fp8_value(a[m * K + k]) * fp8_value(b[n * K + k]));
          const int want_nan = mode == 0 && (m == nan_row || m == M - 1 || n == nan_col || n == 0);
          const double tol = 1e-5 * mag * (double)sa * (double)sb + 0x1p-22 * fmax(fabs(o), fabs(r)) + 0x1p-126;
          const int ok = want_nan ? (isnan(o) && isnan(r)) : (!isnan(r) && !isnan(o) && fabs(o - r) <= tol);
          if (!ok && nbad++ < 3)
            CHECK(0, "M%lld N%lld K%lld mode %d: out[%lld,%lld] = %.9g, reference %.9g (seed %llu)", (long long)M,
                  (long long)N, (long long)K, mode, (long long)m, (long long)n, o, r, (unsigned long long)g_seed);
        }
      CHECK(nbad == 0, "M%lld N%lld K%lld mode %d: %ld elements wrong", (long long)M, (long long)N, (long long)K, mode,
            nbad);
      free(a), free(b), free(ref), free(out);
    }
  }
  CHECK(w8a8_cpu_amx_bf16_runs() - runs0 == 6, "the AMX-BF16 kernel ran %ld times for 6 cases",
        w8a8_cpu_amx_bf16_runs() - runs0);
  free_trio(&t);
}

/* -128 everywhere: -128*-128 + -128*-128 = 32768 is where vpmaddubsw saturates. */
static void extremes(w8a8_dtype in) {
  (void)in;
  rng_init();
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  static const int64_t sh[][3] = {{1, 9, 4000},  {4, 7, 33},     {20, 13, 4000},
                                  {6, 50, 131},  {50, 13, 2500}, {100, 31, 3001}};
  for (int ex = 1; ex <= 2; ex++)
    for (size_t i = 0; i < sizeof sh / sizeof *sh; i++) {
      mm_case c = {0};
      c.M = sh[i][0], c.N = sh[i][1], c.K = sh[i][2];
      c.in = W8A8_DTYPE_INT8, c.out = W8A8_DTYPE_FP32;
      c.sa_tok = 1, c.sb_chan = 1, c.extreme = ex, c.threads = 2, c.azp = rnd_int(0, 3);
      char what[96];
      snprintf(what, sizeof what, "int8 %s M%lld N%lld K%lld", ex == 2 ? "all -128" : "mostly -128/127",
               (long long)c.M, (long long)c.N, (long long)c.K);
      run_mm(&t, &c, what);
    }
  free_trio(&t);
}
W8A8_TEST(cpu_gemm_int8_extremes) { extremes(W8A8_DTYPE_INT8); }
W8A8_TEST(cpu_gemm_int8_extremes_avx2) { without_avx512(extremes, W8A8_DTYPE_INT8); }
W8A8_TEST(cpu_gemm_int8_extremes_vnni) { without_amx(extremes, W8A8_DTYPE_INT8); }

/* fp8 NaN operands give NaN outputs (the reference's rule) on the fast paths too. */
W8A8_TEST(cpu_gemm_fp8_nan) {
  rng_init();
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  const int64_t M = 6, N = 5, K = 40;
  uint8_t a[6 * 40], b[5 * 40];
  for (int i = 0; i < M * K; i++) a[i] = rnd_fp8();
  for (int i = 0; i < N * K; i++) b[i] = rnd_fp8();
  a[2 * K + 17] = 0x7f;  /* row 2 NaN */
  b[3 * K + 39] = 0xff;  /* column 3 NaN (in the K tail of a 16-wide chunk) */
  float sa = 0.01f, sb = 0.02f;
  w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K, a);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, b);
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sb);
  for (int hi = 0; hi < 2; hi++) {
    w8a8_handle *h = hi ? t.aut : t.gen;
    if (!hi && !t.have_avx2) continue;
    float out[30];
    memset(out, 0xa5, sizeof out);
    w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, out);
    REQUIRE_OK(w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O));
    for (int m = 0; m < M; m++)
      for (int n = 0; n < N; n++)
        CHECK(!!isnan(out[m * N + n]) == (m == 2 || n == 3), "handle %d out[%d,%d] = %g", hi, m, n, out[m * N + n]);
  }
  free_trio(&t);
}

/* A forced GENERIC handle must run the AVX2 kernel, not quietly defer to the reference. */
W8A8_TEST(cpu_gemm_generic_runs_fast_path) {
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  int8_t a[64] = {0}, b[64] = {0};
  float sa = 1, sb = 1, out[1] = {0};
  w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 1, 64, 64, a);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, 64, 1, 64, b);
  w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 1, 1, 1, out);
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sb);
  w8a8_status s = w8a8_scaled_mm(t.gen, &A, &B, &SA, &SB, NULL, NULL, &O);
  if (t.have_avx2)
    CHECK(s == W8A8_SUCCESS, "GENERIC on an AVX2 CPU: %s %s", w8a8_status_name(s), w8a8_last_error());
  else
    CHECK(s == W8A8_ERROR_UNSUPPORTED_DEVICE, "GENERIC without AVX2: %s", w8a8_status_name(s));
  w8a8_handle_info info;
  REQUIRE_OK(w8a8_get_info(t.aut, &info));
  CHECK(info.workspace_bytes > 0, "a CPU handle owns its packing workspace");
  free_trio(&t);
}

/* ---- quantizers ---- */

static float special_value(void) {
  switch (rnd_int(0, 11)) {
    case 0: return NAN;
    case 1: return -INFINITY;
    case 2: return INFINITY;
    case 3: return -0.0f;
    case 4: return 1e30f;
    case 5: return 1e-40f; /* subnormal */
    case 6: return (float)rnd_int(-300, 300) + 0.5f; /* halfway cases under s = 1 */
    default: return rnd_unif(-3.0f, 3.0f) * (float)(1 << rnd_int(0, 8));
  }
}

static void put_x(w8a8_dtype t, void *base, int64_t i, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  if (t == W8A8_DTYPE_FP32) ((float *)base)[i] = v;
  else if (t == W8A8_DTYPE_BF16) ((uint16_t *)base)[i] = (uint16_t)(u >> 16);
  else { /* fp16: random bits, with the specials mapped */
    uint16_t h = (uint16_t)rnd();
    /* Signaling NaNs stay out: glibc's fmaxf(x, sNaN) returns NaN, so the reference's
     * serial max restarts after one, an order-dependent result no parallel max can match. */
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) h |= 0x200;
    if (v != v) h = 0x7e00;
    else if (isinf(v)) h = v > 0 ? 0x7c00 : 0xfc00;
    ((uint16_t *)base)[i] = h;
  }
}

/* Every mode x input dtype x output dtype x zero point; q, scales and zero points bitwise. */
W8A8_TEST(cpu_quantize_all_modes) {
  rng_init();
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  static const w8a8_dtype ins[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  static const int64_t shapes[][2] = {{1, 1}, {3, 7}, {17, 8}, {5, 13}, {64, 100}, {2, 0}, {33, 1000}, {40, 4100}};
  for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++)
    for (int it = 0; it < 3; it++)
      for (int ot = 0; ot < 2; ot++)
        for (int mode = 0; mode < 3; mode++)
          for (int asym = 0; asym < 2; asym++) {
            const w8a8_dtype in = ins[it], out = ot ? W8A8_DTYPE_INT8 : W8A8_DTYPE_FP8_E4M3;
            if (asym && (out != W8A8_DTYPE_INT8 || mode == W8A8_QUANT_DYNAMIC_PER_TENSOR)) continue;
            const int64_t M = shapes[si][0], K = shapes[si][1], ldx = K + rnd_int(0, 3), ldq = K + rnd_int(0, 3);
            const size_t xs = w8a8_dtype_size(in);
            char *x = malloc(xs * (size_t)(M * ldx) + 1);
            uint8_t *qr = malloc((size_t)(M * ldq) + 1), *qf = malloc((size_t)(M * ldq) + 1);
            float *sr = malloc(4 * (size_t)(M + 1)), *sf = malloc(4 * (size_t)(M + 1));
            int32_t *zr = malloc(4 * (size_t)(M + 1)), *zf = malloc(4 * (size_t)(M + 1));
            const int specials = rnd_int(0, 1);
            for (int64_t i = 0; i < M * ldx; i++)
              put_x(in, x, i, specials && rnd_int(0, 7) == 0 ? special_value() : rnd_unif(-5.0f, 5.0f));
            if (M > 2 && K > 0)
              for (int64_t k = 0; k < K; k++) put_x(in, x, ldx + k, NAN); /* one all-NaN row */
            const float ub = rnd_unif(0.5f, 8.0f);
            const int use_ub = mode == W8A8_QUANT_DYNAMIC_PER_TOKEN && !asym && rnd_int(0, 1);
            float static_s = rnd_unif(0.001f, 0.1f);
            int32_t static_z = rnd_int(-20, 20);
            w8a8_matrix X = w8a8_matrix_make(in, W8A8_ROW_MAJOR, M, K, ldx, x);
            for (int hi = 0; hi < 3; hi++) {
              w8a8_handle *h = hi == 0 ? t.ref : hi == 1 ? t.gen : t.aut;
              if (hi == 1 && !t.have_avx2) continue;
              w8a8_set_num_threads(h, rnd_int(1, 2));
              uint8_t *q = hi ? qf : qr;
              float *s = hi ? sf : sr;
              int32_t *z = hi ? zf : zr;
              memset(q, 0x5a, (size_t)(M * ldq));
              memset(s, 0x5a, 4 * (size_t)(M + 1));
              memset(z, 0x5a, 4 * (size_t)(M + 1));
              if (mode == W8A8_QUANT_STATIC_PER_TENSOR) s[0] = static_s, z[0] = static_z;
              w8a8_matrix Q = w8a8_matrix_make(out, W8A8_ROW_MAJOR, M, K, ldq, q);
              int64_t slen = mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? M : 1;
              w8a8_vector S = w8a8_vector_make(W8A8_DTYPE_FP32, slen, s);
              w8a8_vector Z = w8a8_vector_make(W8A8_DTYPE_INT32, slen, z);
              w8a8_status st = w8a8_quantize(h, &X, &Q, (w8a8_quant_mode)mode, &S, asym ? &Z : NULL, use_ub ? &ub : NULL);
              if (st != W8A8_SUCCESS) {
                CHECK(0, "quantize %s->%s mode %d asym %d M%lld K%lld handle %d: %s", w8a8_dtype_name(in),
                      w8a8_dtype_name(out), mode, asym, (long long)M, (long long)K, hi, w8a8_last_error());
                continue;
              }
              if (hi == 0) continue;
              long nbad = 0;
              for (int64_t m = 0; m < M; m++)
                for (int64_t k = 0; k < ldq; k++) {
                  /* inside the row: equal to the reference; in the gap: untouched */
                  uint8_t want = k < K ? qr[m * ldq + k] : 0x5a;
                  if (qf[m * ldq + k] != want) {
                    if (nbad < 3)
                      CHECK(0, "quantize %s->%s mode %d asym %d M%lld K%lld handle %d: q[%lld,%lld] = 0x%02x, want 0x%02x (seed %llu)",
                            w8a8_dtype_name(in), w8a8_dtype_name(out), mode, asym, (long long)M, (long long)K, hi,
                            (long long)m, (long long)k, qf[m * ldq + k], want, (unsigned long long)g_seed);
                    nbad++;
                  }
                }
              CHECK(memcmp(sf, sr, 4 * (size_t)slen) == 0, "quantize mode %d asym %d M%lld K%lld handle %d: scales differ (%g vs %g)",
                    mode, asym, (long long)M, (long long)K, hi, sf[0], sr[0]);
              if (asym)
                CHECK(memcmp(zf, zr, 4 * (size_t)slen) == 0, "quantize mode %d M%lld K%lld handle %d: zero points differ (%d vs %d)",
                      mode, (long long)M, (long long)K, hi, zf[0], zr[0]);
            }
            free(x), free(qr), free(qf), free(sr), free(sf), free(zr), free(zf);
          }
  free_trio(&t);
}

/* Static int8 with zero points far outside int8 (the scalar fallback for |azp| > 2^24 and
 * the vector path just inside it) and values at the int32 saturation edges. */
W8A8_TEST(cpu_quantize_int8_azp_edges) {
  rng_init();
  trio t;
  REQUIRE(make_trio(&t) == 0, "handles: %s", w8a8_last_error());
  static const int32_t zs[] = {0, 127, -128, 300, -300, 1 << 24, -(1 << 24), (1 << 24) + 1, INT32_MIN, INT32_MAX};
  const int64_t M = 3, K = 37;
  float x[3 * 37];
  for (size_t zi = 0; zi < sizeof zs / sizeof *zs; zi++) {
    for (int i = 0; i < M * K; i++) x[i] = rnd_int(0, 3) ? rnd_unif(-300.0f, 300.0f) : special_value() * 1e9f;
    uint8_t q[2][3 * 37];
    for (int hi = 0; hi < 2; hi++) {
      float s = 0.75f;
      int32_t z = zs[zi];
      w8a8_matrix X = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, K, K, x);
      w8a8_matrix Q = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K, K, q[hi]);
      w8a8_vector S = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &s), Z = w8a8_vector_make(W8A8_DTYPE_INT32, 1, &z);
      REQUIRE_OK(w8a8_quantize(hi ? t.aut : t.ref, &X, &Q, W8A8_QUANT_STATIC_PER_TENSOR, &S, &Z, NULL));
    }
    CHECK(memcmp(q[0], q[1], sizeof q[0]) == 0, "azp %d: quantized values differ", zs[zi]);
  }
  free_trio(&t);
}
