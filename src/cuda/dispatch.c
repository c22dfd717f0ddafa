/* dispatch.c — CUDA backend entry points: make the handle's device current, pick the
 * kernel (Hopper fast path or the portable mma.sync kernel), launch on the handle's
 * stream. Nothing here allocates or synchronizes: every call is graph-capturable. */
#include "cuda_backend.h"

/* Make the handle's device current for the duration of a call; restore the caller's. */
typedef struct device_guard {
  int prev;
  int changed;
} device_guard;

static w8a8_status guard_enter(const char *fn, const w8a8_handle *h, device_guard *g) {
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

static void guard_exit(const device_guard *g) {
  if (g->changed) cudaSetDevice(g->prev);
}

w8a8_status w8a8_cuda_state_init(w8a8_handle *h, w8a8_cuda_state *st) {
  device_guard g;
  W8A8_CHECK(guard_enter("w8a8_create", h, &g));
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
    guard_exit(&g);
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
    guard_exit(&g);
    cudaGetLastError();
    return w8a8_cuda_error("w8a8_create", "cudaMemset of the stream-K locks", e);
  }
  st->ws_bytes = bytes;
  st->sk_locks = (unsigned int *)((char *)st->ws + bytes);
  st->amax = (float *)((char *)st->ws + bytes + lock_bytes);
  w8a8_status s = w8a8_cuda_gemm_setup();
  guard_exit(&g);
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

static w8a8_status need_fp8(const char *fn, const w8a8_handle *h, const w8a8_cuda_state *st) {
  if (st->cc >= 89) return W8A8_SUCCESS;
  return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                  "%s: fp8 e4m3 needs compute capability 8.9 or newer (Ada, Hopper); GPU %d (%s) is %d.%d. "
                  "Use int8 on this device",
                  fn, h->device_index, st->prop.name, st->cc / 10, st->cc % 10);
}

int w8a8_cuda_takes_ready(const w8a8_handle *h, const w8a8_mm_problem *p) {
  const w8a8_cuda_state *st = h->cuda;
  if (!st || st->cc != 90 || (h->kernel != W8A8_KERNEL_AUTO && h->kernel != W8A8_KERNEL_SM90)) return 0;
  return w8a8_sm90_accepts(h, p);
}

w8a8_status w8a8_cuda_forced_check(const w8a8_handle *h, const w8a8_mm_problem *p) {
  static const char fn[] = "w8a8_scaled_mm";
  const w8a8_cuda_state *st = h->cuda;
  if (h->kernel != W8A8_KERNEL_SM90) return W8A8_SUCCESS;
  if (p->in_dtype == W8A8_DTYPE_FP8_E4M3) W8A8_CHECK(need_fp8(fn, h, st));
  if (st->cc != 90)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: W8A8_KERNEL_SM90 needs an sm_90 GPU; GPU %d is sm_%d", fn,
                    h->device_index, st->cc);
  device_guard g;
  W8A8_CHECK(guard_enter(fn, h, &g));
  w8a8_status s = w8a8_sm90_check(h, p);
  guard_exit(&g);
  return s;
}

w8a8_status w8a8_cuda_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p) {
  static const char fn[] = "w8a8_scaled_mm";
  const w8a8_cuda_state *st = h->cuda;
  if (p->in_dtype == W8A8_DTYPE_FP8_E4M3) W8A8_CHECK(need_fp8(fn, h, st));
  if (h->kernel == W8A8_KERNEL_SM90 && st->cc != 90)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: W8A8_KERNEL_SM90 needs an sm_90 GPU; GPU %d is sm_%d", fn,
                    h->device_index, st->cc);
  device_guard g;
  W8A8_CHECK(guard_enter(fn, h, &g));
  w8a8_status s;
  /* the fewest tokens on CUDA cores (where measured faster: gemv.cu; AUTO only: the forced kernels
   * stay what they name) */
  if (h->kernel == W8A8_KERNEL_AUTO && w8a8_cuda_gemv_wanted(p, st->cc)) {
    s = w8a8_cuda_launch_gemv(p, (cudaStream_t)h->stream, st->prop.multiProcessorCount);
    if (s == W8A8_SUCCESS) w8a8_note_launch(h, "gemv", "", 1, p->M, p->N, p->K);
    guard_exit(&g);
    return s;
  }
  if (st->cc == 90 && (h->kernel == W8A8_KERNEL_AUTO || h->kernel == W8A8_KERNEL_SM90)) {
    s = w8a8_sm90_scaled_mm(h, p);
    if (s != W8A8_ERROR_UNSUPPORTED_DEVICE || h->kernel == W8A8_KERNEL_SM90 || p->ready) {
      guard_exit(&g);
      return s;
    }
    w8a8_clear_error(); /* the fast path declined this input: not the caller's error */
  }
  if (p->ready) { /* the portable kernel cannot wait for arriving rows */
    guard_exit(&g);
    return w8a8_err(W8A8_ERROR_INTERNAL, "%s: arriving chunks of A need the sm_90a kernel", fn);
  }
  s = w8a8_cuda_launch_gemm(p, (cudaStream_t)h->stream, st->prop.multiProcessorCount, st->ws, st->ws_bytes);
  if (s == W8A8_SUCCESS) w8a8_note_launch(h, "mma", "", 1, p->M, p->N, p->K);
  guard_exit(&g);
  return s;
}

w8a8_status w8a8_cuda_quantize(w8a8_handle *h, const w8a8_quant_problem *p) {
  static const char fn[] = "w8a8_quantize";
  const w8a8_cuda_state *st = h->cuda;
  if (p->out_dtype == W8A8_DTYPE_FP8_E4M3) W8A8_CHECK(need_fp8(fn, h, st));
  device_guard g;
  W8A8_CHECK(guard_enter(fn, h, &g));
  w8a8_status s = w8a8_cuda_launch_quantize(p, (cudaStream_t)h->stream, st->prop.multiProcessorCount, st->amax);
  guard_exit(&g);
  return s;
}

w8a8_status w8a8_cuda_colsum(w8a8_handle *h, const w8a8_colsum_problem *p) {
  const w8a8_cuda_state *st = h->cuda;
  device_guard g;
  W8A8_CHECK(guard_enter("w8a8_colsum", h, &g));
  w8a8_status s = w8a8_cuda_launch_colsum(p, (cudaStream_t)h->stream, st->prop.multiProcessorCount);
  guard_exit(&g);
  return s;
}
