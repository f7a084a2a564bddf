/*
 * Algorithm: double_binary_tree (two complementary binary trees, each reducing and broadcasting
 * half of the vector, pipelined in segments)
 *
 * Sanders, Speck, Träff, "Two-tree algorithms for full bandwidth broadcast, reduction and scan",
 * Parallel Computing 35(12), 2009; the construction NCCL uses for its tree allreduce
 * (NVIDIA/nccl, src/graph/trees.cc). Tree 0 is an in-order binary tree over positions 0..p-1:
 * position v with lowest set bit b has the parent (v ^ b) | 2b (or v ^ b where that is p or
 * more) and the children v - b/2 and v + b/2 (the right one moved down to v + b/4, ... while it
 * is p or more); odd positions are leaves, and position 0 is the root with the single child
 * 2^ceil(log2 p) / 2. Rank r sits at position r in tree 0 and, in tree 1, at p-1-r for even p
 * (mirrored: the leaves of tree 0, the odd ranks, are tree 1's inner nodes) or r-1 mod p for odd p
 * (shifted; there one rank is an inner node of both trees). Tree 0 carries the first
 * ceil(n/2) elements, tree 1 the rest. In each tree, for every segment, a rank receives its
 * children's partials, reduces them with its own data, sends the result to its parent; the root
 * finishes the segment and it travels back down the same tree. Each rank sends and receives
 * about 2n bytes in all (the bound 2 (p-1)/p n of ring and Rabenseifner), with a depth of
 * log2(p) + 1 instead of the ring's p - 1 steps.
 *
 * Restrictions: none. Any p, any count (empty halves and segments still travel as zero-length
 * messages), in place or not. Every element is finished at the root of its tree and copied down,
 * so every rank has the same bits. Order: the pieces a rank combines (its own data, each child's
 * partial) are reduced left to right by the lowest rank each holds, so operand `a` of every
 * reduction holds the lower rank of the two and x0 is the leftmost operand of every element: rank
 * 0's NaN payload wins on every rank; at p = 2 every element is x0 op x1. For p >= 3 the tree
 * differs between the halves, so reproducible mode runs repro_direct instead (reproducible.c).
 *
 * Segmentation (s->segment_elems > 0): each half travels as segments of segment_elems elements,
 * at most MPIAR__DBT_SEGMENTS per half (longer segments where the half needs more); segment g
 * goes up and down its tree independently of the others, so the trees' levels work on
 * successive segments at once. Unsegmented, each half is one segment.
 *
 * Memory: scratch for each child's partial of the whole half it reduces (a rank with two
 * children in one tree: n elements; the rank that is inner in both trees for odd p: up to 2n).
 * The first reduction reads INPUT and writes OUTPUT, no up-front copy. The final segment
 * overwrites OUTPUT after the partial sent to the parent has left.
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced; a half of n/2 bytes in m
 * segments of S = n/(2m) bytes; t = alpha + S beta, r = S gamma):
 *   p = 2 (each tree one edge):  max(2 m t, (m+1) t + r, 2 t + m r)
 *       (a rank's m leaf sends leave first, the partner's results after its reductions),
 *       exact in the simulator where the segments divide the half; unsegmented the ring's
 *       2 alpha + n beta + n/2 gamma.
 *   p > 2, an estimate: the first segment's way up and down the tree (computed on the tree:
 *       a node's children arrive one after the other at its receive port, each reduced after
 *       its arrival; going down, a node sends to its children one after the other), about
 *       (4 log2 p - 2) t + log2 p r for a power of two, plus one segment per period of
 *       (log2 p + 4) t for the m-1 others (3 t at p = 3).
 *   The estimate is within 25 % of the simulator for p <= 1024, segmented or not
 *   (tests/sim/test_sim_catalogue.c); unsegmented it is within a message time or two. The
 *   period is what the simulator shows, not the 4 t that the busiest rank's ports need (4
 *   messages each way per segment): its ports are full duplex but send in the order messages
 *   became ready and a sender waits for its receiver's port, so the two trees' messages queue
 *   behind each other in a pattern that grows with the depth. Sanders, Speck and Träff's
 *   edge-colouring schedule (each rank alternates between its two trees in fixed steps) would
 *   reach 4 t; it is not built yet. Pacing the leaves' sends by the other tree was tried and was
 *   slower (18 t per segment at p = 1024 instead of 14 t).
 *   Not chosen by the selector (MPIAR__ALG_MANUAL); run it by name.
 * Two levels: the estimate with that level's alpha and beta on one node or one rank per node;
 *   otherwise with the slower level's for every message, which ignores the node ports' sharing
 *   (the simulator gives from half to 2.5 times that on 2..8 nodes): not modelled yet.
 *
 * Tags: (tree, direction, segment) as ((2 tree + direction) MPIAR__DBT_SEGMENTS + g); a rank
 * and one of its tree neighbours exchange one message per (tree, direction, segment), so a tag
 * never repeats between one pair of ranks.
 */
#include <math.h>
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

/* Segments per half at most: 4 tag classes of MPIAR__DBT_SEGMENTS fit below MPIAR__TAG_LIMIT. */
#define MPIAR__DBT_SEGMENTS (MPIAR__TAG_LIMIT / 4)

/* Tree 0 over positions 0..p-1 (see the header): parent and up to two children, -1 for none. */
static void btree(int p, int v, int *up, int *c0, int *c1) {
  *c0 = *c1 = -1;
  if (v == 0) {
    int b = 1;
    while (b < p) {
      b <<= 1;
    }
    *up = -1;
    *c0 = p > 1 ? b / 2 : -1;
    return;
  }
  const int bit = v & -v;
  int u = (v ^ bit) | (bit << 1);
  *up = u < p ? u : v ^ bit;
  int low = bit >> 1;
  if (low == 0) {
    return;
  }
  *c0 = v - low;
  while (low > 0 && v + low >= p) {
    low >>= 1;
  }
  *c1 = low > 0 ? v + low : -1;
}

/* Position of rank r in tree t, and the rank at position v. */
static int pos_of(int p, int t, int r) {
  return t == 0 ? r : (p % 2 == 0 ? p - 1 - r : (r - 1 + p) % p);
}
static int rank_at(int p, int t, int v) {
  return t == 0 ? v : (p % 2 == 0 ? p - 1 - v : (v + 1) % p);
}

/* The lowest rank in the subtree of position v of tree t. */
static int subtree_min(int p, int t, int v) {
  int up, c0, c1;
  btree(p, v, &up, &c0, &c1);
  int m = rank_at(p, t, v);
  const int c[2] = {c0, c1};
  for (int i = 0; i < 2; i++) {
    if (c[i] >= 0) {
      int x = subtree_min(p, t, c[i]);
      m = x < m ? x : m;
    }
  }
  return m;
}

/* Segment layout of a half of `len` elements for the segment `seg` (0: one). */
static size_t half_segs(size_t len, size_t seg, size_t *seglen) {
  if (seg == 0 || len <= seg) {
    *seglen = len;
    return 1;
  }
  size_t m = (len + seg - 1) / seg;
  if (m > MPIAR__DBT_SEGMENTS) {
    seg = (len + MPIAR__DBT_SEGMENTS - 1) / MPIAR__DBT_SEGMENTS;
    m = (len + seg - 1) / seg;
  }
  *seglen = seg;
  return m;
}

/* One tree as this rank sees it. */
typedef struct tree {
  int t, up;         /* tree index, parent rank (-1: root) */
  int nkids, kid[2]; /* children ranks */
  int kmin[2];       /* lowest rank in each child's subtree */
  size_t off, len;   /* the half */
  size_t seg, nseg;  /* segment length and count */
  size_t scratch;    /* the children's slots: kid i's half at scratch + i len */
} tree_t;

static void tree_init(mpiar__schedule_t *s, int t, size_t off, size_t len, tree_t *tr) {
  const int p = s->nranks;
  int up, c[2];
  btree(p, pos_of(p, t, s->rank), &up, &c[0], &c[1]);
  tr->t = t;
  tr->up = up >= 0 ? rank_at(p, t, up) : -1;
  tr->nkids = 0;
  for (int i = 0; i < 2; i++) {
    if (c[i] >= 0) {
      tr->kid[tr->nkids] = rank_at(p, t, c[i]);
      tr->kmin[tr->nkids++] = subtree_min(p, t, c[i]);
    }
  }
  tr->off = off;
  tr->len = len;
  tr->nseg = half_segs(len, s->segment_elems, &tr->seg);
}

static int tag_of(int t, int down, size_t g) {
  return (2 * t + down) * MPIAR__DBT_SEGMENTS + (int)g;
}

/*
 * Reduce the pieces of one segment (this rank's own data and the children's partials in
 * `slot`, received by `rcv`) into OUTPUT, left to right by their lowest rank. @return the last
 * reduction in *last (-1 for a leaf).
 */
static int combine(mpiar__schedule_t *s, const tree_t *tr, size_t off, size_t len,
                   const mpiar__operand_t *slot, const long *rcv, long *last) {
  int rc = MPIAR_SUCCESS;
  /* Pieces: index -1 is the own data, 0 and 1 the children; sorted by lowest rank. */
  int order[3], np = 0;
  order[np++] = -1;
  for (int i = 0; i < tr->nkids; i++) {
    int k = np++;
    while (k > 0 && (order[k - 1] < 0 ? s->rank : tr->kmin[order[k - 1]]) > tr->kmin[i]) {
      order[k] = order[k - 1];
      k--;
    }
    order[k] = i;
  }
  *last = -1;
  if (np == 1) {
    return MPIAR_SUCCESS;
  }
  const mpiar__operand_t own = mpiar__own(s, off), out = mpiar__out(off);
#define PIECE(i) ((i) < 0 ? own : slot[(i)])
#define RECV(i) ((i) < 0 ? -1 : rcv[(i)])
  long id;
  if (np == 3 && order[2] < 0) {
    /* Both children below this rank: they are combined in the first one's slot, then own last
     * (in place, OUTPUT holds the own data until then). */
    const long d1[] = {rcv[order[0]], rcv[order[1]]};
    MPIAR__STEP(id,
                mpiar__sched_reduce(s, slot[order[0]], slot[order[0]], slot[order[1]], len, d1, 2));
    const long d2[] = {id};
    MPIAR__STEP(*last, mpiar__sched_reduce(s, out, slot[order[0]], own, len, d2, 1));
    return MPIAR_SUCCESS;
  }
  const long d1[] = {RECV(order[0]), RECV(order[1])};
  MPIAR__STEP(id, mpiar__sched_reduce(s, out, PIECE(order[0]), PIECE(order[1]), len, d1, 2));
  if (np == 3) {
    const long d2[] = {id, RECV(order[2])};
    MPIAR__STEP(id, mpiar__sched_reduce(s, out, out, PIECE(order[2]), len, d2, 2));
  }
  *last = id;
#undef PIECE
#undef RECV
cleanup:
  return rc;
}

/* Up and down one tree for segment g. */
static int segment(mpiar__schedule_t *s, const tree_t *tr, size_t g) {
  int rc = MPIAR_SUCCESS;
  const size_t off = tr->off + g * tr->seg;
  const size_t len = g + 1 < tr->nseg ? tr->seg : tr->len - g * tr->seg;
  mpiar__operand_t slot[2];
  long rcv[2], id, last;
  for (int i = 0; i < tr->nkids; i++) {
    slot[i] = mpiar__scratch(tr->scratch + (size_t)i * tr->len + g * tr->seg);
    MPIAR__STEP(rcv[i],
                mpiar__sched_recv(s, tr->kid[i], tag_of(tr->t, 0, g), slot[i], len, NULL, 0));
  }
  MPIAR__CHECK(combine(s, tr, off, len, slot, rcv, &last));
  long have; /* the step after which OUTPUT holds the final segment */
  if (tr->up < 0) {
    MPIAR__CHECK(mpiar__sched_mark_final(s, last));
    have = last;
  } else {
    const mpiar__operand_t src = last >= 0 ? mpiar__out(off) : mpiar__own(s, off);
    const long sdeps[] = {last};
    long snd;
    MPIAR__STEP(snd, mpiar__sched_send(s, tr->up, tag_of(tr->t, 0, g), src, len, sdeps, 1));
    /* The result overwrites OUTPUT, which the partial's send reads (or, in place, the own data). */
    const long rdeps[] = {src.buf == MPIAR__BUF_OUTPUT ? snd : -1, last};
    MPIAR__STEP(have,
                mpiar__sched_recv(s, tr->up, tag_of(tr->t, 1, g), mpiar__out(off), len, rdeps, 2));
  }
  for (int i = 0; i < tr->nkids; i++) {
    const long deps[] = {have};
    MPIAR__STEP(
        id, mpiar__sched_send(s, tr->kid[i], tag_of(tr->t, 1, g), mpiar__out(off), len, deps, 1));
  }
cleanup:
  return rc;
}

int mpiar__build_double_binary_tree(mpiar__schedule_t *s) {
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  const size_t h = (n + 1) / 2;
  tree_t tr[2];
  tree_init(s, 0, 0, h, &tr[0]);
  tree_init(s, 1, h, n - h, &tr[1]);
  tr[0].scratch = 0;
  tr[1].scratch = (size_t)tr[0].nkids * tr[0].len;
  s->scratch_elems = tr[1].scratch + (size_t)tr[1].nkids * tr[1].len;
  /* Segments in turn from both trees, so that both pipelines fill at once. */
  const size_t nseg = tr[0].nseg > tr[1].nseg ? tr[0].nseg : tr[1].nseg;
  for (size_t g = 0; g < nseg; g++) {
    for (int t = 0; t < 2; t++) {
      if (g < tr[t].nseg) {
        MPIAR__CHECK(segment(s, &tr[t], g));
      }
    }
  }
cleanup:
  return rc;
}

/*
 * One segment up and down tree 0 (both trees have its shape): the time position v's partial is
 * ready to go up, its children's arriving one after the other at its receive port, each piece
 * reduced after it arrives (t: one message, r: one reduction).
 */
static double up_time(int p, int v, double t, double r) {
  int up, c[2];
  btree(p, v, &up, &c[0], &c[1]);
  double ready[2];
  int k = 0;
  for (int i = 0; i < 2; i++) {
    if (c[i] >= 0) {
      ready[k++] = up_time(p, c[i], t, r);
    }
  }
  if (k == 2 && ready[1] < ready[0]) {
    const double x = ready[0];
    ready[0] = ready[1];
    ready[1] = x;
  }
  double port = 0.0, done = 0.0;
  for (int i = 0; i < k; i++) {
    port = (ready[i] > port ? ready[i] : port) + t;
    done = (port > done ? port : done) + r;
  }
  return done;
}

/* The latest arrival of the final segment below position v, which has it at time `have`. */
static double down_time(int p, int v, double have, double t) {
  int up, c[2];
  btree(p, v, &up, &c[0], &c[1]);
  double last = have;
  int k = 0;
  for (int i = 0; i < 2; i++) {
    if (c[i] >= 0) {
      const double x = down_time(p, c[i], have + (++k) * t, t);
      last = x > last ? x : last;
    }
  }
  return last;
}

double mpiar__cost_double_binary_tree(int nranks, size_t bytes, size_t elem_size,
                                      size_t segment_bytes, const mpiar__cost_params_t *c,
                                      const mpiar__topology_t *topo) {
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  mpiar__cost_params_t link;
  mpiar__cost_slow_link(topo, c, &link);
  const size_t es = elem_size ? elem_size : 1;
  const size_t half = (bytes / es + 1) / 2;
  size_t seglen;
  const double m = (double)half_segs(half, segment_bytes / es, &seglen);
  const double sb = (double)(seglen * es);
  const double t = link.alpha + sb * link.beta, r = sb * link.gamma;
  if (nranks == 2) {
    /* Each rank's m leaf sends leave first; the results follow the reductions (see the header). */
    const double a = 2 * m * t, b = (m + 1) * t + r, d = 2 * t + m * r;
    return a > b ? (a > d ? a : d) : (b > d ? b : d);
  }
  /* The first segment's way up and down, then one segment per period (see the header). */
  const double fill = down_time(nranks, 0, up_time(nranks, 0, t, r), t);
  const double period = nranks == 3 ? 3 * t : (log2((double)nranks) + 4) * t;
  return fill + (m - 1) * period;
}
