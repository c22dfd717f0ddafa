/* tp_interfere.c — development benchmark: does another GPU's copy engine WRITING into this
 * GPU's memory slow this GPU's GEMM more than this GPU's own engine pulling the same bytes? The push
 * all-gather landed its rows earlier than the pull but made the fused GEMM ~90 us slower at 8192 tokens;
 * the hypothesis tested here was that incoming NVLink writes evict the GEMM's reused weight tiles from L2.
 *
 * On GPU 0 (needs 2 GPUs with peer access): the all-gather's GEMM of 70b-qkv at TP = 2 (N = 5120, K =
 * 8192, int8 or fp8, per-token x per-channel, bf16 out) at M tokens, timed by events on its stream, while
 * at the same time:
 *   alone     nothing else runs;
 *   pull      GPU 0's side stream copies BYTES from GPU 1 into GPU 0 (cudaMemcpyAsync on GPU 0's stream);
 *   push      GPU 1's stream copies BYTES from GPU 1 into GPU 0 (the same bytes, GPU 1's engine);
 *   local     GPU 0's side stream copies BYTES within GPU 0 (HBM traffic without NVLink);
 *   out       GPU 0's side stream copies BYTES from GPU 0 into GPU 1 (GPU 0's engine pushing out);
 *   bothpush  out + push at once (what the push all-gather does on 2 GPUs);
 *   bothpull  pull + GPU 1's stream pulling BYTES from GPU 0 (what the pull does);
 * and -s: a 16 KB copy from GPU 1 into GPU 0 on the GEMM's stream just before the GEMM (the fused op's
 * peer-scale copy), timed from the GEMM's start event (small_us): does it queue behind a big copy?
 * The modes are interleaved in rounds (in order, then reversed), each GEMM call is one sample, the
 * copies launched just before it; medians per mode, and the copies' own times (GPU 0's engine, GPU 1's).
 * Findings (h200-session19-2026-11-30.txt, h200-session20-2026-11-30.txt): NVLink traffic in any direction
 * costs the GEMM nothing and a local copy 4-35%, but the 16 KB copy waits ~90 us behind any big incoming
 * copy, which is what slowed the push all-gather (docs/TP.md).
 *
 *   tp_interfere [-d int8|fp8] [-m M] [-b MiB] [-n ROUNDS] [-s]
 * Build (against the static library, as every bench/*.c): the build step of scripts/device.sh.
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "w8a8.h"

#define CK(x)                                                                                       \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      fprintf(stderr, "tp_interfere: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);   \
      return 1;                                                                                     \
    }                                                                                               \
  } while (0)

enum { ALONE, PULL, PUSH, LOCAL, OUT, BOTHPUSH, BOTHPULL, NMODES };
static const char *k_names[NMODES] = {"alone", "pull", "push", "local", "out", "bothpush", "bothpull"};

static int cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* n random bytes that are valid operands of either dtype (|v| small, no NaN patterns for fp8) */
static void fill_q8(uint8_t *h, size_t n, uint64_t seed) {
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    h[i] = (uint8_t)((seed >> 33) % 64) | (uint8_t)(((seed >> 40) & 1) << 7);
  }
}

int main(int argc, char **argv) {
  int fp8 = 0, rounds = 10, small = 0;
  int64_t M = 1024;
  const int64_t N = 5120, K = 8192;
  size_t mib = 32;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-d") && i + 1 < argc) fp8 = !strcmp(argv[++i], "fp8");
    else if (!strcmp(argv[i], "-m") && i + 1 < argc) M = atoll(argv[++i]);
    else if (!strcmp(argv[i], "-b") && i + 1 < argc) mib = (size_t)atoll(argv[++i]);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) rounds = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-s")) small = 1;
    else {
      fprintf(stderr, "usage: tp_interfere [-d int8|fp8] [-m M] [-b MiB] [-n ROUNDS] [-s]\n");
      return 2;
    }
  }
  if (M < 1 || M > 65536 || mib < 1 || mib > 4096 || rounds < 1 || rounds > 1000) {
    fprintf(stderr, "tp_interfere: -m 1..65536, -b 1..4096, -n 1..1000\n");
    return 2;
  }
  int ngpu = 0, peer = 0;
  if (cudaGetDeviceCount(&ngpu) != cudaSuccess) ngpu = 0; /* no driver / no GPU: nothing to measure */
  if (ngpu < 2) {
    printf("tp_interfere: %d GPU(s); needs 2: skipped\n", ngpu);
    return 0;
  }
  CK(cudaDeviceCanAccessPeer(&peer, 0, 1));
  if (!peer) {
    printf("tp_interfere: no peer access between GPU 0 and 1: skipped\n");
    return 0;
  }
  const size_t bytes = mib << 20;
  const w8a8_dtype in = fp8 ? W8A8_DTYPE_FP8_E4M3 : W8A8_DTYPE_INT8;

  /* GPU 1: the source of the pulls / pushes, the landing buffer of GPU 0's pushes, and its stream */
  void *src1 = NULL, *dst1 = NULL;
  cudaStream_t s1;
  CK(cudaSetDevice(1));
  CK(cudaDeviceEnablePeerAccess(0, 0));
  CK(cudaMalloc(&src1, bytes));
  CK(cudaMemset(src1, 1, bytes));
  CK(cudaMalloc(&dst1, bytes));
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));

  /* GPU 0: the GEMM's operands, the landing buffer, a local source, two streams */
  CK(cudaSetDevice(0));
  CK(cudaDeviceEnablePeerAccess(1, 0));
  uint8_t *ha = (uint8_t *)malloc((size_t)(M * K)), *hb = (uint8_t *)malloc((size_t)(N * K));
  float *hs = (float *)malloc(sizeof(float) * (size_t)(M > N ? M : N));
  if (!ha || !hb || !hs) {
    fprintf(stderr, "tp_interfere: out of host memory\n");
    return 1;
  }
  fill_q8(ha, (size_t)(M * K), 1);
  fill_q8(hb, (size_t)(N * K), 2);
  for (int64_t i = 0; i < (M > N ? M : N); i++) hs[i] = 1.0f / 64.0f + (float)(i % 7) / 1024.0f;
  void *da, *db, *dsa, *dsb, *dout, *dst0, *src0, *sml0;
  CK(cudaMalloc(&da, (size_t)(M * K)));
  CK(cudaMalloc(&db, (size_t)(N * K)));
  CK(cudaMalloc(&dsa, sizeof(float) * (size_t)M));
  CK(cudaMalloc(&dsb, sizeof(float) * (size_t)N));
  CK(cudaMalloc(&dout, 2 * (size_t)(M * N)));
  CK(cudaMalloc(&dst0, bytes));
  CK(cudaMalloc(&src0, bytes));
  CK(cudaMemset(src0, 2, bytes));
  CK(cudaMalloc(&sml0, 16384));
  CK(cudaMemcpy(da, ha, (size_t)(M * K), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(db, hb, (size_t)(N * K), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dsa, hs, sizeof(float) * (size_t)M, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dsb, hs, sizeof(float) * (size_t)N, cudaMemcpyHostToDevice));
  cudaStream_t s0, c0;
  CK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&c0, cudaStreamNonBlocking));
  w8a8_handle *h = NULL;
  if (w8a8_create(&h, W8A8_DEVICE_CUDA, 0) != W8A8_SUCCESS || w8a8_set_stream(h, s0) != W8A8_SUCCESS) {
    fprintf(stderr, "tp_interfere: %s\n", w8a8_last_error());
    return 1;
  }
  const w8a8_matrix A = w8a8_matrix_make(in, W8A8_ROW_MAJOR, M, K, K, da);
  const w8a8_matrix B = w8a8_matrix_make(in, W8A8_COL_MAJOR, K, N, K, db);
  const w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, dout);
  const w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, M, dsa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, N, dsb);

  cudaEvent_t e0, e1, c_start, c_end, p_start, p_end, s_end;
  CK(cudaEventCreate(&s_end));
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaEventCreate(&c_start));
  CK(cudaEventCreate(&c_end));
  CK(cudaSetDevice(1));
  CK(cudaEventCreate(&p_start));
  CK(cudaEventCreate(&p_end));
  CK(cudaSetDevice(0));

  const int nsamp = 2 * rounds;
  float *gemm_us = (float *)calloc((size_t)NMODES * nsamp, sizeof(float));
  float *copy_us = (float *)calloc((size_t)NMODES * nsamp, sizeof(float));
  float *copy1_us = (float *)calloc((size_t)NMODES * nsamp, sizeof(float));
  float *small_us = (float *)calloc((size_t)NMODES * nsamp, sizeof(float));
  if (!gemm_us || !copy_us || !copy1_us || !small_us) return 1;
  /* warm-up: the GEMM's plan and the copies' paths */
  for (int i = 0; i < 3; i++)
    if (w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O) != W8A8_SUCCESS) {
      fprintf(stderr, "tp_interfere: %s\n", w8a8_last_error());
      return 1;
    }
  CK(cudaMemcpyAsync(dst0, src1, bytes, cudaMemcpyDefault, c0));
  CK(cudaDeviceSynchronize());
  for (int r = 0; r < nsamp; r++) {
    for (int k = 0; k < NMODES; k++) {
      const int mode = r % 2 ? NMODES - 1 - k : k;
      /* the copies first (launched, not waited for), then the GEMM on s0 with its own events */
      const void *c0_src = NULL, *s1_src = NULL;
      void *c0_dst = NULL, *s1_dst = NULL;
      if (mode == PULL || mode == BOTHPULL) c0_src = src1, c0_dst = dst0;
      if (mode == LOCAL) c0_src = src0, c0_dst = dst0;
      if (mode == OUT || mode == BOTHPUSH) c0_src = src0, c0_dst = dst1;
      if (mode == PUSH || mode == BOTHPUSH) s1_src = src1, s1_dst = dst0;
      if (mode == BOTHPULL) s1_src = src0, s1_dst = dst1;
      if (c0_src) {
        CK(cudaEventRecord(c_start, c0));
        CK(cudaMemcpyAsync(c0_dst, c0_src, bytes, cudaMemcpyDefault, c0));
        CK(cudaEventRecord(c_end, c0));
      }
      if (s1_src) {
        CK(cudaSetDevice(1));
        CK(cudaEventRecord(p_start, s1));
        CK(cudaMemcpyAsync(s1_dst, s1_src, bytes, cudaMemcpyDefault, s1));
        CK(cudaEventRecord(p_end, s1));
        CK(cudaSetDevice(0));
      }
      CK(cudaEventRecord(e0, s0));
      if (small) { /* the fused op's peer-scale copy on the GEMM's stream */
        CK(cudaMemcpyAsync(sml0, src1, 16384, cudaMemcpyDefault, s0));
        CK(cudaEventRecord(s_end, s0));
      }
      if (w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O) != W8A8_SUCCESS) {
        fprintf(stderr, "tp_interfere: %s\n", w8a8_last_error());
        return 1;
      }
      CK(cudaEventRecord(e1, s0));
      CK(cudaDeviceSynchronize());
      CK(cudaSetDevice(1));
      CK(cudaDeviceSynchronize());
      CK(cudaSetDevice(0));
      float ms = 0.0f, cms = 0.0f, pms = 0.0f, sms = 0.0f;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (c0_src) CK(cudaEventElapsedTime(&cms, c_start, c_end));
      if (s1_src) CK(cudaEventElapsedTime(&pms, p_start, p_end));
      if (small) CK(cudaEventElapsedTime(&sms, e0, s_end));
      gemm_us[mode * nsamp + r] = 1000.0f * ms;
      copy_us[mode * nsamp + r] = 1000.0f * cms;
      copy1_us[mode * nsamp + r] = 1000.0f * pms;
      small_us[mode * nsamp + r] = 1000.0f * sms;
    }
  }
  struct cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("# tp_interfere on %s x2: the GEMM of 70b-qkv at TP = 2 (M = %lld, N = %lld, K = %lld, %s, bf16 out) on\n"
         "# GPU 0 while %zu MiB copies run; %d samples per mode, interleaved; median (min..max) us%s\n",
         prop.name, (long long)M, (long long)N, (long long)K, fp8 ? "fp8" : "int8", mib, nsamp,
         small ? "; -s: a 16 KB copy from GPU 1 on the GEMM's stream first (gemm_us includes it)" : "");
  printf("# mode      gemm_us (min..max)        copy_us: GPU 0's engine, GPU 1's%s\n", small ? "   small_us" : "");
  for (int mode = 0; mode < NMODES; mode++) {
    float *arrs[4] = {gemm_us, copy_us, copy1_us, small_us};
    for (int q = 0; q < 4; q++) qsort(arrs[q] + mode * nsamp, (size_t)nsamp, sizeof(float), cmp_float);
    const float *g = gemm_us + mode * nsamp, *c = copy_us + mode * nsamp, *c1 = copy1_us + mode * nsamp;
    printf("  %-8s %8.1f (%7.1f..%7.1f)   %8.1f %8.1f", k_names[mode], g[nsamp / 2], g[0], g[nsamp - 1], c[nsamp / 2],
           c1[nsamp / 2]);
    if (small) printf("   %8.1f", small_us[mode * nsamp + nsamp / 2]);
    printf("\n");
  }
  w8a8_destroy(h);
  return 0;
}
