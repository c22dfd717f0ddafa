/* test_tune.c — tuning tables (src/core/tune.c): the parser and its validation on the CPU (a
 * good table, every kind of malformed line, stale tables, missing files), the lookup rules, the
 * public w8a8_load_tuning's argument checks, and on an sm_90 GPU (skipped elsewhere) a table
 * loaded into a CUDA handle steering the Hopper path, with results checked against the
 * reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/tune.h"
#include "harness.h"

/* A configuration table of our own, so the parser is tested without CUDA. */
static int fake_resolve(const char *name, int *int8, int *swap_bn, int *max_split) {
  static const struct {
    const char *name;
    int int8, bn, max_split;
  } T[] = {{"fp8_128x128_promote", 0, 0, 1}, {"int8_128x256", 1, 0, 1}, {"int8_swap_n8", 1, 8, 8},
           {"fp8_swap_n32", 0, 32, 8},       {"int8_swap_n64", 1, 64, 8}};
  for (int i = 0; i < (int)(sizeof T / sizeof T[0]); i++)
    if (!strcmp(T[i].name, name)) {
      *int8 = T[i].int8;
      *swap_bn = T[i].bn;
      *max_split = T[i].max_split;
      return 10 + i;
    }
  return -1;
}

static const w8a8_tune_device DEV = {"0.1.0", "NVIDIA H200", 9, 0, 132};
#define HDR "w8a8-tune 1 lib=0.1.0 cc=9.0 sms=132 device=NVIDIA H200\n"

static w8a8_status parse(const char *text, w8a8_tune_table **t) {
  *t = NULL;
  return w8a8_tune_parse("test", "<text>", text, strlen(text), &DEV, fake_resolve, t);
}

W8A8_TEST(tune_parse_good_table) {
  const char *text =
      "# a comment before the header\n"
      "\n" HDR
      "  # dtype M N K config split us\n"
      "int8 1 28672 4096 int8_swap_n8 1 22.41\n"
      "int8\t2-8\t28672\t4096\tint8_swap_n8\t2\t23.5\r\n" /* tabs and CRLF */
      "int8 4096 28672 4096 int8_128x256 1 1500\n"
      "fp8 17-32 6144 4096 fp8_swap_n32 5 31.02\n"
      "fp8 64 6144 4096 fp8_128x128_promote 1 2.5e1\n"
      "int8 33-64 28672 4096 int8_swap_n64 3 40"; /* no final newline */
  w8a8_tune_table *t;
  w8a8_status s = parse(text, &t);
  REQUIRE(s == W8A8_SUCCESS, "%s: %s", w8a8_status_name(s), w8a8_last_error());
  CHECK(t->count == 6, "count %d", t->count);
  CHECK(!strcmp(t->device, "NVIDIA H200") && !strcmp(t->lib, "0.1.0") && t->cc_major == 9 && t->cc_minor == 0 &&
            t->sms == 132,
        "header: '%s' '%s' %d.%d %d", t->device, t->lib, t->cc_major, t->cc_minor, t->sms);
  const w8a8_tune_entry *e = &t->e[1];
  CHECK(e->int8 == 1 && e->m_lo == 2 && e->m_hi == 8 && e->n == 28672 && e->k == 4096 && e->config == 12 &&
            e->swap_bn == 8 && e->split == 2 && e->us == 23.5 && !strcmp(e->name, "int8_swap_n8"),
        "entry 1 fields");
  CHECK(t->e[4].us == 25.0, "2.5e1 us parsed as %g", t->e[4].us);

  /* lookup: a bucket that holds M */
  CHECK(w8a8_tune_lookup(t, 1, 1, 28672, 4096) == &t->e[0], "exact M = 1");
  CHECK(w8a8_tune_lookup(t, 1, 5, 28672, 4096) == &t->e[1], "M = 5 in 2-8");
  CHECK(w8a8_tune_lookup(t, 1, 4096, 28672, 4096) == &t->e[2], "exact M = 4096");
  CHECK(w8a8_tune_lookup(t, 0, 20, 6144, 4096) == &t->e[3], "fp8 M = 20 in 17-32");
  /* nearest bucket in ratio, among configurations that take M */
  CHECK(w8a8_tune_lookup(t, 1, 2048, 28672, 4096) == &t->e[2], "M = 2048 -> 4096 (swap tiles cannot take it)");
  CHECK(w8a8_tune_lookup(t, 1, 10, 28672, 4096) == &t->e[5], "M = 10 -> 33-64 (n8 cannot take 10)");
  CHECK(w8a8_tune_lookup(t, 0, 40, 6144, 4096) == &t->e[4], "fp8 M = 40 -> 64 (n32 cannot take 40)");
  CHECK(w8a8_tune_lookup(t, 0, 8, 6144, 4096) == &t->e[3], "fp8 M = 8 -> 17-32 (ratio 2.1 < 8)");
  /* nothing for another dtype, N or K */
  CHECK(w8a8_tune_lookup(t, 0, 1, 28672, 4096) == NULL, "fp8 has no 28672x4096 entry");
  CHECK(w8a8_tune_lookup(t, 1, 1, 28672, 4095) == NULL, "other K");
  CHECK(w8a8_tune_lookup(t, 1, 1, 28000, 4096) == NULL, "other N");
  CHECK(w8a8_tune_lookup(NULL, 1, 1, 28672, 4096) == NULL, "no table");
  w8a8_tune_free(t);
  w8a8_tune_free(NULL);

  /* a header alone is a valid, empty table */
  s = parse(HDR, &t);
  REQUIRE(s == W8A8_SUCCESS, "%s", w8a8_last_error());
  CHECK(t->count == 0 && w8a8_tune_lookup(t, 1, 1, 1, 1) == NULL, "empty table");
  w8a8_tune_free(t);
}

/* Every kind of malformed table: W8A8_ERROR_INVALID_FILE, a message naming the line, no table. */
W8A8_TEST(tune_parse_malformed) {
  static const struct {
    const char *text;
    int line;          /* the line the message must name (0: no line) */
    const char *what;  /* a substring of the message */
  } C[] = {
      {"", 0, "no header"},
      {"# only a comment\n\n", 0, "no header"},
      {"w8a8-tun 1 lib=0.1.0 cc=9.0 sms=132 device=X\n", 1, "header"},
      {"w8a8-tune\n", 1, "format version"},
      {"w8a8-tune x lib=0.1.0 cc=9.0 sms=132 device=X\n", 1, "format version"},
      {"w8a8-tune 2 lib=0.1.0 cc=9.0 sms=132 device=X\n", 1, "version 2"},
      {"w8a8-tune 1 cc=9.0 lib=0.1.0 sms=132 device=X\n", 1, "lib="},
      {"w8a8-tune 1 lib= cc=9.0 sms=132 device=X\n", 1, "lib="},
      {"w8a8-tune 1 lib=0.1.0 cc=9 sms=132 device=X\n", 1, "cc="},
      {"w8a8-tune 1 lib=0.1.0 cc=9.x sms=132 device=X\n", 1, "cc="},
      {"w8a8-tune 1 lib=0.1.0 cc=9.0 sms=0 device=X\n", 1, "sms="},
      {"w8a8-tune 1 lib=0.1.0 cc=9.0 sms=132\n", 1, "device="},
      {"w8a8-tune 1 lib=0.1.0 cc=9.0 sms=132 name=X\n", 1, "device="},
      {HDR "int8 1 28672 4096 int8_swap_n8 1\n", 2, "too few"},
      {HDR "int8 1 28672 4096 int8_swap_n8 1 2 3\n", 2, "too many"},
      {HDR "# c\nint4 1 28672 4096 int8_swap_n8 1 2\n", 3, "dtype"},
      {HDR "int8 0 28672 4096 int8_swap_n8 1 2\n", 2, "M 0"},
      {HDR "int8 -1 28672 4096 int8_swap_n8 1 2\n", 2, "M -1"},
      {HDR "int8 8-2 28672 4096 int8_swap_n8 1 2\n", 2, "bucket"},
      {HDR "int8 2- 28672 4096 int8_swap_n8 1 2\n", 2, "bucket"},
      {HDR "int8 1x 28672 4096 int8_swap_n8 1 2\n", 2, "M 1x"},
      {HDR "int8 1 2867.2 4096 int8_swap_n8 1 2\n", 2, "N 2867.2"},
      {HDR "int8 1 28672 99999999999 int8_swap_n8 1 2\n", 2, "K 99999999999"},
      {HDR "int8 1 28672 4096 int8_swap_n9 1 2\n", 2, "unknown configuration"},
      {HDR "fp8 1 28672 4096 int8_swap_n8 1 2\n", 2, "is for int8"},
      {HDR "int8 1-17 28672 4096 int8_swap_n8 1 2\n", 2, "takes M <= 16"},
      {HDR "int8 1 28672 4096 int8_swap_n8 0 2\n", 2, "split 0"},
      {HDR "int8 1 28672 4096 int8_swap_n8 9 2\n", 2, "split 9"},
      {HDR "int8 128 28672 4096 int8_128x256 2 2\n", 2, "takes 1..1"},
      {HDR "int8 1 28672 4096 int8_swap_n8 1 0\n", 2, "time"},
      {HDR "int8 1 28672 4096 int8_swap_n8 1 -3\n", 2, "time"},
      {HDR "int8 1 28672 4096 int8_swap_n8 1 nan\n", 2, "time"},
      {HDR "int8 1 28672 4096 int8_swap_n8 1 inf\n", 2, "time"},
      {HDR "int8 1 28672 4096 int8_swap_n8 1 12us\n", 2, "time"},
      {HDR "int8 1-4 28672 4096 int8_swap_n8 1 2\nint8 4-8 28672 4096 int8_swap_n8 1 2\n", 3, "overlaps"},
      {HDR "int8 1 28672 4096 int8_swap_n8 1 2\nint8 1 28672 4096 int8_swap_n8 2 3\n", 3, "overlaps"},
  };
  for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
    w8a8_tune_table *t = (w8a8_tune_table *)&t; /* must stay untouched: not NULL, not a table */
    w8a8_tune_table *const sentinel = t;
    w8a8_status s = w8a8_tune_parse("test", "<text>", C[i].text, strlen(C[i].text), &DEV, fake_resolve, &t);
    CHECK(s == W8A8_ERROR_INVALID_FILE, "case %zu: %s (%s)", i, w8a8_status_name(s), w8a8_last_error());
    CHECK(t == sentinel, "case %zu: *out written on failure", i);
    CHECK(strstr(w8a8_last_error(), C[i].what) != NULL, "case %zu: message lacks \"%s\": %s", i, C[i].what,
          w8a8_last_error());
    if (C[i].line) {
      char want[32];
      snprintf(want, sizeof want, "line %d:", C[i].line);
      CHECK(strstr(w8a8_last_error(), want) != NULL, "case %zu: message does not name %s: %s", i, want,
            w8a8_last_error());
    }
  }
  /* lines over the limit, and NUL bytes (binary files) */
  char *big = malloc(W8A8_TUNE_MAX_LINE + 200);
  REQUIRE(big, "malloc");
  strcpy(big, HDR "# ");
  size_t l = strlen(big);
  memset(big + l, 'x', W8A8_TUNE_MAX_LINE);
  big[l + W8A8_TUNE_MAX_LINE] = 0;
  w8a8_tune_table *t = NULL;
  CHECK(parse(big, &t) == W8A8_ERROR_INVALID_FILE && strstr(w8a8_last_error(), "line 2: longer"), "long line: %s",
        w8a8_last_error());
  free(big);
  static const char nul[] = HDR "int8 1 28672\0 4096 int8_swap_n8 1 2\n";
  CHECK(w8a8_tune_parse("test", "<text>", nul, sizeof nul - 1, &DEV, fake_resolve, &t) == W8A8_ERROR_INVALID_FILE &&
            strstr(w8a8_last_error(), "NUL"),
        "NUL byte: %s", w8a8_last_error());
}

/* A well-formed table of another library version or device: W8A8_ERROR_STALE_TUNING. */
W8A8_TEST(tune_parse_stale) {
  static const struct {
    const char *header;
    const char *what;
  } C[] = {
      {"w8a8-tune 1 lib=0.0.9 cc=9.0 sms=132 device=NVIDIA H200\n", "libw8a8 0.0.9"},
      {"w8a8-tune 1 lib=0.1.0 cc=9.0 sms=132 device=NVIDIA H100 80GB HBM3\n", "NVIDIA H100 80GB HBM3"},
      {"w8a8-tune 1 lib=0.1.0 cc=8.9 sms=132 device=NVIDIA H200\n", "compute capability 8.9"},
      {"w8a8-tune 1 lib=0.1.0 cc=9.0 sms=114 device=NVIDIA H200\n", "114 SMs"},
  };
  for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, "%sint8 1 28672 4096 int8_swap_n8 1 22.4\n", C[i].header);
    w8a8_tune_table *t = NULL;
    w8a8_status s = parse(text, &t);
    CHECK(s == W8A8_ERROR_STALE_TUNING && t == NULL, "case %zu: %s", i, w8a8_status_name(s));
    CHECK(strstr(w8a8_last_error(), C[i].what) != NULL, "case %zu: %s", i, w8a8_last_error());
  }
  /* without a device to compare with (dev NULL), the same text parses */
  w8a8_tune_table *t = NULL;
  const char *text = "w8a8-tune 1 lib=0.0.9 cc=9.0 sms=132 device=NVIDIA H200\n";
  CHECK(w8a8_tune_parse("test", "<text>", text, strlen(text), NULL, fake_resolve, &t) == W8A8_SUCCESS && t,
        "dev NULL: %s", w8a8_last_error());
  w8a8_tune_free(t);
  /* trailing blanks after the device name do not make a table stale */
  text = "w8a8-tune 1 lib=0.1.0 cc=9.0 sms=132 device=NVIDIA H200  \t\n";
  CHECK(parse(text, &t) == W8A8_SUCCESS, "trailing blanks: %s", w8a8_last_error());
  w8a8_tune_free(t);
}

/* The library's own version string ("0.1.0 (cpu cuda(90a) ...)", with blanks) round-trips
 * through the header the tuner writes (the first GPU run wrote one its reader refused). */
W8A8_TEST(tune_header_real_version) {
  w8a8_tune_device me = {w8a8_version_string(), "NVIDIA H200", 9, 0, 132};
  char text[512];
  int n = w8a8_tune_format_header(text, sizeof text, &me);
  REQUIRE(n > 0 && n < 400, "header");
  snprintf(text + n, sizeof text - (size_t)n, "int8 1 28672 4096 int8_swap_n8 1 22.41\n");
  w8a8_tune_table *t = NULL;
  w8a8_status s = w8a8_tune_parse("test", "mem", text, strlen(text), &me, fake_resolve, &t);
  CHECK(s == W8A8_SUCCESS && t && t->count == 1, "%s: %s", text, w8a8_last_error());
  w8a8_tune_free(t);
  /* another version is stale */
  w8a8_tune_device other = me;
  other.lib = "9.9.9 (cpu)";
  t = NULL;
  s = w8a8_tune_parse("test", "mem", text, strlen(text), &other, fake_resolve, &t);
  CHECK(s == W8A8_ERROR_STALE_TUNING && !t, "stale: %s", w8a8_last_error());
}

W8A8_TEST(tune_read_file) {
  char path[] = "/tmp/w8a8_test_tune_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0, "mkstemp");
  FILE *f = fdopen(fd, "w");
  REQUIRE(f, "fdopen");
  char hdr[256];
  CHECK(w8a8_tune_format_header(hdr, sizeof hdr, &DEV) > 0 && !strcmp(hdr, HDR), "header as written: %s", hdr);
  fputs(hdr, f);
  fputs("int8 1 28672 4096 int8_swap_n8 1 22.41\n", f);
  fclose(f);
  w8a8_tune_table *t = NULL;
  w8a8_status s = w8a8_tune_read_file("test", path, &DEV, fake_resolve, &t);
  CHECK(s == W8A8_SUCCESS && t && t->count == 1, "%s", w8a8_last_error());
  w8a8_tune_free(t);
  unlink(path);
  /* missing file, and a directory */
  t = NULL;
  s = w8a8_tune_read_file("test", path, &DEV, fake_resolve, &t);
  CHECK(s == W8A8_ERROR_INVALID_FILE && !t && strstr(w8a8_last_error(), "cannot open"), "missing: %s",
        w8a8_last_error());
  s = w8a8_tune_read_file("test", "/tmp", &DEV, fake_resolve, &t);
  CHECK(s == W8A8_ERROR_INVALID_FILE && !t, "directory: %s %s", w8a8_status_name(s), w8a8_last_error());
}

/* Which line an overlap is reported on: the first line whose entry overlaps an earlier one (in file order), named
 * with that earlier entry's line; an overlap before a malformed line is reported first, and after one not at all. */
W8A8_TEST(tune_parse_overlap_lines) {
  static const struct {
    const char *text;
    const char *want; /* a substring of the message */
  } C[] = {
      /* line 5 overlaps line 3 and line 6 overlaps line 2: line 5 is the first */
      {HDR "int8 1-4 28672 4096 int8_128x256 1 2\n"
           "int8 10-20 28672 4096 int8_128x256 1 2\n"
           "int8 100 6144 4096 int8_128x256 1 2\n"
           "int8 15-30 28672 4096 int8_128x256 1 2\n"
           "int8 2 28672 4096 int8_128x256 1 2\n",
       "line 5: M 15-30 overlaps the entry of line 3 (M 10-20)"},
      /* the same buckets of another dtype, N or K do not overlap; the last line does (with the first) */
      {HDR "int8 1-64 28672 4096 int8_128x256 1 2\n"
           "fp8 1-64 28672 4096 fp8_128x128_promote 1 2\n"
           "int8 1-64 28673 4096 int8_128x256 1 2\n"
           "int8 1-64 28672 4095 int8_128x256 1 2\n"
           "int8 64-65 28672 4096 int8_128x256 1 2\n",
       "line 6: M 64-65 overlaps the entry of line 2 (M 1-64)"},
      /* an overlap, then a malformed line: the overlap */
      {HDR "int8 1-4 28672 4096 int8_128x256 1 2\n"
           "int8 4 28672 4096 int8_128x256 1 2\n"
           "int4 1 28672 4096 int8_128x256 1 2\n",
       "line 3: M 4-4 overlaps the entry of line 2"},
      /* a malformed line, then an overlap: the malformed line */
      {HDR "int8 1-4 28672 4096 int8_128x256 1 2\n"
           "int4 1 28672 4096 int8_128x256 1 2\n"
           "int8 4 28672 4096 int8_128x256 1 2\n",
       "line 3: dtype int4"},
  };
  for (size_t i = 0; i < sizeof C / sizeof C[0]; i++) {
    w8a8_tune_table *t = NULL;
    w8a8_status s = parse(C[i].text, &t);
    CHECK(s == W8A8_ERROR_INVALID_FILE && !t, "case %zu: %s (%s)", i, w8a8_status_name(s), w8a8_last_error());
    CHECK(strstr(w8a8_last_error(), C[i].want) != NULL, "case %zu: message lacks \"%s\": %s", i, C[i].want,
          w8a8_last_error());
  }
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* W8A8_TUNE_MAX_ENTRIES (100,000) valid entries load in well under a second (the overlap check sorts: it took 17 s
 * when it compared every pair), lookups find their buckets, and one entry more is refused. The buckets interleave
 * 2,000 (N, K) groups of 50 buckets each, and the last line overlaps the third. */
W8A8_TEST(tune_parse_large_table) {
  enum { N_ENTRIES = W8A8_TUNE_MAX_ENTRIES, PER_GROUP = 50 };
  const size_t cap = (size_t)(N_ENTRIES + 2) * 64 + 256;
  char *text = malloc(cap);
  REQUIRE(text, "malloc");
  size_t len = (size_t)snprintf(text, cap, "%s", HDR);
  for (int i = 0; i < N_ENTRIES; i++) {
    const int group = i % (N_ENTRIES / PER_GROUP), b = i / (N_ENTRIES / PER_GROUP); /* groups interleaved */
    len += (size_t)snprintf(text + len, cap - len, "%s %d-%d %d 4096 %s 1 %d.5\n", i % 3 ? "int8" : "fp8",
                            100 * b + 1, 100 * b + 64, 16 * (group + 1), i % 3 ? "int8_128x256" : "fp8_128x128_promote",
                            1 + i % 7);
  }
  REQUIRE(len < W8A8_TUNE_MAX_BYTES, "the table is %zu bytes", len);
  w8a8_tune_table *t = NULL;
  double t0 = now_s();
  w8a8_status s = parse(text, &t);
  double dt = now_s() - t0;
  REQUIRE(s == W8A8_SUCCESS && t, "%s: %s", w8a8_status_name(s), w8a8_last_error());
  printf("    %d entries parsed in %.3f s\n", t->count, dt);
  CHECK(t->count == N_ENTRIES, "count %d", t->count);
  CHECK(dt < 2.0, "%d entries took %.2f s to load", N_ENTRIES, dt);
  int wrong = 0;
  for (int i = 0; i < N_ENTRIES; i += 997) {
    const w8a8_tune_entry *e = &t->e[i];
    if (w8a8_tune_lookup(t, e->int8, e->m_lo + 7, e->n, e->k) != e && wrong++ < 4)
      CHECK(0, "lookup of entry %d's bucket found another entry", i);
    /* between two buckets: the nearer one in ratio */
    const w8a8_tune_entry *near = w8a8_tune_lookup(t, e->int8, e->m_hi + 2, e->n, e->k);
    if ((!near || near->n != e->n || near->k != e->k || near->int8 != e->int8) && wrong++ < 4)
      CHECK(0, "nearest-bucket lookup next to entry %d found no entry of its group", i);
  }
  CHECK(wrong == 0, "%d lookups wrong", wrong);
  w8a8_tune_free(t);
  /* one entry more is refused */
  len += (size_t)snprintf(text + len, cap - len, "int8 99999 16 4096 int8_128x256 1 1\n");
  t = NULL;
  s = parse(text, &t);
  CHECK(s == W8A8_ERROR_INVALID_FILE && !t && strstr(w8a8_last_error(), "more than 100000 entries"), "%s: %s",
        w8a8_status_name(s), w8a8_last_error());
  /* the last of 100,000 entries overlapping the third: found, and named */
  len -= strlen("int8 99999 16 4096 int8_128x256 1 1\n");
  char *last = text + len - 1;
  while (last > text && last[-1] != '\n') last--;
  len = (size_t)(last - text);
  len += (size_t)snprintf(text + len, cap - len, "int8 40-41 48 4096 int8_128x256 1 1\n");
  t = NULL;
  t0 = now_s();
  s = parse(text, &t);
  dt = now_s() - t0;
  CHECK(s == W8A8_ERROR_INVALID_FILE && !t && strstr(w8a8_last_error(), "line 100001: M 40-41 overlaps the entry of line 4"),
        "%s: %s", w8a8_status_name(s), w8a8_last_error());
  CHECK(dt < 2.0, "the overlapping table took %.2f s", dt);
  free(text);
}

/* The public call: handle checks, CPU handles, NULL path. */
W8A8_TEST(tune_load_public_args) {
  CHECK(w8a8_load_tuning(NULL, "/nonexistent") == W8A8_ERROR_INVALID_HANDLE, "NULL handle");
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CPU, 0));
  w8a8_status s = w8a8_load_tuning(h, "/nonexistent");
  CHECK(s == W8A8_ERROR_UNSUPPORTED_DEVICE && strstr(w8a8_last_error(), "w8a8_load_tuning"), "CPU handle: %s %s",
        w8a8_status_name(s), w8a8_last_error());
  CHECK(w8a8_load_tuning(h, NULL) == W8A8_SUCCESS, "NULL path drops the table: %s", w8a8_last_error());
  CHECK(strcmp(w8a8_status_name(W8A8_ERROR_STALE_TUNING), "W8A8_ERROR_STALE_TUNING") == 0, "status name");
  w8a8_destroy(h);
  w8a8_handle *dead = h;
  CHECK(w8a8_load_tuning(dead, NULL) == W8A8_ERROR_INVALID_HANDLE, "destroyed handle");
}

#ifdef W8A8_HAVE_CUDA
#include <cuda_runtime.h>

int w8a8_sm90_plan(w8a8_handle *h, const w8a8_mm_problem *p, int *split);
const char *w8a8_sm90_config_name(int config);

/* On an sm_90 GPU: a table loaded into a CUDA handle steers the plan (w8a8_sm90_plan reports
 * the table's configuration and split), the product stays bit-exact (int8), a stale table is
 * refused and the previous one kept, and NULL drops it. */
W8A8_TEST(tune_cuda_table_steers_sm90) {
  int dev = -1, n = w8a8_cuda_device_count();
  for (int d = 0; d < n && dev < 0; d++) {
    struct cudaDeviceProp pr;
    if (cudaGetDeviceProperties(&pr, d) == cudaSuccess && pr.major == 9 && pr.minor == 0) dev = d;
  }
  if (dev < 0) SKIP("no compute capability 9.0 GPU");
  w8a8_handle *h = NULL;
  REQUIRE_OK(w8a8_create(&h, W8A8_DEVICE_CUDA, dev));
  w8a8_handle_info info;
  REQUIRE_OK(w8a8_get_info(h, &info));
  w8a8_tune_device me = {w8a8_version_string(), info.name, info.cc_major, info.cc_minor, info.num_sms};
  const int64_t M = 3, N = 1000, K = 528; /* lda % 16 == 0 (the sm_90a kernel's TMA), K % 128 != 0 */
  char path[] = "/tmp/w8a8_test_tune_cuda_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0, "mkstemp");
  FILE *f = fdopen(fd, "w");
  REQUIRE(f, "fdopen");
  char hdr[256];
  w8a8_tune_format_header(hdr, sizeof hdr, &me);
  fprintf(f, "%sint8 1-8 %lld %lld int8_swap_n8 3 10\n", hdr, (long long)N, (long long)K);
  fclose(f);
  REQUIRE_OK(w8a8_load_tuning(h, path));

  /* operands: int8, per-token x per-channel, bf16 out */
  int8_t *a = malloc((size_t)(M * K)), *b = malloc((size_t)(N * K));
  float *sa = malloc(4 * (size_t)M), *sb = malloc(4 * (size_t)N);
  uint16_t *ref = malloc(2 * (size_t)(M * N)), *got = malloc(2 * (size_t)(M * N));
  REQUIRE(a && b && sa && sb && ref && got, "malloc");
  srand(7);
  for (int64_t i = 0; i < M * K; i++) a[i] = (int8_t)(rand() & 0xff);
  for (int64_t i = 0; i < N * K; i++) b[i] = (int8_t)(rand() & 0xff);
  for (int64_t i = 0; i < M; i++) sa[i] = 1e-4f * (float)(1 + rand() % 100);
  for (int64_t i = 0; i < N; i++) sb[i] = 1e-3f * (float)(1 + rand() % 100);
  w8a8_handle *cpu = NULL;
  REQUIRE_OK(w8a8_create(&cpu, W8A8_DEVICE_CPU, 0));
  REQUIRE_OK(w8a8_set_kernel(cpu, W8A8_KERNEL_REFERENCE));
  w8a8_matrix A = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_ROW_MAJOR, M, K, K, a);
  w8a8_matrix B = w8a8_matrix_make(W8A8_DTYPE_INT8, W8A8_COL_MAJOR, K, N, K, b);
  w8a8_matrix O = w8a8_matrix_make(W8A8_DTYPE_BF16, W8A8_ROW_MAJOR, M, N, N, ref);
  w8a8_vector SA = w8a8_vector_make(W8A8_DTYPE_FP32, M, sa), SB = w8a8_vector_make(W8A8_DTYPE_FP32, N, sb);
  REQUIRE_OK(w8a8_scaled_mm(cpu, &A, &B, &SA, &SB, NULL, NULL, &O));
  void *da, *db, *dsa, *dsb, *dout;
  REQUIRE(cudaSetDevice(dev) == cudaSuccess && cudaMalloc(&da, (size_t)(M * K)) == cudaSuccess &&
              cudaMalloc(&db, (size_t)(N * K)) == cudaSuccess && cudaMalloc(&dsa, 4 * (size_t)M) == cudaSuccess &&
              cudaMalloc(&dsb, 4 * (size_t)N) == cudaSuccess && cudaMalloc(&dout, 2 * (size_t)(M * N)) == cudaSuccess,
          "cudaMalloc");
  cudaMemcpy(da, a, (size_t)(M * K), cudaMemcpyHostToDevice);
  cudaMemcpy(db, b, (size_t)(N * K), cudaMemcpyHostToDevice);
  cudaMemcpy(dsa, sa, 4 * (size_t)M, cudaMemcpyHostToDevice);
  cudaMemcpy(dsb, sb, 4 * (size_t)N, cudaMemcpyHostToDevice);
  cudaMemset(dout, 0xff, 2 * (size_t)(M * N));
  A.data = da;
  B.data = db;
  O.data = dout;
  SA.data = dsa;
  SB.data = dsb;
  w8a8_mm_problem p;
  REQUIRE_OK(w8a8_validate_scaled_mm("test", h, &A, &B, &SA, &SB, NULL, NULL, &O, &p));
  int split = 0, cfg = w8a8_sm90_plan(h, &p, &split);
  CHECK(!strcmp(w8a8_sm90_config_name(cfg), "int8_swap_n8") && split == 3, "tuned plan: %s split %d",
        w8a8_sm90_config_name(cfg), split);
  REQUIRE_OK(w8a8_set_kernel(h, W8A8_KERNEL_SM90));
  REQUIRE_OK(w8a8_scaled_mm(h, &A, &B, &SA, &SB, NULL, NULL, &O));
  CHECK(cudaDeviceSynchronize() == cudaSuccess, "kernel failed");
  cudaMemcpy(got, dout, 2 * (size_t)(M * N), cudaMemcpyDeviceToHost);
  CHECK(memcmp(got, ref, 2 * (size_t)(M * N)) == 0, "tuned int8 product differs from the reference");

  /* a stale table is refused and the loaded one kept */
  f = fopen(path, "w");
  REQUIRE(f, "fopen");
  w8a8_tune_device stale = me;
  stale.sms++;
  w8a8_tune_format_header(hdr, sizeof hdr, &stale);
  fputs(hdr, f);
  fclose(f);
  CHECK(w8a8_load_tuning(h, path) == W8A8_ERROR_STALE_TUNING, "stale: %s", w8a8_last_error());
  cfg = w8a8_sm90_plan(h, &p, &split);
  CHECK(!strcmp(w8a8_sm90_config_name(cfg), "int8_swap_n8") && split == 3, "old table kept after a refusal");
  REQUIRE_OK(w8a8_load_tuning(h, NULL));
  unlink(path);

  cudaFree(da), cudaFree(db), cudaFree(dsa), cudaFree(dsb), cudaFree(dout);
  free(a), free(b), free(sa), free(sb), free(ref), free(got);
  w8a8_destroy(cpu);
  w8a8_destroy(h);
}
#endif

/* A swap-AB configuration may cover two of its token tiles in an exact bucket (the heuristic runs two
 * n16 tiles at 17..32 tokens and the tuner measures such candidates), but the nearest-bucket
 * fallback only hands it an M that one tile takes. */
W8A8_TEST(tune_two_token_tiles) {
  w8a8_tune_table *t;
  w8a8_status s = parse(HDR "int8 9-16 4096 4096 int8_swap_n8 2 9.5\nint8 64 4096 4096 int8_swap_n64 1 20\n", &t);
  REQUIRE(s == W8A8_SUCCESS, "%s: %s", w8a8_status_name(s), w8a8_last_error());
  CHECK(w8a8_tune_lookup(t, 1, 12, 4096, 4096) == &t->e[0], "M = 12 in 9-16 (two n8 tiles)");
  CHECK(w8a8_tune_lookup(t, 1, 7, 4096, 4096) == &t->e[0], "M = 7 -> 9-16 (ratio 1.3; n8 takes 7 in one tile)");
  CHECK(w8a8_tune_lookup(t, 1, 20, 4096, 4096) == &t->e[1], "M = 20 -> 64 (n8 takes at most 8 tokens per tile)");
  w8a8_tune_free(t);
}
