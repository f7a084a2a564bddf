/*
 * Reproducible mode: which algorithm computes the canonical order in place of the one selected.
 *
 * The registry entry says it: MPIAR__ALG_CANONICAL (itself), MPIAR__ALG_PAIR_EXACT (itself on
 * two ranks) and `repro`, the name of its replacement.
 */
#include "algorithms/algorithms.h"
#include "base/common.h"

/* @return 1 for integer types: wrap-around sum and product, min, max and the bitwise operations
 * are associative and commutative, so every order gives the same bits. */
static int order_free(mpiar_dtype_t dtype) {
  return !mpiar__dtype_is_float(dtype);
}

const mpiar__algorithm_t *mpiar__algorithm_reproducible(const mpiar__algorithm_t *alg, int nranks,
                                                        mpiar_dtype_t dtype) {
  if (alg == NULL) {
    return NULL;
  }
  /* Two ranks: a pair-exact entry reduces each element as x0 op x1, the canonical tree. */
  if (order_free(dtype) || (alg->flags & MPIAR__ALG_CANONICAL) ||
      ((alg->flags & MPIAR__ALG_PAIR_EXACT) && nranks <= 2)) {
    return alg;
  }
  /* An entry from outside the registry (a test's, a schedule of the caller's) names none: by its
   * shape, the canonical direct reduce-scatter for a segmented one, Rabenseifner's otherwise. */
  const char *repro = alg->repro != NULL                    ? alg->repro
                      : (alg->flags & MPIAR__ALG_SEGMENTED) ? "repro_direct"
                                                            : "repro_rabenseifner";
  return mpiar__algorithm_find_any(repro);
}
