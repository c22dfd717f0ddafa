/* gemm_kernels.h — what the CPU GEMM dispatcher (gemm_fast.c) shares with the
 * ISA-specific driver (gemm_avx2.c) and the quantizers (quant_fast.c).
 *
 * Blocking (the same for every ISA; see docs/CPU.md):
 *   - A is converted once per block of up to MC rows into the shared workspace
 *     (int8 -> int16, fp8 -> fp32), each row zero-padded to Kp = K rounded up to 64.
 *   - The N columns are cut into panels of NB; a work item is (panel, slice of the
 *     A block's rows); OpenMP threads take items dynamically.
 *   - Per item, B is converted KC columns of K at a time into the thread's slot
 *     (NB rows of KC), and "dot" micro-kernels (MR=3 rows of A x NR=3 rows of B,
 *     one vector accumulator per output, reduced horizontally at the end of each
 *     slice) add into an int32/fp32 tile C[rows x NB] in the slot.
 *   - The epilogue (zero point, scales, bias, rounding) runs over that tile once
 *     the whole K is summed, and writes the output: one pass, never re-read.
 *   - For int8 with M <= W8A8_CPU_RAW_MMAX (decode, small prefill), B is not converted:
 *     the kernel sign-extends the weights as it reads them, each tile of 3 columns over
 *     all rows of A in turn (GEMV-like: the weights stream from memory once).
 *   - From M = W8A8_CPU_OUTER_MMIN_* up ("outer" path, gemm_outer in gemm_avx2.c): A is
 *     packed once per block of up to OMC rows into transposed 16-row panels (int8 as
 *     int16 k-pairs, fp8 as fp32), B is converted per slice as above (OKC k at a time),
 *     and a 16 x 6 outer-product micro-kernel (12 accumulators, B broadcast) adds into a
 *     column-major C tile, transposed once per item before the same epilogue. */
#ifndef W8A8_CPU_GEMM_KERNELS_H
#define W8A8_CPU_GEMM_KERNELS_H
#include "cpu_kernels.h"

#define W8A8_CPU_MR 3            /* rows of A per micro-kernel */
#define W8A8_CPU_NB 48           /* output columns per panel (multiple of 3) */
#define W8A8_CPU_KC_I8 2048      /* k per B slice, int8 (int16 in the slot: 192 KiB) */
#define W8A8_CPU_KC_F8 1024      /* k per B slice, fp8 (fp32 in the slot: 192 KiB) */
#define W8A8_CPU_KPAD 64         /* rows of the converted A/B are padded to this many k */
#define W8A8_CPU_MC_MAX 264      /* rows of A per block (multiple of MR, >= 256: M=256 in one block) */
#define W8A8_CPU_RAW_MMAX 48     /* int8 M up to this: weights read raw, no B conversion (measured) */
#define W8A8_CPU_OMR 16          /* outer-product path: rows per micro-tile (two 8-lane vectors) */
#define W8A8_CPU_ONR 6           /* outer-product path: columns per micro-tile (broadcast) */
#define W8A8_CPU_OKC_I8 1024     /* outer path, k per slice: A panel 32 KiB + 6 B columns 12 KiB in L1 */
#define W8A8_CPU_OKC_F8 512      /* outer path, fp32: 32 KiB + 12 KiB likewise (a multiple of 128: whole blocks) */
#define W8A8_CPU_OMC 256         /* outer-product path: rows per A block (multiple of OMR) */
#define W8A8_CPU_OUTER_MMIN_I8 49 /* int8 M from here: outer-product path (below: raw decode path) */
#define W8A8_CPU_OUTER_MMIN_F8 32 /* fp8 M from here: outer-product path (16-row tiles waste less) */
#define W8A8_CPU_A_BYTES ((size_t)16 << 20) /* 256 rows of K = 14336 as fp32 in one block */
#define W8A8_CPU_SLOT_B_BYTES ((size_t)W8A8_CPU_NB * W8A8_CPU_KC_F8 * 4)
#define W8A8_CPU_SLOT_C_BYTES ((size_t)W8A8_CPU_MC_MAX * W8A8_CPU_NB * 4)
/* The AMX path's extra room per slot (gemm_amx.c: a 256 x 256 int32 C^T tile, 32 packed weight
 * columns of a 4 KiB k slice); only that path touches these pages. */
#define W8A8_CPU_SLOT_AMX_BYTES ((size_t)256 << 10)
#define W8A8_CPU_SLOT_BYTES (W8A8_CPU_SLOT_B_BYTES + W8A8_CPU_SLOT_C_BYTES + 4096 + W8A8_CPU_SLOT_AMX_BYTES)
#define W8A8_CPU_MAX_SLOTS 256

/* The handle's workspace, cut up for one call. */
typedef struct w8a8_gemm_ws {
  char *a;          /* W8A8_CPU_A_BYTES, shared by the threads */
  char *slots;      /* nslots x W8A8_CPU_SLOT_BYTES, one per thread */
  int nslots;
} w8a8_gemm_ws;

/* The AVX2+FMA+F16C driver: computes p with at most `nthreads` threads (<= ws->nslots);
 * avx512 != 0 (the CPU has AVX-512F) lets the fp8 outer path use its AVX-512 FMA kernel.
 * Returns W8A8_ERROR_UNSUPPORTED_DEVICE (with a message) when the problem does not fit
 * the blocking (K too large for even MR rows of A in the workspace). */
W8A8_HIDDEN w8a8_status w8a8_gemm_avx2(const w8a8_mm_problem *p, const w8a8_gemm_ws *ws, int nthreads, int avx512);
/* Rows of A the AVX2 driver's dot path converts per block at this K (its blocking; 0 where not even MR rows fit
 * the workspace): the driver refuses a problem of more rows than this where it is below MR. */
W8A8_HIDDEN int64_t w8a8_gemm_avx2_block_rows(w8a8_dtype in_dtype, int64_t K);
/* The largest K the driver takes with block scales (its outer path: one 16-row panel of fp32 in the workspace). */
W8A8_HIDDEN int64_t w8a8_gemm_avx2_block_k_max(void);

/* The AVX-512 VNNI int8 driver (gemm_avx512vnni.c), used for int8 with M >= W8A8_CPU_VNNI_MMIN
 * on CPUs with avx512f/bw/vnni. Returns W8A8_ERROR_UNSUPPORTED_DEVICE (no message) for what it
 * does not take (K % 4 != 0, K too large for the A block); the caller then runs the AVX2 path. */
#define W8A8_CPU_VNNI_MMIN 16
W8A8_HIDDEN w8a8_status w8a8_gemm_avx512vnni(const w8a8_mm_problem *p, const w8a8_gemm_ws *ws, int nthreads);

/* The AMX driver (gemm_amx.c): int8 with tdpbssd, used for M >= W8A8_CPU_AMX_MMIN where
 * w8a8_cpu_detect found AMX usable (CPUID, XCR0 and the kernel's permission); fp8 with tdpbf16ps
 * on fp8 decoded to bf16, used for M >= W8A8_CPU_AMXBF16_MMIN where it also found AMX-BF16. Any K,
 * any strides. Returns W8A8_ERROR_UNSUPPORTED_DEVICE (no message) for what it does not take
 * (K == 0, K too large for 32 rows of A in the workspace); the caller then runs the other paths. */
#define W8A8_CPU_AMX_MMIN 3 /* measured on the 8b shapes: M = 2 ties the raw decode path, M = 3 gains 0-10%, M >= 4 30-60% */
#define W8A8_CPU_AMXBF16_MMIN 1 /* fp8: faster than the FMA paths from M = 1 (1.4-1.8x) */
W8A8_HIDDEN w8a8_status w8a8_gemm_amx(const w8a8_mm_problem *p, const w8a8_gemm_ws *ws, int nthreads);
/* Calls of the AMX driver completed in this process, int8 and fp8 (tests check that it really ran). */
W8A8_HIDDEN long w8a8_cpu_amx_runs(void);
W8A8_HIDDEN long w8a8_cpu_amx_bf16_runs(void);

/* The fused epilogue (gemm_avx2.c; needs AVX2+FMA+F16C). c is int32 (int8 problems) or
 * fp32 (fp8) accumulators, row-major with ld ldc, for output rows m0.. and columns n0... */
W8A8_HIDDEN void w8a8_avx2_epilogue(const w8a8_mm_problem *p, const void *c, int64_t ldc, int64_t m0,
                                    int64_t mrows, int64_t n0, int64_t ncols);

/* Blocking and threading shared by the GEMM drivers. */
/* Rows per block of A: the block count that mc allows, then equal blocks rounded up to multiples of r
 * (256 rows as 255 + 1 would convert B twice). */
static inline int64_t w8a8_cpu_equal_blocks(int64_t M, int64_t mc, int64_t r) {
  const int64_t nblk = (M + mc - 1) / mc;
  return ((M + nblk - 1) / nblk + r - 1) / r * r;
}
/* Threads a call uses: what was asked, capped by the workspace slots; 1 below ~1M multiply-adds,
 * where the fork/join costs more than a second core saves. */
static inline int w8a8_cpu_gemm_threads(const w8a8_mm_problem *p, const w8a8_gemm_ws *ws, int nthreads) {
  int t = nthreads < ws->nslots ? nthreads : ws->nslots;
  if (t < 1 || (double)p->M * (double)p->N * (double)(p->K + 16) < 1e6) t = 1;
  return t;
}

/* Quantizers (quant_fast.c). */
W8A8_HIDDEN w8a8_status w8a8_quantize_avx2(const w8a8_quant_problem *p, int nthreads);

#endif
