/* tp_internal.h — what the tensor-parallel files (src/tp) share: the communicator
 * struct, the resolved TP problems, the agreement check, the failure state and the MPI
 * transport.
 *
 * Flow of a fused call (ag_gemm.c, gemm_rs.c; tp_gpu.c for GPU communicators):
 *   1. comm lookup (registry + magic): a failure returns at once and is counted per thread
 *      (w8a8_tp_count_invalid_comm), since a rank that cannot name its communicator cannot
 *      take part;
 *   2. w8a8_tp_call_enter (tp_fault.c): the call is numbered (seq) and gets its deadline; a
 *      broken or aborted communicator returns here, without communicating;
 *   3. local argument checks (tp_validate.c) -> a resolved problem, or a status;
 *   4. the agreement exchange (comm.c w8a8_tp_agree; comm_gpu.c for GPU ranks): one
 *      fixed-size signature per rank carrying its call number, its status and shapes; every
 *      rank takes the same decision from the same gathered table, so a local failure or a
 *      disagreement is an error on every rank, never a hang;
 *   5. the schedule (fused or unfused: w8a8_tp_agree_table resolves W8A8_TP_OVERLAP_AUTO)
 *      on the reserved workspace. Every wait polls for the deadline, an abort and the
 *      peers' break notices (tp_fault.c); a failure that may leave the ranks out of step
 *      breaks the communicator (w8a8_tp_break). */
#ifndef W8A8_TP_INTERNAL_H
#define W8A8_TP_INTERNAL_H

#include "../core/internal.h"

#include <pthread.h>

#ifdef W8A8_HAVE_MPI
#include <mpi.h>
#endif

typedef enum w8a8_comm_kind {
  W8A8_COMM_KIND_MPI = 1,
  W8A8_COMM_KIND_NCCL = 2, /* GPU ranks over an ncclComm_t (tp_gpu.h) */
  W8A8_COMM_KIND_LOCAL = 3 /* GPU ranks as threads of this process (w8a8_comm_create_local) */
} w8a8_comm_kind;

/* Signature fields exchanged by the agreement collective (int64 each). */
enum {
  TP_SIG_STATUS = 0, /* this rank's local status (0 = checks passed) */
  TP_SIG_OP,         /* 1 = all_gather_scaled_mm, 2 = scaled_mm_reduce_scatter, 3 = create */
  TP_SIG_M_LOCAL,    /* this rank's shard rows M_r */
  TP_SIG_M_TOTAL,    /* the layer's M as this rank sees it */
  TP_SIG_K,
  TP_SIG_N,
  TP_SIG_IN_DTYPE,
  TP_SIG_OUT_DTYPE,
  TP_SIG_BIAS,
  TP_SIG_ZP_KIND, /* 0 none, 1 premultiplied azp_adj, 2 azp vector */
  TP_SIG_OVERLAP,
  TP_SIG_PARTIALS, /* opts->partials (compared for the reduce-scatter only) */
  TP_SIG_VERSION, /* W8A8_VERSION (creation) */
  TP_SIG_DEVICE,  /* handle kind (creation) */
  TP_SIG_SEQ,     /* this rank's number of the call (its fused calls on this communicator, from 0) */
  TP_SIG_SKIPS,   /* fused calls with an invalid communicator made by this thread since its previous fused call */
  TP_SIG_FUSE,    /* this rank's schedule for the call: 0 unfused, 1 fused (W8A8_TP_OVERLAP_AUTO resolved here) */
  TP_SIG_BLOCK,   /* 1: the block-scaled form of the call (w8a8_*_blockwise), 0 the plain one */
  TP_SIG_COUNT
};

#define TP_OP_AG 1
#define TP_OP_RS 2
#define TP_OP_CREATE 3

struct w8a8_comm {
  uint32_t magic; /* W8A8_COMM_MAGIC; first member, like the handle's, so a lookup can tell them apart */
  w8a8_comm_kind kind;
  w8a8_handle *handle;
  int rank, size;
  bool owns_mpi_init; /* created by w8a8_comm_create_world after it called MPI_Init */
  int fault_inject;   /* tests: TP_FAULT_* for the next fused call (w8a8_tp_test_inject_fault) */
  int64_t block_rows; /* GEMM rows between progress polls; 0 = auto (env W8A8_DEV TP_BLOCK_ROWS at creation) */
  /* Failure state (tp_fault.c). err_status / err_msg are read by w8a8_comm_get_async_error on any
   * thread, hence the mutex; aborted and timeout_us are set from any thread (atomics). */
  pthread_mutex_t err_mu;
  bool err_mu_ready;
  int err_status;     /* W8A8_SUCCESS, or the status of the failure that broke the communicator */
  char err_msg[448];  /* that failure's message, with the rank where it happened */
  int aborted;        /* w8a8_comm_abort was called (atomic) */
  bool abort_done;    /* the thread making the calls has broken c for the abort (and told the peers) */
  int64_t timeout_us; /* w8a8_comm_set_timeout (atomic); 0 = none */
  double deadline;    /* the running call's deadline (w8a8_tp_now() seconds; INFINITY = none) */
  uint64_t seq;       /* fused calls made on this communicator by this rank (the next call's number) */
  uint64_t cur_seq;   /* the running call's number */
  int64_t cur_skips;  /* TP_SIG_SKIPS of the running call */
  int64_t fuse_min_m[2]; /* W8A8_TP_OVERLAP_AUTO: fused from this many rows (AG, RS); INT64_MAX never */
  int agreed_fuse;       /* the schedule the agreement chose for the running call (0 / 1) */
  int last_fuse;         /* the schedule the last call that got past its agreement ran; -1 none */
  /* Workspace (w8a8_comm_reserve): one 64-byte aligned block shared by AG and RS,
   * which never run at the same time on one communicator. */
  void *ws;
  size_t ws_bytes;
  int64_t max_m, max_n, max_k;
  /* Per-rank tables sized at creation (size entries each): signatures, shard sizes,
   * MPI counts/displacements, requests. Nothing is allocated per call. */
  int64_t *sig_all;  /* size * TP_SIG_COUNT */
  int64_t *m_count;  /* shard rows per rank */
  int64_t *m_offset; /* first row of each rank's shard */
  int *counts, *displs, *counts2, *displs2;
#ifdef W8A8_HAVE_MPI
  MPI_Comm mpi;
  MPI_Request *reqs; /* 6 * size */
  MPI_Request coll_req;  /* the agreement's nonblocking collective */
  int64_t *sig_mine;     /* its send buffer (TP_SIG_COUNT + 2: an exchange left pending still reads it) */
  MPI_Request notice_req; /* the receive of a peer's break notice, posted at creation */
  int notice_in[3];       /* its buffer: the breaking rank's status, and the instance (below) */
  int *notice_out;        /* the notice this rank sends: [3] */
  MPI_Request *notice_sreq; /* its sends, [size]: completed or freed at destroy (notice_out kept if not sent) */
  uint64_t instance;      /* the same random number on every rank of this communicator, made at creation: a notice
                           * of another one (the MPI library reuses a freed communicator's context for a new one,
                           * and replays messages that arrived for it) is recognised and ignored */
  bool notice_posted, notice_sent;
  bool mpi_pending;       /* an operation of this communicator may still be pending in MPI: its buffers
                           * (tables, workspace) are never freed (comm.c comm_free) */
#endif
  /* GPU communicators (kinds NCCL and LOCAL): struct w8a8_tp_gpu (tp_gpu.h); NULL for MPI. */
  void *gpu;
};

/* Look up `comm` for public call `fn`: registry, magic, kind. */
W8A8_HIDDEN w8a8_status w8a8_tp_check_comm(const char *fn, const w8a8_comm *c);
/* The first step of every fused call: clear the thread's error, look up `comm`; where that fails, count the call
 * (a rank that cannot name its communicator cannot join the agreement: the next agreement of this thread's
 * communicators compares the counts) and return the failure. */
W8A8_HIDDEN w8a8_status w8a8_tp_entry(const char *fn, const w8a8_comm *c);
/* The block-scaled fused calls on a GPU communicator: W8A8_ERROR_UNSUPPORTED_DEVICE, on every rank alike, before
 * the call is numbered or agreed (every rank of such a communicator is a GPU rank). */

/* ---- failure state, deadlines, abort (tp_fault.c) -------------------------------------- */

/* The default timeout in microseconds: W8A8_TP_TIMEOUT_S (seconds, fractions allowed, 0 = none), else 300 s. */
W8A8_HIDDEN int64_t w8a8_tp_env_timeout_us(void);
/* A deadline `us` microseconds from now (INFINITY for 0). */
W8A8_HIDDEN double w8a8_tp_deadline_in(int64_t us);
W8A8_HIDDEN double w8a8_tp_now(void); /* CLOCK_MONOTONIC, seconds */
/* A new communicator's failure state (mutex, timeout from the environment). w8a8_tp_fault_fini undoes it. */
W8A8_HIDDEN bool w8a8_tp_fault_init(w8a8_comm *c);
W8A8_HIDDEN void w8a8_tp_fault_fini(w8a8_comm *c);
/* The AUTO crossovers of c's transport (call once the transport is known; W8A8_TP_OVERLAP_MIN_M overrides). */
W8A8_HIDDEN void w8a8_tp_set_crossovers(w8a8_comm *c);
/* A fused call on an invalid communicator (counted per thread: TP_SIG_SKIPS). */
W8A8_HIDDEN void w8a8_tp_count_invalid_comm(void);
/* The start of every fused call on a valid communicator: number it, set its deadline, and return
 * W8A8_ERROR_BROKEN / W8A8_ERROR_ABORTED at once where the communicator is broken, aborted, or a
 * peer's break notice has arrived (tests: TP_FAULT_SKIP returns here too). */
W8A8_HIDDEN w8a8_status w8a8_tp_call_enter(const char *fn, w8a8_comm *c);
/* Break c with status s (the message: this thread's last error). The first break's reason is kept.
 * notify: tell the peers (MPI: a notice to every peer; in-process group: the group's state); false
 * where every rank takes the same decision anyway. Call from the thread making the call (MPI).
 * Returns s with the message kept. */
W8A8_HIDDEN w8a8_status w8a8_tp_break(const char *fn, w8a8_comm *c, w8a8_status s, bool notify);
/* During a wait: an abort, a peer's break notice, the deadline. W8A8_SUCCESS or the call's error (c broken). */
W8A8_HIDDEN w8a8_status w8a8_tp_poll_faults(const char *fn, w8a8_comm *c, const char *what);
/* Between polls of a wait that has not completed: spin first, then yield, then sleep briefly. */
W8A8_HIDDEN void w8a8_tp_backoff(int iter, double since);
/* Whether c is broken (its own state; GPU groups: also the group's). */
W8A8_HIDDEN bool w8a8_tp_is_broken(const w8a8_comm *c);
/* The crossover of W8A8_TP_OVERLAP_AUTO for c and op: fused when M >= this (rows). */
W8A8_HIDDEN int64_t w8a8_tp_crossover(const w8a8_comm *c, int op);

/* GPU communicators' part of the failure state (comm_gpu.c; no-ops without CUDA): an in-process group
 * shares its break with every rank (any thread), an NCCL communicator reports NCCL's asynchronous error. */
W8A8_HIDDEN void w8a8_tp_gpu_on_break(w8a8_comm *c, w8a8_status s, const char *msg);
W8A8_HIDDEN void w8a8_tp_gpu_on_abort(w8a8_comm *c);
W8A8_HIDDEN bool w8a8_tp_gpu_group_broken(const w8a8_comm *c, int *status, char *msg, size_t n);
W8A8_HIDDEN w8a8_status w8a8_tp_gpu_async_error(const char *fn, const w8a8_comm *c);

/* Tests: TP_FAULT_* on the next fused call of c. */
enum {
  TP_FAULT_NONE = 0,
  TP_FAULT_MPI = 1,  /* the agreement's MPI call gets an invalid count, so MPI itself rejects it */
  TP_FAULT_SKIP = 2, /* the call is numbered but returns before its exchange (as a rank returning early) */
  TP_FAULT_EXIT = 3, /* the process exits (_exit(0)) right after the call's agreement: a rank dying mid-call */
  TP_FAULT_GEMM = 4  /* GPU transports: the call's first GEMM (after the side stream's fork) fails, enqueueing nothing */
};
W8A8_HIDDEN void w8a8_tp_test_inject_fault(w8a8_comm *c, int kind);
/* Where TP_FAULT_EXIT acts: after the agreement of every fused call. */
W8A8_HIDDEN void w8a8_tp_test_after_agree(w8a8_comm *c);
/* Tests and tools: the schedule the last fused call of c ran (0 unfused, 1 fused; -1 none or failed
 * before its schedule), and c's AUTO crossover for op (TP_OP_AG / TP_OP_RS), set to rows (>= 0; INT64_MAX never). */
W8A8_HIDDEN int w8a8_tp_last_fuse(const w8a8_comm *c);
W8A8_HIDDEN void w8a8_tp_set_crossover(w8a8_comm *c, int op, int64_t rows);

#ifdef W8A8_HAVE_MPI
/* Wait for n requests of c (MPI_Testall polled with w8a8_tp_poll_faults). An MPI error, the deadline, an
 * abort or a notice breaks c (its pending operations then keep their buffers: mpi_pending). */
W8A8_HIDDEN w8a8_status w8a8_tp_mpi_wait(const char *fn, w8a8_comm *c, int n, MPI_Request *reqs, const char *what);
/* Creation: wait for one request until `deadline` (no communicator yet). W8A8_ERROR_TIMEOUT leaves it pending. */
W8A8_HIDDEN w8a8_status w8a8_tp_mpi_wait_until(const char *fn, MPI_Request *req, double deadline, const char *what);
/* A nonblocking collective of c already started (req), waited for; rc: what starting it returned. */
W8A8_HIDDEN w8a8_status w8a8_tp_mpi_coll(const char *fn, w8a8_comm *c, int rc, MPI_Request *req, const char *what);
/* Post the notice receive (creation, once c->mpi and c->instance are set); send the notices (w8a8_tp_break,
 * destroy); at destroy, w8a8_tp_notice_close cancels the receive and settles the sends, and tells whether
 * c->mpi may be freed: not where c is broken (messages of it may still arrive, and a freed communicator's
 * context may be reused by a new one, to which the MPI library would hand them). */
W8A8_HIDDEN void w8a8_tp_notice_post(w8a8_comm *c);
W8A8_HIDDEN void w8a8_tp_notice_send(w8a8_comm *c);
W8A8_HIDDEN bool w8a8_tp_notice_close(w8a8_comm *c);
/* A random 64-bit number (creation: the communicator's instance). */
W8A8_HIDDEN uint64_t w8a8_tp_random64(void);
#endif

/* The agreement collective. `sig` is this rank's signature (TP_SIG_STATUS holds its
 * local status). On return c->sig_all, c->m_count and c->m_offset are filled on every rank
 * and the returned status is the same kind of decision on every rank (see w8a8.h). On a
 * rank whose own status was non-zero, that status is returned with its message kept. */
W8A8_HIDDEN w8a8_status w8a8_tp_agree(const char *fn, w8a8_comm *c, int64_t sig[TP_SIG_COUNT]);

/* The decision of the agreement from the gathered table c->sig_all (every rank evaluates the
 * same table, so every rank takes the same decision); fills c->m_count, c->m_offset and
 * c->agreed_fuse. Ranks at different calls break c (on every rank: no notice needed).
 * `local`/`saved`: this rank's own status and message. Shared by the MPI and GPU transports. */
W8A8_HIDDEN w8a8_status w8a8_tp_agree_table(const char *fn, w8a8_comm *c, w8a8_status local, const char *saved);

/* GPU communicators (tp_gpu.c; stubs returning NOT_BUILT in builds without CUDA). */
W8A8_HIDDEN bool w8a8_tp_is_gpu(const w8a8_comm *c);
struct w8a8_tp_args;
W8A8_HIDDEN w8a8_status w8a8_tp_gpu_all_gather_scaled_mm(const char *fn, w8a8_comm *c, const struct w8a8_tp_args *x);
W8A8_HIDDEN w8a8_status w8a8_tp_gpu_scaled_mm_reduce_scatter(const char *fn, w8a8_comm *c,
                                                             const struct w8a8_tp_args *x);
W8A8_HIDDEN w8a8_status w8a8_tp_gpu_comm_reserve(const char *fn, w8a8_comm *c, int64_t max_m, int64_t max_n,
                                                 int64_t max_k);
/* Frees everything but c->mpi (comm.c frees that, and finalises MPI where it initialised it). */
W8A8_HIDDEN w8a8_status w8a8_tp_gpu_comm_destroy(w8a8_comm *c);
/* The transport a communicator's fused calls use: "mpi" (CPU ranks), "copy_engine" (GPU ranks as
 * threads of one process), "nccl", or "ipc" (processes of one host, CUDA IPC, W8A8_TP_IPC=1).
 * *why (may be NULL) gets why IPC was not chosen when it was asked for, else "". For tools and
 * tests (static link; not part of the public API). */
W8A8_HIDDEN const char *w8a8_tp_transport(const w8a8_comm *c, const char **why);
/* w8a8_comm_create_world with a CUDA handle: NCCL bootstrapped over *mpi_comm (an MPI_Comm *). */
W8A8_HIDDEN w8a8_status w8a8_tp_gpu_create_world(const char *fn, w8a8_comm **comm, w8a8_handle *handle,
                                                 const void *mpi_comm);

/* Map a failed MPI return code to W8A8_ERROR_COMM with MPI's text. */
W8A8_HIDDEN w8a8_status w8a8_tp_mpi_err(const char *fn, const char *what, int code);

/* Test hook: the next agreement collective of `c` is issued with an invalid count, so MPI
 * itself rejects it (a real failed MPI call, surfaced as W8A8_ERROR_COMM): TP_FAULT_MPI. */
W8A8_HIDDEN void w8a8_tp_test_inject_mpi_fault(w8a8_comm *c);

/* ---- resolved problems (tp_validate.c) ---------------------------------------- */

typedef struct w8a8_tp_problem {
  int op;               /* TP_OP_AG or TP_OP_RS */
  int64_t M_local;      /* AG: a->rows; RS: out->rows */
  int64_t M_total;      /* AG: out->rows; RS: a->rows */
  int64_t N, K;         /* b->cols, a->cols */
  w8a8_dtype in_dtype, out_dtype;
  const void *a;        /* [a_rows, K] row-major */
  int64_t lda;
  const void *b;        /* column-major */
  int64_t ldb;
  void *out;
  int64_t ldo;
  const float *scale_a;
  bool scale_a_per_token;
  const float *scale_b;
  bool scale_b_per_channel;
  const void *bias;
  bool has_bias;          /* a bias argument was given (even when N = 0) */
  w8a8_azp_mode azp_mode; /* as validated on the local shapes */
  const int32_t *azp;
  const int32_t *azp_adj;
  int zp_kind;            /* 0 none, 1 premultiplied, 2 azp vector */
  int overlap;            /* as requested (W8A8_TP_OVERLAP_*); after the agreement, the schedule run: 0 / 1 */
  int partials;           /* W8A8_TP_PARTIALS_FP32 or _OUT (opts, or the default) */
  /* Block scales (the w8a8_*_blockwise calls): scale_a and scale_b are then matrices, element (i, j) at
   * scale[i * rs + j * cs]: scale_a [a->rows, ceil(K/128)], scale_b [ceil(N/128), ceil(K/128)]. */
  bool block;
  int64_t sa_rs, sa_cs, sb_rs, sb_cs;
  /* AG optional outputs (NULL = not wanted) */
  void *g_a;
  int64_t g_lda;
  float *g_scale;
  int32_t *g_azp;
} w8a8_tp_problem;

/* Local checks of the public arguments; fill *p. Nothing is written on failure. */
W8A8_HIDDEN w8a8_status w8a8_tp_validate(const char *fn, const w8a8_comm *c, int op, const w8a8_matrix *a,
                                         const w8a8_matrix *b, const w8a8_vector *scale_a,
                                         const w8a8_vector *scale_b, const w8a8_vector *bias,
                                         const w8a8_zero_point *zp, const w8a8_matrix *out,
                                         const w8a8_gathered *gathered, const w8a8_tp_options *opts,
                                         w8a8_tp_problem *p);

/* A fused call's arguments: the plain call's scale vectors and zero point, or (block != 0) the block-scaled call's
 * scale matrices. */
typedef struct w8a8_tp_args {
  const w8a8_matrix *a, *b;
  const w8a8_vector *scale_a, *scale_b;
  const w8a8_matrix *block_a, *block_b;
  int block;
  const w8a8_vector *bias;
  const w8a8_zero_point *zp;
  const w8a8_matrix *out;
  const w8a8_gathered *gathered;
  const w8a8_tp_options *opts;
} w8a8_tp_args;

#ifdef W8A8_HAVE_MPI
/* A CPU rank's schedule of a fused call (ag_gemm.c, gemm_rs.c), run once the agreement chose it (p->overlap). */
typedef w8a8_status (*w8a8_tp_run_fn)(const char *fn, w8a8_comm *c, const w8a8_tp_problem *p);
/* A fused call on an MPI communicator once w8a8_tp_entry passed: number the call, check this rank's arguments, join
 * the agreement, run the schedule it chose, and break c where the run fails (the peers may have run their part). */
W8A8_HIDDEN w8a8_status w8a8_tp_cpu_call(const char *fn, w8a8_comm *c, int op, const w8a8_tp_args *x,
                                         w8a8_tp_run_fn run);
#endif

/* The block-scaled calls' checks (w8a8_all_gather_scaled_mm_blockwise, w8a8_scaled_mm_reduce_scatter_blockwise):
 * the handle, then w8a8_tp_validate's checks of a, b, bias, out and opts, then fp8 operands and the scale matrices;
 * fill *p with block = true. Nothing is written on failure. */
W8A8_HIDDEN w8a8_status w8a8_tp_local_checks_blockwise(const char *fn, const w8a8_comm *c, int op, const w8a8_matrix *a,
                                                       const w8a8_matrix *b, const w8a8_matrix *scale_a,
                                                       const w8a8_matrix *scale_b, const w8a8_vector *bias,
                                                       const w8a8_matrix *out, const w8a8_tp_options *opts,
                                                       w8a8_tp_problem *p);

/* Local checks every fused call makes first: the comm's handle, the arguments
 * (w8a8_tp_validate), and on CPU ranks a forced kernel's refusal of the block GEMMs (GPU ranks ask
 * theirs in tp_gpu.c). A failure here joins the agreement as this rank's status. */
W8A8_HIDDEN w8a8_status w8a8_tp_local_checks(const char *fn, const w8a8_comm *c, int op, const w8a8_matrix *a,
                                             const w8a8_matrix *b, const w8a8_vector *scale_a,
                                             const w8a8_vector *scale_b, const w8a8_vector *bias,
                                             const w8a8_zero_point *zp, const w8a8_matrix *out,
                                             const w8a8_gathered *gathered, const w8a8_tp_options *opts,
                                             w8a8_tp_problem *p);

/* s, the forced kernel's refusal of the call's GEMM (W8A8_SUCCESS: none), reworded as the call's error. */
W8A8_HIDDEN w8a8_status w8a8_tp_forced_refusal(const char *fn, w8a8_status s);
/* Fill the signature of a validated problem (status 0), or of a failed one (status s): c's call number
 * and skip count, and the schedule this rank would choose (AUTO resolved with c's crossover). */
W8A8_HIDDEN void w8a8_tp_signature(const w8a8_comm *c, const w8a8_tp_problem *p, int op, w8a8_status s,
                                   int64_t sig[TP_SIG_COUNT]);

/* Workspace bytes needed for (max_m, max_n, max_k) on `size` ranks. */
W8A8_HIDDEN size_t w8a8_tp_workspace_need(int size, int64_t max_m, int64_t max_n, int64_t max_k);

/* Rows per GEMM block: the unit of work between two MPI progress polls. A function of
 * (N, K) only, so the fused and unfused paths run the GEMM on identical sub-problems
 * (and the CPU kernels' results cannot depend on which path ran them). */
W8A8_HIDDEN int64_t w8a8_tp_block_rows(const w8a8_comm *c, int64_t N, int64_t K);

/* The dtype of a reduce-scatter's partials: out's dtype with W8A8_TP_PARTIALS_OUT, else fp32. */
static inline w8a8_dtype w8a8_tp_partial_dtype(const w8a8_tp_problem *p) {
  return p->partials == W8A8_TP_PARTIALS_OUT ? p->out_dtype : W8A8_DTYPE_FP32;
}

/* Round fp32 to the output dtype once (RNE) and store element i. */
W8A8_HIDDEN void w8a8_tp_store(w8a8_dtype t, void *base, int64_t i, float r);
W8A8_HIDDEN float w8a8_tp_load(w8a8_dtype t, const void *base, int64_t i);

#endif
