/*
 * Algorithm: reproducible Rabenseifner (recursive halving at distance 1 first, then recursive
 * doubling allgather), the reproducible-mode replacement of `rabenseifner`
 *
 * Rabenseifner's halving pairs rank v with v XOR p'/2 first, which combines x0 with x_{p'/2}
 * before x1: a fixed order for every element, but not the canonical one (see
 * src/reduce_kernels/canonical.c). Here halving step j pairs virtual rank v with v XOR 2^j, so the
 * partials combined at step j are those of the aligned groups of 2^j consecutive virtual ranks,
 * lower group first: the balanced pairwise tree over the virtual ranks. In step j rank v keeps
 * the lower half of its block range when bit j of v is 0, so after log2(p') steps it holds block
 * bitrev(v) of p' blocks; the allgather undoes the halving in reverse order (partner
 * v XOR 2^(L-1-t) in step t), doubling the held range each time.
 *
 * Non-power-of-two p (rem = p - p' extra ranks): the half-vector pre-step of rabenseifner.c. Pair
 * (2i, 2i+1), i < rem, swaps halves (the halves of halving step 0: blocks [0, p'/2) and
 * [p'/2, p')) and reduces x_{2i} op x_{2i+1}: the fold of the canonical tree. The pair is virtual
 * rank i; in step 0 the member holding the half the pair keeps (lower when i is even) continues,
 * the other sends its half to the partner's continuing member and receives the result at the end.
 * The tree computed is exactly the canonical one: y_i = x_{2i} op x_{2i+1} (i < rem),
 * y_i = x_{i+rem} otherwise, then the balanced tree over y, lower half first.
 *
 * Restrictions: none. Any p, any count (blocks may be empty), in place or not. Every block is
 * reduced on one rank and copied to the others, so every rank has the same bits.
 *
 * Memory: scratch for one received half (ceil(n/2) elements). Out of place, the first halving
 * step receives straight into OUTPUT; each allgather receive waits only for the sends that read
 * the range it overwrites.
 *
 * Cost: that of rabenseifner (mpiar__cost_rabenseifner), the message pattern being the same up to
 * the order of the partners: 2 log2(p) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma for p a power
 * of two (bytes sent per rank 2 (p-1)/p n, the lower bound), plus alpha + n/2 (beta + gamma)
 * before and alpha + n beta after otherwise. The simulator's critical path equals the first
 * formula for powers of two (tests/sim/test_sim_repro.c). For other p it differs from
 * rabenseifner's in the simulator although the messages are the same: here the single ranks in
 * groups without pairs run ahead (rabenseifner makes every single wait for a pair in its first
 * step), and an early message that takes a receive port in the one-port model can delay the
 * critical one by a message time. Measured for p = 3..127: up to 25% slower at 8 bytes and 16%
 * at 1 KiB (sizes where recursive doubling, canonical itself, is the algorithm of choice), 7% at
 * 64 KiB, and from 15% faster to 0.6% slower at 1 MiB and 16 MiB.
 *
 * Tags: pre-step 0, halving step j 1 + j, allgather step t 1 + L + t, result to the waiting
 * member 1 + 2L (L = log2 p'): every pair of ranks exchanges at most one message per tag and
 * direction.
 */
#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

typedef struct rr {
  mpiar__schedule_t *s;
  int pof2, rem, L;
  size_t n, h; /* h: split of halving step 0 (start of block p'/2) */
  int v;       /* virtual rank */
  int lo, hi;  /* block range (of p' blocks) this rank holds */
  int first;   /* the first halving step this rank runs itself */
  long last;   /* the last reduction (OUTPUT holds this rank's partial from then on) */
  int in_out;
  struct {
    long id;
    mpiar__operand_t src;
    size_t len;
  } sends[2 + 64]; /* every reduce-scatter send and the memory it reads */
  int nsends;
} rr_t;

/* The member of virtual rank x holding half `upper` after the pre-step; a single rank holds both.
 */
static int holder(const rr_t *st, int x, int upper) {
  return x >= st->rem ? x + st->rem : 2 * x + upper;
}

/* The rank that takes part for virtual rank x after halving step 0 (it keeps half x & 1). */
static int member(const rr_t *st, int x) {
  return holder(st, x, x & 1);
}

static size_t range_off(const rr_t *st, int lo) {
  return mpiar__block_off(st->n, st->pof2, lo);
}
static size_t range_len(const rr_t *st, int lo, int hi) {
  return mpiar__block_off(st->n, st->pof2, hi) - mpiar__block_off(st->n, st->pof2, lo);
}

static void note_send(rr_t *st, long id, mpiar__operand_t src, size_t len) {
  st->sends[st->nsends].id = id;
  st->sends[st->nsends].src = src;
  st->sends[st->nsends++].len = len;
}

/*
 * Pre-step of a member of pair v (rank < 2 rem) and, for the pair, halving step 0. Sets *waiting
 * when this member hands its half over and only receives the result (its schedule is complete).
 */
static int pre_step(rr_t *st, int *waiting) {
  mpiar__schedule_t *s = st->s;
  const int r = s->rank, mate = r ^ 1, upper = r & 1, tag_post = 1 + 2 * st->L;
  const size_t n = st->n, h = st->h;
  const size_t koff = upper ? h : 0, klen = upper ? n - h : h;
  const size_t goff = upper ? 0 : h, glen = upper ? h : n - h;
  int rc = MPIAR_SUCCESS;
  long snd, rcv, id;
  st->v = r / 2;
  MPIAR__STEP(snd, mpiar__sched_send(s, mate, 0, mpiar__own(s, goff), glen, NULL, 0));
  note_send(st, snd, mpiar__own(s, goff), glen);
  MPIAR__STEP(rcv, mpiar__sched_recv(s, mate, 0, mpiar__scratch(0), klen, NULL, 0));
  const long deps[] = {rcv};
  /* The fold node of the canonical tree: x_{2i} op x_{2i+1}, the even rank's data first. */
  MPIAR__STEP(st->last, upper ? mpiar__sched_reduce(s, mpiar__out(koff), mpiar__scratch(0),
                                                    mpiar__own(s, koff), klen, deps, 1)
                              : mpiar__sched_reduce(s, mpiar__out(koff), mpiar__own(s, koff),
                                                    mpiar__scratch(0), klen, deps, 1));
  st->in_out = 1;
  /* Halving step 0 at distance 1: virtual rank v keeps the half v & 1. */
  const int w = st->v ^ 1, keep_upper = st->v & 1;
  const long ldeps[] = {st->last};
  if (upper == keep_upper) {
    MPIAR__STEP(
        rcv, mpiar__sched_recv(s, holder(st, w, keep_upper), 1, mpiar__scratch(0), klen, ldeps, 1));
    const long rdeps[] = {rcv};
    MPIAR__STEP(st->last, st->v < w ? mpiar__sched_reduce(s, mpiar__out(koff), mpiar__out(koff),
                                                          mpiar__scratch(0), klen, rdeps, 1)
                                    : mpiar__sched_reduce(s, mpiar__out(koff), mpiar__scratch(0),
                                                          mpiar__out(koff), klen, rdeps, 1));
    st->first = 1;
    return MPIAR_SUCCESS;
  }
  /* Hand the reduced half to the partner's member that keeps it, then wait for the result. */
  const long pre_snd = snd;
  MPIAR__STEP(snd, mpiar__sched_send(s, member(st, w), 1, mpiar__out(koff), klen, ldeps, 1));
  const long wdeps[] = {pre_snd, snd}; /* the result overwrites what both sends read */
  MPIAR__STEP(id, mpiar__sched_recv(s, mate, tag_post, mpiar__out(0), n, wdeps, 2));
  *waiting = 1;
cleanup:
  return rc;
}

/* Recursive halving over the virtual ranks at distance 1, 2, 4, ..., from step st->first. */
static int halving(rr_t *st) {
  mpiar__schedule_t *s = st->s;
  int rc = MPIAR_SUCCESS;
  st->lo = 0;
  st->hi = st->pof2;
  for (int j = 0; j < st->L; j++) {
    const int mid = st->lo + (st->hi - st->lo) / 2, keep_upper = (st->v >> j) & 1;
    const int klo = keep_upper ? mid : st->lo, khi = keep_upper ? st->hi : mid;
    const int glo = keep_upper ? st->lo : mid, ghi = keep_upper ? mid : st->hi;
    st->lo = klo;
    st->hi = khi;
    if (j < st->first) {
      continue; /* a pair member ran step 0 in pre_step() */
    }
    const int w = st->v ^ (1 << j);
    /* Step 0 meets a pair split in halves: send to the member keeping the half sent, receive
     * from the member holding the half kept. Later steps talk to the continuing member. */
    const int to = j == 0 ? holder(st, w, !keep_upper) : member(st, w);
    const int from = j == 0 ? holder(st, w, keep_upper) : member(st, w);
    const size_t koff = range_off(st, klo), klen = range_len(st, klo, khi);
    const size_t goff = range_off(st, glo), glen = range_len(st, glo, ghi);
    const mpiar__operand_t gsrc = st->in_out ? mpiar__out(goff) : mpiar__own(s, goff);
    const mpiar__operand_t kcur = st->in_out ? mpiar__out(koff) : mpiar__own(s, koff);
    const long deps[] = {st->last};
    long snd, rcv;
    MPIAR__STEP(snd, mpiar__sched_send(s, to, 1 + j, gsrc, glen, deps, 1));
    note_send(st, snd, gsrc, glen);
    /* Out of place, before the first reduction OUTPUT is free: receive straight into it. */
    const mpiar__operand_t landing =
        (st->in_out || s->in_place) ? mpiar__scratch(0) : mpiar__out(koff);
    MPIAR__STEP(rcv, mpiar__sched_recv(s, from, 1 + j, landing, klen, deps, 1));
    const long rdeps[] = {rcv};
    MPIAR__STEP(st->last,
                st->v < w
                    ? mpiar__sched_reduce(s, mpiar__out(koff), kcur, landing, klen, rdeps, 1)
                    : mpiar__sched_reduce(s, mpiar__out(koff), landing, kcur, klen, rdeps, 1));
    st->in_out = 1;
  }
  rc = mpiar__sched_mark_final(s, st->last); /* the last reduction finished block bitrev(v) */
cleanup:
  return rc;
}

/* Recursive doubling allgather in the reverse order of the halving; then the pair's result. */
static int allgather(rr_t *st) {
  mpiar__schedule_t *s = st->s;
  int rc = MPIAR_SUCCESS;
  long written[64 + 1]; /* the last reduction and every allgather receive */
  int nwritten = 0;
  written[nwritten++] = st->last;
  for (int t = 0; t < st->L; t++) {
    const int peer = member(st, st->v ^ (1 << (st->L - 1 - t)));
    const int width = st->hi - st->lo, plo = st->lo ^ width;
    const size_t off = range_off(st, st->lo), len = range_len(st, st->lo, st->hi);
    const size_t poff = range_off(st, plo), plen = range_len(st, plo, plo + width);
    long snd, rcv;
    MPIAR__STEP(snd, mpiar__sched_send(s, peer, 1 + st->L + t, mpiar__out(off), len, written,
                                       (size_t)nwritten));
    /* The partner's range was given away while halving: wait for the sends that read it. */
    long deps[2 + 64];
    size_t nd = 0;
    for (int i = 0; i < st->nsends; i++) {
      const size_t soff = st->sends[i].src.off, slen = st->sends[i].len;
      if (st->sends[i].src.buf == MPIAR__BUF_OUTPUT && slen > 0 && plen > 0 && soff < poff + plen &&
          poff < soff + slen) {
        deps[nd++] = st->sends[i].id;
      }
    }
    MPIAR__STEP(rcv, mpiar__sched_recv(s, peer, 1 + st->L + t, mpiar__out(poff), plen,
                                       nd ? deps : NULL, nd));
    written[nwritten++] = rcv;
    (void)snd;
    st->lo = st->lo < plo ? st->lo : plo;
    st->hi = st->lo + 2 * width;
  }
  if (s->rank < 2 * st->rem) {
    long id;
    MPIAR__STEP(id, mpiar__sched_send(s, s->rank ^ 1, 1 + 2 * st->L, mpiar__out(0), st->n, written,
                                      (size_t)nwritten));
  }
cleanup:
  return rc;
}

int mpiar__build_repro_rabenseifner(mpiar__schedule_t *s) {
  int rc = MPIAR_SUCCESS, done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  rr_t st = {0};
  st.s = s;
  st.n = s->count;
  st.pof2 = mpiar__pof2_floor(s->nranks);
  st.rem = s->nranks - st.pof2;
  st.L = mpiar__log2i(st.pof2);
  st.h = mpiar__block_off(st.n, st.pof2, st.pof2 / 2);
  st.v = s->rank - st.rem;
  st.last = -1;
  s->scratch_elems = st.h > st.n - st.h ? st.h : st.n - st.h;
  if (s->rank < 2 * st.rem) {
    int waiting = 0;
    MPIAR__CHECK(pre_step(&st, &waiting));
    if (waiting) {
      return MPIAR_SUCCESS;
    }
  }
  MPIAR__CHECK(halving(&st));
  MPIAR__CHECK(allgather(&st));
cleanup:
  return rc;
}
