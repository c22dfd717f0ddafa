/* api.c — the public entry points: look the handle up, validate, dispatch to a backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "knobs.h"
#include "tune.h"
#include "../cpu/cpu_kernels.h"

#ifndef W8A8_FEATURES
#define W8A8_FEATURES "cpu"
#endif

int w8a8_version(void) { return W8A8_VERSION; }

const char *w8a8_version_string(void) {
#define W8A8_STR2(x) #x
#define W8A8_STR(x) W8A8_STR2(x)
  return W8A8_STR(W8A8_VERSION_MAJOR) "." W8A8_STR(W8A8_VERSION_MINOR) "." W8A8_STR(
      W8A8_VERSION_PATCH) " (" W8A8_FEATURES ")";
}

size_t w8a8_dtype_size(w8a8_dtype dtype) {
  switch (dtype) {
    case W8A8_DTYPE_INT8:
    case W8A8_DTYPE_FP8_E4M3:
      return 1;
    case W8A8_DTYPE_BF16:
    case W8A8_DTYPE_FP16:
      return 2;
    case W8A8_DTYPE_FP32:
    case W8A8_DTYPE_INT32:
      return 4;
    default:
      return 0;
  }
}

const char *w8a8_dtype_name(w8a8_dtype dtype) {
  switch (dtype) {
    case W8A8_DTYPE_INT8: return "int8";
    case W8A8_DTYPE_FP8_E4M3: return "fp8_e4m3";
    case W8A8_DTYPE_BF16: return "bf16";
    case W8A8_DTYPE_FP16: return "fp16";
    case W8A8_DTYPE_FP32: return "fp32";
    case W8A8_DTYPE_INT32: return "int32";
    default: return "invalid";
  }
}

int w8a8_cuda_device_count(void) { return w8a8_cuda_available_count(); }

/* w8a8_create's work; `fn` is the public call made, for the messages. */
static w8a8_status create(const char *fn, w8a8_handle **handle, w8a8_device_kind kind, int device_index) {
  if (!handle) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: handle is NULL; expected a w8a8_handle** to fill", fn);
  if (kind != W8A8_DEVICE_CPU && kind != W8A8_DEVICE_CUDA)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: kind is %d; expected W8A8_DEVICE_CPU (0) or W8A8_DEVICE_CUDA (1)",
                    fn, (int)kind);
  if (device_index < 0)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: device_index is %d; must be >= 0", fn, device_index);
  if (kind == W8A8_DEVICE_CPU && device_index != 0)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: device_index is %d; a CPU handle takes 0", fn, device_index);
  w8a8_handle *h = calloc(1, sizeof *h);
  if (!h) return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not allocate the handle", fn);
  h->magic = W8A8_HANDLE_MAGIC;
  h->kind = kind;
  h->device_index = device_index;
  h->kernel = W8A8_KERNEL_AUTO;
  w8a8_cpu_detect(&h->cpu);
  w8a8_status s = w8a8_cpu_handle_init(h);
  if (s == W8A8_SUCCESS && kind == W8A8_DEVICE_CUDA) s = w8a8_cuda_handle_init(h);
  if (s != W8A8_SUCCESS) {
    w8a8_cpu_handle_fini(h);
    free(h);
    return s;
  }
  if (!w8a8_registry_add(h)) {
    if (kind == W8A8_DEVICE_CUDA) w8a8_cuda_handle_fini(h);
    w8a8_cpu_handle_fini(h);
    free(h);
    return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not grow the handle registry", fn);
  }
  if (kind == W8A8_DEVICE_CUDA) w8a8_tune_load_env(fn, h);
  *handle = h;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_create(w8a8_handle **handle, w8a8_device_kind kind, int device_index) {
  w8a8_clear_error();
  return create("w8a8_create", handle, kind, device_index);
}

w8a8_status w8a8_create_best(w8a8_handle **handle) {
  static const char fn[] = "w8a8_create_best";
  w8a8_clear_error();
  if (handle && w8a8_cuda_available_count() > 0) {
    w8a8_status s = create(fn, handle, W8A8_DEVICE_CUDA, 0);
    if (s == W8A8_SUCCESS) return s;
    w8a8_clear_error(); /* the CPU handle below is the documented fallback, not a failure */
  }
  w8a8_status s = create(fn, handle, W8A8_DEVICE_CPU, 0);
  /* The backends' own messages (workspace allocation) name w8a8_create: name the call made. */
  static const char inner[] = "w8a8_create: ";
  if (s != W8A8_SUCCESS && strncmp(w8a8_last_error(), inner, sizeof inner - 1) == 0) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", w8a8_last_error() + sizeof inner - 1);
    return w8a8_err(s, "%s: %s", fn, detail);
  }
  return s;
}

w8a8_status w8a8_destroy(w8a8_handle *h) {
  w8a8_clear_error();
  if (!h) return W8A8_SUCCESS;
  W8A8_CHECK(w8a8_check_handle("w8a8_destroy", h));
  w8a8_registry_remove(h);
  if (h->kind == W8A8_DEVICE_CUDA) w8a8_cuda_handle_fini(h);
  w8a8_cpu_handle_fini(h);
  w8a8_tune_free((w8a8_tune_table *)h->tuning);
  h->magic = 0;
  free(h);
  return W8A8_SUCCESS;
}

w8a8_status w8a8_set_stream(w8a8_handle *h, void *cuda_stream) {
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle("w8a8_set_stream", h));
  if (h->kind == W8A8_DEVICE_CPU && cuda_stream)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "w8a8_set_stream: cuda_stream is %p but the handle is a CPU handle; "
                                              "only NULL is accepted",
                    cuda_stream);
  h->stream = cuda_stream;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_get_stream(const w8a8_handle *h, void **cuda_stream) {
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle("w8a8_get_stream", h));
  if (!cuda_stream) return w8a8_err(W8A8_ERROR_NULL_POINTER, "w8a8_get_stream: cuda_stream is NULL");
  *cuda_stream = h->stream;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_set_num_threads(w8a8_handle *h, int num_threads) {
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle("w8a8_set_num_threads", h));
  if (num_threads < 0 || num_threads > 4096)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "w8a8_set_num_threads: num_threads is %d; expected 0..4096",
                    num_threads);
  h->num_threads = num_threads;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_set_kernel(w8a8_handle *h, w8a8_kernel kernel) {
  static const char fn[] = "w8a8_set_kernel";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  if (kernel < W8A8_KERNEL_AUTO || kernel > W8A8_KERNEL_SM90)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: kernel is %d; expected a w8a8_kernel (0..3)", fn, (int)kernel);
  if (kernel == W8A8_KERNEL_SM90 && h->kind == W8A8_DEVICE_CPU)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: W8A8_KERNEL_SM90 needs a CUDA handle", fn);
  if (kernel == W8A8_KERNEL_REFERENCE && h->kind == W8A8_DEVICE_CUDA)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "%s: W8A8_KERNEL_REFERENCE runs on the CPU; use a CPU handle for the reference", fn);
  h->kernel = kernel;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_set_weights_constant(w8a8_handle *h, int constant) {
  static const char fn[] = "w8a8_set_weights_constant";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  if (constant != 0 && constant != 1)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: constant is %d; expected 0 (no promise) or 1 (weights constant)", fn,
                    constant);
  h->weights_constant = constant;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_set_fp8_accum(w8a8_handle *h, w8a8_fp8_accum accum) {
  static const char fn[] = "w8a8_set_fp8_accum";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  if (accum != W8A8_FP8_ACCUM_PRECISE && accum != W8A8_FP8_ACCUM_FAST)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE,
                    "%s: accum is %d; expected W8A8_FP8_ACCUM_PRECISE (0) or W8A8_FP8_ACCUM_FAST (1)", fn, (int)accum);
  h->fp8_accum = (int)accum;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_get_last_launch(const w8a8_handle *h, w8a8_launch_info *info) {
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle("w8a8_get_last_launch", h));
  if (!info) return w8a8_err(W8A8_ERROR_NULL_POINTER, "w8a8_get_last_launch: info is NULL");
  info->kernel = h->last.kernel ? h->last.kernel : "";
  info->config = h->last.config ? h->last.config : "";
  info->split_k = h->last.split > 0 ? h->last.split : 1;
  info->m = h->last.M;
  info->n = h->last.N;
  info->k = h->last.K;
  return W8A8_SUCCESS;
}

void w8a8_note_launch(w8a8_handle *h, const char *kernel, const char *config, int split, int64_t M, int64_t N,
                      int64_t K) {
  w8a8_launch_record *r = &h->last;
  const bool same = r->kernel == kernel && r->config == config && r->split == split && r->M == M && r->N == N &&
                    r->K == K;
  r->kernel = kernel;
  r->config = config;
  r->split = split;
  r->M = M, r->N = N, r->K = K;
  r->tail = r->shift = r->tma_out = 0;
  if (!same && w8a8_log_level() >= W8A8_LOG_INFO)
    w8a8_log(W8A8_LOG_INFO, "handle %p: M=%lld N=%lld K=%lld -> %s%s%s split %d", (const void *)h, (long long)M,
             (long long)N, (long long)K, kernel, config[0] ? " " : "", config, split);
}

w8a8_status w8a8_get_info(const w8a8_handle *h, w8a8_handle_info *info) {
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle("w8a8_get_info", h));
  if (!info) return w8a8_err(W8A8_ERROR_NULL_POINTER, "w8a8_get_info: info is NULL");
  w8a8_handle_info r;
  memset(&r, 0, sizeof r);
  r.kind = h->kind;
  r.device_index = h->device_index;
  if (h->kind == W8A8_DEVICE_CUDA) {
    W8A8_CHECK(w8a8_cuda_get_info(h, &r));
  } else {
    r.num_threads = w8a8_cpu_threads(h);
    r.num_sms = r.num_threads;
    r.workspace_bytes = h->cpu_ws_bytes;
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[256];
    snprintf(r.name, sizeof r.name, "cpu");
    while (f && fgets(line, sizeof line, f)) {
      if (strncmp(line, "model name", 10) == 0) {
        char *c = strchr(line, ':');
        if (c) {
          c++;
          while (*c == ' ') c++;
          c[strcspn(c, "\n")] = 0;
          snprintf(r.name, sizeof r.name, "%s", c);
        }
        break;
      }
    }
    if (f) fclose(f);
    snprintf(r.features, sizeof r.features, "%s%s%s%s%s%s", h->cpu.avx2 ? "avx2 " : "", h->cpu.fma ? "fma " : "",
             h->cpu.f16c ? "f16c " : "", h->cpu.avx512bw ? "avx512bw " : "", h->cpu.avx512vnni ? "avx512vnni" : "",
             h->cpu.amx ? " amx-int8" : "");
  }
  *info = r;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_scaled_mm(w8a8_handle *h, const w8a8_matrix *a, const w8a8_matrix *b,
                           const w8a8_vector *scale_a, const w8a8_vector *scale_b, const w8a8_vector *bias,
                           const w8a8_zero_point *zp, const w8a8_matrix *out) {
  static const char fn[] = "w8a8_scaled_mm";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  w8a8_mm_problem p;
  W8A8_CHECK(w8a8_validate_scaled_mm(fn, h, a, b, scale_a, scale_b, bias, zp, out, &p));
  if (p.M == 0 || p.N == 0) return W8A8_SUCCESS;
  if (h->kind == W8A8_DEVICE_CUDA) return w8a8_cuda_scaled_mm(h, &p);
  return w8a8_cpu_scaled_mm(h, &p);
}

w8a8_status w8a8_scaled_mm_blockwise(w8a8_handle *h, const w8a8_matrix *a, const w8a8_matrix *b,
                                     const w8a8_matrix *scale_a, const w8a8_matrix *scale_b, const w8a8_vector *bias,
                                     const w8a8_matrix *out) {
  static const char fn[] = "w8a8_scaled_mm_blockwise";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  w8a8_mm_problem p;
  W8A8_CHECK(w8a8_validate_scaled_mm_blockwise(fn, h, a, b, scale_a, scale_b, bias, out, &p));
  if (p.M == 0 || p.N == 0) return W8A8_SUCCESS;
  if (h->kind == W8A8_DEVICE_CUDA) return w8a8_cuda_scaled_mm_blockwise(h, &p);
  return w8a8_cpu_scaled_mm(h, &p);
}

static w8a8_status quantize_groups(const char *fn, w8a8_handle *h, const w8a8_matrix *x, const w8a8_matrix *q,
                                   const w8a8_matrix *scale, unsigned flags, int groups, int x_per_q) {
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  w8a8_quant_problem p;
  W8A8_CHECK(w8a8_validate_quantize_groups(fn, h, x, q, scale, flags, groups, x_per_q, &p));
  if (p.M == 0 || p.K == 0) return W8A8_SUCCESS;
  if (h->kind == W8A8_DEVICE_CUDA) return w8a8_cuda_quantize_groups(h, &p, x_per_q == 2);
  return x_per_q == 2 ? w8a8_cpu_silu_mul_quantize(h, &p) : w8a8_cpu_quantize(h, &p);
}

w8a8_status w8a8_quantize_groups(w8a8_handle *h, const w8a8_matrix *x, const w8a8_matrix *q, const w8a8_matrix *scale,
                                 unsigned flags) {
  return quantize_groups("w8a8_quantize_groups", h, x, q, scale, flags, W8A8_GROUPS_TOKEN, 1);
}

w8a8_status w8a8_quantize_blocks(w8a8_handle *h, const w8a8_matrix *x, const w8a8_matrix *q, const w8a8_matrix *scale,
                                 unsigned flags) {
  return quantize_groups("w8a8_quantize_blocks", h, x, q, scale, flags, W8A8_GROUPS_BLOCK, 1);
}

w8a8_status w8a8_silu_mul_quantize_groups(w8a8_handle *h, const w8a8_matrix *x, const w8a8_matrix *q,
                                          const w8a8_matrix *scale, unsigned flags) {
  return quantize_groups("w8a8_silu_mul_quantize_groups", h, x, q, scale, flags, W8A8_GROUPS_TOKEN, 2);
}

w8a8_status w8a8_colsum(w8a8_handle *h, const w8a8_matrix *b, const w8a8_vector *azp_adj) {
  static const char fn[] = "w8a8_colsum";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  w8a8_colsum_problem p;
  W8A8_CHECK(w8a8_validate_colsum(fn, h, b, azp_adj, &p));
  if (p.N == 0) return W8A8_SUCCESS;
  if (h->kind == W8A8_DEVICE_CUDA) return w8a8_cuda_colsum(h, &p);
  return w8a8_cpu_colsum(h, &p);
}

w8a8_status w8a8_quantize(w8a8_handle *h, const w8a8_matrix *x, const w8a8_matrix *q, w8a8_quant_mode mode,
                          const w8a8_vector *scale, const w8a8_vector *azp, const float *scale_ub) {
  static const char fn[] = "w8a8_quantize";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  w8a8_quant_problem p;
  W8A8_CHECK(w8a8_validate_quantize(fn, h, x, q, mode, scale, azp, scale_ub, &p));
  /* M == 0: nothing to do. K == 0 with rows: dynamic scales are defined (MIN_SCALE). */
  if (p.M == 0) return W8A8_SUCCESS;
  if (h->kind == W8A8_DEVICE_CUDA) return w8a8_cuda_quantize(h, &p);
  return w8a8_cpu_quantize(h, &p);
}

/* x [M, 2I] (gate, then up) -> q [M, I]: the checks of w8a8_quantize with that shape rule; the
 * problem is over q (p.x is the gate; the up half starts at column p.K of the same row). */
w8a8_status w8a8_silu_mul_quantize(w8a8_handle *h, const w8a8_matrix *x, const w8a8_matrix *q, w8a8_quant_mode mode,
                                   const w8a8_vector *scale, const w8a8_vector *azp, const float *scale_ub) {
  static const char fn[] = "w8a8_silu_mul_quantize";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  w8a8_quant_problem p;
  W8A8_CHECK(w8a8_validate_silu_mul_quantize(fn, h, x, q, mode, scale, azp, scale_ub, &p));
  if (p.M == 0) return W8A8_SUCCESS;
  if (h->kind == W8A8_DEVICE_CUDA) return w8a8_cuda_silu_mul_quantize(h, &p);
  return w8a8_cpu_silu_mul_quantize(h, &p);
}
