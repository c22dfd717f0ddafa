/* cpu.c — CPU backend: feature detection, handle workspace, dispatch between the
 * fast kernels and the scalar reference. */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../core/knobs.h"
#include "../core/internal.h"
#include "cpu_kernels.h"

#if defined(__x86_64__) && defined(__linux__)
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

/* AMX is usable when the CPU has the tile and int8 instructions (CPUID.(7,0):EDX bits 24, 25),
 * the OS saves the tile state (XCR0 bits 17 XTILECFG and 18 XTILEDATA, read with xgetbv once
 * CPUID.1:ECX.OSXSAVE says it may be), and Linux (5.16 on) granted this process the large
 * XTILEDATA state: without ARCH_REQ_XCOMP_PERM the first tile instruction raises SIGILL. The
 * permission is per process and asked for once. */
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static bool amx_ok, amx_bf16_ok;
static void amx_probe(void) {
  unsigned a, b, c, d;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0), "c"(0));
  if (a < 7) return;
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
  if (!((c >> 27) & 1u)) return; /* no OSXSAVE: xgetbv would fault */
  __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  if (!((d >> 24) & 1u) || !((d >> 25) & 1u)) return;
  const bool bf16 = (d >> 22) & 1u; /* AMX-BF16 */
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & (3u << 17)) != (3u << 17)) return;
  /* ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 */
  if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) return;
  amx_ok = true;
  amx_bf16_ok = bf16;
}
static bool amx_usable(bool *bf16) {
  const bool ok = pthread_once(&amx_once, amx_probe) == 0 && amx_ok;
  *bf16 = ok && amx_bf16_ok;
  return ok;
}
#else
static bool amx_usable(bool *bf16) {
  *bf16 = false;
  return false;
}
#endif

void w8a8_cpu_detect(w8a8_cpu_features *f) {
  memset(f, 0, sizeof *f);
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  f->avx2 = __builtin_cpu_supports("avx2");
  f->fma = __builtin_cpu_supports("fma");
  f->avx512f = __builtin_cpu_supports("avx512f");
  f->avx512bw = __builtin_cpu_supports("avx512bw");
  f->avx512vnni = __builtin_cpu_supports("avx512vnni");
  /* f16c has no __builtin_cpu_supports name in older compilers: CPUID.1:ECX bit 29. */
  {
    unsigned a, b, c, d;
    __asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
    f->f16c = (c >> 29) & 1u;
  }
  /* W8A8_CPU_DISABLE=avx2 forces the scalar path (tests use it to cover the fallback);
   * =avx512 the AVX2 kernels (CI's ISA: AMX goes too, it needs AVX-512 around it); =amx
   * only the AMX path (the VNNI kernel then runs as on a Cascade Lake). The permission is
   * asked for only when AMX may be used. */
  const char *dis = w8a8_knob_str(W8A8_KNOB_CPU_DISABLE);
  if (dis && strstr(dis, "avx2")) f->avx2 = f->fma = false;
  if (dis && strstr(dis, "avx512")) f->avx512f = f->avx512bw = f->avx512vnni = false;
  bool bf16 = false;
  f->amx = f->avx512f && f->avx512bw && !(dis && strstr(dis, "amx")) && amx_usable(&bf16);
  f->amx_bf16 = f->amx && bf16;
#endif
}

int w8a8_cpu_threads(const w8a8_handle *h) {
#ifdef _OPENMP
  return h->num_threads > 0 ? h->num_threads : omp_get_max_threads();
#else
  (void)h;
  return 1;
#endif
}

w8a8_status w8a8_cpu_handle_init(w8a8_handle *h) {
  size_t bytes = w8a8_cpu_workspace_bytes(h);
  if (bytes) {
    /* 64-byte aligned for vector loads; freed in w8a8_cpu_handle_fini. */
    h->cpu_ws = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!h->cpu_ws) return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "w8a8_create: could not allocate %zu bytes of CPU workspace", bytes);
    h->cpu_ws_bytes = bytes;
  }
  return W8A8_SUCCESS;
}

void w8a8_cpu_handle_fini(w8a8_handle *h) {
  free(h->cpu_ws);
  h->cpu_ws = NULL;
  h->cpu_ws_bytes = 0;
}

w8a8_status w8a8_cpu_scaled_mm(w8a8_handle *h, const w8a8_mm_problem *p) {
  if (h->kernel != W8A8_KERNEL_REFERENCE) { /* (block scales too: the AVX2 driver gives the reference's bits) */
    w8a8_status s = w8a8_cpu_gemm_fast(h, p);
    if (s != W8A8_ERROR_UNSUPPORTED_DEVICE || h->kernel == W8A8_KERNEL_GENERIC) return s;
  }
  w8a8_clear_error(); /* the fast path's "cannot take this" is not the caller's error */
  w8a8_ref_scaled_mm(p);
  w8a8_note_launch(h, "cpu-reference", "", 1, p->M, p->N, p->K);
  return W8A8_SUCCESS;
}

w8a8_status w8a8_cpu_quantize(w8a8_handle *h, const w8a8_quant_problem *p) {
  if (p->groups != W8A8_GROUPS_NONE) {
    w8a8_ref_quantize_groups(p, NULL);
    return W8A8_SUCCESS;
  }
  if (h->kernel != W8A8_KERNEL_REFERENCE) {
    w8a8_status s = w8a8_cpu_quantize_fast(h, p);
    if (s != W8A8_ERROR_UNSUPPORTED_DEVICE || h->kernel == W8A8_KERNEL_GENERIC) return s;
  }
  w8a8_clear_error();
  w8a8_ref_quantize(p);
  return W8A8_SUCCESS;
}

w8a8_status w8a8_cpu_colsum(w8a8_handle *h, const w8a8_colsum_problem *p) {
  (void)h;
  w8a8_ref_colsum(p);
  return W8A8_SUCCESS;
}
