/* test_tp_fault.c — communicators that fail safely: out-of-step ranks, a failure on one rank
 * inside the agreement, a missing rank and the timeout, abort from another thread, the
 * asynchronous error, a bad MPI communicator at creation, and W8A8_TP_OVERLAP_AUTO. Each test
 * makes its own communicator (a broken one is destroyed) and bounds every wait by a timeout of
 * its own, so that a hang is a failure of tests/run_all.sh's `timeout`, not of CI.
 * A killed rank (a process that exits mid-sequence) cannot run inside this suite (its collectives
 * over MPI_COMM_WORLD would hang): tp_kill_main runs it alone, under tests/mpi/run_kill.sh. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tp_test.h"
#include "core/knobs.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* A small all-gather (4 rows per rank) or reduce-scatter (M = 4 W, 4 out rows per rank); data from seeds
 * so that every rank knows every rank's rows. */
typedef struct prob {
  int8_t a[16 * 16], b[16 * 8];
  float sa[1], sb[8];
  float out[16 * 8];
  w8a8_matrix A, B, O;
  w8a8_vector SA, SB;
} prob;

static void prob_init(prob *p, int ag, int tag) {
  const int64_t Mr = 4, M = 4 * (int64_t)g_size;
  for (int i = 0; i < 16 * 16; i++) p->a[i] = (int8_t)((i * 7 + g_rank * 13 + tag * 31) % 97 - 48);
  for (int i = 0; i < 16 * 8; i++) p->b[i] = (int8_t)((i * 3 + 5) % 11 - 5);
  p->sa[0] = 1.0f;
  for (int i = 0; i < 8; i++) p->sb[i] = 1.0f;
  for (int i = 0; i < 16 * 8; i++) p->out[i] = -12345.0f;
  p->A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, ag ? Mr : M, 16, 16, p->a);
  p->B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, 16, 8, 16, p->b);
  p->O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, ag ? M : Mr, 8, 8, p->out);
  p->SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, p->sa);
  p->SB = w8a8_vector_make(W8A8_DTYPE_FP32, 8, p->sb);
}

static bool prob_untouched(const prob *p) {
  for (int i = 0; i < 16 * 8; i++)
    if (p->out[i] != -12345.0f) return false;
  return true;
}

static w8a8_status run_ag(w8a8_comm *c, prob *p, int overlap) {
  w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
  o.overlap = overlap;
  return w8a8_all_gather_scaled_mm(c, &p->A, &p->B, &p->SA, &p->SB, NULL, NULL, &p->O, NULL, &o);
}
static w8a8_status run_rs(w8a8_comm *c, prob *p, int overlap) {
  w8a8_tp_options o = W8A8_TP_OPTIONS_INIT;
  o.overlap = overlap;
  return w8a8_scaled_mm_reduce_scatter(c, &p->A, &p->B, &p->SA, &p->SB, NULL, NULL, &p->O, &o);
}

/* The all-gather's rows of rank j (tag as prob_init), computed here: what a correct call writes there. */
static bool ag_rows_are(const prob *p, int j, int tag) {
  for (int i = 0; i < 4; i++)
    for (int n = 0; n < 8; n++) {
      int32_t acc = 0;
      for (int k = 0; k < 16; k++) {
        const int idx = i * 16 + k;
        acc += (int8_t)((idx * 7 + j * 13 + tag * 31) % 97 - 48) * (int32_t)p->b[n * 16 + k];
      }
      if (p->out[(j * 4 + i) * 8 + n] != (float)acc) return false;
    }
  return true;
}

static w8a8_comm *new_comm(double timeout_s) {
  w8a8_comm *c = NULL;
  MPI_Comm world = MPI_COMM_WORLD;
  if (w8a8_comm_create_mpi(&c, g_h, &world) != W8A8_SUCCESS) return NULL;
  if (w8a8_comm_reserve(c, 64, 64, 64) != W8A8_SUCCESS || w8a8_comm_set_timeout(c, timeout_s) != W8A8_SUCCESS) {
    w8a8_comm_destroy(c);
    return NULL;
  }
  return c;
}

/* The API of the failure state on a healthy communicator. */
TP_TEST(tp_fault_api) {
  w8a8_comm *c = new_comm(30);
  REQUIRE(c, "communicator: %s", w8a8_last_error());
  double t = -1;
  REQUIRE_OK(w8a8_comm_get_timeout(c, &t));
  CHECK(t == 30.0, "timeout %g", t);
  CHECK(w8a8_comm_set_timeout(c, -1) == W8A8_ERROR_INVALID_VALUE, "negative timeout");
  CHECK(w8a8_comm_set_timeout(c, 0.0 / 0.0) == W8A8_ERROR_INVALID_VALUE, "NaN timeout");
  CHECK(w8a8_comm_set_timeout(c, 2e9) == W8A8_ERROR_INVALID_VALUE, "huge timeout");
  CHECK(w8a8_comm_get_timeout(c, NULL) == W8A8_ERROR_NULL_POINTER, "NULL seconds");
  REQUIRE_OK(w8a8_comm_set_timeout(c, 0.25));
  REQUIRE_OK(w8a8_comm_get_timeout(c, &t));
  CHECK(t == 0.25, "timeout %g", t);
  CHECK(w8a8_comm_get_async_error(c) == W8A8_SUCCESS && !w8a8_last_error()[0], "healthy: %s", w8a8_last_error());
  CHECK(w8a8_comm_get_async_error(NULL) == W8A8_ERROR_INVALID_COMM, "NULL comm");
  CHECK(w8a8_comm_abort(NULL) == W8A8_ERROR_INVALID_COMM, "abort NULL");
  CHECK(w8a8_comm_set_timeout(NULL, 1) == W8A8_ERROR_INVALID_COMM, "set_timeout NULL");
  prob p;
  prob_init(&p, 1, 0);
  REQUIRE_OK(run_ag(c, &p, W8A8_TP_OVERLAP_ON));
  for (int j = 0; j < g_size; j++) CHECK(ag_rows_are(&p, j, 0), "rank %d's rows", j);
  REQUIRE_OK(w8a8_comm_destroy(c));
  /* W8A8_TP_TIMEOUT_S at creation: seconds (fractions too), 0 = none; garbage = the default */
  static const struct {
    const char *v;
    double want;
  } env[] = {{"2.5", 2.5}, {"0", 0.0}, {"abc", 300.0}, {"-3", 300.0}};
  for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
    w8a8_dev_set("TP_TIMEOUT_S", env[i].v);
    MPI_Comm world = MPI_COMM_WORLD;
    w8a8_comm *d = NULL;
    w8a8_status st = w8a8_comm_create_mpi(&d, g_h, &world);
    w8a8_dev_set("TP_TIMEOUT_S", NULL);
    REQUIRE(st == W8A8_SUCCESS, "create: %s", w8a8_last_error());
    REQUIRE_OK(w8a8_comm_get_timeout(d, &t));
    CHECK(t == env[i].want, "W8A8_TP_TIMEOUT_S=%s: timeout %g, want %g", env[i].v, t, env[i].want);
    REQUIRE_OK(w8a8_comm_destroy(d));
  }
}

/* The case: one rank passes NULL for a call its peers make with the communicator, and keeps
 * calling. Before, the peers' call paired with that rank's next call and returned its rows (shifted by
 * one call) with W8A8_SUCCESS. Now every rank fails that pairing with COMM_MISMATCH (the counts of
 * calls with an invalid communicator differ), nothing is written, and the communicator is broken. */
TP_TEST(tp_fault_skipped_call_null_comm) {
  if (g_size < 2) SKIP("needs 2 or more ranks");
  const int late = g_size - 1;
  w8a8_comm *c = new_comm(20);
  REQUIRE(c, "communicator: %s", w8a8_last_error());
  prob p;
  prob_init(&p, 1, 1);
  w8a8_status st;
  if (g_rank == late) {
    st = run_ag(NULL, &p, W8A8_TP_OVERLAP_ON); /* the skipped call */
    CHECK(st == W8A8_ERROR_INVALID_COMM, "NULL comm: %s", w8a8_status_name(st));
    prob_init(&p, 1, 2);
  }
  st = run_ag(c, &p, W8A8_TP_OVERLAP_ON); /* the peers' call 1, this rank's call 2 */
  CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "invalid communicator") &&
            strstr(w8a8_last_error(), "broken"),
        "the pairing of different calls: %s %s", w8a8_status_name(st), w8a8_last_error());
  CHECK(prob_untouched(&p), "rows written by a mismatched call");
  st = run_ag(c, &p, W8A8_TP_OVERLAP_ON);
  CHECK(st == W8A8_ERROR_BROKEN && strstr(w8a8_last_error(), "W8A8_ERROR_COMM_MISMATCH"), "after it: %s %s",
        w8a8_status_name(st), w8a8_last_error());
  CHECK(w8a8_comm_get_async_error(c) == W8A8_ERROR_COMM_MISMATCH, "async error: %s", w8a8_last_error());
  REQUIRE_OK(w8a8_comm_destroy(c));
  /* every rank making the same invalid call stays in step: the count is the same everywhere */
  c = new_comm(20);
  REQUIRE(c, "communicator: %s", w8a8_last_error());
  CHECK(run_ag(NULL, &p, W8A8_TP_OVERLAP_ON) == W8A8_ERROR_INVALID_COMM, "NULL comm on every rank");
  prob_init(&p, 1, 3);
  REQUIRE_OK(run_ag(c, &p, W8A8_TP_OVERLAP_ON));
  for (int j = 0; j < g_size; j++) CHECK(ag_rows_are(&p, j, 3), "rank %d's rows after a skip on every rank", j);
  REQUIRE_OK(w8a8_comm_destroy(c));
}

/* A rank whose call returned before its exchange (the hook stands for any early return) and that keeps
 * calling: its next call carries the next call number, so every rank fails with COMM_MISMATCH naming
 * both numbers, instead of the peers receiving rows of a later call. Fused and unfused, both ops. */
TP_TEST(tp_fault_skipped_call_numbers) {
  if (g_size < 2) SKIP("needs 2 or more ranks");
  const int late = g_size - 1;
  for (int v = 0; v < 4; v++) {
    const int ag = v < 2, overlap = v % 2 ? W8A8_TP_OVERLAP_ON : W8A8_TP_OVERLAP_OFF;
    w8a8_comm *c = new_comm(20);
    REQUIRE(c, "communicator: %s", w8a8_last_error());
    prob p;
    prob_init(&p, ag, 4);
    REQUIRE_OK(ag ? run_ag(c, &p, overlap) : run_rs(c, &p, overlap)); /* call 0 on every rank */
    w8a8_status st;
    if (g_rank == late) {
      w8a8_tp_test_inject_fault(c, TP_FAULT_SKIP);
      st = ag ? run_ag(c, &p, overlap) : run_rs(c, &p, overlap); /* call 1 returns early here */
      CHECK(st == W8A8_ERROR_INTERNAL && strstr(w8a8_last_error(), "test hook"), "hook: %s", w8a8_last_error());
    }
    prob_init(&p, ag, 5);
    st = ag ? run_ag(c, &p, overlap) : run_rs(c, &p, overlap);
    char want[64];
    snprintf(want, sizeof want, "rank %d at call 2", late);
    CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "at call 1") && strstr(w8a8_last_error(), want),
          "v%d: %s %s", v, w8a8_status_name(st), w8a8_last_error());
    CHECK(prob_untouched(&p), "v%d: out written", v);
    st = ag ? run_ag(c, &p, overlap) : run_rs(c, &p, overlap);
    CHECK(st == W8A8_ERROR_BROKEN, "v%d: after it: %s", v, w8a8_status_name(st));
    REQUIRE_OK(w8a8_comm_destroy(c));
  }
}

/* A failure inside the agreement on ONE rank (MPI itself rejects its call): that rank gets
 * W8A8_ERROR_COMM, and its peers, whose exchange can never complete, fail with W8A8_ERROR_BROKEN
 * naming it as soon as its notice arrives, far sooner than the timeout. Before, they waited for ever. */
TP_TEST(tp_fault_agreement_failure_on_one_rank) {
  if (g_size < 2) SKIP("needs 2 or more ranks");
  const int bad = g_size - 1;
  w8a8_comm *c = new_comm(60);
  REQUIRE(c, "communicator: %s", w8a8_last_error());
  prob p;
  prob_init(&p, 1, 6);
  if (g_rank == bad) w8a8_tp_test_inject_mpi_fault(c);
  const double t0 = now_s();
  w8a8_status st = run_ag(c, &p, W8A8_TP_OVERLAP_AUTO);
  const double dt = now_s() - t0;
  if (g_rank == bad) {
    CHECK(st == W8A8_ERROR_COMM && strstr(w8a8_last_error(), "MPI_Iallgather"), "failing rank: %s %s",
          w8a8_status_name(st), w8a8_last_error());
  } else {
    char want[32];
    snprintf(want, sizeof want, "rank %d broke", bad);
    CHECK(st == W8A8_ERROR_BROKEN && strstr(w8a8_last_error(), want) && strstr(w8a8_last_error(), "W8A8_ERROR_COMM"),
          "peer: %s %s", w8a8_status_name(st), w8a8_last_error());
  }
  CHECK(dt < 10.0, "the call took %.2f s (timeout 60 s): the peers waited for the timeout, not the notice", dt);
  CHECK(prob_untouched(&p), "out written");
  st = run_ag(c, &p, W8A8_TP_OVERLAP_AUTO);
  CHECK(st == W8A8_ERROR_BROKEN, "next call: %s", w8a8_status_name(st));
  st = w8a8_comm_get_async_error(c);
  CHECK(st == (g_rank == bad ? W8A8_ERROR_COMM : W8A8_ERROR_BROKEN), "async error: %s %s", w8a8_status_name(st),
        w8a8_last_error());
  REQUIRE_OK(w8a8_comm_destroy(c));
}

/* A rank that does not make a call: with a timeout of 1 s its peers return W8A8_ERROR_TIMEOUT within
 * twice that (their own, or a peer's that came first); the late rank's own call then fails too (their
 * notice, or its own wait), and so does every later call. */
TP_TEST(tp_fault_missing_rank_times_out) {
  if (g_size < 2) SKIP("needs 2 or more ranks");
  const int late = g_size - 1;
  const double T = 1.0;
  for (int ag = 1; ag >= 0; ag--) {
    w8a8_comm *c = new_comm(T);
    REQUIRE(c, "communicator: %s", w8a8_last_error());
    prob p;
    prob_init(&p, ag, 7);
    w8a8_status st = W8A8_SUCCESS;
    double dt = 0;
    if (g_rank != late) {
      const double t0 = now_s();
      st = ag ? run_ag(c, &p, W8A8_TP_OVERLAP_ON) : run_rs(c, &p, W8A8_TP_OVERLAP_OFF);
      dt = now_s() - t0;
      /* (a rank whose peer timed out a moment earlier may learn of it from that peer: TIMEOUT naming it) */
      CHECK(st == W8A8_ERROR_TIMEOUT && (strstr(w8a8_last_error(), "timeout") || strstr(w8a8_last_error(), "W8A8_ERROR_TIMEOUT")),
            "%s: %s %s", ag ? "ag" : "rs", w8a8_status_name(st), w8a8_last_error());
      CHECK(dt >= 0.9 * T && dt < 2 * T, "%s: TIMEOUT after %.2f s; expected between the timeout and twice it",
            ag ? "ag" : "rs", dt);
    }
    MPI_Barrier(MPI_COMM_WORLD); /* the late rank comes after its peers gave up */
    st = ag ? run_ag(c, &p, W8A8_TP_OVERLAP_ON) : run_rs(c, &p, W8A8_TP_OVERLAP_OFF);
    if (g_rank == late)
      CHECK(st == W8A8_ERROR_TIMEOUT, "the late rank: %s %s", w8a8_status_name(st), w8a8_last_error());
    else
      CHECK(st == W8A8_ERROR_BROKEN && strstr(w8a8_last_error(), "W8A8_ERROR_TIMEOUT"), "after the timeout: %s %s",
            w8a8_status_name(st), w8a8_last_error());
    CHECK(prob_untouched(&p), "out written");
    MPI_Barrier(MPI_COMM_WORLD);
    REQUIRE_OK(w8a8_comm_destroy(c));
  }
}

/* Abort from another thread unblocks a waiting call: ranks 0 .. W-2 wait for rank W-1 (which makes no
 * call); a thread of rank 0 aborts rank 0's communicator after 0.3 s. Rank 0's call returns
 * W8A8_ERROR_ABORTED within a second (the timeout is 60 s), the other waiting ranks W8A8_ERROR_BROKEN
 * (rank 0's notice), and every later call of rank 0 ABORTED at once. */
typedef struct abort_arg {
  w8a8_comm *c;
  double delay;
  w8a8_status st;
} abort_arg;
static void *abort_later(void *v) {
  abort_arg *a = v;
  struct timespec ts = {(time_t)a->delay, (long)((a->delay - (double)(time_t)a->delay) * 1e9)};
  nanosleep(&ts, NULL);
  a->st = w8a8_comm_abort(a->c);
  return NULL;
}
TP_TEST(tp_fault_abort_from_thread) {
  if (g_size < 2) SKIP("needs 2 or more ranks");
  const int idle = g_size - 1;
  w8a8_comm *c = new_comm(60);
  REQUIRE(c, "communicator: %s", w8a8_last_error());
  prob p;
  prob_init(&p, 1, 8);
  pthread_t th;
  abort_arg a = {c, 0.3, W8A8_ERROR_INTERNAL};
  if (g_rank == 0) REQUIRE(pthread_create(&th, NULL, abort_later, &a) == 0, "pthread_create");
  if (g_rank != idle) {
    const double t0 = now_s();
    w8a8_status st = run_ag(c, &p, W8A8_TP_OVERLAP_ON);
    const double dt = now_s() - t0;
    if (g_rank == 0)
      CHECK(st == W8A8_ERROR_ABORTED && strstr(w8a8_last_error(), "w8a8_comm_abort"), "aborted rank: %s %s",
            w8a8_status_name(st), w8a8_last_error());
    else
      CHECK(st == W8A8_ERROR_BROKEN && strstr(w8a8_last_error(), "rank 0 broke") &&
                strstr(w8a8_last_error(), "W8A8_ERROR_ABORTED"),
            "peer of the aborted rank: %s %s", w8a8_status_name(st), w8a8_last_error());
    CHECK(dt < 5.0, "the waiting call took %.2f s after an abort at 0.3 s", dt);
  }
  if (g_rank == 0) {
    pthread_join(th, NULL);
    CHECK(a.st == W8A8_SUCCESS, "w8a8_comm_abort: %s", w8a8_status_name(a.st));
    CHECK(run_ag(c, &p, W8A8_TP_OVERLAP_ON) == W8A8_ERROR_ABORTED, "a later call of the aborted rank");
    CHECK(w8a8_comm_get_async_error(c) == W8A8_ERROR_ABORTED, "async error: %s", w8a8_last_error());
    CHECK(w8a8_comm_abort(c) == W8A8_SUCCESS, "a second abort");
  }
  CHECK(prob_untouched(&p), "out written");
  MPI_Barrier(MPI_COMM_WORLD);
  REQUIRE_OK(w8a8_comm_destroy(c));
}

/* An abort with no call running: the next call returns ABORTED at once on this rank; the peers' call,
 * already waiting or not, fails with BROKEN once the aborted rank's call has sent its notice. */
TP_TEST(tp_fault_abort_between_calls) {
  w8a8_comm *c = new_comm(60);
  REQUIRE(c, "communicator: %s", w8a8_last_error());
  prob p;
  prob_init(&p, 0, 9);
  REQUIRE_OK(run_rs(c, &p, W8A8_TP_OVERLAP_AUTO));
  prob_init(&p, 0, 9);
  MPI_Barrier(MPI_COMM_WORLD); /* every rank's first call is over (else the notice may fail a peer's first call) */
  if (g_rank == 0) REQUIRE_OK(w8a8_comm_abort(c));
  const double t0 = now_s();
  w8a8_status st = run_rs(c, &p, W8A8_TP_OVERLAP_AUTO);
  const double dt = now_s() - t0;
  CHECK(st == (g_rank == 0 ? W8A8_ERROR_ABORTED : W8A8_ERROR_BROKEN), "%s %s", w8a8_status_name(st),
        w8a8_last_error());
  CHECK(dt < 10.0, "%.2f s", dt);
  CHECK(prob_untouched(&p), "out written");
  REQUIRE_OK(w8a8_comm_destroy(c));
}

/* Creation with an unusable MPI communicator on one rank (MPI_COMM_NULL, or NULL): that rank fails at
 * once; it has no communicator to reach its peers through, so they fail at the creation's timeout
 * (W8A8_TP_TIMEOUT_S = 1) with W8A8_ERROR_TIMEOUT, instead of hanging in MPI_Comm_dup. Each over a
 * fresh duplicate of MPI_COMM_WORLD, which the peers' pending duplication then occupies (never used
 * again). */
TP_TEST(tp_fault_create_with_bad_comm) {
  if (g_size < 2) SKIP("needs 2 or more ranks");
  const int bad = g_size - 1;
  for (int v = 0; v < 2; v++) {
    MPI_Comm tmp = MPI_COMM_NULL, null = MPI_COMM_NULL;
    REQUIRE(MPI_Comm_dup(MPI_COMM_WORLD, &tmp) == MPI_SUCCESS, "MPI_Comm_dup");
    w8a8_dev_set("TP_TIMEOUT_S", "1");
    w8a8_comm *c = (w8a8_comm *)(uintptr_t)1;
    const double t0 = now_s();
    w8a8_status st = w8a8_comm_create_mpi(&c, g_h, g_rank == bad ? (v ? NULL : &null) : &tmp);
    const double dt = now_s() - t0;
    w8a8_dev_set("TP_TIMEOUT_S", NULL);
    if (g_rank == bad)
      CHECK(st == (v ? W8A8_ERROR_NULL_POINTER : W8A8_ERROR_INVALID_VALUE) && dt < 0.5, "bad rank: %s after %.2f s",
            w8a8_status_name(st), dt);
    else
      CHECK(st == W8A8_ERROR_TIMEOUT && strstr(w8a8_last_error(), "MPI_Comm_idup") && dt >= 0.9 && dt < 2.0,
            "peer: %s after %.2f s: %s", w8a8_status_name(st), dt, w8a8_last_error());
    CHECK(c == (w8a8_comm *)(uintptr_t)1, "comm written by a failed creation");
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

/* W8A8_TP_OVERLAP_AUTO: unfused below the crossover, fused from it (MPI: 256 rows by default), the
 * same bits either way, and one choice on every rank even where one rank's crossover differs (fused
 * only where every rank chose it). NULL options are AUTO. */
TP_TEST(tp_fault_overlap_auto) {
  w8a8_comm *c = NULL;
  MPI_Comm world = MPI_COMM_WORLD;
  REQUIRE_OK(w8a8_comm_create_mpi(&c, g_h, &world));
  REQUIRE_OK(w8a8_comm_reserve(c, 64, 64, 64));
  CHECK(w8a8_tp_crossover(c, TP_OP_AG) == 256 && w8a8_tp_crossover(c, TP_OP_RS) == 256, "MPI crossovers %lld %lld",
        (long long)w8a8_tp_crossover(c, TP_OP_AG), (long long)w8a8_tp_crossover(c, TP_OP_RS));
  CHECK(w8a8_tp_last_fuse(c) == -1, "no call yet");
  prob p, q;
  const int64_t M = 4 * (int64_t)g_size;
  for (int ag = 1; ag >= 0; ag--) {
    /* M = 4 W < 256: unfused */
    prob_init(&p, ag, 10);
    REQUIRE_OK(ag ? run_ag(c, &p, W8A8_TP_OVERLAP_AUTO) : run_rs(c, &p, W8A8_TP_OVERLAP_AUTO));
    CHECK(w8a8_tp_last_fuse(c) == 0, "%s below the crossover ran fused", ag ? "ag" : "rs");
    prob_init(&q, ag, 10);
    REQUIRE_OK(ag ? run_ag(c, &q, W8A8_TP_OVERLAP_ON) : run_rs(c, &q, W8A8_TP_OVERLAP_ON));
    CHECK(w8a8_tp_last_fuse(c) == 1, "overlap on ran unfused");
    CHECK(!memcmp(p.out, q.out, sizeof p.out), "%s: AUTO and fused differ", ag ? "ag" : "rs");
    /* the crossover at M: fused */
    w8a8_tp_set_crossover(c, ag ? TP_OP_AG : TP_OP_RS, M);
    prob_init(&p, ag, 10);
    REQUIRE_OK(ag ? w8a8_all_gather_scaled_mm(c, &p.A, &p.B, &p.SA, &p.SB, NULL, NULL, &p.O, NULL, NULL)
                  : w8a8_scaled_mm_reduce_scatter(c, &p.A, &p.B, &p.SA, &p.SB, NULL, NULL, &p.O, NULL));
    CHECK(w8a8_tp_last_fuse(c) == 1, "%s at the crossover (NULL options) ran unfused", ag ? "ag" : "rs");
    CHECK(!memcmp(p.out, q.out, sizeof p.out), "%s: AUTO (fused) and fused differ", ag ? "ag" : "rs");
    /* one rank's crossover above M: every rank runs unfused */
    if (g_rank == g_size - 1) w8a8_tp_set_crossover(c, ag ? TP_OP_AG : TP_OP_RS, M + 1);
    prob_init(&p, ag, 10);
    REQUIRE_OK(ag ? run_ag(c, &p, W8A8_TP_OVERLAP_AUTO) : run_rs(c, &p, W8A8_TP_OVERLAP_AUTO));
    CHECK(w8a8_tp_last_fuse(c) == 0, "%s: ranks' choices differ: every rank must run unfused", ag ? "ag" : "rs");
    CHECK(!memcmp(p.out, q.out, sizeof p.out), "%s: results differ", ag ? "ag" : "rs");
    w8a8_tp_set_crossover(c, ag ? TP_OP_AG : TP_OP_RS, 256);
  }
  /* ranks passing different overlap values disagree (AUTO on some, ON on others) */
  if (g_size > 1) {
    prob_init(&p, 1, 11);
    w8a8_status st = run_ag(c, &p, g_rank == 0 ? W8A8_TP_OVERLAP_AUTO : W8A8_TP_OVERLAP_ON);
    CHECK(st == W8A8_ERROR_COMM_MISMATCH && strstr(w8a8_last_error(), "overlap"), "AUTO vs ON: %s %s",
          w8a8_status_name(st), w8a8_last_error());
    CHECK(w8a8_tp_last_fuse(c) == -1, "a failed call ran a schedule");
  }
  /* W8A8_TP_OVERLAP_MIN_M at creation sets every crossover */
  w8a8_dev_set("TP_OVERLAP_MIN_M", "0");
  w8a8_comm *d = NULL;
  w8a8_status st = w8a8_comm_create_mpi(&d, g_h, &world);
  w8a8_dev_set("TP_OVERLAP_MIN_M", NULL);
  REQUIRE(st == W8A8_SUCCESS, "create: %s", w8a8_last_error());
  CHECK(w8a8_tp_crossover(d, TP_OP_AG) == 0 && w8a8_tp_crossover(d, TP_OP_RS) == 0, "W8A8_TP_OVERLAP_MIN_M=0");
  REQUIRE_OK(w8a8_comm_destroy(d));
  REQUIRE_OK(w8a8_comm_destroy(c));
}

/* ---- a killed rank: run alone (tests/mpi/run_kill.sh) ------------------------------------------------ */

/* W8A8_TP_KILL_TEST=agree|schedule: every rank makes 3 good calls over a communicator with a 1 s timeout;
 * then the last rank exits without MPI_Finalize, before its 4th call ("agree") or inside it, right after its
 * agreement ("schedule": TP_FAULT_EXIT), and the survivors' 4th call must return W8A8_ERROR_TIMEOUT within
 * twice the timeout, and their 5th W8A8_ERROR_BROKEN at once. Each survivor prints one line, "tp_kill rank r:
 * PASS ..." or "... FAIL ...", and exits without MPI_Finalize (which could wait for the dead rank). Under mpirun
 * --enable-recovery the survivors keep running after the death. */
void tp_kill_main(const char *mode) {
  const bool in_schedule = !strcmp(mode, "schedule");
  const int dead = g_size - 1;
  const double T = 1.0;
  char why[600] = "";
  bool ok = true;
  w8a8_handle *h = NULL;
  w8a8_comm *c = NULL;
  MPI_Comm world = MPI_COMM_WORLD;
  if (w8a8_create(&h, W8A8_DEVICE_CPU, 0) || w8a8_set_num_threads(h, 1) || w8a8_comm_create_mpi(&c, h, &world) ||
      w8a8_comm_reserve(c, 64, 64, 64) || w8a8_comm_set_timeout(c, T)) {
    printf("tp_kill rank %d: FAIL set-up: %s\n", g_rank, w8a8_last_error());
    fflush(stdout);
    _exit(1);
  }
  prob p;
  for (int i = 0; i < 3 && ok; i++) {
    prob_init(&p, i % 2, 20 + i);
    w8a8_status st = i % 2 ? run_ag(c, &p, W8A8_TP_OVERLAP_ON) : run_rs(c, &p, W8A8_TP_OVERLAP_ON);
    if (st != W8A8_SUCCESS) ok = false, snprintf(why, sizeof why, "call %d: %s", i, w8a8_last_error());
  }
  if (g_rank == dead) {
    fflush(stdout);
    if (!in_schedule) _exit(0);
    w8a8_tp_test_inject_fault(c, TP_FAULT_EXIT);
  }
  prob_init(&p, 1, 30);
  const double t0 = now_s();
  w8a8_status st = run_ag(c, &p, W8A8_TP_OVERLAP_ON);
  const double dt = now_s() - t0;
  if (ok && (st != W8A8_ERROR_TIMEOUT || dt > 2 * T)) {
    ok = false;
    snprintf(why, sizeof why, "the call after the death returned %s after %.2f s (want W8A8_ERROR_TIMEOUT within %.1f s): %s",
             w8a8_status_name(st), dt, 2 * T, w8a8_last_error());
  }
  const double t1 = now_s();
  w8a8_status st2 = run_ag(c, &p, W8A8_TP_OVERLAP_ON);
  if (ok && (st2 != W8A8_ERROR_BROKEN || now_s() - t1 > 0.5)) {
    ok = false;
    snprintf(why, sizeof why, "the next call returned %s: %s", w8a8_status_name(st2), w8a8_last_error());
  }
  if (ok && w8a8_comm_get_async_error(c) != W8A8_ERROR_TIMEOUT) {
    ok = false;
    snprintf(why, sizeof why, "w8a8_comm_get_async_error: %s", w8a8_last_error());
  }
  if (ok && !in_schedule && !prob_untouched(&p)) ok = false, snprintf(why, sizeof why, "out written");
  printf("tp_kill rank %d: %s (%s: rank %d died %s; TIMEOUT after %.2f s with a %.0f s timeout, then BROKEN)%s%s\n",
         g_rank, ok ? "PASS" : "FAIL", mode, dead, in_schedule ? "after its agreement" : "before its call", dt, T,
         ok ? "" : ": ", why);
  fflush(stdout);
  _exit(ok ? 0 : 1);
}
