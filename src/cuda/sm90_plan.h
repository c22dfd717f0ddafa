/* sm90_plan.h — the planner of the Hopper (sm_90a) GEMM: which configuration and split a problem runs with.
 * Plain C (sm90_plan.c), a function of the problem, the handle's settings and the GPU's capabilities, so that a
 * CPU test checks its every choice against plans dumped on a GPU (tests/test_sm90_plan.c, tests/golden/). The
 * launcher (sm90_gemm.cu) fills the capabilities from occupancy queries and runs the plan. Also the dispatcher's
 * rule for the CUDA-core kernel of the fewest tokens (gemv.cu), the other half of the decision on sm_90. */
#ifndef W8A8_SM90_PLAN_H
#define W8A8_SM90_PLAN_H

#include <stddef.h>

#include "../core/internal.h"
#include "sm90_configs.h"
#include "sm90_streamk.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A configuration's description (a row of sm90_configs.h with its flags decoded). */
typedef struct sm90_config {
  const char *name;
  int bn, stages, minb, flags; /* the row's columns */
  int int8;       /* operand dtype */
  int swap;       /* weights on wgmma's M side (the skinny kernel too) */
  int promote;    /* fp8 promotes every K-block (the skinny kernel's fp8 too) */
  int splitk;     /* K split over a cluster */
  int fast_accum; /* fp8 without promotion: less exact; planned only under W8A8_FP8_ACCUM_FAST */
  int mcast;      /* 2: clusters of two CTAs on neighbouring X tiles multicasting the Y tile (B); 3: the skinny
                     kernel's pairs, two CTAs on neighbouring token tiles multicasting the weight tile; 0 none */
  int tail;       /* the token tail */
  int sk;         /* stream-K */
  int hdb;        /* fp8 promotion in alternating halves */
  int bm;         /* rows on wgmma's M side per CTA: 0 = SM90_BM (the main kernel), SM90_SKINNY_BM (skinny) */
  int cw;         /* the skinny kernel's consumer warpgroups (1 or 2); 0 for the main kernel */
  int wr;         /* the skinny kernel's WR: 384 threads, setmaxnreg 40 / 232 */
} sm90_config;
W8A8_HIDDEN extern const sm90_config w8a8_sm90_configs[SM90_NUM_CONFIGS];
/* The index of the configuration called `name`, -1 if none. */
W8A8_HIDDEN int w8a8_sm90_config_find(const char *name);

typedef struct sm90_plan {
  int config; /* sm90_cfg_id; -1: none */
  int split;  /* CTAs per cluster splitting K (configurations with SM90_SPLITK), else 1 */
} sm90_plan;

/* The sm90 stream-K kernels' locks in the handle's workspace (w8a8_cuda_state.sk_locks): two per stream-K tile. */
#define W8A8_SK_LOCKS 16384

/* The handle's settings the planner reads. */
typedef struct sm90_plan_opts {
  int weights_constant; /* w8a8_set_weights_constant */
  int fp8_accum;        /* w8a8_set_fp8_accum: W8A8_FP8_ACCUM_* */
  const void *tuning;   /* the handle's tuning table (w8a8_tune_table) or NULL */
  int sk_locks;         /* the handle has the stream-K locks (w8a8_cuda_state.sk_locks) */
  size_t ws_bytes;      /* its workspace, which holds stream-K's partial tiles */
} sm90_plan_opts;

/* The GPU's capabilities the planner reads: its SMs, and how many clusters of `split` CTAs of each configuration
 * fit at once (the occupancy query, which counts shared memory, registers and the GPCs' cluster granularity). */
typedef struct sm90_caps {
  int num_sms;
  int device; /* for query */
  /* clusters[config][split] for split 1..SM90_MAX_SPLIT; 0: not known yet. NULL: none known. */
  int (*clusters)[SM90_MAX_SPLIT + 1];
  /* Asked where an entry is 0 (NULL: nobody to ask): the count (> 0), stored into the entry where it is final,
   * or 0 where the query failed (then w8a8_sm90_clusters estimates, and a later call asks again). */
  int (*query)(const struct sm90_caps *caps, int config, int split);
} sm90_caps;
/* Clusters of `split` CTAs of `config` that fit at once: the entry, else the query's answer, else an estimate
 * (num_sms * minb / split, 10% less for clusters of more than 2: GPC granularity). 1 for a split out of range. */
W8A8_HIDDEN int w8a8_sm90_clusters(const sm90_caps *caps, int config, int split);

/* The plan of a launch without a forced configuration: the tuning table's, else the heuristic's, then the
 * handle's settings and the twins (token tail, stream-K). config -1 where nothing takes p. */
W8A8_HIDDEN sm90_plan w8a8_sm90_choose_plan(const w8a8_mm_problem *p, const sm90_plan_opts *o, const sm90_caps *caps);

/* The token tail of configuration c over token_rows tokens: n boxes of `rows` rows load the partial token tile
 * (n = 0: the whole box, TMA filling the rows past the last token). mode: w8a8_sm90_tail_mode(). */
typedef struct tail_boxes {
  int n, rows;
} tail_boxes;
W8A8_HIDDEN tail_boxes w8a8_sm90_tail_plan(const sm90_config *c, int64_t token_rows, int mode, int fp8_box, int ready);
/* The token tail's mode (W8A8_DEV SM90_TAIL): 1 (default) the rule, 0 never, 2..4 test modes. */
W8A8_HIDDEN int w8a8_sm90_tail_mode(void);
/* fp8's token-tail box cap for the handle: 2 half the tile, 0 an eighth (with the weights-constant hint). */
W8A8_HIDDEN int w8a8_sm90_fp8_tail_box(const sm90_plan_opts *o);
/* Whether the boxes t of configuration c are the fold (one 3-D box of two 64-row blocks). */
W8A8_HIDDEN int w8a8_sm90_tail_is_fold(const sm90_config *c, tail_boxes t);
/* Whether the kernel's shift loads a partial last token tile of c (sm90_args.shift_x). */
W8A8_HIDDEN int w8a8_sm90_shift_applies(const sm90_config *c, int64_t token_rows, int ready);
/* bench/sm90_dev -P: A's tensor map covers whole token tiles (W8A8_DEV SM90_PAD_TOKENS). */
W8A8_HIDDEN int w8a8_sm90_pad_tokens(void);
/* Whether out and ldo allow 4-element stores along n (sm90_args.quad_store). */
W8A8_HIDDEN int w8a8_sm90_quad_store_ok(const w8a8_mm_problem *p);
/* Whether the stream-K configuration ci can run p with the handle's workspace and every CTA resident; *k: its
 * schedule. */
W8A8_HIDDEN int w8a8_sm90_sk_fits(const sm90_plan_opts *o, const sm90_caps *caps, int ci, const w8a8_mm_problem *p,
                                  sm90_sk_plan *k);
/* The plain tile of a stream-K configuration, -1 if ci is none. */
W8A8_HIDDEN int w8a8_sm90_sk_plain(int ci);

/* The block-scaled kernel's plan (sm90_blockwise.cu): normal tiles of 128 tokens x bn = 256 weights where those
 * tiles fill the GPU at least once, else 128 x 128 (force_bn 128 or 256: that width; 0 the rule), or at M <= 64
 * the swapped tiles of bn = 16, 32 or 64 tokens; split: CTAs per cluster, each a K range of one tile (1: persistent
 * CTAs). The split minimises waves x K-blocks per CTA, a split tile costing about two K-blocks more for its
 * reduction; force_split 1..8 sets it instead (at most the K-blocks; 0 the rule). */
typedef struct sm90_bw_plan {
  int swap, bn, split;
  int tiles; /* tiles of the plan's shape */
} sm90_bw_plan;
W8A8_HIDDEN sm90_bw_plan w8a8_sm90_bw_plan(int64_t M, int64_t N, int64_t K, int num_sms, int force_bn,
                                           int force_split);

/* The CUDA-core kernel (gemv.cu): whether it takes p (M <= 8 int8 / M = 1 fp8, no ready flags, 16-byte aligned
 * operands), and whether the dispatcher should run it there (W8A8_DEV GEMV and the measured rule; cc: the GPU's
 * compute capability, 90 for 9.0). */
W8A8_HIDDEN int w8a8_cuda_gemv_takes(const w8a8_mm_problem *p);
W8A8_HIDDEN int w8a8_cuda_gemv_wanted(const w8a8_mm_problem *p, int cc);

#ifdef __cplusplus
}
#endif
#endif
