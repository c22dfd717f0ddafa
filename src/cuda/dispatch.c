/* dispatch.c — CUDA backend entry points: make the handle's device current, run the kernel
 * that dispatch_rule.c chooses (GEMV, the Hopper kernel, the portable mma.sync kernel of sm_80+
 * or of sm_75), launch on the handle's stream. Nothing here allocates or synchronizes: every
 * call is graph-capturable. */
#include <stdio.h>

#include "cuda_backend.h"

w8a8_status w8a8_cuda_guard_enter(const char *fn, const w8a8_handle *h, w8a8_cuda_guard *g) {
  g->changed = 0;
  cudaError_t e = cudaGetDevice(&g->prev);
  if (e != cudaSuccess) return w8a8_cuda_error(fn, "cudaGetDevice", e);
  if (g->prev != h->device_index) {
    e = cudaSetDevice(h->device_index);
    if (e != cudaSuccess) return w8a8_cuda_error(fn, "cudaSetDevice", e);
    g->changed = 1;
  }
  /* Drop a stale, non-sticky error of the caller's so that the launch check below
   * reports only what our launch did. */
  cudaGetLastError();
  return W8A8_SUCCESS;
}

void w8a8_cuda_guard_exit(const w8a8_cuda_guard *g) {
  if (g->changed) cudaSetDevice(g->prev);
}

w8a8_status w8a8_cuda_state_init(w8a8_handle *h, w8a8_cuda_state *st) {
  w8a8_cuda_guard g;
  W8A8_CHECK(w8a8_cuda_guard_enter("w8a8_create", h, &g));
  /* The portable GEMM's split-K partial sums (small M, few tiles): 16 MB holds about 16 splits of a
   * problem whose small tiles do not fill the GPU (the launcher lowers the split count to fit). Calls of
   * one handle share it, so they run in stream order (the header: one thread, one stream at a time per
   * handle). */
  st->ws = NULL;
  st->ws_bytes = 0;
  st->sk_locks = NULL;
  size_t bytes = (size_t)16 << 20;
  const size_t lock_bytes = W8A8_SK_LOCKS * sizeof(unsigned int), amax_bytes = 256;
  st->amax = NULL;
  cudaError_t e = cudaMalloc(&st->ws, bytes + lock_bytes + amax_bytes);
  if (e != cudaSuccess) {
    st->ws = NULL;
    w8a8_cuda_guard_exit(&g);
    cudaGetLastError();
    return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "w8a8_create: could not allocate %zu bytes of GPU workspace on device %d",
                    bytes + lock_bytes + amax_bytes, h->device_index);
  }
  /* The stream-K locks start at zero. On a private non-blocking stream, waited for here (handle creation
   * is not a hot path): the legacy stream would also wait for, and hold up, every blocking stream of the
   * application's on this device. */
  cudaStream_t zs = NULL;
  e = cudaStreamCreateWithFlags(&zs, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMemsetAsync((char *)st->ws + bytes, 0, lock_bytes, zs);
  if (e == cudaSuccess) e = cudaStreamSynchronize(zs);
  if (zs) cudaStreamDestroy(zs);
  if (e != cudaSuccess) {
    cudaFree(st->ws);
    st->ws = NULL;
    w8a8_cuda_guard_exit(&g);
    cudaGetLastError();
    return w8a8_cuda_error("w8a8_create", "cudaMemset of the stream-K locks", e);
  }
  st->ws_bytes = bytes;
  st->sk_locks = (unsigned int *)((char *)st->ws + bytes);
  st->amax = (float *)((char *)st->ws + bytes + lock_bytes);
  w8a8_status s = w8a8_cuda_gemm_setup(st->cc, &st->code_cc);
  w8a8_cuda_guard_exit(&g);
  return s;
}

void w8a8_cuda_state_fini(w8a8_handle *h, w8a8_cuda_state *st) {
  int prev = -1;
  if (st->ws && cudaGetDevice(&prev) == cudaSuccess && prev != h->device_index) cudaSetDevice(h->device_index);
  if (st->ws) cudaFree(st->ws);
  if (prev >= 0 && prev != h->device_index) cudaSetDevice(prev);
  st->ws = NULL;
  st->ws_bytes = 0;
  st->sk_locks = NULL;
  st->amax = NULL;
}

/* Tests: fill the handle's workspace (not the stream-K locks after it) with `byte` on `stream`, so that a
 * kernel that reads partial sums before they are stored reads garbage (sm90_streamk's graph replays:
 * otherwise the previous launch's identical partials would hide an early read). 0 on success. */
W8A8_HIDDEN int w8a8_cuda_poison_ws(w8a8_handle *h, void *stream, int byte) {
  const w8a8_cuda_state *st = h ? (const w8a8_cuda_state *)h->cuda : NULL;
  if (!st || !st->ws) return -1;
  return cudaMemsetAsync(st->ws, byte, st->ws_bytes, (cudaStream_t)stream) == cudaSuccess ? 0 : -1;
}

w8a8_cuda_target w8a8_cuda_target_of(const w8a8_cuda_state *st) {
  w8a8_cuda_target t = {st->cc, st->code_cc, w8a8_cuda_have_sm90a()};
  return t;
}

int w8a8_cuda_handle_cc(const w8a8_handle *h) {
  const w8a8_cuda_target t = w8a8_cuda_target_of(h->cuda);
  return w8a8_cuda_dispatch_cc(&t);
}

/* Where the handle runs an older capability's kernels than its GPU's: why, for a refusal's message ("" if not). */
static const char *lowered(const w8a8_cuda_state *st, char *buf, size_t n) {
  const w8a8_cuda_target t = w8a8_cuda_target_of(st);
  const int cc = w8a8_cuda_dispatch_cc(&t);
  buf[0] = '\0';
  if (cc < st->cc && st->code_cc == cc)
    snprintf(buf, n, ", but the code this libw8a8 holds for it is compute_%d (build with its own in CUDA_ARCHS)", cc);
  else if (cc < st->cc)
    snprintf(buf, n, ", run as %d.%d by W8A8_DEV CUDA_FORCE_PATH", cc / 10, cc % 10);
  return buf;
}

/* The quantizers' fp8: on GPUs of 8.9 or newer, whatever code the library holds for them (their conversion has an
 * exact integer path below sm_89: common.cuh). */
w8a8_status w8a8_cuda_need_fp8(const char *fn, const w8a8_handle *h) {
  const w8a8_cuda_state *st = h->cuda;
  if (st->cc >= 89) return W8A8_SUCCESS;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                  "%s: fp8 e4m3 needs compute capability 8.9 or newer (Ada, Hopper); GPU %d (%s) is %d.%d. "
                  "Use int8 on this device",
                  fn, h->device_index, st->prop.name, st->cc / 10, st->cc % 10);
}

/* A refused route's message (dispatch_rule.h). */
static w8a8_status refusal(const char *fn, const w8a8_handle *h, const w8a8_cuda_route *r) {
  const w8a8_cuda_state *st = h->cuda;
  char why[160];
  switch (r->why) {
  case W8A8_ROUTE_FP8:
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "%s: fp8 e4m3 needs compute capability 8.9 or newer (Ada, Hopper); GPU %d (%s) is %d.%d%s%s", fn,
                    h->device_index, st->prop.name, st->cc / 10, st->cc % 10, lowered(st, why, sizeof why),
                    st->cc < 89 ? ". Use int8 on this device" : "");
  case W8A8_ROUTE_SM90_FORCED:
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: W8A8_KERNEL_SM90 needs an sm_90 GPU; GPU %d is sm_%d%s", fn,
                    h->device_index, st->cc, lowered(st, why, sizeof why));
  case W8A8_ROUTE_OLD_GPU:
  case W8A8_ROUTE_OK: break;
  }
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: w8a8 needs compute capability %d.%d or newer; GPU %d is %d.%d%s",
                  fn, r->need / 10, r->need % 10, h->device_index, st->cc / 10, st->cc % 10,
                  lowered(st, why, sizeof why));
}

int w8a8_cuda_takes_ready(const w8a8_handle *h, const w8a8_mm_problem *p) {
  const w8a8_cuda_state *st = h->cuda;
  if (!st) return 0;
  const w8a8_cuda_target t = w8a8_cuda_target_of(st);
  return w8a8_cuda_sm90_first(&t, h->kernel) && w8a8_sm90_accepts(h, p);
}

w8a8_status w8a8_cuda_forced_check(const w8a8_handle *h, const w8a8_mm_problem *p) {
  static const char fn[] = "w8a8_scaled_mm";
  if (h->kernel != W8A8_KERNEL_SM90) return W8A8_SUCCESS;
  const w8a8_cuda_target t = w8a8_cuda_target_of(h->cuda);
  if (p->block_scaled) { /* (w8a8_cuda_scaled_mm_blockwise's rule for a handle forcing the sm_90a kernel) */
    if (w8a8_cuda_dispatch_cc(&t) != 90)
      return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                      "w8a8_scaled_mm_blockwise: the handle forces the sm_90a kernel; this GPU runs as %d.%d",
                      w8a8_cuda_dispatch_cc(&t) / 10, w8a8_cuda_dispatch_cc(&t) % 10);
    return w8a8_sm90_blockwise_check(h, p);
  }
  const w8a8_cuda_route r = w8a8_cuda_route_mm(&t, p, h->kernel);
  if (r.path == W8A8_PATH_REFUSED) return refusal(fn, h, &r);
  w8a8_cuda_guard g;
  W8A8_CHECK(w8a8_cuda_guard_enter(fn, h, &g));
  w8a8_status s = w8a8_sm90_check(h, p);
  w8a8_cuda_guard_exit(&g);
  return s;
}

w8a8_status w8a8_cuda_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p) {
  static const char fn[] = "w8a8_scaled_mm";
  const w8a8_cuda_state *st = h->cuda;
  const w8a8_cuda_target t = w8a8_cuda_target_of(st);
  const w8a8_cuda_route r = w8a8_cuda_route_mm(&t, p, h->kernel);
  if (r.path == W8A8_PATH_REFUSED) return refusal(fn, h, &r);
  w8a8_cuda_guard g;
  W8A8_CHECK(w8a8_cuda_guard_enter(fn, h, &g));
  const cudaStream_t stream = (cudaStream_t)h->stream;
  const int sms = st->prop.multiProcessorCount;
  w8a8_cuda_path path = r.path;
  w8a8_status s;
  if (path == W8A8_PATH_SM90) {
    s = w8a8_sm90_scaled_mm(h, p);
    if (s != W8A8_ERROR_UNSUPPORTED_DEVICE || r.fallback == W8A8_PATH_REFUSED || p->ready) {
      w8a8_cuda_guard_exit(&g);
      return s;
    }
    w8a8_clear_error(); /* the fast path declined this input: not the caller's error */
    path = r.fallback;
  }
  if (path == W8A8_PATH_GEMV) {
    s = w8a8_cuda_launch_gemv(p, stream, sms);
  } else if (p->ready) { /* the portable kernels cannot wait for arriving rows */
    s = w8a8_err(W8A8_ERROR_INTERNAL, "%s: arriving chunks of A need the sm_90a kernel", fn);
  } else if (path == W8A8_PATH_MMA_SM75) {
    s = w8a8_cuda_launch_gemm_sm75(p, stream, sms, st->ws, st->ws_bytes);
  } else {
    s = w8a8_cuda_launch_gemm(p, stream, sms, st->ws, st->ws_bytes);
  }
  if (s == W8A8_SUCCESS) w8a8_note_launch(h, w8a8_cuda_path_name(path), "", 1, p->M, p->N, p->K);
  w8a8_cuda_guard_exit(&g);
  return s;
}

w8a8_status w8a8_cuda_quantize(w8a8_handle *h, const w8a8_quant_problem *p) {
  static const char fn[] = "w8a8_quantize";
  const w8a8_cuda_state *st = h->cuda;
  if (p->out_dtype == W8A8_DTYPE_FP8_E4M3) W8A8_CHECK(w8a8_cuda_need_fp8(fn, h));
  w8a8_cuda_guard g;
  W8A8_CHECK(w8a8_cuda_guard_enter(fn, h, &g));
  w8a8_status s = w8a8_cuda_launch_quantize(p, (cudaStream_t)h->stream, st->prop.multiProcessorCount, st->amax);
  w8a8_cuda_guard_exit(&g);
  return s;
}

w8a8_status w8a8_cuda_colsum(w8a8_handle *h, const w8a8_colsum_problem *p) {
  const w8a8_cuda_state *st = h->cuda;
  w8a8_cuda_guard g;
  W8A8_CHECK(w8a8_cuda_guard_enter("w8a8_colsum", h, &g));
  w8a8_status s = w8a8_cuda_launch_colsum(p, (cudaStream_t)h->stream, st->prop.multiProcessorCount);
  w8a8_cuda_guard_exit(&g);
  return s;
}
