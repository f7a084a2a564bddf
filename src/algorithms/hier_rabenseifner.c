/*
 * Algorithm: hier_rabenseifner (intra-node reduce-scatter, inter-node Rabenseifner, intra-node
 * allgather)
 *
 * The two-level structure of hier_ring (hier.h, hier.c): a reduce-scatter ring inside each node
 * leaves local rank l with its node's reduction of block l; local rank l of every node then runs
 * Rabenseifner's allreduce (recursive-halving reduce-scatter, recursive-doubling allgather) of
 * block l among the N nodes, all k at once; an allgather ring inside each node spreads the blocks.
 * Uneven nodes: one inter-node allreduce per piece, among the ranks holding it. Non-power-of-two
 * N: the half-vector pre-step of rabenseifner.c among the nodes (pairs of nodes 2i, 2i+1 swap
 * halves, then act as one in the first halving step; the member that hands off waits for the
 * result at the end).
 *
 * Restrictions: none (any topology, any count, in place or not). On a flat topology it builds
 * the flat Rabenseifner. Each element is reduced inside its node along one chain, then by one
 * member of the inter-node halving, whose last reduction (marked final) computes the full value;
 * the rest is copies, so every rank ends with the same bits. Each inter-node reduction puts the
 * lower nodes' partial in operand a.
 *
 * Memory: intra-node phase as hier_ring (two blocks in place); the inter-node phase receives a
 * half of the piece into scratch (ceil(len/2) per piece); out of place with one rank on the node,
 * the first halving step receives straight into OUTPUT as rabenseifner.c does.
 *
 * Cost (two-level model, regular topology of N = 2^L nodes x k ranks, n divisible by k N; B =
 * n/k bytes, b_j = B / 2^(j+1), T(x) = alpha_inter + x beta_inter; any placement):
 *   intra reduce-scatter  (k-1) (alpha + B beta + B gamma)
 *   inter                 the node port passes k messages per step: halving steps of b_0 ..
 *                         b_(L-1) bytes, each followed by its reduction, then doubling steps of
 *                         b_(L-1) .. b_0; while the port is the bottleneck (b_j gamma <=
 *                         (k-1) T(b_(j+1)), and b_(L-1) gamma <= (k-1) T(b_(L-1)))
 *                         2 L k alpha_inter + 2 (N-1)/N n beta_inter, reductions hidden;
 *                         in general the port schedule of mpiar__hier_port_time
 *   intra allgather       (k-1) (alpha + B beta)
 * The simulator's time equals it exactly (tests/sim/test_sim_hier_cost.c); k = 1 gives the flat
 * formula over the inter-node link. Bytes per node link: 2 (N-1)/N n each way, the lower bound,
 * whatever the placement (flat Rabenseifner with block placement sends about 2 (N-1)/N n from
 * every rank of a node: k times more). Non-power-of-two N adds the pre-step (n/2k out, reduced)
 * and the result's return (n/k), modelled as two more port steps: an estimate, as for uneven
 * nodes. Wins over hier_ring at medium sizes and many nodes: 2 L k instead of 2 (N-1) k
 * inter-node messages per node.
 *
 * Segmentation (s->segment_elems = S > 0): chunks of S p elements pipelined across the levels,
 * as for hier_ring (see there); on a flat topology the segment is ignored, as by Rabenseifner.
 *
 * Tags: each message's number on its ordered pair (mpiar__hier_send): within one piece a pair
 * exchanges at most one message per step, and both sides append the steps in the same order.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/hier.h"
#include "base/common.h"

/* One inter-node Rabenseifner: where the data is, and the sends that read OUTPUT. */
typedef struct rab {
  mpiar__hier_t *h;
  const mpiar__hier_piece_t *pc;
  int pof2, rem, L, top;
  size_t split; /* elements of the lower half (the first halving step's cut) */
  size_t tmp;   /* scratch offset of the received half */
  long last;    /* the last reduction; OUTPUT holds this rank's partial from then on */
  int in_out;   /* 1 once OUTPUT holds the partial */
  int v;        /* virtual rank (position among the pof2) */
  int lo, hi;   /* this rank's current range of the pof2 sub-blocks */
  long sends[2 + 64];
  mpiar__operand_t src[2 + 64];
  size_t slen[2 + 64];
  int nsends;
} rab_t;

/* Member of the piece at position @p x of the nodes. */
static int member(const rab_t *r, int x) {
  return mpiar__hier_member(r->h, r->pc, x);
}

/* The position holding half @p upper of virtual rank x after the pre-step (rabenseifner.c). */
static int holder(const rab_t *r, int x, int upper) {
  return x >= r->rem ? x + r->rem : 2 * x + upper;
}

/* The position continuing for virtual rank w after the first halving step. */
static int active(const rab_t *r, int w) {
  return w < r->rem ? holder(r, w, (w & r->top) != 0) : w + r->rem;
}

static size_t sub_off(const rab_t *r, int b) {
  return mpiar__block_off(r->pc->len, r->pof2, b);
}

static mpiar__operand_t cur(const rab_t *r, size_t off) {
  return r->in_out ? mpiar__out(r->pc->off + off) : mpiar__hier_cur(r->h, r->pc->off + off);
}

static long send(rab_t *r, int to, mpiar__operand_t src, size_t len, const long *deps,
                 size_t ndeps) {
  long id = mpiar__hier_send(r->h, member(r, to), src, len, deps, ndeps);
  if (id >= 0) {
    r->sends[r->nsends] = id;
    r->src[r->nsends] = src;
    r->slen[r->nsends++] = len;
  }
  return id;
}

static long reduce_pair(rab_t *r, size_t off, mpiar__operand_t mine, mpiar__operand_t theirs,
                        size_t len, int mine_first, long dep) {
  const long deps[] = {dep, r->h->p1_done};
  const mpiar__operand_t dst = mpiar__out(r->pc->off + off);
  return mine_first ? mpiar__sched_reduce(r->h->s, dst, mine, theirs, len, deps, 2)
                    : mpiar__sched_reduce(r->h->s, dst, theirs, mine, len, deps, 2);
}

/*
 * The pre-step of a pair of positions (2i, 2i+1): swap halves, then either continue as the
 * virtual rank's holder of the half it keeps (returns 0, *waiting 0) or hand the reduced half to
 * the partner pair and wait for the result (*waiting 1, the final receive in *result).
 */
static int pre_step(rab_t *r, int *waiting, long *result) {
  const int me = r->pc->me, mate = me ^ 1, upper = me % 2;
  const size_t len = r->pc->len;
  const size_t koff = upper ? r->split : 0, klen = upper ? len - r->split : r->split;
  const size_t goff = upper ? 0 : r->split, glen = upper ? r->split : len - r->split;
  const long entry[] = {r->h->p1_done};
  int rc = MPIAR_SUCCESS;
  long snd, rcv;
  r->v = me / 2;
  MPIAR__STEP(snd, send(r, mate, cur(r, goff), glen, entry, 1));
  MPIAR__STEP(rcv, mpiar__hier_recv(r->h, member(r, mate), mpiar__scratch(r->tmp), klen, NULL, 0));
  MPIAR__STEP(r->last,
              reduce_pair(r, koff, cur(r, koff), mpiar__scratch(r->tmp), klen, !upper, rcv));
  r->in_out = 1;
  const int w = r->v ^ r->top, keep_upper = (r->v & r->top) != 0;
  if (upper == keep_upper) {
    /* Continue: receive the kept half from the partner pair's holder of it and reduce. */
    const long rdeps[] = {r->last};
    MPIAR__STEP(rcv, mpiar__hier_recv(r->h, member(r, holder(r, w, keep_upper)),
                                      mpiar__scratch(r->tmp), klen, rdeps, 1));
    MPIAR__STEP(r->last, reduce_pair(r, koff, mpiar__out(r->pc->off + koff), mpiar__scratch(r->tmp),
                                     klen, r->v < w, rcv));
    *waiting = 0;
    return MPIAR_SUCCESS;
  }
  /* Hand off the reduced half, then wait for the whole result (it overwrites what both sent). */
  const long sdeps[] = {r->last};
  long snd2;
  MPIAR__STEP(snd2, send(r, holder(r, w, upper), mpiar__out(r->pc->off + koff), klen, sdeps, 1));
  const long wdeps[] = {snd, snd2};
  MPIAR__STEP(*result,
              mpiar__hier_recv(r->h, member(r, mate), mpiar__out(r->pc->off), len, wdeps, 2));
  *waiting = 1;

cleanup:
  return rc;
}

/* Recursive halving over the virtual ranks, from step @p first (1 after a pre-step). */
static int halving(rab_t *r, int first) {
  const size_t base = r->pc->off;
  const int ip_like = r->h->own_output; /* OUTPUT already holds this rank's data */
  int rc = MPIAR_SUCCESS;
  r->lo = 0;
  r->hi = r->pof2;
  for (int j = 0; j < r->L; j++) {
    const int mask = r->top >> j, mid = r->lo + (r->hi - r->lo) / 2;
    const int keep_upper = (r->v & mask) != 0;
    const int klo = keep_upper ? mid : r->lo, khi = keep_upper ? r->hi : mid;
    const int glo = keep_upper ? r->lo : mid, ghi = keep_upper ? mid : r->hi;
    r->lo = klo;
    r->hi = khi;
    if (j < first) {
      continue;
    }
    const int w = r->v ^ mask;
    const int to = j == 0 ? holder(r, w, !keep_upper) : active(r, w);
    const int from = j == 0 ? holder(r, w, keep_upper) : active(r, w);
    const size_t koff = sub_off(r, klo), klen = sub_off(r, khi) - koff;
    const size_t goff = sub_off(r, glo), glen = sub_off(r, ghi) - goff;
    const long deps[] = {r->last, r->h->p1_done};
    long snd, rcv;
    MPIAR__STEP(snd, send(r, to, cur(r, goff), glen, deps, 2));
    (void)snd;
    /* Before the first reduction of an out-of-place call OUTPUT is free: land there. */
    const mpiar__operand_t landing =
        (r->in_out || ip_like) ? mpiar__scratch(r->tmp) : mpiar__out(base + koff);
    MPIAR__STEP(rcv, mpiar__hier_recv(r->h, member(r, from), landing, klen, deps, 1));
    MPIAR__STEP(r->last, reduce_pair(r, koff, cur(r, koff), landing, klen, r->v < w, rcv));
    r->in_out = 1;
  }
  MPIAR__CHECK(mpiar__sched_mark_final(r->h->s, r->last));

cleanup:
  return rc;
}

/* Recursive doubling allgather from this rank's sub-block; every write lands in @p done. */
static int doubling(rab_t *r, mpiar__steps_t *done) {
  const size_t base = r->pc->off;
  int rc = MPIAR_SUCCESS;
  mpiar__steps_t written = {NULL, 0, 0};
  MPIAR__CHECK(mpiar__steps_push(&written, r->last));
  for (int j = 0; j < r->L; j++) {
    const int mask = 1 << j, peer = active(r, r->v ^ mask);
    const int plo = r->lo ^ mask, phi = plo + (r->hi - r->lo);
    const size_t off = sub_off(r, r->lo), len = sub_off(r, r->hi) - off;
    const size_t poff = sub_off(r, plo), plen = sub_off(r, phi) - poff;
    long snd, rcv;
    MPIAR__STEP(snd, mpiar__hier_send(r->h, member(r, peer), mpiar__out(base + off), len, written.v,
                                      written.n));
    (void)snd;
    /* The partner's range was last read by the halving sends that gave it away. */
    long deps[2 + 64];
    size_t nd = 0;
    for (int i = 0; i < r->nsends; i++) {
      const size_t soff = r->src[i].off;
      if (r->src[i].buf == MPIAR__BUF_OUTPUT && r->slen[i] > 0 && plen > 0 &&
          soff < base + poff + plen && base + poff < soff + r->slen[i]) {
        deps[nd++] = r->sends[i];
      }
    }
    MPIAR__STEP(rcv, mpiar__hier_recv(r->h, member(r, peer), mpiar__out(base + poff), plen,
                                      nd ? deps : NULL, nd));
    MPIAR__CHECK(mpiar__steps_push(&written, rcv));
    const int width = r->hi - r->lo;
    r->lo = r->lo < plo ? r->lo : plo;
    r->hi = r->lo + 2 * width;
  }
  /* Return the result to the waiting member of a pair. */
  if (r->pc->me < 2 * r->rem) {
    long id;
    MPIAR__STEP(id, mpiar__hier_send(r->h, member(r, r->pc->me ^ 1), mpiar__out(base), r->pc->len,
                                     written.v, written.n));
  }
  for (size_t i = 0; i < written.n; i++) {
    MPIAR__CHECK(mpiar__steps_push(done, written.v[i]));
  }

cleanup:
  free(written.v);
  return rc;
}

static int inter_rabenseifner(mpiar__hier_t *h, const mpiar__hier_piece_t *pc,
                              mpiar__steps_t *done) {
  rab_t r;
  memset(&r, 0, sizeof r);
  r.h = h;
  r.pc = pc;
  r.pof2 = mpiar__pof2_floor(pc->n);
  r.rem = pc->n - r.pof2;
  r.L = mpiar__log2i(r.pof2);
  r.top = r.pof2 / 2;
  r.split = mpiar__block_off(pc->len, r.pof2, r.top);
  r.tmp = mpiar__hier_scratch(h, r.split > pc->len - r.split ? r.split : pc->len - r.split);
  r.last = -1;
  r.v = pc->me - r.rem;
  int rc = MPIAR_SUCCESS, first = 0;
  if (pc->me < 2 * r.rem) {
    int waiting = 0;
    long result = -1;
    MPIAR__CHECK(pre_step(&r, &waiting, &result));
    if (waiting) {
      return mpiar__steps_push(done, result);
    }
    first = 1;
  }
  MPIAR__CHECK(halving(&r, first));
  MPIAR__CHECK(doubling(&r, done));

cleanup:
  return rc;
}

int mpiar__build_hier_rabenseifner(mpiar__schedule_t *s) {
  return mpiar__hier_build(s, mpiar__build_rabenseifner, inter_rabenseifner);
}

/*
 * Port steps: [pre-step], L halving steps (reducing what arrives), L doubling steps, [return].
 */
typedef struct rab_steps {
  int L, extra; /* extra: 1 for the pre-step and the return of non-powers of two */
  double bytes; /* bytes of the piece */
} rab_steps_t;

static void rab_step(int j, const void *arg, double *msg, double *red) {
  const rab_steps_t *r = arg;
  if (r->extra && j == 0) {
    *msg = *red = r->bytes / 2;
    return;
  }
  j -= r->extra;
  if (j < r->L) {
    *msg = *red = r->bytes / (double)(2 << j);
  } else if (j < 2 * r->L) {
    *msg = r->bytes / (double)(2 << (2 * r->L - 1 - j));
    *red = 0.0;
  } else {
    *msg = r->bytes;
    *red = 0.0;
  }
}

static double inter_rabenseifner_cost(const mpiar__topology_t *topo, double bytes, int members,
                                      const mpiar__cost_params_t *c) {
  const int pof2 = mpiar__pof2_floor(topo->nnodes);
  const rab_steps_t steps = {mpiar__log2i(pof2), pof2 != topo->nnodes, bytes / members};
  return mpiar__hier_port_time(members, 2 * steps.L + 2 * steps.extra, rab_step, &steps, c);
}

double mpiar__cost_hier_rabenseifner(int nranks, size_t bytes, size_t elem_size,
                                     size_t segment_bytes, const mpiar__cost_params_t *c,
                                     const mpiar__topology_t *topo) {
  if (!mpiar__topology_is_hierarchical(topo)) {
    return mpiar__cost_rabenseifner(nranks, bytes, elem_size, segment_bytes, c, topo);
  }
  return mpiar__hier_cost(topo, bytes, elem_size, segment_bytes, c, inter_rabenseifner_cost);
}
