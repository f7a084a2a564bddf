/*
 * The two-level cost model against the simulator: the closed forms in the hierarchical builders'
 * headers (computed here from the formulas, independently of the cost functions) and the cost
 * functions both equal the simulated time on regular topologies, whatever the placement and in
 * the port-bound and reduction-bound regimes; the flat algorithms' one-level formulas hold on
 * topologies that keep every message on one level; a hierarchical builder on a flat topology is
 * its flat equivalent, step for step; and the traffic on the node links: every bandwidth-optimal
 * hierarchical builder moves exactly 2(N-1)/N n per node each way, for any placement and any
 * node sizes, while the flat ring moves 2(p-1)/p n per node with block placement and k times
 * that with round-robin placement.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "sim_test.h"

/*
 * Regimes: inter-node slower than intra (port-bound), fast inter-node with slow reductions
 * (reduction-bound), and latency-heavy.
 */
static const mpiar__cost_params_t regimes[] = {
    {1e-6, 1.0 / 9.4e9, 1.0 / 16e9, 5e-6, 8e-10, 0, 0},
    {1e-6, 1e-10, 1e-9, 1e-7, 1e-11, 0, 0},
    {2e-6, 1e-10, 5e-11, 2e-5, 8e-11, 0, 0},
};
#define NREGIMES (int)(sizeof regimes / sizeof regimes[0])

static uint64_t rng = 0x853C49E6748FEA9Bull;


static int regular(mpiar__topology_t *t, int nnodes, int k, int placement) {
  int sizes[64];
  for (int i = 0; i < nnodes; i++) {
    sizes[i] = k;
  }
  return make_topology(t, nnodes, sizes, placement, &rng);
}

static mpiar__sim_result_t sim(const mpiar__algorithm_t *alg, const mpiar__topology_t *t, int p,
                               size_t count, const mpiar__cost_params_t *c) {
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.topology = t;
  cfg.count = count;
  cfg.cost = *c;
  cfg.data = 0;
  cfg.check_hazards = 0;
  mpiar__sim_result_t res;
  int rc = mpiar__sim_run(&cfg, &res);
  EXPECT(rc == MPIAR_SUCCESS && res.ok, "%s p=%d count=%zu: %s", alg->name, p, count,
         rc ? mpiar_last_error() : res.error);
  return res;
}

static int close_to(double a, double b) {
  return fabs(a - b) <= 1e-9 * fabs(b);
}

/* The headers' formulas, n bytes, N nodes of k ranks (B = n/k, b = n/(kN)). */
static double intra(double n, int k, const mpiar__cost_params_t *c) {
  const double B = n / k;
  return (k - 1) * (c->alpha + B * (c->beta + c->gamma)) + (k - 1) * (c->alpha + B * c->beta);
}

static double formula_hier_ring(double n, int N, int k, const mpiar__cost_params_t *c) {
  const double b = n / k / N, T = c->alpha_inter + b * c->beta_inter;
  const double step = k * T > T + b * c->gamma ? k * T : T + b * c->gamma;
  return intra(n, k, c) + (N - 1) * step + (N - 1) * k * T;
}

/* Port-bound regime only (the header's condition is checked by the caller). */
static double formula_hier_rabenseifner(double n, int N, int k, const mpiar__cost_params_t *c) {
  const double L = log2(N);
  return intra(n, k, c) + 2 * L * k * c->alpha_inter + 2.0 * (N - 1) / N * n * c->beta_inter;
}

static int rabenseifner_port_bound(double n, int N, int k, const mpiar__cost_params_t *c) {
  const double B = n / k;
  int ok = 1;
  for (double b = B / 2; b >= B / N; b /= 2) {
    const double next = b > B / N ? b / 2 : b;
    ok &= b * c->gamma <= (k - 1) * (c->alpha_inter + next * c->beta_inter);
  }
  return ok;
}

static double formula_hier_rd(double n, int N, int k, const mpiar__cost_params_t *c) {
  const double d = log2(k), L = log2(N);
  return d * (c->alpha + n * (c->beta + c->gamma)) +
         L * (c->alpha_inter + n * (c->beta_inter + c->gamma)) + d * (c->alpha + n * c->beta);
}

static void closed_forms(void) {
  const mpiar__algorithm_t *hr = mpiar__algorithm_find("hier_ring");
  const mpiar__algorithm_t *hb = mpiar__algorithm_find("hier_rabenseifner");
  const mpiar__algorithm_t *hd = mpiar__algorithm_find("hier_recursive_doubling");
  const int nodes[] = {2, 3, 4, 5, 8, 16};
  int rot = 0;
  for (size_t ni = 0; ni < sizeof nodes / sizeof nodes[0]; ni++) {
    for (int k = 2; k <= 8; k++, rot++) {
      const int N = nodes[ni], pl = rot % 3;
      const int pow2 = (N & (N - 1)) == 0, kpow2 = (k & (k - 1)) == 0;
      mpiar__topology_t t;
      if (regular(&t, N, k, pl) != MPIAR_SUCCESS) {
        failures++;
        continue;
      }
      const size_t count = (size_t)k * (size_t)N * 64 * (1 + (size_t)(rot % 4) * 31);
      const double n = (double)count * 4;
      for (int g = 0; g < NREGIMES; g++) {
        const mpiar__cost_params_t *c = &regimes[g];
        mpiar__sim_result_t r = sim(hr, &t, t.nranks, count, c);
        const double f = formula_hier_ring(n, N, k, c);
        const double m = hr->cost(t.nranks, count * 4, 4, 0, c, &t);
        EXPECT(close_to(r.time_s, f) && close_to(m, f),
               "hier_ring %d x %d placement %d regime %d: sim %.12g, formula %.12g, cost %.12g", N,
               k, pl, g, r.time_s, f, m);
        if (pow2) {
          r = sim(hb, &t, t.nranks, count, c);
          const double mb = hb->cost(t.nranks, count * 4, 4, 0, c, &t);
          EXPECT(close_to(r.time_s, mb),
                 "hier_rabenseifner %d x %d regime %d: sim %.12g, cost %.12g", N, k, g, r.time_s,
                 mb);
          if (rabenseifner_port_bound(n, N, k, c)) {
            const double fb = formula_hier_rabenseifner(n, N, k, c);
            EXPECT(close_to(r.time_s, fb),
                   "hier_rabenseifner %d x %d regime %d: sim %.12g, "
                   "port-bound formula %.12g",
                   N, k, g, r.time_s, fb);
          }
        }
        if (pow2 && kpow2) {
          r = sim(hd, &t, t.nranks, count / 16, c);
          const double fd = formula_hier_rd(n / 16, N, k, c);
          const double md = hd->cost(t.nranks, count / 16 * 4, 4, 0, c, &t);
          EXPECT(close_to(r.time_s, fd) && close_to(md, fd),
                 "hier_recursive_doubling %d x %d regime %d: sim %.12g, formula %.12g, cost %.12g",
                 N, k, g, r.time_s, fd, md);
        }
      }
      mpiar__topology_destroy(&t);
    }
  }
}

/* The header's claim for non-power-of-two node counts: an estimate within 25 %. */
static void rabenseifner_estimate(void) {
  const mpiar__algorithm_t *hb = mpiar__algorithm_find("hier_rabenseifner");
  const int nodes[] = {3, 5, 6, 7, 9, 12};
  for (size_t ni = 0; ni < sizeof nodes / sizeof nodes[0]; ni++) {
    for (int k = 2; k <= 5; k++) {
      mpiar__topology_t t;
      if (regular(&t, nodes[ni], k, (int)ni % 3) != MPIAR_SUCCESS) {
        failures++;
        continue;
      }
      const size_t count = (size_t)k * (size_t)nodes[ni] * 256;
      for (int g = 0; g < NREGIMES; g++) {
        mpiar__sim_result_t r = sim(hb, &t, t.nranks, count, &regimes[g]);
        const double m = hb->cost(t.nranks, count * 4, 4, 0, &regimes[g], &t);
        EXPECT(fabs(r.time_s - m) <= 0.25 * r.time_s,
               "hier_rabenseifner %d x %d regime %d: sim %.9g, estimate %.9g", nodes[ni], k, g,
               r.time_s, m);
      }
      mpiar__topology_destroy(&t);
    }
  }
}

/*
 * The flat algorithms on real two-level topologies: a step-synchronous estimate (each round
 * costs the slower of a rank's port and the busiest node port), held to 50 % of the simulated
 * time; the file headers say how close it is.
 */
static void flat_estimates(void) {
  const int shapes[][2] = {{2, 2}, {4, 4}, {8, 4}, {3, 5}, {16, 2}, {4, 8}};
  double worst = 0.0;
  for (int a = 0; a < mpiar__algorithm_count; a++) {
    const mpiar__algorithm_t *alg = &mpiar__algorithms[a];
    if (alg->flags & MPIAR__ALG_HIERARCHICAL) {
      continue;
    }
    if (alg->build == mpiar__build_double_binary_tree ||
        alg->build == mpiar__build_double_binary_tree_colour) {
      continue; /* its two-level estimate: test_sim_two_level.c */
    }
    if (alg->param.name != NULL) {
      continue; /* radix and tree algorithms: their two-level estimates in test_sim_two_level.c */
    }
    for (int i = 0; i < 6; i++) {
      for (int pl = 0; pl < 3; pl++) {
        mpiar__topology_t t;
        if (regular(&t, shapes[i][0], shapes[i][1], pl) != MPIAR_SUCCESS) {
          failures++;
          continue;
        }
        for (int g = 0; g < NREGIMES; g++) {
          const size_t count = (size_t)t.nranks * (g == 1 ? 64 : 4096);
          mpiar__sim_result_t r = sim(alg, &t, t.nranks, count, &regimes[g]);
          const double m = alg->cost(t.nranks, count * 4, 4, 0, &regimes[g], &t);
          const double err = fabs(m - r.time_s) / r.time_s;
          worst = err > worst ? err : worst;
          EXPECT(err <= 0.5, "%s on %d x %d placement %d regime %d: sim %.9g s, estimate %.9g s",
                 alg->name, shapes[i][0], shapes[i][1], pl, g, r.time_s, m);
        }
        mpiar__topology_destroy(&t);
      }
    }
  }
  printf("flat algorithms on two levels: estimate within %.0f %% of the simulator\n", 100 * worst);
}

/* One node: the one-level model with intra parameters; one rank per node: with inter ones. */
static void one_level(void) {
  for (int a = 0; a < mpiar__algorithm_count; a++) {
    const mpiar__algorithm_t *alg = &mpiar__algorithms[a];
    if (alg->build == mpiar__build_double_binary_tree ||
        alg->build == mpiar__build_double_binary_tree_colour) {
      continue; /* exact at p = 2 only (test_sim_catalogue.c) */
    }
    if (alg->param.name != NULL) {
      continue; /* exact at p = k^L (test_sim_cost.c, check_parameterised) */
    }
    for (int p = 2; p <= 32; p *= 2) {
      for (int shape = 0; shape < 2; shape++) {
        mpiar__topology_t t;
        if (regular(&t, shape ? p : 1, shape ? 1 : p, shape) != MPIAR_SUCCESS) {
          failures++;
          continue;
        }
        const mpiar__cost_params_t *c = &regimes[(p + shape) % NREGIMES];
        mpiar__cost_params_t level = *c;
        if (shape) {
          level.alpha = c->alpha_inter;
          level.beta = c->beta_inter;
        }
        const size_t count = (size_t)p * 512;
        mpiar__sim_result_t r = sim(alg, &t, p, count, c);
        const double flat = alg->cost(p, count * 4, 4, 0, &level, NULL);
        const double m = alg->cost(p, count * 4, 4, 0, c, &t);
        EXPECT(close_to(r.time_s, flat) && close_to(m, flat),
               "%s p=%d %s: sim %.12g, one-level formula %.12g, cost %.12g", alg->name, p,
               shape ? "one rank per node" : "one node", r.time_s, flat, m);
        mpiar__topology_destroy(&t);
      }
    }
  }
}

static int same_operand(mpiar__operand_t x, mpiar__operand_t y) {
  return x.buf == y.buf && x.off == y.off;
}

/* Two schedules are the same steps (kind, peer, tag, count, operands, dependencies). */
static int same_steps(const mpiar__schedule_t *a, const mpiar__schedule_t *b) {
  if (a->nsteps != b->nsteps || a->ndeps != b->ndeps || a->scratch_elems != b->scratch_elems) {
    return 0;
  }
  for (size_t i = 0; i < a->nsteps; i++) {
    const mpiar__step_t *x = &a->steps[i], *y = &b->steps[i];
    if (x->kind != y->kind || x->peer != y->peer || x->tag != y->tag || x->count != y->count ||
        x->final != y->final || x->ndeps != y->ndeps || x->dep_first != y->dep_first ||
        !same_operand(x->dst, y->dst) || !same_operand(x->a, y->a) || !same_operand(x->b, y->b)) {
      return 0;
    }
  }
  return a->ndeps == 0 || memcmp(a->deps, b->deps, a->ndeps * sizeof *a->deps) == 0;
}

/* On a flat topology each hierarchical builder builds its flat equivalent, step for step. */
static void flat_fallback(void) {
  const char *pairs[][2] = {{"hier_ring", "ring"},
                            {"hier_rabenseifner", "rabenseifner"},
                            {"hier_recursive_doubling", "recursive_doubling"}};
  for (int i = 0; i < 3; i++) {
    const mpiar__algorithm_t *h = mpiar__algorithm_find(pairs[i][0]);
    const mpiar__algorithm_t *f = mpiar__algorithm_find(pairs[i][1]);
    EXPECT(h != NULL && f != NULL && (h->flags & MPIAR__ALG_HIERARCHICAL) &&
               !(f->flags & MPIAR__ALG_HIERARCHICAL),
           "%s is registered as hierarchical", pairs[i][0]);
    for (int p = 1; p <= 9; p++) {
      for (int shape = 0; shape < 3; shape++) {
        mpiar__topology_t t;
        memset(&t, 0, sizeof t);
        if (shape > 0 && regular(&t, shape == 1 ? 1 : p, shape == 1 ? p : 1, 0) != MPIAR_SUCCESS) {
          failures++;
          continue;
        }
        for (int r = 0; r < p; r++) {
          mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
          cfg.nranks = p;
          cfg.count = (size_t)3 * p + 1;
          cfg.in_place = r % 2;
          cfg.segment_elems = (size_t)(r % 3); /* the flat ring is segmented alike */
          cfg.topology = shape > 0 ? &t : NULL;
          mpiar__schedule_t a, b;
          cfg.algorithm = h;
          int rc = mpiar__sim_build(&cfg, r, &a);
          cfg.algorithm = f;
          rc |= mpiar__sim_build(&cfg, r, &b);
          EXPECT(rc == MPIAR_SUCCESS && same_steps(&a, &b), "%s p=%d shape %d rank %d", pairs[i][0],
                 p, shape, r);
          if (rc == MPIAR_SUCCESS) {
            mpiar__schedule_destroy(&a);
            mpiar__schedule_destroy(&b);
          }
        }
        mpiar__topology_destroy(&t);
        const mpiar__cost_params_t *c = &regimes[p % NREGIMES];
        EXPECT(h->cost(p, 4096, 4, 0, c, NULL) == f->cost(p, 4096, 4, 0, c, NULL),
               "%s cost without a topology", pairs[i][0]);
      }
    }
  }
}

/* Node-link traffic of one run: every node sends and receives exactly @p want bytes. */
static void expect_node_bytes(const char *what, const mpiar__sim_result_t *r, int nnodes,
                              size_t want) {
  EXPECT(r->node_bytes_sent_max == want && r->node_bytes_received_max == want &&
             r->inter_bytes_total == (size_t)nnodes * want,
         "%s: node links carry %zu sent / %zu received max, %zu in all; expected %zu per node",
         what, r->node_bytes_sent_max, r->node_bytes_received_max, r->inter_bytes_total, want);
}

static void node_traffic(void) {
  const mpiar__algorithm_t *hr = mpiar__algorithm_find("hier_ring");
  const mpiar__algorithm_t *hb = mpiar__algorithm_find("hier_rabenseifner");
  const mpiar__algorithm_t *hd = mpiar__algorithm_find("hier_recursive_doubling");
  const mpiar__algorithm_t *ring = mpiar__algorithm_find("ring");
  const mpiar__cost_params_t *c = &regimes[0];
  char what[128];
  int rot = 0;
  for (int N = 2; N <= 64; N = N < 16 ? N + 1 : 2 * N) {
    for (int k = 1; k <= 8; k++, rot++) {
      const int pl = rot % 3, pow2 = (N & (N - 1)) == 0;
      if (N > 16 && k % 3 != 2) {
        continue; /* 32 and 64 nodes: 2, 5 and 8 ranks per node */
      }
      mpiar__topology_t t;
      if (regular(&t, N, k, pl) != MPIAR_SUCCESS) {
        failures++;
        continue;
      }
      const size_t count = (size_t)k * (size_t)N * 16, n = count * 4;
      const size_t bound = 2 * (size_t)(N - 1) * (n / (size_t)N);
      snprintf(what, sizeof what, "hier_ring %d x %d placement %d", N, k, pl);
      mpiar__sim_result_t r = sim(hr, &t, t.nranks, count, c);
      expect_node_bytes(what, &r, N, bound);
      if (pow2) {
        snprintf(what, sizeof what, "hier_rabenseifner %d x %d placement %d", N, k, pl);
        r = sim(hb, &t, t.nranks, count, c);
        expect_node_bytes(what, &r, N, bound);
        snprintf(what, sizeof what, "hier_recursive_doubling %d x %d placement %d", N, k, pl);
        r = sim(hd, &t, t.nranks, count, c);
        expect_node_bytes(what, &r, N, (size_t)log2(N) * n);
      }
      mpiar__topology_destroy(&t);
      /*
       * The flat ring (up to 8 nodes, its cost grows as p squared): one boundary crossing per
       * node and step with block placement, k with round-robin.
       */
      const int p = N * k;
      const size_t flat = 2 * (size_t)(p - 1) * (n / (size_t)p);
      for (int place = 0; place < 2 && k > 1 && N <= 8; place++) {
        if (regular(&t, N, k, place) != MPIAR_SUCCESS) {
          failures++;
          continue;
        }
        snprintf(what, sizeof what, "ring %d x %d placement %d", N, k, place);
        r = sim(ring, &t, p, count, c);
        expect_node_bytes(what, &r, N, place == 0 ? flat : flat * (size_t)k);
        mpiar__topology_destroy(&t);
      }
    }
  }
}

/* Uneven nodes, every placement: the pieces keep the bound (count divisible by 840 N). */
static void node_traffic_uneven(void) {
  const mpiar__algorithm_t *hr = mpiar__algorithm_find("hier_ring");
  const mpiar__algorithm_t *hb = mpiar__algorithm_find("hier_rabenseifner");
  const mpiar__cost_params_t *c = &regimes[0];
  char what[128];
  const int mixes[][5] = {{1, 2}, {3, 4}, {4, 3, 2}, {1, 8, 1}, {5, 3, 7, 2}, {8, 1, 1, 8, 6}};
  const int nmix[] = {2, 2, 3, 3, 4, 5};
  for (int i = 0; i < 6; i++) {
    const int N = nmix[i];
    const size_t count = 840 * (size_t)N, n = count * 4;
    const size_t bound = 2 * (size_t)(N - 1) * (n / (size_t)N);
    for (int pl = 0; pl < 3; pl++) {
      mpiar__topology_t t;
      if (make_topology(&t, N, mixes[i], pl, &rng) != MPIAR_SUCCESS) {
        failures++;
        continue;
      }
      snprintf(what, sizeof what, "hier_ring uneven mix %d placement %d", i, pl);
      mpiar__sim_result_t r = sim(hr, &t, t.nranks, count, c);
      expect_node_bytes(what, &r, N, bound);
      if ((N & (N - 1)) == 0) {
        snprintf(what, sizeof what, "hier_rabenseifner uneven mix %d placement %d", i, pl);
        r = sim(hb, &t, t.nranks, count, c);
        expect_node_bytes(what, &r, N, bound);
      }
      mpiar__topology_destroy(&t);
    }
  }
}

/*
 * Segments pipeline the chunks: with slow node links the node port stays busy while the ranks'
 * ports run the next chunk's intra-node phases, so segmenting pays; the estimate for several
 * chunks stays within 30 % of the simulator.
 */
static void pipelined(void) {
  const mpiar__cost_params_t links[] = {{1e-6, 1.0 / 9.4e9, 1.0 / 16e9, 5e-6, 8e-10, 0, 0},
                                        {1e-6, 1.0 / 9.4e9, 1.0 / 16e9, 5e-6, 3.2e-10, 0, 0},
                                        {1e-6, 1.0 / 9.4e9, 1.0 / 16e9, 5e-6, 8e-11, 0, 0}};
  const char *names[] = {"hier_ring", "hier_rabenseifner"};
  mpiar__topology_t t;
  if (regular(&t, 8, 4, 1) != MPIAR_SUCCESS) {
    failures++;
    return;
  }
  const size_t count = (size_t)1 << 22; /* 16 MiB of float32 */
  for (int a = 0; a < 2; a++) {
    const mpiar__algorithm_t *alg = mpiar__algorithm_find(names[a]);
    EXPECT(alg->flags & MPIAR__ALG_SEGMENTED, "%s takes a segment size", alg->name);
    for (int l = 0; l < 3; l++) {
      mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
      cfg.algorithm = alg;
      cfg.nranks = t.nranks;
      cfg.topology = &t;
      cfg.count = count;
      cfg.cost = links[l];
      cfg.data = 0;
      cfg.check_hazards = 0;
      mpiar__sim_result_t whole, piped;
      int rc = mpiar__sim_run(&cfg, &whole);
      cfg.segment_elems = 16384; /* 64 KiB inter-node messages: 8 chunks */
      rc |= mpiar__sim_run(&cfg, &piped);
      const double m = alg->cost(t.nranks, count * 4, 4, 65536, &links[l], &t);
      /* At 10 and 25 Gb/s; at 100 Gb/s the node port is no longer the bottleneck. */
      EXPECT(rc == MPIAR_SUCCESS && whole.ok && piped.ok && (l == 2 || piped.time_s < whole.time_s),
             "%s link %d: 8 chunks %.9g s, one %.9g s", alg->name, l, piped.time_s, whole.time_s);
      EXPECT(fabs(m - piped.time_s) <= 0.3 * piped.time_s,
             "%s link %d: sim %.9g s, estimate %.9g s", alg->name, l, piped.time_s, m);
    }
  }
  mpiar__topology_destroy(&t);
}

/* What the model says the two levels buy, on 8 nodes x 4 ranks at 25 Gb/s between nodes. */
static void winners(void) {
  const mpiar__cost_params_t c = {1e-6, 1.0 / 9.4e9, 1.0 / 16e9, 5e-6, 1.0 / 3.125e9, 0, 0};
  mpiar__topology_t block, rr;
  if (regular(&block, 8, 4, 0) != MPIAR_SUCCESS || regular(&rr, 8, 4, 1) != MPIAR_SUCCESS) {
    failures++;
    return;
  }
  const mpiar__algorithm_t *rd = mpiar__algorithm_find("recursive_doubling");
  const mpiar__algorithm_t *hd = mpiar__algorithm_find("hier_recursive_doubling");
  const mpiar__algorithm_t *rab = mpiar__algorithm_find("rabenseifner");
  const mpiar__algorithm_t *hb = mpiar__algorithm_find("hier_rabenseifner");
  const mpiar__algorithm_t *ring = mpiar__algorithm_find("ring");
  const mpiar__algorithm_t *hr = mpiar__algorithm_find("hier_ring");
  /* Small messages: 3 leader exchanges instead of 5 exchanges through a shared port. */
  double a = sim(rd, &block, 32, 256, &c).time_s, b = sim(hd, &block, 32, 256, &c).time_s;
  EXPECT(b < a, "1 KiB: hier_recursive_doubling %.9g s, recursive_doubling %.9g s", b, a);
  /* Medium: Rabenseifner's wide first steps cross nodes from every rank. */
  a = sim(rab, &block, 32, 1 << 16, &c).time_s;
  b = sim(hb, &block, 32, 1 << 16, &c).time_s;
  EXPECT(b < a, "256 KiB: hier_rabenseifner %.9g s, rabenseifner %.9g s", b, a);
  /* Large, round-robin: every ring neighbour is on another node. */
  a = sim(ring, &rr, 32, 1 << 22, &c).time_s;
  b = sim(hr, &rr, 32, 1 << 22, &c).time_s;
  EXPECT(b < a / 2, "16 MiB round-robin: hier_ring %.9g s, ring %.9g s", b, a);
  mpiar__topology_destroy(&block);
  mpiar__topology_destroy(&rr);
}

int main(void) {
  closed_forms();
  rabenseifner_estimate();
  one_level();
  flat_estimates();
  flat_fallback();
  node_traffic();
  node_traffic_uneven();
  pipelined();
  winners();
  printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
