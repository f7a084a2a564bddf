/* Communicator helpers of every entry point that takes a communicator (core/context.c): the
 * handle check, and the private duplicate made under a deadline. */
#ifndef MPIAR_COMM_CHECK_H
#define MPIAR_COMM_CHECK_H

#include <mpi.h>

/*
 * Check a communicator handle without letting MPI abort on a bad one (MPICH raises an invalid
 * handle on MPI_COMM_WORLD's handler): MPIAR_ERR_COMM, the error detail set, for an invalid
 * handle or an intercommunicator.
 */
int mpiar__check_comm(MPI_Comm comm);

/* How mpiar__comm_idup_wait() ended. */
enum {
  MPIAR__DUP_DONE = 1,         /* *out is the duplicate */
  MPIAR__DUP_TIMEOUT = 0,      /* the deadline passed first */
  MPIAR__DUP_INTERRUPTED = -2, /* the thread's interrupt check asked to stop */
  MPIAR__DUP_MPI_ERROR = -1    /* MPI_Comm_idup or MPI_Test failed */
};

/*
 * MPI_Comm_idup of @p comm, waited for until @p deadline (an MPI_Wtime(); 0: none) or until the
 * thread's interrupt check asks to stop, spinning a little and then yielding the core (at once
 * when @p yield). On a timeout or an interruption *req holds the duplication, which MPI forbids
 * freeing: the caller keeps it (or leaves it to MPI); otherwise *req is MPI_REQUEST_NULL.
 * @return an MPIAR__DUP_ value.
 */
int mpiar__comm_idup_wait(MPI_Comm comm, MPI_Comm *out, MPI_Request *req, double deadline,
                          int yield);

#endif /* MPIAR_COMM_CHECK_H */
