/* bench_cuda_main.c — a stand-alone driver for tools/bench_cuda.c, used by scripts/gpu_session.sh
 * when the `w8a8 bench` CLI is not buildable in the tree being measured. Same rows, same JSON
 * fields as `w8a8 bench -o`.
 *   bench_cuda_main [-o FILE] [-m 1,16,...] [--tensor] [--no-baselines]
 * Build: cc -std=c11 -O2 -Iinclude -Isrc -Itools -DW8A8_HAVE_CUDA -I$CUDA/include scripts/bench_cuda_main.c
 *        tools/bench_cuda.c BUILD/lib/libw8a8.a -L$CUDA/lib64 -lcublasLt -lcudart_static -fopenmp -lm -ldl -lrt -lpthread */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

static FILE *json;
static char date[32];
static long wrong_rows;

static void emit(void *ctx, const bench_row *r) {
  (void)ctx;
  char vs[32] = "-";
  if (r->vs_baseline > 0) snprintf(vs, sizeof vs, "%.2fx", r->vs_baseline);
  printf("%-26s %-15s %6lld %6lld %6lld  %-8s %-13s  %10.2f %9.3f %9.1f %8s %7ld  %s\n", r->impl, r->shape,
         (long long)r->M, (long long)r->N, (long long)r->K, r->dtype, r->scales, r->us, r->tflops, r->gbps, vs,
         r->wrong, r->baseline && *r->baseline ? r->baseline : "-");
  fflush(stdout);
  if (r->wrong) wrong_rows++;
  if (json)
    fprintf(json,
            "{\"impl\":\"%s\",\"op\":\"%s\",\"dtype\":\"%s\",\"scales\":\"%s\",\"shape\":\"%s\",\"M\":%lld,\"N\":%lld,"
            "\"K\":%lld,\"us\":%.4g,\"tflops\":%.5g,\"gbps\":%.5g,\"vs_baseline\":%.4g,\"baseline\":\"%s\",\"wrong\":%ld,"
            "\"device\":\"%s\",\"date\":\"%s\"}\n",
            r->impl, r->op, r->dtype, r->scales, r->shape, (long long)r->M, (long long)r->N, (long long)r->K, r->us,
            r->tflops, r->gbps, r->vs_baseline, r->baseline ? r->baseline : "", r->wrong, r->device, date);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  static const bench_shape shapes[] = {{"8b-qkv", 6144, 4096},       {"8b-o", 4096, 4096},
                                       {"8b-gateup", 28672, 4096},   {"8b-down", 4096, 14336},
                                       {"70b-qkv-tp4", 2560, 8192},  {"70b-o-tp4", 8192, 2048},
                                       {"70b-gateup-tp4", 14336, 8192}, {"70b-down-tp4", 8192, 7168}};
  int64_t ms[32] = {1, 16, 64, 128, 512, 2048, 8192};
  int nm = 7, per_token = 1, baselines = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc) {
      json = fopen(argv[++i], "w");
    } else if (!strcmp(argv[i], "-m") && i + 1 < argc) {
      nm = 0;
      for (char *t = strtok(argv[++i], ","); t && nm < 32; t = strtok(NULL, ",")) ms[nm++] = atoll(t);
    } else if (!strcmp(argv[i], "--tensor")) {
      per_token = 0;
    } else if (!strcmp(argv[i], "--no-baselines")) {
      baselines = 0;
    }
  }
  time_t now = time(NULL);
  strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
  bench_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.Ms = ms;
  cfg.nM = nm;
  cfg.do_int8 = cfg.do_fp8 = 1;
  cfg.per_token = per_token;
  cfg.out_dtype = W8A8_DTYPE_BF16;
  cfg.warmup = 5;
  cfg.iters = 20;
  cfg.rotate = 4;
  cfg.baselines = baselines;
  printf("# %-24s %-15s %6s %6s %6s  %-8s %-13s  %10s %9s %9s %8s %7s  %s\n", "impl", "shape", "M", "N", "K", "dtype",
         "scales", "us", "TFLOP/s", "GB/s", "vs-base", "#wrong", "baseline");
  int fails = 0;
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    cfg.shapes = &shapes[i];
    cfg.nshapes = 1;
    fprintf(stderr, "[bench_cuda_main] %s\n", shapes[i].name);
    fails += bench_cuda(&cfg, emit, NULL) != 0;
  }
  printf("# module failures %d, rows with wrong results %ld: %s\n", fails, wrong_rows,
         fails || wrong_rows ? "FAILED" : "OK");
  if (json) fclose(json);
  return fails || wrong_rows;
}
