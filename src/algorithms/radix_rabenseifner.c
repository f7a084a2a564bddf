/*
 * Algorithm: radix-k Rabenseifner (radix-k reduce-scatter + radix-k allgather; MPICH's
 * "k_reduce_scatter_allgather")
 *
 * Over p' = k^L virtual ranks and a vector cut into p' blocks: in reduce-scatter round j
 * (distance d = k^(L-1-j), the most significant base-k digit first) the k ranks that differ only
 * in digit L-1-j hold the same range of k^(L-j) blocks; member i keeps sub-range i of its k equal
 * sub-ranges, sends sub-range t to member t (k-1 messages) and folds the k partials of its
 * sub-range in digit order, ((P_0 op P_1) op ...) op P_{k-1}. After L rounds virtual rank v holds
 * the reduction of block v. The allgather then runs the rounds in reverse (distance 1 first):
 * each member sends its range to the k-1 others, and the range grows k-fold. k = 2 is
 * Rabenseifner's algorithm with the fold of rabenseifner_fold. With p <= k one round over all p
 * ranks each way is the whole algorithm (the radix used is min(k, p)).
 *
 * Restrictions: none. Any count (blocks may be empty), in place or not. For p not a power of k,
 * as recursive_multiplying.c: p' contiguous groups of ceil or floor(p/p') <= k ranks, whose other
 * members hand their whole vectors to the group's lowest rank, which folds them in rank order,
 * takes part as virtual rank v and returns the result at the end.
 * Each block is reduced by one rank and copied to the others, so every rank has the same bits.
 * The partial holding rank 0 is always P_0 (rank 0's digits are all 0), the leftmost operand of
 * every fold: a NaN payload of rank 0 wins on every rank.
 *
 * Memory: scratch for the k-1 received sub-ranges of the first round, (k-1) ceil(n/k) elements
 * (at least (g-1) n for a collapsing group's leader). No up-front copy; the folds write only
 * the kept sub-range, which no send of the round reads, so they never wait for a send. Each
 * allgather receive waits for the sends that read the range it overwrites.
 *
 * Tags: reduce-scatter round j uses tag 1 + j, allgather round j tag 1 + L + j, the collapse
 * tag 0 and the return of the result tag 2L + 1.
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced, n bytes, p | count, radix
 * k = min(k, p)):
 *   p = k^L:   2 L (k-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
 *   otherwise, with p' and g = ceil(p/p') as in recursive_multiplying, the formula over p' plus
 *              (g-1)(alpha + n beta) + (g-1) n gamma  +  (g-1)(alpha + n beta)
 * Each round sends k-1 pieces one after the other from each rank (member i to i+1, i+2, ...,
 * a permutation per step). For p = k^L the simulator's critical path equals the first formula
 * where latency dominates; where bandwidth does, the members of a group finish their folds at
 * different times (the one whose P_0 arrives last folds everything after it), which skews the
 * next round, and the formula is a lower bound within 30 % (tests/sim/test_sim_cost.c). The
 * second formula is the model's estimate. Bytes sent per rank:
 * 2 (p-1)/p n, the lower bound, in 2 L (k-1) messages: against Rabenseifner it trades
 * 2 log2(p) messages for 2 (k-1) log_k(p), which pays where a network passes several messages at
 * once (not credited by the one-port model).
 * Two levels (several nodes, several ranks on some): every round as recursive_multiplying.c
 * costs it, the longer of its intra-node messages on a rank's own port and its inter-node
 * messages on the busiest node port (mpiar__radix_round_time), with this round's piece,
 * n d / p' bytes at distance d, plus the fold's (k-1) n d / p' gamma in the reduce-scatter;
 * then the collapse and return. On one node or one rank per node the one-level formula on that
 * level's link. Within the tolerance tests/sim/test_sim_two_level.c states for 2..16 nodes of
 * 1..16 ranks.
 */
#include <math.h>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

#define MAX_SENDS (8 * 32)

typedef struct state {
  mpiar__schedule_t *s;
  int k, pp, L, v;
  size_t slot; /* scratch elements per received sub-range */
  int in_out;  /* 1 once OUTPUT holds this rank's partial */
  long last;   /* the last fold */
  int nsends;  /* the reduce-scatter's sends that read OUTPUT: step, range */
  long sends[MAX_SENDS];
  size_t soff[MAX_SENDS], slen[MAX_SENDS];
} state_t;

static int rank_of(const state_t *st, int v) {
  return (int)mpiar__block_off((size_t)st->s->nranks, st->pp, v);
}

/* Elements of blocks [lo, hi) of p' blocks. */
static size_t off_of(const state_t *st, int lo) {
  return mpiar__block_off(st->s->count, st->pp, lo);
}
static size_t len_of(const state_t *st, int lo, int hi) {
  return off_of(st, hi) - off_of(st, lo);
}

/* Reduce-scatter round j over blocks [lo, lo + k w): keep sub-range `digit`, fold it. */
static int scatter_round(state_t *st, int j, int d, int lo, int w) {
  mpiar__schedule_t *s = st->s;
  const int k = st->k, digit = (st->v / d) % k;
  const int klo = lo + digit * w;
  const size_t koff = off_of(st, klo), klen = len_of(st, klo, klo + w);
  const mpiar__operand_t own = st->in_out ? mpiar__out(koff) : mpiar__own(s, koff);
  int rc = MPIAR_SUCCESS;
  long rcv[8];
  for (int t = 1; t < k; t++) {
    const int ito = (digit + t) % k, ifrom = (digit - t + k) % k;
    const int to = rank_of(st, st->v + (ito - digit) * d);
    const int from = rank_of(st, st->v + (ifrom - digit) * d);
    const int glo = lo + ito * w;
    const size_t goff = off_of(st, glo), glen = len_of(st, glo, glo + w);
    const mpiar__operand_t src = st->in_out ? mpiar__out(goff) : mpiar__own(s, goff);
    const long deps[] = {st->last};
    long snd;
    MPIAR__STEP(snd, mpiar__sched_send(s, to, 1 + j, src, glen, deps, 1));
    if (src.buf == MPIAR__BUF_OUTPUT && glen > 0) {
      if (st->nsends == MAX_SENDS) {
        MPIAR__FAIL(MPIAR_ERR_INTERNAL, "radix_rabenseifner: more than %d sends", MAX_SENDS);
      }
      st->sends[st->nsends] = snd;
      st->soff[st->nsends] = goff;
      st->slen[st->nsends++] = glen;
    }
    const size_t slot = (size_t)(ifrom < digit ? ifrom : ifrom - 1);
    MPIAR__STEP(rcv[ifrom],
                mpiar__sched_recv(s, from, 1 + j, mpiar__scratch(slot * st->slot), klen, deps, 1));
  }
  /* The left fold in digit order; see recursive_multiplying.c for where the running value is. */
  long prev = -1;
  for (int i = 1; i < k; i++) {
    const mpiar__operand_t dst = i >= digit ? mpiar__out(koff) : mpiar__scratch(0);
    mpiar__operand_t a;
    if (i == 1) {
      a = digit == 0 ? own : mpiar__scratch(0);
    } else {
      a = i - 1 >= digit ? mpiar__out(koff) : mpiar__scratch(0);
    }
    const mpiar__operand_t b =
        i == digit ? own : mpiar__scratch((size_t)(i < digit ? i : i - 1) * st->slot);
    long deps[3];
    size_t nd = 0;
    deps[nd++] = prev;
    if (i == 1 && digit != 0) {
      deps[nd++] = rcv[0];
    }
    if (i != digit) {
      deps[nd++] = rcv[i];
    }
    MPIAR__STEP(prev, mpiar__sched_reduce(s, dst, a, b, klen, deps, nd));
  }
  st->last = prev;
  st->in_out = 1;
cleanup:
  return rc;
}

/*
 * Allgather round j over blocks [lo, lo + k w): send sub-range `digit` to the others, receive
 * theirs. @p written lists the steps that wrote OUTPUT so far (the sends wait for them).
 */
static int gather_round(state_t *st, int j, int d, int lo, int w, long *written, int *nwritten) {
  mpiar__schedule_t *s = st->s;
  const int k = st->k, digit = (st->v / d) % k;
  const int klo = lo + digit * w;
  const size_t koff = off_of(st, klo), klen = len_of(st, klo, klo + w);
  const int nw = *nwritten;
  int rc = MPIAR_SUCCESS;
  for (int t = 1; t < k; t++) {
    const int ito = (digit + t) % k, ifrom = (digit - t + k) % k;
    const int to = rank_of(st, st->v + (ito - digit) * d);
    const int from = rank_of(st, st->v + (ifrom - digit) * d);
    long snd, rcv;
    MPIAR__STEP(
        snd, mpiar__sched_send(s, to, 1 + st->L + j, mpiar__out(koff), klen, written, (size_t)nw));
    (void)snd;
    /* The range lands where this rank's reduce-scatter sends read it: wait for those. */
    const int plo = lo + ifrom * w;
    const size_t poff = off_of(st, plo), plen = len_of(st, plo, plo + w);
    long deps[MAX_SENDS];
    size_t nd = 0;
    for (int i = 0; i < st->nsends; i++) {
      if (plen > 0 && st->soff[i] < poff + plen && poff < st->soff[i] + st->slen[i]) {
        deps[nd++] = st->sends[i];
      }
    }
    MPIAR__STEP(rcv, mpiar__sched_recv(s, from, 1 + st->L + j, mpiar__out(poff), plen,
                                       nd ? deps : NULL, nd));
    written[(*nwritten)++] = rcv;
  }
cleanup:
  return rc;
}

int mpiar__build_radix_rabenseifner_k(mpiar__schedule_t *s, int k) {
  const int p = s->nranks, r = s->rank;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  long id = -1;
  state_t st;

  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  mpiar__radix_groups_t g;
  mpiar__radix_groups(p, r, k, &g);
  st.s = s;
  st.k = k = g.k;
  st.pp = g.pp;
  st.L = g.L;
  st.v = g.v;
  st.in_out = 0;
  st.last = -1;
  st.nsends = 0;
  const int pp = st.pp, L = st.L, v = st.v, gsize = g.gsize, tag_post = 2 * L + 1;
  st.slot = (size_t)(pp / k) * ((n + (size_t)pp - 1) / (size_t)pp);
  const size_t fold_scratch = (size_t)(gsize - 1) * n, rs_scratch = (size_t)(k - 1) * st.slot;
  s->scratch_elems = fold_scratch > rs_scratch ? fold_scratch : rs_scratch;
  MPIAR__CHECK(mpiar__radix_collapse(s, &g, tag_post, &done, &st.last, &st.in_out));
  if (done) {
    return MPIAR_SUCCESS;
  }
  /* Reduce-scatter: the range narrows from all p' blocks to block v. */
  int lo = 0, w = pp;
  for (int j = 0, d = pp / k; j < L; j++, d /= k) {
    w /= k;
    MPIAR__CHECK(scatter_round(&st, j, d, lo, w));
    lo += ((v / d) % k) * w;
  }
  MPIAR__CHECK(mpiar__sched_mark_final(s, st.last));
  /* Allgather: the range grows back, distance 1 first. */
  long written[1 + 8 * 32];
  int nwritten = 0;
  written[nwritten++] = st.last;
  for (int j = 0, d = 1; j < L; j++, d *= k) {
    lo -= ((v / d) % k) * w;
    MPIAR__CHECK(gather_round(&st, j, d, lo, w, written, &nwritten));
    w *= k;
  }
  for (int m = 1; m < gsize; m++) {
    MPIAR__STEP(id,
                mpiar__sched_send(s, r + m, tag_post, mpiar__out(0), n, written, (size_t)nwritten));
  }

cleanup:
  return rc;
}

double mpiar__cost_radix_rabenseifner_k(int k, int nranks, size_t bytes, size_t elem_size,
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
  const double n = (double)bytes, q = g.pp;
  if (mpiar__cost_one_level(topo, c, &l)) {
    return 2 * g.L * (g.k - 1) * l.alpha + 2 * (q - 1) / q * n * l.beta +
           (q - 1) / q * n * l.gamma + mpiar__radix_collapse_cost(nranks, g.pp, n, &l);
  }
  /* Two levels: each round's messages tallied on the ports (see the header). */
  mpiar__tally_t tally;
  if (mpiar__tally_init(&tally, topo) != MPIAR_SUCCESS) {
    return INFINITY;
  }
  mpiar__radix_step_t x = {nranks, g.pp, g.k, 1, 0};
  double t = 0.0;
  for (x.d = g.pp / g.k; x.d >= 1; x.d /= g.k) {
    const double piece = n * x.d / q;
    t += mpiar__radix_round_time(&tally, &x, c, piece) + (g.k - 1) * piece * c->gamma;
  }
  for (x.d = 1; x.d < g.pp; x.d *= g.k) {
    t += mpiar__radix_round_time(&tally, &x, c, n * x.d / q);
  }
  t += mpiar__radix_collapse_time(&tally, &x, c, n);
  mpiar__tally_free(&tally);
  return t;
}
