/*
 * Algorithm: reproducible weighted halving (`repro_halving`, research variant): reduce-scatter
 * along the canonical tree with O(log p) messages and exactly (p-1)/p n bytes sent per rank for
 * every p, then a Bruck allgather in layout order
 *
 * Every node of the canonical tree (src/reduce_kernels/canonical.c) is evaluated the way
 * recursive halving evaluates a power-of-two tree: the ranks under a node v hold v's partial
 * result spread over them, rank x on an interval I_v(x), the intervals of v's ranks partitioning
 * the vector. At node v = (left u1, right u2) every rank x of u1 keeps I_v(x) inside its
 * I_u1(x), sends the rest of I_u1(x) to the ranks of u2 whose I_v it covers and receives u2's
 * partial of I_v(x) from the ranks of u2 whose I_u2 covers it, then reduces u1 op u2 (left
 * first); the ranks of u2 do the mirror image (reducing u1 op u2 too). A leaf holds its own data
 * on the whole vector, and at the root I(x) is rank x's final block, n/p elements.
 *
 * Every rank therefore sends each element it does not finish exactly once: (p-1)/p n bytes, the
 * reduce-scatter lower bound, whatever the tree's shape. The intervals must stay contiguous (one
 * message per piece): each node lays its ranks out by merging its children's layouts, the
 * lighter child's ranks spread evenly between the heavier one's (Bresenham), and cuts each
 * child's intervals inside the gaps between that child's ranks, close to equal sizes. In the
 * canonical tree a left subtree has at least as many ranks as its right sibling and at most
 * twice as many, so a rank meets at most three ranks of the sibling per node: about 2 log2 p
 * messages out and in. For p a power of two the merge alternates and every node is one exchange
 * with one partner: recursive halving at distance 1 first.
 *
 * The allgather is Bruck's in layout order: with blocks numbered by their position i in the
 * vector, in step k the rank holding blocks [i, i + 2^k) (cyclic) sends them to the one at
 * position i - 2^k; ceil(log2 p) steps, (p-1)/p n bytes, one message per step and piece (two
 * where the cyclic range wraps).
 *
 * Restrictions: none. Any p, any count (empty pieces are not sent; both sides compute the same
 * pieces), in place or not.
 *
 * Memory: scratch for the largest interval this rank reduces (about n/2); a received piece
 * lands at its offset in it.
 *
 * Cost: bytes sent per rank exactly 2 (p-1)/p n for every p (p | count; tests/sim), at most
 * 3 ceil(log2 p) messages sent per rank (p <= 64, 100, 127, 1000). For powers of two it is
 * recursive halving + Bruck: 2 log2(p) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma, plus one alpha
 * per Bruck step whose range wraps (the cost function gives the formula without them). For other
 * p the time is not closed-form, and the finding of this variant is that it loses: every tree
 * node costs one message per element, so the ranks under the heavier subtree receive more (the
 * folded pairs receive and reduce n/2 more than the single ranks: 5n/6 against n/3 at p = 3),
 * and the one-port model charges the largest receive load. In the simulator (alpha 2 us,
 * 10 GB/s, 20 GB/s) it beats every other reproducible schedule only at medium sizes on many
 * ranks (100 ranks, 1 MiB: 430 us against 473 for repro_rabenseifner and 552 for rabenseifner)
 * and is 10% to 75% slower elsewhere (16 MiB: 3365 us against 2285 at p = 3, 6222 against 3827
 * at p = 100). repro_direct balances the receives exactly, since every block's tree is evaluated
 * where the block ends (the other ranks send raw pieces, two messages per fold instead of one
 * edge), at the price of p-1 messages.
 *
 * Tags: reduce-scatter at a node of height h (the fold nodes 0, a node over 2^j virtual leaves
 * j): one piece per pair of ranks and direction. Allgather step k, piece i (a wrapped range is
 * two pieces): L + 2 + 2k + i. The pieces need tags of their own: the receives of one step are
 * posted in whatever order their dependencies allow, and same-tag messages match in posting
 * order.
 */
#include <stdlib.h>
#include <string.h>

#include "algorithms/algorithms.h"
#include "algorithms/util.h"
#include "base/common.h"

typedef struct tnode {
  int left, right;  /* children (node indices), -1 for a leaf */
  int height;       /* tag: fold nodes 0, a node over 2^j virtual leaves j + 1; leaves -1 */
  int weight;       /* ranks below */
  int *order;       /* the ranks in layout order */
  uint8_t *is_left; /* per position of order: the rank is under the left child */
  size_t *cut;      /* weight + 1 boundaries: order[i] holds [cut[i], cut[i + 1]) */
} tnode_t;

typedef struct hv {
  mpiar__schedule_t *s;
  int p, rem, nnodes;
  size_t n;
  tnode_t *nodes;
  int *path; /* node indices from this rank's leaf's parent up to the root */
  int npath;
  long *prev; /* the reductions of the last node (deps of the next) */
  size_t nprev, cap;
  struct sent {
    long id;
    size_t lo, hi;
  } * sent; /* reduce-scatter sends that read OUTPUT */
  size_t nsent, sent_cap;
  long *deps; /* room for nsent dependencies */
} hv_t;

/* ---- the tree and its layouts ---- */

static int new_node(hv_t *h, int left, int right, int height, int rank) {
  tnode_t *t = &h->nodes[h->nnodes];
  const int w = left < 0 ? 1 : h->nodes[left].weight + h->nodes[right].weight;
  t->left = left;
  t->right = right;
  t->height = height;
  t->weight = w;
  t->order = malloc((size_t)w * sizeof *t->order);
  t->is_left = malloc((size_t)w);
  t->cut = malloc((size_t)(w + 1) * sizeof *t->cut);
  const int id = h->nnodes++; /* counted at once, so that cleanup frees a partial node */
  if (!t->order || !t->is_left || !t->cut) {
    return -1;
  }
  if (left < 0) {
    t->order[0] = rank;
    t->is_left[0] = 0;
    return id;
  }
  /* Merge: the right child's j-th rank goes after floor((2j + 1) W1 / (2 W2)) left ranks. */
  const tnode_t *a = &h->nodes[left], *b = &h->nodes[right];
  int ia = 0, ib = 0;
  for (int i = 0; i < w; i++) {
    const long before =
        ib < b->weight ? (long)(2 * ib + 1) * a->weight / (2 * b->weight) : a->weight;
    const int take_left = ia < a->weight && ia < before;
    t->order[i] = take_left ? a->order[ia++] : b->order[ib++];
    t->is_left[i] = (uint8_t)take_left;
  }
  return id;
}

/* The canonical tree over virtual leaves [lo, hi): a fold node or a rank at the bottom. */
static int make_tree(hv_t *h, int lo, int hi, int height) {
  if (hi - lo == 1) {
    if (lo < h->rem) {
      const int a = new_node(h, -1, -1, -1, 2 * lo), b = new_node(h, -1, -1, -1, 2 * lo + 1);
      return a < 0 || b < 0 ? -1 : new_node(h, a, b, 0, -1);
    }
    return new_node(h, -1, -1, -1, lo + h->rem);
  }
  const int mid = lo + (hi - lo) / 2;
  const int a = make_tree(h, lo, mid, height - 1),
            b = a < 0 ? -1 : make_tree(h, mid, hi, height - 1);
  return b < 0 ? -1 : new_node(h, a, b, height, -1);
}

static size_t clampz(size_t v, size_t lo, size_t hi) {
  return v < lo ? lo : v > hi ? hi : v;
}

/*
 * Given node v's cuts, cut each child's intervals: the child's k-th rank (in v's order) starts
 * between the end of the previous one's interval in v and the start of its own, as close to
 * k n / weight as that allows; every child's intervals contain its ranks' intervals in v.
 */
static void cut_children(hv_t *h, int v) {
  const tnode_t *t = &h->nodes[v];
  if (t->left < 0) {
    return;
  }
  for (int side = 0; side < 2; side++) {
    tnode_t *c = &h->nodes[side == 0 ? t->left : t->right];
    int k = 0;
    size_t prev_end = 0;
    c->cut[0] = 0;
    for (int i = 0; i < t->weight; i++) {
      if (t->is_left[i] != (side == 0)) {
        continue;
      }
      if (k > 0) {
        c->cut[k] = clampz(mpiar__block_off(h->n, c->weight, k), prev_end, t->cut[i]);
      }
      prev_end = t->cut[i + 1];
      k++;
    }
    c->cut[c->weight] = h->n;
    cut_children(h, side == 0 ? t->left : t->right);
  }
}

static int index_of(const tnode_t *t, int rank) {
  for (int i = 0; i < t->weight; i++) {
    if (t->order[i] == rank) {
      return i;
    }
  }
  return -1;
}

/* The path of `rank`: every node whose subtree holds it, from the bottom up. */
static int find_path(hv_t *h, int v, int rank) {
  const tnode_t *t = &h->nodes[v];
  if (t->left < 0) {
    return t->order[0] == rank;
  }
  if (find_path(h, t->left, rank) || find_path(h, t->right, rank)) {
    h->path[h->npath++] = v;
    return 1;
  }
  return 0;
}

/* ---- steps ---- */

static int push_id(long **arr, size_t *n, size_t *cap, long id) {
  if (*n == *cap) {
    size_t c = *cap ? 2 * *cap : 16;
    long *a = realloc(*arr, c * sizeof *a);
    if (a == NULL) {
      return MPIAR_ERR_NOMEM;
    }
    *arr = a;
    *cap = c;
  }
  (*arr)[(*n)++] = id;
  return MPIAR_SUCCESS;
}

static int note_sent(hv_t *h, long id, size_t lo, size_t hi) {
  if (h->nsent == h->sent_cap) {
    size_t c = h->sent_cap ? 2 * h->sent_cap : 16;
    struct sent *a = realloc(h->sent, c * sizeof *a);
    if (a == NULL) {
      return MPIAR_ERR_NOMEM;
    }
    h->sent = a;
    h->sent_cap = c;
  }
  h->sent[h->nsent].id = id;
  h->sent[h->nsent].lo = lo;
  h->sent[h->nsent++].hi = hi;
  return MPIAR_SUCCESS;
}

/* One node of this rank's path: exchange with the sibling subtree, then reduce. */
static int node_step(hv_t *h, int v, int first, int final) {
  mpiar__schedule_t *s = h->s;
  const tnode_t *t = &h->nodes[v];
  const int me = s->rank, iv = index_of(t, me), mine_left = t->is_left[iv];
  const tnode_t *c = &h->nodes[mine_left ? t->left : t->right];
  const tnode_t *sib = &h->nodes[mine_left ? t->right : t->left];
  const int ic = index_of(c, me);
  const size_t vlo = t->cut[iv], vhi = t->cut[iv + 1], clo = c->cut[ic], chi = c->cut[ic + 1];
  int rc = MPIAR_SUCCESS;
  long *now = NULL;
  size_t nnow = 0, capnow = 0;
  /* Sends: the parts of my child interval that the sibling's ranks finish at this node. */
  for (int j = 0; j < t->weight; j++) {
    if (t->is_left[j] == mine_left) {
      continue;
    }
    const size_t lo = t->cut[j] > clo ? t->cut[j] : clo,
                 hi = t->cut[j + 1] < chi ? t->cut[j + 1] : chi;
    if (lo >= hi) {
      continue;
    }
    const mpiar__operand_t src = first ? mpiar__own(s, lo) : mpiar__out(lo);
    long id;
    MPIAR__STEP(id, mpiar__sched_send(s, t->order[j], t->height, src, hi - lo, h->prev, h->nprev));
    if (src.buf == MPIAR__BUF_OUTPUT) {
      MPIAR__CHECK(note_sent(h, id, lo, hi));
    }
  }
  /* Receives: the sibling's partial of my interval at this node, then one reduction each. */
  for (int j = 0; j < sib->weight; j++) {
    const size_t lo = sib->cut[j] > vlo ? sib->cut[j] : vlo;
    const size_t hi = sib->cut[j + 1] < vhi ? sib->cut[j + 1] : vhi;
    if (lo >= hi) {
      continue;
    }
    long rcv, red;
    const mpiar__operand_t tmp = mpiar__scratch(lo - vlo);
    const mpiar__operand_t cur = first ? mpiar__own(s, lo) : mpiar__out(lo);
    MPIAR__STEP(rcv,
                mpiar__sched_recv(s, sib->order[j], t->height, tmp, hi - lo, h->prev, h->nprev));
    const long deps[] = {rcv};
    MPIAR__STEP(red, mine_left
                         ? mpiar__sched_reduce(s, mpiar__out(lo), cur, tmp, hi - lo, deps, 1)
                         : mpiar__sched_reduce(s, mpiar__out(lo), tmp, cur, hi - lo, deps, 1));
    if (final) {
      MPIAR__CHECK(mpiar__sched_mark_final(s, red));
    }
    MPIAR__CHECK(push_id(&now, &nnow, &capnow, red));
  }
  free(h->prev);
  h->prev = now;
  h->nprev = nnow;
  h->cap = capnow;
  return MPIAR_SUCCESS;
cleanup:
  free(now);
  return rc;
}

/* Bruck allgather over the blocks in layout order. */
static int bruck(hv_t *h, int height0) {
  mpiar__schedule_t *s = h->s;
  const tnode_t *root = &h->nodes[h->nnodes - 1];
  const int p = h->p, pos = index_of(root, s->rank);
  int rc = MPIAR_SUCCESS;
  long *done = NULL;
  size_t ndone = 0, capdone = 0;
  for (size_t i = 0; i < h->nprev; i++) {
    MPIAR__CHECK(push_id(&done, &ndone, &capdone, h->prev[i]));
  }
  for (int k = 0, dist = 1; dist < p; k++, dist *= 2) {
    const int cnt = dist < p - dist ? dist : p - dist;
    const int to = root->order[(pos - dist + p) % p], from = root->order[(pos + dist) % p];
    const size_t ndone_before = ndone;
    /* Send my blocks [pos, pos + cnt) and receive [pos + dist, pos + dist + cnt), cyclic. */
    for (int dir = 0; dir < 2; dir++) {
      const int start = dir == 0 ? pos : (pos + dist) % p;
      for (int piece = 0; piece < 2; piece++) {
        const int b0 = piece == 0 ? start : 0;
        const int b1 = piece == 0 ? (start + cnt < p ? start + cnt : p) : start + cnt - p;
        if (b1 <= b0) {
          continue;
        }
        const size_t lo = root->cut[b0], hi = root->cut[b1];
        if (lo >= hi) {
          continue;
        }
        long id;
        if (dir == 0) {
          MPIAR__STEP(id, mpiar__sched_send(s, to, height0 + 1 + 2 * k + piece, mpiar__out(lo),
                                            hi - lo, done, ndone_before));
          continue;
        }
        /* The blocks land where the reduce-scatter may have sent from OUTPUT: wait for those. */
        size_t nd = 0;
        for (size_t i = 0; i < h->nsent; i++) {
          if (h->sent[i].lo < hi && lo < h->sent[i].hi) {
            h->deps[nd++] = h->sent[i].id;
          }
        }
        MPIAR__STEP(id, mpiar__sched_recv(s, from, height0 + 1 + 2 * k + piece, mpiar__out(lo),
                                          hi - lo, nd ? h->deps : NULL, nd));
        MPIAR__CHECK(push_id(&done, &ndone, &capdone, id));
      }
    }
  }
cleanup:
  free(done);
  return rc;
}

int mpiar__build_repro_halving(mpiar__schedule_t *s) {
  int rc = MPIAR_SUCCESS, done = 0;
  hv_t h;
  memset(&h, 0, sizeof h);
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  h.s = s;
  h.p = s->nranks;
  h.n = s->count;
  const int pof2 = mpiar__pof2_floor(h.p), L = mpiar__log2i(pof2);
  h.rem = h.p - pof2;
  h.nodes = calloc(2 * (size_t)h.p + 1, sizeof *h.nodes);
  h.path = malloc((size_t)(L + 2) * sizeof *h.path);
  if (h.nodes == NULL || h.path == NULL || make_tree(&h, 0, pof2, L) < 0) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "repro_halving tree of %d ranks", h.p);
  }
  tnode_t *root = &h.nodes[h.nnodes - 1];
  for (int i = 0; i <= h.p; i++) {
    root->cut[i] = mpiar__block_off(h.n, h.p, i);
  }
  cut_children(&h, h.nnodes - 1);
  find_path(&h, h.nnodes - 1, s->rank);
  size_t scratch = 0;
  for (int i = 0; i < h.npath; i++) {
    const tnode_t *t = &h.nodes[h.path[i]];
    const int iv = index_of(t, s->rank);
    scratch = t->cut[iv + 1] - t->cut[iv] > scratch ? t->cut[iv + 1] - t->cut[iv] : scratch;
  }
  s->scratch_elems = scratch;
  for (int i = 0; i < h.npath; i++) {
    MPIAR__CHECK(node_step(&h, h.path[i], i == 0, i == h.npath - 1));
  }
  h.deps = malloc((h.nsent + 1) * sizeof *h.deps);
  if (h.deps == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "repro_halving: %zu dependencies", h.nsent);
  }
  MPIAR__CHECK(bruck(&h, L + 1));
cleanup:
  for (int i = 0; i < h.nnodes; i++) {
    free(h.nodes[i].order);
    free(h.nodes[i].is_left);
    free(h.nodes[i].cut);
  }
  free(h.nodes);
  free(h.path);
  free(h.prev);
  free(h.sent);
  free(h.deps);
  return rc;
}

double mpiar__cost_repro_halving(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                                 const mpiar__cost_params_t *cost, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  mpiar__cost_params_t link; /* two levels: the slower level for every message, an upper bound */
  mpiar__cost_slow_link(topo, cost, &link);
  const mpiar__cost_params_t *c = &link;
  /* Rabenseifner's formula with p for p': exact for powers of two, an estimate otherwise. */
  const double p = nranks, n = (double)bytes;
  return 2 * mpiar__log2i(nranks) * c->alpha + 2 * (p - 1) / p * n * c->beta +
         (p - 1) / p * n * c->gamma;
}
