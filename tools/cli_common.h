/* cli_common.h — helpers shared by the `w8a8` command-line tool (tools/w8a8.c, tools/bench.c):
 * random data, bf16/fp16/fp8 conversions, timers, memory on the handle's device, output
 * comparison against the reference, argument parsing and JSON strings.
 *
 * The CLI is a client of the public API: nothing here includes src/ headers, so the
 * conversions below are our own (written to round exactly as the header says). */
#ifndef W8A8_CLI_COMMON_H
#define W8A8_CLI_COMMON_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "w8a8.h"

/* ---- exit codes ---------------------------------------------------------------- */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1  /* a wrong result, or a failed library call */
#define CLI_EXIT_USAGE 2 /* bad command line */

/* ---- random numbers (splitmix64: tiny, seedable per chunk, good enough for test data) */
typedef struct cli_rng {
  uint64_t s;
} cli_rng;
static inline cli_rng cli_rng_make(uint64_t seed, uint64_t stream) {
  cli_rng r = {seed * 0x9e3779b97f4a7c15ull + stream * 0xd1b54a32d192ed03ull + 1};
  return r;
}
static inline uint64_t cli_rng_u64(cli_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
/* uniform in [0, 1) */
static inline float cli_rng_unit(cli_rng *r) { return (float)(cli_rng_u64(r) >> 40) * 0x1p-24f; }
/* approximately N(0, 1): Irwin-Hall sum of 4 uniforms, rescaled (cheap, bounded at +-3.46) */
static inline float cli_rng_normal(cli_rng *r) {
  uint64_t u = cli_rng_u64(r);
  float s = (float)(u & 0xffff) + (float)((u >> 16) & 0xffff) + (float)((u >> 32) & 0xffff) + (float)(u >> 48);
  return (s * 0x1p-16f - 2.0f) * 1.7320508f;
}
static inline int64_t cli_rng_range(cli_rng *r, int64_t lo, int64_t hi) { /* [lo, hi] */
  return lo + (int64_t)(cli_rng_u64(r) % (uint64_t)(hi - lo + 1));
}

/* Fill n bf16 values ~ N(0, sigma^2) (OpenMP, deterministic for a given seed). */
void cli_fill_bf16_normal(uint16_t *x, int64_t n, float sigma, uint64_t seed);

/* ---- number formats ------------------------------------------------------------- */
float cli_bf16_to_f32(uint16_t h);
uint16_t cli_f32_to_bf16(float f); /* RNE */
float cli_f16_to_f32(uint16_t h);
uint16_t cli_f32_to_f16(float f); /* RNE */
float cli_fp8_to_f32(uint8_t v);  /* e4m3fn */
/* element i of a bf16/fp16/fp32 array as double */
double cli_load_float(w8a8_dtype t, const void *base, int64_t i);
/* store f (fp32) into element i of a bf16/fp16/fp32 array, rounding once */
void cli_store_float(w8a8_dtype t, void *base, int64_t i, float f);
/* distance between x and the next representable value of the output dtype, at |x| */
double cli_ulp(w8a8_dtype t, double x);

/* ---- time ------------------------------------------------------------------------ */
double cli_now_us(void);
double cli_median(double *v, int n); /* sorts v */
void cli_iso_date(char *buf, size_t n);     /* "2026-11-29" (UTC) */
void cli_iso_datetime(char *buf, size_t n); /* "2026-11-29T14:57:54Z" */
void cli_hostname(char *buf, size_t n);

/* ---- memory of the handle's device -------------------------------------------------
 * A CPU handle gets host memory; a CUDA handle gets cudaMalloc'ed memory (in a build with
 * CUDA). These let one code path drive either backend. */
typedef struct cli_dev {
  w8a8_device_kind kind;
  int index;
} cli_dev;
cli_dev cli_dev_of(const w8a8_handle *h);
void *cli_dev_alloc(cli_dev d, size_t bytes); /* NULL (message on stderr) on failure; 0 bytes ok */
void cli_dev_free(cli_dev d, void *p);
int cli_dev_upload(cli_dev d, void *dst, const void *src, size_t bytes);
int cli_dev_download(cli_dev d, void *dst, const void *src, size_t bytes);
int cli_dev_memset(cli_dev d, void *dst, int byte, size_t bytes);
int cli_dev_sync(cli_dev d); /* wait for the device (legacy stream); 0 on success */

/* The spread of a set of timings: the 20th, 50th and 80th percentiles (linear interpolation between order
 * statistics, as numpy's default), n samples; p50 < 0 marks a failed measurement. Reporting p20 / p80 beside
 * the median shows whether two medians differ by more than the noise of either. */
typedef struct cli_stats {
  double p20, p50, p80;
  int n;
} cli_stats;
cli_stats cli_stats_of(double *v, int n); /* sorts v; n <= 0: all -1 */
cli_stats cli_stats_failed(void);
double cli_percentile(const double *sorted, int n, double p); /* p in [0, 1] */

/* Microseconds per call of fn(arg) on the device: `warmup` untimed calls, then `iters` timed ones
 * (CUDA events around each call on the legacy stream for CUDA; wall clock for the CPU); the
 * percentiles over the timed calls. p50 = -1 if a call failed. */
typedef int (*cli_call_fn)(void *arg);
cli_stats cli_time_calls(cli_dev d, cli_call_fn fn, void *arg, int warmup, int iters);

/* ---- comparing outputs with the reference ------------------------------------------ */
typedef struct cli_cmp {
  int64_t checked;    /* elements compared */
  int64_t wrong;      /* elements outside the tolerance (bitwise mismatches for exact checks) */
  double max_abs;     /* max |got - ref| */
  double max_rel;     /* max |got - ref| / |ref| over elements with ref != 0 */
  int64_t bad_m, bad_n; /* first wrong element */
  double bad_got, bad_ref, bad_tol;
} cli_cmp;
void cli_cmp_init(cli_cmp *c);

/* Bitwise comparison of two [rows, cols] row-major outputs (int8 GEMMs: exact). */
void cli_compare_exact(w8a8_dtype od, const void *got, int64_t ldg, const void *ref, int64_t ldr, int64_t rows,
                       int64_t cols, cli_cmp *c);

/* fp8 GEMM: the header fixes fp32 accumulation but not its order, so two correct
 * implementations differ by at most the rounding of two different summation orders:
 *   |got - ref| <= |sa sb| * eps(K) * sum_k |a_k b_k| + ulp_out
 * with eps(K) = max(2 K 2^-24, 2^-12) (the floor leaves room for tensor cores that
 * align addends to ~14 bits inside one MMA; a missing or doubled term is still far
 * outside it at the K the self-test uses). a: host fp8 [rows, K] (lda), b: host fp8
 * [N, K] (ldb), scales as given to scaled_mm (sa_len 1 or rows, sb_len 1 or N). */
void cli_compare_fp8(const uint8_t *a, int64_t lda, const uint8_t *b, int64_t ldb, int64_t rows, int64_t N,
                     int64_t K, const float *sa, int64_t sa_len, const float *sb, int64_t sb_len, w8a8_dtype od,
                     const void *got, int64_t ldg, const void *ref, int64_t ldr, cli_cmp *c);

/* ---- command-line parsing ------------------------------------------------------------ */
/* Every command parses with getopt_long from one table of cli_opt; the same table prints the options
 * part of its --help, so the two cannot drift apart. The vocabulary (the same name means the same
 * thing in every command) is in docs/CLI.md. */
typedef struct cli_opt {
  int id;             /* what cli_next_opt returns: the short option's character, or a value >= 256 */
  const char *lng;    /* long name without "--", NULL: none */
  char shrt;          /* short alias, 0: none */
  const char *arg;    /* the value's name in --help ("LIST"); NULL: a flag */
  const char *help;   /* --help text ('\n' continues it on an indented line); NULL: hidden (an old
                       * spelling kept only to say what replaced it) */
} cli_opt;

enum { CLI_OPT_END = -1, CLI_OPT_ERROR = -2, CLI_OPT_HELP = -3 };
#define CLI_MAX_OPTS 48

typedef struct cli_parser {
  const char *cmd; /* "bench": messages start "w8a8 bench: " */
  const cli_opt *opts;
  int nopts;
  int argc;
  char **argv;
  int quiet;            /* report nothing (the other ranks under mpirun) */
  const char *spelling; /* how the user wrote the option last returned: "--iters", "-i" */
  int first_positional; /* after CLI_OPT_END: argv index of the first non-option argument (argc: none) */
  char name_buf[64];
  char optstring[2 * CLI_MAX_OPTS + 4];
  void *longopts; /* struct option[CLI_MAX_OPTS + 2] (getopt.h stays out of this header) */
} cli_parser;

/* argv[0] is the command's name (argv[1..] its options). quiet: see cli_parser. */
void cli_parser_init(cli_parser *p, const char *cmd, const cli_opt *opts, int nopts, int argc, char **argv);
void cli_parser_free(cli_parser *p);
/* The next option: its id (*val its value, NULL for a flag), CLI_OPT_HELP for -h / --help, CLI_OPT_END,
 * or CLI_OPT_ERROR after the one-line message (unknown option, a missing value, a flag given one). */
int cli_next_opt(cli_parser *p, const char **val);
/* The one-line error of a bad command line, "w8a8 <cmd>: <message>; see 'w8a8 <cmd> --help'", on
 * stderr unless p->quiet. Returns CLI_EXIT_USAGE. */
int cli_usage_error(const cli_parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Values of the option last returned, checked whole; on a bad one the one-line error
 * "<spelling> takes <range> <what>, got '<v>'" and false. */
bool cli_opt_i64(cli_parser *p, const char *v, int64_t lo, int64_t hi, const char *what, int64_t *out);
bool cli_opt_int(cli_parser *p, const char *v, int lo, int hi, const char *what, int *out);
/* a comma list of up to max integers in [lo, hi]: the count, or -1 after the error */
int cli_opt_list(cli_parser *p, const char *v, int64_t lo, int64_t hi, int max, const char *what, int64_t *out);
/* one of `choices` (NULL-terminated): its index, or -1 after "<spelling> takes a, b or c, got 'v'" */
int cli_opt_choice(cli_parser *p, const char *v, const char *const *choices);
/* The options part of --help: "  -i, --iters N    text", one per line, then -h, --help. */
void cli_print_options(FILE *f, const cli_opt *opts, int nopts);


/* Strict integer parse: the whole string, base 10, within [lo, hi]. */
bool cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* "1,16,64" -> up to max values within [lo, hi]; returns the count, or -1 on bad input. */
int cli_parse_i64_list(const char *s, int64_t lo, int64_t hi, int64_t *out, int max);
/* A comma list with no empty item: non-empty, no leading or trailing comma, no ",," (strtok would skip
 * empty items silently). */
bool cli_list_ok(const char *s);
/* Under mpirun every rank parses the same command line: whether this process reports its errors (rank 0
 * by the launchers' rank variables; none set: a process of its own, which does). */
bool cli_reporting_rank(void);
/* "bf16" | "fp16" | "fp32" -> dtype, else W8A8_DTYPE_INVALID */
w8a8_dtype cli_parse_out_dtype(const char *s);

/* ---- output: the table and the JSON lines ---------------------------------------------------
 * -o FILE writes the JSON lines to FILE and the table to stdout; -o - (or --json) writes the JSON
 * lines to stdout, and the table moves to stderr so that `w8a8 bench --json | jq` reads JSON only. */
extern FILE *cli_tab_; /* NULL: stdout (stdout is no constant to initialise it with) */
#define cli_tab (cli_tab_ ? cli_tab_ : stdout) /* where the human-readable table goes */
/* Open -o's path ("-" = stdout; NULL = no JSON: *out = NULL). Returns 0, or -1 after
 * "w8a8 <cmd>: -o: cannot open 'P' for writing: <reason>". */
int cli_out_open(const char *cmd, const char *path, FILE **out);
/* Close what cli_out_open opened (stdout is flushed, not closed): 0, or -1 after a message naming the
 * path when anything was not written (a full disk). */
int cli_out_close(const char *cmd, const char *path, FILE *out);

/* ---- JSON ------------------------------------------------------------------------------ */
/* Write s as a JSON string literal (quotes included): '"', '\\' and control characters escaped, valid
 * UTF-8 passed through, and each byte of an invalid UTF-8 sequence written as U+FFFD (a JSON text is
 * UTF-8: a device name with a stray Latin-1 byte would otherwise make the whole line unreadable). */
void cli_json_str(FILE *f, const char *s);

/* One JSON object on one line, written key by key. */
typedef struct cli_jw {
  FILE *f;
  int n; /* keys written */
} cli_jw;
void cli_jw_begin(cli_jw *w, FILE *f);
void cli_jw_str(cli_jw *w, const char *key, const char *v); /* NULL: null */
void cli_jw_num(cli_jw *w, const char *key, double v);     /* not finite: null */
void cli_jw_int(cli_jw *w, const char *key, int64_t v);
void cli_jw_bool(cli_jw *w, const char *key, int v);
void cli_jw_null(cli_jw *w, const char *key);
void cli_jw_end(cli_jw *w); /* "}\n", flushed */

/* The JSON-lines schema of every command that measures (docs/CLI.md): the first line is a header
 * object, then one "row" object per measured row. */
#define CLI_JSON_SCHEMA 1
void cli_json_header(FILE *f, const char *command, int argc, char **argv);
/* The fields every row has. M, N, K < 0: null (a row without that dimension); kernel / config NULL: null;
 * flops: floating-point operations per call, for "tflops" at p50 (0: null). */
typedef struct cli_row {
  const char *command, *impl, *op, *device, *device_kind, *dtype;
  int64_t M, N, K;
  const char *kernel, *config;
  int split_k; /* 0: unknown (null) */
  int iters, warmup;
  cli_stats t; /* microseconds */
  double flops;
  long wrong;
} cli_row;
/* Writes '{"type":"row", ...common fields' into w (open): the caller adds its own keys, then cli_jw_end. */
void cli_json_row_begin(cli_jw *w, FILE *f, const cli_row *r);

/* ---- what the library chose ---------------------------------------------------------------- */
/* The kernel and plan of the handle's last GEMM (w8a8_get_last_launch), for the "kernel" / "config" columns. */
typedef struct cli_launch {
  char kernel[64];  /* "sm90", "mma", "gemv", "cpu-avx2", ...; the path asked for when unknown ("auto") */
  char config[64];  /* the sm90 configuration, "" when none */
  int split_k;      /* 1: none; 0: unknown */
  int known;        /* 1: what ran; 0: only what was asked for */
} cli_launch;
void cli_last_launch(const w8a8_handle *h, const char *requested, cli_launch *out);
/* A setting's value as the library reads it (w8a8_get_setting): a user setting "TP_TIMEOUT_S" or a development
 * switch "TP_AG_PIECES"; NULL when the library has no such setting. */
const char *cli_setting(const char *name);

/* n random int8 values in [-128, 127], or fp8 e4m3 bytes that are not NaN with magnitudes <= 16 (so sums
 * stay well inside fp32 and bf16), reproducible from seed; OpenMP-parallel. */
void cli_fill_8bit(uint8_t *p, size_t n, int fp8, uint64_t seed);

/* ---- sampled verification ------------------------------------------------------------------- */
/* Check rows `rows[0..nrows)` of a host output `got` [M, N] (ldg) of scaled_mm against the
 * scalar reference (CPU handles forced to W8A8_KERNEL_REFERENCE, one per thread, so large
 * layers verify in reasonable time): int8 bitwise, fp8 within cli_compare_fp8's bound.
 * a [M, K] (lda), b = weights [N, K] (ldb), all host memory; bias NULL or N elements of od.
 * Returns 0, or -1 if the reference itself failed (message on stderr). */
int cli_verify_rows(w8a8_dtype in, w8a8_dtype od, const void *a, int64_t lda, const void *b, int64_t ldb,
                    int64_t N, int64_t K, const float *sa, int64_t sa_len, const float *sb, int64_t sb_len,
                    const void *bias, const void *got, int64_t ldg, const int64_t *rows, int nrows, cli_cmp *c);
/* The same, checking all of N only when max_cols <= 0 or N <= max_cols; otherwise four blocks
 * of max_cols/4 columns spread over N (first and last included), for layers where the scalar
 * reference over all of N is too slow on a small CPU. */
int cli_verify_rows_cols(w8a8_dtype in, w8a8_dtype od, const void *a, int64_t lda, const void *b, int64_t ldb,
                         int64_t N, int64_t K, const float *sa, int64_t sa_len, const float *sb, int64_t sb_len,
                         const void *bias, const void *got, int64_t ldg, const int64_t *rows, int nrows,
                         int64_t max_cols, cli_cmp *c);
/* Evenly spread row indices of [0, M) (first and last included), at most max; returns the count. */
int cli_sample_rows(int64_t M, int max, int64_t *rows);

/* ---- subcommands (tools/bench.c) ---------------------------------------------------------------- */
int cli_bench_main(int argc, char **argv);

/* One scaled_mm per call through the public API, rotating over nrot weight descriptors (so B is not
 * served from cache): the callback the CPU timing loops hand to cli_time_calls. */
#define CLI_MAX_ROT 1024
typedef struct cli_mm_call {
  w8a8_handle *h;
  w8a8_matrix a, b[CLI_MAX_ROT], out;
  w8a8_vector sa, sb;
  int nrot, next;
} cli_mm_call;
int cli_mm_call_once(void *arg);

/* Llama-3.1-70B's four linear layers as tp-bench runs them (whole layer: AG shards N, RS shards K):
 * hidden 8192, 64 query heads + 8 KV heads of 128, intermediate 28672. */
typedef struct cli_tp_shape {
  const char *name;
  int ag; /* 1: column-parallel (all-gather + GEMM); 0: row-parallel (GEMM + reduce-scatter) */
  int64_t N, K;
} cli_tp_shape;
#define CLI_TP_NSHAPES 4
extern const cli_tp_shape cli_tp_shapes[CLI_TP_NSHAPES];
/* tp-bench's overlap figure (unfused - fused) / min(gemm, comm) at p50, or NAN where it would be noise: the hidden
 * time min(gemm, comm) must be at least 10% of unfused and more than the spread (p80 - p20) of unfused plus that
 * of fused, and a single rank (W < 2) has no communication to hide at all. */
double cli_tp_overlap(int W, const cli_stats *gemm, const cli_stats *comm, const cli_stats *unfused,
                      const cli_stats *fused);
/* The smallest N or K of the shapes (-s DIV must leave every rank at least one row of the sharded one). */
int64_t cli_tp_min_dim(void);
/* "70b-qkv, 70b-o, 70b-gate_up or 70b-down" (for messages) */
const char *cli_tp_shape_names(void);

#endif
