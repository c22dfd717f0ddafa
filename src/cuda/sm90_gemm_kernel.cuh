// sm90_gemm_kernel.cuh — the sm_90a scaled-GEMM kernel (fp8 e4m3 and int8), one template.
//
// Shape of the kernel (one CTA per SM slot, 384 threads):
//   warpgroup 0       producer: one thread issues TMA loads of the next K-block of both operands
//                     into a STAGES-deep ring of shared-memory buffers, each completing on a
//                     "full" mbarrier; it waits on the matching "empty" mbarrier before reuse.
//   warpgroups 1, 2   consumers: each owns 64 rows of the CTA tile and issues wgmma.mma_async
//                     (QGMMA for fp8, IGMMA for int8) on the buffer, then frees it.
//   epilogue          in registers, straight from the accumulators: zero point (int32), scales,
//                     bias, one rounding to bf16/fp16/fp32; unswapped unsplit tiles with 16-bit
//                     outputs leave through shared memory and asynchronous TMA stores (the staged
//                     epilogue), the others through predicated stores.
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
// order. With SPLIT > 1, the K range of each tile is split over the SPLIT CTAs of a thread-block
// cluster; their fp32/int32 partial tiles are summed through distributed shared memory in a fixed
// order (deterministic, exact for int8) and each CTA finishes a 1/SPLIT slice of the epilogue.
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

#include "sm90_configs.h"  // SM90_BK, SM90_BM, SM90_MAX_SPLIT, SM90_SKINNY_BM
#include "sm90_ptx.cuh"
#include "sm90_streamk.h"
#include "sm90_wgmma.cuh"

#define SM90_THREADS 384   // producer warpgroup + 2 consumer warpgroups
#define SM90_GROUP 8       // tiles along X per group of the L2-friendly order
#define SM90_MAX_READY 8   // chunks of A that can arrive while the kernel runs (all-gather + GEMM)

// The split-K element-wise reduction issues all SPLIT remote loads of an element before adding them
// (one DSMEM round trip instead of SPLIT dependent ones; the same rank-order sum, the same bits): 0-15%
// faster at M = 1..64 (h200x2-sm90-ab-2026-11-29-s4.txt). -DW8A8_SM90_EPILOGUE_V1 builds the
// dependent-load form, for A/B runs only.
#ifdef W8A8_SM90_EPILOGUE_V1
#define SM90_EPI_V2 0
#else
#define SM90_EPI_V2 1
#endif
// The development timeline (sm90_args.timeline, bench/sm90_dev -T) is compiled in only with
// -DW8A8_SM90_TIMELINE (NVCCEXTRA; the sm90ab step builds such a library for its -T runs): its stamps,
// though dead at run time, changed ptxas's schedule of the fp8 128 x 256 tiles and cost 4-5%
// (h200-sm90-fp8-bisect-2026-11-30.txt). Production kernels carry none of it.
#ifdef W8A8_SM90_TIMELINE
static constexpr bool SM90_TL = true;
#else
static constexpr bool SM90_TL = false;
#endif

// The lean swapped epilogue's staging (sm90_epi_swap_lean): words from one token line to the next (64
// channels + 4: 16-byte aligned lines, the fragment's stores on 32 distinct banks).
static constexpr int SM90_SWL_STRIDE = 68;

// Output element kinds (runtime: one uniform branch per store).
enum { SM90_OUT_BF16 = 0, SM90_OUT_FP16 = 1, SM90_OUT_FP32 = 2 };

// Everything the kernel needs besides the two TMA descriptors. Kernel-space: X rows are on
// wgmma's M side, Y rows on its N side (see SWAP above).
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
  int prm;
  // With prm and the staged epilogue, no zero point: sm90_epi_lean (1, default) or sm90_epi_staged
  // (0: the tests' w8a8_sm90_set_lean(0)). The swapped unsplit tiles: sm90_epi_swap_lean where it applies (1)
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
  // timeline[(blockIdx.x * timeline_max + i) * 4 + k]. Every configuration stamps. Pingpong: each
  // warpgroup stamps its own tiles (entries i =
  // the CTA's tile index), so a negative gap between consecutive tiles is the overlap of one
  // tile's start with the other's epilogue.
  unsigned long long *timeline;
  int timeline_max, timeline_ctas;  // tiles per CTA, CTAs (blockIdx.x >= timeline_ctas: no stamps)
  // Token tail (the kernels with TAIL only, which take the map tmap_t after these arguments; last here
  // so that the other kernels' parameter offsets, hence their code, stay unchanged). Where the last
  // token tile is partial (rows_x unswapped, rows_y swapped; never swapped with MC = 2), its token rows
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
  // costs under 1%. Kernels built with -DW8A8_SM90_CONST_GROUP ignore it (SM90_GROUP; the A/B side).
  int group;
  // Stream-K (the kernels with SK only; sm90_streamk.h): the partial tiles of the stream-K
  // tiles (tile t's consumer warpgroup w at sk_ws + (2 t + w) x 128 x BN / 2 words, element i of
  // thread j at word i x 128 + j), and a lock per (tile, warpgroup) counting the K-blocks summed so
  // far, zero between launches (the final split resets it). After `group`, so that the other fields
  // keep their offsets, and within tmap_t's 128-byte alignment, so that it keeps its own.
  void *sk_ws;
  unsigned int *sk_locks;
  // The shift (the unswapped kernels without split-K, stream-K or pingpong: sm90_x0): where the last
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


// bias[n] as float, through the read-only path (__ldg): one branch (fp32 or 16-bit) and a select
// between the two 16-bit formats (the epilogue unrolls this BN/4 times; a three-way version cost
// ptxas 10 s per kernel).
SM90_DEV float sm90_ldg_bias(const sm90_args &a, int n) {
  if (a.out_kind == SM90_OUT_FP32) return __ldg((const float *)a.bias + n);
  const unsigned short h = __ldg((const unsigned short *)a.bias + n);
  return a.out_kind == SM90_OUT_BF16 ? __uint_as_float((uint32_t)h << 16) : __half2float(__ushort_as_half(h));
}

// The epilogue formula of w8a8.h on one value: t = sa*v; r = bias ? fma(sb, t, bias) : sb*t.
// Explicit _rn intrinsics so that the compiler cannot contract differently from the reference.
SM90_DEV float sm90_epi_value(const sm90_args &a, float v, float sa, int n) {
  float sb = __ldg(a.sb + (a.sb_per_channel ? n : 0));  // read-only inputs: __ldg (see sm90_epi_direct)
  float t = __fmul_rn(sa, v);
  return a.bias ? __fmaf_rn(sb, t, sm90_ldg_bias(a, n)) : __fmul_rn(sb, t);
}

SM90_DEV void sm90_store1(const sm90_args &a, int m, int n, float r) {
  long long off = (long long)m * a.ldo + n;
  if (a.out_kind == SM90_OUT_BF16)
    ((__nv_bfloat16 *)a.out)[off] = __float2bfloat16_rn(r);
  else if (a.out_kind == SM90_OUT_FP16)
    ((__half *)a.out)[off] = __float2half_rn(r);
  else
    ((float *)a.out)[off] = r;
}
// Epilogue of one element at (m, n) of the output, from its raw accumulator.
template <bool INT8>
SM90_DEV void sm90_epi_elem(const sm90_args &a, int m, int n, uint32_t raw) {
  float v;
  if constexpr (INT8) {
    int32_t acc = (int32_t)raw;
    // the zero-point correction in int32 with wrap-around (as the reference), then one rounding
    if (a.azp_mode != 0) {
      uint32_t zp = a.azp_mode == 1 ? 1u : (uint32_t)__ldcg(a.azp + (a.azp_mode == 3 ? m : 0));
      acc = (int32_t)((uint32_t)acc - zp * (uint32_t)__ldg(a.azp_adj + n));
    }
    v = __int2float_rn(acc);
  } else {
    v = __uint_as_float(raw);
  }
  sm90_store1(a, m, n, sm90_epi_value(a, v, __ldcg(a.sa + (a.sa_per_token ? m : 0)), n));
}

// Two adjacent outputs (m, n), (m, n + 1); `two` says whether n + 1 exists. One 4-byte (bf16,
// fp16) or 8-byte (fp32) store where out and ldo allow (a.pair_store), else element by element.
SM90_DEV void sm90_store2(const sm90_args &a, int m, int n, float r0, float r1, bool two) {
  // Few branches on purpose: this is unrolled 2 x BN/8 times per kernel, and a branchy
  // version made ptxas take ~10 minutes for the file.
  const long long off = (long long)m * a.ldo + n;
  const bool pair = two && a.pair_store;
  if (a.out_kind == SM90_OUT_FP32) {
    float *o = (float *)a.out + off;
    if (pair) {
      *(float2 *)o = make_float2(r0, r1);
    } else {
      o[0] = r0;
      if (two) o[1] = r1;
    }
  } else {
    const bool bf = a.out_kind == SM90_OUT_BF16;
    const uint16_t h0 = bf ? __bfloat16_as_ushort(__float2bfloat16_rn(r0)) : __half_as_ushort(__float2half_rn(r0));
    const uint16_t h1 = bf ? __bfloat16_as_ushort(__float2bfloat16_rn(r1)) : __half_as_ushort(__float2half_rn(r1));
    uint16_t *o = (uint16_t *)a.out + off;
    if (pair) {
      *(uint32_t *)o = (uint32_t)h0 | ((uint32_t)h1 << 16);
    } else {
      o[0] = h0;
      if (two) o[1] = h1;
    }
  }
}


// The raw accumulator -> the value the epilogue scales (int8: the zero-point correction in int32
// with wrap-around, as the reference, then one rounding to float).
template <bool INT8>
SM90_DEV float sm90_acc_value(const sm90_args &a, uint32_t raw, int32_t zp, int32_t adj) {
  if constexpr (INT8) {
    int32_t acc = (int32_t)raw;
    if (a.azp_mode != 0) acc = (int32_t)((uint32_t)acc - (uint32_t)zp * (uint32_t)adj);
    return __int2float_rn(acc);
  } else {
    return __uint_as_float(raw);
  }
}

// The pieces both epilogues below share (the same formula, the same rounding: the same bits).
// Per-token vectors through L2 only (__ldcg): with ready flags they may arrive while the kernel
// runs, and a line of them cached in L1 by an earlier tile could be stale (L1 is not coherent).
typedef struct sm90_epi_rows {
  float sa0, sa1;    // scale_a of the fragment's rows m0 and m0 + 8
  int32_t zp0, zp1;  // their zero points (int8 per-tensor / per-token azp), else 1
} sm90_epi_rows;
// psa: the tile's scale_a slot (see sm90_args.prm) and lr0 the row's index in it, or psa = NULL.
template <bool INT8>
SM90_DEV sm90_epi_rows sm90_epi_load_rows(const sm90_args &a, int m0, const float *psa = nullptr, int lr0 = 0) {
  const int m1 = m0 + 8;
  const bool ok0 = m0 < a.M, ok1 = m1 < a.M;
  sm90_epi_rows r;
  if (psa) {
    r.sa0 = psa[lr0];
    r.sa1 = psa[lr0 + 8];
  } else {
    r.sa0 = __ldcg(a.sa + (a.sa_per_token ? (ok0 ? m0 : 0) : 0));
    r.sa1 = __ldcg(a.sa + (a.sa_per_token ? (ok1 ? m1 : 0) : 0));
  }
  r.zp0 = r.zp1 = 1;
  if (INT8 && a.azp_mode >= 2) {
    r.zp0 = __ldcg(a.azp + (a.azp_mode == 3 ? (ok0 ? m0 : 0) : 0));
    r.zp1 = __ldcg(a.azp + (a.azp_mode == 3 ? (ok1 ? m1 : 0) : 0));
  }
  return r;
}

// Column parameters (scale_b, bias, azp_adj) of JB <= 8 column groups whose first column pair
// starts at n (group jj at n + 8 jj), all loaded before any arithmetic or store: loaded inside the
// store loop, they cannot move above an earlier store (out might alias them, as far as the compiler
// knows), and each group waited a full L2 round trip (ncu: 16-25% of the consumers' stall samples at
// 8b-qkv M = 8192, with the tensor pipe idle). __ldg: they are read-only inputs (validation keeps out
// from overlapping them), which also lets the compiler batch them.
typedef struct sm90_epi_cols {
  float sbA[8], sbB[8], bA[8], bB[8];
  int32_t adjA[8], adjB[8];
} sm90_epi_cols;
// psb: the tile's scale_b slot and lc the column n's index in it, or psb = NULL.
template <bool INT8, int JB>
SM90_DEV void sm90_epi_load_cols(const sm90_args &a, int n, sm90_epi_cols &c, const float *psb = nullptr, int lc = 0) {
#pragma unroll
  for (int jj = 0; jj < JB; jj++) {
    const int nj = n + 8 * jj;
    const bool inb = nj < a.N, two = nj + 1 < a.N;
    const int nA = inb ? nj : 0, nB = two ? nj + 1 : nA;
    if (psb) {
      c.sbA[jj] = psb[lc + 8 * jj];
      c.sbB[jj] = psb[lc + 8 * jj + 1];
    } else {
      c.sbA[jj] = __ldg(a.sb + (a.sb_per_channel ? nA : 0));
      c.sbB[jj] = __ldg(a.sb + (a.sb_per_channel ? nB : 0));
    }
    c.adjA[jj] = c.adjB[jj] = 0;
    if (INT8 && a.azp_mode != 0) {
      c.adjA[jj] = __ldg(a.azp_adj + nA);
      c.adjB[jj] = __ldg(a.azp_adj + nB);
    }
    c.bA[jj] = c.bB[jj] = 0.0f;
    if (a.bias) {
      c.bA[jj] = sm90_ldg_bias(a, nA);
      c.bB[jj] = sm90_ldg_bias(a, nB);
    }
  }
}

// The four outputs of column group jj of a batch from its accumulators q[0..3] (rows m0, m0 + 8 x
// the column pair): t = sa*v; r = bias ? fma(sb, t, bias) : sb*t (w8a8.h), the _rn intrinsics as
// sm90_epi_value. r[0], r[1]: row m0; r[2], r[3]: row m0 + 8.
template <bool INT8, typename acc_t>
SM90_DEV void sm90_epi_group(const sm90_args &a, const acc_t *q, const sm90_epi_rows &rw, const sm90_epi_cols &c,
                             int jj, float (&r)[4]) {
  const float v00 = sm90_acc_value<INT8>(a, sm90_bits(q[0]), rw.zp0, c.adjA[jj]);
  const float v01 = sm90_acc_value<INT8>(a, sm90_bits(q[1]), rw.zp0, c.adjB[jj]);
  const float v10 = sm90_acc_value<INT8>(a, sm90_bits(q[2]), rw.zp1, c.adjA[jj]);
  const float v11 = sm90_acc_value<INT8>(a, sm90_bits(q[3]), rw.zp1, c.adjB[jj]);
  const float t00 = __fmul_rn(rw.sa0, v00), t01 = __fmul_rn(rw.sa0, v01);
  const float t10 = __fmul_rn(rw.sa1, v10), t11 = __fmul_rn(rw.sa1, v11);
  if (a.bias) {
    r[0] = __fmaf_rn(c.sbA[jj], t00, c.bA[jj]), r[1] = __fmaf_rn(c.sbB[jj], t01, c.bB[jj]);
    r[2] = __fmaf_rn(c.sbA[jj], t10, c.bA[jj]), r[3] = __fmaf_rn(c.sbB[jj], t11, c.bB[jj]);
  } else {
    r[0] = __fmul_rn(c.sbA[jj], t00), r[1] = __fmul_rn(c.sbB[jj], t01);
    r[2] = __fmul_rn(c.sbA[jj], t10), r[3] = __fmul_rn(c.sbB[jj], t11);
  }
}

// Split-K reduction in quads (sm90_args.split_quad): the parameters of the four outputs (m, n..n+3),
// loaded beside the quad's DSMEM loads. Out-of-range m / n read index 0 (stored nowhere).
typedef struct sm90_quad {
  float sa;
  int32_t zp;  // int8 zero point of row m (1 without one, see sm90_epi_load_rows)
  float sb[4], bias[4];
  int32_t adj[4];
} sm90_quad;
template <bool INT8>
SM90_DEV void sm90_quad_load(const sm90_args &a, int m, int n, sm90_quad &p) {
  const int mm = a.sa_per_token && m < a.M ? m : 0;
  p.sa = __ldcg(a.sa + mm);
  p.zp = 1;
  if (INT8 && a.azp_mode >= 2) p.zp = __ldcg(a.azp + (a.azp_mode == 3 && m < a.M ? m : 0));
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const int nn = n + j < a.N ? n + j : 0;
    p.sb[j] = __ldg(a.sb + (a.sb_per_channel ? nn : 0));
    p.adj[j] = INT8 && a.azp_mode != 0 ? __ldg(a.azp_adj + nn) : 0;
    p.bias[j] = a.bias ? sm90_ldg_bias(a, nn) : 0.0f;
  }
}
// Makes the quad's parameters opaque values (an empty asm per value, no instruction): without it the
// compiler folded them (bias 0, adj 0 ...) into constants shared with the main loop, and ptxas then
// serialised the fp8 swap-AB kernels' wgmmas (ptxas warnings C7519 / C7520).
SM90_DEV void sm90_quad_fence(sm90_quad &p) {
  asm volatile("" : "+f"(p.sa), "+r"(p.zp));
#pragma unroll
  for (int j = 0; j < 4; j++) asm volatile("" : "+f"(p.sb[j]), "+f"(p.bias[j]), "+r"(p.adj[j]));
}
// The quad's four sums (raw bits) -> outputs, the formula and roundings of sm90_epi_value, stored
// as two pairs (n is a multiple of 4: pair stores stay aligned where a.pair_store allows them).
template <bool INT8>
SM90_DEV void sm90_quad_store(const sm90_args &a, int m, int n, const sm90_quad &p, const uint32_t (&raw)[4]) {
  if (m >= a.M || n >= a.N) return;
  float r[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const float t = __fmul_rn(p.sa, sm90_acc_value<INT8>(a, raw[j], p.zp, p.adj[j]));
    r[j] = a.bias ? __fmaf_rn(p.sb[j], t, p.bias[j]) : __fmul_rn(p.sb[j], t);
  }
  sm90_store2(a, m, n, r[0], r[1], n + 1 < a.N);
  if (n + 2 < a.N) sm90_store2(a, m, n + 2, r[2], r[3], n + 3 < a.N);
}

// The split-K reduction in quads (sm90_args.split_quad), after the cluster barrier. The partial tile
// has `lines` lines (tokens below M) of NL accumulators, STRIDE words apart; a line is 32 quads, one
// per lane of a warp. Line l goes to warp l / split % 8 of cluster rank l % split, so that every CTA
// of the cluster takes a share however few the lines (n8 has 8). Each quad: one 16-byte DSMEM load
// per cluster CTA, the sum in rank order, the epilogue formula of the element-wise path
// (sm90_epi_elem): the same bits. A lane's four columns are the same on every line of its warp, so
// their parameters (scale, bias, zero-point adjustment) are loaded once, and LU lines go at a time, all
// their DSMEM and row-parameter loads issued before the first sum (one line per trip cost ~7.8k cycles
// of epilogue at 70b-qkv-tp4 M = 192, h200-sm90-deep256-2026-11-30.txt).
// Where the kernel prefetches (EARLY), the parameters of the columns and of the warp's first T lines
// (every line at split >= 2: T = RED_ML / 16) are loaded by sm90_splitk_params between the release
// arrive of the cluster barrier (after the partial tile's stores) and its wait, so their latency hides
// under the wait (1.02-1.09x, h200-sm90-session13-2026-11-30.txt). Not before that arrive: a release
// arrive waits for the thread's outstanding loads (2-4% lost). Then the sums of every line, a release
// arrive (a relaxed one would not order the earlier DSMEM loads), and the output stores after it (a
// release arrive after them would wait for them to be performed).
// With ready flags (the fused all-gather) the rows' parameters load after the wait: only the producer
// waits for the flag that says a row and its scale have arrived, and a CTA without K-blocks (split >
// K-blocks, possible under a tuning table) reaches the arrive before its producer has seen it.
template <int T>
struct sm90_quad_rows {
  float sa[T];
  int32_t zp[T];  // as sm90_quad.zp
};
// A row's scale and zero point (index 0 past M: a valid address, the value unused).
template <bool INT8>
SM90_DEV void sm90_quad_row(const sm90_args &a, int m, float &sa, int32_t &zp) {
  const int mm = a.sa_per_token && m < a.M ? m : 0;
  sa = __ldcg(a.sa + mm);
  zp = INT8 && a.azp_mode >= 2 ? __ldcg(a.azp + (a.azp_mode == 3 && m < a.M ? m : 0)) : 1;
}
// Issues the loads of this lane's column parameters (p) and of the rows of the warp's first T lines
// (rw); nothing waits for them here (sm90_splitk_quads fences them after the barrier).
template <bool INT8, int T>
SM90_DEV void sm90_splitk_params(const sm90_args &a, int warp8, int lane, int rank, int split, int m_base, int n_base,
                                 sm90_quad &p, sm90_quad_rows<T> &rw) {
  const int first = warp8 * split + rank, step = 8 * split;
  sm90_quad_load<INT8>(a, m_base + first, n_base + lane * 4, p);
#pragma unroll
  for (int t = 0; t < T; t++) sm90_quad_row<INT8>(a, m_base + first + t * step, rw.sa[t], rw.zp[t]);
}
// The sums of LU lines from ml0 (step apart) into raw (their bits): the DSMEM loads of every line and
// rank first, then the sums in rank order. Lines at or past `lines` are left alone.
template <bool INT8, int STRIDE, int LU>
SM90_DEV void sm90_splitk_sums(uint32_t red0, int lines, int ml0, int step, int nl, int split, uint32_t (*raw)[4]) {
  typedef typename sm90_acc_type<INT8>::type acc_t;
  acc_t v[LU][4];
#pragma unroll
  for (int u = 0; u < LU; u++) v[u][0] = v[u][1] = v[u][2] = v[u][3] = 0;
#pragma unroll
  for (int r0 = 0; r0 < SM90_MAX_SPLIT; r0 += 4) {
    if (r0 >= split) break;
    uint4 part[LU][4];
#pragma unroll
    for (int u = 0; u < LU; u++)
#pragma unroll
      for (int r = 0; r < 4; r++)
        if (r0 + r < split && ml0 + u * step < lines)
          part[u][r] = sm90_ld_dsmem_v4(sm90_mapa(red0 + (uint32_t)((ml0 + u * step) * STRIDE + nl) * 4, r0 + r));
#pragma unroll
    for (int u = 0; u < LU; u++)
#pragma unroll
      for (int r = 0; r < 4; r++)
        if (r0 + r < split && ml0 + u * step < lines) {
          v[u][0] += sm90_from_bits<acc_t>(part[u][r].x), v[u][1] += sm90_from_bits<acc_t>(part[u][r].y);
          v[u][2] += sm90_from_bits<acc_t>(part[u][r].z), v[u][3] += sm90_from_bits<acc_t>(part[u][r].w);
        }
  }
#pragma unroll
  for (int u = 0; u < LU; u++)
#pragma unroll
    for (int j = 0; j < 4; j++) raw[u][j] = sm90_bits(v[u][j]);
}
// The outputs of line ml (its sums raw, its row's parameters sa / zp).
template <bool INT8>
SM90_DEV void sm90_splitk_store(const sm90_args &a, int ml, int nl, int m_base, int n_base, sm90_quad &p, float sa,
                                int32_t zp, const uint32_t (&raw)[4]) {
  p.sa = sa;
  p.zp = zp;
  sm90_quad_fence(p);
  sm90_quad_store<INT8>(a, m_base + ml, n_base + nl, p, raw);
}
// After the cluster barrier: p and rw from sm90_splitk_params (the same warp8, rank, split, bases).
// EARLY (the kernels that prefetch, T = every line at split >= 2): the sums of all T lines first, then
// this thread's release arrive on the cluster barrier that ends the reduction (every DSMEM load above
// has returned before it, which is what the other CTAs wait for before they overwrite or leave their
// partial tiles), then the output stores, which that arrive does not wait for (a release arrive after
// them waited for them to be performed); the caller then waits. Otherwise: each group of LU lines
// summed and stored in turn, and the caller's whole barrier after.
template <bool INT8, int NL, int STRIDE, int LU, int T, bool EARLY>
SM90_DEV void sm90_splitk_quads(const sm90_args &a, uint32_t red0, int lines, int warp8, int lane, int rank, int split,
                                int m_base, int n_base, sm90_quad &p, sm90_quad_rows<T> &rw) {
  static_assert(NL / 4 == 32, "a line of quads is one warp");
  static_assert(T % LU == 0, "whole groups of LU lines are prefetched");
  const int nl = lane * 4, step = 8 * split, first = warp8 * split + rank;
  sm90_quad_fence(p);
#pragma unroll
  for (int t = 0; t < T; t++) {  // opaque, as p's (fp8's zero points are the constant 1: no register each)
    asm volatile("" : "+f"(rw.sa[t]));
    if constexpr (INT8) asm volatile("" : "+r"(rw.zp[t]));
  }
  // Lines past the first T (split 1, or kernels that prefetch only LU lines): whole, their rows loaded here.
  for (int ml0 = first + T * step; ml0 < lines; ml0 += LU * step) {
    float sa[LU];
    int32_t zp[LU];
    uint32_t raw[LU][4];
#pragma unroll
    for (int u = 0; u < LU; u++) sm90_quad_row<INT8>(a, m_base + ml0 + u * step, sa[u], zp[u]);
    sm90_splitk_sums<INT8, STRIDE, LU>(red0, lines, ml0, step, nl, split, raw);
#pragma unroll
    for (int u = 0; u < LU; u++)
      if (ml0 + u * step < lines) sm90_splitk_store<INT8>(a, ml0 + u * step, nl, m_base, n_base, p, sa[u], zp[u], raw[u]);
  }
  if constexpr (EARLY) {
    uint32_t raw[T][4];
#pragma unroll
    for (int t0 = 0; t0 < T; t0 += LU)
      if (first + t0 * step < lines) sm90_splitk_sums<INT8, STRIDE, LU>(red0, lines, first + t0 * step, step, nl, split, raw + t0);
    __syncwarp();
    sm90_cluster_arrive();
#pragma unroll
    for (int t = 0; t < T; t++)
      if (first + t * step < lines)
        sm90_splitk_store<INT8>(a, first + t * step, nl, m_base, n_base, p, rw.sa[t], rw.zp[t], raw[t]);
  } else {
#pragma unroll
    for (int t0 = 0; t0 < T; t0 += LU) {
      if (first + t0 * step >= lines) break;
      uint32_t raw[LU][4];
      sm90_splitk_sums<INT8, STRIDE, LU>(red0, lines, first + t0 * step, step, nl, split, raw);
#pragma unroll
      for (int u = 0; u < LU; u++)
        if (first + (t0 + u) * step < lines)
          sm90_splitk_store<INT8>(a, first + (t0 + u) * step, nl, m_base, n_base, p, rw.sa[t0 + u], rw.zp[t0 + u],
                                  raw[u]);
    }
  }
}

// Lean swapped epilogue for the swapped tiles without split-K (the persistent *_swap_*_ps
// configurations): the general one in the kernel (quads through a 64-channel x CW-token buffer)
// executed ~2000 instructions per warp and tile on int8_swap_n128_ps (ncu source counters, 8b-qkv M =
// 128) where the plain tile's sm90_epi_lean executed ~410: a 64-bit address, bounds checks, both
// 16-bit conversions under predicates and generic-address staging per output row. Here, as
// sm90_epi_lean: the output type is a template parameter, the caller has checked that the warpgroup's
// 64 channels are below N, that out / ldo allow 4-element stores and that there is no int8 zero point;
// bias is an FFMA addend, -0.0 without one (the same bits as fmul); the channel parameters are loaded
// once per tile and the token scales (esa: token tid / 16 + 8 j of the tile) by the caller. The buffer
// holds CW token lines of 64 channels, SM90_SWL_STRIDE (68) words apart: the fragment's stores (8 channels x
// 4 token pairs per warp) hit 32 different banks, and a token line's 16 quads are one 16-byte load each
// (16-byte aligned lines). Per row of 4 outputs: 1 LDS.128, 4 I2F (int8), 4 FMUL, 4 FFMA, 2 F2FP (16-bit),
// one 8- or 16-byte store, and a token compare (the M tail).
// stg: this warpgroup's buffer (shared-window address); m_base the tile's first token, n0 the
// warpgroup's first channel. CW: token lines staged per chunk (the buffer's width); OUT: SM90_OUT_*.
template <bool INT8, int BN, int CW, int OUT, typename acc_t>
SM90_DEV void sm90_epi_swap_lean(const sm90_args &a, const acc_t *acc, uint32_t stg, int tid, int bar, int m_base,
                                 int n0, const float (&esa)[BN / 8]) {
  constexpr bool BF16 = OUT == SM90_OUT_BF16, F32 = OUT == SM90_OUT_FP32;
  constexpr int LS = SM90_SWL_STRIDE;
  static_assert(CW % 8 == 0 && BN % CW == 0, "whole chunks of 8-token groups");
  const int warp = tid / 32, lane = tid % 32;
  const int r0 = warp * 16 + lane / 4, c0 = 2 * (lane % 4);  // fragment channel / token
  const int eq = tid % 16, t0 = tid / 16;                     // the thread's quad of channels, first token
  float sb[4], bs[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const int n = n0 + 4 * eq + j;
    sb[j] = __ldg(a.sb + (a.sb_per_channel ? n : 0));
    bs[j] = a.bias ? sm90_ldg_bias(a, n) : -0.0f;
    asm volatile("" : "+f"(sb[j]), "+f"(bs[j]));  // opaque (see sm90_quad_fence)
  }
  constexpr int ESZ = F32 ? 4 : 2;
  char *o = (char *)a.out + ((long long)(m_base + t0) * a.ldo + n0 + 4 * eq) * ESZ;
  const long long step8 = 8 * a.ldo * ESZ;  // bytes from token m to m + 8
#pragma unroll
  for (int ch = 0; ch < BN / CW; ch++) {
#pragma unroll
    for (int ii = 0; ii < CW / 2; ii++) {
      const int i = ch * (CW / 2) + ii;
      const int row = r0 + 8 * ((ii / 2) % 2), col = 8 * (ii / 4) + c0 + ii % 2;
      sm90_st_smem(stg + (uint32_t)(col * LS + row) * 4u, sm90_bits(acc[i]));
    }
    sm90_named_bar(bar, 128);
#pragma unroll
    for (int k = 0; k < CW / 8; k++) {
      const int c = t0 + 8 * k, j = ch * (CW / 8) + k;
      const uint4 q = sm90_ld_smem_v4(stg + (uint32_t)(c * LS + 4 * eq) * 4u);
      const uint32_t raw[4] = {q.x, q.y, q.z, q.w};
      float r[4];
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const float v = INT8 ? __int2float_rn((int32_t)raw[e]) : __uint_as_float(raw[e]);
        r[e] = __fmaf_rn(sb[e], __fmul_rn(esa[j], v), bs[e]);
      }
      if (m_base + t0 + 8 * j < a.M) {
        char *d = o + j * step8;
        if constexpr (F32) {
          *(float4 *)d = make_float4(r[0], r[1], r[2], r[3]);
        } else {
          uint32_t h[4];
#pragma unroll
          for (int e = 0; e < 4; e++)
            h[e] = BF16 ? __bfloat16_as_ushort(__float2bfloat16_rn(r[e])) : __half_as_ushort(__float2half_rn(r[e]));
          *(uint2 *)d = make_uint2(h[0] | (h[1] << 16), h[2] | (h[3] << 16));
        }
      }
    }
    sm90_named_bar(bar, 128);
  }
}

// Direct epilogue from the wgmma accumulator fragment (not swapped: rows are tokens). A consumer
// thread holds, for column group j (8 columns), the pairs (m0, n..n+1) = acc[4j], acc[4j+1] and
// (m0 + 8, n..n+1) = acc[4j+2], acc[4j+3], with n = n0 + 8j. Each thread reads its two rows' scale and
// zero point once, the column parameters in batches of JB groups, and stores pairs (one element per
// thread through shared memory, its scales re-read per element, cost ~18 us per 128 x 256 tile at
// M = 8192, h200-sm90-2026-11-29.md).
// psa / psb: the tile's scale slots (NULL: global memory), lr0 / lc0: m0's and n0's index in them.
template <bool INT8, int NACC, typename acc_t>
SM90_DEV void sm90_epi_direct(const sm90_args &a, const acc_t *acc, int m0, int n0, const float *psa = nullptr,
                              const float *psb = nullptr, int lr0 = 0, int lc0 = 0) {
  const int m1 = m0 + 8;
  const bool ok0 = m0 < a.M, ok1 = m1 < a.M;
  const sm90_epi_rows rw = sm90_epi_load_rows<INT8>(a, m0, psa, lr0);
  constexpr int J = NACC / 4;
  // batches of 8 column groups (4 on the 128 x 160 tile: J = 20; a batch must not run past J)
  constexpr int JB = J <= 8 ? J : J % 8 == 0 ? 8 : 4;
  static_assert(J % JB == 0, "direct epilogue: whole batches of column groups");
#pragma unroll
  for (int j0 = 0; j0 < J; j0 += JB) {
    sm90_epi_cols c;
    sm90_epi_load_cols<INT8, JB>(a, n0 + 8 * j0, c, psb, lc0 + 8 * j0);
#pragma unroll
    for (int jj = 0; jj < JB; jj++) {
      const int j = j0 + jj;
      const int n = n0 + 8 * j;
      const bool inb = n < a.N, two = n + 1 < a.N;
      float r[4];
      sm90_epi_group<INT8>(a, acc + 4 * j, rw, c, jj, r);
      if (ok0 && inb) sm90_store2(a, m0, n, r[0], r[1], two);
      if (ok1 && inb) sm90_store2(a, m1, n, r[2], r[3], two);
    }
  }
}

// The staged epilogues' buffer protocol (sm90_epi_staged, sm90_epi_lean): each consumer warpgroup
// has two 8 KB buffers, chunk q of a call in buffer q % 2. Before writing one, the TMA store that
// last read it must be done: two chunks ago normally; but with an odd number of chunks per call
// (BN = 64: one; BN = 192: three) the previous call's last chunk used this chunk 0's buffer, so nothing may still
// read it (wait_read<1> would let that store race the writes).
template <int NCHUNK>
SM90_DEV void sm90_epi_chunk_acquire(int tid, int bar, int q) {
  if (tid == 0) {
    if (NCHUNK % 2 == 1 && q == 0)
      sm90_bulk_wait_read<0>();
    else
      sm90_bulk_wait_read<1>();
  }
  sm90_named_bar(bar, 128);
}
// The chunk is written: make it visible to the async proxy, then one thread stores the 64 x 64 box
// at (x = column, y = row) and commits it.
SM90_DEV void sm90_epi_chunk_release(const CUtensorMap *tmap_o, uint32_t buf, int x, int y, int tid, int bar) {
  sm90_fence_proxy_async_smem();
  sm90_named_bar(bar, 128);
  if (tid == 0) {
    sm90_tma_store_2d(tmap_o, buf, x, y);
    sm90_bulk_commit();
  }
}

// Staged epilogue for unswapped, unsplit tiles with 16-bit outputs: the same values as
// sm90_epi_direct (same formula, same rounding, same bits), but instead of 4-byte stores straight
// from the fragment (each warp store touched 8 rows x 16 bytes: half-filled 32-byte sectors, and
// the whole CTA waited for them while the tensor pipe idled), each consumer warpgroup writes its
// 64 rows x 64 columns at a time into a shared-memory buffer in TMA's 128-byte-swizzle layout
// (conflict-free: the 8 rows of a warp's store land in 8 different 16-byte units) and one thread
// sends it with a TMA store, which runs asynchronously while the next chunk is computed and the
// next tile's main loop starts. Two buffers per warpgroup (sm90_epi_chunk_acquire / _release).
// TMA clips the M and N tails. Evidence: h200-sm90-staged-ab-2026-11-29.txt (against the direct epilogue).
// psa / psb: the tile's scale slots (NULL: global memory); row0 is also the warpgroup's first row in
// psa, and psb starts at the tile's first column.
// bar: the calling warpgroup's named barrier (128 threads).
template <bool INT8, int NACC, typename acc_t>
SM90_DEV void sm90_epi_staged(const sm90_args &a, const acc_t *acc, const CUtensorMap *tmap_o, uint32_t bufs, int tid,
                              int bar, int row0, int m_base, int n0, const float *psa = nullptr,
                              const float *psb = nullptr) {
  const int r0 = tid / 32 * 16 + (tid % 32) / 4, c0 = 2 * (tid % 4);  // fragment row / column in the chunk
  const sm90_epi_rows rw = sm90_epi_load_rows<INT8>(a, m_base + r0, psa, row0 + r0);
  const bool bf = a.out_kind == SM90_OUT_BF16;
  constexpr int J = NACC / 4;       // column groups of 8
  static_assert(J % 8 == 0, "staged epilogue: chunks of 64 columns");
#pragma unroll
  for (int q = 0; q < J / 8; q++) {
    const uint32_t buf = bufs + (uint32_t)(q & 1) * 8192u;
    sm90_epi_cols c;
    sm90_epi_load_cols<INT8, 8>(a, n0 + 64 * q, c, psb, c0 + 64 * q);  // n0 includes this thread's c0
    sm90_epi_chunk_acquire<J / 8>(tid, bar, q);
#pragma unroll
    for (int jj = 0; jj < 8; jj++) {
      float r[4];
      sm90_epi_group<INT8>(a, acc + 4 * (8 * q + jj), rw, c, jj, r);
      uint32_t h[4];
#pragma unroll
      for (int e = 0; e < 4; e++)
        h[e] = bf ? __bfloat16_as_ushort(__float2bfloat16_rn(r[e])) : __half_as_ushort(__float2half_rn(r[e]));
      // row r (0..63) of the chunk, 16-byte unit jj of its 128 bytes, swizzled: unit jj ^ (r % 8)
      const int ra = r0, rb = r0 + 8;
      sm90_st_smem(buf + (uint32_t)(ra * 128 + ((jj ^ (ra & 7)) * 16) + c0 * 2), h[0] | (h[1] << 16));
      sm90_st_smem(buf + (uint32_t)(rb * 128 + ((jj ^ (rb & 7)) * 16) + c0 * 2), h[2] | (h[3] << 16));
    }
    sm90_epi_chunk_release(tmap_o, buf, n0 - c0 + 64 * q, m_base, tid, bar);
  }
}

// Lean staged epilogue: sm90_epi_staged's values (same formula, same roundings, same bits) with what
// the common case does not need taken out. The general one took 14-19% of a 128 x 256 tile, ~2300
// instructions per warp and tile, 18 per output, no hot spot (issue-bound;
// h200-sm90-ncusrc-epilogue-2026-11-30.txt, gain in h200-sm90-lean-ab-2026-11-30.txt). Each output paid for
// the general code's run-time cases: bounds checks and clamps per column, bias and no-bias and
// fp16 and bf16 computed under predicates, zero-point arithmetic, and generic-address loads of the
// scale slot. Here: the output type is a template parameter; scale_a / scale_b come from the slot
// through ld.shared (the producer warp already clamped the columns past N); no zero point (the
// caller routes int8 with one to sm90_epi_staged); bias is an FFMA addend that is -0.0 without a
// bias (x + -0.0 == x for every x, so fma(sb, t, -0.0) has fmul(sb, t)'s bits), its loads in one
// uniform branch per chunk; the swizzled store address is one XOR per column group. Per group of
// 4 outputs: 4 I2F (int8), 4 FMUL, 4 FFMA, 2 F2FP, 1 LOP3, 2 STS, 1 LDS.64.
// psa_s / psb_s: the slot's scale_a / scale_b (shared-window addresses); row0 the warpgroup's first
// row in the tile; n_tile0 the tile's first column.
//
// fp32 outputs (the tensor-parallel reduce-scatter's partials; 1.07x fp8, 1.12x int8 over sm90_epi_direct,
// h200x2-sm90-lean32-2026-11-30.txt): TMA's 128-byte swizzle spans 32 fp32 columns, so each 64-column group
// goes out as two chunks of 64 rows x 32 columns (8 KB, the same buffers), the pair of a fragment row one
// 8-byte store: the 8 rows of a warp store cover all 32 banks twice (256 bytes, the minimum of two
// wavefronts). The values are sm90_epi_direct's fp32 ones (the same formula, no rounding after it).
template <bool INT8, int NACC, int OUT, typename acc_t>
SM90_DEV void sm90_epi_lean(const sm90_args &a, const acc_t *acc, const CUtensorMap *tmap_o, uint32_t bufs, int tid,
                            int bar, int row0, int m_base, int n_tile0, uint32_t psa_s, uint32_t psb_s) {
  constexpr bool BF16 = OUT == SM90_OUT_BF16, F32 = OUT == SM90_OUT_FP32;
  const int r0 = tid / 32 * 16 + (tid % 32) / 4, c0 = 2 * (tid % 4);  // fragment row / column in the chunk
  const float sa0 = sm90_ld_smem_f32(psa_s + 4u * (uint32_t)(row0 + r0));
  const float sa1 = sm90_ld_smem_f32(psa_s + 4u * (uint32_t)(row0 + r0 + 8));
  if constexpr (F32) {
    // rows r0 and r0 + 8 share r0 % 8; c0 * 4 (0, 8, 16, 24) holds bits 3..4, r0 * 128 none below 7:
    // 16-byte unit (c0 * 4 / 16 + 2 jl) ^ (r0 % 8) of row r0 is xr ^ (jl << 5)
    const uint32_t xr = (uint32_t)(r0 * 128 + c0 * 4) ^ ((uint32_t)(r0 & 7) << 4);
    constexpr int J = NACC / 4;  // column groups of 8
    static_assert(J % 4 == 0, "lean epilogue: chunks of 64 columns (the caller stores the 128 x 160 tile's last 32 directly)");
#pragma unroll
    for (int q = 0; q < J / 8; q++) {
      float sbA[8], sbB[8], bA[8], bB[8];
#pragma unroll
      for (int jj = 0; jj < 8; jj++) sm90_ld_smem_v2f32(psb_s + 4u * (uint32_t)(c0 + 64 * q + 8 * jj), sbA[jj], sbB[jj]);
      if (a.bias) {
        const float *bias = (const float *)a.bias;
#pragma unroll
        for (int jj = 0; jj < 8; jj++) {
          const int n = n_tile0 + c0 + 64 * q + 8 * jj;
          bA[jj] = __ldg(bias + min(n, a.N - 1));
          bB[jj] = __ldg(bias + min(n + 1, a.N - 1));
        }
      } else {
#pragma unroll
        for (int jj = 0; jj < 8; jj++) bA[jj] = bB[jj] = -0.0f;
      }
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int k = 2 * q + h;  // the call's chunk index: 2 (J / 8) chunks (even)
        const uint32_t buf = bufs + (uint32_t)(k & 1) * 8192u;
        sm90_epi_chunk_acquire<2 * (J / 8)>(tid, bar, k);
        const uint32_t base = buf + xr;
#pragma unroll
        for (int jl = 0; jl < 4; jl++) {
          const int jj = 4 * h + jl;
          const acc_t *g = acc + 4 * (8 * q + jj);
          float v[4];
#pragma unroll
          for (int e = 0; e < 4; e++)
            v[e] = INT8 ? __int2float_rn((int32_t)sm90_bits(g[e])) : __uint_as_float(sm90_bits(g[e]));
          const float r00 = __fmaf_rn(sbA[jj], __fmul_rn(sa0, v[0]), bA[jj]);
          const float r01 = __fmaf_rn(sbB[jj], __fmul_rn(sa0, v[1]), bB[jj]);
          const float r10 = __fmaf_rn(sbA[jj], __fmul_rn(sa1, v[2]), bA[jj]);
          const float r11 = __fmaf_rn(sbB[jj], __fmul_rn(sa1, v[3]), bB[jj]);
          const uint32_t ad = base ^ ((uint32_t)jl << 5);
          sm90_st_smem_v2f32(ad, r00, r01);
          sm90_st_smem_v2f32(ad + 1024u, r10, r11);  // row r0 + 8
        }
        sm90_epi_chunk_release(tmap_o, buf, n_tile0 + 64 * q + 32 * h, m_base, tid, bar);
      }
    }
    return;
  }
  // 16-bit outputs: rows r0 and r0 + 8 share r0 % 8, hence the swizzle; bits 4..6 of r0 * 128 + c0 * 2 are zero
  const uint32_t xr = (uint32_t)(r0 * 128 + c0 * 2) ^ ((uint32_t)(r0 & 7) << 4);
  constexpr int J = NACC / 4;  // column groups of 8
  static_assert(J % 4 == 0, "lean epilogue: chunks of 64 columns (the caller stores the 128 x 160 tile's last 32 directly)");
#pragma unroll
  for (int q = 0; q < J / 8; q++) {
    const uint32_t buf = bufs + (uint32_t)(q & 1) * 8192u;
    float sbA[8], sbB[8], bA[8], bB[8];
#pragma unroll
    for (int jj = 0; jj < 8; jj++) sm90_ld_smem_v2f32(psb_s + 4u * (uint32_t)(c0 + 64 * q + 8 * jj), sbA[jj], sbB[jj]);
    if (a.bias) {
      const unsigned short *bias = (const unsigned short *)a.bias;
#pragma unroll
      for (int jj = 0; jj < 8; jj++) {
        const int n = n_tile0 + c0 + 64 * q + 8 * jj;
        const unsigned short hA = __ldg(bias + min(n, a.N - 1)), hB = __ldg(bias + min(n + 1, a.N - 1));
        bA[jj] = BF16 ? __uint_as_float((uint32_t)hA << 16) : __half2float(__ushort_as_half(hA));
        bB[jj] = BF16 ? __uint_as_float((uint32_t)hB << 16) : __half2float(__ushort_as_half(hB));
      }
    } else {
#pragma unroll
      for (int jj = 0; jj < 8; jj++) bA[jj] = bB[jj] = -0.0f;
    }
    sm90_epi_chunk_acquire<J / 8>(tid, bar, q);
    const uint32_t base = buf + xr;
#pragma unroll
    for (int jj = 0; jj < 8; jj++) {
      const acc_t *g = acc + 4 * (8 * q + jj);
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; e++) v[e] = INT8 ? __int2float_rn((int32_t)sm90_bits(g[e])) : __uint_as_float(sm90_bits(g[e]));
      const float r00 = __fmaf_rn(sbA[jj], __fmul_rn(sa0, v[0]), bA[jj]);
      const float r01 = __fmaf_rn(sbB[jj], __fmul_rn(sa0, v[1]), bB[jj]);
      const float r10 = __fmaf_rn(sbA[jj], __fmul_rn(sa1, v[2]), bA[jj]);
      const float r11 = __fmaf_rn(sbB[jj], __fmul_rn(sa1, v[3]), bB[jj]);
      uint32_t h0, h1;
      if constexpr (BF16) {
        const __nv_bfloat162 p0 = __floats2bfloat162_rn(r00, r01), p1 = __floats2bfloat162_rn(r10, r11);
        h0 = *(const uint32_t *)&p0;
        h1 = *(const uint32_t *)&p1;
      } else {
        const __half2 p0 = __floats2half2_rn(r00, r01), p1 = __floats2half2_rn(r10, r11);
        h0 = *(const uint32_t *)&p0;
        h1 = *(const uint32_t *)&p1;
      }
      const uint32_t ad = base ^ ((uint32_t)jj << 4);  // row r0, 16-byte unit jj ^ (r0 % 8)
      sm90_st_smem(ad, h0);
      sm90_st_smem(ad + 1024u, h1);  // row r0 + 8
    }
    sm90_epi_chunk_release(tmap_o, buf, n_tile0 + 64 * q, m_base, tid, bar);
  }
}

// Tile t of the grouped order -> (tile_x, tile_y). Groups of a.group tiles (SM90_GROUP, fewer in ready
// launches) along X walk Y; inside a group X moves fastest, so the CTAs running at one time share a
// few X tiles and a band of Y tiles in L2.
SM90_DEV void sm90_tile_coords(const sm90_args &a, int t, int &tx, int &ty) {
#if defined(W8A8_SM90_CONST_GROUP)
  const int group = SM90_GROUP;
#else
  const int group = a.group;
#endif
  int per_group = group * a.tiles_y;
  int g = t / per_group;
  int first = g * group;
  int gsize = min(a.tiles_x - first, group);
  int local = t - g * per_group;
  tx = first + local % gsize;
  ty = local / gsize;
  if (a.rot_x) tx = (tx + a.rot_x) % a.tiles_x;
  if (a.rot_y) ty = (ty + a.rot_y) % a.tiles_y;
}

// Work item t -> tile. MC = 1: sm90_tile_coords. MC = 2: item t is a pair of X tiles (2p, 2p + 1) with
// one Y tile, in the same grouped order over pairs; crank picks the tile of the pair. A partner past
// the last X tile keeps tx = tiles_x (out of bounds: zeros in, nothing out; unswapped, no ready flags to wait on;
// swapped, the producer waits for its pair's token rows, as the partner does).
template <int MC>
SM90_DEV void sm90_item_coords(const sm90_args &a, int t, int crank, int &tx, int &ty) {
  if constexpr (MC == 1) {
    (void)crank;
    sm90_tile_coords(a, t, tx, ty);
  } else {
    const int pairs_x = (a.tiles_x + 1) / 2;
    const int per_group = SM90_GROUP * a.tiles_y;
    const int g = t / per_group;
    const int first = g * SM90_GROUP;
    const int gsize = min(pairs_x - first, SM90_GROUP);
    const int local = t - g * per_group;
    tx = 2 * (first + local % gsize) + crank;
    ty = local / gsize;
    if (tx < a.tiles_x && a.rot_x) tx = (tx + a.rot_x) % a.tiles_x;
    if (a.rot_y) ty = (ty + a.rot_y) % a.tiles_y;
  }
}

// Token tail (sm90_args.tail_n): whether the tile (tx, ty) is the partial token tile that loads its
// token rows in the tail's boxes. A tile wholly past the last token (the missing partner of an MC = 2
// pair) loads the whole box.
template <bool SWAP, int MC, int BN>
SM90_DEV bool sm90_tail_tile(const sm90_args &a, int tx, int ty) {
  if (a.tail_n == 0 || (SWAP && MC != 1)) return false;
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
// The fold (unswapped tail twins, a single partial token tile of 65..127 rows, no ready
// flags): tail_n = 1 and tail_rows = SM90_BM (which tail_plan's boxes never are: their rows are fewer
// than the box's), tmap_t a 3-D map of two 64-row blocks, rows [0, 64) and [M - 64, M), loaded by one
// box into the stage's 128 rows. Every row read is a row of A: no out-of-bounds fill and no short box
// (reading real rows was the fastest form of such a tile on every shape measured:
// h200-sm90-session16-2026-11-30.txt). Consumer warpgroup 1's 64 rows are then tokens
// M - 64 .. M - 1 (row r of the tile: token M - 128 + r); the tokens both warpgroups hold (M - 64 .. 63)
// are computed twice from the same bytes by the same instructions and stored twice with the same bits.
// Where the driver refuses that map (its strides overlap), the host falls back to two 2-D boxes of 64 rows
// at rows 0 and M - 64 (tail_n = 2, tail_rows = 64: no other tail of an unswapped 128-row tile has that
// form, their boxes being one, or eighths of the tile); the stage is the same.
// Unswapped kernels only: a swapped n144 / n160 twin may run one ordinary tail box of 128 rows too (the
// host's tail_is_fold asks for an unswapped tile); every caller here sits behind !SWAP.
SM90_DEV bool sm90_tail_fold(const sm90_args &a) {
  return a.tail_rows == SM90_BM || (a.tail_n == 2 && a.tail_rows == SM90_BM / 2);
}
// The first token of the 64 rows of consumer warpgroup cw (0 or 1) whose place in the tile the caller's
// row0 = tile row 0 + cw * 64 (+ an offset below 64) gives: row0 itself, or with the fold (FOLD kernels
// only; the others compile the caller's expression unchanged) M - 64 + the offset for warpgroup 1.
template <bool FOLD>
SM90_DEV int sm90_fold_row(const sm90_args &a, int row0, int cw) {
  if constexpr (FOLD)
    if (cw == 1 && sm90_tail_fold(a)) return a.M - 128 + row0 % 128;
  return row0;
}
// The first token row of token tile tx in the unswapped kernels that take the shift (SHIFT: no split-K, stream-K or
// pingpong; the others compile tx * SM90_BM unchanged): tx * SM90_BM, or rows_x - SM90_BM where a.shift_x is set
// and tile tx is the partial last one (a tile wholly past the last token, an MC = 2 pair's missing partner, keeps
// its rows: the epilogue's bound on M stores nothing of it).
template <bool SHIFT>
SM90_DEV int sm90_x0(const sm90_args &a, int tx) {
  const int r = tx * SM90_BM;
  if constexpr (SHIFT)
    if (a.shift_x && r < a.rows_x && r + SM90_BM > a.rows_x) return a.rows_x - SM90_BM;
  return r;
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
#ifdef W8A8_SM90_TAILX
  // experiment build only (sm90_gemm.cu prepare: the A map carries the one short box of a single token tile)
  if (FOLD && !SWAP && a.tail_n == 1 && a.rows_x <= SM90_BM) {  // (FOLD: the unswapped unsplit unicast twins)
    sm90_tma_load_2d(dst, map, full, k, row0);
    return;
  }
#endif
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

template <int BN, int STAGES, bool INT8, bool SWAP, bool PROMOTE, bool SPLITK, bool PP = false>
struct sm90_cfg {
  static const int X_BYTES = SM90_BM * SM90_BK;
  static const int Y_BYTES = BN * SM90_BK;
  static const int STAGE_BYTES = X_BYTES + Y_BYTES;
  // Epilogue staging. Split-K: the whole partial tile (see RED_* below). Otherwise: per consumer
  // warpgroup 64 rows x CW columns, padded.
  static const int CW = BN < 32 ? BN : BN % 32 == 0 ? 32 : 16;  // chunk width (16: the swapped n80 / n112 ...)
  // Split-K partial tile: RED_ML lines of RED_NL accumulators along n (the output's contiguous
  // dimension: X rows when swapped, Y columns otherwise), lines RED_NL + 4 words apart (16-byte
  // aligned quads; the publishing stores of a warp hit at most 2 ways per bank).
  static const int RED_NL = SWAP ? SM90_BM : BN;
  static const int RED_ML = SWAP ? BN : SM90_BM;
  static const int RED_STRIDE = RED_NL + 4;
  static const int STG_STRIDE = SWAP ? CW + 1 : CW + 8;
  // Swapped unsplit tiles: per consumer warpgroup one staging buffer, 64 channel lines of STG_STRIDE
  // words (the general epilogue) or CW token lines of SM90_SWL_STRIDE (the lean one, sm90_epi_swap_lean).
  static const int STG_WG_BYTES =
      ((64 * STG_STRIDE > CW * SM90_SWL_STRIDE ? 64 * STG_STRIDE : CW * SM90_SWL_STRIDE) * 4 + 15) / 16 * 16;
  // Unswapped unsplit tiles: the staged epilogue's buffers, 2 per consumer warpgroup of 64 rows x
  // 128 bytes (64 16-bit outputs), 1024-aligned (the TMA 128-byte swizzle period).
  static const int OUT_BUF_BYTES = 64 * 128;
  static const int RED_BYTES = SPLITK ? RED_ML * RED_STRIDE * 4
                               : SWAP ? 2 * STG_WG_BYTES
                                      : 2 * 2 * OUT_BUF_BYTES;
  static const int BAR_BYTES = 2 * STAGES * 8;
  // PRM: the tile has the epilogue's scale slot (sm90_args.prm; unswapped unsplit tiles): two barriers
  // (full, empty), then scale_b of the tile's BN columns and scale_a of its 128 rows.
  static const bool PRM = !SWAP && !SPLITK && !PP;
  static const int PRM_BYTES = PRM ? 16 + (BN + SM90_BM) * 4 : 0;
  // Pingpong: the mainloop-order barrier (same place as the scale slot's barriers, which PP lacks).
  static const int ORD_BYTES = PP ? 16 : 0;
  // +1024: the dynamic shared memory base is rounded up to the 1024-byte swizzle period.
  static const int SMEM_BYTES = STAGES * STAGE_BYTES + RED_BYTES + BAR_BYTES + PRM_BYTES + ORD_BYTES + 1024;
  static const int NACC = BN / 2;  // accumulator registers per consumer thread
  static_assert(SMEM_BYTES <= 232448, "sm_90 allows 227 KB of shared memory per CTA");
};

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
// (MC = 2) one on the same barrier of the other CTA of the cluster, whose producer also writes into
// this CTA's stage (its half of B) and so must know that this CTA has released it.
template <int MC>
SM90_DEV void sm90_release(uint32_t empty) {
  sm90_mbar_arrive(empty);
  if constexpr (MC == 2) sm90_mbar_arrive_cluster(sm90_mapa(empty, sm90_cluster_rank() ^ 1u));
}
// t's group has completed (the caller waited): release its stage and add it in.
template <int MC, int NACC>
SM90_DEV void sm90_fp8_retire(float (&t)[NACC], float *acc, uint32_t empty, int tid) {
#pragma unroll
  for (int i = 0; i < NACC; i++) sm90_fence_reg(t[i]);
  if (tid == 0) sm90_release<MC>(empty);
#pragma unroll
  for (int i = 0; i < NACC; i++) acc[i] += t[i];
}

// Template flags: BN the tile's width on wgmma's N side; STAGES the ring depth; INT8 int8 (else fp8);
// SWAP weights on X, tokens on Y (see the top); PROMOTE fp8 promotion per K-block; SPLITK split-K over a
// cluster; TAIL the token-tail boxes (sm90_args.tail_n) and the fold; SK stream-K (sm90_args.sk_ws);
// HDB the promoted halves alternate between two temporaries (see PROMOTE_HALF below).
// MINB: CTAs per SM the kernel is built for (1 for the big tiles; 2 for the small-M tiles, so that
// the hardware balances uneven work over twice as many slots). The register split between the
// producer and the consumers follows from it: 65536 / MINB registers per CTA.
// MC: 1, or 2 = a cluster of two CTAs on neighbouring X tiles (token rows) with the same Y tile
// (weights): each CTA loads its own X tile and HALF of the Y tile, multicast into both CTAs, so the
// Y tile crosses from L2 once per pair instead of twice (tmap_y's box is BN/2 rows then). Both CTAs
// walk the same pairs of tiles in lockstep; a partner past the last X tile runs on zeros (TMA fills
// out-of-bounds boxes) and stores nothing. Not with SPLITK. With SWAP (the *_swap_*_mc2 configurations:
// correct, no gain, not planned; h200-session20-2026-11-30.txt) X is the weights and Y the tokens:
// neighbouring weight tiles share the token tile; not with the token tail.
// PP: pingpong (slower or even against the cooperative tiles, h200-sm90-pingpong-2026-11-30.txt; no shipped
// configuration uses it). Each consumer warpgroup owns whole 128 x BN tiles,
// alternating (the CTA's tile j goes to warpgroup j % 2), and issues the wgmmas of both 64-row halves;
// the producer fills the ring in the same tile order as always. While one warpgroup runs its
// epilogue, the other's main loop keeps the tensor pipe busy: the per-tile timeline of the
// cooperative kernels (both warpgroups in the epilogue at once, the pipe idle) put the epilogue at
// 14-19% of a tile. The mainloops are ordered by the mbarrier `pord` (see there): warpgroup
// (j + 1) % 2 starts tile j + 1 once warpgroup j % 2 has waited for all of tile j's stages. Accumulators
// 2 x BN / 2 per thread, so fast accumulation only (int8, fp8 without promotion); no scale slot (the
// epilogue's latency hides under the other warpgroup's main loop), no multicast, no split-K, no swap.
template <int BN, int STAGES, bool INT8, bool SWAP, bool PROMOTE, bool SPLITK, int MINB, int MC = 1, bool PP = false,
          bool TAIL = false, bool SK = false, bool HDB = false>
__global__ void __launch_bounds__(SM90_THREADS, MINB)
    sm90_gemm_kernel(const __grid_constant__ CUtensorMap tmap_x, const __grid_constant__ CUtensorMap tmap_y,
                     const __grid_constant__ CUtensorMap tmap_o, const sm90_args a,
                     const __grid_constant__ CUtensorMap tmap_t) {
#if SM90_ENABLED
  typedef sm90_cfg<BN, STAGES, INT8, SWAP, PROMOTE, SPLITK, PP> C;
  const int SPLIT = SPLITK ? a.split : 1;
  typedef typename sm90_acc_type<INT8>::type acc_t;
  // Double-buffered promotion where three accumulator sets fit the consumers' registers
  // (232 at 1 CTA/SM, 104 at 2).
  constexpr bool PROMOTE_DB = PROMOTE && (MINB == 1 ? C::NACC <= 64 : C::NACC <= 16);
  // The 128 x 256 fp8 tile with promotion: 128 accumulators + a 128-register temporary do not fit, so
  // each K-block is promoted in two halves of 128 columns through one 64-register temporary (see the
  // loop below); the 128 x 192 tile likewise, 96 + 48. Also the swapped n160 without split-K
  // (fp8_swap_n160_ps: halves of 80 tokens, wgmma m64n80, the Y half at 80 rows = 10 swizzle periods;
  // 80 + 40 registers) and the unswapped 128 x 160 (halves of 80 columns; fp8_128x160_promote_hdb).
  constexpr bool PROMOTE_HALF = PROMOTE && !PROMOTE_DB && MINB == 1 && !SPLITK &&
                                (C::NACC == 80 || ((C::NACC == 128 || C::NACC == 96) && !SWAP));
  static_assert(!PROMOTE || PROMOTE_DB || PROMOTE_HALF || C::NACC <= 64, "fp8 promotion: no register plan");
  // HDB: the halves' temporaries alternate, two of NACC / 2 registers beside the accumulators (96 + 2 x 48
  // on the 128 x 192 tile; 128 + 2 x 64 would not fit 232). 1.04-1.08x on the 192 rule's shapes
  // (h200-session21-2026-12-01.txt): the fp8 tiles of the 192 and 160 rules.
  static_assert(!HDB || (PROMOTE_HALF && !SWAP && C::NACC <= 96), "HDB: the 128 x 192 promoted tile only");
  static_assert(BN % 16 == 0 || BN == 8 || BN == 24, "wgmma N");
  static_assert(SPLITK || !SWAP || BN % C::CW == 0, "the swapped epilogue stages whole chunks of CW columns");
  static_assert(!(INT8 && PROMOTE), "int8 accumulates exactly; nothing to promote");
  static_assert(STAGES >= 2, "pipeline depth");
  // Multicast also takes the swapped unsplit tiles (the TOKEN tile over two neighbouring weight tiles, as
  // cuBLASLt's 128x136..160 TNT kernels' 2x1 / 4x1 clusters), but not with the token tail, whose swapped
  // boxes load the whole Y tile in this CTA.
  static_assert(MC == 1 || (MC == 2 && !SPLITK && BN % 16 == 0 && (!SWAP || !TAIL)),
                "multicast: plain tiles, and swapped unsplit tiles without the token tail");
  static_assert(!PP || (MC == 1 && !SWAP && !SPLITK && !PROMOTE && MINB == 1 && BN % 128 == 0),
                "pingpong: plain unpromoted tiles of 128-column multiples, one CTA per SM");
  static_assert(!SK || (MC == 1 && !SWAP && !SPLITK && !PP && !TAIL && MINB == 1),
                "stream-K: plain tiles, one CTA per SM (every unit resident at once)");

  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  const uint32_t smem0 = sm90_smem_u32(smem);
  const uint32_t red0 = smem0 + STAGES * C::STAGE_BYTES;
  const uint32_t full0 = red0 + C::RED_BYTES;
  const uint32_t empty0 = full0 + STAGES * 8;
  // The scale slot (C::PRM): pfull completes when the slot holds the current tile's scales (32
  // arrivals, the lanes of producer warp 1), pempty when both consumer warpgroups are done with
  // them (256 arrivals, every consumer thread after its epilogue).
  const bool prm = C::PRM && a.prm;
  const uint32_t pfull = empty0 + STAGES * 8, pempty = pfull + 8;
  const float *psb = (const float *)(smem + (pempty + 8 - smem0));
  const float *psa = psb + BN;
  // Pingpong: `pord` completes one phase per tile, when the warpgroup that owns tile j has waited for
  // all of tile j's stages; the owner of tile j + 1 waits for that phase before its first stage. The
  // full barriers' parity then never aliases: a warpgroup skipping the other's KB stages could
  // otherwise wait on a stage whose previous use the producer has not even loaded yet (a parity two
  // phases ahead reads as complete). CUTLASS's pingpong orders its math warpgroups the same way.
  const uint32_t pord = empty0 + STAGES * 8;

  const int wg = threadIdx.x / 128;
  const int tid = threadIdx.x % 128;
  const int rank = SPLITK ? (int)sm90_cluster_rank() : 0;
  const int crank = MC == 2 ? (int)sm90_cluster_rank() : 0;  // multicast pair: which X tile of the pair
  // Work items: tiles, or (MC = 2) pairs of X tiles, walked by clusters of SPLIT or MC CTAs.
  const int tile_stride = gridDim.x / (SPLITK ? SPLIT : MC);
  const int items = MC == 2 ? ((a.tiles_x + 1) / 2) * a.tiles_y : a.tiles_x * a.tiles_y;
  const int item0 = blockIdx.x / (SPLITK ? SPLIT : MC);
  // This CTA's K range (split-K: the cluster's CTAs share a tile).
  const int kb_begin = (int)((long long)a.kblocks * rank / SPLIT);
  const int kb_end = (int)((long long)a.kblocks * (rank + 1) / SPLIT);

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
      // one arrive per consumer warpgroup (of both CTAs: MC = 2); pingpong: the one warpgroup that used it
      sm90_mbar_init(empty0 + 8 * s, PP ? 1 : 2 * MC);
    }
    if (C::PRM) {
      sm90_mbar_init(pfull, 32);
      sm90_mbar_init(pempty, 256);
    }
    if (PP) sm90_mbar_init(pord, 1);
    sm90_fence_mbar_init();
  }
  // MC = 2: the partner's barriers must be initialised before anything lands in or arrives on them.
  if constexpr (MC == 2)
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
    // Weights-constant hint (w8a8_set_weights_constant; never with MC = 2): the weight halves of
    // the first min(STAGES, K-blocks) stages of this CTA's first tile are loaded BEFORE
    // griddepcontrol.wait, i.e. while the previous kernel may still run; the token halves and
    // everything else after it. Each such stage's full barrier expects the whole stage as usual
    // (arrive_tx once, here), and the main loop below skips the empty-wait, the arrive and the
    // weight load for them (fresh barriers: the first pass would not have waited anyway).
    int npre = 0;
    if (tid == 0) {
      if (MC == 1 && !SK && a.weights_constant && item0 < items) {
        int tx, ty;
        sm90_item_coords<MC>(a, item0, crank, tx, ty);
        uint32_t pre_tx = C::STAGE_BYTES;
        if constexpr (TAIL)
          pre_tx = sm90_stage_tx<SWAP, BN>(a, C::STAGE_BYTES, sm90_tail_tile<SWAP, MC, BN>(a, tx, ty));
        npre = min(STAGES, kb_end - kb_begin);
        for (int j = 0; j < npre; j++) {
          const uint32_t full = full0 + 8 * j, dst = smem0 + j * C::STAGE_BYTES;
          sm90_mbar_arrive_tx(full, pre_tx);
          if constexpr (SWAP)  // weights are X
            sm90_tma_load_2d(dst, &tmap_x, full, (kb_begin + j) * SM90_BK, tx * SM90_BM);
          else  // weights are Y
            sm90_tma_load_2d(dst + C::X_BYTES, &tmap_y, full, (kb_begin + j) * SM90_BK, ty * BN);
        }
      }
      // Programmatic dependent launch: everything above (launch, barrier init, descriptor
      // prefetch, register split, the hinted weight loads) overlapped the previous kernel's
      // tail; nothing else in global memory is read before this.
      sm90_grid_dep_wait();
    }
    if constexpr (C::PRM) if (prm && tid / 32 == 1) {
      // Producer warp 1: the epilogue's scales, one tile ahead of the consumers' epilogues (a tile's
      // slot is filled as soon as both warpgroups are done with the previous tile's), so that the
      // epilogue reads shared memory instead of waiting for L2 round trips. Per-token scales of
      // rows that an all-gather delivers (ready flags) are read only once those rows are ready.
      float *wsb = (float *)psb, *wsa = (float *)psa;
      const int lane = tid % 32;
      unsigned pseen = 0;
      sm90_grid_dep_wait();  // the scales may be written by the previous kernel
      int pn = 0;
      // Stream-K: the slot follows the work items that run an epilogue (whole tiles and final splits:
      // sm90_sk_epi_walk, a few registers where walking every item did not fit the warp's 40), and
      // waits before it loads (no arrays held across the wait; the slot is still a tile ahead).
      int sk_hi = -1, sk_lo = 0, sk_dp = 0;
      if constexpr (SK) {
        const sm90_sk_plan skp = sm90_sk_make(items, a.kblocks, (int)gridDim.x);
        sm90_sk_epi_walk(&skp, (int)blockIdx.x, &sk_hi, &sk_lo, &sk_dp);
      }
      for (int t = item0; SK || t < items; t += tile_stride, pn++) {
        int tile = t;
        if constexpr (SK) {
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
        sm90_item_coords<MC>(a, tile, crank, tx, ty);
        if (a.ready && a.sa_per_token) {
          if (lane == 0) sm90_wait_rows(a, tx * SM90_BM, SM90_BM, pseen);
          __syncwarp();
        }
        if constexpr (SK) {
          sm90_mbar_wait(pempty, (pn & 1) ^ 1);
#pragma unroll
          for (int i = 0; i < BN / 32; i++) {
            const int n = ty * BN + 32 * i + lane;
            wsb[32 * i + lane] = __ldg(a.sb + (a.sb_per_channel && n < a.N ? n : 0));
          }
#pragma unroll
          for (int i = 0; i < SM90_BM / 32; i++) {
            const int m = tx * SM90_BM + 32 * i + lane;
            wsa[32 * i + lane] = __ldcg(a.sa + (a.sa_per_token && m < a.M ? m : 0));
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
            const int m = sm90_fold_row<TAIL && !SWAP && !SPLITK && MC == 1>(
                              a, sm90_x0<!SWAP && !SPLITK && !SK && !PP>(a, tx) + 32 * i, i / 2) + lane;
            va[i] = __ldcg(a.sa + (a.sa_per_token && m < a.M ? m : 0));
          }
          sm90_mbar_wait(pempty, (pn & 1) ^ 1);  // the consumers are done with the previous tile's
#pragma unroll
          for (int i = 0; i < BN / 32; i++) wsb[32 * i + lane] = vb[i];
#pragma unroll
          for (int i = 0; i < SM90_BM / 32; i++) wsa[32 * i + lane] = va[i];
        }
        sm90_mbar_arrive(pfull);  // release: the stores above are visible to whoever waits on it
      }
    }
    if constexpr (SK) {
      // Stream-K: the same static schedule as the consumers (sm90_sk_item_of), K-blocks [k0, k1) of
      // each work item into the ring without a break between items (no ready flags, no tail).
      if (tid == 0) {
        const sm90_sk_plan skp = sm90_sk_make(items, a.kblocks, (int)gridDim.x);
        sm90_sk_item it;
        for (int n = 0; sm90_sk_item_of(&skp, (int)blockIdx.x, n, &it); n++) {
          int tx, ty;
          sm90_tile_coords(a, it.tile, tx, ty);
          for (int kb = it.k0; kb < it.k1; kb++) {
            const uint32_t full = full0 + 8 * s, dst = smem0 + s * C::STAGE_BYTES;
            sm90_mbar_wait(empty0 + 8 * s, phase ^ 1);
            sm90_mbar_arrive_tx(full, C::STAGE_BYTES);
            sm90_tma_load_2d(dst, &tmap_x, full, kb * SM90_BK, tx * SM90_BM);
            sm90_tma_load_2d(dst + C::X_BYTES, &tmap_y, full, kb * SM90_BK, ty * BN);
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
        sm90_item_coords<MC>(a, t, crank, tx, ty);
        if (a.ready) sm90_wait_rows(a, SWAP ? ty * BN : tx * SM90_BM, SWAP ? BN : SM90_BM, seen);
        // TAIL kernels only (template): the token rows in the tail's boxes where this is the partial tile
        bool tail = false;
        uint32_t stage_tx = C::STAGE_BYTES;
        if constexpr (TAIL) {
          tail = sm90_tail_tile<SWAP, MC, BN>(a, tx, ty);
          stage_tx = sm90_stage_tx<SWAP, BN>(a, C::STAGE_BYTES, tail);
        }
        for (int kb = kb_begin; kb < kb_end; kb++) {
          const bool pre = t == item0 && kb - kb_begin < npre;  // weights already loading
          uint32_t full = full0 + 8 * s;
          if (!pre) {
            sm90_mbar_wait(empty0 + 8 * s, phase ^ 1);
            sm90_mbar_arrive_tx(full, stage_tx);
          }
          uint32_t dst = smem0 + s * C::STAGE_BYTES;
          if constexpr (TAIL) {
            if constexpr (SWAP) {  // X = weights, Y = tokens
              if (!pre) sm90_tma_load_2d(dst, &tmap_x, full, kb * SM90_BK, tx * SM90_BM);
              sm90_load_tokens<SWAP, false>(a, dst + C::X_BYTES, &tmap_y, &tmap_t, full, kb * SM90_BK, ty * BN, tail);
            } else {  // X = tokens, Y = weights
              sm90_load_tokens<SWAP, !SPLITK && MC == 1>(a, dst, &tmap_x, &tmap_t, full, kb * SM90_BK,
                                                         sm90_x0<!SPLITK && !SK && !PP>(a, tx), tail);
              if constexpr (MC == 2)  // this CTA's half of Y, into both CTAs (the partner sends the other)
                sm90_tma_load_2d_mc(dst + C::X_BYTES + crank * (BN / 2) * SM90_BK, &tmap_y, full, kb * SM90_BK,
                                    ty * BN + crank * (BN / 2), (uint16_t)0x3);
              else if (!pre)
                sm90_tma_load_2d(dst + C::X_BYTES, &tmap_y, full, kb * SM90_BK, ty * BN);
            }
          } else {
            if (!(SWAP && pre))
              sm90_tma_load_2d(dst, &tmap_x, full, kb * SM90_BK, sm90_x0<!SWAP && !SPLITK && !SK && !PP>(a, tx));
            if constexpr (MC == 2)  // this CTA's half of Y, into both CTAs (the partner sends the other)
              sm90_tma_load_2d_mc(dst + C::X_BYTES + crank * (BN / 2) * SM90_BK, &tmap_y, full, kb * SM90_BK,
                                  ty * BN + crank * (BN / 2), (uint16_t)0x3);
            else if (SWAP || !pre)
              sm90_tma_load_2d(dst + C::X_BYTES, &tmap_y, full, kb * SM90_BK, ty * BN);
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
    const int cw = wg - 1;  // consumer index: rows 64*cw .. 64*cw+63 of the CTA tile (pingpong: tiles j % 2 == cw)
    const int warp = tid / 32, lane = tid % 32;
    if constexpr (PP) {
      const int KB = kb_end - kb_begin;  // the same for every tile (no split-K)
      const int r0 = warp * 16 + lane / 4, c0 = 2 * (lane % 4);
      acc_t acc[2 * C::NACC];  // rows 0..63 of the tile, then rows 64..127
      // timeline (sm90_dev -T): each warpgroup's thread 0 stamps its own tiles j (disjoint entries)
      const bool stamp = SM90_TL && a.timeline && tid == 0 && (int)blockIdx.x < a.timeline_ctas;
      unsigned long long *tl = stamp ? a.timeline + (size_t)blockIdx.x * a.timeline_max * 4 : nullptr;
      int j = 0;               // the CTA's tile index: the producer loaded tile j's K-blocks at ring positions j*KB ..
      for (int t = item0; t < items; t += tile_stride, j++) {
        if ((j & 1) != cw) continue;
        int tx, ty;
        sm90_item_coords<MC>(a, t, crank, tx, ty);
#pragma unroll
        for (int i = 0; i < 2 * C::NACC; i++) acc[i] = 0;
        if (j > 0) sm90_mbar_wait(pord, (uint32_t)((j - 1) & 1));  // the owner of tile j - 1 has all its stages
        const bool stamp_t = stamp && j < a.timeline_max;
        const bool stamp_t_w = SM90_TL && a.timeline && warp == 0 && (int)blockIdx.x < a.timeline_ctas && j < a.timeline_max;
        if (stamp_t && j > 0) tl[4 * j] = clock64();
        int prev = -1;
        // ring position of tile j's first K-block: j * KB (the producer's order); then one per block
        const long long pos0 = (long long)j * KB;
        int s = (int)(pos0 % STAGES);
        uint32_t phase = (uint32_t)((pos0 / STAGES) & 1);
        // (a wait on a completed phase returns at once: the loop's is unchanged). The whole warp
        // waits, so that it reaches the .aligned wgmmas converged without a __syncwarp (see SM90_TL).
        if (stamp_t_w && KB > 0) {
          sm90_mbar_wait(full0 + 8 * s, phase);
          if (lane == 0) tl[4 * j + 1] = clock64();
        }
        for (int i = 0; i < KB; i++) {
          sm90_mbar_wait(full0 + 8 * s, phase);
          if (i == KB - 1 && tid == 0) sm90_mbar_arrive(pord);  // tile j's stages have all arrived
          const uint32_t st = smem0 + s * C::STAGE_BYTES;
          const uint64_t dx0 = sm90_desc_k128(st), dx1 = sm90_desc_k128(st + 64 * SM90_BK);
          const uint64_t dy = sm90_desc_k128(st + C::X_BYTES);
          sm90_wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < SM90_BK / 32; kk++) {
            if constexpr (INT8) {
              sm90_wgmma_s8<BN>(acc, dx0 + 2 * kk, dy + 2 * kk, 1);
              sm90_wgmma_s8<BN>(acc + C::NACC, dx1 + 2 * kk, dy + 2 * kk, 1);
            } else {
              sm90_wgmma_fp8<BN>(acc, dx0 + 2 * kk, dy + 2 * kk, 1);
              sm90_wgmma_fp8<BN>(acc + C::NACC, dx1 + 2 * kk, dy + 2 * kk, 1);
            }
          }
          sm90_wgmma_commit();
          // this K-block's wgmmas stay in flight; the previous block's stage goes back to the producer
          sm90_wgmma_wait<1>();
          if (prev >= 0 && tid == 0) sm90_mbar_arrive(empty0 + 8 * prev);
          prev = s;
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
        sm90_wgmma_wait<0>();
        if (prev >= 0 && tid == 0) sm90_mbar_arrive(empty0 + 8 * prev);
#pragma unroll
        for (int i = 0; i < 2 * C::NACC; i++) sm90_fence_reg(acc[i]);
        if (stamp_t) tl[4 * j + 2] = clock64();
        // the tile's two 64-row halves through this warpgroup's buffers and named barrier
#pragma unroll
        for (int h = 0; h < 2; h++) {
          if (a.tma_out == 1)  // (16-bit outputs; an fp32 map takes the direct epilogue here)
            sm90_epi_staged<INT8, C::NACC>(a, acc + h * C::NACC, &tmap_o, red0 + (uint32_t)cw * 2u * C::OUT_BUF_BYTES,
                                           tid, 1 + cw, h * 64, tx * SM90_BM + h * 64, ty * BN + c0);
          else
            sm90_epi_direct<INT8, C::NACC>(a, acc + h * C::NACC, tx * SM90_BM + h * 64 + r0, ty * BN + c0);
        }
        if (stamp_t) tl[4 * j + 3] = clock64();
      }
      if (a.tma_out && tid == 0) sm90_bulk_wait<0>();
    } else {
    int s = 0;
    uint32_t phase = 0;
    acc_t acc[C::NACC];
    int pn = 0;  // tiles done: the scale slot's phase
    int pe = 0;  // stream-K: epilogues done (the scale slot's phase there; pn counts work items)
    const bool stamp = SM90_TL && a.timeline && cw == 0 && tid == 0 && (int)blockIdx.x < a.timeline_ctas;
    unsigned long long *tl = stamp ? a.timeline + (size_t)blockIdx.x * a.timeline_max * 4 : nullptr;
    // Stream-K: work item pn of this CTA (sm90_sk_item_of) instead of tile t: its tile, K-blocks
    // [kb_lo, kb_hi) and role (0 a whole tile, 1 a tile's first split, 2 a middle one, 3 its last).
    for (int t = item0; SK || t < items; t += tile_stride, pn++) {
      int tile = t, kb_lo = kb_begin, kb_hi = kb_end, role = 0, slot = 0, even = 0;
      if constexpr (SK) {
        const sm90_sk_plan skp = sm90_sk_make(items, a.kblocks, (int)gridDim.x);  // (per item: see the scale slot's)
        sm90_sk_item it;
        if (!sm90_sk_item_of(&skp, (int)blockIdx.x, pn, &it)) break;
        tile = it.tile;
        kb_lo = it.k0;
        kb_hi = it.k1;
        role = it.role;
        even = skp.per_tile > 0 ? skp.per_tile : 0;
        slot = sm90_sk_slot(&skp, it.tile, it.k0);  // roles 1 and 2: where this split stores
      }
      (void)role, (void)slot, (void)even;
      int tx, ty;
      sm90_item_coords<MC>(a, tile, crank, tx, ty);
      const bool stamp_t = stamp && pn < a.timeline_max;
      const bool stamp_t_w = SM90_TL && a.timeline && cw == 0 && warp == 0 && (int)blockIdx.x < a.timeline_ctas && pn < a.timeline_max;
      if (stamp_t && pn > 0) tl[4 * pn] = clock64();
      // (a wait on a completed phase returns at once; a CTA with no K-block (split-K over fewer
      // K-blocks than CTAs) has no stage to wait for)
      // (the whole warp waits: see the pingpong loop's stamp)
      if (stamp_t_w && kb_hi > kb_lo) {
        sm90_mbar_wait(full0 + 8 * s, phase);
        if (lane == 0) tl[4 * pn + 1] = clock64();
      }
#pragma unroll
      for (int i = 0; i < C::NACC; i++) acc[i] = 0;

      int prev = -1;
      if constexpr (PROMOTE_DB) {
        // Two temporaries, alternating by K-block (sm90_fp8_issue above); the loop is unrolled
        // by two so that each temporary is a fixed set of registers.
        float ta[C::NACC], tb[C::NACC];
#pragma unroll
        for (int i = 0; i < C::NACC; i++) ta[i] = tb[i] = 0.0f;
        // Straight-line pairs (no branch between an issue and the wait that retires the other
        // temporary): block 0 -> ta; then (tb, retire ta), (ta, retire tb), ...
        const int n = kb_hi - kb_lo;
#define SM90_ISSUE(T)                                                                          \
  sm90_fp8_issue<BN>(T, full0 + 8 * s, phase, sm90_desc_k128(smem0 + s * C::STAGE_BYTES + cw * 64 * SM90_BK), \
                     sm90_desc_k128(smem0 + s * C::STAGE_BYTES + C::X_BYTES))
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
            sm90_fp8_retire<MC>(ta, (float *)acc, empty0 + 8 * prev, tid);
            SM90_ADVANCE();
            SM90_ISSUE(ta);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MC>(tb, (float *)acc, empty0 + 8 * prev, tid);
            SM90_ADVANCE();
          }
          if (j < n) {
            SM90_ISSUE(tb);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MC>(ta, (float *)acc, empty0 + 8 * prev, tid);
            SM90_ADVANCE();
            sm90_wgmma_wait<0>();
            sm90_fp8_retire<MC>(tb, (float *)acc, empty0 + 8 * prev, tid);
          } else {
            sm90_wgmma_wait<0>();
            sm90_fp8_retire<MC>(ta, (float *)acc, empty0 + 8 * prev, tid);
          }
        }
#undef SM90_ISSUE
#undef SM90_ADVANCE
        prev = -1;
      } else if constexpr (PROMOTE_HALF) {
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
        if constexpr (HDB) {
          // HDB (fp8_128x192_promote_hdb, fp8_128x160_promote_hdb): the two halves into two temporaries,
          // so that a warpgroup always has a half in flight while it adds the other: issue half 1 of block kb
          // (tb); wait for its half 0 (ta; wait_group 1), add it; issue half 0 of kb + 1 (ta); wait for kb's tb,
          // add it, free kb's stage. The plain halves wait for each half (wait_group 0) and rely on the OTHER
          // warpgroup to keep the tensor pipe busy meanwhile, which leaves fp8 ~13% below int8 at large M
          // (h200-torch-compare-2026-11-30-v18.md). The same sums in the same order (each half-block from
          // zero, added in K order): the same bits as fp8_128x192_promote.
          float ta[C::NACC / 2], tb[C::NACC / 2];
          const int n = kb_hi - kb_lo;
#define SM90_HALF_ISSUE(T, HH)                                                                                 \
  do {                                                                                                        \
    const uint64_t hdx = sm90_desc_k128(smem0 + s * C::STAGE_BYTES + cw * 64 * SM90_BK);                       \
    const uint64_t hdy = sm90_desc_k128(smem0 + s * C::STAGE_BYTES + C::X_BYTES + (HH) * (BN / 2) * SM90_BK);  \
    sm90_wgmma_fence();                                                                                       \
    _Pragma("unroll") for (int kk = 0; kk < SM90_BK / 32; kk++)                                               \
        sm90_wgmma_fp8<BN / 2>(T, hdx + 2 * kk, hdy + 2 * kk, kk > 0);                                         \
    sm90_wgmma_commit();                                                                                      \
  } while (0)
#define SM90_HALF_ADD(T, HH)                                                           \
  do {                                                                                \
    _Pragma("unroll") for (int i = 0; i < C::NACC / 2; i++) sm90_fence_reg(T[i]);     \
    _Pragma("unroll") for (int i = 0; i < C::NACC / 2; i++) acc[(HH) * (C::NACC / 2) + i] += T[i]; \
  } while (0)
#define SM90_HALF_ADVANCE() \
  do {                      \
    if (++s == STAGES) {    \
      s = 0;                \
      phase ^= 1;           \
    }                       \
  } while (0)
          // ptxas: C7514 (the wgmmas serialized) whenever ONE wait after the loop, on a
          // path every exit takes, retires a group in flight across the back edge; PROMOTE_DB compiles clean
          // because its parity tail is an if / else (two exits), not because of its unroll by two. An if /
          // else inside the loop got C7517 instead (a wait_group 0 injected at the back edge, where ta is
          // pending on one path and nothing on the other). Hence the peeled loop and a second, never-taken
          // exit below that is correct on its own: neither message, 168 registers, 0 spills, and the back
          // edge keeps ta in flight. (These are ptxas infos: -Werror does not catch them; grep a -Xptxas -v
          // build for C751.)
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
              if (tid == 0) sm90_release<MC>(empty0 + 8 * cur);
            }
            if (j + 1 == n) {
              SM90_HALF_ISSUE(tb, 1);
              sm90_wgmma_wait<1>();
              SM90_HALF_ADD(ta, 0);
              sm90_wgmma_wait<0>();
              SM90_HALF_ADD(tb, 1);
              if (tid == 0) sm90_release<MC>(empty0 + 8 * s);
              SM90_HALF_ADVANCE();
            } else {  // never taken (j + 1 == n here): a second exit for ptxas, correct on its own
              sm90_wgmma_wait<0>();
              SM90_HALF_ADD(ta, 0);
              SM90_HALF_ISSUE(tb, 1);
              sm90_wgmma_wait<0>();
              SM90_HALF_ADD(tb, 1);
              if (tid == 0) sm90_release<MC>(empty0 + 8 * s);
              SM90_HALF_ADVANCE();
            }
          }
#undef SM90_HALF_ISSUE
#undef SM90_HALF_ADD
#undef SM90_HALF_ADVANCE
        } else
        for (int kb = kb_lo; kb < kb_hi; kb++) {
          sm90_mbar_wait(full0 + 8 * s, phase);
          const uint64_t dx = sm90_desc_k128(smem0 + s * C::STAGE_BYTES + cw * 64 * SM90_BK);
          const uint32_t ys = smem0 + s * C::STAGE_BYTES + C::X_BYTES;
          float tmp[C::NACC / 2];
#pragma unroll
          for (int hh = 0; hh < 2; hh++) {
            const uint64_t dy = sm90_desc_k128(ys + hh * (BN / 2) * SM90_BK);
            sm90_wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < SM90_BK / 32; kk++) sm90_wgmma_fp8<BN / 2>(tmp, dx + 2 * kk, dy + 2 * kk, kk > 0);
            sm90_wgmma_commit();
            sm90_wgmma_wait<0>();
#pragma unroll
            for (int i = 0; i < C::NACC / 2; i++) sm90_fence_reg(tmp[i]);
            if (hh == 1 && tid == 0) sm90_release<MC>(empty0 + 8 * s);
#pragma unroll
            for (int i = 0; i < C::NACC / 2; i++) acc[hh * (C::NACC / 2) + i] += tmp[i];
          }
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      } else
      for (int kb = kb_lo; kb < kb_hi; kb++) {
        sm90_mbar_wait(full0 + 8 * s, phase);
        uint32_t xs = smem0 + s * C::STAGE_BYTES + cw * 64 * SM90_BK;
        uint32_t ys = smem0 + s * C::STAGE_BYTES + C::X_BYTES;
        uint64_t dx = sm90_desc_k128(xs), dy = sm90_desc_k128(ys);
        if constexpr (PROMOTE) {
          float tmp[C::NACC];
#pragma unroll
          for (int i = 0; i < C::NACC; i++) tmp[i] = 0.0f;
          sm90_wgmma_fence();
#pragma unroll
          for (int kk = 0; kk < SM90_BK / 32; kk++)
            sm90_wgmma_fp8<BN>(tmp, dx + 2 * kk, dy + 2 * kk, kk > 0);
          sm90_wgmma_commit();
          sm90_wgmma_wait<0>();
#pragma unroll
          for (int i = 0; i < C::NACC; i++) sm90_fence_reg(tmp[i]);
          if (tid == 0) sm90_release<MC>(empty0 + 8 * s);
#pragma unroll
          for (int i = 0; i < C::NACC; i++) acc[i] = (acc_t)((float)acc[i] + tmp[i]);
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
          if (prev >= 0 && tid == 0) sm90_release<MC>(empty0 + 8 * prev);
          prev = s;
        }
        if (++s == STAGES) {
          s = 0;
          phase ^= 1;
        }
      }
      if constexpr (!PROMOTE) {  // (PROMOTE_DB has retired everything already: prev == -1)
        sm90_wgmma_wait<0>();
        if (prev >= 0 && tid == 0) sm90_release<MC>(empty0 + 8 * prev);
      }
#pragma unroll
      for (int i = 0; i < C::NACC; i++) sm90_fence_reg(acc[i]);
      if (stamp_t) tl[4 * pn + 2] = clock64();

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
      if constexpr (SK) {
        if (role != 0) {
          acc_t *ws = (acc_t *)a.sk_ws + tid;
          unsigned int *lock = a.sk_locks + 2 * tile + cw;
          const bool wait = role == 3 || (role == 2 && !even);
          if (wait) {
            if (tid == 0)
              while (sm90_ld_acquire_u32(lock) != (unsigned)kb_lo) __nanosleep(32);
            __syncwarp();  // warp 0 converged again before the .aligned barrier
            sm90_named_bar(1 + cw, 128);
            if (even) {  // the final split: slots tile (even - 1) + 0 .. even - 2
              for (int j = 0; j < even - 1; j++) {
                const acc_t *p = ws + (size_t)(2 * (tile * (even - 1) + j) + cw) * C::NACC * 128;
#pragma unroll
                for (int i = 0; i < C::NACC; i++) acc[i] = acc[i] + __ldcg(p + i * 128);
              }
            } else {
              const acc_t *p = ws + (size_t)(2 * tile + cw) * C::NACC * 128;
#pragma unroll
              for (int i = 0; i < C::NACC; i++) acc[i] = __ldcg(p + i * 128) + acc[i];
            }
          }
          if (role != 3) {
            acc_t *wsp = ws + (size_t)(2 * slot + cw) * C::NACC * 128;
#pragma unroll
            for (int i = 0; i < C::NACC; i++) __stcg(wsp + i * 128, acc[i]);
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
        // Publish this CTA's partial tile (all 128 rows, lines along n: see sm90_cfg), then each
        // CTA of the cluster sums a 1/SPLIT share of it over the cluster's CTAs in rank order
        // (deterministic: int32 sums are exact in any order, fp32 ones are added in rank order).
        const int ct = cw * 128 + tid;
        const int m_base = SWAP ? ty * BN : tx * SM90_BM, n_base = SWAP ? tx * SM90_BM : ty * BN;
        // LU: lines at a time in the quads. 2 only for the int8 128 x 128 split tiles: fp8 spilled 60
        // bytes at 2, and the deep swapped tiles lost up to 7% at 4 but won at 1 (1.01-1.07x;
        // h200-sm90-deep256-2026-11-30.txt).
        constexpr int LU = !SWAP && MINB == 1 && INT8 ? 2 : 1;
        // QPRE: the prefetch and early arrive of sm90_splitk_quads (1.02-1.09x,
        // h200-sm90-session13-2026-11-30.txt), only where they cost no spill: the fp8 128 x 128 split tiles
        // spilled 28-44 bytes, the fp8 two-CTA swapped n64 16-28, the fp8 swapped n128 396 (and the timeline
        // build's int8 two-CTA n64 24). Those load after the barrier and end with the whole barrier (QT = LU
        // lines there, the rest per group).
        constexpr bool QPRE = (INT8 && !(SM90_TL && SWAP && MINB == 2 && BN == 64)) || (SWAP && (MINB == 1 || BN <= 32) && BN <= 96);
        constexpr int QT = !QPRE || C::RED_ML / 16 < LU ? LU : C::RED_ML / 16;  // a warp's lines at split 2
#pragma unroll
        for (int i = 0; i < C::NACC; i++) {
          int row = cw * 64 + r0 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + c0 + i % 2;
          int off = SWAP ? col * C::RED_STRIDE + row : row * C::RED_STRIDE + col;
          sm90_st_smem(red0 + (uint32_t)off * 4, sm90_bits(acc[i]));
        }
        // The quads' parameters: issued between the barrier's arrive and its wait (see sm90_splitk_quads),
        // after the partial tile's stores (before them, with the accumulators live, more kernels spilled).
        sm90_quad qp;
        sm90_quad_rows<QT> qrw;
        const bool qpre = QPRE && a.split_quad && !a.ready;  // (ready flags: see sm90_splitk_quads)
        sm90_cluster_arrive();  // release: the partial tile's stores (not the parameter loads after it)
        if (qpre) sm90_splitk_params<INT8, QT>(a, cw * 4 + warp, lane, rank, SPLIT, m_base, n_base, qp, qrw);
        sm90_cluster_wait();
        if (a.split_quad) {
          if (!qpre) sm90_splitk_params<INT8, QT>(a, cw * 4 + warp, lane, rank, SPLIT, m_base, n_base, qp, qrw);
          // lines = tokens in both layouts: those at or past M are summed by nobody
          const int lines = min(C::RED_ML, a.M - m_base);
          sm90_splitk_quads<INT8, C::RED_NL, C::RED_STRIDE, LU, QT, QPRE>(a, red0, lines, cw * 4 + warp, lane, rank,
                                                                          SPLIT, m_base, n_base, qp, qrw);
        } else {
          for (int idx = rank * 256 + ct; idx < SM90_BM * BN; idx += SPLIT * 256) {
            const int ml = idx / C::RED_NL, nl = idx % C::RED_NL;
            const uint32_t off = red0 + (uint32_t)(ml * C::RED_STRIDE + nl) * 4;
#if SM90_EPI_V2
            // All remote loads first, then the adds: one DSMEM round trip per element instead of
            // SPLIT dependent ones (the loads are ordered asm; an add between them would wait).
            uint32_t part[SM90_MAX_SPLIT];
#pragma unroll
            for (int r = 0; r < SM90_MAX_SPLIT; r++)
              if (r < SPLIT) part[r] = sm90_ld_dsmem_u32(sm90_mapa(off, r));
            acc_t v = 0;
#pragma unroll
            for (int r = 0; r < SM90_MAX_SPLIT; r++)
              if (r < SPLIT) v += sm90_from_bits<acc_t>(part[r]);
#else
            acc_t v = 0;
            for (int r = 0; r < SPLIT; r++) {
              if constexpr (INT8)
                v += sm90_ld_dsmem_s32(sm90_mapa(off, r));
              else
                v += sm90_ld_dsmem_f32(sm90_mapa(off, r));
            }
#endif
            const int m = m_base + ml, n = n_base + nl;
            if (m < a.M && n < a.N) sm90_epi_elem<INT8>(a, m, n, sm90_bits(v));
          }
        }
        // Nobody may overwrite or leave while others still read its partial tile (the prefetching
        // kernels' quads arrived before their output stores: see sm90_splitk_quads).
        __syncwarp();  // converged after the per-lane stores, before the .aligned barrier
        if (QPRE && a.split_quad)
          sm90_cluster_wait();
        else
          sm90_cluster_sync();
      } else if constexpr (!SWAP) {
        if (prm) sm90_mbar_wait(pfull, (SK ? pe : pn) & 1);  // acquire: the slot holds this tile's scales
        const float *qa = prm ? psa : nullptr, *qb = prm ? psb : nullptr;
        // tma_out: 1 a 16-bit output map, 2 an fp32 one (the lean epilogue only; else direct)
        // JC: column groups in whole 64-column chunks (the 128 x 160 tile: 16 of its 20; the general staged
        // path takes none of it, the lean one all but the last 32 columns, which go out through the direct path).
        // (The row expression stays written out at each call: hoisted into one local it changed the machine
        // code of 26 kernels, an unmeasured change.)
        constexpr int JC = C::NACC / 32 * 8;
        if (a.tma_out && (C::NACC / 4) % 4 == 0 && prm && a.lean && !(INT8 && a.azp_mode != 0)) {
          const uint32_t psb_s = pempty + 8, psa_s = psb_s + 4u * BN;  // the slot (see psb / psa above)
          if (a.out_kind == SM90_OUT_BF16)
            sm90_epi_lean<INT8, C::NACC, SM90_OUT_BF16>(a, acc, &tmap_o, red0 + (uint32_t)cw * 2u * C::OUT_BUF_BYTES,
                                                        tid, 1 + cw, cw * 64,
                                                        sm90_fold_row<TAIL && MC == 1>(a, sm90_x0<!SPLITK && !SK && !PP>(a, tx) + cw * 64, cw),
                                                        ty * BN, psa_s, psb_s);
          else if (a.out_kind == SM90_OUT_FP16)
            sm90_epi_lean<INT8, C::NACC, SM90_OUT_FP16>(a, acc, &tmap_o, red0 + (uint32_t)cw * 2u * C::OUT_BUF_BYTES,
                                                        tid, 1 + cw, cw * 64,
                                                        sm90_fold_row<TAIL && MC == 1>(a, sm90_x0<!SPLITK && !SK && !PP>(a, tx) + cw * 64, cw),
                                                        ty * BN, psa_s, psb_s);
          else
            sm90_epi_lean<INT8, C::NACC, SM90_OUT_FP32>(a, acc, &tmap_o, red0 + (uint32_t)cw * 2u * C::OUT_BUF_BYTES,
                                                        tid, 1 + cw, cw * 64,
                                                        sm90_fold_row<TAIL && MC == 1>(a, sm90_x0<!SPLITK && !SK && !PP>(a, tx) + cw * 64, cw),
                                                        ty * BN, psa_s, psb_s);
          if constexpr (JC < C::NACC / 4)  // (the same values and bits as the lean chunks')
            sm90_epi_direct<INT8, C::NACC - 4 * JC>(a, acc + 4 * JC, sm90_fold_row<TAIL && MC == 1>(a, sm90_x0<!SPLITK && !SK && !PP>(a, tx) + cw * 64, cw) + r0,
                                                    ty * BN + c0 + 8 * JC, qa, qb, cw * 64 + r0, c0 + 8 * JC);
        } else if (a.tma_out == 1 && JC == C::NACC / 4) {
          if constexpr (JC == C::NACC / 4)
            sm90_epi_staged<INT8, C::NACC>(a, acc, &tmap_o, red0 + (uint32_t)cw * 2u * C::OUT_BUF_BYTES, tid, 1 + cw,
                                           cw * 64, sm90_fold_row<TAIL && MC == 1>(a, sm90_x0<!SPLITK && !SK && !PP>(a, tx) + cw * 64, cw),
                                           ty * BN + c0, qa, qb);
        } else  // (this branch is unswapped and unsplit: the fold's kernels are the unicast tail twins)
          sm90_epi_direct<INT8, C::NACC>(a, acc, sm90_fold_row<TAIL && MC == 1>(a, sm90_x0<!SPLITK && !SK && !PP>(a, tx) + cw * 64, cw) + r0,
                                         ty * BN + c0, qa, qb, cw * 64 + r0, c0);
        if (prm) sm90_mbar_arrive(pempty);  // this thread has read the slot for the last time
        if constexpr (SK) pe++;
      } else {
        // Per consumer warpgroup, in chunks of CW tokens through a staging buffer (the swapped tiles
        // without split-K only: the persistent *_swap_*_ps configurations).
        // Lean path, sm90_epi_swap_lean, wherever it applies (no int8 zero point, 4-element stores, the
        // warpgroup's 64 channels below N; a.lean = 0 (the tests' hook) keeps the general path, for the
        // same-bits test): the general path below executes ~2000 instructions per warp and tile.
        // General path: each thread takes a quad of four consecutive output channels (weight rows
        // 4q..4q+3 of the warpgroup's 64, q = tid % 16, the same quad for the whole tile: its scales /
        // bias / zero-point terms load once) for every 8th token of the chunk, with the formula and pair
        // stores of the split-K quads (sm90_splitk_store: the bits of sm90_epi_elem). The rows' scales
        // load at once before the first chunk (esa / ezp below, token tid / 16 + 8 j of the tile): loaded
        // inside the row loop, one dependent global round trip per row cost 18.3 against 16.4 us at 8b-qkv
        // M = 128 (h200-session19-2026-11-30.txt).
        // The staging goes through the shared window (ld / st.shared): plain C++ accesses compile to
        // generic-address LD.E / ST.E here.
        const uint32_t stg = red0 + (uint32_t)cw * C::STG_WG_BYTES;
#define SM90_STG_ST(i, v) sm90_st_smem(stg + (uint32_t)(i) * 4, (v))
#define SM90_STG_LD(i) sm90_ld_smem(stg + (uint32_t)(i) * 4)
        static_assert(C::CW % 8 == 0, "a chunk is whole groups of 8 tokens");
        constexpr int ER = BN / 8;  // token rows per thread (every 8th token of the tile)
        float esa[ER];
        int32_t ezp[ER];
#pragma unroll
        for (int j = 0; j < ER; j++) sm90_quad_row<INT8>(a, ty * BN + tid / 16 + 8 * j, esa[j], ezp[j]);
        const int en0 = tx * SM90_BM + cw * 64;
        if (a.lean && a.quad_store && en0 + 64 <= a.N && !(INT8 && a.azp_mode != 0)) {
          if (a.out_kind == SM90_OUT_BF16)
            sm90_epi_swap_lean<INT8, BN, C::CW, SM90_OUT_BF16>(a, acc, stg, tid, 1 + cw, ty * BN, en0, esa);
          else if (a.out_kind == SM90_OUT_FP16)
            sm90_epi_swap_lean<INT8, BN, C::CW, SM90_OUT_FP16>(a, acc, stg, tid, 1 + cw, ty * BN, en0, esa);
          else
            sm90_epi_swap_lean<INT8, BN, C::CW, SM90_OUT_FP32>(a, acc, stg, tid, 1 + cw, ty * BN, en0, esa);
        } else {
          const int eq = tid % 16, en = en0 + 4 * eq;
          sm90_quad eqp;
          sm90_quad_load<INT8>(a, 0, en, eqp);
#pragma unroll
          for (int ch = 0; ch < BN / C::CW; ch++) {
#pragma unroll
            for (int ii = 0; ii < C::CW / 2; ii++) {
              int i = ch * (C::CW / 2) + ii;
              int row = r0 + 8 * ((ii / 2) % 2), col = 8 * (ii / 4) + c0 + ii % 2;
              SM90_STG_ST(row * C::STG_STRIDE + col, sm90_bits(acc[i]));
            }
            sm90_named_bar(1 + cw, 128);
#pragma unroll
            for (int k = 0; k < C::CW / 8; k++) {
              const int c = tid / 16 + 8 * k, j = ch * (C::CW / 8) + k;
              const int m = ty * BN + ch * C::CW + c;
              uint32_t raw[4];
#pragma unroll
              for (int q = 0; q < 4; q++) raw[q] = SM90_STG_LD((4 * eq + q) * C::STG_STRIDE + c);
              if (m < a.M && en < a.N)
                sm90_splitk_store<INT8>(a, 0, 0, m, en, eqp, esa[j], ezp[j], raw);  // (the quads' row-and-store step)
            }
            sm90_named_bar(1 + cw, 128);
          }
        }
#undef SM90_STG_ST
#undef SM90_STG_LD
      }
      if (stamp_t) tl[4 * pn + 3] = clock64();
    }
    // The staged epilogue's last TMA stores still read this CTA's shared memory: finish them.
    if constexpr (!SWAP && !SPLITK)
      if (a.tma_out && tid == 0) sm90_bulk_wait<0>();
    }  // !PP
  }
  // MC = 2: neither CTA may exit while the partner can still multicast into its shared memory or
  // arrive on its barriers.
  if constexpr (MC == 2) {
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
// kernel's PROMOTE_DB (one temporary, wait_group 0 per block, ran fp8 1.1-1.3x slower than int8 on the same
// tiles at 32 K-blocks: h200-session22-2026-12-01.txt). Not with ready flags (prepare refuses them), nor the
// token tail, the weights-constant hint (ignored: the loads start after griddepcontrol.wait) or the timeline.
#define SM90_SKINNY_THREADS(CW, WR) ((WR) ? 384 : 128 * (CW) + 32)
template <int BN, int STAGES>
struct sm90_skinny_cfg {
  static constexpr int X_BYTES = SM90_SKINNY_BM * SM90_BK;  // weights: 64 rows of a K-block
  static constexpr int Y_BYTES = BN * SM90_BK;              // tokens
  static constexpr int STAGE_BYTES = X_BYTES + Y_BYTES;     // a multiple of 1024 (128-byte swizzle atoms)
  static constexpr int NACC = BN / 2;                       // accumulators per consumer thread (m64 x BN / 128)
  static constexpr int STG_STRIDE = BN + 1;                 // staging: 64 channels x BN tokens, words
  static constexpr int STG_BYTES = (SM90_SKINNY_BM * STG_STRIDE * 4 + 15) / 16 * 16;
  static constexpr int SMEM_BYTES = 1024 + STAGES * STAGE_BYTES + STG_BYTES + 2 * STAGES * 8;
};

// The first token row of token tile ty. The last tile, where partial and at least BN tokens (a.tail_n: the skinny
// kernel's use of the tail field), is shifted to end at the last token: its rows are all real rows of A, with no
// out-of-bounds fill (TMA fills a mostly empty box slowly: ~4 cycles per missing row and stage beyond ~16; 8b-o's
// 65 tokens on n64 pairs ran 1.2x slower than 100 tokens, h200-session24-2026-12-01.txt). The
// tokens it shares with the previous tile are computed again from the same bytes by the same instructions and
// stored again with the same bits. A tile wholly past the last token (a pair's missing partner) stays put.
template <int BN>
SM90_DEV int sm90_skinny_row0(const sm90_args &a, int ty) {
  const int r = ty * BN;
  return a.tail_n && r < a.rows_y && r + BN > a.rows_y && a.rows_y >= BN ? a.rows_y - BN : r;
}
// A consumer warpgroup's next stage: the next one (CW = 1), or two on (CW = 2: the other warpgroup takes the one
// between), the phase flipping when the ring wraps.
template <int CW, int STAGES>
SM90_DEV void sm90_skinny_step(int &s, uint32_t &phase) {
  if constexpr (CW == 1) {
    if (++s == STAGES) {
      s = 0;
      phase ^= 1;
    }
  } else if ((s += CW) >= STAGES) {
    s -= STAGES;
    phase ^= 1;
  }
}
// Template flags: MC pair of token tiles sharing the weight tile (below); CW consumer warpgroups per tile (below);
// WR the producer is a whole warpgroup so that registers move to the consumers (below); MINB CTAs per SM.
// MC = 2: a cluster of two CTAs on neighbouring TOKEN tiles of the same weight
// tile, each loading half of the weight tile (32 rows: tmap_x's box) multicast into both and its own token tile, so the
// weights cross from L2 once per pair: cuBLASLt's small-M tiles on half-wave shapes (8b-o: 64x8 / 64x16 / 64x24 / 64x72
// with a 1x2 cluster at 16..48 and 129 tokens, h200-session22-2026-12-01.txt), which put 64 weight tiles on
// 128 SMs without split-K. Both CTAs walk the same pairs in lockstep; a partner past the last token tile runs on zeros
// (TMA fills them) and stores nothing. A stage is refilled only when both CTAs' consumers released it (the partner's
// half lands in it): the empty barriers count two arrivals, one of them remote.
// CW = 2 (the _k2 configurations): two consumer warpgroups on the same 64 x BN tile, as cuBLASLt's 384-thread CTAs on
// the same tiling (`64x48_128x15_1x2` 8.80 us vs our one-warpgroup n48 pair's 11.97 at 8b-o 96 tokens,
// h200-session24-2026-12-01.txt). A tile's K-blocks alternate between them (warpgroup w takes kb = w, w + 2, ...: the
// stages two apart in the ring, which the producer fills in order); each keeps its own accumulators over its half of
// the tile's K-blocks and releases its own stages (the empty barriers still count MC arrivals). The epilogue adds the
// two halves in the staging buffer (warpgroup 0 stores, warpgroup 1 adds in place: the same thread owns the same
// positions) and both store, every other token row each. int8: the same bits as CW = 1 (int32 sums); fp8: the sum of
// two K-ordered halves (other rounding than one K-ordered sum; fp8 is checked with a relative tolerance).
// WR (the _k2r configurations, planned from n112 by plan_skinny's wide rule): CW = 2 with the producer a whole
// warpgroup (384 threads, its warps 9..11 idle) so that setmaxnreg can move registers to the consumers (40 / 232, the
// main kernel's split): ptxas caps 288 threads at 168 registers (n144 fp8 spilled at 168, the one-warpgroup n144 uses
// 238), which holds the wide fp8 tiles to one promotion temporary (ONE_T) and keeps n144 out. With WR two temporaries
// again: 2-4% faster from n112 up (h200-session27-2026-12-02.txt).
template <int BN, int STAGES, bool INT8, bool PROMOTE, int MINB, int MC = 1, int CW = 1, bool WR = false>
__global__ void __launch_bounds__(SM90_SKINNY_THREADS(CW, WR), MINB)
    sm90_skinny_kernel(const __grid_constant__ CUtensorMap tmap_x, const __grid_constant__ CUtensorMap tmap_y,
                       const __grid_constant__ CUtensorMap tmap_o, const sm90_args a,
                       const __grid_constant__ CUtensorMap tmap_t) {
#if SM90_ENABLED
  typedef sm90_skinny_cfg<BN, STAGES> C;
  typedef typename sm90_acc_type<INT8>::type acc_t;
  static_assert(BN % 8 == 0 && BN >= 8 && BN <= 256, "wgmma N");
  static_assert(C::STAGE_BYTES % 1024 == 0, "stages on 1024-byte swizzle atoms");
  static_assert(!(INT8 && PROMOTE), "int8 accumulates exactly");
  static_assert(C::SMEM_BYTES <= 232448, "shared memory");
  static_assert(MC == 1 || MC == 2, "a pair of token tiles at most");
  static_assert(CW == 1 || (CW == 2 && STAGES >= 4), "two consumer warpgroups, two stages each in flight");
  // (an odd ring would hand a stage from one warpgroup's K-block to the other's: the full barrier's parity wait is then
  // not ordered after the other warpgroup's phase; see SM90_CFG_SKINNY_K2 in sm90_gemm.cu)
  static_assert(CW == 1 || STAGES % 2 == 0, "two consumer warpgroups: an even ring");
  static_assert(!WR || (CW == 2 && MINB == 1), "the register split is for one CTA of two consumer warpgroups per SM");
  extern __shared__ uint8_t smem_raw[];
  uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  const uint32_t smem0 = sm90_smem_u32(smem);
  const uint32_t stg = smem0 + STAGES * C::STAGE_BYTES;
  const uint32_t full0 = stg + C::STG_BYTES;
  const uint32_t empty0 = full0 + STAGES * 8;
  // Work items: tiles, weight tiles fastest; MC = 2: pairs of token tiles (the cluster's rank picks one of the pair).
  const int crank = MC == 2 ? (int)sm90_cluster_rank() : 0;
  const int items = a.tiles_x * (MC == 2 ? (a.tiles_y + 1) / 2 : a.tiles_y);
  const int item0 = (int)blockIdx.x / MC, item_stride = (int)gridDim.x / MC;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 128 * CW) {
    sm90_prefetch_tmap(&tmap_x);
    sm90_prefetch_tmap(&tmap_y);
    for (int s = 0; s < STAGES; s++) {
      sm90_mbar_init(full0 + 8 * s, 1);    // the producer's arrive + the TMA bytes
      sm90_mbar_init(empty0 + 8 * s, MC);  // the owning consumer warpgroup's thread 0 (and the partner's: MC = 2)
    }
    sm90_fence_mbar_init();
  }
  // MC = 2: the partner's barriers are initialised before anything lands in or arrives on them.
  if constexpr (MC == 2)
    sm90_cluster_sync();
  else
    __syncthreads();
  if (WR ? warp >= 4 * CW : warp == 4 * CW) {
    // ---------------- producer (one lane) ----------------
    if constexpr (WR) sm90_setmaxnreg_dec<40>();  // (the whole warpgroup: setmaxnreg is warpgroup-wide)
    if (lane == 0 && (!WR || warp == 4 * CW)) {
      sm90_grid_dep_wait();  // nothing in global memory is read before the previous kernel is done
      int s = 0;
      uint32_t phase = 0;
      for (int t = item0; t < items; t += item_stride) {
        const int tx = t % a.tiles_x, ty = (t / a.tiles_x) * MC + crank;
        for (int kb = 0; kb < a.kblocks; kb++) {
          const uint32_t full = full0 + 8 * s, dst = smem0 + s * C::STAGE_BYTES;
          sm90_mbar_wait(empty0 + 8 * s, phase ^ 1);
          sm90_mbar_arrive_tx(full, C::STAGE_BYTES);
          if constexpr (MC == 2)  // this CTA's half of the weight tile, into both CTAs (the partner sends the other)
            sm90_tma_load_2d_mc(dst + crank * (C::X_BYTES / 2), &tmap_x, full, kb * SM90_BK,
                                tx * SM90_SKINNY_BM + crank * (SM90_SKINNY_BM / 2), (uint16_t)0x3);
          else
            sm90_tma_load_2d(dst, &tmap_x, full, kb * SM90_BK, tx * SM90_SKINNY_BM);
          sm90_tma_load_2d(dst + C::X_BYTES, &tmap_y, full, kb * SM90_BK, sm90_skinny_row0<BN>(a, ty));
          if (++s == STAGES) {
            s = 0;
            phase ^= 1;
          }
        }
      }
      sm90_grid_dep_launch();  // every load is issued
    }
  } else {
    // ---------------- the consumer warpgroup(s) (threads 0..128 CW - 1) ----------------
    if constexpr (WR) sm90_setmaxnreg_inc<232>();  // 128 x 40 + 256 x 232 <= 65536
    sm90_grid_dep_wait();  // scales, bias, zero points and out may belong to the previous kernel
    const int cw = CW == 1 ? 0 : threadIdx.x / 128, tid = CW == 1 ? threadIdx.x : threadIdx.x % 128;  // warpgroup, thread
    const int r0 = (CW == 1 ? warp : warp % 4) * 16 + lane / 4, c0 = 2 * (lane % 4);
    // The ring position of this warpgroup's next K-block: stage s, phase.
    int s = 0;
    uint32_t phase = 0;
    uint32_t g0 = 0;  // CW = 2: the running index (over the CTA's walk) of the current tile's first K-block
    for (int t = item0; t < items; t += item_stride) {
      const int tx = t % a.tiles_x, ty = (t / a.tiles_x) * MC + crank;
      // This warpgroup's K-blocks of the tile: kb = cw, cw + CW, ... (by the tile's own K-block index, so that a tile's
      // fp8 bits do not depend on where it falls in the CTA's walk; none when the tile has one K-block and this is
      // warpgroup 1). CW = 1: all of them, the ring walked in order.
      int mine = a.kblocks;
      if constexpr (CW == 2) {
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
      acc_t acc[C::NACC];
#pragma unroll
      for (int i = 0; i < C::NACC; i++) acc[i] = 0;
      int prev = -1;
      if constexpr (PROMOTE) {
        // fp8: the main kernel's double-buffered promotion (sm90_fp8_issue / sm90_fp8_retire): block k's wgmmas
        // go into one temporary while block k - 1's finish into the other (wait_group 1), which is then released
        // and added in; each K-block from zero, acc += block in K order (the bits of one temporary). The wide tiles
        // with two warpgroups (CW = 2, BN > 80: 64 accumulators + 2 x 64 temporaries spilled in 168 registers) keep
        // one temporary (ONE_T): each warpgroup waits for its own block, the other's block keeps the tensor core busy.
        constexpr bool ONE_T = CW == 2 && BN > (WR ? 128 : 80);  // (WR: n144 up, 72..88 accumulators + 2 x 72..88)
        float ta[C::NACC], tb[ONE_T ? 1 : C::NACC];  // (each block's first wgmma overwrites them: scale_d = 0)
        float *facc = (float *)acc;
        const int n = mine;
#define SKINNY_ISSUE(T) \
    sm90_fp8_issue<BN>(T, full0 + 8 * s, phase, sm90_desc_k128(smem0 + s * C::STAGE_BYTES), \
                       sm90_desc_k128(smem0 + s * C::STAGE_BYTES + C::X_BYTES))
#define SKINNY_ADVANCE() \
    prev = s;            \
    sm90_skinny_step<CW, STAGES>(s, phase);
        if constexpr (ONE_T) {
          for (int j = 0; j < n; j++) {
            SKINNY_ISSUE(ta);
            SKINNY_ADVANCE();
            sm90_wgmma_wait<0>();
            sm90_fp8_retire<MC>(ta, facc, empty0 + 8 * prev, tid);
          }
        } else if (n > 0) {
          SKINNY_ISSUE(ta);
          SKINNY_ADVANCE();
          int j = 1;
          for (; j + 1 < n; j += 2) {
            SKINNY_ISSUE(tb);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MC>(ta, facc, empty0 + 8 * prev, tid);
            SKINNY_ADVANCE();
            SKINNY_ISSUE(ta);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MC>(tb, facc, empty0 + 8 * prev, tid);
            SKINNY_ADVANCE();
          }
          if (j < n) {
            SKINNY_ISSUE(tb);
            sm90_wgmma_wait<1>();
            sm90_fp8_retire<MC>(ta, facc, empty0 + 8 * prev, tid);
            SKINNY_ADVANCE();
            sm90_wgmma_wait<0>();
            sm90_fp8_retire<MC>(tb, facc, empty0 + 8 * prev, tid);
          } else {
            sm90_wgmma_wait<0>();
            sm90_fp8_retire<MC>(ta, facc, empty0 + 8 * prev, tid);
          }
        }
#undef SKINNY_ISSUE
#undef SKINNY_ADVANCE
      } else {
        // int8 (and unpromoted fp8): K-block kb's four wgmmas accumulate into acc, or with DUAL into acc2 when kb is
        // odd. A tile this narrow makes each wgmma a few cycles of tensor work behind a much longer latency, and the
        // wgmmas on one accumulator run one after another: with two chains, block kb + 1's wgmmas start while block
        // kb's are still in flight (as the fp8 promotion's two temporaries do). int32 sums: the same bits in any order.
        // Not n144: two chains there (242 registers, no spills) ran as one (70b-o-tp4 129 tokens 10.26 vs 10.30 us,
        // h200-session23-2026-12-01.txt): a m64n144k32 wgmma is long enough to cover the chain's latency.
        constexpr bool DUAL = INT8 && BN <= 80;
        acc_t acc2[DUAL ? C::NACC : 1];
#pragma unroll
        for (int i = 0; i < (DUAL ? C::NACC : 1); i++) acc2[i] = 0;
#define SKINNY_BLOCK(ACC)                                                              \
    {                                                                                  \
      sm90_mbar_wait(full0 + 8 * s, phase);                                            \
      const uint32_t xs = smem0 + s * C::STAGE_BYTES;                                  \
      const uint64_t dx = sm90_desc_k128(xs), dy = sm90_desc_k128(xs + C::X_BYTES);    \
      sm90_wgmma_fence();                                                              \
      _Pragma("unroll") for (int kk = 0; kk < SM90_BK / 32; kk++) {                    \
        if constexpr (INT8)                                                            \
          sm90_wgmma_s8<BN>(ACC, dx + 2 * kk, dy + 2 * kk, 1);                         \
        else                                                                           \
          sm90_wgmma_fp8<BN>(ACC, dx + 2 * kk, dy + 2 * kk, 1);                        \
      }                                                                                \
      sm90_wgmma_commit();                                                             \
      sm90_wgmma_wait<1>(); /* this block in flight, the previous one done: its stage goes back */ \
      if (prev >= 0 && tid == 0) sm90_release<MC>(empty0 + 8 * prev);                  \
      prev = s;                                                                        \
      sm90_skinny_step<CW, STAGES>(s, phase);                                          \
    }
        int kb = 0;
        if constexpr (DUAL) {
          for (; kb + 1 < mine; kb += 2) {
            SKINNY_BLOCK(acc);
            SKINNY_BLOCK(acc2);
          }
        }
        for (; kb < mine; kb++) SKINNY_BLOCK(acc);
#undef SKINNY_BLOCK
        sm90_wgmma_wait<0>();
        if (prev >= 0 && tid == 0) sm90_release<MC>(empty0 + 8 * prev);
        if constexpr (DUAL) {
#pragma unroll
          for (int i = 0; i < C::NACC; i++) {
            sm90_fence_reg(acc2[i]);
            sm90_fence_reg(acc[i]);
            acc[i] = (acc_t)((uint32_t)acc[i] + (uint32_t)acc2[i]);
          }
        }
      }
#pragma unroll
      for (int i = 0; i < C::NACC; i++) sm90_fence_reg(acc[i]);

      // Epilogue: the tokens' scales (and zero points) first, then the accumulators through the staging buffer
      // (channel-major), then each thread's quad of channels (4 eq .. 4 eq + 3) for every 8th token of the tile.
      // CW = 2: warpgroup 0 stores its accumulators, warpgroup 1 adds its own in place (acc0 + acc1), and each stores
      // the token rows j of its parity.
      constexpr int ER = BN / 8;  // token rows per thread (every 8th token of the tile)
      constexpr int NT = 128 * CW;  // the consumer threads
      float esa[ER];
      int32_t ezp[ER];
      const int m0 = sm90_skinny_row0<BN>(a, ty);
#pragma unroll
      for (int j = 0; j < ER; j++)
        if (CW == 1 || j % CW == cw) sm90_quad_row<INT8>(a, m0 + tid / 16 + 8 * j, esa[j], ezp[j]);
      const int eq = tid % 16, en = tx * SM90_SKINNY_BM + 4 * eq;
      sm90_quad eqp;
      sm90_quad_load<INT8>(a, 0, en, eqp);
      if (cw == 0) {
#pragma unroll
        for (int i = 0; i < C::NACC; i++) {
          const int row = r0 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + c0 + i % 2;  // channel, token (wgmma's D layout)
          sm90_st_smem(stg + (uint32_t)(row * C::STG_STRIDE + col) * 4, sm90_bits(acc[i]));
        }
      }
      if constexpr (CW == 2) {
        sm90_named_bar(1, NT);
        if (cw == 1) {
#pragma unroll
          for (int i = 0; i < C::NACC; i++) {
            const int row = r0 + 8 * ((i / 2) % 2), col = 8 * (i / 4) + c0 + i % 2;
            const uint32_t at = stg + (uint32_t)(row * C::STG_STRIDE + col) * 4;
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
      sm90_named_bar(1, NT);
#pragma unroll
      for (int j = 0; j < ER; j++) {
        if (CW == 2 && j % CW != cw) continue;
        const int c = tid / 16 + 8 * j, m = m0 + c;
        uint32_t raw[4];
#pragma unroll
        for (int q = 0; q < 4; q++) raw[q] = sm90_ld_smem(stg + (uint32_t)((4 * eq + q) * C::STG_STRIDE + c) * 4);
        if (m < a.M && en < a.N) sm90_splitk_store<INT8>(a, 0, 0, m, en, eqp, esa[j], ezp[j], raw);
      }
      sm90_named_bar(1, NT);  // the staging buffer is free for the next tile
    }
  }  // the consumer warpgroup(s)
  // MC = 2: neither CTA exits while the partner can still multicast into its shared memory or arrive on its barriers.
  if constexpr (MC == 2) {
    __syncwarp();
    sm90_cluster_sync();
  }
#endif
}
