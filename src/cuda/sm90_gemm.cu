// sm90_gemm.cu — the Hopper (sm_90a) fast path of w8a8_scaled_mm: host side.
//
// Takes a resolved problem, decides whether the TMA + wgmma kernel can run it (else returns
// W8A8_ERROR_UNSUPPORTED_DEVICE without touching memory, and the dispatcher falls back to the
// portable kernel), builds the two TMA descriptors, picks a configuration and launches on the
// handle's stream. Nothing here allocates or synchronizes: the descriptors are kernel parameters
// (__grid_constant__), so a call can be captured into a CUDA graph.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tune.h"
#include "cuda_backend.h"
#include "sm90_gemm_kernel.cuh"

static const char FN[] = "w8a8_scaled_mm";

// ---- configurations -----------------------------------------------------------------------------

// The last map is the token tail's (only the kernels with TAIL read it; sm90_args.tail_n).
typedef void (*sm90_kernel_fn)(const CUtensorMap, const CUtensorMap, const CUtensorMap, const sm90_args,
                               const CUtensorMap);

typedef struct sm90_config {
  const char *name;
  int int8;      // operand dtype
  int bn;        // tile on wgmma's N side (weights normally, tokens when swapped)
  int swap;      // small-M: weights on wgmma's M side
  int splitk;    // split K over a cluster (swap configs)
  int minb;      // CTAs per SM
  int fast_accum; // fp8 without promotion: less exact; planned only under W8A8_FP8_ACCUM_FAST (apply_fp8_accum)
  int smem;      // dynamic shared memory bytes
  sm90_kernel_fn fn;
  int mcast;     // 2: clusters of two CTAs on neighbouring X tiles multicasting the Y tile (B; swapped: A); 3: the
                 // skinny kernel's pairs, two CTAs on neighbouring Y (token) tiles multicasting the X (weight) tile;
                 // 0: none
  int pp;        // pingpong (the kernel's PP): slower or even (h200-sm90-pingpong-2026-11-30.txt); the tuner skips it
  int tail;      // the token tail (the kernel's TAIL): tail_plan's boxes for a partial token tile
  int sk;        // stream-K (the kernel's SK): a grid of one CTA per SM, sm90_streamk.h's schedule
  int bm;        // rows on wgmma's M side per CTA: 0 = SM90_BM (two consumer warpgroups); 64: the skinny kernel
  int cw;        // the skinny kernel's consumer warpgroups (its CW): 0 or 1 one, 2 two (the _k2 configurations)
  int wr;        // the skinny kernel's WR (the _k2r configurations): 384 threads, setmaxnreg 40 / 232
  int unrun;     // 1: its tests have not passed on a GPU (the macros below): the tuner and the plans stay off it
} sm90_config;

// A configuration's CTA rows on wgmma's M side (the weights when swapped) and its block size. (Unused in a build
// without sm_90a, whose launch paths compile out.)
__attribute__((unused)) static int cfg_bm(const sm90_config *c) { return c->bm ? c->bm : SM90_BM; }
__attribute__((unused)) static int cfg_threads(const sm90_config *c) {
  return c->bm ? SM90_SKINNY_THREADS(c->cw == 2 ? 2 : 1, c->wr != 0) : SM90_THREADS;
}

#define SM90_CFG(NAME, BN, ST, I8, SW, PR, SK, MB)                                                          \
  {NAME, I8, BN, SW, SK, MB, !(I8) && !(PR), sm90_cfg<BN, ST, I8, SW, PR, SK>::SMEM_BYTES,                                  \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, SW, PR, SK, MB>}

// A configuration whose tests have not passed on a GPU: the tuner skips it, no plan takes it.
#define SM90_CFG_UNRUN(NAME, BN, ST, I8, SW, PR, SK, MB)                                                   \
  {NAME, I8, BN, SW, SK, MB, !(I8) && !(PR), sm90_cfg<BN, ST, I8, SW, PR, SK>::SMEM_BYTES,                         \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, SW, PR, SK, MB>, 0, 0, 0, 0, 0, 0, 0, 1}
#define SM90_CFG_TAIL_UNRUN(NAME, BN, ST, I8, SW, PR, SK, MB)                                              \
  {NAME, I8, BN, SW, SK, MB, !(I8) && !(PR), sm90_cfg<BN, ST, I8, SW, PR, SK>::SMEM_BYTES,                         \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, SW, PR, SK, MB, 1, false, true>, 0, 0, 1, 0, 0, 0, 0, 1}

// 2-CTA clusters with B multicast (plain tiles): the same tile, twice the M rows per B load.
#define SM90_CFG_MC(NAME, BN, ST, I8, PR)                                                                \
  {NAME, I8, BN, 0, 0, 1, 0, sm90_cfg<BN, ST, I8, false, PR, false>::SMEM_BYTES,                             \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, false, PR, false, 1, 2>, 2}

// Swapped unsplit tiles with the TOKEN tile multicast: X = weights, Y = tokens, so the kernel's MC = 2
// (neighbouring X tiles, this CTA's half of Y into both) shares the token tile between two weight tiles.
#define SM90_CFG_SWAP_MC(NAME, BN, ST, I8, PR)                                                           \
  {NAME, I8, BN, 1, 0, 1, !(I8) && !(PR), sm90_cfg<BN, ST, I8, true, PR, false>::SMEM_BYTES,                  \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, true, PR, false, 1, 2>, 2}

// Pingpong tiles (the kernel's PP; plain, unpromoted): each consumer warpgroup owns whole tiles.
#define SM90_CFG_PP(NAME, BN, ST, I8)                                                                   \
  {NAME, I8, BN, 0, 0, 1, !(I8), sm90_cfg<BN, ST, I8, false, false, false, true>::SMEM_BYTES,                \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, false, false, false, 1, 1, true>, 0, 1}

// The same tiles with the token tail (the kernel's TAIL): sm90_args.tail_n.
#define SM90_CFG_TAIL(NAME, BN, ST, I8, SW, PR, SK, MB)                                                     \
  {NAME, I8, BN, SW, SK, MB, !(I8) && !(PR), sm90_cfg<BN, ST, I8, SW, PR, SK>::SMEM_BYTES,                                  \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, SW, PR, SK, MB, 1, false, true>, 0, 0, 1}
#define SM90_CFG_MC_TAIL(NAME, BN, ST, I8, PR)                                                           \
  {NAME, I8, BN, 0, 0, 1, 0, sm90_cfg<BN, ST, I8, false, PR, false>::SMEM_BYTES,                             \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, false, PR, false, 1, 2, false, true>, 2, 0, 1}

// Stream-K twins of the plain tiles (the kernel's SK): one CTA per SM, the tiles of the last partial wave
// (and one full wave before it) cut into equal K ranges (sm90_streamk.h).
#define SM90_CFG_SK(NAME, BN, ST, I8, PR)                                                                 \
  {NAME, I8, BN, 0, 0, 1, 0, sm90_cfg<BN, ST, I8, false, PR, false>::SMEM_BYTES,                             \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, false, PR, false, 1, 1, false, false, true>, 0, 0, 0, 1}

// The promoted 128 x 192 tile with alternating half temporaries (the kernel's HDB): the 128 x 192 rule's fp8
// tile (W8A8_SM90_HDB).
#define SM90_CFG_HDB(NAME, ST) SM90_CFG_HDB_BN(NAME, 192, ST)
// (and the 128 x 160 tile's, plan's 160 rule)
#define SM90_CFG_HDB_BN(NAME, BN, ST)                                                                    \
  {NAME, 0, BN, 0, 0, 1, 0, sm90_cfg<BN, ST, false, false, true, false>::SMEM_BYTES,                       \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, false, false, true, false, 1, 1, false, false, false, true>}

// The skinny swapped tiles (sm90_skinny_kernel): 64 weight rows x BN tokens, one consumer warpgroup, no split-K;
// fp8 promotes every K-block.
#define SM90_CFG_SKINNY(NAME, BN, ST, I8, MB)                                                            \
  {NAME, I8, BN, 1, 0, MB, 0, sm90_skinny_cfg<BN, ST>::SMEM_BYTES,                                        \
   (sm90_kernel_fn)sm90_skinny_kernel<BN, ST, I8, !(I8), MB>, 0, 0, 0, 0, SM90_SKINNY_BM}
// Their pairs (the kernel's MC = 2): clusters of two CTAs on neighbouring token tiles of one weight tile, each
// loading half of the weight tile multicast into both (tmap_x's box is 32 rows then).
#define SM90_CFG_SKINNY_MC2(NAME, BN, ST, I8)                                                             \
  {NAME, I8, BN, 1, 0, 1, 0, sm90_skinny_cfg<BN, ST>::SMEM_BYTES,                                         \
   (sm90_kernel_fn)sm90_skinny_kernel<BN, ST, I8, !(I8), 1, 2>, 3, 0, 0, 0, SM90_SKINNY_BM}
// Two consumer warpgroups on the tile (the kernel's CW = 2), single and paired. The ring must be even
// (static_assert in the kernel): warpgroup cw takes the K-blocks of parity cw, so with an odd ring a stage's
// previous block (g - STAGES) is the other warpgroup's, whose full-barrier phase this one never waited for: its
// parity wait could pass on the old phase and read the stage's old bytes.
#define SM90_CFG_SKINNY_K2(NAME, BN, ST, I8)                                                              \
  {NAME, I8, BN, 1, 0, 1, 0, sm90_skinny_cfg<BN, ST>::SMEM_BYTES,                                         \
   (sm90_kernel_fn)sm90_skinny_kernel<BN, ST, I8, !(I8), 1, 1, 2>, 0, 0, 0, 0, SM90_SKINNY_BM, 2}
// The same with the producer a whole warpgroup and the registers moved to the consumers (the kernel's WR).
#define SM90_CFG_SKINNY_K2R(NAME, BN, ST, I8)                                                             \
  {NAME, I8, BN, 1, 0, 1, 0, sm90_skinny_cfg<BN, ST>::SMEM_BYTES,                                         \
   (sm90_kernel_fn)sm90_skinny_kernel<BN, ST, I8, !(I8), 1, 1, 2, true>, 0, 0, 0, 0, SM90_SKINNY_BM, 2, 1}
#define SM90_CFG_SKINNY_MC2_K2(NAME, BN, ST, I8)                                                          \
  {NAME, I8, BN, 1, 0, 1, 0, sm90_skinny_cfg<BN, ST>::SMEM_BYTES,                                         \
   (sm90_kernel_fn)sm90_skinny_kernel<BN, ST, I8, !(I8), 1, 2, 2>, 3, 0, 0, 0, SM90_SKINNY_BM, 2}

// Index order matters: w8a8_sm90_scaled_mm_config() takes an index into this table.
static const sm90_config CONFIGS[] = {
    // large M: 128 x 256 tiles, 4 stages of 48 KB; fp8 accumulates in the tensor core (W8A8_FP8_ACCUM_FAST only)
    SM90_CFG("fp8_128x256", 256, 4, false, false, false, false, 1),
    // large M, fp8 with promotion to fp32 every K-block: 128 x 128 tiles, 6 stages of 32 KB
    SM90_CFG("fp8_128x128_promote", 128, 6, false, false, true, false, 1),
    SM90_CFG("int8_128x256", 256, 4, true, false, false, false, 1),
    SM90_CFG("int8_128x128", 128, 6, true, false, false, false, 1),
    // small M (swap-AB): 128 weight rows x 8..64 tokens, split-K over a cluster, 2 CTAs per SM
    SM90_CFG("fp8_swap_n8", 8, 5, false, true, true, true, 2),
    SM90_CFG("fp8_swap_n16", 16, 5, false, true, true, true, 2),
    SM90_CFG("fp8_swap_n32", 32, 4, false, true, true, true, 2),
    SM90_CFG("fp8_swap_n64", 64, 3, false, true, true, true, 2),
    SM90_CFG("int8_swap_n8", 8, 5, true, true, false, true, 2),
    SM90_CFG("int8_swap_n16", 16, 5, true, true, false, true, 2),
    SM90_CFG("int8_swap_n32", 32, 4, true, true, false, true, 2),
    SM90_CFG("int8_swap_n64", 64, 3, true, true, false, true, 2),
    // 17..128 tokens (and 129..256 with a long K, plan's split256) with few weight tiles (N / 128
    // well under the SM count): the 128 x 128 tile with its K range split over a cluster (4 stages
    // + the 64 KB partial tile for the DSMEM sum)
    SM90_CFG("fp8_128x128_promote_splitk", 128, 4, false, false, true, true, 1),
    SM90_CFG("int8_128x128_splitk", 128, 4, true, false, false, true, 1),
    // B multicast over 2-CTA clusters (half the B bytes from L2 per CTA): -5%..+3% against the plain tiles
    // (h200-sm90-ncu-mc2-2026-11-29.txt); apply_mc2m plans them at 129..255 tokens.
    SM90_CFG_MC("fp8_128x128_promote_mc2", 128, 6, false, true),
    SM90_CFG_MC("int8_128x256_mc2", 256, 4, true, false),
    // fp8 on the 128 x 256 tile with promotion in two 128-column halves per K-block (the kernel's
    // PROMOTE_HALF): 10-18% faster than fp8_128x128_promote at M >= 1024 (h200x2-sm90-ab-2026-11-29-s4.txt).
    SM90_CFG("fp8_128x256_promote", 256, 4, false, false, true, false, 1),
    // The same with B multicast over 2-CTA clusters (apply_mc2m's twin; even with the plain tile,
    // h200-sm90-ncu-mc2-2026-11-29.txt).
    SM90_CFG_MC("fp8_128x256_promote_mc2", 256, 4, false, true),
    // 128 x 64 tiles, 8 stages of 24 KB, for narrow N at 65..256 tokens, where the 128 x 128 tile runs on
    // N / 128 SMs only: plan's 89..128-token and narrow256 rules and the fold (h200-sm90-timeline-2026-11-29.txt).
    SM90_CFG("fp8_128x64_promote", 64, 8, false, false, true, false, 1),
    SM90_CFG("int8_128x64", 64, 8, true, false, false, false, 1),
    // Pingpong 128 x 128 tiles (each consumer warpgroup a whole tile, its epilogue under the other's main loop):
    // int8, and fp8 with fast accumulation. Not planned unless W8A8_SM90_PP=1: measured slower or even
    // (h200-sm90-pingpong-2026-11-30.txt).
    SM90_CFG_PP("int8_128x128_pp", 128, 6, true),
    SM90_CFG_PP("fp8_128x128_pp", 128, 6, false),
    // int8's 128 x 128 tile with B multicast, for 129..255 tokens (see apply_mc2m).
    SM90_CFG_MC("int8_128x128_mc2", 128, 6, true, false),
    // swap-AB n8 / n16 with one CTA per SM and 10 stages of 17-18 KB instead of two CTAs per SM with 5: the
    // small-M plans put one CTA per SM anyway, and twice the weight bytes in flight per SM (160-180 KB) cover
    // HBM latency under load. plan_deep16 at 1..16 tokens (h200-session21-2026-12-01.txt).
    SM90_CFG("fp8_swap_n8_deep", 8, 10, false, true, true, true, 1),
    SM90_CFG("fp8_swap_n16_deep", 16, 10, false, true, true, true, 1),
    SM90_CFG("int8_swap_n8_deep", 8, 10, true, true, false, true, 1),
    SM90_CFG("int8_swap_n16_deep", 16, 10, true, true, false, true, 1),
    // The same for n32 / n64: 9 and 7 stages (144 / 112 KB of weights in flight per SM, where the plain ones
    // hold 64 / 48 KB): plan_deep at 17..64 tokens, plan_deep80 / plan_deep256 above
    // (h200-sm90-small-m-sweep-2026-11-30.txt).
    SM90_CFG("fp8_swap_n32_deep", 32, 9, false, true, true, true, 1),
    SM90_CFG("fp8_swap_n64_deep", 64, 7, false, true, true, true, 1),
    SM90_CFG("int8_swap_n32_deep", 32, 9, true, true, false, true, 1),
    SM90_CFG("int8_swap_n64_deep", 64, 7, true, true, false, true, 1),
    // The token tail's twins (the kernel's TAIL), only in these instantiations: compiled into every kernel it
    // cost fp8 13-15% where it never engaged. apply_tail takes them where tail_plan loads a partial token tile
    // in boxes; the tuner skips them (h200-sm90-tail-twins-2026-11-30.txt).
    SM90_CFG_TAIL("int8_128x128_tail", 128, 6, true, false, false, false, 1),
    SM90_CFG_TAIL("fp8_128x128_promote_tail", 128, 6, false, false, true, false, 1),
    SM90_CFG_MC_TAIL("int8_128x128_mc2_tail", 128, 6, true, false),
    SM90_CFG_MC_TAIL("fp8_128x128_promote_mc2_tail", 128, 6, false, true),
    SM90_CFG_TAIL("int8_swap_n32_deep_tail", 32, 9, true, true, false, true, 1),
    SM90_CFG_TAIL("fp8_swap_n32_deep_tail", 32, 9, false, true, true, true, 1),
    // n64 twins: 65..80 tokens as two token tiles, the second with at most 16 rows (plan_deep80), where the
    // 128-row tile pays TMA's fill of 48..63 rows
    SM90_CFG_TAIL("int8_swap_n64_deep_tail", 64, 7, true, true, false, true, 1),
    SM90_CFG_TAIL("fp8_swap_n64_deep_tail", 64, 7, false, true, true, true, 1),
    // Twins for the split-K tile (plan's split rule at 129..256 tokens) and the wide multicast tile (apply_mc2m
    // at 129..255 tokens).
    SM90_CFG_TAIL("int8_128x128_splitk_tail", 128, 4, true, false, false, true, 1),
    SM90_CFG_TAIL("fp8_128x128_promote_splitk_tail", 128, 4, false, false, true, true, 1),
    SM90_CFG_MC_TAIL("int8_128x256_mc2_tail", 256, 4, true, false),
    SM90_CFG_MC_TAIL("fp8_128x256_promote_mc2_tail", 256, 4, false, true),
    // The 128 x 64 tile's twins, for plan's narrow256 rule and the fold (tail_plan).
    SM90_CFG_TAIL("int8_128x64_tail", 64, 8, true, false, false, false, 1),
    SM90_CFG_TAIL("fp8_128x64_promote_tail", 64, 8, false, false, true, false, 1),
    // Stream-K twins of the 128 x 128 tiles (apply_sk's rule; the tuner skips them; h200-sm90-streamk-2026-11-30.txt).
    SM90_CFG_SK("int8_128x128_sk", 128, 6, true, false),
    SM90_CFG_SK("fp8_128x128_promote_sk", 128, 6, false, true),
    // 128 x 192 tiles, 4 stages of 40 KB (5 would pass 227 KB with the epilogue buffers), for N where 256-column
    // tiles leave SMs idle (N = 2560: 14 column tiles of 192): plan's WIDE192 rule
    // (h200-sm90-session16-2026-11-30.txt). fp8 promotes in two halves of 96 columns (PROMOTE_HALF); this fp8 tile
    // is planned only under W8A8_SM90_HDB=0.
    SM90_CFG("int8_128x192", 192, 4, true, false, false, false, 1),
    SM90_CFG("fp8_128x192_promote", 192, 4, false, false, true, false, 1),
    // The swap-AB deep ring with wider token tiles (one or two token tiles of 80 / 96 on wgmma's N side,
    // split-K over a cluster) at 65..96 / 129..192 tokens on few weight tiles, as cuBLASLt's tensorwise kernels,
    // where 128-row token tiles compute mostly padding: plan_wide_swap (h200-session18-2026-11-30.txt). Stages: as
    // many as 227 KB hold beside the split-K partial tile (BN lines of 132 words). n128: not planned, measured
    // slower (0.54-1.05x).
    SM90_CFG("fp8_swap_n80_deep", 80, 7, false, true, true, true, 1),
    SM90_CFG("fp8_swap_n96_deep", 96, 6, false, true, true, true, 1),
    SM90_CFG("fp8_swap_n128_deep", 128, 4, false, true, true, true, 1),
    SM90_CFG("int8_swap_n80_deep", 80, 7, true, true, false, true, 1),
    SM90_CFG("int8_swap_n96_deep", 96, 6, true, true, false, true, 1),
    SM90_CFG("int8_swap_n128_deep", 128, 4, true, true, false, true, 1),
    // The swapped tile without split-K: a persistent grid (the next tile's loads under this one's epilogue), more
    // stages (no partial tile beside the ring), the lean swapped epilogue. int8 n160: plan_single_swap. n128 / n192:
    // not planned, measured slower than the plans (h200-session18-2026-11-30.txt, h200-session19-2026-11-30.txt).
    SM90_CFG("fp8_swap_n128_ps", 128, 6, false, true, true, false, 1),
    SM90_CFG("int8_swap_n128_ps", 128, 6, true, true, false, false, 1),
    SM90_CFG("int8_swap_n160_ps", 160, 5, true, true, false, false, 1),
    SM90_CFG("int8_swap_n192_ps", 192, 4, true, true, false, false, 1),
    // fp8 at 129..160 tokens in one token tile (plan_single_swap): the promotion in two halves of 80 tokens
    // (PROMOTE_HALF, as the 128 x 192 / 256 tiles; three 80-register sets would not fit).
    SM90_CFG("fp8_swap_n160_ps", 160, 5, false, true, true, false, 1),
    // Their token-tail twins (one box of the valid rows rounded up to 8 where the single token tile is partial: at
    // 129 tokens the n160 tile's 31 filled rows cost 2-4 us, h200-session19-2026-11-30.txt), for plan_single_swap.
    SM90_CFG_TAIL("int8_swap_n160_ps_tail", 160, 5, true, true, false, false, 1),
    SM90_CFG_TAIL("fp8_swap_n160_ps_tail", 160, 5, false, true, true, false, 1),
    // One swapped token tile of 144 (as cuBLASLt's 128x144 tiles at 129..144 tokens), 10% less MMA per CTA than
    // n160: plan_single_swap's int8 tile at 129..144 (8b-gateup 129: 45.8 -> 42.3 us, h200-session28-2026-12-02.txt).
    // No fp8 n144: it ran no faster than n160 there.
    SM90_CFG("int8_swap_n144_ps", 144, 6, true, true, false, false, 1),
    SM90_CFG_TAIL("int8_swap_n144_ps_tail", 144, 6, true, true, false, false, 1),
    // The n160 tile with its token tile multicast over clusters of two weight tiles (each CTA reads half the token
    // bytes from L2). Not planned: no gain measured (0.96-1.0x, h200-session20-2026-11-30.txt). No token-tail twin
    // (the swapped tail loads the whole Y).
    SM90_CFG_SWAP_MC("int8_swap_n160_ps_mc2", 160, 5, true, false),
    SM90_CFG_SWAP_MC("fp8_swap_n160_ps_mc2", 160, 5, false, true),
    // Two token tiles of 80 / 96 at 129..192 tokens without split-K (the lean swapped epilogue), for the shapes whose
    // 48..64 weight tiles leave half the SMs idle with one token tile: fp8 plan_pair_swap; int8 not planned, slower
    // than its 128 x 128 tile (h200-session20-2026-11-30.txt). 8 / 7 stages of 26 / 28 KB; n80 stages chunks of 16
    // tokens (sm90_cfg::CW).
    SM90_CFG("int8_swap_n80_ps", 80, 8, true, true, false, false, 1),
    SM90_CFG("fp8_swap_n80_ps", 80, 8, false, true, true, false, 1),
    SM90_CFG("int8_swap_n96_ps", 96, 7, true, true, false, false, 1),
    SM90_CFG("fp8_swap_n96_ps", 96, 7, false, true, true, false, 1),
    // fp8_128x192_promote with alternating half temporaries (a warpgroup keeps a half in flight while it promotes
    // the other; 96 + 2 x 48 registers): 4-21% faster than the plain 192 tile, so the 128 x 192 rule's fp8 tile
    // (W8A8_SM90_HDB, h200-session21-2026-12-01.txt).
    SM90_CFG_HDB("fp8_128x192_promote_hdb", 4),
    // The skinny swapped tiles (64 weight rows, cuBLASLt's small-M shape): one CTA per SM with 16..7 stages of
    // (8 KB + BN x 128 B) beside a 64 x (BN + 1)-word staging buffer; plan_skinny (h200-session22-2026-12-01.txt).
    // fp8 n24..n48 run as their _k2 twins by default; int8 n144: not planned (lost at 129..144 tokens).
    SM90_CFG_SKINNY("fp8_skinny_n24", 24, 16, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n32", 32, 16, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n48", 48, 14, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n64", 64, 12, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n80", 80, 11, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n144", 144, 7, false, 1),
    SM90_CFG_SKINNY("int8_skinny_n24", 24, 16, true, 1),
    SM90_CFG_SKINNY("int8_skinny_n32", 32, 16, true, 1),
    SM90_CFG_SKINNY("int8_skinny_n48", 48, 14, true, 1),
    SM90_CFG_SKINNY("int8_skinny_n64", 64, 12, true, 1),
    SM90_CFG_SKINNY("int8_skinny_n80", 80, 11, true, 1),
    SM90_CFG_SKINNY("int8_skinny_n144", 144, 7, true, 1),
    // fp8 token tiles of cuBLASLt's sizes that wgmma takes for e4m3 only (N % 16 != 0 above 32): 33..40 tokens in
    // one tile, 65..72, and 129..136 (plan_skinny, h200-session23-2026-12-01.txt).
    SM90_CFG_SKINNY("fp8_skinny_n40", 40, 16, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n72", 72, 12, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n136", 136, 7, false, 1),
    // 1..16 tokens, with more stages (the same ~185 KB of ring): the n24 tile beat the deep n8 / n16 swap tiles
    // there by up to 1.21x (h200-session23-2026-12-01.txt). Planned: fp8 n8, int8 n16; fp8 n16 and int8 n8 not
    // planned (fp8 n16 3-10% slower than n24 at 9..15 tokens; int8 n8 / n16 / n24 within 2%).
    SM90_CFG_SKINNY("fp8_skinny_n8", 8, 20, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n16", 16, 18, false, 1),
    SM90_CFG_SKINNY("int8_skinny_n8", 8, 20, true, 1),
    SM90_CFG_SKINNY("int8_skinny_n16", 16, 18, true, 1),
    // The skinny pairs, two token tiles sharing one weight tile (as cuBLASLt's 1x2 clusters on 8b-o's 64 weight
    // tiles: 128 CTAs without split-K): plan_skinny's pair rule (h200-session24-2026-12-01.txt). The n8 / n16 pairs
    // are not planned (the rule starts at 33 tokens; they lost at 16..32).
    SM90_CFG_SKINNY_MC2("fp8_skinny_n8_mc2", 8, 20, false),
    SM90_CFG_SKINNY_MC2("fp8_skinny_n16_mc2", 16, 18, false),
    SM90_CFG_SKINNY_MC2("fp8_skinny_n24_mc2", 24, 16, false),
    SM90_CFG_SKINNY_MC2("fp8_skinny_n32_mc2", 32, 16, false),
    SM90_CFG_SKINNY_MC2("fp8_skinny_n48_mc2", 48, 14, false),
    SM90_CFG_SKINNY_MC2("fp8_skinny_n64_mc2", 64, 12, false),
    SM90_CFG_SKINNY_MC2("fp8_skinny_n72_mc2", 72, 12, false),
    SM90_CFG_SKINNY_MC2("int8_skinny_n8_mc2", 8, 20, true),
    SM90_CFG_SKINNY_MC2("int8_skinny_n16_mc2", 16, 18, true),
    SM90_CFG_SKINNY_MC2("int8_skinny_n32_mc2", 32, 16, true),
    SM90_CFG_SKINNY_MC2("int8_skinny_n48_mc2", 48, 14, true),
    SM90_CFG_SKINNY_MC2("int8_skinny_n64_mc2", 64, 12, true),
    SM90_CFG_SKINNY_MC2("int8_skinny_n80_mc2", 80, 11, true),
    // The same tiles with two consumer warpgroups alternating over the ring's K-blocks (as cuBLASLt's 384-thread
    // CTAs on the same tiling), the same rings. Planned by default only as the fp8 singles of 24..48 tokens
    // (1.02-1.05x, h200-session26-2026-12-01.txt); the others gained nothing clear (-8%..+2%): only under
    // W8A8_SM90_SKINNY_K2=1.
    SM90_CFG_SKINNY_MC2_K2("fp8_skinny_n8_mc2_k2", 8, 20, false),
    SM90_CFG_SKINNY_MC2_K2("fp8_skinny_n16_mc2_k2", 16, 18, false),
    SM90_CFG_SKINNY_MC2_K2("fp8_skinny_n24_mc2_k2", 24, 16, false),
    SM90_CFG_SKINNY_MC2_K2("fp8_skinny_n32_mc2_k2", 32, 16, false),
    SM90_CFG_SKINNY_MC2_K2("fp8_skinny_n48_mc2_k2", 48, 14, false),
    SM90_CFG_SKINNY_MC2_K2("fp8_skinny_n64_mc2_k2", 64, 12, false),
    SM90_CFG_SKINNY_MC2_K2("fp8_skinny_n72_mc2_k2", 72, 12, false),
    SM90_CFG_SKINNY_MC2_K2("int8_skinny_n8_mc2_k2", 8, 20, true),
    SM90_CFG_SKINNY_MC2_K2("int8_skinny_n16_mc2_k2", 16, 18, true),
    SM90_CFG_SKINNY_MC2_K2("int8_skinny_n32_mc2_k2", 32, 16, true),
    SM90_CFG_SKINNY_MC2_K2("int8_skinny_n48_mc2_k2", 48, 14, true),
    SM90_CFG_SKINNY_MC2_K2("int8_skinny_n64_mc2_k2", 64, 12, true),
    SM90_CFG_SKINNY_MC2_K2("int8_skinny_n80_mc2_k2", 80, 10, true),
    SM90_CFG_SKINNY_K2("fp8_skinny_n8_k2", 8, 20, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n24_k2", 24, 16, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n32_k2", 32, 16, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n40_k2", 40, 16, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n48_k2", 48, 14, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n64_k2", 64, 12, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n72_k2", 72, 12, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n80_k2", 80, 10, false),
    SM90_CFG_SKINNY_K2("int8_skinny_n16_k2", 16, 18, true),
    SM90_CFG_SKINNY_K2("int8_skinny_n24_k2", 24, 16, true),
    SM90_CFG_SKINNY_K2("int8_skinny_n32_k2", 32, 16, true),
    SM90_CFG_SKINNY_K2("int8_skinny_n48_k2", 48, 14, true),
    SM90_CFG_SKINNY_K2("int8_skinny_n64_k2", 64, 12, true),
    SM90_CFG_SKINNY_K2("int8_skinny_n80_k2", 80, 10, true),
    // Wider token tiles with two consumer warpgroups, for shapes whose weight tiles fill a third of the SMs at
    // 129..384 tokens (70b-qkv-tp4: 40 weight tiles; three token tiles put 120 CTAs on the GPU): plan_skinny's wide
    // rule (W8A8_SM90_SKINNY_WIDE, h200-session26-2026-12-01.txt). Rings as deep as 227 KB allows beside the staging
    // buffer. fp8 keeps one promotion temporary per warpgroup (two spill from n96 up in 168 registers). Planned:
    // fp8 n88 / n96; n112 / n128 only under W8A8_SM90_SKINNY_WIDE=1 (their _k2r twins by default); n136 only under
    // W8A8_SM90_SKINNY_K2=1; int8: not planned (slower but at 384 tokens).
    SM90_CFG_SKINNY_K2("fp8_skinny_n88_k2", 88, 10, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n96_k2", 96, 10, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n112_k2", 112, 8, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n128_k2", 128, 8, false),
    SM90_CFG_SKINNY_K2("int8_skinny_n96_k2", 96, 10, true),
    SM90_CFG_SKINNY_K2("int8_skinny_n128_k2", 128, 8, true),
    SM90_CFG_SKINNY_K2("fp8_skinny_n136_k2", 136, 6, false),
    SM90_CFG_SKINNY_K2("int8_skinny_n144_k2", 144, 6, true),
    // The wide fp8 tiles with 232 registers per consumer thread (WR): two promotion temporaries again (2-4% over
    // _k2 from n112), and n144 / n160 / n176 (three token tiles of them on 70b-qkv-tp4 cover 385..528 tokens): the
    // wide rule's tiles from 112 tokens (h200-session27-2026-12-02.txt). n88: not planned (even with n88_k2).
    SM90_CFG_SKINNY_K2R("fp8_skinny_n88_k2r", 88, 10, false),
    SM90_CFG_SKINNY_K2R("fp8_skinny_n112_k2r", 112, 8, false),
    SM90_CFG_SKINNY_K2R("fp8_skinny_n128_k2r", 128, 8, false),
    SM90_CFG_SKINNY_K2R("fp8_skinny_n144_k2r", 144, 6, false),
    SM90_CFG_SKINNY_K2R("fp8_skinny_n160_k2r", 160, 6, false),
    SM90_CFG_SKINNY_K2R("fp8_skinny_n176_k2r", 176, 6, false),
    // The 128 x 160 tile (plan's 160 rule, W8A8_SM90_WIDE160): 2560 columns in 16 whole tiles, so 70b-qkv-tp4 fills
    // 128 of 132 SMs at 1024 tokens (int8 1.12x, fp8 1.04x, h200-session28-2026-12-02.txt). 5 stages of 36 KB; the
    // lean epilogue's last 32 columns go out through the direct one. fp8 promotes in alternating halves of 80
    // columns (HDB: 80 + 2 x 40 registers).
    SM90_CFG("int8_128x160", 160, 5, true, false, false, false, 1),
    SM90_CFG_HDB_BN("fp8_128x160_promote_hdb", 160, 5),
};
#define SM90_NUM_CONFIGS ((int)(sizeof CONFIGS / sizeof CONFIGS[0]))
#define SM90_MAX_DEVICES 64

// ---- driver entry point for tensor maps (no link-time dependency on libcuda) ----------------------

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static void *g_encode_tiled;
static encode_tiled_fn get_encode_tiled(void) {
  return (encode_tiled_fn)w8a8_cuda_driver_proc("cuTensorMapEncodeTiled", &g_encode_tiled);
}

// K-major 8-bit operand [rows, K] with row stride ld (bytes), loaded in boxes of 128 x box_rows.
__attribute__((unused)) static CUresult make_tmap(CUtensorMap *m, const void *base, int64_t rows, int64_t K, int64_t ld,
                                                  int box_rows) {
  cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows};
  cuuint64_t strides[1] = {(cuuint64_t)ld};
  cuuint32_t box[2] = {SM90_BK, (cuuint32_t)box_rows};
  cuuint32_t estr[2] = {1, 1};
  return get_encode_tiled()(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)base, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// The fold's map (sm90_tail_fold; rows in 65..127): two blocks of 64 rows of A, the first at row 0, the
// second at row rows - 64 (they overlap where rows < 128), as dimension 2 of a 3-D map, so that one box of
// 128 x 64 x 2 bytes lands in a stage exactly as a 128-row box would (the same 128-byte swizzle rows).
__attribute__((unused)) static CUresult make_fold_tmap(CUtensorMap *m, const void *base, int64_t rows, int64_t K,
                                                       int64_t ld) {
  cuuint64_t dims[3] = {(cuuint64_t)K, 64, 2};
  cuuint64_t strides[2] = {(cuuint64_t)ld, (cuuint64_t)((rows - 64) * ld)};
  cuuint32_t box[3] = {SM90_BK, 64, 2};
  cuuint32_t estr[3] = {1, 1, 1};
  return get_encode_tiled()(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, (void *)base, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// The staged epilogues' output map: out [M, N] with row stride ldo (elements), stored from the
// 128-byte-swizzled buffers in boxes of 64 rows x 128 bytes (the swizzle span: 64 16-bit or 32 fp32
// columns). esz: 2 or 4 bytes per element. Returns 1 (16-bit) or 2 (fp32), or 0 where TMA cannot
// address out (base or row stride not a multiple of 16 bytes) or the encoder refuses it: the kernel
// then stores directly.
__attribute__((unused)) static int make_out_tmap(CUtensorMap *m, void *out, int64_t M, int64_t N, int64_t ldo,
                                                 int esz) {
  if (((uintptr_t)out % 16) != 0 || (ldo * esz) % 16 != 0 || M < 1 || N < 1) return 0;
  cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)M};
  cuuint64_t strides[1] = {(cuuint64_t)(ldo * esz)};
  cuuint32_t box[2] = {(cuuint32_t)(128 / esz), 64};
  cuuint32_t estr[2] = {1, 1};
  return get_encode_tiled()(m, esz == 4 ? CU_TENSOR_MAP_DATA_TYPE_UINT32 : CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, out, dims,
                            strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS
             ? esz / 2
             : 0;
}

// ---- per-device, per-configuration state (set once; host-side queries only) -----------------------

static int g_smem_set[SM90_NUM_CONFIGS][SM90_MAX_DEVICES];
__attribute__((unused)) static int g_pdl = -1;  // programmatic dependent launch: 1 on, 0 off (W8A8_SM90_PDL=0), -1 not read yet
static int g_max_clusters[SM90_NUM_CONFIGS][SM90_MAX_DEVICES][SM90_MAX_SPLIT + 1];

static w8a8_status prepare_config(int dev, int ci) {
  const sm90_config *c = &CONFIGS[ci];
  if (dev < 0 || dev >= SM90_MAX_DEVICES) return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: device %d", FN, dev);
  if (__atomic_load_n(&g_smem_set[ci][dev], __ATOMIC_ACQUIRE)) return W8A8_SUCCESS;
  cudaError_t e = cudaFuncSetAttribute((const void *)c->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, c->smem);
  if (e != cudaSuccess) return w8a8_cuda_error(FN, "cudaFuncSetAttribute(sm90 kernel smem)", e);
  __atomic_store_n(&g_smem_set[ci][dev], 1, __ATOMIC_RELEASE);
  return W8A8_SUCCESS;
}

// How many clusters of `split` CTAs of config ci fit on the device at once (the occupancy query). The kernel's
// shared-memory attribute is set first: below it, the default 48 KB limit makes every query fail. Where the query
// fails: an estimate, under num_sms * minb / split for clusters of more than 2 (GPC granularity: 4-CTA clusters of
// one CTA per SM fit 30, not 33, on the H200), not cached, so a later call asks again (a cached overestimate would
// make plan_deep pick two-wave splits for good).
static int max_active_clusters(int dev, int ci, int split, int num_sms) {
  if (dev < 0 || dev >= SM90_MAX_DEVICES || split < 1 || split > SM90_MAX_SPLIT) return 1;
  int v = __atomic_load_n(&g_max_clusters[ci][dev][split], __ATOMIC_ACQUIRE);
  if (v) return v;
  const sm90_config *c = &CONFIGS[ci];
  if (prepare_config(dev, ci) != W8A8_SUCCESS) w8a8_clear_error(); /* the query then fails: fallback */
  cudaLaunchConfig_t lc;
  memset(&lc, 0, sizeof lc);
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = split;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  lc.gridDim = dim3(split * num_sms, 1, 1);
  lc.blockDim = dim3(cfg_threads(c), 1, 1);
  lc.dynamicSmemBytes = c->smem;
  lc.attrs = at;
  lc.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, (const void *)c->fn, &lc) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    n = num_sms * c->minb / split;
    if (split > 2) n = n * 9 / 10;
    return n < 1 ? 1 : n;
  }
  __atomic_store_n(&g_max_clusters[ci][dev][split], n, __ATOMIC_RELEASE);
  return n;
}

// ---- the heuristic --------------------------------------------------------------------------------

typedef struct sm90_plan {
  int config;
  int split;
} sm90_plan;

static int find_config(const char *name) {
  for (int i = 0; i < SM90_NUM_CONFIGS; i++)
    if (!strcmp(CONFIGS[i].name, name)) return i;
  return -1;
}

// Small M (<= 64 tokens): the GEMM streams the weights once, so every SM must stream its share: swap-AB with the
// token tile just above M (8, 16, 32, 64), and the largest split whose CTAs fit ONE per SM (tiles x split <= SMs)
// with at least two K-blocks per CTA. A second CTA per SM adds cluster barriers and partial tiles but no bandwidth
// (two CTAs on one SM share its load path; h200x2-sm90-ab-2026-11-29-s4.txt); it still runs where the weight
// tiles alone exceed the SMs (split 1). plan() takes this where the deep plans decline.
static sm90_plan plan_small(const w8a8_mm_problem *p, int num_sms) {
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int bn = p->M <= 8 ? 8 : p->M <= 16 ? 16 : p->M <= 32 ? 32 : 64;
  char name[32];
  snprintf(name, sizeof name, "%s_swap_n%d", int8 ? "int8" : "fp8", bn);
  sm90_plan pl = {find_config(name), 1};
  const long long tiles = (p->N + SM90_BM - 1) / SM90_BM;
  const int kblocks = (int)((p->K + SM90_BK - 1) / SM90_BK);
  if (pl.config < 0) return pl;
  for (int s = 2; s <= SM90_MAX_SPLIT; s *= 2) {
    if (kblocks / s < 2 || tiles * s > num_sms) break;
    pl.split = s;
  }
  return pl;
}

// A deep swap-AB configuration ci over `clusters` tiles (weight tiles x token tiles): the largest
// power-of-two split whose clusters all run at once with >= 4 K-blocks per CTA; config -1 if even
// split 1 does not fit.
static sm90_plan deep_split(int dev, int ci, long long clusters, int kblocks, int num_sms) {
  sm90_plan pl = {-1, 1};
  if (ci < 0 || clusters > max_active_clusters(dev, ci, 1, num_sms)) return pl;
  pl.config = ci;
  for (int s = 2; s <= SM90_MAX_SPLIT; s *= 2) {
    if (kblocks / s < 4 || clusters > max_active_clusters(dev, ci, s, num_sms)) break;
    pl.split = s;
  }
  return pl;
}

// W8A8_SM90_DEEP3 (default 1; hook w8a8_sm90_set_deep3): at 33..64 tokens, the n64 deep tile at split 3 where
// deep_split's power of two came out 2 (more than 30 weight tiles: clusters of 4 do not all fit), the weight tiles
// x 3 CTAs all run at once and K has >= 64 K-blocks: there the per-SM intake, not HBM, bounds 64 CTAs. fp8 8b-down
// 1.03-1.09x, mixed with 32 K-blocks (h200-session22-2026-12-01.txt). Returns config -1 where it does not apply.
static int g_deep3 = -1;
static int deep3_enabled(void) { return w8a8_env_flag(&g_deep3, "W8A8_SM90_DEEP3", 1); }
static sm90_plan plan_deep3(int dev, sm90_plan a, long long tiles, int kblocks, int num_sms) {
  sm90_plan none = {-1, 1};
  if (a.config < 0 || a.split != 2 || kblocks < 64 || !deep3_enabled()) return none;
  if (tiles > max_active_clusters(dev, a.config, 3, num_sms)) return none;
  a.split = 3;
  return a;
}

// 17..64 tokens: swap-AB with ONE token tile (n32 up to 32 tokens, n64 above; or two n32 tiles), the deep ring
// (one CTA per SM) and deep_split's split (the occupancy query: clusters of 4 fit only 120 CTAs on the H200). Only
// where the weight tiles alone fit at once, and above 32 tokens only with >= 32 K-blocks (70b-o-tp4, K = 2048, keeps
// the 128 x 128 tile). Its pick was within 9% of the fastest at every row of 17..64 tokens it takes, 1.01-1.47x over
// the plans before it (h200-sm90-small-m-sweep-2026-11-30.txt). Returns config -1 where it does not apply.
static int g_deep_n32x2 = -1;  // W8A8_SM90_DEEP_N32X2: plan_deep's two n32 tiles: 1 both dtypes, 0 never, unset fp8 only (2)
static int deep_n32x2_mode(void) { return w8a8_env_mode(&g_deep_n32x2, "W8A8_SM90_DEEP_N32X2", 2); }
static sm90_plan plan_deep(int dev, const w8a8_mm_problem *p, int num_sms) {
  sm90_plan none = {-1, 1};
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const long long tiles = (p->N + SM90_BM - 1) / SM90_BM;
  const int kblocks = (int)((p->K + SM90_BK - 1) / SM90_BK);
  const int n32 = find_config(int8 ? "int8_swap_n32_deep" : "fp8_swap_n32_deep");
  if (p->M <= 32) return deep_split(dev, n32, tiles, kblocks, num_sms);
  if (kblocks < 32) return none;
  const sm90_plan a = deep_split(dev, find_config(int8 ? "int8_swap_n64_deep" : "fp8_swap_n64_deep"), tiles, kblocks,
                                 num_sms);
  // Two n32 token tiles instead where that doubles the CTAs (each weight tile's second read hits L2), fp8 only: in
  // the A/B int8's n64 stayed ahead (1.00-1.09x), fp8's lost on most rows (h200-sm90-session15-2026-11-30.txt).
  // Before them: n64 at split 3 (plan_deep3).
  const sm90_plan a3 = plan_deep3(dev, a, tiles, kblocks, num_sms);
  if (a3.config >= 0) return a3;
  const int n32x2 = deep_n32x2_mode();
  if (n32x2 == 0 || (n32x2 == 2 && int8)) return a;
  const sm90_plan b = deep_split(dev, n32, 2 * tiles, kblocks, num_sms);
  if (a.config >= 0 && b.config >= 0 && b.split >= a.split) return b;  // 2 x tiles x b.split CTAs >= 2 x n64's
  return a;
}

// 1..16 tokens on the deep ring (W8A8_SM90_DEEP16, hook w8a8_sm90_set_deep16): 1 (default) the n8 / n16 deep
// configurations, 2 plan_deep's n32 deep tile, each at deep_split's split; 0 plan_small (the plain n8 / n16 tiles,
// whose split ignores the occupancy query: 32 clusters of 4 where 30 fit). Mode 1: fp8 1.03x geomean, int8 1.02x;
// mode 2 lost (h200-session21-2026-12-01.txt). Where deep_split declines (more weight tiles than SMs), plan_small.
static int g_deep16 = -1;
static int deep16_mode(void) { return w8a8_env_int(&g_deep16, "W8A8_SM90_DEEP16", 1, 0, 2); }
static sm90_plan plan_deep16(int dev, const w8a8_mm_problem *p, int num_sms) {
  sm90_plan none = {-1, 1};
  const int mode = deep16_mode();
  if (!mode) return none;
  char name[32];
  snprintf(name, sizeof name, "%s_swap_n%d_deep", p->in_dtype == W8A8_DTYPE_INT8 ? "int8" : "fp8",
           mode == 2 ? 32 : p->M <= 8 ? 8 : 16);
  const long long tiles = (p->N + SM90_BM - 1) / SM90_BM;
  return deep_split(dev, find_config(name), tiles, (int)((p->K + SM90_BK - 1) / SM90_BK), num_sms);
}

// 33..SWAP64_MAX tokens (W8A8_SM90_SWAP64_MAX, default 40, 32 = off; hook w8a8_sm90_set_swap64_max) where the
// weight tiles alone exceed the SMs (plan_deep declines; 8b-gateup: 224 tiles): plan_small's n64 tile at split 1
// (two CTAs per SM) instead of the 128 x 256 tile with most of its token rows out of bounds. fp8 1.11x at 33 tokens,
// 1.00x at 56, 0.96x at 64 (h200-sm90-session15-2026-11-30.txt): hence 40. Kept to what was measured: >= 16
// K-blocks, at most 2 x SMs weight tiles, no ready flags.
static int g_swap64_max = -1;
static int swap64_max(void) { return w8a8_env_int(&g_swap64_max, "W8A8_SM90_SWAP64_MAX", 40, 32, 64); }

// 65..80 tokens on the n64 deep ring with two token tiles (the second holds 1..16 tokens, through the token tail
// where tail_plan takes it), deep_split over twice the weight tiles: no 64 -> 65 step, where the 128-row tile's
// token box has 48..63 rows filled by TMA. W8A8_SM90_DEEP80: unset (2) the rule, 1 wherever it applies, 0 never.
// The rule: >= 32 K-blocks, and split 2 on >= 70% of the SMs (1.09-1.19x, h200-sm90-rules-2026-11-30.txt) or split
// 1 on >= 90% up to 72 tokens (1.03-1.10x, h200-sm90-session13-2026-11-30.txt); fp8 only to 72 tokens (its tail box
// holds at most 8 rows: 0.88x at 80). Elsewhere it lost or was mixed (h200-sm90-tail-twins-2026-11-30.txt).
static int g_deep80 = -1;  // -1 unresolved, 0 never, 1 wherever it applies, 2 the rule
static int deep80_mode(void) { return w8a8_env_mode(&g_deep80, "W8A8_SM90_DEEP80", 2); }
static sm90_plan plan_deep80(int dev, const w8a8_mm_problem *p, int num_sms) {
  sm90_plan none = {-1, 1};
  const int mode = p->M > 64 && p->M <= 80 ? deep80_mode() : 0;
  if (mode == 0) return none;
  const int kblocks = (int)((p->K + SM90_BK - 1) / SM90_BK);
  if (kblocks < 32) return none;
  const long long tiles = (p->N + SM90_BM - 1) / SM90_BM;
  const int ci = find_config(p->in_dtype == W8A8_DTYPE_INT8 ? "int8_swap_n64_deep_tail" : "fp8_swap_n64_deep_tail");
  const sm90_plan pl = deep_split(dev, ci, 2 * tiles, kblocks, num_sms);
  if (mode == 2) {
    const long long ctas = 2 * tiles * pl.split;
    const int split2 = pl.split == 2 && ctas * 10 >= 7LL * num_sms;
    const int split1 = pl.split == 1 && ctas * 10 >= 9LL * num_sms && p->M <= 72;
    if (!(split2 || split1) || (p->in_dtype != W8A8_DTYPE_INT8 && p->M > 72)) return none;
  }
  return pl;
}

// 129..192 tokens with few weight tiles and a long K: the n64 deep ring over three token tiles at deep_split's
// split, taken where that is exactly 2. With 128-row tiles such a problem runs on few CTAs, each bound by its own
// MMA rate (70b-qkv-tp4: 40 CTAs); three n64 token tiles x 20 x split 2 put 120 CTAs on it: 1.15-1.59x
// (h200-sm90-deep256-2026-11-30.txt). Kept to what was measured: >= 32 K-blocks, no ready flags
// (W8A8_SM90_DEEP256=0 turns it off). The same at 97..128 tokens (two n64 token tiles; W8A8_SM90_DEEP128, hook
// w8a8_sm90_set_deep128): fp8 1.04-1.05x geomean; int8 only with >= 64 K-blocks (with 32 its 128 x 64 tile stays
// faster; h200-session21-2026-12-01.txt).

static int g_deep256 = -1;
static int deep256_enabled(void) { return w8a8_env_flag(&g_deep256, "W8A8_SM90_DEEP256", 1); }
static int g_deep128 = -1;
static int deep128_enabled(void) { return w8a8_env_flag(&g_deep128, "W8A8_SM90_DEEP128", 1); }
static sm90_plan plan_deep256(int dev, const w8a8_mm_problem *p, int num_sms) {
  sm90_plan none = {-1, 1};
  if (p->M <= 96 || p->M > 192 || p->ready || !deep256_enabled() || (p->M <= 128 && !deep128_enabled())) return none;
  const int kblocks = (int)((p->K + SM90_BK - 1) / SM90_BK);
  if (kblocks < 32 || (p->M <= 128 && p->in_dtype == W8A8_DTYPE_INT8 && kblocks < 64)) return none;
  const long long tiles = (p->N + SM90_BM - 1) / SM90_BM, token_tiles = (p->M + 63) / 64;
  const int ci = find_config(p->in_dtype == W8A8_DTYPE_INT8 ? "int8_swap_n64_deep" : "fp8_swap_n64_deep");
  const sm90_plan pl = deep_split(dev, ci, token_tiles * tiles, kblocks, num_sms);
  return pl.split == 2 ? pl : none;
}

static int g_split256 = -1;  // W8A8_SM90_SPLIT256: 1 (default) plan's split-K tile at 129..256 tokens, 0 not
static int split256_enabled(void) { return w8a8_env_flag(&g_split256, "W8A8_SM90_SPLIT256", 1); }

// W8A8_SM90_NARROW256: plan's 128 x 64 tile at 129..256 tokens: 1 wherever it applies, 0 never, unset
// the rule (mode 2: where the second token tile holds more than 64 rows, 193..256 tokens).
static int g_narrow256 = -1;
static int narrow256_mode(void) { return w8a8_env_mode(&g_narrow256, "W8A8_SM90_NARROW256", 2); }

// The share of whole waves of num_sms CTAs that `tiles` tiles fill (1.0: no SM idle in the last wave).
static double wave_share(int64_t tiles, int num_sms) {
  return (double)tiles / (double)(((tiles + num_sms - 1) / num_sms) * num_sms);
}
// 65..96 tokens (one token tile) and 129..192 (two) on the swap-AB deep ring with n80 / n96 token tiles, where
// deep_split's split is >= 2, with >= 32 K-blocks (>= 56 at 81..96 tokens) and no ready flags; at 129..192 after
// plan_deep256, so it replaces the unswapped 128-row token tiles only. 1.03-1.32x where the split is >= 2; at split
// 1, at K = 2048 and at 81..96 tokens with K = 4096 it lost (h200-session18-2026-11-30.txt). W8A8_SM90_WIDE_SWAP=0
// turns it off (hook w8a8_sm90_set_wide_swap).
static int g_wide_swap = -1;
static int wide_swap_enabled(void) { return w8a8_env_flag(&g_wide_swap, "W8A8_SM90_WIDE_SWAP", 1); }
static sm90_plan plan_wide_swap(int dev, const w8a8_mm_problem *p, int num_sms) {
  sm90_plan none = {-1, 1};
  if (p->ready || p->M <= 64 || (p->M > 96 && p->M <= 128) || p->M > 192 || !wide_swap_enabled()) return none;
  const int kblocks = (int)((p->K + SM90_BK - 1) / SM90_BK);
  if (kblocks < (p->M > 80 && p->M <= 96 ? 56 : 32)) return none;
  const long long token_tiles = p->M <= 96 ? 1 : 2, rows = (p->M + token_tiles - 1) / token_tiles;
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int ci = find_config(rows <= 80 ? (int8 ? "int8_swap_n80_deep" : "fp8_swap_n80_deep")
                                        : (int8 ? "int8_swap_n96_deep" : "fp8_swap_n96_deep"));
  const sm90_plan pl = deep_split(dev, ci, token_tiles * ((p->N + SM90_BM - 1) / SM90_BM), kblocks, num_sms);
  return pl.config >= 0 && pl.split >= 2 ? pl : none;
}
// ONE swapped token tile of 160 at 129..160 tokens (int8 at 129..144: 144), as cuBLASLt's 128x136..128x160 tiles
// there: a persistent grid, no split-K, the lean swapped epilogue, the token-tail twin through apply_tail where the
// tile is partial. Where 128-row token tiles need two (the second nearly empty) and the weight tiles fill the SMs:
// N / 128 in [3/4 SMs, 2 SMs], >= 32 K-blocks, no ready flags, the lean epilogue's conditions (no int8 zero point,
// quad_store_ok). fp8 1.07x, int8 1.04x geomean; on 20..64 weight tiles it lost (h200-session19-2026-11-30.txt).
// Unmeasured under W8A8_FP8_ACCUM_FAST. W8A8_SM90_SINGLE_SWAP=0 turns it off (hook w8a8_sm90_set_single_swap).
// out and ldo allow 4-element (8- / 16-byte) stores along n: sm90_args.quad_store, which the lean swapped
// epilogue needs (plan_single_swap asks the same).
static int quad_store_ok(const w8a8_mm_problem *p) {
  const uintptr_t esz = p->out_dtype == W8A8_DTYPE_FP32 ? 4 : 2;
  return (uintptr_t)p->out % (4 * esz) == 0 && p->ldo % 4 == 0;
}
static int g_single_swap = -1;
static int single_swap_enabled(void) { return w8a8_env_flag(&g_single_swap, "W8A8_SM90_SINGLE_SWAP", 1); }
static sm90_plan plan_single_swap(const w8a8_mm_problem *p, int num_sms) {
  sm90_plan none = {-1, 1};
  if (p->ready || p->M <= SM90_BM || p->M > 160 || !single_swap_enabled()) return none;
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int64_t wtiles = (p->N + SM90_BM - 1) / SM90_BM;
  if ((int8 && p->azp_mode != W8A8_AZP_NONE) || !quad_store_ok(p) || 4 * wtiles < 3 * (int64_t)num_sms ||
      wtiles > 2 * (int64_t)num_sms || (p->K + SM90_BK - 1) / SM90_BK < 32)
    return none;
  // (int8 at 129..144 tokens: the n144 tile, h200-session28-2026-12-02.txt)
  sm90_plan pl = {find_config(int8 ? (p->M <= 144 ? "int8_swap_n144_ps" : "int8_swap_n160_ps") : "fp8_swap_n160_ps"), 1};
  return pl;
}
// TWO swapped token tiles of 80 (129..160 tokens) or 96 (161..192) without split-K, fp8 only (persistent, the lean
// swapped epilogue), where the rules above did not apply: 2 x N / 128 <= SMs (one wave), >= 32 K-blocks, no ready
// flags, quad_store_ok. fp8's promotion costs the 128 x 128 tile more than the swapped tile's extra epilogue: 1.04x
// geomean, up to 1.20x; int8 lost everywhere (h200-session20-2026-11-30.txt). Unmeasured under
// W8A8_FP8_ACCUM_FAST. W8A8_SM90_PAIR_SWAP=0 turns it off (hook w8a8_sm90_set_pair_swap).
static int g_pair_swap = -1;
static int pair_swap_enabled(void) { return w8a8_env_flag(&g_pair_swap, "W8A8_SM90_PAIR_SWAP", 1); }
static sm90_plan plan_pair_swap(const w8a8_mm_problem *p, int num_sms) {
  sm90_plan none = {-1, 1};
  if (p->in_dtype == W8A8_DTYPE_INT8 || p->ready || p->M <= SM90_BM || p->M > 192 || !pair_swap_enabled()) return none;
  const int64_t wtiles = (p->N + SM90_BM - 1) / SM90_BM;
  if (!quad_store_ok(p) || 2 * wtiles > (int64_t)num_sms || (p->K + SM90_BK - 1) / SM90_BK < 32) return none;
  sm90_plan pl = {find_config(p->M <= 160 ? "fp8_swap_n80_ps" : "fp8_swap_n96_ps"), 1};
  return pl;
}
// Whether configuration ci is one of plan_wide_swap's (fold_move leaves those alone).
static int is_wide_swap(int ci) {
  return ci >= 0 && CONFIGS[ci].swap && CONFIGS[ci].splitk && (CONFIGS[ci].bn == 80 || CONFIGS[ci].bn == 96);
}

// W8A8_SM90_FOLD: the token tail's fold (tail_plan; the kernel's sm90_tail_fold) and the 128 x 64 tile for a single
// partial token tile. 0 off; 1 the first rule (the fold wherever a twin can take it, and the 128 x 64 tile at
// 65..127 tokens where N / 64 is in [SMs / 2, SMs]): 2-5% slower end to end; unset (2) the measured rule
// (fold_measured, apply_tail's grid, fold_move): 65..80 tokens where the 128 x 64 tile fills >= 90% of the SMs (up
// to 1.10x), and fp8's 128 x 128 twin under the weights-constant hint (up to 1.16x; h200-session17-2026-11-30.txt).
static int g_fold = -1;
static int fold_mode(void) { return w8a8_env_int(&g_fold, "W8A8_SM90_FOLD", 2, 0, 2); }
// The 128 x 64 tile's token ceiling under the measured rule: int8 80, fp8 72.
static int fold_max_tokens(int int8) { return int8 ? 80 : 72; }
// The skinny tiles (plan_skinny; W8A8_SM90_SKINNY, hook w8a8_sm90_set_skinny): one token tile over 64-row weight
// tiles, no split-K, as cuBLASLt runs small M; never with ready flags (the kernel does not wait). Modes:
// 1: 16..64 tokens where the weight tiles alone fill 0.9..1 of a wave and K has <= 16 K-blocks (1.17-1.21x on
//    70b-o-tp4, h200-session22-2026-12-01.txt);
// 2: also from 0.45 of a wave with <= 32 K-blocks, and from 0.9 with any K (fp8 1.06-1.10x over mode 1);
// 3: mode 2's rule over 1..80 tokens, and fp8 at 129..144 where the weight tiles fill >= 0.7 of a wave (fp8
//    1.06-1.08x over mode 2, int8 1.02-1.05x; h200-session23-2026-12-01.txt);
// 4 (default): mode 3 and the pairs (below); 0: off.
static int g_skinny = -1;
// W8A8_SM90_SKINNY_SHIFT (default 1; 0 for A/B runs; tail mode 0 turns it off too): a partial last token tile of a
// skinny plan with more than one token tile (the pairs' second tile) loads the BN rows that end at the last token
// instead of a box that runs past it (sm90_skinny_row0 in the kernel).
static int g_skinny_shift = -1;
__attribute__((unused)) static int skinny_shift_enabled(void) {
  return w8a8_env_flag(&g_skinny_shift, "W8A8_SM90_SKINNY_SHIFT", 1);
}
static int skinny_mode(void) { return w8a8_env_int(&g_skinny, "W8A8_SM90_SKINNY", 4, 0, 4); }
// W8A8_SM90_SKINNY_K2 (hook w8a8_sm90_set_skinny_k2): plan_skinny's tiles as their _k2 twins (two consumer
// warpgroups): 2 (default) fp8 single tiles of 24..48 tokens (1.02-1.05x), 1 every twin, 0 none. The other twins
// ran even or slower (int8, whose one warpgroup already runs two wgmma chains, 0-8% slower from n32 up; the 8b-o
// pairs 0.98-1.00x; h200-session26-2026-12-01.txt).
static int g_skinny_k2 = -1;
static int skinny_k2(void) { return w8a8_env_int(&g_skinny_k2, "W8A8_SM90_SKINNY_K2", 2, 0, 2); }
// W8A8_SM90_SKINNY_WIDE (hook w8a8_sm90_set_skinny_wide): mode 4 also plans the wide fp8 tiles (two consumer
// warpgroups) where a few token tiles of them fill a wave. 1: three token tiles on 40..44 weight tiles (70b-qkv-tp4)
// at 129..144 (n48) and 193..384 tokens, two on 60..66 with <= 32 K-blocks (8b-o) at 145..192 (1.04-1.21x,
// h200-session26-2026-12-01.txt); 2 (default): as 1 with the _k2r twins from n112 up, three token tiles up to 480
// and at 513..528 tokens, and two on 60..66 weight tiles with >= 64 K-blocks (8b-down) at 193..352 (up to 1.32x
// over mode 1, h200-session27-2026-12-02.txt); 0 off.
static int g_skinny_wide = -1;
static int skinny_wide(void) { return w8a8_env_int(&g_skinny_wide, "W8A8_SM90_SKINNY_WIDE", 2, 0, 2); }
// Mode 4's pairs (the _mc2 configurations: two token tiles of one weight tile, the weights multicast, as cuBLASLt
// on 8b-o): where the weight tiles fill at most half of the SMs and twice them >= 0.9 of a wave, at 33..128 tokens
// with <= 32 K-blocks and at 129..144 with any K; the pair's tile the smallest that holds half of M (a partial second
// tile shifted back over real rows: W8A8_SM90_SKINNY_SHIFT). 8b-o fp8 1.02-1.14x from 48 tokens; below 33 tokens,
// and on 8b-down's 112 K-blocks below 129, they lost (h200-session24-2026-12-01.txt).
// The smallest token tile of `tiles` (ascending, n of them) that holds m tokens; 0 if none does.
static int smallest_tile(const int *tiles, int n, int64_t m) {
  for (int i = 0; i < n; i++)
    if (m <= tiles[i]) return tiles[i];
  return 0;
}
static sm90_plan plan_skinny(const w8a8_mm_problem *p, int num_sms) {
  // The token tiles each rule picks from (the smallest that holds M, or half of M for a pair). Mode 3: fp8 n8 up to
  // 8 tokens (n16 ran 3-10% slower than n24 at 9..15), int8 n16 below 16 (n8 / n16 / n24 within 2%), no n40 / n72 /
  // n136 for int8 (wgmma s8: N % 16 == 0 above 32); modes 1 and 2 the first four.
  static const int first[] = {24, 32, 48, 64};
  static const int fp8_one[] = {8, 24, 32, 40, 48, 64, 72, 80, 136, 144}, int8_one[] = {16, 24, 32, 48, 64, 80};
  static const int fp8_pair[] = {8, 16, 24, 32, 48, 64, 72}, int8_pair[] = {8, 16, 32, 48, 64, 80};
  static const int wide3[] = {88, 96, 112, 128}, wide2[] = {88, 96};
  static const int wide3r[] = {88, 96, 112, 128, 144, 160, 176}, wide2r[] = {112, 128, 144, 160, 176};
#define SKINNY_TILE(L, M) smallest_tile(L, (int)(sizeof L / sizeof L[0]), M)
  sm90_plan pl = {-1, 1};
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int64_t wt = (p->N + SM90_SKINNY_BM - 1) / SM90_SKINNY_BM;
  const int64_t kblocks = (p->K + SM90_BK - 1) / SM90_BK;
  const int wmode = skinny_wide();
  if (!p->ready && !int8 && p->M >= 129 && p->M <= 528 && skinny_mode() == 4 && wmode) {
    int wide = 0;
    if (3 * wt <= num_sms && 30 * wt >= 9LL * num_sms) {  // three token tiles fill 0.9..1 of a wave
      if (p->M <= 144)
        wide = 48;
      else if (p->M > 192 && wmode == 1 && p->M <= 384)
        wide = SKINNY_TILE(wide3, (p->M + 2) / 3);
      else if (p->M > 192 && wmode == 2 && (p->M <= 480 || p->M > 512))  // (481..512: the 128 x 128 tile)
        wide = SKINNY_TILE(wide3r, (p->M + 2) / 3);
    } else if (2 * wt <= num_sms && 20 * wt >= 9LL * num_sms) {  // two fill 0.9..1 of a wave
      if (kblocks <= 32 && p->M >= 145 && p->M <= 192)
        wide = SKINNY_TILE(wide2, (p->M + 1) / 2);
      else if (wmode == 2 && kblocks >= 64 && p->M >= 193 && p->M <= 352)
        wide = SKINNY_TILE(wide2r, (p->M + 1) / 2);
    }
    if (wide) {
      char name[40];
      snprintf(name, sizeof name, "fp8_skinny_n%d_k2%s", wide, wmode == 2 && wide >= 112 ? "r" : "");
      pl.config = find_config(name);
      return pl;
    }
  }
  int mode = p->ready || p->M < 1 || p->M > 144 ? 0 : skinny_mode();
  const int full = wt * 10 >= 9LL * num_sms;  // the weight tiles alone fill >= 0.9 of one wave
  int bn = 0;
  const char *pair = "";
  if (mode == 4) {
    if (p->M >= 33 && 2 * wt <= num_sms && 20 * wt >= 9LL * num_sms && (kblocks <= 32 || p->M > 128)) {
      bn = int8 ? SKINNY_TILE(int8_pair, (p->M + 1) / 2) : SKINNY_TILE(fp8_pair, (p->M + 1) / 2);
      pair = "_mc2";
    }
    mode = 3;  // elsewhere
  }
  if (!bn) {
    if (!mode || wt > num_sms) return pl;
    if (mode < 3 && (p->M < 16 || p->M > 64)) return pl;
    if (mode == 3 && ((p->M > 80 && p->M <= 128) || (p->M > 128 && int8))) return pl;
    if (mode == 1 && !(full && kblocks <= 16)) return pl;
    if (mode >= 2 && !(full || (wt * 20 >= 9LL * num_sms && kblocks <= 32))) return pl;  // >= 0.45 of a wave
    if (p->M > 128 && wt * 10 < 7LL * num_sms) return pl;                                // 129..144: >= 0.7
    bn = mode < 3 ? SKINNY_TILE(first, p->M) : int8 ? SKINNY_TILE(int8_one, p->M) : SKINNY_TILE(fp8_one, p->M);
  }
#undef SKINNY_TILE
  char name[40];
  snprintf(name, sizeof name, "%s_skinny_n%d%s", int8 ? "int8" : "fp8", bn, pair);
  pl.config = find_config(name);
  const int k2mode = skinny_k2();
  if (k2mode == 1 || (k2mode == 2 && !int8 && !*pair && bn >= 24 && bn <= 48)) {
    char k2[44];
    snprintf(k2, sizeof k2, "%s_k2", name);
    const int c2 = find_config(k2);
    if (c2 >= 0) pl.config = c2;
  }
  return pl;
}

static int g_wide192 = -1;  // W8A8_SM90_WIDE192: 1 (default) plan's 128 x 192 rule, 0 off
// W8A8_SM90_HDB (hook w8a8_sm90_set_hdb): 1 (default) the 128 x 192 rule's fp8 tile is fp8_128x192_promote_hdb
// (the promoted halves' temporaries alternate, so a warpgroup always has a half in flight), 0 the plain one. hdb
// faster on 20 of 21 rows, 1.04-1.08x on the rule's shapes (h200-session21-2026-12-01.txt).
static int g_hdb = -1;
static int hdb_enabled(void) { return w8a8_env_flag(&g_hdb, "W8A8_SM90_HDB", 1); }
static int g_wide160 = -1;  // W8A8_SM90_WIDE160: 1 (default) plan's 128 x 160 rule (inside the 192 rule's switch), 0 off
static int wide160_enabled(void) { return w8a8_env_flag(&g_wide160, "W8A8_SM90_WIDE160", 1); }
static int wide192_enabled(void) { return w8a8_env_flag(&g_wide192, "W8A8_SM90_WIDE192", 1); }
static sm90_plan plan(int dev, const w8a8_mm_problem *p, int num_sms) {
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  // The rules in order: plan_skinny (1..144 tokens; the wide tiles up to 528), the deep ring at 1..64 tokens
  // (plan_deep16, plan_deep), plan_small where those decline up to 32 tokens or where the weight tiles outnumber the
  // SMs (up to swap64_max()), the rules for 65..256 tokens, then the 128 x 256 / 192 / 160 / 128 pick by wave fill.
  // What none of them takes at 33..128 tokens gets one 128-row token tile: no step at 64 -> 65
  // (h200-sm90-2026-11-29.md, h200x2-sm90-ab-2026-11-29-s4.txt).
  const int64_t tiles128 = ((p->M + 127) / 128) * ((p->N + 127) / 128);
  const int kblocks_all = (int)((p->K + SM90_BK - 1) / SM90_BK);
  if (p->M <= 528) {  // (above 144 tokens only W8A8_SM90_SKINNY_WIDE's tiles)
    const sm90_plan pl = plan_skinny(p, num_sms);
    if (pl.config >= 0) return pl;
  }
  if (p->M <= 16) {
    const sm90_plan pl = plan_deep16(dev, p, num_sms);
    return pl.config >= 0 ? pl : plan_small(p, num_sms);
  }
  if (p->M <= 64) {
    const sm90_plan pl = plan_deep(dev, p, num_sms);
    if (pl.config >= 0) return pl;
  }
  if (p->M <= 32) return plan_small(p, num_sms);
  if (p->M <= swap64_max() && !p->ready && kblocks_all >= 16 && (p->N + SM90_BM - 1) / SM90_BM > num_sms &&
      (p->N + SM90_BM - 1) / SM90_BM <= 2 * (int64_t)num_sms) {
    const sm90_plan pl = plan_small(p, num_sms);
    if (pl.config >= 0) return pl;
  }
  if (fold_mode() == 1 && !p->ready && p->M > 64 && p->M < SM90_BM && 2 * ((p->N + 63) / 64) >= num_sms &&
      (p->N + 63) / 64 <= num_sms) {
    sm90_plan pl = {find_config(int8 ? "int8_128x64" : "fp8_128x64_promote"), 1};
    if (pl.config >= 0) return pl;
  }
  if (p->M <= 96) {
    const sm90_plan pl = plan_wide_swap(dev, p, num_sms);
    if (pl.config >= 0) return pl;
  }
  {
    const sm90_plan pl = plan_deep80(dev, p, num_sms);
    if (pl.config >= 0) return pl;
  }
  {
    const sm90_plan pl = plan_deep256(dev, p, num_sms);
    if (pl.config >= 0) return pl;
  }
  if (p->M > 128) {
    const sm90_plan pl = plan_wide_swap(dev, p, num_sms);
    if (pl.config >= 0) return pl;
  }
  {
    const sm90_plan pl = plan_single_swap(p, num_sms);
    if (pl.config >= 0) return pl;
  }
  {
    const sm90_plan pl = plan_pair_swap(p, num_sms);
    if (pl.config >= 0) return pl;
  }
  // The 128 x 128 tile with K split over a cluster until one wave fills the SMs, where few weight tiles meet a long
  // K: up to 128 tokens on <= 32 weight tiles with >= 64 K-blocks (8b-down 42.9 -> 33.8 us; with a shorter K the
  // split's fixed cost lost, h200-torch-compare-2026-11-29-v3.md), and at 129..256 tokens (W8A8_SM90_SPLIT256) on
  // <= 64 weight tiles with >= 96 K-blocks (8b-down 1.03-1.34x; with 64 K-blocks it lost,
  // h200-sm90-tail-twins-2026-11-30.txt). The partial token tile then goes to the twin (apply_tail).
  const int split256 = p->M > 128 && p->M <= 256 && tiles128 <= 64 && kblocks_all >= 96 && split256_enabled();
  if (((p->M <= 128 && tiles128 <= 32) || split256) && kblocks_all >= 64) {
    sm90_plan pl = {find_config(int8 ? "int8_128x128_splitk" : "fp8_128x128_promote_splitk"), 1};
    if (pl.config >= 0) {
      for (int s = 2; s <= SM90_MAX_SPLIT; s++) {
        if (kblocks_all / s < 4) break;  // keep each CTA's share of K worth its fixed cost
        long long slots = (long long)max_active_clusters(dev, pl.config, s, num_sms) * s;
        if (tiles128 * s > slots) break;  // one wave
        pl.split = s;
      }
      if (pl.split > 1) return pl;
    }
  }
  // 89..128 tokens (one 128-row tile, at most 39 rows out of bounds) with at most SMs / 2 weight tiles of 128: the
  // 128 x 64 tile (twice the CTAs, still one wave), with K <= 4096 (1.3x at 128 tokens,
  // h200-sm90-timeline-2026-11-29.txt) and from 104 tokens with any K (70b-down-tp4 1.12-1.19x at 104..128; it lost
  // at 96..101, h200-sm90-session13-2026-11-30.txt). Unmeasured at 89..95 tokens, and with K above 4096 where the
  // split-K rule above declined.
  if (p->M > 88 && p->M <= 128 && 2 * ((p->N + 127) / 128) <= num_sms && (kblocks_all <= 32 || p->M >= 104)) {
    sm90_plan pl = {find_config(int8 ? "int8_128x64" : "fp8_128x64_promote"), 1};
    if (pl.config >= 0) return pl;
  }
  // 129..256 tokens (W8A8_SM90_NARROW256): the same 128 x 64 tile where its two token tiles still fit one wave
  // (2 x N / 64 <= SMs) with <= 32 K-blocks, and its token-tail twin (apply_tail). The rule takes it where the second
  // token tile holds more than 64 rows: 1.21-1.24x at 256 tokens, even at 192, 0.95-0.99x at 129
  // (h200-sm90-rules-2026-11-30.txt).
  const int narrow256 = p->M > 128 && p->M <= 256 ? narrow256_mode() : 0;
  if (narrow256 && (narrow256 == 1 || p->M > 192) && 2 * ((p->N + 63) / 64) <= num_sms && kblocks_all <= 32) {
    sm90_plan pl = {find_config(int8 ? "int8_128x64" : "fp8_128x64_promote"), 1};
    if (pl.config >= 0) return pl;
  }
  // 128 x 256 unless the 128 x 128 tile fills the SMs clearly better (few tiles); fp8 too (fp8_128x256_promote):
  // 1.08-1.23x where this rule picks it, slower where it keeps the 128 x 128 tile (h200x2-sm90-ab-2026-11-29-s4.txt).
  int64_t tm = (p->M + 127) / 128;
  int64_t t256 = tm * ((p->N + 255) / 256), t128 = tm * ((p->N + 127) / 128);
  double e256 = wave_share(t256, num_sms);
  double e128 = wave_share(t128, num_sms);
  int wide = e256 >= e128 * 0.9;
  // fp8 always promotes (PRECISE): QGMMA's own accumulation over the whole K range measured an error of 1.1e-3 of
  // sum|a||b| at K = 429 on random e4m3 data (docs/HOPPER.md), growing with K, where promotion keeps it to one
  // 128-deep block's truncation. fp8_128x256 (fast accumulation) is what W8A8_FP8_ACCUM_FAST maps the wide tile to
  // (apply_fp8_accum).
  const char *name = int8 ? (wide ? "int8_128x256" : "int8_128x128") : (wide ? "fp8_128x256_promote" : "fp8_128x128_promote");
  // W8A8_SM90_WIDE192 (default 1): the 128 x 192 tile where its share of the SMs' work, counting the last column
  // tile's empty columns, beats the pick above's by 10% (70b-qkv-tp4 at 1024 tokens: 0.81 of one wave against 0.61):
  // 1.15-1.29x there (h200-sm90-session16-2026-11-30.txt). Not with ready flags.
  if (wide192_enabled() && !p->ready) {
    const int64_t n192 = (p->N + 191) / 192, t192 = tm * n192;
    const double e192 = wave_share(t192, num_sms) * ((double)p->N / (double)(n192 * 192));
    const int64_t wn = wide ? 256 : 128, nw = (p->N + wn - 1) / wn;
    const double ew = (wide ? e256 : e128) * ((double)p->N / (double)(nw * wn));
    if (e192 > ew * 1.1) name = int8 ? "int8_128x192" : hdb_enabled() ? "fp8_128x192_promote_hdb" : "fp8_128x192_promote";
    // W8A8_SM90_WIDE160 (default 1): the 128 x 160 tile likewise where its share beats the pick so far by 10%, on at
    // most two waves of its tiles (at 13 waves it lost, 70b-gateup-tp4 2400 tokens): int8 1.12-1.18x, fp8 1.04-1.06x
    // at 70b-qkv-tp4 1024 / 2048 tokens (h200-session28-2026-12-02.txt), 1.02-1.15x on other N
    // (h200-session29-2026-12-02.txt). fp8 with HDB only (the tile has no plain promoting twin).
    if (wide160_enabled() && (int8 || hdb_enabled())) {
      const int64_t n160 = (p->N + 159) / 160, t160 = tm * n160;
      const double e160 = wave_share(t160, num_sms) * ((double)p->N / (double)(n160 * 160));
      if (t160 <= 2 * (int64_t)num_sms && e160 > (e192 > ew * 1.1 ? e192 : ew) * 1.1)
        name = int8 ? "int8_128x160" : "fp8_128x160_promote_hdb";
    }
  }
  sm90_plan pl = {find_config(name), 1};
  return pl;
}

// 129..255 tokens (two 128-row tiles, the second partial), heuristic plans only: the planned tile's twin with B
// multicast over a 2-CTA cluster on the two M tiles: 1.026x geomean (0.95-1.11x, h200-sm90-partial-m-2026-11-30.txt),
// kept for the small gain. Not with ready flags (all-gather + GEMM keeps the plain tiles), nor with the
// weights-constant hint (multicast tiles do not take it; unmeasured against it). Runs after apply_fp8_accum: under
// FAST the wide fp8 tile is fp8_128x256 already, which has no twin.
static int g_mc2m = -1;  // W8A8_SM90_MC2M: 1 (default) the multicast twins for 129..255 tokens, 0 the plain tiles
static int mc2m_enabled(void) { return w8a8_env_flag(&g_mc2m, "W8A8_SM90_MC2M", 1); }
static void apply_mc2m(const w8a8_handle *h, const w8a8_mm_problem *p, sm90_plan *pl) {
  if (pl->config < 0 || p->M <= 128 || p->M >= 256 || p->ready || h->weights_constant || !mc2m_enabled()) return;
  static const char *const twins[][2] = {{"int8_128x128", "int8_128x128_mc2"},
                                         {"int8_128x256", "int8_128x256_mc2"},
                                         {"fp8_128x128_promote", "fp8_128x128_promote_mc2"},
                                         {"fp8_128x256_promote", "fp8_128x256_promote_mc2"}};
  for (int i = 0; i < 4; i++)
    if (!strcmp(CONFIGS[pl->config].name, twins[i][0])) {
      const int to = find_config(twins[i][1]);
      if (to >= 0) pl->config = to;
      return;
    }
}

// The token tail's boxes in the configurations with it (sm90_config.tail): w8a8_sm90_set_tail(mode)
// 1 (default) tail_plan's rule, 0 never (TMA fills the whole box), 2 the valid rows in small boxes
// wherever a token tile is partial, 3 one box of the valid rows rounded up to 8 wherever a token tile
// is partial, 4 the fold where tail_plan can take it (else as 1). Modes 2..4 are for tests and
// measurements (sm90_dev -R). Whether the heuristic takes those configurations at all: apply_tail.
static int g_tail = -1;
static int tail_mode(void) {
  const int v = __atomic_load_n(&g_tail, __ATOMIC_RELAXED);
  return v < 0 ? 1 : v;
}
// The rule (h200-sm90-tail-twins-2026-11-30.txt): ONE box of the partial tile's valid rows rounded up to 8, where
// there are exactly two token tiles (129 tokens: int8 1.31-1.64x, fp8 1.25-1.43x); fp8 (but see fp8_any_box) and
// int8's 128 x 256 tile only where that box is at most an eighth of the tile (16 rows unswapped, 8 swapped): larger
// boxes lost there. Not where the partial tile is the only token tile (every CTA splits its loads: 8-17% slower;
// but see W8A8_SM90_TAIL_SINGLE), nor with three token tiles; several boxes always lost (~85 cycles per box and
// stage). Except on the n64 deep ring with three or more token tiles (plan_deep256's): any box, fp8 too, where the
// partial tile's TMA fill was a third of the kernel (1.08-1.36x, h200-sm90-deep256-2026-11-30.txt).
typedef struct tail_boxes {
  int n, rows;
} tail_boxes;
// W8A8_SM90_FP8_TAIL_BOX: where the handle has no weights-constant hint, fp8's cap on the unswapped tiles of up to
// 128 columns with two token tiles: 0 an eighth of the tile (always so with the hint: larger boxes lost up to 14%
// there, h200-sm90-tail-twins-2026-11-30.txt), 1 int8's (any box, the swapped tiles too), unset 2: half the tile.
// Without the hint a 32-row box won 1.12-1.36x, a 64-row box 0.94-1.18x, a 96-row box lost 0.77-0.93x
// (h200-sm90-session12-2026-11-30.txt): hence half.
static int g_fp8_tail_box = -1;
static int fp8_any_box(const w8a8_handle *h) {
  return h->weights_constant ? 0 : w8a8_env_mode(&g_fp8_tail_box, "W8A8_SM90_FP8_TAIL_BOX", 2);
}
// W8A8_SM90_TAIL_SINGLE (default 1, 0 for A/B runs): the rule also takes the partial tile where it is the ONLY
// token tile (65..127 tokens) on the plain 128 x 128 tiles (int8, and fp8 where fp8_box is not 0: not with the
// weights-constant hint, unmeasured there), any box, and on plan_single_swap's swapped n144 / n160 twins; apply_tail's
// 70% grid gate decides where. 1.12-1.30x on 112 CTAs, 5-15% slower on 32..64 CTAs, which the gate keeps out
// (h200-sm90-session16-2026-11-30.txt). Not the 128 x 64 tile's twin: it lost at 96..104 tokens.
static int g_tail_single = -1;
static int tail_single_enabled(void) { return w8a8_env_flag(&g_tail_single, "W8A8_SM90_TAIL_SINGLE", 1); }
// The fold (the kernel's sm90_tail_fold): a single partial token tile of 65..127 rows on an unswapped, unsplit,
// unicast twin loads rows [0, 64) and [M - 64, M) in one 3-D box, every row a real row of A (no fill, no short box),
// returned as one box of SM90_BM rows. Taken in tail mode 4 (sm90_dev -R 4, tests) and in mode 1 as W8A8_SM90_FOLD
// says. Its rows are real, yet it ran nearly as slow as one box of valid rows: the cost is not the fill alone
// (h200-session17-2026-11-30.txt). Unswapped tiles only: a swapped tile's token box is BN rows (n144 / n160), so one
// box of exactly 128 valid rows is an ordinary tail there; taken for a fold, it would put the fold's 3-D map over
// the WEIGHTS, which the swapped kernel's 2-D load faults on (an illegal instruction).
static int tail_is_fold(const sm90_config *c, tail_boxes t) { return !c->swap && t.n == 1 && t.rows == SM90_BM; }
// Fold mode 2 (see g_fold): the 128 x 64 twin up to fold_max_tokens, and the fp8 128 x 128 twin where fp8_box is
// 0 (the weights-constant hint, or W8A8_SM90_FP8_TAIL_BOX=0: the single-tile tail does not take it) up to 80
// tokens; apply_tail adds the grid (>= 90% of the SMs for the 128 x 64 twin, the tail's 70% for the other),
// fold_move the 128 x 64 plan. (A tuned 128 x 64 plan folds here too, the hint and N / 64 <= SMs unchecked:
// those two are fold_move's, which tuned plans skip.)
static int fold_measured(const sm90_config *c, int64_t token_rows, int fp8_box) {
  if (c->bn == 64) return token_rows <= fold_max_tokens(c->int8);
  return c->bn == 128 && !c->int8 && fp8_box == 0 && token_rows <= 80;
}
// bench/sm90_dev -P only: 1 = A's tensor map covers whole token tiles (M rounded up to 128, or to the token tile
// when swapped), so a partial tile's rows past M are read from memory instead of being filled by TMA. This READS
// PAST THE CALLER'S A: only for a caller whose A buffer has those rows (sm90_dev allocates 16384); the outputs past
// M are still not stored. No shift under it (its rows are what -P measures).
__attribute__((unused)) static int g_pad_tokens;  // set but unread without sm_90a
// W8A8_SM90_SHIFT (default 1, 0 for A/B runs): the kernel's shift (sm90_args.shift_x, sm90_x0): on the unswapped
// tiles without split-K, stream-K (a unit's K range differs: other fp8 sums for the shared rows) or pingpong (plain,
// multicast and tail twins alike), where the last of two or more token tiles is partial, that tile loads the LAST
// 128 tokens through the kernel's own map instead of a box that runs past M (TMA's out-of-bounds fill) or the tail's
// short boxes: fp8 1.05x, int8 1.13x geomean at 385..529 tokens (h200-session27-2026-12-02.txt). Under tail_plan's
// rule (tail mode 1) only, so that sm90_dev -R and the tail tests get the boxes they ask for; never with ready flags.
static int g_shift = -1;
static int shift_applies(const sm90_config *c, int64_t token_rows, int ready) {
  return !c->swap && !c->splitk && !c->sk && !c->pp && !c->bm && token_rows > SM90_BM && token_rows % SM90_BM != 0 &&
         !ready && !g_pad_tokens && tail_mode() == 1 && w8a8_env_flag(&g_shift, "W8A8_SM90_SHIFT", 1);
}
static tail_boxes tail_plan(const sm90_config *c, int64_t token_rows, int mode, int fp8_box, int ready) {
  tail_boxes t = {0, 0};
  if (mode == 1 && shift_applies(c, token_rows, ready)) return t;  // (the shift loads the tile's rows)
  const int box = c->swap ? c->bn : SM90_BM;
  const int v = (int)(token_rows % box);
  if (!c->tail || mode == 0 || v == 0 || box < 16 || (c->swap && c->mcast == 2)) return t;
  // (not with ready flags: the kernel's waits would cover the rows, but it is unmeasured there; the rule below
  // then decides, as without the fold)
  const int fm = mode == 1 ? fold_mode() : 0;
  if ((mode == 4 || fm == 1 || (fm == 2 && fold_measured(c, token_rows, fp8_box))) && !ready && !c->swap &&
      !c->splitk && c->mcast != 2 && token_rows > 64 && token_rows < SM90_BM) {
    t.n = 1;
    t.rows = SM90_BM;
    return t;
  }
  if (mode == 4) mode = 1;
  if (mode == 2) {  // boxes of an eighth of the tile (at least 8 rows; a multiple of 8 that divides the box)
    int r = box / 8 < 8 ? 8 : (box / 8 + 7) / 8 * 8;
    while (box % r && r < box) r += 8;  // (n160: 32, since an eighth, 20, is no multiple of 8)
    t.rows = r;
    t.n = (v + t.rows - 1) / t.rows;
    return t;
  }
  const int rows = (v + 7) / 8 * 8;  // one box of the valid rows (fewer than 8 missing rows: TMA fills)
  const int two_tiles = token_rows > box && token_rows < 2 * (int64_t)box;
  int cap = box / 8 < 8 ? 8 : box / 8;  // fp8_box: fp8_any_box's mode
  if ((c->int8 || fp8_box == 1) && (c->swap || c->bn <= 128)) cap = box;
  else if (!c->int8 && fp8_box == 2 && !c->swap && c->bn <= 128) cap = box / 2;
  // three or more token tiles on the n64 deep ring (plan_deep256's): any box (see above)
  const int deep_many = c->swap && c->minb == 1 && box == 64 && token_rows > 2 * (int64_t)box;
  // (the swapped unsplit tiles: plan_single_swap's n144 / n160 twins)
  const int single = token_rows < box && (c->swap || c->bn == 128) && !c->splitk && c->mcast != 2 &&
                     (c->int8 || fp8_box != 0) && tail_single_enabled();
  if (rows < box && (mode == 3 || (two_tiles && rows <= cap) || deep_many || single)) {
    t.n = 1;
    t.rows = rows;
  }
  return t;
}

// The heuristic's *_tail twins (W8A8_SM90_TAIL, default 1; 0 for A/B runs): where the plan's configuration has a
// twin (the same tile, pipeline and split; the tail map on top), tail_plan's rule takes the partial token tile, and
// the grid fills at least 70% of the SMs. Below that the TMA fill of the missing rows cost nothing measurable while
// the twin's extra box per stage did (8b-o at 129 tokens: 13.0 -> 14.1 us); at 96 CTAs and more the tail won
// everywhere measured (h200-sm90-tail-twins-2026-11-30.txt).
static int g_tail_env = -1;
static void apply_tail(const w8a8_handle *h, const w8a8_mm_problem *p, sm90_plan *pl, int num_sms) {
  // Only under tail_plan's rule (mode 1): with the tail off or a test mode the twin would run without it.
  if (pl->config < 0 || tail_mode() != 1 || !w8a8_env_flag(&g_tail_env, "W8A8_SM90_TAIL", 1)) return;
  // (where the plan's tile takes the shift, its twin would run without boxes, its TAIL code for nothing)
  if (shift_applies(&CONFIGS[pl->config], p->M, p->ready != NULL)) return;
  char twin[64];
  snprintf(twin, sizeof twin, "%s_tail", CONFIGS[pl->config].name);
  const int to = find_config(twin);
  if (to < 0) return;
  const sm90_config *c = &CONFIGS[to];
  const int64_t tokens = p->M, weights = p->N;  // M is rows_x unswapped, rows_y swapped
  const int tb = c->swap ? c->bn : SM90_BM, wb = c->swap ? SM90_BM : c->bn;
  const int64_t ctas = (tokens + tb - 1) / tb * ((weights + wb - 1) / wb) * (c->splitk ? pl->split : 1);
  const tail_boxes bx = tail_plan(c, tokens, 1, fp8_any_box(h), p->ready != NULL);
  // the fold: any grid under rule 1; under rule 2 >= 90% of the SMs on the 128 x 64 twin (8b-qkv's 96 CTAs lost,
  // h200-session17-2026-11-30.txt), the tail's 70% elsewhere
  const int gate = tail_is_fold(c, bx) ? (fold_mode() == 1 ? 0 : c->bn == 64 ? 9 : 7) : 7;
  if (bx.n > 0 && ctas * 10 >= (int64_t)num_sms * gate) pl->config = to;
}

// Fold rule 2's plan (see g_fold): a single partial token tile of 65..fold_max_tokens rows goes to the 128 x 64
// tile, whose twin then takes the fold, where the tile's grid fills 90..100% of the SMs (N / 64 in [0.9 SMs, SMs]:
// 70b-down-tp4, 70b-o-tp4 on 132 SMs); not fp8 with the weights-constant hint (70b-o-tp4 0.96x, mixed), not with
// ready flags. Only over the heuristic's plan (not a tuned one), and not over plan_wide_swap's or a skinny plan.
static void fold_move(const w8a8_handle *h, const w8a8_mm_problem *p, sm90_plan *pl, int num_sms) {
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int64_t n64 = (p->N + 63) / 64;
  // (nor a skinny plan: the fold replacing the n72 / n80 skinny tiles at 65..80 tokens lost, 70b-down-tp4 fp8
  // 20.8 -> 23.6 us; h200-session23-2026-12-01.txt)
  if (fold_mode() != 2 || p->ready || p->M <= 64 || p->M > fold_max_tokens(int8) || n64 * 10 < 9LL * num_sms ||
      is_wide_swap(pl->config) || (pl->config >= 0 && CONFIGS[pl->config].bm) ||
      n64 > num_sms || (!int8 && h->weights_constant) || tail_mode() != 1 ||
      !w8a8_env_flag(&g_tail_env, "W8A8_SM90_TAIL", 1))
    return;
  const int to = find_config(int8 ? "int8_128x64" : "fp8_128x64_promote");
  if (to >= 0) {
    pl->config = to;
    pl->split = 1;
  }
}

// w8a8_set_fp8_accum(W8A8_FP8_ACCUM_FAST): the promoting 128 x 256 fp8 tile becomes the
// fast-accumulation one (the same tile and pipeline without the per-K-block promotion). Other
// configurations have no fast twin and keep promoting.
static void apply_fp8_accum(const w8a8_handle *h, sm90_plan *pl) {
  if (h->fp8_accum != W8A8_FP8_ACCUM_FAST || pl->config < 0) return;
  if (pl->config == find_config("fp8_128x256_promote")) pl->config = find_config("fp8_128x256");
}

// W8A8_SM90_PP=1 (default 0): where the plan is a cooperative large int8 tile (int8_128x256 / int8_128x128), or
// fp8 under W8A8_FP8_ACCUM_FAST (fp8_128x256, fp8_128x128_promote), and there are at least two 128 x 128 tiles per
// SM (each consumer warpgroup then has tiles of its own; with fewer, one warpgroup would do a whole tile alone),
// the pingpong tile instead. Off by default: slower or even (h200-sm90-pingpong-2026-11-30.txt).
static int g_pp = -1;
static int pp_enabled(void) { return w8a8_env_flag(&g_pp, "W8A8_SM90_PP", 0); }
static void apply_pp(const w8a8_handle *h, const w8a8_mm_problem *p, sm90_plan *pl, int num_sms) {
  if (!pp_enabled() || pl->config < 0) return;
  const int64_t tiles128 = ((p->M + 127) / 128) * ((p->N + 127) / 128);
  if (tiles128 < 2LL * num_sms) return;
  const char *n = CONFIGS[pl->config].name;
  int to = -1;
  if (!strcmp(n, "int8_128x256") || !strcmp(n, "int8_128x128")) to = find_config("int8_128x128_pp");
  if (!strcmp(n, "fp8_128x256") ||
      (!strcmp(n, "fp8_128x128_promote") && h->fp8_accum == W8A8_FP8_ACCUM_FAST))
    to = find_config("fp8_128x128_pp");
  if (to >= 0) pl->config = to;
}

// Stream-K (the kernel's SK, sm90_streamk.h). sk_fits: whether the stream-K twin ci can run
// p with the handle's workspace (its partial tiles in ws, sm90_sk_slots of them; two locks per stream-K
// tile) and with every CTA of its grid resident at once (a final split waits for lower-numbered units;
// the occupancy query says fewer where MPS or a smaller SM partition limits the device); where the
// schedule has no stream-K units it runs as a plain persistent grid and needs neither. *k: the schedule
// (units 0 where it does not fit).
static int sk_fits(const w8a8_handle *h, int ci, const w8a8_mm_problem *p, int num_sms, sm90_sk_plan *k) {
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  const sm90_config *c = &CONFIGS[ci];
  const int64_t tiles = ((p->M + SM90_BM - 1) / SM90_BM) * ((p->N + c->bn - 1) / c->bn);
  *k = sm90_sk_make(0, 0, 0);
  if (!st || !st->sk_locks || tiles > INT32_MAX / 2) return 0;
  *k = sm90_sk_make((int)tiles, (int)((p->K + SM90_BK - 1) / SM90_BK), num_sms * c->minb);
  if (k->units == 0) return 1;
  return (size_t)sm90_sk_slots(k) * SM90_BM * c->bn * 4 <= st->ws_bytes && 2LL * k->sk_tiles <= W8A8_SK_LOCKS &&
         max_active_clusters(h->device_index, ci, 1, num_sms) >= num_sms * c->minb;
}
// The plain tile of a stream-K twin (its name without "_sk"), -1 if none.
__attribute__((unused)) static int sk_plain(int ci) {
  char name[64];
  snprintf(name, sizeof name, "%s", CONFIGS[ci].name);
  const size_t n = strlen(name);
  if (n < 3 || strcmp(name + n - 3, "_sk")) return -1;
  name[n - 3] = 0;
  return find_config(name);
}
// Where the plan is the plain 128 x 128 tile (after the token-tail twin had its turn): its stream-K twin.
// W8A8_SM90_STREAMK=1 wherever the schedule has stream-K units (a last wave under 80% full, more than 8 K-blocks:
// sm90_sk_make), =0 never, unset the rule (mode 2): more than 128 tokens and even splits of at least 3 per tile (at
// most a third of the SMs' worth of tiles, >= 24 K-blocks): 1.22-1.32x at 70b-qkv-tp4 256 tokens, where two splits
// per tile and the continuous cut lost (0.72-0.95x; h200-sm90-streamk-2026-11-30.txt). Not with ready flags (the
// twin does not wait for arriving rows) nor the weights-constant hint (the twin does not preload).
// W8A8_SM90_SK_MC2 (default 1; 0 for A/Bs): the rule also over the multicast twins of the 128 x 128 tile that
// apply_mc2m planned at 129..255 tokens (their stream-K twin is the plain tile's): 1.08-1.39x at 70b-qkv-tp4 193..255
// tokens (h200-sm90-session12-2026-11-30.txt; fp8 there now gets plan_skinny's wide tiles first).
static int g_sk_mc2 = -1;
static int g_sk = -1;
static int sk_mode(void) { return w8a8_env_mode(&g_sk, "W8A8_SM90_STREAMK", 2); }
static void apply_sk(const w8a8_handle *h, const w8a8_mm_problem *p, sm90_plan *pl, int num_sms) {
  const int mode = pl->config >= 0 && !p->ready && !h->weights_constant ? sk_mode() : 0;
  if (mode == 0 || (mode == 2 && p->M <= 128)) return;
  char twin[64];  // the plan's "_sk" twin: only the plain 128 x 128 tiles have one
  snprintf(twin, sizeof twin, "%s_sk", CONFIGS[pl->config].name);
  const size_t n = strlen(twin);  // "X_mc2_sk" -> "X_sk" (W8A8_SM90_SK_MC2)
  if (n > 7 && !strcmp(twin + n - 7, "_mc2_sk") && w8a8_env_flag(&g_sk_mc2, "W8A8_SM90_SK_MC2", 1))
    memcpy(twin + n - 7, "_sk", 4);
  const int to = find_config(twin);
  sm90_sk_plan k;
  if (to < 0 || !sk_fits(h, to, p, num_sms, &k) || k.units == 0 || (mode == 2 && k.per_tile < 3)) return;
  pl->config = to;
}

// The tuning table's plan for p, if the handle has a table with an entry that applies (exact
// M, else the nearest M bucket of the same dtype, N and K whose configuration takes this M).
static int tuned_plan(const w8a8_handle *h, const w8a8_mm_problem *p, sm90_plan *pl) {
  const w8a8_tune_entry *e =
      w8a8_tune_lookup((const w8a8_tune_table *)h->tuning, p->in_dtype == W8A8_DTYPE_INT8, p->M, p->N, p->K);
  if (!e || e->config < 0 || e->config >= SM90_NUM_CONFIGS) return 0;
  const sm90_config *c = &CONFIGS[e->config];
  if (c->int8 != (p->in_dtype == W8A8_DTYPE_INT8) || (c->swap && p->M > 2 * (int64_t)c->bn)) return 0;
  // The skinny tiles do not wait for arriving rows (prepare refuses them with ready flags, and the fused
  // all-gather asks w8a8_sm90_accepts without its flags): the heuristic's plan there.
  if (c->bm && p->ready) return 0;
  pl->config = e->config;
  pl->split = c->splitk ? e->split : 1;
  return pl->split >= 1 && pl->split <= SM90_MAX_SPLIT;
}

// The plan of a launch without a forced configuration: the tuning table's, else the heuristic's
// with the multicast twin at 129..255 tokens; then the handle's settings (fast accumulation, and
// the opt-in pingpong tiles); last the token-tail twin where a token tile is partial (apply_tail,
// tuned plans included), and the stream-K twin where its rule takes the plain 128 x 128 tile (apply_sk,
// tuned plans included: the tuner times the plain tile, and the rule was measured against it).
static sm90_plan choose_plan(const w8a8_handle *h, const w8a8_mm_problem *p, int num_sms) {
  sm90_plan pl;
  const int tuned = tuned_plan(h, p, &pl);
  if (!tuned) {
    pl = plan(h->device_index, p, num_sms);
    fold_move(h, p, &pl, num_sms);
  }
  apply_fp8_accum(h, &pl);
  if (!tuned) apply_mc2m(h, p, &pl);
  apply_pp(h, p, &pl, num_sms);
  apply_tail(h, p, &pl, num_sms);
  apply_sk(h, p, &pl, num_sms);
  return pl;
}

// ---- entry points ------------------------------------------------------------------------------

#if defined(W8A8_HAVE_SM90A)
// Whether the kernel takes p (else W8A8_ERROR_UNSUPPORTED_DEVICE with the reason, nothing written).
static w8a8_status accepts(const w8a8_handle *h, const w8a8_mm_problem *p) {
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  if (!st || st->cc != 90)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the sm_90a kernel needs a compute capability 9.0 GPU (this is %d.%d)",
                    FN, st ? st->cc / 10 : 0, st ? st->cc % 10 : 0);
  if (p->in_dtype != W8A8_DTYPE_INT8 && p->in_dtype != W8A8_DTYPE_FP8_E4M3)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the sm_90a kernel takes int8 or fp8 operands", FN);
  // TMA: 16-byte aligned bases, row strides a multiple of 16 bytes (1-byte elements).
  if (((uintptr_t)p->a & 15) || (p->lda & 15))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "%s: the sm_90a kernel needs a 16-byte aligned A with lda %% 16 == 0 (a=%p, lda=%lld)", FN, p->a,
                    (long long)p->lda);
  if (((uintptr_t)p->b & 15) || (p->ldb & 15))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "%s: the sm_90a kernel needs a 16-byte aligned B with ldb %% 16 == 0 (b=%p, ldb=%lld)", FN, p->b,
                    (long long)p->ldb);
  if (p->K < 1 || p->M > INT32_MAX / 2 || p->N > INT32_MAX / 2 || p->K > INT32_MAX / 2 || p->ldo > ((int64_t)1 << 40) ||
      p->lda >= ((int64_t)1 << 39) || p->ldb >= ((int64_t)1 << 39))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the sm_90a kernel does not take M=%lld N=%lld K=%lld", FN,
                    (long long)p->M, (long long)p->N, (long long)p->K);
  if (!get_encode_tiled())
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the driver has no cuTensorMapEncodeTiled", FN);

  if (p->ready && (p->ready->n < 1 || p->ready->n > SM90_MAX_READY || p->ready->end[p->ready->n - 1] != p->M))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the sm_90a kernel takes 1..%d arriving chunks of A", FN,
                    SM90_MAX_READY);
  return W8A8_SUCCESS;
}

#endif

// bench/sm90_dev -T: the per-tile clock64 timeline (sm90_args.timeline) of the next launches; NULL: off.
__attribute__((unused)) static unsigned long long *g_timeline;
__attribute__((unused)) static int g_timeline_max, g_timeline_ctas;
extern "C" W8A8_HIDDEN void w8a8_sm90_set_pad_tokens(int on) { g_pad_tokens = on != 0; }

// Whether the kernels carry the timeline (built with -DW8A8_SM90_TIMELINE, see SM90_TL).
extern "C" W8A8_HIDDEN int w8a8_sm90_timeline_built(void) {
#if defined(W8A8_HAVE_SM90A)
  return SM90_TL;
#else
  return 0;
#endif
}
// Every configuration stamps; dev_buf holds max_ctas x max_tiles_per_cta x 4 values (sm90_args.timeline). Without
// W8A8_SM90_TIMELINE in the build the kernels ignore it.
extern "C" W8A8_HIDDEN void w8a8_sm90_set_timeline(unsigned long long *dev_buf, int max_tiles_per_cta, int max_ctas) {
  g_timeline = max_tiles_per_cta > 0 && max_ctas > 0 ? dev_buf : NULL;
  g_timeline_max = max_tiles_per_cta;
  g_timeline_ctas = max_ctas;
}

#if defined(W8A8_HAVE_SM90A)
static int g_staged = -1;  // W8A8_SM90_STAGED: 1 (default) staged epilogue where it applies, 0 never
static int staged_enabled(void) { return w8a8_env_flag(&g_staged, "W8A8_SM90_STAGED", 1); }
// W8A8_SM90_STAGED32: 1 (default) fp32 outputs through the lean epilogue's TMA stores, 0 through the direct epilogue
// (A/B runs)
static int g_staged32 = -1;
static int staged32_enabled(void) { return w8a8_env_flag(&g_staged32, "W8A8_SM90_STAGED32", 1); }

static int g_prm = -1;  // W8A8_SM90_PRM: 1 (default) the epilogue's scales through the shared-memory slot, 0 from global
static int prm_enabled(void) { return w8a8_env_flag(&g_prm, "W8A8_SM90_PRM", 1); }
static int g_lean = -1;  // W8A8_SM90_LEAN: 1 (default) sm90_epi_lean where it applies, 0 sm90_epi_staged
static int lean_enabled(void) { return w8a8_env_flag(&g_lean, "W8A8_SM90_LEAN", 1); }
static int g_split_quad = -1;  // W8A8_SM90_SPLIT_QUAD: 1 (default) the split-K reduction in quads, 0 element by element (see sm90_args)

// Everything before the launch that can refuse the problem: the input checks, the plan, the
// configuration's attributes, the two tensor maps. w8a8_sm90_accepts runs it too, so that the TP
// one-GEMM path asks exactly what the launch will ask (accepts() alone could pass where a later step
// refused). One difference: that path asks without its ready flags, so at
// 129..255 tokens the probe plans the multicast twin and the launch the plain tile (apply_mc2m), and at
// 65..80 tokens the probe may plan the fold's 128 x 64 tile (fold_move) where the launch keeps its plan, and at
// 1..80 / 129..144 tokens the probe may plan a skinny tile (plan_skinny: not with ready flags) where the launch
// plans another; they take the same problems (the same operand checks, maps that differ only in their boxes;
// a refused fold map falls back to boxes).
static w8a8_status prepare(w8a8_handle *h, const w8a8_mm_problem *p, int forced_config, int forced_split,
                           sm90_plan *pl, CUtensorMap *tx, CUtensorMap *ty, CUtensorMap *to, CUtensorMap *tt,
                           tail_boxes *tail, int *tma_out) {
  W8A8_CHECK(accepts(h, p));
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  const int dev = h->device_index;
  const int num_sms = st->prop.multiProcessorCount;
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  if (forced_config >= 0) {
    if (forced_config >= SM90_NUM_CONFIGS || CONFIGS[forced_config].int8 != int8)
      return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: sm90 config %d does not exist for this dtype", FN, forced_config);
    pl->config = forced_config;
    pl->split = CONFIGS[forced_config].splitk ? (forced_split > 0 ? forced_split : 1) : 1;
    if (pl->split > SM90_MAX_SPLIT)
      return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: split %d > %d", FN, pl->split, SM90_MAX_SPLIT);
    // Swap configs take several token tiles when forced (M > bn: tiles_y > 1, up to 8), for the tuner and
    // the dev bench to compare e.g. two n16 tiles with one n32 tile.
    if (CONFIGS[pl->config].swap && p->M > 8 * CONFIGS[pl->config].bn)
      return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: config %s takes M <= %d", FN, CONFIGS[pl->config].name,
                      8 * CONFIGS[pl->config].bn);
  } else {
    *pl = choose_plan(h, p, num_sms);
  }
  if (pl->config < 0) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: sm90 heuristic found no configuration", FN);
  // A stream-K twin (forced, or a tuning table's) that cannot run p: its plain tile instead.
  sm90_sk_plan skp;
  if (CONFIGS[pl->config].sk && (p->ready || !sk_fits(h, pl->config, p, num_sms, &skp))) {
    const int plain = sk_plain(pl->config);
    if (plain < 0) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: no plain tile for %s", FN, CONFIGS[pl->config].name);
    pl->config = plain;
  }
  const sm90_config *c = &CONFIGS[pl->config];
  W8A8_CHECK(prepare_config(dev, pl->config));

  // Kernel space: X on wgmma's M side (128-row tiles), Y on its N side (bn-row tiles).
  const void *xp = c->swap ? p->b : p->a;
  const void *yp = c->swap ? p->a : p->b;
  int64_t rows_x = c->swap ? p->N : p->M, rows_y = c->swap ? p->M : p->N;
  int64_t ldx = c->swap ? p->ldb : p->lda, ldy = c->swap ? p->lda : p->ldb;
  if (g_pad_tokens) {  // development only (w8a8_sm90_set_pad_tokens): A's map covers whole token tiles
    if (c->swap)
      rows_y = (rows_y + c->bn - 1) / c->bn * c->bn;
    else
      rows_x = (rows_x + SM90_BM - 1) / SM90_BM * SM90_BM;
  }
  if (c->bm && p->ready)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: config %s does not wait for arriving rows (ready flags)", FN,
                    c->name);
  CUresult r1 = make_tmap(tx, xp, rows_x, p->K, ldx, c->mcast == 3 ? cfg_bm(c) / 2 : cfg_bm(c));
  CUresult r2 = make_tmap(ty, yp, rows_y, p->K, ldy, c->mcast == 2 ? c->bn / 2 : c->bn);
  if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: cuTensorMapEncodeTiled refused the operands (error %d/%d)", FN,
                    (int)r1, (int)r2);
  // The token tail (sm90_args.tail_n): a map over the tokens with the tail's box rows, where the
  // plan loads the partial token tile in boxes. Where the encoder refuses it, the whole box.
  // The skinny kernel has no tail map: its tail_n = 1 shifts a partial last token tile back over real rows
  // (sm90_skinny_row0).
  if (c->bm) {
    tail->n = tail_mode() != 0 && skinny_shift_enabled() && rows_y > c->bn && rows_y % c->bn != 0;
    tail->rows = 0;
  } else {
    *tail = tail_plan(c, c->swap ? rows_y : rows_x, tail_mode(), fp8_any_box(h), p->ready != NULL);
    if (tail->n * tail->rows > (c->swap ? c->bn : SM90_BM) || tail->rows % 8 != 0) {  // the kernel assumes both
      tail->n = 0;
      tail->rows = 0;
    }
  }
  memcpy(tt, c->swap ? ty : tx, sizeof *tt);
  const CUresult rt = !tail->n || c->bm      ? CUDA_SUCCESS
                      : tail_is_fold(c, *tail) ? make_fold_tmap(tt, xp, rows_x, p->K, ldx)
                                            : make_tmap(tt, c->swap ? yp : xp, c->swap ? rows_y : rows_x, p->K,
                                                        c->swap ? ldy : ldx, tail->rows);
  if (rt != CUDA_SUCCESS && tail_is_fold(c, *tail) &&
      make_tmap(tt, xp, rows_x, p->K, ldx, SM90_BM / 2) == CUDA_SUCCESS) {  // the fold as two 2-D boxes
    tail->n = 2;
    tail->rows = SM90_BM / 2;
  } else if (rt != CUDA_SUCCESS) {
    memcpy(tt, c->swap ? ty : tx, sizeof *tt);
    tail->n = 0;
    tail->rows = 0;
  }
#ifdef W8A8_SM90_TAILX
  // An experiment (a build with -DW8A8_SM90_TAILX only; never the library's): where the only token tile is partial
  // and one short box loads it (unswapped, not the fold), the A map itself carries the tail's box and the kernel
  // loads through it (sm90_load_tokens) instead of tmap_t. The second descriptor cost ~1-1.3 us, the short box the
  // other ~3 us (h200-session17-2026-11-30.txt).
  if (!c->swap && !c->splitk && c->mcast != 2 && tail->n == 1 && !tail_is_fold(c, *tail) && rows_x <= SM90_BM &&
      make_tmap(tx, xp, rows_x, p->K, ldx, tail->rows) != CUDA_SUCCESS)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: W8A8_SM90_TAILX: the short A map was refused", FN);
#endif
  // The staged epilogue (unswapped unsplit tiles) where TMA can store the output: 16-bit outputs
  // (1), fp32 ones (2; the kernel's lean epilogue only, not the pingpong tiles'). W8A8_SM90_STAGED=0 keeps the direct
  // epilogue for every output, W8A8_SM90_STAGED32=0 for fp32 ones (A/B runs).
  memset(to, 0, sizeof *to);
  *tma_out = 0;
  const int f32 = p->out_dtype == W8A8_DTYPE_FP32;
  if (!c->swap && !c->splitk && staged_enabled() && (!f32 || (staged32_enabled() && !c->pp)))
    *tma_out = make_out_tmap(to, p->out, p->M, p->N, p->ldo, f32 ? 4 : 2);
  return W8A8_SUCCESS;
}

#endif

// Tests' hooks for the switches whose two sides a test compares bit for bit: 1 on, 0 off, -1 back to
// the environment variable (read on the next call). set_split_quad: the split-K reduction in quads
// (W8A8_SM90_SPLIT_QUAD) or element by element; set_lean: the lean epilogue where it applies
// (W8A8_SM90_LEAN) or sm90_epi_staged.
#if defined(W8A8_HAVE_SM90A)
static void set_switch(int *g, int on) { __atomic_store_n(g, on < 0 ? -1 : on ? 1 : 0, __ATOMIC_RELAXED); }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_split_quad(int on) { set_switch(&g_split_quad, on); }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_lean(int on) { set_switch(&g_lean, on); }
// The last launch's token tail (tests: that the tail engaged): boxes * 1000 + rows, 0 for the whole box.
static int g_last_tail;
extern "C" W8A8_HIDDEN int w8a8_sm90_last_tail(void) { return __atomic_load_n(&g_last_tail, __ATOMIC_RELAXED); }
static int g_last_shift;  // the last launch's sm90_args.shift_x (tests)
extern "C" W8A8_HIDDEN int w8a8_sm90_last_shift(void) { return __atomic_load_n(&g_last_shift, __ATOMIC_RELAXED); }
// The last launch's configuration and split (tp-bench's W8A8_TP_TRACE lines: which tile a fused call's GEMM
// ran): its name, "" before any launch; *split its split-K factor. The process's last launch, any thread's.
static int g_last_config = -1;
extern "C" W8A8_HIDDEN const char *w8a8_sm90_last_config(int *split) {
  const int v = __atomic_load_n(&g_last_config, __ATOMIC_RELAXED);
  if (split) *split = v < 0 ? 0 : v % 16;
  return v < 0 ? "" : CONFIGS[v / 16].name;
}
// The last launch's staged output (tests: that the fp32 one engaged): 0 none (direct epilogue), 1
// 16-bit (lean or staged), 2 fp32 (lean).
static int g_last_tma_out;
extern "C" W8A8_HIDDEN int w8a8_sm90_last_tma_out(void) { return __atomic_load_n(&g_last_tma_out, __ATOMIC_RELAXED); }
// tokens: the swap-AB n64 rule's upper bound (32: off; clamped to 32..64), -1 back to W8A8_SM90_SWAP64_MAX
extern "C" W8A8_HIDDEN void w8a8_sm90_set_swap64_max(int tokens) {
  __atomic_store_n(&g_swap64_max, tokens < 0 ? -1 : tokens < 32 ? 32 : tokens > 64 ? 64 : tokens, __ATOMIC_RELAXED);
}
// mode: plan_deep's two n32 token tiles: 1 both dtypes, 0 never, 2 fp8 only (the rule), -1 back to the variable
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep_n32x2(int mode) {
  __atomic_store_n(&g_deep_n32x2, mode < 0 ? -1 : mode > 2 ? 2 : mode, __ATOMIC_RELAXED);
}
// on: 1 plan_deep80 wherever it applies, 0 never, 2 its default rule, -1 back to the variable
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep80(int on) {
  __atomic_store_n(&g_deep80, on < 0 ? -1 : on > 2 ? 2 : on, __ATOMIC_RELAXED);
}
// on: fp8's token-tail cap without the weights-constant hint (fp8_any_box): 0 an eighth of the tile, 1
// int8's, 2 half (the default rule), -1 back to W8A8_SM90_FP8_TAIL_BOX
extern "C" W8A8_HIDDEN void w8a8_sm90_set_fp8_tail_box(int on) {
  __atomic_store_n(&g_fp8_tail_box, on < 0 ? -1 : on > 2 ? 2 : on, __ATOMIC_RELAXED);
}
// on: 1 the stream-K rule over the multicast twins too, 0 not, -1 back to W8A8_SM90_SK_MC2
extern "C" W8A8_HIDDEN void w8a8_sm90_set_sk_mc2(int on) { set_switch(&g_sk_mc2, on); }
// on: 1 plan_deep256 (its rule), 0 never, -1 back to W8A8_SM90_DEEP256
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep256(int on) { set_switch(&g_deep256, on); }
// on: plan_deep256's rule at 97..128 tokens too (1), 0 not, -1 back to W8A8_SM90_DEEP128
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep128(int on) { set_switch(&g_deep128, on); }
// on: plan's 128 x 192 rule (1 the rule, 0 never), -1 back to W8A8_SM90_WIDE192
extern "C" W8A8_HIDDEN void w8a8_sm90_set_wide192(int on) { set_switch(&g_wide192, on); }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_wide160(int on) { set_switch(&g_wide160, on); }
// on: the 128 x 192 rule's fp8 tile, 1 fp8_128x192_promote_hdb, 0 fp8_128x192_promote, -1 back to W8A8_SM90_HDB
extern "C" W8A8_HIDDEN void w8a8_sm90_set_hdb(int on) { set_switch(&g_hdb, on); }
// mode: plan_skinny's first rule (1), its wider rule (2), mode 3 (more token counts), mode 4 (mode 3 and the pairs on
// half-wave shapes, the default) or never (0), -1 back to W8A8_SM90_SKINNY
extern "C" W8A8_HIDDEN void w8a8_sm90_set_skinny(int mode) {
  __atomic_store_n(&g_skinny, mode < 0 ? -1 : mode > 4 ? 4 : mode, __ATOMIC_RELAXED);
}
// on: the kernel's shift of a partial last token tile (W8A8_SM90_SHIFT) or not, -1 back to the environment
extern "C" W8A8_HIDDEN void w8a8_sm90_set_shift(int on) { set_switch(&g_shift, on); }
// mode: plan_skinny's wide tiles, W8A8_SM90_SKINNY_WIDE's 0 / 1 / 2; -1 back to the environment
extern "C" W8A8_HIDDEN void w8a8_sm90_set_skinny_wide(int mode) {
  __atomic_store_n(&g_skinny_wide, mode < 0 ? -1 : mode > 2 ? 2 : mode, __ATOMIC_RELAXED);
}
// mode: plan_skinny's _k2 twins, W8A8_SM90_SKINNY_K2's 0 / 1 / 2; -1 back to the environment
extern "C" W8A8_HIDDEN void w8a8_sm90_set_skinny_k2(int mode) {
  __atomic_store_n(&g_skinny_k2, mode < 0 ? -1 : mode > 2 ? 2 : mode, __ATOMIC_RELAXED);
}
// on: plan_deep's n64 tile at split 3 (1) or not (0), -1 back to W8A8_SM90_DEEP3
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep3(int on) { set_switch(&g_deep3, on); }
// mode: 1..16 tokens, 1 the n8 / n16 deep tiles, 2 the n32 deep tile, 0 plan_small; -1 back to W8A8_SM90_DEEP16
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep16(int mode) {
  __atomic_store_n(&g_deep16, mode < 0 ? -1 : mode > 2 ? 2 : mode, __ATOMIC_RELAXED);
}
// on: 1 the 128 x 64 tile at 129..256 tokens wherever it applies, 0 never, 2 its rule, -1 back to the variable
extern "C" W8A8_HIDDEN void w8a8_sm90_set_narrow256(int on) {
  __atomic_store_n(&g_narrow256, on < 0 ? -1 : on > 2 ? 2 : on, __ATOMIC_RELAXED);
}
// on: 1 / 0 the heuristic takes the *_tail twins or not (W8A8_SM90_TAIL), -1 back to the variable
extern "C" W8A8_HIDDEN void w8a8_sm90_set_tail_heuristic(int on) { set_switch(&g_tail_env, on); }
// on: tail_plan's single-token-tile rule (1) or not (0), -1 back to W8A8_SM90_TAIL_SINGLE
extern "C" W8A8_HIDDEN void w8a8_sm90_set_tail_single(int on) { set_switch(&g_tail_single, on); }
// on: 1 apply_sk's stream-K twins wherever the schedule has units, 0 never, 2 its rule, -1 back to the variable
extern "C" W8A8_HIDDEN void w8a8_sm90_set_streamk(int on) {
  __atomic_store_n(&g_sk, on < 0 ? -1 : on > 2 ? 2 : on, __ATOMIC_RELAXED);
}
// mode: 0 never, 1 tail_plan's rule, 2 small boxes / 3 one box of the valid rows wherever a token tile is
// partial, 4 the fold where it applies (else 1), -1 the default (1)
extern "C" W8A8_HIDDEN void w8a8_sm90_set_tail(int mode) {
  __atomic_store_n(&g_tail, mode < 0 ? -1 : mode > 4 ? 1 : mode, __ATOMIC_RELAXED);
}
// on: plan_wide_swap's rule (1) or never (0), -1 back to W8A8_SM90_WIDE_SWAP
extern "C" W8A8_HIDDEN void w8a8_sm90_set_wide_swap(int on) { set_switch(&g_wide_swap, on); }
// on: plan_single_swap's rule (1) or never (0), -1 back to W8A8_SM90_SINGLE_SWAP
extern "C" W8A8_HIDDEN void w8a8_sm90_set_single_swap(int on) { set_switch(&g_single_swap, on); }
// on: plan_pair_swap's rule (1) or never (0), -1 back to W8A8_SM90_PAIR_SWAP
extern "C" W8A8_HIDDEN void w8a8_sm90_set_pair_swap(int on) { set_switch(&g_pair_swap, on); }
// mode: the fold's rule (g_fold: 0 off, 1 the first rule, 2 the measured one), -1 back to W8A8_SM90_FOLD
extern "C" W8A8_HIDDEN void w8a8_sm90_set_fold(int mode) {
  __atomic_store_n(&g_fold, mode < 0 ? -1 : mode > 2 ? 2 : mode, __ATOMIC_RELAXED);
}
#else
extern "C" W8A8_HIDDEN void w8a8_sm90_set_split_quad(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_lean(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_tail(int mode) { (void)mode; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_fold(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_wide_swap(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_single_swap(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_pair_swap(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_tail_heuristic(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_tail_single(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep80(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_swap64_max(int tokens) { (void)tokens; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep_n32x2(int mode) { (void)mode; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_narrow256(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep256(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep128(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_wide192(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_wide160(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_hdb(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep16(int mode) { (void)mode; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_deep3(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_skinny(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_skinny_k2(int mode) { (void)mode; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_skinny_wide(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_sk_mc2(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_fp8_tail_box(int on) { (void)on; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_streamk(int on) { (void)on; }
extern "C" W8A8_HIDDEN int w8a8_sm90_last_tail(void) { return 0; }
extern "C" W8A8_HIDDEN int w8a8_sm90_last_shift(void) { return 0; }
extern "C" W8A8_HIDDEN int w8a8_sm90_last_tma_out(void) { return 0; }
extern "C" W8A8_HIDDEN void w8a8_sm90_set_shift(int on) { (void)on; }
extern "C" W8A8_HIDDEN const char *w8a8_sm90_last_config(int *split) {
  if (split) *split = 0;
  return "";
}
#endif

#if defined(W8A8_HAVE_SM90A)
// A ready launch's tile-order group (sm90_args.group): the whole X tiles of the own rows (the chunk
// that starts at first_row), 1..SM90_GROUP. W8A8_SM90_TP_GROUP=0 keeps SM90_GROUP (A/B runs).
static int g_tp_group = -1;
static int tp_group_enabled(void) { return w8a8_env_flag(&g_tp_group, "W8A8_SM90_TP_GROUP", 1); }
static int ready_group(const w8a8_mm_ready *r) {
  int64_t end = r->first_row;
  for (int j = 0; j < r->n; j++)
    if ((j ? r->end[j - 1] : 0) == r->first_row && r->end[j] > end) end = r->end[j];
  const int64_t tiles = end / SM90_BM - (r->first_row + SM90_BM - 1) / SM90_BM;
  return tiles < 1 ? 1 : tiles > SM90_GROUP ? SM90_GROUP : (int)tiles;
}
#endif

static w8a8_status run(w8a8_handle *h, const w8a8_mm_problem *p, int forced_config, int forced_split) {
#if !defined(W8A8_HAVE_SM90A)
  (void)h;
  (void)p;
  (void)forced_config;
  (void)forced_split;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: this libw8a8 was built without sm_90a (CUDA_ARCHS lacks 90a)", FN);
#else
  sm90_plan pl;
  CUtensorMap tx, ty, to, tt;
  tail_boxes tail;
  int tma_out = 0;
  W8A8_CHECK(prepare(h, p, forced_config, forced_split, &pl, &tx, &ty, &to, &tt, &tail, &tma_out));
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  const int dev = h->device_index;
  const int num_sms = st->prop.multiProcessorCount;
  const sm90_config *c = &CONFIGS[pl.config];
  const int64_t rows_x = c->swap ? p->N : p->M, rows_y = c->swap ? p->M : p->N;  // kernel space (prepare)

  sm90_args a;
  memset(&a, 0, sizeof a);
  a.rows_x = (int)rows_x;
  a.rows_y = (int)rows_y;
  a.tiles_x = (int)((rows_x + cfg_bm(c) - 1) / cfg_bm(c));
  a.tiles_y = (int)((rows_y + c->bn - 1) / c->bn);
  a.kblocks = (int)((p->K + SM90_BK - 1) / SM90_BK);
  a.out = p->out;
  a.ldo = p->ldo;
  a.M = (int)p->M;
  a.N = (int)p->N;
  a.sa = p->scale_a;
  a.sb = p->scale_b;
  a.sa_per_token = p->scale_a_per_token;
  a.sb_per_channel = p->scale_b_per_channel;
  a.bias = p->bias;
  a.out_kind = p->out_dtype == W8A8_DTYPE_BF16 ? SM90_OUT_BF16 : p->out_dtype == W8A8_DTYPE_FP16 ? SM90_OUT_FP16 : SM90_OUT_FP32;
  a.azp_mode = (int)p->azp_mode;
  a.azp = p->azp;
  a.azp_adj = p->azp_adj;
  size_t esz = a.out_kind == SM90_OUT_FP32 ? 4 : 2;
  a.pair_store = ((uintptr_t)p->out % (2 * esz)) == 0 && (p->ldo % 2) == 0;
  a.quad_store = quad_store_ok(p);
  a.split = pl.split;
  a.weights_constant = h->weights_constant && c->mcast != 2;
  a.tma_out = tma_out;
  a.prm = !c->swap && !c->splitk && prm_enabled();
  a.lean = lean_enabled();
  a.split_quad = w8a8_env_flag(&g_split_quad, "W8A8_SM90_SPLIT_QUAD", 1);
  a.tail_n = tail.n;
  a.tail_rows = tail.rows;
  a.shift_x = !tail.n && shift_applies(c, rows_x, p->ready != NULL);
  __atomic_store_n(&g_last_shift, a.shift_x, __ATOMIC_RELAXED);
  __atomic_store_n(&g_last_tail, tail.n * 1000 + tail.rows, __ATOMIC_RELAXED);
  // (an fp32 map serves the lean epilogue only: with the scale slot and without an int8 zero point)
  const int lean32 = a.prm && a.lean && !(p->in_dtype == W8A8_DTYPE_INT8 && a.azp_mode != 0);
  __atomic_store_n(&g_last_tma_out, tma_out == 2 && !lean32 ? 0 : tma_out, __ATOMIC_RELAXED);
  __atomic_store_n(&g_last_config, pl.config * 16 + pl.split, __ATOMIC_RELAXED);
  a.group = SM90_GROUP;
  if (c->sk) {  // (prepare checked that the schedule's partial tiles fit)
    a.sk_ws = st->ws;
    a.sk_locks = st->sk_locks;
    a.weights_constant = 0;
  }
  a.timeline = g_timeline;
  a.timeline_max = g_timeline_max;
  a.timeline_ctas = g_timeline_ctas;
  if (p->ready) {
    a.ready = p->ready->flags;
    a.ready_n = p->ready->n;
    for (int i = 0; i < SM90_MAX_READY; i++) a.ready_end[i] = (int)(i < a.ready_n ? p->ready->end[i] : p->M);
    // A's rows are the X tiles (normal) or the Y tiles (swapped). Start at the first tile wholly
    // inside the own rows: a tile that also holds rows of rank r - 1 (pulled last) then comes last
    // instead of stalling one CTA for the whole gather.
    if (c->swap)
      a.rot_y = (int)((p->ready->first_row + c->bn - 1) / c->bn) % a.tiles_y;
    else
      a.rot_x = (int)((p->ready->first_row + SM90_BM - 1) / SM90_BM) % a.tiles_x;
    // Groups of the tile order no wider than the own rows' whole X tiles (unswapped, MC = 1: the persistent tiles
    // and the split-K ones, whose clusters take items in the same order): where a rank's rows span fewer than
    // SM90_GROUP tiles (TP = 2 at 1024 tokens: 4), a group of 8 mixed own and peer tiles, so half the CTAs began on
    // a peer tile and spun on its flag with their own tiles queued behind it. 1.04-1.11x fused at 1024 tokens
    // (h200x2-tp-group-2026-11-30.txt; sm90_args.group).
    if (!c->swap && c->mcast != 2 && tp_group_enabled()) a.group = ready_group(p->ready);
  }

  // Split-K configs: one tile per cluster (not persistent). A cluster's CTAs meet at two cluster
  // barriers per tile; one tile each keeps every cluster independent of the others, and the
  // hardware starts the next cluster as a slot frees (the 2 CTAs/SM overlap one CTA's epilogue
  // with another's main loop, which a persistent CTA would not). Others: a persistent grid.
  const int64_t tiles64 = (int64_t)a.tiles_x * a.tiles_y;
  if (tiles64 * pl.split > INT32_MAX / 2)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: %lld tiles are more than the sm_90a kernel indexes", FN,
                    (long long)tiles64);
  const int tiles = (int)tiles64;
  int clusters = c->splitk ? tiles : num_sms * c->minb;
  if (clusters > tiles && !c->sk) clusters = tiles;  // (stream-K: the grid is part of the schedule, sk_fits's)
  int csize = c->splitk ? pl.split : 1;
  if (c->mcast == 2 || c->mcast == 3) {
    // persistent clusters of two, one per pair of M tiles at most (3: of token tiles, the skinny pairs)
    const int pairs = c->mcast == 3 ? a.tiles_x * ((a.tiles_y + 1) / 2) : ((a.tiles_x + 1) / 2) * a.tiles_y;
    csize = 2;
    clusters = max_active_clusters(dev, pl.config, 2, num_sms);
    if (clusters > pairs) clusters = pairs;
    if (clusters < 1) clusters = 1;
  }

  cudaLaunchConfig_t lc;
  memset(&lc, 0, sizeof lc);
  cudaLaunchAttribute at[2];
  int nat = 0;
  if (csize > 1 || c->splitk) {
    at[nat].id = cudaLaunchAttributeClusterDimension;
    at[nat].val.clusterDim.x = csize;
    at[nat].val.clusterDim.y = 1;
    at[nat].val.clusterDim.z = 1;
    nat++;
  }
  // Programmatic dependent launch (the kernel waits with griddepcontrol.wait before it reads
  // anything): its launch and prologue overlap the tail of the kernel before it in the stream.
  // W8A8_SM90_PDL=0 turns it off (A/B measurements).
  if (w8a8_env_flag(&g_pdl, "W8A8_SM90_PDL", 1)) {
    at[nat].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[nat].val.programmaticStreamSerializationAllowed = 1;
    nat++;
  }
  lc.gridDim = dim3(clusters * csize, 1, 1);
  lc.blockDim = dim3(cfg_threads(c), 1, 1);
  lc.dynamicSmemBytes = c->smem;
  lc.stream = (cudaStream_t)h->stream;
  lc.attrs = at;
  lc.numAttrs = nat;
  cudaError_t e = cudaLaunchKernelEx(&lc, c->fn, tx, ty, to, a, tt);
  if (e != cudaSuccess) return w8a8_cuda_error(FN, "launch of the sm90 kernel", e);
  return W8A8_SUCCESS;
#endif
}

extern "C" w8a8_status w8a8_sm90_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p) { return run(h, p, -1, 0); }

// Whether w8a8_sm90_scaled_mm takes p: W8A8_SUCCESS, or its refusal with the reason (what the launch
// would say, nothing written or launched). The TP calls ask before their agreement where the handle
// forces the kernel (tp_gpu.c gpu_local_checks).
extern "C" W8A8_HIDDEN w8a8_status w8a8_sm90_check(const w8a8_handle *h, const w8a8_mm_problem *p) {
#if defined(W8A8_HAVE_SM90A)
  sm90_plan pl;
  CUtensorMap tx, ty, to, tt;
  tail_boxes tail;
  int tma_out;
  return prepare((w8a8_handle *)h, p, -1, 0, &pl, &tx, &ty, &to, &tt, &tail, &tma_out);
#else
  (void)h;
  (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: this libw8a8 was built without sm_90a (CUDA_ARCHS lacks 90a)", FN);
#endif
}

// Whether w8a8_sm90_scaled_mm takes p (all-gather + GEMM asks before it relies on p->ready).
extern "C" W8A8_HIDDEN int w8a8_sm90_accepts(const w8a8_handle *h, const w8a8_mm_problem *p) {
  char saved[512];
  snprintf(saved, sizeof saved, "%s", w8a8_last_error());
  const int ok = w8a8_sm90_check(h, p) == W8A8_SUCCESS;
  w8a8_err(W8A8_SUCCESS, "%s", saved); /* the caller's last error stays what it was */
  return ok;
}

// Development hooks (benchmarks, tuning): run one configuration by index with a given split, and
// describe the table. Not part of the public API.
extern "C" W8A8_HIDDEN w8a8_status w8a8_sm90_scaled_mm_config(w8a8_handle *h, const w8a8_mm_problem *p, int config,
                                                              int split) {
  return run(h, p, config, split);
}
extern "C" W8A8_HIDDEN int w8a8_sm90_num_configs(void) { return SM90_NUM_CONFIGS; }
extern "C" W8A8_HIDDEN const char *w8a8_sm90_config_name(int config) {
  return config >= 0 && config < SM90_NUM_CONFIGS ? CONFIGS[config].name : "";
}
extern "C" W8A8_HIDDEN int w8a8_sm90_config_int8(int config) {
  return config >= 0 && config < SM90_NUM_CONFIGS ? CONFIGS[config].int8 : -1;
}
extern "C" W8A8_HIDDEN int w8a8_sm90_config_fast_accum(int config) {
  return config >= 0 && config < SM90_NUM_CONFIGS ? CONFIGS[config].fast_accum : 0;
}
// Configurations the tuner skips unless W8A8_TUNE_EXPERIMENTAL=1 (the tests run every configuration): the pingpong
// ones (slower or even, h200-sm90-pingpong-2026-11-30.txt), the token-tail and stream-K twins (apply_tail and apply_sk
// take them after the plan, tuned plans included, so the tuner times the plain tiles), and any configuration whose
// tests have not passed on a GPU (sm90_config's last field).
extern "C" W8A8_HIDDEN int w8a8_sm90_config_experimental(int config) {
  return config >= 0 && config < SM90_NUM_CONFIGS &&
         (CONFIGS[config].pp || CONFIGS[config].tail || CONFIGS[config].sk || CONFIGS[config].unrun);
}
extern "C" W8A8_HIDDEN int w8a8_sm90_config_swap_bn(int config) {
  return config >= 0 && config < SM90_NUM_CONFIGS && CONFIGS[config].swap ? CONFIGS[config].bn : 0;
}
// How many CTAs of config at this split can run at once on the handle's GPU (whole clusters; the
// occupancy query): sm90_dev flags a forced split-K grid that needs more than one wave.
extern "C" W8A8_HIDDEN int w8a8_sm90_config_max_ctas(w8a8_handle *h, int config, int split) {
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  if (!st || st->cc != 90 || config < 0 || config >= SM90_NUM_CONFIGS) return 0;
  if (split < 1) split = 1;
  if (split > SM90_MAX_SPLIT) split = SM90_MAX_SPLIT;
  return max_active_clusters(h->device_index, config, split, st->prop.multiProcessorCount) * split;
}
// Which configuration and split the heuristic picks (for the benchmark's table); -1 if none.
extern "C" W8A8_HIDDEN int w8a8_sm90_plan(w8a8_handle *h, const w8a8_mm_problem *p, int *split) {
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  if (!st || st->cc != 90) return -1;
  const sm90_plan pl = choose_plan(h, p, st->prop.multiProcessorCount);
  if (split) *split = pl.split;
  return pl.config;
}

// The tuning-table loader's view of the configuration table (src/core/tune.c): the index of
// `name`, its dtype, its swap token tile (0 if not swapped) and the largest split it takes.
extern "C" W8A8_HIDDEN int w8a8_sm90_config_lookup(const char *name, int *int8, int *swap_bn, int *max_split) {
  int i = find_config(name);
  if (i < 0) return -1;
  if (int8) *int8 = CONFIGS[i].int8;
  if (swap_bn) *swap_bn = CONFIGS[i].swap ? CONFIGS[i].bn : 0;
  if (max_split) *max_split = CONFIGS[i].splitk ? SM90_MAX_SPLIT : 1;
  return i;
}
