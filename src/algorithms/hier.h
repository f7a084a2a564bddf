/*
 * What the hierarchical builders share (hier.c): the message channels that number each pair's
 * messages, the partition of the vector among a node's ranks and into pieces common to every
 * node, the intra-node reduce-scatter and allgather phases, the driver that runs an inter-node
 * allreduce on every piece in between, and the inter-node port model of the cost functions.
 *
 * Layout. Node i with k_i ranks cuts the vector into k_i blocks (mpiar__block_off); local rank l
 * owns block l. Nodes of different sizes cut in different places, so the vector is also cut at
 * every node's cut points into pieces: each piece lies inside one block of every node, and the
 * ranks owning it, one per node, run one inter-node allreduce on it. With equal node sizes the
 * pieces are the blocks: local rank l of every node runs the allreduce of block l.
 */
#ifndef MPIAR_ALGORITHMS_HIER_H
#define MPIAR_ALGORITHMS_HIER_H

#include <stddef.h>

#include "algorithms/util.h"

/* The messages this rank exchanges with one peer, in the order both sides append them. */
typedef struct mpiar__hier_peer {
  int peer;
  size_t nsend, nrecv, cap_send, cap_recv;
  long *send, *recv; /* step of each message */
} mpiar__hier_peer_t;

/* A growable list of step indices. */
typedef struct mpiar__steps {
  long *v;
  size_t n, cap;
} mpiar__steps_t;

typedef struct mpiar__hier {
  mpiar__schedule_t *s;
  const mpiar__topology_t *t;
  int node, local, k;      /* this rank's node, its index there, the node's size */
  size_t base, n;          /* the chunk being built: elements [base, base + n) */
  size_t blk_off, blk_len; /* this rank's block of its node's partition of the chunk */
  size_t *cut;             /* pieces: base + [cut[i], cut[i+1]), i < npieces, all non-empty */
  int npieces;
  int first_piece, end_piece; /* the pieces inside this rank's block */
  int own_output;             /* 1: this rank's share of its block is in OUTPUT from phase 1 on */
  long p1_done;  /* the step that completed the node's reduction of the block; -1 if k == 1 */
  long *p1_sent; /* per block of the node: the phase-1 step that last read OUTPUT there, or -1 */
  mpiar__hier_peer_t *peers;
  int npeers, cap_peers;
} mpiar__hier_t;

/* One inter-node allreduce: a piece and its ranks, one per node (position = node index). */
typedef struct mpiar__hier_piece {
  size_t off, len; /* elements of the vector */
  int index;       /* piece number */
  int me;          /* this rank's position: its node */
  int n;           /* members: the number of nodes */
} mpiar__hier_piece_t;

/*
 * The inter-node allreduce of one piece. It reads this rank's share with mpiar__hier_cur(),
 * leaves the full result in OUTPUT[off, off + len), marks the reductions that complete elements
 * final, and appends to @p done the steps after which that OUTPUT range is complete.
 */
typedef int (*mpiar__hier_inter_fn)(mpiar__hier_t *h, const mpiar__hier_piece_t *pc,
                                    mpiar__steps_t *done);

/*
 * Build a two-level schedule: on a flat topology @p flat (the equivalent flat builder); else
 * intra-node reduce-scatter, @p inter on each piece of this rank's block, intra-node allgather.
 */
int mpiar__hier_build(mpiar__schedule_t *s, mpiar__builder_fn flat, mpiar__hier_inter_fn inter);

/* Set up @p h for schedule @p s (hierarchical topology); free it with mpiar__hier_free(). */
int mpiar__hier_init(mpiar__hier_t *h, mpiar__schedule_t *s);
void mpiar__hier_free(mpiar__hier_t *h);

/* Lay out the chunk [base, base + n) of the vector: blocks, pieces, fresh phase-1 state. */
int mpiar__hier_chunk(mpiar__hier_t *h, size_t base, size_t n);

/*
 * Elements per chunk: the whole vector, or with a segment size S (s->segment_elems) chunks of
 * S p elements, whose inter-node messages are about S elements. The chunks are independent
 * two-level allreduces, so the executor overlaps one chunk's inter-node phase with the next
 * one's intra-node phases (the ranks' ports and the node's port work at the same time).
 */
size_t mpiar__hier_chunk_elems(const mpiar__schedule_t *s);

/*
 * Append a send or receive to @p peer. The tag is the message's number on that ordered pair
 * (mod MPIAR__TAG_LIMIT), so builders need no tag plan: both sides append one pair's messages in
 * the same order (phase by phase, piece by piece, step by step), and where a tag repeats the
 * later message also depends on the earlier one, which fixes the matching order on both sides.
 */
long mpiar__hier_send(mpiar__hier_t *h, int peer, mpiar__operand_t src, size_t count,
                      const long *deps, size_t ndeps);
long mpiar__hier_recv(mpiar__hier_t *h, int peer, mpiar__operand_t dst, size_t count,
                      const long *deps, size_t ndeps);

/* Reserve @p elems elements of scratch; @return their offset. */
size_t mpiar__hier_scratch(mpiar__hier_t *h, size_t elems);

/* Append @p step to @p l (negative steps are skipped). @return MPIAR_SUCCESS or NOMEM. */
int mpiar__steps_push(mpiar__steps_t *l, long step);

/* The member of piece @p pc on node @p node: the rank whose block holds the piece there. */
int mpiar__hier_member(const mpiar__hier_t *h, const mpiar__hier_piece_t *pc, int node);

/* Where this rank's share of element @p off of its block is: OUTPUT after phase 1, else own. */
static inline mpiar__operand_t mpiar__hier_cur(const mpiar__hier_t *h, size_t off) {
  return h->own_output ? mpiar__out(off) : mpiar__in(off);
}

/* Step @p j of an inter-node exchange: bytes of each member's message, bytes it then reduces. */
typedef void (*mpiar__port_step_fn)(int j, const void *arg, double *msg, double *red);

/*
 * Cost model of the inter-node phase on a regular topology: each node's k members run the same
 * exchange of @p nsteps steps (@p step), all through the node's one port, starting together.
 * A member's next message is ready once its previous one has arrived (the partner node mirrors
 * this node, so its message arrives when this one's ends) and been reduced; the port sends
 * messages in the order they became ready. Replaying that one port gives the phase's time
 * exactly. @return the time at which the last member has its piece.
 */
double mpiar__hier_port_time(int k, int nsteps, mpiar__port_step_fn step, const void *arg,
                             const mpiar__cost_params_t *c);

/* The number of pieces of a vector of @p count elements on @p topo (hier.h, "Layout"). */
int mpiar__hier_npieces(const mpiar__topology_t *topo, size_t count);

/*
 * The intra-node phases of the regular topology with k ranks per node and n bytes:
 * reduce-scatter (k-1)(alpha + n/k beta + n/k gamma), allgather (k-1)(alpha + n/k beta).
 * For uneven nodes the largest node's (an estimate).
 */
double mpiar__hier_intra_time(const mpiar__topology_t *topo, double bytes,
                              const mpiar__cost_params_t *c);

/* The inter-node phase's time for a chunk of @p bytes shared by @p members per node port. */
typedef double (*mpiar__hier_inter_cost_fn)(const mpiar__topology_t *topo, double bytes,
                                            int members, const mpiar__cost_params_t *c);

/*
 * Cost of a two-level builder on a hierarchical topology: the intra-node phases plus @p inter,
 * per chunk (mpiar__hier_chunk_elems), the chunks overlapping as the header of hier_ring.c says.
 */
double mpiar__hier_cost(const mpiar__topology_t *topo, size_t bytes, size_t elem_size,
                        size_t segment_bytes, const mpiar__cost_params_t *c,
                        mpiar__hier_inter_cost_fn inter);

#endif /* MPIAR_ALGORITHMS_HIER_H */
