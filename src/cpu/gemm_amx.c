/* gemm_amx.c — the int8 and fp8 scaled GEMMs on Intel AMX (tdpbssd; tdpbf16ps on fp8 decoded
 * to bf16), for CPUs that have it (Xeon since Sapphire Rapids). gemm_fast.c dispatches here only after w8a8_cpu_detect found
 * AMX-TILE and AMX-INT8 in CPUID, the tile state enabled in XCR0 and the kernel's
 * permission to use it (arch_prctl ARCH_REQ_XCOMP_PERM), so the whole file is compiled
 * for AMX + AVX-512 (a CPU with AMX has both).
 *
 * Exactness: tdpbssd multiplies signed by signed bytes and adds groups of 4 products into
 * int32 lanes without saturation, so no offset trick (as in the VNNI kernel) is needed:
 * the tiles hold exactly the reference's int32 sums (wrapping like it when the true sum
 * leaves int32, which the header's K bound excludes anyway).
 *
 * Transposed roles: the instruction computes C[i][j] += sum_k L[i][k] * R[k][j] with L a
 * plain row-major tile (16 rows x 64 bytes) and R in the "VNNI" layout (16 rows of k-quads,
 * each row 16 columns x 4 bytes). Our B is N rows of K bytes: already L's layout, so the
 * weights need no re-layout, only a copy into contiguous 1 KiB tiles (pack_b32: loading tiles
 * straight from B with a 4 KiB stride put all 16 rows of a tile into one L1 set and stalled);
 * A, the small operand (<= 256 rows per block), is packed into R's layout once per block.
 * The tiles then hold C^T (n x m), transposed 8 x 8 into row-major bands for the shared AVX2
 * epilogue (zero point, scales, bias, one rounding): the same epilogue as every other int8
 * path, hence the same bits.
 *
 * Blocking: A block of up to AMC rows packed as [16-row panel][64-k chunk][16 quads][16 rows][4]
 * (1 KiB per tile, contiguous), zero-padded in k (to a multiple of 64) and in rows (to 16).
 * Work items = ANB columns x a range of row panels, statically scheduled; in an item, k runs
 * in slices of AKS chunks (4 KiB: the slice of a 256-row A block, 1 MiB, stays in L2; C^T is
 * stored between slices and reloaded into the tiles), and per slice, 32 columns at a time,
 * the weights are packed (zero-padded in k and past N) and run against every pair of row
 * panels: micro-kernel = 2 L tiles (32 columns) x 2 R tiles (32 rows) -> 4 C tiles (tmm0-3).
 * With a single row pair (M <= 32) whole weight tiles are loaded in place instead (each is used
 * once; the copy cost more than the stalls). Meanwhile the next block's weights (the next 32
 * columns, the next slice, or the next item's first block) are prefetched into L2, spread over
 * the tile loops. Each thread loads the tile configuration at the start of the call and
 * releases the tiles at its end. Measurements: bench/results/cpu-gemm-int8-xeon-amx.txt.
 *
 * fp8 (tdpbf16ps, on CPUs that also have AMX-BF16: w8a8_cpu_features.amx_bf16).
 * Why bf16 is exact enough: every e4m3 value (4 significant bits, exponents 2^-9..2^8) is a
 * bf16 value, and the product of two such values (<= 8 significant bits) is exact in fp32;
 * tdpbf16ps adds the products into fp32 lanes (RNE; its DAZ/FTZ never bites: the inputs are
 * normal bf16 or zero, and every sum is a multiple of 2^-18, far above fp32's denormals). So
 * the accumulators are fp32 sums of exact products, as in the FMA kernels; only the order of
 * the additions differs. NaN (0x7f/0xff) decodes to a bf16 NaN and propagates through the
 * tiles' fp32 arithmetic to the output, as in the reference (e4m3fn has no infinities).
 *
 * The same structure with fp8 decoded to bf16 while packing (k chunks of 32, VNNI-2 for A).
 * Roles: L tiles = 16 weight columns x 32 k (bf16, plain rows: the decoded
 * B rows), R tiles = A in the VNNI-2 layout (16 k-pairs x 16 rows x 2), tiles hold C^T (fp32),
 * transposed 8 x 8 into the shared AVX2 epilogue (scales, bias, one rounding), the same
 * epilogue as every other fp8 path. B cannot be loaded in place (it must be decoded), so every
 * block of 32 columns x one k slice is decoded into the slot (128 KiB, L2) and reused by all row
 * pairs of the item. Decoding: a 128-entry table (bf16 bits of |x|) in four zmm, two vpermt2w
 * per 32 bytes plus the sign bit. */
#include "gemm_kernels.h"

#ifdef __clang__
/* clang builds only the fuzz target (the library is gcc's); clang 14 cannot select the tile
 * intrinsics under a per-function target ("Cannot select: intrinsic %llvm.x86.ldtilecfg"), so
 * there the AMX path is left out and the VNNI/AVX2 paths run. */
w8a8_status w8a8_gemm_amx(const w8a8_mm_problem *p, const w8a8_gemm_ws *ws, int nthreads) {
  (void)p, (void)ws, (void)nthreads;
  return W8A8_ERROR_UNSUPPORTED_DEVICE;
}
#else
#pragma GCC target("amx-tile,amx-int8,amx-bf16,avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#include <immintrin.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "avx_tr8x8.h"

#define TR 16    /* tile rows */
#define TB 64    /* tile row bytes: 64 int8 or 32 bf16 (k per chunk) */
#define KCH_S8 64
#define KCH_F8 32
#define ANB 256  /* output columns per work item (C^T, 32-bit lanes: 256 KiB at 256 rows) */
#define AKS 64   /* k chunks per slice (4096 int8 / 2048 fp8 k): A slice <= 1 MiB, 32 packed columns 128 KiB */
#define AMC 256  /* rows of A per block (multiple of 32) */

/* gcc's tile intrinsics are asm statements that take only the address: tell the compiler
 * that memory written before a load (packed weights) or by a store (C^T) is really used/changed. */
#define MEM_BARRIER() __asm__ volatile("" ::: "memory")

typedef struct tile_config {
  uint8_t palette_id, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} tile_config;

/* Packs the 16-row panel starting at row r0 of A (rows < `rows` valid, the rest zero) for
 * k chunk kc into dst (1 KiB): dst[q][r][0..3] = A[r0 + r][64 kc + 4 q + 0..3], zero past K. */
static void pack_a_s8(const int8_t *a, int64_t lda, int rows, int64_t K, int64_t kc, uint8_t *dst) {
  const int64_t k0 = kc * TB;
  if (rows == TR && k0 + TB <= K && 15 * lda < ((int64_t)1 << 31)) {
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)lda));
    for (int q = 0; q < TR; q++)
      _mm512_storeu_si512((void *)(dst + q * 64), _mm512_i32gather_epi32(idx, (const void *)(a + k0 + 4 * q), 1));
    return;
  }
  memset(dst, 0, TR * TB);
  for (int r = 0; r < rows; r++) {
    const int64_t len = K - k0 >= TB ? TB : K - k0;
    for (int64_t k = 0; k < len; k++) dst[(k / 4) * 64 + r * 4 + (k & 3)] = (uint8_t)a[r * lda + k0 + k];
  }
}

/* Packs weight columns [n, n + 32) (columns past N zero) into dst as 1 KiB tiles
 * [2 groups of 16 columns][chunks kc0..kc1][16 columns][64 bytes of k], k zero-padded past K.
 * Contiguous tiles: loaded straight from B (stride ldb, often 4 KiB) all 16 rows of a tile
 * fall into one L1 set, and the tile loads stalled on L2 (measured: 4x below the tdpbssd rate). */
static void pack_b32_s8(const w8a8_mm_problem *p, int64_t n, int64_t kc0, int64_t kc1, uint8_t *dst) {
  const int64_t K = p->K, nks = kc1 - kc0;
  for (int r = 0; r < 2 * TR; r++) {
    uint8_t *d = dst + (int64_t)(r / TR) * nks * 1024 + (r % TR) * TB;
    if (n + r >= p->N) {
      for (int64_t kc = 0; kc < nks; kc++) _mm512_storeu_si512((void *)(d + kc * 1024), _mm512_setzero_si512());
      continue;
    }
    const int8_t *src = (const int8_t *)p->b + (n + r) * p->ldb;
    for (int64_t kc = kc0; kc < kc1; kc++) {
      const int64_t k0 = kc * TB;
      const __m512i v = k0 + TB <= K ? _mm512_loadu_si512((const void *)(src + k0))
                                     : _mm512_maskz_loadu_epi8(((__mmask64)1 << (K - k0)) - 1, src + k0);
      _mm512_storeu_si512((void *)(d + (kc - kc0) * 1024), v);
    }
  }
}

/* bf16 bits of the e4m3 magnitudes 0x00..0x7f (0x7f: NaN). Generated from the e4m3 definition
 * (2^(e-7) * (1 + m/8), subnormals m * 2^-9); the tests check every decoded value against the
 * reference's through the GEMM. */
static const uint16_t FP8_BF16[128] __attribute__((aligned(64))) = {
    0x0000, 0x3b00, 0x3b80, 0x3bc0, 0x3c00, 0x3c20, 0x3c40, 0x3c60,
    0x3c80, 0x3c90, 0x3ca0, 0x3cb0, 0x3cc0, 0x3cd0, 0x3ce0, 0x3cf0,
    0x3d00, 0x3d10, 0x3d20, 0x3d30, 0x3d40, 0x3d50, 0x3d60, 0x3d70,
    0x3d80, 0x3d90, 0x3da0, 0x3db0, 0x3dc0, 0x3dd0, 0x3de0, 0x3df0,
    0x3e00, 0x3e10, 0x3e20, 0x3e30, 0x3e40, 0x3e50, 0x3e60, 0x3e70,
    0x3e80, 0x3e90, 0x3ea0, 0x3eb0, 0x3ec0, 0x3ed0, 0x3ee0, 0x3ef0,
    0x3f00, 0x3f10, 0x3f20, 0x3f30, 0x3f40, 0x3f50, 0x3f60, 0x3f70,
    0x3f80, 0x3f90, 0x3fa0, 0x3fb0, 0x3fc0, 0x3fd0, 0x3fe0, 0x3ff0,
    0x4000, 0x4010, 0x4020, 0x4030, 0x4040, 0x4050, 0x4060, 0x4070,
    0x4080, 0x4090, 0x40a0, 0x40b0, 0x40c0, 0x40d0, 0x40e0, 0x40f0,
    0x4100, 0x4110, 0x4120, 0x4130, 0x4140, 0x4150, 0x4160, 0x4170,
    0x4180, 0x4190, 0x41a0, 0x41b0, 0x41c0, 0x41d0, 0x41e0, 0x41f0,
    0x4200, 0x4210, 0x4220, 0x4230, 0x4240, 0x4250, 0x4260, 0x4270,
    0x4280, 0x4290, 0x42a0, 0x42b0, 0x42c0, 0x42d0, 0x42e0, 0x42f0,
    0x4300, 0x4310, 0x4320, 0x4330, 0x4340, 0x4350, 0x4360, 0x4370,
    0x4380, 0x4390, 0x43a0, 0x43b0, 0x43c0, 0x43d0, 0x43e0, 0x7fc0,
};

typedef struct dec_tab { __m512i t0, t1, t2, t3; } dec_tab;

static inline dec_tab dec_tab_load(void) {
  dec_tab t;
  t.t0 = _mm512_load_si512((const void *)FP8_BF16);
  t.t1 = _mm512_load_si512((const void *)(FP8_BF16 + 32));
  t.t2 = _mm512_load_si512((const void *)(FP8_BF16 + 64));
  t.t3 = _mm512_load_si512((const void *)(FP8_BF16 + 96));
  return t;
}

/* 32 fp8 bytes -> 32 bf16 (one zmm). */
static inline __m512i fp8x32_to_bf16(const dec_tab *t, __m256i s) {
  const __m512i w = _mm512_cvtepu8_epi16(s);
  const __m512i lo = _mm512_permutex2var_epi16(t->t0, w, t->t1); /* index bits 0-5 */
  const __m512i hi = _mm512_permutex2var_epi16(t->t2, w, t->t3);
  const __m512i mag = _mm512_mask_blend_epi16(_mm512_test_epi16_mask(w, _mm512_set1_epi16(0x40)), lo, hi);
  /* mag | (w << 8 & 0x8000): the sign bit */
  return _mm512_ternarylogic_epi32(mag, _mm512_slli_epi16(w, 8), _mm512_set1_epi16((short)0x8000), 0xF8);
}

/* Packs the 16-row panel at row r0 of A (rows < `rows` valid, the rest zero) for k chunk kc
 * into dst (1 KiB, VNNI-2): dst[q][r][0..1] = bf16(A[r][32 kc + 2 q + 0..1]), zero past K. */
static void pack_a_f8(const dec_tab *t, const uint8_t *a, int64_t lda, int rows, int64_t K, int64_t kc,
                      uint8_t *dst) {
  const int64_t k0 = kc * KCH_F8, len = K - k0 >= KCH_F8 ? KCH_F8 : K - k0;
  uint16_t tmp[TR][KCH_F8] __attribute__((aligned(64)));
  const __mmask32 km = len == KCH_F8 ? (__mmask32)~0u : (((__mmask32)1 << len) - 1);
  for (int r = 0; r < TR; r++) {
    __m512i v = _mm512_setzero_si512();
    if (r < rows) v = fp8x32_to_bf16(t, _mm256_maskz_loadu_epi8(km, a + r * lda + k0));
    _mm512_store_si512((void *)tmp[r], v); /* masked-off k decode 0x00 -> +0 */
  }
  const __m512i idx = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
  for (int q = 0; q < TR; q++)
    _mm512_storeu_si512((void *)(dst + q * 64), _mm512_i32gather_epi32(idx, (const void *)((const uint32_t *)tmp + q), 4));
}

/* Decodes weight columns [n, n + 32) (past N: zero) for chunks [kc0, kc1) into dst as 1 KiB
 * tiles [2 groups of 16 columns][chunk][16 columns][32 bf16], zero past K. */
static void pack_b32_f8(const dec_tab *t, const w8a8_mm_problem *p, int64_t n, int64_t kc0, int64_t kc1, uint8_t *dst) {
  const int64_t K = p->K, nks = kc1 - kc0;
  for (int r = 0; r < 2 * TR; r++) {
    uint8_t *d = dst + (int64_t)(r / TR) * nks * 1024 + (r % TR) * TB;
    if (n + r >= p->N) {
      for (int64_t kc = 0; kc < nks; kc++) _mm512_storeu_si512((void *)(d + kc * 1024), _mm512_setzero_si512());
      continue;
    }
    const uint8_t *src = (const uint8_t *)p->b + (n + r) * p->ldb;
    for (int64_t kc = kc0; kc < kc1; kc++) {
      const int64_t k0 = kc * KCH_F8;
      const __m256i s = k0 + KCH_F8 <= K ? _mm256_loadu_si256((const __m256i *)(src + k0))
                                      : _mm256_maskz_loadu_epi8(((__mmask32)1 << (K - k0)) - 1, src + k0);
      _mm512_storeu_si512((void *)(d + (kc - kc0) * 1024), fp8x32_to_bf16(t, s));
    }
  }
}

typedef struct b_prefetch { /* the next 32 weight columns' bytes, fetched into L2 during the tile loops */
  const uint8_t *base;           /* column 0 of them at the block's first k, NULL: none */
  int64_t ldb, nln, next, total; /* line index next of total = columns x nln 64-byte lines */
  int per;                       /* lines per chunk iteration */
} b_prefetch;

static inline void prefetch_some(b_prefetch *pf) {
  for (int i = 0; i < pf->per && pf->next < pf->total; i++, pf->next++) {
    const int64_t r = pf->next / pf->nln, l = pf->next % pf->nln;
    _mm_prefetch((const char *)(pf->base + r * pf->ldb + l * 64), _MM_HINT_T1);
  }
}

/* One micro-tile (NAME; DP = tdpbssd for int8, tdpbf16ps for fp8): 32 weight columns (L tiles at l0 and l1, rows lstride bytes apart, chunks
 * lstep apart: packed or in place) x rows of panels pp, pp + 1 (two: 1 if only one is left),
 * k chunks [kc0, kc0 + nks); C^T at ct (n-major, ld ldct; int32 or fp32 lanes), added to what is there when acc. */
#define AMX_MICRO(NAME, DP) \
static void NAME(const uint8_t *apk, const uint8_t *l0, const uint8_t *l1, int64_t lstride, int64_t lstep, \
                 int64_t nkc, int64_t kc0, int64_t nks, int64_t pp, int two, float *ct, int64_t ldct, int acc, \
                 b_prefetch *pf) { \
  const int64_t ldc = ldct * 4; \
  const uint8_t *r0 = apk + (pp * nkc + kc0) * 1024, *r1 = r0 + nkc * 1024; \
  if (acc) { \
    _tile_loadd(0, ct, ldc); \
    _tile_loadd(2, ct + TR * ldct, ldc); \
    if (two) { \
      _tile_loadd(1, ct + TR, ldc); \
      _tile_loadd(3, ct + TR * ldct + TR, ldc); \
    } \
  } else { \
    _tile_zero(0); \
    _tile_zero(1); \
    _tile_zero(2); \
    _tile_zero(3); \
  } \
  if (two) { \
    for (int64_t kc = 0; kc < nks; kc++) { \
      if (pf->base) prefetch_some(pf); \
      _tile_loadd(4, l0 + kc * lstep, lstride); \
      _tile_loadd(6, r0 + kc * 1024, TB); \
      DP(0, 4, 6); \
      _tile_loadd(5, l1 + kc * lstep, lstride); \
      DP(2, 5, 6); \
      _tile_loadd(7, r1 + kc * 1024, TB); \
      DP(1, 4, 7); \
      DP(3, 5, 7); \
    } \
  } else { \
    for (int64_t kc = 0; kc < nks; kc++) { \
      if (pf->base) prefetch_some(pf); \
      _tile_loadd(4, l0 + kc * lstep, lstride); \
      _tile_loadd(6, r0 + kc * 1024, TB); \
      DP(0, 4, 6); \
      _tile_loadd(5, l1 + kc * lstep, lstride); \
      DP(2, 5, 6); \
    } \
  } \
  _tile_stored(0, ct, ldc); \
  _tile_stored(2, ct + TR * ldct, ldc); \
  if (two) { \
    _tile_stored(1, ct + TR, ldc); \
    _tile_stored(3, ct + TR * ldct + TR, ldc); \
  } \
  MEM_BARRIER(); \
}
AMX_MICRO(micro_s8, _tile_dpbssd)
AMX_MICRO(micro_f8, _tile_dpbf16ps)
#undef AMX_MICRO

/* One work item (t: the fp8 decode table; NULL: int8): row panels [p0, p1) of the packed block (rows ic..ic+mcur), columns [n0, n1):
 * per k slice, 32 columns at a time packed (pack_b32: 32 x 4 KiB, L2-resident) and run against
 * every row pair of the item; then the epilogue over the item's outputs. */
static void run_item(const dec_tab *t, const w8a8_mm_problem *p, const uint8_t *apk, int64_t nkc, int64_t ic,
                     int64_t mcur, int64_t p0, int64_t p1, int64_t n0, int64_t n1, char *slot) {
  const int64_t kch = t ? KCH_F8 : KCH_S8;
  const int64_t ldct = (p1 - p0) * TR; /* <= AMC */
  float *ct = (float *)slot;                                      /* [ANB][ldct] */
  float *cr = (float *)(slot + (size_t)ANB * AMC * 4);            /* [8][ANB] */
  uint8_t *bpk = (uint8_t *)(slot + (size_t)ANB * AMC * 4 + (size_t)8 * ANB * 4); /* 32 x AKS bytes */
  /* While the tiles run on one block of 32 columns, the next block's weights (the part of the
   * call that comes from DRAM) are prefetched into L2, spread evenly over the tile loops. */
  const int64_t npairs = (p1 - p0 + 1) / 2;
  for (int64_t kc0 = 0; kc0 < nkc; kc0 += AKS) {
    const int64_t kc1 = kc0 + AKS < nkc ? kc0 + AKS : nkc;
    for (int64_t n = n0; n < n1; n += 2 * TR) {
      /* One row pair (M <= 32): each weight tile is used once, so copying it costs more than the
       * stalls of loading it in place (memory-bound anyway); only whole tiles are read in place. */
      const uint8_t *l0 = bpk, *l1 = bpk + (kc1 - kc0) * 1024;
      int64_t lstride = TB, lstep = 1024;
      if (!t && npairs == 1 && n + 2 * TR <= p->N && kc1 * TB <= p->K) {
        l0 = (const uint8_t *)p->b + n * p->ldb + kc0 * TB, l1 = l0 + TR * p->ldb;
        lstride = p->ldb, lstep = TB;
      } else {
        if (t)
          pack_b32_f8(t, p, n, kc0, kc1, bpk); /* fp8 is decoded: never in place */
        else
          pack_b32_s8(p, n, kc0, kc1, bpk);
        MEM_BARRIER();
      }
      /* the block after this one: the next 32 columns, or the first ones of the next k slice */
      /* (after the item's last block: the first block of the columns after the item, which this
       * thread takes next under the static schedule) */
      int64_t nn = n + 2 * TR, nk0 = kc0, nk1 = kc1, nlim = n1;
      if (nn >= n1) {
        nn = n0, nk0 = kc1, nk1 = kc1 + AKS < nkc ? kc1 + AKS : nkc;
        if (nk0 >= nkc) nn = n1, nk0 = 0, nk1 = AKS < nkc ? AKS : nkc, nlim = p->N;
      }
      b_prefetch pf;
      pf.base = nn < nlim ? (const uint8_t *)p->b + nn * p->ldb + nk0 * kch : NULL;
      pf.ldb = p->ldb, pf.nln = ((nk1 - nk0) * kch + 63) / 64, pf.next = 0;
      pf.total = (nlim - nn < 2 * TR ? nlim - nn : 2 * TR) * pf.nln;
      pf.per = (int)((pf.total + npairs * (kc1 - kc0) - 1) / (npairs * (kc1 - kc0)));
      for (int64_t pp = p0; pp < p1; pp += 2)
        if (t)
          micro_f8(apk, l0, l1, lstride, lstep, nkc, kc0, kc1 - kc0, pp, pp + 1 < p1, ct + (n - n0) * ldct + (pp - p0) * TR,
                   ldct, kc0 > 0, &pf);
        else
          micro_s8(apk, l0, l1, lstride, lstep, nkc, kc0, kc1 - kc0, pp, pp + 1 < p1, ct + (n - n0) * ldct + (pp - p0) * TR,
                   ldct, kc0 > 0, &pf);
    }
  }
  /* C^T -> row-major, 8 rows at a time (8 x 8 blocks), each band straight into the epilogue;
   * columns past ncols (up to a multiple of 8) carry values the epilogue never reads. */
  const int64_t r0 = p0 * TR, r1 = p1 * TR < mcur ? p1 * TR : mcur, ncols = n1 - n0;
  for (int64_t r = 0; r < r1 - r0; r += 8) {
    for (int64_t j = 0; j < ncols; j += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; i++) v[i] = _mm256_loadu_ps(ct + (j + i) * ldct + r);
      tr8x8(v);
      for (int i = 0; i < 8; i++) _mm256_storeu_ps(cr + i * ANB + j, v[i]);
    }
    w8a8_avx2_epilogue(p, cr, ANB, ic + r0 + r, r1 - r0 - r < 8 ? r1 - r0 - r : 8, n0, ncols);
  }
}

w8a8_status w8a8_gemm_amx(const w8a8_mm_problem *p, const w8a8_gemm_ws *ws, int nthreads) {
  const int64_t M = p->M, N = p->N, K = p->K;
  if (M == 0 || N == 0) return W8A8_SUCCESS;
  const int f8 = p->in_dtype == W8A8_DTYPE_FP8_E4M3;
  /* K == 0: all-zero sums, the other paths handle it */
  if (K == 0 || (!f8 && p->in_dtype != W8A8_DTYPE_INT8)) return W8A8_ERROR_UNSUPPORTED_DEVICE;
  const int64_t kch = f8 ? KCH_F8 : KCH_S8, nkc = (K + kch - 1) / kch, Kp = nkc * TB; /* bytes of a packed A row */
  /* the slot holds C^T, 8 rows of C and 32 packed weight columns of one k slice */
  if ((size_t)ANB * AMC * 4 + (size_t)8 * ANB * 4 + (size_t)32 * AKS * TB > W8A8_CPU_SLOT_BYTES)
    return W8A8_ERROR_UNSUPPORTED_DEVICE;
  int64_t mc = AMC;
  if ((int64_t)(W8A8_CPU_A_BYTES / (size_t)Kp) < mc) mc = (int64_t)(W8A8_CPU_A_BYTES / (size_t)Kp) / 32 * 32;
  if (mc < 32) return W8A8_ERROR_UNSUPPORTED_DEVICE;
  mc = w8a8_cpu_equal_blocks(M, mc, TR);
  const int64_t items_n = (N + ANB - 1) / ANB;
  const int T = w8a8_cpu_gemm_threads(p, ws, nthreads);
#pragma omp parallel num_threads(T)
  {
#ifdef _OPENMP
    const int tid = omp_get_thread_num();
    const int nth = omp_get_num_threads();
#else
    const int tid = 0, nth = 1;
#endif
    const dec_tab tab = dec_tab_load(); /* fp8 only (four loads) */
    char *slot = ws->slots + (size_t)tid * W8A8_CPU_SLOT_BYTES;
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette_id = 1;
    for (int t = 0; t < 8; t++) cfg.colsb[t] = TB, cfg.rows[t] = TR;
    _tile_loadconfig(&cfg);
    for (int64_t ic = 0; ic < M; ic += mc) {
      const int64_t mcur = M - ic < mc ? M - ic : mc, np = (mcur + TR - 1) / TR;
      uint8_t *apk = (uint8_t *)ws->a;
#pragma omp for schedule(static)
      for (int64_t t = 0; t < np * nkc; t++) {
        const int64_t pp = t / nkc, kc = t % nkc;
        const int64_t rows = mcur - pp * TR < TR ? mcur - pp * TR : TR;
        if (f8)
          pack_a_f8(&tab, (const uint8_t *)p->a + (ic + pp * TR) * p->lda, p->lda, (int)rows, K, kc,
                    apk + (size_t)t * 1024);
        else
          pack_a_s8((const int8_t *)p->a + (ic + pp * TR) * p->lda, p->lda, (int)rows, K, kc, apk + (size_t)t * 1024);
      }
      /* fewer column items than threads (small N): split the rows too, in pairs of panels */
      const int64_t npairs = (np + 1) / 2;
      int64_t msplit = 1;
      if (items_n < nth) {
        msplit = (nth + items_n - 1) / items_n;
        if (msplit > npairs) msplit = npairs;
      }
      const int64_t pps = (npairs + msplit - 1) / msplit * 2; /* panels per split */
#pragma omp for schedule(static)
      for (int64_t it = 0; it < items_n * msplit; it++) {
        const int64_t pn = it / msplit, ms = it % msplit;
        const int64_t q0 = ms * pps, q1 = q0 + pps < np ? q0 + pps : np;
        const int64_t n0 = pn * ANB, n1 = n0 + ANB < N ? n0 + ANB : N;
        if (q0 < q1) run_item(f8 ? &tab : NULL, p, apk, nkc, ic, mcur, q0, q1, n0, n1, slot);
      }
    }
    _tile_release();
  }
  return W8A8_SUCCESS;
}

#endif /* !__clang__ */
