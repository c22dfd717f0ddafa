/* tp_test.h — shared pieces of the MPI test binary (build/bin/w8a8_tp_tests).
 *
 * Every rank runs every test; tests are collective. TP_TEST wraps W8A8_TEST so that
 * at the end of each test the ranks agree on its outcome (a failure on any rank fails
 * the test on every rank, naming the rank), which keeps the ranks' pass/fail counts
 * identical; rank 0 alone prints the final "N passed, N failed" line.
 *
 * Rule for writing these tests: a rank may leave a test early (REQUIRE, SKIP) only
 * where every rank does the same, e.g. after a fused call failed (the calls fail on
 * every rank together); comparisons use CHECK. */
#ifndef W8A8_TP_TEST_H
#define W8A8_TP_TEST_H
#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "../harness.h"
#include "core/internal.h"
#include "tp/tp_internal.h"

extern int g_rank, g_size;
extern w8a8_handle *g_h;   /* CPU handle (1 thread) used by the communicators */
extern w8a8_handle *g_ref; /* CPU handle forced to the scalar reference */
extern w8a8_comm *g_comm;  /* over MPI_COMM_WORLD, reserved for the tests' sizes */

void tp_sync_result(const char *name);
/* W8A8_TP_KILL_TEST=agree|schedule (tests/mpi/run_kill.sh): a rank dies mid-sequence; never returns. */
void tp_kill_main(const char *mode);
/* Has the running test failed on any rank? Collective: use it to leave a loop early. */
bool tp_any_failed(void);

#define TP_TEST(name)                   \
  static void tp_body_##name(void);     \
  W8A8_TEST(name) {                     \
    tp_body_##name();                   \
    tp_sync_result(#name);              \
  }                                     \
  static void tp_body_##name(void)

/* Deterministic data: every rank can generate every rank's inputs. */
uint64_t tp_seed(uint64_t a, uint64_t b, uint64_t c);
void tp_fill_q8(void *x, int64_t n, w8a8_dtype dt, uint64_t seed);
void tp_fill_f32(float *x, int64_t n, float lo, float hi, uint64_t seed);
void tp_fill_i32(int32_t *x, int64_t n, int32_t lo, int32_t hi, uint64_t seed);
/* n values ~ U(lo, hi) stored in dtype t (bf16, fp16, fp32) */
void tp_fill_out(w8a8_dtype t, void *x, int64_t n, float lo, float hi, uint64_t seed);
/* Shard sizes: skew = 0 the usual split (w8a8_tp_shard_rows); 1 a skewed one in which the
 * last rank has no rows (W > 1) and rank 0 has the most. */
int64_t tp_rows(int64_t total, int W, int j, int skew);
int64_t tp_offset(int64_t total, int W, int j, int skew);
/* W8A8_TP_PARTIALS_OUT's partial in the references: x rounded to out's dtype (RNE, numeric.c's
 * converters) and widened back (x itself for fp32). */
float tp_round_to_out(w8a8_dtype t, float x);
/* Twice the spacing of out's dtype at |x| (0 for fp32): how far the rounding of a partial that a
 * kernel summed in another order (fp8) can land from the reference's rounding of it (the
 * neighbour). The fp8 tolerance of rounded partials adds this per rank. */
float tp_out_spacing2(w8a8_dtype t, float x);

#endif
