/*
 * The model's protocol term and the built-in choice it shapes, no MPI.
 *
 * Accounting: with an eager limit E and a rendezvous cost R (mpiar__cost_params_t), every cost
 * function the selectors rank adds R once per message longer than E on its critical path and
 * nothing for the others: the difference between its cost with the term and without it is k R,
 * k counted here by hand from the algorithm's messages (file headers); on a topology of several
 * nodes there is no term.
 *
 * Choices: mpiar_select() at p = 2 without a tuning file or MPIAR_ALGORITHM (the built-in
 * parameters, MPICH's 8 KiB eager limit): recursive doubling up to 8 KiB, the ring above it up
 * to 16 KiB (its halves eager, recursive doubling's one message not), recursive doubling again
 * until the ring's halved reduction pays for its second handshake, then the ring. A build on
 * Open MPI has its own fit (select.c), whose one switch is pinned instead.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/test_check.h"
#include "algorithms/algorithms.h"
#include "mpiar.h"

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
      {"bcast", "scatter_allgather", 4, 65536, 0, 5}, /* halves 32, 16 KiB; 3 blocks of 16 */
      {"bcast", "scatter_allgather", 4, 32768, 0, 1}, /* halves 16, 8 KiB; blocks of 8 */
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
  /* Across nodes (one rank per node, or 2 nodes x 2 ranks) the estimates leave the term out. */
  const int labels[2][4] = {{0, 1}, {0, 0, 1, 1}};
  for (int shape = 0; shape < 2; shape++) {
    const int p = 2 + 2 * shape;
    mpiar__topology_t topo;
    CHECK(mpiar__topology_from_map(&topo, p, labels[shape]) == MPIAR_SUCCESS, "topology");
    for (int i = 0; i < mpiar__algorithm_count; i++) {
      const mpiar__algorithm_t *a = &mpiar__algorithms[i];
      const double d = a->cost(p, 1 << 20, 4, 0, &proto, &topo) -
                       a->cost(p, 1 << 20, 4, 0, &plain, &topo);
      CHECK(d == 0.0, "%s on %d nodes of %d ranks: %g s of handshakes", a->name, 2, p / 2, d);
    }
    mpiar__topology_destroy(&topo);
  }
}

static void choices(void) {
  static const struct {
    size_t bytes;
    const char *alg;
    size_t seg;
  } want[] = {
#if defined(OPEN_MPI)
      /* Open MPI's fit: 2.6 us per message and no protocol term, the switch at 2 alpha / gamma. */
      {8192, "recursive_doubling", 0},
      {16392, "recursive_doubling", 0},
      {81920, "recursive_doubling", 0}, /* below 2 alpha / gamma = 83200 B */
      {86016, "ring", 0},
      {1 << 20, "ring", 0},
#else
      {4, "recursive_doubling", 0},
      {8192, "recursive_doubling", 0},  /* one eager message */
      {8196, "ring", 0},                /* recursive doubling's message is not eager */
      {12288, "ring", 0},
      {16384, "ring", 0},               /* the ring's halves still eager */
      {16392, "recursive_doubling", 0}, /* one handshake against two */
      {65536, "recursive_doubling", 0},
      {120 << 10, "recursive_doubling", 0},
      {128 << 10, "ring", 0}, /* 2 (alpha + rendezvous) / gamma = 125 KiB */
      {1 << 20, "ring", 0},
#endif
      {16 << 20, "ring", 4 << 20},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const char *alg = NULL;
    size_t seg = 0;
    int rc = mpiar_select(want[i].bytes, 2, &alg, &seg);
    CHECK(rc == MPIAR_SUCCESS, "mpiar_select(%zu, 2): %s", want[i].bytes, mpiar_last_error());
    if (rc != MPIAR_SUCCESS) {
      continue;
    }
    CHECK(strcmp(alg, want[i].alg) == 0 && seg == want[i].seg,
          "%zu bytes on 2 ranks: %s segment %zu, expected %s segment %zu", want[i].bytes, alg,
          seg, want[i].alg, want[i].seg);
  }
}

int main(void) {
  /* The built-in model decides only without these. */
  unsetenv("MPIAR_TUNING_FILE");
  unsetenv("MPIAR_ALGORITHM");
  unsetenv("MPIAR_SEGMENT_BYTES");
  accounting();
  choices();
  if (failures == 0) {
    printf("builtin choice: passed\n");
  }
  return failures != 0;
}
