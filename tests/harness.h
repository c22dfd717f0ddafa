/* harness.h — a tiny self-registering test harness.
 *
 *   W8A8_TEST(gemm_int8_small) { ... CHECK(x == y, "x=%d", x); ... }
 *
 * Every test file registers its tests with constructors; tests/test_main.c runs
 * those whose name contains any command-line argument (all when none), and ends
 * with "N passed, N failed, N skipped". A test fails if any CHECK fails; it stops at the
 * first failing REQUIRE. Tests may also return early with SKIP("why"). */
#ifndef W8A8_TEST_HARNESS_H
#define W8A8_TEST_HARNESS_H
#include <stdio.h>
#include <stdint.h>

#include "w8a8.h"

typedef struct w8a8_test {
  const char *name;
  void (*fn)(void);
  struct w8a8_test *next;
} w8a8_test;

void w8a8_test_register(w8a8_test *t);
void w8a8_test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void w8a8_test_skip(const char *why);
int w8a8_test_failed(void); /* has the running test failed so far? */

#define W8A8_TEST(name)                                                   \
  static void test_##name(void);                                          \
  static w8a8_test test_rec_##name = {#name, test_##name, 0};             \
  __attribute__((constructor)) static void test_reg_##name(void) {        \
    w8a8_test_register(&test_rec_##name);                                 \
  }                                                                       \
  static void test_##name(void)

#define CHECK(cond, ...)                                       \
  do {                                                         \
    if (!(cond)) w8a8_test_fail(__FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define REQUIRE(cond, ...)                                     \
  do {                                                         \
    if (!(cond)) {                                             \
      w8a8_test_fail(__FILE__, __LINE__, __VA_ARGS__);         \
      return;                                                  \
    }                                                          \
  } while (0)
/* Call returning w8a8_status; fails with the library's message when not SUCCESS. */
#define REQUIRE_OK(call)                                                                        \
  do {                                                                                          \
    w8a8_status s_ = (call);                                                                    \
    if (s_ != W8A8_SUCCESS) {                                                                   \
      w8a8_test_fail(__FILE__, __LINE__, "%s -> %s: %s", #call, w8a8_status_name(s_), w8a8_last_error()); \
      return;                                                                                   \
    }                                                                                           \
  } while (0)
#define SKIP(why)          \
  do {                     \
    w8a8_test_skip(why);   \
    return;                \
  } while (0)

#endif
