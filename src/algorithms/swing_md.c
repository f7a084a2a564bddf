/*
 * Algorithm: multi-dimensional Swing ("swing_md/d=D", bandwidth-optimal, and
 * "swing_md_latency/d=D", latency-optimal)
 *
 * Reference: D. De Sensi, T. Bonato, D. Saam, T. Hoefler, "Swing: Short-cutting Rings for Higher
 * Bandwidth Allreduce", NSDI '24 (arXiv:2401.09356), the multi-dimensional torus.
 *
 * The ranks form a grid of D dimensions (the parameter d, 1 to 4; default 2), dimension 0 varying
 * fastest as in mpiar-sim's torus:D0xD1x... numbering: the most square grid of p' = 2^L ranks
 * in powers of two, the larger dimensions first (64: 8x8, or 4x4x4 with d=3; 4096: 64x64; 512
 * with d=3: 8x8x8; 32: 8x4). Each step swings in one dimension: the coordinate c of that
 * dimension moves by +rho(j) for even c and -rho(j) for odd c (mod the dimension's size), j the
 * number of earlier steps in that dimension, rho(j) = 1, -1, 3, -5, 11, ... as in swing.c; the
 * other coordinates stay. So every message stays in one ring of the torus and crosses |rho(j)|
 * of its links.
 *
 * swing_md (bandwidth-optimal): the vector is cut into 2 D contiguous parts and 2 D Swing
 * collectives (reduce-scatter + allgather, swing.c's schedule over this grid's peers) run at
 * once, one per part. Collective k (k < D) starts in dimension k and then cycles through the
 * dimensions (skipping those whose steps are used up); collective D + k is collective k's mirror
 * image (every distance negated). In every step the 2 D collectives move along different
 * dimensions or opposite directions, so on a torus each node drives all 2 D of its outgoing
 * links at once, each with 1/(2D) of the data (the paper's use of every port). Each part is
 * reduced along its own collective's tree: the order in which an element's contributions meet
 * depends on its part and block (MPIAR__ALG_ORDER_BY_POSITION).
 *
 * swing_md_latency: L full-vector exchanges with the peers of collective 0 (dimension 0 first),
 * run in the order L-1 .. 0 as swing_latency (swing.c explains why: nested groups, the same bits
 * on every rank). One collective: a latency-bound vector gains nothing from parts.
 *
 * Non-power-of-two p: the fold of swing.c (the first 2 (p - p') ranks pair up first, the result
 * goes back at the end); the grid is that of p'. swing.c builds the paper's method for even p in
 * one dimension (the peers mod p); over a grid whose sizes are not powers of two it is not built
 * here, so these entries keep the fold.
 *
 * Operand order, NaN payloads, any count, in place: as swing.c (parts of a short vector may be
 * empty; every rank skips the same empty parts). Scratch: the larger half of each part, n with a
 * fold. MPIAR__ALG_MANUAL (named only) and MPIAR__ALG_NO_QUOTIENT, as swing.
 *
 * Cost, one level (alpha per message, beta per byte, gamma per byte reduced, n bytes,
 * L = log2 p', P = 2 D parts; the fold as swing: + (alpha + n beta + n gamma) + (alpha + n beta)):
 *   swing_md:          2 L P alpha + 2 (p'-1)/p' n beta                 (gamma <= beta, P >= 2)
 *                      + (p'-1)/p' n (gamma - beta) / P                  (gamma > beta, estimate)
 *                      P = the parts with an element (fewer than 2 D for a vector of fewer
 *                      elements; with one part, swing's formula)
 *   swing_md_latency:  L (alpha + n beta + n gamma)                      (exact, as swing_latency)
 * The one-port model sends a rank's P messages of a step one after the other, so the parts buy
 * no bandwidth there and cost P - 1 alphas more per exchange; in return each part's reduction
 * runs while the port carries the other parts' messages, so with gamma <= beta no reduction is on
 * the critical path: the simulator's time equals the first form at powers of two
 * (tests/sim/test_sim_swing_md.c). On a routed torus (mpiar-sim --topology torus:...) a node
 * drives its 2 D links at once and the parts run side by side: docs/algorithms.md compares it
 * there. Two levels: swing.c's step-synchronous estimate over collective 0's peers, plus the
 * extra alphas (not held by a test).
 * Bytes sent per rank: 2 (p'-1)/p' n (swing_md), L n (swing_md_latency), at powers of two.
 *
 * Tags: 0 the fold; part j's exchanges 1 + 2 L j .. 2 L (j + 1); the return 1 + 2 L P
 * (swing_md_latency: 1 .. L, return 1 + L).
 */
#include "algorithms/swing.h"
#include "algorithms/util.h"
#include "base/common.h"

/* The 2 d collectives' peers on the grid of p' ranks; @return their number. */
static int grid_patterns(int nranks, int d, mpiar__swing_pattern_t *pats) {
  const int P = mpiar__pof2_floor(nranks > 0 ? nranks : 1);
  int dims[MPIAR__SWING_MAX_DIMS];
  mpiar__swing_grid(P, d, dims);
  for (int j = 0; j < 2 * d; j++) {
    mpiar__swing_pattern_grid(&pats[j], dims, d, j);
  }
  return 2 * d;
}

int mpiar__build_swing_md_k(mpiar__schedule_t *s, int d) {
  if (d < 1 || d > MPIAR__SWING_MAX_DIMS) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "swing_md: d = %d, not 1 .. %d", d,
                        MPIAR__SWING_MAX_DIMS);
  }
  mpiar__swing_pattern_t pats[2 * MPIAR__SWING_MAX_DIMS];
  const int nparts = grid_patterns(s->nranks, d, pats);
  return mpiar__swing_build_parts(s, pats, nparts);
}

int mpiar__build_swing_md_latency_k(mpiar__schedule_t *s, int d) {
  if (d < 1 || d > MPIAR__SWING_MAX_DIMS) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "swing_md_latency: d = %d, not 1 .. %d", d,
                        MPIAR__SWING_MAX_DIMS);
  }
  mpiar__swing_pattern_t pats[2 * MPIAR__SWING_MAX_DIMS];
  grid_patterns(s->nranks, d, pats);
  return mpiar__swing_build_full(s, &pats[0]);
}

static double cost(int d, int nranks, size_t bytes, size_t elem_size, const mpiar__cost_params_t *c,
                   const mpiar__topology_t *topo, int latency) {
  if (nranks <= 1 || bytes == 0 || d < 1 || d > MPIAR__SWING_MAX_DIMS) {
    return 0.0;
  }
  mpiar__swing_pattern_t pats[2 * MPIAR__SWING_MAX_DIMS];
  int nparts = grid_patterns(nranks, d, pats);
  /* Parts without an element send nothing (a vector of fewer than 2 d elements). */
  const size_t count = elem_size > 0 ? bytes / elem_size : bytes;
  if (latency || count < (size_t)nparts) {
    nparts = latency ? 1 : (int)count;
  }
  const int P = pats[0].P, L = pats[0].L;
  const double n = (double)bytes, q = P;
  mpiar__cost_params_t k;
  if (!mpiar__cost_one_level(topo, c, &k)) {
    return mpiar__swing_cost_two_level(nranks, n, c, topo, latency, &pats[0]) +
           2.0 * L * (nparts - 1) * c->alpha_inter;
  }
  /* The parts' reductions hide behind the other parts' transfers while gamma <= beta; one part
   * is swing's schedule and pays them all. */
  const double hidden =
      nparts == 1 ? k.gamma : (k.gamma > k.beta ? (k.gamma - k.beta) / nparts : 0.0);
  const double steps = latency ? L * (k.alpha + n * k.beta + n * k.gamma)
                               : 2.0 * L * nparts * k.alpha + 2 * (q - 1) / q * n * k.beta +
                                     (q - 1) / q * n * hidden;
  return steps + mpiar__swing_fold_cost(nranks, n, &k);
}

double mpiar__cost_swing_md_k(int d, int nranks, size_t bytes, size_t elem_size,
                              size_t segment_bytes, const mpiar__cost_params_t *c,
                              const mpiar__topology_t *topo) {
  (void)segment_bytes;
  return cost(d, nranks, bytes, elem_size, c, topo, 0);
}

double mpiar__cost_swing_md_latency_k(int d, int nranks, size_t bytes, size_t elem_size,
                                      size_t segment_bytes, const mpiar__cost_params_t *c,
                                      const mpiar__topology_t *topo) {
  (void)segment_bytes;
  return cost(d, nranks, bytes, elem_size, c, topo, 1);
}
