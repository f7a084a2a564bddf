/*
 * Multi-dimensional Swing (src/algorithms/swing_md.c): every message stays in one dimension of
 * the grid and crosses |rho(j)| links there (the routed torus counts the hops), the 2 d
 * collectives of swing_md use every outgoing link of a node in each step (the busiest link of a
 * torus carries the same bytes as every other), the results are bitwise identical on every rank
 * and equal to the reference over grids up to 1024 ranks (2x2, 4x4, 8x8, 4x4x4, 8x4, 2x2x2,
 * 4x4x4x4, 8x8x8, 32x32), in place and not, and the one-level times equal the header's closed forms
 * at powers of two (gamma <= beta for swing_md). Argument "quick" (sanitizer builds) runs the data
 * matrix on fewer grids.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"
#include "sim_test.h"

static const mpiar__cost_params_t model = {2e-6, 1e-10, 5e-11, 2e-6, 1e-10, 0, 0};

static mpiar__sim_result_t run(const char *name, int p, size_t count, int in_place, int data,
                               mpiar_dtype_t dt, mpiar_op_t op, const mpiar__network_t *net) {
  return sim_test_run(name, p, count, in_place, data, dt, op, &model, net);
}

/* A torus of the grid swing_md/d=D uses for p (dimension 0 first, the larger first). */
static void torus_of(int p, int d, mpiar__network_t *net) {
  char spec[64], err[128];
  int used = snprintf(spec, sizeof spec, "torus:");
  int L = 0;
  while ((1 << (L + 1)) <= p) {
    L++;
  }
  for (int k = 0; k < d; k++) {
    used += snprintf(spec + used, sizeof spec - (size_t)used, "%s%d", k ? "x" : "",
                     1 << (L / d + (k < L % d ? 1 : 0)));
  }
  CHECK(mpiar__network_parse(spec, net, err, sizeof err) == 0, "%s: %s", spec, err);
}

/*
 * On the torus of its own grid every message of swing_md stays in one ring: per rank the hops of
 * a collective's steps are |rho(j)| summed over the dimensions' steps, the same for each of the
 * 2 d collectives, and both ways of every link carry the same bytes (all ports busy).
 */
static void check_hops(int p, int d) {
  char name[32];
  snprintf(name, sizeof name, "swing_md/d=%d", d);
  mpiar__network_t net;
  torus_of(p, d, &net);
  const int nodes = mpiar__network_nodes(&net);
  const size_t count = (size_t)nodes * 2 * (size_t)d * 64;
  mpiar__sim_result_t r = run(name, nodes, count, 0, 0, MPIAR_FLOAT32, MPIAR_SUM, &net);
  /* The hops of one collective: per dimension of 2^e nodes, sum_{j<e} |rho(j)|, both phases. */
  static const int rho_abs[] = {1, 1, 3, 5, 11, 21, 43, 85, 171, 341};
  size_t hops = 0;
  for (int k = 0; k < net.ndims; k++) {
    for (int j = 0; (2 << j) <= net.dims[k]; j++) {
      hops += (size_t)rho_abs[j];
    }
  }
  const size_t want = 2 * hops * 2 * (size_t)d * (size_t)nodes;
  CHECK(r.hops_total == want, "%s on %d nodes: %zu hops, want %zu (every step in one ring)", name,
        nodes, r.hops_total, want);
  const double mean = r.link_bytes_total / r.links;
  CHECK(fabs(r.link_bytes_max - mean) <= 1e-9 * mean,
        "%s on %d nodes: busiest link %g B, mean %g B: every link should carry the same", name,
        nodes, r.link_bytes_max, mean);
}

int main(int argc, char **argv) {
  const int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  /* Data: grids up to 1024 ranks, bitwise identical results checked against the reference. */
  static const struct {
    int p, d;
  } grids[] = {{4, 2}, {16, 2}, {64, 2}, {64, 3}, {256, 4}, {32, 2}, {512, 3}, {8, 3}, {1024, 2}};
  const pair_t pairs[] = {
      {MPIAR_FLOAT32, MPIAR_SUM}, {MPIAR_FLOAT64, MPIAR_PROD}, {MPIAR_INT32, MPIAR_MAX}};
  for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
    if (quick && g % 3 != 0) {
      continue;
    }
    const int p = grids[g].p, d = grids[g].d;
    char bw[32], lat[32];
    snprintf(bw, sizeof bw, "swing_md/d=%d", d);
    snprintf(lat, sizeof lat, "swing_md_latency/d=%d", d);
    const size_t counts[] = {1, (size_t)p * 2 * (size_t)d, prime_above((size_t)p * 3)};
    for (size_t c = p >= 256 ? 2 : 0; c < 3; c++) {
      const pair_t pr = pairs[(g + c) % 3];
      run(bw, p, counts[c], (int)(c % 2), 1, pr.dtype, pr.op, NULL);
      run(lat, p, counts[c], (int)((c + 1) % 2), 1, pr.dtype, pr.op, NULL);
    }
  }
  /* Non-powers of two: the fold, over a grid of p'. */
  for (int p = 3; p <= (quick ? 12 : 40); p += 3) {
    run("swing_md", p, (size_t)p * 5 + 1, p % 2, 1, MPIAR_FLOAT32, MPIAR_SUM, NULL);
    run("swing_md_latency/d=3", p, (size_t)p + 2, (p + 1) % 2, 1, MPIAR_FLOAT32, MPIAR_SUM, NULL);
  }

  /* Routes on the grid's own torus. */
  check_hops(64, 2);
  check_hops(64, 3);
  check_hops(16, 1);
  check_hops(256, 4);

  /* One level, powers of two: the header's forms. */
  for (int p = 2; p <= 512; p *= 4) {
    for (int d = 1; d <= 4; d++) {
      for (int big = 0; big < 2; big++) {
        const size_t count = (size_t)p * 2 * (size_t)d * (big ? 4096 : 4);
        const size_t n = count * 4;
        char bw[32], lat[32];
        snprintf(bw, sizeof bw, "swing_md/d=%d", d);
        snprintf(lat, sizeof lat, "swing_md_latency/d=%d", d);
        const mpiar__algorithm_t *a = mpiar__algorithm_find_any(bw);
        mpiar__sim_result_t r = run(bw, p, count, 0, 0, MPIAR_FLOAT32, MPIAR_SUM, NULL);
        const double m = a->cost(p, n, 4, 0, &model, NULL);
        double L = 0;
        while ((1 << (int)L) < p) {
          L++;
        }
        CHECK(fabs(r.time_s - m) <= 1e-9 * m, "%s p=%d n=%zu: sim %.9g s, closed form %.9g s", bw,
              p, n, r.time_s, m);
        CHECK(r.bytes_sent_max == 2 * (size_t)(p - 1) * (n / (size_t)p),
              "%s p=%d: %zu bytes sent, want 2 (p-1)/p n", bw, p, r.bytes_sent_max);
        CHECK(r.messages_max == (size_t)(2 * L * 2 * d), "%s p=%d: %zu messages", bw, p,
              r.messages_max);
        if (d >= 2) {
          const mpiar__algorithm_t *b = mpiar__algorithm_find_any(lat);
          mpiar__sim_result_t q = run(lat, p, count, 0, 0, MPIAR_FLOAT32, MPIAR_SUM, NULL);
          const double m = b->cost(p, n, 4, 0, &model, NULL);
          CHECK(fabs(q.time_s - m) <= 1e-9 * m, "%s p=%d n=%zu: sim %.9g s, closed form %.9g s",
                lat, p, n, q.time_s, m);
        }
      }
    }
  }
  /* A vector of one element: one part, swing's schedule; its formula (p | count) within 1 %. */
  for (int p = 2; p <= 64; p *= 2) {
    const mpiar__algorithm_t *a = mpiar__algorithm_find_any("swing_md/d=3");
    mpiar__sim_result_t r = run("swing_md/d=3", p, 1, 0, 0, MPIAR_FLOAT32, MPIAR_SUM, NULL);
    const double m = a->cost(p, 4, 4, 0, &model, NULL);
    CHECK(fabs(r.time_s - m) <= 0.01 * m, "swing_md/d=3 p=%d, one element: sim %.9g s, cost %.9g s",
          p, r.time_s, m);
  }
  const mpiar__algorithm_t *md = mpiar__algorithm_find("swing_md");
  CHECK(md != NULL && (md->flags & MPIAR__ALG_MANUAL), "swing_md: named only");
  printf("swing_md: %d failures\n", failures);
  return failures != 0;
}
