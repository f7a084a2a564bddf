/*
 * Schedule files under MPI: before the plan of a file entry is built, the ranks agree on the
 * file (schedfile_plan.c).
 */
#ifndef MPIAR_CORE_SCHEDFILE_PLAN_H
#define MPIAR_CORE_SCHEDFILE_PLAN_H

#include "core/context.h"

/*
 * For a plan of a schedule file's entry (MPIAR__ALG_FILE; any other key returns at once): every
 * rank checks that its file was read, fits the call and passes verification (once per file and
 * in-place mode), then one allreduce of the context compares the content hashes and the
 * verdicts. @return MPIAR_SUCCESS on every rank, or on every rank an error naming why: the file
 * differs between ranks (MPIAR_ERR_MISMATCH), or a rank cannot use it (MPIAR_ERR_INVALID_ARG:
 * that rank names its reason, the others the rank).
 */
int mpiar__schedfile_plan_agree(mpiar__context_t *ctx, const mpiar__plan_key_t *key);

#endif /* MPIAR_CORE_SCHEDFILE_PLAN_H */
