/* test_dispatch.c — the CUDA dispatcher's rule (src/cuda/dispatch_rule.c) on the CPU: which kernel
 * w8a8_scaled_mm runs, or why it refuses, for every compute capability x dtype x forced kernel, with the
 * library's code for the GPU older than the GPU (PTX JIT), without sm_90a code, and under W8A8_DEV
 * CUDA_FORCE_PATH / GEMV. dispatch.c runs what this rule names and records it in the launch record, which
 * tests/test_cuda.c checks on a GPU. The expected answers here are written out, not computed. */
#include <string.h>

#include "core/internal.h"
#include "core/knobs.h"
#include "cuda/dispatch_rule.h"
#include "harness.h"

/* The development switches the rule reads, at their defaults whatever the environment says. */
static void rule_defaults(void) {
  w8a8_dev_set_int("CUDA_FORCE_PATH", 0);
  w8a8_dev_set_int("GEMV", 2);
  w8a8_dev_set_int("GEMV_FP8", 0);
}
static void rule_env(void) {
  w8a8_dev_set_int("CUDA_FORCE_PATH", -1);
  w8a8_dev_set_int("GEMV", -1);
  w8a8_dev_set_int("GEMV_FP8", -1);
}

/* Operands 16-byte aligned with row strides that are multiples of 16 (what the GEMV takes) unless `odd`. */
static _Alignas(16) unsigned char g_buf[64];
static w8a8_mm_problem problem(w8a8_dtype dt, int64_t M, int odd) {
  w8a8_mm_problem p;
  memset(&p, 0, sizeof p);
  p.M = M;
  p.N = 4096;
  p.K = 4096;
  p.in_dtype = dt;
  p.out_dtype = W8A8_DTYPE_BF16;
  p.a = g_buf + (odd ? 1 : 0);
  p.lda = 4096 + (odd ? 1 : 0);
  p.b = g_buf;
  p.ldb = 4096;
  p.out = g_buf;
  p.ldo = 4096;
  return p;
}

static const char *kname(w8a8_kernel k) {
  return k == W8A8_KERNEL_AUTO ? "AUTO" : k == W8A8_KERNEL_GENERIC ? "GENERIC" : k == W8A8_KERNEL_SM90 ? "SM90" : "?";
}

/* One expectation: the path, the fallback (under AUTO behind sm90), and for a refusal the capability needed. */
static void expect(const w8a8_cuda_target *t, const w8a8_mm_problem *p, w8a8_kernel k, w8a8_cuda_path path,
                   w8a8_cuda_path fallback, int need, const char *what) {
  const w8a8_cuda_route r = w8a8_cuda_route_mm(t, p, k);
  CHECK(r.path == path && r.fallback == fallback && (path != W8A8_PATH_REFUSED || r.need == need),
        "%s: cc %d code %d sm90a %d, %s M=%lld %s: got %s (fallback %s, need %d), expected %s (fallback %s, need %d)",
        what, t->cc, t->code_cc, t->sm90a, w8a8_dtype_name(p->in_dtype), (long long)p->M, kname(k),
        w8a8_cuda_path_name(r.path), w8a8_cuda_path_name(r.fallback), r.need, w8a8_cuda_path_name(path),
        w8a8_cuda_path_name(fallback), need);
  CHECK(path == W8A8_PATH_REFUSED ? r.why != W8A8_ROUTE_OK : r.why == W8A8_ROUTE_OK, "%s: why %d for %s", what,
        (int)r.why, w8a8_cuda_path_name(r.path));
}

#define REF W8A8_PATH_REFUSED
#define GEMV W8A8_PATH_GEMV
#define SM90 W8A8_PATH_SM90
#define MMA W8A8_PATH_MMA
#define SM75 W8A8_PATH_MMA_SM75

/* Every capability x dtype x forced kernel, one token and many, with the library's default fatbin (each GPU runs
 * its own code; sm_90a held) and the default rules. */
W8A8_TEST(dispatch_rule_capabilities) {
  rule_defaults();
  static const struct {
    int cc;
    w8a8_dtype dt;
    int64_t M;
    w8a8_cuda_path path[3], fallback[3]; /* AUTO, GENERIC, SM90 */
    int need[3];
  } rows[] = {
      /* Turing: int8 on the sm_75 kernel, fp8 refused (8.9), SM90 refused (9.0) */
      {75, W8A8_DTYPE_INT8, 1, {SM75, SM75, REF}, {REF, REF, REF}, {0, 0, 90}},
      {75, W8A8_DTYPE_INT8, 1000, {SM75, SM75, REF}, {REF, REF, REF}, {0, 0, 90}},
      {75, W8A8_DTYPE_FP8_E4M3, 1, {REF, REF, REF}, {REF, REF, REF}, {89, 89, 89}},
      {75, W8A8_DTYPE_FP8_E4M3, 1000, {REF, REF, REF}, {REF, REF, REF}, {89, 89, 89}},
      /* Ampere (8.0 and 8.6): int8 on the sm_80 kernel, fp8 refused */
      {80, W8A8_DTYPE_INT8, 1, {MMA, MMA, REF}, {REF, REF, REF}, {0, 0, 90}},
      {80, W8A8_DTYPE_INT8, 1000, {MMA, MMA, REF}, {REF, REF, REF}, {0, 0, 90}},
      {80, W8A8_DTYPE_FP8_E4M3, 1, {REF, REF, REF}, {REF, REF, REF}, {89, 89, 89}},
      {80, W8A8_DTYPE_FP8_E4M3, 1000, {REF, REF, REF}, {REF, REF, REF}, {89, 89, 89}},
      {86, W8A8_DTYPE_INT8, 1, {MMA, MMA, REF}, {REF, REF, REF}, {0, 0, 90}},
      {86, W8A8_DTYPE_INT8, 1000, {MMA, MMA, REF}, {REF, REF, REF}, {0, 0, 90}},
      {86, W8A8_DTYPE_FP8_E4M3, 1, {REF, REF, REF}, {REF, REF, REF}, {89, 89, 89}},
      {86, W8A8_DTYPE_FP8_E4M3, 1000, {REF, REF, REF}, {REF, REF, REF}, {89, 89, 89}},
      /* Ada: int8 and fp8 on the sm_80 kernel (e4m3 mma.sync) */
      {89, W8A8_DTYPE_INT8, 1, {MMA, MMA, REF}, {REF, REF, REF}, {0, 0, 90}},
      {89, W8A8_DTYPE_INT8, 1000, {MMA, MMA, REF}, {REF, REF, REF}, {0, 0, 90}},
      {89, W8A8_DTYPE_FP8_E4M3, 1, {MMA, MMA, REF}, {REF, REF, REF}, {0, 0, 90}},
      {89, W8A8_DTYPE_FP8_E4M3, 1000, {MMA, MMA, REF}, {REF, REF, REF}, {0, 0, 90}},
      /* Hopper: one int8 token on the GEMV, the rest on the sm_90a kernel with the sm_80 one behind it */
      {90, W8A8_DTYPE_INT8, 1, {GEMV, MMA, SM90}, {REF, REF, REF}, {0, 0, 0}},
      {90, W8A8_DTYPE_INT8, 1000, {SM90, MMA, SM90}, {MMA, REF, REF}, {0, 0, 0}},
      {90, W8A8_DTYPE_FP8_E4M3, 1, {SM90, MMA, SM90}, {MMA, REF, REF}, {0, 0, 0}},
      {90, W8A8_DTYPE_FP8_E4M3, 1000, {SM90, MMA, SM90}, {MMA, REF, REF}, {0, 0, 0}},
  };
  static const w8a8_kernel ks[3] = {W8A8_KERNEL_AUTO, W8A8_KERNEL_GENERIC, W8A8_KERNEL_SM90};
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    const w8a8_cuda_target t = {rows[i].cc, rows[i].cc, 1};
    const w8a8_mm_problem p = problem(rows[i].dt, rows[i].M, 0);
    for (int k = 0; k < 3; k++)
      expect(&t, &p, ks[k], rows[i].path[k], rows[i].fallback[k], rows[i].need[k], "capabilities");
    CHECK(w8a8_cuda_dispatch_cc(&t) == rows[i].cc, "dispatch cc %d on %d", w8a8_cuda_dispatch_cc(&t), rows[i].cc);
  }
  /* below Turing: nothing (w8a8_create refuses such a GPU too) */
  const w8a8_cuda_target old = {70, 70, 1};
  const w8a8_mm_problem pi = problem(W8A8_DTYPE_INT8, 16, 0);
  for (int k = 0; k < 3; k++) expect(&old, &pi, ks[k], W8A8_PATH_REFUSED, W8A8_PATH_REFUSED, 75, "sm_70");
  CHECK(w8a8_cuda_route_mm(&old, &pi, W8A8_KERNEL_AUTO).why == W8A8_ROUTE_OLD_GPU, "sm_70: why");
  const w8a8_cuda_target t75 = {75, 75, 1};
  const w8a8_mm_problem pf = problem(W8A8_DTYPE_FP8_E4M3, 16, 0);
  CHECK(w8a8_cuda_route_mm(&t75, &pf, W8A8_KERNEL_AUTO).why == W8A8_ROUTE_FP8, "fp8 on sm_75: why");
  CHECK(w8a8_cuda_route_mm(&t75, &pi, W8A8_KERNEL_SM90).why == W8A8_ROUTE_SM90_FORCED, "SM90 on sm_75: why");
  rule_env();
}

/* The library's code for the GPU older than the GPU: a PTX-only build, or the default fatbin on a GPU newer than
 * its SASS (the driver compiles compute_75 PTX for it). The kernels of that code's capability run, as on such a
 * GPU; code_cc 0 means the GPU's own. */
W8A8_TEST(dispatch_rule_code_older_than_gpu) {
  rule_defaults();
  const w8a8_mm_problem i1 = problem(W8A8_DTYPE_INT8, 1, 0), i1k = problem(W8A8_DTYPE_INT8, 1000, 0);
  const w8a8_mm_problem f1k = problem(W8A8_DTYPE_FP8_E4M3, 1000, 0);
  const w8a8_cuda_target h75 = {90, 75, 0}, h80 = {90, 80, 0}, h89 = {90, 89, 0}, b75 = {100, 75, 1};
  const w8a8_cuda_target l80 = {89, 80, 1}, own = {90, 0, 1};
  /* compute_75 PTX on an H100 (the ptx suite) and on a newer GPU: the sm_75 kernel, no GEMV, no fp8 */
  expect(&h75, &i1, W8A8_KERNEL_AUTO, SM75, REF, 0, "compute_75 on sm_90");
  expect(&h75, &i1k, W8A8_KERNEL_GENERIC, SM75, REF, 0, "compute_75 on sm_90");
  expect(&h75, &f1k, W8A8_KERNEL_AUTO, REF, REF, 89, "compute_75 on sm_90");
  expect(&b75, &i1k, W8A8_KERNEL_AUTO, SM75, REF, 0, "compute_75 on sm_100");
  expect(&b75, &f1k, W8A8_KERNEL_GENERIC, REF, REF, 89, "compute_75 on sm_100");
  /* compute_80 and compute_89 PTX on an H100 */
  expect(&h80, &i1k, W8A8_KERNEL_AUTO, MMA, REF, 0, "compute_80 on sm_90");
  expect(&h80, &f1k, W8A8_KERNEL_AUTO, REF, REF, 89, "compute_80 on sm_90");
  expect(&h89, &f1k, W8A8_KERNEL_AUTO, MMA, REF, 0, "compute_89 on sm_90");
  expect(&h89, &i1, W8A8_KERNEL_AUTO, MMA, REF, 0, "compute_89 on sm_90 (the GEMV rule is sm_90's)");
  expect(&h89, &i1k, W8A8_KERNEL_SM90, REF, REF, 90, "compute_89 on sm_90");
  /* sm_80 SASS on an L4 (a build without 89): no fp8 kernel in that code */
  expect(&l80, &f1k, W8A8_KERNEL_GENERIC, REF, REF, 89, "sm_80 code on sm_89");
  expect(&l80, &i1k, W8A8_KERNEL_GENERIC, MMA, REF, 0, "sm_80 code on sm_89");
  expect(&own, &i1k, W8A8_KERNEL_AUTO, SM90, MMA, 0, "code_cc 0");
  CHECK(w8a8_cuda_dispatch_cc(&h75) == 75 && w8a8_cuda_dispatch_cc(&own) == 90 && w8a8_cuda_dispatch_cc(&b75) == 75,
        "dispatch cc %d %d %d", w8a8_cuda_dispatch_cc(&h75), w8a8_cuda_dispatch_cc(&own), w8a8_cuda_dispatch_cc(&b75));
  /* a library without sm_90a code on an H100: AUTO goes straight to the sm_80 kernel; SM90 forced still asks the
   * Hopper kernel, which says why it cannot */
  const w8a8_cuda_target h90 = {90, 90, 0};
  expect(&h90, &i1k, W8A8_KERNEL_AUTO, MMA, REF, 0, "no sm_90a");
  expect(&h90, &f1k, W8A8_KERNEL_AUTO, MMA, REF, 0, "no sm_90a");
  expect(&h90, &i1, W8A8_KERNEL_AUTO, GEMV, REF, 0, "no sm_90a");
  expect(&h90, &f1k, W8A8_KERNEL_SM90, SM90, REF, 0, "no sm_90a");
  CHECK(!w8a8_cuda_sm90_first(&h90, W8A8_KERNEL_AUTO) && w8a8_cuda_sm90_first(&h90, W8A8_KERNEL_SM90) &&
            w8a8_cuda_sm90_first(&own, W8A8_KERNEL_AUTO) && !w8a8_cuda_sm90_first(&own, W8A8_KERNEL_GENERIC) &&
            !w8a8_cuda_sm90_first(&h89, W8A8_KERNEL_SM90),
        "sm90_first");
  rule_env();
}

/* W8A8_DEV CUDA_FORCE_PATH: a GPU dispatched as an older one (never a newer one), so that an H100 runs the
 * sm_75 and sm_80 kernels and their refusals; the GEMV switch; problems the GEMV does not take. */
W8A8_TEST(dispatch_rule_switches) {
  rule_defaults();
  const w8a8_mm_problem i1 = problem(W8A8_DTYPE_INT8, 1, 0), i1k = problem(W8A8_DTYPE_INT8, 1000, 0);
  const w8a8_mm_problem f1 = problem(W8A8_DTYPE_FP8_E4M3, 1, 0), f1k = problem(W8A8_DTYPE_FP8_E4M3, 1000, 0);
  const w8a8_cuda_target h = {90, 90, 1}, t = {75, 75, 1}, a = {80, 80, 1};
  w8a8_dev_set_int("CUDA_FORCE_PATH", 75);
  expect(&h, &i1, W8A8_KERNEL_AUTO, SM75, REF, 0, "force 75");
  expect(&h, &i1k, W8A8_KERNEL_AUTO, SM75, REF, 0, "force 75");
  expect(&h, &i1k, W8A8_KERNEL_GENERIC, SM75, REF, 0, "force 75");
  expect(&h, &i1k, W8A8_KERNEL_SM90, REF, REF, 90, "force 75");
  expect(&h, &f1k, W8A8_KERNEL_GENERIC, REF, REF, 89, "force 75");
  expect(&a, &i1k, W8A8_KERNEL_GENERIC, SM75, REF, 0, "force 75 on sm_80");
  CHECK(w8a8_cuda_dispatch_cc(&h) == 75, "force 75: cc %d", w8a8_cuda_dispatch_cc(&h));
  w8a8_dev_set_int("CUDA_FORCE_PATH", 80);
  expect(&h, &i1k, W8A8_KERNEL_AUTO, MMA, REF, 0, "force 80");
  expect(&h, &f1, W8A8_KERNEL_AUTO, REF, REF, 89, "force 80");
  expect(&t, &i1k, W8A8_KERNEL_GENERIC, SM75, REF, 0, "force 80 on sm_75 (never raised)");
  w8a8_dev_set_int("CUDA_FORCE_PATH", 89);
  expect(&h, &f1k, W8A8_KERNEL_AUTO, MMA, REF, 0, "force 89");
  expect(&h, &i1, W8A8_KERNEL_AUTO, MMA, REF, 0, "force 89");
  w8a8_dev_set_int("CUDA_FORCE_PATH", 0);
  /* the GEMV: GEMV=1 wherever it takes the problem (up to 8 int8 tokens, one fp8, aligned), under AUTO only */
  const w8a8_mm_problem i8 = problem(W8A8_DTYPE_INT8, 8, 0), i9 = problem(W8A8_DTYPE_INT8, 9, 0);
  const w8a8_mm_problem odd = problem(W8A8_DTYPE_INT8, 4, 1), f2 = problem(W8A8_DTYPE_FP8_E4M3, 2, 0);
  w8a8_dev_set_int("GEMV", 1);
  expect(&t, &i8, W8A8_KERNEL_AUTO, GEMV, REF, 0, "GEMV=1");
  expect(&t, &i8, W8A8_KERNEL_GENERIC, SM75, REF, 0, "GEMV=1");
  expect(&t, &i9, W8A8_KERNEL_AUTO, SM75, REF, 0, "GEMV=1, M=9");
  expect(&t, &odd, W8A8_KERNEL_AUTO, SM75, REF, 0, "GEMV=1, unaligned A");
  expect(&h, &f1, W8A8_KERNEL_AUTO, GEMV, REF, 0, "GEMV=1");
  expect(&h, &f2, W8A8_KERNEL_AUTO, SM90, MMA, 0, "GEMV=1, fp8 M=2");
  expect(&t, &f1, W8A8_KERNEL_AUTO, REF, REF, 89, "GEMV=1, fp8 on sm_75");
  w8a8_dev_set_int("GEMV", 0);
  expect(&h, &i1, W8A8_KERNEL_AUTO, SM90, MMA, 0, "GEMV=0");
  w8a8_dev_set_int("GEMV", 2);
  w8a8_dev_set_int("GEMV_FP8", 1);
  expect(&h, &f1, W8A8_KERNEL_AUTO, GEMV, REF, 0, "GEMV_FP8=1");
  w8a8_dev_set_int("GEMV_FP8", 0);
  /* a problem whose rows arrive (the fused all-gather): never the GEMV */
  w8a8_mm_ready ready;
  memset(&ready, 0, sizeof ready);
  w8a8_mm_problem r1 = i1;
  r1.ready = &ready;
  expect(&h, &r1, W8A8_KERNEL_AUTO, SM90, MMA, 0, "ready flags");
  CHECK(!strcmp(w8a8_cuda_path_name(W8A8_PATH_GEMV), "gemv") && !strcmp(w8a8_cuda_path_name(W8A8_PATH_SM90), "sm90") &&
            !strcmp(w8a8_cuda_path_name(W8A8_PATH_MMA), "mma") &&
            !strcmp(w8a8_cuda_path_name(W8A8_PATH_MMA_SM75), "mma_sm75") &&
            !strcmp(w8a8_cuda_path_name(W8A8_PATH_REFUSED), "refused"),
        "path names");
  rule_env();
}
