/*
 * Algorithm: hier_ring (two-level ring: intra-node reduce-scatter, inter-node rings, intra-node
 * allgather)
 *
 * On N nodes of k ranks: a reduce-scatter ring inside each node leaves local rank l with its
 * node's reduction of block l (n/k elements); local rank l of every node then runs a ring
 * allreduce of block l with the other nodes' local rank l (N members, the block cut into N
 * sub-blocks), all k rings at once, so every rank's share of the node's link is used; an
 * allgather ring inside each node finally spreads the blocks. Uneven nodes: the vector is cut at
 * every node's block boundaries into pieces, and one inter-node ring runs per piece, among the
 * ranks holding it (hier.h). The intra-node phases and the layout live in hier.c; this file is
 * the inter-node ring.
 *
 * Restrictions: none (any topology, any count, in place or not). On a flat topology (NULL, one
 * node, one rank per node) it builds the flat ring. Each element is reduced inside its node along
 * one chain, then between nodes by one chain of the ring, whose last reduction (marked final) is
 * the only place the full value is computed; everything after is copies, so every rank ends
 * with the same bits. Along the inter-node chain the partial is operand a when it holds lower
 * nodes only (nodes are numbered by their lowest rank).
 *
 * Memory: the intra-node phase uses two scratch blocks in place (n/k each); the inter-node ring
 * receives into two scratch sub-blocks per piece (2 n/(kN)) unless this rank's data is still in
 * INPUT (one rank on the node, out of place), where it receives straight into OUTPUT as the ring
 * does.
 *
 * Cost (two-level model, regular topology of N nodes x k ranks, k | n and N | n/k; B = n/k,
 * b = n/(kN) bytes, T = alpha_inter + b beta_inter; any placement of the ranks):
 *   intra reduce-scatter  (k-1) (alpha + B beta + B gamma)
 *   inter rings           (N-1) max(k T, T + b gamma) + (N-1) k T
 *   intra allgather       (k-1) (alpha + B beta)
 * The k rings share the node port, so a step passes k messages through it; while the port is
 * the bottleneck (b gamma <= (k-1) T) the inter-node reductions hide behind it and the middle
 * term is 2(N-1)(k alpha_inter + n/N beta_inter). The simulator's time equals the sum exactly
 * (tests/sim/test_sim_hier_cost.c); k = 1 gives the flat ring's formula over the inter-node link.
 * Bytes per node link: 2 (N-1)/N n each way, the lower bound for allreduce across N nodes,
 * whatever the placement (a flat ring with round-robin placement moves 2(p-1)/p n k).
 * Uneven nodes: the estimate uses the largest node for the intra-node phases and the pieces as
 * the members sharing the port.
 *
 * Segmentation (s->segment_elems = S > 0): the vector is reduced in chunks of S p elements, each
 * a whole two-level allreduce (inter-node messages of about S elements) that shares nothing with
 * the others but the channels, so the node port runs one chunk's rings while the ranks' ports run
 * the next chunk's reduce-scatter and the previous one's allgather. C chunks cost about
 * T(chunk) + (C-1) max(intra(chunk), inter(chunk)), an estimate (within 30 % of the simulator in
 * tests/sim/test_sim_hier_cost.c); it pays where the node link is the bottleneck, and memory and
 * bytes moved stay those of the whole vector. On a flat topology it is the segmented flat ring.
 *
 * Tags: each message's number on its ordered pair of ranks (mpiar__hier_send); the intra-node
 * and inter-node phases never use the same pair, and the rings of several pieces between one
 * pair are appended piece by piece on both sides.
 */
#include <stdlib.h>

#include "algorithms/hier.h"
#include "base/common.h"

static int mod(int a, int m) {
  return ((a % m) + m) % m;
}

/* Reduce-scatter then allgather ring of one piece among the nodes (ring.c, unsegmented). */
static int inter_ring(mpiar__hier_t *h, const mpiar__hier_piece_t *pc, mpiar__steps_t *done) {
  mpiar__schedule_t *s = h->s;
  const int N = pc->n, me = pc->me;
  const size_t len = pc->len, maxsub = mpiar__block_len(len, N, 0);
  const int next = mpiar__hier_member(h, pc, (me + 1) % N);
  const int prev = mpiar__hier_member(h, pc, (me + N - 1) % N);
  const int land_tmp = h->own_output; /* OUTPUT holds this rank's share: receive elsewhere */
  const size_t slots = land_tmp ? mpiar__hier_scratch(h, 2 * maxsub) : 0;
  const long entry = h->p1_done;
  long slot_reader[2] = {-1, -1};
  long *red = malloc(2 * (size_t)N * sizeof *red), *sent = red + N;
  int rc = MPIAR_SUCCESS;
  long id;
  if (red == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "inter-node ring of %d nodes", N);
  }
  for (int b = 0; b < 2 * N; b++) {
    red[b] = -1;
  }
  for (int st = 0; st < N - 1; st++) {
    const int sb = mod(me - st, N), rb = mod(me - st - 1, N);
    const size_t sbo = pc->off + mpiar__block_off(len, N, sb);
    const size_t rbo = pc->off + mpiar__block_off(len, N, rb), rbl = mpiar__block_len(len, N, rb);
    const long sdeps[] = {red[sb], entry};
    MPIAR__STEP(sent[sb],
                mpiar__hier_send(h, next, st == 0 ? mpiar__hier_cur(h, sbo) : mpiar__out(sbo),
                                 mpiar__block_len(len, N, sb), sdeps, 2));
    const mpiar__operand_t dst =
        land_tmp ? mpiar__scratch(slots + (size_t)(st % 2) * maxsub) : mpiar__out(rbo);
    const long rdeps[] = {land_tmp ? slot_reader[st % 2] : -1};
    long rcv;
    MPIAR__STEP(rcv, mpiar__hier_recv(h, prev, dst, rbl, rdeps, 1));
    /* The partial holds nodes rb .. me-1: operand a when none of them wrapped past N-1. */
    const long ddeps[] = {rcv, entry};
    const mpiar__operand_t mine = mpiar__hier_cur(h, rbo);
    MPIAR__STEP(red[rb], rb < me
                             ? mpiar__sched_reduce(s, mpiar__out(rbo), dst, mine, rbl, ddeps, 2)
                             : mpiar__sched_reduce(s, mpiar__out(rbo), mine, dst, rbl, ddeps, 2));
    if (st == N - 2) {
      MPIAR__CHECK(mpiar__sched_mark_final(s, red[rb]));
    }
    slot_reader[st % 2] = red[rb];
  }
  /* Allgather: this rank finished sub-block me+1; red[] becomes "complete in OUTPUT". */
  for (int st = 0; st < N - 1; st++) {
    const int sb = mod(me + 1 - st, N), rb = mod(me - st, N);
    const size_t sbo = pc->off + mpiar__block_off(len, N, sb);
    const size_t rbo = pc->off + mpiar__block_off(len, N, rb);
    const long sdeps[] = {red[sb]};
    MPIAR__STEP(id,
                mpiar__hier_send(h, next, mpiar__out(sbo), mpiar__block_len(len, N, sb), sdeps, 1));
    /*
     * The sub-block overwrites OUTPUT where the reduce-scatter last read it: the send of it (or
     * nothing, for this rank's own sub-block sent from INPUT at step 0).
     */
    const long blocker = (land_tmp || st > 0) ? sent[rb] : -1;
    const long rdeps[] = {blocker, red[rb]};
    MPIAR__STEP(red[rb],
                mpiar__hier_recv(h, prev, mpiar__out(rbo), mpiar__block_len(len, N, rb), rdeps, 2));
  }
  for (int b = 0; b < N; b++) {
    MPIAR__CHECK(mpiar__steps_push(done, red[b]));
  }

cleanup:
  free(red);
  return rc;
}

int mpiar__build_hier_ring(mpiar__schedule_t *s) {
  return mpiar__hier_build(s, mpiar__build_ring, inter_ring);
}

/* Ring steps: N-1 reduce-scatter steps (reducing what arrives), then N-1 allgather steps. */
typedef struct ring_steps {
  int nnodes;
  double sub; /* bytes of a sub-block */
} ring_steps_t;

static void ring_step(int j, const void *arg, double *msg, double *red) {
  const ring_steps_t *r = arg;
  *msg = r->sub;
  *red = j < r->nnodes - 1 ? r->sub : 0.0;
}

static double inter_ring_cost(const mpiar__topology_t *topo, double bytes, int members,
                              const mpiar__cost_params_t *c) {
  const ring_steps_t steps = {topo->nnodes, bytes / members / topo->nnodes};
  return mpiar__hier_port_time(members, 2 * (topo->nnodes - 1), ring_step, &steps, c);
}

double mpiar__cost_hier_ring(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                             const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  if (!mpiar__topology_is_hierarchical(topo)) {
    return mpiar__cost_ring(nranks, bytes, elem_size, segment_bytes, c, topo);
  }
  return mpiar__hier_cost(topo, bytes, elem_size, segment_bytes, c, inter_ring_cost);
}
