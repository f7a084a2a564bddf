/*
 * Algorithm: Rabenseifner (recursive-halving reduce-scatter + recursive-doubling allgather)
 *
 * Over p' = 2^L ranks and a vector cut into p' blocks: in halving step j (mask p'/2^(j+1)) rank v
 * keeps the half of its current block range that contains block v, sends the other half to
 * v XOR mask and reduces the half it kept with the one received; after L steps rank v holds the
 * reduction of block v. The allgather then doubles the range L times, in the reverse order.
 * Each block is reduced by one rank and copied to the others, so every rank has the same bits;
 * every reduction still puts the lower ranks' partial in operand a.
 *
 * Restrictions: none. Any count (blocks may be empty), in place or not.
 *
 * Non-power-of-two p (rem = p - p' extra ranks), two variants, both built here:
 *  - "fold" (mpiar__build_rabenseifner_fold): among the first 2 rem ranks, each even rank sends
 *    its whole vector to the odd rank above it, which reduces and takes part as rank r/2; the
 *    result goes back at the end. Extra cost alpha + n beta + n gamma before, alpha + n beta after.
 *  - "half-vector pre-step" (mpiar__build_rabenseifner, the registered one): the pair
 *    (2i, 2i+1) swaps halves (the halves of the first halving step: blocks [0, p'/2) and
 *    [p'/2, p')), so 2i holds the pair's reduced lower half and 2i+1 the upper half. The pair then
 *    acts as one virtual rank i in the first halving step: the member holding the half the pair
 *    keeps continues, the other member sends its half straight to the partner and waits for the
 *    result at the end. Extra cost alpha + n/2 beta + n/2 gamma before, alpha + n beta after.
 *  The pre-step moves and reduces half as much data with the same number of messages, so in the
 *  model it is never slower than the fold and is faster by n/2 (beta + gamma); the simulator
 *  confirms it (tests/sim, mpiar-sim --algorithm rabenseifner_fold).
 *
 * Memory: scratch for one received half (ceil(n/2) elements; the fold variant needs n). The first
 * reduction reads INPUT directly; no up-front copy. Out of place, the first halving step receives
 * straight into OUTPUT and reduces there (nothing is in OUTPUT yet), as the ring does. Each
 * allgather receive waits only for the sends that read the range it overwrites.
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced, n bytes, p | count):
 *   p a power of two:  2 log2(p) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
 *   otherwise:         the same with p' for p, plus the variant's extra cost above.
 * The simulator's critical path equals the first formula for powers of two. Bytes sent per rank:
 * 2 (p-1)/p n, the lower bound for allreduce. Wins for medium and large messages.
 * Two levels: on one node, or one rank per node, the formulas with that level's alpha and beta.
 * Otherwise a step-synchronous estimate (each step's slower of an intra-node message and the
 * busiest node port), within 40 % of the simulator on the tested topologies. With block placement
 * the first, largest steps cross nodes from every rank: about 2 (N-1)/N n k per node link, where
 * hier_rabenseifner moves 2 (N-1)/N n.
 */
#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

enum { VARIANT_HALF = 0, VARIANT_FOLD = 1 };

/* Elements of blocks [lo, hi) of p' blocks. */
static size_t range_off(size_t n, int pof2, int lo) {
  return mpiar__block_off(n, pof2, lo);
}
static size_t range_len(size_t n, int pof2, int lo, int hi) {
  return mpiar__block_off(n, pof2, hi) - mpiar__block_off(n, pof2, lo);
}

/*
 * The member of virtual rank x that holds half `upper` (0: blocks [0, p'/2), 1: the rest) after
 * the pre-step: 2x for the lower half, 2x+1 for the upper; a single rank holds both.
 */
static int holder(int x, int upper, int rem) {
  if (x >= rem) {
    return x + rem;
  }
  return 2 * x + upper;
}

static int build(mpiar__schedule_t *s, int variant) {
  const int p = s->nranks, r = s->rank;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  long id = -1;

  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  const int pof2 = mpiar__pof2_floor(p), rem = p - pof2, L = mpiar__log2i(pof2);
  const int top = pof2 / 2;
  const size_t h = mpiar__block_off(n, pof2, top); /* the first halving step's split */
  const int tag_post = 1 + 2 * L;
  /* Every send of the reduce-scatter phase (at most pre + L) and the memory it reads. */
  struct {
    long id;
    mpiar__operand_t src;
    size_t len;
  } sends[2 + 64];
  int nsends = 0;
  long last = -1; /* the last reduction (OUTPUT holds this rank's partial from then on) */
  int in_out = 0;
  int v = r - rem; /* virtual rank */
  int first = 0;   /* the first halving step this rank runs itself */

  s->scratch_elems = variant == VARIANT_FOLD ? n : (h > n - h ? h : n - h);
  if (r < 2 * rem) {
    const int mate = r ^ 1;
    v = r / 2;
    if (variant == VARIANT_FOLD) {
      if (r % 2 == 0) {
        long snd;
        MPIAR__STEP(snd, mpiar__sched_send(s, mate, 0, mpiar__own(s, 0), n, NULL, 0));
        const long deps[] = {s->in_place ? snd : -1};
        MPIAR__STEP(id, mpiar__sched_recv(s, mate, tag_post, mpiar__out(0), n, deps, 1));
        return MPIAR_SUCCESS;
      }
      long rcv;
      MPIAR__STEP(rcv, mpiar__sched_recv(s, mate, 0, mpiar__scratch(0), n, NULL, 0));
      const long deps[] = {rcv};
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(0), mpiar__scratch(0), mpiar__own(s, 0),
                                            n, deps, 1));
      in_out = 1;
    } else {
      /* Half-vector pre-step: the even rank keeps the lower half, the odd rank the upper. */
      const int upper = r % 2;
      const size_t koff = upper ? h : 0, klen = upper ? n - h : h;
      const size_t goff = upper ? 0 : h, glen = upper ? h : n - h;
      long snd, rcv;
      MPIAR__STEP(snd, mpiar__sched_send(s, mate, 0, mpiar__own(s, goff), glen, NULL, 0));
      sends[nsends].id = snd;
      sends[nsends].src = mpiar__own(s, goff);
      sends[nsends++].len = glen;
      MPIAR__STEP(rcv, mpiar__sched_recv(s, mate, 0, mpiar__scratch(0), klen, NULL, 0));
      const long deps[] = {rcv};
      if (upper) {
        MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(koff), mpiar__scratch(0),
                                              mpiar__own(s, koff), klen, deps, 1));
      } else {
        MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(koff), mpiar__own(s, koff),
                                              mpiar__scratch(0), klen, deps, 1));
      }
      in_out = 1;
      /* First halving step for a pair: the pair keeps the lower half iff v < w. */
      const int w = v ^ top;
      const int keep_upper = (v & top) != 0;
      const mpiar__operand_t cur = mpiar__out(koff);
      if (upper == keep_upper) {
        /* This member continues: receive the kept half from the partner's holder of it. */
        const long rdeps[] = {last};
        MPIAR__STEP(rcv, mpiar__sched_recv(s, holder(w, keep_upper, rem), 1, mpiar__scratch(0),
                                           klen, rdeps, 1));
        const long ddeps[] = {rcv};
        if (v < w) {
          MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(koff), cur, mpiar__scratch(0), klen,
                                                ddeps, 1));
        } else {
          MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(koff), mpiar__scratch(0), cur, klen,
                                                ddeps, 1));
        }
        first = 1;
      } else {
        /* This member hands its reduced half to the partner's continuing member and waits. */
        const int dest = holder(w, upper, rem);
        const long sdeps[] = {last};
        const long pre_snd = snd;
        MPIAR__STEP(snd, mpiar__sched_send(s, dest, 1, cur, klen, sdeps, 1));
        /* The result overwrites both halves: the one each send reads must be sent first. */
        const long deps2[] = {pre_snd, snd};
        MPIAR__STEP(id, mpiar__sched_recv(s, mate, tag_post, mpiar__out(0), n, deps2, 2));
        return MPIAR_SUCCESS;
      }
    }
  }

  /* Recursive halving over the virtual ranks, from step `first`. */
  int lo = 0, hi = pof2;
  for (int j = 0; j < L; j++) {
    const int mask = top >> j;
    const int mid = lo + (hi - lo) / 2;
    const int keep_upper = (v & mask) != 0;
    const int klo = keep_upper ? mid : lo, khi = keep_upper ? hi : mid;
    const int glo = keep_upper ? lo : mid, ghi = keep_upper ? mid : hi;
    lo = klo;
    hi = khi;
    if (j < first) {
      continue;
    }
    const int w = v ^ mask;
    const size_t koff = range_off(n, pof2, klo), klen = range_len(n, pof2, klo, khi);
    const size_t goff = range_off(n, pof2, glo), glen = range_len(n, pof2, glo, ghi);
    /*
     * Peers: in the first step under the half variant the partner pair is split, so the message
     * goes to (comes from) the member that holds that half; later the continuing members talk.
     */
    int to, from;
    if (variant == VARIANT_HALF && j == 0) {
      to = holder(w, !keep_upper, rem);
      from = holder(w, keep_upper, rem);
    } else if (variant == VARIANT_HALF) {
      to = from = w < rem ? holder(w, (w & top) != 0, rem) : w + rem;
    } else {
      to = from = w < rem ? 2 * w + 1 : w + rem;
    }
    const mpiar__operand_t gsrc = in_out ? mpiar__out(goff) : mpiar__own(s, goff);
    const mpiar__operand_t kcur = in_out ? mpiar__out(koff) : mpiar__own(s, koff);
    long snd, rcv;
    const long deps[] = {last};
    MPIAR__STEP(snd, mpiar__sched_send(s, to, 1 + j, gsrc, glen, deps, 1));
    sends[nsends].id = snd;
    sends[nsends].src = gsrc;
    sends[nsends++].len = glen;
    /*
     * Before the first reduction of an out-of-place call OUTPUT holds nothing yet: the partner's
     * half lands there directly and is reduced in place with INPUT, as the ring does, which
     * saves the scratch buffer's memory traffic. Later steps (and in-place calls) keep the
     * partial in OUTPUT, so the partner's half goes to scratch.
     */
    const mpiar__operand_t landing = (in_out || s->in_place) ? mpiar__scratch(0) : mpiar__out(koff);
    MPIAR__STEP(rcv, mpiar__sched_recv(s, from, 1 + j, landing, klen, deps, 1));
    const long ddeps[] = {rcv};
    if (v < w) {
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(koff), kcur, landing, klen, ddeps, 1));
    } else {
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(koff), landing, kcur, klen, ddeps, 1));
    }
    in_out = 1;
  }

  /* The last reduction finished block v. */
  MPIAR__CHECK(mpiar__sched_mark_final(s, last));

  /* Recursive doubling allgather: the range [lo, hi) is the block v, then grows. */
  long written[64 + 1]; /* the last reduction and every allgather receive */
  int nwritten = 0;
  written[nwritten++] = last;
  for (int j = 0; j < L; j++) {
    const int mask = 1 << j;
    const int w = v ^ mask;
    const int peer =
        w < rem ? (variant == VARIANT_HALF ? holder(w, (w & top) != 0, rem) : 2 * w + 1) : w + rem;
    const int plo = lo ^ mask, phi = plo + (hi - lo);
    const size_t off = range_off(n, pof2, lo), len = range_len(n, pof2, lo, hi);
    const size_t poff = range_off(n, pof2, plo), plen = range_len(n, pof2, plo, phi);
    long snd, rcv;
    MPIAR__STEP(snd, mpiar__sched_send(s, peer, 1 + L + j, mpiar__out(off), len, written,
                                       (size_t)nwritten));
    /*
     * The partner's range is one this rank gave away while halving. The last access to it was
     * the send of that step (reading OUTPUT, or INPUT that is OUTPUT in place), which itself
     * followed every reduction that wrote the range; so the receive waits for exactly the sends
     * that read OUTPUT overlapping it. Out of place at p = 2 that is none, and the receive is
     * posted at once, as early as the ring posts its own.
     */
    long deps[2 + 64];
    int nd = 0;
    for (int i = 0; i < nsends; i++) {
      size_t soff = sends[i].src.off;
      if (sends[i].src.buf == MPIAR__BUF_OUTPUT && sends[i].len > 0 && plen > 0 &&
          soff < poff + plen && poff < soff + sends[i].len) {
        deps[nd++] = sends[i].id;
      }
    }
    MPIAR__STEP(rcv, mpiar__sched_recv(s, peer, 1 + L + j, mpiar__out(poff), plen, nd ? deps : NULL,
                                       (size_t)nd));
    written[nwritten++] = rcv;
    (void)snd;
    const int width = hi - lo;
    lo = lo < plo ? lo : plo;
    hi = lo + 2 * width;
  }

  /* Return the result to the waiting member of a pair. */
  if (r < 2 * rem) {
    MPIAR__STEP(id,
                mpiar__sched_send(s, r ^ 1, tag_post, mpiar__out(0), n, written, (size_t)nwritten));
  }

cleanup:
  return rc;
}

int mpiar__build_rabenseifner(mpiar__schedule_t *s) {
  return build(s, VARIANT_HALF);
}

int mpiar__build_rabenseifner_fold(mpiar__schedule_t *s) {
  return build(s, VARIANT_FOLD);
}

/* The one-level formulas of the header. */
static double cost_one_level(int nranks, size_t bytes, const mpiar__cost_params_t *c, int variant) {
  const int pof2 = mpiar__pof2_floor(nranks);
  const double n = (double)bytes, q = pof2;
  double t = 2 * mpiar__log2i(pof2) * c->alpha + 2 * (q - 1) / q * n * c->beta +
             (q - 1) / q * n * c->gamma;
  t += 2 * mpiar__cost_halving_handshakes(c, n, q); /* the halving and the doubling back */
  if (pof2 != nranks) {
    const double pre = variant == VARIANT_FOLD ? n : n / 2;
    t += c->alpha + pre * (c->beta + c->gamma) + c->alpha + n * c->beta;
    t += mpiar__cost_handshake(c, pre) + mpiar__cost_handshake(c, n);
  }
  return t;
}

/*
 * Two levels, a step-synchronous estimate: each halving and doubling step costs its round time
 * on the topology (the slower of an intra-node message and the busiest node port), plus the
 * reduction of the kept half; the pre- and post-steps of non-powers of two are rounds between
 * the pairs. The first steps exchange across the widest distance, hence between nodes with
 * block placement, which is where the hierarchical variant saves.
 */
static double cost_two_level(int nranks, size_t bytes, const mpiar__cost_params_t *c,
                             const mpiar__topology_t *topo, int variant) {
  const int pof2 = mpiar__pof2_floor(nranks), L = mpiar__log2i(pof2);
  const double n = (double)bytes;
  mpiar__xor_pattern_t x = {pof2, nranks - pof2, 0};
  mpiar__round_load_t load;
  double t = 0.0;
  for (int j = 0; j < L; j++) {
    const double half = n / (double)(2 << j);
    x.mask = pof2 >> (j + 1);
    mpiar__round_load(topo, mpiar__xor_peer, &x, &load);
    t += mpiar__round_time(&load, c, half) + half * c->gamma;
    x.mask = 1 << j;
    mpiar__round_load(topo, mpiar__xor_peer, &x, &load);
    t += mpiar__round_time(&load, c, n / pof2 * (double)(1 << j));
  }
  if (x.rem > 0) {
    const double pre = variant == VARIANT_FOLD ? n : n / 2;
    x.mask = 0;
    mpiar__round_load(topo, mpiar__xor_peer, &x, &load);
    t += mpiar__round_time(&load, c, pre) + pre * c->gamma + mpiar__round_time(&load, c, n);
  }
  return t;
}

static double cost(int nranks, size_t bytes, const mpiar__cost_params_t *c,
                   const mpiar__topology_t *topo, int variant) {
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  mpiar__cost_params_t link;
  if (mpiar__cost_one_level(topo, c, &link)) {
    return cost_one_level(nranks, bytes, &link, variant);
  }
  return cost_two_level(nranks, bytes, c, topo, variant);
}

double mpiar__cost_rabenseifner(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  return cost(nranks, bytes, c, topo, VARIANT_HALF);
}

double mpiar__cost_rabenseifner_fold(int nranks, size_t bytes, size_t elem_size,
                                     size_t segment_bytes, const mpiar__cost_params_t *c,
                                     const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  return cost(nranks, bytes, c, topo, VARIANT_FOLD);
}
