/*
 * Algorithm: k-nomial tree (reduce to rank 0 over a k-nomial tree, then broadcast over it,
 * pipelined in segments; MPICH's tree allreduce with its knomial_1 tree type, rooted at 0)
 *
 * Rank r's children are r + j k^i (j = 1..k-1) for every i below the lowest non-zero base-k digit
 * of r (every i for rank 0), each below p; child r + j k^i roots the contiguous range
 * [r + j k^i, min(r + (j+1) k^i, p)). k = 2 is the binomial tree. Each rank folds its children's
 * results into its own in ascending rank order (its own data in operand a: x0 is the leftmost
 * operand of every element, a NaN payload of rank 0 wins on every rank), sends the fold to its
 * parent, and forwards the result that comes back down to its children, the largest subtree
 * first. Only rank 0 holds the finished reduction; every rank receives its bits.
 *
 * Restrictions: none. Any p, any count, in place or not; segmented (MPIAR__ALG_SEGMENTED): a
 * segment of S elements pipelines both phases (at most MPIAR__SEGMENTS_MAX segments: the segment
 * is at least n / 1024 elements).
 *
 * Memory: scratch of one segment per child and segment parity (2 c S elements, c children; one
 * unsegmented: c n). No up-front copy: the first fold reads INPUT and writes OUTPUT.
 *
 * Tags: segment g's messages carry tag g in both directions (the reduce goes up, the broadcast
 * down, so no ordered pair of ranks sees a tag twice).
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced; m segments of S bytes, m = 1
 * and S = n unsegmented; T = alpha + S beta): the engine's critical path (mpiar__tree_time in
 * tree.c), evaluated rank by rank: a rank's fold is done at F = the last of its children's
 * results to arrive through its receive port (one T each, in the order they are ready) plus one
 * S gamma per child, folded in rank order; the result then goes down, T per child, the largest
 * subtree first. Closed forms of that recursion: p = 2: 2 alpha + 2 n beta + n gamma; p <= k
 * (a star) with S gamma <= T: 2 (p-1) T + S gamma (each fold hides behind the next arrival);
 * p = 2^L, k = 2 (binomial): the reduce takes
 * L (T + S gamma) (each level's child arrives just as the previous fold ends) and the broadcast
 * L T. Segmented, (m - 1) times the busiest rank's time per segment is added (rank 0: c T on
 * its ports, c S gamma folding, with c = (k-1) ceil(log_k p) children): a lower bound that the
 * simulator stays within 3x of (the up and down messages of later segments queue behind each
 * other on the ports). The simulator's critical path equals the unsegmented time for every p
 * (tests/sim/test_sim_cost.c). Per rank it sends n bytes up and n down, 2n where ring sends
 * 2 (p-1)/p n; its depth ceil(log_k p) is the shortest dependency chain of the catalogue, so it
 * is for small vectors, and for reductions that want one rank's fold order.
 * Two levels (several nodes, several ranks on some): the same sweep, where a message between
 * nodes takes its two nodes' shared ports (alpha_inter + S beta_inter, one message at a time per
 * port) instead of the ranks' own, and the period is also a node port's inter-node messages of
 * one segment; on one node or one rank per node the one-level time on that level's link.
 * Unsegmented within 25 % of the simulator on 2..16 nodes of 1..16 ranks
 * (tests/sim/test_sim_two_level.c); segmented as on one level.
 */
#include <math.h>

#include "algorithms/tree.h"
#include "base/common.h"

static void shape(int p, int r, int k, mpiar__tree_node_t *node) {
  node->parent = -1;
  node->nchildren = 0;
  /* The lowest non-zero digit of r (its level): children live below it, the parent above. */
  long span = 1;
  while (r != 0 && (r / span) % k == 0) {
    span *= k;
  }
  if (r != 0) {
    node->parent = r - (int)((r / span) % k * span);
  }
  /* Children in ascending rank order: the lowest level first, digit by digit. */
  for (long d = 1; (r == 0 || d < span) && r + d < p; d *= k) {
    for (int j = 1; j < k && r + j * d < p; j++) {
      node->children[node->nchildren++] = r + (int)(j * d);
    }
  }
}

int mpiar__build_knomial_tree_k(mpiar__schedule_t *s, int k) {
  return mpiar__build_shaped_tree(s, k, shape);
}

double mpiar__cost_knomial_tree_k(int k, int nranks, size_t bytes, size_t elem_size,
                                  size_t segment_bytes, const mpiar__cost_params_t *c,
                                  const mpiar__topology_t *topo) {
  return mpiar__tree_cost(k, shape, nranks, bytes, elem_size, segment_bytes, c, topo);
}
