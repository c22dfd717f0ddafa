/* test_tp_ops.c — w8a8_all_gather_scaled_mm and w8a8_scaled_mm_reduce_scatter against one
 * rank computing the whole layer with the scalar reference, in every mode.
 *
 * Every rank generates every rank's inputs from the same seeds, so each rank can
 * compute the whole layer itself. int8 results must equal the reference bit for bit;
 * fp8 results within a tight tolerance (the fast kernels may sum in another order);
 * fused and unfused results bit for bit in every mode. Outputs are poisoned first and
 * their padding (ld > N) must stay untouched.
 * The reduce-scatter runs with either kind of partials (w8a8_tp_options.partials): the
 * reference then rounds each rank's partial to out's dtype (numeric.c's RNE) and widens it
 * back before the same ordered sum; the tests also count the elements where the two modes'
 * references differ, so that a library ignoring the option cannot pass. */
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tp_test.h"

typedef struct tp_case {
  w8a8_dtype in, out;
  int sa_tok, sb_chan, bias;
  int zp;   /* 0 none, 1 premultiplied azp_adj, 2 azp per tensor, 3 azp per token (int8 only) */
  int64_t M, N, K;
  int skew;     /* uneven shards (the last rank empty) */
  int pad;      /* extra elements of stride on a, b and out */
  int gathered; /* AG: ask for the gathered a, scales and zero points */
  int64_t block_rows; /* 0 = auto */
  uint64_t seed;
  int partials; /* RS: W8A8_TP_PARTIALS_FP32 or _OUT */
  int old_size; /* RS: pass opts->struct_size = offsetof(partials) (a caller built against the header
                   before `partials` existed) with partials = OUT and garbage in reserved0: the
                   library must not read them and compute fp32 partials */
} tp_case;

/* Reference elements where the two kinds of partials give different outputs (RS, this rank). */
static int64_t g_rs_modes_differ;

#define POISON 0xA5

static float out_at(w8a8_dtype t, const void *base, int64_t i) { return w8a8_tp_load(t, base, i); }

static int64_t count_bad_padding(const uint8_t *buf, int64_t rows, int64_t N, int64_t ld, size_t es) {
  int64_t bad = 0;
  for (int64_t m = 0; m < rows; m++)
    for (int64_t b = (int64_t)(N * es); b < (int64_t)(ld * es); b++) bad += buf[(size_t)m * ld * es + b] != POISON;
  return bad;
}

/* Compare got with want on rows x N (ld_got, ld_want); exact or with fp8's tolerance (plus
 * flip[i], where given: rounded partials may round to the neighbour, see out_spacing2). */
static void compare(const char *what, const tp_case *tc, const void *got, int64_t ld_got, const void *want,
                    int64_t ld_want, const float *slack, const float *flip, int64_t rows) {
  int64_t bad = 0;
  for (int64_t m = 0; m < rows; m++)
    for (int64_t n = 0; n < tc->N; n++) {
      float g = out_at(tc->out, got, m * ld_got + n), w = out_at(tc->out, want, m * ld_want + n);
      bool ok;
      if (tc->in == W8A8_DTYPE_INT8) {
        ok = memcmp(&g, &w, sizeof g) == 0 || (isnan(g) && isnan(w));
      } else {
        float tol = 0x1p-7f * fabsf(w) + (slack ? 1e-4f * slack[m * tc->N + n] : 0.0f) +
                    (flip ? flip[m * tc->N + n] : 0.0f) + 1e-6f;
        ok = fabsf(g - w) <= tol;
      }
      if (!ok && bad++ < 3)
        CHECK(0, "%s: rank %d row %lld col %lld: got %.9g want %.9g (%s, out %s, sa_tok %d sb_chan %d bias %d zp %d)",
              what, g_rank, (long long)m, (long long)n, (double)g, (double)w, w8a8_dtype_name(tc->in),
              w8a8_dtype_name(tc->out), tc->sa_tok, tc->sb_chan, tc->bias, tc->zp);
    }
  CHECK(bad == 0, "%s: %lld elements differ on rank %d", what, (long long)bad, g_rank);
}

static void compare_bits(const char *what, const void *x, const void *y, int64_t rows, int64_t N, int64_t ld,
                         size_t es) {
  int64_t bad = 0;
  for (int64_t m = 0; m < rows; m++)
    bad += memcmp((const char *)x + (size_t)(m * ld) * es, (const char *)y + (size_t)(m * ld) * es, (size_t)N * es) != 0;
  CHECK(bad == 0, "%s: %lld rows differ in some bit on rank %d", what, (long long)bad, g_rank);
}

/* Rank j's per-rank inputs of the all-gather: rows, scales, zero points (dense). */
static void ag_rank_inputs(const tp_case *tc, int j, uint8_t *a, float *sa, int32_t *azp, int64_t Mj) {
  tp_fill_q8(a, Mj * tc->K, tc->in, tp_seed(tc->seed, 1, (uint64_t)j));
  tp_fill_f32(sa, tc->sa_tok ? Mj : 1, 1e-3f, 4e-3f, tp_seed(tc->seed, 2, (uint64_t)j));
  tp_fill_i32(azp, tc->zp == 3 ? Mj : 1, -20, 20, tp_seed(tc->seed, 3, (uint64_t)j));
}

static void run_ag(const tp_case *tc) {
  const int W = g_size, r = g_rank;
  const int64_t M = tc->M, N = tc->N, K = tc->K;
  const int64_t Mr = tp_rows(M, W, r, tc->skew), off = tp_offset(M, W, r, tc->skew);
  const size_t oes = w8a8_dtype_size(tc->out);
  const int64_t lda = K + tc->pad, ldb = K + tc->pad, ldo = N + tc->pad;

  /* The whole layer's inputs, as one rank would hold them. */
  uint8_t *a_full = calloc((size_t)(M * K) + 1, 1);
  float *sa_full = calloc((size_t)M + 1, sizeof(float));
  int32_t *azp_full = calloc((size_t)M + 1, sizeof(int32_t));
  uint8_t *aj = calloc((size_t)(M * K) + 1, 1);
  float *saj = calloc((size_t)M + 1, sizeof(float));
  int32_t *azpj = calloc((size_t)M + 1, sizeof(int32_t));
  /* This rank's arguments. */
  uint8_t *a_loc = calloc((size_t)(Mr * lda) + 1, 1);
  float *sa_loc = calloc((size_t)Mr + 1, sizeof(float));
  int32_t *azp_loc = calloc((size_t)Mr + 1, sizeof(int32_t));
  uint8_t *b = calloc((size_t)(N * ldb) + 1, 1);
  float *sb = calloc((size_t)N + 1, sizeof(float));
  void *bias = calloc((size_t)N + 1, 4);
  int32_t *adj = calloc((size_t)N + 1, sizeof(int32_t));
  uint8_t *out_f = malloc((size_t)(M * ldo) * oes + 1), *out_u = malloc((size_t)(M * ldo) * oes + 1);
  void *out_ref = calloc((size_t)(M * N) + 1, oes);
  uint8_t *g_a = malloc((size_t)(M * (K + 3)) + 1);
  float *g_s = malloc(sizeof(float) * (size_t)(M + 1));
  int32_t *g_z = malloc(sizeof(int32_t) * (size_t)(M + 1));
  REQUIRE(a_full && sa_full && azp_full && aj && saj && azpj && a_loc && sa_loc && azp_loc && b && sb && bias && adj &&
              out_f && out_u && out_ref && g_a && g_s && g_z,
          "out of memory");

  for (int j = 0; j < W; j++) {
    const int64_t Mj = tp_rows(M, W, j, tc->skew), oj = tp_offset(M, W, j, tc->skew);
    ag_rank_inputs(tc, j, aj, saj, azpj, Mj);
    memcpy(a_full + oj * K, aj, (size_t)(Mj * K));
    for (int64_t i = 0; i < Mj; i++) {
      sa_full[oj + i] = saj[tc->sa_tok ? i : 0];
      azp_full[oj + i] = azpj[tc->zp == 3 ? i : 0];
    }
    if (j == r) {
      for (int64_t i = 0; i < Mj; i++) memcpy(a_loc + i * lda, aj + i * K, (size_t)K);
      memcpy(sa_loc, saj, sizeof(float) * (size_t)(tc->sa_tok ? Mj : 1));
      memcpy(azp_loc, azpj, sizeof(int32_t) * (size_t)(tc->zp == 3 ? Mj : 1));
    }
  }
  /* This rank's weight shard. */
  uint8_t *bd = calloc((size_t)(N * K) + 1, 1);
  REQUIRE(bd, "out of memory");
  tp_fill_q8(bd, N * K, tc->in, tp_seed(tc->seed, 4, (uint64_t)r));
  for (int64_t n = 0; n < N; n++) memcpy(b + n * ldb, bd + n * K, (size_t)K);
  free(bd);
  tp_fill_f32(sb, tc->sb_chan ? N : 1, 0.5f, 2.0f, tp_seed(tc->seed, 5, (uint64_t)r));
  tp_fill_out(tc->out, bias, N, -2.0f, 2.0f, tp_seed(tc->seed, 6, (uint64_t)r));

  w8a8_matrix A = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, Mr, K, lda, a_loc);
  w8a8_matrix B = w8a8_matrix_make(tc->in, W8A8_COL_MAJOR, K, N, ldb, b);
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sa_tok ? Mr : 1, sa_loc);
  w8a8_vector SB = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sb_chan ? N : 1, sb);
  w8a8_vector BIAS = w8a8_vector_make(tc->out, N, bias);
  w8a8_vector ADJ = w8a8_vector_make(W8A8_DTYPE_INT32, N, adj);
  if (tc->zp) {
    REQUIRE_OK(w8a8_colsum(g_ref, &B, &ADJ));
    if (tc->zp == 1)
      for (int64_t n = 0; n < N; n++) adj[n] *= 5; /* the one static zero point, premultiplied */
  }
  w8a8_zero_point ZP = {w8a8_vector_make(W8A8_DTYPE_INT32, tc->zp == 3 ? Mr : 1, tc->zp >= 2 ? azp_loc : NULL), ADJ};
  if (tc->zp == 1) ZP.azp = w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL);
  memset(out_f, POISON, (size_t)(M * ldo) * oes);
  memset(out_u, POISON, (size_t)(M * ldo) * oes);
  w8a8_matrix OF = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, M, N, ldo, out_f);
  w8a8_matrix OU = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, M, N, ldo, out_u);
  w8a8_gathered G;
  memset(&G, 0, sizeof G);
  memset(g_a, POISON, (size_t)(M * (K + 3)));
  memset(g_s, POISON, sizeof(float) * (size_t)M);
  memset(g_z, POISON, sizeof(int32_t) * (size_t)M);
  G.a = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, M, K, K + 3, g_a);
  G.scale_a = w8a8_vector_make(W8A8_DTYPE_FP32, M, g_s);
  if (tc->zp >= 2) G.azp = w8a8_vector_make(W8A8_DTYPE_INT32, M, g_z);
  w8a8_tp_options opt = W8A8_TP_OPTIONS_INIT;

  g_comm->block_rows = tc->block_rows;
  opt.overlap = 0;
  w8a8_status s1 = w8a8_all_gather_scaled_mm(g_comm, &A, &B, &SA, &SB, tc->bias ? &BIAS : NULL, tc->zp ? &ZP : NULL,
                                             &OU, NULL, &opt);
  opt.overlap = 1;
  w8a8_status s2 = w8a8_all_gather_scaled_mm(g_comm, &A, &B, &SA, &SB, tc->bias ? &BIAS : NULL, tc->zp ? &ZP : NULL,
                                             &OF, tc->gathered ? &G : NULL, &opt);
  g_comm->block_rows = 0;
  REQUIRE(s1 == W8A8_SUCCESS && s2 == W8A8_SUCCESS, "unfused %s, fused %s: %s", w8a8_status_name(s1),
          w8a8_status_name(s2), w8a8_last_error());

  /* One rank computing the whole layer: the scalar reference on the gathered rows. */
  w8a8_matrix AF = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, M, K, K, a_full);
  w8a8_vector SAF = w8a8_vector_make(W8A8_DTYPE_FP32, M, sa_full);
  w8a8_zero_point ZPF = {w8a8_vector_make(W8A8_DTYPE_INT32, M, azp_full), ADJ};
  if (tc->zp == 1) ZPF.azp = w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL);
  w8a8_matrix OR = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, M, N, N, out_ref);
  REQUIRE_OK(w8a8_scaled_mm(g_ref, &AF, &B, &SAF, &SB, tc->bias ? &BIAS : NULL, tc->zp ? &ZPF : NULL, &OR));

  compare("all_gather_scaled_mm vs reference", tc, out_f, ldo, out_ref, N, NULL, NULL, M);
  compare_bits("all_gather_scaled_mm fused vs unfused", out_f, out_u, M, N, ldo, oes);
  CHECK(count_bad_padding(out_f, M, N, ldo, oes) == 0 && count_bad_padding(out_u, M, N, ldo, oes) == 0,
        "out's padding columns were written");
  if (tc->gathered) {
    int64_t bad = 0;
    for (int64_t m = 0; m < M; m++) bad += memcmp(g_a + m * (K + 3), a_full + m * K, (size_t)K) != 0;
    CHECK(bad == 0, "gathered->a: %lld rows differ", (long long)bad);
    CHECK(count_bad_padding(g_a, M, K, K + 3, 1) == 0, "gathered->a padding written");
    CHECK(memcmp(g_s, sa_full, sizeof(float) * (size_t)M) == 0, "gathered->scale_a differs");
    if (tc->zp >= 2) CHECK(memcmp(g_z, azp_full, sizeof(int32_t) * (size_t)M) == 0, "gathered->azp differs");
  }
  (void)off;
  free(a_full), free(sa_full), free(azp_full), free(aj), free(saj), free(azpj), free(a_loc), free(sa_loc);
  free(azp_loc), free(b), free(sb), free(bias), free(adj), free(out_f), free(out_u), free(out_ref), free(g_a);
  free(g_s), free(g_z);
}

/* Rank j's inputs of the reduce-scatter: its K shard of all rows and its weight rows. */
typedef struct rs_inputs {
  int64_t Kj;
  uint8_t *a;   /* [M, Kj] dense */
  float *sa;    /* 1 or M */
  int32_t *azp; /* 1 or M */
  uint8_t *b;   /* [Kj, N] column-major dense */
  float *sb;    /* 1 or N */
  int32_t *adj; /* N */
} rs_inputs;

static bool rs_make(const tp_case *tc, int j, rs_inputs *in) {
  int64_t o;
  w8a8_tp_shard_rows(tc->K, g_size, j, &o, &in->Kj);
  const int64_t M = tc->M, N = tc->N, Kj = in->Kj;
  in->a = calloc((size_t)(M * Kj) + 1, 1);
  in->sa = calloc((size_t)M + 1, sizeof(float));
  in->azp = calloc((size_t)M + 1, sizeof(int32_t));
  in->b = calloc((size_t)(N * Kj) + 1, 1);
  in->sb = calloc((size_t)N + 1, sizeof(float));
  in->adj = calloc((size_t)N + 1, sizeof(int32_t));
  if (!in->a || !in->sa || !in->azp || !in->b || !in->sb || !in->adj) return false;
  tp_fill_q8(in->a, M * Kj, tc->in, tp_seed(tc->seed, 11, (uint64_t)j));
  tp_fill_f32(in->sa, tc->sa_tok ? M : 1, 1e-3f, 4e-3f, tp_seed(tc->seed, 12, (uint64_t)j));
  tp_fill_i32(in->azp, tc->zp == 3 ? M : 1, -20, 20, tp_seed(tc->seed, 13, (uint64_t)j));
  tp_fill_q8(in->b, N * Kj, tc->in, tp_seed(tc->seed, 14, (uint64_t)j));
  tp_fill_f32(in->sb, tc->sb_chan ? N : 1, 0.5f, 2.0f, tp_seed(tc->seed, 15, (uint64_t)j));
  for (int64_t n = 0; n < N; n++) {
    int32_t s = 0;
    for (int64_t k = 0; k < Kj; k++) s += (int8_t)in->b[n * Kj + k];
    in->adj[n] = tc->zp == 1 ? 5 * s : s;
  }
  return true;
}

static void rs_free(rs_inputs *in) {
  free(in->a), free(in->sa), free(in->azp), free(in->b), free(in->sb), free(in->adj);
  memset(in, 0, sizeof *in);
}

static w8a8_zero_point rs_zp(const tp_case *tc, const rs_inputs *in) {
  w8a8_zero_point z = {w8a8_vector_make(W8A8_DTYPE_INT32, tc->zp == 3 ? tc->M : 1, tc->zp >= 2 ? in->azp : NULL),
                       w8a8_vector_make(W8A8_DTYPE_INT32, tc->N, in->adj)};
  if (tc->zp == 1) z.azp = w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL);
  return z;
}

static void run_rs(const tp_case *tc) {
  const int W = g_size, r = g_rank;
  const int64_t M = tc->M, N = tc->N;
  const int64_t Mr = tp_rows(M, W, r, tc->skew), off = tp_offset(M, W, r, tc->skew);
  const size_t oes = w8a8_dtype_size(tc->out);
  const int64_t ldo = N + tc->pad;

  rs_inputs me;
  memset(&me, 0, sizeof me);
  REQUIRE(rs_make(tc, r, &me), "out of memory");
  const int64_t lda = me.Kj + tc->pad, ldb = me.Kj + tc->pad;
  uint8_t *a = calloc((size_t)(M * lda) + 1, 1), *b = calloc((size_t)(N * ldb) + 1, 1);
  void *bias = calloc((size_t)N + 1, 4);
  uint8_t *out_f = malloc((size_t)(Mr * ldo) * oes + 1), *out_u = malloc((size_t)(Mr * ldo) * oes + 1);
  void *out_ref = calloc((size_t)(Mr * N) + 1, oes);
  float *acc = calloc((size_t)(Mr * N) + 1, sizeof(float)), *slack = calloc((size_t)(Mr * N) + 1, sizeof(float));
  float *accq = calloc((size_t)(Mr * N) + 1, sizeof(float)); /* the sum of rounded partials */
  float *flip = calloc((size_t)(Mr * N) + 1, sizeof(float));
  float *part = calloc((size_t)(M * N) + 1, sizeof(float));
  void *out_alt = calloc((size_t)(Mr * N) + 1, oes); /* the other kind of partials' reference */
  REQUIRE(a && b && bias && out_f && out_u && out_ref && acc && slack && accq && flip && part && out_alt,
          "out of memory");
  /* The kind of partials the library must compute: the option, or fp32 where it is not read. */
  const int want_out = tc->partials == W8A8_TP_PARTIALS_OUT && !tc->old_size;
  for (int64_t m = 0; m < M; m++) memcpy(a + m * lda, me.a + m * me.Kj, (size_t)me.Kj);
  for (int64_t n = 0; n < N; n++) memcpy(b + n * ldb, me.b + n * me.Kj, (size_t)me.Kj);
  /* the same bias on every rank */
  tp_fill_out(tc->out, bias, N, -2.0f, 2.0f, tp_seed(tc->seed, 16, 0));

  w8a8_matrix A = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, M, me.Kj, lda, a);
  w8a8_matrix B = w8a8_matrix_make(tc->in, W8A8_COL_MAJOR, me.Kj, N, ldb, b);
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sa_tok ? M : 1, me.sa);
  w8a8_vector SB = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sb_chan ? N : 1, me.sb);
  w8a8_vector BIAS = w8a8_vector_make(tc->out, N, bias);
  w8a8_zero_point ZP = rs_zp(tc, &me);
  memset(out_f, POISON, (size_t)(Mr * ldo) * oes);
  memset(out_u, POISON, (size_t)(Mr * ldo) * oes);
  w8a8_matrix OF = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, Mr, N, ldo, out_f);
  w8a8_matrix OU = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, Mr, N, ldo, out_u);
  w8a8_tp_options opt = W8A8_TP_OPTIONS_INIT;
  opt.partials = tc->partials;
  if (tc->old_size) {
    opt.struct_size = offsetof(w8a8_tp_options, partials);
    opt.reserved0 = 0x5a5a5a5a;
    opt.partials = W8A8_TP_PARTIALS_OUT;
  }
  g_comm->block_rows = tc->block_rows;
  opt.overlap = 0;
  w8a8_status s1 = w8a8_scaled_mm_reduce_scatter(g_comm, &A, &B, &SA, &SB, tc->bias ? &BIAS : NULL,
                                                 tc->zp ? &ZP : NULL, &OU, &opt);
  opt.overlap = 1;
  w8a8_status s2 = w8a8_scaled_mm_reduce_scatter(g_comm, &A, &B, &SA, &SB, tc->bias ? &BIAS : NULL,
                                                 tc->zp ? &ZP : NULL, &OF, &opt);
  g_comm->block_rows = 0;
  REQUIRE(s1 == W8A8_SUCCESS && s2 == W8A8_SUCCESS, "unfused %s, fused %s: %s", w8a8_status_name(s1),
          w8a8_status_name(s2), w8a8_last_error());

  /* One rank computing the whole layer: every rank's fp32 partial with the scalar reference
   * (the epilogue without bias), summed in rank order, plus the bias, rounded once; and the same
   * with each partial rounded to out's dtype first (W8A8_TP_PARTIALS_OUT). */
  for (int j = 0; j < W; j++) {
    rs_inputs in;
    memset(&in, 0, sizeof in);
    REQUIRE(rs_make(tc, j, &in), "out of memory");
    w8a8_matrix Aj = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, M, in.Kj, in.Kj > 0 ? in.Kj : 1, in.a);
    w8a8_matrix Bj = w8a8_matrix_make(tc->in, W8A8_COL_MAJOR, in.Kj, N, in.Kj > 0 ? in.Kj : 1, in.b);
    w8a8_vector SAj = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sa_tok ? M : 1, in.sa);
    w8a8_vector SBj = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sb_chan ? N : 1, in.sb);
    w8a8_zero_point ZPj = rs_zp(tc, &in);
    w8a8_matrix P = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, part);
    w8a8_status s = w8a8_scaled_mm(g_ref, &Aj, &Bj, &SAj, &SBj, NULL, tc->zp ? &ZPj : NULL, &P);
    rs_free(&in);
    REQUIRE(s == W8A8_SUCCESS, "reference partial of rank %d: %s", j, w8a8_last_error());
    for (int64_t i = 0; i < Mr * N; i++) {
      float p = part[off * N + i], q = tp_round_to_out(tc->out, p);
      acc[i] = j == 0 ? p : acc[i] + p;
      accq[i] = j == 0 ? q : accq[i] + q;
      slack[i] += fabsf(p);
      if (want_out) flip[i] += tp_out_spacing2(tc->out, p);
    }
  }
  for (int64_t i = 0; i < Mr; i++)
    for (int64_t n = 0; n < N; n++) {
      float s = (want_out ? accq : acc)[i * N + n], t = (want_out ? acc : accq)[i * N + n];
      if (tc->bias) s = s + w8a8_tp_load(tc->out, bias, n), t = t + w8a8_tp_load(tc->out, bias, n);
      w8a8_tp_store(tc->out, out_ref, i * N + n, s);
      w8a8_tp_store(tc->out, out_alt, i * N + n, t);
    }
  for (int64_t i = 0; i < Mr * N; i++)
    g_rs_modes_differ +=
        memcmp((const char *)out_ref + (size_t)i * oes, (const char *)out_alt + (size_t)i * oes, oes) != 0;
  compare("scaled_mm_reduce_scatter vs reference", tc, out_f, ldo, out_ref, N, slack, flip, Mr);
  compare_bits("scaled_mm_reduce_scatter fused vs unfused", out_f, out_u, Mr, N, ldo, oes);
  CHECK(count_bad_padding(out_f, Mr, N, ldo, oes) == 0 && count_bad_padding(out_u, Mr, N, ldo, oes) == 0,
        "out's padding columns were written");
  rs_free(&me);
  free(a), free(b), free(bias), free(out_f), free(out_u), free(out_ref), free(acc), free(slack), free(part);
  free(accq), free(flip), free(out_alt);
}

static const w8a8_dtype k_outs[3] = {W8A8_DTYPE_BF16, W8A8_DTYPE_FP16, W8A8_DTYPE_FP32};

/* Every combination of output dtype, scale modes, bias and zero point for one operand dtype
 * (partials: the reduce-scatter's option). */
static void all_modes_p(int ag, w8a8_dtype in, int partials) {
  int n = 0;
  for (int o = 0; o < 3; o++)
    for (int sa = 0; sa < 2; sa++)
      for (int sb = 0; sb < 2; sb++)
        for (int bias = 0; bias < 2; bias++)
          for (int zp = 0; zp < (in == W8A8_DTYPE_INT8 ? 4 : 1); zp++) {
            tp_case tc;
            memset(&tc, 0, sizeof tc);
            tc.in = in;
            tc.out = k_outs[o];
            tc.sa_tok = sa, tc.sb_chan = sb, tc.bias = bias, tc.zp = zp;
            tc.M = 13, tc.N = 20, tc.K = 37;
            tc.pad = (n % 3 == 0) ? 3 : 0;
            tc.seed = 1000u + (uint64_t)n++;
            tc.partials = partials;
            if (ag)
              run_ag(&tc);
            else
              run_rs(&tc);
            if (tp_any_failed()) return; /* collective: every rank leaves together */
          }
}

static void all_modes(int ag, w8a8_dtype in) { all_modes_p(ag, in, W8A8_TP_PARTIALS_FP32); }

TP_TEST(tp_ag_int8_all_modes) { all_modes(1, W8A8_DTYPE_INT8); }
TP_TEST(tp_ag_fp8_all_modes) { all_modes(1, W8A8_DTYPE_FP8_E4M3); }
TP_TEST(tp_rs_int8_all_modes) { all_modes(0, W8A8_DTYPE_INT8); }
TP_TEST(tp_rs_fp8_all_modes) { all_modes(0, W8A8_DTYPE_FP8_E4M3); }

/* Shapes: uneven and skewed shards (a rank with no rows), M < W, M = 1, K = 0, odd sizes,
 * several GEMM blocks per chunk (the progress polls between blocks), gathered outputs. */
static void shapes_p(int ag, w8a8_dtype in, int partials) {
  static const int64_t cases[][3] = {{1, 5, 7}, {2, 9, 16}, {3, 4, 1}, {17, 7, 13}, {40, 33, 64}, {6, 8, 0}, {0, 8, 8}};
  int n = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (int skew = 0; skew < 2; skew++)
      for (int blk = 0; blk < 2; blk++) {
        tp_case tc;
        memset(&tc, 0, sizeof tc);
        tc.in = in;
        tc.out = k_outs[n % 3];
        tc.sa_tok = 1, tc.sb_chan = 1, tc.bias = n % 2, tc.zp = in == W8A8_DTYPE_INT8 ? 3 : 0;
        tc.M = cases[c][0], tc.N = cases[c][1], tc.K = cases[c][2];
        tc.skew = skew;
        tc.block_rows = blk ? 3 : 0;
        tc.pad = blk;
        tc.gathered = 1;
        tc.seed = 5000u + (uint64_t)n++;
        tc.partials = partials;
        if (ag)
          run_ag(&tc);
        else
          run_rs(&tc);
        if (tp_any_failed()) return; /* collective: every rank leaves together */
      }
}

static void shapes(int ag, w8a8_dtype in) { shapes_p(ag, in, W8A8_TP_PARTIALS_FP32); }

TP_TEST(tp_ag_int8_shapes_uneven_blocks) { shapes(1, W8A8_DTYPE_INT8); }
TP_TEST(tp_ag_fp8_shapes_uneven_blocks) { shapes(1, W8A8_DTYPE_FP8_E4M3); }
TP_TEST(tp_rs_int8_shapes_uneven_blocks) { shapes(0, W8A8_DTYPE_INT8); }
TP_TEST(tp_rs_fp8_shapes_uneven_blocks) { shapes(0, W8A8_DTYPE_FP8_E4M3); }

/* ---- W8A8_TP_PARTIALS_OUT: each rank's partial rounded to out's dtype before the sum ---- */

/* The sweeps above with rounded partials (bf16, fp16 and fp32 out: with fp32 the two modes are the
 * same arithmetic). int8 bit for bit against the reference that rounds each partial; fused and
 * unfused bit for bit. The data must separate the modes: with 16-bit outs the two references differ
 * in some elements (counted on every rank, summed), else ignoring the option would pass. */
static void partials_out_sweep(w8a8_dtype in) {
  g_rs_modes_differ = 0;
  all_modes_p(0, in, W8A8_TP_PARTIALS_OUT);
  if (!tp_any_failed()) shapes_p(0, in, W8A8_TP_PARTIALS_OUT);
  long long mine = g_rs_modes_differ, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  CHECK(all > 0, "the references of the two kinds of partials never differ: the test cannot tell them apart");
}
TP_TEST(tp_rs_int8_partials_out) { partials_out_sweep(W8A8_DTYPE_INT8); }
TP_TEST(tp_rs_fp8_partials_out) { partials_out_sweep(W8A8_DTYPE_FP8_E4M3); }

/* The two kinds of partials on the same call: with an fp32 out both give the same bits; with a
 * 16-bit out and a bias each matches its own reference (run_rs) and they differ somewhere. */
TP_TEST(tp_rs_partials_fp32_out_same_bits) {
  for (int p = 0; p < 2 && !tp_any_failed(); p++) {
    tp_case tc;
    memset(&tc, 0, sizeof tc);
    tc.in = W8A8_DTYPE_INT8, tc.out = W8A8_DTYPE_FP32;
    tc.sa_tok = 1, tc.sb_chan = 1, tc.bias = 1;
    tc.M = 19, tc.N = 24, tc.K = 40;
    tc.seed = 7100;
    tc.partials = p ? W8A8_TP_PARTIALS_OUT : W8A8_TP_PARTIALS_FP32;
    g_rs_modes_differ = 0;
    run_rs(&tc);
    CHECK(g_rs_modes_differ == 0, "fp32 out: the two references differ in %lld elements", (long long)g_rs_modes_differ);
  }
}

/* A caller built against the header before `partials` existed passes the old struct's size
 * (offsetof(w8a8_tp_options, partials): 16 on LP64, the old sizeof). Whatever the bytes beyond it
 * hold (here partials = OUT and garbage in reserved0), the library takes the default, fp32 partials:
 * the output must equal the fp32 reference, which differs from the rounded-partials one. */
TP_TEST(tp_rs_partials_old_struct_size_is_default) {
  g_rs_modes_differ = 0;
  for (int o = 0; o < 2 && !tp_any_failed(); o++) {
    tp_case tc;
    memset(&tc, 0, sizeof tc);
    tc.in = W8A8_DTYPE_INT8, tc.out = o ? W8A8_DTYPE_FP16 : W8A8_DTYPE_BF16;
    tc.sa_tok = 1, tc.sb_chan = 1, tc.bias = 1;
    tc.M = 21, tc.N = 40, tc.K = 64;
    tc.seed = 7200u + (uint64_t)o;
    tc.old_size = 1;
    run_rs(&tc);
  }
  long long mine = g_rs_modes_differ, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  CHECK(all > 0, "the two kinds of partials give the same references on this data: the test cannot fail");
}

/* Back-to-back calls reuse the workspace: alternate AG and RS many times with fresh data. */
TP_TEST(tp_back_to_back_alternating) {
  for (int i = 0; i < 6 && !tp_any_failed(); i++) {
    tp_case tc;
    memset(&tc, 0, sizeof tc);
    tc.in = i % 2 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
    tc.out = W8A8_DTYPE_BF16;
    tc.sa_tok = 1, tc.sb_chan = 1, tc.bias = 1;
    tc.M = 11 + i, tc.N = 16, tc.K = 24;
    tc.seed = 9000u + (uint64_t)i;
    run_ag(&tc);
    run_rs(&tc);
  }
}
