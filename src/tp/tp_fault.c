/* tp_fault.c — how a communicator fails safely, on every transport: the call numbers, the
 * broken state and the notices that tell the peers, deadlines, abort, the asynchronous error,
 * and the crossovers of W8A8_TP_OVERLAP_AUTO.
 *
 * Broken: the first failure after which the ranks may disagree (an MPI / NCCL / CUDA error in the
 * exchange or the schedule, a timeout, an abort, ranks out of step) is recorded with its rank and
 * message; every later call returns at once. Over MPI the breaking rank sends each peer a notice
 * (its status and the communicator's instance number) on the communicator's duplicate, tag
 * TAG_NOTICE; every rank keeps a receive for it posted from creation to destroy, and every wait
 * tests it, so a peer waiting for the broken rank fails instead of hanging. A broken communicator's
 * MPI duplicate is never freed: Open MPI reuses a freed communicator's context id for the next one
 * and hands it the messages that arrived for the old one (a schedule's rows, a second notice), which
 * a stale notice did to the next test's communicator. In-process GPU groups share their state under
 * the group's mutex.
 *
 * Deadlines: a call's deadline is fixed when it starts (w8a8_tp_call_enter). MPI waits never block
 * inside MPI: MPI_Testall is polled (spin, then yield, then 20 us sleeps) with the deadline, the
 * abort flag and the notice checked between polls. A nonblocking collective cannot be cancelled, so
 * one that is left pending keeps its buffers for ever (mpi_pending: comm.c does not free them). */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../core/knobs.h"
#include "tp_internal.h"

#define TAG_NOTICE 32000 /* below the smallest MPI_TAG_UB the standard allows (32767); the schedules use 101..201 */

uint64_t w8a8_tp_random64(void) {
  uint64_t t = 0;
  FILE *f = fopen("/dev/urandom", "rb");
  if (f) {
    if (fread(&t, sizeof t, 1, f) != 1) t = 0;
    fclose(f);
  }
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  t ^= (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 32);
  return t >> 2; /* (62 bits: MPI_MAX over int64 agrees on it) */
}

double w8a8_tp_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int64_t w8a8_tp_env_timeout_us(void) {
  /* default 300 s (knobs.h): generous for a layer call */
  return (int64_t)(w8a8_knob_num(W8A8_KNOB_TP_TIMEOUT_S) * 1e6 + 0.5);
}

double w8a8_tp_deadline_in(int64_t us) { return us > 0 ? w8a8_tp_now() + (double)us * 1e-6 : INFINITY; }

/* Fused calls with an invalid communicator made by this thread since its last fused call on a valid
 * one (TP_SIG_SKIPS). Charged to the thread's next call, whatever its communicator: counting per
 * communicator would charge a skip to every communicator the thread uses, and break all but one. */
static _Thread_local int64_t tls_invalid_calls;
void w8a8_tp_count_invalid_comm(void) { tls_invalid_calls++; }

bool w8a8_tp_fault_init(w8a8_comm *c) {
  if (pthread_mutex_init(&c->err_mu, NULL)) return false;
  c->err_mu_ready = true;
  c->err_status = W8A8_SUCCESS;
  c->err_msg[0] = '\0';
  c->aborted = 0;
  c->abort_done = false;
  c->timeout_us = w8a8_tp_env_timeout_us();
  c->deadline = INFINITY;
  c->seq = c->cur_seq = 0;
  c->cur_skips = 0;
  c->agreed_fuse = 0;
  c->last_fuse = -1;
  c->fuse_min_m[0] = c->fuse_min_m[1] = 0;
  return true;
}

void w8a8_tp_fault_fini(w8a8_comm *c) {
  if (c->err_mu_ready) pthread_mutex_destroy(&c->err_mu);
  c->err_mu_ready = false;
}

/* ---- W8A8_TP_OVERLAP_AUTO ------------------------------------------------------------------ */

/* Fused from this many rows of the layer (M), per transport; docs/TP.md has the measurements:
 *   copy_engine: fused won at every measured M (1024 and 8192 rows: 1.01-1.35x,
 *                tp-bench-local-h200x2.txt); nothing below 1024 was measured, where fusion's fixed costs
 *                (events, a second barrier, a launch per chunk) are not paid back (PyTorch's fused
 *                reduce-scatter: 0.30-0.39x of unfused at 32-448 rows): unfused below 1024;
 *   ipc:         all-gather 0.98-1.02x at 1024, 1.04-1.21x at 8192 (tp-bench-ipc-h200x2.txt): 2048;
 *                reduce-scatter 1.20-1.33x at 1024: 1024;
 *   nccl:        all-gather 1.07-1.28x at 1024: 1024; reduce-scatter lost at 1024 and 8192 in 6 of 8
 *                cases (0.94-0.97x, tp-bench-nccl-h200x2.txt): never;
 *   mpi (CPU):   2 ranks on a 2-core machine (docs/TP.md; noisy): fused/unfused 0.93-1.03x at 16-64 rows,
 *                0.95-1.09x (median 1.01) at 256, 1.00-1.11x at 512-1024 but for two outliers: 256. */
static void crossovers_of(const char *transport, int64_t *ag, int64_t *rs) {
  if (!strcmp(transport, "copy_engine")) {
    *ag = 1024, *rs = 1024;
  } else if (!strcmp(transport, "ipc")) {
    *ag = 2048, *rs = 1024;
  } else if (!strcmp(transport, "nccl")) {
    *ag = 1024, *rs = INT64_MAX;
  } else {
    *ag = 256, *rs = 256;
  }
}

void w8a8_tp_set_crossovers(w8a8_comm *c) {
  crossovers_of(w8a8_tp_transport(c, NULL), &c->fuse_min_m[0], &c->fuse_min_m[1]);
  const int64_t v = w8a8_knob_int(W8A8_KNOB_TP_OVERLAP_MIN_M);
  if (v >= 0) c->fuse_min_m[0] = c->fuse_min_m[1] = v;
}

int64_t w8a8_tp_crossover(const w8a8_comm *c, int op) { return c->fuse_min_m[op == TP_OP_RS ? 1 : 0]; }

void w8a8_tp_set_crossover(w8a8_comm *c, int op, int64_t rows) {
  if (c && rows >= 0) c->fuse_min_m[op == TP_OP_RS ? 1 : 0] = rows;
}

int w8a8_tp_last_fuse(const w8a8_comm *c) { return c ? c->last_fuse : -1; }

void w8a8_tp_test_inject_fault(w8a8_comm *c, int kind) {
  if (c) c->fault_inject = kind;
}

void w8a8_tp_test_after_agree(w8a8_comm *c) {
  if (c->fault_inject == TP_FAULT_EXIT) _exit(0); /* tests only: a rank dying between its agreement and its schedule */
}

/* ---- the broken state ------------------------------------------------------------------------ */

static int err_get(const w8a8_comm *c, char *msg, size_t n) {
  if (!c->err_mu_ready) return W8A8_SUCCESS; /* (a creation that failed before it was set up) */
  w8a8_comm *m = (w8a8_comm *)c; /* the mutex only: the state it guards is read */
  pthread_mutex_lock(&m->err_mu);
  int s = c->err_status;
  if (msg) snprintf(msg, n, "%s", c->err_msg);
  pthread_mutex_unlock(&m->err_mu);
  return s;
}

bool w8a8_tp_is_broken(const w8a8_comm *c) {
  if (err_get(c, NULL, 0) != W8A8_SUCCESS || __atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) return true;
  int st = 0;
  return w8a8_tp_is_gpu(c) && w8a8_tp_gpu_group_broken(c, &st, NULL, 0);
}

w8a8_status w8a8_tp_break(const char *fn, w8a8_comm *c, w8a8_status s, bool notify) {
  (void)fn;
  char msg[400];
  snprintf(msg, sizeof msg, "%s", w8a8_last_error());
  pthread_mutex_lock(&c->err_mu);
  if (c->err_status == W8A8_SUCCESS) {
    c->err_status = s;
    snprintf(c->err_msg, sizeof c->err_msg, "rank %d: %s", c->rank, msg);
  }
  pthread_mutex_unlock(&c->err_mu);
  if (notify) {
#ifdef W8A8_HAVE_MPI
    w8a8_tp_notice_send(c);
#endif
    if (w8a8_tp_is_gpu(c)) w8a8_tp_gpu_on_break(c, s, msg);
  }
  w8a8_err(s, "%s", msg); /* (the message as it was) */
  return s;
}

/* An abort of this rank, seen by the thread making the calls: break (once, telling the peers). */
static w8a8_status honour_abort(const char *fn, w8a8_comm *c, const char *what) {
  if (!__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE)) return W8A8_SUCCESS;
  if (what)
    w8a8_err(W8A8_ERROR_ABORTED, "%s: aborted (w8a8_comm_abort on this rank) while waiting for %s", fn, what);
  else
    w8a8_err(W8A8_ERROR_ABORTED, "%s: the communicator was aborted on this rank (w8a8_comm_abort); destroy it", fn);
  if (!c->abort_done) { /* w8a8_comm_abort recorded the break (it makes no MPI call): tell the peers now */
    c->abort_done = true;
#ifdef W8A8_HAVE_MPI
    w8a8_tp_notice_send(c);
#endif
  }
  return W8A8_ERROR_ABORTED;
}

/* A peer broke the communicator: its notice (MPI) or the group's state (in-process ranks). */
static w8a8_status peek_peers(const char *fn, w8a8_comm *c) {
#ifdef W8A8_HAVE_MPI
  while (c->notice_posted) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Test(&c->notice_req, &flag, &st) != MPI_SUCCESS || !flag) break;
    c->notice_posted = false; /* (the request is now MPI_REQUEST_NULL) */
    const uint64_t inst = (uint64_t)(uint32_t)c->notice_in[1] | (uint64_t)(uint32_t)c->notice_in[2] << 31;
    if (inst != (c->instance & 0x3fffffffffffffffull)) { /* another communicator's: see the top */
      w8a8_tp_notice_post(c);
      continue;
    }
    /* A peer's timeout is this call's timeout too (the same collective did not complete in time); any
     * other failure of a peer is BROKEN here. */
    const w8a8_status why = (w8a8_status)c->notice_in[0];
    const w8a8_status s = why == W8A8_ERROR_TIMEOUT ? W8A8_ERROR_TIMEOUT : W8A8_ERROR_BROKEN;
    w8a8_err(s, "%s: rank %d broke the communicator (%s; see that rank's error)", fn, st.MPI_SOURCE,
             w8a8_status_name(why));
    return w8a8_tp_break(fn, c, s, false);
  }
#endif
  int gs = 0;
  char why[300];
  if (w8a8_tp_is_gpu(c) && w8a8_tp_gpu_group_broken(c, &gs, why, sizeof why)) {
    const w8a8_status s = gs == W8A8_ERROR_TIMEOUT ? W8A8_ERROR_TIMEOUT : W8A8_ERROR_BROKEN; /* (as over MPI) */
    w8a8_err(s, "%s: the rank group is broken (%s, %s)", fn, w8a8_status_name((w8a8_status)gs), why);
    return w8a8_tp_break(fn, c, s, false);
  }
  return W8A8_SUCCESS;
}

static w8a8_status broken_error(const char *fn, w8a8_comm *c) {
  W8A8_CHECK(honour_abort(fn, c, NULL));
  char msg[448];
  int s = err_get(c, msg, sizeof msg);
  return w8a8_err(W8A8_ERROR_BROKEN, "%s: the communicator is broken by an earlier failure (%s, %s); destroy it", fn,
                  w8a8_status_name((w8a8_status)s), msg);
}

w8a8_status w8a8_tp_call_enter(const char *fn, w8a8_comm *c) {
  c->cur_seq = c->seq++;
  c->cur_skips = tls_invalid_calls;
  tls_invalid_calls = 0;
  c->deadline = w8a8_tp_deadline_in(__atomic_load_n(&c->timeout_us, __ATOMIC_RELAXED));
  c->agreed_fuse = 0;
  c->last_fuse = -1;
  if (__atomic_load_n(&c->aborted, __ATOMIC_ACQUIRE) || err_get(c, NULL, 0) != W8A8_SUCCESS) return broken_error(fn, c);
  W8A8_CHECK(peek_peers(fn, c)); /* (a break learnt now: its own status, TIMEOUT or BROKEN) */
  if (c->fault_inject == TP_FAULT_SKIP) {
    c->fault_inject = TP_FAULT_NONE;
    return w8a8_err(W8A8_ERROR_INTERNAL, "%s: test hook: this call returns before its exchange", fn);
  }
  return W8A8_SUCCESS;
}

w8a8_status w8a8_tp_poll_faults(const char *fn, w8a8_comm *c, const char *what) {
  W8A8_CHECK(honour_abort(fn, c, what));
  W8A8_CHECK(peek_peers(fn, c));
  if (w8a8_tp_now() > c->deadline) {
    const double t = (double)__atomic_load_n(&c->timeout_us, __ATOMIC_RELAXED) * 1e-6;
    w8a8_err(W8A8_ERROR_TIMEOUT,
             "%s: %s did not complete within the communicator's timeout (%g s from the call's start): a peer is "
             "missing (it skipped the call, or died), or late; the communicator is now broken",
             fn, what, t);
    return w8a8_tp_break(fn, c, W8A8_ERROR_TIMEOUT, true);
  }
  return W8A8_SUCCESS;
}

void w8a8_tp_backoff(int iter, double since) {
  if (iter < 64) return; /* a wait that ends within microseconds: stay on the core */
  const double waited = w8a8_tp_now() - since;
  if (waited < 2e-3) {
    sched_yield(); /* ranks oversubscribing the cores get theirs */
    return;
  }
  /* a long wait (a late or dead peer): do not burn a core; 20 us keeps an abort's latency tiny */
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
}

/* ---- MPI waits and notices -------------------------------------------------------------------- */

#ifdef W8A8_HAVE_MPI

w8a8_status w8a8_tp_mpi_wait(const char *fn, w8a8_comm *c, int n, MPI_Request *reqs, const char *what) {
  const double t0 = w8a8_tp_now();
  for (int it = 0;; it++) {
    int done = 0;
    int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) {
      c->mpi_pending = true;
      w8a8_tp_mpi_err(fn, what, rc);
      return w8a8_tp_break(fn, c, W8A8_ERROR_COMM, true);
    }
    if (done) return W8A8_SUCCESS;
    w8a8_status s = w8a8_tp_poll_faults(fn, c, what);
    if (s != W8A8_SUCCESS) {
      c->mpi_pending = true;
      return s;
    }
    w8a8_tp_backoff(it, t0);
  }
}

w8a8_status w8a8_tp_mpi_coll(const char *fn, w8a8_comm *c, int rc, MPI_Request *req, const char *what) {
  if (rc != MPI_SUCCESS) {
    w8a8_tp_mpi_err(fn, what, rc);
    return w8a8_tp_break(fn, c, W8A8_ERROR_COMM, true);
  }
  return w8a8_tp_mpi_wait(fn, c, 1, req, what);
}

w8a8_status w8a8_tp_mpi_wait_until(const char *fn, MPI_Request *req, double deadline, const char *what) {
  const double t0 = w8a8_tp_now();
  for (int it = 0;; it++) {
    int done = 0;
    int rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return w8a8_tp_mpi_err(fn, what, rc);
    if (done) return W8A8_SUCCESS;
    if (w8a8_tp_now() > deadline)
      return w8a8_err(W8A8_ERROR_TIMEOUT,
                      "%s: %s did not complete within W8A8_TP_TIMEOUT_S (%g s): a rank did not join the creation "
                      "(its mpi_comm was unusable, or it did not call) or is late. The MPI communicator now has this "
                      "operation pending: make no further collective call on it",
                      fn, what, deadline - t0);
    w8a8_tp_backoff(it, t0);
  }
}

void w8a8_tp_notice_post(w8a8_comm *c) {
  c->notice_posted = false;
  if (c->size < 2 || c->mpi == MPI_COMM_NULL) return;
  c->notice_posted =
      MPI_Irecv(c->notice_in, 3, MPI_INT, MPI_ANY_SOURCE, TAG_NOTICE, c->mpi, &c->notice_req) == MPI_SUCCESS;
}

void w8a8_tp_notice_send(w8a8_comm *c) {
  if (c->notice_sent || c->size < 2 || c->mpi == MPI_COMM_NULL) return;
  c->notice_sent = true;
  if (!c->notice_out) c->notice_out = calloc(3, sizeof(int));
  if (!c->notice_sreq) c->notice_sreq = calloc((size_t)c->size, sizeof(MPI_Request));
  if (!c->notice_out || !c->notice_sreq) return; /* (the peers then fail at their timeout) */
  int st = err_get(c, NULL, 0);
  c->notice_out[0] = st > 0 && st < W8A8_STATUS_COUNT ? st : W8A8_ERROR_BROKEN;
  c->notice_out[1] = (int)(c->instance & 0x7fffffffu);
  c->notice_out[2] = (int)((c->instance >> 31) & 0x7fffffffu);
  for (int j = 0; j < c->size; j++) {
    c->notice_sreq[j] = MPI_REQUEST_NULL;
    if (j != c->rank && MPI_Isend(c->notice_out, 3, MPI_INT, j, TAG_NOTICE, c->mpi, &c->notice_sreq[j]) != MPI_SUCCESS)
      c->notice_sreq[j] = MPI_REQUEST_NULL;
  }
}

bool w8a8_tp_notice_close(w8a8_comm *c) {
  if (c->notice_posted) {
    /* An unmatched receive is cancelled locally; one that matched a notice meanwhile completes. */
    MPI_Cancel(&c->notice_req);
    MPI_Wait(&c->notice_req, MPI_STATUS_IGNORE);
    c->notice_posted = false;
  }
  if (c->notice_sreq) {
    /* A notice to a dead peer may never complete: its request is freed and its buffer kept. */
    int done = 0;
    if (MPI_Testall(c->size, c->notice_sreq, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS || !done) {
      for (int j = 0; j < c->size; j++)
        if (c->notice_sreq[j] != MPI_REQUEST_NULL) MPI_Request_free(&c->notice_sreq[j]);
      c->notice_out = NULL;
    }
    free(c->notice_sreq);
    c->notice_sreq = NULL;
  }
  free(c->notice_out);
  c->notice_out = NULL;
  return !w8a8_tp_is_broken(c);
}

#endif /* W8A8_HAVE_MPI */

/* ---- the public calls ------------------------------------------------------------------------- */

w8a8_status w8a8_comm_set_timeout(w8a8_comm *comm, double seconds) {
  static const char fn[] = "w8a8_comm_set_timeout";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_tp_check_comm(fn, comm));
  if (!(seconds >= 0.0) || seconds > 1e9)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: seconds is %g; expected 0 (no timeout) up to 1e9", fn, seconds);
  __atomic_store_n(&comm->timeout_us, (int64_t)(seconds * 1e6 + 0.5), __ATOMIC_RELAXED);
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_get_timeout(const w8a8_comm *comm, double *seconds) {
  static const char fn[] = "w8a8_comm_get_timeout";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_tp_check_comm(fn, comm));
  if (!seconds) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: seconds is NULL", fn);
  *seconds = (double)__atomic_load_n(&comm->timeout_us, __ATOMIC_RELAXED) * 1e-6;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_abort(w8a8_comm *comm) {
  static const char fn[] = "w8a8_comm_abort";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_tp_check_comm(fn, comm));
  /* Recorded here so that w8a8_comm_get_async_error sees it at once; the thread making the calls
   * breaks the communicator for it (and tells the peers) at its next poll or call. */
  pthread_mutex_lock(&comm->err_mu);
  if (comm->err_status == W8A8_SUCCESS) {
    comm->err_status = W8A8_ERROR_ABORTED;
    snprintf(comm->err_msg, sizeof comm->err_msg, "rank %d: w8a8_comm_abort was called", comm->rank);
  }
  pthread_mutex_unlock(&comm->err_mu);
  __atomic_store_n(&comm->aborted, 1, __ATOMIC_RELEASE);
  if (w8a8_tp_is_gpu(comm)) w8a8_tp_gpu_on_abort(comm);
  return W8A8_SUCCESS;
}

w8a8_status w8a8_comm_get_async_error(const w8a8_comm *comm) {
  static const char fn[] = "w8a8_comm_get_async_error";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_tp_check_comm(fn, comm));
  char msg[448];
  int s = err_get(comm, msg, sizeof msg);
  if (s != W8A8_SUCCESS) return w8a8_err((w8a8_status)s, "%s: %s", fn, msg);
  if (w8a8_tp_is_gpu(comm)) {
    char why[300];
    int gs = 0;
    if (w8a8_tp_gpu_group_broken(comm, &gs, why, sizeof why))
      return w8a8_err(W8A8_ERROR_BROKEN, "%s: the rank group is broken (%s: %s)", fn,
                      w8a8_status_name((w8a8_status)gs), why);
    return w8a8_tp_gpu_async_error(fn, comm);
  }
  return W8A8_SUCCESS;
}
