/*
 * Statistics and output of mpiar-bench: the summary table on stdout, CSV and JSON. Nothing here
 * calls MPI; main.c hands over rows whose times are already the maximum over ranks.
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/tool.h"

/* Median of v[0..n-1] (sorted in place); NaN when n == 0. */
static double median_inplace(double *v, int n) {
  return tool_median(v, n);
}

void bench_stat_compute(const double *times, int n, double *scratch, bench_stat_t *out) {
  memcpy(scratch, times, (size_t)n * sizeof *times);
  out->median = median_inplace(scratch, n);
  out->min = scratch[0];
  out->max = scratch[n - 1];
}

double bench_floor_bytes(size_t bytes, int local, int nranks, int in_place) {
  /* Every element of every rank's output depends on every rank's input, so each of the node's
   * `local` inputs is read once and each output written once. In place on a single rank the
   * result is the input: nothing need move. */
  if (in_place && nranks == 1) {
    return 0.0;
  }
  return 2.0 * (double)local * (double)bytes;
}

void bench_figures(const bench_run_t *run, const bench_row_t *row, int alg, bench_figures_t *f) {
  const double p = run->nranks;
  const double t = row->alg[alg].median;
  f->algbw = t > 0 ? (double)row->bytes / t / 1e9 : NAN;
  f->busbw = f->algbw * 2.0 * (p - 1.0) / p;
  f->limit_bw = (row->limit_bytes > 0 && row->limit_time > 0)
                    ? (double)row->limit_bytes / row->limit_time / 1e9
                    : NAN;
  f->pct_limit = (f->limit_bw > 0) ? 100.0 * f->busbw / f->limit_bw : NAN;
  f->speedup = (run->mpi_index >= 0 && t > 0) ? row->alg[run->mpi_index].median / t : NAN;
  f->regret = row->best_alg >= 0 && row->best_time > 0 ? t / row->best_time - 1.0 : NAN;
  f->floor_busbw =
      row->floor_time > 0 ? (double)row->bytes / row->floor_time / 1e9 * 2.0 * (p - 1.0) / p : NAN;
  f->pct_floor = row->floor_time > 0 && t > 0 ? 100.0 * row->floor_time / t : NAN;
}

/* ---- Regret ------------------------------------------------------------------------------- */

/* Targets for `auto`'s regret (with a tuning file made on the same machine). */
#define REGRET_MEDIAN_TARGET 0.02
#define REGRET_WORST_TARGET 0.05

/* Regret of one column over the sizes: median and worst (with its size). */
typedef struct regret_stats {
  int n;
  double median, worst;
  size_t worst_bytes;
  const char *worst_pick; /* auto: what it picked there */
  const char *worst_best; /* the best column there */
} regret_stats_t;

static void regret_of(const bench_run_t *run, int alg, regret_stats_t *r) {
  memset(r, 0, sizeof *r);
  r->median = r->worst = NAN;
  if (alg < 0 || run->nrows == 0) {
    return;
  }
  double *v = malloc((size_t)run->nrows * sizeof *v);
  if (v == NULL) {
    return;
  }
  for (int k = 0; k < run->nrows; k++) {
    bench_figures_t f;
    bench_figures(run, &run->rows[k], alg, &f);
    if (isnan(f.regret)) {
      continue;
    }
    v[r->n++] = f.regret;
    if (r->n == 1 || f.regret > r->worst) {
      r->worst = f.regret;
      r->worst_bytes = run->rows[k].bytes;
      r->worst_pick = run->rows[k].auto_pick;
      r->worst_best = run->opts->algs[run->rows[k].best_alg];
    }
  }
  r->median = tool_median(v, r->n);
  free(v);
}

/* 0 small, 1 medium, 2 large. */
static int size_range(size_t bytes) {
  if (bytes <= BENCH_SMALL_MAX_BYTES) {
    return 0;
  }
  return bytes >= BENCH_LARGE_MIN_BYTES ? 2 : 1;
}

static const char *const range_names[3] = {"small", "medium", "large"};

enum { N_TARGETS = 8 };

/* The targets of the shared-buffer path at p = 2 (docs/performance.md). */
#define SHARED_SPEEDUP_TARGET 4.0
#define SHARED_FLOOR_PCT_TARGET 70.0
#define SHARED_FLOOR_MIN_BYTES ((size_t)16 << 20)

/* What the closing summary, the JSON summary and the targets are computed from. */
typedef struct summary {
  int nrange[3];
  double speedup[BENCH_MAX_ALGS][3];  /* median over the range's sizes of time(mpi)/time(alg) */
  double pct_large[BENCH_MAX_ALGS];   /* median over sizes >= 4 MiB of busbw % of the limit */
  double floor_large[BENCH_MAX_ALGS]; /* median over sizes >= 4 MiB of % of the memory floor */
  double limit_large;                 /* median limit bandwidth over sizes >= 4 MiB, GB/s */
  int have_auto_vs_mpi;
  int judge_targets;
  double auto_worst; /* smallest time(mpi)/time(auto) over all sizes */
  size_t auto_worst_bytes;
  const char *auto_worst_pick;
  int ntargets;
  struct {
    char what[80];
    const char *unit;
    double value;
    double target;
    int at_most; /* 1: value <= target meets it; 0: value >= target */
  } targets[N_TARGETS];
} summary_t;

static void add_target(summary_t *s, const char *what, const char *unit, double value,
                       double target, int at_most) {
  if (s->ntargets == N_TARGETS) {
    return;
  }
  snprintf(s->targets[s->ntargets].what, sizeof s->targets[0].what, "%s", what);
  s->targets[s->ntargets].unit = unit;
  s->targets[s->ntargets].value = value;
  s->targets[s->ntargets].target = target;
  s->targets[s->ntargets].at_most = at_most;
  s->ntargets++;
}

/*
 * -m shared at p = 2: auto on shared buffers >= 4x MPI_Allreduce at 16 MiB and 64 MiB (where the
 * sweep has them), >= 70 % of the memory floor at every size from 16 MiB (the worst counts), and
 * at 8 B no slower than mpiar's MPI path (`auto` on ordinary buffers).
 */
static void shared_targets(const bench_run_t *run, summary_t *s) {
  const int si = run->shared_index, mi = run->mpi_index, ai = run->auto_index;
  if (run->nranks != 2 || si < 0) {
    return;
  }
  double worst_floor = INFINITY;
  size_t worst_bytes = 0;
  for (int r = 0; r < run->nrows; r++) {
    const bench_row_t *row = &run->rows[r];
    bench_figures_t f;
    bench_figures(run, row, si, &f);
    char what[80], sz[32];
    bench_format_size(row->bytes, sz, sizeof sz);
    if (mi >= 0 && (row->bytes == (size_t)16 << 20 || row->bytes == (size_t)64 << 20)) {
      snprintf(what, sizeof what, "auto/shared at %s, speedup vs MPI_Allreduce", sz);
      add_target(s, what, "x", f.speedup, SHARED_SPEEDUP_TARGET, 0);
    }
    if (row->bytes >= SHARED_FLOOR_MIN_BYTES && !isnan(f.pct_floor) && f.pct_floor < worst_floor) {
      worst_floor = f.pct_floor;
      worst_bytes = row->bytes;
    }
    if (ai >= 0 && row->bytes == 8) {
      add_target(s, "auto/shared at 8 B in the MPI path's time (auto)", "x",
                 row->alg[si].median / row->alg[ai].median, 1.0, 1);
    }
  }
  if (worst_bytes > 0) {
    char what[80], sz[32];
    snprintf(what, sizeof what, "auto/shared at >= 16 MiB, worst size (%s), %% of the floor",
             bench_format_size(worst_bytes, sz, sizeof sz));
    add_target(s, what, "%", worst_floor, SHARED_FLOOR_PCT_TARGET, 0);
  }
}

/* The median over the sizes of range @p g of one figure of column @p a (the field at @p field of
 * bench_figures_t), sizes where it is undefined left out; @p buf holds nrows doubles. */
static double range_median(const bench_run_t *run, int a, int g, size_t field, double *buf) {
  int n = 0;
  for (int r = 0; r < run->nrows; r++) {
    bench_figures_t f;
    bench_figures(run, &run->rows[r], a, &f);
    double v;
    memcpy(&v, (const char *)&f + field, sizeof v);
    if (size_range(run->rows[r].bytes) == g && !isnan(v)) {
      buf[n++] = v;
    }
  }
  return median_inplace(buf, n);
}

static void summarize(const bench_run_t *run, summary_t *s) {
  const int nalgs = run->opts->nalgs;
  const int nrows = run->nrows;
  memset(s, 0, sizeof *s);
  double *buf = malloc(((size_t)nrows + 1) * sizeof *buf);
  if (buf == NULL) {
    /* Without memory the summary is left empty; the table rows were already printed. */
    for (int a = 0; a < BENCH_MAX_ALGS; a++) {
      s->speedup[a][0] = s->speedup[a][1] = s->speedup[a][2] = s->pct_large[a] = NAN;
      s->floor_large[a] = NAN;
    }
    s->limit_large = NAN;
    return;
  }
  for (int r = 0; r < nrows; r++) {
    s->nrange[size_range(run->rows[r].bytes)]++;
  }
  for (int a = 0; a < nalgs; a++) {
    for (int g = 0; g < 3; g++) {
      s->speedup[a][g] = range_median(run, a, g, offsetof(bench_figures_t, speedup), buf);
    }
    s->pct_large[a] = range_median(run, a, 2, offsetof(bench_figures_t, pct_limit), buf);
    s->floor_large[a] = range_median(run, a, 2, offsetof(bench_figures_t, pct_floor), buf);
  }
  s->limit_large = range_median(run, 0, 2, offsetof(bench_figures_t, limit_bw), buf);

  const int ai = run->auto_index;
  const int mi = run->mpi_index;
  if (ai >= 0 && mi >= 0 && nrows > 0) {
    s->have_auto_vs_mpi = 1;
    /* The performance targets are stated for two ranks; -m shared has its own (below). */
    s->judge_targets = run->nranks == 2 && !run->opts->shared_mode;
    s->auto_worst = INFINITY;
    for (int r = 0; r < nrows; r++) {
      bench_figures_t f;
      bench_figures(run, &run->rows[r], ai, &f);
      if (f.speedup < s->auto_worst) {
        s->auto_worst = f.speedup;
        s->auto_worst_bytes = run->rows[r].bytes;
        s->auto_worst_pick = run->rows[r].auto_pick;
      }
    }
  }
  if (s->judge_targets) {
    /* The targets are judged on `auto`, the algorithm users get by default. */
    int n = 0;
    for (int r = 0; r < nrows; r++) {
      if (size_range(run->rows[r].bytes) == 0) {
        buf[n++] = run->rows[r].alg[ai].median / run->rows[r].alg[mi].median;
      }
    }
    if (n > 0) {
      add_target(s, "auto latency at 4 B..4 KiB, median, in MPI_Allreduce's time", "x",
                 median_inplace(buf, n), 0.6, 1);
    }
    if (s->nrange[2] > 0) {
      add_target(s, "auto busbw at >= 4 MiB, median, in MPI_Allreduce's busbw", "x",
                 s->speedup[ai][2], 3.0, 0);
      if (!isnan(s->pct_large[ai])) {
        add_target(s, "auto busbw at >= 4 MiB, median, in % of the limit", "%", s->pct_large[ai],
                   85.0, 0);
      }
    }
    add_target(s, "auto vs MPI_Allreduce, worst size, speedup", "x", s->auto_worst, 1.0, 0);
  }
  free(buf);
  shared_targets(run, s);
}

static int target_met(const summary_t *s, int t) {
  double v = s->targets[t].value;
  return s->targets[t].at_most ? v <= s->targets[t].target : v >= s->targets[t].target;
}

/* ---- Summary table ---------------------------------------------------------------------- */

/* Each mpiar algorithm's column holds "median-us speedup": 10 + 1 + 7 characters. */
static int column_width(const char *name, int is_mpi) {
  int w = is_mpi ? 10 : 18;
  int len = (int)strlen(name);
  return len > w ? len : w;
}

void bench_table_header(FILE *f, const bench_run_t *run) {
  const bench_opts_t *o = run->opts;
  fprintf(f, "# mpiar-bench %s: %d ranks, %s %s, %s, kernel %s, %s\n", mpiar_version(), run->nranks,
          mpiar_dtype_name(o->dtype), mpiar_op_name(o->op),
          o->inplace ? "in place" : "out of place", run->kernel ? run->kernel : "?",
          run->mpi_library);
  fprintf(f, "# %s, %s%s\n", run->host, run->date,
          o->validate ? ", every result checked (-c)" : "");
  fprintf(f, "# us: median time over the repetitions of the slowest rank, microseconds\n");
  if (run->mpi_index >= 0) {
    fprintf(f, "# xMPI: speedup vs MPI = time(MPI_Allreduce) / time(algorithm); > 1 is faster "
               "than MPI\n");
  } else {
    fprintf(f, "# xMPI: not measured (no `mpi` in the list)\n");
  }
  fprintf(f, "# limit: the fastest way this MPI moved what a schedule of the size must move (best "
             "repetition of\n#   a paired exchange of 2(p-1)/p * size bytes per rank and of each "
             "algorithm's own messages\n#   without its reductions); time, and bandwidth for "
             "2(p-1)/p * size bytes (see --help)\n");
  char nb[32];
  fprintf(f,
          "# floor: the memory floor, 2 x (ranks per node) x size bytes read and written over the "
          "node's memory\n#   bandwidth: %.3f GB/s (median of %d passes, %.3f .. %.3f), %d "
          "ranks at once each streaming\n#   through %s in place (docs/performance.md)\n",
          run->node_bw / 1e9, run->node_passes, run->node_bw_min / 1e9, run->node_bw_max / 1e9,
          run->ranks_per_node, tool_format_bytes((double)run->node_buffer, nb, sizeof nb));
  fprintf(f, "# regret: time / the best column's - 1 (the best of every algorithm and segment "
             "size), for auto and mpi\n");
  fprintf(f, "# best: the highest mpiar busbw = size / time * 2(p-1)/p, GB/s, and its %% of the "
             "limit bandwidth\n#   and of the memory floor (floor time / its time)\n");
  if (o->shared_mode || run->shared_index >= 0) {
    fprintf(f, "# NAME/shared: on mpiar_alloc buffers (the zero-copy path, whatever NAME says); "
               "the others on\n#   ordinary buffers (auto: mpiar's MPI path)\n");
  }
  if (run->auto_index >= 0) {
    const char *tf = getenv("MPIAR_TUNING_FILE");
    fprintf(f, "# auto: %s%s\n", tf && *tf ? "MPIAR_TUNING_FILE=" : "",
            tf && *tf ? tf : "no MPIAR_TUNING_FILE (the built-in model)");
  }
  fprintf(f, "#%10s %6s", "size", "iters");
  for (int a = 0; a < o->nalgs; a++) {
    int is_mpi = a == run->mpi_index;
    fprintf(f, " | %-*s", column_width(o->algs[a], is_mpi), o->algs[a]);
  }
  fprintf(f, " | %-15s | %-18s | %-10s | %s\n", "regret", "limit", "floor", "best busbw");
  fprintf(f, "#%10s %6s", "", "");
  for (int a = 0; a < o->nalgs; a++) {
    int is_mpi = a == run->mpi_index;
    int w = column_width(o->algs[a], is_mpi);
    if (is_mpi) {
      fprintf(f, " | %*s", w, "us");
    } else {
      fprintf(f, " | %10s %6s%*s", "us", "xMPI", w - 17, "");
    }
  }
  fprintf(f, " | %7s %7s | %10s %7s | %10s | %7s %6s %6s  %s\n", "auto", "mpi", "us", "GB/s", "us",
          "GB/s", "%limit", "%floor", "algorithm");
  fflush(f);
}

void bench_table_row(FILE *f, const bench_run_t *run, const bench_row_t *row) {
  const bench_opts_t *o = run->opts;
  char sz[32];
  fprintf(f, " %10s %6d", bench_format_size(row->bytes, sz, sizeof sz), row->iters);
  int best = -1;
  double best_busbw = -1.0;
  double best_pct = NAN;
  double best_floor = NAN;
  for (int a = 0; a < o->nalgs; a++) {
    bench_figures_t fig;
    bench_figures(run, row, a, &fig);
    int is_mpi = a == run->mpi_index;
    int w = column_width(o->algs[a], is_mpi);
    if (is_mpi) {
      fprintf(f, " | %*.2f", w, row->alg[a].median * 1e6);
    } else {
      if (isnan(fig.speedup)) {
        fprintf(f, " | %10.2f %6s %*s", row->alg[a].median * 1e6, "-", w - 18, "");
      } else {
        fprintf(f, " | %10.2f %6.2fx%*s", row->alg[a].median * 1e6, fig.speedup, w - 18, "");
      }
      if (fig.busbw > best_busbw) {
        best_busbw = fig.busbw;
        best_pct = fig.pct_limit;
        best_floor = fig.pct_floor;
        best = a;
      }
    }
  }
  fprintf(f, " |");
  for (int k = 0; k < 2; k++) {
    int a = k == 0 ? run->auto_index : run->mpi_index;
    bench_figures_t fig;
    if (a >= 0) {
      bench_figures(run, row, a, &fig);
    }
    if (a < 0 || isnan(fig.regret)) {
      fprintf(f, " %7s", "-");
    } else {
      fprintf(f, " %+6.1f%%", 100.0 * fig.regret);
    }
  }
  bench_figures_t lim;
  bench_figures(run, row, 0, &lim);
  fprintf(f, " | %10.2f %7.3f | %10.2f", row->limit_time * 1e6, lim.limit_bw,
          row->floor_time * 1e6);
  if (best >= 0) {
    fprintf(f, " | %7.3f %5.1f%% %5.1f%%  %s", best_busbw, best_pct, best_floor, o->algs[best]);
    if (best == run->auto_index && row->auto_pick != NULL) {
      fprintf(f, " (%s)", row->auto_pick);
    }
  } else {
    fprintf(f, " | %7s %6s %6s  %s", "-", "-", "-", "-");
  }
  long failures = 0;
  for (int a = 0; a < o->nalgs; a++) {
    failures += row->alg[a].failures;
  }
  if (failures > 0) {
    fprintf(f, "  CHECK FAILED (%ld)", failures);
  }
  fputc('\n', f);
  fflush(f);
}

/* "1.23x" and "85.0%", or "-" where a range has no sizes. */
static const char *fmt_ratio(char *buf, double v) {
  snprintf(buf, 24, isnan(v) ? "-" : "%.2fx", v);
  return buf;
}

static const char *fmt_pct(char *buf, double v) {
  snprintf(buf, 24, isnan(v) ? "-" : "%.1f%%", v);
  return buf;
}

void bench_table_summary(FILE *f, const bench_run_t *run) {
  const bench_opts_t *o = run->opts;
  summary_t s;
  summarize(run, &s);
  fprintf(f, "#\n# Summary of the %s calls:\n",
          o->inplace ? "in-place (MPIAR_IN_PLACE)" : "out-of-place");
  if (run->mpi_index >= 0) {
    fprintf(f, "# Speedup vs MPI_Allreduce, median over the sizes of each range (> 1: faster):\n");
    fprintf(f, "#   %-28s %14s %14s %16s %18s %18s\n", "algorithm", "small <=4 KiB", "medium",
            "large >=4 MiB", "large busbw %limit", "large %floor");
    fprintf(f, "#   %-28s %14d %14d %16d\n", "(sizes)", s.nrange[0], s.nrange[1], s.nrange[2]);
    for (int a = 0; a < o->nalgs; a++) {
      if (a == run->mpi_index) {
        continue;
      }
      char c[5][24];
      fprintf(f, "#   %-28s %14s %14s %16s %18s %18s\n", o->algs[a],
              fmt_ratio(c[0], s.speedup[a][0]), fmt_ratio(c[1], s.speedup[a][1]),
              fmt_ratio(c[2], s.speedup[a][2]), fmt_pct(c[3], s.pct_large[a]),
              fmt_pct(c[4], s.floor_large[a]));
    }
    char c[2][24];
    fprintf(f, "#   %-28s %14s %14s %16s %18s %18s\n", "mpi", "", "", "",
            fmt_pct(c[0], s.pct_large[run->mpi_index]),
            fmt_pct(c[1], s.floor_large[run->mpi_index]));
  } else {
    fprintf(f, "# Busbw in %% of the point-to-point limit and time in %% of the memory floor at "
               ">= 4 MiB, median over sizes:\n");
    for (int a = 0; a < o->nalgs; a++) {
      char c[2][24];
      fprintf(f, "#   %-28s %6s %6s\n", o->algs[a], fmt_pct(c[0], s.pct_large[a]),
              fmt_pct(c[1], s.floor_large[a]));
    }
  }
  fprintf(f,
          "# Node memory bandwidth of the floor: %.3f GB/s before the sweep, %.3f GB/s after "
          "it (median of %d passes)\n",
          run->node_bw / 1e9, run->node_bw_end / 1e9, run->node_passes_end);
  if (!isnan(s.limit_large)) {
    fprintf(f, "# Point-to-point limit at >= 4 MiB: %.3f GB/s (median over sizes)\n",
            s.limit_large);
  }
  if (s.have_auto_vs_mpi) {
    char sz[32];
    fprintf(f, "# auto vs mpi, worst case: %.2fx at %s (auto picked %s)\n", s.auto_worst,
            bench_format_size(s.auto_worst_bytes, sz, sizeof sz),
            s.auto_worst_pick ? s.auto_worst_pick : "?");
  }
  regret_stats_t ra, rm;
  regret_of(run, run->auto_index, &ra);
  regret_of(run, run->mpi_index, &rm);
  if (ra.n > 0 || rm.n > 0) {
    fprintf(f,
            "# Regret = median time / the best column's - 1 (best of every algorithm and "
            "segment size), over %d sizes:\n",
            ra.n > rm.n ? ra.n : rm.n);
  }
  if (ra.n > 0) {
    char sz[32];
    int table = 0;
    for (int k = 0; k < run->nrows; k++) {
      table +=
          run->rows[k].auto_source != NULL && strcmp(run->rows[k].auto_source, "tuning table") == 0;
    }
    fprintf(f,
            "#   auto: median %.1f%%, worst %.1f%% at %s (picked %s, best %s); choices from the "
            "tuning table at %d of %d sizes\n",
            100 * ra.median, 100 * ra.worst, bench_format_size(ra.worst_bytes, sz, sizeof sz),
            ra.worst_pick ? ra.worst_pick : "?", ra.worst_best, table, run->nrows);
    fprintf(f,
            "#   auto's regret targets (with a tuning file of this machine): median <= %.0f%% "
            "%s, worst <= %.0f%% %s\n",
            100 * REGRET_MEDIAN_TARGET, ra.median <= REGRET_MEDIAN_TARGET ? "met" : "NOT met",
            100 * REGRET_WORST_TARGET, ra.worst <= REGRET_WORST_TARGET ? "met" : "NOT met");
  }
  if (rm.n > 0) {
    char sz[32];
    fprintf(f, "#   mpi (MPI_Allreduce's own choice): median %.1f%%, worst %.1f%% at %s\n",
            100 * rm.median, 100 * rm.worst, bench_format_size(rm.worst_bytes, sz, sizeof sz));
  }
  if (s.ntargets > 0) {
    fprintf(f, "# Targets at p=2 (judged on %s):\n", s.judge_targets ? "auto" : "auto/shared");
    for (int t = 0; t < s.ntargets; t++) {
      fprintf(f, "#   %-62s %8.2f%s  target %s %.2f%s  %s\n", s.targets[t].what, s.targets[t].value,
              s.targets[t].unit, s.targets[t].at_most ? "<=" : ">=", s.targets[t].target,
              s.targets[t].unit, target_met(&s, t) ? "met" : "NOT met");
    }
  }
  fflush(f);
}

/* ---- CSV -------------------------------------------------------------------------------- */

void bench_csv_header(FILE *f) {
  fprintf(f, "bytes,count,dtype,op,nranks,inplace,algorithm,selected,iters,warmup,"
             "time_us_median,time_us_min,time_us_max,algbw_GBps,busbw_GBps,limit_bytes,"
             "limit_us,limit_GBps,busbw_pct_limit,speedup_vs_mpi,failures,limit_plan,"
             "regret_vs_best,memory,floor_bytes,floor_us,node_GBps,floor_busbw_GBps,pct_floor\n");
}

/* A number, or an empty field where it is undefined, so that gnuplot and csv readers skip it. */
static void csv_num(FILE *f, const char *fmt, double v) {
  fputc(',', f);
  if (isfinite(v)) {
    fprintf(f, fmt, v);
  }
}

void bench_csv_row(FILE *f, const bench_run_t *run, const bench_row_t *row) {
  const bench_opts_t *o = run->opts;
  for (int a = 0; a < o->nalgs; a++) {
    bench_figures_t fig;
    bench_figures(run, row, a, &fig);
    const char *selected = o->algs[a];
    if (a == run->auto_index && row->auto_pick != NULL) {
      selected = row->auto_pick;
    }
    fprintf(f, "%zu,%zu,%s,%s,%d,%d,%s,%s,%d,%d", row->bytes, row->count,
            mpiar_dtype_name(o->dtype), mpiar_op_name(o->op), run->nranks, o->inplace, o->algs[a],
            selected, row->iters, row->warmup);
    csv_num(f, "%.9g", row->alg[a].median * 1e6);
    csv_num(f, "%.9g", row->alg[a].min * 1e6);
    csv_num(f, "%.9g", row->alg[a].max * 1e6);
    csv_num(f, "%.9g", fig.algbw);
    csv_num(f, "%.9g", fig.busbw);
    fprintf(f, ",%zu", row->limit_bytes);
    csv_num(f, "%.9g", row->limit_time * 1e6);
    csv_num(f, "%.9g", fig.limit_bw);
    csv_num(f, "%.9g", fig.pct_limit);
    csv_num(f, "%.9g", fig.speedup);
    fprintf(f, ",%ld,%s", row->alg[a].failures, row->limit_plan ? row->limit_plan : "");
    csv_num(f, "%.9g", fig.regret);
    fprintf(f, ",%s,%.0f", o->alg_shared[a] ? "shared" : "malloc", row->floor_bytes);
    csv_num(f, "%.9g", row->floor_time * 1e6);
    csv_num(f, "%.9g", run->node_bw / 1e9);
    csv_num(f, "%.9g", fig.floor_busbw);
    csv_num(f, "%.9g", fig.pct_floor);
    fputc('\n', f);
  }
  fflush(f);
}

/* ---- JSON ------------------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
    if (*p == '"' || *p == '\\') {
      fprintf(f, "\\%c", *p);
    } else if (*p < 0x20) {
      fprintf(f, "\\u%04x", *p);
    } else {
      fputc(*p, f);
    }
  }
  fputc('"', f);
}

/* JSON has no NaN or infinity: an undefined figure is null. */
static void json_num(FILE *f, double v) {
  if (isfinite(v)) {
    fprintf(f, "%.9g", v);
  } else {
    fputs("null", f);
  }
}

/* {"ring": v[0], "auto": v[1], ...}: one figure of every column. */
static void json_per_column(FILE *f, const bench_opts_t *o, const double *v) {
  fputc('{', f);
  for (int a = 0; a < o->nalgs; a++) {
    fprintf(f, "%s", a ? ", " : "");
    json_str(f, o->algs[a]);
    fprintf(f, ": ");
    json_num(f, v[a]);
  }
  fputc('}', f);
}

int bench_json_write(FILE *f, const bench_run_t *run) {
  const bench_opts_t *o = run->opts;
  summary_t s;
  summarize(run, &s);
  fprintf(f, "{\n  \"program\": \"mpiar-bench\",\n  \"mpiar_version\": ");
  json_str(f, mpiar_version());
  fprintf(f, ",\n  \"date\": ");
  json_str(f, run->date);
  fprintf(f, ",\n  \"host\": ");
  json_str(f, run->host);
  fprintf(f, ",\n  \"mpi_library\": ");
  json_str(f, run->mpi_library);
  fprintf(f, ",\n  \"kernel\": ");
  json_str(f, run->kernel);
  fprintf(f, ",\n  \"nranks\": %d,\n  \"dtype\": \"%s\",\n  \"op\": \"%s\",\n", run->nranks,
          mpiar_dtype_name(o->dtype), mpiar_op_name(o->op));
  fprintf(f, "  \"inplace\": %s,\n  \"validate\": %s,\n", o->inplace ? "true" : "false",
          o->validate ? "true" : "false");
  fprintf(f,
          "  \"definitions\": {\n"
          "    \"time_us\": \"time of one allreduce on the slowest rank, microseconds, "
          "median/min/max over repetitions\",\n"
          "    \"algbw_GBps\": \"bytes / median time, 1e9 bytes per second\",\n"
          "    \"busbw_GBps\": \"algbw * 2(p-1)/p\",\n"
          "    \"limit\": \"the best repetition of the fastest plan: a paired MPI_Isend/MPI_Irecv "
          "exchange of limit_bytes = 2(p-1)/p * bytes per rank, or an algorithm's own sends and "
          "receives posted at once without reductions; bw_GBps = limit_bytes / time\",\n"
          "    \"busbw_pct_limit\": \"busbw / limit bw * 100\",\n"
          "    \"speedup_vs_mpi\": \"median time of mpi / median time of the algorithm; > 1 "
          "is faster than MPI_Allreduce\",\n"
          "    \"regret_vs_best\": \"median time / the best column's median - 1, the best of "
          "every algorithm and segment size (not auto, not mpi)\",\n"
          "    \"floor\": \"the memory floor: bytes = 2 x ranks per node x bytes (every input "
          "read and every output written once), time_us = bytes / the node's memory bandwidth "
          "(memory_floor.node_GBps), busbw_GBps = the busbw of a call of that time\",\n"
          "    \"pct_floor\": \"floor time / median time * 100\",\n"
          "    \"memory\": \"malloc: ordinary buffers; shared: mpiar_alloc buffers (the "
          "zero-copy path)\"\n  },\n");
  fprintf(f, "  \"memory_floor\": {\"node_GBps\": ");
  json_num(f, run->node_bw / 1e9);
  fprintf(f, ", \"min_GBps\": ");
  json_num(f, run->node_bw_min / 1e9);
  fprintf(f, ", \"max_GBps\": ");
  json_num(f, run->node_bw_max / 1e9);
  fprintf(f, ", \"passes\": %d, \"end_node_GBps\": ", run->node_passes);
  json_num(f, run->node_bw_end / 1e9);
  fprintf(f, ", \"end_passes\": %d, \"buffer_bytes_per_rank\": %zu, \"ranks_per_node\": %d},\n",
          run->node_passes_end, run->node_buffer, run->ranks_per_node);
  fprintf(f, "  \"algorithms\": [");
  for (int a = 0; a < o->nalgs; a++) {
    fprintf(f, "%s", a ? ", " : "");
    json_str(f, o->algs[a]);
  }
  fprintf(f, "],\n  \"results\": [");
  for (int r = 0; r < run->nrows; r++) {
    const bench_row_t *row = &run->rows[r];
    bench_figures_t lim;
    bench_figures(run, row, 0, &lim);
    fprintf(f, "%s\n    {\"bytes\": %zu, \"count\": %zu, \"iters\": %d, \"warmup\": %d,\n",
            r ? "," : "", row->bytes, row->count, row->iters, row->warmup);
    fprintf(f, "     \"limit\": {\"bytes\": %zu, \"time_us\": ", row->limit_bytes);
    json_num(f, row->limit_time * 1e6);
    fprintf(f, ", \"bw_GBps\": ");
    json_num(f, lim.limit_bw);
    fprintf(f, ", \"plan\": ");
    if (row->limit_plan != NULL) {
      json_str(f, row->limit_plan);
    } else {
      fputs("null", f);
    }
    fprintf(f, "},\n     \"floor\": {\"bytes\": %.0f, \"time_us\": ", row->floor_bytes);
    json_num(f, row->floor_time * 1e6);
    fprintf(f, ", \"busbw_GBps\": ");
    bench_figures_t fl;
    bench_figures(run, row, 0, &fl);
    json_num(f, fl.floor_busbw);
    fprintf(f, "},\n     \"auto_selected\": ");
    if (row->auto_pick != NULL) {
      json_str(f, row->auto_pick);
      fprintf(f, ", \"auto_segment_bytes\": %zu, \"auto_source\": ", row->auto_segment);
      json_str(f, row->auto_source);
    } else {
      fputs("null", f);
    }
    fprintf(f, ", \"best\": ");
    if (row->best_alg >= 0) {
      json_str(f, o->algs[row->best_alg]);
    } else {
      fputs("null", f);
    }
    /* The columns the best is taken over: distinct schedules (not copies of another column). */
    fprintf(f, ", \"best_of\": [");
    for (int a = 0, n = 0; a < o->nalgs; a++) {
      if (row->best_candidate[a]) {
        fprintf(f, "%s", n++ ? ", " : "");
        json_str(f, o->algs[a]);
      }
    }
    fputc(']', f);
    fprintf(f, ",\n     \"algorithms\": {");
    for (int a = 0; a < o->nalgs; a++) {
      bench_figures_t fig;
      bench_figures(run, row, a, &fig);
      fprintf(f, "%s\n       ", a ? "," : "");
      json_str(f, o->algs[a]);
      fprintf(f, ": {\"time_us\": {\"median\": ");
      json_num(f, row->alg[a].median * 1e6);
      fprintf(f, ", \"min\": ");
      json_num(f, row->alg[a].min * 1e6);
      fprintf(f, ", \"max\": ");
      json_num(f, row->alg[a].max * 1e6);
      fprintf(f, "}, \"algbw_GBps\": ");
      json_num(f, fig.algbw);
      fprintf(f, ", \"busbw_GBps\": ");
      json_num(f, fig.busbw);
      fprintf(f, ", \"busbw_pct_limit\": ");
      json_num(f, fig.pct_limit);
      fprintf(f, ", \"speedup_vs_mpi\": ");
      json_num(f, fig.speedup);
      fprintf(f, ", \"regret_vs_best\": ");
      json_num(f, fig.regret);
      fprintf(f, ", \"pct_floor\": ");
      json_num(f, fig.pct_floor);
      fprintf(f, ", \"memory\": \"%s\"", o->alg_shared[a] ? "shared" : "malloc");
      fprintf(f, ", \"failures\": %ld}", row->alg[a].failures);
    }
    fprintf(f, "}}");
  }
  fprintf(f,
          "\n  ],\n  \"summary\": {\n    \"ranges\": {\"small\": {\"max_bytes\": %zu, \"sizes\": "
          "%d}, \"medium\": {\"sizes\": %d}, \"large\": {\"min_bytes\": %zu, \"sizes\": %d}},\n",
          BENCH_SMALL_MAX_BYTES, s.nrange[0], s.nrange[1], BENCH_LARGE_MIN_BYTES, s.nrange[2]);
  fprintf(f, "    \"median_speedup_vs_mpi\": {");
  int first = 1;
  for (int a = 0; a < o->nalgs; a++) {
    if (a == run->mpi_index || run->mpi_index < 0) {
      continue;
    }
    fprintf(f, "%s\n      ", first ? "" : ",");
    first = 0;
    json_str(f, o->algs[a]);
    fprintf(f, ": {");
    for (int g = 0; g < 3; g++) {
      fprintf(f, "%s\"%s\": ", g ? ", " : "", range_names[g]);
      json_num(f, s.speedup[a][g]);
    }
    fputc('}', f);
  }
  fprintf(f, "},\n    \"large_busbw_pct_limit\": ");
  json_per_column(f, o, s.pct_large);
  fprintf(f, ",\n    \"large_pct_floor\": ");
  json_per_column(f, o, s.floor_large);
  fprintf(f, ",\n    \"large_limit_GBps\": ");
  json_num(f, s.limit_large);
  fprintf(f, ",\n    \"auto_vs_mpi_worst\": ");
  if (s.have_auto_vs_mpi) {
    fprintf(f, "{\"speedup\": ");
    json_num(f, s.auto_worst);
    fprintf(f, ", \"bytes\": %zu, \"selected\": ", s.auto_worst_bytes);
    if (s.auto_worst_pick != NULL) {
      json_str(f, s.auto_worst_pick);
    } else {
      fputs("null", f);
    }
    fputc('}', f);
  } else {
    fputs("null", f);
  }
  regret_stats_t rg[2];
  regret_of(run, run->auto_index, &rg[0]);
  regret_of(run, run->mpi_index, &rg[1]);
  fprintf(f, ",\n    \"regret\": {");
  for (int k = 0; k < 2; k++) {
    fprintf(f, "%s\"%s\": ", k ? ", " : "", k ? "mpi" : "auto");
    if (rg[k].n == 0) {
      fputs("null", f);
      continue;
    }
    fprintf(f, "{\"sizes\": %d, \"median\": ", rg[k].n);
    json_num(f, rg[k].median);
    fprintf(f, ", \"worst\": ");
    json_num(f, rg[k].worst);
    fprintf(f, ", \"worst_bytes\": %zu}", rg[k].worst_bytes);
  }
  fprintf(f, ", \"targets\": {\"median\": %.2f, \"worst\": %.2f}}", REGRET_MEDIAN_TARGET,
          REGRET_WORST_TARGET);
  fprintf(f, ",\n    \"targets\": [");
  for (int t = 0; t < s.ntargets; t++) {
    fprintf(f, "%s\n      {\"what\": ", t ? "," : "");
    json_str(f, s.targets[t].what);
    fprintf(f, ", \"value\": ");
    json_num(f, s.targets[t].value);
    fprintf(f, ", \"target\": ");
    json_num(f, s.targets[t].target);
    fprintf(f, ", \"at_most\": %s, \"met\": %s}", s.targets[t].at_most ? "true" : "false",
            target_met(&s, t) ? "true" : "false");
  }
  fprintf(f, "]\n  }\n}\n");
  return ferror(f) ? -1 : 0;
}
