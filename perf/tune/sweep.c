/*
 * The measured half of tuning: every registry algorithm, and every segmented one with each
 * candidate segment size, at every size of the sweep, timed with the bench's rules: at each size
 * the candidates run interleaved, in an order shuffled anew for every repetition (the same on
 * every rank), so that drift on a shared machine hits all of them alike and none gains from its
 * place in the sequence; each repetition is timed from a barrier to its own end on every rank;
 * the times are reduced with MPI_MAX outside the timed loop (the slowest rank), and a
 * candidate's time is the median over repetitions, with its quartiles (how far the noise of the
 * run spreads it). The winner of a size is the fastest median; where the previous size's winner
 * is within the tie margin it is kept. What the table holds is decided against the built-in
 * model's choice (decide.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "common/tool.h"
#include "mpiar.h"
#include "sim/schedfile_alg.h"
#include "tuning/tuning.h"
#include "tune.h"

static void size_suffix(size_t b, char *buf, size_t len) {
  if (b >= ((size_t)1 << 30) && b % ((size_t)1 << 30) == 0) {
    snprintf(buf, len, "%zuG", b >> 30);
  } else if (b >= ((size_t)1 << 20) && b % ((size_t)1 << 20) == 0) {
    snprintf(buf, len, "%zuM", b >> 20);
  } else if (b >= 1024 && b % 1024 == 0) {
    snprintf(buf, len, "%zuK", b >> 10);
  } else {
    snprintf(buf, len, "%zu", b);
  }
}

static void make_candidates(const tune_opts_t *o, const tune_env_t *env, tune_sweep_t *s) {
  s->ncand = 0;
  /* As the selector: hierarchical algorithms only where the communicator is (several nodes,
   * some with several ranks); elsewhere they build their flat equivalents. */
  const int hierarchical = env->nodes > 1 && env->largest > 1;
  for (int i = 0; i < mpiar__algorithm_count; i++) {
    const mpiar__algorithm_t *a = &mpiar__algorithms[i];
    if ((a->flags & MPIAR__ALG_HIERARCHICAL) && !hierarchical) {
      continue;
    }
    /* A named-only entry is not an automatic candidate of the model; a table naming it makes it
     * one where it resolved a win. At p = 2 they are measured copies of the automatic ones or
     * slower (docs/algorithms.md), so by default they are swept only on more ranks. */
    const int named = o->named_only < 0 ? env->p > 2 : o->named_only;
    if ((a->flags & MPIAR__ALG_MANUAL) && !named) {
      continue;
    }
    int nseg = (a->flags & MPIAR__ALG_SEGMENTED) ? o->nsegments : 0;
    for (int k = -1; k < nseg && s->ncand < TUNE_MAX_CANDIDATES; k++) {
      tune_candidate_t *c = &s->cand[s->ncand++];
      c->alg = a;
      c->segment_bytes = k < 0 ? 0 : o->segments[k];
      if (k < 0) {
        snprintf(c->name, sizeof c->name, "%s", a->name);
      } else {
        char sz[24];
        size_suffix(c->segment_bytes, sz, sizeof sz);
        snprintf(c->name, sizeof c->name, "%s/seg=%s", a->name, sz);
      }
    }
  }
  /* Schedule files (--schedules): unsegmented candidates named file:PATH (docs/schedules.md). */
  char list[4096];
  snprintf(list, sizeof list, "%s", o->schedules != NULL ? o->schedules : "");
  char *save = NULL;
  for (char *path = strtok_r(list, ",", &save); path != NULL && s->ncand < TUNE_MAX_CANDIDATES;
       path = strtok_r(NULL, ",", &save)) {
    const mpiar__algorithm_t *a = mpiar__schedfile_algorithm(path);
    if (a != NULL) {
      tune_candidate_t *c = &s->cand[s->ncand++];
      c->alg = a;
      c->segment_bytes = 0;
      snprintf(c->name, sizeof c->name, "%s", a->name);
    }
  }
}

/* Whether candidate c runs at size k: a segment must split the block, once per effective size. */
static int applies(const tune_sweep_t *s, int k, int c, int p) {
  const tune_candidate_t *cand = &s->cand[c];
  if (cand->alg->flags & MPIAR__ALG_FILE) {
    /* A schedule file runs at the counts it serves, once it passed verification. */
    char why[8];
    return mpiar__schedfile_fit(cand->alg, p, s->sizes[k] / mpiar_dtype_size(s->dtype), 0, why,
                                sizeof why);
  }
  if (cand->segment_bytes == 0) {
    return 1;
  }
  size_t eff = tune_effective_segment(cand->segment_bytes, s->sizes[k], s->dtype, p);
  if (eff == 0) {
    return 0;
  }
  for (int q = 0; q < c; q++) {
    if (s->cand[q].alg == cand->alg && s->cand[q].segment_bytes != 0 &&
        tune_effective_segment(s->cand[q].segment_bytes, s->sizes[k], s->dtype, p) == eff) {
      return 0;
    }
  }
  return 1;
}

static int iters_for(const tune_opts_t *o, size_t bytes) {
  if (o->iters > 0) {
    return o->iters;
  }
  if (o->quick) {
    return tool_iters_for(bytes, (size_t)8 << 20, 3, 30);
  }
  const int lo = o->min_iters > 0 ? o->min_iters : TOOL_ITERS_MIN;
  return tool_iters_for(bytes, TOOL_ITER_BYTES, lo, lo > TOOL_ITERS_MAX ? lo : TOOL_ITERS_MAX);
}

/* Small values of the type: every sum over the ranks stays finite and normal. */
static void fill_input(mpiar_dtype_t d, void *buf, size_t count) {
  for (size_t i = 0; i < count; i++) {
    switch (d) {
    case MPIAR_FLOAT16:
      ((uint16_t *)buf)[i] = 0x3400; /* 0.25 */
      break;
    case MPIAR_BFLOAT16:
      ((uint16_t *)buf)[i] = 0x3e80; /* 0.25 */
      break;
    case MPIAR_FLOAT32:
      ((float *)buf)[i] = 0.25f;
      break;
    case MPIAR_FLOAT64:
      ((double *)buf)[i] = 0.25;
      break;
    default: {
      size_t es = mpiar_dtype_size(d);
      memset((char *)buf + i * es, 0, es);
      ((unsigned char *)buf)[i * es] = 1;
      break;
    }
    }
  }
}

static void print_header(FILE *f, const tune_sweep_t *s) {
  fprintf(f, "## Sweep: %s sum, %d sizes; median us of the slowest rank, each size interleaved\n",
          mpiar_dtype_name(s->dtype), s->nsizes);
  fprintf(f, "#%10s %6s", "size", "iters");
  for (int c = 0; c < s->ncand; c++) {
    int w = (int)strlen(s->cand[c].name);
    fprintf(f, " %*s", w > 10 ? w : 10, s->cand[c].name);
  }
  fprintf(f, "  winner (next best, %% slower)\n");
}

static void print_row(FILE *f, const tune_sweep_t *s, int k) {
  char sz[32];
  fprintf(f, " %10s %6d", tool_format_bytes((double)s->sizes[k], sz, sizeof sz), s->iters[k]);
  int second = -1;
  for (int c = 0; c < s->ncand; c++) {
    int w = (int)strlen(s->cand[c].name);
    w = w > 10 ? w : 10;
    if (isnan(s->median[k][c])) {
      fprintf(f, " %*s", w, "-");
    } else {
      fprintf(f, " %*.2f", w, s->median[k][c] * 1e6);
      if (c != s->winner[k] && (second < 0 || s->median[k][c] < s->median[k][second])) {
        second = c;
      }
    }
  }
  const double best = s->median[k][s->winner[k]];
  fprintf(f, "  %s", s->cand[s->winner[k]].name);
  if (second >= 0) {
    fprintf(f, " (%s, %+.1f%%)", s->cand[second].name, 100.0 * (s->median[k][second] / best - 1.0));
  }
  fputc('\n', f);
  fflush(f);
}

/* The @p f quantile of @p n sorted values, interpolated linearly between order statistics. */
static double quantile_sorted(const double *v, int n, double f) {
  double pos = f * (double)(n - 1);
  int i = (int)floor(pos);
  if (i >= n - 1) {
    return v[n - 1];
  }
  return v[i] + (pos - (double)i) * (v[i + 1] - v[i]);
}

/* Time the applicable candidates of size k, interleaved; medians of the slowest rank. */
static void measure_size(const tune_opts_t *o, const tune_env_t *env, tune_sweep_t *s, int k,
                         const char *sendbuf, char *recvbuf, double *times,
                         const tune_model_t *model) {
  const size_t es = mpiar_dtype_size(s->dtype);
  const size_t count = s->sizes[k] / es;
  int active[TUNE_MAX_CANDIDATES];
  int nact = 0;
  for (int c = 0; c < s->ncand; c++) {
    s->median[k][c] = s->q1[k][c] = s->q3[k][c] = NAN;
    if (applies(s, k, c, env->p)) {
      active[nact++] = c;
    }
  }
  const int iters = iters_for(o, s->sizes[k]);
  const int warm = o->warmup >= 0 ? o->warmup : tool_warmup_for(iters);
  s->iters[k] = iters;
  int order[TUNE_MAX_CANDIDATES];
  for (int rep = -warm; rep < iters; rep++) {
    tool_shuffle(order, nact, ((uint64_t)k << 32) + (uint64_t)(rep + warm));
    for (int j = 0; j < nact; j++) {
      const int i = order[j];
      const tune_candidate_t *c = &s->cand[active[i]];
      mpiar_options_t opts = MPIAR_OPTIONS_INIT;
      opts.algorithm = c->alg->name;
      opts.segment_bytes = c->segment_bytes;
      MPI_Barrier(env->comm);
      double t0 = MPI_Wtime();
      int rc = mpiar_allreduce_ex(sendbuf, recvbuf, count, s->dtype, MPIAR_SUM, env->comm, &opts);
      double t1 = MPI_Wtime();
      if (rc != MPIAR_SUCCESS) {
        /* The other ranks may be inside the same call: only an abort ends them all. */
        fprintf(stderr, "mpiar-tune: rank %d: %s at %zu bytes: %s: %s\n", env->rank, c->name,
                s->sizes[k], mpiar_strerror(rc), mpiar_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      if (rep >= 0) {
        times[(size_t)i * (size_t)iters + (size_t)rep] = t1 - t0;
      }
    }
  }
  MPI_Allreduce(MPI_IN_PLACE, times, nact * iters, MPI_DOUBLE, MPI_MAX, env->comm);
  /* Paired: in how many repetitions each candidate beat each other one (the same repetition runs
   * them all within moments, so a burst of load hits both). */
  static int pair[TUNE_MAX_CANDIDATES][TUNE_MAX_CANDIDATES];
  for (int i = 0; i < nact; i++) {
    for (int j = 0; j < nact; j++) {
      const double *ti = times + (size_t)i * (size_t)iters, *tj = times + (size_t)j * (size_t)iters;
      int w = 0;
      for (int r = 0; r < iters; r++) {
        w += ti[r] < tj[r];
      }
      pair[i][j] = w;
    }
  }
  for (int i = 0; i < nact; i++) {
    double *v = times + (size_t)i * (size_t)iters;
    s->median[k][active[i]] = tool_median(v, iters); /* sorts v */
    s->q1[k][active[i]] = quantile_sorted(v, iters, 0.25);
    s->q3[k][active[i]] = quantile_sorted(v, iters, 0.75);
  }
  /* Against the built-in model's choice, which a table keeps unless it is beaten (decide.c). */
  for (int c = 0; c < s->ncand; c++) {
    s->wins[k][c] = -1;
  }
  if (model != NULL) {
    const mpiar__algorithm_t *alg = NULL;
    size_t seg = 0;
    model->choice(model->ctx, s->sizes[k], s->dtype, &alg, &seg);
    const int m = tune_candidate_at(s, k, alg, seg, env->p);
    for (int mi = 0; m >= 0 && mi < nact; mi++) {
      if (active[mi] == m) {
        for (int i = 0; i < nact; i++) {
          s->wins[k][active[i]] = pair[i][mi];
        }
      }
    }
  }
}

/* The fastest median, or the previous size's winner where it is within the tie margin. */
static void pick_winner(const tune_opts_t *o, tune_sweep_t *s, int k) {
  int best = -1;
  for (int c = 0; c < s->ncand; c++) {
    if (!isnan(s->median[k][c]) && (best < 0 || s->median[k][c] < s->median[k][best])) {
      best = c;
    }
  }
  if (k > 0) {
    int prev = s->winner[k - 1];
    if (!isnan(s->median[k][prev]) && s->median[k][prev] <= s->median[k][best] * (1.0 + o->tie)) {
      best = prev;
    }
  }
  s->winner[k] = best;
}

int tune_sweep(const tune_opts_t *o, const tune_env_t *env, mpiar_dtype_t dtype, tune_sweep_t *s,
               FILE *out, const tune_model_t *model) {
  memset(s, 0, sizeof *s);
  s->dtype = dtype;
  s->p = env->p;
  const size_t es = mpiar_dtype_size(dtype);
  s->nsizes = tool_size_sweep(o->min_bytes, o->max_bytes, o->factor, es, s->sizes, TUNE_MAX_SIZES);
  make_candidates(o, env, s);
  size_t maxb = s->sizes[s->nsizes - 1];
  int max_iters = 1;
  for (int k = 0; k < s->nsizes; k++) {
    int it = iters_for(o, s->sizes[k]);
    max_iters = it > max_iters ? it : max_iters;
  }
  char *sendbuf = NULL, *recvbuf = NULL;
  double *times = malloc((size_t)s->ncand * (size_t)max_iters * sizeof *times);
  int ok = times != NULL && posix_memalign((void **)&sendbuf, 4096, maxb) == 0 &&
           posix_memalign((void **)&recvbuf, 4096, maxb) == 0;
  if (ok) {
    /* Touch every page now, so that first-touch page faults never land in a timed run. */
    fill_input(dtype, sendbuf, maxb / es);
    memset(recvbuf, 0, maxb);
  }
  MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, env->comm);
  if (ok) {
    if (out != NULL) {
      print_header(out, s);
    }
    for (int k = 0; k < s->nsizes; k++) {
      char sz[32];
      tune_progress(env, "measuring %s at %s (size %d/%d)", mpiar_dtype_name(dtype),
                    tool_format_bytes((double)s->sizes[k], sz, sizeof sz), k + 1, s->nsizes);
      measure_size(o, env, s, k, sendbuf, recvbuf, times, model);
      pick_winner(o, s, k);
      if (out != NULL) {
        print_row(out, s, k);
      }
    }
  }
  free(times);
  free(sendbuf);
  free(recvbuf);
  return ok ? 0 : -1;
}
