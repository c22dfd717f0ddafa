/* bench_cuda.c — the GPU rows of `w8a8 bench`: our CUDA kernels and the cuBLASLt
 * baselines, timed side by side in one process (see tools/bench.h for the contract).
 *
 * Rows per (shape, M, dtype):
 *   cublaslt_bf16            bf16 x bf16 -> out dtype, the unquantized GEMM users compare with
 *   cublaslt_fp8_tensorwise  fp8 e4m3 with scalar A/B scales (what torch._scaled_mm tensorwise runs)
 *   cublaslt_fp8_outervec    fp8 with per-row x per-column scale vectors (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
 *                            token*channel mode only)
 *   cublaslt_int8            int8 IMMA, int32 out, no scaling at all (what torch._int_mm runs)
 *   w8a8_cuda                our w8a8_scaled_mm (AUTO: the Hopper path where it takes the input)
 *   w8a8_cuda_generic        our portable mma.sync kernel, forced (only when AUTO took another path)
 * Our rows report speedup = baseline_us / our_us against the cuBLASLt row doing the same job
 * (int8 -> cublaslt_int8; fp8 token*channel -> outervec; fp8 tensor -> tensorwise).
 *
 * Timing: a CUDA graph of cfg->iters calls (weights rotated over several copies so that
 * B is streamed from HBM, not L2), replayed 7 times: p20 / p50 / p80 of the replays, per call.
 * Verification: every timed row is checked on sampled rows of its output (first, middle,
 * last) against a host computation of the header's formulas: int8 bit for bit, fp8 within
 * 1 output ulp + 1e-3 * sum|sa sb a b|, bf16 within 1 ulp + 1e-3 * sum|a b|. */
#include "bench.h"

#ifdef W8A8_HAVE_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h" /* the exact host conversions (numeric.c) for verification */

#define REPS 7
#define MAX_ROT 64
#define LT_WS_BYTES ((size_t)64 << 20)

/* ---- small utilities --------------------------------------------------------------- */

static uint64_t brng = 0x243f6a8885a308d3ull;
static uint64_t next64(void) {
  brng ^= brng << 13;
  brng ^= brng >> 7;
  brng ^= brng << 17;
  return brng;
}
static float bfrand(float lo, float hi) { return lo + (hi - lo) * (float)(next64() >> 40) / 16777216.0f; }

/* Random operand bytes; fp8 without NaN encodings (0x7f / 0xff). */
static void fill_bytes(uint8_t *p, size_t n, int fp8) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = next64();
    memcpy(p + i, &v, 8);
  }
  for (; i < n; i++) p[i] = (uint8_t)next64();
  if (fp8)
    for (i = 0; i < n; i++)
      if ((p[i] & 0x7f) == 0x7f) p[i] ^= 1;
}

#define CU(call)                                                                                    \
  do {                                                                                              \
    cudaError_t e_ = (call);                                                                        \
    if (e_ != cudaSuccess) {                                                                        \
      fprintf(stderr, "bench_cuda: %s failed: %s (%s:%d)\n", #call, cudaGetErrorString(e_), __FILE__, \
              __LINE__);                                                                            \
      goto fail;                                                                                    \
    }                                                                                               \
  } while (0)

/* ---- timing: a graph of `iters` calls, replayed REPS times: percentiles of the replays ---- */

typedef int (*call_fn)(void *ctx, int i, cudaStream_t s); /* 0 on success; i selects the weight copy */

/* *us: p20 / p50 / p80 over the REPS replays of the time per call (one replay / iters). */
static int time_graph(call_fn fn, void *ctx, cudaStream_t s, int warmup, int iters, cli_stats *us) {
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  double t[REPS];
  int rc = -1;
  for (int i = 0; i < warmup; i++)
    if (fn(ctx, i, s) != 0) return -1;
  if (cudaStreamSynchronize(s) != cudaSuccess) return -1;
  CU(cudaEventCreate(&e0));
  CU(cudaEventCreate(&e1));
  CU(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  int bad = 0;
  for (int i = 0; i < iters; i++) bad |= fn(ctx, i, s);
  CU(cudaStreamEndCapture(s, &graph));
  if (bad) goto fail;
  CU(cudaGraphInstantiate(&exec, graph, 0));
  CU(cudaGraphLaunch(exec, s)); /* warm replay */
  for (int r = 0; r < REPS; r++) {
    float ms = 0;
    CU(cudaEventRecord(e0, s));
    CU(cudaGraphLaunch(exec, s));
    CU(cudaEventRecord(e1, s));
    CU(cudaEventSynchronize(e1));
    CU(cudaEventElapsedTime(&ms, e0, e1));
    t[r] = ms * 1000.0 / iters;
  }
  *us = cli_stats_of(t, REPS);
  rc = 0;
fail:
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  cudaGetLastError();
  return rc;
}

/* ---- cuBLASLt --------------------------------------------------------------------------- */

typedef enum lt_kind { LT_BF16, LT_FP8_TENSOR, LT_FP8_OUTER, LT_INT8 } lt_kind;

typedef struct lt_mm {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  void *ws;
  lt_kind kind;
  /* per call */
  void *const *w; /* rotated weight copies */
  int nrot;
  const void *act;
  void *out;
} lt_mm;

static void lt_destroy(lt_mm *m) {
  if (m->op) cublasLtMatmulDescDestroy(m->op);
  if (m->la) cublasLtMatrixLayoutDestroy(m->la);
  if (m->lb) cublasLtMatrixLayoutDestroy(m->lb);
  if (m->lc) cublasLtMatrixLayoutDestroy(m->lc);
  m->op = NULL;
  m->la = m->lb = m->lc = NULL;
}

/* D^T[N,M] = W[N,K] . A^T[K,M] in cuBLASLt's column-major terms ("TN", the only layout
 * fp8 and IMMA take): cuBLASLt's A is our weights, its B our activations. */
static int lt_setup(lt_mm *m, lt_kind kind, int64_t M, int64_t N, int64_t K, cudaDataType_t out_t, const float *sa,
                    const float *sb) {
  cublasStatus_t st;
  m->kind = kind;
  cudaDataType_t in_t = kind == LT_BF16 ? CUDA_R_16BF : kind == LT_INT8 ? CUDA_R_8I : CUDA_R_8F_E4M3;
  cudaDataType_t d_t = kind == LT_INT8 ? CUDA_R_32I : out_t;
  cublasComputeType_t ct = kind == LT_INT8 ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F;
  cudaDataType_t scale_t = kind == LT_INT8 ? CUDA_R_32I : CUDA_R_32F;
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  if ((st = cublasLtMatmulDescCreate(&m->op, ct, scale_t)) != CUBLAS_STATUS_SUCCESS) goto fail;
  cublasLtMatmulDescSetAttribute(m->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  cublasLtMatmulDescSetAttribute(m->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (kind == LT_FP8_TENSOR || kind == LT_FP8_OUTER) {
    /* cuBLASLt's A = weights: one scale per output channel; its B = activations: per token. */
    cublasLtMatmulDescSetAttribute(m->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb);
    cublasLtMatmulDescSetAttribute(m->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sa, sizeof sa);
    if (kind == LT_FP8_OUTER) {
      int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      if ((st = cublasLtMatmulDescSetAttribute(m->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof mode)) !=
              CUBLAS_STATUS_SUCCESS ||
          (st = cublasLtMatmulDescSetAttribute(m->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof mode)) !=
              CUBLAS_STATUS_SUCCESS)
        goto fail;
    }
  }
  if ((st = cublasLtMatrixLayoutCreate(&m->la, in_t, (uint64_t)K, (uint64_t)N, K)) != CUBLAS_STATUS_SUCCESS) goto fail;
  if ((st = cublasLtMatrixLayoutCreate(&m->lb, in_t, (uint64_t)K, (uint64_t)M, K)) != CUBLAS_STATUS_SUCCESS) goto fail;
  if ((st = cublasLtMatrixLayoutCreate(&m->lc, d_t, (uint64_t)N, (uint64_t)M, N)) != CUBLAS_STATUS_SUCCESS) goto fail;
  cublasLtMatmulPreference_t pref;
  if ((st = cublasLtMatmulPreferenceCreate(&pref)) != CUBLAS_STATUS_SUCCESS) goto fail;
  size_t wsb = LT_WS_BYTES;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb);
  cublasLtMatmulHeuristicResult_t res;
  int n = 0;
  st = cublasLtMatmulAlgoGetHeuristic(m->lt, m->op, m->la, m->lb, m->lc, m->lc, pref, 1, &res, &n);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || n == 0) goto fail;
  m->algo = res.algo;
  return 0;
fail:
  lt_destroy(m);
  return -1;
}

/* The algorithm cuBLASLt's heuristic picked, for the row's "config": its id, tile and split-K. */
static void lt_describe(const lt_mm *m, char *buf, size_t n) {
  int32_t id = -1, splitk = 1;
  uint32_t tile = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&m->algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, NULL);
  cublasLtMatmulAlgoConfigGetAttribute(&m->algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, NULL);
  cublasLtMatmulAlgoConfigGetAttribute(&m->algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, NULL);
  snprintf(buf, n, "algo%d tile%u sk%d", (int)id, (unsigned)tile, (int)splitk);
}

static int lt_call(void *ctx, int i, cudaStream_t s) {
  lt_mm *m = ctx;
  static const float one = 1.0f, zero = 0.0f;
  static const int32_t ione = 1, izero = 0;
  const void *alpha = m->kind == LT_INT8 ? (const void *)&ione : (const void *)&one;
  const void *beta = m->kind == LT_INT8 ? (const void *)&izero : (const void *)&zero;
  cublasStatus_t st = cublasLtMatmul(m->lt, m->op, alpha, m->w[i % m->nrot], m->la, m->act, m->lb, beta, m->out,
                                     m->lc, m->out, m->lc, &m->algo, m->ws, LT_WS_BYTES, s);
  return st == CUBLAS_STATUS_SUCCESS ? 0 : -1;
}

/* ---- our calls ------------------------------------------------------------------------------- */

typedef struct our_mm {
  w8a8_handle *h;
  w8a8_matrix a, b, out;
  w8a8_vector sa, sb;
  void *const *w;
  int nrot;
} our_mm;

static int our_call(void *ctx, int i, cudaStream_t s) {
  our_mm *c = ctx;
  (void)s; /* the handle's stream is s */
  w8a8_matrix b = c->b;
  b.data = c->w[i % c->nrot];
  w8a8_status st = w8a8_scaled_mm(c->h, &c->a, &b, &c->sa, &c->sb, NULL, NULL, &c->out);
  if (st != W8A8_SUCCESS) {
    fprintf(stderr, "bench_cuda: w8a8_scaled_mm: %s\n", w8a8_last_error());
    return -1;
  }
  return 0;
}

/* ---- verification on sampled rows ------------------------------------------------------------- */

typedef struct sample {
  int nr;
  int64_t rows[3];
  double *dot; /* [nr][N] exact (int8) or double (fp8) dot products, unscaled */
  double *mag; /* [nr][N] sum |a b| */
} sample;

static void sample_compute(sample *sp, const uint8_t *A, const uint8_t *B, int64_t M, int64_t N, int64_t K, int fp8) {
  sp->nr = 0;
  int64_t cand[3] = {0, M / 2, M - 1};
  for (int i = 0; i < 3; i++) {
    int dup = 0;
    for (int j = 0; j < sp->nr; j++) dup |= sp->rows[j] == cand[i];
    if (!dup) sp->rows[sp->nr++] = cand[i];
  }
  float lut[256];
  for (int v = 0; v < 256; v++) lut[v] = fp8 ? w8a8_fp8_to_f32((uint8_t)v) : (float)(int8_t)v;
  for (int r = 0; r < sp->nr; r++) {
    const uint8_t *a = A + sp->rows[r] * K;
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      const uint8_t *b = B + n * K;
      if (!fp8) {
        int32_t acc = 0;
        int64_t mg = 0;
        for (int64_t k = 0; k < K; k++) {
          int32_t p = (int32_t)(int8_t)a[k] * (int32_t)(int8_t)b[k];
          acc += p;
          mg += p < 0 ? -p : p;
        }
        sp->dot[r * N + n] = acc;
        sp->mag[r * N + n] = mg;
      } else {
        double acc = 0, mg = 0;
        for (int64_t k = 0; k < K; k++) {
          double p = (double)lut[a[k]] * lut[b[k]];
          acc += p;
          mg += fabs(p);
        }
        sp->dot[r * N + n] = acc;
        sp->mag[r * N + n] = mg;
      }
    }
  }
}

static float out_load(w8a8_dtype t, const void *base, int64_t i) {
  if (t == W8A8_DTYPE_BF16) return w8a8_bf16_to_f32(((const uint16_t *)base)[i]);
  if (t == W8A8_DTYPE_FP16) return w8a8_f16_to_f32(((const uint16_t *)base)[i]);
  return ((const float *)base)[i];
}

/* Count wrong elements of the sampled rows of a device output.
 * mode 0: ours (the header's epilogue); 1: cuBLASLt scaled fp8 (sa*sb*dot); 2: bf16 (dot, unscaled);
 * 3: int32 (dot exactly). exact: int8 through our epilogue must match bit for bit. */
static long sample_check(const sample *sp, const void *dout, w8a8_dtype ot, int64_t N, int mode, int exact,
                         const float *sa, int sa_tok, const float *sb, int sb_ch) {
  size_t es = mode == 3 ? 4 : w8a8_dtype_size(ot);
  void *row = malloc((size_t)N * es);
  long wrong = 0;
  if (!row) return N;
  for (int r = 0; r < sp->nr; r++) {
    int64_t m = sp->rows[r];
    if (cudaMemcpy(row, (const char *)dout + (size_t)m * N * es, (size_t)N * es, cudaMemcpyDeviceToHost) != cudaSuccess) {
      wrong += N;
      continue;
    }
    float a = sa[sa_tok ? m : 0];
    for (int64_t n = 0; n < N; n++) {
      double dot = sp->dot[r * N + n], mag = sp->mag[r * N + n];
      float b = sb[sb_ch ? n : 0];
      if (mode == 3) {
        wrong += ((const int32_t *)row)[n] != (int32_t)dot;
        continue;
      }
      double want, tolmag;
      if (mode == 0 && exact) {
        float r32 = w8a8_epilogue((float)(int32_t)dot, a, b, NULL);
        float back;
        if (ot == W8A8_DTYPE_BF16) back = w8a8_bf16_to_f32(w8a8_f32_to_bf16(r32));
        else if (ot == W8A8_DTYPE_FP16) back = w8a8_f16_to_f32(w8a8_f32_to_f16(r32));
        else back = r32;
        float got = out_load(ot, row, n);
        wrong += memcmp(&got, &back, 4) != 0;
        continue;
      }
      if (mode == 2) {
        want = dot;
        tolmag = mag;
      } else {
        want = dot * a * b;
        tolmag = mag * fabs((double)a * b);
      }
      double ulp = ot == W8A8_DTYPE_BF16 ? 0x1p-7 : ot == W8A8_DTYPE_FP16 ? 0x1p-10 : 0x1p-22;
      double got = out_load(ot, row, n);
      if (!(fabs(got - want) <= ulp * fabs(want) + 1e-3 * tolmag)) wrong++;
    }
  }
  free(row);
  return wrong;
}

/* ---- the module ---------------------------------------------------------------------------- */

static cudaDataType_t cuda_type(w8a8_dtype t) {
  return t == W8A8_DTYPE_BF16 ? CUDA_R_16BF : t == W8A8_DTYPE_FP16 ? CUDA_R_16F : CUDA_R_32F;
}

static void emit_one(bench_emit_fn emit, void *ectx, const char *impl, const char *dtype, const bench_config *cfg,
                     const bench_shape *sh, int64_t M, cli_stats us, double bytes, const char *kernel,
                     const char *config, int split_k, double base_p50, const char *base, long wrong, const char *dev) {
  bench_row r;
  memset(&r, 0, sizeof r);
  r.impl = impl;
  r.op = "scaled_mm";
  r.dtype = dtype;
  r.scales = cfg->per_token ? "token*channel" : "tensor";
  r.shape = sh->name ? sh->name : "";
  r.M = M;
  r.N = sh->N;
  r.K = sh->K;
  r.t = us;
  r.bytes = bytes;
  r.kernel = kernel;
  r.config = config;
  r.split_k = split_k;
  r.base_p50 = base_p50 > 0 ? base_p50 : 0;
  r.baseline = base_p50 > 0 ? base : "";
  r.wrong = wrong;
  r.device = dev;
  emit(ectx, &r);
}

/* How many weight copies: at least cfg->rotate, and enough to exceed 3x a 60 MB L2. */
static int rotations(const bench_config *cfg, size_t bbytes) {
  size_t want = ((size_t)180 << 20) / (bbytes ? bbytes : 1) + 1;
  int n = cfg->rotate > (int)want ? cfg->rotate : (int)(want < MAX_ROT ? want : MAX_ROT);
  return n < 1 ? 1 : n;
}

int bench_cuda(const bench_config *cfg, bench_emit_fn emit, void *ctx) {
  int rc = -1;
  w8a8_handle *h = NULL;
  cublasLtHandle_t lt = NULL;
  cudaStream_t s = NULL;
  void *ltws = NULL, *dA = NULL, *dAbf = NULL, *dout = NULL, *dsa = NULL, *dsb = NULL;
  void *dW[MAX_ROT], *dWbf[MAX_ROT];
  uint8_t *hA = NULL, *hB = NULL;
  uint16_t *hbf = NULL;
  float *hsa = NULL, *hsb = NULL;
  sample sp = {0, {0, 0, 0}, NULL, NULL};
  memset(dW, 0, sizeof dW);
  memset(dWbf, 0, sizeof dWbf);
  w8a8_handle_info info;
  if (w8a8_cuda_device_count() <= cfg->device_index) {
    fprintf(stderr, "bench_cuda: no CUDA device %d\n", cfg->device_index);
    return -1;
  }
  if (cfg->block) { /* ours, the fast path and the portable kernel, on the legacy stream; no cuBLASLt baseline yet */
    if (w8a8_create(&h, W8A8_DEVICE_CUDA, cfg->device_index) != W8A8_SUCCESS || w8a8_get_info(h, &info) != W8A8_SUCCESS) {
      fprintf(stderr, "bench_cuda: %s\n", w8a8_last_error());
      if (h) w8a8_destroy(h);
      return -1;
    }
    static char device[160];
    snprintf(device, sizeof device, "%s", info.name);
    rc = bench_blockwise(cfg, h, "w8a8_cuda", device, emit, ctx);
    if (rc == 0 && cfg->baselines && w8a8_set_kernel(h, W8A8_KERNEL_GENERIC) == W8A8_SUCCESS)
      rc = bench_blockwise(cfg, h, "w8a8_cuda_generic", device, emit, ctx);
    w8a8_destroy(h);
    return rc;
  }
  /* --seed: each call (one shape) starts the operands' stream from it (xorshift needs a nonzero state) */
  brng = 0x243f6a8885a308d3ull ^ (cfg->seed * 0x9e3779b97f4a7c15ull);
  if (!brng) brng = 1;
  if (w8a8_create(&h, W8A8_DEVICE_CUDA, cfg->device_index) != W8A8_SUCCESS || w8a8_get_info(h, &info) != W8A8_SUCCESS) {
    fprintf(stderr, "bench_cuda: %s\n", w8a8_last_error());
    goto fail;
  }
  const int cc = info.cc_major * 10 + info.cc_minor;
  CU(cudaSetDevice(cfg->device_index));
  CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  w8a8_set_stream(h, s);
  if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "bench_cuda: cublasLtCreate failed\n");
    goto fail;
  }
  CU(cudaMalloc(&ltws, LT_WS_BYTES));
  const w8a8_dtype ot = cfg->out_dtype ? cfg->out_dtype : W8A8_DTYPE_BF16;
  const size_t oes = w8a8_dtype_size(ot);

  for (int si = 0; si < cfg->nshapes; si++) {
    const bench_shape *sh = &cfg->shapes[si];
    const int64_t N = sh->N, K = sh->K;
    int64_t maxM = 0;
    for (int i = 0; i < cfg->nM; i++) maxM = cfg->Ms[i] > maxM ? cfg->Ms[i] : maxM;
    const size_t bbytes = (size_t)N * K;
    const int nrot = rotations(cfg, bbytes), nrot_bf = rotations(cfg, 2 * bbytes);
    hA = malloc((size_t)maxM * K);
    hB = malloc(bbytes);
    hsa = malloc(4 * (size_t)maxM);
    hsb = malloc(4 * (size_t)N);
    sp.dot = malloc(sizeof(double) * 3 * (size_t)N);
    sp.mag = malloc(sizeof(double) * 3 * (size_t)N);
    if (!hA || !hB || !hsa || !hsb || !sp.dot || !sp.mag) {
      fprintf(stderr, "bench_cuda: host allocation failed\n");
      goto fail;
    }
    CU(cudaMalloc(&dA, (size_t)maxM * K));
    CU(cudaMalloc(&dout, (size_t)maxM * N * (oes > 4 ? oes : 4)));
    CU(cudaMalloc(&dsa, 4 * (size_t)maxM));
    CU(cudaMalloc(&dsb, 4 * (size_t)N));
    for (int i = 0; i < nrot; i++) CU(cudaMalloc(&dW[i], bbytes));
    if (cfg->baselines) {
      hbf = malloc(2 * (bbytes > (size_t)maxM * K ? bbytes : (size_t)maxM * K));
      if (!hbf) goto fail;
      CU(cudaMalloc(&dAbf, 2 * (size_t)maxM * K));
      for (int i = 0; i < nrot_bf; i++) CU(cudaMalloc(&dWbf[i], 2 * bbytes));
    }
    for (int i = 0; i < maxM; i++) hsa[i] = bfrand(0.5f, 2.0f) * 1e-3f;
    for (int i = 0; i < N; i++) hsb[i] = bfrand(0.5f, 2.0f) * 1e-2f;
    CU(cudaMemcpy(dsa, hsa, 4 * (size_t)maxM, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dsb, hsb, 4 * (size_t)N, cudaMemcpyHostToDevice));

    for (int di = 0; di < 2; di++) {
      const int fp8 = di == 1;
      if (fp8 ? !cfg->do_fp8 : !cfg->do_int8) continue;
      if (fp8 && !strstr(info.features, " fp8")) { /* (the handle's kernels: W8A8_DEV CUDA_FORCE_PATH may lower them) */
        fprintf(stderr, "bench_cuda: fp8 needs kernels of 8.9+; skipped (%s)\n", info.features);
        continue;
      }
      const w8a8_dtype it = fp8 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
      const char *dname = fp8 ? "fp8_e4m3" : "int8";
      /* Fresh operands per dtype; the copies of B are identical bytes at distinct addresses. */
      fill_bytes(hA, (size_t)maxM * K, fp8);
      fill_bytes(hB, bbytes, fp8);
      CU(cudaMemcpy(dA, hA, (size_t)maxM * K, cudaMemcpyHostToDevice));
      for (int i = 0; i < nrot; i++) CU(cudaMemcpy(dW[i], hB, bbytes, cudaMemcpyHostToDevice));
      if (cfg->baselines) { /* bf16 twins of the same values (int8 and e4m3 are exact in bf16) */
        for (size_t i = 0; i < bbytes; i++)
          hbf[i] = w8a8_f32_to_bf16(fp8 ? w8a8_fp8_to_f32(hB[i]) : (float)(int8_t)hB[i]);
        for (int i = 0; i < nrot_bf; i++) CU(cudaMemcpy(dWbf[i], hbf, 2 * bbytes, cudaMemcpyHostToDevice));
        for (size_t i = 0; i < (size_t)maxM * K; i++)
          hbf[i] = w8a8_f32_to_bf16(fp8 ? w8a8_fp8_to_f32(hA[i]) : (float)(int8_t)hA[i]);
        CU(cudaMemcpy(dAbf, hbf, 2 * (size_t)maxM * K, cudaMemcpyHostToDevice));
      }

      for (int mi = 0; mi < cfg->nM; mi++) {
        const int64_t M = cfg->Ms[mi];
        sample_compute(&sp, hA, hB, M, N, K, fp8);
        const double qbytes = (double)M * K + (double)N * K + (double)M * N * oes;
        double base_us = 0; /* the baseline's p50 */
        const char *base_name = "";
        if (cfg->baselines) {
          /* bf16, then the cuBLASLt rows doing our job */
          lt_kind kinds[3];
          int nk = 0;
          kinds[nk++] = LT_BF16;
          if (fp8) {
            kinds[nk++] = LT_FP8_TENSOR;
            if (cfg->per_token) kinds[nk++] = LT_FP8_OUTER;
          } else {
            kinds[nk++] = LT_INT8;
          }
          for (int ki = 0; ki < nk; ki++) {
            lt_mm m;
            memset(&m, 0, sizeof m);
            m.lt = lt;
            m.ws = ltws;
            const lt_kind k = kinds[ki];
            const char *name = k == LT_BF16 ? "cublaslt_bf16"
                               : k == LT_FP8_TENSOR ? "cublaslt_fp8_tensorwise"
                               : k == LT_FP8_OUTER  ? "cublaslt_fp8_outervec"
                                                    : "cublaslt_int8";
            cudaDataType_t lt_out = cuda_type(ot);
            if (lt_setup(&m, k, M, N, K, lt_out, (const float *)dsa, (const float *)dsb) != 0) {
              fprintf(stderr, "bench_cuda: cuBLASLt offers no algorithm for %s at %lldx%lldx%lld; row skipped\n", name,
                      (long long)M, (long long)N, (long long)K);
              continue;
            }
            m.w = k == LT_BF16 ? dWbf : dW;
            m.nrot = k == LT_BF16 ? nrot_bf : nrot;
            m.act = k == LT_BF16 ? dAbf : dA;
            m.out = dout;
            cli_stats us = cli_stats_failed();
            char lt_cfg[96];
            lt_describe(&m, lt_cfg, sizeof lt_cfg);
            CU(cudaMemset(dout, 0xff, (size_t)M * N * 4));
            int ok = time_graph(lt_call, &m, s, cfg->warmup, cfg->iters, &us) == 0;
            lt_destroy(&m);
            if (!ok) {
              fprintf(stderr, "bench_cuda: %s failed at %lldx%lldx%lld\n", name, (long long)M, (long long)N,
                      (long long)K);
              continue;
            }
            long wrong = sample_check(&sp, dout, ot, N, k == LT_INT8 ? 3 : k == LT_BF16 ? 2 : 1, 0, hsa,
                                      k == LT_FP8_OUTER, hsb, k == LT_FP8_OUTER);
            double by = k == LT_BF16 ? 2 * ((double)M * K + (double)N * K) + (double)M * N * oes
                        : k == LT_INT8 ? (double)M * K + (double)N * K + 4.0 * M * N
                                       : qbytes;
            emit_one(emit, ctx, name, k == LT_BF16 ? "bf16" : dname, cfg, sh, M, us, by, "cublasLt", lt_cfg, 0, 0, "",
                     wrong, info.name);
            if (k == LT_INT8 || (k == LT_FP8_OUTER) || (k == LT_FP8_TENSOR && !cfg->per_token)) {
              base_us = us.p50;
              base_name = name;
            }
          }
        }
        /* ours: AUTO, and the portable kernel forced when AUTO took the Hopper path */
        our_mm c;
        memset(&c, 0, sizeof c);
        c.h = h;
        c.a = w8a8_matrix_make(it, W8A8_ROW_MAJOR, M, K, K, dA);
        c.b = w8a8_matrix_make(it, W8A8_COL_MAJOR, K, N, K, dW[0]);
        c.out = w8a8_matrix_make(ot, W8A8_ROW_MAJOR, M, N, N, dout);
        c.sa = w8a8_vector_make(W8A8_DTYPE_FP32, cfg->per_token ? M : 1, dsa);
        c.sb = w8a8_vector_make(W8A8_DTYPE_FP32, cfg->per_token ? N : 1, dsb);
        c.w = dW;
        c.nrot = nrot;
        int sm90_took = 0;
        if (cc == 90) {
          w8a8_set_kernel(h, W8A8_KERNEL_SM90); /* probe: does the Hopper path take this input? */
          sm90_took = w8a8_scaled_mm(h, &c.a, &c.b, &c.sa, &c.sb, NULL, NULL, &c.out) == W8A8_SUCCESS;
          cudaStreamSynchronize(s);
        }
        for (int pass = 0; pass < (sm90_took ? 2 : 1); pass++) {
          const char *name = pass ? "w8a8_cuda_generic" : "w8a8_cuda";
          w8a8_set_kernel(h, pass ? W8A8_KERNEL_GENERIC : W8A8_KERNEL_AUTO);
          CU(cudaMemset(dout, 0xff, (size_t)M * N * oes));
          cli_stats us = cli_stats_failed();
          if (time_graph(our_call, &c, s, cfg->warmup, cfg->iters, &us) != 0) {
            fprintf(stderr, "bench_cuda: %s failed at %lldx%lldx%lld\n", name, (long long)M, (long long)N, (long long)K);
            continue;
          }
          cli_launch ran;
          cli_last_launch(h, pass ? "generic" : "auto", &ran);
          long wrong = sample_check(&sp, dout, ot, N, 0, !fp8, hsa, cfg->per_token, hsb, cfg->per_token);
          emit_one(emit, ctx, name, dname, cfg, sh, M, us, qbytes, ran.kernel, ran.config, ran.split_k, base_us,
                   base_name, wrong, info.name);
        }
        w8a8_set_kernel(h, W8A8_KERNEL_AUTO);
      }
    }
    for (int i = 0; i < MAX_ROT; i++) {
      if (dW[i]) cudaFree(dW[i]);
      if (dWbf[i]) cudaFree(dWbf[i]);
      dW[i] = dWbf[i] = NULL;
    }
    cudaFree(dA), cudaFree(dAbf), cudaFree(dout), cudaFree(dsa), cudaFree(dsb);
    dA = dAbf = dout = dsa = dsb = NULL;
    free(hA), free(hB), free(hbf), free(hsa), free(hsb), free(sp.dot), free(sp.mag);
    hA = hB = NULL, hbf = NULL, hsa = hsb = NULL, sp.dot = sp.mag = NULL;
  }
  rc = 0;
fail:
  for (int i = 0; i < MAX_ROT; i++) {
    if (dW[i]) cudaFree(dW[i]);
    if (dWbf[i]) cudaFree(dWbf[i]);
  }
  if (dA) cudaFree(dA);
  if (dAbf) cudaFree(dAbf);
  if (dout) cudaFree(dout);
  if (dsa) cudaFree(dsa);
  if (dsb) cudaFree(dsb);
  if (ltws) cudaFree(ltws);
  free(hA), free(hB), free(hbf), free(hsa), free(hsb), free(sp.dot), free(sp.mag);
  if (lt) cublasLtDestroy(lt);
  if (h) w8a8_destroy(h);
  if (s) cudaStreamDestroy(s);
  return rc;
}

int bench_cuda_bf16_us(int device, int64_t M, int64_t N, int64_t K, cli_stats *us) {
  int rc = -1;
  cudaStream_t s = NULL;
  lt_mm m;
  memset(&m, 0, sizeof m);
  void *dA = NULL, *dout = NULL, *dW[MAX_ROT];
  memset(dW, 0, sizeof dW);
  bench_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.rotate = 2;
  const int nrot = rotations(&cfg, 2 * (size_t)N * K);
  if (w8a8_cuda_device_count() <= device) {
    fprintf(stderr, "bench_cuda_bf16_us: no CUDA device %d\n", device);
    return -1;
  }
  CU(cudaSetDevice(device));
  CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  if (cublasLtCreate(&m.lt) != CUBLAS_STATUS_SUCCESS) goto fail;
  CU(cudaMalloc(&m.ws, LT_WS_BYTES));
  CU(cudaMalloc(&dA, 2 * (size_t)M * K));
  CU(cudaMalloc(&dout, 2 * (size_t)M * N));
  {
    /* random bf16 values in [-1, 1): never time on zeros */
    size_t n = (size_t)(M > N ? M : N) * K;
    uint16_t *hb = malloc(2 * n);
    if (!hb) goto fail;
    for (size_t i = 0; i < n; i++) hb[i] = w8a8_f32_to_bf16(bfrand(-1, 1));
    cudaError_t e = cudaMemcpy(dA, hb, 2 * (size_t)M * K, cudaMemcpyHostToDevice);
    for (int i = 0; i < nrot && e == cudaSuccess; i++) {
      e = cudaMalloc(&dW[i], 2 * (size_t)N * K);
      if (e == cudaSuccess) e = cudaMemcpy(dW[i], hb, 2 * (size_t)N * K, cudaMemcpyHostToDevice);
    }
    free(hb);
    CU(e);
  }
  if (lt_setup(&m, LT_BF16, M, N, K, CUDA_R_16BF, NULL, NULL) != 0) {
    fprintf(stderr, "bench_cuda_bf16_us: cuBLASLt offers no bf16 algorithm for %lldx%lldx%lld\n", (long long)M,
            (long long)N, (long long)K);
    goto fail;
  }
  m.w = dW;
  m.nrot = nrot;
  m.act = dA;
  m.out = dout;
  rc = time_graph(lt_call, &m, s, 5, 20, us);
fail:
  lt_destroy(&m);
  if (m.lt) cublasLtDestroy(m.lt);
  if (m.ws) cudaFree(m.ws);
  for (int i = 0; i < MAX_ROT; i++)
    if (dW[i]) cudaFree(dW[i]);
  if (dA) cudaFree(dA);
  if (dout) cudaFree(dout);
  if (s) cudaStreamDestroy(s);
  return rc;
}
#else
typedef int bench_cuda_unused; /* CPU-only build: tools/bench.c's weak fallbacks stand in */
#endif
