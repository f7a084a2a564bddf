/*
 * Algorithm selection. Precedence: the per-call option, then MPIAR_ALGORITHM (and
 * MPIAR_SEGMENT_BYTES), then the built-in choice, which is the cheapest algorithm (and segment
 * size) under the alpha-beta-gamma cost model with parameters measured on a shared-memory node.
 * The environment is read once per process, at the first call.
 */
#include <math.h>
#include <pthread.h>
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

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int env_rc;
static char env_detail[256];
static const mpiar__algorithm_t *env_alg; /* NULL: auto */
static size_t env_segment;                /* 0: not set */
static long env_timeout_ms;               /* 0: none */

static void read_env(void) {
  const char *name = getenv("MPIAR_ALGORITHM");
  if (name != NULL && *name != '\0' && strcmp(name, "auto") != 0) {
    env_alg = mpiar__algorithm_find(name);
    if (env_alg == NULL) {
      env_rc = mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM,
                            "MPIAR_ALGORITHM='%s' is not an algorithm (ring, rabenseifner, "
                            "recursive_doubling or auto)",
                            name);
    }
  }
  if (env_rc == MPIAR_SUCCESS) {
    env_rc = mpiar__env_size("MPIAR_SEGMENT_BYTES", 0, &env_segment);
  }
  if (env_rc == MPIAR_SUCCESS) {
    env_rc = mpiar__env_int("MPIAR_TIMEOUT_MS", 0, 0, 1L << 30, &env_timeout_ms);
  }
  if (env_rc != MPIAR_SUCCESS) {
    strncpy(env_detail, mpiar_last_error(), sizeof env_detail - 1);
  }
}

/* The cheapest registry entry for (bytes, p) under the model, with its best segment size. */
static void model_choice(size_t bytes, size_t elem_size, int nranks, const mpiar__algorithm_t **alg,
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

int mpiar__select(const char *requested, size_t requested_segment_bytes, size_t bytes,
                  size_t elem_size, int nranks, const mpiar__algorithm_t **alg,
                  size_t *segment_bytes) {
  pthread_once(&env_once, read_env);
  if (requested != NULL && strcmp(requested, "auto") != 0) {
    *alg = mpiar__algorithm_find(requested);
    if (*alg == NULL) {
      return mpiar__error(MPIAR_ERR_UNKNOWN_ALGORITHM,
                          "unknown algorithm '%s' (ring, rabenseifner, recursive_doubling or "
                          "auto)",
                          requested);
    }
    *segment_bytes = requested_segment_bytes ? requested_segment_bytes : env_segment;
    return MPIAR_SUCCESS;
  }
  if (env_rc != MPIAR_SUCCESS) {
    return mpiar__error(env_rc, "%s", env_detail);
  }
  if (env_alg != NULL) {
    *alg = env_alg;
    *segment_bytes = requested_segment_bytes ? requested_segment_bytes : env_segment;
    return MPIAR_SUCCESS;
  }
  model_choice(bytes, elem_size, nranks, alg, segment_bytes);
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
  const mpiar__algorithm_t *alg = NULL;
  size_t seg = 0;
  int rc = mpiar__select(NULL, 0, bytes, 1, nranks, &alg, &seg);
  if (rc == MPIAR_SUCCESS) {
    *algorithm = alg->name;
    *segment_bytes = seg;
  }
  return rc;
}

int mpiar__timeout_ms(int per_call, long *ms) {
  if (per_call > 0) {
    *ms = per_call;
    return MPIAR_SUCCESS;
  }
  if (per_call < 0) {
    *ms = 0;
    return MPIAR_SUCCESS;
  }
  pthread_once(&env_once, read_env);
  if (env_rc != MPIAR_SUCCESS) {
    return mpiar__error(env_rc, "%s", env_detail);
  }
  *ms = env_timeout_ms;
  return MPIAR_SUCCESS;
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
