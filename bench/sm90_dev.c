/* sm90_dev.c — development benchmark of the Hopper scaled-GEMM kernel (before the CLI bench has
 * it): for the Llama-3.1-8B TP1 and 70B TP4 shapes and a sweep of M, times the heuristic's choice
 * (and, with -a, every configuration of the table) through the library's hooks, per-token x
 * per-channel scales, bf16 out.
 *
 * Timing as for the reference figures (docs/BENCHMARKS.md): a CUDA graph of 20 calls, weights rotated
 * over enough copies that they do not sit in L2 (>= 256 MB of weights), median of 7 replays, random
 * data. Every
 * timed configuration is checked on 256 sampled outputs against a host computation (int8 bit for
 * bit through the library's own epilogue formula, fp8 within 2e-3 of sum|a||b||sa sb| plus 2^-7 of
 * the value).
 *
 * Build (links the static library, whose hidden hooks it calls):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/local/cuda/include bench/sm90_dev.c \
 *       build-sm90/lib/libw8a8.a -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lm -fopenmp \
 *       -o build-sm90/bin/sm90_dev
 * Run: sm90_dev [-a] [-P] [-T] [-c NAME] [-d int8|fp8] [-m M[,M...]] [-s SHAPE[,SHAPE...]] [-k SPLIT[,SPLIT...]]
 *               [-R MODE[,MODE...]]
 *   -a also times the other configurations; swap-AB ones with up to two token tiles (e.g. two
 *      n16 tiles at M = 17..32 next to one n32 tile: the n32 cliff question of docs/HOPPER.md).
 *   -s only the named shapes (substring match, e.g. -s gateup,70b-o).
 *   -c NAME[,NAME...] times those configurations instead of the heuristic's, one after another for
 *      each shape and M (skipped where the dtype differs; e.g. -c int8_128x128,int8_128x128_tail
 *      for a kernel against its token-tail twin); the name `plan` stands for the heuristic's choice.
 *   -T after each timing, one more call with the kernel's per-tile clock64 timeline on (a library
 *      built with NVCCEXTRA=-DW8A8_SM90_TIMELINE only; every configuration): medians over CTAs and
 *      tiles of the wait for the first data
 *      (the CTA's first tile from the kernel's entry; later tiles), the main loop's cycles (and per
 *      K-block of the CTA's K range), the epilogue's (split-K: with the reduction), and the gap from
 *      one tile's epilogue end to the next tile's start.
 *   -P development only: A's tensor map covers whole token tiles (M rounded up to the tile), so the
 *      rows of a partial tile past M come from the buffer (allocated for 16384 rows) instead of TMA's
 *      out-of-bounds fill, to measure what the fill costs a partial token tile (it is the partial-M
 *      cost: M = 129 with rows read runs at M = 256's speed, h200-sm90-token-tail-2026-11-30.txt).
 *      Outputs past M are not stored.
 *   -R time every configuration once per token-tail mode (W8A8_DEV SM90_TAIL; only the *_tail
 *      configurations change with it): 0 = TMA fills the partial token tile's missing rows, 1 = the
 *      library's rule, 2 = small boxes only, 3 = one box of the valid rows rounded up to 8, 4 = the
 *      fold where it applies (one token tile of 65..127 rows on an unswapped unsplit unicast twin: rows
 *      [0, 64) and [M - 64, M) in one 3-D box; else as 1); one row each, interleaved; the configuration
 *      column then ends in /tMODE. (With -P there is no partial token tile: -R changes nothing.)
 *   -k time every split-K configuration timed (the heuristic's, and with -a the others) with each
 *      of these splits, one row per split: how a small-M time depends on the split.
 * W8A8_TUNE_FILE=table makes the '*' rows the tuned plan instead of the heuristic's.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/knobs.h"
#include "w8a8.h"

w8a8_status w8a8_sm90_scaled_mm_config(w8a8_handle *h, const w8a8_mm_problem *p, int config, int split);
int w8a8_sm90_num_configs(void);
const char *w8a8_sm90_config_name(int config);
int w8a8_sm90_config_int8(int config);
int w8a8_sm90_config_swap_bn(int config);
int w8a8_sm90_config_max_ctas(w8a8_handle *h, int config, int split);
int w8a8_sm90_plan(w8a8_handle *h, const w8a8_mm_problem *p, int *split);
int w8a8_sm90_config_lookup(const char *name, int *int8, int *swap_bn, int *max_split);
void w8a8_sm90_set_timeline(unsigned long long *dev_buf, int max_tiles_per_cta, int max_ctas);
int w8a8_sm90_timeline_built(void);

#define MAX_CFGS 24 /* -c names */
#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
      exit(1);                                                                              \
    }                                                                                       \
  } while (0)

typedef struct shape {
  const char *name;
  int64_t N, K;
} shape;
static const shape SHAPES[] = {
    {"70b-qkv-tp4", 2560, 8192}, {"70b-o-tp4", 8192, 2048}, {"70b-gateup-tp4", 14336, 8192},
    {"70b-down-tp4", 8192, 7168}, {"8b-qkv", 6144, 4096},    {"8b-gateup", 28672, 4096},
    {"8b-down", 4096, 14336}, {"8b-o", 4096, 4096},
};

static uint64_t rs = 88172645463325252ull;
static uint32_t rnd(void) {
  rs ^= rs << 13;
  rs ^= rs >> 7;
  rs ^= rs << 17;
  return (uint32_t)(rs >> 32);
}
static uint8_t rnd_byte(int int8) {
  for (;;) {
    uint8_t v = (uint8_t)rnd();
    if (int8) return v;
    /* fp8: moderate magnitudes (exponent field 4..10, |x| in [2^-3, 2^4)), never NaN */
    uint8_t e = (uint8_t)(4 + rnd() % 7);
    return (uint8_t)((v & 0x80) | (e << 3) | (v & 7));
  }
}

static double median(double *v, int n) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (v[j] < v[i]) {
        double t = v[i];
        v[i] = v[j];
        v[j] = t;
      }
  return v[n / 2];
}

static int cmp_double(const void *x, const void *y) {
  const double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}
static double median_sorted(double *v, size_t n) {
  if (!n) return 0.0;
  qsort(v, n, sizeof *v, cmp_double);
  return v[n / 2];
}

/* -T: one call with the kernel's timeline on (4 clock64 stamps per (CTA, tile), see sm90_args.timeline:
 * start, first K-block's data, main-loop end, epilogue end; the CTA's first tile starts at the kernel's
 * entry). Medians over every stamped (CTA, tile): the wait for the first data of the CTA's first tile
 * (prologue + griddepcontrol.wait + first load) and of later tiles, the main loop from the first data
 * to the accumulators, the epilogue (split-K: with the reduction) and the gap to the next tile
 * (clock64: per SM, so only differences within a CTA). */
static void timeline_report(w8a8_handle *h, const w8a8_mm_problem *p, int cfg, int split, cudaStream_t st,
                            unsigned long long *dTL, unsigned long long *hTL, size_t tlbytes, int tiles, int ctas,
                            int64_t K) {
  CK(cudaMemsetAsync(dTL, 0, tlbytes, st));
  w8a8_sm90_set_timeline(dTL, tiles, ctas);
  w8a8_status s = w8a8_sm90_scaled_mm_config(h, p, cfg, split);
  w8a8_sm90_set_timeline(NULL, 0, 0);
  CK(cudaStreamSynchronize(st));
  if (s != W8A8_SUCCESS) return;
  CK(cudaMemcpy(hTL, dTL, tlbytes, cudaMemcpyDeviceToHost));
  const size_t cap = (size_t)tiles * ctas;
  double *mainv = malloc(sizeof(double) * cap), *epiv = malloc(sizeof(double) * cap),
         *gapv = malloc(sizeof(double) * cap), *spanv = malloc(sizeof(double) * ctas),
         *w0v = malloc(sizeof(double) * ctas), *wnv = malloc(sizeof(double) * cap);
  size_t nm = 0, ne = 0, ng = 0, nspan = 0, nw0 = 0, nwn = 0;
  for (int c = 0; c < ctas; c++) {
    const unsigned long long *t = hTL + (size_t)c * tiles * 4;
    int last = -1;
    for (int i = 0; i < tiles && t[4 * i] && t[4 * i + 3]; i++) {
      if (t[4 * i + 1]) { /* 0: a CTA without K-blocks (split-K over fewer K-blocks than CTAs): no main loop */
        const double w = (double)(t[4 * i + 1] - t[4 * i]);
        if (i == 0)
          w0v[nw0++] = w;
        else
          wnv[nwn++] = w;
        mainv[nm++] = (double)(t[4 * i + 2] - t[4 * i + 1]);
      }
      epiv[ne++] = (double)(t[4 * i + 3] - t[4 * i + 2]);
      if (i > 0) gapv[ng++] = (double)((long long)t[4 * i] - (long long)t[4 * (i - 1) + 3]); /* < 0: overlap */
      last = i;
    }
    if (last >= 0) spanv[nspan++] = (double)(t[4 * last + 3] - t[0]);
  }
  if (ne) {
    const int sp = split > 0 ? split : 1;
    const double kb = (double)((K + 127) / 128) / sp, mm = median_sorted(mainv, nm);
    const double sp_med = median_sorted(spanv, nspan), sp_max = spanv[nspan - 1]; /* sorted by then */
    /* mainv is sorted by median_sorted: its 10th / 90th percentiles show a bimodal main loop (e.g.
     * partial and full M tiles, or CTAs sharing an SM) that the median hides */
    const double p10 = nm ? mainv[nm / 10] : 0.0, p90 = nm ? mainv[(nm * 9) / 10] : 0.0;
    printf("#   timeline %s: %zu tiles on %zu CTAs; median cycles: first data %.0f (CTA's first tile, from the "
           "kernel's entry) / %.0f (later tiles), main loop %.0f (%.0f per K-block; p10 %.0f, p90 %.0f), epilogue "
           "%.0f, gap to the next tile %.0f; CTA span max %.0f, median %.0f\n",
           w8a8_sm90_config_name(cfg), ne, nspan, nw0 ? median_sorted(w0v, nw0) : 0.0,
           nwn ? median_sorted(wnv, nwn) : 0.0, mm, mm / kb, p10 / kb, p90 / kb, median_sorted(epiv, ne),
           ng ? median_sorted(gapv, ng) : 0.0, sp_max, sp_med);
  } else {
    printf("#   timeline %s: no stamps\n", w8a8_sm90_config_name(cfg));
  }
  free(w0v);
  free(wnv);
  free(mainv);
  free(epiv);
  free(gapv);
  free(spanv);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int all = 0, only_int8 = -1;
  char shape_filter[256] = "";
  const char *only_cfg = NULL; /* -c */
  int tl_on = 0;                /* -T */
  int64_t ms[32] = {1, 16, 17, 32, 64, 65, 128, 129, 256, 512, 1024, 2048, 4096, 8192, 16384};
  int nm = 15;
  int ks[8], nks = 0; /* -k: splits to time the heuristic's split-K configuration with */
  int rs[8], nrs = 0; /* -R: token-tail modes */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-a")) all = 1;
    else if (!strcmp(argv[i], "-d") && i + 1 < argc) only_int8 = !strcmp(argv[++i], "int8");
    else if (!strcmp(argv[i], "-s") && i + 1 < argc) snprintf(shape_filter, sizeof shape_filter, ",%s,", argv[++i]);
    else if (!strcmp(argv[i], "-c") && i + 1 < argc) {
      only_cfg = argv[++i];
      int names = 1;
      for (const char *c = only_cfg; *c; c++) names += *c == ',';
      if (names > MAX_CFGS || strlen(only_cfg) >= 2048) { /* refuse, rather than drop names silently */
        fprintf(stderr, "sm90_dev: -c takes at most %d names (2047 characters); got %d\n", MAX_CFGS, names);
        return 2;
      }
    }
    else if (!strcmp(argv[i], "-P")) {
      w8a8_dev_set_int("SM90_PAD_TOKENS", 1);
      printf("# -P: A's tensor map covers whole token tiles (rows past M read from the buffer, not filled by TMA)\n");
    } else if (!strcmp(argv[i], "-T")) {
      tl_on = w8a8_sm90_timeline_built();
      if (!tl_on)
        printf("# -T: the library's kernels have no timeline (build it with NVCCEXTRA=-DW8A8_SM90_TIMELINE; the "
               "sm90ab step does for runs with -T): timings only\n");
    }
    else if (!strcmp(argv[i], "-R") && i + 1 < argc) {
      for (char *t = strtok(argv[++i], ","); t && nrs < 8; t = strtok(NULL, ",")) rs[nrs++] = atoi(t);

    } else if (!strcmp(argv[i], "-k") && i + 1 < argc) {
      for (char *t = strtok(argv[++i], ","); t && nks < 8; t = strtok(NULL, ",")) ks[nks++] = atoi(t);
    } else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
      nm = 0;
      for (char *t = strtok(argv[++i], ","); t && nm < 32; t = strtok(NULL, ",")) ms[nm++] = atoll(t);
    }
  }
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CUDA, 0) != W8A8_SUCCESS) {
    printf("no CUDA device: %s\n", w8a8_last_error());
    return 1;
  }
  w8a8_handle_info info;
  w8a8_get_info(h, &info);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  w8a8_set_stream(h, st);
  printf("# sm90_dev on %s (%d SMs); CUDA graph of 20 calls, median of 7, weights rotated (>= 256 MB)\n", info.name,
         info.num_sms);
  printf("# %-6s %-15s %6s %6s %6s %-22s %5s %9s %8s %8s %6s %6s\n", "dtype", "shape", "M", "N", "K", "config", "split",
         "us", "TFLOP/s", "GB/s", "HBM%", "#wrong");

  const int64_t maxM = 16384, maxN = 28672, maxK = 14336;
  void *dA, *dOut, *dSa, *dSb;
  CK(cudaMalloc(&dA, (size_t)(maxM * maxK)));
  CK(cudaMalloc(&dOut, (size_t)(maxM * maxN * 2)));
  CK(cudaMalloc(&dSa, 4 * maxM));
  CK(cudaMalloc(&dSb, 4 * maxN));
  const size_t wpool = (size_t)512 << 20; /* rotated weight copies live in one 512 MB pool */
  uint8_t *dW;
  CK(cudaMalloc((void **)&dW, wpool));
  uint8_t *hA = malloc((size_t)(maxM * maxK)), *hW = malloc(wpool);
  float *hSa = malloc(4 * maxM), *hSb = malloc(4 * maxN);
  uint16_t *hOut = malloc((size_t)(maxM * maxN * 2));
  enum { TL_TILES = 128, TL_CTAS = 1024 };
  unsigned long long *dTL = NULL, *hTL = NULL;
  const size_t tlbytes = sizeof(unsigned long long) * 4 * TL_TILES * TL_CTAS;
  if (tl_on) {
    CK(cudaMalloc((void **)&dTL, tlbytes));
    hTL = malloc(tlbytes);
  }
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));

  for (int dt = 0; dt < 2; dt++) {
    const int int8 = dt == 0;
    if (only_int8 >= 0 && only_int8 != int8) continue;
    const w8a8_dtype in = int8 ? W8A8_DTYPE_INT8 : W8A8_DTYPE_FP8_E4M3;
    for (size_t i = 0; i < (size_t)(maxM * maxK); i++) hA[i] = rnd_byte(int8);
    for (size_t i = 0; i < wpool; i++) hW[i] = rnd_byte(int8);
    for (int i = 0; i < maxM; i++) hSa[i] = (0.5f + (float)(rnd() % 1000) / 1000.0f) * 1e-3f;
    for (int i = 0; i < maxN; i++) hSb[i] = (0.5f + (float)(rnd() % 1000) / 1000.0f) * 1e-2f;
    CK(cudaMemcpy(dA, hA, (size_t)(maxM * maxK), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dW, hW, wpool, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dSa, hSa, 4 * maxM, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dSb, hSb, 4 * maxN, cudaMemcpyHostToDevice));

    for (size_t si = 0; si < sizeof SHAPES / sizeof SHAPES[0]; si++) {
      const int64_t N = SHAPES[si].N, K = SHAPES[si].K;
      if (shape_filter[0]) {
        int hit = 0;
        char f[256];
        snprintf(f, sizeof f, "%s", shape_filter + 1);
        for (char *t = strtok(f, ","); t && !hit; t = strtok(NULL, ",")) hit = strstr(SHAPES[si].name, t) != NULL;
        if (!hit) continue;
      }
      const size_t wbytes = (size_t)(N * K);
      int ncopies = (int)(wpool / wbytes);
      if (ncopies > 20) ncopies = 20;
      for (int mi = 0; mi < nm; mi++) {
        const int64_t M = ms[mi];
        if (M > maxM) continue;
        w8a8_matrix A = w8a8_matrix_make(in, W8A8_ROW_MAJOR, M, K, K, dA);
        w8a8_matrix B = w8a8_matrix_make(in, W8A8_COL_MAJOR, K, N, K, dW);
        w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, dOut);
        w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, M, dSa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, N, dSb);
        w8a8_mm_problem p;
        if (w8a8_validate_scaled_mm("sm90_dev", h, &A, &B, &SA, &SB, NULL, NULL, &O, &p) != W8A8_SUCCESS) {
          printf("validate: %s\n", w8a8_last_error());
          return 1;
        }
        int hsplit = 0, hcfg = w8a8_sm90_plan(h, &p, &hsplit);
        /* -c NAME[,NAME...]: those configurations in turn as the '*' rows (the heuristic's split) */
        int lcfg[MAX_CFGS], lsplit[MAX_CFGS], nl = 0;
        if (only_cfg) {
          char f[2048];
          snprintf(f, sizeof f, "%s", only_cfg);
          for (char *t = strtok(f, ","); t && nl < MAX_CFGS; t = strtok(NULL, ",")) {
            if (!strcmp(t, "plan")) { /* the heuristic's own row among the forced ones */
              lcfg[nl] = hcfg;
              lsplit[nl++] = hsplit;
              continue;
            }
            int ci8 = -1, msplit = 1, c = w8a8_sm90_config_lookup(t, &ci8, NULL, &msplit);
            if (c < 0 || ci8 != int8) continue;
            lcfg[nl] = c;
            lsplit[nl++] = msplit <= 1 ? 1 : hsplit;
          }
          if (nl == 0) continue;
        } else {
          lcfg[0] = hcfg;
          lsplit[0] = hsplit;
          nl = 1;
        }
        for (int li = 0; li < nl; li++)
        for (int ci = -1; ci < (all && li == 0 ? w8a8_sm90_num_configs() : 0); ci++) {
          hcfg = lcfg[li];
          hsplit = lsplit[li];
          if (ci >= 0) {
            if (w8a8_sm90_config_int8(ci) != int8) continue;
            int bn = w8a8_sm90_config_swap_bn(ci);
            if (bn && (M > 2 * bn || (bn > 8 && M <= bn / 2))) continue; /* tile above M, or two below */
            if (!bn && M < 64) continue;
            if (ci == hcfg) continue;  /* already timed as the heuristic's row */
          }
          int cfg = ci < 0 ? hcfg : ci, split0 = ci < 0 ? hsplit : 0, max_split = 1;
          if (ci >= 0 && w8a8_sm90_config_swap_bn(ci)) split0 = hsplit; /* same split as the heuristic */
          w8a8_sm90_config_lookup(w8a8_sm90_config_name(cfg), NULL, NULL, &max_split);
          const int nk = nks && max_split > 1 ? nks : 1, nr = nrs ? nrs : 1;
          for (int kx = 0; kx < nk * nr; kx++) {
          int split = nk > 1 ? ks[kx / nr] : split0;
          if (nrs) w8a8_dev_set_int("SM90_TAIL", rs[kx % nr]);
          if (split > max_split) continue;
          /* correctness: one call on copy 0, 256 sampled outputs against the host */
          CK(cudaMemsetAsync(dOut, 0xff, (size_t)(M * N * 2), st));
          w8a8_status s = w8a8_sm90_scaled_mm_config(h, &p, cfg, split);
          if (s != W8A8_SUCCESS) {
            printf("%s: %s\n", w8a8_sm90_config_name(cfg), w8a8_last_error());
            continue;
          }
          CK(cudaStreamSynchronize(st));
          CK(cudaMemcpy(hOut, dOut, (size_t)(M * N * 2), cudaMemcpyDeviceToHost));
          int wrong = 0;
          for (int t = 0; t < 256; t++) {
            int64_t m = rnd() % M, n = rnd() % N;
            const uint8_t *a = hA + m * K, *b = hW + n * K;
            float v;
            double sabs = 0.0;
            if (int8) {
              int32_t acc = 0;
              for (int64_t k = 0; k < K; k++) acc += (int8_t)a[k] * (int8_t)b[k];
              v = (float)acc;
            } else {
              double acc = 0.0;
              for (int64_t k = 0; k < K; k++) {
                double x = (double)w8a8_fp8_to_f32(a[k]) * w8a8_fp8_to_f32(b[k]);
                acc += x;
                sabs += fabs(x);
              }
              v = (float)acc;
            }
            uint16_t want = w8a8_f32_to_bf16(w8a8_epilogue(v, hSa[m], hSb[n], NULL));
            uint16_t got = hOut[m * N + n];
            if (int8) {
              wrong += want != got;
            } else {
              double g = w8a8_bf16_to_f32(got), w = w8a8_bf16_to_f32(want);
              double tol = 2e-3 * sabs * hSa[m] * hSb[n] + fabs(w) * 0x1p-7; /* as tests/test_sm90.c */
              wrong += !(fabs(g - w) <= tol);
            }
          }
          /* timing: a graph of 20 calls over rotated weight copies */
          cudaGraph_t g;
          cudaGraphExec_t ge;
          CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
          for (int r = 0; r < 20; r++) {
            w8a8_mm_problem q = p;
            q.b = dW + (size_t)(r % ncopies) * wbytes;
            w8a8_sm90_scaled_mm_config(h, &q, cfg, split);
          }
          CK(cudaStreamEndCapture(st, &g));
          CK(cudaGraphInstantiate(&ge, g, 0));
          CK(cudaGraphLaunch(ge, st));
          CK(cudaStreamSynchronize(st));
          double tv[7];
          for (int rep = 0; rep < 7; rep++) {
            CK(cudaEventRecord(e0, st));
            CK(cudaGraphLaunch(ge, st));
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms_ = 0;
            CK(cudaEventElapsedTime(&ms_, e0, e1));
            tv[rep] = ms_ * 1e3 / 20.0;
          }
          CK(cudaGraphExecDestroy(ge));
          CK(cudaGraphDestroy(g));
          double us = median(tv, 7);
          double flops = 2.0 * (double)M * (double)N * (double)K;
          double bytes = (double)M * K + (double)N * K + 2.0 * M * N + 4.0 * (M + N);
          char cname[48];
          snprintf(cname, sizeof cname, "%s%s", ci < 0 ? "*" : "", w8a8_sm90_config_name(cfg));
          if (nrs) snprintf(cname + strlen(cname), sizeof cname - strlen(cname), "/t%d", rs[kx % nr]);
          printf("  %-6s %-15s %6lld %6lld %6lld %-22s %5d %9.2f %8.1f %8.1f %6.1f %6d\n", int8 ? "int8" : "fp8",
                 SHAPES[si].name, (long long)M, (long long)N, (long long)K, cname, split, us, flops / us * 1e-6,
                 bytes / us * 1e-3, bytes / us * 1e-3 / 4300.0 * 100.0, wrong);
          {
            /* a swap-AB (split-K cluster) grid is one CTA per (weight tile, token tile, split): flag
             * one that needs more than a wave (e.g. the one-CTA-per-SM deep configurations at the
             * split the heuristic chose for two CTAs per SM) */
            const int sbn = w8a8_sm90_config_swap_bn(cfg);
            if (sbn > 0) {
              const int wrows = strstr(w8a8_sm90_config_name(cfg), "_skinny_") ? 64 : 128; /* weight rows per tile */
              const long long ctas = ((N + wrows - 1) / wrows) * ((M + sbn - 1) / sbn) * (long long)(split > 0 ? split : 1);
              const int cap_ctas = w8a8_sm90_config_max_ctas(h, cfg, split);
              if (cap_ctas > 0 && ctas > cap_ctas)
                printf("#   %s split %d: %lld CTAs, at most %d at once: more than one wave\n", w8a8_sm90_config_name(cfg),
                       split, ctas, cap_ctas);
            }
          }
          if (tl_on) timeline_report(h, &p, cfg, split, st, dTL, hTL, tlbytes, TL_TILES, TL_CTAS, K);
          }
        }
      }
    }
  }
  w8a8_destroy(h);
  return 0;
}
