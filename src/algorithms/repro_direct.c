/*
 * Algorithm: reproducible direct reduce-scatter + ring allgather (`repro_direct`), the
 * reproducible-mode replacement of `ring`
 *
 * The vector is cut into p blocks (mpiar__block_off); rank r finishes block r. Reduce-scatter:
 * in step k (1 <= k < p) rank r sends its piece of block r+k to rank r+k and receives rank
 * r-k's piece of block r, so each step is a permutation of the ranks and no receive port is
 * asked for twice at once. As the pieces arrive, rank r reduces them in the canonical tree
 * (src/reduce_kernels/canonical.c): each tree node is one REDUCE that depends only on its two
 * children, so the reductions run while later pieces are still on the wire, and the element's
 * result does not depend on the block it sits in. The allgather is the ring's: in step k rank r
 * forwards block r-k to rank r+1.
 *
 * Why not the ring: the ring reduces each block along a chain that starts at a different rank
 * for every block, so an element's order depends on its position in the vector. Here every block
 * meets the same tree. The message count, 2(p-1) per rank, and the bytes sent, 2 (p-1)/p n per
 * rank (the lower bound for allreduce), are the ring's, for every p.
 *
 * Restrictions: none. Any p, any count (count < p gives empty blocks, which still travel as
 * zero-length messages, as in the ring, so that every rank keeps the same step sequence), in place
 * or not.
 *
 * Memory: scratch for the p-1 received pieces of block r ((p-1)/p n elements). Interior tree
 * nodes overwrite their left child's piece in scratch; the nodes on the path from rank r's own
 * piece to the root write OUTPUT's block r directly (three-operand reductions read INPUT, so no
 * up-front copy). In place, the allgather's receive of block b waits for the send that read it.
 *
 * Segmentation (s->segment_elems > 0): every piece travels as segments of at most segment_elems
 * elements and each segment has its own tree. The pieces are sent along diagonals (scatter()), so
 * the trees finish one after the other during the transfers and the allgather of a segment
 * starts as soon as its tree is done.
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced, B = n/p bytes, p | count,
 * d = ceil(log2 p), the depth of the canonical tree, one send and one receive port per rank):
 *   unsegmented:   2(p-1) (alpha + B beta) + d B gamma
 *   The pieces arrive one per alpha + B beta; when d B gamma <= alpha + B beta each arrival's
 *   reductions finish before the next one, so only the path from the last piece to the root
 *   (d reductions on the rank whose last piece is a fold leaf) is added to the transfers: the
 *   ring pays (p-1) B gamma there. Outside that regime the simulator gives up to 3% more
 *   (p <= 64): reductions pile up behind arrivals that complete several subtrees at once.
 *   segmented, m = B/S >= 2 segments of S bytes:
 *                  2(p-1) (m alpha + B beta)
 *   the segmented ring's port-bound time: the trees of the last segments finish while the
 *   allgather of the earlier ones occupies the ports. Exact where d S gamma <= alpha + S beta;
 *   outside, up to 5% more than the segmented ring in the simulator (p <= 64, 1 to 64 MiB,
 *   segments of 64 KiB to 4 MiB; the worst cases have two segments per block): the tree of the
 *   last segment costs d S gamma after its last piece, the ring's chain only S gamma.
 * The simulator's critical path equals both formulas in their regimes for every p, and the time
 * never exceeds the ring's unsegmented or in the exact regime (tests/sim/test_sim_repro.c).
 *
 * Reduce-scatter (mpiar__build_repro_direct_rs, the reduce-scatter registry's repro_direct):
 * the same reduce-scatter without the allgather, for a schedule whose count is one rank's block
 * (reduce_scatter.c): the tree's root writes OUTPUT[0, c), or, in place, block r where its input
 * lies, copied to the start once block 0's pieces have left.
 *
 * Tags: messages from r to one peer are numbered in posting order (reduce-scatter segments, then,
 * to r+1, the allgather's) and carry their number mod MPIAR__TAG_LIMIT; where a tag repeats, the
 * later send and receive depend on the earlier ones with that tag.
 */
#include <math.h>
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

typedef struct rd {
  mpiar__schedule_t *s;
  int p, r, rem, next, prev;
  size_t n, seg, maxseg, mylen, myoff;
  size_t outoff;  /* where OUTPUT receives block r: myoff, or 0 for a reduce-scatter */
  long *rs_send;  /* per (block, segment): the reduce-scatter send of this rank's piece */
  long *leaf;     /* per (k - 1, segment): the receive of rank r-k's piece of block r */
  long *holds;    /* per (block, segment): the step after which OUTPUT holds it final */
  long *tonext;   /* every message to r+1, in order (tag reuse) */
  long *fromprev; /* every message from r-1, in order */
  size_t nnext, nprev;
} rd_t;

/* Segments of a block of `len` elements: at least one, so an empty block still sends. */
static size_t nsegs(size_t len, size_t seg) {
  return (seg == 0 || len <= seg) ? 1 : (len + seg - 1) / seg;
}

static size_t seg_off(size_t g, size_t seg) {
  return g * seg;
}

static size_t seg_len(size_t len, size_t g, size_t seg) {
  if (seg == 0) {
    return len;
  }
  return len - g * seg < seg ? len - g * seg : seg;
}

/* The dependency that keeps a reused tag in order: message q - MPIAR__TAG_LIMIT of the sequence. */
static long tag_dep(const long *seq, size_t q) {
  return q >= MPIAR__TAG_LIMIT ? seq[q - MPIAR__TAG_LIMIT] : -1;
}

/* Send rank r's piece of segment g of block r+k (step k) to rank r+k. */
static int send_piece(rd_t *st, int k, size_t g) {
  const int to = (st->r + k) % st->p;
  const size_t off = mpiar__block_off(st->n, st->p, to), len = mpiar__block_len(st->n, st->p, to);
  long *seq = st->rs_send + (size_t)to * st->maxseg; /* messages to `to`, in order */
  const long deps[] = {tag_dep(seq, g)};
  const long id = mpiar__sched_send(st->s, to, (int)(g % MPIAR__TAG_LIMIT),
                                    mpiar__own(st->s, off + seg_off(g, st->seg)),
                                    seg_len(len, g, st->seg), deps, 1);
  seq[g] = id;
  if (to == st->next && id >= 0) {
    st->tonext[st->nnext++] = id;
  }
  return id < 0 ? (int)id : MPIAR_SUCCESS;
}

/* Receive rank r-k's piece of segment g of block r into its scratch slot. */
static int recv_piece(rd_t *st, int k, size_t g) {
  const int from = (st->r - k + st->p) % st->p;
  long *seq = st->leaf + (size_t)(k - 1) * st->maxseg; /* messages from `from`, in order */
  const long deps[] = {tag_dep(seq, g)};
  const long id =
      mpiar__sched_recv(st->s, from, (int)(g % MPIAR__TAG_LIMIT),
                        mpiar__scratch((size_t)(k - 1) * st->mylen + seg_off(g, st->seg)),
                        seg_len(st->mylen, g, st->seg), deps, 1);
  seq[g] = id;
  if (from == st->prev && id >= 0) {
    st->fromprev[st->nprev++] = id;
  }
  return id < 0 ? (int)id : MPIAR_SUCCESS;
}

/*
 * Reduce-scatter traffic. Every rank runs through the same sequence of (step k, segment g), so at
 * each position all ranks send to the rank k ahead: a permutation, no receive port asked twice.
 * The sequence runs along diagonals k + g = t + 1, g ascending (k descending) within one: segment
 * g's tree gets its last piece at position ~ g + p - 1 instead of all trees at the very end, so
 * the reductions of finished segments spread over the transfers and the allgather of segment g
 * starts early. Unsegmented (one segment) it is simply k = 1 .. p-1.
 */
static int scatter(rd_t *st) {
  int rc = MPIAR_SUCCESS;
  const size_t ndiag = (size_t)(st->p - 1) + st->maxseg - 1;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t t = 0; t < ndiag; t++) {
      for (size_t g = t + 1 > (size_t)(st->p - 1) ? t + 1 - (size_t)(st->p - 1) : 0;
           g <= t && g < st->maxseg; g++) {
        const int k = (int)(t - g) + 1;
        const int to = (st->r + k) % st->p;
        if (pass == 0 && g < nsegs(mpiar__block_len(st->n, st->p, to), st->seg)) {
          MPIAR__CHECK(send_piece(st, k, g));
        }
        if (pass == 1 && g < nsegs(st->mylen, st->seg)) {
          MPIAR__CHECK(recv_piece(st, k, g));
        }
      }
    }
  }
cleanup:
  return rc;
}

/* A partial result of the tree: where it lies and the step that produced it (-1: input data). */
typedef struct node {
  mpiar__operand_t at;
  long id;
} node_t;

/* Rank x's piece of segment g of block r. */
static node_t leaf_of(const rd_t *st, int x, size_t g) {
  node_t nd;
  if (x == st->r) {
    nd.at = mpiar__own(st->s, st->myoff + seg_off(g, st->seg));
    nd.id = -1;
  } else {
    const size_t k = (size_t)((st->r - x + st->p) % st->p);
    nd.at = mpiar__scratch((k - 1) * st->mylen + seg_off(g, st->seg));
    nd.id = st->leaf[(k - 1) * st->maxseg + g];
  }
  return nd;
}

/* a op b, a first; written to OUTPUT's block r on the path of rank r's own piece, else over a. */
static int combine(rd_t *st, node_t a, node_t b, int mine, size_t g, node_t *out) {
  const size_t len = seg_len(st->mylen, g, st->seg);
  out->at = mine ? mpiar__out(st->outoff + seg_off(g, st->seg)) : a.at;
  const long deps[] = {a.id, b.id};
  out->id = mpiar__sched_reduce(st->s, out->at, a.at, b.at, len, deps, 2);
  return out->id < 0 ? (int)out->id : MPIAR_SUCCESS;
}

/* The canonical tree over virtual leaves [lo, hi) (see canonical.c) for segment g. */
static int tree(rd_t *st, int lo, int hi, size_t g, node_t *out) {
  const int vr = st->r < 2 * st->rem ? st->r / 2 : st->r - st->rem; /* rank r's virtual leaf */
  const int mine = lo <= vr && vr < hi;
  int rc = MPIAR_SUCCESS;
  if (hi - lo == 1) {
    if (lo < st->rem) { /* the fold leaf y_lo = x_{2 lo} op x_{2 lo + 1} */
      return combine(st, leaf_of(st, 2 * lo, g), leaf_of(st, 2 * lo + 1, g), mine, g, out);
    }
    *out = leaf_of(st, lo + st->rem, g);
    return MPIAR_SUCCESS;
  }
  const int mid = lo + (hi - lo) / 2;
  node_t a, b;
  MPIAR__CHECK(tree(st, lo, mid, g, &a));
  MPIAR__CHECK(tree(st, mid, hi, g, &b));
  rc = combine(st, a, b, mine, g, out);
cleanup:
  return rc;
}

/* The reductions of block r, segment by segment; each root is final. */
static int reduce_block(rd_t *st) {
  int rc = MPIAR_SUCCESS;
  const int pof2 = mpiar__pof2_floor(st->p);
  if (st->mylen == 0) {
    return MPIAR_SUCCESS; /* an empty block: its zero-length messages carry nothing to reduce */
  }
  for (size_t g = 0; g < nsegs(st->mylen, st->seg); g++) {
    node_t root;
    MPIAR__CHECK(tree(st, 0, pof2, g, &root));
    MPIAR__CHECK(mpiar__sched_mark_final(st->s, root.id));
    st->holds[(size_t)st->r * st->maxseg + g] = root.id;
  }
cleanup:
  return rc;
}

/* Ring allgather: in step k forward block r-k to r+1 and receive block r-1-k from r-1. */
static int gather(rd_t *st) {
  mpiar__schedule_t *s = st->s;
  int rc = MPIAR_SUCCESS;
  for (int k = 0; k < st->p - 1; k++) {
    const int sb = (st->r - k + st->p) % st->p, rb = (st->r - 1 - k + st->p) % st->p;
    const size_t sbo = mpiar__block_off(st->n, st->p, sb), sbl = mpiar__block_len(st->n, st->p, sb);
    const size_t rbo = mpiar__block_off(st->n, st->p, rb), rbl = mpiar__block_len(st->n, st->p, rb);
    for (size_t g = 0; g < nsegs(sbl, st->seg); g++, st->nnext++) {
      const long deps[] = {st->holds[(size_t)sb * st->maxseg + g], tag_dep(st->tonext, st->nnext)};
      MPIAR__STEP(st->tonext[st->nnext],
                  mpiar__sched_send(s, st->next, (int)(st->nnext % MPIAR__TAG_LIMIT),
                                    mpiar__out(sbo + seg_off(g, st->seg)), seg_len(sbl, g, st->seg),
                                    deps, 2));
    }
    for (size_t g = 0; g < nsegs(rbl, st->seg); g++, st->nprev++) {
      /* In place, the reduce-scatter sent this rank's own data from where the block lands. */
      const long deps[] = {s->in_place ? st->rs_send[(size_t)rb * st->maxseg + g] : -1,
                           tag_dep(st->fromprev, st->nprev)};
      long id;
      MPIAR__STEP(id, mpiar__sched_recv(s, st->prev, (int)(st->nprev % MPIAR__TAG_LIMIT),
                                        mpiar__out(rbo + seg_off(g, st->seg)),
                                        seg_len(rbl, g, st->seg), deps, 2));
      st->fromprev[st->nprev] = id;
      st->holds[(size_t)rb * st->maxseg + g] = id;
    }
  }
cleanup:
  return rc;
}

/* The allreduce (rs 0) or its reduce-scatter half alone (rs 1: count is one block). */
static int build(mpiar__schedule_t *s, int rs) {
  int rc = MPIAR_SUCCESS, done = 0;
  rd_t st = {0};
  long *copy_deps = NULL;
  MPIAR__CHECK(rs ? mpiar__build_rs_trivial(s, &done) : mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  st.s = s;
  st.p = s->nranks;
  st.r = s->rank;
  st.rem = st.p - mpiar__pof2_floor(st.p);
  st.next = (st.r + 1) % st.p;
  st.prev = (st.r + st.p - 1) % st.p;
  st.n = rs ? (size_t)st.p * s->count : s->count;
  st.seg = s->segment_elems;
  st.maxseg = nsegs(mpiar__block_len(st.n, st.p, 0), st.seg);
  st.mylen = mpiar__block_len(st.n, st.p, st.r);
  st.myoff = mpiar__block_off(st.n, st.p, st.r);
  /* A reduce-scatter's OUTPUT is one block, except in place, where block r is computed where
   * its input lies and copied to the start once block 0 has been sent. */
  st.outoff = rs && !s->in_place ? 0 : st.myoff;
  const size_t cells = (size_t)st.p * st.maxseg;
  st.rs_send = malloc(cells * sizeof *st.rs_send);
  st.leaf = malloc(cells * sizeof *st.leaf);
  st.holds = malloc(cells * sizeof *st.holds);
  st.tonext = malloc(cells * sizeof *st.tonext);
  st.fromprev = malloc(cells * sizeof *st.fromprev);
  if (!st.rs_send || !st.leaf || !st.holds || !st.tonext || !st.fromprev) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "repro_direct schedule of %zu segments", cells);
  }
  for (size_t i = 0; i < cells; i++) {
    st.rs_send[i] = st.holds[i] = -1;
  }
  s->scratch_elems = (size_t)(st.p - 1) * st.mylen;
  MPIAR__CHECK(scatter(&st));
  MPIAR__CHECK(reduce_block(&st));
  if (!rs) {
    MPIAR__CHECK(gather(&st));
  } else if (s->in_place && st.r != 0) {
    copy_deps = malloc(2 * st.maxseg * sizeof *copy_deps);
    if (copy_deps == NULL) {
      MPIAR__FAIL(MPIAR_ERR_NOMEM, "repro_direct reduce-scatter schedule");
    }
    for (size_t g = 0; g < st.maxseg; g++) {
      copy_deps[2 * g] = st.holds[(size_t)st.r * st.maxseg + g];
      copy_deps[2 * g + 1] = st.rs_send[g]; /* block 0's pieces, read where the result goes */
    }
    long id;
    MPIAR__STEP(id, mpiar__sched_copy(s, mpiar__out(0), mpiar__out(st.myoff), st.mylen,
                                      copy_deps, 2 * st.maxseg));
  }
cleanup:
  free(copy_deps);
  free(st.rs_send);
  free(st.leaf);
  free(st.holds);
  free(st.tonext);
  free(st.fromprev);
  return rc;
}

int mpiar__build_repro_direct(mpiar__schedule_t *s) {
  return build(s, 0);
}

int mpiar__build_repro_direct_rs(mpiar__schedule_t *s) {
  return build(s, 1);
}

double mpiar__cost_repro_direct(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                const mpiar__cost_params_t *cost, const mpiar__topology_t *topo) {
  (void)elem_size;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  mpiar__cost_params_t link; /* two levels: the slower level for every message, an upper bound */
  mpiar__cost_slow_link(topo, cost, &link);
  const double p = nranks, blk = (double)bytes / p;
  const double d = mpiar__log2i(nranks); /* ceil(log2 p): the depth of the canonical tree */
  const double m = segment_bytes ? ceil(blk / (double)segment_bytes) : 1.0;
  link = mpiar__cost_at(&link, m < 2 ? blk : blk / m); /* blocks, or segments: one size */
  const mpiar__cost_params_t *c = &link;
  if (m < 2) {
    return 2 * (p - 1) * (c->alpha + blk * c->beta) + d * blk * c->gamma;
  }
  return 2 * (p - 1) * (m * c->alpha + blk * c->beta);
}
