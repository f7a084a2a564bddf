/*
 * What a tuning table holds, from what the sweep measured: at every size the built-in model's
 * own choice (what `auto` runs without a tuning file), unless a measured candidate beat it
 * beyond the run's own noise. A table made this way never makes `auto` slower than the model
 * where the measurements could not tell the candidates apart: one fast median among a few noisy
 * repetitions no longer cuts the table (docs/tuning.md, "What the table holds").
 *
 * No MPI here: tests/tune/test_tune_decide.c feeds it made-up measurements.
 */
#include <math.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "common/tool.h"
#include "tune.h"

size_t tune_effective_segment(size_t seg, size_t bytes, mpiar_dtype_t dtype, int p) {
  size_t es = mpiar_dtype_size(dtype);
  size_t count = bytes / es;
  if (seg == 0 || count == 0) {
    return 0;
  }
  size_t eff = mpiar__segment_elems(seg, count, es, p) * es;
  size_t block = (count + (size_t)p - 1) / (size_t)p * es;
  return eff < block ? eff : 0;
}

int tune_candidate_at(const tune_sweep_t *s, int k, const mpiar__algorithm_t *alg, size_t seg,
                      int p) {
  size_t eff = (alg->flags & MPIAR__ALG_SEGMENTED)
                   ? tune_effective_segment(seg, s->sizes[k], s->dtype, p)
                   : 0;
  for (int c = 0; c < s->ncand; c++) {
    if (s->cand[c].alg != alg || isnan(s->median[k][c])) {
      continue;
    }
    size_t ceff = tune_effective_segment(s->cand[c].segment_bytes, s->sizes[k], s->dtype, p);
    if (ceff == eff) {
      return c;
    }
  }
  return -1;
}

double tune_sign_pvalue(int wins, int n) {
  double p = 0;
  for (int x = wins; x <= n; x++) {
    p += exp(lgamma(n + 1.0) - lgamma(x + 1.0) - lgamma(n - x + 1.0) - n * log(2.0));
  }
  return p;
}

/*
 * Whether candidate c's advantage over the model's candidate m at size k is beyond the noise. The
 * sign test's level is shared by the candidates measured there (Bonferroni): with eight of them,
 * each must pass at 0.01 / 8, so that one of them passing by chance stays below 1 %.
 */
static int resolved(const tune_sweep_t *s, int k, int c, int m, double tie) {
  if (c == m || isnan(s->median[k][c]) || s->iters[k] < TUNE_MIN_RESOLVE_REPS ||
      s->wins[k][c] < 0) {
    return 0;
  }
  int others = 0;
  for (int q = 0; q < s->ncand; q++) {
    others += q != m && !isnan(s->median[k][q]);
  }
  return s->median[k][c] < s->median[k][m] * (1.0 - tie) && s->q3[k][c] < s->q1[k][m] &&
         tune_sign_pvalue(s->wins[k][c], s->iters[k]) < TUNE_SIGN_LEVEL / others;
}

void tune_decide(tune_sweep_t *s, double tie, const tune_model_t *mod) {
  s->tie = tie;
  for (int k = 0; k < s->nsizes; k++) {
    const mpiar__algorithm_t *alg = NULL;
    size_t seg = 0;
    mod->choice(mod->ctx, s->sizes[k], s->dtype, &alg, &seg);
    int m = tune_candidate_at(s, k, alg, seg, s->p);
    int fastest = -1;
    for (int c = 0; c < s->ncand; c++) {
      if (!isnan(s->median[k][c]) && (fastest < 0 || s->median[k][c] < s->median[k][fastest])) {
        fastest = c;
      }
    }
    s->model[k] = m;
    s->decision[k] = -1;
    s->contender[k] = -1;
    if (m < 0) {
      s->status[k] = TUNE_MODEL_UNMEASURED;
      continue;
    }
    if (fastest < 0 || s->median[k][m] <= s->median[k][fastest] * (1.0 + tie)) {
      s->status[k] = TUNE_MODEL_FASTEST;
      continue;
    }
    int best = -1;
    for (int c = 0; c < s->ncand; c++) {
      if (resolved(s, k, c, m, tie) && (best < 0 || s->median[k][c] < s->median[k][best])) {
        best = c;
      }
    }
    if (best < 0) {
      s->status[k] = TUNE_UNRESOLVED;
      s->contender[k] = fastest;
      continue;
    }
    /* Keep the previous size's override where it is resolved too and within the tie. */
    int prev = k > 0 ? s->decision[k - 1] : -1;
    if (prev >= 0 && prev != best && resolved(s, k, prev, m, tie) &&
        s->median[k][prev] <= s->median[k][best] * (1.0 + tie)) {
      best = prev;
    }
    s->status[k] = TUNE_OVERRIDE;
    s->decision[k] = best;
  }
}

/* ---- The ranges --------------------------------------------------------------------------- */

/* The model's choice is scanned up to here; the choice at this size has no upper bound. */
#define MODEL_SCAN_END ((size_t)1 << 50)

static void append(mpiar__tuning_table_t *t, size_t lo, size_t hi, const mpiar__algorithm_t *alg,
                   size_t seg) {
  if (!(alg->flags & MPIAR__ALG_SEGMENTED)) {
    seg = 0;
  }
  if (t->nranges > 0) {
    mpiar__tuning_range_t *last = &t->ranges[t->nranges - 1];
    if (last->alg == alg && last->segment_bytes == seg && last->max_bytes + 1 == lo) {
      last->max_bytes = hi;
      return;
    }
  }
  if (t->nranges == MPIAR__TUNING_MAX_RANGES) {
    /* Cannot happen with the sweep's 64 sizes; the last range then reaches further. */
    t->ranges[t->nranges - 1].max_bytes = hi;
    return;
  }
  mpiar__tuning_range_t *g = &t->ranges[t->nranges++];
  g->min_bytes = lo;
  g->max_bytes = hi;
  g->alg = alg;
  g->segment_bytes = seg;
}

/* The model's choice; below one element (no call has such a size), the choice at one element. */
static void model_at(const tune_model_t *m, mpiar_dtype_t d, size_t bytes,
                     const mpiar__algorithm_t **alg, size_t *seg) {
  const size_t es = mpiar_dtype_size(d);
  m->choice(m->ctx, bytes < es ? es : bytes, d, alg, seg);
}

static int same_choice(const tune_model_t *m, mpiar_dtype_t d, size_t bytes,
                       const mpiar__algorithm_t *alg, size_t seg) {
  const mpiar__algorithm_t *a = NULL;
  size_t sg = 0;
  model_at(m, d, bytes, &a, &sg);
  return a == alg && sg == seg;
}

/* The model's own choices over [lo, hi] (hi MPIAR__TUNING_UNBOUNDED: every size from lo). */
static void append_model(mpiar__tuning_table_t *t, const tune_model_t *m, mpiar_dtype_t d,
                         size_t lo, size_t hi) {
  const size_t end = hi < MODEL_SCAN_END ? hi : MODEL_SCAN_END;
  size_t x = lo;
  for (;;) {
    const mpiar__algorithm_t *alg = NULL;
    size_t seg = 0;
    model_at(m, d, x, &alg, &seg);
    /* Step up while the choice holds, then bisect the step where it changed. */
    size_t same = x, next = x;
    int changed = 0;
    while (same < end) {
      next = same + same / 8 + 1;
      next = next > end || next < same ? end : next;
      if (!same_choice(m, d, next, alg, seg)) {
        changed = 1;
        break;
      }
      same = next;
    }
    if (!changed) {
      append(t, x, hi, alg, seg);
      return;
    }
    while (next - same > 1) {
      size_t mid = same + (next - same) / 2;
      if (same_choice(m, d, mid, alg, seg)) {
        same = mid;
      } else {
        next = mid;
      }
    }
    append(t, x, same, alg, seg);
    x = next;
  }
}

/* The boundary between measured sizes a < b: sizes above their geometric mean go to b. */
static size_t boundary(size_t a, size_t b) {
  return (size_t)floor(sqrt((double)a * (double)b)) + 1;
}

/* What a span of sizes holds: a candidate, or the model (-1). */
#define HOLD_MODEL (-1)

/* The candidate the table runs at measured size k (the override, else the model's), or -1. */
static int held(const tune_sweep_t *s, int k) {
  return s->decision[k] >= 0 ? s->decision[k] : s->model[k];
}

/* Whether the table runs candidate c at measured size k (its override, or the model's own). */
static int runs_there(const tune_sweep_t *s, int k, int c) {
  return c >= 0 && held(s, k) == c;
}

static void put_span(mpiar__tuning_table_t *t, const tune_sweep_t *s, const tune_model_t *m,
                     size_t lo, size_t hi, int hold) {
  if (lo > hi) {
    return;
  }
  if (hold == HOLD_MODEL) {
    append_model(t, m, s->dtype, lo, hi);
  } else {
    append(t, lo, hi, s->cand[hold].alg, s->cand[hold].segment_bytes);
  }
}

void tune_make_table(const tune_sweep_t *s, const tune_model_t *m, mpiar__tuning_table_t *table) {
  memset(table, 0, sizeof *table);
  table->dtype = s->dtype;
  const int n = s->nsizes;
  /* Below the first measured size: its decision. */
  put_span(table, s, m, 0, s->sizes[0] - 1, s->decision[0]);
  for (int k = 0; k < n; k++) {
    const size_t a = s->sizes[k];
    put_span(table, s, m, a, a, s->decision[k]);
    if (k + 1 == n) {
      break;
    }
    /* The sizes strictly between a and b. */
    const size_t b = s->sizes[k + 1];
    const int da = s->decision[k], db = s->decision[k + 1];
    if (da == db) {
      put_span(table, s, m, a + 1, b - 1, da);
      continue;
    }
    /* An override reaches over the gap where the table runs the same candidate at the other end
     * (the model's own choice there); two overrides split the gap geometrically; otherwise the
     * unmeasured sizes follow the model. */
    const int claim_a = da != HOLD_MODEL && runs_there(s, k + 1, da);
    const int claim_b = db != HOLD_MODEL && runs_there(s, k, db);
    if (claim_a && !claim_b) {
      put_span(table, s, m, a + 1, b - 1, da);
    } else if (claim_b && !claim_a) {
      put_span(table, s, m, a + 1, b - 1, db);
    } else if (da != HOLD_MODEL && db != HOLD_MODEL) {
      const size_t g = boundary(a, b);
      put_span(table, s, m, a + 1, g - 1, da);
      put_span(table, s, m, g, b - 1, db);
    } else {
      /* One override, not borne out at the other end: the model between them. */
      put_span(table, s, m, a + 1, b - 1, HOLD_MODEL);
    }
  }
  /* Beyond the last measured size nothing was measured: the model. */
  const size_t last = s->sizes[n - 1];
  append_model(table, m, s->dtype, last + 1, MPIAR__TUNING_UNBOUNDED);
}

/* ---- The report --------------------------------------------------------------------------- */

void tune_print_decisions(FILE *f, const tune_sweep_t *s) {
  static const char *const what[] = {
      [TUNE_MODEL_FASTEST] = "model (fastest)",
      [TUNE_OVERRIDE] = "override",
      [TUNE_UNRESOLVED] = "model (unresolved)",
      [TUNE_MODEL_UNMEASURED] = "model (not measured)",
  };
  fprintf(f,
          "## What the table holds (%s): the built-in model's choice unless a candidate beats it "
          "beyond the noise\n"
          "# (median faster by more than the tie, its slowest quartile below the model choice's "
          "fastest, faster in enough of the same repetitions: sign test p < %g, >= %d of them)\n",
          mpiar_dtype_name(s->dtype), TUNE_SIGN_LEVEL, TUNE_MIN_RESOLVE_REPS);
  fprintf(f, "#%10s  %-22s %-24s %-24s %s\n", "size", "table", "model's choice", "fastest other",
          "median / model's, quartiles");
  int nunres = 0, nover = 0;
  char list[512] = "";
  for (int k = 0; k < s->nsizes; k++) {
    char sz[32];
    tool_format_bytes((double)s->sizes[k], sz, sizeof sz);
    const int m = s->model[k];
    int other = s->status[k] == TUNE_OVERRIDE     ? s->decision[k]
                : s->status[k] == TUNE_UNRESOLVED ? s->contender[k]
                                                  : -1;
    fprintf(f, " %10s  %-22s %-24s", sz, what[s->status[k]], m >= 0 ? s->cand[m].name : "-");
    if (other >= 0 && m >= 0) {
      fprintf(f, " %-24s %.3f, q3 %.2f us vs q1 %.2f us, faster in %d of %d\n",
              s->cand[other].name, s->median[k][other] / s->median[k][m], s->q3[k][other] * 1e6,
              s->q1[k][m] * 1e6, s->wins[k][other], s->iters[k]);
    } else {
      fprintf(f, " %-24s\n", "-");
    }
    if (s->status[k] == TUNE_UNRESOLVED || s->status[k] == TUNE_MODEL_UNMEASURED) {
      size_t used = strlen(list);
      snprintf(list + used, sizeof list - used, "%s%s", nunres ? ", " : "", sz);
      nunres++;
    }
    nover += s->status[k] == TUNE_OVERRIDE;
  }
  fprintf(f, "# overrides at %d of %d sizes; unresolved: %d size%s%s%s%s\n", nover, s->nsizes,
          nunres, nunres == 1 ? "" : "s", nunres ? " (" : "", list,
          nunres ? "): the table keeps the model's choice there" : "");
}
