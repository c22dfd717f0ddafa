/* gemm_amx.c — the int8 scaled GEMM on Intel AMX (tdpbssd), for CPUs that have it (Xeon
 * since Sapphire Rapids). gemm_fast.c dispatches here only after w8a8_cpu_detect found
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
 * releases the tiles at its end. Measurements: bench/results/cpu-bench-2026-11-29-s3-amx.txt. */
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
#pragma GCC target("amx-tile,amx-int8,avx512f,avx512bw,avx2,fma,f16c")
#include <immintrin.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "avx_tr8x8.h"

#define TR 16    /* tile rows */
#define TB 64    /* tile row bytes (k per chunk) */
#define ANB 256  /* output columns per work item (C^T: 256 KiB at 256 rows) */
#define AKS 64   /* k chunks per slice: 4 KiB of k, A slice <= 1 MiB and 32 packed columns 128 KiB */
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
static void pack_a_tile(const int8_t *a, int64_t lda, int rows, int64_t K, int64_t kc, uint8_t *dst) {
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
static void pack_b32(const w8a8_mm_problem *p, int64_t n, int64_t kc0, int64_t kc1, uint8_t *dst) {
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

typedef struct b_prefetch { /* the next 32 weight columns, fetched into L2 during the tile loops */
  const int8_t *base;        /* column 0 of them, NULL: none */
  int64_t ldb, nkc, next, total; /* line index next of total = 32 * nkc (column-major by chunk) */
  int per;                   /* lines per chunk iteration */
} b_prefetch;

static inline void prefetch_some(b_prefetch *pf) {
  for (int i = 0; i < pf->per && pf->next < pf->total; i++, pf->next++) {
    const int64_t r = pf->next / pf->nkc, kc = pf->next % pf->nkc;
    _mm_prefetch((const char *)(pf->base + r * pf->ldb + kc * TB), _MM_HINT_T1);
  }
}

/* One micro-tile: 32 weight columns (L tiles at l0 and l1, rows lstride bytes apart, chunks
 * lstep apart: packed or in place) x rows of panels pp, pp + 1 (two: 1 if only one is left),
 * k chunks [kc0, kc0 + nks); C^T at ct (n-major, ld ldct int32), added to what is there when acc. */
static void micro(const uint8_t *apk, const uint8_t *l0, const uint8_t *l1, int64_t lstride, int64_t lstep,
                  int64_t nkc, int64_t kc0, int64_t nks, int64_t pp, int two, int32_t *ct, int64_t ldct, int acc,
                  b_prefetch *pf) {
  const int64_t ldc = ldct * 4;
  const uint8_t *r0 = apk + (pp * nkc + kc0) * 1024, *r1 = r0 + nkc * 1024;
  if (acc) {
    _tile_loadd(0, ct, ldc);
    _tile_loadd(2, ct + TR * ldct, ldc);
    if (two) {
      _tile_loadd(1, ct + TR, ldc);
      _tile_loadd(3, ct + TR * ldct + TR, ldc);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  if (two) {
    for (int64_t kc = 0; kc < nks; kc++) {
      if (pf->base) prefetch_some(pf);
      _tile_loadd(4, l0 + kc * lstep, lstride);
      _tile_loadd(6, r0 + kc * 1024, TB);
      _tile_dpbssd(0, 4, 6);
      _tile_loadd(5, l1 + kc * lstep, lstride);
      _tile_dpbssd(2, 5, 6);
      _tile_loadd(7, r1 + kc * 1024, TB);
      _tile_dpbssd(1, 4, 7);
      _tile_dpbssd(3, 5, 7);
    }
  } else {
    for (int64_t kc = 0; kc < nks; kc++) {
      if (pf->base) prefetch_some(pf);
      _tile_loadd(4, l0 + kc * lstep, lstride);
      _tile_loadd(6, r0 + kc * 1024, TB);
      _tile_dpbssd(0, 4, 6);
      _tile_loadd(5, l1 + kc * lstep, lstride);
      _tile_dpbssd(2, 5, 6);
    }
  }
  _tile_stored(0, ct, ldc);
  _tile_stored(2, ct + TR * ldct, ldc);
  if (two) {
    _tile_stored(1, ct + TR, ldc);
    _tile_stored(3, ct + TR * ldct + TR, ldc);
  }
  MEM_BARRIER();
}

/* One work item: row panels [p0, p1) of the packed block (rows ic..ic+mcur), columns [n0, n1):
 * per k slice, 32 columns at a time packed (pack_b32: 32 x 4 KiB, L2-resident) and run against
 * every row pair of the item; then the epilogue over the item's outputs. */
static void run_item(const w8a8_mm_problem *p, const uint8_t *apk, int64_t nkc, int64_t ic, int64_t mcur, int64_t p0,
                     int64_t p1, int64_t n0, int64_t n1, char *slot) {
  const int64_t ldct = (p1 - p0) * TR; /* <= AMC */
  int32_t *ct = (int32_t *)slot;                                  /* [ANB][ldct] */
  int32_t *cr = (int32_t *)(slot + (size_t)ANB * AMC * 4);        /* [8][ANB] */
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
      if (npairs == 1 && n + 2 * TR <= p->N && kc1 * TB <= p->K) {
        l0 = (const uint8_t *)p->b + n * p->ldb + kc0 * TB, l1 = l0 + TR * p->ldb;
        lstride = p->ldb, lstep = TB;
      } else {
        pack_b32(p, n, kc0, kc1, bpk);
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
      pf.base = nn < nlim ? (const int8_t *)p->b + nn * p->ldb + nk0 * TB : NULL;
      pf.ldb = p->ldb, pf.nkc = nk1 - nk0, pf.next = 0;
      pf.total = (nlim - nn < 2 * TR ? nlim - nn : 2 * TR) * (nk1 - nk0);
      pf.per = (int)((pf.total + npairs * (kc1 - kc0) - 1) / (npairs * (kc1 - kc0)));
      for (int64_t pp = p0; pp < p1; pp += 2)
        micro(apk, l0, l1, lstride, lstep, nkc, kc0, kc1 - kc0, pp, pp + 1 < p1, ct + (n - n0) * ldct + (pp - p0) * TR, ldct, kc0 > 0,
              &pf);
    }
  }
  /* C^T -> row-major, 8 rows at a time (8 x 8 blocks), each band straight into the epilogue;
   * columns past ncols (up to a multiple of 8) carry values the epilogue never reads. */
  const int64_t r0 = p0 * TR, r1 = p1 * TR < mcur ? p1 * TR : mcur, ncols = n1 - n0;
  for (int64_t r = 0; r < r1 - r0; r += 8) {
    for (int64_t j = 0; j < ncols; j += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; i++) v[i] = _mm256_loadu_ps((const float *)(ct + (j + i) * ldct + r));
      tr8x8(v);
      for (int i = 0; i < 8; i++) _mm256_storeu_ps((float *)(cr + i * ANB + j), v[i]);
    }
    w8a8_avx2_epilogue(p, cr, ANB, ic + r0 + r, r1 - r0 - r < 8 ? r1 - r0 - r : 8, n0, ncols);
  }
}

w8a8_status w8a8_gemm_amx(const w8a8_mm_problem *p, const w8a8_gemm_ws *ws, int nthreads) {
  const int64_t M = p->M, N = p->N, K = p->K;
  if (M == 0 || N == 0) return W8A8_SUCCESS;
  if (K == 0) return W8A8_ERROR_UNSUPPORTED_DEVICE; /* all-zero sums: the other paths handle it */
  const int64_t Kp = (K + TB - 1) / TB * TB, nkc = Kp / TB;
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
        pack_a_tile((const int8_t *)p->a + (ic + pp * TR) * p->lda, p->lda, (int)rows, K, kc,
                    apk + (size_t)t * 1024);
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
        if (q0 < q1) run_item(p, apk, nkc, ic, mcur, q0, q1, n0, n1, slot);
      }
    }
    _tile_release();
  }
  return W8A8_SUCCESS;
}

#endif /* !__clang__ */
