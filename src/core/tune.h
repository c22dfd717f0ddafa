/* tune.h — tuning tables of the Hopper path: what `w8a8 tune` writes and the library loads.
 *
 * Format (text, version 1). Blank lines and lines whose first non-blank character is '#' are
 * ignored. The first other line is the header; every later line is one entry.
 *
 *   w8a8-tune 1 lib=0.1.0 cc=9.0 sms=132 device=NVIDIA H200
 *   # dtype  M      N      K     config               split  us
 *   int8     1      28672  4096  int8_swap_n8         1      22.41
 *   fp8      17-32  6144   4096  fp8_swap_n32         5      31.02
 *   fp8      4096   6144   4096  fp8_128x128_promote  1      48.10
 *
 * Header: the magic word, the format version, then key=value fields in this order: lib (the
 * library version that measured it, w8a8_version_string()), cc (compute capability), sms
 * (multiprocessor count), device (the device name: the rest of the line). A table is stale —
 * refused as a whole — when any of the four differs from the handle's library and device.
 * Entry: dtype (int8 | fp8), M (an exact token count, or an inclusive bucket lo-hi), N, K
 * (1 .. 2^31-1), the configuration's name from the sm90 table (src/cuda/sm90_configs.h), the
 * split-K factor (1 for configurations without split-K, else 1..8), and the time measured
 * in microseconds (> 0; informative: the loader does not use it). A swap-AB configuration
 * must cover only M up to two of its token tiles (e.g. fp8_swap_n16 up to M = 32: the built-in
 * heuristic uses two n16 tiles at 17..32 tokens). Two entries of one dtype, N and K may not share
 * an M. Anything else — a wrong field count, a number that does not parse, an unknown
 * configuration, a line over 1023 characters — makes the whole file malformed.
 *
 * Size limits: at most W8A8_TUNE_MAX_ENTRIES (100,000) entries and W8A8_TUNE_MAX_BYTES (8 MiB)
 * of file; more is malformed. Loading sorts the entries once (O(n log n): a full table loads in
 * under 0.1 s), and a lookup is a binary search.
 *
 * Lookup for a problem (dtype, M, N, K): the entry of that dtype, N and K whose M bucket
 * holds M; else, among the entries of that dtype, N and K whose configuration can take M,
 * the one whose bucket is nearest to M in ratio (ties: the smaller M); else none (the
 * built-in heuristic decides).
 */
#ifndef W8A8_TUNE_H
#define W8A8_TUNE_H

#include "internal.h"

#ifdef __cplusplus
extern "C" {
#endif

#define W8A8_TUNE_MAGIC "w8a8-tune"
#define W8A8_TUNE_FORMAT 1
#define W8A8_TUNE_MAX_LINE 1024
#define W8A8_TUNE_MAX_BYTES ((size_t)8 << 20)
#define W8A8_TUNE_MAX_ENTRIES 100000

typedef struct w8a8_tune_entry {
  int int8;            /* 1: int8, 0: fp8 e4m3 */
  int64_t m_lo, m_hi;  /* inclusive */
  int64_t n, k;
  int config;          /* index into the sm90 configuration table */
  int swap_bn;         /* the configuration's token tile if it is swap-AB, else 0 */
  int split;
  double us;
  char name[40];
} w8a8_tune_entry;

typedef struct w8a8_tune_table {
  int count;
  w8a8_tune_entry *e;  /* in the file's order */
  int *order;          /* indices into e sorted by dtype, N, K, M (w8a8_tune_parse); NULL: lookups scan e */
  char lib[32];
  char device[128];
  int cc_major, cc_minor, sms;
} w8a8_tune_table;

/* What a table must have been measured on. */
typedef struct w8a8_tune_device {
  const char *lib;     /* library version string */
  const char *name;    /* device name */
  int cc_major, cc_minor, sms;
} w8a8_tune_device;

/* Resolve a configuration name: its index (or -1 if unknown), dtype, swap token tile (0 if not
 * swapped) and largest split. The library passes w8a8_sm90_config_lookup; tests pass their own. */
typedef int (*w8a8_tune_resolver)(const char *name, int *int8, int *swap_bn, int *max_split);
W8A8_HIDDEN int w8a8_sm90_config_lookup(const char *name, int *int8, int *swap_bn, int *max_split);

/* Parse and validate `len` bytes of table text. `fn` names the public call and `what` the
 * source (a path) in messages. On success *out is a new table (w8a8_tune_free it).
 * @return W8A8_ERROR_INVALID_FILE (malformed: the message names the line and what is wrong),
 *         W8A8_ERROR_STALE_TUNING (measured on another library version or device),
 *         W8A8_ERROR_OUT_OF_MEMORY. Nothing is allocated on failure. */
W8A8_HIDDEN w8a8_status w8a8_tune_parse(const char *fn, const char *what, const char *text, size_t len,
                                        const w8a8_tune_device *dev, w8a8_tune_resolver resolve,
                                        w8a8_tune_table **out);
/* Read `path` (at most W8A8_TUNE_MAX_BYTES) and parse it. A file that cannot be opened or read
 * is W8A8_ERROR_INVALID_FILE. */
W8A8_HIDDEN w8a8_status w8a8_tune_read_file(const char *fn, const char *path, const w8a8_tune_device *dev,
                                            w8a8_tune_resolver resolve, w8a8_tune_table **out);
W8A8_HIDDEN const w8a8_tune_entry *w8a8_tune_lookup(const w8a8_tune_table *t, int int8, int64_t M, int64_t N,
                                                    int64_t K);
W8A8_HIDDEN void w8a8_tune_free(w8a8_tune_table *t);
/* The header line (with its newline) for a device, as `w8a8 tune` writes it; snprintf's return. */
W8A8_HIDDEN int w8a8_tune_format_header(char *buf, size_t size, const w8a8_tune_device *dev);
/* At the creation of a CUDA handle (by `fn`, the public call made): load W8A8_TUNE_FILE if it is
 * set; on failure one line on stderr, the handle keeps the built-in heuristic, and the last error
 * is cleared. */
W8A8_HIDDEN void w8a8_tune_load_env(const char *fn, w8a8_handle *h);

#ifdef __cplusplus
}
#endif
#endif
