// sm90_epilogue.cuh — the sm_90a GEMM kernels' epilogues: accumulators -> scaled, biased, rounded
// outputs (direct, staged through TMA stores, lean, swapped, split-K over a cluster).
#pragma once
#include "sm90_kernel_args.cuh"





// The lean swapped epilogue's staging (sm90_epi_swap_lean): words from one token line to the next (64
// channels + 4: 16-byte aligned lines, the fragment's stores on 32 distinct banks).
static constexpr int SM90_SWAP_LEAN_STRIDE = 68;

// The epilogue's shared memory. Split-K: the whole partial tile. Swapped unsplit tiles: a staging buffer
// per consumer warpgroup. Unswapped unsplit tiles: the staged epilogue's TMA store buffers.
template <int BN, bool SWAP, bool SPLITK>
struct sm90_epi_buffers {
  // The swapped epilogue stages chunks of CHUNK_N tokens (columns of wgmma's N side; 16: the swapped n80)
  static const int CHUNK_N = BN < 32 ? BN : BN % 32 == 0 ? 32 : 16;
  // Split-K partial tile: PARTIAL_LINES lines of PARTIAL_LINE accumulators along n (the output's contiguous
  // dimension: X rows when swapped, Y columns otherwise), lines PARTIAL_LINE + 4 words apart (16-byte
  // aligned quads; the publishing stores of a warp hit at most 2 ways per bank).
  static const int PARTIAL_LINE = SWAP ? SM90_BM : BN;
  static const int PARTIAL_LINES = SWAP ? BN : SM90_BM;
  static const int PARTIAL_STRIDE = PARTIAL_LINE + 4;
  static const int STAGING_STRIDE = SWAP ? CHUNK_N + 1 : CHUNK_N + 8;
  // Swapped unsplit tiles: per consumer warpgroup one staging buffer, 64 channel lines of STAGING_STRIDE
  // words (the general epilogue) or CHUNK_N token lines of SM90_SWAP_LEAN_STRIDE (the lean one, sm90_epi_swap_lean).
  static const int STAGING_WG_WORDS = 64 * STAGING_STRIDE > CHUNK_N * SM90_SWAP_LEAN_STRIDE
                                           ? 64 * STAGING_STRIDE
                                           : CHUNK_N * SM90_SWAP_LEAN_STRIDE;
  static const int STAGING_WG_BYTES = (STAGING_WG_WORDS * 4 + 15) / 16 * 16;
  // Unswapped unsplit tiles: the staged epilogue's buffers, 2 per consumer warpgroup of 64 rows x
  // 128 bytes (64 16-bit outputs), 1024-aligned (the TMA 128-byte swizzle period).
  static const int OUT_BUF_BYTES = 64 * 128;
  static const int BYTES = SPLITK ? PARTIAL_LINES * PARTIAL_STRIDE * 4
                           : SWAP ? 2 * STAGING_WG_BYTES
                                  : 2 * 2 * OUT_BUF_BYTES;
};

// The scale slot (sm90_args.scale_slot; the unswapped unsplit tiles): two barriers (full, empty), then scale_b
// of the tile's BN columns and scale_a of its 128 rows, filled by producer warp 1 one tile ahead.
template <int BN>
struct sm90_scale_slot {
  static const int BYTES = 16 + (BN + SM90_BM) * 4;
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
// psa: the tile's scale_a slot (see sm90_args.scale_slot) and lr0 the row's index in it, or psa = NULL.
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
// their parameters (scale, bias, zero-point adjustment) are loaded once, and LINES_PER_STEP lines go at a time, all
// their DSMEM and row-parameter loads issued before the first sum (one line per trip cost ~7.8k cycles
// of epilogue at 70b-qkv-tp4 M = 192, h200-sm90-deep256-2026-11-30.txt).
// Where the kernel prefetches (EARLY), the parameters of the columns and of the warp's first T lines
// (every line at split >= 2: T = PARTIAL_LINES / 16) are loaded by sm90_splitk_params between the release
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
// The sums of LINES_PER_STEP lines from ml0 (step apart) into raw (their bits): the DSMEM loads of every line and
// rank first, then the sums in rank order. Lines at or past `lines` are left alone.
template <bool INT8, int STRIDE, int LINES_PER_STEP>
SM90_DEV void sm90_splitk_sums(uint32_t partial0, int lines, int ml0, int step, int nl, int split, uint32_t (*raw)[4]) {
  typedef typename sm90_acc_type<INT8>::type acc_t;
  acc_t v[LINES_PER_STEP][4];
#pragma unroll
  for (int u = 0; u < LINES_PER_STEP; u++) v[u][0] = v[u][1] = v[u][2] = v[u][3] = 0;
#pragma unroll
  for (int r0 = 0; r0 < SM90_MAX_SPLIT; r0 += 4) {
    if (r0 >= split) break;
    uint4 part[LINES_PER_STEP][4];
#pragma unroll
    for (int u = 0; u < LINES_PER_STEP; u++)
#pragma unroll
      for (int r = 0; r < 4; r++)
        if (r0 + r < split && ml0 + u * step < lines)
          part[u][r] = sm90_ld_dsmem_v4(sm90_mapa(partial0 + (uint32_t)((ml0 + u * step) * STRIDE + nl) * 4, r0 + r));
#pragma unroll
    for (int u = 0; u < LINES_PER_STEP; u++)
#pragma unroll
      for (int r = 0; r < 4; r++)
        if (r0 + r < split && ml0 + u * step < lines) {
          v[u][0] += sm90_from_bits<acc_t>(part[u][r].x), v[u][1] += sm90_from_bits<acc_t>(part[u][r].y);
          v[u][2] += sm90_from_bits<acc_t>(part[u][r].z), v[u][3] += sm90_from_bits<acc_t>(part[u][r].w);
        }
  }
#pragma unroll
  for (int u = 0; u < LINES_PER_STEP; u++)
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
// them waited for them to be performed); the caller then waits. Otherwise: each group of LINES_PER_STEP lines
// summed and stored in turn, and the caller's whole barrier after.
template <bool INT8, int NL, int STRIDE, int LINES_PER_STEP, int T, bool EARLY>
SM90_DEV void sm90_splitk_quads(const sm90_args &a, uint32_t partial0, int lines, int warp8, int lane, int rank,
                                int split, int m_base, int n_base, sm90_quad &p, sm90_quad_rows<T> &rw) {
  static_assert(NL / 4 == 32, "a line of quads is one warp");
  static_assert(T % LINES_PER_STEP == 0, "whole groups of LINES_PER_STEP lines are prefetched");
  const int nl = lane * 4, step = 8 * split, first = warp8 * split + rank;
  sm90_quad_fence(p);
#pragma unroll
  for (int t = 0; t < T; t++) {  // opaque, as p's (fp8's zero points are the constant 1: no register each)
    asm volatile("" : "+f"(rw.sa[t]));
    if constexpr (INT8) asm volatile("" : "+r"(rw.zp[t]));
  }
  // Lines past the first T (split 1, or kernels that prefetch only LINES_PER_STEP lines): whole, their rows loaded
  // here.
  for (int ml0 = first + T * step; ml0 < lines; ml0 += LINES_PER_STEP * step) {
    float sa[LINES_PER_STEP];
    int32_t zp[LINES_PER_STEP];
    uint32_t raw[LINES_PER_STEP][4];
#pragma unroll
    for (int u = 0; u < LINES_PER_STEP; u++) sm90_quad_row<INT8>(a, m_base + ml0 + u * step, sa[u], zp[u]);
    sm90_splitk_sums<INT8, STRIDE, LINES_PER_STEP>(partial0, lines, ml0, step, nl, split, raw);
#pragma unroll
    for (int u = 0; u < LINES_PER_STEP; u++)
      if (ml0 + u * step < lines)
        sm90_splitk_store<INT8>(a, ml0 + u * step, nl, m_base, n_base, p, sa[u], zp[u], raw[u]);
  }
  if constexpr (EARLY) {
    uint32_t raw[T][4];
#pragma unroll
    for (int t0 = 0; t0 < T; t0 += LINES_PER_STEP)
      if (first + t0 * step < lines)
        sm90_splitk_sums<INT8, STRIDE, LINES_PER_STEP>(partial0, lines, first + t0 * step, step, nl, split, raw + t0);
    __syncwarp();
    sm90_cluster_arrive();
#pragma unroll
    for (int t = 0; t < T; t++)
      if (first + t * step < lines)
        sm90_splitk_store<INT8>(a, first + t * step, nl, m_base, n_base, p, rw.sa[t], rw.zp[t], raw[t]);
  } else {
#pragma unroll
    for (int t0 = 0; t0 < T; t0 += LINES_PER_STEP) {
      if (first + t0 * step >= lines) break;
      uint32_t raw[LINES_PER_STEP][4];
      sm90_splitk_sums<INT8, STRIDE, LINES_PER_STEP>(partial0, lines, first + t0 * step, step, nl, split, raw);
#pragma unroll
      for (int u = 0; u < LINES_PER_STEP; u++)
        if (first + (t0 + u) * step < lines)
          sm90_splitk_store<INT8>(a, first + (t0 + u) * step, nl, m_base, n_base, p, rw.sa[t0 + u], rw.zp[t0 + u],
                                  raw[u]);
    }
  }
}

// Lean swapped epilogue for the swapped tiles without split-K (the persistent *_swap_*_ps
// configurations): the general one in the kernel (quads through a 64-channel x CHUNK_N-token buffer)
// executed ~2000 instructions per warp and tile on int8_swap_n128_ps (ncu source counters, 8b-qkv M =
// 128) where the plain tile's sm90_epi_lean executed ~410: a 64-bit address, bounds checks, both
// 16-bit conversions under predicates and generic-address staging per output row. Here, as
// sm90_epi_lean: the output type is a template parameter, the caller has checked that the warpgroup's
// 64 channels are below N, that out / ldo allow 4-element stores and that there is no int8 zero point;
// bias is an FFMA addend, -0.0 without one (the same bits as fmul); the channel parameters are loaded
// once per tile and the token scales (esa: token tid / 16 + 8 j of the tile) by the caller. The buffer
// holds CHUNK_N token lines of 64 channels, SM90_SWAP_LEAN_STRIDE (68) words apart: the fragment's stores (8 channels x
// 4 token pairs per warp) hit 32 different banks, and a token line's 16 quads are one 16-byte load each
// (16-byte aligned lines). Per row of 4 outputs: 1 LDS.128, 4 I2F (int8), 4 FMUL, 4 FFMA, 2 F2FP (16-bit),
// one 8- or 16-byte store, and a token compare (the M tail).
// stg: this warpgroup's buffer (shared-window address); m_base the tile's first token, n0 the
// warpgroup's first channel. CHUNK_N: token lines staged per chunk (the buffer's width); OUT: SM90_OUT_*.
template <bool INT8, int BN, int CHUNK_N, int OUT, typename acc_t>
SM90_DEV void sm90_epi_swap_lean(const sm90_args &a, const acc_t *acc, uint32_t stg, int tid, int bar, int m_base,
                                 int n0, const float (&esa)[BN / 8]) {
  constexpr bool BF16 = OUT == SM90_OUT_BF16, F32 = OUT == SM90_OUT_FP32;
  constexpr int LS = SM90_SWAP_LEAN_STRIDE;
  static_assert(CHUNK_N % 8 == 0 && BN % CHUNK_N == 0, "whole chunks of 8-token groups");
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
  for (int ch = 0; ch < BN / CHUNK_N; ch++) {
#pragma unroll
    for (int ii = 0; ii < CHUNK_N / 2; ii++) {
      const int i = ch * (CHUNK_N / 2) + ii;
      const int row = r0 + 8 * ((ii / 2) % 2), col = 8 * (ii / 4) + c0 + ii % 2;
      sm90_st_smem(stg + (uint32_t)(col * LS + row) * 4u, sm90_bits(acc[i]));
    }
    sm90_named_bar(bar, 128);
#pragma unroll
    for (int k = 0; k < CHUNK_N / 8; k++) {
      const int c = t0 + 8 * k, j = ch * (CHUNK_N / 8) + k;
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
    static_assert(J % 4 == 0,
                  "lean epilogue: chunks of 64 columns (the caller stores the 128 x 160 tile's last 32 directly)");
#pragma unroll
    for (int q = 0; q < J / 8; q++) {
      float sbA[8], sbB[8], bA[8], bB[8];
#pragma unroll
      for (int jj = 0; jj < 8; jj++)
        sm90_ld_smem_v2f32(psb_s + 4u * (uint32_t)(c0 + 64 * q + 8 * jj), sbA[jj], sbB[jj]);
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
  static_assert(J % 4 == 0,
                "lean epilogue: chunks of 64 columns (the caller stores the 128 x 160 tile's last 32 directly)");
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
      for (int e = 0; e < 4; e++)
        v[e] = INT8 ? __int2float_rn((int32_t)sm90_bits(g[e])) : __uint_as_float(sm90_bits(g[e]));
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
