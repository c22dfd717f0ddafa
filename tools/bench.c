/* bench.c — `w8a8 bench`: the benchmark harness.
 *
 * The harness owns the command line, the shape suites, the table (nccl-tests style:
 * a `#`-headed table, one row per measured implementation and shape, #wrong column,
 * non-zero exit on any wrong result) and the JSON-lines file. The measurements come
 * from the modules behind tools/bench.h: bench_cpu() (tools/bench_cpu.c: our CPU
 * kernels, oneDNN, OpenBLAS) and bench_cuda() (tools/bench_cuda.c: our GPU kernels,
 * cuBLASLt). In builds without those modules the weak fallbacks at the end of this
 * file stand in: the CPU one still times and verifies our own CPU rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli_common.h"

/* ---- shape suites: names as in the torch comparison tables (bench/results/h200-torch-compare-*) */
typedef struct suite {
  const char *name;
  const char *what;
  bench_shape shapes[4];
  int n;
} suite;

static const suite suites[] = {
    {"llama8b",
     "Llama-3.1-8B, TP=1",
     {{"8b-qkv", 6144, 4096}, {"8b-o", 4096, 4096}, {"8b-gateup", 28672, 4096}, {"8b-down", 4096, 14336}},
     4},
    {"llama70b-tp4",
     "Llama-3.1-70B, TP=4 shards",
     {{"70b-qkv-tp4", 2560, 8192},
      {"70b-o-tp4", 8192, 2048},
      {"70b-gateup-tp4", 14336, 8192},
      {"70b-down-tp4", 8192, 7168}},
     4},
    {"square", "square GEMMs", {{"square", 8192, 8192}, {"square16k", 16384, 16384}}, 2},
};
#define NSUITES ((int)(sizeof suites / sizeof suites[0]))

#define MAX_SHAPES 64
#define MAX_MS 64

static const int64_t cpu_default_ms[] = {1, 16, 64, 256};
static const int64_t gpu_default_ms[] = {1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: w8a8 bench [options]\n"
          "Time scaled_mm over a sweep of M on named shape suites or explicit shapes, next to\n"
          "the baselines, verifying every timed result (#wrong). Exit 1 if any of our rows is wrong.\n"
          "\n"
          "  --suite LIST        comma list of: llama8b (default on the CPU), llama70b-tp4, square, all\n"
          "                      (GPU default: llama8b,llama70b-tp4)\n"
          "  -m LIST             M values (default CPU 1,16,64,256; GPU 1,16,32,...,16384)\n"
          "  -n LIST -k LIST     explicit shapes: every N x K pair (replaces --suite)\n"
          "  --dtype D           int8 | fp8 | both (default both)\n"
          "  --scales S          token (per-token x per-channel, default) | tensor | both\n"
          "  --out-dtype T       bf16 (default) | fp16 | fp32\n"
          "  --cpu, --gpu        which backends (default: the GPU if one is usable, else the CPU;\n"
          "                      both flags: both)\n"
          "  --device N          CUDA device (default 0)\n"
          "  --no-baselines      only our implementations\n"
          "  --iters N           timed calls per measurement, median reported (CPU 5, GPU 20)\n"
          "  --warmup N          untimed calls first (CPU 1, GPU 5)\n"
          "  --rotate N          weight copies to rotate through, so B is not served from cache\n"
          "                      (CPU 2, GPU 4)\n"
          "  -o FILE             also write JSON lines, one object per row\n"
          "  -q                  no progress on stderr\n"
          "  -h, --help          this text\n"
          "\n"
          "Columns: us = median time per call; TFLOP/s = 2MNK/us; GB/s = (A + B + out bytes)/us;\n"
          "vs-base = baseline time / our time (the baseline is named in the last column).\n");
}

/* set by a weak fallback that cannot measure anything */
static int module_missing;

/* ---- the row sink: table on stdout, JSON lines, totals ------------------------------------------ */
#define MAX_GEO 32
typedef struct geo {
  char key[160];
  double log_sum;
  int n;
  double min;
} geo;

typedef struct sink {
  FILE *json;
  char date[32], datetime[32], host[256];
  const bench_config *cfg;
  long rows, wrong_rows, wrong_elems;
  long base_wrong_rows; /* baselines that computed a wrong result (reported, not our failure) */
  geo g[MAX_GEO];
  int ng;
} sink;

static void json_num(FILE *f, double v) {
  if (isfinite(v))
    fprintf(f, "%.6g", v);
  else
    fputs("null", f);
}

static void emit_row(void *ctx, const bench_row *r) {
  sink *s = ctx;
  char vs[32] = "-";
  if (r->vs_baseline > 0) snprintf(vs, sizeof vs, "%.2fx", r->vs_baseline);
  printf("%-26s %-15s %6lld %6lld %6lld  %-8s %-13s  %10.2f %9.3f %9.1f %8s %7ld  %s\n", r->impl ? r->impl : "?",
         r->shape && *r->shape ? r->shape : "-", (long long)r->M, (long long)r->N, (long long)r->K,
         r->dtype ? r->dtype : "?", r->scales ? r->scales : "?", r->us, r->tflops, r->gbps, vs, r->wrong,
         r->baseline && *r->baseline ? r->baseline : "-");
  s->rows++;
  /* Our rows failing verification fail the run. A baseline's wrong rows are reported (e.g. oneDNN's
   * AVX2 s8 x s8 gemm saturates on full-range int8, cpu-bench-2026-11-29-avx2only.txt) but are its defect, not ours. */
  if (r->wrong != 0 && r->impl && strncmp(r->impl, "w8a8", 4) == 0) {
    s->wrong_rows++;
    s->wrong_elems += r->wrong;
  } else if (r->wrong != 0) {
    s->base_wrong_rows++;
  }
  if (r->vs_baseline > 0) {
    char key[160];
    snprintf(key, sizeof key, "%s %s %s vs %s", r->impl ? r->impl : "?", r->dtype ? r->dtype : "?",
             r->scales ? r->scales : "?", r->baseline ? r->baseline : "?");
    int i = 0;
    while (i < s->ng && strcmp(s->g[i].key, key)) i++;
    if (i < MAX_GEO) {
      if (i == s->ng) {
        memset(&s->g[i], 0, sizeof s->g[i]);
        snprintf(s->g[i].key, sizeof s->g[i].key, "%s", key);
        s->g[i].min = INFINITY;
        s->ng++;
      }
      s->g[i].log_sum += log(r->vs_baseline);
      s->g[i].n++;
      if (r->vs_baseline < s->g[i].min) s->g[i].min = r->vs_baseline;
    }
  }
  if (s->json) {
    FILE *f = s->json;
    fputs("{\"impl\":", f);
    cli_json_str(f, r->impl);
    fputs(",\"op\":", f);
    cli_json_str(f, r->op ? r->op : "scaled_mm");
    fputs(",\"dtype\":", f);
    cli_json_str(f, r->dtype);
    fputs(",\"scales\":", f);
    cli_json_str(f, r->scales);
    fputs(",\"out_dtype\":", f);
    cli_json_str(f, w8a8_dtype_name(s->cfg->out_dtype));
    fputs(",\"shape\":", f);
    cli_json_str(f, r->shape);
    fprintf(f, ",\"M\":%lld,\"N\":%lld,\"K\":%lld,\"us\":", (long long)r->M, (long long)r->N, (long long)r->K);
    json_num(f, r->us);
    fputs(",\"tflops\":", f);
    json_num(f, r->tflops);
    fputs(",\"gbps\":", f);
    json_num(f, r->gbps);
    fputs(",\"vs_baseline\":", f);
    json_num(f, r->vs_baseline);
    fputs(",\"baseline\":", f);
    cli_json_str(f, r->baseline);
    fprintf(f, ",\"wrong\":%ld,\"device\":", r->wrong);
    cli_json_str(f, r->device);
    fputs(",\"date\":", f);
    cli_json_str(f, s->date);
    fputs(",\"datetime\":", f);
    cli_json_str(f, s->datetime);
    fputs(",\"host\":", f);
    cli_json_str(f, s->host);
    fprintf(f, ",\"iters\":%d,\"warmup\":%d,\"rotate\":%d,\"version\":", s->cfg->iters, s->cfg->warmup,
            s->cfg->rotate);
    cli_json_str(f, w8a8_version_string());
    fputs("}\n", f);
    fflush(f);
  }
}

static void print_header(void) {
  printf("#\n# %-24s %-15s %6s %6s %6s  %-8s %-13s  %10s %9s %9s %8s %7s  %s\n", "impl", "shape", "M", "N", "K",
         "dtype", "scales", "us", "TFLOP/s", "GB/s", "vs-base", "#wrong", "baseline");
}

/* ---- command line --------------------------------------------------------------------------------- */
static int add_suite(const char *name, bench_shape *shapes, int *n) {
  for (int i = 0; i < NSUITES; i++) {
    if (strcmp(name, "all") && strcmp(name, suites[i].name)) continue;
    for (int j = 0; j < suites[i].n; j++) {
      if (*n >= MAX_SHAPES) return -1;
      shapes[(*n)++] = suites[i].shapes[j];
    }
    if (strcmp(name, "all")) return 0;
  }
  return strcmp(name, "all") ? -1 : 0;
}

static int parse_suites(const char *list, bench_shape *shapes, int *n) {
  char buf[512];
  if (!cli_list_ok(list) || strlen(list) >= sizeof buf) return -1;
  strcpy(buf, list);
  char *save = NULL;
  for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
    if (add_suite(t, shapes, n) != 0) return -1;
  return *n > 0 ? 0 : -1;
}

#define USAGE_ERR(...)                 \
  do {                                 \
    fprintf(stderr, "w8a8 bench: ");   \
    fprintf(stderr, __VA_ARGS__);      \
    fprintf(stderr, "\n\n");           \
    bench_usage(stderr);               \
    return CLI_EXIT_USAGE;             \
  } while (0)

int cli_bench_main(int argc, char **argv) {
  const char *suite_list = NULL, *out_path = NULL;
  int64_t ms[MAX_MS], ns[MAX_SHAPES], ks[MAX_SHAPES];
  int nms = 0, nns = 0, nks = 0;
  int do_int8 = 1, do_fp8 = 1, scale_modes = 1 /* bit0 token, bit1 tensor */;
  w8a8_dtype out_dtype = W8A8_DTYPE_BF16;
  int want_cpu = 0, want_gpu = 0, baselines = 1, quiet = 0;
  int64_t iters = -1, warmup = -1, rotate = -1, device = 0;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                   \
  do {                                                 \
    if (!v) USAGE_ERR("%s needs a value", a);          \
    i++;                                               \
  } while (0)
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      bench_usage(stdout);
      return CLI_EXIT_OK;
    } else if (!strcmp(a, "--suite")) {
      NEED_VALUE();
      suite_list = v;
    } else if (!strcmp(a, "-m")) {
      NEED_VALUE();
      if ((nms = cli_parse_i64_list(v, 1, 1 << 20, ms, MAX_MS)) < 0)
        USAGE_ERR("-m takes a comma list of up to %d integers in 1..%d, got '%s'", MAX_MS, 1 << 20, v);
    } else if (!strcmp(a, "-n")) {
      NEED_VALUE();
      if ((nns = cli_parse_i64_list(v, 1, 1 << 20, ns, MAX_SHAPES)) < 0)
        USAGE_ERR("-n takes a comma list of integers in 1..%d, got '%s'", 1 << 20, v);
    } else if (!strcmp(a, "-k")) {
      NEED_VALUE();
      if ((nks = cli_parse_i64_list(v, 1, 131071, ks, MAX_SHAPES)) < 0)
        USAGE_ERR("-k takes a comma list of integers in 1..131071 (the int32 accumulator bound), got '%s'", v);
    } else if (!strcmp(a, "--dtype")) {
      NEED_VALUE();
      if (!strcmp(v, "int8"))
        do_int8 = 1, do_fp8 = 0;
      else if (!strcmp(v, "fp8") || !strcmp(v, "fp8_e4m3"))
        do_int8 = 0, do_fp8 = 1;
      else if (!strcmp(v, "both"))
        do_int8 = 1, do_fp8 = 1;
      else
        USAGE_ERR("--dtype is int8, fp8 or both, got '%s'", v);
    } else if (!strcmp(a, "--scales")) {
      NEED_VALUE();
      if (!strcmp(v, "token") || !strcmp(v, "token*channel") || !strcmp(v, "rowwise"))
        scale_modes = 1;
      else if (!strcmp(v, "tensor") || !strcmp(v, "tensorwise"))
        scale_modes = 2;
      else if (!strcmp(v, "both"))
        scale_modes = 3;
      else
        USAGE_ERR("--scales is token, tensor or both, got '%s'", v);
    } else if (!strcmp(a, "--out-dtype")) {
      NEED_VALUE();
      if ((out_dtype = cli_parse_out_dtype(v)) == W8A8_DTYPE_INVALID)
        USAGE_ERR("--out-dtype is bf16, fp16 or fp32, got '%s'", v);
    } else if (!strcmp(a, "--cpu")) {
      want_cpu = 1;
    } else if (!strcmp(a, "--gpu")) {
      want_gpu = 1;
    } else if (!strcmp(a, "--device")) {
      NEED_VALUE();
      if (!cli_parse_i64(v, 0, 1023, &device)) USAGE_ERR("--device takes 0..1023, got '%s'", v);
    } else if (!strcmp(a, "--no-baselines")) {
      baselines = 0;
    } else if (!strcmp(a, "--iters")) {
      NEED_VALUE();
      if (!cli_parse_i64(v, 1, 100000, &iters)) USAGE_ERR("--iters takes 1..100000, got '%s'", v);
    } else if (!strcmp(a, "--warmup")) {
      NEED_VALUE();
      if (!cli_parse_i64(v, 0, 100000, &warmup)) USAGE_ERR("--warmup takes 0..100000, got '%s'", v);
    } else if (!strcmp(a, "--rotate")) {
      NEED_VALUE();
      if (!cli_parse_i64(v, 1, 1024, &rotate)) USAGE_ERR("--rotate takes 1..1024, got '%s'", v);
    } else if (!strcmp(a, "-o")) {
      NEED_VALUE();
      out_path = v;
    } else if (!strcmp(a, "-q")) {
      quiet = 1;
    } else {
      USAGE_ERR("unknown option '%s'", a);
    }
#undef NEED_VALUE
  }

  /* shapes */
  bench_shape shapes[MAX_SHAPES];
  int nshapes = 0;
  if (nns || nks) {
    if (!nns || !nks) USAGE_ERR("-n and -k go together");
    if (suite_list) USAGE_ERR("give either --suite or -n/-k, not both");
    if ((int64_t)nns * nks > MAX_SHAPES) USAGE_ERR("at most %d N x K pairs", MAX_SHAPES);
    for (int i = 0; i < nns; i++)
      for (int j = 0; j < nks; j++) {
        bench_shape s = {"", ns[i], ks[j]};
        shapes[nshapes++] = s;
      }
  } else if (suite_list && parse_suites(suite_list, shapes, &nshapes) != 0) {
    USAGE_ERR("unknown suite in '%s' (llama8b, llama70b-tp4, square, all; at most %d shapes)", suite_list,
              MAX_SHAPES);
  }

  /* backends */
  int ngpu = w8a8_cuda_device_count();
  if (!want_cpu && !want_gpu) {
    if (ngpu > 0)
      want_gpu = 1;
    else
      want_cpu = 1;
  }
  if (want_gpu && ngpu <= device) {
    fprintf(stderr, "w8a8 bench: --gpu: no usable CUDA device %lld (%d found%s)\n", (long long)device, ngpu,
            strstr(w8a8_version_string(), "cuda") ? "" : "; this build has no CUDA");
    return CLI_EXIT_FAIL;
  }

  sink s;
  memset(&s, 0, sizeof s);
  cli_iso_date(s.date, sizeof s.date);
  cli_iso_datetime(s.datetime, sizeof s.datetime);
  cli_hostname(s.host, sizeof s.host);
  if (out_path) {
    s.json = fopen(out_path, "w");
    if (!s.json) {
      fprintf(stderr, "w8a8 bench: cannot open '%s' for writing\n", out_path);
      return CLI_EXIT_FAIL;
    }
  }

  printf("# w8a8 bench: scaled_mm  |  w8a8 %s  |  %s  |  host %s\n", w8a8_version_string(), s.datetime, s.host);
  int rc = CLI_EXIT_OK, failures = 0;
  for (int pass = 0; pass < 2; pass++) {
    int gpu = pass == 1;
    if ((gpu && !want_gpu) || (!gpu && !want_cpu)) continue;
    bench_shape dshapes[MAX_SHAPES];
    int dn = nshapes;
    memcpy(dshapes, shapes, sizeof(bench_shape) * (size_t)nshapes);
    if (dn == 0) parse_suites(gpu ? "llama8b,llama70b-tp4" : "llama8b", dshapes, &dn);
    const int64_t *dms = nms ? ms : gpu ? gpu_default_ms : cpu_default_ms;
    int dnm = nms ? nms
                  : gpu ? (int)(sizeof gpu_default_ms / sizeof gpu_default_ms[0])
                        : (int)(sizeof cpu_default_ms / sizeof cpu_default_ms[0]);
    bench_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.Ms = dms;
    cfg.nM = dnm;
    cfg.do_int8 = do_int8;
    cfg.do_fp8 = do_fp8;
    cfg.out_dtype = out_dtype;
    cfg.warmup = (int)(warmup >= 0 ? warmup : gpu ? 5 : 1);
    cfg.iters = (int)(iters > 0 ? iters : gpu ? 20 : 5);
    cfg.rotate = (int)(rotate > 0 ? rotate : gpu ? 4 : 2);
    cfg.baselines = baselines;
    cfg.device_index = (int)device;
    cfg.verbose = !quiet;
    s.cfg = &cfg;

    /* describe the device once, as nccl-tests does */
    w8a8_handle *h = NULL;
    if (w8a8_create(&h, gpu ? W8A8_DEVICE_CUDA : W8A8_DEVICE_CPU, gpu ? (int)device : 0) == W8A8_SUCCESS) {
      w8a8_handle_info info;
      if (w8a8_get_info(h, &info) == W8A8_SUCCESS)
        printf("# %s: %s  [%s]  %s %d\n", gpu ? "gpu" : "cpu", info.name, info.features,
               gpu ? "SMs" : "threads", gpu ? info.num_sms : info.num_threads);
      w8a8_destroy(h);
    }
    printf("# out %s | warmup %d, iters %d (median), weights rotated over %d copies | baselines %s\n",
           w8a8_dtype_name(out_dtype), cfg.warmup, cfg.iters, cfg.rotate, baselines ? "on" : "off");
    print_header();

    /* One module call per (scale mode, shape): the harness can then show progress
     * whatever the module prints, and a failing shape does not hide the others. */
    int total = dn * ((scale_modes & 1) + ((scale_modes >> 1) & 1)), done = 0;
    double t0 = cli_now_us();
    for (int sm = 0; sm < 2; sm++) {
      if (!((scale_modes >> sm) & 1)) continue;
      cfg.per_token = sm == 0;
      for (int i = 0; i < dn; i++) {
        if (!quiet)
          fprintf(stderr, "[bench %s %d/%d, %.0f s] %s %lldx%lld, %s scales, %d M values\n", gpu ? "gpu" : "cpu",
                  ++done, total, (cli_now_us() - t0) * 1e-6, *dshapes[i].name ? dshapes[i].name : "shape",
                  (long long)dshapes[i].N, (long long)dshapes[i].K, cfg.per_token ? "token*channel" : "tensor",
                  cfg.nM);
        cfg.shapes = &dshapes[i];
        cfg.nshapes = 1;
        int r = gpu ? bench_cuda(&cfg, emit_row, &s) : bench_cpu(&cfg, emit_row, &s);
        if (r != 0) {
          failures++;
          fprintf(stderr, "w8a8 bench: the %s module failed (%d) on %lldx%lld\n", gpu ? "GPU" : "CPU", r,
                  (long long)dshapes[i].N, (long long)dshapes[i].K);
          if (module_missing) break; /* a weak fallback said it: the other shapes would fail the same way */
        }
      }
    }
  }

  /* summary */
  printf("#\n");
  for (int i = 0; i < s.ng; i++)
    printf("# geomean %-60s %6.3fx  (min %.3fx, %d rows)\n", s.g[i].key, exp(s.g[i].log_sum / s.g[i].n), s.g[i].min,
           s.g[i].n);
  printf("# rows: %ld   rows with wrong results: %ld (%ld elements)   module failures: %d\n", s.rows, s.wrong_rows,
         s.wrong_elems, failures);
  if (s.base_wrong_rows)
    printf("# note: %ld baseline rows computed wrong results (see #wrong); their times are not comparable\n",
           s.base_wrong_rows);
  printf("# %s\n", s.wrong_rows ? "FAILED: wrong results" : failures ? "INCOMPLETE: a module failed" : "OK");
  if (s.json) {
    const int werr = ferror(s.json);
    if (fclose(s.json) != 0 || werr) {
      fprintf(stderr, "w8a8 bench: writing %s failed (a full disk?): the JSON lines are incomplete\n", out_path);
      rc = CLI_EXIT_FAIL;
    } else {
      printf("# JSON lines written to %s\n", out_path);
    }
  }
  if (s.wrong_rows || failures || s.rows == 0) rc = CLI_EXIT_FAIL;
  return rc;
}

/* =====================================================================================================
 * Weak fallbacks: let the CLI link and run in builds without the modules of tools/bench.h. A strong
 * definition in tools/bench_cpu.c, bench_cuda.c or tp_bench.c replaces each.
 * ===================================================================================================== */

__attribute__((weak)) int bench_cuda(const bench_config *cfg, bench_emit_fn emit, void *ctx) {
  (void)cfg;
  (void)emit;
  (void)ctx;
  fprintf(stderr, "bench_cuda: the GPU benchmark module (tools/bench_cuda.c) is not in this build\n");
  module_missing = 1;
  return -1;
}

__attribute__((weak)) int bench_cpu_sgemm_us(int64_t M, int64_t N, int64_t K, double *us) {
  (void)M;
  (void)N;
  (void)K;
  (void)us;
  fprintf(stderr, "bench_cpu_sgemm_us: the OpenBLAS baseline (tools/bench_cpu.c) is not in this build\n");
  return -1;
}

__attribute__((weak)) int bench_cuda_bf16_us(int device, int64_t M, int64_t N, int64_t K, double *us) {
  (void)device;
  (void)M;
  (void)N;
  (void)K;
  (void)us;
  fprintf(stderr, "bench_cuda_bf16_us: the cuBLASLt baseline (tools/bench_cuda.c) is not in this build\n");
  return -1;
}

__attribute__((weak)) int w8a8_cli_tp_bench(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "w8a8 tp-bench: tp-bench needs a build with MPI (and tools/tp_bench.c); this one has neither\n");
  return CLI_EXIT_FAIL;
}

/* The CPU fallback: our CPU scaled_mm only (no oneDNN/OpenBLAS rows), timed with the same
 * rules as the real module (median, rotated weights) and verified on sampled rows against
 * the scalar reference. */


__attribute__((weak)) int bench_cpu(const bench_config *cfg, bench_emit_fn emit, void *ctx) {
  static int warned;
  if (cfg->baselines && !warned++)
    fprintf(stderr, "bench_cpu: the CPU benchmark module (tools/bench_cpu.c: oneDNN, OpenBLAS baselines) is not in "
                    "this build; timing our CPU kernels only\n");
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CPU, 0) != W8A8_SUCCESS) {
    fprintf(stderr, "bench_cpu: %s\n", w8a8_last_error());
    return -1;
  }
  w8a8_handle_info info;
  w8a8_get_info(h, &info);
  int rc = 0;
  int nrot = cfg->rotate < 1 ? 1 : cfg->rotate > 1024 ? 1024 : cfg->rotate;
  for (int si = 0; si < cfg->nshapes && !rc; si++) {
    int64_t N = cfg->shapes[si].N, K = cfg->shapes[si].K, Mmax = 0;
    for (int i = 0; i < cfg->nM; i++) Mmax = cfg->Ms[i] > Mmax ? cfg->Ms[i] : Mmax;
    size_t es = w8a8_dtype_size(cfg->out_dtype);
    uint8_t *A = malloc((size_t)(Mmax * K)), *B = malloc((size_t)(N * K) * (size_t)nrot);
    void *out = malloc((size_t)(Mmax * N) * es);
    float *sa = malloc(sizeof(float) * (size_t)Mmax), *sb = malloc(sizeof(float) * (size_t)N);
    if (!A || !B || !out || !sa || !sb) {
      fprintf(stderr, "bench_cpu: out of memory for %lldx%lld (x%d copies)\n", (long long)N, (long long)K, nrot);
      rc = -1;
    }
    for (int dt = 0; dt < 2 && !rc; dt++) {
      int fp8 = dt == 1;
      if ((fp8 && !cfg->do_fp8) || (!fp8 && !cfg->do_int8)) continue;
      w8a8_dtype in = fp8 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
      cli_fill_8bit(A, (size_t)(Mmax * K), fp8, 11);
      cli_fill_8bit(B, (size_t)(N * K) * (size_t)nrot, fp8, 12);
      cli_rng r = cli_rng_make(13, 0);
      /* scales that keep outputs O(1..100): the int8 dot products are ~ 128^2 sqrt(K) */
      float base = fp8 ? 1.0f : 1.0f / 4096.0f;
      for (int64_t i = 0; i < Mmax; i++) sa[i] = base * (0.5f + cli_rng_unit(&r));
      for (int64_t i = 0; i < N; i++) sb[i] = (0.5f + cli_rng_unit(&r)) / (float)(K > 1 ? K : 1);
      for (int mi = 0; mi < cfg->nM && !rc; mi++) {
        int64_t M = cfg->Ms[mi];
        cli_mm_call c;
        memset(&c, 0, sizeof c);
        c.h = h;
        c.nrot = nrot;
        c.a = w8a8_matrix_make(in, W8A8_ROW_MAJOR, M, K, K, A);
        for (int j = 0; j < nrot; j++)
          c.b[j] = w8a8_matrix_make(in, W8A8_COL_MAJOR, K, N, K, B + (size_t)j * (size_t)(N * K));
        c.out = w8a8_matrix_make(cfg->out_dtype, W8A8_ROW_MAJOR, M, N, N, out);
        c.sa = w8a8_vector_make(W8A8_DTYPE_FP32, cfg->per_token ? M : 1, sa);
        c.sb = w8a8_vector_make(W8A8_DTYPE_FP32, cfg->per_token ? N : 1, sb);
        memset(out, 0xff, (size_t)(M * N) * es); /* poison: NaN in every output dtype */
        double us = cli_time_calls(cli_dev_of(h), cli_mm_call_once, &c, cfg->warmup, cfg->iters);
        if (us < 0) {
          rc = -1;
          break;
        }
        /* the last call used copy (next - 1): verify that one */
        int last = (c.next + nrot - 1) % nrot;
        int64_t rows[8];
        int nr = cli_sample_rows(M, 8, rows);
        cli_cmp cmp;
        cli_cmp_init(&cmp);
        if (cli_verify_rows_cols(in, cfg->out_dtype, A, K, B + (size_t)last * (size_t)(N * K), K, N, K, sa,
                            cfg->per_token ? M : 1, sb, cfg->per_token ? N : 1, NULL, out, N, rows, nr, 1024, &cmp) != 0) {
          rc = -1;
          break;
        }
        if (cmp.wrong)
          fprintf(stderr, "bench_cpu: %lldx%lldx%lld %s: %lld wrong, first at (%lld, %lld): got %g, reference %g\n",
                  (long long)M, (long long)N, (long long)K, w8a8_dtype_name(in), (long long)cmp.wrong,
                  (long long)cmp.bad_m, (long long)cmp.bad_n, cmp.bad_got, cmp.bad_ref);
        bench_row row;
        memset(&row, 0, sizeof row);
        row.impl = "w8a8_cpu";
        row.op = "scaled_mm";
        row.dtype = w8a8_dtype_name(in);
        row.scales = cfg->per_token ? "token*channel" : "tensor";
        row.shape = cfg->shapes[si].name ? cfg->shapes[si].name : "";
        row.M = M;
        row.N = N;
        row.K = K;
        row.us = us;
        row.tflops = 2.0 * (double)M * (double)N * (double)K / us * 1e-6;
        row.gbps = ((double)(M * K) + (double)(N * K) + (double)(M * N) * (double)es) / us * 1e-3;
        row.baseline = "";
        row.wrong = (long)cmp.wrong;
        row.device = info.name;
        emit(ctx, &row);
      }
    }
    free(A);
    free(B);
    free(out);
    free(sa);
    free(sb);
  }
  w8a8_destroy(h);
  return rc;
}
