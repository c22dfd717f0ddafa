/* tp_bench.c — `w8a8 tp-bench`: the fused tensor-parallel operations under mpirun.
 *
 * For the Llama-3.1-70B linear layers at TP = the world size (column-parallel QKV and
 * gate_up through w8a8_all_gather_scaled_mm, row-parallel O and down through
 * w8a8_scaled_mm_reduce_scatter), for each M it times, on the same data:
 *   gemm     this rank's GEMM alone (w8a8_scaled_mm on the whole gathered input, or the
 *            fp32 partial of the row-parallel layer);
 *   comm     the collective alone: MPI_Allgatherv of the 8-bit rows and their scales, or
 *            MPI_Reduce_scatter of the fp32 partials;
 *   unfused  the library call with overlap = 0 (collective, then GEMM);
 *   fused    the library call with overlap = 1;
 * and the overlap efficiency (unfused - fused) / min(gemm, comm): 1 = the shorter of the
 * two is completely hidden, 0 = nothing is. Each time is the median over iterations of
 * the slowest rank (MPI_Barrier, then MPI_Wtime around the call, MPI_Allreduce MAX).
 * algbw = bytes moved by the collective / comm time (all-gather: the gathered rows and
 * scales; reduce-scatter: the whole fp32 partial), busbw = algbw * (W-1)/W, as in
 * nccl-tests. #wrong counts output elements where fused and unfused differ in any bit,
 * plus elements far from an independent result (w8a8_scaled_mm on the gathered input;
 * MPI_Reduce_scatter of the partials). The exit code is non-zero when any is wrong.
 * The `auto` column is the schedule one call with W8A8_TP_OVERLAP_AUTO (the default) ran for that M,
 * as the agreement chose it (the communicator's crossover: docs/TP.md).
 *
 * CPU sizes: the real 70B shapes are too large for a 2-core machine, so -s DIV divides
 * N and K (default 8 on the CPU; -s 1 for the real shapes). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cli_common.h"
#include "w8a8.h"

int w8a8_tp_last_fuse(const w8a8_comm *c); /* src/tp (hidden; static link): the last call's schedule, -1 none */
int64_t w8a8_tp_crossover(const w8a8_comm *c, int op); /* src/tp (hidden): AUTO's crossover, op 1 AG / 2 RS */
static int64_t w8a8_tp_crossover_rows(const w8a8_comm *c, int ag) { return w8a8_tp_crossover(c, ag ? 1 : 2); }

/* GPU ranks (tools/tp_bench_gpu.c): `w8a8 tp-bench --local W` (or --gpu W), threads of this
 * process; `mpirun -np W w8a8 tp-bench --nccl`, one process per GPU. */
int w8a8_cli_tp_bench_gpu(int argc, char **argv);

/* Options of either parser (parse() below, tools/tp_bench_gpu.c's) that take a value: keep in step
 * with both. */
static int takes_value(const char *o) {
  static const char *const opts[] = {"-m",      "-d",    "-s",       "--shape",  "-w", "-n", "-t",
                                     "-o",      "--local", "--gpu", "--device", "--partials"};
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
    if (!strcmp(o, opts[i])) return 1;
  return 0;
}

/* --local / --gpu / --nccl in an option position (not as the value of -o, -m, ...). */
static int wants_gpu(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--local") || !strcmp(argv[i], "--gpu") || !strcmp(argv[i], "--nccl")) return 1;
    if (takes_value(argv[i])) i++;
  }
  return 0;
}

#define TP_MAX_M 32       /* -m values */
#define TP_MAX_ITERS 256  /* -n: time_op's array */
#define TP_MAX_WARMUP 10000
#define TP_MAX_THREADS 4096 /* w8a8_set_num_threads' bound */

typedef struct tp_args {
  int64_t Ms[TP_MAX_M];
  int nM;
  int do_int8, do_fp8;
  int div, warmup, iters, threads;
  const char *out_path;
  const char *only; /* shape name filter, NULL = all */
} tp_args;

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np W w8a8 tp-bench [options]\n"
          "  -m M[,M...]   rows of the layer (tokens), up to %d values in 1..%d, default 16,64,256\n"
          "  -d DTYPE      int8, fp8 or both (default both)\n"
          "  -s DIV        divide the 70B shapes' N and K by DIV (default 8; 1 = the real shapes); at most\n"
          "                %lld / W, so that every rank keeps at least one row of each sharded N or K\n"
          "  --shape NAME  only 70b-qkv, 70b-o, 70b-gate_up or 70b-down\n"
          "  -w N, -n N    warmup and timed iterations (default 1, 5; -w 0..%d, -n 1..%d)\n"
          "  -t N          CPU threads per rank, 1..%d (default cores / ranks)\n"
          "  -o FILE       also write JSON lines (rank 0)\n"
          "  -h, --help    this text\n"
          "M x K (all-gather) and M x N (reduce-scatter) of a layer must fit an MPI count (at most %d).\n"
          "GPU ranks emulated on one GPU (no mpirun): w8a8 tp-bench --local W [--help]\n",
          TP_MAX_M, INT32_MAX, (long long)cli_tp_min_dim(), TP_MAX_WARMUP, TP_MAX_ITERS, TP_MAX_THREADS, INT_MAX);
}

/* A bad command line: the reason, then the usage (rank 0 only); parse() returns 2. */
#define PARSE_ERR(...)                       \
  do {                                       \
    if (r == 0) {                            \
      fprintf(stderr, "w8a8 tp-bench: ");    \
      fprintf(stderr, __VA_ARGS__);          \
      fprintf(stderr, "\n\n");               \
      usage(stderr);                         \
    }                                        \
    return 2;                                \
  } while (0)

/* 0: run; 1: -h (the caller prints the usage on stdout); 2: a bad command line (reported on rank r == 0).
 * W: the ranks (the -s bound and the default -t). */
static int parse(int argc, char **argv, tp_args *ar, int W, int r) {
  memset(ar, 0, sizeof *ar);
  ar->do_int8 = ar->do_fp8 = 1;
  ar->div = 8;
  ar->warmup = 1;
  ar->iters = 5;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  ar->threads = ncpu / W > 1 ? (int)(ncpu / W) : 1;
  if (ar->threads > TP_MAX_THREADS) ar->threads = TP_MAX_THREADS;
  /* Every rank needs at least one row of the sharded dimension (AG: N, RS: K) of every shape. */
  const int64_t div_max = cli_tp_min_dim() / W;
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "-h") || !strcmp(o, "--help")) return 1;
    if (!strcmp(o, "--device") || !strcmp(o, "--partials") || !strcmp(o, "--one-gpu") || !strcmp(o, "--graph"))
      PARSE_ERR("%s is an option of GPU ranks (with --local W or --nccl)", o);
    if (!takes_value(o)) PARSE_ERR("unknown option '%s'", o);
    if (i + 1 >= argc) PARSE_ERR("%s needs a value", o);
    const char *v = argv[++i];
    int64_t x = 0;
    if (!strcmp(o, "-m")) {
      if ((ar->nM = cli_parse_i64_list(v, 1, INT32_MAX, ar->Ms, TP_MAX_M)) < 0)
        PARSE_ERR("-m takes a comma list of up to %d row counts in 1..%d, got '%s'", TP_MAX_M, INT32_MAX, v);
    } else if (!strcmp(o, "-d")) {
      ar->do_int8 = !strcmp(v, "int8") || !strcmp(v, "both");
      ar->do_fp8 = !strcmp(v, "fp8") || !strcmp(v, "both");
      if (!ar->do_int8 && !ar->do_fp8) PARSE_ERR("-d is int8, fp8 or both, got '%s'", v);
    } else if (!strcmp(o, "-s")) {
      if (!cli_parse_i64(v, 1, div_max > 1 ? div_max : 1, &x))
        PARSE_ERR("-s takes 1..%lld with %d rank%s (every shape's N/DIV and K/DIV must be at least the rank "
                  "count), got '%s'",
                  (long long)(div_max > 1 ? div_max : 1), W, W == 1 ? "" : "s", v);
      ar->div = (int)x;
    } else if (!strcmp(o, "--shape")) {
      int k = 0;
      while (k < CLI_TP_NSHAPES && strcmp(v, cli_tp_shapes[k].name)) k++;
      if (k == CLI_TP_NSHAPES) PARSE_ERR("--shape is %s, got '%s'", cli_tp_shape_names(), v);
      ar->only = v;
    } else if (!strcmp(o, "-w")) {
      if (!cli_parse_i64(v, 0, TP_MAX_WARMUP, &x))
        PARSE_ERR("-w takes 0..%d warm-up iterations, got '%s'", TP_MAX_WARMUP, v);
      ar->warmup = (int)x;
    } else if (!strcmp(o, "-n")) {
      if (!cli_parse_i64(v, 1, TP_MAX_ITERS, &x))
        PARSE_ERR("-n takes 1..%d timed iterations, got '%s'", TP_MAX_ITERS, v);
      ar->iters = (int)x;
    } else if (!strcmp(o, "-t")) {
      if (!cli_parse_i64(v, 1, TP_MAX_THREADS, &x))
        PARSE_ERR("-t takes 1..%d CPU threads per rank, got '%s'", TP_MAX_THREADS, v);
      ar->threads = (int)x;
    } else if (!strcmp(o, "-o")) {
      ar->out_path = v;
    } else { /* --local, --gpu: wants_gpu() sent those to tools/tp_bench_gpu.c */
      PARSE_ERR("unknown option '%s'", o);
    }
  }
  if (ar->nM == 0) {
    ar->Ms[0] = 16, ar->Ms[1] = 64, ar->Ms[2] = 256;
    ar->nM = 3;
  }
  if (div_max < 1) PARSE_ERR("%d ranks: more than the shapes' smallest N or K (%lld)", W, (long long)cli_tp_min_dim());
  if (ar->div > div_max)
    PARSE_ERR("-s %d: at most %lld with %d rank%s (every shape's N/DIV and K/DIV must be at least the rank count)",
              ar->div, (long long)div_max, W, W == 1 ? "" : "s");
  /* MPI counts are int: the all-gather moves M x K bytes, the reduce-scatter M x N fp32 elements. */
  for (int i = 0; i < CLI_TP_NSHAPES; i++) {
    const cli_tp_shape *sh = &cli_tp_shapes[i];
    if (ar->only && strcmp(ar->only, sh->name)) continue;
    const int64_t d = sh->ag ? sh->K / ar->div : sh->N / ar->div; /* >= W >= 1 */
    for (int m = 0; m < ar->nM; m++)
      if (ar->Ms[m] > INT_MAX / d)
        PARSE_ERR("-m %lld: %s with -s %d has %s = %lld, and M x %s = %lld is more than an MPI count holds (%d); "
                  "use a smaller M or a larger -s",
                  (long long)ar->Ms[m], sh->name, ar->div, sh->ag ? "K" : "N", (long long)d, sh->ag ? "K" : "N",
                  (long long)(ar->Ms[m] * d), INT_MAX);
  }
  return 0;
}
#undef PARSE_ERR

#ifndef W8A8_HAVE_MPI

int w8a8_cli_tp_bench(int argc, char **argv) {
  if (wants_gpu(argc, argv)) return w8a8_cli_tp_bench_gpu(argc, argv);
  tp_args ar;
  const int pr = parse(argc, argv, &ar, 1, 0);
  if (pr == 1) {
    usage(stdout);
    return CLI_EXIT_OK;
  }
  if (pr) return CLI_EXIT_USAGE;
  fprintf(stderr, "w8a8 tp-bench: this build has no MPI (install libopenmpi-dev and rebuild); GPU ranks on one "
                  "GPU: w8a8 tp-bench --local W\n");
  return CLI_EXIT_FAIL;
}

#else
#include <mpi.h>

typedef cli_tp_shape tp_shape;
#define k_shapes cli_tp_shapes

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* 8-bit operands: int8 uniform; fp8 any finite e4m3 byte with |x| <= 8 (no NaN 0x7f/0xff). */
static void fill_q8(uint8_t *x, int64_t n, int fp8, uint64_t seed) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) {
    uint8_t v = (uint8_t)rng_next(&s);
    if (fp8) v = (uint8_t)((v & 0x80) | (v & 0x7f) % 0x58); /* exponent field <= 10: |x| < 16 */
    x[i] = v;
  }
}

static void fill_scale(float *x, int64_t n, float base, uint64_t seed) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) x[i] = base * (0.5f + (float)(rng_next(&s) >> 40) * 0x1p-24f);
}

static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Median over iterations of the slowest rank's time, in microseconds. */
typedef int (*op_fn)(void *ctx);
static double time_op(op_fn fn, void *ctx, const tp_args *ar, int *failed) {
  double t[TP_MAX_ITERS];
  int n = ar->iters < TP_MAX_ITERS ? ar->iters : TP_MAX_ITERS; /* parse() refuses more */
  for (int i = 0; i < ar->warmup; i++) *failed |= fn(ctx);
  for (int i = 0; i < n; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    *failed |= fn(ctx);
    double dt = MPI_Wtime() - t0, mx = 0;
    MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t[i] = mx;
  }
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  return t[n / 2] * 1e6;
}

/* Everything one measurement needs. */
typedef struct tp_case {
  w8a8_comm *comm;
  w8a8_handle *h;
  int W, r;
  int ag;
  int64_t M, N, K;   /* the layer: AG: out [M, N], this rank's B [K, N]; RS: a [M, K], out [M_r, N] */
  int64_t Mr, off;   /* this rank's rows */
  w8a8_dtype dt;
  w8a8_matrix a_loc, a_full, b, out, out2, gemm_out;
  w8a8_vector sa_loc, sa_full, sb;
  int *counts, *displs; /* MPI collective alone */
  float *partial;       /* RS: fp32 partial [M, N] */
  float *rs_ref;        /* RS: MPI_Reduce_scatter result [M_r, N] */
  w8a8_tp_options opt;
  int last_status;
} tp_case;

static int run_gemm(void *v) {
  tp_case *c = v;
  w8a8_status s = c->ag ? w8a8_scaled_mm(c->h, &c->a_full, &c->b, &c->sa_full, &c->sb, NULL, NULL, &c->out2)
                        : w8a8_scaled_mm(c->h, &c->a_loc, &c->b, &c->sa_loc, &c->sb, NULL, NULL, &c->gemm_out);
  c->last_status = (int)s;
  return s != W8A8_SUCCESS;
}

/* The int counts and displacements cannot overflow: parse() keeps M x K (AG) and M x N (RS) <= INT_MAX. */
static int run_comm(void *v) {
  tp_case *c = v;
  int rc;
  if (c->ag) {
    /* the 8-bit rows, then their per-token scales (as the unfused path moves them) */
    for (int j = 0; j < c->W; j++) {
      int64_t o, n;
      w8a8_tp_shard_rows(c->M, c->W, j, &o, &n);
      c->counts[j] = (int)(n * c->K);
      c->displs[j] = (int)(o * c->K);
    }
    rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->a_full.data, c->counts, c->displs, MPI_BYTE,
                        MPI_COMM_WORLD);
    for (int j = 0; j < c->W && rc == MPI_SUCCESS; j++) {
      int64_t o, n;
      w8a8_tp_shard_rows(c->M, c->W, j, &o, &n);
      c->counts[j] = (int)n;
      c->displs[j] = (int)o;
    }
    if (rc == MPI_SUCCESS)
      rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c->sa_full.data, c->counts, c->displs, MPI_FLOAT,
                          MPI_COMM_WORLD);
  } else {
    for (int j = 0; j < c->W; j++) {
      int64_t o, n;
      w8a8_tp_shard_rows(c->M, c->W, j, &o, &n);
      c->counts[j] = (int)(n * c->N);
    }
    rc = MPI_Reduce_scatter(c->partial, c->rs_ref, c->counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  return rc != MPI_SUCCESS;
}

static int run_tp(tp_case *c, const w8a8_matrix *out) {
  w8a8_status s = c->ag ? w8a8_all_gather_scaled_mm(c->comm, &c->a_loc, &c->b, &c->sa_loc, &c->sb, NULL, NULL, out,
                                                    NULL, &c->opt)
                        : w8a8_scaled_mm_reduce_scatter(c->comm, &c->a_loc, &c->b, &c->sa_loc, &c->sb, NULL, NULL,
                                                        out, &c->opt);
  if (s != W8A8_SUCCESS && c->r == 0) fprintf(stderr, "tp-bench: %s: %s\n", w8a8_status_name(s), w8a8_last_error());
  c->last_status = (int)s;
  return s != W8A8_SUCCESS;
}
static int run_unfused(void *v) {
  tp_case *c = v;
  c->opt.overlap = 0;
  return run_tp(c, &c->out2);
}
static int run_fused(void *v) {
  tp_case *c = v;
  c->opt.overlap = 1;
  return run_tp(c, &c->out);
}
/* W8A8_TP_OVERLAP_AUTO once, after the checks: "fused" or "unfused" as the agreement chose, "failed" */
static const char *auto_choice(tp_case *c) {
  c->opt.overlap = W8A8_TP_OVERLAP_AUTO;
  if (run_tp(c, &c->out)) return "failed";
  const int f = w8a8_tp_last_fuse(c->comm);
  return f == 1 ? "fused" : f == 0 ? "unfused" : "?";
}

/* One (shape, M, dtype) measurement; prints the row on rank 0. Returns #wrong (all ranks). */
static long measure(w8a8_comm *comm, w8a8_handle *h, const tp_args *ar, const tp_shape *sh, int64_t M, int fp8,
                    FILE *json, const char *device, const char *date, int *failed) {
  tp_case c;
  memset(&c, 0, sizeof c);
  c.comm = comm;
  c.h = h;
  w8a8_comm_size(comm, &c.W);
  w8a8_comm_rank(comm, &c.r);
  c.ag = sh->ag;
  c.M = M;
  int64_t Nfull = sh->N / ar->div, Kfull = sh->K / ar->div, o;
  /* TP shards: AG splits N (columns of the weights), RS splits K; uneven splits are fine. */
  if (c.ag) {
    c.K = Kfull;
    w8a8_tp_shard_rows(Nfull, c.W, c.r, &o, &c.N);
  } else {
    c.N = Nfull;
    w8a8_tp_shard_rows(Kfull, c.W, c.r, &o, &c.K);
  }
  w8a8_tp_shard_rows(M, c.W, c.r, &c.off, &c.Mr);
  c.dt = fp8 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
  c.opt = (w8a8_tp_options)W8A8_TP_OPTIONS_INIT;
  const int64_t Mout = c.ag ? M : c.Mr, Ma = c.ag ? c.Mr : M;
  uint8_t *afull = malloc((size_t)(M * c.K) + 1), *bq = malloc((size_t)(c.N * c.K) + 1);
  float *safull = malloc(sizeof(float) * (size_t)(M + 1)), *sb = malloc(sizeof(float) * (size_t)(c.N + 1));
  uint16_t *out = malloc(2 * (size_t)(Mout * c.N) + 2), *out2 = malloc(2 * (size_t)((c.ag ? M : Mout) * c.N) + 2);
  c.counts = malloc(sizeof(int) * (size_t)c.W);
  c.displs = malloc(sizeof(int) * (size_t)c.W);
  if (!c.ag) {
    c.partial = malloc(sizeof(float) * (size_t)(M * c.N) + 4);
    c.rs_ref = malloc(sizeof(float) * (size_t)(c.Mr * c.N) + 4);
  }
  int ok = afull && bq && safull && sb && out && out2 && c.counts && c.displs && (c.ag || (c.partial && c.rs_ref));
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  long wrong = 0;
  if (!all_ok) {
    if (c.r == 0) fprintf(stderr, "tp-bench: out of memory for %s M=%lld\n", sh->name, (long long)M);
    *failed = 1;
    goto done;
  }
  /* Data: the activations of the layer are the same on every rank for the all-gather
   * (each rank owns its rows), and this rank's own K shard for the reduce-scatter. */
  const uint64_t seed = 1000003u * (uint64_t)(M + 1) + (uint64_t)fp8 * 7u + (uint64_t)(sh - k_shapes) * 131u;
  const float sbase = 1.0f / (fp8 ? 8.0f : 64.0f) / sqrtf((float)(Kfull > 0 ? Kfull : 1));
  if (c.ag) {
    fill_q8(afull, M * c.K, fp8, seed);
    fill_scale(safull, M, sbase, seed + 1);
  } else {
    fill_q8(afull, M * c.K, fp8, seed + 100u * (uint64_t)c.r);
    fill_scale(safull, M, sbase, seed + 100u * (uint64_t)c.r + 1);
  }
  fill_q8(bq, c.N * c.K, fp8, seed + 7919u * (uint64_t)(c.r + 1));
  fill_scale(sb, c.N, fp8 ? 1.0f / 8.0f : 1.0f / 64.0f, seed + 3);
  c.a_full = w8a8_matrix_make(c.dt, W8A8_ROW_MAJOR, M, c.K, c.K, afull);
  c.a_loc = c.ag ? w8a8_matrix_make(c.dt, W8A8_ROW_MAJOR, c.Mr, c.K, c.K, afull + c.off * c.K) : c.a_full;
  c.sa_full = w8a8_vector_make(W8A8_DTYPE_FP32, M, safull);
  c.sa_loc = c.ag ? w8a8_vector_make(W8A8_DTYPE_FP32, c.Mr, safull + c.off) : c.sa_full;
  c.b = w8a8_matrix_make(c.dt, W8A8_COL_MAJOR, c.K, c.N, c.K, bq);
  c.sb = w8a8_vector_make(W8A8_DTYPE_FP32, c.N, sb);
  c.out = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, Mout, c.N, c.N, out);
  c.out2 = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, c.ag ? M : Mout, c.N, c.N, out2);
  if (!c.ag) c.gemm_out = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, c.N, c.N, c.partial);
  (void)Ma;

  double t_gemm = time_op(run_gemm, &c, ar, failed);
  /* AG check data: w8a8_scaled_mm on the whole layer's rows, kept from the GEMM timing. */
  uint16_t *direct = NULL;
  if (c.ag) {
    direct = malloc(2 * (size_t)(M * c.N) + 2);
    if (direct) memcpy(direct, out2, 2 * (size_t)(M * c.N));
  }
  double t_comm = time_op(run_comm, &c, ar, failed);
  double t_unf = time_op(run_unfused, &c, ar, failed);
  double t_fus = time_op(run_fused, &c, ar, failed);

  /* Verification on this rank, then summed over ranks. */
  for (int64_t i = 0; i < Mout * c.N; i++) {
    if (out[i] != out2[i]) wrong++; /* fused vs unfused: bit for bit */
    float got = bf16_to_f32(out[i]);
    float want = c.ag ? (direct ? bf16_to_f32(direct[i]) : got) : c.rs_ref[i];
    /* AG: the same GEMM, exact for int8, a few bf16 ulps for fp8. RS: the reduce-scatter of the same
     * partials in MPI's order, rounded to bf16 once: 2 bf16 ulps plus the summation slack. */
    float tol = (c.ag && !fp8) ? 0.0f : 0x1p-7f * fabsf(want) + 1e-3f;
    if (!(fabsf(got - want) <= tol)) wrong++;
  }
  free(direct);
  long all_wrong = 0;
  MPI_Allreduce(&wrong, &all_wrong, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  wrong = all_wrong;
  const char *chose = auto_choice(&c); /* (collective: every rank) */

  if (c.r == 0) {
    /* bytes the collective moves, as nccl-tests counts them */
    double bytes = c.ag ? (double)M * (double)c.K + 4.0 * (double)M : 4.0 * (double)M * (double)c.N;
    double algbw = t_comm > 0 ? bytes / t_comm / 1e3 : 0; /* GB/s */
    double busbw = algbw * (c.W - 1) / c.W;
    double hidden = t_gemm < t_comm ? t_gemm : t_comm;
    double eff = hidden > 0 ? (t_unf - t_fus) / hidden : 0;
    int64_t N_layer = c.ag ? c.N : c.N, K_layer = c.ag ? c.K : c.K; /* this rank's GEMM: M x N x K */
    double flops = 2.0 * (double)M * (double)N_layer * (double)K_layer;
    printf("%-12s %-5s %6lld %6lld %6lld %-8s %2d | %10.1f %10.1f %7.3f %7.3f | %10.1f %10.1f | %7.2f %6.2fx %6ld | %s\n",
           sh->name, c.ag ? "ag" : "rs", (long long)M, (long long)N_layer, (long long)K_layer,
           fp8 ? "fp8_e4m3" : "int8", c.W, t_gemm, t_comm, algbw, busbw, t_unf, t_fus, eff,
           t_fus > 0 ? t_unf / t_fus : 0, wrong, chose);
    if (json)
      fprintf(json,
              "{\"impl\":\"w8a8_cpu_tp\",\"op\":\"%s\",\"shape\":\"%s\",\"dtype\":\"%s\",\"scales\":\"token*channel\","
              "\"world\":%d,\"M\":%lld,\"N\":%lld,\"K\":%lld,\"div\":%d,\"gemm_us\":%.3f,\"comm_us\":%.3f,"
              "\"unfused_us\":%.3f,\"fused_us\":%.3f,\"us\":%.3f,\"tflops\":%.6f,\"overlap_eff\":%.4f,"
              "\"speedup\":%.4f,\"algbw_gbps\":%.4f,\"busbw_gbps\":%.4f,\"wrong\":%ld,\"threads\":%d,"
              "\"auto\":\"%s\",\"device\":\"%s\",\"date\":\"%s\"}\n",
              c.ag ? "all_gather_scaled_mm" : "scaled_mm_reduce_scatter", sh->name, fp8 ? "fp8_e4m3" : "int8", c.W,
              (long long)M, (long long)N_layer, (long long)K_layer, ar->div, t_gemm, t_comm, t_unf, t_fus, t_fus,
              t_fus > 0 ? flops / t_fus / 1e6 : 0, eff, t_fus > 0 ? t_unf / t_fus : 0, algbw, busbw, wrong,
              ar->threads, chose, device, date);
  }
done:
  free(afull), free(bq), free(safull), free(sb), free(out), free(out2), free(c.counts), free(c.displs);
  free(c.partial), free(c.rs_ref);
  return wrong;
}

int w8a8_cli_tp_bench(int argc, char **argv) {
  if (wants_gpu(argc, argv)) return w8a8_cli_tp_bench_gpu(argc, argv);
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
  }
  int W = 1, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  setvbuf(stdout, NULL, _IOLBF, 0);
  tp_args ar;
  /* every rank parses the same command line and takes the same branch; rank 0 reports */
  int pr = parse(argc, argv, &ar, W, r);
  if (pr) {
    if (pr == 1 && r == 0) usage(stdout);
    MPI_Finalize();
    return pr == 1 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
  }
  /* -o: opened on rank 0 before any measurement; every rank learns the outcome before the collective work */
  FILE *json = NULL;
  int json_ok = 1;
  if (r == 0 && ar.out_path && !(json = fopen(ar.out_path, "w"))) {
    fprintf(stderr, "w8a8 tp-bench: -o: cannot open '%s' for writing: %s\n", ar.out_path, strerror(errno));
    json_ok = 0;
  }
  MPI_Bcast(&json_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!json_ok) {
    MPI_Finalize();
    return CLI_EXIT_FAIL;
  }
  w8a8_handle *h = NULL;
  w8a8_comm *comm = NULL;
  w8a8_status s = w8a8_create(&h, W8A8_DEVICE_CPU, 0);
  if (s == W8A8_SUCCESS) s = w8a8_set_num_threads(h, ar.threads);
  if (s == W8A8_SUCCESS) {
    MPI_Comm world = MPI_COMM_WORLD;
    s = w8a8_comm_create_mpi(&comm, h, &world);
  }
  int64_t maxM = 0, maxN = 0, maxK = 0;
  for (int i = 0; i < ar.nM; i++) maxM = ar.Ms[i] > maxM ? ar.Ms[i] : maxM;
  for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++) {
    int64_t N = k_shapes[i].N / ar.div, K = k_shapes[i].K / ar.div;
    maxN = N > maxN ? N : maxN; /* RS: full N; AG: a shard (smaller) */
    maxK = K > maxK ? K : maxK;
  }
  if (s == W8A8_SUCCESS) s = w8a8_comm_reserve(comm, maxM, maxN, maxK);
  if (s != W8A8_SUCCESS) {
    fprintf(stderr, "tp-bench (rank %d): %s: %s\n", r, w8a8_status_name(s), w8a8_last_error());
    if (json) fclose(json);
    w8a8_comm_destroy(comm);
    w8a8_destroy(h);
    MPI_Finalize();
    return 1;
  }
  w8a8_handle_info info;
  w8a8_get_info(h, &info);
  char date[32];
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
  if (r == 0) {
    printf("# w8a8 tp-bench: %d ranks (TP = %d), %d CPU threads per rank, %s\n", W, W, ar.threads, info.name);
    printf("# Llama-3.1-70B shapes with N and K divided by %d; ag = all-gather + GEMM (N sharded), "
           "rs = GEMM + reduce-scatter (K sharded)\n",
           ar.div);
    printf("# times: median of %d iterations of the slowest rank, microseconds; bf16 out, per-token x per-channel "
           "scales\n",
           ar.iters);
    printf("# overlap = (unfused - fused) / min(gemm, comm); busbw = algbw * (W-1)/W; auto = the schedule "
           "W8A8_TP_OVERLAP_AUTO ran (crossover: all-gather %lld rows, reduce-scatter %lld)\n",
           (long long)w8a8_tp_crossover_rows(comm, 1), (long long)w8a8_tp_crossover_rows(comm, 0));
    printf("# %-10s %-5s %6s %6s %6s %-8s %2s | %10s %10s %7s %7s | %10s %10s | %7s %7s %6s | %s\n", "shape", "op",
           "M", "N", "K", "dtype", "W", "gemm_us", "comm_us", "algbw", "busbw", "unfused_us", "fused_us", "overlap",
           "speedup", "#wrong", "auto");
    printf("# %-10s %-5s %6s %6s %6s %-8s %2s | %10s %10s %7s %7s | %10s %10s | %7s %7s %6s |\n", "", "", "", "(rank)",
           "(rank)", "", "", "", "", "GB/s", "GB/s", "", "", "", "", "");
  }
  long wrong = 0;
  int failed = 0;
  for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++) {
    if (ar.only && strcmp(ar.only, k_shapes[i].name)) continue;
    for (int f = 0; f < 2; f++) {
      if ((f == 0 && !ar.do_int8) || (f == 1 && !ar.do_fp8)) continue;
      for (int m = 0; m < ar.nM; m++) {
        wrong += measure(comm, h, &ar, &k_shapes[i], ar.Ms[m], f, json, info.name, date, &failed);
        if (r == 0) fprintf(stderr, "tp-bench: %s %s M=%lld done\n", k_shapes[i].name, f ? "fp8" : "int8",
                            (long long)ar.Ms[m]);
      }
    }
  }
  int write_failed = 0; /* rank 0: the JSON lines did not all reach -o */
  if (json) {
    write_failed = ferror(json) != 0;
    errno = 0;
    if (fclose(json) != 0) write_failed = 1;
    if (write_failed)
      fprintf(stderr, "w8a8 tp-bench: -o: error writing '%s'%s%s\n", ar.out_path, errno ? ": " : "",
              errno ? strerror(errno) : "");
  }
  if (r == 0)
    printf("# %s: %ld wrong elements%s%s\n", wrong || write_failed ? "FAILED" : "ok", wrong,
           failed ? ", some calls failed" : "", write_failed ? ", the -o file is incomplete" : "");
  w8a8_comm_destroy(comm);
  w8a8_destroy(h);
  MPI_Finalize();
  return wrong || failed || write_failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

#endif /* W8A8_HAVE_MPI */
