/*
 * internal.h — what the API layer (src/core) and the backends (src/cpu,
 * src/cuda, src/tp) share. Not installed.
 *
 * Flow of every public call: api.c looks the handle up in the registry,
 * validate.c checks every argument and fills a resolved problem struct
 * (plain pointers, sizes, strides in elements), then the backend's entry
 * point runs it. Backends never see a public descriptor and never validate
 * user input again: they may assume the problem is well formed.
 */
#ifndef W8A8_INTERNAL_H
#define W8A8_INTERNAL_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "w8a8.h"

#ifdef __cplusplus
extern "C" {
#endif

#define W8A8_HIDDEN __attribute__((visibility("hidden")))

/* ---- errors ------------------------------------------------------------- */

/* Record the detail of a failure in this thread's last-error buffer and return
 * `status`. `fmt` should name the call and the argument:
 *   return w8a8_err(W8A8_ERROR_INVALID_SCALE, "w8a8_scaled_mm: scale_a->len is %lld; ...", ...); */
W8A8_HIDDEN w8a8_status w8a8_err(w8a8_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
W8A8_HIDDEN w8a8_status w8a8_verr(w8a8_status status, const char *fmt, va_list ap);
/* Clear the last error (called at the start of each public call). */
W8A8_HIDDEN void w8a8_clear_error(void);

/* Runtime settings (the environment, W8A8_DEV): knobs.h. */

/* Propagate a non-success status. */
#define W8A8_CHECK(expr)                      \
  do {                                        \
    w8a8_status w8a8_s_ = (expr);             \
    if (w8a8_s_ != W8A8_SUCCESS) return w8a8_s_; \
  } while (0)

/* ---- handle --------------------------------------------------------------- */

#define W8A8_HANDLE_MAGIC 0x38613877u /* "w8a8" */
#define W8A8_COMM_MAGIC 0x6d6d6f63u   /* "comm" */

/* CPU features detected at run time. */
typedef struct w8a8_cpu_features {
  bool avx2;
  bool fma;
  bool f16c;
  bool avx512f;
  bool avx512bw;
  bool avx512vnni;
  bool amx; /* AMX-TILE + AMX-INT8 in CPUID, tile state in XCR0, permission granted (Linux) */
  bool amx_bf16; /* amx and AMX-BF16 in CPUID */
} w8a8_cpu_features;

typedef struct w8a8_launch_record {
  const char *kernel, *config; /* w8a8_launch_info's */
  int split;
  int64_t M, N, K;
  int tail;    /* sm90: token-tail boxes * 1000 + rows, 0 for the whole box */
  int shift;   /* sm90: sm90_args.shift_x */
  int tma_out; /* sm90: staged output, 0 none, 1 16-bit, 2 fp32 */
} w8a8_launch_record;

struct w8a8_handle {
  uint32_t magic;
  w8a8_device_kind kind;
  int device_index;
  w8a8_kernel kernel;
  int num_threads;
  void *stream;           /* cudaStream_t */
  w8a8_cpu_features cpu;  /* filled for every handle (host-side code uses it) */
  /* CPU workspace: packing buffers, owned, allocated at creation. */
  void *cpu_ws;
  size_t cpu_ws_bytes;
  /* CUDA backend state (src/cuda), opaque here. */
  void *cuda;
  /* Tuning table of the sm90 path (w8a8_tune_table, src/core/tune.h) or NULL. */
  void *tuning;
  /* w8a8_set_weights_constant: b may be read before the previous kernel on the stream completes. */
  int weights_constant;
  /* w8a8_set_fp8_accum: W8A8_FP8_ACCUM_FAST lets the sm90 heuristic take fast-accumulation tiles. */
  int fp8_accum;
  /* What the last GEMM ran (w8a8_get_last_launch; tests read the sm90 kernel's own fields). */
  w8a8_launch_record last;
};

/* Record a GEMM's kernel and plan in h->last (static strings); W8A8_LOG=info prints it when the plan
 * differs from the previous one. tail / shift / tma_out: the sm90 kernel's (sm90_gemm.cu), else 0. */
W8A8_HIDDEN void w8a8_note_launch(w8a8_handle *h, const char *kernel, const char *config, int split, int64_t M,
                                  int64_t N, int64_t K);

/* Registry of live handles and communicators: lookups never dereference an
 * unknown pointer, so a destroyed or foreign handle is an error, not a crash. */
W8A8_HIDDEN bool w8a8_registry_add(const void *obj); /* false: out of memory, not registered */
W8A8_HIDDEN void w8a8_registry_remove(const void *obj);
W8A8_HIDDEN bool w8a8_registry_contains(const void *obj);
/* Check a handle argument of public call `fn` (registry + magic). */
W8A8_HIDDEN w8a8_status w8a8_check_handle(const char *fn, const w8a8_handle *h);

/* ---- resolved problems -------------------------------------------------- */

typedef enum w8a8_azp_mode {
  W8A8_AZP_NONE = 0,
  W8A8_AZP_ADJ_ONLY = 1,  /* acc - azp_adj[n] */
  W8A8_AZP_PER_TENSOR = 2,/* acc - azp[0]*azp_adj[n] */
  W8A8_AZP_PER_TOKEN = 3  /* acc - azp[m]*azp_adj[n] */
} w8a8_azp_mode;

/* All-gather + GEMM in one launch (src/tp/tp_gpu.c): A's rows arrive in chunks while the GEMM
 * runs. Only the sm_90a kernel honours it; w8a8_cuda_scaled_mm refuses a problem with one that
 * the sm_90a kernel does not take (w8a8_cuda_takes_ready says so beforehand). */
#define W8A8_MM_MAX_READY 8
typedef struct w8a8_mm_ready {
  const unsigned int *flags;        /* device: flags[c] != 0 once chunk c (rows, scales, zero points) is in place */
  int n;                            /* chunks, 1..W8A8_MM_MAX_READY */
  int64_t end[W8A8_MM_MAX_READY];   /* chunk c = rows [end[c-1], end[c]) of A; end[n-1] = M */
  int64_t first_row;                /* rows there from the start: the tile order begins at this row's tile */
} w8a8_mm_ready;

typedef struct w8a8_mm_problem {
  int64_t M, N, K;
  w8a8_dtype in_dtype;  /* INT8 or FP8_E4M3 */
  w8a8_dtype out_dtype; /* BF16, FP16, FP32 */
  const void *a;        /* row-major [M,K], element (m,k) at a[m*lda + k] */
  int64_t lda;
  const void *b;        /* column-major [K,N], element (k,n) at b[n*ldb + k] */
  int64_t ldb;
  void *out;            /* row-major [M,N], out[m*ldo + n] */
  int64_t ldo;
  const float *scale_a; /* len 1 or M */
  bool scale_a_per_token;
  const float *scale_b; /* len 1 or N */
  bool scale_b_per_channel;
  const void *bias;     /* NULL or N elements of out_dtype */
  w8a8_azp_mode azp_mode;
  const int32_t *azp;     /* NULL, len 1 or M */
  const int32_t *azp_adj; /* NULL or len N */
  const w8a8_mm_ready *ready; /* NULL, or A arrives in chunks (all-gather + GEMM) */
  /* Block-scaled fp8 (w8a8_scaled_mm_blockwise): scale_a is [M, KB], scale_b [NB, KB] (KB = ceil(K/128),
   * NB = ceil(N/128)), element (i, j) at s[i * rs + j * cs]; scale_a_per_token / scale_b_per_channel unused. */
  bool block_scaled;
  int64_t sa_rs, sa_cs, sb_rs, sb_cs;
} w8a8_mm_problem;

typedef struct w8a8_quant_problem {
  int64_t M, K;
  w8a8_dtype in_dtype;  /* FP32, BF16, FP16 */
  w8a8_dtype out_dtype; /* INT8, FP8_E4M3 */
  const void *x;
  int64_t ldx;
  void *q;
  int64_t ldq;
  w8a8_quant_mode mode;
  float *scale;          /* static: input (len 1); dynamic: output (len 1 or M) */
  int32_t *azp;          /* NULL = symmetric; static: input len 1; per-token: output len M */
  const float *scale_ub; /* NULL or one float (per-token only) */
  /* Group scales (w8a8_quantize_groups / _blocks / silu_mul_quantize_groups; mode unused): W8A8_GROUPS_* below;
   * scale is then a matrix with element (i, j) at scale[i * s_rs + j * s_cs]; ue8m0: powers of two. */
  int groups;
  int64_t s_rs, s_cs;
  bool ue8m0;
} w8a8_quant_problem;
enum { W8A8_GROUPS_NONE = 0, W8A8_GROUPS_TOKEN = 1, W8A8_GROUPS_BLOCK = 2 };

typedef struct w8a8_colsum_problem {
  int64_t K, N;
  const int8_t *b; /* column-major */
  int64_t ldb;
  int32_t *out;
} w8a8_colsum_problem;

/* ---- validation (src/core/validate.c) ------------------------------------ */
/* Each checks every argument of the public call `fn` against the handle's device
 * kind and fills the resolved problem. Nothing is written on failure. */
W8A8_HIDDEN w8a8_status w8a8_validate_scaled_mm(const char *fn, const w8a8_handle *h,
                                                const w8a8_matrix *a, const w8a8_matrix *b,
                                                const w8a8_vector *scale_a, const w8a8_vector *scale_b,
                                                const w8a8_vector *bias, const w8a8_zero_point *zp,
                                                const w8a8_matrix *out, w8a8_mm_problem *p);
W8A8_HIDDEN w8a8_status w8a8_validate_quantize(const char *fn, const w8a8_handle *h,
                                               const w8a8_matrix *x, const w8a8_matrix *q,
                                               w8a8_quant_mode mode, const w8a8_vector *scale,
                                               const w8a8_vector *azp, const float *scale_ub,
                                               w8a8_quant_problem *p);
/* w8a8_silu_mul_quantize: the same checks with x [M, 2K] (gate, then up) and q [M, K]; the problem is
 * over q (p->x points at the gate; the up half starts at column p->K of the same row). */
W8A8_HIDDEN w8a8_status w8a8_validate_silu_mul_quantize(const char *fn, const w8a8_handle *h,
                                                        const w8a8_matrix *x, const w8a8_matrix *q,
                                                        w8a8_quant_mode mode, const w8a8_vector *scale,
                                                        const w8a8_vector *azp, const float *scale_ub,
                                                        w8a8_quant_problem *p);
W8A8_HIDDEN w8a8_status w8a8_validate_colsum(const char *fn, const w8a8_handle *h,
                                             const w8a8_matrix *b, const w8a8_vector *azp_adj,
                                             w8a8_colsum_problem *p);
/* The block-scaled GEMM and the group quantizers (w8a8_scaled_mm_blockwise, w8a8_quantize_groups,
 * w8a8_quantize_blocks, w8a8_silu_mul_quantize_groups: groups W8A8_GROUPS_TOKEN or _BLOCK, x_per_q 1 or 2). */
W8A8_HIDDEN w8a8_status w8a8_validate_scaled_mm_blockwise(const char *fn, const w8a8_handle *h, const w8a8_matrix *a,
                                                          const w8a8_matrix *b, const w8a8_matrix *scale_a,
                                                          const w8a8_matrix *scale_b, const w8a8_vector *bias,
                                                          const w8a8_matrix *out, w8a8_mm_problem *p);
/* A block-scale matrix: fp32, exactly rows x cols (what names the two sizes), either layout; its element strides
 * into *rs, *cs (validate.c; also the fused TP calls' block scales). */
W8A8_HIDDEN w8a8_status w8a8_check_scale_matrix(const char *fn, const w8a8_handle *h, const char *arg,
                                                const w8a8_matrix *s, int64_t rows, int64_t cols, const char *what,
                                                int64_t *rs, int64_t *cs);
W8A8_HIDDEN w8a8_status w8a8_validate_quantize_groups(const char *fn, const w8a8_handle *h, const w8a8_matrix *x,
                                                      const w8a8_matrix *q, const w8a8_matrix *scale, unsigned flags,
                                                      int groups, int x_per_q, w8a8_quant_problem *p);
/* dtypes and layouts of scaled_mm operands a [M,K], b [K,N], out [M,N] (descriptors already checked). */
W8A8_HIDDEN w8a8_status w8a8_check_mm_kinds(const char *fn, const w8a8_matrix *a, const w8a8_matrix *b,
                                            const w8a8_matrix *out);
/* Byte extent [lo, hi) of a matrix / vector in memory (0,0 when empty). */
W8A8_HIDDEN void w8a8_matrix_extent(const w8a8_matrix *m, uintptr_t *lo, uintptr_t *hi);

/* ---- numeric helpers shared by every host implementation (src/core/numeric.c) -- */
W8A8_HIDDEN float w8a8_bf16_to_f32(uint16_t h);
W8A8_HIDDEN uint16_t w8a8_f32_to_bf16(float f); /* RNE, NaN kept quiet */
W8A8_HIDDEN float w8a8_f16_to_f32(uint16_t h);
W8A8_HIDDEN uint16_t w8a8_f32_to_f16(float f);  /* RNE, overflow to inf, NaN kept */
W8A8_HIDDEN float w8a8_fp8_to_f32(uint8_t v);   /* e4m3fn */
W8A8_HIDDEN uint8_t w8a8_f32_to_fp8(float f);   /* clamp to +-448, RNE, NaN -> 0x7f */
W8A8_HIDDEN int32_t w8a8_f32_to_int32_sat(float f); /* truncating, saturating, NaN -> 0 (use on rintf results) */
/* Dynamic quantization's scale: s = max(range / qmax, 1 / (qmax * 512)) (NaN -> the floor). */
W8A8_HIDDEN float w8a8_dynamic_scale(float range, float qmax);

/* ---- the int8 quantization rules (w8a8.h), one definition for the host and the GPU ------------------------------
 * src/cuda/quant.cu and act.cu call these too, so that every implementation has the same bits. Each step is one
 * IEEE fp32 operation (no multiply to contract into an FMA). */
#if defined(__CUDACC__)
#define W8A8_HOST_DEVICE static inline __host__ __device__
#else
#define W8A8_HOST_DEVICE static inline
#endif

/* q = clamp(rne(f) + azp, -128, 127) with the sum taken exactly; NaN counts as 0 (so it gives clamp(azp)). Past
 * +-2^40 the result no longer depends on f (|azp| <= 2^31), so f is clamped there and the sum fits in int64. */
W8A8_HOST_DEVICE int8_t w8a8_f32_to_int8_rne(float f, int32_t azp) {
  float r = rintf(f); /* the default rounding mode: to nearest, ties to even */
  if (r != r) r = 0.0f;
  r = r > 0x1p40f ? 0x1p40f : r < -0x1p40f ? -0x1p40f : r;
  const int64_t i = (int64_t)r + azp;
  return (int8_t)(i > 127 ? 127 : i < -128 ? -128 : i);
}

/* Dynamic asymmetric int8: the scale and zero point of a row whose minimum and maximum (NaN skipped) are lo and hi;
 * a row of no elements passes lo = hi = 0.
 *   A constant row c != 0 (lo == hi, finite): s = |c|. Every q is then -128 and s * (q - azp) is c exactly.
 *   Otherwise s = max((hi - lo) / 255, MIN_SCALE, |lo| * 2^-30), MIN_SCALE = 1 / (127 * 512). The last term keeps
 *   |lo / s| <= 2^30, so that azp fits in int32 where the range is a few ulps of the values (it changes no row whose
 *   |lo| is below 2^30 MIN_SCALE, about 16513).
 *   azp = rne(-128 - lo / s), saturated to int32 (which only rows holding an infinity, or no number, reach). */
W8A8_HOST_DEVICE void w8a8_asym_params(float lo, float hi, float *scale, int32_t *azp) {
  const float min_scale = 1.0f / (127.0f * 512.0f), alo = fabsf(lo);
  float s;
  if (lo == hi && lo != 0.0f && alo < INFINITY) {
    s = alo;
  } else {
    s = (hi - lo) / 255.0f;
    if (!(s > min_scale)) s = min_scale; /* NaN too: the range of an infinite row */
    const float floor_s = alo * 0x1p-30f;
    if (floor_s > s && floor_s < INFINITY) s = floor_s;
  }
  *scale = s;
  const float z = rintf(-128.0f - lo / s);
  *azp = z != z ? 0 : z >= 2147483648.0f ? INT32_MAX : z <= -2147483648.0f ? INT32_MIN : (int32_t)z;
}
/* The epilogue formula of w8a8_scaled_mm on one fp32 accumulator value. */
static inline float w8a8_epilogue(float v, float sa, float sb, const float *bias_or_null) {
  float t = sa * v;
  return bias_or_null ? __builtin_fmaf(sb, t, *bias_or_null) : sb * t;
}

/* ---- CPU backend (src/cpu) ------------------------------------------------ */
W8A8_HIDDEN void w8a8_cpu_detect(w8a8_cpu_features *f);
W8A8_HIDDEN w8a8_status w8a8_cpu_handle_init(w8a8_handle *h);
W8A8_HIDDEN void w8a8_cpu_handle_fini(w8a8_handle *h);
/* Scalar references: the ground truth, written to be read. */
W8A8_HIDDEN void w8a8_ref_scaled_mm(const w8a8_mm_problem *p);
W8A8_HIDDEN void w8a8_ref_quantize(const w8a8_quant_problem *p);
W8A8_HIDDEN void w8a8_ref_colsum(const w8a8_colsum_problem *p);
/* The group quantizers (p->groups != W8A8_GROUPS_NONE) over the values value(p, m, k): x itself where value is
 * NULL, silu(gate) * up for the fused quantizer (w8a8_silu_mul_value). */
typedef float (*w8a8_value_fn)(const w8a8_quant_problem *p, int64_t m, int64_t k);
W8A8_HIDDEN void w8a8_ref_quantize_groups(const w8a8_quant_problem *p, w8a8_value_fn value);
W8A8_HIDDEN float w8a8_silu_mul_value(const w8a8_quant_problem *p, int64_t m, int64_t k);
/* Dispatching CPU entry points (fast kernels where available, else reference). */
W8A8_HIDDEN w8a8_status w8a8_cpu_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p);
/* A CPU handle forcing W8A8_KERNEL_GENERIC: would its GEMM refuse in_dtype operands of depth K and up to M rows?
 * (W8A8_SUCCESS otherwise, and for every other kernel: AUTO falls back.) The TP calls ask before their agreement. */
W8A8_HIDDEN w8a8_status w8a8_cpu_forced_check(const w8a8_handle *h, w8a8_dtype in_dtype, int64_t M, int64_t K,
                                                bool block);
W8A8_HIDDEN w8a8_status w8a8_cpu_quantize(w8a8_handle *h, const w8a8_quant_problem *p);
W8A8_HIDDEN w8a8_status w8a8_cpu_colsum(w8a8_handle *h, const w8a8_colsum_problem *p);

/* ---- CUDA backend (src/cuda; stubs in src/core/cuda_stub.c when not built) ---- */
W8A8_HIDDEN int w8a8_cuda_available_count(void);
W8A8_HIDDEN w8a8_status w8a8_cuda_handle_init(w8a8_handle *h); /* checks device, allocates workspace */
W8A8_HIDDEN void w8a8_cuda_handle_fini(w8a8_handle *h);
W8A8_HIDDEN w8a8_status w8a8_cuda_get_info(const w8a8_handle *h, w8a8_handle_info *info);
/* Check that `ptr` (bytes [ptr, ptr+bytes)) is memory the handle's GPU can use.
 * fn/arg name the call and argument for the message. */
W8A8_HIDDEN w8a8_status w8a8_cuda_check_pointer(const w8a8_handle *h, const char *fn, const char *arg,
                                                const void *ptr);
W8A8_HIDDEN w8a8_status w8a8_cuda_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p);
W8A8_HIDDEN w8a8_status w8a8_cuda_quantize(w8a8_handle *h, const w8a8_quant_problem *p);
W8A8_HIDDEN w8a8_status w8a8_cuda_colsum(w8a8_handle *h, const w8a8_colsum_problem *p);
/* Block-scaled fp8 (src/cuda/blockwise.cu): the GEMM, and the group / block quantizers (silu: the SiLU-mul group
 * quantizer, x holding gate then up). */
W8A8_HIDDEN w8a8_status w8a8_cuda_scaled_mm_blockwise(w8a8_handle *h, const w8a8_mm_problem *p);
W8A8_HIDDEN w8a8_status w8a8_cuda_quantize_groups(w8a8_handle *h, const w8a8_quant_problem *p, int silu);

/* ---- fused SiLU-and-mul quantizer (src/core/api.c + validate.c, src/cpu/act_cpu.c, src/cuda/act.cu) ---- */
/* The problem is a w8a8_quant_problem over y [M, K]: x points at the gate columns and the up
 * columns start at column K of the same row. w8a8_act_expf and w8a8_silu_mul are the
 * reference's scalar formulas (w8a8.h), the ground truth of the CUDA kernel. */
W8A8_HIDDEN float w8a8_act_expf(float x);
W8A8_HIDDEN float w8a8_silu_mul(float g, float u);
W8A8_HIDDEN w8a8_status w8a8_cpu_silu_mul_quantize(w8a8_handle *h, const w8a8_quant_problem *p);
W8A8_HIDDEN w8a8_status w8a8_cuda_silu_mul_quantize(w8a8_handle *h, const w8a8_quant_problem *p);

#ifdef __cplusplus
}
#endif

#endif /* W8A8_INTERNAL_H */
