/* tp_bench_gpu.c — `w8a8 tp-bench --local W`: the fused tensor-parallel operations on GPU
 * ranks emulated as W threads on ONE GPU (w8a8_comm_create_local; --device picks the GPU).
 *
 * For the Llama-3.1-70B linear layers at TP = W (column-parallel QKV and gate_up through
 * w8a8_all_gather_scaled_mm, row-parallel O and down through w8a8_scaled_mm_reduce_scatter),
 * for each M it times, on the same data, every rank at once (all W ranks share the GPU, so each
 * number is the time for the whole emulated group to do it):
 *   gemm     each rank's whole local GEMM (w8a8_scaled_mm on the gathered [M, K] input, or the
 *            fp32 partial [M, N] of the row-parallel layer);
 *   comm     each rank's copies alone: the W-1 chunks it pulls (AG: rows of the peers) or pushes
 *            (RS: fp32 partials to the peers), cudaMemcpyAsync device to device (copy engine);
 *   unfused  the library call with overlap = 0 (copies, then the GEMMs);
 *   fused    the library call with overlap = 1;
 * and overlap = (unfused - fused) / min(gemm, comm). Times: each rank thread runs the
 * iterations back to back on its stream; the span from the earliest rank's start event to the
 * latest rank's end event, divided by the iterations (microseconds). What emulation measures:
 * the copy engine running beside the GEMM's SMs and the schedule's overheads (events, host
 * barriers, chunked GEMMs); the copies are HBM to HBM, not NVLink, and the W ranks' GEMMs share
 * one GPU's SMs. Real-rank numbers need several GPUs (issue 7).
 * #wrong: elements where fused and unfused differ in any bit, plus, for the all-gather, elements
 * that differ from the GEMM alone (exact for int8, 2 bf16 ulps for fp8). Exit code 1 if any. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cli_common.h"
#include "w8a8.h"

int w8a8_cli_tp_bench_gpu(int argc, char **argv);

#ifndef W8A8_HAVE_CUDA
int w8a8_cli_tp_bench_gpu(int argc, char **argv) {
  (void)argc, (void)argv;
  fprintf(stderr, "w8a8 tp-bench --local: this build has no CUDA\n");
  return 1;
}
#else
#include <cuda_runtime.h>

#define MAXW 8

typedef cli_tp_shape shape;
#define k_shapes cli_tp_shapes

typedef struct args {
  int W, device, div, warmup, iters, do_int8, do_fp8;
  int64_t Ms[32];
  int nM;
  const char *only, *out_path;
} args;

static uint64_t rng(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
static void *dev_q8(int64_t n, int fp8, uint64_t seed) {
  uint8_t *h = malloc((size_t)n + 1);
  void *d = NULL;
  if (!h) return NULL;
  for (int64_t i = 0; i < n; i++) {
    uint8_t v = (uint8_t)rng(&seed);
    if (fp8) v = (uint8_t)((v & 0x80) | (v & 0x7f) % 0x58); /* |x| < 16, no NaN */
    h[i] = v;
  }
  if (cudaMalloc(&d, (size_t)n + 1) != cudaSuccess || cudaMemcpy(d, h, (size_t)n, cudaMemcpyHostToDevice) != cudaSuccess)
    d = NULL;
  free(h);
  return d;
}
static void *dev_scale(int64_t n, float base, uint64_t seed) {
  float *h = malloc(sizeof(float) * (size_t)(n + 1));
  void *d = NULL;
  if (!h) return NULL;
  for (int64_t i = 0; i < n; i++) h[i] = base * (0.5f + (float)(rng(&seed) >> 40) * 0x1p-24f);
  if (cudaMalloc(&d, sizeof(float) * (size_t)(n + 1)) != cudaSuccess ||
      cudaMemcpy(d, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice) != cudaSuccess)
    d = NULL;
  free(h);
  return d;
}
static void *dev_zero(size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes + 16) != cudaSuccess) return NULL;
  cudaMemset(d, 0, bytes + 16);
  return d;
}

/* One rank's buffers and descriptors for one measurement. */
typedef struct rank_data {
  w8a8_handle *h;
  cudaStream_t st;
  w8a8_comm *comm;
  int64_t Mr, off, Nr, Kr;
  void *a_full, *sa_full; /* AG: the gathered input [M, K] (gemm alone); RS: a [M, Kr] */
  void *b, *sb, *out_f, *out_u, *gemm_out, *scratch;
  w8a8_matrix A, B, OF, OU, GO, AF;
  w8a8_vector SA, SB, SAF;
} rank_data;

typedef struct group {
  int W, ag, iters, warmup, op; /* op: 0 gemm, 1 comm, 2 unfused, 3 fused */
  int64_t M, N, K;
  rank_data r[MAXW];
  cudaEvent_t ev0[MAXW], ev1[MAXW];
  pthread_barrier_t bar;
  int failed;
  char msg[512];
} group;

typedef struct job {
  group *g;
  int rank;
} job;

static int one(group *g, int r) {
  rank_data *d = &g->r[r];
  w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
  w8a8_status s = W8A8_SUCCESS;
  switch (g->op) {
    case 0:
      s = g->ag ? w8a8_scaled_mm(d->h, &d->AF, &d->B, &d->SAF, &d->SB, NULL, NULL, &d->GO)
                : w8a8_scaled_mm(d->h, &d->A, &d->B, &d->SA, &d->SB, NULL, NULL, &d->GO);
      break;
    case 1:
      for (int s_ = 1; s_ < g->W; s_++) {
        int j = (r - s_ + g->W) % g->W;
        rank_data *p = &g->r[j];
        size_t bytes = g->ag ? (size_t)(p->Mr * g->K) : sizeof(float) * (size_t)(p->Mr * g->N);
        const void *src = g->ag ? (const void *)((const uint8_t *)p->a_full + p->off * g->K)
                                : (const void *)((const float *)d->gemm_out + p->off * g->N);
        if (bytes && cudaMemcpyAsync(d->scratch, src, bytes, cudaMemcpyDefault, d->st) != cudaSuccess) return 1;
      }
      return 0;
    case 2:
    case 3:
      o.overlap = g->op == 3;
      s = g->ag ? w8a8_all_gather_scaled_mm(d->comm, &d->A, &d->B, &d->SA, &d->SB, NULL, NULL,
                                            g->op == 3 ? &d->OF : &d->OU, NULL, &o)
                : w8a8_scaled_mm_reduce_scatter(d->comm, &d->A, &d->B, &d->SA, &d->SB, NULL, NULL,
                                                g->op == 3 ? &d->OF : &d->OU, &o);
      break;
  }
  if (s != W8A8_SUCCESS) snprintf(g->msg, sizeof g->msg, "rank %d: %s: %s", r, w8a8_status_name(s), w8a8_last_error());
  return s != W8A8_SUCCESS;
}

static void *worker(void *v) {
  job *jb = v;
  group *g = jb->g;
  int r = jb->rank, bad = 0;
  for (int i = 0; i < g->warmup; i++) bad |= one(g, r);
  cudaStreamSynchronize(g->r[r].st);
  pthread_barrier_wait(&g->bar);
  cudaEventRecord(g->ev0[r], g->r[r].st);
  for (int i = 0; i < g->iters; i++) bad |= one(g, r);
  cudaEventRecord(g->ev1[r], g->r[r].st);
  cudaStreamSynchronize(g->r[r].st);
  if (bad) g->failed = 1;
  return NULL;
}

/* Time op on every rank at once: microseconds per iteration of the whole group. */
static double time_op(group *g, int op) {
  g->op = op;
  pthread_t t[MAXW];
  job jb[MAXW];
  pthread_barrier_init(&g->bar, NULL, (unsigned)g->W);
  for (int r = 0; r < g->W; r++) {
    jb[r].g = g, jb[r].rank = r;
    pthread_create(&t[r], NULL, worker, &jb[r]);
  }
  for (int r = 0; r < g->W; r++) pthread_join(t[r], NULL);
  pthread_barrier_destroy(&g->bar);
  float lo = 0, hi = 0;
  for (int r = 0; r < g->W; r++) {
    float s = 0, e = 0;
    cudaEventElapsedTime(&s, g->ev0[0], g->ev0[r]);
    cudaEventElapsedTime(&e, g->ev0[0], g->ev1[r]);
    if (s < lo) lo = s;
    if (e > hi) hi = e;
  }
  return (double)(hi - lo) * 1e3 / (g->iters > 0 ? g->iters : 1);
}

static float bf16f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static long measure(group *g, const args *ar, const shape *sh, int64_t M, int fp8, FILE *json, const char *devname,
                    const char *date) {
  const int W = g->W;
  g->ag = sh->ag;
  g->M = M;
  g->iters = ar->iters;
  g->warmup = ar->warmup;
  g->failed = 0;
  g->msg[0] = 0;
  const int64_t Nl = sh->N / ar->div, Kl = sh->K / ar->div;
  g->N = Nl, g->K = Kl; /* AG: K whole, N sharded; RS: N whole, K sharded */
  const w8a8_dtype dt = fp8 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
  const uint64_t seed = 1000003u * (uint64_t)(M + 1) + (uint64_t)fp8 * 7u + (uint64_t)(sh - k_shapes) * 131u;
  const float sbase = 1.0f / (fp8 ? 8.0f : 64.0f) / sqrtf((float)(Kl > 0 ? Kl : 1));
  int ok = 1;
  for (int r = 0; r < W; r++) {
    rank_data *d = &g->r[r];
    int64_t o;
    w8a8_tp_shard_rows(M, W, r, &d->off, &d->Mr);
    if (sh->ag) {
      w8a8_tp_shard_rows(Nl, W, r, &o, &d->Nr);
      d->Kr = Kl;
      d->a_full = dev_q8(M * Kl, fp8, seed); /* the layer's rows: the same data on every rank */
      d->sa_full = dev_scale(M, sbase, seed + 1);
      d->b = dev_q8(d->Nr * Kl, fp8, seed + 7919u * (uint64_t)(r + 1));
      d->sb = dev_scale(d->Nr, fp8 ? 0.125f : 1.0f / 64.0f, seed + 3);
      d->out_f = dev_zero(2 * (size_t)(M * d->Nr));
      d->out_u = dev_zero(2 * (size_t)(M * d->Nr));
      d->gemm_out = dev_zero(2 * (size_t)(M * d->Nr));
      d->scratch = dev_zero((size_t)(M * Kl));
      d->AF = w8a8_matrix_make(dt, W8A8_ROW_MAJOR, M, Kl, Kl, d->a_full);
      d->SAF = w8a8_vector_make(W8A8_DTYPE_FP32, M, d->sa_full);
      d->A = w8a8_matrix_make(dt, W8A8_ROW_MAJOR, d->Mr, Kl, Kl, d->a_full ? (uint8_t *)d->a_full + d->off * Kl : NULL);
      d->SA = w8a8_vector_make(W8A8_DTYPE_FP32, d->Mr, d->sa_full ? (float *)d->sa_full + d->off : NULL);
      d->B = w8a8_matrix_make(dt, W8A8_COL_MAJOR, Kl, d->Nr, Kl, d->b);
      d->SB = w8a8_vector_make(W8A8_DTYPE_FP32, d->Nr, d->sb);
      d->OF = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, d->Nr, d->Nr, d->out_f);
      d->OU = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, d->Nr, d->Nr, d->out_u);
      d->GO = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, d->Nr, d->Nr, d->gemm_out);
    } else {
      w8a8_tp_shard_rows(Kl, W, r, &o, &d->Kr);
      d->Nr = Nl;
      d->a_full = dev_q8(M * d->Kr, fp8, seed + 100u * (uint64_t)r);
      d->sa_full = dev_scale(M, sbase, seed + 100u * (uint64_t)r + 1);
      d->b = dev_q8(Nl * d->Kr, fp8, seed + 7919u * (uint64_t)(r + 1));
      d->sb = dev_scale(Nl, fp8 ? 0.125f : 1.0f / 64.0f, seed + 3);
      d->out_f = dev_zero(2 * (size_t)(d->Mr * Nl));
      d->out_u = dev_zero(2 * (size_t)(d->Mr * Nl));
      d->gemm_out = dev_zero(4 * (size_t)(M * Nl));
      d->scratch = dev_zero(4 * (size_t)(M * Nl));
      d->A = w8a8_matrix_make(dt, W8A8_ROW_MAJOR, M, d->Kr, d->Kr, d->a_full);
      d->SA = w8a8_vector_make(W8A8_DTYPE_FP32, M, d->sa_full);
      d->B = w8a8_matrix_make(dt, W8A8_COL_MAJOR, d->Kr, Nl, d->Kr, d->b);
      d->SB = w8a8_vector_make(W8A8_DTYPE_FP32, Nl, d->sb);
      d->OF = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, d->Mr, Nl, Nl, d->out_f);
      d->OU = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, d->Mr, Nl, Nl, d->out_u);
      d->GO = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, Nl, Nl, d->gemm_out);
    }
    ok &= d->a_full && d->sa_full && d->b && d->sb && d->out_f && d->out_u && d->gemm_out && d->scratch;
  }
  long wrong = 0;
  double t_gemm = 0, t_comm = 0, t_unf = 0, t_fus = 0;
  if (!ok) {
    fprintf(stderr, "tp-bench: out of GPU memory for %s M=%lld\n", sh->name, (long long)M);
    g->failed = 1;
  } else {
    /* The uploads and memsets above ran on the legacy stream; the ranks' streams are non-blocking. */
    cudaDeviceSynchronize();
    t_gemm = time_op(g, 0);
    t_comm = time_op(g, 1);
    t_unf = time_op(g, 2);
    t_fus = time_op(g, 3);
    if (g->failed) fprintf(stderr, "tp-bench: %s\n", g->msg);
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) {
      fprintf(stderr, "tp-bench: device error: %s\n", cudaGetErrorString(ce));
      g->failed = 1;
    }
    for (int r = 0; r < W && !g->failed; r++) {
      rank_data *d = &g->r[r];
      const int64_t rows = sh->ag ? M : d->Mr, n = rows * d->Nr;
      uint16_t *f = malloc(2 * (size_t)n + 2), *u = malloc(2 * (size_t)n + 2), *gm = malloc(2 * (size_t)n + 2);
      if (!f || !u || !gm) {
        g->failed = 1;
      } else {
        cudaMemcpy(f, d->out_f, 2 * (size_t)n, cudaMemcpyDeviceToHost);
        cudaMemcpy(u, d->out_u, 2 * (size_t)n, cudaMemcpyDeviceToHost);
        if (sh->ag) cudaMemcpy(gm, d->gemm_out, 2 * (size_t)n, cudaMemcpyDeviceToHost);
        for (int64_t i = 0; i < n; i++) {
          if (f[i] != u[i]) wrong++;
          if (sh->ag) {
            float a = bf16f(f[i]), b = bf16f(gm[i]);
            float tol = fp8 ? 0x1p-7f * fabsf(b) + 1e-3f : 0.0f;
            if (!(fabsf(a - b) <= tol)) wrong++;
          }
        }
      }
      free(f), free(u), free(gm);
    }
  }
  double bytes = sh->ag ? (double)M * (double)Kl + 4.0 * (double)M : 4.0 * (double)M * (double)Nl;
  double algbw = t_comm > 0 ? bytes / t_comm / 1e3 : 0, busbw = algbw * (W - 1) / W;
  double hidden = t_gemm < t_comm ? t_gemm : t_comm, eff = hidden > 0 ? (t_unf - t_fus) / hidden : 0;
  const rank_data *d0 = &g->r[0];
  printf("%-12s %-3s %6lld %6lld %6lld %-8s %d | %10.1f %10.1f %8.1f %8.1f | %10.1f %10.1f | %7.2f %6.2fx %6ld%s\n",
         sh->name, sh->ag ? "ag" : "rs", (long long)M, (long long)d0->Nr, (long long)d0->Kr, fp8 ? "fp8_e4m3" : "int8",
         W, t_gemm, t_comm, algbw, busbw, t_unf, t_fus, eff, t_fus > 0 ? t_unf / t_fus : 0, wrong,
         g->failed ? " FAILED" : "");
  if (json)
    fprintf(json,
            "{\"impl\":\"w8a8_gpu_tp_local\",\"op\":\"%s\",\"shape\":\"%s\",\"dtype\":\"%s\",\"scales\":\"token*channel\","
            "\"world\":%d,\"emulated\":true,\"M\":%lld,\"N\":%lld,\"K\":%lld,\"div\":%d,\"gemm_us\":%.3f,\"comm_us\":%.3f,"
            "\"unfused_us\":%.3f,\"fused_us\":%.3f,\"us\":%.3f,\"overlap_eff\":%.4f,\"speedup\":%.4f,"
            "\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f,\"wrong\":%ld,\"failed\":%d,\"device\":\"%s\",\"date\":\"%s\"}\n",
            sh->ag ? "all_gather_scaled_mm" : "scaled_mm_reduce_scatter", sh->name, fp8 ? "fp8_e4m3" : "int8", W,
            (long long)M, (long long)d0->Nr, (long long)d0->Kr, ar->div, t_gemm, t_comm, t_unf, t_fus, t_fus, eff,
            t_fus > 0 ? t_unf / t_fus : 0, algbw, busbw, wrong, g->failed, devname, date);
  for (int r = 0; r < W; r++) {
    rank_data *d = &g->r[r];
    void *ps[] = {d->a_full, d->sa_full, d->b, d->sb, d->out_f, d->out_u, d->gemm_out, d->scratch};
    for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
      if (ps[i]) cudaFree(ps[i]);
    d->a_full = d->sa_full = d->b = d->sb = d->out_f = d->out_u = d->gemm_out = d->scratch = NULL;
  }
  return wrong + (g->failed ? 1 : 0);
}

static void usage(void) {
  fprintf(stderr, "usage: w8a8 tp-bench --local W [options]   (W emulated GPU ranks on one GPU, 1..%d)\n"
                  "  --device D    CUDA device (default 0)\n"
                  "  -m M[,M...]   rows of the layer (tokens), default 1024,4096,8192\n"
                  "  -d DTYPE      int8, fp8 or both (default both)\n"
                  "  -s DIV        divide the 70B shapes' N and K by DIV (default 1: the real shapes)\n"
                  "  --shape NAME  only 70b-qkv, 70b-o, 70b-gate_up or 70b-down\n"
                  "  -w N, -n N    warmup and timed iterations (default 3, 20)\n"
                  "  -o FILE       also write JSON lines\n",
          MAXW);
}

static int parse(int argc, char **argv, args *ar) {
  memset(ar, 0, sizeof *ar);
  ar->W = 2, ar->div = 1, ar->warmup = 3, ar->iters = 20, ar->do_int8 = ar->do_fp8 = 1;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) return 1;
    if (!v) return 2;
    i++;
    if (!strcmp(o, "--local") || !strcmp(o, "--gpu")) {
      ar->W = atoi(v);
      if (ar->W < 1 || ar->W > MAXW) return 2;
    } else if (!strcmp(o, "--device")) {
      ar->device = atoi(v);
    } else if (!strcmp(o, "-m")) {
      ar->nM = 0;
      for (const char *p = v; *p && ar->nM < 32;) {
        char *end;
        long long m = strtoll(p, &end, 10);
        if (end == p || m < 0) return 2;
        ar->Ms[ar->nM++] = m;
        if (*end && *end != ',') return 2;
        p = *end == ',' ? end + 1 : end;
      }
    } else if (!strcmp(o, "-d")) {
      ar->do_int8 = !strcmp(v, "int8") || !strcmp(v, "both");
      ar->do_fp8 = !strcmp(v, "fp8") || !strcmp(v, "both");
      if (!ar->do_int8 && !ar->do_fp8) return 2;
    } else if (!strcmp(o, "-s")) {
      if ((ar->div = atoi(v)) < 1) return 2;
    } else if (!strcmp(o, "--shape")) {
      ar->only = v;
    } else if (!strcmp(o, "-w")) {
      ar->warmup = atoi(v);
    } else if (!strcmp(o, "-n")) {
      if ((ar->iters = atoi(v)) < 1) return 2;
    } else if (!strcmp(o, "-o")) {
      ar->out_path = v;
    } else {
      return 2;
    }
  }
  if (!ar->nM) ar->Ms[0] = 1024, ar->Ms[1] = 4096, ar->Ms[2] = 8192, ar->nM = 3;
  return 0;
}

int w8a8_cli_tp_bench_gpu(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  args ar;
  int pr = parse(argc, argv, &ar);
  if (pr) {
    usage();
    return pr == 1 ? 0 : 2;
  }
  if (w8a8_cuda_device_count() <= ar.device) {
    fprintf(stderr, "tp-bench --local: no CUDA device %d\n", ar.device);
    return 1;
  }
  static group g;
  memset(&g, 0, sizeof g);
  g.W = ar.W;
  w8a8_status s = W8A8_SUCCESS;
  w8a8_handle *hs[MAXW];
  w8a8_comm *cs[MAXW];
  cudaSetDevice(ar.device);
  for (int r = 0; r < ar.W && s == W8A8_SUCCESS; r++) {
    s = w8a8_create(&g.r[r].h, W8A8_DEVICE_CUDA, ar.device);
    if (s == W8A8_SUCCESS) {
      cudaStreamCreateWithFlags(&g.r[r].st, cudaStreamNonBlocking);
      w8a8_set_stream(g.r[r].h, g.r[r].st);
      cudaEventCreate(&g.ev0[r]);
      cudaEventCreate(&g.ev1[r]);
      hs[r] = g.r[r].h;
    }
  }
  if (s == W8A8_SUCCESS) s = w8a8_comm_create_local(cs, hs, ar.W);
  int64_t maxM = 0, maxN = 0, maxK = 0;
  for (int i = 0; i < ar.nM; i++) maxM = ar.Ms[i] > maxM ? ar.Ms[i] : maxM;
  for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++) {
    if (ar.only && strcmp(ar.only, k_shapes[i].name)) continue;
    int64_t N = k_shapes[i].N / ar.div, K = k_shapes[i].K / ar.div;
    maxN = N > maxN ? N : maxN;
    maxK = K > maxK ? K : maxK;
  }
  for (int r = 0; r < ar.W && s == W8A8_SUCCESS; r++) {
    g.r[r].comm = cs[r];
    s = w8a8_comm_reserve(cs[r], maxM, maxN, maxK);
  }
  if (s != W8A8_SUCCESS) {
    fprintf(stderr, "tp-bench --local: %s: %s\n", w8a8_status_name(s), w8a8_last_error());
    return 1;
  }
  w8a8_handle_info info;
  w8a8_get_info(g.r[0].h, &info);
  char date[32];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
  FILE *json = ar.out_path ? fopen(ar.out_path, "w") : NULL;
  if (ar.out_path && !json) fprintf(stderr, "tp-bench: cannot write %s\n", ar.out_path);
  printf("# w8a8 tp-bench --local: %d GPU ranks emulated on one %s (device %d), %s\n", ar.W, info.name, ar.device,
         w8a8_version_string());
  printf("# Llama-3.1-70B shapes / %d; ag = all-gather + GEMM (N sharded), rs = GEMM + reduce-scatter (K sharded); "
         "bf16 out, per-token x per-channel scales\n",
         ar.div);
  printf("# times: us per iteration of the whole emulated group (all ranks share the GPU), %d iterations after %d "
         "warm-up; comm = cudaMemcpyAsync D2D copies only (HBM, not NVLink)\n",
         ar.iters, ar.warmup);
  printf("# overlap = (unfused - fused) / min(gemm, comm); busbw = algbw * (W-1)/W\n");
  printf("# %-10s %-3s %6s %6s %6s %-8s %s | %10s %10s %8s %8s | %10s %10s | %7s %7s %6s\n", "shape", "op", "M",
         "N_r", "K_r", "dtype", "W", "gemm_us", "comm_us", "algbw", "busbw", "unfused_us", "fused_us", "overlap",
         "speedup", "#wrong");
  long wrong = 0;
  for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++) {
    if (ar.only && strcmp(ar.only, k_shapes[i].name)) continue;
    for (int f = 0; f < 2; f++) {
      if ((f == 0 && !ar.do_int8) || (f == 1 && !ar.do_fp8)) continue;
      for (int m = 0; m < ar.nM; m++) {
        wrong += measure(&g, &ar, &k_shapes[i], ar.Ms[m], f, json, info.name, date);
        fprintf(stderr, "tp-bench: %s %s M=%lld done\n", k_shapes[i].name, f ? "fp8" : "int8", (long long)ar.Ms[m]);
      }
    }
  }
  if (json) fclose(json);
  printf("# %s: %ld wrong elements or failed measurements\n", wrong ? "FAILED" : "ok", wrong);
  cudaDeviceSynchronize();
  for (int r = 0; r < ar.W; r++) {
    w8a8_comm_destroy(g.r[r].comm);
    w8a8_destroy(g.r[r].h);
    cudaStreamDestroy(g.r[r].st);
    cudaEventDestroy(g.ev0[r]);
    cudaEventDestroy(g.ev1[r]);
  }
  return wrong ? 1 : 0;
}
#endif /* W8A8_HAVE_CUDA */
