/*
 * Pieces shared by the builders: the block partition of a vector, powers of two, and the
 * bookkeeping of the non-power-of-two fold.
 */
#ifndef MPIAR_ALGORITHMS_UTIL_H
#define MPIAR_ALGORITHMS_UTIL_H

#include <stddef.h>

#include "schedule/schedule.h"

/*
 * Block i of a vector of n elements cut into nblocks blocks: the first n % nblocks blocks are one
 * element longer, so that every rank computes the same cut without communication.
 */
static inline size_t mpiar__block_off(size_t n, int nblocks, int i) {
  size_t q = n / (size_t)nblocks, r = n % (size_t)nblocks;
  return (size_t)i * q + ((size_t)i < r ? (size_t)i : r);
}

static inline size_t mpiar__block_len(size_t n, int nblocks, int i) {
  return n / (size_t)nblocks + ((size_t)i < n % (size_t)nblocks ? 1 : 0);
}

/* The largest power of two <= p (p >= 1). */
int mpiar__pof2_floor(int p);

/* log2 of a power of two. */
int mpiar__log2i(int pof2);

/*
 * The cases every allreduce builder shares: an empty vector (no step) and a single rank (a copy
 * when out of place). Sets *done to 1 when it built the whole schedule, with scratch 0.
 * @return MPIAR_SUCCESS or a negative MPIAR_ERR_* code.
 */
int mpiar__build_trivial(mpiar__schedule_t *s, int *done);

/* The current data of this rank before its first reduction: INPUT, or OUTPUT in place. */
static inline mpiar__operand_t mpiar__own(const mpiar__schedule_t *s, size_t off) {
  return s->in_place ? mpiar__out(off) : mpiar__in(off);
}

/* Append a step and jump to cleanup on failure; the step index lands in `var`. */
#define MPIAR__STEP(var, expr) \
  do {                         \
    long step_ = (expr);       \
    if (step_ < 0) {           \
      rc = (int)step_;         \
      goto cleanup;            \
    }                          \
    (var) = step_;             \
    (void)(var);               \
  } while (0)

/* Number of elements of a list literal of dependencies. */
#define MPIAR__NDEPS(arr) (sizeof(arr) / sizeof((arr)[0]))

#endif /* MPIAR_ALGORITHMS_UTIL_H */
