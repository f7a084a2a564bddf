/*
 * The quotient simulation (sim.h) against the full one: for every allreduce algorithm of the
 * registry and the research variants, on flat communicators and regular two-level topologies
 * (block placement) of many shapes, sizes and segments, the time of the run that simulates only
 * representatives equals the time of the run that simulates every rank (to 1e-12), and so do the
 * traffic figures. A symmetry must be found where one is known to exist (the ring and the
 * two-level ring on every shape; recursive doubling and Rabenseifner where p is a power of two),
 * when the count splits evenly, so that the comparison is not vacuous; where none exists the
 * quotient run falls back to every rank, which a non-power-of-two Rabenseifner shows.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "sim_test.h"

static int compared, reduced;

static int pow2(int x) {
  return x > 0 && (x & (x - 1)) == 0;
}

/*
 * One comparison. @return the number of representatives the quotient run simulated. Counts that
 * do not split evenly give ranks blocks of different lengths: no symmetry then, and the quotient
 * run must fall back to every rank (which the comparison checks too).
 */
static int compare(const mpiar__algorithm_t *alg, int nodes, int ppn, size_t count, size_t seg,
                   const mpiar__cost_params_t *cost) {
  const int p = nodes * ppn;
  mpiar__topology_t topo;
  memset(&topo, 0, sizeof topo);
  int two_level = nodes > 0 && ppn > 0 && !(nodes == 1 && ppn == 1);
  if (two_level && mpiar__topology_regular(&topo, nodes, ppn, MPIAR__PLACE_BLOCK) != 0) {
    CHECK(0, "topology %dx%d", nodes, ppn);
    return p;
  }
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = alg;
  cfg.nranks = p;
  cfg.count = count;
  cfg.segment_elems = seg;
  cfg.data = 0;
  cfg.check_hazards = 0;
  cfg.cost = *cost;
  cfg.topology = two_level ? &topo : NULL;
  mpiar__sim_result_t full, quot;
  int rc = mpiar__sim_run(&cfg, &full);
  cfg.quotient = 1;
  int rq = mpiar__sim_run(&cfg, &quot);
  char what[160];
  snprintf(what, sizeof what, "%s %dx%d count %zu seg %zu", alg->name, nodes, ppn, count, seg);
  CHECK(rc == MPIAR_SUCCESS && rq == MPIAR_SUCCESS && full.ok && quot.ok, "%s: %s / %s", what,
        full.error, quot.error);
  if (rc == MPIAR_SUCCESS && rq == MPIAR_SUCCESS && full.ok && quot.ok) {
    compared++;
    double rel = fabs(full.time_s - quot.time_s) / (full.time_s > 0 ? full.time_s : 1);
    CHECK(rel <= 1e-12, "%s: time %.17g full, %.17g with %d representatives (%s)", what,
          full.time_s, quot.time_s, quot.reps, quot.symmetry);
    CHECK(full.messages == quot.messages && full.bytes_sent_total == quot.bytes_sent_total &&
              full.bytes_sent_max == quot.bytes_sent_max && full.steps == quot.steps &&
              full.messages_max == quot.messages_max,
          "%s: traffic differs: messages %zu/%zu, bytes %zu/%zu, max %zu/%zu", what,
          full.messages, quot.messages, full.bytes_sent_total, quot.bytes_sent_total,
          full.bytes_sent_max, quot.bytes_sent_max);
    CHECK(full.inter_bytes_total == quot.inter_bytes_total &&
              full.inter_messages == quot.inter_messages &&
              full.node_bytes_sent_max == quot.node_bytes_sent_max &&
              full.node_bytes_received_max == quot.node_bytes_received_max,
          "%s: node traffic differs: %zu/%zu bytes, node max %zu/%zu", what,
          full.inter_bytes_total, quot.inter_bytes_total, full.node_bytes_sent_max,
          quot.node_bytes_sent_max);
    CHECK(full.reps == p && quot.reps <= p, "%s: reps %d / %d", what, full.reps, quot.reps);
    reduced += quot.reps < p;
  }
  mpiar__topology_destroy(&topo);
  return quot.reps;
}

int main(int argc, char **argv) {
  const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  /* Inter-node links slower than the intra-node ones, and the reverse, so that port contention
   * and both levels show in the times. */
  const mpiar__cost_params_t costs[2] = {{1e-6, 1e-10, 5e-11, 5e-6, 4e-10, 0, 0},
                                         {2e-6, 2e-10, 1e-11, 1e-6, 5e-11, 0, 0}};
  /* nodes x ranks per node; 0 nodes: flat p = ppn. */
  static const int shapes[][2] = {{0, 2},  {0, 3},  {0, 4}, {0, 5}, {0, 8}, {0, 12}, {0, 16},
                                  {0, 64}, {2, 2},  {2, 4}, {4, 2}, {4, 4}, {8, 2},  {2, 8},
                                  {3, 4},  {4, 3},  {8, 4}, {16, 2}, {6, 2}, {16, 4}, {4, 1}};
  const int nshapes = (int)(sizeof shapes / sizeof shapes[0]);
  /* Counts that split evenly over any p here (blocks of equal length: a symmetry can exist),
   * and counts that do not (blocks differ by an element: the ranks differ). */
  static const size_t counts[] = {1, 777, 65536 + 9, 5760, 645120};
  for (int a = 0; a < mpiar__algorithm_count + mpiar__algorithm_variant_count; a++) {
    const mpiar__algorithm_t *alg = a < mpiar__algorithm_count
                                        ? &mpiar__algorithms[a]
                                        : &mpiar__algorithm_variants[a - mpiar__algorithm_count];
    for (int sh = 0; sh < nshapes; sh++) {
      if (quick && sh % 3 != 0) {
        continue;
      }
      const int nodes = shapes[sh][0] ? shapes[sh][0] : 1;
      const int ppn = shapes[sh][1];
      const int p = nodes * ppn;
      const int flat = shapes[sh][0] == 0;
      for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        for (int seg = 0; seg < 2; seg++) {
          if (seg && !(alg->flags & MPIAR__ALG_SEGMENTED)) {
            continue;
          }
          int reps = compare(alg, flat ? 1 : nodes, flat ? p : ppn, counts[c], seg ? 512 : 0,
                             &costs[(sh + c) % 2]);
          /* Where a symmetry is known, the quotient must have used it. */
          const int ring = strcmp(alg->name, "ring") == 0 || strcmp(alg->name, "hier_ring") == 0;
          const int xor_family = strcmp(alg->name, "recursive_doubling") == 0 ||
                                 strcmp(alg->name, "rabenseifner") == 0;
          const int K = flat || nodes == 1 ? 1 : ppn;
          if ((ring || (xor_family && pow2(p) && pow2(K))) && p / K >= 2 && counts[c] % p == 0) {
            CHECK(reps == K, "%s %dx%d count %zu: %d representatives, expected %d", alg->name,
                  nodes, ppn, counts[c], reps, K);
          }
        }
      }
    }
  }
  /* No symmetry: Rabenseifner's fold at p = 6 runs every rank. */
  const mpiar__cost_params_t c0 = costs[0];
  CHECK(compare(mpiar__algorithm_find("rabenseifner"), 1, 6, 1000, 0, &c0) == 6,
        "rabenseifner p=6 should have no symmetry");
  printf("quotient simulation: %d comparisons (%d reduced to representatives): %s\n", compared,
         reduced, failures ? "FAILED" : "times and traffic equal the full simulation");
  return failures ? 1 : 0;
}
