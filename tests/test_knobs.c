/* test_knobs.c — the settings table (src/core/knobs.h) and the handle's launch record. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "core/knobs.h"

static const char *value_of(const char *name) {
  for (int i = 0; i < w8a8_setting_count(); i++) {
    w8a8_setting s;
    if (w8a8_get_setting(i, &s) == W8A8_SUCCESS && strcmp(s.name, name) == 0) return s.value;
  }
  return NULL;
}

/* Every setting has a unique name, a value, a default and a line of doc; few are for users. */
W8A8_TEST(knobs_table) {
  const int n = w8a8_setting_count();
  REQUIRE(n == W8A8_KNOB_COUNT && n > 0, "%d settings, %d rows", n, (int)W8A8_KNOB_COUNT);
  int users = 0;
  for (int i = 0; i < n; i++) {
    w8a8_setting s;
    REQUIRE_OK(w8a8_get_setting(i, &s));
    CHECK(s.name && s.name[0] && s.value && s.default_value && s.doc && strlen(s.doc) > 10, "setting %d", i);
    CHECK(!s.for_users == (strncmp(s.name, "W8A8_", 5) != 0), "%s: users' settings are W8A8_ variables", s.name);
    users += s.for_users;
    for (int j = 0; j < i; j++) {
      w8a8_setting t;
      REQUIRE_OK(w8a8_get_setting(j, &t));
      CHECK(strcmp(s.name, t.name) != 0, "%s twice", s.name);
    }
  }
  CHECK(users >= 1 && users <= 8, "%d settings for users (at most 8)", users);
  w8a8_setting s;
  CHECK(w8a8_get_setting(n, &s) == W8A8_ERROR_INVALID_VALUE, "index past the end");
  CHECK(w8a8_get_setting(-1, &s) == W8A8_ERROR_INVALID_VALUE, "negative index");
  CHECK(strstr(w8a8_last_error(), "w8a8_get_setting") != NULL, "message names the call: %s", w8a8_last_error());
  CHECK(w8a8_get_setting(0, NULL) == W8A8_ERROR_NULL_POINTER, "NULL setting");
}

static const char *const VARS[] = {"W8A8_TP_TIMEOUT_S", "W8A8_CPU_DISABLE", "W8A8_TP_OVERLAP_MIN_M", "W8A8_DEV",
                                   "W8A8_LOG"};
enum { NVARS = sizeof VARS / sizeof VARS[0] };

/* The environment, read again: user variables, W8A8_DEV's list, and bad values falling back to the default.
 * The caller's values come back after (a test stage may run with W8A8_CPU_DISABLE set). */
W8A8_TEST(knobs_environment) {
  char *saved[NVARS];
  for (int i = 0; i < NVARS; i++) saved[i] = getenv(VARS[i]) ? strdup(getenv(VARS[i])) : NULL;
  setenv("W8A8_TP_TIMEOUT_S", "2.5", 1);
  setenv("W8A8_CPU_DISABLE", "avx3", 1);           /* not a known set: ignored */
  setenv("W8A8_TP_OVERLAP_MIN_M", "lots", 1);      /* not a number: ignored */
  setenv("W8A8_DEV", "GEMV=0,TP_AG_PUSH=2,NOPE=1,TP_IPC=1,TP_AG_PIECES=99", 1);
  setenv("W8A8_LOG", "off", 1);                    /* (the warnings above stay off the test's output) */
  w8a8_dev_reload();
  CHECK(w8a8_knob_num(W8A8_KNOB_TP_TIMEOUT_S) == 2.5, "TP_TIMEOUT_S %g", w8a8_knob_num(W8A8_KNOB_TP_TIMEOUT_S));
  CHECK(strcmp(w8a8_knob_str(W8A8_KNOB_CPU_DISABLE), "") == 0, "CPU_DISABLE '%s'", w8a8_knob_str(W8A8_KNOB_CPU_DISABLE));
  CHECK(w8a8_knob_int(W8A8_KNOB_TP_OVERLAP_MIN_M) == -1, "TP_OVERLAP_MIN_M %lld",
        (long long)w8a8_knob_int(W8A8_KNOB_TP_OVERLAP_MIN_M));
  CHECK(w8a8_knob_int(W8A8_KNOB_GEMV) == 0, "W8A8_DEV GEMV=0");
  CHECK(w8a8_knob_int(W8A8_KNOB_TP_AG_PUSH) == 2, "W8A8_DEV TP_AG_PUSH=2");
  CHECK(w8a8_knob_int(W8A8_KNOB_TP_IPC) == 0, "a user setting is not taken from W8A8_DEV");
  CHECK(w8a8_knob_int(W8A8_KNOB_TP_AG_PIECES) == 1, "TP_AG_PIECES=99 is out of range: the default");
  CHECK(w8a8_log_level() == W8A8_LOG_OFF, "W8A8_LOG=off");
  const char *v = value_of("W8A8_TP_TIMEOUT_S");
  CHECK(v && strcmp(v, "2.5") == 0, "listed value %s", v ? v : "(none)");
  v = value_of("TP_AG_PUSH");
  CHECK(v && strcmp(v, "2") == 0, "listed value of TP_AG_PUSH %s", v ? v : "(none)");
  for (int i = 0; i < NVARS; i++) unsetenv(VARS[i]);
  w8a8_dev_reload();
  CHECK(w8a8_knob_num(W8A8_KNOB_TP_TIMEOUT_S) == 300.0, "default timeout back");
  CHECK(w8a8_knob_int(W8A8_KNOB_GEMV) == 2 && w8a8_knob_int(W8A8_KNOB_TP_AG_PUSH) == 0, "defaults back");
  CHECK(w8a8_log_level() == W8A8_LOG_WARN, "W8A8_LOG's default is warn");
  for (int i = 0; i < NVARS; i++)
    if (saved[i]) setenv(VARS[i], saved[i], 1), free(saved[i]);
  w8a8_dev_reload();
}

/* w8a8_dev_set: refuses unknown names and bad values (nothing changes), NULL goes back. */
W8A8_TEST(knobs_dev_set) {
  CHECK(w8a8_dev_set("NO_SUCH_SETTING", "1") == W8A8_ERROR_INVALID_VALUE, "unknown name");
  CHECK(strstr(w8a8_last_error(), "NO_SUCH_SETTING") != NULL, "%s", w8a8_last_error());
  CHECK(w8a8_dev_set(NULL, "1") == W8A8_ERROR_NULL_POINTER, "NULL name");
  REQUIRE_OK(w8a8_dev_set("TP_RS_MIN_ROWS", "512"));
  CHECK(w8a8_knob_int(W8A8_KNOB_TP_RS_MIN_ROWS) == 512, "set");
  CHECK(w8a8_dev_set("TP_RS_MIN_ROWS", "-5") == W8A8_ERROR_INVALID_VALUE, "below the range");
  CHECK(w8a8_dev_set("TP_RS_MIN_ROWS", "12x") == W8A8_ERROR_INVALID_VALUE, "not a number");
  CHECK(strstr(w8a8_last_error(), "expected a number in [0, ") != NULL, "says what it expects: %s", w8a8_last_error());
  CHECK(w8a8_knob_int(W8A8_KNOB_TP_RS_MIN_ROWS) == 512, "a refused value changes nothing");
  REQUIRE_OK(w8a8_dev_set("TP_RS_MIN_ROWS", NULL));
  CHECK(w8a8_knob_int(W8A8_KNOB_TP_RS_MIN_ROWS) == 0, "back to the default");
  CHECK(w8a8_dev_set("LOG", "loud") == W8A8_ERROR_INVALID_VALUE, "LOG takes off / warn / info");
  REQUIRE_OK(w8a8_dev_set_int("SM90_TAIL", 3));
  CHECK(w8a8_knob_int(W8A8_KNOB_SM90_TAIL) == 3, "set_int");
  REQUIRE_OK(w8a8_dev_set_int("SM90_TAIL", -1));
  CHECK(w8a8_knob_int(W8A8_KNOB_SM90_TAIL) == 1, "set_int -1: the default");
}

/* What the last GEMM ran, per handle: empty before any, the CPU kernel and the problem after. */
W8A8_TEST(knobs_last_launch) {
  w8a8_handle *h = NULL, *g = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  REQUIRE_OK(w8a8_create(&g, W8A8_DEVICE_CPU, 0));
  w8a8_launch_info li;
  REQUIRE_OK(w8a8_get_last_launch(h, &li));
  CHECK(strcmp(li.kernel, "") == 0 && li.m == 0, "before any GEMM: '%s'", li.kernel);
  CHECK(w8a8_get_last_launch(h, NULL) == W8A8_ERROR_NULL_POINTER, "NULL info");
  CHECK(w8a8_get_last_launch(NULL, &li) == W8A8_ERROR_INVALID_HANDLE, "NULL handle");
  enum { M = 5, N = 7, K = 32 };
  int8_t a[M * K], b[N * K];
  for (int i = 0; i < M * K; i++) a[i] = (int8_t)(i * 7 % 11 - 5);
  for (int i = 0; i < N * K; i++) b[i] = (int8_t)(i * 5 % 13 - 6);
  float sa = 1.0f, sb = 1.0f, out[M * N];
  w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K, K, a);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, b);
  w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_FP32, W8A8_ROW_MAJOR, M, N, N, out);
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, 1, &sb);
  REQUIRE_OK(w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O));
  REQUIRE_OK(w8a8_get_last_launch(h, &li));
  CHECK(strncmp(li.kernel, "cpu-", 4) == 0 && li.m == M && li.n == N && li.k == K && li.split_k == 1,
        "AUTO: '%s' %lld x %lld x %lld split %d", li.kernel, (long long)li.m, (long long)li.n, (long long)li.k,
        li.split_k);
  CHECK(strcmp(li.config, "") == 0, "no sm90 configuration on the CPU: '%s'", li.config);
  REQUIRE_OK(w8a8_get_last_launch(g, &li));
  CHECK(strcmp(li.kernel, "") == 0, "another handle's record is its own: '%s'", li.kernel);
  REQUIRE_OK(w8a8_set_kernel(h, W8A8_KERNEL_REFERENCE));
  REQUIRE_OK(w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O));
  REQUIRE_OK(w8a8_get_last_launch(h, &li));
  CHECK(strcmp(li.kernel, "cpu-reference") == 0, "forced reference: '%s'", li.kernel);
  REQUIRE_OK(w8a8_destroy(h));
  REQUIRE_OK(w8a8_destroy(g));
}
