/*
 * Swing (src/algorithms/swing.c): the peers are the paper's (r +- rho(s), rho = 1, -1, 3, -5, 11),
 * the simulator's time equals the closed forms of the file header for every p (powers of two
 * and the fold), the bandwidth-optimal variant sends 2 (p'-1)/p' n bytes per rank and the
 * latency-optimal one log2(p') n, and neither is an automatic candidate. Data, bitwise identity
 * and NaN order are the matrix's (test_sim_matrix swing, swing_latency).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"
#include "sim_test.h"

static const mpiar__cost_params_t model = {2e-6, 1e-10, 5e-11, 2e-6, 1e-10};

static mpiar__sim_result_t sim(const mpiar__algorithm_t *alg, int p, size_t count, int in_place,
                               int data) {
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = count;
  cfg.in_place = in_place;
  cfg.data = data;
  cfg.check_hazards = data ? -1 : 0;
  cfg.cost = model;
  mpiar__sim_result_t res;
  int rc = mpiar__sim_run(&cfg, &res);
  EXPECT(rc == MPIAR_SUCCESS && res.ok, "%s p=%d count=%zu: %s", alg->name, p, count,
         rc ? mpiar_last_error() : res.error);
  return res;
}

/* The peers of rank @p r's sends, in step order. @return how many. */
static int send_peers(const mpiar__algorithm_t *alg, int p, int r, int *peers, int max) {
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = (size_t)p * 4;
  mpiar__schedule_t s;
  if (mpiar__sim_build(&cfg, r, &s) != MPIAR_SUCCESS) {
    return -1;
  }
  int n = 0;
  for (size_t i = 0; i < s.nsteps && n < max; i++) {
    if (s.steps[i].kind == MPIAR__STEP_SEND) {
      peers[n++] = s.steps[i].peer;
    }
  }
  mpiar__schedule_destroy(&s);
  return n;
}

static void expect_peers(const mpiar__algorithm_t *alg, int p, int r, const int *want, int nwant) {
  int got[64];
  int n = send_peers(alg, p, r, got, 64);
  int same = n == nwant;
  for (int i = 0; same && i < n; i++) {
    same = got[i] == want[i];
  }
  char buf[256] = "";
  for (int i = 0; i < n && strlen(buf) < 200; i++) {
    snprintf(buf + strlen(buf), sizeof buf - strlen(buf), " %d", got[i]);
  }
  EXPECT(same, "%s p=%d rank %d sends to%s", alg->name, p, r, buf);
}

int main(void) {
  const mpiar__algorithm_t *bw = mpiar__algorithm_find("swing");
  const mpiar__algorithm_t *lat = mpiar__algorithm_find("swing_latency");
  if (bw == NULL || lat == NULL) {
    fprintf(stderr, "swing entries missing from the registry\n");
    return 1;
  }
  EXPECT((bw->flags & MPIAR__ALG_MANUAL) && (lat->flags & MPIAR__ALG_MANUAL),
         "swing entries must not be automatic candidates");

  /*
   * p = 16: rank 0 (even) meets 0 + rho(s) = 1, -1, 3, -5 (mod 16): 1, 15, 3, 11; rank 5 (odd)
   * 5 - rho(s) = 4, 6, 2, 10. The reduce-scatter runs s = 0..3, the allgather 3..0; the latency
   * variant runs 3..0 (swing.c explains why).
   */
  const int r0[] = {1, 15, 3, 11, 11, 3, 15, 1}, r5[] = {4, 6, 2, 10, 10, 2, 6, 4};
  expect_peers(bw, 16, 0, r0, 8);
  expect_peers(bw, 16, 5, r5, 8);
  expect_peers(lat, 16, 0, r0 + 4, 4);
  expect_peers(lat, 16, 5, r5 + 4, 4);
  /* p = 64, rank 0: rho(4) = 11, rho(5) = -21. */
  const int r0_64[] = {1, 63, 3, 59, 11, 43, 43, 11, 59, 3, 63, 1};
  expect_peers(bw, 64, 0, r0_64, 12);
  /* p = 6 (p' = 4, rem 2): rank 0 folds into rank 1; rank 1 is virtual 0, meeting virtual 1
   * (rank 3) and virtual 3 (rank 5), then returns the result to rank 0. */
  const int f1[] = {3, 5, 5, 3, 0}, f0[] = {1};
  expect_peers(bw, 6, 1, f1, 5);
  expect_peers(bw, 6, 0, f0, 1);

  /*
   * The closed forms, every p up to 64 and some beyond, both sizes, in place or not: equal for
   * powers of two, and for swing_latency at every p. swing with a fold is slower than its
   * formula (up to 1.42x at p = 49 and 4 B per rank, where alphas dominate): the folded ranks
   * start late, and ranks ahead of them queue on their receive ports in later steps; the
   * formula stays the model's estimate there, as Rabenseifner's is.
   */
  for (int p = 2; p <= 70; p = p < 64 ? p + 1 : p + 3) {
    const size_t counts[] = {(size_t)p * 4, (size_t)p * 8192};
    for (int c = 0; c < 2; c++) {
      for (int v = 0; v < 2; v++) {
        const mpiar__algorithm_t *alg = v ? lat : bw;
        mpiar__sim_result_t r = sim(alg, p, counts[c], (p + c) % 2, 0);
        const double f = alg->cost(p, counts[c] * 4, 4, 0, &model, NULL);
        const int exact = v == 1 || (p & (p - 1)) == 0;
        EXPECT(exact ? fabs(r.time_s - f) <= 1e-9 * f
                     : r.time_s >= f * (1 - 1e-9) && r.time_s <= 1.45 * f,
               "%s p=%d count=%zu: sim %.12g s, closed form %.12g s", alg->name, p, counts[c],
               r.time_s, f);
      }
    }
  }
  /* Bytes per rank at powers of two: the allreduce lower bound, and L full vectors. */
  for (int p = 2, L = 1; p <= 1024; p *= 2, L++) {
    const size_t count = (size_t)p * 8, n = count * 4;
    mpiar__sim_result_t r = sim(bw, p, count, 0, 0);
    const size_t opt = 2 * (size_t)(p - 1) * (n / (size_t)p);
    EXPECT(r.bytes_sent_max == opt && r.bytes_sent_total == (size_t)p * opt,
           "swing p=%d sends %zu max, %zu total; optimum %zu per rank", p, r.bytes_sent_max,
           r.bytes_sent_total, opt);
    r = sim(lat, p, count, 1, 0);
    EXPECT(r.bytes_sent_max == (size_t)L * n && r.messages_max == (size_t)L,
           "swing_latency p=%d sends %zu bytes in %zu messages; want %zu in %d", p,
           r.bytes_sent_max, r.messages_max, (size_t)L * n, L);
  }
  /* Data at a few shapes beyond the matrix (the matrix runs 1..128, 1000, 1024). */
  const int ps[] = {192, 256, 384};
  for (int i = 0; i < 3; i++) {
    sim(bw, ps[i], (size_t)ps[i] * 3 + 7, i % 2, 1);
    sim(lat, ps[i], 257, (i + 1) % 2, 1);
  }
  printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
