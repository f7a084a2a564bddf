/*
 * The two-level estimates of the catalogue's radix-k entries (recursive_multiplying,
 * radix_rabenseifner), trees (knomial_tree, kary_tree) and double binary trees: their cost on
 * N nodes of K ranks (ranks placed by block) against the simulator, in the three regimes of
 * test_sim_hier_cost.c and three sizes (latency-bound, a few elements per rank, 4 MiB). The
 * tolerance is each file header's: |estimate - simulated| within 50 % of the simulated time
 * (the flat algorithms' on two levels in test_sim_hier_cost.c), 25 % for the unsegmented trees.
 * The defaults of the radix-k entries run the whole grid, N = 2..16 and K = 1..16; the others
 * N in {2, 5, 8, 11, 14} and K in {1, 2, 3, 4, 8, 12, 16}. "quick" (sanitizer builds): N in
 * {2, 16}, K in {3, 16}, the defaults of the radix-k entries, knomial_tree and
 * double_binary_tree/colour.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"
#include "sim_test.h"

static const mpiar__cost_params_t regimes[] = {
    {1e-6, 1.0 / 9.4e9, 1.0 / 16e9, 5e-6, 8e-10, 0, 0},
    {1e-6, 1e-10, 1e-9, 1e-7, 1e-11, 0, 0},
    {2e-6, 1e-10, 5e-11, 2e-5, 8e-11, 0, 0},
};
#define NREGIMES (int)(sizeof regimes / sizeof regimes[0])

/* One entry, its segment in elements (0: none) and its tolerance. */
typedef struct entry {
  const char *name;
  size_t seg;
  double tol;
  int full; /* the whole grid */
} entry_t;

/* The worst |estimate - simulated| / simulated of one entry on one topology. */
static double worst_error(const mpiar__algorithm_t *alg, const entry_t *x,
                          const mpiar__topology_t *t) {
  double worst = 0.0;
  for (int g = 0; g < NREGIMES; g++) {
    const size_t counts[] = {2, (size_t)t->nranks * 64, (size_t)1 << 20};
    for (int c = 0; c < 3; c++) {
      mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
      cfg.algorithm = alg;
      cfg.nranks = t->nranks;
      cfg.topology = t;
      cfg.count = counts[c];
      cfg.cost = regimes[g];
      cfg.segment_elems = x->seg;
      cfg.data = 0;
      cfg.check_hazards = 0;
      mpiar__sim_result_t r;
      const int rc = mpiar__sim_run(&cfg, &r);
      EXPECT(rc == MPIAR_SUCCESS && r.ok, "%s on %d x %d: %s", alg->name, t->nnodes,
             t->max_node_size, rc ? mpiar_last_error() : r.error);
      if (rc != MPIAR_SUCCESS || !r.ok) {
        continue;
      }
      const double m = alg->cost(t->nranks, counts[c] * 4, 4, x->seg * 4, &regimes[g], t);
      const double err = fabs(m - r.time_s) / r.time_s;
      EXPECT(err <= x->tol,
             "%s seg=%zu on %d x %d, regime %d, %zu elements: sim %.9g s, estimate %.9g s",
             alg->name, x->seg, t->nnodes, t->max_node_size, g, counts[c], r.time_s, m);
      worst = err > worst ? err : worst;
    }
  }
  return worst;
}

int main(int argc, char **argv) {
  const int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  static const entry_t entries[] = {
      {"recursive_multiplying", 0, 0.5, 1},
      {"radix_rabenseifner", 0, 0.5, 1},
      {"knomial_tree", 0, 0.25, 0},
      {"double_binary_tree/colour", 16384, 0.5, 0},
      {"double_binary_tree", 0, 0.5, 0},
      {"double_binary_tree", 16384, 0.5, 0},
      {"recursive_multiplying/k=2", 0, 0.5, 0},
      {"radix_rabenseifner/k=2", 0, 0.5, 0},
      {"recursive_multiplying/k=8", 0, 0.5, 0},
      {"radix_rabenseifner/k=8", 0, 0.5, 0},
      {"kary_tree", 0, 0.25, 0},
      {"knomial_tree/k=2", 0, 0.25, 0},
      {"kary_tree/k=4", 0, 0.25, 0},
  };
  const int nent = quick ? 4 : (int)(sizeof entries / sizeof entries[0]);
  for (int a = 0; a < nent; a++) {
    const entry_t *x = &entries[a];
    const mpiar__algorithm_t *alg = mpiar__algorithm_find(x->name);
    if (alg == NULL) {
      fprintf(stderr, "FAIL: %s is not in the registry\n", x->name);
      return 1;
    }
    /* Node counts and ranks per node: the whole grid, a sparse one, or the quick one. */
    static const int all[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    static const int sparse_n[] = {2, 5, 8, 11, 14}, sparse_k[] = {1, 2, 3, 4, 8, 12, 16};
    static const int quick_n[] = {2, 16}, quick_k[] = {3, 16};
    const int full = x->full && !quick;
    const int *ns = quick ? quick_n : full ? all + 1 : sparse_n;
    const int *ks = quick ? quick_k : full ? all : sparse_k;
    const int nn = quick ? 2 : full ? 15 : 5, nk = quick ? 2 : full ? 16 : 7;
    double worst = 0.0;
    for (int i = 0; i < nn; i++) {
      for (int j = 0; j < nk; j++) {
        mpiar__topology_t t;
        if (mpiar__topology_regular(&t, ns[i], ks[j], MPIAR__PLACE_BLOCK) != MPIAR_SUCCESS) {
          failures++;
          continue;
        }
        const double e = worst_error(alg, x, &t);
        worst = e > worst ? e : worst;
        mpiar__topology_destroy(&t);
      }
    }
    printf("%s seg=%zu on two levels: estimate within %.0f %% of the simulator\n", alg->name,
           x->seg, 100 * worst);
  }
  printf("two-level estimates: %d failures\n", failures);
  return failures ? 1 : 0;
}
