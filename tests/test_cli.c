/* test_cli.c — the CLI's own checking machinery must be able to fail: the comparisons that
 * `w8a8 check`, `demo` and `bench` rely on catch a single wrong element, accept a legitimate
 * change of fp32 summation order, and the argument parsers reject malformed input.
 *
 * tools/ is linked only into the CLI, so the helpers are compiled into the test binary here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli_common.c"
#include "harness.h"

W8A8_TEST(cli_parse_strict) {
  int64_t v = 0, l[8];
  CHECK(cli_parse_i64("42", 0, 100, &v) && v == 42, "42");
  CHECK(!cli_parse_i64("42x", 0, 100, &v), "trailing garbage");
  CHECK(!cli_parse_i64("", 0, 100, &v), "empty");
  CHECK(!cli_parse_i64("101", 0, 100, &v), "above range");
  CHECK(!cli_parse_i64("-1", 0, 100, &v), "below range");
  CHECK(!cli_parse_i64(" 7", 0, 100, &v) && !cli_parse_i64("+5", 0, 100, &v) && !cli_parse_i64("-", -9, 9, &v) &&
            !cli_parse_i64("- 1", -9, 9, &v),
        "leading blank, '+', a lone '-'");
  CHECK(cli_parse_i64("-3", -9, 9, &v) && v == -3, "-3");
  CHECK(cli_parse_i64_list("1, 2", 1, 100, l, 8) < 0, "a blank inside a list");
  CHECK(!cli_parse_i64("99999999999999999999999", 0, INT64_MAX, &v), "overflow");
  CHECK(cli_parse_i64_list("1,16,64", 1, 100, l, 8) == 3 && l[2] == 64, "list");
  CHECK(cli_parse_i64_list("1,,2", 1, 100, l, 8) < 0, "empty item");
  CHECK(cli_parse_i64_list("1,2,", 1, 100, l, 8) < 0, "trailing comma");
  CHECK(cli_parse_i64_list("1,2,3", 1, 100, l, 2) < 0, "too many");
  CHECK(cli_parse_out_dtype("fp16") == W8A8_DTYPE_FP16 && cli_parse_out_dtype("int8") == W8A8_DTYPE_INVALID,
        "out dtype");
}

W8A8_TEST(cli_conversions_match_library) {
  /* the CLI's own conversions (it may not use src/) against the library's quantizer:
   * static per-tensor fp8 with scale 1 is exactly e4m3(x) */
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  REQUIRE_OK(w8a8_set_kernel(h, W8A8_KERNEL_REFERENCE));
  float x[256];
  uint8_t q[256];
  for (int i = 0; i < 256; i++) x[i] = (i & 0x7f) == 0x7f ? 1.0f : cli_fp8_to_f32((uint8_t)i);
  float one = 1.0f;
  w8a8_matrix xm = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 1, 256, 256, x);
  w8a8_matrix qm = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, 1, 256, 256, q);
  w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &one);
  REQUIRE_OK(w8a8_quantize(h, &xm, &qm, W8A8_QUANT_STATIC_PER_TENSOR, &sv, NULL, NULL));
  int bad = 0;
  for (int i = 0; i < 256; i++)
    if ((i & 0x7f) != 0x7f && q[i] != i && !(i == 0x80 && q[i] == 0x80)) bad++;
  CHECK(bad == 0, "%d fp8 codes do not round-trip through cli_fp8_to_f32", bad);
  CHECK(cli_f32_to_bf16(1.0f) == 0x3f80 && cli_f32_to_bf16(1.00390625f) == 0x3f80, "bf16 RNE tie to even");
  CHECK(cli_f32_to_f16(65520.0f) == 0x7c00 && cli_f16_to_f32(0x3c00) == 1.0f, "fp16");
  w8a8_destroy(h);
}

/* A scaled_mm output (fp32) from the library's reference, and the same GEMM summed in
 * reverse order (a different but legitimate fp32 summation order) or without its largest
 * product (what a kernel that skips one k step would do at worst). */
static void fp8_case(int64_t M, int64_t N, int64_t K, float *ref, float *rev, float *drop, uint8_t *a,
                     uint8_t *b, float *sa, float *sb) {
  cli_rng r = cli_rng_make(5, 0);
  for (int64_t i = 0; i < M * K; i++) {
    a[i] = (uint8_t)cli_rng_u64(&r);
    if ((a[i] & 0x7f) == 0x7f) a[i] ^= 1;
  }
  for (int64_t i = 0; i < N * K; i++) {
    b[i] = (uint8_t)cli_rng_u64(&r);
    if ((b[i] & 0x7f) == 0x7f) b[i] ^= 1;
  }
  for (int64_t m = 0; m < M; m++) sa[m] = 0.01f * (1.0f + cli_rng_unit(&r));
  for (int64_t n = 0; n < N; n++) sb[n] = 0.001f * (1.0f + cli_rng_unit(&r));
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CPU, 0) != W8A8_SUCCESS) return;
  w8a8_set_kernel(h, W8A8_KERNEL_REFERENCE);
  w8a8_matrix am = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K, a);
  w8a8_matrix bm = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, b);
  w8a8_matrix om = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, ref);
  w8a8_vector sav = w8a8_vector_make(W8A8_DTYPE_FP32, M, sa), sbv = w8a8_vector_make(W8A8_DTYPE_FP32, N, sb);
  w8a8_scaled_mm(h, &am, &bm, &sav, &sbv, NULL, NULL, &om);
  w8a8_destroy(h);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      float v = 0, d = 0;
      int64_t kmax = 0;
      for (int64_t k = 0; k < K; k++)
        if (fabsf(cli_fp8_to_f32(a[m * K + k]) * cli_fp8_to_f32(b[n * K + k])) >
            fabsf(cli_fp8_to_f32(a[m * K + kmax]) * cli_fp8_to_f32(b[n * K + kmax])))
          kmax = k;
      for (int64_t k = K - 1; k >= 0; k--) {
        float t = cli_fp8_to_f32(a[m * K + k]) * cli_fp8_to_f32(b[n * K + k]);
        v += t;
        if (k != kmax) d += t;
      }
      rev[m * N + n] = sb[n] * (sa[m] * v);
      drop[m * N + n] = sb[n] * (sa[m] * d);
    }
}

W8A8_TEST(cli_compare_fp8_bound) {
  enum { M = 5, N = 9, K = 200 };
  static float ref[M * N], rev[M * N], drop[M * N];
  static uint8_t a[M * K], b[N * K];
  static float sa[M], sb[N];
  memset(ref, 0xff, sizeof ref); /* poison: NaN until the reference writes it */
  fp8_case(M, N, K, ref, rev, drop, a, b, sa, sb);
  cli_cmp c;
  cli_cmp_init(&c);
  cli_compare_fp8(a, K, b, K, M, N, K, sa, M, sb, N, W8A8_DTYPE_FP32, rev, N, ref, N, &c);
  CHECK(c.checked == M * N && c.wrong == 0, "reverse-order sums flagged: %lld wrong (first %g vs %g, tol %g)",
        (long long)c.wrong, c.bad_got, c.bad_ref, c.bad_tol);
  cli_cmp_init(&c);
  cli_compare_fp8(a, K, b, K, M, N, K, sa, M, sb, N, W8A8_DTYPE_FP32, drop, N, ref, N, &c);
  CHECK(c.wrong == M * N, "only %lld of %d elements with a missing product were flagged", (long long)c.wrong,
        M * N);
  /* NaN where the reference has a number */
  memcpy(rev, ref, sizeof ref);
  rev[7] = NAN;
  cli_cmp_init(&c);
  cli_compare_fp8(a, K, b, K, M, N, K, sa, M, sb, N, W8A8_DTYPE_FP32, rev, N, ref, N, &c);
  CHECK(c.wrong == 1 && c.bad_m == 0 && c.bad_n == 7, "NaN not caught (%lld wrong)", (long long)c.wrong);
}

W8A8_TEST(cli_compare_exact_one_bit) {
  uint16_t x[64], y[64];
  for (int i = 0; i < 64; i++) x[i] = y[i] = (uint16_t)(0x3f80 + i);
  cli_cmp c;
  cli_cmp_init(&c);
  cli_compare_exact(W8A8_DTYPE_BF16, x, 8, y, 8, 8, 8, &c);
  CHECK(c.wrong == 0 && c.checked == 64, "equal flagged");
  y[45] ^= 1;
  cli_cmp_init(&c);
  cli_compare_exact(W8A8_DTYPE_BF16, x, 8, y, 8, 8, 8, &c);
  CHECK(c.wrong == 1 && c.bad_m == 5 && c.bad_n == 5, "one-bit difference: %lld wrong at (%lld, %lld)",
        (long long)c.wrong, (long long)c.bad_m, (long long)c.bad_n);
}

W8A8_TEST(cli_verify_rows_catches_one_element) {
  /* int8, 300 columns checked in 4 blocks of 32: a wrong element inside a block is caught
   * and reported at its real column; the library's fast path passes. */
  enum { M = 20, N = 300, K = 77 };
  static int8_t a[M * K], b[N * K];
  static uint16_t out[M * N];
  static float sa[M], sb[N];
  cli_rng r = cli_rng_make(9, 0);
  for (int i = 0; i < M * K; i++) a[i] = (int8_t)cli_rng_u64(&r);
  for (int i = 0; i < N * K; i++) b[i] = (int8_t)cli_rng_u64(&r);
  for (int i = 0; i < M; i++) sa[i] = 0.01f + 0.01f * cli_rng_unit(&r);
  for (int i = 0; i < N; i++) sb[i] = 0.001f + 0.001f * cli_rng_unit(&r);
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  w8a8_matrix am = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K, K, a);
  w8a8_matrix bm = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, b);
  w8a8_matrix om = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, out);
  w8a8_vector sav = w8a8_vector_make(W8A8_DTYPE_FP32, M, sa), sbv = w8a8_vector_make(W8A8_DTYPE_FP32, N, sb);
  REQUIRE_OK(w8a8_scaled_mm(h, &am, &bm, &sav, &sbv, NULL, NULL, &om));
  w8a8_destroy(h);
  int64_t rows[8];
  int nr = cli_sample_rows(M, 8, rows);
  CHECK(nr == 8 && rows[0] == 0 && rows[7] == M - 1, "sampled rows include first and last");
  cli_cmp c;
  cli_cmp_init(&c);
  REQUIRE(cli_verify_rows_cols(W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, a, K, b, K, N, K, sa, M, sb, N, NULL, out, N, rows,
                               nr, 128, &c) == 0,
          "verification failed to run");
  CHECK(c.wrong == 0 && c.checked == 8 * 128, "correct output: %lld wrong of %lld", (long long)c.wrong,
        (long long)c.checked);
  out[(M - 1) * N + (N - 1)] ^= 0x0100; /* last row, last column: inside the last block */
  cli_cmp_init(&c);
  REQUIRE(cli_verify_rows_cols(W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, a, K, b, K, N, K, sa, M, sb, N, NULL, out, N, rows,
                               nr, 128, &c) == 0,
          "verification failed to run");
  CHECK(c.wrong == 1 && c.bad_m == M - 1 && c.bad_n == N - 1, "%lld wrong, first at (%lld, %lld)",
        (long long)c.wrong, (long long)c.bad_m, (long long)c.bad_n);
}
