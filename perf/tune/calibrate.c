/*
 * Calibration of the cost model on the communicator being tuned.
 *
 * alpha, beta (inside a node): the ranks of each node pair up by their index on the node
 * (0-1, 2-3, ...) and every pair exchanges n bytes both ways at once (MPI_Irecv, MPI_Isend,
 * MPI_Waitall), as the algorithms' steps do; the time of a size is the median over repetitions
 * of the slowest pair. In the model an exchange of n bytes takes alpha + n beta (one send and one
 * receive port per rank), so the line through (n, time) gives both.
 * alpha_inter, beta_inter (between nodes, where there are two or more): the first rank of node
 * 2j exchanges with the first rank of node 2j + 1, every such pair at once; the model's node
 * port carries one message at a time, so one pair per node measures it.
 * gamma per element type: every rank reduces two vectors of n bytes into a third with the
 * library's kernel (mpiar_reduce_local, sum, the thread count the library uses here), all
 * ranks at once, so memory bandwidth is shared as it is inside an allreduce; the slope of the
 * line through (n, time) is gamma.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/tool.h"
#include "tune.h"

/* Repetitions of one calibration point: enough for a median, bounded for large sizes. */
static int point_iters(const tune_opts_t *o, size_t bytes) {
  if (o->quick) {
    return tool_iters_for(bytes, (size_t)4 << 20, 3, 20);
  }
  return tool_iters_for(bytes, (size_t)64 << 20, 5, 200);
}

/*
 * One exchange size: this rank swaps n bytes with @p partner (-1: idle) per repetition; the
 * median over repetitions of the slowest rank's time. @p times holds `iters` doubles.
 */
static double exchange_time(const tune_opts_t *o, const tune_env_t *env, int partner, size_t n,
                            char *sbuf, char *rbuf, double *times) {
  int iters = point_iters(o, n);
  int warm = tool_warmup_for(iters);
  for (int rep = -warm; rep < iters; rep++) {
    MPI_Barrier(env->p2p);
    double t0 = MPI_Wtime();
    if (partner >= 0) {
      MPI_Request rq[2];
      MPI_Irecv(rbuf, (int)n, MPI_BYTE, partner, 7, env->p2p, &rq[0]);
      MPI_Isend(sbuf, (int)n, MPI_BYTE, partner, 7, env->p2p, &rq[1]);
      MPI_Status st[2];
      MPI_Waitall(2, rq, st);
    }
    double dt = MPI_Wtime() - t0;
    if (rep >= 0) {
      times[rep] = partner >= 0 ? dt : 0.0;
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, times, iters, MPI_DOUBLE, MPI_MAX, env->p2p);
  return tool_median(times, iters);
}

/* The index of @p rank among the ranks of its node. */
static int local_index(const tune_env_t *env, int rank) {
  int k = 0;
  for (int r = 0; r < rank; r++) {
    k += env->node_of[r] == env->node_of[rank];
  }
  return k;
}

/* The rank with index @p local on node @p node, or -1. */
static int rank_at(const tune_env_t *env, int node, int local) {
  for (int r = 0, k = 0; r < env->p; r++) {
    if (env->node_of[r] == node && k++ == local) {
      return r;
    }
  }
  return -1;
}

/* Sizes of the point-to-point calibration. */
static int p2p_sizes(const tune_opts_t *o, size_t *sizes) {
  if (o->quick) {
    static const size_t q[] = {8, 64, 256, 64 << 10, 1 << 20};
    memcpy(sizes, q, sizeof q);
    return 5;
  }
  return tool_size_sweep(8, (size_t)64 << 20, 4, 1, sizes, TUNE_MAX_POINTS);
}

static void measure_level(const tune_opts_t *o, const tune_env_t *env, int partner, tune_fit_t *fit,
                          char *sbuf, char *rbuf, double *times, const char *what) {
  size_t sizes[TUNE_MAX_POINTS];
  int n = p2p_sizes(o, sizes);
  fit->n = n;
  /* Latency from messages of a few cache lines, bandwidth from those far beyond the caches. */
  fit->small_max = 256;
  fit->large_min = (double)(1 << 20);
  for (int i = 0; i < n; i++) {
    tune_progress(env, "calibrating %s: %zu bytes (%d/%d)", what, sizes[i], i + 1, n);
    fit->x[i] = (double)sizes[i];
    fit->t[i] = exchange_time(o, env, partner, sizes[i], sbuf, rbuf, times);
  }
  tune_fit_line(fit);
}

/* Sizes of the reduction calibration, bytes per operand. */
static int gamma_sizes(const tune_opts_t *o, size_t *sizes) {
  if (o->quick) {
    sizes[0] = 64 << 10;
    sizes[1] = 1 << 20;
    return 2;
  }
  static const size_t full[] = {64 << 10, 512 << 10, 4 << 20, 32 << 20};
  memcpy(sizes, full, sizeof full);
  return 4;
}

/* Small values of every type (0.25 for floating types, 1 for integers). */
static void fill(mpiar_dtype_t d, void *buf, size_t bytes) {
  size_t es = mpiar_dtype_size(d);
  for (size_t i = 0; i < bytes / es; i++) {
    switch (d) {
    case MPIAR_FLOAT16:
      ((uint16_t *)buf)[i] = 0x3400;
      break;
    case MPIAR_BFLOAT16:
      ((uint16_t *)buf)[i] = 0x3e80;
      break;
    case MPIAR_FLOAT32:
      ((float *)buf)[i] = 0.25f;
      break;
    case MPIAR_FLOAT64:
      ((double *)buf)[i] = 0.25;
      break;
    default:
      memset((char *)buf + i * es, 0, es);
      ((unsigned char *)buf)[i * es] = 1;
      break;
    }
  }
}

static int measure_gamma(const tune_opts_t *o, const tune_env_t *env, mpiar_dtype_t d,
                         tune_fit_t *fit, char *a, char *b, char *dst, double *times) {
  size_t sizes[8];
  int n = gamma_sizes(o, sizes);
  size_t es = mpiar_dtype_size(d);
  fit->n = n;
  /* The rate from the operands beyond the caches; the per-call cost is too small to measure
   * against a reduction of even the smallest operand here (no intercept). */
  fit->small_max = 0;
  fit->large_min = (double)(4 << 20);
  int rc = MPIAR_SUCCESS;
  for (int i = 0; i < n; i++) {
    size_t count = sizes[i] / es;
    fill(d, a, sizes[i]);
    fill(d, b, sizes[i]);
    int iters = point_iters(o, sizes[i] * 3);
    int warm = tool_warmup_for(iters);
    for (int rep = -warm; rep < iters; rep++) {
      MPI_Barrier(env->p2p);
      double t0 = MPI_Wtime();
      int r = mpiar_reduce_local(dst, a, b, count, d, MPIAR_SUM);
      double dt = MPI_Wtime() - t0;
      rc = rc == MPIAR_SUCCESS ? r : rc;
      if (rep >= 0) {
        times[rep] = dt;
      }
    }
    MPI_Allreduce(MPI_IN_PLACE, times, iters, MPI_DOUBLE, MPI_MAX, env->p2p);
    fit->x[i] = (double)(count * es);
    fit->t[i] = tool_median(times, iters);
  }
  tune_fit_line(fit);
  return rc;
}

int tune_calibrate(const tune_opts_t *o, const tune_env_t *env, tune_calibration_t *cal) {
  memset(cal, 0, sizeof *cal);
  size_t big = o->quick ? (size_t)1 << 20 : (size_t)64 << 20;
  size_t gbig = o->quick ? (size_t)1 << 20 : (size_t)32 << 20;
  size_t cap = big > gbig ? big : gbig;
  char *sbuf = NULL, *rbuf = NULL, *dst = NULL;
  double *times = malloc(1024 * sizeof *times);
  int ok = times != NULL && posix_memalign((void **)&sbuf, 4096, cap) == 0 &&
           posix_memalign((void **)&rbuf, 4096, cap) == 0 &&
           posix_memalign((void **)&dst, 4096, cap) == 0;
  if (ok) {
    memset(sbuf, 1, cap);
    memset(rbuf, 0, cap);
    memset(dst, 0, cap);
  }
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, env->p2p);
  int rc = ok ? 0 : -1;
  if (ok && env->p > 1) {
    /* Inside a node: local index 2i with 2i + 1. */
    int li = local_index(env, env->rank);
    int partner = rank_at(env, env->node_of[env->rank], li ^ 1);
    for (int nd = 0; nd < env->nodes; nd++) {
      int k = 0;
      for (int r = 0; r < env->p; r++) {
        k += env->node_of[r] == nd;
      }
      cal->intra_pairs += k / 2;
    }
    if (cal->intra_pairs > 0) {
      cal->have_intra = 1;
      measure_level(o, env, partner, &cal->intra, sbuf, rbuf, times,
                    "point-to-point inside a node");
    }
    if (env->nodes >= 2) {
      /* Between nodes: the first rank of node 2j with that of node 2j + 1. */
      int nd = env->node_of[env->rank];
      int other = (nd ^ 1) < env->nodes && li == 0 ? rank_at(env, nd ^ 1, 0) : -1;
      cal->have_inter = 1;
      cal->inter_pairs = env->nodes / 2;
      measure_level(o, env, other, &cal->inter, sbuf, rbuf, times, "point-to-point between nodes");
    }
  }
  int krc = MPIAR_SUCCESS;
  for (int d = 0; ok && d < MPIAR__DTYPE_COUNT; d++) {
    tune_progress(env, "calibrating the %s reduction kernel", mpiar_dtype_name((mpiar_dtype_t)d));
    int r = measure_gamma(o, env, (mpiar_dtype_t)d, &cal->gamma[d], sbuf, rbuf, dst, times);
    krc = krc == MPIAR_SUCCESS ? r : krc;
  }
  if (krc != MPIAR_SUCCESS) {
    fprintf(stderr, "mpiar-tune: rank %d: the reduction kernel failed: %s: %s\n", env->rank,
            mpiar_strerror(krc), mpiar_last_error());
    rc = -1;
  }
  free(times);
  free(sbuf);
  free(rbuf);
  free(dst);
  return rc;
}

static void print_fit(FILE *f, const tune_fit_t *fit, const char *xname) {
  char lo[32], hi[32];
  fprintf(f, "#   (the intercept from %d point%s <= %s, the slope from %d point%s >= %s)\n",
          fit->nsmall, fit->nsmall == 1 ? "" : "s",
          tool_format_bytes(fit->small_max, lo, sizeof lo), fit->nlarge,
          fit->nlarge == 1 ? "" : "s", tool_format_bytes(fit->large_min, hi, sizeof hi));
  fprintf(f, "#   %12s %14s %14s %10s\n", xname, "measured us", "model us", "residual");
  for (int i = 0; i < fit->n; i++) {
    char sz[32];
    fprintf(f, "#   %12s %14.3f %14.3f %+9.1f%%\n", tool_format_bytes(fit->x[i], sz, sizeof sz),
            fit->t[i] * 1e6, (fit->a + fit->b * fit->x[i]) * 1e6, fit->resid[i] * 100);
  }
}

static void print_level(FILE *f, const tune_fit_t *fit, const char *suffix) {
  print_fit(f, fit, "n");
  fprintf(f,
          "# alpha%s %.3f us, beta%s %.5f ns/B (%.2f GB/s); |residual| median %.1f%%, max "
          "%.1f%%\n",
          suffix, fit->a * 1e6, suffix, fit->b * 1e9, 1e-9 / fit->b, fit->median_abs * 100,
          fit->max_abs * 100);
}

void tune_print_calibration(FILE *f, const tune_env_t *env, const tune_calibration_t *cal) {
  fprintf(f, "## Calibration of the cost model (two regimes, least squares on the relative error)\n");
  if (cal->have_intra) {
    fprintf(f,
            "# point-to-point inside a node: %d pair%s exchanging n bytes both ways at once, "
            "median of the slowest pair; model alpha + n beta\n",
            cal->intra_pairs, cal->intra_pairs == 1 ? "" : "s");
    print_level(f, &cal->intra, "");
  } else {
    fprintf(f, "# point-to-point inside a node: not measured (%s)\n",
            env->p < 2 ? "one rank" : "one rank per node");
  }
  if (cal->have_inter) {
    fprintf(f,
            "# point-to-point between nodes: %d pair%s of nodes (their first ranks) at once; "
            "model alpha_inter + n beta_inter\n",
            cal->inter_pairs, cal->inter_pairs == 1 ? "" : "s");
    print_level(f, &cal->inter, "_inter");
  } else {
    fprintf(f, "# point-to-point between nodes: not measured (the communicator has one node)\n");
  }
  fprintf(f,
          "# reduction kernels (%s, sum, dst = a + b, every rank at once): gamma = slope, "
          "seconds per byte reduced\n",
          mpiar_kernel_level() ? mpiar_kernel_level() : "?");
  fprintf(f, "#   %-10s %12s %9s %12s %12s   %s\n", "dtype", "gamma ns/B", "GB/s", "|res| med",
          "|res| max", "points (bytes: us)");
  for (int d = 0; d < MPIAR__DTYPE_COUNT; d++) {
    const tune_fit_t *g = &cal->gamma[d];
    fprintf(f, "#   %-10s %12.5f %9.2f %11.1f%% %11.1f%%  ", mpiar_dtype_name((mpiar_dtype_t)d),
            g->b * 1e9, 1e-9 / g->b, g->median_abs * 100, g->max_abs * 100);
    for (int i = 0; i < g->n; i++) {
      char sz[32];
      fprintf(f, " %s: %.1f", tool_format_bytes(g->x[i], sz, sizeof sz), g->t[i] * 1e6);
    }
    fputc('\n', f);
  }
}
