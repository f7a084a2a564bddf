/*
 * The calling thread's interrupt check (mpiar_set_interrupt()): every wait of the library, the
 * kvstore's included, asks it now and then whether to abandon the wait.
 */
#ifndef MPIAR_INTERRUPT_H
#define MPIAR_INTERRUPT_H

#include "mpiar.h"

#include "base/common.h"

/* The calling thread's interrupt check, or NULL (core/request.c). */
extern _Thread_local mpiar_interrupt_fn mpiar__interrupt_fn;

/* Has the calling thread's interrupt check asked to abandon the wait? Calls it at most every
 * 20 ms; 0 without one. */
int mpiar__interrupt_due(void);
static inline int mpiar__interrupted(void) {
  return MPIAR__UNLIKELY(mpiar__interrupt_fn != NULL) && mpiar__interrupt_due();
}

#endif /* MPIAR_INTERRUPT_H */
