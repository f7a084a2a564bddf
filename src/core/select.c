/*
 * Algorithm selection. Precedence: the per-call option, then MPIAR_ALGORITHM (and
 * MPIAR_SEGMENT_BYTES), then the built-in choice, which is the cheapest algorithm (and segment
 * size) under the alpha-beta-gamma cost model with parameters measured on a shared-memory node.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/context.h"

/*
 * Cost-model parameters of the built-in choice, fitted to two ranks of one node with MPICH 4
 * (ch4:ucx, shared memory) with mpiar-bench: about 1 us per message (the 8-byte exchange), the
 * point-to-point exchange bandwidth of 9.4 GB/s at 1..16 MiB, and 8 MiB of float32 reduced in
 * 0.5 ms inside a ring. With them recursive doubling wins below 2 alpha / gamma = 32 KiB at p = 2,
 * as measured (README, "Performance").
 */
static const mpiar__cost_params_t builtin_params = {
    .alpha = 1.0e-6,
    .beta = 1.0 / 9.4e9,
    .gamma = 1.0 / 16.0e9,
};

/*
 * Segment sizes the built-in choice considers for pipelined algorithms. Measured on that node,
 * segments below 1 MiB slow the ring down (each is a rendezvous handshake, and the transfer is a
 * copy by the receiving CPU, so it cannot overlap a reduction on the same core); 4 MiB segments
 * help only from about 32 MiB. The cost model does not see either effect, so the candidates
 * carry the measurement.
 */
static const size_t segment_candidates[] = {0, 4 << 20};

/*
 * MPIAR_ALGORITHM against the registry, checked by every call whatever its options, so that a
 * misspelt name is an error everywhere and not only where it would have been used.
 */
int mpiar__check_env_algorithm(const mpiar__settings_t *set) {
  if (MPIAR__LIKELY(set->algorithm[0] == '\0') || mpiar__algorithm_find(set->algorithm) != NULL) {
    return MPIAR_SUCCESS;
  }
  char names[256] = "";
  for (int i = 0; i < mpiar__algorithm_count; i++) {
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s, ", mpiar__algorithms[i].name);
  }
  return mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM,
                      "MPIAR_ALGORITHM='%s' is not an algorithm (%sor auto)", set->algorithm,
                      names);
}

/*
 * The cheapest registry entry for (bytes, p) under the model, with its best segment size. With
 * @p reproducible, each entry is costed as the algorithm that would run in its place (its
 * reproducible replacement for @p dtype), and that replacement is the choice.
 */
static void model_choice(size_t bytes, size_t elem_size, int nranks, int reproducible,
                         mpiar_dtype_t dtype, const mpiar__algorithm_t **alg,
                         size_t *segment_bytes) {
  double best = INFINITY;
  *alg = &mpiar__algorithms[0];
  *segment_bytes = 0;
  for (int i = 0; i < mpiar__algorithm_count; i++) {
    const mpiar__algorithm_t *a = &mpiar__algorithms[i];
    /* The context has no topology yet (NULL: flat), where hierarchical builders are flat ones. */
    if ((a->flags & MPIAR__ALG_HIERARCHICAL) && !mpiar__topology_is_hierarchical(NULL)) {
      continue;
    }
    if (reproducible) {
      a = mpiar__algorithm_reproducible(a, nranks, dtype);
    }
    size_t nseg = (a->flags & MPIAR__ALG_SEGMENTED)
                      ? sizeof segment_candidates / sizeof segment_candidates[0]
                      : 1;
    for (size_t k = 0; k < nseg; k++) {
      size_t seg = segment_candidates[k];
      double t = a->cost(nranks, bytes, elem_size, seg, &builtin_params, NULL);
      /* A strict improvement is required, so ties keep the earlier (simpler) choice. */
      if (t < best * (1.0 - 1e-9)) {
        best = t;
        *alg = a;
        *segment_bytes = seg;
      }
    }
  }
}

void mpiar__select_reproducible(size_t bytes, mpiar_dtype_t dtype, int nranks,
                                const mpiar__algorithm_t **alg, size_t *segment_bytes) {
  model_choice(bytes, mpiar_dtype_size(dtype), nranks, 1, dtype, alg, segment_bytes);
}

static int unknown(const char *requested) {
  char names[256] = "";
  for (int i = 0; i < mpiar__algorithm_count; i++) {
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s, ", mpiar__algorithms[i].name);
  }
  return mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM, "unknown algorithm '%s' (%sor auto)", requested,
                      names);
}

int mpiar__select(const mpiar__settings_t *set, const char *requested,
                  size_t requested_segment_bytes, size_t bytes, size_t elem_size, int nranks,
                  const mpiar__algorithm_t **alg, size_t *segment_bytes) {
  size_t env_segment = set->segment_bytes;
  if (requested_segment_bytes != 0 && requested_segment_bytes < MPIAR__SEGMENT_MIN) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "segment_bytes %zu is below the minimum of %zu bytes (0 = automatic)",
                        requested_segment_bytes, MPIAR__SEGMENT_MIN);
  }
  if (requested != NULL && strcmp(requested, "auto") != 0) {
    *alg = mpiar__algorithm_find(requested);
    if (*alg == NULL) {
      return unknown(requested);
    }
    *segment_bytes = requested_segment_bytes ? requested_segment_bytes : env_segment;
    return MPIAR_SUCCESS;
  }
  if (set->algorithm[0] != '\0') {
    *alg = mpiar__algorithm_find(set->algorithm);
    if (*alg == NULL) {
      return mpiar__check_env_algorithm(set);
    }
    *segment_bytes = requested_segment_bytes ? requested_segment_bytes : env_segment;
    return MPIAR_SUCCESS;
  }
  model_choice(bytes, elem_size, nranks, 0, MPIAR_FLOAT32, alg, segment_bytes);
  if (requested_segment_bytes) {
    *segment_bytes = requested_segment_bytes;
  } else if (env_segment && ((*alg)->flags & MPIAR__ALG_SEGMENTED)) {
    *segment_bytes = env_segment;
  }
  if (!((*alg)->flags & MPIAR__ALG_SEGMENTED)) {
    *segment_bytes = 0;
  }
  return MPIAR_SUCCESS;
}

int mpiar_select(size_t bytes, int nranks, const char **algorithm, size_t *segment_bytes) {
  mpiar__error_clear();
  if (nranks < 1 || algorithm == NULL || segment_bytes == NULL) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "mpiar_select needs nranks >= 1 and two results");
  }
  const mpiar__settings_t *set = NULL;
  int rc = mpiar__settings(&set);
  if (rc == MPIAR_SUCCESS) {
    rc = mpiar__check_env_algorithm(set);
  }
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  const mpiar__algorithm_t *alg = NULL;
  size_t seg = 0;
  rc = mpiar__select(set, NULL, 0, bytes, 1, nranks, &alg, &seg);
  if (rc == MPIAR_SUCCESS) {
    *algorithm = alg->name;
    *segment_bytes = seg;
  }
  return rc;
}

int mpiar__select_bcast(const char *requested, size_t bytes, size_t elem_size, int nranks,
                        const mpiar__algorithm_t **alg) {
  if (requested != NULL && strcmp(requested, "auto") != 0) {
    *alg = mpiar__bcast_algorithm_find(requested);
    if (*alg == NULL) {
      return mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM,
                          "unknown broadcast algorithm '%s' (binomial, scatter_allgather or auto)",
                          requested);
    }
    return MPIAR_SUCCESS;
  }
  double best = INFINITY;
  *alg = &mpiar__bcast_algorithms[0];
  for (int i = 0; i < mpiar__bcast_algorithm_count; i++) {
    const mpiar__algorithm_t *a = &mpiar__bcast_algorithms[i];
    double t = a->cost(nranks, bytes, elem_size, 0, &builtin_params, NULL);
    if (t < best * (1.0 - 1e-9)) {
      best = t;
      *alg = a;
    }
  }
  return MPIAR_SUCCESS;
}
