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
 * is p20 / p50 / p80 over the iterations (microseconds).
 * #wrong: elements where fused and unfused differ in any bit, plus, for the all-gather, elements
 * that differ from the GEMM alone (exact for int8, 2^-7 relative + 1e-3 for fp8), summed over
 * the ranks. Exit code 1 if any. JSON lines (docs/CLI.md) also record "gpus" (distinct devices),
 * "emulated" (true only when ranks share a GPU), "transport" and "partials". --local takes W >= 2 and
 * --nccl needs 2 ranks or more: one rank has nothing to overlap.
 * --partials fp32|out: w8a8_tp_options.partials of the library's reduce-scatter calls (fused and
 * unfused; W8A8_TP_PARTIALS_FP32 by default, W8A8_TP_PARTIALS_OUT: bf16 partials), and the element
 * size of the RS gemm and comm baselines. The all-gather ignores it.
 * --graph (--local only): each of the four is captured once into ONE CUDA
 * graph holding every rank's call (w8a8.h's model: a capture begun on a stream of rank 0's device, each rank's
 * stream forked from it, each rank's thread makes its call, the streams joined back), after the eager warm-up;
 * then replayed back to back, each replay between two events on that stream: the replays' times. What a
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

/* The command line is tools/tp_bench.c's (one table for CPU and GPU ranks): tp_args. */
#define MAXW TP_MAX_W_LOCAL
#define MAX_ITERS 1000 /* tools/tp_bench.c's TP_MAX_ITERS_GPU */
typedef tp_args args;

#ifndef W8A8_HAVE_CUDA
int w8a8_cli_tp_bench_gpu(const tp_args *ar) {
  (void)ar;
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
int w8a8_tp_gpu_trace(const w8a8_comm *c, float *us, char *kinds, int max); /* src/tp (hidden; W8A8_DEV="TP_TRACE=1") */
int w8a8_tp_gpu_trace_host(const w8a8_comm *c, float *us, int max);          /* the marks' enqueue times */
int w8a8_tp_gpu_poison_ws(const w8a8_comm *c, int v);                         /* --graph: (hidden) */
int w8a8_tp_last_fuse(const w8a8_comm *c); /* (hidden) the schedule of the last call: 1 fused, 0 unfused, -1 none */
int64_t w8a8_tp_crossover(const w8a8_comm *c, int op); /* (hidden) AUTO's crossover in rows, op 1 AG / 2 RS */

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
/* Time op as replays of one captured graph of every rank's call (--graph, --local): each replay's time (us) into
 * out[0 .. g->iters); returns g->iters, or 0 after a failure (g->failed set). The times include each replay's fork
 * from and join into s0 across the ranks' devices, and the first replay's launch latency: not comparable one to
 * one with the eager per-rank events. */
static int time_op_graph(group *g, int op, double *out) {
  g->op = op;
  int bad = run_ranks(g, 1);
  cudaStream_t s0 = NULL;
  cudaEvent_t fork = NULL, join[MAXW], e0[MAX_ITERS], e1[MAX_ITERS];
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  float t[MAX_ITERS];
  int got = 0;
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
    for (int i = 0; i < g->iters; i++) out[i] = 1e3 * (double)t[i];
    got = g->iters;
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
  return got;
}

/* Time op on every rank at once: the slowest rank's time of each iteration (us) into out[0 .. g->iters); returns
 * g->iters (a failure sets g->failed). */
static int time_op(group *g, int op, double *out) {
  if (g->graph && !g->nccl) return time_op_graph(g, op, out);
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
  for (int i = 0; i < g->iters; i++) out[i] = 1e3 * (double)t[i];
  return g->iters;
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
                    int gpus, int print) {
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
  cli_stats t_gemm = cli_stats_failed(), t_comm = t_gemm, t_unf = t_gemm, t_fus = t_gemm;
  cli_launch ran;
  memset(&ran, 0, sizeof ran);
  const char *chose = "-";
  if (!ok) {
    if (print) fprintf(stderr, "tp-bench: out of GPU memory for %s M=%lld\n", sh->name, (long long)M);
    g->failed = 1;
  } else {
    /* The four take turns: 3 rounds of iters/3 timed iterations, the order reversed in the middle
     * round; each one's percentiles over the iterations of all rounds. Timed one after the other, the first
     * (the GEMM alone) would meet a cooler GPU than the last (fused): the H200's clock sinks under its power
     * limit as a run goes on, which flattered fused / max(gemm, comm). */
    const int iters_all = g->iters, rounds = g->iters >= 3 ? 3 : 1;
    static double pool[4][MAX_ITERS];
    int npool[4] = {0, 0, 0, 0};
    g->iters = iters_all / rounds;
    for (int k = 0; k < rounds; k++)
      for (int i = 0; i < 4; i++) {
        const int op = k == 1 ? 3 - i : i;
        npool[op] += time_op(g, op, pool[op] + npool[op]);
      }
    g->iters = iters_all;
    cli_last_launch(g->r[lo_rank(g)].h, "auto", &ran); /* fused ran last: its GEMM (this process's first rank) */
    t_gemm = cli_stats_of(pool[0], npool[0]);
    t_comm = cli_stats_of(pool[1], npool[1]);
    t_unf = cli_stats_of(pool[2], npool[2]);
    t_fus = cli_stats_of(pool[3], npool[3]);
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
      /* W8A8_DEV="TP_TRACE=1": where the last fused call's time went on this rank (the last call timed is fused) */
      float tus[64];
      char tk[64];
      const int tn = w8a8_tp_gpu_trace(d->comm, tus, tk, 64);
      if (tn != 0 && print) {
        fprintf(cli_tab, "# trace %s %s M=%lld %s rank %d (last fused call, us from its fork):", sh->name, sh->ag ? "ag" : "rs",
               (long long)M, fp8 ? "fp8_e4m3" : "int8", r);
        for (int i = 0; i < tn; i++) fprintf(cli_tab, " %c %.1f", tk[i], tus[i]);
        cli_launch rl; /* this rank's last GEMM: the last fused call's */
        cli_last_launch(d->h, "auto", &rl);
        if (rl.known && rl.config[0]) fprintf(cli_tab, "; its GEMM: %s %s split %d", rl.kernel, rl.config, rl.split_k);
        fprintf(cli_tab, "%s\n", tn < 0 ? " (a CUDA error: no trace)" : "");
        /* the same marks' enqueue times on the host: a GPU time close to its host time means the stream
         * waited for the host there */
        float hus[64];
        const int hn = tn > 0 ? w8a8_tp_gpu_trace_host(d->comm, hus, 64) : 0;
        if (hn > 0) {
          fprintf(cli_tab, "# host  %s %s M=%lld %s rank %d (the marks enqueued, us from F's):", sh->name, sh->ag ? "ag" : "rs",
                 (long long)M, fp8 ? "fp8_e4m3" : "int8", r);
          for (int i = 0; i < hn; i++) fprintf(cli_tab, " %c %.1f", tk[i], hus[i]);
          fprintf(cli_tab, "\n");
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
  /* the shard sizes of rank 0 (this process's first rank under --nccl prints only on rank 0) */
  const rank_data *d0 = &g->r[lo_rank(g)];
  if (print) {
    tp_row row;
    memset(&row, 0, sizeof row);
    row.impl = g->nccl ? "w8a8_gpu_tp_nccl" : "w8a8_gpu_tp_local";
    row.device = devname;
    row.device_kind = "gpu";
    row.shape = sh;
    row.fp8 = fp8;
    row.W = W;
    row.M = M, row.N = d0->Nr, row.K = d0->Kr;
    row.gemm = t_gemm, row.comm = t_comm, row.unfused = t_unf, row.fused = t_fus;
    row.comm_bytes = sh->ag ? (double)M * (double)Kl + 4.0 * (double)M : (double)part_es(g) * (double)M * (double)Nl;
    row.wrong = wrong;
    row.failed = g->failed;
    row.chose = chose;
    row.ran = ran;
    tp_print_row(cli_tab, &row);
    if (json) {
      cli_jw w;
      tp_json_row_begin(&w, json, ar, &row);
      cli_jw_int(&w, "gpus", gpus);
      cli_jw_bool(&w, "emulated", gpus < W);
      cli_jw_str(&w, "transport", w8a8_tp_transport(d0->comm, NULL));
      cli_jw_str(&w, "partials", g->partials == W8A8_TP_PARTIALS_OUT ? "out" : "fp32");
      cli_jw_str(&w, "timing", g->graph ? "replays of one captured CUDA graph of every rank's call (--graph), 3 "
                                          "interleaved rounds"
                                        : "the slowest rank's CUDA events per iteration, 3 interleaved rounds");
      cli_jw_end(&w);
    }
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
static int open_json(const args *ar, FILE **json) { return cli_out_open("tp-bench", ar->out_path, json) != 0; }
/* Closes -o: 0, or 1 (with a message) if any of it was not written. */
static int close_json(const args *ar, FILE *json) { return cli_out_close("tp-bench", ar->out_path, json) != 0; }

/* The sweep over shapes, dtypes and M; rank 0 (or the only process) prints, and writes json (NULL: no -o). */
static long run_all(group *g, const args *ar, int gpus, const char *layout, int print, FILE *json) {
  w8a8_handle_info info;
  w8a8_get_info(g->r[lo_rank(g)].h, &info);
  if (print) {
    FILE *tab = cli_tab;
    cli_json_header(json, "tp-bench", ar->argc, ar->argv);
    fprintf(tab, "# w8a8 tp-bench --%s: %d GPU ranks on %d %s%s (%s), %s\n", g->nccl ? "nccl" : "local", g->W, gpus, info.name,
           gpus < g->W ? " (EMULATED: ranks share GPUs)" : "", layout, w8a8_version_string());
    fprintf(tab, "# Llama-3.1-70B shapes / %d; ag = all-gather + GEMM (N sharded), rs = GEMM + reduce-scatter (K sharded); "
           "bf16 out, per-token x per-channel scales\n",
           ar->div);
    fprintf(tab, "# rs partials: %s\n", ar->partials == W8A8_TP_PARTIALS_OUT
                                      ? "out (W8A8_TP_PARTIALS_OUT: bf16 partials, 2 bytes per element moved)"
                                      : "fp32 (W8A8_TP_PARTIALS_FP32: fp32 partials, 4 bytes per element moved)");
    fprintf(tab, "# times: us, the slowest rank's iteration (CUDA events on each rank's stream): gemm, comm, unfused and "
           "fused take turns in 3 rounds of %d iterations (after %d warm-up each; the middle round reversed), p20 / "
           "p50 / p80 over the iterations of all rounds; comm = %s\n",
           ar->iters >= 3 ? ar->iters / 3 : ar->iters, ar->warmup,
           g->nccl ? "ncclSend/ncclRecv of the same chunks" : "cudaMemcpyAsync of the same chunks (copy engine)");
    if (ar->graph)
      fprintf(tab, "# --graph: every time is a replay of ONE CUDA graph holding every rank's call (captured after "
             "the warm-up), not per-rank events\n");
    fprintf(tab, "# overlap = (unfused - fused) / min(gemm, comm) at p50, '-' where min(gemm, comm) is under 10%% of "
                 "unfused or under the p20..p80 spreads of unfused and fused (noise); busbw = algbw * (W-1)/W\n");
    const char *why = NULL, *tr = w8a8_tp_transport(g->r[lo_rank(g)].comm, &why);
    fprintf(tab, "# library transport: %s%s%s\n", tr, why && why[0] ? " -- " : "", why ? why : "");
    fprintf(tab, "# auto = the schedule one call with W8A8_TP_OVERLAP_AUTO (the default) ran: fused from %lld rows "
           "(all-gather) and %lld (reduce-scatter) on this transport; docs/TP.md\n",
           (long long)w8a8_tp_crossover(g->r[lo_rank(g)].comm, 1), (long long)w8a8_tp_crossover(g->r[lo_rank(g)].comm, 2));
    /* the development switches that shape the fused calls, as the library reads them (W8A8_DEV) */
    const char *pieces = cli_setting("TP_AG_PIECES"), *group = cli_setting("SM90_TP_GROUP");
    fprintf(tab, "# all-gather: TP_AG_PIECES=%s SM90_TP_GROUP=%s\n", pieces ? pieces : "?", group ? group : "?");
    const char *rsd = cli_setting("TP_RS_DIRECT"), *rsm = cli_setting("TP_RS_MIN_ROWS");
    fprintf(tab, "# reduce-scatter: TP_RS_DIRECT=%s TP_RS_MIN_ROWS=%s%s\n", rsd ? rsd : "?", rsm ? rsm : "?",
            rsm && !strcmp(rsm, "0") ? " (256 rows per piece where K <= 4096, else 1024)" : "");
    const char *trace = cli_setting("TP_TRACE");
    if (trace && strcmp(trace, "0"))
      fprintf(tab, "# TP_TRACE: '# trace' lines = the last fused call's marks per rank of the printing process, us "
                   "from its fork F (E the call reached the stream, before the wait for the peers' previous calls, and "
                   "AG's K own rows packed: before F, negative; RS: G peer piece GEMM done, P its push done, O own GEMM "
                   "done, A peers' partials in, R reduced; AG: W a peer's rows seen packed by the side stream (its copy "
                   "starts), C chunk copied, L the one GEMM's launch reached (fused with ready flags), G GEMM done, J "
                   "joined)\n");
    tp_print_columns(tab);
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
        wrong += measure(g, ar, &k_shapes[i], ar->Ms[m], f, json, info.name, gpus, print);
        if (print) fprintf(stderr, "tp-bench: %s %s M=%lld done\n", k_shapes[i].name, f ? "fp8" : "int8", (long long)ar->Ms[m]);
      }
      for (int r = lo_rank(g); r < hi_rank(g); r++) free_rank_b(&g->r[r]);
    }
  }
  const int json_bad = json && (fflush(json) != 0 || ferror(json)); /* the caller's close_json says more */
  if (print)
    fprintf(cli_tab, "# %s: %ld wrong elements or failed measurements%s\n", wrong || json_bad ? "FAILED" : "ok", wrong,
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
  if (tp_check_world(ar, g.W, print)) {
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

int w8a8_cli_tp_bench_gpu(const tp_args *ar) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (ar->nccl) {
#ifdef TPB_NCCL
    return run_nccl(ar);
#else
    fprintf(stderr, "w8a8 tp-bench --nccl: this build has no %s\n", "MPI and NCCL (both are needed)");
    return CLI_EXIT_FAIL;
#endif
  }
  return run_local(ar);
}
#endif /* W8A8_HAVE_CUDA */
