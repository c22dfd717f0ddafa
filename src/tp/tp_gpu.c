/* tp_gpu.c — w8a8_all_gather_scaled_mm and w8a8_scaled_mm_reduce_scatter on GPU communicators.
 *
 * Streams: S = the handle's stream (the caller's: GEMMs, the pack, the reduction), C = the
 * communicator's side stream (copies, or NCCL send/recv). C forks from S with an event at the
 * start of the work and S joins C before the end, so the caller's stream covers the whole call
 * and a capture of S captures everything (C joins the capture through the fork event).
 * Within a rank, each chunk's GEMM waits on an event recorded after its copy (ev_step): the
 * copy engine and the GEMM overlap, and no stream-memory operation (cuStreamWaitValue) is used
 * (on the H200, a cuStreamWaitValue enqueued before its write on another stream hung the host).
 *
 * GROUP transport (ranks are threads of this process; one GPU or several):
 *   entry: S waits on every peer's ev_done of the previous call. After it, every peer has
 *          finished everything it did with this rank's buffers, so this call may overwrite
 *          them: that, not a second buffer, is what keeps back-to-back calls from racing,
 *          and it also holds when a captured graph is replayed (fixed buffers, fixed events).
 *   AG:    pack own rows (strided a -> dense gathered rows) and one scale / zero point per row on S:
 *          one tp_pack kernel, which also resets the one-GEMM ready flags, where a, lda
 *          and K are 16-byte multiples; else cudaMemcpy2DAsync + tp_expand + the flags' memsets;
 *          record ev_ready; host barrier (every rank's
 *          ev_ready is recorded before anyone waits on it); S runs the own rows' GEMM at once
 *          while C, for s = 1..W-1, waits on peer j = (r - s) mod W's ev_ready and pulls its
 *          rows, scales and zero points from j's buffer into the same rows of its own
 *          (cudaMemcpyAsync: copy engine; with the scale push, the default for eager in-process groups and
 *          for captured ones too with W8A8_TP_AG_SCALES=2, the scales and zero points are already there,
 *          written by j's pack), then records ev_step[s]; S waits ev_step[s] and runs
 *          chunk j's GEMM. Unfused: every pull first, then the same chunk GEMMs.
 *          One GEMM (sm_90a, GROUP and IPC, W <= 8): instead of a launch per chunk, ONE
 *          persistent launch over all M rows whose producer waits, per tile, for the ready flags of
 *          the chunks it reads (sm90_wait_rows), with the tile order rotated to start at the own
 *          rows; C pulls the peers' rows in the order the tiles meet them and writes each chunk's
 *          flag with cuStreamWriteValue32. The unfused call runs the same single GEMM after the
 *          gather, so both equal w8a8_scaled_mm on the gathered rows bit for bit (see ag_one_gemm
 *          and the deadlock rules before the launch).
 *   RS:    for s = 1..W-1 S computes the fp32 partial (no bias) of peer j = (r + s) mod W's rows
 *          (in pieces of >= 256 or 1024 rows, rs_pieces) and records ev_step[s] after each piece; C
 *          waits and pushes the piece into j's receive slot for this rank;
 *          own rows last, in one launch (rs_own_pieces); C records ev_ready; host barrier; S waits on every rank's ev_ready
 *          and sums in rank order (tp_reduce). Unfused: all GEMMs, then all pushes.
 *          W8A8_TP_PARTIALS_OUT with a bf16/fp16 out: the partial GEMMs write out's dtype (their
 *          epilogue without bias is sb*(sa*v) rounded once: p_j rounded to 16 bits, exactly the
 *          header's q_j), every push and NCCL message moves half the bytes, and tp_reduce widens
 *          each 16-bit partial to fp32 before the same ordered sum. The workspace layout is the
 *          same with 2-byte elements (so the fp32 sizing of w8a8_comm_reserve covers it).
 *   end:   S records ev_done.
 * NCCL transport (ranks in several processes): the same chunks; step s is one NCCL group of
 *   send to (r + s) and receive from (r - s) on C, then ev_step[s]. NCCL orders the ranks.
 * IPC transport (ranks in several processes of one host, peer access, W8A8_TP_IPC=1): eager calls
 *   run the GROUP schedule, the same copies in the same order (not the scale push: GROUP only), with
 *   the peers' workspaces opened through CUDA IPC (peer_ws), the peers' ev_ready / ev_done replaced
 *   by interprocess events (ipc_ready / ipc_done, opened by every peer at creation as peer_ready /
 *   peer_done), and an MPI_Iallreduce (w8a8_tp_ipc_barrier) where GROUP has its host barrier. The agreement
 *   (an MPI_Iallgather) plays the role of GROUP's agreement barrier. Why the events bind right:
 *   cudaStreamWaitEvent binds to the event's latest record when it is called; every record a
 *   peer waits on (ipc_ready of this call, ipc_done of the previous one) is made before that
 *   rank enters a host collective the waiter leaves before it waits, and the next record of the
 *   same event comes only after the recorder has passed the next collective, which the waiter
 *   enters only after it has enqueued its waits. Captured calls: a graph replay cannot hold the
 *   host collective between a record in one process and a wait in another (replays of the
 *   ranks' graphs are launched independently, so a wait node could bind to the previous
 *   replay's record), so a captured call runs the NCCL schedule, on a second workspace
 *   (ws_cap) that no peer maps: an eager IPC call's peers never touch the buffers a replay uses,
 *   and the entry waits of eager calls (on ipc_done, recorded by eager calls only) keep
 *   covering every peer access to ws. Every rank captures or none (agreed).
 *
 * Fused and unfused run the GEMM on the same sub-problems (AG: one per source rank, or the one
 * launch over every row; RS: the same pieces of each destination's rows), so their results are
 * identical bit for bit even where a GEMM's summation order depends on M.
 * A schedule that fails after the fork still joins C into S (clean_up_after_error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/knobs.h"
#include "tp_internal.h"

#ifdef W8A8_HAVE_CUDA
#include <cuda.h>

#include "../cuda/cuda_backend.h"
#include "tp_gpu.h"
#ifdef W8A8_HAVE_NCCL
#include <nccl.h>
#endif

#define LL(x) ((long long)(x))

/* Gathered-buffer layout of the all-gather (the same on every rank: M and K are agreed). */
typedef struct ag_bufs {
  uint8_t *a;   /* [M, K] */
  float *scale; /* [M, S] */
  int32_t *azp; /* [M] */
  int64_t S;    /* scales per row: 1, or the block-scaled call's ceil(K/128) group scales */
} ag_bufs;

static int64_t ag_srow(const w8a8_tp_problem *p) { return p->block ? (p->K + W8A8_BLOCK - 1) / W8A8_BLOCK : 1; }
static ag_bufs ag_layout(void *ws, int64_t M, int64_t K, int64_t S) {
  ag_bufs g;
  size_t a_bytes = ((size_t)M * (size_t)K + 255) & ~(size_t)255;
  g.a = (uint8_t *)ws;
  g.scale = (float *)(g.a + a_bytes);
  g.azp = (int32_t *)(g.scale + M * S);
  g.S = S;
  return g;
}

/* Reduce-scatter layout: partials [M, N] of this rank, then W-1 receive slots of [M_r, N], all of
 * es-byte elements (4: fp32 partials; 2: W8A8_TP_PARTIALS_OUT with a 16-bit out). Byte pointers:
 * every offset below is an element count times es. */
static char *rs_part(void *ws) { return (char *)ws; }
static char *rs_recv(void *ws, int64_t M, int64_t N, size_t es) { return (char *)ws + (size_t)M * (size_t)N * es; }
static int rs_slot(int j, int rank) { return j < rank ? j : j - 1; }

#define CU(call, what)                                                \
  do {                                                                \
    cudaError_t e_ = (call);                                          \
    if (e_ != cudaSuccess) return w8a8_cuda_error(fn, what, e_);      \
  } while (0)

/* ---- local checks particular to GPU ranks --------------------------------------------------- */

static w8a8_status check_ptr(const w8a8_handle *h, const char *fn, const char *arg, const void *p, bool nonempty) {
  if (!p || !nonempty) return W8A8_SUCCESS;
  return w8a8_cuda_check_pointer(h, fn, arg, p);
}

static w8a8_status gpu_local_checks(const char *fn, const w8a8_comm *c, const w8a8_tp_problem *p) {
  const w8a8_tp_gpu *gs = c->gpu;
  const w8a8_handle *h = c->handle;
  if (h->kind != W8A8_DEVICE_CUDA || h->device_index != gs->device)
    return w8a8_err(W8A8_ERROR_INTERNAL, "%s: the communicator's handle is not on its GPU", fn);
  if (p->in_dtype == W8A8_DTYPE_FP8_E4M3 && gs->cc < 89)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: fp8 e4m3 needs compute capability 8.9 or newer; GPU %d is %d.%d",
                    fn, gs->device, gs->cc / 10, gs->cc % 10);
  const bool ag = p->op == TP_OP_AG;
  const int64_t Ma = ag ? p->M_local : p->M_total, Mo = ag ? p->M_total : p->M_local;
  W8A8_CHECK(check_ptr(h, fn, "a->data", p->a, Ma > 0 && p->K > 0));
  W8A8_CHECK(check_ptr(h, fn, "b->data", p->b, p->N > 0 && p->K > 0));
  W8A8_CHECK(check_ptr(h, fn, "out->data", p->out, Mo > 0 && p->N > 0));
  W8A8_CHECK(check_ptr(h, fn, "scale_a->data", p->scale_a, Ma > 0));
  W8A8_CHECK(check_ptr(h, fn, "scale_b->data", p->scale_b, p->N > 0));
  W8A8_CHECK(check_ptr(h, fn, "bias->data", p->bias, p->N > 0));
  W8A8_CHECK(check_ptr(h, fn, "zp->azp.data", p->azp, Ma > 0));
  W8A8_CHECK(check_ptr(h, fn, "zp->azp_adj.data", p->azp_adj, p->N > 0));
  W8A8_CHECK(check_ptr(h, fn, "gathered->a.data", p->g_a, p->M_total > 0 && p->K > 0));
  W8A8_CHECK(check_ptr(h, fn, "gathered->scale_a.data", p->g_scale, p->M_total > 0));
  W8A8_CHECK(check_ptr(h, fn, "gathered->azp.data", p->g_azp, p->M_total > 0));
  return W8A8_SUCCESS;
}

static void chunk_problem(const w8a8_tp_problem *p, const ag_bufs *g, char *part, int64_t r0, int64_t n,
                          w8a8_mm_problem *out);

/* A handle that forces W8A8_KERNEL_SM90 refuses what that kernel cannot take, and must do so here,
 * before the agreement: refused in the schedule, after the peers had committed to the call, the NCCL
 * transport's sends and receives would never be matched. Every GEMM of a call
 * (each chunk, the one-GEMM launch, the pieces) has the whole problem's operands at row offsets,
 * with its strides and alignment, so asking about the whole problem answers for all of them. */
static w8a8_status forced_kernel_checks(const char *fn, const w8a8_comm *c, const w8a8_tp_problem *p) {
  const w8a8_tp_gpu *gs = c->gpu;
  /* (K == 0 still launches the chunk GEMMs, which the forced sm_90a kernel refuses: asked too) */
  if (c->handle->kernel == W8A8_KERNEL_AUTO || p->M_total <= 0 || p->N <= 0) return W8A8_SUCCESS;
  w8a8_mm_problem q;
  ag_bufs g;
  if (p->op == TP_OP_AG) {
    g = ag_layout(gs->ws, p->M_total, p->K, ag_srow(p));
    chunk_problem(p, &g, NULL, 0, p->M_total, &q);
  } else {
    chunk_problem(p, NULL, rs_part(gs->ws), 0, p->M_total, &q);
  }
  return w8a8_tp_forced_refusal(fn, w8a8_cuda_forced_check(c->handle, &q));
}

/* Capture id of the handle's stream (0 = not capturing). */
static w8a8_status capture_of(const char *fn, cudaStream_t s, unsigned long long *id) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  *id = 0;
  cudaError_t e = cudaStreamGetCaptureInfo(s, &cs, id, NULL, NULL, NULL, NULL);
  if (e != cudaSuccess) return w8a8_cuda_error(fn, "cudaStreamGetCaptureInfo", e);
  if (cs == cudaStreamCaptureStatusInvalidated)
    return w8a8_err(W8A8_ERROR_DEVICE, "%s: the stream's capture has been invalidated", fn);
  if (cs != cudaStreamCaptureStatusActive) *id = 0;
  return W8A8_SUCCESS;
}

/* Local checks, signature, agreement: the common front of both operations. */
static w8a8_status front(const char *fn, w8a8_comm *c, int op, const w8a8_tp_args *x, w8a8_tp_problem *p,
                         unsigned long long *capture) {
  memset(p, 0, sizeof *p);
  *capture = 0;
  /* numbered, with its deadline; a broken or aborted communicator returns here (tp_fault.c) */
  W8A8_CHECK(w8a8_tp_call_enter(fn, c));
  w8a8_status s = x->block ? w8a8_tp_local_checks_blockwise(fn, c, op, x->a, x->b, x->block_a, x->block_b, x->bias,
                                                            x->out, x->opts, p)
                           : w8a8_tp_local_checks(fn, c, op, x->a, x->b, x->scale_a, x->scale_b, x->bias, x->zp,
                                                  x->out, x->gathered, x->opts, p);
  if (s == W8A8_SUCCESS) s = gpu_local_checks(fn, c, p);
  if (s == W8A8_SUCCESS) s = forced_kernel_checks(fn, c, p);
  if (s == W8A8_SUCCESS) s = capture_of(fn, (cudaStream_t)c->handle->stream, capture);
  int64_t sig[TP_SIG_COUNT];
  w8a8_tp_signature(c, p, op, s, sig);
  W8A8_CHECK(w8a8_tp_gpu_agree(fn, c, sig, *capture));
  w8a8_tp_test_after_agree(c);
  p->overlap = c->agreed_fuse; /* W8A8_TP_OVERLAP_AUTO resolved, the same on every rank */
  c->last_fuse = p->overlap;
  return W8A8_SUCCESS;
}

/* One chunk's GEMM: rows [r0, r0 + n) of the gathered rows (AG) into out, or of this rank's
 * rows of a into partials without bias (RS: fp32, or out's dtype with W8A8_TP_PARTIALS_OUT; the
 * epilogue's single rounding of sb*(sa*v) to 16 bits is then the header's q_j). Runs on the
 * handle's stream. */
static void chunk_problem(const w8a8_tp_problem *p, const ag_bufs *g, char *part, int64_t r0, int64_t n,
                          w8a8_mm_problem *out) {
  w8a8_mm_problem q;
  memset(&q, 0, sizeof q);
  q.M = n;
  q.N = p->N;
  q.K = p->K;
  q.in_dtype = p->in_dtype;
  q.b = p->b;
  q.ldb = p->ldb;
  q.scale_b = p->scale_b;
  q.scale_b_per_channel = p->scale_b_per_channel;
  q.azp_adj = p->azp_adj;
  if (p->block) { /* block scales: B's from the caller, A's rows of group scales (gathered, or the caller's) */
    q.block_scaled = true;
    q.sb_rs = p->sb_rs, q.sb_cs = p->sb_cs;
    q.sa_rs = g ? g->S : p->sa_rs, q.sa_cs = g ? 1 : p->sa_cs;
  }
  if (g) { /* AG: per-row scales and zero points from the gathered buffer */
    q.out_dtype = p->out_dtype;
    q.a = g->a + r0 * p->K;
    q.lda = p->K > 0 ? p->K : 1;
    q.out = (char *)p->out + (size_t)r0 * (size_t)p->ldo * w8a8_dtype_size(p->out_dtype);
    q.ldo = p->ldo;
    q.scale_a = g->scale + r0 * g->S;
    q.scale_a_per_token = !p->block;
    q.bias = p->bias;
    if (p->zp_kind == 2) {
      q.azp_mode = W8A8_AZP_PER_TOKEN;
      q.azp = g->azp + r0;
    } else {
      q.azp_mode = p->zp_kind == 1 ? W8A8_AZP_ADJ_ONLY : W8A8_AZP_NONE;
    }
  } else { /* RS: this rank's own scales; bias after the sum */
    q.out_dtype = w8a8_tp_partial_dtype(p);
    q.a = (const uint8_t *)p->a + r0 * p->lda;
    q.lda = p->lda;
    q.out = part + (size_t)(r0 * p->N) * w8a8_dtype_size(q.out_dtype);
    q.ldo = p->N;
    q.scale_a = p->scale_a + (p->block ? r0 * p->sa_rs : p->scale_a_per_token ? r0 : 0);
    q.scale_a_per_token = p->scale_a_per_token;
    q.bias = NULL;
    q.azp_mode = p->azp_mode;
    q.azp = p->azp_mode == W8A8_AZP_PER_TOKEN ? p->azp + r0 : p->azp;
  }
  *out = q;
}
/* Every GEMM of a schedule goes through here (tests: TP_FAULT_GEMM makes the first one fail, after the fork). */
static w8a8_status run_gemm(w8a8_comm *c, const w8a8_mm_problem *q) {
  if (c->fault_inject == TP_FAULT_GEMM) {
    c->fault_inject = TP_FAULT_NONE;
    return w8a8_err(W8A8_ERROR_DEVICE, "w8a8_cuda_scaled_mm: an injected failure (w8a8_tp_test_inject_fault)");
  }
  return q->block_scaled ? w8a8_cuda_scaled_mm_blockwise(c->handle, q) : w8a8_cuda_scaled_mm(c->handle, q);
}

static w8a8_status chunk_gemm(w8a8_comm *c, const w8a8_tp_problem *p, const ag_bufs *g, char *part, int64_t r0,
                              int64_t n) {
  if (n <= 0 || p->N <= 0) return W8A8_SUCCESS;
  w8a8_mm_problem q;
  chunk_problem(p, g, part, r0, n, &q);
  return run_gemm(c, &q);
}

/* Make the handle's device current for the schedule. */
typedef struct dev_guard {
  int prev;
} dev_guard;
static w8a8_status enter(const char *fn, int dev, dev_guard *g) {
  g->prev = -1;
  CU(cudaGetDevice(&g->prev), "cudaGetDevice");
  if (g->prev != dev) CU(cudaSetDevice(dev), "cudaSetDevice");
  cudaGetLastError();
  return W8A8_SUCCESS;
}
static void leave(const dev_guard *g, int dev) {
  if (g->prev >= 0 && g->prev != dev) cudaSetDevice(g->prev);
}

static w8a8_tp_gpu *peer(const w8a8_comm *c, int j) {
  return ((w8a8_tp_gpu *)c->gpu)->group->comm[j]->gpu;
}

/* The schedule of one call: peers' buffers as pointers of this process (GROUP) or opened through
 * CUDA IPC (IPC, eager calls only), or NCCL send/recv (NCCL, and captured calls of IPC
 * communicators). */
typedef enum { XP_GROUP, XP_IPC, XP_NCCL } xport;
static xport transport_of(const w8a8_tp_gpu *gs, unsigned long long capture) {
  if (gs->mode == TP_GPU_GROUP) return XP_GROUP;
  return gs->mode == TP_GPU_IPC && !capture ? XP_IPC : XP_NCCL;
}
/* This call's workspace: ws, except captured calls of IPC communicators (ws_cap, see the top). */
static void *call_ws(const w8a8_tp_gpu *gs, xport xp) {
  return gs->mode == TP_GPU_IPC && xp == XP_NCCL ? gs->ws_cap : gs->ws;
}
static void *peer_ws(const w8a8_comm *c, xport xp, int j) {
  return xp == XP_IPC ? ((w8a8_tp_gpu *)c->gpu)->peer_ws[j] : peer(c, j)->ws;
}
static cudaEvent_t peer_ready(const w8a8_comm *c, xport xp, int j) {
  return xp == XP_IPC ? ((w8a8_tp_gpu *)c->gpu)->peer_ready[j] : peer(c, j)->ev_ready;
}
static cudaEvent_t own_ready(const w8a8_tp_gpu *gs, xport xp) { return xp == XP_IPC ? gs->ipc_ready : gs->ev_ready; }
/* The host collective between "record ev_ready" and "peers wait on it". */
static w8a8_status ready_barrier(const char *fn, w8a8_comm *c, xport xp) {
  if (xp == XP_IPC) return w8a8_tp_ipc_barrier(fn, c, true);
  return w8a8_tp_group_barrier(fn, ((w8a8_tp_gpu *)c->gpu)->group, c, c->deadline);
}

/* S waits until every peer's previous call has ended (GROUP transport). Eager calls wait on the
 * peers' last eager call (ev_done: never recorded inside a capture, so an eager call made after a
 * captured one still waits for the eager call before it). Captured calls wait on the peers' last
 * call of the same capture (ev_done_cap); events recorded in another capture, or outside the
 * running one, cannot be waited on inside it: a captured call is ordered after earlier work
 * through the stream the graph is launched on (the caller's job, as for any graph). */
static w8a8_status entry_waits(const char *fn, w8a8_comm *c, xport xp, cudaStream_t S, unsigned long long capture) {
  if (xp == XP_IPC) { /* eager only: the peers' last eager IPC call */
    for (int j = 0; j < c->size; j++)
      if (j != c->rank)
        CU(cudaStreamWaitEvent(S, ((w8a8_tp_gpu *)c->gpu)->peer_done[j], 0),
           "cudaStreamWaitEvent (previous call of a peer, IPC)");
    return W8A8_SUCCESS;
  }
  for (int j = 0; j < c->size; j++) {
    if (j == c->rank) continue;
    w8a8_tp_gpu *pj = peer(c, j);
    if (!capture) {
      CU(cudaStreamWaitEvent(S, pj->ev_done, 0), "cudaStreamWaitEvent (previous call of a peer)");
    } else if (pj->done_capture == capture) {
      CU(cudaStreamWaitEvent(S, pj->ev_done_cap, 0), "cudaStreamWaitEvent (previous captured call of a peer)");
    }
  }
  return W8A8_SUCCESS;
}

static w8a8_status finish(const char *fn, w8a8_comm *c, xport xp, cudaStream_t S, unsigned long long capture) {
  w8a8_tp_gpu *gs = c->gpu;
  if (xp == XP_IPC) {
    CU(cudaEventRecord(gs->ipc_done, S), "cudaEventRecord (end of call, IPC)");
    return W8A8_SUCCESS;
  }
  CU(cudaEventRecord(capture ? gs->ev_done_cap : gs->ev_done, S), "cudaEventRecord (end of call)");
  if (capture) gs->done_capture = capture;
  return W8A8_SUCCESS;
}

/* After the agreement every rank runs the schedule and meets the others at its host barrier. A
 * rank that fails in between (a CUDA error) never gets there: break the communicator, which breaks
 * an in-process group (the peers fail at once with W8A8_ERROR_BROKEN instead of waiting for the
 * timeout) and sends the notice over MPI (create_world's transports). The call's error is kept. */
static void fail_after_agreement(const char *fn, w8a8_comm *c, w8a8_status s) {
  c->last_fuse = -1;
  if (!w8a8_tp_is_broken(c)) w8a8_tp_break(fn, c, s, true);
}

/* ---- all-gather + GEMM -------------------------------------------------------------------------- */

/* Whether this call's GEMM is ONE launch over all gathered rows (the sm_90a kernel, whose tiles wait
 * on per-chunk ready flags), rather than one launch per source rank. Only where peers' rows move
 * on the copy engine (GROUP, IPC): NCCL's receive kernels need SMs that a waiting persistent GEMM
 * would hold. The choice depends on the problem alone, not on `overlap`, so fused and unfused run
 * the same GEMM(s) and give the same bits; with one launch both equal w8a8_scaled_mm on the
 * gathered rows. W8A8_DEV TP_ONE_GEMM=0 turns it off (per-chunk launches). */
static bool ag_same_gpu(const w8a8_comm *c, xport xp, int j) {
  return xp == XP_GROUP && peer(c, j)->device == ((const w8a8_tp_gpu *)c->gpu)->device; /* IPC: distinct GPUs */
}

/* cuStreamWriteValue32 through the runtime's driver entry points (no link-time libcuda). */
typedef CUresult (*write_value_fn)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
static void *g_write_value;
static write_value_fn get_write_value(void) {
  return (write_value_fn)w8a8_cuda_driver_proc("cuStreamWriteValue32", &g_write_value);
}
/* flag = 1 once everything before it on stream X is done (the write has a memory fence before it). */
static w8a8_status w8a8_tp_write_flag(const char *fn, cudaStream_t X, unsigned int *flag) {
  write_value_fn f = get_write_value();
  if (!f) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: cuStreamWriteValue32 is not available", fn);
  CUresult e = f((CUstream)X, (CUdeviceptr)(uintptr_t)flag, 1u, CU_STREAM_WRITE_VALUE_DEFAULT);
  if (e != CUDA_SUCCESS) return w8a8_err(W8A8_ERROR_DEVICE, "%s: cuStreamWriteValue32 (ready flag) failed: CUresult %d", fn,
                    (int)e);
  return W8A8_SUCCESS;
}

W8A8_HIDDEN void w8a8_tp_gpu_probe_push(w8a8_comm *c) {
  w8a8_tp_gpu *gs = c->gpu;
  write_value_fn f = get_write_value();
  gs->push_ok = 0;
  /* the scale push (ag_scales_push): the environment at creation, and stores into every peer's memory */
  const int scales = (int)w8a8_knob_int(W8A8_KNOB_TP_AG_SCALES);
  int sok = scales != 0 && gs->mode == TP_GPU_GROUP && gs->group;
  for (int j = 0; j < c->size && sok; j++)
    sok = j == c->rank || (peer(c, j) && w8a8_tp_gpu_peer_on(gs->device, peer(c, j)->device));
  gs->scales_ok = sok;
  gs->scales_capture = sok && scales == 2;
  if (!f || gs->mode != TP_GPU_GROUP || !gs->group || !gs->flags) return;
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(gs->device) != cudaSuccess) {
    cudaGetLastError();
    return;
  }
  bool ok = true;
  for (int j = 0; j < c->size && ok; j++) {
    const w8a8_tp_gpu *pj = peer(c, j);
    if (j == c->rank || !pj || pj->device == gs->device) continue;
    /* 0 is the flags' idle value: harmless to a peer that has not started a call */
    ok = w8a8_tp_gpu_peer_on(gs->device, pj->device) && pj->flags &&
         f((CUstream)gs->side, (CUdeviceptr)(uintptr_t)pj->flags, 0u, CU_STREAM_WRITE_VALUE_DEFAULT) == CUDA_SUCCESS;
  }
  ok = cudaStreamSynchronize(gs->side) == cudaSuccess && ok;
  cudaGetLastError();
  cudaSetDevice(prev);
  gs->push_ok = ok;
}

/* What a schedule had enqueued when it returned (for the clean-up of a failed call). */
typedef struct sched_state {
  bool forked;         /* C waits on S's fork event: C's work is part of this call (and of a capture) */
  int flags_launched;  /* the one-GEMM launch waiting on ready flags is on S (AG): flags to release */
  int flags_n;         /* how many (the chunks of the launch) */
  int pushed;          /* AG push (ag_push): the peers' GEMMs wait on this rank's flag in their tables */
} sched_state;

/* A schedule that fails after the fork returns with C's work not joined into S. Join it, so that S
 * still covers everything the call enqueued (a caller that synchronizes S also waits for C's
 * copies) and a capture of S can still be ended (cudaStreamEndCapture fails with
 * cudaErrorStreamCaptureUnjoined on an unjoined fork). If the waiting GEMM was launched, first set
 * every ready flag on C (stream memory operations, no SM needed), after whatever C had enqueued:
 * else a failure to enqueue a chunk's copy or flag would leave the GEMM spinning for ever. The
 * call's own error is what the caller gets; these calls' failures (a sticky error, an invalidated
 * capture) change nothing, and the last-error message is kept. */
static void clean_up_after_error(const char *fn, w8a8_comm *c, const sched_state *st) {
  w8a8_tp_gpu *gs = c->gpu;
  cudaStream_t S = (cudaStream_t)c->handle->stream;
  if (!st->forked && !st->pushed) return;
  char saved[512];
  snprintf(saved, sizeof saved, "%s", w8a8_last_error());
  /* A push agreed at the ready barrier (before the fork, so also where the fork failed): the peers' GEMMs
   * wait on this rank's flag in their tables. Set it (their rows from here may be missing: the group is
   * broken after this, so their calls report the failure; this keeps them from waiting for ever). */
  if (st->pushed)
    for (int j = 0; j < c->size; j++)
      if (j != c->rank) (void)w8a8_tp_write_flag(fn, gs->side, peer(c, j)->flags + c->rank);
  if (st->flags_launched || st->pushed) gs->flags_dirty = true;
  if (!st->forked) {
    cudaGetLastError();
    w8a8_err(W8A8_SUCCESS, "%s", saved);
    return;
  }
  if (st->flags_launched)
    for (int j = 0; j < st->flags_n; j++) (void)w8a8_tp_write_flag(fn, gs->side, gs->flags + j);
  /* C also waits for what S enqueued (W8A8_DEV TP_RS_DIRECT's GEMMs store into peers' memory, the one-GEMM
   * all-gather reads peers' scales, the scale push's pack stores into them), so that draining C (the IPC
   * teardown, the workspace re-exchange) covers every access this rank makes to peer memory; then S joins C. */
  if (cudaEventRecord(gs->ev_fork, S) == cudaSuccess) cudaStreamWaitEvent(gs->side, gs->ev_fork, 0);
  if (cudaEventRecord(gs->ev_step[0], gs->side) == cudaSuccess) cudaStreamWaitEvent(S, gs->ev_step[0], 0);
  cudaGetLastError();
  w8a8_err(W8A8_SUCCESS, "%s", saved);
}

/* rows x width bytes between strided buffers of this GPU on stream st: the copy engine (cudaMemcpy2DAsync), or
 * tp_copy2d on the SMs where a stride is past the copy engine's pitch limit (the API admits strides up to 2^32
 * bytes, cudaMemcpy2DAsync refuses past cudaDevAttrMaxPitch, 2^31 - 1; a refusal after the agreement would leave
 * the NCCL peers waiting for ever). W8A8_DEV TP_COPY2D=1 (tests): tp_copy2d always. */
static w8a8_status copy_rows(const char *fn, w8a8_tp_gpu *gs, void *dst, int64_t ldd, const void *src, int64_t lds,
                             int64_t width, int64_t rows, cudaStream_t st, const char *what) {
  if (rows <= 0 || width <= 0) return W8A8_SUCCESS;
  if (ldd > gs->max_pitch || lds > gs->max_pitch || w8a8_knob_int(W8A8_KNOB_TP_COPY2D)) {
    gs->last_copy2d++;
    return w8a8_tp_launch_copy2d(dst, ldd, src, lds, width, rows, gs->num_sms, st);
  }
  CU(cudaMemcpy2DAsync(dst, (size_t)ldd, src, (size_t)lds, (size_t)width, (size_t)rows, cudaMemcpyDeviceToDevice, st),
     what);
  return W8A8_SUCCESS;
}

static bool ag_one_gemm(const w8a8_comm *c, const w8a8_tp_problem *p, xport xp, const ag_bufs *g) {
  /* (the block-scaled kernel cannot wait for arriving rows: a launch per chunk) */
  if (p->block || xp == XP_NCCL || c->size < 2 || c->size > W8A8_MM_MAX_READY || p->N <= 0 || p->K <= 0) return false;
  if (!get_write_value()) return false;
  if (!w8a8_knob_int(W8A8_KNOB_TP_ONE_GEMM)) return false;
  w8a8_mm_problem q;
  chunk_problem(p, g, NULL, 0, p->M_total, &q);
  return w8a8_cuda_takes_ready(c->handle, &q) != 0;
}

int w8a8_tp_ag_pieces(int W, const int64_t *off, const int64_t *cnt, const int *split, int pieces, int64_t *end,
                      int *rank) {
  if (W < 1 || W > W8A8_MM_MAX_READY) return 0;
  int n = 0, room = W8A8_MM_MAX_READY - W;
  for (int j = 0; j < W; j++) {
    const int64_t lo = off[j], hi = off[j] + (cnt[j] > 0 ? cnt[j] : 0);
    /* segments between the multiples of 128 strictly inside (lo, hi): U of them */
    const int64_t U = hi > lo ? (hi - 1) / 128 - lo / 128 + 1 : 1;
    int64_t want = split[j] && pieces > 1 ? pieces : 1;
    if (want > U) want = U;
    if (want > 1 + room) want = 1 + room;
    room -= (int)(want - 1);
    for (int64_t q = 0; q < want; q++) {
      /* piece q: segments [q U / want, (q + 1) U / want); it ends at the boundary after its last one */
      end[n] = q + 1 == want ? hi : (lo / 128 + (q + 1) * U / want) * 128;
      rank[n++] = j;
    }
  }
  return n;
}

/* W8A8_DEV TP_AG_PACK: the own-row pack as one kernel (default) or, =0, as the copy engine's 2D copy. */
static bool ag_pack_env(void) { return w8a8_knob_int(W8A8_KNOB_TP_AG_PACK) != 0; }

/* W8A8_DEV TP_AG_PIECES=P: the one-GEMM all-gather pulls each peer's rows (on other GPUs) in up to P pieces of whole
 * token tiles, each with its own ready flag, so that the first peer tiles can start before the whole copy lands.
 * Default 1: P = 2 gained nothing and P = 4 lost, 0.85-0.96x (h200x2-tp-pieces-2026-11-30.txt). */
static int ag_pieces_env(void) {
  const int v = (int)w8a8_knob_int(W8A8_KNOB_TP_AG_PIECES);
  return v < 1 ? 1 : v > W8A8_MM_MAX_READY ? W8A8_MM_MAX_READY : v;
}

/* The schedule the last all-gather call of c ran: 1 = one GEMM launch (ready flags), 0 = per chunk.
 * For the tests, which check that the flag protocol is what ran. */
W8A8_HIDDEN int w8a8_tp_gpu_last_ag_one_gemm(const w8a8_comm *c) {
  return c && c->gpu ? ((const w8a8_tp_gpu *)c->gpu)->last_one_gemm : -1;
}
W8A8_HIDDEN int w8a8_tp_gpu_last_copy2d(const w8a8_comm *c) {
  return c && c->gpu ? ((const w8a8_tp_gpu *)c->gpu)->last_copy2d : -1;
}
W8A8_HIDDEN int w8a8_tp_gpu_last_ag_pack(const w8a8_comm *c) {
  return c && c->gpu ? ((const w8a8_tp_gpu *)c->gpu)->last_ag_pack : -1;
}
W8A8_HIDDEN int w8a8_tp_gpu_last_ag_push(const w8a8_comm *c) {
  return c && c->gpu ? ((const w8a8_tp_gpu *)c->gpu)->last_ag_push : -1;
}
W8A8_HIDDEN int w8a8_tp_gpu_last_ag_scales(const w8a8_comm *c) {
  return c && c->gpu ? ((const w8a8_tp_gpu *)c->gpu)->last_ag_scales : -1;
}
W8A8_HIDDEN int w8a8_tp_gpu_last_ag_chunks(const w8a8_comm *c) {
  return c && c->gpu ? ((const w8a8_tp_gpu *)c->gpu)->last_chunks : -1;
}
W8A8_HIDDEN int w8a8_tp_gpu_poison_ws(const w8a8_comm *c, int v) {
  const w8a8_tp_gpu *gs = c ? (const w8a8_tp_gpu *)c->gpu : NULL;
  if (!gs) return -1;
  if (!gs->ws || gs->ws_bytes == 0) return 0; /* no workspace yet: nothing to poison */
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(gs->device) != cudaSuccess) return -1;
  const cudaError_t e = cudaMemset(gs->ws, v, gs->ws_bytes);
  const cudaError_t e2 = cudaDeviceSynchronize();
  cudaSetDevice(prev);
  return e == cudaSuccess && e2 == cudaSuccess ? 0 : -1;
}

/* W8A8_DEV TP_AG_PUSH (default 0, the pull: the side stream waits for each peer's pack event, copies its rows in and
 * sets this rank's flag for them). 1: the one-GEMM all-gather PUSHES this rank's packed rows into every peer's
 * gathered buffer from its side stream right after its own pack, and sets the peer's ready flag with a stream memory
 * operation on the peer's memory; 2: the same, the copies after the compute stream's pre-launch work (the waits for
 * the peers' packs, the peer-scale copies), so that those small copies do not queue behind the push. Off by default:
 * mode 1 lost (ag_qkv int8 at 8192 tokens 578 us against 490 pulled, h200-session17-2026-11-30.txt), mode 2 only
 * matched the pull (h200-session20-2026-11-30.txt).
 * ag_push takes a call only where no further host barrier is needed: eager calls of the in-process group
 * (XP_GROUP), every rank on a GPU of its own, the peers' flags writable from every rank (push_ok, probed at
 * creation; read after the call's agreement, so every rank sees the same), one chunk per rank
 * (W8A8_DEV TP_AG_PIECES = 1: rank j's chunk is flags[j] on every rank), and every rank with rows: then every flag a
 * peer sets is waited on by some tile of this call's GEMM, so it has landed before the reset at the end of the call.
 * The flags with push: zero at creation and after every call with flags (reset on S after the join, before
 * ev_done, which a peer's next push waits for through its entry waits: neither a push nor its flag can land before
 * the reset that precedes it); this rank's own flag set on S after the pack, each peer's by that peer.
 * What ag_push returns is this rank's wish: the call pushes only where every rank wishes it (ag_schedule reads the
 * peers' push_wish after the ready barrier), since `flags` rests on each rank's own handle and pointers. Never after
 * a capture without the end-of-call reset (capture_noreset). A failed push call sets its flag in every peer
 * (clean_up_after_error). */
static int ag_push_env(void) { return (int)w8a8_knob_int(W8A8_KNOB_TP_AG_PUSH); }
/* mode: ag_push_env's, read once per call */
static bool ag_push(const w8a8_comm *c, xport xp, unsigned long long capture, bool flags, int mode) {
  if (!flags || mode == 0 || xp != XP_GROUP || capture || c->size < 2 || ag_pieces_env() != 1) return false;
  /* Every condition is the same on every rank (a rank that pushes while a peer pulls would leave both
   * waiting for ever; at W = 3 on 2 GPUs, say, only the rank alone on its GPU has all its peers on other
   * GPUs): row counts, every rank's probe and dirty flag, every pair of ranks on distinct GPUs. */
  for (int j = 0; j < c->size; j++) {
    /* flags_dirty: a pull call left flags set (every rank the same: the same calls, env and decisions) */
    if (c->m_count[j] <= 0 || !peer(c, j)->push_ok || peer(c, j)->flags_dirty || peer(c, j)->capture_noreset)
      return false;
    for (int k = 0; k < j; k++)
      if (peer(c, j)->device == peer(c, k)->device) return false;
  }
  return true;
}

/* The scale push (default; W8A8_TP_AG_SCALES=0 at creation turns it off): the all-gather's own-row pack (tp_pack,
 * or tp_expand on the copy engine's path) writes this rank's per-row scales and zero points into every peer's
 * gathered buffer too, and no rank copies a peer's scales. Why: the one-GEMM schedule's small peer-scale copies on
 * the compute stream, before the GEMM's launch, queue behind any large copy into this GPU (16 KB: ~10 us alone,
 * ~95 us beside a 32 MiB copy, h200-session20-2026-11-30.txt); without them the launch comes ~4 us after the fork
 * instead of 20-37, and ag_qkv (70b, TP = 2, int8, 1024 tokens) takes 101-112 us instead of 121-124
 * (h200-session21-2026-12-01.txt).
 * The stores: a few KB per rank from the SMs, before the rank's ready event, which every peer's compute stream
 * waits on before its GEMM (one GEMM) or its side stream before the chunk's copy (per chunk); a peer's previous
 * call has ended before them (entry_waits), as for the push's rows.
 * Every rank decides the same: eager calls (captured ones too with W8A8_TP_AG_SCALES=2, below) of an in-process
 * group (XP_GROUP, W > 1) where every rank's scales_ok holds (set at creation: the variable, and this GPU's kernels
 * can store into every peer's memory); read after the agreement, which every rank's creation precedes. At most
 * W8A8_TP_SCALE_PEERS + 1 ranks (the kernels' parameter block). As with W8A8_DEV TP_RS_DIRECT: peer access as enabled
 * when the group was created; an application that later disables it, or resets a device under a live
 * communicator, must set W8A8_TP_AG_SCALES=0 before creating it (the pack's stores would fault where the copies
 * only became slower). */
/* Captured calls too with W8A8_TP_AG_SCALES=2 at creation (opt-in until tp-bench --graph times it on two GPUs):
 * the pack kernel's peer pointers are baked into the graph, as the copies' are; the stores into peer j's buffer
 * come after this rank's entry wait on j's previous call of the same capture (ev_done_cap), and a graph's first
 * call after the previous replay's end on the stream it is launched on, the contract every captured call already
 * has (entry_waits). Every rank captures or none (agreed) and reads the same variable. */
static bool ag_scales_push(const w8a8_comm *c, xport xp, unsigned long long capture) {
  if (xp != XP_GROUP || c->size < 2 || c->size > W8A8_TP_SCALE_PEERS + 1) return false;
  for (int j = 0; j < c->size; j++)
    if (!peer(c, j) || !peer(c, j)->scales_ok || (capture && !peer(c, j)->scales_capture)) return false;
  return true;
}

/* W8A8_DEV TP_TRACE: a mark of kind k on stream st (eager calls only; a failed record ends the trace). */
static void trace(w8a8_tp_gpu *gs, cudaStream_t st, char k, unsigned long long capture) {
  if (!gs->tr_on || capture || gs->tr_n < 0 || gs->tr_n >= TP_TRACE_MAX) return;
  if (cudaEventRecord(gs->tr_ev[gs->tr_n], st) != cudaSuccess) {
    cudaGetLastError(); /* not the next launch check's error */
    gs->tr_n = -1;
    return;
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  gs->tr_host[gs->tr_n] = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  gs->tr_kind[gs->tr_n++] = k;
}
W8A8_HIDDEN int w8a8_tp_gpu_trace_host(const w8a8_comm *c, float *us, int max) {
  const w8a8_tp_gpu *gs = c && c->gpu ? (const w8a8_tp_gpu *)c->gpu : NULL;
  if (!gs || !gs->tr_on) return 0;
  if (gs->tr_n < 0) return -1;
  int n = gs->tr_n < max ? gs->tr_n : max, f = 0;
  while (f < gs->tr_n - 1 && gs->tr_kind[f] != 'F') f++;
  for (int i = 0; i < n; i++) us[i] = (float)((gs->tr_host[i] - gs->tr_host[f]) * 1e6);
  return n;
}
W8A8_HIDDEN int w8a8_tp_gpu_trace(const w8a8_comm *c, float *us, char *kinds, int max) {
  const w8a8_tp_gpu *gs = c && c->gpu ? (const w8a8_tp_gpu *)c->gpu : NULL;
  if (!gs || !gs->tr_on) return 0;
  if (gs->tr_n < 0) return -1;
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess || cudaSetDevice(gs->device) != cudaSuccess) return -1;
  int n = gs->tr_n < max ? gs->tr_n : max, f = 0;
  while (f < gs->tr_n - 1 && gs->tr_kind[f] != 'F') f++; /* times from the fork (E, K before it: negative) */
  int bad = cudaEventSynchronize(gs->tr_ev[f]) != cudaSuccess;
  for (int i = 0; i < n && !bad; i++) {
    float ms = 0;
    bad = cudaEventSynchronize(gs->tr_ev[i]) != cudaSuccess ||
          cudaEventElapsedTime(&ms, gs->tr_ev[f], gs->tr_ev[i]) != cudaSuccess;
    us[i] = ms * 1e3f;
    kinds[i] = gs->tr_kind[i];
  }
  cudaSetDevice(prev);
  return bad ? -1 : n;
}

static w8a8_status ag_schedule(const char *fn, w8a8_comm *c, const w8a8_tp_problem *p, unsigned long long capture,
                               sched_state *st) {
  w8a8_tp_gpu *gs = c->gpu;
  const int W = c->size, r = c->rank;
  const int64_t K = p->K, M = p->M_total;
  const int64_t *cnt = c->m_count, *off = c->m_offset;
  cudaStream_t S = (cudaStream_t)c->handle->stream, C = gs->side;
  const bool zp = p->zp_kind == 2;
  const xport xp = transport_of(gs, capture);
  const bool direct = xp != XP_NCCL; /* peers' buffers addressed directly (GROUP, IPC) */
  ag_bufs g = ag_layout(call_ws(gs, xp), M, K, ag_srow(p));
  const int64_t S_ = g.S;

  if (!capture) gs->tr_n = 0; /* (a captured call leaves the last eager call's marks) */
  trace(gs, S, 'E', capture); /* the call reached the compute stream */
  if (direct) W8A8_CHECK(entry_waits(fn, c, xp, S, capture));
  const bool one = ag_one_gemm(c, p, xp, &g);
  const bool flags = one && p->overlap;
  gs->last_one_gemm = one;
  gs->last_chunks = 0;
  w8a8_mm_ready rd;
  memset(&rd, 0, sizeof rd);
  /* The chunks of the one-GEMM launch (w8a8_tp_ag_pieces): a rank's rows, or pieces of a peer's rows on
   * another GPU (W8A8_DEV TP_AG_PIECES); first[j]: rank j's first chunk. */
  int nch = 0, split[W8A8_MM_MAX_READY], chrank[W8A8_MM_MAX_READY], first[W8A8_MM_MAX_READY];
  int64_t chend[W8A8_MM_MAX_READY];
  if (flags) {
    for (int j = 0; j < W; j++) split[j] = j != r && !ag_same_gpu(c, xp, j);
    nch = w8a8_tp_ag_pieces(W, off, cnt, split, ag_pieces_env(), chend, chrank);
    if (nch < W) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: %d ranks do not fit the ready table", fn, W);
    for (int i = nch - 1; i >= 0; i--) first[chrank[i]] = i;
  }
  /* Own rows, one scale and zero point per row, into the gathered buffer; and the ready flags (one
   * GEMM, fused), reset before the fork so that the side stream's writes come after. One kernel
   * (tp_pack) where the rows are 16-byte aligned (else, or with W8A8_DEV TP_AG_PACK=0: the copy engine's 2D copy,
   * the expand kernel and two memsets). */
  const uint8_t *asrc = (const uint8_t *)p->a;
  /* push: the peers set this rank's flags for their rows (maybe before this point); only the own one here.
   * ag_push is this rank's wish: `flags` (one GEMM) rests on this rank's handle and pointers, which the
   * agreement does not cover, so the call pushes only if every rank wishes it (read after the ready
   * barrier below). A wish that falls back to the pull leaves the pull's starting state all the same: the
   * flags zero (a wish needs flags_dirty clear) but the own one, written below. */
  const int push_mode = ag_push_env();
  bool push = ag_push(c, xp, capture, flags, push_mode);
  gs->push_wish = push;
  const bool reset = flags && !push;
  /* the scale push: this rank's scales into every peer's gathered buffer, by the pack below */
  const bool spush = !p->block && ag_scales_push(c, xp, capture); /* (one scale per row only) */
  gs->last_ag_scales = 0;
  w8a8_tp_scale_dsts sd;
  memset(&sd, 0, sizeof sd); /* (the unused entries too: a captured launch's parameters are then deterministic) */
  for (int j = 0; j < W && spush; j++) {
    if (j == r) continue;
    void *pws = peer_ws(c, xp, j);
    if (!pws) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: rank %d's workspace is not mapped here", fn, j);
    ag_bufs pg = ag_layout(pws, M, K, S_);
    sd.scale[sd.n] = pg.scale + off[r];
    sd.azp[sd.n] = zp ? pg.azp + off[r] : NULL;
    sd.n++;
  }
  gs->last_ag_scales = spush && cnt[r] > 0;
  gs->last_ag_pack = !p->block && ag_pack_env() && w8a8_tp_pack_takes(g.a + off[r] * K, asrc, p->lda, K) && (cnt[r] > 0 || reset);
  if (gs->last_ag_pack) {
    const int64_t rows = cnt[r] > 0 ? cnt[r] : 0;
    W8A8_CHECK(w8a8_tp_launch_pack(g.a + off[r] * K, asrc, (int64_t)p->lda, K, rows, g.scale + off[r], p->scale_a,
                                   p->scale_a_per_token, zp ? g.azp + off[r] : NULL, p->azp,
                                   p->azp_mode == W8A8_AZP_PER_TOKEN, reset ? gs->flags : NULL, reset ? nch : 0,
                                   reset ? first[r] : 0, spush ? &sd : NULL, gs->num_sms, S));
  } else {
    if (cnt[r] > 0) {
      W8A8_CHECK(copy_rows(fn, gs, g.a + off[r] * K, K, p->a, p->lda, K, cnt[r], S, "cudaMemcpy2DAsync (own rows)"));
      if (p->block)
        W8A8_CHECK(w8a8_tp_launch_scale_rows(g.scale + off[r] * S_, p->scale_a, p->sa_rs, p->sa_cs, cnt[r], S_, S));
      else
        W8A8_CHECK(w8a8_tp_launch_expand(g.scale + off[r], p->scale_a, p->scale_a_per_token,
                                         zp ? g.azp + off[r] : NULL, p->azp, p->azp_mode == W8A8_AZP_PER_TOKEN, cnt[r],
                                         spush ? &sd : NULL, S));
    }
    if (reset) {
      CU(cudaMemsetAsync(gs->flags, 0, sizeof(unsigned int) * (size_t)nch, S), "cudaMemsetAsync (ready flags)");
      CU(cudaMemsetAsync(gs->flags + first[r], 1, sizeof(unsigned int), S), "cudaMemsetAsync (own ready flag)");
    }
  }
  if (push) W8A8_CHECK(w8a8_tp_write_flag(fn, S, gs->flags + first[r])); /* (either pack path) */
  trace(gs, S, 'K', capture); /* own rows packed, flags reset (after the wait for the peers' previous calls) */
  CU(cudaEventRecord(own_ready(gs, xp), S), "cudaEventRecord (rows packed)");
  if (direct && W > 1) W8A8_CHECK(ready_barrier(fn, c, xp));
  for (int j = 0; j < W && push; j++) push = peer(c, j)->push_wish; /* (push: XP_GROUP, W > 1: barrier passed) */
  gs->last_ag_push = push ? push_mode : 0;
  st->pushed = push;
  trace(gs, S, 'F', capture); /* before the fork: every side-stream mark comes after it */
  CU(cudaEventRecord(gs->ev_fork, S), "cudaEventRecord (fork)");
  CU(cudaStreamWaitEvent(C, gs->ev_fork, 0), "cudaStreamWaitEvent (fork)");
  st->forked = true;
  /* The side stream's pulls start now; the S-side preparation below runs beside them. */
  if (flags) {
    /* What the waiting GEMM may depend on. It can hold every SM of its GPU while it waits, so nothing
     * it waits for may need an SM, on this GPU or a peer's:
     *  - every peer's rows are packed (its pack kernel, and whatever the peer's stream ran before,
     *    NCCL kernels of the application included, are done): S waits on every peer's ready event
     *    before the launch (the host barrier above has just made them all recorded);
     *  - the small copies (scales, zero points: a few KB, which the driver may run as a kernel; none
     *    with the scale push, whose stores the peers' packs made) and the rows of peers on this same
     *    GPU (emulated ranks) are made on S before the launch too, and their flags set with the own
     *    chunk's;
     *  - the rows of peers on other GPUs move on the copy engine (side stream) and each chunk's flag
     *    is written after them by a stream memory operation (cuStreamWriteValue32: no kernel).
     * Cross-GPU chunks are what the one launch overlaps; on a single GPU every chunk is copied before
     * it (emulated ranks share the SMs anyway). */
    for (int j = 0; j < W; j++) {
      if (j == r) continue;
      CU(cudaStreamWaitEvent(S, peer_ready(c, xp, j), 0), "cudaStreamWaitEvent (peer rows packed)");
      void *pws = peer_ws(c, xp, j);
      if (!pws) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: rank %d's workspace is not mapped here", fn, j);
      ag_bufs pg = ag_layout(pws, M, K, S_);
      if (cnt[j] > 0 && !spush) { /* (spush: peer j's pack wrote them, before the event just waited on) */
        CU(cudaMemcpyAsync(g.scale + off[j], pg.scale + off[j], sizeof(float) * (size_t)cnt[j], cudaMemcpyDefault, S),
           "cudaMemcpyAsync (peer scales)");
        if (zp)
          CU(cudaMemcpyAsync(g.azp + off[j], pg.azp + off[j], sizeof(int32_t) * (size_t)cnt[j], cudaMemcpyDefault, S),
             "cudaMemcpyAsync (peer zero points)");
      }
      /* A same-GPU chunk's flag is set here even when the chunk is empty: nothing else sets it (C
       * skips same-GPU chunks), and an empty chunk between two others (off[j] inside a tile) is
       * still waited on by the tile that straddles off[j] (sm90_wait_rows). */
      if (ag_same_gpu(c, xp, j)) {
        if (cnt[j] > 0)
          CU(cudaMemcpyAsync(g.a + off[j] * K, pg.a + off[j] * K, (size_t)(cnt[j] * K), cudaMemcpyDefault, S),
             "cudaMemcpyAsync (rows of a peer on this GPU)");
        CU(cudaMemsetAsync(gs->flags + first[j], 1, sizeof(unsigned int), S), "cudaMemsetAsync (ready flag)");
        trace(gs, S, 'C', capture);
      }
    }
    rd.flags = gs->flags;
    rd.n = nch;
    gs->last_chunks = nch;
    for (int i = 0; i < nch; i++) rd.end[i] = chend[i];
    rd.first_row = off[r];
    /* push mode 2: the side stream's copies wait for the compute stream's work above (not for the GEMM).
     * No cycle: that work waits only for the peers' packs (recorded before the ready barrier), and the
     * GEMM's flags only for the peers' side streams, which wait only for their own pre-launch work.
     * (ev_fork is recorded again: the fork's wait above was bound when it was enqueued.) */
    if (push && push_mode == 2) {
      CU(cudaEventRecord(gs->ev_fork, S), "cudaEventRecord (push after the scales)");
      CU(cudaStreamWaitEvent(C, gs->ev_fork, 0), "cudaStreamWaitEvent (push after the scales)");
    }
    trace(gs, S, 'L', capture); /* the GEMM's launch is next on the compute stream */
  }

  if (flags) {
    /* The whole GEMM at once: its tiles start at the own rows and wait for the others' flags. */
    w8a8_mm_problem q;
    chunk_problem(p, &g, NULL, 0, M, &q);
    q.ready = &rd;
    W8A8_CHECK(run_gemm(c, &q));
    st->flags_launched = 1;
    st->flags_n = nch;
    trace(gs, S, 'G', capture);
  } else if (p->overlap && W > 1) {
    W8A8_CHECK(chunk_gemm(c, p, &g, NULL, off[r], cnt[r]));
    trace(gs, S, 'G', capture);
  }
  if (push && nch != W) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: %d chunks for %d ranks in a push", fn, nch, W);
  for (int s = 1; s < W; s++) {
    /* One GEMM: pull in the order its tiles meet the rows (own, r + 1, ..., W - 1, 0, ..., r - 1). Push:
     * first to the peer whose tiles meet these rows soonest (r - 1, r - 2, ...). */
    const int j = one && !push ? (r + s) % W : (r - s + W) % W;
    if (push) {
      void *pws = peer_ws(c, xp, j);
      if (!pws) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: rank %d's workspace is not mapped here", fn, j);
      ag_bufs pg = ag_layout(pws, M, K, S_);
      trace(gs, C, 'W', capture); /* the push to peer j starts (C waits for the fork; mode 2 for S's pre-launch work) */
      if (K > 0)
        CU(cudaMemcpyAsync(pg.a + off[r] * K, g.a + off[r] * K, (size_t)(cnt[r] * K), cudaMemcpyDefault, C),
           "cudaMemcpyAsync (own rows into a peer)");
      /* rank r's chunk is flags[r] on every rank (one chunk per rank) */
      W8A8_CHECK(w8a8_tp_write_flag(fn, C, peer(c, j)->flags + r));
      trace(gs, C, 'C', capture);
    } else if (direct) {
      void *pws = peer_ws(c, xp, j);
      if (!pws) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: rank %d's workspace is not mapped here", fn, j);
      ag_bufs pg = ag_layout(pws, M, K, S_);
      CU(cudaStreamWaitEvent(C, peer_ready(c, xp, j), 0), "cudaStreamWaitEvent (peer rows packed)");
      trace(gs, C, 'W', capture); /* the side stream has seen peer j's rows packed: its copy starts here */
      if (flags && ag_same_gpu(c, xp, j)) {
        /* copied on S before the GEMM */
      } else if (flags) {
        /* rows only (scales and zero points went on S), then the chunk's flag; piece by piece */
        for (int i = first[j]; i < nch && chrank[i] == j; i++) {
          const int64_t lo = i == first[j] ? off[j] : chend[i - 1], n = chend[i] - lo;
          if (n > 0)
            CU(cudaMemcpyAsync(g.a + lo * K, pg.a + lo * K, (size_t)(n * K), cudaMemcpyDefault, C),
               "cudaMemcpyAsync (peer rows)");
          W8A8_CHECK(w8a8_tp_write_flag(fn, C, gs->flags + i));
          trace(gs, C, 'C', capture);
        }
      } else if (cnt[j] > 0) {
        if (K > 0)
          CU(cudaMemcpyAsync(g.a + off[j] * K, pg.a + off[j] * K, (size_t)(cnt[j] * K), cudaMemcpyDefault, C),
             "cudaMemcpyAsync (peer rows)");
        if (!spush) /* (spush: peer j's pack wrote them, before the event C waited on above) */
          CU(cudaMemcpyAsync(g.scale + off[j] * S_, pg.scale + off[j] * S_, sizeof(float) * (size_t)(cnt[j] * S_),
                             cudaMemcpyDefault, C),
             "cudaMemcpyAsync (peer scales)");
        if (zp && !spush)
          CU(cudaMemcpyAsync(g.azp + off[j], pg.azp + off[j], sizeof(int32_t) * (size_t)cnt[j], cudaMemcpyDefault, C),
             "cudaMemcpyAsync (peer zero points)");
      }
    } else {
#ifdef W8A8_HAVE_NCCL
      const int to = (r + s) % W;
      ncclComm_t nc = (ncclComm_t)gs->nccl;
      ncclResult_t nr = ncclGroupStart();
      if (cnt[r] > 0) {
        if (K > 0 && nr == ncclSuccess) nr = ncclSend(g.a + off[r] * K, (size_t)(cnt[r] * K), ncclUint8, to, nc, C);
        if (nr == ncclSuccess) nr = ncclSend(g.scale + off[r] * S_, (size_t)(cnt[r] * S_), ncclFloat32, to, nc, C);
        if (zp && nr == ncclSuccess) nr = ncclSend(g.azp + off[r], (size_t)cnt[r], ncclInt32, to, nc, C);
      }
      if (cnt[j] > 0) {
        if (K > 0 && nr == ncclSuccess) nr = ncclRecv(g.a + off[j] * K, (size_t)(cnt[j] * K), ncclUint8, j, nc, C);
        if (nr == ncclSuccess) nr = ncclRecv(g.scale + off[j] * S_, (size_t)(cnt[j] * S_), ncclFloat32, j, nc, C);
        if (zp && nr == ncclSuccess) nr = ncclRecv(g.azp + off[j], (size_t)cnt[j], ncclInt32, j, nc, C);
      }
      ncclResult_t ne = ncclGroupEnd();
      if (nr == ncclSuccess) nr = ne;
      if (nr != ncclSuccess) return w8a8_tp_nccl_err(fn, "ncclSend/ncclRecv (rows)", nr); /* (breaks: the caller) */
#endif
    }
    CU(cudaEventRecord(gs->ev_step[s], C), "cudaEventRecord (chunk arrived)");
    if (!flags) trace(gs, C, 'C', capture);
    if (p->overlap && !one) {
      CU(cudaStreamWaitEvent(S, gs->ev_step[s], 0), "cudaStreamWaitEvent (chunk arrived)");
      W8A8_CHECK(chunk_gemm(c, p, &g, NULL, off[j], cnt[j]));
      trace(gs, S, 'G', capture);
    }
  }
  if (!p->overlap || W == 1) {
    /* Unfused: the gather first, then the same GEMM(s): one over every row, or per chunk in rank order. */
    if (W > 1) CU(cudaStreamWaitEvent(S, gs->ev_step[W - 1], 0), "cudaStreamWaitEvent (gather done)");
    if (one)
      W8A8_CHECK(chunk_gemm(c, p, &g, NULL, 0, M));
    else
      for (int j = 0; j < W; j++) W8A8_CHECK(chunk_gemm(c, p, &g, NULL, off[j], cnt[j]));
    trace(gs, S, 'G', capture);
  }
  /* Join: S has waited on C's last event in both branches (W > 1); with W = 1 C did nothing
   * after the fork, and joining it anyway keeps a capture's graph closed. */
  CU(cudaEventRecord(gs->ev_step[0], C), "cudaEventRecord (join)");
  CU(cudaStreamWaitEvent(S, gs->ev_step[0], 0), "cudaStreamWaitEvent (join)");
  trace(gs, S, 'J', capture);
  /* The ready flags back to zero for a push (ag_push): after a push (its peers may push the next call's
   * rows as soon as this call's end is recorded), and after a pull while W8A8_DEV TP_AG_PUSH is set; a pull
   * without it leaves them set (flags_dirty: no push until a call resets them). */
  if (flags) {
    const bool want = push || push_mode != 0;
    if (want)
      CU(cudaMemsetAsync(gs->flags, 0, sizeof(unsigned int) * (size_t)nch, S), "cudaMemsetAsync (ready flags, end)");
    /* A graph captured without the reset may be replayed at any time later and leave the flags set, with
     * no host code to say so: no push on this communicator after such a capture (capture_noreset). */
    if (capture)
      gs->capture_noreset = gs->capture_noreset || !want;
    else
      gs->flags_dirty = !want;
  }

  /* Optional gathered outputs for the caller. */
  if (p->g_a && K > 0 && M > 0)
    W8A8_CHECK(copy_rows(fn, gs, p->g_a, p->g_lda, g.a, K, K, M, S, "cudaMemcpy2DAsync (gathered->a)"));
  if (p->g_scale && M > 0)
    CU(cudaMemcpyAsync(p->g_scale, g.scale, sizeof(float) * (size_t)M, cudaMemcpyDeviceToDevice, S),
       "cudaMemcpyAsync (gathered->scale_a)");
  if (p->g_azp && M > 0)
    CU(cudaMemcpyAsync(p->g_azp, g.azp, sizeof(int32_t) * (size_t)M, cudaMemcpyDeviceToDevice, S),
       "cudaMemcpyAsync (gathered->azp)");
  return finish(fn, c, xp, S, capture);
}

w8a8_status w8a8_tp_gpu_all_gather_scaled_mm(const char *fn, w8a8_comm *c, const w8a8_tp_args *x) {
  w8a8_tp_problem p;
  unsigned long long capture = 0;
  W8A8_CHECK(front(fn, c, TP_OP_AG, x, &p, &capture));
  ((w8a8_tp_gpu *)c->gpu)->last_copy2d = 0; /* (before the M = 0 return: that call made none) */
  if (p.M_total == 0) return W8A8_SUCCESS;
  w8a8_tp_gpu *gs = c->gpu;
  dev_guard g;
  w8a8_status s = enter(fn, gs->device, &g);
  if (s == W8A8_SUCCESS) {
    sched_state st = {false, 0, 0, 0};
    s = ag_schedule(fn, c, &p, capture, &st);
    if (s != W8A8_SUCCESS) clean_up_after_error(fn, c, &st);
    leave(&g, gs->device);
  }
  /* A failure after the agreement leaves the peers' view of this rank unknown. */
  if (s != W8A8_SUCCESS) {
    fail_after_agreement(fn, c, s); /* (its notice releases IPC peers waiting in the call's barrier) */
  }
  return s;
}

/* ---- GEMM + reduce-scatter ----------------------------------------------------------------------- */

/* Pieces of one destination's rows in the reduce-scatter (direct transports): the partial of a
 * piece is pushed as soon as it is computed, so the first bytes leave after 1/P of the chunk's GEMM
 * instead of all of it. A piece keeps at least 256 or 1024 rows (rs_min_rows: the GEMM of a piece still
 * fills most of the GPU).
 * Fused and unfused run the same pieces: the same GEMMs, the same bits. The NCCL transport sends
 * whole chunks. One side stream pushes them all: on the H200 pair a second stream per direction lowered
 * the rate with both directions busy, 297 GB/s per direction against 336 (h200x2-copy-engine-bw-2026-11-29.txt),
 * and both directions are busy in a reduce-scatter. */
#define RS_MAX_PIECES 4
/* W8A8_DEV TP_RS_MIN_ROWS=R: a piece's least rows; unset, the rule below. Rule: pieces of >= 256 rows where this
 * rank's K is at most 4096 (the push takes about as long as the GEMM: 70b-o int8 at 1024 tokens on 2 GPUs, 139 us with
 * 1024-row pieces, 101 with 256), >= 1024 otherwise (70b-down: its GEMM is 3.7x its push, and smaller pieces only
 * cost GEMM efficiency); h200x2-tp-rspieces-2026-11-30.txt; K between 4096 and 14336 is unmeasured. Any R >= 1 is
 * correct (the pieces only cut the sender's rows; the receiver reduces whole chunks once they have all landed). */
static int64_t rs_min_rows(int64_t K) {
  const int64_t v = w8a8_knob_int(W8A8_KNOB_TP_RS_MIN_ROWS);
  return v > 0 ? v : K <= 4096 ? 256 : 1024;
}
static int rs_pieces(xport xp, int64_t rows, int64_t K) {
  if (xp == XP_NCCL) return 1;
  int64_t p = rows / rs_min_rows(K);
  return p < 1 ? 1 : p > RS_MAX_PIECES ? RS_MAX_PIECES : (int)p;
}
/* Tests: the pieces of `rows` rows of one peer at this rank's K on a direct transport. */
W8A8_HIDDEN int w8a8_tp_rs_pieces(int64_t rows, int64_t K) { return rs_pieces(XP_IPC, rows, K); }
static int64_t piece_begin(int64_t rows, int P, int k) { return rows * k / P; }

/* W8A8_DEV TP_RS_DIRECT=1 (default 0): the fused reduce-scatter's GEMM of a piece of a peer's rows stores its fp32
 * partials straight into that peer's receive buffer (the epilogue's stores cross NVLink as the tiles finish)
 * instead of into this rank's partial buffer followed by a copy-engine push once the whole piece is done. It lost
 * everywhere, 0.82-0.95x (70b-o int8 at 1024 tokens 138-140 -> 145-147 us; h200x2-tp-rsdirect-2026-11-30.txt),
 * we think because the SMs' stores across NVLink slow the GEMM's epilogues more than the push costs (not profiled).
 * Those figures are of the epilogue's 8-byte stores; aligned fp32 partials take the staged TMA stores,
 * into the peer's buffer as well, which no A/B has timed (the test sweep_rs_direct covers them).
 * The same GEMMs on the same pieces: the same bits as the unfused pair. Only where this GPU's kernels can store
 * into the peer's memory (the same GPU, peer access in this process, or an IPC mapping: IPC requires peer access),
 * only fp32 partials (16-bit ones untested on peer memory), only fused calls (the unfused baseline keeps its
 * GEMMs then copies). */
/* (Peer access as enabled when the group was created: an application that later disables it, or resets
 * the device under a live communicator, must turn W8A8_DEV TP_RS_DIRECT off; the copy-engine push would only
 * have become slower.) */
static bool rs_direct_to(const w8a8_comm *c, xport xp, int j, size_t es) {
  if (es != 4 || xp == XP_NCCL || !w8a8_knob_int(W8A8_KNOB_TP_RS_DIRECT)) return false;
  return xp == XP_IPC || w8a8_tp_gpu_peer_on(((const w8a8_tp_gpu *)c->gpu)->device, peer(c, j)->device);
}
W8A8_HIDDEN int w8a8_tp_gpu_last_rs_direct(const w8a8_comm *c) {
  return c && c->gpu ? ((const w8a8_tp_gpu *)c->gpu)->last_rs_direct : -1;
}
W8A8_HIDDEN int w8a8_tp_gpu_last_rs_pushes(const w8a8_comm *c) {
  return c && c->gpu ? ((const w8a8_tp_gpu *)c->gpu)->last_rs_pushes : -1;
}

/* W8A8_DEV TP_RS_OWN_WHOLE (default 1): this rank's own rows in ONE GEMM launch, fused and unfused alike (the same
 * GEMMs: the same bits). The pieces exist so that a peer's partial leaves early; the own rows are not pushed, and
 * cutting them only costs GEMM efficiency (rs_o int8 at 8192 tokens on 2 H200s: fused 580-586 us with 4 own pieces,
 * 542-543 with one launch; h200x2-tp-rsown-2026-11-30.txt). 0: the own rows in pieces as the peers'. */
static int rs_own_pieces(xport xp, int64_t rows, int64_t K) {
  return w8a8_knob_int(W8A8_KNOB_TP_RS_OWN_WHOLE) ? 1 : rs_pieces(xp, rows, K);
}
W8A8_HIDDEN int w8a8_tp_gpu_last_rs_own(const w8a8_comm *c) {
  return c && c->gpu ? ((const w8a8_tp_gpu *)c->gpu)->last_rs_own : -1;
}

static w8a8_status rs_schedule(const char *fn, w8a8_comm *c, const w8a8_tp_problem *p, unsigned long long capture,
                               sched_state *st) {
  w8a8_tp_gpu *gs = c->gpu;
  const int W = c->size, r = c->rank;
  const int64_t N = p->N, M = p->M_total;
  const int64_t *cnt = c->m_count, *off = c->m_offset;
  cudaStream_t S = (cudaStream_t)c->handle->stream, C = gs->side;
  const xport xp = transport_of(gs, capture);
  const bool direct = xp != XP_NCCL; /* peers' buffers addressed directly (GROUP, IPC) */
  void *ws = call_ws(gs, xp);
  /* The partials' dtype and element size: agreed between the ranks (out dtype and partials are
   * in the signature), so every rank lays out its workspace, and reads its peers', the same way. */
  const w8a8_dtype pdt = w8a8_tp_partial_dtype(p);
  const size_t es = w8a8_dtype_size(pdt);
  char *part = rs_part(ws), *recv = rs_recv(ws, M, N, es);

  gs->last_rs_direct = 0;
  gs->last_rs_pushes = 0;
  gs->last_rs_own = 0;
  if (!capture) gs->tr_n = 0; /* (a captured call leaves the last eager call's marks) */
  trace(gs, S, 'E', capture); /* the call reached the compute stream */
  if (direct) W8A8_CHECK(entry_waits(fn, c, xp, S, capture));
  trace(gs, S, 'F', capture); /* before the fork: every side-stream mark comes after it */
  CU(cudaEventRecord(gs->ev_fork, S), "cudaEventRecord (fork)");
  CU(cudaStreamWaitEvent(C, gs->ev_fork, 0), "cudaStreamWaitEvent (fork)");
  st->forked = true;
  if (!p->overlap)
    for (int j = 0; j < W; j++) {
      const int P = j == r ? rs_own_pieces(xp, cnt[j], p->K) : rs_pieces(xp, cnt[j], p->K);
      for (int k = 0; k < P; k++) {
        const int64_t b0 = piece_begin(cnt[j], P, k), b1 = piece_begin(cnt[j], P, k + 1);
        W8A8_CHECK(chunk_gemm(c, p, NULL, part, off[j] + b0, b1 - b0));
        trace(gs, S, j == r ? 'O' : 'G', capture);
        if (j == r && b1 > b0) gs->last_rs_own++;
      }
    }
  for (int s = 1; s < W; s++) {
    const int j = (r + s) % W;
    if (direct) {
      const int P = rs_pieces(xp, cnt[j], p->K);
      void *pws = cnt[j] > 0 ? peer_ws(c, xp, j) : NULL;
      if (cnt[j] > 0 && !pws) return w8a8_err(W8A8_ERROR_INTERNAL, "%s: rank %d's workspace is not mapped here", fn, j);
      const bool to_peer = p->overlap && rs_direct_to(c, xp, j, es);
      for (int k = 0; k < P && cnt[j] > 0; k++) {
        const int64_t b0 = piece_begin(cnt[j], P, k), b1 = piece_begin(cnt[j], P, k + 1);
        char *dst = rs_recv(pws, M, N, es) + ((size_t)rs_slot(r, j) * (size_t)(cnt[j] * N) + (size_t)(b0 * N)) * es;
        if (to_peer) { /* W8A8_DEV TP_RS_DIRECT: the GEMM's epilogue writes the peer's buffer; nothing to push */
          w8a8_mm_problem q;
          chunk_problem(p, NULL, part, off[j] + b0, b1 - b0, &q);
          q.out = dst;
          if (q.M > 0 && q.N > 0) W8A8_CHECK(run_gemm(c, &q));
          trace(gs, S, 'G', capture);
          gs->last_rs_direct++;
          continue;
        }
        if (p->overlap) {
          W8A8_CHECK(chunk_gemm(c, p, NULL, part, off[j] + b0, b1 - b0));
          trace(gs, S, 'G', capture);
        }
        /* One event serves every piece: a wait binds to the record made just before it. */
        CU(cudaEventRecord(gs->ev_step[s], S), "cudaEventRecord (partial computed)");
        CU(cudaStreamWaitEvent(C, gs->ev_step[s], 0), "cudaStreamWaitEvent (partial computed)");
        CU(cudaMemcpyAsync(dst, part + (size_t)((off[j] + b0) * N) * es, es * (size_t)((b1 - b0) * N),
                           cudaMemcpyDefault, C),
           "cudaMemcpyAsync (partial to peer)");
        trace(gs, C, 'P', capture);
        gs->last_rs_pushes++;
      }
    } else {
      if (p->overlap) {
        W8A8_CHECK(chunk_gemm(c, p, NULL, part, off[j], cnt[j]));
        trace(gs, S, 'G', capture);
      }
      CU(cudaEventRecord(gs->ev_step[s], S), "cudaEventRecord (partial computed)");
      CU(cudaStreamWaitEvent(C, gs->ev_step[s], 0), "cudaStreamWaitEvent (partial computed)");
#ifdef W8A8_HAVE_NCCL
      const int from = (r - s + W) % W;
      ncclComm_t nc = (ncclComm_t)gs->nccl;
      const ncclDataType_t nt =
          pdt == W8A8_DTYPE_BF16 ? ncclBfloat16 : pdt == W8A8_DTYPE_FP16 ? ncclFloat16 : ncclFloat32;
      ncclResult_t nr = ncclGroupStart();
      if (cnt[j] > 0 && nr == ncclSuccess)
        nr = ncclSend(part + (size_t)(off[j] * N) * es, (size_t)(cnt[j] * N), nt, j, nc, C);
      if (cnt[r] > 0 && nr == ncclSuccess)
        nr = ncclRecv(recv + (size_t)rs_slot(from, r) * (size_t)(cnt[r] * N) * es, (size_t)(cnt[r] * N), nt, from, nc,
                      C);
      ncclResult_t ne = ncclGroupEnd();
      if (nr == ncclSuccess) nr = ne;
      if (nr != ncclSuccess) return w8a8_tp_nccl_err(fn, "ncclSend/ncclRecv (partials)", nr); /* (breaks: the caller) */
      trace(gs, C, 'P', capture);
#endif
    }
  }
  /* Stores made by S's GEMMs into peers (W8A8_DEV TP_RS_DIRECT): C waits for them, so that own_ready, recorded
   * on C, covers them as it covers C's pushes (ev_step[0]: the reduce-scatter uses 1..W-1). */
  if (gs->last_rs_direct > 0) {
    CU(cudaEventRecord(gs->ev_step[0], S), "cudaEventRecord (partials stored into peers)");
    CU(cudaStreamWaitEvent(C, gs->ev_step[0], 0), "cudaStreamWaitEvent (partials stored into peers)");
  }
  if (p->overlap) {
    const int P = rs_own_pieces(xp, cnt[r], p->K);
    for (int k = 0; k < P; k++) {
      const int64_t b0 = piece_begin(cnt[r], P, k), b1 = piece_begin(cnt[r], P, k + 1);
      W8A8_CHECK(chunk_gemm(c, p, NULL, part, off[r] + b0, b1 - b0));
      trace(gs, S, 'O', capture);
      if (b1 > b0) gs->last_rs_own++;
    }
  }
  CU(cudaEventRecord(own_ready(gs, xp), C), "cudaEventRecord (partials sent)");
  if (direct && W > 1) W8A8_CHECK(ready_barrier(fn, c, xp));
  /* The peers' partials of this rank's rows have arrived; join C. */
  if (direct)
    for (int j = 0; j < W; j++)
      if (j != r) CU(cudaStreamWaitEvent(S, peer_ready(c, xp, j), 0), "cudaStreamWaitEvent (peer partials)");
  CU(cudaStreamWaitEvent(S, own_ready(gs, xp), 0), "cudaStreamWaitEvent (join)");
  trace(gs, S, 'A', capture);
  w8a8_tp_reduce_srcs src;
  memset(&src, 0, sizeof src);
  for (int j = 0; j < W; j++)
    src.p[j] = j == r ? part + (size_t)(off[r] * N) * es : recv + (size_t)rs_slot(j, r) * (size_t)(cnt[r] * N) * es;
  W8A8_CHECK(w8a8_tp_launch_reduce(&src, pdt, W, cnt[r], N, p->out, p->ldo, p->out_dtype, p->bias, gs->num_sms, S));
  trace(gs, S, 'R', capture);
  return finish(fn, c, xp, S, capture);
}

w8a8_status w8a8_tp_gpu_scaled_mm_reduce_scatter(const char *fn, w8a8_comm *c, const w8a8_tp_args *x) {
  w8a8_tp_problem p;
  unsigned long long capture = 0;
  W8A8_CHECK(front(fn, c, TP_OP_RS, x, &p, &capture));
  w8a8_tp_gpu *gs = c->gpu;
  gs->last_rs_direct = 0; /* (also for the calls that return here: nothing to do) */
  gs->last_rs_pushes = 0;
  gs->last_rs_own = 0;
  if (p.M_total == 0 || p.N == 0) return W8A8_SUCCESS;
  dev_guard g;
  w8a8_status s = enter(fn, gs->device, &g);
  if (s == W8A8_SUCCESS) {
    sched_state st = {false, 0, 0, 0};
    s = rs_schedule(fn, c, &p, capture, &st);
    if (s != W8A8_SUCCESS) clean_up_after_error(fn, c, &st);
    leave(&g, gs->device);
  }
  if (s != W8A8_SUCCESS) {
    fail_after_agreement(fn, c, s); /* (its notice releases IPC peers waiting in the call's barrier) */
  }
  return s;
}

#else
typedef int w8a8_tp_gpu_unused; /* no CUDA: stubs in comm_gpu.c */
#endif /* W8A8_HAVE_CUDA */
