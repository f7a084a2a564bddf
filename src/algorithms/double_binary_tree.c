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
 *       (log2 p + 4) t for the m-1 others (3 t at p = 3), or of 2.75 r + 2 t where the
 *       reductions are longer.
 *   The estimate is within 25 % of the simulator for p <= 1024, segmented or not
 *   (tests/sim/test_sim_catalogue.c); unsegmented it is within a message time or two. The
 *   period is what the simulator shows, not the 4 t that the busiest rank's ports need (4
 *   messages each way per segment): its ports are full duplex but send in the order messages
 *   became ready and a sender waits for its receiver's port, so the two trees' messages queue
 *   behind each other in a pattern that grows with the depth. Pacing the leaves' sends by the
 *   other tree was tried and was slower (18 t per segment at p = 1024 instead of 14 t).
 *   Not chosen by the selector (MPIAR__ALG_MANUAL); run it by name.
 *
 * double_binary_tree/colour: the same trees, messages and reductions, with Sanders, Speck and
 *   Träff's edge colouring: every edge gets colour 0 or 1 so that a rank's two edges to its
 *   parents differ, and so do its edges to its (at most two) children;
 *   the edges form paths and even cycles, coloured alternately along each. A timetable of steps
 *   in phases of four (up on colour 0, up on colour 1, down on colour 0, down on colour 1) gives
 *   every message a step in which neither its sender nor its receiver has another: a partial
 *   goes up on the first step of its edge's up phase after the children's arrived, a result down
 *   on the first of its down phase after it arrived, and segment g runs 4 g steps after segment
 *   0. Each rank's sends are chained in the timetable's order (a send depends on the rank's
 *   previous one), which is the only order the schedule imposes: a message still leaves as
 *   soon as its data and its sender are ready, so ranks need not wait for idle steps. Where there
 *   is nothing to pipeline (one segment per half) or p <= 3 it builds the uncoloured order,
 *   which is faster there.
 *   Cost: the fill as above, then one segment per period max(5.5 t, 2.75 r + 2 t); the ports'
 *   bound is 4 t. The simulator shows 4 to 6.1 t per segment (about 5.7 t from p = 64 to 1024,
 *   against 10 to 14 t uncoloured), because a sender that is ahead of the timetable takes a
 *   receiver's port before the message whose step it was; the estimate is within 26 % of the
 *   simulator for 4 <= p <= 1024, segmented, in both regimes (tests/sim/test_sim_catalogue.c).
 *   Against the uncoloured order in the simulator (every p = 4..444, and 625, 1024; segments of
 *   4K to 64K elements): from p = 8 on it takes 0.48 to 0.91 of its time where the ports bound
 *   it (0.49 at p = 1024) and 0.74 to 1.005 where the reductions do (0.5 % slower at p = 129,
 *   225, 249); at p = 4 and 7 it is up to 3.5 % slower (6 % reduction-bound at p = 4). So it is
 *   an entry of its own (named only), not a replacement. Building costs O(p) per rank (the
 *   colouring walks both whole trees).
 * Two levels: the estimate with that level's alpha and beta on one node or one rank per node;
 *   otherwise the fill takes each edge's message time (alpha_inter + S beta_inter between nodes)
 *   on the slower of the two trees, and the period is at least a node port's share: both
 *   trees' inter-node messages of one segment through the busiest node's port, up and down
 *   (node_port_load). Within 50 % of the simulator on 2..16 nodes of 1..16 ranks, segmented or
 *   not, for both orders, up to 4 MiB (tests/sim/test_sim_two_level.c). With many segments the
 *   period falls short: 64 MiB in 256 KiB segments on 8 nodes of 8 ranks simulate in 1.96 times
 *   the estimate (the coloured order 1.39 times), the node ports' and the ranks' queues adding up
 *   where the estimate takes the longer of the two.
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

/* Both trees as this rank sees them, each with its half, and their scratch slots. */
static void trees_init(mpiar__schedule_t *s, tree_t tr[2]) {
  const size_t n = s->count, h = (n + 1) / 2;
  tree_init(s, 0, 0, h, &tr[0]);
  tree_init(s, 1, h, n - h, &tr[1]);
  tr[0].scratch = 0;
  tr[1].scratch = (size_t)tr[0].nkids * tr[0].len;
  s->scratch_elems = tr[1].scratch + (size_t)tr[1].nkids * tr[1].len;
}

int mpiar__build_double_binary_tree(mpiar__schedule_t *s) {
  int rc = MPIAR_SUCCESS;
  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  tree_t tr[2];
  trees_init(s, tr);
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
 * The edge colouring and the timetable (see the header). Edge e = 2 c + t joins rank c to its
 * parent in tree t. Each rank is the lower end of at most two edges (its parents) and the upper
 * end of at most two (its children in both trees), so the edges form paths and even cycles and
 * alternate colours along them: a rank's two parent edges differ in colour, and so do its two
 * child edges. In the timetable's step s (phase s mod 4) a rank sends on its edge of colour c to
 * its parent (phase c, the reduction's way up) or to its child (phase 2 + c, the way down), and
 * receives on the edge of the same colour the other way, so no rank sends or receives two
 * messages in one step; segment g of a message goes 4 g steps after segment 0.
 */
typedef struct forest {
  int *par;    /* par[2 r + t]: rank r's parent in tree t, -1 at the root */
  int *kid;    /* kid[4 r + 2 t + i]: its children in tree t, -1 for none */
  int *colour; /* colour[e] of edge e = 2 r + t */
  int *up;     /* up[e]: the step r sends segment 0 to its parent in t; a root: its last child's */
  int *down;   /* down[e]: the step r receives segment 0's result from its parent; a root: up[e] */
} forest_t;

static void forest_free(forest_t *f) {
  free(f->par);
  f->par = NULL;
}

/* The edge after e at its child's end (side 0) or at its parent's end (side 1), -1 for none. */
static int next_edge(const forest_t *f, int e, int side) {
  if (side == 0) {
    return f->par[e ^ 1] >= 0 ? e ^ 1 : -1;
  }
  const int *k = &f->kid[4 * f->par[e]];
  for (int i = 0; i < 4; i++) {
    const int x = k[i] >= 0 ? 2 * k[i] + i / 2 : -1;
    if (x >= 0 && x != e) {
      return x;
    }
  }
  return -1;
}

/* Colour the path or cycle through e, leaving e through @p side first, alternating from 0. */
static void colour_walk(forest_t *f, int e, int side) {
  int c = 0;
  while (e >= 0 && f->colour[e] < 0) {
    f->colour[e] = c;
    c ^= 1;
    e = next_edge(f, e, side);
    side ^= 1;
  }
}

/* The first step after @p after in phase @p phase. */
static int step_after(int after, int phase) {
  const int s = after + 1;
  return s + (((phase - s) % 4) + 4) % 4;
}

static int up_steps(forest_t *f, int t, int r) {
  int last = -1;
  for (int i = 0; i < 2; i++) {
    const int k = f->kid[4 * r + 2 * t + i];
    if (k >= 0) {
      const int x = up_steps(f, t, k);
      last = x > last ? x : last;
    }
  }
  const int e = 2 * r + t;
  f->up[e] = f->par[e] < 0 ? last : step_after(last, f->colour[e]);
  return f->up[e];
}

static void down_steps(forest_t *f, int t, int r, int have) {
  const int e = 2 * r + t;
  f->down[e] = f->par[e] < 0 ? have : step_after(have, 2 + f->colour[e]);
  for (int i = 0; i < 2; i++) {
    const int k = f->kid[4 * r + 2 * t + i];
    if (k >= 0) {
      down_steps(f, t, k, f->down[e]);
    }
  }
}

/* Both trees of p ranks, coloured and timed. */
static int forest_init(int p, forest_t *f) {
  f->par = malloc((size_t)p * 14 * sizeof *f->par);
  if (f->par == NULL) {
    return mpiar__error(MPIAR_ERR_NOMEM, "double_binary_tree: the trees of %d ranks", p);
  }
  f->kid = f->par + 2 * p;
  f->colour = f->kid + 4 * p;
  f->up = f->colour + 2 * p;
  f->down = f->up + 2 * p;
  int root[2] = {0, 0};
  for (int t = 0; t < 2; t++) {
    for (int v = 0; v < p; v++) {
      int up, c[2];
      btree(p, v, &up, &c[0], &c[1]);
      const int r = rank_at(p, t, v);
      f->par[2 * r + t] = up >= 0 ? rank_at(p, t, up) : -1;
      root[t] = up >= 0 ? root[t] : r;
      for (int i = 0; i < 2; i++) {
        f->kid[4 * r + 2 * t + i] = c[i] >= 0 ? rank_at(p, t, c[i]) : -1;
      }
    }
  }
  for (int e = 0; e < 2 * p; e++) {
    f->colour[e] = -1;
  }
  /* Paths from their ends first, then the cycles. */
  for (int e = 0; e < 2 * p; e++) {
    if (f->par[e] >= 0 && f->colour[e] < 0) {
      if (next_edge(f, e, 0) < 0) {
        colour_walk(f, e, 1);
      } else if (next_edge(f, e, 1) < 0) {
        colour_walk(f, e, 0);
      }
    }
  }
  for (int e = 0; e < 2 * p; e++) {
    if (f->par[e] >= 0 && f->colour[e] < 0) {
      colour_walk(f, e, 0);
    }
  }
  for (int t = 0; t < 2; t++) {
    const int have = up_steps(f, t, root[t]);
    down_steps(f, t, root[t], have);
  }
  return MPIAR_SUCCESS;
}

/* One message or reduction of one segment of one tree, at its step of the timetable. */
enum { ACT_RECV_UP = 0, ACT_COMBINE, ACT_SEND_UP, ACT_RECV_DOWN, ACT_SEND_DOWN };
typedef struct action {
  long step;
  int kind, t, i; /* i: the child of RECV_UP and SEND_DOWN */
  size_t g;
} action_t;

static int action_cmp(const void *x, const void *y) {
  const action_t *a = x, *b = y;
  if (a->step != b->step) {
    return a->step < b->step ? -1 : 1;
  }
  if (a->kind != b->kind) {
    return a->kind - b->kind;
  }
  if (a->t != b->t) {
    return a->t - b->t;
  }
  return a->g != b->g ? (a->g < b->g ? -1 : 1) : a->i - b->i;
}

/* What the steps of one (tree, segment) left for the later ones. */
typedef struct seg_state {
  long rcv[2], last, snd, have;
} seg_state_t;

static int emit(mpiar__schedule_t *s, const tree_t *tr, const action_t *a, seg_state_t *st,
                long *chain) {
  int rc = MPIAR_SUCCESS;
  const size_t g = a->g, off = tr->off + g * tr->seg;
  const size_t len = g + 1 < tr->nseg ? tr->seg : tr->len - g * tr->seg;
  mpiar__operand_t slot[2];
  for (int i = 0; i < tr->nkids; i++) {
    slot[i] = mpiar__scratch(tr->scratch + (size_t)i * tr->len + g * tr->seg);
  }
  switch (a->kind) {
  case ACT_RECV_UP:
    MPIAR__STEP(st->rcv[a->i],
                mpiar__sched_recv(s, tr->kid[a->i], tag_of(tr->t, 0, g), slot[a->i], len, NULL, 0));
    break;
  case ACT_COMBINE:
    MPIAR__CHECK(combine(s, tr, off, len, slot, st->rcv, &st->last));
    if (tr->up < 0) {
      MPIAR__CHECK(mpiar__sched_mark_final(s, st->last));
      st->have = st->last;
    }
    break;
  case ACT_SEND_UP: {
    const mpiar__operand_t src = st->last >= 0 ? mpiar__out(off) : mpiar__own(s, off);
    const long deps[] = {st->last, *chain};
    MPIAR__STEP(st->snd, mpiar__sched_send(s, tr->up, tag_of(tr->t, 0, g), src, len, deps, 2));
    *chain = st->snd;
    break;
  }
  case ACT_RECV_DOWN: {
    /* The result overwrites OUTPUT, which the partial's send reads (or, in place, the own data).
     */
    const long deps[] = {st->snd, st->last};
    MPIAR__STEP(st->have,
                mpiar__sched_recv(s, tr->up, tag_of(tr->t, 1, g), mpiar__out(off), len, deps, 2));
    break;
  }
  default: {
    const long deps[] = {st->have, *chain};
    MPIAR__STEP(*chain, mpiar__sched_send(s, tr->kid[a->i], tag_of(tr->t, 1, g), mpiar__out(off),
                                          len, deps, 2));
    break;
  }
  }
cleanup:
  return rc;
}

int mpiar__build_double_binary_tree_colour(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  int rc = MPIAR_SUCCESS;
  int done = 0;
  forest_t f = {0};
  action_t *acts = NULL;
  seg_state_t *st = NULL;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  tree_t tr[2];
  trees_init(s, tr);
  if (p <= 3 || (tr[0].nseg == 1 && tr[1].nseg == 1)) {
    /* One segment per half, or p <= 3: the order in which messages become ready is faster in
     * the simulator there (see the header). */
    return mpiar__build_double_binary_tree(s);
  }
  MPIAR__CHECK(forest_init(p, &f));
  /* Every action of this rank at its step, then the steps in that order. */
  const size_t nseg = tr[0].nseg + tr[1].nseg;
  acts = malloc(nseg * 7 * sizeof *acts);
  st = malloc(nseg * sizeof *st);
  if (acts == NULL || st == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "double_binary_tree: the timetable of %zu segments", nseg);
  }
  size_t na = 0;
  for (int t = 0; t < 2; t++) {
    const int e = 2 * r + t;
    for (size_t g = 0; g < tr[t].nseg; g++) {
      const long base = 4 * (long)g;
      long last = -1;
      for (int i = 0; i < tr[t].nkids; i++) {
        const long x = f.up[2 * tr[t].kid[i] + t];
        last = x > last ? x : last;
        acts[na++] = (action_t){base + x, ACT_RECV_UP, t, i, g};
      }
      acts[na++] = (action_t){base + last, ACT_COMBINE, t, 0, g};
      if (tr[t].up >= 0) {
        acts[na++] = (action_t){base + f.up[e], ACT_SEND_UP, t, 0, g};
        acts[na++] = (action_t){base + f.down[e], ACT_RECV_DOWN, t, 0, g};
      }
      for (int i = 0; i < tr[t].nkids; i++) {
        acts[na++] = (action_t){base + f.down[2 * tr[t].kid[i] + t], ACT_SEND_DOWN, t, i, g};
      }
    }
  }
  for (size_t i = 0; i < nseg; i++) {
    st[i] = (seg_state_t){{-1, -1}, -1, -1, -1};
  }
  qsort(acts, na, sizeof *acts, action_cmp);
  long chain = -1; /* this rank's last send: the sends leave in the timetable's order */
  for (size_t i = 0; i < na; i++) {
    const action_t *a = &acts[i];
    seg_state_t *x = &st[a->t == 0 ? a->g : tr[0].nseg + a->g];
    MPIAR__CHECK(emit(s, &tr[a->t], a, x, &chain));
  }
cleanup:
  free(acts);
  free(st);
  forest_free(&f);
  return rc;
}

/*
 * One segment up and down tree 0 (both trees have its shape): the time position v's partial is
 * ready to go up, its children's arriving one after the other at its receive port, each piece
 * reduced after it arrives (t: one message, r: one reduction).
 */
/* A message's time between positions a and b of tree `tree`: t inside a node (or on one
 * level), ti across nodes. */
typedef struct edge_time {
  const mpiar__topology_t *topo; /* NULL: one level */
  double t, ti;
  int tree;
} edge_time_t;

static double edge(const edge_time_t *e, int a, int b) {
  if (e->topo == NULL) {
    return e->t;
  }
  const int p = e->topo->nranks;
  const int x = rank_at(p, e->tree, a), y = rank_at(p, e->tree, b);
  return e->topo->node_of[x] != e->topo->node_of[y] ? e->ti : e->t;
}

static double up_time(int p, int v, const edge_time_t *e, double r);
static double down_time(int p, int v, double have, const edge_time_t *e);

/* The first segment's way up and down the slower of the two trees (the header's fill). */
static double fill_time(int p, const mpiar__topology_t *two, double t, double ti, double r) {
  double fill = 0.0;
  for (int tree = 0; tree < (two != NULL ? 2 : 1); tree++) {
    const edge_time_t e = {two, t, ti, tree};
    const double x = down_time(p, 0, up_time(p, 0, &e, r), &e);
    fill = x > fill ? x : fill;
  }
  return fill;
}

static double up_time(int p, int v, const edge_time_t *e, double r) {
  int up, c[2];
  btree(p, v, &up, &c[0], &c[1]);
  double ready[2], msg[2];
  int k = 0;
  for (int i = 0; i < 2; i++) {
    if (c[i] >= 0) {
      msg[k] = edge(e, c[i], v);
      ready[k++] = up_time(p, c[i], e, r);
    }
  }
  if (k == 2 && ready[1] < ready[0]) {
    const double x = ready[0], y = msg[0];
    ready[0] = ready[1];
    ready[1] = x;
    msg[0] = msg[1];
    msg[1] = y;
  }
  double port = 0.0, done = 0.0;
  for (int i = 0; i < k; i++) {
    port = (ready[i] > port ? ready[i] : port) + msg[i];
    done = (port > done ? port : done) + r;
  }
  return done;
}

/* The latest arrival of the final segment below position v, which has it at time `have`. */
static double down_time(int p, int v, double have, const edge_time_t *e) {
  int up, c[2];
  btree(p, v, &up, &c[0], &c[1]);
  double last = have, send = have;
  for (int i = 0; i < 2; i++) {
    if (c[i] >= 0) {
      send += edge(e, v, c[i]);
      const double x = down_time(p, c[i], send, e);
      last = x > last ? x : last;
    }
  }
  return last;
}

/*
 * Two levels: the most messages of one segment (both trees, up and down) that one node's port
 * sends or receives across nodes; 0 on one level.
 */
static int node_port_load(int p, const mpiar__topology_t *topo) {
  if (topo == NULL) {
    return 0;
  }
  int *n = calloc(2 * (size_t)topo->nnodes, sizeof *n), most = 0;
  if (n == NULL) {
    return p; /* no memory for the tally: as if every message crossed one port */
  }
  for (int t = 0; t < 2; t++) {
    for (int v = 1; v < p; v++) {
      int up, c0, c1;
      btree(p, v, &up, &c0, &c1);
      const int a = topo->node_of[rank_at(p, t, v)], b = topo->node_of[rank_at(p, t, up)];
      if (a != b) {
        /* One message each way per segment: a's port sends one and receives one, so does b's. */
        most = ++n[2 * a] > most ? n[2 * a] : most;
        most = ++n[2 * a + 1] > most ? n[2 * a + 1] : most;
        most = ++n[2 * b] > most ? n[2 * b] : most;
        most = ++n[2 * b + 1] > most ? n[2 * b + 1] : most;
      }
    }
  }
  free(n);
  return most;
}

/*
 * The segment of @p bytes' halves and the message times: *m segments per half of *t (inside a
 * node) and *ti (across nodes, = *t on one level), *r to reduce one; @return the topology the
 * two-level terms use (NULL: one level).
 */
static const mpiar__topology_t *dbt_link(size_t bytes, size_t elem_size, size_t segment_bytes,
                                         const mpiar__cost_params_t *c,
                                         const mpiar__topology_t *topo, double *m, double *t,
                                         double *ti, double *r) {
  mpiar__cost_params_t link;
  const int one = mpiar__cost_one_level(topo, c, &link);
  const size_t es = elem_size ? elem_size : 1;
  const size_t half = (bytes / es + 1) / 2;
  size_t seglen;
  *m = (double)half_segs(half, segment_bytes / es, &seglen);
  const double sb = (double)(seglen * es);
  *t = link.alpha + sb * link.beta;
  *ti = one ? *t : c->alpha_inter + sb * c->beta_inter;
  *r = sb * link.gamma;
  return one ? NULL : topo;
}

double mpiar__cost_double_binary_tree(int nranks, size_t bytes, size_t elem_size,
                                      size_t segment_bytes, const mpiar__cost_params_t *c,
                                      const mpiar__topology_t *topo) {
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  double m, t, ti, r;
  const mpiar__topology_t *two =
      dbt_link(bytes, elem_size, segment_bytes, c, topo, &m, &t, &ti, &r);
  if (nranks == 2 && two == NULL) {
    /* Each rank's m leaf sends leave first; the results follow the reductions (see the header). */
    const double a = 2 * m * t, b = (m + 1) * t + r, d = 2 * t + m * r;
    return a > b ? (a > d ? a : d) : (b > d ? b : d);
  }
  /* The first segment's way up and down, then one segment per period (see the header). */
  const double fill = fill_time(nranks, two, t, ti, r);
  double period = nranks <= 3 ? 3 * t : (log2((double)nranks) + 4) * t;
  const double folds = 2.75 * r + 2 * t, ports = node_port_load(nranks, two) * ti;
  period = folds > period ? folds : period;
  period = ports > period ? ports : period;
  return fill + (m - 1) * period;
}

double mpiar__cost_double_binary_tree_colour(int nranks, size_t bytes, size_t elem_size,
                                             size_t segment_bytes, const mpiar__cost_params_t *c,
                                             const mpiar__topology_t *topo) {
  double m, t, ti, r;
  const mpiar__topology_t *two =
      dbt_link(bytes, elem_size, segment_bytes, c, topo, &m, &t, &ti, &r);
  if (nranks <= 3 || m == 1) {
    return mpiar__cost_double_binary_tree(nranks, bytes, elem_size, segment_bytes, c, topo);
  }
  /* The first segment as in the uncoloured order, then one per period (see the header). */
  const double fill = fill_time(nranks, two, t, ti, r);
  double period = 5.5 * t;
  const double folds = 2.75 * r + 2 * t, ports = node_port_load(nranks, two) * ti;
  period = folds > period ? folds : period;
  period = ports > period ? ports : period;
  return fill + (m - 1) * period;
}
