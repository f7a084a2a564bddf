/*
 * The calibration's line fits (tune.h, tune_fit_t): the intercept from the small sizes, the slope
 * from the large ones. No MPI, so that tests/tune/test_tune_fit.c checks it on made-up points.
 */
#include <math.h>

#include "common/tool.h"
#include "tune.h"

/* The slope b of t = a + b x (a given) over the points with x >= lo, by least squares on the
 * relative error. @return the number of points used. */
static int fit_slope(const tune_fit_t *f, double lo, double a, double *b) {
  double swxx = 0, swxt = 0;
  int n = 0;
  for (int i = 0; i < f->n; i++) {
    if (f->x[i] >= lo) {
      const double w = 1.0 / (f->t[i] * f->t[i]);
      swxx += w * f->x[i] * f->x[i];
      swxt += w * f->x[i] * (f->t[i] - a);
      n++;
    }
  }
  *b = swxx > 0 ? swxt / swxx : 0;
  return n;
}

void tune_fit_line(tune_fit_t *f) {
  double a = 0, b = 0, small[TUNE_MAX_POINTS];
  /* The intercept: the median time of the small sizes, where n beta is a rounding error; a line
   * through a few nearly equal times would tilt with their noise. */
  f->nsmall = 0;
  for (int i = 0; i < f->n; i++) {
    if (f->x[i] <= f->small_max) {
      small[f->nsmall++] = f->t[i];
    }
  }
  a = f->nsmall > 0 ? tool_median(small, f->nsmall) : 0;
  /* The slope from the large sizes; too few of them (a short run): the two largest points. */
  double lo = f->large_min;
  int large = 0;
  for (int i = 0; i < f->n; i++) {
    large += f->x[i] >= lo;
  }
  if (large == 0 && f->n > 0) {
    lo = f->x[f->n > 1 ? f->n - 2 : 0];
  }
  f->nlarge = fit_slope(f, lo, a, &b);
  if (!(b > 0)) {
    /* The small sizes took longer than the large ones (a run disturbed by other work): the
     * intercept is not to be trusted, so the slope goes through the origin. */
    a = 0;
    fit_slope(f, lo, a, &b);
  }
  f->a = a;
  f->b = b > 0 ? b : 1e-15; /* flat times: the smallest slope the data allow */
  double abs[TUNE_MAX_POINTS];
  f->max_abs = 0;
  for (int i = 0; i < f->n; i++) {
    f->resid[i] = (f->a + f->b * f->x[i] - f->t[i]) / f->t[i];
    abs[i] = fabs(f->resid[i]);
    f->max_abs = abs[i] > f->max_abs ? abs[i] : f->max_abs;
  }
  f->median_abs = tool_median(abs, f->n);
}

