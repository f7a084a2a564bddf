/*
 * Reduce-scatter builders (mpiar_reduce_scatter_block): s->count is one rank's block c; INPUT
 * holds p blocks (block b at b c), OUTPUT receives the reduction of block r (c elements at 0).
 * In place (mpiar__shape_reduce_scatter): INPUT and OUTPUT are one buffer of p blocks and the
 * result lands at its start, so a builder that writes OUTPUT[0, c) orders that write after every
 * read of this rank's own block 0. B = n/p below is one block's bytes, n = p c elements' bytes.
 * Every REDUCE puts the lower rank's contribution in operand `a`, so a NaN payload of the lowest
 * rank wins as in the allreduce builders; at p = 2 every element is x0 op x1 (PAIR_EXACT).
 *
 * Algorithm: ring
 *   The ring's first half (ring.c): in step k (0 <= k < p-1) rank r sends the partial of block
 *   r-k-1 to r+1 and receives block r-k-2's from r-1, reducing it with its own piece; after p-1
 *   steps it holds block r. Partials live in two scratch blocks used in turn; the last reduction
 *   writes OUTPUT. Cost: (p-1) (alpha + B beta + B gamma), exact (each send waits for the
 *   reduction before it). Bytes sent per rank (p-1)/p n, the lower bound.
 *
 * Algorithm: recursive_halving
 *   The first half of Rabenseifner (rabenseifner.c): over p' = 2^floor(log2 p) virtual ranks,
 *   each stage halves the range of blocks a rank is responsible for and exchanges the other half
 *   with the partner at distance p'/2, p'/4, ..., 1. For p not a power of two the even ranks
 *   below 2 rem (rem = p - p') first send their whole vector to the next rank and receive their
 *   block back at the end; virtual rank v stands for real ranks 2v, 2v+1 (v < rem, two blocks)
 *   or v + rem (one block), so the ranges stay contiguous. Cost (p a power of two):
 *   log2(p) alpha + (p-1)/p n (beta + gamma); otherwise 2 alpha + n (beta + gamma) + B beta more.
 *
 * Algorithm: direct
 *   Every rank sends block b straight to rank b (p-1 messages out and in) and reduces the pieces
 *   of its block in rank order, ((x0 op x1) op x2) ..., so the order does not depend on the
 *   block. Cost: (p-1) (alpha + B beta) + B gamma, an estimate (the reductions mostly hide behind
 *   the arrivals). Small p; named only (MPIAR__ALG_MANUAL): the estimate counts no burst of p-1
 *   messages at one receive port, and would win every large vector.
 *
 * Algorithm: repro_direct (repro_direct.c, mpiar__build_repro_direct_rs)
 *   The reduce-scatter half of the reproducible allreduce: the pieces of block r reduced in the
 *   canonical tree (mpiar_reduce_canonical). Reproducible mode runs it for floating data on more
 *   than two ranks. Cost: (p-1) (alpha + B beta) + ceil(log2 p) B gamma.
 *
 * Tags: the ring numbers its messages to r+1 (mod MPIAR__TAG_LIMIT, a repeat depending on the
 * earlier message); recursive_halving uses 0 for the fold, 1 + stage, and 1 + log2 p' for the
 * block sent back; direct uses 0 (one message per pair).
 */
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

void mpiar__shape_reduce_scatter(mpiar__schedule_t *s) {
  const size_t all = (size_t)s->nranks * s->count;
  s->in_elems = all;
  s->out_elems = s->in_place ? all : s->count;
}

int mpiar__build_rs_trivial(mpiar__schedule_t *s, int *done) {
  mpiar__shape_reduce_scatter(s);
  s->scratch_elems = 0;
  *done = 1;
  if (s->count == 0) {
    return MPIAR_SUCCESS;
  }
  if (s->nranks == 1) {
    long id =
        s->in_place ? 0 : mpiar__sched_copy(s, mpiar__out(0), mpiar__in(0), s->count, NULL, 0);
    return id < 0 ? (int)id : MPIAR_SUCCESS;
  }
  *done = 0;
  return MPIAR_SUCCESS;
}

static int mod(int a, int p) {
  return ((a % p) + p) % p;
}

int mpiar__build_rs_ring(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t c = s->count;
  int rc = MPIAR_SUCCESS, done = 0;
  long *sendq = NULL, *recvq = NULL;
  long id = -1, red_prev = -1, own0 = -1; /* own0: the step that reads this rank's block 0 */
  MPIAR__CHECK(mpiar__build_rs_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  sendq = malloc((size_t)p * sizeof *sendq);
  recvq = malloc((size_t)p * sizeof *recvq);
  if (sendq == NULL || recvq == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "reduce-scatter ring schedule of %d steps", p);
  }
  s->scratch_elems = 2 * c;
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  for (int k = 0; k < p - 1; k++) {
    const int sb = mod(r - k - 1, p), rb = mod(r - k - 2, p);
    const int tag = k % MPIAR__TAG_LIMIT;
    const mpiar__operand_t src =
        k == 0 ? mpiar__own(s, (size_t)sb * c) : mpiar__scratch((size_t)((k - 1) % 2) * c);
    const long sdeps[] = {red_prev, k >= MPIAR__TAG_LIMIT ? sendq[k - MPIAR__TAG_LIMIT] : -1};
    MPIAR__STEP(sendq[k], mpiar__sched_send(s, next, tag, src, c, sdeps, 2));
    if (k == 0 && sb == 0) {
      own0 = sendq[k];
    }
    const mpiar__operand_t slot = mpiar__scratch((size_t)(k % 2) * c);
    /* The slot was last read by the previous step's send (which followed its reduction). */
    const long rdeps[] = {k >= 2 ? sendq[k - 1] : -1,
                          k >= MPIAR__TAG_LIMIT ? recvq[k - MPIAR__TAG_LIMIT] : -1};
    MPIAR__STEP(recvq[k], mpiar__sched_recv(s, prev, tag, slot, c, rdeps, 2));
    const int final = k == p - 2;
    const mpiar__operand_t dst = final ? mpiar__out(0) : slot, mine = mpiar__own(s, (size_t)rb * c);
    /* In place the result overwrites block 0 of the input: after the step that reads it. */
    const long ddeps[] = {recvq[k], final && s->in_place ? own0 : -1};
    /* The partial holds ranks below r (or rank 0) except on rank 0: see ring.c. */
    MPIAR__STEP(id, r > 0 ? mpiar__sched_reduce(s, dst, slot, mine, c, ddeps, 2)
                          : mpiar__sched_reduce(s, dst, mine, slot, c, ddeps, 2));
    if (rb == 0 && !final) {
      own0 = id;
    }
    red_prev = id;
    if (final) {
      MPIAR__CHECK(mpiar__sched_mark_final(s, id));
    }
  }
cleanup:
  free(sendq);
  free(recvq);
  return rc;
}

int mpiar__build_rs_recursive_halving(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t c = s->count, all = (size_t)p * c;
  int rc = MPIAR_SUCCESS, done = 0;
  long id = -1, last = -1;
  long readers[4] = {-1, -1, -1, -1}; /* steps that read this rank's own input */
  int nreaders = 0;
  MPIAR__CHECK(mpiar__build_rs_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  const int pof2 = mpiar__pof2_floor(p), rem = p - pof2, L = mpiar__log2i(pof2);
  const size_t acc = 0, tmp = all; /* scratch: the accumulated vector, then received halves */
  s->scratch_elems = 2 * all;
  int v;
  int cur_own = 1; /* the data to send and reduce is this rank's input (else scratch acc) */
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      MPIAR__STEP(id, mpiar__sched_send(s, r + 1, 0, mpiar__own(s, 0), all, NULL, 0));
      const long deps[] = {id};
      MPIAR__STEP(id, mpiar__sched_recv(s, r + 1, 1 + L, mpiar__out(0), c, deps, 1));
      return MPIAR_SUCCESS;
    }
    long rid;
    MPIAR__STEP(rid, mpiar__sched_recv(s, r - 1, 0, mpiar__scratch(tmp), all, NULL, 0));
    const long deps[] = {rid};
    MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__scratch(acc), mpiar__scratch(tmp),
                                          mpiar__own(s, 0), all, deps, 1));
    readers[nreaders++] = last;
    cur_own = 0;
    v = r / 2;
  } else {
    v = r - rem;
  }
  int lo = 0, hi = pof2, stage = 0;
  for (int mask = pof2 / 2; mask >= 1; mask /= 2, stage++) {
    const int w = v ^ mask, peer = mpiar__fold_real_rank(w, rem);
    const int mid = lo + (hi - lo) / 2;
    const int klo = v < mid ? lo : mid, khi = v < mid ? mid : hi;
    const int slo = v < mid ? mid : lo, shi = v < mid ? hi : mid;
    const size_t koff = (size_t)mpiar__fold_first_block(klo, rem) * c,
                 klen = (size_t)mpiar__fold_first_block(khi, rem) * c - koff;
    const size_t soff = (size_t)mpiar__fold_first_block(slo, rem) * c,
                 slen = (size_t)mpiar__fold_first_block(shi, rem) * c - soff;
    const long deps[] = {last};
    MPIAR__STEP(id, mpiar__sched_send(s, peer, 1 + stage,
                                      cur_own ? mpiar__own(s, soff) : mpiar__scratch(acc + soff),
                                      slen, deps, 1));
    if (cur_own) {
      readers[nreaders++] = id;
    }
    long rid;
    MPIAR__STEP(rid, mpiar__sched_recv(s, peer, 1 + stage, mpiar__scratch(tmp), klen, deps, 1));
    const long rdeps[] = {rid, last, readers[0], readers[1], readers[2]};
    const int lower = peer < r; /* the partner's partial goes first */
    if (mask > 1) {
      const mpiar__operand_t mine = cur_own ? mpiar__own(s, koff) : mpiar__scratch(acc + koff);
      MPIAR__STEP(last, lower ? mpiar__sched_reduce(s, mpiar__scratch(acc + koff),
                                                    mpiar__scratch(tmp), mine, klen, rdeps, 2)
                              : mpiar__sched_reduce(s, mpiar__scratch(acc + koff), mine,
                                                    mpiar__scratch(tmp), klen, rdeps, 2));
      if (cur_own) {
        readers[nreaders++] = last;
      }
    } else {
      /* The last stage: one or two blocks, each final; this rank's own goes to OUTPUT. */
      for (int b = mpiar__fold_first_block(klo, rem); b < mpiar__fold_first_block(khi, rem); b++) {
        const size_t off = (size_t)b * c;
        const mpiar__operand_t mine = cur_own ? mpiar__own(s, off) : mpiar__scratch(acc + off);
        const mpiar__operand_t dst = b == r ? mpiar__out(0) : mpiar__scratch(acc + off);
        const mpiar__operand_t got = mpiar__scratch(tmp + off - koff);
        /* In place, OUTPUT[0, c) is input block 0: after every read of the input. */
        const size_t nd = b == r && s->in_place ? 5 : 2;
        MPIAR__STEP(id, lower ? mpiar__sched_reduce(s, dst, got, mine, c, rdeps, nd)
                              : mpiar__sched_reduce(s, dst, mine, got, c, rdeps, nd));
        MPIAR__CHECK(mpiar__sched_mark_final(s, id));
        if (b != r) {
          const long bdeps[] = {id};
          MPIAR__STEP(id, mpiar__sched_send(s, b, 1 + L, mpiar__scratch(acc + off), c, bdeps, 1));
        }
      }
    }
    cur_own = 0;
    lo = klo;
    hi = khi;
  }
cleanup:
  return rc;
}

int mpiar__build_rs_direct(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t c = s->count;
  int rc = MPIAR_SUCCESS, done = 0;
  long *piece = NULL;
  long id = -1, to0 = -1;
  MPIAR__CHECK(mpiar__build_rs_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  piece = malloc((size_t)p * sizeof *piece);
  if (piece == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "reduce-scatter direct schedule of %d ranks", p);
  }
  s->scratch_elems = (size_t)(p - 1) * c;
  for (int k = 1; k < p; k++) {
    const int to = (r + k) % p;
    MPIAR__STEP(id, mpiar__sched_send(s, to, 0, mpiar__own(s, (size_t)to * c), c, NULL, 0));
    if (to == 0) {
      to0 = id;
    }
  }
  /* Rank q's piece of block r: scratch slot q (q < r) or q - 1 (q > r); this rank's in INPUT. */
  for (int k = 1; k < p; k++) {
    const int from = (r - k + p) % p;
    const size_t slot = (size_t)(from < r ? from : from - 1);
    MPIAR__STEP(piece[from], mpiar__sched_recv(s, from, 0, mpiar__scratch(slot * c), c, NULL, 0));
  }
  piece[r] = -1;
  mpiar__operand_t accum = {0, 0};
  id = -1;
  for (int q = 0; q < p; q++) {
    const mpiar__operand_t x =
        q == r ? mpiar__own(s, (size_t)r * c) : mpiar__scratch((size_t)(q < r ? q : q - 1) * c);
    if (q == 0) {
      accum = x;
      continue;
    }
    /* The running result lives in OUTPUT; in place its first write follows the send of block 0. */
    const long deps[] = {piece[q], id, q == 1 && s->in_place ? to0 : -1, q == 1 ? piece[0] : -1};
    MPIAR__STEP(id, mpiar__sched_reduce(s, mpiar__out(0), accum, x, c, deps, 4));
    accum = mpiar__out(0);
  }
  MPIAR__CHECK(mpiar__sched_mark_final(s, id));
cleanup:
  free(piece);
  return rc;
}

double mpiar__cost_rs_ring(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                           const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const mpiar__cost_params_t k = mpiar__cost_link(c, topo);
  const double p = nranks, blk = (double)bytes / p;
  const mpiar__cost_params_t l = mpiar__cost_at(&k, blk); /* every message is a block */
  return (p - 1) * (l.alpha + blk * (l.beta + l.gamma));
}

double mpiar__cost_rs_recursive_halving(int nranks, size_t bytes, size_t elem_size,
                                        size_t segment_bytes, const mpiar__cost_params_t *c,
                                        const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const mpiar__cost_params_t l = mpiar__cost_link(c, topo);
  const int pof2 = mpiar__pof2_floor(nranks);
  const double p = nranks, n = (double)bytes, pp = pof2;
  /* Over p' virtual ranks the halves are n (p'-1)/p' at most when the blocks spread evenly. */
  double t = mpiar__log2i(pof2) * l.alpha + (pp - 1) / pp * n * (l.beta + l.gamma);
  t += mpiar__cost_halving_handshakes(&l, n, pp);
  if (pof2 != nranks) {
    t += 2 * l.alpha + n * (l.beta + l.gamma) + n / p * l.beta;
    t += mpiar__cost_handshake(&l, n) + mpiar__cost_handshake(&l, n / p);
  }
  return t;
}

double mpiar__cost_rs_direct(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                             const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const mpiar__cost_params_t k = mpiar__cost_link(c, topo);
  const double p = nranks, blk = (double)bytes / p;
  const mpiar__cost_params_t l = mpiar__cost_at(&k, blk); /* every message is a block */
  return (p - 1) * (l.alpha + blk * l.beta) + blk * l.gamma;
}

double mpiar__cost_rs_repro_direct(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                   const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const mpiar__cost_params_t k = mpiar__cost_link(c, topo);
  const double p = nranks, blk = (double)bytes / p;
  const mpiar__cost_params_t l = mpiar__cost_at(&k, blk); /* every message is a block */
  return (p - 1) * (l.alpha + blk * l.beta) + mpiar__log2i(nranks) * blk * l.gamma;
}
