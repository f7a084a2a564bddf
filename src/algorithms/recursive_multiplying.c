/*
 * Algorithm: recursive multiplying (MPICH's "recursive multiplying", a radix-k recursive doubling)
 *
 * Over p' = k^L ranks, in round j (distance d = k^j) the k ranks whose virtual numbers differ only
 * in base-k digit j form a group: each sends its whole partial vector to the k-1 others and
 * receives theirs, then reduces the k partials as a left fold in digit order,
 * ((P_0 op P_1) op P_2) ... op P_{k-1}. Every member folds the same partials in the same order,
 * so the group's members hold the same bits, and after L rounds every rank holds the reduction.
 * k = 2 is recursive doubling. With p <= k one round over all p ranks is the whole algorithm
 * (the radix used is min(k, p)).
 *
 * Restrictions: none. Any count; in place or not. For p not a power of k, p' = the largest power
 * of k <= p: the ranks are cut into p' contiguous groups (group v: ranks
 * mpiar__block_off(p, p', v) .. of floor or ceil(p/p') <= k ranks, the first p mod p' groups one
 * larger). Like MPICH's collapse stage, the other members of a group hand their vectors to its
 * lowest rank, which folds them in rank order and takes part in the main stage as virtual rank
 * v; it returns the result to them at the end. Groups being contiguous, virtual order is rank
 * order, so every reduction holds the lower ranks' partial in operand a: x0 is the leftmost
 * operand of every element's fold, and a NaN payload of rank 0 wins on every rank.
 *
 * Memory: (k-1) n elements of scratch for the partners' partials (the fold's running value
 * stays in OUTPUT, or in the first scratch slot while this rank's own partial, in OUTPUT, is
 * still to be folded). No up-front copy. In place, and after the first round, the first
 * reduction that writes OUTPUT waits for this round's sends that read it.
 *
 * Tags: round j uses tag 1 + j (one message each way per pair and round); the collapse uses tag
 * 0, the return of the result tag L + 1.
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced, n bytes, radix k = min(k, p)):
 *   p = k^L:   L ((k-1)(alpha + n beta) + (k-1) n gamma)
 *   otherwise, with g = ceil(p / p') the largest group, add the collapse and the return:
 *              (g-1)(alpha + n beta) + (g-1) n gamma  +  (g-1)(alpha + n beta)
 * A round's k-1 messages leave one after the other from each rank's send port (member i sends to
 * members i+1, i+2, ... so every step of a round is a permutation with no port contention), and
 * the member whose P_0 comes last folds all k-1 partials after it arrives. The simulator's
 * critical path equals the first formula for p = k^L (tests/sim/test_sim_cost.c); the second is
 * the model's estimate (the collapse and return may overlap with other groups' rounds). Against
 * recursive doubling it trades log2(k) rounds' alphas for k-1 messages per round: it wins where
 * a message's fixed cost outweighs its bytes and the network passes several messages at once,
 * which the one-port model does not credit.
 * Two levels (several nodes, several ranks on some): each round's k-1 messages per rank leave
 * together, so a round costs the longer of its intra-node messages on a rank's own port and its
 * inter-node messages on the busiest node port (mpiar__tally_t: a rank's own port carries its
 * intra-node messages, its node's port every inter-node one of the node's ranks), plus the fold's
 * (k-1) n gamma; the collapse and the return cost the same over their messages (g-1 into each
 * lead, g-1 out). On one node or one rank per node it is the one-level formula on that level's
 * link. The simulator is within the tolerance tests/sim/test_sim_two_level.c states for 2..16
 * nodes of 1..16 ranks.
 */
#include <math.h>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

/* One round of the main stage: exchange with the group of distance d, then fold. */
static int round_exchange(mpiar__schedule_t *s, int k, int v, int d, int pp, int tag, int *in_out,
                          long *last) {
  const int p = s->nranks;
  const size_t n = s->count;
  const int digit = (v / d) % k;
  int rc = MPIAR_SUCCESS;
  long snd[8], rcv[8];
  const mpiar__operand_t own = *in_out ? mpiar__out(0) : mpiar__own(s, 0);
  const int own_in_out = *in_out || s->in_place;
  (void)p;
  for (int t = 1; t < k; t++) {
    const int ito = (digit + t) % k, ifrom = (digit - t + k) % k;
    const int vto = v + (ito - digit) * d, vfrom = v + (ifrom - digit) * d;
    const int to = (int)mpiar__block_off((size_t)s->nranks, pp, vto);
    const int from = (int)mpiar__block_off((size_t)s->nranks, pp, vfrom);
    const long deps[] = {*last};
    MPIAR__STEP(snd[t], mpiar__sched_send(s, to, tag, own, n, deps, 1));
    const size_t slot = (size_t)(ifrom < digit ? ifrom : ifrom - 1);
    MPIAR__STEP(rcv[ifrom], mpiar__sched_recv(s, from, tag, mpiar__scratch(slot * n), n, deps, 1));
  }
  /* The left fold over the parts in digit order. */
  long prev = -1;
  for (int i = 1; i < k; i++) {
    const mpiar__operand_t dst = i >= digit ? mpiar__out(0) : mpiar__scratch(0);
    mpiar__operand_t a;
    if (i == 1) {
      a = digit == 0 ? own : mpiar__scratch(0);
    } else {
      a = i - 1 >= digit ? mpiar__out(0) : mpiar__scratch(0);
    }
    const mpiar__operand_t b =
        i == digit ? own : mpiar__scratch((size_t)(i < digit ? i : i - 1) * n);
    long deps[3 + 8];
    size_t nd = 0;
    deps[nd++] = prev;
    if (i == 1 && digit != 0) {
      deps[nd++] = rcv[0];
    }
    if (i != digit) {
      deps[nd++] = rcv[i];
    }
    /* The first write to OUTPUT waits for the sends reading it (this rank's partial there). */
    if (own_in_out && i == (digit > 1 ? digit : 1)) {
      for (int t = 1; t < k; t++) {
        deps[nd++] = snd[t];
      }
    }
    MPIAR__STEP(prev, mpiar__sched_reduce(s, dst, a, b, n, deps, nd));
  }
  *last = prev;
  *in_out = 1;
cleanup:
  return rc;
}

int mpiar__build_recursive_multiplying_k(mpiar__schedule_t *s, int k) {
  const int p = s->nranks, r = s->rank;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  long id = -1;

  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  mpiar__radix_groups_t g;
  mpiar__radix_groups(p, r, k, &g);
  k = g.k;
  const int pp = g.pp, L = g.L, v = g.v, gsize = g.gsize;
  const int tag_post = L + 1;
  s->scratch_elems = (size_t)(k - 1) * n;
  long last = -1;
  int in_out = 0;
  MPIAR__CHECK(mpiar__radix_collapse(s, &g, tag_post, &done, &last, &in_out));
  if (done) {
    return MPIAR_SUCCESS;
  }
  for (int j = 0, d = 1; j < L; j++, d *= k) {
    MPIAR__CHECK(round_exchange(s, k, v, d, pp, 1 + j, &in_out, &last));
  }
  MPIAR__CHECK(mpiar__sched_mark_final(s, last));
  for (int m = 1; m < gsize; m++) {
    const long deps[] = {last};
    MPIAR__STEP(id, mpiar__sched_send(s, r + m, tag_post, mpiar__out(0), n, deps, 1));
  }

cleanup:
  return rc;
}

double mpiar__cost_recursive_multiplying_k(int k, int nranks, size_t bytes, size_t elem_size,
                                           size_t segment_bytes, const mpiar__cost_params_t *c,
                                           const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  mpiar__cost_params_t l;
  mpiar__radix_groups_t g;
  mpiar__radix_groups(nranks, 0, k, &g);
  const double n = (double)bytes;
  if (mpiar__cost_one_level(topo, c, &l)) {
    l = mpiar__cost_at(&l, n); /* every message carries the whole vector */
    const double msg = l.alpha + n * l.beta;
    return g.L * (g.k - 1) * (msg + n * l.gamma) + mpiar__radix_collapse_cost(nranks, g.pp, n, &l);
  }
  /* Two levels: each round's messages tallied on the ports (see the header). */
  mpiar__tally_t tally;
  if (mpiar__tally_init(&tally, topo) != MPIAR_SUCCESS) {
    return INFINITY;
  }
  mpiar__radix_step_t x = {nranks, g.pp, g.k, 1, 0};
  double t = 0.0;
  for (int j = 0; j < g.L; j++, x.d *= g.k) {
    t += mpiar__radix_round_time(&tally, &x, c, n) + (g.k - 1) * n * c->gamma;
  }
  t += mpiar__radix_collapse_time(&tally, &x, c, n);
  mpiar__tally_free(&tally);
  return t;
}
