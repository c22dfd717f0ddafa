/* tune.c — `w8a8 tune`: measure the Hopper path's configurations (the sm90 table x split-K
 * factors) on the user's shapes and write a tuning table that the library loads
 * (w8a8_load_tuning, or W8A8_TUNE_FILE at handle creation). Format: src/core/tune.h.
 *
 * The candidates are the table's configurations, which are the ones the planner picks (the library ships no
 * other): for each dtype, shape (N, K) and M every configuration that can take M (the swap-AB token
 * tile just above M, or two tiles of half that, with splits 1..8, and the 128-row tiles; never fp8 fast accumulation,
 * which misses the library's error bound; not the token-tail and stream-K twins, which the library puts on a tuned
 * plan itself, unless W8A8_DEV="TUNE_EXPERIMENTAL=1") is first checked against the portable kernel on the
 * same data (int8: bitwise on 64 sampled rows; fp8: within 2e-3 of K E|a| E|b| |sa sb|), then
 * timed: a CUDA graph of 10 calls over rotated weight copies (>= 192 MB, so the weights come
 * from HBM as in a model), the median of 5 replays. The fastest correct one becomes the entry for
 * that exact M; the table prints beside the built-in heuristic's choice and time.
 *
 * Unlike the rest of the CLI this file uses the library's development hooks (forcing one
 * configuration and split, which no public call does); it links the static library, whose
 * hidden symbols it reaches. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_common.h"
#include "core/tune.h"

int w8a8_cli_tune(int argc, char **argv);

typedef struct tune_shape {
  const char *name;
  int64_t N, K;
} tune_shape;
/* The suites of `w8a8 bench` (tools/bench.c), repeated here: the tuner's defaults. */
static const tune_shape LLAMA8B[] = {{"8b-qkv", 6144, 4096}, {"8b-o", 4096, 4096}, {"8b-gateup", 28672, 4096},
                                     {"8b-down", 4096, 14336}};
static const tune_shape LLAMA70B[] = {{"70b-qkv-tp4", 2560, 8192}, {"70b-o-tp4", 8192, 2048},
                                      {"70b-gateup-tp4", 14336, 8192}, {"70b-down-tp4", 8192, 7168}};
#define MAX_SHAPES 64
#define MAX_MS 32
#define ROT_BYTES ((size_t)192 << 20)
#define GRAPH_CALLS 10
#define REPLAYS 5
#define CHECK_ROWS 64

/* ---- the command line (parsed in every build, so that a bad one says so everywhere) ---- */
enum { TUNE_SUITE = 256, TUNE_DEVICE, TUNE_JSON };
static const cli_opt tune_opts[] = {
    {TUNE_SUITE, "suite", 0, "LIST", "comma list of llama8b, llama70b-tp4, all (default: llama8b,llama70b-tp4)"},
    {'m', "m", 'm', "LIST", "token counts M (default 1,16,32,64,128,256,512,1024,2048,4096,8192)"},
    {'n', "n", 'n', "LIST", "N values: with -k, every N x K pair (replaces --suite)"},
    {'k', "k", 'k', "LIST", "K values, 1..131071"},
    {'d', "dtype", 'd', "D", "int8, fp8 or both (default both)"},
    {'o', "out", 'o', "FILE", "the tuning table to write (default w8a8_tune.txt; '-': stdout, the\n"
                              "progress table then goes to stderr)"},
    {TUNE_JSON, "json", 0, NULL, "also the measurements as JSON lines on stdout (docs/CLI.md); the\n"
                                 "progress table goes to stderr"},
    {TUNE_DEVICE, "device", 0, "N", "CUDA device (default 0)"},
    {'v', "verbose", 'v', NULL, "every candidate's time, not only the best"},
};
#define NTUNE_OPTS ((int)(sizeof tune_opts / sizeof tune_opts[0]))

static void usage(FILE *f) {
  fprintf(f,
          "usage: w8a8 tune [options]\n"
          "Measure the Hopper (sm_90a) kernel's configurations on your shapes and write a tuning table.\n"
          "\n");
  cli_print_options(f, tune_opts, NTUNE_OPTS);
  fprintf(f,
          "\n"
          "Use the table with W8A8_TUNE_FILE=FILE (read when a handle is created) or\n"
          "w8a8_load_tuning(handle, FILE). A table is refused as stale on another library version,\n"
          "device name, compute capability or SM count: tune again there.\n"
          "\n"
          "Table format (version %d): a header line\n"
          "  %s %d lib=<version> cc=<major>.<minor> sms=<count> device=<name>\n"
          "then one line per entry: dtype (int8|fp8), M (count or lo-hi), N, K, configuration,\n"
          "split, microseconds. '#' starts a comment line. Lookup: the entry whose M bucket holds M,\n"
          "else the nearest bucket (in ratio) of the same dtype, N and K whose configuration takes M.\n",
          W8A8_TUNE_FORMAT, W8A8_TUNE_MAGIC, W8A8_TUNE_FORMAT);
}

typedef struct tune_args {
  tune_shape shapes[MAX_SHAPES];
  int nshapes;
  int64_t ms[MAX_MS];
  int nm, do_int8, do_fp8, verbose, device, json;
  const char *out_path;
} tune_args;

/* 0: run; 1: -h (printed); 2: a bad command line (reported). */
static int parse(int argc, char **argv, tune_args *ar) {
  static const int64_t default_ms[] = {1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192};
  memset(ar, 0, sizeof *ar);
  ar->nm = (int)(sizeof default_ms / sizeof default_ms[0]);
  memcpy(ar->ms, default_ms, sizeof default_ms);
  ar->do_int8 = ar->do_fp8 = 1;
  ar->out_path = "w8a8_tune.txt";
  int64_t ns[MAX_SHAPES], ks[MAX_SHAPES];
  int nn = 0, nk = 0, rc = 0, c, k;
  const char *suite = NULL, *v;
  cli_parser p;
  cli_parser_init(&p, "tune", tune_opts, NTUNE_OPTS, argc, argv);
  while (rc == 0 && (c = cli_next_opt(&p, &v)) != CLI_OPT_END) {
    switch (c) {
      case CLI_OPT_HELP:
        usage(stdout);
        rc = 1;
        break;
      case CLI_OPT_ERROR: rc = 2; break;
      case TUNE_SUITE: suite = v; break;
      case 'm':
        if ((ar->nm = cli_opt_list(&p, v, 1, 1 << 20, MAX_MS, "token counts", ar->ms)) < 0) rc = 2;
        break;
      case 'n':
        if ((nn = cli_opt_list(&p, v, 1, 1 << 20, MAX_SHAPES, "N values", ns)) < 0) rc = 2;
        break;
      case 'k':
        if ((nk = cli_opt_list(&p, v, 1, 131071, MAX_SHAPES, "K values", ks)) < 0) rc = 2;
        break;
      case 'd': {
        static const char *const ch[] = {"int8", "fp8", "both", NULL};
        if ((k = cli_opt_choice(&p, v, ch)) < 0) rc = 2;
        ar->do_int8 = k != 1, ar->do_fp8 = k != 0;
        break;
      }
      case 'o': ar->out_path = v; break;
      case TUNE_JSON: ar->json = 1; break;
      case TUNE_DEVICE:
        if (!cli_opt_int(&p, v, 0, 1023, "(a CUDA device)", &ar->device)) rc = 2;
        break;
      case 'v': ar->verbose = 1; break;
    }
  }
  if (rc == 0 && p.first_positional < argc)
    rc = cli_usage_error(&p, "unexpected argument '%s' (tune takes options only)", argv[p.first_positional]);
  if (rc == 0 && ((nn > 0) != (nk > 0) || (nn > 0 && suite)))
    rc = cli_usage_error(&p, "give -n and -k together, or --suite, not both");
  if (rc == 0 && ar->json && !strcmp(ar->out_path, "-"))
    rc = cli_usage_error(&p, "-o - and --json both want stdout: write the table to a file, or leave out --json");
  if (rc == 0 && nn > 0) {
    if (nn * nk > MAX_SHAPES) rc = cli_usage_error(&p, "-n x -k makes %d shapes; at most %d", nn * nk, MAX_SHAPES);
    for (int i = 0; rc == 0 && i < nn; i++)
      for (int j = 0; j < nk; j++) {
        const tune_shape sh = {"", ns[i], ks[j]};
        ar->shapes[ar->nshapes++] = sh;
      }
  } else if (rc == 0) {
    char buf[256];
    const char *list = suite ? suite : "llama8b,llama70b-tp4";
    /* (a list past the buffer, or with empty items that strtok would skip, is refused, not cut or thinned) */
    if (!cli_list_ok(list) || strlen(list) >= sizeof buf)
      rc = cli_usage_error(&p, "--suite takes a comma list of llama8b, llama70b-tp4, all, got '%.40s%s'", list,
                           strlen(list) > 40 ? "..." : "");
    if (rc == 0) snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *t = rc ? NULL : strtok_r(buf, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
      const int all = !strcmp(t, "all"), is8 = !strcmp(t, "llama8b"), is70 = !strcmp(t, "llama70b-tp4");
      if (!all && !is8 && !is70) {
        rc = cli_usage_error(&p, "--suite: unknown suite '%s' (llama8b, llama70b-tp4, all)", t);
      } else if (ar->nshapes + (all ? 8 : 4) > MAX_SHAPES) {
        rc = cli_usage_error(&p, "--suite %s: more than %d shapes", list, MAX_SHAPES);
      } else {
        if (all || is8)
          for (int j = 0; j < 4; j++) ar->shapes[ar->nshapes++] = LLAMA8B[j];
        if (all || is70)
          for (int j = 0; j < 4; j++) ar->shapes[ar->nshapes++] = LLAMA70B[j];
      }
    }
  }
  cli_parser_free(&p);
  return rc;
}

#ifdef W8A8_HAVE_CUDA
#include <cuda_runtime.h>
#include <math.h>
#include <unistd.h>

#include "core/internal.h"

w8a8_status w8a8_sm90_scaled_mm_config(w8a8_handle *h, const w8a8_mm_problem *p, int config, int split);
int w8a8_sm90_num_configs(void);
int w8a8_sm90_config_experimental(int config);
const char *w8a8_sm90_config_name(int config);
int w8a8_sm90_config_int8(int config);
int w8a8_sm90_config_swap_bn(int config);
int w8a8_sm90_config_lookup(const char *name, int *int8, int *swap_bn, int *max_split);
int w8a8_sm90_config_fast_accum(int config);
int w8a8_sm90_plan(w8a8_handle *h, const w8a8_mm_problem *p, int *split);

#define CU(x)                                                                                          \
  do {                                                                                                 \
    cudaError_t e_ = (x);                                                                              \
    if (e_ != cudaSuccess) {                                                                           \
      fprintf(stderr, "w8a8 tune: %s failed: %s\n", #x, cudaGetErrorString(e_));                       \
      goto fail;                                                                                       \
    }                                                                                                  \
  } while (0)

typedef struct tune_ctx {
  w8a8_handle *h;
  cudaStream_t st;
  w8a8_mm_problem p;  /* the problem on weight copy 0 */
  uint8_t *w;         /* nrot copies of the weights */
  int nrot;
  size_t wbytes;
} tune_ctx;

/* Microseconds per call of (config, split) over rotated weights: p20 / p50 / p80 over the replays of a graph of
 * GRAPH_CALLS calls; p50 < 0 on failure. */
static cli_stats time_config(tune_ctx *c, int cfg, int split) {
  cudaGraph_t g = NULL;
  cudaGraphExec_t ge = NULL;
  cudaEvent_t e0 = NULL, e1 = NULL;
  cli_stats us = cli_stats_failed();
  double tv[REPLAYS];
  int ok = 1;
  if (cudaStreamBeginCapture(c->st, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return us;
  for (int r = 0; r < GRAPH_CALLS; r++) {
    w8a8_mm_problem q = c->p;
    q.b = c->w + (size_t)(r % c->nrot) * c->wbytes;
    if (w8a8_sm90_scaled_mm_config(c->h, &q, cfg, split) != W8A8_SUCCESS) ok = 0;
  }
  if (cudaStreamEndCapture(c->st, &g) != cudaSuccess || !ok) goto done;
  if (cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) goto done;
  if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) goto done;
  if (cudaGraphLaunch(ge, c->st) != cudaSuccess || cudaStreamSynchronize(c->st) != cudaSuccess) goto done;
  for (int i = 0; i < REPLAYS; i++) {
    float ms = 0;
    if (cudaEventRecord(e0, c->st) != cudaSuccess || cudaGraphLaunch(ge, c->st) != cudaSuccess ||
        cudaEventRecord(e1, c->st) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
        cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess)
      goto done;
    tv[i] = (double)ms * 1e3 / GRAPH_CALLS;
  }
  us = cli_stats_of(tv, REPLAYS);
done:
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (ge) cudaGraphExecDestroy(ge);
  if (g) cudaGraphDestroy(g);
  cudaGetLastError();
  w8a8_clear_error();
  return us;
}

/* Copy `nrows` spread rows of a device [M, N] bf16 output to host rows[nrows][N]. */
static int fetch_rows(const uint16_t *dout, int64_t N, const int64_t *rows, int nrows, uint16_t *host) {
  for (int i = 0; i < nrows; i++)
    if (cudaMemcpy(host + (size_t)i * N, dout + (size_t)rows[i] * N, 2 * (size_t)N, cudaMemcpyDeviceToHost) !=
        cudaSuccess)
      return -1;
  return 0;
}

/* One JSON row: the fastest correct configuration of (dtype, shape, M), beside the heuristic's. */
static void json_entry(FILE *json, const char *device, int int8, const tune_shape *sh, int64_t M, const char *cfg,
                       int split, cli_stats best, const char *hcfg, int hsplit, cli_stats heur) {
  cli_jw w;
  cli_row r;
  memset(&r, 0, sizeof r);
  r.command = "tune";
  r.impl = "w8a8_cuda";
  r.op = "scaled_mm";
  r.device = device;
  r.device_kind = "gpu";
  r.dtype = int8 ? "int8" : "fp8_e4m3";
  r.M = M, r.N = sh->N, r.K = sh->K;
  r.kernel = "sm90";
  r.config = cfg;
  r.iters = GRAPH_CALLS;
  r.warmup = 1;
  r.t = best;
  r.flops = 2.0 * (double)M * (double)sh->N * (double)sh->K;
  cli_json_row_begin(&w, json, &r);
  cli_jw_str(&w, "shape", sh->name && *sh->name ? sh->name : NULL);
  cli_jw_str(&w, "out_dtype", "bf16");
  cli_jw_str(&w, "scales", "token*channel");
  cli_jw_int(&w, "split", split);
  const int hb = heur.p50 > 0 && best.p50 > 0;
  cli_jw_str(&w, "baseline", hb ? "heuristic" : NULL);
  cli_jw_str(&w, "baseline_config", hcfg);
  cli_jw_int(&w, "baseline_split", hsplit);
  cli_jw_num(&w, "baseline_p50_us", hb ? heur.p50 : NAN);
  cli_jw_num(&w, "vs_baseline", hb ? heur.p50 / best.p50 : NAN);
  cli_jw_end(&w);
}

static int run_tune(const tune_args *ar, int argc, char **argv) {
  const tune_shape *shapes = ar->shapes;
  const int nshapes = ar->nshapes, nm = ar->nm, do_int8 = ar->do_int8, do_fp8 = ar->do_fp8, verbose = ar->verbose;
  const int device = ar->device;
  const int64_t *ms = ar->ms;
  /* -o -: the table goes to stdout once the library has loaded it back (from a temporary file) */
  const int table_to_stdout = !strcmp(ar->out_path, "-");
  char tmp_path[256] = "";
  const char *out_path = ar->out_path;
  FILE *json = ar->json ? stdout : NULL;
  if (table_to_stdout || json) cli_tab_ = stderr;
  FILE *tab = cli_tab;
  int64_t maxM = 1, maxN = 1, maxK = 1;
  for (int i = 0; i < nm; i++) maxM = ms[i] > maxM ? ms[i] : maxM;
  for (int i = 0; i < nshapes; i++) {
    maxN = shapes[i].N > maxN ? shapes[i].N : maxN;
    maxK = shapes[i].K > maxK ? shapes[i].K : maxK;
  }

  int rc = CLI_EXIT_FAIL, nentries = 0;
  w8a8_handle *h = NULL;
  tune_ctx c;
  memset(&c, 0, sizeof c);
  void *dA = NULL, *dW = NULL, *dOut = NULL, *dRef = NULL, *dSa = NULL, *dSb = NULL;
  uint8_t *hA = NULL, *hW = NULL;
  float *hSa = NULL, *hSb = NULL;
  uint16_t *got = NULL, *ref = NULL;
  FILE *out = NULL;
  w8a8_status s = w8a8_create(&h, W8A8_DEVICE_CUDA, device);
  if (s != W8A8_SUCCESS) {
    fprintf(stderr, "w8a8 tune: no CUDA device %d: %s\n", device, w8a8_last_error());
    return CLI_EXIT_FAIL;
  }
  w8a8_handle_info info;
  w8a8_get_info(h, &info);
  if (info.cc_major != 9 || info.cc_minor != 0) {
    fprintf(stderr, "w8a8 tune: %s is sm_%d%d; the tuned path (sm_90a) needs an H100/H200-class GPU\n", info.name,
            info.cc_major, info.cc_minor);
    w8a8_destroy(h);
    return CLI_EXIT_FAIL;
  }
  w8a8_load_tuning(h, NULL); /* measure the built-in heuristic, not an older table */
  CU(cudaSetDevice(device));
  CU(cudaStreamCreateWithFlags(&c.st, cudaStreamNonBlocking));
  w8a8_set_stream(h, c.st);
  c.h = h;
  /* weight copies: ceil(ROT_BYTES / wbytes) of them (at most 16) fit in ROT_BYTES + wmax */
  size_t wmax = (size_t)(maxN * maxK);
  CU(cudaMalloc(&dA, (size_t)(maxM * maxK)));
  CU(cudaMalloc(&dW, ROT_BYTES + wmax));
  CU(cudaMalloc(&dOut, 2 * (size_t)(maxM * maxN)));
  CU(cudaMalloc(&dRef, 2 * (size_t)(maxM * maxN)));
  CU(cudaMalloc(&dSa, 4 * (size_t)maxM));
  CU(cudaMalloc(&dSb, 4 * (size_t)maxN));
  hA = malloc((size_t)(maxM * maxK));
  hW = malloc(wmax);
  hSa = malloc(4 * (size_t)maxM);
  hSb = malloc(4 * (size_t)maxN);
  got = malloc(2 * (size_t)CHECK_ROWS * (size_t)maxN);
  ref = malloc(2 * (size_t)CHECK_ROWS * (size_t)maxN);
  if (!hA || !hW || !hSa || !hSb || !got || !ref) {
    fprintf(stderr, "w8a8 tune: out of host memory\n");
    goto fail;
  }
  if (table_to_stdout) {
    const char *td = getenv("TMPDIR");
    snprintf(tmp_path, sizeof tmp_path, "%s/w8a8_tune.XXXXXX", td && *td ? td : "/tmp");
    const int fd = mkstemp(tmp_path);
    out = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!out && fd >= 0) close(fd);
    out_path = tmp_path;
  } else {
    out = fopen(out_path, "w");
  }
  if (!out) {
    fprintf(stderr, "w8a8 tune: -o: cannot open '%s' for writing: %s\n", out_path, strerror(errno));
    tmp_path[0] = 0;
    goto fail;
  }
  cli_json_header(json, "tune", argc, argv);
  {
    char hdr[512], date[64];
    w8a8_tune_device me = {w8a8_version_string(), info.name, info.cc_major, info.cc_minor, info.num_sms};
    w8a8_tune_format_header(hdr, sizeof hdr, &me);
    cli_iso_datetime(date, sizeof date);
    fprintf(out, "# w8a8 tuning table, written by `w8a8 tune` at %s (format: w8a8 tune --help)\n%s", date, hdr);
    fprintf(out, "# dtype M N K config split us    (heuristic: config split us)\n");
  }
  fprintf(tab, "# w8a8 tune on %s (%d SMs): CUDA graph of %d calls, weights rotated (>= %d MB), p50 of %d replays\n",
          info.name, info.num_sms, GRAPH_CALLS, (int)(ROT_BYTES >> 20), REPLAYS);
  fprintf(tab, "# %-5s %-15s %6s %6s %6s | %-20s %5s %9s | %-20s %5s %9s | %6s\n", "dtype", "shape", "M", "N", "K",
          "best", "split", "p50_us", "heuristic", "split", "p50_us", "gain");

  cli_rng rng = cli_rng_make(20261129, 1);
  for (int dt = 0; dt < 2; dt++) {
    const int int8 = dt == 0;
    if (int8 ? !do_int8 : !do_fp8) continue;
    const w8a8_dtype in = int8 ? W8A8_DTYPE_INT8 : W8A8_DTYPE_FP8_E4M3;
    /* operands: int8 uniform bytes; fp8 moderate magnitudes (|x| in [1/8, 16)), never NaN */
    double ea = 0, eb = 0;
    for (int64_t i = 0; i < maxM * maxK; i++) {
      uint8_t v = (uint8_t)cli_rng_u64(&rng);
      if (!int8) v = (uint8_t)((v & 0x87) | ((4 + cli_rng_range(&rng, 0, 6)) << 3));
      hA[i] = v;
    }
    for (size_t i = 0; i < wmax; i++) {
      uint8_t v = (uint8_t)cli_rng_u64(&rng);
      if (!int8) v = (uint8_t)((v & 0x87) | ((4 + cli_rng_range(&rng, 0, 6)) << 3));
      hW[i] = v;
    }
    /* the operands' mean magnitudes (the fp8 tolerance), from at most 4096 bytes of each: hA holds maxM x maxK,
     * hW wmax (a fixed 4096 would read past both at -m 1 -n 16 -k 16) */
    const int64_t na = maxM * maxK < 4096 ? maxM * maxK : 4096, nb = (int64_t)wmax < 4096 ? (int64_t)wmax : 4096;
    for (int64_t i = 0; i < na; i++) ea += int8 ? fabs((double)(int8_t)hA[i]) : fabs((double)cli_fp8_to_f32(hA[i]));
    for (int64_t i = 0; i < nb; i++) eb += int8 ? fabs((double)(int8_t)hW[i]) : fabs((double)cli_fp8_to_f32(hW[i]));
    ea /= (double)na, eb /= (double)nb;
    for (int64_t i = 0; i < maxM; i++) hSa[i] = (0.5f + cli_rng_unit(&rng)) * 1e-3f;
    for (int64_t i = 0; i < maxN; i++) hSb[i] = (0.5f + cli_rng_unit(&rng)) * 1e-2f;
    CU(cudaMemcpy(dA, hA, (size_t)(maxM * maxK), cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dSa, hSa, 4 * (size_t)maxM, cudaMemcpyHostToDevice));
    CU(cudaMemcpy(dSb, hSb, 4 * (size_t)maxN, cudaMemcpyHostToDevice));

    for (int si = 0; si < nshapes; si++) {
      const int64_t N = shapes[si].N, K = shapes[si].K;
      c.wbytes = (size_t)(N * K);
      c.nrot = (int)((ROT_BYTES + c.wbytes - 1) / c.wbytes);
      if (c.nrot > 16) c.nrot = 16;
      c.w = dW;
      for (int r = 0; r < c.nrot; r++) CU(cudaMemcpy(c.w + (size_t)r * c.wbytes, hW, c.wbytes, cudaMemcpyHostToDevice));
      for (int mi = 0; mi < nm; mi++) {
        const int64_t M = ms[mi];
        w8a8_matrix A = w8a8_matrix_make(in, W8A8_ROW_MAJOR, M, K, K, dA);
        w8a8_matrix B = w8a8_matrix_make(in, W8A8_COL_MAJOR, K, N, K, dW);
        w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, dRef);
        w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, M, dSa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, N, dSb);
        /* the reference: the portable kernel on the same data */
        w8a8_set_kernel(h, W8A8_KERNEL_GENERIC);
        s = w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O);
        w8a8_set_kernel(h, W8A8_KERNEL_AUTO);
        if (s != W8A8_SUCCESS || cudaStreamSynchronize(c.st) != cudaSuccess) {
          fprintf(stderr, "w8a8 tune: the portable kernel failed at %lldx%lldx%lld: %s\n", (long long)M, (long long)N,
                  (long long)K, w8a8_last_error());
          goto fail;
        }
        int64_t rows[CHECK_ROWS];
        int nrows = cli_sample_rows(M, CHECK_ROWS, rows);
        if (fetch_rows(dRef, N, rows, nrows, ref) != 0) goto fail;
        O.data = dOut;
        if (w8a8_validate_scaled_mm("w8a8 tune", h, &A, &B, &SA, &SB, NULL, NULL, &O, &c.p) != W8A8_SUCCESS) {
          fprintf(stderr, "w8a8 tune: %s\n", w8a8_last_error());
          goto fail;
        }
        int hsplit = 0, hcfg = w8a8_sm90_plan(h, &c.p, &hsplit);
        double hus = -1, best_us = -1;
        cli_stats hstats = cli_stats_failed(), best_stats = cli_stats_failed();
        int best_cfg = -1, best_split = 0;
        const int64_t kblocks = (K + 127) / 128;
        const char *xenv = cli_setting("TUNE_EXPERIMENTAL"); /* W8A8_DEV="TUNE_EXPERIMENTAL=1" */
        const int experimental = xenv && xenv[0] == '1';
        for (int ci = 0; ci < w8a8_sm90_num_configs(); ci++) {
          if (w8a8_sm90_config_int8(ci) != int8 || w8a8_sm90_config_fast_accum(ci)) continue;
          /* the token-tail and stream-K twins only with TUNE_EXPERIMENTAL=1 (apply_tail / apply_sk take them
           * on top of the tuned plan) */
          if (w8a8_sm90_config_experimental(ci) && !experimental) continue;
          int bn = w8a8_sm90_config_swap_bn(ci);
          /* the token tile just above M, or two of half that (the heuristic's n16 x 2 at 17..32); the skinny tiles
           * three (as the heuristic's wide rule plans 70b-qkv-tp4 at 256 tokens on three n88 tiles) */
          const int tiles_max = strstr(w8a8_sm90_config_name(ci), "_skinny_") ? 3 : 2;
          if (bn && (M > tiles_max * bn || (bn > 8 && M <= bn / 2))) continue;
          /* split-K only where the configuration has it (the unsplit swapped tiles, e.g. the skinny ones, take 1) */
          int max_split = 1;
          if (bn) w8a8_sm90_config_lookup(w8a8_sm90_config_name(ci), NULL, NULL, &max_split);
          for (int split = 1; split <= max_split; split++) {
            if (split > 1 && kblocks / split < 2) break;
            /* correctness first: one call on copy 0, sampled rows against the portable kernel */
            cudaMemsetAsync(dOut, 0xff, 2 * (size_t)(M * N), c.st);
            s = w8a8_sm90_scaled_mm_config(h, &c.p, ci, split);
            if (s != W8A8_SUCCESS || cudaStreamSynchronize(c.st) != cudaSuccess || fetch_rows(dOut, N, rows, nrows, got)) {
              fprintf(stderr, "w8a8 tune: %s split %d failed at %lldx%lldx%lld: %s\n", w8a8_sm90_config_name(ci), split,
                      (long long)M, (long long)N, (long long)K, w8a8_last_error());
              cudaGetLastError();
              continue;
            }
            long wrong = 0;
            for (int r = 0; r < nrows; r++)
              for (int64_t n = 0; n < N; n++) {
                size_t i = (size_t)r * N + n;
                if (int8) {
                  wrong += got[i] != ref[i];
                } else {
                  double g = cli_bf16_to_f32(got[i]), w = cli_bf16_to_f32(ref[i]);
                  double tol = 2e-3 * (double)K * ea * eb * hSa[rows[r]] * hSb[n] + fabs(w) * 0x1p-7;
                  wrong += !(fabs(g - w) <= tol);
                }
              }
            if (wrong) {
              fprintf(stderr, "w8a8 tune: %s split %d: %ld wrong elements at %lldx%lldx%lld; not a candidate\n",
                      w8a8_sm90_config_name(ci), split, wrong, (long long)M, (long long)N, (long long)K);
              continue;
            }
            const cli_stats ts = time_config(&c, ci, split);
            const double us = ts.p50;
            if (us < 0) continue;
            if (verbose)
              fprintf(tab, "  %-5s %-15s %6lld %6lld %6lld   %-20s %5d %9.2f\n", int8 ? "int8" : "fp8",
                      shapes[si].name, (long long)M, (long long)N, (long long)K, w8a8_sm90_config_name(ci), split, us);
            if (ci == hcfg && split == hsplit) hus = us, hstats = ts;
            if (best_us < 0 || us < best_us) best_us = us, best_cfg = ci, best_split = split, best_stats = ts;
          }
        }
        if (hcfg >= 0 && hus < 0) {
          hstats = time_config(&c, hcfg, hsplit);
          hus = hstats.p50;
        }
        if (best_cfg < 0) {
          fprintf(tab, "  %-5s %-15s %6lld %6lld %6lld | no configuration ran correctly: no entry\n",
                  int8 ? "int8" : "fp8", shapes[si].name, (long long)M, (long long)N, (long long)K);
          continue;
        }
        fprintf(tab, "  %-5s %-15s %6lld %6lld %6lld | %-20s %5d %9.2f | %-20s %5d %9.2f | %5.2fx\n",
                int8 ? "int8" : "fp8", shapes[si].name, (long long)M, (long long)N, (long long)K,
                w8a8_sm90_config_name(best_cfg), best_split, best_us, hcfg >= 0 ? w8a8_sm90_config_name(hcfg) : "-",
                hsplit, hus, hus > 0 ? hus / best_us : 0.0);
        if (json)
          json_entry(json, info.name, int8, &shapes[si], M, w8a8_sm90_config_name(best_cfg), best_split, best_stats,
                     hcfg >= 0 ? w8a8_sm90_config_name(hcfg) : NULL, hsplit, hstats);
        fprintf(out, "%-4s %6lld %6lld %6lld %-20s %d %.2f    # heuristic %s %d %.2f\n", int8 ? "int8" : "fp8",
                (long long)M, (long long)N, (long long)K, w8a8_sm90_config_name(best_cfg), best_split, best_us,
                hcfg >= 0 ? w8a8_sm90_config_name(hcfg) : "-", hsplit, hus);
        fflush(out);
        nentries++;
      }
    }
  }
  rc = CLI_EXIT_OK;
fail:
  if (out && fclose(out) != 0) rc = CLI_EXIT_FAIL;
  if (rc == CLI_EXIT_OK) {
    /* round trip: the library must accept what we wrote */
    s = w8a8_load_tuning(h, out_path);
    if (s != W8A8_SUCCESS) {
      fprintf(stderr, "w8a8 tune: the written table does not load: %s\n", w8a8_last_error());
      rc = CLI_EXIT_FAIL;
    } else if (table_to_stdout) {
      FILE *in = fopen(out_path, "r");
      char buf[4096];
      size_t n;
      while (in && (n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, stdout);
      if (!in || ferror(in) || fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "w8a8 tune: -o -: the table did not reach stdout\n");
        rc = CLI_EXIT_FAIL;
      }
      if (in) fclose(in);
      fprintf(tab, "# wrote the table (%d entries) to stdout; use it with W8A8_TUNE_FILE=FILE or w8a8_load_tuning()\n",
              nentries);
    } else {
      fprintf(tab, "# wrote %s: %d entries; use it with W8A8_TUNE_FILE=%s or w8a8_load_tuning()\n", out_path, nentries,
              out_path);
    }
  }
  if (tmp_path[0]) unlink(tmp_path);
  if (json && (fflush(json) != 0 || ferror(json))) {
    fprintf(stderr, "w8a8 tune: --json: writing stdout failed\n");
    rc = CLI_EXIT_FAIL;
  }
  cudaFree(dA), cudaFree(dW), cudaFree(dOut), cudaFree(dRef), cudaFree(dSa), cudaFree(dSb);
  free(hA), free(hW), free(hSa), free(hSb), free(got), free(ref);
  w8a8_destroy(h);
  if (c.st) cudaStreamDestroy(c.st);
  return rc;
}
#endif /* W8A8_HAVE_CUDA */

int w8a8_cli_tune(int argc, char **argv) {
  tune_args ar;
  const int pr = parse(argc, argv, &ar);
  if (pr) return pr == 1 ? CLI_EXIT_OK : CLI_EXIT_USAGE;
#ifdef W8A8_HAVE_CUDA
  return run_tune(&ar, argc, argv);
#else
  fprintf(stderr, "w8a8 tune: this build has no CUDA; tuning measures the Hopper (sm_90a) kernels\n");
  return CLI_EXIT_FAIL;
#endif
}
