/*
 * The catalogue algorithms double_binary_tree, direct and torus_2d against their file headers:
 * the closed forms of direct and torus_2d for every p (transfer- and reduction-bound), the
 * double binary tree's exact p = 2 and its estimate's bound elsewhere, bytes and messages per
 * rank, and the operand order (every rank's input a NaN naming the rank: every element of every
 * rank's result must carry rank 0's payload). double_binary_tree/colour: its estimate's bound,
 * its period per segment against the uncoloured order's, the uncoloured order where it has
 * nothing to pipeline, and its operand order ("quick", for sanitizer builds: p <= 12). Their
 * matrices are test_sim_matrix's.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "sim_test.h"

/* Transfer-bound (B gamma < alpha + B beta for the blocks used) and reduction-bound. */
static const mpiar__cost_params_t port_bound = {2e-6, 1e-10, 5e-11, 2e-6, 1e-10, 0, 0};
static const mpiar__cost_params_t reduce_bound = {1e-7, 1e-11, 1e-9, 1e-7, 1e-11, 0, 0};

static mpiar__sim_result_t timing(const mpiar__algorithm_t *alg, int p, size_t count, size_t seg,
                                  int in_place, const mpiar__cost_params_t *c) {
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = count;
  cfg.segment_elems = seg;
  cfg.in_place = in_place;
  cfg.data = 0;
  cfg.check_hazards = 0;
  cfg.cost = *c;
  mpiar__sim_result_t res;
  int rc = mpiar__sim_run(&cfg, &res);
  EXPECT(rc == MPIAR_SUCCESS && res.ok, "%s p=%d count=%zu seg=%zu: %s", alg->name, p, count, seg,
         rc ? mpiar_last_error() : res.error);
  return res;
}

/* Simulated time within [lo, hi] times the cost function (lo = hi = 1: the closed form). */
static void expect_cost(const mpiar__algorithm_t *alg, int p, size_t count, size_t seg,
                        int in_place, const mpiar__cost_params_t *c, double lo, double hi) {
  const mpiar__sim_result_t r = timing(alg, p, count, seg, in_place, c);
  const double f = alg->cost(p, count * 4, 4, seg * 4, c, NULL);
  EXPECT(r.time_s >= lo * f * (1 - 1e-9) && r.time_s <= hi * f * (1 + 1e-9),
         "%s p=%d count=%zu seg=%zu in_place=%d: sim %.12g s, cost %.12g s (ratio %.4f)", alg->name,
         p, count, seg, in_place, r.time_s, f, r.time_s / f);
}

/* The grid's rows of torus_2d: the largest divisor of p not above sqrt(p). */
static int rows_of(int p) {
  int rows = 1;
  for (int d = 1; d * d <= p; d++) {
    rows = p % d == 0 ? d : rows;
  }
  return rows;
}

int main(int argc, char **argv) {
  /* "quick" (sanitizer builds): double_binary_tree/colour at p <= 12 only. */
  const int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  const mpiar__algorithm_t *direct = mpiar__algorithm_find("direct");
  const mpiar__algorithm_t *torus = mpiar__algorithm_find("torus_2d");
  const mpiar__algorithm_t *dbt = mpiar__algorithm_find("double_binary_tree");
  const mpiar__algorithm_t *ring = mpiar__algorithm_find("ring");
  if (direct == NULL || torus == NULL || dbt == NULL || ring == NULL) {
    fprintf(stderr, "FAIL: catalogue entries missing from the registry\n");
    return 1;
  }
  EXPECT((direct->flags & MPIAR__ALG_MANUAL) && !(torus->flags & MPIAR__ALG_MANUAL) &&
             (dbt->flags & MPIAR__ALG_MANUAL) && (dbt->flags & MPIAR__ALG_SEGMENTED),
         "flags");

  /* direct and torus_2d: the closed form for every p, both regimes, in place or not. */
  for (int p = 2; p <= 64 + 4; p++) {
    const int q = p <= 64 ? p : (const int[]){100, 127, 128, 1000}[p - 65];
    const size_t count = (size_t)q * 512;
    if (q <= 128) {
      expect_cost(direct, q, count, 0, q % 2, &port_bound, 1, 1);
      expect_cost(direct, q, count, 0, (q + 1) % 2, &reduce_bound, 1, 1);
    }
    expect_cost(torus, q, count, 0, q % 2, &port_bound, 1, 1);
    expect_cost(torus, q, (size_t)q * 8, 0, (q + 1) % 2, &reduce_bound, 1, 1);
    /* Bytes and messages per rank (p | count): 2 (p-1)/p n; 2(p-1) and 2(R+C-2) messages. */
    const size_t n = count * 4, opt = 2 * (size_t)(q - 1) * (n / (size_t)q);
    const int R = rows_of(q), C = q / R;
    if (q <= 128) {
      const mpiar__sim_result_t d = timing(direct, q, count, 0, 0, &port_bound);
      EXPECT(d.bytes_sent_max == opt && d.messages_max == 2 * (size_t)(q - 1),
             "direct p=%d: %zu bytes, %zu messages per rank at most; optimum %zu", q,
             d.bytes_sent_max, d.messages_max, opt);
    }
    const mpiar__sim_result_t t = timing(torus, q, count, 0, 1, &port_bound);
    EXPECT(t.bytes_sent_max == opt && t.bytes_sent_total == (size_t)q * opt &&
               t.messages_max == 2 * (size_t)(R + C - 2),
           "torus_2d p=%d (%d x %d): %zu bytes, %zu messages per rank at most; optimum %zu", q, R,
           C, t.bytes_sent_max, t.messages_max, opt);
    /* Against the ring: never slower, fewer messages from p = 4 on where p is not prime. */
    const mpiar__sim_result_t g = timing(ring, q, count, 0, 1, &port_bound);
    EXPECT(t.time_s <= g.time_s * (1 + 1e-12) && (R == 1 || t.messages < g.messages),
           "torus_2d p=%d: %.9g s, %zu messages; ring %.9g s, %zu", q, t.time_s, t.messages,
           g.time_s, g.messages);
  }
  expect_cost(torus, 1024, 1024 * 64, 0, 0, &port_bound, 1, 1);

  /* double_binary_tree: exact at p = 2, segmented or not (segments dividing the half). */
  const size_t segs[] = {0, 256, 1024, 4096};
  for (size_t i = 0; i < sizeof segs / sizeof segs[0]; i++) {
    expect_cost(dbt, 2, 1 << 16, segs[i], (int)i % 2, &port_bound, 1, 1);
    expect_cost(dbt, 2, 1 << 16, segs[i], (int)(i + 1) % 2, &reduce_bound, 1, 1);
  }
  /* Elsewhere the estimate of the header: within 25 %. */
  for (int p = 3; p <= 1024; p = p < 40 ? p + 1 : p * 2 - 1) {
    const size_t counts[] = {16, (size_t)1 << 18, (size_t)1 << 22, (size_t)1 << 22};
    const size_t seg[] = {0, 0, 1 << 16, 1 << 14};
    for (int c = 0; c < 4; c++) {
      expect_cost(dbt, p, counts[c], seg[c], (p + c) % 2, &port_bound, 0.75, 1.25);
    }
  }
  /* Segments pipeline: faster than one segment per half on a large vector. */
  {
    const mpiar__sim_result_t plain = timing(dbt, 16, 1 << 22, 0, 0, &port_bound);
    const mpiar__sim_result_t seg = timing(dbt, 16, 1 << 22, 1 << 16, 0, &port_bound);
    EXPECT(seg.time_s < 0.7 * plain.time_s, "segmented %.9g s vs plain %.9g s", seg.time_s,
           plain.time_s);
  }
  /* About 2n bytes sent per rank for even p (inner in one tree, leaf in the other). */
  for (int p = 2; p <= 64; p += 2) {
    const size_t count = (size_t)p * 64;
    const mpiar__sim_result_t r = timing(dbt, p, count, 0, 0, &port_bound);
    EXPECT(r.bytes_sent_max <= 2 * count * 4, "double_binary_tree p=%d: %zu bytes sent, n = %zu", p,
           r.bytes_sent_max, count * 4);
  }

  /* double_binary_tree/colour: the estimate of the header, segmented, in both regimes. */
  const mpiar__algorithm_t *col = mpiar__algorithm_find("double_binary_tree/colour");
  EXPECT(col != NULL && (col->flags & MPIAR__ALG_MANUAL) && (col->flags & MPIAR__ALG_SEGMENTED),
         "double_binary_tree/colour: missing, or flags");
  if (col == NULL) {
    return 1;
  }
  for (int p = 4; p <= (quick ? 12 : 1024); p = p < 20 ? p + 1 : p * 2 + 1) {
    const int q = p > 1000 ? 1024 : p;
    expect_cost(col, q, 1 << 20, 1 << 14, q % 2, &port_bound, 0.74, 1.26);
    expect_cost(col, q, 1 << 18, 1 << 12, (q + 1) % 2, &port_bound, 0.74, 1.26);
    expect_cost(col, q, 1 << 20, 1 << 16, q % 2, &reduce_bound, 0.74, 1.26);
  }
  /* The period, from the difference of 64 and 32 segments of 1000 elements: at most 6.1 t per
   * segment from p = 4 on, less than the uncoloured order's from p = 5 (7 t at p = 9) and under
   * 0.6 of it from p = 64 (10 t there). */
  {
    const mpiar__cost_params_t c = {2e-6, 1e-10, 0, 2e-6, 1e-10, 0, 0};
    const double t = c.alpha + 4000 * c.beta;
    const int ps[] = {4, 5, 9, 64, 100};
    for (int i = 0; i < (quick ? 3 : 5); i++) {
      const mpiar__sim_result_t a = timing(col, ps[i], 128000, 1000, 0, &c);
      const mpiar__sim_result_t b = timing(dbt, ps[i], 128000, 1000, 0, &c);
      const double per = (a.time_s - timing(col, ps[i], 64000, 1000, 0, &c).time_s) / 32;
      const double old = (b.time_s - timing(dbt, ps[i], 64000, 1000, 0, &c).time_s) / 32;
      /* The same messages and bytes as the uncoloured order: only their order differs. */
      EXPECT(a.messages == b.messages && a.messages_max == b.messages_max &&
                 a.bytes_sent_max == b.bytes_sent_max && a.bytes_sent_total == b.bytes_sent_total,
             "double_binary_tree/colour p=%d: %zu messages (%zu max), %zu bytes at most; "
             "uncoloured %zu (%zu), %zu",
             ps[i], a.messages, a.messages_max, a.bytes_sent_max, b.messages, b.messages_max,
             b.bytes_sent_max);
      EXPECT(per <= 6.1 * t * (1 + 1e-9) && (ps[i] < 5 || per < old) &&
                 (ps[i] < 64 || per < 0.6 * old),
             "double_binary_tree/colour p=%d: %.3f t per segment, uncoloured %.3f t", ps[i],
             per / t, old / t);
    }
  }
  /* Nothing to pipeline (p <= 3, one segment per half): the uncoloured order, step for step. */
  for (int p = 2; p <= 9; p++) {
    const size_t seg = p <= 3 ? 1024 : 0;
    const mpiar__sim_result_t a = timing(col, p, 1 << 14, seg, p % 2, &port_bound);
    const mpiar__sim_result_t b = timing(dbt, p, 1 << 14, seg, p % 2, &port_bound);
    EXPECT(a.time_s == b.time_s && a.messages == b.messages,
           "double_binary_tree/colour p=%d seg=%zu: %.9g s, uncoloured %.9g s", p, seg, a.time_s,
           b.time_s);
  }

  /* Operand order: rank 0's NaN payload everywhere. */
  const mpiar__algorithm_t *algs[] = {direct, torus, dbt, col};
  for (int a = 0; a < 4; a++) {
    for (int p = 1; p <= 40; p++) {
      sim_expect_nan_order(algs[a], p, (size_t)2 * p + 3, 0, p % 2);
      if (algs[a]->flags & MPIAR__ALG_SEGMENTED) {
        sim_expect_nan_order(algs[a], p, (size_t)7 * p + 5, 3, (p + 1) % 2);
      }
    }
    sim_expect_nan_order(algs[a], 100, 301, 0, 1);
  }
  printf("catalogue: %d failures\n", failures);
  return failures ? 1 : 0;
}
