/*
 * Algorithm: direct (one-shot reduce-scatter straight to the owners + direct allgather)
 *
 * The vector is cut into p blocks (mpiar__block_off); rank r owns block r. Reduce-scatter: in step
 * k (1 <= k < p) rank r sends its piece of block r+k straight to rank r+k and receives rank r-k's
 * piece of block r, so every step is a permutation of the ranks and no receive port is asked for
 * twice at once; rank r reduces the pieces into block r as they arrive. Allgather: in step k rank
 * r sends its finished block straight to rank r+k and receives block r-k from its owner. This is
 * oneCCL's "direct" allreduce (uxlfoundation/oneCCL, src/coll/algorithms/allreduce/: every rank
 * talks to every other rank once per phase); repro_direct is the same reduce-scatter reduced in
 * the canonical tree, followed by a ring allgather.
 *
 * Restrictions: none. Any p, any count (count < p gives empty blocks, which still travel as
 * zero-length messages so that every rank keeps the same step sequence), in place or not. Each
 * block is reduced by its owner alone and copied to the others, so every rank has the same bits.
 * Order: the pieces of block r arrive from r-1, r-2, ..., 0, p-1, ..., r+1 and are reduced in
 * that order into one running partial; operand `a` of every reduction holds the lower rank of the
 * two (the arriving piece while it comes from a rank below all of the partial's, the partial once
 * it holds rank 0), so x0 is the leftmost operand of every element and rank 0's NaN payload wins
 * on every rank; at p = 2 every element is x0 op x1. For p >= 3 the order of the other ranks
 * depends on the block, so reproducible mode runs repro_direct instead (reproducible.c).
 *
 * Memory: scratch for the p-1 received pieces of block r ((p-1)/p n elements): each piece has its
 * own slot, so the receives are all posted at once. The first reduction reads INPUT and writes
 * OUTPUT, so there is no up-front copy. In place, the allgather's receive of block q waits for the
 * reduce-scatter send that read it.
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced, B = n/p bytes, p | count,
 * T = alpha + B beta, one send and one receive port per rank):
 *   reduce-scatter: the pieces arrive one per T; each reduction waits for its piece and the
 *                   previous reduction: max((p-1) T + B gamma, T + (p-1) B gamma)
 *   allgather:      (p-1) T
 *   total:          (p-1) T + max((p-1) T + B gamma, T + (p-1) B gamma)
 *                   = 2(p-1) alpha + 2 (p-1)/p n beta + B gamma   where B gamma <= T
 * The simulator's critical path equals it for every p (tests/sim). Messages per rank: p-1 out and
 * p-1 in per phase, the ring's 2(p-1) in all; bytes sent per rank 2 (p-1)/p n, the lower bound.
 * Against the ring it saves (p-2) B gamma (the reductions of all but the last piece hide behind
 * the transfers) and every message leaves at once, but a rank keeps p-1 receives posted at once,
 * and on a real network p-1 peers per rank cost connections: small and medium p.
 * Two levels: the formula with that level's alpha and beta on one node or one rank per node;
 * otherwise an estimate by the busiest port: each phase lasts as long as the larger of a rank's
 * k-1 messages inside its node and its node's k (p-k) messages to other nodes through the node's
 * one port (k ranks on the node), all posted at once.
 *
 * Tags: the reduce-scatter's messages carry tag 0 and the allgather's tag 1. Between one ordered
 * pair of ranks there is one message of each phase, so they never repeat.
 */
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

int mpiar__build_direct(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  long id = -1;
  long *rs_send = NULL; /* per step k: the reduce-scatter send to r+k */

  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  rs_send = malloc((size_t)p * sizeof *rs_send);
  if (rs_send == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "direct schedule of %d ranks", p);
  }
  const size_t mylen = mpiar__block_len(n, p, r), myoff = mpiar__block_off(n, p, r);
  s->scratch_elems = (size_t)(p - 1) * mylen;

  /* Reduce-scatter: every piece leaves at once; the receive port takes them in step order. */
  for (int k = 1; k < p; k++) {
    const int to = (r + k) % p;
    MPIAR__STEP(rs_send[k], mpiar__sched_send(s, to, 0, mpiar__own(s, mpiar__block_off(n, p, to)),
                                              mpiar__block_len(n, p, to), NULL, 0));
  }
  long last = -1;        /* the last reduction of block r */
  int has_zero = r == 0; /* whether the running partial holds rank 0 */
  for (int k = 1; k < p; k++) {
    const int from = (r - k + p) % p;
    const mpiar__operand_t slot = mpiar__scratch((size_t)(k - 1) * mylen);
    long rcv;
    MPIAR__STEP(rcv, mpiar__sched_recv(s, from, 0, slot, mylen, NULL, 0));
    /* The partial: this rank's own data before the first reduction, OUTPUT's block after. */
    const mpiar__operand_t acc = k == 1 ? mpiar__own(s, myoff) : mpiar__out(myoff);
    const long deps[] = {rcv, last};
    /*
     * Before the partial holds rank 0 every arriving rank is below all of the partial's (they
     * arrive in descending order from r-1), so the piece goes first; from rank 0 on the partial
     * does.
     */
    if (has_zero) {
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(myoff), acc, slot, mylen, deps,
                                            MPIAR__NDEPS(deps)));
    } else {
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(myoff), slot, acc, mylen, deps,
                                            MPIAR__NDEPS(deps)));
    }
    has_zero = has_zero || from == 0;
  }
  MPIAR__CHECK(mpiar__sched_mark_final(s, last));

  /* Allgather: the finished block straight to every rank, every other block from its owner. */
  for (int k = 1; k < p; k++) {
    const long deps[] = {last};
    MPIAR__STEP(id, mpiar__sched_send(s, (r + k) % p, 1, mpiar__out(myoff), mylen, deps, 1));
  }
  for (int k = 1; k < p; k++) {
    const int from = (r - k + p) % p;
    /* In place, block `from` was read by the reduce-scatter send to its owner: step p-k. */
    const long deps[] = {s->in_place ? rs_send[p - k] : -1};
    MPIAR__STEP(id, mpiar__sched_recv(s, from, 1, mpiar__out(mpiar__block_off(n, p, from)),
                                      mpiar__block_len(n, p, from), deps, 1));
  }

cleanup:
  free(rs_send);
  return rc;
}

/* The one-level formula of the header. */
static double direct_time(int p, double blk, const mpiar__cost_params_t *c) {
  const double t = c->alpha + blk * c->beta, g = blk * c->gamma;
  const double a = (p - 1) * t + g, b = t + (p - 1) * g;
  return (p - 1) * t + (a > b ? a : b);
}

double mpiar__cost_direct(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                          const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const double blk = (double)bytes / nranks;
  mpiar__cost_params_t link;
  if (mpiar__cost_one_level(topo, c, &link)) {
    return direct_time(nranks, blk, &link);
  }
  /*
   * Two levels: every message of a phase is posted at once, so a phase lasts as long as its
   * busiest port: a rank's port, which carries its messages inside its node, or a node's port,
   * which carries every message its ranks send to other nodes. The reductions follow the
   * arrivals as in the one-level formula.
   */
  const mpiar__topology_t *t = topo;
  const double t_in = c->alpha + blk * c->beta, t_out = c->alpha_inter + blk * c->beta_inter;
  double busiest = 0.0;
  for (int nd = 0; nd < t->nnodes; nd++) {
    const double k = t->node_size[nd];
    const double rank_port = (k - 1) * t_in, node_port = k * (nranks - k) * t_out;
    busiest = rank_port > busiest ? rank_port : busiest;
    busiest = node_port > busiest ? node_port : busiest;
  }
  const double first = t_in < t_out ? t_in : t_out, g = blk * c->gamma;
  const double rs_a = busiest + g, rs_b = first + (nranks - 1) * g;
  return busiest + (rs_a > rs_b ? rs_a : rs_b);
}
