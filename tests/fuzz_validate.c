/* fuzz_validate.c — libFuzzer target for the validation layer (and what runs behind it).
 *
 * Random bytes become a call of w8a8_scaled_mm, w8a8_quantize, w8a8_silu_mul_quantize or w8a8_colsum on a CPU
 * handle: a consistent small problem is built first (so that many calls are valid and
 * really compute), then a few fields are corrupted (dtypes, layouts, sizes, strides,
 * lengths, NULLs, pointers anywhere in a small arena so that buffers overlap, garbage
 * addresses, extreme values, and huge dimensions up to INT64_MAX with a matching stride and
 * an empty other dimension, which only the checks relating the arguments can refuse: their
 * size products must not overflow). Every buffer lives in one arena.
 *
 * Properties checked (a violation traps, which libFuzzer reports as a crash):
 *   - no crash, no sanitizer report (ASan + UBSan);
 *   - a failed call returns a real status, names the call in w8a8_last_error(), and
 *     leaves every byte of the arena as it was;
 *   - a call that validation accepted satisfies what the header promises (dtype
 *     combinations, layouts, shapes, lengths, no output overlapping an input, checked
 *     here independently); when all its buffers lie inside the arena it runs, succeeds,
 *     and writes only the bytes of its outputs (not even a stride's padding).
 *
 * Build: make fuzz (clang -fsanitize=fuzzer,address,undefined, CPU-only library).
 * Run:   sh tests/run_fuzz.sh build/bin/fuzz_validate 60 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"

#define ARENA_BYTES 16384
#define REGION 2048 /* default buffers are REGION apart, so they do not overlap */

static uint8_t *arena, *snap, *allowed;
static w8a8_handle *handle;

#define FAIL(...)                                   \
  do {                                              \
    fprintf(stderr, "fuzz_validate: " __VA_ARGS__); \
    fprintf(stderr, "\n");                          \
    __builtin_trap();                               \
  } while (0)

/* ---- byte reader ---------------------------------------------------------- */
typedef struct reader {
  const uint8_t *p;
  size_t n;
} reader;
static uint8_t rd8(reader *r) {
  if (!r->n) return 0;
  r->n--;
  return *r->p++;
}
static uint64_t rd64(reader *r) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | rd8(r);
  return v;
}

/* Values at the edges validation guards: negative, the 2^31 limits, int8's K limit, and sizes whose products with a
 * stride, an element size or 2 (w8a8_silu_mul_quantize's x has 2K columns) pass INT64_MAX. */
static const int64_t evil[] = {-1,
                               -2,
                               INT64_MIN,
                               INT64_MAX,
                               INT64_C(1) << 31,
                               (INT64_C(1) << 31) - 1,
                               INT64_C(1) << 62,
                               INT64_C(1) << 40,
                               131071,
                               131072,
                               0,
                               1,
                               INT64_C(1) << 32,
                               -(INT64_C(1) << 31),
                               (INT64_C(1) << 58) + 1,
                               4096,
                               INT64_MAX - 1,
                               (INT64_C(1) << 62) + 1,
                               INT64_MAX / 2,
                               INT64_MAX / 2 + 1,
                               (INT64_C(1) << 61) + 1,
                               INT64_MAX / 3 + 1,
                               (INT64_C(1) << 32) + 1,
                               (INT64_C(1) << 31) + 1};
#define NEVIL ((int)(sizeof evil / sizeof evil[0]))

static int64_t rd_value(reader *r) { /* a corrupting value: small, evil, or anything */
  uint8_t k = rd8(r);
  if (k < 128) return k % 40;
  if (k < 224) return evil[k % NEVIL];
  return (int64_t)rd64(r);
}

/* A huge but self-consistent dimension: rows or cols set to a corrupting value, ld to the inner size (plus 0..2,
 * where that fits), and half the time the other dimension 0, so that the matrix spans no bytes and passes its own
 * checks: only the checks that relate it to the other arguments can refuse it. */
static void huge_dim(reader *r, w8a8_matrix *m) {
  const int64_t v = rd_value(r);
  if (rd8(r) & 1)
    m->rows = v;
  else
    m->cols = v;
  const int64_t inner = m->layout == W8A8_COL_MAJOR ? m->rows : m->cols, pad = rd8(r) % 3;
  m->ld = inner > INT64_MAX - pad ? inner : inner + pad;
  if (rd8(r) & 1) {
    if (m->layout == W8A8_COL_MAJOR)
      m->cols = 0;
    else
      m->rows = 0;
  }
}

static void *rd_pointer(reader *r, int allow_garbage) {
  uint8_t k = rd8(r);
  if (k < 24) return NULL;
  if (allow_garbage && k < 40) {
    static const uintptr_t garbage[8] = {0x10, 0x1000, (uintptr_t)-16, (uintptr_t)-4096, 0x7fffffff0000ull, 1, 3,
                                         (uintptr_t)-1};
    return (void *)garbage[k & 7];
  }
  size_t off = ((size_t)rd8(r) << 8 | rd8(r)) % ARENA_BYTES;
  return arena + off;
}

/* ---- independent extents -------------------------------------------------- */
typedef struct ext {
  int valid;    /* the byte count fits and lies in the address space */
  uintptr_t lo; /* [lo, hi) */
  uintptr_t hi;
} ext;

static ext mat_ext(const w8a8_matrix *m) {
  ext e = {1, 0, 0};
  __int128 outer = m->layout == W8A8_ROW_MAJOR ? m->rows : m->cols;
  __int128 inner = m->layout == W8A8_ROW_MAJOR ? m->cols : m->rows;
  if (outer <= 0 || inner <= 0) return e;
  __int128 bytes = ((outer - 1) * m->ld + inner) * (__int128)w8a8_dtype_size(m->dtype);
  __int128 hi = (__int128)(uintptr_t)m->data + bytes;
  if (bytes <= 0 || hi > (__int128)UINTPTR_MAX) {
    e.valid = 0;
    return e;
  }
  e.lo = (uintptr_t)m->data;
  e.hi = (uintptr_t)hi;
  return e;
}
static ext vec_ext(const w8a8_vector *v, w8a8_dtype as) {
  ext e = {1, 0, 0};
  if (!v || v->len <= 0 || !v->data) return e;
  __int128 hi = (__int128)(uintptr_t)v->data + (__int128)v->len * (__int128)w8a8_dtype_size(as);
  if (hi > (__int128)UINTPTR_MAX) {
    e.valid = 0;
    return e;
  }
  e.lo = (uintptr_t)v->data;
  e.hi = (uintptr_t)hi;
  return e;
}
static int in_arena(ext e) {
  if (!e.valid) return 0;
  if (e.lo == e.hi) return 1;
  return e.lo >= (uintptr_t)arena && e.hi <= (uintptr_t)arena + ARENA_BYTES;
}
static int ext_overlap(ext a, ext b) { return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi; }

/* Mark the bytes of a row-major matrix's elements (not its padding) as writable. */
static void allow_matrix(const w8a8_matrix *m) {
  size_t es = w8a8_dtype_size(m->dtype);
  if (m->cols <= 0) return; /* no elements: the pointer may be anything (an empty matrix's is not read) */
  for (int64_t r = 0; r < m->rows; r++) {
    uint8_t *row = (uint8_t *)m->data + (size_t)(r * m->ld) * es;
    memset(allowed + (row - arena), 1, (size_t)m->cols * es);
  }
}
static void allow_vector(const w8a8_vector *v, size_t es) {
  if (v && v->len > 0) memset(allowed + ((uint8_t *)v->data - arena), 1, (size_t)v->len * es);
}

static void check_failure(const char *fn, w8a8_status s) {
  if (s <= W8A8_SUCCESS || s >= W8A8_STATUS_COUNT) FAIL("%s returned status %d", fn, (int)s);
  const char *msg = w8a8_last_error();
  if (strncmp(msg, fn, strlen(fn)) != 0) FAIL("%s: message does not name the call: \"%s\"", fn, msg);
  if (memcmp(snap, arena, ARENA_BYTES) != 0) FAIL("%s failed (%s) but wrote the arena", fn, msg);
}

static void check_writes(const char *fn) {
  for (size_t i = 0; i < ARENA_BYTES; i++)
    if (snap[i] != arena[i] && !allowed[i]) FAIL("%s wrote arena byte %zu, outside its outputs", fn, i);
}

/* ---- scaled_mm ------------------------------------------------------------ */
static void fuzz_mm(reader *r) {
  int64_t M = rd8(r) % 13, N = rd8(r) % 13, K = rd8(r) % 40;
  uint8_t f = rd8(r);
  w8a8_dtype in = (f & 1) ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
  static const w8a8_dtype outs[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  w8a8_dtype od = outs[(f >> 1) % 3];
  w8a8_matrix a = w8a8_matrix_make(in, W8A8_ROW_MAJOR, M, K, K + (f >> 3 & 3), arena + 0 * REGION);
  w8a8_matrix b = w8a8_matrix_make(in, W8A8_COL_MAJOR, K, N, K + (f >> 5 & 3), arena + 1 * REGION);
  w8a8_matrix out = w8a8_matrix_make(od, W8A8_ROW_MAJOR, M, N, N + (rd8(r) & 3), arena + 2 * REGION);
  uint8_t g = rd8(r);
  w8a8_vector sa = w8a8_vector_make(W8A8_DTYPE_FP32, (g & 1) ? M : 1, arena + 3 * REGION);
  w8a8_vector sb = w8a8_vector_make(W8A8_DTYPE_FP32, (g & 2) ? N : 1, arena + 4 * REGION);
  w8a8_vector bias = w8a8_vector_make(od, N, arena + 5 * REGION);
  w8a8_zero_point zp;
  zp.azp = w8a8_vector_make(W8A8_DTYPE_INT32, (g & 8) ? M : 1, (g & 16) ? arena + 6 * REGION : NULL);
  zp.azp_adj = w8a8_vector_make(W8A8_DTYPE_INT32, N, arena + 7 * REGION);
  const w8a8_matrix *pa = &a, *pb = &b, *po = &out;
  const w8a8_vector *psa = &sa, *psb = &sb, *pbias = (g & 4) ? &bias : NULL;
  const w8a8_zero_point *pzp = (g & 32) && in == W8A8_DTYPE_INT8 ? &zp : NULL;

  int nmut = rd8(r) % 4;
  for (int i = 0; i < nmut; i++) {
    uint8_t which = rd8(r) % 27;
    w8a8_matrix *mats[3] = {&a, &b, &out};
    w8a8_vector *vecs[5] = {&sa, &sb, &bias, &zp.azp, &zp.azp_adj};
    if (which < 15) { /* a matrix field */
      w8a8_matrix *m = mats[which % 3];
      switch (which / 3) {
        case 0: m->dtype = (w8a8_dtype)(rd8(r) % 8); break;
        case 1: m->layout = (w8a8_layout)(rd8(r) % 3); break;
        case 2: {
          int64_t v = rd_value(r);
          switch (rd8(r) % 3) {
            case 0: m->rows = v; break;
            case 1: m->cols = v; break;
            default: m->ld = v; break;
          }
          break;
        }
        case 3: m->data = rd_pointer(r, 1); break;
        default: huge_dim(r, m); break;
      }
    } else if (which < 25) { /* a vector field */
      w8a8_vector *v = vecs[(which - 15) % 5];
      switch ((which - 15) / 5) {
        case 0: v->len = rd_value(r); break;
        default:
          if (rd8(r) & 1)
            v->dtype = (w8a8_dtype)(rd8(r) % 8);
          else
            v->data = rd_pointer(r, 0);
          break;
      }
    } else if (which == 25) {
      switch (rd8(r) % 4) {
        case 0: pa = NULL; break;
        case 1: pb = NULL; break;
        case 2: po = NULL; break;
        default: psa = NULL; break;
      }
    } else {
      pzp = (rd8(r) & 1) ? &zp : NULL;
      pbias = (rd8(r) & 1) ? &bias : NULL;
    }
  }
  /* scales and data: finite positive scales (their values are not validated) */
  for (int i = 0; i < 64; i++) ((float *)(arena + 3 * REGION))[i] = 0.5f + (float)(i & 7) * 0.125f;
  for (int i = 0; i < 64; i++) ((float *)(arena + 4 * REGION))[i] = 0.25f + (float)(i & 3) * 0.25f;
  memcpy(snap, arena, ARENA_BYTES);

  static const char fn[] = "w8a8_scaled_mm";
  w8a8_mm_problem p;
  w8a8_status vs = w8a8_validate_scaled_mm(fn, handle, pa, pb, psa, psb, pbias, pzp, po, &p);
  if (vs != W8A8_SUCCESS) {
    check_failure(fn, vs);
    w8a8_status s = w8a8_scaled_mm(handle, pa, pb, psa, psb, pbias, pzp, po);
    if (s != vs) FAIL("validation said %d, the call %d", (int)vs, (int)s);
    check_failure(fn, s);
    return;
  }
  /* Accepted: what the header promises must hold. */
  if (!pa || !pb || !po || !psa || !psb) FAIL("accepted a NULL descriptor");
  if (!(a.dtype == W8A8_DTYPE_INT8 || a.dtype == W8A8_DTYPE_FP8_E4M3) || b.dtype != a.dtype)
    FAIL("accepted a=%d b=%d", a.dtype, b.dtype);
  if (out.dtype != W8A8_DTYPE_FP32 && out.dtype != W8A8_DTYPE_BF16 && out.dtype != W8A8_DTYPE_FP16)
    FAIL("accepted out dtype %d", out.dtype);
  if (a.layout != W8A8_ROW_MAJOR || b.layout != W8A8_COL_MAJOR || out.layout != W8A8_ROW_MAJOR)
    FAIL("accepted layouts %d %d %d", a.layout, b.layout, out.layout);
  int64_t m_ = a.rows, k_ = a.cols, n_ = b.cols;
  if (b.rows != k_ || out.rows != m_ || out.cols != n_ || m_ < 0 || n_ < 0 || k_ < 0) FAIL("accepted bad shapes");
  if (a.ld < k_ || b.ld < k_ || out.ld < n_) FAIL("accepted ld < inner size");
  if (a.dtype == W8A8_DTYPE_INT8 && k_ > 131071) FAIL("accepted int8 K = %lld", (long long)k_);
  if (!(sa.len == 1 || sa.len == m_) || !(sb.len == 1 || sb.len == n_)) FAIL("accepted scale lengths");
  if (sa.dtype != W8A8_DTYPE_FP32 || sb.dtype != W8A8_DTYPE_FP32) FAIL("accepted scale dtype");
  if (pbias && (bias.len != n_ || bias.dtype != out.dtype)) FAIL("accepted bias");
  if (pzp && (a.dtype != W8A8_DTYPE_INT8 || zp.azp_adj.len != n_ || zp.azp_adj.dtype != W8A8_DTYPE_INT32))
    FAIL("accepted zero point");
  int has_azp = pzp && zp.azp.data;
  if (has_azp && (!(zp.azp.len == 1 || zp.azp.len == m_) || zp.azp.dtype != W8A8_DTYPE_INT32)) FAIL("accepted azp");
  ext eo = mat_ext(&out), ea = mat_ext(&a), eb = mat_ext(&b), esa = vec_ext(&sa, W8A8_DTYPE_FP32),
      esb = vec_ext(&sb, W8A8_DTYPE_FP32);
  ext ebias = pbias ? vec_ext(&bias, out.dtype) : (ext){1, 0, 0};
  ext eadj = pzp ? vec_ext(&zp.azp_adj, W8A8_DTYPE_INT32) : (ext){1, 0, 0};
  ext eazp = has_azp ? vec_ext(&zp.azp, W8A8_DTYPE_INT32) : (ext){1, 0, 0};
  ext ins[7] = {ea, eb, esa, esb, ebias, eadj, eazp};
  for (int i = 0; i < 7; i++)
    if (ext_overlap(eo, ins[i])) FAIL("accepted out overlapping input %d", i);
  /* Run it only when every buffer lies in the arena (else the descriptor lies about memory). */
  for (int i = 0; i < 7; i++)
    if (!in_arena(ins[i])) return;
  if (!in_arena(eo)) return;
  w8a8_status s = w8a8_scaled_mm(handle, pa, pb, psa, psb, pbias, pzp, po);
  if (s != W8A8_SUCCESS) {
    if (handle->kernel == W8A8_KERNEL_GENERIC && s == W8A8_ERROR_UNSUPPORTED_DEVICE) {
      check_failure(fn, s); /* a forced fast path may refuse, without writing */
      return;
    }
    FAIL("validated call failed: %s", w8a8_last_error());
  }
  memset(allowed, 0, ARENA_BYTES);
  if (m_ > 0 && n_ > 0) allow_matrix(&out);
  check_writes(fn);
}

/* ---- quantize ------------------------------------------------------------- */
/* silu = 1: w8a8_silu_mul_quantize, whose x has 2K columns (gate, up) for q's K; the same rules
 * otherwise (validate.c checks both calls). */
static void fuzz_quant(reader *r, int silu) {
  int64_t M = rd8(r) % 13, K = rd8(r) % 40;
  uint8_t f = rd8(r);
  static const w8a8_dtype xds[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  const int64_t XK = silu ? 2 * K : K;
  w8a8_matrix x = w8a8_matrix_make(xds[f % 3], W8A8_ROW_MAJOR, M, XK, XK + (f >> 2 & 3), arena + 0 * REGION);
  w8a8_matrix q = w8a8_matrix_make((f & 16) ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K,
                                   K + (f >> 5 & 3), arena + 1 * REGION);
  int mode = rd8(r) % 3;
  int64_t n = mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? M : 1;
  w8a8_vector scale = w8a8_vector_make(W8A8_DTYPE_FP32, n, arena + 2 * REGION);
  w8a8_vector azp = w8a8_vector_make(W8A8_DTYPE_INT32, n, arena + 3 * REGION);
  uint8_t g = rd8(r);
  const w8a8_matrix *px = &x, *pq = &q;
  const w8a8_vector *ps = &scale, *pz = (g & 1) ? &azp : NULL;
  const float *ub = (g & 2) ? (const float *)(arena + 4 * REGION) : NULL;
  float static_scale = (g & 4) ? 0.0f : 0.03f, ubv = (g & 8) ? -1.0f : 2.5f;

  int nmut = rd8(r) % 4;
  for (int i = 0; i < nmut; i++) {
    uint8_t which = rd8(r) % 18;
    w8a8_matrix *m = (which & 1) ? &q : &x;
    w8a8_vector *v = (which & 1) ? &azp : &scale;
    switch (which / 2) {
      case 0: m->dtype = (w8a8_dtype)(rd8(r) % 8); break;
      case 1: m->layout = (w8a8_layout)(rd8(r) % 3); break;
      case 2: {
        int64_t val = rd_value(r);
        switch (rd8(r) % 3) {
          case 0: m->rows = val; break;
          case 1: m->cols = val; break;
          default: m->ld = val; break;
        }
        break;
      }
      case 3: m->data = rd_pointer(r, 1); break;
      case 4: v->len = rd_value(r); break;
      case 5: v->dtype = (w8a8_dtype)(rd8(r) % 8); break;
      case 6: /* vectors anywhere in the arena (static scale and scale_ub are read: keep them in it) */
        v->data = rd_pointer(r, 0);
        if (rd8(r) & 1) ub = (const float *)rd_pointer(r, 0);
        break;
      case 8: /* one huge dimension; with both row counts 0 only the shape rules relate x and q */
        huge_dim(r, m);
        if (m->rows == 0 && (rd8(r) & 1)) x.rows = q.rows = 0;
        break;
      default:
        if (rd8(r) & 1) mode = (int)(rd_value(r) & 7) - 1;
        if (rd8(r) & 1) pz = pz ? NULL : &azp;
        if (rd8(r) & 1) ps = NULL;
        if (rd8(r) & 1) px = NULL;
        if (rd8(r) & 1) pq = NULL;
        break;
    }
  }
  /* input values: fp32 in a modest range, or raw bytes for the half types (any value, NaN included). Read after
   * the mutations, so that short inputs reach them. */
  for (int i = 0; i < 512; i++) {
    uint8_t v = rd8(r);
    ((float *)(arena + 0 * REGION))[i] = (float)((int)v - 128) * 0.37f;
  }
  /* The values read by validation (static scale, scale_ub) are set after the pointers
   * moved; a vector or ub may now alias anything, which is the point. */
  if (scale.data && ((uintptr_t)scale.data & 3) == 0 && (uint8_t *)scale.data + 4 <= arena + ARENA_BYTES)
    memcpy(scale.data, &static_scale, 4);
  if (ub && ((uintptr_t)ub & 3) == 0 && (const uint8_t *)ub + 4 <= arena + ARENA_BYTES) memcpy((void *)ub, &ubv, 4);
  memcpy(snap, arena, ARENA_BYTES);

  const char *fn = silu ? "w8a8_silu_mul_quantize" : "w8a8_quantize";
  w8a8_quant_problem p;
  /* scale->data is dereferenced by validation in static mode: only where it is in the arena */
  if (ps && scale.len >= 1 && scale.data && mode == W8A8_QUANT_STATIC_PER_TENSOR &&
      (uint8_t *)scale.data + 4 > arena + ARENA_BYTES)
    return;
  if (ub && (const uint8_t *)ub + 4 > arena + ARENA_BYTES) return;
  w8a8_status (*validate)(const char *, const w8a8_handle *, const w8a8_matrix *, const w8a8_matrix *,
                           w8a8_quant_mode, const w8a8_vector *, const w8a8_vector *, const float *,
                           w8a8_quant_problem *) = silu ? w8a8_validate_silu_mul_quantize : w8a8_validate_quantize;
  w8a8_status (*call)(w8a8_handle *, const w8a8_matrix *, const w8a8_matrix *, w8a8_quant_mode, const w8a8_vector *,
                      const w8a8_vector *, const float *) = silu ? w8a8_silu_mul_quantize : w8a8_quantize;
  w8a8_status vs = validate(fn, handle, px, pq, (w8a8_quant_mode)mode, ps, pz, ub, &p);
  if (vs != W8A8_SUCCESS) {
    check_failure(fn, vs);
    w8a8_status s = call(handle, px, pq, (w8a8_quant_mode)mode, ps, pz, ub);
    if (s != vs) FAIL("validation said %d, the call %d", (int)vs, (int)s);
    check_failure(fn, s);
    return;
  }
  if (!px || !pq || !ps) FAIL("accepted a NULL descriptor");
  if (x.dtype != W8A8_DTYPE_FP32 && x.dtype != W8A8_DTYPE_BF16 && x.dtype != W8A8_DTYPE_FP16) FAIL("x dtype");
  if (q.dtype != W8A8_DTYPE_INT8 && q.dtype != W8A8_DTYPE_FP8_E4M3) FAIL("q dtype");
  if (x.layout != W8A8_ROW_MAJOR || q.layout != W8A8_ROW_MAJOR) FAIL("layouts");
  if (q.rows != x.rows || x.cols % (silu ? 2 : 1) || x.cols / (silu ? 2 : 1) != q.cols || x.ld < x.cols || q.ld < q.cols)
    FAIL("shapes");
  if (mode < 0 || mode > 2) FAIL("mode %d", mode);
  int64_t want = mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? x.rows : 1;
  if (scale.len != want || scale.dtype != W8A8_DTYPE_FP32) FAIL("scale");
  if (mode == W8A8_QUANT_STATIC_PER_TENSOR && !(*(float *)scale.data > 0 && *(float *)scale.data < 1e38f))
    FAIL("accepted static scale %g", (double)*(float *)scale.data);
  if (ub && (mode != W8A8_QUANT_DYNAMIC_PER_TOKEN || pz || !(*ub > 0))) FAIL("accepted scale_ub");
  if (pz && (q.dtype != W8A8_DTYPE_INT8 || mode == W8A8_QUANT_DYNAMIC_PER_TENSOR || azp.len != want ||
             azp.dtype != W8A8_DTYPE_INT32))
    FAIL("accepted azp");
  ext ex = mat_ext(&x), eq = mat_ext(&q), es = vec_ext(&scale, W8A8_DTYPE_FP32),
      ez = pz ? vec_ext(&azp, W8A8_DTYPE_INT32) : (ext){1, 0, 0};
  ext eub = {1, (uintptr_t)ub, ub ? (uintptr_t)ub + 4 : 0};
  if (ext_overlap(eq, ex) || ext_overlap(eq, es) || ext_overlap(eq, ez) || ext_overlap(eq, eub))
    FAIL("accepted q overlapping");
  if (mode != W8A8_QUANT_STATIC_PER_TENSOR &&
      (ext_overlap(es, ex) || ext_overlap(es, ez) || ext_overlap(es, eub) || ext_overlap(ez, ex) ||
       ext_overlap(ez, eub)))
    FAIL("accepted scale/azp overlapping");
  if (!in_arena(ex) || !in_arena(eq) || !in_arena(es) || !in_arena(ez)) return;
  w8a8_status s = call(handle, px, pq, (w8a8_quant_mode)mode, ps, pz, ub);
  if (s != W8A8_SUCCESS) {
    if (handle->kernel == W8A8_KERNEL_GENERIC && s == W8A8_ERROR_UNSUPPORTED_DEVICE) {
      check_failure(fn, s);
      return;
    }
    FAIL("validated call failed: %s", w8a8_last_error());
  }
  memset(allowed, 0, ARENA_BYTES);
  if (x.rows > 0) {
    allow_matrix(&q);
    if (mode != W8A8_QUANT_STATIC_PER_TENSOR) {
      allow_vector(&scale, 4);
      if (pz) allow_vector(&azp, 4);
    }
  }
  check_writes(fn);
}

/* ---- colsum --------------------------------------------------------------- */
static void fuzz_colsum(reader *r) {
  int64_t K = rd8(r) % 60, N = rd8(r) % 20;
  w8a8_matrix b = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K + (rd8(r) & 3), arena + REGION);
  w8a8_vector adj = w8a8_vector_make(W8A8_DTYPE_INT32, N, arena + 3 * REGION);
  const w8a8_matrix *pb = &b;
  const w8a8_vector *pa = &adj;
  int nmut = rd8(r) % 3;
  for (int i = 0; i < nmut; i++) {
    switch (rd8(r) % 9) {
      case 7: huge_dim(r, &b); break;
      case 0: b.dtype = (w8a8_dtype)(rd8(r) % 8); break;
      case 1: b.layout = (w8a8_layout)(rd8(r) % 3); break;
      case 2: b.rows = rd_value(r); break;
      case 3: b.ld = rd_value(r); break;
      case 4: b.data = rd_pointer(r, 1); break;
      case 5: adj.len = rd_value(r); break;
      case 6: adj.data = rd_pointer(r, 0); break;
      default: if (rd8(r) & 1) pb = NULL; else pa = NULL; break;
    }
  }
  memcpy(snap, arena, ARENA_BYTES);
  static const char fn[] = "w8a8_colsum";
  w8a8_colsum_problem p;
  w8a8_status vs = w8a8_validate_colsum(fn, handle, pb, pa, &p);
  if (vs != W8A8_SUCCESS) {
    check_failure(fn, vs);
    w8a8_status s = w8a8_colsum(handle, pb, pa);
    if (s != vs) FAIL("validation said %d, the call %d", (int)vs, (int)s);
    check_failure(fn, s);
    return;
  }
  if (b.dtype != W8A8_DTYPE_INT8 || b.layout != W8A8_COL_MAJOR || adj.len != b.cols || b.ld < b.rows ||
      adj.dtype != W8A8_DTYPE_INT32)
    FAIL("colsum accepted bad arguments");
  ext eb = mat_ext(&b), ea = vec_ext(&adj, W8A8_DTYPE_INT32);
  if (ext_overlap(eb, ea)) FAIL("colsum accepted an overlap");
  if (!in_arena(eb) || !in_arena(ea)) return;
  if (w8a8_colsum(handle, pb, pa) != W8A8_SUCCESS) FAIL("validated colsum failed: %s", w8a8_last_error());
  memset(allowed, 0, ARENA_BYTES);
  allow_vector(&adj, 4);
  check_writes(fn);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  arena = aligned_alloc(64, ARENA_BYTES);
  snap = malloc(ARENA_BYTES);
  allowed = malloc(ARENA_BYTES);
  if (!arena || !snap || !allowed || w8a8_create(&handle, W8A8_DEVICE_CPU, 0) != W8A8_SUCCESS) {
    fprintf(stderr, "fuzz_validate: setup failed: %s\n", w8a8_last_error());
    abort();
  }
  w8a8_set_num_threads(handle, 1); /* cheap, and deterministic */
  return 0;
}

/* ---- block-scaled fp8: the GEMM and the group / block quantizers ---------------------------------------- */
static void mutate_matrix(reader *r, w8a8_matrix *m) {
  switch (rd8(r) % 5) {
    case 0: m->dtype = (w8a8_dtype)(rd8(r) % 8); break;
    case 1: m->layout = (w8a8_layout)(rd8(r) % 3); break;
    case 2: {
      const int64_t v = rd_value(r);
      switch (rd8(r) % 3) {
        case 0: m->rows = v; break;
        case 1: m->cols = v; break;
        default: m->ld = v; break;
      }
      break;
    }
    case 3: m->data = rd_pointer(r, 1); break;
    default: huge_dim(r, m); break;
  }
}
static int64_t nblocks(int64_t n) { return (n + 127) / 128; }
static w8a8_matrix scale_matrix(reader *r, int64_t rows, int64_t cols, uint8_t *at) {
  const int colmajor = rd8(r) & 1;
  return w8a8_matrix_make(W8A8_DTYPE_FP32, colmajor ? W8A8_COL_MAJOR : W8A8_ROW_MAJOR, rows, cols,
                          (colmajor ? rows : cols) + (rd8(r) & 1), at);
}
static int scale_ok(const w8a8_matrix *s, int64_t rows, int64_t cols) {
  return s->dtype == W8A8_DTYPE_FP32 && s->rows == rows && s->cols == cols &&
         (s->layout == W8A8_ROW_MAJOR ? s->ld >= cols : s->layout == W8A8_COL_MAJOR && s->ld >= rows);
}

static void fuzz_blockwise(reader *r) {
  const int64_t M = rd8(r) % 8, N = rd8(r) % 9, K = rd8(r) % 200;
  uint8_t f = rd8(r);
  static const w8a8_dtype outs[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  const w8a8_dtype od = outs[f % 3];
  w8a8_matrix a = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K + (f >> 2 & 3), arena + 0 * REGION);
  w8a8_matrix b = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, K, N, K + (f >> 4 & 3), arena + 1 * REGION);
  w8a8_matrix out = w8a8_matrix_make(od, W8A8_ROW_MAJOR, M, N, N + (rd8(r) & 3), arena + 2 * REGION);
  w8a8_matrix sa = scale_matrix(r, M, nblocks(K), arena + 3 * REGION);
  w8a8_matrix sb = scale_matrix(r, nblocks(N), nblocks(K), arena + 4 * REGION);
  w8a8_vector bias = w8a8_vector_make(od, N, arena + 5 * REGION);
  const w8a8_matrix *pa = &a, *pb = &b, *po = &out, *psa = &sa, *psb = &sb;
  const w8a8_vector *pbias = (f & 64) ? &bias : NULL;
  const int nmut = rd8(r) % 4;
  for (int i = 0; i < nmut; i++) {
    const uint8_t which = rd8(r) % 8;
    w8a8_matrix *mats[5] = {&a, &b, &out, &sa, &sb};
    if (which < 5) {
      mutate_matrix(r, mats[which]);
    } else if (which == 5) {
      switch (rd8(r) % 3) {
        case 0: pa = NULL; break;
        case 1: psa = NULL; break;
        default: psb = NULL; break;
      }
    } else if (which == 6) {
      bias.len = rd_value(r);
    } else {
      bias.dtype = (w8a8_dtype)(rd8(r) % 8);
    }
  }
  for (int i = 0; i < 64; i++) ((float *)(arena + 3 * REGION))[i] = 0.5f + (float)(i & 7) * 0.125f;
  for (int i = 0; i < 64; i++) ((float *)(arena + 4 * REGION))[i] = 0.25f + (float)(i & 3) * 0.25f;
  memcpy(snap, arena, ARENA_BYTES);
  static const char fn[] = "w8a8_scaled_mm_blockwise";
  w8a8_mm_problem p;
  const w8a8_status vs = w8a8_validate_scaled_mm_blockwise(fn, handle, pa, pb, psa, psb, pbias, po, &p);
  if (vs != W8A8_SUCCESS) {
    check_failure(fn, vs);
    const w8a8_status s = w8a8_scaled_mm_blockwise(handle, pa, pb, psa, psb, pbias, po);
    if (s != vs) FAIL("validation said %d, the call %d", (int)vs, (int)s);
    check_failure(fn, s);
    return;
  }
  /* Accepted: the header's promises */
  if (a.dtype != W8A8_DTYPE_FP8_E4M3 || b.dtype != W8A8_DTYPE_FP8_E4M3) FAIL("accepted non-fp8 operands");
  if (a.layout != W8A8_ROW_MAJOR || b.layout != W8A8_COL_MAJOR || out.layout != W8A8_ROW_MAJOR)
    FAIL("accepted layouts %d %d %d", a.layout, b.layout, out.layout);
  if (b.rows != a.cols || out.rows != a.rows || out.cols != b.cols) FAIL("accepted bad shapes");
  if (!scale_ok(&sa, a.rows, nblocks(a.cols)) || !scale_ok(&sb, nblocks(b.cols), nblocks(a.cols)))
    FAIL("accepted a scale matrix of another shape, layout or stride");
  if (pbias && (bias.len != b.cols || bias.dtype != out.dtype)) FAIL("accepted bias");
  const ext eo = mat_ext(&out), ins[5] = {mat_ext(&a), mat_ext(&b), mat_ext(&sa), mat_ext(&sb),
                                          pbias ? vec_ext(&bias, out.dtype) : (ext){1, 0, 0}};
  for (int i = 0; i < 5; i++)
    if (ext_overlap(eo, ins[i])) FAIL("accepted out overlapping input %d", i);
  /* run it only where every buffer lies in the arena (else the descriptor lies about memory) */
  for (int i = 0; i < 5; i++)
    if (!in_arena(ins[i])) return;
  if (!in_arena(eo)) return;
  if (w8a8_scaled_mm_blockwise(handle, pa, pb, psa, psb, pbias, po) != W8A8_SUCCESS)
    FAIL("validated call failed: %s", w8a8_last_error());
  memset(allowed, 0, ARENA_BYTES);
  if (a.rows > 0 && b.cols > 0) allow_matrix(&out);
  check_writes(fn);
}

static void fuzz_groups(reader *r, int blocks) {
  const int64_t M = rd8(r) % 4, K = rd8(r) % 140;
  const uint8_t f = rd8(r);
  static const w8a8_dtype xds[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  w8a8_matrix x = w8a8_matrix_make(xds[f % 3], W8A8_ROW_MAJOR, M, K, K + (f >> 2 & 3), arena + 0 * REGION);
  w8a8_matrix q = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, M, K, K + (f >> 4 & 3), arena + 2 * REGION);
  w8a8_matrix s = scale_matrix(r, blocks ? nblocks(M) : M, nblocks(K), arena + 3 * REGION);
  unsigned flags = (f & 64) ? W8A8_SCALE_UE8M0 : 0;
  const int nmut = rd8(r) % 4;
  for (int i = 0; i < nmut; i++) {
    const uint8_t which = rd8(r) % 4;
    w8a8_matrix *mats[3] = {&x, &q, &s};
    if (which < 3)
      mutate_matrix(r, mats[which]);
    else
      flags = rd8(r);
  }
  memcpy(snap, arena, ARENA_BYTES);
  const char *fn = blocks ? "w8a8_quantize_blocks" : "w8a8_quantize_groups";
  w8a8_quant_problem p;
  const w8a8_status vs = w8a8_validate_quantize_groups(fn, handle, &x, &q, &s, flags,
                                                       blocks ? W8A8_GROUPS_BLOCK : W8A8_GROUPS_TOKEN, 1, &p);
  if (vs != W8A8_SUCCESS) {
    check_failure(fn, vs);
    const w8a8_status st = blocks ? w8a8_quantize_blocks(handle, &x, &q, &s, flags)
                                  : w8a8_quantize_groups(handle, &x, &q, &s, flags);
    if (st != vs) FAIL("validation said %d, the call %d", (int)vs, (int)st);
    check_failure(fn, st);
    return;
  }
  if (!in_arena(mat_ext(&x)) || !in_arena(mat_ext(&q)) || !in_arena(mat_ext(&s))) return;
  if ((blocks ? w8a8_quantize_blocks(handle, &x, &q, &s, flags) : w8a8_quantize_groups(handle, &x, &q, &s, flags)) !=
      W8A8_SUCCESS)
    FAIL("validated call failed: %s", w8a8_last_error());
  if (x.layout != W8A8_ROW_MAJOR || q.layout != W8A8_ROW_MAJOR || q.dtype != W8A8_DTYPE_FP8_E4M3)
    FAIL("accepted q dtype %d or layouts %d %d", q.dtype, x.layout, q.layout);
  if (q.rows != x.rows || q.cols != x.cols || (flags & ~W8A8_SCALE_UE8M0)) FAIL("accepted shapes or flags");
  if (!scale_ok(&s, blocks ? nblocks(x.rows) : x.rows, nblocks(x.cols))) FAIL("accepted a scale of another shape");
  memset(allowed, 0, ARENA_BYTES);
  if (q.rows > 0 && q.cols > 0) {
    allow_matrix(&q);
    for (int64_t i = 0; i < s.rows; i++)
      for (int64_t j = 0; j < s.cols; j++) {
        const int64_t e = s.layout == W8A8_ROW_MAJOR ? i * s.ld + j : j * s.ld + i;
        memset(allowed + ((uint8_t *)s.data - arena) + 4 * e, 1, 4);
      }
  }
  check_writes(fn);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader r = {data, size};
  /* fill the arena from the input tail pattern so int8/fp8 data varies */
  uint8_t seed = size ? data[size - 1] : 0;
  for (size_t i = 0; i < ARENA_BYTES; i++) arena[i] = (uint8_t)(i * 131u + seed);
  uint8_t op = rd8(&r);
  w8a8_set_kernel(handle, (w8a8_kernel)((op >> 2) % 3)); /* AUTO, REFERENCE, GENERIC */
  switch (op & 3) {
    case 0: fuzz_mm(&r); break;
    case 3: if (op & 0x80) fuzz_quant(&r, 1); else fuzz_mm(&r); break;
    case 1: fuzz_quant(&r, 0); break;
    default:
      if (op & 0x80)
        fuzz_blockwise(&r);
      else if (op & 0x40)
        fuzz_groups(&r, (op >> 5) & 1);
      else
        fuzz_colsum(&r);
      break;
  }
  return 0;
}
