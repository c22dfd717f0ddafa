/*
 * knobs.c — the settings table (knobs.h): read from the environment once, at the first use of any
 * setting, so that a call never pays for getenv and every part of the library sees the same values.
 */
#include "knobs.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct knob_def {
  const char *name, *dflt, *doc;
  int user, numeric;
  double lo, hi;
} knob_def;

static const knob_def DEFS[W8A8_KNOB_COUNT] = {
#define W8A8_KNOB_ROW(ID, NAME, USER, NUMERIC, DEFAULT, LO, HI, DOC) {NAME, DEFAULT, DOC, USER, NUMERIC, LO, HI},
    W8A8_KNOBS(W8A8_KNOB_ROW)
#undef W8A8_KNOB_ROW
};

#define KNOB_TEXT 256
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static double g_num[W8A8_KNOB_COUNT];
static char g_text[W8A8_KNOB_COUNT][KNOB_TEXT];      /* the value as text (strings: the value) */
static char g_env_text[W8A8_KNOB_COUNT][KNOB_TEXT];  /* what the environment gave: w8a8_dev_set(name, NULL) */
static int g_env_set[W8A8_KNOB_COUNT], g_is_set[W8A8_KNOB_COUNT];
static int g_log = W8A8_LOG_WARN;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static int find(const char *name, size_t n) {
  for (int i = 0; i < W8A8_KNOB_COUNT; i++)
    if (strlen(DEFS[i].name) == n && strncmp(DEFS[i].name, name, n) == 0) return i;
  return -1;
}

static const char *const LOG_LEVELS[] = {"off", "warn", "info"};

/* Whether `v` is a valid value of knob i; a number's value in *x. Where not, *why says what is expected. */
static int parse(int i, const char *v, double *x, char *why, size_t n) {
  const knob_def *d = &DEFS[i];
  if (strlen(v) >= KNOB_TEXT) {
    snprintf(why, n, "at most %d characters", KNOB_TEXT - 1);
    return 0;
  }
  if (d->numeric) {
    char *end = NULL;
    const double t = strtod(v, &end);
    if (!*v || end == v || *end != '\0' || !(t >= d->lo && t <= d->hi)) {
      snprintf(why, n, "a number in [%g, %g]", d->lo, d->hi);
      return 0;
    }
    *x = t;
    return 1;
  }
  if (i == W8A8_KNOB_LOG) {
    for (int l = 0; l < 3; l++)
      if (strcmp(v, LOG_LEVELS[l]) == 0) return 1;
    snprintf(why, n, "off, warn or info");
    return 0;
  }
  if (i == W8A8_KNOB_CPU_DISABLE) { /* a comma-separated list of known names */
    for (const char *p = v; *p;) {
      const size_t len = strcspn(p, ",");
      if (!((len == 4 && !strncmp(p, "avx2", 4)) || (len == 6 && !strncmp(p, "avx512", 6)) ||
            (len == 3 && !strncmp(p, "amx", 3)) || len == 0)) {
        snprintf(why, n, "a comma-separated list of avx2, avx512, amx");
        return 0;
      }
      p += len + (p[len] == ',');
    }
  }
  return 1;
}

static void vlog(int level, const char *fmt, va_list ap) {
  if (level > __atomic_load_n(&g_log, __ATOMIC_RELAXED)) return;
  char msg[640];
  vsnprintf(msg, sizeof msg, fmt, ap);
  fprintf(stderr, "w8a8: %s: %s\n", LOG_LEVELS[level], msg);
}
/* (init's own messages: w8a8_log would wait for init) */
__attribute__((format(printf, 2, 3))) static void log_early(int level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(level, fmt, ap);
  va_end(ap);
}

/* Store a value already parsed (the caller holds g_mu or runs in the once-initialisation). */
static void store(int i, const char *v, double x) {
  snprintf(g_text[i], KNOB_TEXT, "%s", v);
  if (DEFS[i].numeric) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    __atomic_store_n((uint64_t *)(void *)&g_num[i], u, __ATOMIC_RELAXED);
  }
  if (i == W8A8_KNOB_LOG)
    for (int l = 0; l < 3; l++)
      if (strcmp(v, LOG_LEVELS[l]) == 0) __atomic_store_n(&g_log, l, __ATOMIC_RELAXED);
}

static void set_default(int i) {
  double x = 0;
  char why[96];
  (void)parse(i, DEFS[i].dflt, &x, why, sizeof why);
  store(i, DEFS[i].dflt, x);
}

/* One setting from the environment (source names the variable); a bad value keeps the default, with a warning. */
static void from_env(int i, const char *v, const char *source) {
  double x = 0;
  char why[96];
  if (!parse(i, v, &x, why, sizeof why)) {
    log_early(W8A8_LOG_WARN, "%s: %s=\"%.64s\" ignored (expected %s); using %s", source, DEFS[i].name, v, why,
             DEFS[i].dflt[0] ? DEFS[i].dflt : "\"\"");
    return;
  }
  store(i, v, x);
  snprintf(g_env_text[i], KNOB_TEXT, "%s", v);
  g_env_set[i] = g_is_set[i] = 1;
}

static void init(void) {
  for (int i = 0; i < W8A8_KNOB_COUNT; i++) {
    set_default(i);
    g_env_set[i] = g_is_set[i] = 0;
  }
  /* W8A8_LOG first, so that the warnings below follow it */
  const char *lg = getenv("W8A8_LOG");
  if (lg) from_env(W8A8_KNOB_LOG, lg, "W8A8_LOG");
  char var[64];
  for (int i = 0; i < W8A8_KNOB_COUNT; i++) {
    if (!DEFS[i].user || i == W8A8_KNOB_LOG) continue;
    snprintf(var, sizeof var, "W8A8_%s", DEFS[i].name);
    const char *v = getenv(var);
    if (v) from_env(i, v, var);
  }
  /* W8A8_DEV="NAME=value,...": the development switches (a user setting's own variable wins) */
  const char *dev = getenv("W8A8_DEV");
  for (const char *p = dev; p && *p;) {
    const size_t len = strcspn(p, ",");
    const char *eq = memchr(p, '=', len);
    const int i = eq ? find(p, (size_t)(eq - p)) : -1;
    if (i < 0 || DEFS[i].user) {
      if (len) log_early(W8A8_LOG_WARN, "W8A8_DEV: \"%.*s\" ignored (expected NAME=value with a development "
                                       "switch's NAME: see w8a8 info)", (int)(len > 64 ? 64 : len), p);
    } else {
      char v[KNOB_TEXT];
      snprintf(v, sizeof v, "%.*s", (int)(len - (size_t)(eq + 1 - p)), eq + 1);
      from_env(i, v, "W8A8_DEV");
    }
    p += len + (p[len] == ',');
  }
}

static inline void ready(void) { pthread_once(&g_once, init); }

double w8a8_knob_num(w8a8_knob k) {
  ready();
  uint64_t u = __atomic_load_n((const uint64_t *)(const void *)&g_num[k], __ATOMIC_RELAXED);
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

int64_t w8a8_knob_int(w8a8_knob k) { return (int64_t)w8a8_knob_num(k); }

const char *w8a8_knob_str(w8a8_knob k) {
  ready();
  return g_text[k];
}

int w8a8_log_level(void) {
  ready();
  return __atomic_load_n(&g_log, __ATOMIC_RELAXED);
}

void w8a8_log(int level, const char *fmt, ...) {
  ready();
  va_list ap;
  va_start(ap, fmt);
  vlog(level, fmt, ap);
  va_end(ap);
}

w8a8_status w8a8_dev_set(const char *name, const char *value) {
  static const char fn[] = "w8a8_dev_set";
  ready();
  if (!name) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: name is NULL", fn);
  const int i = find(name, strlen(name));
  if (i < 0) return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: no setting named \"%.64s\" (see w8a8 info)", fn, name);
  double x = 0;
  char why[96];
  pthread_mutex_lock(&g_mu);
  if (!value) { /* back to the environment's value, or the default */
    if (g_env_set[i]) {
      (void)parse(i, g_env_text[i], &x, why, sizeof why);
      store(i, g_env_text[i], x);
    } else {
      set_default(i);
    }
    g_is_set[i] = g_env_set[i];
    pthread_mutex_unlock(&g_mu);
    return W8A8_SUCCESS;
  }
  if (!parse(i, value, &x, why, sizeof why)) {
    pthread_mutex_unlock(&g_mu);
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: %s = \"%.64s\": expected %s", fn, name, value, why);
  }
  store(i, value, x);
  g_is_set[i] = 1;
  pthread_mutex_unlock(&g_mu);
  return W8A8_SUCCESS;
}

w8a8_status w8a8_dev_set_int(const char *name, int64_t v) {
  char t[32];
  snprintf(t, sizeof t, "%lld", (long long)v);
  return w8a8_dev_set(name, v < 0 ? NULL : t);
}

void w8a8_dev_reload(void) {
  ready();
  pthread_mutex_lock(&g_mu);
  init();
  pthread_mutex_unlock(&g_mu);
}

int w8a8_setting_count(void) { return W8A8_KNOB_COUNT; }

w8a8_status w8a8_get_setting(int index, w8a8_setting *out) {
  static const char fn[] = "w8a8_get_setting";
  if (!out) return w8a8_err(W8A8_ERROR_NULL_POINTER, "%s: setting is NULL", fn);
  if (index < 0 || index >= W8A8_KNOB_COUNT)
    return w8a8_err(W8A8_ERROR_INVALID_VALUE, "%s: index %d: expected 0..%d (w8a8_setting_count() - 1)", fn, index,
                    W8A8_KNOB_COUNT - 1);
  ready();
  static char names[W8A8_KNOB_COUNT][48];
  pthread_mutex_lock(&g_mu);
  snprintf(names[index], sizeof names[index], "%s%s", DEFS[index].user ? "W8A8_" : "", DEFS[index].name);
  out->name = names[index];
  out->value = g_text[index];
  out->default_value = DEFS[index].dflt;
  out->doc = DEFS[index].doc;
  out->for_users = DEFS[index].user;
  out->is_set = g_is_set[index];
  pthread_mutex_unlock(&g_mu);
  return W8A8_SUCCESS;
}
