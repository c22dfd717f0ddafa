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

enum {
  OPT_SUITE = 256,
  OPT_SCALES,
  OPT_OUT_DTYPE,
  OPT_CPU,
  OPT_GPU,
  OPT_DEVICE,
  OPT_NO_BASELINES,
  OPT_ROTATE,
  OPT_JSON,
  OPT_SEED,
};

static const cli_opt bench_opts[] = {
    {OPT_SUITE, "suite", 0, "LIST", "comma list of llama8b (the CPU default), llama70b-tp4, square, all\n"
                                    "(GPU default: llama8b,llama70b-tp4)"},
    {'m', "m", 'm', "LIST", "M values (default CPU 1,16,64,256; GPU 1,16,32,...,16384)"},
    {'n', "n", 'n', "LIST", "N values: with -k, every N x K pair (replaces --suite)"},
    {'k', "k", 'k', "LIST", "K values, 1..131071 (the int32 accumulator bound)"},
    {'d', "dtype", 'd', "D", "int8, fp8 or both (default both)"},
    {OPT_SCALES, "scales", 0, "S",
     "token (per-token x per-channel, default), tensor, both, or block (1 x 128 / 128 x 128, fp8)"},
    {OPT_OUT_DTYPE, "out-dtype", 0, "T", "bf16 (default), fp16 or fp32"},
    {OPT_CPU, "cpu", 0, NULL, "time the CPU (default: the GPU if one is usable, else the CPU;\n"
                              "--cpu --gpu: both)"},
    {OPT_GPU, "gpu", 0, NULL, "time the GPU"},
    {OPT_DEVICE, "device", 0, "N", "CUDA device (default 0)"},
    {OPT_NO_BASELINES, "no-baselines", 0, NULL, "only our implementations"},
    {'i', "iters", 'i', "N", "timed calls per measurement (CPU 5, GPU 20)"},
    {'w', "warmup", 'w', "N", "untimed calls first (CPU 1, GPU 5)"},
    {OPT_ROTATE, "rotate", 0, "N", "weight copies to rotate through, so B is not served from cache\n"
                                   "(CPU 2, GPU 4)"},
    {OPT_SEED, "seed", 0, "S", "random operands' seed (default 1)"},
    {'o', "out", 'o', "FILE", "also write JSON lines to FILE ('-': stdout, the table then goes\n"
                              "to stderr)"},
    {OPT_JSON, "json", 0, NULL, "JSON lines on stdout, the table on stderr (= -o -)"},
    {'q', "quiet", 'q', NULL, "no progress on stderr"},
};
#define NBENCH_OPTS ((int)(sizeof bench_opts / sizeof bench_opts[0]))

static void bench_usage(FILE *f) {
  fprintf(f,
          "usage: w8a8 bench [options]\n"
          "Time scaled_mm over a sweep of M on named shape suites or explicit shapes, next to the\n"
          "baselines, verifying every timed result (#wrong). Exit 1 if any of our rows is wrong.\n"
          "\n");
  cli_print_options(f, bench_opts, NBENCH_OPTS);
  fprintf(f,
          "\n"
          "Columns: p20/p50/p80 = percentiles of the time per call (us); TFLOP/s = 2MNK / p50;\n"
          "GB/s = (A + B + out bytes) / p50; vs-base = the baseline's p50 / ours (the baseline is named\n"
          "in the last column); kernel, config = what the library ran for our rows (w8a8_get_last_launch:\n"
          "the kernel AUTO took, the sm90 configuration, /sN its K split), a baseline's own choice for\n"
          "theirs. JSON schema: docs/CLI.md.\n");
}

/* set by a weak fallback that cannot measure anything */
static int module_missing;

/* ---- the row sink: table, JSON lines, totals ------------------------------------------------------- */
#define MAX_GEO 32
typedef struct geo {
  char key[160];
  double log_sum;
  int n;
  double min;
} geo;

typedef struct sink {
  FILE *json;
  const bench_config *cfg;
  const char *device_kind; /* "cpu" or "gpu": the pass running */
  long rows, wrong_rows, wrong_elems;
  long base_wrong_rows; /* baselines that computed a wrong result (reported, not our failure) */
  geo g[MAX_GEO];
  int ng;
} sink;

static void emit_row(void *ctx, const bench_row *r) {
  sink *s = ctx;
  const double p50 = r->t.p50;
  const double vs = r->base_p50 > 0 && p50 > 0 ? r->base_p50 / p50 : 0;
  const double flops = 2.0 * (double)r->M * (double)r->N * (double)r->K;
  char vss[32] = "-";
  if (vs > 0) snprintf(vss, sizeof vss, "%.2fx", vs);
  char cfg[64] = "-";
  if (r->config && *r->config) {
    if (r->split_k > 1)
      snprintf(cfg, sizeof cfg, "%s/s%d", r->config, r->split_k);
    else
      snprintf(cfg, sizeof cfg, "%s", r->config);
  } else if (r->split_k > 1) {
    snprintf(cfg, sizeof cfg, "split %d", r->split_k);
  }
  fprintf(cli_tab,
          "%-24s %-14s %6lld %6lld %6lld  %-8s %-13s %-20s %-22s %10.2f %10.2f %10.2f %8.3f %8.1f %8s %6ld  %s\n",
          r->impl ? r->impl : "?", r->shape && *r->shape ? r->shape : "-", (long long)r->M, (long long)r->N,
          (long long)r->K, r->dtype ? r->dtype : "?", r->scales ? r->scales : "?",
          r->kernel && *r->kernel ? r->kernel : "-", cfg, r->t.p20, p50, r->t.p80,
          p50 > 0 ? flops / p50 * 1e-6 : 0.0, p50 > 0 ? r->bytes / p50 * 1e-3 : 0.0, vss, r->wrong,
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
  if (vs > 0) {
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
      s->g[i].log_sum += log(vs);
      s->g[i].n++;
      if (vs < s->g[i].min) s->g[i].min = vs;
    }
  }
  if (s->json) {
    cli_jw w;
    cli_row c;
    memset(&c, 0, sizeof c);
    c.command = "bench";
    c.impl = r->impl;
    c.op = r->op ? r->op : "scaled_mm";
    c.device = r->device;
    c.device_kind = s->device_kind;
    c.dtype = r->dtype;
    c.M = r->M, c.N = r->N, c.K = r->K;
    c.kernel = r->kernel;
    c.config = r->config;
    c.split_k = r->split_k;
    c.iters = s->cfg->iters;
    c.warmup = s->cfg->warmup;
    c.t = r->t;
    c.flops = flops;
    c.wrong = r->wrong;
    cli_json_row_begin(&w, s->json, &c);
    cli_jw_str(&w, "scales", r->scales);
    cli_jw_str(&w, "out_dtype", w8a8_dtype_name(s->cfg->out_dtype));
    cli_jw_str(&w, "shape", r->shape && *r->shape ? r->shape : NULL);
    cli_jw_num(&w, "gbps", p50 > 0 ? r->bytes / p50 * 1e-3 : NAN);
    cli_jw_str(&w, "baseline", r->baseline && *r->baseline && vs > 0 ? r->baseline : NULL);
    cli_jw_num(&w, "baseline_p50_us", vs > 0 ? r->base_p50 : NAN);
    cli_jw_num(&w, "vs_baseline", vs > 0 ? vs : NAN);
    cli_jw_int(&w, "rotate", s->cfg->rotate);
    cli_jw_int(&w, "seed", (int64_t)s->cfg->seed);
    cli_jw_end(&w);
  }
}

static void print_header(void) {
  fprintf(cli_tab, "#\n# %-22s %-14s %6s %6s %6s  %-8s %-13s %-20s %-22s %10s %10s %10s %8s %8s %8s %6s  %s\n",
          "impl", "shape", "M", "N", "K", "dtype", "scales", "kernel", "config", "p20_us", "p50_us", "p80_us",
          "TFLOP/s", "GB/s", "vs-base", "#wrong", "baseline");
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

static const char *const dtype_choices[] = {"int8", "fp8", "both", NULL};

int cli_bench_main(int argc, char **argv) {
  const char *suite_list = NULL, *out_path = NULL;
  int64_t ms[MAX_MS], ns[MAX_SHAPES], ks[MAX_SHAPES];
  int nms = 0, nns = 0, nks = 0;
  int do_int8 = 1, do_fp8 = 1, scale_modes = 1 /* bit0 token, bit1 tensor, bit2 block */;
  w8a8_dtype out_dtype = W8A8_DTYPE_BF16;
  int want_cpu = 0, want_gpu = 0, baselines = 1, quiet = 0;
  int64_t iters = -1, warmup = -1, rotate = -1, device = 0, seed = 1;

  cli_parser p;
  cli_parser_init(&p, "bench", bench_opts, NBENCH_OPTS, argc, argv);
  int rc = CLI_EXIT_OK, c;
  const char *v;
  while (rc == CLI_EXIT_OK && (c = cli_next_opt(&p, &v)) != CLI_OPT_END) {
    int k;
    switch (c) {
      case CLI_OPT_HELP:
        bench_usage(stdout);
        cli_parser_free(&p);
        return CLI_EXIT_OK;
      case CLI_OPT_ERROR: rc = CLI_EXIT_USAGE; break;
      case OPT_SUITE: suite_list = v; break;
      case 'm':
        if ((nms = cli_opt_list(&p, v, 1, 1 << 20, MAX_MS, "M values", ms)) < 0) rc = CLI_EXIT_USAGE;
        break;
      case 'n':
        if ((nns = cli_opt_list(&p, v, 1, 1 << 20, MAX_SHAPES, "N values", ns)) < 0) rc = CLI_EXIT_USAGE;
        break;
      case 'k':
        if ((nks = cli_opt_list(&p, v, 1, 131071, MAX_SHAPES, "K values", ks)) < 0) rc = CLI_EXIT_USAGE;
        break;
      case 'd':
        if ((k = cli_opt_choice(&p, v, dtype_choices)) < 0) rc = CLI_EXIT_USAGE;
        do_int8 = k != 1, do_fp8 = k != 0;
        break;
      case OPT_SCALES: {
        static const char *const ch[] = {"token", "tensor", "both", "block", NULL};
        if ((k = cli_opt_choice(&p, v, ch)) < 0) rc = CLI_EXIT_USAGE;
        scale_modes = k == 3 ? 4 : k + 1;
        break;
      }
      case OPT_OUT_DTYPE: {
        static const char *const ch[] = {"bf16", "fp16", "fp32", NULL};
        if (cli_opt_choice(&p, v, ch) < 0) rc = CLI_EXIT_USAGE;
        out_dtype = cli_parse_out_dtype(v);
        break;
      }
      case OPT_CPU: want_cpu = 1; break;
      case OPT_GPU: want_gpu = 1; break;
      case OPT_DEVICE:
        if (!cli_opt_i64(&p, v, 0, 1023, "(a CUDA device)", &device)) rc = CLI_EXIT_USAGE;
        break;
      case OPT_NO_BASELINES: baselines = 0; break;
      case 'i':
        if (!cli_opt_i64(&p, v, 1, 100000, "timed calls", &iters)) rc = CLI_EXIT_USAGE;
        break;
      case 'w':
        if (!cli_opt_i64(&p, v, 0, 100000, "warm-up calls", &warmup)) rc = CLI_EXIT_USAGE;
        break;
      case OPT_ROTATE:
        if (!cli_opt_i64(&p, v, 1, 1024, "weight copies", &rotate)) rc = CLI_EXIT_USAGE;
        break;
      case OPT_SEED:
        if (!cli_opt_i64(&p, v, 0, INT64_MAX, "", &seed)) rc = CLI_EXIT_USAGE;
        break;
      case 'o': out_path = v; break;
      case OPT_JSON: out_path = "-"; break;
      case 'q': quiet = 1; break;
    }
  }
  if (rc == CLI_EXIT_OK && p.first_positional < argc)
    rc = cli_usage_error(&p, "unexpected argument '%s' (bench takes options only)", argv[p.first_positional]);
  if (rc == CLI_EXIT_OK && (scale_modes & 4) && !do_fp8)
    rc = cli_usage_error(&p, "--scales block takes fp8 operands (-d fp8 or both), got -d int8");

  /* shapes */
  bench_shape shapes[MAX_SHAPES];
  int nshapes = 0;
  if (rc != CLI_EXIT_OK) {
  } else if (nns || nks) {
    if (!nns || !nks)
      rc = cli_usage_error(&p, "-n and -k go together (every N x K pair is a shape)");
    else if (suite_list)
      rc = cli_usage_error(&p, "give either --suite or -n/-k, not both");
    else if ((int64_t)nns * nks > MAX_SHAPES)
      rc = cli_usage_error(&p, "-n x -k makes %d shapes; at most %d", nns * nks, MAX_SHAPES);
    for (int i = 0; rc == CLI_EXIT_OK && i < nns; i++)
      for (int j = 0; j < nks; j++) {
        bench_shape sh = {"", ns[i], ks[j]};
        shapes[nshapes++] = sh;
      }
  } else if (suite_list && parse_suites(suite_list, shapes, &nshapes) != 0) {
    rc = cli_usage_error(&p, "--suite takes a comma list of llama8b, llama70b-tp4, square, all (at most %d shapes), "
                             "got '%s'",
                         MAX_SHAPES, suite_list);
  }
  cli_parser_free(&p);
  if (rc != CLI_EXIT_OK) return rc;

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
  if (cli_out_open("bench", out_path, &s.json) != 0) return CLI_EXIT_FAIL;
  char datetime[32], host[256];
  cli_iso_datetime(datetime, sizeof datetime);
  cli_hostname(host, sizeof host);
  cli_json_header(s.json, "bench", argc, argv);

  fprintf(cli_tab, "# w8a8 bench: scaled_mm  |  w8a8 %s  |  %s  |  host %s\n", w8a8_version_string(), datetime,
          host);
  int failures = 0;
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
    cfg.seed = (uint64_t)seed;
    s.cfg = &cfg;
    s.device_kind = gpu ? "gpu" : "cpu";

    /* describe the device once, as nccl-tests does */
    w8a8_handle *h = NULL;
    if (w8a8_create(&h, gpu ? W8A8_DEVICE_CUDA : W8A8_DEVICE_CPU, gpu ? (int)device : 0) == W8A8_SUCCESS) {
      w8a8_handle_info info;
      if (w8a8_get_info(h, &info) == W8A8_SUCCESS)
        fprintf(cli_tab, "# %s: %s  [%s]  %s %d\n", gpu ? "gpu" : "cpu", info.name, info.features,
                gpu ? "SMs" : "threads", gpu ? info.num_sms : info.num_threads);
      w8a8_destroy(h);
    }
    fprintf(cli_tab,
            "# out %s | warmup %d, iters %d%s, weights rotated over %d copies | baselines %s | seed %lld\n",
            w8a8_dtype_name(out_dtype), cfg.warmup, cfg.iters,
            gpu ? " (one CUDA graph of iters calls, replayed: percentiles over the replays)" : " (percentiles over the calls)",
            cfg.rotate, baselines ? "on" : "off", (long long)seed);
    print_header();

    /* One module call per (scale mode, shape): the harness can then show progress
     * whatever the module prints, and a failing shape does not hide the others. */
    int total = dn * ((scale_modes & 1) + ((scale_modes >> 1) & 1) + ((scale_modes >> 2) & 1)), done = 0;
    double t0 = cli_now_us();
    for (int sm = 0; sm < 3; sm++) {
      if (!((scale_modes >> sm) & 1)) continue;
      cfg.per_token = sm == 0;
      cfg.block = sm == 2;
      for (int i = 0; i < dn; i++) {
        if (!quiet)
          fprintf(stderr, "[bench %s %d/%d, %.0f s] %s %lldx%lld, %s scales, %d M values\n", gpu ? "gpu" : "cpu",
                  ++done, total, (cli_now_us() - t0) * 1e-6, *dshapes[i].name ? dshapes[i].name : "shape",
                  (long long)dshapes[i].N, (long long)dshapes[i].K,
                  cfg.block ? "block" : cfg.per_token ? "token*channel" : "tensor",
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
  fprintf(cli_tab, "#\n");
  for (int i = 0; i < s.ng; i++)
    fprintf(cli_tab, "# geomean %-60s %6.3fx  (min %.3fx, %d rows)\n", s.g[i].key, exp(s.g[i].log_sum / s.g[i].n),
            s.g[i].min, s.g[i].n);
  fprintf(cli_tab, "# rows: %ld   rows with wrong results: %ld (%ld elements)   module failures: %d\n", s.rows,
          s.wrong_rows, s.wrong_elems, failures);
  if (s.base_wrong_rows)
    fprintf(cli_tab, "# note: %ld baseline rows computed wrong results (see #wrong); their times are not comparable\n",
            s.base_wrong_rows);
  fprintf(cli_tab, "# %s\n", s.wrong_rows ? "FAILED: wrong results" : failures ? "INCOMPLETE: a module failed" : "OK");
  if (s.json) {
    if (cli_out_close("bench", out_path, s.json) != 0)
      rc = CLI_EXIT_FAIL;
    else if (s.json != stdout)
      fprintf(cli_tab, "# JSON lines written to %s\n", out_path);
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

__attribute__((weak)) int bench_cpu_sgemm_us(int64_t M, int64_t N, int64_t K, cli_stats *t) {
  (void)M;
  (void)N;
  (void)K;
  (void)t;
  fprintf(stderr, "bench_cpu_sgemm_us: the OpenBLAS baseline (tools/bench_cpu.c) is not in this build\n");
  return -1;
}

__attribute__((weak)) int bench_cuda_bf16_us(int device, int64_t M, int64_t N, int64_t K, cli_stats *t) {
  (void)device;
  (void)M;
  (void)N;
  (void)K;
  (void)t;
  fprintf(stderr, "bench_cuda_bf16_us: the cuBLASLt baseline (tools/bench_cuda.c) is not in this build\n");
  return -1;
}

__attribute__((weak)) int w8a8_cli_tp_bench(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "w8a8 tp-bench: tp-bench needs a build with MPI (and tools/tp_bench.c); this one has neither\n");
  return CLI_EXIT_FAIL;
}

/* ---- block-scaled rows (bench_blockwise) ---- */

typedef struct bw_call {
  w8a8_handle *h;
  w8a8_matrix a, b[CLI_MAX_ROT], sa, sb, out;
  int nrot, next;
} bw_call;
static int bw_call_once(void *arg) {
  bw_call *c = arg;
  const w8a8_status s = w8a8_scaled_mm_blockwise(c->h, &c->a, &c->b[c->next], &c->sa, &c->sb, NULL, &c->out);
  c->next = (c->next + 1) % c->nrot;
  if (s != W8A8_SUCCESS) fprintf(stderr, "w8a8_scaled_mm_blockwise: %s\n", w8a8_last_error());
  return s == W8A8_SUCCESS ? 0 : -1;
}

/* Elements of sampled rows outside the header's bound: |out - ref| <= 2e-3 sum |sa sb a b| + the output's
 * rounding, ref the formula in double precision (up to 1024 columns a row). */
static int64_t bw_wrong(const uint8_t *A, int64_t M, int64_t K, const uint8_t *B, int64_t N, const float *sa,
                        const float *sb, w8a8_dtype od, const void *out) {
  const int64_t KB = (K + 127) / 128;
  int64_t rows[8], wrong = 0;
  const int nr = cli_sample_rows(M, 8, rows);
  const int64_t step = N > 1024 ? N / 1024 : 1;
  for (int i = 0; i < nr; i++)
    for (int64_t n = 0; n < N; n += step) {
      const int64_t m = rows[i];
      double v = 0, mag = 0;
      for (int64_t kb = 0; kb < KB; kb++) {
        double part = 0, pa = 0;
        for (int64_t k = kb * 128; k < K && k < kb * 128 + 128; k++) {
          const double x = cli_fp8_to_f32(A[m * K + k]), y = cli_fp8_to_f32(B[n * K + k]);
          part += x * y;
          pa += fabs(x * y);
        }
        const double s = (double)sa[m * KB + kb] * sb[(n / 128) * KB + kb];
        v += s * part;
        mag += s * pa;
      }
      const double got = cli_load_float(od, out, m * N + n);
      if (!(fabs(got - v) <= 2e-3 * mag + cli_ulp(od, v) + 1e-30)) wrong++;
    }
  return wrong;
}

int bench_blockwise(const bench_config *cfg, w8a8_handle *h, const char *impl, const char *device, bench_emit_fn emit,
                    void *ctx) {
  if (!cfg->do_fp8) return 0; /* block scales are fp8's */
  const cli_dev d = cli_dev_of(h);
  const int nrot = cfg->rotate < 1 ? 1 : cfg->rotate > CLI_MAX_ROT ? CLI_MAX_ROT : cfg->rotate;
  const size_t es = w8a8_dtype_size(cfg->out_dtype);
  int rc = 0;
  for (int si = 0; si < cfg->nshapes && !rc; si++) {
    const int64_t N = cfg->shapes[si].N, K = cfg->shapes[si].K, KB = (K + 127) / 128, NB = (N + 127) / 128;
    int64_t Mmax = 0;
    for (int i = 0; i < cfg->nM; i++) Mmax = cfg->Ms[i] > Mmax ? cfg->Ms[i] : Mmax;
    uint8_t *A = malloc((size_t)(Mmax * K)), *B = malloc((size_t)(N * K) * (size_t)nrot);
    float *sa = malloc(sizeof(float) * (size_t)(Mmax * KB)), *sb = malloc(sizeof(float) * (size_t)(NB * KB));
    void *out = malloc((size_t)(Mmax * N) * es);
    void *dA = cli_dev_alloc(d, (size_t)(Mmax * K)), *dB = cli_dev_alloc(d, (size_t)(N * K) * (size_t)nrot);
    void *dsa = cli_dev_alloc(d, sizeof(float) * (size_t)(Mmax * KB)), *dsb = cli_dev_alloc(d, sizeof(float) * (size_t)(NB * KB));
    void *dout = cli_dev_alloc(d, (size_t)(Mmax * N) * es);
    if (!A || !B || !sa || !sb || !out || !dA || !dB || !dsa || !dsb || !dout) {
      fprintf(stderr, "bench: out of memory for the block-scaled %lldx%lld (x%d copies)\n", (long long)N,
              (long long)K, nrot);
      rc = -1;
    } else {
      cli_fill_8bit(A, (size_t)(Mmax * K), 1, cfg->seed * 1000 + 21);
      cli_fill_8bit(B, (size_t)(N * K) * (size_t)nrot, 1, cfg->seed * 1000 + 22);
      cli_rng r = cli_rng_make(cfg->seed * 1000 + 23, 0);
      /* group and block scales that keep outputs O(1..100) */
      for (int64_t i = 0; i < Mmax * KB; i++) sa[i] = 0.5f + cli_rng_unit(&r);
      for (int64_t i = 0; i < NB * KB; i++) sb[i] = (0.5f + cli_rng_unit(&r)) / (float)K;
      if (cli_dev_upload(d, dA, A, (size_t)(Mmax * K)) || cli_dev_upload(d, dB, B, (size_t)(N * K) * (size_t)nrot) ||
          cli_dev_upload(d, dsa, sa, sizeof(float) * (size_t)(Mmax * KB)) ||
          cli_dev_upload(d, dsb, sb, sizeof(float) * (size_t)(NB * KB)))
        rc = -1;
    }
    for (int mi = 0; mi < cfg->nM && !rc; mi++) {
      const int64_t M = cfg->Ms[mi];
      bw_call c;
      memset(&c, 0, sizeof c);
      c.h = h;
      c.nrot = nrot;
      c.a = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K, dA);
      for (int j = 0; j < nrot; j++)
        c.b[j] = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, (uint8_t *)dB + (size_t)j * (size_t)(N * K));
      c.sa = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, KB, KB, dsa);
      c.sb = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, NB, KB, KB, dsb);
      c.out = w8a8_matrix_make(cfg->out_dtype, W8A8_ROW_MAJOR, M, N, N, dout);
      if (cli_dev_memset(d, dout, 0xff, (size_t)(M * N) * es)) { /* poison: NaN in every output dtype */
        rc = -1;
        break;
      }
      const cli_stats t = cli_time_calls(d, bw_call_once, &c, cfg->warmup, cfg->iters);
      if (t.p50 < 0 || cli_dev_download(d, out, dout, (size_t)(M * N) * es)) {
        rc = -1;
        break;
      }
      cli_launch ran;
      cli_last_launch(h, "auto", &ran);
      const int last = (c.next + nrot - 1) % nrot; /* the copy the last call read */
      const int64_t wrong = bw_wrong(A, M, K, B + (size_t)last * (size_t)(N * K), N, sa, sb, cfg->out_dtype, out);
      if (wrong)
        fprintf(stderr, "bench: block-scaled %lldx%lldx%lld (%s): %lld sampled outputs outside the bound\n",
                (long long)M, (long long)N, (long long)K, impl, (long long)wrong);
      bench_row row;
      memset(&row, 0, sizeof row);
      row.impl = impl;
      row.op = "scaled_mm";
      row.dtype = "fp8_e4m3";
      row.scales = "block";
      row.shape = cfg->shapes[si].name ? cfg->shapes[si].name : "";
      row.M = M, row.N = N, row.K = K;
      row.t = t;
      row.bytes = (double)(M * K) + (double)(N * K) + (double)(M * N) * (double)es + 4.0 * (double)((M + NB) * KB);
      row.kernel = ran.kernel;
      row.config = ran.config;
      row.split_k = ran.split_k;
      row.baseline = "";
      row.wrong = (long)wrong;
      row.device = device;
      emit(ctx, &row);
    }
    free(A), free(B), free(sa), free(sb), free(out);
    cli_dev_free(d, dA), cli_dev_free(d, dB), cli_dev_free(d, dsa), cli_dev_free(d, dsb), cli_dev_free(d, dout);
  }
  return rc;
}

/* The CPU fallback: our CPU scaled_mm only (no oneDNN/OpenBLAS rows), timed with the same
 * rules as the real module (percentiles, rotated weights) and verified on sampled rows against
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
  if (cfg->block) {
    const int r = bench_blockwise(cfg, h, "w8a8_cpu", info.name, emit, ctx);
    w8a8_destroy(h);
    return r;
  }
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
      cli_fill_8bit(A, (size_t)(Mmax * K), fp8, cfg->seed * 1000 + 11);
      cli_fill_8bit(B, (size_t)(N * K) * (size_t)nrot, fp8, cfg->seed * 1000 + 12);
      cli_rng r = cli_rng_make(cfg->seed * 1000 + 13, 0);
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
        const cli_stats t = cli_time_calls(cli_dev_of(h), cli_mm_call_once, &c, cfg->warmup, cfg->iters);
        if (t.p50 < 0) {
          rc = -1;
          break;
        }
        cli_launch ran;
        cli_last_launch(h, "auto", &ran);
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
        row.t = t;
        row.bytes = (double)(M * K) + (double)(N * K) + (double)(M * N) * (double)es;
        row.kernel = ran.kernel;
        row.config = ran.config;
        row.split_k = ran.split_k;
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
