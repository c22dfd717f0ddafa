/* cuda_backend.h — CUDA backend state and the extern "C" launchers of the .cu files. */
#ifndef W8A8_CUDA_BACKEND_H
#define W8A8_CUDA_BACKEND_H
#include <cuda_runtime.h>
#include <string.h>

#include "../core/internal.h"
#include "dispatch_rule.h"
#include "sm90_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct w8a8_cuda_state {
  struct cudaDeviceProp prop;
  int cc;          /* 75, 80, 86, 89, 90 ... */
  int code_cc;     /* the virtual architecture (x 10) of the kernels' code loaded for this GPU (w8a8_cuda_gemm_setup) */
  void *ws;        /* device workspace, allocated at handle creation */
  size_t ws_bytes;
  /* The sm90 stream-K kernels' locks (after ws in the same allocation, zeroed at creation; every
   * launch leaves them zero): W8A8_SK_LOCKS of them. Their partial tiles go to ws. */
  unsigned int *sk_locks;
  /* The dynamic per-tensor quantizers' amax (after the locks, 256 bytes of the same allocation): zeroed,
   * reduced into and read by each such call in stream order, so that the caller's scale is written only
   * by the call's last kernel (nothing the caller owns changes when an earlier launch fails). */
  float *amax;
} w8a8_cuda_state;

W8A8_HIDDEN w8a8_status w8a8_cuda_error(const char *fn, const char *what, cudaError_t e);
/* The handle's device made current for the duration of a call, the caller's restored after; entering also drops
 * a stale non-sticky error of the caller's, so a launch check reports only the call's own launches. */
typedef struct w8a8_cuda_guard {
  int prev;
  int changed;
} w8a8_cuda_guard;
W8A8_HIDDEN w8a8_status w8a8_cuda_guard_enter(const char *fn, const w8a8_handle *h, w8a8_cuda_guard *g);
W8A8_HIDDEN void w8a8_cuda_guard_exit(const w8a8_cuda_guard *g);
/* A CUDA driver function by name, through the runtime's entry points (no link-time libcuda),
 * looked up once into *cache (racing first calls store the same pointer); NULL if unavailable. */
W8A8_HIDDEN void *w8a8_cuda_driver_proc(const char *name, void **cache);
/* Allocate the handle's workspaces and prepare the kernels (dispatch.c). */
W8A8_HIDDEN w8a8_status w8a8_cuda_state_init(w8a8_handle *h, w8a8_cuda_state *st);
W8A8_HIDDEN void w8a8_cuda_state_fini(w8a8_handle *h, w8a8_cuda_state *st);
W8A8_HIDDEN int w8a8_cuda_poison_ws(w8a8_handle *h, void *stream, int byte);

/* Hopper fast path (src/cuda/sm90_*.cu). Returns W8A8_ERROR_UNSUPPORTED_DEVICE (without touching
 * memory) when it cannot take the problem (not sm_90, alignment, ...); the dispatcher then falls
 * back to the portable kernel unless the handle forces W8A8_KERNEL_SM90. */
W8A8_HIDDEN w8a8_status w8a8_sm90_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p);
W8A8_HIDDEN int w8a8_sm90_accepts(const w8a8_handle *h, const w8a8_mm_problem *p);
/* The same with the refusal's status and message (W8A8_SUCCESS where it takes p). */
W8A8_HIDDEN w8a8_status w8a8_sm90_check(const w8a8_handle *h, const w8a8_mm_problem *p);
/* Whether w8a8_cuda_scaled_mm honours p->ready for p (the sm_90a kernel runs it). */
W8A8_HIDDEN int w8a8_cuda_takes_ready(const w8a8_handle *h, const w8a8_mm_problem *p);
/* Where the handle forces a kernel that refuses inputs (W8A8_KERNEL_SM90): whether w8a8_cuda_scaled_mm (for a
 * block-scaled p, w8a8_cuda_scaled_mm_blockwise) would run p, else its refusal (status and message); W8A8_SUCCESS
 * for AUTO and GENERIC, which take every valid problem. Nothing launched. */
W8A8_HIDDEN w8a8_status w8a8_cuda_forced_check(const w8a8_handle *h, const w8a8_mm_problem *p);

/* The block-scaled sm_90a kernel (sm90_blockwise.cu): UNSUPPORTED_DEVICE (nothing written) where it cannot take p. */
W8A8_HIDDEN w8a8_status w8a8_sm90_scaled_mm_blockwise(w8a8_handle *h, const w8a8_mm_problem *p);
/* Its refusal of p without a launch (the alignment and size rules; the driver's tensor maps are not asked). */
W8A8_HIDDEN w8a8_status w8a8_sm90_blockwise_check(const w8a8_handle *h, const w8a8_mm_problem *p);
/* A TMA map of a K-major 8-bit operand [rows, K] (row stride ld bytes) in boxes of 128 x box_rows with the 128-byte
 * swizzle, into map (a CUtensorMap): 0, or -1 where the driver refuses it (sm90_gemm.cu). */
W8A8_HIDDEN int w8a8_sm90_tmap_k128(void *map, const void *base, int64_t rows, int64_t K, int64_t ld, int box_rows);
/* The launch of an sm_90a kernel (sm90_gemm.cu, sm90_blockwise.cu): `grid` CTAs of `threads` threads with `smem` bytes
 * of dynamic shared memory on `stream`, in clusters of `cluster` CTAs along x (0: no cluster attribute), with
 * programmatic dependent launch (the kernels wait with griddepcontrol.wait before they read anything, so their launch
 * and prologue overlap the previous kernel's tail). `at`: the two attribute slots the configuration points to. */
static inline cudaLaunchConfig_t w8a8_sm90_launch_config(unsigned grid, unsigned threads, size_t smem, void *stream,
                                                         int cluster, cudaLaunchAttribute at[2]) {
  cudaLaunchConfig_t lc;
  memset(&lc, 0, sizeof lc);
  memset(at, 0, 2 * sizeof at[0]);
  unsigned n = 0;
  if (cluster > 0) {
    at[n].id = cudaLaunchAttributeClusterDimension;
    at[n].val.clusterDim.x = (unsigned)cluster;
    at[n].val.clusterDim.y = 1;
    at[n].val.clusterDim.z = 1;
    n++;
  }
  at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[n].val.programmaticStreamSerializationAllowed = 1;
  n++;
  lc.gridDim.x = grid, lc.gridDim.y = 1, lc.gridDim.z = 1;
  lc.blockDim.x = threads, lc.blockDim.y = 1, lc.blockDim.z = 1;
  lc.dynamicSmemBytes = smem;
  lc.stream = (cudaStream_t)stream;
  lc.attrs = at;
  lc.numAttrs = n;
  return lc;
}
/* Whether the library holds the sm_90a kernels (gemm_mma.cu: W8A8_HAVE_SM90A, an nvcc flag). */
W8A8_HIDDEN int w8a8_cuda_have_sm90a(void);
/* What the library can run on the handle's GPU (dispatch_rule.h), and the capability its kernels are chosen for. */
W8A8_HIDDEN w8a8_cuda_target w8a8_cuda_target_of(const w8a8_cuda_state *st);
W8A8_HIDDEN int w8a8_cuda_handle_cc(const w8a8_handle *h);
/* The quantizers' fp8 output: W8A8_SUCCESS on a GPU of 8.9+, else UNSUPPORTED_DEVICE naming 8.9 (the GEMM's fp8:
 * dispatch_rule.h, which also asks the code the library holds for the GPU). */
W8A8_HIDDEN w8a8_status w8a8_cuda_need_fp8(const char *fn, const w8a8_handle *h);

/* Launchers of the portable kernels (gemm_mma.cu, quant.cu). They launch on `stream` and
 * check the launch; the caller has made the handle's device current and checked the device. */
/* With the GPU of compute capability cc current: *code_cc (w8a8_cuda_state.code_cc), and the kernels' shared
 * memory limits. UNSUPPORTED_DEVICE where the library holds no code that runs on this GPU. */
W8A8_HIDDEN w8a8_status w8a8_cuda_gemm_setup(int cc, int *code_cc);
/* ws: the handle's workspace (split-K partial sums); the launcher never uses more than ws_bytes. gemm: the sm_80+
 * kernel (int8, fp8 from sm_89); gemm_sm75: the sm_75 one (int8). */
W8A8_HIDDEN w8a8_status w8a8_cuda_launch_gemm(const w8a8_mm_problem *p, cudaStream_t stream, int num_sms, void *ws,
                                              size_t ws_bytes);
W8A8_HIDDEN w8a8_status w8a8_cuda_launch_gemm_sm75(const w8a8_mm_problem *p, cudaStream_t stream, int num_sms, void *ws,
                                                   size_t ws_bytes);
/* gemv.cu: the CUDA-core kernel for M <= 8 (int8) / M = 1 (fp8); whether it takes p and whether the dispatcher
 * wants it (w8a8_cuda_gemv_takes, w8a8_cuda_gemv_wanted): sm90_plan.h. */
W8A8_HIDDEN w8a8_status w8a8_cuda_launch_gemv(const w8a8_mm_problem *p, cudaStream_t stream, int num_sms);
/* amax: the handle's w8a8_cuda_state.amax (dynamic per-tensor mode's scratch). */
W8A8_HIDDEN w8a8_status w8a8_cuda_launch_quantize(const w8a8_quant_problem *p, cudaStream_t stream, int num_sms,
                                                  float *amax);
W8A8_HIDDEN w8a8_status w8a8_cuda_launch_colsum(const w8a8_colsum_problem *p, cudaStream_t stream, int num_sms);

#ifdef __cplusplus
}
#endif
#endif
