/* test_tp_gpu.c — the fused TP operations on GPU communicators, W ranks as threads of this
 * process (w8a8_comm_create_local; each rank its own handle, stream and buffers). Rank r runs on
 * device r % ndev (ndev = visible CUDA devices): on one GPU every rank is emulated there; on
 * several, ranks on different GPUs copy through peer access (W = 3 on 2 GPUs mixes both).
 * W8A8_TP_TEST_ONE_GPU=1 puts every rank on device 0 (the emulated mode) whatever ndev is.
 * Every per-rank buffer lives on its rank's device; rank threads make that device current.
 * SKIP without a GPU.
 *
 * Every case generates every rank's inputs on the host from seeds, runs the unfused (overlap 0)
 * and the fused (overlap 1) call on every rank (one thread each), and checks each rank's output
 * against one CPU handle computing the whole layer with the scalar reference:
 *   all-gather:      rows of rank j = w8a8_scaled_mm(reference) of rank j's rows, rank j's
 *                    scales and zero points, this rank's B, scale_b, bias, azp_adj;
 *   reduce-scatter:  the header's arithmetic: p_j = reference scaled_mm with fp32 out and no bias,
 *                    s = ((p_0 + p_1) + ...) + bias, rounded once — the CPU/MPI path's definition;
 *                    with W8A8_TP_PARTIALS_OUT each p_j is first rounded to out's dtype (numeric.c,
 *                    RNE) and widened back (fp8: plus a rounding to the neighbour per partial).
 * int8: bit for bit; fp8: within 2^-7 relative plus the summation slack. Fused vs unfused: bit
 * for bit always. Outputs are poisoned first; their padding (ld > N) must stay untouched.
 * W8A8_GPU_TEST_SMALL=1 (under compute-sanitizer) keeps the small shapes only. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "core/knobs.h"

#ifndef W8A8_HAVE_CUDA
W8A8_TEST(tp_gpu_not_built) { SKIP("built without CUDA"); }
#else
#include <cuda_runtime.h>

#include "core/internal.h"
#include "tp/tp_gpu.h"

#define POISON 0xA5
/* The workspaces between an unfused and a fused call: 0xff is NaN in fp32, bf16, fp16 and e4m3 (-1 in
 * int8), so that a row or partial the fused schedule failed to deliver cannot pass for a small number. */
#define WS_POISON 0xff
#define MAXW 4

static int small_mode(void) { return getenv("W8A8_GPU_TEST_SMALL") != NULL; }

#define GPU_OR_SKIP()                                                  \
  do {                                                                 \
    if (w8a8_cuda_device_count() == 0) SKIP("no CUDA device visible"); \
  } while (0)

/* ---- deterministic data ------------------------------------------------------------------ */

static uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {
  return a * 0x9e3779b97f4a7c15ull ^ (b + 1) * 0xd1b54a32d192ed03ull ^ (c + 7) * 0x94d049bb133111ebull;
}
static uint64_t next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static void fill_q8(uint8_t *x, int64_t n, w8a8_dtype dt, uint64_t seed) {
  for (int64_t i = 0; i < n; i++) {
    uint8_t v = (uint8_t)next(&seed);
    if (dt == W8A8_DTYPE_FP8_E4M3 && (v & 0x7f) == 0x7f) v ^= 1; /* any finite e4m3 */
    x[i] = v;
  }
}
static void fill_f32(float *x, int64_t n, float lo, float hi, uint64_t seed) {
  for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)(next(&seed) >> 40) * 0x1p-24f;
}
static void fill_i32(int32_t *x, int64_t n, int32_t lo, int32_t hi, uint64_t seed) {
  for (int64_t i = 0; i < n; i++) x[i] = lo + (int32_t)(next(&seed) % (uint64_t)(hi - lo + 1));
}
static float load_out(w8a8_dtype t, const void *base, int64_t i) {
  if (t == W8A8_DTYPE_BF16) return w8a8_bf16_to_f32(((const uint16_t *)base)[i]);
  if (t == W8A8_DTYPE_FP16) return w8a8_f16_to_f32(((const uint16_t *)base)[i]);
  return ((const float *)base)[i];
}
static void store_out(w8a8_dtype t, void *base, int64_t i, float r) {
  if (t == W8A8_DTYPE_BF16)
    ((uint16_t *)base)[i] = w8a8_f32_to_bf16(r);
  else if (t == W8A8_DTYPE_FP16)
    ((uint16_t *)base)[i] = w8a8_f32_to_f16(r);
  else
    ((float *)base)[i] = r;
}

/* Shards: skew = 0 the usual split; 1: the last rank empty, rank 0 the most; 2: rank 1 empty, its
 * rows to rank 0 (with W >= 3 an empty chunk between two others). */
static int64_t rows_of(int64_t total, int W, int j, int skew) {
  int64_t off, cnt;
  w8a8_tp_shard_rows(total, W, j, &off, &cnt);
  if (!skew || W == 1) return cnt;
  if (skew == 2) {
    if (j == 1) return 0;
    int64_t o1, c1;
    w8a8_tp_shard_rows(total, W, 1, &o1, &c1);
    return j == 0 ? cnt + c1 : cnt;
  }
  if (j == W - 1) return 0;
  int64_t lo, last;
  w8a8_tp_shard_rows(total, W, W - 1, &lo, &last);
  return j == 0 ? cnt + last : cnt;
}
static int64_t offset_of(int64_t total, int W, int j, int skew) {
  int64_t o = 0;
  for (int i = 0; i < j; i++) o += rows_of(total, W, i, skew);
  return o;
}

/* ---- device buffers ------------------------------------------------------------------------ */

/* Devices the ranks use: rank r on r % ndev (1 when W8A8_TP_TEST_ONE_GPU is set). */
static int tp_ndev(void) {
  const char *one = getenv("W8A8_TP_TEST_ONE_GPU");
  if (one && *one && strcmp(one, "0") != 0) return 1;
  int n = w8a8_cuda_device_count();
  return n < 1 ? 1 : n > MAXW ? MAXW : n;
}
static int rank_dev(int r) { return r % tp_ndev(); }

/* The allocation helpers below and every cudaMemcpy/cudaMemset/cudaFree act on the current
 * device (its legacy stream): make the rank's device current first. */
static void use_dev(int d) { cudaSetDevice(d); }

/* cudaDeviceSynchronize on every device the ranks use; device 0 current afterwards. */
static cudaError_t sync_all(void) {
  cudaError_t first = cudaSuccess;
  for (int d = tp_ndev() - 1; d >= 0; d--) {
    use_dev(d);
    cudaError_t e = cudaDeviceSynchronize();
    if (first == cudaSuccess) first = e;
  }
  return first;
}

static void *dup_dev(const void *h, size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
  if (bytes && cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(d);
    return NULL;
  }
  return d;
}
static void *poison_dev(size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes ? bytes : 1) != cudaSuccess) return NULL;
  cudaMemset(d, POISON, bytes ? bytes : 1);
  return d;
}

/* ---- the emulated ranks ------------------------------------------------------------------- */

typedef struct env {
  int W;
  int dev[MAXW]; /* rank r's device */
  w8a8_handle *h[MAXW];
  cudaStream_t st[MAXW];
  w8a8_comm *comm[MAXW];
} env;

static int env_open(env *e, int W, int64_t max_m, int64_t max_n, int64_t max_k) {
  memset(e, 0, sizeof *e);
  e->W = W;
  for (int r = 0; r < W; r++) {
    e->dev[r] = rank_dev(r);
    use_dev(e->dev[r]); /* the stream belongs to the current device: the handle's */
    if (w8a8_create(&e->h[r], W8A8_DEVICE_CUDA, e->dev[r]) != W8A8_SUCCESS) return 0;
    if (cudaStreamCreateWithFlags(&e->st[r], cudaStreamNonBlocking) != cudaSuccess) return 0;
    w8a8_set_stream(e->h[r], e->st[r]);
  }
  use_dev(0);
  if (w8a8_comm_create_local(e->comm, e->h, W) != W8A8_SUCCESS) return 0;
  for (int r = 0; r < W; r++)
    if (w8a8_comm_reserve(e->comm[r], max_m, max_n, max_k) != W8A8_SUCCESS) return 0;
  return 1;
}
static void env_close(env *e) {
  sync_all();
  for (int r = 0; r < e->W; r++) {
    w8a8_comm_destroy(e->comm[r]);
    w8a8_destroy(e->h[r]);
    use_dev(e->dev[r]);
    if (e->st[r]) cudaStreamDestroy(e->st[r]);
  }
  use_dev(0);
}

/* One rank's call: the arguments as device descriptors. */
typedef struct rank_call {
  w8a8_comm *comm;
  int dev; /* the rank's device, made current by its thread */
  int ag;
  w8a8_matrix A, B, O;
  w8a8_vector SA, SB, BIAS;
  w8a8_zero_point ZP;
  int has_bias, has_zp;
  w8a8_gathered G;
  int has_g;
  w8a8_tp_options opt;
  w8a8_status st;
  char msg[512];
} rank_call;

static void *rank_main(void *v) {
  rank_call *c = v;
  use_dev(c->dev); /* as a rank thread of an application would (the library sets it too) */
  c->st = c->ag ? w8a8_all_gather_scaled_mm(c->comm, &c->A, &c->B, &c->SA, &c->SB, c->has_bias ? &c->BIAS : NULL,
                                            c->has_zp ? &c->ZP : NULL, &c->O, c->has_g ? &c->G : NULL, &c->opt)
                : w8a8_scaled_mm_reduce_scatter(c->comm, &c->A, &c->B, &c->SA, &c->SB, c->has_bias ? &c->BIAS : NULL,
                                                c->has_zp ? &c->ZP : NULL, &c->O, &c->opt);
  snprintf(c->msg, sizeof c->msg, "%s", w8a8_last_error());
  return NULL;
}

/* rank_main with NULL options (the defaults). */
static void *null_opts_main(void *v) {
  rank_call *c = v;
  use_dev(c->dev);
  c->st = c->ag ? w8a8_all_gather_scaled_mm(c->comm, &c->A, &c->B, &c->SA, &c->SB, c->has_bias ? &c->BIAS : NULL,
                                            c->has_zp ? &c->ZP : NULL, &c->O, c->has_g ? &c->G : NULL, NULL)
                : w8a8_scaled_mm_reduce_scatter(c->comm, &c->A, &c->B, &c->SA, &c->SB, c->has_bias ? &c->BIAS : NULL,
                                                c->has_zp ? &c->ZP : NULL, &c->O, NULL);
  snprintf(c->msg, sizeof c->msg, "%s", w8a8_last_error());
  return NULL;
}

/* fn on W threads, thread r given element r of `calls` (elements of `size` bytes), all joined. */
static void run_threads(void *(*fn)(void *), void *calls, size_t size, int W) {
  pthread_t t[MAXW];
  for (int r = 0; r < W; r++) pthread_create(&t[r], NULL, fn, (char *)calls + (size_t)r * size);
  for (int r = 0; r < W; r++) pthread_join(t[r], NULL);
}
/* Every rank's call on its own thread (the calls are collective). */
static void run_ranks(rank_call *calls, int W) { run_threads(rank_main, calls, sizeof calls[0], W); }

/* ---- cases ----------------------------------------------------------------------------------- */

typedef struct tcase {
  w8a8_dtype in, out;
  int sa_tok, sb_chan, bias;
  int zp; /* 0 none, 1 premultiplied azp_adj, 2 azp per tensor, 3 per token (int8) */
  int64_t M, N, K;
  int skew, pad, gathered;
  int apad; /* all-gather: extra padding of a's rows only (lda = K + pad + apad) */
  uint64_t seed;
  int want_one; /* all-gather: 1 = the fused call must have run as ONE GEMM launch with ready flags */
  int want_pieces; /* all-gather: 1 = ... with more chunks than ranks (W8A8_TP_AG_PIECES) */
  int check_push;  /* all-gather with W8A8_TP_AG_PUSH=1 / 2: the fused call pushed (that mode) iff ag_push's rule holds */
  int check_scales; /* all-gather: 1 (the scale push on) every rank with rows pushed its scales (W > 1, peer access);
                     * 2 (W8A8_TP_AG_SCALES=0) no rank did */
  int partials; /* reduce-scatter: W8A8_TP_PARTIALS_FP32 or _OUT */
} tcase;

/* Reference elements where the two kinds of partials give different outputs (reduce-scatter). */
static int64_t g_rs_modes_differ;
static int g_rs_direct; /* run_rs: W8A8_TP_RS_DIRECT is on (sweep_rs_direct) */
static int g_rs_min_rows; /* run_rs: W8A8_TP_RS_MIN_ROWS forced to this (sweep_rs_small_pieces), else 0 */
static int g_rs_own_cut;  /* run_rs with g_rs_min_rows: the own rows in pieces too (W8A8_TP_RS_OWN_WHOLE=0) */
/* The pieces of `rows` rows under g_rs_min_rows: min(4, max(1, rows / R)), none without rows. */
static int rs_cut(int64_t rows) {
  const int64_t p = rows / g_rs_min_rows;
  return rows <= 0 ? 0 : p < 1 ? 1 : p > 4 ? 4 : (int)p;
}

/* x rounded to out's dtype (RNE, numeric.c) and widened back: W8A8_TP_PARTIALS_OUT's partial. */
static float round_to_out(w8a8_dtype t, float x) {
  if (t == W8A8_DTYPE_BF16) return w8a8_bf16_to_f32(w8a8_f32_to_bf16(x));
  if (t == W8A8_DTYPE_FP16) return w8a8_f16_to_f32(w8a8_f32_to_f16(x));
  return x;
}

/* Twice the spacing of out's dtype at |x| (0 for fp32): how far a partial that the GPU's fp8 GEMM
 * summed differently can round from the reference's rounding of it (to the neighbour). */
static float out_spacing2(w8a8_dtype t, float x) {
  if (t == W8A8_DTYPE_FP32) return 0.0f;
  int e = 0;
  frexpf(fabsf(x), &e); /* |x| < 2^e */
  float u = ldexpf(1.0f, e - (t == W8A8_DTYPE_BF16 ? 8 : 11));
  if (t == W8A8_DTYPE_FP16 && u < 0x1p-24f) u = 0x1p-24f; /* fp16 subnormals */
  return 2.0f * u;
}

static const char *cname(const tcase *t, char *buf, size_t n) {
  snprintf(buf, n, "%s->%s M=%lld N=%lld K=%lld sa_tok=%d sb_chan=%d bias=%d zp=%d skew=%d pad=%d partials=%s",
           w8a8_dtype_name(t->in), w8a8_dtype_name(t->out), (long long)t->M, (long long)t->N, (long long)t->K,
           t->sa_tok, t->sb_chan, t->bias, t->zp, t->skew, t->pad,
           t->partials == W8A8_TP_PARTIALS_OUT ? "out" : "fp32");
  return buf;
}

/* Compare rows x N of got (ld_got) with want (dense); exact for int8. fp8: 2^-7 relative, plus
 * 1e-3 slack[i] and flip[i] where given (rounded partials, see out_spacing2). */
static int64_t compare(const tcase *tc, int64_t N, const void *got, int64_t ld_got, const void *want,
                       const float *slack, const float *flip, int64_t rows, const char *what, int rank, int W) {
  int64_t bad = 0;
  char nb[256];
  for (int64_t m = 0; m < rows; m++)
    for (int64_t n = 0; n < N; n++) {
      float g = load_out(tc->out, got, m * ld_got + n), w = load_out(tc->out, want, m * N + n);
      int ok;
      if (tc->in == W8A8_DTYPE_INT8)
        ok = memcmp(&g, &w, sizeof g) == 0 || (isnan(g) && isnan(w));
      else
        ok = fabsf(g - w) <= 0x1p-7f * fabsf(w) + (slack ? 1e-3f * slack[m * N + n] : 0.0f) +
                                 (flip ? flip[m * N + n] : 0.0f) + 1e-6f;
      if (!ok && bad++ < 3)
        CHECK(0, "%s W=%d rank %d row %lld col %lld: got %.9g want %.9g (%s)", what, W, rank, (long long)m,
              (long long)n, (double)g, (double)w, cname(tc, nb, sizeof nb));
    }
  return bad;
}

static int64_t bad_padding(const uint8_t *buf, int64_t rows, int64_t N, int64_t ld, size_t es) {
  int64_t bad = 0;
  for (int64_t m = 0; m < rows; m++)
    for (int64_t b = N * (int64_t)es; b < ld * (int64_t)es; b++) bad += buf[(size_t)(m * ld) * es + (size_t)b] != POISON;
  return bad;
}

/* Host inputs of one rank of the all-gather. */
typedef struct ag_rank {
  int64_t Mj, off, Nj;
  uint8_t *a;   /* [Mj, lda] */
  float *sa;    /* 1 or Mj */
  int32_t *azp; /* 1 or Mj */
  uint8_t *b;   /* [Nj, ldb] */
  float *sb;
  void *bias;
  int32_t *adj;
} ag_rank;

static w8a8_handle *g_ref;
static w8a8_handle *ref(void) {
  if (!g_ref && w8a8_create(&g_ref, W8A8_DEVICE_CPU, 0) == W8A8_SUCCESS) w8a8_set_kernel(g_ref, W8A8_KERNEL_REFERENCE);
  return g_ref;
}

/* The fp8 error scale of every output element: |sa sb| * sum_k |a_k b_k|, computed by the
 * reference on |A| and |B| (an e4m3 value's magnitude is its bits without the sign) with fp32
 * out and no bias; rows x N, dense, added into acc. A GPU's fp8 result may differ from the
 * reference by a small fraction of this (QGMMA's reduced-precision accumulation; the sm90 tests
 * measure ~1e-4). The first device run compared against 2^-7 |want| only and failed wherever
 * the sum cancels. */
static int add_abs_slack(float *acc, int64_t rows, int64_t N, int64_t K, const uint8_t *a, int64_t lda,
                         const uint8_t *b, int64_t ldb, const float *sa, int sa_tok, const float *sb, int sb_chan) {
  uint8_t *aa = malloc((size_t)(rows * lda) + 1), *bb = malloc((size_t)(N * ldb) + 1);
  float *sa_abs = malloc(sizeof(float) * (size_t)(sa_tok ? rows : 1) + 4);
  float *sb_abs = malloc(sizeof(float) * (size_t)(sb_chan ? N : 1) + 4);
  float *o = malloc(sizeof(float) * (size_t)(rows * N) + 4);
  int ok = aa && bb && sa_abs && sb_abs && o;
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
    ok = w8a8_scaled_mm(ref(), &A, &B, &SA, &SB, NULL, NULL, &O) == W8A8_SUCCESS;
    for (int64_t i = 0; ok && i < rows * N; i++) acc[i] += o[i];
  }
  free(aa), free(bb), free(sa_abs), free(sb_abs), free(o);
  return ok;
}

/* REQUIRE for the int-returning case runners (1 = failed). */
#define RQ(cond, ...)                                    \
  do {                                                   \
    if (!(cond)) {                                       \
      w8a8_test_fail(__FILE__, __LINE__, __VA_ARGS__);   \
      return 1;                                          \
    }                                                    \
  } while (0)
#define RQ_OK(call)                                                                                    \
  do {                                                                                                 \
    w8a8_status s_ = (call);                                                                           \
    if (s_ != W8A8_SUCCESS) {                                                                          \
      w8a8_test_fail(__FILE__, __LINE__, "%s -> %s: %s", #call, w8a8_status_name(s_), w8a8_last_error()); \
      return 1;                                                                                        \
    }                                                                                                  \
  } while (0)

/* Run one all-gather case on env e; returns 0 when everything matched. */
static int run_ag(env *e, const tcase *tc) {
  const int W = e->W;
  const int64_t M = tc->M, K = tc->K, lda = K + tc->pad + tc->apad, ldb = K + tc->pad;
  const size_t oes = w8a8_dtype_size(tc->out);
  int fails0 = w8a8_test_failed();
  ag_rank R[MAXW];
  memset(R, 0, sizeof R);
  /* the whole layer's rows, one scale and zero point per row */
  uint8_t *a_full = calloc((size_t)(M * K) + 1, 1);
  float *sa_full = calloc((size_t)M + 1, sizeof(float));
  int32_t *azp_full = calloc((size_t)M + 1, sizeof(int32_t));
  if (!a_full || !sa_full || !azp_full) return 1;
  for (int j = 0; j < W; j++) {
    ag_rank *q = &R[j];
    q->Mj = rows_of(M, W, j, tc->skew);
    q->off = offset_of(M, W, j, tc->skew);
    q->Nj = tc->N + (tc->N > 0 ? (j & 1) : 0); /* N shards may differ between ranks */
    q->a = calloc((size_t)(q->Mj * lda) + 1, 1);
    q->sa = calloc((size_t)q->Mj + 1, sizeof(float));
    q->azp = calloc((size_t)q->Mj + 1, sizeof(int32_t));
    q->b = calloc((size_t)(q->Nj * ldb) + 1, 1);
    q->sb = calloc((size_t)q->Nj + 1, sizeof(float));
    q->bias = calloc((size_t)q->Nj + 1, 4);
    q->adj = calloc((size_t)q->Nj + 1, sizeof(int32_t));
    if (!q->a || !q->sa || !q->azp || !q->b || !q->sb || !q->bias || !q->adj) return 1;
    for (int64_t i = 0; i < q->Mj; i++) fill_q8(q->a + i * lda, K, tc->in, mix(tc->seed, 1, (uint64_t)(j * 100000 + i)));
    fill_f32(q->sa, tc->sa_tok ? q->Mj : 1, 1e-3f, 4e-3f, mix(tc->seed, 2, (uint64_t)j));
    fill_i32(q->azp, tc->zp == 3 ? q->Mj : 1, -20, 20, mix(tc->seed, 3, (uint64_t)j));
    for (int64_t n = 0; n < q->Nj; n++) fill_q8(q->b + n * ldb, K, tc->in, mix(tc->seed, 4, (uint64_t)(j * 100000 + n)));
    fill_f32(q->sb, tc->sb_chan ? q->Nj : 1, 0.5f, 2.0f, mix(tc->seed, 5, (uint64_t)j));
    for (int64_t n = 0; n < q->Nj; n++) {
      uint64_t s = mix(tc->seed, 6, (uint64_t)(j * 100000 + n));
      store_out(tc->out, q->bias, n, -2.0f + 4.0f * (float)(next(&s) >> 40) * 0x1p-24f);
    }
    if (tc->zp) {
      w8a8_matrix Bh = w8a8_matrix_make(tc->in, W8A8_COL_MAJOR, K, q->Nj, ldb, q->b);
      w8a8_vector ADJ = w8a8_vector_make(W8A8_DTYPE_INT32, q->Nj, q->adj);
      if (w8a8_colsum(ref(), &Bh, &ADJ) != W8A8_SUCCESS) return 1;
      if (tc->zp == 1)
        for (int64_t n = 0; n < q->Nj; n++) q->adj[n] *= 5; /* one static zero point, premultiplied */
    }
    for (int64_t i = 0; i < q->Mj; i++) {
      memcpy(a_full + (q->off + i) * K, q->a + i * lda, (size_t)K);
      sa_full[q->off + i] = q->sa[tc->sa_tok ? i : 0];
      azp_full[q->off + i] = q->azp[tc->zp == 3 ? i : 0];
    }
  }

  /* device arguments */
  rank_call U[MAXW], F[MAXW];
  void *dev[MAXW][12];
  memset(dev, 0, sizeof dev);
  int ok = 1;
  for (int j = 0; j < W; j++) {
    ag_rank *q = &R[j];
    void **d = dev[j];
    use_dev(e->dev[j]); /* rank j's buffers on rank j's device */
    d[0] = dup_dev(q->a, (size_t)(q->Mj * lda));
    d[1] = dup_dev(q->sa, sizeof(float) * (size_t)(tc->sa_tok ? q->Mj : 1));
    d[2] = dup_dev(q->azp, sizeof(int32_t) * (size_t)(tc->zp == 3 ? q->Mj : 1));
    d[3] = dup_dev(q->b, (size_t)(q->Nj * ldb));
    d[4] = dup_dev(q->sb, sizeof(float) * (size_t)(tc->sb_chan ? q->Nj : 1));
    d[5] = dup_dev(q->bias, oes * (size_t)q->Nj);
    d[6] = dup_dev(q->adj, sizeof(int32_t) * (size_t)q->Nj);
    const int64_t ldo = q->Nj + tc->pad;
    d[7] = poison_dev((size_t)(M * ldo) * oes); /* unfused out */
    d[8] = poison_dev((size_t)(M * ldo) * oes); /* fused out */
    d[9] = poison_dev((size_t)(M * (K + 3)));   /* gathered a */
    d[10] = poison_dev(sizeof(float) * (size_t)M);
    d[11] = poison_dev(sizeof(int32_t) * (size_t)M);
    for (int i = 0; i < 12; i++) ok &= d[i] != NULL;
    rank_call c;
    memset(&c, 0, sizeof c);
    c.comm = e->comm[j];
    c.dev = e->dev[j];
    c.ag = 1;
    c.A = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, q->Mj, K, lda, d[0]);
    c.B = w8a8_matrix_make(tc->in, W8A8_COL_MAJOR, K, q->Nj, ldb, d[3]);
    c.SA = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sa_tok ? q->Mj : 1, d[1]);
    c.SB = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sb_chan ? q->Nj : 1, d[4]);
    c.BIAS = w8a8_vector_make(tc->out, q->Nj, d[5]);
    c.has_bias = tc->bias;
    c.has_zp = tc->zp != 0;
    c.ZP.azp_adj = w8a8_vector_make(W8A8_DTYPE_INT32, q->Nj, d[6]);
    c.ZP.azp = tc->zp >= 2 ? w8a8_vector_make(W8A8_DTYPE_INT32, tc->zp == 3 ? q->Mj : 1, d[2])
                           : w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL);
    c.opt = (w8a8_tp_options)W8A8_TP_OPTIONS_INIT;
    U[j] = c;
    U[j].O = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, M, q->Nj, ldo, d[7]);
    U[j].opt.overlap = 0;
    F[j] = c;
    F[j].O = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, M, q->Nj, ldo, d[8]);
    F[j].opt.overlap = 1;
    F[j].has_g = tc->gathered;
    F[j].G.a = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, M, K, K + 3, d[9]);
    F[j].G.scale_a = w8a8_vector_make(W8A8_DTYPE_FP32, M, d[10]);
    if (tc->zp >= 2) F[j].G.azp = w8a8_vector_make(W8A8_DTYPE_INT32, M, d[11]);
  }
  CHECK(ok, "device allocation failed");
  /* The uploads (a pageable cudaMemcpy may return before its DMA lands) and the poisoning
   * cudaMemsets ran on the legacy stream, which the ranks' non-blocking streams do not wait for. */
  if (ok) ok = sync_all() == cudaSuccess;
  if (ok) {
    run_ranks(U, W);
    /* the gathered rows the unfused calls left in the workspaces must not serve the fused ones */
    ok = sync_all() == cudaSuccess;
    for (int j = 0; ok && j < W; j++) ok = w8a8_tp_gpu_poison_ws(e->comm[j], WS_POISON) == 0;
    CHECK(ok, "W=%d: poisoning the workspaces between the unfused and the fused calls failed", W);
  }
  if (ok) {
    run_ranks(F, W);
    cudaError_t ce = sync_all();
    CHECK(ce == cudaSuccess, "device: %s", cudaGetErrorString(ce));
    for (int j = 0; j < W; j++) {
      CHECK(U[j].st == W8A8_SUCCESS && F[j].st == W8A8_SUCCESS, "W=%d rank %d: unfused %s, fused %s: %s %s", W, j,
            w8a8_status_name(U[j].st), w8a8_status_name(F[j].st), U[j].msg, F[j].msg);
      if (tc->want_one)
        CHECK(w8a8_tp_gpu_last_ag_one_gemm(e->comm[j]) == 1, "W=%d rank %d: the fused all-gather ran per chunk, "
              "not as one GEMM with ready flags", W, j);
      { /* the own rows' pack: the kernel where a, lda and K are 16-byte multiples (and there is something to
         * pack or flags to reset), unless TP_AG_PACK=0; else the copy engine's path */
        const int aligned = K > 0 && K % 16 == 0 && lda % 16 == 0;
        const int want = w8a8_knob_int(W8A8_KNOB_TP_AG_PACK) != 0 && aligned && (R[j].Mj > 0 || w8a8_tp_gpu_last_ag_one_gemm(e->comm[j]) == 1);
        CHECK(w8a8_tp_gpu_last_ag_pack(e->comm[j]) == want, "W=%d rank %d (K %lld lda %lld rows %lld): the pack %s, "
              "expected %s", W, j, (long long)K, (long long)lda, (long long)R[j].Mj,
              w8a8_tp_gpu_last_ag_pack(e->comm[j]) ? "kernel ran" : "kernel did not run", want ? "the kernel" : "the old path");
        /* TP_COPY2D=1: the strided copies (own rows where the pack did not run, the gathered rows out) on
         * the SMs, as where a stride is past the copy engine's pitch limit */
        const int copies = w8a8_knob_int(W8A8_KNOB_TP_COPY2D) && K > 0 ? (!want && R[j].Mj > 0) + (tc->gathered && M > 0) : 0;
        CHECK(w8a8_tp_gpu_last_copy2d(e->comm[j]) == copies, "W=%d rank %d (K %lld lda %lld rows %lld, gathered %d): "
              "%d copies on the SMs, expected %d", W, j, (long long)K, (long long)lda, (long long)R[j].Mj, tc->gathered,
              w8a8_tp_gpu_last_copy2d(e->comm[j]), copies);
      }
      if (tc->want_pieces) {
        /* cut where a peer on another GPU holds rows in two or more 128-row token tiles (skew 1 at W = 2:
         * rank 0's peer holds none, so rank 0's chunks are the ranks' own) */
        int cut = 0;
        for (int i = 0; i < W; i++)
          cut |= i != j && e->dev[i] != e->dev[j] && R[i].Mj > 0 && (R[i].off + R[i].Mj - 1) / 128 > R[i].off / 128;
        const int n = w8a8_tp_gpu_last_ag_chunks(e->comm[j]);
        CHECK(cut ? n > W : n == W, "W=%d rank %d: %d chunks, expected %s %d", W, j, n, cut ? "more than" : "exactly", W);
      }
      if (tc->check_scales) {
        /* the pack wrote the scales into the peers: eager calls of the in-process group, every rank's kernels able
         * to store into every peer's memory (the same GPU or peer access) */
        int want = tc->check_scales == 1 && W > 1 && R[j].Mj > 0;
        for (int i = 0; i < W; i++)
          for (int k = 0; k < W; k++) want &= i == k || w8a8_tp_gpu_peer_on(e->dev[i], e->dev[k]);
        CHECK(w8a8_tp_gpu_last_ag_scales(e->comm[j]) == want, "W=%d rank %d: the fused all-gather's pack %s its scales "
              "into the peers, expected %s", W, j, w8a8_tp_gpu_last_ag_scales(e->comm[j]) ? "wrote" : "did not write",
              want ? "it to" : "not");
      }
      if (tc->check_push) {
        /* pushed where every rank has rows and a GPU of its own (tp_gpu.c's ag_push; the peer-flag probe at
         * creation must have passed there: a GPU pair where it fails shows here) */
        int want = W > 1 && tc->want_one;
        for (int i = 0; i < W; i++) {
          want &= R[i].Mj > 0;
          for (int k = 0; k < i; k++) want &= e->dev[i] != e->dev[k];
        }
        const int got = w8a8_tp_gpu_last_ag_push(e->comm[j]);
        CHECK(got == (want ? tc->check_push : 0), "W=%d rank %d: the fused all-gather %s (mode %d), expected %s %d", W,
              j, got ? "pushed its rows" : "did not push", got, want ? "a push of mode" : "a pull,", want ? tc->check_push : 0);
      }
    }
  }
  for (int j = 0; ok && j < W && !w8a8_test_failed(); j++) {
    ag_rank *q = &R[j];
    const int64_t ldo = q->Nj + tc->pad;
    uint8_t *ou = malloc((size_t)(M * ldo) * oes + 1), *of = malloc((size_t)(M * ldo) * oes + 1);
    void *want = calloc((size_t)(M * q->Nj) + 1, oes);
    RQ(ou && of && want, "out of memory");
    use_dev(e->dev[j]);
    cudaMemcpy(ou, dev[j][7], (size_t)(M * ldo) * oes, cudaMemcpyDeviceToHost);
    cudaMemcpy(of, dev[j][8], (size_t)(M * ldo) * oes, cudaMemcpyDeviceToHost);
    /* one handle computing the whole layer with this rank's weights */
    w8a8_matrix AF = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, M, K, K, a_full);
    w8a8_matrix BH = w8a8_matrix_make(tc->in, W8A8_COL_MAJOR, K, q->Nj, ldb, q->b);
    w8a8_vector SAF = w8a8_vector_make(W8A8_DTYPE_FP32, M, sa_full);
    w8a8_vector SBH = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sb_chan ? q->Nj : 1, q->sb);
    w8a8_vector BH_ = w8a8_vector_make(tc->out, q->Nj, q->bias);
    w8a8_zero_point ZPF = {w8a8_vector_make(W8A8_DTYPE_INT32, M, azp_full),
                           w8a8_vector_make(W8A8_DTYPE_INT32, q->Nj, q->adj)};
    if (tc->zp == 1) ZPF.azp = w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL);
    w8a8_matrix OR = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, M, q->Nj, q->Nj, want);
    RQ_OK(w8a8_scaled_mm(ref(), &AF, &BH, &SAF, &SBH, tc->bias ? &BH_ : NULL, tc->zp ? &ZPF : NULL, &OR));
    float *slack = NULL;
    if (tc->in == W8A8_DTYPE_FP8_E4M3) {
      slack = calloc((size_t)(M * q->Nj) + 1, sizeof(float));
      RQ(slack && add_abs_slack(slack, M, q->Nj, K, a_full, K, q->b, ldb, sa_full, 1, q->sb, tc->sb_chan),
         "fp8 error scale: %s", w8a8_last_error());
    }
    int64_t bad = compare(tc, q->Nj, of, ldo, want, slack, NULL, M, "all_gather_scaled_mm fused vs reference", j, W);
    free(slack);
    CHECK(bad == 0, "W=%d rank %d: %lld elements differ from the reference", W, j, (long long)bad);
    int64_t diff = 0;
    for (int64_t m = 0; m < M; m++) diff += memcmp(ou + (size_t)(m * ldo) * oes, of + (size_t)(m * ldo) * oes, (size_t)q->Nj * oes) != 0;
    CHECK(diff == 0, "W=%d rank %d: fused and unfused differ in %lld rows", W, j, (long long)diff);
    CHECK(bad_padding(of, M, q->Nj, ldo, oes) == 0 && bad_padding(ou, M, q->Nj, ldo, oes) == 0,
          "W=%d rank %d: out padding written", W, j);
    if (tc->gathered) {
      uint8_t *ga = malloc((size_t)(M * (K + 3)) + 1);
      float *gs = malloc(sizeof(float) * (size_t)M + 4);
      int32_t *gz = malloc(sizeof(int32_t) * (size_t)M + 4);
      RQ(ga && gs && gz, "out of memory");
      cudaMemcpy(ga, dev[j][9], (size_t)(M * (K + 3)), cudaMemcpyDeviceToHost);
      cudaMemcpy(gs, dev[j][10], sizeof(float) * (size_t)M, cudaMemcpyDeviceToHost);
      cudaMemcpy(gz, dev[j][11], sizeof(int32_t) * (size_t)M, cudaMemcpyDeviceToHost);
      int64_t gb = 0;
      for (int64_t m = 0; m < M; m++) gb += memcmp(ga + m * (K + 3), a_full + m * K, (size_t)K) != 0;
      CHECK(gb == 0, "W=%d rank %d: gathered->a differs in %lld rows", W, j, (long long)gb);
      CHECK(bad_padding(ga, M, K, K + 3, 1) == 0, "gathered->a padding written");
      CHECK(memcmp(gs, sa_full, sizeof(float) * (size_t)M) == 0, "W=%d rank %d: gathered->scale_a differs", W, j);
      if (tc->zp >= 2) CHECK(memcmp(gz, azp_full, sizeof(int32_t) * (size_t)M) == 0, "gathered->azp differs");
      free(ga), free(gs), free(gz);
    }
    free(ou), free(of), free(want);
  }
  for (int j = 0; j < W; j++) {
    use_dev(e->dev[j]);
    for (int i = 0; i < 12; i++)
      if (dev[j][i]) cudaFree(dev[j][i]);
    free(R[j].a), free(R[j].sa), free(R[j].azp), free(R[j].b), free(R[j].sb), free(R[j].bias), free(R[j].adj);
  }
  use_dev(0);
  free(a_full), free(sa_full), free(azp_full);
  return w8a8_test_failed() != fails0;
}

/* Run one reduce-scatter case. */
static int run_rs(env *e, const tcase *tc) {
  const int W = e->W;
  const int64_t M = tc->M, N = tc->N;
  const size_t oes = w8a8_dtype_size(tc->out);
  int fails0 = w8a8_test_failed();
  float *sum = calloc((size_t)(M * N) + 1, sizeof(float)), *slack = calloc((size_t)(M * N) + 1, sizeof(float));
  float *sumq = calloc((size_t)(M * N) + 1, sizeof(float)), *flip = calloc((size_t)(M * N) + 1, sizeof(float));
  float *part = calloc((size_t)(M * N) + 1, sizeof(float));
  void *bias = calloc((size_t)N + 1, 4);
  RQ(sum && slack && sumq && flip && part && bias, "out of memory");
  const int want_out = tc->partials == W8A8_TP_PARTIALS_OUT;
  for (int64_t n = 0; n < N; n++) {
    uint64_t s = mix(tc->seed, 16, (uint64_t)n);
    store_out(tc->out, bias, n, -2.0f + 4.0f * (float)(next(&s) >> 40) * 0x1p-24f);
  }
  rank_call U[MAXW], F[MAXW];
  void *dev[MAXW][9];
  memset(dev, 0, sizeof dev);
  int ok = 1;
  for (int j = 0; j < W; j++) {
    const int64_t Kj = tc->K + (tc->K > 0 ? (j & 1) : 0), lda = Kj + tc->pad, ldb = Kj + tc->pad;
    const int64_t Mj = rows_of(M, W, j, tc->skew);
    uint8_t *a = calloc((size_t)(M * lda) + 1, 1), *b = calloc((size_t)(N * ldb) + 1, 1);
    float *sa = calloc((size_t)M + 1, sizeof(float)), *sb = calloc((size_t)N + 1, sizeof(float));
    int32_t *azp = calloc((size_t)M + 1, sizeof(int32_t)), *adj = calloc((size_t)N + 1, sizeof(int32_t));
    RQ(a && b && sa && sb && azp && adj, "out of memory");
    for (int64_t i = 0; i < M; i++) fill_q8(a + i * lda, Kj, tc->in, mix(tc->seed, 11, (uint64_t)(j * 100000 + i)));
    for (int64_t n = 0; n < N; n++) fill_q8(b + n * ldb, Kj, tc->in, mix(tc->seed, 12, (uint64_t)(j * 100000 + n)));
    fill_f32(sa, tc->sa_tok ? M : 1, 1e-3f, 4e-3f, mix(tc->seed, 13, (uint64_t)j));
    fill_f32(sb, tc->sb_chan ? N : 1, 0.5f, 2.0f, mix(tc->seed, 14, (uint64_t)j));
    fill_i32(azp, tc->zp == 3 ? M : 1, -20, 20, mix(tc->seed, 15, (uint64_t)j));
    w8a8_matrix AH = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, M, Kj, lda, a);
    w8a8_matrix BH = w8a8_matrix_make(tc->in, W8A8_COL_MAJOR, Kj, N, ldb, b);
    w8a8_vector ADJ = w8a8_vector_make(W8A8_DTYPE_INT32, N, adj);
    if (tc->zp) {
      RQ_OK(w8a8_colsum(ref(), &BH, &ADJ));
      if (tc->zp == 1)
        for (int64_t n = 0; n < N; n++) adj[n] *= 5;
    }
    w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sa_tok ? M : 1, sa);
    w8a8_vector SB = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sb_chan ? N : 1, sb);
    w8a8_zero_point ZP = {tc->zp >= 2 ? w8a8_vector_make(W8A8_DTYPE_INT32, tc->zp == 3 ? M : 1, azp)
                                      : w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL),
                          ADJ};
    /* the reference partial of rank j, summed in rank order (sumq: rounded to out's dtype first) */
    w8a8_matrix PO = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, part);
    RQ_OK(w8a8_scaled_mm(ref(), &AH, &BH, &SA, &SB, NULL, tc->zp ? &ZP : NULL, &PO));
    for (int64_t i = 0; i < M * N; i++) {
      const float q = round_to_out(tc->out, part[i]);
      sum[i] = j == 0 ? part[i] : sum[i] + part[i];
      sumq[i] = j == 0 ? q : sumq[i] + q;
      if (want_out) flip[i] += out_spacing2(tc->out, part[i]);
    }
    if (tc->in == W8A8_DTYPE_FP8_E4M3)
      RQ(add_abs_slack(slack, M, N, Kj, a, lda, b, ldb, sa, tc->sa_tok, sb, tc->sb_chan), "fp8 error scale: %s",
         w8a8_last_error());
    void **d = dev[j];
    use_dev(e->dev[j]); /* rank j's buffers on rank j's device */
    d[0] = dup_dev(a, (size_t)(M * lda));
    d[1] = dup_dev(b, (size_t)(N * ldb));
    d[2] = dup_dev(sa, sizeof(float) * (size_t)(tc->sa_tok ? M : 1));
    d[3] = dup_dev(sb, sizeof(float) * (size_t)(tc->sb_chan ? N : 1));
    d[4] = dup_dev(azp, sizeof(int32_t) * (size_t)(tc->zp == 3 ? M : 1));
    d[5] = dup_dev(adj, sizeof(int32_t) * (size_t)N);
    d[6] = dup_dev(bias, oes * (size_t)N);
    const int64_t ldo = N + tc->pad;
    d[7] = poison_dev((size_t)(Mj * ldo) * oes);
    d[8] = poison_dev((size_t)(Mj * ldo) * oes);
    for (int i = 0; i < 9; i++) ok &= d[i] != NULL;
    rank_call c;
    memset(&c, 0, sizeof c);
    c.comm = e->comm[j];
    c.dev = e->dev[j];
    c.ag = 0;
    c.A = w8a8_matrix_make(tc->in, W8A8_ROW_MAJOR, M, Kj, lda, d[0]);
    c.B = w8a8_matrix_make(tc->in, W8A8_COL_MAJOR, Kj, N, ldb, d[1]);
    c.SA = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sa_tok ? M : 1, d[2]);
    c.SB = w8a8_vector_make(W8A8_DTYPE_FP32, tc->sb_chan ? N : 1, d[3]);
    c.BIAS = w8a8_vector_make(tc->out, N, d[6]);
    c.has_bias = tc->bias;
    c.has_zp = tc->zp != 0;
    c.ZP.azp_adj = w8a8_vector_make(W8A8_DTYPE_INT32, N, d[5]);
    c.ZP.azp = tc->zp >= 2 ? w8a8_vector_make(W8A8_DTYPE_INT32, tc->zp == 3 ? M : 1, d[4])
                           : w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL);
    c.opt = (w8a8_tp_options)W8A8_TP_OPTIONS_INIT;
    c.opt.partials = tc->partials;
    U[j] = c;
    U[j].O = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, Mj, N, ldo, d[7]);
    U[j].opt.overlap = 0;
    F[j] = c;
    F[j].opt.overlap = 1; /* (the default, W8A8_TP_OVERLAP_AUTO, runs these small M unfused) */
    F[j].O = w8a8_matrix_make(tc->out, W8A8_ROW_MAJOR, Mj, N, ldo, d[8]);
    free(a), free(b), free(sa), free(sb), free(azp), free(adj);
  }
  use_dev(0);
  CHECK(ok, "device allocation failed");
  /* the expected output: ordered sum (of the partials or of their roundings), + bias, rounded
   * once; alt: the other kind of partials, to count where the two differ */
  void *want = calloc((size_t)(M * N) + 1, oes), *alt = calloc((size_t)(M * N) + 1, oes);
  RQ(want && alt, "out of memory");
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      float s = (want_out ? sumq : sum)[m * N + n], t = (want_out ? sum : sumq)[m * N + n];
      if (tc->bias) s = s + load_out(tc->out, bias, n), t = t + load_out(tc->out, bias, n);
      store_out(tc->out, want, m * N + n, s);
      store_out(tc->out, alt, m * N + n, t);
      g_rs_modes_differ += memcmp((char *)want + (size_t)(m * N + n) * oes, (char *)alt + (size_t)(m * N + n) * oes,
                                  oes) != 0;
    }
  /* The uploads (a pageable cudaMemcpy may return before its DMA lands) and the poisoning
   * cudaMemsets ran on the legacy stream, which the ranks' non-blocking streams do not wait for. */
  if (ok) ok = sync_all() == cudaSuccess;
  if (ok) {
    run_ranks(U, W);
    /* the partials the unfused calls left in the receive buffers must not serve the fused ones (a fused
     * schedule that failed to deliver a partial would otherwise still read the right numbers) */
    ok = sync_all() == cudaSuccess;
    for (int j = 0; ok && j < W; j++) ok = w8a8_tp_gpu_poison_ws(e->comm[j], WS_POISON) == 0;
    CHECK(ok, "W=%d: poisoning the workspaces between the unfused and the fused calls failed", W);
  }
  if (ok) {
    run_ranks(F, W);
    cudaError_t ce = sync_all();
    CHECK(ce == cudaSuccess, "device: %s", cudaGetErrorString(ce));
    for (int j = 0; j < W; j++)
      CHECK(U[j].st == W8A8_SUCCESS && F[j].st == W8A8_SUCCESS, "W=%d rank %d: unfused %s, fused %s: %s %s", W, j,
            w8a8_status_name(U[j].st), w8a8_status_name(F[j].st), U[j].msg, F[j].msg);
    /* W8A8_TP_RS_DIRECT (g_rs_direct): every peer with rows got its fp32 partials straight from this
     * rank's GEMMs (ranks on one GPU, or on GPUs with peer access: the test's ranks are one process) */
    const int fp32_parts = tc->partials != W8A8_TP_PARTIALS_OUT || tc->out == W8A8_DTYPE_FP32;
    for (int j = 0; g_rs_direct && fp32_parts && M > 0 && N > 0 && j < W; j++) {
      /* one piece per peer with rows (sweep_rs_direct forces pieces of 2^30 rows) */
      int want = 0;
      for (int i = 0; i < W; i++)
        want += i != j && rows_of(M, W, i, tc->skew) > 0 && w8a8_tp_gpu_peer_on(e->dev[j], e->dev[i]);
      CHECK(w8a8_tp_gpu_last_rs_direct(e->comm[j]) == want, "W=%d rank %d: %d pieces stored straight into peers, "
            "expected %d", W, j, w8a8_tp_gpu_last_rs_direct(e->comm[j]), want);
    }
    /* W8A8_TP_RS_MIN_ROWS (g_rs_min_rows): each peer's rows pushed in min(4, max(1, rows / R)) pieces */
    for (int j = 0; g_rs_min_rows && !g_rs_direct && M > 0 && N > 0 && j < W; j++) {
      int want = 0;
      for (int i = 0; i < W; i++)
        if (i != j) want += rs_cut(rows_of(M, W, i, tc->skew));
      CHECK(w8a8_tp_gpu_last_rs_pushes(e->comm[j]) == want, "W=%d rank %d M=%lld: %d pieces pushed to peers with "
            "pieces of >= %d rows, expected %d", W, j, (long long)M, w8a8_tp_gpu_last_rs_pushes(e->comm[j]),
            g_rs_min_rows, want);
      /* the own rows: one launch (W8A8_TP_RS_OWN_WHOLE, the default), or the peers' cut */
      const int64_t rj = rows_of(M, W, j, tc->skew);
      const int own = rj <= 0 ? 0 : !g_rs_own_cut ? 1 : rs_cut(rj);
      CHECK(w8a8_tp_gpu_last_rs_own(e->comm[j]) == own, "W=%d rank %d M=%lld: %d GEMM launches over the own rows, "
            "expected %d (own rows %s)", W, j, (long long)M, w8a8_tp_gpu_last_rs_own(e->comm[j]), own,
            g_rs_own_cut ? "in pieces" : "whole");
    }
  }
  for (int j = 0; ok && j < W && !w8a8_test_failed(); j++) {
    const int64_t Mj = rows_of(M, W, j, tc->skew), oj = offset_of(M, W, j, tc->skew), ldo = N + tc->pad;
    uint8_t *ou = malloc((size_t)(Mj * ldo) * oes + 1), *of = malloc((size_t)(Mj * ldo) * oes + 1);
    RQ(ou && of, "out of memory");
    use_dev(e->dev[j]);
    cudaMemcpy(ou, dev[j][7], (size_t)(Mj * ldo) * oes, cudaMemcpyDeviceToHost);
    cudaMemcpy(of, dev[j][8], (size_t)(Mj * ldo) * oes, cudaMemcpyDeviceToHost);
    int64_t bad = compare(tc, N, of, ldo, (const char *)want + (size_t)(oj * N) * oes, slack + oj * N,
                          flip + oj * N, Mj, "scaled_mm_reduce_scatter fused vs reference", j, W);
    CHECK(bad == 0, "W=%d rank %d: %lld elements differ from the reference", W, j, (long long)bad);
    int64_t diff = 0;
    for (int64_t m = 0; m < Mj; m++)
      diff += memcmp(ou + (size_t)(m * ldo) * oes, of + (size_t)(m * ldo) * oes, (size_t)N * oes) != 0;
    CHECK(diff == 0, "W=%d rank %d: fused and unfused differ in %lld rows", W, j, (long long)diff);
    CHECK(bad_padding(of, Mj, N, ldo, oes) == 0 && bad_padding(ou, Mj, N, ldo, oes) == 0,
          "W=%d rank %d: out padding written", W, j);
    free(ou), free(of);
  }
  for (int j = 0; j < W; j++) {
    use_dev(e->dev[j]);
    for (int i = 0; i < 9; i++)
      if (dev[j][i]) cudaFree(dev[j][i]);
  }
  use_dev(0);
  free(sum), free(slack), free(sumq), free(flip), free(part), free(bias), free(want), free(alt);
  return w8a8_test_failed() != fails0;
}

/* The mode sweep: every out dtype x zero-point kind (int8) and scale kinds (both), with shapes,
 * skews, strides and gathered outputs varying from case to case. */
static int make_cases(tcase *cs, int max, int W) {
  static const int64_t Ms[] = {1, 5, 17, 40, 96, 3, 64};
  static const int64_t Ns[] = {7, 33, 64, 1, 48};
  static const int64_t Ks[] = {13, 32, 96, 1, 64};
  static const w8a8_dtype outs[] = {W8A8_DTYPE_BF16, W8A8_DTYPE_FP16, W8A8_DTYPE_FP32};
  int n = 0, i = 0;
  for (int in = 0; in < 2; in++)
    for (int o = 0; o < 3; o++)
      for (int zp = 0; zp < (in == 0 ? 4 : 2) && n < max; zp++, i++) {
        tcase t;
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
        t.seed = 1000u * (uint64_t)W + (uint64_t)i;
        cs[n++] = t;
      }
  /* M smaller than W (most ranks empty), M = 0, and K = 0 */
  tcase t;
  memset(&t, 0, sizeof t);
  t.in = W8A8_DTYPE_INT8, t.out = W8A8_DTYPE_BF16, t.M = 1, t.N = 9, t.K = 24, t.bias = 1, t.sa_tok = 1, t.seed = 77;
  if (n < max) cs[n++] = t;
  t.M = 0, t.seed = 78;
  if (n < max) cs[n++] = t;
  t.M = 6, t.K = 0, t.seed = 79;
  if (n < max) cs[n++] = t;
  if (!small_mode()) { /* larger: the fast GEMM paths, many tiles */
    t.in = W8A8_DTYPE_INT8, t.out = W8A8_DTYPE_BF16, t.M = 520, t.N = 384, t.K = 512, t.bias = 1, t.sa_tok = 1;
    t.sb_chan = 1, t.zp = 0, t.seed = 80;
    if (n < max) cs[n++] = t;
    t.in = W8A8_DTYPE_FP8_E4M3, t.seed = 81;
    if (n < max) cs[n++] = t;
  }
  return n;
}

static int device_cc(void) {
  int dev = 0, maj = 0, min = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&maj, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&min, cudaDevAttrComputeCapabilityMinor, dev);
  return maj * 10 + min;
}

static void sweep(int W, int ag) {
  GPU_OR_SKIP();
  REQUIRE(ref(), "no reference handle");
  env e;
  REQUIRE(env_open(&e, W, 600, 400, 600), "could not create %d ranks: %s", W, w8a8_last_error());
  tcase cs[64];
  int n = make_cases(cs, 64, W);
  int cc = device_cc(), failed = 0;
  for (int i = 0; i < n && failed < 3; i++) {
    if (cs[i].in == W8A8_DTYPE_FP8_E4M3 && cc < 89) continue;
    failed += ag ? run_ag(&e, &cs[i]) : run_rs(&e, &cs[i]);
  }
  env_close(&e);
}

/* The strided copies on the SMs (tp_copy2d): where a row stride is past the copy engine's pitch limit
 * (2^31 - 1 bytes; the API admits 2^32) the own rows and the gathered output move by kernel; W8A8_TP_COPY2D=1 takes
 * that path at every size and W8A8_TP_AG_PACK=0 sends the own rows through it too: the sweep's padded, odd-K
 * (byte path) and aligned (16-byte path) cases, every result checked and the copies counted. */
W8A8_TEST(tp_gpu_ag_copy2d_w2) {
  w8a8_dev_set("TP_AG_PACK", "0");
  w8a8_dev_set("TP_COPY2D", "1");
  sweep(2, 1);
  w8a8_dev_set("TP_COPY2D", NULL);
  w8a8_dev_set("TP_AG_PACK", NULL);
}
W8A8_TEST(tp_gpu_ag_w1) { sweep(1, 1); }
W8A8_TEST(tp_gpu_ag_w2) { sweep(2, 1); }
W8A8_TEST(tp_gpu_ag_w3) { sweep(3, 1); }
W8A8_TEST(tp_gpu_ag_w4) { sweep(4, 1); }
/* The fused reduce-scatter with the peers' partials stored straight from the GEMMs' epilogues
 * (W8A8_TP_RS_DIRECT): the same sweep, the fused results against the reference and
 * bit-identical to the unfused pair, the direct stores counted per rank. */
static void sweep_rs_direct(int W) {
  w8a8_dev_set_int("TP_RS_DIRECT", 1);
  w8a8_dev_set_int("TP_RS_MIN_ROWS", ((1 << 30) < 1 ? -1 : (1 << 30))); /* one piece per peer (its count below), whatever the rows and K */
  g_rs_direct = 1;
  sweep(W, 0);
  g_rs_direct = 0;
  w8a8_dev_set_int("TP_RS_MIN_ROWS", -1);
  w8a8_dev_set_int("TP_RS_DIRECT", -1);
}
/* The reduce-scatter in small pieces (W8A8_TP_RS_MIN_ROWS): the sweep's chunks (up to a few
 * hundred rows) cut into up to 4 pieces of >= 16 rows at unaligned row offsets, the pushes counted per
 * rank, the results against the reference and bit-identical to the unfused pair (the same pieces); the
 * own rows in one launch, then (second pass) cut like the peers', the launches counted per rank. */
static void sweep_rs_small_pieces(int W) {
  w8a8_dev_set_int("TP_RS_OWN_WHOLE", 1); /* (whatever W8A8_TP_RS_OWN_WHOLE says) */
  w8a8_dev_set_int("TP_RS_MIN_ROWS", 16);
  g_rs_min_rows = 16;
  sweep(W, 0);
  /* and with the own rows cut into pieces as well (W8A8_TP_RS_OWN_WHOLE=0; one launch of them is the
   * default): the peers' pushes the same, fused and unfused the same GEMMs again */
  w8a8_dev_set_int("TP_RS_OWN_WHOLE", 0);
  g_rs_own_cut = 1;
  if (!w8a8_test_failed()) sweep(W, 0);
  g_rs_own_cut = 0;
  w8a8_dev_set_int("TP_RS_OWN_WHOLE", -1);
  g_rs_min_rows = 0;
  w8a8_dev_set_int("TP_RS_MIN_ROWS", -1);
}
/* The reduce-scatter's pieces by rule (no GPU needed): >= 256 rows where the rank's K is at
 * most 4096, >= 1024 above, at most 4, at least 1; TP_RS_MIN_ROWS overrides. */
W8A8_TEST(tp_gpu_rs_pieces_rule) {
  w8a8_dev_set_int("TP_RS_MIN_ROWS", -1);
  /* rows, K, pieces */
  static const int64_t cases[][3] = {{512, 4096, 2},   {511, 4096, 1},   {1024, 4096, 4},  {4096, 4096, 4},
                                     {100, 4096, 1},   {512, 4097, 1},   {512, 14336, 1},  {2048, 14336, 2},
                                     {4096, 14336, 4}, {8192, 14336, 4}, {768, 2048, 3},   {0, 4096, 1}};
  for (int i = 0; i < 12; i++)
    CHECK(w8a8_tp_rs_pieces(cases[i][0], cases[i][1]) == cases[i][2], "rows %lld K %lld: %d pieces, expected %lld",
          (long long)cases[i][0], (long long)cases[i][1], w8a8_tp_rs_pieces(cases[i][0], cases[i][1]),
          (long long)cases[i][2]);
  w8a8_dev_set_int("TP_RS_MIN_ROWS", 100);
  CHECK(w8a8_tp_rs_pieces(512, 14336) == 4 && w8a8_tp_rs_pieces(250, 4096) == 2,
        "forced 100 rows: %d and %d pieces, expected 4 and 2", w8a8_tp_rs_pieces(512, 14336),
        w8a8_tp_rs_pieces(250, 4096));
  w8a8_dev_set_int("TP_RS_MIN_ROWS", -1);
}
W8A8_TEST(tp_gpu_rs_small_pieces_w2) { sweep_rs_small_pieces(2); }
W8A8_TEST(tp_gpu_rs_small_pieces_w3) { sweep_rs_small_pieces(3); }
W8A8_TEST(tp_gpu_rs_direct_w2) { sweep_rs_direct(2); }
W8A8_TEST(tp_gpu_rs_direct_w3) { sweep_rs_direct(3); }
W8A8_TEST(tp_gpu_rs_direct_w4) { sweep_rs_direct(4); }
W8A8_TEST(tp_gpu_rs_w1) { sweep(1, 0); }
W8A8_TEST(tp_gpu_rs_w2) { sweep(2, 0); }
W8A8_TEST(tp_gpu_rs_w3) { sweep(3, 0); }
W8A8_TEST(tp_gpu_rs_w4) { sweep(4, 0); }

/* W8A8_TP_PARTIALS_OUT: the partial GEMMs write out's 16-bit dtype, the pushes (or NCCL messages)
 * move 2-byte elements and tp_reduce widens them. The reduce-scatter sweep with rounded partials
 * (every out dtype: fp32 out must give the fp32 mode's bits), plus chunks of >= 2048 rows, which the
 * direct transports push in several pieces (rs_pieces: byte offsets of 2-byte elements inside a
 * chunk), with odd N (rows of 2-byte partials not 4-byte aligned). int8 bit for bit against the
 * reference that rounds each partial; fused == unfused bit for bit; and the data must make the two
 * kinds of partials differ somewhere, else a library ignoring the option would pass. */
static void sweep_partials_out(int W) {
  GPU_OR_SKIP();
  REQUIRE(ref(), "no reference handle");
  env e;
  REQUIRE(env_open(&e, W, 4200 * (int64_t)W, 400, 600), "could not create %d ranks: %s", W, w8a8_last_error());
  tcase cs[72];
  int n = make_cases(cs, 64, W);
  if (!small_mode()) {
    static const struct { w8a8_dtype in, out; int zp, bias, skew; int64_t N, K; } big[] = {
        {W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 0, 1, 0, 63, 64},
        {W8A8_DTYPE_INT8, W8A8_DTYPE_FP16, 3, 1, 1, 64, 96},
        {W8A8_DTYPE_FP8_E4M3, W8A8_DTYPE_BF16, 0, 1, 0, 96, 128},
    };
    for (int i = 0; i < 3; i++) {
      tcase t;
      memset(&t, 0, sizeof t);
      t.in = big[i].in, t.out = big[i].out, t.zp = big[i].zp, t.bias = big[i].bias, t.skew = big[i].skew;
      t.sa_tok = 1, t.sb_chan = 1;
      t.M = 2050 * (int64_t)W + 7; /* every non-empty chunk >= 2048 rows: 2 pieces */
      t.N = big[i].N, t.K = big[i].K;
      t.seed = 8000u + 10u * (uint64_t)W + (uint64_t)i;
      cs[n++] = t;
    }
  }
  int cc = device_cc(), failed = 0;
  g_rs_modes_differ = 0;
  for (int i = 0; i < n && failed < 3; i++) {
    if (cs[i].in == W8A8_DTYPE_FP8_E4M3 && cc < 89) continue;
    cs[i].partials = W8A8_TP_PARTIALS_OUT;
    failed += run_rs(&e, &cs[i]);
  }
  CHECK(g_rs_modes_differ > 0, "W=%d: the references of the two kinds of partials never differ", W);
  env_close(&e);
}
W8A8_TEST(tp_gpu_rs_partials_out_w1) { sweep_partials_out(1); }
W8A8_TEST(tp_gpu_rs_partials_out_w2) { sweep_partials_out(2); }
W8A8_TEST(tp_gpu_rs_partials_out_w3) { sweep_partials_out(3); }
W8A8_TEST(tp_gpu_rs_partials_out_w4) { sweep_partials_out(4); }

/* The reduce kernels: the 8-wide one is the default and so runs in every RS test
 * above wherever N and ldo are multiples of 8 (N = 48, 64 unpadded; the >= 2048-row chunks with
 * N = 64, 96), the scalar one elsewhere. This runs the same sweeps with the scalar kernel forced
 * everywhere (W8A8_TP_REDUCE_VEC=0), bit for bit against the same reference, then the 8-wide one
 * forced on (whatever the environment says). */
W8A8_TEST(tp_gpu_rs_reduce_kernels) {
  for (int v = 0; v <= 1 && !w8a8_test_failed(); v++) {
    w8a8_dev_set_int("TP_REDUCE_VEC", v);
    sweep(2, 0);
    if (!w8a8_test_failed()) sweep(3, 0);
    if (!w8a8_test_failed()) sweep_partials_out(2);
  }
  w8a8_dev_set_int("TP_REDUCE_VEC", -1);
}

/* The all-gather's own-row pack kernel (tp_pack in src/tp/tp_kernels.cu), on its own:
 * rows of random bytes with a row stride to a dense buffer whose neighbours are poisoned, the per-row
 * scales and zero points (per-tensor values repeated), the ready flags (all 0 but the own one, which
 * were poisoned), every byte checked. Shapes reach its four-load loop (K >= 4 x 256 x 16 bytes), its
 * tail, several rows per block (rows > the grid) and rows = 0 (flags only); unaligned K / lda are
 * declined (w8a8_tp_pack_takes) and left to the copy engine's path, which the sweeps run. */
W8A8_TEST(tp_gpu_pack_kernel) {
  GPU_OR_SKIP();
  static const struct { int64_t rows, K, pad; } cs[] = {
      {1, 16, 0}, {3, 96, 16}, {300, 4096 + 80, 32}, {5000, 64, 0}, {7, 16384 + 48, 16}, {2, 32768, 0}, {0, 64, 0}};
  REQUIRE(w8a8_tp_pack_takes((void *)256, (void *)512, 4096, 4096) && !w8a8_tp_pack_takes((void *)256, (void *)512, 4100, 4096) &&
              !w8a8_tp_pack_takes((void *)256, (void *)520, 4096, 4096) &&
              !w8a8_tp_pack_takes((void *)264, (void *)512, 4096, 4096) && !w8a8_tp_pack_takes((void *)256, (void *)512, 4096, 24) &&
              !w8a8_tp_pack_takes((void *)256, (void *)512, 0, 0),
          "w8a8_tp_pack_takes: wrong on 16-byte rules");
  int nsm = 0;
  cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0);
  for (size_t c = 0; c < sizeof cs / sizeof cs[0] && !w8a8_test_failed(); c++) {
    const int64_t R = cs[c].rows, K = cs[c].K, lda = K + cs[c].pad, gap = 256; /* gap: poisoned bytes each side */
    const int per_tok = (int)(c & 1), azp_tok = (int)((c >> 1) & 1), with_azp = c != 2, nflags = 3 + (int)c % 4;
    const int own = (int)c % nflags;
    uint8_t *src = malloc((size_t)(R * lda) + 1), *got = malloc((size_t)(R * K + 2 * gap) + 1);
    float *sc = malloc(sizeof(float) * (size_t)(R + 1)), *gsc = malloc(sizeof(float) * (size_t)(R + 1));
    int32_t *az = malloc(sizeof(int32_t) * (size_t)(R + 1)), *gaz = malloc(sizeof(int32_t) * (size_t)(R + 1));
    unsigned int gfl[8];
    REQUIRE(src && got && sc && gsc && az && gaz, "out of memory");
    uint64_t st = mix(1234, (uint64_t)c, 5);
    for (int64_t i = 0; i < R * lda; i++) src[i] = (uint8_t)next(&st);
    for (int64_t i = 0; i <= R; i++) sc[i] = (float)(next(&st) % 1000) * 0.001f + 0.01f, az[i] = (int32_t)(next(&st) % 300) - 150;
    uint8_t *dsrc = NULL, *ddst = NULL;
    float *dsc = NULL, *dgsc = NULL;
    int32_t *daz = NULL, *dgaz = NULL;
    unsigned int *dfl = NULL;
    int ok = cudaMalloc((void **)&dsrc, (size_t)(R * lda) + 16) == cudaSuccess &&
             cudaMalloc((void **)&ddst, (size_t)(R * K + 2 * gap)) == cudaSuccess &&
             cudaMalloc((void **)&dsc, sizeof(float) * (size_t)(R + 1)) == cudaSuccess &&
             cudaMalloc((void **)&dgsc, sizeof(float) * (size_t)(R + 1)) == cudaSuccess &&
             cudaMalloc((void **)&daz, sizeof(int32_t) * (size_t)(R + 1)) == cudaSuccess &&
             cudaMalloc((void **)&dgaz, sizeof(int32_t) * (size_t)(R + 1)) == cudaSuccess &&
             cudaMalloc((void **)&dfl, sizeof gfl) == cudaSuccess;
    CHECK(ok, "cudaMalloc");
    if (ok) {
      cudaMemcpy(dsrc, src, (size_t)(R * lda), cudaMemcpyHostToDevice);
      cudaMemcpy(dsc, sc, sizeof(float) * (size_t)(R + 1), cudaMemcpyHostToDevice);
      cudaMemcpy(daz, az, sizeof(int32_t) * (size_t)(R + 1), cudaMemcpyHostToDevice);
      cudaMemset(ddst, POISON, (size_t)(R * K + 2 * gap));
      cudaMemset(dgsc, POISON, sizeof(float) * (size_t)(R + 1));
      cudaMemset(dgaz, POISON, sizeof(int32_t) * (size_t)(R + 1));
      cudaMemset(dfl, POISON, sizeof gfl);
      CHECK(w8a8_tp_pack_takes(ddst + gap, dsrc, lda, K), "case %zu: declined", c);
      /* the scale push's destinations (W8A8_TP_AG_SCALES): cases 1 and 3 write two more copies (peers' buffers
       * stand-ins on this GPU), cases 2 and 5 one; each must equal the own one */
      const int npeer = c == 1 || c == 3 ? 2 : c == 2 || c == 5 ? 1 : 0; /* (case 2: per-tensor, no zero points) */
      w8a8_tp_scale_dsts sd;
      memset(&sd, 0, sizeof sd);
      float *dpsc[2] = {NULL, NULL};
      int32_t *dpaz[2] = {NULL, NULL};
      for (int k = 0; k < npeer && ok; k++) {
        ok = cudaMalloc((void **)&dpsc[k], sizeof(float) * (size_t)(R + 1)) == cudaSuccess &&
             cudaMalloc((void **)&dpaz[k], sizeof(int32_t) * (size_t)(R + 1)) == cudaSuccess;
        if (ok) {
          cudaMemset(dpsc[k], POISON, sizeof(float) * (size_t)(R + 1));
          cudaMemset(dpaz[k], POISON, sizeof(int32_t) * (size_t)(R + 1));
        }
        sd.scale[k] = dpsc[k];
        sd.azp[k] = with_azp ? dpaz[k] : NULL;
        sd.n = k + 1;
      }
      REQUIRE(ok, "cudaMalloc (peer scales)"); /* (never launch into NULL destinations) */
      const w8a8_status s = w8a8_tp_launch_pack(ddst + gap, dsrc, lda, K, R, dgsc, dsc, per_tok,
                                                with_azp ? dgaz : NULL, daz, azp_tok, dfl, nflags, own,
                                                npeer ? &sd : NULL, nsm, 0);
      CHECK(s == W8A8_SUCCESS && cudaDeviceSynchronize() == cudaSuccess, "case %zu: launch: %s", c, w8a8_last_error());
      cudaMemcpy(got, ddst, (size_t)(R * K + 2 * gap), cudaMemcpyDeviceToHost);
      cudaMemcpy(gsc, dgsc, sizeof(float) * (size_t)(R + 1), cudaMemcpyDeviceToHost);
      cudaMemcpy(gaz, dgaz, sizeof(int32_t) * (size_t)(R + 1), cudaMemcpyDeviceToHost);
      cudaMemcpy(gfl, dfl, sizeof gfl, cudaMemcpyDeviceToHost);
      int64_t bad = 0, badpad = 0, badsc = 0;
      for (int64_t i = 0; i < R; i++)
        for (int64_t k = 0; k < K; k++) bad += got[gap + i * K + k] != src[i * lda + k];
      for (int64_t i = 0; i < gap; i++) badpad += (got[i] != POISON) + (got[gap + R * K + i] != POISON);
      for (int64_t i = 0; i < R; i++) {
        badsc += memcmp(&gsc[i], &sc[per_tok ? i : 0], sizeof(float)) != 0;
        if (with_azp) badsc += gaz[i] != az[azp_tok ? i : 0];
      }
      const uint8_t *tail = (const uint8_t *)&gsc[R], *tz = (const uint8_t *)&gaz[R];
      for (int b = 0; b < 4; b++) badsc += (tail[b] != POISON) + (tz[b] != POISON);
      if (!with_azp) /* no zero points asked for: none written */
        for (int64_t i = 0; i < R; i++) badsc += (uint32_t)gaz[i] != 0xA5A5A5A5u;
      for (int k = 0; k < npeer; k++) { /* each peer copy: the own one's R values, the entry past them untouched */
        float *psc = malloc(sizeof(float) * (size_t)(R + 1));
        int32_t *paz = malloc(sizeof(int32_t) * (size_t)(R + 1));
        REQUIRE(psc && paz, "out of memory");
        cudaMemcpy(psc, dpsc[k], sizeof(float) * (size_t)(R + 1), cudaMemcpyDeviceToHost);
        cudaMemcpy(paz, dpaz[k], sizeof(int32_t) * (size_t)(R + 1), cudaMemcpyDeviceToHost);
        badsc += memcmp(psc, gsc, sizeof(float) * (size_t)(R + 1)) != 0;
        badsc += with_azp ? memcmp(paz, gaz, sizeof(int32_t) * (size_t)(R + 1)) != 0 : (uint32_t)paz[0] != 0xA5A5A5A5u;
        free(psc), free(paz);
        cudaFree(dpsc[k]), cudaFree(dpaz[k]);
      }
      int badfl = 0;
      for (int i = 0; i < nflags; i++) badfl += gfl[i] != (i == own ? 1u : 0u);
      for (int i = nflags; i < 8; i++) badfl += gfl[i] != 0xA5A5A5A5u;
      CHECK(bad == 0 && badpad == 0 && badsc == 0 && badfl == 0,
            "case %zu (rows %lld K %lld lda %lld): %lld wrong bytes, %lld neighbours written, %lld wrong scales/azp, %d wrong flags",
            c, (long long)R, (long long)K, (long long)lda, (long long)bad, (long long)badpad, (long long)badsc, badfl);
    }
    cudaFree(dsrc), cudaFree(ddst), cudaFree(dsc), cudaFree(dgsc), cudaFree(daz), cudaFree(dgaz), cudaFree(dfl);
    free(src), free(got), free(sc), free(gsc), free(az), free(gaz);
  }
}

/* W8A8_TP_TRACE (a development aid for tp-bench): with the variable set when the communicators
 * are created, each eager call leaves its marks (w8a8_tp_gpu_trace). Two ranks, one reduce-scatter and one
 * all-gather (checked against the reference as in the sweeps; the last call each ran is the fused one):
 * rank 0's marks start with E (entry; the all-gather's then K, own rows packed), at or before F, the fork,
 * at 0 us; the reduce-scatter's then G (peer piece GEMMs) and P (their pushes, side stream), O (own rows),
 * A, R, with the compute stream's marks E, F, G, O, A, R in stream order (non-decreasing times) and R last;
 * the all-gather's end with J and hold a G and a C (and a W, the side stream's wait for the peer's rows,
 * before its C); the host's enqueue times of the marks in their order. Without the variable: no marks. */
W8A8_TEST(tp_gpu_trace) {
  GPU_OR_SKIP();
  REQUIRE(ref(), "no reference handle");
  w8a8_dev_set("TP_TRACE", "1");
  env e;
  const int opened = env_open(&e, 2, 600, 400, 600);
  w8a8_dev_set("TP_TRACE", NULL);
  REQUIRE(opened, "could not create 2 ranks: %s", w8a8_last_error());
  tcase tc;
  memset(&tc, 0, sizeof tc);
  tc.in = W8A8_DTYPE_INT8, tc.out = W8A8_DTYPE_BF16, tc.M = 96, tc.N = 64, tc.K = 64, tc.bias = 1, tc.sa_tok = 1;
  tc.sb_chan = 1, tc.seed = 90;
  float us[64];
  char k[64];
  for (int ag = 0; ag < 2 && !w8a8_test_failed(); ag++) {
    tc.seed = 90 + (uint64_t)ag;
    if (ag ? run_ag(&e, &tc) : run_rs(&e, &tc)) break;
    CHECK(sync_all() == cudaSuccess, "device error");
    const int n = w8a8_tp_gpu_trace(e.comm[0], us, k, 64);
    CHECK(n >= 3, "%s: %d marks", ag ? "all-gather" : "reduce-scatter", n);
    if (n < 3) break;
    /* E (entry) first, then (AG) K (own rows packed), then F (the fork) at 0: times are from F */
    const int fi = ag ? 2 : 1;
    CHECK(k[0] == 'E' && us[0] <= 0.0f && (!ag || k[1] == 'K') && k[fi] == 'F' && us[fi] == 0.0f,
          "first marks %c %c %c at %.3f %.3f %.3f us, expected E%s then F at 0", k[0], k[1], k[2], us[0], us[1], us[2],
          ag ? " K" : "");
    int has_g = 0, has_p = 0, has_c = 0, has_o = 0, has_a = 0;
    float last_s = -1e30f;
    for (int i = 0; i < n; i++) {
      has_g |= k[i] == 'G', has_p |= k[i] == 'P', has_c |= k[i] == 'C', has_o |= k[i] == 'O', has_a |= k[i] == 'A';
      if (i > fi) CHECK(us[i] >= 0.0f, "mark %d (%c) at %.3f us, before the fork", i, k[i], us[i]);
      if (k[i] != 'P' && k[i] != 'C' && k[i] != 'W') { /* the compute stream's marks, in its order */
        CHECK(us[i] >= last_s, "mark %d (%c) at %.3f us, before the previous compute-stream mark (%.3f)", i, k[i], us[i],
              last_s);
        last_s = us[i];
      }
    }
    { /* the host's enqueue times of the same marks: one per mark, in enqueue (= mark) order, F's at 0 */
      float hus[64];
      const int hn = w8a8_tp_gpu_trace_host(e.comm[0], hus, 64);
      CHECK(hn == n, "%d host marks for %d marks", hn, n);
      for (int i = 1; i < hn && hn == n; i++)
        CHECK(hus[i] >= hus[i - 1], "host mark %d (%c) enqueued at %.3f us, before mark %d's %.3f", i, k[i], hus[i], i - 1,
              hus[i - 1]);
      CHECK(hn != n || hus[fi] == 0.0f, "F's host time %.3f us, expected 0", hn == n ? hus[fi] : 0.0f);
    }
    if (ag) {
      CHECK(k[n - 1] == 'J' && has_g && has_c, "all-gather marks: last %c, G %d, C %d", k[n - 1], has_g, has_c);
      int w = -1, cw = -1; /* the first W and the first C after it: W at or before that C */
      for (int i = 0; i < n; i++)
        if (k[i] == 'W' && w < 0) w = i;
        else if (k[i] == 'C' && w >= 0 && cw < 0) cw = i;
      CHECK(w >= 0 && (cw < 0 || us[w] <= us[cw]), "all-gather marks: W at %d (%.3f us), the C after it at %d (%.3f us)", w,
            w >= 0 ? us[w] : 0.0f, cw, cw >= 0 ? us[cw] : 0.0f);
    }
    else
      CHECK(k[n - 1] == 'R' && has_g && has_p && has_o && has_a, "reduce-scatter marks: last %c, G %d P %d O %d A %d",
            k[n - 1], has_g, has_p, has_o, has_a);
  }
  env_close(&e);
  /* without the switch (unless W8A8_DEV sets it): no marks */
  if (!w8a8_knob_int(W8A8_KNOB_TP_TRACE)) {
    env e2;
    REQUIRE(env_open(&e2, 2, 64, 64, 64), "could not create 2 ranks: %s", w8a8_last_error());
    CHECK(w8a8_tp_gpu_trace(e2.comm[0], us, k, 64) == 0, "marks without TP_TRACE");
    env_close(&e2);
  }
}

/* Back to back: many calls without any host synchronization between them (the entry waits
 * are all that keeps a rank from overwriting a buffer a peer still reads). */
W8A8_TEST(tp_gpu_back_to_back) {
  GPU_OR_SKIP();
  REQUIRE(ref(), "no reference handle");
  env e;
  REQUIRE(env_open(&e, 3, 600, 400, 600), "ranks: %s", w8a8_last_error());
  tcase t;
  memset(&t, 0, sizeof t);
  t.in = W8A8_DTYPE_INT8, t.out = W8A8_DTYPE_BF16, t.M = 96, t.N = 64, t.K = 64, t.sa_tok = 1, t.sb_chan = 1;
  for (int it = 0; it < 6 && !w8a8_test_failed(); it++) {
    t.seed = 500 + (uint64_t)it;
    t.bias = it & 1;
    (it & 1) ? run_rs(&e, &t) : run_ag(&e, &t);
  }
  env_close(&e);
}

/* All-gather + ONE GEMM launch whose tiles wait on per-chunk ready flags (sm_90a): aligned shapes
 * that the Hopper kernel takes, uneven shards, every dtype kind; the schedule is checked to be
 * the one-launch one, and the result against the reference (int8 exact) and the unfused call
 * (bitwise: the same single GEMM on the gathered rows). Large enough that chunks arrive while
 * tiles already run (M = 2000 x K = 1024 per call). */
static int g_pieces; /* W8A8_TP_AG_PIECES is set (one_gemm_pieces) */
static int g_push;   /* W8A8_TP_AG_PUSH's mode (one_gemm_push: 1, push2: 2), else 0 */
static int g_scales; /* run_ag's check_scales: 1 the scale push on when the ranks were created, 2 off */
static void one_gemm_cases(int W) {
  GPU_OR_SKIP();
  if (device_cc() != 90) SKIP("the one-launch all-gather GEMM needs the sm_90a kernel");
  REQUIRE(ref(), "no reference handle");
  env e;
  REQUIRE(env_open(&e, W, 2100, 520, 2100), "could not create %d ranks: %s", W, w8a8_last_error());
  static const struct { w8a8_dtype in, out; int zp, sa_tok, sb_chan, bias, skew; int64_t M, N, K; } cs[] = {
      {W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 0, 1, 1, 1, 1, 2000, 512, 1024},
      {W8A8_DTYPE_INT8, W8A8_DTYPE_FP16, 3, 1, 0, 0, 0, 700, 256, 256},
      {W8A8_DTYPE_FP8_E4M3, W8A8_DTYPE_BF16, 0, 1, 1, 0, 1, 1500, 384, 1024},
      {W8A8_DTYPE_FP8_E4M3, W8A8_DTYPE_FP32, 0, 0, 1, 1, 0, 40, 512, 512}, /* small M: swap-AB tiles */
      {W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 2, 0, 1, 1, 1, 9, 256, 2048},      /* split-K clusters */
      /* rank 1 empty (skew 2): with W >= 3 its empty chunk lies inside a tile of the other ranks'
       * rows (rank 0 holds 1334 rows at W = 3, 1000 at W = 4: not multiples of the 128-row tile;
       * at M = 40 one swap-AB tile holds every row), and that tile waits for its flag, which the
       * ranks on rank 1's GPU must set although there is nothing to copy (they hung here before). */
      {W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 3, 1, 1, 1, 2, 2000, 256, 512},
      {W8A8_DTYPE_FP8_E4M3, W8A8_DTYPE_FP16, 0, 1, 1, 0, 2, 40, 256, 512},
  };
  for (int i = 0; i < (int)(sizeof cs / sizeof cs[0]) && !w8a8_test_failed(); i++) {
    tcase t;
    memset(&t, 0, sizeof t);
    t.in = cs[i].in, t.out = cs[i].out, t.zp = cs[i].zp, t.sa_tok = cs[i].sa_tok, t.sb_chan = cs[i].sb_chan;
    t.bias = cs[i].bias, t.skew = cs[i].skew, t.M = cs[i].M, t.N = cs[i].N, t.K = cs[i].K;
    t.gathered = i & 1;
    t.seed = 9000u + 100u * (uint64_t)W + (uint64_t)i;
    t.want_one = W > 1;
    /* pieces: where a peer on another GPU holds two or more token tiles of rows (M >= 700 here) */
    t.want_pieces = W > 1 && g_pieces && w8a8_cuda_device_count() > 1 && cs[i].M >= 700 && cs[i].skew != 2;
    t.check_push = g_push;
    t.check_scales = g_scales;
    run_ag(&e, &t);
    if (i == 1 && !w8a8_test_failed()) { /* the same with a's rows 8 bytes apart from a 16-byte multiple:
                                           * the copy engine's pack, the flags by the memsets */
      t.apad = 8, t.seed += 50;
      run_ag(&e, &t);
    }
  }
  env_close(&e);
}
W8A8_TEST(tp_gpu_ag_one_gemm_w2) { one_gemm_cases(2); }
W8A8_TEST(tp_gpu_ag_one_gemm_w3) { one_gemm_cases(3); }
W8A8_TEST(tp_gpu_ag_one_gemm_w4) { one_gemm_cases(4); }
/* The same with the peers' rows pulled in pieces (W8A8_TP_AG_PIECES): only peers on other
 * GPUs are cut, so on one GPU this is the plain schedule again; on two, W = 2 cuts the peer's rows into
 * 3 pieces, W = 4 (two ranks per GPU) cuts the two ranks of the other GPU while the table has room. */
/* one_gemm_cases with the environment variable var = val and *mark = markval for the checks, then both undone */
static void one_gemm_marked(const char *var, const char *val, int *mark, int markval, int W) {
  const char *name = strncmp(var, "W8A8_", 5) == 0 ? var + 5 : var; /* the settings table's name */
  if (w8a8_dev_set(name, val) != W8A8_SUCCESS) {
    CHECK(0, "w8a8_dev_set(%s, %s): %s", name, val, w8a8_last_error());
    return;
  }
  if (mark) *mark = markval;
  one_gemm_cases(W);
  if (mark) *mark = 0;
  w8a8_dev_set(name, NULL);
}
static void one_gemm_with(const char *var, const char *val, int *mark, int W) { one_gemm_marked(var, val, mark, 1, W); }
static void one_gemm_pieces(int W) { one_gemm_with("W8A8_TP_AG_PIECES", "3", &g_pieces, W); }
/* The same with the own-row pack kernel off (W8A8_TP_AG_PACK=0): the copy engine's 2D copy, the expand
 * kernel and the flags' memsets, the path that tp_pack replaces by default. */
static void one_gemm_nopack(int W) { one_gemm_with("W8A8_TP_AG_PACK", "0", NULL, W); }
W8A8_TEST(tp_gpu_ag_one_gemm_nopack_w2) { one_gemm_nopack(2); }
/* The same with W8A8_TP_AG_PUSH=1: ranks on GPUs of their own push their rows into the peers
 * and set the peers' ready flags (every case with rows on every rank; the skewed cases with an empty rank
 * pull, and reset the flags at their end for the pushes after them). On one GPU, and at W = 3 on two, every
 * call pulls: the check is then that nothing pushed. The cases run one after another on the same ranks,
 * pushes after pulls and pulls after pushes (the flags' end-of-call reset; the ordering argument that no
 * push of call n + 1 can land before call n's reset is in tp_gpu.c at ag_push: the same data in both calls
 * would hide such a race from any result check). */
static void one_gemm_push(int W) { one_gemm_with("W8A8_TP_AG_PUSH", "1", &g_push, W); }
W8A8_TEST(tp_gpu_ag_one_gemm_push_w2) { one_gemm_push(2); }
W8A8_TEST(tp_gpu_ag_one_gemm_push_w3) { one_gemm_push(3); }
/* The scale push (W8A8_TP_AG_SCALES=1 at creation): every rank's pack writes its scales and zero
 * points into the peers' gathered buffers, nobody copies them; the fused and unfused calls (the workspaces
 * poisoned between them: a scale the push failed to write fails the reference), alone and with push mode 2. */
W8A8_TEST(tp_gpu_ag_one_gemm_scales_w2) { one_gemm_with("W8A8_TP_AG_SCALES", "1", &g_scales, 2); }
/* The scale push is the default: with the variable unset the packs push (checked), and with it at 0 nobody
 * does (checked) and the peers' scales are copied instead. */
W8A8_TEST(tp_gpu_ag_one_gemm_scales_default_w2) {
  w8a8_dev_set("TP_AG_SCALES", NULL);
  g_scales = 1;
  one_gemm_cases(2);
  g_scales = 0;
}
W8A8_TEST(tp_gpu_ag_one_gemm_noscales_w2) { one_gemm_marked("W8A8_TP_AG_SCALES", "0", &g_scales, 2, 2); }
W8A8_TEST(tp_gpu_ag_one_gemm_scales_w3) { one_gemm_with("W8A8_TP_AG_SCALES", "1", &g_scales, 3); }
/* The per-chunk schedule (W8A8_TP_ONE_GEMM=0, any architecture) with the scale push: the fused calls' chunk GEMMs
 * wait on the side stream's events, which waited on the peers' packs; the unfused ones as before. */
W8A8_TEST(tp_gpu_ag_scales_chunks_w3) {
  w8a8_dev_set("TP_ONE_GEMM", "0");
  w8a8_dev_set("TP_AG_SCALES", "1");
  sweep(3, 1);
  w8a8_dev_set("TP_AG_SCALES", NULL);
  w8a8_dev_set("TP_ONE_GEMM", NULL);
}
W8A8_TEST(tp_gpu_ag_one_gemm_scales_push2_w2) {
  w8a8_dev_set("TP_AG_PUSH", "2");
  g_push = 2;
  one_gemm_with("W8A8_TP_AG_SCALES", "1", &g_scales, 2);
  g_push = 0;
  w8a8_dev_set("TP_AG_PUSH", NULL);
}
/* Push mode 2: the push's copies wait for the compute stream's pre-launch work (the peers'
 * packs, their scales), the same protocol otherwise. */
W8A8_TEST(tp_gpu_ag_one_gemm_push2_w2) { one_gemm_marked("W8A8_TP_AG_PUSH", "2", &g_push, 2, 2); }
/* The push's flags protocol across calls: a pull without W8A8_TP_AG_PUSH leaves the flags set (flags_dirty),
 * so the first call with it set must pull (and reset at its end), the next one push; unset again, pull; then
 * push modes 1 and 2 in turn. Every call's result checked (run_ag: exact int8, poisoned workspaces). Two ranks
 * on two GPUs. */
W8A8_TEST(tp_gpu_ag_push_transitions) {
  GPU_OR_SKIP();
  if (device_cc() != 90) SKIP("the one-launch all-gather GEMM needs the sm_90a kernel");
  if (tp_ndev() < 2) SKIP("the push needs ranks on two GPUs");
  REQUIRE(ref(), "no reference handle");
  env e;
  REQUIRE(env_open(&e, 2, 800, 256, 512), "could not create 2 ranks: %s", w8a8_last_error());
  tcase t;
  memset(&t, 0, sizeof t);
  t.in = W8A8_DTYPE_INT8, t.out = W8A8_DTYPE_BF16, t.sa_tok = 1, t.sb_chan = 1, t.bias = 1;
  t.M = 700, t.N = 256, t.K = 512, t.want_one = 1;
  /* env for each call, and whether it must push */
  static const struct { const char *env; int push; } seq[] = {{NULL, 0}, {"1", 0}, {"1", 1}, {"1", 1}, {NULL, 0},
                                                              {"1", 0},  {"1", 1}, {"2", 2}, {"1", 1}, {"2", 2}};
  for (int i = 0; i < (int)(sizeof seq / sizeof seq[0]) && !w8a8_test_failed(); i++) {
    if (seq[i].env) w8a8_dev_set("TP_AG_PUSH", seq[i].env);
    else w8a8_dev_set("TP_AG_PUSH", NULL);
    t.seed = 7100u + (uint64_t)i;
    run_ag(&e, &t);
    for (int j = 0; j < 2; j++)
      CHECK(w8a8_tp_gpu_last_ag_push(e.comm[j]) == seq[i].push, "call %d (W8A8_TP_AG_PUSH %s) rank %d: %s, expected %s",
            i, seq[i].env ? seq[i].env : "unset", j, w8a8_tp_gpu_last_ag_push(e.comm[j]) ? "pushed" : "pulled",
            seq[i].push ? "a push" : "a pull");
  }
  w8a8_dev_set("TP_AG_PUSH", NULL);
  env_close(&e);
}
W8A8_TEST(tp_gpu_ag_one_gemm_pieces_w2) { one_gemm_pieces(2); }
W8A8_TEST(tp_gpu_ag_one_gemm_pieces_w4) { one_gemm_pieces(4); }

/* w8a8_tp_ag_pieces (CPU only): the chunk table of the one-GEMM all-gather. Over ranks with random row
 * counts (empty ones included), split flags and piece counts: W..8 chunks in row order, each rank's
 * chunks contiguous and covering exactly its rows, one chunk for a rank not split (and for every rank
 * with pieces = 1), interior cuts on multiples of 128, never more pieces than a rank's token tiles
 * allow; then the TP = 2, 1024-token case by value. */
W8A8_TEST(tp_ag_pieces) {
  uint64_t seed = 77;
  for (int it = 0; it < 4000 && !w8a8_test_failed(); it++) {
    const int W = 1 + (int)(next(&seed) % 8), pieces = 1 + (int)(next(&seed) % 8);
    int64_t off[8], cnt[8], end[8];
    int split[8], rank[8];
    int64_t o = 0;
    for (int j = 0; j < W; j++) {
      const uint64_t k = next(&seed) % 5;
      cnt[j] = k == 0 ? 0 : k == 1 ? (int64_t)(next(&seed) % 130) : (int64_t)(next(&seed) % 2000);
      off[j] = o;
      o += cnt[j];
      split[j] = (int)(next(&seed) % 2);
    }
    const int n = w8a8_tp_ag_pieces(W, off, cnt, split, pieces, end, rank);
    CHECK(n >= W && n <= W8A8_MM_MAX_READY, "W=%d pieces=%d: %d chunks", W, pieces, n);
    if (pieces == 1) CHECK(n == W, "W=%d pieces=1: %d chunks", W, n);
    int i = 0, room = W8A8_MM_MAX_READY - W;
    for (int j = 0; j < W && !w8a8_test_failed(); j++) {
      int64_t at = off[j];
      const int i0 = i;
      for (; i < n && rank[i] == j; i++) {
        const int last = i + 1 == n || rank[i + 1] != j;
        CHECK(end[i] >= at && end[i] <= off[j] + cnt[j], "W=%d rank %d chunk %d ends at %lld", W, j, i, (long long)end[i]);
        CHECK(last || (end[i] > at && end[i] % 128 == 0), "W=%d rank %d chunk %d: inner cut at %lld", W, j, i,
              (long long)end[i]);
        at = end[i];
      }
      CHECK(i > i0 && at == off[j] + cnt[j], "W=%d rank %d: chunks %d..%d end at %lld, rows end at %lld", W, j, i0, i,
            (long long)at, (long long)(off[j] + cnt[j]));
      /* exactly min(pieces, the rank's token tiles, the room left) pieces of a split rank, in row order */
      const int64_t tiles = cnt[j] > 0 ? (off[j] + cnt[j] - 1) / 128 - off[j] / 128 + 1 : 1;
      int64_t want = split[j] ? (pieces < tiles ? pieces : tiles) : 1;
      if (want > 1 + room) want = 1 + room;
      room -= (int)(want - 1);
      CHECK(i - i0 == want, "W=%d rank %d: %d chunks, want %lld (split %d, %d pieces, %lld tiles)", W, j, i - i0,
            (long long)want, split[j], pieces, (long long)tiles);
      /* balanced: the pieces' token tiles (counting the partial ones at the rank's ends) differ by <= 1 */
      int64_t lo_t = INT64_MAX, hi_t = 0, at2 = off[j];
      for (int q = i0; q < i && cnt[j] > 0; q++) {
        const int64_t t = (end[q] - 1) / 128 - at2 / 128 + 1;
        lo_t = t < lo_t ? t : lo_t;
        hi_t = t > hi_t ? t : hi_t;
        at2 = end[q];
      }
      CHECK(cnt[j] == 0 || hi_t - lo_t <= 1, "W=%d rank %d: pieces of %lld..%lld token tiles", W, j, (long long)lo_t,
            (long long)hi_t);
    }
    CHECK(i == n, "W=%d: %d of %d chunks walked", W, i, n);
  }
  const int64_t off[2] = {0, 512}, cnt[2] = {512, 512};
  const int split[2] = {0, 1};
  int64_t end[8];
  int rank[8];
  const int n = w8a8_tp_ag_pieces(2, off, cnt, split, 4, end, rank);
  CHECK(n == 5 && end[0] == 512 && end[1] == 640 && end[2] == 768 && end[3] == 896 && end[4] == 1024 && rank[0] == 0 &&
            rank[4] == 1,
        "TP = 2, 1024 tokens, 4 pieces: %d chunks", n);
  /* a rank that starts off a tile edge: rows 1000..1999 span 9 tiles (7..15) -> cuts at 1280 and 1664 */
  const int64_t off2[2] = {0, 1000}, cnt2[2] = {1000, 1000};
  const int n2 = w8a8_tp_ag_pieces(2, off2, cnt2, split, 3, end, rank);
  CHECK(n2 == 4 && end[0] == 1000 && end[1] == 1280 && end[2] == 1664 && end[3] == 2000, "rows 1000..1999 in 3: %d "
        "chunks, cuts %lld %lld", n2, (long long)end[1], (long long)end[2]);
}

/* ---- CUDA graph: every rank's fused calls captured into ONE graph, replayed on new inputs ---- */

typedef struct graph_rank {
  rank_call ag, rs;
} graph_rank;
static void *graph_rank_main(void *v) {
  graph_rank *g = v;
  rank_main(&g->ag);
  if (g->ag.st == W8A8_SUCCESS) rank_main(&g->rs);
  return NULL;
}

static int g_graph_scales2; /* the captured all-gather's scale push checked: 2 (W8A8_TP_AG_SCALES=2) it pushed, 1 (=1,
                             * the captured calls copy) it did not */
W8A8_TEST(tp_gpu_graph_capture) {
  GPU_OR_SKIP();
  REQUIRE(ref(), "no reference handle");
  const int W = 2;
  const int64_t M = 40, N = 24, K = 32;
  env e;
  REQUIRE(env_open(&e, W, M, N, K), "ranks: %s", w8a8_last_error());
  /* per rank: a (AG: its rows; RS: all rows of its K shard), scales, B, out */
  int64_t Mr[2], off[2];
  for (int r = 0; r < W; r++) w8a8_tp_shard_rows(M, W, r, &off[r], &Mr[r]);
  uint8_t *ha[2], *hb[2];
  float *hsa[2], *hsb[2];
  void *da[2], *db[2], *dsa[2], *dsb[2], *dag[2], *drs[2];
  graph_rank G[2];
  for (int r = 0; r < W; r++) {
    ha[r] = malloc((size_t)(M * K)), hb[r] = malloc((size_t)(N * K));
    hsa[r] = malloc(sizeof(float) * (size_t)M), hsb[r] = malloc(sizeof(float) * (size_t)N);
    REQUIRE(ha[r] && hb[r] && hsa[r] && hsb[r], "out of memory");
    fill_q8(hb[r], N * K, W8A8_DTYPE_INT8, mix(9, 1, (uint64_t)r));
    fill_f32(hsb[r], N, 0.5f, 2.0f, mix(9, 2, (uint64_t)r));
    use_dev(e.dev[r]);
    da[r] = poison_dev((size_t)(M * K)), db[r] = dup_dev(hb[r], (size_t)(N * K));
    dsa[r] = poison_dev(sizeof(float) * (size_t)M), dsb[r] = dup_dev(hsb[r], sizeof(float) * (size_t)N);
    dag[r] = poison_dev(2 * (size_t)(M * N)), drs[r] = poison_dev(4 * (size_t)(Mr[r] * N));
    REQUIRE(da[r] && db[r] && dsa[r] && dsb[r] && dag[r] && drs[r], "device allocation failed");
    memset(&G[r], 0, sizeof G[r]);
    rank_call *c = &G[r].ag;
    c->comm = e.comm[r], c->dev = e.dev[r], c->ag = 1, c->opt = (w8a8_tp_options)W8A8_TP_OPTIONS_INIT;
    c->opt.overlap = W8A8_TP_OVERLAP_ON;
    /* AG: this rank's rows are the first Mr[r] rows of its a buffer */
    c->A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, Mr[r], K, K, da[r]);
    c->B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, db[r]);
    c->SA = w8a8_vector_make(W8A8_DTYPE_FP32, Mr[r], dsa[r]);
    c->SB = w8a8_vector_make(W8A8_DTYPE_FP32, N, dsb[r]);
    c->O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, dag[r]);
    rank_call *d = &G[r].rs;
    *d = *c;
    d->ag = 0;
    d->A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K, K, da[r]);
    d->SA = w8a8_vector_make(W8A8_DTYPE_FP32, M, dsa[r]);
    d->O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, Mr[r], N, N, drs[r]);
  }
  /* s0 and fork on device 0; join[r] on rank r's device (an event is recorded only on a stream
   * of its own device; waiting on another device's event is allowed). With ranks on two GPUs
   * the graph spans both devices. */
  cudaStream_t s0;
  cudaEvent_t fork, join[2];
  use_dev(0);
  REQUIRE(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking) == cudaSuccess, "stream");
  cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  for (int r = 0; r < W; r++) {
    use_dev(e.dev[r]);
    cudaEventCreateWithFlags(&join[r], cudaEventDisableTiming);
  }
  use_dev(0);
  REQUIRE(cudaStreamBeginCapture(s0, cudaStreamCaptureModeRelaxed) == cudaSuccess, "begin capture");
  cudaEventRecord(fork, s0);
  for (int r = 0; r < W; r++) cudaStreamWaitEvent(e.st[r], fork, 0);
  run_threads(graph_rank_main, G, sizeof G[0], W);
  for (int r = 0; r < W; r++) {
    use_dev(e.dev[r]);
    cudaEventRecord(join[r], e.st[r]);
    use_dev(0);
    cudaStreamWaitEvent(s0, join[r], 0);
  }
  cudaGraph_t graph = NULL;
  cudaError_t ce = cudaStreamEndCapture(s0, &graph);
  for (int r = 0; r < W; r++)
    CHECK(G[r].ag.st == W8A8_SUCCESS && G[r].rs.st == W8A8_SUCCESS, "rank %d during capture: AG %s %s; RS %s %s", r,
          w8a8_status_name(G[r].ag.st), G[r].ag.msg, w8a8_status_name(G[r].rs.st), G[r].rs.msg);
  for (int r = 0; r < W && g_graph_scales2; r++) { /* the captured all-gather pushed its scales (=2, peer access) */
    const int want = g_graph_scales2 == 2 && Mr[r] > 0 && w8a8_tp_gpu_peer_on(e.dev[0], e.dev[1]) &&
                     w8a8_tp_gpu_peer_on(e.dev[1], e.dev[0]);
    CHECK(w8a8_tp_gpu_last_ag_scales(e.comm[r]) == want, "rank %d: the captured all-gather %s its scales, expected %s",
          r, w8a8_tp_gpu_last_ag_scales(e.comm[r]) ? "pushed" : "did not push", want ? "a push" : "none");
  }
  REQUIRE(ce == cudaSuccess && graph, "end capture: %s", cudaGetErrorString(ce));
  cudaGraphExec_t exec = NULL;
  REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess, "instantiate");
  uint16_t *got = malloc(2 * (size_t)(M * N));
  float *gotr = malloc(4 * (size_t)(M * N)), *p = malloc(4 * (size_t)(M * N)), *sum = malloc(4 * (size_t)(M * N));
  uint16_t *want = malloc(2 * (size_t)(M * N));
  uint8_t *afull = malloc((size_t)(M * K));
  float *safull = malloc(4 * (size_t)M);
  REQUIRE(got && gotr && p && sum && want && afull && safull, "out of memory");
  for (int rep = 0; rep < 3 && !w8a8_test_failed(); rep++) {
    /* new inputs for every replay: AG rows of each rank = its first Mr rows; RS: all M rows */
    for (int r = 0; r < W; r++) {
      fill_q8(ha[r], M * K, W8A8_DTYPE_INT8, mix(10 + (uint64_t)rep, 3, (uint64_t)r));
      fill_f32(hsa[r], M, 1e-3f, 4e-3f, mix(10 + (uint64_t)rep, 4, (uint64_t)r));
      use_dev(e.dev[r]);
      cudaMemcpy(da[r], ha[r], (size_t)(M * K), cudaMemcpyHostToDevice);
      cudaMemcpy(dsa[r], hsa[r], sizeof(float) * (size_t)M, cudaMemcpyHostToDevice);
      cudaMemset(dag[r], POISON, 2 * (size_t)(M * N));
      cudaMemset(drs[r], POISON, 4 * (size_t)(Mr[r] * N));
      memcpy(afull + off[r] * K, ha[r], (size_t)(Mr[r] * K));
      memcpy(safull + off[r], hsa[r], sizeof(float) * (size_t)Mr[r]);
    }
    /* s0 is non-blocking: it does not wait for the legacy-stream uploads and memsets above */
    REQUIRE(sync_all() == cudaSuccess, "uploads before replay %d", rep);
    REQUIRE(cudaGraphLaunch(exec, s0) == cudaSuccess, "launch");
    REQUIRE(cudaStreamSynchronize(s0) == cudaSuccess, "replay %d: %s", rep, cudaGetErrorString(cudaGetLastError()));
    REQUIRE(sync_all() == cudaSuccess, "replay %d (every device)", rep);
    for (int r = 0; r < W; r++) {
      /* AG reference */
      w8a8_matrix AF = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K, K, afull);
      w8a8_matrix BH = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, hb[r]);
      w8a8_vector SAF = w8a8_vector_make(W8A8_DTYPE_FP32, M, safull), SBH = w8a8_vector_make(W8A8_DTYPE_FP32, N, hsb[r]);
      w8a8_matrix OR = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, want);
      REQUIRE_OK(w8a8_scaled_mm(ref(), &AF, &BH, &SAF, &SBH, NULL, NULL, &OR));
      use_dev(e.dev[r]);
      cudaMemcpy(got, dag[r], 2 * (size_t)(M * N), cudaMemcpyDeviceToHost);
      CHECK(memcmp(got, want, 2 * (size_t)(M * N)) == 0, "replay %d rank %d: all-gather output differs", rep, r);
    }
    /* RS reference: ordered sum of the ranks' fp32 partials */
    for (int j = 0; j < W; j++) {
      w8a8_matrix AH = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K, K, ha[j]);
      w8a8_matrix BH = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, hb[j]);
      w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, M, hsa[j]), SB = w8a8_vector_make(W8A8_DTYPE_FP32, N, hsb[j]);
      w8a8_matrix PO = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, p);
      REQUIRE_OK(w8a8_scaled_mm(ref(), &AH, &BH, &SA, &SB, NULL, NULL, &PO));
      for (int64_t i = 0; i < M * N; i++) sum[i] = j == 0 ? p[i] : sum[i] + p[i];
    }
    for (int r = 0; r < W; r++) {
      use_dev(e.dev[r]);
      cudaMemcpy(gotr, drs[r], 4 * (size_t)(Mr[r] * N), cudaMemcpyDeviceToHost);
      CHECK(memcmp(gotr, sum + off[r] * N, 4 * (size_t)(Mr[r] * N)) == 0, "replay %d rank %d: reduce-scatter differs",
            rep, r);
    }
  }
  use_dev(0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s0);
  cudaEventDestroy(fork);
  for (int r = 0; r < W; r++) {
    use_dev(e.dev[r]);
    cudaEventDestroy(join[r]);
    free(ha[r]), free(hb[r]), free(hsa[r]), free(hsb[r]);
    cudaFree(da[r]), cudaFree(db[r]), cudaFree(dsa[r]), cudaFree(dsb[r]), cudaFree(dag[r]), cudaFree(drs[r]);
  }
  use_dev(0);
  free(got), free(gotr), free(p), free(sum), free(want), free(afull), free(safull);
  env_close(&e);
}
/* The same with W8A8_TP_AG_SCALES=1 at creation (also the default): captured calls copy the
 * peers' scales (ag_scales_push is for eager calls only), with the same results. */
/* tp_gpu_graph_capture with W8A8_TP_AG_SCALES=val at creation and the captured push checked (check: g_graph_scales2) */
static void graph_capture_scales(const char *val, int check) {
  w8a8_dev_set("TP_AG_SCALES", val);
  g_graph_scales2 = check;
  test_tp_gpu_graph_capture();
  g_graph_scales2 = 0;
  w8a8_dev_set("TP_AG_SCALES", NULL);
}
W8A8_TEST(tp_gpu_graph_capture_scales) { graph_capture_scales("1", 1); }
/* W8A8_TP_AG_SCALES=2 (opt-in): captured calls push the scales too. Every replay has new
 * scales (the test's inputs change per replay), so a scale not pushed, or pushed by a stale pointer, fails the
 * reference; and the captured all-gather took the push (w8a8_tp_gpu_last_ag_scales after the capture). */
W8A8_TEST(tp_gpu_graph_capture_scales2) { graph_capture_scales("2", 2); }

/* A fused call that fails after its side stream forked from the caller's stream must join it
 * before returning: else the caller's capture cannot even be ended (cudaStreamEndCapture:
 * cudaErrorStreamCaptureUnjoined) and, eagerly, a synchronisation of the caller's stream would not
 * cover the copies still running. The failure: an injected one in each rank's first GEMM (TP_FAULT_GEMM),
 * which comes after the fork in both operations; a failure after the agreement breaks the group. */
W8A8_TEST(tp_gpu_failure_joins_side_stream) {
  GPU_OR_SKIP();
  const int W = 2;
  const int64_t M = 40, N = 32, K = 32;
  for (int ag = 1; ag >= 0 && !w8a8_test_failed(); ag--) {
    env e;
    REQUIRE(env_open(&e, W, M, N, K), "ranks: %s", w8a8_last_error());
    rank_call c[2];
    void *d[2][5];
    memset(d, 0, sizeof d);
    for (int r = 0; r < W; r++) {
      w8a8_tp_test_inject_fault(e.comm[r], TP_FAULT_GEMM);
      int64_t off, Mr;
      w8a8_tp_shard_rows(M, W, r, &off, &Mr);
      use_dev(e.dev[r]);
      d[r][0] = poison_dev((size_t)(M * K)), d[r][1] = poison_dev((size_t)(N * K));
      const float one = 1.0f;
      d[r][2] = dup_dev(&one, sizeof one), d[r][3] = dup_dev(&one, sizeof one);
      d[r][4] = poison_dev(2 * (size_t)(M * N));
      for (int i = 0; i < 5; i++) REQUIRE(d[r][i], "device allocation failed");
      memset(&c[r], 0, sizeof c[r]);
      c[r].comm = e.comm[r], c[r].dev = e.dev[r], c[r].ag = ag, c[r].opt = (w8a8_tp_options)W8A8_TP_OPTIONS_INIT;
      c[r].opt.overlap = W8A8_TP_OVERLAP_ON;
      c[r].A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, ag ? Mr : M, K, K, d[r][0]);
      c[r].B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, d[r][1]);
      c[r].SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, d[r][2]);
      c[r].SB = w8a8_vector_make(W8A8_DTYPE_FP32, 1, d[r][3]);
      c[r].O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, ag ? M : Mr, N, N, d[r][4]);
    }
    REQUIRE(sync_all() == cudaSuccess, "uploads");
    /* one capture over every rank's stream, as tp_gpu_graph_capture */
    cudaStream_t s0;
    cudaEvent_t fork, join[2];
    use_dev(0);
    REQUIRE(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking) == cudaSuccess, "stream");
    cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
    for (int r = 0; r < W; r++) {
      use_dev(e.dev[r]);
      cudaEventCreateWithFlags(&join[r], cudaEventDisableTiming);
    }
    use_dev(0);
    REQUIRE(cudaStreamBeginCapture(s0, cudaStreamCaptureModeRelaxed) == cudaSuccess, "begin capture");
    cudaEventRecord(fork, s0);
    for (int r = 0; r < W; r++) cudaStreamWaitEvent(e.st[r], fork, 0);
    run_ranks(c, W);
    for (int r = 0; r < W; r++) {
      use_dev(e.dev[r]);
      cudaEventRecord(join[r], e.st[r]);
      use_dev(0);
      cudaStreamWaitEvent(s0, join[r], 0);
    }
    cudaGraph_t graph = NULL;
    cudaError_t ce = cudaStreamEndCapture(s0, &graph);
    for (int r = 0; r < W; r++)
      CHECK(c[r].st != W8A8_SUCCESS, "%s rank %d: the injected GEMM failure did not fail the call",
            ag ? "all-gather" : "reduce-scatter", r);
    CHECK(c[0].st == W8A8_ERROR_DEVICE || c[1].st == W8A8_ERROR_DEVICE,
          "%s: no rank failed in its GEMM (the failure this test needs after the fork): %s / %s",
          ag ? "all-gather" : "reduce-scatter", c[0].msg, c[1].msg);
    CHECK(ce == cudaSuccess, "%s: the failed calls left their side streams unjoined: cudaStreamEndCapture: %s",
          ag ? "all-gather" : "reduce-scatter", cudaGetErrorString(ce));
    /* a failure after the agreement broke the group: every rank's next call fails at once, enqueueing nothing */
    run_ranks(c, W);
    for (int r = 0; r < W; r++)
      CHECK(c[r].st == W8A8_ERROR_BROKEN, "%s rank %d: a call after the failure: %s %s",
            ag ? "all-gather" : "reduce-scatter", r, w8a8_status_name(c[r].st), c[r].msg);
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    cudaStreamDestroy(s0);
    cudaEventDestroy(fork);
    for (int r = 0; r < W; r++) {
      use_dev(e.dev[r]);
      cudaEventDestroy(join[r]);
      for (int i = 0; i < 5; i++) cudaFree(d[r][i]);
    }
    use_dev(0);
    env_close(&e);
  }
}

/* ---- bad input ------------------------------------------------------------------------------- */

/* A small valid all-gather for W ranks; mutate one rank, then check every rank's status. */
typedef struct small_ag {
  rank_call c[MAXW];
  void *d[MAXW][5];
} small_ag;

static int small_ag_init(small_ag *s, env *e, int64_t M, int64_t N, int64_t K) {
  memset(s, 0, sizeof *s);
  for (int r = 0; r < e->W; r++) {
    int64_t o, Mr;
    w8a8_tp_shard_rows(M, e->W, r, &o, &Mr);
    void **d = s->d[r];
    use_dev(e->dev[r]); /* rank r's buffers on rank r's device */
    s->c[r].dev = e->dev[r];
    d[0] = poison_dev((size_t)(M * K) + 64);
    d[1] = poison_dev((size_t)(N * K) + 64);
    d[2] = poison_dev(4 * (size_t)M + 64);
    d[3] = poison_dev(4 * (size_t)N + 64);
    d[4] = poison_dev(2 * (size_t)(M * N) + 64);
    for (int i = 0; i < 5; i++)
      if (!d[i]) return 0;
    cudaMemset(d[2], 0x3c, 4 * (size_t)M); /* valid positive scales */
    cudaMemset(d[3], 0x3c, 4 * (size_t)N);
    if (cudaDeviceSynchronize() != cudaSuccess) return 0; /* legacy-stream memsets vs non-blocking rank streams */
    rank_call *c = &s->c[r];
    c->comm = e->comm[r], c->dev = e->dev[r], c->ag = 1, c->opt = (w8a8_tp_options)W8A8_TP_OPTIONS_INIT;
    c->opt.overlap = W8A8_TP_OVERLAP_ON; /* (the schedule these tests were written for; AUTO: tp_gpu_overlap_auto) */
    c->A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, Mr, K, K, d[0]);
    c->B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, d[1]);
    c->SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, d[2]);
    c->SB = w8a8_vector_make(W8A8_DTYPE_FP32, 1, d[3]);
    c->O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, d[4]);
  }
  use_dev(0);
  return 1;
}
static int small_untouched(small_ag *s, int W, int64_t M, int64_t N) {
  uint8_t *h = malloc(2 * (size_t)(M * N) + 1);
  int ok = h != NULL;
  for (int r = 0; r < W && ok; r++) {
    use_dev(s->c[r].dev);
    cudaMemcpy(h, s->d[r][4], 2 * (size_t)(M * N), cudaMemcpyDeviceToHost);
    for (int64_t i = 0; i < 2 * M * N; i++) ok &= h[i] == POISON;
  }
  free(h);
  use_dev(0);
  return ok;
}
static void small_free(small_ag *s, int W) {
  for (int r = 0; r < W; r++) {
    use_dev(s->c[r].dev);
    for (int i = 0; i < 5; i++)
      if (s->d[r][i]) cudaFree(s->d[r][i]);
  }
  use_dev(0);
}

W8A8_TEST(tp_gpu_bad_input) {
  GPU_OR_SKIP();
  const int W = 3;
  const int64_t M = 12, N = 16, K = 32;
  env e;
  REQUIRE(env_open(&e, W, M, N, K), "ranks: %s", w8a8_last_error());
  small_ag s;
  REQUIRE(small_ag_init(&s, &e, M, N, K), "device allocation failed");
  /* the valid call works */
  run_ranks(s.c, W);
  for (int r = 0; r < W; r++) CHECK(s.c[r].st == W8A8_SUCCESS, "valid call, rank %d: %s", r, s.c[r].msg);
  sync_all();
  for (int r = 0; r < W; r++) {
    use_dev(e.dev[r]);
    cudaMemset(s.d[r][4], POISON, 2 * (size_t)(M * N));
  }
  sync_all();

  /* K differs on rank 0: COMM_MISMATCH on every rank, nothing written */
  small_ag t = s;
  t.c[0].A.cols = t.c[0].B.rows = K - 1;
  run_ranks(t.c, W);
  for (int r = 0; r < W; r++)
    CHECK(t.c[r].st == W8A8_ERROR_COMM_MISMATCH && strstr(t.c[r].msg, "K"), "K mismatch, rank %d: %s %s", r,
          w8a8_status_name(t.c[r].st), t.c[r].msg);
  /* the layer's M differs on the last rank */
  t = s;
  t.c[W - 1].O.rows = M - 1;
  run_ranks(t.c, W);
  for (int r = 0; r < W; r++)
    CHECK(t.c[r].st == W8A8_ERROR_COMM_MISMATCH, "M mismatch, rank %d: %s %s", r, w8a8_status_name(t.c[r].st),
          t.c[r].msg);
  /* overlap on some ranks only */
  t = s;
  t.c[1].opt.overlap = 0;
  run_ranks(t.c, W);
  for (int r = 0; r < W; r++)
    CHECK(t.c[r].st == W8A8_ERROR_COMM_MISMATCH && strstr(t.c[r].msg, "overlap"), "overlap, rank %d: %s", r,
          t.c[r].msg);
  /* partials outside {FP32, OUT}: INVALID_VALUE on every rank (each checks its own), naming it */
  for (int v = -1; v <= 2; v += 3) {
    t = s;
    for (int r = 0; r < W; r++) t.c[r].opt.partials = v;
    run_ranks(t.c, W);
    for (int r = 0; r < W; r++)
      CHECK(t.c[r].st == W8A8_ERROR_INVALID_VALUE && strstr(t.c[r].msg, "opts->partials"), "partials %d, rank %d: %s %s",
            v, r, w8a8_status_name(t.c[r].st), t.c[r].msg);
  }
  /* the reduce-scatter (the same buffers: a [M, K] on every rank, out this rank's rows) with partials
   * on some ranks only: COMM_MISMATCH naming it on every rank, fused and unfused */
  for (int ov = 0; ov < 2; ov++) {
    t = s;
    for (int r = 0; r < W; r++) {
      int64_t o, Mr;
      w8a8_tp_shard_rows(M, W, r, &o, &Mr);
      t.c[r].ag = 0;
      t.c[r].A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K, K, s.d[r][0]);
      t.c[r].O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, Mr, N, N, s.d[r][4]);
      t.c[r].opt.overlap = ov;
      t.c[r].opt.partials = r == 1 ? W8A8_TP_PARTIALS_OUT : W8A8_TP_PARTIALS_FP32;
    }
    run_ranks(t.c, W);
    for (int r = 0; r < W; r++)
      CHECK(t.c[r].st == W8A8_ERROR_COMM_MISMATCH && strstr(t.c[r].msg, "opts->partials"),
            "partials mismatch (overlap %d), rank %d: %s %s", ov, r, w8a8_status_name(t.c[r].st), t.c[r].msg);
  }
  /* shards that do not add up to M */
  t = s;
  t.c[0].A.rows -= 1;
  t.c[0].SA.len = 1;
  run_ranks(t.c, W);
  for (int r = 0; r < W; r++)
    CHECK(t.c[r].st == W8A8_ERROR_INVALID_SHAPE, "shards, rank %d: %s %s", r, w8a8_status_name(t.c[r].st), t.c[r].msg);
  /* a host pointer on rank 1: INVALID_POINTER there, COMM_MISMATCH naming rank 1 elsewhere */
  static uint8_t host_rows[4096];
  t = s;
  t.c[1].A.data = host_rows;
  run_ranks(t.c, W);
  CHECK(t.c[1].st == W8A8_ERROR_INVALID_POINTER, "host pointer: %s %s", w8a8_status_name(t.c[1].st), t.c[1].msg);
  for (int r = 0; r < W; r++)
    if (r != 1)
      CHECK(t.c[r].st == W8A8_ERROR_COMM_MISMATCH && strstr(t.c[r].msg, "rank 1"), "rank %d: %s %s", r,
            w8a8_status_name(t.c[r].st), t.c[r].msg);
  /* a call larger than the reserved workspace: WORKSPACE on every rank */
  small_ag big;
  REQUIRE(small_ag_init(&big, &e, 2 * M, N, K), "device allocation failed");
  run_ranks(big.c, W);
  for (int r = 0; r < W; r++)
    CHECK(big.c[r].st == W8A8_ERROR_WORKSPACE || big.c[r].st == W8A8_ERROR_COMM_MISMATCH, "workspace, rank %d: %s", r,
          w8a8_status_name(big.c[r].st));
  CHECK(big.c[0].st == W8A8_ERROR_WORKSPACE, "workspace: %s", big.c[0].msg);
  small_free(&big, W);
  sync_all();
  CHECK(small_untouched(&s, W, M, N), "an output was written by a failed call");
  /* the communicator still works after all those failures; the all-gather ignores partials (ranks
   * may differ there) */
  t = s;
  t.c[0].opt.partials = W8A8_TP_PARTIALS_OUT;
  run_ranks(t.c, W);
  for (int r = 0; r < W; r++) CHECK(t.c[r].st == W8A8_SUCCESS, "valid call after errors, rank %d: %s", r, t.c[r].msg);
  sync_all();

  /* Handles that force the sm_90a kernel, and on rank 1 a B that kernel cannot take (a base one byte
   * off 16): refused before the agreement, because a refusal in the schedule, after the peers have
   * committed, would leave the NCCL transport's peers waiting for ever (and break the group here). So UNSUPPORTED_DEVICE on rank 1 saying why, COMM_MISMATCH naming rank 1 elsewhere,
   * nothing written, and the communicator still works afterwards, still forced. */
  w8a8_handle_info hi;
  REQUIRE_OK(w8a8_get_info(e.h[0], &hi));
  if (hi.cc_major == 9 && hi.cc_minor == 0) {
    for (int r = 0; r < W; r++) REQUIRE_OK(w8a8_set_kernel(e.h[r], W8A8_KERNEL_SM90));
    t = s;
    run_ranks(t.c, W);
    const int built = !(t.c[0].st == W8A8_ERROR_UNSUPPORTED_DEVICE && strstr(t.c[0].msg, "without sm_90a"));
    for (int r = 0; r < W && built; r++)
      CHECK(t.c[r].st == W8A8_SUCCESS, "forced sm90, valid call, rank %d: %s", r, t.c[r].msg);
    sync_all();
    for (int r = 0; r < W && built; r++) {
      use_dev(e.dev[r]);
      cudaMemset(s.d[r][4], POISON, 2 * (size_t)(M * N));
    }
    sync_all();
    t = s;
    t.c[1].B.data = (uint8_t *)s.d[1][1] + 1;
    run_ranks(t.c, W);
    for (int r = 0; r < W && built; r++) {
      if (r == 1)
        CHECK(t.c[r].st == W8A8_ERROR_UNSUPPORTED_DEVICE && strstr(t.c[r].msg, "forces") &&
                  strstr(t.c[r].msg, "16-byte aligned B"),
              "forced sm90, misaligned B on rank 1: %s %s", w8a8_status_name(t.c[r].st), t.c[r].msg);
      else
        CHECK(t.c[r].st == W8A8_ERROR_COMM_MISMATCH && strstr(t.c[r].msg, "rank 1"),
              "forced sm90, misaligned B on rank 1, rank %d: %s %s", r, w8a8_status_name(t.c[r].st), t.c[r].msg);
    }
    sync_all();
    if (built) CHECK(small_untouched(&s, W, M, N), "a forced call refused on rank 1 wrote an output");
    /* K = 0 on every rank: the chunk GEMMs still launch (out = 0 + bias), and the forced kernel takes no
     * K = 0: refused on every rank before the agreement, nothing written */
    t = s;
    for (int r = 0; r < W; r++) t.c[r].A.cols = t.c[r].B.rows = 0;
    run_ranks(t.c, W);
    for (int r = 0; r < W && built; r++)
      CHECK(t.c[r].st == W8A8_ERROR_UNSUPPORTED_DEVICE && strstr(t.c[r].msg, "forces"), "forced sm90, K = 0, rank %d: %s %s",
            r, w8a8_status_name(t.c[r].st), t.c[r].msg);
    sync_all();
    if (built) CHECK(small_untouched(&s, W, M, N), "a forced call with K = 0 wrote an output");
    t = s;
    run_ranks(t.c, W);
    for (int r = 0; r < W && built; r++)
      CHECK(t.c[r].st == W8A8_SUCCESS, "forced sm90, valid call after a refusal, rank %d: %s", r, t.c[r].msg);
    sync_all();
    for (int r = 0; r < W; r++) REQUIRE_OK(w8a8_set_kernel(e.h[r], W8A8_KERNEL_AUTO));
  }

  /* wrong kinds */
  w8a8_handle *cpu = NULL;
  REQUIRE_OK(w8a8_create(&cpu, W8A8_DEVICE_CPU, 0));
  w8a8_comm *c1[2] = {(w8a8_comm *)(uintptr_t)1, (w8a8_comm *)(uintptr_t)1};
  w8a8_handle *hs[2] = {e.h[0], cpu};
  CHECK(w8a8_comm_create_local(c1, hs, 2) == W8A8_ERROR_UNSUPPORTED_DEVICE, "CPU handle: %s", w8a8_last_error());
  hs[1] = e.h[0];
  CHECK(w8a8_comm_create_local(c1, hs, 2) == W8A8_ERROR_INVALID_VALUE, "same handle twice: %s", w8a8_last_error());
  CHECK(w8a8_comm_create_local(c1, hs, 0) == W8A8_ERROR_INVALID_VALUE, "nranks 0");
  CHECK(w8a8_comm_create_local(NULL, hs, 1) == W8A8_ERROR_NULL_POINTER, "comms NULL");
  CHECK(c1[0] == (w8a8_comm *)(uintptr_t)1 && c1[1] == (w8a8_comm *)(uintptr_t)1, "comms written on failure");
  rank_call x = s.c[0];
  x.comm = (w8a8_comm *)e.h[0]; /* a handle passed as a communicator */
  rank_main(&x);
  CHECK(x.st == W8A8_ERROR_INVALID_COMM, "handle as comm: %s", w8a8_status_name(x.st));
  /* a GPU communicator cannot run a CPU handle's GEMMs: its handle is fixed at creation; an
   * MPI-only entry point with a GPU handle says so */
  w8a8_destroy(cpu);
  small_free(&s, W);
  env_close(&e);
  /* a destroyed communicator */
  rank_call y = x;
  y.comm = e.comm[0];
  rank_main(&y);
  CHECK(y.st == W8A8_ERROR_INVALID_COMM, "destroyed comm: %s", w8a8_status_name(y.st));
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A rank that never makes its call: the others fail after the timeout (W8A8_TP_TIMEOUT_S at creation,
 * here 1 s) with W8A8_ERROR_TIMEOUT, within twice it, instead of hanging; the late rank's call then fails
 * with TIMEOUT too (the group's break), and every later call with BROKEN. */
W8A8_TEST(tp_gpu_missing_rank_times_out) {
  GPU_OR_SKIP();
  w8a8_dev_set("TP_TIMEOUT_S", "1");
  env e;
  int ok = env_open(&e, 2, 8, 8, 8);
  w8a8_dev_set("TP_TIMEOUT_S", NULL);
  REQUIRE(ok, "ranks: %s", w8a8_last_error());
  double t = 0;
  REQUIRE_OK(w8a8_comm_get_timeout(e.comm[0], &t));
  CHECK(t == 1.0, "the timeout from W8A8_TP_TIMEOUT_S: %g", t);
  small_ag s;
  REQUIRE(small_ag_init(&s, &e, 8, 8, 8), "device allocation failed");
  const double t0 = now_s();
  rank_main(&s.c[0]); /* rank 1 never calls */
  const double dt = now_s() - t0;
  CHECK(s.c[0].st == W8A8_ERROR_TIMEOUT && strstr(s.c[0].msg, "1 of 2"), "missing rank: %s %s",
        w8a8_status_name(s.c[0].st), s.c[0].msg);
  CHECK(dt >= 0.9 && dt < 2.0, "TIMEOUT after %.2f s with a 1 s timeout", dt);
  rank_main(&s.c[1]); /* the late rank: the group is broken by a timeout */
  CHECK(s.c[1].st == W8A8_ERROR_TIMEOUT, "the late rank: %s %s", w8a8_status_name(s.c[1].st), s.c[1].msg);
  for (int r = 0; r < 2; r++) {
    rank_main(&s.c[r]);
    CHECK(s.c[r].st == W8A8_ERROR_BROKEN, "rank %d after the timeout: %s", r, w8a8_status_name(s.c[r].st));
  }
  CHECK(w8a8_comm_get_async_error(e.comm[0]) == W8A8_ERROR_TIMEOUT, "async error: %s", w8a8_last_error());
  CHECK(small_untouched(&s, 2, 8, 8), "an output was written");
  small_free(&s, 2);
  env_close(&e);
}

/* ---- failing safely: call numbers, broken groups, abort, W8A8_TP_OVERLAP_AUTO ---------------- */

/* A rank thread that makes `n` calls in turn (calls[0..n)); pre[i]: what to do before call i. */
enum { PRE_NONE, PRE_SKIP_HOOK, PRE_NULL_COMM };
typedef struct seq_thread {
  rank_call call;
  int n;
  int pre[4];
  w8a8_status st[4];
  char msg[4][512];
} seq_thread;
static void *seq_main(void *v) {
  seq_thread *t = v;
  for (int i = 0; i < t->n; i++) {
    rank_call c = t->call;
    if (t->pre[i] == PRE_SKIP_HOOK) w8a8_tp_test_inject_fault(c.comm, TP_FAULT_SKIP);
    if (t->pre[i] == PRE_NULL_COMM) c.comm = NULL;
    rank_main(&c);
    t->st[i] = c.st;
    snprintf(t->msg[i], sizeof t->msg[i], "%s", c.msg);
  }
  return NULL;
}

/* A rank that skipped a call (its call returned before the exchange, the hook; or it passed NULL for it)
 * and keeps calling: the peers' call pairs with its next one, and every rank fails with COMM_MISMATCH
 * (call numbers, or calls with an invalid communicator, differ) instead of returning rows of another
 * call; the group is broken for every later call. */
W8A8_TEST(tp_gpu_skipped_call_fails_every_rank) {
  GPU_OR_SKIP();
  for (int v = 0; v < 2; v++) {
    env e;
    REQUIRE(env_open(&e, 2, 8, 8, 8), "ranks: %s", w8a8_last_error());
    for (int r = 0; r < 2; r++) REQUIRE_OK(w8a8_comm_set_timeout(e.comm[r], 30));
    small_ag s;
    REQUIRE(small_ag_init(&s, &e, 8, 8, 8), "device allocation failed");
    run_ranks(s.c, 2); /* call 0 on both */
    for (int r = 0; r < 2; r++) CHECK(s.c[r].st == W8A8_SUCCESS, "call 0, rank %d: %s", r, s.c[r].msg);
    sync_all();
    for (int r = 0; r < 2; r++) {
      use_dev(e.dev[r]);
      cudaMemset(s.d[r][4], POISON, 2 * 8 * 8);
    }
    sync_all();
    seq_thread t[2];
    memset(t, 0, sizeof t);
    t[0].call = s.c[0], t[0].n = 2;                                 /* calls 1 and 2 */
    t[1].call = s.c[1], t[1].n = 2, t[1].pre[0] = v ? PRE_NULL_COMM : PRE_SKIP_HOOK; /* skips 1, makes 2 */
    run_threads(seq_main, t, sizeof t[0], 2);
    CHECK(t[1].st[0] == (v ? W8A8_ERROR_INVALID_COMM : W8A8_ERROR_INTERNAL), "v%d: the skipped call: %s", v,
          t[1].msg[0]);
    CHECK(t[0].st[0] == W8A8_ERROR_COMM_MISMATCH && strstr(t[0].msg[0], v ? "invalid communicator" : "at call"),
          "v%d: rank 0's call 1: %s %s", v, w8a8_status_name(t[0].st[0]), t[0].msg[0]);
    CHECK(t[1].st[1] == W8A8_ERROR_COMM_MISMATCH, "v%d: rank 1's call 2: %s %s", v, w8a8_status_name(t[1].st[1]),
          t[1].msg[1]);
    CHECK(t[0].st[1] == W8A8_ERROR_BROKEN, "v%d: rank 0's call 2: %s %s", v, w8a8_status_name(t[0].st[1]),
          t[0].msg[1]);
    sync_all();
    CHECK(small_untouched(&s, 2, 8, 8), "v%d: an output was written", v);
    small_free(&s, 2);
    env_close(&e);
  }
}

typedef struct abort_later_arg {
  w8a8_comm *c;
  double delay;
} abort_later_arg;
static void *abort_later(void *v) {
  abort_later_arg *a = v;
  struct timespec ts = {(time_t)a->delay, (long)((a->delay - (double)(time_t)a->delay) * 1e9)};
  nanosleep(&ts, NULL);
  w8a8_comm_abort(a->c);
  return NULL;
}

/* w8a8_comm_abort from another thread unblocks a waiting call (timeout 60 s): rank 0 waits in the agreement
 * for rank 1, which never calls. Aborting rank 0's communicator: its call returns ABORTED; aborting rank 1's
 * (the one not waiting): rank 0's call returns BROKEN. Well within a second either way; later calls fail at
 * once (ABORTED on the aborted rank, BROKEN elsewhere). */
W8A8_TEST(tp_gpu_abort_unblocks_waiting_call) {
  GPU_OR_SKIP();
  for (int who = 0; who < 2; who++) {
    env e;
    REQUIRE(env_open(&e, 2, 8, 8, 8), "ranks: %s", w8a8_last_error());
    for (int r = 0; r < 2; r++) REQUIRE_OK(w8a8_comm_set_timeout(e.comm[r], 60));
    small_ag s;
    REQUIRE(small_ag_init(&s, &e, 8, 8, 8), "device allocation failed");
    abort_later_arg a = {e.comm[who], 0.3};
    pthread_t th;
    REQUIRE(pthread_create(&th, NULL, abort_later, &a) == 0, "pthread_create");
    const double t0 = now_s();
    rank_main(&s.c[0]);
    const double dt = now_s() - t0;
    pthread_join(th, NULL);
    CHECK(s.c[0].st == (who == 0 ? W8A8_ERROR_ABORTED : W8A8_ERROR_BROKEN), "abort of rank %d: rank 0's call: %s %s",
          who, w8a8_status_name(s.c[0].st), s.c[0].msg);
    CHECK(dt < 2.0, "abort of rank %d: the waiting call took %.2f s", who, dt);
    for (int r = 0; r < 2; r++) {
      rank_main(&s.c[r]);
      CHECK(s.c[r].st == (r == who ? W8A8_ERROR_ABORTED : W8A8_ERROR_BROKEN), "abort of rank %d: rank %d later: %s",
            who, r, w8a8_status_name(s.c[r].st));
      const w8a8_status ae = w8a8_comm_get_async_error(e.comm[r]);
      CHECK(ae == (r == who ? W8A8_ERROR_ABORTED : W8A8_ERROR_BROKEN), "abort of rank %d: rank %d async error %s: %s",
            who, r, w8a8_status_name(ae), w8a8_last_error());
    }
    sync_all();
    CHECK(small_untouched(&s, 2, 8, 8), "an output was written");
    small_free(&s, 2);
    env_close(&e);
  }
}

/* W8A8_TP_OVERLAP_AUTO on the copy-engine group: unfused below the crossover (1024 rows), fused from it (set
 * here to the test's M), unfused on every rank where one rank's crossover is above M; the same bits every
 * time; NULL options are AUTO. */
W8A8_TEST(tp_gpu_overlap_auto) {
  GPU_OR_SKIP();
  const int W = 2;
  const int64_t M = 40, N = 32, K = 64;
  env e;
  REQUIRE(env_open(&e, W, M, N, K), "ranks: %s", w8a8_last_error());
  CHECK(w8a8_tp_crossover(e.comm[0], TP_OP_AG) == 1024 && w8a8_tp_crossover(e.comm[0], TP_OP_RS) == 1024,
        "copy-engine crossovers %lld %lld", (long long)w8a8_tp_crossover(e.comm[0], TP_OP_AG),
        (long long)w8a8_tp_crossover(e.comm[0], TP_OP_RS));
  small_ag s;
  REQUIRE(small_ag_init(&s, &e, M, N, K), "device allocation failed");
  for (int r = 0; r < W; r++) {
    use_dev(e.dev[r]);
    uint8_t *h = malloc((size_t)(M * K));
    REQUIRE(h, "malloc");
    fill_q8(h, M * K, W8A8_DTYPE_INT8, mix(7, (uint64_t)r, 1));
    cudaMemcpy(s.d[r][0], h, (size_t)(M * K), cudaMemcpyHostToDevice);
    fill_q8(h, N * K, W8A8_DTYPE_INT8, mix(8, (uint64_t)r, 2));
    cudaMemcpy(s.d[r][1], h, (size_t)(N * K), cudaMemcpyHostToDevice);
    free(h);
  }
  use_dev(0);
  uint16_t *want[MAXW] = {0}, *got = malloc(2 * (size_t)(M * N));
  REQUIRE(got, "malloc");
  const struct {
    int overlap; /* -1: NULL options */
    int64_t cross[MAXW];
    int fused;
  } runs[] = {{W8A8_TP_OVERLAP_ON, {1024, 1024}, 1},
              {W8A8_TP_OVERLAP_AUTO, {1024, 1024}, 0},
              {-1, {M, M}, 1},
              {W8A8_TP_OVERLAP_AUTO, {M, M + 1}, 0},
              {W8A8_TP_OVERLAP_OFF, {0, 0}, 0}};
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    small_ag t = s;
    for (int r = 0; r < W; r++) {
      w8a8_tp_set_crossover(e.comm[r], TP_OP_AG, runs[i].cross[r]);
      if (runs[i].overlap >= 0) t.c[r].opt.overlap = runs[i].overlap;
    }
    if (runs[i].overlap < 0) { /* NULL options: run the calls without opts */
      run_threads(null_opts_main, t.c, sizeof t.c[0], W);
    } else {
      run_ranks(t.c, W);
    }
    sync_all();
    for (int r = 0; r < W; r++) {
      CHECK(t.c[r].st == W8A8_SUCCESS, "run %zu rank %d: %s", i, r, t.c[r].msg);
      CHECK(w8a8_tp_last_fuse(e.comm[r]) == runs[i].fused, "run %zu rank %d: ran %s, want %s", i, r,
            w8a8_tp_last_fuse(e.comm[r]) ? "fused" : "unfused", runs[i].fused ? "fused" : "unfused");
      use_dev(e.dev[r]);
      if (i == 0) {
        want[r] = malloc(2 * (size_t)(M * N));
        REQUIRE(want[r], "malloc");
        cudaMemcpy(want[r], s.d[r][4], 2 * (size_t)(M * N), cudaMemcpyDeviceToHost);
      } else {
        cudaMemcpy(got, s.d[r][4], 2 * (size_t)(M * N), cudaMemcpyDeviceToHost);
        CHECK(!memcmp(got, want[r], 2 * (size_t)(M * N)), "run %zu rank %d: other bits than the fused run", i, r);
      }
    }
    use_dev(0);
  }
  for (int r = 0; r < W; r++) free(want[r]);
  free(got);
  small_free(&s, W);
  env_close(&e);
}

/* ---- block-scaled fp8 (w8a8_all_gather_scaled_mm_blockwise, w8a8_scaled_mm_reduce_scatter_blockwise) ---------- */

#define LL(x) ((long long)(x))

/* One rank's block-scaled call. */
typedef struct bw_call {
  w8a8_comm *comm;
  int dev, ag, has_bias;
  w8a8_matrix A, B, SA, SB, O;
  w8a8_vector BIAS;
  w8a8_tp_options opt;
  w8a8_status st;
  char msg[512];
} bw_call;
static void *bw_main(void *v) {
  bw_call *c = v;
  use_dev(c->dev);
  const w8a8_vector *bias = c->has_bias ? &c->BIAS : NULL;
  c->st = c->ag ? w8a8_all_gather_scaled_mm_blockwise(c->comm, &c->A, &c->B, &c->SA, &c->SB, bias, &c->O, &c->opt)
                : w8a8_scaled_mm_reduce_scatter_blockwise(c->comm, &c->A, &c->B, &c->SA, &c->SB, bias, &c->O, &c->opt);
  snprintf(c->msg, sizeof c->msg, "%s", w8a8_last_error());
  return NULL;
}
static void bw_run(bw_call *c, int W) { run_threads(bw_main, c, sizeof c[0], W); }

/* Host data of one rank's share: A [rows, K] (lda K), its group scales [rows, KB] (column-major on odd ranks: the
 * gather reads either layout), B [K, N] column-major (ldb K), scale_b [NB, KB] row-major. */
typedef struct bw_host {
  uint8_t *a, *b;
  float *sa, *sb;
  int64_t rows, K, KB, sa_col;
} bw_host;
static float bw_sa(const bw_host *h, int64_t m, int64_t kb) {
  return h->sa_col ? h->sa[kb * h->rows + m] : h->sa[m * h->KB + kb];
}
/* out[m][n] of one share as the header's formula in double, and the sum of |terms| for its bound. */
static void bw_ref(const bw_host *h, int64_t m, int64_t n, double *v, double *mag) {
  for (int64_t kb = 0; kb < h->KB; kb++) {
    double part = 0, pa = 0;
    for (int64_t k = kb * 128; k < h->K && k < kb * 128 + 128; k++) {
      const double x = w8a8_fp8_to_f32(h->a[m * h->K + k]), y = w8a8_fp8_to_f32(h->b[n * h->K + k]);
      part += x * y;
      pa += fabs(x * y);
    }
    const double sc = (double)bw_sa(h, m, kb) * h->sb[(n / 128) * h->KB + kb];
    *v += sc * part;
    *mag += sc * pa;
  }
}

/* The block-scaled fused calls on W ranks (all-gather: M_total rows over the ranks, skewed, every rank the same
 * weights; reduce-scatter: each rank a K shard of K_r = K / W + 128 r), unfused then fused: every rank's output
 * within the header's bound (2e-3 of the sum of |terms| plus the output's rounding) of a double-precision sum,
 * fused equal to unfused bit for bit, the all-gather's ranks equal to each other. */
static void bw_case(int W, int ag, int64_t M, int64_t N, int64_t K, w8a8_dtype od, int with_bias, int skew,
                    uint64_t seed) {
  env e;
  const int64_t NB = (N + 127) / 128;
  int64_t Kr[MAXW], off[MAXW], cnt[MAXW], kmax = 0;
  for (int r = 0; r < W; r++) {
    Kr[r] = ag ? K : K / W + 128 * r + (r == W - 1 ? 17 : 0);
    kmax = Kr[r] > kmax ? Kr[r] : kmax;
    cnt[r] = rows_of(M, W, r, skew);
    off[r] = offset_of(M, W, r, skew);
  }
  REQUIRE(env_open(&e, W, M, N, kmax), "communicator setup");
  const size_t es = w8a8_dtype_size(od);
  bw_host hs[MAXW];
  bw_call c[2][MAXW];
  void *dev_bufs[MAXW][6];
  uint8_t *got[2][MAXW];
  uint16_t *bias_h = malloc(4 * (size_t)N);
  REQUIRE(bias_h, "malloc");
  for (int64_t n = 0; n < N; n++) store_out(od, bias_h, n, (float)((int)(n % 7) - 3) * 0.25f);
  for (int r = 0; r < W; r++) {
    bw_host *h = &hs[r];
    h->rows = ag ? cnt[r] : M, h->K = Kr[r], h->KB = (Kr[r] + 127) / 128, h->sa_col = r % 2;
    h->a = malloc((size_t)(h->rows * h->K) + 1), h->b = malloc((size_t)(N * h->K) + 1);
    h->sa = malloc(4 * (size_t)(h->rows * h->KB) + 4), h->sb = malloc(4 * (size_t)(NB * h->KB));
    REQUIRE(h->a && h->b && h->sa && h->sb, "malloc");
    fill_q8(h->a, h->rows * h->K, W8A8_DTYPE_FP8_E4M3, mix(seed, r, 1));
    /* the all-gather's ranks share the weights; the reduce-scatter's hold their own K shard of them */
    fill_q8(h->b, N * h->K, W8A8_DTYPE_FP8_E4M3, mix(seed, ag ? 0 : r, 2));
    fill_f32(h->sa, h->rows * h->KB, 1e-3f, 4e-2f, mix(seed, r, 3));
    fill_f32(h->sb, NB * h->KB, 1e-3f, 4e-2f, mix(seed, ag ? 0 : r, 4));
    use_dev(e.dev[r]);
    const int64_t orows = ag ? M : cnt[r];
    dev_bufs[r][0] = dup_dev(h->a, (size_t)(h->rows * h->K));
    dev_bufs[r][1] = dup_dev(h->b, (size_t)(N * h->K));
    dev_bufs[r][2] = dup_dev(h->sa, 4 * (size_t)(h->rows * h->KB));
    dev_bufs[r][3] = dup_dev(h->sb, 4 * (size_t)(NB * h->KB));
    dev_bufs[r][4] = dup_dev(bias_h, es * (size_t)N);
    dev_bufs[r][5] = poison_dev(2 * es * (size_t)(orows * N)); /* the unfused output, then the fused one */
    for (int i = 0; i < 6; i++) REQUIRE(dev_bufs[r][i], "device allocation failed");
    for (int f = 0; f < 2; f++) {
      bw_call *x = &c[f][r];
      memset(x, 0, sizeof *x);
      x->comm = e.comm[r], x->dev = e.dev[r], x->ag = ag, x->has_bias = with_bias;
      x->A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, h->rows, h->K, h->K, dev_bufs[r][0]);
      x->B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, h->K, N, h->K, dev_bufs[r][1]);
      x->SA = h->sa_col ? w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_COL_MAJOR, h->rows, h->KB, h->rows > 0 ? h->rows : 1,
                                           dev_bufs[r][2])
                        : w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, h->rows, h->KB, h->KB, dev_bufs[r][2]);
      x->SB = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, NB, h->KB, h->KB, dev_bufs[r][3]);
      x->BIAS = w8a8_vector_make(od, N, dev_bufs[r][4]);
      x->O = w8a8_matrix_make(od, W8A8_ROW_MAJOR, orows, N, N, (char *)dev_bufs[r][5] + (size_t)f * es * (orows * N));
      const w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
      x->opt = o;
      x->opt.overlap = f ? W8A8_TP_OVERLAP_ON : W8A8_TP_OVERLAP_OFF;
    }
  }
  use_dev(0);
  for (int f = 0; f < 2 && !w8a8_test_failed(); f++) {
    bw_run(c[f], W);
    REQUIRE(sync_all() == cudaSuccess, "a kernel failed");
    for (int r = 0; r < W; r++)
      CHECK(c[f][r].st == W8A8_SUCCESS, "W %d %s M N K %lld %lld %lld %s, rank %d: %s", W, f ? "fused" : "unfused",
            LL(M), LL(N), LL(K), ag ? "all-gather" : "reduce-scatter", r, c[f][r].msg);
  }
  const double round_rel = od == W8A8_DTYPE_BF16 ? 1.0 / 256 : od == W8A8_DTYPE_FP16 ? 1.0 / 1024 : 1e-6;
  for (int r = 0; r < W && !w8a8_test_failed(); r++) {
    const int64_t orows = ag ? M : cnt[r], n_out = orows * N;
    for (int f = 0; f < 2; f++) {
      got[f][r] = malloc(es * (size_t)n_out + 1);
      REQUIRE(got[f][r], "malloc");
      use_dev(e.dev[r]);
      cudaMemcpy(got[f][r], (char *)dev_bufs[r][5] + (size_t)f * es * n_out, es * (size_t)n_out,
                 cudaMemcpyDeviceToHost);
    }
    CHECK(!memcmp(got[0][r], got[1][r], es * (size_t)n_out), "rank %d: fused and unfused differ", r);
    if (ag && r > 0) CHECK(!memcmp(got[1][r], got[1][0], es * (size_t)n_out), "rank %d: other bits than rank 0", r);
    int64_t bad = 0;
    for (int64_t m = 0; m < orows && (r == 0 || !ag); m++)
      for (int64_t n = 0; n < N; n++) {
        double v = 0, mag = 0;
        if (ag) { /* row m of the gathered layer: rank j's row m - off[j] */
          int j = 0;
          while (j < W - 1 && m >= off[j] + cnt[j]) j++;
          bw_ref(&hs[j], m - off[j], n, &v, &mag);
        } else {
          for (int j = 0; j < W; j++) bw_ref(&hs[j], off[r] + m, n, &v, &mag);
        }
        if (with_bias) v += load_out(od, bias_h, n);
        const double x = load_out(od, got[1][r], m * N + n);
        if (!(fabs(x - v) <= 2e-3 * mag + round_rel * fabs(v) + 1e-6) && bad++ < 5)
          CHECK(0, "W %d %s M N K %lld %lld %lld, rank %d: out[%lld][%lld] = %g, double-precision sum %g (bound %g)",
                W, ag ? "all-gather" : "reduce-scatter", LL(M), LL(N), LL(K), r, LL(m), LL(n), x, v,
                2e-3 * mag + round_rel * fabs(v));
      }
  }
  for (int r = 0; r < W; r++) {
    for (int f = 0; f < 2; f++) free(got[f][r]);
    use_dev(e.dev[r]);
    for (int i = 0; i < 6; i++) cudaFree(dev_bufs[r][i]);
    free(hs[r].a), free(hs[r].b), free(hs[r].sa), free(hs[r].sb);
  }
  use_dev(0);
  free(bias_h);
  env_close(&e);
}

W8A8_TEST(tp_gpu_blockwise) {
  GPU_OR_SKIP();
  if (w8a8_cuda_device_count() < 1 || device_cc() < 89) SKIP("fp8 needs compute capability 8.9");
  const uint64_t seed = (uint64_t)time(NULL);
  for (int W = 1; W <= 3 && !w8a8_test_failed(); W++) {
    bw_case(W, 1, 300, 384, 1000, W8A8_DTYPE_BF16, 1, 0, mix(seed, W, 11));
    bw_case(W, 1, 129, 200, 640, W8A8_DTYPE_FP32, 0, W > 1 ? 2 : 0, mix(seed, W, 12));
    bw_case(W, 0, 260, 384, 512 * W, W8A8_DTYPE_BF16, 1, 0, mix(seed, W, 13));
    bw_case(W, 0, 64, 130, 384 * W, W8A8_DTYPE_FP16, 0, 0, mix(seed, W, 14));
  }
}

/* A block-scaled call with a bad scale on one rank: refused there naming the argument, COMM_MISMATCH naming that
 * rank on the others, nothing written; the communicator then runs a valid call. */
W8A8_TEST(tp_gpu_blockwise_bad_scale) {
  GPU_OR_SKIP();
  if (w8a8_cuda_device_count() < 1 || device_cc() < 89) SKIP("fp8 needs compute capability 8.9");
  const int W = 2;
  const int64_t M = 64, N = 256, K = 256, KB = 2, NB = 2;
  env e;
  REQUIRE(env_open(&e, W, M, N, K), "communicator setup");
  uint8_t *ha = malloc((size_t)(M * K)), *hb = malloc((size_t)(N * K));
  float *hs = malloc(4 * (size_t)(M * KB));
  REQUIRE(ha && hb && hs, "malloc");
  fill_q8(ha, M * K, W8A8_DTYPE_FP8_E4M3, 1);
  fill_q8(hb, N * K, W8A8_DTYPE_FP8_E4M3, 2);
  fill_f32(hs, M * KB, 0.01f, 0.02f, 3);
  bw_call c[MAXW];
  void *d[MAXW][4];
  for (int r = 0; r < W; r++) {
    use_dev(e.dev[r]);
    d[r][0] = dup_dev(ha, (size_t)(M / 2 * K)), d[r][1] = dup_dev(hb, (size_t)(N * K));
    d[r][2] = dup_dev(hs, 4 * (size_t)(M * KB)), d[r][3] = poison_dev(2 * (size_t)(M * N));
    for (int i = 0; i < 4; i++) REQUIRE(d[r][i], "device allocation failed");
    memset(&c[r], 0, sizeof c[r]);
    c[r].comm = e.comm[r], c[r].dev = e.dev[r], c[r].ag = 1;
    c[r].A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M / 2, K, K, d[r][0]);
    c[r].B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, d[r][1]);
    /* rank 1: one group scale per row where ceil(K/128) = 2 are due */
    c[r].SA = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M / 2, r == 1 ? 1 : KB, r == 1 ? 1 : KB, d[r][2]);
    c[r].SB = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, NB, KB, KB, d[r][2]);
    c[r].O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, d[r][3]);
    const w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
    c[r].opt = o;
  }
  use_dev(0);
  bw_run(c, W);
  sync_all();
  CHECK(c[1].st == W8A8_ERROR_INVALID_SCALE && strstr(c[1].msg, "scale_a"), "rank 1: %s %s",
        w8a8_status_name(c[1].st), c[1].msg);
  CHECK(c[0].st == W8A8_ERROR_COMM_MISMATCH, "rank 0: %s %s", w8a8_status_name(c[0].st), c[0].msg);
  uint8_t *o = malloc(2 * (size_t)(M * N));
  REQUIRE(o, "malloc");
  for (int r = 0; r < W; r++) {
    use_dev(e.dev[r]);
    cudaMemcpy(o, d[r][3], 2 * (size_t)(M * N), cudaMemcpyDeviceToHost);
    int64_t touched = 0;
    for (int64_t i = 0; i < 2 * M * N; i++) touched += o[i] != POISON;
    CHECK(touched == 0, "rank %d: %lld output bytes written by a refused call", r, LL(touched));
  }
  c[1].SA = c[0].SA;
  use_dev(0);
  bw_run(c, W);
  sync_all();
  for (int r = 0; r < W; r++) CHECK(c[r].st == W8A8_SUCCESS, "the valid call after, rank %d: %s", r, c[r].msg);
  for (int r = 0; r < W; r++) {
    use_dev(e.dev[r]);
    for (int i = 0; i < 4; i++) cudaFree(d[r][i]);
  }
  use_dev(0);
  free(o), free(ha), free(hb), free(hs);
  env_close(&e);
}

#endif /* W8A8_HAVE_CUDA */
