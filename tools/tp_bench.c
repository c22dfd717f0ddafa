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
 * two is completely hidden, 0 = nothing is (left out where it would be noise: cli_tp_overlap). Each
 * time is p20 / p50 / p80 over iterations of the slowest rank (MPI_Barrier, then MPI_Wtime around
 * the call, MPI_Allreduce MAX). At least 2 ranks: one has nothing to communicate.
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

#define TP_MAX_ITERS_CPU 256  /* time_op's array */
#define TP_MAX_ITERS_GPU 1000 /* tools/tp_bench_gpu.c's event pairs per rank */
#define TP_MAX_WARMUP 10000
#define TP_MAX_THREADS 4096 /* w8a8_set_num_threads' bound */

/* ---- the command line: one table for CPU and GPU ranks ---------------------------------------------- */
enum {
  TP_SHAPE = 256,
  TP_LOCAL,
  TP_NCCL,
  TP_DEVICE,
  TP_ONE_GPU,
  TP_PARTIALS,
  TP_GRAPH,
  TP_JSON,
  TP_OLD_GPU,
};
static const cli_opt tp_opts[] = {
    {'m', "m", 'm', "LIST", "rows of the layer (tokens), up to 32 values in 1..2147483647\n"
                            "(default CPU ranks 16,64,256; GPU ranks 1024,4096,8192)"},
    {'d', "dtype", 'd', "D", "int8, fp8 or both (default both)"},
    {'s', "div", 's', "DIV", "divide the 70B shapes' N and K by DIV (default CPU 8, GPU 1: the\n"
                             "real shapes); at most 8192 / W, so that every rank keeps a row\n"
                             "of each sharded N or K"},
    {TP_SHAPE, "shape", 0, "NAME", "only 70b-qkv, 70b-o, 70b-gate_up or 70b-down"},
    {'i', "iters", 'i', "N", "timed iterations (default CPU 5, GPU 20; at most CPU 256, GPU 1000)"},
    {'w', "warmup", 'w', "N", "warm-up iterations, 0..10000 (default CPU 1, GPU 3)"},
    {'t', "threads", 't', "N", "CPU ranks: threads per rank, 1..4096 (default cores / ranks)"},
    {TP_LOCAL, "local", 0, "W", "GPU ranks: W threads of this process, 2..8; rank r on GPU\n"
                                "(D + r) % ndev"},
    {TP_NCCL, "nccl", 0, NULL, "GPU ranks: one per MPI process and GPU (mpirun -np W; NCCL)"},
    {TP_DEVICE, "device", 0, "D", "--local: the first CUDA device D (default 0)"},
    {TP_ONE_GPU, "one-gpu", 0, NULL, "--local: every rank on device D (emulated ranks sharing one GPU:\n"
                                     "the mechanism, not multi-GPU performance)"},
    {TP_PARTIALS, "partials", 0, "P", "GPU ranks: the reduce-scatter's partials, fp32 (default) or out\n"
                                      "(rounded to the bf16 out before they travel: half the bytes)"},
    {TP_GRAPH, "graph", 0, NULL, "--local: time replays of one CUDA graph holding every rank's call"},
    {'o', "out", 'o', "FILE", "also write JSON lines to FILE ('-': stdout, the table then goes\n"
                              "to stderr); rank 0 writes"},
    {TP_JSON, "json", 0, NULL, "JSON lines on stdout, the table on stderr (= -o -)"},
    /* old spellings whose meaning now differs: refused with what replaced them */
    {'n', NULL, 'n', NULL, NULL},
    {TP_OLD_GPU, "gpu", 0, NULL, NULL},
};
#define NTP_OPTS ((int)(sizeof tp_opts / sizeof tp_opts[0]))

static void usage(FILE *f) {
  fprintf(f,
          "usage: mpirun -np W w8a8 tp-bench [options]          CPU ranks, one per MPI process (W >= 2)\n"
          "       w8a8 tp-bench --local W [options]             W GPU ranks as threads of one process\n"
          "       mpirun -np W w8a8 tp-bench --nccl [options]   one GPU rank per process (NCCL)\n"
          "The fused tensor-parallel operations on the Llama-3.1-70B linear layers at TP = W: each rank's\n"
          "GEMM alone, the communication alone, the library call unfused (overlap 0) and fused (overlap 1),\n"
          "and the overlap (unfused - fused) / min(gemm, comm). One rank has nothing to communicate: the\n"
          "overlap figures need W >= 2.\n"
          "\n");
  cli_print_options(f, tp_opts, NTP_OPTS);
  fprintf(f,
          "\n"
          "M x K (all-gather) and M x N (reduce-scatter) of a layer must fit an MPI count (at most %d).\n"
          "Times: p20 / p50 / p80 over the iterations of the slowest rank, microseconds. JSON: docs/CLI.md.\n",
          INT_MAX);
}

/* 0: run; 1: -h (the usage is printed); 2: a bad command line (reported by the reporting rank). The bounds
 * that depend on the world size (-s, the MPI counts) are checked once it is known. */
static int parse(int argc, char **argv, tp_args *ar) {
  memset(ar, 0, sizeof *ar);
  ar->do_int8 = ar->do_fp8 = 1;
  ar->div = ar->warmup = ar->iters = ar->threads = -1;
  ar->argc = argc;
  ar->argv = argv;
  cli_parser p;
  cli_parser_init(&p, "tp-bench", tp_opts, NTP_OPTS, argc, argv);
  p.quiet = !cli_reporting_rank();
  int rc = 0, c, k;
  const char *v, *gpu_only = NULL;
  char iters_spelling[16] = "-i", div_spelling[16] = "-s", threads_spelling[16] = "-t";
  while (rc == 0 && (c = cli_next_opt(&p, &v)) != CLI_OPT_END) {
    switch (c) {
      case CLI_OPT_HELP:
        if (!p.quiet) usage(stdout);
        rc = 1;
        break;
      case CLI_OPT_ERROR: rc = 2; break;
      case 'm':
        if ((ar->nM = cli_opt_list(&p, v, 1, INT32_MAX, TP_MAX_M, "row counts", ar->Ms)) < 0) rc = 2;
        break;
      case 'd': {
        static const char *const ch[] = {"int8", "fp8", "both", NULL};
        if ((k = cli_opt_choice(&p, v, ch)) < 0) rc = 2;
        ar->do_int8 = k != 1, ar->do_fp8 = k != 0;
        break;
      }
      case 's':
        snprintf(div_spelling, sizeof div_spelling, "%s", p.spelling);
        if (!cli_opt_int(&p, v, 1, (int)cli_tp_min_dim(), "(at most 8192 / W with W ranks)", &ar->div)) rc = 2;
        break;
      case TP_SHAPE:
        k = 0;
        while (k < CLI_TP_NSHAPES && strcmp(v, cli_tp_shapes[k].name)) k++;
        if (k == CLI_TP_NSHAPES)
          rc = cli_usage_error(&p, "--shape takes %s, got '%s'", cli_tp_shape_names(), v);
        ar->only = v;
        break;
      case 'i':
        snprintf(iters_spelling, sizeof iters_spelling, "%s", p.spelling);
        if (!cli_opt_int(&p, v, 1, TP_MAX_ITERS_GPU, "timed iterations", &ar->iters)) rc = 2;
        break;
      case 'w':
        if (!cli_opt_int(&p, v, 0, TP_MAX_WARMUP, "warm-up iterations", &ar->warmup)) rc = 2;
        break;
      case 't':
        snprintf(threads_spelling, sizeof threads_spelling, "%s", p.spelling);
        if (!cli_opt_int(&p, v, 1, TP_MAX_THREADS, "CPU threads per rank", &ar->threads)) rc = 2;
        break;
      case TP_LOCAL:
        if (!cli_opt_int(&p, v, 2, TP_MAX_W_LOCAL, "ranks (one rank has nothing to overlap)", &ar->W)) rc = 2;
        ar->local = 1;
        break;
      case TP_NCCL: ar->nccl = 1; break;
      case TP_DEVICE:
        gpu_only = "--device";
        if (!cli_opt_int(&p, v, 0, 1023, "(a CUDA device)", &ar->device)) rc = 2;
        break;
      case TP_ONE_GPU:
        gpu_only = "--one-gpu";
        ar->one_gpu = 1;
        break;
      case TP_GRAPH:
        gpu_only = "--graph";
        ar->graph = 1;
        break;
      case TP_PARTIALS: {
        static const char *const ch[] = {"fp32", "out", NULL};
        gpu_only = "--partials";
        if ((k = cli_opt_choice(&p, v, ch)) < 0) rc = 2;
        ar->partials = k == 1 ? W8A8_TP_PARTIALS_OUT : W8A8_TP_PARTIALS_FP32;
        break;
      }
      case 'o': ar->out_path = v; break;
      case TP_JSON: ar->out_path = "-"; break;
      case 'n':
        rc = cli_usage_error(&p, "-n is not the iteration count any more (-n is the N list in bench and tune): "
                                 "use -i/--iters");
        break;
      case TP_OLD_GPU:
        rc = cli_usage_error(&p, "--gpu W is now --local W (GPU ranks as threads of this process)");
        break;
    }
  }
  if (rc == 0 && p.first_positional < argc)
    rc = cli_usage_error(&p, "unexpected argument '%s' (tp-bench takes options only)", argv[p.first_positional]);
  ar->gpu = ar->local || ar->nccl;
  if (rc == 0 && ar->nccl && (ar->local || ar->one_gpu || ar->graph)) /* --nccl: W is mpirun's -np */
    rc = cli_usage_error(&p, "--nccl runs one rank per MPI process and GPU (W = mpirun's -np): %s does not go with it",
                         ar->local ? "--local" : ar->one_gpu ? "--one-gpu" : "--graph");
  if (rc == 0 && !ar->gpu && gpu_only)
    rc = cli_usage_error(&p, "%s is an option of GPU ranks (with --local W or --nccl)", gpu_only);
  if (rc == 0 && ar->gpu && ar->threads >= 0)
    rc = cli_usage_error(&p, "%s is an option of CPU ranks (mpirun without --local or --nccl)", threads_spelling);
  if (rc == 0 && !ar->gpu && ar->iters > TP_MAX_ITERS_CPU)
    rc = cli_usage_error(&p, "%s takes 1..%d timed iterations with CPU ranks, got '%d'", iters_spelling,
                         TP_MAX_ITERS_CPU, ar->iters);
  if (rc == 0 && ar->local && ar->div > 0 && ar->div > cli_tp_min_dim() / ar->W)
    rc = cli_usage_error(&p, "%s %d: at most %lld with %d ranks (every shape's N/DIV and K/DIV must be at least the "
                             "rank count)",
                         div_spelling, ar->div, (long long)(cli_tp_min_dim() / ar->W), ar->W);
  cli_parser_free(&p);
  if (rc) return rc;
  /* the defaults of the mode */
  if (ar->div < 0) ar->div = ar->gpu ? 1 : 8;
  if (ar->warmup < 0) ar->warmup = ar->gpu ? 3 : 1;
  if (ar->iters < 0) ar->iters = ar->gpu ? 20 : 5;
  if (!ar->nM) {
    static const int64_t cpu_m[] = {16, 64, 256}, gpu_m[] = {1024, 4096, 8192};
    for (int i = 0; i < 3; i++) ar->Ms[i] = ar->gpu ? gpu_m[i] : cpu_m[i];
    ar->nM = 3;
  }
  return 0;
}

/* A world of W ranks: 0, or 2 after the one-line error (report: the reporting rank). One rank times a "fused"
 * call with nothing to communicate, and its overlap figure is noise divided by almost nothing. */
int tp_check_world(const tp_args *ar, int W, int report) {
  const char *see = "see 'w8a8 tp-bench --help'";
  if (W < 2) {
    if (report)
      fprintf(stderr,
              "w8a8 tp-bench: 1 rank: nothing is communicated, so there is no overlap to measure; run W >= 2 ranks: "
              "%s, or GPU ranks in one process: w8a8 tp-bench --local 2 (--one-gpu: emulated on one GPU); %s\n",
              ar->nccl ? "mpirun -np 2 w8a8 tp-bench --nccl" : "mpirun -np 2 w8a8 tp-bench", see);
    return 2;
  }
  const int64_t div_max = cli_tp_min_dim() / W;
  if (div_max < 1) {
    if (report)
      fprintf(stderr, "w8a8 tp-bench: %d ranks: more than the shapes' smallest N or K (%lld); %s\n", W,
              (long long)cli_tp_min_dim(), see);
    return 2;
  }
  if (ar->div > div_max) {
    if (report)
      fprintf(stderr,
              "w8a8 tp-bench: -s %d: at most %lld with %d ranks (every shape's N/DIV and K/DIV must be at least the "
              "rank count); %s\n",
              ar->div, (long long)div_max, W, see);
    return 2;
  }
  /* MPI counts are int: the all-gather moves M x K bytes, the reduce-scatter M x N fp32 elements. */
  for (int i = 0; !ar->gpu && i < CLI_TP_NSHAPES; i++) {
    const cli_tp_shape *sh = &cli_tp_shapes[i];
    if (ar->only && strcmp(ar->only, sh->name)) continue;
    const int64_t d = sh->ag ? sh->K / ar->div : sh->N / ar->div; /* >= W >= 1 */
    for (int m = 0; m < ar->nM; m++)
      if (ar->Ms[m] > INT_MAX / d) {
        if (report)
          fprintf(stderr,
                  "w8a8 tp-bench: -m %lld: %s with -s %d has %s = %lld, and M x %s = %lld is more than an MPI count "
                  "holds (%d); use a smaller M or a larger -s; %s\n",
                  (long long)ar->Ms[m], sh->name, ar->div, sh->ag ? "K" : "N", (long long)d, sh->ag ? "K" : "N",
                  (long long)(ar->Ms[m] * d), INT_MAX, see);
        return 2;
      }
  }
  return 0;
}

/* ---- the row: table and JSON (CPU and GPU ranks) ------------------------------------------------------ */

void tp_print_columns(FILE *tab) {
  fprintf(tab,
          "# %-10s %-3s %6s %6s %6s %-8s %2s | %9s %9s %7s %7s | %9s %9s %9s | %9s %9s %9s | %7s %7s %6s | %s\n",
          "shape", "op", "M", "N", "K", "dtype", "W", "gemm_us", "comm_us", "algbw", "busbw", "unf_p20", "unf_p50",
          "unf_p80", "fus_p20", "fus_p50", "fus_p80", "overlap", "speedup", "#wrong", "auto");
  fprintf(tab, "# %-10s %-3s %6s %6s %6s %-8s %2s | %9s %9s %7s %7s | %9s %9s %9s | %9s %9s %9s | %7s %7s %6s |\n", "",
          "", "", "(rank)", "(rank)", "", "", "(p50)", "(p50)", "GB/s", "GB/s", "", "", "", "", "", "", "", "", "");
}

static double tp_algbw(const tp_row *r) { return r->comm.p50 > 0 ? r->comm_bytes / r->comm.p50 * 1e-3 : 0; }

void tp_print_row(FILE *tab, const tp_row *r) {
  const double algbw = tp_algbw(r), busbw = algbw * (r->W - 1) / (r->W > 0 ? r->W : 1);
  const double ov = cli_tp_overlap(r->W, &r->gemm, &r->comm, &r->unfused, &r->fused);
  char ovs[16] = "-";
  if (isfinite(ov)) snprintf(ovs, sizeof ovs, "%.2f", ov);
  fprintf(tab,
          "%-12s %-3s %6lld %6lld %6lld %-8s %2d | %9.1f %9.1f %7.2f %7.2f | %9.1f %9.1f %9.1f | %9.1f %9.1f %9.1f | "
          "%7s %6.2fx %6ld | %s%s\n",
          r->shape->name, r->shape->ag ? "ag" : "rs", (long long)r->M, (long long)r->N, (long long)r->K,
          r->fp8 ? "fp8_e4m3" : "int8", r->W, r->gemm.p50, r->comm.p50, algbw, busbw, r->unfused.p20, r->unfused.p50,
          r->unfused.p80, r->fused.p20, r->fused.p50, r->fused.p80, ovs,
          r->fused.p50 > 0 ? r->unfused.p50 / r->fused.p50 : 0.0, r->wrong, r->chose ? r->chose : "-",
          r->failed ? " FAILED" : "");
}

void tp_json_row_begin(cli_jw *w, FILE *json, const tp_args *ar, const tp_row *r) {
  cli_row c;
  memset(&c, 0, sizeof c);
  c.command = "tp-bench";
  c.impl = r->impl;
  c.op = r->shape->ag ? "all_gather_scaled_mm" : "scaled_mm_reduce_scatter";
  c.device = r->device;
  c.device_kind = r->device_kind;
  c.dtype = r->fp8 ? "fp8_e4m3" : "int8";
  c.M = r->M, c.N = r->N, c.K = r->K;
  c.kernel = r->ran.kernel;
  c.config = r->ran.config;
  c.split_k = r->ran.split_k;
  c.iters = ar->iters;
  c.warmup = ar->warmup;
  c.t = r->fused;
  c.flops = 2.0 * (double)r->M * (double)r->N * (double)r->K;
  c.wrong = r->wrong;
  cli_json_row_begin(w, json, &c);
  const double algbw = tp_algbw(r), ov = cli_tp_overlap(r->W, &r->gemm, &r->comm, &r->unfused, &r->fused);
  cli_jw_str(w, "shape", r->shape->name);
  cli_jw_str(w, "scales", "token*channel");
  cli_jw_str(w, "out_dtype", "bf16");
  cli_jw_int(w, "world", r->W);
  cli_jw_int(w, "div", ar->div);
  const struct {
    const char *name;
    const cli_stats *t;
  } parts[3] = {{"gemm", &r->gemm}, {"comm", &r->comm}, {"unfused", &r->unfused}};
  for (int i = 0; i < 3; i++) {
    char k[32];
    const int ok = parts[i].t->p50 >= 0;
    snprintf(k, sizeof k, "%s_p20_us", parts[i].name);
    cli_jw_num(w, k, ok ? parts[i].t->p20 : NAN);
    snprintf(k, sizeof k, "%s_p50_us", parts[i].name);
    cli_jw_num(w, k, ok ? parts[i].t->p50 : NAN);
    snprintf(k, sizeof k, "%s_p80_us", parts[i].name);
    cli_jw_num(w, k, ok ? parts[i].t->p80 : NAN);
  }
  const int base = r->unfused.p50 > 0 && r->fused.p50 > 0;
  cli_jw_str(w, "baseline", base ? "unfused" : NULL);
  cli_jw_num(w, "baseline_p50_us", base ? r->unfused.p50 : NAN);
  cli_jw_num(w, "vs_baseline", base ? r->unfused.p50 / r->fused.p50 : NAN);
  cli_jw_num(w, "overlap", ov);
  cli_jw_num(w, "algbw_gbps", algbw > 0 ? algbw : NAN);
  cli_jw_num(w, "busbw_gbps", algbw > 0 ? algbw * (r->W - 1) / r->W : NAN);
  cli_jw_str(w, "auto", r->chose);
  cli_jw_bool(w, "failed", r->failed);
}

/* The parse and the GPU dispatch, common to builds with and without MPI: 1 when that finished the command
 * (*rc its exit code), 0 to go on with CPU ranks. */
static int front(int argc, char **argv, tp_args *ar, int *rc) {
  const int pr = parse(argc, argv, ar);
  *rc = pr == 1 ? CLI_EXIT_OK : pr ? CLI_EXIT_USAGE : 0;
  if (pr) return 1;
  if (!ar->gpu) return 0;
  *rc = w8a8_cli_tp_bench_gpu(ar);
  return 1;
}

#ifndef W8A8_HAVE_MPI

int w8a8_cli_tp_bench(int argc, char **argv) {
  tp_args ar;
  int rc = 0;
  if (front(argc, argv, &ar, &rc)) return rc;
  fprintf(stderr, "w8a8 tp-bench: this build has no MPI (install libopenmpi-dev and rebuild); GPU ranks in one "
                  "process: w8a8 tp-bench --local W\n");
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

/* p20 / p50 / p80 over iterations of the slowest rank's time, in microseconds. */
typedef int (*op_fn)(void *ctx);
static cli_stats time_op(op_fn fn, void *ctx, const tp_args *ar, int *failed) {
  double t[TP_MAX_ITERS_CPU];
  int n = ar->iters < TP_MAX_ITERS_CPU ? ar->iters : TP_MAX_ITERS_CPU; /* parse() refuses more */
  for (int i = 0; i < ar->warmup; i++) *failed |= fn(ctx);
  for (int i = 0; i < n; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    *failed |= fn(ctx);
    double dt = MPI_Wtime() - t0, mx = 0;
    MPI_Allreduce(&dt, &mx, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    t[i] = mx * 1e6;
  }
  return cli_stats_of(t, n);
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
                    FILE *json, const char *device, int *failed_any) {
  int row_failed = 0, *failed = &row_failed; /* this row's calls; every rank's, once reduced */
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

  const cli_stats t_gemm = time_op(run_gemm, &c, ar, failed);
  /* AG check data: w8a8_scaled_mm on the whole layer's rows, kept from the GEMM timing. */
  uint16_t *direct = NULL;
  if (c.ag) {
    direct = malloc(2 * (size_t)(M * c.N) + 2);
    if (direct) memcpy(direct, out2, 2 * (size_t)(M * c.N));
  }
  const cli_stats t_comm = time_op(run_comm, &c, ar, failed);
  const cli_stats t_unf = time_op(run_unfused, &c, ar, failed);
  const cli_stats t_fus = time_op(run_fused, &c, ar, failed);
  cli_launch ran; /* the fused call's GEMM (the handle's last) */
  cli_last_launch(h, "auto", &ran);

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
  int any_failed = 0;
  MPI_Allreduce(&row_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  row_failed = any_failed;

  if (c.r == 0) {
    tp_row row;
    memset(&row, 0, sizeof row);
    row.impl = "w8a8_cpu_tp";
    row.device = device;
    row.device_kind = "cpu";
    row.shape = sh;
    row.fp8 = fp8;
    row.W = c.W;
    row.M = M, row.N = c.N, row.K = c.K; /* this rank's GEMM: M x N x K */
    row.gemm = t_gemm, row.comm = t_comm, row.unfused = t_unf, row.fused = t_fus;
    /* bytes the collective moves, as nccl-tests counts them */
    row.comm_bytes = c.ag ? (double)M * (double)c.K + 4.0 * (double)M : 4.0 * (double)M * (double)c.N;
    row.wrong = wrong;
    row.failed = row_failed;
    row.chose = chose;
    row.ran = ran;
    tp_print_row(cli_tab, &row);
    if (json) {
      cli_jw w;
      tp_json_row_begin(&w, json, ar, &row);
      cli_jw_int(&w, "threads", ar->threads);
      cli_jw_end(&w);
    }
  }
done:
  free(afull), free(bq), free(safull), free(sb), free(out), free(out2), free(c.counts), free(c.displs);
  free(c.partial), free(c.rs_ref);
  *failed_any |= row_failed;
  return wrong;
}

int w8a8_cli_tp_bench(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  tp_args ar;
  int rc = 0;
  /* every rank parses the same command line and takes the same branch; the reporting rank reports */
  if (front(argc, argv, &ar, &rc)) return rc;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
  }
  int W = 1, r = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &W);
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  if ((rc = tp_check_world(&ar, W, r == 0)) != 0) {
    MPI_Finalize();
    return rc;
  }
  if (ar.threads < 0) { /* the default: this machine's cores shared by the ranks */
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    ar.threads = ncpu / W > 1 ? (int)(ncpu / W) : 1;
    if (ar.threads > TP_MAX_THREADS) ar.threads = TP_MAX_THREADS;
  }
  /* -o: opened on rank 0 before any measurement; every rank learns the outcome before the collective work */
  FILE *json = NULL;
  int json_ok = r != 0 || cli_out_open("tp-bench", ar.out_path, &json) == 0;
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
    cli_out_close("tp-bench", ar.out_path, json);
    w8a8_comm_destroy(comm);
    w8a8_destroy(h);
    MPI_Finalize();
    return CLI_EXIT_FAIL;
  }
  w8a8_handle_info info;
  w8a8_get_info(h, &info);
  if (r == 0) {
    FILE *tab = cli_tab;
    cli_json_header(json, "tp-bench", argc, argv);
    fprintf(tab, "# w8a8 tp-bench: %d ranks (TP = %d), %d CPU threads per rank, %s, w8a8 %s\n", W, W, ar.threads,
            info.name, w8a8_version_string());
    fprintf(tab,
            "# Llama-3.1-70B shapes with N and K divided by %d; ag = all-gather + GEMM (N sharded), "
            "rs = GEMM + reduce-scatter (K sharded); bf16 out, per-token x per-channel scales\n",
            ar.div);
    fprintf(tab,
            "# times: us over %d iterations (after %d warm-up) of the slowest rank: p50 for gemm and comm, p20 / p50 "
            "/ p80 for unfused and fused\n",
            ar.iters, ar.warmup);
    fprintf(tab,
            "# overlap = (unfused - fused) / min(gemm, comm) at p50, '-' where min(gemm, comm) is under 10%% of "
            "unfused or under the p20..p80 spreads of unfused and fused (noise); busbw = algbw * (W-1)/W\n");
    fprintf(tab,
            "# auto = the schedule W8A8_TP_OVERLAP_AUTO ran (crossover: all-gather %lld rows, reduce-scatter %lld)\n",
            (long long)w8a8_tp_crossover(comm, 1), (long long)w8a8_tp_crossover(comm, 2));
    tp_print_columns(tab);
  }
  long wrong = 0;
  int failed = 0;
  for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++) {
    if (ar.only && strcmp(ar.only, k_shapes[i].name)) continue;
    for (int f = 0; f < 2; f++) {
      if ((f == 0 && !ar.do_int8) || (f == 1 && !ar.do_fp8)) continue;
      for (int m = 0; m < ar.nM; m++) {
        wrong += measure(comm, h, &ar, &k_shapes[i], ar.Ms[m], f, json, info.name, &failed);
        if (r == 0) fprintf(stderr, "tp-bench: %s %s M=%lld done\n", k_shapes[i].name, f ? "fp8" : "int8",
                            (long long)ar.Ms[m]);
      }
    }
  }
  /* rank 0: whether the JSON lines all reached -o */
  const int write_failed = r == 0 && cli_out_close("tp-bench", ar.out_path, json) != 0;
  if (r == 0)
    fprintf(cli_tab, "# %s: %ld wrong elements%s%s\n", wrong || failed || write_failed ? "FAILED" : "ok", wrong,
            failed ? ", some calls failed" : "", write_failed ? ", the -o file is incomplete" : "");
  w8a8_comm_destroy(comm);
  w8a8_destroy(h);
  MPI_Finalize();
  return wrong || failed || write_failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

#endif /* W8A8_HAVE_MPI */
