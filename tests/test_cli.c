/* test_cli.c — the CLI's own checking machinery must be able to fail: the comparisons that
 * `w8a8 check`, `demo` and `bench` rely on catch a single wrong element, accept a legitimate
 * change of fp32 summation order, and the argument parsers reject malformed input; the JSON lines
 * every command writes parse back (escaped device names, NaN as null) and the reader refuses what
 * is not JSON; the percentiles and tp-bench's overlap rule.
 *
 * tools/ is linked only into the CLI, so the helpers are compiled into the test binary here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/cli_common.c"
#include "../tools/cli_json.c"
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

/* ---- percentiles ------------------------------------------------------------------------------------ */

W8A8_TEST(cli_stats_percentiles) {
  /* numpy.percentile's default (linear between order statistics) on shuffled data */
  double v[11];
  for (int i = 0; i < 11; i++) v[i] = (double)((i * 7) % 11) * 10.0; /* 0..100, shuffled */
  cli_stats s = cli_stats_of(v, 11);
  CHECK(s.n == 11 && s.p20 == 20.0 && s.p50 == 50.0 && s.p80 == 80.0, "0..100: %g %g %g", s.p20, s.p50, s.p80);
  double w[4] = {4, 1, 3, 2}; /* sorted 1 2 3 4: p20 at 0.6 -> 1.6, p50 at 1.5 -> 2.5, p80 at 2.4 -> 3.4 */
  s = cli_stats_of(w, 4);
  CHECK(fabs(s.p20 - 1.6) < 1e-12 && fabs(s.p50 - 2.5) < 1e-12 && fabs(s.p80 - 3.4) < 1e-12, "1..4: %g %g %g", s.p20,
        s.p50, s.p80);
  double one = 7;
  s = cli_stats_of(&one, 1);
  CHECK(s.p20 == 7 && s.p50 == 7 && s.p80 == 7, "one sample");
  s = cli_stats_of(NULL, 0);
  CHECK(s.p50 < 0 && s.n == 0, "no sample: the failed marker");
  /* random data: p20 <= p50 <= p80, and p50 is the median */
  cli_rng r = cli_rng_make(42, 0);
  for (int t = 0; t < 50; t++) {
    double x[64], y[64];
    const int n = 1 + (int)cli_rng_range(&r, 0, 63);
    for (int i = 0; i < n; i++) x[i] = y[i] = cli_rng_unit(&r) * 100;
    s = cli_stats_of(x, n);
    const double med = cli_median(y, n);
    CHECK(s.p20 <= s.p50 && s.p50 <= s.p80 && fabs(s.p50 - med) < 1e-12, "n=%d: %g %g %g (median %g)", n, s.p20,
          s.p50, s.p80, med);
  }
}

W8A8_TEST(cli_tp_overlap_rule) {
  const cli_stats gemm = {99, 100, 101, 5}, comm = {49, 50, 51, 5}, unf = {148, 150, 152, 5}, fus = {108, 110, 112, 5};
  double ov = cli_tp_overlap(2, &gemm, &comm, &unf, &fus);
  CHECK(fabs(ov - 0.8) < 1e-12, "(150 - 110) / 50 = 0.8, got %g", ov);
  /* a fused call slower than the unfused one is a meaningful negative figure when comm is substantial */
  const cli_stats slow = {158, 160, 162, 5};
  ov = cli_tp_overlap(2, &gemm, &comm, &unf, &slow);
  CHECK(fabs(ov + 0.2) < 1e-12, "(150 - 160) / 50 = -0.2, got %g", ov);
  CHECK(isnan(cli_tp_overlap(1, &gemm, &comm, &unf, &fus)), "one rank: no figure");
  const cli_stats tiny = {0.1, 0.2, 0.3, 5}; /* 0.2 us of communication: the ratio would be noise / 0.2 */
  CHECK(isnan(cli_tp_overlap(2, &gemm, &tiny, &unf, &fus)), "hidden time under 10%% of unfused");
  const cli_stats noisy = {100, 150, 200, 5}; /* a spread of 100 us against 50 us hidden */
  CHECK(isnan(cli_tp_overlap(2, &gemm, &comm, &noisy, &fus)), "hidden time under the spread");
  const cli_stats failed = cli_stats_failed();
  CHECK(isnan(cli_tp_overlap(2, &gemm, &comm, &unf, &failed)), "a failed measurement");
}

/* ---- command lines ------------------------------------------------------------------------------------ */

enum { T_SUITE = 256, T_CPU };
static const cli_opt t_opts[] = {
    {'i', "iters", 'i', "N", "timed calls"},
    {'q', "quiet", 'q', NULL, "quiet"},
    {'m', "m", 'm', "LIST", "M values"},
    {T_SUITE, "suite", 0, "LIST", "suites"},
    {T_SUITE + 100, "seed", 0, "S", "seed"},
    {T_CPU, "cpu", 0, NULL, "the CPU"},
    {'n', NULL, 'n', NULL, NULL}, /* hidden */
};

/* Parse argv (argv[0] the command); the options seen as "id=value" words into out. Returns the last status. */
static int t_parse(int argc, char **argv, char *out, size_t n, int *first_pos) {
  cli_parser p;
  cli_parser_init(&p, "test", t_opts, (int)(sizeof t_opts / sizeof t_opts[0]), argc, argv);
  p.quiet = 1;
  const char *v;
  int c;
  size_t used = 0;
  out[0] = 0;
  while ((c = cli_next_opt(&p, &v)) != CLI_OPT_END) {
    if (c == CLI_OPT_ERROR || c == CLI_OPT_HELP) {
      cli_parser_free(&p);
      return c;
    }
    used += (size_t)snprintf(out + used, n - used, "%s%d=%s(%s)", used ? " " : "", c, v ? v : "-", p.spelling);
  }
  *first_pos = p.first_positional;
  cli_parser_free(&p);
  return CLI_OPT_END;
}

W8A8_TEST(cli_getopt_table) {
  char got[512];
  int pos = 0;
  {
    char *a[] = {"test", "--iters=5", "-q", "-m", "1,2", "--suite", "x", NULL};
    CHECK(t_parse(7, a, got, sizeof got, &pos) == CLI_OPT_END && pos == 7, "parse");
    CHECK(!strcmp(got, "105=5(--iters) 113=-(-q) 109=1,2(-m) 256=x(--suite)"), "long=value, flag, short, long: %s", got);
  }
  {
    char *a[] = {"test", "-qi7", "--it", "8", "--m", "3", NULL}; /* a cluster, an abbreviation, the long -m */
    CHECK(t_parse(6, a, got, sizeof got, &pos) == CLI_OPT_END, "parse");
    CHECK(!strcmp(got, "113=-(-q) 105=7(-i) 105=8(--iters) 109=3(--m)"), "cluster / abbreviation: %s", got);
  }
  {
    char *a[] = {"test", "file", "-q", "--", "-m", NULL}; /* positionals (after --, even one that looks like -m) */
    CHECK(t_parse(5, a, got, sizeof got, &pos) == CLI_OPT_END && pos == 3, "positional at %d", pos);
    CHECK(!strcmp(a[3], "file") && !strcmp(a[4], "-m"), "permuted to the end: %s %s", a[3], a[4]);
  }
  {
    char *a[] = {"test", "-m", "--cpu", NULL}; /* a value that looks like an option is the value */
    CHECK(t_parse(3, a, got, sizeof got, &pos) == CLI_OPT_END && !strcmp(got, "109=--cpu(-m)"), "value: %s", got);
  }
  char *bad[][3] = {{"test", "--bogus", NULL}, {"test", "-x", NULL},    {"test", "--s", NULL} /* --suite or --seed */,
                    {"test", "-i", NULL},      {"test", "--cpu=1", NULL}, {"test", "--iters", NULL}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK(t_parse(2, bad[i], got, sizeof got, &pos) == CLI_OPT_ERROR, "'%s' accepted", bad[i][1]);
  char *help[] = {"test", "-q", "--help", NULL};
  CHECK(t_parse(3, help, got, sizeof got, &pos) == CLI_OPT_HELP, "--help");
  char *hidden[] = {"test", "-n", NULL}; /* a hidden option still parses (the command refuses it with a reason) */
  CHECK(t_parse(2, hidden, got, sizeof got, &pos) == CLI_OPT_END && !strcmp(got, "110=-(-n)"), "hidden: %s", got);
  /* values: whole, in range */
  cli_parser p;
  char *none[] = {"test", NULL};
  cli_parser_init(&p, "test", t_opts, 1, 1, none);
  p.quiet = 1;
  p.spelling = "-i";
  int64_t x = 0, l[4];
  int k = 0;
  CHECK(cli_opt_i64(&p, "12", 1, 20, "", &x) && x == 12, "12");
  CHECK(!cli_opt_i64(&p, "12x", 1, 20, "", &x) && !cli_opt_i64(&p, "21", 1, 20, "", &x), "12x, 21");
  CHECK(cli_opt_int(&p, "3", 0, 5, "", &k) && k == 3 && !cli_opt_int(&p, "6", 0, 5, "", &k), "int");
  CHECK(cli_opt_list(&p, "1,2", 1, 9, 4, "", l) == 2 && cli_opt_list(&p, "1,,2", 1, 9, 4, "", l) < 0, "list");
  static const char *const ch[] = {"int8", "fp8", "both", NULL};
  CHECK(cli_opt_choice(&p, "fp8", ch) == 1 && cli_opt_choice(&p, "fp16", ch) < 0, "choice");
  cli_parser_free(&p);
}

/* ---- JSON ----------------------------------------------------------------------------------------------- */

/* What cli_json_str writes for s, then read back through the strict reader. */
static int json_round_trip(const char *s, char *back, size_t n) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return -1;
  fputs("{\"k\":", f);
  cli_json_str(f, s);
  fputs("}", f);
  fclose(f);
  cj_obj o;
  const char *why = NULL;
  size_t at = 0;
  int rc = cli_json_object(buf, len, &o, &why, &at);
  const char *v = rc == 0 ? cj_str(&o, "k") : NULL;
  if (v) snprintf(back, n, "%s", v);
  free(buf);
  return v ? 0 : -1;
}

W8A8_TEST(cli_json_strings_escaped) {
  char back[256];
  static const char *const same[] = {"NVIDIA H200", "a \"quoted\" name", "back\\slash", "tab\tnew\nline\rcr",
                                     "bell\x07 esc\x1b", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", ""};
  for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
    CHECK(json_round_trip(same[i], back, sizeof back) == 0, "'%s' does not parse back", same[i]);
    CHECK(!strcmp(back, same[i]), "'%s' came back as '%s'", same[i], back);
  }
  /* invalid UTF-8 (a Latin-1 byte, a cut sequence, an overlong, a surrogate) becomes U+FFFD, never raw bytes */
  static const char *const invalid[] = {"caf\xe9", "x\xe2\x82", "\xc0\xaf", "\xed\xa0\x80", "\xff"};
  for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
    CHECK(json_round_trip(invalid[i], back, sizeof back) == 0, "invalid UTF-8 #%zu does not parse back", i);
    CHECK(strstr(back, "\xef\xbf\xbd") != NULL, "invalid UTF-8 #%zu: no U+FFFD in '%s'", i, back);
  }
  /* random bytes: whatever a device name holds, the line parses */
  cli_rng r = cli_rng_make(7, 1);
  for (int t = 0; t < 200; t++) {
    char name[48];
    const int n = (int)cli_rng_range(&r, 0, 46);
    for (int i = 0; i < n; i++) name[i] = (char)(1 + cli_rng_range(&r, 0, 254));
    name[n] = 0;
    CHECK(json_round_trip(name, back, sizeof back) == 0, "random name #%d does not parse", t);
  }
}

W8A8_TEST(cli_json_row_schema) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  REQUIRE(f, "open_memstream");
  char *argv[] = {"bench", "-m", "1", NULL};
  cli_json_header(f, "bench", 3, argv);
  cli_row r;
  memset(&r, 0, sizeof r);
  r.command = "bench";
  r.impl = "w8a8_cuda";
  r.op = "scaled_mm";
  r.device = "GPU \"7\" \\ weird\n";
  r.device_kind = "gpu";
  r.dtype = "int8";
  r.M = 16, r.N = -1, r.K = 4096; /* N < 0: null */
  r.kernel = "auto";
  r.config = "";
  r.iters = 20, r.warmup = 5;
  r.t.p20 = 1.5, r.t.p50 = 2.0, r.t.p80 = 2.5, r.t.n = 20;
  r.flops = 2e6;
  cli_jw w;
  cli_json_row_begin(&w, f, &r);
  cli_jw_num(&w, "nan", NAN);
  cli_jw_num(&w, "inf", INFINITY);
  cli_jw_bool(&w, "flag", 1);
  cli_jw_end(&w);
  fclose(f);
  /* two lines: the header, the row */
  char *nl = memchr(buf, '\n', len);
  REQUIRE(nl && nl[1] && buf[len - 1] == '\n', "two lines");
  cj_obj h, o;
  const char *why = NULL;
  size_t at = 0;
  REQUIRE(cli_json_object(buf, (size_t)(nl - buf), &h, &why, &at) == 0, "header: %s at %zu", why, at);
  CHECK(!strcmp(cj_str(&h, "type"), "header") && cj_num(&h, "schema") == CLI_JSON_SCHEMA &&
            !strcmp(cj_str(&h, "command"), "bench") && cj_str(&h, "version") && cj_str(&h, "date") &&
            cj_str(&h, "host") && !strcmp(cj_str(&h, "argv"), "w8a8 bench -m 1"),
        "header keys");
  REQUIRE(cli_json_object(nl + 1, len - (size_t)(nl + 1 - buf) - 1, &o, &why, &at) == 0, "row: %s at %zu", why, at);
  CHECK(!strcmp(cj_str(&o, "device"), r.device), "device name round trip: '%s'", cj_str(&o, "device"));
  CHECK(cj_num(&o, "M") == 16 && cj_get(&o, "N")->type == CJ_NULL && cj_num(&o, "K") == 4096, "M N K");
  CHECK(cj_get(&o, "config")->type == CJ_NULL && !strcmp(cj_str(&o, "kernel"), "auto"), "kernel, config");
  CHECK(cj_num(&o, "p20_us") == 1.5 && cj_num(&o, "p50_us") == 2 && cj_num(&o, "p80_us") == 2.5, "percentiles");
  CHECK(fabs(cj_num(&o, "tflops") - 1.0) < 1e-9, "tflops at p50: 2e6 flop / 2 us = 1 TFLOP/s, got %g",
        cj_num(&o, "tflops"));
  CHECK(cj_get(&o, "nan")->type == CJ_NULL && cj_get(&o, "inf")->type == CJ_NULL, "NaN and inf as null");
  CHECK(cj_get(&o, "flag")->type == CJ_BOOL && cj_get(&o, "flag")->num == 1, "bool");
  static const char *const keys[] = {"type", "command", "impl", "op", "device", "device_kind", "dtype", "M", "N",
                                     "K", "kernel", "config", "iters", "warmup", "p20_us", "p50_us", "p80_us",
                                     "tflops", "wrong"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) CHECK(cj_get(&o, keys[i]), "no key %s", keys[i]);
  free(buf);
}

W8A8_TEST(cli_json_reader_strict) {
  static const char *const good[] = {"{}", " {\"a\":1} ", "{\"a\":[1,2,{\"b\":null}],\"c\":{\"d\":[]}}",
                                     "{\"a\":-0.5e+3,\"b\":0,\"c\":1E2}", "{\"s\":\"\\u00e9\\ud83d\\ude00\\/\"}",
                                     "{\"t\":true,\"f\":false}"};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    CHECK(cli_json_validate(good[i], strlen(good[i]), NULL, NULL) == 0, "refused: %s", good[i]);
  static const char *const bad[] = {
      "{\"a\":1,}",       "{\"a\":NaN}",      "{\"a\":nan}",        "{\"a\":01}",         "{\"a\":1.}",
      "{\"a\":.5}",       "{\"a\":+1}",       "{\"a\":1e}",         "{\"a\":\"x\ty\"}",   "{\"a\":\"\\x\"}",
      "{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00x\"}", "{\"a\":\"abc}",  "{a:1}",              "{\"a\" 1}",
      "{\"a\":1}}",       "{\"a\":1} x",      "[1,]",               "{\"a\":tru}",        "",
      "{\"a\":\"\xc3\"}", "{\"a\":\"\xff\"}", "{\"a\":Infinity}",   "{\"a\":1,\"b\"}",    "{\"a\":[1 2]}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK(cli_json_validate(bad[i], strlen(bad[i]), NULL, NULL) != 0, "accepted: %s", bad[i]);
  CHECK(cli_json_object("[1]", 3, NULL, NULL, NULL) != 0, "an array is not an object line");
  /* depth: 64 nested arrays pass, 65 do not */
  char deep[200];
  for (int d = 64; d <= 65; d++) {
    int n = 0;
    for (int i = 0; i < d; i++) deep[n++] = '[';
    for (int i = 0; i < d; i++) deep[n++] = ']';
    CHECK((cli_json_validate(deep, (size_t)n, NULL, NULL) == 0) == (d == 64), "depth %d", d);
  }
  /* every prefix of a valid line is invalid (a line cut by a full disk is caught) */
  const char *line = "{\"type\":\"row\",\"M\":16,\"p50_us\":1.25,\"device\":\"caf\xc3\xa9\",\"x\":[true,null]}";
  const size_t n = strlen(line);
  REQUIRE(cli_json_validate(line, n, NULL, NULL) == 0, "the whole line");
  for (size_t k = 0; k < n; k++) CHECK(cli_json_validate(line, k, NULL, NULL) != 0, "prefix of %zu bytes accepted", k);
}
