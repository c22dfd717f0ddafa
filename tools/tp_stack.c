/* tp_stack.c — `w8a8 tp-stack`: a Llama-3.1-70B-FP8 decoder stack with dummy weights, sequence
 * parallel over W GPU ranks, the way users quote async-TP numbers.
 *
 * Per layer, on every rank r (M tokens in all, M_r = the rank's shard, bf16 residual stream
 * [M_r, 8192] between layers):
 *   quant_in     w8a8_quantize: the layer input [M_r, 8192] bf16 -> fp8, per-token scales
 *   ag_qkv       w8a8_all_gather_scaled_mm: [M, 8192] . [8192, 10240/W] -> [M, 10240/W] bf16
 *   quant_attn   attention is LEFT OUT; its output [M, 8192/W] is stood in for by the Q columns of
 *                the QKV output, quantized per token (what the attention output's quantization costs)
 *   rs_o         w8a8_scaled_mm_reduce_scatter: [M, 8192/W] . [8192/W, 8192] -> [M_r, 8192] bf16
 *   quant_mlp    w8a8_quantize of the O output [M_r, 8192] (residual add and RMSNorm left out)
 *   ag_gate_up   all-gather + GEMM: [M, 8192] . [8192, 57344/W] -> [M, 57344/W] bf16
 *   silu_mul_q   w8a8_silu_mul_quantize: gate = first 28672/W columns, up = the rest -> fp8 [M, 28672/W]
 *   rs_down      GEMM + reduce-scatter: [M, 28672/W] . [28672/W, 8192] -> [M_r, 8192]: the next layer's input
 * Modes, each timed over the same buffers:
 *   unfused      the TP calls with w8a8_tp_options.overlap = 0 (the collective, then the GEMMs)
 *   fused        overlap = 1 (copies of chunks beside the GEMMs of chunks already present)
 *   gemm_only    no communication: each rank's GEMMs on full-size inputs (AG: a dummy gathered
 *                [M, 8192] input; RS: the partial [M, 8192], what the library's RS computes: fp32,
 *                or bf16 with --partials out), the quantizers as in the other modes.
 * --partials fp32|out sets w8a8_tp_options.partials of every reduce-scatter call (unfused and fused):
 * fp32 partials (W8A8_TP_PARTIALS_FP32, the default) or partials rounded to the bf16 out before they
 * travel (W8A8_TP_PARTIALS_OUT: half the bytes).
 * The API has no collective-only call, so comm is ESTIMATED per op as unfused - gemm_only (it
 * includes the unfused path's own overheads: agreement, events, per-chunk GEMMs).
 * Times: CUDA events on each rank's stream around every op; per iteration the slowest rank (max
 * over ranks, per op and for the whole stack), then p20 / p50 / p80 (the stack) or the median (each
 * op) over iterations. Ranks start each iteration together (stream sync + barrier), so waiting for
 * peers counts.
 *
 * Ranks: --local W: W threads in this process, rank r on GPU r % ngpus (w8a8_comm_create_local,
 * one CUDA handle and stream per rank). With fewer GPUs than ranks, ranks share GPUs: EMULATED,
 * and the output says so (shared SMs, HBM-to-HBM copies: not TP timings). --nccl (under mpirun
 * -np W): one rank per process, w8a8_comm_create_world with a CUDA handle (NCCL transport).
 * Everything is allocated and the workspaces reserved before timing; nothing is allocated in the
 * timed loop. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "w8a8.h"

int w8a8_cli_tp_stack(int argc, char **argv);

/* ---- the command line (parsed before any device or MPI work, also in a build without CUDA) ---- */

#define MAXW_LOCAL 8
#define MAXW 64
#define MAXT 16
#define MAX_TOKENS (1 << 20)
#define MAX_LAYERS 200
#define MAX_ITERS 10000
#define MAX_WARMUP 1000

typedef struct args {
  int W, nccl, layers, iters, warmup, nT;
  int partials; /* W8A8_TP_PARTIALS_FP32 or _OUT (--partials fp32|out) */
  int64_t tokens[MAXT];
  const char *out_path;
  int argc; /* the command line, for the JSON header */
  char **argv;
} args;

enum { ST_LOCAL = 256, ST_NCCL, ST_LAYERS, ST_PARTIALS, ST_JSON };
static const cli_opt st_opts[] = {
    {ST_LOCAL, "local", 0, "W", "W ranks as threads of this process, rank r on GPU r % ngpus (default\n"
                                "W = ngpus, at least 2); fewer GPUs than ranks: emulated ranks (not\n"
                                "TP timings). W in 1..8 and divides 2048"},
    {ST_NCCL, "nccl", 0, NULL, "one rank per MPI process (mpirun), NCCL transport, GPU = local\n"
                               "rank % ngpus"},
    {'m', "m", 'm', "LIST", "prefill token counts, up to 16 in 1..1048576 (default 1024,2048,4096,\n"
                            "8192); --tokens is the same"},
    {'m', "tokens", 0, "LIST", NULL},
    {ST_LAYERS, "layers", 0, "L", "decoder layers, 1..200 (default 2)"},
    {'i', "iters", 'i', "N", "timed iterations, 1..10000 (default 10)"},
    {'w', "warmup", 'w', "N", "warm-up iterations, 0..1000 (default 2)"},
    {ST_PARTIALS, "partials", 0, "P", "the reduce-scatters' partials: fp32 (default) or out (rounded to\n"
                                      "the bf16 out before they travel: half the bytes)"},
    {'o', "out", 'o', "FILE", "also write JSON lines to FILE ('-': stdout, the table then goes\n"
                              "to stderr)"},
    {ST_JSON, "json", 0, NULL, "JSON lines on stdout, the table on stderr (= -o -)"},
    {'n', NULL, 'n', NULL, NULL}, /* the old iteration count: refused with what replaced it */
};
#define NST_OPTS ((int)(sizeof st_opts / sizeof st_opts[0]))

static void usage(FILE *f) {
  fprintf(f, "usage: w8a8 tp-stack [--local W] [options]\n"
             "       mpirun -np W w8a8 tp-stack --nccl [options]\n"
             "A Llama-3.1-70B-FP8 decoder stack (dummy weights, attention left out) with sequence parallelism at\n"
             "TP = W: fused (overlap on) vs unfused (overlap off) vs gemm_only, per-op breakdown. W must divide\n"
             "2048 (every per-rank size is then whole).\n"
             "\n");
  cli_print_options(f, st_opts, NST_OPTS);
}

/* 0: run; 1: -h (the usage is printed); 2: a bad command line (reported). */
static int parse(int argc, char **argv, args *ar) {
  memset(ar, 0, sizeof *ar);
  ar->layers = 2, ar->iters = 10, ar->warmup = 2;
  ar->argc = argc, ar->argv = argv;
  cli_parser p;
  cli_parser_init(&p, "tp-stack", st_opts, NST_OPTS, argc, argv);
  p.quiet = !cli_reporting_rank();
  int rc = 0, c, k, local = 0;
  const char *v;
  while (rc == 0 && (c = cli_next_opt(&p, &v)) != CLI_OPT_END) {
    switch (c) {
      case CLI_OPT_HELP:
        if (!p.quiet) usage(stdout);
        rc = 1;
        break;
      case CLI_OPT_ERROR: rc = 2; break;
      case ST_NCCL: ar->nccl = 1; break;
      case ST_LOCAL:
        if (!cli_opt_int(&p, v, 1, MAXW_LOCAL, "ranks", &ar->W))
          rc = 2;
        else if (2048 % ar->W)
          rc = cli_usage_error(&p, "--local %s: W must divide 2048 (1, 2, 4 or 8)", v);
        local = 1;
        break;
      case 'm':
        if ((ar->nT = cli_opt_list(&p, v, 1, MAX_TOKENS, MAXT, "token counts", ar->tokens)) < 0) rc = 2;
        break;
      case ST_LAYERS:
        if (!cli_opt_int(&p, v, 1, MAX_LAYERS, "layers", &ar->layers)) rc = 2;
        break;
      case 'i':
        if (!cli_opt_int(&p, v, 1, MAX_ITERS, "timed iterations", &ar->iters)) rc = 2;
        break;
      case 'w':
        if (!cli_opt_int(&p, v, 0, MAX_WARMUP, "warm-up iterations", &ar->warmup)) rc = 2;
        break;
      case ST_PARTIALS: {
        static const char *const ch[] = {"fp32", "out", NULL};
        if ((k = cli_opt_choice(&p, v, ch)) < 0) rc = 2;
        ar->partials = k == 1 ? W8A8_TP_PARTIALS_OUT : W8A8_TP_PARTIALS_FP32;
        break;
      }
      case 'o': ar->out_path = v; break;
      case ST_JSON: ar->out_path = "-"; break;
      case 'n':
        rc = cli_usage_error(&p, "-n is not the iteration count any more (-n is the N list in bench and tune): "
                                 "use -i/--iters");
        break;
    }
  }
  if (rc == 0 && p.first_positional < argc)
    rc = cli_usage_error(&p, "unexpected argument '%s' (tp-stack takes options only)", argv[p.first_positional]);
  if (rc == 0 && ar->nccl && local)
    rc = cli_usage_error(&p, "--local and --nccl do not go together (--nccl: one rank per MPI process, W = mpirun's -np)");
  cli_parser_free(&p);
  if (rc) return rc;
  if (!ar->nT) ar->tokens[0] = 1024, ar->tokens[1] = 2048, ar->tokens[2] = 4096, ar->tokens[3] = 8192, ar->nT = 4;
  return 0;
}

#ifndef W8A8_HAVE_CUDA
int w8a8_cli_tp_stack(int argc, char **argv) {
  args ar;
  const int pr = parse(argc, argv, &ar);
  if (pr) return pr == 1 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  fprintf(stderr, "w8a8 tp-stack: this build has no CUDA; the layer-stack benchmark needs GPU ranks\n");
  return CLI_EXIT_FAIL;
}
#else
#include <cuda_runtime.h>
#ifdef W8A8_HAVE_MPI
#include <mpi.h>
#endif

#define HIDDEN 8192
#define QKV_OUT 10240 /* 64 query heads + 2 x 8 KV heads of 128 */
#define INTER 28672

enum { OP_QIN, OP_QKV, OP_QATT, OP_O, OP_QMLP, OP_GU, OP_ACT, OP_DOWN, NOPS };
static const char *op_name[NOPS] = {"quant_in", "ag_qkv",     "quant_attn", "rs_o",
                                    "quant_mlp", "ag_gate_up", "silu_mul_q", "rs_down"};
enum { MODE_GEMM, MODE_UNFUSED, MODE_FUSED, NMODES };
static const char *mode_name[NMODES] = {"gemm_only", "unfused", "fused"};
/* the collective ops, and what each fused op is compared with */
static const int coll_ops[4] = {OP_QKV, OP_O, OP_GU, OP_DOWN};

typedef struct layer_w {
  void *wqkv, *wo, *wgu, *wd;     /* fp8, column-major [K, N] (N rows of K) */
  void *sqkv, *so, *sgu, *sd;     /* fp32 per-channel scales */
} layer_w;

typedef struct group group;

/* One rank: its handle, stream, communicator, weights, activations and events. */
typedef struct rank_ctx {
  int rank, W, device, L;
  int partials; /* the reduce-scatters' w8a8_tp_options.partials */
  group *g; /* --local: the shared barrier; NULL under MPI */
  w8a8_handle *h;
  cudaStream_t st;
  w8a8_comm *comm;
  int64_t Nq, Ka, I; /* per rank: QKV columns, attention (O input) columns, MLP intermediate */
  layer_w *lw;
  void *x, *o, *xq, *sx, *qkv, *aq, *saq, *gu, *mq, *smq, *afull, *sfull, *partial;
  cudaEvent_t *ev; /* L * NOPS + 1 */
  double *tot, *ops; /* per mode and timed iteration: the stack, and each op summed over the layers (ms);
                      * entry (mode * iters + it), ops times NOPS */
  int failed;
  char err[512];
} rank_ctx;

struct group {
  int W;
  pthread_barrier_t bar;
};

static void *dmalloc(size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes + 256) != cudaSuccess) return NULL;
  return d;
}

/* Dummy fp8 data: |x| < 16, no NaN; tiled from one host pattern (rotated per buffer): uploading
 * gigabytes of weights from a small pattern takes a fraction of a second. */
#define PATTERN (8u << 20)
static uint8_t *g_pattern;
static int fill_fp8(void *d, size_t bytes, uint64_t seed) {
  if (!g_pattern) {
    g_pattern = malloc(PATTERN);
    if (!g_pattern) return 0;
    cli_rng r = cli_rng_make(12345, 1);
    for (size_t i = 0; i < PATTERN; i++) {
      uint8_t v = (uint8_t)cli_rng_u64(&r);
      g_pattern[i] = (uint8_t)((v & 0x80) | (v & 0x7f) % 0x58);
    }
  }
  size_t rot = (size_t)(seed * 2654435761u) % (PATTERN / 2);
  for (size_t o = 0; o < bytes; o += PATTERN / 2) {
    size_t n = bytes - o < PATTERN / 2 ? bytes - o : PATTERN / 2;
    if (cudaMemcpy((uint8_t *)d + o, g_pattern + rot, n, cudaMemcpyHostToDevice) != cudaSuccess) return 0;
  }
  return 1;
}
static int fill_f32(void *d, int64_t n, float base, uint64_t seed) {
  float *h = malloc(sizeof(float) * (size_t)(n + 1));
  if (!h) return 0;
  cli_rng r = cli_rng_make(seed, 2);
  for (int64_t i = 0; i < n; i++) h[i] = base * (0.5f + cli_rng_unit(&r));
  int ok = cudaMemcpy(d, h, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice) == cudaSuccess;
  free(h);
  return ok;
}
static int fill_bf16(void *d, int64_t n, uint64_t seed) {
  uint16_t *h = malloc(2 * (size_t)(n + 1));
  if (!h) return 0;
  cli_fill_bf16_normal(h, n, 1.0f, seed);
  int ok = cudaMemcpy(d, h, 2 * (size_t)n, cudaMemcpyHostToDevice) == cudaSuccess;
  free(h);
  return ok;
}

/* Allocate and fill one rank's buffers (on its device, which the caller made current). */
static int rank_alloc(rank_ctx *c, int64_t maxM, int iters) {
  const int W = c->W;
  c->Nq = QKV_OUT / W, c->Ka = HIDDEN / W, c->I = INTER / W;
  const int64_t maxMr = (maxM + W - 1) / W;
  /* weight scales ~ 1 / (4 sqrt(K)): outputs of the order of the inputs, layer after layer */
  const float sK = 0.25f / sqrtf((float)HIDDEN), sKa = 0.25f / sqrtf((float)c->Ka), sI = 0.25f / sqrtf((float)c->I);
  c->lw = calloc((size_t)c->L, sizeof *c->lw);
  if (!c->lw) return 0;
  for (int l = 0; l < c->L; l++) {
    layer_w *w = &c->lw[l];
    const uint64_t s = 1000u * (uint64_t)l + 10u * (uint64_t)c->rank;
    w->wqkv = dmalloc((size_t)(HIDDEN * c->Nq));
    w->wo = dmalloc((size_t)(c->Ka * HIDDEN));
    w->wgu = dmalloc((size_t)(HIDDEN * 2 * c->I));
    w->wd = dmalloc((size_t)(c->I * HIDDEN));
    w->sqkv = dmalloc(4 * (size_t)c->Nq);
    w->so = dmalloc(4 * (size_t)HIDDEN);
    w->sgu = dmalloc(4 * (size_t)(2 * c->I));
    w->sd = dmalloc(4 * (size_t)HIDDEN);
    if (!(w->wqkv && w->wo && w->wgu && w->wd && w->sqkv && w->so && w->sgu && w->sd)) return 0;
    if (!(fill_fp8(w->wqkv, (size_t)(HIDDEN * c->Nq), s + 1) && fill_fp8(w->wo, (size_t)(c->Ka * HIDDEN), s + 2) &&
          fill_fp8(w->wgu, (size_t)(HIDDEN * 2 * c->I), s + 3) && fill_fp8(w->wd, (size_t)(c->I * HIDDEN), s + 4) &&
          fill_f32(w->sqkv, c->Nq, sK, s + 5) && fill_f32(w->so, HIDDEN, sKa, s + 6) &&
          fill_f32(w->sgu, 2 * c->I, sK, s + 7) && fill_f32(w->sd, HIDDEN, sI, s + 8)))
      return 0;
  }
  c->x = dmalloc(2 * (size_t)(maxMr * HIDDEN));
  c->o = dmalloc(2 * (size_t)(maxMr * HIDDEN));
  c->xq = dmalloc((size_t)(maxMr * HIDDEN));
  c->sx = dmalloc(4 * (size_t)maxMr);
  c->qkv = dmalloc(2 * (size_t)(maxM * c->Nq));
  c->aq = dmalloc((size_t)(maxM * c->Ka));
  c->saq = dmalloc(4 * (size_t)maxM);
  c->gu = dmalloc(2 * (size_t)(maxM * 2 * c->I));
  c->mq = dmalloc((size_t)(maxM * c->I));
  c->smq = dmalloc(4 * (size_t)maxM);
  c->afull = dmalloc((size_t)(maxM * HIDDEN));
  c->sfull = dmalloc(4 * (size_t)maxM);
  c->partial = dmalloc(4 * (size_t)(maxM * HIDDEN));
  if (!(c->x && c->o && c->xq && c->sx && c->qkv && c->aq && c->saq && c->gu && c->mq && c->smq && c->afull &&
        c->sfull && c->partial))
    return 0;
  if (!fill_bf16(c->x, maxMr * HIDDEN, 77u + (uint64_t)c->rank)) return 0;
  /* gemm_only's gathered input: the layer input quantized per token, as the other modes' all-gathers
   * deliver it. Not the weights' byte pattern (every exponent equally likely): GEMMs on that ran up to
   * 7% slower than on quantized Gaussian data (the tensor cores' power, hence the clocks, depend on
   * the data), which would bias gemm_only high. */
  for (int64_t off = 0; off < maxM; off += maxMr) {
    const int64_t n = maxM - off < maxMr ? maxM - off : maxMr;
    w8a8_matrix X = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, n, HIDDEN, HIDDEN, c->x);
    w8a8_matrix AF = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, n, HIDDEN, HIDDEN,
                                      (uint8_t *)c->afull + off * HIDDEN);
    w8a8_vector SF = w8a8_vector_make(W8A8_DTYPE_FP32, n, (float *)c->sfull + off);
    if (w8a8_quantize(c->h, &X, &AF, W8A8_QUANT_DYNAMIC_PER_TOKEN, &SF, NULL, NULL) != W8A8_SUCCESS) return 0;
  }
  if (cudaStreamSynchronize(c->st) != cudaSuccess) return 0;
  c->ev = calloc((size_t)(c->L * NOPS + 1), sizeof *c->ev);
  c->tot = calloc((size_t)NMODES * (size_t)iters, sizeof *c->tot);
  c->ops = calloc((size_t)NMODES * (size_t)iters * NOPS, sizeof *c->ops);
  if (!c->ev || !c->tot || !c->ops) return 0;
  for (int i = 0; i <= c->L * NOPS; i++)
    if (cudaEventCreate(&c->ev[i]) != cudaSuccess) return 0;
  return 1;
}

static void rank_free(rank_ctx *c) {
  if (c->lw)
    for (int l = 0; l < c->L; l++) {
      void *p[] = {c->lw[l].wqkv, c->lw[l].wo, c->lw[l].wgu, c->lw[l].wd,
                   c->lw[l].sqkv, c->lw[l].so, c->lw[l].sgu, c->lw[l].sd};
      for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
    }
  void *p[] = {c->x, c->o, c->xq, c->sx, c->qkv, c->aq, c->saq, c->gu, c->mq, c->smq, c->afull, c->sfull, c->partial};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) cudaFree(p[i]);
  if (c->ev)
    for (int i = 0; i <= c->L * NOPS; i++)
      if (c->ev[i]) cudaEventDestroy(c->ev[i]);
  free(c->lw), free(c->ev), free(c->tot), free(c->ops);
}

static void note(rank_ctx *c, const char *what, w8a8_status s) {
  if (s == W8A8_SUCCESS || c->failed) return;
  c->failed = 1;
  snprintf(c->err, sizeof c->err, "rank %d: %s: %s: %s", c->rank, what, w8a8_status_name(s), w8a8_last_error());
}

/* One pass over the L layers in `mode`, an event after every op. Every call is made even after
 * a failure, so that the ranks' collective calls stay matched (a rank that skipped one would
 * leave its peers waiting). */
static void stack_once(rank_ctx *c, int64_t M, int mode) {
  const w8a8_dtype F8 = W8A8_DTYPE_FP8_E4M3, BF = W8A8_DTYPE_BF16, F32 = W8A8_DTYPE_FP32;
  const w8a8_quant_mode TOK = W8A8_QUANT_DYNAMIC_PER_TOKEN;
  int64_t off, Mr;
  w8a8_tp_shard_rows(M, c->W, c->rank, &off, &Mr);
  w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
  o.overlap = mode == MODE_FUSED;
  o.partials = c->partials; /* the all-gathers ignore it */
  const int gemm = mode == MODE_GEMM;
  const int64_t H = HIDDEN, Nq = c->Nq, Ka = c->Ka, I = c->I;
  w8a8_matrix X = w8a8_matrix_make(BF, W8A8_ROW_MAJOR, Mr, H, H, c->x);
  w8a8_matrix O = w8a8_matrix_make(BF, W8A8_ROW_MAJOR, Mr, H, H, c->o);
  w8a8_matrix XQ = w8a8_matrix_make(F8, W8A8_ROW_MAJOR, Mr, H, H, c->xq);
  w8a8_vector SX = w8a8_vector_make(F32, Mr, c->sx);
  w8a8_matrix QKV = w8a8_matrix_make(BF, W8A8_ROW_MAJOR, M, Nq, Nq, c->qkv);
  w8a8_matrix QCOLS = w8a8_matrix_make(BF, W8A8_ROW_MAJOR, M, Ka, Nq, c->qkv); /* attention stand-in */
  w8a8_matrix AQ = w8a8_matrix_make(F8, W8A8_ROW_MAJOR, M, Ka, Ka, c->aq);
  w8a8_vector SAQ = w8a8_vector_make(F32, M, c->saq);
  w8a8_matrix GU = w8a8_matrix_make(BF, W8A8_ROW_MAJOR, M, 2 * I, 2 * I, c->gu);
  w8a8_matrix MQ = w8a8_matrix_make(F8, W8A8_ROW_MAJOR, M, I, I, c->mq);
  w8a8_vector SMQ = w8a8_vector_make(F32, M, c->smq);
  w8a8_matrix AF = w8a8_matrix_make(F8, W8A8_ROW_MAJOR, M, H, H, c->afull);
  w8a8_vector SF = w8a8_vector_make(F32, M, c->sfull);
  /* gemm_only's stand-in for the RS partial GEMM: the library's partial dtype (c->partial holds fp32) */
  w8a8_matrix P = w8a8_matrix_make(c->partials == W8A8_TP_PARTIALS_OUT ? BF : F32, W8A8_ROW_MAJOR, M, H, H, c->partial);
  int e = 0;
  cudaEventRecord(c->ev[e++], c->st);
  for (int l = 0; l < c->L; l++) {
    const layer_w *w = &c->lw[l];
    w8a8_matrix Bqkv = w8a8_matrix_make(F8, W8A8_COL_MAJOR, H, Nq, H, w->wqkv);
    w8a8_matrix Bo = w8a8_matrix_make(F8, W8A8_COL_MAJOR, Ka, H, Ka, w->wo);
    w8a8_matrix Bgu = w8a8_matrix_make(F8, W8A8_COL_MAJOR, H, 2 * I, H, w->wgu);
    w8a8_matrix Bd = w8a8_matrix_make(F8, W8A8_COL_MAJOR, I, H, I, w->wd);
    w8a8_vector Sqkv = w8a8_vector_make(F32, Nq, w->sqkv), So = w8a8_vector_make(F32, H, w->so);
    w8a8_vector Sgu = w8a8_vector_make(F32, 2 * I, w->sgu), Sd = w8a8_vector_make(F32, H, w->sd);

    note(c, "quantize (layer input)", w8a8_quantize(c->h, &X, &XQ, TOK, &SX, NULL, NULL));
    cudaEventRecord(c->ev[e++], c->st);
    note(c, "qkv", gemm ? w8a8_scaled_mm(c->h, &AF, &Bqkv, &SF, &Sqkv, NULL, NULL, &QKV)
                        : w8a8_all_gather_scaled_mm(c->comm, &XQ, &Bqkv, &SX, &Sqkv, NULL, NULL, &QKV, NULL, &o));
    cudaEventRecord(c->ev[e++], c->st);
    note(c, "quantize (attention stand-in)", w8a8_quantize(c->h, &QCOLS, &AQ, TOK, &SAQ, NULL, NULL));
    cudaEventRecord(c->ev[e++], c->st);
    note(c, "o", gemm ? w8a8_scaled_mm(c->h, &AQ, &Bo, &SAQ, &So, NULL, NULL, &P)
                      : w8a8_scaled_mm_reduce_scatter(c->comm, &AQ, &Bo, &SAQ, &So, NULL, NULL, &O, &o));
    cudaEventRecord(c->ev[e++], c->st);
    note(c, "quantize (mlp input)", w8a8_quantize(c->h, &O, &XQ, TOK, &SX, NULL, NULL));
    cudaEventRecord(c->ev[e++], c->st);
    note(c, "gate_up", gemm ? w8a8_scaled_mm(c->h, &AF, &Bgu, &SF, &Sgu, NULL, NULL, &GU)
                            : w8a8_all_gather_scaled_mm(c->comm, &XQ, &Bgu, &SX, &Sgu, NULL, NULL, &GU, NULL, &o));
    cudaEventRecord(c->ev[e++], c->st);
    note(c, "silu_mul_quantize", w8a8_silu_mul_quantize(c->h, &GU, &MQ, TOK, &SMQ, NULL, NULL));
    cudaEventRecord(c->ev[e++], c->st);
    note(c, "down", gemm ? w8a8_scaled_mm(c->h, &MQ, &Bd, &SMQ, &Sd, NULL, NULL, &P)
                         : w8a8_scaled_mm_reduce_scatter(c->comm, &MQ, &Bd, &SMQ, &Sd, NULL, NULL, &X, &o));
    cudaEventRecord(c->ev[e++], c->st);
  }
}

static void barrier(rank_ctx *c) {
  if (c->g) {
    pthread_barrier_wait(&c->g->bar);
    return;
  }
#ifdef W8A8_HAVE_MPI
  MPI_Barrier(MPI_COMM_WORLD);
#endif
}

/* The modes take turns in ROUNDS rounds of iters / ROUNDS timed iterations each: run one after the
 * other, gemm_only (first) would meet a cooler GPU than fused (last), since the H200's clock sinks under
 * its power limit as a run goes on, which flattered the fused / gemm_only ratios. */
#define ROUNDS 3
static int round_begin(int iters, int rounds, int k) { return (int)((int64_t)iters * k / rounds); }

/* warmup + n passes, timed ones stored at iterations it0 .. it0 + n - 1 of `mode` (of `iters`); each
 * starts with every rank idle and together. */
static void run_mode(rank_ctx *c, int64_t M, int mode, int warmup, int it0, int n, int iters) {
  cudaSetDevice(c->device);
  for (int it = -warmup; it < n; it++) {
    cudaStreamSynchronize(c->st);
    barrier(c);
    stack_once(c, M, mode);
    cudaError_t ce = cudaStreamSynchronize(c->st);
    if (ce != cudaSuccess && !c->failed) {
      c->failed = 1;
      snprintf(c->err, sizeof c->err, "rank %d: device error: %s", c->rank, cudaGetErrorString(ce));
    }
    if (it < 0) continue;
    const size_t at = (size_t)mode * (size_t)iters + (size_t)(it0 + it);
    float ms = 0;
    cudaEventElapsedTime(&ms, c->ev[0], c->ev[c->L * NOPS]);
    c->tot[at] = ms;
    for (int k = 0; k < NOPS; k++) {
      double s = 0;
      for (int l = 0; l < c->L; l++) {
        float t = 0;
        cudaEventElapsedTime(&t, c->ev[l * NOPS + k], c->ev[l * NOPS + k + 1]);
        s += t;
      }
      c->ops[at * NOPS + k] = s;
    }
  }
}

typedef struct job {
  rank_ctx *c;
  int64_t M;
  int mode, warmup, it0, n, iters;
} job;
static void *worker(void *v) {
  job *j = v;
  run_mode(j->c, j->M, j->mode, j->warmup, j->it0, j->n, j->iters);
  return NULL;
}

static double median(double *v, int n) { return n > 0 ? cli_median(v, n) : 0; }

/* The result of one (tokens, mode): the slowest rank per iteration; p20 / p50 / p80 over iterations of the
 * stack, the median of each op (ms). total = total_t.p50. */
typedef struct result {
  double total, ops[NOPS];
  cli_stats total_t;
  int failed;
} result;

static result reduce_local(rank_ctx *cs, int W, int iters, int mode) {
  result r;
  memset(&r, 0, sizeof r);
  double *v = malloc(sizeof(double) * (size_t)iters);
  if (!v) {
    r.failed = 1;
    return r;
  }
  const size_t base = (size_t)mode * (size_t)iters;
  for (int it = 0; it < iters; it++) {
    v[it] = 0;
    for (int q = 0; q < W; q++) v[it] = cs[q].tot[base + it] > v[it] ? cs[q].tot[base + it] : v[it];
  }
  r.total_t = cli_stats_of(v, iters);
  r.total = r.total_t.p50;
  for (int k = 0; k < NOPS; k++) {
    for (int it = 0; it < iters; it++) {
      v[it] = 0;
      for (int q = 0; q < W; q++) {
        double t = cs[q].ops[(base + (size_t)it) * NOPS + k];
        v[it] = t > v[it] ? t : v[it];
      }
    }
    r.ops[k] = median(v, iters) / cs[0].L;
  }
  free(v);
  return r;
}

#ifdef W8A8_HAVE_MPI
/* failed: whether this rank saw a failure in any of the mode's rounds. */
static result reduce_mpi(rank_ctx *c, int iters, int mode, int failed) {
  result r;
  memset(&r, 0, sizeof r);
  double *v = malloc(sizeof(double) * (size_t)iters), *o = malloc(sizeof(double) * (size_t)iters * NOPS);
  int f = failed, any = 0;
  MPI_Allreduce(&f, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  r.failed = any || !v || !o;
  if (v && o) {
    const size_t base = (size_t)mode * (size_t)iters;
    MPI_Allreduce(c->tot + base, v, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(c->ops + base * NOPS, o, iters * NOPS, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    r.total_t = cli_stats_of(v, iters);
    r.total = r.total_t.p50;
    for (int k = 0; k < NOPS; k++) {
      for (int it = 0; it < iters; it++) v[it] = o[(size_t)it * NOPS + k];
      r.ops[k] = median(v, iters) / c->L;
    }
  }
  free(v), free(o);
  return r;
}
#endif

typedef struct run_info {
  int W, gpus, emulated, nccl, L, iters, warmup, partials;
  char device[128], date[32];
} run_info;

static const char *partials_name(const run_info *ri) {
  return ri->partials == W8A8_TP_PARTIALS_OUT ? "out" : "fp32";
}

static void print_header(const run_info *ri, const args *ar) {
  fprintf(cli_tab, "# w8a8 tp-stack: Llama-3.1-70B-FP8 decoder stack, sequence parallel, TP=%d, %s, %d GPU(s) (%s), %s\n",
         ri->W, ri->nccl ? "one rank per process (mpirun, NCCL)" : "ranks as threads (w8a8_comm_create_local)",
         ri->gpus, ri->device, w8a8_version_string());
  if (ri->emulated)
    fprintf(cli_tab, "# EMULATED: %d ranks share %d GPU(s) (shared SMs, HBM-to-HBM copies instead of NVLink): these timings "
           "measure the mechanism, they are NOT TP timings\n",
           ri->W, ri->gpus);
  fprintf(cli_tab, "# per layer: quant_in -> ag_qkv -> quant_attn -> rs_o -> quant_mlp -> ag_gate_up -> silu_mul_q -> "
         "rs_down\n");
  fprintf(cli_tab, "# ATTENTION IS LEFT OUT (quant_attn quantizes the Q columns of the QKV output in its place); residual adds "
         "and RMSNorms left out\n");
  fprintf(cli_tab, "# fp8 e4m3 dummy weights and activations, per-token x per-channel scales, bf16 outputs; %d layers; "
         "p20 / p50 / p80 of %d iterations (after %d warm-up) of the slowest rank, ms (ops: medians); the three "
         "modes take turns in up to %d rounds\n",
         ri->L, ri->iters, ri->warmup, ROUNDS);
  fprintf(cli_tab, "# comm_est = unfused - gemm_only (the API has no collective-only call): an estimate, overheads "
         "included\n");
  fprintf(cli_tab, "# rs partials: %s\n", ri->partials == W8A8_TP_PARTIALS_OUT
                                    ? "out (W8A8_TP_PARTIALS_OUT: bf16 partials, 2 bytes per element moved)"
                                    : "fp32 (W8A8_TP_PARTIALS_FP32: fp32 partials, 4 bytes per element moved)");
  (void)ar;
}

/* The fields of tp-stack's JSON objects after the common ones. */
static void json_stack_keys(cli_jw *w, const run_info *ri) {
  cli_jw_str(w, "model", "llama-3.1-70b-fp8");
  cli_jw_int(w, "world", ri->W);
  cli_jw_int(w, "gpus", ri->gpus);
  cli_jw_bool(w, "emulated", ri->emulated);
  cli_jw_str(w, "transport", ri->nccl ? "nccl" : "local");
  cli_jw_int(w, "layers", ri->L);
  cli_jw_str(w, "attention", "omitted");
  cli_jw_str(w, "partials", partials_name(ri));
}

static void print_mode(int64_t M, const run_info *ri, int mode, const result *r, FILE *json) {
  fprintf(cli_tab, "%7lld %3d %-9s %9.3f %9.3f %9.3f %9.3f |", (long long)M, ri->W, mode_name[mode], r->total_t.p20,
          r->total, r->total_t.p80, r->total / ri->L);
  for (int k = 0; k < NOPS; k++) fprintf(cli_tab, " %9.3f", r->ops[k]);
  fprintf(cli_tab, "%s\n", r->failed ? "  FAILED" : "");
  if (json) {
    cli_jw w;
    cli_row c;
    memset(&c, 0, sizeof c);
    c.command = "tp-stack";
    c.impl = "w8a8_tp_stack";
    c.op = mode_name[mode];
    c.device = ri->device;
    c.device_kind = "gpu";
    c.dtype = "fp8_e4m3";
    c.M = M, c.N = -1, c.K = -1; /* the stack has many shapes: M tokens, no single N or K */
    c.kernel = "auto";
    c.iters = ri->iters;
    c.warmup = ri->warmup;
    c.t.p20 = r->total_t.p20 * 1e3, c.t.p50 = r->total_t.p50 * 1e3, c.t.p80 = r->total_t.p80 * 1e3;
    c.t.n = r->total_t.n;
    if (r->total_t.p50 < 0) c.t = cli_stats_failed();
    c.wrong = 0;
    cli_json_row_begin(&w, json, &c);
    cli_jw_str(&w, "mode", mode_name[mode]);
    json_stack_keys(&w, ri);
    cli_jw_num(&w, "layer_p50_us", r->total / ri->L * 1e3);
    for (int k = 0; k < NOPS; k++) {
      char key[48];
      snprintf(key, sizeof key, "%s_p50_us", op_name[k]); /* per layer */
      cli_jw_num(&w, key, r->ops[k] * 1e3);
    }
    cli_jw_bool(&w, "failed", r->failed);
    cli_jw_end(&w);
  }
}

/* The comparison of one token count: speedup, comm estimate, the per-op target. */
static void print_summary(int64_t M, const run_info *ri, const result *res, FILE *json) {
  const result *g = &res[MODE_GEMM], *u = &res[MODE_UNFUSED], *f = &res[MODE_FUSED];
  const double speedup = f->total > 0 ? u->total / f->total : 0;
  double comm = 0, ratio[4];
  for (int i = 0; i < 4; i++) {
    const int k = coll_ops[i];
    double c = u->ops[k] - g->ops[k];
    if (c < 0) c = 0;
    comm += c;
    const double bound = g->ops[k] > c ? g->ops[k] : c;
    ratio[i] = bound > 0 ? f->ops[k] / bound : 0;
  }
  fprintf(cli_tab, "# summary %lld tokens, TP=%d%s: unfused %.3f ms, fused %.3f ms, speedup %.3fx (fused %.1f%% faster); "
         "gemm_only %.3f ms; comm_est %.3f ms/layer\n",
         (long long)M, ri->W, ri->emulated ? " (EMULATED)" : "", u->total, f->total, speedup,
         f->total > 0 ? 100.0 * (u->total - f->total) / u->total : 0.0, g->total, comm);
  fprintf(cli_tab, "#   fused op / max(gemm, comm_est) (target <= 1.05): ag_qkv %.3f  rs_o %.3f  ag_gate_up %.3f  rs_down %.3f\n",
         ratio[0], ratio[1], ratio[2], ratio[3]);
  if (ri->W == 4 && M == 8192)
    fprintf(cli_tab, "#   target (TP=4, 8192 tokens): stack >= 15%% faster fused than unfused: %s%s\n",
           u->total >= 1.15 * f->total ? "MET" : "NOT MET", ri->emulated ? " (emulated: not the real target)" : "");
  if (json) {
    cli_jw w;
    cli_jw_begin(&w, json);
    cli_jw_str(&w, "type", "summary");
    cli_jw_str(&w, "command", "tp-stack");
    cli_jw_str(&w, "device", ri->device);
    cli_jw_int(&w, "M", M);
    json_stack_keys(&w, ri);
    cli_jw_num(&w, "unfused_p50_us", u->total * 1e3);
    cli_jw_num(&w, "fused_p50_us", f->total * 1e3);
    cli_jw_num(&w, "gemm_only_p50_us", g->total * 1e3);
    cli_jw_num(&w, "speedup", speedup);
    cli_jw_num(&w, "comm_est_layer_us", comm * 1e3);
    cli_jw_bool(&w, "comm_estimated", 1);
    cli_jw_num(&w, "fused_over_bound_qkv", ratio[0]);
    cli_jw_num(&w, "fused_over_bound_o", ratio[1]);
    cli_jw_num(&w, "fused_over_bound_gate_up", ratio[2]);
    cli_jw_num(&w, "fused_over_bound_down", ratio[3]);
    cli_jw_bool(&w, "failed", g->failed | u->failed | f->failed);
    cli_jw_end(&w);
  }
}

/* One line per token count at the end: the numbers users quote, side by side. */
static void print_final(const run_info *ri, const args *ar, result (*res)[NMODES]) {
  fprintf(cli_tab, "# final (TP=%d%s, %d layers, ms for the stack):\n", ri->W, ri->emulated ? ", EMULATED" : "", ri->L);
  fprintf(cli_tab, "# %6s %3s %11s %11s %8s %13s %18s\n", "tokens", "W", "unfused_ms", "fused_ms", "speedup", "gemm_only_ms",
         "comm_est_ms/layer");
  for (int t = 0; t < ar->nT; t++) {
    const result *r = res[t];
    double comm = 0;
    for (int i = 0; i < 4; i++) {
      const double c = r[MODE_UNFUSED].ops[coll_ops[i]] - r[MODE_GEMM].ops[coll_ops[i]];
      comm += c > 0 ? c : 0;
    }
    fprintf(cli_tab, "# %6lld %3d %11.3f %11.3f %7.3fx %13.3f %18.3f\n", (long long)ar->tokens[t], ri->W, r[MODE_UNFUSED].total,
           r[MODE_FUSED].total, r[MODE_FUSED].total > 0 ? r[MODE_UNFUSED].total / r[MODE_FUSED].total : 0.0,
           r[MODE_GEMM].total, comm);
  }
}

static void print_columns(void) {
  fprintf(cli_tab, "# %5s %3s %-9s %9s %9s %9s %9s |", "tokens", "W", "mode", "stack_p20", "stack_p50", "stack_p80",
          "layer_ms");
  for (int k = 0; k < NOPS; k++) fprintf(cli_tab, " %9s", op_name[k]);
  fprintf(cli_tab, "   (op columns: ms per layer)\n");
}

static int64_t max_tokens(const args *ar) {
  int64_t m = 0;
  for (int i = 0; i < ar->nT; i++) m = ar->tokens[i] > m ? ar->tokens[i] : m;
  return m;
}

static void fill_info(run_info *ri, const args *ar, w8a8_handle *h) {
  w8a8_handle_info info;
  memset(&info, 0, sizeof info);
  w8a8_get_info(h, &info);
  snprintf(ri->device, sizeof ri->device, "%s", info.name);
  cli_iso_date(ri->date, sizeof ri->date);
  ri->L = ar->layers, ri->iters = ar->iters, ri->warmup = ar->warmup, ri->partials = ar->partials;
}

/* -o, opened by the printing process before anything is measured: 0, or 1 after a message. */
static int open_json(const args *ar, FILE **json) { return cli_out_open("tp-stack", ar->out_path, json) != 0; }
/* Closes -o: 0, or 1 (with a message) if any of it was not written. A second call is a no-op. */
static int close_json(const args *ar, FILE *json) { return cli_out_close("tp-stack", ar->out_path, json) != 0; }

/* --local: W threads, one per rank. */
static int run_local(const args *ar, int ndev) {
  const int W = ar->W ? ar->W : (ndev >= 2 ? (ndev > MAXW_LOCAL ? MAXW_LOCAL : ndev) : 2);
  if (2048 % W) {
    fprintf(stderr, "w8a8 tp-stack: W = %d does not divide 2048\n", W);
    return CLI_EXIT_USAGE;
  }
  FILE *json = NULL;
  if (open_json(ar, &json)) return CLI_EXIT_FAIL;
  static rank_ctx cs[MAXW_LOCAL];
  static group g;
  memset(cs, 0, sizeof cs);
  g.W = W;
  const int64_t maxM = max_tokens(ar);
  w8a8_handle *hs[MAXW_LOCAL];
  w8a8_comm *comms[MAXW_LOCAL];
  w8a8_status s = W8A8_SUCCESS;
  int ok = 1;
  for (int r = 0; r < W && ok; r++) {
    rank_ctx *c = &cs[r];
    c->rank = r, c->W = W, c->device = r % ndev, c->L = ar->layers, c->g = &g, c->partials = ar->partials;
    cudaSetDevice(c->device);
    s = w8a8_create(&c->h, W8A8_DEVICE_CUDA, c->device);
    if (s != W8A8_SUCCESS) break;
    hs[r] = c->h;
    if (cudaStreamCreateWithFlags(&c->st, cudaStreamNonBlocking) != cudaSuccess ||
        (s = w8a8_set_stream(c->h, c->st)) != W8A8_SUCCESS || !rank_alloc(c, maxM, ar->iters)) {
      fprintf(stderr, "w8a8 tp-stack: rank %d: could not allocate its weights and buffers on GPU %d (%s)\n", r,
              c->device, cudaGetErrorString(cudaGetLastError()));
      ok = 0;
    }
  }
  if (ok && s == W8A8_SUCCESS) s = w8a8_comm_create_local(comms, hs, W);
  for (int r = 0; r < W && ok && s == W8A8_SUCCESS; r++) {
    cs[r].comm = comms[r];
    /* AG: M and K = 8192 bound the gathered rows; RS: N = 8192 the partials */
    s = w8a8_comm_reserve(comms[r], maxM, HIDDEN, HIDDEN);
  }
  if (s != W8A8_SUCCESS) {
    fprintf(stderr, "w8a8 tp-stack: %s: %s\n", w8a8_status_name(s), w8a8_last_error());
    ok = 0;
  }
  int rc = CLI_EXIT_OK;
  if (ok) {
    /* the uploads ran on the legacy stream; the ranks' streams are non-blocking */
    for (int d = 0; d < ndev && d < W; d++) cudaSetDevice(d), cudaDeviceSynchronize();
    run_info ri;
    memset(&ri, 0, sizeof ri);
    ri.W = W, ri.gpus = ndev < W ? ndev : W, ri.emulated = ndev < W;
    fill_info(&ri, ar, cs[0].h);
    cli_json_header(json, "tp-stack", ar->argc, ar->argv);
    print_header(&ri, ar);
    print_columns();
    pthread_barrier_init(&g.bar, NULL, (unsigned)W);
    static result all[MAXT][NMODES];
    const int rounds = ar->iters < ROUNDS ? ar->iters : ROUNDS;
    for (int t = 0; t < ar->nT; t++) {
      result *res = all[t];
      int failed[NMODES] = {0};
      for (int k = 0; k < rounds; k++)
        for (int m = 0; m < NMODES; m++) {
          pthread_t th[MAXW_LOCAL];
          job jb[MAXW_LOCAL];
          const int it0 = round_begin(ar->iters, rounds, k), it1 = round_begin(ar->iters, rounds, k + 1);
          for (int r = 0; r < W; r++) {
            jb[r].c = &cs[r], jb[r].M = ar->tokens[t], jb[r].mode = m, jb[r].warmup = k == 0 ? ar->warmup : 1,
            jb[r].it0 = it0, jb[r].n = it1 - it0, jb[r].iters = ar->iters;
            pthread_create(&th[r], NULL, worker, &jb[r]);
          }
          for (int r = 0; r < W; r++) pthread_join(th[r], NULL);
          for (int r = 0; r < W; r++)
            if (cs[r].failed) {
              fprintf(stderr, "w8a8 tp-stack: %s\n", cs[r].err);
              cs[r].failed = 0;
              failed[m] = 1;
              rc = CLI_EXIT_FAIL;
            }
        }
      for (int m = 0; m < NMODES; m++) {
        res[m] = reduce_local(cs, W, ar->iters, m);
        res[m].failed |= failed[m];
        print_mode(ar->tokens[t], &ri, m, &res[m], json);
      }
      print_summary(ar->tokens[t], &ri, res, json);
    }
    pthread_barrier_destroy(&g.bar);
    print_final(&ri, ar, all);
    if (close_json(ar, json)) rc = CLI_EXIT_FAIL;
    json = NULL;
    fprintf(cli_tab, "# %s\n", rc == CLI_EXIT_OK ? "ok" : "FAILED: a call failed or -o was not written (see stderr)");
  } else {
    rc = CLI_EXIT_FAIL;
  }
  close_json(ar, json);
  for (int r = 0; r < W; r++) {
    if (cs[r].h) cudaSetDevice(cs[r].device), cudaDeviceSynchronize();
    if (cs[r].comm) w8a8_comm_destroy(cs[r].comm);
  }
  for (int r = 0; r < W; r++) {
    if (!cs[r].h) continue;
    cudaSetDevice(cs[r].device);
    rank_free(&cs[r]);
    w8a8_destroy(cs[r].h);
    if (cs[r].st) cudaStreamDestroy(cs[r].st);
  }
  return rc;
}

#ifdef W8A8_HAVE_MPI
/* --nccl: this process is one rank of MPI_COMM_WORLD. */
static int run_nccl(const args *ar, int ndev) {
  int inited = 0, provided = 0, rank = 0, W = 1, local = 0;
  MPI_Initialized(&inited);
  if (!inited) MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  /* -o on rank 0 before anything else; every rank learns the outcome before the collective work */
  FILE *json = NULL;
  int json_ok = !(rank == 0 && open_json(ar, &json));
  MPI_Bcast(&json_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!json_ok) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
    return CLI_EXIT_FAIL;
  }
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &local);
  MPI_Comm_free(&node);
  int rc = CLI_EXIT_OK, ok = 1;
  if (W > MAXW || 2048 % W) {
    if (rank == 0) fprintf(stderr, "w8a8 tp-stack --nccl: %d ranks; the world size must divide 2048 (at most %d)\n", W, MAXW);
    ok = 0;
  }
  static rank_ctx c;
  memset(&c, 0, sizeof c);
  c.rank = rank, c.W = W, c.device = local % ndev, c.L = ar->layers, c.g = NULL, c.partials = ar->partials;
  w8a8_status s = W8A8_SUCCESS;
  if (ok) {
    cudaSetDevice(c.device);
    s = w8a8_create(&c.h, W8A8_DEVICE_CUDA, c.device);
    if (s == W8A8_SUCCESS && (cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking) != cudaSuccess ||
                              w8a8_set_stream(c.h, c.st) != W8A8_SUCCESS || !rank_alloc(&c, max_tokens(ar), ar->iters))) {
      fprintf(stderr, "w8a8 tp-stack: rank %d: could not allocate its weights and buffers on GPU %d\n", rank, c.device);
      ok = 0;
    }
  }
  int all = ok && s == W8A8_SUCCESS;
  MPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all) s = w8a8_comm_create_world(&c.comm, c.h);
  if (all && s == W8A8_SUCCESS) s = w8a8_comm_reserve(c.comm, max_tokens(ar), HIDDEN, HIDDEN);
  if (all && s != W8A8_SUCCESS) fprintf(stderr, "w8a8 tp-stack: rank %d: %s: %s\n", rank, w8a8_status_name(s), w8a8_last_error());
  int ok2 = all && s == W8A8_SUCCESS;
  MPI_Allreduce(MPI_IN_PLACE, &ok2, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (ok2) {
    cudaDeviceSynchronize();
    run_info ri;
    memset(&ri, 0, sizeof ri);
    /* one GPU per process (NCCL refuses two ranks on one GPU) */
    ri.W = W, ri.nccl = 1, ri.gpus = W, ri.emulated = 0;
    fill_info(&ri, ar, c.h);
    if (rank == 0) {
      cli_json_header(json, "tp-stack", ar->argc, ar->argv);
      print_header(&ri, ar);
      print_columns();
    }
    static result all[MAXT][NMODES];
    const int rounds = ar->iters < ROUNDS ? ar->iters : ROUNDS;
    for (int t = 0; t < ar->nT; t++) {
      result *res = all[t];
      int failed[NMODES] = {0};
      for (int k = 0; k < rounds; k++)
        for (int m = 0; m < NMODES; m++) {
          const int it0 = round_begin(ar->iters, rounds, k), it1 = round_begin(ar->iters, rounds, k + 1);
          run_mode(&c, ar->tokens[t], m, k == 0 ? ar->warmup : 1, it0, it1 - it0, ar->iters);
          if (c.failed) fprintf(stderr, "w8a8 tp-stack: %s\n", c.err);
          failed[m] |= c.failed;
          c.failed = 0;
        }
      for (int m = 0; m < NMODES; m++) {
        res[m] = reduce_mpi(&c, ar->iters, m, failed[m]);
        if (res[m].failed) rc = CLI_EXIT_FAIL;
        if (rank == 0) print_mode(ar->tokens[t], &ri, m, &res[m], json);
      }
      if (rank == 0) print_summary(ar->tokens[t], &ri, res, json);
    }
    if (rank == 0) {
      print_final(&ri, ar, all);
      if (close_json(ar, json)) rc = CLI_EXIT_FAIL;
      json = NULL;
      fprintf(cli_tab, "# %s\n", rc == CLI_EXIT_OK ? "ok" : "FAILED: a call failed or -o was not written (see stderr)");
    }
  } else {
    rc = CLI_EXIT_FAIL;
  }
  close_json(ar, json);
  if (c.h) cudaDeviceSynchronize();
  if (c.comm) w8a8_comm_destroy(c.comm);
  if (c.h) {
    rank_free(&c);
    w8a8_destroy(c.h);
    if (c.st) cudaStreamDestroy(c.st);
  }
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
  return rc;
}
#endif

int w8a8_cli_tp_stack(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  args ar;
  const int pr = parse(argc, argv, &ar); /* before any device or MPI work */
  if (pr) return pr == 1 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  const int ndev = w8a8_cuda_device_count();
  if (ndev < 1) {
    fprintf(stderr, "w8a8 tp-stack: no CUDA device visible; the layer-stack benchmark needs at least one GPU "
                    "(with one GPU the ranks are emulated on it)\n");
    return CLI_EXIT_FAIL;
  }
  if (ar.nccl) {
#ifdef W8A8_HAVE_MPI
    return run_nccl(&ar, ndev);
#else
    fprintf(stderr, "w8a8 tp-stack --nccl: this build has no MPI (install libopenmpi-dev and rebuild)\n");
    return CLI_EXIT_FAIL;
#endif
  }
  return run_local(&ar, ndev);
}
#endif /* W8A8_HAVE_CUDA */
