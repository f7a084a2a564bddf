/*
 * mpiar-tune's rule for what a table holds (perf/tune/decide.c), on made-up measurements, no MPI
 * and nothing timed: the table holds the built-in model's choice at every size unless a
 * candidate beat it beyond the noise (median faster by more than the tie, its slowest quartile
 * below the model choice's fastest, enough repetitions).
 *
 * - noise everywhere (each candidate's median anywhere within +-30 % of the others, quartiles
 *   overlapping): no override, and the table equals the model's choice at every size from 1 B
 *   to 2^52 (powers of two, their neighbours, a pseudo-random sample), with no gap;
 * - a clear win (recursive doubling at half the ring's time at 256 KiB, quartiles apart): the
 *   table names it there and halfway to the neighbours, and the model elsewhere;
 * - a median win inside the noise, a clear win over too few repetitions, a win in too few of
 *   the same repetitions (the sign test), a clear but tiny win (below the tie): none overrides;
 * - the previous size's override is kept where it is resolved and within the tie;
 * - every table written and read back through the file format (where the build reads files).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/inspect.h"
#include "../common/test_check.h"
#include "../common/test_random.h"
#include "tune.h"


#define P 2

static void builtin(void *ctx, size_t bytes, mpiar_dtype_t dtype, const mpiar__algorithm_t **alg,
                    size_t *seg) {
  (void)ctx;
  mpiar__inspect_model_choice(NULL, bytes, dtype, P, NULL, alg, seg);
}

static const tune_model_t model = {builtin, NULL};

/* The quick sweep's sizes and candidates (4 B .. 1 MiB by 4; ring with 64K and 256K segments). */
static void make_sweep(tune_sweep_t *s, int iters) {
  memset(s, 0, sizeof *s);
  s->dtype = MPIAR_FLOAT32;
  s->p = P;
  s->nsizes = 0;
  for (size_t b = 4; b <= ((size_t)1 << 20); b *= 4) {
    s->iters[s->nsizes] = iters;
    s->sizes[s->nsizes++] = b;
  }
  const char *names[] = {"recursive_doubling", "rabenseifner", "ring", "ring", "ring"};
  const size_t segs[] = {0, 0, 0, 64 << 10, 256 << 10};
  for (int c = 0; c < 5; c++) {
    s->cand[c].alg = mpiar__algorithm_find(names[c]);
    CHECK_COND(s->cand[c].alg != NULL);
    s->cand[c].segment_bytes = segs[c];
    snprintf(s->cand[c].name, sizeof s->cand[c].name, "%s", names[c]);
  }
  s->ncand = 5;
}

/* Candidate c at size k: median m, quartiles m (1 -+ spread). NaN where a segment does not apply. */
static void set(tune_sweep_t *s, int k, int c, double m, double spread) {
  size_t eff = tune_effective_segment(s->cand[c].segment_bytes, s->sizes[k], s->dtype, P);
  if (s->cand[c].segment_bytes != 0 && eff == 0) {
    s->median[k][c] = s->q1[k][c] = s->q3[k][c] = NAN;
    return;
  }
  s->median[k][c] = m;
  s->q1[k][c] = m * (1 - spread);
  s->q3[k][c] = m * (1 + spread);
  s->wins[k][c] = s->iters[k]; /* faster in every repetition: only the other rules decide */
}

static int index_of(const tune_sweep_t *s, size_t bytes) {
  for (int k = 0; k < s->nsizes; k++) {
    if (s->sizes[k] == bytes) {
      return k;
    }
  }
  return -1;
}

/* The table's choice at @p bytes equals the model's (no gap). */
static int table_is_model_at(const mpiar__tuning_table_t *t, size_t bytes) {
  const mpiar__algorithm_t *alg = NULL;
  size_t seg = 0;
  builtin(NULL, bytes < 4 ? 4 : bytes, MPIAR_FLOAT32, &alg, &seg);
  if (!(alg->flags & MPIAR__ALG_SEGMENTED)) {
    seg = 0;
  }
  for (int i = 0; i < t->nranges; i++) {
    const mpiar__tuning_range_t *g = &t->ranges[i];
    if (bytes >= g->min_bytes && bytes <= g->max_bytes) {
      return g->alg == alg && g->segment_bytes == seg;
    }
  }
  return 0; /* a gap */
}

static const mpiar__tuning_range_t *range_at(const mpiar__tuning_table_t *t, size_t bytes) {
  for (int i = 0; i < t->nranges; i++) {
    if (bytes >= t->ranges[i].min_bytes && bytes <= t->ranges[i].max_bytes) {
      return &t->ranges[i];
    }
  }
  return NULL;
}

/* Ranges sorted, contiguous from 0, the last unbounded. */
static void check_shape(const mpiar__tuning_table_t *t) {
  CHECK_COND(t->nranges >= 1);
  CHECK_COND(t->ranges[0].min_bytes == 0);
  for (int i = 1; i < t->nranges; i++) {
    CHECK_COND(t->ranges[i].min_bytes == t->ranges[i - 1].max_bytes + 1);
    CHECK_COND(t->ranges[i].alg != t->ranges[i - 1].alg ||
          t->ranges[i].segment_bytes != t->ranges[i - 1].segment_bytes);
  }
  CHECK_COND(t->ranges[t->nranges - 1].max_bytes == MPIAR__TUNING_UNBOUNDED);
}

/* The table through the file format and back, where this build reads files. */
static void check_round_trip(const mpiar__tuning_table_t *table) {
  if (!mpiar__tuning_supported()) {
    return;
  }
  static mpiar__tuning_t t, back;
  mpiar__tuning_init(&t);
  t.ranks = P;
  t.nodes = 1;
  t.ranks_per_node = P;
  t.alpha = 1e-6;
  t.beta = 1e-10;
  for (int d = 0; d < MPIAR__DTYPE_COUNT; d++) {
    t.gamma[d] = 5e-11;
  }
  t.tables[0] = *table;
  t.ntables = 1;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK_COND(f != NULL && mpiar__tuning_write(&t, NULL, f) == 0);
  fclose(f);
  int rc = mpiar__tuning_parse(buf, len, "decide.json", &back);
  CHECK_COND(rc == MPIAR_SUCCESS);
  if (rc == MPIAR_SUCCESS) {
    CHECK_COND(back.ntables == 1 && back.tables[0].nranges == table->nranges);
    for (int i = 0; i < table->nranges && i < back.tables[0].nranges; i++) {
      CHECK_COND(back.tables[0].ranges[i].alg == table->ranges[i].alg);
      CHECK_COND(back.tables[0].ranges[i].min_bytes == table->ranges[i].min_bytes);
      CHECK_COND(back.tables[0].ranges[i].segment_bytes == table->ranges[i].segment_bytes);
    }
  }
  free(buf);
}

static double uniform(uint64_t *seed) {
  return ((double)(test_xorshift64(seed) >> 11) + 0.5) / 9007199254740992.0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Median and quartiles of @p n samples (sorted in place), as the sweep computes them. */
static void summarize(double *v, int n, double *q1, double *med, double *q3) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  double q[3];
  const double f[3] = {0.25, 0.5, 0.75};
  for (int j = 0; j < 3; j++) {
    double pos = f[j] * (n - 1);
    int i = (int)pos;
    q[j] = i >= n - 1 ? v[n - 1] : v[i] + (pos - i) * (v[i + 1] - v[i]);
  }
  *q1 = q[0];
  *med = q[1];
  *q3 = q[2];
}

/*
 * Noise only: every candidate takes the same time, 10 us, times a noise factor per repetition
 * (log-normal, sigma 0.25, and one repetition in ten slowed 1.5x to 3x as by another process);
 * median and quartiles of 30 repetitions. The medians then differ by up to about 20 %.
 */
static void test_noise_is_the_model(void) {
  static tune_sweep_t s;
  uint64_t seed = 0x5eed;
  double v[30];
  double spread = 0;
  for (int trial = 0; trial < 50; trial++) {
    make_sweep(&s, 30);
    for (int k = 0; k < s.nsizes; k++) {
      double lo = INFINITY, hi = 0;
      static double raw[5][30];
      for (int c = 0; c < s.ncand; c++) {
        for (int r = 0; r < 30; r++) {
          double g = sqrt(-2 * log(uniform(&seed))) * cos(2 * M_PI * uniform(&seed));
          v[r] = 10e-6 * exp(0.25 * g) * (uniform(&seed) < 0.1 ? 1.5 + 1.5 * uniform(&seed) : 1);
          raw[c][r] = v[r];
        }
        set(&s, k, c, 1, 0);
        if (!isnan(s.median[k][c])) {
          summarize(v, 30, &s.q1[k][c], &s.median[k][c], &s.q3[k][c]);
          lo = s.median[k][c] < lo ? s.median[k][c] : lo;
          hi = s.median[k][c] > hi ? s.median[k][c] : hi;
        }
      }
      spread = hi / lo - 1 > spread ? hi / lo - 1 : spread;
      /* Paired wins against the model's candidate, repetition by repetition. */
      const mpiar__algorithm_t *alg = NULL;
      size_t seg = 0;
      builtin(NULL, s.sizes[k], s.dtype, &alg, &seg);
      const int m = tune_candidate_at(&s, k, alg, seg, P);
      CHECK_COND(m >= 0);
      for (int c = 0; c < s.ncand && m >= 0; c++) {
        int w = 0;
        for (int r = 0; r < 30; r++) {
          w += raw[c][r] < raw[m][r];
        }
        s.wins[k][c] = w;
      }
    }
    tune_decide(&s, 0.01, &model);
    static mpiar__tuning_table_t t;
    tune_make_table(&s, &model, &t);
    for (int k = 0; k < s.nsizes; k++) {
      CHECK_COND(s.decision[k] == -1);
      CHECK_COND(s.status[k] == TUNE_MODEL_FASTEST || s.status[k] == TUNE_UNRESOLVED);
    }
    check_shape(&t);
    int bad = 0;
    for (int e = 0; e <= 52 && bad < 3; e++) {
      size_t b = (size_t)1 << e;
      for (size_t x = b > 1 ? b - 1 : b; x <= b + 1; x++) {
        if (!table_is_model_at(&t, x)) {
          fprintf(stderr, "  trial %d: the table differs from the model at %zu bytes\n", trial, x);
          bad++;
        }
      }
    }
    for (int i = 0; i < 2000 && bad < 3; i++) {
      size_t x = (size_t)(test_xorshift64(&seed) >> (12 + (test_xorshift64(&seed) % 40)));
      if (!table_is_model_at(&t, x)) {
        fprintf(stderr, "  trial %d: the table differs from the model at %zu bytes\n", trial, x);
        bad++;
      }
    }
    CHECK_COND(bad == 0);
    if (trial == 0) {
      check_round_trip(&t);
    }
  }
  CHECK_COND(spread > 0.1); /* the noise did make other candidates faster by their medians */
}

/* All candidates equal (20 us, quartiles +-5 %), then one size changed. */
static void flat(tune_sweep_t *s, int iters) {
  make_sweep(s, iters);
  for (int k = 0; k < s->nsizes; k++) {
    for (int c = 0; c < s->ncand; c++) {
      set(s, k, c, 20e-6, 0.05);
    }
  }
}

static void test_clear_win_overrides(void) {
  static tune_sweep_t s;
  static mpiar__tuning_table_t t;
  flat(&s, 30);
  const int k256 = index_of(&s, 256 << 10);
  set(&s, k256, 0, 10e-6, 0.05); /* recursive doubling at half the ring's time */
  const int k1m = index_of(&s, 1 << 20);
  set(&s, k1m, 0, 30e-6, 0.05); /* and slower than the ring at 1 MiB */
  tune_decide(&s, 0.01, &model);
  tune_make_table(&s, &model, &t);
  check_shape(&t);
  CHECK_COND(s.model[k256] == 2);                /* the model runs the ring at 256 KiB */
  CHECK_COND(s.status[k256] == TUNE_OVERRIDE && s.decision[k256] == 0);
  for (int k = 0; k < s.nsizes; k++) {
    CHECK_COND(k == k256 || s.decision[k] == -1);
  }
  /* Recursive doubling from the model's own (from the first byte above 16 KiB, where the ring's
   * halves stop being eager, to its switch back to the ring at 125 KiB) up to 256 KiB: over the
   * gap to 64 KiB, where it is what the table runs, not beyond 256 KiB, where it is slower at
   * 1 MiB. */
  const mpiar__tuning_range_t *g = range_at(&t, 256 << 10);
  CHECK_COND(g != NULL && g->alg == s.cand[0].alg && g->min_bytes == (16 << 10) + 1 &&
             g->max_bytes == (256 << 10));
  CHECK_COND(!table_is_model_at(&t, 200 << 10));      /* the model would run the ring there */
  CHECK_COND(table_is_model_at(&t, (256 << 10) + 1)); /* the model's ring again */
  CHECK_COND(table_is_model_at(&t, 512 << 10));
  CHECK_COND(table_is_model_at(&t, 16 << 10) && table_is_model_at(&t, (size_t)1 << 30));
  check_round_trip(&t);
}

static void test_unresolved_wins_do_not_override(void) {
  static tune_sweep_t s;
  const int k4 = 5; /* 4 KiB: the model runs recursive doubling */
  /* 1. Rabenseifner 20 % faster by its median, but its slowest quartile above recursive
   * doubling's fastest. */
  flat(&s, 30);
  CHECK_COND(s.sizes[k4] == 4096);
  set(&s, k4, 1, 16e-6, 0.2);
  tune_decide(&s, 0.01, &model);
  CHECK_COND(s.status[k4] == TUNE_UNRESOLVED && s.decision[k4] == -1 && s.contender[k4] == 1);
  /* 2. Clear, but over 6 repetitions. */
  flat(&s, TUNE_MIN_RESOLVE_REPS - 1);
  set(&s, k4, 1, 8e-6, 0.01);
  tune_decide(&s, 0.01, &model);
  CHECK_COND(s.status[k4] == TUNE_UNRESOLVED && s.decision[k4] == -1);
  /* The same with enough repetitions overrides (9 of 9: p = 1/512, below 0.01 / 4). */
  flat(&s, 9);
  set(&s, k4, 1, 8e-6, 0.01);
  tune_decide(&s, 0.01, &model);
  CHECK_COND(s.status[k4] == TUNE_OVERRIDE && s.decision[k4] == 1);
  /* 3. Median 20 % faster and quartiles apart, but faster in only 18 of the 30 repetitions
   * (the sign test: p = 0.18). */
  flat(&s, 30);
  set(&s, k4, 1, 16e-6, 0.01);
  s.wins[k4][1] = 18;
  tune_decide(&s, 0.01, &model);
  CHECK_COND(s.status[k4] == TUNE_UNRESOLVED && s.decision[k4] == -1);
  s.wins[k4][1] = 24; /* p = 0.0007, below 0.01 / 4 candidates */
  tune_decide(&s, 0.01, &model);
  CHECK_COND(s.status[k4] == TUNE_OVERRIDE && s.decision[k4] == 1);
  CHECK_COND(fabs(tune_sign_pvalue(30, 30) - ldexp(1, -30)) < 1e-15);
  CHECK_COND(fabs(tune_sign_pvalue(8, 8) - 1.0 / 256) < 1e-12);
  CHECK_COND(fabs(tune_sign_pvalue(0, 17) - 1.0) < 1e-9);
  CHECK_COND(tune_sign_pvalue(18, 30) > 0.1 && tune_sign_pvalue(24, 30) < 0.001);
  /* 4. Quartiles apart but 0.5 % faster: below the tie. */
  flat(&s, 30);
  for (int c = 0; c < s.ncand; c++) {
    set(&s, k4, c, 20e-6, 0.001);
  }
  set(&s, k4, 1, 19.9e-6, 0.001);
  tune_decide(&s, 0.01, &model);
  CHECK_COND(s.decision[k4] == -1 && s.status[k4] == TUNE_MODEL_FASTEST);
  static mpiar__tuning_table_t t;
  tune_make_table(&s, &model, &t);
  CHECK_COND(table_is_model_at(&t, 4096));
}

/* Rabenseifner and the 64K-segment ring both resolved at 256 KiB and 1 MiB: the previous size's
 * override stays where it is within the tie of the fastest. */
static void test_previous_override_kept(void) {
  static tune_sweep_t s;
  flat(&s, 30);
  const int k256 = index_of(&s, 256 << 10), k1m = index_of(&s, 1 << 20);
  set(&s, k256, 1, 10e-6, 0.02);
  set(&s, k256, 3, 11e-6, 0.02);
  set(&s, k1m, 1, 10.05e-6, 0.02); /* 0.5 % behind: kept */
  set(&s, k1m, 3, 10e-6, 0.02);
  tune_decide(&s, 0.01, &model);
  CHECK_COND(s.decision[k256] == 1 && s.decision[k1m] == 1);
  static mpiar__tuning_table_t t;
  tune_make_table(&s, &model, &t);
  check_shape(&t);
  /* One range from 256 KiB to 1 MiB, the last measured size; the model below (the ring at
   * 64 KiB is not Rabenseifner) and after. */
  const mpiar__tuning_range_t *g = range_at(&t, 1 << 20);
  CHECK_COND(g != NULL && g->alg == s.cand[1].alg && g->min_bytes == (256 << 10) &&
             g->max_bytes == (1 << 20));
  CHECK_COND(table_is_model_at(&t, (1 << 20) + 1) && table_is_model_at(&t, (size_t)64 << 20));
  CHECK_COND(table_is_model_at(&t, 64 << 10) && table_is_model_at(&t, (256 << 10) - 1));
  set(&s, k1m, 1, 10.5e-6, 0.02); /* 5 % behind: the fastest */
  tune_decide(&s, 0.01, &model);
  CHECK_COND(s.decision[k256] == 1 && s.decision[k1m] == 3);
}

int main(void) {
  test_noise_is_the_model();
  test_clear_win_overrides();
  test_unresolved_wins_do_not_override();
  test_previous_override_kept();
  printf("tune decide: %s (%d failures)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
