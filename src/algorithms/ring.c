/*
 * Algorithm: ring (reduce-scatter ring followed by allgather ring)
 *
 * The vector is cut into p blocks (mpiar__block_off). In reduce-scatter step k (0 <= k < p-1)
 * rank r sends block (r-k) mod p to rank r+1 and receives block (r-k-1) mod p from rank r-1,
 * which it reduces with its own contribution; after p-1 steps rank r holds the full reduction of
 * block (r+1) mod p. The allgather ring then forwards the finished blocks for p-1 more steps.
 *
 * Restrictions: none. Any p, any count (count < p gives empty blocks, which still travel as
 * zero-length messages so that both sides agree on the message sequence), in place or not.
 * Each element is reduced along exactly one chain and then copied around the ring, so every rank
 * ends with the same bits. Operand `a` of every reduction holds the lowest rank of the two: the
 * partial received from rank r-1, except on rank 0 before the chain has passed it (the partial
 * then holds ranks above 0 only). So x0 is the leftmost operand of every element's chain, and a
 * NaN payload of rank 0 wins on every rank; at p = 2 every element is reduced as x0 op x1. For
 * p >= 3 the order of the other ranks in a chain depends on its block, i.e. on the element's
 * position in the vector.
 *
 * Memory: not in place, the received partial lands directly in OUTPUT and is reduced with INPUT,
 * so no scratch and no up-front copy. In place, receives land in two scratch blocks used in turn
 * (block k%2), so that the receive of step k+1 can be posted while step k reduces.
 *
 * Segmentation (s->segment_elems > 0): every block travels as segments of at most
 * segment_elems elements; the send of segment g in step k+1 depends only on the reduction of
 * segment g in step k, so segment g+1 is on the wire while segment g is reduced.
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced, B = n/p bytes per block,
 * p | count, one send and one receive port per rank):
 *   unsegmented:  2(p-1) alpha + 2(p-1) B beta + (p-1) B gamma
 *                 = 2(p-1) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
 *   segmented, m = B/S >= 2 segments of S bytes with S gamma <= alpha + S beta (the port, not the
 *   reduction, is the bottleneck): 2(p-1) (m alpha + B beta) -- the reductions hide entirely
 *   behind the transfers of later segments.
 * The simulator's critical path equals these for every p (tests/sim). Bytes sent per rank:
 * 2 (p-1)/p n, the lower bound for allreduce.
 * Two levels (mpiar__cost_params_t): on one node the formulas hold with alpha and beta, with one
 * rank per node with alpha_inter and beta_inter. Otherwise a step lasts as long as the slower of
 * an intra-node message and the busiest node port, which passes one message per node and step
 * with block placement (2 (p-1)/p n per node link, near the bound 2 (N-1)/N n) and k with
 * round-robin placement (k times that); the cost function puts that link into the formulas, an
 * estimate within 40 % of the simulator on the tested topologies (tests/sim/test_sim_hier_cost.c).
 *
 * Tags: the q-th message from r to r+1 carries tag q mod MPIAR__TAG_LIMIT. Where a tag repeats
 * (more than MPIAR__TAG_LIMIT messages), the later send and receive depend on the earlier ones
 * with that tag, so both sides post them in the same order.
 */
#include <math.h>
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

/* Segments of a block of `len` elements: at least one, so an empty block still sends. */
static size_t nsegs(size_t len, size_t seg) {
  if (seg == 0 || len <= seg) {
    return 1;
  }
  return (len + seg - 1) / seg;
}

static size_t seg_off(size_t g, size_t seg) {
  return seg ? g * seg : 0;
}

static size_t seg_len(size_t len, size_t g, size_t seg) {
  if (seg == 0) {
    return len;
  }
  size_t off = g * seg;
  return (len - off < seg) ? len - off : seg;
}

int mpiar__build_ring(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t n = s->count, seg = s->segment_elems;
  const int ip = s->in_place;
  int rc = MPIAR_SUCCESS;
  long *sendq = NULL, *recvq = NULL; /* step of the q-th send / receive, for tag reuse */
  long *red = NULL, *sent = NULL;    /* per (block, segment): last reduce, last RS send */
  long *slot_reader = NULL;          /* per (scratch slot, segment): last reduce reading it */
  long id = -1;

  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  const size_t maxblk = mpiar__block_len(n, p, 0);
  const size_t maxseg = nsegs(maxblk, seg);
  const size_t nmsg = 2 * (size_t)(p - 1) * maxseg;
  sendq = malloc(nmsg * sizeof *sendq);
  recvq = malloc(nmsg * sizeof *recvq);
  red = malloc((size_t)p * maxseg * sizeof *red);
  sent = malloc((size_t)p * maxseg * sizeof *sent);
  slot_reader = malloc(2 * maxseg * sizeof *slot_reader);
  if (!sendq || !recvq || !red || !sent || !slot_reader) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "ring schedule of %zu messages", nmsg);
  }
  for (size_t i = 0; i < (size_t)p * maxseg; i++) {
    red[i] = sent[i] = -1;
  }
  for (size_t i = 0; i < 2 * maxseg; i++) {
    slot_reader[i] = -1;
  }
  if (ip) {
    s->scratch_elems = 2 * maxblk;
  }
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  size_t qs = 0, qr = 0;

  /* Reduce-scatter. */
  for (int k = 0; k < p - 1; k++) {
    const int sb = ((r - k) % p + p) % p;
    const int rb = ((r - k - 1) % p + p) % p;
    const size_t sbo = mpiar__block_off(n, p, sb), sbl = mpiar__block_len(n, p, sb);
    const size_t rbo = mpiar__block_off(n, p, rb), rbl = mpiar__block_len(n, p, rb);
    for (size_t g = 0; g < nsegs(sbl, seg); g++) {
      const size_t off = sbo + seg_off(g, seg), len = seg_len(sbl, g, seg);
      const mpiar__operand_t src = k == 0 ? mpiar__own(s, off) : mpiar__out(off);
      const long deps[] = {red[(size_t)sb * maxseg + g],
                           qs >= MPIAR__TAG_LIMIT ? sendq[qs - MPIAR__TAG_LIMIT] : -1};
      MPIAR__STEP(id, mpiar__sched_send(s, next, (int)(qs % MPIAR__TAG_LIMIT), src, len, deps,
                                        MPIAR__NDEPS(deps)));
      sendq[qs++] = id;
      sent[(size_t)sb * maxseg + g] = id;
    }
    for (size_t g = 0; g < nsegs(rbl, seg); g++) {
      const size_t off = rbo + seg_off(g, seg), len = seg_len(rbl, g, seg);
      const size_t slot = (size_t)(k % 2) * maxseg + g;
      const mpiar__operand_t dst =
          ip ? mpiar__scratch((size_t)(k % 2) * maxblk + seg_off(g, seg)) : mpiar__out(off);
      const long rdeps[] = {ip ? slot_reader[slot] : -1,
                            qr >= MPIAR__TAG_LIMIT ? recvq[qr - MPIAR__TAG_LIMIT] : -1};
      long rid;
      MPIAR__STEP(rid, mpiar__sched_recv(s, prev, (int)(qr % MPIAR__TAG_LIMIT), dst, len, rdeps,
                                         MPIAR__NDEPS(rdeps)));
      recvq[qr++] = rid;
      /*
       * The partial from r-1 holds ranks rb .. r-1 of the chain (cyclically). Its lowest rank is
       * rb without a wrap (rb < r) and 0 after one, except on rank 0 itself, where the chain
       * wraps: there the partial holds ranks above 0 only and this rank's own data goes first.
       * Everywhere else the partial does. At p = 2 that makes every element x0 op x1 whatever
       * its block, as in the other algorithms.
       */
      const long ddeps[] = {rid};
      const mpiar__operand_t mine = mpiar__own(s, off);
      MPIAR__STEP(id, r > 0 ? mpiar__sched_reduce(s, mpiar__out(off), dst, mine, len, ddeps, 1)
                            : mpiar__sched_reduce(s, mpiar__out(off), mine, dst, len, ddeps, 1));
      red[(size_t)rb * maxseg + g] = id;
      if (k == p - 2) {
        rc = mpiar__sched_mark_final(s, id); /* the block's last contribution */
        if (rc != MPIAR_SUCCESS) {
          goto cleanup;
        }
      }
      if (ip) {
        slot_reader[slot] = id;
      }
    }
  }

  /* Allgather: rank r starts with block r+1, finished by its last reduction. */
  long *ag = red; /* per (block, segment): the step that made OUTPUT final */
  for (int k = 0; k < p - 1; k++) {
    const int sb = ((r + 1 - k) % p + p) % p;
    const int rb = ((r - k) % p + p) % p;
    const size_t sbo = mpiar__block_off(n, p, sb), sbl = mpiar__block_len(n, p, sb);
    const size_t rbo = mpiar__block_off(n, p, rb), rbl = mpiar__block_len(n, p, rb);
    for (size_t g = 0; g < nsegs(sbl, seg); g++) {
      const size_t off = sbo + seg_off(g, seg), len = seg_len(sbl, g, seg);
      const long deps[] = {ag[(size_t)sb * maxseg + g],
                           qs >= MPIAR__TAG_LIMIT ? sendq[qs - MPIAR__TAG_LIMIT] : -1};
      MPIAR__STEP(id, mpiar__sched_send(s, next, (int)(qs % MPIAR__TAG_LIMIT), mpiar__out(off), len,
                                        deps, MPIAR__NDEPS(deps)));
      sendq[qs++] = id;
    }
    for (size_t g = 0; g < nsegs(rbl, seg); g++) {
      const size_t off = rbo + seg_off(g, seg), len = seg_len(rbl, g, seg);
      /*
       * The finished block overwrites OUTPUT where the reduce-scatter last read it: the send of
       * this block in step k (or, in place, the send of the rank's own block in step 0). The
       * reduction of that region precedes the send, so this one dependency covers it too.
       */
      const long blocker = (ip || k > 0) ? sent[(size_t)rb * maxseg + g] : -1;
      const long deps[] = {blocker, red[(size_t)rb * maxseg + g],
                           qr >= MPIAR__TAG_LIMIT ? recvq[qr - MPIAR__TAG_LIMIT] : -1};
      MPIAR__STEP(id, mpiar__sched_recv(s, prev, (int)(qr % MPIAR__TAG_LIMIT), mpiar__out(off), len,
                                        deps, MPIAR__NDEPS(deps)));
      recvq[qr++] = id;
      ag[(size_t)rb * maxseg + g] = id;
    }
  }

cleanup:
  free(sendq);
  free(recvq);
  free(red);
  free(sent);
  free(slot_reader);
  return rc;
}

/* The one-level formulas of the header over the link `l` (alpha, beta) and gamma. */
static double ring_time(int nranks, size_t bytes, size_t segment_bytes,
                        const mpiar__cost_params_t *link) {
  const double p = nranks, blk = (double)bytes / p;
  const double m = segment_bytes ? ceil(blk / (double)segment_bytes) : 1.0;
  /* Every message is a block, or a segment of one: all of one size. */
  const mpiar__cost_params_t sized = mpiar__cost_at(link, m < 2 ? blk : blk / m);
  const mpiar__cost_params_t *c = &sized;
  const double plain =
      2 * (p - 1) * c->alpha + 2 * (p - 1) * blk * c->beta + (p - 1) * blk * c->gamma;
  if (m < 2) {
    return plain;
  }
  const double sb = blk / m;
  const double port = 2 * (p - 1) * (m * c->alpha + blk * c->beta);
  if (sb * c->gamma <= c->alpha + sb * c->beta) {
    return port;
  }
  /*
   * Reduction-bound segments: each step's m reductions run back to back after the first segment
   * arrives; an estimate outside the exact regime above (not claimed exact).
   */
  const double step = c->alpha + sb * c->beta + m * sb * c->gamma;
  const double reduce_bound = (p - 1) * step + (p - 1) * m * (c->alpha + sb * c->beta);
  return reduce_bound > port ? reduce_bound : port;
}

static int ring_peer(int rank, const void *arg) {
  return (rank + 1) % *(const int *)arg;
}

double mpiar__cost_ring(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                        const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  mpiar__cost_params_t link;
  if (!mpiar__cost_one_level(topo, c, &link)) {
    /*
     * Two levels: every step sends one block from each rank to the next. A step lasts as long as
     * the slower of an intra-node message and the busiest node port's inter-node messages (one
     * per node with block placement, up to ranks-per-node with round-robin), so the slower one
     * plays the link of the one-level formula.
     */
    mpiar__round_load_t load;
    mpiar__round_load(topo, ring_peer, &nranks, &load);
    const double blk = (double)bytes / nranks;
    const double inter = load.port * (c->alpha_inter + blk * c->beta_inter);
    if (!load.intra || inter >= c->alpha + blk * c->beta) {
      link.alpha = load.port * c->alpha_inter;
      link.beta = load.port * c->beta_inter;
    }
  }
  return ring_time(nranks, bytes, segment_bytes, &link);
}
