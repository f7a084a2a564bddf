/*
 * Algorithm: bucket/d=D (the multi-port bucket algorithm: multi-dimensional rings on 2 D parts of
 * the vector at once)
 *
 * Reference: N. Jain, Y. Sabharwal, "Optimal bucket algorithms for large MPI collectives on torus
 * interconnects", ICS '10; as the baseline of D. De Sensi, T. Bonato, D. Saam, T. Hoefler,
 * "Swing: Short-cutting Rings for Higher Bandwidth Allreduce", NSDI '24 (arXiv:2401.09356), where
 * the vector is split so that every port of a torus node carries one part.
 *
 * The ranks form swing_md's grid (swing.h, mpiar__swing_grid: the most square grid of p' = 2^L
 * ranks in D power-of-two dimensions, dimension 0 varying fastest, as mpiar-sim's
 * torus:D0xD1x... numbers its nodes), so that bucket/d=D and swing_md/d=D run on the same grid,
 * port for port. The vector is cut into 2 D contiguous parts. Part k (k < D) runs the
 * multi-dimensional ring in the dimensions k, k+1, ..., k+D-1 (mod D): a ring reduce-scatter
 * along dimension k over the part, then along the next dimension over the block the first one
 * left, and so on, then the ring allgathers back in the reverse order. Part D + k does the same
 * with every ring turned the other way (to the previous coordinate instead of the next). At any
 * time part k and part D + k use opposite directions of one dimension and the parts of different
 * k different dimensions, so while the phases stay in step each node drives all 2 D of its torus
 * links, each with 1/(2D) of the data. Dimensions of size 1 (d above L) are skipped. The rings
 * are ring_group.c's (torus_2d's): torus_2d is the one-part, one-direction form on a 2-D grid.
 *
 * Non-power-of-two p: swing's fold (mpiar__swing_fold: the first 2 (p - p') ranks pair up, the
 * result goes back at the end), the grid that of p'.
 *
 * Operand order: inside every ring the partial from the previous position first, except at
 * position 0 (positions counted in the ring's direction), so on two ranks every element is
 * x0 op x1 (MPIAR__ALG_PAIR_EXACT). Each element is finished by one rank and copied to the
 * others: every rank has the same bits; the order depends on the element's part and block
 * (MPIAR__ALG_ORDER_BY_POSITION; reproducible mode runs repro_rabenseifner instead).
 * Restrictions: none; any count (parts without an element are skipped by every rank, empty
 * blocks travel as zero-length messages), in place or not.
 *
 * Memory: two scratch blocks per ring that receives into scratch, summed over the parts:
 * 2 n (1/(D_0 D_1) + 1/(D_0 D_1 D_2) + ... + 1/p') elements for the later dimensions' rings (D_0
 * a part's first dimension, D_1 its second, ...; 2 n / p' on a 2-D grid), and in place also
 * 2 n / D_0 for the first (out of place the first ring receives straight into OUTPUT); at
 * least n with a fold.
 *
 * Cost (alpha per message, beta per byte sent, gamma per byte reduced, n bytes, P = 2 D parts,
 * S = sum over the dimensions of (D_k - 1), p' = prod D_k; the fold as swing's:
 * + (alpha + n beta + n gamma) + (alpha + n beta)):
 *   one level:  2 S P alpha + 2 (p'-1)/p' n beta                    (gamma <= beta, P >= 2)
 *               + (p'-1)/p' n (gamma - beta) / P                     (gamma > beta, estimate)
 *               P = the parts with an element; one part: the rings' own
 *               2 S alpha + 2 (p'-1)/p' n beta + (p'-1)/p' n gamma (torus_2d's form)
 * The one-port model sends a rank's messages one after the other, so the parts buy no bandwidth
 * there and cost 2 S (P - 1) alphas more than one multi-dimensional ring; with gamma <= beta the
 * reductions hide behind the other parts' messages. The simulator's time equals the first form
 * at powers of two with gamma = 0, and with 0 < gamma <= beta up to 128 ranks (square grids and
 * not: 8x4, 16x8); from 16x16 on the last parts' reductions are not all hidden (16x16, 16 MiB:
 * 0.06 % above with gamma = beta / 2, 0.4 % with gamma = beta). tests/sim/test_sim_bucket.c.
 * On a routed torus whose shape is the grid (mpiar-sim --topology torus:...) every message
 * crosses one link and the parts run side by side: on a grid of equal dimensions, with
 * gamma = 0, the time is 2 S (alpha + hop) + 2 (p'-1)/p' n beta / (2 D) within 0.1 % (the test
 * holds it; docs/algorithms.md compares it with Swing). On other grids a part's first dimension
 * carries more bytes than the others (8x4: 35/64 n per link of the 8-rank dimension, 27/64 n on
 * the other), so its links set the time.
 * Two levels: not modelled (the one-level formula over the slower link).
 * Bytes sent per rank: 2 (p'-1)/p' n at powers of two (the allreduce lower bound).
 *
 * Tags: 0 the fold, 1 the return; the ring of part j in its i-th dimension uses the T tags from
 * 2 + (j D + i) T, T = (1024 - 2) / (2 D D), repeating after T messages (ring_group.h).
 */
#include <stdlib.h>

#include "algorithms/ring_group.h"
#include "algorithms/swing.h"
#include "algorithms/util.h"
#include "base/common.h"

#define BUCKET_TAG_POST 1
#define BUCKET_TAG0 2

/* The grid of p' ranks for d dimensions: sizes and rank strides; @return p'. */
static int grid(int nranks, int d, int *dims, int *stride) {
  const int P = mpiar__pof2_floor(nranks > 0 ? nranks : 1);
  mpiar__swing_grid(P, d, dims);
  int st = 1;
  for (int k = 0; k < d; k++) {
    stride[k] = st;
    st *= dims[k];
  }
  return P;
}

/* Where the build of one rank stands: the grid, its virtual rank, scratch and written steps. */
typedef struct bucket {
  mpiar__schedule_t *s;
  int d, rem, v, in_out, ntags;
  int dims[MPIAR__SWING_MAX_DIMS], stride[MPIAR__SWING_MAX_DIMS];
  long start;     /* the fold's reduction (OUTPUT ready), or -1 */
  size_t scratch; /* the next free scratch element */
  long *written;  /* every step that wrote OUTPUT's final value, for the fold's return */
  size_t nwritten;
} bucket_t;

/*
 * The ring of part j along dimension e, over [off, off + len): positions counted in the part's
 * direction, neighbours the real ranks one coordinate on either side.
 */
static int ring_of(bucket_t *b, mpiar__ring_group_t *g, int j, int i, int e, size_t off,
                   size_t len) {
  const int m = b->dims[e], c = (b->v / b->stride[e]) % m, dir = j < b->d ? 1 : m - 1;
  const int pos = j < b->d ? c : (m - c) % m;
  const int vn = b->v + ((c + dir) % m - c) * b->stride[e];
  const int vp = b->v + ((c + m - dir) % m - c) * b->stride[e];
  const int rc = mpiar__ring_group_init(g, b->s, m, pos, mpiar__fold_real_rank(vn, b->rem),
                                        mpiar__fold_real_rank(vp, b->rem), off, len,
                                        BUCKET_TAG0 + (j * b->d + i) * b->ntags, b->ntags);
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  g->from_input = i == 0 && !b->in_out;
  if (!g->from_input || b->s->in_place) {
    g->scratch = b->scratch;
    b->scratch += 2 * g->maxblk;
  }
  return MPIAR_SUCCESS;
}

/*
 * Part j: reduce-scatter along its dimensions in order, each over the block the previous one
 * left, then allgather back in the reverse order. The steps that wrote the part's final OUTPUT
 * are appended to b->written.
 */
static int build_part(bucket_t *b, int j, size_t off, size_t len) {
  mpiar__ring_group_t rings[MPIAR__SWING_MAX_DIMS] = {{0}};
  int rc = MPIAR_SUCCESS, nr = 0;
  int order[MPIAR__SWING_MAX_DIMS];
  for (int i = 0; i < b->d; i++) {
    const int e = (j + i) % b->d;
    if (b->dims[e] > 1) {
      order[nr++] = e;
    }
  }
  long start = b->start;
  for (int i = 0; i < nr; i++) {
    MPIAR__CHECK(ring_of(b, &rings[i], j, i, order[i], off, len));
    MPIAR__CHECK(mpiar__ring_group_rs(&rings[i], start, i == nr - 1));
    const int mb = (rings[i].pos + 1) % rings[i].size;
    start = rings[i].red[mb];
    off = mpiar__ring_group_off(&rings[i], mb);
    len = mpiar__ring_group_len(&rings[i], mb);
  }
  /* Allgather, innermost first: the block a ring starts with is final after the steps written
   * since this part began (its reduction, then the receives of the inner rings). */
  const size_t first = b->nwritten;
  b->written[b->nwritten++] = start;
  for (int i = nr - 1; i >= 0; i--) {
    mpiar__ring_group_t *g = &rings[i];
    const int mb = (g->pos + 1) % g->size;
    long *done = b->written + b->nwritten;
    MPIAR__CHECK(mpiar__ring_group_ag(g, b->written + first, b->nwritten - first, done));
    /* done[] holds a receive for every block but the ring's own: close the gap. */
    for (int k = mb; k + 1 < g->size; k++) {
      done[k] = done[k + 1];
    }
    b->nwritten += (size_t)(g->size - 1);
  }
cleanup:
  for (int i = 0; i < nr; i++) {
    mpiar__ring_group_free(&rings[i]);
  }
  return rc;
}

int mpiar__build_bucket_k(mpiar__schedule_t *s, int d) {
  if (d < 1 || d > MPIAR__SWING_MAX_DIMS) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "bucket: d = %d, not 1 .. %d", d,
                        MPIAR__SWING_MAX_DIMS);
  }
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS, done = 0;
  bucket_t b = {.s = s, .d = d, .start = -1};
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  const int P = grid(s->nranks, d, b.dims, b.stride), nparts = 2 * d;
  b.rem = s->nranks - P;
  b.ntags = (MPIAR__TAG_LIMIT - BUCKET_TAG0) / (nparts * d);
  size_t sum = 1; /* the steps a part records: its last reduction and a receive per block */
  for (int k = 0; k < d; k++) {
    sum += (size_t)(b.dims[k] - 1);
  }
  /* One more: a ring's allgather fills a slot for its own block too before build_part drops it. */
  b.written = malloc(((size_t)nparts * sum + 1) * sizeof *b.written);
  if (b.written == NULL) {
    MPIAR__FAIL(MPIAR_ERR_NOMEM, "bucket schedule of %d ranks", s->nranks);
  }
  if (mpiar__swing_fold(s, b.rem, BUCKET_TAG_POST, &b.v, &b.start, &b.in_out, &rc)) {
    goto cleanup; /* a folded rank: its schedule is complete (or rc failed) */
  }
  for (int j = 0; j < nparts; j++) {
    const size_t off = mpiar__block_off(n, nparts, j);
    const size_t len = mpiar__block_off(n, nparts, j + 1) - off;
    if (len > 0) { /* every rank skips the same empty parts */
      MPIAR__CHECK(build_part(&b, j, off, len));
    }
  }
  /* The fold's receive uses scratch [0, n) too: every ring step depends on its reduction. */
  s->scratch_elems = b.rem > 0 && b.scratch < n ? n : b.scratch;
  MPIAR__CHECK(mpiar__swing_unfold(s, b.rem, BUCKET_TAG_POST, b.written, b.nwritten));
cleanup:
  free(b.written);
  return rc;
}

double mpiar__cost_bucket_k(int d, int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                            const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0 || d < 1 || d > MPIAR__SWING_MAX_DIMS) {
    return 0.0;
  }
  int dims[MPIAR__SWING_MAX_DIMS], stride[MPIAR__SWING_MAX_DIMS];
  const int P = grid(nranks, d, dims, stride);
  int S = 0;
  for (int k = 0; k < d; k++) {
    S += dims[k] - 1;
  }
  /* Parts without an element send nothing (a vector of fewer than 2 d elements). */
  const size_t count = elem_size > 0 ? bytes / elem_size : bytes;
  const int nparts = count < (size_t)(2 * d) ? (int)count : 2 * d;
  const mpiar__cost_params_t k = mpiar__cost_link(c, topo);
  const double n = (double)bytes, q = P;
  const double hidden =
      nparts == 1 ? k.gamma : (k.gamma > k.beta ? (k.gamma - k.beta) / nparts : 0.0);
  return 2.0 * S * nparts * k.alpha + 2 * (q - 1) / q * n * k.beta + (q - 1) / q * n * hidden +
         mpiar__swing_fold_cost(nranks, n, &k);
}
