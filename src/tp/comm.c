/* comm.c — the communicator: creation over MPI, lookup, workspace, the agreement
 * exchange and its decision, and small helpers shared by the fused operations. How a
 * communicator fails (broken state, deadlines, abort) is in tp_fault.c.
 *
 * Without MPI (no -DW8A8_HAVE_MPI) every creation call returns W8A8_ERROR_NOT_BUILT,
 * so no communicator can exist and every other call fails its lookup. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/knobs.h"
#include "tp_internal.h"

#define LL(x) ((long long)(x))

/* ---- helpers that do not need MPI -------------------------------------------- */

w8a8_status w8a8_tp_shard_rows(int64_t total, int size, int rank, int64_t *offset, int64_t *count) {
  static const char fn[] = "w8a8_tp_shard_rows";
  w8a8_clear_error();
  if (!offset || !count)
    return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: %s is NULL", fn, !offset ? "offset" : "count");
  if (total < 0) return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: total is %lld; must be >= 0", fn, LL(total));
  if (size < 1) return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: size is %d; must be >= 1", fn, size);
  if (rank < 0 || rank >= size)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: rank is %d; expected 0..%d", fn, rank, size - 1);
  int64_t q = total / size, r = total % size;
  *count = q + (rank < r ? 1 : 0);
  *offset = q * rank + (rank < r ? rank : r);
  return W8A8_SUCCESS;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Saturating arithmetic for the workspace size: with each bound below 2^31 the reduce-scatter's
 * 4 x max_n x (max_m + (W-1) x chunk) passes 2^64 (W = 3, max_m = 1288491175, max_n = 2147482003:
 * it wrapped to 11.6 GB, and a call the reservation admitted laid out 14.3 GB).
 * SIZE_MAX then fails the callers' size limit instead. */
static uint64_t mul_sat(uint64_t a, uint64_t b) { return a && b > UINT64_MAX / a ? UINT64_MAX : a * b; }
static uint64_t add_sat(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

size_t w8a8_tp_workspace_need(int size, int64_t max_m, int64_t max_n, int64_t max_k) {
  if (size < 1 || max_m < 0 || max_n < 0 || max_k < 0) return SIZE_MAX;
  /* all-gather: gathered A (1-byte elements), then per-row scales (a row of ceil(K/128) block scales in the
   * block-scaled call) and zero points. */
  const uint64_t row_extra = add_sat(8u, mul_sat(4u, (uint64_t)ceil_div(max_k, W8A8_BLOCK)));
  uint64_t ag = add_sat(add_sat(mul_sat((uint64_t)max_m, (uint64_t)max_k), mul_sat(row_extra, (uint64_t)max_m)), 128u);
  /* reduce-scatter: every partial row of this rank [max_m, max_n], the W-1 peers'
   * partials of our own rows, and one fp32 row for the ordered sum. */
  uint64_t chunk = (uint64_t)ceil_div(max_m, size);
  uint64_t rows = add_sat(add_sat((uint64_t)max_m, mul_sat((uint64_t)(size - 1), chunk)), 1u);
  uint64_t rs = add_sat(mul_sat(mul_sat(4u, (uint64_t)max_n), rows), 64u);
  uint64_t need = ag > rs ? ag : rs;
  return need > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)need;
}

int64_t w8a8_tp_block_rows(const w8a8_comm *c, int64_t N, int64_t K) {
  if (c->block_rows > 0) return c->block_rows;
  /* About 2^24 multiply-adds per block: long enough for a GEMM call to be efficient,
   * short enough that the messages in flight get polled a few times per chunk. */
  int64_t nk = N * K > 0 ? N * K : 1;
  int64_t rows = ((int64_t)1 << 24) / nk;
  rows = rows / 16 * 16;
  return rows < 32 ? 32 : rows;
}

float w8a8_tp_load(w8a8_dtype t, const void *base, int64_t i) {
  switch (t) {
    case W8A8_DTYPE_BF16: return w8a8_bf16_to_f32(((const uint16_t *)base)[i]);
    case W8A8_DTYPE_FP16: return w8a8_f16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
  }
}

void w8a8_tp_store(w8a8_dtype t, void *base, int64_t i, float r) {
  switch (t) {
    case W8A8_DTYPE_BF16: ((uint16_t *)base)[i] = w8a8_f32_to_bf16(r); break;
    case W8A8_DTYPE_FP16: ((uint16_t *)base)[i] = w8a8_f32_to_f16(r); break;
    default: ((float *)base)[i] = r; break;
  }
}

w8a8_status w8a8_tp_check_comm(const char *fn, const w8a8_comm *c) {
  if (!c) return w8a8_err(W8A8_ERROR_INVALID_COMM, "%s: comm is NULL; expected a communicator from w8a8_comm_create_*", fn);
  if (!w8a8_registry_contains(c))
    return w8a8_err(W8A8_ERROR_INVALID_COMM,
                    "%s: comm %p is not a live w8a8 communicator (destroyed, or never created)", fn, (const void *)c);
  /* Registered objects all begin with a uint32_t magic, so reading it is safe. */
  if (c->magic != W8A8_COMM_MAGIC)
    return w8a8_err(W8A8_ERROR_INVALID_COMM, "%s: comm %p is not a communicator (magic 0x%08x%s)", fn,
                    (const void *)c, c->magic, c->magic == W8A8_HANDLE_MAGIC ? ": a w8a8_handle was passed" : "");
  if (c->kind != W8A8_COMM_KIND_MPI && c->kind != W8A8_COMM_KIND_NCCL && c->kind != W8A8_COMM_KIND_LOCAL)
    return w8a8_err(W8A8_ERROR_INVALID_COMM, "%s: comm %p is of unknown kind %d", fn, (const void *)c, (int)c->kind);
  return W8A8_SUCCESS;
}

w8a8_status w8a8_tp_entry(const char *fn, const w8a8_comm *c) {
  w8a8_clear_error();
  const w8a8_status s = w8a8_tp_check_comm(fn, c);
  if (s != W8A8_SUCCESS) w8a8_tp_count_invalid_comm();
  return s;
}

w8a8_status w8a8_comm_rank(const w8a8_comm *c, int *rank) {
  w8a8_clear_error();
  W8A8_CHECK(w8a8_tp_check_comm("w8a8_comm_rank", c));
  if (!rank) return w8a8_err(W8A8_ERROR_NULL_POINTER, "w8a8_comm_rank: rank is NULL");
  *rank = c->rank;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_size(const w8a8_comm *c, int *size) {
  w8a8_clear_error();
  W8A8_CHECK(w8a8_tp_check_comm("w8a8_comm_size", c));
  if (!size) return w8a8_err(W8A8_ERROR_NULL_POINTER, "w8a8_comm_size: size is NULL");
  *size = c->size;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_workspace_bytes(const w8a8_comm *c, size_t *bytes) {
  w8a8_clear_error();
  W8A8_CHECK(w8a8_tp_check_comm("w8a8_comm_workspace_bytes", c));
  if (!bytes) return w8a8_err(W8A8_ERROR_NULL_POINTER, "w8a8_comm_workspace_bytes: bytes is NULL");
  *bytes = c->ws_bytes;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_reserve(w8a8_comm *c, int64_t max_m, int64_t max_n, int64_t max_k) {
  static const char fn[] = "w8a8_comm_reserve";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_tp_check_comm(fn, c));
  /* (MPI may still write into a broken communicator's workspace: it is never replaced) */
  if (w8a8_tp_is_broken(c))
    return w8a8_err(W8A8_ERROR_BROKEN, "%s: the communicator is broken (see w8a8_comm_get_async_error); destroy it",
                    fn);
  const int64_t lim = (int64_t)1 << 31;
  if (max_m < 0 || max_n < 0 || max_k < 0 || max_m >= lim || max_n >= lim || max_k >= lim)
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE, "%s: max_m, max_n, max_k = %lld, %lld, %lld; each must be in 0..2^31-1",
                    fn, LL(max_m), LL(max_n), LL(max_k));
  /* Never shrink: keep the larger of the old and new bounds in each dimension. */
  if (max_m < c->max_m) max_m = c->max_m;
  if (max_n < c->max_n) max_n = c->max_n;
  if (max_k < c->max_k) max_k = c->max_k;
  const size_t need = w8a8_tp_workspace_need(c->size, max_m, max_n, max_k);
  if (need > ((size_t)1 << 46))
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE,
                    "%s: max_m, max_n, max_k = %lld, %lld, %lld on %d ranks need a workspace over 2^46 bytes (%s)", fn,
                    LL(max_m), LL(max_n), LL(max_k), c->size, need == SIZE_MAX ? "past 2^64" : "too large");
  /* GPU communicators: device memory, layout of their own (tp_gpu.c). */
  if (w8a8_tp_is_gpu(c)) return w8a8_tp_gpu_comm_reserve(fn, c, max_m, max_n, max_k);
  if (need > c->ws_bytes) {
    void *ws = aligned_alloc(64, (need + 63) & ~(size_t)63);
    if (!ws) return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not allocate %zu bytes of workspace", fn, need);
    free(c->ws);
    c->ws = ws;
    c->ws_bytes = need;
  }
  c->max_m = max_m;
  c->max_n = max_n;
  c->max_k = max_k;
  return W8A8_SUCCESS;
}

void w8a8_tp_test_inject_mpi_fault(w8a8_comm *c) { w8a8_tp_test_inject_fault(c, TP_FAULT_MPI); }

#ifndef W8A8_HAVE_MPI

w8a8_status w8a8_comm_create_mpi(w8a8_comm **comm, w8a8_handle *handle, const void *mpi_comm) {
  (void)comm, (void)handle, (void)mpi_comm;
  w8a8_clear_error();
  return w8a8_err(W8A8_ERROR_NOT_BUILT, "w8a8_comm_create_mpi: libw8a8 was built without MPI (install "
                                        "libopenmpi-dev so the Makefile finds mpicc, and rebuild)");
}

w8a8_status w8a8_comm_create_world(w8a8_comm **comm, w8a8_handle *handle) {
  (void)comm, (void)handle;
  w8a8_clear_error();
  return w8a8_err(W8A8_ERROR_NOT_BUILT, "w8a8_comm_create_world: libw8a8 was built without MPI (GPU ranks in one "
                                        "process: w8a8_comm_create_local or w8a8_comm_create_nccl)");
}

w8a8_status w8a8_comm_destroy(w8a8_comm *c) {
  w8a8_clear_error();
  if (!c) return W8A8_SUCCESS;
  W8A8_CHECK(w8a8_tp_check_comm("w8a8_comm_destroy", c));
  if (w8a8_tp_is_gpu(c)) return w8a8_tp_gpu_comm_destroy(c);
  return w8a8_err(W8A8_ERROR_INTERNAL, "w8a8_comm_destroy: an MPI communicator in a build without MPI");
}

w8a8_status w8a8_tp_agree(const char *fn, w8a8_comm *c, int64_t sig[TP_SIG_COUNT]) {
  (void)c, (void)sig;
  return w8a8_err(W8A8_ERROR_NOT_BUILT, "%s: libw8a8 was built without MPI", fn);
}

w8a8_status w8a8_tp_mpi_err(const char *fn, const char *what, int code) {
  return w8a8_err(W8A8_ERROR_COMM, "%s: %s failed (code %d)", fn, what, code);
}

#else /* W8A8_HAVE_MPI */

w8a8_status w8a8_tp_mpi_err(const char *fn, const char *what, int code) {
  char text[MPI_MAX_ERROR_STRING + 1];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  text[len] = '\0';
  return w8a8_err(W8A8_ERROR_COMM, "%s: %s failed: %s (MPI error %d)", fn, what, len ? text : "unknown", code);
}

/* Communicators made by w8a8_comm_create_world after it initialised MPI itself. */
static int g_world_refs;
static bool g_we_initialized;

static void comm_free(w8a8_comm *c) {
  if (!c) return;
  /* An operation left pending in MPI (a collective that never completed, a message of a schedule
   * still in flight) may still read or write the tables and the workspace: those stay allocated. */
  if (!c->mpi_pending) {
    free(c->ws);
    free(c->sig_all);
    free(c->sig_mine);
  }
  free(c->m_count);
  free(c->m_offset);
  free(c->counts);
  free(c->displs);
  free(c->counts2);
  free(c->displs2);
  free(c->reqs);
  w8a8_tp_fault_fini(c);
  c->magic = 0;
  free(c);
}

static w8a8_comm *comm_alloc(int size) {
  w8a8_comm *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  size_t n = (size_t)size;
  c->sig_all = calloc(n * TP_SIG_COUNT, sizeof *c->sig_all);
  c->sig_mine = calloc(TP_SIG_COUNT + 2, sizeof *c->sig_mine);
  c->m_count = calloc(n, sizeof *c->m_count);
  c->m_offset = calloc(n + 1, sizeof *c->m_offset);
  c->counts = calloc(n, sizeof(int));
  c->displs = calloc(n, sizeof(int));
  c->counts2 = calloc(n, sizeof(int));
  c->displs2 = calloc(n, sizeof(int));
  c->reqs = calloc(6 * n, sizeof *c->reqs);
  c->mpi = MPI_COMM_NULL;
  c->coll_req = MPI_REQUEST_NULL;
  c->notice_req = MPI_REQUEST_NULL;
  if (!c->sig_all || !c->sig_mine || !c->m_count || !c->m_offset || !c->counts || !c->displs || !c->counts2 ||
      !c->displs2 || !c->reqs || !w8a8_tp_fault_init(c)) {
    comm_free(c);
    return NULL;
  }
  return c;
}

/* Why *mpi_comm cannot be used (NULL: it can): a rank with no communicator cannot join its peers. */
static w8a8_status unusable_mpi_comm(const char *fn, const void *mpi_comm) {
  if (!mpi_comm)
    return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: mpi_comm is NULL; expected a pointer to an MPI_Comm", fn);
  int flag = 0;
  MPI_Initialized(&flag);
  if (!flag)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE,
                    "%s: MPI is not initialised; call MPI_Init first or use w8a8_comm_create_world", fn);
  MPI_Finalized(&flag);
  if (flag) return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: MPI has already been finalised", fn);
  MPI_Comm user = *(const MPI_Comm *)mpi_comm;
  if (user == MPI_COMM_NULL)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: *mpi_comm is MPI_COMM_NULL; expected an intracommunicator", fn);
  int rc = MPI_Comm_test_inter(user, &flag);
  if (rc != MPI_SUCCESS) return w8a8_tp_mpi_err(fn, "MPI_Comm_test_inter(*mpi_comm)", rc);
  if (flag)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: *mpi_comm is an intercommunicator; expected an intracommunicator",
                    fn);
  return W8A8_SUCCESS;
}

/* The creation's exchange buffers: on the heap, since a collective that times out keeps them for ever. */
typedef struct create_bufs {
  MPI_Comm dup;
  int64_t v[7], r[7];
} create_bufs;

w8a8_status w8a8_comm_create_mpi(w8a8_comm **comm, w8a8_handle *handle, const void *mpi_comm) {
  static const char fn[] = "w8a8_comm_create_mpi";
  w8a8_clear_error();
  /* Errors that keep this rank out of the collective: it has no communicator to use (the header
   * says what its peers see). */
  W8A8_CHECK(unusable_mpi_comm(fn, mpi_comm));
  MPI_Comm user = *(const MPI_Comm *)mpi_comm;
  const double deadline = w8a8_tp_deadline_in(w8a8_tp_env_timeout_us());

  /* Local checks: a failure here still joins the collective below, so that every
   * rank learns of it and fails too (no rank is left waiting in MPI_Comm_idup). */
  w8a8_status local = W8A8_SUCCESS;
  if (!comm)
    local = w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: comm is NULL; expected a w8a8_comm** to fill", fn);
  else if ((local = w8a8_check_handle(fn, handle)) != W8A8_SUCCESS) {
  } else if (handle->kind != W8A8_DEVICE_CPU)
    local = w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE,
                     "%s: handle is a CUDA handle; MPI communicators run the CPU backend (GPU ranks: "
                     "w8a8_comm_create_nccl)",
                     fn);
  char saved[512];
  snprintf(saved, sizeof saved, "%s", w8a8_last_error());

  create_bufs *cb = calloc(1, sizeof *cb);
  if (!cb) return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn); /* (before any collective) */
  /* MPI_Comm_idup, polled: a peer that never joins (its mpi_comm was unusable) costs the timeout. */
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Comm_idup(user, &cb->dup, &req);
  if (rc != MPI_SUCCESS) {
    free(cb);
    return w8a8_tp_mpi_err(fn, "MPI_Comm_idup", rc);
  }
  w8a8_status s = w8a8_tp_mpi_wait_until(fn, &req, deadline, "MPI_Comm_idup (creation)");
  if (s != W8A8_SUCCESS) return s; /* (cb stays: the duplication may still write cb->dup) */
  MPI_Comm dup = cb->dup;
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(dup, &rank);
  MPI_Comm_size(dup, &size);

  w8a8_comm *c = NULL;
  if (local == W8A8_SUCCESS) {
    c = comm_alloc(size);
    if (!c) {
      local = w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not allocate the communicator's tables", fn);
      snprintf(saved, sizeof saved, "%s", w8a8_last_error());
    }
  }

  /* Agreement at creation: MAX over (failed, version, device) and over their negations
   * gives every rank the max and the min of each field in one small allreduce; and the
   * largest of the ranks' random numbers is the communicator's instance (tp_fault.c). */
  int64_t mine[3] = {local != W8A8_SUCCESS ? 1 : 0, W8A8_VERSION,
                     handle && local == W8A8_SUCCESS ? (int64_t)handle->kind : 0};
  for (int i = 0; i < 3; i++) cb->v[i] = mine[i], cb->v[3 + i] = -mine[i];
  cb->v[6] = (int64_t)w8a8_tp_random64();
  rc = MPI_Iallreduce(cb->v, cb->r, 7, MPI_INT64_T, MPI_MAX, dup, &req);
  if (rc == MPI_SUCCESS) {
    s = w8a8_tp_mpi_wait_until(fn, &req, deadline, "MPI_Iallreduce (creation agreement)");
    if (s == W8A8_ERROR_TIMEOUT) {
      comm_free(c); /* (cb and dup stay: the allreduce may still use them) */
      return s;
    }
  } else {
    s = w8a8_tp_mpi_err(fn, "MPI_Iallreduce (creation agreement)", rc);
  }
  const int64_t *r = cb->r;
  if (s != W8A8_SUCCESS) {
  } else if (local != W8A8_SUCCESS) {
    s = w8a8_err(local, "%s", saved); /* keep this rank's own message */
  } else if (r[0] != 0) {
    s = w8a8_err(W8A8_ERROR_COMM_MISMATCH, "%s: another rank's arguments were rejected; see its error", fn);
  } else if (r[1] != -r[4]) {
    s = w8a8_err(W8A8_ERROR_COMM_MISMATCH, "%s: ranks run different libw8a8 versions (%lld and %lld)", fn, LL(-r[4]),
                 LL(r[1]));
  } else if (r[2] != -r[5]) {
    s = w8a8_err(W8A8_ERROR_COMM_MISMATCH, "%s: ranks use handles of different device kinds", fn);
  }
  const int64_t instance = r[6];
  free(cb);
  if (s != W8A8_SUCCESS) {
    MPI_Comm_free(&dup);
    comm_free(c);
    return s;
  }
  c->magic = W8A8_COMM_MAGIC;
  c->kind = W8A8_COMM_KIND_MPI;
  c->handle = handle;
  c->rank = rank;
  c->size = size;
  c->mpi = dup;
  c->instance = (uint64_t)instance;
  w8a8_tp_set_crossovers(c);
  if (w8a8_knob_int(W8A8_KNOB_TP_BLOCK_ROWS) > 0) c->block_rows = w8a8_knob_int(W8A8_KNOB_TP_BLOCK_ROWS);
  if (!w8a8_registry_add(c)) {
    /* Only this rank fails here (a few bytes of realloc); its peers hold a communicator they
     * must destroy. Reported rather than returning an object every later call would refuse. */
    MPI_Comm_free(&c->mpi);
    comm_free(c);
    return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not grow the communicator registry", fn);
  }
  w8a8_tp_notice_post(c);
  *comm = c;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_create_world(w8a8_comm **comm, w8a8_handle *handle) {
  static const char fn[] = "w8a8_comm_create_world";
  w8a8_clear_error();
  int flag = 0;
  MPI_Finalized(&flag);
  if (flag) return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: MPI has already been finalised in this process", fn);
  MPI_Initialized(&flag);
  bool init_here = false;
  if (!flag) {
    /* What the header promises: communicators on several threads need MPI_THREAD_MULTIPLE. Whatever
     * level MPI provides is accepted (one thread making the calls needs no more than FUNNELED). */
    int provided = 0;
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) return w8a8_err(W8A8_ERROR_COMM, "%s: MPI_Init_thread failed (code %d)", fn, rc);
    g_we_initialized = true;
    init_here = true;
  }
  MPI_Comm world = MPI_COMM_WORLD;
  w8a8_status s;
  /* CPU and GPU ranks take different collectives below: agree on the handle kind first
   * (-1 = this rank's arguments are bad), so that a mixed world fails on every rank. Heap buffers:
   * an allreduce that times out keeps them. */
  int *kv = calloc(4, sizeof *kv);
  if (!kv) return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: out of memory", fn);
  int kind = comm && w8a8_check_handle(fn, handle) == W8A8_SUCCESS ? (int)handle->kind : -1;
  kv[0] = kind, kv[1] = -kind;
  MPI_Request req = MPI_REQUEST_NULL;
  int rc = MPI_Iallreduce(kv, kv + 2, 2, MPI_INT, MPI_MAX, world, &req);
  if (rc == MPI_SUCCESS)
    s = w8a8_tp_mpi_wait_until(fn, &req, w8a8_tp_deadline_in(w8a8_tp_env_timeout_us()),
                               "MPI_Iallreduce (handle kinds, over MPI_COMM_WORLD)");
  else
    s = w8a8_tp_mpi_err(fn, "MPI_Iallreduce (handle kinds)", rc);
  if (s == W8A8_ERROR_TIMEOUT) return s; /* (kv stays; MPI stays initialised: a peer may be gone) */
  const int k0 = kv[2], k1 = kv[3];
  free(kv);
  if (s != W8A8_SUCCESS) {
  } else if (k0 != -k1) {
    if (!comm)
      s = w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: comm is NULL", fn);
    else if (kind < 0)
      s = w8a8_check_handle(fn, handle);
    else
      s = w8a8_err(W8A8_ERROR_COMM_MISMATCH,
                   "%s: ranks pass handles of different kinds (CPU and CUDA), or another rank's handle was bad", fn);
  } else if (kind == W8A8_DEVICE_CUDA) {
    /* GPU ranks: an NCCL communicator bootstrapped over MPI (comm_gpu.c) */
    s = w8a8_tp_gpu_create_world(fn, comm, handle, &world);
  } else {
    w8a8_clear_error();
    s = w8a8_comm_create_mpi(comm, handle, &world);
  }
  if (s != W8A8_SUCCESS) {
    if (init_here && g_world_refs == 0 && s != W8A8_ERROR_TIMEOUT) {
      /* Every rank failed together (the creation is collective), so every rank
       * finalises: an initialised-but-never-finalised MPI makes mpirun report an error.
       * Not after a timeout: a peer may be gone, and MPI_Finalize could wait for it. */
      MPI_Finalize();
      g_we_initialized = false;
    }
    return s;
  }
  if (g_we_initialized) {
    (*comm)->owns_mpi_init = true;
    g_world_refs++;
  }
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_destroy(w8a8_comm *c) {
  w8a8_clear_error();
  if (!c) return W8A8_SUCCESS;
  W8A8_CHECK(w8a8_tp_check_comm("w8a8_comm_destroy", c));
  /* A communicator aborted on this rank whose thread made no call since: its peers learn it now. */
  if (c->mpi != MPI_COMM_NULL && __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) w8a8_tp_notice_send(c);
  /* A broken communicator's MPI duplicate is not freed (tp_fault.c: messages of it may still arrive, and
   * a freed context is reused); nor is MPI finalised for it (create_world), since a peer may be gone
   * and MPI_Finalize could wait for it: the application decides. */
  const bool healthy = c->mpi == MPI_COMM_NULL || w8a8_tp_notice_close(c);
  if (w8a8_tp_is_gpu(c)) {
    /* GPU state first (comm_gpu.c frees c); then its MPI side (agreement communicator,
     * MPI_Finalize for w8a8_comm_create_world), as for an MPI communicator. */
    MPI_Comm mpi = c->mpi;
    bool owns = c->owns_mpi_init;
    w8a8_status s = w8a8_tp_gpu_comm_destroy(c);
    if (mpi != MPI_COMM_NULL && healthy) MPI_Comm_free(&mpi);
    if (owns && --g_world_refs == 0 && healthy) {
      MPI_Finalize();
      g_we_initialized = false;
    }
    return s;
  }
  w8a8_registry_remove(c);
  if (healthy) MPI_Comm_free(&c->mpi);
  bool fin = c->owns_mpi_init && --g_world_refs == 0 && healthy;
  comm_free(c);
  if (fin) {
    MPI_Finalize();
    g_we_initialized = false;
  }
  return W8A8_SUCCESS;
}

w8a8_status w8a8_tp_cpu_call(const char *fn, w8a8_comm *c, int op, const w8a8_tp_args *x, w8a8_tp_run_fn run) {
  W8A8_CHECK(w8a8_tp_call_enter(fn, c));
  w8a8_tp_problem p;
  memset(&p, 0, sizeof p);
  const w8a8_status local =
      x->block ? w8a8_tp_local_checks_blockwise(fn, c, op, x->a, x->b, x->block_a, x->block_b, x->bias, x->out,
                                                x->opts, &p)
               : w8a8_tp_local_checks(fn, c, op, x->a, x->b, x->scale_a, x->scale_b, x->bias, x->zp, x->out,
                                      x->gathered, x->opts, &p);
  int64_t sig[TP_SIG_COUNT];
  w8a8_tp_signature(c, &p, op, local, sig);
  W8A8_CHECK(w8a8_tp_agree(fn, c, sig));
  w8a8_tp_test_after_agree(c);
  p.overlap = c->agreed_fuse;
  c->last_fuse = p.overlap;
  const w8a8_status s = run(fn, c, &p);
  if (s != W8A8_SUCCESS) { /* after the agreement: the peers may have run their part */
    c->last_fuse = -1;
    if (!w8a8_tp_is_broken(c)) w8a8_tp_break(fn, c, s, true);
  }
  return s;
}

w8a8_status w8a8_tp_agree(const char *fn, w8a8_comm *c, int64_t sig[TP_SIG_COUNT]) {
  w8a8_status local = (w8a8_status)sig[TP_SIG_STATUS];
  char saved[512];
  snprintf(saved, sizeof saved, "%s", w8a8_last_error());
  int count = TP_SIG_COUNT;
  if (c->fault_inject == TP_FAULT_MPI) { /* tests: a count MPI must reject */
    c->fault_inject = TP_FAULT_NONE;
    count = -1;
  }
  /* The send buffer lives in the communicator: an exchange left pending (a peer never came) still reads it. */
  memcpy(c->sig_mine, sig, sizeof(int64_t) * TP_SIG_COUNT);
  int rc = MPI_Iallgather(c->sig_mine, count, MPI_INT64_T, c->sig_all, count, MPI_INT64_T, c->mpi, &c->coll_req);
  W8A8_CHECK(w8a8_tp_mpi_coll(fn, c, rc, &c->coll_req, "the agreement (MPI_Iallgather)"));
  return w8a8_tp_agree_table(fn, c, local, saved);
}

#endif /* W8A8_HAVE_MPI */

static const char *sig_name(int f) {
  switch (f) {
    case TP_SIG_OP: return "the operation";
    case TP_SIG_M_TOTAL: return "M (the layer's rows)";
    case TP_SIG_K: return "K";
    case TP_SIG_N: return "N";
    case TP_SIG_IN_DTYPE: return "the input dtype";
    case TP_SIG_OUT_DTYPE: return "the output dtype";
    case TP_SIG_BIAS: return "bias presence";
    case TP_SIG_ZP_KIND: return "the zero-point kind";
    case TP_SIG_OVERLAP: return "opts->overlap";
    case TP_SIG_PARTIALS: return "opts->partials";
    case TP_SIG_BLOCK: return "the scales' kind (1: the block-scaled call, 0: the plain one)";
    default: return "a field";
  }
}

/* Ranks out of step: every rank breaks the communicator (each sees the same table; no notice). */
static w8a8_status out_of_step(const char *fn, w8a8_comm *c) { return w8a8_tp_break(fn, c, W8A8_ERROR_COMM_MISMATCH, false); }

w8a8_status w8a8_tp_agree_table(const char *fn, w8a8_comm *c, w8a8_status local, const char *saved) {
  const int W = c->size;
  /* The call numbers first: ranks at different calls paired calls that are not the same, and
   * nothing else in the table can be trusted (a rank that skipped a call, or whose exchange failed,
   * would otherwise meet its peers' previous call, shapes alike, and return their rows). */
  for (int j = 1; j < W; j++) {
    const int64_t *sj = c->sig_all + (size_t)j * TP_SIG_COUNT;
    if (sj[TP_SIG_SEQ] != c->sig_all[TP_SIG_SEQ]) {
      w8a8_err(W8A8_ERROR_COMM_MISMATCH,
               "%s: the ranks are at different calls of this communicator: rank 0 at call %lld, rank %d at call %lld "
               "(a rank skipped or repeated a fused call, or one returned before its exchange); the communicator is "
               "now broken",
               fn, LL(c->sig_all[TP_SIG_SEQ]), j, LL(sj[TP_SIG_SEQ]));
      return out_of_step(fn, c);
    }
  }
  /* Calls with an invalid communicator: a rank that made one where its peers made this call is a call
   * behind them, though its count of calls here is the same. */
  for (int j = 1; j < W; j++) {
    const int64_t k0 = c->sig_all[TP_SIG_SKIPS], kj = c->sig_all[(size_t)j * TP_SIG_COUNT + TP_SIG_SKIPS];
    if (kj != k0) {
      w8a8_err(W8A8_ERROR_COMM_MISMATCH,
               "%s: just before this call, rank 0 made %lld fused call(s) with an invalid communicator (NULL, "
               "destroyed, or not a communicator) and rank %d made %lld: a call some ranks made here was not made "
               "here by the others, so the ranks are out of step; the communicator is now broken",
               fn, LL(k0), j, LL(kj));
      return out_of_step(fn, c);
    }
  }
  if (local != W8A8_SUCCESS) return w8a8_err(local, "%s", saved);
  for (int j = 0; j < W; j++) {
    const int64_t *sj = c->sig_all + (size_t)j * TP_SIG_COUNT;
    if (sj[TP_SIG_STATUS] != 0)
      return w8a8_err(W8A8_ERROR_COMM_MISMATCH, "%s: rank %d rejected its arguments (%s); see that rank's error", fn,
                      j, w8a8_status_name((w8a8_status)sj[TP_SIG_STATUS]));
  }
  const int64_t *s0 = c->sig_all;
  const int op = (int)s0[TP_SIG_OP];
  for (int j = 1; j < W; j++) {
    const int64_t *sj = c->sig_all + (size_t)j * TP_SIG_COUNT;
    static const int fields[] = {TP_SIG_OP,       TP_SIG_BLOCK, TP_SIG_M_TOTAL, TP_SIG_K,       TP_SIG_N,
                                 TP_SIG_IN_DTYPE, TP_SIG_OUT_DTYPE, TP_SIG_BIAS, TP_SIG_ZP_KIND, TP_SIG_OVERLAP,
                                 TP_SIG_PARTIALS};
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
      int k = fields[f];
      if (k == TP_SIG_K && op == TP_OP_RS) continue; /* K shards are local to each rank */
      if (k == TP_SIG_N && op == TP_OP_AG) continue; /* N shards are local to each rank */
      if (k == TP_SIG_PARTIALS && op != TP_OP_RS) continue; /* the all-gather ignores it */
      if (sj[k] != s0[k])
        return w8a8_err(W8A8_ERROR_COMM_MISMATCH, "%s: ranks disagree on %s: rank 0 has %lld, rank %d has %lld", fn,
                        sig_name(k), LL(s0[k]), j, LL(sj[k]));
    }
  }
  int64_t off = 0;
  for (int j = 0; j < W; j++) {
    c->m_offset[j] = off;
    c->m_count[j] = c->sig_all[(size_t)j * TP_SIG_COUNT + TP_SIG_M_LOCAL];
    off += c->m_count[j];
  }
  c->m_offset[W] = off;
  if (off != s0[TP_SIG_M_TOTAL])
    return w8a8_err(W8A8_ERROR_INVALID_SHAPE,
                    "%s: the ranks' shards have %lld rows in all but M is %lld (%s); uneven shards are allowed but "
                    "must add up to M",
                    fn, LL(off), LL(s0[TP_SIG_M_TOTAL]),
                    op == TP_OP_AG ? "out->rows; shards are each rank's a->rows" : "a->rows; shards are each rank's out->rows");
  /* The schedule: each rank's choice (W8A8_TP_OVERLAP_AUTO resolved with its own crossover, or the
   * requested one, the same on every rank by the check above); fused only where every rank chose it,
   * so that a rank whose crossover differs (another W8A8_TP_OVERLAP_MIN_M) still runs what its peers run. */
  int fuse = 1;
  for (int j = 0; j < W; j++) fuse &= c->sig_all[(size_t)j * TP_SIG_COUNT + TP_SIG_FUSE] == 1;
  c->agreed_fuse = fuse;
  return W8A8_SUCCESS;
}
