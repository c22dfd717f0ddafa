// sm90_gemm.cu — the Hopper (sm_90a) fast path of w8a8_scaled_mm: host side.
//
// Takes a resolved problem, decides whether the TMA + wgmma kernel can run it (else returns
// W8A8_ERROR_UNSUPPORTED_DEVICE without touching memory, and the dispatcher falls back to the
// portable kernel), asks the planner (sm90_plan.c) for a configuration, builds the TMA descriptors and
// launches on the handle's stream. Nothing here allocates or synchronizes: the descriptors are kernel
// parameters (__grid_constant__), so a call can be captured into a CUDA graph. The kernels are
// instantiated here, one per row of sm90_configs.h.
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/knobs.h"
#include "../core/tune.h"
#include "cuda_backend.h"
#include "sm90_gemm_kernel.cuh"
#include "sm90_plan.h"

static const char FN[] = "w8a8_scaled_mm";

// ---- configurations -----------------------------------------------------------------------------

// The table's rows (sm90_configs.h), decoded (sm90_plan.c).
static const sm90_config *const CONFIGS = w8a8_sm90_configs;
#define SM90_MAX_DEVICES 64

// The last map is the token tail's (only the kernels with TAIL read it; sm90_args.tail_n).
typedef void (*sm90_kernel_fn)(const CUtensorMap, const CUtensorMap, const CUtensorMap, const sm90_args,
                               const CUtensorMap);

// A row's kernel: its flags as the template arguments of sm90_gemm_kernel, or of sm90_skinny_kernel (SM90_SKINNY,
// whose fp8 always promotes), and the dynamic shared memory it needs.
template <int BN, int STAGES, int MINB, int F, bool SKINNY = (F & SM90_SKINNY) != 0>
struct sm90_instance {
  static constexpr bool INT8 = (F & SM90_INT8) != 0, SWAP = (F & SM90_SWAP) != 0, PROMOTE = (F & SM90_PROMOTE) != 0,
                        SPLITK = (F & SM90_SPLITK) != 0, TAIL = (F & SM90_TAIL) != 0, STREAMK = (F & SM90_STREAMK) != 0,
                        HALVES_TWO_TEMPS = (F & SM90_HALVES_TWO_TEMPS) != 0;
  static constexpr int MULTICAST = (F & SM90_MC2) ? 2 : 1;
  static_assert(!(F & (SM90_TWO_CONSUMERS | SM90_PRODUCER_WARPGROUP)),
                "SM90_TWO_CONSUMERS and SM90_PRODUCER_WARPGROUP are the skinny kernel's");
  static constexpr int SMEM = sm90_gemm_smem<BN, STAGES, SWAP, SPLITK>::SMEM_BYTES;
  static sm90_kernel_fn fn() {
    return (sm90_kernel_fn)
        sm90_gemm_kernel<BN, STAGES, INT8, SWAP, PROMOTE, SPLITK, MINB, MULTICAST, TAIL, STREAMK, HALVES_TWO_TEMPS>;
  }
};
template <int BN, int STAGES, int MINB, int F>
struct sm90_instance<BN, STAGES, MINB, F, true> {
  static constexpr bool INT8 = (F & SM90_INT8) != 0, PRODUCER_WARPGROUP = (F & SM90_PRODUCER_WARPGROUP) != 0;
  static constexpr int MULTICAST = (F & SM90_MC2) ? 2 : 1, CONSUMERS = (F & SM90_TWO_CONSUMERS) ? 2 : 1;
  static_assert(!(F & (SM90_SWAP | SM90_PROMOTE | SM90_SPLITK | SM90_TAIL | SM90_STREAMK | SM90_HALVES_TWO_TEMPS)),
                "the skinny kernel is always swapped and takes none of these");
  static constexpr int SMEM = sm90_skinny_smem<BN, STAGES>::SMEM_BYTES;
  static sm90_kernel_fn fn() {
    return (sm90_kernel_fn)sm90_skinny_kernel<BN, STAGES, INT8, !INT8, MINB, MULTICAST, CONSUMERS, PRODUCER_WARPGROUP>;
  }
};

typedef struct sm90_kernel {
  sm90_kernel_fn fn;
  int smem; // dynamic shared memory bytes
} sm90_kernel;
#define SM90_KERNEL_ROW(ID, NAME, BN, STAGES, MINB, F) \
  {sm90_instance<BN, STAGES, MINB, F>::fn(), sm90_instance<BN, STAGES, MINB, F>::SMEM},
static const sm90_kernel KERNELS[SM90_NUM_CONFIGS] = {SM90_CONFIGS(SM90_KERNEL_ROW)};
#undef SM90_KERNEL_ROW

// A configuration's CTA rows on wgmma's M side (the weights when swapped) and its block size. (Unused in a build
// without sm_90a, whose launch paths compile out.)
__attribute__((unused)) static int cfg_bm(const sm90_config *c) { return c->bm ? c->bm : SM90_BM; }
__attribute__((unused)) static int cfg_threads(const sm90_config *c) {
  return c->bm ? SM90_SKINNY_THREADS(c->cw == 2 ? 2 : 1, c->wr != 0) : SM90_THREADS;
}

// ---- driver entry point for tensor maps (no link-time dependency on libcuda) ----------------------

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

static void *g_encode_tiled;
static encode_tiled_fn get_encode_tiled(void) {
  return (encode_tiled_fn)w8a8_cuda_driver_proc("cuTensorMapEncodeTiled", &g_encode_tiled);
}

// K-major 8-bit operand [rows, K] with row stride ld (bytes), loaded in boxes of 128 x box_rows.
__attribute__((unused)) static CUresult make_tmap(CUtensorMap *m, const void *base, int64_t rows, int64_t K, int64_t ld,
                                                  int box_rows) {
  cuuint64_t dims[2] = {(cuuint64_t)K, (cuuint64_t)rows};
  cuuint64_t strides[1] = {(cuuint64_t)ld};
  cuuint32_t box[2] = {SM90_BK, (cuuint32_t)box_rows};
  cuuint32_t estr[2] = {1, 1};
  return get_encode_tiled()(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)base, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// make_tmap for the other sm_90a kernels (sm90_blockwise.cu): 0, or -1 where the driver refuses (or lacks) it.
extern "C" W8A8_HIDDEN int w8a8_sm90_tmap_k128(void *map, const void *base, int64_t rows, int64_t K, int64_t ld,
                                               int box_rows) {
  if (!get_encode_tiled()) return -1;
  return make_tmap((CUtensorMap *)map, base, rows, K, ld, box_rows) == CUDA_SUCCESS ? 0 : -1;
}

// The fold's map (sm90_tail_fold; rows in 65..127): two blocks of 64 rows of A, the first at row 0, the
// second at row rows - 64 (they overlap where rows < 128), as dimension 2 of a 3-D map, so that one box of
// 128 x 64 x 2 bytes lands in a stage exactly as a 128-row box would (the same 128-byte swizzle rows).
__attribute__((unused)) static CUresult make_fold_tmap(CUtensorMap *m, const void *base, int64_t rows, int64_t K,
                                                       int64_t ld) {
  cuuint64_t dims[3] = {(cuuint64_t)K, 64, 2};
  cuuint64_t strides[2] = {(cuuint64_t)ld, (cuuint64_t)((rows - 64) * ld)};
  cuuint32_t box[3] = {SM90_BK, 64, 2};
  cuuint32_t estr[3] = {1, 1, 1};
  return get_encode_tiled()(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, (void *)base, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// The staged epilogues' output map: out [M, N] with row stride ldo (elements), stored from the
// 128-byte-swizzled buffers in boxes of 64 rows x 128 bytes (the swizzle span: 64 16-bit or 32 fp32
// columns). esz: 2 or 4 bytes per element. Returns 1 (16-bit) or 2 (fp32), or 0 where TMA cannot
// address out (base or row stride not a multiple of 16 bytes) or the encoder refuses it: the kernel
// then stores directly.
__attribute__((unused)) static int make_out_tmap(CUtensorMap *m, void *out, int64_t M, int64_t N, int64_t ldo,
                                                 int esz) {
  if (((uintptr_t)out % 16) != 0 || (ldo * esz) % 16 != 0 || M < 1 || N < 1) return 0;
  cuuint64_t dims[2] = {(cuuint64_t)N, (cuuint64_t)M};
  cuuint64_t strides[1] = {(cuuint64_t)(ldo * esz)};
  cuuint32_t box[2] = {(cuuint32_t)(128 / esz), 64};
  cuuint32_t estr[2] = {1, 1};
  return get_encode_tiled()(m, esz == 4 ? CU_TENSOR_MAP_DATA_TYPE_UINT32 : CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, out, dims,
                            strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS
             ? esz / 2
             : 0;
}

// ---- per-device, per-configuration state (set once; host-side queries only) -----------------------

static int g_smem_set[SM90_NUM_CONFIGS][SM90_MAX_DEVICES];
static int g_max_clusters[SM90_MAX_DEVICES][SM90_NUM_CONFIGS][SM90_MAX_SPLIT + 1];  // the planner's caps, per device

static w8a8_status prepare_config(int dev, int ci) {
  const sm90_kernel *k = &KERNELS[ci];
  if (dev < 0 || dev >= SM90_MAX_DEVICES) return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: device %d", FN, dev);
  if (__atomic_load_n(&g_smem_set[ci][dev], __ATOMIC_ACQUIRE)) return W8A8_SUCCESS;
  cudaError_t e = cudaFuncSetAttribute((const void *)k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, k->smem);
  if (e != cudaSuccess) return w8a8_cuda_error(FN, "cudaFuncSetAttribute(sm90 kernel smem)", e);
  __atomic_store_n(&g_smem_set[ci][dev], 1, __ATOMIC_RELEASE);
  return W8A8_SUCCESS;
}

// How many clusters of `split` CTAs of config ci fit on the device at once (the occupancy query; sm90_caps.query).
// The kernel's shared-memory attribute is set first: below it, the default 48 KB limit makes every query fail. Where
// the query fails: 0, not cached, and the planner estimates (w8a8_sm90_clusters), so a later call asks again (a
// cached overestimate would make plan_deep pick two-wave splits for good).
static int query_clusters(const sm90_caps *caps, int ci, int split) {
  const int dev = caps->device;
  const sm90_config *c = &CONFIGS[ci];
  if (prepare_config(dev, ci) != W8A8_SUCCESS) w8a8_clear_error(); /* the query then fails: the estimate */
  cudaLaunchConfig_t lc;
  memset(&lc, 0, sizeof lc);
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeClusterDimension;
  at[0].val.clusterDim.x = split;
  at[0].val.clusterDim.y = 1;
  at[0].val.clusterDim.z = 1;
  lc.gridDim = dim3(split * caps->num_sms, 1, 1);
  lc.blockDim = dim3(cfg_threads(c), 1, 1);
  lc.dynamicSmemBytes = KERNELS[ci].smem;
  lc.attrs = at;
  lc.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, (const void *)KERNELS[ci].fn, &lc) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return 0;
  }
  __atomic_store_n(&caps->clusters[ci][split], n, __ATOMIC_RELEASE);
  return n;
}
// (a device index past the table: one cluster, as the launch would refuse it anyway)
static int one_cluster(const sm90_caps *, int, int) { return 1; }

// The planner's view of device dev (num_sms: its SMs): the cluster counts asked so far, and the query for the rest.
static sm90_caps device_caps(int dev, int num_sms) {
  sm90_caps caps;
  const int known = dev >= 0 && dev < SM90_MAX_DEVICES;
  caps.num_sms = num_sms;
  caps.device = dev;
  caps.clusters = known ? g_max_clusters[dev] : NULL;
  caps.query = known ? query_clusters : one_cluster;
  return caps;
}
static int max_active_clusters(int dev, int ci, int split, int num_sms) {
  const sm90_caps caps = device_caps(dev, num_sms);
  return w8a8_sm90_clusters(&caps, ci, split);
}

// The handle's settings the planner reads.
static sm90_plan_opts handle_opts(const w8a8_handle *h) {
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  sm90_plan_opts o;
  o.weights_constant = h->weights_constant;
  o.fp8_accum = h->fp8_accum;
  o.tuning = h->tuning;
  o.sk_locks = st && st->sk_locks;
  o.ws_bytes = st ? st->ws_bytes : 0;
  return o;
}

// ---- entry points ------------------------------------------------------------------------------

#if defined(W8A8_HAVE_SM90A)
// Whether the kernel takes p (else W8A8_ERROR_UNSUPPORTED_DEVICE with the reason, nothing written).
static w8a8_status accepts(const w8a8_handle *h, const w8a8_mm_problem *p) {
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  if (!st || st->cc != 90)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the sm_90a kernel needs a compute capability 9.0 GPU (this is %d.%d)",
                    FN, st ? st->cc / 10 : 0, st ? st->cc % 10 : 0);
  if (p->in_dtype != W8A8_DTYPE_INT8 && p->in_dtype != W8A8_DTYPE_FP8_E4M3)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the sm_90a kernel takes int8 or fp8 operands", FN);
  // TMA: 16-byte aligned bases, row strides a multiple of 16 bytes (1-byte elements).
  if (((uintptr_t)p->a & 15) || (p->lda & 15))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "%s: the sm_90a kernel needs a 16-byte aligned A with lda %% 16 == 0 (a=%p, lda=%lld)", FN, p->a,
                    (long long)p->lda);
  if (((uintptr_t)p->b & 15) || (p->ldb & 15))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "%s: the sm_90a kernel needs a 16-byte aligned B with ldb %% 16 == 0 (b=%p, ldb=%lld)", FN, p->b,
                    (long long)p->ldb);
  if (p->K < 1 || p->M > INT32_MAX / 2 || p->N > INT32_MAX / 2 || p->K > INT32_MAX / 2 || p->ldo > ((int64_t)1 << 40) ||
      p->lda >= ((int64_t)1 << 39) || p->ldb >= ((int64_t)1 << 39))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the sm_90a kernel does not take M=%lld N=%lld K=%lld", FN,
                    (long long)p->M, (long long)p->N, (long long)p->K);
  if (!get_encode_tiled())
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the driver has no cuTensorMapEncodeTiled", FN);

  if (p->ready && (p->ready->n < 1 || p->ready->n > SM90_MAX_READY || p->ready->end[p->ready->n - 1] != p->M))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: the sm_90a kernel takes 1..%d arriving chunks of A", FN,
                    SM90_MAX_READY);
  return W8A8_SUCCESS;
}

#endif

// bench/sm90_dev -T: the per-tile clock64 timeline (sm90_args.timeline) of the next launches; NULL: off.
__attribute__((unused)) static unsigned long long *g_timeline;
__attribute__((unused)) static int g_timeline_max, g_timeline_ctas;

// Whether the kernels carry the timeline (built with -DW8A8_SM90_TIMELINE, see SM90_TL).
extern "C" W8A8_HIDDEN int w8a8_sm90_timeline_built(void) {
#if defined(W8A8_HAVE_SM90A)
  return SM90_TL;
#else
  return 0;
#endif
}
// Every configuration stamps; dev_buf holds max_ctas x max_tiles_per_cta x 4 values (sm90_args.timeline). Without
// W8A8_SM90_TIMELINE in the build the kernels ignore it.
extern "C" W8A8_HIDDEN void w8a8_sm90_set_timeline(unsigned long long *dev_buf, int max_tiles_per_cta, int max_ctas) {
  g_timeline = max_tiles_per_cta > 0 && max_ctas > 0 ? dev_buf : NULL;
  g_timeline_max = max_tiles_per_cta;
  g_timeline_ctas = max_ctas;
}

#if defined(W8A8_HAVE_SM90A)
// The lean epilogues (sm90_epi_lean, sm90_epi_swap_lean) apply where they can; the tests' W8A8_DEV SM90_LEAN=0
// sends those calls through the general paths (sm90_epi_staged, sm90_epi_direct, the swapped quads), which other
// calls take anyway, to compare the bits.

// Everything before the launch that can refuse the problem: the input checks, the plan, the
// configuration's attributes, the two tensor maps. w8a8_sm90_accepts runs it too, so that the TP
// one-GEMM path asks exactly what the launch will ask (accepts() alone could pass where a later step
// refused). One difference: that path asks without its ready flags, so at
// 129..255 tokens the probe plans the multicast twin and the launch the plain tile (apply_mc2m), and at
// 1..144 tokens (fp8 up to 528) the probe may plan a skinny tile (plan_skinny: not with ready flags) where the
// launch plans another; they take the same problems (the same operand checks, maps that differ only in their
// boxes; a refused fold map falls back to boxes).
static w8a8_status prepare(w8a8_handle *h, const w8a8_mm_problem *p, int forced_config, int forced_split,
                           sm90_plan *pl, CUtensorMap *tx, CUtensorMap *ty, CUtensorMap *to, CUtensorMap *tt,
                           tail_boxes *tail, int *tma_out) {
  W8A8_CHECK(accepts(h, p));
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  const int dev = h->device_index;
  const int num_sms = st->prop.multiProcessorCount;
  const int int8 = p->in_dtype == W8A8_DTYPE_INT8;
  const sm90_plan_opts opts = handle_opts(h);
  const sm90_caps caps = device_caps(dev, num_sms);
  if (forced_config >= 0) {
    if (forced_config >= SM90_NUM_CONFIGS || CONFIGS[forced_config].int8 != int8)
      return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: sm90 config %d does not exist for this dtype", FN, forced_config);
    pl->config = forced_config;
    pl->split = CONFIGS[forced_config].splitk ? (forced_split > 0 ? forced_split : 1) : 1;
    if (pl->split > SM90_MAX_SPLIT)
      return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: split %d > %d", FN, pl->split, SM90_MAX_SPLIT);
    // Swap configs take several token tiles when forced (M > bn: tiles_y > 1, up to 8), for the tuner and
    // the dev bench to compare e.g. two n16 tiles with one n32 tile.
    if (CONFIGS[pl->config].swap && p->M > 8 * CONFIGS[pl->config].bn)
      return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: config %s takes M <= %d", FN, CONFIGS[pl->config].name,
                      8 * CONFIGS[pl->config].bn);
  } else {
    *pl = w8a8_sm90_choose_plan(p, &opts, &caps);
  }
  if (pl->config < 0) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: sm90 heuristic found no configuration", FN);
  // A stream-K twin (forced, or a tuning table's) that cannot run p: its plain tile instead.
  sm90_sk_plan skp;
  if (CONFIGS[pl->config].sk && (p->ready || !w8a8_sm90_sk_fits(&opts, &caps, pl->config, p, &skp))) {
    const int plain = w8a8_sm90_sk_plain(pl->config);
    if (plain < 0) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: no plain tile for %s", FN, CONFIGS[pl->config].name);
    pl->config = plain;
  }
  const sm90_config *c = &CONFIGS[pl->config];
  W8A8_CHECK(prepare_config(dev, pl->config));

  // Kernel space: X on wgmma's M side (128-row tiles), Y on its N side (bn-row tiles).
  const void *xp = c->swap ? p->b : p->a;
  const void *yp = c->swap ? p->a : p->b;
  int64_t rows_x = c->swap ? p->N : p->M, rows_y = c->swap ? p->M : p->N;
  int64_t ldx = c->swap ? p->ldb : p->lda, ldy = c->swap ? p->lda : p->ldb;
  if (w8a8_sm90_pad_tokens()) {  // development only (W8A8_DEV SM90_PAD_TOKENS): A's map covers whole token tiles
    if (c->swap)
      rows_y = (rows_y + c->bn - 1) / c->bn * c->bn;
    else
      rows_x = (rows_x + SM90_BM - 1) / SM90_BM * SM90_BM;
  }
  if (c->bm && p->ready)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: config %s does not wait for arriving rows (ready flags)", FN,
                    c->name);
  CUresult r1 = make_tmap(tx, xp, rows_x, p->K, ldx, c->mcast == 3 ? cfg_bm(c) / 2 : cfg_bm(c));
  CUresult r2 = make_tmap(ty, yp, rows_y, p->K, ldy, c->mcast == 2 ? c->bn / 2 : c->bn);
  if (r1 != CUDA_SUCCESS || r2 != CUDA_SUCCESS)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: cuTensorMapEncodeTiled refused the operands (error %d/%d)", FN,
                    (int)r1, (int)r2);
  // The token tail (sm90_args.tail_n): a map over the tokens with the tail's box rows, where the
  // plan loads the partial token tile in boxes. Where the encoder refuses it, the whole box.
  // The skinny kernel has no tail map: its tail_n = 1 shifts a partial last token tile back over real rows
  // (sm90_skinny_row0).
  if (c->bm) {
    tail->n = w8a8_sm90_tail_mode() != 0 && rows_y > c->bn && rows_y % c->bn != 0;
    tail->rows = 0;
  } else {
    *tail = w8a8_sm90_tail_plan(c, c->swap ? rows_y : rows_x, w8a8_sm90_tail_mode(), w8a8_sm90_fp8_tail_box(&opts),
                                p->ready != NULL);
    if (tail->n * tail->rows > (c->swap ? c->bn : SM90_BM) || tail->rows % 8 != 0) {  // the kernel assumes both
      tail->n = 0;
      tail->rows = 0;
    }
  }
  memcpy(tt, c->swap ? ty : tx, sizeof *tt);
  const CUresult rt = !tail->n || c->bm      ? CUDA_SUCCESS
                      : w8a8_sm90_tail_is_fold(c, *tail) ? make_fold_tmap(tt, xp, rows_x, p->K, ldx)
                                            : make_tmap(tt, c->swap ? yp : xp, c->swap ? rows_y : rows_x, p->K,
                                                        c->swap ? ldy : ldx, tail->rows);
  if (rt != CUDA_SUCCESS && w8a8_sm90_tail_is_fold(c, *tail) &&
      make_tmap(tt, xp, rows_x, p->K, ldx, SM90_BM / 2) == CUDA_SUCCESS) {  // the fold as two 2-D boxes
    tail->n = 2;
    tail->rows = SM90_BM / 2;
  } else if (rt != CUDA_SUCCESS) {
    memcpy(tt, c->swap ? ty : tx, sizeof *tt);
    tail->n = 0;
    tail->rows = 0;
  }
  // The staged epilogues (unswapped unsplit tiles) where TMA can store the output: 16-bit outputs (1), fp32 ones
  // (2; the kernel's lean epilogue only: 1.07x fp8 / 1.12x int8 geomean over the direct one,
  // h200x2-sm90-lean32-2026-11-30.txt).
  memset(to, 0, sizeof *to);
  *tma_out = 0;
  const int f32 = p->out_dtype == W8A8_DTYPE_FP32;
  if (!c->swap && !c->splitk) *tma_out = make_out_tmap(to, p->out, p->M, p->N, p->ldo, f32 ? 4 : 2);
  return W8A8_SUCCESS;
}

#endif

// The sm90 fields of the handle's launch record (tests: that a tail, shift or staged output engaged).
extern "C" W8A8_HIDDEN int w8a8_sm90_last_tail(const w8a8_handle *h) { return h->last.tail; }
extern "C" W8A8_HIDDEN int w8a8_sm90_last_shift(const w8a8_handle *h) { return h->last.shift; }
extern "C" W8A8_HIDDEN int w8a8_sm90_last_tma_out(const w8a8_handle *h) { return h->last.tma_out; }

#if defined(W8A8_HAVE_SM90A)
// A ready launch's tile-order group (sm90_args.group): the whole X tiles of the own rows (the chunk
// that starts at first_row), 1..SM90_GROUP. W8A8_DEV SM90_TP_GROUP=0 keeps SM90_GROUP (A/B runs).
static int ready_group(const w8a8_mm_ready *r) {
  int64_t end = r->first_row;
  for (int j = 0; j < r->n; j++)
    if ((j ? r->end[j - 1] : 0) == r->first_row && r->end[j] > end) end = r->end[j];
  const int64_t tiles = end / SM90_BM - (r->first_row + SM90_BM - 1) / SM90_BM;
  return tiles < 1 ? 1 : tiles > SM90_GROUP ? SM90_GROUP : (int)tiles;
}
#endif

static w8a8_status run(w8a8_handle *h, const w8a8_mm_problem *p, int forced_config, int forced_split) {
#if !defined(W8A8_HAVE_SM90A)
  (void)h;
  (void)p;
  (void)forced_config;
  (void)forced_split;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: this libw8a8 was built without sm_90a (CUDA_ARCHS lacks 90a)", FN);
#else
  sm90_plan pl;
  CUtensorMap tx, ty, to, tt;
  tail_boxes tail;
  int tma_out = 0;
  W8A8_CHECK(prepare(h, p, forced_config, forced_split, &pl, &tx, &ty, &to, &tt, &tail, &tma_out));
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  const int dev = h->device_index;
  const int num_sms = st->prop.multiProcessorCount;
  const sm90_config *c = &CONFIGS[pl.config];
  const int64_t rows_x = c->swap ? p->N : p->M, rows_y = c->swap ? p->M : p->N;  // kernel space (prepare)

  sm90_args a;
  memset(&a, 0, sizeof a);
  a.rows_x = (int)rows_x;
  a.rows_y = (int)rows_y;
  a.tiles_x = (int)((rows_x + cfg_bm(c) - 1) / cfg_bm(c));
  a.tiles_y = (int)((rows_y + c->bn - 1) / c->bn);
  a.kblocks = (int)((p->K + SM90_BK - 1) / SM90_BK);
  a.out = p->out;
  a.ldo = p->ldo;
  a.M = (int)p->M;
  a.N = (int)p->N;
  a.sa = p->scale_a;
  a.sb = p->scale_b;
  a.sa_per_token = p->scale_a_per_token;
  a.sb_per_channel = p->scale_b_per_channel;
  a.bias = p->bias;
  a.out_kind = p->out_dtype == W8A8_DTYPE_BF16 ? SM90_OUT_BF16 : p->out_dtype == W8A8_DTYPE_FP16 ? SM90_OUT_FP16 : SM90_OUT_FP32;
  a.azp_mode = (int)p->azp_mode;
  a.azp = p->azp;
  a.azp_adj = p->azp_adj;
  size_t esz = a.out_kind == SM90_OUT_FP32 ? 4 : 2;
  a.pair_store = ((uintptr_t)p->out % (2 * esz)) == 0 && (p->ldo % 2) == 0;
  a.quad_store = w8a8_sm90_quad_store_ok(p);
  a.split = pl.split;
  a.weights_constant = h->weights_constant && c->mcast != 2;
  a.tma_out = tma_out;
  a.scale_slot = !c->swap && !c->splitk;
  a.lean = (int)w8a8_knob_int(W8A8_KNOB_SM90_LEAN);
  a.split_quad = 1;
  a.tail_n = tail.n;
  a.tail_rows = tail.rows;
  a.shift_x = !tail.n && w8a8_sm90_shift_applies(c, rows_x, p->ready != NULL);
  w8a8_note_launch(h, "sm90", c->name, pl.split, p->M, p->N, p->K);
  h->last.shift = a.shift_x;
  h->last.tail = tail.n * 1000 + tail.rows;
  // (an fp32 map serves the lean epilogue only: with the scale slot and without an int8 zero point)
  const int lean32 = a.scale_slot && a.lean && !(p->in_dtype == W8A8_DTYPE_INT8 && a.azp_mode != 0);
  h->last.tma_out = tma_out == 2 && !lean32 ? 0 : tma_out;
  a.group = SM90_GROUP;
  if (c->sk) {  // (prepare checked that the schedule's partial tiles fit)
    a.sk_ws = st->ws;
    a.sk_locks = st->sk_locks;
    a.weights_constant = 0;
  }
  a.timeline = g_timeline;
  a.timeline_max = g_timeline_max;
  a.timeline_ctas = g_timeline_ctas;
  if (p->ready) {
    a.ready = p->ready->flags;
    a.ready_n = p->ready->n;
    for (int i = 0; i < SM90_MAX_READY; i++) a.ready_end[i] = (int)(i < a.ready_n ? p->ready->end[i] : p->M);
    // A's rows are the X tiles (normal) or the Y tiles (swapped). Start at the first tile wholly
    // inside the own rows: a tile that also holds rows of rank r - 1 (pulled last) then comes last
    // instead of stalling one CTA for the whole gather.
    if (c->swap)
      a.rot_y = (int)((p->ready->first_row + c->bn - 1) / c->bn) % a.tiles_y;
    else
      a.rot_x = (int)((p->ready->first_row + SM90_BM - 1) / SM90_BM) % a.tiles_x;
    // Groups of the tile order no wider than the own rows' whole X tiles (unswapped, MC = 1: the persistent tiles
    // and the split-K ones, whose clusters take items in the same order): where a rank's rows span fewer than
    // SM90_GROUP tiles (TP = 2 at 1024 tokens: 4), a group of 8 mixed own and peer tiles, so half the CTAs began on
    // a peer tile and spun on its flag with their own tiles queued behind it. 1.04-1.11x fused at 1024 tokens
    // (h200x2-tp-group-2026-11-30.txt; sm90_args.group).
    if (!c->swap && c->mcast != 2 && w8a8_knob_int(W8A8_KNOB_SM90_TP_GROUP)) a.group = ready_group(p->ready);
  }

  // Split-K configs: one tile per cluster (not persistent). A cluster's CTAs meet at two cluster
  // barriers per tile; one tile each keeps every cluster independent of the others, and the
  // hardware starts the next cluster as a slot frees (the 2 CTAs/SM overlap one CTA's epilogue
  // with another's main loop, which a persistent CTA would not). Others: a persistent grid.
  const int64_t tiles64 = (int64_t)a.tiles_x * a.tiles_y;
  if (tiles64 * pl.split > INT32_MAX / 2)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: %lld tiles are more than the sm_90a kernel indexes", FN,
                    (long long)tiles64);
  const int tiles = (int)tiles64;
  int clusters = c->splitk ? tiles : num_sms * c->minb;
  if (clusters > tiles && !c->sk) clusters = tiles;  // (stream-K: the grid is part of the schedule, sk_fits's)
  int csize = c->splitk ? pl.split : 1;
  if (c->mcast == 2 || c->mcast == 3) {
    // persistent clusters of two, one per pair of M tiles at most (3: of token tiles, the skinny pairs)
    const int pairs = c->mcast == 3 ? a.tiles_x * ((a.tiles_y + 1) / 2) : ((a.tiles_x + 1) / 2) * a.tiles_y;
    csize = 2;
    clusters = max_active_clusters(dev, pl.config, 2, num_sms);
    if (clusters > pairs) clusters = pairs;
    if (clusters < 1) clusters = 1;
  }

  cudaLaunchAttribute at[2];
  cudaLaunchConfig_t lc = w8a8_sm90_launch_config((unsigned)(clusters * csize), (unsigned)cfg_threads(c),
                                                  KERNELS[pl.config].smem, h->stream,
                                                  csize > 1 || c->splitk ? csize : 0, at);
  cudaError_t e = cudaLaunchKernelEx(&lc, KERNELS[pl.config].fn, tx, ty, to, a, tt);
  if (e != cudaSuccess) return w8a8_cuda_error(FN, "launch of the sm90 kernel", e);
  return W8A8_SUCCESS;
#endif
}

extern "C" w8a8_status w8a8_sm90_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p) { return run(h, p, -1, 0); }

// Whether w8a8_sm90_scaled_mm takes p: W8A8_SUCCESS, or its refusal with the reason (what the launch
// would say, nothing written or launched). The TP calls ask before their agreement where the handle
// forces the kernel (tp_gpu.c gpu_local_checks).
extern "C" W8A8_HIDDEN w8a8_status w8a8_sm90_check(const w8a8_handle *h, const w8a8_mm_problem *p) {
#if defined(W8A8_HAVE_SM90A)
  sm90_plan pl;
  CUtensorMap tx, ty, to, tt;
  tail_boxes tail;
  int tma_out;
  return prepare((w8a8_handle *)h, p, -1, 0, &pl, &tx, &ty, &to, &tt, &tail, &tma_out);
#else
  (void)h;
  (void)p;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: this libw8a8 was built without sm_90a (CUDA_ARCHS lacks 90a)", FN);
#endif
}

// Whether w8a8_sm90_scaled_mm takes p (all-gather + GEMM asks before it relies on p->ready).
extern "C" W8A8_HIDDEN int w8a8_sm90_accepts(const w8a8_handle *h, const w8a8_mm_problem *p) {
  char saved[512];
  snprintf(saved, sizeof saved, "%s", w8a8_last_error());
  const int ok = w8a8_sm90_check(h, p) == W8A8_SUCCESS;
  w8a8_err(W8A8_SUCCESS, "%s", saved); /* the caller's last error stays what it was */
  return ok;
}

// Development hooks (benchmarks, tuning): run one configuration by index with a given split, and
// describe the table. Not part of the public API.
extern "C" W8A8_HIDDEN w8a8_status w8a8_sm90_scaled_mm_config(w8a8_handle *h, const w8a8_mm_problem *p, int config,
                                                              int split) {
  return run(h, p, config, split);
}
extern "C" W8A8_HIDDEN int w8a8_sm90_num_configs(void) { return SM90_NUM_CONFIGS; }
extern "C" W8A8_HIDDEN const char *w8a8_sm90_config_name(int config) {
  return config >= 0 && config < SM90_NUM_CONFIGS ? CONFIGS[config].name : "";
}
extern "C" W8A8_HIDDEN int w8a8_sm90_config_int8(int config) {
  return config >= 0 && config < SM90_NUM_CONFIGS ? CONFIGS[config].int8 : -1;
}
extern "C" W8A8_HIDDEN int w8a8_sm90_config_fast_accum(int config) {
  return config >= 0 && config < SM90_NUM_CONFIGS ? CONFIGS[config].fast_accum : 0;
}
// Configurations the tuner skips unless W8A8_DEV TUNE_EXPERIMENTAL=1 (the tests run every configuration): the token-tail
// and stream-K twins (apply_tail and apply_sk take them after the plan, tuned plans included, so the tuner times
// the plain tiles).
extern "C" W8A8_HIDDEN int w8a8_sm90_config_experimental(int config) {
  return config >= 0 && config < SM90_NUM_CONFIGS && (CONFIGS[config].tail || CONFIGS[config].sk);
}
extern "C" W8A8_HIDDEN int w8a8_sm90_config_swap_bn(int config) {
  return config >= 0 && config < SM90_NUM_CONFIGS && CONFIGS[config].swap ? CONFIGS[config].bn : 0;
}
// How many CTAs of config at this split can run at once on the handle's GPU (whole clusters; the
// occupancy query): sm90_dev flags a forced split-K grid that needs more than one wave.
extern "C" W8A8_HIDDEN int w8a8_sm90_config_max_ctas(w8a8_handle *h, int config, int split) {
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  if (!st || st->cc != 90 || config < 0 || config >= SM90_NUM_CONFIGS) return 0;
  if (split < 1) split = 1;
  if (split > SM90_MAX_SPLIT) split = SM90_MAX_SPLIT;
  return max_active_clusters(h->device_index, config, split, st->prop.multiProcessorCount) * split;
}
// Which configuration and split the heuristic picks (for the benchmark's table); -1 if none.
extern "C" W8A8_HIDDEN int w8a8_sm90_plan(w8a8_handle *h, const w8a8_mm_problem *p, int *split) {
  const w8a8_cuda_state *st = (const w8a8_cuda_state *)h->cuda;
  if (!st || st->cc != 90) return -1;
  const sm90_plan_opts opts = handle_opts(h);
  const sm90_caps caps = device_caps(h->device_index, st->prop.multiProcessorCount);
  const sm90_plan pl = w8a8_sm90_choose_plan(p, &opts, &caps);
  if (split) *split = pl.split;
  return pl.config;
}

