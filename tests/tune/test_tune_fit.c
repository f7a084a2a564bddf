/*
 * mpiar-tune's line fits (perf/tune/fit.c) on made-up measurements: the intercept is the median of
 * the small sizes, the slope comes from the large ones, so that a cache regime in the middle (here
 * 4x faster than memory) does not pull the bandwidth; noisy small sizes do not tilt the latency;
 * a run whose small sizes took longer than the large gets a slope through the origin; and the
 * residuals are those of every point.
 */
#include <math.h>
#include <stdio.h>

#include "../common/test_check.h"
#include "tune.h"

static int near(double x, double want, double rel) {
  return fabs(x - want) <= rel * fabs(want);
}

int main(void) {
  /* alpha 1 us, 0.1 ns/B from memory; 32 KiB .. 512 KiB in the caches at 0.025 ns/B; the small
   * sizes' times wobble by 10 % around alpha. */
  tune_fit_t f = {0};
  const double alpha = 1e-6, beta = 1e-10;
  const double wobble[3] = {1.1, 0.9, 1.0};
  for (size_t x = 8; x <= ((size_t)64 << 20); x *= 4) {
    double t = alpha + (double)x * beta;
    if (x <= 256) {
      t = alpha * wobble[f.n % 3];
    } else if (x >= (32 << 10) && x <= (512 << 10)) {
      t = alpha + (double)x * beta / 4;
    }
    f.x[f.n] = (double)x;
    f.t[f.n++] = t;
  }
  f.small_max = 256;
  f.large_min = 1 << 20;
  tune_fit_line(&f);
  CHECK(near(f.a, alpha, 1e-12), "alpha %g", f.a);
  CHECK(near(f.b, beta, 1e-9), "beta %g", f.b);
  CHECK(f.nsmall == 3 && f.nlarge == 3, "regimes: %d small, %d large", f.nsmall, f.nlarge);
  /* The cache regime shows in the residuals: the model is slower than those measurements. */
  int cached = 0;
  for (int i = 0; i < f.n; i++) {
    if (f.x[i] >= (32 << 10) && f.x[i] <= (512 << 10)) {
      cached += f.resid[i] > 0.5;
    }
  }
  CHECK(cached == 3 && f.max_abs > 0.5, "cache residuals: %d, max %g", cached, f.max_abs);

  /* No small sizes (the reduction's fit): no intercept, the slope through the origin. */
  tune_fit_t g = {.n = 3, .x = {1 << 20, 4 << 20, 32 << 20}, .small_max = 0, .large_min = 4 << 20};
  g.t[0] = 1e-5;
  g.t[1] = 4.0 * (4 << 20) * 5e-11;
  g.t[2] = 4.0 * (32 << 20) * 5e-11;
  tune_fit_line(&g);
  CHECK(g.a == 0 && near(g.b, 2e-10, 1e-9) && g.nlarge == 2, "gamma: a %g b %g (%d)", g.a, g.b,
        g.nlarge);

  /* A disturbed run: the small sizes took longer than the large ones. */
  tune_fit_t h = {.n = 3, .x = {8, 1 << 20, 2 << 20}, .small_max = 256, .large_min = 1 << 20};
  h.t[0] = 5e-3;
  h.t[1] = 1e-4;
  h.t[2] = 2e-4;
  tune_fit_line(&h);
  CHECK(h.a == 0 && near(h.b, 1e-4 / 1048576, 1e-9), "disturbed: a %g b %g", h.a, h.b);

  /* A short run without large sizes: the slope from the two largest points. */
  tune_fit_t q = {.n = 3, .x = {8, 1 << 16, 1 << 18}, .small_max = 256, .large_min = 1 << 20};
  q.t[0] = 1e-6;
  q.t[1] = 1e-6 + 65536 * 1e-10;
  q.t[2] = 1e-6 + 262144 * 1e-10;
  tune_fit_line(&q);
  CHECK(near(q.a, 1e-6, 1e-12) && near(q.b, 1e-10, 1e-9) && q.nlarge == 2, "short: %g %g %d",
        q.a, q.b, q.nlarge);

  printf("tune fits: %s (%d failed checks)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
