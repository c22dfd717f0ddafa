/* cli_common.c — helpers of the `w8a8` CLI; see cli_common.h. */
#include "cli_common.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
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

double cli_percentile(const double *sorted, int n, double p) {
  if (n <= 0) return -1;
  const double pos = p * (double)(n - 1);
  const int i = (int)pos;
  if (i >= n - 1) return sorted[n - 1];
  return sorted[i] + (pos - (double)i) * (sorted[i + 1] - sorted[i]);
}

cli_stats cli_stats_failed(void) {
  cli_stats s = {-1, -1, -1, 0};
  return s;
}

cli_stats cli_stats_of(double *v, int n) {
  if (n <= 0) return cli_stats_failed();
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  cli_stats s = {cli_percentile(v, n, 0.2), cli_percentile(v, n, 0.5), cli_percentile(v, n, 0.8), n};
  return s;
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

cli_stats cli_time_calls(cli_dev d, cli_call_fn fn, void *arg, int warmup, int iters) {
  if (iters < 1) iters = 1;
  double *t = malloc(sizeof(double) * (size_t)iters);
  cli_stats result = cli_stats_failed();
  if (!t) return result;
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
    if (ok) result = cli_stats_of(t, iters);
    goto done;
  }
#endif
  (void)d;
  for (int i = 0; i < iters; i++) {
    double t0 = cli_now_us();
    if (fn(arg) != 0) goto done;
    t[i] = cli_now_us() - t0;
  }
  result = cli_stats_of(t, iters);
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

/* ---- getopt_long over a table ------------------------------------------------------------------- */

/* getopt_long's value for table entry i: its short option's character (so both spellings return the same),
 * or 256 + i for a long-only option. */
static int opt_val(const cli_opt *o, int i) { return o->shrt ? (unsigned char)o->shrt : 256 + i; }

void cli_parser_init(cli_parser *p, const char *cmd, const cli_opt *opts, int nopts, int argc, char **argv) {
  memset(p, 0, sizeof *p);
  p->cmd = cmd;
  p->opts = opts;
  p->nopts = nopts < CLI_MAX_OPTS ? nopts : CLI_MAX_OPTS;
  p->argc = argc;
  p->argv = argv;
  p->first_positional = argc;
  struct option *lo = calloc(CLI_MAX_OPTS + 2, sizeof *lo);
  p->longopts = lo;
  char *so = p->optstring;
  *so++ = ':'; /* a missing value returns ':' (not '?'), and getopt itself prints nothing */
  int n = 0;
  for (int i = 0; lo && i < p->nopts; i++) {
    const cli_opt *o = &opts[i];
    if (o->lng) {
      lo[n].name = o->lng;
      lo[n].has_arg = o->arg ? required_argument : no_argument;
      lo[n].flag = NULL;
      lo[n].val = opt_val(o, i);
      n++;
    }
    if (o->shrt) {
      *so++ = o->shrt;
      if (o->arg) *so++ = ':';
    }
  }
  if (lo) {
    lo[n].name = "help";
    lo[n].has_arg = no_argument;
    lo[n].val = 'h';
  }
  *so++ = 'h';
  *so = 0;
  optind = 0; /* glibc: 0 starts a fresh scan (another command line may have been parsed before) */
  opterr = 0;
}

void cli_parser_free(cli_parser *p) {
  free(p->longopts);
  p->longopts = NULL;
}

/* The long options of the table that start with prefix (the name before any '='): how many, and their names. */
static int long_matches(const cli_parser *p, const char *arg, char *names, size_t nn) {
  size_t len = strcspn(arg, "=");
  int m = 0;
  size_t used = 0;
  if (nn) names[0] = 0;
  for (int i = 0; i < p->nopts; i++)
    if (p->opts[i].lng && p->opts[i].help && !strncmp(p->opts[i].lng, arg, len)) {
      if (used < nn) used += (size_t)snprintf(names + used, nn - used, "%s--%s", m ? ", " : "", p->opts[i].lng);
      m++;
    }
  return m;
}

static int opt_index(const cli_parser *p, int val) {
  if (val >= 256) return val - 256 < p->nopts ? val - 256 : -1;
  for (int i = 0; i < p->nopts; i++)
    if ((unsigned char)p->opts[i].shrt == val) return i;
  return -1;
}

int cli_next_opt(cli_parser *p, const char **val) {
  *val = NULL;
  p->spelling = "?";
  if (!p->longopts) {
    if (!p->quiet) fprintf(stderr, "w8a8 %s: out of memory parsing the command line\n", p->cmd);
    return CLI_OPT_ERROR;
  }
  int li = -1;
  const int c = getopt_long(p->argc, p->argv, p->optstring, (const struct option *)p->longopts, &li);
  if (c == -1) {
    p->first_positional = optind;
    return CLI_OPT_END;
  }
  if (c == 'h') return CLI_OPT_HELP;
  const char *last = optind > 0 && optind <= p->argc ? p->argv[optind - 1] : "";
  if (c == '?') {
    const int i = optopt ? opt_index(p, optopt) : -1;
    if (i >= 0 && !p->opts[i].arg) { /* a flag given a value: --cpu=1 */
      snprintf(p->name_buf, sizeof p->name_buf, "--%s", p->opts[i].lng ? p->opts[i].lng : "?");
      p->spelling = p->name_buf;
      cli_usage_error(p, "%s takes no value", p->spelling);
    } else if (optopt && optopt < 256) {
      cli_usage_error(p, "unknown option '-%c'", optopt);
    } else {
      char names[256];
      const char *a = last[0] == '-' && last[1] == '-' ? last + 2 : last;
      const int m = long_matches(p, a, names, sizeof names);
      if (m > 1)
        cli_usage_error(p, "ambiguous option '--%.*s' (%s)", (int)strcspn(a, "="), a, names);
      else
        cli_usage_error(p, "unknown option '%.*s'", (int)strcspn(last, "="), last);
    }
    return CLI_OPT_ERROR;
  }
  const int i = opt_index(p, c == ':' ? optopt : c);
  if (i < 0) {
    cli_usage_error(p, "unknown option '%s'", last);
    return CLI_OPT_ERROR;
  }
  const cli_opt *o = &p->opts[i];
  /* how the user wrote it: getopt_long sets li only for a long option */
  const int as_long = c == ':' ? (last[0] == '-' && last[1] == '-') : li >= 0;
  if (as_long && o->lng)
    snprintf(p->name_buf, sizeof p->name_buf, "--%s", o->lng);
  else
    snprintf(p->name_buf, sizeof p->name_buf, "-%c", o->shrt ? o->shrt : '?');
  p->spelling = p->name_buf;
  if (c == ':') {
    cli_usage_error(p, "%s needs a value (%s)", p->spelling, o->arg ? o->arg : "?");
    return CLI_OPT_ERROR;
  }
  *val = optarg;
  return o->id;
}

int cli_usage_error(const cli_parser *p, const char *fmt, ...) {
  if (p->quiet) return CLI_EXIT_USAGE;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "w8a8 %s: ", p->cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "; see 'w8a8 %s --help'\n", p->cmd);
  va_end(ap);
  return CLI_EXIT_USAGE;
}

static void range_text(char *buf, size_t n, int64_t lo, int64_t hi) {
  if (hi == INT64_MAX)
    snprintf(buf, n, "an integer >= %lld", (long long)lo);
  else
    snprintf(buf, n, "%lld..%lld", (long long)lo, (long long)hi);
}

bool cli_opt_i64(cli_parser *p, const char *v, int64_t lo, int64_t hi, const char *what, int64_t *out) {
  if (cli_parse_i64(v, lo, hi, out)) return true;
  char r[64];
  range_text(r, sizeof r, lo, hi);
  cli_usage_error(p, "%s takes %s%s%s, got '%s'", p->spelling, r, what && *what ? " " : "", what ? what : "",
                  v ? v : "");
  return false;
}

bool cli_opt_int(cli_parser *p, const char *v, int lo, int hi, const char *what, int *out) {
  int64_t x = 0;
  if (!cli_opt_i64(p, v, lo, hi, what, &x)) return false;
  *out = (int)x;
  return true;
}

int cli_opt_list(cli_parser *p, const char *v, int64_t lo, int64_t hi, int max, const char *what, int64_t *out) {
  const int n = cli_parse_i64_list(v, lo, hi, out, max);
  if (n >= 0) return n;
  char r[64];
  range_text(r, sizeof r, lo, hi);
  cli_usage_error(p, "%s takes a comma list of up to %d %s in %s, got '%s'", p->spelling, max,
                  what && *what ? what : "integers", r, v ? v : "");
  return -1;
}

int cli_opt_choice(cli_parser *p, const char *v, const char *const *choices) {
  int n = 0;
  while (choices[n]) {
    if (v && !strcmp(v, choices[n])) return n;
    n++;
  }
  char buf[256];
  size_t used = 0;
  buf[0] = 0;
  for (int i = 0; i < n && used < sizeof buf; i++)
    used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", i == 0 ? "" : i == n - 1 ? " or " : ", ",
                             choices[i]);
  cli_usage_error(p, "%s takes %s, got '%s'", p->spelling, buf, v ? v : "");
  return -1;
}

void cli_print_options(FILE *f, const cli_opt *opts, int nopts) {
  const int col = 24;
  for (int i = 0; i <= nopts; i++) {
    const cli_opt help = {'h', "help", 'h', NULL, "this text"};
    const cli_opt *o = i < nopts ? &opts[i] : &help;
    if (!o->help) continue;
    char left[96];
    int n;
    if (o->shrt && o->lng)
      n = snprintf(left, sizeof left, "  -%c, --%s", o->shrt, o->lng);
    else if (o->shrt)
      n = snprintf(left, sizeof left, "  -%c", o->shrt);
    else
      n = snprintf(left, sizeof left, "      --%s", o->lng ? o->lng : "?");
    if (o->arg) n += snprintf(left + n, sizeof left - (size_t)n, " %s", o->arg);
    fputs(left, f);
    if (n + 2 > col) {
      fputc('\n', f);
      n = 0;
    }
    fprintf(f, "%*s", col - n, "");
    for (const char *h = o->help; *h; h++) {
      fputc(*h, f);
      if (*h == '\n') fprintf(f, "%*s", col, "");
    }
    fputc('\n', f);
  }
}

/* ---- output ----------------------------------------------------------------------------------------- */

FILE *cli_tab_;

int cli_out_open(const char *cmd, const char *path, FILE **out) {
  *out = NULL;
  if (!path) return 0;
  if (!strcmp(path, "-")) {
    *out = stdout;
    cli_tab_ = stderr;
    return 0;
  }
  *out = fopen(path, "w");
  if (*out) return 0;
  fprintf(stderr, "w8a8 %s: -o: cannot open '%s' for writing: %s\n", cmd, path, strerror(errno));
  return -1;
}

int cli_out_close(const char *cmd, const char *path, FILE *out) {
  if (!out) return 0;
  int bad = 0;
  errno = 0;
  if (out == stdout) {
    bad = fflush(stdout) != 0 || ferror(stdout);
  } else {
    bad = ferror(out) != 0;
    if (fclose(out) != 0) bad = 1;
  }
  if (bad)
    fprintf(stderr, "w8a8 %s: -o: error writing '%s'%s%s: the JSON lines are incomplete\n", cmd,
            out == stdout ? "(stdout)" : path, errno ? ": " : "", errno ? strerror(errno) : "");
  return bad ? -1 : 0;
}

/* ---- JSON ------------------------------------------------------------------------------------- */

/* Length of the valid UTF-8 sequence at p (RFC 3629: no overlongs, surrogates or code points past U+10FFFF),
 * 0 if it is not one. */
static int utf8_len(const unsigned char *p) {
  const unsigned c = p[0];
#define CONT(x) ((x) >= 0x80 && (x) <= 0xbf)
  if (c >= 0xc2 && c <= 0xdf) return CONT(p[1]) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    const unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    return p[1] >= lo && p[1] <= hi && CONT(p[2]) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    return p[1] >= lo && p[1] <= hi && CONT(p[2]) && CONT(p[3]) ? 4 : 0;
  }
#undef CONT
  return 0;
}

void cli_json_str(FILE *f, const char *s) {
  fputc('"', f);
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  while (*p) {
    const unsigned c = *p;
    if (c == '"' || c == '\\') {
      fputc('\\', f);
      fputc((int)c, f);
      p++;
    } else if (c < 0x20) {
      const char *e = c == '\n' ? "\\n" : c == '\t' ? "\\t" : c == '\r' ? "\\r" : NULL;
      if (e)
        fputs(e, f);
      else
        fprintf(f, "\\u%04x", c);
      p++;
    } else if (c < 0x80) {
      fputc((int)c, f);
      p++;
    } else {
      const int n = utf8_len(p);
      if (n) {
        fwrite(p, 1, (size_t)n, f);
        p += n;
      } else {
        fputs("\\ufffd", f);
        p++;
      }
    }
  }
  fputc('"', f);
}

void cli_jw_begin(cli_jw *w, FILE *f) {
  w->f = f;
  w->n = 0;
  fputc('{', f);
}
static void jw_key(cli_jw *w, const char *key) {
  if (w->n++) fputc(',', w->f);
  cli_json_str(w->f, key);
  fputc(':', w->f);
}
void cli_jw_str(cli_jw *w, const char *key, const char *v) {
  jw_key(w, key);
  if (v)
    cli_json_str(w->f, v);
  else
    fputs("null", w->f);
}
void cli_jw_num(cli_jw *w, const char *key, double v) {
  jw_key(w, key);
  if (isfinite(v))
    fprintf(w->f, "%.6g", v);
  else
    fputs("null", w->f);
}
void cli_jw_int(cli_jw *w, const char *key, int64_t v) {
  jw_key(w, key);
  fprintf(w->f, "%lld", (long long)v);
}
void cli_jw_bool(cli_jw *w, const char *key, int v) {
  jw_key(w, key);
  fputs(v ? "true" : "false", w->f);
}
void cli_jw_null(cli_jw *w, const char *key) {
  jw_key(w, key);
  fputs("null", w->f);
}
void cli_jw_end(cli_jw *w) {
  fputs("}\n", w->f);
  fflush(w->f);
}

void cli_json_header(FILE *f, const char *command, int argc, char **argv) {
  if (!f) return;
  cli_jw w;
  char buf[1024], host[256], date[32];
  cli_jw_begin(&w, f);
  cli_jw_str(&w, "type", "header");
  cli_jw_int(&w, "schema", CLI_JSON_SCHEMA);
  cli_jw_str(&w, "command", command);
  const int v = w8a8_version();
  snprintf(buf, sizeof buf, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
  cli_jw_str(&w, "version", buf);
  cli_jw_str(&w, "build", w8a8_version_string());
  cli_iso_datetime(date, sizeof date);
  cli_jw_str(&w, "date", date);
  cli_hostname(host, sizeof host);
  cli_jw_str(&w, "host", host);
  struct utsname u;
  const int have_u = uname(&u) == 0;
  cli_jw_str(&w, "arch", have_u ? u.machine : NULL);
  if (have_u) snprintf(buf, sizeof buf, "%s %s", u.sysname, u.release);
  cli_jw_str(&w, "os", have_u ? buf : NULL);
  /* the CPU as the library names it (the rows of CPU measurements carry the same name) */
  w8a8_handle *h = NULL;
  w8a8_handle_info info;
  if (w8a8_create(&h, W8A8_DEVICE_CPU, 0) == W8A8_SUCCESS && w8a8_get_info(h, &info) == W8A8_SUCCESS)
    cli_jw_str(&w, "cpu", info.name);
  else
    cli_jw_null(&w, "cpu");
  w8a8_destroy(h);
  cli_jw_int(&w, "cpus", (int64_t)sysconf(_SC_NPROCESSORS_ONLN));
  cli_jw_int(&w, "cuda_devices", w8a8_cuda_device_count());
  size_t used = (size_t)snprintf(buf, sizeof buf, "w8a8");
  for (int i = 0; i < argc && used < sizeof buf; i++)
    used += (size_t)snprintf(buf + used, sizeof buf - used, " %s", argv[i]);
  cli_jw_str(&w, "argv", buf);
  cli_jw_end(&w);
}

void cli_json_row_begin(cli_jw *w, FILE *f, const cli_row *r) {
  cli_jw_begin(w, f);
  cli_jw_str(w, "type", "row");
  cli_jw_str(w, "command", r->command);
  cli_jw_str(w, "impl", r->impl);
  cli_jw_str(w, "op", r->op);
  cli_jw_str(w, "device", r->device);
  cli_jw_str(w, "device_kind", r->device_kind);
  cli_jw_str(w, "dtype", r->dtype);
  const int64_t mnk[3] = {r->M, r->N, r->K};
  static const char *const names[3] = {"M", "N", "K"};
  for (int i = 0; i < 3; i++) {
    if (mnk[i] >= 0)
      cli_jw_int(w, names[i], mnk[i]);
    else
      cli_jw_null(w, names[i]);
  }
  cli_jw_str(w, "kernel", r->kernel && *r->kernel ? r->kernel : NULL);
  cli_jw_str(w, "config", r->config && *r->config ? r->config : NULL);
  if (r->split_k > 0)
    cli_jw_int(w, "split_k", r->split_k);
  else
    cli_jw_null(w, "split_k");
  cli_jw_int(w, "iters", r->iters);
  cli_jw_int(w, "warmup", r->warmup);
  const int ok = r->t.p50 >= 0;
  cli_jw_num(w, "p20_us", ok ? r->t.p20 : NAN);
  cli_jw_num(w, "p50_us", ok ? r->t.p50 : NAN);
  cli_jw_num(w, "p80_us", ok ? r->t.p80 : NAN);
  cli_jw_num(w, "tflops", ok && r->t.p50 > 0 && r->flops > 0 ? r->flops / r->t.p50 * 1e-6 : NAN);
  cli_jw_int(w, "wrong", r->wrong);
}

/* ---- what the library chose ------------------------------------------------------------------------ */

void cli_last_launch(const w8a8_handle *h, const char *requested, cli_launch *out) {
  memset(out, 0, sizeof *out);
  w8a8_launch_info li;
  if (h && w8a8_get_last_launch(h, &li) == W8A8_SUCCESS && li.kernel && li.kernel[0]) {
    snprintf(out->kernel, sizeof out->kernel, "%s", li.kernel);
    snprintf(out->config, sizeof out->config, "%s", li.config ? li.config : "");
    out->split_k = li.split_k > 0 ? li.split_k : 1;
    out->known = 1;
    return;
  }
  snprintf(out->kernel, sizeof out->kernel, "%s", requested ? requested : "auto");
}

const char *cli_setting(const char *name) {
  const int n = w8a8_setting_count();
  for (int i = 0; i < n; i++) {
    w8a8_setting st;
    if (w8a8_get_setting(i, &st) != W8A8_SUCCESS || !st.name) continue;
    if (!strcmp(st.name, name) || (!strncmp(st.name, "W8A8_", 5) && !strcmp(st.name + 5, name))) return st.value;
  }
  return NULL;
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

double cli_tp_overlap(int W, const cli_stats *gemm, const cli_stats *comm, const cli_stats *unfused,
                      const cli_stats *fused) {
  if (W < 2 || gemm->p50 <= 0 || comm->p50 <= 0 || unfused->p50 <= 0 || fused->p50 <= 0) return NAN;
  const double hidden = gemm->p50 < comm->p50 ? gemm->p50 : comm->p50;
  const double noise = (unfused->p80 - unfused->p20) + (fused->p80 - fused->p20);
  if (hidden < 0.10 * unfused->p50 || hidden <= noise) return NAN;
  return (unfused->p50 - fused->p50) / hidden;
}

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
