/*
 * The model's protocol term, no MPI.
 *
 * Accounting: with an eager limit E and a rendezvous cost R (mpiar__cost_params_t), every cost
 * function the selectors rank adds R once per message longer than E on its critical path and
 * nothing for the others: the difference between its cost with the term and without it is k R,
 * k counted here by hand from the algorithm's messages (file headers); between nodes there is
 * no term.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/test_check.h"
#include "algorithms/algorithms.h"

#define R 3e-6 /* the rendezvous cost of the accounting cases */

static const mpiar__cost_params_t plain = {1e-6, 1e-10, 5e-11, 5e-6, 4e-10, 0, 0};
static const mpiar__cost_params_t proto = {1e-6, 1e-10, 5e-11, 5e-6, 4e-10, 8192, R};

/* One accounting case: algorithm (of collective coll), p, bytes, segment, messages above E. */
typedef struct tcase {
  const char *coll, *name;
  int p;
  size_t bytes, seg;
  int above;
} tcase_t;

static const mpiar__algorithm_t *find(const char *coll, const char *name) {
  if (strcmp(coll, "bcast") == 0) {
    return mpiar__bcast_algorithm_find(name);
  }
  if (strcmp(coll, "reduce_scatter") == 0) {
    return mpiar__reduce_scatter_algorithm_find(name);
  }
  if (strcmp(coll, "allgather") == 0) {
    return mpiar__allgather_algorithm_find(name);
  }
  return mpiar__algorithm_find_any(name);
}

static void accounting(void) {
  static const tcase_t cases[] = {
      /* One message of the whole vector per step: none at E, one just above. */
      {"allreduce", "recursive_doubling", 2, 8192, 0, 0},
      {"allreduce", "recursive_doubling", 2, 8196, 0, 1},
      {"allreduce", "recursive_doubling", 3, 16384, 0, 3}, /* fold, exchange, result */
      /* The ring: 2 (p-1) blocks of n/p, or m segments per block. */
      {"allreduce", "ring", 2, 16384, 0, 0},
      {"allreduce", "ring", 2, 16392, 0, 2},
      {"allreduce", "ring", 4, 65536, 0, 6},
      {"allreduce", "ring", 2, 16 << 20, 4 << 20, 4},
      {"allreduce", "repro_direct", 4, 65536, 0, 6},
      /* Halving and doubling send n/2, .., n/p: at 32 KiB on 4 ranks 16 KiB is above, 8 KiB not. */
      {"allreduce", "rabenseifner", 4, 32768, 0, 2},
      {"allreduce", "rabenseifner", 4, 65536, 0, 4},
      {"allreduce", "rabenseifner", 2, 16392, 0, 2},
      {"allreduce", "recursive_multiplying", 4, 16384, 0, 3}, /* k = 4: one round of 3 */
      /* 2 x 3 grid: 4 row messages of 16 KiB above, 2 column messages of 8 KiB not. */
      {"allreduce", "torus_2d", 6, 49152, 0, 4},
      {"bcast", "binomial", 4, 16384, 0, 2},
      {"reduce_scatter", "ring", 2, 32768, 0, 1},
      {"reduce_scatter", "recursive_halving", 4, 65536, 0, 2},
      {"allgather", "ring", 4, 65536, 0, 3},
      {"allgather", "recursive_doubling", 4, 65536, 0, 2},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const tcase_t *c = &cases[i];
    const mpiar__algorithm_t *a = find(c->coll, c->name);
    CHECK(a != NULL, "%s %s not in its registry", c->coll, c->name);
    if (a == NULL) {
      continue;
    }
    const double with = a->cost(c->p, c->bytes, 4, c->seg, &proto, NULL);
    const double without = a->cost(c->p, c->bytes, 4, c->seg, &plain, NULL);
    const double extra = (with - without) / R;
    CHECK(fabs(extra - c->above) < 1e-6,
          "%s %s, p = %d, %zu bytes, segment %zu: %.6f handshakes, expected %d", c->coll,
          c->name, c->p, c->bytes, c->seg, extra, c->above);
  }
  /* Between nodes (one rank per node) the term is not charged: it is the node's protocol. */
  const int labels[2] = {0, 1};
  mpiar__topology_t topo;
  CHECK(mpiar__topology_from_map(&topo, 2, labels) == MPIAR_SUCCESS, "topology of 2 nodes");
  const mpiar__algorithm_t *rd = mpiar__algorithm_find("recursive_doubling");
  const double d =
      rd->cost(2, 65536, 4, 0, &proto, &topo) - rd->cost(2, 65536, 4, 0, &plain, &topo);
  CHECK(d == 0.0, "recursive doubling between nodes: %g s of handshakes", d);
  mpiar__topology_destroy(&topo);
}

int main(void) {
  accounting();
  if (failures == 0) {
    printf("builtin choice: passed\n");
  }
  return failures != 0;
}
