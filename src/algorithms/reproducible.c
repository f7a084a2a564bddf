/*
 * Reproducible mode: which algorithm computes the canonical order in place of the one selected.
 *
 * Entries are recognised by their builder, not by name, so the table below is the only place
 * that knows which algorithm replaces which.
 */
#include "algorithms/algorithms.h"

/* @return 1 for integer types: wrap-around sum and product, min, max and the bitwise operations
 * are associative and commutative, so every order gives the same bits. */
static int order_free(mpiar_dtype_t dtype) {
  return dtype != MPIAR_FLOAT16 && dtype != MPIAR_BFLOAT16 && dtype != MPIAR_FLOAT32 &&
         dtype != MPIAR_FLOAT64;
}

const mpiar__algorithm_t *mpiar__algorithm_reproducible(const mpiar__algorithm_t *alg, int nranks,
                                                        mpiar_dtype_t dtype) {
  if (alg == NULL) {
    return NULL;
  }
  const mpiar__builder_fn b = alg->build;
  const int flat = b == mpiar__build_ring || b == mpiar__build_rabenseifner ||
                   b == mpiar__build_rabenseifner_fold || b == mpiar__build_recursive_doubling ||
                   b == mpiar__build_double_binary_tree || b == mpiar__build_direct ||
                   b == mpiar__build_torus_2d;
  const int canonical = b == mpiar__build_recursive_doubling || b == mpiar__build_repro_direct ||
                        b == mpiar__build_repro_rabenseifner || b == mpiar__build_repro_halving;
  /* Two ranks: every flat builder reduces each element as x0 op x1, the canonical tree. */
  if (order_free(dtype) || canonical || (flat && nranks <= 2)) {
    return alg;
  }
  if (b == mpiar__build_rabenseifner || b == mpiar__build_rabenseifner_fold) {
    return mpiar__algorithm_find_any("repro_rabenseifner");
  }
  /* direct: the same direct reduce-scatter, reduced in the canonical tree. */
  if (b == mpiar__build_ring || b == mpiar__build_direct || (alg->flags & MPIAR__ALG_SEGMENTED)) {
    return mpiar__algorithm_find_any("repro_direct");
  }
  return mpiar__algorithm_find_any("repro_rabenseifner");
}
