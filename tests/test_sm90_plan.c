/* test_sm90_plan.c — the Hopper (sm_90a) planner on the CPU: its configuration table, and its every plan against
 * the plans dumped on a GPU.
 *
 * tests/golden/plans-<gpu>.tsv (bench/plan_dump.c on that GPU; `STEPS="build plans" bash scripts/device.sh`
 * refreshes it) holds the GPU's capabilities the planner reads (its SMs, and `cap` lines: how many clusters of
 * each configuration and split fit at once) and, run-length encoded over M = 1..16384, the path, configuration
 * and split planned for each variant, dtype and shape. sm90_plan_golden rebuilds every problem as plan_dump does
 * and checks the dispatcher's rule (the CUDA-core kernel or the sm_90a kernel) and the plain-C planner at every M.
 * Run from the repository root (W8A8_GOLDEN_DIR names another directory). */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "core/knobs.h"
#include "cuda/sm90_plan.h"
#include "harness.h"
#include "plan_variants.h"

/* The planner's test hooks (sm90_plan.c) and the dispatcher's GEMV rule: back to their defaults. */

static void planner_defaults(void) {
  w8a8_dev_set_int("SM90_TAIL", -1);
  w8a8_dev_set_int("SM90_PAD_TOKENS", 0);
  w8a8_dev_set_int("GEMV", -1);
  w8a8_dev_set_int("GEMV_FP8", -1);
}

/* A set W8A8_GEMV* variable selects another rule than the one the golden plans were dumped with. */
extern char **environ;
static const char *planner_env(void) {
  for (char **e = environ; e && *e; e++)
    if (!strncmp(*e, "W8A8_GEMV", 9)) return *e;
  return NULL;
}

/* The row of configuration ci with `add` flags set and `drop` flags cleared (the same tile otherwise), -1 if
 * none. */
static int row_with(int ci, int add, int drop) {
  const sm90_config *c = &w8a8_sm90_configs[ci];
  const int flags = (c->flags | add) & ~drop;
  for (int i = 0; i < SM90_NUM_CONFIGS; i++) {
    const sm90_config *o = &w8a8_sm90_configs[i];
    if (o->flags == flags && o->bn == c->bn && o->stages == c->stages && o->minb == c->minb) return i;
  }
  return -1;
}

/* The table: names unique and found by name; rows unique (the planner finds twins by their fields), and the twins'
 * names what the tuning tables and tools expect (X_tail, X_sk, the skinny X_mc2 / X_k2 / X_k2r). */
W8A8_TEST(sm90_plan_table) {
  /* w8a8_sm90_scaled_mm_config takes indices (the golden files' cap lines check the order) */
  CHECK(SM90_CFG_FP8_128X256 == 0 && SM90_CFG_INT8_SWAP_N8 == 8 && SM90_CFG_FP8_128X160_PROMOTE_HDB == 86 &&
            SM90_NUM_CONFIGS == 87,
        "the configurations' order changed");
  for (int i = 0; i < SM90_NUM_CONFIGS; i++) {
    const sm90_config *c = &w8a8_sm90_configs[i];
    CHECK(w8a8_sm90_config_find(c->name) == i, "%s: found at %d", c->name, w8a8_sm90_config_find(c->name));
    CHECK(c->int8 == !strncmp(c->name, "int8_", 5), "%s: dtype", c->name);
    for (int j = 0; j < i; j++) {
      const sm90_config *o = &w8a8_sm90_configs[j];
      CHECK(o->flags != c->flags || o->bn != c->bn || o->stages != c->stages || o->minb != c->minb,
            "%s and %s: the same row", o->name, c->name);
    }
    char want[64];
    const int tail = c->tail ? row_with(i, 0, SM90_TAIL) : -1, sk = c->sk ? row_with(i, 0, SM90_STREAMK) : -1;
    if (c->tail) {
      snprintf(want, sizeof want, "%s_tail", tail >= 0 ? w8a8_sm90_configs[tail].name : "?");
      CHECK(!strcmp(c->name, want), "%s: the token-tail twin of no plain tile named %s", c->name, want);
    }
    if (c->sk) {
      snprintf(want, sizeof want, "%s_sk", sk >= 0 ? w8a8_sm90_configs[sk].name : "?");
      CHECK(!strcmp(c->name, want), "%s: the stream-K twin of no plain tile named %s", c->name, want);
    }
    CHECK(w8a8_sm90_sk_plain(i) == sk, "%s: plain tile %d, expected %d", c->name, w8a8_sm90_sk_plain(i), sk);
    if (c->flags & SM90_SKINNY) {
      snprintf(want, sizeof want, "%s_skinny_n%d%s%s%s", c->int8 ? "int8" : "fp8", c->bn, c->mcast ? "_mc2" : "",
               c->cw == 2 ? "_k2" : "", c->wr ? "r" : "");
      CHECK(!strcmp(c->name, want), "%s: a skinny row named %s", c->name, want);
    }
  }
  /* no plain row has a twin of another name (the planner would take it where the names say none) */
  for (int i = 0; i < SM90_NUM_CONFIGS; i++) {
    const sm90_config *c = &w8a8_sm90_configs[i];
    char want[64];
    if (!c->tail) {
      snprintf(want, sizeof want, "%s_tail", c->name);
      CHECK(row_with(i, SM90_TAIL, 0) == w8a8_sm90_config_find(want), "%s: tail twin", c->name);
    }
    if (!c->sk) {
      snprintf(want, sizeof want, "%s_sk", c->name);
      CHECK(row_with(i, SM90_STREAMK, 0) == w8a8_sm90_config_find(want), "%s: stream-K twin", c->name);
    }
    if (c->flags & SM90_MC2) { /* a multicast plan's stream-K twin is its plain tile's: X_mc2 -> X_sk */
      const size_t n = strlen(c->name);
      snprintf(want, sizeof want, "%.*s_sk", (int)(n - 4), c->name);
      const int named = n > 4 && !strcmp(c->name + n - 4, "_mc2") ? w8a8_sm90_config_find(want) : -1;
      CHECK(row_with(i, SM90_STREAMK, SM90_MC2) == named, "%s: its plain tile's stream-K twin", c->name);
    }
  }
}

/* Without the occupancy query's answers: num_sms * minb / split, 10% less for clusters of more than two. */
W8A8_TEST(sm90_plan_caps_estimate) {
  sm90_caps caps = {132, 0, NULL, NULL};
  CHECK(w8a8_sm90_clusters(&caps, SM90_CFG_FP8_SWAP_N8, 1) == 264, "%d",
        w8a8_sm90_clusters(&caps, SM90_CFG_FP8_SWAP_N8, 1));
  CHECK(w8a8_sm90_clusters(&caps, SM90_CFG_FP8_SWAP_N8_DEEP, 2) == 66, "%d",
        w8a8_sm90_clusters(&caps, SM90_CFG_FP8_SWAP_N8_DEEP, 2));
  CHECK(w8a8_sm90_clusters(&caps, SM90_CFG_FP8_SWAP_N8_DEEP, 4) == 29, "%d",
        w8a8_sm90_clusters(&caps, SM90_CFG_FP8_SWAP_N8_DEEP, 4));
  CHECK(w8a8_sm90_clusters(&caps, SM90_CFG_FP8_SWAP_N8_DEEP, 9) == 1, "split out of range");
  static int table[SM90_NUM_CONFIGS][SM90_MAX_SPLIT + 1];
  table[SM90_CFG_FP8_SWAP_N8_DEEP][4] = 30;
  caps.clusters = table;
  CHECK(w8a8_sm90_clusters(&caps, SM90_CFG_FP8_SWAP_N8_DEEP, 4) == 30, "the table's entry");
}

/* ---- the golden plans ------------------------------------------------------------------------------------ */


typedef struct golden {
  const char *file;
  int line, mismatches, rows;
  long long plans;
  char key[160]; /* the last row's variant, dtype and shape; its m_hi */
  int64_t key_hi;
  sm90_caps caps;
  int (*clusters)[SM90_MAX_SPLIT + 1];
} golden;

/* How often each configuration was planned over every golden file: every row of the table must be (the library
 * builds only configurations that a plan picks). */
static long long g_planned[SM90_NUM_CONFIGS];

/* One row: `variant dtype shape N K m_lo m_hi path config split`; every M of it planned and compared. */
static void check_row(golden *g, char *row) {
  char *f[10];
  int n = 0;
  for (char *save = NULL, *t = strtok_r(row, "\t\n", &save); t && n < 10; t = strtok_r(NULL, "\t\n", &save)) f[n++] = t;
  if (n != 10) {
    CHECK(0, "%s:%d: %d fields, expected 10", g->file, g->line, n);
    g->mismatches++;
    return;
  }
  const plan_variant *var = NULL;
  for (size_t i = 0; i < PLAN_NUM_VARIANTS; i++)
    if (!strcmp(f[0], PLAN_VARIANTS[i].name)) var = &PLAN_VARIANTS[i];
  const int int8 = !strcmp(f[1], "int8");
  const int64_t N = atoll(f[3]), K = atoll(f[4]), lo = atoll(f[5]), hi = atoll(f[6]);
  const int gemv = !strcmp(f[7], "gemv");
  const int want_cfg = gemv ? -1 : !strcmp(f[8], "none") ? -1 : w8a8_sm90_config_find(f[8]);
  const int want_split = atoi(f[9]);
  if (!var || (!int8 && strcmp(f[1], "fp8")) || lo < 1 || hi < lo || (!gemv && strcmp(f[7], "sm90")) ||
      (gemv && (strcmp(f[8], "-") || want_split != 1)) || (!gemv && strcmp(f[8], "none") && want_cfg < 0)) {
    CHECK(0, "%s:%d: a row this test cannot read (variant %s, dtype %s, path %s, config %s)", g->file, g->line, f[0],
          f[1], f[7], f[8]);
    g->mismatches++;
    return;
  }
  g->rows++;
  /* each variant, dtype and shape's rows cover M = 1.. without a gap */
  char key[160];
  snprintf(key, sizeof key, "%s %s %s %s %s", f[0], f[1], f[2], f[3], f[4]);
  CHECK(lo == (strcmp(key, g->key) ? 1 : g->key_hi + 1), "%s:%d: %s starts at M=%lld", g->file, g->line, key,
        (long long)lo);
  snprintf(g->key, sizeof g->key, "%s", key);
  g->key_hi = hi;
  const sm90_plan_opts opts = {var->wconst, var->fast ? W8A8_FP8_ACCUM_FAST : W8A8_FP8_ACCUM_PRECISE, NULL, 1,
                               (size_t)16 << 20}; /* a CUDA handle's workspace (dispatch.c) */
  for (int64_t m = lo; m <= hi; m++) {
    w8a8_mm_ready ready;
    w8a8_mm_problem p;
    plan_variant_problem(var, int8, N, K, m, &p, &ready);
    g->plans++;
    const int got_gemv = w8a8_cuda_gemv_wanted(&p, 90);
    sm90_plan pl = {-1, 1};
    if (!got_gemv) pl = w8a8_sm90_choose_plan(&p, &opts, &g->caps);
    if (pl.config >= 0) g_planned[pl.config]++;
    if (got_gemv == gemv && (gemv || (pl.config == want_cfg && pl.split == want_split))) continue;
    if (++g->mismatches <= 8)
      CHECK(0, "%s:%d: %s %s %s N=%lld K=%lld M=%lld: planned %s %s split %d, the GPU %s %s split %d", g->file, g->line,
            f[0], f[1], f[2], (long long)N, (long long)K, (long long)m, got_gemv ? "gemv" : "sm90",
            got_gemv ? "-" : pl.config >= 0 ? w8a8_sm90_configs[pl.config].name : "none", got_gemv ? 1 : pl.split,
            f[7], f[8], want_split);
  }
}

static void check_file(const char *path, const char *name) {
  FILE *fp = fopen(path, "r");
  REQUIRE(fp, "cannot open %s", path);
  golden g;
  memset(&g, 0, sizeof g);
  g.file = name;
  g.clusters = calloc(SM90_NUM_CONFIGS, sizeof *g.clusters);
  REQUIRE(g.clusters, "out of memory");
  g.caps.clusters = g.clusters;
  char line[512];
  int caps_done = 0, cap_configs = 0, cap_others = 0, last_ci = -1;
  while (fgets(line, sizeof line, fp)) {
    g.line++;
    const char *sms = strstr(line, " SMs");
    if (line[0] == '#') {
      if (!strncmp(line, "# plan_dump:", 12) && sms) {
        while (sms > line && sms[-1] >= '0' && sms[-1] <= '9') sms--;
        g.caps.num_sms = atoi(sms);
      }
      continue;
    }
    if (!strncmp(line, "cap\t", 4)) {
      char cfg[64];
      int split = 0, clusters = 0;
      const int fields = sscanf(line + 4, "%63s %d %d", cfg, &split, &clusters);
      CHECK(fields == 3 && split >= 1 && split <= SM90_MAX_SPLIT && clusters > 0 && !caps_done,
            "%s:%d: a cap line this test cannot read: %s", name, g.line, line);
      const int ci = fields == 3 ? w8a8_sm90_config_find(cfg) : -1;
      /* (a configuration of an older table that this one no longer has: the GPU's plans never took it) */
      if (ci < 0 && split == 1) cap_others++;
      if (ci < 0 || split < 1 || split > SM90_MAX_SPLIT) continue;
      g.clusters[ci][split] = clusters;
      if (split == 1) { /* plan_dump prints the table in its order: the same order here */
        CHECK(ci > last_ci, "%s:%d: %s is configuration %d here, after %d", name, g.line, cfg, ci, last_ci);
        last_ci = ci;
        cap_configs++;
      }
      continue;
    }
    if (!caps_done) {
      caps_done = 1;
      CHECK(g.caps.num_sms > 0, "%s: no \"N SMs\" in its plan_dump line", name);
      CHECK(cap_configs == SM90_NUM_CONFIGS, "%s: cap lines for %d of the %d configurations", name, cap_configs,
            SM90_NUM_CONFIGS);
      if (cap_others) printf("    %s: cap lines of %d configurations this table does not have\n", name, cap_others);
      if (w8a8_test_failed()) break;
    }
    check_row(&g, line);
  }
  fclose(fp);
  free(g.clusters);
  printf("    %s: %d SMs, %d rows, %lld plans, %d differ\n", name, g.caps.num_sms, g.rows, g.plans, g.mismatches);
  CHECK(g.rows > 0, "%s: no rows", name);
  CHECK(g.mismatches == 0, "%s: %d plans differ from the GPU's (the first above)", name, g.mismatches);
}

W8A8_TEST(sm90_plan_golden) {
  const char *env = planner_env();
  if (env) {
    printf("    %s is set\n", env);
    SKIP("a W8A8_SM90_* or W8A8_GEMV* variable selects other rules than the golden plans'");
  }
  planner_defaults();
  const char *dir = getenv("W8A8_GOLDEN_DIR") ? getenv("W8A8_GOLDEN_DIR") : "tests/golden";
  DIR *d = opendir(dir);
  REQUIRE(d, "cannot open %s (run from the repository root, or set W8A8_GOLDEN_DIR)", dir);
  int files = 0;
  for (struct dirent *e = readdir(d); e; e = readdir(d)) {
    const size_t n = strlen(e->d_name);
    if (strncmp(e->d_name, "plans-", 6) || n < 10 || strcmp(e->d_name + n - 4, ".tsv")) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    check_file(path, e->d_name);
    files++;
  }
  closedir(d);
  CHECK(files > 0, "no plans-*.tsv in %s", dir);
  for (int i = 0; i < SM90_NUM_CONFIGS && files > 0; i++)
    CHECK(g_planned[i] > 0, "%s: in the table, but no golden plan takes it", w8a8_sm90_configs[i].name);
}

/* The block-scaled kernel's plan: the tile by token count, a split that never exceeds the K-blocks or a cluster of
 * 8, and the splits the cost model gives on the DeepSeek-V3 shapes (132 SMs: an H100 SXM). */
W8A8_TEST(sm90_bw_plan_rule) {
  static const int64_t nk[][2] = {{24576, 1536}, {32768, 512},  {7168, 16384}, {4096, 7168},
                                  {7168, 2048},  {2112, 7168},  {18432, 7168}, {7168, 18432}};
  for (size_t s = 0; s < sizeof nk / sizeof nk[0]; s++)
    for (int64_t M = 1; M <= 16384; M = M < 8 ? M + 1 : M * 2 + (M % 3 == 0)) {
      const int64_t N = nk[s][0], K = nk[s][1], kb = (K + 127) / 128;
      const sm90_bw_plan p = w8a8_sm90_bw_plan(M, N, K, 132, 0, 0);
      CHECK(p.swap == (M <= 64), "M %lld: swap %d", (long long)M, p.swap);
      const int64_t wide = (M + 127) / 128 * ((N + 255) / 256);
      CHECK(p.bn == (M > 64 ? (wide >= 132 ? 256 : 128) : M <= 16 ? 16 : M <= 32 ? 32 : 64), "M %lld: bn %d",
            (long long)M, p.bn);
      CHECK(p.split >= 1 && p.split <= 8 && p.split <= kb, "M %lld N %lld K %lld: split %d", (long long)M,
            (long long)N, (long long)K, p.split);
      const int64_t tiles = p.swap ? (M + p.bn - 1) / p.bn * ((N + 127) / 128) : (M + 127) / 128 * ((N + p.bn - 1) / p.bn);
      CHECK(p.tiles == tiles, "tiles %d, expected %lld", p.tiles, (long long)tiles);
    }
  /* few tiles: split over K; 56 tiles of N = 7168 into 2, 17 tiles of N = 2112 into 6 */
  CHECK(w8a8_sm90_bw_plan(1, 7168, 2048, 132, 0, 0).split == 2, "7168 x 2048 at M = 1");
  CHECK(w8a8_sm90_bw_plan(128, 7168, 2048, 132, 0, 0).split == 2, "7168 x 2048 at M = 128");
  CHECK(w8a8_sm90_bw_plan(16, 2112, 7168, 132, 0, 0).split == 6, "2112 x 7168 at M = 16");
  CHECK(w8a8_sm90_bw_plan(4096, 24576, 1536, 132, 0, 0).split == 1, "24576 x 1536 at M = 4096");
  CHECK(w8a8_sm90_bw_plan(1, 1, 1, 132, 0, 0).split == 1, "one K-block");
  /* the forced width (W8A8_DEV SM90_BW_TILE) of the normal tiles only */
  CHECK(w8a8_sm90_bw_plan(4096, 7168, 7168, 132, 128, 0).bn == 128, "forced 128");
  CHECK(w8a8_sm90_bw_plan(256, 7168, 7168, 132, 256, 0).bn == 256, "forced 256");
  CHECK(w8a8_sm90_bw_plan(16, 7168, 7168, 132, 256, 0).bn == 16, "forced width at M <= 64");
  /* the forced split (W8A8_DEV SM90_BW_SPLIT): as asked, at most the K-blocks */
  CHECK(w8a8_sm90_bw_plan(1, 4096, 7168, 132, 0, 4).split == 4, "forced split 4");
  CHECK(w8a8_sm90_bw_plan(4096, 4096, 7168, 132, 0, 1).split == 1, "forced split 1");
  CHECK(w8a8_sm90_bw_plan(1, 4096, 256, 132, 0, 8).split == 2, "forced split past the K-blocks");
}
