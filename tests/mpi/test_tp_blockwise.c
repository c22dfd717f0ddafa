/* test_tp_blockwise.c — the block-scaled fused calls (w8a8_all_gather_scaled_mm_blockwise,
 * w8a8_scaled_mm_reduce_scatter_blockwise) against w8a8_scaled_mm_blockwise on one rank's copy of the whole layer.
 *
 * Every rank generates every rank's inputs from the same seeds. The CPU's block-scaled GEMM is the reference's
 * arithmetic, so the all-gather's rows equal the single-rank GEMM of the gathered rows bit for bit, and the
 * reduce-scatter equals the header's sum of the ranks' fp32 partials (each the blockwise GEMM of a K shard) bit for
 * bit; fused and unfused alike. Outputs are poisoned, their padding must stay untouched; the scale matrices come in
 * both layouts with padded strides; K shards and K itself are not multiples of 128. */
#include <stdlib.h>
#include <string.h>

#include "tp_test.h"

#define POISON 0x5C
#define BLK(n) (((n) + 127) / 128)

static w8a8_comm *g_bw; /* reserved for these shapes */

static w8a8_comm *bw_comm(void) {
  if (!g_bw) {
    MPI_Comm world = MPI_COMM_WORLD;
    if (w8a8_comm_create_mpi(&g_bw, g_h, &world) != W8A8_SUCCESS) return NULL;
    if (w8a8_comm_reserve(g_bw, 1024, 512, 1024) != W8A8_SUCCESS) return NULL;
  }
  return g_bw;
}

/* rows x cols scales in `layout` with a padded ld (pad poisoned), values in [lo, hi) from seed. */
static w8a8_matrix scales(int64_t rows, int64_t cols, w8a8_layout layout, uint64_t seed, float **buf) {
  const int64_t inner = layout == W8A8_ROW_MAJOR ? cols : rows, outer = layout == W8A8_ROW_MAJOR ? rows : cols;
  const int64_t ld = inner + 3;
  float *v = malloc(sizeof(float) * (size_t)(rows * cols + 1)), *s = malloc(sizeof(float) * (size_t)(ld * outer + 1));
  tp_fill_f32(v, rows * cols, 1e-3f, 4e-3f, seed);
  for (int64_t i = 0; i < ld * outer; i++) s[i] = -7.0f;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) s[layout == W8A8_ROW_MAJOR ? i * ld + j : j * ld + i] = v[i * cols + j];
  free(v);
  *buf = s;
  return w8a8_matrix_make(W8A8_DTYPE_FP32, layout, rows, cols, ld, s);
}

/* Elements of out (rows x N, ld) that differ from want (rows x N, dense), and padding bytes written. */
static int64_t bad_elements(w8a8_dtype t, const uint8_t *out, int64_t ld, const void *want, int64_t rows, int64_t N) {
  const size_t es = w8a8_dtype_size(t);
  int64_t bad = 0;
  for (int64_t m = 0; m < rows; m++)
    for (int64_t n = 0; n < ld; n++) {
      const uint8_t *o = out + (size_t)(m * ld + n) * es;
      if (n < N)
        bad += memcmp(o, (const uint8_t *)want + (size_t)(m * N + n) * es, es) != 0;
      else
        for (size_t b = 0; b < es; b++) bad += o[b] != POISON;
    }
  return bad;
}

typedef struct bw_case {
  int64_t M, N, K;
  w8a8_dtype out;
  int bias, skew;
  w8a8_layout la, lb;
  uint64_t seed;
} bw_case;

static void run_ag(const bw_case *tc, w8a8_comm *c) {
  const int W = g_size, r = g_rank;
  const int64_t M = tc->M, N = tc->N, K = tc->K, KB = BLK(K), ldo = N + 2;
  const int64_t Mr = tp_rows(M, W, r, tc->skew), off = tp_offset(M, W, r, tc->skew);
  const size_t es = w8a8_dtype_size(tc->out);
  uint8_t *a_full = malloc((size_t)(M * K) + 1), *b = malloc((size_t)(N * K) + 1);
  float *sa_full = malloc(sizeof(float) * (size_t)(M * KB + 1)), *sab = NULL, *sbb = NULL;
  void *bias = calloc((size_t)N + 1, 4), *want = calloc((size_t)(M * N) + 1, es);
  uint8_t *out = malloc((size_t)(M * ldo) * es + 1);
  /* every rank's rows and group scales (rank j's seeds), gathered here in rank order */
  for (int j = 0; j < W; j++) {
    const int64_t Mj = tp_rows(M, W, j, tc->skew), oj = tp_offset(M, W, j, tc->skew);
    tp_fill_q8(a_full + oj * K, Mj * K, W8A8_DTYPE_FP8_E4M3, tp_seed(tc->seed, 1, (uint64_t)j));
    tp_fill_f32(sa_full + oj * KB, Mj * KB, 1e-3f, 4e-3f, tp_seed(tc->seed, 2, (uint64_t)j));
  }
  tp_fill_q8(b, N * K, W8A8_DTYPE_FP8_E4M3, tp_seed(tc->seed, 3, (uint64_t)r)); /* this rank's weight shard */
  tp_fill_out(tc->out, bias, N, -1.0f, 1.0f, tp_seed(tc->seed, 4, (uint64_t)r));
  w8a8_matrix SB = scales(BLK(N), KB, tc->lb, tp_seed(tc->seed, 5, (uint64_t)r), &sbb);
  /* this rank's group scales in the case's layout */
  w8a8_matrix SA = scales(Mr, KB, tc->la, 0, &sab);
  for (int64_t i = 0; i < Mr; i++)
    for (int64_t kb = 0; kb < KB; kb++)
      sab[tc->la == W8A8_ROW_MAJOR ? i * SA.ld + kb : kb * SA.ld + i] = sa_full[(off + i) * KB + kb];
  /* the reference: one GEMM of the whole layer's rows */
  w8a8_matrix AF = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K, a_full);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, b);
  w8a8_matrix SAF = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, KB, KB, sa_full);
  w8a8_matrix WANT = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, M, N, N, want);
  w8a8_vector BI = w8a8_vector_make(tc->out, N, bias);
  REQUIRE_OK(w8a8_scaled_mm_blockwise(g_ref, &AF, &B, &SAF, &SB, tc->bias ? &BI : NULL, &WANT));
  w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, Mr, K, K, a_full + off * K);
  w8a8_matrix O = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, M, N, ldo, out);
  for (int ov = 0; ov < 2; ov++) {
    memset(out, POISON, (size_t)(M * ldo) * es);
    w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
    o.overlap = ov ? W8A8_TP_OVERLAP_ON : W8A8_TP_OVERLAP_OFF;
    const w8a8_status s = w8a8_all_gather_scaled_mm_blockwise(c, &A, &B, &SA, &SB, tc->bias ? &BI : NULL, &O, &o);
    CHECK(s == W8A8_SUCCESS, "AG M N K %lld %lld %lld overlap %d: %s %s", (long long)M, (long long)N, (long long)K,
          ov, w8a8_status_name(s), w8a8_last_error());
    if (s != W8A8_SUCCESS) break;
    const int64_t bad = bad_elements(tc->out, out, ldo, want, M, N);
    CHECK(bad == 0, "AG M N K %lld %lld %lld %s overlap %d: %lld elements differ from the single-rank GEMM",
          (long long)M, (long long)N, (long long)K, w8a8_dtype_name(tc->out), ov, (long long)bad);
  }
  free(a_full), free(b), free(sa_full), free(sab), free(sbb), free(bias), free(want), free(out);
}

/* K shard of rank j: uneven, and not multiples of 128 where K is not */
static int64_t k_rows(int64_t K, int W, int j) { return tp_rows(K, W, j, 0); }

static void run_rs(const bw_case *tc, w8a8_comm *c, int partials) {
  const int W = g_size, r = g_rank;
  const int64_t M = tc->M, N = tc->N, ldo = N + 2;
  const int64_t Mr = tp_rows(M, W, r, tc->skew), off = tp_offset(M, W, r, tc->skew);
  const size_t es = w8a8_dtype_size(tc->out);
  float *acc = calloc((size_t)(M * N) + 1, sizeof(float)), *part = malloc(sizeof(float) * (size_t)(M * N + 1));
  void *bias = calloc((size_t)N + 1, 4), *want = calloc((size_t)(Mr * N) + 1, es);
  uint8_t *out = malloc((size_t)(Mr * ldo) * es + 1);
  tp_fill_out(tc->out, bias, N, -1.0f, 1.0f, tp_seed(tc->seed, 14, 0));
  w8a8_vector BI = w8a8_vector_make(tc->out, N, bias);
  w8a8_matrix A, B, SA, SB;
  memset(&A, 0, sizeof A), memset(&B, 0, sizeof B), memset(&SA, 0, sizeof SA), memset(&SB, 0, sizeof SB);
  uint8_t *a_mine = NULL, *b_mine = NULL;
  float *sa_mine = NULL, *sb_mine = NULL;
  for (int j = 0; j < W; j++) { /* rank j's shard and its partial: the reference's sum in rank order */
    const int64_t Kj = k_rows(tc->K, W, j), KBj = BLK(Kj);
    uint8_t *a = malloc((size_t)(M * Kj) + 1), *b = malloc((size_t)(N * Kj) + 1);
    float *sa = NULL, *sb = NULL;
    tp_fill_q8(a, M * Kj, W8A8_DTYPE_FP8_E4M3, tp_seed(tc->seed, 11, (uint64_t)j));
    tp_fill_q8(b, N * Kj, W8A8_DTYPE_FP8_E4M3, tp_seed(tc->seed, 12, (uint64_t)j));
    w8a8_matrix Aj = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, Kj, Kj, a);
    w8a8_matrix Bj = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, Kj, N, Kj, b);
    w8a8_matrix SAj = scales(M, KBj, tc->la, tp_seed(tc->seed, 13, (uint64_t)j), &sa);
    w8a8_matrix SBj = scales(BLK(N), KBj, tc->lb, tp_seed(tc->seed, 15, (uint64_t)j), &sb);
    w8a8_matrix P = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, part);
    REQUIRE_OK(w8a8_scaled_mm_blockwise(g_ref, &Aj, &Bj, &SAj, &SBj, NULL, &P));
    for (int64_t i = 0; i < M * N; i++) {
      const float p = partials == W8A8_TP_PARTIALS_OUT ? tp_round_to_out(tc->out, part[i]) : part[i];
      acc[i] = j == 0 ? p : acc[i] + p;
    }
    if (j == r) {
      a_mine = a, b_mine = b, sa_mine = sa, sb_mine = sb;
      A = Aj, B = Bj, SA = SAj, SB = SBj;
    } else {
      free(a), free(b), free(sa), free(sb);
    }
  }
  for (int64_t i = 0; i < Mr; i++)
    for (int64_t n = 0; n < N; n++) {
      float s = acc[(off + i) * N + n];
      if (tc->bias) s = s + w8a8_tp_load(tc->out, bias, n);
      w8a8_tp_store(tc->out, want, i * N + n, s);
    }
  w8a8_matrix O = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, Mr, N, ldo, out);
  for (int ov = 0; ov < 2; ov++) {
    memset(out, POISON, (size_t)(Mr * ldo) * es);
    w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
    o.overlap = ov ? W8A8_TP_OVERLAP_ON : W8A8_TP_OVERLAP_OFF;
    o.partials = partials;
    const w8a8_status s = w8a8_scaled_mm_reduce_scatter_blockwise(c, &A, &B, &SA, &SB, tc->bias ? &BI : NULL, &O, &o);
    CHECK(s == W8A8_SUCCESS, "RS M N K %lld %lld %lld overlap %d: %s %s", (long long)M, (long long)N,
          (long long)tc->K, ov, w8a8_status_name(s), w8a8_last_error());
    if (s != W8A8_SUCCESS) break;
    const int64_t bad = bad_elements(tc->out, out, ldo, want, Mr, N);
    CHECK(bad == 0, "RS M N K %lld %lld %lld %s partials %d overlap %d: %lld elements differ from the header's sum",
          (long long)M, (long long)N, (long long)tc->K, w8a8_dtype_name(tc->out), partials, ov, (long long)bad);
  }
  free(acc), free(part), free(bias), free(want), free(out), free(a_mine), free(b_mine), free(sa_mine), free(sb_mine);
}

static const bw_case k_cases[] = {
    {37, 200, 300, W8A8_DTYPE_BF16, 1, 0, W8A8_ROW_MAJOR, W8A8_ROW_MAJOR, 0xb1},
    {130, 129, 1000, W8A8_DTYPE_FP16, 0, 1, W8A8_COL_MAJOR, W8A8_ROW_MAJOR, 0xb2},
    {5, 256, 256, W8A8_DTYPE_FP32, 1, 0, W8A8_ROW_MAJOR, W8A8_COL_MAJOR, 0xb3},
    {300, 64, 127, W8A8_DTYPE_BF16, 1, 1, W8A8_COL_MAJOR, W8A8_COL_MAJOR, 0xb4},
};

TP_TEST(tp_blockwise_all_gather) {
  w8a8_comm *c = bw_comm();
  REQUIRE(c, "communicator: %s", w8a8_last_error());
  for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0] && !tp_any_failed(); i++) run_ag(&k_cases[i], c);
}

TP_TEST(tp_blockwise_reduce_scatter) {
  w8a8_comm *c = bw_comm();
  REQUIRE(c, "communicator: %s", w8a8_last_error());
  for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0] && !tp_any_failed(); i++)
    run_rs(&k_cases[i], c, i == 1 ? W8A8_TP_PARTIALS_OUT : W8A8_TP_PARTIALS_FP32);
}

/* The ranks must make the same kind of call: rank 0's block-scaled all-gather against the others' plain one fails on
 * every rank, naming the scales' kind, and the communicator stays usable. Bad scales fail on every rank. */
TP_TEST(tp_blockwise_mismatch_and_bad_input) {
  w8a8_comm *c = bw_comm();
  REQUIRE(c, "communicator: %s", w8a8_last_error());
  const int64_t M = 8, N = 64, K = 200, KB = BLK(K), Mr = tp_rows(M, g_size, g_rank, 0);
  uint8_t a[8 * 200], b[64 * 200];
  float sa[8 * 2], sb[1 * 2], sat[8] = {1, 1, 1, 1, 1, 1, 1, 1}, sbt = 1.0f;
  uint16_t out[8 * 64];
  tp_fill_q8(a, M * K, W8A8_DTYPE_FP8_E4M3, 7);
  tp_fill_q8(b, N * K, W8A8_DTYPE_FP8_E4M3, 8);
  tp_fill_f32(sa, M * KB, 1e-3f, 2e-3f, 9);
  tp_fill_f32(sb, KB, 1e-3f, 2e-3f, 10);
  w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, Mr, K, K, a);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, b);
  w8a8_matrix SA = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, Mr, KB, KB, sa);
  w8a8_matrix SB = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 1, KB, KB, sb);
  w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, out);
  w8a8_vector SAT = w8a8_vector_make(W8A8_DTYPE_FP32, 1, sat), SBT = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sbt);
  w8a8_status s;
  if (g_size > 1) {
    s = g_rank == 0 ? w8a8_all_gather_scaled_mm_blockwise(c, &A, &B, &SA, &SB, NULL, &O, NULL)
                    : w8a8_all_gather_scaled_mm(c, &A, &B, &SAT, &SBT, NULL, NULL, &O, NULL, NULL);
    CHECK(s == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "scales' kind"),
          "block-scaled against plain: %s %s", w8a8_status_name(s), w8a8_last_error());
  }
  /* still usable: the same call on every rank */
  s = w8a8_all_gather_scaled_mm_blockwise(c, &A, &B, &SA, &SB, NULL, &O, NULL);
  CHECK(s == W8A8_SUCCESS, "after the mismatch: %s %s", w8a8_status_name(s), w8a8_last_error());
  /* scale_b of the wrong shape: INVALID_SCALE here, named */
  w8a8_matrix SBX = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 1, KB - 1, KB, sb);
  memset(out, 0x5a, sizeof out);
  s = w8a8_all_gather_scaled_mm_blockwise(c, &A, &B, &SA, &SBX, NULL, &O, NULL);
  CHECK(s == W8A8_ERROR_INVALID_SCALE && strstr(w8a8_last_error(), "scale_b"), "bad scale_b: %s %s",
        w8a8_status_name(s), w8a8_last_error());
  /* int8 operands: INVALID_DTYPE */
  w8a8_matrix AI = A, BI = B;
  AI.dtype = BI.dtype = W8A8_DTYPE_INT8;
  s = w8a8_scaled_mm_reduce_scatter_blockwise(c, &AI, &BI, &SA, &SB, NULL, &O, NULL);
  CHECK(s == W8A8_ERROR_INVALID_DTYPE, "int8: %s %s", w8a8_status_name(s), w8a8_last_error());
  /* no communicator (every rank alike: the next agreement compares the counts of such calls) */
  CHECK(w8a8_all_gather_scaled_mm_blockwise(NULL, &A, &B, &SA, &SB, NULL, &O, NULL) == W8A8_ERROR_INVALID_COMM,
        "NULL comm (all-gather)");
  CHECK(w8a8_scaled_mm_reduce_scatter_blockwise(NULL, &A, &B, &SA, &SB, NULL, &O, NULL) == W8A8_ERROR_INVALID_COMM,
        "NULL comm (reduce-scatter)");
  size_t changed = 0;
  for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) changed += out[i] != 0x5a5a;
  CHECK(changed == 0, "%zu elements of out written by refused calls", changed);
  w8a8_comm_destroy(g_bw);
  g_bw = NULL;
}
