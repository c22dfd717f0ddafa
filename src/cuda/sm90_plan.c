/* sm90_plan.c — the planner of the Hopper (sm_90a) GEMM (see sm90_plan.h): plain C, no CUDA, so that every plan
 * is checked on a CPU (tests/test_sm90_plan.c against the plans dumped on a GPU, tests/golden/plans-*.tsv).
 *
 * The plan is an ordered list of rules, each measured against the plans before it (the rule's comment names
 * the results file): plan() picks a tile for the problem, then choose_plan's post-passes swap it for a twin
 * (multicast, fast accumulation, token tail, stream-K) where their rules say. The GPU enters only through
 * sm90_caps: the SMs and how many clusters of each configuration fit at once.
 *
 * The rules are constants: an A/B of a rule against its alternative compares two trees (scripts/steps/ab.sh).
 * The tests' hooks at the end of the file only reach kernel features the rules do not (tail modes, padded
 * tokens). */
#include "sm90_plan.h"

#include <string.h>

#include "../core/knobs.h"
#include "../core/tune.h"

/* ---- the configuration table ----------------------------------------------------------------------------- */

#define SM90_ROW(ID, NAME, BN, STAGES, MINB, F)                                                                   \
  {.name = NAME,                                                                                                  \
   .bn = BN,                                                                                                      \
   .stages = STAGES,                                                                                              \
   .minb = MINB,                                                                                                  \
   .flags = F,                                                                                                    \
   .int8 = ((F) & SM90_INT8) != 0,                                                                                \
   .swap = ((F) & (SM90_SWAP | SM90_SKINNY)) != 0,                                                                \
   .promote = ((F) & SM90_PROMOTE) != 0 || (((F) & SM90_SKINNY) && !((F) & SM90_INT8)),                           \
   .splitk = ((F) & SM90_SPLITK) != 0,                                                                            \
   .fast_accum = !((F) & SM90_INT8) && !((F) & SM90_PROMOTE) && !((F) & SM90_SKINNY),                             \
   .mcast = ((F) & SM90_MC2) ? (((F) & SM90_SKINNY) ? 3 : 2) : 0,                                                 \
   .tail = ((F) & SM90_TAIL) != 0,                                                                                \
   .sk = ((F) & SM90_STREAMK) != 0,                                                                               \
   .hdb = ((F) & SM90_HALVES_TWO_TEMPS) != 0,                                                                     \
   .bm = ((F) & SM90_SKINNY) ? SM90_SKINNY_BM : 0,                                                                \
   .cw = ((F) & SM90_SKINNY) ? (((F) & SM90_TWO_CONSUMERS) ? 2 : 1) : 0,                                          \
   .wr = ((F) & SM90_PRODUCER_WARPGROUP) != 0},
const sm90_config w8a8_sm90_configs[SM90_NUM_CONFIGS] = {SM90_CONFIGS(SM90_ROW)};
#undef SM90_ROW

#define CONFIGS w8a8_sm90_configs

int w8a8_sm90_config_find(const char *name) {
  for (int i = 0; i < SM90_NUM_CONFIGS; i++)
    if (!strcmp(CONFIGS[i].name, name)) return i;
  return -1;
}

/* The tuning-table loader's view of the table (src/core/tune.c): the index of `name`, its dtype, its swap token
 * tile (0 if not swapped) and the largest split it takes. */
int w8a8_sm90_config_lookup(const char *name, int *int8, int *swap_bn, int *max_split) {
  const int i = w8a8_sm90_config_find(name);
  if (i < 0) return -1;
  if (int8) *int8 = CONFIGS[i].int8;
  if (swap_bn) *swap_bn = CONFIGS[i].swap ? CONFIGS[i].bn : 0;
  if (max_split) *max_split = CONFIGS[i].splitk ? SM90_MAX_SPLIT : 1;
  return i;
}

/* The configuration whose row equals ci's but for its flags: those of ci with `add` set and `drop` cleared; -1 if
 * the table has none. The twins: the token tail's (add SM90_TAIL), stream-K's (add SM90_STREAMK). */
static int twin_of(int ci, int add, int drop) {
  if (ci < 0) return -1;
  const sm90_config *c = &CONFIGS[ci];
  const int flags = (c->flags | add) & ~drop;
  if (flags == c->flags) return -1;
  for (int i = 0; i < SM90_NUM_CONFIGS; i++)
    if (CONFIGS[i].flags == flags && CONFIGS[i].bn == c->bn && CONFIGS[i].stages == c->stages &&
        CONFIGS[i].minb == c->minb)
      return i;
  return -1;
}

/* The skinny configuration of `bn` tokens with the variant flags (SM90_MC2, SM90_TWO_CONSUMERS,
 * SM90_PRODUCER_WARPGROUP), -1 if none. */
static int skinny_config(int int8, int bn, int variant) {
  const int flags = (int8 ? SM90_INT8 : SM90_FP8) | SM90_SKINNY | variant;
  for (int i = 0; i < SM90_NUM_CONFIGS; i++)
    if (CONFIGS[i].flags == flags && CONFIGS[i].bn == bn) return i;
  return -1;
}

/* ---- the GPU's capabilities ------------------------------------------------------------------------------ */

int w8a8_sm90_clusters(const sm90_caps *caps, int ci, int split) {
  if (ci < 0 || ci >= SM90_NUM_CONFIGS || split < 1 || split > SM90_MAX_SPLIT) return 1;
  int v = caps->clusters ? __atomic_load_n(&caps->clusters[ci][split], __ATOMIC_ACQUIRE) : 0;
  if (v <= 0 && caps->query) v = caps->query(caps, ci, split);
  if (v > 0) return v;
  int n = caps->num_sms * CONFIGS[ci].minb / split;
  if (split > 2) n = n * 9 / 10;
  return n < 1 ? 1 : n;
}

static int kblocks_of(const w8a8_mm_problem *p) { return (int)((p->K + SM90_BK - 1) / SM90_BK); }
static int64_t weight_tiles(const w8a8_mm_problem *p) { return (p->N + SM90_BM - 1) / SM90_BM; }

/* The share of whole waves of num_sms CTAs that `tiles` tiles fill (1.0: no SM idle in the last wave). */
static double wave_share(int64_t tiles, int num_sms) {
  return (double)tiles / (double)(((tiles + num_sms - 1) / num_sms) * num_sms);
}

/* out and ldo allow 4-element (8- / 16-byte) stores along n: sm90_args.quad_store, which the lean swapped epilogue
 * needs (plan_single_swap and plan_pair_swap ask the same). */
int w8a8_sm90_quad_store_ok(const w8a8_mm_problem *p) {
  const uintptr_t esz = p->out_dtype == W8A8_DTYPE_FP32 ? 4 : 2;
  return (uintptr_t)p->out % (4 * esz) == 0 && p->ldo % 4 == 0;
}

/* ---- the rules ------------------------------------------------------------------------------------------- */

/* Small M (<= 64 tokens): the GEMM streams the weights once, so every SM must stream its share: swap-AB with the
 * token tile just above M (8, 16, 32, 64), and the largest split whose CTAs fit ONE per SM (tiles x split <= SMs)
 * with at least two K-blocks per CTA. A second CTA per SM adds cluster barriers and partial tiles but no bandwidth
 * (two CTAs on one SM share its load path; h200x2-sm90-ab-2026-11-29-s4.txt); it still runs where the weight
 * tiles alone exceed the SMs (split 1). plan() takes this where the deep plans decline. */
static sm90_plan plan_small(const w8a8_mm_problem *p, int num_sms) {
  static const int swap[2][4] = {
      {SM90_CFG_FP8_SWAP_N8, SM90_CFG_FP8_SWAP_N16, SM90_CFG_FP8_SWAP_N32, SM90_CFG_FP8_SWAP_N64},
      {SM90_CFG_INT8_SWAP_N8, SM90_CFG_INT8_SWAP_N16, SM90_CFG_INT8_SWAP_N32, SM90_CFG_INT8_SWAP_N64}};
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  sm90_plan pl = {swap[int8][p->M <= 8 ? 0 : p->M <= 16 ? 1 : p->M <= 32 ? 2 : 3], 1};
  const long long tiles = weight_tiles(p);
  const int kblocks = kblocks_of(p);
  for (int s = 2; s <= SM90_MAX_SPLIT; s *= 2) {
    if (kblocks / s < 2 || tiles * s > num_sms) break;
    pl.split = s;
  }
  return pl;
}

/* A deep swap-AB configuration ci over `clusters` tiles (weight tiles x token tiles): the largest
 * power-of-two split whose clusters all run at once with >= 4 K-blocks per CTA; config -1 if even
 * split 1 does not fit. */
static sm90_plan deep_split(const sm90_caps *caps, int ci, long long clusters, int kblocks) {
  sm90_plan pl = {-1, 1};
  if (ci < 0 || clusters > w8a8_sm90_clusters(caps, ci, 1)) return pl;
  pl.config = ci;
  for (int s = 2; s <= SM90_MAX_SPLIT; s *= 2) {
    if (kblocks / s < 4 || clusters > w8a8_sm90_clusters(caps, ci, s)) break;
    pl.split = s;
  }
  return pl;
}

/* plan_deep3: at 33..64 tokens, the n64 deep tile at split 3 where deep_split's power of two came out 2 (more
 * than 30 weight tiles: clusters of 4 do not all fit), the weight tiles x 3 CTAs all run at once and K has >= 64
 * K-blocks: there the per-SM intake, not HBM, bounds 64 CTAs. fp8 8b-down 1.03-1.09x, mixed with 32 K-blocks
 * (h200-session22-2026-12-01.txt). Returns config -1 where it does not apply. */
static sm90_plan plan_deep3(const sm90_caps *caps, sm90_plan a, long long tiles, int kblocks) {
  sm90_plan none = {-1, 1};
  if (a.config < 0 || a.split != 2 || kblocks < 64) return none;
  if (tiles > w8a8_sm90_clusters(caps, a.config, 3)) return none;
  a.split = 3;
  return a;
}

/* 17..64 tokens: swap-AB with ONE token tile (n32 up to 32 tokens, n64 above; or two n32 tiles), the deep ring
 * (one CTA per SM) and deep_split's split (the occupancy query: clusters of 4 fit only 120 CTAs on the H200). Only
 * where the weight tiles alone fit at once, and above 32 tokens only with >= 32 K-blocks (70b-o-tp4, K = 2048, keeps
 * the 128 x 128 tile). Its pick was within 9% of the fastest at every row of 17..64 tokens it takes, 1.01-1.47x over
 * the plans before it (h200-sm90-small-m-sweep-2026-11-30.txt). Returns config -1 where it does not apply. */
static sm90_plan plan_deep(const w8a8_mm_problem *p, const sm90_caps *caps) {
  sm90_plan none = {-1, 1};
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const long long tiles = weight_tiles(p);
  const int kblocks = kblocks_of(p);
  const int n32 = int8 ? SM90_CFG_INT8_SWAP_N32_DEEP : SM90_CFG_FP8_SWAP_N32_DEEP;
  if (p->M <= 32) return deep_split(caps, n32, tiles, kblocks);
  if (kblocks < 32) return none;
  const sm90_plan a = deep_split(caps, int8 ? SM90_CFG_INT8_SWAP_N64_DEEP : SM90_CFG_FP8_SWAP_N64_DEEP, tiles, kblocks);
  /* Before anything else: n64 at split 3 (plan_deep3). Then two n32 token tiles instead where that doubles the
   * CTAs (each weight tile's second read hits L2), fp8 only: in the A/B int8's n64 stayed ahead (1.00-1.09x),
   * fp8's lost on most rows (h200-sm90-session15-2026-11-30.txt). */
  const sm90_plan a3 = plan_deep3(caps, a, tiles, kblocks);
  if (a3.config >= 0) return a3;
  if (int8) return a;
  const sm90_plan b = deep_split(caps, n32, 2 * tiles, kblocks);
  if (a.config >= 0 && b.config >= 0 && b.split >= a.split) return b; /* 2 x tiles x b.split CTAs >= 2 x n64's */
  return a;
}

/* 1..16 tokens on the deep ring: the n8 / n16 deep configurations at deep_split's split, where plan_small's plain
 * tiles split without the occupancy query (32 clusters of 4 where 30 fit): fp8 1.03x geomean, int8 1.02x; the n32
 * deep tile there lost (h200-session21-2026-12-01.txt). Where deep_split declines (more weight tiles than fit at
 * once), plan_small. */
static sm90_plan plan_deep16(const w8a8_mm_problem *p, const sm90_caps *caps) {
  static const int deep[2][2] = {{SM90_CFG_FP8_SWAP_N8_DEEP, SM90_CFG_FP8_SWAP_N16_DEEP},
                                 {SM90_CFG_INT8_SWAP_N8_DEEP, SM90_CFG_INT8_SWAP_N16_DEEP}};
  const int ci = deep[p->in_dtype == W8A8_DTYPE_INT8][p->M <= 8 ? 0 : 1];
  return deep_split(caps, ci, weight_tiles(p), kblocks_of(p));
}

/* 33..SWAP64_MAX tokens where the weight tiles alone exceed the SMs (plan_deep declines; 8b-gateup: 224 tiles):
 * plan_small's n64 tile at split 1 (two CTAs per SM) instead of the 128 x 256 tile with most of its token rows out
 * of bounds. fp8 1.11x at 33 tokens, 1.00x at 56, 0.96x at 64 (h200-sm90-session15-2026-11-30.txt): hence 40. Kept
 * to what was measured: >= 16 K-blocks, at most 2 x SMs weight tiles, no ready flags. */
#define SWAP64_MAX 40

/* 65..80 tokens on the n64 deep ring with two token tiles (the second holds 1..16 tokens, through the token tail
 * where tail_plan takes it), deep_split over twice the weight tiles: no 64 -> 65 step, where the 128-row tile's
 * token box has 48..63 rows filled by TMA. With >= 32 K-blocks, where split 2 runs on >= 70% of the SMs
 * (1.09-1.19x, h200-sm90-rules-2026-11-30.txt) or split 1 on >= 90% up to 72 tokens (1.03-1.10x,
 * h200-sm90-session13-2026-11-30.txt); fp8 only to 72 tokens (its tail box holds at most 8 rows: 0.88x at 80).
 * Elsewhere it lost or was mixed (h200-sm90-tail-twins-2026-11-30.txt). */
static sm90_plan plan_deep80(const w8a8_mm_problem *p, const sm90_caps *caps) {
  sm90_plan none = {-1, 1};
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  if (p->M <= 64 || p->M > (int8 ? 80 : 72)) return none;
  const int kblocks = kblocks_of(p);
  if (kblocks < 32) return none;
  const long long tiles = weight_tiles(p);
  const int ci = int8 ? SM90_CFG_INT8_SWAP_N64_DEEP_TAIL : SM90_CFG_FP8_SWAP_N64_DEEP_TAIL;
  const sm90_plan pl = deep_split(caps, ci, 2 * tiles, kblocks);
  const long long ctas = 2 * tiles * pl.split;
  const int split2 = pl.split == 2 && ctas * 10 >= 7LL * caps->num_sms;
  const int split1 = pl.split == 1 && ctas * 10 >= 9LL * caps->num_sms && p->M <= 72;
  return split2 || split1 ? pl : none;
}

/* 97..192 tokens with few weight tiles and a long K: the n64 deep ring over two or three token tiles at
 * deep_split's split, taken where that is exactly 2. With 128-row tiles such a problem runs on few CTAs, each bound
 * by its own MMA rate (70b-qkv-tp4: 40 CTAs); three n64 token tiles x 20 x split 2 put 120 CTAs on it: 1.15-1.59x
 * at 129..192 tokens (h200-sm90-deep256-2026-11-30.txt). Kept to what was measured: >= 32 K-blocks, no ready flags.
 * At 97..128 tokens (two n64 token tiles) fp8 1.04-1.05x geomean; int8 only with >= 64 K-blocks (with 32 its
 * 128 x 64 tile stays faster; h200-session21-2026-12-01.txt). */
static sm90_plan plan_deep256(const w8a8_mm_problem *p, const sm90_caps *caps) {
  sm90_plan none = {-1, 1};
  if (p->M <= 96 || p->M > 192) return none;
  const int kblocks = kblocks_of(p);
  if (kblocks < 32 || (p->M <= 128 && p->in_dtype == W8A8_DTYPE_INT8 && kblocks < 64)) return none;
  const long long tiles = weight_tiles(p), token_tiles = (p->M + 63) / 64;
  const int ci = p->in_dtype == W8A8_DTYPE_INT8 ? SM90_CFG_INT8_SWAP_N64_DEEP : SM90_CFG_FP8_SWAP_N64_DEEP;
  const sm90_plan pl = deep_split(caps, ci, token_tiles * tiles, kblocks);
  return pl.split == 2 ? pl : none;
}

/* 65..96 tokens (one token tile) and 129..192 (two) on the swap-AB deep ring with n80 / n96 token tiles, where
 * deep_split's split is >= 2, with >= 32 K-blocks (>= 56 at 81..96 tokens) and no ready flags; at 129..192 after
 * plan_deep256, so it replaces the unswapped 128-row token tiles only. 1.03-1.32x where the split is >= 2; at split
 * 1, at K = 2048 and at 81..96 tokens with K = 4096 it lost (h200-session18-2026-11-30.txt). */
static sm90_plan plan_wide_swap(const w8a8_mm_problem *p, const sm90_caps *caps) {
  sm90_plan none = {-1, 1};
  if (p->M <= 64 || (p->M > 96 && p->M <= 128) || p->M > 192) return none;
  const int kblocks = kblocks_of(p);
  if (kblocks < (p->M > 80 && p->M <= 96 ? 56 : 32)) return none;
  const long long token_tiles = p->M <= 96 ? 1 : 2, rows = (p->M + token_tiles - 1) / token_tiles;
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int ci = rows <= 80 ? (int8 ? SM90_CFG_INT8_SWAP_N80_DEEP : SM90_CFG_FP8_SWAP_N80_DEEP)
                            : (int8 ? SM90_CFG_INT8_SWAP_N96_DEEP : SM90_CFG_FP8_SWAP_N96_DEEP);
  const sm90_plan pl = deep_split(caps, ci, token_tiles * weight_tiles(p), kblocks);
  return pl.config >= 0 && pl.split >= 2 ? pl : none;
}

/* ONE swapped token tile of 160 at 129..160 tokens (int8 at 129..144: 144), as cuBLASLt's 128x136..128x160 tiles
 * there: a persistent grid, no split-K, the lean swapped epilogue, the token-tail twin through apply_tail where the
 * tile is partial. Where 128-row token tiles need two (the second nearly empty) and the weight tiles fill the SMs:
 * N / 128 in [3/4 SMs, 2 SMs], >= 32 K-blocks, no ready flags, the lean epilogue's conditions (no int8 zero point,
 * quad_store_ok). fp8 1.07x, int8 1.04x geomean; on 20..64 weight tiles it lost (h200-session19-2026-11-30.txt).
 * Unmeasured under W8A8_FP8_ACCUM_FAST. */
static sm90_plan plan_single_swap(const w8a8_mm_problem *p, int num_sms) {
  sm90_plan none = {-1, 1};
  if (p->M <= SM90_BM || p->M > 160) return none;
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int64_t wtiles = weight_tiles(p);
  if ((int8 && p->azp_mode != W8A8_AZP_NONE) || !w8a8_sm90_quad_store_ok(p) || 4 * wtiles < 3 * (int64_t)num_sms ||
      wtiles > 2 * (int64_t)num_sms || kblocks_of(p) < 32)
    return none;
  /* (int8 at 129..144 tokens: the n144 tile, h200-session28-2026-12-02.txt) */
  sm90_plan pl = {
      int8 ? (p->M <= 144 ? SM90_CFG_INT8_SWAP_N144_PS : SM90_CFG_INT8_SWAP_N160_PS) : SM90_CFG_FP8_SWAP_N160_PS, 1};
  return pl;
}

/* TWO swapped token tiles of 80 (129..160 tokens) or 96 (161..192) without split-K, fp8 only (persistent, the lean
 * swapped epilogue), where the rules above did not apply: 2 x N / 128 <= SMs (one wave), >= 32 K-blocks, no ready
 * flags, quad_store_ok. fp8's promotion costs the 128 x 128 tile more than the swapped tile's extra epilogue: 1.04x
 * geomean, up to 1.20x; int8 lost everywhere (h200-session20-2026-11-30.txt). Unmeasured under
 * W8A8_FP8_ACCUM_FAST. */
static sm90_plan plan_pair_swap(const w8a8_mm_problem *p, int num_sms) {
  sm90_plan none = {-1, 1};
  if (p->in_dtype == W8A8_DTYPE_INT8 || p->M <= SM90_BM || p->M > 192) return none;
  const int64_t wtiles = weight_tiles(p);
  if (!w8a8_sm90_quad_store_ok(p) || 2 * wtiles > (int64_t)num_sms || kblocks_of(p) < 32) return none;
  sm90_plan pl = {p->M <= 160 ? SM90_CFG_FP8_SWAP_N80_PS : SM90_CFG_FP8_SWAP_N96_PS, 1};
  return pl;
}

/* The fold's token ceiling on the 128 x 64 tile (fold_measured): int8 80, fp8 72. */
static int fold_max_tokens(int int8) { return int8 ? 80 : 72; }

/* The skinny tiles (plan_skinny): 64-row weight tiles, no split-K, as cuBLASLt runs small M; never with ready flags
 * (the kernel does not wait).
 * - The single token tile, at 1..80 tokens and fp8's 129..144, where the 64-row weight tiles alone fill 0.9..1 of
 *   a wave, or at least 0.45 of one with <= 32 K-blocks (129..144: at least 0.7): 1.17-1.21x on 70b-o-tp4
 *   (h200-session22-2026-12-01.txt), fp8 1.06-1.10x and int8 1.02-1.05x on the wider range
 *   (h200-session23-2026-12-01.txt). The tile is the smallest that holds M: fp8 n8 up to 8 tokens (n16 ran 3-10%
 *   slower than n24 at 9..15), int8 n16 up to 16 (n8 / n16 / n24 within 2%), no n40 / n72 / n136 for int8 (wgmma
 *   s8: N % 16 == 0 above 32). fp8's tiles of 24..48 run with two consumer warpgroups (the _k2 twins, 1.02-1.05x);
 *   the other twins ran even or slower (h200-session26-2026-12-01.txt).
 * - The pairs (_mc2: two token tiles of one weight tile, the weights multicast, as cuBLASLt on 8b-o): where the
 *   weight tiles fill at most half of the SMs and twice them >= 0.9 of a wave, at 33..128 tokens with <= 32
 *   K-blocks and at 129..144 with any K; the pair's tile the smallest that holds half of M (a partial second tile
 *   shifted back over real rows: sm90_skinny_row0). 8b-o fp8 1.02-1.14x from 48 tokens; below 33 tokens, and on
 *   8b-down's 112 K-blocks below 129, they lost (h200-session24-2026-12-01.txt).
 * - The wide fp8 tiles (two consumer warpgroups) where a few token tiles of them fill a wave: three token tiles on
 *   the weight tiles of 0.9..1 of a third of the SMs (70b-qkv-tp4's 40) at 129..144 tokens (n48) and 193..480 /
 *   513..528; two on 0.9..1 of half (8b-o's 64) at 145..192 tokens with <= 32 K-blocks and at 193..352 with >= 64
 *   (8b-down). 1.04-1.21x (h200-session26-2026-12-01.txt); from n112 up the _k2r twins, and the ranges past 384
 *   tokens, up to 1.32x more (h200-session27-2026-12-02.txt). */

/* The smallest token tile of `tiles` (ascending, n of them) that holds m tokens; 0 if none does. */
static int smallest_tile(const int *tiles, int n, int64_t m) {
  for (int i = 0; i < n; i++)
    if (m <= tiles[i]) return tiles[i];
  return 0;
}
static sm90_plan plan_skinny(const w8a8_mm_problem *p, int num_sms) {
  static const int fp8_one[] = {8, 24, 32, 40, 48, 64, 72, 80, 136, 144}, int8_one[] = {16, 24, 32, 48, 64, 80};
  static const int fp8_pair[] = {24, 32, 48, 64, 72}, int8_pair[] = {32, 48, 64, 80};
  static const int wide3[] = {88, 96, 112, 128, 144, 160, 176}, wide2[] = {88, 96};
  static const int wide2r[] = {112, 128, 144, 160, 176};
#define SKINNY_TILE(L, M) smallest_tile(L, (int)(sizeof L / sizeof L[0]), M)
  sm90_plan pl = {-1, 1};
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int64_t wt = (p->N + SM90_SKINNY_BM - 1) / SM90_SKINNY_BM;
  const int64_t kblocks = kblocks_of(p);
  if (!int8 && p->M >= 129 && p->M <= 528) {
    int wide = 0;
    if (3 * wt <= num_sms && 30 * wt >= 9LL * num_sms) { /* three token tiles fill 0.9..1 of a wave */
      if (p->M <= 144)
        wide = 48;
      else if (p->M > 192 && (p->M <= 480 || p->M > 512)) /* (481..512: the 128 x 128 tile) */
        wide = SKINNY_TILE(wide3, (p->M + 2) / 3);
    } else if (2 * wt <= num_sms && 20 * wt >= 9LL * num_sms) { /* two fill 0.9..1 of a wave */
      if (kblocks <= 32 && p->M >= 145 && p->M <= 192)
        wide = SKINNY_TILE(wide2, (p->M + 1) / 2);
      else if (kblocks >= 64 && p->M >= 193 && p->M <= 352)
        wide = SKINNY_TILE(wide2r, (p->M + 1) / 2);
    }
    if (wide) { /* the _k2 tile, its _k2r twin from n112 */
      pl.config = skinny_config(0, wide, SM90_TWO_CONSUMERS | (wide >= 112 ? SM90_PRODUCER_WARPGROUP : 0));
      return pl;
    }
  }
  if (p->M < 1 || p->M > 144) return pl;
  int bn = 0, pair = 0;
  if (p->M >= 33 && 2 * wt <= num_sms && 20 * wt >= 9LL * num_sms && (kblocks <= 32 || p->M > 128)) {
    bn = int8 ? SKINNY_TILE(int8_pair, (p->M + 1) / 2) : SKINNY_TILE(fp8_pair, (p->M + 1) / 2);
    pair = SM90_MC2;
  }
  if (!bn) {
    const int full = wt * 10 >= 9LL * num_sms; /* the weight tiles alone fill >= 0.9 of one wave */
    if (wt > num_sms || (p->M > 80 && p->M <= 128) || (p->M > 128 && int8)) return pl;
    if (!(full || (wt * 20 >= 9LL * num_sms && kblocks <= 32))) return pl; /* >= 0.45 of a wave */
    if (p->M > 128 && wt * 10 < 7LL * num_sms) return pl;                  /* 129..144: >= 0.7 */
    bn = int8 ? SKINNY_TILE(int8_one, p->M) : SKINNY_TILE(fp8_one, p->M);
  }
#undef SKINNY_TILE
  /* fp8's single tiles of 24..48 tokens: the _k2 twin */
  pl.config = skinny_config(int8, bn, pair | (!int8 && !pair && bn >= 24 && bn <= 48 ? SM90_TWO_CONSUMERS : 0));
  return pl;
}

/* The 128 x 128 tile with K split over a cluster until one wave fills the SMs, where few weight tiles meet a long
 * K: up to 128 tokens on <= 32 weight tiles with >= 64 K-blocks (8b-down 42.9 -> 33.8 us; with a shorter K the
 * split's fixed cost lost, h200-torch-compare-2026-11-29-v3.md), and at 129..256 tokens on <= 64 weight tiles with
 * >= 96 K-blocks (8b-down 1.03-1.34x; with 64 K-blocks it lost, h200-sm90-tail-twins-2026-11-30.txt). The partial
 * token tile then goes to the twin (apply_tail). */
static sm90_plan rule_split_k(const w8a8_mm_problem *p, const sm90_caps *caps) {
  const sm90_plan none = {-1, 1};
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int64_t tiles128 = ((p->M + 127) / 128) * ((p->N + 127) / 128);
  const int kblocks_all = kblocks_of(p);
  const int split256 = p->M > 128 && p->M <= 256 && tiles128 <= 64 && kblocks_all >= 96;
  if (!((p->M <= 128 && tiles128 <= 32) || split256) || kblocks_all < 64) return none;
  sm90_plan pl = {int8 ? SM90_CFG_INT8_128X128_SPLITK : SM90_CFG_FP8_128X128_PROMOTE_SPLITK, 1};
  for (int s = 2; s <= SM90_MAX_SPLIT; s++) {
    if (kblocks_all / s < 4) break; /* keep each CTA's share of K worth its fixed cost */
    long long slots = (long long)w8a8_sm90_clusters(caps, pl.config, s) * s;
    if (tiles128 * s > slots) break; /* one wave */
    pl.split = s;
  }
  return pl.split > 1 ? pl : none;
}

/* 89..128 tokens (one 128-row tile, at most 39 rows out of bounds) with at most SMs / 2 weight tiles of 128: the
 * 128 x 64 tile (twice the CTAs, still one wave), with K <= 4096 (1.3x at 128 tokens,
 * h200-sm90-timeline-2026-11-29.txt) and from 104 tokens with any K (70b-down-tp4 1.12-1.19x at 104..128; it lost
 * at 96..101, h200-sm90-session13-2026-11-30.txt). Unmeasured at 89..95 tokens, and with K above 4096 where the
 * split-K rule above declined. */
static sm90_plan rule_narrow128(const w8a8_mm_problem *p, const sm90_caps *caps) {
  const sm90_plan none = {-1, 1}, narrow = {p->in_dtype == W8A8_DTYPE_INT8 ? SM90_CFG_INT8_128X64
                                                                         : SM90_CFG_FP8_128X64_PROMOTE, 1};
  const int ok = p->M > 88 && p->M <= 128 && 2 * ((p->N + 127) / 128) <= caps->num_sms &&
                 (kblocks_of(p) <= 32 || p->M >= 104);
  return ok ? narrow : none;
}

/* 193..256 tokens: the same 128 x 64 tile where its two token tiles still fit one wave (2 x N / 64 <= SMs) with
 * <= 32 K-blocks, where the second token tile holds more than 64 rows: 1.21-1.24x at 256 tokens, even at 192,
 * 0.95-0.99x at 129 (h200-sm90-rules-2026-11-30.txt). */
static sm90_plan rule_narrow256(const w8a8_mm_problem *p, const sm90_caps *caps) {
  const sm90_plan none = {-1, 1}, narrow = {p->in_dtype == W8A8_DTYPE_INT8 ? SM90_CFG_INT8_128X64
                                                                         : SM90_CFG_FP8_128X64_PROMOTE, 1};
  const int ok = p->M > 192 && p->M <= 256 && 2 * ((p->N + 63) / 64) <= caps->num_sms && kblocks_of(p) <= 32;
  return ok ? narrow : none;
}

/* 128 x 256 unless the 128 x 128 tile fills the SMs clearly better (few tiles); fp8 too (fp8_128x256_promote):
 * 1.08-1.23x where this rule picks it, slower where it keeps the 128 x 128 tile (h200x2-sm90-ab-2026-11-29-s4.txt). */
/* fp8 always promotes (PRECISE): QGMMA's own accumulation over the whole K range measured an error of 1.1e-3 of
 * sum|a||b| at K = 429 on random e4m3 data (docs/HOPPER.md), growing with K, where promotion keeps it to one
 * 128-deep block's truncation. fp8_128x256 (fast accumulation) is what W8A8_FP8_ACCUM_FAST maps the wide tile to
 * (apply_fp8_accum). */
static sm90_plan rule_wave_fill(const w8a8_mm_problem *p, const sm90_caps *caps) {
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int64_t tm = (p->M + 127) / 128;
  const int wide = wave_share(tm * ((p->N + 255) / 256), caps->num_sms) >=
                   wave_share(tm * ((p->N + 127) / 128), caps->num_sms) * 0.9;
  const sm90_plan pl = {int8 ? (wide ? SM90_CFG_INT8_128X256 : SM90_CFG_INT8_128X128)
                             : (wide ? SM90_CFG_FP8_128X256_PROMOTE : SM90_CFG_FP8_128X128_PROMOTE), 1};
  return pl;
}

/* WIDE192: the 128 x 192 tile where its share of the SMs' work, counting the last column tile's empty columns,
 * beats the pick above's by 10% (70b-qkv-tp4 at 1024 tokens: 0.81 of one wave against 0.61): 1.15-1.29x there
 * (h200-sm90-session16-2026-11-30.txt). Not with ready flags. fp8's tile promotes its halves through alternating
 * temporaries (fp8_128x192_promote_hdb: 1.04-1.08x over plain halves, h200-session21-2026-12-01.txt). */
/* WIDE160: the 128 x 160 tile likewise where its share beats the pick so far by 10%, on at most two waves of
 * its tiles (at 13 waves it lost, 70b-gateup-tp4 2400 tokens): int8 1.12-1.18x, fp8 1.04-1.06x at 70b-qkv-tp4
 * 1024 / 2048 tokens (h200-session28-2026-12-02.txt), 1.02-1.15x on other N (h200-session29-2026-12-02.txt). */
static sm90_plan rule_wide_n(const w8a8_mm_problem *p, const sm90_caps *caps) {
  const sm90_plan none = {-1, 1};
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8, num_sms = caps->num_sms;
  const int64_t tm = (p->M + 127) / 128;
  const double e256 = wave_share(tm * ((p->N + 255) / 256), num_sms), e128 = wave_share(tm * ((p->N + 127) / 128), num_sms);
  const int wide = e256 >= e128 * 0.9; /* rule_wave_fill's pick, its share counting the empty columns */
  const int64_t wn = wide ? 256 : 128, nw = (p->N + wn - 1) / wn;
  const double ew = (wide ? e256 : e128) * ((double)p->N / (double)(nw * wn));
  const int64_t n192 = (p->N + 191) / 192, t192 = tm * n192;
  const double e192 = wave_share(t192, num_sms) * ((double)p->N / (double)(n192 * 192));
  const int64_t n160 = (p->N + 159) / 160, t160 = tm * n160;
  const double e160 = wave_share(t160, num_sms) * ((double)p->N / (double)(n160 * 160));
  if (t160 <= 2 * (int64_t)num_sms && e160 > (e192 > ew * 1.1 ? e192 : ew) * 1.1) {
    const sm90_plan pl = {int8 ? SM90_CFG_INT8_128X160 : SM90_CFG_FP8_128X160_PROMOTE_HDB, 1};
    return pl;
  }
  if (e192 > ew * 1.1) {
    const sm90_plan pl = {int8 ? SM90_CFG_INT8_128X192 : SM90_CFG_FP8_128X192_PROMOTE_HDB, 1};
    return pl;
  }
  return none;
}

/* ---- the decision ------------------------------------------------------------------------------------------ */

/* The rules' M ranges, where their functions above leave them to the order. */
static sm90_plan rule_skinny(const w8a8_mm_problem *p, const sm90_caps *caps) {
  const sm90_plan none = {-1, 1};
  return p->M <= 528 ? plan_skinny(p, caps->num_sms) : none; /* (above 144 tokens only the wide fp8 tiles) */
}
static sm90_plan rule_tiny(const w8a8_mm_problem *p, const sm90_caps *caps) { /* 1..16: deep, else plain */
  const sm90_plan none = {-1, 1};
  if (p->M > 16) return none;
  const sm90_plan pl = plan_deep16(p, caps);
  return pl.config >= 0 ? pl : plan_small(p, caps->num_sms);
}
static sm90_plan rule_deep(const w8a8_mm_problem *p, const sm90_caps *caps) {
  const sm90_plan none = {-1, 1};
  return p->M > 16 && p->M <= 64 ? plan_deep(p, caps) : none;
}
static sm90_plan rule_small(const w8a8_mm_problem *p, const sm90_caps *caps) {
  const sm90_plan none = {-1, 1};
  return p->M > 16 && p->M <= 32 ? plan_small(p, caps->num_sms) : none;
}
static sm90_plan rule_swap64(const w8a8_mm_problem *p, const sm90_caps *caps) {
  const sm90_plan none = {-1, 1};
  const int64_t wt = weight_tiles(p);
  const int ok = p->M > 32 && p->M <= SWAP64_MAX && kblocks_of(p) >= 16 && wt > caps->num_sms &&
                 wt <= 2 * (int64_t)caps->num_sms;
  return ok ? plan_small(p, caps->num_sms) : none;
}
static sm90_plan rule_wide_swap1(const w8a8_mm_problem *p, const sm90_caps *caps) { /* one token tile */
  const sm90_plan none = {-1, 1};
  return p->M <= 96 ? plan_wide_swap(p, caps) : none;
}
static sm90_plan rule_wide_swap2(const w8a8_mm_problem *p, const sm90_caps *caps) { /* two, after plan_deep256 */
  const sm90_plan none = {-1, 1};
  return p->M > 128 ? plan_wide_swap(p, caps) : none;
}
static sm90_plan rule_single_swap(const w8a8_mm_problem *p, const sm90_caps *caps) {
  return plan_single_swap(p, caps->num_sms);
}
static sm90_plan rule_pair_swap(const w8a8_mm_problem *p, const sm90_caps *caps) {
  return plan_pair_swap(p, caps->num_sms);
}

/* A rule plans p or declines (config -1); the first that plans wins. with_ready: whether the rule also plans a
 * launch whose A rows arrive while it runs (the fused all-gather's one launch, p->ready). The others were
 * measured without arriving rows, or their tiles cannot wait for them (the skinny kernel). */
typedef struct plan_rule {
  const char *name;
  sm90_plan (*fn)(const w8a8_mm_problem *p, const sm90_caps *caps);
  int with_ready;
} plan_rule;

/* The rules in order: plan_skinny (1..144 tokens; the wide tiles up to 528), the deep ring at 1..64 tokens
 * (plan_deep16, plan_deep), plan_small where those decline up to 32 tokens or where the weight tiles outnumber the
 * SMs (up to SWAP64_MAX), the rules for 65..256 tokens, then the 128 x 256 / 192 / 160 / 128 pick by wave fill.
 * What none of them takes at 33..128 tokens gets one 128-row token tile: no step at 64 -> 65
 * (h200-sm90-2026-11-29.md, h200x2-sm90-ab-2026-11-29-s4.txt). */
static const plan_rule RULES[] = {
    {"skinny", rule_skinny, 0},           {"tiny", rule_tiny, 1},
    {"deep", rule_deep, 1},               {"small", rule_small, 1},
    {"swap64", rule_swap64, 0},           {"wide_swap1", rule_wide_swap1, 0},
    {"deep80", plan_deep80, 1},           {"deep256", plan_deep256, 0},
    {"wide_swap2", rule_wide_swap2, 0},   {"single_swap", rule_single_swap, 0},
    {"pair_swap", rule_pair_swap, 0},     {"split_k", rule_split_k, 1},
    {"narrow128", rule_narrow128, 1},     {"narrow256", rule_narrow256, 1},
    {"wide_n", rule_wide_n, 0},           {"wave_fill", rule_wave_fill, 1},
};

static sm90_plan plan(const w8a8_mm_problem *p, const sm90_caps *caps) {
  const sm90_plan none = {-1, 1};
  for (size_t i = 0; i < sizeof RULES / sizeof RULES[0]; i++) {
    if (p->ready && !RULES[i].with_ready) continue;
    const sm90_plan pl = RULES[i].fn(p, caps);
    if (pl.config >= 0) return pl;
  }
  return none; /* (unreachable: rule_wave_fill always plans) */
}

/* ---- the post-passes: twins of the planned tile -------------------------------------------------------- */

/* 129..255 tokens (two 128-row tiles, the second partial), heuristic plans only: the planned tile's twin with B
 * multicast over a 2-CTA cluster on the two M tiles: 1.026x geomean (0.95-1.11x, h200-sm90-partial-m-2026-11-30.txt),
 * kept for the small gain. Not with ready flags (all-gather + GEMM keeps the plain tiles), nor with the
 * weights-constant hint (multicast tiles do not take it; unmeasured against it). Runs after apply_fp8_accum: under
 * FAST the wide fp8 tile is fp8_128x256 already, which has no twin. */
static void apply_mc2m(const sm90_plan_opts *o, const sm90_caps *caps, const w8a8_mm_problem *p, sm90_plan *pl) {
  (void)caps;
  if (pl->config < 0 || p->M <= 128 || p->M >= 256 || o->weights_constant) return;
  static const int twins[][2] = {{SM90_CFG_INT8_128X128, SM90_CFG_INT8_128X128_MC2},
                                 {SM90_CFG_INT8_128X256, SM90_CFG_INT8_128X256_MC2},
                                 {SM90_CFG_FP8_128X128_PROMOTE, SM90_CFG_FP8_128X128_PROMOTE_MC2},
                                 {SM90_CFG_FP8_128X256_PROMOTE, SM90_CFG_FP8_128X256_PROMOTE_MC2}};
  for (int i = 0; i < 4; i++)
    if (pl->config == twins[i][0]) {
      pl->config = twins[i][1];
      return;
    }
}

/* The token tail's boxes in the configurations with it (sm90_config.tail): W8A8_DEV SM90_TAIL
 * 1 (default) tail_plan's rule, 0 never (TMA fills the whole box), 2 the valid rows in small boxes
 * wherever a token tile is partial, 3 one box of the valid rows rounded up to 8 wherever a token tile
 * is partial, 4 the fold where tail_plan can take it (else as 1). Modes 0 and 2..4 are for tests and
 * measurements (sm90_dev -R). Whether the heuristic takes those configurations at all: apply_tail. */
int w8a8_sm90_tail_mode(void) { return (int)w8a8_knob_int(W8A8_KNOB_SM90_TAIL); }
/* The rule (h200-sm90-tail-twins-2026-11-30.txt): ONE box of the partial tile's valid rows rounded up to 8, where
 * there are exactly two token tiles (129 tokens: int8 1.31-1.64x, fp8 1.25-1.43x); fp8 (but see fp8_tail_box) and
 * int8's 128 x 256 tile only where that box is at most an eighth of the tile (16 rows unswapped, 8 swapped): larger
 * boxes lost there. Not with three token tiles; several boxes always lost (~85 cycles per box and stage). Except:
 * on the n64 deep ring with three or more token tiles (plan_deep256's): any box, fp8 too, where the partial tile's
 * TMA fill was a third of the kernel (1.08-1.36x, h200-sm90-deep256-2026-11-30.txt); and a partial tile that is the
 * ONLY token tile (65..127 tokens) on the plain 128 x 128 tiles (int8, and fp8 without the weights-constant hint,
 * unmeasured there), any box, and on plan_single_swap's swapped n144 / n160 twins; apply_tail's 70% grid gate
 * decides where: 1.12-1.30x on 112 CTAs, 5-15% slower on 32..64 CTAs, which the gate keeps out
 * (h200-sm90-session16-2026-11-30.txt). Not the 128 x 64 tile's single tile: it lost at 96..104 tokens. */

/* fp8's cap on the unswapped tiles of up to 128 columns with two token tiles: half the tile, but an eighth with the
 * weights-constant hint (larger boxes lost up to 14% there, h200-sm90-tail-twins-2026-11-30.txt). Without the hint
 * a 32-row box won 1.12-1.36x, a 64-row box 0.94-1.18x, a 96-row box lost 0.77-0.93x
 * (h200-sm90-session12-2026-11-30.txt): hence half. Returns 0 (an eighth) or 2 (half). */
int w8a8_sm90_fp8_tail_box(const sm90_plan_opts *o) { return o->weights_constant ? 0 : 2; }
/* The fold (the kernel's sm90_tail_fold): a single partial token tile of 65..127 rows on an unswapped, unsplit,
 * unicast twin loads rows [0, 64) and [M - 64, M) in one 3-D box, every row a real row of A (no fill, no short box),
 * returned as one box of SM90_BM rows. Taken in tail mode 4 (sm90_dev -R 4, tests) and in mode 1 where
 * fold_measured says. Its rows are real, yet it ran nearly as slow as one box of valid rows: the cost is not the
 * fill alone (h200-session17-2026-11-30.txt). Unswapped tiles only: a swapped tile's token box is BN rows (n144 /
 * n160), so one box of exactly 128 valid rows is an ordinary tail there; taken for a fold, it would put the fold's
 * 3-D map over the WEIGHTS, which the swapped kernel's 2-D load faults on (an illegal instruction). */
int w8a8_sm90_tail_is_fold(const sm90_config *c, tail_boxes t) { return !c->swap && t.n == 1 && t.rows == SM90_BM; }
/* The fold's measured rule (tail mode 1): the 128 x 64 twin up to fold_max_tokens (a tuned 128 x 64 plan: the
 * heuristic plans that tile at 89..256 tokens only), and the fp8 128 x 128 twin where fp8_box is 0 (the
 * weights-constant hint: the single-tile tail does not take it) up to 80 tokens: up to 1.16x
 * (h200-session17-2026-11-30.txt); apply_tail adds the grid (>= 90% of the SMs for the 128 x 64 twin, the tail's
 * 70% for the other). */
static int fold_measured(const sm90_config *c, int64_t token_rows, int fp8_box) {
  if (c->bn == 64) return token_rows <= fold_max_tokens(c->int8);
  return c->bn == 128 && !c->int8 && fp8_box == 0 && token_rows <= 80;
}
/* bench/sm90_dev -P only: 1 = A's tensor map covers whole token tiles (M rounded up to 128, or to the token tile
 * when swapped), so a partial tile's rows past M are read from memory instead of being filled by TMA. This READS
 * PAST THE CALLER'S A: only for a caller whose A buffer has those rows (sm90_dev allocates 16384); the outputs past
 * M are still not stored. No shift under it (its rows are what -P measures). */
int w8a8_sm90_pad_tokens(void) { return (int)w8a8_knob_int(W8A8_KNOB_SM90_PAD_TOKENS); }
/* The kernel's shift (sm90_args.shift_x, sm90_x0): on the unswapped tiles without split-K or stream-K (a unit's K
 * range differs: other fp8 sums for the shared rows) (plain, multicast and tail twins alike), where the last of two
 * or more token tiles is partial, that tile loads the LAST 128 tokens through the kernel's own map instead of a box
 * that runs past M (TMA's out-of-bounds fill) or the tail's short boxes: fp8 1.05x, int8 1.13x geomean at 385..529
 * tokens (h200-session27-2026-12-02.txt). Under tail_plan's rule (tail mode 1) only, so that sm90_dev -R and the
 * tail tests get the boxes they ask for (tail mode 0 is the filled box the tests compare it with); never with ready
 * flags. */
int w8a8_sm90_shift_applies(const sm90_config *c, int64_t token_rows, int ready) {
  return !c->swap && !c->splitk && !c->sk && !c->bm && token_rows > SM90_BM && token_rows % SM90_BM != 0 && !ready &&
         !w8a8_sm90_pad_tokens() && w8a8_sm90_tail_mode() == 1;
}
tail_boxes w8a8_sm90_tail_plan(const sm90_config *c, int64_t token_rows, int mode, int fp8_box, int ready) {
  tail_boxes t = {0, 0};
  if (mode == 1 && w8a8_sm90_shift_applies(c, token_rows, ready)) return t; /* (the shift loads the tile's rows) */
  const int box = c->swap ? c->bn : SM90_BM;
  const int v = (int)(token_rows % box);
  if (!c->tail || mode == 0 || v == 0 || box < 16) return t;
  /* (not with ready flags: the kernel's waits would cover the rows, but it is unmeasured there; the rule below
   * then decides, as without the fold) */
  if ((mode == 4 || (mode == 1 && fold_measured(c, token_rows, fp8_box))) && !ready && !c->swap && !c->splitk &&
      c->mcast != 2 && token_rows > 64 && token_rows < SM90_BM) {
    t.n = 1;
    t.rows = SM90_BM;
    return t;
  }
  if (mode == 4) mode = 1;
  if (mode == 2) { /* boxes of an eighth of the tile (at least 8 rows; a multiple of 8 that divides the box) */
    int r = box / 8 < 8 ? 8 : (box / 8 + 7) / 8 * 8;
    while (box % r && r < box) r += 8; /* (n160: 32, since an eighth, 20, is no multiple of 8) */
    t.rows = r;
    t.n = (v + t.rows - 1) / t.rows;
    return t;
  }
  const int rows = (v + 7) / 8 * 8; /* one box of the valid rows (fewer than 8 missing rows: TMA fills) */
  const int two_tiles = token_rows > box && token_rows < 2 * (int64_t)box;
  int cap = box / 8 < 8 ? 8 : box / 8; /* fp8_box: w8a8_sm90_fp8_tail_box */
  if (c->int8 && (c->swap || c->bn <= 128))
    cap = box;
  else if (!c->int8 && fp8_box == 2 && !c->swap && c->bn <= 128)
    cap = box / 2;
  /* three or more token tiles on the n64 deep ring (plan_deep256's): any box (see above) */
  const int deep_many = c->swap && c->minb == 1 && box == 64 && token_rows > 2 * (int64_t)box;
  /* (the swapped unsplit tiles: plan_single_swap's n144 / n160 twins) */
  const int single = token_rows < box && (c->swap || c->bn == 128) && !c->splitk && c->mcast != 2 &&
                     (c->int8 || fp8_box != 0);
  if (rows < box && (mode == 3 || (two_tiles && rows <= cap) || deep_many || single)) {
    t.n = 1;
    t.rows = rows;
  }
  return t;
}

/* The heuristic's *_tail twins: where the plan's configuration has a twin (the same tile, pipeline and split; the
 * tail map on top), tail_plan's rule takes the partial token tile, and the grid fills at least 70% of the SMs.
 * Below that the TMA fill of the missing rows cost nothing measurable while the twin's extra box per stage did
 * (8b-o at 129 tokens: 13.0 -> 14.1 us); at 96 CTAs and more the tail won everywhere measured
 * (h200-sm90-tail-twins-2026-11-30.txt). */
static void apply_tail(const sm90_plan_opts *o, const sm90_caps *caps, const w8a8_mm_problem *p, sm90_plan *pl) {
  const int num_sms = caps->num_sms;
  /* Only under tail_plan's rule (mode 1): with the tail off or a test mode the twin would run without it. */
  if (pl->config < 0 || w8a8_sm90_tail_mode() != 1) return;
  /* (where the plan's tile takes the shift, its twin would run without boxes, its TAIL code for nothing) */
  if (w8a8_sm90_shift_applies(&CONFIGS[pl->config], p->M, p->ready != NULL)) return;
  const int to = twin_of(pl->config, SM90_TAIL, 0);
  if (to < 0) return;
  const sm90_config *c = &CONFIGS[to];
  const int64_t tokens = p->M, weights = p->N; /* M is rows_x unswapped, rows_y swapped */
  const int tb = c->swap ? c->bn : SM90_BM, wb = c->swap ? SM90_BM : c->bn;
  const int64_t ctas = (tokens + tb - 1) / tb * ((weights + wb - 1) / wb) * (c->splitk ? pl->split : 1);
  const tail_boxes bx = w8a8_sm90_tail_plan(c, tokens, 1, w8a8_sm90_fp8_tail_box(o), p->ready != NULL);
  /* the fold: >= 90% of the SMs on the 128 x 64 twin (8b-qkv's 96 CTAs lost, h200-session17-2026-11-30.txt), the
   * tail's 70% elsewhere */
  const int gate = w8a8_sm90_tail_is_fold(c, bx) && c->bn == 64 ? 9 : 7;
  if (bx.n > 0 && ctas * 10 >= (int64_t)num_sms * gate) pl->config = to;
}

/* w8a8_set_fp8_accum(W8A8_FP8_ACCUM_FAST): the promoting 128 x 256 fp8 tile becomes the
 * fast-accumulation one (the same tile and pipeline without the per-K-block promotion). Other
 * configurations have no fast twin and keep promoting. */
static void apply_fp8_accum(const sm90_plan_opts *o, const sm90_caps *caps, const w8a8_mm_problem *p, sm90_plan *pl) {
  (void)caps, (void)p;
  if (o->fp8_accum != W8A8_FP8_ACCUM_FAST || pl->config < 0) return;
  if (pl->config == SM90_CFG_FP8_128X256_PROMOTE) pl->config = SM90_CFG_FP8_128X256;
}

/* Stream-K (the kernel's SK, sm90_streamk.h). w8a8_sm90_sk_fits: whether the stream-K twin ci can run
 * p with the handle's workspace (its partial tiles in ws, sm90_sk_slots of them; two locks per stream-K
 * tile) and with every CTA of its grid resident at once (a final split waits for lower-numbered units;
 * the occupancy query says fewer where MPS or a smaller SM partition limits the device); where the
 * schedule has no stream-K units it runs as a plain persistent grid and needs neither. *k: the schedule
 * (units 0 where it does not fit). */
int w8a8_sm90_sk_fits(const sm90_plan_opts *o, const sm90_caps *caps, int ci, const w8a8_mm_problem *p,
                      sm90_sk_plan *k) {
  const sm90_config *c = &CONFIGS[ci];
  const int num_sms = caps->num_sms;
  const int64_t tiles = ((p->M + SM90_BM - 1) / SM90_BM) * ((p->N + c->bn - 1) / c->bn);
  *k = sm90_sk_make(0, 0, 0);
  if (!o->sk_locks || tiles > INT32_MAX / 2) return 0;
  *k = sm90_sk_make((int)tiles, kblocks_of(p), num_sms * c->minb);
  if (k->units == 0) return 1;
  return (size_t)sm90_sk_slots(k) * SM90_BM * c->bn * 4 <= o->ws_bytes && 2LL * k->sk_tiles <= W8A8_SK_LOCKS &&
         w8a8_sm90_clusters(caps, ci, 1) >= num_sms * c->minb;
}
/* The plain tile of a stream-K twin, -1 if ci is none. */
int w8a8_sm90_sk_plain(int ci) { return twin_of(ci, 0, SM90_STREAMK); }
/* Where the plan is the plain 128 x 128 tile, or its multicast twin that apply_mc2m planned at 129..255 tokens
 * (after the token-tail twin had its turn): the plain tile's stream-K twin, at more than 128 tokens where the
 * schedule has stream-K units (a last wave under 80% full, more than 8 K-blocks: sm90_sk_make) in even splits of
 * at least 3 per tile (at most a third of the SMs' worth of tiles, >= 24 K-blocks): 1.22-1.32x at 70b-qkv-tp4 256
 * tokens, where two splits per tile and the continuous cut lost (0.72-0.95x; h200-sm90-streamk-2026-11-30.txt);
 * over the multicast twins 1.08-1.39x at 70b-qkv-tp4 193..255 tokens (h200-sm90-session12-2026-11-30.txt). Not
 * with ready flags (the twin does not wait for arriving rows) nor the weights-constant hint (the twin does not
 * preload). */
static void apply_sk(const sm90_plan_opts *o, const sm90_caps *caps, const w8a8_mm_problem *p, sm90_plan *pl) {
  if (pl->config < 0 || o->weights_constant || p->M <= 128) return;
  const int to = twin_of(pl->config, SM90_STREAMK, SM90_MC2);
  sm90_sk_plan k;
  if (to < 0 || !w8a8_sm90_sk_fits(o, caps, to, p, &k) || k.units == 0 || k.per_tile < 3) return;
  pl->config = to;
}

/* The tuning table's plan for p, if the handle has a table with an entry that applies (exact
 * M, else the nearest M bucket of the same dtype, N and K whose configuration takes this M). */
static int tuned_plan(const sm90_plan_opts *o, const w8a8_mm_problem *p, sm90_plan *pl) {
  const w8a8_tune_entry *e =
      w8a8_tune_lookup((const w8a8_tune_table *)o->tuning, p->in_dtype == W8A8_DTYPE_INT8, p->M, p->N, p->K);
  if (!e || e->config < 0 || e->config >= SM90_NUM_CONFIGS) return 0;
  const sm90_config *c = &CONFIGS[e->config];
  if (c->int8 != (p->in_dtype == W8A8_DTYPE_INT8) || (c->swap && p->M > 2 * (int64_t)c->bn)) return 0;
  /* The skinny tiles do not wait for arriving rows (prepare refuses them with ready flags, and the fused
   * all-gather asks w8a8_sm90_accepts without its flags): the heuristic's plan there. */
  if (c->bm && p->ready) return 0;
  pl->config = e->config;
  pl->split = c->splitk ? e->split : 1;
  return pl->split >= 1 && pl->split <= SM90_MAX_SPLIT;
}

/* The plan of a launch without a forced configuration: the tuning table's, else the heuristic's
 * with the multicast twin at 129..255 tokens; then fast accumulation where the handle asks for it; last
 * the token-tail twin where a token tile is partial (apply_tail, tuned plans included), and the stream-K
 * twin where its rule takes the plain 128 x 128 tile (apply_sk, tuned plans included: the tuner times the
 * plain tile, and the rule was measured against it). */
/* The post-passes in order, as the rules: with_ready as plan_rule's; tuned: whether it also applies to a tuning
 * table's plan. */
typedef struct plan_pass {
  const char *name;
  void (*fn)(const sm90_plan_opts *o, const sm90_caps *caps, const w8a8_mm_problem *p, sm90_plan *pl);
  int with_ready, tuned;
} plan_pass;
static const plan_pass PASSES[] = {
    {"fp8_accum", apply_fp8_accum, 1, 1},
    {"mc2m", apply_mc2m, 0, 0},
    {"tail", apply_tail, 1, 1},
    {"stream_k", apply_sk, 0, 1},
};

sm90_plan w8a8_sm90_choose_plan(const w8a8_mm_problem *p, const sm90_plan_opts *o, const sm90_caps *caps) {
  sm90_plan pl;
  const int tuned = tuned_plan(o, p, &pl);
  if (!tuned) pl = plan(p, caps);
  for (size_t i = 0; i < sizeof PASSES / sizeof PASSES[0]; i++)
    if ((!p->ready || PASSES[i].with_ready) && (!tuned || PASSES[i].tuned)) PASSES[i].fn(o, caps, p, &pl);
  return pl;
}

/* ---- the CUDA-core kernel's rule (gemv.cu) ------------------------------------------------------------------ */

/* W8A8_DEV GEMV: 0 never, 1 wherever the kernel takes the problem, 2 (default) the measured rule of
 * w8a8_cuda_gemv_wanted. */
enum { GEMV_OFF = 0, GEMV_ON = 1, GEMV_AUTO = 2 };

#define GEMV_MAX_M_I8 8  /* tokens per launch, int8 */
#define GEMV_MAX_M_FP8 1 /* fp8 */
int w8a8_cuda_gemv_takes(const w8a8_mm_problem *p) {
  const bool int8 = p->in_dtype == W8A8_DTYPE_INT8;
  if (p->ready || p->M < 1 || p->N < 1 || p->M > (int8 ? GEMV_MAX_M_I8 : GEMV_MAX_M_FP8)) return 0;
  if ((uintptr_t)p->a % 16 || (uintptr_t)p->b % 16 || p->lda % 16 || p->ldb % 16) return 0;
  return 1;
}

/* Whether the dispatcher should run this kernel for p. Default rule, sm_90 only (measured there against
 * the Hopper kernels; elsewhere W8A8_DEV GEMV=1 asks for it): one int8 token (1.01-1.48x on all 8 shapes,
 * h200-gemv-ab-2026-11-30.txt). fp8 is out by default: the Hopper deep n8 tile is 2-3% faster at one
 * token (h200-session21-2026-12-01.txt); W8A8_DEV GEMV_FP8=1 adds fp8 at N <= 4096. */
int w8a8_cuda_gemv_wanted(const w8a8_mm_problem *p, int cc) {
  const int mode = (int)w8a8_knob_int(W8A8_KNOB_GEMV);
  if (mode == GEMV_OFF || !w8a8_cuda_gemv_takes(p)) return 0;
  const int fp8_rule = (int)w8a8_knob_int(W8A8_KNOB_GEMV_FP8);
  return mode == GEMV_ON ||
         (cc == 90 && p->M == 1 && (p->in_dtype == W8A8_DTYPE_INT8 || (fp8_rule && p->N <= 4096)));
}

/* ---- the block-scaled kernel's plan (sm90_blockwise.cu) --------------------------------------------------------- */

#define BW_MAX_SPLIT 8     /* CTAs per cluster (the portable cluster size) */
#define BW_SPLIT_COST 2    /* a split tile's reduction, in K-blocks of one CTA's main loop */
sm90_bw_plan w8a8_sm90_bw_plan(int64_t M, int64_t N, int64_t K, int num_sms, int force_bn, int force_split) {
  sm90_bw_plan pl;
  if (num_sms < 1) num_sms = 1;
  pl.swap = M <= 64;
  const int64_t wide = ((M + SM90_BM - 1) / SM90_BM) * ((N + 255) / 256);
  pl.bn = pl.swap ? (M <= 16 ? 16 : M <= 32 ? 32 : 64)
          : force_bn == 128 || force_bn == 256 ? force_bn
          : wide >= num_sms ? 256 : 128;
  const int64_t tiles = pl.swap ? ((M + pl.bn - 1) / pl.bn) * ((N + 127) / 128)
                                : ((M + SM90_BM - 1) / SM90_BM) * ((N + pl.bn - 1) / pl.bn);
  const int64_t kb = (K + SM90_BK - 1) / SM90_BK;
  pl.split = 1;
  pl.tiles = tiles > INT32_MAX ? INT32_MAX : (int)tiles;
  if (force_split >= 1) {
    const int64_t f = force_split < BW_MAX_SPLIT ? force_split : BW_MAX_SPLIT;
    pl.split = (int)(f < kb ? f : kb);
    if (tiles * pl.split > INT32_MAX / 2) pl.split = 1;
    return pl;
  }
  int64_t best = ((tiles + num_sms - 1) / num_sms) * kb;
  for (int s = 2; s <= BW_MAX_SPLIT && s <= kb; s++) {
    /* clusters resident at once: the SMs over s, 10% less for clusters of more than 2 (GPC granularity) */
    int64_t at_once = num_sms / s;
    if (s > 2) at_once = at_once * 9 / 10;
    if (at_once < 1) break;
    const int64_t cost = ((tiles + at_once - 1) / at_once) * ((kb + s - 1) / s + BW_SPLIT_COST);
    if (cost < best && tiles * s <= INT32_MAX / 2) {
      best = cost;
      pl.split = s;
    }
  }
  return pl;
}
