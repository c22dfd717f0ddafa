/*
 * knobs.h — every runtime switch of the library, declared once (W8A8_KNOBS) and read once.
 *
 * User settings come from the environment as W8A8_<NAME> and are documented in w8a8.h and the
 * README. Development switches (paths kept for A/B runs and tests) come only from the one variable
 * W8A8_DEV="NAME=value,NAME=value" or from w8a8_dev_set (tests, benchmarks linked statically).
 * The environment is read at the first use of any setting; `w8a8 info` lists them all.
 */
#ifndef W8A8_KNOBS_H
#define W8A8_KNOBS_H

#include <stdint.h>

#include "w8a8.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(ID, NAME, USER, NUMERIC, DEFAULT, LO, HI, DOC): USER 1 = an environment variable W8A8_NAME;
 * NUMERIC 1 = a number in [LO, HI] (flags are 0 / 1), 0 = a string. */
#define W8A8_KNOBS(X)                                                                                                 \
  X(LOG, "LOG", 1, 0, "warn", 0, 0, "messages on stderr: off, warn (settings ignored), info (also each new plan)")   \
  X(CPU_DISABLE, "CPU_DISABLE", 1, 0, "", 0, 0, "CPU instruction sets the CPU kernels leave alone: avx2,avx512,amx") \
  X(TUNE_FILE, "TUNE_FILE", 1, 0, "", 0, 0, "a tuning table (w8a8 tune) that each new CUDA handle loads")           \
  X(TP_TIMEOUT_S, "TP_TIMEOUT_S", 1, 1, "300", 0, 1e9, "seconds a new communicator's calls wait for peers; 0: no limit") \
  X(TP_OVERLAP_MIN_M, "TP_OVERLAP_MIN_M", 1, 1, "-1", -1, 1e15,                                                       \
    "overlap=auto fuses from this many rows; -1 = the measured crossover of each transport")                         \
  X(TP_IPC, "TP_IPC", 1, 1, "0", 0, 1, "1: w8a8_comm_create_world's GPU ranks use CUDA IPC instead of NCCL")         \
  X(TP_AG_SCALES, "TP_AG_SCALES", 1, 1, "1", 0, 2,                                                                   \
    "0: the all-gather copies scales instead of storing into peers (w8a8_comm_create_local); 2 also in captures")     \
  /* development switches (W8A8_DEV) */                                                                               \
  X(GEMV, "GEMV", 0, 1, "2", 0, 2, "the CUDA-core kernel for a few tokens: 0 never, 1 wherever it applies, 2 rule")   \
  X(GEMV_FP8, "GEMV_FP8", 0, 1, "0", 0, 1, "1: the CUDA-core kernel's rule also takes one fp8 token at N <= 4096")    \
  X(QUANT_VEC, "QUANT_VEC", 0, 1, "1", 0, 1, "0: the scalar CUDA quantizer in place of the 16-byte one")             \
  X(CUDA_FORCE_PATH, "CUDA_FORCE_PATH", 0, 1, "0", 0, 90,                                                             \
    "CUDA GEMMs as on an older GPU, capability x 10: 75 Turing's (no fp8), 80 Ampere's; 0 the GPU's own")             \
  X(SM90_LEAN, "SM90_LEAN", 0, 1, "1", 0, 1, "0: the sm_90a kernel's general epilogues where a lean one applies")    \
  X(SM90_TAIL, "SM90_TAIL", 0, 1, "1", 0, 4,                                                                          \
    "sm_90a token tail: 0 never, 1 the rule, 2 small boxes, 3 one box, 4 the fold where it applies")                   \
  X(SM90_PAD_TOKENS, "SM90_PAD_TOKENS", 0, 1, "0", 0, 1,                                                              \
    "1: A's map covers whole token tiles (reads past A: bench/sm90_dev -P only)")                                    \
  X(SM90_TP_GROUP, "SM90_TP_GROUP", 0, 1, "1", 0, 1, "0: a ready launch keeps the default tile-order group")           \
  X(SM90_BW_TILE, "SM90_BW_TILE", 0, 1, "0", 0, 256, "block-scaled sm_90a tiles at M > 64: 0 the plan, 128 or 256 wide") \
  X(SM90_BW_SPLIT, "SM90_BW_SPLIT", 0, 1, "0", 0, 8, "block-scaled sm_90a K split: 0 the plan, 1..8 CTAs per tile")  \
  X(TUNE_EXPERIMENTAL, "TUNE_EXPERIMENTAL", 0, 1, "0", 0, 1, "1: w8a8 tune also measures the configurations it skips") \
  X(TP_TRACE, "TP_TRACE", 0, 1, "0", 0, 1, "1: new GPU communicators time each step of a fused call (tp-bench)")      \
  X(TP_BLOCK_ROWS, "TP_BLOCK_ROWS", 0, 1, "0", 0, 1e15, "MPI communicators: rows per overlapped block; 0 = the rule") \
  X(TP_COPY2D, "TP_COPY2D", 0, 1, "0", 0, 1, "1: strided row copies on the SMs even where the copy engine takes them") \
  X(TP_ONE_GEMM, "TP_ONE_GEMM", 0, 1, "1", 0, 1, "0: the all-gather launches one GEMM per rank, not one on flags")   \
  X(TP_AG_PACK, "TP_AG_PACK", 0, 1, "1", 0, 1, "0: the all-gather packs its own rows with the copy engine")          \
  X(TP_AG_PIECES, "TP_AG_PIECES", 0, 1, "1", 1, 64, "the one-GEMM all-gather pulls each peer's rows in this many pieces") \
  X(TP_AG_PUSH, "TP_AG_PUSH", 0, 1, "0", 0, 2, "all-gather rows pushed by their owner: 0 pull, 1 push, 2 push after scales") \
  X(TP_RS_MIN_ROWS, "TP_RS_MIN_ROWS", 0, 1, "0", 0, 1073741824,                                                      \
    "least rows of a reduce-scatter piece; 0 = 256 at K <= 4096, else 1024")                                          \
  X(TP_RS_DIRECT, "TP_RS_DIRECT", 0, 1, "0", 0, 1, "1: the reduce-scatter's GEMM stores fp32 partials into peers")   \
  X(TP_RS_OWN_WHOLE, "TP_RS_OWN_WHOLE", 0, 1, "1", 0, 1, "0: the reduce-scatter's own rows in pieces like a peer's") \
  X(TP_REDUCE_VEC, "TP_REDUCE_VEC", 0, 1, "1", 0, 1, "0: the scalar reduction kernel in place of the 8-wide one")

typedef enum w8a8_knob {
#define W8A8_KNOB_ENUM(ID, NAME, USER, NUMERIC, DEFAULT, LO, HI, DOC) W8A8_KNOB_##ID,
  W8A8_KNOBS(W8A8_KNOB_ENUM)
#undef W8A8_KNOB_ENUM
  W8A8_KNOB_COUNT
} w8a8_knob;

/* A numeric setting's value (the default where unset). */
__attribute__((visibility("hidden"))) double w8a8_knob_num(w8a8_knob k);
__attribute__((visibility("hidden"))) int64_t w8a8_knob_int(w8a8_knob k);
/* A string setting's value ("" where unset); valid until the next w8a8_dev_set of it. */
__attribute__((visibility("hidden"))) const char *w8a8_knob_str(w8a8_knob k);

/* Tests and benchmarks: set any setting by NAME (without W8A8_), or back to what the environment
 * gave with value NULL. Not for concurrent use with calls that read the same setting. */
__attribute__((visibility("hidden"))) w8a8_status w8a8_dev_set(const char *name, const char *value);
/* The same with a whole number; v < 0: back to the environment's value (NULL above). */
__attribute__((visibility("hidden"))) w8a8_status w8a8_dev_set_int(const char *name, int64_t v);

/* Tests: read the environment again, dropping every w8a8_dev_set. */
__attribute__((visibility("hidden"))) void w8a8_dev_reload(void);

/* W8A8_LOG: 0 off, 1 warn, 2 info; w8a8_log prints "w8a8: <level>: ..." at or below that level. */
enum { W8A8_LOG_OFF = 0, W8A8_LOG_WARN = 1, W8A8_LOG_INFO = 2 };
__attribute__((visibility("hidden"))) int w8a8_log_level(void);
__attribute__((visibility("hidden"), format(printf, 2, 3))) void w8a8_log(int level, const char *fmt, ...);

#ifdef __cplusplus
}
#endif

#endif
