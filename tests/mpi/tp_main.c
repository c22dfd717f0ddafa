/* tp_main.c — MPI set-up for the TP test binary: the runner's hooks (tests/test_main.c),
 * the per-test agreement on results, and the deterministic data generators. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_test.h"

int g_rank, g_size;
w8a8_handle *g_h, *g_ref;
w8a8_comm *g_comm;

void w8a8_test_main_begin(int *argc, char ***argv);
int w8a8_test_main_end(int *passed, int *failed, int *skipped);

static void die(const char *what, w8a8_status s) {
  fprintf(stderr, "w8a8_tp_tests: %s failed: %s: %s\n", what, w8a8_status_name(s), w8a8_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}

void w8a8_test_main_begin(int *argc, char ***argv) {
  int provided;
  MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const char *kill_mode = getenv("W8A8_TP_KILL_TEST");
  if (kill_mode && *kill_mode) tp_kill_main(kill_mode); /* (exits) */
  w8a8_status s;
  if ((s = w8a8_create(&g_h, W8A8_DEVICE_CPU, 0))) die("w8a8_create", s);
  /* Oversubscribed ranks on 2 cores: one thread each keeps the run fast and fair. */
  if ((s = w8a8_set_num_threads(g_h, 1))) die("w8a8_set_num_threads", s);
  if ((s = w8a8_create(&g_ref, W8A8_DEVICE_CPU, 0))) die("w8a8_create", s);
  if ((s = w8a8_set_num_threads(g_ref, 1))) die("w8a8_set_num_threads", s);
  if ((s = w8a8_set_kernel(g_ref, W8A8_KERNEL_REFERENCE))) die("w8a8_set_kernel", s);
  MPI_Comm world = MPI_COMM_WORLD;
  if ((s = w8a8_comm_create_mpi(&g_comm, g_h, &world))) die("w8a8_comm_create_mpi", s);
  if ((s = w8a8_comm_reserve(g_comm, 256, 96, 96))) die("w8a8_comm_reserve", s);
  if (g_rank == 0) printf("w8a8_tp_tests: %d ranks, %s\n", g_size, w8a8_version_string());
}

int w8a8_test_main_end(int *passed, int *failed, int *skipped) {
  /* TP_TEST already made the counts identical on every rank; this is a last guard. */
  int f = *failed, fmax = 0;
  MPI_Allreduce(&f, &fmax, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  *failed = fmax;
  w8a8_comm_destroy(g_comm);
  w8a8_destroy(g_h);
  w8a8_destroy(g_ref);
  MPI_Finalize();
  if (g_rank != 0) {
    printf("rank %d: finished (%d tests ran here; rank 0 prints the summary)\n", g_rank, *passed + *failed + *skipped);
    return 0;
  }
  return 1;
}

void tp_sync_result(const char *name) {
  int mine = w8a8_test_failed(), any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (mine) printf("    rank %d of %d: %s failed here\n", g_rank, g_size, name);
  if (any && !mine) w8a8_test_fail(__FILE__, __LINE__, "%s failed on another rank (see its messages)", name);
}

bool tp_any_failed(void) {
  int mine = w8a8_test_failed(), any = 0;
  MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return any != 0;
}

uint64_t tp_seed(uint64_t a, uint64_t b, uint64_t c) {
  return a * 0x9e3779b97f4a7c15ull ^ (b + 1) * 0xd1b54a32d192ed03ull ^ (c + 7) * 0x94d049bb133111ebull;
}

static uint64_t next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void tp_fill_q8(void *x, int64_t n, w8a8_dtype dt, uint64_t seed) {
  uint8_t *p = x;
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) {
    uint8_t v = (uint8_t)next(&s); /* int8: the full range, -128 included */
    if (dt == W8A8_DTYPE_FP8_E4M3 && (v & 0x7f) == 0x7f) v ^= 1; /* any finite e4m3, +-448 included */
    p[i] = v;
  }
}

void tp_fill_f32(float *x, int64_t n, float lo, float hi, uint64_t seed) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)(next(&s) >> 40) * 0x1p-24f;
}

void tp_fill_i32(int32_t *x, int64_t n, int32_t lo, int32_t hi, uint64_t seed) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) x[i] = lo + (int32_t)(next(&s) % (uint64_t)(hi - lo + 1));
}

void tp_fill_out(w8a8_dtype t, void *x, int64_t n, float lo, float hi, uint64_t seed) {
  uint64_t s = seed;
  for (int64_t i = 0; i < n; i++) w8a8_tp_store(t, x, i, lo + (hi - lo) * (float)(next(&s) >> 40) * 0x1p-24f);
}

int64_t tp_rows(int64_t total, int W, int j, int skew) {
  int64_t off, cnt;
  w8a8_tp_shard_rows(total, W, j, &off, &cnt);
  if (!skew || W == 1) return cnt;
  if (j == W - 1) return 0;
  int64_t last_off, last;
  w8a8_tp_shard_rows(total, W, W - 1, &last_off, &last);
  return j == 0 ? cnt + last : cnt;
}

int64_t tp_offset(int64_t total, int W, int j, int skew) {
  int64_t off = 0;
  for (int i = 0; i < j; i++) off += tp_rows(total, W, i, skew);
  return off;
}

float tp_round_to_out(w8a8_dtype t, float x) {
  float y = 0.0f;
  uint16_t h = 0;
  w8a8_tp_store(t, t == W8A8_DTYPE_FP32 ? (void *)&y : (void *)&h, 0, x);
  return t == W8A8_DTYPE_FP32 ? y : w8a8_tp_load(t, &h, 0);
}

float tp_out_spacing2(w8a8_dtype t, float x) {
  if (t == W8A8_DTYPE_FP32) return 0.0f;
  int e = 0;
  frexpf(fabsf(x), &e); /* |x| < 2^e: the spacing there is 2^(e-8) (bf16) or 2^(e-11) (fp16) */
  float u = ldexpf(1.0f, e - (t == W8A8_DTYPE_BF16 ? 8 : 11));
  if (t == W8A8_DTYPE_FP16 && u < 0x1p-24f) u = 0x1p-24f; /* fp16 subnormals */
  return 2.0f * u;
}
