/* fuzz_tune.c — libFuzzer target for the tuning-table parser (src/core/tune.c: w8a8_tune_parse and
 * w8a8_tune_lookup), the file `w8a8 tune` writes and w8a8_load_tuning / W8A8_TUNE_FILE read.
 *
 * Random bytes become a table text: a valid table is generated first (its header for a fixed device, comments,
 * blank and CRLF lines, entries over a small resolver of made-up configurations: plain and swap-AB, int8 and fp8,
 * exact M and lo-hi buckets), then up to four edits land at random places (a byte replaced or inserted from a set
 * of characters the format cares about, a byte deleted, a line duplicated, the text cut, a line made too long).
 *
 * Properties checked (a violation traps, which libFuzzer reports as a crash):
 *   - no crash, no sanitizer report (ASan + UBSan), no leak;
 *   - the unedited text parses, with exactly the generated entries and header;
 *   - any text: a failure is W8A8_ERROR_INVALID_FILE or W8A8_ERROR_STALE_TUNING, its message starts with the call's
 *     name, and the output pointer is untouched; a success holds only what tune.h documents, checked here
 *     independently: the header of the device asked for, every entry's dtype, M bucket (1 <= lo <= hi <= 2^31 - 1),
 *     N, K, a known configuration of the entry's dtype, the swap-AB bucket limit, the split range, a positive
 *     finite time, and no two entries of one dtype, N and K sharing an M;
 *   - lookups on random queries return nothing or an entry of the query's dtype, N and K, and the entry whose
 *     bucket holds M wherever there is one.
 *
 * Build: make fuzz (clang -fsanitize=fuzzer,address,undefined, CPU-only library).
 * Run:   sh tests/run_fuzz.sh build/bin/fuzz_tune 20 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tune.h"

#define FAIL(...)                               \
  do {                                          \
    fprintf(stderr, "fuzz_tune: " __VA_ARGS__); \
    fprintf(stderr, "\n");                      \
    __builtin_trap();                           \
  } while (0)

typedef struct reader {
  const uint8_t *p;
  size_t n;
} reader;
static unsigned rd8(reader *r) {
  if (!r->n) return 0;
  r->n--;
  return *r->p++;
}
static unsigned rd16(reader *r) { return rd8(r) << 8 | rd8(r); }

/* The resolver's configurations: name, int8, swap token tile (0: not swap-AB), largest split. */
static const struct {
  const char *name;
  int int8, swap_bn, max_split;
} cfgs[] = {{"plain_int8", 1, 0, 1}, {"plain_fp8", 0, 0, 1}, {"swap16_fp8", 0, 16, 8}, {"swap8_int8", 1, 8, 4},
            {"split_fp8", 0, 0, 8}};
#define NCFG ((int)(sizeof cfgs / sizeof cfgs[0]))

static int resolve(const char *name, int *int8, int *swap_bn, int *max_split) {
  for (int i = 0; i < NCFG; i++)
    if (!strcmp(name, cfgs[i].name)) {
      *int8 = cfgs[i].int8;
      *swap_bn = cfgs[i].swap_bn;
      *max_split = cfgs[i].max_split;
      return i;
    }
  return -1;
}

static const w8a8_tune_device dev = {"0.1.0 (cpu fuzz)", "NVIDIA H200", 9, 0, 132};
static const char fn[] = "w8a8_load_tuning";

#define MAX_TEXT 8192
#define MAX_GEN 16

typedef struct gen_entry {
  int cfg, split;
  int64_t lo, hi, n, k;
  int bucket; /* written as lo-hi */
} gen_entry;

static size_t put(char *t, size_t len, const char *s) {
  size_t n = strlen(s);
  if (len + n >= MAX_TEXT) return len;
  memcpy(t + len, s, n);
  return len + n;
}

/* A table from the bytes: its text in t, its entries in g. Valid, except that now and then (*bad set) one entry
 * breaks exactly one rule of tune.h (so the unedited text must then be refused). */
static size_t generate(reader *r, char *t, gen_entry *g, int *ng, int *bad) {
  char line[256];
  size_t len = 0;
  const char *eol = rd8(r) % 4 == 0 ? "\r\n" : "\n";
  if (rd8(r) % 2) len = put(t, len, "# measured by w8a8 tune\n\n");
  char hdr[256];
  w8a8_tune_format_header(hdr, sizeof hdr, &dev);
  hdr[strcspn(hdr, "\n")] = 0;
  len = put(t, len, hdr);
  if (rd8(r) % 3 == 0) len = put(t, len, "  \t"); /* trailing blanks after the device name */
  len = put(t, len, eol);
  const int n = (int)(rd8(r) % (MAX_GEN + 1));
  static const int64_t dims[] = {1, 64, 4096, 6144, 28672, INT32_MAX};
  *ng = 0;
  *bad = 0;
  for (int i = 0; i < n; i++) {
    /* the rule this entry breaks: -1 none (most entries), else one of 0..10 below */
    const int rule = rd8(r) % 8 == 0 ? (int)(rd8(r) % 11) : -1;
    gen_entry e;
    e.cfg = (int)(rd8(r) % NCFG);
    e.split = 1 + (int)(rd8(r) % cfgs[e.cfg].max_split);
    /* N unique per entry unless it joins an earlier entry's group (below), K from a small set */
    e.n = 16 * (int64_t)(i + 1) + (rd8(r) % 2 ? INT32_MAX - 16 * (MAX_GEN + 2) : 0);
    e.k = dims[rd8(r) % 6];
    const int bn = cfgs[e.cfg].swap_bn;
    const int64_t cap = bn ? 2 * bn : INT32_MAX;
    e.lo = 1 + (int64_t)(rd16(r) % (bn ? (unsigned)cap : 20000u));
    if (rd8(r) % 8 == 0 && !bn) e.lo = INT32_MAX - (int64_t)(rd8(r) % 4);
    e.bucket = rd8(r) % 2;
    e.hi = e.bucket ? e.lo + (int64_t)(rd16(r) % 5000) : e.lo;
    if (e.hi > cap) e.hi = cap;
    if (e.hi < e.lo) e.hi = e.lo;
    /* now and then another bucket of an earlier entry's dtype, N and K, above that group's buckets (groups of
     * several buckets: the parser's sorted order and the lookups' search within a group) */
    if (*ng > 0 && rd8(r) % 4 == 0) {
      const gen_entry *p = &g[rd8(r) % *ng];
      const int int8 = cfgs[p->cfg].int8;
      int64_t top = 0;
      for (int j = 0; j < *ng; j++)
        if (g[j].n == p->n && g[j].k == p->k && cfgs[g[j].cfg].int8 == int8 && g[j].hi > top) top = g[j].hi;
      if (!cfgs[p->cfg].swap_bn && top < INT32_MAX - 200) {
        e.cfg = int8 ? 0 : (rd8(r) % 2 ? 1 : 4); /* the configurations without a token-tile limit */
        e.split = 1 + (int)(rd8(r) % cfgs[e.cfg].max_split);
        e.n = p->n, e.k = p->k;
        e.lo = top + 1 + (int64_t)(rd8(r) % 50);
        e.hi = e.bucket ? e.lo + (int64_t)(rd8(r) % 100) : e.lo;
      }
    }
    static const char *us[] = {"12.5", "7", "0.001", "1e3", "31.02"};
    static const char *bad_us[] = {"0", "-1", "nan", "inf", "1e999", "12.5x", ""};
    const char *ustr = us[rd8(r) % 5], *dtype = cfgs[e.cfg].int8 ? "int8" : "fp8", *name = cfgs[e.cfg].name;
    const char *extra = "";
    int64_t n_field = e.n, split = e.split;
    switch (rule) {
      case 0: /* a swap-AB configuration past two of its token tiles */
        e.cfg = 2 + (int)(rd8(r) % 2);
        name = cfgs[e.cfg].name, dtype = cfgs[e.cfg].int8 ? "int8" : "fp8";
        e.bucket = 1, e.lo = 1, e.hi = 2 * cfgs[e.cfg].swap_bn + 1 + (int64_t)(rd8(r) % 3);
        split = 1;
        break;
      case 1: split = cfgs[e.cfg].max_split + 1 + (int64_t)(rd8(r) % 3); break;
      case 2: split = 0; break;
      case 3: e.bucket = 0, e.lo = 0; break;
      case 4: e.bucket = 1, e.lo = 2 + (int64_t)(rd8(r) % 9), e.hi = e.lo - 1; break;
      case 5: n_field = (int64_t)INT32_MAX + 1; break;
      case 6: ustr = bad_us[rd8(r) % 7]; break;
      case 7: name = rd8(r) % 2 ? "plain_int9" : "swap16_fp"; break;
      case 8: dtype = cfgs[e.cfg].int8 ? "fp8" : "int8"; break;
      case 9: extra = rd8(r) % 2 ? " 1" : ""; ustr = extra[0] ? ustr : ""; if (!extra[0]) split = -1; break;
      case 10: break; /* an overlap: an earlier entry again (below) */
      default: break;
    }
    char m[48];
    if (e.bucket)
      snprintf(m, sizeof m, "%lld-%lld", (long long)e.lo, (long long)e.hi);
    else
      snprintf(m, sizeof m, "%lld", (long long)e.lo);
    const char *sep = rd8(r) % 2 ? " " : "\t ";
    char sp[24] = "";
    if (split >= 0) snprintf(sp, sizeof sp, "%s%lld", sep, (long long)split); /* (-1: the field left out) */
    if (rule == 10 && *ng > 0) { /* an earlier entry's line again: the same dtype, N, K and M */
      const gen_entry *p = &g[rd8(r) % *ng];
      snprintf(m, sizeof m, "%lld-%lld", (long long)p->lo, (long long)p->hi);
      snprintf(line, sizeof line, "%s %s %lld %lld %s %d 1%s", cfgs[p->cfg].int8 ? "int8" : "fp8", m, (long long)p->n,
               (long long)p->k, cfgs[p->cfg].name, p->split, eol);
    } else {
      snprintf(line, sizeof line, "%s%s%s%s%lld%s%lld%s%s%s%s%s%s%s", dtype, sep, m, sep, (long long)n_field, sep,
               (long long)e.k, sep, name, sp, ustr[0] ? sep : "", ustr, extra, eol);
    }
    if (rule >= 0 && (rule != 10 || *ng > 0)) *bad = 1;
    len = put(t, len, line);
    if (rd8(r) % 4 == 0) len = put(t, len, rd8(r) % 2 ? "   # a comment\n" : "\n");
    if (rule < 0 || (rule == 10 && *ng == 0)) g[(*ng)++] = e;
  }
  t[len] = 0;
  return len;
}

/* Up to four edits; returns the new length. */
static size_t edit(reader *r, char *t, size_t len, int edits) {
  static const char chars[] = " \t\n\r#-=.0123456789aeZ\x01\xff";
  for (int i = 0; i < edits; i++) {
    const size_t pos = len ? rd16(r) % (len + 1) : 0;
    const char c = chars[rd8(r) % (sizeof chars)]; /* (sizeof includes the NUL: a NUL byte too) */
    switch (rd8(r) % 6) {
      case 0: /* replace */
        if (pos < len) t[pos] = c;
        break;
      case 1: /* insert */
        if (len + 1 < MAX_TEXT) {
          memmove(t + pos + 1, t + pos, len - pos);
          t[pos] = c;
          len++;
        }
        break;
      case 2: /* delete */
        if (pos < len) {
          memmove(t + pos, t + pos + 1, len - pos - 1);
          len--;
        }
        break;
      case 3: { /* duplicate the line holding pos */
        size_t a = pos, b = pos;
        while (a > 0 && t[a - 1] != '\n') a--;
        while (b < len && t[b] != '\n') b++;
        if (b < len) b++;
        const size_t n = b - a;
        if (n && len + n < MAX_TEXT) {
          memmove(t + b + n, t + b, len - b);
          memcpy(t + b, t + a, n);
          len += n;
        }
        break;
      }
      case 4: /* cut */
        len = pos;
        break;
      default: /* a run of 1100 characters: past the 1023-character line limit */
        if (len + 1100 < MAX_TEXT) {
          memmove(t + pos + 1100, t + pos, len - pos);
          memset(t + pos, 'x', 1100);
          len += 1100;
        }
        break;
    }
  }
  return len;
}

static void check_table(const w8a8_tune_table *t, int with_dev) {
  if (t->count < 0 || t->count > W8A8_TUNE_MAX_ENTRIES) FAIL("count %d", t->count);
  if (with_dev && (strcmp(t->device, dev.name) || t->cc_major != dev.cc_major || t->cc_minor != dev.cc_minor ||
                   t->sms != dev.sms || strncmp(t->lib, dev.lib, strcspn(dev.lib, " ")) ||
                   strlen(t->lib) != strcspn(dev.lib, " ")))
    FAIL("accepted a table of another device or library: lib=%s cc=%d.%d sms=%d device=%s", t->lib, t->cc_major,
         t->cc_minor, t->sms, t->device);
  for (int i = 0; i < t->count; i++) {
    const w8a8_tune_entry *e = &t->e[i];
    int int8 = -1, bn = -1, ms = -1;
    const int ci = resolve(e->name, &int8, &bn, &ms);
    if (ci < 0 || ci != e->config) FAIL("entry %d: configuration \"%s\" resolved to %d, stored %d", i, e->name, ci, e->config);
    if (e->int8 != int8) FAIL("entry %d: dtype %d with configuration \"%s\" of dtype %d", i, e->int8, e->name, int8);
    if (e->swap_bn != bn) FAIL("entry %d: swap tile %d, the configuration's %d", i, e->swap_bn, bn);
    if (e->m_lo < 1 || e->m_hi < e->m_lo || e->m_hi > INT32_MAX) FAIL("entry %d: M %lld-%lld", i, (long long)e->m_lo, (long long)e->m_hi);
    if (e->n < 1 || e->n > INT32_MAX || e->k < 1 || e->k > INT32_MAX) FAIL("entry %d: N %lld K %lld", i, (long long)e->n, (long long)e->k);
    if (bn && e->m_hi > 2 * (int64_t)bn) FAIL("entry %d: swap tile %d up to M %lld", i, bn, (long long)e->m_hi);
    if (e->split < 1 || e->split > ms) FAIL("entry %d: split %d of 1..%d", i, e->split, ms);
    if (!(e->us > 0) || !isfinite(e->us)) FAIL("entry %d: time %g", i, e->us);
    for (int j = 0; j < i; j++) {
      const w8a8_tune_entry *o = &t->e[j];
      if (o->int8 == e->int8 && o->n == e->n && o->k == e->k && o->m_lo <= e->m_hi && e->m_lo <= o->m_hi)
        FAIL("entries %d and %d of one dtype, N and K share an M", j, i);
    }
  }
}

static void check_lookups(reader *r, const w8a8_tune_table *t) {
  for (int q = 0; q < 6; q++) {
    int int8 = (int)(rd8(r) % 2);
    int64_t N = 16 * (int64_t)(1 + rd8(r) % (MAX_GEN + 1)), K = 4096, M = 1 + (int64_t)rd16(r);
    if (t->count && rd8(r) % 2) { /* a query aimed at an entry */
      const w8a8_tune_entry *e = &t->e[rd8(r) % t->count];
      int8 = e->int8, N = e->n, K = e->k;
    }
    if (rd8(r) % 8 == 0) M = rd8(r) % 2 ? 0 : INT32_MAX;
    const w8a8_tune_entry *got = w8a8_tune_lookup(t, int8, M, N, K);
    const w8a8_tune_entry *holds = NULL;
    for (int i = 0; i < t->count; i++) {
      const w8a8_tune_entry *e = &t->e[i];
      if (e->int8 == int8 && e->n == N && e->k == K && M >= e->m_lo && M <= e->m_hi) holds = e;
    }
    if (got && (got < t->e || got >= t->e + t->count)) FAIL("lookup returned a pointer outside the table");
    if (got && (got->int8 != int8 || got->n != N || got->k != K))
      FAIL("lookup of int8=%d N=%lld K=%lld returned an entry of int8=%d N=%lld K=%lld", int8, (long long)N,
           (long long)K, got->int8, (long long)got->n, (long long)got->k);
    if (M >= 1 && holds && got != holds) FAIL("lookup of M=%lld missed the entry whose bucket holds it", (long long)M);
    if (M < 1 && got) FAIL("lookup of M=%lld returned an entry", (long long)M);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  reader r = {data, size};
  static char text[MAX_TEXT + 1];
  gen_entry g[MAX_GEN];
  int ng = 0, bad = 0;
  size_t len = generate(&r, text, g, &ng, &bad);
  const int edits = (int)(rd8(&r) % 5);
  const int with_dev = rd8(&r) % 4 != 0;
  if (edits) len = edit(&r, text, len, edits);
  w8a8_tune_table *const sentinel = (w8a8_tune_table *)(uintptr_t)0x5a5a;
  w8a8_tune_table *t = sentinel;
  w8a8_clear_error();
  const w8a8_status s = w8a8_tune_parse(fn, "fuzz.tune", text, len, with_dev ? &dev : NULL, resolve, &t);
  if (!edits && bad && s == W8A8_SUCCESS) FAIL("a table with an entry that breaks a rule was accepted:\n%.*s", (int)len, text);
  if (!edits && bad && s != W8A8_ERROR_INVALID_FILE) FAIL("a table with a bad entry: %s, not INVALID_FILE", w8a8_status_name(s));
  if (s != W8A8_SUCCESS) {
    if (!edits && !bad) FAIL("the generated table was refused: %s: %s", w8a8_status_name(s), w8a8_last_error());
    if (s != W8A8_ERROR_INVALID_FILE && s != W8A8_ERROR_STALE_TUNING && s != W8A8_ERROR_OUT_OF_MEMORY)
      FAIL("status %s", w8a8_status_name(s));
    if (strncmp(w8a8_last_error(), fn, strlen(fn)) != 0) FAIL("the message does not name the call: %s", w8a8_last_error());
    if (t != sentinel) FAIL("the output was written by a failed parse");
    return 0;
  }
  if (!t || t == sentinel) FAIL("success without a table");
  check_table(t, with_dev);
  if (!edits) {
    if (t->count != ng) FAIL("%d entries generated, %d parsed", ng, t->count);
    for (int i = 0; i < ng; i++) {
      const w8a8_tune_entry *e = &t->e[i];
      if (e->config != g[i].cfg || e->split != g[i].split || e->m_lo != g[i].lo || e->m_hi != g[i].hi ||
          e->n != g[i].n || e->k != g[i].k)
        FAIL("entry %d parsed as config %d split %d M %lld-%lld N %lld K %lld; generated %d %d %lld-%lld %lld %lld", i,
             e->config, e->split, (long long)e->m_lo, (long long)e->m_hi, (long long)e->n, (long long)e->k, g[i].cfg,
             g[i].split, (long long)g[i].lo, (long long)g[i].hi, (long long)g[i].n, (long long)g[i].k);
    }
  }
  check_lookups(&r, t);
  w8a8_tune_free(t);
  return 0;
}
