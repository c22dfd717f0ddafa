/* dispatch_rule.c — the CUDA dispatcher's choice of kernel (dispatch_rule.h): plain C, no CUDA, so that the CPU
 * tests check it. */
#include "dispatch_rule.h"

#include "../core/knobs.h"
#include "sm90_plan.h"

int w8a8_cuda_dispatch_cc(const w8a8_cuda_target *t) {
  int cc = t->cc;
  if (t->code_cc > 0 && t->code_cc < cc) cc = t->code_cc;
  const int force = (int)w8a8_knob_int(W8A8_KNOB_CUDA_FORCE_PATH);
  if (force > 0 && force < cc) cc = force;
  return cc;
}

int w8a8_cuda_sm90_first(const w8a8_cuda_target *t, w8a8_kernel kernel) {
  return w8a8_cuda_dispatch_cc(t) == 90 && (kernel == W8A8_KERNEL_SM90 || (kernel == W8A8_KERNEL_AUTO && t->sm90a));
}

static w8a8_cuda_route refused(w8a8_cuda_route r, w8a8_route_why why, int need) {
  r.path = W8A8_PATH_REFUSED;
  r.why = why;
  r.need = need;
  return r;
}

w8a8_cuda_route w8a8_cuda_route_mm(const w8a8_cuda_target *t, const w8a8_mm_problem *p, w8a8_kernel kernel) {
  w8a8_cuda_route r = {W8A8_PATH_REFUSED, W8A8_PATH_REFUSED, W8A8_ROUTE_OK, 0, w8a8_cuda_dispatch_cc(t)};
  const int cc = r.cc;
  if (cc < 75) return refused(r, W8A8_ROUTE_OLD_GPU, 75);
  if (p->in_dtype == W8A8_DTYPE_FP8_E4M3 && cc < 89) return refused(r, W8A8_ROUTE_FP8, 89);
  if (kernel == W8A8_KERNEL_SM90 && cc != 90) return refused(r, W8A8_ROUTE_SM90_FORCED, 90);
  /* the portable kernel of the capability (fp8 got here only from 8.9 on) */
  const w8a8_cuda_path portable = cc >= 80 ? W8A8_PATH_MMA : W8A8_PATH_MMA_SM75;
  if (kernel == W8A8_KERNEL_AUTO && w8a8_cuda_gemv_wanted(p, cc)) {
    r.path = W8A8_PATH_GEMV;
    return r;
  }
  if (w8a8_cuda_sm90_first(t, kernel)) {
    r.path = W8A8_PATH_SM90;
    if (kernel == W8A8_KERNEL_AUTO) r.fallback = portable;
    return r;
  }
  r.path = portable;
  return r;
}

const char *w8a8_cuda_path_name(w8a8_cuda_path path) {
  switch (path) {
  case W8A8_PATH_GEMV: return "gemv";
  case W8A8_PATH_SM90: return "sm90";
  case W8A8_PATH_MMA: return "mma";
  case W8A8_PATH_MMA_SM75: return "mma_sm75";
  case W8A8_PATH_REFUSED: break;
  }
  return "refused";
}
