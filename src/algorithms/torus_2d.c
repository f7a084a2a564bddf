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
 * Tags: the q-th message from a rank to its row neighbour (reduce-scatter, then allgather) carries
 * tag q mod MPIAR__TAG_LIMIT, and likewise to its column neighbour; a row and a column neighbour
 * are never the same rank. Where a tag repeats, the later send and receive depend on the earlier
 * ones with that tag, so both sides post them in the same order.
 */
#include <math.h>
#include <stdlib.h>

#include "algorithms/algorithms.h"
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

/* One ring over a group of ranks (a row or a column) on a range of the vector. */
typedef struct ring {
  mpiar__schedule_t *s;
  int size, pos, next, prev; /* group size, this rank's position, neighbours' ranks */
  size_t off, len;           /* the range, cut into `size` blocks */
  int from_input;            /* the rank's data is its own (INPUT), not OUTPUT's partial */
  size_t scratch;            /* two scratch blocks of maxblk elements start here (or none) */
  size_t maxblk;
  long *sendq, *recvq; /* every send / receive, in order (tag reuse) */
  size_t qs, qr;
  long *red, *sent;    /* per block: the last reduction, the last send */
  long slot_reader[2]; /* per scratch block: the reduction that last read it */
} ring_t;

static size_t blk_off(const ring_t *g, int b) {
  return g->off + mpiar__block_off(g->len, g->size, b);
}
static size_t blk_len(const ring_t *g, int b) {
  return mpiar__block_len(g->len, g->size, b);
}

static int ring_init(ring_t *g, mpiar__schedule_t *s, int size, int pos, int next, int prev,
                     size_t off, size_t len) {
  g->s = s;
  g->size = size;
  g->pos = pos;
  g->next = next;
  g->prev = prev;
  g->off = off;
  g->len = len;
  g->from_input = 0;
  g->scratch = (size_t)-1;
  g->maxblk = mpiar__block_len(len, size, 0);
  g->qs = g->qr = 0;
  g->slot_reader[0] = g->slot_reader[1] = -1;
  const size_t nmsg = 2 * (size_t)size;
  g->sendq = malloc(nmsg * sizeof *g->sendq);
  g->recvq = malloc(nmsg * sizeof *g->recvq);
  g->red = malloc((size_t)size * sizeof *g->red);
  g->sent = malloc((size_t)size * sizeof *g->sent);
  if (!g->sendq || !g->recvq || !g->red || !g->sent) {
    return MPIAR_ERR_NOMEM;
  }
  for (int b = 0; b < size; b++) {
    g->red[b] = g->sent[b] = -1;
  }
  return MPIAR_SUCCESS;
}

static void ring_free(ring_t *g) {
  free(g->sendq);
  free(g->recvq);
  free(g->red);
  free(g->sent);
}

/* Tag and tag-reuse dependency of the next send / receive. */
static int tag_of(size_t q) {
  return (int)(q % MPIAR__TAG_LIMIT);
}
static long reuse(const long *list, size_t q) {
  return q >= MPIAR__TAG_LIMIT ? list[q - MPIAR__TAG_LIMIT] : -1;
}

/*
 * Ring reduce-scatter over the group (ring.c, unsegmented): afterwards position x holds block
 * x+1 (mod size), finished by g->red[x+1]. Every step that reads the range depends on @p start
 * (the step that made OUTPUT's range ready, or -1). @p final: the last reduction completes the
 * elements over all ranks.
 */
static int ring_rs(ring_t *g, long start, int final) {
  mpiar__schedule_t *s = g->s;
  const int m = g->size, x = g->pos;
  int rc = MPIAR_SUCCESS;
  long id;
  for (int k = 0; k < m - 1; k++) {
    const int sb = ((x - k) % m + m) % m, rb = ((x - k - 1) % m + m) % m;
    const size_t so = blk_off(g, sb), sl = blk_len(g, sb);
    const size_t ro = blk_off(g, rb), rl = blk_len(g, rb);
    const mpiar__operand_t src = k > 0           ? mpiar__out(so)
                                 : g->from_input ? mpiar__own(s, so)
                                                 : mpiar__out(so);
    const long sdeps[] = {k > 0 ? g->red[sb] : start, reuse(g->sendq, g->qs)};
    MPIAR__STEP(id, mpiar__sched_send(s, g->next, tag_of(g->qs), src, sl, sdeps, 2));
    g->sendq[g->qs++] = id;
    g->sent[sb] = id;
    const int slot = k % 2;
    const int to_scratch = g->scratch != (size_t)-1;
    const mpiar__operand_t dst =
        to_scratch ? mpiar__scratch(g->scratch + (size_t)slot * g->maxblk) : mpiar__out(ro);
    const long rdeps[] = {to_scratch ? g->slot_reader[slot] : -1, reuse(g->recvq, g->qr), start};
    long rid;
    MPIAR__STEP(rid, mpiar__sched_recv(s, g->prev, tag_of(g->qr), dst, rl, rdeps, 3));
    g->recvq[g->qr++] = rid;
    /* The ring's order: the partial from the previous position first, except at position 0. */
    const mpiar__operand_t mine = g->from_input ? mpiar__own(s, ro) : mpiar__out(ro);
    const long ddeps[] = {rid, start};
    MPIAR__STEP(id, x > 0 ? mpiar__sched_reduce(s, mpiar__out(ro), dst, mine, rl, ddeps, 2)
                          : mpiar__sched_reduce(s, mpiar__out(ro), mine, dst, rl, ddeps, 2));
    g->red[rb] = id;
    if (to_scratch) {
      g->slot_reader[slot] = id;
    }
    if (final && k == m - 2) {
      MPIAR__CHECK(mpiar__sched_mark_final(s, id));
    }
  }
cleanup:
  return rc;
}

/*
 * Ring allgather over the group: position x starts with block x+1, whose OUTPUT is ready after
 * the steps @p ready[0 .. nready-1]; afterwards OUTPUT holds the whole range. The receive of a
 * block waits for the reduce-scatter's last reduction and send of it (its last accesses).
 * @p done (size entries or NULL) gets the receive of every block.
 */
static int ring_ag(ring_t *g, const long *ready, size_t nready, long *done) {
  mpiar__schedule_t *s = g->s;
  const int m = g->size, x = g->pos;
  int rc = MPIAR_SUCCESS;
  long id;
  long *have = g->red; /* per block: the step after which OUTPUT holds it final */
  const int mine = (x + 1) % m;
  for (int k = 0; k < m - 1; k++) {
    const int sb = ((x + 1 - k) % m + m) % m, rb = ((x - k) % m + m) % m;
    const size_t so = blk_off(g, sb), sl = blk_len(g, sb);
    const size_t ro = blk_off(g, rb), rl = blk_len(g, rb);
    if (sb == mine) {
      /* The first send: after every step that wrote the block, and the tag's previous send. */
      long *deps = malloc((nready + 1) * sizeof *deps);
      if (deps == NULL) {
        MPIAR__FAIL(MPIAR_ERR_NOMEM, "torus_2d allgather of %d ranks", m);
      }
      for (size_t i = 0; i < nready; i++) {
        deps[i] = ready[i];
      }
      deps[nready] = reuse(g->sendq, g->qs);
      id = mpiar__sched_send(s, g->next, tag_of(g->qs), mpiar__out(so), sl, deps, nready + 1);
      free(deps);
      if (id < 0) {
        rc = (int)id;
        goto cleanup;
      }
    } else {
      const long deps[] = {have[sb], reuse(g->sendq, g->qs)};
      MPIAR__STEP(id, mpiar__sched_send(s, g->next, tag_of(g->qs), mpiar__out(so), sl, deps, 2));
    }
    g->sendq[g->qs++] = id;
    const long rdeps[] = {g->sent[rb], g->red[rb], reuse(g->recvq, g->qr)};
    MPIAR__STEP(id, mpiar__sched_recv(s, g->prev, tag_of(g->qr), mpiar__out(ro), rl, rdeps, 3));
    g->recvq[g->qr++] = id;
    have[rb] = id;
    if (done != NULL) {
      done[rb] = id;
    }
  }
cleanup:
  return rc;
}

int mpiar__build_torus_2d(mpiar__schedule_t *s) {
  const int p = s->nranks, r = s->rank;
  const size_t n = s->count;
  int rc = MPIAR_SUCCESS;
  ring_t row = {0}, col = {0};
  long *col_done = NULL;

  int done = 0;
  MPIAR__CHECK(mpiar__build_trivial(s, &done));
  if (done) {
    return MPIAR_SUCCESS;
  }
  const int R = grid_rows(p), C = p / R;
  const int i = r / C, j = r % C;
  MPIAR__CHECK(ring_init(&row, s, C, j, i * C + (j + 1) % C, i * C + (j + C - 1) % C, 0, n));
  row.from_input = 1;
  size_t scratch = 0;
  if (s->in_place) {
    row.scratch = 0;
    scratch = 2 * row.maxblk;
  }
  /* Phase 1: the rows' reduce-scatter; position j finishes the row's partial of block j+1. */
  MPIAR__CHECK(ring_rs(&row, -1, R == 1));
  const int mb = (j + 1) % C;
  long ready = row.red[mb];
  long *ag_ready = &ready;
  size_t nag_ready = 1;
  if (R > 1) {
    /* Phase 2: the columns' allreduce (a ring) on that block. */
    MPIAR__CHECK(ring_init(&col, s, R, i, ((i + 1) % R) * C + j, ((i + R - 1) % R) * C + j,
                           blk_off(&row, mb), blk_len(&row, mb)));
    col.scratch = scratch;
    scratch += 2 * col.maxblk;
    col_done = malloc((size_t)R * sizeof *col_done);
    if (col_done == NULL) {
      MPIAR__FAIL(MPIAR_ERR_NOMEM, "torus_2d schedule of %d ranks", p);
    }
    MPIAR__CHECK(ring_rs(&col, ready, 1));
    const long fin = col.red[(i + 1) % R];
    MPIAR__CHECK(ring_ag(&col, &fin, 1, col_done));
    col_done[(i + 1) % R] = fin;
    ag_ready = col_done;
    nag_ready = (size_t)R;
  }
  s->scratch_elems = scratch;
  /* Phase 3: the rows' allgather. */
  MPIAR__CHECK(ring_ag(&row, ag_ready, nag_ready, NULL));

cleanup:
  ring_free(&row);
  ring_free(&col);
  free(col_done);
  return rc;
}

/* The one-level formula of the header: a ring on C ranks over n bytes plus one on R over n/C. */
static double ring_part(int m, double bytes, const mpiar__cost_params_t *c) {
  const double blk = bytes / m;
  return 2 * (m - 1) * (c->alpha + blk * c->beta) + (m - 1) * blk * c->gamma;
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
