/*
 * w8a8.h — the whole public API of libw8a8.
 *
 * W8A8 scaled GEMM (int8 / fp8-e4m3 operands, fused dequantization epilogue),
 * the quantizers that produce the 8-bit activations, and tensor-parallel
 * fused operations (all-gather + GEMM, GEMM + reduce-scatter).
 *
 * C11. Depends on no CUDA, MPI or NCCL header: CUDA streams, MPI communicators
 * and NCCL communicators cross this API as `void *`.
 *
 * Conventions that hold for every call:
 *   - Every call returns a w8a8_status. W8A8_SUCCESS is 0. On failure the call
 *     has written nothing the caller owns, and w8a8_last_error() returns a
 *     message naming the call, the argument, what was expected and what was
 *     given. Every call that returns a status clears that message first, so
 *     after a successful call it is "". Nothing in the library aborts or exits
 *     on bad input.
 *   - All sizes and strides are int64_t element counts (not bytes). The GEMM and
 *     quantizer sizes (M, N, K, and a quantizer's x->cols) must each be below
 *     2^31 (W8A8_ERROR_INVALID_SHAPE otherwise); a matrix may span at most 2^62 bytes.
 *   - Data pointers are memory of the handle's device: host memory for a CPU
 *     handle, device memory (cudaMalloc or managed) of that GPU for a CUDA
 *     handle. A CUDA handle rejects host pointers and other GPUs' memory.
 *   - On a CUDA handle every call is asynchronous on the handle's stream
 *     (w8a8_set_stream), allocates nothing and never synchronizes the device:
 *     calls can be captured into CUDA graphs. On a CPU handle calls are
 *     synchronous and use OpenMP threads.
 *   - A handle may be used by one thread at a time; different handles are
 *     independent. w8a8_last_error() is per thread. The work of one CUDA
 *     handle must stay stream-ordered: calls on one stream (or streams the
 *     caller orders), and graphs captured from one handle replayed one after
 *     the other, never two at once (the handle's workspace serves one call at
 *     a time; for concurrent GEMMs use one handle per stream).
 */
#ifndef W8A8_H
#define W8A8_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define W8A8_API
#elif defined(__GNUC__)
#define W8A8_API __attribute__((visibility("default")))
#else
#define W8A8_API
#endif

/* ------------------------------------------------------------------------ */
/* Version                                                                   */
/* ------------------------------------------------------------------------ */

#define W8A8_VERSION_MAJOR 0
#define W8A8_VERSION_MINOR 1
#define W8A8_VERSION_PATCH 0
/** MAJOR*10000 + MINOR*100 + PATCH, as the header was written. */
#define W8A8_VERSION (W8A8_VERSION_MAJOR * 10000 + W8A8_VERSION_MINOR * 100 + W8A8_VERSION_PATCH)

/** @return W8A8_VERSION of the library actually loaded (compare with the macro). */
W8A8_API int w8a8_version(void);
/** @return "MAJOR.MINOR.PATCH" plus the build's features, e.g. "0.1.0 (cpu avx2, cuda sm_80 sm_89 sm_90a, mpi, nccl)". Static storage. */
W8A8_API const char *w8a8_version_string(void);

/* ------------------------------------------------------------------------ */
/* Status                                                                    */
/* ------------------------------------------------------------------------ */

/* X-macro: one list gives the enum and the strings. */
#define W8A8_STATUS_LIST(X)                                                            \
  X(W8A8_SUCCESS, 0, "success")                                                        \
  X(W8A8_ERROR_NULL_POINTER, 1, "a required pointer argument is NULL")                 \
  X(W8A8_ERROR_INVALID_HANDLE, 2, "the handle is NULL, destroyed, or not a w8a8 handle") \
  X(W8A8_ERROR_INVALID_VALUE, 3, "an argument has a value outside its allowed set")    \
  X(W8A8_ERROR_INVALID_SHAPE, 4, "matrix shapes are negative, overflow, or disagree")  \
  X(W8A8_ERROR_INVALID_STRIDE, 5, "a leading dimension is smaller than a row/column")  \
  X(W8A8_ERROR_INVALID_DTYPE, 6, "a dtype or dtype combination is not supported")      \
  X(W8A8_ERROR_INVALID_LAYOUT, 7, "a matrix has the wrong layout (row/column-major)")  \
  X(W8A8_ERROR_INVALID_SCALE, 8, "a scale vector has the wrong length, dtype or value") \
  X(W8A8_ERROR_INVALID_BIAS, 9, "the bias has the wrong length or dtype")              \
  X(W8A8_ERROR_INVALID_ZERO_POINT, 10, "the zero point or its correction is invalid")  \
  X(W8A8_ERROR_OVERLAP, 11, "an output overlaps an input or another output")           \
  X(W8A8_ERROR_INVALID_POINTER, 12, "a pointer is not memory of the handle's device")  \
  X(W8A8_ERROR_MISALIGNED, 13, "a pointer is not aligned to its element size")         \
  X(W8A8_ERROR_UNSUPPORTED_DEVICE, 14, "the operation is not supported on this device") \
  X(W8A8_ERROR_NOT_BUILT, 15, "the library was built without this feature")            \
  X(W8A8_ERROR_OUT_OF_MEMORY, 16, "an allocation failed")                              \
  X(W8A8_ERROR_DEVICE, 17, "the CUDA runtime or driver reported an error")             \
  X(W8A8_ERROR_INVALID_COMM, 18, "the communicator is NULL, destroyed, or of the wrong kind") \
  X(W8A8_ERROR_COMM, 19, "a communication call (MPI, NCCL) failed")                    \
  X(W8A8_ERROR_COMM_MISMATCH, 20, "ranks disagree on shapes, dtypes or modes")         \
  X(W8A8_ERROR_WORKSPACE, 21, "the workspace is too small for this call")              \
  X(W8A8_ERROR_INVALID_FILE, 22, "a file could not be read or is malformed")           \
  X(W8A8_ERROR_INTERNAL, 23, "internal error (a bug in w8a8: please report it)")              \
  X(W8A8_ERROR_STALE_TUNING, 24, "a tuning table was measured on another device or library version") \
  X(W8A8_ERROR_BROKEN, 25, "the communicator is broken by an earlier failure (this rank's or a peer's)") \
  X(W8A8_ERROR_TIMEOUT, 26, "a collective call did not complete within the communicator's timeout") \
  X(W8A8_ERROR_ABORTED, 27, "the communicator was aborted (w8a8_comm_abort)")

typedef enum w8a8_status {
#define W8A8_X_ENUM(name, value, text) name = value,
  W8A8_STATUS_LIST(W8A8_X_ENUM)
#undef W8A8_X_ENUM
  W8A8_STATUS_COUNT
} w8a8_status;

/** @return fixed text for a status; "unknown status" for values outside the enum. Never NULL. */
W8A8_API const char *w8a8_status_string(w8a8_status status);
/** @return the symbolic name, e.g. "W8A8_ERROR_INVALID_SCALE". Never NULL. */
W8A8_API const char *w8a8_status_name(w8a8_status status);
/**
 * @return the detail of the last failed call made by this thread, e.g.
 * "w8a8_scaled_mm: scale_a->len is 7; expected 1 (per-tensor) or M = 16 (per-token)".
 * "" if this thread's last call succeeded or it has made none (each call returning a
 * w8a8_status clears it on entry). Valid until this thread's next w8a8 call.
 */
W8A8_API const char *w8a8_last_error(void);

/* ------------------------------------------------------------------------ */
/* Data types and descriptors                                                */
/* ------------------------------------------------------------------------ */

typedef enum w8a8_dtype {
  W8A8_DTYPE_INVALID = 0, /* a zero-initialised descriptor is rejected */
  W8A8_DTYPE_INT8 = 1,
  W8A8_DTYPE_FP8_E4M3 = 2, /* e4m3fn: no infinities, max finite 448, NaN = 0x7f/0xff */
  W8A8_DTYPE_BF16 = 3,
  W8A8_DTYPE_FP16 = 4,
  W8A8_DTYPE_FP32 = 5,
  W8A8_DTYPE_INT32 = 6
} w8a8_dtype;

/** @return the element size in bytes, 0 for an invalid dtype. */
W8A8_API size_t w8a8_dtype_size(w8a8_dtype dtype);
/** @return "int8", "fp8_e4m3", "bf16", "fp16", "fp32", "int32", or "invalid". */
W8A8_API const char *w8a8_dtype_name(w8a8_dtype dtype);

typedef enum w8a8_layout {
  W8A8_ROW_MAJOR = 0, /* element (r, c) at data[r * ld + c], ld >= cols */
  W8A8_COL_MAJOR = 1  /* element (r, c) at data[c * ld + r], ld >= rows */
} w8a8_layout;

/**
 * A 2-D matrix in memory. rows x cols is the logical shape; ld is the distance
 * in elements between consecutive rows (row-major) or columns (column-major),
 * so a submatrix of a larger matrix is described by pointing `data` at its
 * first element and keeping the parent's ld. Empty matrices (rows or cols 0)
 * may have data == NULL.
 */
typedef struct w8a8_matrix {
  w8a8_dtype dtype;
  w8a8_layout layout;
  int64_t rows;
  int64_t cols;
  int64_t ld;
  void *data;
} w8a8_matrix;

/** A 1-D vector: scales (fp32), zero points and corrections (int32), bias (output dtype). */
typedef struct w8a8_vector {
  w8a8_dtype dtype;
  int64_t len;
  void *data;
} w8a8_vector;

/** Convenience constructors (plain struct literals; no allocation). */
static inline w8a8_matrix w8a8_matrix_make(w8a8_dtype dtype, w8a8_layout layout, int64_t rows,
                                           int64_t cols, int64_t ld, void *data) {
  w8a8_matrix m;
  m.dtype = dtype;
  m.layout = layout;
  m.rows = rows;
  m.cols = cols;
  m.ld = ld;
  m.data = data;
  return m;
}
static inline w8a8_vector w8a8_vector_make(w8a8_dtype dtype, int64_t len, void *data) {
  w8a8_vector v;
  v.dtype = dtype;
  v.len = len;
  v.data = data;
  return v;
}

/* ------------------------------------------------------------------------ */
/* Handle                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct w8a8_handle w8a8_handle;

typedef enum w8a8_device_kind {
  W8A8_DEVICE_CPU = 0,
  W8A8_DEVICE_CUDA = 1
} w8a8_device_kind;

/**
 * Create a handle bound to a device: W8A8_DEVICE_CPU with device_index 0 (the CPU has
 * no other index), or W8A8_DEVICE_CUDA with a CUDA device ordinal. The handle owns its
 * workspaces, allocated here and nowhere else. A CUDA handle starts on the legacy default
 * stream (NULL) and makes its device current only for the duration of calls.
 * @return W8A8_ERROR_INVALID_VALUE (a kind outside the enum, a negative index, or a CPU
 *         index other than 0), W8A8_ERROR_NOT_BUILT (no CUDA in this build),
 *         W8A8_ERROR_UNSUPPORTED_DEVICE (no such GPU, older than sm_75, or no code for it in this build), W8A8_ERROR_OUT_OF_MEMORY.
 */
W8A8_API w8a8_status w8a8_create(w8a8_handle **handle, w8a8_device_kind kind, int device_index);
/** Create a handle on the best device available: CUDA device 0 if usable, else the CPU (a CUDA
 *  handle that cannot be created is no failure: the CPU one is made instead). Messages name
 *  w8a8_create_best. */
W8A8_API w8a8_status w8a8_create_best(w8a8_handle **handle);
/** Destroy a handle; NULL is accepted and does nothing. Waits for nothing: on a CUDA handle
 *  the caller must make sure no work of this handle is still running. */
W8A8_API w8a8_status w8a8_destroy(w8a8_handle *handle);

/** Set the CUDA stream (a cudaStream_t passed as void*) on which later calls run. NULL is the
 *  legacy default stream. On a CPU handle only NULL is accepted. */
W8A8_API w8a8_status w8a8_set_stream(w8a8_handle *handle, void *cuda_stream);
W8A8_API w8a8_status w8a8_get_stream(const w8a8_handle *handle, void **cuda_stream);

/** CPU handle: number of OpenMP threads (0 = OpenMP's default). Ignored by CUDA handles. */
W8A8_API w8a8_status w8a8_set_num_threads(w8a8_handle *handle, int num_threads);

/**
 * Which implementation a handle uses. AUTO picks the fastest that can take the input
 * (and falls back to a slower correct one where a fast path cannot, e.g. unaligned
 * strides). The others force one path, for tests and benchmarks; a forced path that
 * cannot take an input returns W8A8_ERROR_UNSUPPORTED_DEVICE instead of falling back.
 *   REFERENCE: the plain scalar implementation (CPU handles only): the ground truth.
 *   GENERIC:   CPU: the AVX2 kernels (UNSUPPORTED_DEVICE where the CPU lacks AVX2, FMA or F16C);
 *              CUDA: the portable mma.sync kernel (sm_80+; its int8 variant on sm_75).
 *   SM90:      CUDA: the Hopper TMA + wgmma kernel (sm_90a only).
 */
typedef enum w8a8_kernel {
  W8A8_KERNEL_AUTO = 0,
  W8A8_KERNEL_REFERENCE = 1,
  W8A8_KERNEL_GENERIC = 2,
  W8A8_KERNEL_SM90 = 3
} w8a8_kernel;
W8A8_API w8a8_status w8a8_set_kernel(w8a8_handle *handle, w8a8_kernel kernel);

/**
 * CUDA handle: a promise that the weights (b of w8a8_scaled_mm) are not written by the work
 * enqueued on the handle's stream right before a GEMM -- true of inference weights, written once
 * at load time. With it (constant = 1) the Hopper kernel starts loading the first K-blocks of b
 * while the kernel before it on the stream is still finishing (programmatic dependent launch),
 * instead of after it. Measured on an H200 between back-to-back GEMMs: 1.03-1.06x at 33..256
 * tokens, no gain at 1..32 (bench/results/h200-torch-compare-2026-11-29-v6.md). Activations,
 * scales, bias and the output are still read and written only after the previous kernel has
 * completed. With the promise broken (b written by the previous kernel) results may be computed
 * from the old b. 0 (the default) keeps every read after the previous kernel. Only 0 and 1 are
 * accepted. CPU handles and the portable CUDA kernel ignore it.
 */
W8A8_API w8a8_status w8a8_set_weights_constant(w8a8_handle *handle, int constant);

/**
 * How the CUDA Hopper kernel accumulates fp8 products (int8 is exact either way).
 * W8A8_FP8_ACCUM_PRECISE (the default): the tensor core sums each 128-deep K-block from zero and
 * the kernel adds the block into fp32 accumulators, as torch._scaled_mm with use_fast_accum=False
 * and DeepGEMM do. Within a block the tensor core's own accumulation truncates, so the error is
 * up to ~1.2e-3 of sum|a||b| (measured on random e4m3 data at K = 100, one block; typically
 * 1e-4..5e-4; the tests hold 2e-3).
 * W8A8_FP8_ACCUM_FAST: where the heuristic runs its large 128 x 256 tiles (large M and N), the
 * tensor core accumulates the whole K range itself, as use_fast_accum=True and vLLM's CUTLASS fp8
 * kernels do: 1.05-1.24x faster on an H200 at M >= 1024 (bench/results/h200-sm90-ncu-mc2-2026-11-29.txt,
 * fp8_128x256 vs fp8_128x256_promote), at an error that grows with K (1.1e-3 of sum|a||b| was
 * measured at K = 429 on random e4m3 data; the tests hold 1e-2). Other shapes keep promoting. CPU
 * handles and the portable CUDA kernel accumulate in fp32 / exactly whatever the setting.
 */
typedef enum w8a8_fp8_accum { W8A8_FP8_ACCUM_PRECISE = 0, W8A8_FP8_ACCUM_FAST = 1 } w8a8_fp8_accum;
W8A8_API w8a8_status w8a8_set_fp8_accum(w8a8_handle *handle, w8a8_fp8_accum accum);

typedef struct w8a8_handle_info {
  w8a8_device_kind kind;
  int device_index;
  int cc_major, cc_minor;  /* CUDA compute capability; 0 on the CPU */
  int num_sms;             /* multiprocessors, or CPU threads used */
  int num_threads;         /* CPU: OpenMP threads a call will use */
  size_t workspace_bytes;  /* bytes the handle owns */
  char name[128];          /* "NVIDIA H200" or the CPU model */
  char features[128];      /* e.g. "avx2 fma" or "sm_90a wgmma tma" */
} w8a8_handle_info;
W8A8_API w8a8_status w8a8_get_info(const w8a8_handle *handle, w8a8_handle_info *info);

/**
 * What the handle's last w8a8_scaled_mm ran (also the GEMMs of the fused TP calls made with it):
 * which kernel W8A8_KERNEL_AUTO (or a forced kernel) took, and its plan. Written by each call that
 * launches a GEMM; a handle is used by one thread at a time, so it is that thread's last call.
 * W8A8_LOG=info prints the same whenever the plan changes.
 */
typedef struct w8a8_launch_info {
  const char *kernel;  /* "sm90" (Hopper), "mma" (portable CUDA), "mma_sm75" (its Turing variant), "gemv"
                          (CUDA cores), "cuda-blockwise" (block-scaled fp8), "cpu-amx",
                          "cpu-avx512vnni", "cpu-avx2", "cpu-reference"; "" before any GEMM */
  const char *config;  /* the sm90 configuration's name (docs/HOPPER.md), else "" */
  int split_k;         /* K split this many ways (1: none) */
  int64_t m, n, k;     /* the problem */
} w8a8_launch_info;
W8A8_API w8a8_status w8a8_get_last_launch(const w8a8_handle *handle, w8a8_launch_info *info);

/**
 * Settings. The library reads its environment once, at the first use of any setting:
 *   W8A8_LOG               off | warn (default: settings ignored as invalid) | info (also each new plan)
 *   W8A8_CPU_DISABLE       CPU instruction sets to leave alone: a comma list of avx2, avx512, amx
 *   W8A8_TUNE_FILE         a tuning table (w8a8 tune) that each new CUDA handle loads
 *   W8A8_TP_TIMEOUT_S      a new communicator's timeout in seconds (default 300; 0 = none)
 *   W8A8_TP_OVERLAP_MIN_M  overlap = auto fuses from this many rows (default -1: measured per transport)
 *   W8A8_TP_IPC            1: w8a8_comm_create_world's GPU ranks use CUDA IPC instead of NCCL
 *   W8A8_TP_AG_SCALES      0: the all-gather copies scales (see w8a8_comm_create_local)
 * Development switches (kept for A/B measurements and tests) are set only as
 * W8A8_DEV="NAME=value,..."; an invalid value is ignored with a warning. `w8a8 info` lists every
 * setting with its value; w8a8_setting_count / w8a8_get_setting do so programmatically (strings
 * owned by the library, valid for the process).
 */
typedef struct w8a8_setting {
  const char *name;           /* "W8A8_LOG"; a development switch's bare NAME (set through W8A8_DEV) */
  const char *value;          /* the value in effect, as text */
  const char *default_value;
  const char *doc;            /* one line */
  int for_users;              /* 1: a documented environment variable; 0: a development switch */
  int is_set;                 /* 1: set by the environment */
} w8a8_setting;
W8A8_API int w8a8_setting_count(void);
W8A8_API w8a8_status w8a8_get_setting(int index, w8a8_setting *setting);

/** @return the number of usable CUDA devices (0 in a CPU-only build or without a driver). */
W8A8_API int w8a8_cuda_device_count(void);

/* ------------------------------------------------------------------------ */
/* Scaled matrix multiplication                                              */
/* ------------------------------------------------------------------------ */

/**
 * Asymmetric-int8 zero point of A (as in vLLM's azp epilogues).
 *   azp.data == NULL:   out = sa*sb*(A_q.B_q - azp_adj[n]) + bias
 *                       (per-tensor zero point, azp_adj[n] = azp * colsum(B_q)[n] premultiplied)
 *   azp.len == 1 or M:  out = sa*sb*(A_q.B_q - azp[m]*azp_adj[n]) + bias
 *                       (azp_adj[n] = colsum(B_q)[n]; azp per tensor or per token)
 * azp and azp_adj are int32; azp_adj has N elements. w8a8_colsum computes colsum(B_q).
 * The correction is evaluated in int32 like the accumulator.
 */
typedef struct w8a8_zero_point {
  w8a8_vector azp;
  w8a8_vector azp_adj;
} w8a8_zero_point;

/**
 * out[M,N] = scale_a ⊙ scale_b ⊙ (A[M,K] · B[K,N]) (+ bias[N])
 *
 * @param a       [M,K] row-major, int8 or fp8_e4m3, ld >= K.
 * @param b       [K,N] column-major (the weights as N rows of K), same dtype as a, ld >= K.
 *                A row-major b is rejected with W8A8_ERROR_INVALID_LAYOUT (pass W^T as a
 *                column-major view, or transpose the weights once at load time).
 * @param scale_a fp32, len 1 (per-tensor) or M (per-token).
 * @param scale_b fp32, len 1 (per-tensor) or N (per-output-channel).
 * @param bias    NULL, or N elements of the output dtype.
 * @param zp      NULL (symmetric), or an int8 zero point (see w8a8_zero_point); int8 only.
 * @param out     [M,N] row-major, bf16, fp16 or fp32, ld >= N; must not overlap any input.
 *
 * Sizes: M, N, K each below 2^31; int8 also needs K <= 131071 (W8A8_ERROR_INVALID_SHAPE otherwise).
 *
 * Arithmetic (the same on every backend):
 *   int8: acc = sum_k a[m,k]*b[k,n] exactly in int32 (requires K <= 131071: 131072 * 128 * 128 = 2^31);
 *         with a zero point, d = acc - azp*azp_adj[n] in int32; v = (float)d (round to nearest).
 *   fp8:  v = sum_k a[m,k]*b[k,n] in fp32 (products are exact; summation order unspecified).
 *   t = sa[m] * v;  r = bias ? fmaf(sb[n], t, bias[n]) : sb[n] * t   (fp32)
 *   out = r rounded once to the output dtype, to nearest even (NaN stays NaN; fp16 overflows to inf).
 * M == 0 or N == 0 succeeds and writes nothing; K == 0 writes the bias (or zeros).
 */
W8A8_API w8a8_status w8a8_scaled_mm(w8a8_handle *handle, const w8a8_matrix *a, const w8a8_matrix *b,
                                    const w8a8_vector *scale_a, const w8a8_vector *scale_b,
                                    const w8a8_vector *bias, const w8a8_zero_point *zp,
                                    const w8a8_matrix *out);

/**
 * azp_adj[n] = sum_k b[k,n] (int32) for an int8 column-major B [K,N]: the correction
 * vector of an asymmetric-int8 GEMM. Compute it once per weight matrix.
 * K must be <= 131071, the int8 K that w8a8_scaled_mm takes (W8A8_ERROR_INVALID_SHAPE
 * otherwise); N == 0 succeeds and writes nothing.
 * @param azp_adj int32, len N.
 */
W8A8_API w8a8_status w8a8_colsum(w8a8_handle *handle, const w8a8_matrix *b, const w8a8_vector *azp_adj);

/* ------------------------------------------------------------------------ */
/* Quantization                                                              */
/* ------------------------------------------------------------------------ */

typedef enum w8a8_quant_mode {
  W8A8_QUANT_STATIC_PER_TENSOR = 0,  /* scale (len 1) is given */
  W8A8_QUANT_DYNAMIC_PER_TENSOR = 1, /* scale (len 1) is computed from the whole tensor */
  W8A8_QUANT_DYNAMIC_PER_TOKEN = 2   /* scale (len M) is computed from each row */
} w8a8_quant_mode;

/**
 * q = quantize(x). x: [M,K] row-major fp32, bf16 or fp16 (any ld >= K).
 * q: [M,K] row-major int8 or fp8_e4m3 (any ld >= K), must not overlap x.
 *
 * QMAX = 448 (fp8) or 127 (int8); MIN_SCALE = 1 / (QMAX * 512).
 *   static per-tensor:   s = scale[0], finite and > 0 (input).
 *   dynamic per-tensor:  amax = max |x| over the tensor; s = max(amax / QMAX, MIN_SCALE); scale[0] = s (output).
 *   dynamic per-token:   amax_m = max |x[m,:]|; if scale_ub: amax_m = min(amax_m, *scale_ub);
 *                        s_m = max(amax_m / QMAX, MIN_SCALE); scale[m] = s_m (output, len M).
 *   fp8:                 q = e4m3(clamp(x / s, -448, 448)), rounded to nearest even; NaN stays NaN.
 *   int8 symmetric:      q = clamp(rne(x / s), -128, 127); NaN gives 0.
 *   int8 asymmetric (azp != NULL):
 *     static per-tensor: azp[0] given (any int32); q = clamp(rne(x / s) + azp, -128, 127).
 *     dynamic per-token: lo, hi = min, max of x[m,:] (0, 0 for K == 0);
 *                        s_m = max((hi - lo) / 255, MIN_SCALE, |lo| * 2^-30), except that a
 *                          constant row c != 0 (lo == hi, finite) takes s_m = |c|;
 *                        azp[m] = rne(-128 - lo / s_m) (int32, output, len M);
 *                        q = clamp(rne(x / s_m) + azp[m], -128, 127).
 *                        So a constant row gives every q = -128 and azp = -128 - sign(c), and
 *                        dequantizes to c exactly; the |lo| * 2^-30 term (which changes no row
 *                        with |lo| < 16513) keeps |azp| <= 2^30 + 128 where the range is a few
 *                        ulps of the values, and such rows dequantize within an ulp.
 *     dynamic per-tensor with a zero point is not supported (W8A8_ERROR_INVALID_ZERO_POINT).
 *     rne(x / s) + azp is exact (64-bit), never rne(x / s) saturated to int32 before the sum.
 *   x / s is an IEEE fp32 division (not a multiplication by 1/s), on every backend.
 *   NaN inputs are skipped by the max / min reductions (a row of NaN only gets MIN_SCALE).
 * scale: fp32 vector; scale_ub: NULL or one fp32 in the handle's memory (> 0), symmetric per-token only.
 * The dequantized value is x ≈ s * (q - azp), which is what w8a8_scaled_mm's zero point expects.
 * Sizes: M and K each below 2^31. M == 0 succeeds and writes nothing, not even the dynamic
 * per-tensor scale (there are no values to take it from); K == 0 with rows writes the dynamic
 * scales (MIN_SCALE) and zero points (-128).
 */
W8A8_API w8a8_status w8a8_quantize(w8a8_handle *handle, const w8a8_matrix *x, const w8a8_matrix *q,
                                   w8a8_quant_mode mode, const w8a8_vector *scale,
                                   const w8a8_vector *azp, const float *scale_ub);

/* ---- Fused SiLU-and-mul quantizer (the MLP activation) ------------------------------------ */

/**
 * q = quantize(silu(gate) * up): the activation between a gated MLP's gate_up and down
 * projections, in one pass over x (no bf16 intermediate in memory).
 *
 * x: [M, 2I] row-major fp32, bf16 or fp16 (any ld >= 2I): gate = columns 0 .. I-1,
 *    up = columns I .. 2I-1 (vLLM's silu_and_mul layout; x->cols must be even).
 * q: [M, I] row-major int8 or fp8_e4m3 (any ld >= I); must not overlap x.
 * mode, scale, azp, scale_ub: exactly as w8a8_quantize (static per-tensor: scale len 1 is
 * an input; dynamic per-tensor: len 1, output; dynamic per-token: len M, output; azp for
 * int8 only, static or per-token; scale_ub symmetric per-token only).
 *
 * Arithmetic (the same bits on every backend):
 *   g, u = x[m, k], x[m, I + k] converted to fp32 exactly;
 *   e = w8a8's expf(-g): exp evaluated in double precision (range reduction to
 *       |r| <= ln2/2 and a degree-11 polynomial, each step one IEEE double operation)
 *       and rounded once to fp32: within 0.5 + 2^-20 ulp of exp, the same bits on the
 *       CPU and the GPU (libm expf and CUDA's expf differ from each other in the last bit);
 *   silu = g / (1 + e)    (fp32, IEEE, in this order; g = -inf gives NaN, as the formula does);
 *   y = silu * u          (fp32);  a NaN y is the positive quiet NaN 0x7fc00000;
 *   q = what w8a8_quantize(mode) writes for the fp32 matrix y [M, I], with the same scale
 *       rules (QMAX, MIN_SCALE, scale_ub, zero point) and the same IEEE division y / s.
 * M == 0 writes nothing (not even the dynamic per-tensor scale); I == 0 with rows writes the
 * dynamic scales (MIN_SCALE, as w8a8_quantize). Sizes: M and 2I each below 2^31.
 * @return as w8a8_quantize, plus W8A8_ERROR_INVALID_SHAPE when x->cols is odd or q is not
 *         [x->rows, x->cols / 2].
 */
W8A8_API w8a8_status w8a8_silu_mul_quantize(w8a8_handle *handle, const w8a8_matrix *x, const w8a8_matrix *q,
                                            w8a8_quant_mode mode, const w8a8_vector *scale,
                                            const w8a8_vector *azp, const float *scale_ub);

/* ---- end of the fused SiLU-and-mul quantizer ------------------------------------------- */

/* ------------------------------------------------------------------------ */
/* Block-scaled fp8 (DeepSeek-V3 style)                                      */
/* ------------------------------------------------------------------------ */

/* The block of the block-scaled mode: activations carry one scale per token per W8A8_BLOCK channels, weights
 * one per W8A8_BLOCK x W8A8_BLOCK block (the last group or block of a dimension may be partial). */
#define W8A8_BLOCK 128

/**
 * out[M,N] = the sum over K blocks kb of sa[m,kb] * sb[n / 128, kb] * (A[m, kb] · B[kb, n]) (+ bias[N]):
 * the GEMM of DeepSeek-V3 / Qwen3-FP8 checkpoints (their weight_scale_inv is scale_b).
 *
 * @param a       [M,K] row-major fp8_e4m3 (as w8a8_scaled_mm).
 * @param b       [K,N] column-major fp8_e4m3 (the weights as N rows of K).
 * @param scale_a fp32 matrix [M, ceil(K/128)]: one scale per token per 128 channels. Row-major (vLLM's
 *                per_token_group_quant_fp8) or column-major (its column_major_scales option, DeepGEMM's
 *                layout), any ld.
 * @param scale_b fp32 matrix [ceil(N/128), ceil(K/128)]: one scale per 128 x 128 block of the weights,
 *                row- or column-major, any ld (a checkpoint's [N/128, K/128] row-major tensor as it is).
 * @param bias    NULL, or N elements of the output dtype.
 * @param out     [M,N] row-major, bf16, fp16 or fp32; must not overlap any input.
 *
 * Arithmetic, with KB = ceil(K/128):
 *   p_kb = sum over k in [128 kb, min(128 kb + 128, K)) of a[m,k]*b[k,n] in fp32 (products exact);
 *   acc = 0; for kb = 0 .. KB-1 in order: acc = fmaf(sa[m,kb] * sb[n/128,kb], p_kb, acc)   (fp32);
 *   r = bias ? acc + bias[n] : acc;  out = r rounded once to the output dtype (as w8a8_scaled_mm).
 * The CPU reference sums each block in k order; other kernels may sum a block's products in another order
 * (fp8's usual latitude: the tests hold |out - ref| <= 2e-3 * sum_kb |sa sb| sum_k |a b| + the output's
 * rounding). M == 0 or N == 0 writes nothing; K == 0 writes the bias (or zeros).
 * Backends: the CPU (the reference, and an AVX2 kernel that sums each block in k order too: the same bits);
 * CUDA handles on sm_90a through the Hopper kernel (tensor cores sum each block; needs 16-byte
 * aligned a and b with lda, ldb % 16 == 0, else, under W8A8_KERNEL_AUTO, the portable kernel), and on any GPU (or
 * with W8A8_KERNEL_GENERIC) through a portable kernel that sums each block in k order as the CPU does: the same
 * bits as the CPU.
 * @return W8A8_ERROR_INVALID_DTYPE for int8 operands (block scales are fp8's); W8A8_ERROR_INVALID_SCALE for a
 *         scale matrix of another shape or dtype; otherwise as w8a8_scaled_mm.
 */
W8A8_API w8a8_status w8a8_scaled_mm_blockwise(w8a8_handle *handle, const w8a8_matrix *a, const w8a8_matrix *b,
                                              const w8a8_matrix *scale_a, const w8a8_matrix *scale_b,
                                              const w8a8_vector *bias, const w8a8_matrix *out);

/* Flags of the group quantizers. UE8M0: every scale is rounded up to a power of two (an exact e8m0 value, as
 * DeepSeek-V3's training recipe and DeepGEMM's scale_ue8m0 path use). */
#define W8A8_SCALE_UE8M0 1u

/**
 * Per-token-group fp8 quantization: the activations of w8a8_scaled_mm_blockwise. Each row of x is cut into
 * groups of 128 columns (the last one partial), each with its own scale:
 *   amax = max |x| over the group (NaN skipped); s = max(amax / 448, MIN_SCALE) (MIN_SCALE = 1 / (448 * 512));
 *   with W8A8_SCALE_UE8M0: s = the smallest power of two >= s;
 *   q = e4m3(clamp(x / s, -448, 448)) rounded to nearest even (x / s an IEEE fp32 division); NaN stays NaN.
 * x: [M,K] row-major fp32, bf16 or fp16. q: [M,K] row-major fp8_e4m3; must not overlap x.
 * scale: fp32 matrix [M, ceil(K/128)] (output), row- or column-major, any ld; must not overlap x or q.
 * flags: 0 or W8A8_SCALE_UE8M0. M == 0 or K == 0 writes nothing.
 * Backends: the CPU and CUDA, with the same bits.
 */
W8A8_API w8a8_status w8a8_quantize_groups(w8a8_handle *handle, const w8a8_matrix *x, const w8a8_matrix *q,
                                          const w8a8_matrix *scale, unsigned flags);

/**
 * 128 x 128 block fp8 quantization: the weights of w8a8_scaled_mm_blockwise, once at load time.
 * x: [N,K] row-major fp32, bf16 or fp16 (the weights as N rows of K); q: [N,K] row-major fp8_e4m3, which is
 * the column-major [K,N] operand b of w8a8_scaled_mm_blockwise. scale: fp32 matrix [ceil(N/128), ceil(K/128)]
 * (output), row- or column-major, any ld. Each block's scale and q follow w8a8_quantize_groups' rules with
 * the amax taken over the whole block. flags: 0 or W8A8_SCALE_UE8M0.
 * Backends: the CPU and CUDA, with the same bits.
 */
W8A8_API w8a8_status w8a8_quantize_blocks(w8a8_handle *handle, const w8a8_matrix *x, const w8a8_matrix *q,
                                          const w8a8_matrix *scale, unsigned flags);

/**
 * w8a8_silu_mul_quantize in the per-token-group mode: y = silu(gate) * up exactly as w8a8_silu_mul_quantize
 * computes it, then w8a8_quantize_groups' rules on y [M, I]. x: [M, 2I]; q: [M, I] fp8_e4m3; scale: fp32
 * matrix [M, ceil(I/128)]. Backends: the CPU and CUDA, with the same bits.
 */
W8A8_API w8a8_status w8a8_silu_mul_quantize_groups(w8a8_handle *handle, const w8a8_matrix *x, const w8a8_matrix *q,
                                                   const w8a8_matrix *scale, unsigned flags);

/* ------------------------------------------------------------------------ */
/* Tensor parallelism                                                        */
/* ------------------------------------------------------------------------ */

/* Sequence-parallel layers over W ranks. Rank r holds M_r rows (tokens) of the
 * activations; the rows of the whole layer are the ranks' shards in rank order,
 * so rank r's rows start at offset_r = M_0 + ... + M_{r-1}.
 *
 *   column-parallel (QKV, gate_up):  out[M, N_r]  = all_gather(A)[M, K] . B_r[K, N_r]
 *   row-parallel    (O, down):       out_r[M_r, N] = rows offset_r.. of sum_j (A_j[M, K_j] . B_j[K_j, N])
 *
 * Uneven shards are supported (as MPI_Allgatherv): M_r may differ between ranks
 * and may be 0. w8a8_tp_shard_rows gives the usual split (the first M % W ranks
 * get one extra row). What every rank must agree on is checked by the fused
 * calls themselves (see "Agreement" below).
 *
 * Communicators are collective objects: create, destroy and the fused calls must
 * be called by every rank of the communicator, in the same order. A communicator
 * is used by one thread at a time (except w8a8_comm_abort, w8a8_comm_set_timeout and
 * w8a8_comm_get_async_error: any thread, any time). A failure that may leave the ranks
 * out of step breaks the communicator on every rank, and no fused call waits for ever
 * once a timeout is set (the default is 300 s): see "Failures, deadlines and abort" below.
 *
 * MPI thread level (MPI communicators, and GPU communicators made by
 * w8a8_comm_create_world, which agree over MPI): w8a8 calls MPI only from the thread
 * making a w8a8 call. One thread making every w8a8 call of the process needs
 * MPI_THREAD_FUNNELED when it is the main thread, MPI_THREAD_SERIALIZED otherwise (or
 * when threads take turns); communicators driven concurrently by several threads, or a
 * thread making w8a8 calls while another makes MPI calls of its own, need
 * MPI_THREAD_MULTIPLE. w8a8_comm_abort, w8a8_comm_set_timeout and
 * w8a8_comm_get_async_error make no MPI call and need no level. */

typedef struct w8a8_comm w8a8_comm;

/**
 * Create a communicator over an existing MPI communicator (pass a pointer to your
 * MPI_Comm; it is duplicated, so yours stays free for other traffic, and the
 * duplicate returns MPI errors instead of aborting). Collective over its ranks.
 * MPI must be initialised. `handle` is a CPU handle: it runs the GEMMs (its kernel
 * choice and thread count apply) and must outlive the communicator.
 * All ranks check at creation that they run the same library version and device
 * kind; when a rank's `comm` or `handle` is bad every rank fails (no hang). A rank whose
 * `mpi_comm` is unusable (NULL, pointing at MPI_COMM_NULL, an intercommunicator, or MPI not
 * initialised) fails at once and cannot take part, since it has no communicator to reach
 * its peers through: the peers wait in the duplication of their communicator (polled) and
 * fail with W8A8_ERROR_TIMEOUT after W8A8_TP_TIMEOUT_S (default 300 s; 0 = wait for ever).
 * After such a timeout the peers' MPI communicator still has that duplication pending:
 * make no further collective call on it. w8a8_comm_create_world has no such case.
 * The new communicator's timeout is W8A8_TP_TIMEOUT_S as read here (w8a8_comm_set_timeout).
 * Allocates no workspace: call w8a8_comm_reserve before the fused calls.
 * @return W8A8_ERROR_NOT_BUILT without MPI; W8A8_ERROR_UNSUPPORTED_DEVICE for a CUDA
 *         handle (GPU ranks use w8a8_comm_create_nccl); W8A8_ERROR_COMM when MPI fails;
 *         W8A8_ERROR_COMM_MISMATCH when ranks disagree or another rank's arguments were bad;
 *         W8A8_ERROR_TIMEOUT as above.
 */
W8A8_API w8a8_status w8a8_comm_create_mpi(w8a8_comm **comm, w8a8_handle *handle, const void *mpi_comm);
/**
 * Bootstrap: when MPI is not initialised yet, MPI_Init_thread(MPI_THREAD_MULTIPLE) (whatever
 * level MPI provides is accepted: see "MPI thread level" above for what each use needs;
 * MPI_Query_thread tells which one was given). MPI_Finalize is then called when the last such
 * communicator is destroyed, after which MPI cannot be used again in this process; and also
 * when this creation fails, on every rank, since an initialised MPI never finalised makes
 * mpirun fail the job (to retry after a failure, initialise MPI before the first call; not
 * after W8A8_ERROR_TIMEOUT, when a peer may be gone and MPI_Finalize could wait for it).
 * Then w8a8_comm_create_mpi over MPI_COMM_WORLD. Every collective step of the creation is
 * polled against W8A8_TP_TIMEOUT_S (W8A8_ERROR_TIMEOUT; MPI_COMM_WORLD is then left with a
 * w8a8 collective pending), except NCCL's own initialisation (GPU ranks), which NCCL runs.
 * With a CUDA handle (one GPU per rank; every rank must pass the same
 * kind of handle, else every rank fails): an NCCL communicator over MPI_COMM_WORLD (id
 * broadcast with MPI), owned by the w8a8_comm, whose fused calls agree over MPI on the host.
 * IPC transport (opt-in while unproven: environment W8A8_TP_IPC=1 on every rank at creation):
 * when the ranks are processes of one host and every rank's GPU has peer access to every
 * other's, chunks move with cudaMemcpyAsync on the copy engine between CUDA IPC mappings of the
 * peers' workspaces (no SMs taken from the GEMM), ordered by interprocess CUDA events and MPI
 * collectives on the host; same copies, same arithmetic, same bits as the NCCL transport.
 * Otherwise (or when any rank did not set it) NCCL, as without the variable. Costs of IPC:
 *   - w8a8_comm_reserve allocates twice the workspace (a second block for captured calls), and
 *     the first fused call after a reserve that replaced any rank's workspace exchanges the
 *     workspaces' IPC handles (host work, MPI, once). That exchange cannot be captured; it is not
 *     needed in a capture (below), so capturing right after a reserve is fine;
 *   - each eager fused call makes one more host collective (an MPI_Allreduce of one int) in the
 *     middle of the call, so a rank's host thread waits for its peers there;
 *   - captured calls run the NCCL schedule on the second workspace (a replay cannot order an
 *     interprocess event record in one process before the wait in another); every rank
 *     captures its call, or none: otherwise W8A8_ERROR_UNSUPPORTED_DEVICE on every rank;
 *   - w8a8_comm_destroy synchronizes the communicator's side stream and meets the peers twice.
 */
W8A8_API w8a8_status w8a8_comm_create_world(w8a8_comm **comm, w8a8_handle *handle);
/* ---- GPU communicators ------------------------------------------------------------------
 * GPU ranks run the same fused calls with the same arguments, arithmetic and agreement rules
 * as CPU ranks; every pointer is device memory of the rank's GPU, and every call is
 * asynchronous on the rank's handle stream: no device synchronization, nothing allocated,
 * capturable into CUDA graphs (see w8a8_comm_create_local for capture). Inside a process,
 * chunks move with cudaMemcpyAsync on a side stream (the copy engine: no SMs taken from the
 * GEMM) while the GEMMs of chunks already present run. GPU communicators use at most 64 ranks.
 * On a GPU communicator w8a8_comm_reserve allocates device memory of the rank's GPU; call it on
 * every rank, never while a fused call of any rank of the communicator may still run. */

/**
 * Create a communicator over an existing ncclComm_t (pass the ncclComm_t itself as
 * void *; GPU ranks, one GPU per rank, `handle` a CUDA handle of that GPU; the caller keeps
 * and destroys the ncclComm_t, after the w8a8_comm). Collective; synchronizes once, here.
 * Works under mpirun (one rank per process) and with one thread per GPU in one process:
 * when every rank turns out to be a thread of this process, the in-process copy-engine
 * transport of w8a8_comm_create_local is used; across processes the chunks move with
 * ncclSend/ncclRecv on the side stream, and each fused call checks agreement through NCCL
 * with one synchronization of the side stream (w8a8_comm_create_world avoids it: its ranks
 * agree over MPI on the host). That synchronization cannot be captured: across processes, a
 * call made while any rank's stream is capturing fails on every rank (UNSUPPORTED_DEVICE on the
 * capturing ranks, COMM_MISMATCH on the others). A rank whose arguments are bad (a NULL comm, a
 * CPU or destroyed handle) still takes part in the creation, so that every rank fails together;
 * only a NULL nccl_comm cannot. The creation's exchange (an ncclAllGather) is polled against
 * W8A8_TP_TIMEOUT_S: a rank that never joins makes the others fail with W8A8_ERROR_TIMEOUT, and
 * the ncclComm_t then has that collective pending (abort it with ncclCommAbort).
 * @return W8A8_ERROR_NOT_BUILT without CUDA or NCCL; W8A8_ERROR_UNSUPPORTED_DEVICE for a CPU
 *         handle; W8A8_ERROR_COMM when NCCL fails; W8A8_ERROR_COMM_MISMATCH where another rank
 *         failed.
 */
W8A8_API w8a8_status w8a8_comm_create_nccl(w8a8_comm **comm, w8a8_handle *handle, void *nccl_comm);

/** Opaque bootstrap id for w8a8_comm_create_nccl_id (the bytes of an ncclUniqueId). */
#define W8A8_UNIQUE_ID_BYTES 128
typedef struct w8a8_unique_id {
  char internal[W8A8_UNIQUE_ID_BYTES];
} w8a8_unique_id;
/** Make a bootstrap id on one rank; broadcast its bytes to the others by any means
 *  (MPI, torch.distributed, a file). @return W8A8_ERROR_NOT_BUILT without CUDA or NCCL. */
W8A8_API w8a8_status w8a8_comm_unique_id(w8a8_unique_id *id);
/** Create a GPU communicator from a bootstrap id: nranks ranks, this one `rank` (an NCCL
 *  communicator the w8a8_comm owns, then as w8a8_comm_create_nccl). Collective: a rank with a NULL
 *  comm or a bad handle still joins the NCCL creation (on the handle's GPU, or the current GPU where
 *  the handle is unusable) and every rank fails; a NULL id or a rank outside [0, nranks) cannot
 *  join (the peers then wait in NCCL's bootstrap).
 *  @return W8A8_ERROR_NOT_BUILT without CUDA or NCCL. */
W8A8_API w8a8_status w8a8_comm_create_nccl_id(w8a8_comm **comm, w8a8_handle *handle, const w8a8_unique_id *id,
                                              int nranks, int rank);

/**
 * In-process GPU ranks: create nranks communicators at once, comms[i] for rank i running on
 * handles[i] (CUDA handles, all different). The handles may all be on ONE GPU (emulated ranks:
 * separate buffers, the same copy and event protocol as real ranks; what single-GPU tests
 * use) or on several GPUs of this process (peer access is enabled where the GPUs allow it;
 * without it the copies are staged through the host: correct, slower), like nccl-tests -g.
 * Called once, from one thread; no NCCL involved. Each comms[i] is then driven by its own
 * thread: the fused calls are collective and block (on the host, never on the device) until
 * every rank has made the matching call, for the agreement and to order the ranks' CUDA
 * events. A rank that does not arrive within the timeout (w8a8_comm_set_timeout; W8A8_TP_TIMEOUT_S
 * at creation, default 300 s) makes the waiting ranks fail with W8A8_ERROR_TIMEOUT instead of
 * hanging, and the rank group is broken: the late rank's call fails with W8A8_ERROR_TIMEOUT too,
 * and every later call of every rank with W8A8_ERROR_BROKEN. Destroy each comms[i] with
 * w8a8_comm_destroy (any thread, after the ranks' work is done).
 * With peer access (or emulated ranks on one GPU), the eager all-gather's own-row pack kernel stores the
 * rank's scales and zero points straight into the peers' gathered buffers (no small copy before the GEMM).
 * So peer access must stay enabled, and no device be reset, while the communicators live. An application
 * that cannot promise that sets the environment variable W8A8_TP_AG_SCALES=0 before creating them: the
 * scales are then copied (captured calls copy them unless W8A8_TP_AG_SCALES=2, an experiment).
 * CUDA graphs: capture every rank's call into ONE graph: begin the capture on a stream, fork
 * each rank's handle stream from it with an event, let each rank thread make its call, join
 * the streams back and end the capture; a replay runs all ranks. Ranks whose streams are in
 * different captures (or some captured, some not) get W8A8_ERROR_UNSUPPORTED_DEVICE on every rank.
 * @return W8A8_ERROR_NOT_BUILT without CUDA; W8A8_ERROR_UNSUPPORTED_DEVICE for a CPU handle;
 *         W8A8_ERROR_INVALID_VALUE for nranks outside 1..64 or a handle given twice.
 *         comms is written only on success.
 */
W8A8_API w8a8_status w8a8_comm_create_local(w8a8_comm **comms, w8a8_handle **handles, int nranks);

/** Destroy; NULL accepted. Collective (frees the duplicated MPI communicator; IPC: two barriers, polled
 * against the timeout). A rank destroys its communicator only after EVERY rank's last fused call has
 * returned and the work it enqueued is done (synchronize each rank's stream first): on a GPU
 * communicator the peers' queued copies and kernels may still read this rank's workspace, flags and
 * events, and in-process ranks share them. A broken communicator is destroyed without meeting the
 * peers (see "Failures, deadlines and abort"); an aborted one first sends its peers the notice. */
W8A8_API w8a8_status w8a8_comm_destroy(w8a8_comm *comm);
W8A8_API w8a8_status w8a8_comm_rank(const w8a8_comm *comm, int *rank);
W8A8_API w8a8_status w8a8_comm_size(const w8a8_comm *comm, int *size);

/**
 * Size the communicator's workspace (gathered A and scales for all-gather; fp32
 * partials for reduce-scatter, which also hold W8A8_TP_PARTIALS_OUT's 16-bit ones). The
 * fused calls allocate nothing: a call that does not fit returns W8A8_ERROR_WORKSPACE on
 * each rank whose workspace is too small, naming what to reserve, and (as for any rank's
 * local failure, see "Agreement") W8A8_ERROR_COMM_MISMATCH naming that rank on the others.
 * Reserving the same bounds on every rank keeps the ranks' answers alike.
 * Local (not collective); may be called again to grow (never shrinks), not while a
 * call is running. The sizes are as this rank sees them in its own arguments:
 *   max_m: the largest M of the whole layer (all_gather: out->rows; reduce_scatter: a->rows);
 *   max_n: the largest b->cols;  max_k: the largest a->cols.
 * A reduce_scatter call also needs its own shard out->rows <= ceil(max_m / W) (true
 * for w8a8_tp_shard_rows splits; reserve a larger max_m for very uneven shards).
 * Bytes: max(max_m*max_k + 8*max_m, 4*max_n*(max_m + (W-1)*ceil(max_m/W) + 1)) + small;
 * W8A8_ERROR_INVALID_SHAPE where that passes 2^46 bytes (or each bound 2^31 - 1).
 * A reserve that grows the workspace frees the old block: CUDA graphs captured before it hold
 * its address and must be captured again (on every rank) before they are replayed.
 */
W8A8_API w8a8_status w8a8_comm_reserve(w8a8_comm *comm, int64_t max_m, int64_t max_n, int64_t max_k);
/** Bytes of workspace the communicator owns now. */
W8A8_API w8a8_status w8a8_comm_workspace_bytes(const w8a8_comm *comm, size_t *bytes);

/** The usual split of `total` rows over `size` ranks: count = total/size, plus one for
 *  ranks < total % size; offset = the rows of the ranks before. Pure arithmetic. */
W8A8_API w8a8_status w8a8_tp_shard_rows(int64_t total, int size, int rank, int64_t *offset, int64_t *count);

/** w8a8_tp_options.partials: what the reduce-scatter's partial sums are (see
 *  w8a8_scaled_mm_reduce_scatter for the exact arithmetic of each). */
#define W8A8_TP_PARTIALS_FP32 0 /* fp32 partials (the default): one rounding, after the sum */
#define W8A8_TP_PARTIALS_OUT 1  /* each rank's partial rounded to out's dtype before it travels:
                                   half the bytes for bf16/fp16 out, as vLLM and PyTorch's
                                   fused_scaled_matmul_reduce_scatter move them */

/** w8a8_tp_options.overlap: which schedule a fused call runs. Both give the same bits. */
#define W8A8_TP_OVERLAP_OFF 0  /* the collective, then the GEMM (unfused) */
#define W8A8_TP_OVERLAP_ON 1   /* the fused, overlapped schedule */
#define W8A8_TP_OVERLAP_AUTO 2 /* the default: per call, fused where the layer's M (out->rows of the
                                  all-gather, a->rows of the reduce-scatter) reaches the crossover of
                                  the communicator's transport and operation, else unfused. Every
                                  rank computes its choice and the agreement makes one for all (fused
                                  only where every rank chose it), so ranks never run different
                                  schedules. Crossovers (rows; see docs/TP.md for the measurements):
                                    copy_engine (w8a8_comm_create_local)   all-gather 1024, reduce-scatter 1024
                                    ipc                                    all-gather 2048, reduce-scatter 1024
                                    nccl                                   all-gather 1024, reduce-scatter never
                                    mpi (CPU ranks)                        all-gather  256, reduce-scatter  256
                                  The environment variable W8A8_TP_OVERLAP_MIN_M=R at creation sets R for
                                  every operation of the communicators created then (0: always fused). */

/** Options of the fused TP operations. Initialise with W8A8_TP_OPTIONS_INIT; NULL = defaults.
 *  Versioned by struct_size: members beyond the struct_size a caller passes take their defaults,
 *  so a caller compiled against an older header keeps the older behaviour. */
typedef struct w8a8_tp_options {
  size_t struct_size; /* sizeof(w8a8_tp_options) */
  int overlap;        /* W8A8_TP_OVERLAP_OFF, _ON or _AUTO (the default); any other value is
                         W8A8_ERROR_INVALID_VALUE. Every rank must pass the same value (with AUTO the
                         choice is agreed per call). Callers built against headers whose
                         W8A8_TP_OPTIONS_INIT set 1 keep the fused schedule. */
  int reserved0;      /* ignored. The first version of this struct ended after `overlap`, and on LP64
                         its size (16) included these 4 padding bytes, which an old caller may leave
                         uninitialised: `partials` starts after them, so that such a caller's
                         struct_size (16) does not cover it and it gets the default. */
  int partials;       /* W8A8_TP_PARTIALS_FP32 (default) or W8A8_TP_PARTIALS_OUT: the reduce-scatter's
                         partials. Every rank must pass the same value. Any other value is
                         W8A8_ERROR_INVALID_VALUE. The all-gather checks the value and otherwise
                         ignores it (ranks may differ there). */
} w8a8_tp_options;
#define W8A8_TP_OPTIONS_INIT {sizeof(w8a8_tp_options), W8A8_TP_OVERLAP_AUTO, 0, W8A8_TP_PARTIALS_FP32}

/**
 * Optional outputs of w8a8_all_gather_scaled_mm: the gathered activations, for reuse
 * by another GEMM on the same input (e.g. gate and up as separate calls). A member
 * whose data is NULL is not written. M = the whole layer's rows (out->rows).
 *   a:       [M, K] row-major, a's dtype, ld >= K.
 *   scale_a: fp32, len M: each row's scale (a per-tensor scale_a of rank r is repeated
 *            over rank r's rows), ready for w8a8_scaled_mm as a per-token scale.
 *   azp:     int32, len M, the same for the zero point (only with zp->azp.data != NULL).
 */
typedef struct w8a8_gathered {
  w8a8_matrix a;
  w8a8_vector scale_a;
  w8a8_vector azp;
} w8a8_gathered;

/**
 * Column-parallel linear: out = all_gather(A) . B, fused. Collective.
 *
 * @param a        this rank's rows, [M_r, K] row-major int8 or fp8_e4m3 (M_r may be 0).
 * @param b        this rank's weight shard, [K, N_r] column-major, a's dtype.
 * @param scale_a  fp32, len 1 or M_r: this rank's activation scale(s). They travel with
 *                 the rows: rows from rank j are scaled by rank j's scale_a (per-tensor
 *                 scales may differ between ranks).
 * @param scale_b  fp32, len 1 or N_r.  @param bias NULL or N_r elements of out's dtype.
 * @param zp       NULL or int8 zero point as in w8a8_scaled_mm. zp->azp (len 1 or M_r)
 *                 travels with the rows like scale_a; zp->azp_adj (len N_r) is this rank's
 *                 (colsum of its B shard). With zp->azp.data == NULL (premultiplied
 *                 azp_adj) the one zero point applies to every rank's rows.
 * @param out      [M, N_r] row-major bf16/fp16/fp32, M = sum over ranks of M_r.
 * @param gathered NULL, or which gathered inputs to return (see w8a8_gathered).
 * @param opts     NULL (the defaults: overlap W8A8_TP_OVERLAP_AUTO) or options.
 *
 * Arithmetic: rows offset_j .. offset_j+M_j-1 of out are exactly w8a8_scaled_mm of rank
 * j's rows with rank j's scales and zero point and this rank's B, scale_b, bias, azp_adj
 * (same epilogue, same rounding). Every overlap setting gives identical bits.
 * Schedule (CPU/MPI): own rows are copied into the gathered workspace and sent to every
 * peer while the GEMM of the own rows runs; then each peer's rows are multiplied as they
 * arrive. Unfused: MPI_Allgatherv, then the same GEMMs.
 */
W8A8_API w8a8_status w8a8_all_gather_scaled_mm(w8a8_comm *comm, const w8a8_matrix *a, const w8a8_matrix *b,
                                               const w8a8_vector *scale_a, const w8a8_vector *scale_b,
                                               const w8a8_vector *bias, const w8a8_zero_point *zp,
                                               const w8a8_matrix *out, const w8a8_gathered *gathered,
                                               const w8a8_tp_options *opts);

/**
 * Row-parallel linear: out_r = rows of rank r of sum_j (A_j . B_j), fused. Collective.
 *
 * @param a       this rank's K shard of all rows, [M, K_r] row-major int8/fp8.
 * @param b       [K_r, N] column-major, a's dtype.
 * @param scale_a fp32, len 1 or M (this rank's scales of its K shard; they stay here).
 * @param scale_b fp32, len 1 or N.  @param zp NULL or this rank's zero point (azp len 1 or M,
 *                azp_adj len N = colsum of this rank's B shard).
 * @param bias    NULL or N elements of out's dtype, added once (see below). Pass the same
 *                bias on every rank; each rank adds its own argument to its own rows.
 * @param out     [M_r, N] row-major bf16/fp16/fp32: this rank's rows of the sum; the ranks'
 *                out->rows must add up to M (uneven shards allowed).
 *
 * Arithmetic (fixed, identical for overlap on and off and on every rank count):
 *   p_j[m,n] = sb_j[n] * (sa_j[m] * v_j[m,n])   fp32, rank j's partial: w8a8_scaled_mm's
 *              epilogue without bias, v_j the rank's accumulator (zero point applied);
 *   s = p_0; s = s + p_1; ...; s = s + p_{W-1}    fp32 additions in rank order (a sum, never
 *              an average);
 *   if bias: s = s + (float)bias[n];  out = s rounded once to out's dtype (RNE).
 * (With W = 1 and a bias this differs from w8a8_scaled_mm, which fuses sb*t + bias into one
 * fmaf: here the bias is added after the reduction.)
 * That is opts->partials = W8A8_TP_PARTIALS_FP32 (the default). With W8A8_TP_PARTIALS_OUT each
 * partial is first rounded to out's dtype, then the same sum:
 *   q_j[m,n] = (float)(p_j[m,n] rounded to out's dtype, RNE)   i.e. exactly the element
 *              w8a8_scaled_mm writes for rank j's operands with no bias and this out dtype;
 *   s = q_0; s = s + q_1; ...; s = s + q_{W-1}    fp32 additions in rank order;
 *   if bias: s = s + (float)bias[n];  out = s rounded once to out's dtype (RNE).
 * For bf16/fp16 out that is W+1 roundings instead of one, for half the bytes moved between
 * GPUs: the partials vLLM and PyTorch's fused_scaled_matmul_reduce_scatter move (they then sum
 * in an order and precision of their own; here the sum stays fp32, in rank order). With an
 * fp32 out both modes are the same. Overlap on and off still give the same bits in either mode.
 * Schedule (CPU/MPI): the partial rows destined for each peer are computed and sent
 * (peers r+1, r+2, ... in turn) while the next ones are computed, own rows last, then
 * the sum. Unfused: all partials, MPI_Alltoallv, the same sum (MPI_Reduce_scatter's
 * summation order is unspecified, so it is not used).
 */
W8A8_API w8a8_status w8a8_scaled_mm_reduce_scatter(w8a8_comm *comm, const w8a8_matrix *a, const w8a8_matrix *b,
                                                   const w8a8_vector *scale_a, const w8a8_vector *scale_b,
                                                   const w8a8_vector *bias, const w8a8_zero_point *zp,
                                                   const w8a8_matrix *out, const w8a8_tp_options *opts);

/**
 * The fused calls with block scales (w8a8_scaled_mm_blockwise's: fp8_e4m3 operands, no zero point). Collective,
 * with the same agreement, options and schedules as the calls above; every rank makes the same kind of call (a
 * rank calling the block-scaled form while another calls the plain one is W8A8_ERROR_COMM_MISMATCH on every rank).
 *
 * w8a8_all_gather_scaled_mm_blockwise: a [M_r, K] this rank's rows; scale_a fp32 [M_r, ceil(K/128)] their group
 *   scales, which travel with the rows; b [K, N_r] this rank's weight shard and scale_b fp32
 *   [ceil(N_r/128), ceil(K/128)] its block scales; out [M, N_r]. Rows offset_j .. of out are exactly
 *   w8a8_scaled_mm_blockwise of rank j's rows and scales with this rank's b, scale_b and bias.
 * w8a8_scaled_mm_reduce_scatter_blockwise: a [M, K_r] this rank's K shard of all rows, scale_a fp32
 *   [M, ceil(K_r/128)], b [K_r, N], scale_b fp32 [ceil(N/128), ceil(K_r/128)]: each rank's K shard is blocks of
 *   its own (shards of a multiple of 128 keep a checkpoint's blocks). Rank j's partial is
 *   w8a8_scaled_mm_blockwise of its shard in fp32 without bias; the partials, sum, bias and rounding are then
 *   w8a8_scaled_mm_reduce_scatter's (opts->partials included).
 * Scale matrices: row- or column-major, any ld, not overlapping out. Fused and unfused give the same bits.
 * Communicators: MPI (CPU ranks) and every GPU transport. On GPUs the all-gather runs one GEMM launch per source
 *   rank's rows (the block-scaled kernel cannot wait for rows still arriving), each the block-scaled GEMM of those
 *   rows packed at lda = K: within the header's bound of the formula, and the same bits on every rank, fused or
 *   unfused.
 */
W8A8_API w8a8_status w8a8_all_gather_scaled_mm_blockwise(w8a8_comm *comm, const w8a8_matrix *a, const w8a8_matrix *b,
                                                         const w8a8_matrix *scale_a, const w8a8_matrix *scale_b,
                                                         const w8a8_vector *bias, const w8a8_matrix *out,
                                                         const w8a8_tp_options *opts);
W8A8_API w8a8_status w8a8_scaled_mm_reduce_scatter_blockwise(w8a8_comm *comm, const w8a8_matrix *a,
                                                             const w8a8_matrix *b, const w8a8_matrix *scale_a,
                                                             const w8a8_matrix *scale_b, const w8a8_vector *bias,
                                                             const w8a8_matrix *out, const w8a8_tp_options *opts);

/*
 * Agreement. Each fused call first checks its own arguments, then one small exchange (an
 * MPI_Iallgather of a fixed-size signature, or the GPU transport's equivalent) tells every rank
 * what the others passed, whether their checks passed, and which call of the communicator each
 * is making. Every rank then takes the same decision from the same table:
 *   - ranks at different calls of the communicator (each rank numbers its fused calls on it,
 *     counting every call, failed ones too): a rank skipped or repeated a call, or a call
 *     failed on some ranks before its exchange completed. W8A8_ERROR_COMM_MISMATCH on every
 *     rank, naming two ranks' call numbers, and the communicator is broken (see below);
 *   - ranks that made different numbers of fused calls with an invalid communicator (NULL,
 *     destroyed, or not a communicator) just before this call (on the calling thread, since its
 *     previous fused call on any communicator): such a call reaches no communicator and is
 *     counted nowhere else, so this is what catches a rank that passed NULL for a call its peers
 *     made (its next call would pair with the peers' previous one). W8A8_ERROR_COMM_MISMATCH on
 *     every rank, broken. Best effort: the count is charged to the thread's next call, so a skip
 *     made on another thread, or followed by a call on another communicator, is charged there;
 *   - a rank whose own checks failed returns its own status and message; the others
 *     return W8A8_ERROR_COMM_MISMATCH naming that rank and its status;
 *   - ranks that disagree on the operation, K (all-gather) or N (reduce-scatter), the
 *     input or output dtype, bias presence, zero-point kind (none / premultiplied / azp),
 *     overlap, partials (reduce-scatter), or the layer's M (out->rows / a->rows):
 *     W8A8_ERROR_COMM_MISMATCH on every rank, naming the field and two ranks' values. Not
 *     compared: the shard sizes (uneven shards), N in all-gather and K in reduce-scatter
 *     (local to each rank's weight shard), partials in the all-gather (ignored there), and
 *     per-tensor vs per-token scales (they are local, or travel with their rows);
 *   - shards that do not add up to M: W8A8_ERROR_INVALID_SHAPE on every rank.
 * Nothing is communicated or written before this check passes, and the failures of the last
 * three kinds leave the communicator usable: every rank failed the same call.
 * A call with an invalid communicator returns at once (W8A8_ERROR_INVALID_COMM): the rank
 * cannot reach its peers, who wait for its contribution until their timeout.
 *
 * Failures, deadlines and abort.
 * Broken. A failure after which the ranks may disagree on what happened breaks the
 * communicator: an MPI, NCCL or CUDA error inside the exchange or the schedule, a timeout,
 * an abort, ranks out of step (above). The failing call's out and gathered are undefined;
 * every later fused call of this rank returns W8A8_ERROR_BROKEN at once, naming the first
 * failure (W8A8_ERROR_ABORTED on a rank that aborted it), and communicates nothing. The peers
 * learn of it at their next wait on the communicator and fail too, instead of waiting for this
 * rank: with W8A8_ERROR_TIMEOUT where the break was a timeout (the same collective did not
 * complete in time), else W8A8_ERROR_BROKEN. Over MPI (CPU ranks, create_world's GPU ranks) the
 * breaking rank sends each peer a small message that every wait polls for; in-process ranks
 * share the group's state. (A bare ncclComm_t across processes has no such channel: its peers
 * fail at their timeout.) A broken communicator can only be destroyed (w8a8_comm_reserve
 * refuses it); w8a8_comm_destroy of one waits for no peer, and leaves allocated what MPI or the
 * device may still use: the MPI duplicate, buffers of collectives that never completed (a few
 * KB, or the workspace where a message of the schedule was left in flight), and a broken IPC
 * communicator's device memory and events.
 * Deadlines. Every communicator has a timeout (W8A8_TP_TIMEOUT_S at creation, in seconds,
 * fractions allowed, 0 = none; 300 s where it is unset or not a number >= 0). A fused call whose
 * host-side part has not completed within the timeout of its start returns W8A8_ERROR_TIMEOUT
 * and breaks the communicator. MPI: every wait of the call (the exchange, the schedule's messages) polls
 * MPI_Test* against that deadline, never blocking inside MPI, so a dead or stuck peer costs
 * at most the timeout (the test suite kills a rank mid-sequence under mpirun --enable-recovery:
 * the survivors return W8A8_ERROR_TIMEOUT). GPU ranks: the host waits of a call are bounded the
 * same way (in-process group: its barriers; IPC and create_world: the MPI collectives; a bare
 * ncclComm_t: the synchronization of the agreement's ncclAllGather, polled with
 * cudaStreamQuery). Work already enqueued on a stream is the stream's: a peer that dies after
 * a call's exchange leaves NCCL kernels or event waits pending on the device, which no host
 * deadline ends; w8a8_comm_destroy of a broken communicator calls ncclCommAbort (not
 * ncclCommDestroy) on an ncclComm_t w8a8 owns (create_nccl_id, create_world), and the caller
 * aborts its own (w8a8_comm_create_nccl). Creation: see each w8a8_comm_create_*.
 */

/** Set the communicator's timeout: seconds >= 0 (fractions allowed; 0 = none), at most 1e9.
 *  Local (this rank only; give every rank the same value). Takes effect from the next fused
 *  call (a call in progress keeps the deadline it started with). Thread-safe: any thread, any
 *  time (an atomic store; no MPI call). @return W8A8_ERROR_INVALID_VALUE for a negative, NaN or
 *  too large value. */
W8A8_API w8a8_status w8a8_comm_set_timeout(w8a8_comm *comm, double seconds);
/** The communicator's timeout in seconds (0 = none). Thread-safe like w8a8_comm_set_timeout. */
W8A8_API w8a8_status w8a8_comm_get_timeout(const w8a8_comm *comm, double *seconds);
/**
 * Abort the communicator on this rank: every fused call of it that is waiting (on any thread)
 * returns W8A8_ERROR_ABORTED within a few milliseconds, and every later one returns
 * W8A8_ERROR_ABORTED at once; the communicator is broken. The peers fail with
 * W8A8_ERROR_BROKEN at their next wait (as for any break, above): at once for in-process ranks;
 * over MPI once this rank's next or current fused call, or its w8a8_comm_destroy, has sent
 * them the notice (sending is MPI, which only the thread making the calls does).
 * Thread-safe: callable from any thread at any time, also while a call of the communicator
 * runs on another thread (an atomic flag, plus the group's mutex for in-process ranks; no MPI,
 * NCCL or CUDA call, so no MPI thread level is needed), but not concurrently with
 * w8a8_comm_destroy of the same communicator. Idempotent. Destroy the communicator afterwards.
 */
W8A8_API w8a8_status w8a8_comm_abort(w8a8_comm *comm);
/**
 * The communicator's asynchronous error: W8A8_SUCCESS while it is healthy, else the status that
 * broke it (W8A8_ERROR_TIMEOUT, W8A8_ERROR_ABORTED, W8A8_ERROR_COMM, W8A8_ERROR_DEVICE,
 * W8A8_ERROR_COMM_MISMATCH, or W8A8_ERROR_BROKEN when a peer broke it), with w8a8_last_error()
 * naming the failure and the rank where it happened. What this rank has learnt: a peer's
 * failure over MPI is learnt at this rank's next wait on the communicator (no network is
 * polled here); in-process ranks see the group's state at once; on an NCCL communicator
 * ncclCommGetAsyncError is asked too. Thread-safe: any thread, any time (no MPI call), but not
 * concurrently with w8a8_comm_destroy. @return W8A8_ERROR_INVALID_COMM for an invalid comm.
 */
W8A8_API w8a8_status w8a8_comm_get_async_error(const w8a8_comm *comm);

/* ------------------------------------------------------------------------ */
/* Tuning tables (Hopper fast path; `w8a8 tune`)                             */
/* ------------------------------------------------------------------------ */

/**
 * Load a tuning table written by `w8a8 tune` into a CUDA handle. For each problem the
 * sm_90a path then takes the table's configuration and split-K factor where an entry
 * applies — the entry of the problem's dtype, N and K whose M bucket holds M, else the
 * nearest M bucket of that dtype, N and K whose configuration can take M — and its
 * built-in heuristic elsewhere. Results are the same bits either way (int8) or within the
 * same error bound (fp8): a table changes speed, never arithmetic. The format is
 * documented in src/core/tune.h and printed by `w8a8 tune --help`.
 *
 * A handle also loads the file named by the environment variable W8A8_TUNE_FILE when it is
 * created (CUDA handles); a file that fails to load there is ignored with one line on
 * stderr, and the handle keeps the built-in heuristic.
 *
 * Size limits: at most 100,000 entries, 8 MiB and 1023 characters a line (a larger table is
 * W8A8_ERROR_INVALID_FILE). Loading sorts the entries once, O(n log n) (under 0.1 s for a full
 * table), and a lookup is a binary search.
 *
 * @param path the table's file, or NULL to drop the handle's table (back to the heuristic).
 * @return W8A8_ERROR_INVALID_FILE (cannot be read, or malformed: the message names the line),
 *         W8A8_ERROR_STALE_TUNING (measured with another library version, or on a device with
 *         another name, compute capability or SM count), W8A8_ERROR_UNSUPPORTED_DEVICE (a CPU
 *         handle). On failure the handle keeps the table it had.
 */
W8A8_API w8a8_status w8a8_load_tuning(w8a8_handle *handle, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* W8A8_H */
