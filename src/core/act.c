/* act.c — w8a8_silu_mul_quantize: argument checks and dispatch.
 *
 * The checks mirror w8a8_validate_quantize (validate.c) argument for argument, with x being
 * [M, 2I] and q [M, I]; the messages name this call. The resolved problem is a
 * w8a8_quant_problem over y [M, I] (K = I): x points at the gate, the up half starts at
 * column K of the same row (internal.h). Nothing is written before every check has passed. */
#include <math.h>
#include <string.h>

#include "internal.h"

#define LL(x) ((long long)(x))

static const char fn[] = "w8a8_silu_mul_quantize";

typedef struct span {
  const char *name;
  uintptr_t lo, hi;
} span;

static span mat_span(const char *name, const w8a8_matrix *m) {
  span s = {name, 0, 0};
  w8a8_matrix_extent(m, &s.lo, &s.hi);
  return s;
}

static span vec_span(const char *name, const w8a8_vector *v) {
  span s = {name, 0, 0};
  if (v && v->data && v->len > 0) {
    s.lo = (uintptr_t)v->data;
    s.hi = s.lo + (uintptr_t)v->len * 4u; /* fp32 or int32 (checked) */
  }
  return s;
}

static w8a8_status no_overlap(span out, const span *ins, int n) {
  for (int i = 0; i < n; i++)
    if (out.lo < out.hi && ins[i].lo < ins[i].hi && out.lo < ins[i].hi && ins[i].lo < out.hi)
      return w8a8_err(W8A8_ERROR_OVERLAP,
                      "%s: %s [%p, %p) overlaps %s [%p, %p); outputs must not alias inputs or other outputs", fn,
                      out.name, (void *)out.lo, (void *)out.hi, ins[i].name, (void *)ins[i].lo,
                      (void *)ins[i].hi);
  return W8A8_SUCCESS;
}

static w8a8_status check_ptr(const w8a8_handle *h, const char *arg, const void *p) {
  if (h->kind == W8A8_DEVICE_CUDA && p) return w8a8_cuda_check_pointer(h, fn, arg, p);
  return W8A8_SUCCESS;
}

/* A row-major matrix of one of two dtypes (what both arguments of this call are). */
static w8a8_status check_matrix(const w8a8_handle *h, const char *arg, const w8a8_matrix *m, w8a8_dtype d1,
                                w8a8_dtype d2, w8a8_dtype d3) {
  if (!m) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s is NULL; expected a w8a8_matrix descriptor", fn, arg);
  if (m->dtype != d1 && m->dtype != d2 && m->dtype != d3) {
    if (d3 == d2)
      return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: %s->dtype is %s (%d); expected %s or %s", fn, arg,
                      w8a8_dtype_name(m->dtype), (int)m->dtype, w8a8_dtype_name(d1), w8a8_dtype_name(d2));
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: %s->dtype is %s (%d); expected %s, %s or %s", fn, arg,
                    w8a8_dtype_name(m->dtype), (int)m->dtype, w8a8_dtype_name(d1), w8a8_dtype_name(d2),
                    w8a8_dtype_name(d3));
  }
  if (m->layout != W8A8_ROW_MAJOR)
    return w8a8_err(W8A8_ERROR_INVALID_LAYOUT, "%s: %s->layout is %d; %s must be row-major", fn, arg, (int)m->layout,
                    arg);
  if (m->rows < 0 || m->cols < 0)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s is %lld x %lld; sizes must be >= 0", fn, arg, LL(m->rows),
                    LL(m->cols));
  if (m->rows > INT32_MAX || m->cols > INT32_MAX)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s is %lld x %lld; each size must be < 2^31", fn, arg,
                    LL(m->rows), LL(m->cols));
  if (m->ld < m->cols)
    return w8a8_err(W8A8_ERROR_INVALID_STRIDE, "%s: %s->ld is %lld; a row-major %lld x %lld matrix needs ld >= %lld",
                    fn, arg, LL(m->ld), LL(m->rows), LL(m->cols), LL(m->cols));
  if (m->rows == 0 || m->cols == 0) return W8A8_SUCCESS; /* empty: data may be NULL, ld unused */
  /* bytes = ((rows - 1) * ld + cols) * esize must stay below 2^62 */
  const uint64_t lim = (uint64_t)1 << 62, es = w8a8_dtype_size(m->dtype);
  const uint64_t o = (uint64_t)(m->rows - 1), ld = (uint64_t)m->ld;
  if ((ld != 0 && o > lim / ld) || o * ld + (uint64_t)m->cols > lim / es)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s (%lld x %lld, ld %lld) spans more than 2^62 bytes", fn, arg,
                    LL(m->rows), LL(m->cols), LL(m->ld));
  const uint64_t bytes = (o * ld + (uint64_t)m->cols) * es;
  if (!m->data)
    return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s->data is NULL for a non-empty %lld x %lld matrix", fn, arg,
                    LL(m->rows), LL(m->cols));
  if ((uintptr_t)m->data > UINTPTR_MAX - bytes)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s->data + %llu bytes wraps around the address space", fn, arg,
                    (unsigned long long)bytes);
  if ((uintptr_t)m->data % es)
    return w8a8_err(W8A8_ERROR_MISALIGNED, "%s: %s->data %p is not aligned to its %u-byte %s elements", fn, arg,
                    m->data, (unsigned)es, w8a8_dtype_name(m->dtype));
  return check_ptr(h, arg, m->data);
}

/* An fp32 (scale) or int32 (azp) vector of exactly `want` elements. */
static w8a8_status check_vector(const w8a8_handle *h, const char *arg, const w8a8_vector *v, w8a8_dtype dt,
                                int64_t want, const char *what, w8a8_status bad) {
  if (!v) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s is NULL; expected a w8a8_vector descriptor", fn, arg);
  if (v->dtype != dt)
    return w8a8_err(bad, "%s: %s->dtype is %s (%d); expected %s", fn, arg, w8a8_dtype_name(v->dtype), (int)v->dtype,
                    w8a8_dtype_name(dt));
  if (v->len != want)
    return w8a8_err(bad, "%s: %s->len is %lld; %s needs %lld", fn, arg, LL(v->len), what, LL(want));
  if (want == 0) return W8A8_SUCCESS; /* per-token with M == 0: data may be NULL */
  if (!v->data)
    return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s->data is NULL for a vector of %lld elements", fn, arg,
                    LL(v->len));
  if ((uintptr_t)v->data % 4)
    return w8a8_err(W8A8_ERROR_MISALIGNED, "%s: %s->data %p is not aligned to 4 bytes", fn, arg, v->data);
  /* want <= 2^31: 4 * want bytes cannot overflow */
  if ((uintptr_t)v->data > UINTPTR_MAX - (uint64_t)want * 4u)
    return w8a8_err(bad, "%s: %s->data + %llu bytes wraps around the address space", fn, arg,
                    (unsigned long long)want * 4u);
  return check_ptr(h, arg, v->data);
}

static bool static_scale_ok(float s) { return isfinite(s) && s > 0.0f; }

static w8a8_status validate(const w8a8_handle *h, const w8a8_matrix *x, const w8a8_matrix *q, w8a8_quant_mode mode,
                            const w8a8_vector *scale, const w8a8_vector *azp, const float *scale_ub,
                            w8a8_quant_problem *p) {
  W8A8_CHECK(check_matrix(h, "x", x, W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16));
  W8A8_CHECK(check_matrix(h, "q", q, W8A8_DTYPE_INT8, W8A8_DTYPE_FP8_E4M3, W8A8_DTYPE_FP8_E4M3));
  if (x->cols % 2)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE,
                    "%s: x is %lld x %lld; x->cols must be even (gate = the first half of the columns, up = the "
                    "second half)",
                    fn, LL(x->rows), LL(x->cols));
  const int64_t M = x->rows, I = x->cols / 2;
  if (q->rows != M || q->cols != I)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: q is %lld x %lld; x is %lld x %lld, so q must be %lld x %lld", fn,
                    LL(q->rows), LL(q->cols), LL(M), LL(x->cols), LL(M), LL(I));
  if (mode != W8A8_QUANT_STATIC_PER_TENSOR && mode != W8A8_QUANT_DYNAMIC_PER_TENSOR &&
      mode != W8A8_QUANT_DYNAMIC_PER_TOKEN)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: mode is %d; expected a w8a8_quant_mode (0, 1 or 2)", fn, (int)mode);
  const bool per_token = mode == W8A8_QUANT_DYNAMIC_PER_TOKEN;
  const int64_t want = per_token ? M : 1;
  const char *what = per_token ? "per-token quantization (M)" : "per-tensor quantization";
  W8A8_CHECK(check_vector(h, "scale", scale, W8A8_DTYPE_FP32, want, what, W8A8_ERROR_INVALID_SCALE));
  if (mode == W8A8_QUANT_STATIC_PER_TENSOR && h->kind == W8A8_DEVICE_CPU) {
    const float s = *(const float *)scale->data;
    if (!static_scale_ok(s))
      return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: static scale is %g; it must be finite and > 0", fn, (double)s);
  }
  if (scale_ub) {
    if (!per_token)
      return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: scale_ub is given but mode is not W8A8_QUANT_DYNAMIC_PER_TOKEN",
                      fn);
    if ((uintptr_t)scale_ub % 4)
      return w8a8_err(W8A8_ERROR_MISALIGNED, "%s: scale_ub %p is not 4-byte aligned", fn, (const void *)scale_ub);
    W8A8_CHECK(check_ptr(h, "scale_ub", scale_ub));
    if (h->kind == W8A8_DEVICE_CPU && !static_scale_ok(*scale_ub))
      return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: *scale_ub is %g; it must be finite and > 0", fn,
                      (double)*scale_ub);
  }
  if (azp) {
    if (q->dtype != W8A8_DTYPE_INT8)
      return w8a8_err(W8A8_ERROR_INVALID_ZERO_POINT, "%s: azp is given but q is %s; zero points exist for int8 only",
                      fn, w8a8_dtype_name(q->dtype));
    if (mode == W8A8_QUANT_DYNAMIC_PER_TENSOR)
      return w8a8_err(W8A8_ERROR_INVALID_ZERO_POINT,
                      "%s: dynamic per-tensor quantization is symmetric only; pass azp = NULL", fn);
    if (scale_ub)
      return w8a8_err(W8A8_ERROR_INVALID_SCALE,
                      "%s: scale_ub is given with azp; the bound applies to symmetric per-token quantization only",
                      fn);
    W8A8_CHECK(check_vector(h, "azp", azp, W8A8_DTYPE_INT32, want, what, W8A8_ERROR_INVALID_ZERO_POINT));
  }

  /* Outputs: q always; scale and azp in dynamic modes. None may alias an input or another output. */
  const span sx = mat_span("x", x), sq = mat_span("q", q), ss = vec_span("scale", scale), sa = vec_span("azp", azp);
  span sub = {"scale_ub", 0, 0};
  if (scale_ub) {
    sub.lo = (uintptr_t)scale_ub;
    sub.hi = sub.lo + 4;
  }
  {
    const span ins[4] = {sx, ss, sa, sub};
    W8A8_CHECK(no_overlap(sq, ins, 4));
  }
  if (mode != W8A8_QUANT_STATIC_PER_TENSOR) {
    const span ins[3] = {sx, sa, sub};
    W8A8_CHECK(no_overlap(ss, ins, 3));
    const span ins2[2] = {sx, sub};
    W8A8_CHECK(no_overlap(sa, ins2, 2));
  }

  /* Empty matrices may have data == NULL; the problem never carries NULL (backends form row
   * pointers even when there are no elements). The stand-in is never dereferenced. */
  static _Alignas(64) const uint8_t empty_stand_in[64];
  memset(p, 0, sizeof *p);
  p->M = M;
  p->K = I;
  p->in_dtype = x->dtype;
  p->out_dtype = q->dtype;
  p->x = x->data ? x->data : empty_stand_in;
  p->ldx = I ? x->ld : 0; /* empty rows: any ld passed; keep m * ldx in range */
  p->q = q->data ? q->data : (void *)empty_stand_in;
  p->ldq = I ? q->ld : 0;
  p->mode = mode;
  p->scale = (float *)scale->data;
  p->azp = azp ? (int32_t *)azp->data : NULL;
  p->scale_ub = scale_ub;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_silu_mul_quantize(w8a8_handle *h, const w8a8_matrix *x, const w8a8_matrix *q, w8a8_quant_mode mode,
                                   const w8a8_vector *scale, const w8a8_vector *azp, const float *scale_ub) {
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  w8a8_quant_problem p;
  W8A8_CHECK(validate(h, x, q, mode, scale, azp, scale_ub, &p));
  if (p.M == 0) return W8A8_SUCCESS;
  if (h->kind == W8A8_DEVICE_CUDA) {
#ifdef W8A8_HAVE_CUDA
    return w8a8_cuda_silu_mul_quantize(h, &p);
#else
    return w8a8_err(W8A8_ERROR_NOT_BUILT, "%s: this libw8a8 was built without CUDA", fn);
#endif
  }
  return w8a8_cpu_silu_mul_quantize(h, &p);
}
