/* tp_validate.c — local argument checks of the fused TP calls.
 *
 * Mirrors src/core/validate.c (same messages, same statuses) for the shapes of the
 * TP operations, which differ from w8a8_scaled_mm's: the all-gather's out has the
 * layer's M rows while a has this rank's M_r, and the reduce-scatter's out has M_r
 * rows of the layer's M. Only what one rank can see is checked here; what the ranks
 * must agree on is checked by the agreement collective (comm.c). Nothing is written. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "tp_internal.h"

#define LL(x) ((long long)(x))

static const char *dname(w8a8_dtype d) { return w8a8_dtype_name(d); }

typedef struct span {
  const char *name;
  uintptr_t lo, hi;
} span;

static span mat_span(const char *name, const w8a8_matrix *m) {
  span s = {name, 0, 0};
  if (m) w8a8_matrix_extent(m, &s.lo, &s.hi);
  return s;
}

static span vec_span(const char *name, const w8a8_vector *v) {
  span s = {name, 0, 0};
  if (v && v->data && v->len > 0) {
    s.lo = (uintptr_t)v->data;
    s.hi = s.lo + (uintptr_t)v->len * w8a8_dtype_size(v->dtype);
  }
  return s;
}

static bool overlaps(span x, span y) { return x.lo < x.hi && y.lo < y.hi && x.lo < y.hi && y.lo < x.hi; }

static w8a8_status check_matrix(const char *fn, const char *arg, const w8a8_matrix *m) {
  if (!m) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s is NULL; expected a w8a8_matrix descriptor", fn, arg);
  if (m->dtype < W8A8_DTYPE_INT8 || m->dtype > W8A8_DTYPE_INT32)
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: %s->dtype is %d, which is not a w8a8_dtype", fn, arg, (int)m->dtype);
  if (m->layout != W8A8_ROW_MAJOR && m->layout != W8A8_COL_MAJOR)
    return w8a8_err(W8A8_ERROR_INVALID_LAYOUT, "%s: %s->layout is %d; expected W8A8_ROW_MAJOR or W8A8_COL_MAJOR", fn,
                    arg, (int)m->layout);
  if (m->rows < 0 || m->cols < 0)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s is %lld x %lld; sizes must be >= 0", fn, arg, LL(m->rows),
                    LL(m->cols));
  if (m->rows > INT32_MAX || m->cols > INT32_MAX)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s is %lld x %lld; each size must be < 2^31", fn, arg, LL(m->rows),
                    LL(m->cols));
  int64_t inner = m->layout == W8A8_ROW_MAJOR ? m->cols : m->rows;
  int64_t outer = m->layout == W8A8_ROW_MAJOR ? m->rows : m->cols;
  int64_t min_ld = inner; /* as validate.c: an empty inner dimension accepts ld == 0 */
  if (m->ld < min_ld)
    return w8a8_err(W8A8_ERROR_INVALID_STRIDE, "%s: %s->ld is %lld; a %s %lld x %lld matrix needs ld >= %lld", fn, arg,
                    LL(m->ld), m->layout == W8A8_ROW_MAJOR ? "row-major" : "column-major", LL(m->rows), LL(m->cols),
                    LL(min_ld));
  if (outer == 0 || inner == 0) return W8A8_SUCCESS; /* empty: data may be NULL */
  size_t es = w8a8_dtype_size(m->dtype);
  /* rows, cols < 2^31; ld < 2^32 keeps the span below 2^63 bytes */
  if (m->ld > ((int64_t)1 << 32))
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s->ld is %lld; must be < 2^32", fn, arg, LL(m->ld));
  /* < 2^63 elements; up to 4-byte elements, so the byte count is checked before it is formed */
  const uint64_t elems = (uint64_t)(outer - 1) * (uint64_t)m->ld + (uint64_t)inner;
  if (elems > UINT64_MAX / es)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s spans %llu elements of %zu bytes: past the address space", fn,
                    arg, (unsigned long long)elems, es);
  uint64_t bytes = elems * es;
  if (!m->data)
    return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s->data is NULL for a non-empty %lld x %lld matrix", fn, arg,
                    LL(m->rows), LL(m->cols));
  if ((uintptr_t)m->data > UINTPTR_MAX - bytes)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s->data + %llu bytes wraps around the address space", fn, arg,
                    (unsigned long long)bytes);
  if ((uintptr_t)m->data % es)
    return w8a8_err(W8A8_ERROR_MISALIGNED, "%s: %s->data %p is not aligned to its %zu-byte %s elements", fn, arg,
                    m->data, es, dname(m->dtype));
  return W8A8_SUCCESS;
}

/* A vector of dtype `want` whose length is one of `len1` or `len2` (-1 = no second choice). */
static w8a8_status check_vector(const char *fn, const char *arg, const w8a8_vector *v, w8a8_dtype want,
                                w8a8_status bad, int64_t len1, int64_t len2, const char *expect) {
  if (!v) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s is NULL; expected a w8a8_vector descriptor", fn, arg);
  if (v->dtype != want)
    return w8a8_err(bad, "%s: %s->dtype is %s (%d); expected %s", fn, arg, dname(v->dtype), (int)v->dtype, dname(want));
  if (v->len < 0 || (v->len != len1 && v->len != len2)) /* len2 = -1 must not admit a negative len */
    return w8a8_err(bad, "%s: %s->len is %lld; expected %s", fn, arg, LL(v->len), expect);
  if (v->len > 0 && !v->data)
    return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s->data is NULL for a vector of %lld elements", fn, arg, LL(v->len));
  if (v->data && (uintptr_t)v->data % w8a8_dtype_size(want))
    return w8a8_err(W8A8_ERROR_MISALIGNED, "%s: %s->data %p is not aligned to %zu bytes", fn, arg, v->data,
                    w8a8_dtype_size(want));
  if (v->data && v->len > 0 && (uintptr_t)v->data > UINTPTR_MAX - (uintptr_t)v->len * w8a8_dtype_size(want))
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: %s wraps around the address space", fn, arg);
  return W8A8_SUCCESS;
}

static w8a8_status check_options(const char *fn, const w8a8_tp_options *opts, int *overlap, int *partials) {
  *overlap = W8A8_TP_OVERLAP_AUTO;
  *partials = W8A8_TP_PARTIALS_FP32;
  if (!opts) return W8A8_SUCCESS;
  size_t min_size = offsetof(w8a8_tp_options, overlap) + sizeof(int);
  if (opts->struct_size < min_size || opts->struct_size > 4096)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE,
                    "%s: opts->struct_size is %zu; initialise the options with W8A8_TP_OPTIONS_INIT (%zu)", fn,
                    opts->struct_size, sizeof(w8a8_tp_options));
  if (opts->overlap != W8A8_TP_OVERLAP_OFF && opts->overlap != W8A8_TP_OVERLAP_ON &&
      opts->overlap != W8A8_TP_OVERLAP_AUTO)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE,
                    "%s: opts->overlap is %d; expected W8A8_TP_OVERLAP_OFF (0, unfused), W8A8_TP_OVERLAP_ON (1, fused) "
                    "or W8A8_TP_OVERLAP_AUTO (2, the default)",
                    fn, opts->overlap);
  /* Members past the caller's struct_size are not read: a caller built against an older
   * header (struct_size 16, ending at reserved0, the old padding) gets the default. */
  if (opts->struct_size >= offsetof(w8a8_tp_options, partials) + sizeof(int)) {
    if (opts->partials != W8A8_TP_PARTIALS_FP32 && opts->partials != W8A8_TP_PARTIALS_OUT)
      return w8a8_err(W8A8_ERROR_INVALID_VALUE,
                      "%s: opts->partials is %d; expected W8A8_TP_PARTIALS_FP32 (0) or W8A8_TP_PARTIALS_OUT (1)", fn,
                      opts->partials);
    *partials = opts->partials;
  }
  *overlap = opts->overlap;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_tp_validate(const char *fn, const w8a8_comm *c, int op, const w8a8_matrix *a, const w8a8_matrix *b,
                             const w8a8_vector *scale_a, const w8a8_vector *scale_b, const w8a8_vector *bias,
                             const w8a8_zero_point *zp, const w8a8_matrix *out, const w8a8_gathered *gathered,
                             const w8a8_tp_options *opts, w8a8_tp_problem *p) {
  const bool ag = op == TP_OP_AG;
  int overlap = W8A8_TP_OVERLAP_AUTO, partials = W8A8_TP_PARTIALS_FP32;
  W8A8_CHECK(check_options(fn, opts, &overlap, &partials));
  W8A8_CHECK(check_matrix(fn, "a", a));
  W8A8_CHECK(check_matrix(fn, "b", b));
  W8A8_CHECK(check_matrix(fn, "out", out));
  W8A8_CHECK(w8a8_check_mm_kinds(fn, a, b, out));

  const int64_t K = a->cols, N = b->cols;
  const int64_t M_a = a->rows; /* AG: this rank's shard; RS: the layer's M */
  if (b->rows != K)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: a is %lld x %lld but b is %lld x %lld; b->rows must be K = %lld", fn,
                    LL(M_a), LL(K), LL(b->rows), LL(N), LL(K));
  if (out->cols != N)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: out has %lld columns; expected N = b->cols = %lld", fn,
                    LL(out->cols), LL(N));
  if (a->dtype == W8A8_DTYPE_INT8 && K > 131071)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: K = %lld; int8 accumulation is exact in int32 only for K <= 131071",
                    fn, LL(K));
  if (ag && out->rows < M_a)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE,
                    "%s: out has %lld rows but this rank's a alone has %lld; out must hold every rank's rows", fn,
                    LL(out->rows), LL(M_a));
  if (!ag && out->rows > M_a)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: out has %lld rows (this rank's shard) but a has only M = %lld", fn,
                    LL(out->rows), LL(M_a));

  W8A8_CHECK(check_vector(fn, "scale_a", scale_a, W8A8_DTYPE_FP32, W8A8_ERROR_INVALID_SCALE, 1, M_a,
                          ag ? "1 (per-tensor) or this rank's rows M_r = a->rows (per-token)"
                             : "1 (per-tensor) or M = a->rows (per-token)"));
  if (scale_a->len == 0 && M_a > 0)
    return w8a8_err(W8A8_ERROR_INVALID_SCALE, "%s: scale_a->len is 0; expected 1 or %lld", fn, LL(M_a));
  W8A8_CHECK(check_vector(fn, "scale_b", scale_b, W8A8_DTYPE_FP32, W8A8_ERROR_INVALID_SCALE, 1, N,
                          "1 (per-tensor) or N = b->cols (per-output-channel)"));
  if (bias) {
    if (bias->dtype != out->dtype)
      return w8a8_err(W8A8_ERROR_INVALID_BIAS, "%s: bias->dtype is %s; it must match out->dtype (%s)", fn,
                      dname(bias->dtype), dname(out->dtype));
    W8A8_CHECK(check_vector(fn, "bias", bias, out->dtype, W8A8_ERROR_INVALID_BIAS, N, -1, "N = b->cols"));
  }
  w8a8_azp_mode azp_mode = W8A8_AZP_NONE;
  int zp_kind = 0;
  if (zp) {
    if (a->dtype != W8A8_DTYPE_INT8)
      return w8a8_err(W8A8_ERROR_INVALID_ZERO_POINT, "%s: zp is given but a is %s; zero points exist for int8 only", fn,
                      dname(a->dtype));
    W8A8_CHECK(check_vector(fn, "zp->azp_adj", &zp->azp_adj, W8A8_DTYPE_INT32, W8A8_ERROR_INVALID_ZERO_POINT, N, -1,
                            "N = b->cols"));
    if (!zp->azp.data) {
      azp_mode = W8A8_AZP_ADJ_ONLY;
      zp_kind = 1;
    } else {
      W8A8_CHECK(check_vector(fn, "zp->azp", &zp->azp, W8A8_DTYPE_INT32, W8A8_ERROR_INVALID_ZERO_POINT, 1, M_a,
                              ag ? "1 (per-tensor) or M_r = a->rows (per-token)" : "1 or M = a->rows"));
      azp_mode = (zp->azp.len == M_a && M_a != 1) ? W8A8_AZP_PER_TOKEN : W8A8_AZP_PER_TENSOR;
      zp_kind = 2;
    }
  }

  /* Outputs and what they must not overlap. */
  span ins[8];
  int nin = 0;
  ins[nin++] = mat_span("a", a);
  ins[nin++] = mat_span("b", b);
  ins[nin++] = vec_span("scale_a", scale_a);
  ins[nin++] = vec_span("scale_b", scale_b);
  if (bias) ins[nin++] = vec_span("bias", bias);
  if (zp) ins[nin++] = vec_span("zp->azp_adj", &zp->azp_adj);
  if (zp_kind == 2) ins[nin++] = vec_span("zp->azp", &zp->azp);
  span outs[4];
  int nout = 0;
  outs[nout++] = mat_span("out", out);

  const int64_t M_total = ag ? out->rows : M_a;
  void *g_a = NULL;
  int64_t g_lda = 0;
  float *g_scale = NULL;
  int32_t *g_azp = NULL;
  if (gathered && ag) {
    if (gathered->a.data) {
      W8A8_CHECK(check_matrix(fn, "gathered->a", &gathered->a));
      if (gathered->a.dtype != a->dtype || gathered->a.layout != W8A8_ROW_MAJOR)
        return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: gathered->a must be row-major %s like a; got %s %s", fn,
                        dname(a->dtype), gathered->a.layout == W8A8_ROW_MAJOR ? "row-major" : "column-major",
                        dname(gathered->a.dtype));
      if (gathered->a.rows != M_total || gathered->a.cols != K)
        return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: gathered->a is %lld x %lld; expected M x K = %lld x %lld", fn,
                        LL(gathered->a.rows), LL(gathered->a.cols), LL(M_total), LL(K));
      g_a = gathered->a.data;
      g_lda = gathered->a.ld;
      outs[nout++] = mat_span("gathered->a", &gathered->a);
    }
    if (gathered->scale_a.data) {
      W8A8_CHECK(check_vector(fn, "gathered->scale_a", &gathered->scale_a, W8A8_DTYPE_FP32, W8A8_ERROR_INVALID_SCALE,
                              M_total, -1, "M = out->rows (one scale per gathered row)"));
      g_scale = (float *)gathered->scale_a.data;
      outs[nout++] = vec_span("gathered->scale_a", &gathered->scale_a);
    }
    if (gathered->azp.data) {
      if (zp_kind != 2)
        return w8a8_err(W8A8_ERROR_INVALID_ZERO_POINT,
                        "%s: gathered->azp is requested but zp carries no azp vector (zp is %s)", fn,
                        zp ? "a premultiplied azp_adj" : "NULL");
      W8A8_CHECK(check_vector(fn, "gathered->azp", &gathered->azp, W8A8_DTYPE_INT32, W8A8_ERROR_INVALID_ZERO_POINT,
                              M_total, -1, "M = out->rows (one zero point per gathered row)"));
      g_azp = (int32_t *)gathered->azp.data;
      outs[nout++] = vec_span("gathered->azp", &gathered->azp);
    }
  } else if (gathered && !ag) {
    return w8a8_err(W8A8_ERROR_INTERNAL, "%s: gathered outputs exist for the all-gather only", fn);
  }
  for (int i = 0; i < nout; i++) {
    for (int j = 0; j < nin; j++)
      if (overlaps(outs[i], ins[j]))
        return w8a8_err(W8A8_ERROR_OVERLAP, "%s: %s [%p, %p) overlaps %s [%p, %p); outputs must not alias inputs", fn,
                        outs[i].name, (void *)outs[i].lo, (void *)outs[i].hi, ins[j].name, (void *)ins[j].lo,
                        (void *)ins[j].hi);
    for (int j = i + 1; j < nout; j++)
      if (overlaps(outs[i], outs[j]))
        return w8a8_err(W8A8_ERROR_OVERLAP, "%s: outputs %s and %s overlap", fn, outs[i].name, outs[j].name);
  }

  /* The workspace reserved with w8a8_comm_reserve, and MPI's int counts. */
  const int64_t M_local = ag ? M_a : out->rows;
  const int64_t chunk_cap = (c->max_m + c->size - 1) / (c->size > 0 ? c->size : 1);
  bool fits = ag ? (M_total <= c->max_m && K <= c->max_k) : (M_total <= c->max_m && N <= c->max_n && M_local <= chunk_cap);
  if (!fits)
    return w8a8_err(W8A8_ERROR_WORKSPACE,
                    "%s: the communicator's workspace is reserved for max_m=%lld max_n=%lld max_k=%lld but this call "
                    "needs M=%lld N=%lld K=%lld%s; call w8a8_comm_reserve(comm, %lld, %lld, %lld) first",
                    fn, LL(c->max_m), LL(c->max_n), LL(c->max_k), LL(M_total), LL(N), LL(K),
                    ag ? "" : " (and this rank's out->rows <= ceil(max_m / W))",
                    LL(ag ? M_total : (M_total > M_local * c->size ? M_total : M_local * c->size)),
                    LL(N > c->max_n ? N : c->max_n), LL(K > c->max_k ? K : c->max_k));
  if ((ag ? M_total * K : M_total * N) > INT32_MAX || (!ag && M_local * N * c->size > INT32_MAX))
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE,
                    "%s: M x %s = %lld elements exceeds what one MPI message can count (2^31 - 1); split the call", fn,
                    ag ? "K" : "N", LL(ag ? M_total * K : M_total * N));

  memset(p, 0, sizeof *p);
  p->op = op;
  p->M_local = M_local;
  p->M_total = M_total;
  p->N = N;
  p->K = K;
  p->in_dtype = a->dtype;
  p->out_dtype = out->dtype;
  p->a = a->data;
  p->lda = a->ld;
  p->b = b->data;
  p->ldb = b->ld;
  p->out = out->data;
  p->ldo = out->ld;
  p->scale_a = (const float *)scale_a->data;
  p->scale_a_per_token = scale_a->len == M_a && M_a != 1;
  p->scale_b = (const float *)scale_b->data;
  p->scale_b_per_channel = scale_b->len == N && N != 1;
  p->bias = bias ? bias->data : NULL;
  p->has_bias = bias != NULL;
  p->azp_mode = azp_mode;
  p->azp = zp_kind == 2 ? (const int32_t *)zp->azp.data : NULL;
  p->azp_adj = zp ? (const int32_t *)zp->azp_adj.data : NULL;
  p->zp_kind = zp_kind;
  p->overlap = overlap;
  p->partials = partials;
  p->g_a = g_a;
  p->g_lda = g_lda;
  p->g_scale = g_scale;
  p->g_azp = g_azp;
  return W8A8_SUCCESS;
}

void w8a8_tp_signature(const w8a8_comm *c, const w8a8_tp_problem *p, int op, w8a8_status s,
                       int64_t sig[TP_SIG_COUNT]) {
  for (int i = 0; i < TP_SIG_COUNT; i++) sig[i] = -1;
  sig[TP_SIG_STATUS] = (int64_t)s;
  sig[TP_SIG_OP] = op;
  sig[TP_SIG_SEQ] = (int64_t)c->cur_seq;
  sig[TP_SIG_SKIPS] = c->cur_skips;
  if (s != W8A8_SUCCESS) return;
  sig[TP_SIG_M_LOCAL] = p->M_local;
  sig[TP_SIG_M_TOTAL] = p->M_total;
  sig[TP_SIG_K] = p->K;
  sig[TP_SIG_N] = p->N;
  sig[TP_SIG_IN_DTYPE] = p->in_dtype;
  sig[TP_SIG_OUT_DTYPE] = p->out_dtype;
  sig[TP_SIG_BIAS] = p->has_bias;
  sig[TP_SIG_ZP_KIND] = p->zp_kind;
  sig[TP_SIG_OVERLAP] = p->overlap;
  sig[TP_SIG_PARTIALS] = p->partials;
  sig[TP_SIG_FUSE] = p->overlap == W8A8_TP_OVERLAP_AUTO ? p->M_total >= w8a8_tp_crossover(c, op) : p->overlap;
  sig[TP_SIG_BLOCK] = p->block;
}

w8a8_status w8a8_tp_local_checks(const char *fn, const w8a8_comm *c, int op, const w8a8_matrix *a,
                                 const w8a8_matrix *b, const w8a8_vector *scale_a, const w8a8_vector *scale_b,
                                 const w8a8_vector *bias, const w8a8_zero_point *zp, const w8a8_matrix *out,
                                 const w8a8_gathered *gathered, const w8a8_tp_options *opts, w8a8_tp_problem *p) {
  W8A8_CHECK(w8a8_check_handle(fn, c->handle));
  W8A8_CHECK(w8a8_tp_validate(fn, c, op, a, b, scale_a, scale_b, bias, zp, out, gathered, opts, p));
  /* A CPU handle forcing a kernel that refuses the block GEMMs would fail after the agreement, with the all-gather's
   * messages posted (the GPU front end asks its forced kernel likewise: forced_kernel_checks). Asked of the largest
   * GEMM the call can run (every gathered row). */
  if (c->handle->kind == W8A8_DEVICE_CPU && p->N > 0)
    return w8a8_tp_forced_refusal(fn, w8a8_cpu_forced_check(c->handle, p->in_dtype, p->M_total, p->K, false));
  return W8A8_SUCCESS;
}

w8a8_status w8a8_tp_forced_refusal(const char *fn, w8a8_status s) {
  if (s == W8A8_SUCCESS) return s;
  char why[512];
  snprintf(why, sizeof why, "%s", w8a8_last_error());
  return w8a8_err(s, "%s: the handle forces a kernel that does not take this call's GEMM (W8A8_KERNEL_AUTO falls back "
                     "where it cannot): %s",
                  fn, why);
}

w8a8_status w8a8_tp_local_checks_blockwise(const char *fn, const w8a8_comm *c, int op, const w8a8_matrix *a,
                                           const w8a8_matrix *b, const w8a8_matrix *scale_a,
                                           const w8a8_matrix *scale_b, const w8a8_vector *bias,
                                           const w8a8_matrix *out, const w8a8_tp_options *opts, w8a8_tp_problem *p) {
  W8A8_CHECK(w8a8_check_handle(fn, c->handle));
  if (a && b && out && a->dtype == W8A8_DTYPE_INT8)
    return w8a8_err(W8A8_ERROR_INVALID_DTYPE, "%s: a and b are %s; block scales are for fp8_e4m3 operands", fn,
                    dname(a->dtype));
  /* a, b, bias, out, opts and the workspace as the plain call checks them (its scales: a per-tensor 1 standing in) */
  static const float one = 1.0f;
  const w8a8_vector unit = w8a8_vector_make(W8A8_DTYPE_FP32, 1, (void *)&one);
  W8A8_CHECK(w8a8_tp_validate(fn, c, op, a, b, &unit, &unit, bias, NULL, out, NULL, opts, p));
  const bool ag = op == TP_OP_AG;
  const int64_t KB = (p->K + W8A8_BLOCK - 1) / W8A8_BLOCK, NB = (p->N + W8A8_BLOCK - 1) / W8A8_BLOCK;
  int64_t sa_rs, sa_cs, sb_rs, sb_cs;
  W8A8_CHECK(w8a8_check_scale_matrix(fn, c->handle, "scale_a", scale_a, a->rows, KB,
                                     ag ? "[a->rows, ceil(K/128)]" : "[M, ceil(K_r/128)] (M = a->rows, K_r = a->cols)",
                                     &sa_rs, &sa_cs));
  W8A8_CHECK(w8a8_check_scale_matrix(fn, c->handle, "scale_b", scale_b, NB, KB,
                                     ag ? "[ceil(N_r/128), ceil(K/128)]" : "[ceil(N/128), ceil(K_r/128)]", &sb_rs,
                                     &sb_cs));
  const span o = mat_span("out", out), ins[2] = {mat_span("scale_a", scale_a), mat_span("scale_b", scale_b)};
  for (int j = 0; j < 2; j++)
    if (overlaps(o, ins[j]))
      return w8a8_err(W8A8_ERROR_OVERLAP, "%s: out [%p, %p) overlaps %s [%p, %p); outputs must not alias inputs", fn,
                      (void *)o.lo, (void *)o.hi, ins[j].name, (void *)ins[j].lo, (void *)ins[j].hi);
  if (ag && p->M_total * KB > INT32_MAX)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE,
                    "%s: M x ceil(K/128) = %lld scales exceeds what one MPI message can count (2^31 - 1); split the call",
                    fn, LL(p->M_total * KB));
  /* a CPU handle forcing the AVX2 kernel, which refuses a K past its range: asked before the agreement, as the
   * plain calls ask (w8a8_tp_local_checks) */
  if (c->handle->kind == W8A8_DEVICE_CPU && p->N > 0)
    W8A8_CHECK(w8a8_tp_forced_refusal(fn, w8a8_cpu_forced_check(c->handle, p->in_dtype, p->M_total, p->K, true)));
  p->block = true;
  p->scale_a = (const float *)scale_a->data;
  p->scale_b = (const float *)scale_b->data;
  p->scale_a_per_token = p->scale_b_per_channel = false;
  p->sa_rs = sa_rs, p->sa_cs = sa_cs, p->sb_rs = sb_rs, p->sb_cs = sb_cs;
  return W8A8_SUCCESS;
}
