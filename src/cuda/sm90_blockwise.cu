// sm90_blockwise.cu — the host side of the block-scaled sm_90a kernel (sm90_blockwise.cuh): the plan
// (w8a8_sm90_bw_plan, plain C), the tensor maps and the launch.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#include "../core/knobs.h"
#include "common.cuh"
#include "cuda_backend.h"
#include "sm90_blockwise.cuh"

#if defined(W8A8_HAVE_SM90A)
namespace {

const char FN[] = "w8a8_scaled_mm_blockwise";

typedef void (*bw_kernel_fn)(const CUtensorMap, const CUtensorMap, const sm90_bw_args);
struct bw_kernel {
  bw_kernel_fn fn;
  int smem, bn, swap;
  const char *name;  // the launch record's configuration
};
// One kernel per tile shape of the plan; the swapped tiles take as many stages as fit (the fewest tokens stream the
// weights, so more bytes in flight).
#define BW_ROW(BN, SWAP, STAGES) \
  {sm90_bw_kernel<BN, SWAP, STAGES>, sm90_bw_smem<BN, SWAP, STAGES>::BYTES, BN, SWAP, SWAP ? "swap_n" #BN : "tile_n" #BN}
const bw_kernel KERNELS[] = {BW_ROW(128, false, 6), BW_ROW(256, false, 4), BW_ROW(64, true, 8), BW_ROW(32, true, 10),
                             BW_ROW(16, true, 12)};
#undef BW_ROW
constexpr int NKERNELS = sizeof KERNELS / sizeof KERNELS[0];
constexpr int MAX_DEVICES = 64;
int g_smem_set[NKERNELS][MAX_DEVICES];

w8a8_status prepare(int dev, int ki) {
  if (dev < 0 || dev >= MAX_DEVICES) return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: device %d", FN, dev);
  if (__atomic_load_n(&g_smem_set[ki][dev], __ATOMIC_ACQUIRE)) return W8A8_SUCCESS;
  const cudaError_t e =
      cudaFuncSetAttribute((const void *)KERNELS[ki].fn, cudaFuncAttributeMaxDynamicSharedMemorySize, KERNELS[ki].smem);
  if (e != cudaSuccess) return w8a8_cuda_error(FN, "cudaFuncSetAttribute(blockwise kernel smem)", e);
  __atomic_store_n(&g_smem_set[ki][dev], 1, __ATOMIC_RELEASE);
  return W8A8_SUCCESS;
}

}  // namespace
#endif

#if defined(W8A8_HAVE_SM90A)
namespace {
// Whether the kernel takes p (the launch's own refusals but the driver's tensor maps): UNSUPPORTED_DEVICE with
// the reason, nothing written.
w8a8_status accepts(const w8a8_handle *h, const w8a8_mm_problem *p) {
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  if (!st || st->cc != 90)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the sm_90a kernel needs a compute capability 9.0 GPU", FN);
  if (((uintptr_t)p->a & 15) || (p->lda & 15) || ((uintptr_t)p->b & 15) || (p->ldb & 15))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "%s: the sm_90a kernel needs 16-byte aligned A and B with lda, ldb %% 16 == 0 (lda=%lld, ldb=%lld)",
                    FN, (long long)p->lda, (long long)p->ldb);
  if (p->M < 1 || p->N < 1 || p->K < 1 || p->M > INT32_MAX / 2 || p->N > INT32_MAX / 2 || p->K > INT32_MAX / 2 ||
      p->lda >= ((int64_t)1 << 39) || p->ldb >= ((int64_t)1 << 39))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the sm_90a kernel does not take M=%lld N=%lld K=%lld", FN,
                    (long long)p->M, (long long)p->N, (long long)p->K);
  return W8A8_SUCCESS;
}
}  // namespace
#endif

extern "C" W8A8_HIDDEN w8a8_status w8a8_sm90_blockwise_check(const w8a8_handle *h, const w8a8_mm_problem *p) {
#if !defined(W8A8_HAVE_SM90A)
  (void)h, (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_scaled_mm_blockwise: this library was built without sm_90a code");
#else
  return accepts(h, p);
#endif
}

extern "C" W8A8_HIDDEN w8a8_status w8a8_sm90_scaled_mm_blockwise(w8a8_handle *h, const w8a8_mm_problem *p) {
#if !defined(W8A8_HAVE_SM90A)
  (void)h, (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_scaled_mm_blockwise: this library was built without sm_90a code");
#else
  W8A8_CHECK(accepts(h, p));
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  const int num_sms = st->prop.multiProcessorCount;
  const sm90_bw_plan pl = w8a8_sm90_bw_plan(p->M, p->N, p->K, num_sms, (int)w8a8_knob_int(W8A8_KNOB_SM90_BW_TILE),
                                            (int)w8a8_knob_int(W8A8_KNOB_SM90_BW_SPLIT));
  int ki = 0;
  while (ki < NKERNELS && (KERNELS[ki].swap != pl.swap || KERNELS[ki].bn != pl.bn)) ki++;
  if (ki == NKERNELS) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: no kernel for the plan's %d-wide tile", FN, pl.bn);

  CUtensorMap tx, ty;
  const void *xp = pl.swap ? p->b : p->a, *yp = pl.swap ? p->a : p->b;
  const int64_t rows_x = pl.swap ? p->N : p->M, rows_y = pl.swap ? p->M : p->N;
  if (w8a8_sm90_tmap_k128(&tx, xp, rows_x, p->K, pl.swap ? p->ldb : p->lda, SM90_BM) != 0 ||
      w8a8_sm90_tmap_k128(&ty, yp, rows_y, p->K, pl.swap ? p->lda : p->ldb, pl.bn) != 0)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: cuTensorMapEncodeTiled refused the operands", FN);
  int dev = 0;
  cudaGetDevice(&dev);
  W8A8_CHECK(prepare(dev, ki));

  sm90_bw_args a;
  memset(&a, 0, sizeof a);
  a.M = (int)p->M, a.N = (int)p->N, a.K = (int)p->K;
  a.kblocks = (int)((p->K + SM90_BK - 1) / SM90_BK);
  a.tiles_x = (int)((rows_x + SM90_BM - 1) / SM90_BM);
  a.tiles_y = (int)((rows_y + pl.bn - 1) / pl.bn);
  a.split = pl.split;
  a.nblocks_n = (int)((p->N + 127) / 128);
  a.out = p->out;
  a.ldo = p->ldo;
  a.out_kind = (int)p->out_dtype;
  const int esz = p->out_dtype == W8A8_DTYPE_FP32 ? 4 : 2;
  a.pair_store = (uintptr_t)p->out % (2 * esz) == 0 && p->ldo % 2 == 0;
  a.vec_store = (uintptr_t)p->out % 16 == 0 && (p->ldo * esz) % 16 == 0;
  a.sa = p->scale_a, a.sb = p->scale_b;
  a.sa_rs = p->sa_rs, a.sa_cs = p->sa_cs, a.sb_rs = p->sb_rs, a.sb_cs = p->sb_cs;
  a.bias = p->bias;

  // split > 1: one tile per cluster (its CTAs meet at two cluster barriers per tile); else persistent CTAs.
  const int tiles = a.tiles_x * a.tiles_y;
  const int ctas = pl.split > 1 ? tiles * pl.split : (tiles < num_sms ? tiles : num_sms);
  cudaLaunchAttribute at[2];
  cudaLaunchConfig_t lc = w8a8_sm90_launch_config((unsigned)ctas, SM90_THREADS, (size_t)KERNELS[ki].smem, h->stream,
                                                  pl.split > 1 ? pl.split : 0, at);
  const cudaError_t e = cudaLaunchKernelEx(&lc, KERNELS[ki].fn, tx, ty, a);
  if (e != cudaSuccess) return w8a8_cuda_error(FN, "launch of the sm90 blockwise kernel", e);
  w8a8_note_launch(h, "sm90-blockwise", KERNELS[ki].name, pl.split, p->M, p->N, p->K);
  return W8A8_SUCCESS;
#endif
}
