/*
 * Allgather builders (mpiar_allgather): s->count is one rank's block c; INPUT holds this rank's
 * block (c elements), OUTPUT receives every rank's block, block b at b c (p c elements). In place
 * (mpiar__shape_allgather) the rank's block is already in OUTPUT at r c and INPUT is not read.
 * Out of place a COPY puts the block in OUTPUT, independent of the messages (which send it from
 * INPUT where it is this rank's first send). B = n/p below is one block's bytes, n = p c
 * elements' bytes. Blocks are copied, never reduced: every rank ends with the same bits.
 *
 * Algorithm: ring
 *   The ring's second half (ring.c): in step k rank r forwards block r-k to r+1 and receives
 *   block r-k-1 from r-1. Cost: (p-1) (alpha + B beta), exact. Bytes (p-1)/p n, the lower bound.
 *
 * Algorithm: recursive_doubling
 *   Rabenseifner's second half: over p' = 2^floor(log2 p) virtual ranks, stage j exchanges the
 *   2^j blocks held with the partner at distance 2^j. For p not a power of two the even ranks
 *   below 2 rem first send their block to the next rank and receive the rest of the vector from it
 *   at the end (virtual rank v stands for ranks 2v, 2v+1 when v < rem, else v + rem, so the
 *   ranges stay contiguous). Cost (p a power of two): log2(p) alpha + (p-1)/p n beta; otherwise
 *   3 alpha + B beta + (p-1)/p n beta more.
 *
 * Algorithm: bruck
 *   Bruck et al.: scratch holds the blocks rotated, block r + i (mod p) at position i. In stage j
 *   (d = 2^j < p) rank r sends its first min(d, p - d) positions to rank r - d and receives rank
 *   r + d's into positions d ..; two copies put the blocks in their places at the end. Any p,
 *   ceil(log2 p) messages. Cost: ceil(log2 p) alpha + (p-1)/p n beta + (p+1)/p n gamma (the
 *   copies: the own block in, all p out), exact for every p.
 *
 * Algorithm: direct
 *   Every rank sends its block to every other rank (p-1 messages out and in). Cost:
 *   (p-1) (alpha + B beta). Small p.
 *
 * Tags: the ring numbers its messages to r+1 (mod MPIAR__TAG_LIMIT, a repeat depending on the
 * earlier message); recursive_doubling uses 0 for the fold, 1 + stage, and 1 + log2 p',
 * 2 + log2 p' for the two pieces sent back; bruck its stage; direct 0.
 */
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

void mpiar__shape_allgather(mpiar__schedule_t *s) {
  const size_t all = (size_t)s->nranks * s->count;
  s->in_elems = s->in_place ? all : s->count;
  s->out_elems = all;
}

/* The empty and one-rank cases; otherwise, when @p copy_own, the COPY of this rank's block out of
 * place (its index in *copy, -1 in place). */
static int ag_start(mpiar__schedule_t *s, int copy_own, int *done, long *copy) {
  mpiar__shape_allgather(s);
  s->scratch_elems = 0;
  *done = s->count == 0;
  *copy = -1;
  if (s->count == 0 || s->in_place || (!copy_own && s->nranks > 1)) {
    *done = s->count == 0 || (s->in_place && s->nranks == 1);
    return MPIAR_SUCCESS;
  }
  *copy =
      mpiar__sched_copy(s, mpiar__out((size_t)s->rank * s->count), mpiar__in(0), s->count, NULL, 0);
  *done = s->nranks == 1;
  return *copy < 0 ? (int)*copy : MPIAR_SUCCESS;
}

/* This rank's block before any message: INPUT, or OUTPUT at r c in place. */
static mpiar__operand_t ag_own(const mpiar__schedule_t *s) {
  return s->in_place ? mpiar__out((size_t)s->rank * s->count) : mpiar__in(0);
}

static int mod(int a, int p) {
  return ((a % p) + p) % p;
}

int mpiar__build_ag_ring(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t c = s->count;
  int rc = MPIAR_SUCCESS, done = 0;
  long *sendq = NULL, *recvq = NULL, copy = -1;
  MPIAR__CHECK(ag_start(s, 1, &done, &copy));
  if (done) {
    return MPIAR_SUCCESS;
  }
  sendq = malloc((size_t)p * sizeof *sendq);
  recvq = malloc((size_t)p * sizeof *recvq);
  if (sendq == NULL || recvq == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "allgather ring schedule of %d steps", p);
  }
  const int next = (r + 1) % p, prev = (r + p - 1) % p;
  for (int k = 0; k < p - 1; k++) {
    const int sb = mod(r - k, p), rb = mod(r - k - 1, p);
    const int tag = k % MPIAR__TAG_LIMIT;
    const long sdeps[] = {k > 0 ? recvq[k - 1] : -1,
                          k >= MPIAR__TAG_LIMIT ? sendq[k - MPIAR__TAG_LIMIT] : -1};
    MPIAR__STEP(sendq[k],
                mpiar__sched_send(s, next, tag, k == 0 ? ag_own(s) : mpiar__out((size_t)sb * c), c,
                                  sdeps, 2));
    const long rdeps[] = {k >= MPIAR__TAG_LIMIT ? recvq[k - MPIAR__TAG_LIMIT] : -1};
    MPIAR__STEP(recvq[k], mpiar__sched_recv(s, prev, tag, mpiar__out((size_t)rb * c), c, rdeps, 1));
  }
cleanup:
  free(sendq);
  free(recvq);
  return rc;
}

int mpiar__build_ag_recursive_doubling(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t c = s->count, all = (size_t)p * c;
  int rc = MPIAR_SUCCESS, done = 0;
  long copy = -1, id = -1;
  long *writes = NULL; /* every step that wrote OUTPUT: a send of OUTPUT follows them all */
  size_t nw = 0;
  MPIAR__CHECK(ag_start(s, 1, &done, &copy));
  if (done) {
    return MPIAR_SUCCESS;
  }
  const int pof2 = mpiar__pof2_floor(p), rem = p - pof2, L = mpiar__log2i(pof2);
  writes = malloc((size_t)(L + 4) * sizeof *writes);
  if (writes == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "allgather schedule");
  }
  writes[nw++] = copy;
  int v;
  if (r < 2 * rem) {
    if (r % 2 == 0) {
      long sid;
      MPIAR__STEP(sid, mpiar__sched_send(s, r + 1, 0, ag_own(s), c, NULL, 0));
      MPIAR__STEP(id, mpiar__sched_recv(s, r + 1, 1 + L, mpiar__out(0), (size_t)r * c, NULL, 0));
      MPIAR__STEP(id, mpiar__sched_recv(s, r + 1, 2 + L, mpiar__out((size_t)(r + 1) * c),
                                        all - (size_t)(r + 1) * c, NULL, 0));
      goto cleanup;
    }
    MPIAR__STEP(id, mpiar__sched_recv(s, r - 1, 0, mpiar__out((size_t)(r - 1) * c), c, NULL, 0));
    writes[nw++] = id;
    v = r / 2;
  } else {
    v = r - rem;
  }
  for (int mask = 1, stage = 0; mask < pof2; mask *= 2, stage++) {
    const int base = v & ~(mask - 1), wbase = base ^ mask,
              peer = mpiar__fold_real_rank(v ^ mask, rem);
    const size_t soff = (size_t)mpiar__fold_first_block(base, rem) * c;
    const size_t slen = (size_t)mpiar__fold_first_block(base + mask, rem) * c - soff;
    const size_t roff = (size_t)mpiar__fold_first_block(wbase, rem) * c;
    const size_t rlen = (size_t)mpiar__fold_first_block(wbase + mask, rem) * c - roff;
    /* The first send of an unfolded rank reads only its own block (INPUT out of place). */
    const mpiar__operand_t src = nw == 1 ? ag_own(s) : mpiar__out(soff);
    MPIAR__STEP(id, mpiar__sched_send(s, peer, 1 + stage, src, slen, nw == 1 ? NULL : writes,
                                      nw == 1 ? 0 : nw));
    MPIAR__STEP(id, mpiar__sched_recv(s, peer, 1 + stage, mpiar__out(roff), rlen, NULL, 0));
    writes[nw++] = id;
  }
  if (r < 2 * rem) { /* the rest of the vector to the folded rank r - 1 */
    MPIAR__STEP(id,
                mpiar__sched_send(s, r - 1, 1 + L, mpiar__out(0), (size_t)(r - 1) * c, writes, nw));
    MPIAR__STEP(id, mpiar__sched_send(s, r - 1, 2 + L, mpiar__out((size_t)r * c),
                                      all - (size_t)r * c, writes, nw));
  }
cleanup:
  free(writes);
  return rc;
}

int mpiar__build_ag_bruck(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t c = s->count;
  int rc = MPIAR_SUCCESS, done = 0;
  long copy = -1, id = -1;
  long *writes = NULL; /* the steps that wrote scratch: a send follows them all */
  size_t nw = 0;
  MPIAR__CHECK(ag_start(s, 0, &done, &copy));
  if (done) {
    return MPIAR_SUCCESS;
  }
  writes = malloc((size_t)(32 + 2) * sizeof *writes);
  if (writes == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "allgather schedule");
  }
  /* Scratch position i holds block (r + i) mod p; position 0 this rank's own. */
  s->scratch_elems = (size_t)p * c;
  MPIAR__STEP(writes[nw], mpiar__sched_copy(s, mpiar__scratch(0), ag_own(s), c, NULL, 0));
  nw++;
  for (int d = 1, stage = 0; d < p; d *= 2, stage++) {
    const int k = d < p - d ? d : p - d;
    MPIAR__STEP(id, mpiar__sched_send(s, mod(r - d, p), stage, mpiar__scratch(0), (size_t)k * c,
                                      writes, nw));
    MPIAR__STEP(writes[nw], mpiar__sched_recv(s, (r + d) % p, stage, mpiar__scratch((size_t)d * c),
                                              (size_t)k * c, NULL, 0));
    nw++;
  }
  /* Unrotate: positions 0 .. p-1-r are blocks r .. p-1 (the own block too, which in place is
   * rewritten with its own bits), positions p-r .. p-1 blocks 0 .. r-1. */
  MPIAR__STEP(id, mpiar__sched_copy(s, mpiar__out((size_t)r * c), mpiar__scratch(0),
                                    (size_t)(p - r) * c, writes, nw));
  MPIAR__STEP(id, mpiar__sched_copy(s, mpiar__out(0), mpiar__scratch((size_t)(p - r) * c),
                                    (size_t)r * c, writes, nw));
cleanup:
  free(writes);
  return rc;
}

int mpiar__build_ag_direct(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t c = s->count;
  int rc = MPIAR_SUCCESS, done = 0;
  long copy = -1, id = -1;
  MPIAR__CHECK(ag_start(s, 1, &done, &copy));
  if (done) {
    return MPIAR_SUCCESS;
  }
  for (int k = 1; k < p; k++) {
    MPIAR__STEP(id, mpiar__sched_send(s, (r + k) % p, 0, ag_own(s), c, NULL, 0));
  }
  for (int k = 1; k < p; k++) {
    const int from = (r - k + p) % p;
    MPIAR__STEP(id, mpiar__sched_recv(s, from, 0, mpiar__out((size_t)from * c), c, NULL, 0));
  }
cleanup:
  return rc;
}

double mpiar__cost_ag_ring(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                           const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const mpiar__cost_params_t k = mpiar__cost_link(c, topo);
  const double p = nranks;
  const mpiar__cost_params_t l = mpiar__cost_at(&k, (double)bytes / p); /* blocks */
  return (p - 1) * (l.alpha + (double)bytes / p * l.beta);
}

double mpiar__cost_ag_recursive_doubling(int nranks, size_t bytes, size_t elem_size,
                                         size_t segment_bytes, const mpiar__cost_params_t *c,
                                         const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const mpiar__cost_params_t l = mpiar__cost_link(c, topo);
  const int pof2 = mpiar__pof2_floor(nranks);
  const double p = nranks, n = (double)bytes;
  double t = mpiar__log2i(pof2) * l.alpha + (p - 1) / p * n * l.beta;
  for (int j = 0; j < mpiar__log2i(pof2); j++) {
    t += mpiar__cost_handshake(&l, n / p * (double)(1 << j)); /* the doubling's messages */
  }
  if (pof2 != nranks) {
    t += 3 * l.alpha + n / p * l.beta + (p - 1) / p * n * l.beta;
    t += 2 * mpiar__cost_handshake(&l, n / p) + mpiar__cost_handshake(&l, (p - 1) / p * n);
  }
  return t;
}

double mpiar__cost_ag_bruck(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                            const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const mpiar__cost_params_t l = mpiar__cost_link(c, topo);
  int stages = 0;
  for (int d = 1; d < nranks; d *= 2) {
    stages++;
  }
  const double p = nranks, n = (double)bytes;
  double h = 0.0; /* stage j sends min(2^j, p - 2^j) blocks */
  for (int d = 1; d < nranks; d *= 2) {
    h += mpiar__cost_handshake(&l, (d < nranks - d ? d : nranks - d) * n / p);
  }
  return stages * l.alpha + (p - 1) / p * n * l.beta + (p + 1) / p * n * l.gamma + h;
}

double mpiar__cost_ag_direct(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                             const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  return mpiar__cost_ag_ring(nranks, bytes, elem_size, segment_bytes, c, topo);
}
