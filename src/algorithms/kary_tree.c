/*
 * Algorithm: k-ary tree (reduce to rank 0 over a k-ary tree, then broadcast over it, pipelined
 * in segments; MPICH's tree allreduce with its kary tree type, rooted at 0)
 *
 * Every node has at most k children and the tree is balanced: the ranks [lo, hi) of a subtree
 * are its root lo and k contiguous, near-equal ranges of the rest (the first ones one larger),
 * each a subtree. This is MPICH's k-ary shape numbered in pre-order instead of level order, so
 * that every subtree is a contiguous range of ranks and each fold runs in rank order (the node's
 * own data in operand a: x0 is the leftmost operand of every element, a NaN payload of rank 0
 * wins on every rank). k = 2 is the binary tree. The steps are those of knomial_tree.c's engine
 * (src/algorithms/tree.c): fold the children, send up, receive the result, forward it down.
 *
 * Restrictions: none. Any p, any count, in place or not; segmented (MPIAR__ALG_SEGMENTED), with
 * at most MPIAR__SEGMENTS_MAX segments.
 *
 * Memory: scratch of one segment per child and segment parity (2 k S elements; unsegmented k n).
 *
 * Tags: segment g's messages carry tag g in both directions.
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced; m segments of S bytes, m = 1
 * and S = n unsegmented; T = alpha + S beta): the engine's critical path evaluated rank by rank
 * (mpiar__tree_time in tree.c, described in knomial_tree.c); closed forms of it: p = 2:
 * 2 alpha + 2 n beta + n gamma; p <= k + 1 (a star) with S gamma <= T: 2 (p-1) T + S gamma.
 * Segmented, (m - 1) times the busiest rank's time per segment is added (an inner node: (k+1) T on
 * each port, k S gamma folding): a lower bound the simulator stays within 3x of. The simulator's
 * critical path equals the unsegmented time for every p (tests/sim/test_sim_cost.c). Where the
 * k-nomial tree's root has (k-1) log_k p children, every node here has at most k, so a pipeline
 * of many segments has the shorter period: the tree for large segmented vectors; the k-nomial
 * tree has the smaller depth for small ones.
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
  /* Descend from the whole range to the subtree rooted at r, noting the parent on the way. */
  int lo = 0, hi = p;
  while (lo != r) {
    const size_t rest = (size_t)(hi - lo - 1);
    const int parts = rest < (size_t)k ? (int)rest : k;
    for (int i = 0; i < parts; i++) {
      const int clo = lo + 1 + (int)mpiar__block_off(rest, parts, i);
      const int chi = clo + (int)mpiar__block_len(rest, parts, i);
      if (r >= clo && r < chi) {
        node->parent = lo;
        lo = clo;
        hi = chi;
        break;
      }
    }
  }
  const size_t rest = (size_t)(hi - lo - 1);
  const int parts = rest < (size_t)k ? (int)rest : k;
  for (int i = 0; i < parts; i++) {
    node->children[node->nchildren++] = lo + 1 + (int)mpiar__block_off(rest, parts, i);
  }
}

int mpiar__build_kary_tree_k(mpiar__schedule_t *s, int k) {
  return mpiar__build_shaped_tree(s, k, shape);
}

double mpiar__cost_kary_tree_k(int k, int nranks, size_t bytes, size_t elem_size,
                               size_t segment_bytes, const mpiar__cost_params_t *c,
                               const mpiar__topology_t *topo) {
  return mpiar__tree_cost(k, shape, nranks, bytes, elem_size, segment_bytes, c, topo);
}
