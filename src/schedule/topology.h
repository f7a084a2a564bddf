/*
 * The node structure of a communicator: which ranks share a node (a machine, or a shared-memory
 * domain). Hierarchical builders read it to keep most traffic inside nodes; the simulator reads
 * it to give links inside a node and between nodes their own cost.
 *
 * A topology is immutable once built and owned by its creator (one per communicator context);
 * schedules point to it (mpiar__schedule_t.topo) and never free it. Nodes are numbered in the
 * order of their lowest rank, and each node lists its ranks in rank order, so every rank derives
 * the same numbering from the same rank -> node map, whatever labels the map used.
 */
#ifndef MPIAR_TOPOLOGY_H
#define MPIAR_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

/* How the ranks of a regular or uneven topology are laid out on the nodes. */
typedef enum mpiar__placement {
  MPIAR__PLACE_BLOCK = 0,     /* consecutive ranks fill a node before the next one starts */
  MPIAR__PLACE_ROUNDROBIN = 1 /* rank r goes to the next node (cyclically) that has room */
} mpiar__placement_t;

typedef struct mpiar__topology {
  int nranks;
  int nnodes;
  int max_node_size; /* ranks on the largest node */
  int *node_of;      /* [nranks] node of each rank */
  int *local_rank;   /* [nranks] index of each rank among its node's ranks (rank order) */
  int *node_size;    /* [nnodes] ranks on each node */
  int *node_first;   /* [nnodes + 1] where each node's ranks start in node_ranks */
  int *node_ranks;   /* [nranks] the ranks of node 0 in rank order, then node 1's, ... */
} mpiar__topology_t;

/*
 * Build @p t from a rank -> node map: @p node_label[r] (r < @p nranks) is any non-negative label,
 * equal for ranks on one node (for example the lowest world rank of the node, or a hash of the
 * host name). @return MPIAR_SUCCESS, MPIAR_ERR_INVALID_ARG (nranks < 1, a negative label) or
 * MPIAR_ERR_NOMEM; on failure @p t is left empty (destroying it is safe).
 */
int mpiar__topology_from_map(mpiar__topology_t *t, int nranks, const int *node_label);

/* @p nnodes nodes of @p ranks_per_node ranks each, placed by @p placement. */
int mpiar__topology_regular(mpiar__topology_t *t, int nnodes, int ranks_per_node,
                            mpiar__placement_t placement);

/* @p nnodes nodes, node i holding @p node_size[i] >= 1 ranks, placed by @p placement. */
int mpiar__topology_uneven(mpiar__topology_t *t, int nnodes, const int *node_size,
                           mpiar__placement_t placement);

/*
 * @p nnodes nodes, node i holding @p node_size[i] >= 1 ranks, the ranks shuffled over them by a
 * xorshift64 generator whose state @p rng (non-zero) advances: a random placement that the same
 * state reproduces.
 */
int mpiar__topology_shuffled(mpiar__topology_t *t, int nnodes, const int *node_size,
                             uint64_t *rng);

/* Free what @p t owns and leave it empty. */
void mpiar__topology_destroy(mpiar__topology_t *t);

/*
 * @return 1 when @p t has more than one node and more than one rank on some node: the only case
 * where a hierarchical algorithm differs from its flat equivalent (NULL, one node, or one rank
 * per node: 0). The selector offers MPIAR__ALG_HIERARCHICAL algorithms only then.
 */
int mpiar__topology_is_hierarchical(const mpiar__topology_t *t);

/* @return 1 when every node holds the same number of ranks (NULL: 1). */
int mpiar__topology_is_regular(const mpiar__topology_t *t);

/* The rank with local index @p local on node @p node. */
static inline int mpiar__topology_rank(const mpiar__topology_t *t, int node, int local) {
  return t->node_ranks[t->node_first[node] + local];
}

#endif /* MPIAR_TOPOLOGY_H */
