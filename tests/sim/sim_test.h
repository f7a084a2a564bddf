/*
 * What the simulator tests share: the checks (../common/test_check.h: EXPECT and CHECK count in
 * `failures`; main returns nonzero when any check failed), the generators
 * (../common/test_random.h), dtype/operation pairs, counts that are primes, and topologies placed
 * by block, round-robin or at random.
 */
#ifndef MPIAR_SIM_TEST_H
#define MPIAR_SIM_TEST_H

#include <stddef.h>
#include <stdint.h>

#include "../common/test_check.h"
#include "../common/test_random.h"
#include "mpiar_types.h"
#include "schedule/topology.h"

/* A datatype and an operation, as the tables of pairs a test rotates through list them. */
typedef struct pair {
  mpiar_dtype_t dtype;
  mpiar_op_t op;
} pair_t;

/* The smallest prime above @p x (a count no block or segment size divides evenly). */
static inline size_t prime_above(size_t x) {
  for (size_t n = x + 1;; n++) {
    int prime = n > 1;
    for (size_t d = 2; d * d <= n && prime; d++) {
      prime = n % d != 0;
    }
    if (prime) {
      return n;
    }
  }
}

/* Nodes of the given sizes, placed 0: by block, 1: round-robin, 2: ranks shuffled over the same
 * node sizes (the shuffle advances the test's generator @p rng). */
static inline int make_topology(mpiar__topology_t *t, int nnodes, const int *sizes, int placement,
                                uint64_t *rng) {
  if (placement < 2) {
    return mpiar__topology_uneven(t, nnodes, sizes, (mpiar__placement_t)placement);
  }
  return mpiar__topology_shuffled(t, nnodes, sizes, rng);
}

#endif /* MPIAR_SIM_TEST_H */
