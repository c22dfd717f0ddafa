/* tp_gpu.h — GPU tensor parallelism: the GPU state of a communicator, the
 * in-process rank group, and the launchers of src/tp/tp_kernels.cu.
 *
 * Three transports (see docs/TP.md):
 *   GROUP: every rank lives in this process (w8a8_comm_create_local, or an ncclComm_t whose
 *          ranks all turned out to be threads of this process). Buffers are plain device
 *          pointers (one GPU: emulated ranks; several GPUs: peer access); chunks move with
 *          cudaMemcpyAsync on each rank's side stream (copy engine); ranks order their
 *          streams with CUDA events, and a host barrier between threads guarantees that an
 *          event is recorded before any peer waits on it.
 *   NCCL:  ranks in several processes: the same schedules with ncclSend/ncclRecv on the side
 *          stream (NCCL orders the ranks itself). Agreement over MPI when the communicator was
 *          bootstrapped through MPI, else an ncclAllGather read back with a stream sync.
 *   IPC:   (opt-in, W8A8_TP_IPC=1 at w8a8_comm_create_world) ranks in several processes of one
 *          host whose GPUs have peer access: the GROUP schedules with each peer's workspace
 *          opened through cudaIpcOpenMemHandle and each peer's ev_ready / ev_done replaced by
 *          interprocess events; MPI collectives stand where GROUP has its host barrier.
 *          Captured calls run the NCCL schedule on a second workspace (ws_cap): see tp_gpu.c.
 * Only CUDA builds compile the code behind this header. */
#ifndef W8A8_TP_GPU_H
#define W8A8_TP_GPU_H

#include <cuda_runtime.h>

#include "../core/internal.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The most ranks a GPU communicator takes (the reduce kernel gets its sources by value). */
#define W8A8_TP_GPU_MAX_RANKS 64

typedef struct w8a8_tp_reduce_srcs {
  const void *p[W8A8_TP_GPU_MAX_RANKS]; /* rank order; each [rows, N] dense, of the partials' dtype */
} w8a8_tp_reduce_srcs;

/* The peers' gathered scale (and zero point) buffers at this rank's rows, which the pack / expand kernel
 * fills beside its own where the all-gather pushes its scales (W8A8_TP_AG_SCALES, tp_gpu.c): n <=
 * W8A8_TP_SCALE_PEERS destinations (azp[j] NULL without zero points). By value into the kernels (260 bytes
 * of parameters; groups of more ranks copy the scales instead). */
#define W8A8_TP_SCALE_PEERS 16
typedef struct w8a8_tp_scale_dsts {
  float *scale[W8A8_TP_SCALE_PEERS];
  int32_t *azp[W8A8_TP_SCALE_PEERS];
  int n;
} w8a8_tp_scale_dsts;

/* src/tp/tp_kernels.cu (peers: NULL, or the peers' destinations as above) */
W8A8_HIDDEN w8a8_status w8a8_tp_launch_expand(float *dst_scale, const float *scale, int scale_per_row,
                                              int32_t *dst_azp, const int32_t *azp, int azp_per_row, int64_t rows,
                                              const w8a8_tp_scale_dsts *peers, cudaStream_t stream);
/* The block-scaled all-gather's own group scales: rows x S values src[i * rs + j * cs] into dense rows dst[i * S + j]. */
W8A8_HIDDEN w8a8_status w8a8_tp_launch_scale_rows(float *dst, const float *src, int64_t rs, int64_t cs, int64_t rows,
                                                  int64_t S, cudaStream_t stream);
/* The all-gather's own-row pack in one kernel: rows [rows, K] from src (row stride lda) to dense dst,
 * the per-row scales / zero points as w8a8_tp_launch_expand, and flags[0..nflags) = (i == own) when
 * flags is not NULL. Only where w8a8_tp_pack_takes (16-byte multiples); rows may be 0 (flags only). */
W8A8_HIDDEN int w8a8_tp_pack_takes(const void *dst, const void *src, int64_t lda, int64_t K);
W8A8_HIDDEN w8a8_status w8a8_tp_launch_pack(uint8_t *dst, const uint8_t *src, int64_t lda, int64_t K, int64_t rows,
                                            float *dst_scale, const float *scale, int scale_per_row,
                                            int32_t *dst_azp, const int32_t *azp, int azp_per_row,
                                            unsigned int *flags, int nflags, int own,
                                            const w8a8_tp_scale_dsts *peers, int num_sms, cudaStream_t stream);
/* rows x width bytes, src (row stride lds) -> dst (row stride ldd), on the SMs: where a stride is past the copy
 * engine's pitch limit (max_pitch below). */
W8A8_HIDDEN w8a8_status w8a8_tp_launch_copy2d(void *dst, int64_t ldd, const void *src, int64_t lds, int64_t width,
                                              int64_t rows, int num_sms, cudaStream_t stream);
/* out = round(((q_0 + q_1) + ... + q_{W-1}) + bias) with q_j = (float)srcs->p[j][e]: src_dtype is
 * fp32 (W8A8_TP_PARTIALS_FP32) or out's bf16/fp16 (W8A8_TP_PARTIALS_OUT). */
W8A8_HIDDEN w8a8_status w8a8_tp_launch_reduce(const w8a8_tp_reduce_srcs *srcs, w8a8_dtype src_dtype, int W,
                                              int64_t rows, int64_t N, void *out, int64_t ldo, w8a8_dtype out_dtype,
                                              const void *bias, int num_sms, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#ifndef __CUDACC__
#include <pthread.h>

#include "tp_internal.h"

typedef enum { TP_GPU_GROUP = 1, TP_GPU_NCCL = 2, TP_GPU_IPC = 3 } tp_gpu_mode;

/* The ranks of one in-process group. Shared by its W communicators; freed with the last. */
typedef struct tp_group {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int W;
  int arrived;
  uint64_t gen;   /* barrier generation */
  int refs;       /* communicators not yet destroyed */
  bool broken;    /* a barrier timed out, a rank failed mid-call or was aborted: every later call fails */
  int cause;      /* the status that broke it (W8A8_ERROR_TIMEOUT, _ABORTED, _DEVICE, ...) */
  char why[320];  /* "rank r: <that rank's message>" */
  int64_t *sig;   /* [2][W][TP_SIG_COUNT]: agreement tables by call parity */
  unsigned long long *capture; /* [2][W]: capture id of each rank's stream (0 = not capturing) */
  struct w8a8_comm **comm;     /* [W] */
} tp_group;

#define TP_TRACE_MAX 64
typedef struct w8a8_tp_gpu {
  tp_gpu_mode mode;
  int device, num_sms, cc;
  int64_t max_pitch; /* cudaDevAttrMaxPitch: cudaMemcpy2DAsync's largest row stride (tp_copy2d past it) */
  tp_group *group;
  uint64_t agreements; /* agreements made (GROUP): the agreement table's parity */
  cudaStream_t side;
  cudaEvent_t ev_fork;  /* compute -> side stream */
  cudaEvent_t ev_ready; /* AG: own rows packed; RS: pushes to every peer done */
  cudaEvent_t ev_done;  /* end of this rank's last EAGER call (everything, on the compute stream) */
  cudaEvent_t ev_done_cap; /* end of this rank's last CAPTURED call (recorded inside capture done_capture).
                            * Not ev_done: with one event for both, an eager call made after a captured one
                            * would skip its entry waits (the event's last record belonging to the capture)
                            * and race with the peers' previous eager call still reading its buffers. */
  cudaEvent_t *ev_step; /* [W]: per-chunk copy (AG) or GEMM (RS) completion */
  unsigned long long done_capture; /* capture id under which ev_done was last recorded */
  /* Workspace (w8a8_comm_reserve): one device block; the AG and RS layouts overlay it
   * (every call starts after every peer's previous call has ended, see tp_gpu.c). */
  void *ws;
  size_t ws_bytes;
  /* All-gather + GEMM in one launch: flags[j] != 0 once chunk j has arrived (reset per call on the
   * compute stream; set there before the launch for the own chunk and same-GPU chunks, else by
   * cuStreamWriteValue32 on the side stream after the chunk's copy). W8A8_MM_MAX_READY words: a chunk
   * is a rank's rows or a piece of them (ag_pieces). */
  unsigned int *flags;
  int last_one_gemm; /* the last all-gather's schedule (w8a8_tp_gpu_last_ag_one_gemm) */
  int last_chunks;   /* its ready table's chunks (one GEMM with flags; else 0) */
  int last_rs_direct; /* the last reduce-scatter's pieces stored straight into peers (W8A8_DEV TP_RS_DIRECT) */
  int last_rs_pushes; /* the last reduce-scatter's pieces pushed to peers by the copy engine (direct transports) */
  int last_ag_pack;   /* the last all-gather packed its own rows with tp_pack (w8a8_tp_gpu_last_ag_pack) */
  int last_copy2d;    /* strided copies the last all-gather made with tp_copy2d (w8a8_tp_gpu_last_copy2d) */
  int last_ag_push;   /* the last all-gather pushed its rows into the peers: W8A8_DEV TP_AG_PUSH's mode (1 / 2), else 0 */
  bool flags_dirty;   /* flags may be set (a pull call without the end-of-call reset, a failed call): no push */
  bool capture_noreset; /* a captured flags call without the end-of-call reset: its replays may leave flags set */
  bool push_wish;     /* this call's ag_push (read by the peers after the ready barrier: all wish, or none pushes) */
  int push_ok;        /* in-process group: this rank's side stream wrote a ready flag into every peer on another GPU
                       * (cuStreamWriteValue32 on peer memory, probed at creation: w8a8_tp_gpu_probe_push) */
  int scales_ok;      /* in-process group: W8A8_TP_AG_SCALES not 0 at creation and this rank's kernels can store into
                       * every peer's memory (the same GPU or peer access; w8a8_tp_gpu_probe_push) */
  int scales_capture; /* scales_ok and W8A8_TP_AG_SCALES=2 at creation: captured calls push the scales too */
  int last_ag_scales; /* the last all-gather's pack wrote this rank's scales into the peers (ag_scales_push) */
  int last_rs_own;    /* the last reduce-scatter's GEMM launches over this rank's own rows */
  /* NCCL transport */
  void *nccl; /* ncclComm_t */
  bool owns_nccl;
  bool agree_mpi; /* agreement over c->mpi (bootstrapped by w8a8_comm_create_world) */
  int64_t *d_sig; /* device table for the NCCL agreement: [W + 1][TP_SIG_COUNT] */
  int64_t *h_sig; /* pinned host copy */
  /* IPC transport (mode TP_GPU_IPC; all NULL / 0 otherwise). Eager calls use ws and the peers'
   * workspaces opened here; captured calls run the NCCL schedule on ws_cap, which no peer maps,
   * so a graph replay and an eager call never share a buffer a peer touches (tp_gpu.c). */
  cudaEvent_t ipc_ready;  /* interprocess twin of ev_ready (eager IPC calls) */
  cudaEvent_t ipc_done;   /* interprocess twin of ev_done (eager IPC calls) */
  cudaEvent_t *peer_ready; /* [W]: peers' ipc_ready, opened with cudaIpcOpenEventHandle (own: NULL) */
  cudaEvent_t *peer_done;  /* [W]: peers' ipc_done */
  void **peer_ws;          /* [W]: peers' ws, opened with cudaIpcOpenMemHandle (own: NULL) */
  uint64_t *peer_gen;      /* [W]: the ws_gen of peer_ws[j] as opened here */
  uint64_t *xgen;          /* [W]: every rank's ws_gen at the last exchange (the same on every rank) */
  int64_t *ipc_tab;        /* [W][TP_IPC_ROW]: the agreement table with the IPC fields */
  int64_t *ipc_row;        /* [TP_IPC_ROW + 4]: this rank's row and the IPC collectives' small buffers (heap:
                            * a collective left pending by a timeout still uses them) */
  void *ipc_mine;          /* this rank's exchange record (ipc_exchange), for the same reason */
  void *ipc_mem;           /* [W] exchange records (comm_gpu.c) */
  uint64_t ws_gen;         /* bumped whenever reserve replaces ws */
  void *ws_cap;            /* the captured calls' workspace (ws_bytes) */
  void *ws_retired;        /* a ws replaced by reserve that peers still map: freed only after every
                            * peer closed its mapping (the next exchange, or destroy). cudaFree of
                            * an exported block before the importers' cudaIpcCloseMemHandle is
                            * undefined behaviour (CUDA runtime API docs) */
  bool leak_device;        /* destroy leaves the device memory and events (a broken IPC communicator) */
  /* W8A8_DEV TP_TRACE (set when the communicator is created; a development aid, off by default): timing
   * events recorded at the steps of each eager call (tp_gpu.c trace()), read by w8a8_tp_gpu_trace. */
  cudaEvent_t tr_ev[TP_TRACE_MAX];
  double tr_host[TP_TRACE_MAX]; /* the host's clock (s) when each mark's record was enqueued */
  char tr_kind[TP_TRACE_MAX];
  int tr_n, tr_on;
  char ipc_note[200];      /* why IPC was not chosen, when W8A8_TP_IPC=1 asked for it */
} w8a8_tp_gpu;

/* The IPC agreement row: the signature, then this rank's ws_gen and whether it is capturing. */
#define TP_IPC_GEN TP_SIG_COUNT
#define TP_IPC_CAPTURE (TP_SIG_COUNT + 1)
#define TP_IPC_ROW (TP_SIG_COUNT + 2)

/* comm_gpu.c */
W8A8_HIDDEN w8a8_status w8a8_tp_gpu_reserve(const char *fn, w8a8_comm *c, int64_t max_m, int64_t max_n,
                                            int64_t max_k);
W8A8_HIDDEN void w8a8_tp_gpu_destroy(w8a8_comm *c);
/* The one-GEMM all-gather's chunks in row order (tp_gpu.c): rank j's rows [off[j], off[j] + cnt[j]) as one
 * chunk, or, for ranks with split[j] set, as up to `pieces` pieces cut at multiples of 128 rows (the
 * GEMM's token tiles), at least 128 rows each, while the table has room (W8A8_MM_MAX_READY chunks:
 * split ranks are cut in row order, each to as many pieces as the room left allows). end[i]: the
 * chunk's end row; rank[i]: whose rows. Returns the number of chunks (W <= n <= W8A8_MM_MAX_READY), or 0
 * if W is out of range. */
W8A8_HIDDEN int w8a8_tp_ag_pieces(int W, const int64_t *off, const int64_t *cnt, const int *split, int pieces,
                                  int64_t *end, int *rank);
/* 1 if the last all-gather of c ran as one GEMM launch with ready flags, 0 per chunk, -1 none. */
W8A8_HIDDEN int w8a8_tp_gpu_last_ag_one_gemm(const w8a8_comm *c);
/* Tests: the chunks of the last all-gather's ready table (W, or more with W8A8_DEV TP_AG_PIECES; 0 without
 * flags), and a poisoned workspace (every byte = v, synchronously on the legacy stream), so that a fused
 * call after an unfused one cannot pass on rows the unfused call left in the gathered buffer. */
W8A8_HIDDEN int w8a8_tp_gpu_last_ag_chunks(const w8a8_comm *c);
W8A8_HIDDEN int w8a8_tp_gpu_poison_ws(const w8a8_comm *c, int v);
/* Whether a kernel on GPU di may store into GPU dj's memory (comm_gpu.c). */
W8A8_HIDDEN int w8a8_tp_gpu_peer_on(int di, int dj);
/* The peers' partials the last reduce-scatter of c stored straight into their receive buffers from its
 * GEMMs' epilogues (W8A8_DEV TP_RS_DIRECT); for the tests. */
W8A8_HIDDEN int w8a8_tp_gpu_last_rs_direct(const w8a8_comm *c);
/* The pieces the last reduce-scatter of c pushed to peers with cudaMemcpyAsync (GROUP / IPC transports;
 * their least rows: W8A8_DEV TP_RS_MIN_ROWS); for the tests. */
W8A8_HIDDEN int w8a8_tp_gpu_last_rs_pushes(const w8a8_comm *c);
/* The own rows' GEMM launches of the last reduce-scatter (one unless W8A8_DEV TP_RS_OWN_WHOLE=0); for the tests. */
W8A8_HIDDEN int w8a8_tp_gpu_last_rs_own(const w8a8_comm *c);
/* Tests: 1 if the last all-gather packed its own rows (and reset the ready flags) with the tp_pack kernel, 0
 * if it took the copy engine's path or packed nothing, -1 without a GPU communicator. */
W8A8_HIDDEN int w8a8_tp_gpu_last_ag_pack(const w8a8_comm *c);
/* Tests: how many strided copies the last all-gather made on the SMs (tp_copy2d: a stride past the copy engine's
 * pitch limit, or W8A8_DEV TP_COPY2D=1), -1 without a GPU communicator. */
W8A8_HIDDEN int w8a8_tp_gpu_last_copy2d(const w8a8_comm *c);
/* Tests: W8A8_DEV TP_AG_PUSH's mode (1 or 2) if the last all-gather pushed this rank's rows into its peers' buffers
 * and set their ready flags (where tp_gpu.c's ag_push takes the call), 0 if it pulled or gathered otherwise, -1
 * without a GPU communicator. */
W8A8_HIDDEN int w8a8_tp_gpu_last_ag_push(const w8a8_comm *c);
/* Tests: 1 if the last all-gather's pack wrote this rank's scales (and zero points) into the peers' gathered
 * buffers (W8A8_TP_AG_SCALES not 0 at creation, where tp_gpu.c's ag_scales_push takes the call: eager calls, and
 * captured ones with the value 2), else 0; -1
 * without a GPU communicator. */
W8A8_HIDDEN int w8a8_tp_gpu_last_ag_scales(const w8a8_comm *c);
/* Once all ranks of an in-process group exist: whether c's side stream can write into each peer's ready
 * flags on another GPU (a stream memory operation on peer memory, then a synchronize: creation only);
 * sets push_ok (0 where a write or the synchronize failed; the CUDA error is cleared), and scales_ok
 * (W8A8_TP_AG_SCALES not 0 now, and this GPU's kernels can store into every peer's memory) and scales_capture
 * (scales_ok and the value 2). */
W8A8_HIDDEN void w8a8_tp_gpu_probe_push(w8a8_comm *c);
/* W8A8_DEV TP_TRACE=1 when c was created: the marks of c's last eager call, in the order recorded: kinds[i] and
 * us[i], microseconds from F (the fork). Both: E the call reached the compute stream (before the wait for the
 * peers' previous calls; before F, so negative), F the fork. AG: K own rows packed and the ready flags reset
 * (negative too), W the side stream starts a peer's copy or push, C a peer chunk (or piece) copied (side stream;
 * a same-GPU peer's on the compute stream before a one-GEMM launch), L the one GEMM's launch is next, G a GEMM
 * done, J joined. RS: G a peer piece's GEMM done (compute stream), P its push done (side stream; none with
 * W8A8_DEV TP_RS_DIRECT's direct stores), O an own piece's GEMM done, A the peers' partials arrived, R the reduction
 * done. Waits for the events (for benchmarks, after the call). Returns the count (0: tracing off or no eager call
 * yet), -1 on a CUDA error. */
W8A8_HIDDEN int w8a8_tp_gpu_trace(const w8a8_comm *c, float *us, char *kinds, int max);
/* The same marks on the host's clock: us[i], microseconds from F's record being ENQUEUED to mark i's. Where a
 * mark's GPU time from F (w8a8_tp_gpu_trace) is about its host time, the stream was idle, waiting for the host to
 * enqueue it: the call is bound by its host-side work there. Same count and order as w8a8_tp_gpu_trace (0: tracing
 * off, -1: no valid trace). */
W8A8_HIDDEN int w8a8_tp_gpu_trace_host(const w8a8_comm *c, float *us, int max);
/* The reduce-scatter's pieces of one peer's `rows` rows at this rank's K (direct transports), for the tests. */
W8A8_HIDDEN int w8a8_tp_rs_pieces(int64_t rows, int64_t K);
/* The agreement of a fused call on a GPU communicator. capture_id: the capture of this rank's stream (0: none);
 * the call fails on every rank when the ranks' streams are not all in one capture (or all outside one). */
W8A8_HIDDEN w8a8_status w8a8_tp_gpu_agree(const char *fn, w8a8_comm *c, int64_t sig[TP_SIG_COUNT],
                                          unsigned long long capture_id);
/* Host barrier of an in-process group for c (NULL: none) until `deadline` (w8a8_tp_now() seconds, INFINITY
 * none). A rank missing at the deadline: W8A8_ERROR_TIMEOUT here, the group broken (its waiting ranks then
 * fail with it). A broken group: W8A8_ERROR_TIMEOUT where the break was a timeout, W8A8_ERROR_ABORTED on
 * an aborted rank, W8A8_ERROR_BROKEN otherwise. c is broken with it. */
W8A8_HIDDEN w8a8_status w8a8_tp_group_barrier(const char *fn, tp_group *g, w8a8_comm *c, double deadline);
/* Mark the group broken (cause: status s, "rank r: msg") and wake every rank waiting in its barrier (a rank
 * that failed after the agreement will not reach the call's barrier: its peers fail now instead of after
 * the timeout). The first cause stays. Any thread. */
W8A8_HIDDEN void w8a8_tp_group_break(tp_group *g, int rank, int s, const char *msg);
/* IPC transport: the host collective that stands where GROUP has its barrier (an MPI_Iallreduce of
 * `ok` over c->mpi, polled: a rank that fails before it breaks the communicator, and its notice
 * releases the peers waiting here with W8A8_ERROR_BROKEN; `ok` false fails every rank). */
W8A8_HIDDEN w8a8_status w8a8_tp_ipc_barrier(const char *fn, w8a8_comm *c, bool ok);
/* Map an NCCL result to W8A8_ERROR_COMM. */
W8A8_HIDDEN w8a8_status w8a8_tp_nccl_err(const char *fn, const char *what, int result);
#endif /* !__CUDACC__ */

#endif
