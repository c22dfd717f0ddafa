// gemm_mma.cu — the portable tensor-core scaled GEMM: sm_80+ (fp8 on sm_89+), and an int8 variant for
// sm_75 (Turing).
//
//   out[M,N] = epilogue(A[M,K] . B[K,N]),  A row-major, B column-major (N rows of K)
//
// Both operands are K-contiguous, which is exactly the "row.col" operand layout of
// mma.sync m16n8k32 (s8 on sm_80, e4m3 on sm_89): the kernel never transposes.
//
// Structure (one CTA per BM x BN output tile, tiles in grouped order for L2 reuse):
//   - K advances in slices of 128 bytes; STAGES slices of A and B are in flight in
//     shared memory (cp.async multi-stage pipeline, one commit group per slice).
//   - Shared memory rows are 128 bytes = 8 chunks of 16 bytes, stored at chunk
//     (c ^ (row & 7)): ldmatrix reads 8 rows of one logical chunk from 8 different
//     bank groups, and cp.async writes of a warp are conflict-free too.
//   - Fragments come from ldmatrix.x4 (an 8x8 b16 matrix is 8 rows x 16 bytes, which
//     is the 8-bit mma fragment layout), then mma.sync accumulates in int32 (exact) or
//     fp32 registers.
//   - Loads are predicated: rows past M/N and bytes past K are zero-filled (cp.async's
//     src-size operand), so any M, N, K works. Each operand is loaded with 16-byte
//     cp.async when its base and row stride are 16-byte aligned, with 4-byte cp.async
//     when they are 4-byte aligned, and byte by byte otherwise.
//   - The epilogue runs on the accumulator registers: zero-point correction in int32,
//     one rounding to fp32, the scales and bias with explicit _rn intrinsics (no
//     contraction), one rounding to the output dtype; stores of 2 elements where
//     aligned. Bit-identical to w8a8_ref_scaled_mm for int8.
//
// The sm_75 variant (gemm_sm75_kernel, int8 only) keeps the tiles, the shared-memory layout, the ldmatrix
// fragments and the epilogue, and replaces what Turing lacks: no cp.async (each thread loads its chunks of
// the next K slice into registers while the warps multiply the current one, then stores them into the other
// of two shared-memory buffers) and no m16n8k32 (each step is four m8n8k16). Its int32 sums are exact, so its
// results are the sm_80 kernel's bit for bit. Turing has no bf16 instructions; none are needed: common.cuh
// converts bf16 with integer operations.
#include <stdint.h>

#include "common.cuh"
#include "cuda_backend.h"

#define GEMM_BK 128 /* bytes (= elements) of K per pipeline stage */

typedef struct gemm_params {
  w8a8_mm_problem p;
  int64_t tiles_m, tiles_n;
  int align_a, align_b; /* 16, 4 or 1: widest load the operand's base and stride allow */
  int out_pair;         /* out base and ldo allow 2-element stores */
  int splits;           /* split-K: CTAs per output tile, each over kt_per_split K slices */
  int kt_per_split;
  void *partial;        /* splits > 1: [splits][M][N] raw accumulators (int32 or fp32), workspace */
} gemm_params;

/* ---- PTX wrappers -------------------------------------------------------------- */

W8A8_DEVFN uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

/* cp.async and mma m16n8k32 exist from sm_80 on: below it (the compute_75 pass) the wrappers are empty and the
 * sm_80 kernel traps (it never runs there: the dispatcher takes gemm_sm75_kernel). */
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
#define GEMM_SM80_CODE 1
#else
#define GEMM_SM80_CODE 0
#endif

/* Copy `bytes` (0..16) bytes from src to dst and zero the rest of the 16. */
W8A8_DEVFN void cp_async16(uint32_t dst, const void *src, int bytes) {
#if GEMM_SM80_CODE
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
#else
  (void)dst, (void)src, (void)bytes;
#endif
}
W8A8_DEVFN void cp_async4(uint32_t dst, const void *src, int bytes) {
#if GEMM_SM80_CODE
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
#else
  (void)dst, (void)src, (void)bytes;
#endif
}
W8A8_DEVFN void cp_async_commit() {
#if GEMM_SM80_CODE
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
W8A8_DEVFN void cp_async_wait() {
#if GEMM_SM80_CODE
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
W8A8_DEVFN void st_shared_v4(uint32_t dst, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(a), "r"(b), "r"(c), "r"(d));
}
W8A8_DEVFN void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

W8A8_DEVFN void mma_k32(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if GEMM_SM80_CODE
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)c, (void)a, (void)b0, (void)b1;
#endif
}
W8A8_DEVFN void mma_k32(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)c, (void)a, (void)b0, (void)b1; /* below sm_89: see the kernel's first lines */
#endif
}

/* The accumulator type: exact int32 for int8, fp32 for fp8. */
template <bool FP8>
struct acc_type {
  typedef int T;
};
template <>
struct acc_type<true> {
  typedef float T;
};

/* ---- loads ----------------------------------------------------------------------- */

/* One 16-byte chunk of a shared-memory row from global memory: `bytes` valid bytes
 * (0..16) at src, the rest zero. src is the operand base when bytes == 0. */
W8A8_DEVFN void load_chunk(uint32_t dst, const uint8_t *src, int bytes, int align) {
  if (align == 16) {
    cp_async16(dst, src, bytes);
  } else if (align == 4) {
#pragma unroll
    for (int j = 0; j < 4; j++) {
      int b = bytes - 4 * j;
      b = b < 0 ? 0 : (b > 4 ? 4 : b);
      cp_async4(dst + 4 * j, b > 0 ? src + 4 * j : src, b);
    }
  } else {
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int j = 0; j < 16; j++)
      if (j < bytes) w[j >> 2] |= (uint32_t)src[j] << (8 * (j & 3));
    st_shared_v4(dst, w[0], w[1], w[2], w[3]);
  }
}

/* Stage `rows` rows (starting at global row r0 of an operand with `nrows` rows) of the
 * K slice starting at k0 into shared memory at s. */
template <int ROWS, int THREADS>
W8A8_DEVFN void load_tile(uint32_t s, const uint8_t *base, int64_t ld, int64_t nrows, int64_t r0, int64_t K, int64_t k0,
                        int align) {
  constexpr int CHUNKS = ROWS * (GEMM_BK / 16);
#pragma unroll
  for (int i = 0; i < (CHUNKS + THREADS - 1) / THREADS; i++) {
    int c = threadIdx.x + i * THREADS;
    if (CHUNKS % THREADS == 0 || c < CHUNKS) {
      int row = c >> 3, ch = c & 7;
      int64_t gr = r0 + row, gk = k0 + ch * 16;
      int64_t rem = K - gk;
      int bytes = gr < nrows ? (rem <= 0 ? 0 : (rem >= 16 ? 16 : (int)rem)) : 0;
      const uint8_t *src = bytes > 0 ? base + gr * ld + gk : base;
      load_chunk(s + row * GEMM_BK + ((ch ^ (row & 7)) << 4), src, bytes, align);
    }
  }
}

/* ---- the kernel -------------------------------------------------------------------- */

template <int BM, int BN, int WARPS_M, int WARPS_N, int STAGES, bool FP8>
__global__ void __launch_bounds__(WARPS_M *WARPS_N * 32) gemm_mma_kernel(const gemm_params gp) {
  constexpr int THREADS = WARPS_M * WARPS_N * 32;
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N; /* warp tile */
  constexpr int MI = WTM / 16, NI = WTN / 8;
  static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile must be a multiple of 16x16");
  constexpr int STAGE_BYTES = (BM + BN) * GEMM_BK;
  typedef typename acc_type<FP8>::T acc_t;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  if (FP8) { /* no e4m3 mma below sm_89; the dispatcher refuses fp8 there before launching */
    __trap();
    return;
  }
#endif
#if !GEMM_SM80_CODE
  __trap(); /* see GEMM_SM80_CODE */
  return;
#endif

  extern __shared__ __align__(128) uint8_t smem[];
  const w8a8_mm_problem &p = gp.p;
  const uint8_t *A = (const uint8_t *)p.a, *B = (const uint8_t *)p.b;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const uint32_t s0 = smem_u32(smem);
  const int KT_ALL = (int)((p.K + GEMM_BK - 1) / GEMM_BK);
  const int64_t tiles_mn = gp.tiles_m * gp.tiles_n, tiles = tiles_mn * gp.splits;

  for (int64_t tg = blockIdx.x; tg < tiles; tg += gridDim.x) {
    /* Split-K: split `split` of an output tile covers K slices [kt0, kt0 + KT). */
    const int split = (int)(tg / tiles_mn);
    const int64_t t = tg % tiles_mn;
    const int kt0 = split * gp.kt_per_split;
    const int KT = KT_ALL - kt0 < gp.kt_per_split ? KT_ALL - kt0 : gp.kt_per_split;
    /* Grouped order: 8 tile-rows share each B tile while it is in L2. */
    const int64_t width = 8 * gp.tiles_n, first = (t / width) * 8;
    const int64_t gsize = gp.tiles_m - first < 8 ? gp.tiles_m - first : 8;
    const int64_t m0 = (first + (t % width) % gsize) * BM, n0 = ((t % width) / gsize) * BN;

    acc_t acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
      for (int j = 0; j < NI; j++)
#pragma unroll
        for (int r = 0; r < 4; r++) acc[i][j][r] = 0;

#pragma unroll
    for (int s = 0; s < STAGES - 1; s++) {
      if (s < KT) {
        load_tile<BM, THREADS>(s0 + s * STAGE_BYTES, A, p.lda, p.M, m0, p.K, (int64_t)(kt0 + s) * GEMM_BK,
                               gp.align_a);
        load_tile<BN, THREADS>(s0 + s * STAGE_BYTES + BM * GEMM_BK, B, p.ldb, p.N, n0, p.K,
                               (int64_t)(kt0 + s) * GEMM_BK, gp.align_b);
      }
      cp_async_commit();
    }

    for (int kt = 0; kt < KT; kt++) {
      cp_async_wait<STAGES - 2>();
      __syncthreads(); /* slice kt is visible; slice kt-1's buffer is free */
      const int nk = kt + STAGES - 1;
      if (nk < KT) {
        const uint32_t sn = s0 + (nk % STAGES) * STAGE_BYTES;
        load_tile<BM, THREADS>(sn, A, p.lda, p.M, m0, p.K, (int64_t)(kt0 + nk) * GEMM_BK, gp.align_a);
        load_tile<BN, THREADS>(sn + BM * GEMM_BK, B, p.ldb, p.N, n0, p.K, (int64_t)(kt0 + nk) * GEMM_BK, gp.align_b);
      }
      cp_async_commit();

      const uint32_t sa = s0 + (kt % STAGES) * STAGE_BYTES, sb = sa + BM * GEMM_BK;
#pragma unroll
      for (int kk = 0; kk < GEMM_BK / 32; kk++) {
        uint32_t af[MI][4], bf[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
          int row = wm * WTM + mi * 16 + (lane & 15), ch = kk * 2 + (lane >> 4);
          ldmatrix_x4(af[mi], sa + row * GEMM_BK + ((ch ^ (row & 7)) << 4));
        }
#pragma unroll
        for (int nj = 0; nj < NI / 2; nj++) {
          int row = wn * WTN + nj * 16 + (lane & 7) + ((lane >> 4) << 3), ch = kk * 2 + ((lane >> 3) & 1);
          uint32_t r[4];
          ldmatrix_x4(r, sb + row * GEMM_BK + ((ch ^ (row & 7)) << 4));
          bf[2 * nj][0] = r[0];
          bf[2 * nj][1] = r[1];
          bf[2 * nj + 1][0] = r[2];
          bf[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
          for (int ni = 0; ni < NI; ni++) mma_k32(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
      }
    }
    cp_async_wait<0>();
    __syncthreads(); /* every warp is done with the buffers before the next tile refills them */

    const int g = lane >> 2, tq = lane & 3;
    if (gp.splits > 1) {
      /* split-K: raw accumulators to the workspace; splitk_reduce sums them in split order
       * (int32: exact) and applies the epilogue. */
      acc_t *part = (acc_t *)gp.partial + (int64_t)split * p.M * p.N;
#pragma unroll
      for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
          const int64_t r = m0 + wm * WTM + mi * 16 + g + half * 8;
          if (r >= p.M) continue;
#pragma unroll
          for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int j = 0; j < 2; j++) {
              const int64_t c = n0 + wn * WTN + ni * 8 + 2 * tq + j;
              if (c < p.N) part[r * p.N + c] = acc[mi][ni][half * 2 + j];
            }
        }
      continue;
    }

    /* ---- epilogue, straight from the accumulators ---- */
    const int od = p.out_dtype;
    const size_t oes = od == W8A8_DTYPE_FP32 ? 4 : 2;
#pragma unroll
    for (int mi = 0; mi < MI; mi++) {
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const int64_t r = m0 + wm * WTM + mi * 16 + g + half * 8;
        if (r >= p.M) continue;
        const float sa_r = p.scale_a[p.scale_a_per_token ? r : 0];
        int32_t azp_r = 1;
        if (p.azp_mode == W8A8_AZP_PER_TENSOR) azp_r = p.azp[0];
        if (p.azp_mode == W8A8_AZP_PER_TOKEN) azp_r = p.azp[r];
#pragma unroll
        for (int ni = 0; ni < NI; ni++) {
          const int64_t c = n0 + wn * WTN + ni * 8 + 2 * tq;
          if (c >= p.N) continue;
          float res[2];
#pragma unroll
          for (int j = 0; j < 2; j++) {
            const int64_t col = c + j < p.N ? c + j : c;
            float v;
            if (FP8) {
              v = (float)acc[mi][ni][half * 2 + j];
            } else {
              int32_t d = (int32_t)acc[mi][ni][half * 2 + j];
              /* d - azp * adj with int32 wrap-around, as the reference */
              if (p.azp_mode != W8A8_AZP_NONE) d = (int32_t)((uint32_t)d - (uint32_t)azp_r * (uint32_t)p.azp_adj[col]);
              v = __int2float_rn(d);
            }
            const float sb = p.scale_b[p.scale_b_per_channel ? col : 0];
            const bool hb = p.bias != NULL;
            res[j] = w8a8d_epilogue(v, sa_r, sb, hb, hb ? w8a8d_load_float(od, p.bias, col) : 0.0f);
          }
          const int64_t o = r * p.ldo + c;
          if (c + 1 < p.N && gp.out_pair) {
            if (od == W8A8_DTYPE_FP32) {
              *(float2 *)((char *)p.out + o * oes) = make_float2(res[0], res[1]);
            } else {
              uint32_t lo = od == W8A8_DTYPE_BF16 ? w8a8d_f32_to_bf16(res[0]) : w8a8d_f32_to_f16(res[0]);
              uint32_t hi = od == W8A8_DTYPE_BF16 ? w8a8d_f32_to_bf16(res[1]) : w8a8d_f32_to_f16(res[1]);
              *(uint32_t *)((char *)p.out + o * oes) = lo | (hi << 16);
            }
          } else {
            w8a8d_store_float(od, p.out, o, res[0]);
            if (c + 1 < p.N) w8a8d_store_float(od, p.out, o + 1, res[1]);
          }
        }
      }
    }
  }
}

/* ---- a tile's results (the sm_75 kernel) --------------------------------------------- */

/* Warp (wm, wn)'s accumulators of the tile at (m0, n0): with split-K, the raw sums of split `split` to the
 * workspace; else the epilogue, straight from the registers. The same code as gemm_mma_kernel's last lines,
 * which keep their own copy: moved into this function, they changed that kernel's machine code. */
template <int MI, int NI, int WTM, int WTN, bool FP8>
W8A8_DEVFN void tile_out(const gemm_params &gp, const typename acc_type<FP8>::T (&acc)[MI][NI][4], int split,
                         int64_t m0, int64_t n0, int wm, int wn, int lane) {
  typedef typename acc_type<FP8>::T acc_t;
  const w8a8_mm_problem &p = gp.p;
  const int g = lane >> 2, tq = lane & 3;
  if (gp.splits > 1) {
    /* split-K: raw accumulators to the workspace; splitk_reduce sums them in split order
     * (int32: exact) and applies the epilogue. */
    acc_t *part = (acc_t *)gp.partial + (int64_t)split * p.M * p.N;
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const int64_t r = m0 + wm * WTM + mi * 16 + g + half * 8;
        if (r >= p.M) continue;
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
          for (int j = 0; j < 2; j++) {
            const int64_t c = n0 + wn * WTN + ni * 8 + 2 * tq + j;
            if (c < p.N) part[r * p.N + c] = acc[mi][ni][half * 2 + j];
          }
      }
    return;
  }

  /* ---- epilogue, straight from the accumulators ---- */
  const int od = p.out_dtype;
  const size_t oes = od == W8A8_DTYPE_FP32 ? 4 : 2;
#pragma unroll
  for (int mi = 0; mi < MI; mi++) {
#pragma unroll
    for (int half = 0; half < 2; half++) {
      const int64_t r = m0 + wm * WTM + mi * 16 + g + half * 8;
      if (r >= p.M) continue;
      const float sa_r = p.scale_a[p.scale_a_per_token ? r : 0];
      int32_t azp_r = 1;
      if (p.azp_mode == W8A8_AZP_PER_TENSOR) azp_r = p.azp[0];
      if (p.azp_mode == W8A8_AZP_PER_TOKEN) azp_r = p.azp[r];
#pragma unroll
      for (int ni = 0; ni < NI; ni++) {
        const int64_t c = n0 + wn * WTN + ni * 8 + 2 * tq;
        if (c >= p.N) continue;
        float res[2];
#pragma unroll
        for (int j = 0; j < 2; j++) {
          const int64_t col = c + j < p.N ? c + j : c;
          float v;
          if (FP8) {
            v = (float)acc[mi][ni][half * 2 + j];
          } else {
            int32_t d = (int32_t)acc[mi][ni][half * 2 + j];
            /* d - azp * adj with int32 wrap-around, as the reference */
            if (p.azp_mode != W8A8_AZP_NONE) d = (int32_t)((uint32_t)d - (uint32_t)azp_r * (uint32_t)p.azp_adj[col]);
            v = __int2float_rn(d);
          }
          const float sb = p.scale_b[p.scale_b_per_channel ? col : 0];
          const bool hb = p.bias != NULL;
          res[j] = w8a8d_epilogue(v, sa_r, sb, hb, hb ? w8a8d_load_float(od, p.bias, col) : 0.0f);
        }
        const int64_t o = r * p.ldo + c;
        if (c + 1 < p.N && gp.out_pair) {
          if (od == W8A8_DTYPE_FP32) {
            *(float2 *)((char *)p.out + o * oes) = make_float2(res[0], res[1]);
          } else {
            uint32_t lo = od == W8A8_DTYPE_BF16 ? w8a8d_f32_to_bf16(res[0]) : w8a8d_f32_to_f16(res[0]);
            uint32_t hi = od == W8A8_DTYPE_BF16 ? w8a8d_f32_to_bf16(res[1]) : w8a8d_f32_to_f16(res[1]);
            *(uint32_t *)((char *)p.out + o * oes) = lo | (hi << 16);
          }
        } else {
          w8a8d_store_float(od, p.out, o, res[0]);
          if (c + 1 < p.N) w8a8d_store_float(od, p.out, o + 1, res[1]);
        }
      }
    }
  }
}

/* ---- the sm_75 kernel ------------------------------------------------------------------ */

/* D += A . B for one 8x8x16 int8 block (Turing's integer mma): a, b hold 4 bytes of K each (the m16n8k32
 * fragment layouts' quarters, below), c two int32 columns of one row. */
W8A8_DEVFN void mma_k16_sm75(int &c0, int &c1, uint32_t a, uint32_t b) {
  asm volatile("mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32 {%0, %1}, {%2}, {%3}, {%0, %1};\n"
               : "+r"(c0), "+r"(c1)
               : "r"(a), "r"(b));
}
/* One m16n8k32 step (mma_k32's registers) as four m8n8k16: a[0] / a[2] are rows 0-7 at K 0-15 / 16-31, a[1] / a[3]
 * rows 8-15; b0 / b1 K 0-15 / 16-31; c[0..1] rows 0-7, c[2..3] rows 8-15 (PTX ISA, the mma fragment layouts). */
W8A8_DEVFN void mma_k32_sm75(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_k16_sm75(c[0], c[1], a[0], b0);
  mma_k16_sm75(c[0], c[1], a[2], b1);
  mma_k16_sm75(c[2], c[3], a[1], b0);
  mma_k16_sm75(c[2], c[3], a[3], b1);
}

/* One 16-byte chunk of an operand row into registers: `bytes` (0..16) valid bytes at src, the rest zero; as
 * load_chunk, with plain loads of the widest size `align` allows. */
W8A8_DEVFN uint4 fetch_chunk(const uint8_t *src, int bytes, int align) {
  if (align == 16 && bytes == 16) return *(const uint4 *)src;
  const int words = align >= 4 ? bytes >> 2 : 0; /* whole words loaded as words, the rest byte by byte */
  uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int q = 0; q < 4; q++) {
    if (q < words) {
      w[q] = ((const uint32_t *)src)[q];
    } else {
#pragma unroll
      for (int b = 0; b < 4; b++)
        if (4 * q + b < bytes) w[q] |= (uint32_t)src[4 * q + b] << (8 * b);
    }
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

/* A thread's chunks of a ROWS-row slice: load_tile's chunks c = threadIdx.x + i * THREADS, into registers
 * (fetch_slice) and then into shared memory at the same swizzled places (store_slice). */
template <int ROWS, int THREADS>
struct slice_regs {
  static constexpr int N = (ROWS * (GEMM_BK / 16) + THREADS - 1) / THREADS;
  uint4 v[N];
};
template <int ROWS, int THREADS>
W8A8_DEVFN void fetch_slice(slice_regs<ROWS, THREADS> &r, const uint8_t *base, int64_t ld, int64_t nrows, int64_t r0,
                            int64_t K, int64_t k0, int align) {
  constexpr int CHUNKS = ROWS * (GEMM_BK / 16);
#pragma unroll
  for (int i = 0; i < slice_regs<ROWS, THREADS>::N; i++) {
    int c = threadIdx.x + i * THREADS;
    if (CHUNKS % THREADS == 0 || c < CHUNKS) {
      int row = c >> 3, ch = c & 7;
      int64_t gr = r0 + row, gk = k0 + ch * 16;
      int64_t rem = K - gk;
      int bytes = gr < nrows ? (rem <= 0 ? 0 : (rem >= 16 ? 16 : (int)rem)) : 0;
      r.v[i] = fetch_chunk(bytes > 0 ? base + gr * ld + gk : base, bytes, align);
    }
  }
}
template <int ROWS, int THREADS>
W8A8_DEVFN void store_slice(uint32_t s, const slice_regs<ROWS, THREADS> &r) {
  constexpr int CHUNKS = ROWS * (GEMM_BK / 16);
#pragma unroll
  for (int i = 0; i < slice_regs<ROWS, THREADS>::N; i++) {
    int c = threadIdx.x + i * THREADS;
    if (CHUNKS % THREADS == 0 || c < CHUNKS) {
      int row = c >> 3, ch = c & 7;
      st_shared_v4(s + row * GEMM_BK + ((ch ^ (row & 7)) << 4), r.v[i].x, r.v[i].y, r.v[i].z, r.v[i].w);
    }
  }
}

/* int8 on sm_75: gemm_mma_kernel's tiles, fragments and epilogue over two shared-memory buffers. Slice kt + 1
 * is loaded into registers before the warps multiply slice kt (the loads are in flight meanwhile) and stored
 * into the other buffer after; one barrier per slice: the buffer a slice is stored into was last read by the
 * previous slice's multiplies, which ended at the previous barrier. */
template <int BM, int BN, int WARPS_M, int WARPS_N>
__global__ void __launch_bounds__(WARPS_M *WARPS_N * 32, 1) gemm_sm75_kernel(const gemm_params gp) {
  constexpr int THREADS = WARPS_M * WARPS_N * 32;
  constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N; /* warp tile */
  constexpr int MI = WTM / 16, NI = WTN / 8;
  static_assert(WTM % 16 == 0 && WTN % 16 == 0, "warp tile must be a multiple of 16x16");
  constexpr int STAGE_BYTES = (BM + BN) * GEMM_BK;

  extern __shared__ __align__(128) uint8_t smem[];
  const w8a8_mm_problem &p = gp.p;
  const uint8_t *A = (const uint8_t *)p.a, *B = (const uint8_t *)p.b;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / WARPS_N, wn = warp % WARPS_N;
  const uint32_t s0 = smem_u32(smem);
  const int KT_ALL = (int)((p.K + GEMM_BK - 1) / GEMM_BK);
  const int64_t tiles_mn = gp.tiles_m * gp.tiles_n, tiles = tiles_mn * gp.splits;

  for (int64_t tg = blockIdx.x; tg < tiles; tg += gridDim.x) {
    /* the tile and its K slices: as gemm_mma_kernel */
    const int split = (int)(tg / tiles_mn);
    const int64_t t = tg % tiles_mn;
    const int kt0 = split * gp.kt_per_split;
    const int KT = KT_ALL - kt0 < gp.kt_per_split ? KT_ALL - kt0 : gp.kt_per_split;
    const int64_t width = 8 * gp.tiles_n, first = (t / width) * 8;
    const int64_t gsize = gp.tiles_m - first < 8 ? gp.tiles_m - first : 8;
    const int64_t m0 = (first + (t % width) % gsize) * BM, n0 = ((t % width) / gsize) * BN;

    int acc[MI][NI][4];
#pragma unroll
    for (int i = 0; i < MI; i++)
#pragma unroll
      for (int j = 0; j < NI; j++)
#pragma unroll
        for (int r = 0; r < 4; r++) acc[i][j][r] = 0;

    slice_regs<BM, THREADS> ra;
    slice_regs<BN, THREADS> rb;
    if (KT > 0) {
      fetch_slice(ra, A, p.lda, p.M, m0, p.K, (int64_t)kt0 * GEMM_BK, gp.align_a);
      fetch_slice(rb, B, p.ldb, p.N, n0, p.K, (int64_t)kt0 * GEMM_BK, gp.align_b);
      store_slice(s0, ra);
      store_slice(s0 + BM * GEMM_BK, rb);
    }
    __syncthreads();

    for (int kt = 0; kt < KT; kt++) {
      const bool more = kt + 1 < KT;
      if (more) {
        fetch_slice(ra, A, p.lda, p.M, m0, p.K, (int64_t)(kt0 + kt + 1) * GEMM_BK, gp.align_a);
        fetch_slice(rb, B, p.ldb, p.N, n0, p.K, (int64_t)(kt0 + kt + 1) * GEMM_BK, gp.align_b);
      }
      const uint32_t sa = s0 + (kt & 1) * STAGE_BYTES, sb = sa + BM * GEMM_BK;
#pragma unroll
      for (int kk = 0; kk < GEMM_BK / 32; kk++) {
        uint32_t af[MI][4], bf[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; mi++) {
          int row = wm * WTM + mi * 16 + (lane & 15), ch = kk * 2 + (lane >> 4);
          ldmatrix_x4(af[mi], sa + row * GEMM_BK + ((ch ^ (row & 7)) << 4));
        }
#pragma unroll
        for (int nj = 0; nj < NI / 2; nj++) {
          int row = wn * WTN + nj * 16 + (lane & 7) + ((lane >> 4) << 3), ch = kk * 2 + ((lane >> 3) & 1);
          uint32_t r[4];
          ldmatrix_x4(r, sb + row * GEMM_BK + ((ch ^ (row & 7)) << 4));
          bf[2 * nj][0] = r[0];
          bf[2 * nj][1] = r[1];
          bf[2 * nj + 1][0] = r[2];
          bf[2 * nj + 1][1] = r[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; mi++)
#pragma unroll
          for (int ni = 0; ni < NI; ni++) mma_k32_sm75(acc[mi][ni], af[mi], bf[ni][0], bf[ni][1]);
      }
      if (more) {
        const uint32_t sn = s0 + ((kt + 1) & 1) * STAGE_BYTES;
        store_slice(sn, ra);
        store_slice(sn + BM * GEMM_BK, rb);
      }
      __syncthreads(); /* slice kt + 1 is visible; slice kt's buffer is free (also for the next tile) */
    }
    tile_out<MI, NI, WTM, WTN, false>(gp, acc, split, m0, n0, wm, wn, lane);
  }
}

/* Split-K: out[m,n] = epilogue(sum over splits of partial[s][m][n]), the sum in split order. */
template <bool FP8>
__global__ void __launch_bounds__(256) splitk_reduce(const gemm_params gp) {
  typedef typename acc_type<FP8>::T acc_t;
  const w8a8_mm_problem &p = gp.p;
  const acc_t *part = (const acc_t *)gp.partial;
  const int64_t MN = p.M * p.N;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < MN; i += (int64_t)gridDim.x * blockDim.x) {
    const int64_t r = i / p.N, c = i % p.N;
    float v;
    if (FP8) {
      float a = 0.0f;
      for (int s = 0; s < gp.splits; s++) a = __fadd_rn(a, (float)part[s * MN + i]);
      v = a;
    } else {
      uint32_t a = 0; /* int32 wrap-around, as the accumulator */
      for (int s = 0; s < gp.splits; s++) a += (uint32_t)(int32_t)part[s * MN + i];
      int32_t d = (int32_t)a;
      if (p.azp_mode != W8A8_AZP_NONE) {
        int32_t azp = p.azp_mode == W8A8_AZP_ADJ_ONLY ? 1 : p.azp_mode == W8A8_AZP_PER_TENSOR ? p.azp[0] : p.azp[r];
        d = (int32_t)((uint32_t)d - (uint32_t)azp * (uint32_t)p.azp_adj[c]);
      }
      v = __int2float_rn(d);
    }
    const float sa = p.scale_a[p.scale_a_per_token ? r : 0], sb = p.scale_b[p.scale_b_per_channel ? c : 0];
    const bool hb = p.bias != NULL;
    w8a8d_store_float(p.out_dtype, p.out, r * p.ldo + c,
                      w8a8d_epilogue(v, sa, sb, hb, hb ? w8a8d_load_float(p.out_dtype, p.bias, c) : 0.0f));
  }
}

/* ---- configurations and launcher --------------------------------------------------- */

/* Large tiles: 128x128, 8 warps of 64x32, 3 stages = 96 KB (fits sm_89's 99 KB). */
#define CFG_L 128, 128, 2, 4, 3
/* Small tiles for small M / few tiles: 32x64, 4 warps of 32x16, 4 stages = 48 KB. */
#define CFG_S 32, 64, 1, 4, 4

static int smem_bytes(int bm, int bn, int stages) { return (bm + bn) * GEMM_BK * stages; }

static int align_of(const void *ptr, int64_t ld) {
  uintptr_t a = (uintptr_t)ptr;
  if (a % 16 == 0 && ld % 16 == 0) return 16;
  if (a % 4 == 0 && ld % 4 == 0) return 4;
  return 1;
}

/* sm_75: the same tiles over two buffers: 128x128 = 64 KB (Turing's most per block), 32x64 = 24 KB. */
#define CFG75_L 128, 128, 2, 4
#define CFG75_S 32, 64, 1, 4

/* With the device current (w8a8_cuda_state_init, once per handle): *code_cc = the virtual architecture (x 10) that
 * the portable kernels' code loaded for this GPU was compiled for (their PTX version: below the GPU's own where
 * the fatbin holds only an older architecture's PTX for it), then the large configurations opted into > 48 KB of
 * dynamic shared memory: the sm_80 kernel's only where that code can run it (96 KB exceeds Turing's 64 KB). */
extern "C" w8a8_status w8a8_cuda_gemm_setup(int cc, int *code_cc) {
  cudaFuncAttributes fa;
  cudaError_t e = cudaFuncGetAttributes(&fa, gemm_mma_kernel<CFG_S, false>);
  if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction) {
    cudaGetLastError();
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "w8a8_create: this libw8a8 holds no code that runs on compute capability %d.%d (`w8a8 version` "
                    "lists the architectures it was built for); rebuild with %d in CUDA_ARCHS, or it or an older "
                    "one in CUDA_ARCHS_PTX",
                    cc / 10, cc % 10, cc);
  }
  if (e != cudaSuccess) return w8a8_cuda_error("w8a8_create", "cudaFuncGetAttributes (GEMM)", e);
  *code_cc = fa.ptxVersion;
  if ((fa.ptxVersion < cc ? fa.ptxVersion : cc) >= 80) {
    e = cudaFuncSetAttribute(gemm_mma_kernel<CFG_L, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             smem_bytes(128, 128, 3));
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(gemm_mma_kernel<CFG_L, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               smem_bytes(128, 128, 3));
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(gemm_mma_kernel<CFG_S, false>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               smem_bytes(32, 64, 4));
    if (e == cudaSuccess)
      e = cudaFuncSetAttribute(gemm_mma_kernel<CFG_S, true>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               smem_bytes(32, 64, 4));
    if (e != cudaSuccess) return w8a8_cuda_error("w8a8_create", "cudaFuncSetAttribute (GEMM shared memory)", e);
  }
  e = cudaFuncSetAttribute(gemm_sm75_kernel<CFG75_L>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           smem_bytes(128, 128, 2));
  if (e != cudaSuccess) return w8a8_cuda_error("w8a8_create", "cudaFuncSetAttribute (sm_75 GEMM shared memory)", e);
  return W8A8_SUCCESS;
}

/* Here rather than in a .c file: the Makefile passes W8A8_HAVE_SM90A to nvcc only. */
extern "C" int w8a8_cuda_have_sm90a(void) {
#if defined(W8A8_HAVE_SM90A)
  return 1;
#else
  return 0;
#endif
}

/* The launch's tiles and split: large tiles when they fill at least one wave of the GPU, else small ones;
 * split-K when the small tiles leave SMs idle (decode: M small, N narrow, K deep): about two CTAs per SM, each
 * split at least 2 K slices, the partials within the workspace. Returns whether the tiles are the large ones. */
static bool plan_gemm(gemm_params *gp, const w8a8_mm_problem *p, int num_sms, void *ws, size_t ws_bytes) {
  gp->p = *p;
  gp->align_a = align_of(p->a, p->lda);
  gp->align_b = align_of(p->b, p->ldb);
  size_t oes = p->out_dtype == W8A8_DTYPE_FP32 ? 4 : 2;
  gp->out_pair = ((uintptr_t)p->out % (2 * oes) == 0) && (p->ldo % 2 == 0);
  int64_t tl = ((p->M + 127) / 128) * ((p->N + 127) / 128);
  bool large = tl >= num_sms;
  int bm = large ? 128 : 32, bn = large ? 128 : 64;
  gp->tiles_m = (p->M + bm - 1) / bm;
  gp->tiles_n = (p->N + bn - 1) / bn;
  const int KT = (int)((p->K + GEMM_BK - 1) / GEMM_BK);
  gp->splits = 1;
  gp->kt_per_split = KT;
  gp->partial = ws;
  int64_t tiles_mn = gp->tiles_m * gp->tiles_n;
  if (!large && tiles_mn < num_sms && KT >= 4) {
    int64_t sp = (2 * (int64_t)num_sms + tiles_mn - 1) / tiles_mn;
    if (sp > KT / 2) sp = KT / 2;
    if (sp > 16) sp = 16;
    while (sp > 1 && (size_t)sp * p->M * p->N * 4 > ws_bytes) sp--;
    if (sp > 1) {
      gp->kt_per_split = (int)((KT + sp - 1) / sp);
      gp->splits = (KT + gp->kt_per_split - 1) / gp->kt_per_split; /* no empty split */
    }
  }
  return large;
}

static unsigned grid_of(const gemm_params &gp) {
  int64_t tiles = gp.tiles_m * gp.tiles_n * gp.splits;
  return (unsigned)(tiles < 2147483647 ? tiles : 2147483647);
}

/* After the GEMM kernel: its launch's status, and with split-K the reduce kernel. */
static w8a8_status finish_gemm(const gemm_params &gp, bool fp8, cudaStream_t stream, int num_sms) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return w8a8_cuda_error("w8a8_scaled_mm", "GEMM kernel launch", e);
  if (gp.splits > 1) {
    int64_t blocks = (gp.p.M * gp.p.N + 255) / 256;
    if (blocks > (int64_t)num_sms * 8) blocks = (int64_t)num_sms * 8;
    if (fp8)
      splitk_reduce<true><<<(unsigned)blocks, 256, 0, stream>>>(gp);
    else
      splitk_reduce<false><<<(unsigned)blocks, 256, 0, stream>>>(gp);
    e = cudaGetLastError();
    if (e != cudaSuccess) return w8a8_cuda_error("w8a8_scaled_mm", "split-K reduce kernel launch", e);
  }
  return W8A8_SUCCESS;
}

extern "C" w8a8_status w8a8_cuda_launch_gemm(const w8a8_mm_problem *p, cudaStream_t stream, int num_sms, void *ws,
                                             size_t ws_bytes) {
  gemm_params gp;
  const bool large = plan_gemm(&gp, p, num_sms, ws, ws_bytes);
  const bool fp8 = p->in_dtype == W8A8_DTYPE_FP8_E4M3;
  const unsigned grid = grid_of(gp);
  if (large) {
    int sm = smem_bytes(128, 128, 3);
    if (fp8)
      gemm_mma_kernel<CFG_L, true><<<grid, 256, sm, stream>>>(gp);
    else
      gemm_mma_kernel<CFG_L, false><<<grid, 256, sm, stream>>>(gp);
  } else {
    int sm = smem_bytes(32, 64, 4);
    if (fp8)
      gemm_mma_kernel<CFG_S, true><<<grid, 128, sm, stream>>>(gp);
    else
      gemm_mma_kernel<CFG_S, false><<<grid, 128, sm, stream>>>(gp);
  }
  return finish_gemm(gp, fp8, stream, num_sms);
}

extern "C" w8a8_status w8a8_cuda_launch_gemm_sm75(const w8a8_mm_problem *p, cudaStream_t stream, int num_sms, void *ws,
                                                  size_t ws_bytes) {
  if (p->in_dtype != W8A8_DTYPE_INT8) /* the dispatcher never asks: fp8 needs sm_89 */
    return w8a8_err(W8A8_ERROR_INTERNAL, "w8a8_scaled_mm: the sm_75 kernel takes int8 only");
  gemm_params gp;
  const bool large = plan_gemm(&gp, p, num_sms, ws, ws_bytes);
  const unsigned grid = grid_of(gp);
  if (large)
    gemm_sm75_kernel<CFG75_L><<<grid, 256, smem_bytes(128, 128, 2), stream>>>(gp);
  else
    gemm_sm75_kernel<CFG75_S><<<grid, 128, smem_bytes(32, 64, 2), stream>>>(gp);
  return finish_gemm(gp, false, stream, num_sms);
}
