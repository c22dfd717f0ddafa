/* gemm_rs.c — w8a8_scaled_mm_reduce_scatter on the CPU over MPI.
 *
 * Workspace (fp32): P [M, N], this rank's partial for every row of the layer; then
 * W-1 slots of [M_r, N], the peers' partials of this rank's own rows; then one row
 * for the ordered sum.
 *
 * A partial is w8a8_scaled_mm's epilogue without bias, stored in fp32:
 * p[m,n] = sb[n] * (sa[m] * v[m,n]) (the CPU backend with an fp32 out and no bias
 * computes exactly that). Bias and rounding come once, after the sum, in
 * rs_reduce: s = p_0 + p_1 + ... + p_{W-1} (rank order, fp32), s + bias, RNE.
 * With W8A8_TP_PARTIALS_OUT each GEMM block's partials are rounded to out's dtype (RNE, the
 * numeric.c converters: the reference's rounding) and widened back to fp32 in place, right
 * after the block is computed, so the same sum then adds the rounded partials. The wire
 * format stays fp32 (the values are rounded, the bytes are not halved): on CPU ranks the
 * option is about the arithmetic, which must match the GPU ranks', not about bandwidth.
 *
 * Fused (overlap = 1): receives from every peer are posted first; then for
 * s = 1 .. W-1 the rows of peer (r + s) % W are computed and sent while the next
 * peer's rows are computed; the own rows come last (they are needed last), then
 * the wait and the sum. The GEMM runs in blocks with MPI_Testall between them (see
 * ag_gemm.c for why).
 * Unfused (overlap = 0): every partial row in rank order, MPI_Ialltoallv, the same
 * sum. MPI_Reduce_scatter is not used: its summation order is up to the MPI library
 * and would make the two paths differ in the last bits. Waits poll as in ag_gemm.c. */
#include <string.h>

#include "tp_internal.h"

#ifdef W8A8_HAVE_MPI

enum { TAG_PARTIAL = 201 };

typedef struct rs_bufs {
  float *part; /* [M_total, N] */
  float *recv; /* (W-1) x [M_r, N] */
  float *row;  /* [N] */
} rs_bufs;

static rs_bufs rs_layout(const w8a8_comm *c, const w8a8_tp_problem *p) {
  rs_bufs g;
  const size_t N = (size_t)p->N, Mr = (size_t)c->m_count[c->rank];
  g.part = (float *)c->ws;
  g.recv = g.part + (size_t)p->M_total * N;
  g.row = g.recv + (size_t)(c->size - 1) * Mr * N;
  return g;
}

/* Slot of peer j's partial in the receive area (the own rank has none). */
static int rs_slot(int j, int rank) { return j < rank ? j : j - 1; }

/* W8A8_TP_PARTIALS_OUT: x rounded to out's dtype (RNE) and back, for each of n partials. */
static void rs_round_partials(w8a8_dtype t, float *x, int64_t n) {
  if (t == W8A8_DTYPE_BF16)
    for (int64_t i = 0; i < n; i++) x[i] = w8a8_bf16_to_f32(w8a8_f32_to_bf16(x[i]));
  else if (t == W8A8_DTYPE_FP16)
    for (int64_t i = 0; i < n; i++) x[i] = w8a8_f16_to_f32(w8a8_f32_to_f16(x[i]));
}

/* Partial rows [r0, r0 + n) of this rank into P, block by block, polling `reqs`. */
static w8a8_status rs_rows(const char *fn, w8a8_comm *c, const w8a8_tp_problem *p, const rs_bufs *g, int64_t r0,
                           int64_t n, int nreq, MPI_Request *reqs) {
  const int64_t br = w8a8_tp_block_rows(c, p->N, p->K);
  for (int64_t m = r0; m < r0 + n; m += br) {
    w8a8_mm_problem q;
    memset(&q, 0, sizeof q);
    q.M = r0 + n - m < br ? r0 + n - m : br;
    q.N = p->N;
    q.K = p->K;
    q.in_dtype = p->in_dtype;
    q.out_dtype = W8A8_DTYPE_FP32;
    q.a = (const uint8_t *)p->a + m * p->lda;
    q.lda = p->lda;
    q.b = p->b;
    q.ldb = p->ldb;
    q.out = g->part + m * p->N;
    q.ldo = p->N > 0 ? p->N : 1;
    q.scale_a = p->scale_a + (p->block ? m * p->sa_rs : p->scale_a_per_token ? m : 0);
    q.scale_a_per_token = p->scale_a_per_token;
    q.scale_b = p->scale_b;
    q.scale_b_per_channel = p->scale_b_per_channel;
    if (p->block) { /* this rank's K shard's blocks: the partial of w8a8_scaled_mm_blockwise */
      q.block_scaled = true;
      q.sa_rs = p->sa_rs, q.sa_cs = p->sa_cs, q.sb_rs = p->sb_rs, q.sb_cs = p->sb_cs;
    }
    q.bias = NULL; /* added once, after the sum */
    q.azp_mode = p->azp_mode;
    q.azp = p->azp_mode == W8A8_AZP_PER_TOKEN ? p->azp + m : p->azp;
    q.azp_adj = p->azp_adj;
    if (q.N > 0) W8A8_CHECK(w8a8_cpu_scaled_mm(c->handle, &q));
    rs_round_partials(w8a8_tp_partial_dtype(p), g->part + m * p->N, q.M * p->N);
    if (nreq > 0) {
      int done = 0;
      int rc = MPI_Testall(nreq, reqs, &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return w8a8_tp_mpi_err(fn, "MPI_Testall", rc);
      W8A8_CHECK(w8a8_tp_poll_faults(fn, c, "the reduce-scatter's messages"));
    }
  }
  return W8A8_SUCCESS;
}

/* out[i, n] = round(((p_0 + p_1) + ... + p_{W-1}) + bias[n]) for this rank's rows. */
static void rs_reduce(const w8a8_comm *c, const w8a8_tp_problem *p, const rs_bufs *g) {
  const int W = c->size, r = c->rank;
  const int64_t N = p->N, Mr = c->m_count[r], m0 = c->m_offset[r];
  float *acc = g->row;
  for (int64_t i = 0; i < Mr; i++) {
    for (int j = 0; j < W; j++) {
      const float *src = j == r ? g->part + (m0 + i) * N : g->recv + ((size_t)rs_slot(j, r) * Mr + i) * N;
      if (j == 0)
        memcpy(acc, src, (size_t)N * sizeof(float));
      else
        for (int64_t n = 0; n < N; n++) acc[n] = acc[n] + src[n];
    }
    if (p->bias)
      for (int64_t n = 0; n < N; n++) acc[n] = acc[n] + w8a8_tp_load(p->out_dtype, p->bias, n);
    void *orow = (char *)p->out + (size_t)i * (size_t)p->ldo * w8a8_dtype_size(p->out_dtype);
    if (p->out_dtype == W8A8_DTYPE_FP32)
      memcpy(orow, acc, (size_t)N * sizeof(float));
    else
      for (int64_t n = 0; n < N; n++) w8a8_tp_store(p->out_dtype, orow, n, acc[n]);
  }
}

static w8a8_status rs_run(const char *fn, w8a8_comm *c, const w8a8_tp_problem *p) {
  if (p->M_total == 0 || p->N == 0) return W8A8_SUCCESS;
  const int W = c->size, r = c->rank;
  const int64_t N = p->N;
  const int64_t *cnt = c->m_count, *off = c->m_offset;
  rs_bufs g = rs_layout(c, p);
  const int recv_count = (int)(cnt[r] * N);

  if (W == 1) {
    W8A8_CHECK(rs_rows(fn, c, p, &g, 0, cnt[0], 0, NULL));
  } else if (!p->overlap) {
    for (int j = 0; j < W; j++) W8A8_CHECK(rs_rows(fn, c, p, &g, off[j], cnt[j], 0, NULL));
    for (int j = 0; j < W; j++) {
      c->counts[j] = j == r ? 0 : (int)(cnt[j] * N);
      c->displs[j] = (int)(off[j] * N);
      c->counts2[j] = j == r ? 0 : recv_count;
      c->displs2[j] = j == r ? 0 : rs_slot(j, r) * recv_count;
    }
    MPI_Request *req = c->reqs;
    *req = MPI_REQUEST_NULL;
    int rc = MPI_Ialltoallv(g.part, c->counts, c->displs, MPI_FLOAT, g.recv, c->counts2, c->displs2, MPI_FLOAT, c->mpi,
                            req);
    W8A8_CHECK(w8a8_tp_mpi_coll(fn, c, rc, req, "the partials' exchange (MPI_Ialltoallv)"));
  } else {
    MPI_Request *recv = c->reqs, *send = c->reqs + W;
    for (int i = 0; i < 2 * W; i++) c->reqs[i] = MPI_REQUEST_NULL;
    int rc = MPI_SUCCESS;
    for (int j = 0; j < W && rc == MPI_SUCCESS; j++)
      if (j != r)
        rc = MPI_Irecv(g.recv + (size_t)rs_slot(j, r) * (size_t)recv_count, recv_count, MPI_FLOAT, j, TAG_PARTIAL,
                       c->mpi, &recv[j]);
    if (rc != MPI_SUCCESS) {
      c->mpi_pending = true;
      return w8a8_tp_mpi_err(fn, "MPI_Irecv", rc);
    }
    w8a8_status st = W8A8_SUCCESS;
    for (int s = 1; s < W && st == W8A8_SUCCESS; s++) {
      const int j = (r + s) % W;
      st = rs_rows(fn, c, p, &g, off[j], cnt[j], 2 * W, c->reqs);
      if (st != W8A8_SUCCESS) break;
      rc = MPI_Isend(g.part + off[j] * N, (int)(cnt[j] * N), MPI_FLOAT, j, TAG_PARTIAL, c->mpi, &send[j]);
      if (rc != MPI_SUCCESS) st = w8a8_tp_mpi_err(fn, "MPI_Isend", rc);
    }
    if (st == W8A8_SUCCESS) st = rs_rows(fn, c, p, &g, off[r], cnt[r], 2 * W, c->reqs);
    if (st == W8A8_SUCCESS) st = w8a8_tp_mpi_wait(fn, c, W, recv, "the peers' partials (receives)");
    /* The sum needs only the receives; the sends finish while it runs. */
    if (st == W8A8_SUCCESS) rs_reduce(c, p, &g);
    if (st == W8A8_SUCCESS) st = w8a8_tp_mpi_wait(fn, c, W, send, "the sends of this rank's partials");
    if (st != W8A8_SUCCESS) c->mpi_pending = true; /* messages may be in flight: the workspace stays */
    return st;
  }
  rs_reduce(c, p, &g);
  return W8A8_SUCCESS;
}

#endif /* W8A8_HAVE_MPI */

static w8a8_status rs_call(const char *fn, w8a8_comm *comm, const w8a8_tp_args *x) {
#ifdef W8A8_HAVE_MPI
  return w8a8_tp_cpu_call(fn, comm, TP_OP_RS, x, rs_run);
#else
  (void)comm, (void)x;
  return w8a8_err(W8A8_ERROR_NOT_BUILT, "%s: libw8a8 was built without MPI", fn);
#endif
}

w8a8_status w8a8_scaled_mm_reduce_scatter(w8a8_comm *comm, const w8a8_matrix *a, const w8a8_matrix *b,
                                          const w8a8_vector *scale_a, const w8a8_vector *scale_b,
                                          const w8a8_vector *bias, const w8a8_zero_point *zp, const w8a8_matrix *out,
                                          const w8a8_tp_options *opts) {
  static const char fn[] = "w8a8_scaled_mm_reduce_scatter";
  W8A8_CHECK(w8a8_tp_entry(fn, comm));
  const w8a8_tp_args x = {a, b, scale_a, scale_b, NULL, NULL, 0, bias, zp, out, NULL, opts};
  /* GPU communicators: src/tp/tp_gpu.c */
  if (w8a8_tp_is_gpu(comm)) return w8a8_tp_gpu_scaled_mm_reduce_scatter(fn, comm, &x);
  return rs_call(fn, comm, &x);
}

w8a8_status w8a8_scaled_mm_reduce_scatter_blockwise(w8a8_comm *comm, const w8a8_matrix *a, const w8a8_matrix *b,
                                                    const w8a8_matrix *scale_a, const w8a8_matrix *scale_b,
                                                    const w8a8_vector *bias, const w8a8_matrix *out,
                                                    const w8a8_tp_options *opts) {
  static const char fn[] = "w8a8_scaled_mm_reduce_scatter_blockwise";
  W8A8_CHECK(w8a8_tp_entry(fn, comm));
  const w8a8_tp_args x = {a, b, NULL, NULL, scale_a, scale_b, 1, bias, NULL, out, NULL, opts};
  if (w8a8_tp_is_gpu(comm)) return w8a8_tp_gpu_scaled_mm_reduce_scatter(fn, comm, &x);
  return rs_call(fn, comm, &x);
}
