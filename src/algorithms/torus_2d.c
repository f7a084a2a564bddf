/*
 * Algorithm: torus_2d (2D-torus allreduce: reduce-scatter along rows, allreduce along columns,
 * allgather along rows)
 *
 * Mikami, Suganuma, U-chupala, Tanaka, Kageyama, "Massively Distributed SGD: ImageNet/ResNet-50
 * Training in a Flash" (arXiv:1811.05233, 2018), section "2D-Torus all-reduce". The p ranks form
 * a logical grid of R rows and C columns, rank r = i C + j in row i, column j (a row is C
 * consecutive ranks). Phase 1: a ring reduce-scatter inside every row cuts the vector into C
 * blocks; position j of a row then holds the row's partial of block j+1 (mod C), the same block
 * in every row of column j. Phase 2: a ring allreduce (reduce-scatter + allgather) inside every
 * column on that block, cut into R sub-blocks. Phase 3: a ring allgather inside every row.
 *
 * Grid: R is the largest divisor of p with R <= sqrt(p), C = p / R (the most square shape, rows at
 * least as long as columns, so with block placement most of the traffic, the row phases, stays on
 * a node). For prime p the only shape is 1 x p: no column phase, and the algorithm is the ring.
 * The shape cannot be chosen yet (there is no parameter syntax in the registry).
 *
 * Restrictions: none. Any p, any count (empty blocks and sub-blocks still travel as zero-length
 * messages), in place or not. Order: every ring puts the partial from the previous position in
 * operand `a`, except at position 0 before its chain wraps (the ring's rule, ring.c), so inside a
 * row the lowest rank of the two goes first, and in a column the partial of the lower row (whose
 * ranks are all below the higher row's) goes first: x0 is the leftmost operand of every element
 * and rank 0's NaN payload wins on every rank; at p = 2 every element is x0 op x1. Each element
 * is finished by one rank and copied to the others, so every rank has the same bits. For p >= 3
 * the order depends on the element's block: reproducible mode runs repro_rabenseifner instead
 * (reproducible.c).
 *
 * Memory: two scratch blocks of each phase that receives into scratch (the column phase; in place
 * also the row phase), used in turn as the ring does: 2 ceil(n/C) + 2 ceil(n/(C R)) elements at
 * most. Out of place the row reduce-scatter receives straight into OUTPUT, no up-front copy.
 *
 * Cost (alpha per message, beta per byte, gamma per byte reduced, n bytes, p | count; the phases
 * run one after the other, every rank of a phase in step):
 *   rows:     2(C-1) alpha + 2 (C-1)/C n beta + (C-1)/C n gamma
 *   columns:  2(R-1) alpha + 2 (R-1)/R (n/C) beta + (R-1)/R (n/C) gamma   (ring on n/C bytes)
 *   total:    2(C+R-2) alpha + 2 (p-1)/p n beta + (p-1)/p n gamma
 * the ring's bandwidth and reduction terms with 2(C+R-2) messages instead of 2(p-1) (2(2 sqrt(p)
 * - 2) for a square p). The simulator's critical path equals it for every p (tests/sim). Bytes
 * sent per rank: 2 (p-1)/p n, the lower bound. Two levels: the formula with that level's alpha
 * and beta on one node or one rank per node; otherwise a step-synchronous estimate (every ring
 * step costs the slower of an intra-node message and the busiest node port).
 *
 * The rings are ring_group.c's (bucket.c runs them too, on parts of the vector at once).
 *
 * Tags: the q-th message from a rank to its row neighbour (reduce-scatter, then allgather) carries
 * tag q mod MPIAR__TAG_LIMIT, and likewise to its column neighbour; a row and a column neighbour
 * are never the same rank. Where a tag repeats, the later send and receive depend on the earlier
 * ones with that tag, so both sides post them in the same order.
 */
#include <math.h>
#include <stdlib.h>

#include "algorithms/algorithms.h"
#include "algorithms/ring_group.h"
#include "algorithms/util.h"
#include "base/common.h"

/* The grid's rows: the largest divisor of p not above sqrt(p). */
static int grid_rows(int p) {
  int rows = 1;
  for (int d = 1; (long)d * d <= p; d++) {
    if (p % d == 0) {
      rows = d;
    }
  }
  return rows;
}

int mpiar__build_torus_2d(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  mpiar__ring_group_t row = {0}, col = {0};
  long *col_done = NULL;

  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  const int R = grid_rows(p), C = p / R;
  const int i = r / C, j = r % C;
  MPIAR__CHECK(mpiar__ring_group_init(&row, s, C, j, i * C + (j + 1) % C, i * C + (j + C - 1) % C,
                                      0, n, 0, MPIAR__TAG_LIMIT));
  row.from_input = 1;
  size_t scratch = 0;
  if (s->in_place) {
    row.scratch = 0;
    scratch = 2 * row.maxblk;
  }
  /* Phase 1: the rows' reduce-scatter; position j finishes the row's partial of block j+1. */
  MPIAR__CHECK(mpiar__ring_group_rs(&row, -1, R == 1));
  const int mb = (j + 1) % C;
  long ready = row.red[mb];
  long *ag_ready = &ready;
  size_t nag_ready = 1;
  if (R > 1) {
    /* Phase 2: the columns' allreduce (a ring) on that block. */
    MPIAR__CHECK(mpiar__ring_group_init(&col, s, R, i, ((i + 1) % R) * C + j,
                                        ((i + R - 1) % R) * C + j, mpiar__ring_group_off(&row, mb),
                                        mpiar__ring_group_len(&row, mb), 0, MPIAR__TAG_LIMIT));
    col.scratch = scratch;
    scratch += 2 * col.maxblk;
    col_done = malloc((size_t)R * sizeof *col_done);
    if (col_done == NULL) {
      MPIAR__FAIL(MPIAR_ERR_NOMEM, "torus_2d schedule of %d ranks", p);
    }
    MPIAR__CHECK(mpiar__ring_group_rs(&col, ready, 1));
    const long fin = col.red[(i + 1) % R];
    MPIAR__CHECK(mpiar__ring_group_ag(&col, &fin, 1, col_done));
    col_done[(i + 1) % R] = fin;
    ag_ready = col_done;
    nag_ready = (size_t)R;
  }
  s->scratch_elems = scratch;
  /* Phase 3: the rows' allgather. */
  MPIAR__CHECK(mpiar__ring_group_ag(&row, ag_ready, nag_ready, NULL));

cleanup:
  mpiar__ring_group_free(&row);
  mpiar__ring_group_free(&col);
  free(col_done);
  return rc;
}

/* The one-level formula of the header: a ring on C ranks over n bytes plus one on R over n/C. */
static double ring_part(int m, double bytes, const mpiar__cost_params_t *c) {
  const double blk = bytes / m;
  return 2 * (m - 1) * (c->alpha + mpiar__cost_handshake(c, blk) + blk * c->beta) +
         (m - 1) * blk * c->gamma;
}

typedef struct grid_arg {
  int p, C, row; /* row: the row neighbour r+1 in the row, else the column neighbour r+C */
} grid_arg_t;

static int grid_peer(int rank, const void *arg) {
  const grid_arg_t *a = arg;
  if (a->row) {
    return rank - rank % a->C + (rank % a->C + 1) % a->C;
  }
  return (rank + a->C) % a->p;
}

double mpiar__cost_torus_2d(int nranks, size_t bytes, size_t elem_size, size_t segment_bytes,
                            const mpiar__cost_params_t *c, const mpiar__topology_t *topo) {
  (void)elem_size;
  (void)segment_bytes;
  if (nranks <= 1 || bytes == 0) {
    return 0.0;
  }
  const int R = grid_rows(nranks), C = nranks / R;
  const double n = (double)bytes;
  mpiar__cost_params_t link;
  if (mpiar__cost_one_level(topo, c, &link)) {
    return ring_part(C, n, &link) + (R > 1 ? ring_part(R, n / C, &link) : 0.0);
  }
  /* Two levels: each ring step costs its round on the topology, plus its reduction. */
  mpiar__round_load_t load;
  grid_arg_t a = {nranks, C, 1};
  mpiar__round_load(topo, grid_peer, &a, &load);
  const double rb = n / C;
  double t = (C - 1) * (2 * mpiar__round_time(&load, c, rb) + rb * c->gamma);
  if (R > 1) {
    a.row = 0;
    mpiar__round_load(topo, grid_peer, &a, &load);
    const double cb = rb / R;
    t += (R - 1) * (2 * mpiar__round_time(&load, c, cb) + cb * c->gamma);
  }
  return t;
}
