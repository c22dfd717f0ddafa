/* tp_bench_gpu.c — `w8a8 tp-bench --local W` and `mpirun -np W w8a8 tp-bench --nccl`: the fused
 * tensor-parallel operations on GPU ranks.
 *
 *   --local W   W ranks as threads of this process (w8a8_comm_create_local: copy-engine
 *               transport). Rank r on device (D + r) % ndev (D = --device, default 0): on a
 *               machine with W GPUs every rank has its own GPU and the copies go over NVLink
 *               (peer access). --one-gpu puts every rank on device D: emulated ranks sharing one
 *               GPU's SMs, HBM-to-HBM copies (the mechanism, not multi-GPU performance).
 *   --nccl      one rank per process under mpirun (w8a8_comm_create_world with a CUDA handle:
 *               NCCL send/recv on the side stream). Rank r on device (node-local rank) % ndev;
 *               two ranks on one GPU are refused (NCCL cannot do it). Rank 0 prints and writes.
 *
 * For the Llama-3.1-70B linear layers at TP = W (column-parallel QKV and gate_up through
 * w8a8_all_gather_scaled_mm, row-parallel O and down through w8a8_scaled_mm_reduce_scatter),
 * for each M, on the same data, every rank at once:
 *   gemm     each rank's whole local GEMM (w8a8_scaled_mm on the gathered [M, K] input, or the
 *            partial [M, N] of the row-parallel layer: fp32, or bf16 with --partials out);
 *   comm     each rank's communication alone, the same chunks as the library: AG the W-1 peers'
 *            rows and scales, RS this rank's partial rows of each peer (4-byte fp32 elements, or
 *            2-byte bf16 ones with --partials out: the same count, half the bytes). --local:
 *            cudaMemcpyAsync (pull for AG, push for RS, as the library); --nccl: grouped
 *            ncclSend/ncclRecv per step, on a communicator of the bench's own;
 *   unfused  the library call with overlap = 0 (communication, then the GEMMs);
 *   fused    the library call with overlap = 1;
 *   auto     the schedule one call with W8A8_TP_OVERLAP_AUTO (the default) ran, as the agreement chose it;
 * and overlap = (unfused - fused) / min(gemm, comm). Timing: each rank records a CUDA event
 * pair around every iteration on its stream (iterations back to back after warm-up, a host
 * barrier and a stream sync); an iteration's time is the slowest rank's, and each reported time
 * is the median over iterations (microseconds).
 * #wrong: elements where fused and unfused differ in any bit, plus, for the all-gather, elements
 * that differ from the GEMM alone (exact for int8, 2^-7 relative + 1e-3 for fp8), summed over
 * the ranks. Exit code 1 if any. JSON lines also record "gpus" (distinct devices), "emulated"
 * (true only when ranks share a GPU), "transport" and "partials".
 * --partials fp32|out: w8a8_tp_options.partials of the library's reduce-scatter calls (fused and
 * unfused; W8A8_TP_PARTIALS_FP32 by default, W8A8_TP_PARTIALS_OUT: bf16 partials), and the element
 * size of the RS gemm and comm baselines. The all-gather ignores it.
 * --graph (--local only): each of the four is captured once into ONE CUDA
 * graph holding every rank's call (w8a8.h's model: a capture begun on a stream of rank 0's device, each rank's
 * stream forked from it, each rank's thread makes its call, the streams joined back), after the eager warm-up;
 * then replayed back to back, each replay between two events on that stream: the median replay time. What a
 * serving stack that captures its decode / prefill steps sees (no host work per call). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cli_common.h"
#include "w8a8.h"

int w8a8_cli_tp_bench_gpu(int argc, char **argv);

/* ---- the command line (parsed before any device or MPI work, also in a build without CUDA) ---- */

#define MAXW 8
#define MAX_ITERS 1000
#define MAX_WARMUP 10000
#define MAX_M 32

typedef struct args {
  int W, device, one_gpu, nccl, div, warmup, iters, do_int8, do_fp8, graph;
  int partials; /* W8A8_TP_PARTIALS_FP32 or _OUT (--partials fp32|out) */
  int64_t Ms[MAX_M];
  int nM;
  const char *only, *out_path;
} args;

static void usage(FILE *f) {
  fprintf(f,
          "usage: w8a8 tp-bench --local W [options]             W GPU ranks as threads (1..%d), rank r on GPU\n"
          "                                                     (D + r) %% ndev\n"
          "       mpirun -np W w8a8 tp-bench --nccl [options]   one rank per process and GPU (NCCL)\n"
          "  --device D    first CUDA device of --local (default 0)\n"
          "  --one-gpu     --local: every rank on device D (emulated ranks sharing one GPU)\n"
          "  -m M[,M...]   rows of the layer (tokens), up to %d values in 1..%d, default 1024,4096,8192\n"
          "  -d DTYPE      int8, fp8 or both (default both)\n"
          "  -s DIV        divide the 70B shapes' N and K by DIV (default 1: the real shapes); at most\n"
          "                %lld / W, so that every rank keeps at least one row of each sharded N or K\n"
          "  --shape NAME  only 70b-qkv, 70b-o, 70b-gate_up or 70b-down\n"
          "  -w N, -n N    warmup and timed iterations (default 3, 20; -w 0..%d, -n 1..%d)\n"
          "  --partials P  the reduce-scatter's partials: fp32 (default) or out (rounded to the bf16 out\n"
          "                before they travel: half the bytes); sets w8a8_tp_options.partials of the\n"
          "                fused and unfused calls and the element size of the RS gemm/comm baselines\n"
          "  --graph       --local: time replays of one CUDA graph holding every rank's call\n"
          "  -o FILE       also write JSON lines (rank 0 under --nccl)\n"
          "  -h, --help    this text\n",
          MAXW, MAX_M, INT32_MAX, (long long)cli_tp_min_dim(), MAX_WARMUP, MAX_ITERS);
}

/* -s DIV with W ranks: 0, or 2 after reporting why not. */
static int check_div(const args *ar, int W, int print) {
  const int64_t div_max = cli_tp_min_dim() / (W > 0 ? W : 1);
  if (ar->div <= div_max) return 0;
  if (print) {
    fprintf(stderr,
            "w8a8 tp-bench: -s %d: at most %lld with %d rank%s (every shape's N/DIV and K/DIV must be at least the "
            "rank count)\n\n",
            ar->div, (long long)div_max, W, W == 1 ? "" : "s");
    usage(stderr);
  }
  return 2;
}

#define PARSE_ERR(...)                      \
  do {                                      \
    if (cli_reporting_rank()) {                        \
      fprintf(stderr, "w8a8 tp-bench: ");   \
      fprintf(stderr, __VA_ARGS__);         \
      fprintf(stderr, "\n\n");              \
      usage(stderr);                        \
    }                                       \
    return 2;                               \
  } while (0)

/* 0: run; 1: -h (the caller prints the usage on stdout); 2: a bad command line (reported). */
static int parse(int argc, char **argv, args *ar) {
  memset(ar, 0, sizeof *ar);
  ar->W = 2, ar->div = 1, ar->warmup = 3, ar->iters = 20, ar->do_int8 = ar->do_fp8 = 1;
  int local = 0;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) return 1;
    if (!strcmp(o, "--nccl")) {
      ar->nccl = 1;
      continue;
    }
    if (!strcmp(o, "--one-gpu")) {
      ar->one_gpu = 1;
      continue;
    }
    if (!strcmp(o, "--graph")) {
      ar->graph = 1;
      continue;
    }
    static const char *const with_value[] = {"--local", "--gpu", "--device", "-m", "-d", "-s",
                                             "--shape", "-w",    "-n",       "-o", "--partials"};
    int known = 0;
    for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++) known |= !strcmp(o, with_value[k]);
    if (!known) {
      if (!strcmp(o, "-t")) PARSE_ERR("-t is an option of CPU ranks (mpirun without --local or --nccl)");
      PARSE_ERR("unknown option '%s'", o);
    }
    if (i + 1 >= argc) PARSE_ERR("%s needs a value", o);
    const char *v = argv[++i];
    int64_t x = 0;
    if (!strcmp(o, "--local") || !strcmp(o, "--gpu")) {
      if (!cli_parse_i64(v, 1, MAXW, &x)) PARSE_ERR("%s takes 1..%d ranks, got '%s'", o, MAXW, v);
      ar->W = (int)x;
      local = 1;
    } else if (!strcmp(o, "--device")) {
      if (!cli_parse_i64(v, 0, 1023, &x)) PARSE_ERR("--device takes a CUDA device 0..1023, got '%s'", v);
      ar->device = (int)x;
    } else if (!strcmp(o, "-m")) {
      if ((ar->nM = cli_parse_i64_list(v, 1, INT32_MAX, ar->Ms, MAX_M)) < 0)
        PARSE_ERR("-m takes a comma list of up to %d row counts in 1..%d, got '%s'", MAX_M, INT32_MAX, v);
    } else if (!strcmp(o, "-d")) {
      ar->do_int8 = !strcmp(v, "int8") || !strcmp(v, "both");
      ar->do_fp8 = !strcmp(v, "fp8") || !strcmp(v, "both");
      if (!ar->do_int8 && !ar->do_fp8) PARSE_ERR("-d is int8, fp8 or both, got '%s'", v);
    } else if (!strcmp(o, "-s")) {
      if (!cli_parse_i64(v, 1, cli_tp_min_dim(), &x))
        PARSE_ERR("-s takes 1..%lld (and at most %lld / W with W ranks), got '%s'", (long long)cli_tp_min_dim(),
                  (long long)cli_tp_min_dim(), v);
      ar->div = (int)x;
    } else if (!strcmp(o, "--shape")) {
      int k = 0;
      while (k < CLI_TP_NSHAPES && strcmp(v, cli_tp_shapes[k].name)) k++;
      if (k == CLI_TP_NSHAPES) PARSE_ERR("--shape is %s, got '%s'", cli_tp_shape_names(), v);
      ar->only = v;
    } else if (!strcmp(o, "-w")) {
      if (!cli_parse_i64(v, 0, MAX_WARMUP, &x)) PARSE_ERR("-w takes 0..%d warm-up iterations, got '%s'", MAX_WARMUP, v);
      ar->warmup = (int)x;
    } else if (!strcmp(o, "-n")) {
      if (!cli_parse_i64(v, 1, MAX_ITERS, &x)) PARSE_ERR("-n takes 1..%d timed iterations, got '%s'", MAX_ITERS, v);
      ar->iters = (int)x;
    } else if (!strcmp(o, "-o")) {
      ar->out_path = v;
    } else { /* --partials */
      if (!strcmp(v, "fp32"))
        ar->partials = W8A8_TP_PARTIALS_FP32;
      else if (!strcmp(v, "out"))
        ar->partials = W8A8_TP_PARTIALS_OUT;
      else
        PARSE_ERR("--partials is fp32 or out, got '%s'", v);
    }
  }
  if (ar->nccl && (local || ar->one_gpu || ar->graph)) /* --nccl: W is mpirun's -np, one GPU per rank */
    PARSE_ERR("--nccl runs one rank per MPI process and GPU (W = mpirun's -np): %s does not go with it",
              local ? "--local" : ar->one_gpu ? "--one-gpu" : "--graph");
  if (!ar->nM) ar->Ms[0] = 1024, ar->Ms[1] = 4096, ar->Ms[2] = 8192, ar->nM = 3;
  /* --local: W is known now (--nccl: run_nccl checks -s against the world size) */
  if (!ar->nccl && check_div(ar, ar->W, cli_reporting_rank())) return 2;
  return 0;
}
#undef PARSE_ERR

#ifndef W8A8_HAVE_CUDA
int w8a8_cli_tp_bench_gpu(int argc, char **argv) {
  args ar;
  const int pr = parse(argc, argv, &ar);
  if (pr == 1) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  if (pr) return CLI_EXIT_USAGE;
  fprintf(stderr, "w8a8 tp-bench --local/--nccl: this build has no CUDA\n");
  return CLI_EXIT_FAIL;
}
#else
#include <cuda_runtime.h>
#if defined(W8A8_HAVE_MPI) && defined(W8A8_HAVE_NCCL)
#define TPB_NCCL 1
#include <mpi.h>
#include <nccl.h>
#endif

const char *w8a8_tp_transport(const w8a8_comm *c, const char **why); /* src/tp (hidden; static link) */
int w8a8_tp_gpu_trace(const w8a8_comm *c, float *us, char *kinds, int max); /* src/tp (hidden; W8A8_TP_TRACE) */
int w8a8_tp_gpu_trace_host(const w8a8_comm *c, float *us, int max);          /* the marks' enqueue times */
int w8a8_tp_gpu_poison_ws(const w8a8_comm *c, int v);                         /* --graph: (hidden) */
int w8a8_tp_last_fuse(const w8a8_comm *c); /* (hidden) the schedule of the last call: 1 fused, 0 unfused, -1 none */
int64_t w8a8_tp_crossover(const w8a8_comm *c, int op); /* (hidden) AUTO's crossover in rows, op 1 AG / 2 RS */
const char *w8a8_sm90_last_config(int *split); /* src/cuda/sm90_gemm.cu (hidden): the process's last sm90 launch */

typedef cli_tp_shape shape;
#define k_shapes cli_tp_shapes

/* ---- data ------------------------------------------------------------------------------- */

static uint64_t rng(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* n random 8-bit values (fp8: |x| < 16, no NaN), 8 per generator step: the 70B weights are
 * hundreds of MB per rank. */
static uint8_t *host_q8(int64_t n, int fp8, uint64_t seed) {
  uint8_t *h = malloc((size_t)n + 8);
  if (!h) return NULL;
  for (int64_t i = 0; i < n; i += 8) {
    uint64_t v = rng(&seed);
    memcpy(h + i, &v, 8);
  }
  if (fp8)
    for (int64_t i = 0; i < n; i++) h[i] = (uint8_t)((h[i] & 0x80) | (h[i] & 0x7f) % 0x58);
  return h;
}
/* Device copies on the current device. */
static void *dev_copy(const void *h, size_t bytes) {
  void *d = NULL;
  if (!h || cudaMalloc(&d, bytes + 16) != cudaSuccess) return NULL;
  if (cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(d);
    return NULL;
  }
  return d;
}
static void *dev_q8(int64_t n, int fp8, uint64_t seed) {
  uint8_t *h = host_q8(n, fp8, seed);
  void *d = dev_copy(h, (size_t)n);
  free(h);
  return d;
}
static void *dev_scale(int64_t n, float base, uint64_t seed) {
  float *h = malloc(sizeof(float) * (size_t)(n + 1));
  if (!h) return NULL;
  for (int64_t i = 0; i < n; i++) h[i] = base * (0.5f + (float)(rng(&seed) >> 40) * 0x1p-24f);
  void *d = dev_copy(h, sizeof(float) * (size_t)n);
  free(h);
  return d;
}
static void *dev_zero(size_t bytes) {
  void *d = NULL;
  if (cudaMalloc(&d, bytes + 16) != cudaSuccess) return NULL;
  cudaMemset(d, 0, bytes + 16);
  return d;
}

/* ---- ranks ------------------------------------------------------------------------------- */

/* One rank's state; device buffers on its device. */
typedef struct rank_data {
  int dev;
  w8a8_handle *h;
  cudaStream_t st;
  w8a8_comm *comm;
  cudaEvent_t ev0[MAX_ITERS], ev1[MAX_ITERS];
  float t[MAX_ITERS]; /* ms per timed iteration (this rank) */
  int bad;
  int64_t Mr, off, Nr, Kr;
  void *b, *sb;                      /* weights: kept across M */
  void *a_full, *sa_full;            /* AG: the gathered input [M, K] (gemm alone); RS: a [M, Kr] */
  void *out_f, *out_u, *gemm_out, *scratch;
  w8a8_matrix A, B, OF, OU, GO, AF;
  w8a8_vector SA, SB, SAF;
} rank_data;

typedef struct group {
  int W, nccl, me; /* me: this process's rank (--nccl); --local: all W ranks live here */
  int ag, iters, warmup, op; /* op: 0 gemm, 1 comm, 2 unfused, 3 fused */
  int graph;                 /* --graph: time captured replays (time_op_graph) */
  int partials;              /* RS: W8A8_TP_PARTIALS_FP32 or _OUT */
  int64_t M, N, K;           /* N: AG's whole N (sharded), RS's N; K: AG's K, RS's whole K (sharded) */
  rank_data r[MAXW];
  pthread_barrier_t bar;
  int failed;
  char msg[512];
#ifdef TPB_NCCL
  ncclComm_t nc; /* the bench's own communicator: the "comm alone" measurement */
#endif
} group;

static int lo_rank(const group *g) { return g->nccl ? g->me : 0; }
static int hi_rank(const group *g) { return g->nccl ? g->me + 1 : g->W; }

static pthread_mutex_t g_msg_mu = PTHREAD_MUTEX_INITIALIZER; /* --local: rank threads report here */
static void fail(group *g, int r, const char *what) {
  pthread_mutex_lock(&g_msg_mu);
  g->failed = 1;
  if (!g->msg[0]) snprintf(g->msg, sizeof g->msg, "rank %d: %s", r, what);
  pthread_mutex_unlock(&g_msg_mu);
}

/* RS comm alone: the slot of source rank j in a peer's scratch. */
static int64_t slot_rows(const group *g) { return (g->M + g->W - 1) / g->W; }
/* RS: bytes of one partial element (the bench's outputs are bf16). */
static size_t part_es(const group *g) { return g->partials == W8A8_TP_PARTIALS_OUT ? 2 : 4; }

static int comm_alone(group *g, int r) {
  rank_data *d = &g->r[r];
  const int W = g->W;
  const int64_t K = g->K, N = g->N, S = slot_rows(g);
  if (!g->nccl) {
    for (int s = 1; s < W; s++) {
      if (g->ag) { /* pull peer j's rows and scales into this rank's scratch (as the library) */
        const int j = (r - s + W) % W;
        const rank_data *p = &g->r[j];
        if (p->Mr <= 0) continue;
        uint8_t *dst = d->scratch;
        if (K > 0 && cudaMemcpyAsync(dst + p->off * K, (const uint8_t *)p->a_full + p->off * K, (size_t)(p->Mr * K),
                                     cudaMemcpyDefault, d->st) != cudaSuccess)
          return 1;
        if (cudaMemcpyAsync(dst + g->M * K + 4 * p->off, (const float *)p->sa_full + p->off, 4 * (size_t)p->Mr,
                            cudaMemcpyDefault, d->st) != cudaSuccess)
          return 1;
      } else { /* push this rank's partial rows of peer j into j's scratch (as the library) */
        const int j = (r + s) % W;
        rank_data *p = &g->r[j];
        const size_t es = part_es(g);
        if (p->Mr <= 0) continue;
        if (cudaMemcpyAsync((char *)p->scratch + (size_t)(r * S * N) * es,
                            (const char *)d->gemm_out + (size_t)(p->off * N) * es, es * (size_t)(p->Mr * N),
                            cudaMemcpyDefault, d->st) != cudaSuccess)
          return 1;
      }
    }
    return 0;
  }
#ifdef TPB_NCCL
  int64_t cnt[MAXW], off[MAXW];
  for (int j = 0; j < W; j++) w8a8_tp_shard_rows(g->M, W, j, &off[j], &cnt[j]);
  for (int s = 1; s < W; s++) {
    const int to = (r + s) % W, from = (r - s + W) % W;
    ncclResult_t nr = ncclGroupStart();
    if (g->ag) {
      uint8_t *dst = d->scratch;
      if (cnt[r] > 0) {
        if (K > 0 && nr == ncclSuccess)
          nr = ncclSend((const uint8_t *)d->a_full + off[r] * K, (size_t)(cnt[r] * K), ncclUint8, to, g->nc, d->st);
        if (nr == ncclSuccess)
          nr = ncclSend((const float *)d->sa_full + off[r], (size_t)cnt[r], ncclFloat32, to, g->nc, d->st);
      }
      if (cnt[from] > 0) {
        if (K > 0 && nr == ncclSuccess)
          nr = ncclRecv(dst + off[from] * K, (size_t)(cnt[from] * K), ncclUint8, from, g->nc, d->st);
        if (nr == ncclSuccess)
          nr = ncclRecv(dst + g->M * K + 4 * off[from], (size_t)cnt[from], ncclFloat32, from, g->nc, d->st);
      }
    } else { /* the same element count as the library's partials: fp32, or bf16 (half the bytes) */
      const size_t es = part_es(g);
      const ncclDataType_t nt = es == 2 ? ncclBfloat16 : ncclFloat32;
      if (cnt[to] > 0 && nr == ncclSuccess)
        nr = ncclSend((const char *)d->gemm_out + (size_t)(off[to] * N) * es, (size_t)(cnt[to] * N), nt, to, g->nc,
                      d->st);
      if (cnt[r] > 0 && nr == ncclSuccess)
        nr = ncclRecv((char *)d->scratch + (size_t)(from * S * N) * es, (size_t)(cnt[r] * N), nt, from, g->nc, d->st);
    }
    ncclResult_t ne = ncclGroupEnd();
    if (nr != ncclSuccess || ne != ncclSuccess) return 1;
  }
#endif
  return 0;
}

static int one(group *g, int r) {
  rank_data *d = &g->r[r];
  w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
  o.partials = g->partials;
  w8a8_status s = W8A8_SUCCESS;
  switch (g->op) {
    case 0:
      s = g->ag ? w8a8_scaled_mm(d->h, &d->AF, &d->B, &d->SAF, &d->SB, NULL, NULL, &d->GO)
                : w8a8_scaled_mm(d->h, &d->A, &d->B, &d->SA, &d->SB, NULL, NULL, &d->GO);
      break;
    case 1:
      if (comm_alone(g, r)) {
        fail(g, r, "the communication alone failed to launch");
        return 1;
      }
      return 0;
    case 2:
    case 3:
    case 4: /* 4: W8A8_TP_OVERLAP_AUTO, once (auto_choice) */
      o.overlap = g->op == 4 ? W8A8_TP_OVERLAP_AUTO : g->op == 3;
      s = g->ag ? w8a8_all_gather_scaled_mm(d->comm, &d->A, &d->B, &d->SA, &d->SB, NULL, NULL,
                                            g->op >= 3 ? &d->OF : &d->OU, NULL, &o)
                : w8a8_scaled_mm_reduce_scatter(d->comm, &d->A, &d->B, &d->SA, &d->SB, NULL, NULL,
                                                g->op >= 3 ? &d->OF : &d->OU, &o);
      break;
  }
  if (s != W8A8_SUCCESS) {
    char m[400];
    snprintf(m, sizeof m, "%s: %s", w8a8_status_name(s), w8a8_last_error());
    fail(g, r, m);
  }
  return s != W8A8_SUCCESS;
}

static void barrier(group *g) {
#ifdef TPB_NCCL
  if (g->nccl) {
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
#endif
  pthread_barrier_wait(&g->bar);
}

/* One rank's timed run of g->op: warm-up, stream sync, barrier, then iterations back to back,
 * each between two events of its own; d->t[i] = that iteration's milliseconds. */
static void time_rank(group *g, int r) {
  rank_data *d = &g->r[r];
  cudaSetDevice(d->dev);
  int bad = 0;
  for (int i = 0; i < g->warmup; i++) bad |= one(g, r);
  bad |= cudaStreamSynchronize(d->st) != cudaSuccess;
  barrier(g);
  for (int i = 0; i < g->iters; i++) {
    cudaEventRecord(d->ev0[i], d->st);
    bad |= one(g, r);
    cudaEventRecord(d->ev1[i], d->st);
  }
  cudaError_t e = cudaStreamSynchronize(d->st);
  if (e != cudaSuccess) {
    bad = 1;
    fail(g, r, cudaGetErrorString(e));
  }
  for (int i = 0; i < g->iters; i++) {
    d->t[i] = 0;
    if (cudaEventElapsedTime(&d->t[i], d->ev0[i], d->ev1[i]) != cudaSuccess) bad = 1;
  }
  d->bad = bad;
}

/* A rank thread's work (--local): phase 0 time_rank (the eager timing), 1 the warm-up calls and a stream sync
 * (--graph, before the capture), 2 one call (--graph, inside the capture); bad: a call failed. */
typedef struct job {
  group *g;
  int rank, phase, bad;
} job;
static void *worker(void *v) {
  job *j = v;
  rank_data *d = &j->g->r[j->rank];
  j->bad = 0;
  if (j->phase == 0) {
    time_rank(j->g, j->rank);
    return NULL;
  }
  cudaSetDevice(d->dev);
  if (j->phase == 1) {
    for (int i = 0; i < j->g->warmup; i++) j->bad |= one(j->g, j->rank);
    j->bad |= cudaStreamSynchronize(d->st) != cudaSuccess;
  } else {
    j->bad = one(j->g, j->rank);
  }
  return NULL;
}
/* Every rank's thread of this process on `phase`, joined; nonzero if a thread could not start or a call failed
 * (a rank that cannot start leaves the others' collective calls to the library's timeout). */
static int run_ranks(group *g, int phase) {
  pthread_t th[MAXW];
  job jb[MAXW];
  int bad = 0, started[MAXW];
  for (int r = 0; r < g->W; r++) {
    jb[r].g = g, jb[r].rank = r, jb[r].phase = phase, jb[r].bad = 0;
    started[r] = pthread_create(&th[r], NULL, worker, &jb[r]) == 0;
    if (!started[r]) jb[r].bad = 1;
  }
  for (int r = 0; r < g->W; r++)
    if (started[r]) pthread_join(th[r], NULL);
  for (int r = 0; r < g->W; r++) bad |= jb[r].bad;
  return bad;
}

/* One call with W8A8_TP_OVERLAP_AUTO on every rank (after the checks: it writes the fused output): "fused" or
 * "unfused", the schedule the agreement chose (the same on every rank), or "failed". */
static const char *auto_choice(group *g) {
  g->op = 4;
  int bad = 0;
  if (g->nccl) {
    bad = one(g, g->me);
  } else {
    bad = run_ranks(g, 2);
  }
  for (int r = lo_rank(g); r < hi_rank(g); r++) {
    cudaSetDevice(g->r[r].dev);
    bad |= cudaStreamSynchronize(g->r[r].st) != cudaSuccess;
  }
  const int f = w8a8_tp_last_fuse(g->r[lo_rank(g)].comm);
  return bad ? "failed" : f == 1 ? "fused" : f == 0 ? "unfused" : "?";
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* --graph: before the replays, the op's output on every rank (and for the library's calls each rank's workspace:
 * the gathered rows and scales, the partials) poisoned, so that the check after the timing sees what the replays
 * wrote, not what the eager warm-up left. 0 on success. */
static int poison_for_graph(group *g, int op) {
  int bad = 0;
  for (int r = 0; r < g->W; r++) {
    rank_data *d = &g->r[r];
    cudaSetDevice(d->dev);
    const size_t ob = 2 * (size_t)(g->ag ? g->M * d->Nr : d->Mr * g->N); /* out_f / out_u: bf16 */
    if (op == 2 || op == 3) {
      bad |= w8a8_tp_gpu_poison_ws(d->comm, 0xff) != 0;
      bad |= cudaMemset(op == 3 ? d->out_f : d->out_u, 0xff, ob) != cudaSuccess;
    } else if (op == 0 && g->ag) {
      bad |= cudaMemset(d->gemm_out, 0xff, ob) != cudaSuccess;
    }
    bad |= cudaDeviceSynchronize() != cudaSuccess;
  }
  return bad;
}
/* Time op as replays of one captured graph of every rank's call (--graph, --local): the median replay (us); a
 * failure sets g->failed and returns 0. The times include each replay's fork from and join into s0 across the
 * ranks' devices, and the first replay's launch latency: not comparable one to one with the eager per-rank
 * events. */
static double time_op_graph(group *g, int op) {
  g->op = op;
  int bad = run_ranks(g, 1);
  cudaStream_t s0 = NULL;
  cudaEvent_t fork = NULL, join[MAXW], e0[MAX_ITERS], e1[MAX_ITERS];
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  float t[MAX_ITERS];
  double med = 0;
  memset(join, 0, sizeof join);
  memset(e0, 0, sizeof e0);
  memset(e1, 0, sizeof e1);
  cudaSetDevice(g->r[0].dev);
  bad |= cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking) != cudaSuccess;
  bad |= cudaEventCreateWithFlags(&fork, cudaEventDisableTiming) != cudaSuccess;
  for (int i = 0; i < g->iters && !bad; i++)
    bad |= cudaEventCreate(&e0[i]) != cudaSuccess || cudaEventCreate(&e1[i]) != cudaSuccess;
  for (int r = 0; r < g->W && !bad; r++) {
    cudaSetDevice(g->r[r].dev);
    bad |= cudaEventCreateWithFlags(&join[r], cudaEventDisableTiming) != cudaSuccess;
  }
  if (!bad) {
    cudaSetDevice(g->r[0].dev);
    bad |= cudaStreamBeginCapture(s0, cudaStreamCaptureModeRelaxed) != cudaSuccess;
    if (!bad) {
      cudaEventRecord(fork, s0);
      for (int r = 0; r < g->W; r++) cudaStreamWaitEvent(g->r[r].st, fork, 0);
      bad |= run_ranks(g, 2);
      for (int r = 0; r < g->W; r++) {
        cudaSetDevice(g->r[r].dev);
        cudaEventRecord(join[r], g->r[r].st);
        cudaSetDevice(g->r[0].dev);
        cudaStreamWaitEvent(s0, join[r], 0);
      }
      bad |= cudaStreamEndCapture(s0, &graph) != cudaSuccess || !graph;
    }
  }
  if (!bad) bad |= cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess;
  if (!bad) bad |= poison_for_graph(g, op);
  cudaSetDevice(g->r[0].dev);
  if (!bad) {
    for (int i = 0; i < 2; i++) bad |= cudaGraphLaunch(exec, s0) != cudaSuccess; /* warm replays */
    bad |= cudaStreamSynchronize(s0) != cudaSuccess;
    for (int i = 0; i < g->iters && !bad; i++) {
      cudaEventRecord(e0[i], s0);
      bad |= cudaGraphLaunch(exec, s0) != cudaSuccess;
      cudaEventRecord(e1[i], s0);
    }
    bad |= cudaStreamSynchronize(s0) != cudaSuccess;
    for (int i = 0; i < g->iters && !bad; i++) {
      t[i] = 0;
      bad |= cudaEventElapsedTime(&t[i], e0[i], e1[i]) != cudaSuccess;
    }
  }
  if (bad) {
    cudaError_t ce = cudaGetLastError();
    pthread_mutex_lock(&g_msg_mu);
    if (!g->msg[0])
      snprintf(g->msg, sizeof g->msg, "--graph: op %d could not be captured or replayed (%s)", op, cudaGetErrorString(ce));
    pthread_mutex_unlock(&g_msg_mu);
    g->failed = 1;
  } else {
    qsort(t, (size_t)g->iters, sizeof t[0], cmp_float);
    const int n = g->iters;
    med = 1e3 * (n % 2 ? t[n / 2] : 0.5 * ((double)t[n / 2 - 1] + (double)t[n / 2]));
  }
  cudaSetDevice(g->r[0].dev);
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  for (int i = 0; i < g->iters; i++) {
    if (e0[i]) cudaEventDestroy(e0[i]);
    if (e1[i]) cudaEventDestroy(e1[i]);
  }
  if (fork) cudaEventDestroy(fork);
  for (int r = 0; r < g->W; r++)
    if (join[r]) cudaEventDestroy(join[r]);
  if (s0) cudaStreamDestroy(s0);
  return med;
}

/* Time op on every rank at once: median over iterations of the slowest rank's time (us). */
static double time_op(group *g, int op) {
  if (g->graph && !g->nccl) return time_op_graph(g, op);
  g->op = op;
  float t[MAX_ITERS];
  int bad = 0;
  if (g->nccl) {
#ifdef TPB_NCCL
    time_rank(g, g->me);
    bad = g->r[g->me].bad;
    MPI_Allreduce(g->r[g->me].t, t, g->iters, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    bad = any;
#endif
  } else {
    pthread_barrier_init(&g->bar, NULL, (unsigned)g->W);
    bad |= run_ranks(g, 0);
    pthread_barrier_destroy(&g->bar);
    for (int i = 0; i < g->iters; i++) {
      t[i] = 0;
      for (int r = 0; r < g->W; r++) t[i] = g->r[r].t[i] > t[i] ? g->r[r].t[i] : t[i];
    }
    for (int r = 0; r < g->W; r++) bad |= g->r[r].bad;
  }
  if (bad) g->failed = 1;
  qsort(t, (size_t)g->iters, sizeof t[0], cmp_float);
  const int n = g->iters;
  double med = n % 2 ? t[n / 2] : 0.5 * ((double)t[n / 2 - 1] + (double)t[n / 2]);
  return med * 1e3;
}

static float bf16f(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static void free_rank_m(rank_data *d) {
  void *ps[] = {d->a_full, d->sa_full, d->out_f, d->out_u, d->gemm_out, d->scratch};
  cudaSetDevice(d->dev);
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++)
    if (ps[i]) cudaFree(ps[i]);
  d->a_full = d->sa_full = d->out_f = d->out_u = d->gemm_out = d->scratch = NULL;
}
static void free_rank_b(rank_data *d) {
  cudaSetDevice(d->dev);
  if (d->b) cudaFree(d->b);
  if (d->sb) cudaFree(d->sb);
  d->b = d->sb = NULL;
}

static uint64_t shape_seed(const shape *sh, int fp8) { return 0x5eed + (uint64_t)fp8 * 7u + (uint64_t)(sh - k_shapes) * 131u; }

/* The weight shards of one shape and dtype, on every rank of this process (kept across M). */
static int setup_weights(group *g, const args *ar, const shape *sh, int fp8) {
  const int W = g->W;
  const int64_t Nl = sh->N / ar->div, Kl = sh->K / ar->div;
  const uint64_t seed = shape_seed(sh, fp8);
  int ok = 1;
  for (int r = lo_rank(g); r < hi_rank(g); r++) {
    rank_data *d = &g->r[r];
    int64_t o;
    cudaSetDevice(d->dev);
    if (sh->ag) {
      w8a8_tp_shard_rows(Nl, W, r, &o, &d->Nr);
      d->Kr = Kl;
    } else {
      w8a8_tp_shard_rows(Kl, W, r, &o, &d->Kr);
      d->Nr = Nl;
    }
    d->b = dev_q8(d->Nr * d->Kr, fp8, seed + 7919u * (uint64_t)(r + 1));
    d->sb = dev_scale(d->Nr, fp8 ? 0.125f : 1.0f / 64.0f, seed + 3);
    ok &= d->b && d->sb;
  }
  return ok;
}

static long measure(group *g, const args *ar, const shape *sh, int64_t M, int fp8, FILE *json, const char *devname,
                    const char *date, int gpus, int print) {
  const int W = g->W;
  g->ag = sh->ag;
  g->M = M;
  g->partials = ar->partials;
  g->iters = ar->iters;
  g->warmup = ar->warmup;
  g->graph = ar->graph;
  g->failed = 0;
  g->msg[0] = 0;
  const int64_t Nl = sh->N / ar->div, Kl = sh->K / ar->div;
  g->N = Nl, g->K = Kl;
  const w8a8_dtype dt = fp8 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
  const uint64_t seed = 1000003u * (uint64_t)(M + 1) + shape_seed(sh, fp8);
  const float sbase = 1.0f / (fp8 ? 8.0f : 64.0f) / sqrtf((float)(Kl > 0 ? Kl : 1));
  const int64_t S = slot_rows(g);
  int ok = 1;
  /* AG: the layer's rows, the same on every rank: generated once here */
  uint8_t *a_host = sh->ag ? host_q8(M * Kl, fp8, seed) : NULL;
  if (sh->ag && !a_host) ok = 0;
  for (int r = lo_rank(g); r < hi_rank(g) && ok; r++) {
    rank_data *d = &g->r[r];
    cudaSetDevice(d->dev); /* every buffer of rank r on its device */
    w8a8_tp_shard_rows(M, W, r, &d->off, &d->Mr);
    if (sh->ag) {
      d->a_full = dev_copy(a_host, (size_t)(M * Kl));
      d->sa_full = dev_scale(M, sbase, seed + 1);
      d->out_f = dev_zero(2 * (size_t)(M * d->Nr));
      d->out_u = dev_zero(2 * (size_t)(M * d->Nr));
      d->gemm_out = dev_zero(2 * (size_t)(M * d->Nr));
      d->scratch = dev_zero((size_t)(M * Kl) + 4 * (size_t)M);
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
      d->a_full = dev_q8(M * d->Kr, fp8, seed + 100u * (uint64_t)r);
      d->sa_full = dev_scale(M, sbase, seed + 100u * (uint64_t)r + 1);
      d->out_f = dev_zero(2 * (size_t)(d->Mr * Nl));
      d->out_u = dev_zero(2 * (size_t)(d->Mr * Nl));
      d->gemm_out = dev_zero(4 * (size_t)(M * Nl));
      d->scratch = dev_zero(4 * (size_t)(W * S * Nl));
      d->A = w8a8_matrix_make(dt, W8A8_ROW_MAJOR, M, d->Kr, d->Kr, d->a_full);
      d->SA = w8a8_vector_make(W8A8_DTYPE_FP32, M, d->sa_full);
      d->B = w8a8_matrix_make(dt, W8A8_COL_MAJOR, d->Kr, Nl, d->Kr, d->b);
      d->SB = w8a8_vector_make(W8A8_DTYPE_FP32, Nl, d->sb);
      d->OF = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, d->Mr, Nl, Nl, d->out_f);
      d->OU = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, d->Mr, Nl, Nl, d->out_u);
      /* the library's partial GEMM: fp32 out, or bf16 with --partials out (gemm_out holds either) */
      d->GO = w8a8_matrix_make(g->partials == W8A8_TP_PARTIALS_OUT ? W8A8_DTYPE_BF16 : W8A8_DTYPE_FP32,
                               W8A8_ROW_MAJOR, M, Nl, Nl, d->gemm_out);
    }
    ok &= d->a_full && d->sa_full && d->b && d->sb && d->out_f && d->out_u && d->gemm_out && d->scratch;
    /* The uploads and memsets ran on the legacy stream; the ranks' streams are non-blocking. */
    ok &= cudaDeviceSynchronize() == cudaSuccess;
  }
  free(a_host);
#ifdef TPB_NCCL
  if (g->nccl) { /* every rank measures, or none */
    int mine = ok, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    ok = all;
  }
#endif
  long wrong = 0;
  double t_gemm = 0, t_comm = 0, t_unf = 0, t_fus = 0;
  const char *chose = "-";
  if (!ok) {
    if (print) fprintf(stderr, "tp-bench: out of GPU memory for %s M=%lld\n", sh->name, (long long)M);
    g->failed = 1;
  } else {
    /* The four take turns: 3 rounds of iters/3 timed iterations, the order reversed in the middle
     * round, each time the median of the round medians. Timed one after the other, the first (the GEMM
     * alone) would meet a cooler GPU than the last (fused): the H200's clock sinks under its power limit
     * as a run goes on, which flattered fused / max(gemm, comm). */
    const int iters_all = g->iters, rounds = g->iters >= 3 ? 3 : 1;
    double tr[4][3];
    g->iters = iters_all / rounds;
    for (int k = 0; k < rounds; k++)
      for (int i = 0; i < 4; i++) {
        const int op = k == 1 ? 3 - i : i;
        tr[op][k] = time_op(g, op);
      }
    g->iters = iters_all;
    double tm[4];
    for (int op = 0; op < 4; op++) {
      double *v = tr[op];
      if (rounds == 1) {
        tm[op] = v[0];
        continue;
      }
      const double lo = v[0] < v[1] ? v[0] : v[1], hi = v[0] < v[1] ? v[1] : v[0];
      tm[op] = v[2] < lo ? lo : v[2] > hi ? hi : v[2]; /* the median of three */
    }
    t_gemm = tm[0];
    t_comm = tm[1];
    t_unf = tm[2];
    t_fus = tm[3];
    if (g->failed && g->msg[0]) fprintf(stderr, "tp-bench: %s\n", g->msg);
    for (int r = lo_rank(g); r < hi_rank(g); r++) {
      rank_data *d = &g->r[r];
      cudaSetDevice(d->dev);
      cudaError_t ce = cudaDeviceSynchronize();
      if (ce != cudaSuccess) {
        fprintf(stderr, "tp-bench: rank %d (device %d): %s\n", r, d->dev, cudaGetErrorString(ce));
        g->failed = 1;
        continue;
      }
      /* W8A8_TP_TRACE=1: where the last fused call's time went on this rank (the last call timed is fused) */
      float tus[64];
      char tk[64];
      const int tn = w8a8_tp_gpu_trace(d->comm, tus, tk, 64);
      if (tn != 0 && print) {
        printf("# trace %s %s M=%lld %s rank %d (last fused call, us from its fork):", sh->name, sh->ag ? "ag" : "rs",
               (long long)M, fp8 ? "fp8_e4m3" : "int8", r);
        for (int i = 0; i < tn; i++) printf(" %c %.1f", tk[i], tus[i]);
        int lsplit = 0;
        const char *lcfg = w8a8_sm90_last_config(&lsplit);
        if (lcfg[0]) printf("; last sm90 launch %s split %d", lcfg, lsplit);
        printf("%s\n", tn < 0 ? " (a CUDA error: no trace)" : "");
        /* the same marks' enqueue times on the host: a GPU time close to its host time means the stream
         * waited for the host there */
        float hus[64];
        const int hn = tn > 0 ? w8a8_tp_gpu_trace_host(d->comm, hus, 64) : 0;
        if (hn > 0) {
          printf("# host  %s %s M=%lld %s rank %d (the marks enqueued, us from F's):", sh->name, sh->ag ? "ag" : "rs",
                 (long long)M, fp8 ? "fp8_e4m3" : "int8", r);
          for (int i = 0; i < hn; i++) printf(" %c %.1f", tk[i], hus[i]);
          printf("\n");
        }
      }
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
    chose = auto_choice(g);
  }
#ifdef TPB_NCCL
  if (g->nccl) {
    long w_all = 0;
    int f_all = 0;
    MPI_Allreduce(&wrong, &w_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(&g->failed, &f_all, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    wrong = w_all;
    g->failed = f_all;
  }
#endif
  double bytes = sh->ag ? (double)M * (double)Kl + 4.0 * (double)M : (double)part_es(g) * (double)M * (double)Nl;
  double algbw = t_comm > 0 ? bytes / t_comm / 1e3 : 0, busbw = algbw * (W - 1) / W;
  double hidden = t_gemm < t_comm ? t_gemm : t_comm, eff = hidden > 0 ? (t_unf - t_fus) / hidden : 0;
  /* the shard sizes of rank 0 (this process's first rank under --nccl prints only on rank 0) */
  const rank_data *d0 = &g->r[lo_rank(g)];
  if (print) {
    printf("%-12s %-3s %6lld %6lld %6lld %-8s %d | %10.1f %10.1f %8.1f %8.1f | %10.1f %10.1f | %7.2f %6.2fx %6ld | %-7s%s\n",
           sh->name, sh->ag ? "ag" : "rs", (long long)M, (long long)d0->Nr, (long long)d0->Kr,
           fp8 ? "fp8_e4m3" : "int8", W, t_gemm, t_comm, algbw, busbw, t_unf, t_fus, eff, t_fus > 0 ? t_unf / t_fus : 0,
           wrong, chose, g->failed ? " FAILED" : "");
    if (json)
      fprintf(json,
              "{\"impl\":\"%s\",\"op\":\"%s\",\"shape\":\"%s\",\"dtype\":\"%s\",\"scales\":\"token*channel\","
              "\"world\":%d,\"gpus\":%d,\"emulated\":%s,\"transport\":\"%s\",\"M\":%lld,\"N\":%lld,\"K\":%lld,"
              "\"div\":%d,\"gemm_us\":%.3f,\"comm_us\":%.3f,\"unfused_us\":%.3f,\"fused_us\":%.3f,\"us\":%.3f,"
              "\"overlap_eff\":%.4f,\"speedup\":%.4f,\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f,\"wrong\":%ld,\"auto\":\"%s\","
              "\"failed\":%d,\"partials\":\"%s\",\"timing\":\"median of 3 interleaved rounds' medians, %d iterations in "
              "all, %s\",\"device\":\"%s\",\"date\":\"%s\"}\n",
              g->nccl ? "w8a8_gpu_tp_nccl" : "w8a8_gpu_tp_local",
              sh->ag ? "all_gather_scaled_mm" : "scaled_mm_reduce_scatter", sh->name, fp8 ? "fp8_e4m3" : "int8", W,
              gpus, gpus < W ? "true" : "false", w8a8_tp_transport(d0->comm, NULL), (long long)M, (long long)d0->Nr,
              (long long)d0->Kr, ar->div, t_gemm, t_comm, t_unf, t_fus, t_fus, eff, t_fus > 0 ? t_unf / t_fus : 0,
              algbw, busbw, wrong, chose, g->failed, g->partials == W8A8_TP_PARTIALS_OUT ? "out" : "fp32", g->iters,
              g->graph ? "replays of one captured CUDA graph of every rank's call (--graph)"
                       : "of the slowest rank (CUDA events)",
              devname, date);
  }
  for (int r = lo_rank(g); r < hi_rank(g); r++) free_rank_m(&g->r[r]);
  return wrong + (g->failed ? 1 : 0);
}

/* Rank state on its device: handle, stream, timing events. */
static w8a8_status rank_open(rank_data *d) {
  cudaSetDevice(d->dev);
  w8a8_status s = w8a8_create(&d->h, W8A8_DEVICE_CUDA, d->dev);
  if (s != W8A8_SUCCESS) return s;
  if (cudaStreamCreateWithFlags(&d->st, cudaStreamNonBlocking) != cudaSuccess) return W8A8_ERROR_DEVICE;
  w8a8_set_stream(d->h, d->st);
  for (int i = 0; i < MAX_ITERS; i++)
    if (cudaEventCreate(&d->ev0[i]) != cudaSuccess || cudaEventCreate(&d->ev1[i]) != cudaSuccess)
      return W8A8_ERROR_DEVICE;
  return W8A8_SUCCESS;
}
static void rank_close(rank_data *d) {
  cudaSetDevice(d->dev);
  if (d->st) cudaStreamSynchronize(d->st);
  free_rank_m(d);
  free_rank_b(d);
  if (d->comm) w8a8_comm_destroy(d->comm);
  if (d->h) w8a8_destroy(d->h);
  if (d->st) cudaStreamDestroy(d->st);
  for (int i = 0; i < MAX_ITERS; i++) {
    if (d->ev0[i]) cudaEventDestroy(d->ev0[i]);
    if (d->ev1[i]) cudaEventDestroy(d->ev1[i]);
  }
  d->comm = NULL, d->h = NULL, d->st = NULL;
}

static void reserve_sizes(const args *ar, int64_t *maxM, int64_t *maxN, int64_t *maxK) {
  *maxM = *maxN = *maxK = 0;
  for (int i = 0; i < ar->nM; i++) *maxM = ar->Ms[i] > *maxM ? ar->Ms[i] : *maxM;
  for (int i = 0; i < CLI_TP_NSHAPES; i++) {
    if (ar->only && strcmp(ar->only, k_shapes[i].name)) continue;
    int64_t N = k_shapes[i].N / ar->div, K = k_shapes[i].K / ar->div;
    *maxN = N > *maxN ? N : *maxN;
    *maxK = K > *maxK ? K : *maxK;
  }
}

/* Opens -o for the printing process before any measurement: 0, or 1 after a message. */
static int open_json(const args *ar, FILE **json) {
  *json = NULL;
  if (!ar->out_path) return 0;
  if ((*json = fopen(ar->out_path, "w"))) return 0;
  fprintf(stderr, "w8a8 tp-bench: -o: cannot open '%s' for writing: %s\n", ar->out_path, strerror(errno));
  return 1;
}
/* Closes -o: 0, or 1 (with a message) if any of it was not written. */
static int close_json(const args *ar, FILE *json) {
  if (!json) return 0;
  int bad = ferror(json) != 0;
  errno = 0;
  if (fclose(json) != 0) bad = 1;
  if (bad)
    fprintf(stderr, "w8a8 tp-bench: -o: error writing '%s'%s%s\n", ar->out_path, errno ? ": " : "",
            errno ? strerror(errno) : "");
  return bad;
}

/* The sweep over shapes, dtypes and M; rank 0 (or the only process) prints, and writes json (NULL: no -o). */
static long run_all(group *g, const args *ar, int gpus, const char *layout, int print, FILE *json) {
  w8a8_handle_info info;
  w8a8_get_info(g->r[lo_rank(g)].h, &info);
  char date[32];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
  if (print) {
    printf("# w8a8 tp-bench --%s: %d GPU ranks on %d %s%s (%s), %s\n", g->nccl ? "nccl" : "local", g->W, gpus, info.name,
           gpus < g->W ? " (EMULATED: ranks share GPUs)" : "", layout, w8a8_version_string());
    printf("# Llama-3.1-70B shapes / %d; ag = all-gather + GEMM (N sharded), rs = GEMM + reduce-scatter (K sharded); "
           "bf16 out, per-token x per-channel scales\n",
           ar->div);
    printf("# rs partials: %s\n", ar->partials == W8A8_TP_PARTIALS_OUT
                                      ? "out (W8A8_TP_PARTIALS_OUT: bf16 partials, 2 bytes per element moved)"
                                      : "fp32 (W8A8_TP_PARTIALS_FP32: fp32 partials, 4 bytes per element moved)");
    printf("# times: us, the slowest rank's iteration (CUDA events on each rank's stream): gemm, comm, unfused and "
           "fused take turns in 3 rounds of %d iterations (after %d warm-up each; the middle round reversed), each the "
           "median of its round medians; comm = %s\n",
           ar->iters >= 3 ? ar->iters / 3 : ar->iters, ar->warmup,
           g->nccl ? "ncclSend/ncclRecv of the same chunks" : "cudaMemcpyAsync of the same chunks (copy engine)");
    if (ar->graph)
      printf("# --graph: every time is the median replay of ONE CUDA graph holding every rank's call (captured after "
             "the warm-up), not per-rank events\n");
    printf("# overlap = (unfused - fused) / min(gemm, comm); busbw = algbw * (W-1)/W\n");
    const char *why = NULL, *tr = w8a8_tp_transport(g->r[lo_rank(g)].comm, &why);
    printf("# library transport: %s%s%s\n", tr, why && why[0] ? " -- " : "", why ? why : "");
    printf("# auto = the schedule one call with W8A8_TP_OVERLAP_AUTO (the default) ran: fused from %lld rows "
           "(all-gather) and %lld (reduce-scatter) on this transport; docs/TP.md\n",
           (long long)w8a8_tp_crossover(g->r[lo_rank(g)].comm, 1), (long long)w8a8_tp_crossover(g->r[lo_rank(g)].comm, 2));
    /* the all-gather's tuning switches as this process sees them (the library reads them per call) */
    const char *pieces = getenv("W8A8_TP_AG_PIECES"), *group = getenv("W8A8_SM90_TP_GROUP");
    printf("# all-gather: W8A8_TP_AG_PIECES=%s W8A8_SM90_TP_GROUP=%s\n", pieces ? pieces : "(unset: 1)",
           group ? group : "(unset: 1)");
    const char *rsd = getenv("W8A8_TP_RS_DIRECT"), *rsm = getenv("W8A8_TP_RS_MIN_ROWS");
    printf("# reduce-scatter: W8A8_TP_RS_DIRECT=%s W8A8_TP_RS_MIN_ROWS=%s\n", rsd ? rsd : "(unset: 0)",
           rsm ? rsm : "(unset: 256 rows per piece where K <= 4096, else 1024)");
    if (getenv("W8A8_TP_TRACE"))
      printf("# W8A8_TP_TRACE: '# trace' lines = the last fused call's marks per rank of the printing process, us "
             "from its fork F (E the call reached the stream, before the wait for the peers' previous calls, and AG's "
             "K own rows packed: before F, negative; RS: G peer piece GEMM done, P its push done, O own GEMM done, "
             "A peers' partials in, R reduced; AG: W a peer's rows seen packed by the side stream (its copy starts), C "
             "chunk copied, L the one GEMM's launch reached (fused with ready flags), G GEMM done, J joined)\n");
    printf("# %-10s %-3s %6s %6s %6s %-8s %s | %10s %10s %8s %8s | %10s %10s | %7s %7s %6s | %s\n", "shape", "op",
           "M", "N_r", "K_r", "dtype", "W", "gemm_us", "comm_us", "algbw", "busbw", "unfused_us", "fused_us", "overlap",
           "speedup", "#wrong", "auto");
  }
  long wrong = 0;
  for (int i = 0; i < CLI_TP_NSHAPES; i++) {
    if (ar->only && strcmp(ar->only, k_shapes[i].name)) continue;
    for (int f = 0; f < 2; f++) {
      if ((f == 0 && !ar->do_int8) || (f == 1 && !ar->do_fp8)) continue;
      int ok = setup_weights(g, ar, &k_shapes[i], f);
#ifdef TPB_NCCL
      if (g->nccl) {
        int all = 0;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        ok = all;
      }
#endif
      if (!ok) {
        if (print) fprintf(stderr, "tp-bench: out of GPU memory for the weights of %s\n", k_shapes[i].name);
        wrong++;
      }
      for (int m = 0; ok && m < ar->nM; m++) {
        wrong += measure(g, ar, &k_shapes[i], ar->Ms[m], f, json, info.name, date, gpus, print);
        if (print) fprintf(stderr, "tp-bench: %s %s M=%lld done\n", k_shapes[i].name, f ? "fp8" : "int8", (long long)ar->Ms[m]);
      }
      for (int r = lo_rank(g); r < hi_rank(g); r++) free_rank_b(&g->r[r]);
    }
  }
  const int json_bad = json && (fflush(json) != 0 || ferror(json)); /* the caller's close_json says more */
  if (print)
    printf("# %s: %ld wrong elements or failed measurements%s\n", wrong || json_bad ? "FAILED" : "ok", wrong,
           json_bad ? ", -o not fully written" : "");
  return wrong + json_bad;
}

static int run_local(const args *ar) {
  const int ndev = w8a8_cuda_device_count();
  if (ndev <= ar->device) {
    fprintf(stderr, "tp-bench --local: no CUDA device %d (%d visible)\n", ar->device, ndev);
    return 1;
  }
  FILE *json = NULL;
  if (open_json(ar, &json)) return 1;
  static group g;
  memset(&g, 0, sizeof g);
  g.W = ar->W;
  w8a8_status s = W8A8_SUCCESS;
  w8a8_handle *hs[MAXW];
  w8a8_comm *cs[MAXW];
  int used[64] = {0}, gpus = 0;
  char layout[256] = "rank:device", *lp = layout + strlen(layout);
  for (int r = 0; r < ar->W; r++) {
    rank_data *d = &g.r[r];
    d->dev = ar->one_gpu ? ar->device : (ar->device + r) % ndev;
    if (d->dev < 64 && !used[d->dev]++) gpus++;
    lp += snprintf(lp, (size_t)(layout + sizeof layout - lp), " %d:%d", r, d->dev);
    if (s == W8A8_SUCCESS) s = rank_open(d);
    hs[r] = d->h;
  }
  if (s == W8A8_SUCCESS) s = w8a8_comm_create_local(cs, hs, ar->W);
  int64_t maxM, maxN, maxK;
  reserve_sizes(ar, &maxM, &maxN, &maxK);
  if (s == W8A8_SUCCESS)
    for (int r = 0; r < ar->W; r++) g.r[r].comm = cs[r];
  for (int r = 0; r < ar->W && s == W8A8_SUCCESS; r++) s = w8a8_comm_reserve(cs[r], maxM, maxN, maxK);
  long wrong = 1;
  if (s != W8A8_SUCCESS)
    fprintf(stderr, "tp-bench --local: %s: %s\n", w8a8_status_name(s), w8a8_last_error());
  else
    wrong = run_all(&g, ar, gpus, layout, 1, json);
  for (int r = 0; r < ar->W; r++) rank_close(&g.r[r]);
  if (close_json(ar, json)) wrong++;
  return wrong ? 1 : 0;
}

#ifdef TPB_NCCL
static int run_nccl(const args *ar) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
  }
  static group g;
  memset(&g, 0, sizeof g);
  g.nccl = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &g.W);
  MPI_Comm_rank(MPI_COMM_WORLD, &g.me);
  const int print = g.me == 0;
  int rc = 1;
  /* -s against the world size (every rank the same answer), then -o on rank 0, agreed before the rest */
  if (check_div(ar, g.W, print)) {
    MPI_Finalize();
    return CLI_EXIT_USAGE;
  }
  FILE *json = NULL;
  int json_ok = !(print && open_json(ar, &json));
  MPI_Bcast(&json_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!json_ok) {
    MPI_Finalize();
    return 1;
  }
  MPI_Comm node;
  int lrank = 0;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g.me, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &lrank);
  MPI_Comm_free(&node);
  const int ndev = w8a8_cuda_device_count();
  /* the GPU of each rank, by host and PCI bus id: distinct GPUs, and no two ranks on one */
  char key[96] = {0}, *keys = calloc((size_t)g.W, sizeof key);
  rank_data *d = &g.r[g.me];
  d->dev = ndev > 0 ? lrank % ndev : -1;
  if (ndev > 0) {
    char host[48] = {0}, bus[32] = {0};
    gethostname(host, sizeof host - 1);
    if (cudaDeviceGetPCIBusId(bus, (int)sizeof bus, d->dev) != cudaSuccess) snprintf(bus, sizeof bus, "dev%d", d->dev);
    snprintf(key, sizeof key, "%s|%s", host, bus);
  }
  int bad = g.W > MAXW || ndev <= 0 || !keys, anybad = 0;
  MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (anybad) {
    if (print)
      fprintf(stderr, "tp-bench --nccl: every rank needs a CUDA device (and at most %d ranks); %d visible here\n", MAXW,
              ndev);
    free(keys);
    close_json(ar, json);
    MPI_Finalize();
    return 1;
  }
  MPI_Allgather(key, (int)sizeof key, MPI_CHAR, keys, (int)sizeof key, MPI_CHAR, MPI_COMM_WORLD);
  int gpus = 0, shared = 0;
  char layout[256] = "rank:gpu", *lp = layout + strlen(layout);
  for (int i = 0; i < g.W; i++) {
    int first = 1;
    for (int j = 0; j < i; j++) first &= strcmp(keys + (size_t)i * sizeof key, keys + (size_t)j * sizeof key) != 0;
    gpus += first;
    shared |= !first;
    lp += snprintf(lp, (size_t)(layout + sizeof layout - lp), " %d:%s", i, keys + (size_t)i * sizeof key);
  }
  free(keys);
  if (shared) {
    if (print) fprintf(stderr, "tp-bench --nccl: two ranks would share a GPU (%s); NCCL needs one GPU per rank\n", layout);
    close_json(ar, json);
    MPI_Finalize();
    return 1;
  }
  w8a8_status s = rank_open(d);
  if (s != W8A8_SUCCESS) fprintf(stderr, "tp-bench --nccl: rank %d: %s\n", g.me, w8a8_last_error());
  int ok = s == W8A8_SUCCESS, all = 0;
  MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all) {
    s = w8a8_comm_create_world(&d->comm, d->h); /* collective: fails on every rank together */
    if (s != W8A8_SUCCESS) {
      d->comm = NULL;
      if (print) fprintf(stderr, "tp-bench --nccl: w8a8_comm_create_world: %s\n", w8a8_last_error());
      all = 0;
    }
  }
  if (all) {
    int64_t maxM, maxN, maxK;
    reserve_sizes(ar, &maxM, &maxN, &maxK);
    s = w8a8_comm_reserve(d->comm, maxM, maxN, maxK);
    if (s != W8A8_SUCCESS) fprintf(stderr, "tp-bench --nccl: rank %d: %s\n", g.me, w8a8_last_error());
    ok = s == W8A8_SUCCESS;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  }
  if (all) { /* the bench's own NCCL communicator, for the communication alone */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    int idbad = g.me == 0 && ncclGetUniqueId(&id) != ncclSuccess, anyid = 0;
    MPI_Allreduce(&idbad, &anyid, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    cudaSetDevice(d->dev);
    ok = !anyid && ncclCommInitRank(&g.nc, g.W, id, g.me) == ncclSuccess;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all && print) fprintf(stderr, "tp-bench --nccl: ncclCommInitRank failed\n");
  }
  if (all) rc = run_all(&g, ar, gpus, layout, print, json) ? 1 : 0;
  cudaSetDevice(d->dev);
  if (d->st) cudaStreamSynchronize(d->st);
  if (g.nc) ncclCommDestroy(g.nc);
  rank_close(d); /* w8a8_comm_destroy: collective */
  if (close_json(ar, json)) rc = 1;
  MPI_Finalize();
  return rc;
}
#endif

int w8a8_cli_tp_bench_gpu(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  args ar;
  const int pr = parse(argc, argv, &ar); /* before any device or MPI work */
  if (pr == 1) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  if (pr) return CLI_EXIT_USAGE;
  if (ar.nccl) {
#ifdef TPB_NCCL
    return run_nccl(&ar);
#else
    fprintf(stderr, "w8a8 tp-bench --nccl: this build has no %s\n", "MPI and NCCL (both are needed)");
    return 1;
#endif
  }
  return run_local(&ar);
}
#endif /* W8A8_HAVE_CUDA */
