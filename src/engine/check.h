/*
 * The argument check (MPIAR_CHECK, check.c) and the two executor functions it shares: the
 * engine's own header, not one for the layers above.
 */
#ifndef MPIAR_ENGINE_CHECK_H
#define MPIAR_ENGINE_CHECK_H

#include <stdint.h>

#include "engine/engine.h"

/* Set up the argument check of a started request (from req->signature). */
void mpiar__check_init(mpiar__request_t *req);

/* One pass of a request's argument check (rounds remain): send, take, combine, and after the
 * last round the verdict. @return MPIAR_SUCCESS, or the mismatch (r->check_failed set) or the
 * transport's error. */
int mpiar__check_pass(mpiar__request_t *r, int *progressed);

/* A transport call named @p what failed with the transport's error @p err: the error, its
 * detail naming the rank, the operation and the step. */
int mpiar__tx_error(int err, const char *what, const mpiar__request_t *r, uint32_t step);

/*
 * The next message from @p source with @p tag, held or in the transport's queue: 1 if taken, 0
 * if none yet, or minus the transport's error code (errors are never 0).
 */
int mpiar__take_message(mpiar__engine_t *e, int source, int tag, mpiar__held_t *out);

#endif /* MPIAR_ENGINE_CHECK_H */
