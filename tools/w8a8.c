/* w8a8.c — the `w8a8` command-line tool: main, `demo` (the main job), `check` (self-test of
 * the active backend against the scalar reference), `info`, `version`, `help`, and the
 * dispatch to `bench` (tools/bench.c), `tp-bench` (tools/tp_bench.c), `tp-stack`, `tune` and
 * `plot` (tools/plot.c). Every command parses with cli_parser (tools/cli_common.h): docs/CLI.md.
 *
 * Only the public API (include/w8a8.h) and tools/bench.h: the CLI is the library's first
 * client and must not lean on internals. With CUDA, the CUDA runtime is used for copies. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#ifdef W8A8_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "bench.h"
#include "cli_common.h"
#include "w8a8.h"

/* `w8a8 tune` (tools/tune.c, the Hopper tuner): weak, so that a CLI built without it still links
 * and the address tells whether it was linked in. */
int w8a8_cli_tune(int argc, char **argv) __attribute__((weak));
/* `w8a8 tp-stack` (tools/tp_stack.c): the Llama-3.1-70B layer-stack benchmark, GPU ranks. */
int w8a8_cli_tp_stack(int argc, char **argv);

static void main_usage(FILE *f) {
  fprintf(f,
          "usage: w8a8 <command> [options]     (w8a8 <command> --help: a command's options)\n"
          "\n"
          "  demo       the main job: quantize a Llama-3.1-8B layer's activations and weights, run\n"
          "             scaled_mm on the best backend, check it and time it against bf16/fp32\n"
          "  bench      sweep M over shape suites, next to the baselines (table + JSON lines)\n"
          "  check      self-test of the active backend against the scalar reference\n"
          "  tp-bench   tensor-parallel fused all-gather/reduce-scatter GEMMs (mpirun -np N, or --local N GPUs)\n"
          "  tp-stack   a Llama-3.1-70B-FP8 decoder stack at TP = W on GPU ranks, fused vs unfused\n"
          "  tune       measure kernel configurations for your shapes (Hopper)\n"
          "  plot       chart the JSON lines of bench / tp-bench / tp-stack (terminal, or an image)\n"
          "  info       devices found and what a handle on each reports\n"
          "  version    library version and build features\n"
          "  help       this text; help <command>: that command's options\n"
          "\n"
          "Options mean the same in every command (-m/-n/-k lists, -d/--dtype, -i/--iters, -w/--warmup,\n"
          "-o/--out FILE with '-' for stdout, --json, --device, --seed): docs/CLI.md.\n"
          "Exit status: 0 ok, 1 a wrong result or a failed call, 2 a bad command line.\n");
}

/* Report a failed library call with its detail; returns CLI_EXIT_FAIL. */
static int api_fail(const char *what, w8a8_status s) {
  fprintf(stderr, "w8a8: %s failed: %s (%s): %s\n", what, w8a8_status_name(s), w8a8_status_string(s),
          w8a8_last_error());
  return CLI_EXIT_FAIL;
}

/* ======================================================================================
 * version, info
 * ====================================================================================== */

/* A command without options of its own (version, info): -h, or the one-line error. Returns -1 to go on,
 * else the exit code. */
static int no_options(const char *cmd, int argc, char **argv, const char *usage) {
  cli_parser p;
  cli_parser_init(&p, cmd, NULL, 0, argc, argv);
  const char *v;
  int c, rc = -1;
  while (rc < 0 && (c = cli_next_opt(&p, &v)) != CLI_OPT_END) {
    if (c == CLI_OPT_HELP) {
      printf("%s", usage);
      rc = CLI_EXIT_OK;
    } else {
      rc = CLI_EXIT_USAGE;
    }
  }
  if (rc < 0 && p.first_positional < argc)
    rc = cli_usage_error(&p, "unexpected argument '%s' (%s takes no arguments)", argv[p.first_positional], cmd);
  cli_parser_free(&p);
  return rc;
}

static int cmd_version(int argc, char **argv) {
  const int rc = no_options("version", argc, argv, "usage: w8a8 version   the library's version and features\n");
  if (rc >= 0) return rc;
  printf("w8a8 %s\n", w8a8_version_string());
  if (w8a8_version() != W8A8_VERSION)
    printf("warning: header version %d, library version %d\n", W8A8_VERSION, w8a8_version());
  return CLI_EXIT_OK;
}

static void print_info(const char *label, const w8a8_handle_info *i) {
  printf("  %-8s %s\n", label, i->name);
  if (i->kind == W8A8_DEVICE_CUDA)
    printf("           compute capability %d.%d, %d SMs, features: %s\n", i->cc_major, i->cc_minor, i->num_sms,
           i->features);
  else
    printf("           %d OpenMP threads, features: %s\n", i->num_threads, *i->features ? i->features : "(scalar)");
  printf("           handle workspace: %zu bytes\n", i->workspace_bytes);
}

static int cmd_info(int argc, char **argv) {
  const int prc = no_options("info", argc, argv,
                             "usage: w8a8 info   the CPU and every CUDA device: capability, SMs, threads, features, "
                             "memory; every setting the library reads, with its value\n");
  if (prc >= 0) return prc;
  printf("w8a8 %s\n", w8a8_version_string());
  int rc = CLI_EXIT_OK;
  w8a8_handle *h = NULL;
  w8a8_handle_info info;
  w8a8_status s = w8a8_create(&h, W8A8_DEVICE_CPU, 0);
  if (s != W8A8_SUCCESS) return api_fail("w8a8_create(CPU)", s);
  if ((s = w8a8_get_info(h, &info)) == W8A8_SUCCESS) print_info("cpu", &info);
  w8a8_destroy(h);
  int n = w8a8_cuda_device_count();
#ifdef W8A8_HAVE_CUDA
  printf("  CUDA devices: %d\n", n);
#else
  printf("  CUDA: not in this build\n");
#endif
  for (int d = 0; d < n && d < 64; d++) {
    char label[24];
    snprintf(label, sizeof label, "cuda:%d", d);
    s = w8a8_create(&h, W8A8_DEVICE_CUDA, d);
    if (s != W8A8_SUCCESS) {
      printf("  %-8s unusable: %s\n", label, w8a8_last_error());
      continue;
    }
    if (w8a8_get_info(h, &info) == W8A8_SUCCESS) print_info(label, &info);
#ifdef W8A8_HAVE_CUDA
    size_t fr = 0, tot = 0;
    if (cudaSetDevice(d) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess)
      printf("           memory: %.1f GiB free of %.1f GiB\n", (double)fr / (1 << 30), (double)tot / (1 << 30));
    cudaGetLastError();
#endif
    w8a8_destroy(h);
  }
  s = w8a8_create_best(&h);
  if (s != W8A8_SUCCESS) return api_fail("w8a8_create_best", s);
  if (w8a8_get_info(h, &info) == W8A8_SUCCESS)
    printf("  best:    %s (%s)\n", info.kind == W8A8_DEVICE_CUDA ? "cuda" : "cpu", info.name);
  w8a8_destroy(h);
  /* every setting the library reads (its one table): the environment's value, or the default */
  printf("settings (environment; development switches through W8A8_DEV=\"NAME=value,...\"):\n");
  for (int pass = 1; pass >= 0; pass--)
    for (int i = 0; i < w8a8_setting_count(); i++) {
      w8a8_setting st;
      if (w8a8_get_setting(i, &st) != W8A8_SUCCESS || st.for_users != pass) continue;
      printf("  %-22s %-8s%s %s\n", st.name, st.value[0] ? st.value : "\"\"", st.is_set ? " (set)" : "      ", st.doc);
    }
  return rc;
}

/* ======================================================================================
 * demo
 * ====================================================================================== */

typedef struct layer {
  const char *name;
  int64_t N, K;
} layer;

/* One Llama-3.1-8B decoder layer at TP=1 (hidden 4096, 32+8+8 heads of 128, MLP 14336). */
static const layer llama8b_layers[] = {
    {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};

enum { DEMO_CPU = 256, DEMO_ROWS, DEMO_SEED, DEMO_JSON };
static const cli_opt demo_opts[] = {
    {DEMO_CPU, "cpu", 0, NULL, "use the CPU even when a GPU is usable"},
    {'m', "m", 'm', "M", "tokens (default 512 on the GPU, 64 on the CPU to stay quick on 2 cores)"},
    {'d', "dtype", 'd', "D", "int8, fp8 or both (default both)"},
    {'i', "iters", 'i', "N", "timed calls per measurement (default GPU 20, CPU 3)"},
    {'w', "warmup", 'w', "N", "untimed calls first (default GPU 3, CPU 1)"},
    {DEMO_ROWS, "rows", 0, "R", "rows checked against the reference and the exact product (GPU 16, CPU 8)"},
    {DEMO_SEED, "seed", 0, "S", "random seed (default 1)"},
    {'o', "out", 'o', "FILE", "also write JSON lines to FILE ('-': stdout, the table then goes to stderr)"},
    {DEMO_JSON, "json", 0, NULL, "JSON lines on stdout, the table on stderr (= -o -)"},
};
#define NDEMO_OPTS ((int)(sizeof demo_opts / sizeof demo_opts[0]))

static void demo_usage(FILE *f) {
  fprintf(f,
          "usage: w8a8 demo [options]\n"
          "Quantize random bf16 activations (per token) and Llama-3.1-8B-shaped weights (per output\n"
          "channel) with the library, run scaled_mm on the best backend (GPU if usable, else CPU),\n"
          "check it against the scalar reference and the exact bf16 product, and time it against\n"
          "the unquantized baseline (cuBLASLt bf16 on the GPU, OpenBLAS sgemm on the CPU).\n"
          "\n");
  cli_print_options(f, demo_opts, NDEMO_OPTS);
}

typedef struct demo_mm_call {
  w8a8_handle *h;
  w8a8_matrix a, b, out;
  w8a8_vector sa, sb;
} demo_mm_call;

static int demo_mm_once(void *arg) {
  demo_mm_call *c = arg;
  w8a8_status s = w8a8_scaled_mm(c->h, &c->a, &c->b, &c->sa, &c->sb, NULL, NULL, &c->out);
  if (s != W8A8_SUCCESS) api_fail("w8a8_scaled_mm", s);
  return s == W8A8_SUCCESS ? 0 : -1;
}

typedef struct demo_q_call {
  w8a8_handle *h;
  w8a8_matrix x, q;
  w8a8_vector scale;
} demo_q_call;

static int demo_q_once(void *arg) {
  demo_q_call *c = arg;
  w8a8_status s = w8a8_quantize(c->h, &c->x, &c->q, W8A8_QUANT_DYNAMIC_PER_TOKEN, &c->scale, NULL, NULL);
  if (s != W8A8_SUCCESS) api_fail("w8a8_quantize", s);
  return s == W8A8_SUCCESS ? 0 : -1;
}

/* Quantize rows `rows` of the host bf16 matrix x [*, K] with the reference and compare with
 * the backend's q and scales (bitwise: the formulas leave no freedom). Returns mismatches. */
static long check_quant_rows(const uint16_t *x, int64_t K, w8a8_dtype qt, const uint8_t *q, const float *scale,
                             const int64_t *rows, int nrows) {
  long bad = 0;
  int failed = 0;
#pragma omp parallel reduction(+ : bad)
  {
    w8a8_handle *h = NULL;
    w8a8_status s = w8a8_create(&h, W8A8_DEVICE_CPU, 0);
    if (s == W8A8_SUCCESS) s = w8a8_set_kernel(h, W8A8_KERNEL_REFERENCE);
    uint8_t *qr = malloc((size_t)(K > 0 ? K : 1));
    if (!qr) s = W8A8_ERROR_OUT_OF_MEMORY;
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < nrows; i++) {
      if (s != W8A8_SUCCESS) continue;
      float sr = 0;
      w8a8_matrix xm = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, 1, K, K, (void *)(x + rows[i] * K));
      w8a8_matrix qm = w8a8_matrix_make(qt, W8A8_ROW_MAJOR, 1, K, K, qr);
      w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sr);
      s = w8a8_quantize(h, &xm, &qm, W8A8_QUANT_DYNAMIC_PER_TOKEN, &sv, NULL, NULL);
      if (s != W8A8_SUCCESS) continue;
      if (memcmp(&sr, &scale[rows[i]], 4) != 0) bad++;
      for (int64_t k = 0; k < K; k++) bad += qr[k] != q[rows[i] * K + k];
    }
    if (s != W8A8_SUCCESS) {
#pragma omp atomic write
      failed = 1;
    }
    free(qr);
    w8a8_destroy(h);
  }
  if (failed) {
    fprintf(stderr, "w8a8 demo: the reference quantizer failed\n");
    return bad + 1;
  }
  return bad;
}

/* Exact product of the bf16 inputs on the sampled rows: out[i, n] = sum_k x[rows[i], k] w[n, k].
 * bf16 x bf16 products are exact in fp32; the sum is kept in double. */
static void exact_rows(const uint16_t *x, const uint16_t *w, int64_t N, int64_t K, const int64_t *rows, int nrows,
                       double *out) {
  float *xr = malloc(sizeof(float) * (size_t)(nrows * K));
  if (!xr) return;
  for (int i = 0; i < nrows; i++)
    for (int64_t k = 0; k < K; k++) xr[i * K + k] = cli_bf16_to_f32(x[rows[i] * K + k]);
#pragma omp parallel
  {
    float *wr = malloc(sizeof(float) * (size_t)K);
#pragma omp for schedule(static)
    for (int64_t n = 0; n < N; n++) {
      if (!wr) continue;
      for (int64_t k = 0; k < K; k++) wr[k] = cli_bf16_to_f32(w[n * K + k]);
      for (int i = 0; i < nrows; i++) {
        const float *a = xr + i * K;
        double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t k = 0;
        for (; k + 8 <= K; k += 8)
          for (int j = 0; j < 8; j++) s[j] += (double)(a[k + j] * wr[k + j]);
        for (; k < K; k++) s[0] += (double)(a[k] * wr[k]);
        out[i * N + n] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
      }
    }
    free(wr);
  }
  free(xr);
}

typedef struct demo_totals {
  double mm_us, q_us, base_us;
  int base_ok;
} demo_totals;

static const char *const dtype_choices[] = {"int8", "fp8", "both", NULL};

static int cmd_demo(int argc, char **argv) {
  int force_cpu = 0, do_int8 = 1, do_fp8 = 1;
  int64_t M = -1, iters = -1, warmup_req = -1, nrows_req = -1, seed = 1;
  const char *out_path = NULL;
  cli_parser p;
  cli_parser_init(&p, "demo", demo_opts, NDEMO_OPTS, argc, argv);
  int prc = -1, c, k;
  const char *v;
  while (prc < 0 && (c = cli_next_opt(&p, &v)) != CLI_OPT_END) {
    switch (c) {
      case CLI_OPT_HELP:
        demo_usage(stdout);
        prc = CLI_EXIT_OK;
        break;
      case CLI_OPT_ERROR: prc = CLI_EXIT_USAGE; break;
      case DEMO_CPU: force_cpu = 1; break;
      case 'm':
        if (!cli_opt_i64(&p, v, 1, 1 << 20, "tokens", &M)) prc = CLI_EXIT_USAGE;
        break;
      case 'd':
        if ((k = cli_opt_choice(&p, v, dtype_choices)) < 0) prc = CLI_EXIT_USAGE;
        do_int8 = k != 1, do_fp8 = k != 0;
        break;
      case 'i':
        if (!cli_opt_i64(&p, v, 1, 10000, "timed calls", &iters)) prc = CLI_EXIT_USAGE;
        break;
      case 'w':
        if (!cli_opt_i64(&p, v, 0, 10000, "warm-up calls", &warmup_req)) prc = CLI_EXIT_USAGE;
        break;
      case DEMO_ROWS:
        if (!cli_opt_i64(&p, v, 1, 1024, "rows", &nrows_req)) prc = CLI_EXIT_USAGE;
        break;
      case DEMO_SEED:
        if (!cli_opt_i64(&p, v, 0, INT64_MAX, "", &seed)) prc = CLI_EXIT_USAGE;
        break;
      case 'o': out_path = v; break;
      case DEMO_JSON: out_path = "-"; break;
    }
  }
  if (prc < 0 && p.first_positional < argc)
    prc = cli_usage_error(&p, "unexpected argument '%s' (demo takes options only)", argv[p.first_positional]);
  cli_parser_free(&p);
  if (prc >= 0) return prc;
  FILE *json = NULL;
  if (cli_out_open("demo", out_path, &json) != 0) return CLI_EXIT_FAIL;
  cli_json_header(json, "demo", argc, argv);

  w8a8_handle *h = NULL;
  w8a8_status s = force_cpu ? w8a8_create(&h, W8A8_DEVICE_CPU, 0) : w8a8_create_best(&h);
  if (s != W8A8_SUCCESS) {
    cli_out_close("demo", out_path, json);
    return api_fail("creating a handle", s);
  }
  w8a8_handle_info info;
  w8a8_get_info(h, &info);
  cli_dev dev = cli_dev_of(h);
  int gpu = dev.kind == W8A8_DEVICE_CUDA;
  FILE *tab = cli_tab;
  if (gpu && do_fp8 && info.cc_major * 10 + info.cc_minor < 89) {
    fprintf(tab, "note: %s (sm_%d%d) has no fp8 tensor cores; fp8 skipped\n", info.name, info.cc_major,
            info.cc_minor);
    do_fp8 = 0;
    if (!do_int8) {
      w8a8_destroy(h);
      cli_out_close("demo", out_path, json);
      return CLI_EXIT_FAIL;
    }
  }
  int default_m = M < 0;
  if (M < 0) M = gpu ? 512 : 64;
  if (iters < 0) iters = gpu ? 20 : 3;
  const int warmup = warmup_req >= 0 ? (int)warmup_req : gpu ? 3 : 1;
  /* The scalar reference decodes fp8 one element at a time: on 2 cores, 4 rows of the four
   * layers already take a few seconds, so the CPU demo checks fewer rows than the GPU one. */
  if (nrows_req < 0) nrows_req = gpu ? 16 : 8;
  int64_t max_cols = gpu ? 0 : 1024; /* CPU: 4 blocks of 256 columns per sampled row */
  int64_t rows[1024];
  int nrows = cli_sample_rows(M, (int)nrows_req, rows);

  fprintf(tab, "w8a8 demo: the four linear layers of a Llama-3.1-8B decoder layer (TP=1), M = %lld tokens%s\n",
          (long long)M, default_m && !gpu ? " (the CPU default; the GPU demo uses 512; -m to change)" : "");
  fprintf(tab, "  backend   %s: %s [%s]%s\n", gpu ? "cuda" : "cpu", info.name, info.features,
          force_cpu ? " (--cpu)" : gpu ? " (w8a8_create_best: the GPU)" : " (w8a8_create_best: no usable GPU)");
  fprintf(tab, "  data      x ~ N(0,1) bf16 [M,K] activations, w ~ N(0,0.02^2) bf16 [N,K] weights (seed %lld)\n",
          (long long)seed);
  fprintf(tab,
          "  quantize  weights: dynamic per-token over w's rows = one scale per output channel (scale_b[N]);\n"
          "            activations: dynamic per-token (scale_a[M]); both with w8a8_quantize on the %s\n",
          gpu ? "GPU" : "CPU");
  fprintf(tab, "  multiply  out = scale_a (.) scale_b (.) (A_q . B_q), bf16 out, w8a8_scaled_mm (B = w as column-major "
               "[K,N])\n");
  fprintf(tab,
          "  check     %d sampled rows%s against the scalar reference (int8: bitwise; fp8: within the\n"
          "            fp32 summation-order bound), quantizers bitwise; relative error vs the exact bf16 product\n",
          nrows, max_cols ? " x 4 blocks of 256 columns" : "");
  fprintf(tab,
          "  time      p50 (and p20..p80) of %lld calls after %d warm-up (weights not rotated); baseline = %s on the "
          "same M,N,K\n\n",
          (long long)iters, warmup, gpu ? "cuBLASLt bf16 GEMM" : "OpenBLAS sgemm (fp32)");
  fprintf(tab, "%-8s %6s %6s  %-8s | %9s %9s %15s %8s | %9s %7s %8s | %8s %9s %6s\n", "layer", "N", "K", "dtype",
          "quant us", "mm us", "mm p20..p80", "TFLOP/s", "base us", "vs mm", "vs q+mm", "rel.err", "max|d|ref", "wrong");

  int rc = CLI_EXIT_OK;
  demo_totals tot[2];
  memset(tot, 0, sizeof tot);
  tot[0].base_ok = tot[1].base_ok = 1;
  double t_start = cli_now_us(), t_verify = 0, t_run = 0;
  const int nl = (int)(sizeof llama8b_layers / sizeof llama8b_layers[0]);
  for (int li = 0; li < nl && rc == CLI_EXIT_OK; li++) {
    const layer *L = &llama8b_layers[li];
    int64_t N = L->N, K = L->K;
    size_t xn = (size_t)(M * K), wn = (size_t)(N * K);
    uint16_t *hx = malloc(xn * 2), *hw = malloc(wn * 2);
    uint8_t *hq = malloc(xn), *hwq = malloc(wn);
    uint16_t *hout = malloc((size_t)(M * N) * 2);
    float *hsa = malloc(sizeof(float) * (size_t)M), *hsb = malloc(sizeof(float) * (size_t)N);
    double *exact = malloc(sizeof(double) * (size_t)(nrows * N));
    void *dx = cli_dev_alloc(dev, xn * 2), *dw = cli_dev_alloc(dev, wn * 2), *dq = cli_dev_alloc(dev, xn),
         *dwq = cli_dev_alloc(dev, wn), *dout = cli_dev_alloc(dev, (size_t)(M * N) * 2),
         *dsa = cli_dev_alloc(dev, sizeof(float) * (size_t)M), *dsb = cli_dev_alloc(dev, sizeof(float) * (size_t)N);
    if (!hx || !hw || !hq || !hwq || !hout || !hsa || !hsb || !exact || !dx || !dw || !dq || !dwq || !dout ||
        !dsa || !dsb) {
      fprintf(stderr, "w8a8 demo: out of memory for layer %s\n", L->name);
      rc = CLI_EXIT_FAIL;
      goto layer_done;
    }
    cli_fill_bf16_normal(hx, (int64_t)xn, 1.0f, (uint64_t)seed * 1000 + (uint64_t)li * 2);
    cli_fill_bf16_normal(hw, (int64_t)wn, 0.02f, (uint64_t)seed * 1000 + (uint64_t)li * 2 + 1);
    if (cli_dev_upload(dev, dx, hx, xn * 2) || cli_dev_upload(dev, dw, hw, wn * 2)) {
      rc = CLI_EXIT_FAIL;
      goto layer_done;
    }
    exact_rows(hx, hw, N, K, rows, nrows, exact);
    cli_stats base_t = cli_stats_failed();
    if ((gpu ? bench_cuda_bf16_us(dev.index, M, N, K, &base_t) : bench_cpu_sgemm_us(M, N, K, &base_t)) != 0)
      base_t = cli_stats_failed();
    const double base_us = base_t.p50;

    for (int dt = 0; dt < 2 && rc == CLI_EXIT_OK; dt++) {
      int fp8 = dt == 1;
      if ((fp8 && !do_fp8) || (!fp8 && !do_int8)) continue;
      w8a8_dtype qt = fp8 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
      /* weights: [N,K] row-major quantized per row = per output channel; viewed as B [K,N] column-major */
      demo_q_call qw = {h, w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, N, K, K, dw),
                        w8a8_matrix_make(qt, W8A8_ROW_MAJOR, N, K, K, dwq),
                        w8a8_vector_make(W8A8_DTYPE_FP32, N, dsb)};
      demo_q_call qa = {h, w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, K, K, dx),
                        w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, K, K, dq),
                        w8a8_vector_make(W8A8_DTYPE_FP32, M, dsa)};
      demo_mm_call mm = {h, w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, K, K, dq),
                         w8a8_matrix_make(qt, W8A8_COL_MAJOR, K, N, K, dwq),
                         w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, dout),
                         w8a8_vector_make(W8A8_DTYPE_FP32, M, dsa), w8a8_vector_make(W8A8_DTYPE_FP32, N, dsb)};
      cli_dev_memset(dev, dout, 0xff, (size_t)(M * N) * 2); /* poison: bf16 NaN */
      if (demo_q_once(&qw) || cli_dev_sync(dev)) {
        rc = CLI_EXIT_FAIL;
        break;
      }
      double tr0 = cli_now_us();
      const cli_stats q_t = cli_time_calls(dev, demo_q_once, &qa, warmup, (int)iters);
      const cli_stats mm_t = q_t.p50 < 0 ? cli_stats_failed() : cli_time_calls(dev, demo_mm_once, &mm, warmup, (int)iters);
      const double q_us = q_t.p50, mm_us = mm_t.p50;
      if (q_us < 0 || mm_us < 0 || cli_dev_sync(dev)) {
        rc = CLI_EXIT_FAIL;
        break;
      }
      cli_launch ran;
      cli_last_launch(h, "auto", &ran);
      if (cli_dev_download(dev, hq, dq, xn) || cli_dev_download(dev, hwq, dwq, wn) ||
          cli_dev_download(dev, hsa, dsa, sizeof(float) * (size_t)M) ||
          cli_dev_download(dev, hsb, dsb, sizeof(float) * (size_t)N) ||
          cli_dev_download(dev, hout, dout, (size_t)(M * N) * 2)) {
        rc = CLI_EXIT_FAIL;
        break;
      }
      double tv0 = cli_now_us();
      t_run += tv0 - tr0;
      /* quantizers: the sampled activation rows, and 64 weight rows */
      int64_t wrows[1024];
      int nw = cli_sample_rows(N, 64, wrows);
      long qbad = check_quant_rows(hx, K, qt, hq, hsa, rows, nrows) + check_quant_rows(hw, K, qt, hwq, hsb, wrows, nw);
      /* scaled_mm against the reference */
      cli_cmp cmp;
      cli_cmp_init(&cmp);
      if (cli_verify_rows_cols(qt, W8A8_DTYPE_BF16, hq, K, hwq, K, N, K, hsa, M, hsb, N, NULL, hout, N, rows, nrows,
                          max_cols, &cmp) != 0) {
        rc = CLI_EXIT_FAIL;
        break;
      }
      /* quantized vs exact: relative Frobenius error over the sampled rows */
      double num = 0, den = 0;
      for (int i = 0; i < nrows; i++)
        for (int64_t n = 0; n < N; n++) {
          double g = cli_bf16_to_f32(hout[rows[i] * N + n]), e = exact[i * N + n];
          num += (g - e) * (g - e);
          den += e * e;
        }
      double rel = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
      if (!(rel == rel)) rel = INFINITY;
      t_verify += cli_now_us() - tv0;
      double rel_limit = fp8 ? 0.10 : 0.05; /* expected ~0.04 (fp8, 3 mantissa bits) and ~0.015 (int8) */
      long wrong = (long)cmp.wrong + qbad;
      double flops = 2.0 * (double)M * (double)N * (double)K;
      char base[16] = "n/a", vs1[16] = "-", vs2[16] = "-", spread[32];
      if (base_us > 0) {
        snprintf(base, sizeof base, "%.1f", base_us);
        snprintf(vs1, sizeof vs1, "%.2fx", base_us / mm_us);
        snprintf(vs2, sizeof vs2, "%.2fx", base_us / (mm_us + q_us));
      }
      snprintf(spread, sizeof spread, "%.1f..%.1f", mm_t.p20, mm_t.p80);
      fprintf(tab, "%-8s %6lld %6lld  %-8s | %9.1f %9.1f %15s %8.3f | %9s %7s %8s | %8.4f %9.3g %6ld%s\n", L->name,
              (long long)N, (long long)K, fp8 ? "fp8_e4m3" : "int8", q_us, mm_us, spread, flops / mm_us * 1e-6, base,
              vs1, vs2, rel, cmp.max_abs, wrong, rel > rel_limit ? "  <- error too large" : "");
      if (cmp.wrong)
        fprintf(tab,
                "  scaled_mm != reference at (%lld, %lld): got %.6g, reference %.6g (tolerance %.3g); %lld of %lld "
                "elements wrong\n",
                (long long)cmp.bad_m, (long long)cmp.bad_n, cmp.bad_got, cmp.bad_ref, cmp.bad_tol,
                (long long)cmp.wrong, (long long)cmp.checked);
      if (qbad) fprintf(tab, "  quantizer output differs from the reference in %ld values\n", qbad);
      if (json) {
        cli_jw w;
        cli_row r;
        memset(&r, 0, sizeof r);
        r.command = "demo";
        r.impl = gpu ? "w8a8_cuda" : "w8a8_cpu";
        r.op = "scaled_mm";
        r.device = info.name;
        r.device_kind = gpu ? "gpu" : "cpu";
        r.dtype = fp8 ? "fp8_e4m3" : "int8";
        r.M = M, r.N = N, r.K = K;
        r.kernel = ran.kernel;
        r.config = ran.config;
        r.split_k = ran.split_k;
        r.iters = (int)iters;
        r.warmup = warmup;
        r.t = mm_t;
        r.flops = flops;
        r.wrong = wrong;
        cli_json_row_begin(&w, json, &r);
        cli_jw_str(&w, "layer", L->name);
        cli_jw_str(&w, "scales", "token*channel");
        cli_jw_str(&w, "out_dtype", "bf16");
        cli_jw_num(&w, "quant_p20_us", q_t.p20);
        cli_jw_num(&w, "quant_p50_us", q_t.p50);
        cli_jw_num(&w, "quant_p80_us", q_t.p80);
        cli_jw_str(&w, "baseline", base_us > 0 ? (gpu ? "cublaslt_bf16" : "openblas_sgemm") : NULL);
        cli_jw_num(&w, "baseline_p50_us", base_us > 0 ? base_us : NAN);
        cli_jw_num(&w, "vs_baseline", base_us > 0 ? base_us / mm_us : NAN);
        cli_jw_num(&w, "vs_baseline_with_quant", base_us > 0 ? base_us / (mm_us + q_us) : NAN);
        cli_jw_num(&w, "rel_err", rel);
        cli_jw_int(&w, "seed", seed);
        cli_jw_end(&w);
      }
      if (wrong || rel > rel_limit) rc = CLI_EXIT_FAIL;
      tot[dt].mm_us += mm_us;
      tot[dt].q_us += q_us;
      if (base_us > 0)
        tot[dt].base_us += base_us;
      else
        tot[dt].base_ok = 0;
    }
  layer_done:
    free(hx);
    free(hw);
    free(hq);
    free(hwq);
    free(hout);
    free(hsa);
    free(hsb);
    free(exact);
    cli_dev_free(dev, dx);
    cli_dev_free(dev, dw);
    cli_dev_free(dev, dq);
    cli_dev_free(dev, dwq);
    cli_dev_free(dev, dout);
    cli_dev_free(dev, dsa);
    cli_dev_free(dev, dsb);
  }
  fprintf(tab, "\n");
  for (int dt = 0; dt < 2 && rc == CLI_EXIT_OK; dt++) {
    if ((dt && !do_fp8) || (!dt && !do_int8)) continue;
    fprintf(tab, "layer total %-8s: quantize A %.1f us + scaled_mm %.1f us", dt ? "fp8_e4m3" : "int8", tot[dt].q_us,
            tot[dt].mm_us);
    if (tot[dt].base_ok)
      fprintf(tab, "  vs %s %.1f us: %.2fx (scaled_mm), %.2fx (with quantization)\n", gpu ? "bf16" : "fp32 sgemm",
              tot[dt].base_us, tot[dt].base_us / tot[dt].mm_us, tot[dt].base_us / (tot[dt].mm_us + tot[dt].q_us));
    else
      fprintf(tab, "  (no unquantized baseline in this build)\n");
  }
  fprintf(tab, "demo %s in %.1f s (%.1f s quantizing and timing on the %s, %.1f s checking): %s\n",
          rc == CLI_EXIT_OK ? "PASSED" : "FAILED", (cli_now_us() - t_start) * 1e-6, t_run * 1e-6, gpu ? "GPU" : "CPU",
          t_verify * 1e-6,
          rc == CLI_EXIT_OK ? "results match the reference, errors vs the exact product as expected"
                            : "see the lines above");
  w8a8_destroy(h);
  if (cli_out_close("demo", out_path, json) != 0) rc = CLI_EXIT_FAIL;
  return rc;
}

/* ======================================================================================
 * check: the active backend against the scalar reference
 * ====================================================================================== */

typedef struct check_ctx {
  w8a8_handle *h;   /* backend under test */
  w8a8_handle *ref; /* CPU, W8A8_KERNEL_REFERENCE */
  cli_dev dev;
  int fp8_ok;
  int verbose;
  long cases, failed, skipped;
  /* device buffers of the current case, freed by check_free_all */
  void *bufs[32];
  int nbufs;
} check_ctx;

static void *check_dev_copy(check_ctx *c, const void *host, size_t bytes) {
  void *d = cli_dev_alloc(c->dev, bytes);
  if (!d) return NULL;
  if (c->nbufs < 32) c->bufs[c->nbufs++] = d;
  if (host && cli_dev_upload(c->dev, d, host, bytes)) return NULL;
  return d;
}
static void check_free_all(check_ctx *c) {
  for (int i = 0; i < c->nbufs; i++) cli_dev_free(c->dev, c->bufs[i]);
  c->nbufs = 0;
}

/* Random bytes: int8 anything, fp8 anything but NaN. */
static void rand_8bit(cli_rng *r, uint8_t *p, size_t n, int fp8) {
  for (size_t i = 0; i < n; i++) {
    uint8_t v = (uint8_t)cli_rng_u64(r);
    if (fp8 && (v & 0x7f) == 0x7f) v ^= 1;
    p[i] = v;
  }
}

enum { ZP_NONE, ZP_ADJ_ONLY, ZP_TENSOR, ZP_TOKEN, ZP_COUNT };
static const char *zp_name[] = {"", " zp=adj-only", " zp=tensor", " zp=token"};

typedef struct gcase {
  int64_t M, N, K;
  w8a8_dtype in, od;
  int sa_tok, sb_ch, bias, zp, strided;
} gcase;

static void gcase_str(const gcase *g, char *buf, size_t n) {
  snprintf(buf, n, "scaled_mm M=%lld N=%lld K=%lld %s->%s sa=%s sb=%s%s%s%s", (long long)g->M, (long long)g->N,
           (long long)g->K, w8a8_dtype_name(g->in), w8a8_dtype_name(g->od), g->sa_tok ? "token" : "tensor",
           g->sb_ch ? "channel" : "tensor", g->bias ? " bias" : "", zp_name[g->zp], g->strided ? " strided" : "");
}

/* One outcome: prints failures (and every case with -v). */
static void check_report(check_ctx *c, const char *what, int ok, const char *detail) {
  c->cases++;
  if (!ok) c->failed++;
  if (!ok || c->verbose) printf("  %-4s %s%s%s\n", ok ? "ok" : "FAIL", what, detail && *detail ? ": " : "",
                                detail ? detail : "");
}

/* A call's outcome: its status, then the device's once the work has finished; anything but W8A8_SUCCESS is the
 * case's failure, reported. 0, or -1 after the report. */
static int check_called(check_ctx *c, const char *what, w8a8_status s) {
  if (s == W8A8_SUCCESS && cli_dev_sync(c->dev)) s = W8A8_ERROR_DEVICE;
  if (s == W8A8_SUCCESS) return 0;
  char detail[512];
  snprintf(detail, sizeof detail, "%s: %s", w8a8_status_name(s), w8a8_last_error());
  check_report(c, what, 0, detail);
  return -1;
}

static void run_gemm_case(check_ctx *c, const gcase *g, uint64_t seed) {
  char what[256], detail[512] = "";
  gcase_str(g, what, sizeof what);
  int fp8 = g->in == W8A8_DTYPE_FP8_E4M3;
  if (fp8 && !c->fp8_ok) {
    c->skipped++;
    return;
  }
  cli_rng r = cli_rng_make(seed, 0x6e6d);
  const int64_t M = g->M, N = g->N, K = g->K;
  /* Strided: a submatrix (row 1, column 3) of a larger parent, so ld > cols and the data
   * pointer is unaligned for vector loads: the fast paths must fall back, not fail. */
  int64_t ar = g->strided ? 1 : 0, ac = g->strided ? 3 : 0, orow = g->strided ? 1 : 0, ocol = g->strided ? 2 : 0;
  int64_t lda = g->strided ? K + 5 : (K > 0 ? K : 1), ldb = g->strided ? K + 7 : (K > 0 ? K : 1);
  int64_t ldo = g->strided ? N + 5 : (N > 0 ? N : 1);
  size_t abytes = (size_t)((M + ar) * lda), bbytes = (size_t)((N + ar) * ldb);
  size_t es = w8a8_dtype_size(g->od), obytes = (size_t)((M + orow) * ldo) * es;
  int64_t salen = g->sa_tok && M > 0 ? M : 1, sblen = g->sb_ch && N > 0 ? N : 1;
  uint8_t *ha = malloc(abytes + 1), *hb = malloc(bbytes + 1);
  char *hout = malloc(obytes + 1), *hgot = malloc(obytes + 1), *hbias = malloc((size_t)(N + 1) * es);
  float *hsa = malloc(sizeof(float) * (size_t)salen), *hsb = malloc(sizeof(float) * (size_t)sblen);
  int32_t *hazp = malloc(sizeof(int32_t) * (size_t)(M + 1)), *hadj = malloc(sizeof(int32_t) * (size_t)(N + 1));
  if (!ha || !hb || !hout || !hgot || !hbias || !hsa || !hsb || !hazp || !hadj) {
    check_report(c, what, 0, "out of host memory");
    goto done;
  }
  rand_8bit(&r, ha, abytes, fp8);
  rand_8bit(&r, hb, bbytes, fp8);
  /* scales that keep outputs O(1) (and inside fp16): int8 sums ~ 74 sqrt(K) * 74, fp8 ~ 200^2 sqrt(K) */
  double kk = sqrt((double)(K > 0 ? K : 1));
  for (int64_t i = 0; i < salen; i++) hsa[i] = (float)((0.5 + cli_rng_unit(&r)) / (fp8 ? 200.0 : 74.0));
  for (int64_t i = 0; i < sblen; i++) hsb[i] = (float)((0.5 + cli_rng_unit(&r)) / ((fp8 ? 200.0 : 74.0) * kk));
  for (int64_t n = 0; n < N; n++) cli_store_float(g->od, hbias, n, 4.0f * cli_rng_unit(&r) - 2.0f);
  const uint8_t *a0 = ha + ar * lda + ac, *b0 = hb + ar * ldb + ac;
  int32_t azp_scalar = (int32_t)cli_rng_range(&r, -128, 127);
  for (int64_t m = 0; m < M; m++) hazp[m] = (int32_t)cli_rng_range(&r, -128, 127);
  if (g->zp == ZP_TENSOR) hazp[0] = azp_scalar;
  for (int64_t n = 0; n < N; n++) {
    int32_t s = 0;
    for (int64_t k = 0; k < K; k++) s += (int8_t)b0[n * ldb + k];
    hadj[n] = g->zp == ZP_ADJ_ONLY ? azp_scalar * s : s;
  }
  memset(hout, 0xff, obytes); /* poison: NaN in every output dtype */

  /* the reference, on host memory */
  w8a8_matrix am = w8a8_matrix_make(g->in, W8A8_ROW_MAJOR, M, K, lda, (void *)a0);
  w8a8_matrix bm = w8a8_matrix_make(g->in, W8A8_COL_MAJOR, K, N, ldb, (void *)b0);
  w8a8_matrix om = w8a8_matrix_make(g->od, W8A8_ROW_MAJOR, M, N, ldo, hout + (size_t)(orow * ldo + ocol) * es);
  w8a8_vector sav = w8a8_vector_make(W8A8_DTYPE_FP32, salen, hsa), sbv = w8a8_vector_make(W8A8_DTYPE_FP32, sblen, hsb);
  w8a8_vector bv = w8a8_vector_make(g->od, N, hbias);
  w8a8_zero_point zp;
  zp.azp = g->zp == ZP_ADJ_ONLY ? w8a8_vector_make(W8A8_DTYPE_INT32, 0, NULL)
                                : w8a8_vector_make(W8A8_DTYPE_INT32, g->zp == ZP_TOKEN && M > 0 ? M : 1, hazp);
  zp.azp_adj = w8a8_vector_make(W8A8_DTYPE_INT32, N, hadj);
  w8a8_status rs = w8a8_scaled_mm(c->ref, &am, &bm, &sav, &sbv, g->bias ? &bv : NULL, g->zp ? &zp : NULL, &om);
  if (rs != W8A8_SUCCESS) {
    snprintf(detail, sizeof detail, "the reference refused a valid case: %s", w8a8_last_error());
    check_report(c, what, 0, detail);
    goto done;
  }

  /* the same on the backend's memory */
  uint8_t *da = check_dev_copy(c, ha, abytes), *db = check_dev_copy(c, hb, bbytes);
  char *dout = check_dev_copy(c, NULL, obytes);
  float *dsa = check_dev_copy(c, hsa, sizeof(float) * (size_t)salen), *dsb = check_dev_copy(c, hsb, sizeof(float) * (size_t)sblen);
  void *dbias = check_dev_copy(c, hbias, (size_t)(N + 1) * es);
  int32_t *dazp = check_dev_copy(c, hazp, sizeof(int32_t) * (size_t)(M + 1)),
          *dadj = check_dev_copy(c, hadj, sizeof(int32_t) * (size_t)(N + 1));
  if (!da || !db || !dout || !dsa || !dsb || !dbias || !dazp || !dadj ||
      cli_dev_memset(c->dev, dout, 0xff, obytes)) {
    check_report(c, what, 0, "device allocation or copy failed");
    goto done;
  }
  am.data = da + ar * lda + ac;
  bm.data = db + ar * ldb + ac;
  om.data = dout + (size_t)(orow * ldo + ocol) * es;
  sav.data = dsa;
  sbv.data = dsb;
  bv.data = dbias;
  if (g->zp != ZP_ADJ_ONLY) zp.azp.data = dazp;
  zp.azp_adj.data = dadj;
  if (check_called(c, what, w8a8_scaled_mm(c->h, &am, &bm, &sav, &sbv, g->bias ? &bv : NULL, g->zp ? &zp : NULL, &om)))
    goto done;
  if (cli_dev_download(c->dev, hgot, dout, obytes)) {
    check_report(c, what, 0, "copy back failed");
    goto done;
  }
  cli_cmp cmp;
  cli_cmp_init(&cmp);
  const void *go = hgot + (size_t)(orow * ldo + ocol) * es, *ro = hout + (size_t)(orow * ldo + ocol) * es;
  if (!fp8)
    cli_compare_exact(g->od, go, ldo, ro, ldo, M, N, &cmp);
  else
    cli_compare_fp8(a0, lda, b0, ldb, M, N, K, hsa, salen, hsb, sblen, g->od, go, ldo, ro, ldo, &cmp);
  /* Nothing outside the output's rows x cols may be written: with the logical region made
   * equal, the parents must be identical (both were poisoned the same way). */
  for (int64_t m = 0; m < M; m++)
    memcpy(hgot + (size_t)((m + orow) * ldo + ocol) * es, hout + (size_t)((m + orow) * ldo + ocol) * es,
           (size_t)N * es);
  int pad_ok = memcmp(hgot, hout, obytes) == 0;
  if (cmp.wrong)
    snprintf(detail, sizeof detail, "%lld of %lld elements wrong; first (%lld, %lld): got %.9g, reference %.9g%s",
             (long long)cmp.wrong, (long long)cmp.checked, (long long)cmp.bad_m, (long long)cmp.bad_n, cmp.bad_got,
             cmp.bad_ref, fp8 ? " (outside the fp32-summation bound)" : " (int8 must be bitwise equal)");
  else if (!pad_ok)
    snprintf(detail, sizeof detail, "wrote outside the output submatrix (padding or neighbouring rows changed)");
  else if (fp8)
    snprintf(detail, sizeof detail, "max rel err %.2e", cmp.max_rel);
  check_report(c, what, cmp.wrong == 0 && pad_ok, detail);
done:
  check_free_all(c);
  free(ha);
  free(hb);
  free(hout);
  free(hgot);
  free(hbias);
  free(hsa);
  free(hsb);
  free(hazp);
  free(hadj);
}

/* ---- quantizer cases ---------------------------------------------------------------------- */
enum { Q_STATIC, Q_DYN_TENSOR, Q_DYN_TOKEN, Q_DYN_TOKEN_UB, Q_STATIC_AZP, Q_DYN_TOKEN_AZP, Q_COUNT };
static const char *qmode_name[] = {"static",        "dynamic-tensor",    "dynamic-token",
                                   "dynamic-token+ub", "static+azp", "dynamic-token+azp"};

static void run_quant_case(check_ctx *c, int64_t M, int64_t K, w8a8_dtype xt, w8a8_dtype qt, int mode, int strided,
                           int specials, uint64_t seed) {
  char what[256], detail[512] = "";
  snprintf(what, sizeof what, "quantize M=%lld K=%lld %s->%s %s%s%s", (long long)M, (long long)K,
           w8a8_dtype_name(xt), w8a8_dtype_name(qt), qmode_name[mode], strided ? " strided" : "",
           specials ? " +nan/inf/huge" : "");
  int fp8 = qt == W8A8_DTYPE_FP8_E4M3;
  if (fp8 && !c->fp8_ok) {
    c->skipped++;
    return;
  }
  cli_rng r = cli_rng_make(seed, 0x7175);
  size_t xs = w8a8_dtype_size(xt);
  int64_t ldx = strided ? K + 3 : (K > 0 ? K : 1), ldq = strided ? K + 6 : (K > 0 ? K : 1);
  int64_t xoff = strided ? 1 : 0, qoff = strided ? 2 : 0; /* column offsets */
  size_t xbytes = (size_t)(M * ldx + 4) * xs, qbytes = (size_t)(M * ldq + 4);
  int per_token = mode == Q_DYN_TOKEN || mode == Q_DYN_TOKEN_UB || mode == Q_DYN_TOKEN_AZP;
  int64_t slen = per_token ? M : 1, sal = slen > 0 ? slen : 1; /* per-token scales: exactly M, even 0 */
  int has_azp = mode == Q_STATIC_AZP || mode == Q_DYN_TOKEN_AZP;
  char *hx = malloc(xbytes);
  uint8_t *hq_ref = malloc(qbytes), *hq_got = malloc(qbytes);
  float *hs_ref = malloc(sizeof(float) * (size_t)sal), *hs_got = malloc(sizeof(float) * (size_t)sal);
  int32_t *hz_ref = malloc(sizeof(int32_t) * (size_t)sal), *hz_got = malloc(sizeof(int32_t) * (size_t)sal);
  if (!hx || !hq_ref || !hq_got || !hs_ref || !hs_got || !hz_ref || !hz_got) {
    check_report(c, what, 0, "out of host memory");
    goto done;
  }
  memset(hx, 0, xbytes);
  /* rows of very different magnitudes, so per-token scales differ */
  float amax = 0;
  for (int64_t m = 0; m < M; m++) {
    float mag = powf(10.0f, 2.0f * cli_rng_unit(&r) - 1.0f);
    float shift = (mode == Q_DYN_TOKEN_AZP && (m % 3 == 1)) ? 3.0f * mag : 0.0f; /* one-sided rows */
    for (int64_t k = 0; k < K; k++) {
      float v = mag * cli_rng_normal(&r) + shift;
      if (specials && cli_rng_unit(&r) < 0.05f) {
        static const float sp[] = {NAN, INFINITY, -INFINITY, 1e30f, -1e30f, 1e-40f, -0.0f, 60000.0f};
        v = sp[cli_rng_u64(&r) % 8];
        if (xt == W8A8_DTYPE_FP16 && (v == 1e30f || v == -1e30f)) v = v > 0 ? 65504.0f : -65504.0f;
      }
      cli_store_float(xt, hx, (m * ldx + xoff + k), v);
      float back = (float)cli_load_float(xt, hx, m * ldx + xoff + k);
      if (fabsf(back) > amax && isfinite(back)) amax = fabsf(back);
    }
  }
  float qmax = fp8 ? 448.0f : 127.0f;
  float static_scale = (amax > 0 ? amax : 1.0f) / qmax * (0.5f + 1.5f * cli_rng_unit(&r)); /* some clamping */
  float ub = amax * 0.6f > 0 ? amax * 0.6f : 1.0f;
  int32_t static_azp = (int32_t)cli_rng_range(&r, -20, 20);
  for (int64_t i = 0; i < sal; i++) {
    hs_ref[i] = static_scale;
    hz_ref[i] = static_azp;
  }
  memset(hq_ref, 0xa5, qbytes);

  w8a8_quant_mode qm = mode == Q_STATIC || mode == Q_STATIC_AZP   ? W8A8_QUANT_STATIC_PER_TENSOR
                       : mode == Q_DYN_TENSOR                     ? W8A8_QUANT_DYNAMIC_PER_TENSOR
                                                                  : W8A8_QUANT_DYNAMIC_PER_TOKEN;
  w8a8_matrix xm = w8a8_matrix_make(xt, W8A8_ROW_MAJOR, M, K, ldx, hx + (size_t)xoff * xs);
  w8a8_matrix qmat = w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, K, ldq, hq_ref + qoff);
  w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, slen, hs_ref);
  w8a8_vector zv = w8a8_vector_make(W8A8_DTYPE_INT32, slen, hz_ref);
  w8a8_status rs = w8a8_quantize(c->ref, &xm, &qmat, qm, &sv, has_azp ? &zv : NULL, mode == Q_DYN_TOKEN_UB ? &ub : NULL);
  if (rs != W8A8_SUCCESS) {
    snprintf(detail, sizeof detail, "the reference refused a valid case: %s", w8a8_last_error());
    check_report(c, what, 0, detail);
    goto done;
  }
  /* backend: start from the same inputs (static scale / azp) and the same poisoned q */
  for (int64_t i = 0; i < sal; i++) {
    hs_got[i] = static_scale;
    hz_got[i] = static_azp;
  }
  memset(hq_got, 0xa5, qbytes);
  char *dx = check_dev_copy(c, hx, xbytes);
  uint8_t *dq = check_dev_copy(c, hq_got, qbytes);
  float *ds = check_dev_copy(c, hs_got, sizeof(float) * (size_t)sal), *dub = check_dev_copy(c, &ub, sizeof(float));
  int32_t *dz = check_dev_copy(c, hz_got, sizeof(int32_t) * (size_t)sal);
  if (!dx || !dq || !ds || !dub || !dz) {
    check_report(c, what, 0, "device allocation or copy failed");
    goto done;
  }
  xm.data = dx + (size_t)xoff * xs;
  qmat.data = dq + qoff;
  sv.data = ds;
  zv.data = dz;
  if (check_called(c, what,
                   w8a8_quantize(c->h, &xm, &qmat, qm, &sv, has_azp ? &zv : NULL, mode == Q_DYN_TOKEN_UB ? dub : NULL)))
    goto done;
  if (cli_dev_download(c->dev, hq_got, dq, qbytes) || cli_dev_download(c->dev, hs_got, ds, sizeof(float) * (size_t)slen) ||
      cli_dev_download(c->dev, hz_got, dz, sizeof(int32_t) * (size_t)slen)) {
    check_report(c, what, 0, "copy back failed");
    goto done;
  }
  /* bitwise: q (padding included), scales, zero points */
  int64_t first = -1, nbad = 0;
  for (size_t i = 0; i < qbytes; i++)
    if (hq_got[i] != hq_ref[i]) {
      if (first < 0) first = (int64_t)i;
      nbad++;
    }
  int sbad = memcmp(hs_got, hs_ref, sizeof(float) * (size_t)slen) != 0;
  int zbad = has_azp && memcmp(hz_got, hz_ref, sizeof(int32_t) * (size_t)slen) != 0;
  if (nbad) {
    int64_t row = first / ldq, col = first % ldq - qoff;
    snprintf(detail, sizeof detail, "%lld q bytes differ; first at row %lld col %lld%s: got 0x%02x, reference 0x%02x",
             (long long)nbad, (long long)row, (long long)col, col < 0 || col >= K ? " (padding!)" : "",
             hq_got[first], hq_ref[first]);
  } else if (sbad) {
    int64_t i = 0;
    while (memcmp(&hs_got[i], &hs_ref[i], 4) == 0) i++;
    snprintf(detail, sizeof detail, "scale[%lld] = %.9g, reference %.9g", (long long)i, hs_got[i], hs_ref[i]);
  } else if (zbad) {
    int64_t i = 0;
    while (hz_got[i] == hz_ref[i]) i++;
    snprintf(detail, sizeof detail, "azp[%lld] = %d, reference %d", (long long)i, hz_got[i], hz_ref[i]);
  }
  check_report(c, what, !nbad && !sbad && !zbad, detail);
done:
  check_free_all(c);
  free(hx);
  free(hq_ref);
  free(hq_got);
  free(hs_ref);
  free(hs_got);
  free(hz_ref);
  free(hz_got);
}

/* ---- block-scaled cases ---------------------------------------------------------------- */

/* w8a8_scaled_mm_blockwise on the backend against the reference: the reference's bits from the CPU and the portable
 * CUDA kernel, the header's bound (2e-3 of sum |sa sb a b| + the output's rounding) from the Hopper kernel. */
static void run_blockwise_case(check_ctx *c, int64_t M, int64_t N, int64_t K, w8a8_dtype od, int bias,
                               uint64_t seed) {
  char what[160], detail[512] = "";
  snprintf(what, sizeof what, "scaled_mm_blockwise M=%lld N=%lld K=%lld fp8_e4m3->%s%s", (long long)M, (long long)N,
           (long long)K, w8a8_dtype_name(od), bias ? " bias" : "");
  cli_rng r = cli_rng_make(seed, 0x626c);
  const int64_t KB = (K + 127) / 128, NB = (N + 127) / 128, lda = (K + 15) / 16 * 16, ldo = N + 3;
  const size_t es = w8a8_dtype_size(od), obytes = (size_t)(M * ldo) * es;
  uint8_t *ha = malloc((size_t)(M * lda) + 1), *hb = malloc((size_t)(N * lda) + 1);
  float *hsa = malloc(sizeof(float) * (size_t)(M * KB + 1)), *hsb = malloc(sizeof(float) * (size_t)(NB * KB + 1));
  char *hout = malloc(obytes + 1), *hgot = malloc(obytes + 1), *hbias = malloc((size_t)(N + 1) * es);
  if (!ha || !hb || !hsa || !hsb || !hout || !hgot || !hbias) {
    check_report(c, what, 0, "out of host memory");
    goto done;
  }
  rand_8bit(&r, ha, (size_t)(M * lda), 1);
  rand_8bit(&r, hb, (size_t)(N * lda), 1);
  for (int64_t i = 0; i < M * KB; i++) hsa[i] = (float)((0.5 + cli_rng_unit(&r)) / 200.0);
  for (int64_t i = 0; i < NB * KB; i++) hsb[i] = (float)((0.5 + cli_rng_unit(&r)) / (200.0 * 12.0));
  for (int64_t n = 0; n < N; n++) cli_store_float(od, hbias, n, 4.0f * cli_rng_unit(&r) - 2.0f);
  memset(hout, 0xff, obytes);
  w8a8_matrix am = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, lda, ha);
  w8a8_matrix bm = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, lda, hb);
  w8a8_matrix sam = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, KB, KB, hsa);
  w8a8_matrix sbm = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, NB, KB, KB, hsb);
  w8a8_matrix om = w8a8_matrix_make(od, W8A8_ROW_MAJOR, M, N, ldo, hout);
  w8a8_vector bv = w8a8_vector_make(od, N, hbias);
  w8a8_status rs = w8a8_scaled_mm_blockwise(c->ref, &am, &bm, &sam, &sbm, bias ? &bv : NULL, &om);
  if (rs != W8A8_SUCCESS) {
    snprintf(detail, sizeof detail, "the reference refused a valid case: %s", w8a8_last_error());
    check_report(c, what, 0, detail);
    goto done;
  }
  uint8_t *da = check_dev_copy(c, ha, (size_t)(M * lda)), *db = check_dev_copy(c, hb, (size_t)(N * lda));
  float *dsa = check_dev_copy(c, hsa, sizeof(float) * (size_t)(M * KB)),
        *dsb = check_dev_copy(c, hsb, sizeof(float) * (size_t)(NB * KB));
  char *dout = check_dev_copy(c, NULL, obytes);
  void *dbias = check_dev_copy(c, hbias, (size_t)(N + 1) * es);
  if (!da || !db || !dsa || !dsb || !dout || !dbias || cli_dev_memset(c->dev, dout, 0xff, obytes)) {
    check_report(c, what, 0, "device allocation or copy failed");
    goto done;
  }
  am.data = da, bm.data = db, sam.data = dsa, sbm.data = dsb, om.data = dout, bv.data = dbias;
  if (check_called(c, what, w8a8_scaled_mm_blockwise(c->h, &am, &bm, &sam, &sbm, bias ? &bv : NULL, &om)))
    goto done;
  if (cli_dev_download(c->dev, hgot, dout, obytes)) {
    check_report(c, what, 0, "copy back failed");
    goto done;
  }
  w8a8_launch_info li;
  const int exact = w8a8_get_last_launch(c->h, &li) != W8A8_SUCCESS || strcmp(li.kernel, "sm90-blockwise") != 0;
  const double round_rel = od == W8A8_DTYPE_BF16 ? 1.0 / 256 : od == W8A8_DTYPE_FP16 ? 1.0 / 1024 : 1e-6;
  int64_t wrong = 0, pad = 0;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < ldo; n++) {
      const size_t i = (size_t)(m * ldo + n);
      if (n >= N) {
        pad += memcmp(hgot + i * es, hout + i * es, es) != 0;
        continue;
      }
      const double got = cli_load_float(od, hgot, (int64_t)i), ref = cli_load_float(od, hout, (int64_t)i);
      int bad;
      if (exact) {
        bad = memcmp(hgot + i * es, hout + i * es, es) != 0;
      } else {
        double mag = 0;
        for (int64_t k = 0; k < K; k++)
          mag += fabs((double)hsa[m * KB + k / 128] * hsb[(n / 128) * KB + k / 128] * cli_fp8_to_f32(ha[m * lda + k]) *
                      cli_fp8_to_f32(hb[n * lda + k]));
        bad = !(fabs(got - ref) <= 2e-3 * mag + round_rel * fabs(ref) + 1e-6);
      }
      if (bad && wrong++ == 0)
        snprintf(detail, sizeof detail, "first wrong (%lld, %lld): got %.9g, reference %.9g (%s)", (long long)m,
                 (long long)n, got, ref, exact ? "the reference's bits expected" : "outside the header's bound");
    }
  if (!wrong && pad) snprintf(detail, sizeof detail, "wrote past N (%lld padding elements changed)", (long long)pad);
  else if (!wrong) snprintf(detail, sizeof detail, "%s", exact ? "the reference's bits" : "within the bound");
  check_report(c, what, wrong == 0 && pad == 0, detail);
done:
  check_free_all(c);
  free(ha), free(hb), free(hsa), free(hsb), free(hout), free(hgot), free(hbias);
}

static void run_colsum_case(check_ctx *c, int64_t N, int64_t K, int strided, uint64_t seed) {
  char what[128], detail[256] = "";
  snprintf(what, sizeof what, "colsum N=%lld K=%lld%s", (long long)N, (long long)K, strided ? " strided" : "");
  cli_rng r = cli_rng_make(seed, 0x6373);
  int64_t ldb = strided ? K + 9 : (K > 0 ? K : 1);
  size_t bbytes = (size_t)(N * ldb + 1);
  uint8_t *hb = malloc(bbytes);
  int32_t *ref = malloc(sizeof(int32_t) * (size_t)(N + 1)), *got = malloc(sizeof(int32_t) * (size_t)(N + 1));
  if (!hb || !ref || !got) {
    check_report(c, what, 0, "out of host memory");
    goto done;
  }
  rand_8bit(&r, hb, bbytes, 0);
  w8a8_matrix bm = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, ldb, hb + (strided ? 1 : 0));
  w8a8_vector v = w8a8_vector_make(W8A8_DTYPE_INT32, N, ref);
  if (w8a8_colsum(c->ref, &bm, &v) != W8A8_SUCCESS) {
    snprintf(detail, sizeof detail, "the reference refused a valid case: %s", w8a8_last_error());
    check_report(c, what, 0, detail);
    goto done;
  }
  uint8_t *db = check_dev_copy(c, hb, bbytes);
  int32_t *dv = check_dev_copy(c, NULL, sizeof(int32_t) * (size_t)(N + 1));
  if (!db || !dv) {
    check_report(c, what, 0, "device allocation failed");
    goto done;
  }
  bm.data = db + (strided ? 1 : 0);
  v.data = dv;
  w8a8_status s = w8a8_colsum(c->h, &bm, &v);
  if (s == W8A8_SUCCESS && cli_dev_sync(c->dev)) s = W8A8_ERROR_DEVICE;
  if (s != W8A8_SUCCESS || cli_dev_download(c->dev, got, dv, sizeof(int32_t) * (size_t)N)) {
    snprintf(detail, sizeof detail, "%s: %s", w8a8_status_name(s), w8a8_last_error());
    check_report(c, what, 0, detail);
    goto done;
  }
  int ok = memcmp(got, ref, sizeof(int32_t) * (size_t)N) == 0;
  check_report(c, what, ok, ok ? "" : "differs from the reference");
done:
  check_free_all(c);
  free(hb);
  free(ref);
  free(got);
}

enum { CHECK_CPU = 256, CHECK_GPU, CHECK_DEVICE, CHECK_KERNEL, CHECK_SEED };
static const cli_opt check_opts[] = {
    {CHECK_CPU, "cpu", 0, NULL, "test the CPU backend"},
    {CHECK_GPU, "gpu", 0, NULL, "test a CUDA device (default: the GPU if usable, else the CPU)"},
    {CHECK_DEVICE, "device", 0, "N", "CUDA device (default 0)"},
    {CHECK_KERNEL, "kernel", 0, "K", "auto (default), generic or sm90: the path to test"},
    {CHECK_SEED, "seed", 0, "S", "random seed (default 1)"},
    {'v', "verbose", 'v', NULL, "print every case, not only the failures"},
};
#define NCHECK_OPTS ((int)(sizeof check_opts / sizeof check_opts[0]))

static void check_usage(FILE *f) {
  fprintf(f,
          "usage: w8a8 check [options]\n"
          "Self-test of the active backend (default: the GPU if usable, else the CPU) against the\n"
          "scalar reference on random data: scaled_mm for every dtype, scale mode, output dtype,\n"
          "bias and zero point, odd shapes (M=1, 17; K=13; N=7; empty) and strided, unaligned\n"
          "submatrices; the quantizers in every mode; colsum. int8 results and every quantizer\n"
          "output must be bitwise equal; fp8 GEMMs within the fp32 summation-order bound.\n"
          "Exit 1 on any mismatch.\n"
          "\n");
  cli_print_options(f, check_opts, NCHECK_OPTS);
}

static int cmd_check(int argc, char **argv) {
  int want_cpu = 0, want_gpu = 0, verbose = 0, device_given = 0;
  int64_t seed = 1, device = 0;
  w8a8_kernel kernel = W8A8_KERNEL_AUTO;
  cli_parser p;
  cli_parser_init(&p, "check", check_opts, NCHECK_OPTS, argc, argv);
  int prc = -1, oc, k;
  const char *v;
  while (prc < 0 && (oc = cli_next_opt(&p, &v)) != CLI_OPT_END) {
    switch (oc) {
      case CLI_OPT_HELP:
        check_usage(stdout);
        prc = CLI_EXIT_OK;
        break;
      case CLI_OPT_ERROR: prc = CLI_EXIT_USAGE; break;
      case CHECK_CPU: want_cpu = 1; break;
      case CHECK_GPU: want_gpu = 1; break;
      case 'v': verbose = 1; break;
      case CHECK_SEED:
        if (!cli_opt_i64(&p, v, 0, INT64_MAX, "", &seed)) prc = CLI_EXIT_USAGE;
        break;
      case CHECK_DEVICE:
        if (!cli_opt_i64(&p, v, 0, 1023, "(a CUDA device)", &device)) prc = CLI_EXIT_USAGE;
        device_given = 1;
        break;
      case CHECK_KERNEL: {
        static const char *const ch[] = {"auto", "generic", "sm90", NULL};
        static const w8a8_kernel kv[] = {W8A8_KERNEL_AUTO, W8A8_KERNEL_GENERIC, W8A8_KERNEL_SM90};
        if ((k = cli_opt_choice(&p, v, ch)) < 0)
          prc = CLI_EXIT_USAGE;
        else
          kernel = kv[k];
        break;
      }
    }
  }
  if (prc < 0 && p.first_positional < argc)
    prc = cli_usage_error(&p, "unexpected argument '%s' (check takes options only)", argv[p.first_positional]);
  if (prc < 0 && want_cpu && want_gpu) prc = cli_usage_error(&p, "--cpu or --gpu, not both");
  if (prc < 0 && want_cpu && (device_given || kernel == W8A8_KERNEL_SM90))
    prc = cli_usage_error(&p, "--cpu with %s: those name a CUDA device's path", device_given ? "--device" : "--kernel sm90");
  cli_parser_free(&p);
  if (prc >= 0) return prc;
  /* A CUDA device asked for (--gpu, --device N) must exist: no quiet fall back to the CPU. */
  const int ndev = w8a8_cuda_device_count();
  if ((want_gpu || device_given) && ndev <= (int)device) {
    fprintf(stderr, "w8a8 check: CUDA device %lld asked for; %d CUDA device%s visible\n", (long long)device, ndev,
            ndev == 1 ? "" : "s");
    return CLI_EXIT_FAIL;
  }
  check_ctx c;
  memset(&c, 0, sizeof c);
  c.verbose = verbose;
  w8a8_status s;
  if (want_gpu || (!want_cpu && ndev > (int)device))
    s = w8a8_create(&c.h, W8A8_DEVICE_CUDA, (int)device);
  else
    s = w8a8_create(&c.h, W8A8_DEVICE_CPU, 0);
  if (s != W8A8_SUCCESS) return api_fail(want_gpu ? "w8a8_create(CUDA)" : "w8a8_create", s);
  /* (the message first: w8a8_destroy clears the thread's last error) */
  if (kernel != W8A8_KERNEL_AUTO && (s = w8a8_set_kernel(c.h, kernel)) != W8A8_SUCCESS) {
    const int rc = api_fail("w8a8_set_kernel", s);
    w8a8_destroy(c.h);
    return rc;
  }
  if ((s = w8a8_create(&c.ref, W8A8_DEVICE_CPU, 0)) != W8A8_SUCCESS ||
      (s = w8a8_set_kernel(c.ref, W8A8_KERNEL_REFERENCE)) != W8A8_SUCCESS) {
    const int rc = api_fail("creating the reference handle", s);
    w8a8_destroy(c.h);
    return rc;
  }
  w8a8_handle_info info;
  w8a8_get_info(c.h, &info);
  c.dev = cli_dev_of(c.h);
  c.fp8_ok = c.dev.kind == W8A8_DEVICE_CPU || info.cc_major * 10 + info.cc_minor >= 89;
  printf("w8a8 check: %s %s [%s], kernel %s, seed %lld, against the scalar reference\n",
         c.dev.kind == W8A8_DEVICE_CUDA ? "cuda" : "cpu", info.name, info.features,
         kernel == W8A8_KERNEL_AUTO ? "auto" : kernel == W8A8_KERNEL_GENERIC ? "generic" : "sm90", (long long)seed);
  if (!c.fp8_ok) printf("  (fp8 cases skipped: the device is older than sm_89)\n");
  double t0 = cli_now_us();
  cli_rng r = cli_rng_make((uint64_t)seed, 1);
  uint64_t cs = (uint64_t)seed * 1000003u;

  /* 1. scaled_mm: every mode combination, each on a random shape from the list. */
  static const int64_t shapes[][3] = {{1, 7, 13},   {17, 7, 13},   {1, 64, 64},    {16, 33, 129}, {17, 96, 256},
                                      {64, 130, 300}, {33, 17, 1},  {5, 1, 40},     {2, 300, 16},  {3, 5, 0},
                                      {0, 8, 16},   {8, 0, 16},    {128, 256, 512}, {31, 63, 200}, {65, 31, 77}};
  const int nsh = (int)(sizeof shapes / sizeof shapes[0]);
  static const w8a8_dtype outs[] = {W8A8_DTYPE_BF16, W8A8_DTYPE_FP16, W8A8_DTYPE_FP32};
  long before = c.failed, cases_before = c.cases;
  for (int dt = 0; dt < 2; dt++)
    for (int sc = 0; sc < 4; sc++)
      for (int o = 0; o < 3; o++)
        for (int bias = 0; bias < 2; bias++)
          for (int zp = 0; zp < (dt == 0 ? ZP_COUNT : 1); zp++)
            for (int st = 0; st < 2; st++) {
              int si = (int)cli_rng_range(&r, 0, nsh - 1);
              gcase g = {shapes[si][0], shapes[si][1], shapes[si][2], dt ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8,
                         outs[o], sc & 1, (sc >> 1) & 1, bias, zp, st};
              run_gemm_case(&c, &g, cs++);
            }
  /* ... and every listed shape with the common configuration (token x channel, bf16 out). */
  for (int si = 0; si < nsh; si++)
    for (int dt = 0; dt < 2; dt++)
      for (int st = 0; st < 2; st++) {
        gcase g = {shapes[si][0], shapes[si][1], shapes[si][2], dt ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8,
                   W8A8_DTYPE_BF16, 1, 1, 0, 0, st};
        run_gemm_case(&c, &g, cs++);
      }
  printf("  scaled_mm: %ld cases, %ld failed (%.1f s)\n", c.cases - cases_before, c.failed - before,
         (cli_now_us() - t0) * 1e-6);

  /* 2. quantizers: every input dtype x output dtype x mode x layout, random shapes. */
  static const int64_t qshapes[][2] = {{1, 13}, {17, 64}, {5, 300}, {33, 1}, {4, 4096}, {0, 8}, {3, 0}, {64, 77}};
  const int nqs = (int)(sizeof qshapes / sizeof qshapes[0]);
  static const w8a8_dtype xts[] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  before = c.failed;
  cases_before = c.cases;
  for (int xi = 0; xi < 3; xi++)
    for (int qi = 0; qi < 2; qi++)
      for (int mode = 0; mode < Q_COUNT; mode++) {
        if (qi == 1 && (mode == Q_STATIC_AZP || mode == Q_DYN_TOKEN_AZP)) continue; /* zero points: int8 only */
        for (int st = 0; st < 2; st++) {
          int si = (int)cli_rng_range(&r, 0, nqs - 1);
          w8a8_dtype qt = qi ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
          run_quant_case(&c, qshapes[si][0], qshapes[si][1], xts[xi], qt, mode, st, 0, cs++);
          /* NaN/inf/huge inputs where the header fixes the result: static scales */
          if (mode == Q_STATIC || mode == Q_STATIC_AZP)
            run_quant_case(&c, 9, 100, xts[xi], qt, mode, st, 1, cs++);
        }
      }
  printf("  quantize:  %ld cases, %ld failed (%.1f s)\n", c.cases - cases_before, c.failed - before,
         (cli_now_us() - t0) * 1e-6);

  /* 3. colsum */
  static const int64_t cshapes[][2] = {{7, 13}, {1, 1}, {130, 300}, {64, 4096}, {0, 5}, {5, 0}};
  before = c.failed;
  cases_before = c.cases;
  for (int i = 0; i < (int)(sizeof cshapes / sizeof cshapes[0]); i++)
    for (int st = 0; st < 2; st++) run_colsum_case(&c, cshapes[i][0], cshapes[i][1], st, cs++);
  printf("  colsum:    %ld cases, %ld failed\n", c.cases - cases_before, c.failed - before);

  /* 4. block-scaled fp8: on a sm_90a GPU the Hopper plan's swapped, split and 128-wide tiles */
  static const int64_t bshapes[][3] = {{1, 300, 1000}, {24, 256, 384}, {64, 130, 256}, {130, 200, 512}, {0, 5, 9}};
  before = c.failed;
  cases_before = c.cases;
  if (c.fp8_ok)
    for (int i = 0; i < (int)(sizeof bshapes / sizeof bshapes[0]); i++)
      run_blockwise_case(&c, bshapes[i][0], bshapes[i][1], bshapes[i][2], outs[i % 3], i % 2, cs++);
  printf("  blockwise: %ld cases, %ld failed\n", c.cases - cases_before, c.failed - before);

  printf("w8a8 check: %ld cases, %ld failed, %ld skipped, %.1f s: %s\n", c.cases, c.failed, c.skipped,
         (cli_now_us() - t0) * 1e-6, c.failed ? "FAILED" : "OK");
  w8a8_destroy(c.ref);
  w8a8_destroy(c.h);
  return c.failed ? CLI_EXIT_FAIL : CLI_EXIT_OK;
}

/* ======================================================================================
 * main
 * ====================================================================================== */

static int cmd_tune(int argc, char **argv) {
  if (w8a8_cli_tune) return w8a8_cli_tune(argc, argv);
  fprintf(stderr, "w8a8 tune: not in this build (it comes with the Hopper fast path)\n");
  return CLI_EXIT_FAIL;
}

typedef struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
} command;

static const command commands[] = {
    {"version", cmd_version},         {"info", cmd_info},       {"demo", cmd_demo},
    {"check", cmd_check},             {"bench", cli_bench_main}, {"tp-bench", w8a8_cli_tp_bench},
    {"tp-stack", w8a8_cli_tp_stack},  {"tune", cmd_tune},       {"plot", w8a8_cli_plot},
};
#define NCOMMANDS ((int)(sizeof commands / sizeof commands[0]))

static const command *find_command(const char *name) {
  for (int i = 0; i < NCOMMANDS; i++)
    if (!strcmp(name, commands[i].name)) return &commands[i];
  return NULL;
}

int main(int argc, char **argv) {
  /* Line-buffered: a run that hangs or is killed still leaves every finished line behind. */
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc < 2) {
    main_usage(stderr);
    return CLI_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "help") || !strcmp(cmd, "-h") || !strcmp(cmd, "--help")) {
    if (argc == 2) {
      main_usage(stdout);
      return CLI_EXIT_OK;
    }
    /* help <command>: that command's --help */
    const command *c = argc == 3 ? find_command(argv[2]) : NULL;
    if (!c) {
      fprintf(stderr, "w8a8: help takes one command name (%s); see 'w8a8 help'\n",
              argc > 3 ? "more were given" : "this one is unknown");
      return CLI_EXIT_USAGE;
    }
    char *hargv[3] = {argv[2], "--help", NULL};
    return c->fn(2, hargv);
  }
  if (!strcmp(cmd, "--version")) cmd = "version";
  const command *c = find_command(cmd);
  if (!c) {
    fprintf(stderr, "w8a8: unknown command '%s'; see 'w8a8 help'\n", cmd);
    return CLI_EXIT_USAGE;
  }
  /* argv[1] is the command's argv[0] (its name in messages), the rest its options */
  char **sargv = argv + 1;
  return c->fn(argc - 1, sargv);
}
