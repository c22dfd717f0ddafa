// sm90_mainloop.cuh — the sm_90a GEMM kernels' main loop: the producer's TMA loads into the
// shared-memory ring and the consumers' wgmmas out of it.
#pragma once
#include "sm90_kernel_args.cuh"
#include "sm90_scheduler.cuh"
#include "sm90_wgmma.cuh"

// The shared-memory ring: STAGES stages of one K-block of X (SM90_BM rows) then Y (BN rows), 128 bytes a
// row in TMA's 128-byte swizzle, and a "full" and an "empty" mbarrier per stage.
template <int BN, int STAGES>
struct sm90_ring {
  static const int X_BYTES = SM90_BM * SM90_BK;
  static const int Y_BYTES = BN * SM90_BK;
  static const int STAGE_BYTES = X_BYTES + Y_BYTES;
  static const int BAR_BYTES = 2 * STAGES * 8;
};


// Token tail (sm90_args.tail_n): whether the tile (tx, ty) is the partial token tile that loads its
// token rows in the tail's boxes. A tile wholly past the last token (the missing partner of a MULTICAST = 2
// pair) loads the whole box.
template <bool SWAP, int MULTICAST, int BN>
SM90_DEV bool sm90_tail_tile(const sm90_args &a, int tx, int ty) {
  if (a.tail_n == 0 || (SWAP && MULTICAST != 1)) return false;
  const int box = SWAP ? BN : SM90_BM;
  const int valid = SWAP ? a.rows_y - ty * BN : a.rows_x - tx * SM90_BM;
  return valid > 0 && valid < box;
}
// The bytes a stage's full barrier expects: the whole stage, less the token rows the tail skips.
template <bool SWAP, int BN>
SM90_DEV uint32_t sm90_stage_tx(const sm90_args &a, uint32_t stage_bytes, bool tail) {
  const int box = SWAP ? BN : SM90_BM;
  return tail ? stage_bytes - (uint32_t)(box - a.tail_n * a.tail_rows) * SM90_BK : stage_bytes;
}
// The token box of one K-block: whole, or the tail's boxes at their rows' places (tail_rows is a
// multiple of 8, i.e. of the 128-byte swizzle's 1024-byte period, so each box lands in the layout
// that the whole box would have had), or the fold's one 3-D box (FOLD: the unswapped unsplit unicast
// twins, the only ones tail_plan gives a fold; the others keep their code).
template <bool SWAP, bool FOLD>
SM90_DEV void sm90_load_tokens(const sm90_args &a, uint32_t dst, const CUtensorMap *map, const CUtensorMap *tmap_t,
                               uint32_t full, int k, int row0, bool tail) {
  if (!tail) {
    sm90_tma_load_2d(dst, map, full, k, row0);
    return;
  }
  if constexpr (FOLD && !SWAP)
    if (sm90_tail_fold(a)) {
      if (a.tail_n == 1) {
        sm90_tma_load_3d(dst, tmap_t, full, k, 0, 0);
      } else {
        sm90_tma_load_2d(dst, tmap_t, full, k, 0);
        sm90_tma_load_2d(dst + (uint32_t)(SM90_BM / 2 * SM90_BK), tmap_t, full, k, a.M - SM90_BM / 2);
      }
      return;
    }
  for (int j = 0, r = 0; j < a.tail_n; j++, r += a.tail_rows)
    sm90_tma_load_2d(dst + (uint32_t)(r * SM90_BK), tmap_t, full, k, row0 + r);
}

// All-gather + GEMM: wait until every chunk of A that rows [lo, lo + n) touch has arrived (see
// sm90_args.ready). `seen` remembers the chunks already seen ready (flags only go 0 -> 1 within a
// launch). The acquire load (system scope: a peer GPU may write the flag) orders the TMA reads
// after the flag; fence.proxy.async makes the generic-proxy acquire cover the async proxy that TMA
// reads through. Unrolled over the chunk table so that no parameter array is indexed at run time
// (no local memory).
SM90_DEV void sm90_wait_rows(const sm90_args &a, int lo, int n, unsigned &seen) {
  const int hi = min(lo + n, a.M);
  int c0 = 0;
#pragma unroll
  for (int c = 0; c < SM90_MAX_READY; c++) {
    const int c1 = a.ready_end[c];
    if (c < a.ready_n && c1 > lo && c0 < hi && !((seen >> c) & 1u)) {
      while (sm90_ld_acquire_sys_u32(a.ready + c) == 0) __nanosleep(128);
      seen |= 1u << c;
    }
    c0 = c1;
  }
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

// fp8 promotion with two temporaries: block k goes into one temporary while block k-1's wgmmas finish
// into the other; wait_group 1 retires k-1, which is then released to the producer and added to the
// accumulator while block k runs. With one temporary (wait_group 0 per K-block) both consumer
// warpgroups drained the tensor pipe at every K-block: 128 x 128 fp8 tiles ran at 730-800 TFLOP/s
// where int8 ran at 900-950 (h200-torch-compare-2026-11-29-v1.md). The sum is the same either way
// (each K-block from zero, then acc += block in K order).
template <int BN, int NACC>
SM90_DEV void sm90_fp8_issue(float (&t)[NACC], uint32_t full, uint32_t phase, uint64_t dx, uint64_t dy) {
  sm90_mbar_wait(full, phase);
  sm90_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < SM90_BK / 32; kk++) sm90_wgmma_fp8<BN>(t, dx + 2 * kk, dy + 2 * kk, kk > 0);
  sm90_wgmma_commit();
}
// A consumer warpgroup is done with a stage: one arrive on its "empty" barrier, and with B multicast
// (MULTICAST = 2) one on the same barrier of the other CTA of the cluster, whose producer also writes into
// this CTA's stage (its half of B) and so must know that this CTA has released it.
template <int MULTICAST>
SM90_DEV void sm90_release(uint32_t empty) {
  sm90_mbar_arrive(empty);
  if constexpr (MULTICAST == 2) sm90_mbar_arrive_cluster(sm90_mapa(empty, sm90_cluster_rank() ^ 1u));
}
// t's group has completed (the caller waited): release its stage and add it in.
template <int MULTICAST, int NACC>
SM90_DEV void sm90_fp8_retire(float (&t)[NACC], float *acc, uint32_t empty, int tid) {
#pragma unroll
  for (int i = 0; i < NACC; i++) sm90_fence_reg(t[i]);
  if (tid == 0) sm90_release<MULTICAST>(empty);
#pragma unroll
  for (int i = 0; i < NACC; i++) acc[i] += t[i];
}

// A consumer's next stage: the next one (STEP = 1), or STEP on (the skinny kernel's two consumer warpgroups take
// alternate stages), the phase flipping when the ring wraps.
template <int STEP, int STAGES>
SM90_DEV void sm90_ring_step(int &s, uint32_t &phase) {
  if constexpr (STEP == 1) {
    if (++s == STAGES) {
      s = 0;
      phase ^= 1;
    }
  } else if ((s += STEP) >= STAGES) {
    s -= STAGES;
    phase ^= 1;
  }
}

// How the consumers sum a tile's K-blocks (docs/HOPPER.md 2.9). fp8 promotion: each K-block is summed from
// zero by the tensor core in a temporary and added into fp32 accumulators with FADDs (the tensor core's
// fp32 sums keep fewer mantissa bits); the variants are register plans.
enum sm90_accum {
  SM90_ACCUM_TENSOR_CORE,         // wgmma accumulates the whole K range (int8: exact; fp8: the fast mode)
  SM90_PROMOTE_ONE_TEMP,          // each K-block into one temporary, waited for (wait_group 0) and added
  SM90_PROMOTE_TWO_TEMPS,         // two temporaries alternating by K-block: one runs while the other is added
  SM90_PROMOTE_HALVES,            // each K-block in two column halves through one temporary of half the size
  SM90_PROMOTE_HALVES_TWO_TEMPS,  // the halves alternate between two half-size temporaries
};
// The main kernel's plan. Two temporaries where three accumulator sets fit the consumers' registers (232
// at 1 CTA/SM, 104 at 2). Halves where a whole temporary does not fit beside the accumulators: the
// 128 x 256 / 192 / 160 tiles (128 + 64, 96 + 48, 80 + 40 registers) and the swapped n160 without split-K
// (halves of 80 tokens; the Y half at 80 rows = 10 swizzle periods).
constexpr sm90_accum sm90_gemm_accum(bool promote, bool halves_two_temps, int nacc, int minb, bool splitk, bool swap) {
  return !promote                                  ? SM90_ACCUM_TENSOR_CORE
         : (minb == 1 ? nacc <= 64 : nacc <= 16)   ? SM90_PROMOTE_TWO_TEMPS
         : minb == 1 && !splitk && (nacc == 80 || ((nacc == 128 || nacc == 96) && !swap))
             ? (halves_two_temps ? SM90_PROMOTE_HALVES_TWO_TEMPS : SM90_PROMOTE_HALVES)
             : SM90_PROMOTE_ONE_TEMP;
}
