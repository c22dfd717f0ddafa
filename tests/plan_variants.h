/* plan_variants.h — the problems of the golden plan table, shared by its writer (bench/plan_dump.c, on a GPU)
 * and its reader (tests/test_sm90_plan.c, on the CPU), so that both plan exactly the same problems.
 * Variants: the problem fields and handle settings the planner reads (out dtype, int8 zero points, weights marked
 * constant, fp8 fast accumulation, rows arriving in W chunks as the fused all-gather's rank 0 sees them). */
#ifndef W8A8_TESTS_PLAN_VARIANTS_H
#define W8A8_TESTS_PLAN_VARIANTS_H

#include <string.h>

#include "core/internal.h"

typedef struct plan_variant {
  const char *name;
  int fp8_only, int8_only;
  w8a8_dtype out;
  int azp, wconst, fast, ready_w;
} plan_variant;

static const plan_variant PLAN_VARIANTS[] = {
    {"bf16", 0, 0, W8A8_DTYPE_BF16, 0, 0, 0, 0},   {"fp32", 0, 0, W8A8_DTYPE_FP32, 0, 0, 0, 0},
    {"azp", 0, 1, W8A8_DTYPE_BF16, 1, 0, 0, 0},    {"wconst", 0, 0, W8A8_DTYPE_BF16, 0, 1, 0, 0},
    {"fast", 1, 0, W8A8_DTYPE_BF16, 0, 0, 1, 0},   {"ready2", 0, 0, W8A8_DTYPE_BF16, 0, 0, 0, 2},
    {"ready4", 0, 0, W8A8_DTYPE_BF16, 0, 0, 0, 4}, {"ready8", 0, 0, W8A8_DTYPE_BF16, 0, 0, 0, 8},
};
#define PLAN_NUM_VARIANTS (sizeof PLAN_VARIANTS / sizeof *PLAN_VARIANTS)

/* The problem of variant v at M = m: contiguous operands at fake, suitably aligned addresses (the planner reads
 * alignments, never the memory), per-token x per-channel scales; *ready holds the chunks where v has them. */
static inline void plan_variant_problem(const plan_variant *v, int int8, int64_t N, int64_t K, int64_t m,
                                        w8a8_mm_problem *p, w8a8_mm_ready *ready) {
  static unsigned int flags[W8A8_MM_MAX_READY];
  const uintptr_t base = (uintptr_t)1 << 32;
  memset(p, 0, sizeof *p);
  p->M = m, p->N = N, p->K = K;
  p->in_dtype = int8 ? W8A8_DTYPE_INT8 : W8A8_DTYPE_FP8_E4M3;
  p->out_dtype = v->out;
  p->a = (const void *)base, p->lda = K;
  p->b = (const void *)(base << 4), p->ldb = K;
  p->out = (void *)(base << 8), p->ldo = N;
  p->scale_a = (const float *)(base << 12), p->scale_a_per_token = true;
  p->scale_b = (const float *)(base << 13), p->scale_b_per_channel = true;
  p->azp_mode = v->azp ? W8A8_AZP_PER_TOKEN : W8A8_AZP_NONE;
  if (v->azp) p->azp = (const int32_t *)(base << 14), p->azp_adj = (const int32_t *)(base << 15);
  if (v->ready_w) {
    memset(ready, 0, sizeof *ready);
    ready->flags = flags;
    ready->n = v->ready_w < m ? v->ready_w : (int)m;
    for (int c = 0; c < ready->n; c++) ready->end[c] = m * (c + 1) / ready->n;
    ready->first_row = 0;
    p->ready = ready;
  }
}

#endif
