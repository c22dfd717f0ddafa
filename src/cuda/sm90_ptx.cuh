// sm90_ptx.cuh — the Hopper instructions the sm_90a GEMM needs, as small inline-PTX wrappers:
// mbarriers, TMA bulk tensor loads, wgmma fences and shared-memory descriptors, setmaxnreg and
// the cluster barrier / distributed shared memory used by the split-K reduction.
//
// Everything here compiles only for sm_90a (wgmma, setmaxnreg); callers guard with
// SM90_ENABLED so that the sm_80/sm_89 passes of the fatbin see an empty kernel body.
#pragma once
#include <stdint.h>

#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SM90_ENABLED 1
#else
#define SM90_ENABLED 0
#endif

#define SM90_DEV static __device__ __forceinline__

SM90_DEV uint32_t sm90_smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// Acquire load of a flag in global memory (device scope).
SM90_DEV uint32_t sm90_ld_acquire_u32(const unsigned int *p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// The same at system scope: for flags that another GPU's stream writes into this GPU's memory (the
// all-gather's ready flags: a peer's cuStreamWriteValue32 after its copy engine pushed the rows, or
// this GPU's own side stream after a pull). A write by another device is outside .gpu scope.
SM90_DEV uint32_t sm90_ld_acquire_sys_u32(const unsigned int *p) {
  uint32_t v;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
// Programmatic dependent launch (the kernel is launched with
// cudaLaunchAttributeProgrammaticStreamSerialization): wait until the grids this one depends on have
// completed and their writes are visible; let the grids that depend on this one start launching.
SM90_DEV void sm90_grid_dep_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
SM90_DEV void sm90_grid_dep_launch(void) { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

// ---- mbarrier ---------------------------------------------------------------------------------
SM90_DEV void sm90_mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Make the initialised barriers visible to the async proxy (TMA) and to the rest of the cluster.
SM90_DEV void sm90_fence_mbar_init(void) { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
// Arrive and announce `bytes` of TMA traffic that will complete on this barrier.
SM90_DEV void sm90_mbar_arrive_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Arrive on a barrier of another CTA of the cluster (address from sm90_mapa). Default semantics
// (.release at .cta scope), as CUTLASS's ClusterBarrier::arrive(cta_id): what it orders is this
// warpgroup's wgmma reads of the stage, already complete (wait_group) before the arrive, against
// the partner producer's next TMA write into it. Do not write .release.cluster: ptxas turns it into
// MEMBAR.ALL.GPU + ERRBAR + CGAERRBAR, a GPU-scope fence per K-block and consumer warpgroup that ran
// the *_mc2 configs at half speed (h200-sm90-ncu-mc2-2026-11-29.txt).
SM90_DEV void sm90_mbar_arrive_cluster(uint32_t remote_bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
}
SM90_DEV void sm90_mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Wait until the phase with parity `parity` has completed. A freshly initialised barrier counts
// its (virtual) previous phase, parity 1, as completed: producers start waiting on parity 1.
SM90_DEV void sm90_mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// ---- TMA ----------------------------------------------------------------------------------------
SM90_DEV void sm90_prefetch_tmap(const void *tmap) {
  asm volatile("prefetch.tensormap [%0];" ::"l"((uint64_t)tmap) : "memory");
}
// 2-D tile load: box at (c0 = inner/contiguous coordinate, c1 = row) into shared memory `dst`,
// completing `bytes` on mbarrier `bar`. Out-of-bounds parts of the box are filled with zeros,
// which is how M, N and K tails are handled (zeros add nothing to the dot products).
SM90_DEV void sm90_tma_load_2d(uint32_t dst, const void *tmap, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          dst),
      "l"((uint64_t)tmap), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// 3-D tile load (the token tail's fold, sm90_tail_fold): box at (c0, c1, c2), the innermost first.
SM90_DEV void sm90_tma_load_3d(uint32_t dst, const void *tmap, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(
          dst),
      "l"((uint64_t)tmap), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// 2-D tile store (the staged epilogue): the box at shared-memory `src` to (c0 = inner coordinate,
// c1 = row) of the tensor; parts of the box outside the tensor are not written (M and N tails).
// Asynchronous: one bulk group per commit; wait_read<N> returns once at most N of this thread's
// groups still read shared memory (the buffer may then be reused), wait<N> once they are complete.
SM90_DEV void sm90_tma_store_2d(const void *tmap, uint32_t src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"((uint64_t)tmap),
               "r"(src), "r"(c0), "r"(c1)
               : "memory");
}
SM90_DEV void sm90_bulk_commit(void) { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N>
SM90_DEV void sm90_bulk_wait_read(void) {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
template <int N>
SM90_DEV void sm90_bulk_wait(void) {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}
// Make this thread's shared-memory writes visible to the async proxy (TMA) before a barrier.
SM90_DEV void sm90_fence_proxy_async_smem(void) { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// ---- wgmma -------------------------------------------------------------------------------------
SM90_DEV void sm90_wgmma_fence(void) { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
SM90_DEV void sm90_wgmma_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
SM90_DEV void sm90_wgmma_wait(void) {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Pin an accumulator register in place: the compiler may not move its reads or writes across
// this point (wgmma writes the registers asynchronously, behind the compiler's back).
SM90_DEV void sm90_fence_reg(float &r) { asm volatile("" : "+f"(r)::"memory"); }
SM90_DEV void sm90_fence_reg(int32_t &r) { asm volatile("" : "+r"(r)::"memory"); }

// Shared-memory matrix descriptor of a K-major tile written by TMA with 128-byte swizzle:
// rows of 128 bytes, 8-row groups 1024 bytes apart (stride byte offset), tile base 1024-aligned.
// The leading byte offset is unused for swizzled K-major layouts. Advancing along K inside the
// 128-byte row is done by adding k_bytes >> 4 to the start address field.
SM90_DEV uint64_t sm90_desc_k128(uint32_t smem_addr) {
  uint64_t d = 0;
  d |= (uint64_t)((smem_addr & 0x3ffff) >> 4);
  d |= (uint64_t)1 << 16;            // leading byte offset (unused)
  d |= (uint64_t)(1024 >> 4) << 32;  // stride byte offset: 8 rows x 128 B
  d |= (uint64_t)1 << 62;            // swizzle mode: 128 B
  return d;
}

// ---- register reallocation between warpgroups --------------------------------------------------
template <int R>
SM90_DEV void sm90_setmaxnreg_dec(void) {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}
template <int R>
SM90_DEV void sm90_setmaxnreg_inc(void) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}

SM90_DEV void sm90_st_smem(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
SM90_DEV void sm90_st_smem_v2f32(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(addr), "f"(x), "f"(y) : "memory");
}
// The same, multicast: the box lands at offset `dst` of every CTA in `mask` (cluster ranks), each
// completing its bytes on the mbarrier at offset `bar` of that CTA.
SM90_DEV void sm90_tma_load_2d_mc(uint32_t dst, const void *tmap, uint32_t bar, int c0, int c1, uint16_t mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, "
      "%4}], [%2], %5;" ::"r"(dst),
      "l"((uint64_t)tmap), "r"(bar), "r"(c0), "r"(c1), "h"(mask)
      : "memory");
}
// Shared-memory loads for the epilogue's scale slot: volatile (kept after the slot's mbarrier wait,
// an asm volatile too) but without a memory clobber, so the surrounding arithmetic can move.
SM90_DEV float sm90_ld_smem_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(addr));
  return v;
}
SM90_DEV void sm90_ld_smem_v2f32(uint32_t addr, float &x, float &y) {
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(x), "=f"(y) : "r"(addr));
}
// Four consecutive words (addr 16-byte aligned), as sm90_ld_smem_f32: volatile, no memory clobber.
SM90_DEV uint4 sm90_ld_smem_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}
SM90_DEV uint32_t sm90_ld_smem(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

// Named barrier among `nthreads` threads (id 0 is __syncthreads).
SM90_DEV void sm90_named_bar(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(nthreads) : "memory");
}

// ---- clusters (split-K reduction through distributed shared memory) ----------------------------
SM90_DEV uint32_t sm90_cluster_rank(void) {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// The two halves of sm90_cluster_sync, for work between them (its latency under the wait). The release
// arrive orders this thread's earlier memory accesses before it for the cluster: it waits for its
// outstanding loads and stores, global ones included, so work meant to overlap the wait goes after it.
SM90_DEV void sm90_cluster_arrive(void) { asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory"); }
SM90_DEV void sm90_cluster_wait(void) { asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory"); }
SM90_DEV void sm90_cluster_sync(void) {
  sm90_cluster_arrive();
  sm90_cluster_wait();
}
// Address of the same shared-memory location in CTA `rank` of the cluster.
SM90_DEV uint32_t sm90_mapa(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
SM90_DEV float sm90_ld_dsmem_f32(uint32_t addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}
SM90_DEV uint32_t sm90_ld_dsmem_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared::cluster.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
// Four consecutive 32-bit words (addr 16-byte aligned) of a cluster CTA's shared memory: one DSMEM
// round trip for four elements (the split-K reduction's quads).
SM90_DEV uint4 sm90_ld_dsmem_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared::cluster.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
SM90_DEV int32_t sm90_ld_dsmem_s32(uint32_t addr) {
  int32_t v;
  asm volatile("ld.shared::cluster.s32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
