/*
 * Schedule files as algorithms (docs/schedules.md): the entry of "file:PATH", made once per
 * process and path at its first use, and its verification by the simulator.
 *
 * A file is read once per process (src/tuning/input.c: regular files only, never blocking); a
 * later change of the file is not seen. Its entry is never freed. An entry whose file could not
 * be read or parsed is made all the same, so that every rank reaches the point where the ranks
 * agree on the file (src/core/plan.c) and fails there with the others, each naming its reason.
 *
 * Verification runs every rank's steps in the simulator at the file's smallest counts (one and
 * two elements per chunk: the steps of any other count are the same steps scaled): every message
 * matched with the same length, no hazard, every rank ending with the full reduction of every
 * element (int32 sum exactly, float32 sum and average, bit for bit against the canonical order
 * where the file declares it), once per file and in-place mode, and kept with the entry.
 */
#ifndef MPIAR_SIM_SCHEDFILE_ALG_H
#define MPIAR_SIM_SCHEDFILE_ALG_H

#include <stddef.h>
#include <stdint.h>

#include "algorithms/algorithms.h"
#include "schedule/schedfile.h"

/* The entry of @p path (the same as mpiar__algorithm_find("file:PATH")), or NULL for an empty or
 * too long path. */
const mpiar__algorithm_t *mpiar__schedfile_algorithm(const char *path);

/* The parsed file of a file entry, or NULL with the reason in @p why (not a file entry, the file
 * could not be read or parsed). */
const mpiar__schedfile_t *mpiar__schedfile_of(const mpiar__algorithm_t *alg, char *why,
                                              size_t len);

/* The path of a file entry (its name without "file:"). */
const char *mpiar__schedfile_path(const mpiar__algorithm_t *alg);

/*
 * Can file entry @p alg serve an allreduce on @p nranks ranks of @p count elements, in place or
 * not? The file must have been read, fit the call (mpiar__schedfile_fits) and pass verification
 * (run here the first time, then remembered). @return 1, or 0 with the reason in @p why.
 */
int mpiar__schedfile_fit(const mpiar__algorithm_t *alg, int nranks, size_t count, int in_place,
                         char *why, size_t len);

/* The entry's twin whose builder instantiates the steps without verifying them first (for the
 * simulator's own checks in mpiar-sim --schedule). */
const mpiar__algorithm_t *mpiar__schedfile_unverified(const mpiar__algorithm_t *alg);

/* Install the hook of mpiar__algorithm_find() (done by a constructor; idempotent). */
void mpiar__schedfile_install(void);

#endif /* MPIAR_SIM_SCHEDFILE_ALG_H */
