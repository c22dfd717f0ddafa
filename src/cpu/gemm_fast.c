/* gemm_fast.c — the CPU fast path's dispatcher: workspace sizing, and the CPU-feature
 * check in front of the AVX2 driver (gemm_avx2.c). No vector code here: this file is
 * built for baseline x86-64 and calls the driver only on a CPU that can run it. */
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gemm_kernels.h"

/* Slots for every thread a call may use: the handle's thread count now, or the machine's
 * processors if that is more (w8a8_set_num_threads may raise it later; a call then uses
 * at most the slots that exist, see w8a8_cpu_gemm_fast). Untouched pages cost nothing. */
static int slot_count(const w8a8_handle *h) {
  int n = w8a8_cpu_threads(h);
#ifdef _OPENMP
  if (omp_get_num_procs() > n) n = omp_get_num_procs();
#endif
  if (n < 1) n = 1;
  if (n > W8A8_CPU_MAX_SLOTS) n = W8A8_CPU_MAX_SLOTS;
  return n;
}

size_t w8a8_cpu_workspace_bytes(const w8a8_handle *h) {
  return W8A8_CPU_A_BYTES + (size_t)slot_count(h) * W8A8_CPU_SLOT_BYTES;
}

static long amx_runs, amx_bf16_runs;
long w8a8_cpu_amx_runs(void) { return __atomic_load_n(&amx_runs, __ATOMIC_RELAXED); }
long w8a8_cpu_amx_bf16_runs(void) { return __atomic_load_n(&amx_bf16_runs, __ATOMIC_RELAXED); }

/* What every fast path needs of the handle. */
static w8a8_status fast_takes_handle(const w8a8_handle *h) {
  const w8a8_cpu_features *f = &h->cpu;
  if (!(f->avx2 && f->fma && f->f16c))
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_scaled_mm: the fast CPU kernels need AVX2, FMA and F16C");
  if (!h->cpu_ws || h->cpu_ws_bytes < W8A8_CPU_A_BYTES + W8A8_CPU_SLOT_BYTES)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_scaled_mm: the handle has no CPU workspace");
  return W8A8_SUCCESS;
}

w8a8_status w8a8_cpu_forced_check(const w8a8_handle *h, w8a8_dtype in_dtype, int64_t M, int64_t K, bool block) {
  if (h->kernel != W8A8_KERNEL_GENERIC || M <= 0) return W8A8_SUCCESS;
  W8A8_CHECK(fast_takes_handle(h));
  if (block) {
    if (K > w8a8_gemm_avx2_block_k_max())
      return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                      "w8a8_scaled_mm_blockwise: K = %lld is past the AVX2 kernel's %lld",
                      (long long)K, (long long)w8a8_gemm_avx2_block_k_max());
    return W8A8_SUCCESS;
  }
  /* The AVX2 driver is the last word of the fast paths (AMX and VNNI fall back to it): its refusal, asked of the
   * largest GEMM. (Where AMX would take the problem this refuses all the same: only K past ~1.4 M (fp8) or ~2.8 M
   * (int8) reaches it.) */
  const int64_t mc = w8a8_gemm_avx2_block_rows(in_dtype, K);
  if (mc < W8A8_CPU_MR && mc < M)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "w8a8_scaled_mm: K = %lld is too large for the AVX2 kernel's workspace",
                    (long long)K);
  return W8A8_SUCCESS;
}

w8a8_status w8a8_cpu_gemm_fast(w8a8_handle *h, const w8a8_mm_problem *p) {
  const w8a8_cpu_features *f = &h->cpu;
  W8A8_CHECK(fast_takes_handle(h));
  w8a8_gemm_ws ws;
  ws.a = (char *)h->cpu_ws;
  ws.slots = ws.a + W8A8_CPU_A_BYTES;
  ws.nslots = (int)((h->cpu_ws_bytes - W8A8_CPU_A_BYTES) / W8A8_CPU_SLOT_BYTES);
  int threads = w8a8_cpu_threads(h);
  if (threads > ws.nslots) threads = ws.nslots;
  /* AMX CPUs (Sapphire Rapids on): int8 with tdpbssd (exact s8 x s8), fp8 decoded to bf16 for
   * tdpbf16ps (fp32 accumulation like the FMA paths) where AMX-BF16 is there too;
   * W8A8_CPU_DISABLE=amx (or avx512) turns both off. Below W8A8_CPU_AMX_MMIN (int8 M = 1, 2) the
   * raw decode path is as fast or faster (measured: docs/CPU.md). */
  const bool int8 = p->in_dtype == W8A8_DTYPE_INT8;
  /* (block scales: the AVX2 driver alone, whose sums are the reference's; AMX's dot products are not) */
  if (f->amx && !p->block_scaled && (int8 ? p->M >= W8A8_CPU_AMX_MMIN : f->amx_bf16 && p->M >= W8A8_CPU_AMXBF16_MMIN) &&
      w8a8_gemm_amx(p, &ws, threads) == W8A8_SUCCESS) {
    __atomic_fetch_add(int8 ? &amx_runs : &amx_bf16_runs, 1, __ATOMIC_RELAXED);
    w8a8_note_launch(h, "cpu-amx", "", 1, p->M, p->N, p->K);
    return W8A8_SUCCESS;
  }
  /* int8 on AVX-512 VNNI CPUs (not CI's): vpdpbusd, 4x the products per instruction of the
   * AVX2 kernel; W8A8_CPU_DISABLE=avx512 turns it off. It declines K % 4 != 0. */
  if (f->avx512f && f->avx512bw && f->avx512vnni && p->in_dtype == W8A8_DTYPE_INT8 &&
      p->M >= W8A8_CPU_VNNI_MMIN && w8a8_gemm_avx512vnni(p, &ws, threads) == W8A8_SUCCESS) {
    w8a8_note_launch(h, "cpu-avx512vnni", "", 1, p->M, p->N, p->K);
    return W8A8_SUCCESS;
  }
  const w8a8_status s = w8a8_gemm_avx2(p, &ws, threads, f->avx512f);
  if (s == W8A8_SUCCESS) w8a8_note_launch(h, "cpu-avx2", "", 1, p->M, p->N, p->K);
  return s;
}
