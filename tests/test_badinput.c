/* test_badinput.c — every public call refuses bad input with its own status, a message
 * that names the argument, and without writing anything the caller owns.
 *
 * All buffers of a case live in one arena. Before each call the arena holds valid
 * inputs and poisoned outputs; after a failing call every byte of it, and every
 * descriptor, must be exactly as before. The cases are one table (BAD_CASES): a name,
 * the call, the expected status, a substring the last error must contain, and the
 * mutation of an otherwise valid call. The valid calls themselves are checked first
 * (they succeed and write their outputs), so a case cannot pass because the baseline
 * was already broken. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define ARENA (64 * 1024)
#define POISON 0xA5
/* Arena regions (bytes); each 1 KiB, 256-aligned. */
enum {
  OFF_A = 0, OFF_B = 1024, OFF_OUT = 2048, OFF_SA = 3072, OFF_SB = 4096, OFF_BIAS = 5120, OFF_AZP = 6144,
  OFF_ADJ = 7168, OFF_X = 8192, OFF_Q = 9216, OFF_SCALE = 10240, OFF_QAZP = 11264, OFF_UB = 12288,
  OFF_CADJ = 13312, OFF_HSLOT = 14336, OFF_INFO = 15360, OFF_FAKE = 16384, OFF_SPARE = 32768
};
enum { M_ = 4, K_ = 8, N_ = 6 };

typedef enum op {
  OP_MM, OP_QUANT, OP_COLSUM, OP_CREATE, OP_DESTROY, OP_SET_STREAM, OP_GET_STREAM, OP_SET_KERNEL, OP_GET_INFO,
  OP_SET_THREADS, OP_SILU, OP_CREATE_BEST
} op;

static const char *op_fn[] = {"w8a8_scaled_mm", "w8a8_quantize", "w8a8_colsum", "w8a8_create", "w8a8_destroy",
                              "w8a8_set_stream", "w8a8_get_stream", "w8a8_set_kernel", "w8a8_get_info",
                              "w8a8_set_num_threads", "w8a8_silu_mul_quantize", "w8a8_create_best"};

typedef struct ctx {
  uint8_t *arena;
  w8a8_handle *h, *live, *dead, *fake;
  /* scaled_mm */
  w8a8_matrix a, b, out;
  w8a8_vector sa, sb, bias;
  w8a8_zero_point zp;
  const w8a8_matrix *pa, *pb, *pout;
  const w8a8_vector *psa, *psb, *pbias;
  const w8a8_zero_point *pzp;
  /* quantize */
  w8a8_matrix x, q;
  int mode;
  w8a8_vector scale, azp;
  const w8a8_matrix *px, *pq;
  const w8a8_vector *pscale, *pazp;
  const float *ub;
  /* colsum */
  w8a8_matrix cb;
  w8a8_vector adj;
  const w8a8_matrix *pcb;
  const w8a8_vector *padj;
  /* handle calls */
  w8a8_handle **phandle;
  int kind, index, kernel, threads;
  void *stream;
  void **pstream;
  w8a8_handle_info *pinfo;
} ctx;

static uint32_t rng_state = 12345u;
static uint32_t rnd(void) {
  rng_state = rng_state * 1664525u + 1013904223u;
  return rng_state >> 8;
}

static void *at(ctx *c, size_t off) { return c->arena + off; }
static float *fat(ctx *c, size_t off) { return (float *)(c->arena + off); }

/* A valid call of every kind, outputs poisoned. */
static void ctx_reset(ctx *c) {
  uint8_t *ar = c->arena;
  memset(ar, POISON, ARENA);
  for (int i = 0; i < M_ * K_; i++) ((int8_t *)at(c, OFF_A))[i] = (int8_t)(rnd() % 256);
  for (int i = 0; i < K_ * N_; i++) ((int8_t *)at(c, OFF_B))[i] = (int8_t)(rnd() % 256);
  for (int i = 0; i < M_; i++) fat(c, OFF_SA)[i] = 0.25f + 0.125f * (float)i;
  for (int i = 0; i < N_; i++) fat(c, OFF_SB)[i] = 0.5f + 0.0625f * (float)i;
  for (int i = 0; i < N_; i++) fat(c, OFF_BIAS)[i] = (float)i - 2.5f;
  for (int i = 0; i < M_; i++) ((int32_t *)at(c, OFF_AZP))[i] = 3 - i;
  for (int i = 0; i < N_; i++) ((int32_t *)at(c, OFF_ADJ))[i] = 100 * i - 250;
  for (int i = 0; i < M_ * K_; i++) fat(c, OFF_X)[i] = (float)((int)(rnd() % 2001) - 1000) / 100.0f;
  fat(c, OFF_UB)[0] = 4.0f;
  uint32_t magic = 0x38613877u; /* a forged handle: right magic, never created */
  memcpy(at(c, OFF_FAKE), &magic, 4);

  c->h = c->live;
  c->fake = (w8a8_handle *)at(c, OFF_FAKE);
  c->a = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M_, K_, K_, at(c, OFF_A));
  c->b = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K_, N_, K_, at(c, OFF_B));
  c->out = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M_, N_, N_, at(c, OFF_OUT));
  c->sa = w8a8_vector_make(W8A8_DTYPE_FP32, M_, at(c, OFF_SA));
  c->sb = w8a8_vector_make(W8A8_DTYPE_FP32, N_, at(c, OFF_SB));
  c->bias = w8a8_vector_make(W8A8_DTYPE_FP32, N_, at(c, OFF_BIAS));
  c->zp.azp = w8a8_vector_make(W8A8_DTYPE_INT32, M_, at(c, OFF_AZP));
  c->zp.azp_adj = w8a8_vector_make(W8A8_DTYPE_INT32, N_, at(c, OFF_ADJ));
  c->pa = &c->a;
  c->pb = &c->b;
  c->pout = &c->out;
  c->psa = &c->sa;
  c->psb = &c->sb;
  c->pbias = NULL;
  c->pzp = NULL;

  c->x = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M_, K_, K_, at(c, OFF_X));
  c->q = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M_, K_, K_, at(c, OFF_Q));
  c->mode = W8A8_QUANT_DYNAMIC_PER_TOKEN;
  c->scale = w8a8_vector_make(W8A8_DTYPE_FP32, M_, at(c, OFF_SCALE));
  c->azp = w8a8_vector_make(W8A8_DTYPE_INT32, M_, at(c, OFF_QAZP));
  c->px = &c->x;
  c->pq = &c->q;
  c->pscale = &c->scale;
  c->pazp = NULL;
  c->ub = NULL;

  c->cb = c->b;
  c->adj = w8a8_vector_make(W8A8_DTYPE_INT32, N_, at(c, OFF_CADJ));
  c->pcb = &c->cb;
  c->padj = &c->adj;

  c->phandle = (w8a8_handle **)at(c, OFF_HSLOT);
  c->kind = W8A8_DEVICE_CPU;
  c->index = 0;
  c->kernel = W8A8_KERNEL_AUTO;
  c->threads = 0;
  c->stream = NULL;
  c->pstream = (void **)at(c, OFF_HSLOT);
  c->pinfo = (w8a8_handle_info *)at(c, OFF_INFO);
}

/* w8a8_silu_mul_quantize with x [0, 2] (ld 2) and an empty q of `cols` columns (ld = cols): the shape check
 * must compare q->cols with x->cols / 2 without computing q->cols * 2, which overflows int64 here. */
static void silu_huge_q(ctx *c, int64_t cols) {
  c->x.rows = c->q.rows = 0;
  c->x.cols = c->x.ld = 2;
  c->q.cols = c->q.ld = cols;
  c->scale.len = 0;
}

/* Static quantization: scale (len 1) is an input holding s. */
static void set_static(ctx *c, float s) {
  c->mode = W8A8_QUANT_STATIC_PER_TENSOR;
  c->scale.len = 1;
  fat(c, OFF_SCALE)[0] = s;
}

static w8a8_status call(ctx *c, op o) {
  switch (o) {
    case OP_MM: return w8a8_scaled_mm(c->h, c->pa, c->pb, c->psa, c->psb, c->pbias, c->pzp, c->pout);
    case OP_QUANT: return w8a8_quantize(c->h, c->px, c->pq, (w8a8_quant_mode)c->mode, c->pscale, c->pazp, c->ub);
    case OP_COLSUM: return w8a8_colsum(c->h, c->pcb, c->padj);
    case OP_CREATE: return w8a8_create(c->phandle, (w8a8_device_kind)c->kind, c->index);
    case OP_DESTROY: return w8a8_destroy(c->h);
    case OP_SET_STREAM: return w8a8_set_stream(c->h, c->stream);
    case OP_GET_STREAM: return w8a8_get_stream(c->h, c->pstream);
    case OP_SET_KERNEL: return w8a8_set_kernel(c->h, (w8a8_kernel)c->kernel);
    case OP_GET_INFO: return w8a8_get_info(c->h, c->pinfo);
    case OP_SET_THREADS: return w8a8_set_num_threads(c->h, c->threads);
    case OP_SILU:
      return w8a8_silu_mul_quantize(c->h, c->px, c->pq, (w8a8_quant_mode)c->mode, c->pscale, c->pazp, c->ub);
    case OP_CREATE_BEST: return w8a8_create_best(c->phandle);
  }
  return W8A8_ERROR_INTERNAL;
}

#define BIG (INT64_C(1) << 40)
#define SUB_LD 100 /* row stride of the submatrix-overlap cases */

/* X(name, call, expected status (without W8A8_), substring of w8a8_last_error(), mutation...) */
#define BAD_CASES(X)                                                                                         \
  /* ---- handles (the registry: never dereferenced when unknown) ---- */                                   \
  X(mm_handle_null, OP_MM, ERROR_INVALID_HANDLE, "handle is NULL", c->h = NULL)                              \
  X(mm_handle_destroyed, OP_MM, ERROR_INVALID_HANDLE, "not a live w8a8 handle", c->h = c->dead)              \
  X(mm_handle_garbage, OP_MM, ERROR_INVALID_HANDLE, "not a live w8a8 handle", c->h = (w8a8_handle *)(uintptr_t)0x10) \
  X(mm_handle_forged_magic, OP_MM, ERROR_INVALID_HANDLE, "not a live w8a8 handle", c->h = c->fake)           \
  X(quant_handle_destroyed, OP_QUANT, ERROR_INVALID_HANDLE, "not a live w8a8 handle", c->h = c->dead)        \
  X(colsum_handle_garbage, OP_COLSUM, ERROR_INVALID_HANDLE, "not a live w8a8 handle", c->h = c->fake)        \
  X(destroy_destroyed, OP_DESTROY, ERROR_INVALID_HANDLE, "not a live w8a8 handle", c->h = c->dead)           \
  X(destroy_garbage, OP_DESTROY, ERROR_INVALID_HANDLE, "not a live w8a8 handle", c->h = c->fake)             \
  X(create_handle_null, OP_CREATE, ERROR_NULL_POINTER, "handle is NULL", c->phandle = NULL)                  \
  X(create_best_handle_null, OP_CREATE_BEST, ERROR_NULL_POINTER, "w8a8_create_best: handle is NULL",         \
    c->phandle = NULL)                                                                                       \
  X(create_kind_invalid, OP_CREATE, ERROR_INVALID_VALUE, "kind is 5", c->kind = 5)                           \
  X(create_cpu_index_1, OP_CREATE, ERROR_INVALID_VALUE, "device_index is 1", c->index = 1)                   \
  X(create_cuda_index_negative, OP_CREATE, ERROR_INVALID_VALUE, "device_index is -1",                        \
    c->kind = W8A8_DEVICE_CUDA; c->index = -1)                                                               \
  X(set_stream_cpu_nonnull, OP_SET_STREAM, ERROR_INVALID_VALUE, "cuda_stream", c->stream = (void *)0x1234)   \
  X(set_stream_destroyed, OP_SET_STREAM, ERROR_INVALID_HANDLE, "not a live", c->h = c->dead)                 \
  X(get_stream_null, OP_GET_STREAM, ERROR_NULL_POINTER, "cuda_stream is NULL", c->pstream = NULL)            \
  X(get_stream_garbage_handle, OP_GET_STREAM, ERROR_INVALID_HANDLE, "not a live", c->h = c->fake)            \
  X(set_kernel_invalid, OP_SET_KERNEL, ERROR_INVALID_VALUE, "kernel is 7", c->kernel = 7)                    \
  X(set_kernel_negative, OP_SET_KERNEL, ERROR_INVALID_VALUE, "kernel is -1", c->kernel = -1)                 \
  X(set_kernel_sm90_on_cpu, OP_SET_KERNEL, ERROR_UNSUPPORTED_DEVICE, "W8A8_KERNEL_SM90", c->kernel = W8A8_KERNEL_SM90) \
  X(get_info_null, OP_GET_INFO, ERROR_NULL_POINTER, "info is NULL", c->pinfo = NULL)                         \
  X(get_info_destroyed, OP_GET_INFO, ERROR_INVALID_HANDLE, "not a live", c->h = c->dead)                     \
  X(set_threads_negative, OP_SET_THREADS, ERROR_INVALID_VALUE, "num_threads is -1", c->threads = -1)         \
  /* ---- scaled_mm: NULL descriptors and data ---- */                                                      \
  X(mm_a_null, OP_MM, ERROR_NULL_POINTER, "a is NULL", c->pa = NULL)                                         \
  X(mm_b_null, OP_MM, ERROR_NULL_POINTER, "b is NULL", c->pb = NULL)                                         \
  X(mm_out_null, OP_MM, ERROR_NULL_POINTER, "out is NULL", c->pout = NULL)                                   \
  X(mm_scale_a_null, OP_MM, ERROR_NULL_POINTER, "scale_a is NULL", c->psa = NULL)                            \
  X(mm_scale_b_null, OP_MM, ERROR_NULL_POINTER, "scale_b is NULL", c->psb = NULL)                            \
  X(mm_a_data_null, OP_MM, ERROR_NULL_POINTER, "a->data is NULL", c->a.data = NULL)                          \
  X(mm_out_data_null, OP_MM, ERROR_NULL_POINTER, "out->data is NULL", c->out.data = NULL)                    \
  X(mm_scale_b_data_null, OP_MM, ERROR_NULL_POINTER, "scale_b->data is NULL", c->sb.data = NULL)             \
  X(mm_bias_data_null, OP_MM, ERROR_NULL_POINTER, "bias->data is NULL", c->pbias = &c->bias; c->bias.data = NULL) \
  X(mm_zp_adj_data_null, OP_MM, ERROR_NULL_POINTER, "zp->azp_adj.data is NULL",                              \
    c->pzp = &c->zp; c->zp.azp_adj.data = NULL)                                                              \
  /* ---- sizes and strides ---- */                                                                         \
  X(mm_a_rows_negative, OP_MM, ERROR_INVALID_SHAPE, "a is -1 x 8", c->a.rows = -1)                           \
  X(mm_b_cols_negative, OP_MM, ERROR_INVALID_SHAPE, "b is 8 x -3", c->b.cols = -3)                           \
  X(mm_a_span_overflows, OP_MM, ERROR_INVALID_SHAPE, "a (", c->a.rows = BIG; c->a.cols = BIG; c->a.ld = BIG) \
  X(mm_a_ld_int64_max, OP_MM, ERROR_INVALID_SHAPE, "spans more than 2^62", c->a.ld = INT64_MAX)              \
  X(mm_a_data_wraps, OP_MM, ERROR_INVALID_SHAPE, "wraps around", c->a.data = (void *)(UINTPTR_MAX - 15))     \
  X(mm_scale_a_data_wraps, OP_MM, ERROR_INVALID_SCALE, "scale_a->data + 16 bytes wraps",                     \
    c->sa.data = (void *)(UINTPTR_MAX - 11))                                                                 \
  X(mm_M_2_31, OP_MM, ERROR_INVALID_SHAPE, "each must be < 2^31",                                            \
    c->a.rows = INT64_C(1) << 31; c->out.rows = INT64_C(1) << 31)                                            \
  X(mm_int8_K_131072, OP_MM, ERROR_INVALID_SHAPE, "K = 131072",                                              \
    c->a.cols = c->a.ld = c->b.rows = c->b.ld = 131072)                                                      \
  X(mm_a_ld_lt_cols, OP_MM, ERROR_INVALID_STRIDE, "a->ld is 7", c->a.ld = 7)                                 \
  X(mm_b_ld_lt_K, OP_MM, ERROR_INVALID_STRIDE, "b->ld is 7", c->b.ld = 7)                                    \
  X(mm_out_ld_lt_N, OP_MM, ERROR_INVALID_STRIDE, "out->ld is 5", c->out.ld = 5)                              \
  X(mm_out_ld_negative, OP_MM, ERROR_INVALID_STRIDE, "out->ld is -6", c->out.ld = -6)                        \
  X(mm_K_mismatch, OP_MM, ERROR_INVALID_SHAPE, "b->rows must be K", c->b.rows = 7)                           \
  X(mm_out_shape_mismatch, OP_MM, ERROR_INVALID_SHAPE, "out is 3 x 6", c->out.rows = 3)                      \
  /* ---- dtypes and layouts ---- */                                                                        \
  X(mm_int8_x_fp8, OP_MM, ERROR_INVALID_DTYPE, "b is fp8_e4m3", c->b.dtype = W8A8_DTYPE_FP8_E4M3)            \
  X(mm_fp8_x_int8, OP_MM, ERROR_INVALID_DTYPE, "b is int8", c->a.dtype = W8A8_DTYPE_FP8_E4M3)                \
  X(mm_out_int32, OP_MM, ERROR_INVALID_DTYPE, "out->dtype is int32", c->out.dtype = W8A8_DTYPE_INT32)        \
  X(mm_out_fp8, OP_MM, ERROR_INVALID_DTYPE, "out->dtype is fp8_e4m3", c->out.dtype = W8A8_DTYPE_FP8_E4M3)    \
  X(mm_out_int8, OP_MM, ERROR_INVALID_DTYPE, "out->dtype is int8", c->out.dtype = W8A8_DTYPE_INT8)           \
  X(mm_a_bf16, OP_MM, ERROR_INVALID_DTYPE, "a->dtype is bf16", c->a.dtype = W8A8_DTYPE_BF16)                 \
  X(mm_a_dtype_zero, OP_MM, ERROR_INVALID_DTYPE, "a->dtype is 0", c->a.dtype = W8A8_DTYPE_INVALID)           \
  X(mm_out_dtype_garbage, OP_MM, ERROR_INVALID_DTYPE, "out->dtype is 77", c->out.dtype = (w8a8_dtype)77)     \
  X(mm_b_layout_garbage, OP_MM, ERROR_INVALID_LAYOUT, "b->layout is 9", c->b.layout = (w8a8_layout)9)        \
  X(mm_b_row_major, OP_MM, ERROR_INVALID_LAYOUT, "b must be column-major",                                   \
    c->b.layout = W8A8_ROW_MAJOR; c->b.ld = N_)                                                              \
  X(mm_a_col_major, OP_MM, ERROR_INVALID_LAYOUT, "a must be row-major",                                      \
    c->a.layout = W8A8_COL_MAJOR; c->a.ld = M_)                                                              \
  X(mm_out_col_major, OP_MM, ERROR_INVALID_LAYOUT, "out must be row-major",                                  \
    c->out.layout = W8A8_COL_MAJOR; c->out.ld = M_)                                                          \
  /* ---- scales ---- */                                                                                    \
  X(mm_scale_a_len_3, OP_MM, ERROR_INVALID_SCALE, "scale_a->len is 3", c->sa.len = 3)                        \
  X(mm_scale_b_len_5, OP_MM, ERROR_INVALID_SCALE, "scale_b->len is 5", c->sb.len = 5)                        \
  X(mm_scale_b_len_M, OP_MM, ERROR_INVALID_SCALE, "scale_b->len is 4", c->sb.len = M_)                       \
  X(mm_scale_a_len_0, OP_MM, ERROR_INVALID_SCALE, "scale_a->len is 0", c->sa.len = 0)                        \
  X(mm_scale_a_len_negative, OP_MM, ERROR_INVALID_SCALE, "scale_a->len is -1", c->sa.len = -1)               \
  X(mm_scale_a_bf16, OP_MM, ERROR_INVALID_SCALE, "scale_a->dtype is bf16", c->sa.dtype = W8A8_DTYPE_BF16)    \
  /* ---- bias ---- */                                                                                      \
  X(mm_bias_wrong_dtype, OP_MM, ERROR_INVALID_BIAS, "bias->dtype is bf16",                                   \
    c->pbias = &c->bias; c->bias.dtype = W8A8_DTYPE_BF16)                                                    \
  X(mm_bias_wrong_len, OP_MM, ERROR_INVALID_BIAS, "bias->len is 5", c->pbias = &c->bias; c->bias.len = 5)    \
  X(mm_bias_len_M, OP_MM, ERROR_INVALID_BIAS, "bias->len is 4", c->pbias = &c->bias; c->bias.len = M_)       \
  /* ---- zero point ---- */                                                                                \
  X(mm_zp_with_fp8, OP_MM, ERROR_INVALID_ZERO_POINT, "zp is given but a is fp8_e4m3", c->pzp = &c->zp;       \
    c->a.dtype = c->b.dtype = W8A8_DTYPE_FP8_E4M3)                                                           \
  X(mm_zp_adj_len, OP_MM, ERROR_INVALID_ZERO_POINT, "zp->azp_adj.len is 5", c->pzp = &c->zp; c->zp.azp_adj.len = 5) \
  X(mm_zp_azp_len, OP_MM, ERROR_INVALID_ZERO_POINT, "zp->azp.len is 2", c->pzp = &c->zp; c->zp.azp.len = 2)  \
  X(mm_zp_adj_fp32, OP_MM, ERROR_INVALID_ZERO_POINT, "zp->azp_adj.dtype is fp32", c->pzp = &c->zp;           \
    c->zp.azp_adj.dtype = W8A8_DTYPE_FP32)                                                                   \
  X(mm_zp_azp_int8, OP_MM, ERROR_INVALID_ZERO_POINT, "zp->azp.dtype is int8", c->pzp = &c->zp;               \
    c->zp.azp.dtype = W8A8_DTYPE_INT8)                                                                       \
  /* ---- alignment ---- */                                                                                 \
  X(mm_out_misaligned, OP_MM, ERROR_MISALIGNED, "out->data", c->out.data = c->arena + OFF_OUT + 2)           \
  X(mm_scale_b_misaligned, OP_MM, ERROR_MISALIGNED, "scale_b->data", c->sb.data = c->arena + OFF_SB + 2)     \
  X(mm_bias_misaligned, OP_MM, ERROR_MISALIGNED, "bias->data", c->out.dtype = W8A8_DTYPE_BF16;               \
    c->pbias = &c->bias; c->bias.dtype = W8A8_DTYPE_BF16; c->bias.data = c->arena + OFF_BIAS + 1)            \
  X(mm_bf16_out_misaligned, OP_MM, ERROR_MISALIGNED, "out->data", c->out.dtype = W8A8_DTYPE_BF16;            \
    c->out.data = c->arena + OFF_OUT + 1)                                                                    \
  /* ---- the output overlapping an input ---- */                                                           \
  X(mm_overlap_out_a, OP_MM, ERROR_OVERLAP, "overlaps a [", c->out.data = c->arena + OFF_A)                  \
  X(mm_overlap_out_b, OP_MM, ERROR_OVERLAP, "overlaps b [", c->out.data = c->arena + OFF_B + 4)              \
  X(mm_overlap_out_scale_a, OP_MM, ERROR_OVERLAP, "overlaps scale_a", c->out.data = c->arena + OFF_SA)       \
  X(mm_overlap_out_scale_b_tail, OP_MM, ERROR_OVERLAP, "overlaps scale_b",                                   \
    c->out.data = c->arena + OFF_SB - 4 * M_ * N_ + 4)                                                       \
  X(mm_overlap_out_bias, OP_MM, ERROR_OVERLAP, "overlaps bias", c->pbias = &c->bias;                         \
    c->out.data = c->arena + OFF_BIAS + 16)                                                                  \
  X(mm_overlap_out_azp_adj, OP_MM, ERROR_OVERLAP, "overlaps zp->azp_adj", c->pzp = &c->zp;                   \
    c->out.data = c->arena + OFF_ADJ - 4 * M_ * N_ + 4)                                                      \
  X(mm_overlap_out_azp, OP_MM, ERROR_OVERLAP, "overlaps zp->azp [", c->pzp = &c->zp;                         \
    c->out.data = c->arena + OFF_AZP)                                                                        \
  /* a's last byte is out's first byte (submatrices of one strided parent). */                              \
  X(mm_overlap_submatrix_last_byte, OP_MM, ERROR_OVERLAP, "overlaps a [", c->a.ld = SUB_LD;                  \
    c->out.data = c->arena + OFF_SPARE;                                                                      \
    c->a.data = c->arena + OFF_SPARE - ((M_ - 1) * SUB_LD + K_) + 1)                                         \
  /* a starts in the middle of out's third row. */                                                          \
  X(mm_overlap_submatrix_middle, OP_MM, ERROR_OVERLAP, "overlaps a [", c->out.ld = SUB_LD;                   \
    c->out.data = c->arena + OFF_SPARE; c->a.data = c->arena + OFF_SPARE + 2 * 4 * SUB_LD + 8)               \
  /* b's last column ends inside out's first row. */                                                        \
  X(mm_overlap_submatrix_b_tail, OP_MM, ERROR_OVERLAP, "overlaps b [", c->b.ld = SUB_LD;                     \
    c->out.data = c->arena + OFF_SPARE; c->b.data = c->arena + OFF_SPARE - ((N_ - 1) * SUB_LD + K_) + 3)     \
  /* ---- quantize ---- */                                                                                  \
  X(quant_x_null, OP_QUANT, ERROR_NULL_POINTER, "x is NULL", c->px = NULL)                                   \
  X(quant_q_null, OP_QUANT, ERROR_NULL_POINTER, "q is NULL", c->pq = NULL)                                   \
  X(quant_scale_null, OP_QUANT, ERROR_NULL_POINTER, "scale is NULL", c->pscale = NULL)                       \
  X(quant_q_data_null, OP_QUANT, ERROR_NULL_POINTER, "q->data is NULL", c->q.data = NULL)                    \
  X(quant_x_int8, OP_QUANT, ERROR_INVALID_DTYPE, "x->dtype is int8", c->x.dtype = W8A8_DTYPE_INT8)           \
  X(quant_x_int32, OP_QUANT, ERROR_INVALID_DTYPE, "x->dtype is int32", c->x.dtype = W8A8_DTYPE_INT32)        \
  X(quant_q_fp32, OP_QUANT, ERROR_INVALID_DTYPE, "q->dtype is fp32", c->q.dtype = W8A8_DTYPE_FP32)           \
  X(quant_q_bf16, OP_QUANT, ERROR_INVALID_DTYPE, "q->dtype is bf16", c->q.dtype = W8A8_DTYPE_BF16)           \
  X(quant_shape_mismatch, OP_QUANT, ERROR_INVALID_SHAPE, "q is 4 x 7", c->q.cols = 7)                        \
  X(quant_x_ld_lt_cols, OP_QUANT, ERROR_INVALID_STRIDE, "x->ld is 7", c->x.ld = 7)                           \
  X(quant_x_col_major, OP_QUANT, ERROR_INVALID_LAYOUT, "x must be row-major",                                \
    c->x.layout = W8A8_COL_MAJOR; c->x.ld = M_)                                                              \
  X(quant_x_span_overflows, OP_QUANT, ERROR_INVALID_SHAPE, "x (", c->x.rows = BIG; c->x.cols = BIG; c->x.ld = BIG) \
  X(quant_M_2_31, OP_QUANT, ERROR_INVALID_SHAPE, "each size must be < 2^31", c->x.rows = c->q.rows = INT64_C(1) << 31; \
    c->x.cols = c->q.cols = c->x.ld = c->q.ld = 1)                                                           \
  X(silu_q_cols_2_62_plus_1, OP_SILU, ERROR_INVALID_SHAPE, "q is 0 x 4611686018427387905",                   \
    silu_huge_q(c, (INT64_C(1) << 62) + 1))                                                                  \
  X(silu_q_cols_int64_max, OP_SILU, ERROR_INVALID_SHAPE, "q is 0 x 9223372036854775807",                     \
    silu_huge_q(c, INT64_MAX))                                                                               \
  X(silu_x_cols_odd, OP_SILU, ERROR_INVALID_SHAPE, "x->cols must be even", c->x.cols = 7)                    \
  X(quant_x_misaligned, OP_QUANT, ERROR_MISALIGNED, "x->data", c->x.data = c->arena + OFF_X + 2)             \
  X(quant_mode_3, OP_QUANT, ERROR_INVALID_VALUE, "mode is 3", c->mode = 3)                                   \
  X(quant_mode_negative, OP_QUANT, ERROR_INVALID_VALUE, "mode is -1", c->mode = -1)                          \
  X(quant_per_token_scale_len_1, OP_QUANT, ERROR_INVALID_SCALE, "scale->len is 1", c->scale.len = 1)         \
  X(quant_static_scale_len_M, OP_QUANT, ERROR_INVALID_SCALE, "scale->len is 4", set_static(c, 0.5f);         \
    c->scale.len = M_)                                                                                       \
  X(quant_static_scale_nan, OP_QUANT, ERROR_INVALID_SCALE, "static scale is nan", set_static(c, NAN))        \
  X(quant_static_scale_inf, OP_QUANT, ERROR_INVALID_SCALE, "static scale is inf", set_static(c, INFINITY))   \
  X(quant_static_scale_zero, OP_QUANT, ERROR_INVALID_SCALE, "static scale is 0", set_static(c, 0.0f))        \
  X(quant_static_scale_negzero, OP_QUANT, ERROR_INVALID_SCALE, "static scale is -0", set_static(c, -0.0f))   \
  X(quant_static_scale_negative, OP_QUANT, ERROR_INVALID_SCALE, "static scale is -0.5", set_static(c, -0.5f)) \
  X(quant_static_scale_int8_nan, OP_QUANT, ERROR_INVALID_SCALE, "static scale is nan", set_static(c, NAN);   \
    c->pazp = &c->azp; c->azp.len = 1)                                                                       \
  X(quant_scale_ub_static, OP_QUANT, ERROR_INVALID_SCALE, "scale_ub is given", set_static(c, 0.5f);          \
    c->ub = fat(c, OFF_UB))                                                                                  \
  X(quant_scale_ub_dynamic_tensor, OP_QUANT, ERROR_INVALID_SCALE, "scale_ub is given",                       \
    c->mode = W8A8_QUANT_DYNAMIC_PER_TENSOR; c->scale.len = 1; c->ub = fat(c, OFF_UB))                       \
  X(quant_scale_ub_zero, OP_QUANT, ERROR_INVALID_SCALE, "*scale_ub is 0", c->ub = fat(c, OFF_UB);            \
    fat(c, OFF_UB)[0] = 0.0f)                                                                                \
  X(quant_scale_ub_nan, OP_QUANT, ERROR_INVALID_SCALE, "*scale_ub is nan", c->ub = fat(c, OFF_UB);           \
    fat(c, OFF_UB)[0] = NAN)                                                                                 \
  X(quant_scale_ub_negative, OP_QUANT, ERROR_INVALID_SCALE, "*scale_ub is -2", c->ub = fat(c, OFF_UB);       \
    fat(c, OFF_UB)[0] = -2.0f)                                                                               \
  X(quant_scale_ub_misaligned, OP_QUANT, ERROR_MISALIGNED, "scale_ub", c->ub = (const float *)(c->arena + OFF_UB + 1)) \
  X(quant_azp_with_fp8, OP_QUANT, ERROR_INVALID_ZERO_POINT, "azp is given but q is fp8_e4m3",                \
    c->q.dtype = W8A8_DTYPE_FP8_E4M3; c->pazp = &c->azp)                                                     \
  X(quant_azp_dynamic_per_tensor, OP_QUANT, ERROR_INVALID_ZERO_POINT, "dynamic per-tensor",                  \
    c->mode = W8A8_QUANT_DYNAMIC_PER_TENSOR; c->scale.len = 1; c->pazp = &c->azp; c->azp.len = 1)            \
  X(quant_scale_ub_with_azp, OP_QUANT, ERROR_INVALID_SCALE, "scale_ub is given with azp", c->pazp = &c->azp;  \
    c->ub = fat(c, OFF_UB))                                                                                  \
  X(quant_azp_len_3, OP_QUANT, ERROR_INVALID_ZERO_POINT, "azp->len is 3", c->pazp = &c->azp; c->azp.len = 3) \
  X(quant_azp_fp32, OP_QUANT, ERROR_INVALID_ZERO_POINT, "azp->dtype is fp32", c->pazp = &c->azp;             \
    c->azp.dtype = W8A8_DTYPE_FP32)                                                                          \
  X(quant_overlap_q_x, OP_QUANT, ERROR_OVERLAP, "overlaps x [", c->q.data = c->arena + OFF_X + 8)            \
  X(quant_overlap_q_scale, OP_QUANT, ERROR_OVERLAP, "overlaps scale [", c->q.data = c->arena + OFF_SCALE)    \
  X(quant_overlap_scale_x, OP_QUANT, ERROR_OVERLAP, "scale [", c->scale.data = c->arena + OFF_X + 8)         \
  X(quant_overlap_azp_scale, OP_QUANT, ERROR_OVERLAP, "overlaps azp [", c->pazp = &c->azp;                   \
    c->azp.data = c->arena + OFF_SCALE + 4)                                                                  \
  X(quant_overlap_scale_ub, OP_QUANT, ERROR_OVERLAP, "overlaps scale_ub", c->ub = fat(c, OFF_SCALE) + 1;     \
    fat(c, OFF_SCALE)[1] = 1.0f)                                                                             \
  X(quant_overlap_static_q_azp, OP_QUANT, ERROR_OVERLAP, "overlaps azp [", set_static(c, 0.5f);              \
    c->pazp = &c->azp; c->azp.len = 1; c->q.data = c->arena + OFF_QAZP - 8)                                  \
  /* ---- colsum ---- */                                                                                    \
  X(colsum_b_null, OP_COLSUM, ERROR_NULL_POINTER, "b is NULL", c->pcb = NULL)                                \
  X(colsum_adj_null, OP_COLSUM, ERROR_NULL_POINTER, "azp_adj is NULL", c->padj = NULL)                       \
  X(colsum_b_fp8, OP_COLSUM, ERROR_INVALID_DTYPE, "b->dtype is fp8_e4m3", c->cb.dtype = W8A8_DTYPE_FP8_E4M3) \
  X(colsum_b_row_major, OP_COLSUM, ERROR_INVALID_LAYOUT, "b must be column-major",                           \
    c->cb.layout = W8A8_ROW_MAJOR; c->cb.ld = N_)                                                            \
  X(colsum_adj_len, OP_COLSUM, ERROR_INVALID_ZERO_POINT, "azp_adj->len is 5", c->adj.len = 5)                \
  X(colsum_adj_fp32, OP_COLSUM, ERROR_INVALID_ZERO_POINT, "azp_adj->dtype is fp32", c->adj.dtype = W8A8_DTYPE_FP32) \
  X(colsum_adj_misaligned, OP_COLSUM, ERROR_MISALIGNED, "azp_adj->data", c->adj.data = c->arena + OFF_CADJ + 2) \
  X(colsum_overlap, OP_COLSUM, ERROR_OVERLAP, "overlaps b [", c->adj.data = c->arena + OFF_B + 8)            \
  X(colsum_K_131072, OP_COLSUM, ERROR_INVALID_SHAPE, "K = 131072", c->cb.rows = c->cb.ld = 131072)

#define X_FN(name, o, st, sub, ...) \
  static void mut_##name(ctx *c) { __VA_ARGS__; }
BAD_CASES(X_FN)
#undef X_FN

typedef struct bad_case {
  const char *name;
  op o;
  w8a8_status status;
  const char *substr;
  void (*mutate)(ctx *c);
} bad_case;

#define X_ROW(name, o, st, sub, ...) {#name, o, W8A8_##st, sub, mut_##name},
static const bad_case bad_cases[] = {BAD_CASES(X_ROW)};
#undef X_ROW

static void fill_dead_handle(ctx *c) {
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CPU, 0) == W8A8_SUCCESS) w8a8_destroy(h);
  c->dead = h; /* freed memory: the library must not read it (ASan would say so) */
}

static int setup(ctx *c) {
  memset(c, 0, sizeof *c);
  c->arena = aligned_alloc(256, ARENA);
  if (!c->arena) return 0;
  if (w8a8_create(&c->live, W8A8_DEVICE_CPU, 0) != W8A8_SUCCESS) return 0;
  fill_dead_handle(c);
  return 1;
}

static void teardown(ctx *c) {
  w8a8_destroy(c->live);
  free(c->arena);
}

/* First differing byte of the arena, or -1. */
static long arena_diff(const uint8_t *a, const uint8_t *b) {
  for (long i = 0; i < ARENA; i++)
    if (a[i] != b[i]) return i;
  return -1;
}

W8A8_TEST(badinput_table) {
  ctx c;
  REQUIRE(setup(&c), "setup failed: %s", w8a8_last_error());
  uint8_t *snap = malloc(ARENA);
  REQUIRE(snap, "malloc");
  int n = (int)(sizeof bad_cases / sizeof bad_cases[0]), bad = 0;
  CHECK(n >= 40, "only %d bad-input cases", n);
  for (int i = 0; i < n; i++) {
    const bad_case *bc = &bad_cases[i];
    ctx_reset(&c);
    bc->mutate(&c);
    memcpy(snap, c.arena, ARENA);
    ctx before;
    memcpy(&before, &c, sizeof c);
    w8a8_status s = call(&c, bc->o);
    const char *msg = w8a8_last_error();
    int ok = 1;
    if (s != bc->status) {
      CHECK(0, "%s: status %s, expected %s (%s)", bc->name, w8a8_status_name(s), w8a8_status_name(bc->status), msg);
      ok = 0;
    } else if (!strstr(msg, bc->substr)) {
      CHECK(0, "%s: last error \"%s\" does not contain \"%s\"", bc->name, msg, bc->substr);
      ok = 0;
    } else if (strncmp(msg, op_fn[bc->o], strlen(op_fn[bc->o])) != 0) {
      CHECK(0, "%s: last error \"%s\" does not start with the call's name %s", bc->name, msg, op_fn[bc->o]);
      ok = 0;
    }
    long d = arena_diff(snap, c.arena);
    if (d >= 0) {
      CHECK(0, "%s: the failed call wrote caller memory at arena offset %ld", bc->name, d);
      ok = 0;
    }
    if (memcmp(&before, &c, sizeof c) != 0) {
      CHECK(0, "%s: a descriptor changed", bc->name);
      ok = 0;
    }
    bad += !ok;
  }
  printf("    %d bad-input cases, %d wrong\n", n, bad);
  free(snap);
  teardown(&c);
}

/* Bytes that a successful call may write: [lo, hi) ranges of the arena. */
typedef struct region {
  size_t lo, hi;
} region;

static int only_written_in(const uint8_t *snap, const uint8_t *now, const region *r, int nr) {
  for (size_t i = 0; i < ARENA; i++) {
    if (snap[i] == now[i]) continue;
    int inside = 0;
    for (int j = 0; j < nr; j++) inside |= i >= r[j].lo && i < r[j].hi;
    if (!inside) return (int)i;
  }
  return -1;
}

/* The valid variants of each call succeed and write only their outputs: the table's
 * baselines are real, and validation does not refuse what the header allows. */
W8A8_TEST(badinput_valid_variants_succeed) {
  ctx c;
  REQUIRE(setup(&c), "setup failed");
  uint8_t *snap = malloc(ARENA);
  REQUIRE(snap, "malloc");
  const region mm_out = {OFF_OUT, OFF_OUT + 1024}, spare_out = {OFF_SPARE, ARENA};
  const region q_out[3] = {{OFF_Q, OFF_Q + 1024}, {OFF_SCALE, OFF_SCALE + 1024}, {OFF_QAZP, OFF_QAZP + 1024}};
  for (int v = 0; v < 17; v++) {
    ctx_reset(&c);
    op o = OP_MM;
    const region *rs = &mm_out;
    int nr = 1;
    switch (v) {
      case 0: break;
      case 1: c.pbias = &c.bias; break;
      case 2: c.pzp = &c.zp; break;                                      /* per-token azp */
      case 3: c.pzp = &c.zp; c.zp.azp.len = 1; break;                    /* per-tensor azp */
      case 4: c.pzp = &c.zp; c.zp.azp.data = NULL; c.zp.azp.len = 0; break; /* premultiplied adj */
      case 5: c.a.dtype = c.b.dtype = W8A8_DTYPE_FP8_E4M3; c.out.dtype = W8A8_DTYPE_BF16;
              c.bias.dtype = W8A8_DTYPE_BF16; c.pbias = &c.bias; c.sa.len = 1; c.sb.len = 1; break;
      case 6: /* out ends exactly where a begins: adjacent, not overlapping */
              c.a.data = c.arena + OFF_SPARE + 4 * M_ * N_; c.out.data = c.arena + OFF_SPARE;
              memcpy(c.a.data, c.arena + OFF_A, M_ * K_); rs = &spare_out; break;
      case 7: /* strided submatrices everywhere */
              c.a.rows = 3; c.a.cols = 5; c.b.rows = 5; c.b.cols = 4; c.out.rows = 3; c.out.cols = 4;
              c.sa.len = 3; c.sb.len = 4; break;
      case 8: o = OP_QUANT; rs = q_out; nr = 3; break;
      case 9: o = OP_QUANT; rs = q_out; nr = 3; c.ub = fat(&c, OFF_UB); break;
      case 10: o = OP_QUANT; rs = q_out; nr = 3; c.pazp = &c.azp; break;
      case 11: o = OP_QUANT; rs = q_out; nr = 3; set_static(&c, 0.05f); c.pazp = &c.azp; c.azp.len = 1;
               ((int32_t *)at(&c, OFF_QAZP))[0] = 7; break;
      case 12: o = OP_QUANT; rs = q_out; nr = 3; c.mode = W8A8_QUANT_DYNAMIC_PER_TENSOR; c.scale.len = 1;
               c.q.dtype = W8A8_DTYPE_FP8_E4M3; break;
      case 13: o = OP_QUANT; rs = q_out; nr = 3; set_static(&c, 0.05f); c.x.dtype = W8A8_DTYPE_BF16; break;
      case 14: o = OP_COLSUM; { static const region r = {OFF_CADJ, OFF_CADJ + 1024}; rs = &r; } break;
      case 15: /* per-token scale of a single row is also per-tensor */
               c.a.rows = c.out.rows = 1; c.sa.len = 1; break;
      case 16: c.out.dtype = W8A8_DTYPE_FP16; c.bias.dtype = W8A8_DTYPE_FP16; c.pbias = &c.bias;
               for (int i = 0; i < N_; i++) ((uint16_t *)at(&c, OFF_BIAS))[i] = 0x3c00; /* 1.0 */
               break;
    }
    memcpy(snap, c.arena, ARENA);
    w8a8_status s = call(&c, o);
    CHECK(s == W8A8_SUCCESS, "variant %d: %s: %s", v, w8a8_status_name(s), w8a8_last_error());
    CHECK(w8a8_last_error()[0] == 0, "variant %d: success left a last error: %s", v, w8a8_last_error());
    CHECK(memcmp(snap, c.arena, ARENA) != 0, "variant %d: nothing was written", v);
    int d = only_written_in(snap, c.arena, rs, nr);
    CHECK(d < 0, "variant %d: wrote outside its outputs at arena offset %d", v, d);
  }
  free(snap);
  teardown(&c);
}

/* M == 0 or N == 0: success, nothing written (data may be NULL). */
W8A8_TEST(badinput_empty_shapes_write_nothing) {
  ctx c;
  REQUIRE(setup(&c), "setup failed");
  uint8_t *snap = malloc(ARENA);
  REQUIRE(snap, "malloc");
  for (int v = 0; v < 6; v++) {
    ctx_reset(&c);
    op o = OP_MM;
    switch (v) {
      case 0: c.a.rows = c.out.rows = 0; c.sa.len = 1; break;
      case 1: c.a.rows = c.out.rows = 0; c.sa.len = 0; c.a.data = NULL; c.out.data = NULL; break;
      case 2: c.b.cols = c.out.cols = 0; c.sb.len = 1; c.pbias = &c.bias; c.bias.len = 0; break;
      case 3: c.b.cols = c.out.cols = 0; c.sb.len = 0; c.sb.data = NULL; c.b.data = NULL; c.out.data = NULL; break;
      case 4: o = OP_QUANT; c.x.rows = c.q.rows = 0; c.scale.len = 0; c.x.data = c.q.data = c.scale.data = NULL; break;
      case 5: o = OP_COLSUM; c.cb.cols = 0; c.adj.len = 0; c.adj.data = NULL; break;
    }
    memcpy(snap, c.arena, ARENA);
    w8a8_status s = call(&c, o);
    CHECK(s == W8A8_SUCCESS, "empty variant %d: %s: %s", v, w8a8_status_name(s), w8a8_last_error());
    CHECK(arena_diff(snap, c.arena) < 0, "empty variant %d wrote memory", v);
  }
  free(snap);
  teardown(&c);
}

/* M == 0 is a success that writes nothing in every quantizer mode of both quantizers: not even the dynamic
 * per-tensor scale, which has no rows to come from (w8a8.h). */
W8A8_TEST(badinput_quant_m0_writes_no_scale) {
  ctx c;
  REQUIRE(setup(&c), "setup failed");
  uint8_t *snap = malloc(ARENA);
  REQUIRE(snap, "malloc");
  for (int silu = 0; silu < 2; silu++)
    for (int mode = 0; mode < 3; mode++) {
      ctx_reset(&c);
      c.x.rows = c.q.rows = 0;
      if (silu) c.q.cols = c.q.ld = K_ / 2;
      c.mode = mode;
      c.scale.len = mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? 0 : 1;
      if (mode == W8A8_QUANT_STATIC_PER_TENSOR) fat(&c, OFF_SCALE)[0] = 0.5f;
      memcpy(snap, c.arena, ARENA);
      w8a8_status s = call(&c, silu ? OP_SILU : OP_QUANT);
      CHECK(s == W8A8_SUCCESS, "%s mode %d, M = 0: %s: %s", op_fn[silu ? OP_SILU : OP_QUANT], mode,
            w8a8_status_name(s), w8a8_last_error());
      CHECK(arena_diff(snap, c.arena) < 0, "%s mode %d, M = 0: wrote memory at arena offset %ld",
            op_fn[silu ? OP_SILU : OP_QUANT], mode, arena_diff(snap, c.arena));
    }
  free(snap);
  teardown(&c);
}

/* K == 0: out = bias exactly (or zeros), for every output dtype. */
W8A8_TEST(badinput_k0_writes_bias_or_zeros) {
  ctx c;
  REQUIRE(setup(&c), "setup failed");
  const w8a8_dtype dts[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  for (int d = 0; d < 3; d++)
    for (int with_bias = 0; with_bias < 2; with_bias++) {
      ctx_reset(&c);
      c.a.cols = c.b.rows = 0;
      c.a.data = c.b.data = NULL;
      c.out.dtype = c.bias.dtype = dts[d];
      size_t es = w8a8_dtype_size(dts[d]);
      uint16_t hb[N_] = {0x3f80, 0xc000, 0x0000, 0x8000, 0x4049, 0x3c00}; /* some bf16/fp16 bit patterns */
      if (es == 2) memcpy(at(&c, OFF_BIAS), hb, sizeof hb);
      if (with_bias) c.pbias = &c.bias;
      REQUIRE_OK(w8a8_scaled_mm(c.h, c.pa, c.pb, c.psa, c.psb, c.pbias, c.pzp, c.pout));
      for (int m = 0; m < M_; m++)
        for (int n = 0; n < N_; n++) {
          const uint8_t *got = c.arena + OFF_OUT + (m * N_ + n) * es;
          uint8_t want[4] = {0, 0, 0, 0};
          if (with_bias) memcpy(want, c.arena + OFF_BIAS + n * es, es);
          /* the scales are positive: 0 * s = +0, and fmaf(sb, +0, bias) = bias (bias -0 gives +0 + -0 = +0) */
          if (with_bias && es == 2 && hb[n] == 0x8000) want[0] = want[1] = 0;
          if (with_bias && es == 4 && memcmp(want, "\0\0\0\x80", 4) == 0) memset(want, 0, 4);
          CHECK(memcmp(got, want, es) == 0, "%s bias=%d: out[%d,%d] bytes differ", w8a8_dtype_name(dts[d]), with_bias,
                m, n);
        }
    }
  teardown(&c);
}

W8A8_TEST(badinput_last_error_cleared_by_success) {
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  CHECK(w8a8_set_kernel(h, (w8a8_kernel)99) == W8A8_ERROR_INVALID_VALUE, "set_kernel 99 accepted");
  CHECK(strstr(w8a8_last_error(), "kernel is 99") != NULL, "message: %s", w8a8_last_error());
  REQUIRE_OK(w8a8_set_kernel(h, W8A8_KERNEL_AUTO));
  CHECK(w8a8_last_error()[0] == 0, "not cleared: %s", w8a8_last_error());
  w8a8_handle_info info;
  CHECK(w8a8_get_info(h, NULL) == W8A8_ERROR_NULL_POINTER, "get_info NULL accepted");
  REQUIRE_OK(w8a8_get_info(h, &info));
  CHECK(w8a8_last_error()[0] == 0, "not cleared: %s", w8a8_last_error());
  CHECK(info.kind == W8A8_DEVICE_CPU && info.num_threads >= 1, "info kind %d threads %d", info.kind,
        info.num_threads);
  CHECK(w8a8_destroy(NULL) == W8A8_SUCCESS, "destroy(NULL)");
  REQUIRE_OK(w8a8_destroy(h));
  CHECK(w8a8_destroy(h) == W8A8_ERROR_INVALID_HANDLE, "double destroy accepted");
}

/* Without a usable GPU, a CUDA handle is refused (NOT_BUILT or UNSUPPORTED_DEVICE/DEVICE),
 * the handle pointer is not written, and the message names w8a8_create. */
W8A8_TEST(badinput_cuda_handle_without_gpu) {
  if (w8a8_cuda_device_count() > 0) SKIP("a GPU is present");
  w8a8_handle *h = (w8a8_handle *)(uintptr_t)0xdeadbeef;
  w8a8_status s = w8a8_create(&h, W8A8_DEVICE_CUDA, 0);
  CHECK(s == W8A8_ERROR_NOT_BUILT || s == W8A8_ERROR_UNSUPPORTED_DEVICE || s == W8A8_ERROR_DEVICE, "status %s",
        w8a8_status_name(s));
  CHECK(h == (w8a8_handle *)(uintptr_t)0xdeadbeef, "handle written on failure");
  CHECK(strncmp(w8a8_last_error(), "w8a8_create", 11) == 0, "message: %s", w8a8_last_error());
  /* create_best falls back to the CPU */
  h = NULL;
  REQUIRE_OK(w8a8_create_best(&h));
  w8a8_handle_info info;
  REQUIRE_OK(w8a8_get_info(h, &info));
  CHECK(info.kind == W8A8_DEVICE_CPU, "create_best gave kind %d", info.kind);
  REQUIRE_OK(w8a8_destroy(h));
}

/* ---- the last error is per thread ---- */
typedef struct thread_arg {
  w8a8_handle *h;
  int saw_empty_at_start;
  int status_ok;
  char msg[512];
} thread_arg;

static void *thread_body(void *p) {
  thread_arg *t = p;
  t->saw_empty_at_start = w8a8_last_error()[0] == 0; /* the main thread's error is not visible here */
  t->status_ok = w8a8_set_num_threads(t->h, -7) == W8A8_ERROR_INVALID_VALUE;
  snprintf(t->msg, sizeof t->msg, "%s", w8a8_last_error());
  return NULL;
}

W8A8_TEST(badinput_errors_per_thread) {
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  CHECK(w8a8_set_kernel(h, (w8a8_kernel)42) == W8A8_ERROR_INVALID_VALUE, "accepted");
  char mine[512];
  snprintf(mine, sizeof mine, "%s", w8a8_last_error());
  thread_arg t[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    memset(&t[i], 0, sizeof t[i]);
    t[i].h = h;
    REQUIRE(pthread_create(&th[i], NULL, thread_body, &t[i]) == 0, "pthread_create");
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) {
    CHECK(t[i].saw_empty_at_start, "thread %d saw another thread's error", i);
    CHECK(t[i].status_ok, "thread %d: wrong status", i);
    CHECK(strstr(t[i].msg, "num_threads is -7") != NULL, "thread %d: message %s", i, t[i].msg);
  }
  CHECK(strcmp(mine, w8a8_last_error()) == 0 && strstr(mine, "kernel is 42"), "main thread's error changed: %s",
        w8a8_last_error());
  REQUIRE_OK(w8a8_destroy(h));
}

/* w8a8_set_fp8_accum: only the two modes; a bad handle is refused; a CPU handle takes it (and computes
 * exactly as before: the product below is compared bit for bit with the setting off and on). */
W8A8_TEST(badinput_fp8_accum) {
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  CHECK(w8a8_set_fp8_accum(NULL, W8A8_FP8_ACCUM_FAST) != W8A8_SUCCESS, "NULL handle accepted");
  CHECK(strstr(w8a8_last_error(), "w8a8_set_fp8_accum") != NULL, "message: %s", w8a8_last_error());
  CHECK(w8a8_set_fp8_accum(h, (w8a8_fp8_accum)2) == W8A8_ERROR_INVALID_VALUE, "2 accepted");
  CHECK(strstr(w8a8_last_error(), "accum is 2") != NULL, "message: %s", w8a8_last_error());
  CHECK(w8a8_set_fp8_accum(h, (w8a8_fp8_accum)-1) == W8A8_ERROR_INVALID_VALUE, "-1 accepted");
  enum { M = 5, N = 7, K = 300 };
  uint8_t a[M * K], b[N * K];
  float sa = 0.25f, sb = 0.5f;
  uint16_t out0[M * N], out1[M * N];
  uint64_t r = 12345;
  /* finite e4m3 values of both signs, magnitudes 2^-3 .. 2^0 (never the NaN codes 0x7f / 0xff) */
  for (int i = 0; i < M * K; i++) {
    r = r * 6364136223846793005ULL + 1442695040888963407ULL;
    a[i] = (uint8_t)(((r >> 63) << 7) | 0x20 | ((r >> 40) & 0x1f));
  }
  for (int i = 0; i < N * K; i++) {
    r = r * 6364136223846793005ULL + 1442695040888963407ULL;
    b[i] = (uint8_t)(((r >> 63) << 7) | 0x20 | ((r >> 40) & 0x1f));
  }
  w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K, a);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K, b);
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sb);
  w8a8_matrix O0 = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, out0);
  w8a8_matrix O1 = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, out1);
  REQUIRE_OK(w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O0));
  CHECK(w8a8_set_fp8_accum(h, W8A8_FP8_ACCUM_FAST) == W8A8_SUCCESS, "FAST refused: %s", w8a8_last_error());
  CHECK(w8a8_last_error()[0] == 0, "not cleared: %s", w8a8_last_error());
  memset(out1, 0xff, sizeof out1);
  REQUIRE_OK(w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O1));
  CHECK(memcmp(out0, out1, sizeof out0) == 0, "the CPU result changed with W8A8_FP8_ACCUM_FAST");
  CHECK(w8a8_set_fp8_accum(h, W8A8_FP8_ACCUM_PRECISE) == W8A8_SUCCESS, "PRECISE refused: %s", w8a8_last_error());
  REQUIRE_OK(w8a8_destroy(h));
  CHECK(w8a8_set_fp8_accum(h, W8A8_FP8_ACCUM_FAST) != W8A8_SUCCESS, "destroyed handle accepted");
}

/* w8a8_set_weights_constant: only 0 and 1; a bad handle is refused; a CPU handle takes it (and ignores it). */
W8A8_TEST(badinput_weights_constant) {
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  CHECK(w8a8_set_weights_constant(NULL, 1) != W8A8_SUCCESS, "NULL handle accepted");
  CHECK(strstr(w8a8_last_error(), "w8a8_set_weights_constant") != NULL, "message: %s", w8a8_last_error());
  CHECK(w8a8_set_weights_constant(h, 2) == W8A8_ERROR_INVALID_VALUE, "2 accepted");
  CHECK(strstr(w8a8_last_error(), "constant is 2") != NULL, "message: %s", w8a8_last_error());
  CHECK(w8a8_set_weights_constant(h, -1) == W8A8_ERROR_INVALID_VALUE, "-1 accepted");
  CHECK(w8a8_set_weights_constant(h, 1) == W8A8_SUCCESS, "1 refused: %s", w8a8_last_error());
  CHECK(w8a8_last_error()[0] == 0, "not cleared: %s", w8a8_last_error());
  CHECK(w8a8_set_weights_constant(h, 0) == W8A8_SUCCESS, "0 refused: %s", w8a8_last_error());
  REQUIRE_OK(w8a8_destroy(h));
  CHECK(w8a8_set_weights_constant(h, 1) != W8A8_SUCCESS, "destroyed handle accepted");
}
