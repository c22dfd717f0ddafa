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
  w8a8_dtype out_dtype;  /* BF16 by default */
  int warmup, iters;     /* per measurement; the module reports the median */
  int rotate;            /* number of weight copies to rotate through so B does not sit in cache (>= 1) */
  int baselines;         /* also time the baselines */
  int device_index;      /* CUDA device */
  int verbose;           /* progress on stderr */
} bench_config;

typedef struct bench_row {
  const char *impl;   /* "w8a8_cpu", "w8a8_cuda", "w8a8_cuda_generic", "onednn_s8", "openblas_sgemm",
                         "cublaslt_bf16", "cublaslt_fp8_tensorwise", "cublaslt_fp8_outervec", "cublaslt_int8" */
  const char *op;     /* "scaled_mm" */
  const char *dtype;  /* "int8", "fp8_e4m3", "bf16", "fp32" */
  const char *scales; /* "tensor" or "token*channel" */
  const char *shape;  /* shape name or "" */
  int64_t M, N, K;
  double us;          /* median microseconds per call */
  double tflops;      /* 2*M*N*K / us */
  double gbps;        /* (A + B + out bytes) / us */
  double vs_baseline; /* baseline_us / us for our rows (speedup), 0 when no baseline */
  const char *baseline; /* which impl vs_baseline compares with, or "" */
  long wrong;         /* elements that failed verification (0 = verified) */
  const char *device; /* device name */
} bench_row;

typedef void (*bench_emit_fn)(void *ctx, const bench_row *row);

/* tools/bench_cuda.c: GPU rows (ours and cuBLASLt). Returns 0 on success, nonzero with a message
 * on stderr when no GPU is usable. Defined only in CUDA builds (W8A8_HAVE_CUDA). */
int bench_cuda(const bench_config *cfg, bench_emit_fn emit, void *ctx);

/* tools/bench_cpu.c: CPU rows (ours, oneDNN s8 matmul, OpenBLAS sgemm). Returns 0 on success. */
int bench_cpu(const bench_config *cfg, bench_emit_fn emit, void *ctx);

/* The unquantized baselines `w8a8 demo` compares with, timed on random data (median us per call).
 * Return 0 and fill *us, or -1 when the baseline is not built in / no device (message on stderr). */
int bench_cpu_sgemm_us(int64_t M, int64_t N, int64_t K, double *us);                /* OpenBLAS sgemm */
int bench_cuda_bf16_us(int device, int64_t M, int64_t N, int64_t K, double *us);    /* cuBLASLt bf16 */

/* tools/tp_bench.c: `w8a8 tp-bench` (run under mpirun). Returns the process exit code. */
int w8a8_cli_tp_bench(int argc, char **argv);

#endif
