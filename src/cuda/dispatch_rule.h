/* dispatch_rule.h — which CUDA kernel w8a8_scaled_mm runs, or why it refuses: plain C (dispatch_rule.c), in every
 * build, CPU-only too, so that a CPU test (tests/test_dispatch.c) checks the choice dispatch.c acts on for every
 * compute capability, dtype, token count and kernel the handle forces. */
#ifndef W8A8_DISPATCH_RULE_H
#define W8A8_DISPATCH_RULE_H

#include "../core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum w8a8_cuda_path {
  W8A8_PATH_REFUSED = 0, /* W8A8_ERROR_UNSUPPORTED_DEVICE: the route's why and need say what is missing */
  W8A8_PATH_GEMV,        /* gemv.cu: CUDA cores, the fewest tokens */
  W8A8_PATH_SM90,        /* sm90_gemm.cu: TMA + wgmma, sm_90a */
  W8A8_PATH_MMA,         /* gemm_mma.cu gemm_mma_kernel: cp.async + mma m16n8k32, sm_80+ (fp8 sm_89+) */
  W8A8_PATH_MMA_SM75     /* gemm_mma.cu gemm_sm75_kernel: register-staged loads + mma m8n8k16, int8, sm_75+ */
} w8a8_cuda_path;

/* Why a route is refused. */
typedef enum w8a8_route_why {
  W8A8_ROUTE_OK = 0,
  W8A8_ROUTE_OLD_GPU,     /* below compute capability 7.5 */
  W8A8_ROUTE_FP8,         /* fp8 operands below 8.9 */
  W8A8_ROUTE_SM90_FORCED  /* W8A8_KERNEL_SM90 on a GPU that is not 9.0 */
} w8a8_route_why;

/* What the library can run on one GPU. */
typedef struct w8a8_cuda_target {
  int cc;      /* the GPU's compute capability x 10: 75, 80, 86, 89, 90 */
  int code_cc; /* the virtual architecture x 10 that the kernels' code loaded for this GPU was compiled for: cc's
                  own, or an older one where the fatbin holds only older PTX for it (JIT); 0: as cc */
  int sm90a;   /* the library holds the sm_90a kernels (90a in CUDA_ARCHS: W8A8_HAVE_SM90A) */
} w8a8_cuda_target;

typedef struct w8a8_cuda_route {
  w8a8_cuda_path path;     /* what runs */
  w8a8_cuda_path fallback; /* path SM90 under AUTO: what runs where the Hopper kernel declines p; else REFUSED */
  w8a8_route_why why;      /* path REFUSED: why */
  int need;                /* path REFUSED: the compute capability x 10 that would run p (75, 89, 90) */
  int cc;                  /* the capability the choice was made for: w8a8_cuda_dispatch_cc */
} w8a8_cuda_route;

/* The capability x 10 whose kernels a handle on t runs: the least of the GPU's, its code's and W8A8_DEV
 * CUDA_FORCE_PATH (where set: a GPU dispatched as an older one, e.g. 75 on an H100 runs what a T4 runs). */
W8A8_HIDDEN int w8a8_cuda_dispatch_cc(const w8a8_cuda_target *t);

/* The kernel w8a8_scaled_mm runs for p on t with the handle's forced kernel (W8A8_KERNEL_AUTO, GENERIC or SM90),
 * in order: the refusals (below 7.5; fp8 below 8.9; SM90 forced on another GPU); AUTO: the CUDA-core GEMV where
 * w8a8_cuda_gemv_wanted says so; sm_90 with AUTO (where the library holds sm_90a code) or SM90: the Hopper kernel,
 * the portable one its fallback under AUTO; else the portable kernel of the capability: sm_80+ (mma), below it
 * int8 on sm_75 (mma_sm75). Every step reads w8a8_cuda_dispatch_cc, not the GPU's own capability. */
W8A8_HIDDEN w8a8_cuda_route w8a8_cuda_route_mm(const w8a8_cuda_target *t, const w8a8_mm_problem *p, w8a8_kernel kernel);

/* Whether the Hopper kernel is tried for a problem the GEMV does not take (every problem with ready flags): sm_90
 * with W8A8_KERNEL_SM90, or AUTO where the library holds sm_90a code. */
W8A8_HIDDEN int w8a8_cuda_sm90_first(const w8a8_cuda_target *t, w8a8_kernel kernel);

/* "gemv", "sm90", "mma", "mma_sm75" (the launch record's kernel names), "refused". */
W8A8_HIDDEN const char *w8a8_cuda_path_name(w8a8_cuda_path path);

#ifdef __cplusplus
}
#endif
#endif
