/*
 * The pipelined reduce-then-broadcast engine shared by the tree allreduces (knomial_tree.c,
 * kary_tree.c): a tree shape is a parent and an ascending list of children per rank, rooted at
 * rank 0, whose subtrees are contiguous ranges of ranks; the engine builds the steps.
 */
#ifndef MPIAR_ALGORITHMS_TREE_H
#define MPIAR_ALGORITHMS_TREE_H

#include "algorithms/util.h"

typedef struct mpiar__tree_node {
  int parent;    /* -1 at the root */
  int nchildren; /* children[0 .. nchildren-1], ascending ranks */
  int children[64 * 8];
} mpiar__tree_node_t;

/*
 * Reduce to rank 0 along @p node's tree, then broadcast back, segment by segment (s->segment_elems,
 * at least n / MPIAR__SEGMENTS_MAX elements; 0: one segment). See knomial_tree.c for the order of
 * operands, memory and tags.
 */
int mpiar__build_tree(mpiar__schedule_t *s, const mpiar__tree_node_t *node);

/* The segment the tree engine uses for @p n elements and @p seg requested (0: none). */
size_t mpiar__tree_segment(size_t n, size_t seg);

/* A tree shape: rank @p r's node among @p p ranks for fan-out parameter @p k. */
typedef void (*mpiar__tree_shape_fn)(int p, int r, int k, mpiar__tree_node_t *node);

/*
 * The modelled time of the engine on @p shape: the critical path of one segment of S bytes up and
 * down the tree, evaluated rank by rank with the simulator's port rules (a rank's receive port
 * takes its children's messages in the order they are sent, its send port sends the result to
 * its children one after the other), plus (m - 1) times the busiest port's time per segment (the
 * pipeline's period: a rank's ports, its folds, or on two levels a node's port). With @p topo
 * (NULL: one level, link @p c), a message between nodes takes its nodes' shared ports instead
 * (alpha_inter + S beta_inter each, one message at a time). Exact on one level for m = 1;
 * otherwise the model's estimate.
 */
double mpiar__tree_time(int p, int k, mpiar__tree_shape_fn shape, double S, double m,
                        const mpiar__cost_params_t *c, const mpiar__topology_t *topo);

/* Build the tree allreduce of this rank on @p shape with fan-out @p k (the builders' body). */
int mpiar__build_shaped_tree(mpiar__schedule_t *s, int k, mpiar__tree_shape_fn shape);

/* The cost function's body for a tree of @p shape: mpiar__tree_time on @p topo (one level:
 * on that level's link), with the segment the engine would use. */
double mpiar__tree_cost(int k, mpiar__tree_shape_fn shape, int nranks, size_t bytes,
                        size_t elem_size, size_t segment_bytes, const mpiar__cost_params_t *c,
                        const mpiar__topology_t *topo);

#endif /* MPIAR_ALGORITHMS_TREE_H */
