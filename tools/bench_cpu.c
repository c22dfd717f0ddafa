/* bench_cpu.c — the CPU benchmark module behind tools/bench.h: our CPU scaled_mm next to
 * the baselines users would otherwise call, on the same values, in the same process:
 *   w8a8_cpu        our w8a8_scaled_mm on a CPU handle (AUTO: the fastest path this CPU has)
 *   onednn_s8       oneDNN s8 x s8 matmul, weights in "ba" layout (our B as is: N rows of K),
 *                   per-N output scales (sa[0]*sb[n]: oneDNN 2.x takes one scale mask), f32 out
 *   openblas_sgemm  OpenBLAS sgemm on the same values converted to fp32 (the unquantized layer)
 * Our int8 rows compare with onednn_s8, our fp8 rows with openblas_sgemm (vs_baseline =
 * baseline_us / our_us). Every timed result is checked: ours on sampled rows against the
 * scalar reference (int8 bitwise, fp8 within cli_compare_fp8's bound); the baselines on the
 * same rows against exact (int8) or double-precision (fp32) dot products.
 * Built with -DW8A8_HAVE_DNNL / -DW8A8_HAVE_OPENBLAS when the Makefile finds them; without
 * them only our rows are emitted. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "cli_common.h"

#ifdef W8A8_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#ifdef W8A8_HAVE_OPENBLAS
#include <cblas.h>
#endif

#define MAX_ROT CLI_MAX_ROT


static float val8(int fp8, uint8_t v) { return fp8 ? cli_fp8_to_f32(v) : (float)(int8_t)v; }

/* Check a baseline's fp32 output [M, N] on sampled rows: got[m,n] against
 * scale(m,n) * sum_k a*b computed in double (exact for int8), within
 * 1e-5 * |scale| * sum_k |a b| + 1e-30. Returns the number of wrong elements. */
__attribute__((unused)) static long check_f32_rows(int fp8, const uint8_t *A, const uint8_t *B, int64_t M, int64_t N, int64_t K,
                           const float *sa, int sa_per_row, const float *sb, const float *got) {
  int64_t rows[8];
  int nr = cli_sample_rows(M, 8, rows);
  long wrong = 0;
  float lut[256];
  for (int i = 0; i < 256; i++) lut[i] = val8(fp8, (uint8_t)i);
  for (int r = 0; r < nr; r++) {
    const int64_t m = rows[r];
    long w = 0;
#pragma omp parallel for schedule(static) reduction(+ : w)
    for (int64_t n = 0; n < N; n++) {
      double acc = 0, mag = 0;
      const uint8_t *a = A + m * K, *b = B + n * K;
      for (int64_t k = 0; k < K; k++) {
        double p = (double)lut[a[k]] * (double)lut[b[k]];
        acc += p;
        mag += fabs(p);
      }
      double s = (double)sa[sa_per_row ? m : 0] * (double)sb[n];
      double want = s * acc, tol = 1e-5 * fabs(s) * mag + 1e-30;
      if (!(fabs((double)got[m * N + n] - want) <= tol)) w++;
    }
    wrong += w;
  }
  return wrong;
}

/* ---- our scaled_mm --------------------------------------------------------------------- */

/* ---- oneDNN ---------------------------------------------------------------------------- */
#ifdef W8A8_HAVE_DNNL
typedef struct dnnl_call {
  dnnl_engine_t eng;
  dnnl_stream_t st;
  dnnl_primitive_t prim;
  dnnl_memory_t src, dst, wei[MAX_ROT];
  int nrot, next;
  char impl[64];
} dnnl_call;

static int dnnl_once(void *arg) {
  dnnl_call *c = arg;
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, c->src}, {DNNL_ARG_WEIGHTS, c->wei[c->next]}, {DNNL_ARG_DST, c->dst}};
  c->next = (c->next + 1) % c->nrot;
  if (dnnl_primitive_execute(c->prim, c->st, 3, args) != dnnl_success) return -1;
  return dnnl_stream_wait(c->st) == dnnl_success ? 0 : -1;
}

static void dnnl_call_free(dnnl_call *c) {
  if (c->prim) dnnl_primitive_destroy(c->prim);
  if (c->src) dnnl_memory_destroy(c->src);
  if (c->dst) dnnl_memory_destroy(c->dst);
  for (int i = 0; i < c->nrot; i++)
    if (c->wei[i]) dnnl_memory_destroy(c->wei[i]);
  if (c->st) dnnl_stream_destroy(c->st);
  if (c->eng) dnnl_engine_destroy(c->eng);
}

/* Build the s8 matmul for [M,K] x [K,N] ("ba": our column-major B) with per-N output scales.
 * Returns 0, or -1 with a message. */
static int dnnl_setup(dnnl_call *c, int64_t M, int64_t N, int64_t K, const uint8_t *A, const uint8_t *B,
                      size_t bstride, int nrot, const float *scales, float *dst) {
  memset(c, 0, sizeof *c);
  c->nrot = nrot;
  dnnl_memory_desc_t smd, wmd, dmd;
  dnnl_dims_t sd = {M, K}, wd = {K, N}, dd = {M, N};
  dnnl_primitive_attr_t attr = NULL;
  dnnl_primitive_desc_t pd = NULL;
  dnnl_matmul_desc_t mmd;
  const char *impl = NULL;
  int ok = dnnl_engine_create(&c->eng, dnnl_cpu, 0) == dnnl_success &&
           dnnl_stream_create(&c->st, c->eng, dnnl_stream_default_flags) == dnnl_success &&
           dnnl_memory_desc_init_by_tag(&smd, 2, sd, dnnl_s8, dnnl_ab) == dnnl_success &&
           dnnl_memory_desc_init_by_tag(&wmd, 2, wd, dnnl_s8, dnnl_ba) == dnnl_success &&
           dnnl_memory_desc_init_by_tag(&dmd, 2, dd, dnnl_f32, dnnl_ab) == dnnl_success &&
           dnnl_matmul_desc_init(&mmd, &smd, &wmd, NULL, &dmd) == dnnl_success &&
           dnnl_primitive_attr_create(&attr) == dnnl_success &&
           dnnl_primitive_attr_set_output_scales(attr, N, 1 << 1, scales) == dnnl_success &&
           dnnl_primitive_desc_create(&pd, &mmd, attr, c->eng, NULL) == dnnl_success &&
           dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success &&
           dnnl_primitive_create(&c->prim, pd) == dnnl_success &&
           dnnl_memory_create(&c->src, &smd, c->eng, (void *)A) == dnnl_success &&
           dnnl_memory_create(&c->dst, &dmd, c->eng, dst) == dnnl_success;
  if (ok) snprintf(c->impl, sizeof c->impl, "%s", impl ? impl : "?");
  for (int i = 0; ok && i < nrot; i++)
    ok = dnnl_memory_create(&c->wei[i], &wmd, c->eng, (void *)(B + (size_t)i * bstride)) == dnnl_success;
  if (pd) dnnl_primitive_desc_destroy(pd);
  if (attr) dnnl_primitive_attr_destroy(attr);
  if (!ok) {
    fprintf(stderr, "bench_cpu: oneDNN s8 matmul %lldx%lldx%lld could not be created\n", (long long)M, (long long)N,
            (long long)K);
    dnnl_call_free(c);
    return -1;
  }
  return 0;
}
#endif

/* ---- OpenBLAS ------------------------------------------------------------------------------ */
#ifdef W8A8_HAVE_OPENBLAS
typedef struct sgemm_call {
  int64_t M, N, K;
  const float *a, *b[MAX_ROT];
  float *c;
  int nrot, next;
} sgemm_call;

static int sgemm_once(void *arg) {
  sgemm_call *s = arg;
  /* C[M,N] = A[M,K] * W^T with W = N rows of K: the weights as our B, in fp32 */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)s->M, (int)s->N, (int)s->K, 1.0f, s->a, (int)s->K,
              s->b[s->next], (int)s->K, 0.0f, s->c, (int)s->N);
  s->next = (s->next + 1) % s->nrot;
  return 0;
}

/* fp32 copies of 8-bit values (OpenMP) */
static void widen(int fp8, const uint8_t *src, float *dst, size_t n) {
  float lut[256];
  for (int i = 0; i < 256; i++) lut[i] = val8(fp8, (uint8_t)i);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < (int64_t)n; i++) dst[i] = lut[src[i]];
}
#endif

int bench_cpu_sgemm_us(int64_t M, int64_t N, int64_t K, cli_stats *us) {
#ifdef W8A8_HAVE_OPENBLAS
  float *a = malloc(sizeof(float) * (size_t)(M * K) + 4), *b = malloc(sizeof(float) * (size_t)(N * K) + 4),
        *c = malloc(sizeof(float) * (size_t)(M * N) + 4);
  if (!a || !b || !c) {
    free(a), free(b), free(c);
    fprintf(stderr, "bench_cpu_sgemm_us: out of memory\n");
    return -1;
  }
  cli_rng r = cli_rng_make(21, 0);
  for (int64_t i = 0; i < M * K; i++) a[i] = cli_rng_normal(&r);
  for (int64_t i = 0; i < N * K; i++) b[i] = cli_rng_normal(&r) * 0.02f;
  sgemm_call s;
  memset(&s, 0, sizeof s);
  s.M = M, s.N = N, s.K = K, s.a = a, s.b[0] = b, s.c = c, s.nrot = 1;
  cli_dev d = {W8A8_DEVICE_CPU, 0};
  const cli_stats t = cli_time_calls(d, sgemm_once, &s, 1, 5);
  free(a), free(b), free(c);
  if (t.p50 < 0) return -1;
  *us = t;
  return 0;
#else
  (void)M, (void)N, (void)K, (void)us;
  fprintf(stderr, "bench_cpu_sgemm_us: this w8a8 was built without OpenBLAS (libopenblas-dev)\n");
  return -1;
#endif
}

static void emit_row(bench_emit_fn emit, void *ctx, const char *impl, const char *dtype, const char *scales,
                     const char *shape, int64_t M, int64_t N, int64_t K, cli_stats t, double bytes,
                     const cli_launch *ran, double base_p50, const char *baseline, long wrong, const char *device) {
  bench_row row;
  memset(&row, 0, sizeof row);
  row.impl = impl;
  row.op = "scaled_mm";
  row.dtype = dtype;
  row.scales = scales;
  row.shape = shape;
  row.M = M, row.N = N, row.K = K;
  row.t = t;
  row.bytes = bytes;
  row.kernel = ran->kernel;
  row.config = ran->config;
  row.split_k = ran->split_k;
  row.base_p50 = base_p50;
  row.baseline = baseline;
  row.wrong = wrong;
  row.device = device;
  emit(ctx, &row);
}

int bench_cpu(const bench_config *cfg, bench_emit_fn emit, void *ctx) {
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CPU, 0) != W8A8_SUCCESS) {
    fprintf(stderr, "bench_cpu: %s\n", w8a8_last_error());
    return -1;
  }
  w8a8_handle_info info;
  w8a8_get_info(h, &info);
  static char device[160];
  snprintf(device, sizeof device, "%s", info.name);
  if (cfg->block) { /* ours only: neither baseline has block scales */
    const int r = bench_blockwise(cfg, h, "w8a8_cpu", device, emit, ctx);
    w8a8_destroy(h);
    return r;
  }
  const cli_dev cpu = cli_dev_of(h);
  const int nrot = cfg->rotate < 1 ? 1 : cfg->rotate > MAX_ROT ? MAX_ROT : cfg->rotate;
  const char *scales = cfg->per_token ? "token*channel" : "tensor";
  int rc = 0;
  static int said_impl;
  static const float one = 1.0f;
  (void)one, (void)said_impl; /* unused in builds without the baselines */
  for (int si = 0; si < cfg->nshapes && !rc; si++) {
    const int64_t N = cfg->shapes[si].N, K = cfg->shapes[si].K;
    const char *shape = cfg->shapes[si].name ? cfg->shapes[si].name : "";
    int64_t Mmax = 1;
    for (int i = 0; i < cfg->nM; i++) Mmax = cfg->Ms[i] > Mmax ? cfg->Ms[i] : Mmax;
    const size_t es = w8a8_dtype_size(cfg->out_dtype), bsz = (size_t)(N * K);
    uint8_t *A = malloc((size_t)(Mmax * K) + 64), *B = malloc(bsz * (size_t)nrot + 64);
    void *out = malloc((size_t)(Mmax * N) * es + 64);
    float *sa = malloc(sizeof(float) * (size_t)Mmax), *sb = malloc(sizeof(float) * (size_t)N);
    float *f32out = malloc(sizeof(float) * (size_t)(Mmax * N) + 64), *dscale = malloc(sizeof(float) * (size_t)N);
    if (!A || !B || !out || !sa || !sb || !f32out || !dscale) {
      fprintf(stderr, "bench_cpu: out of memory for %lldx%lld (x%d copies)\n", (long long)N, (long long)K, nrot);
      rc = -1;
    }
    for (int dt = 0; dt < 2 && !rc; dt++) {
      const int fp8 = dt == 1;
      if ((fp8 && !cfg->do_fp8) || (!fp8 && !cfg->do_int8)) continue;
      const w8a8_dtype in = fp8 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
      cli_fill_8bit(A, (size_t)(Mmax * K), fp8, cfg->seed * 1000 + 11);
      cli_fill_8bit(B, bsz * (size_t)nrot, fp8, cfg->seed * 1000 + 12);
      cli_rng r = cli_rng_make(cfg->seed * 1000 + 13, 0);
      const float base = fp8 ? 1.0f : 1.0f / 4096.0f; /* int8 dot products are ~ 128^2 sqrt(K) */
      for (int64_t i = 0; i < Mmax; i++) sa[i] = base * (0.5f + cli_rng_unit(&r));
      for (int64_t i = 0; i < N; i++) sb[i] = (0.5f + cli_rng_unit(&r)) / (float)(K > 1 ? K : 1);
#ifdef W8A8_HAVE_OPENBLAS
      /* fp32 copies of the values for sgemm: as many weight copies as fit in 1 GiB */
      int srot = 1;
      float *A32 = NULL, *B32 = NULL;
      if (cfg->baselines && fp8) {
        while (srot < nrot && (double)(srot + 1) * (double)bsz * 4.0 <= (double)(1u << 30)) srot++;
        A32 = malloc(sizeof(float) * (size_t)(Mmax * K) + 64);
        B32 = malloc(sizeof(float) * bsz * (size_t)srot + 64);
        if (!A32 || !B32) {
          fprintf(stderr, "bench_cpu: out of memory for the fp32 copies of %lldx%lld\n", (long long)N, (long long)K);
          rc = -1;
        } else {
          widen(fp8, A, A32, (size_t)(Mmax * K));
          widen(fp8, B, B32, bsz * (size_t)srot);
        }
      }
#endif
      for (int mi = 0; mi < cfg->nM && !rc; mi++) {
        const int64_t M = cfg->Ms[mi];
        if (cfg->verbose)
          fprintf(stderr, "bench_cpu: %s %s M=%lld N=%lld K=%lld\n", shape, w8a8_dtype_name(in), (long long)M,
                  (long long)N, (long long)K);
        /* ours */
        cli_mm_call c;
        memset(&c, 0, sizeof c);
        c.h = h;
        c.nrot = nrot;
        c.a = w8a8_matrix_make(in, W8A8_ROW_MAJOR, M, K, K, A);
        for (int j = 0; j < nrot; j++) c.b[j] = w8a8_matrix_make(in, W8A8_COL_MAJOR, K, N, K, B + (size_t)j * bsz);
        c.out = w8a8_matrix_make(cfg->out_dtype, W8A8_ROW_MAJOR, M, N, N, out);
        c.sa = w8a8_vector_make(W8A8_DTYPE_FP32, cfg->per_token ? M : 1, sa);
        c.sb = w8a8_vector_make(W8A8_DTYPE_FP32, cfg->per_token ? N : 1, sb);
        memset(out, 0xff, (size_t)(M * N) * es); /* poison: NaN in every output dtype */
        const cli_stats us = cli_time_calls(cpu, cli_mm_call_once, &c, cfg->warmup, cfg->iters);
        if (us.p50 < 0) {
          rc = -1;
          break;
        }
        cli_launch ran;
        cli_last_launch(h, "auto", &ran);
        const int last = (c.next + nrot - 1) % nrot; /* the copy the last call used */
        int64_t rows[8];
        const int nr = cli_sample_rows(M, 8, rows);
        cli_cmp cmp;
        cli_cmp_init(&cmp);
        if (cli_verify_rows(in, cfg->out_dtype, A, K, B + (size_t)last * bsz, K, N, K, sa, cfg->per_token ? M : 1,
                            sb, cfg->per_token ? N : 1, NULL, out, N, rows, nr, &cmp) != 0) {
          rc = -1;
          break;
        }
        if (cmp.wrong)
          fprintf(stderr, "bench_cpu: %lldx%lldx%lld %s: %lld wrong, first at (%lld, %lld): got %g, reference %g\n",
                  (long long)M, (long long)N, (long long)K, w8a8_dtype_name(in), (long long)cmp.wrong,
                  (long long)cmp.bad_m, (long long)cmp.bad_n, cmp.bad_got, cmp.bad_ref);
        const double our_bytes = (double)(M * K) + (double)bsz + (double)(M * N) * (double)es;

        /* the baseline for this dtype */
        cli_stats base_us = cli_stats_failed();
        const char *base_name = "";
        cli_launch base_ran; /* the baseline's own implementation */
        memset(&base_ran, 0, sizeof base_ran);
        long base_wrong = 0;
        double base_bytes = 0;
#ifdef W8A8_HAVE_DNNL
        if (cfg->baselines && !fp8) {
          for (int64_t n = 0; n < N; n++) dscale[n] = sa[0] * sb[cfg->per_token ? n : 0];
          dnnl_call d;
          if (dnnl_setup(&d, M, N, K, A, B, bsz, nrot, dscale, f32out) == 0) {
            if (!said_impl++)
              fprintf(stderr, "bench_cpu: oneDNN %d.%d.%d s8 matmul implementation: %s\n", dnnl_version()->major,
                      dnnl_version()->minor, dnnl_version()->patch, d.impl);
            memset(f32out, 0xff, sizeof(float) * (size_t)(M * N));
            base_us = cli_time_calls(cpu, dnnl_once, &d, cfg->warmup, cfg->iters);
            const int dlast = (d.next + nrot - 1) % nrot;
            snprintf(base_ran.kernel, sizeof base_ran.kernel, "%s", d.impl);
            dnnl_call_free(&d);
            if (base_us.p50 > 0) {
              base_name = "onednn_s8";
              base_bytes = (double)(M * K) + (double)bsz + (double)(M * N) * 4.0;
              base_wrong = check_f32_rows(0, A, B + (size_t)dlast * bsz, M, N, K, &one, 0, dscale, f32out);
            }
          }
        }
#endif
#ifdef W8A8_HAVE_OPENBLAS
        if (cfg->baselines && fp8 && A32 && B32) {
          sgemm_call s;
          memset(&s, 0, sizeof s);
          s.M = M, s.N = N, s.K = K, s.a = A32, s.c = f32out, s.nrot = srot;
          for (int j = 0; j < srot; j++) s.b[j] = B32 + (size_t)j * bsz;
          memset(f32out, 0xff, sizeof(float) * (size_t)(M * N));
          base_us = cli_time_calls(cpu, sgemm_once, &s, cfg->warmup, cfg->iters);
          const int slast = (s.next + srot - 1) % srot;
          if (base_us.p50 > 0) {
            base_name = "openblas_sgemm";
            snprintf(base_ran.kernel, sizeof base_ran.kernel, "cblas_sgemm");
            base_bytes = 4.0 * ((double)(M * K) + (double)bsz + (double)(M * N));
            for (int64_t n = 0; n < N; n++) dscale[n] = 1.0f;
            base_wrong = check_f32_rows(1, A, B + (size_t)slast * bsz, M, N, K, &one, 0, dscale, f32out);
          }
        }
#endif
        const int have_base = base_us.p50 > 0;
        emit_row(emit, ctx, "w8a8_cpu", w8a8_dtype_name(in), scales, shape, M, N, K, us, our_bytes, &ran,
                 have_base ? base_us.p50 : 0.0, base_name, (long)cmp.wrong, device);
        if (have_base)
          emit_row(emit, ctx, base_name, fp8 ? "fp32" : "int8", fp8 ? "none" : "channel", shape, M, N, K, base_us,
                   base_bytes, &base_ran, 0.0, "", base_wrong, device);
      }
#ifdef W8A8_HAVE_OPENBLAS
      free(A32);
      free(B32);
#endif
    }
    free(A), free(B), free(out), free(sa), free(sb), free(f32out), free(dscale);
  }
  w8a8_destroy(h);
  return rc;
}
