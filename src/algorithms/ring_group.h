/*
 * A ring over a group of ranks on one range of the vector: the reduce-scatter and allgather halves
 * of ring.c's unsegmented ring, with explicit neighbours, so that grid builders run one per row,
 * column or dimension (torus_2d.c: rows and columns one after the other; bucket.c: 2 d rings at
 * once on parts of the vector). Each builder calls them in order; the ring records what it sent,
 * received and reduced so that later phases depend on the right steps.
 */
#ifndef MPIAR_ALGORITHMS_RING_GROUP_H
#define MPIAR_ALGORITHMS_RING_GROUP_H

#include <stddef.h>

#include "algorithms/algorithms.h"

typedef struct mpiar__ring_group {
  mpiar__schedule_t *s;
  int size, pos, next, prev; /* group size, this rank's position, neighbours' ranks */
  size_t off, len;           /* the range, cut into `size` blocks */
  int from_input;            /* the rank's data is its own (INPUT, or OUTPUT in place) */
  size_t scratch;            /* two scratch blocks of maxblk elements start here, or (size_t)-1:
                                receive straight into OUTPUT (only with from_input, out of place) */
  size_t maxblk;
  int tag0, ntags;     /* message q carries tag tag0 + q mod ntags */
  long *sendq, *recvq; /* every send / receive, in order (tag reuse) */
  size_t qs, qr;
  long *red, *sent;    /* per block: the last reduction (then the allgather's receive), the send */
  long slot_reader[2]; /* per scratch block: the reduction that last read it */
} mpiar__ring_group_t;

/*
 * A ring of @p size ranks, this rank at position @p pos (its next and previous neighbours the
 * real ranks @p next and @p prev), over elements [off, off + len); its messages use tags
 * tag0 .. tag0 + ntags - 1, where a tag repeats the later send and receive depend on the earlier
 * ones (both sides post them in the same order). from_input 0, no scratch: set them after.
 * @return MPIAR_SUCCESS or MPIAR_ERR_NOMEM (free it with mpiar__ring_group_free either way).
 */
int mpiar__ring_group_init(mpiar__ring_group_t *g, mpiar__schedule_t *s, int size, int pos,
                           int next, int prev, size_t off, size_t len, int tag0, int ntags);
void mpiar__ring_group_free(mpiar__ring_group_t *g);

/* Block b of the ring's range: offset in the vector, and length. */
size_t mpiar__ring_group_off(const mpiar__ring_group_t *g, int b);
size_t mpiar__ring_group_len(const mpiar__ring_group_t *g, int b);

/*
 * Reduce-scatter: afterwards position x holds block x+1 (mod size), finished by g->red[x+1]. Every
 * step that reads the range depends on @p start (the step that made OUTPUT's range ready, or -1).
 * Operand order: the partial from the previous position first, except at position 0 (ring.c).
 * @p final: the last reduction completes the elements over all ranks (mpiar__sched_mark_final).
 */
int mpiar__ring_group_rs(mpiar__ring_group_t *g, long start, int final);

/*
 * Allgather: position x starts with block x+1, whose OUTPUT is final after the steps
 * @p ready[0 .. nready-1]; afterwards OUTPUT holds the whole range. @p done (size entries or
 * NULL) gets the receive of every other block.
 */
int mpiar__ring_group_ag(mpiar__ring_group_t *g, const long *ready, size_t nready, long *done);

#endif /* MPIAR_ALGORITHMS_RING_GROUP_H */
