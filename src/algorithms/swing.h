/*
 * The Swing pattern shared by swing.c (one dimension in rank order) and swing_md.c (a grid of
 * dimensions, one sub-collective per port): which dimension each step swings in, and the
 * builders over any such pattern.
 */
#ifndef MPIAR_ALGORITHMS_SWING_H
#define MPIAR_ALGORITHMS_SWING_H

#include "algorithms/algorithms.h"

#define MPIAR__SWING_MAX_STEPS 30
#define MPIAR__SWING_MAX_DIMS 4

/*
 * The peers of one Swing collective over P = 2^L virtual ranks seen as a grid (dimension 0
 * varying fastest). Step s swings in dimension dim[s], the rel[s]-th step there: the coordinate
 * c of that dimension (size size[s], rank stride stride[s]) moves by rho(rel[s]) for even c and
 * by -rho(rel[s]) for odd c (mod size), both negated when mirror is set.
 */
typedef struct mpiar__swing_pattern {
  int P, L, mirror;
  int dim[MPIAR__SWING_MAX_STEPS], rel[MPIAR__SWING_MAX_STEPS];
  int size[MPIAR__SWING_MAX_STEPS], stride[MPIAR__SWING_MAX_STEPS];
  /* The grid: nd dimensions of dsize[k] ranks (stride dstride[k]); before[s][k]: the steps in
   * dimension k among steps 0 .. s-1. */
  int nd, dsize[MPIAR__SWING_MAX_DIMS], dstride[MPIAR__SWING_MAX_DIMS];
  int before[MPIAR__SWING_MAX_STEPS + 1][MPIAR__SWING_MAX_DIMS];
} mpiar__swing_pattern_t;

/* The pattern over the ranks in order (one dimension of P, the paper's basic algorithm). */
void mpiar__swing_pattern_1d(mpiar__swing_pattern_t *x, int P);

/*
 * The pattern of port @p port (0 .. 2d-1) on the grid @p dims[0..d-1] (powers of two, product
 * P): its steps cycle over the dimensions starting at port mod d, skipping the dimensions whose
 * steps are used up; ports d .. 2d-1 are the mirror images of 0 .. d-1.
 */
void mpiar__swing_pattern_grid(mpiar__swing_pattern_t *x, const int *dims, int d, int port);

/*
 * The most square grid of P = 2^L ranks in @p d dimensions (powers of two, the larger first).
 */
void mpiar__swing_grid(int P, int d, int *dims);

/*
 * Bandwidth-optimal Swing with one sub-collective per pattern: pattern j reduces the j-th of
 * @p nparts contiguous parts of the vector (mpiar__block_off), all at once; the fold of
 * non-powers of two is shared. Tags: 0 the fold, 1 + 2 L j + i the i-th exchange of part j,
 * 1 + 2 L nparts the return.
 */
int mpiar__swing_build_parts(mpiar__schedule_t *s, const mpiar__swing_pattern_t *pats, int nparts);

/* Latency-optimal Swing over one pattern: full-vector exchanges, steps L-1 .. 0. */
int mpiar__swing_build_full(mpiar__schedule_t *s, const mpiar__swing_pattern_t *pat);

/*
 * The fold of non-powers of two (rem = p - P, P the pattern's ranks): the first 2 rem ranks pair
 * up, the even one sends its vector (tag 0) to the odd one above, which reduces it into OUTPUT
 * (the even one's data in operand a; scratch n elements) and goes on as virtual rank r/2; ranks
 * from 2 rem on are virtual rank r - rem. Sets *v, and returns 1 when the rank sits out (its
 * schedule is complete: the result comes back with @p tag_post); *last (the fold's reduction) and
 * *in_out (OUTPUT holds the rank's data) describe OUTPUT for a rank that goes on. *rc_out gets
 * the error, if any.
 */
int mpiar__swing_fold(mpiar__schedule_t *s, int rem, int tag_post, int *v, long *last, int *in_out,
                      int *rc_out);

/* The fold's return: the odd rank of a folded pair sends OUTPUT (tag @p tag_post) to the even
 * rank below after the steps @p deps (a no-op on the other ranks). */
int mpiar__swing_unfold(mpiar__schedule_t *s, int rem, int tag_post, const long *deps,
                        size_t ndeps);

/* The one-level cost of the fold of non-powers of two (0 at powers of two). */
double mpiar__swing_fold_cost(int nranks, double n, const mpiar__cost_params_t *c);

/*
 * Two levels: the step-synchronous estimate of swing.c's header over pattern @p pat (each step
 * its round time on the topology plus its reduction; the fold as rounds between pairs).
 */
double mpiar__swing_cost_two_level(int nranks, double n, const mpiar__cost_params_t *c,
                                   const mpiar__topology_t *topo, int latency,
                                   const mpiar__swing_pattern_t *pat);

#endif /* MPIAR_ALGORITHMS_SWING_H */
