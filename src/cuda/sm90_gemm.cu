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
  int fast_accum; // fp8 without promotion: less exact, never picked by the heuristic
  int smem;      // dynamic shared memory bytes
  sm90_kernel_fn fn;
  int mcast;     // 2: clusters of two CTAs on neighbouring X tiles multicasting the Y tile (B; swapped: A); 3: the
                 // skinny kernel's pairs, two CTAs on neighbouring Y (token) tiles multicasting the X (weight) tile;
                 // 0: none
  int pp;        // pingpong (the kernel's PP); measured slower or even (session 6): the tuner skips it
  int tail;      // the token tail (the kernel's TAIL, session 8): tail_plan's boxes for a partial token tile
  int sk;        // stream-K (the kernel's SK, session 10): a grid of one CTA per SM, sm90_streamk.h's schedule
  int bm;        // rows on wgmma's M side per CTA: 0 = SM90_BM (two consumer warpgroups); 64: the skinny kernel
  int cw;        // the skinny kernel's consumer warpgroups (its CW): 0 or 1 one, 2 two (the _k2 configurations)
  int wr;        // the skinny kernel's WR (session 26, the _k2r configurations): 384 threads, setmaxnreg 40 / 232
  int unrun;     // written but not yet run on a GPU: w8a8_sm90_config_experimental keeps the tuner off it
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

// A configuration written after the last device call (unrun: the tuner skips it until it has run; no plan takes it).
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

// Swapped unsplit tiles with the TOKEN tile multicast (session 19): X = weights, Y = tokens, so the kernel's MC = 2
// (neighbouring X tiles, this CTA's half of Y into both) shares the token tile between two weight tiles.
#define SM90_CFG_SWAP_MC(NAME, BN, ST, I8, PR)                                                           \
  {NAME, I8, BN, 1, 0, 1, !(I8) && !(PR), sm90_cfg<BN, ST, I8, true, PR, false>::SMEM_BYTES,                  \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, true, PR, false, 1, 2>, 2}

// Pingpong tiles (the kernel's PP; plain, unpromoted): each consumer warpgroup owns whole tiles.
#define SM90_CFG_PP(NAME, BN, ST, I8)                                                                   \
  {NAME, I8, BN, 0, 0, 1, !(I8), sm90_cfg<BN, ST, I8, false, false, false, true>::SMEM_BYTES,                \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, false, false, false, 1, 1, true>, 0, 1}

// The same tiles with the token tail (the kernel's TAIL; session 8): sm90_args.tail_n.
#define SM90_CFG_TAIL(NAME, BN, ST, I8, SW, PR, SK, MB)                                                     \
  {NAME, I8, BN, SW, SK, MB, !(I8) && !(PR), sm90_cfg<BN, ST, I8, SW, PR, SK>::SMEM_BYTES,                                  \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, SW, PR, SK, MB, 1, false, true>, 0, 0, 1}
#define SM90_CFG_MC_TAIL(NAME, BN, ST, I8, PR)                                                           \
  {NAME, I8, BN, 0, 0, 1, 0, sm90_cfg<BN, ST, I8, false, PR, false>::SMEM_BYTES,                             \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, false, PR, false, 1, 2, false, true>, 2, 0, 1}

// Stream-K twins of the plain tiles (the kernel's SK; session 10): one CTA per SM, the tiles of the last
// partial wave (and one full wave before it) cut into equal K ranges (sm90_streamk.h).
#define SM90_CFG_SK(NAME, BN, ST, I8, PR)                                                                 \
  {NAME, I8, BN, 0, 0, 1, 0, sm90_cfg<BN, ST, I8, false, PR, false>::SMEM_BYTES,                             \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, I8, false, PR, false, 1, 1, false, false, true>, 0, 0, 0, 1}

// The 128 x 192 promoted tile with alternating half temporaries (the kernel's HDB; session 20; planned by the
// 128 x 192 rule since session 21, W8A8_SM90_HDB).
#define SM90_CFG_HDB(NAME, ST) SM90_CFG_HDB_BN(NAME, 192, ST)
// (and the 128 x 160 tile, session 28)
#define SM90_CFG_HDB_BN(NAME, BN, ST)                                                                    \
  {NAME, 0, BN, 0, 0, 1, 0, sm90_cfg<BN, ST, false, false, true, false>::SMEM_BYTES,                       \
   (sm90_kernel_fn)sm90_gemm_kernel<BN, ST, false, false, true, false, 1, 1, false, false, false, true>}

// The skinny swapped tiles (session 22, sm90_skinny_kernel): 64 weight rows x BN tokens, one consumer warpgroup,
// no split-K; fp8 promotes every K-block.
#define SM90_CFG_SKINNY(NAME, BN, ST, I8, MB)                                                            \
  {NAME, I8, BN, 1, 0, MB, 0, sm90_skinny_cfg<BN, ST>::SMEM_BYTES,                                        \
   (sm90_kernel_fn)sm90_skinny_kernel<BN, ST, I8, !(I8), MB>, 0, 0, 0, 0, SM90_SKINNY_BM}
// Their pairs (session 23, the kernel's MC = 2): clusters of two CTAs on neighbouring token tiles of one weight tile,
// each loading half of the weight tile multicast into both (tmap_x's box is 32 rows then).
#define SM90_CFG_SKINNY_MC2(NAME, BN, ST, I8)                                                             \
  {NAME, I8, BN, 1, 0, 1, 0, sm90_skinny_cfg<BN, ST>::SMEM_BYTES,                                         \
   (sm90_kernel_fn)sm90_skinny_kernel<BN, ST, I8, !(I8), 1, 2>, 3, 0, 0, 0, SM90_SKINNY_BM}
// Two consumer warpgroups on the tile (session 25, the kernel's CW = 2), single and paired. The ring must be even
// (static_assert in the kernel): warpgroup cw takes K-blocks of parity cw, and with an odd ring the block that used the
// stage before block g (g - STAGES) was the OTHER warpgroup's, whose full-barrier phase this warpgroup never waited
// for: where that load was still in flight, the wait for g's parity passed at once on the phase before it and read
// the stage's old bytes (session 29's review, helper-57; never seen in a run: it needs TMA completions reordered by
// STAGES blocks). The 11- and 7-stage rings of session 25-27 (n80 k2 / mc2 k2, n136 k2, n144 k2 / k2r) went to 10 / 6.
#define SM90_CFG_SKINNY_K2(NAME, BN, ST, I8)                                                              \
  {NAME, I8, BN, 1, 0, 1, 0, sm90_skinny_cfg<BN, ST>::SMEM_BYTES,                                         \
   (sm90_kernel_fn)sm90_skinny_kernel<BN, ST, I8, !(I8), 1, 1, 2>, 0, 0, 0, 0, SM90_SKINNY_BM, 2}
// The same with the producer a whole warpgroup and the registers moved to the consumers (session 26, the kernel's WR).
#define SM90_CFG_SKINNY_K2R(NAME, BN, ST, I8)                                                             \
  {NAME, I8, BN, 1, 0, 1, 0, sm90_skinny_cfg<BN, ST>::SMEM_BYTES,                                         \
   (sm90_kernel_fn)sm90_skinny_kernel<BN, ST, I8, !(I8), 1, 1, 2, true>, 0, 0, 0, 0, SM90_SKINNY_BM, 2, 1}
#define SM90_CFG_SKINNY_MC2_K2(NAME, BN, ST, I8)                                                          \
  {NAME, I8, BN, 1, 0, 1, 0, sm90_skinny_cfg<BN, ST>::SMEM_BYTES,                                         \
   (sm90_kernel_fn)sm90_skinny_kernel<BN, ST, I8, !(I8), 1, 2, 2>, 3, 0, 0, 0, SM90_SKINNY_BM, 2}

// Index order matters: w8a8_sm90_scaled_mm_config() takes an index into this table.
static const sm90_config CONFIGS[] = {
    // large M: 128 x 256 tiles, 4 stages of 48 KB; fp8 accumulates in the tensor core (fast accum)
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
    // Session 3: B multicast over 2-CTA clusters (half the B bytes from L2 per CTA). Correct since
    // session 4; at the plain tiles' speed (-5%..+3%) since session 5 removed a GPU-scope fence per
    // K-block from the remote arrive. Not picked by the heuristic; the tuner measures them.
    SM90_CFG_MC("fp8_128x128_promote_mc2", 128, 6, false, true),
    SM90_CFG_MC("int8_128x256_mc2", 256, 4, true, false),
    // Session 4: fp8 on int8's 128 x 256 tile with promotion, in two 128-column halves per K-block
    // (the kernel's PROMOTE_HALF): the fast-accumulation 128 x 256 tile measured 10-18% faster
    // than fp8_128x128_promote at M >= 1024 (h200x2-sm90-ab-2026-11-29-s4.txt), i.e. the tile
    // size, not only the promotion, held fp8 back.
    SM90_CFG("fp8_128x256_promote", 256, 4, false, false, true, false, 1),
    // Session 5: the same with B multicast over 2-CTA clusters (measured once the remote arrive
    // lost its GPU-scope fence; see sm90_mbar_arrive_cluster).
    SM90_CFG_MC("fp8_128x256_promote_mc2", 256, 4, false, true),
    // Session 5, for the tuner and measurements (the heuristic does not pick them yet): 128 x 64 tiles,
    // 8 stages of 24 KB, for narrow N at 33..256 tokens, where the 128 x 128 tile runs on N / 128 SMs
    // only (8b-o: 32 CTAs, 14.7 us at M = 33..256 where cuBLASLt's tensorwise kernel takes 7.9).
    SM90_CFG("fp8_128x64_promote", 64, 8, false, false, true, false, 1),
    SM90_CFG("int8_128x64", 64, 8, true, false, false, false, 1),
    // Session 5 (run since session 6, slower or even), not picked by the heuristic: pingpong 128 x 128 tiles (each
    // consumer warpgroup a whole tile, its epilogue under the other's main loop). int8, and fp8 with
    // fast accumulation (a candidate for W8A8_FP8_ACCUM_FAST once measured).
    SM90_CFG_PP("int8_128x128_pp", 128, 6, true),
    SM90_CFG_PP("fp8_128x128_pp", 128, 6, false),
    // Session 6: int8's 128 x 128 tile with B multicast, for 129..255 tokens (see apply_mc2m).
    SM90_CFG_MC("int8_128x128_mc2", 128, 6, true, false),
    // Session 6 (run since session 7; n32 / n64 planned at 17..64 tokens since then, see plan_deep):
    // swap-AB n8 / n16 with one CTA per SM and 10 stages of 17-18 KB instead of two CTAs per SM with 5. The small-M plans put one CTA per SM
    // anyway (plan_small: tiles x split <= SMs), so half the shared memory sat idle; twice the weight
    // bytes in flight per SM (160-180 KB) for when HBM latency under load, not the SM count, bounds
    // the stream (Little's law: 32.6 GB/s per SM x 2-3 us). Planned at 1..16 tokens since session 21 (plan_deep16).
    SM90_CFG("fp8_swap_n8_deep", 8, 10, false, true, true, true, 1),
    SM90_CFG("fp8_swap_n16_deep", 16, 10, false, true, true, true, 1),
    SM90_CFG("int8_swap_n8_deep", 8, 10, true, true, false, true, 1),
    SM90_CFG("int8_swap_n16_deep", 16, 10, true, true, false, true, 1),
    // The same for n32 / n64, where the plain configurations hold only 4 / 3 stages (64 / 48 KB of
    // weights in flight per SM at one CTA per SM: below the ~65 KB that 32.6 GB/s x 2 us of loaded
    // HBM latency needs, a guess at why swap n32 / n64 measured slower than n16 and the 128 x 128
    // tile). 9 and 7 stages: 144 / 112 KB of weights in flight.
    SM90_CFG("fp8_swap_n32_deep", 32, 9, false, true, true, true, 1),
    SM90_CFG("fp8_swap_n64_deep", 64, 7, false, true, true, true, 1),
    SM90_CFG("int8_swap_n32_deep", 32, 9, true, true, false, true, 1),
    SM90_CFG("int8_swap_n64_deep", 64, 7, true, true, false, true, 1),
    // The token tail (session 8), for partial token tiles, only in these instantiations so that the
    // others keep their code (compiled into every kernel it cost fp8 13-15% where it never engaged;
    // as twins the non-engaged cost is 1-11%, so they run only where tail_plan engages): apply_tail
    // (session 9, h200-sm90-tail-twins-2026-11-30.txt); the tuner skips them (experimental).
    SM90_CFG_TAIL("int8_128x128_tail", 128, 6, true, false, false, false, 1),
    SM90_CFG_TAIL("fp8_128x128_promote_tail", 128, 6, false, false, true, false, 1),
    SM90_CFG_MC_TAIL("int8_128x128_mc2_tail", 128, 6, true, false),
    SM90_CFG_MC_TAIL("fp8_128x128_promote_mc2_tail", 128, 6, false, true),
    SM90_CFG_TAIL("int8_swap_n32_deep_tail", 32, 9, true, true, false, true, 1),
    SM90_CFG_TAIL("fp8_swap_n32_deep_tail", 32, 9, false, true, true, true, 1),
    // n64 twins: candidates for 65..80 tokens (two token tiles, the second with at most 16 rows: the
    // deep plans of 33..64 carried past 64, where the 128-row tile pays TMA's fill of 48..63 rows)
    SM90_CFG_TAIL("int8_swap_n64_deep_tail", 64, 7, true, true, false, true, 1),
    SM90_CFG_TAIL("fp8_swap_n64_deep_tail", 64, 7, false, true, true, true, 1),
    // Session 9: twins for the split-K tile (129..256 tokens with few weight tiles and a long K,
    // plan's split rule) and the wide multicast tile (apply_mc2m's pick at 129..255 tokens).
    SM90_CFG_TAIL("int8_128x128_splitk_tail", 128, 4, true, false, false, true, 1),
    SM90_CFG_TAIL("fp8_128x128_promote_splitk_tail", 128, 4, false, false, true, true, 1),
    SM90_CFG_MC_TAIL("int8_128x256_mc2_tail", 256, 4, true, false),
    SM90_CFG_MC_TAIL("fp8_128x256_promote_mc2_tail", 256, 4, false, true),
    // Session 9 (run since session 10): the 128 x 64 tile's twins, for plan's narrow256 rule.
    SM90_CFG_TAIL("int8_128x64_tail", 64, 8, true, false, false, false, 1),
    SM90_CFG_TAIL("fp8_128x64_promote_tail", 64, 8, false, false, true, false, 1),
    // Session 10: stream-K twins of the 128 x 128 tiles (apply_sk's rule; sm90_dev -c; the tuner skips them).
    SM90_CFG_SK("int8_128x128_sk", 128, 6, true, false),
    SM90_CFG_SK("fp8_128x128_promote_sk", 128, 6, false, true),
    // Session 15 (run since session 16: plan's WIDE192 rule takes them, the tuner times them): 128 x 192
    // tiles, 4 stages of 40 KB (5 would pass 227 KB with the epilogue buffers), for N where 256-column tiles leave SMs idle (70b-qkv-tp4, N = 2560: 80
    // tiles of 128 x 256 on 132 SMs at M = 1024, where cuBLASLt's tensorwise kernel runs at 1334 TFLOP/s
    // against our 949; 14 column tiles of 192). fp8 promotes in two halves of 96 columns (PROMOTE_HALF).
    SM90_CFG("int8_128x192", 192, 4, true, false, false, false, 1),
    SM90_CFG("fp8_128x192_promote", 192, 4, false, false, true, false, 1),
    // Session 18: the swap-AB deep ring with wider token tiles, for 65..256 tokens (one or two token
    // tiles on wgmma's N side, the weights' 128 rows on its M side, split-K over a cluster where the
    // weight tiles leave SMs idle): what cuBLASLt's tensorwise kernels do there (bench/torch_kernels.py,
    // h200-session18: sm90_qqtst_64x136 / 128x144 / 64x72 ..._TNT at 65..160 tokens), where our 128-row
    // token tiles compute 128 - (M % 128) rows of padding (the 128 -> 129 step: 8b-gateup 37.5 -> 53.7 us).
    // Stages: as many as 227 KB hold beside the split-K partial tile (BN lines of 132 words).
    SM90_CFG("fp8_swap_n80_deep", 80, 7, false, true, true, true, 1),
    SM90_CFG("fp8_swap_n96_deep", 96, 6, false, true, true, true, 1),
    SM90_CFG("fp8_swap_n128_deep", 128, 4, false, true, true, true, 1),
    SM90_CFG("int8_swap_n80_deep", 80, 7, true, true, false, true, 1),
    SM90_CFG("int8_swap_n96_deep", 96, 6, true, true, false, true, 1),
    SM90_CFG("int8_swap_n128_deep", 128, 4, true, true, false, true, 1),
    // Session 18, an experiment (not planned): the swapped tile WITHOUT split-K, i.e. a persistent grid (one
    // CTA per SM walking tiles, the next tile's loads under this one's epilogue), more stages (no partial
    // tile beside the ring: 6 at n128 against the split-K tile's 4; n192's 4 could be 5) and the
    // per-warpgroup staged epilogue (unused since session 2): is
    // SPLITK's one-tile-per-CTA grid why the swapped n128 took 51.5 us on 8b-gateup at M = 128 where the
    // plain 128 x 256 tile took 37.2 and cuBLASLt's swapped 128x136 34-36? n160 / n192 (int8; fp8 has no
    // register plan for 80 / 96 promoted columns per thread x 3; but see fp8_swap_n160_ps) for one token tile of 129..192.
    SM90_CFG("fp8_swap_n128_ps", 128, 6, false, true, true, false, 1),
    SM90_CFG("int8_swap_n128_ps", 128, 6, true, true, false, false, 1),
    SM90_CFG("int8_swap_n160_ps", 160, 5, true, true, false, false, 1),
    SM90_CFG("int8_swap_n192_ps", 192, 4, true, true, false, false, 1),
    // fp8 at 129..160 tokens in one token tile: the promotion in two halves of 80 tokens (PROMOTE_HALF, as
    // the 128 x 192 / 256 tiles; three 80-register sets would not fit). Ran in session 19 (every_config, the ring).
    SM90_CFG("fp8_swap_n160_ps", 160, 5, false, true, true, false, 1),
    // Session 19: their token-tail twins (one box of the valid rows rounded up to 8 where the single token tile
    // is partial: at M = 129 the plain n160 tile's 31 filled rows cost 2-4 us, 129 against 144 in
    // h200-session19 part 3), for plan_single_swap.
    SM90_CFG_TAIL("int8_swap_n160_ps_tail", 160, 5, true, true, false, false, 1),
    SM90_CFG_TAIL("fp8_swap_n160_ps_tail", 160, 5, false, true, true, false, 1),
    // Session 27, run in session 28: one swapped token tile of 144 (cuBLASLt's 128x136 / 128x144 _TNT tiles at 129..144
    // tokens, h200-session18 part 1), 10% less MMA per CTA than n160; plan_single_swap takes it for int8 at 129..144.
    // Measured (h200-session28 part 1): int8 8b-gateup 129 / 144 45.8 / 46.4 -> 42.3 / 42.5 us, 70b-gateup-tp4 39.7 /
    // 40.5 -> 37.8 / 38.0 (predicted ~43 / ~39 for fp8). fp8's twin (promoting in halves of 72) ran no faster than
    // n160 (45.9 vs 46.5 on 8b-gateup, 42.2 vs 40.7-41.6 on 70b-gateup-tp4): removed.
    SM90_CFG("int8_swap_n144_ps", 144, 6, true, true, false, false, 1),
    SM90_CFG_TAIL("int8_swap_n144_ps_tail", 144, 6, true, true, false, false, 1),
    // Session 19, an experiment (run since session 20, measured no gain: not planned): the n160 tile with its token tile multicast
    // over clusters of two weight tiles (cuBLASLt's 128x136..160 _TNT kernels at 129..160 tokens run 2x1 / 4x1
    // clusters, h200-session18 part 1): each CTA reads half the token bytes from L2 (at 160 tokens x K = 8192 the
    // token tile is 1.3 MB per CTA against 1 MB of weights). No token-tail twin (the swapped tail loads the whole Y).
    SM90_CFG_SWAP_MC("int8_swap_n160_ps_mc2", 160, 5, true, false),
    SM90_CFG_SWAP_MC("fp8_swap_n160_ps_mc2", 160, 5, false, true),
    // Session 19 (run since session 20; fp8 planned by plan_pair_swap): two token tiles of 80 / 96 at 129..192 tokens
    // without split-K, for the shapes whose 48..64 weight tiles leave half the SMs idle with one token tile
    // (70b-down-tp4, 70b-o-tp4, 8b-qkv: 0.75-0.80x of cuBLASLt's tensorwise there, whose 64x136 / 128x72 / 128x80
    // tiles run 128 CTAs). Session 18's split-K n80 / n96 at split 1 lost there (0.81-1.09x), their epilogue
    // then 13k cycles; these take the lean swapped epilogue. 8 / 7 stages (26 / 28 KB each); n80 stages chunks
    // of 16 tokens (sm90_cfg::CW).
    SM90_CFG("int8_swap_n80_ps", 80, 8, true, true, false, false, 1),
    SM90_CFG("fp8_swap_n80_ps", 80, 8, false, true, true, false, 1),
    SM90_CFG("int8_swap_n96_ps", 96, 7, true, true, false, false, 1),
    SM90_CFG("fp8_swap_n96_ps", 96, 7, false, true, true, false, 1),
    // Session 20: fp8_128x192_promote whose two half temporaries alternate (a warpgroup keeps a half in flight
    // while it promotes the other; 96 + 2 x 48 registers). Ran in session 21 (every_config), 4-21% faster than
    // the plain 192 tile: the 128 x 192 rule's fp8 tile since then (W8A8_SM90_HDB).
    SM90_CFG_HDB("fp8_128x192_promote_hdb", 4),
    // (Session 20's token-tail twins of plan_pair_swap's tiles, fp8_swap_n80_ps_tail / _n96_ps_tail, ran in
    // session 21: -R 3 at 129..176 tokens 0.98x-1.02x at the partial tile's worst rows and 3-10% slower at the
    // others (h200-session21 part 1); removed.)
    // Session 22: the skinny swapped tiles (64 weight rows; cuBLASLt's small-M shape, NOTES Hopper session 22), one
    // CTA per SM with 16..7 stages of (8 KB + BN x 128 B) beside a 64 x (BN + 1)-word staging buffer.
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
    // Session 22, after the last device call (NOT yet run): fp8 token tiles of cuBLASLt's sizes that wgmma takes for
    // e4m3 only (N % 16 != 0 above 32): 33..40 tokens in one tile, 65..72, and 129..136 (the 128 -> 129 step).
    SM90_CFG_SKINNY("fp8_skinny_n40", 40, 16, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n72", 72, 12, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n136", 136, 7, false, 1),
    // Session 23: 1..16 tokens (the n24 tile beat the deep n8 / n16 swap tiles there by up to 1.21x, fp8 70b-o-tp4,
    // h200-session23 part 2), with more stages (the same ~185 KB of ring).
    SM90_CFG_SKINNY("fp8_skinny_n8", 8, 20, false, 1),
    SM90_CFG_SKINNY("fp8_skinny_n16", 16, 18, false, 1),
    SM90_CFG_SKINNY("int8_skinny_n8", 8, 20, true, 1),
    SM90_CFG_SKINNY("int8_skinny_n16", 16, 18, true, 1),
    // Session 23 (first run in session 24): the skinny pairs, two token tiles sharing one weight tile (cuBLASLt's 1x2
    // clusters of 64x8 .. 64x72 tiles on 8b-o's 64 weight tiles: 128 CTAs without split-K).
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
    // Session 25 (first run in session 26): the same tiles with two consumer warpgroups alternating over the ring's
    // K-blocks (what cuBLASLt's 384-thread CTAs do on the same tiling, session 24 part 3), the same rings. (fp8 n136 /
    // n144 with two temporaries of 72 beside 72 accumulators spilled 1-1.4 KB in the 168 registers ptxas gives 288
    // threads: 65536 / 384.)
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
    // Session 26 (NOT yet run): wider token tiles with two consumer warpgroups, for the shapes whose weight tiles fill
    // a third of the SMs at 129..384 tokens (70b-qkv-tp4: 40 weight tiles; at 256 tokens three tiles of 88 put 120
    // CTAs on the GPU where our 128 x 128 split-K plan runs 17.5 us against cuBLASLt's 12.9-13.8 with 128 CTAs of
    // 80 x 64, session 18's torchk). Rings as deep as 227 KB allows beside the staging buffer (n112 / n128: 8). fp8
    // above 80 tokens keeps one promotion temporary per warpgroup (two spilled from n96 up in 168 registers); n136
    // with it too (it had spilled with two; n144 still spills 24 bytes at 168 registers: not built).
    SM90_CFG_SKINNY_K2("fp8_skinny_n88_k2", 88, 10, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n96_k2", 96, 10, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n112_k2", 112, 8, false),
    SM90_CFG_SKINNY_K2("fp8_skinny_n128_k2", 128, 8, false),
    SM90_CFG_SKINNY_K2("int8_skinny_n96_k2", 96, 10, true),
    SM90_CFG_SKINNY_K2("int8_skinny_n128_k2", 128, 8, true),
    SM90_CFG_SKINNY_K2("fp8_skinny_n136_k2", 136, 6, false),
    SM90_CFG_SKINNY_K2("int8_skinny_n144_k2", 144, 6, true),
    // Session 26 (first run in session 27): the wide fp8 tiles with 232 registers per consumer thread (WR): two
    // promotion temporaries again, and n144 / n160 / n176 (three token tiles of them on 70b-qkv-tp4's 40 weight tiles
    // cover 385..528 tokens, where the plan's 128 x 128 tile runs 80 CTAs).
    SM90_CFG_SKINNY_K2R("fp8_skinny_n88_k2r", 88, 10, false),
    SM90_CFG_SKINNY_K2R("fp8_skinny_n112_k2r", 112, 8, false),
    SM90_CFG_SKINNY_K2R("fp8_skinny_n128_k2r", 128, 8, false),
    SM90_CFG_SKINNY_K2R("fp8_skinny_n144_k2r", 144, 6, false),
    SM90_CFG_SKINNY_K2R("fp8_skinny_n160_k2r", 160, 6, false),
    SM90_CFG_SKINNY_K2R("fp8_skinny_n176_k2r", 176, 6, false),
    // Session 28: the 128 x 160 tile (plan's 160 rule, W8A8_SM90_WIDE160): 2560 columns in 16 whole tiles, so 70b-qkv-tp4
    // fills 128 of 132 SMs at 1024 tokens (the 128 x 192 tile: 112 CTAs over 14 tiles, the last 5% empty; cuBLASLt
    // 32.2 us against our 36.5, v29) and 256 at 2048 (the 128 x 128 tile: 320 CTAs, 2.4 waves; 61.9 against 73.6).
    // 5 stages of 36 KB; the lean epilogue's last 32 columns go out through the direct one. fp8 promotes in
    // alternating halves of 80 columns (HDB: 80 + 2 x 40 registers); 168 registers, 0 spills. Prediction: 1024 tokens
    // ~31 us, 2048 ~62. Measured (forced, h200-session28 part 4): int8 28.9 / 57.2 us (the 192 / 128 tiles 32.0 /
    // 66.8; 1500 TOP/s, the large-M rate), fp8 35.4 / 71.0 (36.8 / 73.8): fp8 fills the SMs now but runs at the
    // promoting kernels' per-SM rate (~1210 TFLOP/s), where cuBLASLt's tensorwise does 32.2 / 62.3.
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

// How many clusters of `split` CTAs of config ci fit on the device at once. The kernel's
// shared-memory attribute is set first: v1 queried before it (the heuristic runs before the launch
// prepares the config), with the default 48 KB limit below the kernel's need, so every answer was
// the fallback. If the query fails: an estimate below the plain num_sms * minb / split for clusters
// of more than 2 (GPC granularity: 4-CTA clusters of one CTA per SM fit 30, not 33, on the H200),
// not cached, so a later call asks again (review, session 7: a cached overestimate would have made
// plan_deep pick two-wave splits for good).
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

// Small M (<= 64 tokens): the GEMM streams the weights once, so what matters is that every SM
// streams its share: swap-AB with the token tile just above M (8, 16, 32, 64: tiles cost the same
// bytes whatever their token count, so there is no cliff between buckets), and a split-K factor.
// v2 (session 4): the largest split whose CTAs fit ONE per SM (tiles * split <= SMs), at least two
// K-blocks per CTA. Measured on the H200 (bench/results/h200x2-sm90-ab-2026-11-29-s4.txt, M = 1 and
// 16, splits 1..8): the best split was exactly that on every shape swept (70b-o-tp4: 64 tiles,
// split 2, 7.9 us where v1's split 3 took 9.2 and split 8 17.3; 8b-qkv: 48 tiles, split 2, 10.2
// vs 11.3 at v1's 4; 8b-down: 32 tiles, split 4). Filling the second CTA slot of each SM (v1:
// fewest waves, then the most even fill of 2 CTAs/SM) adds cluster barriers, a longer DSMEM sum
// and more partial tiles without adding bandwidth: two CTAs on one SM share its load path.
// A second CTA per SM still runs where the weight tiles alone exceed the SMs (split 1).
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

// Session 4's plan_tokens32 (two n16 token tiles at 17..32 tokens where the weight tiles leave half
// the SMs free) and session 5's plan_tokens48 (ceil(M / 16) n16 tiles at 33..48 tokens, long K, at
// most 64 weight tiles) were removed in session 7: plan_deep takes every problem they took (review,
// helper-28); their measurements are in NOTES.md.

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

// 17..64 tokens (session 7, after the split-K reduction in quads): swap-AB with ONE token tile (n32
// up to 32 tokens, n64 above; or two n32 tiles, see below), the deep ring (one CTA per SM, 9 / 7
// stages: 144 / 112 KB of weights in flight per SM), and the largest power-of-two split whose
// clusters all run at once (the occupancy query: clusters of 4 fit only 120 CTAs on the H200, so 32
// tiles x 4 is two waves) with at least 4 K-blocks per CTA. Only where the weight tiles alone fit at once, and above 32 tokens only with at
// least 32 K-blocks (K > 3968; 70b-o-tp4, K = 2048, kept the 128 x 128 tile: -2%..+16% against the
// deep n64). Measured (sm90_dev, every configuration x splits 1, 2, 4, 8 at M = 17..128 on all 8
// shapes, both dtypes, h200-sm90-small-m-sweep-2026-11-30.txt): this rule's pick was the fastest or
// within 9% of it at every M = 17..64 row it applies to, and 1.01-1.47x faster than the plans it
// replaces (fp8 8b-o M = 33..64 10.5-10.8 us where the 128 x 128 tile took 14.5; 70b-qkv-tp4 M = 64
// 10.9 vs 15.9 of the 128 x 128 split-K tile; 70b-gateup-tp4 M = 33 35.7 vs 48.4). At 33..64 tokens
// two n32 tiles beat one n64 tile by up to 9% on 8b-o: taken where they double the CTAs, for fp8 only
// since session 15 (below). Returns config -1 where it does not apply.
// 33..64 tokens, session 22 (W8A8_SM90_DEEP3, default 1; hook w8a8_sm90_set_deep3): the n64 deep tile at split
// 3 where deep_split's largest power of two is 2 (more than 30 weight tiles: clusters of 4 do not all fit), the
// weight tiles x 3 CTAs all run at once (the occupancy query for clusters of 3) and K has >= 64 K-blocks.
// 96 CTAs stream the weights where 64 did: with 64 the n64 tile's main loop took 461 cycles per K-block of 24 KB
// against the n32's 372 for 20 KB (session 22's timeline, 8b-o M = 33; h200-session22 part 1), i.e. the
// per-SM intake, not HBM, bounded it. Measured (sm90_dev forcing splits 2 / 3, h200-session22 part 2): fp8 8b-down
// (32 weight tiles, 112 K-blocks) M = 33 / 48 / 64 21.36 -> 19.77, 20.67 -> 19.71, 20.88 -> 20.32 us (the n32 pair
// at split 2, what plan_deep takes where it fits: 23.98 / 22.81 / 22.85); 8b-o (32, 32) 9.29 -> 9.21, 9.28 -> 8.80,
// 9.53 -> 9.23 (n32 pair 9.69 / 9.49 / 9.56); int8 8b-down M = 64 20.44 -> 19.85, 8b-o 9.25 -> 9.08. Not taken
// for n16 / n32 (8b-o M = 32: n32 split 3 8.40 vs 8.13 at 2; 8b-down 19.48 vs 18.64) nor past a power-of-two
// split of 2 (70b-qkv-tp4, 20 tiles: split 5 lost to 4 on every row). The interleaved A/B through torch_compare
// (envab DEEP3 0 vs 1, two rounds, M = 33 / 40 / 48 / 56 / 64, h200-session22 part 4; torch's own rows drifted
// 1.013x and 0.99x between the sides): 8b-down fp8 1.03-1.09x in both rounds, int8 1.00-1.05x; 8b-o (32 K-blocks)
// mixed, fp8 0.96-1.06x, int8 0.98-1.06x (56 / 64 tokens lost in round 2). Hence >= 64 K-blocks (8b-down has 112;
// between 32 and 64 unmeasured). Returns config -1 where it does not apply.
static int g_deep3 = -1;
static int deep3_enabled(void) { return w8a8_env_flag(&g_deep3, "W8A8_SM90_DEEP3", 1); }
static sm90_plan plan_deep3(int dev, sm90_plan a, long long tiles, int kblocks, int num_sms) {
  sm90_plan none = {-1, 1};
  if (a.config < 0 || a.split != 2 || kblocks < 64 || !deep3_enabled()) return none;
  if (tiles > max_active_clusters(dev, a.config, 3, num_sms)) return none;
  a.split = 3;
  return a;
}

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
  // Two n32 token tiles instead where that doubles the CTAs (each weight tile's second read hits L2):
  // sweep rows at 33..64 tokens, 8b-o (32 weight tiles, n64 split 2 = 64 CTAs, n32 x 2 split 2 =
  // 128): 9.9 vs 10.5-10.8 us; 8b-down (the same counts, K = 14336): 21.9-24.4 vs 22.1-24.2, even.
  // Where both give the same CTAs (70b-qkv-tp4, 70b-down-tp4, 8b-qkv) n64 was even or better.
  // Session 15 (h200-sm90-session15-2026-11-30.txt): sm90_dev -a (fp8) had the n64 tile ahead on 8b-down
  // (M = 33 20.9 vs 23.2 us, 64 21.0 vs 22.9) and even on 8b-o; the interleaved A/B through torch_compare
  // (W8A8_SM90_DEEP_N32X2 1 vs 0, two rounds, M = 33 / 40 / 48 / 64) kept that for int8 only: int8 n64
  // 1.01-1.09x on 8b-down, 1.00-1.04x on 8b-o; fp8 n64 0.95-0.97x on 8b-down at 33, 1.03-1.05x at 48 / 64,
  // 0.96-0.99x on 8b-o (0.95-0.97x with the weights-constant hint). So two n32 tiles for fp8 only
  // (W8A8_SM90_DEEP_N32X2: unset that rule, 1 both dtypes, 0 neither).
  // Session 22: n64 at split 3 where deep_split's power of two came out 2 and three CTAs per weight tile all
  // run at once (clusters of 3: 117 CTAs on the H200), taken before the two n32 tiles (see plan_deep3).
  const sm90_plan a3 = plan_deep3(dev, a, tiles, kblocks, num_sms);
  if (a3.config >= 0) return a3;
  const int n32x2 = deep_n32x2_mode();
  if (n32x2 == 0 || (n32x2 == 2 && int8)) return a;
  const sm90_plan b = deep_split(dev, n32, 2 * tiles, kblocks, num_sms);
  if (a.config >= 0 && b.config >= 0 && b.split >= a.split) return b;  // 2 x tiles x b.split CTAs >= 2 x n64's
  return a;
}

// 1..16 tokens on the deep ring (session 21; W8A8_SM90_DEEP16, hook w8a8_sm90_set_deep16): 1 the n8 / n16
// deep configurations (10 stages, one CTA per SM), 2 plan_deep's n32 deep tile (9 stages, what 17..32 tokens
// run), each at deep_split's split (the occupancy query: every cluster at once, >= 4 K-blocks per CTA); 0
// plan_small (the plain n8 / n16 tiles, split by tiles x split <= SMs). Default 1 since session 21's
// interleaved A/B through torch_compare (envab 0 vs 1, two rounds, M = 1 / 4 / 8 / 16 on all 8 shapes,
// h200-session21 part 2): fp8 1.029 / 1.034x geomean (min 0.987 / 0.992; 70b-qkv-tp4 1.07-1.09x, 8b-o
// 1.05-1.07x, 8b-down 1.04-1.07x at 4..16), int8 1.018 / 1.017x (min 0.978); mode 2 (n32) lost (0.99x,
// min 0.90). sm90_dev (part 2): the deep n8 / n16 tiles at split 2 were the fastest or within 3% of it
// on 4 shapes at 1 and 16 tokens, and plan_small's split 4 cost 8-45% where it differs. Why: v18 ran 17 tokens faster
// than 16 on four shapes (fp8 70b-qkv-tp4 9.0 vs 10.0 us, 8b-o 8.2 vs 8.7, 8b-down 18.4 vs 19.3) and one
// token slower than 16 (70b-down-tp4 20.5 vs 18.2): plan_small's split ignores the occupancy query
// (32 weight tiles x split 4 = 32 clusters of 4, of which 30 fit one CTA per SM), which plan_deep's
// sweep found costs 20-40% at 17..32. Where deep_split declines (more weight tiles than SMs), plan_small.
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

// 33..SWAP64_MAX tokens (default 40) where the weight tiles alone exceed the SMs (plan_deep declines:
// one CTA per SM cannot hold them; 8b-gateup, N = 28672: 224 tiles): plan_small's swap-AB n64 tile at
// split 1 (two CTAs per SM) instead of the 128 x 256 tile with 95..88 of its 128 token rows out of
// bounds. Session 15 (h200-sm90-session15-2026-11-30.txt): sm90_dev -a, fp8 8b-gateup M = 33 34.6 us
// against 38.8, M = 64 37.6 against 36.4; the interleaved A/B through torch_compare (W8A8_SM90_SWAP64_MAX
// 32 vs 64, two rounds) at M = 33 / 40 / 48 / 56 / 64: fp8 1.11 / 1.07 / 1.04 / 1.00 / 0.96x, int8 1.08-1.09
// / 1.06 / 1.01 / 0.95 / 0.94x, fp8 with the weights-constant hint 1.02 / 0.98 / 0.96 / 0.92 / 0.90x: hence
// 40. W8A8_SM90_SWAP64_MAX=N moves the bound (32: off; hook w8a8_sm90_set_swap64_max). Kept to what the
// measurement covers (helper-42's review): at least 16 K-blocks (8b-gateup has 32), at most 2 x SMs weight
// tiles (one wave of two CTAs per SM; 8b-gateup: 224 of 264), and no ready flags (the all-gather's tiles
// wait for rows: not measured there). It applies with the weights-constant hint (1.02x at 33, 0.98x at 40)
// and under W8A8_FP8_ACCUM_FAST (the fast 128 x 256 tile it replaces there took 36.0 us at 64 tokens where
// the precise one took 36.4: not measured at 33..40).
static int g_swap64_max = -1;
static int swap64_max(void) { return w8a8_env_int(&g_swap64_max, "W8A8_SM90_SWAP64_MAX", 40, 32, 64); }

// 65..80 tokens on the n64 deep ring with two token tiles (the second holds 1..16 tokens, loaded
// through the token tail where tail_plan takes it: int8 always, fp8 up to 8 rows), plan_deep's split
// rule over twice the weight tiles: the 64 -> 65 step (1.15-1.42x in v11/v12) comes from leaving the
// deep plans for the 128-row tile, whose token box then has 48..63 of its 128 rows filled by TMA.
// Same conditions as plan_deep above 32 tokens (at least 32 K-blocks). Session 9 (envab
// W8A8_SM90_DEEP80, h200-sm90-tail-twins-2026-11-30.txt part 3, taking it wherever it applied): won
// where the split is 2 on a grid of >= 70% of the SMs (8b-o: 64 tiles x 2 = 128 CTAs, 1.06-1.15x;
// 8b-down 1.00-1.06x), lost or was mixed elsewhere (8b-qkv, split 1 on 96 CTAs: 0.82-0.87x;
// 70b-qkv-tp4, split 2 on 80: fp8 0.90-0.98x; 70b-down-tp4, split 1 on 128: 1.08x at 65 / 72, 0.87-0.94x
// at 80). The default took only the first kind (fitted on two shapes, run as a rule in session 10; session
// 13 added split 1 on >= 90% of the SMs, below). With
// the weights-constant hint those two were even (fp8 8b-o 0.98-0.99x, 8b-down 0.99-1.04x); the rule
// does not look at the hint. Session 10 ran the rule (envab W8A8_SM90_DEEP80 0 vs 2, two rounds,
// h200-sm90-rules-2026-11-30.txt): int8 8b-o 1.13-1.15x and 8b-down 1.10-1.15x at 65 / 72 / 80; fp8
// 8b-o 1.16-1.19x and 8b-down 1.09-1.13x at 65 / 72, but at 80 8b-down 0.88x and 8b-o 1.03-1.04x: fp8's
// token tail takes at most 8 rows (tail_plan), so at 73..80 its second token tile is the filled box. The
// rule keeps fp8 to 65..72; elsewhere it planned nothing else (8b-qkv, 8b-gateup, the tp4 shapes even).
// Session 13 (sm90_dev, forced against the 128 x 128 tile the plan had, h200-sm90-session13-2026-11-30.txt
// part 5): 70b-down-tp4 at split 1 on 128 CTAs, M = 65 / 72: fp8 23.9 vs 25.6, 23.8 vs 25.4 us (1.07x),
// int8 23.9 vs 26.2, 23.7 vs 24.5 (1.10 / 1.03x), as session 9 had it (1.08x; 0.87-0.94x at 80, and
// 8b-qkv's split 1 on 96 CTAs lost): the rule also takes split 1 on >= 90% of the SMs up to 72 tokens.
// W8A8_SM90_DEEP80: unset the rule, 1 wherever it applies (the session-8 experiment), 0 never.
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
    const int split1 = pl.split == 1 && ctas * 10 >= 9LL * num_sms && p->M <= 72;  // session 13
    if (!(split2 || split1) || (p->in_dtype != W8A8_DTYPE_INT8 && p->M > 72)) return none;
  }
  return pl;
}

// 129..192 tokens with few weight tiles and a long K (session 11): the n64 deep ring over three token
// tiles, plan_deep's split rule (deep_split), taken where that split is 2. With 128-row tiles such a
// problem runs on few CTAs that are each bound by their own MMA rate (70b-qkv-tp4,
// 20 weight tiles: 40 CTAs at 525 cycles per K-block, h200-sm90-deep256-2026-11-30.txt's timeline); three
// n64 token tiles x 20 x split 2 put 120 CTAs on it. Measured (sm90_dev, forced, same file): 70b-qkv-tp4
// int8 M = 129 17.3-17.9 us against the multicast 128 x 128 tile's 22.1, M = 192 13.8 vs 22.1; fp8 18.5
// vs 24.1 and 15.0 vs 24.1. At 193..256 tokens the four token tiles leave split 1 (80 CTAs, 20.5 us,
// slower than the stream-K twin's 18.6), and where the token x weight tiles alone fill the SMs (8b-o,
// 96 at M = 129: 15.5 vs 14.1) split 1 lost too. envab (W8A8_SM90_DEEP256 0 vs 1, two rounds): 70b-qkv-tp4
// int8 1.15 / 1.39 / 1.55x at M = 129 / 160 / 192, fp8 1.22 / 1.42 / 1.59x. The rule keeps to what was
// measured (helper-36's review): three token tiles (129..192 tokens) and a split of exactly 2 (smaller N
// would take 4 or 8, and 193..256 tokens with N <= 2048 would take narrow256's shapes), >= 32 K-blocks as
// plan_deep, and not with ready flags (the all-gather's tiles wait for rows; not measured there).
// W8A8_SM90_DEEP256=0 turns it off (A/B runs).
// Session 21: the same at 97..128 tokens (two n64 token tiles; W8A8_SM90_DEEP128, hook w8a8_sm90_set_deep128).
// sm90_dev forcing every candidate at M = 97 / 112 / 128 (h200-session21 part 6): fp8 70b-qkv-tp4 n64 deep split 2
// (80 CTAs) 13.0-13.3 us against the split-K 128 x 128 tile's 14.2-14.5 (the plan there) and the n128 deep tile's
// 13.7-14.1; 8b-o 10.7-10.9 against the 128 x 64 tile's 11.1-11.2; 8b-qkv (48 weight tiles: split 1) lost 14.3-14.9
// vs 11.5-13.7, which the split-2 condition leaves out. Interleaved A/B through torch_compare (envab DEEP128 0
// vs 1, two rounds, M = 97 / 112 / 128 on 70b-qkv-tp4, 8b-o, 8b-down, h200-session21 part 7): fp8 1.051 / 1.039x
// geomean (70b-qkv-tp4 1.05-1.09x, 8b-down 1.07-1.09x at 112 / 128 but 0.96-0.98x at 97, 8b-o 1.01-1.05x); int8
// 1.017 / 1.000x: 70b-qkv-tp4 1.04-1.10x, 8b-down 1.00-1.03x, 8b-o 0.92-0.97x (its 128 x 64 tile, which does not
// promote, stays faster with 32 K-blocks). So int8 only with >= 64 K-blocks (as measured on both sides: the
// rows it leaves out keep the plan they had).

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
// W8A8_SM90_FOLD: the token tail's fold (tail_plan; the kernel's sm90_tail_fold), and the 128 x 64 tile for a
// single partial token tile where its tiles fill most of the SMs. 0 off; 1 session 16's rule (the fold
// wherever a twin can take it, any grid, and the 128 x 64 tile at 65..127 tokens where N / 64 is in [SMs / 2,
// SMs]); unset (2) the measured rule, fold_measured below. Session 17 ran rule 1 (sm90_dev -R 0/3/4 and envab
// 0 vs 1, two rounds, 5 shapes x M = 65..120: h200-session17-2026-11-30.txt parts 1-2): the fold was 1-2 us
// faster than the one-box tail on every forced twin, but far from -P's real rows (70b-down-tp4 128 x 64 int8
// 22.0 us at M = 80 against 18.1), and end to end it lost 2-5% overall: 8b-qkv (the 128 x 64 tile on 96
// CTAs) 0.77-0.99x, every shape at 96..120 tokens 0.81-0.94x. It won at 65..80 tokens where the 128 x 64
// tile fills >= 90% of the SMs (70b-down-tp4 int8 24.4 -> 21.9 us at 65, 1.10x at 72, 1.01x at 80; fp8
// 1.05 / 1.03x at 65 / 72, 0.94x at 80; 70b-o-tp4 int8 1.03-1.05x, fp8 1.01-1.02x), and for fp8 with the
// weights-constant hint on the 128 x 128 twin, which the single-tile tail does not take (70b-gateup-tp4,
// 112 CTAs: 41.7 -> 35.7 us at 65, 1.16x at 72, 1.07x at 80; 1.01x at 96, 0.98x beyond).
// Session 18: the swap-AB deep ring with wider token tiles (n80 / n96) at 65..96 tokens (one token tile)
// and 129..192 (two), where its split fills the SMs at >= 2 (weight tiles x token tiles x split <= what runs
// at once, the largest power of two: deep_split), >= 32 K-blocks (>= 56 at 81..96 tokens), no ready flags
// (the all-gather's tiles: not measured). At 129..192 it comes after plan_deep256 (three n64 token tiles,
// 70b-qkv-tp4), so it replaces the unswapped 128-row token tiles only. Measured (sm90_dev, forced against
// the heuristic, h200-session18 part 2; best split per row, which deep_split's rule picks on every row
// below): fp8 / int8, 70b-qkv-tp4 M = 72 / 96 1.32 / 1.23x (split 4), 70b-down-tp4 72 1.16 / 1.10x, 96 1.06 /
// 1.03x, 8b-qkv 72 1.10 / 1.11x, 8b-o 72 1.04 / 1.08x, 8b-down 72 / 96 1.03-1.09x, and at 129..192 8b-o
// 1.18-1.26x / 1.08-1.19x, 8b-down 1.19-1.32x / 1.08-1.18x (two token tiles at split 2 on 128 CTAs). Where
// the split came out 1 it lost (8b-qkv at 129..192 0.81-1.02x, 70b-down-tp4 0.81-1.09x, 70b-gateup-tp4
// 0.76-0.98x), with K = 2048 too (70b-o-tp4 0.55-0.89x), and at 81..96 tokens with K = 4096 (8b-o int8
// 0.93x, 8b-qkv 0.97x). The n128 tile (97..128 tokens, 193..256) lost nearly everywhere (0.54-1.05x).
// W8A8_SM90_WIDE_SWAP=0 turns it off (A/B runs; hook w8a8_sm90_set_wide_swap).
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
// Session 19: ONE swapped token tile of 160 at 129..160 tokens (int8_swap_n160_ps / fp8_swap_n160_ps: a persistent
// grid, no split-K, the lean swapped epilogue; the token-tail twin through apply_tail where the tile is partial),
// where the 128-row token tiles need two (the second nearly empty at 129) and the weight tiles of 128 fill the
// SMs: N / 128 in [3/4 SMs, 2 SMs], >= 32 K-blocks, no ready flags, and what the lean epilogue needs (no int8
// zero point; out and ldo allow 4-element stores; else the swapped tile's general epilogue, slower: not taken).
// cuBLASLt does the same there (torch's tensorwise kernels at 129..192 tokens: sm90_qqtst_128x136 .. 128x160
// _TNT, h200-session18 part 1). Measured (sm90_dev, forced against the heuristic, h200-session19 part 3, before
// the twins): 70b-gateup-tp4 (112 weight tiles) fp8 1.17-1.24x at 129..160, int8 1.12 / 1.25x at 144 / 160
// (even at 129: the fill); 8b-gateup (224) fp8 1.11-1.16x, int8 1.04 / 1.07x at 144 / 160 (0.97x at 129). On
// 20..64 weight tiles it lost (0.5-0.85x). W8A8_SM90_SINGLE_SWAP=0 turns it off (hook w8a8_sm90_set_single_swap).
// Envab 0 vs 1 (h200-session19 part 5): fp8 1.07x, int8 1.04x geomean over 20 rows, min 0.984x. Unmeasured under
// W8A8_FP8_ACCUM_FAST (the rule then replaces the fast 128 x 256 tile with the promoting n160).
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
  // (int8 at 129..144 tokens: the n144 tile, session 28)
  sm90_plan pl = {find_config(int8 ? (p->M <= 144 ? "int8_swap_n144_ps" : "int8_swap_n160_ps") : "fp8_swap_n160_ps"), 1};
  return pl;
}
// Session 20: TWO swapped token tiles of 80 (129..160 tokens) or 96 (161..192) without split-K, fp8 only
// (fp8_swap_n80_ps / fp8_swap_n96_ps: persistent, the lean swapped epilogue), where the plain 128 x 128
// promoting tile would run one CTA per weight tile over 2 token tiles and the rules above did not apply
// (plan_wide_swap's split came out 1): 2 x N / 128 <= SMs (one wave), >= 32 K-blocks, no ready flags, out
// and ldo allow the lean epilogue's 4-element stores. The swapped tile's fp8 main loop promotes no partial
// sums through registers the way the 128 x 128 tile does (session 19: that costs ~20% on compute-bound
// 64-CTA grids). Measured (sm90_dev, forced against the heuristic's 128 x 128 mc2 tail tile, h200-session20
// part 1): fp8 70b-down-tp4 (64 weight tiles, 56 K-blocks) 27.05 -> 26.49 us at 129, 27.2 -> 24.7 at 144,
// 27.3 -> 24.4 at 160, n96 27.4 -> 25.4 at 176, 27.5 -> 25.9 at 192; 8b-qkv (48, 32) 16.15 -> 15.3 / 14.4 /
// 14.2 at 129 / 144 / 160, n96 16.2 -> 15.5 at 176 / 192. Lost: 70b-o-tp4 (16 K-blocks) 10.4 -> 10.6-11.4;
// int8 everywhere (its 128 x 128 tile does not promote: 70b-down-tp4 22.3 vs 24.2-26, 8b-qkv 13.7 vs 13.9-18.6).
// W8A8_SM90_PAIR_SWAP=0 turns it off (hook w8a8_sm90_set_pair_swap). Unmeasured under W8A8_FP8_ACCUM_FAST.
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

static int g_fold = -1;
static int fold_mode(void) { return w8a8_env_int(&g_fold, "W8A8_SM90_FOLD", 2, 0, 2); }
// The 128 x 64 tile's token ceiling under the measured rule: int8 80, fp8 72.
static int fold_max_tokens(int int8) { return int8 ? 80 : 72; }
// The skinny tiles (session 22; W8A8_SM90_SKINNY: 4 the default since session 24, 3 in session 23 (2 earlier that
// session), 1 the first rule, 0 off; hook w8a8_sm90_set_skinny). Mode 1, at 16..64 tokens: one token tile of n24 / n32 / n48 / n64 (the
// smallest that holds M) over 64-row weight tiles, no split-K, where those weight tiles alone fill one wave (0.9 x SMs
// .. SMs: 119..132 on the H200) and K has <= 16 K-blocks. What cuBLASLt runs at small M (64x16..64x48 tiles, session 22
// part 6). Measured (sm90_dev forced against the plans, h200-session22 part 7, first cut with one fp8 temporary):
// 70b-o-tp4 (128 weight tiles of 64, 16 K-blocks) fp8 M = 16 / 24 / 32 6.64 / 6.79 / 6.98 us against the deep n16 / n32
// split 2's 7.65 / 8.03 / 8.13, M = 33 / 48 / 64 7.49 / 7.96 / 8.29 against the 128 x 128 tile's 9.60 / 9.20 / 8.97;
// int8 33 / 48 / 64 7.35 / 7.48 / 8.08 against 9.45 / 8.99 / 8.86. With fewer weight tiles it lost or tied (8b-qkv, 96
// tiles: 11.2-11.7 vs 11.4-11.8; 8b-o, 64: fp8 9.5-10.5 vs 9.2-9.3; 8b-down, 64 tiles x 112 K-blocks: 21-27 vs 20), and
// at 129..144 tokens (n144, 8b-qkv / 70b-o-tp4 / 8b-o 0.80-0.93x; 70b-down-tp4 1.07x at 129 only). Not with ready flags
// (the kernel does not wait).
// Interleaved A/B through torch_compare (envab W8A8_SM90_SKINNY 0 vs 1, two rounds, 70b-o-tp4 at 16 / 24 / 32 / 40 / 48
// / 64 tokens, h200-session22 part 8; torch's rows 1.00 / 0.99x): fp8 1.211 / 1.190x geomean (min 1.097, 64 tokens),
// int8 1.186 / 1.167x (min 1.068), fp8 with the weights-constant hint 1.208 / 1.188x.
// Mode 2 (the default early in session 23, then mode 3): also from 0.45 of a wave of weight tiles with <= 32 K-blocks,
// and at >= 0.9 x SMs with any K. The forced rows after the promotion was double-buffered (part 8) favour it: fp8 8b-o
// (64 tiles, 32 K-blocks) M = 16 6.80 vs 7.76 us, 40 / 48 8.34 / 8.39 vs 9.61 / 9.57 (n48), 32 7.84 vs 8.05, 64 9.07 vs
// 9.52; 70b-down-tp4 (128 tiles, 56 K-blocks) 16.93 / 17.92 / 18.19 / 18.62 vs 17.90 / 18.32 / 19.04-19.48 / 19.76;
// 8b-qkv (96, 32) 1.02-1.04x, 0.98x at 32; int8 (no promotion, first run) 8b-o 1.05-1.07x at 33 / 48, 0.98x at 64.
// Interleaved A/B (envab W8A8_SM90_SKINNY 1 vs 2, two rounds, 8b-o / 8b-qkv / 70b-down-tp4 at 16 / 24 / 32 / 40 / 48 /
// 56 / 64 tokens, h200-session23 part 1; round 2's torch rows 1.00x, round 1's 1.03-1.04x on the A side): mode 2
// faster, fp8 1.062x geomean in round 2 (8b-o 1.04-1.19, 70b-down-tp4 1.03-1.08, 8b-qkv 0.99-1.04), 1.100x in round 1;
// int8 1.016x (0.98-1.05; 8b-o at 56 / 64 tokens 0.98-0.99), 1.050x; fp8 with the weights-constant hint 1.094x.
// Mode 3 (the default since session 23): mode 2's weight-tile rule over more token counts, from the forced rows of
// h200-session23 part 2 (sm90_dev, each tile against the plan on 8b-o / 8b-qkv / 70b-o-tp4 / 70b-down-tp4): 1..15
// tokens (fp8 n24 against the deep n8 / n16 tiles: 70b-o-tp4 7.59 -> 6.29 us, 8b-o 7.55 -> 6.71, 70b-down-tp4 17.41 ->
// 16.55, 8b-qkv 9.70 -> 9.67; int8 70b-o-tp4 7.62 -> 6.52, 70b-down-tp4 1.02x, 8b-qkv / 8b-o 0.95-0.97x with ONE
// accumulator chain, before the int8 tile's two) on n8 / n16; fp8 33..40 on n40 (2-3% faster than n48 on three shapes,
// equal on the fourth); 65..80 on n72 / n80 (fp8 n72 1.05-1.10x on all four; int8 n80 0.98-1.09x); fp8 129..144 on n136
// / n144 where the weight tiles fill >= 0.7 of a wave (n136: 70b-o-tp4 1.06-1.08x, 70b-down-tp4 1.16-1.22x, 8b-qkv
// 1.12-1.16x; 8b-o's 64 tiles 0.94-0.96x, 8b-down 0.89-0.95x).
// Interleaved A/B (envab W8A8_SM90_SKINNY 2 vs 3, two rounds, 8b-o / 8b-qkv / 70b-o-tp4 / 70b-down-tp4 at 1 / 4 / 8 /
// 15 / 33 / 40 / 65 / 72 / 80 / 129 / 136 / 144 tokens, h200-session23 part 3; round 2's torch rows 0.99x, round 1's
// 1.01-1.02x): fp8 1.056 / 1.083x geomean, int8 1.017 / 1.048x (the int8 tile's two chains in both sides); 1..15 tokens
// fp8 1.02-1.25x (8b-qkv ~1.0), int8 1.03-1.23x from 4 tokens (one goes to gemv.cu); 129..144 fp8 1.02-1.24x; 65..80
// 1.04-1.15x except where the 128 x 64 fold then replaced the skinny plan (70b-down-tp4 0.85-0.94x, 70b-o-tp4 0.98x):
// fold_move leaves skinny plans alone since. After the A/B, from the forced rows of part 4: fp8 n8 up to 8 tokens
// (70b-o-tp4 6.12 us vs n24's 6.27, 8b-o 6.46 vs 6.68) and n24 at 9..24 (n16 slower); int8 n16 below 16.
static int g_skinny = -1;
// W8A8_SM90_SKINNY_SHIFT (session 24; default 1, 0 for A/B runs; tail mode 0 turns it off too): a partial last token
// tile of a skinny plan with more than one token tile (the pairs' second tile) loads the BN rows that end at the last
// token instead of a box that runs past it (sm90_skinny_row0 in the kernel).
static int g_skinny_shift = -1;
__attribute__((unused)) static int skinny_shift_enabled(void) {
  return w8a8_env_flag(&g_skinny_shift, "W8A8_SM90_SKINNY_SHIFT", 1);
}
static int skinny_mode(void) { return w8a8_env_int(&g_skinny, "W8A8_SM90_SKINNY", 4, 0, 4); }
// W8A8_SM90_SKINNY_K2 (session 25; hook w8a8_sm90_set_skinny_k2): plan_skinny's tiles with two consumer warpgroups (the
// _k2 twin of the planned configuration): 2 (default since session 26) for fp8 single tiles of 24..48 tokens, 1 every
// twin, 0 none. Session 26 call 1 (h200-session26 part 1; sm90_dev forcing each tile and its twin, 8b-o / 8b-down /
// 8b-qkv / 70b-o-tp4 / 70b-down-tp4 at 8..144 tokens): the twin 2-3% faster for fp8 n8 / n24 / n48 singles and n24 /
// n48 pairs (70b-down-tp4 24 tokens 17.30 -> 16.75 us, 8b-o 96 n48 pair 9.49 -> 9.38), even to 1-4% slower for the fp8
// n64 / n72 tiles, and for int8 (one warpgroup there already runs two wgmma chains) 0-8% slower from n32 up (70b-o-tp4
// 16 tokens n64 7.69 -> 8.33), 1-2% faster with n16. Far from session 24's prediction (8b-o 96 tokens 11.97 -> 9.5 us
// under ncu; cuBLASLt's 64 x 48 tile with three warpgroups 8.80): the consumers' latency is not what holds these tiles
// back. Call 2 (part 2), envab through torch_compare (0 vs the first rule, fp8 <= 48 with the pairs; two rounds, 5
// shapes at 1..96 tokens): singles of 24..48 1.02-1.05x (70b-o-tp4 33 tokens 7.4 -> 7.1 us), n8 (1..8 tokens)
// 0.98-1.02x, the 8b-o pairs 0.98-1.00x (96 tokens 9.6 -> 9.8 us): hence singles of 24..48.
static int g_skinny_k2 = -1;
static int skinny_k2(void) { return w8a8_env_int(&g_skinny_k2, "W8A8_SM90_SKINNY_K2", 2, 0, 2); }
// W8A8_SM90_SKINNY_WIDE (session 26; hook w8a8_sm90_set_skinny_wide): 1 (session 26's default) mode 4 also plans the
// wide fp8 _k2 tiles (88..128 tokens, two consumer warpgroups) where a few token tiles of them fill a wave: three on 40..44
// weight tiles (70b-qkv-tp4) at 129..144 (n48) and 193..384 tokens, two on 60..66 with <= 32 K-blocks (8b-o) at
// 145..192; 0 off. Session 26 call 3 (h200-session26 part 3; sm90_dev forcing every wide tile against the plan):
// 70b-qkv-tp4 144 tokens n48 13.76 vs 14.53 us, 256 n88 16.39 vs 17.35, 320 n112 19.06 vs 23.09, 384 n128 20.54 vs
// 23.37 (n136 20.51), not 160 / 192 (n64 14.76 / 14.68 vs 14.75 / 14.10) nor 512 (30.4 vs 23.8); 8b-o 160 n88 10.57 vs
// 11.53, 192 n96 11.52 vs 12.30, not 256 (n128 13.21 vs 11.28); lost on 8b-down at 160 / 192 (112 K-blocks: the deep
// split tiles), on 70b-o-tp4 / 70b-gateup-tp4 / 8b-qkv (128 / 112 / 96 weight tiles) from 128 tokens, and for int8 but
// at 384 tokens on 70b-qkv-tp4 (n128 20.02 vs 21.88; 256: n96 17.73 vs 17.06). Call 5 (part 4), envab 0 vs 1, two
// rounds: 70b-qkv-tp4 1.04-1.21x at 129..384 tokens, 8b-o 1.05-1.11x at 145..192, every other row 0.996-1.01.
// Mode 2 (session 27; the default, pending its envab): the tiles of 112 tokens up as their _k2r twins (384 threads,
// setmaxnreg: 232 registers per consumer thread, two promotion temporaries), three token tiles on 40..44 weight tiles
// also at 385..480 / 513..528 tokens (n144 / n160 / n176 _k2r), and two on 60..66 weight tiles with >= 64 K-blocks
// (8b-down) at 193..352 (n112..n176 _k2r). Session 27 call 1 (h200-session27 part 1; sm90_dev forcing each tile
// against the plan): k2r vs k2 n112 18.83 vs 19.29 us, n128 19.87 vs 20.76 (70b-qkv-tp4 320 / 384), 8b-down 256 n128
// 31.71 vs 32.73, n88 equal; 70b-qkv-tp4 400 n144 22.11 vs 25.62 (128 x 128), 448 n160 23.13 vs 23.48, 528 n176 24.89
// vs 28.76, not 512 (n176 25.00 vs 23.51); 8b-down 256 n128 31.71 vs 34.20 (the 128 x 128 split), 320 n176 39.63 vs
// 43.50, not 160 / 192 (the deep swapped tiles 25.62 / 27.46 vs n88 / n112 27.21 / 29.94); 8b-o (32 K-blocks) not at
// 256 / 320 (the 128 x 64 / 128 x 128 tiles 11.28 / 14.90 vs n128 / n176 12.83 / 16.36).
static int g_skinny_wide = -1;
static int skinny_wide(void) { return w8a8_env_int(&g_skinny_wide, "W8A8_SM90_SKINNY_WIDE", 2, 0, 2); }
// Mode 4 (the default since session 24; opt-in in session 23): the skinny pairs (the _mc2 configs: two token tiles
// of one weight tile, the weights multicast) where the weight tiles fill at most half of the SMs and twice them >= 0.9
// of a wave (8b-o / 8b-down: 64 tiles -> 128 CTAs), at 33..128 tokens with <= 32 K-blocks and at 129..144 with any K,
// the pair's tile the smallest that holds half of M (the second tile, where partial, shifted back over real rows:
// W8A8_SM90_SKINNY_SHIFT); elsewhere mode 3. What cuBLASLt runs on 8b-o (64x24 / 64x72 tiles in 1x2 clusters,
// session 22 part 6). Session 24 call 1 (h200-session24 part 1), forced rows (sm90_dev, 8b-o / 8b-down, fp8 and
// int8, before the shift): on 8b-o the pairs beat the plan at 48 tokens (n24 pair 8.02 vs n48 8.39 us), 64 (n32
// 8.74 vs 9.08), 100 (n64 10.43 vs 10.88), 128 (10.00 vs 10.76), 129 (n72 10.07 vs 11.67), 144 (10.10 vs 11.35);
// not at 16..32 (7.5-8.0 vs 7.33, n8 / n16 pairs); on 8b-down (112 K-blocks) they lost to the deep split tiles at
// 16..100 tokens (19.6-37 vs 17.8-23.8) and won at 129 (25.4 vs 28.3; int8 at 128 / 144 1.06-1.09x). A partner
// with a mostly empty tile ran slow (n64 pair at 65 tokens 12.4 us, at 100 10.4): TMA's fill, hence the shift. The
// first rule (any K, from 9 tokens) in an interleaved A/B against mode 3 (envab, two rounds, 8b-o / 8b-down at 16 /
// 32 / 48 / 64 / 100 / 128 / 129 / 144): 8b-o fp8 1.02-1.14x from 48 tokens, 0.97x at 16 / 32; 8b-down 0.88-0.95x
// below 129. Hence 33 tokens and the K bound below 129.
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
// W8A8_SM90_HDB (session 21; hook w8a8_sm90_set_hdb): 1 (default) the 128 x 192 rule's fp8 tile is
// fp8_128x192_promote_hdb (the promoted halves' temporaries alternate, so a warpgroup always has a half in
// flight), 0 the plain one. Session 21, call 1 (sm90_dev forcing both, fp8 M = 2048..8192 on 5 shapes,
// h200-session21 part 1): hdb faster on 14 of 15 rows, 0.6-21% (8b-qkv 2048 105.1 -> 82.8 us, 8b-down
// 4096 441 -> 389), 1.4% slower on one (8b-qkv 8192); call 2 on the rule's own shapes (70b-qkv-tp4 and
// 8b-qkv at M = 512 / 768 / 1024, part 2): hdb faster on all 6 rows, 1.04-1.08x (70b-qkv-tp4 512 35.7 -> 33.2 us).
static int g_hdb = -1;
static int hdb_enabled(void) { return w8a8_env_flag(&g_hdb, "W8A8_SM90_HDB", 1); }
static int g_wide160 = -1;  // W8A8_SM90_WIDE160: 1 (default) plan's 128 x 160 rule (inside the 192 rule's switch), 0 off
static int wide160_enabled(void) { return w8a8_env_flag(&g_wide160, "W8A8_SM90_WIDE160", 1); }
static int wide192_enabled(void) { return w8a8_env_flag(&g_wide192, "W8A8_SM90_WIDE192", 1); }
static sm90_plan plan(int dev, const w8a8_mm_problem *p, int num_sms) {
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  // 33..64 tokens where plan_deep does not apply: the 128 x 128 tile (history: before the deep ring
  // and the quad reduction, session 1-6). int8: it measured faster than swap-AB n64 on 5 of 5 shapes
  // at M = 64 (H200, 2026-11-29, bench/results/h200-sm90-2026-11-29.md), and it is what M = 65
  // gets, so there is no step at 64 -> 65. fp8: swap-AB n64 took 48.7 / 63.1 us at M = 64 where
  // the 128 x 128 tile took 22.7 / 22.5 us at M = 128 (8b-qkv, 8b-o; h200-auto-2026-11-29.md);
  // at M = 64 the 128 x 128 tile does the same work as at M = 128 (one 128-row tile), so it
  // removes that cliff by construction.
  // 17..64 tokens: plan_deep first (session 7); where it does not apply (more weight tiles than
  // SMs; 33..64 tokens with a short K), plan_small up to 32 tokens, and at 33..swap64_max() tokens where
  // the weight tiles outnumber the SMs (session 15, see swap64_max), then the rules below. 33..128
  // tokens, measured on the H200 (session 2,
  // bench/results/h200-torch-compare-2026-11-29-v2/v3): one 128-row tile covers M <= 128, so the
  // unsplit 128 x 128 tile runs on N / 128 SMs. Few weight tiles and a long K (8b-down: 32 tiles x
  // 112 K-blocks; 70b-qkv-tp4: 20 x 64): split K over a cluster until one wave fills the SMs:
  // 42.9 -> 33.8 us and 26.0 -> 20.0 us. With a shorter K the split's fixed cost (cluster
  // barriers, DSMEM sum, per-element epilogue) lost: 8b-qkv 17.5 -> 23.5, 8b-o 16.6 -> 20.0,
  // 70b-o 12.6 -> 20.3 us. Session 4 re-measured M = 64 against swap-AB n32 / n64 at splits 1, 2, 4
  // (h200x2-sm90-ab-2026-11-29-s4.txt, section 4): these choices were fastest or within 5% on 6
  // of 7 shapes; the seventh, 8b-gateup, now takes the 128 x 256 tile below (40.7 vs 50.0 us).
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
  // Session 9: the same split at 129..256 tokens (two token tiles, at most 64 of them: N <= 4096
  // again) with at least 96 K-blocks of 128 (K > 12160), with the split tile's token-tail twin where
  // tail_plan takes the partial tile (apply_tail: int8 at 129..248 tokens, fp8 at 129..144).
  // Interleaved A/B (W8A8_SM90_SPLIT256, h200-sm90-tail-twins-2026-11-30.txt): 8b-down (32 weight
  // tiles, 112 K-blocks: the unsplit tile's 64 CTAs, split 2 here) int8 44.6 -> 33.3 us at M = 129,
  // 1.06-1.11x at 192 / 256; fp8 1.20-1.25x at 129, 1.03-1.09x at 192 / 256. With 64 K-blocks it
  // lost: 70b-qkv-tp4 (20 weight tiles, split 3) M = 129 int8 22.2 -> 27-29 us, fp8
  // 24.1 -> 26.9, even at 192 (its unsplit 40 CTAs pay no fill cost: the 128 -> 129 step there,
  // 1.49x in v12, is the 128-token split plan's gain, not a loss at 129).
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
  // 89..128 tokens (one 128-row tile, at most 39 rows out of bounds) with at most SMs / 2 weight tiles
  // of 128 (66 on the H200) and K <= 4096: the 128 x 64 tile (twice the CTAs, still one wave).
  // Measured at M = 128 (session 5, h200-sm90-timeline-2026-11-29.txt): fp8 8b-o 11.0 us vs 14.7,
  // 8b-qkv 11.4 vs 15.0, 70b-o-tp4 7.6 vs 10.0; int8 8b-o 10.4 vs 14.0. At M = 96 (session 7, the
  // small-M sweep): fp8 8b-o 11.3 vs 14.6, 8b-qkv 14.0 vs 14.9, 70b-o-tp4 8.3 vs 9.5; int8 8b-o 10.7
  // vs 12.8, 70b-o-tp4 8.2 vs 8.7, 8b-qkv 13.9 vs 13.1 (the one loss). At M = 64 (half the tile's
  // rows out of bounds) it lost on 8b-qkv (16.1 vs 15.0; M <= 64 is plan_deep's now), and at M =
  // 256 on 8b-qkv and 70b-o-tp4; the edge at 88 lies between those, unmeasured.
  // With a longer K (session 13, sm90_dev forcing each tile, h200-sm90-session13-2026-11-30.txt part 4):
  // 70b-down-tp4 (64 weight tiles, 56 K-blocks) at M = 128 fp8 19.3 vs 22.4 us, int8 18.4 vs 21.2; at
  // M = 96 it lost (fp8 23.1 vs 22.4, int8 23.0 vs 21.2), at 65 / 80 more; at 104 it won (fp8 20.5-20.6 vs
  // 22.2, int8 20.4-20.5 vs 21.1), at 112..120 1.12-1.19x (part 5), but at 101 (planned by a first cut
  // of this rule, part 6) fp8 22.6 and int8 22.4 us against the 128 x 128 tile's 22.3 / 21.2 at 100.
  // Taken there from 104 tokens. Its reach beyond what was measured: every K above 4096 where the split-K
  // rule above did not take the problem, i.e. also <= 32 weight tiles with 33..63 K-blocks, or where that
  // rule's split came out 1 (unmeasured there).
  if (p->M > 88 && p->M <= 128 && 2 * ((p->N + 127) / 128) <= num_sms && (kblocks_all <= 32 || p->M >= 104)) {
    sm90_plan pl = {find_config(int8 ? "int8_128x64" : "fp8_128x64_promote"), 1};
    if (pl.config >= 0) return pl;
  }
  // 129..256 tokens (session 9's candidate for 8b-o's 128 -> 129 step; v12: int8 10.1 -> 13.6 us, fp8
  // 11.0 -> 14.5): the same 128 x 64 tile where its two token tiles still fit one wave (2 x N / 64 <=
  // SMs: N <= 4224 on the H200), with its token-tail twin (apply_tail). Session 10 (envab
  // W8A8_SM90_NARROW256 0 vs 1, two rounds, h200-sm90-rules-2026-11-30.txt; 8b-o is the one shape of the
  // set it applies to): M = 256 int8 12.9 -> 10.4 us, fp8 13.8 -> 11.4 (1.21-1.24x); M = 192 even (int8
  // 0.96-0.98x, fp8 1.03-1.04x); M = 129 lost (0.95-0.99x: one 8-row box on 128 CTAs against the 128 x
  // 128 tile's 64). The rule takes the second token tile when it holds more than 64 rows.
  const int narrow256 = p->M > 128 && p->M <= 256 ? narrow256_mode() : 0;
  if (narrow256 && (narrow256 == 1 || p->M > 192) && 2 * ((p->N + 63) / 64) <= num_sms && kblocks_all <= 32) {
    sm90_plan pl = {find_config(int8 ? "int8_128x64" : "fp8_128x64_promote"), 1};
    if (pl.config >= 0) return pl;
  }
  // 128 x 256 unless the narrower tile fills the SMs clearly better (few tiles). fp8 too since
  // session 4 (fp8_128x256_promote): measured against fp8_128x128_promote where this rule picks
  // it, 70b-qkv-tp4 M = 8192 279.8 vs 300.9 us, 8b-gateup M = 4096 940 vs 1035, 8b-gateup M = 64
  // 40.7 vs 50.0, 70b-o-tp4 M = 1024 42.7 vs 49.5; and where the rule keeps the 128 x 128 tile, the
  // 128 x 256 one lost (70b-qkv-tp4 M = 4096 164.7 vs 150.7, 8b-qkv M = 1024 63.0 vs 51.9).
  int64_t tm = (p->M + 127) / 128;
  int64_t t256 = tm * ((p->N + 255) / 256), t128 = tm * ((p->N + 127) / 128);
  double e256 = wave_share(t256, num_sms);
  double e128 = wave_share(t128, num_sms);
  int wide = e256 >= e128 * 0.9;
  // fp8 always promotes (PRECISE): QGMMA's own accumulation over the whole K range measured an error
  // of 1.1e-3 of sum|a||b| at K = 429 on random e4m3 data (NOTES.md), growing with K, where promotion
  // keeps it to one 128-deep block's truncation. fp8_128x256 (fast accumulation) is what
  // W8A8_FP8_ACCUM_FAST maps the wide tile to (apply_fp8_accum).
  const char *name = int8 ? (wide ? "int8_128x256" : "int8_128x128") : (wide ? "fp8_128x256_promote" : "fp8_128x128_promote");
  // W8A8_SM90_WIDE192 (session 15's rule, default since session 16): the 128 x 192 tile where its share
  // of the SMs' work, counting the last column tile's empty columns, beats the pick above's by 10%
  // (70b-qkv-tp4 M = 1024: 112 tiles x 95% filled = 0.81 of one wave against 0.61). Not with ready flags.
  // Measured (envab 0 vs 1, two rounds, h200-sm90-session16-2026-11-30.txt): 70b-qkv-tp4 M = 1024 fp8
  // 47.2 -> 39.0 us (1.20-1.22x), int8 43.1 -> 33.9 (1.26-1.29x); 8b-qkv M = 512 fp8 26.1 -> 22.6
  // (1.15-1.16x), int8 24.2 -> 19.5 (1.24x). Where it does not fire the 192 tile mostly lost (sm90ab).
  if (wide192_enabled() && !p->ready) {
    const int64_t n192 = (p->N + 191) / 192, t192 = tm * n192;
    const double e192 = wave_share(t192, num_sms) * ((double)p->N / (double)(n192 * 192));
    const int64_t wn = wide ? 256 : 128, nw = (p->N + wn - 1) / wn;
    const double ew = (wide ? e256 : e128) * ((double)p->N / (double)(nw * wn));
    if (e192 > ew * 1.1) name = int8 ? "int8_128x192" : hdb_enabled() ? "fp8_128x192_promote_hdb" : "fp8_128x192_promote";
    // W8A8_SM90_WIDE160 (session 28): the 128 x 160 tile likewise where its share, counting the last column tile's empty
    // columns, beats the pick so far by 10%, on at most two waves of its tiles. Session 28 took only N % 160 == 0
    // (N = 2560: 70b-qkv-tp4 at 769..1024 and 1665..2048 tokens on 132 SMs; 128 / 256 tiles of 160 columns). envab
    // 0 vs 1 (one round, h200-session28 part 4): 70b-qkv-tp4 1024 / 2048 int8 32.7 -> 29.2 / 67.1 -> 57.1 us (1.12 /
    // 1.18x), fp8 36.3 -> 34.8 / 73.1 -> 69.2 (1.04 / 1.06x). Not at 768 (the 128 x 128 tile's 120 CTAs: 26.7 us
    // against 31.8) nor 4096 (1.01x). Session 29 (forced rows, h200-session29 part 1) where the same arithmetic fires
    // on other N: fp8 / int8 us, the 160 tile against the plan: 8b-qkv 300 18.7 / 16.7 vs 19.5 / 18.4 (the 192 tile),
    // 384 18.8 / 16.8 vs 19.6 / 18.5, 700 35.0 / 30.3 vs 38.2 / 34.6 (128); 8b-o 600 19.1 / 17.0 vs 19.7 / 18.2, 1100
    // 34.8 / 30.3 vs 38.2 / 34.9, 1280 36.3 / 30.9 vs 38.3 / 35.1; 70b-o-tp4 600 21.2 / 19.0 vs 22.1 / 20.3; but
    // 70b-gateup-tp4 2400 (1710 tiles, 13 waves: the share is ~1 for every tile) fp8 453.5 vs 432.1 (int8 378.5 vs
    // 381.7): hence the cap of two waves. fp8 with HDB only (the tile has no plain promoting twin).
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

// 129..255 tokens (two 128-row tiles, the second partial), heuristic plans only: the planned tile's
// twin with B multicast over a 2-CTA cluster on the two M tiles. Measured (session 6,
// h200-sm90-partial-m-2026-11-30.txt): with separate CTAs the K-block of a weight tile whose second M
// tile is mostly out of bounds took 903 cycles instead of 721 (70b-o-tp4), 1044 instead of 604
// (70b-down-tp4): M = 129 ran 1.4-1.6x slower than M = 256. The guess was that the two CTAs of a
// weight tile drift apart and read it from HBM twice; the multicast twin (one read, in step) won only
// 1.026x (geomean of 24 rows, 0.95x..1.11x) and M = 129 stays slower than M = 256, so the cause is
// elsewhere (the cost grows with the out-of-bounds rows: TMA's fill?). Kept for the small gain. Not
// with ready flags (all-gather + GEMM keeps the plain tiles), nor with the weights-constant hint
// (multicast tiles do not take it, and the hint's gain there was not measured against this one).
// Runs after apply_fp8_accum: under FAST the wide fp8 tile is fp8_128x256 already, which has no twin.
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
// The rule (session 9, the *_tail twins as kernels of their own, interleaved in one process:
// h200-sm90-tail-twins-2026-11-30.txt): ONE box of the partial tile's valid rows rounded up to 8,
// where there are exactly two token tiles; fp8, and int8's 128 x 256 tile, only where that box is
// at most an eighth of the tile (16 rows unswapped, 8 swapped). Heuristic end to end (envab, two
// rounds): int8 128 x 128 M = 129 1.31-1.64x on 70b-o, 70b-down, 8b-qkv; M = 160 1.21-1.35x; M =
// 192 (a 64-row box) 1.08-1.21x. fp8 M = 129 1.25-1.43x, but at M = 160 / 192 the weights-constant
// launches lost up to 14% (8b-qkv 16.4 -> 18.1 us, 15.5 -> 18.1), and at M = 48 on swap n32 (a
// 16-row box) 5% on 8b-o. int8 128 x 256 (the multicast twin): M = 129 1.13-1.19x on
// 70b-gateup-tp4 and 8b-gateup, M = 192 1.5-2.5% slower (twice the MMA work per stage against the
// same fill). Not where the partial tile is the only token tile (M = 65..100 on the 128-row tile:
// every CTA splits its loads, 8-17% slower; except, since session 16, the plain 128 x 128 tiles where
// apply_tail's gate passes: W8A8_SM90_TAIL_SINGLE below), not with three token tiles (swap n32 at M = 65..80:
// 2-8% slower); several boxes always lost (each box ~85 cycles per stage, session 8). Except on the n64
// deep ring with three or more token tiles (plan_deep256's, session 11; sm90_dev -R 1 vs 3, split 2,
// h200-sm90-deep256-2026-11-30.txt): 70b-qkv-tp4 int8 M = 129 19.2 -> 14.1 us, 136 18.4 -> 14.1, 160
// (a 32-row box) 16.4 -> 14.2; fp8 19.6 -> 15.3, 18.9 -> 15.3, 16.8 -> 15.5; even at 192 (no partial
// tile). There the partial tile's TMA fill was a third of the kernel; any box, fp8 too.
typedef struct tail_boxes {
  int n, rows;
} tail_boxes;
// W8A8_SM90_FP8_TAIL_BOX: where the handle has no weights-constant hint, fp8's cap on the 128 x 128 tiles
// (unswapped, two token tiles): 0 an eighth of the tile (the cap before session 12, from the hint's
// launches: 8b-qkv M = 160 0.91x, 192 0.86x in session 9), 1 int8's (any box, the swapped tiles too),
// unset 2: half the tile. Without the hint the filled box cost: 8b-down fp8 (the split tile, 128 CTAs)
// took 48.7 us at M = 160 and 42.2 at 192 against 35.0 at 129. Session 12 envab 0 vs 1 (two rounds, 8
// shapes, M = 160 / 192 / 224; h200-sm90-session12-2026-11-30.txt): a 32-row box (M = 160) 8b-down
// 46 -> 34 us (1.36x), 70b-down-tp4 1.22-1.24x, 8b-qkv 1.13-1.15x, 70b-o-tp4 1.12-1.13x; a 64-row box
// (192) 8b-down 1.18x, 70b-down-tp4 1.04-1.05x, 8b-qkv 0.94-1.00x; a 96-row box (224) lost: 8b-o 11.7 ->
// 15.1 us (0.77x), 70b-down-tp4 0.92-0.93x, 8b-qkv 0.92x. Hence half.
static int g_fp8_tail_box = -1;
static int fp8_any_box(const w8a8_handle *h) {
  return h->weights_constant ? 0 : w8a8_env_mode(&g_fp8_tail_box, "W8A8_SM90_FP8_TAIL_BOX", 2);
}
// W8A8_SM90_TAIL_SINGLE (session 16; default 1, 0 for A/B runs): the rule also takes the partial tile where it
// is the ONLY token tile (65..127 tokens), on the plain 128 x 128 tiles (int8, and fp8 where fp8_box is not 0:
// not with the weights-constant hint, unmeasured there), any box; apply_tail's 70% grid gate decides where. Since
// session 19 also the swapped unsplit n160 twins (plan_single_swap's single token tile of 129..152 tokens).
// sm90_dev -R 0 vs 3 (h200-sm90-session16-2026-11-30.txt part 6): 70b-gateup-tp4 (112 CTAs) int8 M = 65 / 72 /
// 80 / 96 44.2 / 42.9 / 40.9 / 39.0 -> 34.5 / 34.4 / 34.8 / 34.9 us (1.12-1.28x), fp8 45.0 / 43.3 / 41.4 / 39.2 ->
// 34.6 / 34.6 / 34.7 / 34.9 (1.12-1.30x), even at 104; on 32..64 CTAs (70b-down-tp4, 70b-o-tp4, 8b-qkv, 8b-o) it
// lost 5-15% (session 9's "8-17%"), which the gate keeps out. The 128 x 64 tile's twin gained at 65..80 on
// 128 CTAs but lost at 96..104 and to the plans those shapes have there: not taken.
static int g_tail_single = -1;
static int tail_single_enabled(void) { return w8a8_env_flag(&g_tail_single, "W8A8_SM90_TAIL_SINGLE", 1); }
// The fold (session 16, NOT yet run on a GPU; the kernel's sm90_tail_fold): a single partial token tile of
// 65..127 rows on an unswapped, unsplit, unicast twin loads rows [0, 64) and [M - 64, M) in one 3-D box,
// every row a real row of A (no fill, no short box), returned as one box of SM90_BM rows. Taken in tail
// mode 4 (sm90_dev -R 4, tests) and by the rule (mode 1) as W8A8_SM90_FOLD says (g_fold: by default the
// measured rule, fold_measured + apply_tail's grid + fold_move's plan). The question it was built for
// (session 16): -P (real rows past M) ran 70b-down-tp4's 128 x 64 tile at 18.2 us (int8) for M = 65..128
// where the plans took 21.3-23.9; the fold took 22.0 (session 17): its rows are real, yet it is nearly as
// slow as the one box of valid rows (23.2), so the cost is not the fill alone (NOTES, Hopper, session 17).
// Unswapped tiles only: a swapped tile's token box is BN rows (n144 / n160), so one short box of exactly 128 valid rows
// is an ordinary tail there (session 29: taken for a fold, it got the fold's 3-D map over the WEIGHTS, which the
// swapped kernel's 2-D load then used: an illegal instruction, sm90_dev -a at 8b-o M = 128 on fp8_swap_n160_ps_tail).
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
// bench/sm90_dev -P only (session 7, the partial-M question): 1 = A's tensor map covers whole token
// tiles (M rounded up to 128, or to the token tile when swapped), so a partial tile's rows past M are
// read from memory instead of being filled by TMA. This READS PAST THE CALLER'S A: only for a caller
// whose A buffer has those rows (sm90_dev allocates 16384); the outputs past M are still not stored. No shift under it
// (its rows are what -P measures; session 29's review: the launch recomputed rows_x and shifted).
__attribute__((unused)) static int g_pad_tokens;  // set but unread without sm_90a
// W8A8_SM90_SHIFT (session 27; default 1, 0 for A/B runs): the kernel's shift (sm90_args.shift_x, sm90_x0): on the
// unswapped tiles without split-K, stream-K or pingpong (plain, multicast and tail twins alike), where the last of
// two or more token tiles is partial, that tile loads the LAST 128 tokens through the kernel's own map instead of a
// box that runs past M (TMA's out-of-bounds fill) or the tail's short boxes; under tail_plan's rule (tail mode 1)
// only, so that sm90_dev -R and the tail tests still get the boxes they ask for, and never with ready flags.
// Prediction (session 27 part 3, the plain 128 x 128 tile at 353..500 tokens against its full-tile times): 8b-down
// 385 / 416 tokens 55.5 / 52.4 -> ~47 us, 8b-o 18.1 / 16.9 -> ~14.8, 70b-qkv-tp4 529 / 560 28.4 / 26.4 -> ~24.5.
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
    while (box % r && r < box) r += 8;  // (n160: 32; an eighth, 20, is no multiple of 8: the host turned the tail off)
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
  // (the swapped unsplit tiles: plan_single_swap's n160 twins, session 19)
  const int single = token_rows < box && (c->swap || c->bn == 128) && !c->splitk && c->mcast != 2 &&
                     (c->int8 || fp8_box != 0) && tail_single_enabled();
  if (rows < box && (mode == 3 || (two_tiles && rows <= cap) || deep_many || single)) {
    t.n = 1;
    t.rows = rows;
  }
  return t;
}

// The heuristic's *_tail twins (W8A8_SM90_TAIL, default 1; 0 for A/B runs with
// scripts/steps/envab.sh): where the plan's configuration has a twin (the same tile, pipeline and
// split; the tail map on top), tail_plan's rule takes the partial token tile, and the grid fills at
// least 70% of the SMs. Below that the TMA fill of the missing rows cost nothing measurable (no 128
// -> 129 step on 8b-o's 64 CTAs or 70b-qkv-tp4's 40) while the twin's extra box per stage did: 8b-o
// M = 129 13.0 -> 14.1 us, 70b-qkv-tp4 21.6 -> 25.6, swap n32 split 2 on 70b-qkv-tp4 (80 CTAs)
// 11.4 -> 12.7; at 96 CTAs and more the tail won everywhere measured (8b-qkv: 96).
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
  // the fold: any grid under rule 1; under rule 2 >= 90% of the SMs on the 128 x 64 twin (session 17: 8b-qkv's
  // 96 CTAs lost), the tail's 70% elsewhere
  const int gate = tail_is_fold(c, bx) ? (fold_mode() == 1 ? 0 : c->bn == 64 ? 9 : 7) : 7;
  if (bx.n > 0 && ctas * 10 >= (int64_t)num_sms * gate) pl->config = to;
}

// Fold rule 2's plan (see g_fold): a single partial token tile of 65..fold_max_tokens rows goes to the 128 x 64
// tile, whose twin then takes the fold, where the tile's grid fills 90..100% of the SMs (N / 64 in [0.9 SMs,
// SMs]: 70b-down-tp4, 70b-o-tp4 on 132 SMs); not fp8 with the weights-constant hint (70b-o-tp4 0.96x, mixed),
// not with ready flags. After the heuristic's plan (not a tuned one): it replaces plan_deep80's split 1 at
// 65..72 tokens and the 128 x 128 tile's single-tile tail at 73..80 there.
static void fold_move(const w8a8_handle *h, const w8a8_mm_problem *p, sm90_plan *pl, int num_sms) {
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const int64_t n64 = (p->N + 63) / 64;
  // (nor a skinny plan: session 23's envab of W8A8_SM90_SKINNY 2 vs 3 had the fold replace mode 3's n72 / n80 at 65..80
  // tokens, 70b-down-tp4 fp8 20.8 -> 23.6 us where the skinny tile forced ran 18.8)
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

// W8A8_SM90_PP=1 (opt-in until the pingpong tiles have run and been measured on a GPU): where the
// plan is a cooperative large int8 tile (int8_128x256 / int8_128x128), or fp8 under
// W8A8_FP8_ACCUM_FAST (fp8_128x256, fp8_128x128_promote) and there are at least two 128 x 128 tiles per SM (each consumer warpgroup
// then has tiles of its own; with fewer, one warpgroup would do a whole tile alone), take the
// pingpong tile instead. For A/B runs: bench/torch_compare.py in a second process with it set.
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

// Stream-K (session 10; the kernel's SK, sm90_streamk.h). sk_fits: whether the stream-K twin ci can run
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
// Where the plan is the plain 128 x 128 tile (after the token-tail twin had its turn): its stream-K
// twin. W8A8_SM90_STREAMK=1 wherever the schedule has stream-K units (a last wave under 80% full, more
// than 8 K-blocks: sm90_sk_make), =0 never, unset the rule (mode 2): more than 128 tokens and even
// splits of at least 3 per tile (at most a third of the SMs' worth of tiles, >= 24 K-blocks). Session 10
// (h200-sm90-streamk-2026-11-30.txt; envab W8A8_SM90_STREAMK 0 vs 1, two rounds, M = 256..2048 on 8
// shapes, and sm90_dev A/Bs of the forced twins): the one clear win was 70b-qkv-tp4 at M = 256 (40
// tiles, 3 splits each on 120 CTAs): int8 24.2-26.2 -> 19.8-21.1 us, fp8 28.0-29.3 -> 21.2-22.2
// (1.22-1.32x); two splits per tile lost (8b-o M = 256, 0.91x in sm90_dev), and the continuous cut lost
// wherever it ran: 8b-qkv M = 256 (96 tiles) 0.72-0.75x, 70b-qkv-tp4 M = 512 (80) 0.89-0.95x, M = 2048
// 0.86-0.92x, 70b-gateup-tp4 M = 1024 0.84-0.87x, 8b-gateup M = 512 0.82-0.91x. Halving a tile's K did
// not halve its time (8b-o: 14.3 -> 15.6 us on twice the CTAs); why is open (NOTES). Not with ready flags
// (the twin does not wait for arriving rows) nor the weights-constant hint (the twin does not preload).
// W8A8_SM90_SK_MC2 (default 1; 0 for A/Bs): the rule also over the multicast twins of the 128 x 128 tile
// that apply_mc2m planned at 129..255 tokens (their stream-K twin is the plain tile's). The case:
// 70b-qkv-tp4 at 193..255 tokens, where the multicast tile took 22.2 us (int8) / 24.2 (fp8) at M = 224;
// plan_deep256 takes 129..192 there. Prediction ~19-20 us at 224; session 12 envab 0 vs 1 (two rounds,
// h200-sm90-session12-2026-11-30.txt): int8 22.5 -> 20.9 / 22.2 -> 18.6 / 22.3 -> 17.2 us at M = 193 /
// 224 / 255 (1.08 / 1.19 / 1.30x), fp8 24.3 -> 21.0 / 18.7 / 17.5 (1.16 / 1.30 / 1.39x), both rounds alike.
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
  // all-gather asks w8a8_sm90_accepts without its flags): the heuristic's plan there (review, helper-54).
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
// Every configuration stamps (session 6); dev_buf holds max_ctas x max_tiles_per_cta x 4 values
// (sm90_args.timeline). Without W8A8_SM90_TIMELINE in the build the kernels ignore it.
extern "C" W8A8_HIDDEN void w8a8_sm90_set_timeline(unsigned long long *dev_buf, int max_tiles_per_cta, int max_ctas) {
  g_timeline = max_tiles_per_cta > 0 && max_ctas > 0 ? dev_buf : NULL;
  g_timeline_max = max_tiles_per_cta;
  g_timeline_ctas = max_ctas;
}

#if defined(W8A8_HAVE_SM90A)
static int g_staged = -1;  // W8A8_SM90_STAGED: 1 (default) staged epilogue where it applies, 0 never
static int staged_enabled(void) { return w8a8_env_flag(&g_staged, "W8A8_SM90_STAGED", 1); }
// W8A8_SM90_STAGED32: 1 (default) fp32 outputs through the lean epilogue's TMA stores (session 14),
// 0 on the direct epilogue as before (A/B runs)
static int g_staged32 = -1;
static int staged32_enabled(void) { return w8a8_env_flag(&g_staged32, "W8A8_SM90_STAGED32", 1); }

static int g_prm = -1;  // W8A8_SM90_PRM: 1 (default) the epilogue's scales through the shared-memory slot, 0 from global
static int prm_enabled(void) { return w8a8_env_flag(&g_prm, "W8A8_SM90_PRM", 1); }
static int g_lean = -1;  // W8A8_SM90_LEAN: 1 (default) sm90_epi_lean where it applies, 0 sm90_epi_staged
static int lean_enabled(void) { return w8a8_env_flag(&g_lean, "W8A8_SM90_LEAN", 1); }
static int g_split_quad = -1;  // W8A8_SM90_SPLIT_QUAD: 1 (default) the split-K reduction in quads, 0 element by element (see sm90_args)

// Everything before the launch that can refuse the problem: the input checks, the plan, the
// configuration's attributes, the two tensor maps. w8a8_sm90_accepts runs it too, so that the TP
// one-GEMM path asks exactly what the launch will ask (review, session 3: accepts() alone could pass
// where a later step refused). One difference: that path asks without its ready flags, so at
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
    // Swap configs take several token tiles when forced (M > bn: tiles_y > 1), for the tuner and
    // the dev bench to compare e.g. two n16 tiles with one n32 tile (the heuristic uses two n16
    // tiles at 17..32 tokens since session 4).
    if (CONFIGS[pl->config].swap && p->M > 8 * CONFIGS[pl->config].bn)
      return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: config %s takes M <= %d", FN, CONFIGS[pl->config].name,
                      8 * CONFIGS[pl->config].bn);
  } else {
    *pl = choose_plan(h, p, num_sms);
    // The split-1 quarantine of session 1 is gone: the wide-N cases (sm90wide_*: N = 28672 at
    // M = 1..64, split 1 and 8, several token tiles, AUTO) all passed on the H200 on 2026-11-29
    // (session 2); the one that looked hung was the single-threaded CPU reference of a
    // 64 x 28672 x 4096 product outliving its 45 s step.
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
  // Session 17's experiment (a build with -DW8A8_SM90_TAILX only; never the library's): where the only token
  // tile is partial and one short box loads it (unswapped, not the fold), the A map itself carries the
  // tail's box and the kernel loads through it (sm90_load_tokens): the short box through the kernel's first
  // descriptor instead of tmap_t. Is the tail map's flat ~3-5 us the descriptor or the box?
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
// mode: the fold's rule (g_fold: 0 off, 1 session 16's, 2 the measured one), -1 back to W8A8_SM90_FOLD
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
    // instead of stalling one CTA for the whole gather (review, session 3).
    if (c->swap)
      a.rot_y = (int)((p->ready->first_row + c->bn - 1) / c->bn) % a.tiles_y;
    else
      a.rot_x = (int)((p->ready->first_row + SM90_BM - 1) / SM90_BM) % a.tiles_x;
    // Groups of the tile order no wider than the own rows' whole X tiles (unswapped, MC = 1: the
    // persistent tiles and the split-K ones, whose clusters take items in the same order): where a
    // rank's rows span fewer than SM90_GROUP tiles (TP = 2 at 1024 tokens: 4), a group of 8 mixed own
    // and peer tiles, so half the CTAs began on a peer tile and spun on its
    // flag with their own tiles queued behind it, and the fused all-gather + GEMM took the unfused
    // time (tp-bench 70b-qkv M = 1024: 121.5 vs 123.9 us; helper-31's reading, NOTES). Cut: 1.06-1.10x
    // at 1024 tokens (session 10; sm90_args.group).
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
// Configurations the tuner skips unless W8A8_TUNE_EXPERIMENTAL=1 (the tests run every configuration):
// the pingpong ones (passed on a GPU in session 6, measured slower or even: not worth the tuner's
// time). The deep swap-AB ones (session 6) ran in session 7 and the tuner times them. The multicast
// ones (session 3) have passed the sm90 suite since session 4 and run at the plain tiles' speed
// since session 5. The token-tail twins (session 8): only where a token tile is partial, which
// apply_tail decides after the plan (tuned plans included), so the tuner times the plain tiles. The
// 128 x 192 tiles (session 15) ran in session 16 (the suites green, planned by the WIDE192 rule): timed.
// Session 19's configurations (the swapped mc2 and n80 / n96 ps tiles) were skipped until they had run on a GPU:
// every_config passed with them in session 20, and the tuner times them; session 20's fp8_128x192_promote_hdb
// passed in session 21. (While a configuration has not run on a GPU, a name check here and in apply_tail keeps
// the tuner and the heuristic off it.) Session 23's skinny pairs (mcast 3) were off the tuner until they had run: their
// tests passed in session 24 (call 1), and the tuner times them since; session 25's _k2 twins likewise (session 26).
// Since session 26 a configuration written after the last device call carries `unrun` until its tests have passed.
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
