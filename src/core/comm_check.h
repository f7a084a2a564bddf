/* The communicator check of every entry point that takes a communicator (core/context.c). */
#ifndef MPIAR_COMM_CHECK_H
#define MPIAR_COMM_CHECK_H

#include <mpi.h>

/*
 * Check a communicator handle without letting MPI abort on a bad one (MPICH raises an invalid
 * handle on MPI_COMM_WORLD's handler): MPIAR_ERR_COMM, the error detail set, for an invalid
 * handle or an intercommunicator.
 */
int mpiar__check_comm(MPI_Comm comm);

#endif /* MPIAR_COMM_CHECK_H */
