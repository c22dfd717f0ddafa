/* gemm_avx512vnni.c — the int8 scaled GEMM with AVX-512 VNNI (vpdpbusd), for CPUs that
 * have it (Intel since Cascade Lake, AMD since Zen 4); gemm_fast.c dispatches here only
 * after checking avx512f/bw/vnni, so the whole file is compiled for those.
 *
 * Exactness: vpdpbusd multiplies unsigned bytes by signed bytes and adds the four
 * products into an int32 lane without saturation (vpdpbusds is the saturating one). A is
 * made unsigned as u = a + 128 (a ^ 0x80, in [0, 255]), so
 *   sum_k a_k b_k = sum_k u_k b_k - 128 * sum_k b_k,
 * each step of 4 products is at most 4 * 255 * 128 < 2^18, accumulation wraps in int32
 * like the AVX2 kernels, and the column-sum correction is subtracted in the same wrapping
 * arithmetic: the result equals the reference bit for bit whenever the true sum fits
 * int32 (the header's K bound).
 *
 * Blocking mirrors the AVX2 outer path (gemm_kernels.h): A packed once per block into
 * transposed panels of 32 rows as k-quads [K/4][32 rows][4 bytes] (two zmm per quad),
 * B read raw (a column's 4 consecutive bytes are one broadcast int32: no conversion of B
 * at all), 32 x 12 micro-tiles (24 zmm accumulators), a column-major int32 C tile per
 * work item, corrected, transposed, and passed to the AVX2 epilogue. */
#pragma GCC target("avx512f,avx512bw,avx512vnni,avx2,fma,f16c")
#ifdef __clang__ /* clang ignores the GCC pragma (the fuzz build compiles this file with clang) */
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vnni,avx2,fma,f16c"))), \
                             apply_to = function)
#endif
#include <immintrin.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "avx_tr8x8.h"
#include "gemm_kernels.h"

#define VR 32   /* rows per micro-tile and per packed panel (two 16-lane zmm) */
#define VNR 12  /* columns per micro-tile */
#define VKC 1024 /* k per slice: A panel 32 KiB + 12 columns of B 12 KiB */

/* Packs rows [0, rows) (rows <= 32; the rest zero) of A (int8, ld lda), k in [0, K), as
 * u = a ^ 0x80 into dst[Kp/4][32][4]. Padding (k >= K or rows past `rows`) is u = 0, so
 * it contributes nothing to sum u*b; the correction uses sum b over k < K only. */
static void pack_a_vnni(const int8_t *src, int64_t lda, int rows, int64_t K, int64_t Kp, uint8_t *dst) {
  const __m128i flip = _mm_set1_epi8((char)0x80);
  for (int64_t k = 0; k < Kp; k += 16) {
    const int64_t len = K - k >= 16 ? 16 : (K - k > 0 ? K - k : 0);
    for (int r = 0; r < VR; r++) {
      uint32_t w[4] = {0, 0, 0, 0};
      if (r < rows && len > 0) {
        uint8_t tmp[16] = {0};
        memcpy(tmp, src + (int64_t)r * lda + k, (size_t)len);
        __m128i v = _mm_xor_si128(_mm_loadu_si128((const __m128i *)tmp), flip);
        if (len < 16) { /* padded k must stay 0, not 0 ^ 0x80 */
          const __m128i idx = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
          v = _mm_and_si128(v, _mm_cmpgt_epi8(_mm_set1_epi8((char)len), idx));
        }
        _mm_storeu_si128((__m128i *)w, v);
      }
      /* quad k/4 + i of row r at ((k/4 + i) * 32 + r) * 4 */
      for (int i = 0; i < 4; i++) memcpy(dst + ((k / 4 + i) * VR + r) * 4, &w[i], 4);
    }
  }
}

/* sum_k b[k], k < K, in wrapping int32 (|sum| <= 128 K fits anyway). */
static int32_t col_sum(const int8_t *b, int64_t K) {
  __m512i acc = _mm512_setzero_si512();
  const __m512i ones = _mm512_set1_epi8(1);
  int64_t k = 0;
  for (; k + 64 <= K; k += 64) acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512((const void *)(b + k)));
  int32_t s = _mm512_reduce_add_epi32(acc);
  for (; k < K; k++) s += b[k];
  return s;
}

#define W8A8_VNNI_COL(bj, x0, x1)                        \
  do {                                                  \
    int32_t w_;                                         \
    memcpy(&w_, bj + 4 * q, 4);                         \
    const __m512i v_ = _mm512_set1_epi32(w_);           \
    x0 = _mm512_dpbusd_epi32(x0, a0, v_);               \
    x1 = _mm512_dpbusd_epi32(x1, a1, v_);               \
  } while (0)

/* a: packed panel at the slice start (128 bytes per quad); b: raw B column 0 of the tile
 * at the slice start (ld ldb; columns past nr repeat the last, not stored); nq quads.
 * c[j*ldc + r] (+)= sum u[r,k] * b[j,k]. */
__attribute__((noinline)) static void kern_vnni(const uint8_t *a, const int8_t *b, int64_t ldb, int nr, int64_t nq,
                                                int32_t *c, int64_t ldc, int accumulate) {
  const int8_t *bp[VNR];
  for (int j = 0; j < VNR; j++) bp[j] = b + (j < nr ? j : nr - 1) * ldb;
  const int8_t *b0 = bp[0], *b1 = bp[1], *b2 = bp[2], *b3 = bp[3], *b4 = bp[4], *b5 = bp[5], *b6 = bp[6],
               *b7 = bp[7], *b8 = bp[8], *b9 = bp[9], *b10 = bp[10], *b11 = bp[11];
  __m512i z = _mm512_setzero_si512();
  __m512i c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z, c41 = z, c50 = z, c51 = z,
          c60 = z, c61 = z, c70 = z, c71 = z, c80 = z, c81 = z, c90 = z, c91 = z, ca0 = z, ca1 = z, cb0 = z, cb1 = z;
  for (int64_t q = 0; q < nq; q++) {
    const __m512i a0 = _mm512_loadu_si512((const void *)(a + 128 * q));
    const __m512i a1 = _mm512_loadu_si512((const void *)(a + 128 * q + 64));
    W8A8_VNNI_COL(b0, c00, c01);
    W8A8_VNNI_COL(b1, c10, c11);
    W8A8_VNNI_COL(b2, c20, c21);
    W8A8_VNNI_COL(b3, c30, c31);
    W8A8_VNNI_COL(b4, c40, c41);
    W8A8_VNNI_COL(b5, c50, c51);
    W8A8_VNNI_COL(b6, c60, c61);
    W8A8_VNNI_COL(b7, c70, c71);
    W8A8_VNNI_COL(b8, c80, c81);
    W8A8_VNNI_COL(b9, c90, c91);
    W8A8_VNNI_COL(b10, ca0, ca1);
    W8A8_VNNI_COL(b11, cb0, cb1);
  }
  const __m512i r[2 * VNR] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51,
                              c60, c61, c70, c71, c80, c81, c90, c91, ca0, ca1, cb0, cb1};
  for (int j = 0; j < nr; j++) {
    int32_t *d = c + j * ldc;
    __m512i x0 = r[2 * j], x1 = r[2 * j + 1];
    if (accumulate) {
      x0 = _mm512_add_epi32(x0, _mm512_loadu_si512((const void *)d));
      x1 = _mm512_add_epi32(x1, _mm512_loadu_si512((const void *)(d + 16)));
    }
    _mm512_storeu_si512((void *)d, x0);
    _mm512_storeu_si512((void *)(d + 16), x1);
  }
}


/* One work item: row panels [q0, q1) of the packed block (rows ic..ic+mcur), columns [n0, n1). */
static void run_item(const w8a8_mm_problem *p, const uint8_t *apk, int64_t Kp, int64_t ic, int64_t mcur, int64_t q0,
                     int64_t q1, int64_t n0, int64_t n1, char *slot) {
  const int64_t K = p->K, ldc = (q1 - q0) * VR, Kq = (K + 3) / 4 * 4;
  int32_t *c = (int32_t *)(slot + W8A8_CPU_SLOT_B_BYTES);                                 /* [cols][ldc] */
  int32_t *csum = (int32_t *)(slot + W8A8_CPU_SLOT_B_BYTES + W8A8_CPU_SLOT_C_BYTES); /* spare 4 KiB */
  int32_t *cr = (int32_t *)slot;                                                          /* [rows][NB] */
  /* Column sums first: also brings this item's weights into L2 for the kernel. */
  for (int64_t n = n0; n < n1; n++) csum[n - n0] = col_sum((const int8_t *)p->b + n * p->ldb, K);
  /* Only whole quads are read from B (K % 4 == 0 is a dispatch condition), so Kq == K. */
  for (int64_t kc0 = 0; kc0 < Kq; kc0 += VKC) {
    const int64_t kcp = Kq - kc0 < VKC ? Kq - kc0 : VKC;
    for (int64_t q = q0; q < q1; q++)
      for (int64_t nt = n0; nt < n1; nt += VNR) {
        const int nr = (int)(n1 - nt < VNR ? n1 - nt : VNR);
        kern_vnni(apk + q * VR * Kp + kc0 * VR, (const int8_t *)p->b + nt * p->ldb + kc0, p->ldb, nr, kcp / 4,
                  c + (nt - n0) * ldc + (q - q0) * VR, ldc, kc0 > 0);
      }
  }
  /* Correction and transpose to row-major (16 x 16 blocks through a small buffer). */
  const int64_t r0 = q0 * VR, r1 = q1 * VR < mcur ? q1 * VR : mcur, ncols = n1 - n0;
  for (int64_t j = 0; j < ncols; j++) {
    const __m512i corr = _mm512_set1_epi32((int32_t)((uint32_t)csum[j] << 7)); /* 128 * sum, wrapping */
    int32_t *col = c + j * ldc;
    for (int64_t r = 0; r < ldc; r += 16)
      _mm512_storeu_si512((void *)(col + r), _mm512_sub_epi32(_mm512_loadu_si512((const void *)(col + r)), corr));
  }
  /* 8 x 8 blocks; columns past ncols (up to a multiple of 8) carry stale values the
   * epilogue never reads */
  for (int64_t j = 0; j < ncols; j += 8)
    for (int64_t r = 0; r < r1 - r0; r += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; i++) v[i] = _mm256_loadu_ps((const float *)(c + (j + i) * ldc + r));
      tr8x8(v);
      for (int i = 0; i < 8; i++) _mm256_storeu_ps((float *)(cr + (r + i) * W8A8_CPU_NB + j), v[i]);
    }
  w8a8_avx2_epilogue(p, cr, W8A8_CPU_NB, ic + r0, r1 - r0, n0, ncols);
}

w8a8_status w8a8_gemm_avx512vnni(const w8a8_mm_problem *p, const w8a8_gemm_ws *ws, int nthreads) {
  const int64_t M = p->M, N = p->N, K = p->K;
  if (M == 0 || N == 0) return W8A8_SUCCESS;
  if (K == 0 || K % 4 != 0) return W8A8_ERROR_UNSUPPORTED_DEVICE; /* the caller runs the AVX2 path */
  const int64_t Kp = (K + W8A8_CPU_KPAD - 1) / W8A8_CPU_KPAD * W8A8_CPU_KPAD;
  int64_t mc = W8A8_CPU_OMC;
  if ((int64_t)(W8A8_CPU_A_BYTES / (size_t)Kp) < mc) mc = (int64_t)(W8A8_CPU_A_BYTES / (size_t)Kp) / VR * VR;
  if (mc < VR) return W8A8_ERROR_UNSUPPORTED_DEVICE;
  mc = w8a8_cpu_equal_blocks(M, mc, VR);
  const int64_t panels = (N + W8A8_CPU_NB - 1) / W8A8_CPU_NB;
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
    for (int64_t ic = 0; ic < M; ic += mc) {
      const int64_t mcur = M - ic < mc ? M - ic : mc, nq = (mcur + VR - 1) / VR;
#pragma omp for schedule(static)
      for (int64_t q = 0; q < nq; q++) {
        const int64_t rows = mcur - q * VR < VR ? mcur - q * VR : VR;
        pack_a_vnni((const int8_t *)p->a + (ic + q * VR) * p->lda, p->lda, (int)rows, K, Kp,
                    (uint8_t *)ws->a + (size_t)(q * VR * Kp));
      }
      int64_t msplit = 1;
      if (panels < nth) {
        msplit = (nth + panels - 1) / panels;
        if (msplit > nq) msplit = nq;
      }
      const int64_t qps = (nq + msplit - 1) / msplit;
#pragma omp for schedule(dynamic, 1)
      for (int64_t it = 0; it < panels * msplit; it++) {
        const int64_t pn = it / msplit, ms = it % msplit;
        const int64_t q0 = ms * qps, q1 = q0 + qps < nq ? q0 + qps : nq;
        const int64_t n0 = pn * W8A8_CPU_NB, n1 = n0 + W8A8_CPU_NB < N ? n0 + W8A8_CPU_NB : N;
        if (q0 < q1) run_item(p, (const uint8_t *)ws->a, Kp, ic, mcur, q0, q1, n0, n1, slot);
      }
    }
  }
  return W8A8_SUCCESS;
}

#ifdef __clang__
#pragma clang attribute pop
#endif
