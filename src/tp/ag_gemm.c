/* ag_gemm.c — w8a8_all_gather_scaled_mm on the CPU over MPI.
 *
 * Every rank's rows land in one contiguous gathered buffer in the workspace
 * ([M, K] bytes, then M fp32 scales, then M int32 zero points): the own rows are
 * packed there first (this also turns a strided a into a dense one, and expands a
 * per-tensor scale/zero point into one per row, which is what lets rows from ranks
 * with different per-tensor scales share one GEMM description).
 *
 * Fused (overlap = 1): receives from every peer and sends of the own rows to every
 * peer are posted at once; the GEMM of the own rows runs while they travel; then the
 * peers' rows are multiplied in the order r-1, r-2, ... (the ring order in which they
 * tend to arrive first), each after its receives complete. The GEMMs run in blocks
 * of w8a8_tp_block_rows rows and MPI_Testall between blocks drives progress (Open
 * MPI moves rendezvous messages only inside MPI calls: without the polls a large
 * chunk would sit until the next wait).
 * Unfused (overlap = 0): MPI_Iallgatherv of rows, scales and zero points, then the
 * same GEMM blocks in rank order. Each output row depends only on its own input row
 * and the same block GEMM runs on it in both paths, so the results are identical.
 * Every wait polls (w8a8_tp_mpi_wait: deadline, abort, the peers' break notices); a failure
 * after the agreement breaks the communicator. */
#include <string.h>

#include "tp_internal.h"

#ifdef W8A8_HAVE_MPI

enum { TAG_A = 101, TAG_SCALE = 102, TAG_AZP = 103 };

typedef struct ag_bufs {
  uint8_t *a;   /* [M_total, K] */
  float *scale; /* [M_total, S]: S = 1, or the block-scaled call's ceil(K/128) group scales of each row */
  int32_t *azp; /* [M_total] */
  int64_t S;
} ag_bufs;

static ag_bufs ag_layout(const w8a8_comm *c, const w8a8_tp_problem *p) {
  ag_bufs g;
  size_t a_bytes = ((size_t)p->M_total * (size_t)p->K + 63) & ~(size_t)63;
  g.S = p->block ? (p->K + W8A8_BLOCK - 1) / W8A8_BLOCK : 1;
  g.a = (uint8_t *)c->ws;
  g.scale = (float *)(g.a + a_bytes);
  g.azp = (int32_t *)(g.scale + p->M_total * g.S);
  return g;
}

/* GEMM of gathered rows [r0, r0 + n) into the same rows of out, block by block.
 * nreq > 0: poll those requests between blocks. */
static w8a8_status ag_rows(const char *fn, w8a8_comm *c, const w8a8_tp_problem *p, const ag_bufs *g, int64_t r0,
                           int64_t n, int nreq, MPI_Request *reqs) {
  const int64_t br = w8a8_tp_block_rows(c, p->N, p->K);
  const size_t oes = w8a8_dtype_size(p->out_dtype);
  for (int64_t m = r0; m < r0 + n; m += br) {
    w8a8_mm_problem q;
    memset(&q, 0, sizeof q);
    q.M = r0 + n - m < br ? r0 + n - m : br;
    q.N = p->N;
    q.K = p->K;
    q.in_dtype = p->in_dtype;
    q.out_dtype = p->out_dtype;
    q.a = g->a + m * p->K;
    q.lda = p->K > 0 ? p->K : 1;
    q.b = p->b;
    q.ldb = p->ldb;
    q.out = (char *)p->out + (size_t)m * (size_t)p->ldo * oes;
    q.ldo = p->ldo;
    q.scale_a = g->scale + m * g->S; /* always per row: see the file comment */
    q.scale_a_per_token = true;
    q.scale_b = p->scale_b;
    q.scale_b_per_channel = p->scale_b_per_channel;
    if (p->block) { /* the rows' group scales, packed; the weights' block scales as given */
      q.block_scaled = true;
      q.sa_rs = g->S, q.sa_cs = 1, q.sb_rs = p->sb_rs, q.sb_cs = p->sb_cs;
    }
    q.bias = p->bias;
    q.azp_adj = p->azp_adj;
    if (p->zp_kind == 2) {
      q.azp_mode = W8A8_AZP_PER_TOKEN;
      q.azp = g->azp + m;
    } else {
      q.azp_mode = p->zp_kind == 1 ? W8A8_AZP_ADJ_ONLY : W8A8_AZP_NONE;
    }
    if (q.N > 0) W8A8_CHECK(w8a8_cpu_scaled_mm(c->handle, &q));
    if (nreq > 0) {
      int done = 0;
      int rc = MPI_Testall(nreq, reqs, &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return w8a8_tp_mpi_err(fn, "MPI_Testall", rc);
      W8A8_CHECK(w8a8_tp_poll_faults(fn, c, "the all-gather's messages"));
    }
  }
  return W8A8_SUCCESS;
}

static w8a8_status ag_run(const char *fn, w8a8_comm *c, const w8a8_tp_problem *p) {
  if (p->M_total == 0) return W8A8_SUCCESS;
  const int W = c->size, r = c->rank;
  const int64_t K = p->K;
  const int64_t *cnt = c->m_count, *off = c->m_offset;
  ag_bufs g = ag_layout(c, p);
  const bool zp = p->zp_kind == 2;

  /* Own rows into the gathered buffer (dense rows, one scale and zero point per row, or a row of block scales). */
  const int64_t S = g.S;
  for (int64_t i = 0; i < cnt[r]; i++) {
    const int64_t m = off[r] + i;
    if (K > 0) memcpy(g.a + m * K, (const uint8_t *)p->a + i * p->lda, (size_t)K);
    if (p->block)
      for (int64_t kb = 0; kb < S; kb++) g.scale[m * S + kb] = p->scale_a[i * p->sa_rs + kb * p->sa_cs];
    else
      g.scale[m] = p->scale_a[p->scale_a_per_token ? i : 0];
    if (zp) g.azp[m] = p->azp[p->azp_mode == W8A8_AZP_PER_TOKEN ? i : 0];
  }

  int rc = MPI_SUCCESS;
  const char *what = "";
  if (W == 1) {
    W8A8_CHECK(ag_rows(fn, c, p, &g, 0, cnt[0], 0, NULL));
  } else if (!p->overlap) {
    MPI_Request *req = c->reqs;
    for (int i = 0; i < 3; i++) req[i] = MPI_REQUEST_NULL;
    /* The collective, then the GEMM: what a framework does without fusion. */
    for (int j = 0; j < W; j++) {
      c->counts[j] = (int)(cnt[j] * K);
      c->displs[j] = (int)(off[j] * K);
      c->counts2[j] = (int)(cnt[j] * S); /* (scales; zero points exist only with S = 1) */
      c->displs2[j] = (int)(off[j] * S);
    }
    what = "MPI_Iallgatherv (rows)";
    rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g.a, c->counts, c->displs, MPI_BYTE, c->mpi, &req[0]);
    if (rc == MPI_SUCCESS) {
      what = "MPI_Iallgatherv (scales)";
      rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g.scale, c->counts2, c->displs2, MPI_FLOAT, c->mpi,
                           &req[1]);
    }
    if (rc == MPI_SUCCESS && zp) {
      what = "MPI_Iallgatherv (zero points)";
      rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, g.azp, c->counts2, c->displs2, MPI_INT32_T, c->mpi,
                           &req[2]);
    }
    if (rc != MPI_SUCCESS) {
      c->mpi_pending = true; /* (the collectives started before it) */
      w8a8_tp_mpi_err(fn, what, rc);
      return w8a8_tp_break(fn, c, W8A8_ERROR_COMM, true);
    }
    W8A8_CHECK(w8a8_tp_mpi_wait(fn, c, 3, req, "the all-gather (MPI_Iallgatherv)"));
    for (int j = 0; j < W; j++) {
      w8a8_status s = ag_rows(fn, c, p, &g, off[j], cnt[j], 0, NULL);
      if (s != W8A8_SUCCESS) return s;
    }
  } else {
    /* reqs[3j + t]: receives from peer j; reqs[3W + 3j + t]: sends to peer j. */
    MPI_Request *recv = c->reqs, *send = c->reqs + 3 * W;
    for (int i = 0; i < 6 * W; i++) c->reqs[i] = MPI_REQUEST_NULL;
    const int64_t m0 = off[r];
    for (int j = 0; j < W && rc == MPI_SUCCESS; j++) {
      if (j == r) continue;
      what = "MPI_Irecv";
      rc = MPI_Irecv(g.a + off[j] * K, (int)(cnt[j] * K), MPI_BYTE, j, TAG_A, c->mpi, &recv[3 * j]);
      if (rc == MPI_SUCCESS)
        rc = MPI_Irecv(g.scale + off[j] * S, (int)(cnt[j] * S), MPI_FLOAT, j, TAG_SCALE, c->mpi, &recv[3 * j + 1]);
      if (rc == MPI_SUCCESS && zp)
        rc = MPI_Irecv(g.azp + off[j], (int)cnt[j], MPI_INT32_T, j, TAG_AZP, c->mpi, &recv[3 * j + 2]);
    }
    for (int s = 1; s < W && rc == MPI_SUCCESS; s++) {
      const int j = (r + s) % W;
      what = "MPI_Isend";
      rc = MPI_Isend(g.a + m0 * K, (int)(cnt[r] * K), MPI_BYTE, j, TAG_A, c->mpi, &send[3 * j]);
      if (rc == MPI_SUCCESS)
        rc = MPI_Isend(g.scale + m0 * S, (int)(cnt[r] * S), MPI_FLOAT, j, TAG_SCALE, c->mpi, &send[3 * j + 1]);
      if (rc == MPI_SUCCESS && zp)
        rc = MPI_Isend(g.azp + m0, (int)cnt[r], MPI_INT32_T, j, TAG_AZP, c->mpi, &send[3 * j + 2]);
    }
    if (rc != MPI_SUCCESS) {
      c->mpi_pending = true;
      w8a8_tp_mpi_err(fn, what, rc);
      return w8a8_tp_break(fn, c, W8A8_ERROR_COMM, true);
    }
    w8a8_status st = ag_rows(fn, c, p, &g, m0, cnt[r], 6 * W, c->reqs);
    for (int s = 1; s < W && st == W8A8_SUCCESS; s++) {
      const int j = (r - s + W) % W;
      st = w8a8_tp_mpi_wait(fn, c, 3, &recv[3 * j], "a peer's rows (receives)");
      if (st == W8A8_SUCCESS) st = ag_rows(fn, c, p, &g, off[j], cnt[j], 6 * W, c->reqs);
    }
    if (st == W8A8_SUCCESS) st = w8a8_tp_mpi_wait(fn, c, 3 * W, send, "the sends of this rank's rows");
    if (st != W8A8_SUCCESS) {
      /* messages may be in flight into or out of the workspace: it stays (comm_free) */
      c->mpi_pending = true;
      if (!w8a8_tp_is_broken(c)) w8a8_tp_break(fn, c, st, true);
      return st;
    }
  }

  /* Optional gathered outputs for the caller. */
  if (p->g_a && K > 0)
    for (int64_t m = 0; m < p->M_total; m++) memcpy((uint8_t *)p->g_a + m * p->g_lda, g.a + m * K, (size_t)K);
  if (p->g_scale && p->M_total > 0) memcpy(p->g_scale, g.scale, (size_t)p->M_total * sizeof(float));
  if (p->g_azp && p->M_total > 0) memcpy(p->g_azp, g.azp, (size_t)p->M_total * sizeof(int32_t));
  return W8A8_SUCCESS;
}

#endif /* W8A8_HAVE_MPI */

static w8a8_status ag_call(const char *fn, w8a8_comm *comm, const w8a8_tp_args *x) {
#ifdef W8A8_HAVE_MPI
  return w8a8_tp_cpu_call(fn, comm, TP_OP_AG, x, ag_run);
#else
  (void)comm, (void)x;
  return w8a8_err(W8A8_ERROR_NOT_BUILT, "%s: libw8a8 was built without MPI", fn);
#endif
}

w8a8_status w8a8_all_gather_scaled_mm(w8a8_comm *comm, const w8a8_matrix *a, const w8a8_matrix *b,
                                      const w8a8_vector *scale_a, const w8a8_vector *scale_b, const w8a8_vector *bias,
                                      const w8a8_zero_point *zp, const w8a8_matrix *out, const w8a8_gathered *gathered,
                                      const w8a8_tp_options *opts) {
  static const char fn[] = "w8a8_all_gather_scaled_mm";
  W8A8_CHECK(w8a8_tp_entry(fn, comm));
  const w8a8_tp_args x = {a, b, scale_a, scale_b, NULL, NULL, 0, bias, zp, out, gathered, opts};
  /* GPU communicators: src/tp/tp_gpu.c */
  if (w8a8_tp_is_gpu(comm)) return w8a8_tp_gpu_all_gather_scaled_mm(fn, comm, &x);
  return ag_call(fn, comm, &x);
}

w8a8_status w8a8_all_gather_scaled_mm_blockwise(w8a8_comm *comm, const w8a8_matrix *a, const w8a8_matrix *b,
                                                const w8a8_matrix *scale_a, const w8a8_matrix *scale_b,
                                                const w8a8_vector *bias, const w8a8_matrix *out,
                                                const w8a8_tp_options *opts) {
  static const char fn[] = "w8a8_all_gather_scaled_mm_blockwise";
  W8A8_CHECK(w8a8_tp_entry(fn, comm));
  const w8a8_tp_args x = {a, b, NULL, NULL, scale_a, scale_b, 1, bias, NULL, out, NULL, opts};
  if (w8a8_tp_is_gpu(comm)) return w8a8_tp_gpu_all_gather_scaled_mm(fn, comm, &x);
  return ag_call(fn, comm, &x);
}
