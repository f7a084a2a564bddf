/*
 * Broadcast builders: the whole vector (count elements) lives in OUTPUT on every rank; the root's
 * OUTPUT holds the data at the start (broadcast is always in place). Ranks are renumbered
 * relative to the root, vr = (r - root) mod p.
 *
 * Algorithm: binomial
 *   Rank vr receives the vector from vr - lowbit(vr) and forwards it to vr + 2^i for every
 *   2^i < lowbit(vr) (the root: every 2^i < p), largest subtree first.
 *   Restrictions: none. Cost: ceil(log2 p) (alpha + n beta), exact for powers of two.
 *   Wins for small messages.
 *
 * Algorithm: scatter_allgather
 *   A binomial scatter gives rank vr block vr (p blocks, mpiar__block_off); a ring allgather over
 *   the relative ranks then circulates the blocks. The root already has every block, so it sends
 *   its own blocks to rank 1 instead of receiving them, and the last rank sends nothing.
 *   Restrictions: none. Cost: log2(p) alpha + (p-1)/p n beta for the scatter plus
 *   (p-1) (alpha + n/p beta) for the ring, i.e. (log2 p + p - 1) alpha + 2 (p-1)/p n beta for p a
 *   power of two dividing count. Wins for large messages: the root sends about n bytes in all
 *   instead of ceil(log2 p) times n.
 *
 * Two levels: the broadcasts are not topology-aware; their costs use the level every message
 * stays on, or on a real two-level topology the slower level for every message (an upper bound).
 */
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

static int ceil_pof2(int p) {
  int q = 1;
  while (q < p) {
    q *= 2;
  }
  return q;
}

int mpiar__build_bcast_binomial(mpiar__schedule_t *s) {
  const int p = s->nranks, root = s->root;
  const int vr = (s->rank - root + p) % p;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  long rcv = -1, id = -1;

  s->scratch_elems = 0;
  if (n == 0 || p == 1) {
    return MPIAR_SUCCESS;
  }
  int mask = ceil_pof2(p);
  if (vr != 0) {
    mask = vr & -vr;
    const int parent = (vr - mask + root) % p;
    MPIAR__STEP(rcv, mpiar__sched_recv(s, parent, 0, mpiar__out(0), n, NULL, 0));
  }
  for (int m = mask / 2; m >= 1; m /= 2) {
    if (vr + m < p) {
      const long deps[] = {rcv};
      MPIAR__STEP(id, mpiar__sched_send(s, (vr + m + root) % p, 0, mpiar__out(0), n, deps, 1));
    }
  }

cleanup:
  return rc;
}

int mpiar__build_bcast_scatter_allgather(mpiar__schedule_t *s) {
  const int p = s->nranks, root = s->root;
  const int vr = (s->rank - root + p) % p;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  long rcv = -1, id = -1;
  long *touched = NULL; /* the scatter's steps, which every allgather receive must follow */
  size_t ntouched = 0;

  s->scratch_elems = 0;
  if (n == 0 || p == 1) {
    return MPIAR_SUCCESS;
  }
  touched = malloc(64 * sizeof *touched);
  if (touched == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "broadcast schedule");
  }
  /* Binomial scatter: vr owns blocks [vr, vr + lowbit(vr)) of the relative numbering. */
  int mask = ceil_pof2(p);
  if (vr != 0) {
    mask = vr & -vr;
    const int hi = vr + mask < p ? vr + mask : p;
    const size_t off = mpiar__block_off(n, p, vr);
    MPIAR__STEP(rcv, mpiar__sched_recv(s, (vr - mask + root) % p, 0, mpiar__out(off),
                                       mpiar__block_off(n, p, hi) - off, NULL, 0));
    touched[ntouched++] = rcv;
  }
  for (int m = mask / 2; m >= 1; m /= 2) {
    if (vr + m < p) {
      const int lo = vr + m, hi = vr + 2 * m < p ? vr + 2 * m : p;
      const size_t off = mpiar__block_off(n, p, lo);
      const long deps[] = {rcv};
      MPIAR__STEP(id, mpiar__sched_send(s, (lo + root) % p, 0, mpiar__out(off),
                                        mpiar__block_off(n, p, hi) - off, deps, 1));
      touched[ntouched++] = id;
    }
  }
  /* Ring allgather over relative ranks, open at the root (which has everything). */
  const int next = (vr + 1 + root) % p, prev = (vr - 1 + p + root) % p;
  long last = rcv; /* the step that delivered the block to forward next */
  for (int k = 0; k < p - 1; k++) {
    const int sb = ((vr - k) % p + p) % p;
    const int rb = ((vr - k - 1) % p + p) % p;
    if (vr != p - 1) {
      const long deps[] = {last};
      MPIAR__STEP(id, mpiar__sched_send(s, next, 1 + k, mpiar__out(mpiar__block_off(n, p, sb)),
                                        mpiar__block_len(n, p, sb), deps, vr == 0 ? 0 : 1));
    }
    if (vr != 0) {
      MPIAR__STEP(last, mpiar__sched_recv(s, prev, 1 + k, mpiar__out(mpiar__block_off(n, p, rb)),
                                          mpiar__block_len(n, p, rb), touched, ntouched));
    }
  }

cleanup:
  free(touched);
  return rc;
}

double mpiar__cost_bcast_binomial(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                  const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const mpiar__cost_params_t k = mpiar__cost_link(c, topo);
  const mpiar__cost_params_t l = mpiar__cost_at(&k, (double)bytes); /* the whole vector */
  return mpiar__log2i(ceil_pof2(nranks)) * (l.alpha + (double)bytes * l.beta);
}

double mpiar__cost_bcast_scatter_allgather(int nranks, size_t bytes, size_t elem_size,
                                           size_t segment_bytes, const mpiar__cost_params_t *c,
                                           const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const mpiar__cost_params_t l = mpiar__cost_link(c, topo);
  const double p = nranks, n = (double)bytes;
  /* Handshakes: the scatter's halves n/2, n/4, .. and the allgather's p - 1 blocks. */
  const double h = mpiar__cost_halving_handshakes(&l, n, ceil_pof2(nranks)) +
                   (p - 1) * mpiar__cost_handshake(&l, n / p);
  return mpiar__log2i(ceil_pof2(nranks)) * l.alpha + (p - 1) / p * n * l.beta +
         (p - 1) * (l.alpha + n / p * l.beta) + h;
}
