/*
 * Algorithm: recursive doubling (full-vector exchange)
 *
 * In step j (mask 2^j) rank v exchanges its whole partial vector with rank v XOR 2^j and both
 * reduce; after log2(p) steps every rank holds the full reduction. Both partners compute
 * (lower group's partial) op (higher group's partial), so they produce the same bits.
 *
 * Restrictions: none. For p not a power of two, with p' the largest power of two below p and
 * rem = p - p': among the first 2 rem ranks, each even rank first sends its vector to the odd
 * rank above it, which reduces (the even rank's contribution in operand a) and takes part in the
 * exchange as rank r/2; at the end it sends the result back. Any count; in place or not.
 *
 * Memory: one scratch vector for the partner's data. The first reduction reads INPUT and writes
 * OUTPUT directly, so there is no up-front copy. In place, from 16 KiB to 512 KiB, a second
 * scratch vector holds a copy of the rank's vector for the first send (so the first reduction
 * need not wait for that send): one copy of n bytes.
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced, n bytes):
 *   p a power of two:  log2(p) (alpha + n beta + n gamma)
 *   otherwise:         log2(p') (alpha + n beta + n gamma) + (alpha + n beta + n gamma)
 *                      + (alpha + n beta)              (the fold and the return of the result)
 * In place from 16 KiB to below 512 KiB add n gamma (the staging copy; the selector's model
 * leaves it out). The simulator's critical path equals the first formula for powers of two; the second
 * is the model's estimate for other p. Wins for small messages, where the log2(p) alpha term dominates.
 * Two levels: on one node, or one rank per node, the formulas with that level's alpha and beta;
 * otherwise a step-synchronous estimate as for Rabenseifner (the node port passes one message per
 * rank of the node in each step across nodes, which hier_recursive_doubling avoids).
 */
#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

int mpiar__build_recursive_doubling(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  long id = -1;

  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  s->scratch_elems = n;
  const int pof2 = mpiar__pof2_floor(p), rem = p - pof2, steps = mpiar__log2i(pof2);
  const int tag_post = steps + 1;

  /* Fold: an even rank below 2 rem hands its vector to r+1 and waits for the result. */
  if (r < 2 * rem && r % 2 == 0) {
    long snd;
    MPIAR__STEP(snd, mpiar__sched_send(s, r + 1, 0, mpiar__own(s, 0), n, NULL, 0));
    /* In place the result overwrites the vector that the fold send reads. */
    const long deps[] = {s->in_place ? snd : -1};
    MPIAR__STEP(id, mpiar__sched_recv(s, r + 1, tag_post, mpiar__out(0), n, deps, 1));
    return MPIAR_SUCCESS;
  }
  int v;
  long last = -1; /* the step that last wrote OUTPUT */
  int in_out = 0; /* 1 once OUTPUT holds this rank's partial */
  if (r < 2 * rem) {
    long rcv;
    MPIAR__STEP(rcv, mpiar__sched_recv(s, r - 1, 0, mpiar__scratch(0), n, NULL, 0));
    const long deps[] = {rcv};
    MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(0), mpiar__scratch(0), mpiar__own(s, 0), n,
                                          deps, 1));
    in_out = 1;
    v = r / 2;
  } else {
    v = r - rem;
  }
  /*
   * In place, the first exchange sends OUTPUT, which its reduction overwrites, so that reduction
   * would wait until the partner has taken the whole vector. Between MPIAR__RD_STAGE_MIN_BYTES
   * and MPIAR__RD_STAGE_MAX_BYTES the vector is copied to scratch first and sent from there, and
   * the reduction waits only for the partner's data (measured at p = 2 on MPICH's shared memory:
   * in place 1.2x out of place at 64 KiB and 2.6x at 128 KiB without the copy, 1.1x and 1.5x
   * with it). Smaller messages leave eagerly (the send completes at once, and the copy would be
   * all the difference); from 512 KiB on, MPI's large-message path completes the send soon after
   * the receive, and in place is as fast as out of place without the copy, slower with it.
   */
  long staged = -1; /* in place: the copy of this rank's vector that the first send reads */
  if (s->in_place && !in_out && steps > 0 && mpiar__rd_stages(n * s->elem_size)) {
    s->scratch_elems = 2 * n;
    MPIAR__STEP(staged, mpiar__sched_copy(s, mpiar__scratch(n), mpiar__own(s, 0), n, NULL, 0));
  }
  for (int j = 0; j < steps; j++) {
    const int w = v ^ (1 << j);
    const int peer = w < rem ? 2 * w + 1 : w + rem;
    const mpiar__operand_t cur = in_out ? mpiar__out(0) : mpiar__own(s, 0);
    long snd, rcv;
    const long sdeps[] = {last};
    if (staged >= 0 && j == 0) {
      const long cdeps[] = {staged};
      MPIAR__STEP(snd, mpiar__sched_send(s, peer, 1 + j, mpiar__scratch(n), n, cdeps, 1));
    } else {
      MPIAR__STEP(snd, mpiar__sched_send(s, peer, 1 + j, cur, n, sdeps, 1));
    }
    /* The scratch vector is free once the previous reduction has read it. */
    MPIAR__STEP(rcv, mpiar__sched_recv(s, peer, 1 + j, mpiar__scratch(0), n, sdeps, 1));
    /* The reduction overwrites OUTPUT, which the send may be reading (always in place). */
    const long rdeps[] = {rcv, in_out ? snd : (staged >= 0 ? staged : (s->in_place ? snd : -1))};
    if (v < w) {
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(0), cur, mpiar__scratch(0), n, rdeps, 2));
    } else {
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(0), mpiar__scratch(0), cur, n, rdeps, 2));
    }
    in_out = 1;
  }
  MPIAR__CHECK(mpiar__sched_mark_final(s, last)); /* every rank's last exchange completes it */
  if (r < 2 * rem) {
    const long deps[] = {last};
    MPIAR__STEP(id, mpiar__sched_send(s, r - 1, tag_post, mpiar__out(0), n, deps, 1));
  }

cleanup:
  return rc;
}

double mpiar__cost_recursive_doubling(int nranks, size_t bytes, size_t elem_size,
                                      size_t segment_bytes, const mpiar__cost_params_t *c,
                                      const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const int pof2 = mpiar__pof2_floor(nranks);
  const double n = (double)bytes;
  mpiar__cost_params_t link;
  if (mpiar__cost_one_level(topo, c, &link)) {
    link = mpiar__cost_at(&link, n); /* every message carries the whole vector */
    const double step = link.alpha + n * link.beta + n * link.gamma;
    double t = mpiar__log2i(pof2) * step;
    if (pof2 != nranks) {
      t += step + link.alpha + n * link.beta;
    }
    return t;
  }
  /* Two levels: each exchange costs its round time on the topology (see rabenseifner.c). */
  mpiar__xor_pattern_t x = {pof2, nranks - pof2, 0};
  mpiar__round_load_t load;
  double t = 0.0;
  for (int j = 0; j < mpiar__log2i(pof2); j++) {
    x.mask = 1 << j;
    mpiar__round_load(topo, mpiar__xor_peer, &x, &load);
    t += mpiar__round_time(&load, c, n) + n * c->gamma;
  }
  if (x.rem > 0) {
    x.mask = 0;
    mpiar__round_load(topo, mpiar__xor_peer, &x, &load);
    t += 2 * mpiar__round_time(&load, c, n) + n * c->gamma;
  }
  return t;
}
