/* cuda_backend.h — CUDA backend state and the extern "C" launchers of the .cu files. */
#ifndef W8A8_CUDA_BACKEND_H
#define W8A8_CUDA_BACKEND_H
#include <cuda_runtime.h>

#include "../core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct w8a8_cuda_state {
  struct cudaDeviceProp prop;
  int cc;          /* 80, 86, 89, 90 ... */
  void *ws;        /* device workspace, allocated at handle creation */
  size_t ws_bytes;
} w8a8_cuda_state;

W8A8_HIDDEN w8a8_status w8a8_cuda_error(const char *fn, const char *what, cudaError_t e);
/* Allocate the handle's workspaces (kernels.c). */
W8A8_HIDDEN w8a8_status w8a8_cuda_state_init(w8a8_handle *h, w8a8_cuda_state *st);
W8A8_HIDDEN void w8a8_cuda_state_fini(w8a8_handle *h, w8a8_cuda_state *st);

#ifdef __cplusplus
}
#endif
#endif
