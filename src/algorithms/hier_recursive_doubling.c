/*
 * Algorithm: hier_recursive_doubling (small messages: reduce to a leader per node, recursive
 * doubling among the leaders, broadcast inside each node)
 *
 * Local rank 0 of each node is its leader. A binomial tree inside the node reduces the vector to
 * the leader (local rank l receives from l + 1, l + 2, l + 4, ... below the node size, then sends
 * its partial to l - lowbit(l)); the leaders run recursive doubling among the N nodes (with the
 * fold of recursive_doubling.c for non-powers of two); a binomial tree inside the node, largest
 * subtree first, broadcasts the result. Only leaders cross node links: log2(N) messages of n
 * bytes per node, where the bandwidth-optimal variants pay 2 log2(N) k or 2 (N-1) k message
 * latencies on the node port.
 *
 * Restrictions: none (any topology, any count, in place or not); on a flat topology it builds
 * the flat recursive doubling. Inside a node every partial covers a contiguous range of local
 * ranks and the lower range is operand a; between leaders both partners compute (lower nodes'
 * partial) op (higher nodes' partial), as recursive_doubling.c does, so every leader holds the
 * same bits and the broadcast copies them: every rank ends with the same bits. The leaders' last
 * exchange is the final reduction (MPIAR_AVG divides there, once per element per leader).
 *
 * Memory: one scratch vector (n elements) for the received partials.
 *
 * Cost (two-level model, regular topology of N = 2^L nodes x k = 2^d ranks; any placement):
 *   d (alpha + n beta + n gamma) + L (alpha_inter + n beta_inter + n gamma) + d (alpha + n beta)
 * The simulator's time equals it exactly for those (tests/sim/test_sim_hier_cost.c). Otherwise d is
 * ceil(log2) of the largest node and the leaders pay the fold of a non-power-of-two N,
 * (alpha_inter + n beta_inter + n gamma) + (alpha_inter + n beta_inter): an estimate (a tree over
 * a node that is not a power of two overlaps some transfers with reductions).
 *
 * Tags: each message's number on its ordered pair (mpiar__hier_send); intra-node pairs and
 * leader pairs are distinct, and a pair exchanges at most one message per phase step.
 */
#include <string.h>

#include "algorithms/hier.h"
#include "base/common.h"

typedef struct rd {
  mpiar__hier_t *h;
  size_t tmp;       /* scratch offset of the received vector */
  long last;        /* the step that last wrote OUTPUT */
  int in_out;       /* 1 once OUTPUT holds this rank's partial */
  long up;          /* non-leaders: the send of the partial to the parent */
  int up_reads_out; /* that send read OUTPUT */
} rd_t;

static mpiar__operand_t cur(const rd_t *r) {
  return r->in_out ? mpiar__out(0) : mpiar__own(r->h->s, 0);
}

static int node_rank(const rd_t *r, int local) {
  return mpiar__topology_rank(r->h->t, r->h->node, local);
}

static int leader(const rd_t *r, int node) {
  return mpiar__topology_rank(r->h->t, node, 0);
}

/* Reduce a received vector with the partial: OUTPUT = (lower first) op (higher). */
static long reduce(rd_t *r, int mine_first, long dep1, long dep2) {
  mpiar__schedule_t *s = r->h->s;
  const long deps[] = {dep1, dep2};
  const mpiar__operand_t tmp = mpiar__scratch(r->tmp);
  long id = mine_first ? mpiar__sched_reduce(s, mpiar__out(0), cur(r), tmp, s->count, deps, 2)
                       : mpiar__sched_reduce(s, mpiar__out(0), tmp, cur(r), s->count, deps, 2);
  if (id >= 0) {
    r->last = id;
    r->in_out = 1;
  }
  return id;
}

/* Binomial reduction to local rank 0. */
static int reduce_to_leader(rd_t *r) {
  mpiar__schedule_t *s = r->h->s;
  const int k = r->h->k, l = r->h->local;
  int rc = MPIAR_SUCCESS;
  long rcv, id;
  for (int mask = 1; mask < k; mask <<= 1) {
    if (l & mask) {
      const long deps[] = {r->last};
      r->up_reads_out = r->in_out || s->in_place;
      MPIAR__STEP(r->up, mpiar__hier_send(r->h, node_rank(r, l - mask), cur(r), s->count, deps, 1));
      break;
    }
    if (l + mask < k) {
      /* The scratch vector is free once the previous reduction has read it. */
      const long deps[] = {r->last};
      MPIAR__STEP(rcv, mpiar__hier_recv(r->h, node_rank(r, l + mask), mpiar__scratch(r->tmp),
                                        s->count, deps, 1));
      MPIAR__STEP(id, reduce(r, 1, rcv, -1));
    }
  }

cleanup:
  return rc;
}

/* Recursive doubling among the leaders; *have: the step after which OUTPUT holds the result. */
static int leaders_exchange(rd_t *r, long *have) {
  mpiar__schedule_t *s = r->h->s;
  const int N = r->h->t->nnodes, me = r->h->node;
  const int pof2 = mpiar__pof2_floor(N), rem = N - pof2, steps = mpiar__log2i(pof2);
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS, v;
  long snd, rcv, id;
  if (me < 2 * rem && me % 2 == 0) {
    /* Fold: hand the node's partial to the next leader and wait for the result. */
    const long deps[] = {r->last};
    MPIAR__STEP(snd, mpiar__hier_send(r->h, leader(r, me + 1), cur(r), n, deps, 1));
    const long rdeps[] = {(r->in_out || s->in_place) ? snd : -1};
    MPIAR__STEP(*have, mpiar__hier_recv(r->h, leader(r, me + 1), mpiar__out(0), n, rdeps, 1));
    return MPIAR_SUCCESS;
  }
  if (me < 2 * rem) {
    const long deps[] = {r->last};
    MPIAR__STEP(rcv, mpiar__hier_recv(r->h, leader(r, me - 1), mpiar__scratch(r->tmp), n, deps, 1));
    MPIAR__STEP(id, reduce(r, 0, rcv, -1));
    v = me / 2;
  } else {
    v = me - rem;
  }
  for (int j = 0; j < steps; j++) {
    const int w = v ^ (1 << j), peer = leader(r, w < rem ? 2 * w + 1 : w + rem);
    const long deps[] = {r->last};
    MPIAR__STEP(snd, mpiar__hier_send(r->h, peer, cur(r), n, deps, 1));
    MPIAR__STEP(rcv, mpiar__hier_recv(r->h, peer, mpiar__scratch(r->tmp), n, deps, 1));
    /* The reduction overwrites OUTPUT, which the send may be reading. */
    MPIAR__STEP(id, reduce(r, v < w, rcv, (r->in_out || s->in_place) ? snd : -1));
  }
  MPIAR__CHECK(mpiar__sched_mark_final(s, r->last));
  *have = r->last;
  if (me < 2 * rem) {
    const long deps[] = {r->last};
    MPIAR__STEP(id, mpiar__hier_send(r->h, leader(r, me - 1), mpiar__out(0), n, deps, 1));
  }

cleanup:
  return rc;
}

/* Binomial broadcast from local rank 0, largest subtree first; the leader starts after @p have. */
static int bcast_from_leader(rd_t *r, long have) {
  mpiar__schedule_t *s = r->h->s;
  const int k = r->h->k, l = r->h->local;
  int rc = MPIAR_SUCCESS;
  long id, got = have;
  int m = 1;
  if (l > 0) {
    /* The result overwrites OUTPUT, which the send of the partial may have read. */
    const int low = l & -l;
    const long deps[] = {r->up_reads_out ? r->up : -1};
    MPIAR__STEP(got,
                mpiar__hier_recv(r->h, node_rank(r, l - low), mpiar__out(0), s->count, deps, 1));
    m = low / 2;
  } else {
    while (2 * m < k) {
      m *= 2;
    }
  }
  for (; m >= 1; m /= 2) {
    if (l + m < k) {
      const long deps[] = {got};
      MPIAR__STEP(id,
                  mpiar__hier_send(r->h, node_rank(r, l + m), mpiar__out(0), s->count, deps, 1));
    }
  }

cleanup:
  return rc;
}

int mpiar__build_hier_recursive_doubling(mpiar__schedule_t *s) {
  if (!mpiar__topology_is_hierarchical(s->topo)) {
    return mpiar__build_recursive_doubling(s);
  }
  if (s->topo->nranks != s->nranks) {
    return mpiar__error(MPIAR_ERR_INTERNAL, "%s: topology of %d ranks for %d ranks", s->algorithm,
                        s->topo->nranks, s->nranks);
  }
  int rc = MPIAR_SUCCESS, done = 0;
  mpiar__hier_t h;
  rd_t r = {&h, 0, -1, 0, -1, 0};
  long have = -1;
  memset(&h, 0, sizeof h);
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  MPIAR__CHECK(mpiar__hier_init(&h, s));
  r.tmp = mpiar__hier_scratch(&h, s->count);
  MPIAR__CHECK(reduce_to_leader(&r));
  if (h.local == 0) {
    MPIAR__CHECK(leaders_exchange(&r, &have));
  }
  MPIAR__CHECK(bcast_from_leader(&r, have));

cleanup:
  mpiar__hier_free(&h);
  return rc;
}

static int ceil_log2(int x) {
  int l = 0;
  while ((1 << l) < x) {
    l++;
  }
  return l;
}

double mpiar__cost_hier_recursive_doubling(int nranks, size_t bytes, size_t elem_size,
                                           size_t segment_bytes, const mpiar__cost_params_t *c,
                                           const mpiar__topology_t *topo) {
  if (!mpiar__topology_is_hierarchical(topo)) {
    return mpiar__cost_recursive_doubling(nranks, bytes, elem_size, segment_bytes, c, topo);
  }
  if (bytes == 0) {
    return 0.0;
  }
  const double n = (double)bytes, d = ceil_log2(topo->max_node_size);
  const mpiar__cost_params_t leaders = {c->alpha_inter, c->beta_inter, c->gamma, 0, 0, 0, 0};
  return d * (c->alpha + n * c->beta + n * c->gamma) +
         mpiar__cost_recursive_doubling(topo->nnodes, bytes, elem_size, 0, &leaders, NULL) +
         d * (c->alpha + n * c->beta);
}
