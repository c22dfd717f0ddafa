/* test_cuda.c — the CUDA backend against the CPU reference handle.
 *
 * Every test draws fresh random data, poisons the outputs (including the padding of
 * strided outputs, which must stay untouched), runs the same call on a CUDA handle and
 * on a CPU handle forced to W8A8_KERNEL_REFERENCE, and compares every byte: int8 GEMMs
 * and all quantizers bit for bit, fp8 GEMMs within a tight error bound (the summation
 * order differs). Tests SKIP without a GPU so that CI (no GPU) passes.
 * W8A8_GPU_TEST_SMALL=1 (used under compute-sanitizer) drops the largest shapes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "core/knobs.h"

#ifndef W8A8_HAVE_CUDA
W8A8_TEST(cuda_not_built) { SKIP("built without CUDA"); }
#else
#include <cuda_runtime.h>

/* ---- helpers ------------------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (uint32_t)(rng >> 16);
}
static float frand(float lo, float hi) { return lo + (hi - lo) * (float)(rnd() & 0xffffff) / 16777216.0f; }
static void reseed(void) {
  static uint64_t calls;
  rng ^= 0x2545f4914f6cdd1dull * ++calls; /* fresh data per case */
  if (!rng) rng = 1;
}

static int small_mode(void) { return getenv("W8A8_GPU_TEST_SMALL") != NULL; }

#define GPU_OR_SKIP()                                                  \
  do {                                                                 \
    if (w8a8_cuda_device_count() == 0) SKIP("no CUDA device visible"); \
  } while (0)

#define CUDA_REQUIRE(call)                                                                   \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    REQUIRE(e_ == cudaSuccess, "%s -> %s", #call, cudaGetErrorString(e_));                   \
  } while (0)

static size_t esize(w8a8_dtype t) { return w8a8_dtype_size(t); }

/* A host buffer and its device twin. */
typedef struct twin {
  void *h, *d;
  size_t bytes;
} twin;

static int twin_alloc(twin *t, size_t bytes) {
  t->bytes = bytes;
  t->h = malloc(bytes ? bytes : 1);
  t->d = NULL;
  if (!t->h) return 0;
  return cudaMalloc(&t->d, bytes ? bytes : 1) == cudaSuccess;
}
static void twin_free(twin *t) {
  free(t->h);
  if (t->d) cudaFree(t->d);
  t->h = t->d = NULL;
}
static int twin_up(twin *t) { return cudaMemcpy(t->d, t->h, t->bytes, cudaMemcpyHostToDevice) == cudaSuccess; }
static int twin_down(void *dst, const twin *t) {
  return cudaMemcpy(dst, t->d, t->bytes, cudaMemcpyDeviceToHost) == cudaSuccess;
}

/* bf16 / fp16 bits of moderate random values (any such pattern is a valid number). */
static uint16_t rand_bf16(float lo, float hi) {
  float f = frand(lo, hi);
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)(u >> 16);
}
static uint16_t rand_f16_small(void) { /* |x| in [2^-3, 2^3) */
  return (uint16_t)(((rnd() & 1u) << 15) | ((12u + rnd() % 6u) << 10) | (rnd() & 0x3ffu));
}
static float bits_to_f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static float bf16_f(uint16_t h) { return bits_to_f((uint32_t)h << 16); }
static float f16_f(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e == 0x1f) return bits_to_f(s | 0x7f800000u | (m << 13));
  if (e == 0) return (s ? -1.0f : 1.0f) * (float)m * 0x1p-24f;
  return bits_to_f(s | ((e + 112u) << 23) | (m << 13));
}
static float fp8_f(uint8_t v) {
  int s = v >> 7, e = (v >> 3) & 15, m = v & 7;
  float r = e ? ldexpf(1.0f + m / 8.0f, e - 7) : m * 0x1p-9f;
  return s ? -r : r;
}
static float load_out(w8a8_dtype t, const void *base, int64_t i) {
  if (t == W8A8_DTYPE_BF16) return bf16_f(((const uint16_t *)base)[i]);
  if (t == W8A8_DTYPE_FP16) return f16_f(((const uint16_t *)base)[i]);
  return ((const float *)base)[i];
}

static w8a8_handle *gpu_handle(void) {
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CUDA, 0) != W8A8_SUCCESS) return NULL;
  return h;
}
static w8a8_handle *ref_handle(void) {
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CPU, 0) != W8A8_SUCCESS) return NULL;
  w8a8_set_kernel(h, W8A8_KERNEL_REFERENCE);
  return h;
}
/* The capability whose kernels the handle runs (src/cuda/dispatch_rule.h): the GPU's, or lower where the library's
 * code for it is older PTX (the ptx suite) or W8A8_DEV CUDA_FORCE_PATH says so. What it runs, fp8 or not, follows
 * from it. */
int w8a8_cuda_handle_cc(const w8a8_handle *h);
static int gpu_cc(w8a8_handle *g) { return w8a8_cuda_handle_cc(g); }
/* The GPU's own capability: the quantizers write fp8 from 8.9 on, from any code. */
static int device_cc(w8a8_handle *g) {
  w8a8_handle_info info;
  if (w8a8_get_info(g, &info) != W8A8_SUCCESS) return 0;
  return info.cc_major * 10 + info.cc_minor;
}
/* The kernel W8A8_KERNEL_GENERIC runs on g: the portable one of its capability. */
static const char *portable_kernel(w8a8_handle *g) { return gpu_cc(g) >= 80 ? "mma" : "mma_sm75"; }
/* Where not "", the kernel every GPU GEMM of run_mm must run (its launch record): a test that forces a path
 * fails if another one computed its results. */
static const char *g_want_kernel = "";

/* ---- scaled_mm ------------------------------------------------------------------- */

typedef struct mm_case {
  int64_t M, N, K;
  w8a8_dtype in, out;
  int sa_tok, sb_ch, bias;
  int azp;                  /* 0 none, 1 premultiplied azp_adj, 2 per-tensor azp, 3 per-token azp */
  int64_t pad_a, pad_b, pad_o; /* ld = cols + pad */
  int off_a, off_b, off_o;  /* element offsets of the data pointers (misalignment) */
} mm_case;

/* Run one case on both handles; returns 0 when everything matched. */
static int run_mm(w8a8_handle *g, w8a8_handle *r, const mm_case *c, double *worst) {
  reseed();
  const int64_t M = c->M, N = c->N, K = c->K;
  const int64_t lda = K + c->pad_a, ldb = K + c->pad_b, ldo = N + c->pad_o;
  const size_t oes = esize(c->out);
  const int fp8 = c->in == W8A8_DTYPE_FP8_E4M3;
  twin A, B, SA, SB, BI, AZ, ADJ, O;
  memset(&BI, 0, sizeof BI);
  memset(&AZ, 0, sizeof AZ);
  memset(&ADJ, 0, sizeof ADJ);
  int ok = twin_alloc(&A, (size_t)(M * lda + c->off_a)) && twin_alloc(&B, (size_t)(N * ldb + c->off_b)) &&
           twin_alloc(&SA, 4 * (size_t)(c->sa_tok ? M : 1)) && twin_alloc(&SB, 4 * (size_t)(c->sb_ch ? N : 1)) &&
           twin_alloc(&O, oes * (size_t)(M * ldo + c->off_o));
  if (ok && c->bias) ok = twin_alloc(&BI, oes * (size_t)N);
  if (ok && c->azp) ok = twin_alloc(&ADJ, 4 * (size_t)N);
  if (ok && c->azp >= 2) ok = twin_alloc(&AZ, 4 * (size_t)(c->azp == 3 ? M : 1));
  int bad = 0;
  if (!ok) {
    CHECK(0, "allocation failed for %lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
    bad = 1;
    goto out;
  }
  for (size_t i = 0; i < A.bytes; i++) {
    uint8_t v = (uint8_t)rnd();
    if (fp8 && (v & 0x7f) == 0x7f) v ^= 1; /* no NaN operands: they would poison whole rows */
    ((uint8_t *)A.h)[i] = v;
  }
  for (size_t i = 0; i < B.bytes; i++) {
    uint8_t v = (uint8_t)rnd();
    if (fp8 && (v & 0x7f) == 0x7f) v ^= 1;
    ((uint8_t *)B.h)[i] = v;
  }
  /* Scales sized so that fp16 outputs stay finite for int8 and fp8 sums. */
  float base = fp8 ? 1e-4f : 1e-5f;
  for (size_t i = 0; i < SA.bytes / 4; i++) ((float *)SA.h)[i] = base * frand(0.25f, 4.0f);
  for (size_t i = 0; i < SB.bytes / 4; i++) ((float *)SB.h)[i] = frand(0.25f, 4.0f);
  for (int64_t i = 0; c->bias && i < N; i++) {
    if (c->out == W8A8_DTYPE_BF16) ((uint16_t *)BI.h)[i] = rand_bf16(-4, 4);
    else if (c->out == W8A8_DTYPE_FP16) ((uint16_t *)BI.h)[i] = rand_f16_small();
    else ((float *)BI.h)[i] = frand(-4, 4);
  }
  for (size_t i = 0; i < ADJ.bytes / 4; i++) ((int32_t *)ADJ.h)[i] = (int32_t)(rnd() % 200001) - 100000;
  for (size_t i = 0; i < AZ.bytes / 4; i++) ((int32_t *)AZ.h)[i] = (int32_t)(rnd() % 301) - 150;
  memset(O.h, 0xff, O.bytes); /* NaN in every float format: unwritten elements show */
  if (!(twin_up(&A) && twin_up(&B) && twin_up(&SA) && twin_up(&SB) && twin_up(&O) && (!c->bias || twin_up(&BI)) &&
        (!c->azp || twin_up(&ADJ)) && (c->azp < 2 || twin_up(&AZ)))) {
    CHECK(0, "upload failed");
    bad = 1;
    goto out;
  }

  void *refo = malloc(O.bytes), *got = malloc(O.bytes);
  memset(refo, 0xff, O.bytes);
  for (int side = 0; side < 2; side++) {
    int dev = side == 0;
    w8a8_handle *h = dev ? g : r;
#define P(t, off) ((void *)((char *)(dev ? (t).d : (t).h) + (off)))
    w8a8_matrix a = w8a8_matrix_make(c->in, W8A8_ROW_MAJOR, M, K, lda, P(A, c->off_a));
    w8a8_matrix b = w8a8_matrix_make(c->in, W8A8_COL_MAJOR, K, N, ldb, P(B, c->off_b));
    w8a8_matrix o = w8a8_matrix_make(c->out, W8A8_ROW_MAJOR, M, N, ldo, dev ? P(O, oes * c->off_o) : (char *)refo + oes * c->off_o);
    w8a8_vector sa = w8a8_vector_make(W8A8_DTYPE_FP32, c->sa_tok ? M : 1, P(SA, 0));
    w8a8_vector sb = w8a8_vector_make(W8A8_DTYPE_FP32, c->sb_ch ? N : 1, P(SB, 0));
    w8a8_vector bi = w8a8_vector_make(c->out, N, c->bias ? P(BI, 0) : NULL);
    w8a8_zero_point zp;
    zp.azp_adj = w8a8_vector_make(W8A8_DTYPE_INT32, N, c->azp ? P(ADJ, 0) : NULL);
    zp.azp = w8a8_vector_make(W8A8_DTYPE_INT32, c->azp == 3 ? M : 1, c->azp >= 2 ? P(AZ, 0) : NULL);
#undef P
    w8a8_status s = w8a8_scaled_mm(h, &a, &b, &sa, &sb, c->bias ? &bi : NULL, c->azp ? &zp : NULL, &o);
    if (s != W8A8_SUCCESS) {
      CHECK(0, "%s scaled_mm -> %s: %s", dev ? "cuda" : "ref", w8a8_status_name(s), w8a8_last_error());
      bad = 1;
    }
    w8a8_launch_info li;
    li.kernel = "";
    if (dev && s == W8A8_SUCCESS && g_want_kernel[0] && M > 0 && N > 0 &&
        (w8a8_get_last_launch(h, &li) != W8A8_SUCCESS || strcmp(li.kernel, g_want_kernel) != 0)) {
      CHECK(0, "%lldx%lldx%lld ran on \"%s\", expected \"%s\"", (long long)M, (long long)N, (long long)K, li.kernel,
            g_want_kernel);
      bad = 1;
    }
  }
  if (!bad && (cudaDeviceSynchronize() != cudaSuccess || !twin_down(got, &O))) {
    CHECK(0, "device error after scaled_mm: %s", cudaGetErrorString(cudaGetLastError()));
    bad = 1;
  }
  long wrong = 0;
  for (int64_t m = 0; !bad && m < M; m++) {
    for (int64_t j = 0; j < ldo && (m + 1 < M || j < N); j++) {
      int64_t i = c->off_o + m * ldo + j;
      const char *x = (const char *)got + i * oes, *y = (const char *)refo + i * oes;
      if (memcmp(x, y, oes) == 0) continue;
      int ok_el = 0;
      if (fp8 && j < N) {
        /* Bound: 1 ulp of the output format + 1e-3 of sum |sa sb a b| (+|bias|). */
        double mag = 0;
        const uint8_t *ar = (const uint8_t *)A.h + c->off_a + m * lda, *br = (const uint8_t *)B.h + c->off_b + j * ldb;
        for (int64_t k = 0; k < K; k++) mag += fabs((double)fp8_f(ar[k]) * fp8_f(br[k]));
        mag *= fabs((double)((float *)SA.h)[c->sa_tok ? m : 0] * ((float *)SB.h)[c->sb_ch ? j : 0]);
        double gv = load_out(c->out, got, i), rv = load_out(c->out, refo, i);
        if (c->bias) mag += fabs(load_out(c->out, BI.h, j));
        double ulp = c->out == W8A8_DTYPE_BF16 ? 0x1p-7 : c->out == W8A8_DTYPE_FP16 ? 0x1p-10 : 0x1p-23;
        double err = fabs(gv - rv), tol = ulp * fabs(rv) + 1e-3 * mag;
        if (isfinite(gv) && isfinite(rv) && err <= tol) {
          ok_el = 1;
          if (mag > 0 && err / mag > *worst) *worst = err / mag;
        }
      }
      if (!ok_el) {
        if (wrong < 3)
          CHECK(0, "%s %lldx%lldx%lld out[%lld,%lld]%s: cuda %g ref %g", w8a8_dtype_name(c->in), (long long)M,
                (long long)N, (long long)K, (long long)m, (long long)j, j >= N ? " (padding)" : "",
                load_out(c->out, got, i), load_out(c->out, refo, i));
        wrong++;
      }
    }
  }
  if (wrong) {
    CHECK(0, "%ld wrong elements (in %s out %s sa_tok %d sb_ch %d bias %d azp %d pad %lld/%lld/%lld off %d/%d/%d)",
          wrong, w8a8_dtype_name(c->in), w8a8_dtype_name(c->out), c->sa_tok, c->sb_ch, c->bias, c->azp,
          (long long)c->pad_a, (long long)c->pad_b, (long long)c->pad_o, c->off_a, c->off_b, c->off_o);
    bad = 1;
  }
  free(refo);
  free(got);
out:
  twin_free(&A);
  twin_free(&B);
  twin_free(&SA);
  twin_free(&SB);
  twin_free(&O);
  if (BI.h) twin_free(&BI);
  if (AZ.h) twin_free(&AZ);
  if (ADJ.h) twin_free(&ADJ);
  return bad;
}

static const int64_t odd_shapes[][3] = {{1, 1, 1},     {3, 7, 13},    {17, 33, 65},   {64, 128, 256}, {65, 129, 257},
                                        {130, 200, 300}, {1, 7, 4096}, {16, 16, 16},  {33, 190, 1000}, {7, 513, 129},
                                        {128, 64, 31},  {250, 70, 2}};

/* Layout variant v: 0 contiguous (16-byte path), 1 padded ld (4-byte path), 2 odd ld + odd offsets (byte path). */
static void layout(mm_case *c, int v) {
  c->pad_a = c->pad_b = c->pad_o = 0;
  c->off_a = c->off_b = c->off_o = 0;
  if (v == 1) {
    c->pad_a = 4 + (c->K % 4 ? 4 - c->K % 4 : 0);
    c->pad_b = 20 + (c->K % 4 ? 4 - c->K % 4 : 0);
    c->pad_o = 6;
    c->off_a = 4;
    c->off_b = 8;
  } else if (v == 2) {
    c->pad_a = 3;
    c->pad_b = 5;
    c->pad_o = 1;
    c->off_a = 1;
    c->off_b = 3;
    c->off_o = 1;
  }
}

/* Every dtype x scale mode x out dtype x bias x zero point, over odd shapes and layouts. */
static void mm_matrix(w8a8_dtype in) {
  w8a8_handle *g = gpu_handle(), *r = ref_handle();
  REQUIRE(g && r, "handles: %s", w8a8_last_error());
  REQUIRE_OK(w8a8_set_kernel(g, W8A8_KERNEL_GENERIC)); /* the portable kernel; AUTO in cuda_kernel_selection */
  g_want_kernel = portable_kernel(g);
  static const w8a8_dtype outs[3] = {W8A8_DTYPE_BF16, W8A8_DTYPE_FP16, W8A8_DTYPE_FP32};
  int n = 0, failed = 0;
  double worst = 0;
  for (int o = 0; o < 3; o++)
    for (int st = 0; st < 2; st++)
      for (int sc = 0; sc < 2; sc++)
        for (int bi = 0; bi < 2; bi++)
          for (int az = 0; az < (in == W8A8_DTYPE_INT8 ? 4 : 1); az++) {
            const int64_t *s = odd_shapes[n % 12];
            mm_case c = {s[0], s[1], s[2], in, outs[o], st, sc, bi, az, 0, 0, 0, 0, 0, 0};
            layout(&c, (n / 12 + n) % 3);
            failed += run_mm(g, r, &c, &worst);
            n++;
            if (failed > 3) goto done;
          }
done:
  printf("    %d cases on %s, %d failed, worst fp8 err/sum|ab| %.2e\n", n, g_want_kernel, failed, worst);
  g_want_kernel = "";
  w8a8_destroy(g);
  w8a8_destroy(r);
}

W8A8_TEST(cuda_scaled_mm_int8_all_modes) {
  GPU_OR_SKIP();
  mm_matrix(W8A8_DTYPE_INT8);
}

W8A8_TEST(cuda_scaled_mm_fp8_all_modes) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle();
  REQUIRE(g, "%s", w8a8_last_error());
  int cc = gpu_cc(g);
  w8a8_destroy(g);
  if (cc < 89) SKIP("fp8 needs sm_89+ (cuda_fp8_unsupported covers this device)");
  mm_matrix(W8A8_DTYPE_FP8_E4M3);
}

/* M from 1 to 16384 across the tile-size boundaries, both tile configurations. */
static void mm_sweep(w8a8_dtype in) {
  w8a8_handle *g = gpu_handle(), *r = ref_handle();
  REQUIRE(g && r, "handles: %s", w8a8_last_error());
  REQUIRE_OK(w8a8_set_kernel(g, W8A8_KERNEL_GENERIC));
  g_want_kernel = portable_kernel(g);
  const int fp8 = in == W8A8_DTYPE_FP8_E4M3;
  static const int64_t Ms[] = {1, 2, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 257, 1000, 4096, 16384};
  double worst = 0;
  int failed = 0, n = 0;
  for (size_t i = 0; i < sizeof Ms / sizeof Ms[0]; i++) {
    if (small_mode() && Ms[i] > 1000) break;
    int64_t N = fp8 ? 72 : 136, K = fp8 ? 320 : 544;
    if (Ms[i] >= 4096) K = fp8 ? 64 : 160;
    mm_case c = {Ms[i], N, K, in, W8A8_DTYPE_BF16, 1, 1, (int)(i & 1), 0, 0, 0, 0, 0, 0, 0};
    failed += run_mm(g, r, &c, &worst);
    n++;
  }
  /* Enough tiles for the 128x128 configuration (>= one wave), aligned and unaligned. */
  for (int v = 0; v < (small_mode() ? 1 : 2); v++) {
    mm_case c = {1536 + 7 * v, 1408 + 3 * v, fp8 ? 96 : 200, in, v ? W8A8_DTYPE_FP16 : W8A8_DTYPE_BF16, 1, 1, 1,
                 fp8 ? 0 : 3, 0, 0, 0, 0, 0, 0};
    layout(&c, v ? 2 : 0);
    failed += run_mm(g, r, &c, &worst);
    n++;
  }
  /* Split-K: few small tiles over a deep K (the partial sums go through the handle's workspace),
   * an uneven last split in the second case. */
  for (int v = 0; v < 2; v++) {
    mm_case c = {5 + 12 * v, 200 + 7 * v, 2048 + 13 * v, in, v ? W8A8_DTYPE_FP32 : W8A8_DTYPE_BF16, 1, 1, 1,
                 fp8 ? 0 : 3 - v, 0, 0, 0, 0, 0, 0};
    layout(&c, v ? 2 : 0);
    failed += run_mm(g, r, &c, &worst);
    n++;
  }
  if (!small_mode()) {
    /* LLM-like decode and prefill shapes (weight streaming, deep K). */
    mm_case c1 = {16, 2560, 4096, in, W8A8_DTYPE_BF16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    failed += run_mm(g, r, &c1, &worst);
    mm_case c2 = {200, 1024, fp8 ? 1024 : 4096, in, W8A8_DTYPE_BF16, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
    failed += run_mm(g, r, &c2, &worst);
    n += 2;
  }
  printf("    %d shapes on %s, %d failed, worst fp8 err/sum|ab| %.2e\n", n, g_want_kernel, failed, worst);
  g_want_kernel = "";
  w8a8_destroy(g);
  w8a8_destroy(r);
}

W8A8_TEST(cuda_scaled_mm_int8_m_sweep) {
  GPU_OR_SKIP();
  mm_sweep(W8A8_DTYPE_INT8);
}

/* The sm_75 kernel on any GPU: W8A8_DEV CUDA_FORCE_PATH=75 makes the handle run what a Turing GPU runs. Every
 * int8 mode and layout and the M sweep (both tiles, split-K) bit for bit, each GEMM proven to have run there. */
W8A8_TEST(cuda_scaled_mm_int8_sm75_path) {
  GPU_OR_SKIP();
  w8a8_dev_set_int("CUDA_FORCE_PATH", 75);
  mm_matrix(W8A8_DTYPE_INT8);
  if (!w8a8_test_failed()) mm_sweep(W8A8_DTYPE_INT8);
  w8a8_dev_set_int("CUDA_FORCE_PATH", -1);
}

W8A8_TEST(cuda_scaled_mm_fp8_m_sweep) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle();
  REQUIRE(g, "%s", w8a8_last_error());
  int cc = gpu_cc(g);
  w8a8_destroy(g);
  if (cc < 89) SKIP("fp8 needs sm_89+");
  mm_sweep(W8A8_DTYPE_FP8_E4M3);
}

/* K = 0: the output is the bias (or zeros); M = 0 / N = 0 write nothing. */
W8A8_TEST(cuda_scaled_mm_empty_k) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle(), *r = ref_handle();
  REQUIRE(g && r, "%s", w8a8_last_error());
  double worst = 0;
  for (int bi = 0; bi < 2; bi++) {
    mm_case c = {5, 9, 0, W8A8_DTYPE_INT8, W8A8_DTYPE_FP32, 1, 0, bi, 0, 0, 0, 0, 0, 0, 0};
    run_mm(g, r, &c, &worst);
  }
  mm_case c0 = {0, 9, 4, W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  run_mm(g, r, &c0, &worst);
  mm_case c1 = {3, 0, 4, W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  run_mm(g, r, &c1, &worst);
  w8a8_destroy(g);
  w8a8_destroy(r);
}

/* AUTO, GENERIC and SM90 agree; AUTO leaves no error behind when the fast path declines. */
W8A8_TEST(cuda_kernel_selection) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle(), *r = ref_handle();
  REQUIRE(g && r, "%s", w8a8_last_error());
  int cc = gpu_cc(g);
  double worst = 0;
  w8a8_dtype in = cc >= 89 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
  mm_case c = {300, 520, 1024, in, W8A8_DTYPE_BF16, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0};
  mm_case ci = c;
  ci.in = W8A8_DTYPE_INT8;
  static const w8a8_kernel ks[3] = {W8A8_KERNEL_AUTO, W8A8_KERNEL_GENERIC, W8A8_KERNEL_SM90};
  for (int i = 0; i < 3; i++) {
    REQUIRE_OK(w8a8_set_kernel(g, ks[i]));
    if (ks[i] == W8A8_KERNEL_SM90) {
      /* Forced SM90 either computes the right answer or refuses cleanly. */
      int8_t *d = NULL;
      CUDA_REQUIRE(cudaMalloc((void **)&d, 64 * 64 * 3));
      float *sc = NULL;
      CUDA_REQUIRE(cudaMalloc((void **)&sc, 8));
      CUDA_REQUIRE(cudaMemset(sc, 0, 8));
      w8a8_matrix a = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 64, 64, 64, d);
      w8a8_matrix b = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, 64, 64, 64, d + 4096);
      w8a8_matrix o = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, 64, 32, 32, d + 8192);
      w8a8_vector s1 = w8a8_vector_make(W8A8_DTYPE_FP32, 1, sc);
      b.cols = 32;
      w8a8_status s = w8a8_scaled_mm(g, &a, &b, &s1, &s1, NULL, NULL, &o);
      cudaDeviceSynchronize();
      cudaFree(d);
      cudaFree(sc);
      if (s == W8A8_ERROR_UNSUPPORTED_DEVICE) {
        CHECK(strlen(w8a8_last_error()) > 0, "a refusal must say why");
        printf("    SM90 forced: %s\n", w8a8_last_error());
        continue;
      }
      CHECK(s == W8A8_SUCCESS, "SM90 forced -> %s: %s", w8a8_status_name(s), w8a8_last_error());
    }
    CHECK(run_mm(g, r, &c, &worst) == 0, "kernel %d", (int)ks[i]);
    CHECK(run_mm(g, r, &ci, &worst) == 0, "kernel %d int8", (int)ks[i]);
    CHECK(w8a8_last_error()[0] == 0, "kernel %d left an error: %s", (int)ks[i], w8a8_last_error());
  }
  w8a8_destroy(g);
  w8a8_destroy(r);
}

/* Hooks of src/cuda/gemv.cu (hidden symbols, reachable from the static library). */
unsigned long long w8a8_cuda_gemv_launches(void);

/* The CUDA-core kernel for the fewest tokens (gemv.cu; switched on everywhere it takes here, through its hook):
 * int8 M = 1..8 and fp8 M = 1 over odd N and K (K % 16 tails, K = 1), every output dtype, scale
 * mode, bias and zero-point mode, row strides padded to multiples of 16 bytes, against the scalar
 * reference (int8 bit for bit), each case proven to have run on that kernel (its launch counter);
 * then inputs it declines (a row stride that is not a multiple of 16 bytes, M = 9, fp8 M = 2) run
 * on the other kernels, still right; then the default rule picks it exactly where it should. */
W8A8_TEST(cuda_gemv_matches_reference) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle(), *r = ref_handle();
  REQUIRE(g && r, "handles: %s", w8a8_last_error());
  const int cc = gpu_cc(g);
  static const w8a8_dtype outs[3] = {W8A8_DTYPE_BF16, W8A8_DTYPE_FP16, W8A8_DTYPE_FP32};
  /* K % 16 tails, K = 1, partial unrolled groups (62 and 131 pieces of 16 bytes), several columns
   * per warp (N = 9000: more column groups than one wave of blocks) */
  static const int64_t NK[][2] = {{1, 16},     {7, 1},       {33, 15},  {33, 17}, {1000, 100},
                                  {129, 4103}, {8, 4096},    {40, 1000}, {24, 2100}, {9000, 64}};
  const int nk = (int)(sizeof NK / sizeof NK[0]);
  double worst = 0;
  int n = 0;
  w8a8_dev_set_int("GEMV", 1);
  for (int dt = 0; dt < 2 && !w8a8_test_failed(); dt++) {
    const w8a8_dtype in = dt ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
    if (dt && cc < 89) break;
    for (int64_t M = 1; M <= (dt ? 1 : 8) && !w8a8_test_failed(); M++)
      for (int i = 0; i < nk && !w8a8_test_failed(); i++, n++) {
        const int64_t N = NK[i][0], K = NK[i][1], k16 = (K + 15) / 16 * 16;
        mm_case c = {M, N, K, in, outs[n % 3], n % 2, (n / 2) % 2, (n / 3) % 2, dt ? 0 : (n / 6) % 4,
                     k16 - K + 16 * ((n / 5) % 2), k16 - K + 16 * ((n / 7) % 2), n % 3, 0, 0, 0};
        const unsigned long long before = w8a8_cuda_gemv_launches();
        CHECK(run_mm(g, r, &c, &worst) == 0, "M=%lld N=%lld K=%lld", (long long)M, (long long)N, (long long)K);
        CHECK(w8a8_cuda_gemv_launches() == before + 1, "M=%lld N=%lld K=%lld %s: the CUDA-core kernel did not run",
              (long long)M, (long long)N, (long long)K, w8a8_dtype_name(in));
      }
  }
  /* declined: the other kernels run, and are right */
  mm_case d1 = {3, 33, 17, W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 1, 1, 1, 0, 0, 15, 0, 0, 0, 0}; /* lda = 17 */
  mm_case d2 = {9, 33, 64, W8A8_DTYPE_INT8, W8A8_DTYPE_FP16, 0, 1, 0, 2, 0, 0, 0, 0, 0, 0};  /* M = 9 */
  mm_case d3 = {2, 33, 64, W8A8_DTYPE_FP8_E4M3, W8A8_DTYPE_FP32, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0}; /* fp8 M = 2 */
  mm_case d4 = {1, 33, 64, W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0};    /* A at +8 bytes */
  const mm_case *ds[4] = {&d1, &d2, &d3, &d4};
  for (int i = 0; i < 4 && !w8a8_test_failed(); i++) {
    if (ds[i]->in == W8A8_DTYPE_FP8_E4M3 && cc < 89) continue;
    const unsigned long long before = w8a8_cuda_gemv_launches();
    CHECK(run_mm(g, r, ds[i], &worst) == 0, "declined case %d", i);
    CHECK(w8a8_cuda_gemv_launches() == before, "declined case %d ran on the CUDA-core kernel", i);
  }
  /* the default rule (w8a8_cuda_gemv_wanted): on sm_90, one token of int8; fp8 (one token, N <= 4096) only with
   * W8A8_GEMV_FP8=1 (off by default) */
  w8a8_dev_set_int("GEMV", 2);
  for (int fp8_rule = 0; fp8_rule < 2 && !w8a8_test_failed(); fp8_rule++) {
    w8a8_dev_set_int("GEMV_FP8", fp8_rule);
    mm_case a1 = {1, 5000, 64, W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    mm_case a2 = {2, 33, 64, W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    mm_case a3 = {1, 4096, 64, W8A8_DTYPE_FP8_E4M3, W8A8_DTYPE_BF16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    mm_case a4 = {1, 4097, 64, W8A8_DTYPE_FP8_E4M3, W8A8_DTYPE_BF16, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    const mm_case *as[4] = {&a1, &a2, &a3, &a4};
    const int want[4] = {1, 0, fp8_rule, 0};
    for (int i = 0; i < 4 && !w8a8_test_failed(); i++) {
      if (as[i]->in == W8A8_DTYPE_FP8_E4M3 && cc < 89) continue;
      const unsigned long long before = w8a8_cuda_gemv_launches();
      CHECK(run_mm(g, r, as[i], &worst) == 0, "default-rule case %d", i);
      const int w = want[i] && cc == 90;
      CHECK(w8a8_cuda_gemv_launches() == before + (unsigned long long)w,
            "default-rule case %d (M=%lld N=%lld %s, W8A8_GEMV_FP8 %d): the CUDA-core kernel %s", i, (long long)as[i]->M,
            (long long)as[i]->N, w8a8_dtype_name(as[i]->in), fp8_rule, w ? "did not run" : "ran");
    }
  }
  w8a8_dev_set_int("GEMV_FP8", -1);
  w8a8_dev_set_int("GEMV", 1);
  /* a forced kernel is what it names, never this one */
  if (!w8a8_test_failed()) {
    mm_case f = {1, 33, 64, W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    REQUIRE_OK(w8a8_set_kernel(g, W8A8_KERNEL_GENERIC));
    const unsigned long long before = w8a8_cuda_gemv_launches();
    CHECK(run_mm(g, r, &f, &worst) == 0, "GENERIC kernel, M = 1");
    CHECK(w8a8_cuda_gemv_launches() == before, "W8A8_KERNEL_GENERIC ran on the CUDA-core kernel");
  }
  w8a8_dev_set_int("GEMV", -1);
  printf("    %d cases on the CUDA-core kernel, worst fp8 err/sum|ab| %.2e\n", n, worst);
  w8a8_destroy(g);
  w8a8_destroy(r);
}

/* fp8 where the handle runs no fp8 GEMM (below 8.9: this GPU, its code or W8A8_DEV CUDA_FORCE_PATH; the test
 * dispatches a GPU of 8.9+ as 8.0): the GEMM refuses with UNSUPPORTED_DEVICE naming the capability needed, and so
 * do both quantizers on a GPU below 8.9; nothing is written. */
W8A8_TEST(cuda_fp8_unsupported) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle();
  REQUIRE(g, "%s", w8a8_last_error());
  const int forced = gpu_cc(g) >= 89;
  if (forced) w8a8_dev_set_int("CUDA_FORCE_PATH", 80);
  void *d = NULL;
  CUDA_REQUIRE(cudaMalloc(&d, 4096));
  CUDA_REQUIRE(cudaMemset(d, 0x5a, 4096));
  w8a8_matrix a = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, 4, 4, 4, d);
  w8a8_matrix b = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_COL_MAJOR, 4, 4, 4, (char *)d + 64);
  w8a8_matrix o = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 4, 4, 4, (char *)d + 128);
  w8a8_vector s = w8a8_vector_make(W8A8_DTYPE_FP32, 1, (char *)d + 512);
  w8a8_matrix x = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 4, 4, 4, (char *)d + 1024);
  w8a8_matrix x2 = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 4, 8, 8, (char *)d + 1024); /* gate, up */
  w8a8_matrix q = w8a8_matrix_make(W8A8_DTYPE_FP8_E4M3, W8A8_ROW_MAJOR, 4, 4, 4, (char *)d + 2048);
  w8a8_vector s4 = w8a8_vector_make(W8A8_DTYPE_FP32, 4, (char *)d + 512);
  for (int call = 0; call < (device_cc(g) >= 89 ? 1 : 3); call++) {
    w8a8_status st = call == 0   ? w8a8_scaled_mm(g, &a, &b, &s, &s, NULL, NULL, &o)
                     : call == 1 ? w8a8_quantize(g, &x, &q, W8A8_QUANT_DYNAMIC_PER_TOKEN, &s4, NULL, NULL)
                                 : w8a8_silu_mul_quantize(g, &x2, &q, W8A8_QUANT_DYNAMIC_PER_TOKEN, &s4, NULL, NULL);
    CHECK(st == W8A8_ERROR_UNSUPPORTED_DEVICE, "call %d -> %s: %s", call, w8a8_status_name(st), w8a8_last_error());
    CHECK(strstr(w8a8_last_error(), "needs compute capability 8.9") != NULL, "call %d: %s", call, w8a8_last_error());
    if (call == 0) printf("    %s\n", w8a8_last_error());
  }
  unsigned char back[4096];
  CUDA_REQUIRE(cudaMemcpy(back, d, sizeof back, cudaMemcpyDeviceToHost));
  size_t changed = 0;
  for (size_t i = 0; i < sizeof back; i++) changed += back[i] != 0x5a;
  CHECK(changed == 0, "%zu bytes changed by refused calls", changed);
  if (forced) w8a8_dev_set_int("CUDA_FORCE_PATH", -1);
  cudaFree(d);
  w8a8_destroy(g);
}

/* What this handle runs: the capability it dispatches for (W8A8_TEST_EXPECT_CC, where the runner sets it: the ptx
 * suite's builds hold only compute_75, _80 or _89 PTX, so the library must see that code, not the GPU), and the
 * kernel GENERIC runs there. */
W8A8_TEST(cuda_dispatch_target) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle();
  REQUIRE(g, "%s", w8a8_last_error());
  w8a8_handle_info info;
  REQUIRE_OK(w8a8_get_info(g, &info));
  const int cc = gpu_cc(g), own = info.cc_major * 10 + info.cc_minor;
  printf("    GPU sm_%d, kernels of %d.%d, features \"%s\"\n", own, cc / 10, cc % 10, info.features);
  CHECK(cc >= 75 && cc <= own, "dispatch capability %d on a GPU of %d", cc, own);
  const char *want = getenv("W8A8_TEST_EXPECT_CC");
  if (want && *want) CHECK(cc == atoi(want), "the handle runs the kernels of %d, the runner expects %s", cc, want);
  CHECK((strstr(info.features, " fp8") != NULL) == (cc >= 89), "features \"%s\" at %d", info.features, cc);
  w8a8_handle *r = ref_handle();
  REQUIRE(r, "%s", w8a8_last_error());
  REQUIRE_OK(w8a8_set_kernel(g, W8A8_KERNEL_GENERIC));
  g_want_kernel = portable_kernel(g);
  double worst = 0;
  mm_case c = {70, 90, 300, W8A8_DTYPE_INT8, W8A8_DTYPE_BF16, 1, 1, 1, 3, 0, 0, 0, 0, 0, 0};
  CHECK(run_mm(g, r, &c, &worst) == 0, "int8 on %s", g_want_kernel);
  g_want_kernel = "";
  w8a8_destroy(r);
  w8a8_destroy(g);
}

/* ---- colsum --------------------------------------------------------------------- */

W8A8_TEST(cuda_colsum) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle(), *r = ref_handle();
  REQUIRE(g && r, "%s", w8a8_last_error());
  static const int64_t shapes[][3] = {{1, 1, 0}, {13, 7, 3}, {4096, 1000, 16}, {131071, 3, 1}, {300, 5000, 0}};
  for (int i = 0; i < 5; i++) {
    reseed();
    int64_t K = shapes[i][0], N = shapes[i][1], ld = K + shapes[i][2];
    twin B, S;
    REQUIRE(twin_alloc(&B, (size_t)(N * ld)) && twin_alloc(&S, 4 * (size_t)(N + 1)), "alloc");
    for (size_t j = 0; j < B.bytes; j++) ((uint8_t *)B.h)[j] = (uint8_t)(j % 97 == 0 ? 0x80 : rnd());
    memset(S.h, 0x5a, S.bytes);
    REQUIRE(twin_up(&B) && twin_up(&S), "upload");
    int32_t *ref = malloc(S.bytes), *got = malloc(S.bytes);
    memset(ref, 0x5a, S.bytes);
    w8a8_matrix bd = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, ld, B.d);
    w8a8_matrix bh = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, ld, B.h);
    w8a8_vector vd = w8a8_vector_make(W8A8_DTYPE_INT32, N, S.d), vh = w8a8_vector_make(W8A8_DTYPE_INT32, N, ref);
    CHECK(w8a8_colsum(g, &bd, &vd) == W8A8_SUCCESS, "%s", w8a8_last_error());
    CHECK(w8a8_colsum(r, &bh, &vh) == W8A8_SUCCESS, "%s", w8a8_last_error());
    CHECK(cudaDeviceSynchronize() == cudaSuccess && twin_down(got, &S), "download");
    CHECK(memcmp(ref, got, S.bytes) == 0, "colsum K=%lld N=%lld differs", (long long)K, (long long)N);
    free(ref);
    free(got);
    twin_free(&B);
    twin_free(&S);
  }
  w8a8_destroy(g);
  w8a8_destroy(r);
}

/* ---- quantize --------------------------------------------------------------------- */

/* A random input value for dtype t: mostly moderate values, with the occasional NaN,
 * infinity, huge, tiny and exactly-halfway value to exercise rounding and saturation. */
static void fill_x(w8a8_dtype t, void *x, size_t n, int specials) {
  for (size_t i = 0; i < n; i++) {
    float f;
    uint32_t k = rnd() % 1000;
    if (specials && k == 0) f = NAN;
    else if (specials && k == 1) f = (rnd() & 1) ? INFINITY : -INFINITY;
    else if (specials && k == 2) f = (rnd() & 1) ? 1e30f : -3e4f;
    else if (specials && k == 3) f = 1e-40f;
    else if (k < 60) f = (float)((int)(rnd() % 64) - 32) + 0.5f; /* ties for int8 at unit scale */
    else f = frand(-3, 3) * ldexpf(1.0f, (int)(rnd() % 9) - 4);
    if (t == W8A8_DTYPE_FP32) {
      ((float *)x)[i] = f;
    } else if (t == W8A8_DTYPE_BF16) {
      uint32_t u;
      memcpy(&u, &f, 4);
      ((uint16_t *)x)[i] = (uint16_t)(u >> 16);
    } else {
      uint16_t h = rand_f16_small();
      if (specials && k == 0) h = 0x7e01;
      else if (specials && k == 1) h = 0xfc00;
      else if (specials && k == 2) h = 0x7bff;
      else if (specials && k == 3) h = 0x0003;
      ((uint16_t *)x)[i] = h;
    }
  }
}

typedef struct q_case {
  int64_t M, K, padx, padq;
  w8a8_dtype in, out;
  w8a8_quant_mode mode;
  int azp, ub, specials;
} q_case;

static int run_q(w8a8_handle *g, w8a8_handle *r, const q_case *c) {
  reseed();
  const int64_t M = c->M, K = c->K, ldx = K + c->padx, ldq = K + c->padq;
  const int64_t ns = c->mode == W8A8_QUANT_DYNAMIC_PER_TOKEN ? M : 1;
  twin X, Q, S, Z, U;
  int ok = twin_alloc(&X, esize(c->in) * (size_t)(M * ldx)) && twin_alloc(&Q, (size_t)(M * ldq)) &&
           twin_alloc(&S, 4 * (size_t)ns) && twin_alloc(&Z, 4 * (size_t)ns) && twin_alloc(&U, 4);
  if (!ok) {
    CHECK(0, "alloc");
    return 1;
  }
  fill_x(c->in, X.h, (size_t)(M * ldx), c->specials);
  memset(Q.h, 0x7f, Q.bytes);
  float static_s = frand(0.01f, 0.5f);
  for (int64_t i = 0; i < ns; i++) ((float *)S.h)[i] = c->mode == W8A8_QUANT_STATIC_PER_TENSOR ? static_s : -7.0f;
  for (int64_t i = 0; i < ns; i++) ((int32_t *)Z.h)[i] = c->mode == W8A8_QUANT_STATIC_PER_TENSOR ? 13 : 555;
  *(float *)U.h = frand(0.5f, 4.0f);
  if (!(twin_up(&X) && twin_up(&Q) && twin_up(&S) && twin_up(&Z) && twin_up(&U))) {
    CHECK(0, "upload");
    return 1;
  }
  void *rq = malloc(Q.bytes), *rs = malloc(S.bytes), *rz = malloc(Z.bytes);
  void *gq = malloc(Q.bytes), *gs = malloc(S.bytes), *gz = malloc(Z.bytes);
  memcpy(rq, Q.h, Q.bytes);
  memcpy(rs, S.h, S.bytes);
  memcpy(rz, Z.h, Z.bytes);
  int bad = 0;
  for (int dev = 0; dev < 2; dev++) {
    w8a8_matrix x = w8a8_matrix_make(c->in, W8A8_ROW_MAJOR, M, K, ldx, dev ? X.d : X.h);
    w8a8_matrix q = w8a8_matrix_make(c->out, W8A8_ROW_MAJOR, M, K, ldq, dev ? Q.d : rq);
    w8a8_vector s = w8a8_vector_make(W8A8_DTYPE_FP32, ns, dev ? S.d : rs);
    w8a8_vector z = w8a8_vector_make(W8A8_DTYPE_INT32, ns, dev ? Z.d : rz);
    w8a8_status st = w8a8_quantize(dev ? g : r, &x, &q, c->mode, &s, c->azp ? &z : NULL,
                                   c->ub ? (const float *)(dev ? U.d : U.h) : NULL);
    if (st != W8A8_SUCCESS) {
      CHECK(0, "%s quantize -> %s: %s", dev ? "cuda" : "ref", w8a8_status_name(st), w8a8_last_error());
      bad = 1;
    }
  }
  if (!bad) {
    CHECK(cudaDeviceSynchronize() == cudaSuccess, "device error: %s", cudaGetErrorString(cudaGetLastError()));
    CHECK(twin_down(gq, &Q) && twin_down(gs, &S) && twin_down(gz, &Z), "download");
    size_t diff = 0;
    while (diff < Q.bytes && ((uint8_t *)gq)[diff] == ((uint8_t *)rq)[diff]) diff++;
    if (diff < Q.bytes) {
      CHECK(0, "q differs at byte %zu (row %lld col %lld): cuda 0x%02x ref 0x%02x", diff, (long long)(diff / ldq),
            (long long)(diff % ldq), ((uint8_t *)gq)[diff], ((uint8_t *)rq)[diff]);
      bad = 1;
    }
    if (memcmp(gs, rs, S.bytes) != 0) {
      CHECK(0, "scales differ: cuda %a ref %a", ((float *)gs)[0], ((float *)rs)[0]);
      bad = 1;
    }
    if (memcmp(gz, rz, Z.bytes) != 0) {
      CHECK(0, "zero points differ: cuda %d ref %d", ((int *)gz)[0], ((int *)rz)[0]);
      bad = 1;
    }
    if (bad)
      CHECK(0, "case M=%lld K=%lld in %s out %s mode %d azp %d ub %d specials %d", (long long)M, (long long)K,
            w8a8_dtype_name(c->in), w8a8_dtype_name(c->out), (int)c->mode, c->azp, c->ub, c->specials);
  }
  free(rq), free(rs), free(rz), free(gq), free(gs), free(gz);
  twin_free(&X), twin_free(&Q), twin_free(&S), twin_free(&Z), twin_free(&U);
  return bad;
}

/* Hooks of src/cuda/quant.cu: the vectorized per-token kernel (1 where it takes the problem, 0 never, -1 the
 * environment's W8A8_QUANT_VEC) and its launch counter. */
unsigned long long w8a8_cuda_quant_vec_launches(void);

/* Every mode, dtype and zero-point / bound option against the scalar reference, bit for bit, over shapes with
 * odd K, padded strides and rows past the kernels' register budgets; the per-token cases twice: on the scalar
 * kernel and the vectorized one, which takes K % 8 == 0 with 16-byte aligned rows of x (17 x 4096, 33 x 1024
 * padded, 2 x 20000 past its 8192 in registers) and declines the rest (ldx 65, K 100). */
W8A8_TEST(cuda_quantize_all_modes) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle(), *r = ref_handle();
  REQUIRE(g && r, "%s", w8a8_last_error());
  const int fp8_ok = device_cc(g) >= 89;
  static const int64_t shapes[][4] = {{1, 1, 0, 0},     {3, 13, 5, 3},     {17, 4096, 0, 0}, {5, 9001, 3, 7},
                                      {300, 100, 28, 1}, {2, 20000, 0, 0}, {64, 0, 0, 0},    {33, 1024, 8, 16},
                                      {9, 64, 1, 0}};
  enum { NSHAPES = sizeof shapes / sizeof shapes[0] };
  static const w8a8_dtype ins[3] = {W8A8_DTYPE_FP32, W8A8_DTYPE_BF16, W8A8_DTYPE_FP16};
  int n = 0, failed = 0;
  for (int vec = 0; vec < 2; vec++) { /* 0: the scalar kernel, 1: the vectorized one */
    w8a8_dev_set_int("QUANT_VEC", vec);
    const unsigned long long vec_before = w8a8_cuda_quant_vec_launches();
    for (int i = 0; i < 3; i++)
      for (int o = 0; o < 2; o++) {
        w8a8_dtype out = o ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
        if (out == W8A8_DTYPE_FP8_E4M3 && !fp8_ok) continue;
        for (int mode = 0; mode < 3; mode++)
          for (int az = 0; az < 2; az++)
            for (int ub = 0; ub < 2; ub++) {
              if (az && (out != W8A8_DTYPE_INT8 || mode == W8A8_QUANT_DYNAMIC_PER_TENSOR)) continue;
              if (ub && (mode != W8A8_QUANT_DYNAMIC_PER_TOKEN || az)) continue; /* scale_ub: symmetric per-token only */
              for (int s = 0; s < NSHAPES; s++) {
                const int64_t *sh = shapes[s];
                if (vec && mode != W8A8_QUANT_DYNAMIC_PER_TOKEN) continue; /* (the per-tensor kernels are the same) */
                q_case c = {sh[0], sh[1], sh[2], sh[3], ins[i], out, (w8a8_quant_mode)mode, az, ub, s % 2};
                failed += run_q(g, r, &c);
                n++;
                if (failed > 3) goto done;
              }
            }
      }
    const unsigned long long vec_runs = w8a8_cuda_quant_vec_launches() - vec_before;
    CHECK(vec ? vec_runs > 0 : vec_runs == 0, "the vectorized per-token kernel ran %llu times with its hook at %d",
          vec_runs, vec);
  }
done:
  w8a8_dev_set_int("QUANT_VEC", -1);
  printf("    %d quantize cases, %d failed\n", n, failed);
  w8a8_destroy(g);
  w8a8_destroy(r);
}

/* Zero points at the ends of int32 and rows of a near-zero range, on every quantize kernel (the per-tensor one and
 * the two per-token ones, through their hooks) against the reference, bit for bit: static s = 1 with azp near
 * INT32_MIN / INT32_MAX and x around +-2^31 (q = clamp(rne(x / s) + azp) with the sum exact, never rne saturated to
 * int32 first), and dynamic asymmetric rows that are constant (s = |c|, every q -128, an exact round trip) or two
 * neighbouring floats (s >= |lo| 2^-30, so azp fits in int32). K = 24 takes the vectorized kernels, K = 19 not. */
W8A8_TEST(cuda_quantize_azp_extremes) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle(), *r = ref_handle();
  REQUIRE(g && r, "%s", w8a8_last_error());
  static const float xs[] = {0x1p31f, 0x1p31f + 256, 0x1p31f - 128, -0x1p31f, -0x1p31f - 256, 0x1p32f, -0x1p32f,
                             1e30f,   -1e30f,        3e9f,          0.0f,     2.5f,           -7.0f,   INFINITY,
                             -INFINITY, NAN,         0x1p31f + 512, -0x1p31f + 128, 1.0f};
  enum { NX = sizeof xs / sizeof xs[0] };
  static const int32_t zs[] = {INT32_MIN, INT32_MIN + 5, INT32_MAX, INT32_MAX - 300, 1 << 30};
  static const float cs[] = {40000.0f, -40000.0f, 1e30f, -1e30f, 0.3f,     -7.0f,    1e-40f,
                             33027.0f, 0.0f,      3.4e38f, 16514.0f, -2e9f, 7e37f, 1.0f};
  enum { R = sizeof cs / sizeof cs[0], KMAX = 24 };
  float x[R * KMAX];
  int8_t q[2][R * KMAX];
  float sc[2][R];
  int32_t zp[2][R];
  void *dx = NULL, *dq = NULL, *ds = NULL, *dz = NULL;
  REQUIRE(cudaMalloc(&dx, sizeof x) == cudaSuccess && cudaMalloc(&dq, sizeof q[0]) == cudaSuccess &&
              cudaMalloc(&ds, sizeof sc[0]) == cudaSuccess && cudaMalloc(&dz, sizeof zp[0]) == cudaSuccess,
          "alloc");
  int failed = 0;
  for (int kk = 0; kk < 2; kk++) {
    const int64_t K = kk ? 19 : 24;
    /* static: one row per zero point, the values of xs (and 1.0 past them) */
    for (size_t zi = 0; zi < sizeof zs / sizeof zs[0]; zi++) {
      for (int64_t k = 0; k < K; k++) x[k] = k < NX ? xs[k] : 1.0f;
      for (int dev = 0; dev < 2; dev++) {
        float s = 1.0f;
        int32_t z = zs[zi];
        if (dev)
          REQUIRE(cudaMemcpy(dx, x, 4 * (size_t)K, cudaMemcpyHostToDevice) == cudaSuccess &&
                      cudaMemcpy(ds, &s, 4, cudaMemcpyHostToDevice) == cudaSuccess &&
                      cudaMemcpy(dz, &z, 4, cudaMemcpyHostToDevice) == cudaSuccess,
                  "upload");
        w8a8_matrix xm = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 1, K, K, dev ? dx : (void *)x);
        w8a8_matrix qm = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 1, K, K, dev ? dq : (void *)q[0]);
        w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, 1, dev ? ds : (void *)&s);
        w8a8_vector zv = w8a8_vector_make(W8A8_DTYPE_INT32, 1, dev ? dz : (void *)&z);
        REQUIRE_OK(w8a8_quantize(dev ? g : r, &xm, &qm, W8A8_QUANT_STATIC_PER_TENSOR, &sv, &zv, NULL));
      }
      REQUIRE(cudaMemcpy(q[1], dq, (size_t)K, cudaMemcpyDeviceToHost) == cudaSuccess, "download: %s",
              cudaGetErrorString(cudaGetLastError()));
      for (int64_t k = 0; k < K; k++)
        if (q[0][k] != q[1][k] && failed++ < 6)
          CHECK(0, "static K %lld azp %d: x %a gives q %d on the GPU, %d on the reference", (long long)K, zs[zi],
                (double)x[k], q[1][k], q[0][k]);
    }
    /* dynamic per-token asymmetric: constant rows, then rows of two neighbouring floats */
    for (int near = 0; near < 2; near++) {
      for (int rr = 0; rr < R; rr++)
        for (int64_t k = 0; k < K; k++) x[rr * K + k] = near && k % 2 ? nextafterf(cs[rr], INFINITY) : cs[rr];
      REQUIRE(cudaMemcpy(dx, x, 4 * (size_t)(R * K), cudaMemcpyHostToDevice) == cudaSuccess, "upload");
      w8a8_matrix xm = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, R, K, K, x);
      w8a8_matrix qm = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, R, K, K, q[0]);
      w8a8_vector sv = w8a8_vector_make(W8A8_DTYPE_FP32, R, sc[0]), zv = w8a8_vector_make(W8A8_DTYPE_INT32, R, zp[0]);
      REQUIRE_OK(w8a8_quantize(r, &xm, &qm, W8A8_QUANT_DYNAMIC_PER_TOKEN, &sv, &zv, NULL));
      for (int vec = 0; vec < 2; vec++) { /* the scalar kernel, the vectorized one */
        w8a8_dev_set_int("QUANT_VEC", vec);
        xm.data = dx, qm.data = dq, sv.data = ds, zv.data = dz;
        REQUIRE_OK(w8a8_quantize(g, &xm, &qm, W8A8_QUANT_DYNAMIC_PER_TOKEN, &sv, &zv, NULL));
        xm.data = x, qm.data = q[0], sv.data = sc[0], zv.data = zp[0];
        REQUIRE(cudaMemcpy(q[1], dq, (size_t)(R * K), cudaMemcpyDeviceToHost) == cudaSuccess &&
                    cudaMemcpy(sc[1], ds, sizeof sc[1], cudaMemcpyDeviceToHost) == cudaSuccess &&
                    cudaMemcpy(zp[1], dz, sizeof zp[1], cudaMemcpyDeviceToHost) == cudaSuccess,
                "download: %s", cudaGetErrorString(cudaGetLastError()));
        if ((memcmp(q[0], q[1], (size_t)(R * K)) != 0 || memcmp(sc[0], sc[1], sizeof sc[0]) != 0 ||
             memcmp(zp[0], zp[1], sizeof zp[0]) != 0) && failed++ < 6)
          CHECK(0, "dynamic asymmetric K %lld %s rows, kernel %d: outputs differ from the reference", (long long)K,
                near ? "near-constant" : "constant", vec);
      }
      w8a8_dev_set_int("QUANT_VEC", -1);
      for (int rr = 0; rr < R && !near; rr++) {
        const float deq = (float)((int64_t)q[1][rr * K] - zp[1][rr]) * sc[1][rr];
        CHECK(deq == cs[rr], "constant row %a dequantizes to %a on the GPU", (double)cs[rr], (double)deq);
      }
    }
  }
  CHECK(failed == 0, "%d mismatches", failed);
  cudaFree(dx), cudaFree(dq), cudaFree(ds), cudaFree(dz);
  w8a8_destroy(g);
  w8a8_destroy(r);
}

int w8a8_cuda_quant_math_check(int which, const float *s_dev, int n_s, long long n_x, unsigned long long *bad_dev,
                               int num_sms);

/* The vectorized per-token kernel's arithmetic against the reference's, exhaustively where it can be:
 * the hardware fp8 and int8 conversions on all 2^32 fp32 patterns; the division through a reciprocal (Markstein's correction)
 * on every bf16 pattern and 2^20 random fp32 patterns for each of ~330 divisors: the minimum scales, powers of two,
 * all-ones mantissas, huge ones, and amax / qmax for amax log-uniform over 1e-6..1e6. */
W8A8_TEST(cuda_quant_math_exhaustive) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle();
  REQUIRE(g, "%s", w8a8_last_error());
  const int cc = device_cc(g);
  w8a8_destroy(g);
  enum { NS = 330 };
  float sv[NS];
  int n = 0;
  sv[n++] = 1.0f / (127.0f * 512.0f);
  sv[n++] = 1.0f / (448.0f * 512.0f);
  sv[n++] = 1.0f / 127.0f;
  sv[n++] = 1.0f / 448.0f;
  sv[n++] = 1.0f / 255.0f;
  sv[n++] = bits_to_f(0x3fffffffu); /* 1.999...: all-ones mantissa */
  sv[n++] = bits_to_f(0x407fffffu);
  sv[n++] = bits_to_f(0x3f800001u);
  sv[n++] = 1e30f;
  sv[n++] = 3.4e38f / 448.0f;
  sv[n++] = 3.4e38f;
  for (int e = -20; e <= 20; e++) sv[n++] = ldexpf(1.0f, e);
  reseed();
  while (n < NS) {
    const float amax = expf(frand(logf(1e-6f), logf(1e6f)));
    sv[n] = amax / (n % 2 ? 448.0f : 127.0f);
    if (n % 7 == 0) sv[n] = bits_to_f((rnd() & 0x7fffffu) | ((uint32_t)(60 + rnd() % 140) << 23)); /* any mantissa */
    n++;
  }
  float *sd = NULL;
  unsigned long long *bd = NULL, bad = 0;
  CUDA_REQUIRE(cudaMalloc((void **)&sd, sizeof sv));
  CUDA_REQUIRE(cudaMalloc((void **)&bd, sizeof bad));
  CUDA_REQUIRE(cudaMemcpy(sd, sv, sizeof sv, cudaMemcpyHostToDevice));
  int sms = 0;
  CUDA_REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (int which = cc >= 89 ? 0 : 1; which < 4; which++) {
    CUDA_REQUIRE(cudaMemset(bd, 0, sizeof bad));
    REQUIRE(w8a8_cuda_quant_math_check(which, sd, NS, (long long)1 << 20, bd, sms) == 0, "launch");
    CUDA_REQUIRE(cudaDeviceSynchronize());
    CUDA_REQUIRE(cudaMemcpy(&bad, bd, sizeof bad, cudaMemcpyDeviceToHost));
    CHECK(bad == 0, "%s: %llu mismatches",
          which == 0   ? "fp8 conversion, all 2^32 inputs"
          : which == 1 ? "division, every bf16 x"
          : which == 2 ? "division, random fp32 x"
                       : "int8 conversion, all 2^32 inputs",
          bad);
  }
  cudaFree(sd);
  cudaFree(bd);
}

/* ---- CUDA graph: quantize -> scaled_mm captured on a non-default stream ----------- */

static void graph_test(w8a8_kernel kernel, int64_t M) {
  w8a8_handle *g = gpu_handle(), *r = ref_handle();
  REQUIRE(g && r, "%s", w8a8_last_error());
  REQUIRE_OK(w8a8_set_kernel(g, kernel));
  const int64_t N = 200, K = 512;
  const w8a8_dtype qt = W8A8_DTYPE_INT8; /* exact end to end */
  cudaStream_t st;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  REQUIRE_OK(w8a8_set_stream(g, st));
  twin X, Q, S, B, SB, O;
  REQUIRE(twin_alloc(&X, 2 * (size_t)(M * K)) && twin_alloc(&Q, (size_t)(M * K)) && twin_alloc(&S, 4 * (size_t)M) &&
              twin_alloc(&B, (size_t)(N * K)) && twin_alloc(&SB, 4 * (size_t)N) && twin_alloc(&O, 2 * (size_t)(M * N)),
          "alloc");
  for (size_t i = 0; i < B.bytes; i++) ((int8_t *)B.h)[i] = (int8_t)rnd();
  for (int64_t i = 0; i < N; i++) ((float *)SB.h)[i] = frand(0.001f, 0.01f);
  REQUIRE(twin_up(&B) && twin_up(&SB), "upload");
  w8a8_matrix x = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, K, K, X.d);
  w8a8_matrix q = w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, K, K, Q.d);
  w8a8_vector s = w8a8_vector_make(W8A8_DTYPE_FP32, M, S.d), sb = w8a8_vector_make(W8A8_DTYPE_FP32, N, SB.d);
  w8a8_matrix b = w8a8_matrix_make(qt, W8A8_COL_MAJOR, K, N, K, B.d);
  w8a8_matrix o = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, O.d);

  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  CUDA_REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  w8a8_status s1 = w8a8_quantize(g, &x, &q, W8A8_QUANT_DYNAMIC_PER_TOKEN, &s, NULL, NULL);
  w8a8_status s2 = w8a8_scaled_mm(g, &q, &b, &s, &sb, NULL, NULL, &o);
  cudaError_t ce = cudaStreamEndCapture(st, &graph);
  REQUIRE(s1 == W8A8_SUCCESS && s2 == W8A8_SUCCESS, "calls during capture: %s / %s: %s", w8a8_status_name(s1),
          w8a8_status_name(s2), w8a8_last_error());
  REQUIRE(ce == cudaSuccess, "capture: %s", cudaGetErrorString(ce));
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  size_t nodes = 0;
  CUDA_REQUIRE(cudaGraphGetNodes(graph, NULL, &nodes));
  CHECK(nodes >= 2, "graph has %zu nodes", nodes);

  for (int rep = 0; rep < 3; rep++) {
    reseed();
    fill_x(W8A8_DTYPE_BF16, X.h, (size_t)(M * K), 0);
    memset(O.h, 0xff, O.bytes);
    REQUIRE(twin_up(&X) && twin_up(&O), "upload");
    CUDA_REQUIRE(cudaGraphLaunch(exec, st));
    CUDA_REQUIRE(cudaStreamSynchronize(st));
    uint16_t *got = malloc(O.bytes), *ref = malloc(O.bytes);
    int8_t *rq = malloc(Q.bytes);
    float *rs = malloc(S.bytes);
    REQUIRE(twin_down(got, &O), "download");
    w8a8_matrix xh = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, K, K, X.h);
    w8a8_matrix qh = w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, K, K, rq);
    w8a8_vector sh = w8a8_vector_make(W8A8_DTYPE_FP32, M, rs), sbh = w8a8_vector_make(W8A8_DTYPE_FP32, N, SB.h);
    w8a8_matrix bh = w8a8_matrix_make(qt, W8A8_COL_MAJOR, K, N, K, B.h);
    w8a8_matrix oh = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, ref);
    REQUIRE_OK(w8a8_quantize(r, &xh, &qh, W8A8_QUANT_DYNAMIC_PER_TOKEN, &sh, NULL, NULL));
    REQUIRE_OK(w8a8_scaled_mm(r, &qh, &bh, &sh, &sbh, NULL, NULL, &oh));
    CHECK(memcmp(got, ref, O.bytes) == 0, "kernel %d, replay %d: output differs from the reference", (int)kernel, rep);
    free(got), free(ref), free(rq), free(rs);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  w8a8_set_stream(g, NULL);
  cudaStreamDestroy(st);
  twin_free(&X), twin_free(&Q), twin_free(&S), twin_free(&B), twin_free(&SB), twin_free(&O);
  w8a8_destroy(g);
  w8a8_destroy(r);
}

W8A8_TEST(cuda_graph_quantize_scaled_mm) {
  GPU_OR_SKIP();
  graph_test(W8A8_KERNEL_GENERIC, 96);
  graph_test(W8A8_KERNEL_AUTO, 96);
  graph_test(W8A8_KERNEL_AUTO, 20); /* on sm_90: plan_deep (swap-AB n32, deep ring; its occupancy query may run here first) */
  /* the CUDA-core kernel of the fewest tokens at M = 4 (not its default there: forced through its hook) */
  w8a8_dev_set_int("GEMV", 1);
  const unsigned long long before = w8a8_cuda_gemv_launches();
  graph_test(W8A8_KERNEL_AUTO, 4);
  CHECK(w8a8_cuda_gemv_launches() > before, "the M = 4 capture did not use the CUDA-core kernel");
  w8a8_dev_set_int("GEMV", -1);
}

/* The dynamic per-tensor quantizers (w8a8_quantize and w8a8_silu_mul_quantize) reduce their amax in the handle's
 * slot, not in the caller's scale (the caller's scale is written by the call's last kernel only). One
 * graph holds both calls on one handle; its replays shrink the input 100x each time, so a slot not zeroed inside
 * the graph, or one call's amax leaking into the other's, gives the wrong scale. Each scale sits between poisoned
 * neighbours that must stay as they were; q and the scales are compared bit for bit with the CPU reference. */
W8A8_TEST(cuda_graph_quantize_per_tensor) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle(), *r = ref_handle();
  REQUIRE(g && r, "%s", w8a8_last_error());
  const int64_t M = 37, K = 1000;
  const w8a8_dtype qt = device_cc(g) >= 89 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;
  cudaStream_t st;
  CUDA_REQUIRE(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  REQUIRE_OK(w8a8_set_stream(g, st));
  twin X, X2, Q, Q2, S;
  REQUIRE(twin_alloc(&X, 4 * (size_t)(M * K)) && twin_alloc(&X2, 4 * (size_t)(M * 2 * K)) &&
              twin_alloc(&Q, (size_t)(M * K)) && twin_alloc(&Q2, (size_t)(M * K)) && twin_alloc(&S, 4 * 5),
          "alloc");
  w8a8_matrix x = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, K, K, X.d);
  w8a8_matrix x2 = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, 2 * K, 2 * K, X2.d);
  w8a8_matrix q = w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, K, K, Q.d);
  w8a8_matrix q2 = w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, K, K, Q2.d);
  /* S: [poison, scale of x, poison, scale of silu(x2), poison] */
  w8a8_vector s = w8a8_vector_make(W8A8_DTYPE_FP32, 1, (float *)S.d + 1);
  w8a8_vector s2 = w8a8_vector_make(W8A8_DTYPE_FP32, 1, (float *)S.d + 3);
  cudaGraph_t graph = NULL;
  cudaGraphExec_t exec = NULL;
  CUDA_REQUIRE(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  w8a8_status s1 = w8a8_quantize(g, &x, &q, W8A8_QUANT_DYNAMIC_PER_TENSOR, &s, NULL, NULL);
  w8a8_status s2s = w8a8_silu_mul_quantize(g, &x2, &q2, W8A8_QUANT_DYNAMIC_PER_TENSOR, &s2, NULL, NULL);
  cudaError_t ce = cudaStreamEndCapture(st, &graph);
  REQUIRE(s1 == W8A8_SUCCESS && s2s == W8A8_SUCCESS, "calls during capture: %s / %s: %s", w8a8_status_name(s1),
          w8a8_status_name(s2s), w8a8_last_error());
  REQUIRE(ce == cudaSuccess, "capture: %s", cudaGetErrorString(ce));
  CUDA_REQUIRE(cudaGraphInstantiate(&exec, graph, 0));
  uint8_t *gq = malloc(Q.bytes), *gq2 = malloc(Q2.bytes), *rq = malloc(Q.bytes), *rq2 = malloc(Q2.bytes);
  REQUIRE(gq && gq2 && rq && rq2, "malloc");
  float mag = 100.0f;
  for (int rep = 0; rep < 3; rep++, mag *= 0.01f) {
    reseed();
    for (int64_t i = 0; i < M * K; i++) ((float *)X.h)[i] = frand(-1, 1) * mag;
    for (int64_t i = 0; i < M * 2 * K; i++) ((float *)X2.h)[i] = frand(-4, 4) * mag;
    ((float *)X.h)[rnd() % (M * K)] = (rep & 1 ? -1.5f : 1.5f) * mag; /* the amax somewhere, either sign */
    for (int i = 0; i < 5; i++) ((float *)S.h)[i] = (float)(-1000 - i);
    memset(Q.h, 0x5a, Q.bytes);
    memset(Q2.h, 0x5a, Q2.bytes);
    REQUIRE(twin_up(&X) && twin_up(&X2) && twin_up(&S) && twin_up(&Q) && twin_up(&Q2), "upload");
    CUDA_REQUIRE(cudaGraphLaunch(exec, st));
    CUDA_REQUIRE(cudaStreamSynchronize(st));
    float gs[5], rs = 0.0f, rs2 = 0.0f;
    REQUIRE(twin_down(gq, &Q) && twin_down(gq2, &Q2) && twin_down(gs, &S), "download");
    w8a8_matrix xh = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, K, K, X.h);
    w8a8_matrix x2h = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, 2 * K, 2 * K, X2.h);
    w8a8_matrix qh = w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, K, K, rq);
    w8a8_matrix q2h = w8a8_matrix_make(qt, W8A8_ROW_MAJOR, M, K, K, rq2);
    w8a8_vector sh = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &rs), s2h = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &rs2);
    REQUIRE_OK(w8a8_quantize(r, &xh, &qh, W8A8_QUANT_DYNAMIC_PER_TENSOR, &sh, NULL, NULL));
    REQUIRE_OK(w8a8_silu_mul_quantize(r, &x2h, &q2h, W8A8_QUANT_DYNAMIC_PER_TENSOR, &s2h, NULL, NULL));
    CHECK(memcmp(&gs[1], &rs, 4) == 0, "replay %d: quantize scale %g, reference %g", rep, gs[1], rs);
    CHECK(memcmp(&gs[3], &rs2, 4) == 0, "replay %d: silu_mul scale %g, reference %g", rep, gs[3], rs2);
    CHECK(gs[0] == -1000.0f && gs[2] == -1002.0f && gs[4] == -1004.0f, "replay %d: the scales' neighbours changed: %g %g %g",
          rep, gs[0], gs[2], gs[4]);
    int64_t bad = 0, bad2 = 0;
    for (int64_t i = 0; i < M * K; i++) bad += gq[i] != rq[i], bad2 += gq2[i] != rq2[i];
    CHECK(bad == 0 && bad2 == 0, "replay %d: %lld / %lld of %lld q bytes differ (quantize / silu_mul)", rep,
          (long long)bad, (long long)bad2, (long long)(M * K));
  }
  free(gq), free(gq2), free(rq), free(rq2);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  twin_free(&X), twin_free(&X2), twin_free(&Q), twin_free(&Q2), twin_free(&S);
  w8a8_set_stream(g, NULL);
  cudaStreamDestroy(st);
  w8a8_destroy(g);
  w8a8_destroy(r);
}

/* ---- device-side validation ---------------------------------------------------------- */

W8A8_TEST(cuda_bad_pointers) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle();
  REQUIRE(g, "%s", w8a8_last_error());
  const int64_t M = 8, N = 8, K = 32;
  int8_t *da = NULL, *db = NULL, *freed = NULL;
  float *ds = NULL, *dout = NULL;
  CUDA_REQUIRE(cudaMalloc((void **)&da, M * K));
  CUDA_REQUIRE(cudaMalloc((void **)&db, N * K));
  CUDA_REQUIRE(cudaMalloc((void **)&ds, 64));
  CUDA_REQUIRE(cudaMalloc((void **)&dout, 4 * M * N));
  CUDA_REQUIRE(cudaMalloc((void **)&freed, 4096));
  CUDA_REQUIRE(cudaFree(freed));
  CUDA_REQUIRE(cudaMemset(dout, 0x7f, 4 * M * N));
  int8_t *ha = malloc(M * K);
  float hs = 1.0f;
  memset(ha, 1, M * K);
  w8a8_matrix a = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K, K, da);
  w8a8_matrix b = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, db);
  w8a8_matrix o = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, dout);
  w8a8_vector s = w8a8_vector_make(W8A8_DTYPE_FP32, 1, ds);
  w8a8_matrix a_host = a, a_freed = a, b_row = b;
  a_host.data = ha;
  a_freed.data = freed;
  b_row.layout = W8A8_ROW_MAJOR;
  b_row.ld = N;
  w8a8_vector s_host = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &hs);
  w8a8_status st;
  st = w8a8_scaled_mm(g, &a_host, &b, &s, &s, NULL, NULL, &o);
  CHECK(st == W8A8_ERROR_INVALID_POINTER, "host A -> %s", w8a8_status_name(st));
  CHECK(strstr(w8a8_last_error(), "a (") != NULL, "message names a: %s", w8a8_last_error());
  st = w8a8_scaled_mm(g, &a_freed, &b, &s, &s, NULL, NULL, &o);
  CHECK(st == W8A8_ERROR_INVALID_POINTER, "freed A -> %s: %s", w8a8_status_name(st), w8a8_last_error());
  st = w8a8_scaled_mm(g, &a, &b, &s_host, &s, NULL, NULL, &o);
  CHECK(st == W8A8_ERROR_INVALID_POINTER, "host scale_a -> %s", w8a8_status_name(st));
  st = w8a8_scaled_mm(g, &a, &b_row, &s, &s, NULL, NULL, &o);
  CHECK(st == W8A8_ERROR_INVALID_LAYOUT, "row-major B -> %s", w8a8_status_name(st));
  float hx[4] = {1, 2, 3, 4};
  w8a8_matrix x_host = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, 1, 4, 4, hx);
  w8a8_matrix qd = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, 1, 4, 4, da);
  st = w8a8_quantize(g, &x_host, &qd, W8A8_QUANT_STATIC_PER_TENSOR, &s, NULL, NULL);
  CHECK(st == W8A8_ERROR_INVALID_POINTER, "host x -> %s", w8a8_status_name(st));
  /* None of the refused calls wrote the output. */
  float out[64];
  CUDA_REQUIRE(cudaDeviceSynchronize());
  CUDA_REQUIRE(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
  uint32_t bits;
  memcpy(&bits, &out[0], 4);
  CHECK(bits == 0x7f7f7f7fu, "output was written by a refused call");
  /* The handle still works afterwards. */
  CUDA_REQUIRE(cudaMemset(da, 1, M * K));
  CUDA_REQUIRE(cudaMemset(db, 1, N * K));
  CUDA_REQUIRE(cudaMemcpy(ds, &hs, 4, cudaMemcpyHostToDevice));
  REQUIRE_OK(w8a8_scaled_mm(g, &a, &b, &s, &s, NULL, NULL, &o));
  CUDA_REQUIRE(cudaMemcpy(out, dout, sizeof out, cudaMemcpyDeviceToHost));
  CHECK(out[0] == 32.0f && out[63] == 32.0f, "out %g %g", out[0], out[63]);
  free(ha);
  cudaFree(da), cudaFree(db), cudaFree(ds), cudaFree(dout);
  w8a8_destroy(g);
}

/* A handle bound to a device works whatever device is current in the caller. */
W8A8_TEST(cuda_handle_info_and_stream) {
  GPU_OR_SKIP();
  w8a8_handle *g = gpu_handle();
  REQUIRE(g, "%s", w8a8_last_error());
  w8a8_handle_info info;
  REQUIRE_OK(w8a8_get_info(g, &info));
  CHECK(info.kind == W8A8_DEVICE_CUDA && info.cc_major * 10 + info.cc_minor >= 75 && info.num_sms > 0, "info %d %d.%d %d",
        (int)info.kind, info.cc_major, info.cc_minor, info.num_sms);
  printf("    %s sm_%d%d, %d SMs, features \"%s\"\n", info.name, info.cc_major, info.cc_minor, info.num_sms,
         info.features);
  void *sp = (void *)1;
  REQUIRE_OK(w8a8_get_stream(g, &sp));
  CHECK(sp == NULL, "a new handle is on the legacy default stream");
  w8a8_destroy(g);
}
#endif
