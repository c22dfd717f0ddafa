/* backend.c — CUDA backend host side (C11 against the CUDA runtime API):
 * device checks, handle state, pointer validation, dispatch to the kernels' launchers. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/internal.h"
#include "cuda_backend.h"

int w8a8_cuda_available_count(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError(); /* clear: no driver or no device is not an error here */
    return 0;
  }
  return n;
}

/* Map a CUDA error to W8A8_ERROR_DEVICE with a message; clears the non-sticky error. */
w8a8_status w8a8_cuda_error(const char *fn, const char *what, cudaError_t e) {
  cudaGetLastError();
  return w8a8_err(W8A8_ERROR_DEVICE, "%s: %s failed: %s (%s)", fn, what, cudaGetErrorString(e), cudaGetErrorName(e));
}

w8a8_status w8a8_cuda_handle_init(w8a8_handle *h) {
  static const char fn[] = "w8a8_create";
  int n = w8a8_cuda_available_count();
  if (h->device_index >= n)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: device_index is %d but %d CUDA device(s) are usable", fn,
                    h->device_index, n);
  w8a8_cuda_state *st = calloc(1, sizeof *st);
  if (!st) return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not allocate CUDA state", fn);
  cudaError_t e = cudaGetDeviceProperties(&st->prop, h->device_index);
  if (e != cudaSuccess) {
    free(st);
    return w8a8_cuda_error(fn, "cudaGetDeviceProperties", e);
  }
  st->cc = st->prop.major * 10 + st->prop.minor;
  if (st->cc < 75) {
    int cc = st->cc;
    free(st);
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: device %d has compute capability %d.%d; w8a8 needs sm_75 or newer",
                    fn, h->device_index, cc / 10, cc % 10);
  }
  h->cuda = st;
  w8a8_status s = w8a8_cuda_state_init(h, st);
  if (s != W8A8_SUCCESS) {
    w8a8_cuda_handle_fini(h);
    return s;
  }
  return W8A8_SUCCESS;
}

void w8a8_cuda_handle_fini(w8a8_handle *h) {
  w8a8_cuda_state *st = h->cuda;
  if (!st) return;
  w8a8_cuda_state_fini(h, st);
  free(st);
  h->cuda = NULL;
}

w8a8_status w8a8_cuda_get_info(const w8a8_handle *h, w8a8_handle_info *info) {
  const w8a8_cuda_state *st = h->cuda;
  info->cc_major = st->prop.major;
  info->cc_minor = st->prop.minor;
  info->num_sms = st->prop.multiProcessorCount;
  info->workspace_bytes = st->ws_bytes;
  snprintf(info->name, sizeof info->name, "%.127s", st->prop.name);
  /* what the handle runs: sm_90a only where the library holds it; the code's architecture where the fatbin
   * holds only older PTX for this GPU; fp8 where its GEMMs take it (dispatch_rule.h) */
  const w8a8_cuda_target t = w8a8_cuda_target_of(st);
  const int cc = w8a8_cuda_dispatch_cc(&t);
  char code[32] = "";
  if (st->code_cc < st->cc) snprintf(code, sizeof code, " code compute_%d", st->code_cc);
  snprintf(info->features, sizeof info->features, "sm_%d%s%s%s", st->cc,
           w8a8_cuda_sm90_first(&t, W8A8_KERNEL_AUTO) ? "a wgmma tma" : "", code, cc >= 89 ? " fp8" : "");
  return W8A8_SUCCESS;
}

w8a8_status w8a8_cuda_check_pointer(const w8a8_handle *h, const char *fn, const char *arg, const void *ptr) {
  struct cudaPointerAttributes at;
  cudaError_t e = cudaPointerGetAttributes(&at, ptr);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return w8a8_err(W8A8_ERROR_INVALID_POINTER, "%s: %s (%p) is not memory CUDA knows (%s); expected device memory of GPU %d",
                    fn, arg, ptr, cudaGetErrorName(e), h->device_index);
  }
  if (at.type == cudaMemoryTypeManaged) return W8A8_SUCCESS;
  if (at.type == cudaMemoryTypeDevice) {
    if (at.device == h->device_index) return W8A8_SUCCESS;
    return w8a8_err(W8A8_ERROR_INVALID_POINTER, "%s: %s (%p) is memory of GPU %d; this handle is bound to GPU %d", fn,
                    arg, ptr, at.device, h->device_index);
  }
  return w8a8_err(W8A8_ERROR_INVALID_POINTER,
                  "%s: %s (%p) is %s memory; a CUDA handle needs device memory of GPU %d (cudaMalloc or managed)", fn,
                  arg, ptr, at.type == cudaMemoryTypeHost ? "pinned host" : "ordinary host", h->device_index);
}

void *w8a8_cuda_driver_proc(const char *name, void **cache) {
  void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (f) return f;
  enum cudaDriverEntryPointQueryResult q;
  if (cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess || !f) {
    cudaGetLastError();
    return NULL;
  }
  __atomic_store_n(cache, f, __ATOMIC_RELEASE);
  return f;
}
