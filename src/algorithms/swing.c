/*
 * Algorithm: Swing (bandwidth-optimal "swing" and "swing_fold", latency-optimal "swing_latency")
 *
 * Reference: D. De Sensi, T. Bonato, D. Saam, T. Hoefler, "Swing: Short-cutting Rings for Higher
 * Bandwidth Allreduce", NSDI '24 (arXiv:2401.09356).
 *
 * Over p' = 2^L ranks, rank v talks in step s (0 <= s < L) to
 *   pi(v, s) = v + rho(s) (mod p') for even v,  v - rho(s) (mod p') for odd v,
 *   rho(s) = sum_{i <= s} (-2)^i = 1, -1, 3, -5, 11, -21, ...
 * so the peer swings between the two sides of v at distances |rho(s)| = 1, 1, 3, 5, 11, 21, ...
 * (about 2^(s+1) / 3 instead of recursive doubling's 2^s). On a ring or torus of p' nodes in rank
 * order a message of step s crosses |rho(s)| links instead of 2^s: the same steps and bytes as
 * recursive doubling and Rabenseifner, fewer hops, hence less traffic per link (the paper's point;
 * mpiar-sim --topology torus:... measures it).
 *
 * The sets R(v, s) = {v} at s = L, R(v, s+1) u R(pi(v, s), s+1) below (the ranks v reaches through
 * steps s .. L-1) are disjoint halves of each other's union and nested: every member of R(v, s)
 * has the same R(., s). (The forward sets, through steps 0 .. s, are not nested from p' = 8 on:
 * after two steps rank 0 has combined {0, 1, 6, 7} and rank 1 {0, 1, 2, 3}.)
 *
 * swing (bandwidth-optimal): reduce-scatter in steps s = 0 .. L-1, then allgather in steps
 * L-1 .. 0, with the paper's peers. The p' blocks are laid out so that every R(v, s) is one
 * contiguous range of blocks (the half holding the smaller rank first), so each step sends one
 * contiguous range: in step s rank v keeps the half of its range for R(v, s+1) and sends the
 * other half, R(pi(v, s), s+1)'s, to pi(v, s). Each block is reduced by one chain of ranks and
 * copied to the others, so every rank has the same bits. This is Rabenseifner's schedule with
 * the Swing peers and block order (the paper sends the same blocks, in scattered pieces).
 *
 * swing_latency (latency-optimal): L full-vector exchanges, both partners reduce. The steps run
 * in the order s = L-1 .. 0 (distances ..., 5, 3, 1, 1): the groups merged are then the nested
 * R(v, s), so both partners and every member of a group combine the same partials in the same
 * order and get the same bits; in the paper's order 0 .. L-1 the groups are not nested (above)
 * and ranks would compute different floating sums. The steps and distances are the paper's, so
 * the cost is the same in any model that prices a step by its distance.
 *
 * Operand order (powers of two and the fold): every reduction puts the partial of the group
 * holding the smaller rank in operand a (groups are disjoint, so rank 0's data is always first:
 * its NaN payload wins).
 *
 * Restrictions: none; any count (blocks may be empty), in place or not. Not an automatic
 * candidate (MPIAR__ALG_MANUAL): named only, until measured. MPIAR__ALG_NO_QUOTIENT: on two
 * levels a node's ranks meet peers on two other nodes in one step, whose messages queue at the
 * node port in an order the quotient simulation cannot mirror, so the simulator runs every rank.
 * On a torus the peers here are 1-D, in rank order; the multi-dimensional form (one grid
 * dimension per step, 2 d collectives on parts of the vector) is swing_md.c, over the same
 * builders (swing.h: a pattern says which dimension each step swings in).
 *
 * The paper's method for p not a power of two (swing at even p): ceil(log2 p) = S steps with the
 * peers taken mod p (for even p, r +- rho(s) mod p still pairs the ranks: an even rank's peer is
 * odd and its peer is the rank again). As the authors' reference code does, rank r sends in step
 * s the blocks of the ranks that its peer reaches through steps s+1 .. S-1, less the blocks a
 * later step of r reaches (the last step wins) and r's own: t_r(d), the step in which r sends
 * block d, is defined for every d != r (checked when the table is built). For each block d the
 * edges r -> pi(r, t_r(d)) form a tree into d whose steps grow along every path (the peer q of
 * step t reaches d through steps after t, so t_q(d) > t): every rank receives each child's
 * partial before it sends its own, and each block is reduced once along its tree, then sent back
 * along it in the allgather (steps S-1 .. 0, each rank returning, complete, what it received in
 * that step). Each rank sends p - 1 of the p blocks in each phase: 2 (p-1)/p n bytes, the
 * allreduce lower bound, in 2 S messages. Translation by an even amount and the reflection
 * r -> 1 - r map the peers onto themselves, so rank 0's table gives every rank's:
 * t_r(d) = t_0(d - r) for even r, t_0(r - d) for odd r (mod p).
 *   Those block sets are not contiguous (at p = 1000 rank 0's ten sends hold 749 runs of blocks
 * in block order; the best order that keeps the translation symmetry, d -> a d mod p, leaves
 * 500). Choice by cost: one message per run costs an alpha per run and phase (about 1480 more
 * alphas at p = 1000, 3 ms at 2 us); packing costs a local copy of the packed bytes (gamma per
 * byte in the model; the reduce-scatter's pack, the allgather's pack and unpack: at most
 * 3 (p-1)/p n bytes), cheaper while a run holds less than 2 alpha / (3 gamma) bytes (27 KB at
 * the simulator's default 2 us and 5e-11 s/B), i.e. for vectors up to about 27 KB times the
 * runs, 20 MB at p = 1000. So a message of one run (in one buffer) is sent as it is, any other is
 * packed: the reduce-scatter copies the blocks into scratch and sends one message, the receiver
 * reduces each run from the received scratch (no copy); the allgather packs what it returns and
 * copies each run of what it receives into place. Each send waits for the previous step's
 * receive, so that no message reaches a peer a step early and queues ahead of that peer's
 * current message on its receive port.
 *   Odd p: r +- rho(s) mod p does not pair the ranks (p = 5: rank 4's peer is 0, whose peer is 1),
 * and the reference code has no pairing for it. swing runs the fold below there (swing_fold's
 * schedule); folding one rank into the even method (p - 1 ranks) was measured slower than the
 * fold into 2^floor(log2 p) at every size in the simulator (p = 11, 51, 97, 4 KiB .. 16 MiB:
 * 1.3 .. 1.7x), for 2 more alphas, the packing copies and the late start of the rank folded into.
 *
 * swing_fold, and swing at powers of two and odd p (rem = p - p'): the fold of recursive
 * doubling. Among the first 2 rem ranks each even rank sends its whole vector to the odd rank
 * above it, which reduces (the even rank's data in operand a) and takes part as virtual rank
 * r/2; ranks from 2 rem on are virtual rank r - rem; the result goes back at the end.
 * swing_latency keeps the fold at every p (the authors' latency-optimal code folds too): its
 * full-vector exchanges cannot leave out a contribution already counted, and with S = ceil(log2
 * p) steps mod p some ranks' data would reach a rank twice.
 *
 * Memory: swing (powers of two, fold): scratch for one half vector (ceil(n/2) elements), n with
 * a fold; swing (even p, the paper's method): each step's landing and packing areas, at most
 * 2 (p-1)/p n elements; swing_latency: n elements. No up-front copy: the first reduction reads
 * INPUT; out of place the fold's bandwidth variant's first receive lands in OUTPUT (as
 * Rabenseifner's).
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced or copied, n bytes,
 * L = log2 p'):
 *   swing, swing_fold:  2 L alpha + 2 (p'-1)/p' n beta + (p'-1)/p' n gamma
 *   swing_latency:      L (alpha + n beta + n gamma)
 *   the fold (p not a power of two; swing: odd p): + (alpha + n beta + n gamma) + (alpha + n beta)
 *   swing, even p not a power of two (S = ceil(log2 p), k_s of the p blocks sent in step s):
 *     2 S alpha + 2 (p-1)/p n beta + (p-1)/p n gamma + c n gamma,
 *     c = sum over s of k_s/p (2 [rank 0's send of step s is packed] + [its receive is])
 * Without a topology the simulator's critical path equals them for powers of two, and for
 * swing_latency at every p; the fold is slower than its formula (up to 1.42x where alphas
 * dominate: the folded ranks start late and ranks ahead of them queue on their receive ports in
 * later steps); the paper's method's alphas, bytes and reductions are exact, its copies partly
 * overlap the transfers: the simulator gives 0.75 .. 1 of the formula, 1 where alphas dominate
 * (tests/sim/test_sim_swing.c, every p to 130 and 190, 384). Two levels: on one node, or one
 * rank per node, the formulas with that level's alpha and beta; otherwise a step-synchronous
 * estimate as for Rabenseifner (each step the slower of an intra-node message and the busiest
 * node port; tests/sim/test_sim_hier_cost.c and, for the paper's method on 6 .. 24 ranks,
 * test_sim_swing.c hold it to 50 %). Bytes sent per rank: 2 (p'-1)/p' n with the fold (the
 * lower bound at powers of two), 2 (p-1)/p n with the paper's method, L n for swing_latency. The
 * flat model cannot tell Swing from Rabenseifner or recursive doubling; the routed torus model
 * can (docs/algorithms.md).
 *
 * Operand order of the paper's method: a reduction puts the partial holding rank 0's data in
 * operand a (the peer's, when rank 0's path to the block's owner passes the peer), else this
 * rank's own; so rank 0's NaN payload comes out everywhere (test_sim_swing.c, test_nan_order).
 *
 * Tags: 0 the fold, 1 + j the j-th exchange (reduce-scatter, then allgather), then the return:
 * 1 + 2L (swing with the fold), 1 + L (swing_latency); the paper's method: 1 + s the
 * reduce-scatter's step s, 1 + S + s the allgather's.
 */
#include "algorithms/swing.h"
#include "algorithms/util.h"
#include "base/common.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* rho(s) = sum_{i <= s} (-2)^i = (1 - (-2)^(s+1)) / 3. */
static long swing_rho(int s) {
  long t = 1, sum = 0;
  for (int i = 0; i <= s; i++) {
    sum += t;
    t *= -2;
  }
  return sum;
}

void mpiar__swing_pattern_1d(mpiar__swing_pattern_t *x, int P) {
  const int dims[1] = {P};
  mpiar__swing_pattern_grid(x, dims, 1, 0);
}

void mpiar__swing_pattern_grid(mpiar__swing_pattern_t *x, const int *dims, int d, int port) {
  int left[MPIAR__SWING_MAX_DIMS], used[MPIAR__SWING_MAX_DIMS], stride[MPIAR__SWING_MAX_DIMS];
  x->P = 1;
  x->L = 0;
  x->mirror = port >= d;
  for (int k = 0; k < d; k++) {
    stride[k] = x->P;
    x->P *= dims[k];
    left[k] = mpiar__log2i(dims[k]);
    used[k] = 0;
    x->L += left[k];
  }
  x->nd = d;
  for (int k = 0; k < d; k++) {
    x->dsize[k] = dims[k];
    x->dstride[k] = stride[k];
    x->before[0][k] = 0;
  }
  int k = port % d;
  for (int st = 0; st < x->L; st++) {
    while (left[k] == 0) {
      k = (k + 1) % d;
    }
    for (int i = 0; i < d; i++) {
      x->before[st + 1][i] = x->before[st][i] + (i == k);
    }
    x->dim[st] = k;
    x->rel[st] = used[k]++;
    x->size[st] = dims[k];
    x->stride[st] = stride[k];
    left[k]--;
    k = (k + 1) % d;
  }
}

void mpiar__swing_grid(int P, int d, int *dims) {
  const int L = mpiar__log2i(P);
  for (int k = 0; k < d; k++) {
    dims[k] = 1 << (L / d + (k < L % d ? 1 : 0));
  }
}

static int peer_1d(int c, int j, int D, int mirror);

/* The peer of virtual rank v in step st of pattern x. */
static int swing_peer(const mpiar__swing_pattern_t *x, int v, int st) {
  const int D = x->size[st], c = (v / x->stride[st]) % D;
  return v + (peer_1d(c, x->rel[st], D, x->mirror) - c) * x->stride[st];
}

/* The peer of coordinate c in the j-th step of a dimension of D ranks. */
static int peer_1d(int c, int j, int D, int mirror) {
  long d = swing_rho(j);
  if ((c % 2 != 0) != (mirror != 0)) {
    d = -d;
  }
  return (int)((((long)c + d) % D + D) % D);
}

/* The smallest coordinate reached from c through steps j .. e-1 of one dimension. */
static int reach_1d(int c, int j, int e, int D, int mirror) {
  if (j >= e) {
    return c;
  }
  const int a = reach_1d(c, j + 1, e, D, mirror);
  const int b = reach_1d(peer_1d(c, j, D, mirror), j + 1, e, D, mirror);
  return a < b ? a : b;
}

/* The smallest coordinate combined into c through steps 0 .. j-1 of one dimension. */
static int forward_1d(int c, int j, int D, int mirror) {
  if (j <= 0) {
    return c;
  }
  const int a = forward_1d(c, j - 1, D, mirror);
  const int b = forward_1d(peer_1d(c, j - 1, D, mirror), j - 1, D, mirror);
  return a < b ? a : b;
}

/*
 * min R(v, s): the smallest rank v reaches through steps s .. L-1. Each step moves one
 * coordinate, so R(v, s) is the product of each dimension's own reach, and its smallest rank the
 * sum of the smallest coordinates (times their strides): dsize evaluations per dimension at most.
 */
static int reach_min(const mpiar__swing_pattern_t *x, int v, int s) {
  int m = 0;
  for (int k = 0; k < x->nd; k++) {
    const int c = (v / x->dstride[k]) % x->dsize[k];
    m += x->dstride[k] * reach_1d(c, x->before[s][k], x->before[x->L][k], x->dsize[k], x->mirror);
  }
  return m;
}

/* min H(v, s): the smallest rank whose data v has combined through steps 0 .. s (v at s < 0),
 * by the same product. */
static int forward_min(const mpiar__swing_pattern_t *x, int v, int s) {
  int m = 0;
  for (int k = 0; k < x->nd; k++) {
    const int c = (v / x->dstride[k]) % x->dsize[k];
    m += x->dstride[k] * forward_1d(c, s < 0 ? 0 : x->before[s + 1][k], x->dsize[k], x->mirror);
  }
  return m;
}

/* The real rank of virtual rank w after the fold. */
static int real_rank(int w, int rem) {
  return w < rem ? 2 * w + 1 : w + rem;
}

int mpiar__swing_fold(mpiar__schedule_t *s, int rem, int tag_post, int *v, long *last, int *in_out,
                      int *rc_out) {
  const int r = s->rank;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  long id = -1;
  *v = r - rem;
  if (r < 2 * rem && r % 2 == 0) {
    long snd;
    MPIAR__STEP(snd, mpiar__sched_send(s, r + 1, 0, mpiar__own(s, 0), n, NULL, 0));
    const long deps[] = {s->in_place ? snd : -1}; /* the result overwrites what the send reads */
    MPIAR__STEP(id, mpiar__sched_recv(s, r + 1, tag_post, mpiar__out(0), n, deps, 1));
    *rc_out = MPIAR_SUCCESS;
    return 1;
  }
  if (r < 2 * rem) {
    long rcv;
    MPIAR__STEP(rcv, mpiar__sched_recv(s, r - 1, 0, mpiar__scratch(0), n, NULL, 0));
    const long deps[] = {rcv};
    MPIAR__STEP(*last, mpiar__sched_reduce(s, mpiar__out(0), mpiar__scratch(0), mpiar__own(s, 0), n,
                                           deps, 1));
    *in_out = 1;
    *v = r / 2;
  }
cleanup:
  *rc_out = rc;
  return rc != MPIAR_SUCCESS;
}

int mpiar__swing_unfold(mpiar__schedule_t *s, int rem, int tag_post, const long *deps,
                        size_t ndeps) {
  if (s->rank >= 2 * rem) {
    return MPIAR_SUCCESS;
  }
  const long id = mpiar__sched_send(s, s->rank - 1, tag_post, mpiar__out(0), s->count, deps, ndeps);
  return id < 0 ? (int)id : MPIAR_SUCCESS;
}

int mpiar__swing_build_full(mpiar__schedule_t *s, const mpiar__swing_pattern_t *x) {
  const int p = s->nranks;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  s->scratch_elems = n;
  const int P = x->P, rem = p - P, L = x->L;
  const int tag_post = 1 + L;
  int v = 0, in_out = 0;
  long last = -1;
  if (mpiar__swing_fold(s, rem, tag_post, &v, &last, &in_out, &rc)) {
    return rc;
  }
  for (int j = 0; j < L; j++) {
    const int st = L - 1 - j; /* the paper's step, largest distance first (header) */
    const int w = swing_peer(x, v, st), peer = real_rank(w, rem);
    const mpiar__operand_t cur = in_out ? mpiar__out(0) : mpiar__own(s, 0);
    long snd, rcv;
    const long sdeps[] = {last};
    MPIAR__STEP(snd, mpiar__sched_send(s, peer, 1 + j, cur, n, sdeps, 1));
    /* The scratch vector is free once the previous reduction has read it. */
    MPIAR__STEP(rcv, mpiar__sched_recv(s, peer, 1 + j, mpiar__scratch(0), n, sdeps, 1));
    /* The reduction overwrites OUTPUT, which the send may be reading. */
    const long rdeps[] = {rcv, (in_out || s->in_place) ? snd : -1};
    if (reach_min(x, v, st + 1) < reach_min(x, w, st + 1)) {
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(0), cur, mpiar__scratch(0), n, rdeps, 2));
    } else {
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(0), mpiar__scratch(0), cur, n, rdeps, 2));
    }
    in_out = 1;
  }
  MPIAR__CHECK(mpiar__sched_mark_final(s, last));
  const long deps[] = {last};
  MPIAR__CHECK(mpiar__swing_unfold(s, rem, tag_post, deps, 1));
cleanup:
  return rc;
}

int mpiar__build_swing_latency(mpiar__schedule_t *s) {
  mpiar__swing_pattern_t x;
  mpiar__swing_pattern_1d(&x, mpiar__pof2_floor(s->nranks > 0 ? s->nranks : 1));
  return mpiar__swing_build_full(s, &x);
}

/* A send of the reduce-scatter and the memory it reads (the allgather's receives wait for it). */
typedef struct rs_send {
  long id;
  mpiar__operand_t src;
  size_t len;
} rs_send_t;

/* One sub-collective: elements [off, off + len) of the vector, scratch from soff, tags from tag0.
 */
typedef struct part {
  size_t off, len, soff;
  int tag0;
} part_t;

/* Block b's offset inside a part, as an offset into the whole vector. */
static size_t part_block(const part_t *q, int P, int b) {
  return q->off + mpiar__block_off(q->len, P, b);
}

/*
 * The allgather of one part: steps L-1 .. 0, the range of R(v, s+1) ([lo[s+1], hi[s+1]) blocks)
 * sent to the peer, the sibling range received, after every reduction and receive that wrote what
 * is sent. Appends the receives (and @p last) to written[].
 */
static int allgather(mpiar__schedule_t *s, const mpiar__swing_pattern_t *x, const part_t *q, int v,
                     int rem, const int *lo, const int *hi, const rs_send_t *sends, int nsends,
                     long last, long *written, int *nwritten) {
  const int P = x->P, L = x->L;
  int rc = MPIAR_SUCCESS;
  const int first = *nwritten;
  written[(*nwritten)++] = last;
  for (int j = 0; j < L; j++) {
    const int st = L - 1 - j;
    const int peer = real_rank(swing_peer(x, v, st), rem);
    const int plo = lo[st + 1] == lo[st] ? hi[st + 1] : lo[st];
    const int phi = plo + (hi[st + 1] - lo[st + 1]);
    const size_t off = part_block(q, P, lo[st + 1]);
    const size_t len = part_block(q, P, hi[st + 1]) - off;
    const size_t poff = part_block(q, P, plo);
    const size_t plen = part_block(q, P, phi) - poff;
    long snd, rcv;
    MPIAR__STEP(snd, mpiar__sched_send(s, peer, q->tag0 + L + j, mpiar__out(off), len,
                                       written + first, (size_t)(*nwritten - first)));
    /* The received range was given away while halving: wait for the sends that read it. */
    long deps[MPIAR__SWING_MAX_STEPS];
    int nd = 0;
    for (int i = 0; i < nsends; i++) {
      if (sends[i].src.buf == MPIAR__BUF_OUTPUT && sends[i].len > 0 && plen > 0 &&
          sends[i].src.off < poff + plen && poff < sends[i].src.off + sends[i].len) {
        deps[nd++] = sends[i].id;
      }
    }
    MPIAR__STEP(rcv, mpiar__sched_recv(s, peer, q->tag0 + L + j, mpiar__out(poff), plen,
                                       nd ? deps : NULL, (size_t)nd));
    written[(*nwritten)++] = rcv;
    (void)snd;
  }
cleanup:
  return rc;
}

/* The reduce-scatter and allgather of one part (virtual rank v, OUTPUT as the fold left it). */
static int build_part(mpiar__schedule_t *s, const mpiar__swing_pattern_t *x, const part_t *q, int v,
                      int rem, int in_out, long last, long *written, int *nwritten) {
  const int P = x->P, L = x->L;
  int rc = MPIAR_SUCCESS;
  /* lo[s], hi[s]: the blocks of R(v, s), the range this rank holds before step s. */
  int lo[MPIAR__SWING_MAX_STEPS + 1], hi[MPIAR__SWING_MAX_STEPS + 1];
  rs_send_t sends[MPIAR__SWING_MAX_STEPS];
  int nsends = 0;
  lo[0] = 0;
  hi[0] = P;
  /* min of the ranks whose data this rank's partial holds (the forward group), for operand a. */
  int have_min = v;
  for (int st = 0; st < L; st++) {
    const int w = swing_peer(x, v, st), peer = real_rank(w, rem);
    const int mid = lo[st] + (hi[st] - lo[st]) / 2;
    const int keep_low = reach_min(x, v, st + 1) < reach_min(x, w, st + 1);
    lo[st + 1] = keep_low ? lo[st] : mid;
    hi[st + 1] = keep_low ? mid : hi[st];
    const int glo = keep_low ? mid : lo[st], ghi = keep_low ? hi[st] : mid;
    const size_t koff = part_block(q, P, lo[st + 1]);
    const size_t klen = part_block(q, P, hi[st + 1]) - koff;
    const size_t goff = part_block(q, P, glo), glen = part_block(q, P, ghi) - goff;
    const mpiar__operand_t gsrc = in_out ? mpiar__out(goff) : mpiar__own(s, goff);
    const mpiar__operand_t kcur = in_out ? mpiar__out(koff) : mpiar__own(s, koff);
    long snd, rcv;
    const long deps[] = {last};
    MPIAR__STEP(snd, mpiar__sched_send(s, peer, q->tag0 + st, gsrc, glen, deps, 1));
    sends[nsends].id = snd;
    sends[nsends].src = gsrc;
    sends[nsends++].len = glen;
    /* Out of place, before the first reduction OUTPUT is empty: receive there (Rabenseifner). */
    const mpiar__operand_t landing =
        (in_out || s->in_place) ? mpiar__scratch(q->soff) : mpiar__out(koff);
    MPIAR__STEP(rcv, mpiar__sched_recv(s, peer, q->tag0 + st, landing, klen, deps, 1));
    /* The partner's partial holds its forward group through step st-1: compare the minima. */
    const int peer_min = forward_min(x, w, st - 1);
    const long ddeps[] = {rcv};
    if (have_min < peer_min) {
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(koff), kcur, landing, klen, ddeps, 1));
    } else {
      MPIAR__STEP(last, mpiar__sched_reduce(s, mpiar__out(koff), landing, kcur, klen, ddeps, 1));
    }
    have_min = have_min < peer_min ? have_min : peer_min;
    in_out = 1;
  }
  MPIAR__CHECK(mpiar__sched_mark_final(s, last));
  MPIAR__CHECK(allgather(s, x, q, v, rem, lo, hi, sends, nsends, last, written, nwritten));
cleanup:
  return rc;
}

int mpiar__swing_build_parts(mpiar__schedule_t *s, const mpiar__swing_pattern_t *pats, int nparts) {
  const int p = s->nranks;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  const int P = pats[0].P, rem = p - P, L = pats[0].L;
  part_t parts[2 * MPIAR__SWING_MAX_DIMS];
  size_t scratch = 0;
  for (int j = 0; j < nparts; j++) {
    parts[j].off = mpiar__block_off(n, nparts, j);
    parts[j].len = mpiar__block_off(n, nparts, j + 1) - parts[j].off;
    parts[j].soff = scratch;
    parts[j].tag0 = 1 + 2 * L * j;
    /* The landing of a reduce-scatter step: at most the larger half of the part. */
    const size_t h = mpiar__block_off(parts[j].len, P, P / 2);
    scratch += h > parts[j].len - h ? h : parts[j].len - h;
  }
  s->scratch_elems = rem > 0 && scratch < n ? n : scratch;
  const int tag_post = 1 + 2 * L * nparts;
  int v = 0, in_out = 0;
  long last = -1;
  if (mpiar__swing_fold(s, rem, tag_post, &v, &last, &in_out, &rc)) {
    return rc;
  }
  long written[2 * MPIAR__SWING_MAX_DIMS * (MPIAR__SWING_MAX_STEPS + 1)];
  int nwritten = 0;
  for (int j = 0; j < nparts; j++) {
    if (parts[j].len == 0 && nparts > 1) {
      continue; /* every rank skips the same empty parts */
    }
    MPIAR__CHECK(build_part(s, &pats[j], &parts[j], v, rem, in_out, last, written, &nwritten));
  }
  MPIAR__CHECK(mpiar__swing_unfold(s, rem, tag_post, written, (size_t)nwritten));
cleanup:
  return rc;
}

/*
 * The paper's method for P even, not a power of two (the general path; swing.c's header).
 * Virtual rank 0's table t0[d]: the step in which rank 0 sends block d, the last step whose
 * peer reaches d through the later steps; -1 for d = 0. Translation by an even amount and the
 * reflection v -> 1 - v map the peers onto themselves, so rank v sends block d in step
 * t0[(d - v) mod P] (v even) or t0[(v - d) mod P] (v odd).
 */
static void mark_reach(int P, int S, int x, int from, int step, signed char *t) {
  t[x] = (signed char)step;
  for (int j = from; j < S; j++) {
    mark_reach(P, S, peer_1d(x, j, P, 0), j + 1, step, t);
  }
}

static int send_step(const signed char *t0, int P, int v, int d) {
  const int k = v % 2 == 0 ? d - v : v - d;
  return t0[((k % P) + P) % P];
}

/* The state of one rank's general schedule: each block's place and its last writer and reader. */
typedef struct gen {
  mpiar__schedule_t *s;
  const signed char *t0;
  int P, S, v;
  long *wr, *rd, *deps; /* per block; deps: a scratch list of 2 P + 2 */
  uint8_t *in_out;      /* per block: 1 once OUTPUT holds this rank's partial */
  uint8_t *first;       /* per block, during a reduce-scatter step: 1 if the peer's partial goes
                         * in operand a (it holds rank 0's data) */
} gen_t;

static size_t blk_off(const gen_t *g, int d) {
  return mpiar__block_off(g->s->count, g->P, d);
}
static size_t blk_len(const gen_t *g, int d) {
  return mpiar__block_len(g->s->count, g->P, d);
}

/* The blocks rank w sends in step st, in block order; @return how many. */
static int step_blocks(const gen_t *g, int w, int st, int *out) {
  int k = 0;
  for (int d = 0; d < g->P; d++) {
    if (d != w && send_step(g->t0, g->P, w, d) == st) {
      out[k++] = d;
    }
  }
  return k;
}

/* The end of the run of consecutive blocks starting at index i of list b (k entries), cut before
 * and after block @p cut, where in_out changes (@p by_place 1) and where in_out or first changes
 * (@p by_place 2). */
static int run_end(const gen_t *g, const int *b, int k, int i, int cut, int by_place) {
  int j = i + 1;
  while (j < k && b[j] == b[j - 1] + 1 && b[j] != cut && b[j - 1] != cut &&
         (!by_place ||
          (g->in_out[b[j]] == g->in_out[b[i]] && (by_place < 2 || g->first[b[j]] == g->first[b[i]])))) {
    j++;
  }
  return j;
}

/* Gather the writers (and readers, when @p readers) of blocks b[i..j) into g->deps. */
static size_t block_deps(const gen_t *g, const int *b, int i, int j, int readers, long extra) {
  size_t n = 0;
  g->deps[n++] = extra;
  for (int x = i; x < j; x++) {
    if (g->wr[b[x]] >= 0 && g->deps[n - 1] != g->wr[b[x]]) {
      g->deps[n++] = g->wr[b[x]];
    }
    if (readers && g->rd[b[x]] >= 0 && g->deps[n - 1] != g->rd[b[x]]) {
      g->deps[n++] = g->rd[b[x]];
    }
  }
  return n;
}

static mpiar__operand_t cur(const gen_t *g, int d) {
  return g->in_out[d] ? mpiar__out(blk_off(g, d)) : mpiar__own(g->s, blk_off(g, d));
}

/*
 * Send blocks b[0..k) to @p peer: straight from the vector when they are one run in one buffer,
 * else packed into scratch at @p soff (one copy per run) and sent from there. @p *packed says
 * which; @return the send's index or a negative error.
 */
static long send_blocks(gen_t *g, int peer, int tag, const int *b, int k, size_t soff, long after,
                        int *packed) {
  mpiar__schedule_t *s = g->s;
  const int one = k > 0 && run_end(g, b, k, 0, -1, 1) == k;
  *packed = !one;
  if (k == 0) {
    return mpiar__sched_send(s, peer, tag, mpiar__scratch(soff), 0, &after, 1);
  }
  if (one) {
    const size_t nd = block_deps(g, b, 0, k, 0, after);
    const long id = mpiar__sched_send(s, peer, tag, cur(g, b[0]),
                                      blk_off(g, b[k - 1]) + blk_len(g, b[k - 1]) - blk_off(g, b[0]),
                                      g->deps, nd);
    for (int x = 0; id >= 0 && x < k; x++) {
      g->rd[b[x]] = id;
    }
    return id;
  }
  size_t at = soff;
  long first = -1;
  long last = -1;
  for (int i = 0, j; i < k; i = j) {
    j = run_end(g, b, k, i, -1, 1);
    const size_t len = blk_off(g, b[j - 1]) + blk_len(g, b[j - 1]) - blk_off(g, b[i]);
    const size_t nd = block_deps(g, b, i, j, 0, -1);
    const long id = mpiar__sched_copy(s, mpiar__scratch(at), cur(g, b[i]), len, g->deps, nd);
    if (id < 0) {
      return id;
    }
    for (int x = i; x < j; x++) {
      g->rd[b[x]] = id;
    }
    first = first < 0 ? id : first;
    last = id;
    at += len;
  }
  /* The copies are consecutive steps: depend on each. */
  size_t nd = 0;
  g->deps[nd++] = after;
  for (long id = first; id <= last; id++) {
    g->deps[nd++] = id;
  }
  return mpiar__sched_send(s, peer, tag, mpiar__scratch(soff), at - soff, g->deps, nd);
}

static size_t blocks_len(const gen_t *g, const int *b, int k) {
  size_t n = 0;
  for (int x = 0; x < k; x++) {
    n += blk_len(g, b[x]);
  }
  return n;
}

/* Whether block d's path from virtual rank 0 to its owner passes virtual rank w: then w's
 * partial of d holds rank 0's data (the fold puts rank 0's data first at virtual rank 0). */
static int holds_zero(const gen_t *g, int d, int w) {
  int u = 0;
  while (u != d && u != w) {
    u = peer_1d(u, send_step(g->t0, g->P, u, d), g->P, 0);
  }
  return u == w;
}

/* Reduce blocks b[i..j) received from virtual rank w (at scratch @p land) into OUTPUT: the
 * partial holding rank 0's data in operand a, else this rank's own. */
static long reduce_run(gen_t *g, const int *b, int i, int j, size_t land, long rcv) {
  const size_t off = blk_off(g, b[i]);
  const size_t len = blk_off(g, b[j - 1]) + blk_len(g, b[j - 1]) - off;
  const size_t nd = block_deps(g, b, i, j, 1, rcv);
  const mpiar__operand_t mine = cur(g, b[i]), theirs = mpiar__scratch(land);
  const long id = g->first[b[i]] ? mpiar__sched_reduce(g->s, mpiar__out(off), theirs, mine, len, g->deps, nd)
                           : mpiar__sched_reduce(g->s, mpiar__out(off), mine, theirs, len, g->deps, nd);
  for (int x = i; id >= 0 && x < j; x++) {
    g->wr[b[x]] = id;
    g->in_out[b[x]] = 1;
  }
  return id;
}

/* The reduce-scatter (steps 0 .. S-1) and allgather (S-1 .. 0) over the paper's peers mod P. */
static int build_general(gen_t *g, int *lists, size_t *pack, size_t *land, long *rs_send) {
  mpiar__schedule_t *s = g->s;
  const int S = g->S, v = g->v;
  int rc = MPIAR_SUCCESS;
  long own_last = -1; /* the last reduction of this rank's own block v */
  /* Each send waits for the previous step's receive, so that no message reaches a peer a step
   * early and queues ahead of that peer's current one on its receive port. */
  long prev = -1;
  size_t at = 0;
  int *sb = lists, *rb = lists + g->P;
  for (int st = 0; st < S; st++) {
    const int w = peer_1d(v, st, g->P, 0), peer = w;
    const int ks = step_blocks(g, v, st, sb), kr = step_blocks(g, w, st, rb);
    int packed = 0;
    pack[st] = at;
    MPIAR__STEP(rs_send[st], send_blocks(g, peer, 1 + st, sb, ks, at, prev, &packed));
    at += packed ? blocks_len(g, sb, ks) : 0;
    land[st] = at;
    long rcv;
    MPIAR__STEP(rcv, mpiar__sched_recv(s, peer, 1 + st, mpiar__scratch(at),
                                        blocks_len(g, rb, kr), NULL, 0));
    prev = rcv;
    for (int x = 0; x < kr; x++) {
      g->first[rb[x]] = (uint8_t)holds_zero(g, rb[x], w);
    }
    size_t in = at;
    for (int i = 0, j; i < kr; i = j) {
      j = run_end(g, rb, kr, i, v, 2);
      long id;
      MPIAR__STEP(id, reduce_run(g, rb, i, j, in, rcv));
      own_last = rb[i] == v ? id : own_last;
      in += blk_off(g, rb[j - 1]) + blk_len(g, rb[j - 1]) - blk_off(g, rb[i]);
    }
    at = in;
  }
  s->scratch_elems = at > s->scratch_elems ? at : s->scratch_elems;
  MPIAR__CHECK(mpiar__sched_mark_final(s, own_last));
  for (int st = S - 1; st >= 0; st--) {
    const int w = peer_1d(v, st, g->P, 0), peer = w;
    const int ks = step_blocks(g, v, st, sb), kr = step_blocks(g, w, st, rb);
    const int tag = 1 + S + st;
    int packed = 0;
    long snd;
    /* What this rank received in reduce-scatter step st goes back, complete. */
    MPIAR__STEP(snd, send_blocks(g, peer, tag, rb, kr, land[st], prev, &packed));
    (void)snd;
    if (ks > 0 && run_end(g, sb, ks, 0, -1, 0) == ks) {
      const size_t off = blk_off(g, sb[0]), nd = block_deps(g, sb, 0, ks, 1, rs_send[st]);
      long id;
      MPIAR__STEP(id, mpiar__sched_recv(s, peer, tag, mpiar__out(off), blocks_len(g, sb, ks),
                                        g->deps, nd));
      prev = id;
      for (int x = 0; x < ks; x++) {
        g->wr[sb[x]] = id;
        g->in_out[sb[x]] = 1;
      }
      continue;
    }
    /* Several runs: land where the reduce-scatter packed them, then one copy per run. */
    const long deps[] = {rs_send[st]};
    long rcv;
    MPIAR__STEP(rcv, mpiar__sched_recv(s, peer, tag, mpiar__scratch(pack[st]),
                                        blocks_len(g, sb, ks), deps, 1));
    prev = rcv;
    size_t in = pack[st];
    for (int i = 0, j; i < ks; i = j) {
      j = run_end(g, sb, ks, i, -1, 0);
      const size_t off = blk_off(g, sb[i]);
      const size_t len = blk_off(g, sb[j - 1]) + blk_len(g, sb[j - 1]) - off;
      const size_t nd = block_deps(g, sb, i, j, 1, rcv);
      long id;
      MPIAR__STEP(id, mpiar__sched_copy(s, mpiar__out(off), mpiar__scratch(in), len, g->deps, nd));
      for (int x = i; x < j; x++) {
        g->wr[sb[x]] = id;
        g->in_out[sb[x]] = 1;
      }
      in += len;
    }
  }
cleanup:
  return rc;
}

/* ceil(log2 P). */
static int ceil_log2(int P) {
  int S = 0;
  while ((1 << S) < P) {
    S++;
  }
  return S;
}

/* Rank 0's send steps over P virtual ranks (P even). @return MPIAR_SUCCESS, or
 * MPIAR_ERR_INTERNAL where some block is never sent (no P up to 2^30 is known to do that). */
static int send_table(int P, int S, signed char *t0) {
  memset(t0, -1, (size_t)P);
  for (int st = 0; st < S; st++) {
    mark_reach(P, S, peer_1d(0, st, P, 0), st + 1, st, t0);
  }
  t0[0] = -1;
  for (int d = 1; d < P; d++) {
    if (t0[d] < 0) {
      return mpiar__error(MPIAR_ERR_INTERNAL, "swing: block %d of %d is never sent", d, P);
    }
  }
  return MPIAR_SUCCESS;
}

/* swing for even p not a power of two: the paper's method over the p ranks. */
static int build_swing_general(mpiar__schedule_t *s) {
  const int P = s->nranks, S = ceil_log2(P);
  int rc = MPIAR_SUCCESS;
  gen_t g = {s, NULL, P, S, s->rank, NULL, NULL, NULL, NULL, NULL};
  signed char *t0 = malloc((size_t)P);
  int *lists = malloc(2 * (size_t)P * sizeof *lists);
  size_t *offs = malloc(2 * (size_t)S * sizeof *offs);
  long *ids = malloc((4 * (size_t)P + 2 + (size_t)S) * sizeof *ids);
  g.in_out = calloc(2 * (size_t)P, 1);
  if (t0 == NULL || lists == NULL || offs == NULL || ids == NULL || g.in_out == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "swing schedule of %d ranks", P);
  }
  MPIAR__CHECK(send_table(P, S, t0));
  g.t0 = t0;
  g.first = g.in_out + P;
  g.wr = ids;
  g.rd = ids + P;
  g.deps = ids + 2 * P;
  for (int d = 0; d < P; d++) {
    g.wr[d] = g.rd[d] = -1;
  }
  s->scratch_elems = 0;
  MPIAR__CHECK(build_general(&g, lists, offs, offs + S, ids + 4 * P + 2));
cleanup:
  free(t0);
  free(lists);
  free(offs);
  free(ids);
  free(g.in_out);
  return rc;
}

int mpiar__build_swing_fold(mpiar__schedule_t *s) {
  mpiar__swing_pattern_t x;
  mpiar__swing_pattern_1d(&x, mpiar__pof2_floor(s->nranks > 0 ? s->nranks : 1));
  return mpiar__swing_build_parts(s, &x, 1);
}

/* The paper's method where it pairs the ranks (even p), the fold elsewhere (swing.c's header). */
static int uses_general(int p) {
  return p > 2 && p % 2 == 0 && mpiar__pof2_floor(p) != p;
}

int mpiar__build_swing(mpiar__schedule_t *s) {
  int done = 0;
  const int rc = mpiar__build_trivial(s, &done);
  if (rc != MPIAR_SUCCESS || done) {
    return rc;
  }
  return uses_general(s->nranks) ? build_swing_general(s) : mpiar__build_swing_fold(s);
}

/* The fold's extra time: the whole vector in, reduced, and the result back. */
double mpiar__swing_fold_cost(int nranks, double n, const mpiar__cost_params_t *c) {
  if (mpiar__pof2_floor(nranks) == nranks) {
    return 0.0;
  }
  return c->alpha + n * (c->beta + c->gamma) + c->alpha + n * c->beta;
}

/* One round of the Swing pattern for the two-level estimate: step st over the virtual ranks. */
typedef struct swing_round {
  const mpiar__swing_pattern_t *x;
  int rem, st;
} swing_round_t;

static int swing_round_peer(int rank, const void *arg) {
  const swing_round_t *x = arg;
  if (rank < 2 * x->rem && rank % 2 == 0) {
    return -1; /* folded away */
  }
  const int v = rank < 2 * x->rem ? rank / 2 : rank - x->rem;
  return real_rank(swing_peer(x->x, v, x->st), x->rem);
}

/*
 * Two levels, a step-synchronous estimate as for Rabenseifner: each step costs its round time
 * on the topology (the slower of an intra-node message and the busiest node port) plus its
 * reduction; the fold and the return are rounds between the pairs (2i, 2i+1).
 */
double mpiar__swing_cost_two_level(int nranks, double n, const mpiar__cost_params_t *c,
                                   const mpiar__topology_t *topo, int latency,
                                   const mpiar__swing_pattern_t *pat) {
  const int P = pat->P, L = pat->L;
  swing_round_t x = {pat, nranks - P, 0};
  mpiar__round_load_t load;
  double t = 0.0;
  for (int st = 0; st < L; st++) {
    x.st = st;
    mpiar__round_load(topo, swing_round_peer, &x, &load);
    if (latency) {
      t += mpiar__round_time(&load, c, n) + n * c->gamma;
    } else {
      const double half = n / (double)(2 << st);
      t += 2 * mpiar__round_time(&load, c, half) + half * c->gamma;
    }
  }
  if (x.rem > 0) {
    mpiar__xor_pattern_t pairs = {P, x.rem, 0};
    mpiar__round_load(topo, mpiar__xor_peer, &pairs, &load);
    t += 2 * mpiar__round_time(&load, c, n) + n * c->gamma;
  }
  return t;
}

/* One round of the general path for the two-level estimate: step st over the p ranks. */
typedef struct general_round {
  int P, st;
} general_round_t;

static int general_round_peer(int rank, const void *arg) {
  const general_round_t *x = arg;
  return peer_1d(rank, x->st, x->P, 0);
}

/* Whether the sorted blocks b[0..k) are one run. */
static int one_run(const int *b, int k) {
  return k > 0 && b[k - 1] - b[0] == k - 1;
}

/*
 * The general path's cost (swing.c's header): in step st, k_st of the P blocks each way and
 * reduced; rank 0's packing copies at gamma. One level: the alphas, bytes and reductions are
 * exact sums, the copies an estimate of what the critical path holds. Two levels: each step its
 * round time on the topology (the slower of an intra-node message and the busiest node port).
 */
static double cost_general(int P, double n, const mpiar__cost_params_t *c,
                           const mpiar__topology_t *topo) {
  const int S = ceil_log2(P);
  signed char *t0 = malloc((size_t)P);
  int *b = malloc(2 * (size_t)P * sizeof *b);
  double t = 0.0;
  if (t0 == NULL || b == NULL || send_table(P, S, t0) != MPIAR_SUCCESS) {
    free(t0);
    free(b);
    return HUGE_VAL; /* no memory for the table: never the choice */
  }
  mpiar__cost_params_t k;
  const int flat = mpiar__cost_one_level(topo, c, &k);
  const gen_t g = {NULL, t0, P, S, 0, NULL, NULL, NULL, NULL, NULL};
  for (int st = 0; st < S; st++) {
    const int ks = step_blocks(&g, 0, st, b);
    const int kr = step_blocks(&g, peer_1d(0, st, P, 0), st, b + P);
    const double part = n * ks / P;
    const double copies = (one_run(b, ks) ? 0.0 : 2.0 * part) + (one_run(b + P, kr) ? 0.0 : part);
    if (flat) {
      t += 2 * (k.alpha + part * k.beta);
    } else {
      const general_round_t x = {P, st};
      mpiar__round_load_t load;
      mpiar__round_load(topo, general_round_peer, &x, &load);
      t += 2 * mpiar__round_time(&load, c, part);
    }
    t += (part + copies) * c->gamma;
  }
  free(t0);
  free(b);
  return t;
}

static double cost(int nranks, size_t bytes, const mpiar__cost_params_t *c,
                   const mpiar__topology_t *topo, int latency) {
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const int P = mpiar__pof2_floor(nranks);
  const double n = (double)bytes, q = P;
  mpiar__cost_params_t k;
  if (!mpiar__cost_one_level(topo, c, &k)) {
    mpiar__swing_pattern_t x;
    mpiar__swing_pattern_1d(&x, P);
    return mpiar__swing_cost_two_level(nranks, n, c, topo, latency, &x);
  }
  const double steps = latency ? mpiar__log2i(P) * (k.alpha + n * k.beta + n * k.gamma)
                               : 2 * mpiar__log2i(P) * k.alpha + 2 * (q - 1) / q * n * k.beta +
                                     (q - 1) / q * n * k.gamma;
  return steps + mpiar__swing_fold_cost(nranks, n, &k);
}

double mpiar__cost_swing(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                         const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (uses_general(nranks) && bytes > 0) {
    return cost_general(nranks, (double)bytes, c, topo);
  }
  return cost(nranks, bytes, c, topo, 0);
}

double mpiar__cost_swing_fold(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                              const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  return cost(nranks, bytes, c, topo, 0);
}

double mpiar__cost_swing_latency(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                 const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  return cost(nranks, bytes, c, topo, 1);
}
