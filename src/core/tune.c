/* tune.c — tuning tables of the Hopper path: parser, validation, lookup, and the public
 * w8a8_load_tuning. The format is documented in tune.h. Pure C with no CUDA: the parser is
 * tested on the CPU (tests/test_tune.c) with a resolver of its own. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "knobs.h"
#include "tune.h"

/* ---- small parsing helpers --------------------------------------------------------------- */

/* Next whitespace-separated token of [*p, end): its start and length; 0 at the end. */
static int next_token(const char **p, const char *end, const char **tok, size_t *tlen) {
  const char *s = *p;
  while (s < end && (*s == ' ' || *s == '\t')) s++;
  if (s >= end) {
    *p = s;
    return 0;
  }
  const char *t = s;
  while (s < end && *s != ' ' && *s != '\t') s++;
  *tok = t;
  *tlen = (size_t)(s - t);
  *p = s;
  return 1;
}

/* A decimal integer in lo .. hi (hi < 10^10) spanning the whole token. */
static int parse_int(const char *tok, size_t len, int64_t lo, int64_t hi, int64_t *v) {
  if (len == 0 || len > 10) return 0;
  int64_t x = 0;
  for (size_t i = 0; i < len; i++) {
    if (tok[i] < '0' || tok[i] > '9') return 0;
    x = x * 10 + (tok[i] - '0');
  }
  if (x < lo || x > hi) return 0;
  *v = x;
  return 1;
}
static int parse_dim(const char *tok, size_t len, int64_t *v) { return parse_int(tok, len, 1, INT32_MAX, v); }

static int tok_eq(const char *tok, size_t len, const char *word) {
  return strlen(word) == len && memcmp(tok, word, len) == 0;
}

/* Print at most 40 characters of a token into a message (tokens hold no NUL or newline). */
#define TOK_FMT "%.*s"
#define TOK_ARG(t, l) (int)((l) > 40 ? 40 : (l)), (t)

typedef struct tune_ctx {
  const char *fn, *what;
  int line;
} tune_ctx;

static w8a8_status malformed(const tune_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static w8a8_status malformed(const tune_ctx *c, const char *fmt, ...) {
  char detail[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  return w8a8_err(W8A8_ERROR_INVALID_FILE, "%s: tuning table %s, line %d: %s", c->fn, c->what, c->line, detail);
}

/* The header: "w8a8-tune 1 lib=V cc=MAJ.MIN sms=N device=NAME...". */
static w8a8_status parse_header(const tune_ctx *c, const char *s, const char *end, w8a8_tune_table *t) {
  const char *tok;
  size_t len;
  if (!next_token(&s, end, &tok, &len) || !tok_eq(tok, len, W8A8_TUNE_MAGIC))
    return malformed(c, "the first line is not a w8a8 tuning table header (\"%s %d lib=... cc=... sms=... device=...\")",
                     W8A8_TUNE_MAGIC, W8A8_TUNE_FORMAT);
  int64_t ver;
  if (!next_token(&s, end, &tok, &len) || !parse_int(tok, len, 0, 1000000, &ver))
    return malformed(c, "the header has no format version after \"%s\"", W8A8_TUNE_MAGIC);
  if (ver != W8A8_TUNE_FORMAT)
    return malformed(c, "format version %lld; this library reads version %d", (long long)ver, W8A8_TUNE_FORMAT);
  /* lib= */
  if (!next_token(&s, end, &tok, &len) || len < 5 || memcmp(tok, "lib=", 4) != 0 || len - 4 >= sizeof t->lib)
    return malformed(c, "the header's third field must be lib=<library version>");
  memcpy(t->lib, tok + 4, len - 4);
  t->lib[len - 4] = 0;
  /* cc= */
  if (!next_token(&s, end, &tok, &len) || len < 6 || memcmp(tok, "cc=", 3) != 0)
    return malformed(c, "the header's fourth field must be cc=<major>.<minor>");
  {
    const char *dot = memchr(tok + 3, '.', len - 3);
    int64_t maj, min;
    if (!dot || !parse_int(tok + 3, (size_t)(dot - tok - 3), 1, 99, &maj) ||
        !parse_int(dot + 1, (size_t)(tok + len - dot - 1), 0, 99, &min))
      return malformed(c, "cc=" TOK_FMT " is not <major>.<minor>", TOK_ARG(tok + 3, len - 3));
    t->cc_major = (int)maj;
    t->cc_minor = (int)min;
  }
  /* sms= */
  int64_t sms;
  if (!next_token(&s, end, &tok, &len) || len < 5 || memcmp(tok, "sms=", 4) != 0 ||
      !parse_int(tok + 4, len - 4, 1, 100000, &sms))
    return malformed(c, "the header's fifth field must be sms=<multiprocessor count>");
  t->sms = (int)sms;
  /* device=: the rest of the line, trailing blanks dropped */
  while (s < end && (*s == ' ' || *s == '\t')) s++;
  if (end - s < 8 || memcmp(s, "device=", 7) != 0)
    return malformed(c, "the header's last field must be device=<device name>");
  s += 7;
  while (end > s && (end[-1] == ' ' || end[-1] == '\t')) end--;
  if ((size_t)(end - s) >= sizeof t->device) return malformed(c, "the device name is longer than 127 characters");
  memcpy(t->device, s, (size_t)(end - s));
  t->device[end - s] = 0;
  return W8A8_SUCCESS;
}

static w8a8_status parse_entry(const tune_ctx *c, const char *s, const char *end, w8a8_tune_resolver resolve,
                               w8a8_tune_entry *e) {
  const char *tok[8];
  size_t len[8];
  int n = 0;
  while (n < 8 && next_token(&s, end, &tok[n], &len[n])) n++;
  if (n != 7)
    return malformed(c, "%s fields; an entry has 7: dtype M N K config split us", n < 7 ? "too few" : "too many");
  memset(e, 0, sizeof *e);
  if (tok_eq(tok[0], len[0], "int8"))
    e->int8 = 1;
  else if (tok_eq(tok[0], len[0], "fp8"))
    e->int8 = 0;
  else
    return malformed(c, "dtype " TOK_FMT "; expected int8 or fp8", TOK_ARG(tok[0], len[0]));
  const char *dash = memchr(tok[1], '-', len[1]);
  if (dash) {
    if (!parse_dim(tok[1], (size_t)(dash - tok[1]), &e->m_lo) ||
        !parse_dim(dash + 1, (size_t)(tok[1] + len[1] - dash - 1), &e->m_hi) || e->m_hi < e->m_lo)
      return malformed(c, "M " TOK_FMT " is not a count or a bucket lo-hi with 1 <= lo <= hi", TOK_ARG(tok[1], len[1]));
  } else {
    if (!parse_dim(tok[1], len[1], &e->m_lo))
      return malformed(c, "M " TOK_FMT " is not a count in 1..2^31-1", TOK_ARG(tok[1], len[1]));
    e->m_hi = e->m_lo;
  }
  if (!parse_dim(tok[2], len[2], &e->n)) return malformed(c, "N " TOK_FMT " is not a count in 1..2^31-1", TOK_ARG(tok[2], len[2]));
  if (!parse_dim(tok[3], len[3], &e->k)) return malformed(c, "K " TOK_FMT " is not a count in 1..2^31-1", TOK_ARG(tok[3], len[3]));
  if (len[4] >= sizeof e->name) return malformed(c, "configuration name " TOK_FMT "... is too long", TOK_ARG(tok[4], len[4]));
  memcpy(e->name, tok[4], len[4]);
  e->name[len[4]] = 0;
  int cint8 = -1, bn = 0, max_split = 0;
  e->config = resolve(e->name, &cint8, &bn, &max_split);
  if (e->config < 0) return malformed(c, "unknown configuration \"%s\"", e->name);
  if (cint8 != e->int8)
    return malformed(c, "configuration \"%s\" is for %s, the entry for %s", e->name, cint8 ? "int8" : "fp8",
                     e->int8 ? "int8" : "fp8");
  e->swap_bn = bn;
  if (bn && e->m_hi > 2 * (int64_t)bn)
    return malformed(c, "configuration \"%s\" takes M <= %d (two token tiles of %d); the entry covers M up to %lld",
                     e->name, 2 * bn, bn, (long long)e->m_hi);
  int64_t split;
  if (!parse_int(tok[5], len[5], 1, max_split, &split))
    return malformed(c, "split " TOK_FMT "; configuration \"%s\" takes 1..%d", TOK_ARG(tok[5], len[5]), e->name,
                     max_split);
  e->split = (int)split;
  char num[48];
  if (len[6] >= sizeof num) return malformed(c, "time " TOK_FMT "... is too long", TOK_ARG(tok[6], len[6]));
  memcpy(num, tok[6], len[6]);
  num[len[6]] = 0;
  char *stop = NULL;
  errno = 0;
  e->us = strtod(num, &stop);
  if (stop != num + len[6] || errno != 0 || !isfinite(e->us) || !(e->us > 0))
    return malformed(c, "time \"%s\" is not a positive number of microseconds", num);
  return W8A8_SUCCESS;
}

/* ---- overlaps and the sorted order ------------------------------------------------------------- */

/* An entry's sort key: dtype, N, K, then the M bucket (entries of one dtype, N and K never share an M, so within
 * such a group the buckets sorted by m_lo are sorted by m_hi too). */
typedef struct tune_key {
  int64_t n, k, m_lo, m_hi;
  int int8, idx;
} tune_key;

static int key_group_cmp(const tune_key *a, int int8, int64_t n, int64_t k) {
  if (a->int8 != int8) return a->int8 < int8 ? -1 : 1;
  if (a->n != n) return a->n < n ? -1 : 1;
  if (a->k != k) return a->k < k ? -1 : 1;
  return 0;
}

static int key_cmp(const void *pa, const void *pb) {
  const tune_key *a = pa, *b = pb;
  int g = key_group_cmp(a, b->int8, b->n, b->k);
  if (g) return g;
  if (a->m_lo != b->m_lo) return a->m_lo < b->m_lo ? -1 : 1;
  return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/* Sort the keys of entries [0, n) into `keys`; whether two of them share an M. Sorted by m_lo, a group holds an
 * overlapping pair if and only if it holds an overlapping neighbour pair. */
static int sorted_overlap(const w8a8_tune_table *t, int n, tune_key *keys) {
  for (int i = 0; i < n; i++) {
    const w8a8_tune_entry *e = &t->e[i];
    keys[i] = (tune_key){e->n, e->k, e->m_lo, e->m_hi, e->int8, i};
  }
  qsort(keys, (size_t)n, sizeof *keys, key_cmp);
  for (int i = 1; i < n; i++)
    if (!key_group_cmp(&keys[i - 1], keys[i].int8, keys[i].n, keys[i].k) && keys[i - 1].m_hi >= keys[i].m_lo) return 1;
  return 0;
}

/* No two entries of one dtype, N and K may share an M. Where some do, the message names the first line whose
 * entry overlaps an earlier one, and the first such earlier entry (found by bisecting the prefix that first holds
 * an overlap: O(n log^2 n), on failure only). On success t->order holds the entries' indices in key order. */
static w8a8_status check_overlaps(tune_ctx *c, w8a8_tune_table *t, const int *lines) {
  tune_key *keys = malloc(sizeof *keys * (size_t)t->count);
  if (!keys) return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: no memory to check the tuning table", c->fn);
  if (!sorted_overlap(t, t->count, keys)) {
    t->order = malloc(sizeof *t->order * (size_t)t->count);
    if (!t->order) {
      free(keys);
      return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: no memory for the tuning table's index", c->fn);
    }
    for (int i = 0; i < t->count; i++) t->order[i] = keys[i].idx;
    free(keys);
    return W8A8_SUCCESS;
  }
  int lo = 2, hi = t->count; /* the shortest prefix holding an overlap has hi entries; lo - 1 have none */
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (sorted_overlap(t, mid, keys))
      hi = mid;
    else
      lo = mid + 1;
  }
  free(keys);
  const w8a8_tune_entry *e = &t->e[hi - 1];
  for (int i = 0; i < hi - 1; i++) {
    const w8a8_tune_entry *o = &t->e[i];
    if (o->int8 == e->int8 && o->n == e->n && o->k == e->k && o->m_lo <= e->m_hi && e->m_lo <= o->m_hi) {
      c->line = lines[hi - 1];
      return malformed(c, "M %lld-%lld overlaps the entry of line %d (M %lld-%lld) of the same dtype, N and K",
                       (long long)e->m_lo, (long long)e->m_hi, lines[i], (long long)o->m_lo, (long long)o->m_hi);
    }
  }
  return w8a8_err(W8A8_ERROR_INTERNAL, "%s: tuning table %s: an overlap was found and then lost", c->fn, c->what);
}

w8a8_status w8a8_tune_parse(const char *fn, const char *what, const char *text, size_t len, const w8a8_tune_device *dev,
                            w8a8_tune_resolver resolve, w8a8_tune_table **out) {
  tune_ctx c = {fn, what, 0};
  w8a8_tune_table *t = calloc(1, sizeof *t);
  if (!t) return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not allocate the tuning table", fn);
  int cap = 0, have_header = 0;
  int *lines = NULL; /* the line of each entry, for messages */
  w8a8_status s = W8A8_SUCCESS;
  const char *p = text, *end = text + len;
  while (p < end && s == W8A8_SUCCESS) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *le = nl ? nl : end;
    c.line++;
    if (le - p >= W8A8_TUNE_MAX_LINE) {
      s = malformed(&c, "longer than %d characters", W8A8_TUNE_MAX_LINE - 1);
      break;
    }
    if (memchr(p, 0, (size_t)(le - p))) {
      s = malformed(&c, "a NUL byte (not a text file)");
      break;
    }
    const char *q = p, *qe = le;
    if (qe > q && qe[-1] == '\r') qe--; /* CRLF files */
    p = nl ? nl + 1 : end;
    while (q < qe && (*q == ' ' || *q == '\t')) q++;
    if (q == qe || *q == '#') continue;
    if (!have_header) {
      s = parse_header(&c, q, qe, t);
      have_header = 1;
      continue;
    }
    if (t->count == W8A8_TUNE_MAX_ENTRIES) {
      s = malformed(&c, "more than %d entries", W8A8_TUNE_MAX_ENTRIES);
      break;
    }
    if (t->count == cap) {
      int ncap = cap ? 2 * cap : 64;
      if (ncap > W8A8_TUNE_MAX_ENTRIES) ncap = W8A8_TUNE_MAX_ENTRIES;
      w8a8_tune_entry *ne = realloc(t->e, sizeof *ne * (size_t)ncap);
      if (ne) t->e = ne;
      int *nl = ne ? realloc(lines, sizeof *nl * (size_t)ncap) : NULL;
      if (!nl) {
        s = w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: could not grow the tuning table to %d entries", fn, ncap);
        break;
      }
      lines = nl;
      cap = ncap;
    }
    w8a8_tune_entry *e = &t->e[t->count];
    s = parse_entry(&c, q, qe, resolve, e);
    if (s != W8A8_SUCCESS) break;
    lines[t->count++] = c.line;
  }
  /* Overlaps among the entries read: reported before a later malformed line, as a reader going line by
   * line would. The check sorts (O(n log n)); the sorted order then serves the lookups. */
  if (t->count > 0) {
    char saved[512];
    snprintf(saved, sizeof saved, "%s", w8a8_last_error());
    const w8a8_status so = check_overlaps(&c, t, lines);
    if (s == W8A8_SUCCESS || so == W8A8_ERROR_INVALID_FILE)
      s = so;
    else if (so != W8A8_SUCCESS)
      (void)w8a8_err(s, "%s", saved); /* the check could not run: the first error stands */
  }
  free(lines);
  if (s == W8A8_SUCCESS && !have_header)
    s = w8a8_err(W8A8_ERROR_INVALID_FILE, "%s: tuning table %s has no header line (empty file?)", fn, what);
  if (s == W8A8_SUCCESS && dev) {
    /* The version's first word only: w8a8_version_string() goes on with " (features)". */
    const int vn = (int)strcspn(dev->lib, " ");
    if (strlen(t->lib) != (size_t)vn || memcmp(t->lib, dev->lib, (size_t)vn) != 0)
      s = w8a8_err(W8A8_ERROR_STALE_TUNING, "%s: tuning table %s was measured with libw8a8 %s; this is %.*s: run w8a8 tune again",
                   fn, what, t->lib, vn, dev->lib);
    else if (strcmp(t->device, dev->name) != 0)
      s = w8a8_err(W8A8_ERROR_STALE_TUNING, "%s: tuning table %s was measured on \"%s\"; this device is \"%s\"", fn, what,
                   t->device, dev->name);
    else if (t->cc_major != dev->cc_major || t->cc_minor != dev->cc_minor)
      s = w8a8_err(W8A8_ERROR_STALE_TUNING, "%s: tuning table %s was measured on compute capability %d.%d; this device is %d.%d",
                   fn, what, t->cc_major, t->cc_minor, dev->cc_major, dev->cc_minor);
    else if (t->sms != dev->sms)
      s = w8a8_err(W8A8_ERROR_STALE_TUNING, "%s: tuning table %s was measured with %d SMs; this device has %d", fn, what,
                   t->sms, dev->sms);
  }
  if (s != W8A8_SUCCESS) {
    w8a8_tune_free(t);
    return s;
  }
  *out = t;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_tune_read_file(const char *fn, const char *path, const w8a8_tune_device *dev,
                                w8a8_tune_resolver resolve, w8a8_tune_table **out) {
  FILE *f = fopen(path, "rb");
  if (!f) return w8a8_err(W8A8_ERROR_INVALID_FILE, "%s: cannot open tuning table %s: %s", fn, path, strerror(errno));
  char *buf = malloc(W8A8_TUNE_MAX_BYTES + 1);
  if (!buf) {
    fclose(f);
    return w8a8_err(W8A8_ERROR_OUT_OF_MEMORY, "%s: no memory to read %s", fn, path);
  }
  size_t n = fread(buf, 1, W8A8_TUNE_MAX_BYTES + 1, f);
  int bad = ferror(f);
  fclose(f);
  w8a8_status s;
  if (bad)
    s = w8a8_err(W8A8_ERROR_INVALID_FILE, "%s: cannot read tuning table %s (a directory, or an I/O error)", fn, path);
  else if (n > W8A8_TUNE_MAX_BYTES)
    s = w8a8_err(W8A8_ERROR_INVALID_FILE, "%s: tuning table %s is larger than %zu bytes", fn, path, W8A8_TUNE_MAX_BYTES);
  else
    s = w8a8_tune_parse(fn, path, buf, n, dev, resolve, out);
  free(buf);
  return s;
}

/* Whether entry e may serve M from outside its bucket: only configurations that take M in one token tile (an exact
 * bucket may hold up to two tiles: the loader allows it, and the tuner measured it). */
static int takes_from_outside(const w8a8_tune_entry *e, int64_t M) { return !e->swap_bn || M <= e->swap_bn; }

/* The nearer of two candidate buckets in ratio (ties: the smaller M); either may be NULL. */
static const w8a8_tune_entry *nearer(const w8a8_tune_entry *a, const w8a8_tune_entry *b, int64_t M) {
  if (!a || !b) return a ? a : b;
  const double ra = M < a->m_lo ? (double)a->m_lo / (double)M : (double)M / (double)a->m_hi;
  const double rb = M < b->m_lo ? (double)b->m_lo / (double)M : (double)M / (double)b->m_hi;
  return rb < ra || (rb == ra && b->m_lo < a->m_lo) ? b : a;
}

const w8a8_tune_entry *w8a8_tune_lookup(const w8a8_tune_table *t, int int8, int64_t M, int64_t N, int64_t K) {
  if (!t || M < 1) return NULL;
  if (!t->order) { /* a table not made by w8a8_tune_parse: every entry in turn */
    const w8a8_tune_entry *best = NULL;
    for (int i = 0; i < t->count; i++) {
      const w8a8_tune_entry *e = &t->e[i];
      if (e->int8 != int8 || e->n != N || e->k != K) continue;
      if (M >= e->m_lo && M <= e->m_hi) return e;
      if (takes_from_outside(e, M)) best = nearer(best, e, M);
    }
    return best;
  }
  /* The group of (dtype, N, K) in key order, and in it the first bucket starting above M. */
  const int *ord = t->order;
  int a = 0, b = t->count;
  while (a < b) { /* first position whose key is >= (int8, N, K, M + 1) */
    const int mid = a + (b - a) / 2;
    const w8a8_tune_entry *e = &t->e[ord[mid]];
    int g = e->int8 != int8 ? (e->int8 < int8 ? -1 : 1) : e->n != N ? (e->n < N ? -1 : 1) : e->k != K ? (e->k < K ? -1 : 1) : 0;
    if (g < 0 || (g == 0 && e->m_lo <= M))
      a = mid + 1;
    else
      b = mid;
  }
#define W8A8_IN_GROUP(i) (t->e[ord[i]].int8 == int8 && t->e[ord[i]].n == N && t->e[ord[i]].k == K)
  const w8a8_tune_entry *below = NULL, *above = NULL;
  /* buckets below M, nearest first (m_hi grows with m_lo inside a group) */
  for (int i = a - 1; i >= 0 && W8A8_IN_GROUP(i); i--) {
    const w8a8_tune_entry *e = &t->e[ord[i]];
    if (M <= e->m_hi) return e; /* the bucket that holds M */
    if (takes_from_outside(e, M)) {
      below = e;
      break;
    }
  }
  for (int i = a; i < t->count && W8A8_IN_GROUP(i); i++) {
    const w8a8_tune_entry *e = &t->e[ord[i]];
    if (takes_from_outside(e, M)) {
      above = e;
      break;
    }
  }
#undef W8A8_IN_GROUP
  return nearer(below, above, M);
}

void w8a8_tune_free(w8a8_tune_table *t) {
  if (!t) return;
  free(t->order);
  free(t->e);
  free(t);
}

int w8a8_tune_format_header(char *buf, size_t size, const w8a8_tune_device *dev) {
  /* lib= takes the version's first word (w8a8_version_string() goes on with " (features)"; the
   * GPU run of 2026-11-29 wrote a header its own reader refused). */
  return snprintf(buf, size, "%s %d lib=%.*s cc=%d.%d sms=%d device=%s\n", W8A8_TUNE_MAGIC, W8A8_TUNE_FORMAT,
                  (int)strcspn(dev->lib, " "), dev->lib, dev->cc_major, dev->cc_minor, dev->sms, dev->name);
}

/* ---- the public call and the environment variable ---------------------------------------------- */

static w8a8_status load(const char *fn, w8a8_handle *h, const char *path) {
  if (h->kind != W8A8_DEVICE_CUDA)
    return w8a8_err(W8A8_ERROR_UNSUPPORTED_DEVICE, "%s: tuning tables are for CUDA handles (the sm_90a path); this is a CPU handle", fn);
  w8a8_handle_info info;
  memset(&info, 0, sizeof info);
  W8A8_CHECK(w8a8_cuda_get_info(h, &info));
  w8a8_tune_device dev = {w8a8_version_string(), info.name, info.cc_major, info.cc_minor, info.num_sms};
  w8a8_tune_table *t = NULL;
  W8A8_CHECK(w8a8_tune_read_file(fn, path, &dev, w8a8_sm90_config_lookup, &t));
  w8a8_tune_free((w8a8_tune_table *)h->tuning);
  h->tuning = t;
  return W8A8_SUCCESS;
}

w8a8_status w8a8_load_tuning(w8a8_handle *h, const char *path) {
  static const char fn[] = "w8a8_load_tuning";
  w8a8_clear_error();
  W8A8_CHECK(w8a8_check_handle(fn, h));
  if (!path) {
    w8a8_tune_free((w8a8_tune_table *)h->tuning);
    h->tuning = NULL;
    return W8A8_SUCCESS;
  }
  return load(fn, h, path);
}

void w8a8_tune_load_env(const char *fn, w8a8_handle *h) {
  const char *path = w8a8_knob_str(W8A8_KNOB_TUNE_FILE);
  if (!path || !path[0]) return;
  if (load(fn, h, path) != W8A8_SUCCESS)
    fprintf(stderr, "w8a8: warning: W8A8_TUNE_FILE ignored: %s\n", w8a8_last_error());
  w8a8_clear_error();
}
