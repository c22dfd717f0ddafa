// sm90_blockwise.cuh — block-scaled fp8 on sm_90a (w8a8_scaled_mm_blockwise): the kernel, in the main GEMM kernel's
// shape (a producer warpgroup issuing TMA loads into a ring of stages, two consumer warpgroups of 64 rows each
// running wgmma), with the block scales applied where fp8's promotion already adds each K-block: every 128-deep
// block is summed by the tensor core from zero into a temporary, then acc = fmaf(sa * sb, block, acc), the CPU
// reference's promotion in the same block order (the block's own sum is the tensor core's).
//
//   normal  X = A (128 tokens), Y = B (BN = 128 weights: one weight block, one sb per K-block; or BN = 256: two
//           blocks, summed in halves of 128 columns through one temporary, each half with its block's sb); each
//           consumer thread holds 2 token rows, so 2 sa per K-block
//   SWAP    X = B (128 weights: one block), Y = A (BN = 16, 32 or 64 tokens); BN / 4 token columns per thread
// The scales of block kb are loaded into registers when its wgmmas are issued and used a block later, when they
// retire, so their L2 latency hides under the other temporary's wgmmas.
//
// Work split: persistent CTAs over the tiles (split = 1), or clusters of `split` CTAs, one per tile, each summing a
// K range (split > 1); the partial tiles meet in distributed shared memory and are added in rank order.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "sm90_mainloop.cuh"

typedef struct sm90_bw_args {
  int M, N, K, kblocks;
  int tiles_x, tiles_y;  // X tiles of SM90_BM rows, Y tiles of BN rows
  int split;             // CTAs per cluster (a K range each); 1: persistent CTAs over whole tiles
  int nblocks_n;         // ceil(N / 128): rows of sb
  void *out;
  long long ldo;
  int out_kind;          // W8A8_DTYPE_BF16 / FP16 / FP32
  int pair_store;        // out and ldo allow one store of two neighbouring elements
  int vec_store;         // out and ldo allow 16-byte stores (the staged epilogue)
  const float *sa, *sb;  // [M, kblocks] and [ceil(N / 128), kblocks], strides below (elements)
  long long sa_rs, sa_cs, sb_rs, sb_cs;
  const void *bias;      // NULL or N elements of out_kind
} sm90_bw_args;

// Tile t -> (tx, ty) in groups of SM90_GROUP X tiles walking Y (the CTAs running at once share a few X tiles and a
// band of Y tiles in L2), as the main kernel's order.
SM90_DEV void sm90_bw_tile(const sm90_bw_args &a, int t, int &tx, int &ty) {
  const int per_group = SM90_GROUP * a.tiles_y;
  const int g = t / per_group, first = g * SM90_GROUP, local = t - g * per_group;
  const int gsize = min(a.tiles_x - first, SM90_GROUP);
  tx = first + local % gsize;
  ty = local / gsize;
}

// One block's scales for a consumer thread: NA token scales and the scales of the tile's NB weight blocks.
template <bool SWAP, int BN>
struct sm90_bw_scales {
  static constexpr int NA = SWAP ? BN / 4 : 2;
  static constexpr int NB = SWAP ? 1 : BN / 128;
  float sa[NA];
  float sb[NB];
};

// The thread's token rows (normal: rows r and r + 8 of the warp's 16; swapped: the columns 8 j + 2 (lane % 4) + e),
// clamped to M - 1 (a row past the last token feeds only outputs that are never stored), as offsets into sa.
template <bool SWAP, int BN>
SM90_DEV void sm90_bw_token_offsets(const sm90_bw_args &a, int tx, int ty, int cw, int tid, long long (&off)[sm90_bw_scales<SWAP, BN>::NA]) {
  const int warp = tid / 32, lane = tid % 32;
  if constexpr (!SWAP) {
    const int m = tx * SM90_BM + cw * 64 + warp * 16 + lane / 4;
    off[0] = (long long)min(m, a.M - 1) * a.sa_rs;
    off[1] = (long long)min(m + 8, a.M - 1) * a.sa_rs;
  } else {
#pragma unroll
    for (int q = 0; q < BN / 4; q++) {
      const int m = ty * BN + (q / 2) * 8 + (lane % 4) * 2 + q % 2;
      off[q] = (long long)min(m, a.M - 1) * a.sa_rs;
    }
  }
}

// sb_row[h]: the row of sb of the tile's weight block h. The token scales come through L2 only (__ldcg, as the main
// kernel's scale slot loads them): the quantizer that wrote them may be the kernel just before, under programmatic
// dependent launch; the weights' scales do not change between calls (__ldg).
template <bool SWAP, int BN>
SM90_DEV void sm90_bw_load_scales(const sm90_bw_args &a, const long long (&off)[sm90_bw_scales<SWAP, BN>::NA],
                                  const float *const (&sb_row)[sm90_bw_scales<SWAP, BN>::NB], int kb,
                                  sm90_bw_scales<SWAP, BN> &s) {
  const long long ka = (long long)kb * a.sa_cs;
#pragma unroll
  for (int q = 0; q < sm90_bw_scales<SWAP, BN>::NA; q++) s.sa[q] = __ldcg(a.sa + off[q] + ka);
#pragma unroll
  for (int h = 0; h < sm90_bw_scales<SWAP, BN>::NB; h++) s.sb[h] = __ldg(sb_row[h] + (long long)kb * a.sb_cs);
}
// The rows of sb of tile (tx, ty)'s weight blocks (a block past the last one, the second half of a partial 256-wide
// tile, reads the last block's row: its outputs are never stored).
template <bool SWAP, int BN>
SM90_DEV void sm90_bw_sb_rows(const sm90_bw_args &a, int tx, int ty,
                              const float *(&sb_row)[sm90_bw_scales<SWAP, BN>::NB]) {
#pragma unroll
  for (int h = 0; h < sm90_bw_scales<SWAP, BN>::NB; h++) {
    const int nb = SWAP ? tx : ty * (BN / 128) + h;
    sb_row[h] = a.sb + (long long)min(nb, a.nblocks_n - 1) * a.sb_rs;
  }
}

// The block in t has completed (the caller waited): release its stage, then acc = fmaf(sa * sb, t, acc). Element i
// of a wgmma fragment: column group i / 4, row (i / 2) % 2 (+ 8), column 2 (lane % 4) + i % 2.
template <bool SWAP, int BN>
SM90_DEV void sm90_bw_retire(float (&t)[BN / 2], float (&acc)[BN / 2], const sm90_bw_scales<SWAP, BN> &s,
                             uint32_t empty, int tid) {
  static_assert(sm90_bw_scales<SWAP, BN>::NB == 1, "one weight block per temporary");
#pragma unroll
  for (int i = 0; i < BN / 2; i++) sm90_fence_reg(t[i]);
  if (tid == 0) sm90_release<1>(empty);
  constexpr int NA = sm90_bw_scales<SWAP, BN>::NA;
  float f[NA];
#pragma unroll
  for (int q = 0; q < NA; q++) f[q] = s.sa[q] * s.sb[0];
#pragma unroll
  for (int i = 0; i < BN / 2; i++) acc[i] = fmaf(f[SWAP ? (i / 4) * 2 + i % 2 : (i / 2) % 2], t[i], acc[i]);
}

// The 128 x 256 tile: per K-block, columns 0..127 (weight block 2 ty) into the temporary, waited for and added into
// acc[0..63] with that block's sb, then columns 128..255 (block 2 ty + 1) through the same temporary into
// acc[64..127] (the m64n256 fragment's first 64 registers are the m64n128 fragment of its first 128 columns). A
// warpgroup waits for its own half while the other's keeps the tensor pipe busy (the main kernel's
// SM90_PROMOTE_HALVES; a second temporary does not fit beside 128 accumulators).
template <int STAGES>
SM90_DEV void sm90_bw_halves(const sm90_bw_args &a, const long long (&off)[2], const float *const (&sb_row)[2], int kb,
                             int kb1, uint32_t smem0, uint32_t full0, uint32_t empty0, int cw, int tid, int &s,
                             uint32_t &phase, float (&acc)[128]) {
  typedef sm90_ring<256, STAGES> Ring;
  float t[64];
#pragma unroll
  for (int i = 0; i < 64; i++) t[i] = 0.0f;
  for (; kb < kb1; kb++) {
    sm90_bw_scales<false, 256> sc;
    sm90_bw_load_scales<false, 256>(a, off, sb_row, kb, sc);
    const uint32_t stage = smem0 + s * Ring::STAGE_BYTES;
    const uint64_t dx = sm90_desc_k128(stage + cw * 64 * SM90_BK);
    sm90_mbar_wait(full0 + 8 * s, phase);
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const uint64_t dy = sm90_desc_k128(stage + Ring::X_BYTES + h * 128 * SM90_BK);
      sm90_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < SM90_BK / 32; kk++) sm90_wgmma_fp8<128>(t, dx + 2 * kk, dy + 2 * kk, kk > 0);
      sm90_wgmma_commit();
      sm90_wgmma_wait<0>();
#pragma unroll
      for (int i = 0; i < 64; i++) sm90_fence_reg(t[i]);
      if (h == 1 && tid == 0) sm90_release<1>(empty0 + 8 * s);
      const float f0 = sc.sa[0] * sc.sb[h], f1 = sc.sa[1] * sc.sb[h];
#pragma unroll
      for (int i = 0; i < 64; i++) acc[64 * h + i] = fmaf((i / 2) % 2 ? f1 : f0, t[i], acc[64 * h + i]);
    }
    sm90_ring_step<1, STAGES>(s, phase);
  }
}

// Output element (m, n) = v (+ bias[n]), rounded once; with `pair`, (m, n + 1) = w too, in one store where allowed.
SM90_DEV void sm90_bw_store(const sm90_bw_args &a, int m, int n, float v, float w, bool pair) {
  if (m >= a.M || n >= a.N) return;
  pair = pair && n + 1 < a.N;
  if (a.bias) {
    v += w8a8d_load_float(a.out_kind, a.bias, n);
    if (pair) w += w8a8d_load_float(a.out_kind, a.bias, n + 1);
  }
  const long long o = (long long)m * a.ldo + n;
  if (pair && a.pair_store) {
    if (a.out_kind == W8A8_DTYPE_FP32) {
      *(float2 *)((float *)a.out + o) = make_float2(v, w);
    } else {
      const uint32_t lo = a.out_kind == W8A8_DTYPE_BF16 ? w8a8d_f32_to_bf16(v) : w8a8d_f32_to_f16(v);
      const uint32_t hi = a.out_kind == W8A8_DTYPE_BF16 ? w8a8d_f32_to_bf16(w) : w8a8d_f32_to_f16(w);
      *(uint32_t *)((uint16_t *)a.out + o) = lo | hi << 16;
    }
    return;
  }
  w8a8d_store_float(a.out_kind, a.out, o, v);
  if (pair) w8a8d_store_float(a.out_kind, a.out, o + 1, w);
}

// The staged epilogue (split = 1): a consumer warpgroup writes its fragment, bias added and rounded to the output
// type, into its own staging buffer of 128-byte lines (16-byte units XOR-swizzled by line % 8: the fragment's
// stores hit 32 distinct banks), then stores whole 16-byte units to out, a line of output at a time. Element-wise
// stores from the fragment were half-empty sectors and, inlined 64 times with the output type decided at run time,
// a kernel too large for the instruction cache (ncu: 61% of stalls on instruction fetch at 4096 x 32768 x 512).
template <int KIND>
struct sm90_bw_out {
  static constexpr int ESZ = KIND == W8A8_DTYPE_FP32 ? 4 : 2;  // bytes per element
  static constexpr int PER_UNIT = 16 / ESZ;                     // elements per 16-byte unit
  static constexpr int LINE = 128 / ESZ;                        // elements per 128-byte staging line
};
SM90_DEV uint32_t sm90_bw_stg_addr(uint32_t stg, int line, int byte) {
  return stg + (uint32_t)line * 128 + (uint32_t)((((byte >> 4) ^ (line & 7)) << 4) | (byte & 15));
}
// (the hardware's round-to-nearest-even conversions, as the main kernel's epilogue)
template <int KIND>
SM90_DEV void sm90_bw_stg_put1(uint32_t addr, float x) {
  if constexpr (KIND == W8A8_DTYPE_FP32) {
    sm90_st_smem(addr, __float_as_uint(x));
  } else {
    const uint16_t h = KIND == W8A8_DTYPE_BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x))
                                               : __half_as_ushort(__float2half_rn(x));
    asm volatile("st.shared.b16 [%0], %1;" ::"r"(addr), "h"(h) : "memory");
  }
}
template <int KIND>
SM90_DEV void sm90_bw_stg_put2(uint32_t addr, float x, float y) {
  if constexpr (KIND == W8A8_DTYPE_FP32) {
    sm90_st_smem_v2f32(addr, x, y);
  } else if constexpr (KIND == W8A8_DTYPE_BF16) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(x, y);
    sm90_st_smem(addr, *(const uint32_t *)&p);
  } else {
    const __half2 p = __floats2half2_rn(x, y);
    sm90_st_smem(addr, *(const uint32_t *)&p);
  }
}
template <int KIND, bool BIAS>
SM90_DEV float sm90_bw_bias(const sm90_bw_args &a, int n) {
  if constexpr (!BIAS) return 0.0f;
  const int i = min(n, a.N - 1);
  if constexpr (KIND == W8A8_DTYPE_FP32) return __ldg((const float *)a.bias + i);
  const unsigned short h = __ldg((const unsigned short *)a.bias + i);
  return KIND == W8A8_DTYPE_BF16 ? w8a8d_bf16_to_f32(h) : __half2float(__ushort_as_half(h));
}
// `lines` staging lines -> out rows m0.., columns n0.. of each line: whole units where allowed, else element-wise.
template <int KIND>
SM90_DEV void sm90_bw_stg_drain(const sm90_bw_args &a, uint32_t stg, int lines, int m0, int n0, int tid) {
  typedef sm90_bw_out<KIND> O;
  for (int j = tid; j < lines * 8; j += 128) {
    const int line = j / 8, unit = j % 8;
    const int m = m0 + line, n = n0 + unit * O::PER_UNIT;
    if (m >= a.M || n >= a.N) continue;
    const uint4 v = sm90_ld_smem_v4(stg + (uint32_t)line * 128 + (uint32_t)((unit ^ (line & 7)) << 4));
    uint8_t *dst = (uint8_t *)a.out + ((long long)m * a.ldo + n) * O::ESZ;
    if (a.vec_store && n + O::PER_UNIT <= a.N) {
      *(uint4 *)dst = v;
    } else {
      for (int e = 0; e < O::PER_UNIT && n + e < a.N; e++) {
        const int q = e * O::ESZ / 4;
        const uint32_t w = q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
        if constexpr (O::ESZ == 4)
          ((uint32_t *)dst)[e] = w;
        else
          ((uint16_t *)dst)[e] = (uint16_t)(w >> (16 * (e % 2)));
      }
    }
  }
}
// Normal tiles: the warpgroup's 64 rows x BN columns, LINE columns (a 128-byte line per row) at a time.
template <int BN, int KIND, bool BIAS>
SM90_DEV void sm90_bw_epi_normal(const sm90_bw_args &a, const float (&v)[BN / 2], int tx, int ty, int cw, int tid,
                                 uint32_t stg) {
  typedef sm90_bw_out<KIND> O;
  constexpr int GROUPS = O::LINE / 8;  // fragment column groups of 8 per chunk
  const int warp = tid / 32, lane = tid % 32, r0 = warp * 16 + lane / 4;
  const int m0 = tx * SM90_BM + cw * 64, n0 = ty * BN;
#pragma unroll
  for (int c = 0; c < BN / O::LINE; c++) {
    sm90_named_bar(2 + cw, 128);  // the previous chunk's units are out
#pragma unroll
    for (int g = 0; g < GROUPS; g++) {
      const int grp = c * GROUPS + g, col = g * 8 + 2 * (lane % 4);
      const float b0 = sm90_bw_bias<KIND, BIAS>(a, n0 + c * O::LINE + col),
                  b1 = sm90_bw_bias<KIND, BIAS>(a, n0 + c * O::LINE + col + 1);
#pragma unroll
      for (int h = 0; h < 2; h++)
        sm90_bw_stg_put2<KIND>(sm90_bw_stg_addr(stg, r0 + 8 * h, col * O::ESZ), v[grp * 4 + 2 * h] + b0,
                               v[grp * 4 + 2 * h + 1] + b1);
    }
    sm90_named_bar(2 + cw, 128);
    sm90_bw_stg_drain<KIND>(a, stg, 64, m0, n0 + c * O::LINE, tid);
  }
}
// Swapped tiles: the fragment is 64 weights (rows) x BN tokens; out is tokens x weights, so each token is a
// staging line of LINE weights (one chunk for 16-bit outputs, two for fp32).
template <int BN, int KIND, bool BIAS>
SM90_DEV void sm90_bw_epi_swap(const sm90_bw_args &a, const float (&v)[BN / 2], int tx, int ty, int cw, int tid,
                               uint32_t stg) {
  typedef sm90_bw_out<KIND> O;
  const int warp = tid / 32, lane = tid % 32, w0 = warp * 16 + lane / 4;
  const int wbase = tx * SM90_BM + cw * 64;
#pragma unroll
  for (int c = 0; c < 64 / O::LINE; c++) {
    sm90_named_bar(2 + cw, 128);
    if (warp * 16 / O::LINE == c) {  // this warp's 16 weights are in chunk c
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int w = w0 + 8 * h;
        const float b = sm90_bw_bias<KIND, BIAS>(a, wbase + w);
#pragma unroll
        for (int i = 2 * h; i < BN / 2; i += 4) {
#pragma unroll
          for (int e = 0; e < 2; e++) {
            const int tok = (lane % 4) * 2 + (i / 4) * 8 + e;
            sm90_bw_stg_put1<KIND>(sm90_bw_stg_addr(stg, tok, (w - c * O::LINE) * O::ESZ), v[i + e] + b);
          }
        }
      }
    }
    sm90_named_bar(2 + cw, 128);
    sm90_bw_stg_drain<KIND>(a, stg, BN, ty * BN, wbase + c * O::LINE, tid);
  }
}
template <bool SWAP, int BN, int KIND>
SM90_DEV void sm90_bw_epi_kind(const sm90_bw_args &a, const float (&v)[BN / 2], int tx, int ty, int cw, int tid,
                               uint32_t stg) {
  if (a.bias) {
    if constexpr (SWAP) sm90_bw_epi_swap<BN, KIND, true>(a, v, tx, ty, cw, tid, stg);
    else sm90_bw_epi_normal<BN, KIND, true>(a, v, tx, ty, cw, tid, stg);
  } else {
    if constexpr (SWAP) sm90_bw_epi_swap<BN, KIND, false>(a, v, tx, ty, cw, tid, stg);
    else sm90_bw_epi_normal<BN, KIND, false>(a, v, tx, ty, cw, tid, stg);
  }
}
// One copy per output type and bias or none, chosen once per tile: the path a tile runs has no branches.
template <bool SWAP, int BN>
SM90_DEV void sm90_bw_epilogue(const sm90_bw_args &a, const float (&v)[BN / 2], int tx, int ty, int cw, int tid,
                               uint32_t stg) {
  if (a.out_kind == W8A8_DTYPE_BF16)
    sm90_bw_epi_kind<SWAP, BN, W8A8_DTYPE_BF16>(a, v, tx, ty, cw, tid, stg);
  else if (a.out_kind == W8A8_DTYPE_FP16)
    sm90_bw_epi_kind<SWAP, BN, W8A8_DTYPE_FP16>(a, v, tx, ty, cw, tid, stg);
  else
    sm90_bw_epi_kind<SWAP, BN, W8A8_DTYPE_FP32>(a, v, tx, ty, cw, tid, stg);
}

// The ring of the blockwise kernel: STAGES stages of X (SM90_BM rows) then Y (BN rows), 128-byte rows in TMA's
// 128-byte swizzle; then the full and empty barriers; then the two staging buffers of the epilogue. The split-K partial tiles reuse the ring once it is drained.
template <int BN, bool SWAP, int STAGES>
struct sm90_bw_smem {
  typedef sm90_ring<BN, STAGES> Ring;
  // the staged epilogue's buffer per consumer warpgroup: 64 lines (normal) or BN token lines (swapped) of 128 bytes
  static const int STAGING_WG = (SWAP ? BN : 64) * 128;
  static const int STAGING_OFF = (STAGES * Ring::STAGE_BYTES + Ring::BAR_BYTES + 127) / 128 * 128;
  static const int BYTES = STAGING_OFF + 2 * STAGING_WG + 1024;
  static_assert(BYTES <= 232448, "sm_90 allows 227 KB of shared memory per CTA");
  static_assert(2 * SM90_THREADS / 3 * (BN / 2) * 4 <= STAGES * Ring::STAGE_BYTES, "the partial tile fits the ring");
};

template <int BN, bool SWAP, int STAGES>
__global__ void __launch_bounds__(SM90_THREADS, 1)
    sm90_bw_kernel(const __grid_constant__ CUtensorMap tmap_x, const __grid_constant__ CUtensorMap tmap_y,
                   const sm90_bw_args a) {
#if SM90_ENABLED
  typedef sm90_ring<BN, STAGES> Ring;
  typedef sm90_bw_smem<BN, SWAP, STAGES> Smem;
  typedef sm90_bw_scales<SWAP, BN> Scales;
  constexpr int NACC = BN / 2;
  static_assert(SWAP ? (BN == 16 || BN == 32 || BN == 64) : (BN == 128 || BN == 256), "whole weight blocks per tile");
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  const uint32_t smem0 = sm90_smem_u32(smem);
  const uint32_t full0 = smem0 + STAGES * Ring::STAGE_BYTES, empty0 = full0 + STAGES * 8;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int split = a.split;
  const int rank = split > 1 ? (int)sm90_cluster_rank() : 0;
  const int items = a.tiles_x * a.tiles_y;
  const int stride = gridDim.x / split, item0 = blockIdx.x / split;
  const int kb0 = (int)((long long)a.kblocks * rank / split), kb1 = (int)((long long)a.kblocks * (rank + 1) / split);

  if (threadIdx.x == 0) {
    sm90_prefetch_tmap(&tmap_x);
    sm90_prefetch_tmap(&tmap_y);
    for (int s = 0; s < STAGES; s++) {
      sm90_mbar_init(full0 + 8 * s, 1);   // the producer's arrive + the TMA bytes
      sm90_mbar_init(empty0 + 8 * s, 2);  // one arrive per consumer warpgroup
    }
    sm90_fence_mbar_init();
  }
  __syncthreads();

  if (wg == 0) {
    // ---------------- producer: 384 x 168 = 128 x 40 + 256 x 232 registers ----------------
    sm90_setmaxnreg_dec<40>();
    if (tid == 0) {
      sm90_grid_dep_wait();
      int s = 0;
      uint32_t phase = 0;
      for (int t = item0; t < items; t += stride) {
        int tx, ty;
        sm90_bw_tile(a, t, tx, ty);
        for (int kb = kb0; kb < kb1; kb++) {
          const uint32_t full = full0 + 8 * s, dst = smem0 + s * Ring::STAGE_BYTES;
          sm90_mbar_wait(empty0 + 8 * s, phase ^ 1);
          sm90_mbar_arrive_tx(full, Ring::STAGE_BYTES);
          sm90_tma_load_2d(dst, &tmap_x, full, kb * SM90_BK, tx * SM90_BM);
          sm90_tma_load_2d(dst + Ring::X_BYTES, &tmap_y, full, kb * SM90_BK, ty * BN);
          sm90_ring_step<1, STAGES>(s, phase);
        }
      }
      sm90_grid_dep_launch();
    }
    if (split > 1) {  // the two cluster barriers of the reduction (one tile per cluster: the host's grid)
      __syncwarp();
      sm90_cluster_sync();
      sm90_cluster_sync();
    }
    return;
  }

  // ---------------- consumers ----------------
  sm90_setmaxnreg_inc<232>();
  sm90_grid_dep_wait();  // the scales, bias and out may belong to the previous kernel
  const int cw = wg - 1;
  int s = 0;
  uint32_t phase = 0;
  for (int t = item0; t < items; t += stride) {
    int tx, ty;
    sm90_bw_tile(a, t, tx, ty);
    long long off[Scales::NA];
    sm90_bw_token_offsets<SWAP, BN>(a, tx, ty, cw, tid, off);
    const float *sb_row[Scales::NB];
    sm90_bw_sb_rows<SWAP, BN>(a, tx, ty, sb_row);
    float acc[NACC];
#pragma unroll
    for (int i = 0; i < NACC; i++) acc[i] = 0.0f;
    if constexpr (BN == 256) {
      sm90_bw_halves<STAGES>(a, off, sb_row, kb0, kb1, smem0, full0, empty0, cw, tid, s, phase, acc);
    } else {
      // Two temporaries alternating by K-block, the loop unrolled by two so that each is a fixed set of registers
      // (sm90_fp8_issue): block kb's wgmmas run while block kb - 1's are scaled and added. (Inline: as a function
      // of its own, ptxas serialized the wgmmas, C7517.)
      float ta[NACC], tb[NACC];
#pragma unroll
      for (int i = 0; i < NACC; i++) ta[i] = tb[i] = 0.0f;
      Scales scales_ta, scales_tb;  // the scales of the blocks in ta and tb
      int kb = kb0, prev = 0;
      const int n = kb1 - kb0;
#define SM90_BW_ISSUE(T, SC)                                                                                    \
  sm90_bw_load_scales<SWAP, BN>(a, off, sb_row, kb, SC);                                                       \
  sm90_fp8_issue<BN>(T, full0 + 8 * s, phase, sm90_desc_k128(smem0 + s * Ring::STAGE_BYTES + cw * 64 * SM90_BK), \
                     sm90_desc_k128(smem0 + s * Ring::STAGE_BYTES + Ring::X_BYTES));                          \
  prev = s;                                                                                                    \
  sm90_ring_step<1, STAGES>(s, phase);                                                                         \
  kb++
      if (n > 0) {
        SM90_BW_ISSUE(ta, scales_ta);
        int j = 1;
        for (; j + 1 < n; j += 2) {
          int p = prev;
          SM90_BW_ISSUE(tb, scales_tb);
          sm90_wgmma_wait<1>();
          sm90_bw_retire<SWAP, BN>(ta, acc, scales_ta, empty0 + 8 * p, tid);
          p = prev;
          SM90_BW_ISSUE(ta, scales_ta);
          sm90_wgmma_wait<1>();
          sm90_bw_retire<SWAP, BN>(tb, acc, scales_tb, empty0 + 8 * p, tid);
        }
        if (j < n) {
          const int p = prev;
          SM90_BW_ISSUE(tb, scales_tb);
          sm90_wgmma_wait<1>();
          sm90_bw_retire<SWAP, BN>(ta, acc, scales_ta, empty0 + 8 * p, tid);
          sm90_wgmma_wait<0>();
          sm90_bw_retire<SWAP, BN>(tb, acc, scales_tb, empty0 + 8 * prev, tid);
        } else {
          sm90_wgmma_wait<0>();
          sm90_bw_retire<SWAP, BN>(ta, acc, scales_ta, empty0 + 8 * prev, tid);
        }
      }
#undef SM90_BW_ISSUE
    }
    if (split == 1) {
      sm90_bw_epilogue<SWAP, BN>(a, acc, tx, ty, cw, tid, smem0 + Smem::STAGING_OFF + cw * Smem::STAGING_WG);
      continue;
    }
    // Split-K: the ring is drained (one tile per cluster); once both consumer warpgroups are past their last wgmma,
    // each thread's partial goes to word i x 256 + c of the ring, and CTA `rank` sums its slice of the fragment
    // over the cluster's CTAs in rank order.
    const int c = cw * 128 + tid;
    sm90_named_bar(1, 256);
#pragma unroll
    for (int i = 0; i < NACC; i++) sm90_st_smem(smem0 + (uint32_t)(i * 256 + c) * 4, __float_as_uint(acc[i]));
    sm90_cluster_sync();
    // (element by element out of shared memory: holding the fragment across the barrier spilled)
    const int warp = tid / 32, lane = tid % 32;
    const int x0 = tx * SM90_BM + cw * 64 + warp * 16 + lane / 4, y0 = ty * BN + (lane % 4) * 2;
    for (int i = NACC * rank / split; i < NACC * (rank + 1) / split; i++) {
      float v = 0.0f;
      for (int q = 0; q < split; q++) v += sm90_ld_dsmem_f32(sm90_mapa(smem0 + (uint32_t)(i * 256 + c) * 4, q));
      const int x = x0 + 8 * ((i / 2) % 2), y = y0 + (i / 4) * 8 + i % 2;
      if constexpr (SWAP)
        sm90_bw_store(a, y, x, v, 0.0f, false);
      else
        sm90_bw_store(a, x, y, v, 0.0f, false);
    }
    sm90_cluster_sync();  // no CTA leaves while another reads its partial
  }
#endif
}
