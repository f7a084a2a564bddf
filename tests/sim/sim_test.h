/*
 * What the simulator tests share: the checks (../common/test_check.h: EXPECT and CHECK count in
 * `failures`; main returns nonzero when any check failed), the generators
 * (../common/test_random.h), dtype/operation pairs, counts that are primes, and topologies placed
 * by block, round-robin or at random; one simulation of a named entry under a cost model and an
 * optional routed network (sim_test_run).
 */
#ifndef MPIAR_SIM_TEST_H
#define MPIAR_SIM_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../common/test_check.h"
#include "../common/test_random.h"
#include "mpiar_types.h"
#include "schedule/topology.h"
#include "sim/sim.h"

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

/*
 * Operand order: every rank's input a quiet NaN float32 whose payload names the rank (r + 1); the
 * result must carry rank 0's payload on every rank, which holds only if every reduction holding
 * rank 0's data puts it in operand a. Counts a failure (EXPECT) otherwise.
 */
static inline void sim_expect_nan_order(const mpiar__algorithm_t *alg, int p, size_t count,
                                        size_t seg, int in_place) {
  float **in = (float **)calloc((size_t)p, sizeof *in);
  float *expect = (float *)malloc((count ? count : 1) * sizeof *expect);
  int ok = in != NULL && expect != NULL;
  for (int r = 0; ok && r < p; r++) {
    in[r] = (float *)malloc((count ? count : 1) * sizeof **in);
    ok = in[r] != NULL;
    for (size_t i = 0; ok && i < count; i++) {
      const uint32_t b = 0x7fc00000u | (uint32_t)(r + 1);
      memcpy(&in[r][i], &b, 4);
    }
  }
  EXPECT(ok, "%s p=%d: out of memory for the NaN inputs", alg->name, p);
  if (ok) {
    memcpy(expect, in[0], count * sizeof *expect);
    mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
    cfg.algorithm = alg;
    cfg.nranks = p;
    cfg.count = count;
    cfg.segment_elems = seg;
    cfg.in_place = in_place;
    cfg.inputs = (const void *const *)in;
    cfg.expect = expect;
    mpiar__sim_result_t res;
    const int rc = mpiar__sim_run(&cfg, &res);
    EXPECT(rc == MPIAR_SUCCESS && res.ok, "%s p=%d count=%zu seg=%zu in_place=%d NaN order: %s",
           alg->name, p, count, seg, in_place, rc ? mpiar_last_error() : res.error);
  }
  for (int r = 0; in != NULL && r < p; r++) {
    free(in[r]);
  }
  free(in);
  free(expect);
}

/*
 * One simulation of the entry @p name (mpiar__algorithm_find_any: registry, instances and
 * variants) on @p p ranks under @p cost, on the routed network @p net or NULL. With @p data the
 * results are checked against the reference and between ranks, and up to 64 ranks the hazards
 * too. An unknown name or a failed run counts in `failures`; the result is zero then.
 */
static inline mpiar__sim_result_t sim_test_run(const char *name, int p, size_t count, int in_place,
                                               int data, mpiar_dtype_t dt, mpiar_op_t op,
                                               const mpiar__cost_params_t *cost,
                                               const mpiar__network_t *net) {
  mpiar__sim_config_t cfg = MPIAR__SIM_CONFIG_INIT;
  cfg.algorithm = mpiar__algorithm_find_any(name);
  cfg.nranks = p;
  cfg.count = count;
  cfg.in_place = in_place;
  cfg.data = data;
  cfg.dtype = dt;
  cfg.op = op;
  cfg.check_hazards = data && p <= 64 ? 1 : 0;
  cfg.cost = *cost;
  cfg.network = net;
  mpiar__sim_result_t res;
  memset(&res, 0, sizeof res);
  if (cfg.algorithm == NULL) {
    CHECK(0, "%s: not in the registry", name);
    return res;
  }
  const int rc = mpiar__sim_run(&cfg, &res);
  CHECK(rc == MPIAR_SUCCESS && res.ok, "%s p=%d count=%zu in_place=%d: %s", name, p, count,
        in_place, rc ? mpiar_last_error() : res.error);
  return res;
}

#endif /* MPIAR_SIM_TEST_H */
