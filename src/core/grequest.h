/*
 * Generalized requests: the hook through which a front end above the core (the kvstore's
 * asynchronous pushpull) hands out requests of its own. Such a request gets a handle like an
 * allreduce's and completes through mpiar_test / mpiar_wait (and their any / all forms): each
 * test, and each round of a wait, calls its poll function; once the poll reports it done, its
 * result is the request's, and the free function releases its state after the result is
 * collected (or never, after MPI_Finalize: the owner's MPI objects are gone too).
 *
 * A generalized request has no communicator, no context and no plan: an interrupted wait leaves
 * it active, and the poll must not block. A persistent one (mpiar__grequest_init) has a start
 * function too: mpiar_start calls it, and a finished one goes back to inactive instead of being
 * freed; mpiar_request_free frees it.
 */
#ifndef MPIAR_GREQUEST_H
#define MPIAR_GREQUEST_H

#include "mpiar.h"

/* Advance @p state; once the request is done, set *done and return its result (the error detail
 * set on failure). */
typedef int (*mpiar__gpoll_fn)(void *state, int *done);

/* Release @p state once its request's result is collected (may be NULL). */
typedef void (*mpiar__gfree_fn)(void *state);

/* Start a persistent generalized request's operation again (the error detail set on failure:
 * the request then stays inactive). */
typedef int (*mpiar__gstart_fn)(void *state);

/* Start an active generalized request of @p poll, @p free_fn and @p state; its handle in *out. */
int mpiar__grequest_start(mpiar__gpoll_fn poll, mpiar__gfree_fn free_fn, void *state,
                          mpiar_request_t *out);

/* Make an inactive persistent generalized request; its handle in *out. */
int mpiar__grequest_init(mpiar__gpoll_fn poll, mpiar__gstart_fn start, mpiar__gfree_fn free_fn,
                         void *state, mpiar_request_t *out);

struct mpiar_request;

/* mpiar_start of a persistent generalized request @p r (inactive): its start function, then
 * active. */
int mpiar__grequest_restart(struct mpiar_request *r);

#endif /* MPIAR_GREQUEST_H */
