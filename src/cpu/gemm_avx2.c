/* gemm_avx2.c — the AVX2+FMA scaled GEMM (int8 and fp8-e4m3) with the fused epilogue.
 *
 * Only called after gemm_fast.c has checked that the CPU has AVX2, FMA and F16C: the
 * whole file is compiled for those (the library itself is built for baseline x86-64).
 * Blocking and work split: see gemm_kernels.h.
 *
 * int8 exactness: vpmaddubsw (u8 x s8 -> saturating int16 pair sums) is what most AVX2
 * int8 GEMMs use, and it saturates for -128*-128 + -128*-128 (32768). We sign-extend to
 * int16 instead and use vpmaddwd (int16 x int16 -> int32 pair sums, at most 2*2^14 =
 * 2^15, no saturation): exact over the whole int8 range, at half the products per
 * instruction. Accumulation is int32 with wrap-around, so the result is exact whenever
 * the true sum fits int32 (the header's K <= 131071).
 *
 * fp8: decoded to fp32 while converting (e4m3 -> fp16 bits by shifts, vcvtph2ps, x256),
 * then an FMA dot micro-kernel, fp32 accumulation.
 *
 * Block-scaled fp8 (w8a8_scaled_mm_blockwise): the outer-product path at every M, each 128-deep block of a
 * micro-tile summed from zero by kern_f32_outer (one FMA per k in k order: fp8 products are exact in fp32, so
 * that is the reference's block sum bit for bit), then acc = fma(sa * sb, part, acc) in block order: the
 * reference's bits, which the portable GPU kernel and the MPI tensor-parallel calls rely on. */
#pragma GCC target("avx2,fma,f16c")
#include <immintrin.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "avx_tr8x8.h"
#include "gemm_kernels.h"

/* ---- conversion of A rows and B slices ------------------------------------------- */

/* dst[0..len) = (int16)src[0..len), dst[len..padded) = 0. */
static void cvt_i8_i16(const int8_t *src, int64_t len, int16_t *dst, int64_t padded) {
  int64_t k = 0;
  for (; k + 16 <= len; k += 16)
    _mm256_storeu_si256((__m256i *)(dst + k), _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(src + k))));
  for (; k < len; k++) dst[k] = src[k];
  for (; k < padded; k++) dst[k] = 0;
}

/* 16 e4m3fn bytes -> 16 fp32. e4m3 s.eeee.mmm placed as fp16 s.0eeee.mmm0000000 is the
 * same value times 2^-8 (normals and subnormals alike, since both biases are powers of
 * two apart); vcvtph2ps is exact and x256 is exact. 0x7f/0xff (NaN) would become 1.875:
 * OR-ing 0x7e00 makes them fp16 NaNs. */
static inline void fp8x16_to_f32(const uint8_t *src, float *dst) {
  __m256i s = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)src));
  __m256i h = _mm256_or_si256(_mm256_and_si256(s, _mm256_set1_epi16((short)0x8000)),
                              _mm256_and_si256(_mm256_slli_epi16(s, 7), _mm256_set1_epi16(0x3f80)));
  __m256i nan = _mm256_cmpeq_epi16(_mm256_and_si256(s, _mm256_set1_epi16(0x7f)), _mm256_set1_epi16(0x7f));
  h = _mm256_or_si256(h, _mm256_and_si256(nan, _mm256_set1_epi16(0x7e00)));
  const __m256 k256 = _mm256_set1_ps(256.0f);
  _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), k256));
  _mm256_storeu_ps(dst + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), k256));
}

static void cvt_fp8_f32(const uint8_t *src, int64_t len, float *dst, int64_t padded) {
  int64_t k = 0;
  for (; k + 16 <= len; k += 16) fp8x16_to_f32(src + k, dst + k);
  if (k < len) { /* tail through a zero-padded copy: the same decoder, no scalar twin */
    uint8_t tmp[16] = {0};
    float f[16];
    memcpy(tmp, src + k, (size_t)(len - k));
    fp8x16_to_f32(tmp, f);
    memcpy(dst + k, f, (size_t)(len - k) * sizeof(float));
    k = len;
  }
  for (; k < padded; k++) dst[k] = 0.0f;
}

/* ---- micro-kernels ------------------------------------------------------------------
 * "Dot" form: both operands are rows of K (A row-major, B column-major), so each of the
 * MR x NR outputs has its own vector accumulator over a stretch of k, reduced across
 * lanes at the end. No transposes anywhere (packing is a pure type conversion). 3x3
 * accumulators + 3 B vectors + 1 A vector = 13 of the 16 ymm registers: with 4x3 (16)
 * GCC spilled accumulators to the stack in the inner loop. The ALU work per product is the
 * same for any tile (vpmaddwd + vpaddd), so the smaller tile costs only loads. */

/* Horizontal sums of three int32 vectors: {sum x0, sum x1, sum x2, sum x2}. */
static inline __m128i hsum3_epi32(__m256i x0, __m256i x1, __m256i x2) {
  __m256i t0 = _mm256_hadd_epi32(x0, x1);
  __m256i t1 = _mm256_hadd_epi32(x2, x2);
  __m256i t2 = _mm256_hadd_epi32(t0, t1);
  return _mm_add_epi32(_mm256_castsi256_si128(t2), _mm256_extracti128_si256(t2, 1));
}
static inline __m128 hsum3_ps(__m256 x0, __m256 x1, __m256 x2) {
  __m256 t0 = _mm256_hadd_ps(x0, x1);
  __m256 t1 = _mm256_hadd_ps(x2, x2);
  __m256 t2 = _mm256_hadd_ps(t0, t1);
  return _mm_add_ps(_mm256_castps256_ps128(t2), _mm256_extractf128_ps(t2, 1));
}

/* Mask of the first nr (1..3) int32 lanes of an xmm. */
static inline __m128i lane_mask(int nr) {
  return _mm_cmpgt_epi32(_mm_set1_epi32(nr), _mm_setr_epi32(0, 1, 2, 3));
}

#define W8A8_AI static inline __attribute__((always_inline))

/* Named accumulators, not arrays: GCC kept __m256i acc[3][3] on the stack inside the loop
 * (scalar replacement of the array failed), costing a store per product. MR is a
 * compile-time constant in every instance, so the `if (MR > i)` disappear. */
#define W8A8_ROW_I8(va, x0, x1, x2)                       \
  do {                                                   \
    x0 = _mm256_add_epi32(x0, _mm256_madd_epi16(va, v0)); \
    x1 = _mm256_add_epi32(x1, _mm256_madd_epi16(va, v1)); \
    x2 = _mm256_add_epi32(x2, _mm256_madd_epi16(va, v2)); \
  } while (0)

/* Store (or add into) one row of up to 3 results. */
static inline void put_i32(int32_t *c, __m128i s, __m128i mask, int accumulate) {
  if (accumulate) s = _mm_add_epi32(s, _mm_maskload_epi32(c, mask));
  _mm_maskstore_epi32(c, mask, s);
}
static inline void put_f32(float *c, __m128 s, __m128i mask, int accumulate) {
  if (accumulate) s = _mm_add_ps(s, _mm_maskload_ps(c, mask));
  _mm_maskstore_ps(c, mask, s);
}

/* int8, both operands converted to int16. a: MR rows (ld lda), b: 3 rows (ld ldb; rows
 * past nr repeat the last one and are not stored), kk a multiple of 16.
 * c[i*ldc + j] (+)= sum_k a[i,k]*b[j,k]. */
W8A8_AI void kern_i8_packed(const int MR, const int16_t *a, int64_t lda, const int16_t *b, int64_t ldb, int nr,
                            int64_t kk, int32_t *c, int64_t ldc, int accumulate) {
  const int16_t *b0 = b, *b1 = b + (nr > 1 ? ldb : 0), *b2 = b + (nr > 2 ? 2 * ldb : 0);
  __m256i s00 = _mm256_setzero_si256(), s01 = s00, s02 = s00, s10 = s00, s11 = s00, s12 = s00, s20 = s00,
          s21 = s00, s22 = s00;
  for (int64_t k = 0; k < kk; k += 16) {
    const __m256i v0 = _mm256_loadu_si256((const __m256i *)(b0 + k));
    const __m256i v1 = _mm256_loadu_si256((const __m256i *)(b1 + k));
    const __m256i v2 = _mm256_loadu_si256((const __m256i *)(b2 + k));
    W8A8_ROW_I8(_mm256_loadu_si256((const __m256i *)(a + k)), s00, s01, s02);
    if (MR > 1) W8A8_ROW_I8(_mm256_loadu_si256((const __m256i *)(a + lda + k)), s10, s11, s12);
    if (MR > 2) W8A8_ROW_I8(_mm256_loadu_si256((const __m256i *)(a + 2 * lda + k)), s20, s21, s22);
  }
  const __m128i mask = lane_mask(nr);
  put_i32(c, hsum3_epi32(s00, s01, s02), mask, accumulate);
  if (MR > 1) put_i32(c + ldc, hsum3_epi32(s10, s11, s12), mask, accumulate);
  if (MR > 2) put_i32(c + 2 * ldc, hsum3_epi32(s20, s21, s22), mask, accumulate);
}

/* The last K % 16 products of row a with b0..b2, in uint32 (wraps like the vector lanes;
 * no signed overflow in C). */
static inline __m128i tail_i8(const int16_t *a, const int8_t *b0, const int8_t *b1, const int8_t *b2, int64_t k0,
                              int64_t K) {
  uint32_t t0 = 0, t1 = 0, t2 = 0;
  for (int64_t k = k0; k < K; k++) {
    uint32_t av = (uint32_t)(int32_t)a[k];
    t0 += av * (uint32_t)(int32_t)b0[k];
    t1 += av * (uint32_t)(int32_t)b1[k];
    t2 += av * (uint32_t)(int32_t)b2[k];
  }
  return _mm_setr_epi32((int)t0, (int)t1, (int)t2, (int)t2);
}

/* int8 with B read raw from memory (sign-extended in the loop): the decode path, where
 * each weight is used by at most a few rows and converting B first would cost a pass.
 * K is the true length; the last K % 16 are summed in scalar code. */
W8A8_AI void kern_i8_raw(const int MR, const int16_t *a, int64_t lda, const int8_t *b, int64_t ldb, int nr,
                         int64_t K, int32_t *c, int64_t ldc) {
  const int8_t *b0 = b, *b1 = b + (nr > 1 ? ldb : 0), *b2 = b + (nr > 2 ? 2 * ldb : 0);
  __m256i s00 = _mm256_setzero_si256(), s01 = s00, s02 = s00, s10 = s00, s11 = s00, s12 = s00, s20 = s00,
          s21 = s00, s22 = s00;
  const int64_t K16 = K & ~(int64_t)15;
  for (int64_t k = 0; k < K16; k += 16) {
    const __m256i v0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b0 + k)));
    const __m256i v1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b1 + k)));
    const __m256i v2 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b2 + k)));
    W8A8_ROW_I8(_mm256_loadu_si256((const __m256i *)(a + k)), s00, s01, s02);
    if (MR > 1) W8A8_ROW_I8(_mm256_loadu_si256((const __m256i *)(a + lda + k)), s10, s11, s12);
    if (MR > 2) W8A8_ROW_I8(_mm256_loadu_si256((const __m256i *)(a + 2 * lda + k)), s20, s21, s22);
  }
  const __m128i mask = lane_mask(nr);
  __m128i r0 = hsum3_epi32(s00, s01, s02), r1 = _mm_setzero_si128(), r2 = r1;
  if (MR > 1) r1 = hsum3_epi32(s10, s11, s12);
  if (MR > 2) r2 = hsum3_epi32(s20, s21, s22);
  if (K16 < K) {
    r0 = _mm_add_epi32(r0, tail_i8(a, b0, b1, b2, K16, K));
    if (MR > 1) r1 = _mm_add_epi32(r1, tail_i8(a + lda, b0, b1, b2, K16, K));
    if (MR > 2) r2 = _mm_add_epi32(r2, tail_i8(a + 2 * lda, b0, b1, b2, K16, K));
  }
  put_i32(c, r0, mask, 0);
  if (MR > 1) put_i32(c + ldc, r1, mask, 0);
  if (MR > 2) put_i32(c + 2 * ldc, r2, mask, 0);
}

#define W8A8_ROW_F32(va, x0, x1, x2)   \
  do {                                \
    x0 = _mm256_fmadd_ps(va, v0, x0); \
    x1 = _mm256_fmadd_ps(va, v1, x1); \
    x2 = _mm256_fmadd_ps(va, v2, x2); \
  } while (0)

/* fp8 decoded to fp32: the same shape with FMAs. kk a multiple of 8. */
W8A8_AI void kern_f32(const int MR, const float *a, int64_t lda, const float *b, int64_t ldb, int nr, int64_t kk,
                      float *c, int64_t ldc, int accumulate) {
  const float *b0 = b, *b1 = b + (nr > 1 ? ldb : 0), *b2 = b + (nr > 2 ? 2 * ldb : 0);
  __m256 s00 = _mm256_setzero_ps(), s01 = s00, s02 = s00, s10 = s00, s11 = s00, s12 = s00, s20 = s00, s21 = s00,
         s22 = s00;
  for (int64_t k = 0; k < kk; k += 8) {
    const __m256 v0 = _mm256_loadu_ps(b0 + k), v1 = _mm256_loadu_ps(b1 + k), v2 = _mm256_loadu_ps(b2 + k);
    W8A8_ROW_F32(_mm256_loadu_ps(a + k), s00, s01, s02);
    if (MR > 1) W8A8_ROW_F32(_mm256_loadu_ps(a + lda + k), s10, s11, s12);
    if (MR > 2) W8A8_ROW_F32(_mm256_loadu_ps(a + 2 * lda + k), s20, s21, s22);
  }
  const __m128i mask = lane_mask(nr);
  put_f32(c, hsum3_ps(s00, s01, s02), mask, accumulate);
  if (MR > 1) put_f32(c + ldc, hsum3_ps(s10, s11, s12), mask, accumulate);
  if (MR > 2) put_f32(c + 2 * ldc, hsum3_ps(s20, s21, s22), mask, accumulate);
}

/* One instance per MR, so the accumulator arrays become registers. */
#define W8A8_INSTANCES(MR)                                                                                       \
  static void k_i8p_##MR(const int16_t *a, int64_t lda, const int16_t *b, int64_t ldb, int nr, int64_t kk,       \
                         int32_t *c, int64_t ldc, int acc) {                                                     \
    kern_i8_packed(MR, a, lda, b, ldb, nr, kk, c, ldc, acc);                                                     \
  }                                                                                                              \
  static void k_i8r_##MR(const int16_t *a, int64_t lda, const int8_t *b, int64_t ldb, int nr, int64_t K,         \
                         int32_t *c, int64_t ldc) {                                                              \
    kern_i8_raw(MR, a, lda, b, ldb, nr, K, c, ldc);                                                              \
  }                                                                                                              \
  static void k_f32_##MR(const float *a, int64_t lda, const float *b, int64_t ldb, int nr, int64_t kk, float *c, \
                         int64_t ldc, int acc) {                                                                 \
    kern_f32(MR, a, lda, b, ldb, nr, kk, c, ldc, acc);                                                           \
  }
W8A8_INSTANCES(1)
W8A8_INSTANCES(2)
W8A8_INSTANCES(3)
#undef W8A8_INSTANCES

typedef void (*k_i8p_fn)(const int16_t *, int64_t, const int16_t *, int64_t, int, int64_t, int32_t *, int64_t, int);
typedef void (*k_i8r_fn)(const int16_t *, int64_t, const int8_t *, int64_t, int, int64_t, int32_t *, int64_t);
typedef void (*k_f32_fn)(const float *, int64_t, const float *, int64_t, int, int64_t, float *, int64_t, int);
static const k_i8p_fn K_I8P[W8A8_CPU_MR + 1] = {0, k_i8p_1, k_i8p_2, k_i8p_3};
static const k_i8r_fn K_I8R[W8A8_CPU_MR + 1] = {0, k_i8r_1, k_i8r_2, k_i8r_3};
static const k_f32_fn K_F32[W8A8_CPU_MR + 1] = {0, k_f32_1, k_f32_2, k_f32_3};

/* ---- outer-product micro-kernels (M > W8A8_CPU_OUTER_MMIN) ------------------------------
 * The BLIS form, transposed: a tile is 16 rows of A (two 8-lane vectors, from a packed A
 * panel) x 6 columns of B (broadcast), 12 accumulators + 2 A vectors + 1 broadcast = 15
 * ymm. No horizontal reductions and no per-step register copies (the dot kernels' costs).
 * A is packed once per block, transposed: int8 as k-pairs [pair][16 rows][2 x int16] (one
 * vpmaddwd = 8 rows x 2 k = 16 exact products), fp8 as fp32 [k][16 rows]. B stays in the
 * dot kernels' converted form (each column a contiguous run of k): the broadcast of one
 * int32 at column j, pair p is exactly (b[2p], b[2p+1]), so B needs no transpose.
 * C is the tile column-major (ld = the item's padded row count), transposed once per
 * item before the epilogue. */

#define W8A8_OUT_I8(j, bj, x0, x1)                                   \
  do {                                                             \
    int32_t w_;                                                    \
    memcpy(&w_, bj + 2 * p, 4);                                    \
    const __m256i v_ = _mm256_set1_epi32(w_);                      \
    x0 = _mm256_add_epi32(x0, _mm256_madd_epi16(a0, v_));          \
    x1 = _mm256_add_epi32(x1, _mm256_madd_epi16(a1, v_));          \
  } while (0)

/* a: packed A panel at the slice start (32 int16 per pair); b: converted B column 0 of
 * the tile (ld ldb; columns past nr repeat the last, not stored); npairs pairs of k.
 * c[j*ldc + r] (+)= sum_k a[r,k] * b[j,k], r < 16, j < nr. */
/* noinline: inlined into the driver, GCC spilled accumulators (measured: 51 vs 73 GMAC/s
 * single core in a microbenchmark); as its own function the loop uses exactly 16 ymm. */
__attribute__((noinline)) static void kern_i8_outer(const int16_t *a, const int16_t *b, int64_t ldb, int nr, int64_t npairs, int32_t *c,
                          int64_t ldc, int accumulate) {
  const int16_t *b0 = b, *b1 = b + (nr > 1 ? ldb : 0), *b2 = b + (nr > 2 ? 2 * ldb : 0),
                *b3 = b + (nr > 3 ? 3 * ldb : 0), *b4 = b + (nr > 4 ? 4 * ldb : 0), *b5 = b + (nr > 5 ? 5 * ldb : 0);
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
          c40 = c00, c41 = c00, c50 = c00, c51 = c00;
#pragma GCC unroll 2
  for (int64_t p = 0; p < npairs; p++) {
    const __m256i a0 = _mm256_loadu_si256((const __m256i *)(a + 32 * p));
    const __m256i a1 = _mm256_loadu_si256((const __m256i *)(a + 32 * p + 16));
    W8A8_OUT_I8(0, b0, c00, c01);
    W8A8_OUT_I8(1, b1, c10, c11);
    W8A8_OUT_I8(2, b2, c20, c21);
    W8A8_OUT_I8(3, b3, c30, c31);
    W8A8_OUT_I8(4, b4, c40, c41);
    W8A8_OUT_I8(5, b5, c50, c51);
  }
  __m256i r[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
  for (int j = 0; j < nr; j++) {
    __m256i *d0 = (__m256i *)(c + j * ldc), *d1 = (__m256i *)(c + j * ldc + 8);
    __m256i x0 = r[2 * j], x1 = r[2 * j + 1];
    if (accumulate) {
      x0 = _mm256_add_epi32(x0, _mm256_loadu_si256(d0));
      x1 = _mm256_add_epi32(x1, _mm256_loadu_si256(d1));
    }
    _mm256_storeu_si256(d0, x0);
    _mm256_storeu_si256(d1, x1);
  }
}

#define W8A8_OUT_F32(bj, x0, x1)                    \
  do {                                            \
    const __m256 v_ = _mm256_broadcast_ss(bj + k); \
    x0 = _mm256_fmadd_ps(a0, v_, x0);             \
    x1 = _mm256_fmadd_ps(a1, v_, x1);             \
  } while (0)

/* fp32 (decoded fp8): a packed [k][16], b converted columns, kk values of k. */
__attribute__((noinline)) static void kern_f32_outer(const float *a, const float *b, int64_t ldb, int nr, int64_t kk, float *c, int64_t ldc,
                           int accumulate) {
  const float *b0 = b, *b1 = b + (nr > 1 ? ldb : 0), *b2 = b + (nr > 2 ? 2 * ldb : 0),
              *b3 = b + (nr > 3 ? 3 * ldb : 0), *b4 = b + (nr > 4 ? 4 * ldb : 0), *b5 = b + (nr > 5 ? 5 * ldb : 0);
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
         c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < kk; k++) {
    const __m256 a0 = _mm256_loadu_ps(a + 16 * k), a1 = _mm256_loadu_ps(a + 16 * k + 8);
    W8A8_OUT_F32(b0, c00, c01);
    W8A8_OUT_F32(b1, c10, c11);
    W8A8_OUT_F32(b2, c20, c21);
    W8A8_OUT_F32(b3, c30, c31);
    W8A8_OUT_F32(b4, c40, c41);
    W8A8_OUT_F32(b5, c50, c51);
  }
  __m256 r[12] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51};
  for (int j = 0; j < nr; j++) {
    float *d0 = c + j * ldc, *d1 = c + j * ldc + 8;
    __m256 x0 = r[2 * j], x1 = r[2 * j + 1];
    if (accumulate) {
      x0 = _mm256_add_ps(x0, _mm256_loadu_ps(d0));
      x1 = _mm256_add_ps(x1, _mm256_loadu_ps(d1));
    }
    _mm256_storeu_ps(d0, x0);
    _mm256_storeu_ps(d1, x1);
  }
}

/* AVX-512 variant of kern_f32_outer for CPUs that have it (dispatched at run time: the
 * function carries its own target, the rest of this file stays AVX2). Tile: two packed
 * 16-row panels (one zmm each, rows 0..31 of the C tile) x 12 columns, 24 accumulators;
 * TWO = 0 for a lone last panel. Same packed A, converted B and column-major C as the AVX2
 * kernel, so the driver only picks the tile loop. */
#define W8A8_OUT_F512(bj, x0, x1)                      \
  do {                                                 \
    const __m512 v_ = _mm512_set1_ps(bj[k]);           \
    x0 = _mm512_fmadd_ps(a0, v_, x0);                  \
    if (TWO) x1 = _mm512_fmadd_ps(a1, v_, x1);         \
  } while (0)
__attribute__((target("avx512f,avx2,fma"), always_inline)) static inline void kern_f32_512(
    const int TWO, const float *a, int64_t lda16, const float *b, int64_t ldb, int nr, int64_t kk, float *c,
    int64_t ldc, int accumulate) {
  const float *bp[12];
  for (int j = 0; j < 12; j++) bp[j] = b + (j < nr ? j : nr - 1) * ldb;
  const float *b0 = bp[0], *b1 = bp[1], *b2 = bp[2], *b3 = bp[3], *b4 = bp[4], *b5 = bp[5], *b6 = bp[6],
              *b7 = bp[7], *b8 = bp[8], *b9 = bp[9], *b10 = bp[10], *b11 = bp[11];
  const float *a1p = a + lda16; /* the second panel */
  __m512 z = _mm512_setzero_ps();
  __m512 c00 = z, c01 = z, c10 = z, c11 = z, c20 = z, c21 = z, c30 = z, c31 = z, c40 = z, c41 = z, c50 = z, c51 = z,
         c60 = z, c61 = z, c70 = z, c71 = z, c80 = z, c81 = z, c90 = z, c91 = z, ca0 = z, ca1 = z, cb0 = z, cb1 = z;
  for (int64_t k = 0; k < kk; k++) {
    const __m512 a0 = _mm512_loadu_ps(a + 16 * k);
    const __m512 a1 = TWO ? _mm512_loadu_ps(a1p + 16 * k) : a0;
    W8A8_OUT_F512(b0, c00, c01);
    W8A8_OUT_F512(b1, c10, c11);
    W8A8_OUT_F512(b2, c20, c21);
    W8A8_OUT_F512(b3, c30, c31);
    W8A8_OUT_F512(b4, c40, c41);
    W8A8_OUT_F512(b5, c50, c51);
    W8A8_OUT_F512(b6, c60, c61);
    W8A8_OUT_F512(b7, c70, c71);
    W8A8_OUT_F512(b8, c80, c81);
    W8A8_OUT_F512(b9, c90, c91);
    W8A8_OUT_F512(b10, ca0, ca1);
    W8A8_OUT_F512(b11, cb0, cb1);
  }
  const __m512 r[24] = {c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51,
                        c60, c61, c70, c71, c80, c81, c90, c91, ca0, ca1, cb0, cb1};
  for (int j = 0; j < nr; j++) {
    float *d = c + j * ldc;
    __m512 x0 = r[2 * j], x1 = r[2 * j + 1];
    if (accumulate) {
      x0 = _mm512_add_ps(x0, _mm512_loadu_ps(d));
      if (TWO) x1 = _mm512_add_ps(x1, _mm512_loadu_ps(d + 16));
    }
    _mm512_storeu_ps(d, x0);
    if (TWO) _mm512_storeu_ps(d + 16, x1);
  }
}
__attribute__((target("avx512f,avx2,fma"), noinline)) static void kern_f32_512_two(const float *a, int64_t lda16,
                                                                                   const float *b, int64_t ldb, int nr,
                                                                                   int64_t kk, float *c, int64_t ldc,
                                                                                   int accumulate) {
  kern_f32_512(1, a, lda16, b, ldb, nr, kk, c, ldc, accumulate);
}
__attribute__((target("avx512f,avx2,fma"), noinline)) static void kern_f32_512_one(const float *a, const float *b,
                                                                                   int64_t ldb, int nr, int64_t kk,
                                                                                   float *c, int64_t ldc,
                                                                                   int accumulate) {
  kern_f32_512(0, a, 0, b, ldb, nr, kk, c, ldc, accumulate);
}


/* Packs rows [0, rows) (rows <= 16; the rest of the 16 are zeros) of A, starting at
 * src (ld lda), k in [0, K) and zeros to Kp, into one transposed panel:
 * int8: dst int16 [Kp/2][16][2]; fp8: dst fp32 [Kp][16]. Each step turns 8 rows x 16 k
 * into vectors (sign extension / fp8 decode) and transposes them 8x8 as 32-bit words. */
static void pack_a_outer(int is_i8, const uint8_t *src, int64_t lda, int rows, int64_t K, int64_t Kp, void *dst) {
  for (int h = 0; h < 2; h++) {
    for (int64_t k = 0; k < Kp; k += 16) {
      const int64_t len = K - k >= 16 ? 16 : (K - k > 0 ? K - k : 0);
      __m256 lo[8], hi[8]; /* int8: lo = 8 pairs (k..k+15) of each row; fp8: lo = k..k+7, hi = k+8..k+15 */
      for (int i = 0; i < 8; i++) {
        const int r = 8 * h + i;
        uint8_t tmp[16] = {0};
        const uint8_t *s = src + (int64_t)r * lda + k;
        if (r < rows && len == 16) {
          memcpy(tmp, s, 16);
        } else if (r < rows && len > 0) {
          memcpy(tmp, s, (size_t)len);
        }
        if (is_i8) {
          lo[i] = _mm256_castsi256_ps(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)tmp)));
        } else {
          float f[16];
          fp8x16_to_f32(tmp, f);
          lo[i] = _mm256_loadu_ps(f);
          hi[i] = _mm256_loadu_ps(f + 8);
        }
      }
      tr8x8(lo);
      if (is_i8) {
        int16_t *d = (int16_t *)dst + k * 16 + 16 * h; /* pair k/2 + i at (k/2 + i)*32 */
        for (int i = 0; i < 8; i++) _mm256_storeu_ps((float *)(d + 32 * i), lo[i]);
      } else {
        tr8x8(hi);
        float *d = (float *)dst + k * 16 + 8 * h;
        for (int i = 0; i < 8; i++) {
          _mm256_storeu_ps(d + 16 * i, lo[i]);
          _mm256_storeu_ps(d + 16 * (8 + i), hi[i]);
        }
      }
    }
  }
}

/* ---- epilogue ------------------------------------------------------------------------
 * The header's formula, 8 columns at a time, with the same operations in the same
 * order as w8a8_epilogue() and the same rounding as numeric.c, so results are
 * bit-identical to the reference:
 *   int8: d = acc - azp*adj (int32, wrapping), v = cvt(d) (RNE, MXCSR default)
 *   t = sa*v; r = bias ? fma(sb, t, bias) : sb*t; out = round_RNE(r). */

static inline __m256 load_bias8(w8a8_dtype t, const void *bias, int64_t n) {
  switch (t) {
    case W8A8_DTYPE_BF16:
      return _mm256_castsi256_ps(_mm256_slli_epi32(
          _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)bias + n))), 16));
    case W8A8_DTYPE_FP16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)bias + n)));
    default: return _mm256_loadu_ps((const float *)bias + n);
  }
}

/* fp32 -> bf16 exactly as w8a8_f32_to_bf16: u + 0x7fff + lsb, >> 16; NaN -> (u >> 16) | 0x40. */
static inline __m128i f32_to_bf16_8(__m256 r) {
  __m256i u = _mm256_castps_si256(r);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  __m256i isnan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  __m256i v = _mm256_blendv_epi8(rounded, quiet, isnan);
  v = _mm256_permute4x64_epi64(_mm256_packus_epi32(v, v), 0x08); /* lanes 0..3 | 4..7 -> low 128 bits */
  return _mm256_castsi256_si128(v);
}

/* Computes 8 outputs of row m from columns n.. (all 8 valid in every array passed). */
static inline void epi8(const w8a8_mm_problem *p, __m256 v, float sa, int64_t n, const float *sb_src,
                        const void *bias_src, int64_t bias_n, void *dst) {
  __m256 t = _mm256_mul_ps(_mm256_set1_ps(sa), v);
  __m256 sb = p->scale_b_per_channel ? _mm256_loadu_ps(sb_src + n) : _mm256_set1_ps(p->scale_b[0]);
  __m256 r = bias_src ? _mm256_fmadd_ps(sb, t, load_bias8(p->out_dtype, bias_src, bias_n)) : _mm256_mul_ps(sb, t);
  switch (p->out_dtype) {
    case W8A8_DTYPE_BF16: _mm_storeu_si128((__m128i *)dst, f32_to_bf16_8(r)); break;
    /* vcvtps2ph with RNE: overflow to inf, subnormals and NaN (quieted, payload
     * truncated) exactly as w8a8_f32_to_f16 */
    case W8A8_DTYPE_FP16: _mm_storeu_si128((__m128i *)dst, _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT)); break;
    default: _mm256_storeu_ps((float *)dst, r); break;
  }
}

void w8a8_avx2_epilogue(const w8a8_mm_problem *p, const void *c, int64_t ldc, int64_t m0, int64_t mrows,
                        int64_t n0, int64_t ncols) {
  const int is_i8 = p->in_dtype == W8A8_DTYPE_INT8;
  const size_t osz = p->out_dtype == W8A8_DTYPE_FP32 ? 4 : 2;
  for (int64_t i = 0; i < mrows; i++) {
    const int64_t m = m0 + i;
    const float sa = p->scale_a[p->scale_a_per_token ? m : 0];
    int32_t azp = 0;
    switch (p->azp_mode) {
      case W8A8_AZP_ADJ_ONLY: azp = 1; break;
      case W8A8_AZP_PER_TENSOR: azp = p->azp[0]; break;
      case W8A8_AZP_PER_TOKEN: azp = p->azp[m]; break;
      default: break;
    }
    const __m256i vazp = _mm256_set1_epi32(azp);
    const int32_t *ci = (const int32_t *)c + i * ldc;
    const float *cf = (const float *)c + i * ldc;
    char *orow = (char *)p->out + (size_t)(m * p->ldo) * osz;
    int64_t j = 0;
    for (; j + 8 <= ncols; j += 8) {
      const int64_t n = n0 + j;
      __m256 v;
      if (is_i8) {
        __m256i d = _mm256_loadu_si256((const __m256i *)(ci + j));
        if (p->azp_mode != W8A8_AZP_NONE)
          d = _mm256_sub_epi32(d, _mm256_mullo_epi32(vazp, _mm256_loadu_si256((const __m256i *)(p->azp_adj + n))));
        v = _mm256_cvtepi32_ps(d);
      } else {
        v = _mm256_loadu_ps(cf + j);
      }
      epi8(p, v, sa, n, p->scale_b, p->bias, n, orow + (size_t)n * osz);
    }
    if (j < ncols) { /* tail: the same vector code on zero-padded copies */
      const int64_t rem = ncols - j, n = n0 + j;
      int32_t cbuf[8] = {0}, adj[8] = {0};
      float sbbuf[8] = {0};
      char biasbuf[32] = {0}, obuf[32];
      memcpy(cbuf, is_i8 ? (const void *)(ci + j) : (const void *)(cf + j), (size_t)rem * 4);
      if (p->azp_mode != W8A8_AZP_NONE) memcpy(adj, p->azp_adj + n, (size_t)rem * 4);
      if (p->scale_b_per_channel) memcpy(sbbuf, p->scale_b + n, (size_t)rem * 4);
      if (p->bias) memcpy(biasbuf, (const char *)p->bias + (size_t)n * osz, (size_t)rem * osz);
      __m256 v;
      if (is_i8) {
        __m256i d = _mm256_loadu_si256((const __m256i *)cbuf);
        if (p->azp_mode != W8A8_AZP_NONE)
          d = _mm256_sub_epi32(d, _mm256_mullo_epi32(vazp, _mm256_loadu_si256((const __m256i *)adj)));
        v = _mm256_cvtepi32_ps(d);
      } else {
        v = _mm256_loadu_ps((const float *)cbuf);
      }
      epi8(p, v, sa, 0, sbbuf, p->bias ? biasbuf : NULL, 0, obuf);
      memcpy(orow + (size_t)n * osz, obuf, (size_t)rem * osz);
    }
  }
}

/* ---- driver --------------------------------------------------------------------------- */

typedef struct gemm_ctx {
  const w8a8_mm_problem *p;
  const w8a8_mm_problem *epi; /* the epilogue's problem: p, or (block scales) p with unit scales */
  int is_i8, raw, avx512; /* avx512: the fp8 outer path may use kern_f32_512_* */
  int block;              /* block-scaled fp8 (outer path only) */
  int64_t Kp, kc; /* padded K (ld of the A block), k per B slice */
} gemm_ctx;

/* One block-scaled micro-tile step: block kb's sums of the 16 packed rows (output rows m0.., mrows of them real) x
 * nr columns from n, then c[j * ldc + r] = fma(sa[m0 + r, kb] * sb[(n + j) / 128, kb], part, c[...]). */
static void block_tile(const w8a8_mm_problem *p, const float *a, const float *b, int64_t ldb, int nr, int64_t kk,
                       int64_t kb, int64_t m0, int64_t mrows, int64_t n, float *c, int64_t ldc) {
  float t[W8A8_CPU_ONR * W8A8_CPU_OMR], sa[W8A8_CPU_OMR];
  kern_f32_outer(a, b, ldb, nr, kk, t, W8A8_CPU_OMR, 0);
  for (int r = 0; r < W8A8_CPU_OMR; r++) sa[r] = r < mrows ? p->scale_a[(m0 + r) * p->sa_rs + kb * p->sa_cs] : 0.0f;
  const __m256 sa0 = _mm256_loadu_ps(sa), sa1 = _mm256_loadu_ps(sa + 8);
  for (int j = 0; j < nr; j++) {
    const __m256 sb = _mm256_set1_ps(p->scale_b[((n + j) / W8A8_BLOCK) * p->sb_rs + kb * p->sb_cs]);
    float *d = c + j * ldc;
    _mm256_storeu_ps(d, _mm256_fmadd_ps(_mm256_mul_ps(sa0, sb), _mm256_loadu_ps(t + j * 16), _mm256_loadu_ps(d)));
    _mm256_storeu_ps(d + 8,
                     _mm256_fmadd_ps(_mm256_mul_ps(sa1, sb), _mm256_loadu_ps(t + j * 16 + 8), _mm256_loadu_ps(d + 8)));
  }
}

/* One work item: rows [r0, r1) of the A block starting at output row ic, columns [n0, n1). */
static void run_item(const gemm_ctx *g, const void *ablk, int64_t ic, int64_t r0, int64_t r1, int64_t n0, int64_t n1,
                     char *slot) {
  const w8a8_mm_problem *p = g->p;
  const int64_t Kp = g->Kp, NB = W8A8_CPU_NB;
  void *bslice = slot;
  void *c = slot + W8A8_CPU_SLOT_B_BYTES;
  if (g->raw) {
    const int16_t *a = (const int16_t *)ablk;
    for (int64_t nt = n0; nt < n1; nt += 3) {
      int nr = (int)(n1 - nt < 3 ? n1 - nt : 3);
      const int8_t *b = (const int8_t *)p->b + nt * p->ldb;
      for (int64_t mt = r0; mt < r1; mt += W8A8_CPU_MR) {
        int mr = (int)(r1 - mt < W8A8_CPU_MR ? r1 - mt : W8A8_CPU_MR);
        K_I8R[mr](a + mt * Kp, Kp, b, p->ldb, nr, p->K, (int32_t *)c + (mt - r0) * NB + (nt - n0), NB);
      }
    }
  } else if (Kp == 0) {
    memset(c, 0, (size_t)((r1 - r0) * NB) * 4);
  } else {
    for (int64_t kc0 = 0; kc0 < Kp; kc0 += g->kc) {
      const int64_t kcp = Kp - kc0 < g->kc ? Kp - kc0 : g->kc; /* multiple of KPAD */
      const int64_t len = p->K - kc0 < kcp ? p->K - kc0 : kcp;  /* real k in this slice, >= 1 */
      for (int64_t n = n0; n < n1; n++) {
        if (g->is_i8)
          cvt_i8_i16((const int8_t *)p->b + n * p->ldb + kc0, len, (int16_t *)bslice + (n - n0) * g->kc, kcp);
        else
          cvt_fp8_f32((const uint8_t *)p->b + n * p->ldb + kc0, len, (float *)bslice + (n - n0) * g->kc, kcp);
      }
      for (int64_t mt = r0; mt < r1; mt += W8A8_CPU_MR) {
        int mr = (int)(r1 - mt < W8A8_CPU_MR ? r1 - mt : W8A8_CPU_MR);
        for (int64_t nt = n0; nt < n1; nt += 3) {
          int nr = (int)(n1 - nt < 3 ? n1 - nt : 3);
          if (g->is_i8)
            K_I8P[mr]((const int16_t *)ablk + mt * Kp + kc0, Kp, (const int16_t *)bslice + (nt - n0) * g->kc, g->kc,
                      nr, kcp, (int32_t *)c + (mt - r0) * NB + (nt - n0), NB, kc0 > 0);
          else
            K_F32[mr]((const float *)ablk + mt * Kp + kc0, Kp, (const float *)bslice + (nt - n0) * g->kc, g->kc, nr,
                      kcp, (float *)c + (mt - r0) * NB + (nt - n0), NB, kc0 > 0);
        }
      }
    }
  }
  w8a8_avx2_epilogue(g->epi, c, NB, ic + r0, r1 - r0, n0, n1 - n0);
}

/* Outer-product path, one work item: row panels [q0, q1) of the packed A block (16 rows
 * each, block rows ic..ic+mcur), columns [n0, n1). */
static void run_item_outer(const gemm_ctx *g, const void *apk, int64_t ic, int64_t mcur, int64_t q0, int64_t q1,
                           int64_t n0, int64_t n1, char *slot) {
  const w8a8_mm_problem *p = g->p;
  const int64_t Kp = g->Kp, R = W8A8_CPU_OMR, ldc = (q1 - q0) * R;
  void *bslice = slot;
  void *c = slot + W8A8_CPU_SLOT_B_BYTES; /* column-major [n1 - n0][ldc] */
  if (g->block) memset(c, 0, (size_t)((n1 - n0) * ldc) * 4); /* (acc = 0, then one fma per block) */
  for (int64_t kc0 = 0; kc0 < Kp; kc0 += g->kc) {
    const int64_t kcp = Kp - kc0 < g->kc ? Kp - kc0 : g->kc; /* multiple of KPAD */
    const int64_t len = p->K - kc0 < kcp ? p->K - kc0 : kcp;  /* real k in this slice, >= 1 */
    for (int64_t n = n0; n < n1; n++) {
      if (g->is_i8)
        cvt_i8_i16((const int8_t *)p->b + n * p->ldb + kc0, len, (int16_t *)bslice + (n - n0) * g->kc, kcp);
      else
        cvt_fp8_f32((const uint8_t *)p->b + n * p->ldb + kc0, len, (float *)bslice + (n - n0) * g->kc, kcp);
    }
    if (g->block) { /* the slice's 128-deep blocks in order (kc and kc0 are multiples of 128) */
      for (int64_t q = q0; q < q1; q++)
        for (int64_t nt = n0; nt < n1; nt += W8A8_CPU_ONR) {
          const int nr = (int)(n1 - nt < W8A8_CPU_ONR ? n1 - nt : W8A8_CPU_ONR);
          for (int64_t k = 0; k < kcp; k += W8A8_BLOCK)
            block_tile(p, (const float *)apk + q * R * Kp + (kc0 + k) * R, (const float *)bslice + (nt - n0) * g->kc + k,
                       g->kc, nr, kcp - k < W8A8_BLOCK ? kcp - k : W8A8_BLOCK, (kc0 + k) / W8A8_BLOCK, ic + q * R,
                       mcur - q * R < R ? mcur - q * R : R, nt, (float *)c + (nt - n0) * ldc + (q - q0) * R, ldc);
        }
      continue;
    }
    if (!g->is_i8 && g->avx512) {
      for (int64_t q = q0; q < q1; q += 2)
        for (int64_t nt = n0; nt < n1; nt += 12) {
          const int nr = (int)(n1 - nt < 12 ? n1 - nt : 12);
          const float *a = (const float *)apk + q * R * Kp + kc0 * R;
          const float *b = (const float *)bslice + (nt - n0) * g->kc;
          float *cc = (float *)c + (nt - n0) * ldc + (q - q0) * R;
          if (q + 1 < q1)
            kern_f32_512_two(a, R * Kp, b, g->kc, nr, kcp, cc, ldc, kc0 > 0);
          else
            kern_f32_512_one(a, b, g->kc, nr, kcp, cc, ldc, kc0 > 0);
        }
      continue;
    }
    for (int64_t q = q0; q < q1; q++) {
      for (int64_t nt = n0; nt < n1; nt += W8A8_CPU_ONR) {
        const int nr = (int)(n1 - nt < W8A8_CPU_ONR ? n1 - nt : W8A8_CPU_ONR);
        if (g->is_i8)
          kern_i8_outer((const int16_t *)apk + q * R * Kp + kc0 * R, (const int16_t *)bslice + (nt - n0) * g->kc,
                        g->kc, nr, kcp / 2, (int32_t *)c + (nt - n0) * ldc + (q - q0) * R, ldc, kc0 > 0);
        else
          kern_f32_outer((const float *)apk + q * R * Kp + kc0 * R, (const float *)bslice + (nt - n0) * g->kc, g->kc,
                         nr, kcp, (float *)c + (nt - n0) * ldc + (q - q0) * R, ldc, kc0 > 0);
      }
    }
  }
  /* Transpose C to row-major [rows][NB] in the (now free) B slice, 8x8 at a time; columns
   * past n1 - n0 up to a multiple of 8 carry stale values the epilogue never reads. */
  float *cr = (float *)bslice;
  const float *cc = (const float *)c;
  const int64_t ncols8 = (n1 - n0 + 7) / 8 * 8;
  for (int64_t j = 0; j < ncols8; j += 8)
    for (int64_t r = 0; r < ldc; r += 8) {
      __m256 v[8];
      for (int i = 0; i < 8; i++) v[i] = _mm256_loadu_ps(cc + (j + i) * ldc + r);
      tr8x8(v);
      for (int i = 0; i < 8; i++) _mm256_storeu_ps(cr + (r + i) * W8A8_CPU_NB + j, v[i]);
    }
  const int64_t r0 = q0 * R, r1 = q1 * R < mcur ? q1 * R : mcur;
  w8a8_avx2_epilogue(g->epi, cr + 0, W8A8_CPU_NB, ic + r0, r1 - r0, n0, n1 - n0);
}

static w8a8_status gemm_outer(const gemm_ctx *g, const w8a8_gemm_ws *ws, int T) {
  const w8a8_mm_problem *p = g->p;
  const int64_t M = p->M, N = p->N, K = p->K, Kp = g->Kp, R = W8A8_CPU_OMR;
  const int64_t esz = g->is_i8 ? 2 : 4;
  int64_t mc = W8A8_CPU_OMC;
  if ((int64_t)(W8A8_CPU_A_BYTES / (size_t)(Kp * esz)) < mc)
    mc = (int64_t)(W8A8_CPU_A_BYTES / (size_t)(Kp * esz)) / R * R;
  if (mc < R) return W8A8_ERROR_UNSUPPORTED_DEVICE; /* the caller takes the dot path */
  mc = w8a8_cpu_equal_blocks(M, mc, R);
  const int64_t panels = (N + W8A8_CPU_NB - 1) / W8A8_CPU_NB;
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
      const int64_t mcur = M - ic < mc ? M - ic : mc, nq = (mcur + R - 1) / R;
#pragma omp for schedule(static)
      for (int64_t q = 0; q < nq; q++) {
        const int64_t rows = mcur - q * R < R ? mcur - q * R : R;
        pack_a_outer(g->is_i8, (const uint8_t *)p->a + (ic + q * R) * p->lda, p->lda, (int)rows, K, Kp,
                     ws->a + (size_t)(q * R * Kp * esz));
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
        if (q0 < q1) run_item_outer(g, ws->a, ic, mcur, q0, q1, n0, n1, slot);
      }
    }
  }
  return W8A8_SUCCESS;
}

int64_t w8a8_gemm_avx2_block_k_max(void) {
  /* gemm_outer packs at least one panel of W8A8_CPU_OMR rows of fp32 */
  return (int64_t)(W8A8_CPU_A_BYTES / (4 * W8A8_CPU_OMR)) / W8A8_CPU_KPAD * W8A8_CPU_KPAD;
}

int64_t w8a8_gemm_avx2_block_rows(w8a8_dtype in_dtype, int64_t K) {
  const int64_t Kp = (K + W8A8_CPU_KPAD - 1) / W8A8_CPU_KPAD * W8A8_CPU_KPAD;
  const int64_t esz = in_dtype == W8A8_DTYPE_INT8 ? 2 : 4;
  int64_t mc = W8A8_CPU_MC_MAX;
  if (Kp > 0 && (int64_t)(W8A8_CPU_A_BYTES / (size_t)(Kp * esz)) < mc)
    mc = (int64_t)(W8A8_CPU_A_BYTES / (size_t)(Kp * esz)) / W8A8_CPU_MR * W8A8_CPU_MR;
  return mc;
}

w8a8_status w8a8_gemm_avx2(const w8a8_mm_problem *p, const w8a8_gemm_ws *ws, int nthreads, int avx512) {
  const int64_t M = p->M, N = p->N, K = p->K;
  if (M == 0 || N == 0) return W8A8_SUCCESS;
  gemm_ctx g;
  g.p = g.epi = p;
  g.is_i8 = p->in_dtype == W8A8_DTYPE_INT8;
  g.avx512 = avx512;
  g.block = p->block_scaled;
  /* Block scales: the outer path at every M (K = 0: the dot path's zero tile), its epilogue adding the bias to acc
   * and rounding (unit scales). */
  static const float one = 1.0f;
  w8a8_mm_problem unit;
  if (g.block) {
    unit = *p;
    unit.scale_a = unit.scale_b = &one;
    unit.scale_a_per_token = unit.scale_b_per_channel = false;
    unit.block_scaled = false;
    g.epi = &unit;
  }
  const bool outer = g.block || M >= (g.is_i8 ? W8A8_CPU_OUTER_MMIN_I8 : W8A8_CPU_OUTER_MMIN_F8);
  g.raw = g.is_i8 && M <= W8A8_CPU_RAW_MMAX;
  g.Kp = (K + W8A8_CPU_KPAD - 1) / W8A8_CPU_KPAD * W8A8_CPU_KPAD;
  g.kc = g.is_i8 ? W8A8_CPU_KC_I8 : W8A8_CPU_KC_F8;
  if (!g.raw && outer) g.kc = g.is_i8 ? W8A8_CPU_OKC_I8 : W8A8_CPU_OKC_F8;
  const int T = w8a8_cpu_gemm_threads(p, ws, nthreads);
  if (K > 0 && outer && gemm_outer(&g, ws, T) == W8A8_SUCCESS) return W8A8_SUCCESS;
  if (g.block && K > 0)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "w8a8_scaled_mm_blockwise: K = %lld is past the AVX2 kernel's %lld", (long long)K,
                    (long long)w8a8_gemm_avx2_block_k_max());
  int64_t mc = w8a8_gemm_avx2_block_rows(p->in_dtype, K);
  if (mc < W8A8_CPU_MR && mc < M)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "w8a8_scaled_mm: K = %lld is too large for the AVX2 kernel's workspace", (long long)K);
  if (mc > M) mc = M;
  if (mc < M) mc = w8a8_cpu_equal_blocks(M, mc, W8A8_CPU_MR);
  const int64_t panels = (N + W8A8_CPU_NB - 1) / W8A8_CPU_NB;

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
      const int64_t mcur = M - ic < mc ? M - ic : mc;
      /* Convert the block's rows of A (shared). */
#pragma omp for schedule(static)
      for (int64_t i = 0; i < mcur; i++) {
        if (g.is_i8)
          cvt_i8_i16((const int8_t *)p->a + (ic + i) * p->lda, K, (int16_t *)ws->a + i * g.Kp, g.Kp);
        else
          cvt_fp8_f32((const uint8_t *)p->a + (ic + i) * p->lda, K, (float *)ws->a + i * g.Kp, g.Kp);
      }
      /* Too few panels for the threads: also split the block's rows (multiples of MR). */
      const int64_t MR = W8A8_CPU_MR;
      int64_t msplit = 1;
      if (panels < nth) {
        msplit = (nth + panels - 1) / panels;
        if (msplit > (mcur + MR - 1) / MR) msplit = (mcur + MR - 1) / MR;
      }
      const int64_t rps = ((mcur + msplit - 1) / msplit + MR - 1) / MR * MR;
      /* dynamic: a thread that loses its core for a while (shared machines, CI runners) does
       * not hold the others at the barrier; items are 48 columns x all of K, so the atomic
       * per item is noise */
#pragma omp for schedule(dynamic, 1)
      for (int64_t it = 0; it < panels * msplit; it++) {
        const int64_t pn = it / msplit, ms = it % msplit;
        const int64_t r0 = ms * rps, r1 = r0 + rps < mcur ? r0 + rps : mcur;
        const int64_t n0 = pn * W8A8_CPU_NB, n1 = n0 + W8A8_CPU_NB < N ? n0 + W8A8_CPU_NB : N;
        if (r0 < r1) run_item(&g, ws->a, ic, r0, r1, n0, n1, slot);
      }
      /* implicit barrier: the next block may overwrite ws->a */
    }
  }
  return W8A8_SUCCESS;
}
