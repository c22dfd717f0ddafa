/* tp_internal.h — what the tensor-parallel files (src/tp) share: the communicator
 * struct, the resolved TP problems, the agreement check and the MPI transport.
 *
 * Flow of a fused call (ag_gemm.c, gemm_rs.c):
 *   1. comm + handle lookup (registry + magic): failures return at once, before any
 *      communication (a rank that cannot name its communicator cannot take part);
 *   2. local argument checks (tp_validate.c) -> a resolved problem, or a status;
 *   3. the agreement collective (comm.c, w8a8_tp_agree): one MPI_Allgather of a
 *      fixed-size signature carrying each rank's status and shapes; every rank takes
 *      the same decision from the same gathered table, so a local failure or a
 *      disagreement is an error on every rank, never a hang;
 *   4. the schedule (fused or unfused) on the reserved workspace. */
#ifndef W8A8_TP_INTERNAL_H
#define W8A8_TP_INTERNAL_H

#include "../core/internal.h"

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
  bool broken;        /* an MPI call failed mid-schedule: every later call fails */
  bool owns_mpi_init; /* created by w8a8_comm_create_world after it called MPI_Init */
  int fault_inject;   /* tests: make the next agreement's MPI call fail for real */
  int64_t block_rows; /* GEMM rows between progress polls; 0 = auto (env W8A8_TP_BLOCK_ROWS at creation) */
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
#endif
  /* GPU communicators (kinds NCCL and LOCAL): struct w8a8_tp_gpu (tp_gpu.h); NULL for MPI. */
  void *gpu;
};

/* Look up `comm` for public call `fn`: registry, magic, kind, broken flag, and its handle. */
W8A8_HIDDEN w8a8_status w8a8_tp_check_comm(const char *fn, const w8a8_comm *c);

/* The agreement collective. `sig` is this rank's signature (TP_SIG_STATUS holds its
 * local status). On return c->sig_all, c->m_count and c->m_offset are filled on every rank
 * and the returned status is the same kind of decision on every rank (see w8a8.h). On a
 * rank whose own status was non-zero, that status is returned with its message kept. */
W8A8_HIDDEN w8a8_status w8a8_tp_agree(const char *fn, w8a8_comm *c, int64_t sig[TP_SIG_COUNT]);

/* The decision of the agreement from the gathered table c->sig_all (every rank evaluates the
 * same table, so every rank takes the same decision); fills c->m_count and c->m_offset.
 * `local`/`saved`: this rank's own status and message. Shared by the MPI and GPU transports. */
W8A8_HIDDEN w8a8_status w8a8_tp_agree_table(const char *fn, w8a8_comm *c, w8a8_status local, const char *saved);

/* GPU communicators (tp_gpu.c; stubs returning NOT_BUILT in builds without CUDA). */
W8A8_HIDDEN bool w8a8_tp_is_gpu(const w8a8_comm *c);
W8A8_HIDDEN w8a8_status w8a8_tp_gpu_all_gather_scaled_mm(const char *fn, w8a8_comm *c, const w8a8_matrix *a,
                                                         const w8a8_matrix *b, const w8a8_vector *scale_a,
                                                         const w8a8_vector *scale_b, const w8a8_vector *bias,
                                                         const w8a8_zero_point *zp, const w8a8_matrix *out,
                                                         const w8a8_gathered *gathered, const w8a8_tp_options *opts);
W8A8_HIDDEN w8a8_status w8a8_tp_gpu_scaled_mm_reduce_scatter(const char *fn, w8a8_comm *c, const w8a8_matrix *a,
                                                             const w8a8_matrix *b, const w8a8_vector *scale_a,
                                                             const w8a8_vector *scale_b, const w8a8_vector *bias,
                                                             const w8a8_zero_point *zp, const w8a8_matrix *out,
                                                             const w8a8_tp_options *opts);
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
 * itself rejects it (a real failed MPI call, surfaced as W8A8_ERROR_COMM). */
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
  int overlap;
  int partials;           /* W8A8_TP_PARTIALS_FP32 or _OUT (opts, or the default) */
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

/* Local checks every fused call makes first: the broken flag, the comm's handle, the arguments
 * (w8a8_tp_validate), and on CPU ranks a forced kernel's refusal of the block GEMMs (GPU ranks ask
 * theirs in tp_gpu.c). A failure here joins the agreement as this rank's status. */
W8A8_HIDDEN w8a8_status w8a8_tp_local_checks(const char *fn, const w8a8_comm *c, int op, const w8a8_matrix *a,
                                             const w8a8_matrix *b, const w8a8_vector *scale_a,
                                             const w8a8_vector *scale_b, const w8a8_vector *bias,
                                             const w8a8_zero_point *zp, const w8a8_matrix *out,
                                             const w8a8_gathered *gathered, const w8a8_tp_options *opts,
                                             w8a8_tp_problem *p);

/* Fill the signature of a validated problem (status 0), or of a failed one (status s). */
/* s, the forced kernel's refusal of the call's GEMM (W8A8_SUCCESS: none), reworded as the call's error. */
W8A8_HIDDEN w8a8_status w8a8_tp_forced_refusal(const char *fn, w8a8_status s);
W8A8_HIDDEN void w8a8_tp_signature(const w8a8_tp_problem *p, int op, w8a8_status s, int64_t sig[TP_SIG_COUNT]);

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
