/* cli_common.c — helpers of the `w8a8` CLI; see cli_common.h. */
#include "cli_common.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef W8A8_HAVE_CUDA
#include <cuda_runtime.h>
#endif

/* ---- random data ------------------------------------------------------------------- */

void cli_fill_bf16_normal(uint16_t *x, int64_t n, float sigma, uint64_t seed) {
  /* Fixed 64K-element chunks, each with its own stream: the same values whatever the
   * number of threads. */
  const int64_t chunk = 65536;
  int64_t nchunks = (n + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < nchunks; c++) {
    cli_rng r = cli_rng_make(seed, (uint64_t)c);
    int64_t end = (c + 1) * chunk < n ? (c + 1) * chunk : n;
    for (int64_t i = c * chunk; i < end; i++) x[i] = cli_f32_to_bf16(sigma * cli_rng_normal(&r));
  }
}

/* ---- number formats ---------------------------------------------------------------- */

static inline uint32_t f32_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float bits_f32(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

float cli_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t cli_f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

float cli_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = (float)mant * 0x1p-24f;
    return sign ? -v : v;
  }
  return bits_f32(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t cli_f32_to_f16(float f) {
  uint32_t x = f32_bits(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
  if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);
  if (x >= 0x38800000u) {
    x += 0xfffu + ((x >> 13) & 1u);
    return (uint16_t)(sign | ((x - 0x38000000u) >> 13));
  }
  return (uint16_t)(sign | (uint16_t)rintf(bits_f32(x) * 0x1p24f));
}

float cli_fp8_to_f32(uint8_t v) {
  uint32_t sign = v & 0x80u, exp = (v >> 3) & 0xfu, mant = v & 0x7u;
  if (exp == 0xf && mant == 0x7) return sign ? -NAN : NAN;
  float r = exp == 0 ? (float)mant * 0x1p-9f : ldexpf(1.0f + (float)mant * 0.125f, (int)exp - 7);
  return sign ? -r : r;
}

double cli_load_float(w8a8_dtype t, const void *base, int64_t i) {
  switch (t) {
    case W8A8_DTYPE_BF16: return cli_bf16_to_f32(((const uint16_t *)base)[i]);
    case W8A8_DTYPE_FP16: return cli_f16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
  }
}

void cli_store_float(w8a8_dtype t, void *base, int64_t i, float f) {
  switch (t) {
    case W8A8_DTYPE_BF16: ((uint16_t *)base)[i] = cli_f32_to_bf16(f); break;
    case W8A8_DTYPE_FP16: ((uint16_t *)base)[i] = cli_f32_to_f16(f); break;
    default: ((float *)base)[i] = f; break;
  }
}

double cli_ulp(w8a8_dtype t, double x) {
  int mant = t == W8A8_DTYPE_BF16 ? 7 : t == W8A8_DTYPE_FP16 ? 10 : 23;
  int emin = t == W8A8_DTYPE_BF16 ? -126 : t == W8A8_DTYPE_FP16 ? -14 : -126;
  x = fabs(x);
  int e = 0;
  if (x > 0) {
    frexp(x, &e); /* x = f * 2^e, f in [0.5, 1) */
    e -= 1;
  }
  if (x == 0 || e < emin) e = emin;
  return ldexp(1.0, e - mant);
}

/* ---- time ----------------------------------------------------------------------------- */

double cli_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double cli_median(double *v, int n) {
  if (n <= 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void cli_iso_date(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%d", &tm);
}

void cli_iso_datetime(char *buf, size_t n) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void cli_hostname(char *buf, size_t n) {
  if (gethostname(buf, n) != 0) snprintf(buf, n, "unknown");
  buf[n - 1] = 0;
}

/* ---- device memory ------------------------------------------------------------------------ */

cli_dev cli_dev_of(const w8a8_handle *h) {
  cli_dev d = {W8A8_DEVICE_CPU, 0};
  w8a8_handle_info info;
  if (w8a8_get_info(h, &info) == W8A8_SUCCESS) {
    d.kind = info.kind;
    d.index = info.device_index;
  }
  return d;
}

#ifdef W8A8_HAVE_CUDA
static int cuda_ok(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return 1;
  fprintf(stderr, "w8a8: %s failed: %s\n", what, cudaGetErrorString(e));
  cudaGetLastError();
  return 0;
}
#endif

void *cli_dev_alloc(cli_dev d, size_t bytes) {
  if (bytes == 0) bytes = 1; /* a valid pointer even for empty buffers */
#ifdef W8A8_HAVE_CUDA
  if (d.kind == W8A8_DEVICE_CUDA) {
    void *p = NULL;
    if (!cuda_ok(cudaSetDevice(d.index), "cudaSetDevice")) return NULL;
    if (!cuda_ok(cudaMalloc(&p, bytes), "cudaMalloc")) return NULL;
    return p;
  }
#endif
  (void)d;
  /* 64-byte aligned like the library's own workspaces; rounded up as aligned_alloc wants */
  void *p = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
  if (!p) fprintf(stderr, "w8a8: out of host memory (%zu bytes)\n", bytes);
  return p;
}

void cli_dev_free(cli_dev d, void *p) {
  if (!p) return;
#ifdef W8A8_HAVE_CUDA
  if (d.kind == W8A8_DEVICE_CUDA) {
    cudaFree(p);
    return;
  }
#endif
  (void)d;
  free(p);
}

int cli_dev_upload(cli_dev d, void *dst, const void *src, size_t bytes) {
  if (!bytes) return 0;
#ifdef W8A8_HAVE_CUDA
  if (d.kind == W8A8_DEVICE_CUDA) return cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D") ? 0 : -1;
#endif
  (void)d;
  memcpy(dst, src, bytes);
  return 0;
}

int cli_dev_download(cli_dev d, void *dst, const void *src, size_t bytes) {
  if (!bytes) return 0;
#ifdef W8A8_HAVE_CUDA
  if (d.kind == W8A8_DEVICE_CUDA) return cuda_ok(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H") ? 0 : -1;
#endif
  (void)d;
  memcpy(dst, src, bytes);
  return 0;
}

int cli_dev_memset(cli_dev d, void *dst, int byte, size_t bytes) {
  if (!bytes) return 0;
#ifdef W8A8_HAVE_CUDA
  if (d.kind == W8A8_DEVICE_CUDA) return cuda_ok(cudaMemset(dst, byte, bytes), "cudaMemset") ? 0 : -1;
#endif
  (void)d;
  memset(dst, byte, bytes);
  return 0;
}

int cli_dev_sync(cli_dev d) {
#ifdef W8A8_HAVE_CUDA
  if (d.kind == W8A8_DEVICE_CUDA) return cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize") ? 0 : -1;
#endif
  (void)d;
  return 0;
}

double cli_time_calls(cli_dev d, cli_call_fn fn, void *arg, int warmup, int iters) {
  if (iters < 1) iters = 1;
  double *t = malloc(sizeof(double) * (size_t)iters);
  if (!t) return -1;
  double result = -1;
  for (int i = 0; i < warmup; i++)
    if (fn(arg) != 0) goto done;
#ifdef W8A8_HAVE_CUDA
  if (d.kind == W8A8_DEVICE_CUDA) {
    /* One event pair per call, all on the legacy stream; one synchronisation at the end
     * so the host never stalls the queue between calls. */
    cudaEvent_t *ev = calloc((size_t)iters * 2, sizeof *ev);
    int ok = ev != NULL, made = 0;
    for (int i = 0; ok && i < 2 * iters; i++, made++) ok = cuda_ok(cudaEventCreate(&ev[i]), "cudaEventCreate");
    for (int i = 0; ok && i < iters; i++) {
      cudaEventRecord(ev[2 * i], NULL);
      if (fn(arg) != 0) ok = 0;
      cudaEventRecord(ev[2 * i + 1], NULL);
    }
    if (ok) ok = cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    for (int i = 0; ok && i < iters; i++) {
      float ms = 0;
      ok = cuda_ok(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
      t[i] = ms * 1e3;
    }
    for (int i = 0; i < made; i++) cudaEventDestroy(ev[i]);
    free(ev);
    if (ok) result = cli_median(t, iters);
    goto done;
  }
#endif
  (void)d;
  for (int i = 0; i < iters; i++) {
    double t0 = cli_now_us();
    if (fn(arg) != 0) goto done;
    t[i] = cli_now_us() - t0;
  }
  result = cli_median(t, iters);
done:
  free(t);
  return result;
}

/* ---- comparisons ---------------------------------------------------------------------------- */

void cli_cmp_init(cli_cmp *c) {
  memset(c, 0, sizeof *c);
  c->bad_m = c->bad_n = -1;
}

static void note(cli_cmp *c, int64_t m, int64_t n, double got, double ref, double tol, bool bad) {
  /* NaN-aware: a NaN where the reference has none (or the reverse) is an error of
   * infinite size, and two NaNs agree. */
  double d = (isnan(got) || isnan(ref)) ? (isnan(got) && isnan(ref) ? 0 : INFINITY) : fabs(got - ref);
  c->checked++;
  if (d > c->max_abs) c->max_abs = d;
  if (ref != 0 && !isnan(ref) && d / fabs(ref) > c->max_rel) c->max_rel = d / fabs(ref);
  if (bad) {
    if (c->wrong == 0) {
      c->bad_m = m;
      c->bad_n = n;
      c->bad_got = got;
      c->bad_ref = ref;
      c->bad_tol = tol;
    }
    c->wrong++;
  }
}

void cli_compare_exact(w8a8_dtype od, const void *got, int64_t ldg, const void *ref, int64_t ldr, int64_t rows,
                       int64_t cols, cli_cmp *c) {
  size_t es = w8a8_dtype_size(od);
  for (int64_t m = 0; m < rows; m++)
    for (int64_t n = 0; n < cols; n++) {
      const char *g = (const char *)got + (size_t)(m * ldg + n) * es;
      const char *r = (const char *)ref + (size_t)(m * ldr + n) * es;
      bool bad = memcmp(g, r, es) != 0;
      note(c, m, n, cli_load_float(od, got, m * ldg + n), cli_load_float(od, ref, m * ldr + n), 0, bad);
    }
}

void cli_compare_fp8(const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb, int64_t rows, int64_t N,
                     int64_t K, const float *sa, int64_t sa_len, const float *sb, int64_t sb_len, w8a8_dtype od,
                     const void *got, int64_t ldg, const void *ref, int64_t ldr, cli_cmp *c) {
  float lut[256];
  for (int i = 0; i < 256; i++) lut[i] = fabsf(cli_fp8_to_f32((uint8_t)i));
  /* Two fp32 summation orders differ by at most ~2K ulps of sum|ab|; Hopper's fp8 wgmma adds
   * products inside a 128-deep K-block with fewer mantissa bits than fp32 (measured up to 2.3e-4 of
   * sum|ab| with fp32 promotion per block, h200-sm90-2026-11-29.md), so the floor is 2^-10 (~1e-3, as the GPU
   * tests use): still 60x below the fp8 operands' own rounding (2^-4). */
  double eps = 2.0 * (double)K * 0x1p-24;
  if (eps < 0x1p-10) eps = 0x1p-10;
  float *arow = malloc(sizeof(float) * (size_t)(K > 0 ? K : 1));
  if (!arow) {
    fprintf(stderr, "w8a8: out of memory in the fp8 comparison\n");
    c->wrong++;
    return;
  }
  for (int64_t m = 0; m < rows; m++) {
    for (int64_t k = 0; k < K; k++) arow[k] = lut[a[m * lda + k]];
    double s_a = fabs((double)sa[sa_len == 1 ? 0 : m]);
    /* sum |a||b| per column: the scale of the rounding error of any fp32 summation order */
    double *sabs = malloc(sizeof(double) * (size_t)(N > 0 ? N : 1));
    if (!sabs) {
      c->wrong++;
      break;
    }
#pragma omp parallel for schedule(static) if (N * K > (1 << 20))
    for (int64_t n = 0; n < N; n++) {
      const uint8_t *bn = b + n * ldb;
      float s = 0; /* |terms| are exact in fp32 and all positive: fp32 is plenty here */
      for (int64_t k = 0; k < K; k++) s += arow[k] * lut[bn[k]];
      sabs[n] = s;
    }
    for (int64_t n = 0; n < N; n++) {
      double g = cli_load_float(od, got, m * ldg + n), r = cli_load_float(od, ref, m * ldr + n);
      double s_b = fabs((double)sb[sb_len == 1 ? 0 : n]);
      double tol = s_a * s_b * eps * sabs[n] * 1.01 + cli_ulp(od, fmax(fabs(g), fabs(r)));
      bool bad = (isnan(g) != isnan(r)) || (!isnan(g) && !(fabs(g - r) <= tol));
      note(c, m, n, g, r, tol, bad);
    }
    free(sabs);
  }
  free(arow);
}

/* ---- parsing --------------------------------------------------------------------------------- */

bool cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
  /* a decimal integer and nothing else: strtoll alone would also take leading blanks and a '+' */
  if (!s || !(isdigit((unsigned char)s[0]) || (s[0] == '-' && isdigit((unsigned char)s[1])))) return false;
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 10);
  if (errno || !end || *end || end == s || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool cli_list_ok(const char *s) {
  return s && *s && s[0] != ',' && s[strlen(s) - 1] != ',' && !strstr(s, ",,");
}

bool cli_reporting_rank(void) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MV2_COMM_WORLD_RANK"};
  for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
    const char *v = getenv(vars[i]);
    if (v && *v) return !strcmp(v, "0");
  }
  return true;
}

int cli_parse_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int max) {
  char buf[4096];
  if (!cli_list_ok(s) || strlen(s) >= sizeof buf) return -1; /* (strtok_r would skip empty items) */
  strcpy(buf, s);
  int n = 0;
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (n >= max) return -1;
    if (!cli_parse_i64(tok, lo, hi, &out[n])) return -1;
    n++;
  }
  return n > 0 ? n : -1;
}

w8a8_dtype cli_parse_out_dtype(const char *s) {
  if (!s) return W8A8_DTYPE_INVALID;
  if (!strcmp(s, "bf16")) return W8A8_DTYPE_BF16;
  if (!strcmp(s, "fp16")) return W8A8_DTYPE_FP16;
  if (!strcmp(s, "fp32")) return W8A8_DTYPE_FP32;
  return W8A8_DTYPE_INVALID;
}

/* ---- JSON ------------------------------------------------------------------------------------- */

void cli_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(f, "\\%c", *p);
    else if (*p < 0x20)
      fprintf(f, "\\u%04x", *p);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

/* ---- sampled verification ------------------------------------------------------------------------ */

int cli_sample_rows(int64_t M, int max, int64_t *rows) {
  if (M <= 0 || max <= 0) return 0;
  if (M <= max) {
    for (int64_t i = 0; i < M; i++) rows[i] = i;
    return (int)M;
  }
  int n = 0;
  for (int i = 0; i < max; i++) {
    int64_t r = max == 1 ? 0 : (int64_t)((double)i * (double)(M - 1) / (double)(max - 1) + 0.5);
    if (n == 0 || r != rows[n - 1]) rows[n++] = r;
  }
  return n;
}

static int verify_block(w8a8_dtype in, w8a8_dtype od, const void *a, int64_t lda, const void *b, int64_t ldb,
                        int64_t N, int64_t K, const float *sa, int64_t sa_len, const float *sb, int64_t sb_len,
                        const void *bias, const void *got, int64_t ldg, const int64_t *rows, int nrows, cli_cmp *c) {
  size_t es = w8a8_dtype_size(od);
  int64_t Kp = K > 0 ? K : 1, Np = N > 0 ? N : 1;
  uint8_t *as = malloc((size_t)nrows * (size_t)Kp);
  char *ref = malloc((size_t)nrows * (size_t)Np * es), *gs = malloc((size_t)nrows * (size_t)Np * es);
  float *sas = malloc(sizeof(float) * (size_t)nrows);
  int rc = 0;
  if (!as || !ref || !gs || !sas) {
    fprintf(stderr, "w8a8: out of memory verifying %d rows\n", nrows);
    rc = -1;
    goto out;
  }
  for (int i = 0; i < nrows; i++) {
    memcpy(as + (size_t)i * (size_t)Kp, (const uint8_t *)a + rows[i] * lda, (size_t)K);
    memcpy(gs + (size_t)i * (size_t)N * es, (const char *)got + (size_t)(rows[i] * ldg) * es, (size_t)N * es);
    sas[i] = sa[sa_len == 1 ? 0 : rows[i]];
  }
  /* One reference handle per thread, one row per call: the scalar reference is
   * single-threaded, and this is what keeps verifying a 28672 x 4096 layer quick. */
#pragma omp parallel
  {
    w8a8_handle *h = NULL;
    w8a8_status s = w8a8_create(&h, W8A8_DEVICE_CPU, 0);
    if (s == W8A8_SUCCESS) s = w8a8_set_kernel(h, W8A8_KERNEL_REFERENCE);
    if (s == W8A8_SUCCESS) s = w8a8_set_num_threads(h, 1);
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < nrows; i++) {
      if (s != W8A8_SUCCESS) continue;
      w8a8_matrix am = w8a8_matrix_make(in, W8A8_ROW_MAJOR, 1, K, Kp, as + (size_t)i * (size_t)Kp);
      w8a8_matrix bm = w8a8_matrix_make(in, W8A8_COL_MAJOR, K, N, ldb, (void *)b);
      w8a8_vector sav = w8a8_vector_make(W8A8_DTYPE_FP32, 1, sas + i);
      w8a8_vector sbv = w8a8_vector_make(W8A8_DTYPE_FP32, sb_len, (void *)sb);
      w8a8_vector bv = w8a8_vector_make(od, N, (void *)bias);
      w8a8_matrix om = w8a8_matrix_make(od, W8A8_ROW_MAJOR, 1, N, Np, ref + (size_t)i * (size_t)Np * es);
      s = w8a8_scaled_mm(h, &am, &bm, &sav, &sbv, bias ? &bv : NULL, NULL, &om);
      if (s != W8A8_SUCCESS) {
#pragma omp critical
        fprintf(stderr, "w8a8: reference scaled_mm failed: %s\n", w8a8_last_error());
      }
    }
    if (s != W8A8_SUCCESS) {
#pragma omp atomic write
      rc = -1;
    }
    w8a8_destroy(h);
  }
  if (rc) goto out;
  cli_cmp part;
  cli_cmp_init(&part);
  if (in == W8A8_DTYPE_INT8)
    cli_compare_exact(od, gs, Np, ref, Np, nrows, N, &part);
  else
    cli_compare_fp8(as, Kp, b, ldb, nrows, N, K, sas, nrows, sb, sb_len, od, gs, Np, ref, Np, &part);
  /* report positions in the caller's row numbering (columns: the caller adds its offset) */
  if (part.wrong && c->wrong == 0) {
    c->bad_m = rows[part.bad_m];
    c->bad_n = part.bad_n;
    c->bad_got = part.bad_got;
    c->bad_ref = part.bad_ref;
    c->bad_tol = part.bad_tol;
  }
  c->checked += part.checked;
  c->wrong += part.wrong;
  if (part.max_abs > c->max_abs) c->max_abs = part.max_abs;
  if (part.max_rel > c->max_rel) c->max_rel = part.max_rel;
out:
  free(as);
  free(ref);
  free(gs);
  free(sas);
  return rc;
}

int cli_verify_rows(w8a8_dtype in, w8a8_dtype od, const void *a, int64_t lda, const void *b, int64_t ldb,
                    int64_t N, int64_t K, const float *sa, int64_t sa_len, const float *sb, int64_t sb_len,
                    const void *bias, const void *got, int64_t ldg, const int64_t *rows, int nrows, cli_cmp *c) {
  return cli_verify_rows_cols(in, od, a, lda, b, ldb, N, K, sa, sa_len, sb, sb_len, bias, got, ldg, rows, nrows, 0, c);
}

int cli_verify_rows_cols(w8a8_dtype in, w8a8_dtype od, const void *a, int64_t lda, const void *b, int64_t ldb,
                         int64_t N, int64_t K, const float *sa, int64_t sa_len, const float *sb, int64_t sb_len,
                         const void *bias, const void *got, int64_t ldg, const int64_t *rows, int nrows,
                         int64_t max_cols, cli_cmp *c) {
  if (max_cols <= 0 || N <= max_cols)
    return verify_block(in, od, a, lda, b, ldb, N, K, sa, sa_len, sb, sb_len, bias, got, ldg, rows, nrows, c);
  /* Four blocks of columns spread over N, the first and the last included: edges and
   * interior of the tiling, at a fraction of the scalar reference's cost. */
  const int nblk = 4;
  int64_t bw = max_cols / nblk > 0 ? max_cols / nblk : 1;
  size_t es = w8a8_dtype_size(od);
  for (int i = 0; i < nblk; i++) {
    int64_t n0 = (int64_t)((double)i * (double)(N - bw) / (double)(nblk - 1));
    int64_t had = c->wrong;
    int rc = verify_block(in, od, a, lda, (const uint8_t *)b + n0 * ldb, ldb, bw, K, sa, sa_len,
                          sb + (sb_len == 1 ? 0 : n0), sb_len == 1 ? 1 : bw,
                          bias ? (const char *)bias + (size_t)n0 * es : NULL, (const char *)got + (size_t)n0 * es, ldg,
                          rows, nrows, c);
    if (rc) return rc;
    if (had == 0 && c->wrong) c->bad_n += n0;
  }
  return 0;
}

/* random int8 in [-128, 127], or fp8 bytes that are not NaN with magnitudes <= 16 */
void cli_fill_8bit(uint8_t *p, size_t n, int fp8, uint64_t seed) {
  const size_t chunk = 1 << 16;
  int64_t nch = (int64_t)((n + chunk - 1) / chunk);
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < nch; c++) {
    cli_rng r = cli_rng_make(seed, (uint64_t)c);
    size_t end = (size_t)(c + 1) * chunk < n ? (size_t)(c + 1) * chunk : n;
    for (size_t i = (size_t)c * chunk; i < end; i++) {
      uint8_t v = (uint8_t)cli_rng_u64(&r);
      if (fp8) v = (uint8_t)((v & 0x80u) | ((v & 0x7fu) % 0x58u));
      p[i] = v;
    }
  }
}

int cli_mm_call_once(void *arg) {
  cli_mm_call *c = arg;
  w8a8_status s = w8a8_scaled_mm(c->h, &c->a, &c->b[c->next], &c->sa, &c->sb, NULL, NULL, &c->out);
  c->next = (c->next + 1) % c->nrot;
  if (s != W8A8_SUCCESS) fprintf(stderr, "w8a8_scaled_mm: %s\n", w8a8_last_error());
  return s == W8A8_SUCCESS ? 0 : -1;
}

const cli_tp_shape cli_tp_shapes[CLI_TP_NSHAPES] = {
    {"70b-qkv", 1, 10240, 8192},
    {"70b-o", 0, 8192, 8192},
    {"70b-gate_up", 1, 57344, 8192},
    {"70b-down", 0, 8192, 28672},
};

int64_t cli_tp_min_dim(void) {
  int64_t m = INT64_MAX;
  for (int i = 0; i < CLI_TP_NSHAPES; i++) {
    if (cli_tp_shapes[i].N < m) m = cli_tp_shapes[i].N;
    if (cli_tp_shapes[i].K < m) m = cli_tp_shapes[i].K;
  }
  return m;
}

const char *cli_tp_shape_names(void) {
  static char buf[256];
  size_t n = 0;
  buf[0] = 0;
  for (int i = 0; i < CLI_TP_NSHAPES; i++)
    n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", i == 0 ? "" : i == CLI_TP_NSHAPES - 1 ? " or " : ", ",
                          cli_tp_shapes[i].name);
  return buf;
}
