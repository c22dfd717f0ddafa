/* sm90_configs.h — the configurations of the Hopper (sm_90a) GEMM, one row each, and the tile geometry the
 * kernel, the launcher and the planner share. Plain C, no CUDA: the planner (sm90_plan.c) and its CPU test
 * read the table; sm90_gemm.cu expands the same rows into the kernel instantiations.
 *
 * The table holds only what the planner can pick under its rules (docs/HOPPER.md, sections 3 and 4): the
 * configurations that no plan reaches were deleted (git keeps them). tests/test_sm90_plan.c checks every row
 * against the golden plans.
 *
 * A row: X(ID, name, bn, stages, minb, flags)
 *   ID      the enum value SM90_CFG_<ID> (sm90_cfg_id), the index into every table built from the rows
 *   name    the configuration's name in tuning tables, benchmarks and messages
 *   bn      the tile on wgmma's N side: the weights' columns, or the tokens where swapped
 *   stages  the shared-memory ring's depth (K-blocks in flight)
 *   minb    CTAs per SM (the kernel's launch bound)
 *   flags   the kernel's compile-time switches (SM90_INT8, SM90_SWAP, ... below)
 * Tuning tables name configurations; the development hook w8a8_sm90_scaled_mm_config takes an index. New
 * configurations go at the end. */
#ifndef W8A8_SM90_CONFIGS_H
#define W8A8_SM90_CONFIGS_H

#define SM90_BK 128        /* K-block: 128 one-byte elements = one 128-byte swizzled row */
#define SM90_BM 128        /* CTA tile rows on wgmma's M side: 2 consumer warpgroups x 64 */
#define SM90_MAX_SPLIT 8   /* split-K cluster size limit (portable cluster size) */
#define SM90_SKINNY_BM 64  /* the skinny kernel's weight rows per CTA */

/* A configuration's flags. */
enum {
  SM90_FP8 = 0,                     /* fp8 e4m3 operands (no SM90_INT8) */
  SM90_INT8 = 1 << 0,               /* int8 operands */
  SM90_SWAP = 1 << 1,               /* swap-AB: weights on wgmma's M side, tokens on its N side (small M) */
  SM90_PROMOTE = 1 << 2,            /* fp8: each K-block's sums added into fp32 accumulators; without it the tensor
                                       core accumulates the whole K range (less exact: planned only under
                                       W8A8_FP8_ACCUM_FAST) */
  SM90_SPLITK = 1 << 3,             /* K split over a cluster of `split` CTAs, summed through distributed shared
                                       memory */
  SM90_MC2 = 1 << 4,                /* clusters of two CTAs sharing a multicast tile: the main kernel's neighbouring
                                       X tiles share the Y tile (B); the skinny kernel's two neighbouring token tiles
                                       share the weight tile */
  SM90_TAIL = 1 << 5,               /* the token tail: a partial token tile loaded in short boxes
                                       (w8a8_sm90_tail_plan) */
  SM90_STREAMK = 1 << 6,            /* stream-K: one CTA per SM, sm90_streamk.h's schedule */
  SM90_HALVES_TWO_TEMPS = 1 << 7,   /* fp8 promotion in two halves with alternating temporaries (the `_hdb`
                                       configurations; sm90_accum in sm90_mainloop.cuh) */
  SM90_SKINNY = 1 << 8,             /* the skinny kernel: 64 weight rows x bn tokens, always swapped, fp8 always
                                       promoting */
  SM90_TWO_CONSUMERS = 1 << 9,      /* skinny: two consumer warpgroups on the tile, alternating K-blocks (`_k2`) */
  SM90_PRODUCER_WARPGROUP = 1 << 10 /* skinny with SM90_TWO_CONSUMERS: the producer a whole warpgroup, so that
                                       setmaxnreg moves registers to the consumers, 40 / 232 (`_k2r`) */
};

/* The rows. Comments give each group's purpose and the measurement that keeps it; the rules that plan them
 * live in sm90_plan.c. */
#define SM90_CONFIGS(X)                                                                                               \
  /* large M: 128 x 256 tiles, 4 stages of 48 KB. fp8_128x256 accumulates in the tensor core: planned only under       \
     W8A8_FP8_ACCUM_FAST (apply_fp8_accum, 1.05-1.24x, h200-sm90-ncu-mc2-2026-11-29.txt) */                            \
  X(FP8_128X256,                    "fp8_128x256",                     256,  4, 1, SM90_FP8)                           \
  /* the 128 x 128 tile, 6 stages of 32 KB, where 256-column tiles leave SMs idle (the wave-share rule); int8's        \
     128 x 256 and 128 x 128 tiles */                                                                                  \
  X(FP8_128X128_PROMOTE,            "fp8_128x128_promote",             128,  6, 1, SM90_FP8 | SM90_PROMOTE)            \
  X(INT8_128X256,                   "int8_128x256",                    256,  4, 1, SM90_INT8)                          \
  X(INT8_128X128,                   "int8_128x128",                    128,  6, 1, SM90_INT8)                          \
  /* small M (swap-AB): 128 weight rows x 8..64 tokens, split-K over a cluster, 2 CTAs per SM: plan_small, where the   \
     weight tiles outnumber the SMs (h200x2-sm90-ab-2026-11-29-s4.txt) */                                              \
  X(FP8_SWAP_N8,                    "fp8_swap_n8",                       8,  5, 2, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK) \
  X(FP8_SWAP_N16,                   "fp8_swap_n16",                     16,  5, 2, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK) \
  X(FP8_SWAP_N32,                   "fp8_swap_n32",                     32,  4, 2, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK) \
  X(FP8_SWAP_N64,                   "fp8_swap_n64",                     64,  3, 2, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK) \
  X(INT8_SWAP_N8,                   "int8_swap_n8",                      8,  5, 2, SM90_INT8 | SM90_SWAP | SM90_SPLITK) \
  X(INT8_SWAP_N16,                  "int8_swap_n16",                    16,  5, 2, SM90_INT8 | SM90_SWAP | SM90_SPLITK) \
  X(INT8_SWAP_N32,                  "int8_swap_n32",                    32,  4, 2, SM90_INT8 | SM90_SWAP | SM90_SPLITK) \
  X(INT8_SWAP_N64,                  "int8_swap_n64",                    64,  3, 2, SM90_INT8 | SM90_SWAP | SM90_SPLITK) \
  /* few weight tiles and a long K up to 256 tokens: the 128 x 128 tile with its K range split over a cluster (4       \
     stages beside the 64 KB partial tile for the DSMEM sum): plan's split-K rule */                                   \
  X(FP8_128X128_PROMOTE_SPLITK,     "fp8_128x128_promote_splitk",      128,  4, 1, SM90_FP8 | SM90_PROMOTE | SM90_SPLITK) \
  X(INT8_128X128_SPLITK,            "int8_128x128_splitk",             128,  4, 1, SM90_INT8 | SM90_SPLITK)            \
  /* B multicast over 2-CTA clusters (half the B bytes from L2 per CTA): apply_mc2m at 129..255 tokens, 1.026x         \
     geomean (h200-sm90-partial-m-2026-11-30.txt) */                                                                   \
  X(FP8_128X128_PROMOTE_MC2,        "fp8_128x128_promote_mc2",         128,  6, 1, SM90_FP8 | SM90_PROMOTE | SM90_MC2) \
  X(INT8_128X256_MC2,               "int8_128x256_mc2",                256,  4, 1, SM90_INT8 | SM90_MC2)               \
  /* fp8 on the 128 x 256 tile with promotion in two 128-column halves per K-block (the kernel's PROMOTE_HALF):        \
     10-18% faster than fp8_128x128_promote at M >= 1024 (h200x2-sm90-ab-2026-11-29-s4.txt); its multicast twin */     \
  X(FP8_128X256_PROMOTE,            "fp8_128x256_promote",             256,  4, 1, SM90_FP8 | SM90_PROMOTE)            \
  X(FP8_128X256_PROMOTE_MC2,        "fp8_128x256_promote_mc2",         256,  4, 1, SM90_FP8 | SM90_PROMOTE | SM90_MC2) \
  /* 128 x 64 tiles, 8 stages of 24 KB, for narrow N at 89..256 tokens, where the 128 x 128 tile runs on N / 128       \
     SMs only: plan's 89..128-token and narrow256 rules (h200-sm90-timeline-2026-11-29.txt) */                         \
  X(FP8_128X64_PROMOTE,             "fp8_128x64_promote",               64,  8, 1, SM90_FP8 | SM90_PROMOTE)            \
  X(INT8_128X64,                    "int8_128x64",                      64,  8, 1, SM90_INT8)                          \
  /* int8's 128 x 128 tile with B multicast (apply_mc2m) */                                                            \
  X(INT8_128X128_MC2,               "int8_128x128_mc2",                128,  6, 1, SM90_INT8 | SM90_MC2)               \
  /* swap-AB n8 / n16 with one CTA per SM and 10 stages: twice the weight bytes in flight per SM (160-180 KB) cover    \
     HBM latency under load: plan_deep16 at 1..16 tokens (h200-session21-2026-12-01.txt) */                            \
  X(FP8_SWAP_N8_DEEP,               "fp8_swap_n8_deep",                  8, 10, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK) \
  X(FP8_SWAP_N16_DEEP,              "fp8_swap_n16_deep",                16, 10, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK) \
  X(INT8_SWAP_N8_DEEP,              "int8_swap_n8_deep",                 8, 10, 1, SM90_INT8 | SM90_SWAP | SM90_SPLITK) \
  X(INT8_SWAP_N16_DEEP,             "int8_swap_n16_deep",               16, 10, 1, SM90_INT8 | SM90_SWAP | SM90_SPLITK) \
  /* the same for n32 / n64: 9 and 7 stages (144 / 112 KB of weights in flight per SM): plan_deep at 17..64            \
     tokens, plan_deep256 above (h200-sm90-small-m-sweep-2026-11-30.txt) */                                            \
  X(FP8_SWAP_N32_DEEP,              "fp8_swap_n32_deep",                32,  9, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK) \
  X(FP8_SWAP_N64_DEEP,              "fp8_swap_n64_deep",                64,  7, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK) \
  X(INT8_SWAP_N32_DEEP,             "int8_swap_n32_deep",               32,  9, 1, SM90_INT8 | SM90_SWAP | SM90_SPLITK) \
  X(INT8_SWAP_N64_DEEP,             "int8_swap_n64_deep",               64,  7, 1, SM90_INT8 | SM90_SWAP | SM90_SPLITK) \
  /* The token tail's twins (the kernel's TAIL), only in these instantiations: compiled into every kernel it cost fp8  \
     13-15% where it never engaged. apply_tail takes them where tail_plan loads a partial token tile in boxes; the     \
     tuner skips them (h200-sm90-tail-twins-2026-11-30.txt). The 128 x 128 twins: a single partial token tile, the     \
     fold under the weights-constant hint, two token tiles with ready flags (where the shift does not apply) */        \
  X(INT8_128X128_TAIL,              "int8_128x128_tail",               128,  6, 1, SM90_INT8 | SM90_TAIL)              \
  X(FP8_128X128_PROMOTE_TAIL,       "fp8_128x128_promote_tail",        128,  6, 1, SM90_FP8 | SM90_PROMOTE | SM90_TAIL) \
  /* fp8's two n32 token tiles (plan_deep) at 33..40 tokens; the n64 twins at 65..80 tokens as two token tiles, the    \
     second with at most 16 rows (plan_deep80), where the 128-row tile pays TMA's fill of 48..63 rows, and             \
     plan_deep256's partial last token tile */                                                                         \
  X(FP8_SWAP_N32_DEEP_TAIL,         "fp8_swap_n32_deep_tail",           32,  9, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK | SM90_TAIL) \
  X(INT8_SWAP_N64_DEEP_TAIL,        "int8_swap_n64_deep_tail",          64,  7, 1, SM90_INT8 | SM90_SWAP | SM90_SPLITK | SM90_TAIL) \
  X(FP8_SWAP_N64_DEEP_TAIL,         "fp8_swap_n64_deep_tail",           64,  7, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK | SM90_TAIL) \
  /* the split-K tile's twins (plan's split-K rule at 129..256 tokens: the shift does not take split-K tiles) */       \
  X(INT8_128X128_SPLITK_TAIL,       "int8_128x128_splitk_tail",        128,  4, 1, SM90_INT8 | SM90_SPLITK | SM90_TAIL) \
  X(FP8_128X128_PROMOTE_SPLITK_TAIL, "fp8_128x128_promote_splitk_tail", 128,  4, 1, SM90_FP8 | SM90_PROMOTE | SM90_SPLITK | SM90_TAIL) \
  /* the 128 x 64 tile's twin: plan's narrow256 rule with ready flags, and a tuned plan's fold at 65..80 tokens */     \
  X(INT8_128X64_TAIL,               "int8_128x64_tail",                 64,  8, 1, SM90_INT8 | SM90_TAIL)              \
  /* Stream-K twins of the 128 x 128 tiles (apply_sk's rule; the tuner skips them; h200-sm90-streamk-2026-11-30.txt) */ \
  X(INT8_128X128_SK,                "int8_128x128_sk",                 128,  6, 1, SM90_INT8 | SM90_STREAMK)           \
  X(FP8_128X128_PROMOTE_SK,         "fp8_128x128_promote_sk",          128,  6, 1, SM90_FP8 | SM90_PROMOTE | SM90_STREAMK) \
  /* 128 x 192 tiles, 4 stages of 40 KB (5 would pass 227 KB with the epilogue buffers), for N where 256-column        \
     tiles leave SMs idle (N = 2560: 14 column tiles of 192): plan's WIDE192 rule                                      \
     (h200-sm90-session16-2026-11-30.txt); the fp8 tile is fp8_128x192_promote_hdb below */                            \
  X(INT8_128X192,                   "int8_128x192",                    192,  4, 1, SM90_INT8)                          \
  /* The swap-AB deep ring with wider token tiles (one or two token tiles of 80 / 96 on wgmma's N side, split-K over   \
     a cluster) at 65..96 / 129..192 tokens on few weight tiles, as cuBLASLt's tensorwise kernels, where 128-row       \
     token tiles compute mostly padding: plan_wide_swap (h200-session18-2026-11-30.txt). Stages: as many as 227 KB     \
     hold beside the split-K partial tile (BN lines of 132 words) */                                                   \
  X(FP8_SWAP_N80_DEEP,              "fp8_swap_n80_deep",                80,  7, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK) \
  X(FP8_SWAP_N96_DEEP,              "fp8_swap_n96_deep",                96,  6, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_SPLITK) \
  X(INT8_SWAP_N80_DEEP,             "int8_swap_n80_deep",               80,  7, 1, SM90_INT8 | SM90_SWAP | SM90_SPLITK) \
  X(INT8_SWAP_N96_DEEP,             "int8_swap_n96_deep",               96,  6, 1, SM90_INT8 | SM90_SWAP | SM90_SPLITK) \
  /* The swapped tile without split-K: a persistent grid (the next tile's loads under this one's epilogue), more       \
     stages (no partial tile beside the ring), the lean swapped epilogue: plan_single_swap at 129..160 tokens          \
     (h200-session19-2026-11-30.txt); fp8 promotes in two halves of 80 tokens (PROMOTE_HALF: three 80-register sets    \
     would not fit). With their token-tail twins: one box of the valid rows rounded up to 8 where the single token     \
     tile is partial (at 129 tokens the n160 tile's 31 filled rows cost 2-4 us) */                                     \
  X(INT8_SWAP_N160_PS,              "int8_swap_n160_ps",               160,  5, 1, SM90_INT8 | SM90_SWAP)              \
  X(FP8_SWAP_N160_PS,               "fp8_swap_n160_ps",                160,  5, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE) \
  X(INT8_SWAP_N160_PS_TAIL,         "int8_swap_n160_ps_tail",          160,  5, 1, SM90_INT8 | SM90_SWAP | SM90_TAIL)  \
  X(FP8_SWAP_N160_PS_TAIL,          "fp8_swap_n160_ps_tail",           160,  5, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE | SM90_TAIL) \
  /* One swapped token tile of 144 (as cuBLASLt's 128x144 tiles at 129..144 tokens), 10% less MMA per CTA than n160:   \
     plan_single_swap's int8 tile at 129..144 (8b-gateup 129: 45.8 -> 42.3 us, h200-session28-2026-12-02.txt) */       \
  X(INT8_SWAP_N144_PS,              "int8_swap_n144_ps",               144,  6, 1, SM90_INT8 | SM90_SWAP)              \
  X(INT8_SWAP_N144_PS_TAIL,         "int8_swap_n144_ps_tail",          144,  6, 1, SM90_INT8 | SM90_SWAP | SM90_TAIL)  \
  /* Two fp8 token tiles of 80 / 96 at 129..192 tokens without split-K (the lean swapped epilogue), for the shapes     \
     whose 48..64 weight tiles leave half the SMs idle with one token tile: plan_pair_swap                             \
     (h200-session20-2026-11-30.txt). 8 / 7 stages of 26 / 28 KB; n80 stages chunks of 16 tokens (sm90_epi_buffers::CHUNK_N) */     \
  X(FP8_SWAP_N80_PS,                "fp8_swap_n80_ps",                  80,  8, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE) \
  X(FP8_SWAP_N96_PS,                "fp8_swap_n96_ps",                  96,  7, 1, SM90_FP8 | SM90_SWAP | SM90_PROMOTE) \
  /* fp8's 128 x 192 tile, promoting in two halves of 96 columns with alternating half temporaries (a warpgroup keeps  \
     a half in flight while it promotes the other; 96 + 2 x 48 registers): 4-21% faster than plain halves              \
     (h200-session21-2026-12-01.txt): the WIDE192 rule's fp8 tile */                                                   \
  X(FP8_128X192_PROMOTE_HDB,        "fp8_128x192_promote_hdb",         192,  4, 1, SM90_FP8 | SM90_PROMOTE | SM90_HALVES_TWO_TEMPS) \
  /* The skinny swapped tiles (64 weight rows, cuBLASLt's small-M shape): one CTA per SM with 20..7 stages of          \
     (8 KB + BN x 128 B) beside a 64 x (BN + 1)-word staging buffer: plan_skinny's single token tile                   \
     (h200-session22-2026-12-01.txt, h200-session23-2026-12-01.txt). fp8: n8 at 1..8 tokens, n64..n80 at 49..80,       \
     n136 / n144 at 129..144 (wgmma takes N % 16 != 0 above 32 for e4m3 only), 9..48 on the _k2 tiles below; int8:     \
     n16..n80 at 1..80 */                                                                                              \
  X(FP8_SKINNY_N64,                 "fp8_skinny_n64",                   64, 12, 1, SM90_FP8 | SM90_SKINNY)             \
  X(FP8_SKINNY_N80,                 "fp8_skinny_n80",                   80, 11, 1, SM90_FP8 | SM90_SKINNY)             \
  X(FP8_SKINNY_N144,                "fp8_skinny_n144",                 144,  7, 1, SM90_FP8 | SM90_SKINNY)             \
  X(INT8_SKINNY_N24,                "int8_skinny_n24",                  24, 16, 1, SM90_INT8 | SM90_SKINNY)            \
  X(INT8_SKINNY_N32,                "int8_skinny_n32",                  32, 16, 1, SM90_INT8 | SM90_SKINNY)            \
  X(INT8_SKINNY_N48,                "int8_skinny_n48",                  48, 14, 1, SM90_INT8 | SM90_SKINNY)            \
  X(INT8_SKINNY_N64,                "int8_skinny_n64",                  64, 12, 1, SM90_INT8 | SM90_SKINNY)            \
  X(INT8_SKINNY_N80,                "int8_skinny_n80",                  80, 11, 1, SM90_INT8 | SM90_SKINNY)            \
  X(FP8_SKINNY_N72,                 "fp8_skinny_n72",                   72, 12, 1, SM90_FP8 | SM90_SKINNY)             \
  X(FP8_SKINNY_N136,                "fp8_skinny_n136",                 136,  7, 1, SM90_FP8 | SM90_SKINNY)             \
  X(FP8_SKINNY_N8,                  "fp8_skinny_n8",                     8, 20, 1, SM90_FP8 | SM90_SKINNY)             \
  X(INT8_SKINNY_N16,                "int8_skinny_n16",                  16, 18, 1, SM90_INT8 | SM90_SKINNY)            \
  /* The skinny pairs, two token tiles sharing one weight tile (as cuBLASLt's 1x2 clusters on 8b-o's 64 weight         \
     tiles: 128 CTAs without split-K): plan_skinny's pair rule at 33..144 tokens (h200-session24-2026-12-01.txt) */    \
  X(FP8_SKINNY_N24_MC2,             "fp8_skinny_n24_mc2",               24, 16, 1, SM90_FP8 | SM90_SKINNY | SM90_MC2)  \
  X(FP8_SKINNY_N32_MC2,             "fp8_skinny_n32_mc2",               32, 16, 1, SM90_FP8 | SM90_SKINNY | SM90_MC2)  \
  X(FP8_SKINNY_N48_MC2,             "fp8_skinny_n48_mc2",               48, 14, 1, SM90_FP8 | SM90_SKINNY | SM90_MC2)  \
  X(FP8_SKINNY_N64_MC2,             "fp8_skinny_n64_mc2",               64, 12, 1, SM90_FP8 | SM90_SKINNY | SM90_MC2)  \
  X(FP8_SKINNY_N72_MC2,             "fp8_skinny_n72_mc2",               72, 12, 1, SM90_FP8 | SM90_SKINNY | SM90_MC2)  \
  X(INT8_SKINNY_N32_MC2,            "int8_skinny_n32_mc2",              32, 16, 1, SM90_INT8 | SM90_SKINNY | SM90_MC2) \
  X(INT8_SKINNY_N48_MC2,            "int8_skinny_n48_mc2",              48, 14, 1, SM90_INT8 | SM90_SKINNY | SM90_MC2) \
  X(INT8_SKINNY_N64_MC2,            "int8_skinny_n64_mc2",              64, 12, 1, SM90_INT8 | SM90_SKINNY | SM90_MC2) \
  X(INT8_SKINNY_N80_MC2,            "int8_skinny_n80_mc2",              80, 11, 1, SM90_INT8 | SM90_SKINNY | SM90_MC2) \
  /* Two consumer warpgroups alternating over the ring's K-blocks (as cuBLASLt's 384-thread CTAs on the same           \
     tiling): fp8's single token tile at 9..48 tokens, 1.02-1.05x over one warpgroup (h200-session26-2026-12-01.txt) */ \
  X(FP8_SKINNY_N24_K2,              "fp8_skinny_n24_k2",                24, 16, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS)   \
  X(FP8_SKINNY_N32_K2,              "fp8_skinny_n32_k2",                32, 16, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS)   \
  X(FP8_SKINNY_N40_K2,              "fp8_skinny_n40_k2",                40, 16, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS)   \
  X(FP8_SKINNY_N48_K2,              "fp8_skinny_n48_k2",                48, 14, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS)   \
  /* Wider fp8 token tiles with two consumer warpgroups, for shapes whose 64-row weight tiles fill a half or a third of \
     the SMs: plan_skinny's wide rule up to 96 tokens per tile (h200-session26-2026-12-01.txt). Rings as deep as       \
     227 KB allows beside the staging buffer; one promotion temporary per warpgroup (two spill in 168 registers) */    \
  X(FP8_SKINNY_N88_K2,              "fp8_skinny_n88_k2",                88, 10, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS)   \
  X(FP8_SKINNY_N96_K2,              "fp8_skinny_n96_k2",                96, 10, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS)   \
  /* The wide fp8 tiles with 232 registers per consumer thread (WR): two promotion temporaries again (2-4% over _k2    \
     from n112), and n144 / n160 / n176 (three token tiles of them on 70b-qkv-tp4 cover 385..528 tokens): the wide     \
     rule's tiles from 97 tokens per tile (h200-session27-2026-12-02.txt) */                                           \
  X(FP8_SKINNY_N112_K2R,            "fp8_skinny_n112_k2r",             112,  8, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS | SM90_PRODUCER_WARPGROUP) \
  X(FP8_SKINNY_N128_K2R,            "fp8_skinny_n128_k2r",             128,  8, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS | SM90_PRODUCER_WARPGROUP) \
  X(FP8_SKINNY_N144_K2R,            "fp8_skinny_n144_k2r",             144,  6, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS | SM90_PRODUCER_WARPGROUP) \
  X(FP8_SKINNY_N160_K2R,            "fp8_skinny_n160_k2r",             160,  6, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS | SM90_PRODUCER_WARPGROUP) \
  X(FP8_SKINNY_N176_K2R,            "fp8_skinny_n176_k2r",             176,  6, 1, SM90_FP8 | SM90_SKINNY | SM90_TWO_CONSUMERS | SM90_PRODUCER_WARPGROUP) \
  /* The 128 x 160 tile (plan's WIDE160 rule): 2560 columns in 16 whole tiles, so 70b-qkv-tp4 fills 128 of 132 SMs at  \
     1024 tokens (int8 1.12x, fp8 1.04x, h200-session28-2026-12-02.txt). 5 stages of 36 KB; the lean epilogue's last   \
     32 columns go out through the direct one. fp8 promotes in alternating halves of 80 columns (HDB: 80 + 2 x 40      \
     registers) */                                                                                                     \
  X(INT8_128X160,                   "int8_128x160",                    160,  5, 1, SM90_INT8)                          \
  X(FP8_128X160_PROMOTE_HDB,        "fp8_128x160_promote_hdb",         160,  5, 1, SM90_FP8 | SM90_PROMOTE | SM90_HALVES_TWO_TEMPS)

/* The configurations' indices: SM90_CFG_FP8_128X256, ... */
typedef enum sm90_cfg_id {
#define SM90_CFG_ENUM(ID, NAME, BN, STAGES, MINB, FLAGS) SM90_CFG_##ID,
  SM90_CONFIGS(SM90_CFG_ENUM)
#undef SM90_CFG_ENUM
  SM90_NUM_CONFIGS
} sm90_cfg_id;

#endif
