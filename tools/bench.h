/* bench.h — the contract between the CLI's benchmark harness (tools/bench.c, owns
 * the table/JSON output and the CPU rows) and the GPU benchmark module
 * (tools/bench_cuda.c, built only with CUDA: our GPU kernels + cuBLASLt baselines).
 *
 * A module times every implementation it knows on every (shape, dtype, scale mode)
 * of the config, verifies each result it times (the #wrong column), and hands
 * each measurement to `emit` as one row. The harness prints and writes rows. */
#ifndef W8A8_TOOLS_BENCH_H
#define W8A8_TOOLS_BENCH_H
#include <stdint.h>

#include "cli_common.h"
#include "w8a8.h"

typedef struct bench_shape {
  const char *name; /* "8b-qkv", "70b-o-tp4", or "" for explicit -m/-n/-k */
  int64_t N, K;
} bench_shape;

typedef struct bench_config {
  const bench_shape *shapes;
  int nshapes;
  const int64_t *Ms; /* M values to sweep */
  int nM;
  int do_int8, do_fp8;   /* which operand dtypes */
  int per_token;         /* 1: per-token scale_a x per-channel scale_b; 0: per-tensor x per-tensor */
  int block;             /* 1: block scales (w8a8_scaled_mm_blockwise, fp8 only; per_token is then unused) */
  w8a8_dtype out_dtype;  /* BF16 by default */
  int warmup, iters;     /* per measurement; the module reports p20 / p50 / p80 */
  int rotate;            /* number of weight copies to rotate through so B does not sit in cache (>= 1) */
  int baselines;         /* also time the baselines */
  int device_index;      /* CUDA device */
  int verbose;           /* progress on stderr */
  uint64_t seed;         /* the random operands' seed (--seed) */
} bench_config;

typedef struct bench_row {
  const char *impl;   /* "w8a8_cpu", "w8a8_cuda", "w8a8_cuda_generic", "onednn_s8", "openblas_sgemm",
                         "cublaslt_bf16", "cublaslt_fp8_tensorwise", "cublaslt_fp8_outervec", "cublaslt_int8" */
  const char *op;     /* "scaled_mm" */
  const char *dtype;  /* "int8", "fp8_e4m3", "bf16", "fp32" */
  const char *scales; /* "tensor" or "token*channel" */
  const char *shape;  /* shape name or "" */
  int64_t M, N, K;
  cli_stats t;        /* microseconds per call */
  double bytes;       /* A + B + out bytes one call moves (GB/s at p50) */
  const char *kernel; /* what ran: ours, the path asked for or (once the library reports it) chosen; a
                         baseline's own implementation name; NULL or "" unknown */
  const char *config; /* the configuration the library chose (the sm90 tile; a baseline's algorithm), NULL or "" */
  int split_k;        /* the K split of ours (1 none), 0 unknown */
  double base_p50;    /* the baseline's p50 (us) for our rows, 0 when none */
  const char *baseline; /* which impl base_p50 belongs to, or "" */
  long wrong;         /* elements that failed verification (0 = verified) */
  const char *device; /* device name */
} bench_row;

typedef void (*bench_emit_fn)(void *ctx, const bench_row *row);

/* Block-scaled rows (cfg->block): w8a8_scaled_mm_blockwise on handle h (any device) for every shape and M of cfg,
 * fp8 operands, [M, ceil(K/128)] / [ceil(N/128), ceil(K/128)] scales, timed and verified like the other rows (the
 * header's bound around a double-precision sum on sampled rows), one row each as `impl`. No baseline. tools/bench.c.
 * Returns 0, or -1 with a message on stderr. */
int bench_blockwise(const bench_config *cfg, w8a8_handle *h, const char *impl, const char *device, bench_emit_fn emit,
                    void *ctx);
/* tools/bench_cuda.c: GPU rows (ours and cuBLASLt). Returns 0 on success, nonzero with a message
 * on stderr when no GPU is usable. Defined only in CUDA builds (W8A8_HAVE_CUDA). */
int bench_cuda(const bench_config *cfg, bench_emit_fn emit, void *ctx);

/* tools/bench_cpu.c: CPU rows (ours, oneDNN s8 matmul, OpenBLAS sgemm). Returns 0 on success. */
int bench_cpu(const bench_config *cfg, bench_emit_fn emit, void *ctx);

/* The unquantized baselines `w8a8 demo` compares with, timed on random data (p20 / p50 / p80 us per call).
 * Return 0 and fill *t, or -1 when the baseline is not built in / no device (message on stderr). */
int bench_cpu_sgemm_us(int64_t M, int64_t N, int64_t K, cli_stats *t);             /* OpenBLAS sgemm */
int bench_cuda_bf16_us(int device, int64_t M, int64_t N, int64_t K, cli_stats *t); /* cuBLASLt bf16 */

/* ---- tp-bench (tools/tp_bench.c parses; CPU ranks there, GPU ranks in tools/tp_bench_gpu.c) ---- */
#define TP_MAX_M 32
#define TP_MAX_W_LOCAL 8 /* --local W */
typedef struct tp_args {
  int gpu;      /* --local or --nccl: GPU ranks (tools/tp_bench_gpu.c) */
  int local, W; /* --local W */
  int nccl, one_gpu, graph, device;
  int partials; /* W8A8_TP_PARTIALS_FP32 or _OUT (--partials fp32|out) */
  int64_t Ms[TP_MAX_M];
  int nM;
  int do_int8, do_fp8;
  int div, warmup, iters, threads;
  const char *out_path;
  const char *only; /* shape name filter, NULL = all */
  int argc;         /* the command line, for the JSON header */
  char **argv;
} tp_args;

/* tools/tp_bench.c: `w8a8 tp-bench`. Returns the process exit code. */
int w8a8_cli_tp_bench(int argc, char **argv);
/* tools/tp_bench_gpu.c: GPU ranks, after the parse. Returns the process exit code. */
int w8a8_cli_tp_bench_gpu(const tp_args *ar);
/* Checks that depend on the world size W (tools/tp_bench.c): at least 2 ranks, -s DIV <= 8192 / W, and with CPU
 * ranks M x K / M x N within an MPI count. 0, or CLI_EXIT_USAGE after the one-line error (where report). */
int tp_check_world(const tp_args *ar, int W, int report);

/* One measured row of tp-bench (CPU or GPU ranks): the table line and the JSON object (tools/tp_bench.c). */
typedef struct tp_row {
  const char *impl;        /* "w8a8_cpu_tp", "w8a8_gpu_tp_local", "w8a8_gpu_tp_nccl" */
  const char *device, *device_kind;
  const cli_tp_shape *shape;
  int fp8, W;
  int64_t M, N, K;         /* this rank's GEMM */
  cli_stats gemm, comm, unfused, fused; /* microseconds */
  double comm_bytes;       /* bytes the collective moves, as nccl-tests counts them (algbw = bytes / comm p50) */
  long wrong;
  int failed;
  const char *chose;       /* the schedule W8A8_TP_OVERLAP_AUTO ran: "fused", "unfused", "failed", "-" */
  cli_launch ran;          /* what the fused call's GEMM ran (this rank) */
} tp_row;
void tp_print_columns(FILE *tab);
void tp_print_row(FILE *tab, const tp_row *r);
/* '{"type":"row", ...' with tp-bench's keys into w; the caller adds its own and calls cli_jw_end. */
void tp_json_row_begin(cli_jw *w, FILE *json, const tp_args *ar, const tp_row *r);

/* tools/plot.c: `w8a8 plot`. */
int w8a8_cli_plot(int argc, char **argv);

#endif
