/* validate.c — every argument check of the public GEMM and quantizer calls, in one place.
 *
 * Each check names the call, the argument, what was expected and what was given.
 * Nothing here writes to caller memory; the resolved problem is written only
 * after every check has passed. */
#include <math.h>
#include <string.h>

#include "internal.h"

#define LL(x) ((long long)(x))

static bool dtype_valid(w8a8_dtype d) { return d >= W8A8_DTYPE_INT8 && d <= W8A8_DTYPE_INT32; }

static const char *dname(w8a8_dtype d) { return w8a8_dtype_name(d); }

/* Bytes spanned by a matrix: ((outer-1)*ld + inner) * esize, with overflow checks.
 * Returns false when it does not fit in 2^62 bytes, or for negative sizes or strides or an invalid
 * dtype (which check_matrix refuses first; w8a8_matrix_extent may see them from other callers). */
static bool matrix_span(const w8a8_matrix *m, uint64_t *bytes) {
  int64_t outer = m->layout == W8A8_ROW_MAJOR ? m->rows : m->cols;
  int64_t inner = m->layout == W8A8_ROW_MAJOR ? m->cols : m->rows;
  size_t es = w8a8_dtype_size(m->dtype);
  if (outer < 0 || inner < 0 || m->ld < 0 || es == 0) return false;
  if (outer == 0 || inner == 0) {
    *bytes = 0;
    return true;
  }
  const uint64_t lim = (uint64_t)1 << 62;
  uint64_t o = (uint64_t)(outer - 1), ld = (uint64_t)m->ld;
  if (ld != 0 && o > lim / ld) return false;
  uint64_t elems = o * ld + (uint64_t)inner;
  if (elems > lim / es) return false;
  *bytes = elems * es;
  return true;
}

void w8a8_matrix_extent(const w8a8_matrix *m, uintptr_t *lo, uintptr_t *hi) {
  uint64_t bytes = 0;
  if (!matrix_span(m, &bytes) || bytes == 0 || !m->data) {
    *lo = *hi = 0;
    return;
  }
  *lo = (uintptr_t)m->data;
  *hi = *lo + (uintptr_t)bytes;
}

typedef struct span {
  const char *name;
  uintptr_t lo, hi;
} span;

static span vec_span(const char *name, const w8a8_vector *v, int64_t len) {
  span s = {name, 0, 0};
  if (v && v->data && len > 0) {
    s.lo = (uintptr_t)v->data;
    s.hi = s.lo + (uintptr_t)len * w8a8_dtype_size(v->dtype);
  }
  return s;
}

static span mat_span(const char *name, const w8a8_matrix *m) {
  span s = {name, 0, 0};
  w8a8_matrix_extent(m, &s.lo, &s.hi);
  return s;
}

static bool overlaps(span x, span y) { return x.lo < x.hi && y.lo < y.hi && x.lo < y.hi && y.lo < x.hi; }

/* Check that `out` overlaps none of `ins`. */
static w8a8_status check_overlap(const char *fn, span out, const span *ins, int n) {
  for (int i = 0; i < n; i++)
    if (overlaps(out, ins[i]))
      return w8a8_err(W8A8_ERROR_OVERLAP,
                      "%s: %s [%p, %p) overlaps %s [%p, %p); outputs must not alias inputs or other outputs", fn,
                      out.name, (void *)out.lo, (void *)out.hi, ins[i].name, (void *)ins[i].lo,
                      (void *)ins[i].hi);
  return W8A8_SUCCESS;
}

/* Empty matrices may have data == NULL. The resolved problems never carry NULL: backends
 * compute addresses such as b + n*ldb even when K == 0, and arithmetic on NULL is undefined
 * in C. The stand-in is never dereferenced (there are no elements). */
static const void *nonnull(const void *p) {
  static _Alignas(64) const uint8_t empty_stand_in[64];
  return p ? p : empty_stand_in;
}

/* Pointer must be memory the handle's device can use (CUDA handles only). */
static w8a8_status check_ptr(const char *fn, const w8a8_handle *h, const char *arg, const void *p) {
  if (h->kind == W8A8_DEVICE_CUDA && p) return w8a8_cuda_check_pointer(h, fn, arg, p);
  return W8A8_SUCCESS;
}

/* Generic matrix checks: non-NULL, valid dtype and layout, sizes, stride, overflow,
 * data pointer, alignment, memory space. */
static w8a8_status check_matrix(const char *fn, const w8a8_handle *h, const char *arg, const w8a8_matrix *m) {
  if (!m) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s is NULL; expected a w8a8_matrix descriptor", fn, arg);
  if (!dtype_valid(m->dtype))
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: %s->dtype is %d, which is not a w8a8_dtype", fn, arg,
                    (int)m->dtype);
  if (m->layout != W8A8_ROW_MAJOR && m->layout != W8A8_COL_MAJOR)
    return w8a8_err(W8A8_ERROR_INVALID_LAYOUT, "%s: %s->layout is %d; expected W8A8_ROW_MAJOR or W8A8_COL_MAJOR", fn,
                    arg, (int)m->layout);
  if (m->rows < 0 || m->cols < 0)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s is %lld x %lld; sizes must be >= 0", fn, arg, LL(m->rows),
                    LL(m->cols));
  /* The header's rule is ld >= the inner size, so an empty inner dimension (K == 0)
   * accepts ld == 0; the span is then 0 bytes and ld is never used. */
  int64_t inner = m->layout == W8A8_ROW_MAJOR ? m->cols : m->rows;
  int64_t min_ld = inner;
  if (m->ld < min_ld)
    return w8a8_err(W8A8_ERROR_INVALID_STRIDE, "%s: %s->ld is %lld; a %s %lld x %lld matrix needs ld >= %lld", fn, arg,
                    LL(m->ld), m->layout == W8A8_ROW_MAJOR ? "row-major" : "column-major", LL(m->rows),
                    LL(m->cols), LL(min_ld));
  uint64_t bytes;
  if (!matrix_span(m, &bytes))
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s (%lld x %lld, ld %lld) spans more than 2^62 bytes", fn, arg,
                    LL(m->rows), LL(m->cols), LL(m->ld));
  if (bytes == 0) return W8A8_SUCCESS; /* empty: data may be NULL */
  if (!m->data)
    return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s->data is NULL for a non-empty %lld x %lld matrix", fn, arg,
                    LL(m->rows), LL(m->cols));
  if ((uintptr_t)m->data > UINTPTR_MAX - bytes)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s->data + %llu bytes wraps around the address space", fn, arg,
                    (unsigned long long)bytes);
  size_t es = w8a8_dtype_size(m->dtype);
  if ((uintptr_t)m->data % es)
    return w8a8_err(W8A8_ERROR_MISALIGNED, "%s: %s->data %p is not aligned to its %zu-byte %s elements", fn, arg,
                    m->data, es, dname(m->dtype));
  return check_ptr(fn, h, arg, m->data);
}

/* How a field of `arg` is written in messages: "scale_a->len" for a descriptor passed
 * by pointer, "zp->azp.len" for a vector embedded in a struct (arg already has "->"). */
static const char *field_sep(const char *arg) { return strstr(arg, "->") ? "." : "->"; }

/* Vector checks: non-NULL, dtype, length, data pointer (NULL only when empty),
 * alignment, no wrap-around of [data, data + len), memory space. */
static w8a8_status check_vector(const char *fn, const w8a8_handle *h, const char *arg, const w8a8_vector *v,
                                w8a8_dtype want, w8a8_status bad) {
  const char *sep = field_sep(arg);
  if (!v) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s is NULL; expected a w8a8_vector descriptor", fn, arg);
  if (v->dtype != want)
    return w8a8_err(bad, "%s: %s%sdtype is %s (%d); expected %s", fn, arg, sep, dname(v->dtype), (int)v->dtype,
                    dname(want));
  if (v->len < 0) return w8a8_err(bad, "%s: %s%slen is %lld; must be >= 0", fn, arg, sep, LL(v->len));
  if (v->len > ((int64_t)1 << 58)) return w8a8_err(bad, "%s: %s%slen %lld is too large", fn, arg, sep, LL(v->len));
  if (v->len > 0 && !v->data)
    return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s%sdata is NULL for a vector of %lld elements", fn, arg, sep,
                    LL(v->len));
  if (v->data && (uintptr_t)v->data % w8a8_dtype_size(want))
    return w8a8_err(W8A8_ERROR_MISALIGNED, "%s: %s%sdata %p is not aligned to %zu bytes", fn, arg, sep, v->data,
                    w8a8_dtype_size(want));
  /* len <= 2^58 and elements <= 4 bytes: the byte count itself cannot overflow. */
  uint64_t bytes = (uint64_t)v->len * w8a8_dtype_size(want);
  if (v->data && (uintptr_t)v->data > UINTPTR_MAX - bytes)
    return w8a8_err(bad, "%s: %s%sdata + %llu bytes wraps around the address space", fn, arg, sep,
                    (unsigned long long)bytes);
  if (v->len > 0) return check_ptr(fn, h, arg, v->data);
  return W8A8_SUCCESS;
}

/* len must be 1 or `n` (n names what it is). */
static w8a8_status check_len_1_or(const char *fn, const char *arg, const w8a8_vector *v, int64_t n,
                                  const char *per, const char *nname, w8a8_status bad) {
  if (v->len == 1 || v->len == n) return W8A8_SUCCESS;
  return w8a8_err(bad, "%s: %s%slen is %lld; expected 1 (per-tensor) or %s = %lld (%s)", fn, arg, field_sep(arg),
                  LL(v->len), nname, LL(n), per);
}

/* dtypes and layouts of a scaled_mm's operands (shared with the tensor-parallel ops). */
w8a8_status w8a8_check_mm_kinds(const char *fn, const w8a8_matrix *a, const w8a8_matrix *b,
                                const w8a8_matrix *out) {
  if (a->dtype != W8A8_DTYPE_INT8 && a->dtype != W8A8_DTYPE_FP8_E4M3)
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: a->dtype is %s; expected int8 or fp8_e4m3", fn, dname(a->dtype));
  if (b->dtype != a->dtype)
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: a is %s but b is %s; both must be int8 or both fp8_e4m3", fn,
                    dname(a->dtype), dname(b->dtype));
  if (out->dtype != W8A8_DTYPE_BF16 && out->dtype != W8A8_DTYPE_FP16 && out->dtype != W8A8_DTYPE_FP32)
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: out->dtype is %s; expected bf16, fp16 or fp32", fn,
                    dname(out->dtype));
  if (a->layout != W8A8_ROW_MAJOR)
    return w8a8_err(W8A8_ERROR_INVALID_LAYOUT, "%s: a must be row-major [M,K] (activations); got column-major", fn);
  if (b->layout != W8A8_COL_MAJOR)
    return w8a8_err(W8A8_ERROR_INVALID_LAYOUT,
                    "%s: b must be column-major [K,N] (the weights stored as N rows of K, ld >= K); got row-major. "
                    "Pass W^T as a column-major view, or transpose the weights once at load time",
                    fn);
  if (out->layout != W8A8_ROW_MAJOR)
    return w8a8_err(W8A8_ERROR_INVALID_LAYOUT, "%s: out must be row-major [M,N]; got column-major", fn);
  return W8A8_SUCCESS;
}

/* a [M,K], b [K,N], out [M,N] of a scaled_mm (plain or block-scaled): descriptors, dtypes, layouts, shapes. */
static w8a8_status check_mm_operands(const char *fn, const w8a8_handle *h, const w8a8_matrix *a, const w8a8_matrix *b,
                                     const w8a8_matrix *out) {
  W8A8_CHECK(check_matrix(fn, h, "a", a));
  W8A8_CHECK(check_matrix(fn, h, "b", b));
  W8A8_CHECK(check_matrix(fn, h, "out", out));

  W8A8_CHECK(w8a8_check_mm_kinds(fn, a, b, out));

  int64_t M = a->rows, K = a->cols, N = b->cols;
  if (b->rows != K)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: a is %lld x %lld (M x K) but b is %lld x %lld; b->rows must be K = %lld",
                    fn, LL(M), LL(K), LL(b->rows), LL(N), LL(K));
  if (out->rows != M || out->cols != N)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: out is %lld x %lld; expected M x N = %lld x %lld", fn,
                    LL(out->rows), LL(out->cols), LL(M), LL(N));
  /* 131072 * (-128 * -128) = 2^31 does not fit in int32: the exact bound is 131071. */
  if (a->dtype == W8A8_DTYPE_INT8 && K > 131071)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE,
                    "%s: K = %lld; int8 accumulation is exact in int32 only for K <= 131071", fn, LL(K));
  if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: M, N, K = %lld, %lld, %lld; each must be < 2^31", fn, LL(M),
                    LL(N), LL(K));
  return W8A8_SUCCESS;
}

/* NULL, or N elements of out's dtype. */
static w8a8_status check_bias(const char *fn, const w8a8_handle *h, const w8a8_vector *bias, const w8a8_matrix *out,
                              int64_t N) {
  if (!bias) return W8A8_SUCCESS;
  if (bias->dtype != out->dtype)
    return w8a8_err(W8A8_ERROR_INVALID_BIAS, "%s: bias->dtype is %s; it must match out->dtype (%s)", fn,
                    dname(bias->dtype), dname(out->dtype));
  W8A8_CHECK(check_vector(fn, h, "bias", bias, out->dtype, W8A8_ERROR_INVALID_BIAS));
  if (bias->len != N)
    return w8a8_err(W8A8_ERROR_INVALID_BIAS, "%s: bias->len is %lld; expected N = %lld", fn, LL(bias->len), LL(N));
  return W8A8_SUCCESS;
}

/* The operands' part of a resolved scaled_mm problem (p zeroed first). */
static void fill_mm_operands(w8a8_mm_problem *p, const w8a8_matrix *a, const w8a8_matrix *b, const w8a8_matrix *out,
                             const w8a8_vector *bias) {
  memset(p, 0, sizeof *p);
  p->M = a->rows, p->N = b->cols, p->K = a->cols;
  p->in_dtype = a->dtype;
  p->out_dtype = out->dtype;
  p->a = nonnull(a->data);
  /* With K == 0 the matrices span no bytes, so any ld passed validation; backends still form
   * row pointers (m * lda), which must not overflow: the stride of an empty row is 0. */
  p->lda = p->K ? a->ld : 0;
  p->b = nonnull(b->data);
  p->ldb = p->K ? b->ld : 0;
  p->out = (void *)nonnull(out->data);
  p->ldo = out->ld;
  p->bias = bias ? bias->data : NULL;
}

w8a8_status w8a8_validate_scaled_mm(const char *fn, const w8a8_handle *h, const w8a8_matrix *a,
                                    const w8a8_matrix *b, const w8a8_vector *scale_a, const w8a8_vector *scale_b,
                                    const w8a8_vector *bias, const w8a8_zero_point *zp, const w8a8_matrix *out,
                                    w8a8_mm_problem *p) {
  if (!p) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: no problem struct", fn);
  W8A8_CHECK(check_mm_operands(fn, h, a, b, out));
  const int64_t M = a->rows, N = b->cols;

  W8A8_CHECK(check_vector(fn, h, "scale_a", scale_a, W8A8_DTYPE_FP32, W8A8_ERROR_INVALID_SCALE));
  W8A8_CHECK(check_len_1_or(fn, "scale_a", scale_a, M, "per-token", "M", W8A8_ERROR_INVALID_SCALE));
  W8A8_CHECK(check_vector(fn, h, "scale_b", scale_b, W8A8_DTYPE_FP32, W8A8_ERROR_INVALID_SCALE));
  W8A8_CHECK(check_len_1_or(fn, "scale_b", scale_b, N, "per-output-channel", "N", W8A8_ERROR_INVALID_SCALE));
  if (scale_a->len == 0 && M > 0)
    return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: scale_a->len is 0; expected 1 or M = %lld", fn, LL(M));

  W8A8_CHECK(check_bias(fn, h, bias, out, N));

  w8a8_azp_mode azp_mode = W8A8_AZP_NONE;
  if (zp) {
    if (a->dtype != W8A8_DTYPE_INT8)
      return w8a8_err(W8A8_ERROR_INVALID_ZERO_POINT, "%s: zp is given but a is %s; zero points exist for int8 only",
                      fn, dname(a->dtype));
    W8A8_CHECK(check_vector(fn, h, "zp->azp_adj", &zp->azp_adj, W8A8_DTYPE_INT32, W8A8_ERROR_INVALID_ZERO_POINT));
    if (zp->azp_adj.len != N)
      return w8a8_err(W8A8_ERROR_INVALID_ZERO_POINT, "%s: zp->azp_adj.len is %lld; expected N = %lld", fn,
                      LL(zp->azp_adj.len), LL(N));
    if (!zp->azp.data) {
      azp_mode = W8A8_AZP_ADJ_ONLY;
    } else {
      W8A8_CHECK(check_vector(fn, h, "zp->azp", &zp->azp, W8A8_DTYPE_INT32, W8A8_ERROR_INVALID_ZERO_POINT));
      W8A8_CHECK(check_len_1_or(fn, "zp->azp", &zp->azp, M, "per-token", "M", W8A8_ERROR_INVALID_ZERO_POINT));
      azp_mode = (zp->azp.len == M && M != 1) ? W8A8_AZP_PER_TOKEN : W8A8_AZP_PER_TENSOR;
    }
  }

  /* The output must not alias any input. */
  span ins[7];
  int n = 0;
  ins[n++] = mat_span("a", a);
  ins[n++] = mat_span("b", b);
  ins[n++] = vec_span("scale_a", scale_a, scale_a->len);
  ins[n++] = vec_span("scale_b", scale_b, scale_b->len);
  if (bias) ins[n++] = vec_span("bias", bias, bias->len);
  if (zp) ins[n++] = vec_span("zp->azp_adj", &zp->azp_adj, zp->azp_adj.len);
  if (azp_mode == W8A8_AZP_PER_TENSOR || azp_mode == W8A8_AZP_PER_TOKEN)
    ins[n++] = vec_span("zp->azp", &zp->azp, zp->azp.len);
  W8A8_CHECK(check_overlap(fn, mat_span("out", out), ins, n));

  fill_mm_operands(p, a, b, out, bias);
  p->scale_a = (const float *)scale_a->data;
  p->scale_a_per_token = scale_a->len == M && M != 1;
  p->scale_b = (const float *)scale_b->data;
  p->scale_b_per_channel = scale_b->len == N && N != 1;
  p->azp_mode = azp_mode;
  p->azp = (azp_mode == W8A8_AZP_PER_TENSOR || azp_mode == W8A8_AZP_PER_TOKEN) ? (const int32_t *)zp->azp.data : NULL;
  p->azp_adj = zp ? (const int32_t *)zp->azp_adj.data : NULL;
  return W8A8_SUCCESS;
}

static bool is_static_scale_ok(float s) { return isfinite(s) && s > 0.0f; }

/* The quantizers' checks. x_per_q = 1: w8a8_quantize (x and q are [M,K]); 2: w8a8_silu_mul_quantize
 * (x is [M,2K]: gate, then up; q is [M,K]). The problem is over q's [M,K] either way. */
/* x and q of a quantizer: x [M, x_per_q * K] fp32 / bf16 / fp16 (x_per_q 2: the fused SiLU-mul's gate, then up),
 * q [M, K] int8 or fp8_e4m3, both row-major. */
static w8a8_status check_quant_operands(const char *fn, const w8a8_handle *h, const w8a8_matrix *x,
                                        const w8a8_matrix *q, int x_per_q) {
  W8A8_CHECK(check_matrix(fn, h, "x", x));
  W8A8_CHECK(check_matrix(fn, h, "q", q));
  if (x->dtype != W8A8_DTYPE_FP32 && x->dtype != W8A8_DTYPE_BF16 && x->dtype != W8A8_DTYPE_FP16)
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: x->dtype is %s; expected fp32, bf16 or fp16", fn, dname(x->dtype));
  if (q->dtype != W8A8_DTYPE_INT8 && q->dtype != W8A8_DTYPE_FP8_E4M3)
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: q->dtype is %s; expected int8 or fp8_e4m3", fn, dname(q->dtype));
  if (x->layout != W8A8_ROW_MAJOR || q->layout != W8A8_ROW_MAJOR)
    return w8a8_err(W8A8_ERROR_INVALID_LAYOUT, "%s: %s must be row-major [M,K]", fn,
                    x->layout != W8A8_ROW_MAJOR ? "x" : "q");
  if (x_per_q == 2 && x->cols % 2)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE,
                    "%s: x is %lld x %lld; x->cols must be even (gate = the first half of the columns, up = the "
                    "second half)",
                    fn, LL(x->rows), LL(x->cols));
  /* x->cols / x_per_q is exact (x->cols is even for the fused call): q->cols * x_per_q could pass INT64_MAX. */
  if (q->rows != x->rows || q->cols != x->cols / x_per_q) {
    if (x_per_q == 1)
      return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: q is %lld x %lld; expected the shape of x, %lld x %lld", fn,
                      LL(q->rows), LL(q->cols), LL(x->rows), LL(x->cols));
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: q is %lld x %lld; x is %lld x %lld, so q must be %lld x %lld", fn,
                    LL(q->rows), LL(q->cols), LL(x->rows), LL(x->cols), LL(x->rows), LL(x->cols / 2));
  }
  if (x->rows > INT32_MAX || x->cols > INT32_MAX)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: x is %lld x %lld; each size must be < 2^31", fn, LL(x->rows),
                    LL(x->cols));
  return W8A8_SUCCESS;
}

static w8a8_status validate_quant(const char *fn, const w8a8_handle *h, const w8a8_matrix *x, const w8a8_matrix *q,
                                  int x_per_q, w8a8_quant_mode mode, const w8a8_vector *scale,
                                  const w8a8_vector *azp, const float *scale_ub, w8a8_quant_problem *p) {
  if (!p) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: no problem struct", fn);
  W8A8_CHECK(check_quant_operands(fn, h, x, q, x_per_q));
  if (mode != W8A8_QUANT_STATIC_PER_TENSOR && mode != W8A8_QUANT_DYNAMIC_PER_TENSOR &&
      mode != W8A8_QUANT_DYNAMIC_PER_TOKEN)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: mode is %d; expected a w8a8_quant_mode (0, 1 or 2)", fn, (int)mode);
  int64_t M = x->rows, K = q->cols;

  W8A8_CHECK(check_vector(fn, h, "scale", scale, W8A8_DTYPE_FP32, W8A8_ERROR_INVALID_SCALE));
  int64_t want = mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? M : 1;
  if (scale->len != want)
    return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: scale->len is %lld; %s quantization needs %lld", fn,
                    LL(scale->len),
                    mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? "per-token (M)" : "per-tensor", LL(want));
  if (mode == W8A8_QUANT_STATIC_PER_TENSOR && h->kind == W8A8_DEVICE_CPU) {
    float s = *(const float *)scale->data;
    if (!is_static_scale_ok(s))
      return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: static scale is %g; it must be finite and > 0", fn, (double)s);
  }
  if (scale_ub) {
    if (mode != W8A8_QUANT_DYNAMIC_PER_TOKEN)
      return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: scale_ub is given but mode is not W8A8_QUANT_DYNAMIC_PER_TOKEN",
                      fn);
    if ((uintptr_t)scale_ub % 4)
      return w8a8_err(W8A8_ERROR_MISALIGNED, "%s: scale_ub %p is not 4-byte aligned", fn, (const void *)scale_ub);
    W8A8_CHECK(check_ptr(fn, h, "scale_ub", scale_ub));
    if (h->kind == W8A8_DEVICE_CPU && !is_static_scale_ok(*scale_ub))
      return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: *scale_ub is %g; it must be finite and > 0", fn,
                      (double)*scale_ub);
  }
  if (azp) {
    if (q->dtype != W8A8_DTYPE_INT8)
      return w8a8_err(W8A8_ERROR_INVALID_ZERO_POINT, "%s: azp is given but q is %s; zero points exist for int8 only",
                      fn, dname(q->dtype));
    if (mode == W8A8_QUANT_DYNAMIC_PER_TENSOR)
      return w8a8_err(W8A8_ERROR_INVALID_ZERO_POINT,
                      "%s: dynamic per-tensor quantization is symmetric only; pass azp = NULL", fn);
    /* The asymmetric scale comes from min and max, which an absmax bound cannot clip:
     * refuse rather than silently ignore the argument. */
    if (scale_ub)
      return w8a8_err(W8A8_ERROR_INVALID_SCALE,
                      "%s: scale_ub is given with azp; the bound applies to symmetric per-token quantization only",
                      fn);
    W8A8_CHECK(check_vector(fn, h, "azp", azp, W8A8_DTYPE_INT32, W8A8_ERROR_INVALID_ZERO_POINT));
    if (azp->len != want)
      return w8a8_err(W8A8_ERROR_INVALID_ZERO_POINT, "%s: azp->len is %lld; expected %lld", fn, LL(azp->len),
                      LL(want));
  }

  /* Outputs: q always; scale and azp in dynamic modes. None may alias an input or each other. */
  span sx = mat_span("x", x), sq = mat_span("q", q);
  span ss = vec_span("scale", scale, scale->len);
  span sa = vec_span("azp", azp, azp ? azp->len : 0);
  span sub = {"scale_ub", 0, 0};
  if (scale_ub) {
    sub.lo = (uintptr_t)scale_ub;
    sub.hi = sub.lo + 4;
  }
  {
    span ins[4] = {sx, ss, sa, sub};
    W8A8_CHECK(check_overlap(fn, sq, ins, 4));
  }
  if (mode != W8A8_QUANT_STATIC_PER_TENSOR) {
    span ins[3] = {sx, sa, sub};
    W8A8_CHECK(check_overlap(fn, ss, ins, 3));
    span ins2[2] = {sx, sub};
    W8A8_CHECK(check_overlap(fn, sa, ins2, 2));
  }

  memset(p, 0, sizeof *p);
  p->M = M;
  p->K = K;
  p->in_dtype = x->dtype;
  p->out_dtype = q->dtype;
  p->x = nonnull(x->data);
  p->ldx = K ? x->ld : 0; /* empty rows: any ld passed, keep row pointer arithmetic in range */
  p->q = (void *)nonnull(q->data);
  p->ldq = K ? q->ld : 0;
  p->mode = mode;
  p->scale = (float *)scale->data;
  p->azp = azp ? (int32_t *)azp->data : NULL;
  p->scale_ub = scale_ub;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_validate_quantize(const char *fn, const w8a8_handle *h, const w8a8_matrix *x,
                                   const w8a8_matrix *q, w8a8_quant_mode mode, const w8a8_vector *scale,
                                   const w8a8_vector *azp, const float *scale_ub, w8a8_quant_problem *p) {
  return validate_quant(fn, h, x, q, 1, mode, scale, azp, scale_ub, p);
}

w8a8_status w8a8_validate_silu_mul_quantize(const char *fn, const w8a8_handle *h, const w8a8_matrix *x,
                                            const w8a8_matrix *q, w8a8_quant_mode mode, const w8a8_vector *scale,
                                            const w8a8_vector *azp, const float *scale_ub, w8a8_quant_problem *p) {
  return validate_quant(fn, h, x, q, 2, mode, scale, azp, scale_ub, p);
}

/* ---- block scales ------------------------------------------------------------------------------------ */

static int64_t blocks_of(int64_t n) { return (n + W8A8_BLOCK - 1) / W8A8_BLOCK; }

w8a8_status w8a8_check_scale_matrix(const char *fn, const w8a8_handle *h, const char *arg, const w8a8_matrix *s,
                                    int64_t rows, int64_t cols, const char *what, int64_t *rs, int64_t *cs) {
  if (!s) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s is NULL; expected a %s fp32 w8a8_matrix", fn, arg, what);
  if (s->dtype != W8A8_DTYPE_FP32)
    return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: %s->dtype is %s; expected fp32", fn, arg,
                    dtype_valid(s->dtype) ? dname(s->dtype) : "not a w8a8_dtype");
  if (s->rows != rows || s->cols != cols)
    return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: %s is %lld x %lld; expected %s = %lld x %lld", fn, arg,
                    LL(s->rows), LL(s->cols), what, LL(rows), LL(cols));
  W8A8_CHECK(check_matrix(fn, h, arg, s));
  *rs = s->layout == W8A8_ROW_MAJOR ? s->ld : 1;
  *cs = s->layout == W8A8_ROW_MAJOR ? 1 : s->ld;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_validate_scaled_mm_blockwise(const char *fn, const w8a8_handle *h, const w8a8_matrix *a,
                                              const w8a8_matrix *b, const w8a8_matrix *scale_a,
                                              const w8a8_matrix *scale_b, const w8a8_vector *bias,
                                              const w8a8_matrix *out, w8a8_mm_problem *p) {
  if (!p) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: no problem struct", fn);
  if (a && b && out && a->dtype == W8A8_DTYPE_INT8) /* (before the int8 K bound: not an int8 call at all) */
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: a and b are %s; block scales are for fp8_e4m3 operands", fn,
                    dname(a->dtype));
  W8A8_CHECK(check_mm_operands(fn, h, a, b, out));
  const int64_t M = a->rows, K = a->cols, N = b->cols;
  const int64_t KB = blocks_of(K), NB = blocks_of(N);
  int64_t sa_rs, sa_cs, sb_rs, sb_cs;
  W8A8_CHECK(w8a8_check_scale_matrix(fn, h, "scale_a", scale_a, M, KB, "[M, ceil(K/128)]", &sa_rs, &sa_cs));
  W8A8_CHECK(w8a8_check_scale_matrix(fn, h, "scale_b", scale_b, NB, KB, "[ceil(N/128), ceil(K/128)]", &sb_rs, &sb_cs));
  W8A8_CHECK(check_bias(fn, h, bias, out, N));
  span ins[5];
  int n = 0;
  ins[n++] = mat_span("a", a);
  ins[n++] = mat_span("b", b);
  ins[n++] = mat_span("scale_a", scale_a);
  ins[n++] = mat_span("scale_b", scale_b);
  if (bias) ins[n++] = vec_span("bias", bias, bias->len);
  W8A8_CHECK(check_overlap(fn, mat_span("out", out), ins, n));

  fill_mm_operands(p, a, b, out, bias);
  p->scale_a = (const float *)nonnull(scale_a->data);
  p->scale_b = (const float *)nonnull(scale_b->data);
  p->block_scaled = true;
  p->sa_rs = sa_rs, p->sa_cs = sa_cs, p->sb_rs = sb_rs, p->sb_cs = sb_cs;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_validate_quantize_groups(const char *fn, const w8a8_handle *h, const w8a8_matrix *x,
                                          const w8a8_matrix *q, const w8a8_matrix *scale, unsigned flags, int groups,
                                          int x_per_q, w8a8_quant_problem *p) {
  if (!p) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: no problem struct", fn);
  W8A8_CHECK(check_quant_operands(fn, h, x, q, x_per_q));
  if (q->dtype != W8A8_DTYPE_FP8_E4M3)
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: q->dtype is %s; group and block scales are for fp8_e4m3", fn,
                    dname(q->dtype));
  if (flags & ~W8A8_SCALE_UE8M0)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: flags is 0x%x; expected 0 or W8A8_SCALE_UE8M0 (0x%x)", fn, flags,
                    W8A8_SCALE_UE8M0);
  const int64_t M = q->rows, K = q->cols;
  const int block = groups == W8A8_GROUPS_BLOCK;
  int64_t rs, cs;
  W8A8_CHECK(w8a8_check_scale_matrix(fn, h, "scale", scale, block ? blocks_of(M) : M, blocks_of(K),
                                block ? "[ceil(N/128), ceil(K/128)]" : "[M, ceil(K/128)]", &rs, &cs));
  span sx = mat_span("x", x), sq = mat_span("q", q), ss = mat_span("scale", scale);
  {
    span ins[2] = {sx, ss};
    W8A8_CHECK(check_overlap(fn, sq, ins, 2));
    span ins2[1] = {sx};
    W8A8_CHECK(check_overlap(fn, ss, ins2, 1));
  }
  memset(p, 0, sizeof *p);
  p->M = M, p->K = K;
  p->in_dtype = x->dtype;
  p->out_dtype = q->dtype;
  p->x = nonnull(x->data);
  p->ldx = K ? x->ld : 0;
  p->q = (void *)nonnull(q->data);
  p->ldq = K ? q->ld : 0;
  p->scale = (float *)nonnull(scale->data);
  p->groups = groups;
  p->s_rs = rs, p->s_cs = cs;
  p->ue8m0 = (flags & W8A8_SCALE_UE8M0) != 0;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_validate_colsum(const char *fn, const w8a8_handle *h, const w8a8_matrix *b,
                                 const w8a8_vector *azp_adj, w8a8_colsum_problem *p) {
  if (!p) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: no problem struct", fn);
  W8A8_CHECK(check_matrix(fn, h, "b", b));
  if (b->dtype != W8A8_DTYPE_INT8)
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: b->dtype is %s; expected int8", fn, dname(b->dtype));
  if (b->layout != W8A8_COL_MAJOR)
    return w8a8_err(W8A8_ERROR_INVALID_LAYOUT, "%s: b must be column-major [K,N] (N rows of K); got row-major", fn);
  if (b->rows > 131071)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: K = %lld; w8a8_scaled_mm takes int8 K <= 131071 only", fn,
                    LL(b->rows));
  W8A8_CHECK(check_vector(fn, h, "azp_adj", azp_adj, W8A8_DTYPE_INT32, W8A8_ERROR_INVALID_ZERO_POINT));
  if (azp_adj->len != b->cols)
    return w8a8_err(W8A8_ERROR_INVALID_ZERO_POINT, "%s: azp_adj->len is %lld; expected N = %lld", fn,
                    LL(azp_adj->len), LL(b->cols));
  span in = mat_span("b", b);
  W8A8_CHECK(check_overlap(fn, vec_span("azp_adj", azp_adj, azp_adj->len), &in, 1));
  p->K = b->rows;
  p->N = b->cols;
  p->b = (const int8_t *)nonnull(b->data);
  p->ldb = p->K ? b->ld : 0; /* as in scaled_mm: K == 0 leaves ld unconstrained */
  p->out = (int32_t *)azp_adj->data;
  return W8A8_SUCCESS;
}
