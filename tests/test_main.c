/* test_main.c — runs the registered tests; see harness.h. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

static w8a8_test *head, **tail = &head;
static int cur_failed, cur_skipped, cur_fail_msgs;

void w8a8_test_register(w8a8_test *t) {
  /* keep registration order (file order, then definition order) */
  t->next = NULL;
  *tail = t;
  tail = &t->next;
}

void w8a8_test_fail(const char *file, int line, const char *fmt, ...) {
  cur_failed = 1;
  if (++cur_fail_msgs > 10) return; /* one broken kernel should not print a million lines */
  va_list ap;
  va_start(ap, fmt);
  printf("    %s:%d: ", file, line);
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
}

void w8a8_test_skip(const char *why) {
  cur_skipped = 1;
  printf("    skipped: %s\n", why);
}

int w8a8_test_failed(void) { return cur_failed; }

/* Optional hooks, defined only by test binaries that need them (tests/mpi: MPI_Init at the
 * start; at the end MPI_Finalize, and the summary line printed by rank 0 only). Weak, so
 * w8a8_tests links without them. The end hook returns whether to print the summary. */
__attribute__((weak)) void w8a8_test_main_begin(int *argc, char ***argv);
__attribute__((weak)) int w8a8_test_main_end(int *passed, int *failed, int *skipped);

/* Arguments select tests by substring; one starting with '-' excludes the tests it matches
 * (`w8a8_tests sm90_ -sm90_many`). No positive argument: every test not excluded. */
static int selected(const char *name, int argc, char **argv) {
  int any_pos = 0, hit = 0;
  for (int i = 1; i < argc; i++) {
    if (argv[i][0] == '-') {
      if (argv[i][1] && strstr(name, argv[i] + 1)) return 0;
    } else {
      any_pos = 1;
      if (strstr(name, argv[i])) hit = 1;
    }
  }
  return !any_pos || hit;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (w8a8_test_main_begin) w8a8_test_main_begin(&argc, &argv);
  int passed = 0, failed = 0, skipped = 0;
  for (w8a8_test *t = head; t; t = t->next) {
    if (!selected(t->name, argc, argv)) continue;
    cur_failed = cur_skipped = cur_fail_msgs = 0;
    printf("[ RUN  ] %s\n", t->name);
    const double t0 = now_s();
    t->fn();
    const double dt = now_s() - t0;
    if (cur_failed) {
      failed++;
      printf("[ FAIL ] %s (%.1f s)\n", t->name, dt);
    } else if (cur_skipped) {
      skipped++;
      printf("[ SKIP ] %s (%.1f s)\n", t->name, dt);
    } else {
      passed++;
      printf("[  OK  ] %s (%.1f s)\n", t->name, dt);
    }
  }
  if (!w8a8_test_main_end || w8a8_test_main_end(&passed, &failed, &skipped))
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  return failed ? 1 : 0;
}
