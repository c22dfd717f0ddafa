/* plan_dump: the sm_90a planner's choice for every (variant, dtype, N, K, M) on this GPU, as a table.
 * The golden table a CPU-testable planner must reproduce: rows are run-length encoded over M (one row
 * per run of M with the same path, configuration and split). No kernel runs; the planner asks the GPU
 * only for its occupancy (clusters that fit per configuration).
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -I/usr/local/cuda/include bench/plan_dump.c \
 *       build/lib/libw8a8.a -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -lpthread -lm -fopenmp \
 *       -lstdc++ -lnccl $(mpicc --showme:link) -o build/bin/plan_dump
 *   build/bin/plan_dump [-m MAX_M] > plans.tsv
 *
 * tests/test_sm90_plan.c checks the plain-C planner (src/cuda/sm90_plan.c) against the table on a CPU; keep the two
 * files' variants and fake operands the same.
 *
 * Variants: the problem fields and handle settings the planner reads (src/cuda/sm90_plan.c):
 * out dtype (bf16 / fp32), int8 zero points, weights marked constant, fp8 fast accumulation, and rows
 * arriving in W chunks (the fused all-gather's ready flags, rank 0's view). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "w8a8.h"
#include "../tests/plan_variants.h"

int w8a8_sm90_plan(w8a8_handle *h, const w8a8_mm_problem *p, int *split);
const char *w8a8_sm90_config_name(int config);
int w8a8_cuda_gemv_wanted(const w8a8_mm_problem *p, int cc);
int w8a8_sm90_num_configs(void);
int w8a8_sm90_config_max_ctas(w8a8_handle *h, int config, int split);
int w8a8_sm90_config_swap_bn(int config);

typedef struct shape {
  const char *name;
  int64_t N, K;
} shape;
/* bench/torch_compare.py's suites, then shapes of other common models and odd sizes */
static const shape SHAPES[] = {
    {"8b-qkv", 6144, 4096},       {"8b-o", 4096, 4096},          {"8b-gateup", 28672, 4096},
    {"8b-down", 4096, 14336},     {"70b-qkv-tp4", 2560, 8192},   {"70b-o-tp4", 8192, 2048},
    {"70b-gateup-tp4", 14336, 8192}, {"70b-down-tp4", 8192, 7168}, {"qwen32b-gateup", 27648, 5120},
    {"dsv3-dense-down", 7168, 18432}, {"small-n", 512, 7168},    {"square-1k", 1024, 1024},
};


int main(int argc, char **argv) {
  int64_t max_m = 16384;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-m") && i + 1 < argc)
      max_m = atoll(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [-m MAX_M]\n", argv[0]);
      return 2;
    }
  }
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CUDA, 0) != W8A8_SUCCESS) {
    fprintf(stderr, "plan_dump: %s\n", w8a8_last_error());
    return 1;
  }
  struct cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const int cc = prop.major * 10 + prop.minor;
  printf("# plan_dump: device %s, cc %d.%d, %d SMs, %zu B shared memory per block (opt-in), L2 %d B\n", prop.name,
         prop.major, prop.minor, prop.multiProcessorCount, prop.sharedMemPerBlockOptin, prop.l2CacheSize);
  /* the device capabilities the planner reads: whole clusters of (configuration, split) that fit at once */
  printf("# cap\tconfig\tsplit\tclusters\n");
  for (int c = 0; c < w8a8_sm90_num_configs(); c++)
    for (int s = 1; s <= 8; s++) {
      const int ctas = w8a8_sm90_config_max_ctas(h, c, s);
      if (ctas > 0) printf("cap\t%s\t%d\t%d\n", w8a8_sm90_config_name(c), s, ctas / s);
    }
  printf("# variant\tdtype\tshape\tN\tK\tm_lo\tm_hi\tpath\tconfig\tsplit\n");
  /* fake, suitably aligned operand addresses: the planner reads alignments, never the memory */
  for (size_t v = 0; v < PLAN_NUM_VARIANTS; v++) {
    const plan_variant *var = &PLAN_VARIANTS[v];
    w8a8_set_weights_constant(h, var->wconst);
    w8a8_set_fp8_accum(h, var->fast ? W8A8_FP8_ACCUM_FAST : W8A8_FP8_ACCUM_PRECISE);
    for (int d = 0; d < 2; d++) {
      const int int8 = d == 0;
      if ((var->fp8_only && int8) || (var->int8_only && !int8)) continue;
      for (size_t s = 0; s < sizeof SHAPES / sizeof *SHAPES; s++) {
        const shape *sh = &SHAPES[s];
        char prev[96] = "";
        int64_t lo = 1;
        for (int64_t m = 1; m <= max_m + 1; m++) {
          char cur[96] = "";
          if (m <= max_m) {
            w8a8_mm_ready ready;
            w8a8_mm_problem p;
            plan_variant_problem(var, int8, sh->N, sh->K, m, &p, &ready);
            if (h->kernel == W8A8_KERNEL_AUTO && w8a8_cuda_gemv_wanted(&p, cc)) {
              snprintf(cur, sizeof cur, "gemv\t-\t1");
            } else {
              int split = 0;
              const int ci = w8a8_sm90_plan(h, &p, &split);
              snprintf(cur, sizeof cur, "sm90\t%s\t%d", ci >= 0 ? w8a8_sm90_config_name(ci) : "none", split);
            }
          }
          if (m > 1 && strcmp(cur, prev)) {
            printf("%s\t%s\t%s\t%lld\t%lld\t%lld\t%lld\t%s\n", var->name, int8 ? "int8" : "fp8", sh->name,
                   (long long)sh->N, (long long)sh->K, (long long)lo, (long long)(m - 1), prev);
            lo = m;
          }
          memcpy(prev, cur, sizeof prev);
        }
      }
    }
  }
  w8a8_destroy(h);
  return 0;
}
