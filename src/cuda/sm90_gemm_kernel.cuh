// sm90_gemm_kernel.cuh — the sm_90a scaled-GEMM kernels (fp8 e4m3 and int8): sm90_gemm_kernel, one template
// for every 128-row configuration, and sm90_skinny_kernel, the 64-row swapped tiles.
//
// Shape of the main kernel (one CTA per SM slot, 384 threads):
//   warpgroup 0       producer: one thread issues TMA loads of the next K-block of both operands
//                     into a STAGES-deep ring of shared-memory buffers, each completing on a
//                     "full" mbarrier; it waits on the matching "empty" mbarrier before reuse.
//                     Warp 1 fills the epilogue's scale slot one tile ahead.
//   warpgroups 1, 2   consumers: each owns 64 rows of the CTA tile and issues wgmma.mma_async
//                     (QGMMA for fp8, IGMMA for int8) on the buffer, then frees it.
//   epilogue          in registers, straight from the accumulators: zero point (int32), scales,
//                     bias, one rounding to bf16/fp16/fp32; unswapped unsplit tiles with 16-bit
//                     outputs leave through shared memory and asynchronous TMA stores (the staged
//                     epilogue), the others through predicated stores.
//
// The parts (docs/HOPPER.md 2.14), each a header of functions that see only their own compile-time parameters:
//   sm90_kernel_args.cuh  the launch arguments (sm90_args) and the CTA shape
//   sm90_scheduler.cuh    work item -> tile, and the token rows a tile covers (shift, fold)
//   sm90_mainloop.cuh     the ring, the producer's loads, the consumers' accumulation plan (sm90_accum)
//   sm90_epilogue.cuh     the epilogue's buffers and paths, the scale slot, the split-K reduction
// This file holds the shared-memory plans and the kernels, which sequence the parts. Each kernel's body is one
// function: moving its loops or epilogue paths into inlined functions changed the machine code of 4..55 of the 55
// main kernels in every form tried (the compiler optimizes a function before inlining it), and moved code must be
// measured again (scripts/cubin_text_diff.py checks that a change keeps every kernel's code).
//
// Operands. wgmma computes D[64 x BN] += X[64 x 32] * Y[32 x BN] with X and Y both K-major in
// shared memory. Our A is [M,K] row-major and B is N rows of K, so both are K-major already:
//   normal   X = A (BM rows of tokens),  Y = B (BN rows of weights):  D = out tile
//   SWAP     X = B (BM rows of weights), Y = A (BN tokens):           D = out tile transposed
// SWAP is the small-M path: wgmma's M side is fixed at 64, so with 1..64 tokens we let the weight
// rows fill it and put the tokens on wgmma's N side (8..64), instead of wasting most of a 64-row
// tile on padding. Only the epilogue's index mapping changes.
//
// Work split. The grid is persistent: CTA groups walk the tile list with a grouped (L2-friendly)
// order. With split > 1, the K range of each tile is split over the `split` CTAs of a thread-block
// cluster; their fp32/int32 partial tiles are summed through distributed shared memory in a fixed
// order (deterministic, exact for int8) and each CTA finishes a 1/split slice of the epilogue.
// This fills the 132 SMs when there are few tiles (small M, narrow N) without a workspace.
//
// fp8 accumulation precision. QGMMA adds its products into the fp32 accumulator with reduced
// internal precision (about 14 mantissa bits are kept in the alignment). With PROMOTE, each
// K-block (128 deep) is accumulated from zero in a temporary and added to the fp32 accumulator
// with ordinary FADDs, so the reduced-precision sums span only 128 products (DeepGEMM's scheme).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "sm90_epilogue.cuh"
#include "sm90_kernel_args.cuh"
#include "sm90_mainloop.cuh"
#include "sm90_scheduler.cuh"
#include "sm90_streamk.h"

// The main kernel's shared memory, from its base rounded up to 1024 bytes: the ring (sm90_ring), the
// epilogue's buffers (sm90_epi_buffers), the ring's full and empty barriers, the scale slot.
template <int BN, int STAGES, bool SWAP, bool SPLITK>
struct sm90_gemm_smem {
  typedef sm90_ring<BN, STAGES> Ring;
  typedef sm90_epi_buffers<BN, SWAP, SPLITK> Epi;
  static const bool SCALE_SLOT = !SWAP && !SPLITK;  // the epilogue's scale slot (sm90_scale_slot)
  static const int SLOT_BYTES = SCALE_SLOT ? sm90_scale_slot<BN>::BYTES : 0;
  // +1024: the dynamic shared memory base is rounded up to the 1024-byte swizzle period.
  static const int SMEM_BYTES = STAGES * Ring::STAGE_BYTES + Epi::BYTES + Ring::BAR_BYTES + SLOT_BYTES + 1024;
  static_assert(SMEM_BYTES <= 232448, "sm_90 allows 227 KB of shared memory per CTA");
};

// Template flags: BN the tile's width on wgmma's N side; STAGES the ring depth; INT8 int8 (else fp8);
// SWAP weights on X, tokens on Y (see the top); PROMOTE fp8 promotion per K-block; SPLITK split-K over a
// cluster; TAIL the token-tail boxes (sm90_args.tail_n) and the fold; STREAMK stream-K (sm90_args.sk_ws);
// HALVES_TWO_TEMPS the promoted halves alternate between two temporaries (sm90_accum).
// MINB: CTAs per SM the kernel is built for (1 for the big tiles; 2 for the small-M tiles, so that
// the hardware balances uneven work over twice as many slots). The register split between the
// producer and the consumers follows from it: 65536 / MINB registers per CTA.
// MULTICAST: 1, or 2 = a cluster of two CTAs on neighbouring X tiles (token rows) with the same Y tile
// (weights): each CTA loads its own X tile and HALF of the Y tile, multicast into both CTAs, so the
// Y tile crosses from L2 once per pair instead of twice (tmap_y's box is BN/2 rows then). Both CTAs
// walk the same pairs of tiles in lockstep; a partner past the last X tile runs on zeros (TMA fills
// out-of-bounds boxes) and stores nothing. Not with SPLITK. With SWAP (the *_swap_*_mc2 configurations:
// correct, no gain, not planned; h200-session20-2026-11-30.txt) X is the weights and Y the tokens:
// neighbouring weight tiles share the token tile; not with the token tail.
// The body, in order: set-up (shared memory plan, schedule, barriers); producer (weights-constant preloads,
// the scale slot on warp 1, the loads of each tile or of the stream-K walk); consumers, per work item (the
// stream-K item, the main loop by sm90_accum, the stream-K fix-up, the epilogue: split-K, unswapped, swapped).
template <int BN, int STAGES, bool INT8, bool SWAP, bool PROMOTE, bool SPLITK, int MINB, int MULTICAST = 1,
          bool TAIL = false, bool STREAMK = false, bool HALVES_TWO_TEMPS = false>
__global__ void __launch_bounds__(SM90_THREADS, MINB)
    sm90_gemm_kernel(const __grid_constant__ CUtensorMap tmap_x, const __grid_constant__ CUtensorMap tmap_y,
                     const __grid_constant__ CUtensorMap tmap_o, const sm90_args a,
                     const __grid_constant__ CUtensorMap tmap_t) {
#if SM90_ENABLED
  typedef sm90_gemm_smem<BN, STAGES, SWAP, SPLITK> Smem;
  typedef typename Smem::Ring Ring;
  typedef typename Smem::Epi Epi;
  typedef sm90_token_rows<SWAP, SPLITK, STREAMK, TAIL, MULTICAST> Rows;
  constexpr int NACC = BN / 2;  // accumulator registers per consumer thread
  const int split = SPLITK ? a.split : 1;
  typedef typename sm90_acc_type<INT8>::type acc_t;
  constexpr sm90_accum ACCUM = sm90_gemm_accum(PROMOTE, HALVES_TWO_TEMPS, NACC, MINB, SPLITK, SWAP);
  static_assert(ACCUM != SM90_PROMOTE_ONE_TEMP || NACC <= 64, "fp8 promotion: no register plan");
  // Two temporaries of NACC / 2 registers beside the accumulators: 96 + 2 x 48 on the 128 x 192 tile (128 +
  // 2 x 64 would not fit 232); 1.04-1.08x on the 192 rule's shapes (h200-session21-2026-12-01.txt).
  static_assert(!HALVES_TWO_TEMPS || (ACCUM == SM90_PROMOTE_HALVES_TWO_TEMPS && !SWAP && NACC <= 96),
                "alternating half temporaries: the 128 x 192 and 128 x 160 promoted tiles only");
  static_assert(BN % 16 == 0 || BN == 8 || BN == 24, "wgmma N");
  static_assert(SPLITK || !SWAP || BN % Epi::CHUNK_N == 0,
                "the swapped epilogue stages whole chunks of CHUNK_N columns");
  static_assert(!(INT8 && PROMOTE), "int8 accumulates exactly; nothing to promote");
  static_assert(STAGES >= 2, "pipeline depth");
  // Multicast also takes the swapped unsplit tiles (the TOKEN tile over two neighbouring weight tiles, as
  // cuBLASLt's 128x136..160 TNT kernels' 2x1 / 4x1 clusters), but not with the token tail, whose swapped
  // boxes load the whole Y tile in this CTA.
  static_assert(MULTICAST == 1 || (MULTICAST == 2 && !SPLITK && BN % 16 == 0 && (!SWAP || !TAIL)),
                "multicast: plain tiles, and swapped unsplit tiles without the token tail");
  static_assert(!STREAMK || (MULTICAST == 1 && !SWAP && !SPLITK && !TAIL && MINB == 1),
                "stream-K: plain tiles, one CTA per SM (every unit resident at once)");

  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  const uint32_t smem0 = sm90_smem_u32(smem);
  const uint32_t epi0 = smem0 + STAGES * Ring::STAGE_BYTES;
  const uint32_t full0 = epi0 + Epi::BYTES;
  const uint32_t empty0 = full0 + STAGES * 8;
  // The scale slot (Smem::SCALE_SLOT): slot_full completes when the slot holds the current tile's scales (32
  // arrivals, the lanes of producer warp 1), slot_empty when both consumer warpgroups are done with
  // them (256 arrivals, every consumer thread after its epilogue).
  const bool use_slot = Smem::SCALE_SLOT && a.scale_slot;
  const uint32_t slot_full = empty0 + STAGES * 8, slot_empty = slot_full + 8;
  const float *slot_sb = (const float *)(smem + (slot_empty + 8 - smem0));
  const float *slot_sa = slot_sb + BN;

  const int wg = threadIdx.x / 128;
  const int tid = threadIdx.x % 128;
  const int split_rank = SPLITK ? (int)sm90_cluster_rank() : 0;
  const int pair_rank = MULTICAST == 2 ? (int)sm90_cluster_rank() : 0;  // multicast pair: which X tile of the pair
  // Work items: tiles, or (MULTICAST = 2) pairs of X tiles, walked by clusters of split or MULTICAST CTAs.
  const int tile_stride = gridDim.x / (SPLITK ? split : MULTICAST);
  const int items = MULTICAST == 2 ? ((a.tiles_x + 1) / 2) * a.tiles_y : a.tiles_x * a.tiles_y;
  const int item0 = blockIdx.x / (SPLITK ? split : MULTICAST);
  // This CTA's K range (split-K: the cluster's CTAs share a tile).
  const int kb_begin = (int)((long long)a.kblocks * split_rank / split);
  const int kb_end = (int)((long long)a.kblocks * (split_rank + 1) / split);

  // timeline: the kernel's entry as the CTA's first tile's start (consumer warpgroup 0's thread 0)
  if (SM90_TL && a.timeline && threadIdx.x == 128 && (int)blockIdx.x < a.timeline_ctas && a.timeline_max > 0)
    a.timeline[(size_t)blockIdx.x * a.timeline_max * 4] = clock64();
  if (threadIdx.x == 0) {
    sm90_prefetch_tmap(&tmap_x);
    sm90_prefetch_tmap(&tmap_y);
    if constexpr (TAIL)
      if (a.tail_n) sm90_prefetch_tmap(&tmap_t);
    for (int s = 0; s < STAGES; s++) {
      sm90_mbar_init(full0 + 8 * s, 1);  // the producer's arrive + the TMA bytes
      // one arrive per consumer warpgroup (of both CTAs: MULTICAST = 2)
      sm90_mbar_init(empty0 + 8 * s, 2 * MULTICAST);
    }
    if (Smem::SCALE_SLOT) {
      sm90_mbar_init(slot_full, 32);
      sm90_mbar_init(slot_empty, 256);
    }
    sm90_fence_mbar_init();
  }
  // MULTICAST = 2: the partner's barriers must be initialised before anything lands in or arrives on them.
  if constexpr (MULTICAST == 2)
    sm90_cluster_sync();
  else
    __syncthreads();

  if (wg == 0) {
    // ---------------- producer ----------------
    // The producer needs few registers; give them to the consumers. setmaxnreg moves registers
    // within the CTA's own pool (what it got at launch: 384 x the launch-bound count), so the
    // two counts must balance exactly or the consumers' increase waits forever:
    //   1 CTA/SM:  384*168 = 64512 = 128*40 + 256*232
    //   2 CTAs/SM: 384*80  = 30720 = 128*32 + 256*104
    sm90_setmaxnreg_dec<MINB == 1 ? 40 : 32>();
    int s = 0;
    uint32_t phase = 0;
    unsigned seen = 0;
    // Weights-constant hint (w8a8_set_weights_constant; never with MULTICAST = 2): the weight halves of
    // the first min(STAGES, K-blocks) stages of this CTA's first tile are loaded BEFORE
    // griddepcontrol.wait, i.e. while the previous kernel may still run; the token halves and
    // everything else after it. Each such stage's full barrier expects the whole stage as usual
    // (arrive_tx once, here), and the main loop below skips the empty-wait, the arrive and the
    // weight load for them (fresh barriers: the first pass would not have waited anyway).
    int preloaded = 0;
    if (tid == 0) {
      if (MULTICAST == 1 && !STREAMK && a.weights_constant && item0 < items) {
        int tx, ty;
        sm90_item_coords<MULTICAST>(a, item0, pair_rank, tx, ty);
        uint32_t preload_tx = Ring::STAGE_BYTES;
        if constexpr (TAIL)
          preload_tx = sm90_stage_tx<SWAP, BN>(a, Ring::STAGE_BYTES, sm90_tail_tile<SWAP, MULTICAST, BN>(a, tx, ty));
        preloaded = min(STAGES, kb_end - kb_begin);
        for (int j = 0; j < preloaded; j++) {
          const uint32_t full = full0 + 8 * j, dst = smem0 + j * Ring::STAGE_BYTES;
          sm90_mbar_arrive_tx(full, preload_tx);
          if constexpr (SWAP)  // weights are X
            sm90_tma_load_2d(dst, &tmap_x, full, (kb_begin + j) * SM90_BK, tx * SM90_BM);
          else  // weights are Y
            sm90_tma_load_2d(dst + Ring::X_BYTES, &tmap_y, full, (kb_begin + j) * SM90_BK, ty * BN);
        }
      }
      // Programmatic dependent launch: everything above (launch, barrier init, descriptor
      // prefetch, register split, the hinted weight loads) overlapped the previous kernel's
      // tail; nothing else in global memory is read before this.
      sm90_grid_dep_wait();
    }
    if constexpr (Smem::SCALE_SLOT) if (use_slot && tid / 32 == 1) {
      // Producer warp 1: the epilogue's scales, one tile ahead of the consumers' epilogues (a tile's
      // slot is filled as soon as both warpgroups are done with the previous tile's), so that the
      // epilogue reads shared memory instead of waiting for L2 round trips. Per-token scales of
      // rows that an all-gather delivers (ready flags) are read only once those rows are ready.
      float *sb_out = (float *)slot_sb, *sa_out = (float *)slot_sa;
      const int lane = tid % 32;
      unsigned slot_seen = 0;
      sm90_grid_dep_wait();  // the scales may be written by the previous kernel
      int items_done = 0;
      // Stream-K: the slot follows the work items that run an epilogue (whole tiles and final splits:
      // sm90_sk_epi_walk, a few registers where walking every item did not fit the warp's 40), and
      // waits before it loads (no arrays held across the wait; the slot is still a tile ahead).
      int sk_hi = -1, sk_lo = 0, sk_dp = 0;
      if constexpr (STREAMK) {
        const sm90_sk_plan skp = sm90_sk_make(items, a.kblocks, (int)gridDim.x);
        sm90_sk_epi_walk(&skp, (int)blockIdx.x, &sk_hi, &sk_lo, &sk_dp);
      }
      for (int t = item0; STREAMK || t < items; t += tile_stride, items_done++) {
        int tile = t;
        if constexpr (STREAMK) {
          if (sk_hi >= sk_lo) {
            tile = sk_hi--;
          } else if (sk_dp < items) {
            tile = sk_dp;
            sk_dp += (int)gridDim.x;
          } else {
            break;
          }
        }
        int tx, ty;
        sm90_item_coords<MULTICAST>(a, tile, pair_rank, tx, ty);
        if (a.ready && a.sa_per_token) {
          if (lane == 0) sm90_wait_rows(a, tx * SM90_BM, SM90_BM, slot_seen);
          __syncwarp();
        }
        if constexpr (STREAMK) {
          sm90_mbar_wait(slot_empty, (items_done & 1) ^ 1);
#pragma unroll
          for (int i = 0; i < BN / 32; i++) {
            const int n = ty * BN + 32 * i + lane;
            sb_out[32 * i + lane] = __ldg(a.sb + (a.sb_per_channel && n < a.N ? n : 0));
          }
#pragma unroll
          for (int i = 0; i < SM90_BM / 32; i++) {
            const int m = tx * SM90_BM + 32 * i + lane;
            sa_out[32 * i + lane] = __ldcg(a.sa + (a.sa_per_token && m < a.M ? m : 0));
          }
        } else {
          float vb[BN / 32], va[SM90_BM / 32];
#pragma unroll
          for (int i = 0; i < BN / 32; i++) {
            const int n = ty * BN + 32 * i + lane;
            vb[i] = __ldg(a.sb + (a.sb_per_channel && n < a.N ? n : 0));
          }
#pragma unroll
          for (int i = 0; i < SM90_BM / 32; i++) {
            // (the fold: row r >= 64 holds token M - 128 + r; sm90_fold_row)
            const int m = sm90_fold_row<Rows::FOLD>(a, sm90_x_row0<Rows::SHIFT>(a, tx) + 32 * i, i / 2) + lane;
            va[i] = __ldcg(a.sa + (a.sa_per_token && m < a.M ? m : 0));
          }
          sm90_mbar_wait(slot_empty, (items_done & 1) ^ 1);  // the consumers are done with the previous tile's
#pragma unroll
          for (int i = 0; i < BN / 32; i++) sb_out[32 * i + lane] = vb[i];
#pragma unroll
          for (int i = 0; i < SM90_BM / 32; i++) sa_out[32 * i + lane] = va[i];
        }
        sm90_mbar_arrive(slot_full);  // release: the stores above are visible to whoever waits on it
      }
    }
    if constexpr (STREAMK) {
      // Stream-K: the same static schedule as the consumers (sm90_sk_item_of), K-blocks [k0, k1) of
      // each work item into the ring without a break between items (no ready flags, no tail).
      if (tid == 0) {
        const sm90_sk_plan skp = sm90_sk_make(items, a.kblocks, (int)gridDim.x);
        sm90_sk_item it;
        for (int n = 0; sm90_sk_item_of(&skp, (int)blockIdx.x, n, &it); n++) {
          int tx, ty;
          sm90_tile_coords(a, it.tile, tx, ty);
          for (int kb = it.k0; kb < it.k1; kb++) {
            const uint32_t full = full0 + 8 * s, dst = smem0 + s * Ring::STAGE_BYTES;
            sm90_mbar_wait(empty0 + 8 * s, phase ^ 1);
            sm90_mbar_arrive_tx(full, Ring::STAGE_BYTES);
            sm90_tma_load_2d(dst, &tmap_x, full, kb * SM90_BK, tx * SM90_BM);
            sm90_tma_load_2d(dst + Ring::X_BYTES, &tmap_y, full, kb * SM90_BK, ty * BN);
            if (++s == STAGES) {
              s = 0;
              phase ^= 1;
            }
          }
        }
      }
    } else
    for (int t = item0; t < items; t += tile_stride) {
      if (tid == 0) {
        int tx, ty;
        sm90_item_coords<MULTICAST>(a, t, pair_rank, tx, ty);
        if (a.ready) sm90_wait_rows(a, SWAP ? ty * BN : tx * SM90_BM, SWAP ? BN : SM90_BM, seen);
        // TAIL kernels only (template): the token rows in the tail's boxes where this is the partial tile
        bool tail = false;
        uint32_t stage_tx = Ring::STAGE_BYTES;
        if constexpr (TAIL) {
          tail = sm90_tail_tile<SWAP, MULTICAST, BN>(a, tx, ty);
          stage_tx = sm90_stage_tx<SWAP, BN>(a, Ring::STAGE_BYTES, tail);
        }
        for (int kb = kb_begin; kb < kb_end; kb++) {
          const bool weights_loading = t == item0 && kb - kb_begin < preloaded;  // weights already loading
          uint32_t full = full0 + 8 * s;
          if (!weights_loading) {
            sm90_mbar_wait(empty0 + 8 * s, phase ^ 1);
            sm90_mbar_arrive_tx(full, stage_tx);
          }
          uint32_t dst = smem0 + s * Ring::STAGE_BYTES;
          if constexpr (TAIL) {
            if constexpr (SWAP) {  // X = weights, Y = tokens
              if (!weights_loading) sm90_tma_load_2d(dst, &tmap_x, full, kb * SM90_BK, tx * SM90_BM);
              sm90_load_tokens<SWAP, false>(a, dst + Ring::X_BYTES, &tmap_y, &tmap_t, full, kb * SM90_BK, ty * BN,
                                            tail);
            } else {  // X = tokens, Y = weights
              sm90_load_tokens<SWAP, Rows::FOLD>(a, dst, &tmap_x, &tmap_t, full, kb * SM90_BK,
                                                 sm90_x_row0<Rows::SHIFT>(a, tx), tail);
              if constexpr (MULTICAST == 2)  // this CTA's half of Y, into both CTAs (the partner sends the other)
                sm90_tma_load_2d_mc(dst + Ring::X_BYTES + pair_rank * (BN / 2) * SM90_BK, &tmap_y, full, kb * SM90_BK,
                                    ty * BN + pair_rank * (BN / 2), (uint16_t)0x3);
              else if (!weights_loading)
                sm90_tma_load_2d(dst + Ring::X_BYTES, &tmap_y, full, kb * SM90_BK, ty * BN);
            }
          } else {
            if (!(SWAP && weights_loading))
              sm90_tma_load_2d(dst, &tmap_x, full, kb * SM90_BK, sm90_x_row0<Rows::SHIFT>(a, tx));
            if constexpr (MULTICAST == 2)  // this CTA's half of Y, into both CTAs (the partner sends the other)
              sm90_tma_load_2d_mc(dst + Ring::X_BYTES + pair_rank * (BN / 2) * SM90_BK, &tmap_y, full, kb * SM90_BK,
                                  ty * BN + pair_rank * (BN / 2), (uint16_t)0x3);
            else if (SWAP || !weights_loading)
              sm90_tma_load_2d(dst + Ring::X_BYTES, &tmap_y, full, kb * SM90_BK, ty * BN);
          }
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
      if constexpr (SPLITK) {
        // The producer warps take part in the two cluster barriers of every tile
        // (barrier.cluster waits for every non-exited thread of the cluster), and they must
        // do so tile by tile. Issuing the loads of all its tiles first and joining the barriers
        // afterwards deadlocks with a second tile per cluster: that tile's loads wait for ring
        // slots that the consumers free only after the first tile's barrier, which waits for
        // this warp (seen as a stall at N = 28672, h200-auto-2026-11-29.md). The host launches
        // one tile per cluster; this keeps any grid deadlock-free.
        __syncwarp();  // reconverge warp 0 before the .aligned cluster barriers
        sm90_cluster_sync();
        sm90_cluster_sync();
      }
    }
    // Every load is issued: the next kernel in the stream may start launching (it waits for this
    // grid's completion before it reads anything, if it uses programmatic launch at all).
    if (tid == 0) sm90_grid_dep_launch();
  } else {
    // ---------------- consumers ----------------
    sm90_setmaxnreg_inc<MINB == 1 ? 232 : 104>();
    sm90_grid_dep_wait();  // scales, bias, zero points and out may belong to the previous kernel
    const int cw = wg - 1;  // consumer index: rows 64*cw .. 64*cw+63 of the CTA tile
    const int warp = tid / 32, lane = tid % 32;
    int s = 0;
    uint32_t phase = 0;
    acc_t acc[NACC];
    int items_done = 0;  // work items done: the scale slot's phase, except under stream-K
    int epilogues = 0;  // stream-K: epilogues done (the scale slot's phase there)
    const bool stamp = SM90_TL && a.timeline && cw == 0 && tid == 0 && (int)blockIdx.x < a.timeline_ctas;
    unsigned long long *timeline = stamp ? a.timeline + (size_t)blockIdx.x * a.timeline_max * 4 : nullptr;
    // Stream-K: work item items_done of this CTA (sm90_sk_item_of) instead of tile t: its tile, K-blocks
    // [kb_lo, kb_hi) and role (0 a whole tile, 1 a tile's first split, 2 a middle one, 3 its last).
    for (int t = item0; STREAMK || t < items; t += tile_stride, items_done++) {
      int tile = t, kb_lo = kb_begin, kb_hi = kb_end, role = 0, sk_slot = 0, sk_even = 0;
      if constexpr (STREAMK) {
        const sm90_sk_plan skp = sm90_sk_make(items, a.kblocks, (int)gridDim.x);  // (per item: see the scale slot's)
        sm90_sk_item it;
        if (!sm90_sk_item_of(&skp, (int)blockIdx.x, items_done, &it)) break;
        tile = it.tile;
        kb_lo = it.k0;
        kb_hi = it.k1;
        role = it.role;
        sk_even = skp.per_tile > 0 ? skp.per_tile : 0;
        sk_slot = sm90_sk_slot(&skp, it.tile, it.k0);  // roles 1 and 2: where this split stores
      }
      (void)role, (void)sk_slot, (void)sk_even;
      int tx, ty;
      sm90_item_coords<MULTICAST>(a, tile, pair_rank, tx, ty);
      const bool stamp_tile = stamp && items_done < a.timeline_max;
      const bool stamp_tile_warp = SM90_TL && a.timeline && cw == 0 && warp == 0 && (int)blockIdx.x < a.timeline_ctas &&
                                   items_done < a.timeline_max;
      if (stamp_tile && items_done > 0) timeline[4 * items_done] = clock64();
      // (a wait on a completed phase returns at once; a CTA with no K-block (split-K over fewer
      // K-blocks than CTAs) has no stage to wait for)
      // (the whole warp waits, so that it reaches the .aligned wgmmas converged without a __syncwarp)
      if (stamp_tile_warp && kb_hi > kb_lo) {
        sm90_mbar_wait(full0 + 8 * s, phase);
        if (lane == 0) timeline[4 * items_done + 1] = clock64();
      }
#pragma unroll
      for (int i = 0; i < NACC; i++) acc[i] = 0;

      int prev = -1;
      if constexpr (ACCUM == SM90_PROMOTE_TWO_TEMPS) {
        // Two temporaries, alternating by K-block (sm90_fp8_issue, sm90_mainloop.cuh); the loop is unrolled
        // by two so that each temporary is a fixed set of registers.
        float ta[NACC], tb[NACC];
#pragma unroll
        for (int i = 0; i < NACC; i++) ta[i] = tb[i] = 0.0f;
        // Straight-line pairs (no branch between an issue and the wait that retires the other
        // temporary): block 0 -> ta; then (tb, retire ta), (ta, retire tb), ...
        const int n = kb_hi - kb_lo;
#define SM90_ISSUE(T)                                                                          \
  sm90_fp8_issue<BN>(T, full0 + 8 * s, phase, sm90_desc_k128(smem0 + s * Ring::STAGE_BYTES + cw * 64 * SM90_BK), \
                     sm90_desc_k128(smem0 + s * Ring::STAGE_BYTES + Ring::X_BYTES))
#define SM90_ADVANCE()  \
  prev = s;             \
  if (++s == STAGES) {  \
    s = 0;              \
    phase ^= 1;         \
  }
        if (n > 0) {
          SM90_ISSUE(ta);
          SM90_ADVANCE();
          int j = 1;
          for (; j + 1 < n; j += 2) {
            SM90_ISSUE(tb);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MULTICAST>(ta, (float *)acc, empty0 + 8 * prev, tid);
            SM90_ADVANCE();
            SM90_ISSUE(ta);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MULTICAST>(tb, (float *)acc, empty0 + 8 * prev, tid);
            SM90_ADVANCE();
          }
          if (j < n) {
            SM90_ISSUE(tb);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MULTICAST>(ta, (float *)acc, empty0 + 8 * prev, tid);
            SM90_ADVANCE();
            sm90_wgmma_wait<0>();
            sm90_fp8_retire<MULTICAST>(tb, (float *)acc, empty0 + 8 * prev, tid);
          } else {
            sm90_wgmma_wait<0>();
            sm90_fp8_retire<MULTICAST>(ta, (float *)acc, empty0 + 8 * prev, tid);
          }
        }
#undef SM90_ISSUE
#undef SM90_ADVANCE
        prev = -1;
      } else if constexpr (ACCUM == SM90_PROMOTE_HALVES || ACCUM == SM90_PROMOTE_HALVES_TWO_TEMPS) {
        // fp8 128 x 256 with promotion: per K-block and consumer warpgroup, columns 0..127 go into
        // the temporary (4 wgmma m64n128k32 from zero), which is waited for and added to acc[0..63]
        // (the m64n256 fragment's first 64 registers are exactly the m64n128 fragment of columns
        // 0..127), then columns 128..255 into the same temporary and acc[64..127]. A warpgroup waits
        // for its own half (wait_group 0) while the other warpgroup's half keeps the tensor pipe
        // busy: a half is ~256 cycles of wgmma, the wait and 64 FADDs ~100. Same sums as the
        // 128 x 128 tile (each 128-deep block from zero, then added in K order): same bits.
        // Against fp8_128x128_promote it halves the A bytes per FLOP read from L2, whose
        // bandwidth bounds the 128 x 128 tile's main loop (0.44 us per K-block measured vs the
        // tensor pipe's 0.28). The 128 x 192 tile does the same in halves of 96 columns
        // (m64n96, 48 registers; the B half at 96 rows = 12 swizzle periods).
        if constexpr (ACCUM == SM90_PROMOTE_HALVES_TWO_TEMPS) {
          // Alternating half temporaries (fp8_128x192_promote_hdb, fp8_128x160_promote_hdb): the two halves into two
          // temporaries, so that a warpgroup always has a half in flight while it adds the other: issue half 1 of block
          // kb (tb); wait for its half 0 (ta; wait_group 1), add it; issue half 0 of kb + 1 (ta); wait for kb's tb, add
          // it, free kb's stage. The plain halves wait for each half (wait_group 0) and rely on the OTHER warpgroup to
          // keep the tensor pipe busy meanwhile, which leaves fp8 ~13% below int8 at large M
          // (h200-torch-compare-2026-11-30-v18.md). The same sums in the same order (each half-block from
          // zero, added in K order): the same bits as fp8_128x192_promote.
          float ta[NACC / 2], tb[NACC / 2];
          const int n = kb_hi - kb_lo;
#define SM90_HALF_ISSUE(T, HH)                                                                                 \
  do {                                                                                                        \
    const uint64_t hdx = sm90_desc_k128(smem0 + s * Ring::STAGE_BYTES + cw * 64 * SM90_BK);                       \
    const uint64_t hdy = sm90_desc_k128(smem0 + s * Ring::STAGE_BYTES + Ring::X_BYTES + (HH) * (BN / 2) * SM90_BK);  \
    sm90_wgmma_fence();                                                                                       \
    _Pragma("unroll") for (int kk = 0; kk < SM90_BK / 32; kk++)                                               \
        sm90_wgmma_fp8<BN / 2>(T, hdx + 2 * kk, hdy + 2 * kk, kk > 0);                                         \
    sm90_wgmma_commit();                                                                                      \
  } while (0)
#define SM90_HALF_ADD(T, HH)                                                           \
  do {                                                                                \
    _Pragma("unroll") for (int i = 0; i < NACC / 2; i++) sm90_fence_reg(T[i]);     \
    _Pragma("unroll") for (int i = 0; i < NACC / 2; i++) acc[(HH) * (NACC / 2) + i] += T[i]; \
  } while (0)
#define SM90_HALF_ADVANCE() \
  do {                      \
    if (++s == STAGES) {    \
      s = 0;                \
      phase ^= 1;           \
    }                       \
  } while (0)
          // ptxas: C7514 (the wgmmas serialized) whenever ONE wait after the loop, on a
          // path every exit takes, retires a group in flight across the back edge; SM90_PROMOTE_TWO_TEMPS compiles
          // clean because its parity tail is an if / else (two exits), not because of its unroll by two. An if / else
          // inside the loop got C7517 instead (a wait_group 0 injected at the back edge, where ta is pending on one
          // path and nothing on the other). Hence the peeled loop and a second, never-taken exit below that is correct
          // on its own: neither message, 168 registers, 0 spills, and the back edge keeps ta in flight. (These are
          // ptxas infos: -Werror does not catch them; grep a -Xptxas -v build for C751.)
          if (n > 0) {
            sm90_mbar_wait(full0 + 8 * s, phase);
            SM90_HALF_ISSUE(ta, 0);
            int j = 0;
            for (; j + 1 < n; j++) {
              SM90_HALF_ISSUE(tb, 1);
              sm90_wgmma_wait<1>();  // this block's ta is done (its tb in flight)
              SM90_HALF_ADD(ta, 0);
              const int cur = s;
              SM90_HALF_ADVANCE();
              sm90_mbar_wait(full0 + 8 * s, phase);
              SM90_HALF_ISSUE(ta, 0);
              sm90_wgmma_wait<1>();  // the block before's tb is done (this block's ta in flight)
              SM90_HALF_ADD(tb, 1);
              if (tid == 0) sm90_release<MULTICAST>(empty0 + 8 * cur);
            }
            if (j + 1 == n) {
              SM90_HALF_ISSUE(tb, 1);
              sm90_wgmma_wait<1>();
              SM90_HALF_ADD(ta, 0);
              sm90_wgmma_wait<0>();
              SM90_HALF_ADD(tb, 1);
              if (tid == 0) sm90_release<MULTICAST>(empty0 + 8 * s);
              SM90_HALF_ADVANCE();
            } else {  // never taken (j + 1 == n here): a second exit for ptxas, correct on its own
              sm90_wgmma_wait<0>();
              SM90_HALF_ADD(ta, 0);
              SM90_HALF_ISSUE(tb, 1);
              sm90_wgmma_wait<0>();
              SM90_HALF_ADD(tb, 1);
              if (tid == 0) sm90_release<MULTICAST>(empty0 + 8 * s);
              SM90_HALF_ADVANCE();
            }
          }
#undef SM90_HALF_ISSUE
#undef SM90_HALF_ADD
#undef SM90_HALF_ADVANCE
        } else
        for (int kb = kb_lo; kb < kb_hi; kb++) {
          sm90_mbar_wait(full0 + 8 * s, phase);
          const uint64_t dx = sm90_desc_k128(smem0 + s * Ring::STAGE_BYTES + cw * 64 * SM90_BK);
          const uint32_t ys = smem0 + s * Ring::STAGE_BYTES + Ring::X_BYTES;
          float tmp[NACC / 2];
#pragma unroll
          for (int hh = 0; hh < 2; hh++) {
            const uint64_t dy = sm90_desc_k128(ys + hh * (BN / 2) * SM90_BK);
            sm90_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < SM90_BK / 32; kk++) sm90_wgmma_fp8<BN / 2>(tmp, dx + 2 * kk, dy + 2 * kk, kk > 0);
            sm90_wgmma_commit();
            sm90_wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < NACC / 2; i++) sm90_fence_reg(tmp[i]);
            if (hh == 1 && tid == 0) sm90_release<MULTICAST>(empty0 + 8 * s);
#pragma unroll
            for (int i = 0; i < NACC / 2; i++) acc[hh * (NACC / 2) + i] += tmp[i];
          }
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      } else
      for (int kb = kb_lo; kb < kb_hi; kb++) {
        sm90_mbar_wait(full0 + 8 * s, phase);
        uint32_t xs = smem0 + s * Ring::STAGE_BYTES + cw * 64 * SM90_BK;
        uint32_t ys = smem0 + s * Ring::STAGE_BYTES + Ring::X_BYTES;
        uint64_t dx = sm90_desc_k128(xs), dy = sm90_desc_k128(ys);
        if constexpr (PROMOTE) {
          float tmp[NACC];
#pragma unroll
          for (int i = 0; i < NACC; i++) tmp[i] = 0.0f;
          sm90_wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < SM90_BK / 32; kk++)
            sm90_wgmma_fp8<BN>(tmp, dx + 2 * kk, dy + 2 * kk, kk > 0);
          sm90_wgmma_commit();
          sm90_wgmma_wait<0>();
#pragma unroll
          for (int i = 0; i < NACC; i++) sm90_fence_reg(tmp[i]);
          if (tid == 0) sm90_release<MULTICAST>(empty0 + 8 * s);
#pragma unroll
          for (int i = 0; i < NACC; i++) acc[i] = (acc_t)((float)acc[i] + tmp[i]);
        } else {
          sm90_wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < SM90_BK / 32; kk++) {
            if constexpr (INT8)
              sm90_wgmma_s8<BN>(acc, dx + 2 * kk, dy + 2 * kk, 1);
            else
              sm90_wgmma_fp8<BN>(acc, dx + 2 * kk, dy + 2 * kk, 1);
          }
          sm90_wgmma_commit();
          // Keep this K-block's wgmmas in flight; the previous block's are done now, so its
          // buffer can go back to the producer.
          sm90_wgmma_wait<1>();
          if (prev >= 0 && tid == 0) sm90_release<MULTICAST>(empty0 + 8 * prev);
          prev = s;
        }
        if (++s == STAGES) {
          s = 0;
          phase ^= 1;
        }
      }
      if constexpr (!PROMOTE) {  // (the two temporaries have retired everything already: prev == -1)
        sm90_wgmma_wait<0>();
        if (prev >= 0 && tid == 0) sm90_release<MULTICAST>(empty0 + 8 * prev);
      }
#pragma unroll
      for (int i = 0; i < NACC; i++) sm90_fence_reg(acc[i]);
      if (stamp_tile) timeline[4 * items_done + 2] = clock64();

      // Stream-K fix-up (roles: see the loop's head). Per consumer warpgroup; the tile's lock counts
      // the K-blocks whose partials are stored. A split that waits (thread 0 spins with an acquire
      // load until the lock has counted every K-block before its own, then the warpgroup's named
      // barrier) adds the stored partials in; a split before the last stores its partial and arrives
      // (the barrier, then thread 0's fence and add: a release of the warpgroup's stores). With even
      // splits (sm90_sk_slot) every storing split has a slot of its own and does not wait; the final
      // split adds the slots in split order to its own sum. With the continuous cut a tile's splits
      // pass one slot along (each waits, adds, stores the sum).
      // Either way the same sums in the same order on every run of the same grid. The last split
      // resets the lock for the next launch and runs the epilogue as a whole tile.
      if constexpr (STREAMK) {
        if (role != 0) {
          acc_t *ws = (acc_t *)a.sk_ws + tid;
          unsigned int *lock = a.sk_locks + 2 * tile + cw;
          const bool wait = role == 3 || (role == 2 && !sk_even);
          if (wait) {
            if (tid == 0)
              while (sm90_ld_acquire_u32(lock) != (unsigned)kb_lo) __nanosleep(32);
            __syncwarp();  // warp 0 converged again before the .aligned barrier
            sm90_named_bar(1 + cw, 128);
            if (sk_even) {  // the final split: slots tile (even - 1) + 0 .. even - 2
              for (int j = 0; j < sk_even - 1; j++) {
                const acc_t *p = ws + (size_t)(2 * (tile * (sk_even - 1) + j) + cw) * NACC * 128;
#pragma unroll
                for (int i = 0; i < NACC; i++) acc[i] = acc[i] + __ldcg(p + i * 128);
              }
            } else {
              const acc_t *p = ws + (size_t)(2 * tile + cw) * NACC * 128;
#pragma unroll
              for (int i = 0; i < NACC; i++) acc[i] = __ldcg(p + i * 128) + acc[i];
            }
          }
          if (role != 3) {
            acc_t *wsp = ws + (size_t)(2 * sk_slot + cw) * NACC * 128;
#pragma unroll
            for (int i = 0; i < NACC; i++) __stcg(wsp + i * 128, acc[i]);
            sm90_named_bar(1 + cw, 128);
            if (tid == 0) {
              __threadfence();
              atomicAdd(lock, (unsigned)(kb_hi - kb_lo));
            }
            __syncwarp();  // converged before the next item's .aligned wgmmas and barriers
            continue;
          }
          if (tid == 0) *(volatile unsigned int *)lock = 0u;
        }
      }

      // Epilogue. The accumulators go through shared memory first: the stores to global memory
      // can then be coalesced whatever the register layout (and, when swapped, transposed), and
      // the epilogue is one compact loop instead of BN/2 unrolled copies.
      const int r0 = warp * 16 + lane / 4, c0 = 2 * (lane % 4);
      if constexpr (SPLITK) {
        // Publish this CTA's partial tile (all 128 rows, lines along n: see sm90_epi_buffers), then each
        // CTA of the cluster sums a 1/split share of it over the cluster's CTAs in rank order
        // (deterministic: int32 sums are exact in any order, fp32 ones are added in rank order).
        const int consumer_tid = cw * 128 + tid;
        const int m_base = SWAP ? ty * BN : tx * SM90_BM, n_base = SWAP ? tx * SM90_BM : ty * BN;
        // LINES_PER_STEP: lines at a time in the quads. 2 only for the int8 128 x 128 split tiles: fp8 spilled 60
        // bytes at 2, and the deep swapped tiles lost up to 7% at 4 but won at 1 (1.01-1.07x;
        // h200-sm90-deep256-2026-11-30.txt).
        constexpr int LINES_PER_STEP = !SWAP && MINB == 1 && INT8 ? 2 : 1;
        // PREFETCH: the prefetch and early arrive of sm90_splitk_quads (1.02-1.09x,
        // h200-sm90-session13-2026-11-30.txt), only where they cost no spill: the fp8 128 x 128 split tiles
        // spilled 28-44 bytes, the fp8 two-CTA swapped n64 16-28, the fp8 swapped n128 396 (and the timeline
        // build's int8 two-CTA n64 24). Those load after the barrier and end with the whole barrier (PREFETCH_LINES =
        // LINES_PER_STEP lines there, the rest per group).
        constexpr bool PREFETCH =
            (INT8 && !(SM90_TL && SWAP && MINB == 2 && BN == 64)) || (SWAP && (MINB == 1 || BN <= 32) && BN <= 96);
        constexpr int PREFETCH_LINES = !PREFETCH || Epi::PARTIAL_LINES / 16 < LINES_PER_STEP
                                           ? LINES_PER_STEP
                                           : Epi::PARTIAL_LINES / 16;  // a warp's lines at split 2
#pragma unroll
        for (int i = 0; i < NACC; i++) {
          int row = cw * 64 + r0 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + c0 + i % 2;
          int off = SWAP ? col * Epi::PARTIAL_STRIDE + row : row * Epi::PARTIAL_STRIDE + col;
          sm90_st_smem(epi0 + (uint32_t)off * 4, sm90_bits(acc[i]));
        }
        // The quads' parameters: issued between the barrier's arrive and its wait (see sm90_splitk_quads),
        // after the partial tile's stores (before them, with the accumulators live, more kernels spilled).
        sm90_quad quad_params;
        sm90_quad_rows<PREFETCH_LINES> quad_rows;
        const bool prefetch = PREFETCH && a.split_quad && !a.ready;  // (ready flags: see sm90_splitk_quads)
        sm90_cluster_arrive();  // release: the partial tile's stores (not the parameter loads after it)
        if (prefetch)
          sm90_splitk_params<INT8, PREFETCH_LINES>(a, cw * 4 + warp, lane, split_rank, split, m_base, n_base,
                                                   quad_params, quad_rows);
        sm90_cluster_wait();
        if (a.split_quad) {
          if (!prefetch)
            sm90_splitk_params<INT8, PREFETCH_LINES>(a, cw * 4 + warp, lane, split_rank, split, m_base, n_base,
                                                     quad_params, quad_rows);
          // lines = tokens in both layouts: those at or past M are summed by nobody
          const int lines = min(Epi::PARTIAL_LINES, a.M - m_base);
          sm90_splitk_quads<INT8, Epi::PARTIAL_LINE, Epi::PARTIAL_STRIDE, LINES_PER_STEP, PREFETCH_LINES, PREFETCH>(
              a, epi0, lines, cw * 4 + warp, lane, split_rank, split, m_base, n_base, quad_params, quad_rows);
        } else {
          for (int idx = split_rank * 256 + consumer_tid; idx < SM90_BM * BN; idx += split * 256) {
            const int ml = idx / Epi::PARTIAL_LINE, nl = idx % Epi::PARTIAL_LINE;
            const uint32_t off = epi0 + (uint32_t)(ml * Epi::PARTIAL_STRIDE + nl) * 4;
            // All remote loads first, then the adds (the same rank-order sum): one DSMEM round trip per element
            // instead of split dependent ones, 0-15% faster at M = 1..64 (h200x2-sm90-ab-2026-11-29-s4.txt).
            uint32_t part[SM90_MAX_SPLIT];
#pragma unroll
            for (int r = 0; r < SM90_MAX_SPLIT; r++)
              if (r < split) part[r] = sm90_ld_dsmem_u32(sm90_mapa(off, r));
            acc_t v = 0;
#pragma unroll
            for (int r = 0; r < SM90_MAX_SPLIT; r++)
              if (r < split) v += sm90_from_bits<acc_t>(part[r]);
            const int m = m_base + ml, n = n_base + nl;
            if (m < a.M && n < a.N) sm90_epi_elem<INT8>(a, m, n, sm90_bits(v));
          }
        }
        // Nobody may overwrite or leave while others still read its partial tile (the prefetching
        // kernels' quads arrived before their output stores: see sm90_splitk_quads).
        __syncwarp();  // converged after the per-lane stores, before the .aligned barrier
        if (PREFETCH && a.split_quad)
          sm90_cluster_wait();
        else
          sm90_cluster_sync();
      } else if constexpr (!SWAP) {
        // acquire: the slot holds this tile's scales
        if (use_slot) sm90_mbar_wait(slot_full, (STREAMK ? epilogues : items_done) & 1);
        const float *epi_sa = use_slot ? slot_sa : nullptr, *epi_sb = use_slot ? slot_sb : nullptr;
        // tma_out: 1 a 16-bit output map, 2 an fp32 one (the lean epilogue only; else direct)
        // LEAN_GROUPS: column groups in whole 64-column chunks (the 128 x 160 tile: 16 of its 20; the general staged
        // path takes none of it, the lean one all but the last 32 columns, which go out through the direct path).
        // (The row expression stays written out at each call: hoisted into one local it changed the machine
        // code of 26 kernels, an unmeasured change.)
        constexpr int LEAN_GROUPS = NACC / 32 * 8;
        if (a.tma_out && (NACC / 4) % 4 == 0 && use_slot && a.lean && !(INT8 && a.azp_mode != 0)) {
          // the slot (see slot_sb / slot_sa above)
          const uint32_t slot_sb_s = slot_empty + 8, slot_sa_s = slot_sb_s + 4u * BN;
          if (a.out_kind == SM90_OUT_BF16)
            sm90_epi_lean<INT8, NACC, SM90_OUT_BF16>(
                a, acc, &tmap_o, epi0 + (uint32_t)cw * 2u * Epi::OUT_BUF_BYTES, tid, 1 + cw, cw * 64,
                sm90_fold_row<Rows::FOLD>(a, sm90_x_row0<Rows::SHIFT>(a, tx) + cw * 64, cw), ty * BN, slot_sa_s,
                slot_sb_s);
          else if (a.out_kind == SM90_OUT_FP16)
            sm90_epi_lean<INT8, NACC, SM90_OUT_FP16>(
                a, acc, &tmap_o, epi0 + (uint32_t)cw * 2u * Epi::OUT_BUF_BYTES, tid, 1 + cw, cw * 64,
                sm90_fold_row<Rows::FOLD>(a, sm90_x_row0<Rows::SHIFT>(a, tx) + cw * 64, cw), ty * BN, slot_sa_s,
                slot_sb_s);
          else
            sm90_epi_lean<INT8, NACC, SM90_OUT_FP32>(
                a, acc, &tmap_o, epi0 + (uint32_t)cw * 2u * Epi::OUT_BUF_BYTES, tid, 1 + cw, cw * 64,
                sm90_fold_row<Rows::FOLD>(a, sm90_x_row0<Rows::SHIFT>(a, tx) + cw * 64, cw), ty * BN, slot_sa_s,
                slot_sb_s);
          if constexpr (LEAN_GROUPS < NACC / 4)  // (the same values and bits as the lean chunks')
            sm90_epi_direct<INT8, NACC - 4 * LEAN_GROUPS>(
                a, acc + 4 * LEAN_GROUPS,
                sm90_fold_row<Rows::FOLD>(a, sm90_x_row0<Rows::SHIFT>(a, tx) + cw * 64, cw) + r0,
                ty * BN + c0 + 8 * LEAN_GROUPS, epi_sa, epi_sb, cw * 64 + r0, c0 + 8 * LEAN_GROUPS);
        } else if (a.tma_out == 1 && LEAN_GROUPS == NACC / 4) {
          if constexpr (LEAN_GROUPS == NACC / 4)
            sm90_epi_staged<INT8, NACC>(a, acc, &tmap_o, epi0 + (uint32_t)cw * 2u * Epi::OUT_BUF_BYTES, tid, 1 + cw,
                                        cw * 64,
                                        sm90_fold_row<Rows::FOLD>(a, sm90_x_row0<Rows::SHIFT>(a, tx) + cw * 64, cw),
                                        ty * BN + c0, epi_sa, epi_sb);
        } else  // (this branch is unswapped and unsplit: the fold's kernels are the unicast tail twins)
          sm90_epi_direct<INT8, NACC>(a, acc,
                                      sm90_fold_row<Rows::FOLD>(a, sm90_x_row0<Rows::SHIFT>(a, tx) + cw * 64, cw) + r0,
                                      ty * BN + c0, epi_sa, epi_sb, cw * 64 + r0, c0);
        if (use_slot) sm90_mbar_arrive(slot_empty);  // this thread has read the slot for the last time
        if constexpr (STREAMK) epilogues++;
      } else {
        // Per consumer warpgroup, in chunks of CHUNK_N tokens through a staging buffer (the swapped tiles
        // without split-K only: the persistent *_swap_*_ps configurations).
        // Lean path, sm90_epi_swap_lean, wherever it applies (no int8 zero point, 4-element stores, the
        // warpgroup's 64 channels below N; a.lean = 0 (the tests' hook) keeps the general path, for the
        // same-bits test): the general path below executes ~2000 instructions per warp and tile.
        // General path: each thread takes a quad of four consecutive output channels (weight rows
        // 4q..4q+3 of the warpgroup's 64, q = tid % 16, the same quad for the whole tile: its scales /
        // bias / zero-point terms load once) for every 8th token of the chunk, with the formula and pair
        // stores of the split-K quads (sm90_splitk_store: the bits of sm90_epi_elem). The rows' scales
        // load at once before the first chunk (tok_sa / tok_zp below, token tid / 16 + 8 j of the tile): loaded
        // inside the row loop, one dependent global round trip per row cost 18.3 against 16.4 us at 8b-qkv
        // M = 128 (h200-session19-2026-11-30.txt).
        // The staging goes through the shared window (ld / st.shared): plain C++ accesses compile to
        // generic-address LD.E / ST.E here.
        const uint32_t stg = epi0 + (uint32_t)cw * Epi::STAGING_WG_BYTES;
#define SM90_STAGING_ST(i, v) sm90_st_smem(stg + (uint32_t)(i) * 4, (v))
#define SM90_STAGING_LD(i) sm90_ld_smem(stg + (uint32_t)(i) * 4)
        static_assert(Epi::CHUNK_N % 8 == 0, "a chunk is whole groups of 8 tokens");
        constexpr int TOKEN_ROWS = BN / 8;  // token rows per thread (every 8th token of the tile)
        float tok_sa[TOKEN_ROWS];
        int32_t tok_zp[TOKEN_ROWS];
#pragma unroll
        for (int j = 0; j < TOKEN_ROWS; j++) sm90_quad_row<INT8>(a, ty * BN + tid / 16 + 8 * j, tok_sa[j], tok_zp[j]);
        const int chan0 = tx * SM90_BM + cw * 64;
        if (a.lean && a.quad_store && chan0 + 64 <= a.N && !(INT8 && a.azp_mode != 0)) {
          if (a.out_kind == SM90_OUT_BF16)
            sm90_epi_swap_lean<INT8, BN, Epi::CHUNK_N, SM90_OUT_BF16>(a, acc, stg, tid, 1 + cw, ty * BN, chan0, tok_sa);
          else if (a.out_kind == SM90_OUT_FP16)
            sm90_epi_swap_lean<INT8, BN, Epi::CHUNK_N, SM90_OUT_FP16>(a, acc, stg, tid, 1 + cw, ty * BN, chan0, tok_sa);
          else
            sm90_epi_swap_lean<INT8, BN, Epi::CHUNK_N, SM90_OUT_FP32>(a, acc, stg, tid, 1 + cw, ty * BN, chan0, tok_sa);
        } else {
          const int quad = tid % 16, chan = chan0 + 4 * quad;
          sm90_quad quad_params;
          sm90_quad_load<INT8>(a, 0, chan, quad_params);
#pragma unroll
          for (int ch = 0; ch < BN / Epi::CHUNK_N; ch++) {
#pragma unroll
            for (int ii = 0; ii < Epi::CHUNK_N / 2; ii++) {
              int i = ch * (Epi::CHUNK_N / 2) + ii;
              int row = r0 + 8 * ((ii / 2) % 2), col = 8 * (ii / 4) + c0 + ii % 2;
              SM90_STAGING_ST(row * Epi::STAGING_STRIDE + col, sm90_bits(acc[i]));
            }
            sm90_named_bar(1 + cw, 128);
#pragma unroll
            for (int k = 0; k < Epi::CHUNK_N / 8; k++) {
              const int c = tid / 16 + 8 * k, j = ch * (Epi::CHUNK_N / 8) + k;
              const int m = ty * BN + ch * Epi::CHUNK_N + c;
              uint32_t raw[4];
#pragma unroll
              for (int q = 0; q < 4; q++) raw[q] = SM90_STAGING_LD((4 * quad + q) * Epi::STAGING_STRIDE + c);
              if (m < a.M && chan < a.N)
                sm90_splitk_store<INT8>(a, 0, 0, m, chan, quad_params, tok_sa[j], tok_zp[j],
                                        raw);  // (the quads' row-and-store step)
            }
            sm90_named_bar(1 + cw, 128);
          }
        }
#undef SM90_STAGING_ST
#undef SM90_STAGING_LD
      }
      if (stamp_tile) timeline[4 * items_done + 3] = clock64();
    }
    // The staged epilogue's last TMA stores still read this CTA's shared memory: finish them.
    if constexpr (!SWAP && !SPLITK)
      if (a.tma_out && tid == 0) sm90_bulk_wait<0>();
  }
  // MULTICAST = 2: neither CTA may exit while the partner can still multicast into its shared memory or
  // arrive on its barriers.
  if constexpr (MULTICAST == 2) {
    __syncwarp();
    sm90_cluster_sync();
  }
#endif
}

// ---- the skinny swapped tile -----------------------------------------------------------------------------------
// 64 weight rows (ONE consumer warpgroup's wgmma M) x BN tokens, swap-AB, no split-K: the tile cuBLASLt runs at
// small M (bench/torch_kernels.py: `64x24_128x16` at 33..48 tokens on 8b-o, `64x72` at 129;
// h200-session22-2026-12-01.txt), where our 128-row tiles need split-K (a cluster barrier, a DSMEM sum: 3-4k
// cycles of epilogue) to fill the SMs.
// 160 threads: warps 0-3 the consumer warpgroup, warp 4 the producer (lane 0 issues the TMA loads). A persistent
// loop over tiles (grid = min(tiles, SMs x MINB)), weight tiles fastest (neighbouring CTAs share the token tile).
// STAGES stages of (64 + BN) x 128 bytes in the ring; the epilogue stages the accumulators through its own buffer
// (64 channels x BN + 1 words: the producer may already fill the ring with the next tile) and stores quads of four
// channels per thread with the split-K quads' formula and pair stores (sm90_splitk_store: the bits of
// sm90_epi_elem), so int8 zero points, bias, every output type and unaligned outputs take the general code.
// fp8 promotes every K-block (the library's precise accumulation) through two alternating temporaries, as the main
// kernel's SM90_PROMOTE_TWO_TEMPS (one temporary, wait_group 0 per block, ran fp8 1.1-1.3x slower than int8 on the
// same tiles at 32 K-blocks: h200-session22-2026-12-01.txt). Not with ready flags (prepare refuses them), nor the
// token tail, the weights-constant hint (ignored: the loads start after griddepcontrol.wait) or the timeline.
#define SM90_SKINNY_THREADS(CONSUMERS, PRODUCER_WARPGROUP) ((PRODUCER_WARPGROUP) ? 384 : 128 * (CONSUMERS) + 32)
template <int BN, int STAGES>
struct sm90_skinny_smem {
  static constexpr int X_BYTES = SM90_SKINNY_BM * SM90_BK;  // weights: 64 rows of a K-block
  static constexpr int Y_BYTES = BN * SM90_BK;              // tokens
  static constexpr int STAGE_BYTES = X_BYTES + Y_BYTES;     // a multiple of 1024 (128-byte swizzle atoms)
  static constexpr int NACC = BN / 2;                       // accumulators per consumer thread (m64 x BN / 128)
  static constexpr int STAGING_STRIDE = BN + 1;             // staging: 64 channels x BN tokens, words
  static constexpr int STAGING_BYTES = (SM90_SKINNY_BM * STAGING_STRIDE * 4 + 15) / 16 * 16;
  static constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + STAGING_BYTES + 2 * STAGES * 8;
};

// Template flags: MULTICAST pair of token tiles sharing the weight tile (below); CONSUMERS consumer warpgroups per
// tile (below); PRODUCER_WARPGROUP the producer is a whole warpgroup so that registers move to the consumers (below);
// MINB CTAs per SM.
// MULTICAST = 2: a cluster of two CTAs on neighbouring TOKEN tiles of the same weight tile, each loading half of the
// weight tile (32 rows: tmap_x's box) multicast into both and its own token tile, so the weights cross from L2 once per
// pair: cuBLASLt's small-M tiles on half-wave shapes (8b-o: 64x8 / 64x16 / 64x24 / 64x72 with a 1x2 cluster at 16..48
// and 129 tokens, h200-session22-2026-12-01.txt), which put 64 weight tiles on 128 SMs without split-K. Both CTAs walk
// the same pairs in lockstep; a partner past the last token tile runs on zeros (TMA fills them) and stores nothing. A
// stage is refilled only when both CTAs' consumers released it (the partner's half lands in it): the empty barriers
// count two arrivals, one of them remote.
// CONSUMERS = 2 (the _k2 configurations): two consumer warpgroups on the same 64 x BN tile, as cuBLASLt's 384-thread
// CTAs on the same tiling (`64x48_128x15_1x2` 8.80 us vs our one-warpgroup n48 pair's 11.97 at 8b-o 96 tokens,
// h200-session24-2026-12-01.txt). A tile's K-blocks alternate between them (warpgroup w takes kb = w, w + 2, ...: the
// stages two apart in the ring, which the producer fills in order); each keeps its own accumulators over its half of
// the tile's K-blocks and releases its own stages (the empty barriers still count MULTICAST arrivals). The epilogue
// adds the two halves in the staging buffer (warpgroup 0 stores, warpgroup 1 adds in place: the same thread owns the
// same positions) and both store, every other token row each. int8: the same bits as CONSUMERS = 1 (int32 sums); fp8:
// the sum of two K-ordered halves (other rounding than one K-ordered sum; fp8 is checked with a relative tolerance).
// PRODUCER_WARPGROUP (the _k2r configurations, planned from n112 by plan_skinny's wide rule): CONSUMERS = 2 with the
// producer a whole warpgroup (384 threads, its warps 9..11 idle) so that setmaxnreg can move registers to the
// consumers (40 / 232, the main kernel's split): ptxas caps 288 threads at 168 registers (n144 fp8 spilled at 168, the
// one-warpgroup n144 uses 238), which holds the wide fp8 tiles to one promotion temporary and keeps n144 out. With
// PRODUCER_WARPGROUP two temporaries again: 2-4% faster from n112 up (h200-session27-2026-12-02.txt).
template <int BN, int STAGES, bool INT8, bool PROMOTE, int MINB, int MULTICAST = 1, int CONSUMERS = 1,
          bool PRODUCER_WARPGROUP = false>
__global__ void __launch_bounds__(SM90_SKINNY_THREADS(CONSUMERS, PRODUCER_WARPGROUP), MINB)
    sm90_skinny_kernel(const __grid_constant__ CUtensorMap tmap_x, const __grid_constant__ CUtensorMap tmap_y,
                       const __grid_constant__ CUtensorMap tmap_o, const sm90_args a,
                       const __grid_constant__ CUtensorMap tmap_t) {
#if SM90_ENABLED
  typedef sm90_skinny_smem<BN, STAGES> Smem;
  typedef typename sm90_acc_type<INT8>::type acc_t;
  static_assert(BN % 8 == 0 && BN >= 8 && BN <= 256, "wgmma N");
  static_assert(Smem::STAGE_BYTES % 1024 == 0, "stages on 1024-byte swizzle atoms");
  static_assert(!(INT8 && PROMOTE), "int8 accumulates exactly");
  static_assert(Smem::SMEM_BYTES <= 232448, "shared memory");
  static_assert(MULTICAST == 1 || MULTICAST == 2, "a pair of token tiles at most");
  static_assert(CONSUMERS == 1 || (CONSUMERS == 2 && STAGES >= 4),
                "two consumer warpgroups, two stages each in flight");
  // (an odd ring would hand a stage from one warpgroup's K-block to the other's: the full barrier's parity wait is then
  // not ordered after the other warpgroup's phase)
  static_assert(CONSUMERS == 1 || STAGES % 2 == 0, "two consumer warpgroups: an even ring");
  static_assert(!PRODUCER_WARPGROUP || (CONSUMERS == 2 && MINB == 1),
                "the register split is for one CTA of two consumer warpgroups per SM");
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  const uint32_t smem0 = sm90_smem_u32(smem);
  const uint32_t staging = smem0 + STAGES * Smem::STAGE_BYTES;
  const uint32_t full0 = staging + Smem::STAGING_BYTES;
  const uint32_t empty0 = full0 + STAGES * 8;
  // Work items: tiles, weight tiles fastest; MULTICAST = 2: pairs of token tiles (the cluster's rank picks one of the
  // pair).
  const int pair_rank = MULTICAST == 2 ? (int)sm90_cluster_rank() : 0;
  const int items = a.tiles_x * (MULTICAST == 2 ? (a.tiles_y + 1) / 2 : a.tiles_y);
  const int item0 = (int)blockIdx.x / MULTICAST, item_stride = (int)gridDim.x / MULTICAST;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 128 * CONSUMERS) {
    sm90_prefetch_tmap(&tmap_x);
    sm90_prefetch_tmap(&tmap_y);
    for (int s = 0; s < STAGES; s++) {
      sm90_mbar_init(full0 + 8 * s, 1);    // the producer's arrive + the TMA bytes
      sm90_mbar_init(empty0 + 8 * s,
                     MULTICAST);  // the owning consumer warpgroup's thread 0 (and the partner's: MULTICAST = 2)
    }
    sm90_fence_mbar_init();
  }
  // MULTICAST = 2: the partner's barriers are initialised before anything lands in or arrives on them.
  if constexpr (MULTICAST == 2)
    sm90_cluster_sync();
  else
    __syncthreads();
  if (PRODUCER_WARPGROUP ? warp >= 4 * CONSUMERS : warp == 4 * CONSUMERS) {
    // ---------------- producer (one lane) ----------------
    if constexpr (PRODUCER_WARPGROUP) sm90_setmaxnreg_dec<40>();  // (the whole warpgroup: setmaxnreg is warpgroup-wide)
    if (lane == 0 && (!PRODUCER_WARPGROUP || warp == 4 * CONSUMERS)) {
      sm90_grid_dep_wait();  // nothing in global memory is read before the previous kernel is done
      int s = 0;
      uint32_t phase = 0;
      for (int t = item0; t < items; t += item_stride) {
        const int tx = t % a.tiles_x, ty = (t / a.tiles_x) * MULTICAST + pair_rank;
        for (int kb = 0; kb < a.kblocks; kb++) {
          const uint32_t full = full0 + 8 * s, dst = smem0 + s * Smem::STAGE_BYTES;
          sm90_mbar_wait(empty0 + 8 * s, phase ^ 1);
          sm90_mbar_arrive_tx(full, Smem::STAGE_BYTES);
          if constexpr (MULTICAST ==
                        2)  // this CTA's half of the weight tile, into both CTAs (the partner sends the other)
            sm90_tma_load_2d_mc(dst + pair_rank * (Smem::X_BYTES / 2), &tmap_x, full, kb * SM90_BK,
                                tx * SM90_SKINNY_BM + pair_rank * (SM90_SKINNY_BM / 2), (uint16_t)0x3);
          else
            sm90_tma_load_2d(dst, &tmap_x, full, kb * SM90_BK, tx * SM90_SKINNY_BM);
          sm90_tma_load_2d(dst + Smem::X_BYTES, &tmap_y, full, kb * SM90_BK, sm90_skinny_row0<BN>(a, ty));
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
      sm90_grid_dep_launch();  // every load is issued
    }
  } else {
    // ---------------- the consumer warpgroup(s) (threads 0..128 CONSUMERS - 1) ----------------
    if constexpr (PRODUCER_WARPGROUP) sm90_setmaxnreg_inc<232>();  // 128 x 40 + 256 x 232 <= 65536
    sm90_grid_dep_wait();  // scales, bias, zero points and out may belong to the previous kernel
    const int cw = CONSUMERS == 1 ? 0 : threadIdx.x / 128,
              tid = CONSUMERS == 1 ? threadIdx.x : threadIdx.x % 128;  // warpgroup, thread
    const int r0 = (CONSUMERS == 1 ? warp : warp % 4) * 16 + lane / 4, c0 = 2 * (lane % 4);
    // The ring position of this warpgroup's next K-block: stage s, phase.
    int s = 0;
    uint32_t phase = 0;
    uint32_t g0 = 0;  // CONSUMERS = 2: the running index (over the CTA's walk) of the current tile's first K-block
    for (int t = item0; t < items; t += item_stride) {
      const int tx = t % a.tiles_x, ty = (t / a.tiles_x) * MULTICAST + pair_rank;
      // This warpgroup's K-blocks of the tile: kb = cw, cw + CONSUMERS, ... (by the tile's own K-block index, so that a
      // tile's fp8 bits do not depend on where it falls in the CTA's walk; none when the tile has one K-block and this
      // is warpgroup 1). CONSUMERS = 1: all of them, the ring walked in order.
      int mine = a.kblocks;
      if constexpr (CONSUMERS == 2) {
        const uint32_t g = g0 + (uint32_t)cw;  // its running index: stage g % STAGES, phase (g / STAGES) % 2
        s = (int)(g % STAGES);
        phase = (g / STAGES) & 1u;
        mine = (a.kblocks - cw + 1) / 2;
        // (With an odd K-block count the parities swap warpgroups at the next tile, so a stage's previous block may be
        // the other warpgroup's there: the epilogue's CTA-wide named barriers, which each warpgroup reaches only after
        // waiting for all of its blocks of the tile, order that wait. Keep a CTA-wide barrier per tile; within a tile
        // the even ring keeps each stage with one warpgroup.)
        g0 += (uint32_t)a.kblocks;
      }
      acc_t acc[Smem::NACC];
#pragma unroll
      for (int i = 0; i < Smem::NACC; i++) acc[i] = 0;
      int prev = -1;
      if constexpr (PROMOTE) {
        // fp8: the main kernel's double-buffered promotion (sm90_fp8_issue / sm90_fp8_retire): block k's wgmmas
        // go into one temporary while block k - 1's finish into the other (wait_group 1), which is then released
        // and added in; each K-block from zero, acc += block in K order (the bits of one temporary). The wide tiles
        // with two warpgroups (CONSUMERS = 2, BN > 80: 64 accumulators + 2 x 64 temporaries spilled in 168 registers)
        // keep one temporary (SM90_PROMOTE_ONE_TEMP): each warpgroup waits for its own block, the other's block keeps
        // the tensor core busy. (PRODUCER_WARPGROUP: one from n144 up, where 72..88 accumulators + 2 x 72..88 would not
        // fit 232)
        constexpr sm90_accum ACCUM =
            CONSUMERS == 2 && BN > (PRODUCER_WARPGROUP ? 128 : 80) ? SM90_PROMOTE_ONE_TEMP : SM90_PROMOTE_TWO_TEMPS;
        float ta[Smem::NACC],
            tb[ACCUM == SM90_PROMOTE_ONE_TEMP ? 1
                                              : Smem::NACC];  // (each block's first wgmma overwrites them: scale_d = 0)
        float *acc_f = (float *)acc;
        const int n = mine;
#define SKINNY_ISSUE(T) \
    sm90_fp8_issue<BN>(T, full0 + 8 * s, phase, sm90_desc_k128(smem0 + s * Smem::STAGE_BYTES), \
                       sm90_desc_k128(smem0 + s * Smem::STAGE_BYTES + Smem::X_BYTES))
#define SKINNY_ADVANCE() \
    prev = s;            \
    sm90_ring_step<CONSUMERS, STAGES>(s, phase);
        if constexpr (ACCUM == SM90_PROMOTE_ONE_TEMP) {
          for (int j = 0; j < n; j++) {
            SKINNY_ISSUE(ta);
            SKINNY_ADVANCE();
            sm90_wgmma_wait<0>();
            sm90_fp8_retire<MULTICAST>(ta, acc_f, empty0 + 8 * prev, tid);
          }
        } else if (n > 0) {
          SKINNY_ISSUE(ta);
          SKINNY_ADVANCE();
          int j = 1;
          for (; j + 1 < n; j += 2) {
            SKINNY_ISSUE(tb);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MULTICAST>(ta, acc_f, empty0 + 8 * prev, tid);
            SKINNY_ADVANCE();
            SKINNY_ISSUE(ta);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MULTICAST>(tb, acc_f, empty0 + 8 * prev, tid);
            SKINNY_ADVANCE();
          }
          if (j < n) {
            SKINNY_ISSUE(tb);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MULTICAST>(ta, acc_f, empty0 + 8 * prev, tid);
            SKINNY_ADVANCE();
            sm90_wgmma_wait<0>();
            sm90_fp8_retire<MULTICAST>(tb, acc_f, empty0 + 8 * prev, tid);
          } else {
            sm90_wgmma_wait<0>();
            sm90_fp8_retire<MULTICAST>(ta, acc_f, empty0 + 8 * prev, tid);
          }
        }
#undef SKINNY_ISSUE
#undef SKINNY_ADVANCE
      } else {
        // int8 (and unpromoted fp8): K-block kb's four wgmmas accumulate into acc, or with TWO_CHAINS into acc2 when kb
        // is odd. A tile this narrow makes each wgmma a few cycles of tensor work behind a much longer latency, and the
        // wgmmas on one accumulator run one after another: with two chains, block kb + 1's wgmmas start while block
        // kb's are still in flight (as the fp8 promotion's two temporaries do). int32 sums: the same bits in any order.
        // Not n144: two chains there (242 registers, no spills) ran as one (70b-o-tp4 129 tokens 10.26 vs 10.30 us,
        // h200-session23-2026-12-01.txt): a m64n144k32 wgmma is long enough to cover the chain's latency.
        constexpr bool TWO_CHAINS = INT8 && BN <= 80;
        acc_t acc2[TWO_CHAINS ? Smem::NACC : 1];
#pragma unroll
        for (int i = 0; i < (TWO_CHAINS ? Smem::NACC : 1); i++) acc2[i] = 0;
#define SKINNY_BLOCK(ACC)                                                              \
    {                                                                                  \
      sm90_mbar_wait(full0 + 8 * s, phase);                                            \
      const uint32_t xs = smem0 + s * Smem::STAGE_BYTES;                                  \
      const uint64_t dx = sm90_desc_k128(xs), dy = sm90_desc_k128(xs + Smem::X_BYTES);    \
      sm90_wgmma_fence();                                                              \
      _Pragma("unroll") for (int kk = 0; kk < SM90_BK / 32; kk++) {                    \
        if constexpr (INT8)                                                            \
          sm90_wgmma_s8<BN>(ACC, dx + 2 * kk, dy + 2 * kk, 1);                         \
        else                                                                           \
          sm90_wgmma_fp8<BN>(ACC, dx + 2 * kk, dy + 2 * kk, 1);                        \
      }                                                                                \
      sm90_wgmma_commit();                                                             \
      sm90_wgmma_wait<1>(); /* this block in flight, the previous one done: its stage goes back */ \
      if (prev >= 0 && tid == 0) sm90_release<MULTICAST>(empty0 + 8 * prev);                  \
      prev = s;                                                                        \
      sm90_ring_step<CONSUMERS, STAGES>(s, phase);                                          \
    }
        int kb = 0;
        if constexpr (TWO_CHAINS) {
          for (; kb + 1 < mine; kb += 2) {
            SKINNY_BLOCK(acc);
            SKINNY_BLOCK(acc2);
          }
        }
        for (; kb < mine; kb++) SKINNY_BLOCK(acc);
#undef SKINNY_BLOCK
        sm90_wgmma_wait<0>();
        if (prev >= 0 && tid == 0) sm90_release<MULTICAST>(empty0 + 8 * prev);
        if constexpr (TWO_CHAINS) {
#pragma unroll
          for (int i = 0; i < Smem::NACC; i++) {
            sm90_fence_reg(acc2[i]);
            sm90_fence_reg(acc[i]);
            acc[i] = (acc_t)((uint32_t)acc[i] + (uint32_t)acc2[i]);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < Smem::NACC; i++) sm90_fence_reg(acc[i]);

      // Epilogue: the tokens' scales (and zero points) first, then the accumulators through the staging buffer
      // (channel-major), then each thread's quad of channels (4 quad .. 4 quad + 3) for every 8th token of the tile.
      // CONSUMERS = 2: warpgroup 0 stores its accumulators, warpgroup 1 adds its own in place (acc0 + acc1), and each
      // stores the token rows j of its parity.
      constexpr int TOKEN_ROWS = BN / 8;  // token rows per thread (every 8th token of the tile)
      constexpr int CONSUMER_THREADS = 128 * CONSUMERS;  // the consumer threads
      float tok_sa[TOKEN_ROWS];
      int32_t tok_zp[TOKEN_ROWS];
      const int m0 = sm90_skinny_row0<BN>(a, ty);
#pragma unroll
      for (int j = 0; j < TOKEN_ROWS; j++)
        if (CONSUMERS == 1 || j % CONSUMERS == cw) sm90_quad_row<INT8>(a, m0 + tid / 16 + 8 * j, tok_sa[j], tok_zp[j]);
      const int quad = tid % 16, chan = tx * SM90_SKINNY_BM + 4 * quad;
      sm90_quad quad_params;
      sm90_quad_load<INT8>(a, 0, chan, quad_params);
      if (cw == 0) {
#pragma unroll
        for (int i = 0; i < Smem::NACC; i++) {
          const int row = r0 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + c0 + i % 2;  // channel, token (wgmma's D layout)
          sm90_st_smem(staging + (uint32_t)(row * Smem::STAGING_STRIDE + col) * 4, sm90_bits(acc[i]));
        }
      }
      if constexpr (CONSUMERS == 2) {
        sm90_named_bar(1, CONSUMER_THREADS);
        if (cw == 1) {
#pragma unroll
          for (int i = 0; i < Smem::NACC; i++) {
            const int row = r0 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + c0 + i % 2;
            const uint32_t at = staging + (uint32_t)(row * Smem::STAGING_STRIDE + col) * 4;
            const uint32_t w0 = sm90_ld_smem(at);
            uint32_t sum;
            if constexpr (INT8)
              sum = w0 + (uint32_t)acc[i];
            else
              sum = __float_as_uint(__uint_as_float(w0) + (float)acc[i]);
            sm90_st_smem(at, sum);
          }
        }
      }
      sm90_named_bar(1, CONSUMER_THREADS);
#pragma unroll
      for (int j = 0; j < TOKEN_ROWS; j++) {
        if (CONSUMERS == 2 && j % CONSUMERS != cw) continue;
        const int c = tid / 16 + 8 * j, m = m0 + c;
        uint32_t raw[4];
#pragma unroll
        for (int q = 0; q < 4; q++)
          raw[q] = sm90_ld_smem(staging + (uint32_t)((4 * quad + q) * Smem::STAGING_STRIDE + c) * 4);
        if (m < a.M && chan < a.N) sm90_splitk_store<INT8>(a, 0, 0, m, chan, quad_params, tok_sa[j], tok_zp[j], raw);
      }
      sm90_named_bar(1, CONSUMER_THREADS);  // the staging buffer is free for the next tile
    }
  }  // the consumer warpgroup(s)
  // MULTICAST = 2: neither CTA exits while the partner can still multicast into its shared memory or arrive on its
  // barriers.
  if constexpr (MULTICAST == 2) {
    __syncwarp();
    sm90_cluster_sync();
  }
#endif
}
