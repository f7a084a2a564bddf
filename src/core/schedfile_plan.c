/*
 * Schedule files under MPI (schedfile_plan.h): the agreement before a file's plan is built.
 */
#include <inttypes.h>
#include <stdio.h>

#include "core/schedfile_plan.h"
#include "sim/schedfile_alg.h"

int mpiar__schedfile_plan_agree(mpiar__context_t *ctx, const mpiar__plan_key_t *key) {
  const mpiar__algorithm_t *alg = key->builder;
  if (key->coll != MPIAR__COLL_ALLREDUCE || alg == NULL || !(alg->flags & MPIAR__ALG_FILE)) {
    return MPIAR_SUCCESS;
  }
  char why[640];
  const int ok = mpiar__schedfile_fit(alg, ctx->eng.size, key->count, key->in_place, why,
                                      sizeof why);
  char ignored[8];
  const mpiar__schedfile_t *f = mpiar__schedfile_of(alg, ignored, sizeof ignored);
  const uint64_t hash = f != NULL ? f->hash : 0;
  /* The largest hash and the largest complement (the smallest hash), and the lowest rank that
   * cannot use its file, all by one maximum. */
  uint64_t v[3] = {hash, ~hash, ok ? 0 : UINT64_MAX - (uint64_t)ctx->eng.rank};
  const mpiar__settings_t *set = NULL;
  mpiar__settings(&set);
  int rc = mpiar__context_allreduce(ctx, v, 3, MPIAR_UINT64, MPIAR_MAX,
                                    mpiar__deadline_ms(0, set));
  if (rc != MPIAR_SUCCESS) {
    return rc;
  }
  if (!ok) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG, "%s: %s (rank %d of %d)", alg->name, why,
                        ctx->eng.rank, ctx->eng.size);
  }
  if (v[2] != 0) {
    return mpiar__error(MPIAR_ERR_INVALID_ARG,
                        "%s: rank %" PRIu64 " of %d cannot use the file (its error names why)",
                        alg->name, UINT64_MAX - v[2], ctx->eng.size);
  }
  if (v[0] != ~v[1]) {
    return mpiar__error(MPIAR_ERR_MISMATCH,
                        "%s: the file differs between ranks (content hash %016" PRIx64
                        " here; another rank's is %016" PRIx64 ")",
                        alg->name, hash, v[0] != hash ? v[0] : ~v[1]);
  }
  return MPIAR_SUCCESS;
}
