/* test_tp_errors.c — bad input to the communicator and the fused calls: every rank gets an
 * error (never a hang), the status names the problem, and nothing the caller owns is
 * written. Ranks that disagree get W8A8_ERROR_COMM_MISMATCH on every rank. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_test.h"

/* A small valid all-gather / reduce-scatter problem that a test then breaks. */
typedef struct small {
  int8_t a[16 * 16], b[16 * 16];
  float sa[16], sb[16];
  uint16_t out[16 * 16], bias[16];
  w8a8_matrix A, B, O;
  w8a8_vector SA, SB, BIAS;
} small;

static void small_init(small *s, int ag) {
  for (int i = 0; i < 16 * 16; i++) s->a[i] = (int8_t)(i * 7 + g_rank), s->b[i] = (int8_t)(i * 3 - 5);
  for (int i = 0; i < 16; i++) s->sa[i] = 0.01f, s->sb[i] = 0.02f, s->bias[i] = 0x3f80;
  memset(s->out, 0xA5, sizeof s->out);
  /* AG: 4 rows per rank, out has 4*W rows (W <= 4); RS: M = 4*W rows, 4 per rank. */
  const int64_t Mr = 4, M = 4 * (int64_t)g_size;
  s->A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, ag ? Mr : M, 8, 8, s->a);
  s->B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, 8, 8, 8, s->b);
  s->O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, ag ? M : Mr, 8, 8, s->out);
  s->SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, s->sa);
  s->SB = w8a8_vector_make(W8A8_DTYPE_FP32, 8, s->sb);
  s->BIAS = w8a8_vector_make(W8A8_DTYPE_BF16, 8, s->bias);
}

static int untouched(const small *s) {
  for (size_t i = 0; i < sizeof s->out / sizeof s->out[0]; i++)
    if (s->out[i] != 0xA5A5) return 0;
  return 1;
}

static w8a8_status ag(w8a8_comm *c, small *s, const w8a8_tp_options *o) {
  return w8a8_all_gather_scaled_mm(c, &s->A, &s->B, &s->SA, &s->SB, &s->BIAS, NULL, &s->O, NULL, o);
}
static w8a8_status rs(w8a8_comm *c, small *s, const w8a8_tp_options *o) {
  return w8a8_scaled_mm_reduce_scatter(c, &s->A, &s->B, &s->SA, &s->SB, &s->BIAS, NULL, &s->O, o);
}

TP_TEST(tp_err_valid_baseline_succeeds) {
  /* The problems the error tests break are valid as they are (so the errors below come
   * from the breakage, not from the set-up). */
  small s;
  small_init(&s, 1);
  REQUIRE_OK(ag(g_comm, &s, NULL));
  CHECK(!untouched(&s), "the all-gather wrote nothing");
  small_init(&s, 0);
  REQUIRE_OK(rs(g_comm, &s, NULL));
  CHECK(!untouched(&s), "the reduce-scatter wrote nothing");
}

TP_TEST(tp_err_invalid_comm) {
  small s;
  small_init(&s, 1);
  int v = -1;
  CHECK(ag(NULL, &s, NULL) == W8A8_ERROR_INVALID_COMM, "NULL comm");
  /* a handle where a communicator is expected */
  w8a8_status st = ag((w8a8_comm *)(void *)g_h, &s, NULL);
  CHECK(st == W8A8_ERROR_INVALID_COMM && strstr(w8a8_last_error(), "handle"), "handle as comm: %s %s",
        w8a8_status_name(st), w8a8_last_error());
  CHECK(w8a8_comm_rank((const w8a8_comm *)(const void *)g_h, &v) == W8A8_ERROR_INVALID_COMM, "rank of a handle");
  /* a stack object that was never created */
  uint32_t fake[64] = {W8A8_COMM_MAGIC};
  CHECK(w8a8_comm_size((const w8a8_comm *)(const void *)fake, &v) == W8A8_ERROR_INVALID_COMM, "fake comm");
  CHECK(w8a8_comm_destroy((w8a8_comm *)(void *)fake) == W8A8_ERROR_INVALID_COMM, "destroy a fake comm");
  /* a destroyed communicator (destroyed on every rank, so no rank waits for another) */
  w8a8_comm *c = NULL;
  MPI_Comm world = MPI_COMM_WORLD;
  REQUIRE_OK(w8a8_comm_create_mpi(&c, g_h, &world));
  REQUIRE_OK(w8a8_comm_destroy(c));
  CHECK(ag(c, &s, NULL) == W8A8_ERROR_INVALID_COMM, "destroyed comm in all_gather");
  CHECK(rs(c, &s, NULL) == W8A8_ERROR_INVALID_COMM, "destroyed comm in reduce_scatter");
  CHECK(w8a8_comm_rank(c, &v) == W8A8_ERROR_INVALID_COMM && v == -1, "rank of a destroyed comm");
  CHECK(w8a8_comm_reserve(c, 1, 1, 1) == W8A8_ERROR_INVALID_COMM, "reserve on a destroyed comm");
  CHECK(w8a8_comm_destroy(c) == W8A8_ERROR_INVALID_COMM, "double destroy");
  CHECK(w8a8_comm_destroy(NULL) == W8A8_SUCCESS, "destroy(NULL)");
  CHECK(untouched(&s), "out written by a failed call");
  /* the handle passed where the comm's handle is expected: rank/size need non-NULL outputs */
  CHECK(w8a8_comm_rank(g_comm, NULL) == W8A8_ERROR_NULL_POINTER, "rank NULL");
  CHECK(w8a8_comm_rank(g_comm, &v) == W8A8_SUCCESS && v == g_rank, "rank %d vs %d", v, g_rank);
  CHECK(w8a8_comm_size(g_comm, &v) == W8A8_SUCCESS && v == g_size, "size %d vs %d", v, g_size);
}

TP_TEST(tp_err_create) {
  w8a8_comm *c = (w8a8_comm *)(uintptr_t)1;
  MPI_Comm world = MPI_COMM_WORLD, null = MPI_COMM_NULL;
  CHECK(w8a8_comm_create_mpi(&c, g_h, NULL) == W8A8_ERROR_NULL_POINTER, "mpi_comm NULL");
  CHECK(w8a8_comm_create_mpi(&c, g_h, &null) == W8A8_ERROR_INVALID_VALUE, "MPI_COMM_NULL");
  CHECK(c == (w8a8_comm *)(uintptr_t)1, "comm written on failure");
  /* One rank's handle is bad: that rank gets INVALID_HANDLE, the others COMM_MISMATCH; nobody hangs. */
  w8a8_status st = w8a8_comm_create_mpi(&c, g_rank == 0 ? NULL : g_h, &world);
  if (g_rank == 0)
    CHECK(st == W8A8_ERROR_INVALID_HANDLE, "rank 0: %s", w8a8_status_name(st));
  else
    CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "another rank"), "rank %d: %s %s", g_rank,
          w8a8_status_name(st), w8a8_last_error());
  CHECK(c == (w8a8_comm *)(uintptr_t)1, "comm written on failure");
  /* comm == NULL on every rank */
  CHECK(w8a8_comm_create_mpi(NULL, g_h, &world) == W8A8_ERROR_NULL_POINTER, "comm NULL");
  /* a handle destroyed before the communicator's first call: every rank fails the call */
  w8a8_handle *h2 = NULL;
  REQUIRE_OK(w8a8_create(&h2, W8A8_DEVICE_CPU, 0));
  REQUIRE_OK(w8a8_comm_create_mpi(&c, h2, &world));
  REQUIRE_OK(w8a8_comm_reserve(c, 64, 64, 64));
  REQUIRE_OK(w8a8_destroy(h2));
  small s;
  small_init(&s, 1);
  st = ag(c, &s, NULL);
  CHECK(st == W8A8_ERROR_INVALID_HANDLE || (g_size > 1 && st == W8A8_ERROR_COMM_MISMATCH), "destroyed handle: %s",
        w8a8_status_name(st));
  CHECK(st == W8A8_ERROR_INVALID_HANDLE, "each rank's own handle is destroyed: %s", w8a8_status_name(st));
  CHECK(untouched(&s), "out written");
  REQUIRE_OK(w8a8_comm_destroy(c));
  /* GPU entry points with CPU ranks' arguments: a clear error (or NOT_BUILT without CUDA/NCCL),
   * never a communicator; comm untouched */
  w8a8_unique_id id;
  memset(&id, 0, sizeof id);
  c = (w8a8_comm *)(uintptr_t)1;
  st = w8a8_comm_create_nccl(&c, g_h, NULL);
  CHECK(st == W8A8_ERROR_NOT_BUILT || st == W8A8_ERROR_NULL_POINTER, "nccl NULL: %s %s", w8a8_status_name(st),
        w8a8_last_error());
  st = w8a8_comm_create_nccl_id(&c, g_h, &id, 1, 0);
  CHECK(st == W8A8_ERROR_NOT_BUILT || st == W8A8_ERROR_UNSUPPORTED_DEVICE, "nccl id with a CPU handle: %s %s",
        w8a8_status_name(st), w8a8_last_error());
  w8a8_handle *hl[1] = {g_h};
  st = w8a8_comm_create_local(&c, hl, 1);
  CHECK(st == W8A8_ERROR_NOT_BUILT || st == W8A8_ERROR_UNSUPPORTED_DEVICE, "local with a CPU handle: %s %s",
        w8a8_status_name(st), w8a8_last_error());
  CHECK(c == (w8a8_comm *)(uintptr_t)1, "comm written by a failed GPU creation");
}

/* Ranks that disagree: COMM_MISMATCH on every rank, naming the field; outputs untouched. */
TP_TEST(tp_err_ranks_disagree) {
  if (g_size < 2) SKIP("needs 2 or more ranks");
  small s;
  w8a8_status st;
  /* K differs on rank 0 (all-gather) */
  small_init(&s, 1);
  if (g_rank == 0) s.A.cols = s.B.rows = 7;
  st = ag(g_comm, &s, NULL);
  CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "K"), "K: %s %s", w8a8_status_name(st),
        w8a8_last_error());
  CHECK(untouched(&s), "out written (K)");
  /* N differs on the last rank (reduce-scatter) */
  small_init(&s, 0);
  if (g_rank == g_size - 1) s.B.cols = s.O.cols = 7, s.SB.len = 7, s.BIAS.len = 7;
  st = rs(g_comm, &s, NULL);
  CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "N"), "N: %s %s", w8a8_status_name(st),
        w8a8_last_error());
  CHECK(untouched(&s), "out written (N)");
  /* the operand dtype differs */
  small_init(&s, 1);
  if (g_rank == 1) s.A.dtype = s.B.dtype = W8A8_DTYPE_FP8_E4M3;
  st = ag(g_comm, &s, NULL);
  CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "input dtype"), "dtype: %s %s",
        w8a8_status_name(st), w8a8_last_error());
  /* the output dtype differs */
  small_init(&s, 1);
  if (g_rank == 1) s.O.dtype = s.BIAS.dtype = W8A8_DTYPE_FP16;
  st = ag(g_comm, &s, NULL);
  CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "output dtype"), "out dtype: %s",
        w8a8_last_error());
  /* bias on some ranks only */
  small_init(&s, 0);
  st = w8a8_scaled_mm_reduce_scatter(g_comm, &s.A, &s.B, &s.SA, &s.SB, g_rank ? &s.BIAS : NULL, NULL, &s.O, NULL);
  CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "bias"), "bias: %s", w8a8_last_error());
  /* overlap on some ranks only */
  small_init(&s, 1);
  w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
  o.overlap = g_rank == 0;
  st = ag(g_comm, &s, &o);
  CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "overlap"), "overlap: %s", w8a8_last_error());
  /* the reduce-scatter's partials on some ranks only: fused and unfused */
  for (int ov = 0; ov < 2; ov++) {
    small_init(&s, 0);
    o = (w8a8_tp_options)W8A8_TP_OPTIONS_INIT;
    o.overlap = ov;
    o.partials = g_rank == g_size - 1 ? W8A8_TP_PARTIALS_OUT : W8A8_TP_PARTIALS_FP32;
    st = rs(g_comm, &s, &o);
    CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "opts->partials"), "partials (overlap %d): %s %s",
          ov, w8a8_status_name(st), w8a8_last_error());
    CHECK(untouched(&s), "out written (partials, overlap %d)", ov);
  }
  /* the all-gather ignores partials: ranks may differ there */
  small_init(&s, 1);
  o = (w8a8_tp_options)W8A8_TP_OPTIONS_INIT;
  o.partials = g_rank == 0 ? W8A8_TP_PARTIALS_OUT : W8A8_TP_PARTIALS_FP32;
  st = ag(g_comm, &s, &o);
  CHECK(st == W8A8_SUCCESS && !untouched(&s), "all-gather with partials on some ranks: %s %s", w8a8_status_name(st),
        w8a8_last_error());
  /* the layer's M differs (out->rows in the all-gather) */
  small_init(&s, 1);
  if (g_rank == 0) s.O.rows -= 1;
  st = ag(g_comm, &s, NULL);
  CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "M"), "M: %s", w8a8_last_error());
  /* one rank calls the all-gather, the others the reduce-scatter */
  small_init(&s, g_rank == 0);
  st = g_rank == 0 ? ag(g_comm, &s, NULL) : rs(g_comm, &s, NULL);
  CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "operation"), "op: %s", w8a8_last_error());
  CHECK(untouched(&s), "out written (op)");
  /* the communicator still works after all of that */
  small_init(&s, 1);
  REQUIRE_OK(ag(g_comm, &s, NULL));
}

/* A local failure on one rank: that rank gets its own status, the others COMM_MISMATCH. */
TP_TEST(tp_err_one_rank_bad_argument) {
  small s;
  small_init(&s, 1);
  const int bad = g_size - 1;
  if (g_rank == bad) s.SA.len = 3; /* neither 1 nor M_r = 4 */
  w8a8_status st = ag(g_comm, &s, NULL);
  if (g_rank == bad)
    CHECK(st == W8A8_ERROR_INVALID_SCALE && strstr(w8a8_last_error(), "scale_a"), "bad rank: %s %s",
          w8a8_status_name(st), w8a8_last_error());
  else
    CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "W8A8_ERROR_INVALID_SCALE"), "rank %d: %s %s",
          g_rank, w8a8_status_name(st), w8a8_last_error());
  CHECK(untouched(&s), "out written");
  small_init(&s, 0);
  if (g_rank == 0) s.B.layout = W8A8_ROW_MAJOR;
  st = rs(g_comm, &s, NULL);
  CHECK(st == (g_rank == 0 ? W8A8_ERROR_INVALID_LAYOUT : W8A8_ERROR_COMM_MISMATCH) || (g_size == 1 && st == W8A8_ERROR_INVALID_LAYOUT),
        "row-major b on rank 0: %s", w8a8_status_name(st));
  CHECK(untouched(&s), "out written");
}

/* The same bad argument on every rank: each returns the specific status. */
TP_TEST(tp_err_local_checks_every_rank) {
  small s;
  w8a8_status st;
  w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
#define EXPECT(call, status, what)                                                                            \
  do {                                                                                                        \
    st = (call);                                                                                              \
    CHECK(st == (status), "%s: got %s (%s), want %s", what, w8a8_status_name(st), w8a8_last_error(), #status); \
    CHECK(untouched(&s), "%s: out written", what);                                                            \
  } while (0)
  small_init(&s, 1);
  s.B.dtype = W8A8_DTYPE_FP8_E4M3;
  EXPECT(ag(g_comm, &s, NULL), W8A8_ERROR_INVALID_DTYPE, "int8 x fp8");
  small_init(&s, 1);
  s.B.layout = W8A8_ROW_MAJOR;
  EXPECT(ag(g_comm, &s, NULL), W8A8_ERROR_INVALID_LAYOUT, "row-major b");
  small_init(&s, 1);
  s.O.dtype = W8A8_DTYPE_INT32;
  EXPECT(ag(g_comm, &s, NULL), W8A8_ERROR_INVALID_DTYPE, "int32 out");
  small_init(&s, 1);
  s.O.rows = 3; /* fewer rows than this rank's own a */
  EXPECT(ag(g_comm, &s, NULL), W8A8_ERROR_INVALID_SHAPE, "out smaller than a");
  small_init(&s, 1);
  s.O.rows += 1; /* every rank agrees, but the shards do not add up */
  EXPECT(ag(g_comm, &s, NULL), W8A8_ERROR_INVALID_SHAPE, "shards do not add up (ag)");
  small_init(&s, 0);
  s.A.rows += 1;
  s.SA.len = 1;
  EXPECT(rs(g_comm, &s, NULL), W8A8_ERROR_INVALID_SHAPE, "shards do not add up (rs)");
  small_init(&s, 1);
  s.BIAS.len = 7;
  EXPECT(ag(g_comm, &s, NULL), W8A8_ERROR_INVALID_BIAS, "bias length");
  small_init(&s, 1);
  s.BIAS.len = -1; /* a negative length is no vector at all, whatever the other choice */
  EXPECT(ag(g_comm, &s, NULL), W8A8_ERROR_INVALID_BIAS, "bias length -1");
  small_init(&s, 0);
  s.BIAS.len = -1;
  s.BIAS.data = NULL;
  EXPECT(rs(g_comm, &s, NULL), W8A8_ERROR_INVALID_BIAS, "rs bias length -1, data NULL");
  small_init(&s, 1);
  s.SB.len = 5;
  EXPECT(ag(g_comm, &s, NULL), W8A8_ERROR_INVALID_SCALE, "scale_b length");
  small_init(&s, 1);
  s.A.ld = 4;
  EXPECT(ag(g_comm, &s, NULL), W8A8_ERROR_INVALID_STRIDE, "a->ld < K");
  small_init(&s, 1);
  s.A.data = NULL;
  EXPECT(ag(g_comm, &s, NULL), W8A8_ERROR_NULL_POINTER, "a->data NULL");
  small_init(&s, 1);
  EXPECT(w8a8_all_gather_scaled_mm(g_comm, NULL, &s.B, &s.SA, &s.SB, NULL, NULL, &s.O, NULL, NULL),
         W8A8_ERROR_NULL_POINTER, "a NULL");
  small_init(&s, 1);
  s.O.data = s.a; /* out over a */
  s.O.dtype = W8A8_DTYPE_BF16;
  st = ag(g_comm, &s, NULL);
  CHECK(st == W8A8_ERROR_OVERLAP, "out over a: %s", w8a8_status_name(st));
  small_init(&s, 1);
  o.overlap = 3; /* 0, 1 and 2 (W8A8_TP_OVERLAP_AUTO) are the values */
  EXPECT(ag(g_comm, &s, &o), W8A8_ERROR_INVALID_VALUE, "overlap 3");
  CHECK(strstr(w8a8_last_error(), "W8A8_TP_OVERLAP_AUTO"), "overlap 3: message %s", w8a8_last_error());
  o.overlap = -1;
  EXPECT(ag(g_comm, &s, &o), W8A8_ERROR_INVALID_VALUE, "overlap -1");
  o.overlap = 1;
  o.struct_size = 0;
  EXPECT(ag(g_comm, &s, &o), W8A8_ERROR_INVALID_VALUE, "struct_size 0");
  o.struct_size = sizeof o;
  /* partials outside {FP32, OUT}: refused by both operations, naming the member and the value */
  static const int bad_partials[] = {2, -1};
  for (int i = 0; i < 2; i++) {
    char what[64];
    o = (w8a8_tp_options)W8A8_TP_OPTIONS_INIT;
    o.partials = bad_partials[i];
    small_init(&s, 0);
    snprintf(what, sizeof what, "rs partials %d", bad_partials[i]);
    EXPECT(rs(g_comm, &s, &o), W8A8_ERROR_INVALID_VALUE, what);
    char given[16];
    snprintf(given, sizeof given, "is %d", bad_partials[i]);
    CHECK(strstr(w8a8_last_error(), "opts->partials") && strstr(w8a8_last_error(), given) &&
              strstr(w8a8_last_error(), "W8A8_TP_PARTIALS_FP32") && strstr(w8a8_last_error(), "W8A8_TP_PARTIALS_OUT"),
          "%s: message %s", what, w8a8_last_error());
    small_init(&s, 1);
    snprintf(what, sizeof what, "ag partials %d", bad_partials[i]);
    EXPECT(ag(g_comm, &s, &o), W8A8_ERROR_INVALID_VALUE, what);
    /* an old caller's struct_size does not cover partials: whatever it holds is not read */
    o.struct_size = offsetof(w8a8_tp_options, partials);
    small_init(&s, 0);
    st = rs(g_comm, &s, &o);
    CHECK(st == W8A8_SUCCESS && !untouched(&s), "old struct_size with partials %d: %s %s", bad_partials[i],
          w8a8_status_name(st), w8a8_last_error());
  }
  o = (w8a8_tp_options)W8A8_TP_OPTIONS_INIT;
  /* zero points: fp8, and a gathered azp without an azp vector */
  small_init(&s, 1);
  int32_t adj[8] = {0}, gz[64];
  w8a8_zero_point zp = {w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL), w8a8_vector_make(W8A8_DTYPE_INT32, 8, adj)};
  s.A.dtype = s.B.dtype = W8A8_DTYPE_FP8_E4M3;
  EXPECT(w8a8_all_gather_scaled_mm(g_comm, &s.A, &s.B, &s.SA, &s.SB, NULL, &zp, &s.O, NULL, NULL),
         W8A8_ERROR_INVALID_ZERO_POINT, "zp with fp8");
  small_init(&s, 1);
  w8a8_gathered g;
  memset(&g, 0, sizeof g);
  g.azp = w8a8_vector_make(W8A8_DTYPE_INT32, s.O.rows, gz);
  EXPECT(w8a8_all_gather_scaled_mm(g_comm, &s.A, &s.B, &s.SA, &s.SB, NULL, &zp, &s.O, &g, NULL),
         W8A8_ERROR_INVALID_ZERO_POINT, "gathered azp without azp");
  /* gathered a of the wrong shape, and overlapping out */
  int8_t ga[16 * 16];
  memset(&g, 0, sizeof g);
  g.a = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, s.O.rows, 7, 8, ga);
  EXPECT(w8a8_all_gather_scaled_mm(g_comm, &s.A, &s.B, &s.SA, &s.SB, NULL, NULL, &s.O, &g, NULL),
         W8A8_ERROR_INVALID_SHAPE, "gathered->a shape");
  g.a = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, s.O.rows, 8, 8, s.out);
  EXPECT(w8a8_all_gather_scaled_mm(g_comm, &s.A, &s.B, &s.SA, &s.SB, NULL, NULL, &s.O, &g, NULL), W8A8_ERROR_OVERLAP,
         "gathered->a over out");
  /* reduce-scatter: out with more rows than a */
  small_init(&s, 0);
  s.O.rows = s.A.rows + 1;
  EXPECT(rs(g_comm, &s, NULL), W8A8_ERROR_INVALID_SHAPE, "rs out rows > M");
#undef EXPECT
  /* still usable */
  small_init(&s, 0);
  REQUIRE_OK(rs(g_comm, &s, NULL));
}

TP_TEST(tp_err_workspace) {
  w8a8_comm *c = NULL;
  MPI_Comm world = MPI_COMM_WORLD;
  REQUIRE_OK(w8a8_comm_create_mpi(&c, g_h, &world));
  size_t bytes = 1;
  CHECK(w8a8_comm_workspace_bytes(c, &bytes) == W8A8_SUCCESS && bytes == 0, "fresh comm owns %zu bytes", bytes);
  small s;
  small_init(&s, 1);
  w8a8_status st = ag(c, &s, NULL);
  CHECK(st == W8A8_ERROR_WORKSPACE && strstr(w8a8_last_error(), "w8a8_comm_reserve"), "unreserved: %s %s",
        w8a8_status_name(st), w8a8_last_error());
  CHECK(untouched(&s), "out written");
  CHECK(w8a8_comm_reserve(c, -1, 1, 1) == W8A8_ERROR_INVALID_SHAPE, "negative max_m");
  CHECK(w8a8_comm_reserve(c, (int64_t)1 << 40, 1, 1) == W8A8_ERROR_INVALID_SHAPE, "huge max_m");
  /* bounds below 2^31 whose reduce-scatter workspace passes 2^64 bytes (W >= 2): refused, not wrapped to a small
   * buffer that a later call overruns (W = 3 once wrapped to 11.6 GB for a 14.3 GB layout) */
  CHECK(w8a8_comm_reserve(c, INT32_MAX, INT32_MAX, 1) == W8A8_ERROR_INVALID_SHAPE, "a workspace past 2^64 bytes: %s",
        w8a8_last_error());
  CHECK(w8a8_tp_workspace_need(3, 1288491175, 2147482003, 1) == SIZE_MAX &&
            w8a8_tp_workspace_need(2, INT32_MAX, INT32_MAX, 1) == SIZE_MAX,
        "the workspace size wrapped: %zu", w8a8_tp_workspace_need(3, 1288491175, 2147482003, 1));
  CHECK(w8a8_tp_workspace_need(4, 64, 64, 8) == 4u * 64u * (64u + 3u * 16u + 1u) + 64u, "the workspace size changed: %zu",
        w8a8_tp_workspace_need(4, 64, 64, 8));
  /* too small for K on this call: reserve K = 4 < 8 */
  REQUIRE_OK(w8a8_comm_reserve(c, 64, 64, 4));
  st = ag(c, &s, NULL);
  CHECK(st == W8A8_ERROR_WORKSPACE, "K too large for the reservation: %s", w8a8_status_name(st));
  REQUIRE_OK(w8a8_comm_reserve(c, 1, 1, 8)); /* grows K, keeps the rest */
  CHECK(w8a8_comm_workspace_bytes(c, &bytes) == W8A8_SUCCESS && bytes >= w8a8_tp_workspace_need(g_size, 64, 64, 8),
        "reservation shrank: %zu", bytes);
  REQUIRE_OK(ag(c, &s, NULL));
  CHECK(!untouched(&s), "nothing written");
  /* reduce-scatter: one rank's shard larger than ceil(max_m / W) */
  if (g_size > 1) {
    small_init(&s, 0);
    REQUIRE_OK(w8a8_comm_reserve(c, 8, 8, 8)); /* already larger: no change */
    w8a8_comm *c2 = NULL;
    REQUIRE_OK(w8a8_comm_create_mpi(&c2, g_h, &world));
    REQUIRE_OK(w8a8_comm_reserve(c2, 4 * g_size, 8, 8));
    /* skew: rank 0 takes 4 + 4 rows, the last rank none */
    if (g_rank == 0) s.O.rows = 8;
    if (g_rank == g_size - 1) s.O.rows = 0;
    st = rs(c2, &s, NULL);
    if (g_rank == 0)
      CHECK(st == W8A8_ERROR_WORKSPACE, "skewed shard: %s %s", w8a8_status_name(st), w8a8_last_error());
    else
      CHECK(st == W8A8_ERROR_COMM_MISMATCH, "skewed shard elsewhere: %s", w8a8_status_name(st));
    REQUIRE_OK(w8a8_comm_destroy(c2));
  }
  REQUIRE_OK(w8a8_comm_destroy(c));
}

/* A real failed MPI call (MPI itself rejects an invalid count, through MPI_ERRORS_RETURN on
 * the communicator's duplicate), on every rank: W8A8_ERROR_COMM with MPI's message on every
 * rank, nothing written, and the communicator broken (an exchange that failed may have failed
 * differently elsewhere): later calls return W8A8_ERROR_BROKEN at once, naming the failure, and
 * w8a8_comm_get_async_error reports it. (The failure on one rank only: test_tp_fault.c.) */
TP_TEST(tp_err_mpi_failure_surfaces) {
  w8a8_comm *c = NULL;
  MPI_Comm world = MPI_COMM_WORLD;
  REQUIRE_OK(w8a8_comm_create_mpi(&c, g_h, &world));
  REQUIRE_OK(w8a8_comm_reserve(c, 64, 64, 64));
  small s;
  small_init(&s, 1);
  w8a8_tp_test_inject_mpi_fault(c);
  w8a8_status st = ag(c, &s, NULL);
  /* (a rank that enters the call after a peer failed may learn of that failure first: BROKEN) */
  const bool own = st == W8A8_ERROR_COMM;
  CHECK((own && strstr(w8a8_last_error(), "MPI")) || (st == W8A8_ERROR_BROKEN && strstr(w8a8_last_error(), "W8A8_ERROR_COMM")),
        "%s %s", w8a8_status_name(st), w8a8_last_error());
  CHECK(untouched(&s), "out written");
  st = ag(c, &s, NULL);
  CHECK(st == W8A8_ERROR_BROKEN && strstr(w8a8_last_error(), "W8A8_ERROR_COMM"), "after the failure: %s %s",
        w8a8_status_name(st), w8a8_last_error());
  st = w8a8_comm_get_async_error(c);
  CHECK(st == (own ? W8A8_ERROR_COMM : W8A8_ERROR_BROKEN) && strstr(w8a8_last_error(), own ? "MPI_Iallgather" : "broke"),
        "async error: %s %s", w8a8_status_name(st), w8a8_last_error());
  CHECK(w8a8_comm_reserve(c, 128, 64, 64) == W8A8_ERROR_BROKEN, "reserve on a broken communicator");
  CHECK(untouched(&s), "out written");
  REQUIRE_OK(w8a8_comm_destroy(c));
}

/* A CPU handle forcing W8A8_KERNEL_GENERIC on one rank, with a K its AVX2 kernel refuses (fp8: fewer than MR rows of
 * A fit the blocking workspace past K ~ 1.4 M): the call must be refused before the agreement, because a refusal in
 * the block GEMMs after it leaves the all-gather's messages posted and the communicator broken. Every rank fails
 * together, nothing is written, and the communicator still works, also once the rank is back on AUTO. */
TP_TEST(tp_err_forced_kernel_cpu) {
  const int64_t K = (int64_t)1 << 21, N = 4, W = g_size;
  const int last = g_size - 1;
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  w8a8_set_num_threads(h, 1);
  if (g_rank == last) REQUIRE_OK(w8a8_set_kernel(h, W8A8_KERNEL_GENERIC));
  w8a8_comm *c = NULL;
  MPI_Comm world = MPI_COMM_WORLD;
  REQUIRE_OK(w8a8_comm_create_mpi(&c, h, &world));
  REQUIRE_OK(w8a8_comm_reserve(c, W, N, K));
  uint8_t *a = malloc((size_t)(W * K)), *b = malloc((size_t)(N * K));
  uint16_t out[64];
  REQUIRE(a && b && W <= 16, "malloc / W <= 16");
  for (int64_t i = 0; i < W * K; i++) a[i] = (uint8_t)(0x30 + (i * 7 + g_rank) % 16); /* small positive fp8 values */
  for (int64_t i = 0; i < N * K; i++) b[i] = (uint8_t)(0x20 + (i * 3) % 16);
  float sa = 0.01f, sb = 0.02f;
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sb);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, b);
  for (int op = 0; op < 2; op++) { /* 0: all-gather (1 row per rank), 1: reduce-scatter (W rows, 1 out row each) */
    w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, op ? W : 1, K, K, a);
    w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, op ? 1 : W, N, N, out);
    for (int pass = 0; pass < 2; pass++) { /* 1: the last rank back on AUTO */
      if (pass == 1 && g_rank == last) REQUIRE_OK(w8a8_set_kernel(h, W8A8_KERNEL_AUTO));
      memset(out, 0xA5, sizeof out);
      w8a8_status st = op ? w8a8_scaled_mm_reduce_scatter(c, &A, &B, &SA, &SB, NULL, NULL, &O, NULL)
                          : w8a8_all_gather_scaled_mm(c, &A, &B, &SA, &SB, NULL, NULL, &O, NULL, NULL);
      int written = 0;
      for (int i = 0; i < 64; i++) written |= out[i] != 0xA5A5;
      if (pass == 1) {
        CHECK(st == W8A8_SUCCESS && written, "op %d on AUTO: %s %s", op, w8a8_status_name(st), w8a8_last_error());
      } else if (g_rank == last) {
        CHECK(st == W8A8_ERROR_UNSUPPORTED_DEVICE && strstr(w8a8_last_error(), "forces a kernel"), "op %d: %s %s", op,
              w8a8_status_name(st), w8a8_last_error());
        CHECK(!written, "op %d: out written", op);
      } else {
        CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "W8A8_ERROR_UNSUPPORTED_DEVICE"),
              "op %d rank %d: %s %s", op, g_rank, w8a8_status_name(st), w8a8_last_error());
        CHECK(!written, "op %d: out written", op);
      }
    }
    if (g_rank == last) REQUIRE_OK(w8a8_set_kernel(h, W8A8_KERNEL_GENERIC));
  }
  free(a), free(b);
  REQUIRE_OK(w8a8_comm_destroy(c));
  w8a8_destroy(h);
}

TP_TEST(tp_shard_rows_helper) {
  int64_t off = -1, cnt = -1, sum = 0;
  for (int r = 0; r < 3; r++) {
    REQUIRE_OK(w8a8_tp_shard_rows(10, 3, r, &off, &cnt));
    CHECK(off == sum && cnt == (r == 0 ? 4 : 3), "rank %d: off %lld cnt %lld", r, (long long)off, (long long)cnt);
    sum += cnt;
  }
  REQUIRE_OK(w8a8_tp_shard_rows(2, 4, 3, &off, &cnt));
  CHECK(off == 2 && cnt == 0, "M < W: %lld %lld", (long long)off, (long long)cnt);
  CHECK(w8a8_tp_shard_rows(-1, 2, 0, &off, &cnt) == W8A8_ERROR_INVALID_SHAPE, "negative total");
  CHECK(w8a8_tp_shard_rows(4, 0, 0, &off, &cnt) == W8A8_ERROR_INVALID_VALUE, "size 0");
  CHECK(w8a8_tp_shard_rows(4, 2, 2, &off, &cnt) == W8A8_ERROR_INVALID_VALUE, "rank out of range");
  CHECK(w8a8_tp_shard_rows(4, 2, 0, NULL, &cnt) == W8A8_ERROR_NULL_POINTER, "NULL offset");
}
