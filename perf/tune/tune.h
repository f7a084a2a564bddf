/*
 * mpiar-tune: measures, on the communicator it runs on, what the selector needs to choose well
 * there, and writes it as a tuning file (src/tuning/tuning.h, docs/tuning.md).
 *
 *   calibrate.c  the cost model's parameters: alpha and beta per level (pairs of ranks inside a
 *                node, and between nodes where there are several), gamma per element type from
 *                the reduction kernels; each a weighted least-squares line with its residuals
 *   sweep.c      every algorithm x segment size over a size sweep, interleaved, with the bench's
 *                timing rules (perf/common: repetitions per size, warm-up, median of the slowest
 *                rank); the winner per size, and the size ranges of the table
 *   decide.c     what the table holds: the built-in model's choice at every size unless a
 *                candidate beat it beyond the run's noise; the ranges (no MPI: tested alone)
 *   main.c       options, the run, the report on stdout, the file
 *   check.c      mpiar-tune-check: a file's choices against the built-in model's, timed
 */
#ifndef MPIAR_TUNE_H
#define MPIAR_TUNE_H

#include <stddef.h>
#include <stdio.h>

#include <mpi.h>

#include "base/common.h"
#include "tuning/tuning.h"

#define TUNE_MAX_SIZES 64
#define TUNE_MAX_CANDIDATES 64
#define TUNE_MAX_SEGMENTS 16
#define TUNE_MAX_POINTS 32

typedef struct tune_opts {
  const char *output; /* -o */
  int quick;          /* --quick */
  size_t min_bytes, max_bytes, factor;
  int iters;     /* -i: repetitions per size; 0 = scaled with the size */
  int min_iters; /* --min-iters: the fewest repetitions of a scaled size (0: the default) */
  int warmup; /* -w; -1 = a tenth of the repetitions */
  mpiar_dtype_t dtypes[MPIAR__DTYPE_COUNT];
  int ndtypes;
  size_t segments[TUNE_MAX_SEGMENTS];
  int nsegments;
  double tie; /* relative margin within which the previous size's winner is kept */
  int named_only; /* --named-only: also sweep MPIAR__ALG_MANUAL entries; -1: where p > 2 */
  const char *schedules; /* --schedules: schedule files swept beside the registry, comma-separated */
  int quiet;
} tune_opts_t;

/* The communicator being tuned and its nodes (as the library sees them). */
typedef struct tune_env {
  MPI_Comm comm; /* the algorithms run here */
  MPI_Comm p2p;  /* the calibration's own messages */
  int rank, p;
  int nodes, largest; /* nodes, and the ranks of the largest */
  int *node_of;       /* node of every rank */
  int progress;       /* rank 0 prints progress on stderr */
  double start;
} tune_env_t;

/* Progress on stderr (rank 0, unless -q): one line per step, since a run may last minutes. */
void tune_progress(const tune_env_t *env, const char *fmt, ...) MPIAR__PRINTF(2, 3);

/*
 * A line t = a + b x through measured points, in two regimes (as Hockney's latency-bandwidth
 * model is fitted): the intercept a is the median time of the small sizes (x <= small_max; 0
 * without any), the slope b comes from the large ones (x >= large_min, a held) by least squares
 * on the relative error (each point weighted by 1 / t^2). One line through every point would be pulled by the sizes that fit in
 * the caches, which move several times faster than memory: it predicted a 32 MiB exchange 5x too
 * fast here. The residuals of every point are kept and printed, the middle sizes' too. a >= 0
 * and b > 0 are enforced.
 */
typedef struct tune_fit {
  int n;
  double x[TUNE_MAX_POINTS]; /* bytes */
  double t[TUNE_MAX_POINTS]; /* seconds measured */
  double small_max, large_min; /* the regimes' bounds (bytes) */
  int nsmall, nlarge;          /* points in each */
  double a, b;
  double resid[TUNE_MAX_POINTS]; /* (fit - measured) / measured */
  double median_abs, max_abs;    /* of |resid| */
} tune_fit_t;

/* Fit a and b (small_max and large_min set). */
void tune_fit_line(tune_fit_t *f);

typedef struct tune_calibration {
  int have_intra;
  tune_fit_t intra; /* pairs inside a node: alpha, beta */
  int intra_pairs;
  int have_inter;
  tune_fit_t inter; /* pairs of nodes: alpha_inter, beta_inter */
  int inter_pairs;
  tune_fit_t gamma[MPIAR__DTYPE_COUNT]; /* b = gamma */
} tune_calibration_t;

/* Measure and fit (collective). @return 0, or -1 when memory ran out on some rank. */
int tune_calibrate(const tune_opts_t *o, const tune_env_t *env, tune_calibration_t *cal);

/* The calibration's report (rank 0). */
void tune_print_calibration(FILE *f, const tune_env_t *env, const tune_calibration_t *cal);

/* One candidate: an algorithm and a segment size (0: none). */
typedef struct tune_candidate {
  const mpiar__algorithm_t *alg;
  size_t segment_bytes;
  char name[48]; /* "ring", "ring/seg=1M" */
} tune_candidate_t;

/*
 * The built-in model's choice for @p bytes (the selector's automatic choice without a tuning
 * file, core/inspect.h), which a table must keep wherever the measurements do not resolve a
 * faster candidate. @p ctx is the caller's (the communicator's topology).
 */
typedef struct tune_model {
  void (*choice)(void *ctx, size_t bytes, mpiar_dtype_t dtype, const mpiar__algorithm_t **alg,
                 size_t *segment_bytes);
  void *ctx;
} tune_model_t;

/* What the table holds at a measured size. */
enum {
  TUNE_MODEL_FASTEST = 0, /* the model's choice had the fastest median (or within the tie) */
  TUNE_OVERRIDE,          /* another candidate beat it beyond the noise: the table names it */
  TUNE_UNRESOLVED,        /* another was faster by its median, not beyond the noise: the model */
  TUNE_MODEL_UNMEASURED   /* the model's choice was not among the candidates: the model */
};

/* Fewest timed repetitions a size needs before a candidate may override the model there (the
 * fewest with which the sign test below can pass: 7 wins of 7 happen by chance with p = 1/128). */
#define TUNE_MIN_RESOLVE_REPS 7
/* The paired sign test's level: a candidate must beat the model's choice in so many of the
 * repetitions that chance (each side winning half) would do it with probability below this. */
#define TUNE_SIGN_LEVEL 0.01

/* P(X >= wins) for X ~ Binomial(n, 1/2): the one-sided sign test's p-value. */
double tune_sign_pvalue(int wins, int n);

/* Everything measured for one element type. */
typedef struct tune_sweep {
  mpiar_dtype_t dtype;
  int nsizes;
  size_t sizes[TUNE_MAX_SIZES];
  int iters[TUNE_MAX_SIZES];
  int ncand;
  tune_candidate_t cand[TUNE_MAX_CANDIDATES];
  /* Median seconds of the slowest rank; NaN where the candidate does not apply (a segment that
   * does not split the block, or one that the plan would raise to another candidate's). */
  double median[TUNE_MAX_SIZES][TUNE_MAX_CANDIDATES];
  /* The fastest and the slowest quartile of the repetitions (25th and 75th percentiles). */
  double q1[TUNE_MAX_SIZES][TUNE_MAX_CANDIDATES];
  double q3[TUNE_MAX_SIZES][TUNE_MAX_CANDIDATES];
  /* In how many repetitions the candidate beat the built-in model's choice in the same
   * repetition (-1: not counted, e.g. the model's choice was not measured). */
  int wins[TUNE_MAX_SIZES][TUNE_MAX_CANDIDATES];
  int winner[TUNE_MAX_SIZES]; /* candidate index: the fastest median (the previous within tie) */
  /* The decision (tune_decide): the model's candidate index (-1: not measured), the status
   * (TUNE_MODEL_FASTEST ...), and the candidate the table names (-1: the model's choice). */
  int model[TUNE_MAX_SIZES];
  int status[TUNE_MAX_SIZES];
  int decision[TUNE_MAX_SIZES];
  int contender[TUNE_MAX_SIZES]; /* unresolved: the fastest candidate that did not resolve */
  int p;                         /* ranks measured on */
  double tie;                    /* the tie margin tune_decide used */
} tune_sweep_t;

/*
 * Measure every candidate at every size for @p dtype (collective), print a row per size on
 * @p out (rank 0; NULL: none). @return 0, or -1 when memory ran out on some rank.
 */
int tune_sweep(const tune_opts_t *o, const tune_env_t *env, mpiar_dtype_t dtype, tune_sweep_t *s,
               FILE *out, const tune_model_t *model);

/*
 * The candidate index of (alg, segment) at size k as the library would run it (a segment that
 * does not split the block is no segment); -1 if it was not measured.
 */
int tune_candidate_at(const tune_sweep_t *s, int k, const mpiar__algorithm_t *alg, size_t seg,
                      int p);

/*
 * Decide, per measured size, what the table holds (s->model, s->status, s->decision): the
 * model's choice, unless a candidate's advantage over it is resolved: at least
 * TUNE_MIN_RESOLVE_REPS repetitions, its median faster than the model choice's by more than the
 * tie margin, its slowest quartile (75th percentile) faster than the model choice's fastest
 * quartile (25th), and faster than it in so many of the same repetitions that chance would do
 * it with probability below TUNE_SIGN_LEVEL shared among the candidates measured at the size
 * (s->wins; the paired sign test, Bonferroni). Among resolved candidates the previous size's override is kept where its
 * median is within the tie margin of the fastest resolved one. Needs median, q1, q3, iters.
 */
void tune_decide(tune_sweep_t *s, double tie, const tune_model_t *m);

/*
 * The table of @p s after tune_decide: every size from 0 up holds a range. A measured size holds
 * its decision. The sizes between two measured ones hold what both hold; where they differ, an
 * override reaches over the whole gap when the other end runs the same candidate (the model's own
 * choice there), else the gap holds the model (two different overrides split it at the
 * geometric mean). Beyond the last measured size,
 * the model. "The model" is its own choice, its switch points found exactly (a scan in steps of
 * an eighth, then bisection), up to 1 PiB and the model's choice there without an upper bound:
 * the table equals the built-in model wherever nothing was resolved, whatever parameters the
 * file's calibration fitted (a gap would fall to the model with those, not the built-in one).
 */
void tune_make_table(const tune_sweep_t *s, const tune_model_t *m, mpiar__tuning_table_t *table);

/* The bytes the library would segment @p seg into at @p bytes (0: it would not split a block). */
size_t tune_effective_segment(size_t seg, size_t bytes, mpiar_dtype_t dtype, int p);

/* Print the decisions of @p s (rank 0): per size, what the table holds and why. */
void tune_print_decisions(FILE *f, const tune_sweep_t *s);

#endif /* MPIAR_TUNE_H */
