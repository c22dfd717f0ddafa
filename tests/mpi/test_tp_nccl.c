/* test_tp_nccl.c — the fused TP operations on GPU ranks in separate processes: the NCCL
 * transport (one rank per process, w8a8_comm_create_world with a CUDA handle: NCCL bootstrapped
 * over MPI, agreement over MPI on the host). Run under mpirun like the rest of w8a8_tp_tests.
 *
 * Rank r uses device (node-local rank) % ndev. SKIP, agreed on every rank, when some rank sees
 * no CUDA device (CI) or when two ranks of a node would share a GPU (NCCL refuses that with
 * ncclInvalidUsage; same-GPU ranks are tests/test_tp_gpu.c's in-process emulation). With one
 * rank (np 1) the NCCL communicator turns out to be in-process and takes the GROUP path.
 *
 * As in test_tp_ops.c, every rank generates every rank's inputs from seeds and computes the
 * whole layer with the scalar reference (g_ref): int8 bit for bit; fp8 within
 * 2^-7 |want| + 1e-3 * sa*sb*sum|a b| (the reference on |A|, |B|); fused == unfused bit for bit;
 * outputs (and gathered outputs) poisoned first, their padding untouched. Also: many calls
 * queued without a host sync (buffer reuse across calls), and a CUDA graph of fused calls
 * captured on each rank's stream and replayed on new inputs (the MPI-bootstrapped NCCL path
 * accepts captures: its agreement runs on the host).
 *
 * IPC transport (tp_ipc_*): the same cases on communicators created with W8A8_TP_IPC=1 (CUDA IPC
 * mappings of the peers' workspaces, copy engine, interprocess events; captured calls take the
 * NCCL schedule on a second workspace). They run only when W8A8_TP_IPC=1 is in the environment
 * (the transport is opt-in) and SKIP without 2+ processes whose GPUs all
 * have peer access to each other; where they do, a communicator that did not choose IPC FAILS
 * (a fallback to NCCL must not pass as an IPC test). The tp_nccl_* tests force the NCCL
 * transport (W8A8_TP_IPC=0 at creation) whatever the environment says. tp_ipc_graph_capture also
 * queues eager calls, a replay and eager calls again without a host sync; tp_ipc_reserve_again
 * grows the workspace between calls (the peers reopen the new handles at the next call).
 *
 * Collective rule (tp_test.h): every rank takes every branch that leads to a collective call
 * (library call, tp_any_failed, all_ok) together; local problems are agreed first. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tp_test.h"
#include "core/knobs.h"

#if !defined(W8A8_HAVE_CUDA) || !defined(W8A8_HAVE_NCCL)
TP_TEST(tp_nccl_not_built) { SKIP("built without CUDA or NCCL"); }
#else
#include <cuda_runtime.h>

#define POISON 0xA5
int w8a8_tp_gpu_poison_ws(const w8a8_comm *c, int v); /* (src/tp/tp_gpu.h: the library's hidden test hook) */

/* Does every rank say yes? (collective) */
static bool all_ok(bool mine) {
  int m = mine ? 1 : 0, all = 0;
  MPI_Allreduce(&m, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all != 0;
}

/* ---- this rank's GPU and communicator ------------------------------------------------------- */

typedef struct genv {
  int dev, cc;
  bool peers_ok; /* 2+ ranks, one host, every other rank's GPU visible here with peer access */
  w8a8_handle *h;
  cudaStream_t st;
  w8a8_comm *comm;
} genv;

/* TP_IPC for the creation only (ipc: 1, else 0); the environment's value comes back after. */
static void ipc_env(int ipc, char *saved, size_t n, bool *had) {
  (void)saved, (void)n, (void)had;
  w8a8_dev_set_int("TP_IPC", ipc ? 1 : 0);
}
static void ipc_env_restore(const char *saved, bool had) {
  (void)saved, (void)had;
  w8a8_dev_set("TP_IPC", NULL);
}

/* 1: ready; 0: skip (why set, same decision on every rank); -1: failed (every rank). */
static int genv_open_mode(genv *e, const char **why, int ipc) {
  memset(e, 0, sizeof *e);
  e->dev = -1;
  MPI_Comm node;
  int lrank = 0, lsize = 1;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &lrank);
  MPI_Comm_size(node, &lsize);
  MPI_Comm_free(&node);
  const int ndev = w8a8_cuda_device_count();
  /* Key of the GPU this rank would use: host and PCI bus id (CUDA_VISIBLE_DEVICES may renumber). */
  char key[128];
  memset(key, 0, sizeof key);
  if (ndev > 0) {
    e->dev = lrank % ndev;
    char host[64] = {0}, bus[32] = {0};
    gethostname(host, sizeof host - 1);
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, e->dev) != cudaSuccess) {
      cudaGetLastError();
      snprintf(bus, sizeof bus, "device%d", e->dev);
    }
    snprintf(key, sizeof key, "%s|%s", host, bus);
  }
  if (!all_ok(ndev > 0)) {
    *why = "no CUDA device visible on some rank";
    return 0;
  }
  char *keys = calloc((size_t)g_size, sizeof key);
  bool have = keys != NULL;
  if (!all_ok(have)) {
    free(keys);
    w8a8_test_fail(__FILE__, __LINE__, "out of memory");
    return -1;
  }
  MPI_Allgather(key, (int)sizeof key, MPI_CHAR, keys, (int)sizeof key, MPI_CHAR, MPI_COMM_WORLD);
  bool shared = false;
  for (int i = 0; i < g_size; i++)
    for (int j = 0; j < i; j++) shared |= strcmp(keys + (size_t)i * sizeof key, keys + (size_t)j * sizeof key) == 0;
  if (g_rank == 0 && !shared) {
    printf("    tp_nccl: %d ranks on GPUs", g_size);
    for (int i = 0; i < g_size; i++) printf(" %s", keys + (size_t)i * sizeof key);
    printf("\n");
  }
  /* Could the IPC transport work here (the library's own test, made independently)? */
  e->peers_ok = g_size > 1 && !shared;
  for (int i = 0; i < g_size && e->peers_ok; i++) {
    const char *ki = keys + (size_t)i * sizeof key, *bar = strchr(ki, '|');
    int di = -1, can = 0;
    if (i == g_rank) continue;
    if (!bar || strncmp(ki, key, (size_t)(bar - ki) + 1) != 0 || cudaDeviceGetByPCIBusId(&di, bar + 1) != cudaSuccess ||
        cudaDeviceCanAccessPeer(&can, e->dev, di) != cudaSuccess || !can)
      e->peers_ok = false;
    cudaGetLastError();
  }
  free(keys);
  if (shared) {
    *why = "two ranks of a node would share a GPU (NCCL refuses it; run with at most one rank per GPU)";
    return 0;
  }
  (void)lsize;
  cudaSetDevice(e->dev); /* this process's buffers, stream and NCCL live on dev */
  w8a8_status s = w8a8_create(&e->h, W8A8_DEVICE_CUDA, e->dev);
  bool ok = s == W8A8_SUCCESS;
  if (!ok) w8a8_test_fail(__FILE__, __LINE__, "w8a8_create(CUDA %d): %s", e->dev, w8a8_last_error());
  if (ok && cudaStreamCreateWithFlags(&e->st, cudaStreamNonBlocking) != cudaSuccess) {
    w8a8_test_fail(__FILE__, __LINE__, "cudaStreamCreate on device %d", e->dev);
    ok = false;
  }
  if (ok) w8a8_set_stream(e->h, e->st);
  if (!all_ok(ok)) {
    if (e->st) cudaStreamDestroy(e->st);
    w8a8_destroy(e->h);
    e->h = NULL, e->st = NULL;
    if (ok) w8a8_test_fail(__FILE__, __LINE__, "another rank could not create its CUDA handle");
    return -1;
  }
  w8a8_handle_info info;
  w8a8_get_info(e->h, &info);
  int cc = info.cc_major * 10 + info.cc_minor;
  MPI_Allreduce(&cc, &e->cc, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  /* Collective: fails on every rank together when any rank's arguments are bad. */
  char env_saved[64];
  bool env_had = false;
  ipc_env(ipc, env_saved, sizeof env_saved, &env_had);
  s = w8a8_comm_create_world(&e->comm, e->h);
  ipc_env_restore(env_saved, env_had);
  if (s != W8A8_SUCCESS) {
    w8a8_test_fail(__FILE__, __LINE__, "w8a8_comm_create_world (CUDA handle, device %d): %s: %s", e->dev,
                   w8a8_status_name(s), w8a8_last_error());
    cudaStreamDestroy(e->st);
    w8a8_destroy(e->h);
    e->h = NULL, e->st = NULL, e->comm = NULL;
    return -1;
  }
  /* The largest case: M = 520 (a skewed RS shard may hold ceil(M/W) + the last rank's rows:
   * reserve max_m = 2 M), N <= 400, K <= 520. */
  s = w8a8_comm_reserve(e->comm, 2 * 640, 400, 640);
  if (s != W8A8_SUCCESS) w8a8_test_fail(__FILE__, __LINE__, "w8a8_comm_reserve: %s", w8a8_last_error());
  if (!all_ok(s == W8A8_SUCCESS)) return -1; /* the caller closes */
  const char *note = NULL, *tr = w8a8_tp_transport(e->comm, &note);
  if (g_rank == 0) printf("    tp_nccl: transport %s%s%s\n", tr, note && note[0] ? ": " : "", note ? note : "");
  if (ipc) {
    if (!all_ok(e->peers_ok)) {
      *why = "the IPC transport needs 2+ processes on one host whose GPUs all have peer access";
      return 0; /* the caller closes */
    }
    if (!all_ok(strcmp(tr, "ipc") == 0)) {
      w8a8_test_fail(__FILE__, __LINE__,
                     "rank %d: W8A8_TP_IPC=1 and every GPU pair has peer access, but the transport is %s (%s)", g_rank,
                     tr, note ? note : "");
      return -1;
    }
  }
  return 1;
}

static void genv_close(genv *e) {
  if (e->st) cudaStreamSynchronize(e->st);
  if (e->comm) w8a8_comm_destroy(e->comm); /* collective */
  if (e->h) w8a8_destroy(e->h);
  if (e->st) cudaStreamDestroy(e->st);
  memset(e, 0, sizeof *e);
}

#define GENV_OPEN_OR_RETURN(e) GENV_OPEN_MODE_OR_RETURN(e, 0)
/* ipc: the IPC tests run only where the caller asked for them (W8A8_TP_IPC=1). */
#define GENV_OPEN_MODE_OR_RETURN(e, ipc)                                                     \
  do {                                                                                       \
    const char *why_ = NULL;                                                                 \
    const char *env_ = getenv("W8A8_TP_IPC");                                                \
    if ((ipc) && !all_ok(env_ && strcmp(env_, "1") == 0))                                    \
      SKIP("the IPC transport is opt-in: set W8A8_TP_IPC=1 (mpirun -x W8A8_TP_IPC) to test it"); \
    int o_ = genv_open_mode(&(e), &why_, (ipc));                                             \
    if (o_ <= 0) genv_close(&(e));                                                           \
    if (o_ == 0) SKIP(why_);                                                                 \
    if (o_ < 0) return;                                                                      \
  } while (0)

/* ---- one fused call's data: host inputs, expected output, device buffers --------------------- */

typedef struct ncase {
  w8a8_dtype in, out;
  int sa_tok, sb_chan, bias;
  int zp; /* 0 none, 1 premultiplied azp_adj, 2 azp per tensor, 3 per token (int8) */
  int64_t M, N, K;
  int skew, pad, gathered;
  uint64_t seed;
  int partials; /* RS: W8A8_TP_PARTIALS_FP32 or _OUT (the reference then rounds each rank's partial) */
} ncase;

enum { B_A, B_SA, B_AZP, B_B, B_SB, B_BIAS, B_ADJ, B_OU, B_OF, B_GA, B_GS, B_GZ, B_COUNT };

typedef struct job {
  ncase tc;
  int ag;
  /* shapes of this rank's call */
  int64_t a_rows, a_cols, lda; /* AG: [Mr, K]; RS: [M, Kr] */
  int64_t b_cols, bk, ldb;     /* B [bk, b_cols] column-major: AG Nr x K, RS N x Kr */
  int64_t n_sa, n_azp, n_sb;   /* vector lengths (1 or per row / channel) */
  int64_t o_rows, o_cols, ldo; /* AG: [M, Nr]; RS: [Mr, N] */
  int64_t off;                 /* RS: this rank's first row of the layer */
  /* host */
  uint8_t *h_a, *h_b;
  float *h_sa, *h_sb;
  int32_t *h_azp, *h_adj;
  void *h_bias;
  void *want;   /* [o_rows, o_cols] dense */
  float *slack; /* fp8: sa*sb*sum|a b| per output element */
  float *flip;  /* RS with rounded partials, fp8: sum over ranks of tp_out_spacing2(p_j) (all rows) */
  int64_t modes_differ; /* RS: elements of this rank whose reference differs between the two kinds of partials */
  uint8_t *a_full; /* AG: the gathered rows [M, K], their scales and zero points */
  float *sa_full;
  int32_t *azp_full;
  /* device */
  void *d[B_COUNT];
  size_t bytes[B_COUNT];
  w8a8_matrix A, B, OU, OF;
  w8a8_vector SA, SB, BIAS;
  w8a8_zero_point ZP;
  w8a8_gathered G;
  w8a8_status su, sf;
  int ran_u, ran_f;
  char msg[512];
} job;

static const char *cname(const ncase *t, int ag, char *buf, size_t n) {
  snprintf(buf, n, "%s %s->%s M=%lld N=%lld K=%lld sa_tok=%d sb_chan=%d bias=%d zp=%d skew=%d pad=%d%s",
           ag ? "AG" : "RS", w8a8_dtype_name(t->in), w8a8_dtype_name(t->out), (long long)t->M, (long long)t->N,
           (long long)t->K, t->sa_tok, t->sb_chan, t->bias, t->zp, t->skew, t->pad,
           !ag && t->partials == W8A8_TP_PARTIALS_OUT ? " partials=out" : "");
  return buf;
}

/* acc += sa*sb*sum_k |a_k b_k| over rows x N: the reference on |A|, |B| (an e4m3 value's
 * magnitude is its bits without the sign), fp32 out, no bias. */
static bool add_abs_slack(float *acc, int64_t rows, int64_t N, int64_t K, const uint8_t *a, int64_t lda,
                          const uint8_t *b, int64_t ldb, const float *sa, int sa_tok, const float *sb, int sb_chan) {
  uint8_t *aa = malloc((size_t)(rows * lda) + 1), *bb = malloc((size_t)(N * ldb) + 1);
  float *sa_abs = malloc(sizeof(float) * (size_t)(sa_tok ? rows : 1) + 4);
  float *sb_abs = malloc(sizeof(float) * (size_t)(sb_chan ? N : 1) + 4);
  float *o = malloc(sizeof(float) * (size_t)(rows * N) + 4);
  bool ok = aa && bb && sa_abs && sb_abs && o;
  if (ok) {
    for (int64_t i = 0; i < rows * lda; i++) aa[i] = a[i] & 0x7f;
    for (int64_t i = 0; i < N * ldb; i++) bb[i] = b[i] & 0x7f;
    for (int64_t i = 0; i < (sa_tok ? rows : 1); i++) sa_abs[i] = fabsf(sa[i]);
    for (int64_t i = 0; i < (sb_chan ? N : 1); i++) sb_abs[i] = fabsf(sb[i]);
    w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, rows, K, lda, aa);
    w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, ldb, bb);
    w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, sa_tok ? rows : 1, sa_abs);
    w8a8_vector SB = w8a8_vector_make(W8A8_DTYPE_FP32, sb_chan ? N : 1, sb_abs);
    w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, rows, N, N, o);
    ok = w8a8_scaled_mm(g_ref, &A, &B, &SA, &SB, NULL, NULL, &O) == W8A8_SUCCESS;
    for (int64_t i = 0; ok && i < rows * N; i++) acc[i] += o[i];
  }
  free(aa), free(bb), free(sa_abs), free(sb_abs), free(o);
  return ok;
}

static void job_free_host(job *J) {
  free(J->h_a), free(J->h_b), free(J->h_sa), free(J->h_sb), free(J->h_azp), free(J->h_adj), free(J->h_bias);
  free(J->want), free(J->slack), free(J->flip), free(J->a_full), free(J->sa_full), free(J->azp_full);
  J->h_a = J->h_b = NULL, J->h_sa = J->h_sb = NULL, J->h_azp = J->h_adj = NULL, J->h_bias = J->want = NULL;
  J->slack = J->flip = NULL, J->a_full = NULL, J->sa_full = NULL, J->azp_full = NULL;
}

/* colsum of B's columns (int8), times 5 for the premultiplied static zero point. */
static void make_adj(const ncase *tc, int32_t *adj, const uint8_t *b, int64_t ncols, int64_t k, int64_t ldb) {
  for (int64_t n = 0; n < ncols; n++) {
    int32_t s = 0;
    for (int64_t i = 0; i < k; i++) s += (int8_t)b[n * ldb + i];
    adj[n] = tc->zp == 1 ? 5 * s : s;
  }
}

/* All-gather: every rank's rows from seeds, this rank's weight shard (N differs between ranks:
 * N + (r & 1)), the whole layer's expected output with this rank's weights. */
static bool ag_make_host(job *J) {
  const ncase *tc = &J->tc;
  const int W = g_size, r = g_rank;
  const int64_t M = tc->M, K = tc->K;
  const int64_t Mr = tp_rows(M, W, r, tc->skew), Nr = tc->N + (tc->N > 0 ? (r & 1) : 0);
  J->a_rows = Mr, J->a_cols = K, J->lda = K + tc->pad;
  J->b_cols = Nr, J->bk = K, J->ldb = K + tc->pad;
  J->n_sa = tc->sa_tok ? Mr : 1, J->n_azp = tc->zp == 3 ? Mr : 1, J->n_sb = tc->sb_chan ? Nr : 1;
  J->o_rows = M, J->o_cols = Nr, J->ldo = Nr + tc->pad;
  J->h_a = calloc((size_t)(Mr * J->lda) + 1, 1);
  J->h_sa = calloc((size_t)Mr + 1, sizeof(float));
  J->h_azp = calloc((size_t)Mr + 1, sizeof(int32_t));
  J->h_b = calloc((size_t)(Nr * J->ldb) + 1, 1);
  J->h_sb = calloc((size_t)Nr + 1, sizeof(float));
  J->h_bias = calloc((size_t)Nr + 1, 4);
  J->h_adj = calloc((size_t)Nr + 1, sizeof(int32_t));
  J->a_full = calloc((size_t)(M * K) + 1, 1);
  J->sa_full = calloc((size_t)M + 1, sizeof(float));
  J->azp_full = calloc((size_t)M + 1, sizeof(int32_t));
  J->want = calloc((size_t)(M * Nr) + 1, w8a8_dtype_size(tc->out));
  J->slack = calloc((size_t)(M * Nr) + 1, sizeof(float));
  uint8_t *aj = calloc((size_t)(M * K) + 1, 1), *bd = calloc((size_t)(Nr * K) + 1, 1);
  float *saj = calloc((size_t)M + 1, sizeof(float));
  int32_t *azpj = calloc((size_t)M + 1, sizeof(int32_t));
  bool ok = J->h_a && J->h_sa && J->h_azp && J->h_b && J->h_sb && J->h_bias && J->h_adj && J->a_full && J->sa_full &&
            J->azp_full && J->want && J->slack && aj && bd && saj && azpj;
  for (int j = 0; ok && j < W; j++) {
    const int64_t Mj = tp_rows(M, W, j, tc->skew), oj = tp_offset(M, W, j, tc->skew);
    tp_fill_q8(aj, Mj * K, tc->in, tp_seed(tc->seed, 1, (uint64_t)j));
    tp_fill_f32(saj, tc->sa_tok ? Mj : 1, 1e-3f, 4e-3f, tp_seed(tc->seed, 2, (uint64_t)j));
    tp_fill_i32(azpj, tc->zp == 3 ? Mj : 1, -20, 20, tp_seed(tc->seed, 3, (uint64_t)j));
    memcpy(J->a_full + oj * K, aj, (size_t)(Mj * K));
    for (int64_t i = 0; i < Mj; i++) {
      J->sa_full[oj + i] = saj[tc->sa_tok ? i : 0];
      J->azp_full[oj + i] = azpj[tc->zp == 3 ? i : 0];
    }
    if (j == r) {
      for (int64_t i = 0; i < Mj; i++) memcpy(J->h_a + i * J->lda, aj + i * K, (size_t)K);
      memcpy(J->h_sa, saj, sizeof(float) * (size_t)J->n_sa);
      memcpy(J->h_azp, azpj, sizeof(int32_t) * (size_t)J->n_azp);
    }
  }
  if (ok) {
    tp_fill_q8(bd, Nr * K, tc->in, tp_seed(tc->seed, 4, (uint64_t)r));
    for (int64_t n = 0; n < Nr; n++) memcpy(J->h_b + n * J->ldb, bd + n * K, (size_t)K);
    tp_fill_f32(J->h_sb, J->n_sb, 0.5f, 2.0f, tp_seed(tc->seed, 5, (uint64_t)r));
    tp_fill_out(tc->out, J->h_bias, Nr, -2.0f, 2.0f, tp_seed(tc->seed, 6, (uint64_t)r));
    make_adj(tc, J->h_adj, J->h_b, Nr, K, J->ldb);
    /* one rank computing the whole layer */
    w8a8_matrix AF = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, M, K, K, J->a_full);
    w8a8_matrix BH = w8a8_matrix_make(tc->in, W8A8_COL_MAJOR, K, Nr, J->ldb, J->h_b);
    w8a8_vector SAF = w8a8_vector_make(W8A8_DTYPE_FP32, M, J->sa_full);
    w8a8_vector SBH = w8a8_vector_make(W8A8_DTYPE_FP32, J->n_sb, J->h_sb);
    w8a8_vector BH_ = w8a8_vector_make(tc->out, Nr, J->h_bias);
    w8a8_zero_point ZPF = {w8a8_vector_make(W8A8_DTYPE_INT32, M, J->azp_full),
                           w8a8_vector_make(W8A8_DTYPE_INT32, Nr, J->h_adj)};
    if (tc->zp == 1) ZPF.azp = w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL);
    w8a8_matrix OR = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, M, Nr, Nr, J->want);
    w8a8_status s = w8a8_scaled_mm(g_ref, &AF, &BH, &SAF, &SBH, tc->bias ? &BH_ : NULL, tc->zp ? &ZPF : NULL, &OR);
    if (s != W8A8_SUCCESS) w8a8_test_fail(__FILE__, __LINE__, "reference: %s", w8a8_last_error());
    ok = s == W8A8_SUCCESS;
  }
  if (ok && tc->in == W8A8_DTYPE_FP8_E4M3)
    ok = add_abs_slack(J->slack, M, Nr, K, J->a_full, K, J->h_b, J->ldb, J->sa_full, 1, J->h_sb, tc->sb_chan);
  free(aj), free(bd), free(saj), free(azpj);
  return ok;
}

/* Reduce-scatter: rank j's K shard (w8a8_tp_shard_rows of K: uneven, empty when K < W) of all
 * rows, its weights; expected rows of this rank = ((p_0 + p_1) + ...) + bias, rounded once. */
static bool rs_make_host(job *J) {
  const ncase *tc = &J->tc;
  const int W = g_size, r = g_rank;
  const int64_t M = tc->M, N = tc->N;
  const int64_t Mr = tp_rows(M, W, r, tc->skew), off = tp_offset(M, W, r, tc->skew);
  int64_t o, Kr;
  w8a8_tp_shard_rows(tc->K, W, r, &o, &Kr);
  J->off = off;
  J->a_rows = M, J->a_cols = Kr, J->lda = Kr + tc->pad > 0 ? Kr + tc->pad : 1;
  J->b_cols = N, J->bk = Kr, J->ldb = J->lda;
  J->n_sa = tc->sa_tok ? M : 1, J->n_azp = tc->zp == 3 ? M : 1, J->n_sb = tc->sb_chan ? N : 1;
  J->o_rows = Mr, J->o_cols = N, J->ldo = N + tc->pad;
  J->h_bias = calloc((size_t)N + 1, 4);
  J->want = calloc((size_t)(Mr * N) + 1, w8a8_dtype_size(tc->out));
  J->slack = calloc((size_t)(M * N) + 1, sizeof(float)); /* all rows; this rank's from off */
  J->flip = calloc((size_t)(M * N) + 1, sizeof(float));
  const bool want_out = tc->partials == W8A8_TP_PARTIALS_OUT;
  float *acc = calloc((size_t)(M * N) + 1, sizeof(float)), *part = calloc((size_t)(M * N) + 1, sizeof(float));
  float *accq = calloc((size_t)(M * N) + 1, sizeof(float)); /* the sum of the rounded partials */
  bool ok = J->h_bias && J->want && J->slack && J->flip && acc && part && accq;
  if (ok) tp_fill_out(tc->out, J->h_bias, N, -2.0f, 2.0f, tp_seed(tc->seed, 16, 0)); /* the same on every rank */
  for (int j = 0; ok && j < W; j++) {
    int64_t Kj;
    w8a8_tp_shard_rows(tc->K, W, j, &o, &Kj);
    const int64_t ld = Kj + tc->pad > 0 ? Kj + tc->pad : 1;
    uint8_t *a = calloc((size_t)(M * ld) + 1, 1), *b = calloc((size_t)(N * ld) + 1, 1), *dense = NULL;
    float *sa = calloc((size_t)M + 1, sizeof(float)), *sb = calloc((size_t)N + 1, sizeof(float));
    int32_t *azp = calloc((size_t)M + 1, sizeof(int32_t)), *adj = calloc((size_t)N + 1, sizeof(int32_t));
    dense = calloc((size_t)((M > N ? M : N) * Kj) + 1, 1);
    ok = a && b && sa && sb && azp && adj && dense;
    if (ok) {
      tp_fill_q8(dense, M * Kj, tc->in, tp_seed(tc->seed, 11, (uint64_t)j));
      for (int64_t m = 0; m < M; m++) memcpy(a + m * ld, dense + m * Kj, (size_t)Kj);
      tp_fill_q8(dense, N * Kj, tc->in, tp_seed(tc->seed, 14, (uint64_t)j));
      for (int64_t n = 0; n < N; n++) memcpy(b + n * ld, dense + n * Kj, (size_t)Kj);
      tp_fill_f32(sa, tc->sa_tok ? M : 1, 1e-3f, 4e-3f, tp_seed(tc->seed, 12, (uint64_t)j));
      tp_fill_i32(azp, tc->zp == 3 ? M : 1, -20, 20, tp_seed(tc->seed, 13, (uint64_t)j));
      tp_fill_f32(sb, tc->sb_chan ? N : 1, 0.5f, 2.0f, tp_seed(tc->seed, 15, (uint64_t)j));
      make_adj(tc, adj, b, N, Kj, ld);
      w8a8_matrix AH = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, M, Kj, ld, a);
      w8a8_matrix BH = w8a8_matrix_make(tc->in, W8A8_COL_MAJOR, Kj, N, ld, b);
      w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sa_tok ? M : 1, sa);
      w8a8_vector SB = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sb_chan ? N : 1, sb);
      w8a8_zero_point ZP = {tc->zp >= 2 ? w8a8_vector_make(W8A8_DTYPE_INT32, tc->zp == 3 ? M : 1, azp)
                                        : w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL),
                            w8a8_vector_make(W8A8_DTYPE_INT32, N, adj)};
      w8a8_matrix PO = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, part);
      w8a8_status s = w8a8_scaled_mm(g_ref, &AH, &BH, &SA, &SB, NULL, tc->zp ? &ZP : NULL, &PO);
      if (s != W8A8_SUCCESS) w8a8_test_fail(__FILE__, __LINE__, "reference partial of rank %d: %s", j, w8a8_last_error());
      ok = s == W8A8_SUCCESS;
      for (int64_t i = 0; ok && i < M * N; i++) {
        const float q = tp_round_to_out(tc->out, part[i]);
        acc[i] = j == 0 ? part[i] : acc[i] + part[i];
        accq[i] = j == 0 ? q : accq[i] + q;
        if (want_out) J->flip[i] += tp_out_spacing2(tc->out, part[i]);
      }
      if (ok && tc->in == W8A8_DTYPE_FP8_E4M3)
        ok = add_abs_slack(J->slack, M, N, Kj, a, ld, b, ld, sa, tc->sa_tok, sb, tc->sb_chan);
    }
    if (ok && j == r) { /* keep this rank's inputs */
      J->h_a = a, J->h_b = b, J->h_sa = sa, J->h_sb = sb, J->h_azp = azp, J->h_adj = adj;
      a = b = NULL, sa = sb = NULL, azp = adj = NULL;
    }
    free(a), free(b), free(sa), free(sb), free(azp), free(adj), free(dense);
  }
  J->modes_differ = 0;
  for (int64_t i = 0; ok && i < Mr; i++)
    for (int64_t n = 0; n < N; n++) {
      float s = (want_out ? accq : acc)[(off + i) * N + n], t = (want_out ? acc : accq)[(off + i) * N + n];
      if (tc->bias) s = s + w8a8_tp_load(tc->out, J->h_bias, n), t = t + w8a8_tp_load(tc->out, J->h_bias, n);
      w8a8_tp_store(tc->out, J->want, i * N + n, s);
      J->modes_differ += tp_round_to_out(tc->out, s) != tp_round_to_out(tc->out, t);
    }
  free(acc), free(part), free(accq);
  return ok;
}

static bool job_make_host(job *J) {
  job_free_host(J);
  return J->ag ? ag_make_host(J) : rs_make_host(J);
}

/* Device buffers (on the current device: the rank's) and the call's descriptors. */
static bool job_alloc_dev(job *J) {
  const ncase *tc = &J->tc;
  const size_t oes = w8a8_dtype_size(tc->out);
  const int64_t M = tc->M, K = tc->K;
  J->bytes[B_A] = (size_t)(J->a_rows * J->lda);
  J->bytes[B_SA] = sizeof(float) * (size_t)J->n_sa;
  J->bytes[B_AZP] = sizeof(int32_t) * (size_t)J->n_azp;
  J->bytes[B_B] = (size_t)(J->b_cols * J->ldb);
  J->bytes[B_SB] = sizeof(float) * (size_t)J->n_sb;
  J->bytes[B_BIAS] = oes * (size_t)J->b_cols;
  J->bytes[B_ADJ] = sizeof(int32_t) * (size_t)J->b_cols;
  J->bytes[B_OU] = J->bytes[B_OF] = oes * (size_t)(J->o_rows * J->ldo);
  J->bytes[B_GA] = J->ag ? (size_t)(M * (K + 3)) : 0;
  J->bytes[B_GS] = J->ag ? sizeof(float) * (size_t)M : 0;
  J->bytes[B_GZ] = J->ag ? sizeof(int32_t) * (size_t)M : 0;
  bool ok = true;
  for (int i = 0; i < B_COUNT; i++) {
    J->d[i] = NULL;
    if (cudaMalloc(&J->d[i], J->bytes[i] + 16) != cudaSuccess) {
      J->d[i] = NULL;
      ok = false;
    }
  }
  cudaGetLastError();
  const w8a8_dtype in = tc->in;
  if (J->ag) {
    J->A = w8a8_matrix_make(in, W8A8_ROW_MAJOR, J->a_rows, K, J->lda, J->d[B_A]);
    J->B = w8a8_matrix_make(in, W8A8_COL_MAJOR, K, J->b_cols, J->ldb, J->d[B_B]);
  } else {
    J->A = w8a8_matrix_make(in, W8A8_ROW_MAJOR, M, J->a_cols, J->lda, J->d[B_A]);
    J->B = w8a8_matrix_make(in, W8A8_COL_MAJOR, J->bk, J->b_cols, J->ldb, J->d[B_B]);
  }
  J->SA = w8a8_vector_make(W8A8_DTYPE_FP32, J->n_sa, J->d[B_SA]);
  J->SB = w8a8_vector_make(W8A8_DTYPE_FP32, J->n_sb, J->d[B_SB]);
  J->BIAS = w8a8_vector_make(tc->out, J->b_cols, J->d[B_BIAS]);
  J->ZP.azp = tc->zp >= 2 ? w8a8_vector_make(W8A8_DTYPE_INT32, J->n_azp, J->d[B_AZP])
                          : w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL);
  J->ZP.azp_adj = w8a8_vector_make(W8A8_DTYPE_INT32, J->b_cols, J->d[B_ADJ]);
  J->OU = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, J->o_rows, J->o_cols, J->ldo, J->d[B_OU]);
  J->OF = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, J->o_rows, J->o_cols, J->ldo, J->d[B_OF]);
  memset(&J->G, 0, sizeof J->G);
  if (J->ag) {
    J->G.a = w8a8_matrix_make(in, W8A8_ROW_MAJOR, M, K, K + 3, J->d[B_GA]);
    J->G.scale_a = w8a8_vector_make(W8A8_DTYPE_FP32, M, J->d[B_GS]);
    if (tc->zp >= 2) J->G.azp = w8a8_vector_make(W8A8_DTYPE_INT32, M, J->d[B_GZ]);
  }
  return ok;
}

/* Inputs up, outputs poisoned (legacy stream of the current device: sync before the calls). */
static bool job_upload(job *J) {
  const void *src[B_COUNT] = {J->h_a, J->h_sa, J->h_azp, J->h_b, J->h_sb, J->h_bias, J->h_adj};
  bool ok = true;
  for (int i = 0; i < B_COUNT; i++) {
    if (!J->d[i]) {
      ok = false;
      continue;
    }
    if (i <= B_ADJ) {
      if (J->bytes[i] && cudaMemcpy(J->d[i], src[i], J->bytes[i], cudaMemcpyHostToDevice) != cudaSuccess) ok = false;
    } else if (cudaMemset(J->d[i], POISON, J->bytes[i] + 16) != cudaSuccess) {
      ok = false;
    }
  }
  cudaGetLastError();
  return ok;
}

static void job_free_dev(job *J) {
  for (int i = 0; i < B_COUNT; i++)
    if (J->d[i]) cudaFree(J->d[i]);
  memset(J->d, 0, sizeof J->d);
}

/* The collective calls on this rank's stream: unfused (overlap 0) and/or fused (overlap 1). */
static void job_launch(genv *e, job *J, bool unfused, bool fused) {
  const ncase *tc = &J->tc;
  w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
  o.partials = tc->partials;
  const w8a8_vector *bias = tc->bias ? &J->BIAS : NULL;
  const w8a8_zero_point *zp = tc->zp ? &J->ZP : NULL;
  if (unfused || !J->ran_u) J->msg[0] = 0; /* (a fused-only call after an unfused one keeps its message) */
  if (unfused) {
    o.overlap = 0;
    J->su = J->ag ? w8a8_all_gather_scaled_mm(e->comm, &J->A, &J->B, &J->SA, &J->SB, bias, zp, &J->OU, NULL, &o)
                  : w8a8_scaled_mm_reduce_scatter(e->comm, &J->A, &J->B, &J->SA, &J->SB, bias, zp, &J->OU, &o);
    if (J->su != W8A8_SUCCESS) snprintf(J->msg, sizeof J->msg, "unfused: %s", w8a8_last_error());
    J->ran_u = 1;
  }
  if (fused) {
    o.overlap = 1;
    J->sf = J->ag ? w8a8_all_gather_scaled_mm(e->comm, &J->A, &J->B, &J->SA, &J->SB, bias, zp, &J->OF,
                                              tc->gathered ? &J->G : NULL, &o)
                  : w8a8_scaled_mm_reduce_scatter(e->comm, &J->A, &J->B, &J->SA, &J->SB, bias, zp, &J->OF, &o);
    if (J->sf != W8A8_SUCCESS && !J->msg[0]) snprintf(J->msg, sizeof J->msg, "fused: %s", w8a8_last_error());
    J->ran_f = 1;
  }
}

static int64_t bad_padding(const uint8_t *buf, int64_t rows, int64_t N, int64_t ld, size_t es) {
  int64_t bad = 0;
  for (int64_t m = 0; m < rows; m++)
    for (int64_t b = N * (int64_t)es; b < ld * (int64_t)es; b++) bad += buf[(size_t)(m * ld) * es + (size_t)b] != POISON;
  return bad;
}

/* Check the outputs (after the stream synchronized). Local: CHECKs only. */
static void job_check(job *J, const char *tag) {
  const ncase *tc = &J->tc;
  char nb[256];
  cname(tc, J->ag, nb, sizeof nb);
  if ((J->ran_u && J->su != W8A8_SUCCESS) || (J->ran_f && J->sf != W8A8_SUCCESS)) {
    CHECK(0, "%s rank %d: unfused %s, fused %s: %s (%s)", tag, g_rank, J->ran_u ? w8a8_status_name(J->su) : "-",
          J->ran_f ? w8a8_status_name(J->sf) : "-", J->msg, nb);
    return;
  }
  const size_t oes = w8a8_dtype_size(tc->out);
  const int64_t rows = J->o_rows, N = J->o_cols, ldo = J->ldo;
  const size_t ob = J->bytes[B_OF];
  uint8_t *of = malloc(ob + 1), *ou = malloc(ob + 1);
  if (!of || !ou) {
    free(of), free(ou);
    CHECK(0, "out of memory");
    return;
  }
  bool rd = cudaMemcpy(of, J->d[B_OF], ob, cudaMemcpyDeviceToHost) == cudaSuccess;
  if (J->ran_u) rd &= cudaMemcpy(ou, J->d[B_OU], ob, cudaMemcpyDeviceToHost) == cudaSuccess;
  CHECK(rd, "%s rank %d: reading the outputs back failed (%s)", tag, g_rank, nb);
  const float *slack = J->ag ? J->slack : J->slack + J->off * N;
  const float *flip = J->ag ? NULL : J->flip + J->off * N;
  int64_t bad = 0;
  for (int64_t m = 0; rd && m < rows; m++)
    for (int64_t n = 0; n < N; n++) {
      float g = w8a8_tp_load(tc->out, of, m * ldo + n), w = w8a8_tp_load(tc->out, J->want, m * N + n);
      bool ok;
      if (tc->in == W8A8_DTYPE_INT8)
        ok = memcmp(&g, &w, sizeof g) == 0 || (isnan(g) && isnan(w));
      else
        ok = fabsf(g - w) <= 0x1p-7f * fabsf(w) + 1e-3f * slack[m * N + n] + (flip ? flip[m * N + n] : 0.0f) +
                                 1e-6f;
      if (!ok && bad++ < 3)
        CHECK(0, "%s rank %d row %lld col %lld: got %.9g want %.9g (%s)", tag, g_rank, (long long)m, (long long)n,
              (double)g, (double)w, nb);
    }
  CHECK(bad == 0, "%s rank %d: %lld elements differ from the reference (%s)", tag, g_rank, (long long)bad, nb);
  if (rd && J->ran_u) {
    int64_t diff = 0;
    for (int64_t m = 0; m < rows; m++)
      diff += memcmp(ou + (size_t)(m * ldo) * oes, of + (size_t)(m * ldo) * oes, (size_t)N * oes) != 0;
    CHECK(diff == 0, "%s rank %d: fused and unfused differ in %lld rows (%s)", tag, g_rank, (long long)diff, nb);
    CHECK(bad_padding(ou, rows, N, ldo, oes) == 0, "%s rank %d: unfused out padding written (%s)", tag, g_rank, nb);
  }
  CHECK(!rd || bad_padding(of, rows, N, ldo, oes) == 0, "%s rank %d: fused out padding written (%s)", tag, g_rank, nb);
  free(of), free(ou);
  if (J->ag && tc->gathered && J->ran_f) {
    const int64_t M = tc->M, K = tc->K;
    uint8_t *ga = malloc(J->bytes[B_GA] + 1);
    float *gs = malloc(J->bytes[B_GS] + 4);
    int32_t *gz = malloc(J->bytes[B_GZ] + 4);
    bool g_ok = ga && gs && gz;
    if (g_ok) {
      g_ok = cudaMemcpy(ga, J->d[B_GA], J->bytes[B_GA], cudaMemcpyDeviceToHost) == cudaSuccess &&
             cudaMemcpy(gs, J->d[B_GS], J->bytes[B_GS], cudaMemcpyDeviceToHost) == cudaSuccess &&
             cudaMemcpy(gz, J->d[B_GZ], J->bytes[B_GZ], cudaMemcpyDeviceToHost) == cudaSuccess;
    }
    CHECK(g_ok, "%s rank %d: reading the gathered outputs failed", tag, g_rank);
    if (g_ok) {
      int64_t gb = 0;
      for (int64_t m = 0; m < M; m++) gb += memcmp(ga + m * (K + 3), J->a_full + m * K, (size_t)K) != 0;
      CHECK(gb == 0, "%s rank %d: gathered->a differs in %lld rows (%s)", tag, g_rank, (long long)gb, nb);
      CHECK(bad_padding(ga, M, K, K + 3, 1) == 0, "%s rank %d: gathered->a padding written", tag, g_rank);
      CHECK(memcmp(gs, J->sa_full, sizeof(float) * (size_t)M) == 0, "%s rank %d: gathered->scale_a differs (%s)", tag,
            g_rank, nb);
      if (tc->zp >= 2)
        CHECK(memcmp(gz, J->azp_full, sizeof(int32_t) * (size_t)M) == 0, "%s rank %d: gathered->azp differs (%s)", tag,
              g_rank, nb);
      else
        for (int64_t m = 0; m < M; m++) /* not asked for: untouched */
          if (((uint8_t *)gz)[m * 4] != POISON) {
            CHECK(0, "%s rank %d: gathered->azp written though not requested", tag, g_rank);
            break;
          }
    }
    free(ga), free(gs), free(gz);
  }
}

/* One case, both calls, checked: host data, device buffers (agreed), calls, sync, checks. Returns the
 * RS reference's elements (this rank) where the two kinds of partials differ. */
static int64_t run_case(genv *e, const ncase *tc, int ag) {
  job J;
  memset(&J, 0, sizeof J);
  J.tc = *tc;
  J.ag = ag;
  bool ok = job_make_host(&J);
  ok = ok && job_alloc_dev(&J) && job_upload(&J) && cudaDeviceSynchronize() == cudaSuccess;
  if (all_ok(ok)) {
    job_launch(e, &J, true, false);
    cudaError_t ce = cudaStreamSynchronize(e->st);
    /* Every rank's workspace poisoned (NaN) between the unfused and the fused calls, once every rank's
     * unfused call has finished and before any fused call starts: rows or partials a fused schedule
     * failed to deliver (W8A8_TP_RS_DIRECT's stores into the peers' IPC mappings, say) would otherwise
     * be read from the unfused call's leftovers and pass. */
    bool pz = all_ok(ce == cudaSuccess) && w8a8_tp_gpu_poison_ws(e->comm, 0xff) == 0;
    if (all_ok(pz)) {
      job_launch(e, &J, false, true);
      ce = cudaStreamSynchronize(e->st);
    } else
      CHECK(0, "rank %d: the unfused call or the poisoning between the calls failed (%s)", g_rank,
            cudaGetErrorString(ce));
    CHECK(ce == cudaSuccess, "rank %d: stream: %s", g_rank, cudaGetErrorString(ce));
    if (ce == cudaSuccess && pz) job_check(&J, "case");
  } else {
    CHECK(ok, "rank %d: setting up the case failed (host memory, reference or device buffers)", g_rank);
    if (ok) CHECK(0, "another rank could not set up the case");
  }
  job_free_dev(&J);
  job_free_host(&J);
  return J.modes_differ;
}

/* The mode sweep of tests/test_tp_gpu.c: every out dtype x zero-point kind (int8) and scale
 * kinds (both), shapes, skews, strides and gathered outputs varying from case to case. */
static int make_cases(ncase *cs, int max, int W) {
  static const int64_t Ms[] = {1, 5, 17, 40, 96, 3, 64};
  static const int64_t Ns[] = {7, 33, 64, 1, 48};
  static const int64_t Ks[] = {13, 32, 96, 1, 64};
  static const w8a8_dtype outs[] = {W8A8_DTYPE_BF16, W8A8_DTYPE_FP16, W8A8_DTYPE_FP32};
  int n = 0, i = 0;
  for (int in = 0; in < 2; in++)
    for (int o = 0; o < 3; o++)
      for (int zp = 0; zp < (in == 0 ? 4 : 2) && n < max; zp++, i++) {
        ncase t;
        memset(&t, 0, sizeof t);
        t.in = in == 0 ? W8A8_DTYPE_INT8 : W8A8_DTYPE_FP8_E4M3;
        t.out = outs[o];
        t.zp = in == 0 ? zp : 0;
        t.sa_tok = (i + (in == 1 ? zp : 0)) & 1;
        t.sb_chan = (i >> 1) & 1;
        t.bias = (i % 3) != 0;
        t.M = Ms[i % 7];
        t.N = Ns[i % 5];
        t.K = Ks[(i + W) % 5];
        t.skew = (i % 4) == 1;
        t.pad = (i % 3) == 2 ? 5 : 0;
        t.gathered = (i & 1) == 0;
        t.seed = 3000u * (uint64_t)W + (uint64_t)i;
        cs[n++] = t;
      }
  /* M smaller than W (most ranks empty), M = 0, K = 0, then the fast GEMM paths (many tiles) */
  ncase t;
  memset(&t, 0, sizeof t);
  t.in = W8A8_DTYPE_INT8, t.out = W8A8_DTYPE_BF16, t.M = 1, t.N = 9, t.K = 24, t.bias = 1, t.sa_tok = 1, t.seed = 77;
  if (n < max) cs[n++] = t;
  t.M = 0, t.seed = 78;
  if (n < max) cs[n++] = t;
  t.M = 6, t.K = 0, t.seed = 79;
  if (n < max) cs[n++] = t;
  t.M = 520, t.N = 384, t.K = 512, t.sb_chan = 1, t.gathered = 1, t.seed = 80;
  if (n < max) cs[n++] = t;
  t.in = W8A8_DTYPE_FP8_E4M3, t.out = W8A8_DTYPE_FP16, t.gathered = 0, t.seed = 81;
  if (n < max) cs[n++] = t;
  return n;
}

static void sweep(int ag, int ipc) {
  genv e;
  GENV_OPEN_MODE_OR_RETURN(e, ipc);
  ncase cs[64];
  int n = make_cases(cs, 64, g_size);
  for (int i = 0; i < n; i++) {
    if (cs[i].in == W8A8_DTYPE_FP8_E4M3 && e.cc < 89) continue; /* e.cc: the smallest over the ranks */
    run_case(&e, &cs[i], ag);
    if (tp_any_failed()) break; /* collective: every rank leaves together */
  }
  genv_close(&e);
}

TP_TEST(tp_nccl_ag) { sweep(1, 0); }
TP_TEST(tp_nccl_rs) { sweep(0, 0); }
TP_TEST(tp_ipc_ag) { sweep(1, 1); }
TP_TEST(tp_ipc_rs) { sweep(0, 1); }

/* W8A8_TP_PARTIALS_OUT over NCCL (16-bit ncclSend/ncclRecv of the partials) and IPC (2-byte pushes):
 * the reduce-scatter sweep with rounded partials, plus chunks of >= 2048 rows (the IPC transport
 * pushes them in pieces) with odd N. int8 bit for bit against the reference that rounds each rank's
 * partial; fused == unfused; the references of the two kinds of partials must differ somewhere. */
static void sweep_partials_out(int ipc) {
  genv e;
  GENV_OPEN_MODE_OR_RETURN(e, ipc);
  /* the large cases need more rows than genv_open reserved (every rank grows it, before any call) */
  w8a8_status rs_ = w8a8_comm_reserve(e.comm, 4200 * (int64_t)g_size, 400, 640);
  CHECK(rs_ == W8A8_SUCCESS, "rank %d: w8a8_comm_reserve: %s", g_rank, w8a8_last_error());
  if (!all_ok(rs_ == W8A8_SUCCESS)) {
    genv_close(&e);
    return;
  }
  ncase cs[72];
  int n = make_cases(cs, 64, g_size);
  ncase t;
  memset(&t, 0, sizeof t);
  t.in = W8A8_DTYPE_INT8, t.out = W8A8_DTYPE_BF16, t.sa_tok = 1, t.sb_chan = 1, t.bias = 1;
  t.M = 2050 * (int64_t)g_size + 3, t.N = 63, t.K = 64, t.seed = 8100;
  cs[n++] = t;
  t.out = W8A8_DTYPE_FP16, t.zp = 3, t.skew = 1, t.N = 64, t.seed = 8101;
  cs[n++] = t;
  int64_t differ = 0;
  for (int i = 0; i < n; i++) {
    if (cs[i].in == W8A8_DTYPE_FP8_E4M3 && e.cc < 89) continue;
    cs[i].partials = W8A8_TP_PARTIALS_OUT;
    differ += run_case(&e, &cs[i], 0);
    if (tp_any_failed()) break; /* collective: every rank leaves together */
  }
  long long mine = differ, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  CHECK(all > 0, "the references of the two kinds of partials never differ: the test cannot tell them apart");
  genv_close(&e);
}
TP_TEST(tp_nccl_rs_partials_out) { sweep_partials_out(0); }
TP_TEST(tp_ipc_rs_partials_out) { sweep_partials_out(1); }

/* Many calls queued on the stream without any host synchronization (AG and RS alternating,
 * int8 and fp8, unfused and fused): each call reuses the communicator's one workspace, so a
 * call that overwrote it while the previous one (this rank's or a peer's) still used it shows. */
static void back_to_back(int ipc) {
  genv e;
  GENV_OPEN_MODE_OR_RETURN(e, ipc);
  enum { NJ = 8 };
  job J[NJ];
  memset(J, 0, sizeof J);
  bool ok = true;
  for (int i = 0; i < NJ; i++) {
    ncase t;
    memset(&t, 0, sizeof t);
    t.in = (i / 2) % 2 && e.cc >= 89 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
    t.out = i % 3 == 0 ? W8A8_DTYPE_FP32 : W8A8_DTYPE_BF16;
    t.sa_tok = 1, t.sb_chan = i & 1, t.bias = 1;
    t.M = 96 + 8 * i, t.N = 64, t.K = 96, t.skew = i == 5, t.gathered = i % 4 == 0;
    t.seed = 7000u + (uint64_t)i;
    J[i].tc = t;
    J[i].ag = i % 2 == 0;
    ok = ok && job_make_host(&J[i]) && job_alloc_dev(&J[i]) && job_upload(&J[i]);
  }
  ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  if (all_ok(ok)) {
    for (int i = 0; i < NJ; i++) job_launch(&e, &J[i], true, true);
    cudaError_t ce = cudaStreamSynchronize(e.st);
    CHECK(ce == cudaSuccess, "rank %d: stream: %s", g_rank, cudaGetErrorString(ce));
    for (int i = 0; ce == cudaSuccess && i < NJ; i++) job_check(&J[i], "back to back");
  } else {
    CHECK(ok, "rank %d: setting up the jobs failed", g_rank);
    if (ok) CHECK(0, "another rank could not set up the jobs");
  }
  for (int i = 0; i < NJ; i++) job_free_dev(&J[i]), job_free_host(&J[i]);
  genv_close(&e);
}
TP_TEST(tp_nccl_back_to_back) { back_to_back(0); }
TP_TEST(tp_ipc_back_to_back) { back_to_back(1); }

/* A fused AG and a fused RS captured into one CUDA graph on each rank's stream (thread-local
 * capture mode: an unsafe call by the library in this thread would invalidate it), replayed
 * three times on new inputs written into the same buffers. Eager calls first: they check the
 * buffers and let NCCL connect its peers outside the capture. */
static void graph_capture(int ipc) {
  genv e;
  GENV_OPEN_MODE_OR_RETURN(e, ipc);
  job J[2];
  memset(J, 0, sizeof J);
  ncase t;
  memset(&t, 0, sizeof t);
  t.in = W8A8_DTYPE_INT8, t.out = W8A8_DTYPE_BF16, t.sa_tok = 1, t.sb_chan = 1, t.bias = 1;
  t.M = 40, t.N = 24, t.K = 32, t.pad = 3, t.gathered = 1, t.seed = 8000;
  J[0].tc = t, J[0].ag = 1;
  t.out = W8A8_DTYPE_FP32, t.gathered = 0, t.zp = 3, t.seed = 8001;
  J[1].tc = t, J[1].ag = 0;
  bool ok = true;
  for (int i = 0; i < 2; i++) ok = ok && job_make_host(&J[i]) && job_alloc_dev(&J[i]) && job_upload(&J[i]);
  ok = ok && cudaDeviceSynchronize() == cudaSuccess;
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  if (!all_ok(ok)) {
    CHECK(ok, "rank %d: setting up the jobs failed", g_rank);
    if (ok) CHECK(0, "another rank could not set up the jobs");
    goto done;
  }
  for (int i = 0; i < 2; i++) job_launch(&e, &J[i], true, true);
  ok = cudaStreamSynchronize(e.st) == cudaSuccess;
  CHECK(ok, "rank %d: eager calls: %s", g_rank, cudaGetErrorString(cudaGetLastError()));
  for (int i = 0; ok && i < 2; i++) job_check(&J[i], "eager before capture");
  if (tp_any_failed()) goto done;

  cudaError_t ce = cudaStreamBeginCapture(e.st, cudaStreamCaptureModeThreadLocal);
  CHECK(ce == cudaSuccess, "rank %d: begin capture: %s", g_rank, cudaGetErrorString(ce));
  /* The captured calls are collective (their agreement runs now, on the host): all or none. */
  if (!all_ok(ce == cudaSuccess)) {
    if (ce == cudaSuccess) {
      cudaStreamEndCapture(e.st, &graph);
      CHECK(0, "another rank could not begin its capture");
    }
    cudaGetLastError();
    goto done;
  }
  {
    for (int i = 0; i < 2; i++) J[i].ran_u = 0, job_launch(&e, &J[i], false, true);
    ce = cudaStreamEndCapture(e.st, &graph);
    for (int i = 0; i < 2; i++)
      CHECK(J[i].sf == W8A8_SUCCESS, "rank %d: %s during capture: %s %s", g_rank, J[i].ag ? "AG" : "RS",
            w8a8_status_name(J[i].sf), J[i].msg);
    CHECK(ce == cudaSuccess && graph, "rank %d: end capture: %s", g_rank, cudaGetErrorString(ce));
    if (ce == cudaSuccess && graph) {
      ce = cudaGraphInstantiate(&exec, graph, 0);
      CHECK(ce == cudaSuccess, "rank %d: instantiate: %s", g_rank, cudaGetErrorString(ce));
    }
  }
  cudaGetLastError();
  /* Launch only where every rank has a graph: a rank replaying alone would wait in NCCL. */
  if (tp_any_failed()) goto done;
  for (int rep = 0; rep < 3; rep++) {
    ok = true;
    for (int i = 0; i < 2; i++) {
      J[i].tc.seed += 100;
      ok = ok && job_make_host(&J[i]) && job_upload(&J[i]);
    }
    /* the stream is non-blocking: it does not wait for the legacy-stream uploads */
    ok = ok && cudaDeviceSynchronize() == cudaSuccess;
    if (!all_ok(ok)) {
      CHECK(ok, "rank %d: new inputs for replay %d", g_rank, rep);
      if (ok) CHECK(0, "another rank could not prepare replay %d", rep);
      break;
    }
    ce = cudaGraphLaunch(exec, e.st);
    if (ce == cudaSuccess) ce = cudaStreamSynchronize(e.st);
    CHECK(ce == cudaSuccess, "rank %d: replay %d: %s", g_rank, rep, cudaGetErrorString(ce));
    for (int i = 0; ce == cudaSuccess && i < 2; i++) job_check(&J[i], rep == 0 ? "replay 0" : rep == 1 ? "replay 1" : "replay 2");
    if (tp_any_failed()) break;
  }
  /* IPC: eager calls (IPC schedule, workspace ws), a replay (NCCL schedule, ws_cap) and eager
   * calls again, queued without a host sync: the two workspaces must keep them apart. */
  if (ipc && !tp_any_failed()) {
    ok = true;
    for (int i = 0; i < 2; i++) {
      J[i].tc.seed += 1000;
      ok = ok && job_make_host(&J[i]) && job_upload(&J[i]);
    }
    ok = ok && cudaDeviceSynchronize() == cudaSuccess;
    if (all_ok(ok)) {
      for (int i = 0; i < 2; i++) job_launch(&e, &J[i], true, true);
      ce = cudaGraphLaunch(exec, e.st);
      CHECK(ce == cudaSuccess, "rank %d: replay between eager calls: %s", g_rank, cudaGetErrorString(ce));
      for (int i = 0; i < 2; i++) job_launch(&e, &J[i], true, true);
      if (ce == cudaSuccess) ce = cudaStreamSynchronize(e.st);
      CHECK(ce == cudaSuccess, "rank %d: eager, replay, eager: %s", g_rank, cudaGetErrorString(ce));
      for (int i = 0; ce == cudaSuccess && i < 2; i++) job_check(&J[i], "eager, replay, eager");
    } else {
      CHECK(ok, "rank %d: new inputs for the mixed sequence", g_rank);
      if (ok) CHECK(0, "another rank could not prepare the mixed sequence");
    }
  }
done:
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  cudaDeviceSynchronize();
  for (int i = 0; i < 2; i++) job_free_dev(&J[i]), job_free_host(&J[i]);
  genv_close(&e);
}
TP_TEST(tp_nccl_graph_capture) { graph_capture(0); }
TP_TEST(tp_ipc_graph_capture) { graph_capture(1); }

/* IPC: the workspace replaced between calls (a larger reserve on every rank): the next eager
 * call's agreement sees the new generation and every rank reopens its peers' handles. */
TP_TEST(tp_ipc_reserve_again) {
  genv e;
  GENV_OPEN_MODE_OR_RETURN(e, 1);
  ncase t;
  memset(&t, 0, sizeof t);
  t.in = W8A8_DTYPE_INT8, t.out = W8A8_DTYPE_BF16, t.sa_tok = 1, t.sb_chan = 1, t.bias = 1;
  t.M = 96, t.N = 64, t.K = 96, t.gathered = 1, t.seed = 9100;
  run_case(&e, &t, 1);
  for (int round = 0; round < 2 && !tp_any_failed(); round++) {
    cudaStreamSynchronize(e.st);
    w8a8_status s = w8a8_comm_reserve(e.comm, (int64_t)(3 + round) * 640, 400, 640);
    CHECK(s == W8A8_SUCCESS, "rank %d: w8a8_comm_reserve (round %d): %s", g_rank, round, w8a8_last_error());
    if (!all_ok(s == W8A8_SUCCESS)) break;
    t.seed += 10, t.zp = round ? 3 : 1, t.out = round ? W8A8_DTYPE_FP32 : W8A8_DTYPE_FP16;
    run_case(&e, &t, round); /* round 0: RS first after the exchange; round 1: AG */
    t.seed += 10;
    run_case(&e, &t, !round);
  }
  genv_close(&e);
}

/* Communicators from a bootstrap id across processes (w8a8_comm_create_nccl_id: a bare NCCL
 * communicator, agreement through NCCL with one side-stream synchronization). Two one-rank failures that
 * would leave the peers waiting for ever if that rank returned early:
 *  - a rank whose handle is bad (a CPU handle) must still join ncclCommInitRank, so every rank fails together;
 *  - a call while one rank's stream is capturing: that rank takes part in the agreement's ncclAllGather with
 *    its failure in the table (outside the capture), every rank fails, and the communicator still works.
 * A hang here is the failure (mpirun's timeout). */
TP_TEST(tp_nccl_bare_errors) {
  genv e;
  GENV_OPEN_OR_RETURN(e);
  if (g_size < 2) {
    genv_close(&e);
    SKIP("needs 2+ processes (one process makes an in-process communicator)");
  }
  w8a8_unique_id id;
  memset(&id, 0, sizeof id);
  w8a8_status s = g_rank == 0 ? w8a8_comm_unique_id(&id) : W8A8_SUCCESS;
  CHECK(s == W8A8_SUCCESS, "w8a8_comm_unique_id: %s", w8a8_last_error());
  if (!all_ok(s == W8A8_SUCCESS)) {
    genv_close(&e);
    return;
  }
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  const int last = g_size - 1;

  /* 1. A CPU handle on the last rank: UNSUPPORTED_DEVICE there, COMM_MISMATCH elsewhere, comm untouched. */
  w8a8_handle *cpu = NULL;
  s = w8a8_create(&cpu, W8A8_DEVICE_CPU, 0);
  if (!all_ok(s == W8A8_SUCCESS)) {
    CHECK(0, "rank %d: a CPU handle: %s", g_rank, w8a8_last_error());
    w8a8_destroy(cpu);
    genv_close(&e);
    return;
  }
  w8a8_comm *bad = (w8a8_comm *)(uintptr_t)1;
  s = w8a8_comm_create_nccl_id(&bad, g_rank == last ? cpu : e.h, &id, g_size, g_rank);
  if (g_rank == last)
    CHECK(s == W8A8_ERROR_UNSUPPORTED_DEVICE, "rank %d (CPU handle): %s %s", g_rank, w8a8_status_name(s),
          w8a8_last_error());
  else
    CHECK(s == W8A8_ERROR_COMM_MISMATCH, "rank %d (a peer's CPU handle): %s %s", g_rank, w8a8_status_name(s),
          w8a8_last_error());
  CHECK(bad == (w8a8_comm *)(uintptr_t)1, "rank %d: comm written by a failed creation", g_rank);
  w8a8_destroy(cpu);

  /* 2. A good one (a fresh id: NCCL ids are single-use). */
  memset(&id, 0, sizeof id);
  s = g_rank == 0 ? w8a8_comm_unique_id(&id) : W8A8_SUCCESS;
  if (!all_ok(s == W8A8_SUCCESS)) {
    CHECK(0, "w8a8_comm_unique_id: %s", w8a8_last_error());
    genv_close(&e);
    return;
  }
  MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  w8a8_comm *c = NULL;
  s = w8a8_comm_create_nccl_id(&c, e.h, &id, g_size, g_rank);
  CHECK(s == W8A8_SUCCESS, "rank %d: w8a8_comm_create_nccl_id: %s", g_rank, w8a8_last_error());
  if (!all_ok(s == W8A8_SUCCESS)) {
    if (c) w8a8_comm_destroy(c);
    genv_close(&e);
    return;
  }
  const char *note = NULL;
  CHECK(strcmp(w8a8_tp_transport(c, &note), "nccl") == 0, "rank %d: transport %s", g_rank,
        w8a8_tp_transport(c, &note));
  const int64_t M = 16 * (int64_t)g_size, N = 32, K = 64, Mr = 16;
  s = w8a8_comm_reserve(c, M, N, K);
  CHECK(s == W8A8_SUCCESS, "rank %d: reserve: %s", g_rank, w8a8_last_error());
  void *da = NULL, *db = NULL, *dsa = NULL, *dsb = NULL, *dout = NULL;
  bool ok = s == W8A8_SUCCESS && cudaMalloc(&da, (size_t)(Mr * K)) == cudaSuccess &&
            cudaMalloc(&db, (size_t)(N * K)) == cudaSuccess && cudaMalloc(&dsa, 4 * (size_t)Mr) == cudaSuccess &&
            cudaMalloc(&dsb, 4 * (size_t)N) == cudaSuccess && cudaMalloc(&dout, 2 * (size_t)(M * N)) == cudaSuccess;
  if (ok) {
    cudaMemset(da, 1, (size_t)(Mr * K));
    cudaMemset(db, 1, (size_t)(N * K));
    cudaMemset(dsa, 0x3c, 4 * (size_t)Mr);
    cudaMemset(dsb, 0x3c, 4 * (size_t)N);
    ok = cudaDeviceSynchronize() == cudaSuccess;
  }
  if (all_ok(ok)) {
    w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, Mr, K, K, da);
    w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, db);
    w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, dsa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, 1, dsb);
    w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, dout);
    w8a8_tp_options opt = W8A8_TP_OPTIONS_INIT;
    s = w8a8_all_gather_scaled_mm(c, &A, &B, &SA, &SB, NULL, NULL, &O, NULL, &opt);
    CHECK(s == W8A8_SUCCESS, "rank %d: the eager call: %s", g_rank, w8a8_last_error());
    cudaStreamSynchronize(e.st);
    /* 3. The last rank's stream is capturing (global mode): it fails (UNSUPPORTED_DEVICE), the others
     * with COMM_MISMATCH naming it; its capture stays valid (nothing was enqueued into it). */
    bool began = g_rank != last || cudaStreamBeginCapture(e.st, cudaStreamCaptureModeGlobal) == cudaSuccess;
    CHECK(began, "rank %d: cudaStreamBeginCapture", g_rank);
    if (all_ok(began)) {
      s = w8a8_all_gather_scaled_mm(c, &A, &B, &SA, &SB, NULL, NULL, &O, NULL, &opt);
      if (g_rank == last) {
        CHECK(s == W8A8_ERROR_UNSUPPORTED_DEVICE && strstr(w8a8_last_error(), "capture"), "rank %d (capturing): %s %s",
              g_rank, w8a8_status_name(s), w8a8_last_error());
        cudaGraph_t graph = NULL;
        cudaError_t ce = cudaStreamEndCapture(e.st, &graph);
        CHECK(ce == cudaSuccess, "rank %d: the capture was invalidated: %s", g_rank, cudaGetErrorString(ce));
        if (graph) cudaGraphDestroy(graph);
        cudaGetLastError();
      } else {
        CHECK(s == W8A8_ERROR_COMM_MISMATCH, "rank %d (a peer captures): %s %s", g_rank, w8a8_status_name(s),
              w8a8_last_error());
      }
      /* 4. Still usable: an eager call on every rank. */
      s = w8a8_all_gather_scaled_mm(c, &A, &B, &SA, &SB, NULL, NULL, &O, NULL, &opt);
      CHECK(s == W8A8_SUCCESS, "rank %d: the eager call after the refused capture: %s", g_rank, w8a8_last_error());
      cudaStreamSynchronize(e.st);
    }
  } else {
    CHECK(0, "rank %d: device buffers", g_rank);
  }
  cudaFree(da), cudaFree(db), cudaFree(dsa), cudaFree(dsb), cudaFree(dout);
  w8a8_comm_destroy(c);
  genv_close(&e);
}

#endif /* W8A8_HAVE_CUDA && W8A8_HAVE_NCCL */
