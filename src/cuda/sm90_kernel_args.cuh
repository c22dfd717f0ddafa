// sm90_kernel_args.cuh — what every part of the sm_90a GEMM kernels sees: the launch arguments
// (sm90_args, filled by sm90_gemm.cu), the CTA shape constants and the accumulator types.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "sm90_configs.h"  // SM90_BK, SM90_BM, SM90_MAX_SPLIT, SM90_SKINNY_BM
#include "sm90_ptx.cuh"

#define SM90_THREADS 384   // producer warpgroup + 2 consumer warpgroups
#define SM90_GROUP 8       // tiles along X per group of the L2-friendly order
#define SM90_MAX_READY 8   // chunks of A that can arrive while the kernel runs (all-gather + GEMM)

// The development timeline (sm90_args.timeline, bench/sm90_dev -T) is compiled in only with
// -DW8A8_SM90_TIMELINE (NVCCEXTRA; the sm90ab step builds such a library for its -T runs): its stamps,
// though dead at run time, changed ptxas's schedule of the fp8 128 x 256 tiles and cost 4-5%
// (h200-sm90-fp8-bisect-2026-11-30.txt). Production kernels carry none of it.
#ifdef W8A8_SM90_TIMELINE
static constexpr bool SM90_TL = true;
#else
static constexpr bool SM90_TL = false;
#endif

// Output element kinds (runtime: one uniform branch per store).
enum { SM90_OUT_BF16 = 0, SM90_OUT_FP16 = 1, SM90_OUT_FP32 = 2 };

// Everything the kernel needs besides the two TMA descriptors. Kernel-space: X rows are on
// wgmma's M side, Y rows on its N side (see SWAP at the top of sm90_gemm_kernel.cuh).
typedef struct sm90_args {
  int rows_x, rows_y;         // X and Y row counts (M and N, or N and M when swapped)
  int tiles_x, tiles_y;       // ceil(rows / tile)
  int kblocks;                // ceil(K / 128)
  // epilogue, in problem space (m = token, n = output channel)
  void *out;
  long long ldo;
  int M, N;
  const float *sa;
  const float *sb;
  int sa_per_token, sb_per_channel;
  const void *bias;           // NULL or N elements of the output type
  int out_kind;               // SM90_OUT_*
  int azp_mode;               // W8A8_AZP_* (int8 only)
  const int32_t *azp;
  const int32_t *azp_adj;
  int pair_store;             // out and ldo allow 2-element stores along n
  int quad_store;             // out and ldo allow 4-element (8- or 16-byte) stores along n
  int split;                  // split-K factor = cluster size (SPLITK kernels), else 1
  // All-gather + GEMM in one launch (src/tp/tp_gpu.c): A's rows arrive in chunks while the kernel
  // runs. ready == NULL: everything is in place. Else chunk c (rows [ready_end[c-1], ready_end[c])
  // of A, with their scales and zero points) is in place once ready[c] != 0 (written by the copy
  // stream after the chunk's copies); the producer waits for the chunks a tile reads before its
  // first TMA load. rot_x / rot_y rotate the tile order so that it starts at the rows that are
  // there first (the rank's own chunk) and meets the others in their order of arrival.
  const unsigned int *ready;
  int ready_n;
  int ready_end[SM90_MAX_READY];
  int rot_x, rot_y;
  // w8a8_set_weights_constant: the producer loads the first K-blocks of the weights of its first
  // tile before griddepcontrol.wait (they cannot be written by the kernel before this one).
  int weights_constant;
  // The staged epilogue (unswapped unsplit tiles): tmap_o describes out and the tile leaves through
  // shared memory and TMA stores. 1: a 16-bit output (sm90_epi_lean or _staged), 2: fp32
  // (sm90_epi_lean only, else direct), 0: the direct epilogue.
  int tma_out;
  // Unswapped unsplit tiles: the epilogue reads scale_a / scale_b from a shared-memory slot that an
  // otherwise idle producer warp fills while the main loop runs (1, set for every such tile), or from
  // global memory (0).
  int scale_slot;
  // With scale_slot and the staged epilogue, no zero point: sm90_epi_lean (1, default) or sm90_epi_staged
  // (0: the tests' W8A8_DEV SM90_LEAN=0). The swapped unsplit tiles: sm90_epi_swap_lean where it applies (1)
  // or the general quad path (0).
  int lean;
  // Split-K reduction (swap-AB and 128 x 128 split-K tiles): 1 (default) in quads of four consecutive
  // output channels, one 16-byte DSMEM load per cluster CTA, the quad's scales, bias and zero-point
  // terms loaded beside them, only the lines (tokens) below M, spread over the cluster's CTAs
  // (h200-split-quad-ab-2026-11-30.txt); 0 (that A/B's other side; the host sets 1) element by element (its
  // parameters read after the DSMEM loads, every line), on the same partial-tile layout. The same bits.
  int split_quad;
  // Development timeline (bench/sm90_dev -T; NULL in the library's normal use): per CTA and tile, up
  // to timeline_max tiles, consumer warpgroup 0's clock64() at k = 0 the tile's start (the CTA's
  // first tile: the kernel's entry), 1 its first K-block's data in shared memory, 2 its main-loop
  // end (accumulators complete), 3 its epilogue end (split-K: with the cluster's reduction):
  // timeline[(blockIdx.x * timeline_max + i) * 4 + k]. Every configuration stamps.
  unsigned long long *timeline;
  int timeline_max, timeline_ctas;  // tiles per CTA, CTAs (blockIdx.x >= timeline_ctas: no stamps)
  // Token tail (the kernels with TAIL only, which take the map tmap_t after these arguments; last here
  // so that the other kernels' parameter offsets, hence their code, stay unchanged). Where the last
  // token tile is partial (rows_x unswapped, rows_y swapped; never swapped with MULTICAST = 2), its token rows
  // come in tail_n boxes of tail_rows rows at their rows' places in the stage instead of one whole box,
  // and the stage's full barrier expects only those bytes; tail_n = 0: the whole box (tail_plan in
  // sm90_gemm.cu decides). Why: TMA's out-of-bounds fill of a mostly empty box is slow (70b-down-tp4
  // M = 129: 38.8 us with the whole box, 23.6 with one 8-row box; h200-sm90-token-tail-2026-11-30.txt).
  // Rows past the last token keep whatever the stage held: they feed only accumulators of tokens >= M,
  // which no epilogue stores (every store is bounded by M). A template switch, not a run-time one: the
  // same producer code in every kernel ran the fp8 128 x 128 promote tiles 13-15% slower where no tile
  // is partial (dead code still moves ptxas's schedule of those tiles).
  int tail_n, tail_rows;
  // X tiles per group of the tile order (sm90_tile_coords): SM90_GROUP, fewer where a ready launch's
  // own rows span fewer X tiles (each group then holds only one rank's rows): the fused all-gather +
  // GEMM at TP = 2, 1024 tokens, 1.04-1.10x (h200x2-tp-group-2026-11-30.txt); the run-time divisor
  // costs under 1%.
  int group;
  // Stream-K (the kernels with STREAMK only; sm90_streamk.h): the partial tiles of the stream-K
  // tiles (tile t's consumer warpgroup w at sk_ws + (2 t + w) x 128 x BN / 2 words, element i of
  // thread j at word i x 128 + j), and a lock per (tile, warpgroup) counting the K-blocks summed so
  // far, zero between launches (the final split resets it). After `group`, so that the other fields
  // keep their offsets, and within tmap_t's 128-byte alignment, so that it keeps its own.
  void *sk_ws;
  unsigned int *sk_locks;
  // The shift (the unswapped kernels without split-K or stream-K: sm90_x_row0): where the last
  // token tile is partial and rows_x > SM90_BM, that tile covers the LAST 128 tokens (rows rows_x - 128 ..
  // rows_x - 1) instead of running past them: every row TMA loads is a real row of A (no out-of-bounds
  // fill, ~4 cycles per missing row and stage: fp8 8b-down 385 tokens 55.5 us against 47.0 at 480,
  // h200-session27-2026-12-02.txt), one box through the kernel's own map (no tail map). Its first rows
  // are also the previous tile's last: computed from the same bytes by the same instructions in the same
  // K order, stored twice with the same bits (as in the fold, sm90_tail_fold). 0: no shift.
  int shift_x;
} sm90_args;

SM90_DEV uint32_t sm90_bits(float v) { return __float_as_uint(v); }
SM90_DEV uint32_t sm90_bits(int32_t v) { return (uint32_t)v; }
template <typename T>
__device__ __forceinline__ T sm90_from_bits(uint32_t u);
template <>
__device__ __forceinline__ float sm90_from_bits<float>(uint32_t u) {
  return __uint_as_float(u);
}
template <>
__device__ __forceinline__ int32_t sm90_from_bits<int32_t>(uint32_t u) {
  return (int32_t)u;
}

template <bool INT8>
struct sm90_acc_type {
  typedef float type;
};
template <>
struct sm90_acc_type<true> {
  typedef int32_t type;
};
