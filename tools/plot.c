/* plot.c — `w8a8 plot`: the JSON lines of bench / tp-bench / tp-stack / tune / demo as charts.
 *
 * Without -o it draws in the terminal (nothing to install): one chart per shape, the metric against M on a
 * log2 axis, one marker per series (impl, dtype, ...). With -o IMAGE it runs bench/plot.py with python3 and
 * matplotlib; where either is missing it says so and draws the terminal chart instead (exit 1: no image). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cli_common.h"
#include "cli_json.h"

#define MAX_SERIES 64
#define MAX_FACETS 32
#define MAX_MARKERS 12
static const char markers[MAX_MARKERS + 1] = "*+ox@%&=~^$?";

typedef struct pt {
  double x, y;
} pt;
typedef struct series {
  char facet[128], name[160];
  pt *p;
  int n, cap;
} series;
typedef struct plot_data {
  series s[MAX_SERIES];
  int ns, dropped_series;
  long rows, used;
} plot_data;

enum { PLOT_METRIC = 256, PLOT_IMPL, PLOT_SHAPE, PLOT_WIDTH, PLOT_HEIGHT, PLOT_SCRIPT };
static const cli_opt plot_opts[] = {
    {'o', "out", 'o', "IMAGE", "write an image (.png, .svg, .pdf) with python3 and matplotlib\n"
                               "(bench/plot.py) instead of the terminal chart"},
    {'y', "metric", 'y', "KEY", "what to plot against M: tflops (default), p50_us, vs_baseline, or\n"
                                "any numeric key of the rows (docs/CLI.md)"},
    {'d', "dtype", 'd', "D", "only rows of this dtype (int8, fp8 = fp8_e4m3, bf16, fp32)"},
    {PLOT_IMPL, "impl", 0, "LIST", "only these implementations (comma list, e.g. w8a8_cuda,cublaslt_int8)"},
    {PLOT_SHAPE, "shape", 0, "NAME", "only this shape (a suite's name, or NxK)"},
    {PLOT_WIDTH, "width", 0, "N", "terminal chart: columns of the plot area, 20..400 (default 64)"},
    {PLOT_HEIGHT, "height", 0, "N", "terminal chart: rows of the plot area, 5..200 (default 16)"},
    {PLOT_SCRIPT, "script", 0, "PATH", "the plot script for -o (default: $W8A8_PLOT_SCRIPT, then\n"
                                       "<prefix>/share/w8a8/plot.py, then bench/plot.py of the source tree)"},
};
#define NPLOT_OPTS ((int)(sizeof plot_opts / sizeof plot_opts[0]))

static void usage(FILE *f) {
  fprintf(f,
          "usage: w8a8 plot [options] FILE     (FILE: JSON lines of bench, tp-bench, tp-stack, tune or demo;\n"
          "                                     '-' reads stdin)\n"
          "Chart a measurement against M: one chart per shape, one series per implementation and dtype.\n"
          "In the terminal by default; -o IMAGE writes an image with matplotlib.\n"
          "\n");
  cli_print_options(f, plot_opts, NPLOT_OPTS);
  fprintf(f,
          "\n"
          "Examples:\n"
          "  w8a8 bench --cpu -o bench.jsonl && w8a8 plot bench.jsonl\n"
          "  w8a8 bench --json | w8a8 plot -y p50_us -\n"
          "  w8a8 plot --dtype int8 -o bench.png bench.jsonl\n");
}

/* ---- reading ------------------------------------------------------------------------------------- */

typedef struct plot_args {
  const char *in, *out, *metric, *dtype, *impl, *shape, *script;
  int width, height;
} plot_args;

static int in_list(const char *list, const char *v) {
  if (!v) return 0;
  const size_t n = strlen(v);
  for (const char *p = list; *p;) {
    const size_t k = strcspn(p, ",");
    if (k == n && !strncmp(p, v, n)) return 1;
    p += k;
    if (*p) p++;
  }
  return 0;
}

static void shape_label(const cj_obj *o, char *buf, size_t n) {
  const char *sh = cj_str(o, "shape");
  const double N = cj_num(o, "N"), K = cj_num(o, "K");
  if (sh && *sh && isfinite(N) && isfinite(K))
    snprintf(buf, n, "%s (%.0fx%.0f)", sh, N, K);
  else if (sh && *sh)
    snprintf(buf, n, "%s", sh);
  else if (isfinite(N) && isfinite(K))
    snprintf(buf, n, "%.0fx%.0f", N, K);
  else
    snprintf(buf, n, "all");
}

static int add_point(plot_data *d, const char *facet, const char *name, double x, double y) {
  int i = 0;
  while (i < d->ns && (strcmp(d->s[i].facet, facet) || strcmp(d->s[i].name, name))) i++;
  if (i == d->ns) {
    if (d->ns == MAX_SERIES) {
      d->dropped_series = 1;
      return 0;
    }
    memset(&d->s[i], 0, sizeof d->s[i]);
    snprintf(d->s[i].facet, sizeof d->s[i].facet, "%s", facet);
    snprintf(d->s[i].name, sizeof d->s[i].name, "%s", name);
    d->ns++;
  }
  series *s = &d->s[i];
  if (s->n == s->cap) {
    const int cap = s->cap ? 2 * s->cap : 16;
    pt *p = realloc(s->p, sizeof(pt) * (size_t)cap);
    if (!p) return -1;
    s->p = p;
    s->cap = cap;
  }
  s->p[s->n].x = x;
  s->p[s->n].y = y;
  s->n++;
  return 0;
}

/* One line of input: 0 (used or skipped), or -1 after a message naming the line. */
static int take_line(plot_data *d, const plot_args *ar, const char *name, long lineno, const char *line, size_t len) {
  while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
  size_t k = 0;
  while (k < len && (line[k] == ' ' || line[k] == '\t')) k++;
  if (k == len) return 0; /* a blank line */
  static cj_obj o;
  const char *why = NULL;
  size_t at = 0;
  if (cli_json_object(line, len, &o, &why, &at) != 0) {
    fprintf(stderr, "w8a8 plot: %s:%ld: not a JSON object: %s at column %zu\n", name, lineno, why, at + 1);
    return -1;
  }
  const char *type = cj_str(&o, "type");
  if (type ? strcmp(type, "row") != 0 : !cj_get(&o, "M")) return 0; /* the header, summaries */
  d->rows++;
  const char *impl = cj_str(&o, "impl"), *dtype = cj_str(&o, "dtype"), *op = cj_str(&o, "op");
  const char *scales = cj_str(&o, "scales");
  char facet[128], sname[160];
  shape_label(&o, facet, sizeof facet);
  /* --dtype fp8 is the rows' fp8_e4m3 (the other commands' --dtype values) */
  if (ar->dtype && (!dtype || (strcmp(dtype, ar->dtype) && !(!strcmp(ar->dtype, "fp8") && !strcmp(dtype, "fp8_e4m3")))))
    return 0;
  if (ar->impl && !in_list(ar->impl, impl)) return 0;
  if (ar->shape) {
    const char *sh = cj_str(&o, "shape");
    char nk[64];
    snprintf(nk, sizeof nk, "%.0fx%.0f", cj_num(&o, "N"), cj_num(&o, "K"));
    if (!(sh && !strcmp(sh, ar->shape)) && strcmp(nk, ar->shape)) return 0;
  }
  double x = cj_num(&o, "M"), y = cj_num(&o, ar->metric);
  /* JSON lines written before the schema had one key per time: "us" (the median) */
  if (!isfinite(y) && !strcmp(ar->metric, "p50_us")) y = cj_num(&o, "us");
  if (!isfinite(x) || x <= 0 || !isfinite(y)) return 0;
  const double W = cj_num(&o, "world");
  snprintf(sname, sizeof sname, "%s%s%s %s%s%s", impl ? impl : "?", op && strcmp(op, "scaled_mm") ? " " : "",
           op && strcmp(op, "scaled_mm") ? op : "", dtype ? dtype : "?",
           scales && !strcmp(scales, "tensor") ? " tensor-scales" : "", "");
  if (isfinite(W)) {
    const size_t u = strlen(sname);
    snprintf(sname + u, sizeof sname - u, " W=%.0f", W);
  }
  if (add_point(d, facet, sname, x, y) != 0) {
    fprintf(stderr, "w8a8 plot: out of memory\n");
    return -1;
  }
  d->used++;
  return 0;
}

/* ---- the terminal chart --------------------------------------------------------------------------- */

static int cmp_dbl(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int cmp_pt(const void *a, const void *b) {
  const pt *p = a, *q = b;
  return (p->x > q->x) - (p->x < q->x);
}

static void draw_facet(FILE *f, const plot_data *d, const char *facet, const plot_args *ar) {
  const int W = ar->width, H = ar->height;
  int idx[MAX_SERIES], n = 0;
  for (int i = 0; i < d->ns; i++)
    if (!strcmp(d->s[i].facet, facet)) idx[n++] = i;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (int k = 0; k < n; k++) {
    series *s = (series *)&d->s[idx[k]];
    qsort(s->p, (size_t)s->n, sizeof(pt), cmp_pt);
    for (int j = 0; j < s->n; j++) {
      xmin = fmin(xmin, s->p[j].x), xmax = fmax(xmax, s->p[j].x);
      ymin = fmin(ymin, s->p[j].y), ymax = fmax(ymax, s->p[j].y);
    }
  }
  if (ymin > 0) ymin = 0; /* throughput and times read best from zero */
  if (ymax <= ymin) ymax = ymin + 1;
  const int logx = xmin > 0 && xmax / xmin >= 4;
  const double lx0 = logx ? log2(xmin) : xmin, lx1 = logx ? log2(xmax) : xmax;
  char *grid = malloc((size_t)W * (size_t)H);
  if (!grid) return;
  memset(grid, ' ', (size_t)W * (size_t)H);
#define COL(x) (lx1 > lx0 ? (int)lround(((logx ? log2(x) : (x)) - lx0) / (lx1 - lx0) * (W - 1)) : W / 2)
#define ROW(y) (H - 1 - (int)lround(((y) - ymin) / (ymax - ymin) * (H - 1)))
  /* lines first ('.'), then the markers over them ('#' where two series meet) */
  for (int k = 0; k < n; k++) {
    const series *s = &d->s[idx[k]];
    for (int j = 0; j + 1 < s->n; j++) {
      const int c0 = COL(s->p[j].x), c1 = COL(s->p[j + 1].x);
      for (int c = c0 + 1; c < c1; c++) {
        const double t = (double)(c - c0) / (double)(c1 - c0);
        const int r = ROW(s->p[j].y + t * (s->p[j + 1].y - s->p[j].y));
        if (r >= 0 && r < H && grid[r * W + c] == ' ') grid[r * W + c] = '.';
      }
    }
  }
  for (int k = 0; k < n; k++) {
    const series *s = &d->s[idx[k]];
    const char m = k < MAX_MARKERS ? markers[k] : '#';
    for (int j = 0; j < s->n; j++) {
      const int c = COL(s->p[j].x), r = ROW(s->p[j].y);
      if (r < 0 || r >= H || c < 0 || c >= W) continue;
      char *g = &grid[r * W + c];
      *g = *g == ' ' || *g == '.' || *g == m ? m : '#';
    }
  }
  fprintf(f, "\n%s vs M -- %s\n", ar->metric, facet);
  for (int r = 0; r < H; r++) {
    const double yv = ymax - (ymax - ymin) * r / (H - 1);
    if (r == 0 || r == H - 1 || r == (H - 1) / 2)
      fprintf(f, "%10.4g |", yv);
    else
      fprintf(f, "%10s |", "");
    fwrite(grid + (size_t)r * W, 1, (size_t)W, f);
    fputc('\n', f);
  }
  fprintf(f, "%10s +", "");
  for (int c = 0; c < W; c++) fputc('-', f);
  fputc('\n', f);
  /* x labels: every distinct M whose label fits */
  char *lab = malloc((size_t)W + 16);
  if (lab) {
    memset(lab, ' ', (size_t)W + 15);
    lab[W + 15] = 0;
    int next_free = 0;
    double xs[256];
    int nx = 0;
    for (int k = 0; k < n; k++)
      for (int j = 0; j < d->s[idx[k]].n; j++) {
        const double x = d->s[idx[k]].p[j].x;
        int seen = 0;
        for (int q = 0; q < nx; q++) seen |= xs[q] == x;
        if (!seen && nx < 256) xs[nx++] = x;
      }
    qsort(xs, (size_t)nx, sizeof xs[0], cmp_dbl);
    for (int q = 0; q < nx; q++) {
      char t[24];
      const int len = snprintf(t, sizeof t, "%.0f", xs[q]);
      int c = COL(xs[q]) - len / 2;
      if (c < next_free) continue;
      if (c + len > W + 15) break;
      memcpy(lab + c, t, (size_t)len);
      next_free = c + len + 1;
    }
    int end = W + 15;
    while (end > 0 && lab[end - 1] == ' ') end--;
    lab[end] = 0;
    fprintf(f, "%11s %s   (M%s)\n", "", lab, logx ? ", log2 scale" : "");
    free(lab);
  }
#undef COL
#undef ROW
  for (int k = 0; k < n; k++)
    fprintf(f, "%11s %c %s (%d points)\n", "", k < MAX_MARKERS ? markers[k] : '#', d->s[idx[k]].name, d->s[idx[k]].n);
  if (n > MAX_MARKERS) fprintf(f, "%11s (more than %d series: filter with --impl or --dtype)\n", "", MAX_MARKERS);
  fprintf(f, "%11s '#': series on one spot, '.': between measured points\n", "");
  free(grid);
}

static void draw(FILE *f, const plot_data *d, const plot_args *ar) {
  const char *done[MAX_FACETS];
  int nd = 0;
  for (int i = 0; i < d->ns; i++) {
    int seen = 0;
    for (int k = 0; k < nd; k++) seen |= !strcmp(done[k], d->s[i].facet);
    if (seen) continue;
    if (nd == MAX_FACETS) {
      fprintf(f, "(more than %d shapes: pick one with --shape)\n", MAX_FACETS);
      break;
    }
    done[nd++] = d->s[i].facet;
    draw_facet(f, d, d->s[i].facet, ar);
  }
  if (d->dropped_series) fprintf(f, "(more than %d series in all: filter with --shape, --impl or --dtype)\n", MAX_SERIES);
}

/* ---- the image: bench/plot.py ---------------------------------------------------------------------- */

static int readable(const char *p) { return p && access(p, R_OK) == 0; }

static const char *find_script(const plot_args *ar, char *buf, size_t n) {
  if (ar->script) return ar->script;
  const char *env = getenv("W8A8_PLOT_SCRIPT");
  if (env && *env) return env;
  char exe[4096];
  const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (len <= 0) return NULL;
  exe[len] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return NULL;
  *slash = 0; /* the binary's directory: PREFIX/bin, or BUILD/bin in the source tree */
  snprintf(buf, n, "%s/../share/w8a8/plot.py", exe);
  if (readable(buf)) return buf;
  snprintf(buf, n, "%s/../../bench/plot.py", exe);
  if (readable(buf)) return buf;
  return NULL;
}

/* Runs python3 SCRIPT INPUT -o OUT ...: its exit status, 127 when python3 could not be started. */
static int run_script(const char *script, const char *input, const plot_args *ar) {
  char *argv[20];
  int n = 0;
  argv[n++] = "python3";
  argv[n++] = (char *)script;
  argv[n++] = (char *)input;
  argv[n++] = "-o";
  argv[n++] = (char *)ar->out;
  argv[n++] = "--metric";
  argv[n++] = (char *)ar->metric;
  if (ar->dtype) argv[n++] = "--dtype", argv[n++] = (char *)ar->dtype;
  if (ar->impl) argv[n++] = "--impl", argv[n++] = (char *)ar->impl;
  if (ar->shape) argv[n++] = "--shape", argv[n++] = (char *)ar->shape;
  argv[n] = NULL;
  fflush(NULL);
  const pid_t pid = fork();
  if (pid < 0) return 127;
  if (pid == 0) {
    execvp("python3", argv);
    _exit(127);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return 127;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

int w8a8_cli_plot(int argc, char **argv) {
  plot_args ar;
  memset(&ar, 0, sizeof ar);
  ar.metric = "tflops";
  ar.width = 64;
  ar.height = 16;
  cli_parser p;
  cli_parser_init(&p, "plot", plot_opts, NPLOT_OPTS, argc, argv);
  int rc = -1, c;
  const char *v;
  while (rc < 0 && (c = cli_next_opt(&p, &v)) != CLI_OPT_END) {
    switch (c) {
      case CLI_OPT_HELP:
        usage(stdout);
        rc = CLI_EXIT_OK;
        break;
      case CLI_OPT_ERROR: rc = CLI_EXIT_USAGE; break;
      case 'o': ar.out = v; break;
      case 'y': ar.metric = v; break;
      case 'd': ar.dtype = v; break;
      case PLOT_IMPL:
        if (!cli_list_ok(v)) rc = cli_usage_error(&p, "--impl takes a comma list of implementation names, got '%s'", v);
        ar.impl = v;
        break;
      case PLOT_SHAPE: ar.shape = v; break;
      case PLOT_WIDTH:
        if (!cli_opt_int(&p, v, 20, 400, "columns", &ar.width)) rc = CLI_EXIT_USAGE;
        break;
      case PLOT_HEIGHT:
        if (!cli_opt_int(&p, v, 5, 200, "rows", &ar.height)) rc = CLI_EXIT_USAGE;
        break;
      case PLOT_SCRIPT: ar.script = v; break;
    }
  }
  if (rc < 0) {
    const int np = argc - p.first_positional;
    if (np == 0)
      rc = cli_usage_error(&p, "no input: give the JSON lines to plot, a FILE or '-' for stdin");
    else if (np > 1)
      rc = cli_usage_error(&p, "one input file, got %d ('%s', '%s'%s)", np, argv[p.first_positional],
                           argv[p.first_positional + 1], np > 2 ? ", ..." : "");
    else
      ar.in = argv[p.first_positional];
  }
  cli_parser_free(&p);
  if (rc >= 0) return rc;

  /* read everything (stdin may have to become a file for the image) */
  FILE *in = strcmp(ar.in, "-") ? fopen(ar.in, "r") : stdin;
  if (!in) {
    fprintf(stderr, "w8a8 plot: cannot read '%s': %s\n", ar.in, strerror(errno));
    return CLI_EXIT_FAIL;
  }
  const char *name = in == stdin ? "(stdin)" : ar.in;
  static plot_data d;
  memset(&d, 0, sizeof d);
  char *line = NULL, tmp[256] = "";
  size_t cap = 0;
  ssize_t len;
  long lineno = 0;
  FILE *copy = NULL;
  if (in == stdin && ar.out) {
    const char *td = getenv("TMPDIR");
    snprintf(tmp, sizeof tmp, "%s/w8a8_plot.XXXXXX", td && *td ? td : "/tmp");
    const int fd = mkstemp(tmp);
    copy = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!copy) {
      fprintf(stderr, "w8a8 plot: cannot make a temporary file for stdin: %s\n", strerror(errno));
      return CLI_EXIT_FAIL;
    }
  }
  rc = CLI_EXIT_OK;
  while (rc == CLI_EXIT_OK && (len = getline(&line, &cap, in)) >= 0) {
    lineno++;
    if (copy) fwrite(line, 1, (size_t)len, copy);
    if (take_line(&d, &ar, name, lineno, line, (size_t)len) != 0) rc = CLI_EXIT_FAIL;
  }
  free(line);
  if (in != stdin) fclose(in);
  if (copy && fclose(copy) != 0) rc = CLI_EXIT_FAIL;
  if (rc == CLI_EXIT_OK && d.used == 0) {
    fprintf(stderr, "w8a8 plot: %s: no rows with a numeric '%s' and M > 0%s (%ld rows read)\n", name, ar.metric,
            ar.dtype || ar.impl || ar.shape ? " that pass the filters" : "", d.rows);
    rc = CLI_EXIT_FAIL;
  }
  if (rc == CLI_EXIT_OK && ar.out) {
    char buf[4200];
    const char *script = find_script(&ar, buf, sizeof buf);
    int st = 127;
    if (!script) {
      fprintf(stderr, "w8a8 plot: -o: bench/plot.py not found (give --script PATH or set W8A8_PLOT_SCRIPT); no "
                      "image, the chart in the terminal instead:\n");
    } else {
      st = run_script(script, tmp[0] ? tmp : ar.in, &ar);
      if (st == 127)
        fprintf(stderr, "w8a8 plot: -o: python3 could not be started; no image, the chart in the terminal instead:\n");
      else if (st == 3)
        fprintf(stderr, "w8a8 plot: -o: no image (see above); the chart in the terminal instead:\n");
    }
    if (st == 0) {
      printf("w8a8 plot: wrote %s\n", ar.out);
    } else {
      if (!script || st == 127 || st == 3) draw(stdout, &d, &ar);
      rc = CLI_EXIT_FAIL;
    }
  } else if (rc == CLI_EXIT_OK) {
    draw(stdout, &d, &ar);
  }
  if (tmp[0]) unlink(tmp);
  for (int i = 0; i < d.ns; i++) free(d.s[i].p);
  return rc;
}
