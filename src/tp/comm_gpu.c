/* comm_gpu.c — GPU communicators: creation (in-process group, ncclComm_t, NCCL bootstrapped
 * from an id or from MPI), the in-process host barrier, the agreement of the fused calls on GPU
 * ranks, the device workspace, destruction. The schedules are in tp_gpu.c. Builds without CUDA
 * get stubs returning W8A8_ERROR_NOT_BUILT. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/knobs.h"
#include "tp_internal.h"

#define LL(x) ((long long)(x))

#ifndef W8A8_HAVE_CUDA

static w8a8_status no_cuda(const char *fn) {
  return w8a8_err(W8A8_ERROR_NOT_BUILT, "%s: libw8a8 was built without CUDA: GPU communicators do not exist", fn);
}
bool w8a8_tp_is_gpu(const w8a8_comm *c) { return c && c->kind != W8A8_COMM_KIND_MPI; }
const char *w8a8_tp_transport(const w8a8_comm *c, const char **why) {
  if (why) *why = "";
  return c && c->kind == W8A8_COMM_KIND_MPI ? "mpi" : "none";
}
w8a8_status w8a8_comm_create_local(w8a8_comm **comms, w8a8_handle **handles, int nranks) {
  (void)comms, (void)handles, (void)nranks;
  w8a8_clear_error();
  return no_cuda("w8a8_comm_create_local");
}
w8a8_status w8a8_comm_create_nccl(w8a8_comm **comm, w8a8_handle *handle, void *nccl_comm) {
  (void)comm, (void)handle, (void)nccl_comm;
  w8a8_clear_error();
  return no_cuda("w8a8_comm_create_nccl (NCCL)");
}
w8a8_status w8a8_comm_unique_id(w8a8_unique_id *id) {
  (void)id;
  w8a8_clear_error();
  return no_cuda("w8a8_comm_unique_id (NCCL)");
}
w8a8_status w8a8_comm_create_nccl_id(w8a8_comm **comm, w8a8_handle *handle, const w8a8_unique_id *id, int nranks,
                                     int rank) {
  (void)comm, (void)handle, (void)id, (void)nranks, (void)rank;
  w8a8_clear_error();
  return no_cuda("w8a8_comm_create_nccl_id (NCCL)");
}
w8a8_status w8a8_tp_gpu_create_world(const char *fn, w8a8_comm **comm, w8a8_handle *handle, const void *mpi_comm) {
  (void)comm, (void)handle, (void)mpi_comm;
  return no_cuda(fn);
}
w8a8_status w8a8_tp_gpu_comm_reserve(const char *fn, w8a8_comm *c, int64_t max_m, int64_t max_n, int64_t max_k) {
  (void)c, (void)max_m, (void)max_n, (void)max_k;
  return no_cuda(fn);
}
w8a8_status w8a8_tp_gpu_comm_destroy(w8a8_comm *c) {
  (void)c;
  return no_cuda("w8a8_comm_destroy");
}
w8a8_status w8a8_tp_gpu_all_gather_scaled_mm(const char *fn, w8a8_comm *c, const w8a8_tp_args *x) {
  (void)c, (void)x;
  return no_cuda(fn);
}
w8a8_status w8a8_tp_gpu_scaled_mm_reduce_scatter(const char *fn, w8a8_comm *c, const w8a8_tp_args *x) {
  (void)c, (void)x;
  return no_cuda(fn);
}
void w8a8_tp_gpu_on_break(w8a8_comm *c, w8a8_status s, const char *msg) { (void)c, (void)s, (void)msg; }
void w8a8_tp_gpu_on_abort(w8a8_comm *c) { (void)c; }
bool w8a8_tp_gpu_group_broken(const w8a8_comm *c, int *status, char *msg, size_t n) {
  (void)c, (void)status, (void)msg, (void)n;
  return false;
}
w8a8_status w8a8_tp_gpu_async_error(const char *fn, const w8a8_comm *c) {
  (void)fn, (void)c;
  return W8A8_SUCCESS;
}

#else /* W8A8_HAVE_CUDA */

#include "../cuda/cuda_backend.h"
#include "tp_gpu.h"

#ifdef W8A8_HAVE_NCCL
#include <nccl.h>
_Static_assert(sizeof(ncclUniqueId) == W8A8_UNIQUE_ID_BYTES, "w8a8_unique_id must hold an ncclUniqueId");
#endif

bool w8a8_tp_is_gpu(const w8a8_comm *c) { return c && c->gpu != NULL; }

/* IPC transport: one rank's record in the workspace-handle exchange (ipc_exchange). */
typedef struct ipc_mem_rec {
  cudaIpcMemHandle_t h;
  int64_t gen; /* ws_gen; 0 = no workspace yet */
  int64_t ok;
} ipc_mem_rec;

const char *w8a8_tp_transport(const w8a8_comm *c, const char **why) {
  if (why) *why = "";
  if (!c) return "none";
  const w8a8_tp_gpu *gs = c->gpu;
  if (!gs) return "mpi";
  if (why) *why = gs->ipc_note;
  return gs->mode == TP_GPU_GROUP ? "copy_engine" : gs->mode == TP_GPU_IPC ? "ipc" : "nccl";
}

w8a8_status w8a8_tp_nccl_err(const char *fn, const char *what, int result) {
#ifdef W8A8_HAVE_NCCL
  return w8a8_err(W8A8_ERROR_COMM, "%s: %s failed: %s (NCCL result %d)", fn, what,
                  ncclGetErrorString((ncclResult_t)result), result);
#else
  return w8a8_err(W8A8_ERROR_COMM, "%s: %s failed (NCCL result %d)", fn, what, result);
#endif
}

/* Run with the communicator's device current; restore the caller's. */
static int dev_enter(int dev) {
  int prev = -1;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = -1;
  if (prev != dev) cudaSetDevice(dev);
  return prev;
}
static void dev_exit(int prev, int dev) {
  if (prev >= 0 && prev != dev) cudaSetDevice(prev);
}

/* A host wait for stream st, polled (cudaStreamQuery) until `deadline`, and an abort of c (NULL: none):
 * cudaErrorNotReady when it gave up (*why: "timeout" or "abort"), else what the stream reported. Where NCCL
 * work on the stream waits for a peer, a synchronization would wait for ever. */
static cudaError_t sync_until(cudaStream_t st, double deadline, const w8a8_comm *c, const char **why) {
  const double t0 = w8a8_tp_now();
  for (int it = 0;; it++) {
    cudaError_t e = cudaStreamQuery(st);
    if (e != cudaErrorNotReady) return e;
    if (c && __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) {
      *why = "abort";
      return cudaErrorNotReady;
    }
    if (w8a8_tp_now() > deadline) {
      *why = "timeout";
      return cudaErrorNotReady;
    }
    w8a8_tp_backoff(it, t0);
  }
}

#ifdef W8A8_HAVE_MPI
/* A collective of the creation (started: rc), polled until `deadline`. Its buffers must be on the heap:
 * one left pending by W8A8_ERROR_TIMEOUT keeps them. */
static w8a8_status coll_until(const char *fn, int rc, MPI_Request *req, double deadline, const char *what) {
  if (rc != MPI_SUCCESS) return w8a8_tp_mpi_err(fn, what, rc);
  return w8a8_tp_mpi_wait_until(fn, req, deadline, what);
}
#endif

/* ---- the in-process group: host barrier with a timeout --------------------------------- */

static tp_group *group_new(int W) {
  tp_group *g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->W = W;
  g->refs = W;
  g->sig = calloc((size_t)2 * W * TP_SIG_COUNT, sizeof *g->sig);
  g->capture = calloc((size_t)2 * W, sizeof *g->capture);
  g->comm = calloc((size_t)W, sizeof *g->comm);
  if (!g->sig || !g->capture || !g->comm || pthread_mutex_init(&g->mu, NULL)) {
    free(g->sig), free(g->capture), free(g->comm), free(g);
    return NULL;
  }
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&g->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (rc) {
    pthread_mutex_destroy(&g->mu);
    free(g->sig), free(g->capture), free(g->comm), free(g);
    return NULL;
  }
  return g;
}

static void group_free(tp_group *g) {
  pthread_cond_destroy(&g->cv);
  pthread_mutex_destroy(&g->mu);
  free(g->sig), free(g->capture), free(g->comm), free(g);
}

/* The group's break as this rank's error (g->mu held by the caller; c may be NULL). */
static w8a8_status group_error(const char *fn, tp_group *g, const w8a8_comm *c) {
  if (c && __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE))
    return w8a8_err(W8A8_ERROR_ABORTED, "%s: the communicator was aborted on this rank (w8a8_comm_abort)", fn);
  /* a peer's timeout is this call's timeout too (the same collective did not complete in time) */
  const w8a8_status s = g->cause == W8A8_ERROR_TIMEOUT ? W8A8_ERROR_TIMEOUT : W8A8_ERROR_BROKEN;
  return w8a8_err(s, "%s: the rank group is broken (%s, %s); destroy the communicators", fn,
                  w8a8_status_name((w8a8_status)g->cause), g->why);
}

static void group_break_locked(tp_group *g, int rank, int s, const char *msg) {
  if (!g->broken) {
    g->broken = true;
    g->cause = s;
    snprintf(g->why, sizeof g->why, "rank %d: %s", rank, msg);
  }
  pthread_cond_broadcast(&g->cv);
}

w8a8_status w8a8_tp_group_barrier(const char *fn, tp_group *g, w8a8_comm *c, double deadline) {
  pthread_mutex_lock(&g->mu);
  w8a8_status s = W8A8_SUCCESS;
  if (g->broken) {
    s = group_error(fn, g, c);
    pthread_mutex_unlock(&g->mu);
    return c ? w8a8_tp_break(fn, c, s, false) : s;
  }
  uint64_t gen = g->gen;
  if (++g->arrived == g->W) {
    g->arrived = 0;
    g->gen++;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return W8A8_SUCCESS;
  }
  struct timespec dl;
  if (isfinite(deadline)) {
    dl.tv_sec = (time_t)deadline;
    dl.tv_nsec = (long)((deadline - (double)dl.tv_sec) * 1e9);
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
  }
  bool mine = false; /* this rank's deadline broke the group */
  while (g->gen == gen && !g->broken) {
    if (!isfinite(deadline)) {
      pthread_cond_wait(&g->cv, &g->mu);
    } else if (pthread_cond_timedwait(&g->cv, &g->mu, &dl) == ETIMEDOUT && g->gen == gen && !g->broken) {
      /* A rank that never arrives (it skipped a collective call, or failed before it) would
       * otherwise hang the others for ever: fail instead, and mark the group unusable. */
      char msg[200];
      snprintf(msg, sizeof msg, "only %d of %d ranks reached the collective within the timeout", g->arrived, g->W);
      group_break_locked(g, c ? c->rank : -1, W8A8_ERROR_TIMEOUT, msg);
      mine = true;
    }
  }
  const bool ok = g->gen != gen;
  const int arrived = g->arrived;
  if (!ok && !mine) s = group_error(fn, g, c);
  pthread_mutex_unlock(&g->mu);
  if (ok) return W8A8_SUCCESS;
  if (mine) {
    const double t = c ? (double)__atomic_load_n(&c->timeout_us, __ATOMIC_RELAXED) * 1e-6 : 0.0;
    s = w8a8_err(W8A8_ERROR_TIMEOUT,
                 "%s: only %d of %d ranks reached the collective within the timeout (%g s; w8a8_comm_set_timeout, "
                 "W8A8_TP_TIMEOUT_S); every rank must make the same calls in the same order. The rank group is now "
                 "broken",
                 fn, arrived, g->W, t);
  }
  return c ? w8a8_tp_break(fn, c, s, false) : s;
}

void w8a8_tp_group_break(tp_group *g, int rank, int s, const char *msg) {
  pthread_mutex_lock(&g->mu);
  group_break_locked(g, rank, s, msg);
  pthread_mutex_unlock(&g->mu);
}

/* ---- the failure state of GPU communicators (tp_fault.c asks) --------------------------------- */

void w8a8_tp_gpu_on_break(w8a8_comm *c, w8a8_status s, const char *msg) {
  w8a8_tp_gpu *gs = c->gpu;
  if (gs && gs->mode == TP_GPU_GROUP && gs->group) w8a8_tp_group_break(gs->group, c->rank, s, msg);
}

void w8a8_tp_gpu_on_abort(w8a8_comm *c) {
  w8a8_tp_gpu *gs = c->gpu;
  if (gs && gs->mode == TP_GPU_GROUP && gs->group)
    w8a8_tp_group_break(gs->group, c->rank, W8A8_ERROR_ABORTED, "w8a8_comm_abort was called");
}

bool w8a8_tp_gpu_group_broken(const w8a8_comm *c, int *status, char *msg, size_t n) {
  const w8a8_tp_gpu *gs = c->gpu;
  if (!gs || gs->mode != TP_GPU_GROUP || !gs->group) return false;
  tp_group *g = gs->group;
  pthread_mutex_lock(&g->mu);
  const bool broken = g->broken;
  if (broken) {
    *status = g->cause;
    if (msg) snprintf(msg, n, "%s", g->why);
  }
  pthread_mutex_unlock(&g->mu);
  return broken;
}

w8a8_status w8a8_tp_gpu_async_error(const char *fn, const w8a8_comm *c) {
#ifdef W8A8_HAVE_NCCL
  const w8a8_tp_gpu *gs = c->gpu;
  if (gs && gs->nccl && gs->mode != TP_GPU_GROUP) {
    ncclResult_t r = ncclSuccess;
    if (ncclCommGetAsyncError((ncclComm_t)gs->nccl, &r) == ncclSuccess && r != ncclSuccess && r != ncclInProgress)
      return w8a8_tp_nccl_err(fn, "ncclCommGetAsyncError", r);
  }
#else
  (void)fn, (void)c;
#endif
  return W8A8_SUCCESS;
}

/* ---- creation -------------------------------------------------------------------------------- */

static void gpu_comm_free(w8a8_comm *c) {
  if (!c) return;
  w8a8_tp_gpu *gs = c->gpu;
  /* (MPI may still use a pending collective's buffers: the tables stay, as comm.c's comm_free does) */
#ifdef W8A8_HAVE_MPI
  const bool pending = c->mpi_pending;
#else
  const bool pending = false;
#endif
  if (gs && gs->leak_device) {
    /* (a broken IPC communicator: its device memory and events stay, see w8a8_tp_gpu_comm_destroy) */
#ifdef W8A8_HAVE_NCCL
    if (gs->owns_nccl && gs->nccl) ncclCommAbort((ncclComm_t)gs->nccl);
#endif
    free(gs->ev_step);
    free(gs->peer_ws), free(gs->peer_ready), free(gs->peer_done), free(gs->peer_gen), free(gs->xgen);
    free(gs);
    gs = NULL;
  }
  if (gs) {
    int prev = dev_enter(gs->device);
#ifdef W8A8_HAVE_NCCL
    /* A broken communicator's NCCL work may wait for ever on the device (a dead peer), and every cudaFree
     * below waits for the device: NCCL's abort ends that work first. */
    if (gs->owns_nccl && gs->nccl && w8a8_tp_is_broken(c)) {
      ncclCommAbort((ncclComm_t)gs->nccl);
      gs->nccl = NULL;
    }
#endif
    if (gs->ws) cudaFree(gs->ws);
    if (gs->side) cudaStreamDestroy(gs->side);
    if (gs->ev_fork) cudaEventDestroy(gs->ev_fork);
    if (gs->ev_ready) cudaEventDestroy(gs->ev_ready);
    if (gs->ev_done) cudaEventDestroy(gs->ev_done);
    if (gs->ev_done_cap) cudaEventDestroy(gs->ev_done_cap);
    for (int i = 0; i < TP_TRACE_MAX; i++)
      if (gs->tr_ev[i]) cudaEventDestroy(gs->tr_ev[i]);
    if (gs->ev_step)
      for (int i = 0; i < c->size; i++)
        if (gs->ev_step[i]) cudaEventDestroy(gs->ev_step[i]);
    free(gs->ev_step);
    if (gs->d_sig) cudaFree(gs->d_sig);
    if (gs->flags) cudaFree(gs->flags);
    if (gs->h_sig) cudaFreeHost(gs->h_sig);
    /* IPC transport: what this rank opened of its peers' first (w8a8_tp_gpu_comm_destroy has
     * already closed them after a barrier; this covers failed creations), then its own. */
    for (int i = 0; i < c->size; i++) {
      if (gs->peer_ws && gs->peer_ws[i]) cudaIpcCloseMemHandle(gs->peer_ws[i]);
      if (gs->peer_ready && gs->peer_ready[i]) cudaEventDestroy(gs->peer_ready[i]);
      if (gs->peer_done && gs->peer_done[i]) cudaEventDestroy(gs->peer_done[i]);
    }
    free(gs->peer_ws), free(gs->peer_ready), free(gs->peer_done), free(gs->peer_gen), free(gs->xgen);
    if (!pending) {
      free(gs->ipc_tab), free(gs->ipc_mem), free(gs->ipc_row), free(gs->ipc_mine);
    }
    if (gs->ipc_ready) cudaEventDestroy(gs->ipc_ready);
    if (gs->ipc_done) cudaEventDestroy(gs->ipc_done);
    if (gs->ws_cap) cudaFree(gs->ws_cap);
    if (gs->ws_retired) cudaFree(gs->ws_retired);
#ifdef W8A8_HAVE_NCCL
    if (gs->owns_nccl && gs->nccl) ncclCommDestroy((ncclComm_t)gs->nccl);
#endif
    cudaGetLastError();
    dev_exit(prev, gs->device);
    free(gs);
  }
  if (!pending) free(c->sig_all);
#ifdef W8A8_HAVE_MPI
  if (!pending) free(c->sig_mine);
#endif
  free(c->m_count), free(c->m_offset);
  w8a8_tp_fault_fini(c);
  c->magic = 0;
  free(c);
}

/* Peer access this process has enabled (device i -> device j), so that it is enabled once. */
#define PEER_MAX 64
static unsigned char g_peer_on[PEER_MAX][PEER_MAX];
/* Whether a kernel on GPU di may store into GPU dj's memory (the same GPU, or peer access enabled by a
 * group's creation in this process). */
W8A8_HIDDEN int w8a8_tp_gpu_peer_on(int di, int dj) {
  if (di == dj) return 1;
  return di >= 0 && dj >= 0 && di < PEER_MAX && dj < PEER_MAX && __atomic_load_n(&g_peer_on[di][dj], __ATOMIC_ACQUIRE);
}

/* A communicator of rank `rank` of W on `h`'s GPU: tables, side stream, events. */
static w8a8_status gpu_comm_new(const char *fn, w8a8_handle *h, int W, int rank, w8a8_comm_kind kind,
                                w8a8_comm **out) {
  w8a8_comm *c = calloc(1, sizeof *c);
  w8a8_tp_gpu *gs = calloc(1, sizeof *gs);
  if (c) c->gpu = gs;
  if (!c || !gs) {
    free(c), free(gs);
    return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not allocate the communicator", fn);
  }
  c->kind = kind;
  c->handle = h;
  c->rank = rank;
  c->size = W;
  bool ok = w8a8_tp_fault_init(c);
#ifdef W8A8_HAVE_MPI
  c->mpi = MPI_COMM_NULL;
  c->coll_req = MPI_REQUEST_NULL;
  c->notice_req = MPI_REQUEST_NULL;
  c->sig_mine = calloc(TP_SIG_COUNT + 2, sizeof *c->sig_mine);
  ok = ok && c->sig_mine;
#endif
  c->sig_all = calloc((size_t)W * TP_SIG_COUNT, sizeof *c->sig_all);
  c->m_count = calloc((size_t)W, sizeof *c->m_count);
  c->m_offset = calloc((size_t)W + 1, sizeof *c->m_offset);
  gs->ev_step = calloc((size_t)W, sizeof *gs->ev_step);
  if (!ok || !c->sig_all || !c->m_count || !c->m_offset || !gs->ev_step) {
    gpu_comm_free(c);
    return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not allocate the communicator's tables", fn);
  }
  gs->device = h->device_index;
  w8a8_handle_info info;
  w8a8_get_info(h, &info);
  gs->num_sms = info.num_sms;
  gs->cc = info.cc_major * 10 + info.cc_minor;
  int pitch = 0;
  gs->max_pitch = cudaDeviceGetAttribute(&pitch, cudaDevAttrMaxPitch, gs->device) == cudaSuccess && pitch > 0 ? pitch
                                                                                                            : INT32_MAX;
  cudaGetLastError();
  int prev = dev_enter(gs->device);
  cudaError_t e = cudaStreamCreateWithFlags(&gs->side, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&gs->ev_fork, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&gs->ev_ready, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&gs->ev_done, cudaEventDisableTiming);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&gs->ev_done_cap, cudaEventDisableTiming);
  for (int i = 0; i < W && e == cudaSuccess; i++) e = cudaEventCreateWithFlags(&gs->ev_step[i], cudaEventDisableTiming);
  gs->tr_on = w8a8_knob_int(W8A8_KNOB_TP_TRACE) != 0;
  for (int i = 0; gs->tr_on && i < TP_TRACE_MAX && e == cudaSuccess; i++) e = cudaEventCreate(&gs->tr_ev[i]);
  /* The one-GEMM all-gather's ready flags (one per chunk, at most W8A8_MM_MAX_READY: a peer's rows may
   * come in pieces, ag_pieces): reset at the start of each pulling call that uses them, and at the end of
   * calls that may precede a push (tp_gpu.c ag_push: a push needs them zero before the peers write). */
  if (e == cudaSuccess) e = cudaMalloc((void **)&gs->flags, sizeof(unsigned int) * W8A8_MM_MAX_READY);
  /* zero (the push all-gather's idle value: peers may set them before this rank's first call) */
  if (e == cudaSuccess) e = cudaMemsetAsync(gs->flags, 0, sizeof(unsigned int) * W8A8_MM_MAX_READY, gs->side);
  if (e == cudaSuccess) e = cudaStreamSynchronize(gs->side);
  dev_exit(prev, gs->device);
  if (e != cudaSuccess) {
    w8a8_status s = w8a8_cuda_error(fn, "creating the communicator's stream and events", e);
    gpu_comm_free(c);
    return s;
  }
  c->magic = W8A8_COMM_MAGIC;
  *out = c;
  return W8A8_SUCCESS;
}

static w8a8_status check_cuda_handle(const char *fn, const char *arg, const w8a8_handle *h) {
  W8A8_CHECK(w8a8_check_handle(fn, h));
  if (h->kind != W8A8_DEVICE_CUDA)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                    "%s: %s is a CPU handle; GPU communicators need CUDA handles (CPU ranks: w8a8_comm_create_mpi)", fn,
                    arg);
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_create_local(w8a8_comm **comms, w8a8_handle **handles, int nranks) {
  static const char fn[] = "w8a8_comm_create_local";
  w8a8_clear_error();
  if (!comms) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: comms is NULL; expected an array of nranks pointers", fn);
  if (!handles) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: handles is NULL; expected nranks CUDA handles", fn);
  if (nranks < 1 || nranks > W8A8_TP_GPU_MAX_RANKS)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: nranks is %d; expected 1..%d", fn, nranks, W8A8_TP_GPU_MAX_RANKS);
  for (int i = 0; i < nranks; i++) {
    char arg[32];
    snprintf(arg, sizeof arg, "handles[%d]", i);
    W8A8_CHECK(check_cuda_handle(fn, arg, handles[i]));
    for (int j = 0; j < i; j++)
      if (handles[j] == handles[i])
        return w8a8_err(W8A8_ERROR_INVALID_VALUE,
                        "%s: handles[%d] and handles[%d] are the same handle; each rank needs its own (its stream and "
                        "workspace)",
                        fn, j, i);
  }
  /* Ranks on different GPUs read each other's buffers: peer access where the GPUs allow it
   * (without it cudaMemcpyAsync stages through the host: correct, slower). */
  for (int i = 0; i < nranks; i++)
    for (int j = 0; j < nranks; j++) {
      int di = handles[i]->device_index, dj = handles[j]->device_index, can = 0;
      if (di == dj || cudaDeviceCanAccessPeer(&can, di, dj) != cudaSuccess || !can) continue;
      /* Once per pair and process: a second cudaDeviceEnablePeerAccess fails with
       * cudaErrorPeerAccessAlreadyEnabled, harmless but reported by compute-sanitizer as an API
       * error in every test that creates ranks. */
      if (w8a8_tp_gpu_peer_on(di, dj)) continue;
      int prev = dev_enter(di);
      cudaError_t e = cudaDeviceEnablePeerAccess(dj, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
        dev_exit(prev, di);
        return w8a8_cuda_error(fn, "cudaDeviceEnablePeerAccess", e);
      }
      cudaGetLastError();
      dev_exit(prev, di);
      if (di < PEER_MAX && dj < PEER_MAX) __atomic_store_n(&g_peer_on[di][dj], 1, __ATOMIC_RELEASE);
    }
  tp_group *g = group_new(nranks);
  if (!g) return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not allocate the rank group", fn);
  w8a8_comm *made[W8A8_TP_GPU_MAX_RANKS] = {0};
  w8a8_status s = W8A8_SUCCESS;
  int i = 0;
  for (; i < nranks && s == W8A8_SUCCESS; i++) {
    s = gpu_comm_new(fn, handles[i], nranks, i, W8A8_COMM_KIND_LOCAL, &made[i]);
    if (s != W8A8_SUCCESS) break;
    ((w8a8_tp_gpu *)made[i]->gpu)->mode = TP_GPU_GROUP;
    ((w8a8_tp_gpu *)made[i]->gpu)->group = g;
    g->comm[i] = made[i];
    if (!w8a8_registry_add(made[i])) {
      s = w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not grow the communicator registry", fn);
      i++;
      break;
    }
  }
  if (s != W8A8_SUCCESS) {
    for (int j = 0; j < nranks; j++)
      if (made[j]) {
        w8a8_registry_remove(made[j]);
        gpu_comm_free(made[j]);
      }
    group_free(g);
    return s;
  }
  for (int j = 0; j < nranks; j++) w8a8_tp_gpu_probe_push(made[j]);
  for (int j = 0; j < nranks; j++) w8a8_tp_set_crossovers(made[j]);
  for (int j = 0; j < nranks; j++) comms[j] = made[j];
  return W8A8_SUCCESS;
}

#ifdef W8A8_HAVE_NCCL

/* What ranks tell each other at creation over NCCL (a device buffer, then a sync: fine at creation). */
typedef struct nccl_hello {
  int64_t pid;
  int64_t host; /* hash of the host name */
  int64_t group; /* rank 0: the address of its rank group (meaningful only inside its process) */
  int64_t version;
  int64_t failed;
  int64_t token; /* process_token(): with pid and host, whether two ranks share one process */
} nccl_hello;

/* A random token of this process, made once: ranks in different processes can share a pid and a host name
 * (separate PID namespaces on one host, e.g. containers on the host's network, each rank pid 1), and rank 0's
 * group address means something only inside its own process (ranks of two processes taken for one would lock
 * a mutex at another process's address). */
static pthread_once_t g_token_once = PTHREAD_ONCE_INIT;
static int64_t g_token;
static void token_init(void) {
  g_token = (int64_t)(w8a8_tp_random64() ^ ((uint64_t)(uintptr_t)&g_token >> 2)); /* 62 bits: non-negative */
}
static int64_t process_token(void) {
  pthread_once(&g_token_once, token_init);
  return g_token;
}

static int64_t host_hash(void) {
  char name[256] = {0};
  gethostname(name, sizeof name - 1);
  uint64_t h = 1469598103934665603ull;
  for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  return (int64_t)(h >> 1);
}

/* The collective part of every NCCL creation: who is where, and the transport. */
static w8a8_status nccl_comm_setup(const char *fn, w8a8_comm **comm, w8a8_handle *h, ncclComm_t nc, bool owns,
                                   w8a8_status local) {
  int W = 0, rank = 0, dev = -1;
  ncclResult_t nr = ncclCommCount(nc, &W);
  if (nr == ncclSuccess) nr = ncclCommUserRank(nc, &rank);
  if (nr == ncclSuccess) nr = ncclCommCuDevice(nc, &dev);
  if (nr != ncclSuccess) return w8a8_tp_nccl_err(fn, "ncclCommCount/UserRank/CuDevice", nr);
  if (local == W8A8_SUCCESS && W > W8A8_TP_GPU_MAX_RANKS)
    local = w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: the NCCL communicator has %d ranks; at most %d are supported", fn,
                     W, W8A8_TP_GPU_MAX_RANKS);
  if (local == W8A8_SUCCESS && dev != h->device_index)
    local = w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: the NCCL communicator's rank %d is on GPU %d but handle is on GPU %d",
                     fn, rank, dev, h->device_index);
  char saved[512];
  snprintf(saved, sizeof saved, "%s", w8a8_last_error());
  w8a8_comm *c = NULL;
  if (local == W8A8_SUCCESS) {
    local = gpu_comm_new(fn, h, W, rank, W8A8_COMM_KIND_NCCL, &c);
    snprintf(saved, sizeof saved, "%s", w8a8_last_error());
  }
  tp_group *mine = (local == W8A8_SUCCESS && rank == 0) ? group_new(W) : NULL;
  w8a8_tp_gpu *gs = c ? c->gpu : NULL;
  nccl_hello hi = {(int64_t)getpid(), host_hash(), (int64_t)(intptr_t)mine, W8A8_VERSION,
                   local != W8A8_SUCCESS || (rank == 0 && !mine), process_token()};
  /* Exchange the hellos (the one host synchronization, at creation). */
  int prev = dev_enter(dev);
  nccl_hello *d = NULL, *all = calloc((size_t)W, sizeof *all);
  /* A rank that failed locally has no side stream: a temporary non-blocking one (the legacy stream
   * would synchronize with the application's blocking streams, and invalidate a capture on one). */
  cudaStream_t st = gs ? gs->side : NULL, tmp = NULL;
  if (!gs && cudaStreamCreateWithFlags(&tmp, cudaStreamNonBlocking) == cudaSuccess) st = tmp;
  cudaError_t e = cudaMalloc((void **)&d, sizeof(nccl_hello) * (size_t)(W + 1));
  w8a8_status s = W8A8_SUCCESS;
  if (e == cudaSuccess) e = cudaMemcpyAsync(d + W, &hi, sizeof hi, cudaMemcpyHostToDevice, st);
  if (e == cudaSuccess) {
    nr = ncclAllGather(d + W, d, sizeof hi, ncclUint8, nc, st);
    if (nr != ncclSuccess) s = w8a8_tp_nccl_err(fn, "ncclAllGather (creation)", nr);
  }
  if (e == cudaSuccess && s == W8A8_SUCCESS && all)
    e = cudaMemcpyAsync(all, d, sizeof(nccl_hello) * (size_t)W, cudaMemcpyDeviceToHost, st);
  const char *why = "";
  if (e == cudaSuccess) e = sync_until(st, w8a8_tp_deadline_in(w8a8_tp_env_timeout_us()), NULL, &why);
  if (e == cudaErrorNotReady) {
    /* A rank never joined: the exchange stays on the stream (its buffers with it) until NCCL's abort. */
    dev_exit(prev, dev);
    if (mine) group_free(mine);
    if (c) {
      gs->owns_nccl = false;
      c->magic = 0; /* (its stream, events and tables are left: the stuck exchange may still use them) */
    }
    return w8a8_err(W8A8_ERROR_TIMEOUT,
                    "%s: the creation's exchange (ncclAllGather) did not complete within W8A8_TP_TIMEOUT_S: a rank "
                    "did not join or is late. The NCCL communicator has that collective pending: abort it "
                    "(ncclCommAbort)",
                    fn);
  }
  if (e != cudaSuccess && s == W8A8_SUCCESS) s = w8a8_cuda_error(fn, "the creation exchange", e);
  if (d) cudaFree(d);
  if (tmp) cudaStreamDestroy(tmp);
  cudaGetLastError();
  dev_exit(prev, dev);
  if (s == W8A8_SUCCESS && !all) s = w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
  bool same_process = true;
  if (local != W8A8_SUCCESS) {
    s = w8a8_err(local, "%s", saved); /* this rank's own error, whatever the exchange did */
  } else if (s == W8A8_SUCCESS) {
    for (int j = 0; j < W && s == W8A8_SUCCESS; j++) {
      if (all[j].failed)
        s = w8a8_err(W8A8_ERROR_COMM_MISMATCH, "%s: rank %d's arguments were rejected; see its error", fn, j);
      else if (all[j].version != W8A8_VERSION)
        s = w8a8_err(W8A8_ERROR_COMM_MISMATCH, "%s: ranks run different libw8a8 versions (%lld and %lld)", fn,
                     LL(all[j].version), LL(W8A8_VERSION));
      if (all[j].pid != all[0].pid || all[j].host != all[0].host || all[j].token != all[0].token) same_process = false;
    }
  }
  if (s != W8A8_SUCCESS) {
    if (mine) group_free(mine);
    if (c) {
      gs->owns_nccl = false; /* the caller keeps its ncclComm_t on failure */
      gpu_comm_free(c);
    }
    free(all);
    return s;
  }
  gs->nccl = nc;
  gs->owns_nccl = owns;
  if (same_process) {
    /* Every rank is a thread of this process: the copy-engine transport of the in-process
     * group, with NCCL kept for the unfused path. Rank 0's group is shared by all. */
    tp_group *g = (tp_group *)(intptr_t)all[0].group;
    gs->mode = TP_GPU_GROUP;
    gs->group = g;
    pthread_mutex_lock(&g->mu);
    g->comm[rank] = c;
    pthread_mutex_unlock(&g->mu);
    free(all);
    /* Nobody uses a peer's entry before every rank has registered. */
    s = w8a8_tp_group_barrier(fn, g, c, w8a8_tp_deadline_in(w8a8_tp_env_timeout_us()));
    if (s == W8A8_SUCCESS) w8a8_tp_gpu_probe_push(c);
  } else {
    if (mine) group_free(mine);
    free(all);
    gs->mode = TP_GPU_NCCL;
    prev = dev_enter(dev);
    e = cudaMalloc((void **)&gs->d_sig, sizeof(int64_t) * (size_t)(W + 1) * TP_SIG_COUNT);
    if (e == cudaSuccess) e = cudaMallocHost((void **)&gs->h_sig, sizeof(int64_t) * (size_t)(W + 1) * TP_SIG_COUNT);
    dev_exit(prev, dev);
    if (e != cudaSuccess) s = w8a8_cuda_error(fn, "allocating the agreement tables", e);
  }
  if (s == W8A8_SUCCESS) w8a8_tp_set_crossovers(c);
  if (s == W8A8_SUCCESS && !w8a8_registry_add(c))
    s = w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not grow the communicator registry", fn);
  if (s != W8A8_SUCCESS) {
    gs->owns_nccl = false;
    if (gs->group) {
      pthread_mutex_lock(&gs->group->mu);
      gs->group->comm[rank] = NULL;
      bool last = --gs->group->refs == 0;
      pthread_mutex_unlock(&gs->group->mu);
      if (last) group_free(gs->group);
    }
    gpu_comm_free(c);
    return s;
  }
  *comm = c;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_create_nccl(w8a8_comm **comm, w8a8_handle *handle, void *nccl_comm) {
  static const char fn[] = "w8a8_comm_create_nccl";
  w8a8_clear_error();
  if (!nccl_comm) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: nccl_comm is NULL; expected an ncclComm_t", fn);
  /* Local errors still join the creation exchange so that every rank fails together. */
  w8a8_status local = W8A8_SUCCESS;
  if (!comm)
    local = w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: comm is NULL; expected a w8a8_comm** to fill", fn);
  else
    local = check_cuda_handle(fn, "handle", handle);
  /* A rank without a usable handle takes part too (the exchange runs on the NCCL communicator's GPU,
   * and nccl_comm_setup reads the handle only where `local` is clean): returning before it would leave
   * the peers waiting in its ncclAllGather. */
  return nccl_comm_setup(fn, comm, handle, (ncclComm_t)nccl_comm, false, local);
}

w8a8_status w8a8_comm_unique_id(w8a8_unique_id *id) {
  static const char fn[] = "w8a8_comm_unique_id";
  w8a8_clear_error();
  if (!id) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: id is NULL", fn);
  ncclUniqueId u;
  ncclResult_t nr = ncclGetUniqueId(&u);
  if (nr != ncclSuccess) return w8a8_tp_nccl_err(fn, "ncclGetUniqueId", nr);
  memcpy(id->internal, u.internal, sizeof u.internal);
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_create_nccl_id(w8a8_comm **comm, w8a8_handle *handle, const w8a8_unique_id *id, int nranks,
                                     int rank) {
  static const char fn[] = "w8a8_comm_create_nccl_id";
  w8a8_clear_error();
  /* Without the id, or with a rank outside [0, nranks), this rank cannot join the peers' creation. */
  if (!id) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: id is NULL", fn);
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: rank %d of nranks %d; expected 0 <= rank < nranks", fn, rank, nranks);
  /* Other local errors still join it, and the creation exchange then fails every rank together
   * instead of leaving the peers waiting in ncclCommInitRank: on the handle's GPU where the handle
   * is a usable CUDA handle (a NULL comm), else on the current GPU (NCCL refuses two ranks on one
   * GPU: then the current GPU must be this rank's). */
  const bool handle_ok = check_cuda_handle(fn, "handle", handle) == W8A8_SUCCESS;
  w8a8_status local = W8A8_SUCCESS;
  if (!comm)
    local = w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: comm is NULL; expected a w8a8_comm** to fill", fn);
  else if (!handle_ok)
    local = check_cuda_handle(fn, "handle", handle); /* (its message again) */
  int dev = -1;
  if (handle_ok)
    dev = handle->device_index;
  else if (cudaGetDevice(&dev) != cudaSuccess)
    return local;
  char saved[512];
  snprintf(saved, sizeof saved, "%s", w8a8_last_error());
  ncclUniqueId u;
  memcpy(u.internal, id->internal, sizeof u.internal);
  ncclComm_t nc = NULL;
  int prev = dev_enter(dev);
  ncclResult_t nr = ncclCommInitRank(&nc, nranks, u, rank);
  dev_exit(prev, dev);
  if (nr != ncclSuccess) return local != W8A8_SUCCESS ? w8a8_err(local, "%s", saved) : w8a8_tp_nccl_err(fn, "ncclCommInitRank", nr);
  w8a8_status s = nccl_comm_setup(fn, comm, handle, nc, true, local);
  if (s == W8A8_ERROR_TIMEOUT)
    ncclCommAbort(nc); /* (its creation exchange is stuck: ncclCommDestroy would wait for it) */
  else if (s != W8A8_SUCCESS)
    ncclCommDestroy(nc);
  return s;
}

#ifdef W8A8_HAVE_MPI
/* ---- the IPC transport's set-up (W8A8_TP_IPC=1 on every rank; creation only) ------------------- */

/* What a rank tells the others: its host, its GPU (PCI bus id: the ranks' device numbers may
 * differ), and the handles of its two interprocess events. */
typedef struct ipc_hello {
  int64_t host;
  int64_t ok; /* its events and handles were made */
  char bus[32];
  cudaIpcEventHandle_t ev[2]; /* ipc_ready, ipc_done */
} ipc_hello;

/* Free what ipc_setup made when IPC is not chosen. Collective: the peers' copies of this rank's
 * event handles are closed before the barrier, its own events destroyed after it (an imported
 * event must not outlive the exporter's; a barrier that times out leaves them). */
static void ipc_undo(const char *fn, w8a8_comm *c, double deadline) {
  w8a8_tp_gpu *gs = c->gpu;
  int prev = dev_enter(gs->device);
  for (int j = 0; j < c->size; j++) {
    if (gs->peer_ready && gs->peer_ready[j]) cudaEventDestroy(gs->peer_ready[j]);
    if (gs->peer_done && gs->peer_done[j]) cudaEventDestroy(gs->peer_done[j]);
  }
  MPI_Request req = MPI_REQUEST_NULL;
  const bool met = coll_until(fn, MPI_Ibarrier(c->mpi, &req), &req, deadline, "MPI_Ibarrier (IPC set-up)") ==
                   W8A8_SUCCESS;
  if (!met) gs->ipc_ready = gs->ipc_done = NULL; /* (left to the peers that may still hold them) */
  if (gs->ipc_ready) cudaEventDestroy(gs->ipc_ready);
  if (gs->ipc_done) cudaEventDestroy(gs->ipc_done);
  cudaGetLastError();
  dev_exit(prev, gs->device);
  free(gs->peer_ws), free(gs->peer_ready), free(gs->peer_done), free(gs->peer_gen), free(gs->xgen);
  free(gs->ipc_tab), free(gs->ipc_mem), free(gs->ipc_row), free(gs->ipc_mine);
  gs->peer_ws = NULL, gs->peer_ready = gs->peer_done = NULL, gs->peer_gen = gs->xgen = NULL;
  gs->ipc_tab = NULL, gs->ipc_mem = NULL, gs->ipc_ready = gs->ipc_done = NULL;
  gs->ipc_row = NULL, gs->ipc_mine = NULL;
}

/* Collective over c->mpi (every rank of a multi-process NCCL communicator calls it when every rank
 * set W8A8_TP_IPC=1): make this rank's interprocess events, check that every peer is on this
 * host with a GPU visible here and reachable by peer access, open the peers' events; IPC is
 * chosen only when every rank says yes (one MPI_Allreduce), else NCCL stays and ipc_note says
 * why. Only MPI failures are errors. */
static w8a8_status ipc_setup(const char *fn, w8a8_comm *c, double deadline) {
  w8a8_tp_gpu *gs = c->gpu;
  const int W = c->size, r = c->rank;
  /* heap: a collective that times out keeps its buffers (coll_until) */
  ipc_hello *hello = calloc((size_t)W + 1, sizeof *hello);
  int *dec = calloc(2, sizeof *dec);
  char *note = calloc(160, 1);
  if (!hello || !dec || !note) {
    free(hello), free(dec), free(note);
    return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: out of memory (IPC set-up)", fn);
  }
  ipc_hello *all = hello, *pmine = hello + W;
#define mine (*pmine)
  mine.host = host_hash();
  gs->peer_ws = calloc((size_t)W, sizeof *gs->peer_ws);
  gs->peer_ready = calloc((size_t)W, sizeof *gs->peer_ready);
  gs->peer_done = calloc((size_t)W, sizeof *gs->peer_done);
  gs->peer_gen = calloc((size_t)W, sizeof *gs->peer_gen);
  gs->xgen = calloc((size_t)W, sizeof *gs->xgen);
  gs->ipc_tab = calloc((size_t)W * TP_IPC_ROW, sizeof *gs->ipc_tab);
  gs->ipc_mem = calloc((size_t)W, sizeof(ipc_mem_rec));
  gs->ipc_row = calloc(TP_IPC_ROW + 4, sizeof *gs->ipc_row);
  gs->ipc_mine = calloc(1, sizeof(ipc_mem_rec));
  const bool mem = gs->peer_ws && gs->peer_ready && gs->peer_done && gs->peer_gen && gs->xgen && gs->ipc_tab &&
                   gs->ipc_mem && gs->ipc_row && gs->ipc_mine;
  int prev = dev_enter(gs->device);
  cudaError_t e = mem ? cudaDeviceGetPCIBusId(mine.bus, (int)sizeof mine.bus, gs->device) : cudaErrorMemoryAllocation;
  const unsigned fl = cudaEventDisableTiming | cudaEventInterprocess;
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&gs->ipc_ready, fl);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&gs->ipc_done, fl);
  if (e == cudaSuccess) e = cudaIpcGetEventHandle(&mine.ev[0], gs->ipc_ready);
  if (e == cudaSuccess) e = cudaIpcGetEventHandle(&mine.ev[1], gs->ipc_done);
  mine.ok = e == cudaSuccess;
  if (e != cudaSuccess) snprintf(note, 160, "rank %d: interprocess events: %s", r, cudaGetErrorString(e));
  cudaGetLastError();
  MPI_Request req = MPI_REQUEST_NULL;
  w8a8_status s = coll_until(
      fn, MPI_Iallgather(pmine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, c->mpi, &req), &req,
      deadline, "MPI_Iallgather (IPC set-up)");
  if (s != W8A8_SUCCESS) {
    dev_exit(prev, gs->device);
    return s; /* (hello, dec and note stay: see coll_until) */
  }
  int ok = 1;
  for (int j = 0; j < W && ok; j++) {
    if (!all[j].ok) {
      ok = 0;
      if (!note[0]) snprintf(note, 160, "rank %d could not make interprocess events", j);
    } else if (all[j].host != mine.host) {
      ok = 0;
      snprintf(note, 160, "ranks %d and %d are on different hosts", r, j);
    }
  }
  for (int j = 0; j < W && ok; j++) {
    if (j == r) continue;
    int dj = -1, can = 0;
    all[j].bus[sizeof all[j].bus - 1] = 0;
    if (cudaDeviceGetByPCIBusId(&dj, all[j].bus) != cudaSuccess) {
      ok = 0;
      snprintf(note, 160, "rank %d's GPU (%s) is not visible to rank %d", j, all[j].bus, r);
    } else if (dj == gs->device) {
      ok = 0;
      snprintf(note, 160, "ranks %d and %d share GPU %s", r, j, all[j].bus);
    } else if (cudaDeviceCanAccessPeer(&can, gs->device, dj) != cudaSuccess || !can) {
      ok = 0;
      snprintf(note, 160, "no peer access from rank %d's GPU %s to rank %d's GPU %s", r, mine.bus, j,
               all[j].bus);
    } else if ((e = cudaIpcOpenEventHandle(&gs->peer_ready[j], all[j].ev[0])) != cudaSuccess ||
               (e = cudaIpcOpenEventHandle(&gs->peer_done[j], all[j].ev[1])) != cudaSuccess) {
      ok = 0;
      snprintf(note, 160, "rank %d: cudaIpcOpenEventHandle of rank %d's events: %s", r, j,
               cudaGetErrorString(e));
    }
    cudaGetLastError();
  }
  dev_exit(prev, gs->device);
  /* The decision (the same on every rank), and the first refusing rank's reason for all. */
  dec[0] = ok ? W : r;
  s = coll_until(fn, MPI_Iallreduce(dec, dec + 1, 1, MPI_INT, MPI_MIN, c->mpi, &req), &req, deadline,
                 "MPI_Iallreduce (IPC set-up)");
  const int first = dec[1];
  if (s == W8A8_SUCCESS && first < W)
    s = coll_until(fn, MPI_Ibcast(note, 160, MPI_CHAR, first, c->mpi, &req), &req, deadline, "MPI_Ibcast (IPC set-up)");
  if (s != W8A8_SUCCESS) return s;
  free(hello), free(dec);
  if (first == W) {
    free(note);
    gs->mode = TP_GPU_IPC;
    gs->ipc_note[0] = 0;
    return W8A8_SUCCESS;
  }
  ipc_undo(fn, c, deadline);
  note[159] = 0;
  snprintf(gs->ipc_note, sizeof gs->ipc_note, "W8A8_TP_IPC=1 but NCCL kept: %s", note);
  free(note);
  return W8A8_SUCCESS;
#undef mine
}

static bool ipc_wanted(void) {
  return w8a8_knob_int(W8A8_KNOB_TP_IPC) == 1;
}

/* What create_world's ranks exchange before NCCL's initialisation (heap: see coll_until). */
typedef struct world_bufs {
  MPI_Comm dup;
  int bv[2], br[2], fin[2];
  ncclUniqueId u;
} world_bufs;

w8a8_status w8a8_tp_gpu_create_world(const char *fn, w8a8_comm **comm, w8a8_handle *handle, const void *mpi_comm) {
  const double deadline = w8a8_tp_deadline_in(w8a8_tp_env_timeout_us());
  world_bufs *wb = calloc(1, sizeof *wb);
  if (!wb) return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
  MPI_Request req = MPI_REQUEST_NULL;
  w8a8_status s = coll_until(fn, MPI_Comm_idup(*(const MPI_Comm *)mpi_comm, &wb->dup, &req), &req, deadline,
                             "MPI_Comm_idup (creation)");
  if (s != W8A8_SUCCESS) return s; /* (wb stays: see coll_until) */
  MPI_Comm dup = wb->dup;
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(dup, &rank);
  MPI_Comm_size(dup, &size);
  /* One allreduce tells every rank whether rank 0 made the id and whether every rank asked
   * for the IPC transport (W8A8_TP_IPC=1): the IPC set-up below is collective, so it runs on
   * every rank or none, whatever each rank's environment says. */
  const bool want_ipc = ipc_wanted();
  wb->bv[0] = rank == 0 && ncclGetUniqueId(&wb->u) != ncclSuccess;
  wb->bv[1] = want_ipc ? 0 : 1;
  s = coll_until(fn, MPI_Iallreduce(wb->bv, wb->br, 2, MPI_INT, MPI_MAX, dup, &req), &req, deadline,
                 "MPI_Iallreduce (creation)");
  const bool anybad = wb->br[0] != 0, all_ipc = wb->br[1] == 0;
  if (s == W8A8_SUCCESS && !anybad)
    s = coll_until(fn, MPI_Ibcast(&wb->u, (int)sizeof wb->u, MPI_BYTE, 0, dup, &req), &req, deadline,
                   "MPI_Ibcast (NCCL id)");
  if (s == W8A8_ERROR_TIMEOUT) return s;
  if (s != W8A8_SUCCESS || anybad) {
    MPI_Comm_free(&dup);
    free(wb);
    return s != W8A8_SUCCESS ? s : w8a8_err(W8A8_ERROR_COMM, "%s: ncclGetUniqueId failed on rank 0", fn);
  }
  /* NCCL's initialisation: not bounded here (see w8a8.h). */
  ncclComm_t nc = NULL;
  int prev = dev_enter(handle->device_index);
  ncclResult_t nr = ncclCommInitRank(&nc, size, wb->u, rank);
  dev_exit(prev, handle->device_index);
  if (nr != ncclSuccess) {
    MPI_Comm_free(&dup);
    free(wb);
    return w8a8_tp_nccl_err(fn, "ncclCommInitRank", nr);
  }
  /* The communicator's instance (tp_fault.c): every rank has the same NCCL id. */
  uint64_t instance = 1469598103934665603ull;
  for (size_t i = 0; i < sizeof wb->u.internal; i++) instance = (instance ^ (uint8_t)wb->u.internal[i]) * 1099511628211ull;
  w8a8_comm *const caller_comm = *comm;
  s = nccl_comm_setup(fn, comm, handle, nc, true, W8A8_SUCCESS);
  if (s == W8A8_ERROR_TIMEOUT) { /* (NCCL's exchange is stuck: its abort, not ncclCommDestroy, ends it) */
    ncclCommAbort(nc);
    MPI_Comm_free(&dup);
    free(wb);
    return s;
  }
  /* The IPC set-up below is collective over dup: a rank that failed alone at the end of
   * nccl_comm_setup (its agreement tables or the registry) must not leave its peers waiting in
   * it. Only when every rank asked for IPC: the default path makes no extra collective. */
  if (all_ipc) {
    wb->fin[0] = s == W8A8_SUCCESS;
    w8a8_status sf = coll_until(fn, MPI_Iallreduce(wb->fin, wb->fin + 1, 1, MPI_INT, MPI_MIN, dup, &req), &req,
                                deadline, "MPI_Iallreduce (creation)");
    const bool every = sf == W8A8_SUCCESS && wb->fin[1];
    if (sf == W8A8_ERROR_TIMEOUT) wb = NULL; /* (left to the pending collective) */
    if (s == W8A8_SUCCESS && !every) {
      w8a8_tp_gpu_comm_destroy(*comm); /* not IPC yet: no collective inside; destroys nc */
      *comm = caller_comm;
      if (sf != W8A8_ERROR_TIMEOUT) MPI_Comm_free(&dup);
      free(wb);
      return sf != W8A8_SUCCESS ? sf
                                : w8a8_err(W8A8_ERROR_COMM, "%s: another rank could not create its communicator (see "
                                                            "its error)",
                                           fn);
    }
  }
  free(wb);
  if (s != W8A8_SUCCESS) {
    ncclCommDestroy(nc);
    MPI_Comm_free(&dup);
    return s;
  }
  (*comm)->mpi = dup;
  (*comm)->instance = instance;
  w8a8_tp_gpu *gs = (*comm)->gpu;
  gs->agree_mpi = true; /* host-side agreement: no stream sync per call */
  if (want_ipc && !all_ipc)
    snprintf(gs->ipc_note, sizeof gs->ipc_note, "W8A8_TP_IPC=1 but NCCL kept: not every rank set W8A8_TP_IPC=1");
  if (all_ipc && gs->mode == TP_GPU_GROUP)
    snprintf(gs->ipc_note, sizeof gs->ipc_note,
             "W8A8_TP_IPC=1 not needed: every rank is a thread of this process (in-process copy engine)");
  /* gs->mode is the same on every rank (nccl_comm_setup decided it from one gathered table). */
  if (all_ipc && gs->mode == TP_GPU_NCCL) {
    s = ipc_setup(fn, *comm, deadline);
    if (s != W8A8_SUCCESS) {
      char saved[512];
      snprintf(saved, sizeof saved, "%s", w8a8_last_error());
      if (s == W8A8_ERROR_TIMEOUT) {
        /* a collective of the set-up is pending over dup: it and the tables it uses stay */
        (*comm)->mpi_pending = true;
        w8a8_tp_break(fn, *comm, s, false);
      }
      w8a8_tp_gpu_comm_destroy(*comm); /* mode is still NCCL here: no collective inside */
      if (s != W8A8_ERROR_TIMEOUT) MPI_Comm_free(&dup);
      *comm = caller_comm;
      return w8a8_err(s, "%s", saved);
    }
  }
  w8a8_tp_set_crossovers(*comm); /* (the transport is final now) */
  w8a8_tp_notice_post(*comm);
  return W8A8_SUCCESS;
}
#endif

#else /* no NCCL */

static w8a8_status no_nccl(const char *fn) {
  return w8a8_err(W8A8_ERROR_NOT_BUILT,
                  "%s: libw8a8 was built without NCCL (GPU ranks in one process: w8a8_comm_create_local)", fn);
}
w8a8_status w8a8_comm_create_nccl(w8a8_comm **comm, w8a8_handle *handle, void *nccl_comm) {
  (void)comm, (void)handle, (void)nccl_comm;
  w8a8_clear_error();
  return no_nccl("w8a8_comm_create_nccl");
}
w8a8_status w8a8_comm_unique_id(w8a8_unique_id *id) {
  (void)id;
  w8a8_clear_error();
  return no_nccl("w8a8_comm_unique_id");
}
w8a8_status w8a8_comm_create_nccl_id(w8a8_comm **comm, w8a8_handle *handle, const w8a8_unique_id *id, int nranks,
                                     int rank) {
  (void)comm, (void)handle, (void)id, (void)nranks, (void)rank;
  w8a8_clear_error();
  return no_nccl("w8a8_comm_create_nccl_id");
}
#endif /* W8A8_HAVE_NCCL */

#if !defined(W8A8_HAVE_NCCL) || !defined(W8A8_HAVE_MPI)
w8a8_status w8a8_tp_gpu_create_world(const char *fn, w8a8_comm **comm, w8a8_handle *handle, const void *mpi_comm) {
  (void)comm, (void)handle, (void)mpi_comm;
  return w8a8_err(W8A8_ERROR_NOT_BUILT, "%s: GPU ranks under MPI need NCCL, and libw8a8 was built without it", fn);
}
#endif

/* ---- workspace, agreement, destruction -------------------------------------------------- */

w8a8_status w8a8_tp_gpu_comm_reserve(const char *fn, w8a8_comm *c, int64_t max_m, int64_t max_n, int64_t max_k) {
  w8a8_tp_gpu *gs = c->gpu;
  size_t need = w8a8_tp_workspace_need(c->size, max_m, max_n, max_k); /* (w8a8_comm_reserve checked it: <= 2^46) */
  need = (need + 256 + 255) & ~(size_t)255; /* + the 256-byte alignment of the AG layout's scales */
  if (need > gs->ws_bytes) {
    int prev = dev_enter(gs->device);
    void *ws = NULL, *ws_cap = NULL;
    cudaError_t e = cudaMalloc(&ws, need);
    /* IPC transport: a second block of the same size for captured calls (tp_gpu.c). */
    if (e == cudaSuccess && gs->mode == TP_GPU_IPC) e = cudaMalloc(&ws_cap, need);
    if (e != cudaSuccess) {
      cudaGetLastError();
      if (ws) cudaFree(ws);
      dev_exit(prev, gs->device);
      return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not allocate %zu bytes of GPU workspace on device %d", fn,
                      need * (gs->mode == TP_GPU_IPC ? 2 : 1), gs->device);
    }
    /* The old block may still be read by this rank's or a peer's queued work: the header asks
     * callers not to reserve while calls run, and cudaFree waits for the device anyway. IPC: the
     * peers still map the old block; the next eager call's agreement sees the new ws_gen and
     * they reopen (w8a8_tp_gpu_agree), then this rank frees it (ipc_exchange). */
    if (gs->mode == TP_GPU_IPC && gs->ws && gs->ws_gen == gs->xgen[c->rank] && !gs->ws_retired)
      gs->ws_retired = gs->ws; /* exchanged: the peers map it until the next exchange */
    else if (gs->ws)
      cudaFree(gs->ws); /* never exchanged (or not IPC): nobody else maps it */
    if (gs->ws_cap) cudaFree(gs->ws_cap);
    dev_exit(prev, gs->device);
    gs->ws = ws;
    gs->ws_cap = ws_cap;
    gs->ws_bytes = need;
    gs->ws_gen++;
  }
  c->ws_bytes = gs->ws_bytes;
  c->max_m = max_m;
  c->max_n = max_n;
  c->max_k = max_k;
  return W8A8_SUCCESS;
}

#ifdef W8A8_HAVE_MPI
w8a8_status w8a8_tp_ipc_barrier(const char *fn, w8a8_comm *c, bool ok) {
  w8a8_tp_gpu *gs = c->gpu;
  int64_t *b = gs->ipc_row + TP_IPC_ROW; /* (heap: a collective left pending keeps its buffers) */
  b[0] = ok ? 1 : 0;
  b[1] = 0;
  MPI_Request *req = &c->coll_req;
  W8A8_CHECK(w8a8_tp_mpi_coll(fn, c, MPI_Iallreduce(b, b + 1, 1, MPI_INT64_T, MPI_MIN, c->mpi, req), req,
                              "the IPC barrier (MPI_Iallreduce)"));
  if (!b[1]) {
    w8a8_err(W8A8_ERROR_BROKEN, "%s: another rank failed after the ranks had agreed (see its error); the "
                                "communicator is now broken",
             fn);
    return w8a8_tp_break(fn, c, W8A8_ERROR_BROKEN, false);
  }
  return W8A8_SUCCESS;
}

/* Every rank's workspace handle, opened by every peer (collective; eager calls only: opening a
 * handle is host work no graph can hold). Runs when some rank's ws_gen differs from the one
 * last exchanged (xgen, identical on every rank), i.e. at the first eager call after a reserve.
 * A failure on any rank fails the call on every rank and breaks the communicator. */
static w8a8_status ipc_exchange(const char *fn, w8a8_comm *c) {
  w8a8_tp_gpu *gs = c->gpu;
  const int W = c->size, r = c->rank;
  ipc_mem_rec *pm = gs->ipc_mine, *all = gs->ipc_mem; /* (heap: as in w8a8_tp_ipc_barrier) */
#define mine (*pm)
  memset(&mine, 0, sizeof mine);
  int prev = dev_enter(gs->device);
  cudaError_t e = gs->ws ? cudaIpcGetMemHandle(&mine.h, gs->ws) : cudaSuccess;
  mine.gen = gs->ws ? (int64_t)gs->ws_gen : 0;
  mine.ok = e == cudaSuccess;
  char note[200] = "";
  if (e != cudaSuccess) snprintf(note, sizeof note, "rank %d: cudaIpcGetMemHandle: %s", r, cudaGetErrorString(e));
  cudaGetLastError();
  MPI_Request *req = &c->coll_req;
  w8a8_status st = w8a8_tp_mpi_coll(
      fn, c, MPI_Iallgather(pm, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, c->mpi, req), req,
      "MPI_Iallgather (IPC workspace handles)");
  if (st != W8A8_SUCCESS) {
    dev_exit(prev, gs->device);
    return st;
  }
  int ok = mine.ok;
  bool synced = false;
  for (int j = 0; j < W; j++) {
    if (j == r) continue;
    if (!all[j].ok) {
      ok = 0;
      continue;
    }
    if ((uint64_t)all[j].gen == gs->peer_gen[j]) continue;
    if (gs->peer_ws[j]) {
      /* The peer replaced its workspace: let every access of this rank to peer memory drain before
       * the old mapping goes (once, and only here). They run on the side stream, and on the compute
       * stream before the last eager call's end (ipc_done): the one-GEMM all-gather's peer scale
       * copies, W8A8_DEV TP_RS_DIRECT's GEMMs. A failed call joined its compute-stream work into the
       * side stream (tp_gpu.c clean_up_after_error). */
      if (!synced) {
        cudaStreamSynchronize(gs->side);
        cudaEventSynchronize(gs->ipc_done);
      }
      synced = true;
      cudaIpcCloseMemHandle(gs->peer_ws[j]);
      gs->peer_ws[j] = NULL;
      gs->peer_gen[j] = 0;
    }
    if (all[j].gen == 0) continue; /* no workspace there yet */
    void *p = NULL;
    e = cudaIpcOpenMemHandle(&p, all[j].h, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      ok = 0;
      snprintf(note, sizeof note, "rank %d: cudaIpcOpenMemHandle of rank %d's workspace: %s", r, j,
               cudaGetErrorString(e));
      cudaGetLastError();
      continue;
    }
    gs->peer_ws[j] = p;
    gs->peer_gen[j] = (uint64_t)all[j].gen;
  }
  dev_exit(prev, gs->device);
  int64_t *b = gs->ipc_row + TP_IPC_ROW + 2;
  b[0] = ok;
  b[1] = 0;
  W8A8_CHECK(w8a8_tp_mpi_coll(fn, c, MPI_Iallreduce(b, b + 1, 1, MPI_INT64_T, MPI_MIN, c->mpi, req), req,
                              "MPI_Iallreduce (IPC workspace handles)"));
  if (!b[1]) {
    w8a8_err(W8A8_ERROR_COMM, "%s: exchanging the workspaces' CUDA IPC handles failed (%s); the communicator is now "
                              "broken",
             fn, note[0] ? note : "on another rank: see its error");
    return w8a8_tp_break(fn, c, W8A8_ERROR_COMM, false); /* (every rank takes this branch) */
  }
  for (int j = 0; j < W; j++) gs->xgen[j] = (uint64_t)all[j].gen;
  /* Every peer closed its mapping of this rank's replaced workspace before the MPI_Allreduce
   * (its gen changed and this rank's record was ok): only now may it be freed. */
  if (gs->ws_retired) {
    prev = dev_enter(gs->device);
    cudaFree(gs->ws_retired);
    cudaGetLastError();
    dev_exit(prev, gs->device);
    gs->ws_retired = NULL;
  }
  return W8A8_SUCCESS;
#undef mine
}

/* The agreement of the IPC transport: the MPI path's MPI_Allgather, with two more fields per
 * rank (its ws_gen and whether its stream is capturing). Captured calls run the NCCL schedule on
 * ws_cap, eager ones the IPC schedule on ws, so every rank must make the same choice: ranks that
 * disagree on capturing fail together. An eager call exchanges the workspace handles first when
 * any rank's workspace changed since the last exchange. */
static w8a8_status ipc_agree(const char *fn, w8a8_comm *c, const int64_t sig[TP_SIG_COUNT],
                             unsigned long long capture_id, w8a8_status local, const char *saved) {
  w8a8_tp_gpu *gs = c->gpu;
  const int W = c->size;
  int64_t *row = gs->ipc_row; /* (heap: an exchange left pending still reads it) */
  memcpy(row, sig, sizeof(int64_t) * TP_SIG_COUNT);
  row[TP_IPC_GEN] = (int64_t)gs->ws_gen;
  row[TP_IPC_CAPTURE] = capture_id != 0;
  MPI_Request *req = &c->coll_req;
  W8A8_CHECK(w8a8_tp_mpi_coll(
      fn, c, MPI_Iallgather(row, TP_IPC_ROW, MPI_INT64_T, gs->ipc_tab, TP_IPC_ROW, MPI_INT64_T, c->mpi, req), req,
      "the agreement (MPI_Iallgather)"));
  for (int j = 0; j < W; j++)
    memcpy(c->sig_all + (size_t)j * TP_SIG_COUNT, gs->ipc_tab + (size_t)j * TP_IPC_ROW, sizeof(int64_t) * TP_SIG_COUNT);
  w8a8_status s = w8a8_tp_agree_table(fn, c, local, saved);
  if (s != W8A8_SUCCESS) return s;
  const int64_t *tab = gs->ipc_tab;
  for (int j = 1; j < W; j++)
    if (tab[(size_t)j * TP_IPC_ROW + TP_IPC_CAPTURE] != tab[TP_IPC_CAPTURE])
      return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                      "%s: on the IPC transport every rank's call must be captured into a CUDA graph, or none (rank "
                      "0 %s capturing, rank %d %s)",
                      fn, tab[TP_IPC_CAPTURE] ? "is" : "is not", j,
                      tab[(size_t)j * TP_IPC_ROW + TP_IPC_CAPTURE] ? "is" : "is not");
  if (tab[TP_IPC_CAPTURE]) return W8A8_SUCCESS; /* NCCL schedule on ws_cap: no peer mapping used */
  bool need = false;
  for (int j = 0; j < W; j++) need |= (uint64_t)tab[(size_t)j * TP_IPC_ROW + TP_IPC_GEN] != gs->xgen[j];
  return need ? ipc_exchange(fn, c) : W8A8_SUCCESS;
}
#else
w8a8_status w8a8_tp_ipc_barrier(const char *fn, w8a8_comm *c, bool ok) {
  (void)c, (void)ok;
  return w8a8_err(W8A8_ERROR_INTERNAL, "%s: the IPC transport in a build without MPI", fn);
}
#endif

w8a8_status w8a8_tp_gpu_agree(const char *fn, w8a8_comm *c, int64_t sig[TP_SIG_COUNT], unsigned long long capture_id) {
  w8a8_tp_gpu *gs = c->gpu;
  const int W = c->size, r = c->rank;
  w8a8_status local = (w8a8_status)sig[TP_SIG_STATUS];
  char saved[512];
  snprintf(saved, sizeof saved, "%s", w8a8_last_error());
  if (gs->mode == TP_GPU_GROUP) {
    tp_group *g = gs->group;
    const size_t par = (size_t)(gs->agreements++ & 1);
    memcpy(g->sig + (par * W + r) * TP_SIG_COUNT, sig, sizeof(int64_t) * TP_SIG_COUNT);
    g->capture[par * W + r] = capture_id;
    W8A8_CHECK(w8a8_tp_group_barrier(fn, g, c, c->deadline));
    /* The table of parity par is rewritten two calls from now, after every rank has passed
     * the next call's barrier, i.e. after every rank has read it here. */
    memcpy(c->sig_all, g->sig + par * W * TP_SIG_COUNT, sizeof(int64_t) * TP_SIG_COUNT * (size_t)W);
    w8a8_status s = w8a8_tp_agree_table(fn, c, local, saved);
    if (s != W8A8_SUCCESS) return s;
    for (int j = 1; j < W; j++)
      if (g->capture[par * W + j] != g->capture[par * W])
        return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                        "%s: the ranks' streams are not all in the same CUDA graph capture (rank 0: capture %llu, rank "
                        "%d: %llu). Capture every rank's call into one graph (fork the ranks' streams from the "
                        "capturing stream), or none",
                        fn, g->capture[par * W], j, g->capture[par * W + j]);
    return W8A8_SUCCESS;
  }
#ifdef W8A8_HAVE_MPI
  if (gs->mode == TP_GPU_IPC) return ipc_agree(fn, c, sig, capture_id, local, saved);
  if (gs->agree_mpi) return w8a8_tp_agree(fn, c, sig); /* (comm.c: the MPI transport's exchange, polled) */
#endif
#ifdef W8A8_HAVE_NCCL
  /* A bare ncclComm_t across processes: the table goes through NCCL and back to the host,
   * which costs one synchronization of the side stream (documented in w8a8.h). A captured call
   * cannot hold that round trip: it fails, but still takes part in the exchange with its failure
   * in the table (outside the capture, on the side stream, with this thread's capture mode relaxed
   * for it), so that the peers fail with it instead of waiting in the ncclAllGather. */
  if (capture_id && local == W8A8_SUCCESS) {
    local = w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                     "%s: a communicator from a bare ncclComm_t across processes checks agreement with a host "
                     "round trip, which a CUDA graph capture cannot contain; bootstrap with w8a8_comm_create_world",
                     fn);
    snprintf(saved, sizeof saved, "%s", w8a8_last_error());
    sig[TP_SIG_STATUS] = (int64_t)local;
  }
  /* Relaxed always: capture_id is 0 where a local check failed first, and another thread's capture
   * in global mode forbids the synchronization too. */
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  const bool relaxed = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
  if (!relaxed) cudaGetLastError();
  int prev = dev_enter(gs->device);
  memcpy(gs->h_sig + (size_t)W * TP_SIG_COUNT, sig, sizeof(int64_t) * TP_SIG_COUNT);
  cudaError_t e = cudaMemcpyAsync(gs->d_sig + (size_t)W * TP_SIG_COUNT, gs->h_sig + (size_t)W * TP_SIG_COUNT,
                                  sizeof(int64_t) * TP_SIG_COUNT, cudaMemcpyHostToDevice, gs->side);
  ncclResult_t nr = ncclSuccess;
  if (e == cudaSuccess)
    nr = ncclAllGather(gs->d_sig + (size_t)W * TP_SIG_COUNT, gs->d_sig, TP_SIG_COUNT, ncclInt64, (ncclComm_t)gs->nccl,
                       gs->side);
  if (e == cudaSuccess && nr == ncclSuccess)
    e = cudaMemcpyAsync(gs->h_sig, gs->d_sig, sizeof(int64_t) * TP_SIG_COUNT * (size_t)W, cudaMemcpyDeviceToHost,
                        gs->side);
  /* polled: a peer that never joins the ncclAllGather costs the timeout, and an abort ends the wait */
  const char *why = "";
  if (e == cudaSuccess && nr == ncclSuccess) e = sync_until(gs->side, c->deadline, c, &why);
  dev_exit(prev, gs->device);
  if (relaxed && cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) cudaGetLastError(); /* restored */
  if (nr != ncclSuccess) {
    w8a8_tp_nccl_err(fn, "ncclAllGather (agreement)", nr);
    return w8a8_tp_break(fn, c, W8A8_ERROR_COMM, true);
  }
  if (e == cudaErrorNotReady) {
    if (!strcmp(why, "abort")) {
      w8a8_err(W8A8_ERROR_ABORTED, "%s: aborted (w8a8_comm_abort) while waiting for the agreement (ncclAllGather)", fn);
      return w8a8_tp_break(fn, c, W8A8_ERROR_ABORTED, true);
    }
    w8a8_err(W8A8_ERROR_TIMEOUT,
             "%s: the agreement (ncclAllGather) did not complete within the communicator's timeout: a peer is missing "
             "or late; the communicator is now broken (its ncclAllGather stays on the side stream until the NCCL "
             "communicator is aborted: w8a8_comm_destroy does that where w8a8 owns it)",
             fn);
    return w8a8_tp_break(fn, c, W8A8_ERROR_TIMEOUT, true);
  }
  if (e != cudaSuccess) {
    w8a8_cuda_error(fn, "the agreement exchange", e);
    return w8a8_tp_break(fn, c, W8A8_ERROR_DEVICE, true);
  }
  memcpy(c->sig_all, gs->h_sig, sizeof(int64_t) * TP_SIG_COUNT * (size_t)W);
  return w8a8_tp_agree_table(fn, c, local, saved);
#else
  (void)capture_id;
  return w8a8_err(W8A8_ERROR_INTERNAL, "%s: an NCCL communicator in a build without NCCL", fn);
#endif
}

w8a8_status w8a8_tp_gpu_comm_destroy(w8a8_comm *c) {
  w8a8_tp_gpu *gs = c->gpu;
  w8a8_registry_remove(c);
#ifdef W8A8_HAVE_MPI
  if (gs->mode == TP_GPU_IPC) {
    /* Collective teardown of the peer mappings: every rank's accesses to peer memory drain (its
     * side stream, and its last eager call on the compute stream: ipc_done, as in ipc_exchange);
     * barrier; every rank closes what it opened of its peers;
     * barrier; only then may each rank free its own workspace and destroy its exported events
     * (gpu_comm_free), which no peer uses any more. A broken communicator meets nobody (a peer may
     * be gone, and its device work may wait for ever on that peer's events): it closes its mappings
     * and leaves its device memory and events (freeing them would wait for the device, and a peer may
     * still map them). So does a healthy one whose barrier times out. */
    int prev = dev_enter(gs->device);
    const double deadline = w8a8_tp_deadline_in(__atomic_load_n(&c->timeout_us, __ATOMIC_RELAXED));
    bool met = !w8a8_tp_is_broken(c);
    MPI_Request req = MPI_REQUEST_NULL;
    if (met) {
      cudaStreamSynchronize(gs->side);
      cudaEventSynchronize(gs->ipc_done);
      met = coll_until("w8a8_comm_destroy", MPI_Ibarrier(c->mpi, &req), &req, deadline, "MPI_Ibarrier (IPC teardown)") ==
            W8A8_SUCCESS;
    }
    for (int j = 0; j < c->size; j++) {
      if (gs->peer_ws[j]) cudaIpcCloseMemHandle(gs->peer_ws[j]);
      if (met && gs->peer_ready[j]) cudaEventDestroy(gs->peer_ready[j]);
      if (met && gs->peer_done[j]) cudaEventDestroy(gs->peer_done[j]);
      gs->peer_ws[j] = NULL, gs->peer_ready[j] = gs->peer_done[j] = NULL;
    }
    cudaGetLastError();
    if (met)
      met = coll_until("w8a8_comm_destroy", MPI_Ibarrier(c->mpi, &req), &req, deadline, "MPI_Ibarrier (IPC teardown)") ==
            W8A8_SUCCESS;
    if (!met) {
      gs->leak_device = true;
      c->mpi_pending = true;
    }
    w8a8_clear_error();
    dev_exit(prev, gs->device);
  }
#endif
  tp_group *g = gs->group;
  if (g) {
    pthread_mutex_lock(&g->mu);
    g->comm[c->rank] = NULL;
    bool last = --g->refs == 0;
    pthread_mutex_unlock(&g->mu);
    if (last) group_free(g);
  }
  gpu_comm_free(c);
  return W8A8_SUCCESS;
}

#endif /* W8A8_HAVE_CUDA */
