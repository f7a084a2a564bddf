/*
 * Topologies: the canonical numbering of a rank -> node map, the regular and uneven layouts,
 * validation of bad input, and the invariants every topology keeps (checked on random maps).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "schedule/topology.h"
#include "sim_test.h"

static int same(const int *a, const int *b, int n) {
  return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* Every rank is listed once, at its node and local rank; lists in rank order; nodes by lowest rank.
 */
static void check_invariants(const mpiar__topology_t *t, const char *what) {
  int total = 0, max = 0;
  for (int i = 0; i < t->nnodes; i++) {
    EXPECT(t->node_size[i] >= 1 && t->node_first[i + 1] - t->node_first[i] == t->node_size[i],
           "%s: node %d size %d", what, i, t->node_size[i]);
    total += t->node_size[i];
    max = t->node_size[i] > max ? t->node_size[i] : max;
    for (int l = 1; l < t->node_size[i]; l++) {
      EXPECT(mpiar__topology_rank(t, i, l - 1) < mpiar__topology_rank(t, i, l),
             "%s: node %d not in rank order", what, i);
    }
    if (i > 0) {
      EXPECT(mpiar__topology_rank(t, i - 1, 0) < mpiar__topology_rank(t, i, 0),
             "%s: nodes %d and %d not numbered by their lowest rank", what, i - 1, i);
    }
  }
  EXPECT(total == t->nranks && max == t->max_node_size && t->node_first[0] == 0,
         "%s: %d ranks listed of %d, largest node %d (recorded %d)", what, total, t->nranks, max,
         t->max_node_size);
  for (int r = 0; r < t->nranks; r++) {
    EXPECT(mpiar__topology_rank(t, t->node_of[r], t->local_rank[r]) == r,
           "%s: rank %d is not at node %d local %d", what, r, t->node_of[r], t->local_rank[r]);
  }
}

static void test_from_map(void) {
  mpiar__topology_t t;
  const int labels[] = {5, 5, 2, 9, 2};
  EXPECT(mpiar__topology_from_map(&t, 5, labels) == MPIAR_SUCCESS, "from_map: %s",
         mpiar_last_error());
  const int node_of[] = {0, 0, 1, 2, 1}, local[] = {0, 1, 0, 0, 1}, size[] = {2, 2, 1};
  const int first[] = {0, 2, 4, 5}, ranks[] = {0, 1, 2, 4, 3};
  EXPECT(t.nranks == 5 && t.nnodes == 3 && t.max_node_size == 2, "from_map: %d ranks %d nodes",
         t.nranks, t.nnodes);
  EXPECT(same(t.node_of, node_of, 5) && same(t.local_rank, local, 5) &&
             same(t.node_size, size, 3) && same(t.node_first, first, 4) &&
             same(t.node_ranks, ranks, 5),
         "from_map: renumbering by lowest rank");
  check_invariants(&t, "from_map");
  EXPECT(mpiar__topology_is_hierarchical(&t) && !mpiar__topology_is_regular(&t),
         "from_map: hierarchical, not regular");
  mpiar__topology_destroy(&t);
  mpiar__topology_destroy(&t); /* destroying an empty topology is safe */
}

static void test_layouts(void) {
  mpiar__topology_t t;
  const int block[] = {0, 0, 1, 1, 2, 2}, rr[] = {0, 1, 2, 0, 1, 2};
  EXPECT(mpiar__topology_regular(&t, 3, 2, MPIAR__PLACE_BLOCK) == MPIAR_SUCCESS &&
             same(t.node_of, block, 6) && mpiar__topology_is_regular(&t),
         "3 x 2 block");
  check_invariants(&t, "3 x 2 block");
  mpiar__topology_destroy(&t);
  EXPECT(mpiar__topology_regular(&t, 3, 2, MPIAR__PLACE_ROUNDROBIN) == MPIAR_SUCCESS &&
             same(t.node_of, rr, 6),
         "3 x 2 round-robin");
  check_invariants(&t, "3 x 2 round-robin");
  mpiar__topology_destroy(&t);
  /* Uneven: round-robin deals one rank per node in turn and skips the full ones. */
  const int sizes[] = {3, 1, 2}, ublock[] = {0, 0, 0, 1, 2, 2}, urr[] = {0, 1, 2, 0, 2, 0};
  EXPECT(mpiar__topology_uneven(&t, 3, sizes, MPIAR__PLACE_BLOCK) == MPIAR_SUCCESS &&
             same(t.node_of, ublock, 6) && same(t.node_size, sizes, 3),
         "uneven block");
  mpiar__topology_destroy(&t);
  EXPECT(mpiar__topology_uneven(&t, 3, sizes, MPIAR__PLACE_ROUNDROBIN) == MPIAR_SUCCESS &&
             same(t.node_of, urr, 6) && same(t.node_size, sizes, 3),
         "uneven round-robin");
  check_invariants(&t, "uneven round-robin");
  mpiar__topology_destroy(&t);
}

static void test_flat_cases(void) {
  mpiar__topology_t t;
  EXPECT(!mpiar__topology_is_hierarchical(NULL) && mpiar__topology_is_regular(NULL), "NULL");
  const int shapes[][3] = {{1, 4, 0}, {4, 1, 0}, {1, 1, 0}, {2, 2, 1}, {64, 8, 1}};
  for (int i = 0; i < 5; i++) {
    EXPECT(mpiar__topology_regular(&t, shapes[i][0], shapes[i][1], MPIAR__PLACE_BLOCK) ==
                   MPIAR_SUCCESS &&
               mpiar__topology_is_hierarchical(&t) == shapes[i][2],
           "%d x %d: hierarchical %d", shapes[i][0], shapes[i][1], shapes[i][2]);
    mpiar__topology_destroy(&t);
  }
  const int one_big[] = {1, 2};
  EXPECT(mpiar__topology_uneven(&t, 2, one_big, MPIAR__PLACE_ROUNDROBIN) == MPIAR_SUCCESS &&
             mpiar__topology_is_hierarchical(&t),
         "nodes of 1 and 2 ranks are hierarchical");
  mpiar__topology_destroy(&t);
}

static void test_errors(void) {
  mpiar__topology_t t;
  const int neg[] = {0, -1}, zero[] = {2, 0};
  EXPECT(mpiar__topology_from_map(&t, 0, neg) == MPIAR_ERR_INVALID_ARG, "no ranks");
  EXPECT(mpiar__topology_from_map(&t, 2, neg) == MPIAR_ERR_INVALID_ARG &&
             strstr(mpiar_last_error(), "rank 1") != NULL,
         "negative label: %s", mpiar_last_error());
  EXPECT(mpiar__topology_uneven(&t, 2, zero, MPIAR__PLACE_BLOCK) == MPIAR_ERR_INVALID_ARG &&
             strstr(mpiar_last_error(), "node 1") != NULL,
         "empty node: %s", mpiar_last_error());
  EXPECT(mpiar__topology_regular(&t, 0, 4, MPIAR__PLACE_BLOCK) == MPIAR_ERR_INVALID_ARG, "0 nodes");
  EXPECT(mpiar__topology_regular(&t, 4, 0, MPIAR__PLACE_BLOCK) == MPIAR_ERR_INVALID_ARG, "0 ranks");
  EXPECT(mpiar__topology_regular(&t, 1 << 20, 1 << 12, MPIAR__PLACE_BLOCK) == MPIAR_ERR_INVALID_ARG,
         "more ranks than an int holds");
  EXPECT(mpiar__topology_regular(&t, 2, 2, (mpiar__placement_t)7) == MPIAR_ERR_INVALID_ARG,
         "unknown placement");
  EXPECT(t.nranks == 0 && t.node_of == NULL, "a failed constructor leaves the topology empty");
}

/* Random maps with arbitrary labels keep every invariant and the map itself. */
static void test_random_maps(void) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 200; i++) {
    test_xorshift64(&x);
    const int p = 1 + (int)(x % 300), nodes = 1 + (int)((x >> 20) % 40);
    int *labels = malloc((size_t)p * sizeof *labels);
    if (labels == NULL) {
      failures++;
      return;
    }
    for (int r = 0; r < p; r++) {
      test_xorshift64(&x);
      labels[r] = (int)(x % (uint64_t)nodes) * 1000003;
    }
    mpiar__topology_t t;
    EXPECT(mpiar__topology_from_map(&t, p, labels) == MPIAR_SUCCESS, "random map %d", i);
    check_invariants(&t, "random map");
    for (int r = 0; r < p; r++) {
      for (int q = r + 1; q < p && q < r + 8; q++) {
        EXPECT((labels[r] == labels[q]) == (t.node_of[r] == t.node_of[q]),
               "random map %d: ranks %d and %d", i, r, q);
      }
    }
    mpiar__topology_destroy(&t);
    free(labels);
  }
}

int main(void) {
  test_from_map();
  test_layouts();
  test_flat_cases();
  test_errors();
  test_random_maps();
  printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
